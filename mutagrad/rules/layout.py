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
* ``"K"``: ``np.empty_like`` of the first argument (``np.gradient``);
* ``"KR"``: a reduction over ``axis`` keeping the order of the first argument's other
  axes in memory (``np.median``, whose partition keeps the argument's layout);
* ``"ORDER"``: as the ``order=`` keyword asks, if given (``np.einsum``, ``np.clip``; ufuncs take it in
  ``elementwise.ufunc_call``);
* ``"P"``: NumPy's own call on the plain values, whose layout is taken (functions whose
  layout depends on their arguments in ways not worth restating: np.unwrap, np.delete,
  np.tile, np.choose, np.partition, np.vander, np.nanpercentile...; an extra computation,
  on functions that are not on hot paths).
"""
from __future__ import annotations

import numpy as np

from ..core import FUNCTIONS, ArrayTracer, bottom, numpy_layout
from .elementwise import _ordered

_POLICIES = {np.repeat: "C", np.take: "C", np.select: "C", np.meshgrid: "C",
             np.pad: "FNC", np.insert: "FNC", np.gradient: "K", np.median: "KR",
             np.unwrap: "P", np.delete: "P", np.tile: "P", np.choose: "P", np.partition: "P", np.vander: "P",
             np.nanpercentile: "P", np.nanquantile: "P", np.linalg.matrix_power: "P",
             np.einsum: "ORDER", np.clip: "ORDER"}
for _name in ("cumulative_sum", "cumulative_prod"):
    if hasattr(np, _name):
        _POLICIES[getattr(np, _name)] = "P"


def _plain(x):
    t = type(x)
    if t is list or t is tuple:
        return t(_plain(v) for v in x)
    return bottom(x)


def _target(policy, res, first, args=(), kwargs=None):
    b = bottom(res)
    if policy == "KR":
        f = bottom(first)
        if not isinstance(f, np.ndarray):
            return np.empty(b.shape, b.dtype).strides
        axis = kwargs.get("axis", args[1] if len(args) > 1 else None)
        axes = range(f.ndim) if axis is None else [a % f.ndim for a in np.atleast_1d(axis)]
        k = np.empty_like(f).strides  # (the argument's axes in memory order, K)
        kept = [k[d] if d not in axes else 0 for d in range(f.ndim)]
        strides = kept if b.ndim == f.ndim else [s for d, s in enumerate(kept) if d not in axes]
        return strides if len(strides) == b.ndim else np.empty(b.shape, b.dtype).strides
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
        if policy == "ORDER":
            order = kwargs.get("order")
            if order in (None, "K") or (func is np.einsum and type(res) is ArrayTracer and any(
                    isinstance(a, ArrayTracer) and np.may_share_memory(bottom(res), bottom(a)) for a in args[1:])):
                return res  # (np.einsum("ij->ji", a, order="C") is a view of a, as NumPy returns it)
            return _ordered(res, order, args)
        if policy == "P":
            if type(res) is not ArrayTracer or res.ndim < 2:
                return res
            plain_args = _plain(list(args))
            if kwargs.get("overwrite_input") or (func in (np.nanpercentile, np.nanquantile) and len(args) > 4
                                                 and args[4]):
                # (NumPy's call would partition the argument's own memory, unrecorded: on copies)
                plain_args = [np.array(a) if isinstance(a, np.ndarray) else a for a in plain_args]
            with np.errstate(all="ignore"):
                want = func(*plain_args, **{k: _plain(v) for k, v in kwargs.items()})
            return numpy_layout(res, want.strides) if np.shape(want) == res.shape else res
        first = args[0] if args else None
        if type(res) is ArrayTracer:
            return numpy_layout(res, _target(policy, res, first, args, kwargs)) if res.ndim > 1 else res
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
