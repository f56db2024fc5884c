"""Creation functions: zeros_like, ones_like, empty_like, full_like;
logspace and geomspace.

Inside differentiation the ``*_like`` functions return traced, writable
buffers (inactive until a traced value is written into them), wrapped at
every active level so a write of any traced value is recorded. Outside they
are NumPy's own. logspace and geomspace follow NumPy's arithmetic on traced
endpoints (and base).
"""
from __future__ import annotations

import numpy as np

from ..core import FUNCTIONS, Tracer, active_levels, bottom, lift


def _levels_for(x):
    """The levels a new buffer like ``x`` is traced at: those of the code running; in a worker
    thread the function started (which runs no level itself), those ``x`` is traced at."""
    levels = active_levels()
    if levels or not isinstance(x, Tracer):
        return levels
    found = []
    while isinstance(x, Tracer):
        if not x._level.closed:
            found.append(x._level)
        x = x._value
    return found[::-1]


def _like(fn):
    def handler(args, kwargs):
        a = dict(zip(("a", "dtype", "order", "subok", "shape"), args))
        a.update(kwargs)
        x = a.pop("a")
        res = fn(bottom(x), **{k: v for k, v in a.items()})
        return lift(res, _levels_for(x))

    FUNCTIONS[fn] = handler


for _f in (np.zeros_like, np.ones_like, np.empty_like):
    _like(_f)


def _full_like(args, kwargs):
    a = dict(zip(("a", "fill_value", "dtype", "order", "subok", "shape"), args))
    a.update(kwargs)
    x = a.pop("a")
    fill = a.pop("fill_value")
    res = lift(np.empty_like(bottom(x), **a), _levels_for(x))
    if getattr(res, "dtype", None) is not None and np.dtype(res.dtype).kind in "fc":
        np.copyto(res, fill, casting="unsafe")  # (as NumPy: a complex fill of a real array keeps the real part)
    else:
        res[...] = bottom(fill)
    return res


FUNCTIONS[np.full_like] = _full_like


# -- logspace, geomspace: differentiable in their endpoints ---------------------------------


def _call_args(args, kwargs, names):
    a = dict(zip(names, args))
    a.update(kwargs)
    return a


def _ndmin(v, n):
    if isinstance(v, Tracer):
        return np.reshape(v, (1,) * (n - np.ndim(v)) + np.shape(v))
    return np.array(v, copy=None, subok=True, ndmin=n)


def _np_logspace(args, kwargs):
    a = _call_args(args, kwargs, ("start", "stop", "num", "endpoint", "base", "dtype", "axis"))
    start, stop, base, axis = a["start"], a["stop"], a.get("base", 10.0), a.get("axis", 0)
    if not isinstance(base, (float, int)) and np.ndim(base):
        # a non-scalar base broadcasts with the others (which decides where axis is)
        n = len(np.broadcast_shapes(np.shape(start), np.shape(stop), np.shape(base)))
        start, stop, base = (_ndmin(v, n) for v in (start, stop, base))
        base = np.expand_dims(base, axis=axis)
    y = np.linspace(start, stop, num=a.get("num", 50), endpoint=a.get("endpoint", True), axis=axis)
    res = np.power(base, y)
    dtype = a.get("dtype")
    return res if dtype is None else res.astype(dtype, copy=False)


def _np_geomspace(args, kwargs):
    """NumPy's algorithm: logspace between the logarithms of the endpoints
    turned onto the positive real axis, the endpoints themselves written at
    the ends. The turn (the sign of start) is a constant: the result,
    start^(1-t) stop^t, does not depend on it."""
    from ..numpy import asarray

    a = _call_args(args, kwargs, ("start", "stop", "num", "endpoint", "dtype", "axis"))
    num, endpoint, axis = a.get("num", 50), a.get("endpoint", True), a.get("axis", 0)
    start, stop = asarray(a["start"]), asarray(a["stop"])
    if np.any(bottom(start) == 0) or np.any(bottom(stop) == 0):
        raise ValueError("Geometric sequence cannot include zero")
    dt = np.result_type(bottom(start), bottom(stop), float(num), np.zeros((), a.get("dtype")))
    dtype = dt if a.get("dtype") is None else np.dtype(a["dtype"])
    start, stop = start.astype(dt), stop.astype(dt)
    sign = np.sign(bottom(start))
    start, stop = start / sign, stop / sign
    result = _np_logspace((np.log10(start), np.log10(stop)), {"num": num, "endpoint": endpoint, "dtype": dt})
    if num > 0:
        result[0] = start
        if num > 1 and endpoint:
            result[-1] = stop
    result = result * sign
    if axis != 0:
        result = np.moveaxis(result, 0, axis)
    return result.astype(dtype, copy=False)


FUNCTIONS[np.logspace] = _np_logspace
FUNCTIONS[np.geomspace] = _np_geomspace
