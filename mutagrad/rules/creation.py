"""Creation functions: zeros_like, ones_like, empty_like, full_like.

Inside differentiation they return traced, writable buffers (inactive until
a traced value is written into them), wrapped at every active level so a
write of any traced value is recorded. Outside they are NumPy's own.
"""
from __future__ import annotations

import numpy as np

from ..core import FUNCTIONS, active_levels, bottom, lift, write


def _like(fn):
    def handler(args, kwargs):
        a = dict(zip(("a", "dtype", "order", "subok", "shape"), args))
        a.update(kwargs)
        proto = bottom(a.pop("a"))
        res = fn(proto, **{k: v for k, v in a.items()})
        return lift(res, active_levels())

    FUNCTIONS[fn] = handler


for _f in (np.zeros_like, np.ones_like, np.empty_like):
    _like(_f)


def _full_like(args, kwargs):
    a = dict(zip(("a", "fill_value", "dtype", "order", "subok", "shape"), args))
    a.update(kwargs)
    proto = bottom(a.pop("a"))
    fill = a.pop("fill_value")
    res = lift(np.empty_like(proto, **a), active_levels())
    if getattr(res, "dtype", None) is not None and np.dtype(res.dtype).kind in "fc":
        write(res, Ellipsis, fill)
    else:
        res[...] = bottom(fill)
    return res


FUNCTIONS[np.full_like] = _full_like
