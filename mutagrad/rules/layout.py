"""The memory layout of NumPy's own result, for rules that compute theirs otherwise.

A result's layout is seen: ``r.reshape(-1)`` is a view of a C-ordered ``r`` and a
copy of another, so a write through it reaches ``r`` or not, and ``ravel(order='K')``
lists its elements in memory order. Where a rule computes a function's result as a
composite (a broadcast, a gather, a transpose), its layout can differ from the one
NumPy's own code makes: NumPy's is restored here, after the rule, from how NumPy
lays that function's result out (read off its source):

* ``"C"``: a new C-ordered array (``np.repeat``, ``np.take``, ``np.select``, and
  ``np.meshgrid``'s copies);
* ``"FNC"``: Fortran order if the first argument is Fortran- and not C-contiguous,
  else C (``np.pad``, ``np.insert``: ``order = 'F' if arr.flags.fnc else 'C'``);
* ``"K"``: ``np.empty_like`` of the first argument (``np.gradient``).
"""
from __future__ import annotations

import numpy as np

from ..core import FUNCTIONS, ArrayTracer, bottom, numpy_layout

_POLICIES = {np.repeat: "C", np.take: "C", np.select: "C", np.meshgrid: "C",
             np.pad: "FNC", np.insert: "FNC", np.gradient: "K"}


def _target(policy, res, first):
    b = bottom(res)
    if policy == "C":
        return np.empty(b.shape, b.dtype).strides
    f = bottom(first)
    if policy == "FNC":
        fnc = isinstance(f, np.ndarray) and f.flags.fnc
        return np.empty(b.shape, b.dtype, order="F" if fnc else "C").strides
    if isinstance(f, np.ndarray) and f.shape == b.shape:  # "K"
        return np.empty_like(f, dtype=b.dtype).strides
    return np.empty(b.shape, b.dtype).strides


def _with_numpy_layout(func, handler, policy):
    def laid_out(args, kwargs):
        res = handler(args, kwargs)
        if kwargs.get("out") is not None or (func is np.meshgrid and not kwargs.get("copy", True)):
            return res  # (into out=, or meshgrid's broadcast views: NumPy's own layout)
        first = args[0] if args else None
        if type(res) is ArrayTracer:
            return numpy_layout(res, _target(policy, res, first)) if res.ndim > 1 else res
        if type(res) in (list, tuple):
            return type(res)(numpy_layout(r, _target(policy, r, first)) if type(r) is ArrayTracer and r.ndim > 1
                             else r for r in res)
        return res

    return laid_out


def wrap_rules():
    """Wrap the rules of the functions above (called once they are all registered)."""
    for f, policy in _POLICIES.items():
        if f in FUNCTIONS:
            FUNCTIONS[f] = _with_numpy_layout(f, FUNCTIONS[f], policy)
