"""Statistics: the ``nan*`` reductions, median and quantiles, differences,
``gradient``, ``trapezoid``, ``cov``/``corrcoef``, histograms, and
``reduce``/``accumulate`` of the binary ufuncs that reductions.py does not cover.

Everything here is a composite: it calls differentiable NumPy functions on
the traced arrays, and computes only index decisions (where the NaNs are,
which order statistic a quantile picks) on plain values. Order statistics
are piecewise linear in the data: their derivative routes the cotangent to
the elements that were picked (``np.sort`` is a gather), exact away from ties.
"""
from __future__ import annotations

import builtins
import operator
import warnings

import numpy as np
from numpy.lib.array_utils import normalize_axis_index, normalize_axis_tuple

from ..core import FUNCTIONS, REGISTRY, UFUNC_HANDLERS, ArrayTracer, Tracer, bind, bottom, get_primitive, numpy_layout, weak, where_mask
from ..core import _bits, check_reduced_out, plain_operands, replicas, with_replayed_bits, write, write_out, write_reduced
from ..errors import NoRuleError, user_line
from .reductions import (_numpy_bits, std_kink, _reduce_args, _with_value, accumulate_axis, accumulate_out_of_another_shape,
                         as_dtype, cast_for_out, numpy_zero_signs)
from .indexing import equal_labels, runs_averaged, tie_average
from .shape import bin_sums_p

_NoValue = np._NoValue


def _given(d, *names):
    """The keyword arguments among ``names`` that the caller actually passed."""
    return {k: d[k] for k in names if k in d and d[k] is not _NoValue}


def _nan_mask(x):
    return np.isnan(bottom(x))


def _nan_filled(x, fill):
    """``x`` with NaNs replaced by the constant ``fill`` (which gets no derivative). As
    NumPy's nan-functions, a floating-point array is copied in its own layout (order 'K')
    first: the reductions then add in NumPy's order (a broadcast or transposed array's
    sum differs in the last bit from a C-ordered one's)."""
    m = _nan_mask(x)
    if isinstance(x, ArrayTracer) and np.ndim(x) > 1 and bottom(x).dtype.kind in "fc":
        y = x.copy(order="K")
        if m.any():
            y[m] = fill
        return y, m
    return (np.where(m, fill, x) if m.any() else x), m


# -- nan-ignoring reductions ---------------------------------------------------

_SUM_ARGS = ("a", "axis", "dtype", "out", "keepdims", "initial", "where")


def _nan_reducer(fn, fill, names):
    def handler(args, kwargs):
        a = _reduce_args(args, kwargs, names)
        x, _ = _nan_filled(a.pop("a"), fill)
        return fn(x, **_given(a, *names[1:]))

    return handler


def _into_out(res, out, replay, reduced=None):
    """``write_out(res, out)`` (``reduced``: a reduction's, the ufunc its errors name), with NumPy's bits
    where ``out=`` has another dtype than ``res``: NumPy computes into it (a float32 out's
    interpolation, a complex out's mean), the last bit of which a cast of ``res`` may miss;
    ``replay(plain_out)`` is NumPy's own call into it."""
    if not isinstance(out, Tracer) or np.result_type(bottom(out)) == np.result_type(bottom(res)):
        return write_out(res, out) if reduced is None else write_reduced(res, out, reduced)
    if reduced is not None:
        check_reduced_out(res, out, reduced)
    with_replayed_bits(out, replay, lambda: write(out, Ellipsis, res))
    return out


def _inexact_out(x, out):
    """NumPy's check of nanmean's, nanvar's and nanstd's ``out=``, before any cast of its own."""
    if (out is not None and np.issubdtype(np.asarray(plain_operands(x)).dtype, np.inexact)
            and not np.issubdtype(np.result_type(bottom(out)), np.inexact)):
        raise TypeError("If a is inexact, then out must be inexact")


def _np_nanmean(args, kwargs):
    a = _reduce_args(args, kwargs, ("a", "axis", "dtype", "out", "keepdims", "where"))
    _inexact_out(a["a"], a.get("out"))
    x, m = _nan_filled(a["a"], 0.0)
    k = _given(a, "axis", "keepdims", "where")
    cnt = np.sum(~m, dtype=np.intp, **k)
    tot = np.sum(x, **_given(a, "dtype"), **k)
    avg = tot / cnt
    dt = bottom(tot).dtype
    if bottom(avg).dtype != dt:  # NumPy divides into tot's own dtype
        avg = avg.astype(dt)
    return _into_out(avg, a.get("out"), lambda ob: np.nanmean(
        bottom(a["a"]), **{k: (bottom(v) if k == "where" else v) for k, v in _given(a, "axis", "dtype", "keepdims",
                                                                                    "where").items()}, out=ob),
        "add")


def _nan_extremum(fn, fill, own):
    def handler(args, kwargs):
        a = _reduce_args(args, kwargs, ("a", "axis", "out", "keepdims", "initial", "where"))
        x, m = _nan_filled(a["a"], fill)
        k = _given(a, "axis", "keepdims")
        res = fn(x, **k, **_given(a, "initial", "where"))
        res = numpy_zero_signs(res, lambda: own(bottom(a["a"]), **k, **{n: bottom(v) for n, v in _given(
            a, "initial", "where").items()}))  # (NumPy's fmax.reduce: the signs of tied zeros)
        if _given(a, "initial") or not m.any():
            return write_reduced(res, a.get("out"), "f" + own.__name__[3:])
        where = a.get("where", True)
        where = True if where is _NoValue else where_mask(where)
        allnan = np.all(m | ~np.broadcast_to(where, m.shape), **k)
        if allnan.any():
            res = np.where(allnan, np.nan, res)
        return write_reduced(res, a.get("out"), "f" + own.__name__[3:])

    return handler


def _nan_var(fn):
    def handler(args, kwargs):
        names = ("a", "axis", "dtype", "out", "ddof", "keepdims", "where", "mean", "correction")
        a = _reduce_args(args, kwargs, names)
        x = a.pop("a")
        _inexact_out(x, a.get("out"))
        m = _nan_mask(x)
        where = a.pop("where", _NoValue)
        if where is _NoValue and not _given(a, "mean", "out") and (
                a.get("dtype") is None or np.dtype(a["dtype"]).kind in "fc"):
            return _nanvar(x, m, a, fn is np.std)
        keep = ~m if where is _NoValue else (~m & where_mask(where))
        return fn(x, where=keep, **_given(a, *names[1:]))

    return handler


def _nanvar(x, m, a, sqrt):
    """np.nanvar / np.nanstd over an array holding NaN, as NumPy computes them:
    the mean summed in dtype, the deviations stored back in the array's own dtype (casting
    'unsafe': a complex array's mean in a real dtype loses its imaginary part), their squares
    summed in dtype, divided by the count less ddof."""
    dtype = None if a.get("dtype") is None else np.dtype(a["dtype"])
    axis, keepdims = a.get("axis"), bool(a.get("keepdims", False))
    ddof = a.get("ddof", 0) or a.get("correction", 0) or 0
    arr = np.where(m, 0.0, x) if np.dtype(bottom(x).dtype).kind == "f" else np.where(m, 0, x)
    cnt = np.sum(~m, axis=axis, dtype=np.intp, keepdims=True)
    avg = np.sum(arr, axis=axis, dtype=dtype, keepdims=True)
    adt = bottom(avg).dtype
    avg = avg / cnt
    if bottom(avg).dtype != adt:  # NumPy divides into the sum's own dtype
        avg = avg.astype(adt)
    dev = arr - avg
    xdt = bottom(x).dtype
    if bottom(dev).dtype != xdt:  # NumPy subtracts into the array itself
        dev = np.real(dev).astype(xdt) if xdt.kind != "c" and np.iscomplexobj(bottom(dev)) else dev.astype(xdt)
    dev = np.where(m, 0, dev)
    sqr = np.real(dev * np.conj(dev)) if xdt.kind == "c" else dev * dev
    var = np.sum(sqr, axis=axis, dtype=dtype, keepdims=keepdims)
    dof = (cnt if keepdims else np.squeeze(cnt, axis=axis) if axis is not None else np.reshape(cnt, ())) - ddof
    res = var / dof
    if bottom(res).dtype != bottom(var).dtype:
        res = res.astype(bottom(var).dtype)
    bad = np.asarray(dof) <= 0
    if np.any(bad):
        res = np.where(bad, np.nan, res)
    if not sqrt:
        return res
    return std_kink(np.sqrt(res), "np.nanstd", None if ddof else np.asarray(dof) <= 1)  # (one element: a constant)


FUNCTIONS[np.nansum] = _nan_reducer(np.sum, 0.0, _SUM_ARGS)
FUNCTIONS[np.nanprod] = _nan_reducer(np.prod, 1.0, _SUM_ARGS)
FUNCTIONS[np.nancumsum] = _nan_reducer(np.cumsum, 0.0, ("a", "axis", "dtype", "out"))
FUNCTIONS[np.nancumprod] = _nan_reducer(np.cumprod, 1.0, ("a", "axis", "dtype", "out"))
FUNCTIONS[np.nanmean] = _np_nanmean
FUNCTIONS[np.nanmax] = _nan_extremum(np.max, -np.inf, np.nanmax)
FUNCTIONS[np.nanmin] = _nan_extremum(np.min, np.inf, np.nanmin)
FUNCTIONS[np.nanvar] = _nan_var(np.var)
FUNCTIONS[np.nanstd] = _nan_var(np.std)


# -- order statistics: median, quantile, percentile ------------------------------


def _merge_reduced(x, axis, like=None):
    """``x`` with the reduced axes moved last and merged into one.
    Returns (array of shape K + (N,), kept shape K, shape for keepdims).
    ``like``: a plain array of x's shape whose memory order the merged axes follow
    (NumPy's fold over several axes visits them by decreasing stride; a negative stride
    is walked in its own direction)."""
    nd = np.ndim(x)
    shape = np.shape(x)
    axes = tuple(range(nd)) if axis is None else normalize_axis_tuple(axis, nd)
    keep = [k for k in range(nd) if k not in axes]
    kshape = tuple(shape[k] for k in keep)
    n = int(np.prod([shape[k] for k in axes], dtype=np.int64))
    order = sorted(axes)
    if like is not None and len(axes) > 1:
        st = like.strides
        order = sorted(axes, key=lambda k: -abs(st[k]) if shape[k] > 1 else 0)
    perm = keep + order
    if perm != list(range(nd)):
        x = np.transpose(x, perm)
    x = np.reshape(x, kshape + (n,))
    kdshape = tuple(1 if k in axes else shape[k] for k in range(nd))
    return x, kshape, kdshape


def _gather_last(xs, idx):
    """``xs[..., idx]`` elementwise: ``xs`` has shape K + (N,) (or is _SortedLanes), ``idx`` (plain
    ints) has shape Q + K; the result has shape Q + K."""
    if type(xs) is _SortedLanes:
        return xs.at(idx)
    kshape = np.shape(xs)[:-1]
    nd = np.ndim(idx)
    lead = nd - len(kshape)
    grids = tuple(
        np.arange(k).reshape((1,) * (lead + d) + (k,) + (1,) * (len(kshape) - d - 1))
        for d, k in enumerate(kshape)
    )
    return xs[grids + (idx,)]


class _SortedLanes:
    """The lanes of ``x2`` (shape K + (N,)) as a stable argsort orders them, read at a few ranks
    (``at``): the elements there found by NumPy's partition and a count of the equal values
    before them (a pass each), not by sorting every lane: the values, and the element a tie's
    derivative goes to (the mean of the tied ones: indexing.tie_average), are the sort's. For real lanes of
    more than 256 values."""

    def __init__(self, x2, xb):
        self.x2, self.xb = x2, xb

    def at(self, ranks):
        """The traced values at sorted ranks ``ranks`` (plain ints of shape Q + K)."""
        xb = self.xb
        ranks = np.asarray(ranks, dtype=np.intp)
        ks = np.unique(ranks)
        part = np.partition(xb, ks, axis=-1)
        pos = np.empty(ranks.shape, np.intp)
        isnan = np.isnan(xb)
        valid = np.sum(~isnan, axis=-1, keepdims=True)
        for k in ks.tolist():
            v = part[..., k:k + 1]
            vnan = np.isnan(v)
            # the element of rank k in a stable sort: the (k - less)-th of those equal to v (NaNs: last)
            less = np.where(vnan, valid, np.sum(xb < v, axis=-1, keepdims=True))
            equal = np.where(vnan, isnan, xb == v)
            first = np.argmax(np.cumsum(equal, axis=-1) > k - less, axis=-1)
            pos = np.where(ranks == k, first, pos)
        # (a tie at a rank read: the mean of the elements equal to the one picked, as np.sort's runs)
        labels = equal_labels(xb, [part[..., k:k + 1] for k in ks.tolist()])
        return _gather_last(self.x2 if labels is None else tie_average(self.x2, labels), pos)


def _order_stats(x, axis, omit_nan, weights=None):
    """The sorted slices (an array, or _SortedLanes) and the number of values each one counts (plain ints)."""
    x2, kshape, kdshape = _merge_reduced(x, axis)
    xb = bottom(x2)
    if xb.dtype.kind == "f" and xb.shape[-1] > 256 and weights is None and not omit_nan:
        nanlast = np.isnan(xb).any(axis=-1)
        n = np.full(kshape, xb.shape[-1], dtype=np.intp)
        return _SortedLanes(x2, xb), n, nanlast, kshape, kdshape, None
    perm = np.argsort(xb, axis=-1, kind="stable")
    xs = runs_averaged(np.take_along_axis(x2, perm, -1), -1)  # (a tie: its mean's derivative, as np.sort's)
    nanlast = np.isnan(np.take_along_axis(xb, perm[..., -1:], -1)[..., 0]) if xb.shape[-1] else np.zeros(kshape, bool)
    if omit_nan:
        n = np.sum(~np.isnan(xb), axis=-1)
    else:
        n = np.full(kshape, xb.shape[-1], dtype=np.intp)
    ws = None
    if weights is not None:
        wb = np.asarray(bottom(weights), dtype=np.float64)
        if wb.shape != np.shape(x):
            if axis is None or np.ndim(axis) or wb.ndim != 1 or wb.shape[0] != np.shape(x)[axis]:
                raise ValueError("Shape of weights must be consistent with shape of a along specified axis.")
            sh = [1] * np.ndim(x)
            sh[normalize_axis_index(axis, np.ndim(x))] = -1
            wb = np.broadcast_to(wb.reshape(sh), np.shape(x))
        if np.any(wb < 0):
            raise ValueError("Weights must be non-negative.")
        w2, _, _ = _merge_reduced(wb, axis)
        ws = np.take_along_axis(w2, perm, -1)
        if omit_nan:
            ws = np.where(np.isnan(np.take_along_axis(xb, perm, -1)), 0.0, ws)
    return xs, n, nanlast, kshape, kdshape, ws


def _shape_result(res, qshape, kshape, kdshape, keepdims):
    if keepdims:
        return np.reshape(res, qshape + kdshape)
    return res


def _median(x, axis, keepdims, omit_nan):
    xs, n, nanlast, kshape, kdshape, _ = _order_stats(x, axis, omit_nan)
    lo = np.maximum((n - 1) // 2, 0)
    hi = np.maximum(n // 2, 0)
    both = _gather_last(xs, np.stack([lo, hi]))  # (one gather: one partition of long lanes)
    res = (both[0] + both[1]) / 2
    bad = (n == 0) if omit_nan else nanlast
    if np.any(bad):
        res = np.where(bad, np.nan, res)
    return _shape_result(res, (), kshape, kdshape, keepdims)


def _np_median(omit_nan):
    fn = np.nanmedian if omit_nan else np.median

    def handler(args, kwargs):
        a = _reduce_args(args, kwargs, ("a", "axis", "out", "overwrite_input", "keepdims"))
        keepdims = a.get("keepdims", False)
        given = {k: a[k] for k in ("keepdims",) if a.get(k) is not None and a[k] is not _NoValue}
        _numpy_out_check(a.get("out"), lambda ob: fn(bottom(a["a"]), a.get("axis"), out=ob, **given))
        # NumPy's median takes an out= of the result's shape only; nanmedian's goes through
        # a ufunc, which broadcasts the result into it
        put = write_out if omit_nan else lambda r, out: write_reduced(r, out, "add")
        if np.size(bottom(a["a"])) == 0:  # no values: NumPy's NaNs, which depend on nothing
            return put(fn(bottom(a["a"]), a.get("axis"), keepdims=bool(keepdims)), a.get("out"))
        res = _median(a["a"], a.get("axis"), keepdims is not _NoValue and bool(keepdims), omit_nan)
        plain = _once(lambda: fn(bottom(a["a"]), a.get("axis"), keepdims=keepdims is not _NoValue and bool(keepdims)))
        if a.get("out") is None:
            res = _numpy_kind(res, plain)
        res = numpy_zero_signs(res, plain)  # (NumPy's mean of tied zeros)
        if a.get("overwrite_input"):
            _overwrite_input(a["a"], a.get("axis"), lambda c: fn(c, axis=a.get("axis"), overwrite_input=True))
        # (into an out= of another dtype NumPy averages the middle values there: its bits)
        return _into_out(res, a.get("out"), lambda ob: fn(bottom(a["a"]), a.get("axis"), out=ob, **given),
                         None if omit_nan else "add")

    return handler


def _once(call):
    """``call`` made at most once, silently (NumPy's own call beside the traced one, which warned)."""
    memo = []

    def once():
        if not memo:
            with warnings.catch_warnings(), np.errstate(all="ignore"):
                warnings.simplefilter("ignore")
                memo.append(call())
        return memo[0]

    return once


def _numpy_out_check(out, call):
    """NumPy's own error, if any, for the ``out=`` given, from ``call(stand_in)``: NumPy's call
    on the plain values into a stand-in of out's shape and dtype (its checks of out= differ by
    path: np.take's exact shape for some methods, an index error for a keepdims out of too few
    dimensions, a ufunc's broadcast for others)."""
    if out is not None:
        _once(lambda: call(np.empty_like(bottom(out))))()


def _numpy_kind(res, plain):
    """A 0-d ``res`` as a NumPy scalar or a 0-d array, as NumPy's own result ``plain()`` is (its
    median and quantile return either, by path: NaNs, weights, keepdims of a 0-d array)."""
    if np.ndim(res):
        return res
    if isinstance(plain(), np.ndarray):
        return np.copy(res) if type(res) is not ArrayTracer else res
    return res[()]


def _overwrite_input(x, axis, plain_call):
    """``overwrite_input=True``: NumPy leaves ``x`` partitioned (its elements permuted
    along ``axis``, or all of it when ``axis`` is None and it is C-contiguous, else a
    raveled copy is partitioned). The same permutation, found by running NumPy on a copy
    and matching values, is written into ``x`` as a traced gather, so that code reading
    ``x`` afterwards sees NumPy's values with their derivatives."""
    import warnings

    xb = bottom(x)
    if not isinstance(x, Tracer):
        plain_call(xb)  # a plain array: NumPy's own side effect
        return
    if axis is None:
        if not xb.flags.c_contiguous:
            return  # NumPy partitions a raveled copy: x is left as it was
    elif not isinstance(axis, (int, np.integer)):
        raise NoRuleError(
            f"overwrite_input=True with the tuple axis {axis} on a traced array at {user_line()}: where NumPy "
            "partitions the array itself depends on its memory layout. Pass overwrite_input=False (the result "
            "is the same; the array is then left as it is).")
    c = replicas(xb)[1][0]  # (NumPy partitions a lane in place, or a copy of it, by its layout)
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        plain_call(c)
    ax = -1 if axis is None else normalize_axis_index(int(axis), xb.ndim)
    xm = xb.reshape(-1) if axis is None else np.moveaxis(xb, ax, -1)
    cm = c.reshape(-1) if axis is None else np.moveaxis(c, ax, -1)
    # sort both by value, then sign bit (so -0.0 and 0.0 keep their bits): the k-th smallest
    # of c came from the k-th smallest of x, lane by lane
    src = np.lexsort((np.signbit(xm), xm), axis=-1)
    dst = np.lexsort((np.signbit(cm), cm), axis=-1)
    xs, cs = np.take_along_axis(xm, src, axis=-1), np.take_along_axis(cm, dst, axis=-1)
    if not (np.array_equal(xs, cs, equal_nan=True) and np.array_equal(np.signbit(xs), np.signbit(cs))):
        # (np.nanmedian and the other nan* functions move values over the NaNs: copies, not a
        # permutation of the elements)
        raise NoRuleError(
            f"overwrite_input=True at {user_line()} left the traced array with values copied over others "
            "(a nan* function over NaNs), which mutagrad does not reproduce. Pass overwrite_input=False (the "
            "result is the same; the array is then left as it is).")
    perm = np.empty_like(src)
    np.put_along_axis(perm, dst, src, axis=-1)
    if np.array_equal(perm, np.broadcast_to(np.arange(perm.shape[-1]), perm.shape)):
        return
    if axis is None:
        x[...] = np.reshape(np.reshape(x, -1)[perm], xb.shape)
    else:
        x[...] = np.moveaxis(np.take_along_axis(np.moveaxis(x, ax, -1), perm, axis=-1), -1, ax)


# Virtual index of the q-quantile among n sorted values (Hyndman & Fan), as NumPy computes it.
def _hf(alpha, beta):
    return lambda n, q: n * q + (alpha + q * (1 - alpha - beta)) - 1


_CONTINUOUS = {
    "linear": lambda n, q: (n - 1) * q,
    "interpolated_inverted_cdf": _hf(0, 1),
    "hazen": _hf(0.5, 0.5),
    "weibull": _hf(0, 0),
    "median_unbiased": _hf(1 / 3.0, 1 / 3.0),
    "normal_unbiased": _hf(3 / 8.0, 3 / 8.0),
}


def _boundary_index(v, pick_previous):
    prev = np.floor(v)
    g = v - prev
    return np.maximum(np.where(pick_previous(g, v), prev, prev + 1), 0).astype(np.intp)


_DISCRETE = {  # methods that pick one order statistic: the index, from plain n and q
    "lower": lambda n, q: np.floor((n - 1) * q).astype(np.intp),
    "higher": lambda n, q: np.ceil((n - 1) * q).astype(np.intp),
    "nearest": lambda n, q: np.around((n - 1) * q).astype(np.intp),
    "inverted_cdf": lambda n, q: _boundary_index(n * q - 1, lambda g, v: g == 0),
    "closest_observation": lambda n, q: _boundary_index(
        n * q - 1 - 0.5, lambda g, v: (g == 0) & (np.floor(v) % 2 == 1)),
}

# methods whose interpolation weight is piecewise constant: (virtual index, weight)
_STEPPED = {
    "averaged_inverted_cdf": (lambda n, q: n * q - 1, lambda g, v: np.where(g == 0, 0.5, 1.0)),
    "midpoint": (lambda n, q: 0.5 * (np.floor((n - 1) * q) + np.ceil((n - 1) * q)),
                 lambda g, v: np.where(v % 1 == 0, 0.0, 0.5)),
}


def _lerp(a, b, t, tb, one_minus_t=None):
    # NumPy's formula, so values agree bit for bit: the end nearer to t is exact
    d = b - a
    return np.where(tb >= 0.5, b - d * (1 - t if one_minus_t is None else one_minus_t), a + d * t)


def _quantile(x, q, axis, method, keepdims, omit_nan, weights=None, weak_q=False):
    qb = np.asarray(bottom(q))
    if qb.dtype.kind not in "biuf":
        raise TypeError("q must be real")
    if not (np.all(qb >= 0) and np.all(qb <= 1)):
        raise ValueError("Quantiles must be in the range [0, 1]")
    if qb.ndim > 2:  # (NumPy 2.4 takes a 2-d q, not more)
        raise ValueError("q must be a scalar or 1d")
    if weights is not None and method != "inverted_cdf":
        raise ValueError(f"Only method 'inverted_cdf' supports weights. Got: {method}.")
    if method not in _CONTINUOUS and method not in _DISCRETE and method not in _STEPPED:
        methods = list(_CONTINUOUS) + list(_DISCRETE) + list(_STEPPED)
        raise ValueError(f"{method!r} is not a valid method. Use one of: {methods}")
    xs, n, nanlast, kshape, kdshape, ws = _order_stats(x, axis, omit_nan, weights)
    qshape = qb.shape
    qq = np.reshape(q, qshape + (1,) * len(kshape)) if isinstance(q, Tracer) else qb.reshape(qshape + (1,) * len(kshape))
    qqb = bottom(qq)
    nn = n.reshape((1,) * len(qshape) + kshape)
    last = np.maximum(nn - 1, 0)
    if qb.dtype.kind == "f":  # NumPy's count is a Python int: it takes q's dtype (float32 q: float32 indexes)
        nn = nn.astype(qb.dtype)
    if ws is not None:
        res = _gather_last(xs, _weighted_index(ws, qqb, qshape, last))
    elif method in _DISCRETE:
        idx = np.minimum(_DISCRETE[method](nn, qqb), last)
        res = _gather_last(xs, np.broadcast_to(idx, qshape + kshape))
    else:
        if method in _CONTINUOUS:
            vi = _CONTINUOUS[method]
            vb = vi(nn, qqb)
            prev = np.floor(vb)
            gb = vb - prev
            g = vi(nn, qq) - prev if isinstance(q, Tracer) else gb  # linear in q: its derivative
        else:
            vi, fix = _STEPPED[method]
            vb = vi(nn, qqb)
            prev = np.floor(vb)
            g = gb = np.asarray(fix(vb - prev, vb), dtype=np.asarray(vb).dtype)  # (NumPy's _get_gamma)
        above = (vb >= nn - 1) | np.isnan(vb)
        lo = np.where(above, last, np.where(vb < 0, 0, prev)).astype(np.intp)
        hi = np.where(above, last, np.where(vb < 0, 0, prev + 1)).astype(np.intp)
        full = qshape + kshape
        lo, hi = np.broadcast_to(lo, full), np.broadcast_to(hi, full)
        both = _gather_last(xs, np.stack([lo, hi]))  # (one gather: one partition of long lanes)
        lov, hiv = both[0], both[1]
        dt = bottom(lov).dtype
        if weak_q and dt.kind == "f":
            # q was a Python number: NumPy interpolates with the weight as a Python float, which
            # takes the values' dtype in each product (1 - t is formed in float64 first)
            g = g if isinstance(g, Tracer) else np.asarray(g)
            res = _lerp(lov, hiv, g.astype(dt), gb, (1 - g).astype(dt))
        else:
            res = _lerp(lov, hiv, g, gb)
    bad = (n == 0) if omit_nan else nanlast
    if np.any(bad):
        res = np.where(np.broadcast_to(bad, np.shape(res)), np.nan, res)
    if omit_nan and np.size(n) and np.ravel(n)[0] == 0 and res.dtype != bottom(x).dtype:
        # NumPy computes lane by lane (np.apply_along_axis), the first lane's result giving the
        # dtype of all; an all-NaN lane's result is NaN of the array's dtype
        res = res.astype(bottom(x).dtype)
    return _shape_result(res, qshape, kshape, kdshape, keepdims)


def _weighted_index(ws, qb, qshape, last):
    """Weighted 'inverted_cdf': the first sorted value whose cumulative weight
    reaches q. Piecewise constant in the weights: they get no derivative."""
    cdf = np.cumsum(ws, axis=-1)
    cdf = cdf / cdf[..., -1:]
    if np.isnan(cdf[..., -1]).any():
        raise ValueError("Weights included NaN, inf or were all zero.")
    if qb.dtype.kind == "f":
        cdf = cdf.astype(qb.dtype)
    cdf = np.where(cdf == 0, -1.0, cdf)  # leading zero weights are never picked
    idx = np.sum(cdf < qb[..., None], axis=-1)
    return np.minimum(idx, last).astype(np.intp)


def _np_quantile(scale, omit_nan):
    fn = {(1, False): np.quantile, (100, False): np.percentile, (1, True): np.nanquantile,
          (100, True): np.nanpercentile}[scale, omit_nan]

    def handler(args, kwargs):
        names = ("a", "q", "axis", "out", "overwrite_input", "method", "keepdims")
        a = _reduce_args(args, kwargs, names)
        if a.get("interpolation") is not None:
            raise TypeError("the 'interpolation' argument was removed from NumPy; use method=")
        q = a["q"]
        # NumPy's own keywords, plain (the calls beside the traced one: its bits, its errors, its side effects)
        given = {k: (bottom(v) if k == "weights" else v) for k, v in a.items()
                 if k in ("method", "keepdims", "weights") and v is not None and v is not _NoValue}
        _numpy_out_check(a.get("out"), lambda ob: fn(bottom(a["a"]), bottom(q), a.get("axis"), out=ob, **given))
        if np.size(bottom(a["a"])) == 0:  # no values: NumPy's NaNs (or its error), which depend on nothing
            return write_out(fn(bottom(a["a"]), np.asarray(bottom(q)), a.get("axis"), **given), a.get("out"))
        weak_q = type(q) in (int, float) or (isinstance(q, Tracer) and q._scalar and weak(q))  # (NumPy's test)
        if scale != 1:
            q = np.true_divide(q, scale)
        keepdims = a.get("keepdims", False)
        res = _quantile(a["a"], q, a.get("axis"), a.get("method", "linear"),
                        keepdims is not _NoValue and bool(keepdims), omit_nan, a.get("weights"), weak_q)
        plain = _once(lambda: fn(bottom(a["a"]), bottom(a["q"]), a.get("axis"), **given))
        if a.get("out") is None:
            res = _numpy_kind(res, plain)
        res = numpy_zero_signs(res, plain)
        if a.get("overwrite_input"):  # (NumPy's own call: with weights it leaves the array as it was)
            _overwrite_input(a["a"], a.get("axis"), lambda c: fn(
                c, bottom(a["q"]), axis=a.get("axis"), overwrite_input=True,
                **{k: v for k, v in given.items() if k != "keepdims"}))
        return _into_out(res, a.get("out"), lambda ob: fn(bottom(a["a"]), bottom(a["q"]), a.get("axis"), out=ob,
                                                          **given))

    return handler


FUNCTIONS[np.median] = _np_median(False)
FUNCTIONS[np.nanmedian] = _np_median(True)
FUNCTIONS[np.quantile] = _np_quantile(1, False)
FUNCTIONS[np.percentile] = _np_quantile(100, False)
FUNCTIONS[np.nanquantile] = _np_quantile(1, True)
FUNCTIONS[np.nanpercentile] = _np_quantile(100, True)


# -- differences, gradient, integration -------------------------------------------


def _along(axis, nd, s):
    idx = [slice(None)] * nd
    idx[axis] = s
    return tuple(idx)


def _np_diff(args, kwargs):
    a = _reduce_args(args, kwargs, ("a", "n", "axis", "prepend", "append"))
    x, n, axis = a["a"], a.get("n", 1), a.get("axis", -1)
    if n == 0:
        return x
    if n < 0:
        raise ValueError("order must be non-negative but got " + repr(n))
    nd = np.ndim(x)
    if nd == 0:
        raise ValueError("diff requires input that is at least one dimensional")
    axis = normalize_axis_index(axis, nd)
    parts = []
    for key in ("prepend", "append"):
        v = a.get(key, _NoValue)
        if v is _NoValue:
            parts.append(None)
            continue
        if not isinstance(v, Tracer):
            v = np.asarray(v)
        if np.ndim(v) == 0:
            shape = list(np.shape(x))
            shape[axis] = 1
            v = np.broadcast_to(v, tuple(shape))
        parts.append(v)
    if parts[0] is not None or parts[1] is not None:
        x = np.concatenate([p for p in (parts[0], x, parts[1]) if p is not None], axis=axis)
    hi, lo = _along(axis, nd, slice(1, None)), _along(axis, nd, slice(None, -1))
    for _ in range(n):
        x = x[hi] - x[lo]
    return x


def _np_ediff1d(args, kwargs):
    a = _reduce_args(args, kwargs, ("ary", "to_end", "to_begin"))
    x = np.ravel(a["ary"])
    parts = [x[1:] - x[:-1]]
    for key, pos in (("to_begin", 0), ("to_end", 1)):
        v = a.get(key)
        if v is not None:
            dt = bottom(x).dtype  # NumPy's result has the dtype of ary; the ends are cast into it
            if not np.can_cast(bottom(np.asarray(v) if not isinstance(v, Tracer) else v), dt, casting="same_kind"):
                raise TypeError(f"dtype of `{key}` must be compatible with input `ary` under the `same_kind` rule.")
            v = np.ravel(v).astype(dt, copy=False) if isinstance(v, Tracer) else np.ravel(np.asarray(v, dtype=dt))
            parts.insert(0 if pos == 0 else len(parts), v)
    return np.concatenate(parts) if len(parts) > 1 else parts[0]


def _spacings(f, varargs, axes):
    """One spacing per axis: a scalar, or the differences of a coordinate array."""
    n = len(varargs)
    if n == 0:
        return [1.0] * len(axes)
    if n == 1 and np.ndim(varargs[0]) == 0:
        return list(varargs) * len(axes)
    if n != len(axes):
        raise TypeError("invalid number of arguments")
    dx = []
    for ax, d in zip(axes, varargs):
        if np.ndim(d) == 0:
            dx.append(d)
            continue
        if np.ndim(d) != 1:
            raise ValueError("distances must be either scalars or 1d")
        if len(d) != np.shape(f)[ax]:
            raise ValueError("when 1d, distances must match the length of the corresponding dimension")
        if not isinstance(d, Tracer):
            d = np.asarray(d)
            if d.dtype.kind in "iub":
                d = d.astype(np.float64)
        diffx = d[1:] - d[:-1]
        # Uniform plain coordinates take NumPy's uniform formula. Traced ones
        # always take the general formula: its derivative is the true one.
        if not isinstance(diffx, Tracer) and (diffx == diffx[0]).all():
            diffx = diffx[0]
        dx.append(diffx)
    return dx


def _np_gradient(args, kwargs):
    from ..numpy import empty as mempty

    f, varargs = args[0], args[1:]
    axis = kwargs.get("axis")
    edge_order = kwargs.get("edge_order", 1)
    if not isinstance(f, Tracer):
        f = np.asarray(f)
    nd = np.ndim(f)
    axes = tuple(range(nd)) if axis is None else normalize_axis_tuple(axis, nd)
    dx = _spacings(f, varargs, axes)
    if edge_order > 2:
        raise ValueError("'edge_order' greater than 2 not supported")
    otype = bottom(f).dtype
    if otype.kind not in "fc":
        f = f.astype(np.float64)
        otype = np.dtype(np.float64)
    outvals = []
    for ax, h in zip(axes, dx):
        if np.shape(f)[ax] < edge_order + 1:
            raise ValueError("Shape of array too small to calculate a numerical gradient, "
                             "at least (edge_order + 1) elements are required.")
        S = lambda s: _along(ax, nd, s)  # noqa: E731
        out = mempty(np.shape(f), otype)
        uniform = np.ndim(h) == 0
        if uniform:
            out[S(slice(1, -1))] = (f[S(slice(2, None))] - f[S(slice(None, -2))]) / (2. * h)
        else:
            shape = [1] * nd
            shape[ax] = -1
            d1, d2 = h[0:-1], h[1:]
            a = np.reshape(-(d2) / (d1 * (d1 + d2)), shape)
            b = np.reshape((d2 - d1) / (d1 * d2), shape)
            c = np.reshape(d1 / (d2 * (d1 + d2)), shape)
            out[S(slice(1, -1))] = a * f[S(slice(None, -2))] + b * f[S(slice(1, -1))] + c * f[S(slice(2, None))]
        if edge_order == 1:
            out[S(0)] = (f[S(1)] - f[S(0)]) / (h if uniform else h[0])
            out[S(-1)] = (f[S(-1)] - f[S(-2)]) / (h if uniform else h[-1])
        else:
            if uniform:
                a, b, c = -1.5 / h, 2. / h, -0.5 / h
            else:
                d1, d2 = h[0], h[1]
                a = -(2. * d1 + d2) / (d1 * (d1 + d2))
                b = (d1 + d2) / (d1 * d2)
                c = - d1 / (d2 * (d1 + d2))
            out[S(0)] = a * f[S(0)] + b * f[S(1)] + c * f[S(2)]
            if uniform:
                a, b, c = 0.5 / h, -2. / h, 1.5 / h
            else:
                d1, d2 = h[-2], h[-1]
                a = (d2) / (d1 * (d1 + d2))
                b = - (d2 + d1) / (d1 * d2)
                c = (2. * d2 + d1) / (d2 * (d1 + d2))
            out[S(-1)] = a * f[S(-3)] + b * f[S(-2)] + c * f[S(-1)]
        outvals.append(out)
    if any(isinstance(d, Tracer) and np.ndim(d) == 1 and np.size(d) > 1
           and (np.diff(bottom(d)) == np.diff(bottom(d))[0]).all() for d in varargs):
        # uniform traced coordinates took the general formula (its derivative is the true one);
        # NumPy's uniform formula gives other last bits: its values, the general derivative
        exact = np.gradient(bottom(f), *[bottom(d) for d in varargs], axis=axis, edge_order=edge_order)
        exact = (exact,) if len(axes) == 1 else exact
        outvals = [_with_value(o, lambda e=e: e) for o, e in zip(outvals, exact)]
    return outvals[0] if len(axes) == 1 else tuple(outvals)


def _np_trapezoid(args, kwargs):
    a = _reduce_args(args, kwargs, ("y", "x", "dx", "axis"))
    y, x, axis = a["y"], a.get("x"), a.get("axis", -1)
    if not isinstance(y, Tracer):
        y = np.asarray(y)
    nd = np.ndim(y)
    if x is None:
        d = a.get("dx", 1.0)
    else:
        if not isinstance(x, Tracer):
            x = np.asarray(x)
        if np.ndim(x) == 1:
            d = np.diff(x)
            shape = [1] * nd
            shape[axis] = np.shape(d)[0]
            d = np.reshape(d, shape)
        else:
            d = np.diff(x, axis=axis)
    hi, lo = _along(axis, nd, slice(1, None)), _along(axis, nd, slice(None, -1))
    return np.sum(d * (y[hi] + y[lo]) / 2.0, axis=axis)


FUNCTIONS[np.diff] = _np_diff
FUNCTIONS[np.ediff1d] = _np_ediff1d
FUNCTIONS[np.gradient] = _np_gradient
FUNCTIONS[np.trapezoid] = _np_trapezoid
if hasattr(np, "trapz"):  # removed in NumPy 2.4
    FUNCTIONS[np.trapz] = _np_trapezoid


# -- covariance and correlation --------------------------------------------------


def _as_rows(v, dtype):
    v = v.astype(dtype) if isinstance(v, Tracer) else np.asarray(v, dtype=dtype)
    return np.reshape(v, (1, -1)) if np.ndim(v) < 2 else v


def _np_cov(args, kwargs):
    a = _reduce_args(args, kwargs, ("m", "y", "rowvar", "bias", "ddof", "fweights", "aweights"))
    m, y = a["m"], a.get("y")
    rowvar, bias, ddof = a.get("rowvar", True), a.get("bias", False), a.get("ddof")
    if ddof is not None and ddof != int(ddof):
        raise ValueError("ddof must be integer")
    if np.ndim(m) > 2 or (y is not None and np.ndim(y) > 2):
        raise ValueError("m has more than 2 dimensions")
    dtype = a.get("dtype")
    if dtype is None:  # (a plain list of numbers as an array: np.result_type would read a list as a dtype spec)
        dtype = np.result_type(*(np.asarray(v) if isinstance(v, (list, tuple)) else v
                                 for v in (bottom(m),) + (() if y is None else (bottom(y),))), np.float64)
    X = _as_rows(m, dtype)
    if not rowvar and np.ndim(m) != 1:
        X = X.T
    if np.shape(X)[0] == 0:
        return np.array([]).reshape(0, 0)
    if y is not None:
        Y = _as_rows(y, dtype)
        if not rowvar and np.shape(Y)[0] != 1:
            Y = Y.T
        X = np.concatenate((X, Y), axis=0)
    if ddof is None:
        ddof = 0 if bias else 1
    fw, aw = a.get("fweights"), a.get("aweights")
    w = None
    if fw is not None:
        fw = np.asarray(bottom(fw))
        if not np.all(fw == np.around(fw)):
            raise TypeError("fweights must be integer")
        if np.any(fw < 0):
            raise ValueError("fweights cannot be negative")
        w = fw.astype(float)
    if aw is not None:
        if not isinstance(aw, Tracer):
            aw = np.asarray(aw, dtype=float)
        if np.any(bottom(aw) < 0):
            raise ValueError("aweights cannot be negative")
        w = aw if w is None else w * aw
    avg, w_sum = np.average(X, axis=1, weights=w, returned=True)
    w_sum = w_sum[0]
    if w is None:
        fact = np.shape(X)[1] - ddof
    elif ddof == 0:
        fact = w_sum
    elif aw is None:
        fact = w_sum - ddof
    else:
        fact = w_sum - ddof * np.sum(w * aw) / w_sum
    if fact <= 0:
        fact = 0.0
    X = X - avg[:, None]
    X_T = X.T if w is None else (X * w).T
    c = np.matmul(X, np.conj(X_T))  # X is 2-D: as np.dot
    c = c * np.true_divide(1, fact)
    return np.squeeze(c)


def _np_corrcoef(args, kwargs):
    a = _reduce_args(args, kwargs, ("x", "y", "rowvar"))
    c = np.cov(a["x"], a.get("y"), a.get("rowvar", True), dtype=a.get("dtype"))
    if np.ndim(c) == 0:
        return c / c
    s = np.sqrt(np.real(np.diagonal(c)))
    c = c / s[:, None]
    c = c / s[None, :]
    if np.iscomplexobj(bottom(c)):
        return np.clip(np.real(c), -1, 1) + 1j * np.clip(np.imag(c), -1, 1)
    return np.clip(c, -1, 1)


# NumPy's symmetric product np.dot(X, X.T) and its order of operations leave other last bits
# than the composition: NumPy's own values, the composition's derivative
FUNCTIONS[np.cov] = _numpy_bits(np.cov, ("m", "y", "rowvar", "bias", "ddof", "fweights", "aweights"), _np_cov)
FUNCTIONS[np.corrcoef] = _numpy_bits(np.corrcoef, ("x", "y", "rowvar"), _np_corrcoef)


# -- histograms ----------------------------------------------------------------------
# Bin edges computed from the data are linear in the outer edges (the data's min and
# max, or range=), spaced with np.linspace's arithmetic. The counts are piecewise
# constant in the data (an element changes bin only at an edge): plain integers, or
# with weights= the sums of each bin's weights, linear in the weights, added in
# NumPy's order (per block of 65536 elements; a cumulative sum with explicit edges).

_HIST_BLOCK = 65536


def _hist_inputs(a):
    """(data, weights, bins, range) flattened and traced as given, and their plain values."""
    from ..numpy import _has_tracer, array as marray

    x = a["a"] if isinstance(a["a"], Tracer) else np.asarray(a["a"])
    w = a.get("weights")
    if w is not None:
        w = w if isinstance(w, Tracer) else np.asarray(w)
        if np.shape(w) != np.shape(x):
            raise ValueError("weights should have the same shape as a.")
        w = np.ravel(w)
    bins = a.get("bins", 10)
    if isinstance(bins, (list, tuple)) and _has_tracer(bins):
        bins = marray(bins)
    rng = a.get("range")
    plain = (bottom(np.ravel(x)), bins if isinstance(bins, str) else bottom(bins),
             None if rng is None else tuple(bottom(r) for r in rng), None if w is None else bottom(w))
    return np.ravel(x), w, bins, rng, plain


def _hist_edges(x, bins, rng, plain, edges_plain):
    """The bin edges, traced where they depend on a traced value."""
    from ..numpy import linspace

    xb, bins_plain = plain[0], plain[1]
    if not isinstance(bins_plain, str) and np.ndim(bins_plain) == 1:
        return bins if isinstance(bins, Tracer) else edges_plain  # the edges given
    if rng is not None:
        first, last = rng
    elif xb.size == 0:
        first, last = 0, 1
    else:
        first, last = np.min(x), np.max(x)
    if not (isinstance(first, Tracer) or isinstance(last, Tracer)):
        return edges_plain
    if bottom(first) == bottom(last):
        first, last = first - 0.5, last + 0.5
    dt = np.result_type(bottom(first), bottom(last), xb)
    if np.issubdtype(dt, np.integer):
        dt = np.result_type(dt, float)
    return linspace(first, last, len(edges_plain), endpoint=True, dtype=dt)


def _hist_weighted(xb, w, edges, uniform):
    """The sums of the (traced) weights in each bin, as NumPy adds them."""
    nb = len(edges) - 1
    n = None
    if uniform:
        for i in range(0, len(xb), _HIST_BLOCK):
            ta, tw = xb[i:i + _HIST_BLOCK], w[i:i + _HIST_BLOCK]
            keep = (ta >= edges[0]) & (ta <= edges[-1])
            idx = np.minimum(np.searchsorted(edges, ta[keep], side="right") - 1, nb - 1)
            part = bind(bin_sums_p, (tw[keep], idx, nb))
            n = part if n is None else n + part
        dt = np.result_type(bottom(w))
        return n if np.result_type(bottom(n)) == dt else n.astype(dt)
    zero = np.zeros(1, np.result_type(bottom(w)))
    for i in range(0, len(xb), _HIST_BLOCK):
        ta, tw = xb[i:i + _HIST_BLOCK], w[i:i + _HIST_BLOCK]
        order = np.argsort(ta)
        sa = ta[order]
        cw = np.concatenate((zero, np.cumsum(tw[order])))
        pos = np.concatenate((np.searchsorted(sa, edges[:-1], "left"), np.searchsorted(sa, edges[-1:], "right")))
        n = cw[pos] if n is None else n + cw[pos]
    return np.diff(n)


def _np_histogram(args, kwargs):
    a = _reduce_args(args, kwargs, ("a", "bins", "range", "density", "weights"))
    x, w, bins, rng, plain = _hist_inputs(a)
    counts, edges_plain = np.histogram(plain[0], plain[1], plain[2], weights=plain[3])  # NumPy's checks too
    edges = _hist_edges(x, bins, rng, plain, edges_plain)
    if isinstance(w, Tracer) and len(plain[0]):  # (no data: NumPy's zeros, which no weight changes)
        wdt = np.result_type(bottom(w))
        # NumPy's bincount path only for weights that cast to double or complex (longdouble: sorted sums)
        simple = np.can_cast(wdt, np.double) or np.can_cast(wdt, complex)
        uniform = (isinstance(plain[1], str) or np.ndim(plain[1]) == 0) and simple
        counts = _hist_weighted(plain[0], w, edges_plain, uniform)
    if a.get("density"):
        db = np.diff(edges)
        db = db.astype(float) if isinstance(db, Tracer) else np.asarray(db, float)
        return counts / db / np.sum(counts), edges
    return counts, edges


def _np_histogram_bin_edges(args, kwargs):
    a = _reduce_args(args, kwargs, ("a", "bins", "range", "weights"))
    x, _, bins, rng, plain = _hist_inputs(a)
    return _hist_edges(x, bins, rng, plain, np.histogram_bin_edges(*plain))


FUNCTIONS[np.histogram] = _np_histogram
FUNCTIONS[np.histogram_bin_edges] = _np_histogram_bin_edges


# histogramdd and histogram2d: NumPy's algorithm (each sample's bin from searchsorted on the
# plain values, the weights summed by np.bincount of the raveled bin index, the outliers
# dropped), with the weights and the data-made edges traced as in np.histogram.


def _histogramdd(sample, bins=10, range=None, density=None, weights=None):
    if isinstance(sample, (list, tuple)):
        sample = np.stack([s if isinstance(s, Tracer) else np.asarray(s) for s in sample], axis=-1)
    elif not isinstance(sample, Tracer):
        sample = np.asarray(sample)
    if np.ndim(sample) != 2:
        sample = np.atleast_2d(sample).T
    sb = np.asarray(bottom(sample))
    wb = None if weights is None else np.asarray(bottom(weights))
    rb = None if range is None else [None if r is None else tuple(bottom(v) for v in r) for r in range]
    try:
        len(bins)
        per_dim = True
    except TypeError:  # (NumPy's test: one bins for every dimension)
        per_dim = False
    bb = [b if np.ndim(b) == 0 else np.asarray(bottom(b)) for b in bins] if per_dim else bins
    counts, edges_plain = np.histogramdd(sb, bb, rb, density, wb)  # (NumPy's checks and values)
    d = sb.shape[1]
    bins = bins if per_dim else [bins] * d
    edges = []  # (np.histogram's edges per dimension: traced where the data or range= make them)
    for i in builtins.range(d):
        r = None if range is None else range[i]
        plain = (sb[:, i], bins[i] if np.ndim(bins[i]) == 0 else bb[i], None if r is None else rb[i], None)
        edges.append(_hist_edges(sample[:, i], bins[i], r, plain, edges_plain[i]))
    traced_edges = any(isinstance(e, Tracer) for e in edges)
    if isinstance(weights, Tracer):  # the bins' sums of the weights, as NumPy adds them
        nbin = np.array([len(e) + 1 for e in edges_plain], np.intp)
        ncount = tuple(np.searchsorted(edges_plain[i], sb[:, i], side="right") for i in builtins.range(d))
        for i in builtins.range(d):
            ncount[i][sb[:, i] == edges_plain[i][-1]] -= 1
        xy = np.ravel_multi_index(ncount, nbin)
        raw = np.bincount(xy, np.ravel(weights), minlength=int(nbin.prod())).reshape(tuple(nbin))
        raw = raw[(slice(1, -1),) * d].astype(float, casting="safe")  # (as NumPy: bincount of no weights is int)
    elif density and traced_edges:
        raw = np.histogramdd(sb, bb, rb, False, wb)[0]
    else:
        return counts, edges
    if not density:
        return raw, edges
    hist = raw
    for i in builtins.range(d):  # (NumPy's order of divisions)
        shape = [1] * d
        shape[i] = len(edges_plain[i]) - 1
        hist = hist / np.reshape(np.diff(edges[i]), shape)
    hist = hist / np.sum(raw)
    return hist, edges


def _np_histogramdd(args, kwargs):
    a = _reduce_args(args, kwargs, ("sample", "bins", "range", "density", "weights"))
    return _histogramdd(a["sample"], a.get("bins", 10), a.get("range"), a.get("density"), a.get("weights"))


def _np_histogram2d(args, kwargs):
    a = _reduce_args(args, kwargs, ("x", "y", "bins", "range", "density", "weights"))
    bins = a.get("bins", 10)
    try:
        nb = len(bins)
    except TypeError:
        nb = 1
    if nb != 1 and nb != 2:
        bins = [bins, bins]
    hist, edges = _histogramdd([a["x"], a["y"]], bins, a.get("range"), a.get("density"), a.get("weights"))
    return hist, edges[0], edges[1]


FUNCTIONS[np.histogramdd] = _np_histogramdd
FUNCTIONS[np.histogram2d] = _np_histogram2d


# -- ufunc.reduce / ufunc.accumulate for the other binary ufuncs -------------------
#
# A left fold, exactly as NumPy evaluates these non-associative reductions, so
# the derivative is the chain rule through every step. The ufuncs that pick one
# of their arguments (maximum, fmax...) instead gather the element they picked.


def _reduce_kwargs(kwargs, names):
    k = dict(kwargs)
    bad = set(k) - set(names)
    if bad:
        raise TypeError(f"unsupported keyword arguments {sorted(bad)} on traced arrays")
    if "where" in k and k["where"] is None:  # (False to NumPy's ufunc machinery: nothing selected)
        k["where"] = np.False_
    return k


def _fold_reduce(ufunc, inputs, kwargs):
    (x,) = inputs
    if np.ndim(x) == 0:  # a 0-d array: NumPy reduces it as one element (any axis NumPy takes for it)
        ufunc.reduce(np.ones((), np.result_type(bottom(x))), axis=kwargs.get("axis", 0))  # (NumPy's axis check)
        k0 = dict(kwargs, axis=0, keepdims=False)
        if k0.get("where", True) is not True:
            k0["where"] = np.reshape(where_mask(k0["where"]), (1,))
        return _fold_reduce(ufunc, (np.reshape(x, (1,)),), k0)
    given_x = bottom(x)
    k = _reduce_kwargs(kwargs, ("axis", "dtype", "out", "keepdims", "initial", "where"))
    axis, keepdims = k.get("axis", 0), bool(k.get("keepdims", False))
    if k.get("dtype") is not None:
        x = as_dtype(x, k["dtype"])
    else:  # (NumPy's loop: the wider of the input's and out's dtypes)
        x = cast_for_out(x, k["out"][0] if type(k.get("out")) is tuple else k.get("out"))
    xb = bottom(x)
    # NumPy's own checks of the axis and of dtype= (a loop for it), on a stand-in (of the loop's dtype:
    # the input's cast to it has warned)
    ufunc.reduce(np.ones((1,) * xb.ndim, xb.dtype), axis=axis, dtype=k.get("dtype"))
    x2, kshape, kdshape = _merge_reduced(x, axis, xb)
    where = k.get("where", True)
    m = None
    if where is not True:
        m, _, _ = _merge_reduced(np.broadcast_to(where_mask(where), xb.shape), axis, xb)
    initial = k.get("initial", _NoValue)
    n = np.shape(x2)[-1]
    if initial is None or initial is _NoValue:
        if n == 0 or m is not None:
            if ufunc.identity is None:
                raise ValueError(
                    f"reduction operation '{ufunc.__name__}' does not have an identity, so to use a "
                    "where mask or reduce an empty array one has to specify 'initial'")
            initial = ufunc.identity
        else:
            initial = None
    fast = _ONE_PASS.get(ufunc)
    if fast is not None and ufunc not in _LOGSUMEXP and (k.get("out") is not None or initial is not None
                                                         or not np.all(np.isfinite(bottom(x2)))):
        fast = None  # (a difference's or a hypotenuse's formula where every value is finite, without out=,
        # whose dtype NumPy rounds each step to, nor initial=)
    if fast is not None and m is None and n > 0:  # one pass instead of n steps (log-sum-exp, a difference...)
        r = fast(x2)
        if initial is not None:
            r = ufunc(r, initial)
        # NumPy's own fold differs from the one-pass formula in the last bit; a branch on the
        # value must go as in a plain call
        with np.errstate(all="ignore"):
            exact = ufunc.reduce(bottom(x2), axis=-1, **({} if initial is None else {"initial": bottom(initial)}))
        r = _with_bits(r, exact)
        start = n
    elif initial is None:
        r, start = x2[..., 0], 1
        if ufunc.identity is not None:  # NumPy starts from the identity: hypot.reduce([-1.25]) is 1.25
            r = ufunc(ufunc.identity, r)
        elif n == 1:  # (a new array, as NumPy's: not a view of x, which may be written later)
            r = np.copy(r)
    elif isinstance(initial, Tracer):
        r, start = np.broadcast_to(initial, kshape), 0
    else:
        r, start = np.full(kshape, initial, dtype=np.result_type(xb, initial)), 0
    for i in range(start, n):
        v = ufunc(r, x2[..., i])
        r = v if m is None else np.where(m[..., i], v, r)
    r = _as_fold_dtype(ufunc, r, xb.dtype)
    if keepdims:
        r = np.reshape(r, kdshape)
    out = k.get("out")
    out = out[0] if type(out) is tuple else out
    if start < n:  # NumPy's own bits (its reduce loop may round a step otherwise than the ufunc's; it
        # accumulates in out=, of its dtype)
        given = {} if where is True else {"where": bottom(where)}
        for name in ("initial", "dtype"):
            if k.get(name) is not None:
                given[name] = bottom(k[name])
        if out is not None:
            given["out"] = np.empty(np.shape(bottom(out)), np.result_type(bottom(out)))
        with np.errstate(all="ignore"):
            exact = ufunc.reduce(given_x, axis=axis, keepdims=keepdims, **given)
        r = _with_bits(r, exact)
    if out is None and np.ndim(r) == 0 and type(bottom(r)) is np.ndarray:
        r = r[()]  # (NumPy's reduction to one value is a scalar)
    return write_reduced(r, out, ufunc.__name__)


def fold_reduceat(ufunc, x, indices, axis):
    """``ufunc.reduceat(x, indices, axis)`` of a non-associative ufunc: each segment
    ``x[indices[i]:indices[i+1]]`` (to the end for the last) folded by ``ufunc.reduce``, or
    ``x[indices[i]]`` alone where ``indices[i] >= indices[i+1]``, joined along ``axis``, with
    NumPy's bits (and its errors, from its own call first)."""
    with np.errstate(all="ignore"):
        exact = ufunc.reduceat(bottom(x), indices, axis)
    if getattr(UFUNC_HANDLERS.get((ufunc, "reduce")), "folds_checked", False):
        require_left_fold(ufunc, "reduce", "reduceat")
    ax = normalize_axis_index(operator.index(axis), np.ndim(x))
    n = np.shape(x)[ax]
    starts = [int(i) for i in np.asarray(indices).reshape(-1)]
    if not starts:
        return exact
    xm = np.moveaxis(x, ax, 0)
    if ufunc is np.subtract and np.all(np.isfinite(bottom(x))):
        # each segment's first value less the others' sum, one pass: 2 x_s - (x_s + ... + x_{e-1}), x_s alone
        # where the segment is empty (linear: its derivative is exact; NumPy's bits put back)
        ends = np.array(starts[1:] + [n])
        first = xm[np.array(starts)]
        whole = np.where(_column_of(np.array(starts) < ends, np.ndim(x)), 2 * first - np.add.reduceat(xm, starts),
                         first)
        return _with_bits(np.moveaxis(_as_fold_dtype(ufunc, whole, bottom(x).dtype), 0, ax), exact)
    parts = []
    for k, s in enumerate(starts):
        e = starts[k + 1] if k + 1 < len(starts) else n
        parts.append(ufunc.reduce(xm[s:e], axis=0) if s < e else xm[s])
    res = np.moveaxis(np.stack(parts), 0, ax)
    res = _as_fold_dtype(ufunc, res, bottom(x).dtype)
    return _with_bits(res, exact)


def _column_of(v, rank):
    """The 1-D ``v`` shaped (len(v), 1, ..., 1), to broadcast along the first of ``rank`` axes."""
    return np.reshape(v, (-1,) + (1,) * (rank - 1))


def _as_fold_dtype(ufunc, r, dt):
    """``r`` in the dtype of the ufunc's loop for ``dt`` (float_power computes in float64
    even when no step ran: a fold of one element)."""
    want = ufunc.resolve_dtypes((dt, dt, None))[2]
    return r if np.result_type(bottom(r)) == want else r.astype(want)


def _with_bits(t, exact):
    """Traced ``t`` with the bits of ``exact`` (NumPy's own result, within a few ulps of t's, or
    another zero's sign, in t's dtype): reductions' ``_with_value``, where the bits differ."""
    v = bottom(t)
    exact = np.asarray(exact, dtype=np.result_type(v))
    if np.shape(exact) != np.shape(v) or np.array_equal(_bits(np.ravel(v)), _bits(np.ravel(exact))):
        return t
    exact = exact if type(v) is np.ndarray else exact[()]
    return _with_value(t, lambda: exact)


def _logsumexp(exp, log):
    def reduce(x2):
        # shifted by the (constant) largest value: the shift cancels in value and derivative
        with np.errstate(divide="ignore", invalid="ignore"):  # NumPy's fold is silent on inf/nan too
            mb = np.max(bottom(x2), axis=-1, keepdims=True)
            mb = np.where(np.isfinite(mb), mb, 0.0)
            return mb[..., 0] + log(np.sum(exp(x2 - mb), axis=-1))

    return reduce


_LOGSUMEXP = {np.logaddexp: _logsumexp(np.exp, np.log), np.logaddexp2: _logsumexp(np.exp2, np.log2)}


def _difference(x2):
    """subtract.reduce: the first value less the sum of the others (linear: its derivative is exact)."""
    return x2[..., 0] - np.sum(x2[..., 1:], axis=-1)


def _hypotenuse(x2):
    """hypot.reduce: the norm, scaled by the (constant) largest magnitude; its derivative x / r (0 where
    every value is 0, as np.hypot's)."""
    mb = np.max(np.abs(bottom(x2)), axis=-1, keepdims=True)
    mb = np.where(mb > 0, mb, 1.0)
    from .linalg import _norm_kink

    # (a zero vector is the norm's kink: watched where a higher derivative meets it, as np.hypot's; the Hessian
    # of np.hypot.reduce(p) ** 2 at 0 came out 0 for 2 I, silently: regress117)
    return _norm_kink(mb[..., 0] * np.sqrt(np.sum((x2 / mb) ** 2, axis=-1)), "np.hypot.reduce at a zero vector (a norm)")


# one-pass formulas of the folds (NumPy's bits put back: _with_bits), instead of n traced steps
_ONE_PASS = {**_LOGSUMEXP, np.subtract: _difference, np.hypot: _hypotenuse}


# -- the running folds in one pass: accumulate along axis 0 of xm, the first element x_0 itself ---------------
# Each returns None where its formula could part from the fold's derivative (a non-finite value, a product or a
# sum of squares near the dtype's range): the elementwise fold runs there. NumPy's bits are put back after.

def _running_difference(xm):
    """subtract.accumulate: y_k = x_0 - (x_1 + ... + x_k) (linear: its derivative is exact)."""
    if not np.all(np.isfinite(bottom(xm))):
        return None
    return np.concatenate([xm[:1], xm[:1] - np.cumsum(xm[1:], axis=0)])


def _within_range(v, dt):
    """Whether every magnitude of the plain ``v`` lies well inside ``dt``'s normal range (2**±40 from its ends)."""
    fi = np.finfo(dt)
    a = np.abs(v)
    return bool(np.all((a >= fi.tiny * 2.0 ** 40) & (a <= fi.max / 2.0 ** 40)))


def _running_quotient(xm):
    """divide.accumulate: y_k = x_0 / (x_1 ... x_k), where no factor is 0 and neither the running product nor
    the quotient nears the dtype's range (the fold's own steps stay finite and nonzero there)."""
    xb = np.asarray(bottom(xm))
    with np.errstate(all="ignore"):
        prods = np.cumprod(xb[1:], axis=0)
        ok = np.all(np.isfinite(xb)) and _within_range(xb, xb.dtype) and _within_range(prods, xb.dtype) and (
            _within_range(xb[:1] / prods, xb.dtype))
    if not ok:
        return None
    return np.concatenate([xm[:1], xm[:1] / np.cumprod(xm[1:], axis=0)])


def _running_hypotenuse(xm):
    """hypot.accumulate: y_k = (x_0² + ... + x_k²)^½ for k >= 1, scaled by the (constant) largest magnitude
    along the axis, where each such sum is well above underflow (its derivative x_j / y_k there)."""
    xb = np.asarray(bottom(xm))
    if xb.dtype.kind != "f" or not np.all(np.isfinite(xb)):
        return None
    mb = np.max(np.abs(xb), axis=0, keepdims=True)
    with np.errstate(all="ignore"):
        sums = np.cumsum((xb / mb) ** 2, axis=0)[1:]
    if not np.all(sums >= np.finfo(xb.dtype).tiny * 2.0 ** 40):
        return None
    return np.concatenate([xm[:1], mb * np.sqrt(np.cumsum((xm / mb) ** 2, axis=0)[1:])])


_ONE_PASS_ACCUMULATE = {np.subtract: _running_difference, np.true_divide: _running_quotient,
                        np.hypot: _running_hypotenuse}


def _accumulate_args(ufunc, inputs, kwargs):
    (x,) = inputs
    if np.ndim(x) == 0:  # NumPy's own error (cannot accumulate on a scalar)
        ufunc.accumulate(np.zeros((), np.result_type(bottom(x))))
    src = x
    k = _reduce_kwargs(kwargs, ("axis", "dtype", "out"))
    axis = normalize_axis_index(accumulate_axis(x, k.get("axis", 0)), max(np.ndim(x), 1))
    out = k.get("out")
    out = out[0] if type(out) is tuple else out
    # (NumPy's loop: dtype=, or the wider of the input's and out's dtypes)
    if k.get("dtype") is not None:  # (NumPy's error for a dtype= it has no loop for, on a stand-in)
        ufunc.accumulate(np.ones((1,), k["dtype"]), dtype=k["dtype"])
    x = as_dtype(x, k["dtype"]) if k.get("dtype") is not None else cast_for_out(x, out)

    def numpy_check():  # NumPy's own error for this out, on plain values
        with np.errstate(all="ignore"):
            ufunc.accumulate(np.ones(np.shape(src), bottom(x).dtype), axis=axis, out=np.empty_like(bottom(out)))

    accumulate_out_of_another_shape(src, np.shape(x), out, f"np.{ufunc.__name__}.accumulate", numpy_check)

    given = {} if k.get("dtype") is None else {"dtype": k["dtype"]}

    def layout():  # the strides of NumPy's own result (of the input as given, with its dtype=)
        with np.errstate(all="ignore"):
            return ufunc.accumulate(np.asarray(bottom(src)), axis=axis, **given).strides

    return x, axis, out, layout


def _fold_accumulate(ufunc, inputs, kwargs):
    x, axis, out, layout = _accumulate_args(ufunc, inputs, kwargs)
    xm = np.moveaxis(x, axis, 0)
    if len(xm) == 0:
        layout()  # (NumPy's error for a dtype the ufunc has no loop for, which no step raises here)
        return write_out(_as_fold_dtype(ufunc, np.copy(x), bottom(x).dtype), out)
    fast = _ONE_PASS_ACCUMULATE.get(ufunc) if out is None and len(xm) > 1 else None
    res = fast(xm) if fast is not None else None  # (one pass in place of n steps, where its formula holds)
    if res is not None:
        res = np.moveaxis(res, 0, axis)
    else:
        r = xm[0]
        steps = [r]
        for i in range(1, len(xm)):
            r = ufunc(r, xm[i])
            steps.append(r)
        res = np.stack(steps, axis=axis)
    res = _as_fold_dtype(ufunc, res, bottom(x).dtype)
    with np.errstate(all="ignore"):  # NumPy's own bits (its accumulate loop rounds power, arctan2 otherwise)
        res = _with_bits(res, ufunc.accumulate(bottom(x), axis=axis))
    if out is None and np.ndim(res) > 1:
        res = numpy_layout(res, layout())
    return write_out(res, out)


# -- logaddexp.accumulate: a running log-sum-exp, one rule ----------------------------
# y_i = log Σ_{j<=i} e^{x_j}: dy_i/dx_j = e^{x_j - y_i} (j <= i), so the tangent is
# e^{c - y_i} Σ_{j<=i} e^{x_j - c} ẋ_j and the cotangent e^{x_j - c} Σ_{i>=j} ḡ_i e^{c - y_i}:
# with c = y_0, the smallest of the nondecreasing y, every factor stays within e^±LIMIT when y
# spans less than LIMIT (else, and at a non-finite value, the elementwise fold with its
# conventions); c cancels, so it is a constant. Base 2 for logaddexp2. Written with traced
# operations: the rule's own derivatives differentiate.

_LAE_SPAN = {np.logaddexp: 600.0, np.logaddexp2: 850.0}  # (e^600, 2^850: far from overflow)


def _lae_accumulate_impl(x, base2=False):
    return (np.logaddexp2 if base2 else np.logaddexp).accumulate(x, axis=-1)


lae_accumulate_p = get_primitive(_lae_accumulate_impl, "logaddexp.accumulate")


def _lae_parts(y, base2):
    """(the exponential of the base, the shift c = y_0: a constant)"""
    return (np.exp2 if base2 else np.exp), np.asarray(bottom(y))[..., :1]


def _lae_accumulate_rrule(x, base2=False):
    y = _lae_accumulate_impl(x, base2)

    def pullback(g):
        ex, c = _lae_parts(y, base2)
        s = np.flip(np.cumsum(np.flip(g * ex(c - y), -1), axis=-1), -1)
        return (ex(x - c) * s,)

    return y, pullback


def _lae_accumulate_frule(primals, tangents, base2=False):
    (x,), (t,) = primals, tangents
    y = _lae_accumulate_impl(x, base2)
    ex, c = _lae_parts(y, base2)
    return y, ex(c - y) * np.cumsum(ex(x - c) * t, axis=-1)


lae_accumulate_p.rrule, lae_accumulate_p.frule = _lae_accumulate_rrule, _lae_accumulate_frule


def _lae_accumulate(ufunc, inputs, kwargs):
    """np.logaddexp/logaddexp2.accumulate: one rule (above) where the values allow, else the
    elementwise fold."""
    x, axis, out, layout = _accumulate_args(ufunc, inputs, kwargs)
    xb = np.asarray(bottom(x))
    if xb.size == 0 or xb.dtype.kind != "f" or not isinstance(x, Tracer):
        return _fold_accumulate(ufunc, inputs, kwargs)
    with np.errstate(all="ignore"):
        yb = ufunc.accumulate(xb, axis=axis)
    # (an entry of -inf weighs nothing once the running value is finite: e^(x - c) is 0 there)
    if not ((np.isfinite(xb) | (xb == -np.inf)).all() and np.isfinite(yb).all()) or np.max(
            np.take(yb, -1, axis=axis) - np.take(yb, 0, axis=axis)) > _LAE_SPAN[ufunc]:
        return _fold_accumulate(ufunc, inputs, kwargs)
    res = np.moveaxis(bind(lae_accumulate_p, (np.moveaxis(x, axis, -1),), {"base2": ufunc is np.logaddexp2}), -1, axis)
    return write_out(numpy_layout(res, layout()) if out is None and np.ndim(res) > 1 else res, out)


def _select_accumulate(ufunc, inputs, kwargs):
    """maximum/minimum/fmax/fmin.accumulate: each output is the input element
    where the running extreme was last set (a gather)."""
    x, axis, out, layout = _accumulate_args(ufunc, inputs, kwargs)
    xb = bottom(x)
    if xb.size == 0:
        layout()  # (NumPy's error for a dtype without a loop)
        return write_out(np.copy(x), out)
    cm = np.moveaxis(ufunc.accumulate(xb, axis=axis), axis, -1)
    prev, cur = cm[..., :-1], cm[..., 1:]
    same = (cur == prev) | (np.isnan(cur) & np.isnan(prev))
    record = np.concatenate([np.ones(cm.shape[:-1] + (1,), bool), ~same], axis=-1)
    idx = np.maximum.accumulate(np.where(record, np.arange(cm.shape[-1]), 0), axis=-1)
    res = np.take_along_axis(np.moveaxis(x, axis, -1), idx, -1)
    res = numpy_zero_signs(np.moveaxis(res, -1, axis), lambda: np.moveaxis(cm, -1, axis))  # (tied zeros' signs)
    return write_out(numpy_layout(res, layout()) if out is None and np.ndim(res) > 1 else res, out)


def _nan_ext_reduce(handler):
    def reduce(ufunc, inputs, kwargs):
        k = dict(kwargs)
        k.setdefault("axis", 0)
        if k.get("dtype") is not None:
            dt = k.pop("dtype")
            inputs = tuple(v.astype(dt) if isinstance(v, Tracer) else np.asarray(v, dt) for v in inputs)
        if type(k.get("out")) is tuple:
            k["out"] = k["out"][0]
        return handler(inputs, k)

    return reduce


def _numpy_folds(ufunc, method):
    """Whether NumPy's ``ufunc.reduce``/``.accumulate`` is the left fold we
    differentiate. (NumPy 2.4's ``power.reduce`` and ``arctan2.reduce`` return
    something other than the left fold on some CPUs (an Intel Xeon, and for
    ``power`` an AMD EPYC too) and the left fold on others; a rule would
    differentiate another function where they do not fold.)"""
    probe = np.array([[1.25, 1.5, 0.75, 1.125, 1.75]] * 2)
    r = probe[:, 0]
    steps = [r]
    for i in range(1, probe.shape[1]):
        r = ufunc(r, probe[:, i])
        steps.append(r)
    want = r if method == "reduce" else np.stack(steps, axis=1)
    fn = getattr(ufunc, method)
    with np.errstate(all="ignore"):
        got = (fn(probe, axis=1), fn(probe.T, axis=0).T, fn(probe[0]))
    return all(np.allclose(g, w, rtol=1e-14, atol=0) for g, w in zip(got, (want, want, want[0])))


_FOLDS_HERE: dict = {}  # (ufunc, method) -> whether NumPy folds on this machine


def require_left_fold(ufunc, method, called=None):
    """Raise where NumPy's ``ufunc.method`` does not compute the left fold on this machine (checked once per
    ufunc and method); ``called``: the method the program called (reduceat folds each segment by reduce)."""
    ok = _FOLDS_HERE.get((ufunc, method))
    if ok is None:
        ok = _FOLDS_HERE[(ufunc, method)] = _numpy_folds(ufunc, method)
    if not ok:
        name = f"np.{ufunc.__name__}.{called or method}"
        raise NoRuleError(
            f"{name} was applied to a traced value at {user_line()}, but on this machine NumPy's {name} "
            f"does not compute the left fold x[0] {ufunc.__name__} x[1] {ufunc.__name__} ... along the axis"
            f"{' of each segment' if called == 'reduceat' else ''} (its result depends on the CPU its loops "
            "were built for), so there is no derivative of what it computes here. "
            f"Write the fold as a loop of np.{ufunc.__name__} calls, which is differentiated.")


def _checked_fold(handler, method):
    """The fold's handler, behind a check (made once per ufunc and method, at
    the first call) that NumPy computes the same left fold on this machine.
    Whether it does depends on the CPU NumPy's loops were dispatched for, so
    the registration does not: the handler is always there, and where NumPy
    computes something else it raises instead of differentiating another
    function than the one the program runs untraced."""

    def fold(ufunc, inputs, kwargs):
        require_left_fold(ufunc, method)
        return handler(ufunc, inputs, kwargs)

    fold.__name__ = handler.__name__
    fold.folds_checked = True
    return fold


_FOLDED = (np.subtract, np.true_divide, np.power, np.float_power, np.logaddexp, np.logaddexp2,
           np.arctan2, np.hypot, np.copysign, np.fmod, np.remainder, np.heaviside)
for _u in _FOLDED:
    if _u in REGISTRY:
        for _m, _h in (("reduce", _fold_reduce), ("accumulate", _fold_accumulate)):
            UFUNC_HANDLERS.setdefault((_u, _m), _checked_fold(_h, _m))
for _u, _how in ((np.subtract, "the first value less the others' sum"), (np.hypot, "the scaled norm")):
    UFUNC_HANDLERS[(_u, "reduce")].coverage_how = (
        f"rule: one pass ({_how}, NumPy's bits) where the values are finite, without out= or initial=; else the "
        "left fold (NoRuleError on a CPU where NumPy computes another)")
_lae_checked = _checked_fold(_lae_accumulate, "accumulate")
_lae_checked.coverage_how = ("rule (the elementwise left fold where the running values span more than e^600, 2^850 for logaddexp2, or "
                             "hold +inf or NaN or start at -inf; NoRuleError on a CPU where NumPy computes another)")
for _u in (np.logaddexp, np.logaddexp2):
    UFUNC_HANDLERS[(_u, "accumulate")] = _lae_checked
for _u in (np.maximum, np.minimum, np.fmax, np.fmin):
    UFUNC_HANDLERS.setdefault((_u, "accumulate"), _select_accumulate)
UFUNC_HANDLERS.setdefault((np.fmax, "reduce"), _nan_ext_reduce(FUNCTIONS[np.nanmax]))
UFUNC_HANDLERS.setdefault((np.fmin, "reduce"), _nan_ext_reduce(FUNCTIONS[np.nanmin]))
