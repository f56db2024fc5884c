"""Elementwise NumPy functions (ufuncs): one line per derivative.

Also the ufunc call protocol itself: ``out=``, ``where=`` and ``dtype=`` are
turned into ordinary traced operations (a computation on the selected
elements followed by a write), so they are differentiated exactly by the
mutation machinery and masked-out elements are never evaluated.
"""
from __future__ import annotations

import math
import sys
import warnings

import numpy as np

from ..core import (
    ZERO_IF_REAL,
    note_cache_key,
    note_tolerance_key,
    note_zero_kink,
    note_equality,
    compared_by_mutagrad,
    FUNCTIONS,
    NESTED_WATCH,
    REGISTRY,
    PYTHON_COMPLEX_ABS,
    RAISES_FP,
    SCALAR_OPS,
    UFUNC_HANDLERS,
    ArrayTracer,
    ScalarTracer,
    Tracer,
    _NOARG,
    _fast_call,
    _no_rule,
    active_levels,
    bind,
    bottom,
    carries_any_derivative,
    get_primitive,
    in_order,
    lift,
    plain_operand,
    plain_operands,
    promotion_operand,
    library_caller,
    scipy_caller,
    view_of,
    where_mask,
    write,
    write_out,
    write_replayed,
)
from .. import core
from ..errors import _MUTAGRAD_DIR, MutationError, NoRuleError, kink_warning, loop_control_test, user_frame, user_line
from ..registry import (_FP_KEYS, EagerPartial, UserFPErrors, defelementwise, defnotimplemented, defzero, fp_event_as_numpy,
                        reciprocal, strong_times)
from ..tangents import ZeroTangent
from ..tape import POWERS, _tie_moves, plain_exponent

ZERO = ZeroTangent()


def _astype(x, dtype):
    """``x`` in ``dtype`` for a ufunc's dtype=: itself where it has that dtype (NumPy's loop reads it
    in place, strided, with the bits of a call without dtype=; a copy would give the contiguous loop's)."""
    if np.result_type(bottom(x)) == np.dtype(dtype):
        return x
    from .shape import astype

    return astype(x, dtype)


def _ordered(res, order, inputs):
    """A ufunc's (or einsum's) new result in the layout ``order`` asks: 'C', 'F', or 'A' (F if every
    array operand is Fortran- and not C-contiguous, else C)."""
    if order == "A":
        arrays = [bottom(x) for x in inputs if np.ndim(bottom(x)) >= 2]
        order = "F" if arrays and all(b.flags.fnc for b in arrays) else "C"
    if isinstance(res, tuple):
        return tuple(in_order(r, order) for r in res)
    return in_order(res, order)


# the core dimensions of NumPy's matrix gufuncs, per operand and output (their N-d forms)
_GUFUNC_CORES = {np.matmul: (2, 2, 2), np.vecdot: (1, 1, 0)}
if hasattr(np, "matvec"):
    _GUFUNC_CORES.update({np.matvec: (2, 1, 1), np.vecmat: (1, 2, 1)})


def _on_core_axes(ufunc, inputs, kwargs):
    """``ufunc(*inputs, axes=..., axis=..., keepdims=...)`` of a matrix gufunc: the operands' core
    axes moved last, the gufunc on them, the output's core axes moved where ``axes`` puts them (and,
    with keepdims, the reduced axis kept where the operands had it), all differentiated."""
    cores = _GUFUNC_CORES[ufunc]
    axes, axis, keepdims = kwargs.get("axes"), kwargs.get("axis"), kwargs.get("keepdims", False)
    if any(np.ndim(x) < n for x, n in zip(inputs, cores)):  # (matmul's 1-d operands: no optional axes here)
        raise NoRuleError(f"np.{ufunc.__name__} with axes= or axis= on an operand of fewer dimensions than its "
                          f"core ones, at {user_line()}: move the axes first (np.moveaxis), which is differentiated.")
    if axis is not None:  # (NumPy's errors for axis= with axes=, or with matrices, came from the caller's check)
        axes = [(axis,), (axis,)]
    if axes is None:
        axes = [tuple(range(-n, 0)) for n in cores]
    axes = [tuple(a) if isinstance(a, (tuple, list)) else (a,) for a in axes]
    if len(axes) == 2:
        axes.append((axes[0] if keepdims else ()) if cores[2] == 0 else tuple(range(-cores[2], 0)))
    moved = [np.moveaxis(x, ax, tuple(range(-len(ax), 0))) for x, ax in zip(inputs, axes[:2])]
    res = ufunc(*moved)
    oax = axes[2]
    if cores[2] == 0 and keepdims:
        res = np.expand_dims(res, -1)
    if oax:
        res = np.moveaxis(res, tuple(range(-len(oax), 0)), oax)
    return res


def _one_loop_type(ufunc, signature):
    """The one dtype every operand of ``ufunc``'s loop has in ``signature`` ("dd->d", "d", a tuple of
    dtypes, or a dtype), which dtype= selects as well; None where they differ or some are left open."""
    try:
        if isinstance(signature, str):
            types = [c for c in signature if c not in "->,"] if "->" in signature else [signature] * (
                ufunc.nin + ufunc.nout)
        elif isinstance(signature, (tuple, list)):
            types = list(signature)
        else:
            types = [signature] * (ufunc.nin + ufunc.nout)
        if len(types) != ufunc.nin + ufunc.nout or any(t is None for t in types):
            return None
        dts = {np.dtype(t) for t in types}
    except TypeError:
        return None
    return dts.pop() if len(dts) == 1 else None


def ufunc_call(ufunc, inputs, kwargs):
    prim = REGISTRY.get(ufunc)
    if prim is None:
        raise _no_rule(ufunc, "ufunc")
    if not kwargs:
        return bind(prim, inputs)
    if kwargs.get("out") is not None and _raises_fp():
        return _errors_after_the_write(ufunc, inputs, kwargs)
    kwargs = dict(kwargs)
    out = kwargs.pop("out", None)
    where = kwargs.pop("where", True)
    if where is not True and where is not None and not (type(where) is np.bool_ and where) and _scipy_ufunc(ufunc):
        raise MutationError(
            f"scipy.special.{ufunc.__name__}(..., where=...) at {user_line()}: SciPy's special-function ufuncs "
            "write other elements than where= names (SciPy 1.17: the mask is misread, and memory may be "
            "corrupted), so the result cannot be the function NumPy's where= describes. Compute it on every "
            f"element and select: np.where(mask, scipy.special.{ufunc.__name__}(x), out).")
    dtype = kwargs.pop("dtype", None)
    if "signature" in kwargs:  # (NumPy's own error for a signature it refuses, on 0-d stand-ins)
        with np.errstate(all="ignore"):
            ufunc(*[np.zeros((), np.result_type(bottom(x))) if isinstance(x, (Tracer, np.ndarray, np.generic)) else x
                    for x in inputs], signature=kwargs["signature"], **({} if dtype is None else {"dtype": dtype}))
    if "signature" in kwargs and dtype is None:
        loop = _one_loop_type(ufunc, kwargs["signature"])
        if loop is not None:  # ("dd->d", (np.float64, np.float64)): every operand in one type, as dtype= asks
            del kwargs["signature"]
            dtype = loop
    casting = kwargs.pop("casting", "same_kind")
    order = kwargs.pop("order", "K")
    kwargs.pop("subok", None)
    if order not in (None, "K") and out is None:  # NumPy lays a new result out as order= asks
        res = ufunc_call(ufunc, inputs, dict(kwargs, where=where, dtype=dtype, casting=casting))
        return _ordered(res, order, inputs)
    if (ufunc is np.matmul and "axes" in kwargs and all(np.ndim(x) >= 2 for x in inputs)
            and [tuple(a) for a in kwargs["axes"]] == [(-2, -1)] * 3):
        del kwargs["axes"]  # (what ndarray's a @= b passes: the last two axes, matmul's own)
    if kwargs and ufunc in _GUFUNC_CORES and set(kwargs) <= {"axes", "axis", "keepdims"} and where is True and (
            len(inputs) == 2):
        with np.errstate(all="ignore"):  # (NumPy's own errors for the axes, on stand-ins of the shapes)
            ufunc(*[np.zeros(np.shape(bottom(x)), np.result_type(bottom(x))) for x in inputs], **kwargs,
                  **({} if dtype is None else {"dtype": dtype}))
        if dtype is not None:
            inputs = tuple(_astype(x, dtype) if hasattr(x, "dtype") else np.asarray(x, dtype) for x in inputs)
        res = _on_core_axes(ufunc, inputs, kwargs)
        return res if out is None else write_out(res, out[0] if type(out) is tuple else out)
    if "signature" in kwargs:
        raise TypeError(f"np.{ufunc.__name__}: a signature= of several loop types is not supported on traced arrays "
                        f"(at {user_line()}). Cast the operands with x.astype(dtype) and pass dtype= for the loop "
                        "(a signature of one type, \"dd->d\", is dtype=np.float64), which are differentiated.")
    if kwargs:
        raise TypeError(f"np.{ufunc.__name__}: keyword arguments {sorted(kwargs)} are not supported on traced arrays "
                        f"(at {user_line()}). Apply the operation without them, then reshape or move axes.")
    if out is not None and any(o is not None and not (isinstance(o, (Tracer, np.ndarray)))
                               for o in (out if type(out) is tuple else (out,))):
        # (NumPy's error for a number where out= goes: np.exp(x, 0.3))
        raise TypeError("return arrays must be of ArrayType")
    if (out is not None or dtype is not None or casting != "same_kind") and _may_miscast(inputs, out, dtype, casting):
        _check_casting(ufunc, inputs, out, dtype, casting)
    given = inputs  # (before a cast to dtype=, which copies)
    if dtype is not None:
        inputs = tuple(_astype(x, dtype) if hasattr(x, "dtype") else np.asarray(x, dtype) for x in inputs)
    if out is not None and type(out) is not tuple:
        out = (out,)
    if out is not None and all(o is None for o in out):
        out = None
    if out is not None and ufunc.signature is None:  # (a gufunc's core dimensions are its own)
        _check_out_shapes(ufunc, inputs, out, where)
    if out is not None and ufunc.nout > 1:
        outs = [bottom(o) for o in out if o is not None]
        if any(np.shares_memory(outs[i], outs[j]) for i in range(len(outs)) for j in range(i)):
            raise MutationError(
                f"np.{ufunc.__name__}(..., out=...) at {user_line()} writes its outputs into memory they "
                "share; which output's value survives then depends on NumPy's loop order, which mutagrad "
                "does not follow. Give each output its own array."
            )
    if out is not None and ufunc.nout > 1 and any(o is None for o in out):
        # (an output left to NumPy has the shape the given ones broadcast the inputs to)
        full = np.broadcast_shapes(*[getattr(x, "shape", ()) for x in inputs], *[o.shape for o in out if o is not None])
        inputs = tuple(np.broadcast_to(x, full) if hasattr(x, "shape") and x.shape != full else x for x in inputs)
    if where is True:
        if out is not None and ufunc.nout == 1:  # NumPy's own in-place call: its bits, whatever the loop
            r = _into(ufunc, inputs, out[0])
            if r is None and ufunc in PRODUCT_INTO and dtype is None and casting == "same_kind":
                r = PRODUCT_INTO[ufunc](inputs, out[0])  # (M @= T: the product computed once, NumPy's call)
            if r is not None:
                return r
        res = bind(prim, inputs)
        if out is None:
            return res
        if ufunc.nout == 1:
            _write_result(ufunc, inputs, out[0], Ellipsis, res, True, casting)
            return out[0]
        return tuple(write_out(r, o) for o, r in zip(out, res))
    where = bottom(where)
    shapes = [np.shape(x) for x in inputs] + [np.shape(where)]
    if out is not None:
        shapes += [np.shape(o) for o in out if o is not None]
    shape = np.broadcast_shapes(*shapes)
    m = np.broadcast_to(where_mask(where), shape)
    # (a Python number stays one: NumPy treats it as weakly typed, float32 * 0.61 is float32)
    sel = tuple(x if type(x) in (int, float, complex) or not (np.ndim(x) or shape)
                else np.broadcast_to(x, shape)[m] for x in inputs)
    if not shape and not m:  # (a 0-d call where= leaves out: NumPy computes nothing, so warns of nothing:
        with np.errstate(all="ignore"):  # np.divide(np.sin(n), n, out=s, where=n > 0) at n = 0, rotations)
            res = bind(prim, sel)
    else:
        res = bind(prim, sel)
    if ufunc.nout == 1:
        res, out0 = (res,), (out[0] if out is not None else None,)
    else:
        out0 = out if out is not None else (None,) * ufunc.nout
    dests = []
    for o, r in zip(out0, res):
        if (o is not None and not m.all() and np.result_type(bottom(r)) != np.result_type(bottom(o))
                and not np.can_cast(np.result_type(bottom(o)), np.result_type(bottom(r)), "safe")
                and any(np.may_share_memory(bottom(o), bottom(x)) for x in given if hasattr(x, "dtype"))):
            # (an out whose dtype the loop's holds exactly, float32 in a float64 loop, comes back unchanged)
            from ..errors import NoRuleError

            raise NoRuleError(
                f"np.{ufunc.__name__}(..., out=..., where=...) at {user_line()}: out shares memory with an input "
                f"and has another dtype ({np.result_type(bottom(o))}) than the loop ({np.result_type(bottom(r))}): "
                "NumPy then passes the elements the mask leaves through the loop's dtype too (a complex out "
                "loses their imaginary parts, a float64 out is rounded to float32), which mutagrad does not "
                f"follow. Compute into a new array and copy the selected elements: np.copyto(out, "
                f"np.{ufunc.__name__}(...), where=mask).")
        if o is None:
            o = lift(np.zeros(shape, np.result_type(bottom(r))), active_levels())
            write(o, m, r)
        elif ufunc.nout == 1:
            _write_result(ufunc, inputs, o, m, r, where, casting)
        else:
            write(o, m, r)
        dests.append(o)
    return dests[0] if ufunc.nout == 1 else tuple(dests)


# ufunc -> f(inputs, out): ufunc(*inputs, out=out) computed by NumPy's own call into out, its value then given to
# the rules (rules/linalg.py product_into: np.matmul), or None
PRODUCT_INTO: dict = {}


# Correctly rounded (or exact) operations give the same bits whatever loop
# NumPy picks; for the others (sin, exp, power...) NumPy's SIMD and strided
# loops may differ in the last bit, so an in-place call is replayed exactly.
_LAYOUT_INDEPENDENT = frozenset((
    np.add, np.subtract, np.multiply, np.true_divide, np.negative, np.positive, np.absolute, np.fabs,
    np.sqrt, np.square, np.reciprocal, np.maximum, np.minimum, np.fmax, np.fmin, np.copysign, np.floor,
    np.ceil, np.trunc, np.rint, np.sign, np.conjugate, np.fmod, np.ldexp, np.heaviside,
))


def _probe(x):
    """A one-element stand-in of ``x`` for NumPy's type resolution (NEP 50: only Python
    numbers, and weak traced scalars, are weak; shapes and values do not count)."""
    v = promotion_operand(x)
    if type(v) in (int, float, complex, bool):
        return v
    return np.empty((1,) * np.ndim(v), np.result_type(v))  # (ones: the core dimensions of a gufunc)


def _may_miscast(inputs, out, dtype, casting) -> bool:
    """False for the common in-place call (``u += v``: one ``out=`` of the dtype of every
    array argument, real Python numbers, the default casting), which NumPy always accepts."""
    if dtype is not None or casting != "same_kind":
        return True
    if type(out) is tuple:
        if len(out) != 1:
            return True
        out = out[0]
    od = getattr(bottom(out), "dtype", None)
    if od is None:
        return True
    for x in inputs:
        t = type(x)
        if t is float or t is int:
            if od.kind not in "fc":
                return True
        else:
            d = getattr(bottom(x), "dtype", None)
            if d is None or d != od:  # (not `None != od`: NumPy reads None as float64)
                return True
    return False


def _check_casting(ufunc, inputs, out, dtype, casting):
    """Raise what NumPy raises for this call's casting (``out=`` of a kind the
    result cannot be cast to under ``casting``, ``dtype=`` the inputs cannot be
    cast to), by NumPy's own check on one-element stand-ins."""
    outs = None
    if out is not None:
        outs = tuple(None if o is None else np.empty((1,) * np.ndim(o), np.result_type(bottom(o))) for o in
                     (out if type(out) is tuple else (out,)))
    kw = {} if dtype is None else {"dtype": dtype}
    if outs is not None:  # (out=None to a ufunc of two outputs: NumPy 2.4 wants a tuple)
        kw["out"] = outs
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (a ComplexWarning: the call itself warns)
        ufunc(*(_probe(x) for x in inputs), casting=casting, **kw)


def _check_out_shapes(ufunc, inputs, out, where):
    """NumPy's error for an ``out=`` the inputs broadcast beyond (``x[:2] -= v.reshape(1, 2)``:
    "non-broadcastable output operand"), on zero-filled stand-ins of the shapes."""
    oshapes = [o.shape for o in out if o is not None]
    shapes = [getattr(x, "shape", ()) for x in inputs]  # (np.shape of a traced array would dispatch)
    if where is True and len(oshapes) == 1 and all(sh == oshapes[0] or sh == () for sh in shapes):
        return  # (the common case: operands of out's shape, or numbers)
    shapes += oshapes
    if where is not True:
        shapes.append(np.shape(bottom(where)))
    try:
        full = np.broadcast_shapes(*shapes)
    except ValueError:
        full = None
    if full is None or any(sh != full for sh in oshapes):
        with np.errstate(all="ignore"):
            ufunc(*[np.zeros(getattr(x, "shape", ()), np.result_type(bottom(x))) if hasattr(x, "dtype")
                    else type(x)(0) for x in inputs],
                  out=tuple(None if o is None else np.zeros(o.shape, np.result_type(bottom(o))) for o in out),
                  **({} if where is True else {"where": where_mask(where)}))


def _into(ufunc, inputs, dest):
    """``ufunc(*inputs, out=dest)`` computed in place, as NumPy does, when the
    fast path takes it (one reverse-mode level, ``dest`` all of one of its
    arrays); None otherwise."""
    if type(dest) is not ArrayTracer or dest._geom is not None or not 0 < len(inputs) <= 2:
        return None
    return _fast_call(ufunc, dest, inputs[0], inputs[1] if len(inputs) == 2 else _NOARG, None, dest)


# complex products and quotients are not correctly rounded: NumPy's in-place loop (out=
# an input) and its SIMD loop may differ in the last bit; these stay exact for complex too
_COMPLEX_EXACT = frozenset((np.add, np.subtract, np.negative, np.positive, np.conjugate))


def _raises_fp() -> bool:
    """Whether a floating-point event would raise here: the user's np.errstate, or, inside
    jvp (whose error call is a UserFPErrors), the one in force before it. (Remembered for the
    error state in force, NumPy's context variable's value: a new errstate sets a new one.)"""
    now = _EXTOBJ.get() if _EXTOBJ is not None else None
    seen = _RAISES_SEEN[0]
    if now is not None and seen[0] is now:
        return seen[1]
    e = np.geterr()
    c = np.geterrcall()
    r = "raise" in e.values() or (type(c) is UserFPErrors and any(  # (nested: through the outer handlers)
        e[k] == "call" and c.resolved(k)[0] == "raise" for k in _FP_KEYS.values()))
    if now is not None:
        _RAISES_SEEN[0] = (now, r)  # (one tuple, replaced whole: threads read a consistent pair)
    return r


_EXTOBJ = getattr(getattr(np._core, "_ufunc_config", None), "_extobj_contextvar", None)
_RAISES_SEEN = [(None, False)]  # (NumPy's error state object, whether it raises); holding it keeps its id unique


RAISES_FP[0] = _raises_fp


def _errors_after_the_write(ufunc, inputs, kwargs):
    """``ufunc(*inputs, out=...)`` where an error state raises: NumPy writes all of ``out``
    and raises afterwards, so a program that catches the FloatingPointError goes on with
    ``out`` written. The call runs with the events recorded, then they are handled as the
    error state says, in NumPy's order."""
    modes, handler = np.geterr(), np.geterrcall()
    seen = {}
    with np.errstate(all="call", call=lambda kind, flag: seen.setdefault(kind, flag)):
        res = ufunc_call(ufunc, inputs, kwargs)
    for kind, key in _FP_KEYS.items():  # (NumPy's order)
        if kind not in seen:
            continue
        mode, call = modes[key], handler
        if mode == "call" and type(handler) is UserFPErrors:  # (inside jvp: the modes before it)
            mode, call = handler.resolved(key)
        fp_event_as_numpy(mode, call, kind, seen[kind], f"{kind} encountered in {ufunc.__name__}", stacklevel=4)
    return res


_SCIPY_UFUNCS: list = []  # [the ids of scipy.special's ufuncs], once scipy.special is imported


def _scipy_ufunc(ufunc) -> bool:
    """Whether ``ufunc`` is one of scipy.special's (not NumPy's)."""
    if getattr(np, ufunc.__name__, None) is ufunc:
        return False
    import sys

    special = sys.modules.get("scipy.special")
    if special is None:
        return False
    if not _SCIPY_UFUNCS:
        _SCIPY_UFUNCS.append(frozenset(id(v) for v in vars(special).values() if isinstance(v, np.ufunc)))
    return id(ufunc) in _SCIPY_UFUNCS[0]


def _write_result(ufunc, inputs, out, idx, res, where, casting="same_kind"):
    """``out[idx] = res`` for ``ufunc(*inputs, out=out, where=where, casting=casting)``,
    leaving in ``out`` the very bits NumPy's own in-place call would leave."""
    if ufunc in _LAYOUT_INDEPENDENT and (ufunc in _COMPLEX_EXACT or not (
            np.result_type(bottom(out)).kind == "c" or any(np.iscomplexobj(bottom(x)) for x in inputs))):
        write(out, idx, res)
        return
    kw = {} if where is True else {"where": where}
    if casting != "same_kind":
        kw["casting"] = casting
    write_replayed(out, idx, res, lambda ob: ufunc(*(plain_operand(x) for x in inputs), out=ob, **kw))


_ORDERINGS = (np.greater, np.greater_equal, np.less, np.less_equal)


def _warn_tie(inputs, equality=False):
    """Warn where two differentiated numbers compared for order are equal: the branch the comparison picks
    (Python's max(a, b), an if) gets all of the derivative, a one-sided one, and where both branches meet
    smoothly the result is wrong: the stable log-add max(a, b) + log1p(exp(-|a - b|)) at a == b gets (1, 0)
    for (0.5, 0.5) (the seqdp and survival testers: an HMM's or a Cox model's recursion at zero-initialised
    parameters). Numbers only (one element each): a mask of arrays ties wherever it is taken against an
    element of the array itself (x >= np.sort(x)[-k], x >= np.max(x): the warnnoise tester), and a value
    compared with itself (if f <= best, best = f) is no choice between two; nor two infinities (a
    Bellman-Ford relaxation's d[u] + c < d[v] at +inf: the graphs tester), which have no derivative to split."""
    a, b = inputs
    if not (carries_any_derivative(a) and carries_any_derivative(b)) or np.size(a) != 1 or np.size(b) != 1 or (
            a is b or (a._storage is b._storage and a._geom is None and b._geom is None)) or (
            a._level.closed or b._level.closed):  # (a value an earlier differentiation left: a constant here,
        return  # a best-so-far kept in a dict: the regress102 tester)
    with np.errstate(invalid="ignore"):
        ab = np.asarray(bottom(a))
        tie = np.any((ab == np.asarray(bottom(b))) & np.isfinite(ab))
    if tie:
        if scipy_caller(sys._getframe(1)) is not None or compared_by_mutagrad(sys._getframe(1)):
            # (SciPy's own comparisons, Brent's in minimize_scalar, before it converts: the robuststats tester;
            # a rule's, its convention's)
            return
        if equality and loop_control_test(user_frame(sys._getframe(1))):  # (see _nondiff_call)
            return
        kink_warning("a comparison of two differentiated values that are equal (a tie)", branch=True)


def _note_zero_tie(inputs):
    """A traced value compared for order with a plain 0 and equal to it: its elements there, for np.abs's
    convention meeting the comparison's (core.note_zero_kink). (Checked on every comparison: plain Python tests
    first, an element loop's `if z[i] > 0.1` leaves at the first.)"""
    a, b = inputs
    x, c = (a, b) if isinstance(a, Tracer) else (b, a)
    if not isinstance(x, Tracer) or isinstance(c, Tracer):
        return
    if type(c) is float or type(c) is int:
        if c != 0:
            return
        cb = None
    else:
        cb = np.asarray(c)
        if cb.dtype.kind not in "fiub" or np.all(cb):
            return
    xb = bottom(x)
    if np.iscomplexobj(xb) or np.all(xb):
        return
    mask = np.asarray(xb) == 0 if cb is None else (np.asarray(xb) == 0) & (cb == 0)
    if mask.shape == np.shape(xb) and mask.any() and carries_any_derivative(x) and not (
            compared_by_mutagrad(sys._getframe(1)) or scipy_caller(sys._getframe(1)) is not None):
        note_zero_kink(x, mask, False)


def _warn_equality_tie(inputs):
    """Warn where a differentiated value is tested for equality with a plain number and equals it: the
    branch that test picks holds at this point alone, a guard of a removable singularity (SymPy's
    Piecewise(((exp(k) - 1) / k, Ne(k, 0)), (1, True)), lambdified to select([not_equal(k, 0), True], ...);
    `if x == 0: return 1.0`), and its derivative is the guard's constant's, 0, where the expression has a
    limit (1/2 there: the lambdify tester). Not NumPy's or SciPy's own tests (np.isclose's x == y), nor a
    rule's. (Checked on every equality test: plain Python tests first.)"""
    a, b = inputs
    x, c = (a, b) if isinstance(a, Tracer) else (b, a)
    if not isinstance(x, Tracer) or isinstance(c, Tracer):
        return
    tc = type(c)
    if not (tc is int or tc is float or (isinstance(c, (np.integer, np.floating)))
            or (tc is np.ndarray and c.ndim == 0 and c.dtype.kind in "fiu")):
        return
    xb = bottom(x)  # (an equality test raises no floating-point event: no errstate; the common case, no tie of a
    if type(xb) is np.ndarray:  # number, first: microseconds a test in an element loop)
        # a number's (one element): a mask of an array (p[p != 0] after np.pad, np.sum(h == 0) of a ReLU's output,
        # w[w != 0] of a lasso's) ties at its elements without derivative, and warned always (regress115)
        if xb.size != 1 or xb.dtype.kind not in "fc" or not (xb == c).any():
            return
    elif not isinstance(xb, (float, complex, np.inexact)) or xb != c:
        return
    if not math.isfinite(c):
        return
    _warn_guard(x, c, sys._getframe(1), f"a test of a differentiated value's equality with the constant {c!r}")


def _still_to_first_order(x) -> bool:
    """Whether every level tracing ``x`` is a forward one whose tangent of it is exactly 0: x does not move along
    the directions pushed, so a guard's branches (which agree at the guard's value) have the same first derivative
    there (the tabml tester's `if w_j != 0.0:` in coordinate descent, warned under jvp)."""
    t = x
    while isinstance(t, Tracer):
        lv = t._level
        if lv.mode != "fwd" or not hasattr(lv, "tangent_of"):
            return False
        d = lv.tangent_of(t)
        if not _is_zero(d) and np.any(np.asarray(bottom(d)) != 0):
            return False
        t = t._value
    return True


def _warn_guard(x, c, frame, what):
    if not carries_any_derivative(x) or x._level.closed or _still_to_first_order(x):
        return
    if compared_by_mutagrad(frame) or library_caller(frame) or core._kept_operand(frame, c):
        return  # (a kept number, `if B == self.B:`, is a cache's key: its own warning, api._warn_cached)
    kink_warning(what + " that holds here (a guard: np.where(x == 0, ...), np.select([x != 0, ...]) as SymPy's "
                 "lambdify writes a Piecewise, `if x == 0:`, `if not x:`)", equality=True)


def _truth_tie(x):
    """`if not k:` of a differentiated number that is 0 (Tracer.__bool__): a guard, as `if k == 0:`."""
    b = bottom(x)
    if isinstance(b, (float, complex, np.inexact)) or (type(b) is np.ndarray and b.dtype.kind in "fc"):
        _warn_guard(x, 0, sys._getframe(2), "a truth test of a differentiated number that is 0")


core._TRUTH_TIE[0] = _truth_tie


def _note_search_here(x, c):
    """core.note_search of a comparison of traced ``x`` with plain ``c`` that a ufunc call made, at the user's frame."""
    frame = user_frame(sys._getframe(2))
    if frame is not None:
        core.note_search(x, c, frame)


def _nondiff_call(ufunc, inputs, kwargs):
    """Functions with boolean/integer results: computed on plain values."""
    if ufunc is np.equal or ufunc is np.not_equal:
        note_equality(inputs)
        if len(inputs) == 2:
            _warn_equality_tie(inputs)
            # `if a == b:` of two differentiated numbers at a tie, a guard (a log-mean temperature difference's
            # `if dT1 == dT2: return dT1` gets (1, 0) for (0.5, 0.5): regress118), as `if a < b:` warns; not a
            # loop's control, a Newton loop's `if xn == x: break` at convergence or a pair skip `x[i] == x[j]: continue`
            # at i == j, where the derivative is right at every call (regress117)
            if isinstance(inputs[0], Tracer) and isinstance(inputs[1], Tracer):  # (a constant: no tie of two)
                _warn_tie(inputs, equality=True)
        if len(inputs) == 2 and not kwargs:  # (x == key, or not np.any(x != key): a cache's key)
            res = ufunc(*(plain_operand(x) for x in inputs))
            note_cache_key(inputs, res if ufunc is np.equal else ~np.asarray(res))
            return res
    elif len(inputs) == 2 and ufunc in _ORDERINGS:
        _warn_tie(inputs)
        _note_zero_tie(inputs)
        note_tolerance_key(inputs)
        note_equality(inputs, "order_at")
        if isinstance(inputs[1], Tracer) and not isinstance(inputs[0], Tracer):
            # (a NumPy number's operator, np.float64(price) > x, hands a traced x to the ufunc, as a 0-d array;
            # a traced operand's own operator notes its comparison: core.note_search, as Python's c > x: finance3)
            _note_search_here(inputs[1], inputs[0])
    elif ufunc is np.signbit:  # (a sign test, as x < 0: a bisection on the sign of f, the regress63 tester)
        note_equality(inputs, "order_at")
        if len(inputs) == 1 and isinstance(inputs[0], Tracer):
            _note_search_here(inputs[0], 0.0)  # (not np.signbit(f(mid)): regress134)
    kwargs = dict(kwargs)
    out = kwargs.pop("out", None)
    if "where" in kwargs:
        kwargs["where"] = bottom(kwargs["where"])
    where = kwargs.get("where", True)
    if where is not True and out is not None:
        # the elements where= leaves out keep out's values (and derivatives): NumPy's call
        # without out= leaves them uninitialised, so it is given a plain copy of out
        outs = out if type(out) is tuple else (out,)
        copies = tuple(np.array(bottom(o), copy=True) for o in outs)
        res = ufunc(*(plain_operand(x) for x in inputs), out=copies, **kwargs)
        res = res if ufunc.nout > 1 else (res,)
        for o, r in zip(outs, res):
            mask = np.broadcast_to(where_mask(where), np.shape(o))
            write(o, mask, r[mask])
        return outs[0] if ufunc.nout == 1 else outs
    res = getattr(ufunc, "__call__")(*(plain_operand(x) for x in inputs), **kwargs)  # (weak scalars: NumPy's loop)
    if out is not None:
        out = out if type(out) is tuple else (out,)
        if ufunc.nout == 1:
            write(out[0], Ellipsis, res)
            return out[0]
        return tuple(write_out(r, o) for o, r in zip(out, res))
    return res


UFUNC_HANDLERS[(None, "__call__")] = ufunc_call

NONDIFF_UFUNCS = [
    np.less, np.less_equal, np.greater, np.greater_equal, np.equal, np.not_equal,
    np.logical_and, np.logical_or, np.logical_xor, np.logical_not,
    np.isnan, np.isinf, np.isfinite, np.signbit, np.isnat,
    np.bitwise_and, np.bitwise_or, np.bitwise_xor, np.invert, np.left_shift, np.right_shift,
    np.gcd, np.lcm,
]
for _u in NONDIFF_UFUNCS:
    UFUNC_HANDLERS[(_u, "__call__")] = _nondiff_call


# -- arithmetic --------------------------------------------------------------

def _sq(x):
    return x * x


defelementwise(np.add, 1, 1)
defelementwise(np.subtract, 1, -1)
defelementwise(np.negative, -1)
defelementwise(np.positive, 1)
defelementwise(np.multiply, lambda a, b, y: b, lambda a, b, y: a)
defelementwise(np.true_divide, reciprocal(lambda a, b, y: 1.0 / b, lambda a, b, y: b),
               reciprocal(lambda a, b, y: -y / b, lambda a, b, y: b, lambda a, b, y: -y))
# (-y * y as the quotient -y / x where it overflows: a Sinkhorn scaling 1 / (K @ v) of 1e-160, whose
# cotangent 1e-160 * -y * y is finite; the sinkhorn tester)
defelementwise(np.reciprocal, reciprocal(lambda x, y: -y * y, lambda x, y: x, lambda x, y: -y))
defelementwise(np.square, lambda x, y: 2 * x)
defelementwise(np.sqrt, lambda x, y: 0.5 / y)
# (cbrt's partial as (1/y)² / 3, not 1 / (3 y y): at 0 the tangent of y * y is 0 · inf, a strong
# zero, which made the second derivative 0 where it is -inf; (1/y)²'s is 2 (1/y) · (-inf) = -inf)
defelementwise(np.cbrt, lambda x, y: (1.0 / y) ** 2 / 3.0)


def _pow_dbase(x, p, y):
    # p * x**(p-1). For a constant exponent the power is x**1 where p == 0 (so x = 0 gives
    # 0, not 0 * inf = nan: d(x**0)/dx = 0, and every higher derivative of x**n at 0 stays
    # finite), as autograd writes it. A traced exponent keeps p - 1: the mixed derivative
    # d/dp (p x**(p-1)) at p = 0 is 1/x, which the replaced exponent would get wrong; at
    # x = 0 with p < 1 its terms are inf + p (-inf) (NaN), so there the limits are given:
    # the value p 0**(p-1) (0 at p = 0, as above), its slope in p, x**(p-1) (1 + p log x)
    # -> -inf for 0 < p < 1 and +inf for p <= 0, and in x, p (p-1) x**(p-2) -> -inf, 0, +inf
    if isinstance(p, Tracer):
        d = p * np.power(x, p - 1)
        xb, pb = np.asarray(bottom(x)), np.asarray(bottom(p))
        if xb.dtype.kind in "fiub" and pb.dtype.kind in "fiub":
            low = (xb == 0) & (pb < 1)
            if np.any(low):
                pos = pb > 0
                at0 = _with_slopes(x, p, np.where(pos, np.inf, np.where(pb == 0, 0.0, -np.inf)),
                                   np.where(pos, -np.inf, np.where(pb == 0, 0.0, np.inf)), np.where(pos, -np.inf, np.inf))
                d = np.where(low, at0, d)
        return d
    if type(p) is int or type(p) is float:  # (the common case: a number)
        return p * np.power(x, p - 1 if p != 0 else 1)
    return p * np.power(x, np.where(np.asarray(p) == 0, 1, np.asarray(p) - 1))


def _with_slopes_impl(x, p, value, sx, sp):
    return np.broadcast_to(np.asarray(value, np.result_type(bottom(x), bottom(p), 0.0)),
                           np.broadcast_shapes(np.shape(x), np.shape(p), np.shape(value))).copy()


def _with_slopes(x, p, value, sx, sp):
    """``value`` (a plain array), with derivatives ``sx`` in ``x`` and ``sp`` in ``p`` (plain
    arrays: a partial's limits at a point where its own expression is inf - inf or 0 * inf)."""
    if isinstance(x, Tracer) or isinstance(p, Tracer):
        return bind(_WITH_SLOPES, (x, p, value, sx, sp))
    return _with_slopes_impl(x, p, value, sx, sp)


def _pow_dexp(x, p, y):
    # y * log(x), defined as 0 where x == 0 (the limit for p > 0); at x == 0, p <= 0 the power
    # jumps from 0**0 = 1 to 0 (p > 0) and inf (p < 0): both one-sided quotients go to -inf
    # (for p < 0 the limit of x**p log x is -inf too).
    # At x == 0 the value keeps the limits of its slopes: in x, x**(p-1) (p log x + 1): -inf for
    # 0 < p <= 1, 0 for p > 1, +inf for p <= 0 (a plain 0 had slope 0: the mixed second
    # derivative of x**p at x = 0 was 0, and the Hessian not symmetric); in p, x**p log² x:
    # +inf for p <= 0, else 0
    xb = bottom(x)
    if np.ndim(xb) == 0 and not isinstance(xb, np.ndarray):
        xb = np.asarray(xb)
    safe = np.where(xb == 0, 1.0, x) if np.any(xb == 0) else x
    d = y * np.log(safe)
    if np.any(xb == 0):
        pb = np.asarray(bottom(p))
        jump = (xb == 0) & ((pb == 0) | (pb < 0))  # (p < 0: x**p log x -> -inf as x -> 0 too)
        steep = (pb > 0) & (pb <= 1)
        if np.any((steep | jump) & (xb == 0)):
            at0 = _with_slopes(x, p, np.where(jump, -np.inf, 0.0), np.where(jump, np.inf, np.where(steep, -np.inf, 0.0)),
                               np.where(jump, np.inf, 0.0))
        else:
            at0 = 0.0
        d = np.where(xb == 0, at0, d)
    return d


# (p x**(p-1) as the quotient p y / x where it overflows: x ** -1.0 of 1e-160, as np.reciprocal)
_pow_dbase_q = reciprocal(_pow_dbase, lambda x, p, y: x, lambda x, p, y: p * np.power(x, p))  # (y: not kept)
defelementwise(np.power, _pow_dbase_q, _pow_dexp)
# a value with given slopes in x and p (a partial's limits at a point where its own slope is infinite)
get_primitive(_with_slopes_impl, "with_slopes")  # (internal: no row of docs/coverage.md)
_WITH_SLOPES = defelementwise(_with_slopes_impl, lambda x, p, v, sx, sp, y: sx, lambda x, p, v, sx, sp, y: sp,
                              None, None, None)


def _scalar(v):
    return v[()] if type(v) is np.ndarray and v.ndim == 0 else v


def scalar_power(a, b):
    """``a ** b`` for NumPy scalars: their own arithmetic, whose last bit can
    differ from the ``np.power`` ufunc's (so a traced scalar computes what a
    plain one would)."""
    return _scalar(a) ** _scalar(b)


def _complex_base(x, y):
    """The base as the power saw it: Python's ``a ** b`` of a negative float and a
    fractional exponent is complex (``(-2.0) ** 0.5 == 1.414j``), so its partials
    are those of the complex power, not NaN from the real one."""
    if np.iscomplexobj(bottom(y)) and not np.iscomplexobj(bottom(x)):
        return x + 0j
    return x


get_primitive(scalar_power, "np.float64.__pow__")
defelementwise(scalar_power, reciprocal(lambda x, p, y: _pow_dbase(_complex_base(x, y), p, y), lambda x, p, y: x,
                                        lambda x, p, y: p * scalar_power(_complex_base(x, y), p)),
               lambda x, p, y: _pow_dexp(_complex_base(x, y), p, y))
SCALAR_OPS[np.power] = REGISTRY[scalar_power]
defelementwise(np.float_power, _pow_dbase_q, _pow_dexp)

# -- exponentials and logarithms -------------------------------------------------

defelementwise(np.exp, lambda x, y: y)
defelementwise(np.exp2, lambda x, y: y * np.log(2.0))
defelementwise(np.expm1, lambda x, y: np.exp(x))  # (y + 1 lost the tail: 0 below x = -37)
defelementwise(np.log, reciprocal(lambda x, y: 1.0 / x, lambda x, y: x))
defelementwise(np.log2, reciprocal(lambda x, y: 1.0 / (x * np.log(2.0)), lambda x, y: x, 1.0 / np.log(2.0)))
defelementwise(np.log10, reciprocal(lambda x, y: 1.0 / (x * np.log(10.0)), lambda x, y: x, 1.0 / np.log(10.0)))
defelementwise(np.log1p, reciprocal(lambda x, y: 1.0 / (x + 1.0), lambda x, y: x + 1.0))


def _weight(d, expneg):
    """e^a / (e^a + e^b) with d = a - b, for base e (expneg = exp(-t)) or 2: exp(a - y) would
    use y = logaddexp(a, b) after rounding, which loses digits as |a| grows (at 1e15 the weights
    of equal arguments came out 0.47); never an exponential of a positive number."""
    pos = bottom(d) >= 0
    e = expneg(np.where(pos, d, -d))  # (|d|, with the slope of d itself at 0, so higher orders hold)
    return np.where(pos, 1.0 / (1.0 + e), e / (1.0 + e))


defelementwise(np.logaddexp, lambda a, b, y: _weight(a - b, lambda t: np.exp(-t)),
               lambda a, b, y: _weight(b - a, lambda t: np.exp(-t)))
defelementwise(np.logaddexp2, lambda a, b, y: _weight(a - b, lambda t: np.exp2(-t)),
               lambda a, b, y: _weight(b - a, lambda t: np.exp2(-t)))

# -- trigonometric and hyperbolic ---------------------------------------------------

defelementwise(np.sin, lambda x, y: np.cos(x))
defelementwise(np.cos, lambda x, y: -np.sin(x))
defelementwise(np.tan, lambda x, y: 1.0 + y * y)
def _on_value_side(s, x, value_root, on_cut):
    """The root ``s``, a product of principal square roots (accurate up to the branch points,
    where a root computed from the function's value loses every digit: cos(arcsin 1) is 6e-17,
    not 0), with its sign taken on the branch cut from ``value_root`` (that root computed from
    NumPy's value, which is on the side the signed zero of x names; the principal roots may be
    on the other). Only the sign is read from ``value_root``: it is exact there."""
    xb = bottom(x)
    cut = on_cut(xb)
    if not np.any(cut):
        return s
    with np.errstate(all="ignore"):
        flip = cut & (np.real(bottom(s) * np.conj(value_root)) < 0)
    return np.where(flip, -s, s) if np.any(flip) else s


def _infinite_root(s, x):
    """The root ``s`` with inf where x is infinite (the roots' product is NaN there): the
    derivative, its reciprocal, is then the limit 0."""
    inf = np.isinf(np.abs(bottom(x)))
    return np.where(inf, np.inf, s) if np.any(inf) else s


def _real_beyond_one(z):
    return (np.imag(z) == 0) & (np.abs(np.real(z)) > 1)


def _imaginary_beyond_one(z):
    return (np.real(z) == 0) & (np.abs(np.imag(z)) > 1)


def _real_below_one(z):
    return (np.imag(z) == 0) & (np.real(z) < 1)


def _arcsin_root(x, y, value_root):
    """sqrt(1 - x*x) as sqrt(1 - x) * sqrt(1 + x) (1 - x*x loses digits next to ±1), on the side
    of arcsin's (``value_root`` cos) or arccos's (sin) value."""
    if not np.iscomplexobj(bottom(x)):
        return np.sqrt((1.0 - x) * (1.0 + x))
    s = _infinite_root(np.sqrt(1.0 - x) * np.sqrt(1.0 + x), x)
    return _on_value_side(s, x, value_root(bottom(y)), _real_beyond_one)


def _arcsinh_root(x, y):
    """sqrt(x*x + 1): hypot(x, 1) for real x (x*x overflows beyond 1e154); for complex x
    sqrt(1 + ix) * sqrt(1 - ix), whose cuts are arcsinh's, on the side of arcsinh's value."""
    if not np.iscomplexobj(bottom(x)):
        return np.hypot(x, 1.0)
    s = _infinite_root(np.sqrt(1.0 + 1j * x) * np.sqrt(1.0 - 1j * x), x)
    return _on_value_side(s, x, np.cosh(bottom(y)), _imaginary_beyond_one)


def _arccosh_root(x, y):
    """sqrt(x - 1) * sqrt(x + 1) (1/sqrt(x*x - 1) has the wrong sign for Re x < 0), on the side
    of arccosh's value on its cut (real x < 1)."""
    s = np.sqrt(x - 1.0) * np.sqrt(x + 1.0)
    if not np.iscomplexobj(bottom(x)):
        return s
    return _on_value_side(_infinite_root(s, x), x, np.sinh(bottom(y)), _real_below_one)


def _one_minus_square(x, y):
    return (1.0 - x) * (1.0 + x)


def _far_out(x, near, sign):
    """For complex x: ``near`` where |x| < 1e8, ``sign`` * (1/x)^2 beyond, where 1 ± x*x is ±x*x
    to the last digit: for infinite x its limit 0 (the factors' inf * 0 is NaN)."""
    r = np.abs(bottom(x))
    far = ~(r < 1e8)
    if not np.any(far):
        return near()
    inf = np.isinf(r)  # (1/(inf + inf j) is NaN in complex division: the limit is 0 there too)
    u = 1.0 / np.where(far & ~inf, x, 2.0)
    return np.where(inf, 0.0, np.where(far, sign * (u * u), near() if not np.all(far) else 0.0))


def _inverse_one_minus_square(x, y):
    """1 / (1 - x*x) as 1/(1 - x) * 1/(1 + x): exact next to ±1, and for complex x no overflow of
    x*x (to inf and NaN) where the derivative is tiny."""
    if not np.iscomplexobj(bottom(x)):
        return 1.0 / ((1.0 - x) * (1.0 + x))
    return _far_out(x, lambda: (1.0 / (1.0 - x)) * (1.0 / (1.0 + x)), -1.0)


def _inverse_one_plus_square(x, y):
    """1 / (1 + x*x), for complex x as 1/(1 + ix) * 1/(1 - ix) (no overflow of x*x)."""
    if not np.iscomplexobj(bottom(x)):
        return 1.0 / (1.0 + x * x)
    return _far_out(x, lambda: (1.0 / (1.0 + 1j * x)) * (1.0 / (1.0 - 1j * x)), 1.0)


def _one_plus_square(x, y):
    return 1.0 + x * x if not np.iscomplexobj(bottom(x)) else (1.0 + 1j * x) * (1.0 - 1j * x)


defelementwise(np.arcsin, reciprocal(lambda x, y: 1.0 / _arcsin_root(x, y, np.cos),
                                     lambda x, y: _arcsin_root(x, y, np.cos)))
defelementwise(np.arccos, reciprocal(lambda x, y: -1.0 / _arcsin_root(x, y, np.sin),
                                     lambda x, y: _arcsin_root(x, y, np.sin), -1.0))
defelementwise(np.arctan, reciprocal(_inverse_one_plus_square, _one_plus_square))
def _over_hypot2(c, a, b):
    # c / (a*a + b*b) as (c / h) / h with h = hypot(a, b): the squares underflow for tiny
    # arguments (1e-200 gave inf for 5e199) and overflow for huge ones
    h = np.hypot(a, b)
    inf = np.isinf(bottom(h))
    if not np.any(inf):
        return c / h / h
    # at an infinite argument the partials are 0 (they fall as 1/h), not inf/inf
    return np.where(inf, 0.0, c / np.where(inf, 1.0, h) / np.where(inf, 1.0, h))


defelementwise(np.arctan2, lambda a, b, y: _over_hypot2(b, a, b), lambda a, b, y: _over_hypot2(-a, a, b))


def _over_norm(c, y, watched=False):
    """c / y for the partials of a norm y (hypot, complex abs), 0 where y is 0: there the norm
    has no derivative, and 0 is what central differences give and what |x| has at 0 (a
    subgradient), in both modes, rather than 0/0. (inf / inf at an infinite element is NaN,
    which strong_times makes zero for a zero cotangent or tangent.) ``watched``: hypot's zeros are watched
    where they are made (_hypot_watch), which warns only where they reach the result."""
    yb = bottom(y)
    with np.errstate(invalid="ignore"):
        if not np.any(yb == 0):
            return c / y
        if not (watched and _WATCHED_HYPOTS.get(id(yb)) is yb) and (
                carries_any_derivative(y) or carries_any_derivative(c)):  # (a higher derivative at the kink; not for a
            # real |x|, np.sqrt or x ** 0.5, whose zeros are as often a branch np.where does not take, a Huber
            # loss's or a guarded root's, as a smooth composite's: docs/errors.md)
            kink_warning("a norm (complex |z|, np.hypot)")
        zero = yb == 0
        return np.where(zero, 0.0, c / np.where(zero, 1.0, y))


defelementwise(np.hypot, lambda a, b, y: _over_norm(a, y, True), lambda a, b, y: _over_norm(b, y, True))


def _hypot_watch(leaves, res):
    """np.hypot's result watched at its zeros where a higher derivative meets them (rules/linalg._norm_kink):
    its pullback warns only where they are read after (not the zero self-distances a MoM code overwrites with
    np.fill_diagonal: the mom tester's Hessians warned at each call)."""
    if not isinstance(res, Tracer) or np.all(bottom(res)) or _called_by_a_rule():
        return res
    from .linalg import _norm_kink

    watched = _norm_kink(res, "np.hypot at (0, 0) (a norm)")
    if watched is not res:  # (its partials leave the warning to the watch: _over_norm; a result made another way,
        b = bottom(res)  # out= or where=, is not watched, and its partials warn at once: regress116)
        if len(_WATCHED_HYPOTS) > 256:
            _WATCHED_HYPOTS.clear()  # (a result forgotten warns at once again: noise, never silence)
        _WATCHED_HYPOTS[id(b)] = b
    return watched


_WATCHED_HYPOTS: dict = {}  # id(values) -> values: np.hypot results whose zeros _hypot_watch watches
defelementwise(np.sinh, lambda x, y: np.cosh(x))
defelementwise(np.cosh, lambda x, y: np.sinh(x))
def _sech2(x, y):
    """tanh's derivative sech(x)**2: 1 - y*y cancels (0 beyond |x| = 19), and 1 / cosh(x)**2 has derivatives
    through cosh(x)**3 (0 beyond |x| = 180, where cosh overflows; a complex one's NaN beyond |Re x| = 355,
    where tanh is ±1 + 0j: the eis tester): 4 exp(∓2x) beyond |Re x| = 20 (the sign of Re x), where it is
    sech(x)**2 to rounding; each branch at its own points."""
    xb = np.asarray(bottom(x))
    big = np.abs(np.real(xb)) > 20
    if not np.any(big):
        return 1.0 / np.square(np.cosh(x))
    far = np.where(big, x, 20.0)
    sign = np.where(np.real(xb) < 0, -1.0, 1.0)  # (a constant: the side of the plane)
    return np.where(big, 4.0 * np.exp(-2.0 * sign * far), 1.0 / np.square(np.cosh(np.where(big, 0.0, x))))


defelementwise(np.tanh, _sech2)
defelementwise(np.arcsinh, reciprocal(lambda x, y: 1.0 / _arcsinh_root(x, y), _arcsinh_root))
defelementwise(np.arccosh, reciprocal(lambda x, y: 1.0 / _arccosh_root(x, y), _arccosh_root))
defelementwise(np.arctanh, reciprocal(_inverse_one_minus_square, _one_minus_square))
defelementwise(np.deg2rad, lambda x, y: np.pi / 180.0)
defelementwise(np.rad2deg, lambda x, y: 180.0 / np.pi)
defelementwise(np.radians, lambda x, y: np.pi / 180.0)
defelementwise(np.degrees, lambda x, y: 180.0 / np.pi)

# -- comparisons and selections that pick one argument --------------------------


# (whether x beats the other operand, whether it beats or ties it) for each pick
_WINS_TIES = {np.maximum: (np.greater, np.greater_equal), np.fmax: (np.greater, np.greater_equal),
              np.minimum: (np.less, np.less_equal), np.fmin: (np.less, np.less_equal)}


def _picks(fn, nan_loses=False):
    """The partials of ``fn`` (np.maximum, np.minimum; np.fmax, np.fmin with ``nan_loses``) that
    recompute its plain result instead of reading the output (which then need not be kept for
    the reverse pass): the first argument wins where it is the result, ties split evenly; for
    fmax/fmin a NaN argument loses, for maximum/minimum it wins (it is the result NumPy returns:
    the first of two NaNs)."""

    wins, ties = _WINS_TIES[fn]

    def share(x, other):
        # (x beats other: 1 + 1, ties: 0 + 1, loses or a NaN: 0 + 0; halved) in two comparisons to booleans
        # and two in-place passes, not eight over float arrays (np.clip(x, lo, hi, out=x) cost 70x a plain call)
        d = wins(x, other).astype(np.float64)
        if type(d) is np.ndarray:
            d += ties(x, other)
            d *= 0.5
            return d
        return (d + ties(x, other)) * 0.5

    def first(a, b, y):
        if type(a) is EagerPartial:
            return a.value * 0.5
        ab, bb = bottom(a), bottom(b)
        if not (_has_nan(ab) or _has_nan(bb)):
            return share(ab, bb)
        d = np.where(ab == bb, 0.5, np.where(fn(ab, bb) == ab, 1.0, 0.0))
        if nan_loses:
            return np.where(np.isnan(ab), 0.0, np.where(np.isnan(bb), 1.0, d))
        return np.where(np.isnan(ab), 1.0, np.where(np.isnan(bb), 0.0, d))

    def second(a, b, y):
        if type(b) is EagerPartial:
            return b.value * 0.5
        ab, bb = bottom(a), bottom(b)
        if not (_has_nan(ab) or _has_nan(bb)):
            return share(bb, ab)
        d = np.where(ab == bb, 0.5, np.where(fn(ab, bb) == ab, 0.0, 1.0))
        if nan_loses:
            return np.where(np.isnan(bb), 0.0, np.where(np.isnan(ab), 1.0, d))
        return np.where(np.isnan(ab), 0.0, np.where(np.isnan(bb), 1.0, d))

    return first, second


def _eager_picks(fn):
    """Primitive.eager of a pick ``fn`` (np.maximum...): twice the partials at the active positions, now, as int8
    (2 a win, 1 a tie, 0 a loss: an eighth of a copy), in EagerPartial in place of the operands (the others: their
    shapes); None (the operands kept) where a NaN is present or the result is larger than an active operand (a
    broadcast: its partial would be larger than the operand)."""
    wins, ties = _WINS_TIES[fn]

    def eager(vals, positions):
        a, b = bottom(vals[0]), bottom(vals[1])
        size = np.broadcast_shapes(np.shape(a), np.shape(b))
        if _has_nan(a) or _has_nan(b) or any(np.shape((a, b)[i]) != size for i in positions):
            return None
        return [EagerPartial(np.shape(x), np.add(wins(x, other), ties(x, other), dtype=np.int8) if i in positions
                             else None) for i, (x, other) in enumerate(((a, b), (b, a)))]

    return eager


def _has_nan(x) -> bool:
    """Whether ``x`` (a plain array or number) may hold a NaN: by its minimum, one pass that a NaN
    propagates into, for a float or complex array."""
    t = type(x)
    if t is float:
        return math.isnan(x)
    kind = np.result_type(x).kind
    if kind not in "fc" or not np.size(x):
        return False
    return bool(np.isnan(np.min(x)))  # (a NaN in a minimum sets no floating-point flag)


for _pick, _nan_loses in ((np.maximum, False), (np.minimum, False), (np.fmax, True), (np.fmin, True)):
    _prim = defelementwise(_pick, *_picks(_pick, _nan_loses))
    _prim.eager = _eager_picks(_pick)
    _prim.ties = True  # (its records note where the operands tie: tape._ties_of, _tie_mask)


# np.clip(x, lo, hi) with both bounds as one primitive, NumPy's clip ufunc (the one behind np.clip and ndarray.clip):
# the partials of np.minimum(np.maximum(x, lo), hi), ties split evenly at each pick, four times each as int8 (0, 1, 2
# or 4). rules/shape.py takes it where no operand holds a NaN and no lo equals its hi (else it composes the picks)


def _clip_codes(x, lo, hi, i):
    """4 ∂clip/∂(x, lo, hi)[i] of plain NaN-free values, int8."""
    m = np.maximum(x, lo)
    if i == 2:
        return np.add(hi < m, hi <= m, dtype=np.int8) * np.int8(2)
    below = np.add(m < hi, m <= hi, dtype=np.int8)
    a, b = (x, lo) if i == 0 else (lo, x)
    return np.add(a > b, a >= b, dtype=np.int8) * below


def _clip_partial(i):
    def d(x, lo, hi, y):
        v = (x, lo, hi)[i]
        if type(v) is EagerPartial:
            return v.value * 0.25
        return _clip_codes(bottom(x), bottom(lo), bottom(hi), i) * 0.25

    return d


def _clip_eager(vals, positions):
    """Primitive.eager of the clip: the partials' int8 codes in place of the operands (None where the result is
    larger than an active operand: a broadcast)."""
    vals = [bottom(v) for v in vals]
    shapes = [getattr(v, "shape", ()) for v in vals]
    if shapes[1] != shapes[0] or shapes[2] != shapes[0]:
        size = np.broadcast_shapes(*shapes)
        if any(shapes[i] != size for i in positions):
            return None
    return [EagerPartial(shapes[i], _clip_codes(*vals, i) if i in positions else None) for i in range(3)]


get_primitive(np._core.umath.clip, "np.clip")
CLIP = defelementwise(np._core.umath.clip, _clip_partial(0), _clip_partial(1), _clip_partial(2))
CLIP.eager = _clip_eager


def _abs_d(x, y):
    if type(x) is EagerPartial:
        return x.value
    xb = bottom(x)
    if np.iscomplexobj(xb):
        # |z| is not holomorphic: handled by its own rule below
        raise AssertionError
    return np.sign(x)


def _abs_eager(vals, positions):
    """Primitive.eager of |x| for a real x without NaNs: its partial, the sign, as int8, kept in place of x (an
    eighth of it); None otherwise (x kept)."""
    x = bottom(vals[0])
    if np.iscomplexobj(x) or _has_nan(x):
        return None
    return [EagerPartial(np.shape(x), np.subtract(x > 0, x < 0, dtype=np.int8))]


defelementwise(np.absolute, _abs_d).eager = _abs_eager
defelementwise(np.fabs, _abs_d).eager = _abs_eager
defelementwise(np.copysign,
               lambda a, b, y: np.where(np.signbit(bottom(a)) == np.signbit(bottom(b)), 1.0, -1.0),
               lambda a, b, y: 0.0)


def _quotient(a, b, towards_zero=False):
    """The integer quotient a remainder of ``a`` by ``b`` is taken with (d/db of a - q b is -q): NumPy's
    floor quotient, exact where a / b rounds (1.0 / 0.1 is 10.0, while 1.0 % 0.1 = 1.0 - 9 * 0.1), plus
    one for fmod's (``towards_zero``) where operands of opposite signs leave a remainder; taken in
    float64 for float16/32 operands, where it is exact (float32's floor division rounds a tie twice,
    float16's corrected quotient rounded back off by one)."""
    a, b = bottom(a), bottom(b)
    dt = np.result_type(a, b)
    low = dt.kind == "f" and dt.itemsize < 8
    if low:
        a, b = np.float64(a), np.float64(b)
    q = np.floor_divide(a, b)
    if towards_zero:
        q = q + ((np.fmod(a, b) != 0) & (np.signbit(a) != np.signbit(b)))
    return q.astype(dt) if low else q


defelementwise(np.fmod, lambda a, b, y: 1.0, lambda a, b, y: -_quotient(a, b, towards_zero=True))
defelementwise(np.remainder, lambda a, b, y: 1.0, lambda a, b, y: -_quotient(a, b))


defelementwise(np.sinc, lambda x, y: _sinc_d(x))
defelementwise(np.ldexp, lambda x, e, y: np.exp2(bottom(e).astype(float) if hasattr(bottom(e), "astype") else float(e)), None)
defelementwise(np.heaviside, lambda x, h, y: 0.0, lambda x, h, y: np.where(bottom(x) == 0, 1.0, 0.0))


def _sinc_d(x):
    # d/dx sin(u)/u with u = pi x: pi (u cos u - sin u) / u**2, which loses digits as u -> 0
    # (and is 0/0 at 0); there the series pi (-u/3 + u**3/30 - u**5/840 + u**7/45360
    # - u**9/3991680), exact to double precision for |u| < 0.1, and smooth through 0, so the
    # higher derivatives (-pi**2/3 at 0) come out right too.
    xb = np.asarray(bottom(x))
    small = np.abs(np.pi * xb) < 0.1
    u = np.pi * x
    if small.all():
        return _sinc_series(u)
    safe = np.where(small, 1.0, u) if small.any() else u
    d = np.pi * (safe * np.cos(safe) - np.sin(safe)) / (safe * safe)
    return np.where(small, _sinc_series(u), d) if small.any() else d


def _sinc_series(u):
    u2 = u * u
    return np.pi * u * (-1.0 / 3 + u2 * (1.0 / 30 + u2 * (-1.0 / 840 + u2 * (1.0 / 45360 - u2 / 3991680))))


# -- piecewise constant: derivative zero -------------------------------------------

for _u in (np.floor, np.ceil, np.trunc, np.rint, np.sign, np.floor_divide, np.spacing):
    defzero(_u)


# -- no derivative ------------------------------------------------------------------
# nextafter(x, y) is the float next to x towards y: a property of the number format,
# not a function of real numbers. Read as x plus a one-ulp step its derivative would be
# one in x; read as a step function on the float grid, zero (piecewise constant only in
# a measure-zero sense). Neither is sound for every use: JAX registers no derivative
# rule for lax.nextafter and PyTorch marks both arguments not_implemented. So do we:
# never a silent number.

defnotimplemented(np.nextafter, "np.nextafter has no derivative: it steps to the neighbouring floating-point "
                  "number, a property of the number format rather than a function of real numbers (JAX and "
                  "PyTorch define none either). Apply it to mg.stop_gradient(x) for a constant, or use x itself "
                  "where a step of one unit in the last place does not matter")


# -- complex parts (not holomorphic: written out) ------------------------------------

from ..core import get_primitive as _gp  # noqa: E402

_abs = _gp(np.absolute)
_abs_real_rule, _abs_real_frule = _abs.rrule, _abs.frule


def _python_complex_abs(z):
    """``abs(z)`` of a Python complex (a weak traced scalar): Python's own hypot, whose last
    bit differs from np.absolute's for about a third of the values. Traced (a higher
    derivative): np.hypot of the parts, which has the same bits."""
    if isinstance(z, Tracer):
        return np.hypot(np.real(z), np.imag(z))
    return abs(complex(z))


_pyabs = _gp(_python_complex_abs, "abs")


def _numpy_complex_abs(z):
    """``abs(z)`` of a NumPy complex scalar: the scalar's own abs (hypot, as Python's), a
    NumPy float of its precision; np.absolute's last bit differs for about a third of values.
    Traced (a higher derivative): np.hypot of the parts, which has the same bits."""
    if isinstance(z, Tracer):
        return np.hypot(np.real(z), np.imag(z))
    return abs(z[()] if type(z) is np.ndarray else z)


_npabs = _gp(_numpy_complex_abs, "abs")


def _complex_abs_rules(fn, real_rules=None):
    """The rules of |z| computed by ``fn`` (np.absolute, or a scalar's own abs): the cotangent
    g z/|z| and the tangent Re(conj(z) t)/|z|, zero at z = 0; ``real_rules`` for real z."""
    def rrule(z):
        if real_rules is not None and not np.iscomplexobj(bottom(z)):
            return real_rules[0](z)
        # the pullback reads z only (np.absolute's declared reads): y is the caller's array,
        # which later code may write in place (s = np.abs(z); s *= 3), so |z| is computed again
        return fn(z), lambda g: (strong_times(g, _over_norm(z, fn(z))),)

    def frule(primals, tangents):
        (z,), (t,) = primals, tangents
        if real_rules is not None and not np.iscomplexobj(bottom(z)):
            return real_rules[1](primals, tangents)
        y = fn(z)
        return y, np.real(strong_times(t, _over_norm(np.conj(z), y)))

    return rrule, frule


_abs.rrule, _abs.frule = _complex_abs_rules(np.absolute, (_abs_real_rule, _abs_real_frule))
_abs.linear = False


def _abs_fast(level, leaves, dest=None):
    """|x| of a real traced value: the elementwise rule (the fast path, a run's compact record in an
    element loop; with ``dest``, np.abs(x, out=dest) in place), which the real case of the rules above is;
    None for a complex one."""
    x = leaves[0]
    if isinstance(x, Tracer) and x._value.dtype.kind == "f":
        return level.process_ew(_abs, leaves, None, dest, type(x) is ScalarTracer and dest is None)
    return None


_abs.fast = _abs_fast
_pyabs.rrule, _pyabs.frule = _complex_abs_rules(_python_complex_abs)
_npabs.rrule, _npabs.frule = _complex_abs_rules(_numpy_complex_abs)
PYTHON_COMPLEX_ABS[0] = _pyabs
PYTHON_COMPLEX_ABS[1] = _npabs


# sign of a complex number is z/|z| (NumPy 2): not holomorphic, and not piecewise constant
# like the real sign. With s = sign(z), r = |z|: ds = i s Im(conj(s) dz) / r, so the cotangent
# (df/dx + i df/dy) is -i s Im(conj(g) s) / r. At z = 0 both are zero (as abs's are).

_sign = _gp(np.sign)
_sign_real_rule, _sign_real_frule = _sign.rrule, _sign.frule


def _sign_parts(x):
    s = np.sign(x)
    r = np.absolute(x)
    rb = bottom(r)
    zero = np.any(rb == 0)
    return s, (np.where(rb == 0, 1.0, r) if zero else r), (rb == 0 if zero else None)


def _sign_rrule(x):
    if not np.iscomplexobj(bottom(x)):
        return _sign_real_rule(x)
    s, r, zero = _sign_parts(x)

    def pullback(g):
        ct = -1j * s * np.imag(np.conj(g) * s) / r
        return (ct if zero is None else np.where(zero, 0.0, ct),)

    return s, pullback


def _sign_frule(primals, tangents):
    (x,), (t,) = primals, tangents
    if not np.iscomplexobj(bottom(x)) or _is_zero(t):
        return _sign_real_frule(primals, tangents)
    s, r, zero = _sign_parts(x)
    d = 1j * s * np.imag(np.conj(s) * t) / r
    return s, (d if zero is None else np.where(zero, 0.0, d))


_sign.rrule, _sign.frule = _sign_rrule, _sign_frule
_sign.linear = False
_sign.zero = ZERO_IF_REAL  # (piecewise constant, so a constant plain code may read, on real inputs)


def _conj_rule(x):
    return np.conjugate(x), lambda g: (np.conjugate(g),)


def _conj_frule(primals, tangents):
    return np.conjugate(primals[0]), np.conjugate(tangents[0]) if not isinstance(tangents[0], ZeroTangent) else ZERO


_c = _gp(np.conjugate)
_c.rrule, _c.frule, _c.linear = _conj_rule, _conj_frule, True


# -- ufuncs with several outputs: divmod, modf, frexp ---------------------------
# (appended by the statistics/construction rules; cases in tests/rules/test_construction.py)
# NumPy computes the values; one output varies continuously, the others are
# piecewise constant (a quotient, an integral part) or integers (an exponent).

from ..registry import conj_if_complex as _cj  # noqa: E402
from ..tangents import Thunk as _Thunk, is_zero as _is_zero, unbroadcast as _unbroadcast  # noqa: E402


def _defmulti(ufunc, k, *partials):
    """Rules of a multi-output ufunc whose output ``k`` alone has a nonzero
    derivative; ``partials[i](*xs, ys)`` is d ys[k] / d xs[i]."""
    p = _gp(ufunc)

    def rule(*xs):
        ys = ufunc(*xs)

        def pullback(cts):
            g = cts[k]
            if _is_zero(g):
                return tuple(ZERO for _ in xs)
            return tuple(_Thunk(lambda i=i: _unbroadcast(g * _cj(partials[i](*xs, ys)), np.shape(xs[i])))
                         for i in range(len(xs)))

        return ys, pullback

    def forward(primals, tangents):
        ys = ufunc(*primals)
        acc = ZERO
        for t, d in zip(tangents, partials):
            if not _is_zero(t):
                acc = acc + t * d(*primals, ys)
        dots = [ZERO] * ufunc.nout
        dots[k] = acc
        return ys, tuple(dots)

    p.rrule, p.frule = rule, forward
    p.weak_args = True  # (a weak scalar takes the other operand's dtype: divmod(1.7, float32), as in a plain call)
    # the other outputs (a quotient, an integral part, an exponent) are constants, as np.floor's
    # result is, so that plain code may read them: int(np.modf(d)[1]) as int(np.floor(d))
    p.zero_outputs = tuple(i for i in range(ufunc.nout) if i != k)
    return p


_defmulti(np.divmod, 1, lambda a, b, ys: 1.0, lambda a, b, ys: -_quotient(a, b))  # (remainder's)
_defmulti(np.modf, 0, lambda x, ys: 1.0)
_defmulti(np.frexp, 0, lambda x, ys: np.ldexp(1.0, -bottom(ys[1])))


# -- np.i0: the modified Bessel function I0 ----------------------------------------------
# I0' = I1: SciPy's i1 when SciPy is installed (the core needs only NumPy; SciPy's
# rules then give the higher derivatives), otherwise the derivative of the Chebyshev
# expansions np.i0 itself evaluates.

try:
    from scipy.special import i1 as _scipy_i1
except ImportError:  # pragma: no cover
    _scipy_i1 = None


def _chbevl(t, coefs):
    """NumPy's Chebyshev series at ``t`` (Clenshaw's recurrence, as np.i0 runs
    it) and its derivative in ``t``."""
    b0, b1, d0, d1 = coefs[0], 0.0, 0.0, 0.0
    for c in coefs[1:]:
        b2, b1 = b1, b0
        d2, d1 = d1, d0
        b0 = t * b1 - b2 + c
        d0 = b1 + t * d1 - d2
    return 0.5 * (b0 - b2), 0.5 * (d0 - d2)


def i1_numpy(x):
    """I1(x) from NumPy alone: the derivative of np.i0's own expansions,
    e^a C_A(a/2 - 2) on a = |x| <= 8 and e^a C_B(32/a - 2) / sqrt(a) above."""
    from numpy.lib import _function_base_impl as impl  # np.i0's coefficients

    s = np.where(bottom(x) < 0, -1.0, 1.0)  # I1 is odd; s x = |x| stays smooth at 0 for higher orders
    a = s * x
    small = bottom(a) <= 8.0
    a1 = np.where(small, a, 4.0)  # each branch at points where it is finite
    a2 = np.where(small, 16.0, a)
    c, dc = _chbevl(a1 / 2.0 - 2.0, impl._i0A)
    f1 = np.exp(a1) * (c + 0.5 * dc)
    c, dc = _chbevl(32.0 / a2 - 2.0, impl._i0B)
    f2 = np.exp(a2) / np.sqrt(a2) * (c * (1.0 - 0.5 / a2) - 32.0 / (a2 * a2) * dc)
    return s * np.where(small, f1, f2)


def _i1(x):
    if _scipy_i1 is None or np.result_type(bottom(x)).char == "g":  # (SciPy's i1 has no longdouble loop)
        return i1_numpy(x)
    return _scipy_i1(x)


defelementwise(np.i0, lambda x, y: _i1(x))


# -- np.emath (numpy.lib.scimath): real arguments outside a function's real domain go complex --


def _emath_operand(x, fix):
    """NumPy's ``_fix_real_lt_zero`` ("neg"), ``_fix_real_abs_gt_1`` ("abs1") and
    ``_fix_int_lt_zero`` ("int") on a traced or plain operand: the operand itself, or
    (where one of its real elements is outside the domain) its complex (float) version,
    differentiated as ``astype`` is."""
    if not isinstance(x, Tracer):
        x = np.asarray(x)
    b = np.asarray(bottom(x))
    real = np.isreal(b)
    if not np.any(real & ((abs(b) > 1) if fix == "abs1" else (b < 0))):
        return x
    if fix == "int":
        return x * 1.0
    small = (np.single, np.byte, np.short, np.ubyte, np.ushort, np.csingle)  # (NumPy's _tocomplex)
    return x.astype(np.complex64 if issubclass(b.dtype.type, small) else np.complex128)


def _emath_rule(fn, fixes, compute):
    """``fn`` of np.emath as NumPy computes it: its operands fixed by ``fixes`` (one per
    parameter), then ``compute`` (NumPy's ufuncs) on them, traced."""
    import inspect

    sig = inspect.signature(fn)

    def handler(args, kwargs):
        bound = sig.bind(*args, **kwargs)
        ops = [_emath_operand(v, f) for v, f in zip(bound.args, fixes)]
        return compute(*ops)

    FUNCTIONS[fn] = handler


for _name, _uf in (("sqrt", np.sqrt), ("log", np.log), ("log2", np.log2), ("log10", np.log10)):
    _emath_rule(getattr(np.emath, _name), ("neg",), _uf)
for _name, _uf in (("arccos", np.arccos), ("arcsin", np.arcsin), ("arctanh", np.arctanh)):
    _emath_rule(getattr(np.emath, _name), ("abs1",), _uf)
_emath_rule(np.emath.power, ("neg", "int"), np.power)
_emath_rule(np.emath.logn, ("neg", "neg"), lambda n, x: np.log(x) / np.log(n))


# -- np.sqrt of a sum of squares: a norm written out ---------------------------------


def _writers(level, s, back=32, end=None):
    """The records among the ``back`` of ``level``'s tape before position ``end`` (default: its end) that wrote
    storage ``s``, latest first, with their positions: the operation that made it (the last one yielded), and
    before it the writes into a part of it (a buffer filled element by element, ``r2[j] = d @ d``); through the
    identity that puts NumPy's own bits in (np.average's, np.mean's with where=), gathers (``d[0]``) and writes
    over all of it (``out=``, ``b[...] = v``, an in-place step ``s += c``) to what they read."""
    tape = getattr(level, "tape", None)
    if not tape:
        return
    end = len(tape) if end is None else end
    for i in range(end - 1, max(end - back, 0) - 1, -1):
        r = tape[i]
        if not (getattr(r, "out", None) is s or s in (getattr(r, "outputs", None) or ())
                or getattr(r, "dest", None) is s):
            continue
        prim = getattr(r, "prim", None)
        if prim is not None:
            if prim.name == "a reduction's value" and len(r.inputs) == 1:
                s = r.inputs[0][0]
                continue
            yield i, r
            return
        if getattr(r, "src", None) is not None:  # (a gather)
            s = r.src
            continue
        if getattr(r, "full", False) or (getattr(r, "idx", None) is Ellipsis and r.geom is None):
            if r.vsrc is None:  # (all of it a constant)
                return
            s = r.vsrc
            continue
        yield i, r  # (a write into a part of s: the parts written before it are earlier records)


# (what carries its operands' values at each element: sums, copies, concatenations, |x|; products; powers; picks)
_CARRIERS = frozenset(("np.sum", "np.mean", "np.nansum", "np.nanmean", "np.add.reduce", "np.cumsum", "np.float64.__add__",
                   "np.copy", "ndarray.astype", "np.concatenate", "np.stack", "np.absolute", "np.fabs"))
_PRODUCTS = frozenset(("np.multiply", "np.matmul", "np.dot", "np.vdot", "np.inner", "np.einsum", "np.tensordot",
                       "np.float64.__mul__"))
_PICKS = frozenset(("np.maximum", "np.minimum", "np.fmax", "np.fmin", "np.clip", "np.where"))
# (linear in each operand: a function of np.abs(x) through them keeps its kink: regress79)
_LINEAR_MAPS = frozenset(("np.convolve", "np.correlate", "np.fft.fft", "np.fft.ifft", "np.fft.rfft", "np.fft.irfft",
                          "np.fft.fft2", "np.fft.ifft2", "np.fft.fftn", "np.fft.ifftn", "np.trace", "np.diff"))
_EXTREMA = frozenset(("np.max", "np.min", "np.amax", "np.amin", "np.nanmax", "np.nanmin"))


def _quadratic(level, s, depth=0, end=None) -> bool:
    """Whether storage ``s`` (at reverse ``level``) holds values of second order in the traced ones: squares
    (np.square, x ** 2, a product of two traced values: d[0] * d[0], (p - q) * (p - q), w @ w) and what is
    added, summed, selected, scaled or taken as the maximum of them and constants (np.sum(d ** 2), s += d[k] **
    2 in a loop, np.average's weights, d ** 2 / ls ** 2, np.maximum(p @ p + q @ q - 2 * p @ q, 0)): at an exact 0,
    np.sqrt of it has a kink (a norm written out), where a higher derivative is wrong. A guard, whose zeros are
    constants (np.where(hit, disc, 0.0), np.maximum(disc, 0.0) where disc < 0), is none."""
    if depth > 8:
        return False
    for i, r in _writers(level, s, end=end):
        if getattr(r, "prim", None) is None:  # (a write into a part: a sum of squares written there, where it is 0)
            if r.vsrc is not None and _quadratic(level, r.vsrc, depth + 1, i) and _has_zero(r.vsrc):
                return True
            continue
        return _quadratic_op(level, r, depth, i)
    return False


def _has_zero(st) -> bool:
    try:
        return bool(np.any(np.asarray(bottom(st.root)) == 0))
    except (AttributeError, ValueError):
        return True


def _quadratic_op(level, r, depth, at=None) -> bool:
    """:func:`_quadratic` of the storage record ``r`` (an operation, at tape position ``at``) made: its
    operands as they were when it read them (an in-place step's operand is the storage it writes)."""
    name = r.prim.name
    ins = r.inputs
    if name == "np.square":
        return True
    if name in POWERS:
        return len(ins) == 1 and ins[0][2] == 0 and plain_exponent(r) == 2
    if name in _PRODUCTS and len(ins) >= 2:
        return True
    sub = lambda st: _quadratic(level, st, depth + 1, at)
    if name in _PRODUCTS and len(ins) == 1:  # (squares weighted by constants, (d ** 2) @ (1 / ls ** 2): regress74)
        return sub(ins[0][0])
    if name in ("np.add", "np.subtract") or name in _CARRIERS or getattr(r.prim, "moves", False):
        # (a layout operation keeps the values: np.sqrt(np.atleast_1d(w @ w)), a reshape's, was no norm: robotics2)
        return any(sub(st) for st, _, _ in ins)
    scaled = _scaled_operands(r)
    if scaled is not None:
        return any(sub(st) for st in scaled)
    if name in _PICKS:
        # a selection (np.where, np.maximum with a constant): a guard where a constant is picked at the zeros,
        # no kink (np.sqrt(np.where(hit, disc, 0.0))); the traced value itself where it is picked there or
        # ties (0 == 0: the expanded squared distance np.maximum(p @ p + q @ q - 2 * p @ q, 0) at p == q)
        return any(sub(st) and _taken_at_a_zero(r, st, pos) for st, _, pos in ins)
    return False


def _out_of(r):
    """The storage record ``r`` wrote its (first) result into: a fast path's ``out``, else its first output (None
    where it has none)."""
    return getattr(r, "out", None) or (r.outputs[0] if getattr(r, "outputs", None) else None)


def _masked_at_its_zeros(r, st) -> bool:
    """Whether product record ``r`` multiplies its traced operand ``st`` by a constant that is 0 wherever st is
    (``np.abs(x) * (np.abs(x) > 0.5)`` at x = 0: the product is 0 near there whatever st is, regress78)."""
    xs = getattr(r, "xs", None)
    if r.prim.name not in ("np.multiply", "np.float64.__mul__") or xs is None or len(xs) != 2 or len(r.inputs) != 1:
        return False
    pos = r.inputs[0][2]
    try:
        other = np.asarray(bottom(xs[1 - pos]))
        zero = np.asarray(bottom(st.root)) == 0
        if other.dtype.kind not in "biuf" or not np.any(zero):
            return False
        return bool(np.all(np.broadcast_to(other, np.broadcast_shapes(other.shape, zero.shape))[
            np.broadcast_to(zero, np.broadcast_shapes(other.shape, zero.shape))] == 0))
    except (AttributeError, ValueError):
        return False


def _pick_masks(r, st, pos):
    """(where traced operand ``st``, operand ``pos``, of selection record ``r`` is 0, where ``r`` took it, where
    its result is not 0), in ``r``'s output's shape: np.where takes by its condition (np.where(np.abs(x) > 0.5,
    np.abs(x), 0.0) takes the constant at x = 0: regress78), np.minimum, np.clip... where the result equals it
    (a tie takes it too: np.maximum(p @ p + q @ q - 2 * p @ q, 0) at p == q); None where that cannot be told (no
    result storage, a freed value, shapes that do not broadcast)."""
    try:
        out = _out_of(r)
        ob = np.asarray(bottom(out.root))
        vb = np.broadcast_to(np.asarray(bottom(st.root)), ob.shape)
        cond = getattr(getattr(r, "pullback", None), "where_cond", None)
        taken = (ob == vb) if cond is None else (cond if pos == 1 else ~cond)
        return vb == 0, np.broadcast_to(taken, ob.shape), ob != 0
    except (AttributeError, IndexError, ValueError):
        return None


def _taken_at_a_zero(r, st, pos) -> bool:
    """Whether selection record ``r`` took its traced operand ``st`` at one of its zeros (see :func:`_pick_masks`;
    where that cannot be told, as if it did)."""
    masks = _pick_masks(r, st, pos)
    return masks is None or bool(np.any(masks[0] & masks[1]))


def _reverse_of(x):
    """``x``, or the value it traces at an outer level, that a reverse-mode level traces (its tape shows how
    it was made: grad of jvp's inner forward values are the outer reverse level's); or None."""
    while isinstance(x, Tracer):
        if x._level.mode == "rev":
            return x
        x = x._value
    return None


def _root_watch(leaves, res):
    """np.sqrt's result ``res`` of ``leaves[0]``, or ``leaves[0] ** 0.5``'s, watched at its zeros
    (rules/linalg._norm_kink) where it is a norm written out and a higher derivative meets it; else as it
    is (a guarded root's zeros, np.sqrt(np.where(hit, disc, 0.0)), are not a norm's: no warning). Called
    for nested levels only."""
    x = _reverse_of(leaves[0])
    if x is None and isinstance(res, Tracer) and isinstance(leaves[0], Tracer):
        return _second_order_zero_root(leaves[0], res)
    if x is None or not isinstance(res, Tracer):
        return res
    if not np.all(bottom(res)) and _quadratic(x._level, x._storage) and not _called_by_a_rule():
        from .linalg import _norm_kink

        return _norm_kink(res, "np.sqrt of a sum of squares (a norm) at a zero vector")
    hidden = _guarded_zeros(x._level, x._storage)
    if hidden is not None and not _called_by_a_rule():
        from .linalg import _norm_kink

        return _norm_kink(res, "np.sqrt of a sum of squares (a norm) whose zero vector a guard replaced by a "
                               "constant (np.where(s > 0, s, 1.0))", at=np.broadcast_to(hidden, res.shape))
    return res


def _second_order_zero_root(s, res):
    """np.sqrt of ``s`` under forward levels only (forward over forward: no tape shows a sum of squares), watched
    where ``s`` is 0 with a zero tangent at its innermost level: a zero of second order, a sum of squares at its
    minimum (x @ x at 0, whose root's Hessian came out 0 without a warning that hessian gives: regress120); a
    root of a value that crosses 0 (a tangent there) is no norm."""
    sb = np.asarray(bottom(s))
    if sb.dtype.kind != "f" or np.all(sb) or _called_by_a_rule():
        return res
    t = s._level.tangent_of(s) if hasattr(s._level, "tangent_of") else None
    if t is None:
        return res
    zero = sb == 0
    if not _is_zero(t):
        try:
            zero = zero & np.broadcast_to(np.asarray(bottom(t)) == 0, zero.shape)
        except ValueError:
            return res
    if not np.any(zero):
        return res
    from .linalg import _norm_kink

    return _norm_kink(res, "np.sqrt of a value that is 0 to second order (a sum of squares, a norm) at a zero "
                           "vector (forward over forward)", at=np.broadcast_to(zero, np.shape(res)))


def _guarded_zeros(level, s):
    """Where storage ``s`` is a selection (np.where(s2 > 0, s2, 1.0): the safe root's inner guard) that took a
    constant in place of a sum of squares ``s2`` at its zeros (a kink left out, whose derivatives the constant's,
    0, replace: the double-where safe norm's Hessian at a coincident point, regress73): that mask; else None."""
    at, r = next(_writers(level, s), (None, None))
    if r is None or getattr(r, "prim", None) is None or r.prim.name not in _PICKS:
        return None
    for st, _, pos in r.inputs:
        masks = _pick_masks(r, st, pos)
        hidden = None if masks is None else masks[0] & ~masks[1] & masks[2]  # (a nonzero constant there)
        if hidden is not None and np.any(hidden) and _quadratic(level, st, 1, at):
            return hidden
    return None


_DISPATCH_FILES = frozenset((__file__, core.__file__))


def _called_by_a_rule() -> bool:
    """Whether the np.sqrt being watched was called by mutagrad's own rules (np.std's root of the variance
    watches its kink itself, where a constant's std of one element is none), not by the user's code."""
    f = sys._getframe(2)
    while f is not None and f.f_code.co_filename in _DISPATCH_FILES:
        f = f.f_back
    return f is not None and f.f_code.co_filename.startswith(_MUTAGRAD_DIR)


def _power_watch(leaves, res):
    """``s ** 0.5``, watched as np.sqrt(s) is; ``np.abs(x) ** p`` for 0 < p <= 2 at x = 0 (:func:`_abs_watch`);
    other powers of a value based on np.abs(x), or powers with such an exponent, where they curve there
    ((np.abs(x) + 1) ** 3, 2.0 ** np.abs(x): :func:`_function_of_abs_watch`)."""
    if (len(leaves) == 2 and not isinstance(leaves[1], Tracer) and np.ndim(leaves[1]) == 0
            and np.isrealobj(leaves[1])):  # (a complex exponent: no abs's kink to watch; 0 < p failed: peersuite)
        p = leaves[1]
        if p == 0.5:
            return _root_watch(leaves, res)
        if 0 < p <= 2:
            return _abs_watch(leaves, res, f"np.abs(x) ** {p} at x = 0", p > 1)
    return _power_of_abs(leaves, res)


def _abs_watch(leaves, res, what="np.abs(x) ** 2 at x = 0", first_right=True):
    """A power of ``np.abs(x)`` at most 2, at x = 0, watched as a norm's root is: |x| ** 2 is x ** 2, whose
    Hessian is 2, but through abs's derivative sign(x), 0 at 0, it comes out 0 (the glaciology tester:
    Glen's law |grad s| ** (n - 1) with n = 3 on a flat surface); between 1 and 2 it is infinite there. Of a
    shifted abs, (np.abs(x) + 1) ** 2, it is 2 on either side and came out 0 too: watched at the abs's zeros."""
    x = _reverse_of(leaves[0])
    if x is None or not isinstance(res, Tracer) or _called_by_a_rule():
        return res
    found = _abs_zeros(x)
    if found is None:
        return res
    at, r = found
    from .linalg import _norm_kink

    if what.startswith("np.abs(x) **"):
        what = _kink_words(x, r, what[len("np.abs(x) "):].replace(" at x = 0", ""))
    # (|x| ** p, p > 1: its first derivative, 0, is right; of a shifted abs it is a kink's)
    first_right = first_right and not np.any(np.broadcast_to(np.asarray(bottom(res)), at.shape)[at])
    return _norm_kink(res, what, at=_moving(r, at), first_right=first_right, keep=True)


def _kink_words(x, r, then, before="", note=True):
    """How a warning names the kink that the np.abs (or tied maximum) record ``r``, found from tracer ``x``,
    is: ``before`` + that kink + ``then``, at its point, e.g. "np.abs(x) ** 2 at x = 0". A maximum or minimum
    is named as written (np.maximum(x, 0.5) ** 2 at the tie: regress130; np.sin(np.minimum(S, cap)): hydro),
    and a value computed from the abs is said to be, if ``note`` (a minmod inside a flux: traffic)."""
    if r.prim.name in _TIES:
        return f"{before}{r.prim.name}(a, b) {then} at a tie a == b"
    what = f"{before}np.abs(x) {then} at x = 0"
    w = next(_writers(x._level, x._storage), (None, None))[1]
    if w is not None and getattr(getattr(w, "prim", None), "name", None) == "norm_kink":  # (a watch: the abs itself)
        w = next(_writers(x._level, w.inputs[0][0]), (None, None))[1]
    if note and w is not r:
        what += " (here of a value computed from an np.abs at its zero: shifted, scaled, summed or selected)"
    return what


def _abs_source(level, s, depth=0, end=None):
    """(storage, geometry) of the traced value whose np.abs storage ``s`` is (see :func:`_abs_record`), or None."""
    found = _abs_record(level, s, depth, end)
    return None if found is None else found[0].inputs[0][:2]


def _abs_record(level, s, depth=0, end=None):
    """(the np.abs record whose value storage ``s`` (at reverse ``level``) is, scaled ((np.abs(r) / sigma) ** 2,
    (np.sqrt(w) * np.abs(r)) ** 2: regress71), shifted by a constant, summed, selected or copied; whether each step
    from it to ``s`` kept every element in place: an elementwise operation on whole values of one shape), or None."""
    at, r = next(_writers(level, s, end=end), (None, None))
    if r is None or depth > 4:
        return None
    if getattr(r, "prim", None) is None:  # (a write into a part of s, a[:] = np.abs(x): regress78)
        vsrc = getattr(r, "vsrc", None)
        found = None if vsrc is None else _abs_record(level, vsrc, depth + 1, at)
        return None if found is None else (found[0], False)
    name = r.prim.name
    ins = r.inputs
    if name in ("np.absolute", "np.fabs"):
        return (r, True) if len(ins) == 1 else None
    if name in _TIES and _tie_mask(r) is not None:  # (max(a, b) = (a + b + |a - b|) / 2 where a == b: regress85)
        return r, True
    elementwise = True
    if name in ("np.add", "np.subtract", "np.float64.__add__", "np.float64.__sub__"):  # (with a constant, or a sum)
        scaled = [st for st, _, _ in ins]
    elif (name in _PRODUCTS and _scaled_operands(r) is None) or name in _LINEAR_MAPS:  # (r @ (1 / ls), einsum: each
        scaled = [st for st, _, _ in ins]  # operand carried, weighted by the others; a convolution: regress79)
        elementwise = False
    elif name in _EXTREMA:  # (np.max(np.abs(x)) at 0: the abs's zero picked, a value of 0; elsewhere a nonzero one)
        out = _out_of(r)
        scaled = [st for st, _, _ in ins] if out is None or out.root is None or np.any(
            np.asarray(bottom(out.root)) == 0) else ()
        elementwise = False
    elif name in _PICKS:  # (min(|r|, d), np.clip(|r|, 0, d): the abs itself where it is 0, a Huber loss: regress77;
        # a tied max(a, b) where it took it, a ReLU of it: regress86)
        for st, _, pos in ins:
            found = _abs_record(level, st, depth + 1, at)
            if found is not None and (_taken_at_a_zero(r, st, pos) if found[0].prim.name not in _TIES
                                      else _taken_at_a_tie(r, st, pos, found[0])):
                return found[0], found[1] and all(g is None for t, g, _ in ins if t is st) and st.shape == s.shape
        return None
    elif name in _CARRIERS or name == "np.roll":  # (concatenations, copies)
        scaled = [st for st, _, _ in ins]
        elementwise = name in ("np.copy", "ndarray.astype")
    elif name == "norm_kink":  # (a watch, the identity: np.abs(z) beside a comparison of z with 0 at a tie,
        scaled = [st for st, _, _ in ins]  # core.abs_watched; its power's watch went quiet: regress137)
    else:
        scaled = [st for st in _scaled_operands(r) or () if not _masked_at_its_zeros(r, st)]
    for st in scaled:
        found = _abs_record(level, st, depth + 1, at)
        if found is not None:
            whole = all(g is None for t, g, _ in ins if t is st)
            return found[0], found[1] and elementwise and whole and st.shape == s.shape
    return None


_TIES = frozenset(("np.maximum", "np.minimum", "np.fmax", "np.fmin"))


def _tie_mask(r):
    """Where the two traced operands of maximum/minimum record ``r`` (a fast path's, which keeps them) are equal,
    in its output's shape, where they are anywhere; else None."""
    out = _out_of(r)
    noted = None if out is None else getattr(out.level, "__dict__", {}).get("tie_masks")
    if noted is not None and id(r) in noted:  # (as the operation saw its operands: a later write may change them)
        tie = noted[id(r)]
        if tie is False:
            return None
    else:
        xs = _tie_operands(r)
        if xs is None or out is None:
            return None
        tie = np.asarray(bottom(xs[0])) == np.asarray(bottom(xs[1]))
    try:
        tie = np.broadcast_to(tie, out.shape)
    except ValueError:
        return None
    return tie if tie.any() else None


def _taken_at_a_tie(r, st, pos, tied) -> bool:
    """Whether selection record ``r`` took its operand ``st``, based on the maximum or minimum record ``tied`` of
    two traced values, at their tie (a ReLU of a tied max, np.maximum(np.maximum(a, b), 0.0) ** 2: regress86)."""
    masks = _pick_masks(r, st, pos)
    if masks is None:
        return True
    tie = _tie_mask(tied)
    try:
        return bool(np.any(masks[1] & np.broadcast_to(tie, masks[1].shape)))
    except (ValueError, TypeError):
        return bool(np.any(masks[1]))


def _tie_operands(r):
    """The two traced operands of maximum/minimum record ``r`` as its level got them (tracers of the levels
    outside, or values): a fast path's record keeps them; the general path's, of whole values, has them as its
    inputs' roots (0-d elements: max(a, b) * min(a, b) of x[0], x[1]); else None."""
    if len(r.inputs) != 2:
        return None
    xs = getattr(r, "xs", None)
    if xs is not None:
        return xs if len(xs) == 2 else None
    if any(g is not None for _, g, _ in r.inputs):
        return None
    roots = [st.root for st, _, _ in r.inputs]
    return None if any(v is None for v in roots) else roots


def _moving(r, at):
    """``at`` (where the kink of record ``r``, which a watched value is based on, sits) without the ties of a maximum
    or minimum whose two operands move alike along the forward level that traces them (mg.hessian's outer level,
    one direction per run): along it the tie stays, no kink is crossed, and the column is right (a max-pool of a
    flat background's equal outputs: regress86). The same records whatever the direction: only the mask differs."""
    if r.prim.name not in _TIES:
        return at
    out = _out_of(r)
    noted = None if out is None else getattr(out.level, "__dict__", {}).get("tie_moves")
    if noted is not None and id(r) in noted:  # (as the operation saw its operands)
        moved = noted[id(r)]
    else:  # (its operands now: a record that noted none)
        tie, xs = _tie_mask(r), _tie_operands(r)
        moved = None if tie is None or xs is None else _tie_moves(xs, tie)
    if moved is None:
        return at
    return at & (moved if moved.shape == np.shape(at) else np.any(moved))


def _abs_zeros(x):
    """(where the np.abs that reverse-level tracer ``x``'s value is based on (:func:`_abs_record`) is at 0, in
    x's shape: those elements themselves where every step from the abs kept them in place, else all of x where
    it has one; that record), or None where it is at no 0 (or x is no such value). A maximum or minimum of two
    traced values is such an abs where they tie."""
    found = _abs_record(x._level, x._storage)
    if found is None:
        return None
    r, in_place = found
    shape = np.shape(bottom(x))
    if r.prim.name in _TIES:
        tie = _tie_mask(r)
        return (tie if in_place and x._geom is None and tie.shape == shape else np.ones(shape, bool)), r
    src, geom, _ = r.inputs[0]
    # (the abs's operand, where it is a whole value, else its result, which may have been changed in place
    # since; a large value nothing holds any more is gone: then as if it were at a 0)
    vals = src.root if geom is None else None
    if vals is None:
        out = _out_of(r)
        vals = None if out is None else out.root
    if vals is None:
        return np.ones(shape, bool), r
    zero = np.asarray(bottom(vals)) == 0
    if zero.any() and geom is None:
        zero &= ~_self_differences(x._level, src)
    if not zero.any():
        return None
    return (zero if in_place and x._geom is None and zero.shape == shape else np.ones(shape, bool)), r


def _self_differences(level, s):
    """Where storage ``s`` (a whole value) is the difference of an element with itself, identically 0 (the
    diagonal of x[:, None] - x[None, :]: a pairwise kernel's self-distances, no kink whatever x is), in s's
    shape; all False where s is no such difference or that cannot be told."""
    shape = s.shape
    none = np.zeros(shape, bool)
    r = next(_writers(level, s), (None, None))[1]
    if r is None or getattr(r, "prim", None) is None or r.prim.name != "np.subtract" or len(r.inputs) != 2:
        return none
    (a, ga, _), (b, gb, _) = r.inputs
    if a is not b or a.dtype not in (np.float64, np.complex128) or _out_of(r) is not s:
        return none
    try:  # (which element of a each operand reads: a mirror of a's memory holding their numbers, exact)
        buf, root = a.new_mirror(np.zeros)
        root[...] = np.arange(root.size).reshape(root.shape)
        ia, ib = (np.broadcast_to(view_of(buf, g) if g is not None else root, shape) for g in (ga, gb))
        return ia == ib
    except (ValueError, TypeError):
        return none


def _curved_at(ufunc, leaves, pos, at, shape):
    """(where ``ufunc`` of plain ``leaves``, as a function of operand ``pos`` alone, curves at the elements ``at``
    (of its result's ``shape``): a second difference that is no rounding; whether its slope there is 0 too), by
    central differences of NumPy's own ufunc at those few elements."""
    vals = [np.broadcast_to(np.asarray(bottom(v)), shape)[at] + 0.0 for v in leaves]  # (floats: integers too)
    u = vals[pos]
    h = 1e-4 * (1.0 + np.abs(u))

    def g(d):
        args = list(vals)
        args[pos] = u + d
        return ufunc(*args)

    with np.errstate(all="ignore"):
        g0, gp, gm = g(0.0), g(h), g(-h)
        d2, d1 = (gp - 2.0 * g0 + gm) / (h * h), (gp - gm) / (2.0 * h)
        scale = 1.0 + np.abs(g0)
        curved = ~np.isfinite(d2) | (np.abs(d2) > 1e-6 * scale)
        flat = np.isfinite(d1) & (np.abs(d1) <= 1e-6 * scale)
    where = np.zeros(shape, bool)
    where[at] = curved
    return where, bool(np.all(flat[curved]))


def _function_of_abs_watch(ufunc, then=None):
    """A watch (NESTED_WATCH) of ``ufunc`` of a value based on np.abs(x) (:func:`_abs_record`: scaled, shifted,
    selected) at x = 0, where it curves there: np.cos(np.abs(x)) is cos(x), whose Hessian is -1, but through
    abs's derivative sign(x), 0 at 0, it comes out 0; np.exp(-np.abs(d) / k) and 1 / (1 + np.abs(x)), which have a
    kink there, got 0 too, where each side has the curvature, and a kink may cancel another: the stable smooth
    minimum np.minimum(a, b) - k * np.log1p(np.exp(-np.abs(a - b) / k)) is smooth at a == b, and its Hessian came
    out wrong there (the levelset tester). No warning where the function is straight there (np.sin, np.tanh,
    np.arctan at 0: |x|'s convention, Hessian 0 on both sides), nor for an operand it is linear in (a quotient's
    numerator). ``then``: the ufunc's own watch, run first (np.sqrt of a sum of squares...)."""

    def watch(leaves, res):
        if then is not None:
            res = then(leaves, res)
        if not isinstance(res, Tracer):
            return res
        for pos, leaf in enumerate(leaves):
            x = _reverse_of(leaf) if isinstance(leaf, Tracer) else None
            found = None if x is None else _abs_zeros(x)
            if found is None or _called_by_a_rule():
                continue
            at, r = found
            shape = np.shape(bottom(res))
            try:
                at = np.broadcast_to(at, shape)
            except ValueError:
                continue
            where, flat = _curved_at(ufunc, leaves, pos, at, shape)
            if where.any():
                from .linalg import _norm_kink

                name = getattr(ufunc, "__name__", "a function")
                what = _kink_words(x, r, "(scaled or shifted)", f"np.{name} of ", note=False)
                return _norm_kink(res, f"{what}, where it curves (np.cos(np.abs(x)) is np.cos(x); a smooth minimum "
                                       "of a and b is -k * np.logaddexp(-a / k, -b / k))", at=_moving(r, where),
                                  first_right=flat, keep=True)
        return res

    return watch


def _scaled_operands(r):
    """The traced operands a scaling record ``r`` carries at each element: a product's (by a constant or a
    traced weight) and a negation's, a quotient's numerator; None for other operations."""
    name = r.prim.name
    if name in ("np.multiply", "np.float64.__mul__", "np.negative"):
        return [st for st, _, _ in r.inputs]
    if name in ("np.divide", "np.true_divide", "np.float64.__truediv__"):
        return [st for st, _, pos in r.inputs if pos == 0]
    return None


def _product_watch(leaves, res):
    """``a * a`` of one value, or of two np.abs (scaled or not) of one value (``np.abs(t) * np.abs(t)``,
    ``0.5 * a * a``: regress75, regress76), watched as ``a ** 2`` is (:func:`_abs_watch`)."""
    if len(leaves) == 2 and isinstance(leaves[0], Tracer) and isinstance(leaves[1], Tracer) and (
            _same(leaves[0], leaves[1]) or _abs_of_one(leaves[0], leaves[1])):
        return _abs_watch(leaves, res, "np.abs(x) * np.abs(x) at x = 0")
    if len(leaves) == 2 and all(_tie_based(v) for v in leaves):  # (max(a, b) * min(a, b) at a == b, which is
        return _abs_watch(leaves, res, "np.maximum(a, b) * np.minimum(a, b) at a == b")  # a * b: regress86)
    return res


def _tie_based(v) -> bool:
    """Whether tracer ``v`` is based on a maximum or minimum of two traced values that tie (:func:`_abs_record`)."""
    x = _reverse_of(v) if isinstance(v, Tracer) else None
    found = None if x is None else _abs_record(x._level, x._storage)
    return found is not None and found[0].prim.name in _TIES


def _same(a, b) -> bool:
    return a is b or (a._storage is b._storage and a._geom == b._geom)


def _abs_of_one(a, b) -> bool:
    """Whether tracers ``a`` and ``b`` are each np.abs (np.fabs) of one same traced value, each scaled or not."""
    ra, rb = _reverse_of(a), _reverse_of(b)
    if ra is None or rb is None or ra._level is not rb._level:
        return False
    sa, sb = (_abs_source(r._level, r._storage) for r in (ra, rb))
    return sa is not None and sb is not None and sa[0] is sb[0] and sa[1] == sb[1]


# (where each angle function has its kink: arccos(x) ~ sqrt(2 (1 - x)) at 1, arccosh(x) ~ sqrt(2 (x - 1)))
_ANGLE_KINKS = {np.arccos: ("np.arccos at +-1 (an angle of 0 or pi)", lambda x: np.abs(x) == 1),
                np.arcsin: ("np.arcsin at +-1 (an angle of +-pi/2)", lambda x: np.abs(x) == 1),
                np.arccosh: ("np.arccosh at 1 (a hyperbolic distance of 0)", lambda x: x == 1)}


def _angle_watch(ufunc):
    """A watch (NESTED_WATCH) of np.arccos, np.arcsin or np.arccosh where its argument sits at a kink of the angle:
    arccos(n1 @ n2) of two unit vectors is an angle, smooth in the vectors as a norm is away from 0, with a kink
    where they are parallel (the clothsim tester: the Hessian of a bending energy arccos(c) ** 2 at a flat hinge,
    2 by central differences, came out 0 silently: arccos's infinite slope at 1 times the zero of c's)."""
    what, kinks = _ANGLE_KINKS[ufunc]

    def watch(leaves, res):
        x = leaves[0]
        if not (isinstance(x, Tracer) and isinstance(res, Tracer)):
            return res
        xb = bottom(x)
        if np.result_type(xb).kind != "f":
            return res
        at = kinks(np.asarray(xb))
        if not at.any() or _called_by_a_rule():
            return res
        from .linalg import _norm_kink

        return _norm_kink(res, what, at=at)

    return watch


def _guarded_root_watch(inputs, kwargs):
    """``np.sqrt(s, where=s > 0, out=buf)`` of a sum of squares ``s`` (a safe root, nested levels): where the
    guard leaves a zero of s out, the result holds out's constant, whose derivatives are 0 where the norm has
    its kink; a higher derivative through it is as wrong as through np.sqrt's own value there (a Matérn kernel's
    Hessian at a training point: regress73), so it is watched there as the root's zeros are."""
    res = ufunc_call(np.sqrt, inputs, kwargs)
    x = _reverse_of(inputs[0])
    if x is None or not isinstance(res, Tracer) or _called_by_a_rule():
        return res
    try:
        hidden = (np.asarray(bottom(x)) == 0) & ~np.broadcast_to(np.asarray(bottom(kwargs["where"]), bool), res.shape)
    except ValueError:
        return res
    if not np.any(hidden) or not _quadratic(x._level, x._storage):
        return res
    from .linalg import _norm_kink

    watched = _norm_kink(res * 1.0, "np.sqrt of a sum of squares (a norm) guarded by where= at a zero vector",
                         at=hidden)
    if watched is not res:
        write(res, Ellipsis, watched)  # (the same values, now watched where the guard left the kink out)
    return res


def _watched_call(ufunc, inputs, kwargs):
    """A watched ufunc (NESTED_WATCH: np.sqrt, np.power, np.arccos...) through the general ufunc path (a fast
    path not taken: out=, where=...), watched as above."""
    if len(active_levels()) == 1 or (kwargs and ufunc in _CURVED):
        # (a function of np.abs is watched in plain calls only: with out=, where= or an error state that raises,
        # NumPy's order of writing and raising is the general path's, regress23)
        return ufunc_call(ufunc, inputs, kwargs)
    if ufunc is np.sqrt and "where" in kwargs and set(kwargs) <= {"out", "where"}:
        return _guarded_root_watch(inputs, kwargs)
    if not set(kwargs) <= {"out"}:
        return ufunc_call(ufunc, inputs, kwargs)
    out = kwargs.get("out")
    if type(out) is tuple:  # (the ufunc spelling, out=(o,); s **= 0.5)
        out = out[0] if len(out) == 1 else out
    res = NESTED_WATCH[REGISTRY[ufunc]](inputs, ufunc_call(ufunc, inputs, {}))
    return write_out(res, out, lambda ob: ufunc(*plain_operands(inputs), out=ob))


# (the smooth functions that curve somewhere: of np.abs(x) at x = 0 each is watched where it curves there)
_CURVED = frozenset((np.exp, np.exp2, np.expm1, np.log, np.log2, np.log10, np.log1p, np.sin, np.cos, np.tan, np.arctan,
           np.sinh, np.cosh, np.tanh, np.arcsinh, np.arctanh, np.cbrt, np.reciprocal, np.divide, np.logaddexp,
           np.logaddexp2, np.hypot, np.arctan2))


def _abs_forward_watch(leaves, res):
    """np.abs(x) of a real x under a higher derivative that no reverse level traces (forward over forward:
    jacobian(jacobian(f, mode="fwd"), mode="fwd"), jvp of jvp), watched at x's zeros where every level traces a
    derivative: the watches of its curved functions (np.abs(x) ** 2, np.exp(np.abs(x))) find the abs on a reverse
    level's tape, which forward levels keep none of, so the Hessian of np.sum(np.abs(x) ** 2) at 0 came out 0 for
    2 without a warning. Here the abs itself warns (its first derivative, sign(x), has derivative 0 at the kink):
    right for |x| alone, which has no second derivative at 0, and what makes a smooth composite's wrong."""
    x = leaves[0]
    if (not isinstance(x, Tracer) or not isinstance(res, Tracer) or _reverse_of(x) is not None
            or _called_by_a_rule()):
        return res
    xb = np.asarray(bottom(x))
    if xb.dtype.kind != "f" or not np.any(xb == 0):
        return res
    from .linalg import _norm_kink

    return _norm_kink(res, "np.abs(x) at x = 0 (forward over forward)", at=np.broadcast_to(xb == 0, np.shape(res)))


for _uf in (np.sqrt, np.power, np.float_power, np.square, np.multiply, np.absolute, np.fabs, *_ANGLE_KINKS, *_CURVED):
    UFUNC_HANDLERS[(_uf, "__call__")] = _watched_call
NESTED_WATCH[REGISTRY[np.absolute]] = NESTED_WATCH[REGISTRY[np.fabs]] = _abs_forward_watch
NESTED_WATCH[REGISTRY[np.sqrt]] = _function_of_abs_watch(np.sqrt, _root_watch)
NESTED_WATCH[REGISTRY[np.square]] = _abs_watch
NESTED_WATCH[REGISTRY[np.multiply]] = _product_watch
_power_of_abs = _function_of_abs_watch(np.power)
NESTED_WATCH[REGISTRY[np.power]] = NESTED_WATCH[REGISTRY[scalar_power]] = _power_watch
NESTED_WATCH[REGISTRY[np.float_power]] = _power_watch
NESTED_WATCH.update((REGISTRY[_uf], _function_of_abs_watch(_uf, _angle_watch(_uf))) for _uf in _ANGLE_KINKS)
NESTED_WATCH.update((REGISTRY[_uf], _function_of_abs_watch(_uf)) for _uf in _CURVED)
NESTED_WATCH[REGISTRY[np.hypot]] = _function_of_abs_watch(np.hypot, _hypot_watch)
