"""In-place NumPy functions, each expressed as writes ``dest[idx] = value``.

A write saves only the elements it overwrites (see ``tape.py``), so every
form here costs memory proportional to what it changes:
np.copyto, np.put, np.place, np.putmask, np.fill_diagonal,
np.put_along_axis, ndarray.sort, and ``ufunc.at``.
"""
from __future__ import annotations

import numpy as np
from numpy.lib.array_utils import normalize_axis_index

from ..core import (
    FUNCTIONS,
    REGISTRY,
    UFUNC_HANDLERS,
    ArrayTracer,
    ScalarTracer,
    Tracer,
    _reread_scalar,
    bind,
    bottom,
    copy_in_order,
    copy_order,
    get_primitive,
    has_repeats,
    index_array,
    index_positions,
    plain_operands,
    qualname,
    refuse_python_complex,
    scalar_in_memory_order,
    strong_operand,
    weak,
    where_mask,
    with_replayed_bits,
    write,
)
from ..errors import complex_into_real, warn_complex_cast
from ..tangents import NoTangent, is_zero
from .elementwise import _picks
from .indexing import FlatIter, _along_axis_index, cycle_to, flat_positions


def _np_copyto(args, kwargs):
    a = dict(zip(("dst", "src", "casting", "where"), args))
    a.update(kwargs)
    dst, src = a["dst"], a["src"]
    where = a.get("where", True)
    if _same_memory_layout(dst, src):
        return  # NumPy's redundant copy: nothing to do (not even a read-only dst's error)
    if isinstance(src, (list, tuple)):
        from ..numpy import array as marray

        src = marray(src)
    src = _without_leading_ones(src, getattr(dst, "ndim", 0))
    # NumPy's casting check ("same_kind" by default), on 0-d stand-ins of the same dtypes
    # (a Python number stays one: NumPy treats it as weakly typed)
    probe = (src if type(src) in (int, float, complex, bool) else bottom(src).item() if type(src) is ScalarTracer
             and weak(src) else np.zeros((), np.result_type(bottom(src))))  # (a traced Python number: weak too)
    target = np.empty((), np.result_type(bottom(dst)))
    if not (complex_into_real(target, probe) and np.can_cast(np.result_type(probe), target.dtype,
                                                              a.get("casting", "same_kind"))):
        np.copyto(target, probe, casting=a.get("casting", "same_kind"))  # (a complex cast allowed: the write warns)
    if type(src) is complex or (type(src) is ScalarTracer and np.result_type(bottom(src)).kind == "c"):
        # (NumPy makes an array of a Python complex, a traced one too: cast with its ComplexWarning,
        # not refused as a Python complex written into a real array is)
        src = strong_operand(src)
    if where is True:
        # (src as given: NumPy copies a source that overlaps the destination with opposite strides
        # first, and a broadcast view of it would not show that)
        if np.ndim(src) > len(getattr(dst, "shape", ())) or np.broadcast_shapes(np.shape(src), np.shape(dst)) != (
                np.shape(dst)):
            np.copyto(np.empty(np.shape(dst), bool), np.empty(np.shape(src), bool))  # (NumPy's own error)
        write(dst, Ellipsis, src)
        return
    wb = where_mask(where)
    try:
        m = np.broadcast_to(wb, np.shape(dst))
    except ValueError:  # NumPy's own error, on stand-ins
        np.copyto(np.empty(np.shape(dst), bool), False, where=wb)
        raise
    if np.ndim(src) == 0:
        if isinstance(dst, Tracer) and type(src) is ArrayTracer and np.ndim(dst) and _reread_scalar(dst, src):
            scalar_in_memory_order(dst, src, m)  # (one of dst's dtype is read again at every element)
            return
        # (read once: NumPy reads a 0-d source it casts once, before the copy, and one whose later
        # reads would give the same: a view of what it writes would change)
        write(dst, m, np.copy(src) if isinstance(src, Tracer) else src)
        return
    given = src
    src = np.broadcast_to(src, np.shape(dst))
    if isinstance(dst, Tracer) and isinstance(src, Tracer):
        # (the source as given: NumPy copies one whose strides run opposite to dst's first)
        order = copy_order(bottom(dst), Ellipsis, bottom(given), m)
        if order is not None:  # NumPy's unbuffered copy reads elements it has overwritten
            copy_in_order(dst, given, order)
            return
    write(dst, m, src[m])


def _without_leading_ones(v, ndim):
    """``v`` without the leading dimensions of length 1 beyond ``ndim``, which NumPy's copy
    into an array of ``ndim`` dimensions drops (np.copyto(x, y[None]))."""
    shape = getattr(v, "shape", ())  # (np.shape of a traced array would dispatch)
    extra = len(shape) - ndim
    if extra > 0 and all(n == 1 for n in shape[:extra]):
        return np.reshape(v, shape[extra:])
    return v


def _same_memory_layout(dst, src) -> bool:
    """Whether ``np.copyto(dst, src)`` is a copy of memory onto itself, which NumPy skips
    (``np.copyto(d, d)``: the same data pointer, dtype object, shape and strides)."""
    bd, bs = bottom(dst), bottom(src)
    return (type(bd) is np.ndarray and type(bs) is np.ndarray and bd.dtype is bs.dtype and bd.shape == bs.shape
            and bd.strides == bs.strides and bd.__array_interface__["data"][0] == bs.__array_interface__["data"][0])


def _writable(x, message):
    """NumPy's check, made before it looks at the positions (an empty mask too)."""
    b = bottom(x)
    if isinstance(b, np.ndarray) and not b.flags.writeable:
        raise ValueError(message)


def _np_put(args, kwargs):
    a = dict(zip(("a", "ind", "v", "mode"), args))
    a.update(kwargs)
    x = a["a"]
    if type(x) is ScalarTracer:
        return x.put(bottom(a["ind"]), a["v"], a.get("mode", "raise"))
    n = int(np.size(x))
    ind = np.asarray(bottom(a["ind"]))
    mode = a.get("mode", "raise")
    _writable(x, "put: output array is read-only")
    refuse_python_complex(x, a["v"])
    if mode == "wrap":
        ind = ind % n
    elif mode == "clip":
        ind = np.clip(ind, 0, n - 1)
    if ind.size == 0 or np.size(a["v"]) == 0:  # (no values: NumPy writes nothing, checks no index)
        return None
    flat = np.ravel(ind)
    v = a["v"]
    if flat.size == 1 and (type(v) in (float, int, complex) or isinstance(v, np.generic) or (
            isinstance(v, Tracer) and v._scalar)) and np.ndim(x):
        # one position and one value (an element loop's np.put): the element write itself
        i = int(flat[0])
        if not -n <= i < n:
            raise IndexError(f"index {i} is out of bounds for axis 0 with size {n}")
        write(x, tuple(int(k) for k in np.unravel_index(i % n, np.shape(x))), v)
        return None
    if mode == "raise":
        if bottom(x).flags.c_contiguous:  # (NumPy writes the values before the bad index)
            bad = FlatIter(x).assign_before_bad_index(flat, a["v"])
        else:  # (NumPy writes into a C-ordered copy, which it drops when an index is bad: nothing written)
            out = flat[(flat < -n) | (flat >= n)]
            bad = int(out[0]) if out.size else None
        if bad is not None:
            raise IndexError(f"index {bad} is out of bounds for axis 0 with size {n}")
    pos = flat_positions(x, flat)  # negative indices count from the end
    FlatIter(x).assign(pos, cycle_to(a["v"], int(ind.size)) if np.ndim(ind) else a["v"], sequential=False)
    return None


def _safe_cast_check(fn, arr, vals):
    """NumPy's casting check of np.place/np.putmask (the values cast to the array's
    dtype under the 'safe' rule, a Python number as a weak scalar), made by NumPy
    itself on an empty array, before anything is written."""
    try:
        fn(np.empty(0, np.result_type(bottom(arr))), np.zeros(0, bool), plain_operands(vals))
    except ValueError:  # (an empty array's own complaints: the real call's checks are made later)
        pass


def _np_place(args, kwargs):
    a = dict(zip(("arr", "mask", "vals"), args))
    a.update(kwargs)
    arr = a["arr"]
    _writable(arr, "WRITEBACKIFCOPY base is read-only")
    _safe_cast_check(np.place, arr, a["vals"])
    mask = np.asarray(bottom(a["mask"]), dtype=bool)
    pos = np.flatnonzero(mask)
    if pos.size == 0:
        return None
    if np.size(a["vals"]) == 0:
        raise ValueError("Cannot insert from an empty array!")
    vals = a["vals"]
    # NumPy works on C-contiguous, writable versions of both (copies when they are not),
    # then goes element by element: only then can it read values it has just written
    vb = bottom(vals)
    live = bottom(arr).flags.c_contiguous and isinstance(vb, np.ndarray) and vb.flags.c_contiguous and (
        vb.flags.writeable and vb.dtype == bottom(arr).dtype)
    FlatIter(arr).assign(pos, vals, sequential=live)
    return None


def _np_putmask(args, kwargs):
    a = dict(zip(("a", "mask", "values"), args))
    a.update(kwargs)
    x = a["a"]
    _writable(x, "putmask: output array is read-only")
    _safe_cast_check(np.putmask, x, a["values"])
    mask = np.broadcast_to(np.asarray(bottom(a["mask"]), dtype=bool), np.shape(x))
    pos = np.flatnonzero(mask)
    if pos.size == 0:
        return None
    vals = a["values"]
    vsize = int(np.size(vals))
    if vsize == 1:
        FlatIter(x).assign(pos, np.reshape(vals, ()), sequential=False)
    elif vsize:  # (no values: NumPy writes nothing)
        FlatIter(x).assign(pos, np.reshape(vals, (-1,))[pos % vsize], sequential=False)
    return None


def _np_fill_diagonal(args, kwargs):
    a = dict(zip(("a", "val", "wrap"), args))
    a.update(kwargs)
    x = a["a"]
    shape = np.shape(x)
    if len(shape) < 2:
        raise ValueError("array must be at least 2-d")
    if len(shape) == 2:
        step = shape[1] + 1
        end = None if a.get("wrap", False) else shape[1] * shape[1]
    else:
        if not np.all(np.diff(shape) == 0):
            raise ValueError("All dimensions of input must be of equal length")
        step = 1 + int(np.cumprod(shape[:-1]).sum())
        end = None
    n = int(np.size(x))
    pos = np.arange(0, n if end is None else min(end, n), step)
    FlatIter(x).assign(pos, a["val"])
    return None


def _np_put_along_axis(args, kwargs):
    a = dict(zip(("arr", "indices", "values", "axis"), args))
    a.update(kwargs)
    arr = a["arr"]
    idx, flat = _along_axis_index(arr, a["indices"], a["axis"])
    if flat:
        FlatIter(arr)[idx[0]] = a["values"]
    else:
        write(arr, idx, a["values"])
    return None


FUNCTIONS[np.copyto] = _np_copyto
FUNCTIONS[np.put] = _np_put
FUNCTIONS[np.place] = _np_place
FUNCTIONS[np.putmask] = _np_putmask
FUNCTIONS[np.fill_diagonal] = _np_fill_diagonal
FUNCTIONS[np.put_along_axis] = _np_put_along_axis


def sort_inplace(x, axis=-1, kind=None, stable=None):
    """``x.sort(axis)``: a gather in sorted order written back into ``x``."""
    if axis is None:
        raise TypeError("ndarray.sort: axis=None is not allowed for an in-place sort")
    axis = normalize_axis_index(axis, np.ndim(x))  # (NumPy's AxisError for a 0-d array)
    from .reductions import numpy_zero_signs

    xb = bottom(x)
    perm = np.argsort(xb, axis=axis, kind="stable")
    # (NumPy's bits: the signs of tied zeros)
    from .indexing import runs_averaged

    write(x, Ellipsis, numpy_zero_signs(runs_averaged(np.take_along_axis(x, perm, axis), axis),
                                        lambda: np.sort(xb, axis=axis, kind=kind, stable=stable)))


def _copy_taking(vals, b):
    """A copy of ``vals`` that ``b``'s values may be written into: traced where ``b`` is traced
    and ``vals`` is not (a rule's arguments under nested differentiation: ``vals`` plain at its
    level, ``b`` an outer level's; a zero tangent meeting a traced one)."""
    if isinstance(b, Tracer) and not isinstance(vals, Tracer):
        out = np.zeros_like(b, shape=np.shape(vals), dtype=np.result_type(vals))
        out[...] = vals
        return out
    return np.copy(vals)


def _numpy_at(vals, b, inv, ufunc):
    """``vals`` after ``ufunc.at(vals, inv, b)``: NumPy's own loop, on a copy, so each element
    gets its values in index order, with NumPy's bits."""
    out = _copy_taking(vals, b)
    if np.ndim(b) and np.shape(b) != inv.shape:
        # (NumPy 2.4 reads memory past a value array of fewer dimensions than the index array:
        # values of the index array's shape, as NumPy would broadcast them)
        b = np.broadcast_to(b, inv.shape)
    ufunc.at(out, inv, b)
    return out


def _at_sums_impl(vals, b, inv, ufunc):
    """``ufunc.at`` with repeated positions for np.add or np.subtract (see :func:`_numpy_at`)."""
    return _numpy_at(vals, b, inv, ufunc)


at_sums_p = get_primitive(_at_sums_impl, "np.add.at")
at_sums_p.linear = True  # (its pullback reads the positions only)


def _at_sums_rrule(vals, b, inv, ufunc):
    out = _at_sums_impl(vals, b, inv, ufunc)

    def pullback(g):
        # each value's element: the transpose of the sums (the tape projects it onto b: the
        # broadcast summed away, the real part for a real b, b's precision)
        gb = g[inv]
        return g, -gb if ufunc is np.subtract else gb, NoTangent(), NoTangent()

    return out, pullback


def _at_sums_frule(primals, tangents):
    vals, b, inv, ufunc = primals
    tv, tb = tangents[:2]
    out = _at_sums_impl(vals, b, inv, ufunc)
    if is_zero(tb) or np.result_type(bottom(b)).kind not in "fc":
        return out, tv
    if is_zero(tv):
        tv = np.zeros(np.shape(out), np.result_type(bottom(out)))
    return out, _at_sums_impl(tv, tb, inv, ufunc)  # (linear in both together)


at_sums_p.rrule, at_sums_p.frule = _at_sums_rrule, _at_sums_frule


def _stable_order(keys):
    """``np.argsort(keys, kind="stable")`` of integer ``keys`` (positions, their inverse): where they are
    nonnegative and below 2**32, by NumPy's radix sort of 16-bit keys, one pass or two (the low halves, then
    the high ones), 3-6x faster than its merge sort of 64-bit keys (np.multiply.at of 10**6 values into
    1000 positions spent 60% of its gradient sorting: the scatter tester)."""
    if keys.size < 2:
        return np.arange(keys.size)
    lo, hi = int(keys.min()), int(keys.max())
    if lo < 0 or hi >= 1 << 32:
        return np.argsort(keys, kind="stable")
    if hi < 1 << 16:
        return np.argsort(keys.astype(np.uint16), kind="stable")
    low = np.argsort((keys & 0xFFFF).astype(np.uint16), kind="stable")
    return low[np.argsort((keys[low] >> 16).astype(np.uint16), kind="stable")]


def _unique_inverse(flatpos, size):
    """``np.unique(flatpos, return_inverse=True)`` of positions in an array of ``size`` elements: a mark per
    element where the array is not much larger than the positions (no sort), else one radix sort."""
    n = flatpos.size
    if size <= 4 * n + 64:
        mark = np.zeros(size, np.intp)
        mark[flatpos] = 1
        uniq = np.flatnonzero(mark)
        mark[uniq] = np.arange(uniq.size)
        return uniq, mark[flatpos]
    order = _stable_order(flatpos)
    srt = flatpos[order]
    first = np.empty(n, np.bool_)
    first[:1] = True
    np.not_equal(srt[1:], srt[:-1], out=first[1:])
    inv = np.empty(n, np.intp)
    inv[order] = np.cumsum(first) - 1
    return srt[first], inv


def _rounds(positions):
    """The hits of each round of a ``ufunc.at`` with repeated ``positions`` (the r-th occurrence of every
    position in round r), each in index order: found by one sort (a scan of all hits per round made a
    position hit k times cost k times the hits)."""
    if not positions.size:
        return []
    occ = _occurrences(positions)
    ends = np.cumsum(np.bincount(occ))
    by_round = _stable_order(occ)
    return np.split(by_round, ends[:-1])


def _occurrences(inv):
    """Each element's occurrence number among the equal entries of ``inv``, in order."""
    order = _stable_order(inv)
    sp = inv[order]
    start = np.r_[0, np.flatnonzero(np.diff(sp)) + 1]
    run_id = np.repeat(np.arange(start.size), np.diff(np.r_[start, sp.size]))
    occ = np.empty(inv.size, np.intp)
    occ[order] = np.arange(sp.size) - start[run_id]
    return occ


_PICKS = {np.maximum: _picks(np.maximum), np.minimum: _picks(np.minimum),
          np.fmax: _picks(np.fmax, nan_loses=True), np.fmin: _picks(np.fmin, nan_loses=True)}


def _at_picks_impl(vals, b, inv, ufunc):
    """``ufunc.at`` with repeated positions for a ufunc picking one argument (np.maximum,
    np.minimum, np.fmax, np.fmin; see :func:`_numpy_at`)."""
    return _numpy_at(vals, b, inv, ufunc)


def _at_picks_weights(vals, b, inv, ufunc, out):
    """The derivative of the folds ``c = ufunc(c, b_i)`` (each position's values in index order)
    with respect to the starting values and to each ``b_i``: products of the one-step partials
    ``np.maximum``'s rule gives (the winner 1, ties halved), plain arrays of ``vals`` and
    ``inv``'s shapes in ``out``'s precision (exact: products of halves), piecewise constant (so
    the rule is linear in the tangents it carries)."""
    rdt = np.finfo(np.result_type(bottom(out))).dtype
    wv, wb = _fold_weights(vals, b, inv, ufunc, out)
    return wv.astype(rdt, copy=False), wb.astype(rdt, copy=False)


def _fold_weights(vals, b, inv, ufunc, out):
    invf = inv.reshape(-1)
    vb, bb, ob = bottom(vals), np.asarray(bottom(b)), bottom(out)
    bf = np.reshape(np.broadcast_to(bb, inv.shape), (-1,))
    if bb.dtype == vb.dtype:
        # each fold's result is one of its values, compared without a cast: where exactly one
        # value of a fold equals its result (no tie with it, no NaN), that value has the whole
        # derivative (earlier values lose to it, later ones to the running result)
        wv = (vb == ob).astype(np.float64)
        wb = (bf == ob[invf]).astype(np.float64)
        if np.all(np.bincount(invf, wb, ob.size) + wv == 1.0):
            return wv, wb.reshape(inv.shape)
    first, second = _PICKS[ufunc]
    if bb.dtype != vb.dtype:  # (each step's result stored in a's precision: NumPy's steps, a round at a time)
        return _fold_weights_by_rounds(vb, bf, invf, ufunc, first, second, inv.shape)
    # (ties: each position's values in index order, a group; the fold before each value, the one-step
    # partials, and the products of the later steps' partials, by scans over the groups in log2 of the
    # longest one's steps: the fold is associative, NaNs included, and its values are its operands)
    groups = _groups(invf)
    order, grp, _, _, rank = groups
    x = bf[order]
    incl = _group_scan(x, rank, ufunc, forward=True)  # the fold of the group's values up to each one
    prev = vb.reshape(-1)[grp]
    c = np.where(rank > 0, ufunc(prev, np.roll(incl, 1)), prev)  # (the running value each step meets)
    wv, wb = _chained(groups, np.asarray(first(c, x, None), np.float64), np.asarray(second(c, x, None), np.float64),
                      vb.size, np.float64)
    return wv.reshape(vb.shape), wb.reshape(inv.shape)


def _groups(invf):
    """(order, grp, starts, lengths, rank) of the hits ``invf`` (positions, in index order): the stable sort that
    groups each position's hits, the positions so sorted, where each group starts, its length, and each hit's
    place in its group."""
    order = _stable_order(invf)
    grp = invf[order]
    n = grp.size
    starts = np.r_[0, np.flatnonzero(grp[1:] != grp[:-1]) + 1] if n else np.zeros(0, np.intp)
    lengths = np.diff(np.r_[starts, n])
    return order, grp, starts, lengths, np.arange(n) - np.repeat(starts, lengths)


def _chained(groups, d_cur, d_b, nvals, dtype):
    """(d result / d start, d result / d each value) of folds ``c = f(c, b_i)`` over the hits of
    :func:`_groups`, from the one-step partials in the running value ``d_cur`` and in the value ``d_b`` (both in
    the groups' order): a value's, its partial times the product of the later steps' ``d_cur`` (a scan in log2 of
    the longest group's steps); a start's, the product of all of its group's (1 where no value reaches it)."""
    order, grp, starts, lengths, rank = groups
    n = grp.size
    with np.errstate(all="ignore"):
        later = _group_scan(np.asarray(d_cur, dtype), (lengths - 1)[np.repeat(np.arange(starts.size), lengths)] - rank,
                            np.multiply, forward=False)  # (products of the partials from each step to its group's end)
    last = np.r_[grp[1:] != grp[:-1], True] if n else np.zeros(0, bool)
    wb = np.empty(n, dtype)
    wb[order] = d_b * np.where(last, 1.0, np.roll(later, -1))
    wv = np.ones(nvals, dtype)
    wv[grp[starts]] = later[starts]
    return wv, wb


def _fold_weights_by_rounds(vb, bf, invf, ufunc, first, second, shape):
    cur = np.array(vb, copy=True)
    rounds = _rounds(invf)
    d_cur = np.empty(invf.size)
    d_b = np.empty(invf.size)
    for sel in rounds:  # (within a round each position once: NumPy's one-element steps, vectorized)
        u = invf[sel]
        c, x = cur[u], bf[sel]
        d_cur[sel] = first(c, x, None)
        d_b[sel] = second(c, x, None)
        cur[u] = ufunc(c, x)
    groups = _groups(invf)
    wv, wb = _chained(groups, d_cur[groups[0]], d_b[groups[0]], cur.size, np.float64)
    return wv.reshape(cur.shape), wb.reshape(shape)


def _group_scan(v, rank, op, forward):
    """The inclusive scan of ``op`` over the runs of ``v`` (sorted by group): ``rank`` each element's place
    from its run's start (``forward``) or end; Hillis-Steele, log2 of the longest run's passes."""
    out = np.array(v, dtype=np.result_type(v), copy=True)
    k = 1
    top = int(rank.max(initial=0))
    while k <= top:
        at = np.flatnonzero(rank >= k)
        other = at - k if forward else at + k
        out[at] = op(out[other], out[at]) if forward else op(out[at], out[other])
        k *= 2
    return out


at_picks_p = get_primitive(_at_picks_impl, "np.maximum.at")


def _fold_rules(impl, weights):
    """The reverse and forward rules of a ``ufunc.at`` fold ``impl(vals, b, inv, ufunc)`` whose derivative
    is ``weights(vals, b, inv, ufunc, out)``: (the derivative of each position's result in its starting
    value, in each of its values), plain arrays, so that the rules are linear in what they carry."""
    def rrule(vals, b, inv, ufunc):
        out = impl(vals, b, inv, ufunc)
        wv, wb = weights(vals, b, inv, ufunc, out)

        def pullback(g):
            return g * wv, g[inv] * wb, NoTangent(), NoTangent()  # (the tape projects onto b)

        return out, pullback

    def frule(primals, tangents):
        vals, b, inv, ufunc = primals
        tv, tb = tangents[:2]
        out = impl(vals, b, inv, ufunc)
        wv, wb = weights(vals, b, inv, ufunc, out)
        t = np.zeros(np.shape(out), wv.dtype) if is_zero(tv) else tv * wv
        if not is_zero(tb) and np.result_type(bottom(b)).kind in "fc":
            if np.ndim(tb) and np.shape(tb) != inv.shape:
                tb = np.broadcast_to(tb, inv.shape)
            if isinstance(tb, Tracer) and not isinstance(t, Tracer):  # (t is fresh: a copy only to trace it)
                t = _copy_taking(t, tb)
            np.add.at(t, inv, tb * wb)
        return out, t

    return rrule, frule


at_picks_p.rrule, at_picks_p.frule = _fold_rules(_at_picks_impl, _at_picks_weights)


class _SmoothFold:
    """The ufunc of a smooth ``ufunc.at`` fold and its derivative (see :func:`_smooth_fold_at`)."""

    __slots__ = ("ufunc", "wb", "wv")

    def __init__(self, ufunc, wv, wb):
        self.ufunc, self.wv, self.wb = ufunc, wv, wb


def _at_fold_impl(vals, b, inv, fold):
    """``ufunc.at`` with repeated positions for a smooth binary ufunc (see :func:`_numpy_at`)."""
    return _numpy_at(vals, b, inv, fold.ufunc)


at_fold_p = get_primitive(_at_fold_impl, "np.power.at")
at_fold_p.rrule, at_fold_p.frule = _fold_rules(_at_fold_impl, lambda vals, b, inv, fold, out: (fold.wv, fold.wb))


def _smooth_fold_at(ufunc, a, b, pshape, flatpos, ashape):
    """``ufunc.at`` with repeated positions for a binary ufunc with elementwise partials that neither sums nor
    picks (np.power, np.hypot, np.arctan2, np.fmod...), at first order: NumPy's own loop for the values, and
    the derivative of each position's fold from the one-step partials at the values NumPy's loop passes
    through (found a round at a time on plain arrays) times the products of the later steps', in one rule,
    instead of a traced gather, ufunc and write per round (50-100 us a hit at a position hit often). False
    where a value carries derivatives at two levels (a higher derivative: the partials would have to be
    traced), or where a partial is not finite or not implemented (the rounds then, whose rules handle those)."""
    partials = getattr(REGISTRY.get(ufunc), "elementwise", None)
    if ufunc.nin != 2 or partials is None or any(not callable(d) and type(d) is not int for d in partials[1]):
        return False
    level = None
    for v in (a, b):
        if isinstance(v, Tracer):
            if isinstance(v._value, Tracer) or (level is not None and v._level is not level):
                return False
            level = v._level
    got = _gathered(ufunc, a, b, pshape, flatpos, ashape, exact=False)  # (the rule's own values are NumPy's)
    if got is None:
        return False
    bflat, inv, idx, start, _ = got
    w = _smooth_fold_weights(ufunc, partials[1], np.asarray(bottom(start)), np.asarray(bottom(bflat)), inv)
    if w is None:
        return False
    _write_gathered(a, idx, bind(at_fold_p, (start, bflat, inv, _SmoothFold(ufunc, *w))), None, ashape)
    return True


def _smooth_fold_weights(ufunc, partials, start, values, inv):
    """(d result / d start, d result / d each value) of the folds ``c = ufunc(c, values[i])`` that start at
    ``start`` (each position's values in index order, ``inv`` their positions): the values each step meets,
    a round at a time (every position once per round: NumPy's one-element steps, vectorized), the one-step
    partials at them, chained by :func:`_chained`. None where a partial is not finite (an infinite slope, 0/0: the rounds' rules say what
    it is) or not implemented."""
    from ..registry import _partial
    from ..tangents import NotImplementedTangent

    cur = np.array(start, copy=True)
    met = np.empty(inv.size, cur.dtype)  # (the value each step meets, and its result)
    res = np.empty(inv.size, cur.dtype)
    with np.errstate(all="ignore"):
        for sel in _rounds(inv):
            u = inv[sel]
            met[sel] = cur[u]
            if ufunc is np.power:  # (NumPy's one-element loop is libm's pow, a last bit from the vector loop's)
                ufunc.at(cur, u, values[sel])
            else:
                cur[u] = ufunc(met[sel], values[sel])
            res[sel] = cur[u]
        ds = []
        for d in partials:
            dv = d if type(d) is int else _partial(d, (met, values), res)
            if isinstance(dv, (NotImplementedTangent, Tracer)):
                return None
            dv = np.broadcast_to(np.asarray(dv), inv.shape)
            if dv.dtype.kind not in "fiu" or not np.all(np.isfinite(dv)):
                return None
            ds.append(dv)
    d_cur, d_val = ds
    groups = _groups(inv)
    return _chained(groups, d_cur[groups[0]], d_val[groups[0]], cur.size, cur.dtype)


def _positions_once(flatpos, size):
    """``(unique positions, inverse)`` of ``flatpos`` (positions in an array of ``size``
    elements), or None when each occurs once."""
    uniq, inv = _unique_inverse(flatpos, size)
    return None if uniq.size == flatpos.size else (uniq, inv)


def _shape(v):
    return v.shape if isinstance(v, Tracer) else np.shape(v)  # (np.shape of a traced array dispatches)


def _sums_operand(b):
    """Whether ``ufunc.at``'s values ``b`` may go to ``at_sums_p`` as they are."""
    return isinstance(b, (Tracer, np.ndarray, np.generic, float, int, complex, bool))


def _ufunc_at(ufunc, inputs, kwargs):
    """``ufunc.at(a, indices, b)``: unbuffered, so repeated indices all apply,
    in index order. Applied in rounds; within a round every position is
    distinct, and round r applies each position's r-th occurrence. The
    arithmetic is the same sequence NumPy performs, so values are identical."""
    if kwargs:
        raise TypeError(f"{qualname(ufunc)}.at: unexpected keyword arguments")
    a = inputs[0]
    indices = inputs[1]
    b = inputs[2] if len(inputs) > 2 else None
    if not isinstance(a, Tracer):  # then b is the traced operand
        if isinstance(b, Tracer) and b._plain_constant() and not isinstance(indices, Tracer):
            # (a constant, as a non-differentiated argument: its values, as x[idx] = b writes them; graphs tester)
            return ufunc.at(a, indices, bottom(b))
        import sys

        from ..core import _plain_copy_hint
        from ..errors import (
            WriteToPlainArrayError,
            escape_error,
            plain_call_target,
            user_frame,
        )

        raise escape_error(f"{qualname(ufunc)}.at writing a traced value into a plain NumPy array",
                           WriteToPlainArrayError, _plain_copy_hint(plain_call_target(user_frame(sys._getframe(1)))))
    try:
        return _ufunc_at_into(ufunc, a, indices, b)
    except ValueError as e:
        if not (str(e).endswith("is read-only") and not bottom(a).flags.writeable):
            raise
        from ..errors import MutationError, user_line

        # (not NumPy's read-only ValueError, which a program may catch: a plain call raises none here)
        raise MutationError(
            f"{qualname(ufunc)}.at into a read-only array at {user_line()}: NumPy's ufunc.at writes into "
            "read-only arrays and views anyway (np.broadcast_to, np.diagonal, an argument passed read-only), "
            "mutagrad does not (the write would change memory other arrays show, unrecorded). Write into "
            "the array it views (np.add.at(x, idx, v) for the diagonal's x[np.diag_indices(n)]), or into a "
            "copy.") from None


def _ufunc_at_into(ufunc, a, indices, b):
    if isinstance(indices, list):
        indices = index_array(indices)
    if type(b) is list or type(b) is tuple:
        from ..numpy import _has_tracer
        from ..numpy import array as marray

        if _has_tracer(b):  # (values given as a list of traced scalars, as a write takes them; NumPy
            b = marray(b)  # converts the list to an array: a Python complex there is cast with a warning)
    ashape = a.shape
    pos = index_positions(ashape, indices)
    pshape = pos.shape
    flatpos = pos.ravel()
    bshape = None if b is None else _shape(b)
    if b is not None and bshape != pshape:  # (b broadcasts to the indexed shape, or NumPy's error)
        try:
            fits = np.broadcast_shapes(bshape, pshape) == pshape
        except ValueError:
            fits = False
        if not fits:
            raise ValueError("array is not broadcastable to correct shape")
    if flatpos.size == 0:
        return None
    kind = bottom(a).dtype.kind
    fold = (at_sums_p if ufunc is np.add or ufunc is np.subtract
            else at_picks_p if ufunc in _PICKS and kind == "f" else None)
    if fold is not None and b is not None and kind in "fc" and _sums_operand(b):
        if kind == "f" and np.result_type(bottom(b)).kind == "c" and not np.any(np.isnan(np.imag(bottom(b)))):
            # complex values into a real array: NumPy's ComplexWarning, once, at the user's line (the rule's own
            # calls of ufunc.at warned in mutagrad's code, each), and their real parts, which a sum or a pick
            # of the complex values has for its real part (the loop casts each result to a's dtype)
            warn_complex_cast()
            b = np.real(b)
        once = _positions_once(flatpos, int(np.size(bottom(a))))
        if once is not None:
            # repeated positions: one gather, NumPy's own loop in index order on the gathered
            # values (one rule), one write of the positions touched (b is read before the
            # write, as NumPy reads it)
            uniq, inv = once
            idx = tuple(np.unravel_index(uniq, ashape))
            write(a, idx, bind(fold, (a[idx], b, inv.reshape(pshape), ufunc)))
            return None
        repeats = False
    else:
        repeats = has_repeats(flatpos)
    if repeats and b is not None and kind == "f" and _sums_operand(b) and (
            _ONE_PASS_AT[ufunc](ufunc, a, b, pshape, flatpos, ashape) if ufunc in _ONE_PASS_AT
            else fold is None and _smooth_fold_at(ufunc, a, b, pshape, flatpos, ashape)):
        return
    if not repeats and bottom(a).dtype.kind != "c" and ufunc is not np.power:
        # every position once: the gather, the ufunc and the write (b read before the write, as
        # NumPy reads it; the same one operation per element)
        # (ufunc.at converts b with np.asarray: a Python float is a float64 operand, not a weak one)
        write(a, indices, ufunc(a[indices], strong_operand(b)) if b is not None else ufunc(a[indices]))
        return
    if b is not None:
        bb = np.broadcast_to(b, pshape) if bshape != pshape else b
        bflat = np.copy(np.reshape(bb, (-1,)))  # NumPy reads b before the loop (b may overlap a)
    rounds = _rounds(flatpos)

    def apply_rounds():
        for k, sel in enumerate(rounds):
            idx = tuple(np.unravel_index(flatpos[sel], ashape)) if ashape else ()  # (0-d: its one element)
            cur = a[idx] if ashape else a[...]
            new = ufunc(cur, bflat[sel] if ashape else np.reshape(bflat[sel], ())) if b is not None else ufunc(cur)
            if k and complex_into_real(bottom(a), bottom(new)):  # (NumPy's ComplexWarning once, as for its one call)
                new = np.real(new)
            write(a, idx, new)

    if bottom(a).dtype.kind == "c" or ufunc is np.power:
        # complex products and quotients, and powers (NumPy's vector loop of np.power is not its
        # one-element loop's libm pow: a last bit apart), round differently in NumPy's one-element
        # steps than in a vector loop: the values are NumPy's own (replayed), the derivative the rounds'
        plain_b = () if b is None else (np.reshape(np.asarray(bottom(bflat)), pshape),)
        with_replayed_bits(a, lambda ob: ufunc.at(ob, indices, *plain_b), apply_rounds)
    else:
        apply_rounds()
    return None


def _gathered(ufunc, a, b, pshape, flatpos, ashape, exact=True):
    """(values b flat, each one's position among the positions touched, those positions' index, a's values
    there (traced), NumPy's own result there: its loop in index order on the gathered values, its bits; None
    without ``exact``) for a one-pass ``ufunc.at``; None where b is wider than a (NumPy rounds each wider step
    to a's dtype)."""
    bb = np.broadcast_to(b, pshape) if _shape(b) != pshape else b
    bflat = np.reshape(bb, (-1,)) if np.ndim(bb) else np.broadcast_to(bb, flatpos.shape)
    uniq, inv = _unique_inverse(flatpos, int(np.prod(ashape, dtype=np.int64)))
    idx = tuple(np.unravel_index(uniq, ashape)) if ashape else ()
    start = a[idx] if ashape else np.reshape(a[...], (1,))
    sb, vb = np.asarray(bottom(start)), np.asarray(bottom(bflat))
    if np.result_type(sb, vb) != sb.dtype:
        return None
    if not exact:
        return bflat, inv, idx, start, None
    with np.errstate(all="ignore"):
        bits = sb.copy()
        ufunc.at(bits, inv, vb)
    return bflat, inv, idx, start, bits


def _write_gathered(a, idx, r, exact, ashape):
    """Write the positions' results ``r`` into ``a`` (with ``exact``'s bits, NumPy's own, where given)."""
    if exact is not None:
        from .statistics import _with_bits

        r = _with_bits(r, exact)
    write(a, idx, r) if ashape else write(a, (), np.reshape(r, ()))


def _log_sums_at(ufunc, a, b, pshape, flatpos, ashape):
    """np.logaddexp.at (logaddexp2.at) with repeated positions: each position's log of the sum of its
    exponentials in one pass (shifted by the largest, a constant) instead of one traced round per
    occurrence (a hub's soft minimum over 8000 edges took 700x a plain call), with NumPy's bits; False
    where a value is +inf or NaN or a position's values are all -inf (the rounds then)."""
    got = _gathered(ufunc, a, b, pshape, flatpos, ashape)
    if got is None:
        return False
    bflat, inv, idx, start, exact = got
    sb, vb = bottom(start), bottom(bflat)
    if np.any(np.isnan(sb)) or np.any(np.isnan(vb)) or np.any(sb == np.inf) or np.any(vb == np.inf):
        return False
    m = np.array(sb, copy=True)
    np.maximum.at(m, inv, vb)
    if not np.all(np.isfinite(m)):
        return False
    exp, log = (np.exp, np.log) if ufunc is np.logaddexp else (np.exp2, np.log2)
    total = exp(start - m)
    np.add.at(total, inv, exp(bflat - m[inv]))
    _write_gathered(a, idx, m + log(total), exact, ashape)
    return True


def _products_at(ufunc, a, b, pshape, flatpos, ashape):
    """np.multiply.at (np.divide.at) with repeated positions: each position's value times (divided by) the
    product of its values, the product by np.multiply.reduceat over the values sorted by position (its
    rule: zeros included), with NumPy's bits, instead of one traced round per occurrence (1000x a plain
    call at a hub); False where a value is not finite, or a divisor 0 (the rounds then)."""
    got = _gathered(ufunc, a, b, pshape, flatpos, ashape)
    if got is None:
        return False
    bflat, inv, idx, start, exact = got
    dt = np.result_type(bottom(start))
    if not (np.all(np.isfinite(bottom(start))) and np.all(np.isfinite(bottom(bflat)))) or (
            ufunc is np.divide and not np.all(bottom(bflat))):
        return False
    order = _stable_order(inv)
    starts = np.r_[0, np.flatnonzero(np.diff(inv[order])) + 1]
    values = bflat[order].astype(dt)  # (in a's dtype, as NumPy computes each step: an int64 product wraps)
    vb = np.asarray(bottom(values))
    with np.errstate(all="ignore"):
        prods = np.multiply.reduceat(vb, starts)
    zeros = np.add.reduceat((vb == 0).astype(np.intp), starts) > 0  # (a product that is 0 by a factor of 0)
    if not np.all(np.isfinite(prods)) or np.any((np.abs(prods) < np.finfo(dt).tiny) & ~zeros):
        return False  # (the values' product alone over- or underflows where NumPy's order need not: the rounds)
    prod = np.multiply.reduceat(values, starts)
    _write_gathered(a, idx, start / prod if ufunc is np.divide else start * prod, exact, ashape)
    return True


_ONE_PASS_AT = {np.logaddexp: _log_sums_at, np.logaddexp2: _log_sums_at, np.multiply: _products_at,
                np.divide: _products_at}


UFUNC_HANDLERS[(None, "at")] = _ufunc_at
