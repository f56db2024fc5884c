"""Reading by index: ``x.flat``, np.take, np.take_along_axis, np.where, np.sort,
np.sort_complex, np.partition.

Plain ``x[idx]`` is handled by the levels themselves (a view for basic
indices, a gather that scatters straight into the source's adjoint for the
others). Everything here is expressed through it.
"""
from __future__ import annotations

import numpy as np
from numpy.lib.array_utils import normalize_axis_index

from ..core import (TIED_PICKS, note_tied_pick, write_in_order, write_out, plain_operands, FUNCTIONS,
                   UFUNC_HANDLERS, Tracer, bind, bottom, get_primitive, strong_operand,
                   write, index_array, index_positions, numpy_layout, refuse_python_complex, _reread_scalar,
                   _carries_derivative, carries_any_derivative)
from ..errors import kink_warning
from ..tangents import NoTangent, ZeroTangent, is_zero, unbroadcast

ZERO = ZeroTangent()


def _shape(x):
    """``np.shape(x)``, read from the attribute where there is one (np.shape of a traced
    array goes through NumPy's dispatch: a sixth of an element loop's time through x.flat)."""
    s = getattr(x, "shape", None)
    return np.shape(x) if s is None else s


def _element(x, idx):
    """The index (a tuple of Python ints) of the element ``x.flat[idx]`` names for one
    integer ``idx``; None for any other index."""
    if type(idx) is not int and not isinstance(idx, np.integer):
        return None
    shape = _shape(x)
    n = 1
    for d in shape:
        n *= d
    i = _flat_int(idx, n)
    out = []
    for d in reversed(shape):
        i, r = divmod(i, d)
        out.append(r)
    return tuple(reversed(out))


def _flat_int(idx, n):
    """The flat position one integer ``idx`` names among ``n`` (negative ones from the end)."""
    i = int(idx)
    if not -n <= i < n:
        raise IndexError(f"index {i} is out of bounds for size {n}")
    return i % n


def flat_positions(x, idx):
    """The flat (C-order) positions that ``x.flat[idx]`` names, as an int array."""
    n = int(np.prod(_shape(x), dtype=np.int64))
    if isinstance(idx, (int, np.integer)):
        return np.asarray(_flat_int(idx, n))
    if idx is Ellipsis:
        return np.arange(n)
    if isinstance(idx, tuple):
        if len(idx) != 1:
            raise IndexError("x.flat takes a single index")
        idx = idx[0]
    if isinstance(idx, list):
        idx = index_array(idx)
    if isinstance(idx, slice):
        return np.arange(*idx.indices(n))
    return index_positions((n,), idx)


def _unravel(x, pos):
    shape = _shape(x)
    if len(shape) == 0:
        return ()
    return tuple(np.unravel_index(pos, shape))


def cycle_to(values, count):
    """``values`` repeated (flat, cyclically) to ``count`` elements, as NumPy's
    put/place/flat assignment do with a short value array."""
    vsize = int(np.size(values))
    if vsize == count or count == 0:
        return np.reshape(values, (count,)) if vsize == count else values
    if vsize == 1:
        return np.reshape(values, ())
    if vsize == 0:
        raise ValueError("cannot assign an empty array to a non-empty selection")
    return np.reshape(values, (-1,))[np.arange(count) % vsize]


def _empty(value) -> bool:
    """Whether ``value`` is an empty list, tuple or array (its length, not np.size: a list may hold traced values)."""
    if type(value) is list or type(value) is tuple:
        return len(value) == 0
    return isinstance(value, (np.ndarray, Tracer)) and np.size(bottom(value)) == 0


class FlatIter:
    """``x.flat`` of a traced array: reads and writes by flat position."""

    __slots__ = ("_x",)

    def __init__(self, x):
        self._x = x

    def __getitem__(self, idx):
        if TIED_PICKS:
            note_tied_pick(idx)  # (x.flat[np.argmax(x)]: the regress98 tester)
        e = _element(self._x, idx)  # (one element: an element loop's read, by the basic index)
        if e is not None:
            return self._x[e]
        pos = flat_positions(self._x, idx)
        return self._x[_unravel(self._x, pos)]

    def __setitem__(self, idx, value):
        if type(value) is float or (isinstance(value, Tracer) and value._scalar):
            e = _element(self._x, idx)  # (one element and one value: an element loop's write)
            if e is not None:
                write(self._x, e, value)
                return
        if _empty(value) and not isinstance(idx[0] if type(idx) is tuple and len(idx) == 1 else idx,
                                             (int, np.integer)):
            return  # (an empty value: NumPy writes nothing, whatever the positions, out of range ones too)
        try:
            pos = flat_positions(self._x, idx)
        except IndexError:
            i = np.asarray(idx) if isinstance(idx, (list, np.ndarray)) else None
            if i is not None and i.dtype.kind in "iu":
                self.assign_before_bad_index(i.ravel(), value)
            raise
        self.assign(pos, value)

    def assign_before_bad_index(self, flat, value):
        """NumPy's flat assignment and np.put through integer indices ``flat`` write, in
        order, the elements before the first index out of range, then raise: write those,
        and return that index (None if every index is in range)."""
        n = int(np.size(self._x))
        bad = (flat < -n) | (flat >= n)
        if not bad.any():
            return None
        k = int(np.argmax(bad))
        if k:
            if isinstance(value, (list, tuple)):
                from ..numpy import array as marray

                value = marray(value)
            v = cycle_to(value, int(flat.size))
            self.assign(flat[:k] % n, v[:k] if np.ndim(v) else v, sequential=False)
        return int(flat[k])

    def assign(self, pos, value, sequential=True):
        """``x.flat[pos] = value``. NumPy's flat assignment goes element by
        element, so a value that overlaps ``x`` sees the elements already
        written (``sequential``), unless NumPy converted it to x's dtype first (a
        copy); np.put and np.putmask copy the values first."""
        x = self._x
        count = int(np.size(pos))
        refuse_python_complex(x, value)
        if isinstance(value, (list, tuple)):
            from ..numpy import array as marray

            value = marray(value)
        if np.ndim(pos) == 0:
            if sequential is True and (isinstance(value, (list, tuple)) or np.ndim(value)):
                raise ValueError("Error setting single item of array.")  # (NumPy 2: one element, not an array)
            v = value if np.size(value) == 1 else np.reshape(value, (-1,))[0]
            write(x, _unravel(x, pos), np.reshape(v, ()) if np.ndim(v) else v)
            return
        pos = pos.ravel()
        if not pos.size:  # (no position: NumPy writes nothing, whatever the value's size)
            return
        if np.ndim(x) == 0:  # every position is the one element: the last value written stays
            write(x, (), np.reshape(cycle_to(value, count), (-1,))[-1])
            return
        vb = bottom(value)
        if sequential and isinstance(vb, np.ndarray) and vb.dtype == bottom(x).dtype and (
                np.may_share_memory(vb, bottom(x)) and (np.size(vb) > 1 or _reread_scalar(x, value, raw=False))):
            write_in_order(x, pos, value)
            return
        write(x, _unravel(x, pos), cycle_to(value, count))

    def __iter__(self):
        for i in range(int(np.size(self._x))):
            yield self[i]

    def __len__(self):
        return int(np.size(self._x))

    @property
    def base(self):
        return self._x

    def copy(self):
        return np.ravel(self._x).copy()

    def __array__(self, *a, **k):
        return self._x.__array__()


# -- np.take / take_along_axis -------------------------------------------------


def _wrap_indices(indices, n, mode):
    ind = np.asarray(bottom(indices))
    if mode == "wrap":
        return ind % n
    if mode == "clip":
        return np.clip(ind, 0, n - 1)
    return ind


def _np_take(args, kwargs):
    a = dict(zip(("a", "indices", "axis", "out", "mode"), args))
    a.update(kwargs)
    if TIED_PICKS:
        note_tied_pick(a.get("indices"))
    x, ind, axis = a["a"], a["indices"], a.get("axis")
    mode = a.get("mode", "raise")
    if axis is None:
        x = np.ravel(x)
        axis = 0
    axis = axis % np.ndim(x)
    ind = _wrap_indices(ind, np.shape(x)[axis], mode)
    res = x[(slice(None),) * axis + (ind,)]
    if a.get("out") is None:
        return res
    return write_out(res, a["out"], lambda ob: np.take(plain_operands(a["a"]), plain_operands(a["indices"]),
                                                       a.get("axis"), out=ob, mode=mode))


def _along_axis_index(arr, indices, axis):
    shape = np.shape(arr)
    ind = np.asarray(bottom(indices))
    if axis is None:
        return (ind,), True
    axis = axis % len(shape)
    idx = []
    for k in range(len(shape)):
        if k == axis:
            idx.append(ind)
        else:
            sh = [1] * len(shape)
            sh[k] = shape[k]
            idx.append(np.arange(shape[k]).reshape(sh))
    return tuple(idx), False


def _np_take_along_axis(args, kwargs):
    a = dict(zip(("arr", "indices", "axis"), args))
    a.update(kwargs)
    if TIED_PICKS:
        note_tied_pick(a.get("indices"))
    arr = a["arr"]
    idx, flat = _along_axis_index(arr, a["indices"], a.get("axis", -1))
    if flat:
        return np.ravel(arr)[idx]
    return arr[idx]


FUNCTIONS[np.take] = _np_take
FUNCTIONS[np.take_along_axis] = _np_take_along_axis


# -- np.where (selection) ----------------------------------------------------


def _select_impl(cond, x, y):
    return np.where(cond, x, y)


select_p = get_primitive(_select_impl, "np.where")
select_p.weak_args = True  # (np.where(c, s, x32) is float32 for a Python float s)
select_p.pointwise = True


def _select_rrule(cond, x, y):
    out = _select_impl(cond, x, y)
    c = np.asarray(bottom(cond), dtype=bool)
    sx, sy = np.shape(x), np.shape(y)

    def pullback(g):
        from ..tangents import Thunk

        return (
            NoTangent(),
            Thunk(lambda: unbroadcast(np.where(c, g, 0), sx)),
            Thunk(lambda: unbroadcast(np.where(c, 0, g), sy)),
        )

    pullback.where_cond = c  # (which branch each element took: the kink watches ask, elementwise._abs_source)
    return out, pullback


def _select_frule(primals, tangents):
    cond, x, y = primals
    _, tx, ty = tangents
    out = _select_impl(cond, x, y)
    c = np.asarray(bottom(cond), dtype=bool)
    if is_zero(tx) and is_zero(ty):
        return out, ZERO
    return out, np.where(c, 0 if is_zero(tx) else tx, 0 if is_zero(ty) else ty)


select_p.rrule, select_p.frule = _select_rrule, _select_frule


def _np_where(args, kwargs):
    if len(args) == 1 and not kwargs:
        return np.nonzero(bottom(args[0]))
    cond, x, y = args
    return bind(select_p, (np.asarray(bottom(cond), dtype=bool), x, y))


FUNCTIONS[np.where] = _np_where


# -- sorting -----------------------------------------------------------------
#
# Ties: a sorted value that several elements equal has the derivative of their mean (each tied element
# gets an even share), as np.max, np.maximum and np.clip split a tie evenly, not the element a stable
# sort puts there. Conventions that agree at a tie compose: the winsorized mean np.clip(a, lo, hi) with
# lo, hi = np.percentile(a, [5, 95]) at a tied 95th percentile got 0.5 and 2.5 for the tied pair, outside
# its one-sided slopes 1 and 2 (both 1.5 now, their central difference), and np.max(a) - np.sort(a)[-1],
# identically 0, got +-0.5 at a tied maximum (the sortstats tester).


def tie_average(y, labels):
    """Traced ``y`` with the derivatives of the elements that share a label (plain ints of y's shape)
    averaged: the value is ``y``'s, bit for bit."""
    from .reductions import _with_value

    lab = np.ravel(labels)
    counts = np.maximum(np.bincount(lab), 1)
    if isinstance(y, Tracer) and isinstance(y._value, Tracer):
        _watch_second_order_tie(y, lab, counts)
    flat = np.reshape(y, -1)
    dt = np.result_type(bottom(y))
    if dt.kind == "c":  # (np.bincount takes real weights: by parts)
        means = np.bincount(lab, weights=np.real(flat)) / counts + 1j * (np.bincount(lab, weights=np.imag(flat)) / counts)
    else:
        means = np.bincount(lab, weights=flat) / counts
    avg = np.reshape(means[lab], np.shape(y))
    if np.result_type(bottom(avg)) != dt:
        avg = avg.astype(dt)
    return _with_value(avg, lambda: bottom(y))


def _watch_second_order_tie(y, lab, counts):
    """Warn where a higher derivative goes through a tie that :func:`tie_average` shares: the even share is the
    first derivative's convention, and its own derivative is the mean's, so a function that is smooth through
    the tie gets a wrong second derivative (np.sum(np.sort(x) ** 2) at tied x: every entry 2/3 for 2 I, the
    regress125 tester), and one with a kink there has none. Not where the tied values move alike along a forward
    level's direction (copies of one value, a ReLU's zeros: their tangents agree), which keeps the tie."""
    if not _carries_derivative(y) or not carries_any_derivative(y._value) or not (counts > 1).any():
        return
    t = y
    while isinstance(t, Tracer):  # (the levels that trace y: a forward one tells whether the tie moves apart)
        lv = t._level
        if lv.mode == "fwd" and hasattr(lv, "tangent_of"):
            d = lv.tangent_of(t)
            if is_zero(d):
                return
            tb = np.ravel(np.asarray(bottom(d)))
            if tb.size == lab.size and _constant_on_groups(tb, lab, counts.size):
                return
        t = t._value
    kink_warning("a tie among sorted values (np.sort, np.partition, np.median, a percentile or quantile), whose "
                 "derivative is shared evenly among the tied elements (np.sum(np.sort(x) ** 2) at tied x gets 2/3 "
                 "everywhere for 2 I; move off the tie by a tiny distinct offset, or write a symmetric function "
                 "of the values without the sort: np.sum(x ** 2))")


def _constant_on_groups(t, lab, n):
    for part in ((t.real, t.imag) if np.iscomplexobj(t) else (t,)):
        hi = np.full(n, -np.inf)
        lo = np.full(n, np.inf)
        np.maximum.at(hi, lab, part)
        np.minimum.at(lo, lab, part)
        if not np.all((hi == lo) | np.isnan(hi)):
            return False
    return True


def runs_averaged(ys, axis):
    """Sorted traced ``ys`` (along ``axis``) with each run of equal values given their mean's derivative
    (:func:`tie_average`); ``ys`` itself where no two neighbours are equal."""
    if not isinstance(ys, Tracer):
        return ys
    sb = np.moveaxis(bottom(ys), axis, -1)
    if sb.dtype.kind not in "fc" or sb.shape[-1] < 2:
        return ys
    new = sb[..., 1:] != sb[..., :-1]  # (NaN != NaN: each NaN its own run)
    if new.all():
        return ys
    flags = np.ones(sb.shape, dtype=bool)
    flags[..., 1:] = new
    labels = np.moveaxis((np.cumsum(flags, axis=None) - 1).reshape(sb.shape), -1, axis)
    return tie_average(ys, labels)


def _np_sort(args, kwargs):
    a = dict(zip(("a", "axis", "kind", "order"), args))
    a.update(kwargs)
    x = a["a"]
    axis = a.get("axis", -1)
    if axis is None:
        x = np.ravel(x)
        axis = -1
    axis = normalize_axis_index(axis, np.ndim(x))  # (NumPy's AxisError for a 0-d array)
    xb = bottom(x)
    perm = np.argsort(xb, axis=axis, kind="stable")
    # (NumPy sorts a copy of x in order 'K': its layout)
    res = numpy_layout(runs_averaged(np.take_along_axis(x, perm, axis), axis), np.empty_like(xb, order="K").strides)
    from .reductions import numpy_zero_signs

    kinds = {k: a[k] for k in ("kind", "stable") if a.get(k) is not None}  # (a stable sort orders tied zeros
    return numpy_zero_signs(res, lambda: np.sort(xb, axis=axis, **kinds))  # its own way)


FUNCTIONS[np.sort] = _np_sort


def _np_sort_complex(args, kwargs):
    from .shape import astype

    x = args[0] if args else kwargs["a"]
    res = _np_sort((x,), {})  # complex values sort by real part, then imaginary part
    dt = np.result_type(bottom(res))
    if dt.kind == "c":
        return res
    return astype(res, "F" if dt.char in "bhBH" else ("G" if dt.char == "g" else "D"))


FUNCTIONS[np.sort_complex] = _np_sort_complex


def _np_partition(args, kwargs):
    a = dict(zip(("a", "kth", "axis", "kind", "order"), args))
    a.update(kwargs)
    if a.get("order") is not None:
        raise TypeError("np.partition: order= applies to structured arrays, which have no derivative")
    x = a["a"]
    axis = a.get("axis", -1)
    if axis is None:
        x = np.ravel(x)
        axis = -1
    axis = normalize_axis_index(axis, np.ndim(x))
    # argpartition runs the same selection as partition: the same arrangement (ties aside)
    xb = bottom(x)
    perm = np.argpartition(xb, a["kth"], axis=axis, kind=a.get("kind", "introselect"))
    from .reductions import numpy_zero_signs

    res = _kth_ties_averaged(np.take_along_axis(x, perm, axis), a["kth"], axis)
    return numpy_zero_signs(res, lambda: np.partition(
        xb, a["kth"], axis=axis, kind=a.get("kind", "introselect")))  # (the signs of tied zeros)


def _kth_ties_averaged(ps, kth, axis):
    """Partitioned traced ``ps`` with the elements equal to a ``kth`` element given their mean's derivative,
    as np.sort's ties (:func:`tie_average`), wherever the partition put them."""
    if not isinstance(ps, Tracer):
        return ps
    pb = np.moveaxis(bottom(ps), axis, -1)
    if pb.dtype.kind not in "fc" or pb.shape[-1] < 2:
        return ps
    # (a negative kth counts from the end)
    labels = equal_labels(pb, [pb[..., k:k + 1] for k in (np.ravel(kth) % pb.shape[-1]).tolist()])
    return ps if labels is None else tie_average(ps, np.moveaxis(labels, -1, axis))


def equal_labels(lanes, values):
    """Labels (ints of the plain ``lanes``' shape) that put the elements of each lane (last axis) equal to one of
    ``values`` (each of shape lanes.shape[:-1] + (1,)) in one group where more than one is, every other element in
    its own (for :func:`tie_average`); None where no value is tied. A NaN equals nothing: no group."""
    labels = None
    for v in values:
        eq = lanes == v
        many = np.sum(eq, axis=-1, keepdims=True) > 1
        if many.any():
            eq &= many
            if labels is None:
                labels = np.arange(lanes.size).reshape(lanes.shape)
            first = np.argmax(eq, axis=-1)[..., None]  # (a member's label: one group's, whichever value found it)
            labels = np.where(eq, np.take_along_axis(labels, first, -1), labels)
    return labels


FUNCTIONS[np.partition] = _np_partition


# -- ufunc.outer ----------------------------------------------------------------


def _ufunc_outer(ufunc, inputs, kwargs):
    a, b = (strong_operand(v) for v in inputs)  # (ufunc.outer makes arrays of Python numbers)
    nb = np.ndim(b)
    a2 = np.reshape(a, np.shape(a) + (1,) * nb)
    return ufunc(a2, b, **kwargs)


UFUNC_HANDLERS[(None, "outer")] = _ufunc_outer
