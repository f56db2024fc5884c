"""Shape, layout and type: reshape, transpose, concatenate, stack, astype...

Most of these return views in NumPy. A view needs no rule: when NumPy's
result shares memory with the input, the dispatcher makes it a view of the
input's storage and derivatives flow through the shared derivative buffer.
The rules below (all linear, via :func:`deflinear`) are used when NumPy
copies instead (``reshape`` of a non-contiguous array, ``concatenate``...).
"""
from __future__ import annotations

import inspect
import math
import sys

import numpy as np

from ..core import (write, write_out, write_reduced, FUNCTIONS, UFUNC_HANDLERS, ArrayTracer, Tracer, bind, bottom, ew_call,
                    note_cache_key, note_equality, carries_any_derivative, compared_by_mutagrad, TIED_PICKS,
                    _flatten_args, note_copy,
                    get_primitive, plain_operands)
from ..registry import deflinear, operands_dead
from .elementwise import CLIP, _has_nan
from ..tangents import ZeroTangent, is_zero, not_implemented, unbroadcast

ZERO = ZeroTangent()


def _argsort_axes(axes, ndim):
    if axes is None:
        return None
    axes = [a % ndim for a in axes]
    return tuple(np.argsort(axes))


deflinear(np.reshape, lambda g, x, *a, **k: np.reshape(g, x.shape, order=k.get("order", a[1] if len(a) > 1 else "C")))
deflinear(np.ravel, lambda g, x, order="C": np.reshape(g, x.shape, order=order))


# Orders "A" and "K" depend on the input's memory layout, which a transpose that sees only
# the cotangent cannot know: they are resolved here, from the input, to "C", "F" or (for
# "K" of a non-contiguous array) a transpose to memory order followed by a C ravel.

def _layout_order(a, order):
    b = bottom(a)
    if order in ("A", "a"):
        return "F" if b.flags.f_contiguous and not b.flags.c_contiguous else "C"
    if b.flags.c_contiguous:
        return "C"
    if b.flags.f_contiguous:
        return "F"
    return _keep_order_axes(b.shape, b.strides)


def _keep_order_axes(shape, strides):
    """The axes, outermost first, in the order ``ravel(order="K")`` visits them: a stable
    insertion sort by decreasing absolute stride in which a zero stride (a broadcast axis)
    or a length-1 axis compares with nothing (NumPy's iterator: npyiter_find_best_axis_ordering)."""
    st = [0 if n == 1 else abs(s) for n, s in zip(shape, strides)]
    perm = list(range(len(shape) - 1, -1, -1))  # innermost first
    for i0 in range(1, len(perm)):
        pos, s0 = i0, st[perm[i0]]
        for i1 in range(i0 - 1, -1, -1):
            s1 = st[perm[i1]]
            if s0 and s1:
                if s1 <= s0:
                    break
                pos = i1
        if pos != i0:
            perm.insert(pos, perm.pop(i0))
    return perm[::-1]


def _order_arg(args, kwargs, at):
    return args[at] if len(args) > at else kwargs.get("order", "C")


def _np_ravel(args, kwargs, _bound=FUNCTIONS[np.ravel]):
    a, order = args[0], _order_arg(args, kwargs, 1)
    if order in ("A", "a", "K", "k") and isinstance(a, Tracer):
        o = _layout_order(a, order)
        if type(o) is list:  # (a ravel, not a reshape: its result is contiguous, a view only if it can be)
            return _bound((np.transpose(a, o), "C"), {})
        return _bound((a, o), {})
    return _bound(args, kwargs)


def _np_reshape(args, kwargs, _bound=FUNCTIONS[np.reshape]):
    order = _order_arg(args, kwargs, 2)
    if order in ("A", "a") and isinstance(args[0], Tracer):
        kwargs = dict(kwargs, order=_layout_order(args[0], order))
        args = args[:2]
    return _bound(args, kwargs)


FUNCTIONS[np.ravel] = _np_ravel
FUNCTIONS[np.reshape] = _np_reshape
deflinear(np.transpose, lambda g, x, axes=None: np.transpose(g, _argsort_axes(axes, x.ndim)))
deflinear(np.swapaxes, lambda g, x, a, b: np.swapaxes(g, a, b))
deflinear(np.moveaxis, lambda g, x, s, d: np.moveaxis(g, d, s))
deflinear(np.expand_dims, lambda g, x, axis: np.reshape(g, x.shape))
deflinear(np.squeeze, lambda g, x, axis=None: np.reshape(g, x.shape))
deflinear(np.broadcast_to, lambda g, x, shape, subok=False: unbroadcast(g, x.shape))
deflinear(np.flip, lambda g, x, axis=None: np.flip(g, axis))
deflinear(np.fliplr, lambda g, x: np.fliplr(g))
deflinear(np.flipud, lambda g, x: np.flipud(g))
deflinear(np.rot90, lambda g, x, k=1, axes=(0, 1): np.rot90(g, -k, axes))
deflinear(np.copy, lambda g, x, order="K", subok=False: g)
for _moving in (np.reshape, np.ravel, np.transpose, np.swapaxes, np.moveaxis, np.expand_dims, np.squeeze,
                np.broadcast_to, np.flip, np.fliplr, np.flipud, np.rot90, np.copy):
    get_primitive(_moving).moves = True  # (see Primitive.moves)
get_primitive(np.copy).pointwise = True  # (an element of the copy is the element: Primitive.pointwise)
_copy_handler = FUNCTIONS[np.copy]
FUNCTIONS[np.copy] = lambda args, kwargs: note_copy(args[0] if args else kwargs.get("a"), _copy_handler(args, kwargs))


def _real_T(g, x):
    return g if x.dtype.kind != "c" else np.real(g).astype(x.dtype)


def _imag_T(g, x):
    return 1j * g


deflinear(np.real, _real_T)
deflinear(np.imag, _imag_T)
get_primitive(np.real).weak_args = get_primitive(np.imag).weak_args = True  # (np.real(3.5) is 3.5, a float)
get_primitive(np.real).moves = get_primitive(np.imag).moves = True  # (z.real of an unfilled buffer: Primitive.moves)


def _diagonal_T(g, x, offset=0, axis1=0, axis2=1):
    from ..numpy import zeros as mzeros

    z = mzeros(x.shape, np.result_type(bottom(g)))
    n = np.shape(g)[-1]
    i = np.arange(n)
    zt = np.moveaxis(z, (axis1, axis2), (-2, -1))
    zt[..., i + max(0, -offset), i + max(0, offset)] = g
    return z


deflinear(np.diagonal, _diagonal_T)
get_primitive(np.diagonal).moves = True


# -- joining and splitting --------------------------------------------------


def _concat_impl(arrays, axis=0, dtype=None, casting="same_kind"):
    return np.concatenate(arrays, axis=axis, dtype=dtype, casting=casting)


def _stack_impl(arrays, axis=0, dtype=None, casting="same_kind"):
    return np.stack(arrays, axis=axis, dtype=dtype, casting=casting)


def _concat_T(g, shapes, axis):
    if axis is None:
        sizes = [int(np.prod(s, dtype=np.int64)) for s in shapes]
        parts = np.split(g, np.cumsum(sizes)[:-1])
        return [np.reshape(p, s) for p, s in zip(parts, shapes)]
    axn = axis % len(np.shape(g))
    parts = np.split(g, np.cumsum([s[axn] for s in shapes])[:-1], axis=axn)
    return [unbroadcast(p, s) for p, s in zip(parts, shapes)]


def _stack_T(g, shapes, axis):
    ax = axis % np.ndim(g)
    return [unbroadcast(np.take(g, i, axis=ax), s) for i, s in enumerate(shapes)]


def _dense_tangent(a, t, dt):
    """The tangent of one piece to join, as an array: zeros for a symbolic zero;
    for a piece given as a (nested) list, its leaves' tangents stacked alike."""
    if is_zero(t):
        return np.zeros(np.shape(a), dt)
    if type(t) is list or type(t) is tuple:
        from ..numpy import array as marray

        return marray([_dense_tangent(ai, ti, dt) for ai, ti in zip(a, t)], dtype=dt)
    return t


def _defjoin(impl, transpose, name):
    """A function joining a list of arrays: linear in each; its transpose
    splits the cotangent back into the pieces."""
    p = get_primitive(impl, name)
    p.linear = True

    def rrule(arrays, axis=0, dtype=None, casting="same_kind"):
        y = impl(arrays, axis, dtype, casting)
        shapes = [np.shape(a) for a in arrays]
        return y, lambda g: (transpose(g, shapes, axis),)

    def frule(primals, tangents, axis=0, dtype=None, casting="same_kind"):
        (arrays,), (tans,) = primals, tangents
        y = impl(arrays, axis, dtype, casting)
        dt = np.result_type(bottom(y))
        ts = [_dense_tangent(a, t, dt) for a, t in zip(arrays, tans)]
        return y, impl(ts, axis, dtype, casting)

    def handler(args, kwargs):
        a = dict(zip(("arrays", "axis", "out"), args))
        a.update(kwargs)
        out = a.pop("out", None)
        arrays = list(a.pop("arrays"))
        axis = a.get("axis", 0)
        res = bind(p, (arrays,), {"axis": axis, "dtype": a.get("dtype"), "casting": a.get("casting", "same_kind")})
        if out is not None and isinstance(out, Tracer) and any(
                isinstance(x, Tracer) and np.shares_memory(bottom(out), bottom(x)) for x in arrays):
            _join_in_order(out, arrays, axis, impl is _stack_impl)
            return out
        return write_out(res, out, lambda ob: (np.stack if impl is _stack_impl else np.concatenate)(
            plain_operands(arrays), **a, out=ob))  # (NumPy's cast into out: casting=, same_kind by default)

    p.rrule, p.frule = rrule, frule
    return handler


def _join_in_order(out, arrays, axis, stack):
    """np.concatenate / np.stack into an ``out`` that shares memory with some of
    the arrays: NumPy copies the arrays into their parts of ``out`` one after
    the other, so a later array reads what an earlier copy wrote. So do we."""
    nd = np.ndim(out)
    start = 0
    for x in arrays:
        if axis is None:  # (concatenate only: the flattened arrays, one after the other)
            n = int(np.size(x))
            write(out, slice(start, start + n), np.ravel(x))
        elif stack:
            write(out, (slice(None),) * (axis % nd) + (start,), x)
            n = 1
        else:
            ax = axis % nd
            n = np.shape(x)[ax]
            write(out, (slice(None),) * ax + (slice(start, start + n),), x)
        start += n


FUNCTIONS[np.concatenate] = _defjoin(_concat_impl, _concat_T, "np.concatenate")
FUNCTIONS[np.stack] = _defjoin(_stack_impl, _stack_T, "np.stack")


def _composite(fn):
    """Differentiate through NumPy's own Python implementation of ``fn``
    (for functions built from dispatched NumPy calls)."""
    impl = fn._implementation

    def handler(args, kwargs):
        return impl(*args, **kwargs)

    FUNCTIONS[fn] = handler


for _f in (np.hstack, np.split, np.array_split, np.hsplit, np.vsplit, np.dsplit):
    _composite(_f)


def _each(fn):
    def handler(args, kwargs):
        # (plain lists and numbers become arrays, as NumPy's own functions make them)
        res = tuple(fn(a if isinstance(a, (Tracer, np.ndarray)) else np.asarray(a)) for a in args)
        return res[0] if len(res) == 1 else res  # (a tuple for several, as NumPy 2 returns)

    return handler


def _atleast_1d(x):
    return np.reshape(x, (1,)) if np.ndim(x) == 0 else x


def _atleast_2d(x):
    n = np.ndim(x)
    return np.reshape(x, (1, 1)) if n == 0 else (np.expand_dims(x, 0) if n == 1 else x)


def _atleast_3d(x):
    n = np.ndim(x)
    if n == 0:
        return np.reshape(x, (1, 1, 1))
    if n == 1:
        return np.expand_dims(np.expand_dims(x, 0), -1)
    return np.expand_dims(x, -1) if n == 2 else x


FUNCTIONS[np.atleast_1d] = _each(_atleast_1d)
FUNCTIONS[np.atleast_2d] = _each(_atleast_2d)
FUNCTIONS[np.atleast_3d] = _each(_atleast_3d)
FUNCTIONS[np.vstack] = lambda args, kwargs: np.concatenate([_atleast_2d(a) for a in args[0]], axis=0, **kwargs)
FUNCTIONS[np.dstack] = lambda args, kwargs: np.concatenate([_atleast_3d(a) for a in args[0]], axis=2)
FUNCTIONS[np.column_stack] = lambda args, kwargs: np.concatenate(
    [np.reshape(a, (-1, 1)) if np.ndim(a) < 2 else a for a in args[0]], axis=1)


def _np_append(args, kwargs):
    a = dict(zip(("arr", "values", "axis"), args))
    a.update(kwargs)
    if a.get("axis") is None:
        return np.concatenate([np.ravel(a["arr"]), np.ravel(a["values"])])
    return np.concatenate([a["arr"], a["values"]], axis=a["axis"])


def _np_outer(args, kwargs):
    a = dict(zip(("a", "b", "out"), args))
    a.update(kwargs)
    res = np.multiply(np.reshape(a["a"], (-1, 1)), np.reshape(a["b"], (1, -1)))
    return write_out(res, a.get("out"), lambda ob: np.outer(plain_operands(a["a"]), plain_operands(a["b"]), out=ob))


def _np_trace(args, kwargs):
    a = dict(zip(("a", "offset", "axis1", "axis2", "dtype", "out"), args))
    a.update(kwargs)
    res = np.sum(np.diagonal(a["a"], a.get("offset", 0), a.get("axis1", 0), a.get("axis2", 1)), axis=-1,
                 dtype=a.get("dtype"))
    # (into an out= of another dtype NumPy sums the diagonal there)
    return write_reduced(res, a.get("out"), "add", lambda ob: np.trace(
        plain_operands(a["a"]), a.get("offset", 0), a.get("axis1", 0), a.get("axis2", 1), a.get("dtype"), out=ob))


FUNCTIONS[np.append] = _np_append
FUNCTIONS[np.outer] = _np_outer
FUNCTIONS[np.trace] = _np_trace


def _np_clip(args, kwargs):
    """np.clip: NumPy's maximum, minimum or clip ufunc, with its keywords: ``dtype=``
    and ``casting=`` select the loop; ``where=`` writes only the selected elements of
    ``out`` (without ``out`` NumPy leaves the others uninitialized: refused)."""
    a = dict(zip(("a", "a_min", "a_max", "out"), args))
    a.update(kwargs)
    x = a["a"]
    lo = a.get("a_min", a.get("min"))
    hi = a.get("a_max", a.get("max"))
    loop = {k: a[k] for k in ("dtype", "casting") if a.get(k) is not None}
    o = a.get("out")
    o = o[0] if type(o) is tuple and len(o) == 1 else o
    if lo is not None and hi is not None and not loop and a.get("where", True) is True and _one_clip(x, lo, hi):
        # one primitive, NumPy's clip ufunc (the composition below is two passes and two records)
        if o is not None and type(o) is ArrayTracer and o._geom is None:
            r = ew_call(CLIP, (x, lo, hi), o)  # (in place: its partials now, where o is x)
            if r is not None:
                return r
        res = ew_call(CLIP, (x, lo, hi))
        if res is None:
            res = bind(CLIP, (x, lo, hi))
        return write_out(res, o, lambda ob: np.clip(plain_operands(x), plain_operands(lo), plain_operands(hi),
                                                    out=ob))
    res = x
    # (np.clip(x, lo, hi, out=x) overwrites x, and the maximum's result is clip's own temporary: the picks'
    # records keep their partials, an eighth of the operand, not the operand, which the write would save)
    into = isinstance(o, (Tracer, np.ndarray)) and isinstance(x, Tracer) and np.may_share_memory(bottom(o), bottom(x))
    if lo is not None:
        with operands_dead(into):
            res = np.maximum(res, lo, **loop)
    if hi is not None:
        with operands_dead(into or lo is not None):
            res = np.minimum(res, hi, **loop)
    if res is x:
        res = np.copy(x) if "dtype" not in loop else x.astype(loop["dtype"])
    elif lo is not None or hi is not None:
        from .reductions import numpy_zero_signs

        if lo is not None and hi is not None:
            lb, hb = bottom(lo), bottom(hi)
            eq = np.asarray(lb == hb) & np.isfinite(lb)
            if np.any(eq):
                # clip(x, c, c) is c whatever x is: its derivative goes to the bounds, half each (the
                # composition gave x a quarter at x == c, where both one-sided derivatives are 0)
                dt = bottom(res).dtype
                res = np.where(eq, lo + (hi - lo) * 0.5, res)
                if bottom(res).dtype != dt:
                    res = res.astype(dt)

        # (np.maximum returns its second operand at a tie, np.clip its first: -0.0 clipped at 0.0)
        res = numpy_zero_signs(res, lambda: np.clip(bottom(x), bottom(lo), bottom(hi), **loop))
    out = a.get("out")
    if type(out) is tuple:  # (the ufunc spelling, out=(o,))
        out = out[0] if len(out) == 1 else out
    where = a.get("where", True)
    if where is not True:
        if out is None:
            from ..errors import NoRuleError, user_line

            raise NoRuleError(f"np.clip with where= and no out= at {user_line()}: NumPy leaves the elements where "
                              "the mask is False uninitialized. Pass out= (the array that keeps them), or clip "
                              "everything and select: np.where(mask, np.clip(x, lo, hi), other).")
        np.copyto(out, res, casting=loop.get("casting", "same_kind"), where=where)
        return out
    return write_out(res, out, lambda ob: np.clip(plain_operands(x), plain_operands(lo), plain_operands(hi), out=ob,
                                                  **loop))


FUNCTIONS[np.clip] = _np_clip


def _one_clip(x, lo, hi) -> bool:
    """Whether np.clip(x, lo, hi) is the clip primitive's (rules/elementwise.py): real operands, a floating x, no
    NaN, no lo equal to its hi (where the composition of the picks gives the bounds half each)."""
    xb = bottom(x)
    if getattr(xb, "dtype", None) is None or xb.dtype.kind != "f" or _has_nan(xb):
        return False
    if type(lo) in _NUMBERS and type(hi) in _NUMBERS:  # (the common case: two numbers)
        return not (math.isnan(lo) or math.isnan(hi)) and lo != hi
    lb, hb = bottom(lo), bottom(hi)
    if type(lb) in (list, tuple) or type(hb) in (list, tuple):  # (bounds as lists: np.result_type takes no list)
        if any(isinstance(v, Tracer) for v in _flatten_args((lb, hb))[0]):
            return False
        lb, hb = np.asarray(lb), np.asarray(hb)
    if np.result_type(lb).kind not in "fiub" or np.result_type(hb).kind not in "fiub" or _has_nan(lb) or (
            _has_nan(hb)):
        return False
    return not np.any(np.equal(lb, hb))


_NUMBERS = (float, int)


def _clip_ufunc(ufunc, inputs, kwargs):
    """NumPy's internal ``clip`` ufunc, which ``ndarray.clip`` calls."""
    kwargs = dict(kwargs)
    out = kwargs.pop("out", None)
    if type(out) is tuple:
        out = out[0]
    return _np_clip(tuple(inputs), {"out": out, **kwargs})


if hasattr(getattr(np, "_core", None), "umath") and isinstance(getattr(np._core.umath, "clip", None), np.ufunc):
    UFUNC_HANDLERS[(np._core.umath.clip, "__call__")] = _clip_ufunc


# -- dtype -------------------------------------------------------------------


def _astype_impl(x, dtype):
    if type(x) is float or type(x) is complex:  # a weak scalar (core.Storage.weak): as its NumPy scalar
        x = np.asarray(x)[()]
    return x.astype(dtype)


astype_p = get_primitive(_astype_impl, "ndarray.astype")
astype_p.pointwise = True


def _astype_T(g, x, dtype):
    if x.dtype.kind != "c" and np.iscomplexobj(bottom(g)):
        g = np.real(g)
    return g.astype(x.dtype) if hasattr(g, "astype") else np.asarray(g, x.dtype)


deflinear(_astype_impl, _astype_T)


def astype(x, dtype, copy=True, casting="unsafe"):
    """``x.astype(dtype)``: float and complex casts are differentiable; casting
    to an integer or boolean type gives a plain array (no derivative)."""
    dt = np.dtype(dtype)
    if casting == "same_value":  # a check of the values themselves (NumPy >= 2.4): on them
        bottom(x).astype(dt, casting=casting)
    elif casting != "unsafe":  # NumPy's check (and its error), on an empty array of x's dtype
        np.empty(0, np.result_type(bottom(x))).astype(dt, casting=casting)
    if dt.kind in "iub":
        return bottom(x).astype(dt)  # an integer or boolean result carries no derivative
    if dt.kind not in "fc":
        from ..errors import TracerEscapeError, escape_error

        raise escape_error(f"x.astype({dt}) (a traced value in an array of {dt} elements)", TracerEscapeError)
    if not copy and dt == x.dtype:
        return x
    if dt.kind != "c" and np.result_type(bottom(x)).kind == "c":
        from ..errors import warn_complex_cast

        warn_complex_cast()  # (NumPy's, at the user's line; the real part's cast does not warn again)
        x = np.real(x)
    return bind(astype_p, (x, dt))


def _np_astype(args, kwargs):
    a = dict(zip(("x", "dtype"), args))
    a.update(kwargs)
    if a.get("device") not in (None, "cpu"):
        raise ValueError(f"Device not understood. Only \"cpu\" is allowed, but received: {a['device']}")
    return astype(a["x"], a["dtype"], copy=a.get("copy", True))


FUNCTIONS[np.astype] = _np_astype


def view(x, dtype=None):
    if dtype is None:
        return bind(view_p, (x,))
    dt = np.dtype(dtype)
    b = bottom(x)
    if dt.kind in "iub":
        if b.dtype.kind in "fc" and not x._plain_constant():  # (a constant's bits are plain)
            # bits carry no derivative, and floats made from them again (viewed back, computed
            # from them, or from plain copies of them: np.array, tolist, tobytes, struct) would
            # silently have none: no way out of plain integers can be watched, so none is given
            from ..errors import NoRuleError, user_line

            raise NoRuleError(
                f"x.view({dt}) of a traced array at {user_line()}: its bits carry no derivative (bit "
                "manipulation has no derivative), and floating-point values made from them again would "
                "silently lose it. Test the values with comparisons, np.signbit(x) or np.frexp(x) (all "
                f"differentiated as NumPy's values); for the bits themselves (hashing), mg.value(x).view({dt}) "
                "is a plain read-only view, and nothing computed from it carries a derivative.")
        # a constant's bits, for reading: read-only, since a write through it would change x
        # unseen by the derivative (errors.replaced_error names it)
        v = b.view(dt)
        if type(v) is not np.ndarray:  # (a NumPy scalar's bits: a NumPy scalar, immutable)
            return v
        v.flags.writeable = False
        from ..errors import note_readonly_view

        note_readonly_view(v)
        return v
    if dt.kind not in "fc":
        from ..errors import TracerEscapeError, escape_error

        raise escape_error(f"x.view({dt})", TracerEscapeError)
    if np.empty(0, b.dtype).real.dtype != np.empty(0, dt).real.dtype:
        from ..errors import NoRuleError, user_line

        raise NoRuleError(
            f"x.view({dt}) of a {b.dtype} array at {user_line()} reinterprets its bits as numbers of another "
            "precision, which has no derivative (only views between a complex dtype and its real parts, "
            "complex128 and float64 say, are linear). To convert the values use x.astype(dtype).")
    return bind(view_p, (x, dt))


def _view_impl(x, dtype=None):
    return x.view() if dtype is None else x.view(dtype)


view_p = get_primitive(_view_impl, "ndarray.view")
deflinear(_view_impl, lambda g, x, dtype=None: g)


# -- functions of metadata only: computed on plain values ------------------

PLAIN_FUNCTIONS = set()


def _plain(fn):
    try:
        params = list(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        params = []
    at = params.index("out") if "out" in params else None  # (np.isposinf(x, y): out is the second)

    equality = fn in (np.array_equal, np.array_equiv, np.allclose, np.isclose)

    def handler(args, kwargs):
        if equality:
            note_equality(args)
            if fn is not np.isclose or all(np.ndim(a) == 0 for a in args[:2]):
                # (np.isclose of one number: a cache's key with a tolerance, `np.isclose(a, self.a)`: regress100)
                res = fn(*plain_operands(list(args)), **plain_operands(dict(kwargs)))
                note_cache_key(args, res)
                return res
        out = None
        if at is not None:  # a traced out= buffer takes the result as a recorded write, not in its memory
            if isinstance(kwargs.get("out"), Tracer):
                kwargs = dict(kwargs)
                out = kwargs.pop("out")
            elif len(args) > at and isinstance(args[at], Tracer):
                out = args[at]
                args = (*args[:at], None, *args[at + 1:])
        return write_out(fn(*plain_operands(list(args)), **plain_operands(dict(kwargs))), out)

    FUNCTIONS[fn] = handler
    PLAIN_FUNCTIONS.add(fn)


for _f in (np.shape, np.ndim, np.size, np.result_type, np.can_cast, np.iscomplexobj, np.isrealobj,
           np.min_scalar_type, np.may_share_memory, np.shares_memory, np.array_equal, np.array_equiv,
           np.allclose, np.isclose, np.argmax, np.argmin, np.argsort, np.argwhere, np.nonzero,
           np.flatnonzero, np.searchsorted, np.count_nonzero, np.isreal, np.iscomplex, np.all, np.any,
           np.isneginf, np.isposinf, np.lexsort, np.argpartition, np.digitize,
           np.nanargmax, np.nanargmin,
           np.isin, np.diag_indices_from, np.tril_indices_from, np.triu_indices_from, np.common_type,
           np.einsum_path):
    _plain(_f)


def _warn_pick_at_a_tie(fn):
    """np.argmax / np.argmin (and nanarg*) of a differentiated array whose extreme is tied: the index picks one
    of the tied elements, and a gather there (x[np.argmax(x)]) gives it all of their derivative, a one-sided
    choice, where np.max / np.min split a tie evenly: x[np.argmax(x)] - np.max(x), identically 0, got
    (0, 0.5, -0.5, 0) at (1, 3, 3, 0.5), a k-means residual D[np.argmin(D)] - D.min() (2, 0), with no warning
    (the assignment tester). The index is noted (core.TIED_PICKS), and the warning given where a traced array is
    gathered at it (core.note_tied_pick), not here: an accuracy metric (np.argmax(logits, 1) == labels at tied
    zero-initialised logits) or a pivot search reads the index only, with no derivative to split (regress96)."""
    general = FUNCTIONS[fn]
    extreme = {"argmax": np.max, "argmin": np.min, "nanargmax": np.nanmax, "nanargmin": np.nanmin}[fn.__name__]

    def handler(args, kwargs):
        out = general(args, kwargs)
        x = args[0] if args else kwargs.get("a")
        if isinstance(x, Tracer) and carries_any_derivative(x) and np.size(x) > 1:
            xb = np.asarray(bottom(x))
            axis = kwargs.get("axis", args[1] if len(args) > 1 else None)
            with np.errstate(invalid="ignore"):
                m = extreme(xb, axis=axis, keepdims=True)
                tied = np.any(np.sum((xb == m) & np.isfinite(xb), axis=axis) > 1)
            if tied and not compared_by_mutagrad(sys._getframe(1)):
                # (warned where a traced array is gathered at this index: core.note_tied_pick)
                if len(TIED_PICKS) >= 64:
                    del TIED_PICKS[next(iter(TIED_PICKS))]
                TIED_PICKS[id(out)] = (out, fn.__name__)
        return out

    FUNCTIONS[fn] = handler


for _f in (np.argmax, np.argmin, np.nanargmax, np.nanargmin):
    _warn_pick_at_a_tie(_f)


def _attribute(fn, read):
    """np.shape / np.ndim / np.size of one traced array: its attribute, read directly (the
    general plain-value handler flattens the arguments, 10x the cost; rules call these often)."""
    general = FUNCTIONS[fn]

    def handler(args, kwargs):
        if len(args) == 1 and not kwargs and isinstance(args[0], Tracer):
            return read(args[0])
        return general(args, kwargs)

    FUNCTIONS[fn] = handler


_attribute(np.shape, lambda x: x.shape)
_attribute(np.ndim, lambda x: x.ndim)
_attribute(np.size, lambda x: x.size)


def _text(fn):
    """np.array2string, np.array_str, np.array_repr: the digits of a traced value are a plain
    number the derivative does not reach (float(...) of them), as f"{x:.17g}" is. A constant
    may show them, and so may a statement that only prints or logs; anything else raises."""
    def handler(args, kwargs):
        from ..errors import printing_statement, user_frame

        traced = [v for v in list(args) + list(kwargs.values()) if isinstance(v, Tracer)]
        if any(not t._plain_constant() for t in traced) and not printing_statement(user_frame(sys._getframe(1))):
            from ..errors import PRINT_HINT, TracerEscapeError, escape_error

            raise escape_error(f"np.{fn.__name__} of a traced value (its digits as text)", TracerEscapeError,
                               PRINT_HINT)
        return fn(*plain_operands(list(args)), **plain_operands(dict(kwargs)))

    FUNCTIONS[fn] = handler
    PLAIN_FUNCTIONS.add(fn)


for _f in (np.array_repr, np.array_str, np.array2string):
    _text(_f)


# -- sliding windows: a read-only (or writeable) view whose elements overlap --

_swv = np.lib.stride_tricks.sliding_window_view


def _swv_impl(x, window_shape, axis=None, subok=False, writeable=False):
    return _swv(x, window_shape, axis=axis, subok=subok, writeable=writeable)


def _swv_T(g, x, window_shape, axis=None, subok=False, writeable=False):
    # only reached if NumPy ever copies: scatter-add every window back
    from ..numpy import zeros as mzeros

    z = mzeros(x.shape, np.result_type(bottom(g)))
    win = _swv(np.arange(int(np.prod(x.shape))).reshape(x.shape), window_shape, axis=axis)
    np.add.at(np.reshape(z, -1), np.reshape(win, -1), np.reshape(g, -1))
    return z


swv_p = get_primitive(_swv_impl, "np.lib.stride_tricks.sliding_window_view")
deflinear(_swv_impl, _swv_T)
FUNCTIONS[_swv] = lambda args, kwargs: bind(swv_p, args, kwargs)


# -- as_strided: a view of the memory, on traced arrays through mutagrad.numpy --------

_as_strided = np.lib.stride_tricks.as_strided


def _as_strided_impl(x, shape, strides, writeable):
    if isinstance(x, Tracer):  # an outer level's traced array: a view of it at its level
        return as_strided(x, shape, strides, writeable=writeable)
    return _as_strided(x, shape, strides, writeable=writeable)


def _as_strided_T(g, x, shape, strides, writeable):
    # (never reached: the result is a view of the argument's memory, whose derivative goes
    # through the memory it shares, as slicing's; no record is kept for it)
    raise NotImplementedError("the transpose of as_strided is its view of the argument's memory")


as_strided_p = get_primitive(_as_strided_impl, "mutagrad.numpy.as_strided")
deflinear(_as_strided_impl, _as_strided_T)


def as_strided(x, shape=None, strides=None, subok=False, writeable=True):
    """``np.lib.stride_tricks.as_strided`` of a traced array: a view of its memory with the
    given shape and byte strides, differentiated as any view (elements that overlap add
    their derivatives; writes through an overlapping view raise). The view must stay within
    the memory of the array it was made from."""
    if not isinstance(x, Tracer):
        return _as_strided(x, shape, strides, subok=subok, writeable=writeable)
    from ..errors import NoRuleError, user_line

    b = bottom(x)
    shape = b.shape if shape is None else tuple(shape)
    strides = b.strides if strides is None else tuple(strides)
    if any(n > 1 and st % b.itemsize for n, st in zip(shape, strides)):
        raise NoRuleError(
            f"as_strided at {user_line()} with the byte strides {strides}, not multiples of the array's "
            f"itemsize ({b.itemsize}): its elements would be made of the bytes of parts of several of the "
            "array's elements, reinterpreted, which have no derivative. Give strides in whole elements "
            "(x.itemsize times a count).")
    v = _as_strided(b, shape, strides, writeable=False)
    if v.size and not x._storage.contains(v):
        raise NoRuleError(
            f"as_strided at {user_line()} makes a view that reaches memory outside the array it was made "
            "from: those values are not the array's, and have no derivative. Check the shape and the "
            "strides (in bytes, x.itemsize per element).")
    return bind(as_strided_p, (x, shape, strides, writeable), {})


# -- a few more constructions, as compositions ----------------------------------


def _np_broadcast_arrays(args, kwargs):
    args = [a if isinstance(a, Tracer) else np.asarray(a) for a in args]
    shape = np.broadcast_shapes(*(np.shape(a) for a in args))
    # as NumPy: all of the shape already, the arrays themselves; else one of the shape is a
    # writeable view of it (and the others read-only broadcast views)
    if all(np.shape(a) == shape for a in args):
        return tuple(args)
    return tuple(a[...] if np.shape(a) == shape else _broadcast_view(a, shape) for a in args)


def _broadcast_view(a, shape):
    """NumPy's broadcast_arrays view of ``a`` at ``shape``: writable, as NumPy's is (with a
    DeprecationWarning there), so that a write into distinct elements of it (a row) is a write into
    ``a``, as in a plain call (a read-only view refused it, and a program catching the ValueError
    went on along another path); a write into elements that share memory is refused."""
    if not isinstance(a, Tracer):  # (a plain array's, writable as NumPy's, without its warn-on-write
        # flag: mutagrad reads the flags of the arrays a rule is given, and reading those warns)
        return np.lib.stride_tricks.as_strided(a, shape, np.broadcast_to(a, shape).strides,
                                               writeable=bool(a.flags.writeable))
    from ..numpy import as_strided

    if np.ndim(a) == 0:  # (a 0-d array's memory as one element of the shape's rank; a scalar's, a copy)
        a = np.reshape(a, (1,) * len(shape))
    return as_strided(a, shape, np.broadcast_to(bottom(a), shape).strides, writeable=True)


def _np_linspace(args, kwargs):
    from ..numpy import linspace

    return linspace(*args, **kwargs)


def _np_delete(args, kwargs):
    a = dict(zip(("arr", "obj", "axis"), args))
    a.update(kwargs)
    arr, axis = a["arr"], a.get("axis")
    if axis is None:
        arr, axis = np.ravel(arr), 0
    n = np.shape(arr)[axis]
    keep = np.delete(np.arange(n), bottom(a["obj"]))
    return np.take(arr, keep, axis=axis)


def _np_vander(args, kwargs):
    """NumPy's algorithm: the powers as a running product (x, x*x, (x*x)*x...),
    so the values are NumPy's to the last bit (np.polyfit's too)."""
    a = dict(zip(("x", "N", "increasing"), args))
    a.update(kwargs)
    x = a["x"]
    if np.ndim(x) != 1:
        raise ValueError("x must be a one-dimensional array or sequence.")
    m = np.shape(x)[0]
    n = m if a.get("N") is None else a["N"]
    dt = np.promote_types(np.result_type(bottom(x)), int)
    if isinstance(x, Tracer) and x.dtype != dt:
        x = x.astype(dt)  # NumPy writes x into the result's dtype, then multiplies there (float32: float64)
    cols = [np.ones((m, min(n, 1)), dt)]
    if n > 1:
        cols.append(np.cumprod(np.broadcast_to(np.reshape(x, (-1, 1)), (m, n - 1)), axis=1))
    v = np.concatenate(cols, axis=1)
    return v if a.get("increasing", False) else v[:, ::-1]


FUNCTIONS[np.broadcast_arrays] = _np_broadcast_arrays
FUNCTIONS[np.linspace] = _np_linspace
FUNCTIONS[np.delete] = _np_delete
FUNCTIONS[np.vander] = _np_vander


# -- NumPy 2 names and small compositions ---------------------------------------


def _np_angle(args, kwargs):
    a = dict(zip(("z", "deg"), args))
    a.update(kwargs)
    z = a["z"]
    r = np.arctan2(np.imag(z), np.real(z)) if np.iscomplexobj(bottom(z)) else np.arctan2(np.zeros_like(z), z)
    return r * (180.0 / np.pi) if a.get("deg", False) else r


def _np_rollaxis(args, kwargs):
    a = dict(zip(("a", "axis", "start"), args))
    a.update(kwargs)
    x, axis, start = a["a"], a["axis"], a.get("start", 0)
    n = np.ndim(x)
    axis %= n
    start = start + n if start < 0 else start
    if axis < start:
        start -= 1
    return np.moveaxis(x, axis, start) if axis != start else x[...]


def _cumulative(fn, numpy_fn):
    def handler(args, kwargs):
        a = dict(zip(("x",), args))
        a.update(kwargs)
        x, axis = a["x"], a.get("axis")
        if axis is None:
            if np.ndim(x) > 1:
                raise ValueError("axis must be specified for multi-dimensional arrays")
            axis = 0
        dtype = a.get("dtype")
        if dtype is None and a.get("out") is not None:  # (NumPy accumulates in a wider out's dtype, as cumsum)
            from .reductions import _loop_dtype

            dtype = _loop_dtype({"a": x, "out": a["out"]})
        res = fn(x, axis=axis, dtype=dtype)
        if a.get("include_initial", False):
            shape = list(np.shape(res))
            shape[axis] = 1
            init = np.zeros(shape) if fn is np.cumsum else np.ones(shape)
            res = np.concatenate([init.astype(np.result_type(bottom(res))), res], axis=axis)
        out = a.get("out")
        from .reductions import accumulate_out_of_another_shape

        def numpy_check():  # NumPy's own error for this out, on plain values
            probe = np.ones(np.shape(x), np.asarray(bottom(x)).dtype)
            numpy_fn(probe, axis=a.get("axis"), dtype=a.get("dtype"), out=np.empty_like(bottom(out)),
                     include_initial=a.get("include_initial", False))

        accumulate_out_of_another_shape(x, np.shape(res), out, f"np.{numpy_fn.__name__}", numpy_check)
        return write_out(res, out)

    return handler


def _np_fix(args, kwargs):
    a = dict(zip(("x", "out"), args))
    a.update(kwargs)
    res = np.trunc(a["x"])
    return write_out(res, a.get("out"), lambda ob: np.fix(plain_operands(a["x"]), out=ob))


def _np_unwrap(args, kwargs):
    # unwrap(p) = p + k period with k integers, piecewise constant: the derivative is the identity in p, and
    # k in the period (the numpyedge2 tester: a traced period= was refused); the discontinuity picks k only
    from ..core import stop_gradient

    a = dict(zip(("p", "discont", "axis", "period"), args))
    a.update(kwargs)
    p = a.pop("p")
    period = a.get("period", 2 * np.pi)
    pb = np.asarray(bottom(p))
    plain = np.asarray(np.unwrap(pb, **{k: bottom(v) for k, v in a.items()}))
    if not isinstance(period, Tracer):
        return p + stop_gradient(plain - pb)
    k = np.round((plain - pb) / bottom(period))
    r = p + k * period
    rb = bottom(r)
    if type(rb) is np.ndarray and rb.shape == plain.shape and rb.dtype == plain.dtype:
        rb[...] = plain  # (NumPy's own bits: the same values up to rounding)
    return r


def _np_bincount(args, kwargs):
    a = dict(zip(("x", "weights", "minlength"), args))
    a.update(kwargs)
    x = np.asarray(bottom(a["x"]))
    w = a.get("weights")
    if not isinstance(w, Tracer):
        return np.bincount(x, bottom(w) if w is not None else None, a.get("minlength", 0))
    if np.iscomplexobj(bottom(w)):  # NumPy takes real weights only: its own error
        return np.bincount(x, bottom(w), a.get("minlength", 0))
    return bind(bin_sums_p, (w, x, a.get("minlength", 0)))


def _bin_sums_impl(w, idx, nb):
    """np.bincount(idx, weights=w, minlength=nb): NumPy's own sums, linear in the weights
    (complex weights by parts, as np.histogram adds them)."""
    if np.iscomplexobj(w):
        return np.bincount(idx, np.real(w), nb) + 1j * np.bincount(idx, np.imag(w), nb)
    return np.bincount(idx, w, nb)


bin_sums_p = get_primitive(_bin_sums_impl, "np.bincount")
deflinear(_bin_sums_impl, lambda g, w, idx, nb: np.take(g, idx))  # each weight's bin


FUNCTIONS[np.angle] = _np_angle
FUNCTIONS[np.rollaxis] = _np_rollaxis
FUNCTIONS[np.fix] = _np_fix
FUNCTIONS[np.unwrap] = _np_unwrap
FUNCTIONS[np.bincount] = _np_bincount
for _name, _handler in (("matrix_transpose", lambda args, kwargs: np.swapaxes(args[0], -1, -2)),
                        ("cumulative_sum", _cumulative(np.cumsum, np.cumulative_sum)),
                        ("cumulative_prod", _cumulative(np.cumprod, np.cumulative_prod))):
    if hasattr(np, _name):  # NumPy >= 2.1
        FUNCTIONS[getattr(np, _name)] = _handler


# -- insert, unstack, trim_zeros -------------------------------------------------------


def _np_insert(args, kwargs):
    """A gather from the elements of ``arr`` and ``values``: NumPy's own insert,
    applied to the element numbers, says where each one goes (positions,
    broadcasting of ``values`` and all)."""
    from ..numpy import _has_tracer, array as marray

    a = dict(zip(("arr", "obj", "values", "axis"), args))
    a.update(kwargs)
    arr, values, axis, obj = a["arr"], a["values"], a.get("axis"), bottom(a["obj"])
    arr = arr if isinstance(arr, Tracer) else np.asarray(arr)
    values = values if isinstance(values, Tracer) else (marray(values) if _has_tracer(values) else np.asarray(values))
    dt = np.result_type(bottom(arr))
    if dt.kind not in "fc":  # an integer or boolean result carries no derivative
        return np.insert(bottom(arr), obj, bottom(values), axis)
    if np.result_type(bottom(values)) != dt:
        values = astype(values, dt) if isinstance(values, Tracer) else values.astype(dt)
    n, m = int(np.size(arr)), int(np.size(values))
    src = np.insert(np.arange(n).reshape(np.shape(arr)), obj, n + np.arange(m).reshape(np.shape(values)), axis)
    return np.concatenate([np.ravel(arr), np.ravel(values)])[src]


def _np_trim_zeros(args, kwargs):
    """A slice of ``filt``: the bounds come from its plain values, as NumPy's."""
    from numpy.lib.array_utils import normalize_axis_tuple

    a = dict(zip(("filt", "trim", "axis"), args))
    a.update(kwargs)
    filt, trim, axis = a["filt"], a.get("trim", "fb").lower(), a.get("axis")
    if trim not in {"fb", "bf", "f", "b"}:
        raise ValueError(f"unexpected character(s) in `trim`: {trim!r}")
    fb = np.asarray(bottom(filt))
    nd = fb.ndim
    axes = tuple(range(nd)) if axis is None else normalize_axis_tuple(axis, nd, argname="axis")
    if not axes:
        return filt
    nonzero = np.argwhere(fb)
    if nonzero.size == 0:  # all zero: an empty slice
        start = stop = np.zeros(nd, dtype=np.intp)
    else:
        start = nonzero.min(axis=0) if "f" in trim else (None,) * nd
        stop = nonzero.max(axis=0) + 1 if "b" in trim else (None,) * nd
    sl = tuple(slice(start[k], stop[k]) if k in axes else slice(None) for k in range(nd))
    res = filt[sl[0]] if nd == 1 else filt[sl]
    if isinstance(filt, Tracer) and np.shape(res) != fb.shape and _in_poly1d(sys._getframe(1)):
        # np.poly1d trimming traced leading zero coefficients: the polynomial depends on them smoothly (a
        # leading coefficient's derivative is x**n, which was dropped silently), but not through the trim,
        # whose length would change; -0.0 keeps every bit of the slice. All zero: poly1d would put a plain
        # [0.] in place of the empty slice (and its refusal): [0.] here, traced (regress46)
        dropped = filt
        if not np.size(res) and nd == 1 and fb.size:
            res = filt[-1:] + 0.0  # (the constant term, 0.0 as NumPy's [0]: +0 whatever the zero's sign)
            if fb.size == 1:  # (a zero constant, np.poly1d(0.0): nothing dropped, its derivative kept; regress108)
                return res
            dropped = filt[:-1]
        elif nd == 1 and trim == "f":  # (poly1d's: the leading ones; NotImplemented along their tangents alone)
            dropped = filt[:fb.size - np.size(res)]
        res = res + bind(_trimmed_p, (dropped,), {"shape": tuple(np.shape(res))})
    return res


def _in_poly1d(frame):
    """Whether np.poly1d's constructor is the caller (through NumPy's dispatch)."""
    for _ in range(6):
        if frame is None:
            return False
        if getattr(frame.f_code, "co_qualname", "") == "poly1d.__init__":
            return True
        frame = frame.f_back
    return False


def _trimmed_impl(x, shape):
    return np.full(shape, -0.0, dtype=np.asarray(x).dtype)


_trimmed_p = get_primitive(_trimmed_impl, "np.trim_zeros")  # (only for np.poly1d: _in_poly1d)
_TRIMMED = ("np.poly1d dropped leading coefficients that are exactly 0: the polynomial depends on them (a "
            "leading coefficient's derivative is x**n), but the poly1d does not hold them; differentiate the "
            "coefficients with the np.poly* functions instead (np.polyval(c, x) for np.poly1d(c)(x), "
            "np.polymul(c, d) for np.poly1d(c) * d)")


def _trimmed_rrule(x, shape):
    return _trimmed_impl(bottom(x), shape), lambda g: (not_implemented(_TRIMMED),)


def _trimmed_frule(primals, tangents, shape):
    (x,), (t,) = primals, tangents
    return _trimmed_impl(bottom(x), shape), not_implemented(_TRIMMED) * t  # (zero along plain zeros)


_trimmed_p.rrule, _trimmed_p.frule = _trimmed_rrule, _trimmed_frule


FUNCTIONS[np.insert] = _np_insert
FUNCTIONS[np.trim_zeros] = _np_trim_zeros
_composite(np.unstack)  # tuple(np.moveaxis(x, axis, 0)): views


# -- applying a function along axes: the user's function runs on traced slices ------


def _take_args(names, args, kwargs):
    """The leading named arguments of ``f(a, b, *args, **kwargs)``, positional or
    keyword; the rest are the user function's."""
    kwargs = dict(kwargs)
    vals = list(args[:len(names)])
    for name in names[len(vals):]:
        vals.append(kwargs.pop(name))
    return vals, tuple(args[len(names):]), kwargs


def _np_apply_along_axis(args, kwargs):
    """NumPy's algorithm (its own is not traceable: it calls np.asanyarray): the
    function's results are written into a buffer of the first result's dtype,
    with NumPy's broadcasting and casting, then the result axes move to ``axis``."""
    from numpy.lib.array_utils import normalize_axis_index

    from ..core import active_levels, lift
    from ..numpy import asarray as masarray

    (func1d, axis, arr), rest, kw = _take_args(("func1d", "axis", "arr"), args, kwargs)
    arr = arr if isinstance(arr, Tracer) else np.asarray(arr)
    axis = normalize_axis_index(axis, np.ndim(arr))
    view = np.moveaxis(arr, axis, -1)
    inds = [ind + (Ellipsis,) for ind in np.ndindex(np.shape(view)[:-1])]
    if not inds:
        raise ValueError("Cannot apply_along_axis when any iteration dimensions are 0")
    res = masarray(func1d(view[inds[0]], *rest, **kw))
    dt = np.result_type(bottom(res))
    buff = np.zeros(np.shape(view)[:-1] + np.shape(res), dt)
    traced = dt.kind in "fc"
    if traced:
        buff = lift(buff, active_levels())
    for i, ind in enumerate(inds):
        r = res if i == 0 else masarray(func1d(view[ind], *rest, **kw))
        buff[ind] = r if traced else bottom(r)  # an integer buffer keeps no derivative
    nd, rnd = np.ndim(buff), np.ndim(res)
    dims = list(range(nd))
    return np.transpose(buff, dims[:axis] + dims[nd - rnd:] + dims[axis:nd - rnd])


def _np_apply_over_axes(args, kwargs):
    (func, a, axes), _, _ = _take_args(("func", "a", "axes"), args, kwargs)
    val = a if isinstance(a, Tracer) else np.asarray(a)
    n = np.ndim(val)
    if np.ndim(axes) == 0:
        axes = (axes,)
    for axis in axes:
        if axis < 0:
            axis = n + axis
        res = func(val, axis)
        if np.ndim(res) != np.ndim(val):
            res = np.expand_dims(res, axis)
            if np.ndim(res) != np.ndim(val):
                raise ValueError("function is not returning an array of the correct shape")
        val = res
    return val


FUNCTIONS[np.apply_along_axis] = _np_apply_along_axis
FUNCTIONS[np.apply_over_axes] = _np_apply_over_axes


# -- np.r_ / np.c_ ---------------------------------------------------------------------
# NumPy's index tricks build their pieces with np.array(item, ndmin=...) (no dispatch:
# a traced item would escape), then np.concatenate (which dispatches). Their module's
# `array` is given a traced item's view with the leading unit dimensions np.array would
# add; every other item goes to np.array itself, so plain code is unaffected.

_np_array = np.array


def _index_tricks_array(obj, *args, **kwargs):
    if isinstance(obj, (list, tuple)) and not isinstance(obj, np.ndarray):
        from ..numpy import _has_tracer, array as marray

        if _has_tracer(obj):
            obj = marray(obj)
    if not isinstance(obj, Tracer):
        return _np_array(obj, *args, **kwargs)
    dtype = kwargs.get("dtype")
    if dtype is not None and np.dtype(dtype) != obj.dtype:
        obj = obj.astype(dtype)
    ndmin = kwargs.get("ndmin", 0)
    if obj.ndim < ndmin:
        obj = np.reshape(obj, (1,) * (ndmin - obj.ndim) + obj.shape)
    return obj


try:
    from numpy.lib import _index_tricks_impl as _index_tricks
except ImportError:  # pragma: no cover (NumPy < 2)
    _index_tricks = None
if _index_tricks is not None and getattr(_index_tricks, "array", None) is np.array:
    _index_tricks.array = _index_tricks_array
