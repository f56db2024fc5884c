"""Reductions: sum, mean, prod, max, min, var, std, cumsum, cumprod, ptp.

``out=`` and ``where=`` are turned into traced operations (a masked select
and a write), like the ufunc protocol does.
"""
from __future__ import annotations

import operator

import warnings

import numpy as np
from numpy.lib.array_utils import normalize_axis_tuple

from ..core import STATE, ArrayTracer, Tracer, write, write_out, write_reduced, FUNCTIONS, UFUNC_HANDLERS, bind, bottom, get_primitive, stop_gradient, where_mask
from ..core import index_array, plain_operands, with_replayed_bits
from ..errors import NoRuleError, user_line
from ..registry import deflinear, strong_times
from ..tangents import ZeroTangent

ZERO = ZeroTangent()


def _norm_axis(axis, ndim):
    if axis is None:
        return tuple(range(ndim))
    if isinstance(axis, (tuple, list)):
        return tuple(sorted(a % ndim if ndim else 0 for a in axis))
    return (axis % ndim if ndim else 0,)


def expand_to(g, shape, axis, keepdims):
    """Broadcast a reduced cotangent back to the reduced array's shape."""
    if axis is None and (type(g) in _PLAIN_SCALAR_CTS or type(g) is np.ndarray and g.ndim == 0):
        return np.full(shape, g)  # a total: one fresh array (the tape adopts it)
    ndim = len(shape)
    if not keepdims:
        axes = _norm_axis(axis, ndim)
        gshape = list(np.shape(g))
        for a in axes:
            gshape.insert(a, 1)
        g = np.reshape(g, gshape)
    return np.broadcast_to(g, shape)


def _reduce_args(args, kwargs, names):
    """Positional/keyword arguments of a NumPy reduction as a dict (``where=None`` as the mask
    NumPy's ufunc machinery takes it for: False, nothing selected)."""
    d = dict(zip(names, args))
    d.update(kwargs)
    if "where" in d and d["where"] is None:
        d["where"] = np.False_
    return d


def _cast_to_loop(a):
    """``dtype=`` of a reduction that NumPy reaches by casting each element first where the
    cast is not a widening: a complex input with a real dtype loses its imaginary parts
    (NumPy's ComplexWarning), so the derivative is that of the real parts' reduction."""
    dt = a.get("dtype")
    if dt is None:
        return a
    x = a["a"]
    if np.iscomplexobj(bottom(x)) and np.dtype(dt).kind != "c":
        a = dict(a)
        a["a"] = as_dtype(x, dt)
    return a


def as_dtype(x, dtype):
    """``x`` in ``dtype`` (a traced array by its differentiated astype)."""
    return x.astype(dtype) if isinstance(x, Tracer) else np.asarray(x, dtype)


def _initial_in(res, initial):
    """``initial=`` in the dtype of the reduction's loop (that of ``res``, the reduction without it),
    as NumPy casts it before it starts from it (0.5 with dtype=int64 is 0; a float64 start of a
    float32 maximum is a float32)."""
    dt = np.result_type(bottom(res))
    if np.result_type(bottom(initial)) == dt:
        return initial
    if isinstance(initial, Tracer):
        return initial.astype(dt)
    if type(initial) is complex and dt.kind != "c":
        float(initial)  # (NumPy's TypeError for a Python complex)
    return np.asarray(initial).astype(dt)[()]  # (unsafely, as NumPy: a NumPy complex with its ComplexWarning)


def cast_for_out(x, out):
    """``x`` in the dtype NumPy's loop takes with an ``out=`` wider than ``x`` (float32
    into float64 is added in float64), see :func:`_loop_dtype`; else ``x`` itself."""
    dt = _loop_dtype({"a": x, "out": out})
    return x if dt is None else as_dtype(x, dt)


def _loop_dtype(a, mean=False):
    """The dtype NumPy computes a reduction in: ``dtype=``, or else the wider
    of the input's and ``out=``'s (a float32 sum into a float64 ``out`` adds in
    float64, a float64 one into a float32 ``out`` adds in float64 and rounds);
    None for the input's own. (np.mean of float16 adds in float32.)"""
    dt = a.get("dtype")
    out = a.get("out")
    if dt is not None or out is None:
        return dt
    odt, xdt = np.result_type(bottom(out)), np.result_type(bottom(a["a"]))
    if odt.kind not in "fc" or xdt.kind not in "fc" or (mean and xdt == np.float16):
        return None
    wide = np.result_type(xdt, odt)
    return None if wide == xdt else wide


def _ufunc_axis(a):
    """The axis of a reduction NumPy computes with a ufunc method (sum, prod,
    max, min, ptp, cumsum, cumprod): these take axis 0 or -1 of a 0-d array
    or a NumPy scalar (mean, var and the others raise), which is all of it."""
    axis = a.get("axis")
    if axis is not None and type(axis) is not tuple and type(axis) is not list and np.ndim(a["a"]) == 0:
        if operator.index(axis) in (0, -1):
            return None
    return axis


# -- primitives (pure reductions: no out/where) ----------------------------


def _sum_impl(x, axis=None, keepdims=False, dtype=None):
    if type(x) is np.ndarray:  # what np.sum calls for an ndarray, without its Python wrapper
        return _add_reduce(x, axis, dtype, None, keepdims)
    return np.sum(x, axis=axis, keepdims=keepdims, dtype=dtype)


_add_reduce = np.add.reduce


def _mean_impl(x, axis=None, keepdims=False, dtype=None):
    return np.mean(x, axis=axis, keepdims=keepdims, dtype=dtype)


_PLAIN_SCALAR_CTS = frozenset((np.float64, np.float32, np.complex128, np.complex64))

sum_p = get_primitive(_sum_impl, "np.sum")
sum_p.fresh_cts = True  # its transpose makes a new array or a read-only broadcast (never adopted)
mean_p = get_primitive(_mean_impl, "np.mean")
deflinear(_sum_impl, lambda g, x, axis=None, keepdims=False, dtype=None: expand_to(g, x.shape, axis, keepdims))


def _mean_T(g, x, axis=None, keepdims=False, dtype=None):
    axes = _norm_axis(axis, x.ndim)
    count = int(np.prod([x.shape[a] for a in axes], dtype=np.int64)) if axes else 1
    return expand_to(g, x.shape, axis, keepdims) / count


deflinear(_mean_impl, _mean_T)


def _prod_impl(x, axis=None, keepdims=False, dtype=None):
    return np.prod(x, axis=axis, keepdims=keepdims, dtype=dtype)


prod_p = get_primitive(_prod_impl, "np.prod")


def _exclusive_products(x, axes):
    """For each element, the product of all the others along ``axes`` (exact with zeros)."""
    nd = x.ndim
    keep = [a for a in range(nd) if a not in axes]
    perm = keep + list(axes)
    xt = np.transpose(x, perm)
    lead = xt.shape[: len(keep)]
    n = int(np.prod(xt.shape[len(keep):], dtype=np.int64))
    if n == 0:  # an empty product: there are no elements to differentiate
        return np.zeros_like(x)
    flat = np.reshape(xt, lead + (n,))
    ones = np.ones(lead + (1,), dtype=bottom(flat).dtype)
    left = np.cumprod(np.concatenate([ones, flat[..., :-1]], axis=-1), axis=-1)
    rev = np.flip(flat, axis=-1)
    right = np.flip(np.cumprod(np.concatenate([ones, rev[..., :-1]], axis=-1), axis=-1), axis=-1)
    others = np.reshape(left * right, xt.shape)
    return np.transpose(others, np.argsort(perm))


def _prod_rrule(x, axis=None, keepdims=False, dtype=None):
    y = _prod_impl(x, axis, keepdims, dtype)

    def pullback(g):
        axes = _norm_axis(axis, np.ndim(x))
        others = _exclusive_products(x, axes) if axes else np.ones_like(x)
        d = others
        if np.iscomplexobj(bottom(d)):
            d = np.conj(d)
        return (expand_to(g, np.shape(x), axis, keepdims) * d,)

    return y, pullback


def _prod_frule(primals, tangents, axis=None, keepdims=False, dtype=None):
    (x,), (t,) = primals, tangents
    y = _prod_impl(x, axis, keepdims, dtype)
    axes = _norm_axis(axis, np.ndim(x))
    others = _exclusive_products(x, axes) if axes else np.ones_like(x)
    return y, np.sum(t * others, axis=axis, keepdims=keepdims)


prod_p.rrule, prod_p.frule = _prod_rrule, _prod_frule


def _max_impl(x, axis=None, keepdims=False):
    return np.max(x, axis=axis, keepdims=keepdims)


def _min_impl(x, axis=None, keepdims=False):
    return np.min(x, axis=axis, keepdims=keepdims)


max_p = get_primitive(_max_impl, "np.max")
min_p = get_primitive(_min_impl, "np.min")


def _argext_hits(x, y, axis, keepdims):
    """(where x attains its extreme y along axis, how many times along it), of the plain values."""
    xb, yb = bottom(x), bottom(y)
    ye = expand_to(yb, xb.shape, axis, keepdims)
    hit = (xb == ye) | (np.isnan(xb) & np.isnan(ye))
    return hit, np.sum(hit, axis=axis, keepdims=True)


def _shared(hit, cnt):
    """Ties share the derivative evenly."""
    return hit / np.where(cnt == 0, 1, cnt)


def _argext_weights(x, y, axis, keepdims):
    """Where x attains its extreme along axis; ties share the derivative evenly."""
    return _shared(*_argext_hits(x, y, axis, keepdims))


def _argext_kept(x, y, axis, keepdims):
    """What the pullback of a max or min keeps of its argument to weigh the cotangent by
    (:func:`_argext_weights`, computed from it again), instead of the argument itself: where no
    two elements tie, the position of each extreme along an axis (one index per result element:
    a value iteration's max over a choice axis kept 5 MB of choices per step, the econdp tester),
    else a boolean mask of the extremes (an eighth of float64's bytes) and their counts. The
    weights are constants (of the values, at every order), so nothing is lost."""
    hit, cnt = _argext_hits(x, y, axis, keepdims)
    if (axis is None or isinstance(axis, (int, np.integer))) and np.all(cnt == 1):
        flat = axis is None
        return (np.argmax(np.reshape(hit, -1) if flat else hit, axis=None if flat else axis, keepdims=not flat),
                None, hit.shape)
    return hit, cnt, hit.shape


def _weights_of(kept, axis):
    """The weights :func:`_argext_kept` keeps, as :func:`_argext_weights` gives them."""
    hit, cnt, shape = kept
    if cnt is None:  # (positions, no ties)
        w = np.zeros(shape)
        if axis is None:
            w.reshape(-1)[hit] = 1.0
        else:
            np.put_along_axis(w, hit, 1.0, axis=axis)
        return w
    return _shared(hit, cnt)


def _ext_rules(impl):
    def rrule(x, axis=None, keepdims=False):
        y = impl(x, axis, keepdims)
        kept = _argext_kept(x, y, axis, keepdims)  # (not x: see there)

        def pullback(g):
            return (expand_to(g, kept[2], axis, keepdims) * _weights_of(kept, axis),)

        return y, pullback

    def frule(primals, tangents, axis=None, keepdims=False):
        (x,), (t,) = primals, tangents
        y = impl(x, axis, keepdims)
        w = _argext_weights(x, y, axis, keepdims)
        return y, np.sum(strong_times(t, w), axis=axis, keepdims=keepdims)  # (an infinite t it drops: 0)

    return rrule, frule


max_p.rrule, max_p.frule = _ext_rules(_max_impl)
min_p.rrule, min_p.frule = _ext_rules(_min_impl)
max_p.reads = min_p.reads = (((), False),)  # (the pullback reads neither x nor y: what it keeps of x)


def _cumsum_impl(x, axis=None, dtype=None):
    return np.cumsum(x, axis=axis, dtype=dtype)


def _cumsum_T(g, x, axis=None, dtype=None):
    if axis is None:
        r = np.flip(np.cumsum(np.flip(np.reshape(g, -1))))
        return np.reshape(r, x.shape)
    return np.flip(np.cumsum(np.flip(g, axis), axis), axis)


cumsum_p = get_primitive(_cumsum_impl, "np.cumsum")
deflinear(_cumsum_impl, _cumsum_T)


def _cumprod_impl(x, axis=None, dtype=None):
    return np.cumprod(x, axis=axis, dtype=dtype)


cumprod_p = get_primitive(_cumprod_impl, "np.cumprod")


def _along_last(a, axis):
    """``a`` with ``axis`` moved last (flattened for None)."""
    return np.moveaxis(np.reshape(a, -1) if axis is None else a, 0 if axis is None else axis, -1)


def _back(r, x, axis):
    """``r`` (axis last) in ``x``'s shape and axis order."""
    return np.reshape(np.moveaxis(r, -1, 0 if axis is None else axis), np.shape(x))


def _divides_exactly(xm, ym):
    """Whether ``y_k / x_j`` is ``prod_{i <= k, i != j} x_i`` to rounding for every element:
    no zero factor, and no product that overflowed or lost precision to underflow."""
    xb, yb = bottom(xm), bottom(ym)
    if not np.size(yb):
        return True
    tiny = np.finfo(np.result_type(yb, np.float16)).tiny  # (the smallest normal number of y's precision)
    with np.errstate(invalid="ignore"):
        return bool(np.all(xb != 0) and np.all(np.isfinite(yb)) and np.all(np.abs(yb) >= tiny))


def _wider(*arrays):
    """The plain double-precision ``arrays`` in NumPy's extended precision where it has a wider
    exponent range (x86's 80-bit long double); else None (traced values, or no wider type)."""
    ld = np.longdouble
    if np.finfo(ld).maxexp <= np.finfo(np.float64).maxexp or any(
            type(a) is not np.ndarray or a.dtype.char not in "dD" for a in arrays):
        return None
    return tuple(a.astype(np.clongdouble if a.dtype.kind == "c" else ld) for a in arrays)


def _zero_parts(xm, ym):
    """For plain ``x`` (axis last) with zero factors and its cumprod ``y``: (before, first, after, p, q): masks of
    the elements before each lane's first zero, of that zero, and of those after it up to the next zero; the
    product of the factors before the first zero (1 for a lane that starts with it); and, over ``after``, the
    products of the factors after the first zero (q_k = prod_{z < i <= k} x_i); or None where some of these
    products over- or underflow (a lane without a zero is all "before"). dy_k / dx_j is then
    y_k / x_j for j <= k before the zero, p * q_k for the zero itself (q 1 at it), and 0 for every other j."""
    xb = np.asarray(bottom(xm))
    zero = xb == 0
    count = np.cumsum(zero, axis=-1)
    if not np.any(count[..., -1:]) or not np.all(np.isfinite(xb)):  # (no zero: _divides_exactly's case)
        return None
    before, first = count == 0, zero & (count == 1)
    after = (count == 1) & ~zero
    yb = np.asarray(bottom(ym))
    tiny = np.finfo(np.result_type(yb, np.float16)).tiny
    with np.errstate(over="ignore", invalid="ignore", under="ignore"):
        q = np.cumprod(np.where(after, xb, 1), axis=-1)
        normal = lambda v: np.isfinite(v) & (np.abs(v) >= tiny)
        if not (np.all(normal(q) | ~after) and np.all(normal(yb) | ~before)):
            return None
    z = np.argmax(zero, axis=-1)[..., None]
    p = np.where(z > 0, np.take_along_axis(yb, np.maximum(z - 1, 0), axis=-1), 1)
    return before, first, after, p, q


def _exact_cumprod_pullback(cx, cy, gm):
    """cumprod's cotangent for plain values (axis last; ``cx``, ``cy`` conjugated for complex ones) where the
    division by the factors is exact: the suffix sums of conj(y) g divided by conj(x_j) (no zero factor), or
    each lane's parts around its first zero (_zero_parts); None where the products leave the normal range."""
    if _divides_exactly(cx, cy):
        with np.errstate(over="ignore", invalid="ignore"):
            gy = cy * gm
        if np.all(np.isfinite(gy)):
            return np.flip(np.cumsum(np.flip(gy, -1), axis=-1), -1) / cx
    parts = _zero_parts(cx, cy)
    if parts is None:
        return None
    before, first, after, p, q = parts  # (zero factors: the lanes' first zeros, in a few passes)
    with np.errstate(over="ignore", invalid="ignore"):
        s = np.flip(np.cumsum(np.flip(np.where(before, cy * gm, 0), -1), axis=-1), -1)
        at_zero = p * np.sum(np.where(first | after, gm * q, 0), axis=-1, keepdims=True)
        r = np.where(before, s / np.where(before, cx, 1), np.where(first, at_zero, 0))
    return r if np.all(np.isfinite(r)) and np.all(np.isfinite(gm)) else None


def _exact_cumprod_tangent(xm, ym, tm):
    """cumprod's tangent for plain values (axis last) where the division by the factors is exact (see
    :func:`_exact_cumprod_pullback`): y times the prefix sums of ẋ / x, or the parts around each lane's first
    zero; None where the products leave the normal range."""
    if _divides_exactly(xm, ym):
        return ym * np.cumsum(tm / xm, axis=-1)
    parts = _zero_parts(xm, ym)
    if parts is None:
        return None
    before, first, after, p, q = parts
    with np.errstate(over="ignore", invalid="ignore"):
        tz = np.sum(np.where(first, tm, 0), axis=-1, keepdims=True)
        r = np.where(before, ym * np.cumsum(np.where(before, tm / np.where(before, xm, 1), 0), axis=-1),
                     np.where(first | after, p * tz * q, 0))
    return r if np.all(np.isfinite(r)) and np.all(np.isfinite(tm)) else None


def _exclusive_cumprod(xm):
    """``prev[..., j] = prod_{i < j} x_i``."""
    ones = np.ones(np.shape(xm)[:-1] + (1,), dtype=np.result_type(bottom(xm)))
    return np.cumprod(np.concatenate([ones, xm[..., :-1]], axis=-1), axis=-1)


def _suffix_recurrence(c, g):
    """s with s_j = g_j + c_{j+1} s_{j+1} along the last axis (s_{n-1} = g_{n-1}), by doubling: the
    map s_{j+d} -> s_j is affine, s_j = B_j + A_j s_{j+d}, and two of them compose into the map over 2d,
    so log2(n) steps of array operations instead of n steps of one column each (a cumprod's pullback at
    a zero factor, or differentiated again, took 25 us per element: 350x torch). No division: zeros,
    and the products a second derivative reads, stay exact as in the step-by-step recurrence."""
    n = np.shape(g)[-1]
    zero = np.zeros_like(c[..., :1])
    A, B, d = np.concatenate([c[..., 1:], zero], axis=-1), g, 1
    while d < n:
        k = n - d
        B = np.concatenate([B[..., :k] + A[..., :k] * B[..., d:], B[..., k:]], axis=-1)
        A = np.concatenate([A[..., :k] * A[..., d:], np.zeros_like(A[..., k:])], axis=-1)
        d *= 2
    return B


def _cumprod_rrule(x, axis=None, dtype=None):
    y = _cumprod_impl(x, axis, dtype)

    def pullback(g):
        # x̄_j = sum_{k >= j} conj(dy_k/dx_j) g_k, dy_k/dx_j = prod_{i <= k, i != j} x_i: the suffix
        # sums of conj(y) g divided by conj(x_j) where that is exact (O(n)), else the recurrence
        # s_j = g_j + conj(x_{j+1}) s_{j+1}, x̄_j = conj(prod_{i<j} x_i) s_j (zeros, under/overflow)
        xm, ym = _along_last(x, axis), _along_last(y, axis)
        gm = _along_last(g, axis)  # (g has y's shape: flat for axis=None)
        cplx = np.iscomplexobj(bottom(xm)) or np.iscomplexobj(bottom(ym))
        cx, cy = (np.conj(xm), np.conj(ym)) if cplx else (xm, ym)
        # (the division only on plain values: differentiated again, S_j / x_j loses x_j's cancellation
        # to rounding, catastrophically for a small x_j; the recurrence has no division)
        if not isinstance(x, Tracer) and not isinstance(g, Tracer):
            r = _exact_cumprod_pullback(cx, cy, gm)
            wide = None if r is not None else _wider(cx, gm)
            if wide is not None:  # (products that under- or overflow in float64: in extended range, still O(n))
                r = _exact_cumprod_pullback(wide[0], np.cumprod(wide[0], axis=-1), wide[1])
            if r is not None:
                return (_back(r.astype(np.result_type(bottom(ym), bottom(g)), copy=False), x, axis),)
        n = np.shape(xm)[-1]
        if not n:
            return (_back(gm * cx, x, axis),)
        wide = _wider(cx, gm)  # (plain values: the recurrence in extended range, for factors spanning
        if wide is not None:  # more than the exponent range, whose partial sums would overflow)
            cx, gm = wide
        r = _exclusive_cumprod(cx) * _suffix_recurrence(cx, gm)
        if wide is not None:
            r = r.astype(np.result_type(bottom(ym), bottom(g)))
        return (_back(r, x, axis),)

    return y, pullback


def _cumprod_frule(primals, tangents, axis=None, dtype=None):
    (x,), (t,) = primals, tangents
    y = _cumprod_impl(x, axis, dtype)
    # ẏ_k = sum_{j <= k} (dy_k/dx_j) ẋ_j: y times the prefix sums of ẋ / x where that is exact, else
    # the recurrence ẏ_k = ẏ_{k-1} x_k + y_{k-1} ẋ_k
    xm, ym, tm = _along_last(x, axis), _along_last(y, axis), _along_last(t, axis)
    if not isinstance(x, Tracer) and not isinstance(t, Tracer):  # (see the pullback)
        r = _exact_cumprod_tangent(xm, ym, tm)
        wide = None if r is not None else _wider(xm, tm)
        if wide is not None:
            r = _exact_cumprod_tangent(wide[0], np.cumprod(wide[0], axis=-1), wide[1])
        if r is not None:
            return y, _back(r.astype(np.result_type(bottom(ym), bottom(t)), copy=False), y, axis)
    n = np.shape(xm)[-1]
    if not n:
        return y, _back(tm * ym, y, axis)
    wide = _wider(xm, tm)  # (see the pullback)
    yw = ym
    if wide is not None:
        xm, tm = wide
        yw = np.cumprod(xm, axis=-1)  # (y in extended range: no underflow to zero on the way)
    # (ẏ_k = ẏ_{k-1} x_k + y_{k-1} ẋ_k: the suffix recurrence on the reversed axis)
    b = np.concatenate([tm[..., :1], yw[..., :-1] * tm[..., 1:]], axis=-1)
    c = np.flip(np.concatenate([xm[..., 1:], xm[..., :1]], axis=-1), -1)  # (c_{j+1}: x at n-1-j; c_0 unread)
    r = np.flip(_suffix_recurrence(c, np.flip(b, -1)), -1)
    if wide is not None:
        r = r.astype(np.result_type(bottom(ym), bottom(t)))
    return y, _back(r, y, axis)


cumprod_p.rrule, cumprod_p.frule = _cumprod_rrule, _cumprod_frule


# -- the NumPy entry points: out=, where=, initial= ---------------------------


class _Bits:
    """A value passed to :data:`numpy_value_p` as it is (a plain array among a rule's
    keyword arguments would be copied for its pullback, which does not read this one)."""

    __slots__ = ("v",)

    def __init__(self, v):
        self.v = v


def _numpy_value_impl(x, value=None):
    """``x`` holding ``value.v``: the bits NumPy's own call gives for what ``x``
    computed (see :func:`_numpy_bits`). The identity for derivatives."""
    if isinstance(x, Tracer):
        return bind(numpy_value_p, (x,), {"value": value})
    return value.v


numpy_value_p = get_primitive(_numpy_value_impl, "a reduction's value")
deflinear(_numpy_value_impl, lambda g, x, value=None: g)
numpy_value_p.frule = lambda primals, tangents, value=None: (_numpy_value_impl(primals[0], value), tangents[0])


def _numpy_bits(fn, names, handler, when=None):
    """``handler`` (a traced composition of primitives: the derivative) giving
    the values NumPy's own ``fn`` gives on the plain values. NumPy computes a
    masked sum, a sum from ``initial``, a mean into ``out`` or a float16
    variance in its own order and precision, which a composition reproduces
    only to the last bits, or not at all (a masked float16 sum stalls where a
    pairwise one does not; a float16 ``out`` overflows). ``when(a)``: whether
    the arguments need it (else the composition's value is NumPy's)."""

    def plain_call(a, **extra):
        kw = {k: plain_operands(v) for k, v in a.items() if k != names[0] and k != "out"}
        with warnings.catch_warnings(), np.errstate(all="ignore"):  # (the composition warned, as NumPy does)
            warnings.simplefilter("ignore")
            return fn(plain_operands(a[names[0]]), **kw, **extra)

    def wrapped(args, kwargs):
        if when is not None and len(args) == 1 and not kwargs and not when({names[0]: args[0]}):
            return handler(args, kwargs)  # (np.sum(x): the common call, no arguments to sort)
        a = _reduce_args(args, kwargs, names)
        if when is not None and not when(a):
            return handler(args, kwargs)
        out = a.get("out")
        if out is not None:
            if not isinstance(out, Tracer):
                if type(out) is np.ndarray:  # NumPy's own error for this out first (std's sqrt into an integer out)
                    plain_call(a, out=np.empty_like(out))
                return handler(args, kwargs)  # (it raises: a traced value written into a plain array)
            res = []
            with_replayed_bits(out, lambda ob: plain_call(a, out=ob), lambda: res.append(handler(args, kwargs)))
            return res[0]
        res = handler(args, kwargs)
        if type(res) is tuple:  # (np.average(..., returned=True): each of NumPy's results)
            exact = plain_call(a)
            if type(exact) is not tuple or len(exact) != len(res):  # pragma: no cover  (NumPy's structure)
                return res
            return tuple(_as_numpys(r, e) for r, e in zip(res, exact))
        return _with_value(res, lambda: plain_call(a))

    return wrapped


def _as_numpys(res, exact):
    """A result of a composition as NumPy's own call gives it, ``exact``: its values, dtype, and a NumPy
    scalar where NumPy gives one (np.average's sum of weights: float32 weights give float64, no
    weights a 0-d array of the composition's), the derivative the composition's. A plain result
    (no traced value in it) is NumPy's own."""
    if not isinstance(res, Tracer):
        return exact
    dt = np.result_type(exact)
    if np.shape(res) != np.shape(exact):  # pragma: no cover  (the composition follows NumPy's shapes)
        return res
    if res.dtype != dt:
        res = res.astype(dt)
    if not isinstance(exact, np.ndarray) and not res._scalar:
        res = res[()]  # (a NumPy scalar, as NumPy's)
    return _with_value(res, lambda: exact)


def _with_value(res, exact):
    """Traced ``res`` holding the value ``exact()`` (NumPy's own call on the plain values),
    unless that differs in type, shape or dtype (then the composition's own value)."""
    if not isinstance(res, Tracer):
        return res
    e, b = exact(), bottom(res)
    if type(e) is not type(b) or np.shape(e) != np.shape(b) or e.dtype != b.dtype:
        return res
    return _numpy_value_impl(res, _Bits(e))


def numpy_zero_signs(res, exact):
    """Traced ``res`` with the bits of ``exact()`` (NumPy's own call: the same numbers) where
    the two differ in the sign of a zero: a gather, a selection or another reduction order
    may return +0.0 where NumPy's function returns -0.0 (a stable sort of tied zeros,
    np.maximum's tie, fmax.reduce), and a later sign-sensitive operation (arctan2,
    copysign, 1/x) would differ. ``exact`` is called only where ``res`` holds a zero."""
    if not isinstance(res, Tracer):
        return res
    b = bottom(res)
    if np.result_type(b).kind not in "fc":
        return res
    z = b == 0
    if not np.any(z):
        return res
    with warnings.catch_warnings(), np.errstate(all="ignore"):  # (the traced call warned, as NumPy's does)
        warnings.simplefilter("ignore")
        e = exact()
    if np.shape(e) != np.shape(b) or np.result_type(e) != np.result_type(b):
        return res
    if all(np.array_equal(np.signbit(part(b)[z]), np.signbit(part(e)[z]))
           for part in ((np.real, np.imag) if np.result_type(b).kind == "c" else (np.asarray,))):
        return res
    return _with_value(res, lambda: e)


def _masked(x, where, fill):
    if where is True or where is None:
        return x
    m = np.broadcast_to(where_mask(where), np.shape(x))
    return np.where(m, x, fill)


def _np_sum(args, kwargs):
    if len(args) == 1 and not kwargs and type(args[0]) is ArrayTracer:
        r = _total(args[0])
        if r is not None:
            return r
    a = _cast_to_loop(_reduce_args(args, kwargs, ("a", "axis", "dtype", "out", "keepdims", "initial", "where")))
    x = a["a"]
    x = _masked(x, a.get("where", True), 0.0)
    res = bind(sum_p, (x,), dict(axis=_ufunc_axis(a), keepdims=bool(a.get("keepdims", False)), dtype=_loop_dtype(a)))
    if a.get("initial") is not None:
        res = res + _initial_in(res, a["initial"])
    return write_reduced(res, a.get("out"), "add")


def _total(x):
    """``np.sum(x)`` of a traced array, recorded directly by a reverse-mode
    level that is the only one and records no lines (what sum_p's rule
    computes, less of the general path's bookkeeping); else None."""
    lv = x._level
    v = x._value
    s = x._storage
    if (lv.mode != "rev" or lv.record_lines or lv.closed or len(STATE.levels) != 1 or not s.active
            or type(v) is not np.ndarray):
        return None
    shape = v.shape
    return lv.fast_op(sum_p, _add_reduce(v, None), [(s, x._geom, 0)], lambda g: (np.full(shape, g),))


def _where_count(where, shape, axis, keepdims):
    """The count NumPy's mean and var divide by under ``where=``: the mask's values summed as
    integers (np._core._methods._count_reduce_items), which for a list of numbers is not the
    number of nonzero ones (where=[1.0, 0.5] selects two elements and counts 1 + 0)."""
    return np.add.reduce(np.broadcast_to(np.asarray(bottom(where)), shape), axis=axis, dtype=np.intp,
                         keepdims=keepdims)


def _no_count_of_none(kwargs):
    """NumPy's mean and var count the mask's items with int(): where=None is its TypeError."""
    if "where" in kwargs and kwargs["where"] is None:
        int(None)


def _np_mean(args, kwargs):
    _no_count_of_none(kwargs)
    a = _reduce_args(args, kwargs, ("a", "axis", "dtype", "out", "keepdims", "where"))
    x = a["a"]
    where = a.get("where", True)
    if where is not True and where is not None:
        m = np.broadcast_to(where_mask(where), np.shape(x))
        s = bind(sum_p, (np.where(m, x, 0.0),), dict(axis=a.get("axis"), keepdims=bool(a.get("keepdims", False)),
                                                     dtype=_loop_dtype(a, mean=True)))
        cnt = _where_count(where, np.shape(x), a.get("axis"), bool(a.get("keepdims", False)))
        # NumPy divides by the count into the sum's dtype (float16 for a float16 array)
        keep = np.float16 if np.result_type(bottom(x)) == np.float16 and a.get("dtype") is None else None
        res = _divided_in_dtype(s, cnt, keep)
    else:
        res = bind(mean_p, (x,), dict(axis=a.get("axis"), keepdims=bool(a.get("keepdims", False)),
                                      dtype=_loop_dtype(a, mean=True)))
    return write_reduced(res, a.get("out"), "add")


def _divided_in_dtype(s, cnt, dtype=None):
    """``s / cnt`` (a count: an integer array) stored in ``s``'s dtype (or ``dtype``), as
    NumPy's mean and var divide (true_divide(s, cnt, out=s, casting='unsafe'))."""
    r = s / cnt
    want = np.dtype(dtype) if dtype is not None else np.result_type(bottom(s))
    return r if np.result_type(bottom(r)) == want else r.astype(want)


def _np_prod(args, kwargs):
    a = _cast_to_loop(_reduce_args(args, kwargs, ("a", "axis", "dtype", "out", "keepdims", "initial", "where")))
    x = _masked(a["a"], a.get("where", True), 1.0)
    res = bind(prod_p, (x,), dict(axis=_ufunc_axis(a), keepdims=bool(a.get("keepdims", False)), dtype=_loop_dtype(a)))
    if a.get("initial") is not None:
        res = res * _initial_in(res, a["initial"])
    return write_reduced(res, a.get("out"), "multiply")


def _np_ext(prim, ufunc):
    def handler(args, kwargs):
        a = _reduce_args(args, kwargs, ("a", "axis", "out", "keepdims", "initial", "where"))
        if a.get("dtype") is not None:  # (ufunc.reduce's: the elements cast to the loop's dtype first)
            a["a"] = as_dtype(a["a"], a.pop("dtype"))
        x = a["a"]
        where = a.get("where", True)
        initial = a.get("initial", None)
        if initial is not None and np.size(bottom(x)) == 0:
            # nothing to reduce: NumPy's result (initial everywhere, or its error) is a constant
            kw = {k: bottom(v) for k, v in a.items() if k not in ("a", "out")}
            return write_reduced(ufunc.reduce(bottom(x), **{"axis": None, **kw}), a.get("out"), ufunc.__name__)
        if where is not True and where is not None:
            if initial is None:
                raise ValueError(f"reduction operation '{ufunc.__name__}' does not have an identity, so to use a where mask one has to specify 'initial'")
            x = _masked(x, where, initial)
        res = bind(prim, (x,), dict(axis=_ufunc_axis(a), keepdims=bool(a.get("keepdims", False))))
        if initial is not None:
            res = ufunc(res, _initial_in(res, initial))
        return write_reduced(res, a.get("out"), ufunc.__name__)

    return handler


def _np_cumsum(args, kwargs):
    a = _cast_to_loop(_reduce_args(args, kwargs, ("a", "axis", "dtype", "out")))
    res = bind(cumsum_p, (a["a"],), dict(axis=_ufunc_axis(a), dtype=_loop_dtype(a)))
    return _accumulate_out(res, a, np.cumsum)


def _np_cumprod(args, kwargs):
    a = _cast_to_loop(_reduce_args(args, kwargs, ("a", "axis", "dtype", "out")))
    res = bind(cumprod_p, (a["a"],), dict(axis=_ufunc_axis(a), dtype=_loop_dtype(a)))
    return _accumulate_out(res, a, np.cumprod)


def accumulate_axis(x, axis):
    """The axis of ``ufunc.accumulate`` as NumPy reads it: None or a 1-tuple is one axis
    (None: the only one), several raise NumPy's ValueError."""
    if type(axis) is tuple:
        if len(axis) != 1:
            raise ValueError("accumulate does not allow multiple axes")
        axis = axis[0]
    if axis is None:
        if np.ndim(x) > 1:
            raise ValueError("accumulate does not allow multiple axes")
        return 0
    return axis


def accumulate_out_of_another_shape(src, shape, out, name, numpy_check, larger_ok=False):
    """Refuse an ``out=`` of an accumulation whose shape is not the result's (``shape``):
    where it overlaps the input ``src``, NumPy copies it first and fills only part of
    it (a quirk no rule follows); elsewhere NumPy raises, and ``numpy_check()`` (NumPy's
    own call on plain values) raises its error; where NumPy accepts it, refused too,
    unless ``larger_ok`` (the caller fills it). False when ``out`` fits."""
    if out is None or np.shape(out) == tuple(shape):
        return False
    if np.may_share_memory(bottom(src), bottom(out)):
        raise NoRuleError(
            f"{name} into an out= of shape {np.shape(out)} for a result of shape {tuple(shape)} at {user_line()}, "
            "out sharing memory with the input: NumPy then copies out and fills only part of it (without "
            "the overlap it raises 'provided out is the wrong size'). Pass an out of the result's shape "
            "(a view of the part to fill).")
    numpy_check()
    if not larger_ok:
        raise NoRuleError(f"{name} with an out= of shape {np.shape(out)} for a result of shape {tuple(shape)} at "
                          f"{user_line()}: write the result into a view of out's shape")
    return True


def _accumulate_out(res, a, fn):
    """``out=`` of cumsum/cumprod: of the result's shape; otherwise NumPy's own error
    (or, where out overlaps the input, a refusal: see accumulate_out_of_another_shape).
    Where NumPy accepts a larger ``out`` (a NumPy scalar's accumulation), the result
    broadcast to it along the other axes, as NumPy fills it."""
    out = a.get("out")
    src = a["a"]

    def numpy_check():
        probe = np.zeros(np.shape(src), np.asarray(bottom(src)).dtype)  # (the input's dtype: NumPy's check depends on it)
        if (isinstance(src, Tracer) and src._scalar) or isinstance(src, (np.generic, float, complex, int)):
            probe = probe[()]  # (a NumPy scalar: NumPy accepts a larger out for it, not for a 0-d array)
        fn(probe, axis=a.get("axis"), out=np.empty_like(bottom(out)))  # NumPy's own checks, on plain values

    larger_ok = a.get("axis") is not None and np.ndim(out) == np.ndim(res)
    if not accumulate_out_of_another_shape(src, np.shape(res), out, fn.__name__, numpy_check, larger_ok):
        return write_out(res, out)
    ax = operator.index(a["axis"]) % np.ndim(res)
    n = np.shape(res)[ax]
    target = np.shape(out)[:ax] + (n,) + np.shape(out)[ax + 1:]
    write(out, (slice(None),) * ax + (slice(0, n),), np.broadcast_to(res, target))
    return out


def _abs2_by_parts(d):
    """|d|^2 as NumPy's var computes it: re*re + im*im for complex (not the
    real part of a complex product, whose loop may fuse and round differently)."""
    if np.iscomplexobj(bottom(d)):
        re, im = np.real(d), np.imag(d)
        return re * re + im * im
    return d * d


def _no_dof_impl(res, x):
    return res


# np.var / np.std over no degrees of freedom (count <= ddof): the value NumPy's (nan, or inf),
# the derivative with respect to x NaN in both modes, as JAX and PyTorch give (the division by a
# zero count met zero deviations: reverse mode's strong zeros made it 0, forward mode NaN)
no_dof_p = get_primitive(_no_dof_impl, "a variance over no degrees of freedom")


def _no_dof_rrule(res, x):
    def pullback(g):
        return ZeroTangent(), (x + np.sum(x)) * np.nan  # (of x: NaN in every second derivative too)

    return res, pullback


def _no_dof_frule(primals, tangents):
    res, _ = primals
    return res, res * np.nan


no_dof_p.rrule, no_dof_p.frule = _no_dof_rrule, _no_dof_frule


def _np_var(args, kwargs, sqrt=False):
    _no_count_of_none(kwargs)
    a = _reduce_args(args, kwargs, ("a", "axis", "dtype", "out", "ddof", "keepdims", "where", "mean", "correction"))
    x = a["a"]
    axis = a.get("axis")
    keepdims = bool(a.get("keepdims", False))
    ddof = a.get("ddof", 0) or a.get("correction", 0) or 0
    where = a.get("where", True)
    if where is not True and where is not None:
        m = np.broadcast_to(where_mask(where), np.shape(x))
        cnt = _where_count(where, np.shape(x), axis, True)
        mu = a.get("mean")
        dtype = a.get("dtype")  # (NumPy sums in it, and so computes the deviations in it)
        if mu is None:
            mu = _divided_in_dtype(np.sum(np.where(m, x, 0.0), axis=axis, keepdims=True, dtype=dtype), cnt)
        d = np.where(m, x - mu, 0.0)
        ss = np.sum(_abs2_by_parts(d), axis=axis, keepdims=keepdims, dtype=dtype)
        n = _where_count(where, np.shape(x), axis, keepdims)
        res = _divided_in_dtype(ss, np.maximum(n - ddof, 0))
    else:
        mu = a.get("mean")
        dtype = a.get("dtype")
        axes = _norm_axis(axis, np.ndim(x)) if axis is None else normalize_axis_tuple(axis, np.ndim(x))
        n = int(np.prod([np.shape(x)[k] for k in axes], dtype=np.int64)) if axes else 1
        if mu is None:
            if dtype is None:
                mu = np.mean(x, axis=axis, keepdims=True)
            else:  # NumPy: the sum in dtype, divided there
                xs = x
                if np.iscomplexobj(bottom(x)) and np.dtype(dtype).kind != "c":
                    # NumPy sums a complex array in a real dtype: the imaginary parts are dropped
                    # (with its warning), and the deviations from that real mean are complex
                    warnings.warn("Casting complex values to real discards the imaginary part",
                                  np.exceptions.ComplexWarning, stacklevel=4)
                    xs = np.real(x)
                mu = np.sum(xs, axis=axis, keepdims=True, dtype=dtype) / n
        d = x - mu
        out = a.get("out")
        sq = _abs2_by_parts(d)
        if out is not None and np.result_type(bottom(out)) != np.result_type(bottom(sq)) and (
                np.result_type(bottom(out)).kind in "fc"):  # (an integer out: refused, as np.sum's is, at the write)
            # NumPy sums into `out`: in the common dtype of the squares and `out` (a complex out: a
            # complex pairwise sum), stored in out's dtype, and divides there
            odt = np.result_type(bottom(out))
            ss = np.sum(sq, axis=axis, keepdims=keepdims, dtype=np.result_type(bottom(sq), odt))
            if np.result_type(bottom(ss)) != odt:
                ss = ss.astype(odt)
        else:
            ss = np.sum(sq, axis=axis, keepdims=keepdims, dtype=dtype)
        res = ss / max(n - ddof, 0)  # (NumPy's count: never below zero)
    if sqrt:
        # the deviation from the mean of a single element is zero whatever it is: the std of
        # one element is the constant 0 (sqrt's infinite slope at 0 would give 0 * inf = nan)
        one = None if a.get("mean") is not None or ddof else np.asarray(n) == 1
        if one is not None and one.all():
            res = np.sqrt(stop_gradient(res))
        elif one is not None and one.any():
            res = np.where(one, np.sqrt(stop_gradient(res)), np.sqrt(np.where(one, 1.0, res)))
        else:
            res = np.sqrt(res)
        if a.get("out") is not None:  # (watched here: _np_std returns the caller's out, regress64)
            res = std_kink(res, single=one)
    if (where is True or where is None) and n - ddof <= 0 and axis is None:
        # NumPy's nan or inf over the whole array, a function of x nowhere differentiable: NaN
        # derivatives in both modes (the division by a zero count met zero deviations, or sqrt's
        # zero slope at inf: reverse mode's strong zeros made them 0, forward mode NaN)
        res = bind(no_dof_p, (res, x))
    return write_reduced(res, a.get("out"), "add")


def _np_ptp(args, kwargs):
    a = _reduce_args(args, kwargs, ("a", "axis", "out", "keepdims"))
    k = dict(axis=_ufunc_axis(a), keepdims=bool(a.get("keepdims", False)))
    out = a.get("out")
    if out is None:
        return bind(max_p, (a["a"],), k) - bind(min_p, (a["a"],), k)
    ob = bottom(out)
    if type(ob) is np.ndarray and ob.dtype != np.result_type(bottom(a["a"])):
        with np.errstate(all="ignore"):  # NumPy's own error for this out (subtract's same_kind), on plain values
            np.ptp(**plain_operands({n: v for n, v in a.items() if n != "out"}), out=np.empty_like(ob))
    # NumPy's order: the maximum into out, then the minimum (of the array as it is
    # then, if out shares its memory), then their difference into out
    write_reduced(bind(max_p, (a["a"],), k), out, "maximum")
    return write_out(out - bind(min_p, (a["a"],), k), out)


def _np_average(args, kwargs):
    a = _reduce_args(args, kwargs, ("a", "axis", "weights", "returned", "keepdims"))
    x, axis, w = a["a"], a.get("axis"), a.get("weights")
    keepdims = bool(a.get("keepdims", False))
    if w is None:
        avg = np.mean(x, axis=axis, keepdims=keepdims)
        scl = np.result_type(bottom(avg)).type(np.size(x) / np.size(avg))  # (NumPy's: of the average's dtype)
    else:
        if np.shape(w) != np.shape(x):  # (NumPy's checks and layout: weights along the axes, in order)
            if axis is None:
                raise TypeError("Axis must be specified when shapes of a and weights differ.")
            axes = normalize_axis_tuple(axis, np.ndim(x), argname="axis")  # (in the caller's order)
            if np.shape(w) != tuple(np.shape(x)[k] for k in axes):
                raise ValueError("Shape of weights must be consistent with shape of a along specified axis.")
            w = np.transpose(w, np.argsort(axes))
            w = np.reshape(w, tuple(s if k in axes else 1 for k, s in enumerate(np.shape(x))))
        w = np.broadcast_to(w, np.shape(x))
        # NumPy's dtype: the common one of the array's and the weights' (float16 with int8 weights), at
        # least float64 for an integer array
        xdt, wdt = np.asarray(plain_operands(a["a"])).dtype, np.result_type(bottom(w))
        dt = np.result_type(xdt, wdt, "f8") if xdt.kind in "biu" else np.result_type(xdt, wdt)
        scl = np.sum(w, axis=axis, keepdims=keepdims, dtype=dt)
        avg = np.sum(np.multiply(x, w, dtype=dt), axis=axis, keepdims=keepdims) / scl
    if a.get("returned", False):
        return avg, np.broadcast_to(scl, np.shape(avg)).copy() if np.shape(scl) != np.shape(avg) else scl
    return avg


def _given(*names):
    return lambda a: any(a.get(k) is not None and a.get(k) is not True for k in names)


_SUM_NAMES = ("a", "axis", "dtype", "out", "keepdims", "initial", "where")
_VAR_NAMES = ("a", "axis", "dtype", "out", "ddof", "keepdims", "where", "mean", "correction")
FUNCTIONS[np.average] = _numpy_bits(np.average, ("a", "axis", "weights", "returned", "keepdims"), _np_average,
                                    _given("weights"))
FUNCTIONS[np.sum] = _numpy_bits(np.sum, _SUM_NAMES, _np_sum, _given("initial", "where"))
FUNCTIONS[np.mean] = _numpy_bits(np.mean, ("a", "axis", "dtype", "out", "keepdims", "where"), _np_mean,
                                 _given("out", "where"))
FUNCTIONS[np.prod] = _numpy_bits(np.prod, _SUM_NAMES, _np_prod, _given("initial", "where"))
FUNCTIONS[np.max] = FUNCTIONS[np.amax] = _np_ext(max_p, np.maximum)
FUNCTIONS[np.min] = FUNCTIONS[np.amin] = _np_ext(min_p, np.minimum)
FUNCTIONS[np.cumsum] = _np_cumsum
FUNCTIONS[np.cumprod] = _np_cumprod
FUNCTIONS[np.var] = _numpy_bits(np.var, _VAR_NAMES, _np_var)
_std_bits = _numpy_bits(np.std, _VAR_NAMES, lambda args, kwargs: _np_var(args, kwargs, sqrt=True))


def std_kink(res, what="np.std", single=None):
    """``res``, a standard deviation, watched where it is 0 under a higher derivative (np.std(x) ** 2 at a
    constant x: the warnnoise2 tester), as np.linalg.norm's zeros are (linalg._norm_kink): after NumPy's bits
    are put in, so that a write over its zeros before any read is seen (regress63). ``single``: where it is the
    std of one element, the constant 0, no kink."""
    from .linalg import _norm_kink

    return _norm_kink(res, f"{what} at a constant input (zero deviation)", single)


def _np_std(args, kwargs):
    res = _std_bits(args, kwargs)
    a = _reduce_args(args, kwargs, _VAR_NAMES)
    if a.get("out") is not None or not isinstance(res, Tracer):
        return res  # (the out= array the caller holds, as NumPy returns it)
    where, x = a.get("where", True), a["a"]
    if a.get("mean") is not None or a.get("ddof") or a.get("correction"):
        single = None
    elif where is not True and where is not None:
        single = _where_count(where, np.shape(x), a.get("axis"), bool(a.get("keepdims", False))) <= 1
    else:
        single = np.size(bottom(x)) == np.size(bottom(res))  # (one element per result: each std the constant 0)
    return std_kink(res, single=single)


FUNCTIONS[np.std] = _np_std
FUNCTIONS[np.ptp] = _np_ptp


# -- ufunc methods -----------------------------------------------------------

_REDUCE_NAMES = ("array",) + _SUM_NAMES[1:]
_REDUCE = {np.add: _numpy_bits(np.add.reduce, _REDUCE_NAMES, _np_sum, _given("initial", "where")),
           np.multiply: _numpy_bits(np.multiply.reduce, _REDUCE_NAMES, _np_prod, _given("initial", "where")),
           np.maximum: FUNCTIONS[np.max], np.minimum: FUNCTIONS[np.min]}
_ACCUMULATE = {np.add: _np_cumsum, np.multiply: _np_cumprod}


def _ufunc_method(table, method):
    """``ufunc.reduce`` / ``ufunc.accumulate`` through the matching reduction."""

    def handler(ufunc, inputs, kwargs):
        h = table.get(ufunc)
        if h is None:
            from ..core import _no_rule

            raise _no_rule(ufunc, f"ufunc method .{method}")
        kwargs = dict(kwargs)
        kwargs.setdefault("axis", 0)
        if method == "accumulate":
            if np.ndim(inputs[0]) == 0:  # NumPy's own error (cannot accumulate on a scalar)
                ufunc.accumulate(np.zeros((), np.result_type(bottom(inputs[0]))))
            kwargs["axis"] = accumulate_axis(inputs[0], kwargs["axis"])
        if type(kwargs.get("out")) is tuple:  # the ufunc protocol always passes a tuple
            kwargs["out"] = kwargs["out"][0]
        return h(inputs, kwargs)

    return handler


_ufunc_reduce = _ufunc_method(_REDUCE, "reduce")
_ufunc_accumulate = _ufunc_method(_ACCUMULATE, "accumulate")


for _u in _REDUCE:
    UFUNC_HANDLERS[(_u, "reduce")] = _ufunc_reduce
for _u in _ACCUMULATE:
    UFUNC_HANDLERS[(_u, "accumulate")] = _ufunc_accumulate


def _boolean_method(method):
    """``ufunc.method`` of a ufunc whose results are booleans (logical_or, greater...): no derivative,
    NumPy's values; a traced ``out=`` (M.any(axis=1, out=buf) calls logical_or.reduce) takes them as
    a recorded write of constants, computed into a copy of its values as NumPy computes into it."""

    def handler(ufunc, inputs, kwargs):
        kwargs = dict(kwargs)
        out = kwargs.pop("out", None)
        if type(out) is tuple:
            (out,) = out
        args, kw = plain_operands(list(inputs)), plain_operands(kwargs)
        if not isinstance(out, Tracer):
            return getattr(ufunc, method)(*args, **kw) if out is None else getattr(ufunc, method)(*args, out=out, **kw)
        tmp = np.array(bottom(out), copy=True)
        getattr(ufunc, method)(*args, out=tmp, **kw)
        return write_out(tmp, out)

    return handler


for _u in (np.logical_and, np.logical_or, np.logical_xor, np.greater, np.greater_equal, np.less, np.less_equal,
           np.equal, np.not_equal):
    for _m in ("reduce", "accumulate", "reduceat", "outer"):
        UFUNC_HANDLERS.setdefault((_u, _m), _boolean_method(_m))


# -- np.add.reduceat: segment sums --------------------------------------------------
# out[i] = sum of x[indices[i]:indices[i+1]] along axis (the last to the end), or
# x[indices[i]] alone where indices[i] >= indices[i+1]. Linear; segments may overlap.


def _add_reduceat_impl(x, indices, axis=0):
    return np.add.reduceat(x, indices, axis=axis)


def _segments(starts, n):
    """reduceat's segments of an axis of ``n`` elements: each one's length (1 where its start is not
    before the next one's), the place of its first element among the gathered ones (offsets), and
    for each gathered element its segment (owners) and its place on the axis (positions)."""
    ends = np.append(starts[1:], n)
    lengths = np.where(starts < ends, ends - starts, 1)
    offsets = np.cumsum(lengths) - lengths
    owners = np.repeat(np.arange(starts.size), lengths)
    positions = np.arange(owners.size) + np.repeat(starts - offsets, lengths)
    return lengths, offsets, owners, positions


def _tiling(starts) -> bool:
    """Whether reduceat's segments from ``starts`` follow one another (each start after the one before), so
    that they tile the axis from the first start to its end, each element in one segment."""
    return starts.size > 0 and bool(np.all(starts[1:] > starts[:-1]))


def _add_reduceat_T(g, x, indices, axis=0):
    from ..numpy import zeros as _zeros  # (a traced buffer when an outer differentiation traces g)

    ax = axis % len(x.shape)
    n = x.shape[ax]
    starts = np.asarray(indices, dtype=np.intp).reshape(-1)
    lengths, _, owners, positions = _segments(starts, n)
    out = _zeros(x.shape, np.result_type(bottom(g), x.dtype))
    if _tiling(starts):  # (segments one after another to the end: each element's one segment, no scatter)
        out[(slice(None),) * ax + (slice(int(starts[0]), None),)] = np.repeat(g, lengths, axis=ax)
        return out
    np.add.at(out, (slice(None),) * ax + (positions,), np.take(g, owners, axis=ax))
    return out


add_reduceat_p = get_primitive(_add_reduceat_impl, "np.add.reduceat")
deflinear(_add_reduceat_impl, _add_reduceat_T)


# ufuncs whose reduction does not depend on the order of the elements (so that each segment's
# traced reduction is NumPy's reduceat's function, whatever its loop's order)
_REDUCEAT_SEGMENTS = (np.multiply, np.maximum, np.minimum, np.fmax, np.fmin, np.logaddexp, np.logaddexp2, np.hypot)


def _ufunc_reduceat(ufunc, inputs, kwargs, folded=False):
    """``ufunc.reduceat``; ``folded``: a non-associative ufunc's (statistics.fold_reduceat)."""
    if ufunc is not np.add and ufunc not in _REDUCEAT_SEGMENTS and not folded:
        from ..core import _no_rule

        raise _no_rule(ufunc, "ufunc method .reduceat")
    a = dict(zip(("array", "indices", "axis", "dtype", "out"), inputs))
    a.update(kwargs)
    x = a["array"]
    out = a.get("out")
    if type(out) is tuple:  # the ufunc protocol always passes a tuple
        out = out[0]
    xb = bottom(x)
    with np.errstate(all="ignore"):  # NumPy's own checks (its loops for dtype=, axis=, the indices), on stand-ins
        ufunc.reduceat(np.ones(np.shape(xb), np.result_type(xb)), bottom(a["indices"]), a.get("axis", 0),
                       a.get("dtype"), None if out is None else np.empty(np.shape(bottom(out)),
                                                                          np.result_type(bottom(out))))
    if a.get("dtype") is not None and np.dtype(a["dtype"]).kind not in "fc":  # (an integer or bool loop: NumPy's
        return write_out(ufunc.reduceat(xb, bottom(a["indices"]), a.get("axis", 0), a["dtype"]), out)  # values)
    if a.get("dtype") is not None:
        x = as_dtype(x, a["dtype"])
    if a.get("dtype") is None:
        x = cast_for_out(x, out)
    ind = np.asarray(bottom(a["indices"]))
    indices = index_array(ind.astype(np.intp) if ind.dtype.kind == "f" else ind)  # (NumPy takes [0.0, 2] too)
    axis = a.get("axis", 0)
    if axis is None:  # (NumPy takes None for a 1-d array: its one axis)
        axis = 0
    if ufunc is np.add:
        res = bind(add_reduceat_p, (x,), {"indices": indices, "axis": axis})
    elif folded:
        from .statistics import fold_reduceat

        res = fold_reduceat(ufunc, x, indices, axis)
    else:
        res = _segment_reductions(ufunc, x, indices, axis)
    return write_out(res, out)


def _segment_reductions(ufunc, x, indices, axis):
    """``ufunc.reduceat(x, indices, axis)`` of _REDUCEAT_SEGMENTS' ufuncs: the
    reduction of each segment ``x[indices[i]:indices[i+1]]`` (to the end for the last), or
    ``x[indices[i]]`` alone where ``indices[i] >= indices[i+1]``, joined along ``axis``;
    the values NumPy's own call gives (its loop's order). In one pass over the elements (one
    gather, one segment sum): the extremes as a selection (ties split evenly, as max's), the
    log-sum-exps and hypot shifted by each segment's plain extreme, the products by np.prod of
    the segments padded by length class (_segment_products)."""
    ax = operator.index(axis) % np.ndim(x)
    n = np.shape(x)[ax]
    starts = np.asarray(indices).reshape(-1)
    if starts.size and (starts.min() < 0 or starts.max() >= n):  # NumPy's own error (no negative indices)
        ufunc.reduceat(np.zeros(np.shape(bottom(x)), np.result_type(bottom(x))), indices, axis)
    exact = ufunc.reduceat(bottom(x), indices, ax)
    if starts.size == 0:
        return exact
    lengths, offsets, owners, positions = _segments(starts.astype(np.intp, copy=False), n)
    # (traced: the segments' elements, in order; a slice where the segments tile the axis)
    xa = np.moveaxis(x, ax, 0)
    xs = xa[int(starts[0]):] if _tiling(starts) else np.take(xa, positions, axis=0)
    xb = np.asarray(bottom(xs))
    eb = np.moveaxis(exact, ax, 0)
    own = (owners,) + (Ellipsis,)
    segsum = lambda v: bind(add_reduceat_p, (v,), {"indices": offsets, "axis": 0})
    with np.errstate(all="ignore"):
        if ufunc is np.multiply:
            res = _segment_products(xs, lengths, offsets)
        elif ufunc in (np.maximum, np.minimum, np.fmax, np.fmin):
            at = eb[own]
            sel = xb == at
            if np.isnan(eb).any():
                sel |= np.isnan(xb) & np.isnan(at)
            w = sel.astype(xb.dtype if xb.dtype.kind in "fc" else np.float64)
            w /= np.add.reduceat(w, offsets, axis=0)[own]
            res = segsum(xs * w)
        elif ufunc in (np.logaddexp, np.logaddexp2):
            ex, lg = (np.exp2, np.log2) if ufunc is np.logaddexp2 else (np.exp, np.log)
            m = np.where(np.isfinite(eb), eb, 0.0)  # (a constant shift: it cancels)
            res = m + lg(segsum(ex(xs - m[own])))
        else:  # hypot: |segment|, scaled by its plain largest magnitude
            sc = np.maximum.reduceat(np.abs(xb), offsets, axis=0)
            sc = np.where((sc > 0) & np.isfinite(sc), sc, 1.0)
            res = sc * np.sqrt(segsum((xs / sc[own]) ** 2))
        single = (lengths == 1).reshape((-1,) + (1,) * (np.ndim(xb) - 1))
        if np.any(single):  # (one element is itself: reduceat copies it; hypot.reduce would give |x|)
            res = np.where(single, np.take(xs, offsets, axis=0), res)
        if ufunc is np.hypot:  # (a zero segment is the norm's kink: watched where a higher derivative meets it
            from .linalg import _norm_kink  # and what comes after reads it, not a one-element segment, its
            # element: regress117/118)

            skip = np.moveaxis(np.broadcast_to(single, np.shape(res)), 0, ax)
            return _norm_kink(_with_value(np.moveaxis(res, 0, ax), lambda: exact),
                              "np.hypot.reduceat at a zero segment (a norm)", skip=skip)
    return _with_value(np.moveaxis(res, 0, ax), lambda: exact)


def _segment_products(xs, lengths, offsets):
    """The product of each segment of ``xs`` (axis 0; segment k is ``lengths[k]`` elements from
    ``offsets[k]``) by np.prod's rule (zeros included), the segments padded with ones into one
    block per power-of-two length class: a few operations, at most twice the elements."""
    k = lengths.size
    padded = np.concatenate([xs, np.ones_like(xs[:1])], axis=0)  # (the last row: the padding's 1)
    pad = np.shape(xs)[0]
    parts, order = [], []
    width = 1
    while True:
        members = np.flatnonzero((lengths <= width) & (lengths > width // 2))
        if members.size:
            cols = np.arange(width)
            idx = np.where(cols < lengths[members, None], offsets[members, None] + cols, pad)
            parts.append(np.prod(np.take(padded, idx, axis=0), axis=1))
            order.append(members)
        if width >= lengths.max():
            break
        width *= 2
    res = np.concatenate(parts, axis=0)
    back = np.empty(k, np.intp)
    back[np.concatenate(order)] = np.arange(k)
    return np.take(res, back, axis=0)


def _ufunc_fold_reduceat(ufunc, inputs, kwargs):
    """``.reduceat`` of the non-associative ufuncs: statistics.fold_reduceat, through ufunc.reduce
    (its check that NumPy computes the left fold on this machine)."""
    return _ufunc_reduceat(ufunc, inputs, kwargs, folded=True)


_ufunc_fold_reduceat.folds_checked = True
for _u in (np.add, *_REDUCEAT_SEGMENTS):
    UFUNC_HANDLERS[(_u, "reduceat")] = _ufunc_reduceat
for _u in (np.subtract, np.true_divide, np.power, np.float_power, np.arctan2, np.copysign, np.fmod, np.remainder,
           np.heaviside):
    UFUNC_HANDLERS[(_u, "reduceat")] = _ufunc_fold_reduceat
