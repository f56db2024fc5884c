"""Building arrays from arrays: tile, repeat, roll, pad, tril/triu, diag,
convolve/correlate, interp, the polynomial functions (polyval, polyfit, roots...),
meshgrid, block, choose, select, piecewise, compress, extract, resize, round,
real_if_close, nan_to_num, unique and the set operations.

Most are composites of differentiable NumPy calls: rearrangements are
gathers (``np.take`` with an index array computed on plain values), so their
derivative is the matching scatter; NumPy's own algorithms are followed where
the values must agree bit for bit (pad's reflections, interp's formula).
``np.convolve`` is the one primitive: bilinear, its pullback is a correlation.
"""
from __future__ import annotations

import threading

import numpy as np
from numpy.lib.array_utils import normalize_axis_index

from ..core import FUNCTIONS, ScalarTracer, Tracer, active_levels, bind, bottom, get_primitive, plain_operands, promotion_operand
from ..tape import PRIVATE, _same_bits
from ..errors import NoRuleError, user_line
from ..registry import conj_if_complex, deflinear, defzero
from ..tangents import NoTangent, NotImplementedTangent, Thunk, ZeroTangent, is_zero, not_implemented
from ..numpy import _has_tracer
from ..numpy import asarray as _masarray
from ..core import write_out
from .linalg import _bilinear_frule
from .reductions import _reduce_args
from .shape import _composite

ZERO = ZeroTangent()


def _arr(x):
    """A traced value as it is (a list holding traced values stacked); anything
    else as a plain ndarray."""
    if isinstance(x, Tracer):
        return x
    if isinstance(x, (list, tuple)) and _has_tracer(x):
        from ..numpy import array as marray

        return marray(x)
    return np.asarray(x)


# -- rearrangements: gathers -------------------------------------------------------


def _np_tile(args, kwargs):
    a = _reduce_args(args, kwargs, ("A", "reps"))
    x, reps = _arr(a["A"]), a["reps"]
    tup = tuple(reps) if np.iterable(reps) else (reps,)
    nd = max(len(tup), np.ndim(x))
    shape = (1,) * (nd - np.ndim(x)) + np.shape(x)
    tup = (1,) * (nd - len(tup)) + tup
    # (1, s0, 1, s1, ...) broadcast to (r0, s0, r1, s1, ...), then merged pairwise
    x = np.reshape(x, sum(((1, s) for s in shape), ()))
    x = np.broadcast_to(x, sum(((r, s) for r, s in zip(tup, shape)), ()))
    return np.copy(np.reshape(x, tuple(r * s for r, s in zip(tup, shape))))


def _np_repeat(args, kwargs):
    a = _reduce_args(args, kwargs, ("a", "repeats", "axis"))
    x, axis = _arr(a["a"]), a.get("axis")
    if axis is None:
        x, axis = np.ravel(x), 0
    axis = normalize_axis_index(axis, np.ndim(x))
    idx = np.repeat(np.arange(np.shape(x)[axis]), bottom(a["repeats"]))
    return np.take(x, idx, axis=axis)


def _roll_impl(x, shift, axis):
    return np.roll(x, shift, axis)


def _roll_T(g, x, shift, axis):
    return np.roll(g, tuple(-s for s in shift) if type(shift) is tuple else -shift, axis)


roll_p = get_primitive(_roll_impl, "np.roll")
deflinear(_roll_impl, _roll_T)  # (one record: NumPy's roll of the values, the reverse roll of the cotangent)


def _np_roll(args, kwargs):
    a = _reduce_args(args, kwargs, ("a", "shift", "axis"))
    shift, axis = np.asarray(bottom(a["shift"])), a.get("axis")
    shift = shift.item() if shift.ndim == 0 else tuple(shift.tolist())  # (NumPy's roll checks them)
    if axis is not None and not isinstance(axis, (int, np.integer)):
        axis = tuple(axis)
    return bind(roll_p, (_arr(a["a"]), shift, axis))


def _np_resize(args, kwargs):
    a = _reduce_args(args, kwargs, ("a", "new_shape"))
    shape = a["new_shape"]
    shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
    if any(d < 0 for d in shape):
        raise ValueError("all elements of `new_shape` must be non-negative")
    x = np.ravel(_arr(a["a"]))
    size = int(np.prod(shape, dtype=np.int64))
    if np.size(x) == 0 or size == 0:
        return np.zeros_like(x, shape=shape)
    return np.reshape(np.take(x, np.arange(size) % np.size(x)), shape)


def _np_compress(args, kwargs):
    a = _reduce_args(args, kwargs, ("condition", "a", "axis", "out"))
    x, axis = _arr(a["a"]), a.get("axis")
    cond = np.asarray(bottom(a["condition"]))
    if cond.ndim != 1:
        raise ValueError("condition must be a 1-d array")
    if axis is None:
        x, axis = np.ravel(x), 0
    return write_out(np.take(x, np.nonzero(cond)[0], axis=axis), a.get("out"),  # (NumPy's cast of out: 'safe')
                     lambda ob: np.compress(cond, plain_operands(a["a"]), a.get("axis"), out=ob))


def _np_extract(args, kwargs):
    a = _reduce_args(args, kwargs, ("condition", "arr"))
    pos = np.nonzero(np.ravel(np.asarray(bottom(a["condition"]))))[0]
    return np.take(np.ravel(_arr(a["arr"])), pos)


def _np_choose(args, kwargs):
    a = _reduce_args(args, kwargs, ("a", "choices", "out", "mode"))
    ind = np.asarray(bottom(a["a"]))
    if ind.dtype.kind not in "iub":
        raise TypeError("Cannot cast array data from dtype('float64') to dtype('int64') according to the rule 'safe'")
    if ind.dtype.kind == "b":  # (choices 0 and 1, as NumPy casts it; a boolean array would index as a mask)
        ind = ind.astype(np.intp)
    choices = [_arr(c) for c in a["choices"]]
    n, mode = len(choices), a.get("mode", "raise")
    if mode == "wrap":
        ind = ind % n
    elif mode == "clip":
        ind = np.clip(ind, 0, n - 1)
    elif np.any((ind < 0) | (ind >= n)):
        raise ValueError("invalid entry in choice array")
    shape = np.broadcast_shapes(ind.shape, *(np.shape(c) for c in choices))
    stacked = np.stack([np.broadcast_to(c, shape) for c in choices])
    res = np.take_along_axis(stacked, np.broadcast_to(ind, shape)[None], 0)[0]
    dtype = np.result_type(*(promotion_operand(c) for c in a["choices"]))  # (Python numbers are weak)
    if res.dtype != dtype:
        res = res.astype(dtype)
    return write_out(res, a.get("out"))


def _np_select(args, kwargs):
    a = _reduce_args(args, kwargs, ("condlist", "choicelist", "default"))
    conds, choices = list(a["condlist"]), [_arr(c) for c in a["choicelist"]]
    if len(conds) != len(choices):
        raise ValueError("list of cases must be same length as list of conditions")
    if not conds:
        raise ValueError("select with an empty condition list is not possible")
    conds = [np.asarray(bottom(c)) for c in conds]
    for i, c in enumerate(conds):
        if c.dtype.type is not np.bool_:
            raise TypeError(f"invalid entry {i} in condlist: should be boolean ndarray")
    default = a.get("default", 0)
    # NumPy's result dtype: Python numbers (and weak traced scalars) take the arrays' dtype
    dtype = np.result_type(*(promotion_operand(c) for c in list(a["choicelist"]) + [default]))
    res = _arr(default)
    shape = np.broadcast_shapes(np.shape(res), *(c.shape for c in conds), *(np.shape(c) for c in choices))
    res = np.broadcast_to(res, shape)
    for c, v in zip(reversed(conds), reversed(choices)):  # the first true condition wins
        res = np.where(c, v, res)
    return res if res.dtype == dtype else res.astype(dtype)


def _np_piecewise(args, kwargs):
    """NumPy's algorithm on a traced buffer: each function (or constant) is
    applied to the elements its condition selects and written there."""
    from ..core import active_levels, lift
    from ..pytree import tree_map

    kw = dict(kwargs)
    names = ("x", "condlist", "funclist")
    vals = list(args[:3]) + [kw.pop(k) for k in names[len(args[:3]):]]
    x, condlist, funclist = vals
    extra = args[3:]
    x = np.reshape(x, ()) if isinstance(x, Tracer) and np.ndim(x) == 0 else _arr(x)  # a 0-d array, as NumPy's
    if np.isscalar(condlist) or (not isinstance(condlist[0], (list, np.ndarray)) and np.ndim(x) != 0):
        condlist = [condlist]
    condlist = np.asarray(tree_map(bottom, list(condlist)), dtype=bool)
    n, n2 = len(condlist), len(funclist)
    if n == n2 - 1:  # the last function applies where no condition holds
        condlist = np.concatenate([condlist, ~np.any(condlist, axis=0, keepdims=True)], axis=0)
        n += 1
    elif n != n2:
        raise ValueError(f"with {n} condition(s), either {n} or {n + 1} functions are expected")
    y = lift(np.zeros_like(bottom(x)), active_levels())
    for cond, func in zip(condlist, funclist):
        if not callable(func):
            y[cond] = func
        else:
            vals = x[cond]
            if np.size(vals) > 0:
                y[cond] = func(vals, *extra, **kw)
    return y


FUNCTIONS[np.piecewise] = _np_piecewise


# -- triangles and diagonals ---------------------------------------------------


def _triangle(lower):
    def handler(args, kwargs):
        a = _reduce_args(args, kwargs, ("m", "k"))
        m, k = _arr(a["m"]), a.get("k", 0)
        mask = np.tri(*np.shape(m)[-2:], k=k if lower else k - 1, dtype=bool)
        return np.where(mask if lower else ~mask, m, np.zeros(1, bottom(m).dtype))

    return handler


def _np_diag(args, kwargs):
    from ..numpy import zeros as mzeros

    a = _reduce_args(args, kwargs, ("v", "k"))
    v, k = _arr(a["v"]), a.get("k", 0)
    if np.ndim(v) == 2:
        return np.diagonal(v, k)
    if np.ndim(v) != 1:
        raise ValueError("Input must be 1- or 2-d.")
    n = np.shape(v)[0]
    res = mzeros((n + abs(k),) * 2, bottom(v).dtype)
    i = np.arange(n)
    res[i + max(0, -k), i + max(0, k)] = v
    return res


FUNCTIONS.update({
    np.tile: _np_tile, np.repeat: _np_repeat, np.roll: _np_roll, np.resize: _np_resize,
    np.compress: _np_compress, np.extract: _np_extract, np.choose: _np_choose, np.select: _np_select,
    np.tril: _triangle(True), np.triu: _triangle(False), np.diag: _np_diag,
})


def _np_diagflat(args, kwargs):
    a = _reduce_args(args, kwargs, ("v", "k"))
    return _np_diag((np.ravel(_arr(a["v"])), a.get("k", 0)), {})


FUNCTIONS[np.diagflat] = _np_diagflat


# -- pad ------------------------------------------------------------------------------


def _pairs(x, ndim, index=False):
    """``x`` broadcast to ``ndim`` (before, after) pairs, as NumPy's pad reads
    pad_width, constant_values, end_values and stat_length."""
    if x is None:
        return [(None, None)] * ndim
    if isinstance(x, dict):
        seq = [(0, 0)] * ndim
        for ax, w in x.items():
            seq[ax] = (w, w) if isinstance(w, int) else tuple(w)
        x = seq
    if _has_tracer(x):
        from ..numpy import array as marray

        arr = marray(x)
    else:
        arr = np.array(x)
        if index:
            arr = np.round(arr).astype(np.intp)
    if index and np.any(bottom(arr) < 0):
        raise ValueError("index can't contain negative values")
    if np.ndim(arr) < 3:
        if np.size(arr) == 1:
            v = np.reshape(arr, -1)[0]
            return [(v, v)] * ndim
        if np.size(arr) == 2 and np.shape(arr) != (2, 1):
            r = np.reshape(arr, -1)
            return [(r[0], r[1])] * ndim
    b = np.broadcast_to(arr, (ndim, 2))
    if not isinstance(b, Tracer):
        return [tuple(p) for p in b.tolist()]  # Python numbers, as NumPy's (weak: ramps keep a float32 array's type)
    return [(b[i, 0], b[i, 1]) for i in range(ndim)]


def _cat(parts, axis):
    parts = [p for p in parts if p is not None and np.shape(p)[axis] > 0]
    return np.concatenate(parts, axis=axis) if len(parts) > 1 else (np.copy(parts[0]) if parts else None)


def _sl(axis, s, nd):
    idx = [slice(None)] * nd
    idx[axis] = s
    return tuple(idx)


def _block_of(v, x, axis, width):
    """``v`` (a scalar or an array with length 1 along axis) filling a pad of ``width``."""
    shape = list(np.shape(x))
    shape[axis] = width
    return np.broadcast_to(_arr(v).astype(bottom(x).dtype) if isinstance(v, Tracer) else np.asarray(v, bottom(x).dtype), shape)


def _pad_index(x, axis, before, after, mode):
    """Pad by a gather: NumPy's own pad of the positions 0..n-1 names the source of every output."""
    n = np.shape(x)[axis]
    return np.take(x, np.pad(np.arange(n), (before, after), mode=mode), axis=axis)


def _pad_reflect(x, axis, before, after, odd, include_edge):
    """NumPy's reflection, one chunk at a time (a chunk at most as long as the
    values present, so large pads reflect the already padded values)."""
    nd, period = np.ndim(x), np.shape(x)[axis]
    cur, lp, rp = x, before, after
    while lp > 0 or rp > 0:
        L = np.shape(cur)[axis]
        if include_edge:
            old, eo = L // period * period, 1
        else:
            old, eo = (L - 1) // (period - 1) * (period - 1), 0
        left = right = None
        if lp > 0:
            c = min(old, lp)
            left = cur[_sl(axis, slice(1 - eo, c - eo + 1), nd)][_sl(axis, slice(None, None, -1), nd)]
            if odd:
                left = 2 * cur[_sl(axis, slice(0, 1), nd)] - left
            lp -= c
        if rp > 0:
            c = min(old, rp)
            right = cur[_sl(axis, slice(L - 1 + eo - c, L - 1 + eo), nd)][_sl(axis, slice(None, None, -1), nd)]
            if odd:
                right = 2 * cur[_sl(axis, slice(L - 1, L), nd)] - right
            rp -= c
        cur = _cat([left, cur, right], axis)
    return cur


def _ramp(x, axis, width, end, edge):
    """np.linspace(end, edge, width, endpoint=False) along axis, with NumPy's arithmetic."""
    nd = np.ndim(x)
    delta = edge - end
    step = delta / width
    # (linspace computes in the type of its ends and a float, then casts to the array's: a
    # float32 array with float64 end values gets ramps computed in float64)
    t = np.arange(width, dtype=np.result_type(bottom(delta), 0.0)).reshape([width if k == axis else 1 for k in range(nd)])
    if np.any(bottom(step) == 0):
        y = (t / width) * delta
    else:
        y = t * step
    y = y + end
    dt = bottom(x).dtype
    return y if bottom(y).dtype == dt else y.astype(dt)


def _pad_axis(x, axis, before, after, mode, kw, values, lengths):
    nd, n = np.ndim(x), np.shape(x)[axis]
    if before == 0 and after == 0:
        return x
    if mode == "constant" or mode == "empty":
        vb, va = values if mode == "constant" else (0, 0)
        return _cat([_block_of(vb, x, axis, before), x, _block_of(va, x, axis, after)], axis)
    if n == 0:
        raise ValueError(f"can't extend empty axis {axis} using modes other than 'constant' or 'empty'")
    if mode == "wrap" and before <= n and after <= n:
        # (slices of x: a concatenation, whose pullback adds slices, not a gather with repeats)
        left = x[_sl(axis, slice(n - before, n), nd)] if before else None
        right = x[_sl(axis, slice(0, after), nd)] if after else None
        return _cat([left, x, right], axis)
    if mode == "edge" or (mode in ("reflect", "symmetric") and n == 1):
        left = _block_of(x[_sl(axis, slice(0, 1), nd)], x, axis, before) if before else None
        right = _block_of(x[_sl(axis, slice(n - 1, n), nd)], x, axis, after) if after else None
        return _cat([left, x, right], axis)
    if mode == "wrap":
        return _pad_index(x, axis, before, after, "wrap")
    if mode in ("reflect", "symmetric"):
        odd = kw.get("reflect_type", "even") == "odd"
        return _pad_reflect(x, axis, before, after, odd, mode == "symmetric")
    if mode == "linear_ramp":
        eb, ea = values
        left = _ramp(x, axis, before, eb, x[_sl(axis, slice(0, 1), nd)]) if before else None
        right = _ramp(x, axis, after, ea, x[_sl(axis, slice(n - 1, n), nd)]) if after else None
        if right is not None:
            right = right[_sl(axis, slice(None, None, -1), nd)]
        return _cat([left, x, right], axis)
    # statistics of the values near each edge
    fn = {"maximum": np.max, "minimum": np.min, "mean": np.mean, "median": np.median}[mode]
    lb, la = (n if v is None or v > n else v for v in lengths)
    if (lb == 0 or la == 0) and mode in ("maximum", "minimum"):
        raise ValueError("stat_length of 0 yields no value for padding")
    sb = fn(x[_sl(axis, slice(0, lb), nd)], axis=axis, keepdims=True)
    sa = sb if lb == la == n else fn(x[_sl(axis, slice(n - la, n), nd)], axis=axis, keepdims=True)
    return _cat([_block_of(sb, x, axis, before), x, _block_of(sa, x, axis, after)], axis)


_PAD_KWARGS = {
    "empty": (), "edge": (), "wrap": (), "constant": ("constant_values",), "linear_ramp": ("end_values",),
    "maximum": ("stat_length",), "mean": ("stat_length",), "median": ("stat_length",),
    "minimum": ("stat_length",), "reflect": ("reflect_type",), "symmetric": ("reflect_type",),
}


def _np_pad(args, kwargs):
    kw = dict(kwargs)
    a = _reduce_args(args, {k: kw.pop(k) for k in ("array", "pad_width", "mode") if k in kw}, ("array", "pad_width", "mode"))
    x, mode = _arr(a["array"]), a.get("mode", "constant")
    nd = np.ndim(x)
    pw = a["pad_width"]
    if not isinstance(pw, dict) and np.asarray(pw).dtype.kind not in "iu":
        raise TypeError("`pad_width` must be of integral type.")
    widths = [(int(b), int(c)) for b, c in _pairs(pw, nd, index=True)]
    if callable(mode):
        return _pad_callable(x, widths, mode, kw)
    if mode not in _PAD_KWARGS:
        raise ValueError(f"mode '{mode}' is not supported")
    bad = set(kw) - set(_PAD_KWARGS[mode])
    if bad:
        raise ValueError(f"unsupported keyword arguments for mode '{mode}': {bad}")
    values = _pairs(kw.get("constant_values", kw.get("end_values", 0)), nd)
    lengths = _pairs(kw.get("stat_length"), nd, index=True)
    lengths = [tuple(None if v is None else int(v) for v in p) for p in lengths]
    res = x
    for axis in range(nd):  # axis by axis: later axes pad the corners, as in NumPy
        res = _pad_axis(res, axis, *widths[axis], mode, kw, values[axis], lengths[axis])
    return np.copy(res) if res is x else res


def _pad_callable(x, widths, fn, kw):
    """A user's padding function writes into each 1-d view of the padded array."""
    from ..numpy import zeros as mzeros

    shape = tuple(s + b + c for s, (b, c) in zip(np.shape(x), widths))
    padded = mzeros(shape, bottom(x).dtype)
    padded[tuple(slice(b, b + s) for s, (b, _) in zip(np.shape(x), widths))] = x
    for axis in range(np.ndim(x)):
        view = np.moveaxis(padded, axis, -1)
        for ind in np.ndindex(np.shape(view)[:-1]):
            fn(view[ind + (Ellipsis,)], widths[axis], axis, kw)
    return padded


FUNCTIONS[np.pad] = _np_pad


# -- convolution ----------------------------------------------------------------


def _convolve_impl(a, v):
    return np.convolve(a, v, "full")


convolve_p = get_primitive(_convolve_impl, "np.convolve")


def _convolve_rrule(a, v):
    y = _convolve_impl(a, v)

    def pullback(g):
        # y[k] = sum_i a[i] v[k-i]:  abar[i] = sum_k g[k] conj(v[k-i]), a correlation
        return (Thunk(lambda: np.correlate(g, v, "valid")), Thunk(lambda: np.correlate(g, a, "valid")))

    return y, pullback


_convolve_frule = _bilinear_frule(_convolve_impl)


convolve_p.rrule, convolve_p.frule = _convolve_rrule, _convolve_frule


def _correlate_impl(a, v):
    return np.correlate(a, v, "full")


# its own primitive, not convolve(a, flip(conj(v))): NumPy swaps a short `a` with `v`, and the
# values must have its bits
correlate_p = get_primitive(_correlate_impl, "np.correlate")


def _correlate_rrule(a, v):
    y = _correlate_impl(a, v)
    _, conv_pullback = _convolve_rrule(a, np.flip(conj_if_complex(v)))  # the same numbers, mathematically

    def pullback(g):
        ga, gvf = conv_pullback(g)
        return ga, Thunk(lambda: conj_if_complex(np.flip(gvf())))  # v̄ from the flipped conjugate's

    return y, pullback


correlate_p.rrule, correlate_p.frule = _correlate_rrule, _bilinear_frule(_correlate_impl)  # (linear in conj v)

_MODES = ("valid", "same", "full")


def _conv_mode(mode):
    """NumPy's mode of convolve and correlate, with its errors: one of the names, or 0, 1, 2."""
    if isinstance(mode, str):
        if mode not in _MODES:
            raise ValueError("Use one of 'valid', 'same', or 'full' for convolve/correlate mode")
        return str(mode)
    if isinstance(mode, (int, np.integer)) and not isinstance(mode, (bool, np.bool_)):
        if not 0 <= mode <= 2:
            raise ValueError("integer convolve/correlate mode must be 0, 1, or 2")
        return _MODES[int(mode)]
    raise TypeError("convolve/correlate mode not understood")


def _mode_slice(y, n, m, mode, correlate):
    if mode == "full":
        return y
    if mode == "valid":
        return y[min(n, m) - 1: max(n, m)]
    lo = n // 2 if correlate and n < m else (min(n, m) - 1) // 2
    return y[lo: lo + max(n, m)]


def _conv_handler(correlate):
    def handler(args, kwargs):
        a = _reduce_args(args, kwargs, ("a", "v", "mode"))
        x, v = _arr(a["a"]), _arr(a["v"])
        # NumPy's checks in its order: np.convolve (Python) takes numbers as arrays of one (array(a, ndmin=1))
        # and checks the lengths first; then, as np.correlate (C), the mode, the depth, the lengths
        if not correlate:
            x, v = (w.reshape(1) if np.ndim(w) == 0 else w for w in (x, v))
            if len(x) == 0 or len(v) == 0:
                raise ValueError(f"{'a' if len(x) == 0 else 'v'} cannot be empty")
        mode = _conv_mode(a.get("mode", "valid" if correlate else "full"))
        if np.ndim(x) != 1 or np.ndim(v) != 1:
            small = np.ndim(x) == 0 or np.ndim(v) == 0
            raise ValueError(f"object {'of too small depth' if small else 'too deep'} for desired array")
        n, m = np.shape(x)[0], np.shape(v)[0]
        if n == 0 or m == 0:
            raise ValueError(f"{'first' if n == 0 else 'second'} array argument cannot be empty")
        y = bind(correlate_p if correlate else convolve_p, (x, v))
        return _mode_slice(y, n, m, mode, correlate)

    return handler


FUNCTIONS[np.convolve] = _conv_handler(False)
FUNCTIONS[np.correlate] = _conv_handler(True)


# -- interpolation and polynomials --------------------------------------------------


def _np_interp(args, kwargs):
    a = _reduce_args(args, kwargs, ("x", "xp", "fp", "left", "right", "period"))
    # NumPy computes in float64 (complex128 for complex fp)
    fdt = np.complex128 if np.iscomplexobj(bottom(a["fp"])) else np.float64
    for v, dt in ((a["x"], np.float64), (a["xp"], np.float64), (a["fp"], fdt)):
        vdt = np.result_type(bottom(v)) if isinstance(v, Tracer) else np.asarray(v).dtype
        if not np.can_cast(vdt, dt, casting="safe"):  # NumPy converts its arguments under 'safe'
            raise TypeError(f"Cannot cast array data from {vdt!r} to {np.dtype(dt)!r} according to the rule 'safe'")
    x, xp, fp = (v if isinstance(v, Tracer) and v.dtype == dt else v.astype(dt) if isinstance(v, Tracer)
                 else np.asarray(v, dt) for v, dt in ((a["x"], np.float64), (a["xp"], np.float64), (a["fp"], fdt)))
    left, right, period = a.get("left"), a.get("right"), a.get("period")
    if np.ndim(xp) != 1 or np.ndim(fp) != 1:
        raise ValueError("Data points must be 1-D sequences")
    if np.shape(xp)[0] != np.shape(fp)[0]:
        raise ValueError("fp and xp are not of the same length")
    if np.shape(xp)[0] == 0:
        raise ValueError("array of sample points is empty")
    if period is None and isinstance(x, Tracer):
        table = _plain_table(xp, fp, left, right)
        if table is not None:  # (a table of constants: one rule, NumPy's own call)
            res = bind(interp_p, (x, *table))
            return res[()] if np.ndim(res) == 0 else res
    if period is not None:
        if period == 0:
            raise ValueError("period must be a non-zero value")
        period = abs(period)
        left = right = None
        x, xp = x % period, xp % period
        order = np.argsort(bottom(xp))
        xp, fp = xp[order], fp[order]
        xp = np.concatenate((xp[-1:] - period, xp, xp[0:1] + period))
        fp = np.concatenate((fp[-1:], fp, fp[0:1]))
    xb, xpb = bottom(x), bottom(xp)
    m = np.shape(xp)[0]
    if m > 1 and np.any(xpb[1:] < xpb[:-1]):
        # NumPy does not check, and its result is then meaningless (its search assumes order)
        from ..errors import UnsupportedInputError

        raise UnsupportedInputError(
            f"np.interp at {user_line()}: the sample points xp are not increasing. NumPy does not check "
            "this and returns meaningless values (its search assumes sorted points), which mutagrad does "
            "not reproduce. Sort them first: order = np.argsort(xp); np.interp(x, xp[order], fp[order]).")
    left = fp[0] if left is None else left
    right = fp[-1] if right is None else right
    if m == 1:
        res = np.where(xb < xpb[0], left, np.where(xb > xpb[0], right, fp[0]))
        if not isinstance(res, Tracer):  # (constant in a traced x, but traced as every output of one)
            res = np.where(True, res, x)
        return res[()] if np.ndim(res) == 0 else res  # (a NumPy scalar for a 0-d x, as NumPy's)
    # xp[j] <= x < xp[j+1]: NumPy's formula slope * (x - xp[j]) + fp[j] on that segment
    j = np.clip(np.searchsorted(xpb, xb, side="right") - 1, 0, m - 2)
    xj, xj1, fj, fj1 = xp[j], xp[j + 1], fp[j], fp[j + 1]
    with np.errstate(all="ignore"):  # (infinite samples: NumPy's loop raises no warning)
        if np.iscomplexobj(bottom(fp)):  # NumPy's formula and rules part by part, its slopes (dfp) * (1 / dx)
            inv = 1.0 / (xj1 - xj)
            # (a traced array to write the parts into, of x's shape: only left= or right= may be traced)
            from ..numpy import zeros as traced_zeros

            res = traced_zeros(np.shape(xb), dtype=bottom(fj).dtype)
            for part in ("real", "imag"):
                a, b, e = getattr(fj, part), getattr(fj1, part), getattr(fp[-1], part)
                setattr(res, part, _interp_inside(x, xb, xj, xj1, xp[-1], a, b, e, (b - a) * inv))
        else:
            res = _interp_inside(x, xb, xj, xj1, xp[-1], fj, fj1, fp[-1], (fj1 - fj) / (xj1 - xj))
    res = np.where(xb < xpb[0], left, np.where(xb > xpb[-1], right, res))
    res = np.where(np.isnan(xb), x, res)  # (NumPy returns a NaN x itself)
    return res[()] if np.ndim(res) == 0 else res  # (a NumPy scalar for a 0-d x, as NumPy's)


def _constant(v):
    """``v``'s plain value if it carries no derivative (a plain value, or a pristine traced constant)."""
    if not isinstance(v, Tracer):
        return v
    return bottom(v) if v._plain_constant() else _NOT_CONSTANT


_NOT_CONSTANT = object()


def _plain_table(xp, fp, left, right):
    """``(xp, fp, left, right, slopes)`` as plain values, when ``np.interp``'s derivative is that of
    its points x alone with every slope finite: constant, real, finite samples at strictly
    increasing points (at least two), constant ends. Else None (the composite's rules).

    A table checked once in a differentiation is remembered there (its outermost level's), as copies
    with its slopes, served again while the caller's arrays hold the same bits: a loop calling
    np.interp on one large table passed over it several times per call and kept a copy of its slopes
    per call. The copies are writable (NumPy's interp copies a read-only table at every call) and
    written by nothing: tape.PRIVATE lists them, so that the tape keeps them as they are."""
    parts = tuple(_constant(v) for v in (xp, fp, left, right))
    if any(v is _NOT_CONSTANT for v in parts):
        return None
    xpv, fpv, lv, rv = parts
    if fpv.dtype.kind != "f" or xpv.shape[0] < 2 or any(
            v is not None and np.iscomplexobj(v) for v in (lv, rv)):
        return None
    levels = active_levels()
    tables = None
    if levels:
        holder = levels[0]
        tables = getattr(holder, "interp_tables", None)
        if tables is None:  # (its copies are forgotten with the differentiation)
            tables = holder.interp_tables = _Tables()
        hit = tables.get((id(xpv), id(fpv)))
        if (hit is not None and hit[0].shape == xpv.shape and hit[1].shape == fpv.shape
                and hit[0].dtype == xpv.dtype and hit[1].dtype == fpv.dtype
                and _same_bits(hit[0], xpv) and _same_bits(hit[1], fpv)):
            return hit[0], hit[1], lv, rv, hit[2]
    dx = xpv[1:] - xpv[:-1]
    if not ((dx > 0).all() and np.isfinite(xpv[0]) and np.isfinite(xpv[-1])):  # (increasing: its ends finite)
        return None
    with np.errstate(all="ignore"):
        slopes = (fpv[1:] - fpv[:-1]) / dx
    if not np.isfinite(slopes).all():  # (an infinite or NaN sample makes a slope so)
        return None
    if tables is None:
        return xpv, fpv, lv, rv, slopes
    xc, fc = xpv.copy(), fpv.copy()  # (writable: NumPy's interp copies a read-only table at every call)
    key = (id(xpv), id(fpv))
    with _TABLES_LOCK:  # (worker threads of one differentiation share its tables)
        old = tables.pop(key, None)  # (the table plain code changed since)
        while len(tables) >= 8:  # (the most recent tables of this differentiation)
            old = (old or ()) + tables.pop(next(iter(tables)))
        for v in old or ():
            PRIVATE.pop(id(v), None)
        tables[key] = (xc, fc, slopes)
        for v in (xc, fc, slopes):
            PRIVATE[id(v)] = v
    return xc, fc, lv, rv, slopes


_TABLES_LOCK = threading.Lock()


class _Tables(dict):
    """A level's remembered interpolation tables (see _plain_table), whose copies leave
    tape.PRIVATE with it."""

    def __del__(self):
        for entry in list(self.values()):
            for v in entry:
                if PRIVATE.get(id(v)) is v:
                    del PRIVATE[id(v)]


def _interp_impl(x, xp, fp, left, right, slopes):
    return np.interp(x, xp, fp, left, right)


interp_p = get_primitive(_interp_impl, "np.interp")


def _interp_dx(x, xp, slopes):
    """dy/dx of np.interp(x, xp, fp) at the values ``x`` (plain; piecewise constant in x, so its
    own derivative is zero): the slope of the segment right of x (the last segment's at xp[-1]),
    0 outside [xp[0], xp[-1]], 1 at a NaN x (NumPy returns x itself), as the composite below."""
    xb = bottom(x)
    j = np.searchsorted(xp, xb, side="right") - 1
    if np.ndim(j) == 0:
        return slopes[min(max(int(j), 0), xp.shape[0] - 2)] if xp[0] <= xb <= xp[-1] else 1.0 if np.isnan(xb) else 0.0
    np.clip(j, 0, xp.shape[0] - 2, out=j)
    d = np.where((xb >= xp[0]) & (xb <= xp[-1]), slopes[j], 0.0)
    return np.where(np.isnan(xb), 1.0, d)


def _interp_rrule(x, xp, fp, left, right, slopes):
    y = _interp_impl(x, xp, fp, left, right, slopes)
    d = _interp_dx(x, xp, slopes)
    return y, lambda g: (g * d,) + (NoTangent(),) * 5


def _interp_frule(primals, tangents):
    x, xp, slopes = primals[0], primals[1], primals[5]
    return _interp_impl(*primals), tangents[0] * _interp_dx(x, xp, slopes)


interp_p.rrule, interp_p.frule = _interp_rrule, _interp_frule


def _interp_inside(x, xb, xj, xj1, last, fj, fj1, flast, slope):
    """np.interp's value at points x (values xb) inside [xp[0], xp[-1]] (``last``, traced) of segments
    [xj, xj1], real values fj, fj1 there (flast at the last sample), with NumPy's rules: the
    formula from the segment's right end where the one from its left end is NaN (an infinite
    sample), fp[j] where that too is NaN and fp[j] == fp[j+1], and the sample's own value at a
    sample (the last one's at the last). Derivatives: the segment's formula, right of a sample
    (at the last one, the last segment's: in x and in xp[-1] alike, so that moving both together
    sees the value stay), where its slope is finite; else the value taken's."""
    res = slope * (x - xj) + fj
    bad = np.isnan(bottom(res))
    if np.any(bad):
        res = np.where(bad, slope * (x - xj1) + fj1, res)
        bad &= np.isnan(bottom(res)) & (bottom(fj) == bottom(fj1))
        if np.any(bad):
            res = np.where(bad, fj, res)
    sb = bottom(slope)
    finite = np.isfinite(sb) & np.isfinite(xb)
    at = xb == bottom(xj)
    if np.any(at & ~finite):  # a sample: its value (plus the zero slope * (x - xp[j]) where finite)
        res = np.where(at, np.where(finite, slope * (x - xj), 0) + fj, res)
    end = xb == bottom(last)
    if np.any(end):  # the last sample: its value, its derivative the last segment's where its slope is finite
        res = np.where(end, np.where(finite, slope * (x - last), 0) + flast, res)
    return res


def _np_polyval(args, kwargs):
    a = _reduce_args(args, kwargs, ("p", "x"))
    p = _arr(a["p"])
    if np.ndim(p) == 0:  # NumPy's own error (iteration over a 0-d array)
        np.polyval(np.zeros(()), 0.5)
    if isinstance(a["x"], np.poly1d):  # (NumPy's: the composition p(x(t)), a poly1d, by poly1d arithmetic)
        y, x = 0, a["x"]
        for k in range(np.shape(p)[0]):
            y = y * x + p[k]
        return y
    x = _arr(a["x"])
    y = np.zeros_like(x)
    for k in range(np.shape(p)[0]):
        y = y * x + p[k]
    return y


def _np_meshgrid(args, kwargs):
    copy, sparse = kwargs.get("copy", True), kwargs.get("sparse", False)
    indexing = kwargs.get("indexing", "xy")
    if indexing not in ("xy", "ij"):
        raise ValueError("Valid values for `indexing` are 'xy' and 'ij'.")
    nd = len(args)
    shapes = [[1] * nd for _ in range(nd)]
    for i in range(nd):
        shapes[i][i] = -1
    if indexing == "xy" and nd > 1:
        shapes[0][:2], shapes[1][:2] = [1, -1], [-1, 1]
    out = [np.reshape(_arr(x), s) for x, s in zip(args, shapes)]
    if not sparse:
        full = np.broadcast_shapes(*(np.shape(o) for o in out))
        if copy:
            out = [np.broadcast_to(o, full) for o in out]
        else:  # (NumPy's broadcast_arrays views: writable, as its meshgrid(copy=False) gives them)
            from .shape import _broadcast_view

            out = [o if np.shape(o) == full else _broadcast_view(o, full) for o in out]
    if copy:
        return tuple(np.copy(o) for o in out)
    return tuple(out) if not sparse else out


def _np_block(args, kwargs):
    arrays = args[0] if args else kwargs["arrays"]

    def depth(x, path):
        if isinstance(x, tuple):
            raise TypeError(f"{path} is a tuple. Only lists can be used to arrange blocks, "
                            "and np.block does not allow implicit conversion from tuple to ndarray.")
        if isinstance(x, list):
            if not x:
                raise ValueError(f"List at {path} cannot be empty")
            ds = {depth(c, f"{path}[{i}]") for i, c in enumerate(x)}
            if len(ds) != 1:
                raise ValueError("List depths are mismatched.")
            return ds.pop() + 1
        return 0

    list_nd = depth(arrays, "arrays")

    def leaves(x):
        return [y for c in x for y in leaves(c)] if isinstance(x, list) else [x]

    nd = max([list_nd] + [np.ndim(x) for x in leaves(arrays)])

    def build(x, d):
        if not isinstance(x, list):
            x = _arr(x)
            return np.reshape(x, (1,) * (nd - np.ndim(x)) + np.shape(x))
        parts = [build(c, d + 1) for c in x]
        return np.concatenate(parts, axis=-(list_nd - d)) if len(parts) > 1 else parts[0]

    res = build(arrays, 0)
    return res if len(leaves(arrays)) > 1 else np.copy(res)  # a new array, as NumPy's


FUNCTIONS[np.interp] = _np_interp
FUNCTIONS[np.polyval] = _np_polyval
FUNCTIONS[np.meshgrid] = _np_meshgrid
FUNCTIONS[np.block] = _np_block


# -- polynomial arithmetic (coefficients from the highest power down) ------------------
# NumPy's algorithms on traced values; a poly1d argument gives a poly1d result.


def _poly_args(*ps):
    truepoly = any(isinstance(p, np.poly1d) for p in ps)
    return truepoly, [_arr(p.coeffs if isinstance(p, np.poly1d) else p) for p in ps]


def _trim_leading(p):
    """np.poly1d's coefficients: leading zeros dropped ([0] if nothing is left). Traced zeros dropped leave
    their derivative NotImplemented, as np.poly1d's own trim does (shape._np_trim_zeros: a plain [0] in place
    of a traced zero polynomial lost it silently, regress108's np.poly1d(0.0) * q and scipy's lagrange)."""
    nz = np.flatnonzero(bottom(p))
    start = nz[0] if nz.size else len(p)
    if start == 0 or (len(p) == 1 and not isinstance(p, Tracer)):
        return p
    if not isinstance(p, Tracer):
        return p[start:] if nz.size else np.zeros(1, bottom(p).dtype)
    from .shape import _trimmed_p

    kept = p[start:] if nz.size else p[-1:] + 0.0  # (all zero: the constant term, +0.0 as NumPy's [0])
    dropped = p[:min(start, len(p) - 1)]
    if not len(dropped):
        return kept  # (a zero constant is kept: nothing dropped)
    # (NotImplemented along the dropped coefficients' tangents alone: zeros by a constant factor stay exact)
    return kept + bind(_trimmed_p, (dropped,), {"shape": tuple(np.shape(kept))})


def _np_polymul(args, kwargs):
    a = _reduce_args(args, kwargs, ("a1", "a2"))
    truepoly, (a1, a2) = _poly_args(a["a1"], a["a2"])
    val = np.convolve(_trim_leading(np.atleast_1d(a1)), _trim_leading(np.atleast_1d(a2)))
    return np.poly1d(val) if truepoly else val


def _np_polyder(args, kwargs):
    a = _reduce_args(args, kwargs, ("p", "m"))
    m = int(a.get("m", 1))
    if m < 0:
        raise ValueError("Order of derivative must be positive (see polyint)")
    truepoly, (p,) = _poly_args(a["p"])
    for _ in range(m):
        n = len(p) - 1
        p = p[:-1] * np.arange(n, 0, -1)
    return np.poly1d(p) if truepoly else p


def _np_polyint(args, kwargs):
    a = _reduce_args(args, kwargs, ("p", "m", "k"))
    m = int(a.get("m", 1))
    if m < 0:
        raise ValueError("Order of integral must be positive (see polyder)")
    k = a.get("k")
    k = np.zeros(m, float) if k is None else _arr(k)
    k = np.atleast_1d(k)
    if len(k) == 1 and m > 1:
        k = k[0] * np.ones(m, float)
    if len(k) < m:
        raise ValueError("k must be a scalar or a rank-1 array of length 1 or >m.")
    truepoly, (p,) = _poly_args(a["p"])
    for i in range(m):
        p = np.concatenate((p / np.arange(len(p), 0, -1), np.reshape(k[i], (1,))))
    return np.poly1d(p) if truepoly else p


def _np_polydiv(args, kwargs):
    from ..numpy import array as marray, zeros as mzeros

    a = _reduce_args(args, kwargs, ("u", "v"))
    truepoly, (u, v) = _poly_args(a["u"], a["v"])
    u, v = np.atleast_1d(u) + 0.0, np.atleast_1d(v) + 0.0
    dt = np.result_type(bottom(u)[0], bottom(v)[0])
    m, n = len(u) - 1, len(v) - 1
    scale = 1.0 / v[0]
    q = mzeros((max(m - n + 1, 1),), dt)
    r = marray(u, dtype=dt)  # a traced copy, reduced in place
    for k in range(m - n + 1):
        d = scale * r[k]
        q[k] = d
        r[k:k + n + 1] -= d * v
    while np.allclose(r[0], 0, rtol=1e-14) and np.shape(r)[-1] > 1:
        r = r[1:]
    return (np.poly1d(q), np.poly1d(r)) if truepoly else (q, r)


def _np_poly(args, kwargs):
    """The coefficients from the roots (or from a square matrix's eigenvalues),
    one factor (x - r) at a time, as NumPy multiplies them."""
    a = _reduce_args(args, kwargs, ("seq_of_zeros",))
    z = np.atleast_1d(_arr(a["seq_of_zeros"]))
    sh = np.shape(z)
    if len(sh) == 2 and sh[0] == sh[1] and sh[0] != 0:
        z = np.linalg.eigvals(z)
    elif len(sh) == 1:
        z = z.astype(np.mintypecode(bottom(z).dtype.char))
    else:
        raise ValueError("input must be 1d or non-empty square 2d array.")
    if len(z) == 0:
        return 1.0
    dt = bottom(z).dtype
    c = np.ones((1,), dtype=dt)
    for i in range(len(z)):
        c = np.convolve(c, np.concatenate((np.ones(1, dt), -np.reshape(z[i], (1,)))), mode="full")
    if np.iscomplexobj(bottom(c)):
        # conjugate pairs of roots give real coefficients: NumPy keeps the real part
        roots = np.asarray(bottom(z), complex)
        if np.all(np.sort(roots) == np.sort(roots.conjugate())):
            c = np.copy(np.real(c))
    return c


# np.roots: NumPy's values (the eigenvalues of the companion matrix, leading and
# trailing zero coefficients dropped); derivative by the implicit function theorem,
# p(r) = 0:  dr = -(sum_k dp_k r^(N-1-k)) / p'(r), with all N coefficients of p.
# A root at 0 from a trailing zero coefficient moves with that coefficient, and a
# leading zero coefficient moves the other roots; a composite through np.linalg.eigvals
# of the trimmed companion matrix would miss both. p'(r_i) is c prod_{j != i} (r_i - r_j)
# (c the leading nonzero coefficient), the derivative of the polynomial the computed roots
# are exact roots of: evaluated on p itself at a root LAPACK split by rounding (a double
# root's pair 1e-8 apart) it was off by its whole size, and the derivative with it (the
# sum of the roots of (x - 1)**3, -c1/c0, got a gradient of 3e4); with the product, the
# terms' cancellation leaves rounding only. Second derivatives at such a split pair are not
# computed (their terms, 1/gap**3, leave nothing after the cancellation): refused.


def _roots_impl(p):
    return np.roots(p)


roots_p = get_primitive(_roots_impl, "np.roots")
_REPEATED = ("np.roots: a repeated root has no derivative (it moves as a square or higher root of a change in "
             "the coefficients)")


def _roots_jacobian(p, r):
    """(J, repeated, groups): J[i, k] = d r_i / d p_k, its rows of exactly repeated roots zero (``repeated``,
    a mask, None if there is none); ``groups``, the roots closer than rounding (_split_by_rounding), whose
    rows sum to the derivative of the group's sum; J not_implemented there when a higher derivative
    differentiates it."""
    n, m = np.shape(p)[0], np.shape(r)[0]
    V = r[:, None] ** np.arange(n - 1, -1, -1)  # V[i, k] = r_i^(N-1-k)
    lead = int(np.flatnonzero(np.asarray(bottom(p)))[0])
    dp = p[lead] * np.prod(r[:, None] - r[None, :] + np.eye(m), axis=1)  # p'(r_i), from the roots
    db = np.asarray(bottom(dp))
    repeated = None
    if np.any(db == 0):
        repeated = db == 0
        dp = np.where(repeated, 1.0, dp)
    groups = _split_by_rounding(np.asarray(bottom(p)), np.asarray(bottom(r)), db)
    if groups and (isinstance(p, Tracer) or isinstance(r, Tracer)):
        return not_implemented(_SPLIT + " A second derivative there is not computed."), None, groups
    J = -V / dp[:, None]
    if repeated is not None:
        J = np.where(repeated[:, None], 0.0, J)
    return J, repeated, groups


_SPLIT = ("np.roots: roots closer together than the rounding of their values allows (a repeated root LAPACK "
          "split) have no derivative each (they move as a square or higher root of a change in the coefficients); "
          "only the sum of such a group is differentiated (a function whose derivative is the same for each of "
          "them, np.sum(np.roots(c))), where it can be computed to 1e-8 (a double root's; not a triple root's)")


def _split_by_rounding(p, r, dp):
    """The groups (index arrays) of computed roots within 1000 times the rounding error their condition
    numbers allow (n eps sum_k |p_k| |r|^(N-1-k) / |p'(r)| each) of one another: a repeated root that
    LAPACK split (a double root's pair about sqrt(eps) apart), or roots so close that their computed
    values leave their derivatives (1 / gap) a thousandth or more off (1.0 and 1.000001 in a cubic);
    exactly repeated ones are not among them."""
    n, m = p.shape[0], r.shape[0]
    if m < 2:
        return []
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        scale = (np.abs(r)[:, None] ** np.arange(n - 1, -1, -1)) @ np.abs(p)
        err = n * np.finfo(float).eps * scale / np.abs(dp)
        gap = np.abs(r[:, None] - r[None, :])
        near = (gap <= 1e3 * np.minimum(err[:, None], err[None, :])) & (gap > 0)  # (min: a clustered
        # root's first-order bound is no bound, 1 / p' of a cluster; a simple root apart from it is exact)
    if not near.any():
        return []
    label = np.arange(m)
    for i, j in zip(*np.nonzero(near)):  # (connected groups: a triple root's three)
        label[label == label[j]] = label[i]
    return [np.flatnonzero(label == k) for k in np.unique(label) if np.count_nonzero(label == k) > 1]


def _roots_rrule(p):
    r = _roots_impl(p)

    def pullback(g):
        if np.size(r) == 0:
            return (ZERO,)
        J, repeated, groups = _roots_jacobian(p, r)
        if isinstance(J, NotImplementedTangent):
            return (J,)
        if repeated is not None and np.any(np.asarray(bottom(g))[repeated] != 0):  # (a function of the simple
            return (not_implemented(_REPEATED),)  # roots alone is differentiated, as eig's values are)
        if groups:  # split groups: differentiated where g is the same for each of a group's roots, and where
            gb = np.asarray(bottom(g))  # the rows' cancellation leaves 1e-8 of the sum (a triple root's: 2e-6)
            if any(np.any(gb[grp] != gb[grp[0]]) for grp in groups) or any(
                    gb[grp[0]] != 0 and np.finfo(float).eps * np.max(np.sum(np.abs(J[grp]), axis=0))
                    > 1e-8 * np.max(np.abs(np.sum(J[grp], axis=0))) for grp in groups):
                return (not_implemented(_SPLIT),)
        return (conj_if_complex(J).T @ g,)

    return r, pullback


def _roots_frule(primals, tangents):
    (p,), (t,) = primals, tangents
    r = _roots_impl(p)
    if np.size(r) == 0:
        return r, ZERO
    J, repeated, groups = _roots_jacobian(p, r)
    if isinstance(J, NotImplementedTangent):
        return r, J
    if repeated is not None:  # (a repeated root moves as a square root: none in forward mode)
        return r, not_implemented(_REPEATED)
    if groups:  # (split groups: forward mode cannot tell a sum over the group from another function)
        return r, not_implemented(_SPLIT + " Forward mode cannot tell, and refuses: use reverse mode.")
    return r, J @ t


def _np_roots(args, kwargs):
    p = np.atleast_1d(_arr(args[0] if args else kwargs["p"]))
    if np.ndim(p) != 1:
        raise ValueError("Input must be a rank-1 array.")
    return bind(roots_p, (p,))


roots_p.rrule, roots_p.frule = _roots_rrule, _roots_frule


def _np_polyfit(args, kwargs):
    """NumPy's least squares (scaled Vandermonde matrix, np.linalg.lstsq) on
    traced values: differentiable in x, y and w; ``full`` and ``cov`` too."""
    import warnings

    a = _reduce_args(args, kwargs, ("x", "y", "deg", "rcond", "full", "w", "cov"))
    deg, rcond, full, cov = a["deg"], a.get("rcond"), a.get("full", False), a.get("cov", False)
    order = int(deg) + 1
    x, y = _arr(a["x"]) + 0.0, _arr(a["y"]) + 0.0
    if deg < 0:
        raise ValueError("expected deg >= 0")
    if np.ndim(x) != 1:
        raise TypeError("expected 1D vector for x")
    if np.size(x) == 0:
        raise TypeError("expected non-empty vector for x")
    if np.ndim(y) < 1 or np.ndim(y) > 2:
        raise TypeError("expected 1D or 2D array for y")
    if np.shape(x)[0] != np.shape(y)[0]:
        raise TypeError("expected x and y to have same length")
    if rcond is None:
        rcond = len(x) * np.finfo(bottom(x).dtype).eps
    lhs, rhs = np.vander(x, order), y
    w = a.get("w")
    if w is not None:
        w = _arr(w) + 0.0
        if np.ndim(w) != 1:
            raise TypeError("expected a 1-d array for weights")
        if np.shape(w)[0] != np.shape(y)[0]:
            raise TypeError("expected w and y to have the same length")
        lhs = lhs * w[:, np.newaxis]
        rhs = rhs * (w[:, np.newaxis] if np.ndim(rhs) == 2 else w)
    if np.iscomplexobj(bottom(lhs)):
        scale = np.sqrt(np.sum(np.abs(lhs) ** 2, axis=0))
    else:
        scale = np.sqrt(np.sum(lhs * lhs, axis=0))
    lhs = lhs / scale
    c, resids, rank, s = np.linalg.lstsq(lhs, rhs, rcond)
    c = (c.T / scale).T
    if rank != order and not full:
        warnings.warn("Polyfit may be poorly conditioned", np.exceptions.RankWarning, stacklevel=4)
    if full:
        return c, resids, rank, s, rcond
    if not cov:
        return c
    vbase = np.linalg.inv(np.dot(lhs.T, lhs)) / np.outer(scale, scale)
    if cov == "unscaled":
        fac = 1
    else:
        if len(x) <= order:
            raise ValueError("the number of data points must exceed order to scale the covariance matrix")
        fac = resids / (len(x) - order)
    return c, (vbase * fac if np.ndim(y) == 1 else vbase[:, :, np.newaxis] * fac)


FUNCTIONS.update({
    np.polymul: _np_polymul, np.polyder: _np_polyder, np.polyint: _np_polyint, np.polydiv: _np_polydiv,
    np.poly: _np_poly, np.roots: _np_roots, np.polyfit: _np_polyfit,
})
_composite(np.polyadd)  # zeros padded in front, then a sum: NumPy's own code traces
_composite(np.polysub)


# -- rounding and cleaning ------------------------------------------------------------


def _round_impl(x, decimals=0):
    return np.round(x, decimals)


round_p = get_primitive(_round_impl, "np.round")
defzero(_round_impl)


def _np_round(args, kwargs):
    a = _reduce_args(args, kwargs, ("a", "decimals", "out"))
    res = bind(round_p, (a["a"],), {"decimals": a.get("decimals", 0)})
    if a.get("out") is None:
        return res
    # (into an out= of another dtype NumPy scales, rounds and scales back there, under same_kind)
    return write_out(res, a["out"], lambda ob: np.round(plain_operands(a["a"]), a.get("decimals", 0), out=ob))


def _np_real_if_close(args, kwargs):
    a = _reduce_args(args, kwargs, ("a", "tol"))
    x, tol = _arr(a["a"]), a.get("tol", 100)
    if isinstance(x, ScalarTracer):  # (NumPy's asanyarray: a 0-d array, not a scalar)
        x = _masarray(x)
    dt = bottom(x).dtype
    if dt.kind != "c":
        return x
    if tol > 1:
        tol = np.finfo(dt).eps * tol
    return np.real(x) if np.all(np.abs(np.imag(bottom(x))) < tol) else x


def _np_nan_to_num(args, kwargs):
    a = _reduce_args(args, kwargs, ("x", "copy", "nan", "posinf", "neginf"))
    x = _arr(a["x"])
    if a.get("copy", True):
        x = np.copy(x)
    dt = bottom(x).dtype
    if dt.kind not in "fc":
        return x
    if a.get("copy", True) and not isinstance(x, Tracer) and any(
            isinstance(a.get(k), Tracer) for k in ("nan", "posinf", "neginf")):
        # (plain data, a traced replacement: the copy holds traced values, the numpyedge2 tester)
        from ..numpy import array as _mnp_array

        x = _mnp_array(x)
    parts = (np.real(x), np.imag(x)) if dt.kind == "c" else (x,)
    info = np.finfo(dt)
    big = info.max if a.get("posinf") is None else a["posinf"]
    small = info.min if a.get("neginf") is None else a["neginf"]
    for d in parts:
        db = bottom(d)
        for mask, v in ((np.isnan(db), a.get("nan", 0.0)), (np.isposinf(db), big), (np.isneginf(db), small)):
            if mask.any():
                np.copyto(d, v, where=mask)
    return x[()] if np.ndim(x) == 0 else x  # (NumPy's: a scalar for a 0-d argument)


FUNCTIONS[np.round] = FUNCTIONS[np.around] = _np_round
FUNCTIONS[np.real_if_close] = _np_real_if_close
FUNCTIONS[np.nan_to_num] = _np_nan_to_num


# -- unique: a value that occurs once is that occurrence -------------------------------


def _unique_tied_impl(x, idx, tied=None):
    return np.take(x, idx, axis=0)


unique_tied_p = get_primitive(_unique_tied_impl, "the repeated values of np.unique")
_UNIQUE_TIED = (
    "np.unique (or a set operation: union1d, setdiff1d, setxor1d, intersect1d): a value that repeats in "
    "an array has no derivative (any change of one of its occurrences splits it in two: the result's size "
    "changes, or the others keep it, and no occurrence speaks for the others). "
    "u[inverse] is the array itself (use it); group sums and means over the groups differentiate as "
    "np.bincount(inverse, weights=x) (/ counts) or np.add.at; or call np.unique on mg.stop_gradient(x) "
    "where only the groups matter")


def _reaches_tied(d, tied):
    """Whether the derivative ``d`` (an array along the unique values' axis 0, or of the input's
    elements) reaches the ``tied`` positions; a traced one may, by its own derivative."""
    if is_zero(d):
        return False
    if isinstance(d, Tracer):
        return True
    return bool(np.any(np.asarray(d)[tied] != 0))


def _unique_tied_rrule(x, idx, tied=None):
    """The values: gathers of the first occurrences; ``tied`` marks the values that repeat, whose
    derivative is refused where the cotangent reaches them (the others' is exact)."""
    y = _unique_tied_impl(x, idx)

    def pullback(g):
        if _reaches_tied(g, tied.v[0]):
            return not_implemented(_UNIQUE_TIED), NoTangent()
        gx = np.zeros_like(g, shape=np.shape(x))
        gx[idx] = g  # (each index once: the first occurrences)
        return gx, NoTangent()

    return y, pullback


def _unique_tied_frule(primals, tangents, tied=None):
    x, idx = primals
    t = tangents[0]
    if _reaches_tied(t, tied.v[1]):
        return _unique_tied_impl(x, idx), not_implemented(_UNIQUE_TIED)
    return _unique_tied_impl(x, idx), np.take(t, idx, axis=0)


unique_tied_p.rrule, unique_tied_p.frule = _unique_tied_rrule, _unique_tied_frule


def _np_unique(args, kwargs):
    """The unique values are a gather of their occurrences: the derivative of a value that
    occurs once flows to it; a value that repeats has none (not implemented where a derivative
    reaches it: a tie is a point where the output's size changes, and neither the first
    occurrence nor the mean is right: ``x - u[inverse]`` is 0 for every x)."""
    a = _reduce_args(args, kwargs, ("ar", "return_index", "return_inverse", "return_counts", "axis"))
    a.setdefault("equal_nan", True)
    x, axis = _arr(a["ar"]), a.get("axis")
    opts = {k: a[k] for k in ("equal_nan", "sorted") if k in a}
    res = np.unique(bottom(x), return_index=True, return_inverse=True, return_counts=True, axis=axis, **opts)
    idx = res[1]
    if isinstance(x, Tracer) and np.any(res[3] > 1):
        xs = np.ravel(x) if axis is None else np.moveaxis(x, axis, 0)
        # (the values that repeat, and the elements that are their occurrences)
        vals = _refusing_gather(xs, idx, res[3] > 1, (res[3] > 1)[np.ravel(res[2])])
        vals = vals if axis is None else np.moveaxis(vals, 0, axis)
    else:
        vals = np.take(np.ravel(x), idx) if axis is None else np.take(x, idx, axis=axis)
    from .reductions import numpy_zero_signs

    # (which of -0.0 and 0.0 NumPy's unique keeps: a stable sort with return_index=, else another)
    vals = numpy_zero_signs(vals, lambda: res[0] if a.get("return_index") else np.unique(bottom(x), axis=axis, **opts))
    extra = [r for r, k in zip(res[1:], ("return_index", "return_inverse", "return_counts")) if a.get(k)]
    return (vals, *extra) if extra else vals


def _unique_named(fn, flags):
    """np.unique_values/_counts/_inverse/_all: np.unique(x, equal_nan=False,
    sorted=False) with some outputs, as a named tuple (values alone for unique_values)."""
    def handler(args, kwargs):
        x = _arr(args[0] if args else kwargs["x"])
        res = _np_unique((x,), dict(flags, equal_nan=False, sorted=False))
        ref = fn(bottom(x))  # NumPy may order the values as it likes: follow it or refuse
        if not np.array_equal(bottom(res[0] if flags else res), ref[0] if flags else ref, equal_nan=True):
            raise NoRuleError(f"np.{fn.__name__} of a traced array: NumPy ordered the values differently "
                              "from np.unique; use np.unique(x, return_index=True, ...) instead.")
        return type(ref)(*res) if flags else res

    return handler


FUNCTIONS[np.unique] = _np_unique
for _f, _flags in ((np.unique_values, {}), (np.unique_counts, {"return_counts": True}),
                   (np.unique_inverse, {"return_inverse": True}),
                   (np.unique_all, {"return_index": True, "return_inverse": True, "return_counts": True})):
    FUNCTIONS[_f] = _unique_named(_f, _flags)


# -- set operations: the values are gathers of the inputs -----------------------------
# Positions are decided on plain values with NumPy's own algorithms (unique, a stable
# sort); the derivative of each value flows to the element it was gathered from.


def _flat(x):
    return np.ravel(_arr(x))


def _unique_positions(b, assume_unique):
    return np.arange(b.size) if assume_unique else np.unique(b, return_index=True)[1]


def _counts_in(b, vals):
    """How many times each of ``vals`` occurs in the plain array ``b`` (NaN as NaN)."""
    u, cnt = np.unique(b, return_counts=True)
    if u.size == 0 or np.size(vals) == 0:
        return np.zeros(np.shape(vals), int)
    i = np.minimum(np.searchsorted(u, vals), u.size - 1)
    return np.where((u[i] == vals) | (np.isnan(u[i]) & np.isnan(vals)), cnt[i], 0)


def _distinct_gather(c, pos, tied_out):
    """``c[pos]``: the chosen occurrences of distinct values; where ``tied_out`` (a mask over
    ``pos``) marks a value that repeats within its own input, its derivative is refused where one
    reaches it, as np.unique's (perturbing one of its occurrences leaves the others, so no one
    occurrence's derivative is the value's)."""
    if not isinstance(c, Tracer) or not np.any(tied_out):
        return c[pos]
    cb = bottom(c)
    return _refusing_gather(c, pos, tied_out, np.isin(cb, cb[pos][tied_out]))


def _refusing_gather(c, pos, tied_out, tied_elements):
    """``c[pos]`` (along axis 0) by unique_tied_p: the derivative refused where it reaches the
    values ``tied_out`` marks, or (forward) the elements ``tied_elements`` marks."""
    from .reductions import _Bits

    return bind(unique_tied_p, (c, pos), {"tied": _Bits((tied_out, tied_elements))})


def _np_setdiff1d(args, kwargs):
    a = _reduce_args(args, kwargs, ("ar1", "ar2", "assume_unique"))
    x = _flat(a["ar1"])
    xb, yb = bottom(x), np.asarray(bottom(_arr(a["ar2"])))
    assume_unique = a.get("assume_unique", False)
    pos = _unique_positions(xb, assume_unique)
    pos = pos[np.isin(xb[pos], yb, assume_unique=True, invert=True)]
    return _distinct_gather(x, pos, np.zeros(pos.size, bool) if assume_unique else _counts_in(xb, xb[pos]) > 1)


def _np_union1d(args, kwargs):
    # a value in both arrays is a tie, where the union's size changes: as JAX's union1d
    # (a unique of the concatenation), its first occurrence, in ar1, gets the derivative
    # (the convention of the set operations); a value repeated within one array has none
    a = _reduce_args(args, kwargs, ("ar1", "ar2"))
    x1, x2 = _flat(a["ar1"]), _flat(a["ar2"])
    c = np.concatenate((x1, x2))
    cb, b1, b2 = bottom(c), bottom(x1), bottom(x2)
    from .reductions import numpy_zero_signs

    pos = np.unique(cb, return_index=True)[1]
    c1, c2 = _counts_in(b1, cb[pos]), _counts_in(b2, cb[pos])
    return numpy_zero_signs(_distinct_gather(c, pos, (c1 > 1) | ((c1 == 0) & (c2 > 1))), lambda: np.unique(cb))


def _np_intersect1d(args, kwargs):
    """Every value of the intersection is a tie of an element of ar1 with one of
    ar2, and it exists only while they are equal: the derivative along that
    (moving both alike) is well defined, a split between the two is not. We
    follow NumPy's computation and JAX's intersect1d (the first of each equal
    pair in a stable sort of ar1 then ar2): the value, and its derivative, are
    ar1's element (refused for a value repeated within ar1: moving one of its
    occurrences leaves the other in the intersection)."""
    a = _reduce_args(args, kwargs, ("ar1", "ar2", "assume_unique", "return_indices"))
    assume_unique, return_indices = a.get("assume_unique", False), a.get("return_indices", False)
    x1, x2 = _flat(a["ar1"]), _flat(a["ar2"])
    b1, b2 = bottom(x1), bottom(x2)
    p1, p2 = _unique_positions(b1, assume_unique), _unique_positions(b2, assume_unique)
    aux = np.concatenate((b1[p1], b2[p2]))
    order = np.argsort(aux, kind="stable")
    s = aux[order]
    src = order[:-1][s[1:] == s[:-1]]
    pos = np.concatenate((p1, b1.size + p2))[src]
    tied = np.zeros(pos.size, bool) if assume_unique else np.concatenate(
        (_counts_in(b1, b1[pos[pos < b1.size]]) > 1, np.zeros(int(np.sum(pos >= b1.size)), bool)))
    res = _distinct_gather(np.concatenate((x1, x2)), pos, tied)
    if not return_indices:
        return res
    _, i1, i2 = np.intersect1d(b1, b2, assume_unique=assume_unique, return_indices=True)
    return res, i1, i2


def _np_setxor1d(args, kwargs):
    a = _reduce_args(args, kwargs, ("ar1", "ar2", "assume_unique"))
    assume_unique = a.get("assume_unique", False)
    x1, x2 = _flat(a["ar1"]), _flat(a["ar2"])
    b1, b2 = bottom(x1), bottom(x2)
    p1, p2 = _unique_positions(b1, assume_unique), _unique_positions(b2, assume_unique)
    c = np.concatenate((x1, x2))
    aux = np.concatenate((b1[p1], b2[p2]))
    if aux.size == 0:
        return c[np.concatenate((p1, b1.size + p2))]
    order = np.argsort(aux, kind="stable")
    s = aux[order]
    flag = np.concatenate(([True], s[1:] != s[:-1], [True]))
    pos = np.concatenate((p1, b1.size + p2))[order[flag[1:] & flag[:-1]]]  # the values present in one array
    tied = np.zeros(pos.size, bool)
    if not assume_unique:
        first = pos < b1.size
        tied[first] = _counts_in(b1, b1[pos[first]]) > 1
        tied[~first] = _counts_in(b2, b2[pos[~first] - b1.size]) > 1
    return _distinct_gather(c, pos, tied)


FUNCTIONS.update({np.setdiff1d: _np_setdiff1d, np.union1d: _np_union1d, np.intersect1d: _np_intersect1d,
                  np.setxor1d: _np_setxor1d})


# -- saving to files: the values go out, nowhere else ------------------------------------


def _saves_values(fn):
    """``np.save`` & co. given traced values: the values are written to a file (their derivative
    goes nowhere, as a print's), the values a plain call would write. An in-memory file
    (``io.BytesIO``) is there to be read back, as ``pickle.dumps`` and ``x.tobytes()`` are: values
    carrying a derivative raise there (np.load would give them back as constants)."""
    from ..core import plain_operands

    def save(args, kwargs):
        target = args[0] if args else kwargs.get("file", kwargs.get("fname"))
        if _in_memory(target):
            _refuse_derivatives_in_memory(fn, list(args[1:]) + list(kwargs.values()))
        return fn(*plain_operands(list(args)), **plain_operands(dict(kwargs)))

    return save


def _in_memory(target) -> bool:
    """A file object with no file descriptor (io.BytesIO, io.StringIO, a custom writer), or one
    on a file that has no name (tempfile.TemporaryFile, os.memfd_create: unlinked, readable back
    only through the handle)."""
    import os
    import stat

    if target is None or isinstance(target, (str, bytes, os.PathLike)):
        return False
    import tempfile

    if isinstance(target, tempfile.SpooledTemporaryFile):  # (its fileno() would move it to disk)
        return not getattr(target, "_rolled", False)
    try:
        st = os.fstat(target.fileno())
    except Exception:  # noqa: BLE001  (io.UnsupportedOperation, AttributeError, a writer's own error)
        return True
    return st.st_nlink == 0 and stat.S_ISREG(st.st_mode)


def _refuse_derivatives_in_memory(fn, values):
    from ..core import Tracer
    from ..errors import TracerEscapeError, escape_error
    from ..pytree import tree_flatten

    if any(isinstance(v, Tracer) and not v._plain_constant() for v in tree_flatten(values)[0]):
        raise escape_error(
            f"{'x.tofile' if fn is np.ndarray.tofile else 'np.' + fn.__name__} of a traced value into an "
            "in-memory or unnamed file (a temporary file, BytesIO: reading it back gives plain values)",
            TracerEscapeError, " Keep the array itself rather than a copy of its bytes (a dict or a list holds "
            "traced arrays). Saving to a file on disk (a path) writes the values, as print shows them.",
            specific=True)


for _fn in (np.save, np.savez, np.savez_compressed, np.savetxt):
    FUNCTIONS[_fn] = _saves_values(_fn)
