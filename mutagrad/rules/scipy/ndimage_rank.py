"""scipy.ndimage's rank filters, differentiated: ``minimum_filter1d``, ``maximum_filter1d``,
``minimum_filter``, ``maximum_filter``, ``rank_filter``, ``median_filter``, ``percentile_filter``,
``grey_erosion`` and ``grey_dilation`` (flat ``size=``/``footprint=``, and a non-flat ``structure=``).

Each output element is one element of its window: the input extended as the mode extends it
('reflect' and 'grid-mirror' are np.pad's 'symmetric', 'mirror' its 'reflect', 'nearest' its 'edge',
'wrap' and 'grid-wrap' its 'wrap', 'constant' and 'grid-constant' pad with cval), read at the
footprint's offsets, plus (grey_dilation) or minus (grey_erosion) the structure's value at that offset:

    y[i] = v[i, j*],   v[i, j] = E(x, cval)[i + p_j - lo] ± s[p_j],   j* the offset of the rank-r value

So the function is a selection, linear in (x, cval, structure) wherever no two values of a window
tie at the selected one. Its value is SciPy's own call (its bits); mutagrad finds the selection on
the plain values (the window's values in double precision, as SciPy compares them; rank r by
np.partition, a chunk of the output at a time, so the windows are never all in memory at once)
and writes the result as a gather of the traced input (np.concatenate with cval when the
selection reads it, np.take of the structure), which every order of differentiation goes through.
At a tie the derivative is the mean of the tied elements' (each tied element of the window gets
an even share, a repeated element one share per copy), as np.max, np.min, np.sort and np.median
split a tie: the selection is then an np.bincount of the shares.

Before it differentiates, mutagrad checks that SciPy's value is the rank-r value of each window as
described (its own selection's, cast to the output's dtype). Where it is not, the call raises
``UnsupportedInputError``: SciPy's 1-D rank filter (a rank other than the minimum and the maximum, the
fast path for a 1-D input) extends a line whose window reaches a whole axis or more beyond it
differently, and returns reinterpreted memory for an output dtype other than the input's; its
N-dimensional filters read outside the array for reflections 4 times the axis or more. An input
holding NaN is refused (SciPy's comparisons skip a NaN in an order of its own: its result is not a
function of the window's values), and so is a ``structure=`` with an input other than float64 (SciPy
adds it in a precision that depends on the element: rounded to a float32 input's dtype at the
elements, not at cval, which it casts; a flat footprint of any real dtype is differentiated).

One of SciPy's behaviours is followed as it is: the 1-D fast path ranks the whole box of
``footprint.size`` samples, ignoring the footprint's False entries (with the rank of the footprint's
True count): rank_filter(x, 1, footprint=[1, 0, 1, 1]) of a 1-D x is the second smallest of 4 samples.
The selection is that box's, so the derivative is that of SciPy's value.
"""
from __future__ import annotations

import operator
from collections.abc import Iterable

import numpy as np

from ...core import Tracer, bottom
from .ndimage import _into, _nd, _output, _source, _support, _traced
from .sparse import _dense

# the functions written here (docs/coverage.md's rows)
COMPOSITES = tuple(f"scipy.ndimage.{name}" for name in (
    "grey_dilation", "grey_erosion", "maximum_filter", "maximum_filter1d", "median_filter", "minimum_filter",
    "minimum_filter1d", "percentile_filter", "rank_filter"))

_CHUNK = 1 << 20  # (window values held at once by the selection: 8 MB of doubles)


def _plain(v):
    return np.asarray(bottom(v)) if isinstance(v, Tracer) else v


def _plain_scalar(v):
    return bottom(v).item() if isinstance(v, Tracer) else v


# -- the windows: which footprint, origins and modes SciPy uses --------------------------------

class _Plan:
    """The window of every output element: ``fp`` (a boolean footprint of the input's rank), its
    ``origins`` and ``modes`` per axis, ``which`` ('min', 'max' or 'rank' with ``rank``), and the
    structure (an array of fp's shape, traced or plain, or None) with its sign."""

    def __init__(self, fp, origins, modes, which, rank=None, structure=None, sign=1):
        self.fp, self.origins, self.modes = fp, [int(o) for o in origins], list(modes)
        self.which, self.rank, self.structure, self.sign = which, rank, structure, sign


def _expand(v, ndim, axes):
    """An array over ``axes`` given a length-1 axis for each other axis of ``ndim``."""
    if len(axes) == ndim:
        return v
    return np.expand_dims(v, tuple(ax for ax in range(ndim) if ax not in axes))


def _per_axis(values, ndim, axes, fill):
    full = [fill] * ndim
    for v, ax in zip(values, axes):
        full[ax] = v
    return full


def _modes(mode, ndim, axes):
    ni = _support()
    if not isinstance(mode, str) and isinstance(mode, Iterable):
        return _per_axis(ni._normalize_sequence(mode, len(axes)), ndim, axes, "constant")
    return [mode] * ndim


def _box(ndim, axes, size, origin, mode, which):
    """The separable window (a size per axis; an axis of size 1 is not filtered)."""
    ni = _support()
    sizes, origins, modes = (ni._normalize_sequence(v, len(axes)) for v in (size, origin, mode))
    shape, orig, mds = [1] * ndim, [0] * ndim, ["constant"] * ndim
    for ax, s, o, m in zip(axes, sizes, origins, modes):
        if int(s) > 1:
            shape[ax], orig[ax], mds[ax] = int(s), o, m
    return _Plan(np.ones(shape, bool), orig, mds, which)


def _min_or_max_plan(ndim, size, footprint, structure, mode, origin, axes, which, sign=1):
    """SciPy's _min_or_max_filter's window (its arguments already checked by SciPy's own call)."""
    ni = _support()
    axes = ni._check_axes(axes, ndim)
    if structure is None:
        if footprint is None:
            return _box(ndim, axes, size, origin, mode, which)
        footprint = np.asarray(footprint, dtype=bool)
        if footprint.all():
            return _box(ndim, axes, footprint.shape, origin, mode, which)
    fp = np.ones(np.shape(structure), bool) if footprint is None else np.asarray(footprint, dtype=bool)
    fp = _expand(fp, ndim, axes)
    origins = _per_axis(ni._normalize_sequence(origin, len(axes)), ndim, axes, 0)
    s = None if structure is None else _expand(structure, ndim, axes)
    return _Plan(fp, origins, [mode] * ndim, which, structure=s, sign=sign)


def _rank_plan(xshape, rank, kind, size, footprint, mode, origin, axes):
    """SciPy's _rank_filter's window and rank (its arguments already checked by SciPy's own call)."""
    ni = _support()
    ndim = len(xshape)
    axes = ni._check_axes(axes, ndim)
    if footprint is None:
        fp = np.ones(ni._normalize_sequence(size, len(axes)), dtype=bool)
    else:
        fp = np.asarray(footprint, dtype=bool)
    fp = _expand(fp, ndim, axes)
    origins = _per_axis(ni._normalize_sequence(origin, len(axes)), ndim, axes, 0)
    modes = _modes(mode, ndim, axes)
    count = int(np.count_nonzero(fp))
    if kind == "median":
        rank = count // 2
    elif kind == "percentile":
        q = float(rank) + (100.0 if rank < 0 else 0.0)
        rank = count - 1 if q == 100.0 else int(float(count) * q / 100.0)
    if rank < 0:
        rank += count
    if rank == 0 or rank == count - 1:
        # (SciPy's minimum_filter / maximum_filter of the footprint: separable where it is full)
        which = "min" if rank == 0 else "max"
        if fp.all():
            return _Plan(fp, [o if n > 1 else 0 for o, n in zip(origins, fp.shape)],
                         [m if n > 1 else "constant" for m, n in zip(modes, fp.shape)], which)
        return _Plan(fp, origins, modes, which)
    if ndim == 1:
        # SciPy's 1-D fast path (gh-23293's condition) ranks the box of footprint.size samples
        reach = int(np.prod(xshape)) - ((fp.size - 1) // 2 - origins[-1])
        if reach >= 0 or int(np.prod(xshape)) == 1:
            fp = np.ones(fp.shape, bool)
    return _Plan(fp, origins, modes, "rank", rank)


# -- the selection, on plain values ---------------------------------------------------------------

def _selection(xb, cb, plan, sb):
    """(m, rows, src, offs, shares): the value each output element selects (double precision, as
    SciPy compares them), and every element of its window that equals it: output ``rows``, source
    element ``src`` of the flattened input (-1: cval), footprint offset ``offs``, and ``shares``
    (1 / the number of tied elements)."""
    shape, ndim, n = xb.shape, xb.ndim, xb.size
    fp = plan.fp
    pos = np.argwhere(fp)  # (the footprint's offsets, in SciPy's C order)
    k = len(pos)
    strides = [int(np.prod(shape[d + 1:])) for d in range(ndim)]
    srcs = []
    for d in range(ndim):
        lo = fp.shape[d] // 2 + plan.origins[d]
        srcs.append(_source(shape[d], lo, fp.shape[d] - 1 - lo, plan.modes[d]))
    x64 = xb.astype(np.float64).reshape(-1)
    svals = None if sb is None else plan.sign * np.asarray(sb, np.float64)[fp]
    m = np.empty(n)
    rows, src, offs, shares = [], [], [], []
    step = max(1, _CHUNK // max(k, 1))
    for a in range(0, n, step):
        b = min(n, a + step)
        at = np.unravel_index(np.arange(a, b), shape) if ndim else ()
        flat = np.zeros((b - a, k), np.int64)
        out = np.zeros((b - a, k), bool)
        for d in range(ndim):
            s = srcs[d][at[d][:, None] + pos[None, :, d]]
            out |= s < 0
            flat += s * strides[d]
        v = np.where(out, cb, x64[np.where(out, 0, flat)])
        if svals is not None:
            v = v + svals
        if plan.which == "max":
            mc = np.max(v, axis=1)
        elif plan.which == "min":
            mc = np.min(v, axis=1)
        else:
            mc = np.partition(v, plan.rank, axis=1)[:, plan.rank]
        m[a:b] = mc
        hit = v == mc[:, None]
        r, c = np.nonzero(hit)
        cnt = np.count_nonzero(hit, axis=1)
        rows.append(r + a)
        src.append(np.where(out[r, c], -1, flat[r, c]))
        offs.append(c)
        shares.append(1.0 / cnt[r])
    cat = (lambda parts: np.concatenate(parts)) if rows else (lambda parts: np.zeros(0))
    return m, cat(rows).astype(np.intp), cat(src).astype(np.intp), cat(offs).astype(np.intp), cat(shares)


def _refuse(name, what, detail):
    from ...errors import UnsupportedInputError, user_line

    raise UnsupportedInputError(f"scipy.ndimage.{name} at {user_line()}: {what} {detail}")


_WORKAROUND = ("Pad the array yourself so that every window stays inside it, filter the padded array, and crop: "
               "r = the window's reach, mutagrad.scipy.ndimage.{name}(np.pad(x, r, mode=...), ...)[r:-r] (np.pad's "
               "'symmetric' is SciPy's 'reflect', its 'reflect' SciPy's 'mirror'); or let the output take the "
               "input's dtype and cast it after.")


def _check(name, plan, xb, cb, sb, y_exact, dt):
    """The selection of every output element, after checking that SciPy's value is its value."""
    if xb.dtype.kind in "fc" and np.isnan(xb).any() or (
            any(m in ("constant", "grid-constant") for m, n in zip(plan.modes, plan.fp.shape) if n > 1)
            and np.isnan(cb)) or (sb is not None and np.isnan(np.asarray(sb, np.float64)).any()):
        _refuse(name, "the input (or cval, or the structure) holds NaN:",
                "SciPy's rank filters compare a NaN in an order of their own, so their value is not a function of the "
                "window's values, and mutagrad does not differentiate it. Replace the NaN first (np.where(np.isnan(x), "
                "-np.inf, x) for a maximum, np.inf for a minimum).")
    if sb is not None and xb.dtype != np.float64:
        _refuse(name, f"a structure with an input of dtype {xb.dtype}:",
                "SciPy adds the structure to such an input in a precision that depends on the element (rounded to "
                "the input's dtype or not, cval cast to it), so which element it selects is not a function mutagrad "
                "models, and it does not differentiate it. Give a float64 input (x.astype(np.float64)), or a flat "
                "footprint (footprint= or size=), whose values SciPy only compares.")
    sel = _selection(xb, cb, plan, sb)
    m = sel[0]
    with np.errstate(invalid="ignore", over="ignore"):
        mine = m.astype(dt)
    bad = mine != np.reshape(y_exact, -1)
    if np.any(bad):
        what = {"max": "the maximum", "min": "the minimum"}.get(plan.which, f"the value of rank {plan.rank}")
        _refuse(name, f"SciPy's value at {int(np.count_nonzero(bad))} of the {bad.size} elements is not {what} of "
                "its window (the input extended as the mode extends it, read at the footprint's offsets):",
                "SciPy computes something else there (its 1-D rank filter extends an axis shorter than the window "
                "otherwise, and writes an output dtype other than the input's as reinterpreted memory; its "
                "N-dimensional filters read outside the array for a reflection 4 times the axis or more), so "
                "mutagrad does not differentiate it. " + _WORKAROUND.format(name=name))
    return sel


# -- the traced result -----------------------------------------------------------------------------

def _filter(name, x, cval, plan, dt, out, y_exact):
    """The selection of ``plan`` as a gather of traced ``x`` (and cval, and the structure), holding
    SciPy's value ``y_exact``, written into ``out`` if it is an array."""
    from ..reductions import _with_value

    xb, cb = np.asarray(bottom(x)), float(np.real(_plain_scalar(cval)))
    s = plan.structure
    if xb.size == 0:  # (no window: SciPy's empty result)
        return _into(out, x.astype(dt) if isinstance(x, Tracer) else y_exact)
    _, rows, src, offs, shares = _check(name, plan, xb, cb, None if s is None else _plain(s), y_exact, dt)
    n = xb.size
    flat = np.reshape(x, -1)
    if np.any(src < 0):
        c = cval if isinstance(cval, Tracer) else np.float64(cval)
        flat = np.concatenate([flat, np.reshape(c, (1,))])
        src = np.where(src < 0, n, src)
    v = flat[src]
    if s is not None:
        sv = np.take(np.reshape(s, -1), np.flatnonzero(np.reshape(plan.fp, -1)))
        v = v + plan.sign * np.take(sv, offs)
    if len(rows) != n:  # (a tie: the mean of the tied elements' derivatives)
        v = np.bincount(rows, weights=v * shares, minlength=n)
    y = np.reshape(v, xb.shape)
    if not isinstance(y, Tracer):
        return _into(out, y_exact)
    if np.result_type(bottom(y)) != dt:
        y = y.astype(dt)
    return _into(out, _with_value(y, lambda: y_exact))


def _uniform(v) -> bool:
    """Whether a size, origin or mode is one value for every axis (a scalar, or a sequence of equal ones)."""
    if isinstance(v, str) or np.ndim(v) == 0:
        return True
    vals = list(v)
    return all(u == vals[0] for u in vals)


def _axes_in_order(name, ndim, axes, size, footprint, structure, origin, mode):
    """Refuse ``axes`` naming every axis out of increasing order where the order matters (a footprint, a structure, or sizes,
    origins or modes that differ per axis): SciPy 1.17 applies them in the given order in some filters
    (maximum_filter's sizes and origins) and in the axes' own in others (a footprint; median_filter's sizes),
    and the window read here must be SciPy's (the newrules tester: a derivative put at another element)."""
    if axes is None:
        return
    order = list(_support()._check_axes(axes, ndim))
    if len(order) < ndim or order == sorted(order) or (footprint is None and structure is None
                                  and all(_uniform(v) for v in (size, origin, mode))):
        return
    _refuse(name, f"with axes={tuple(axes)!r}, not in increasing order,",
            "and a footprint, a structure, or sizes, origins or modes that differ per axis: SciPy applies these in "
            "the given order in some filters and in the axes' own in others. Pass the axes in increasing order, "
            "with the sizes, origins, modes and footprint in the same order.")


def _prepare(input, output):
    x = _dense(input)
    dt, out = _output(output, x)
    return x, dt, out


# -- the public functions -------------------------------------------------------------------------

def _filter1d(name, input, size, axis, output, mode, cval, origin):
    fn = getattr(_nd(), name)
    if not _traced(input, output, cval):
        return fn(input, size, axis, output, mode, cval, origin)
    x, dt, out = _prepare(input, output)
    y = fn(_plain(x), size, axis, dt, mode, _plain_scalar(cval), origin)
    from numpy.lib.array_utils import normalize_axis_index

    ndim = np.ndim(y)
    ax = normalize_axis_index(axis, ndim)
    plan = _box(ndim, [ax], size, origin, mode, "min" if name.startswith("minimum") else "max")
    return _filter(name, x, cval, plan, dt, out, y)


def minimum_filter1d(input, size, axis=-1, output=None, mode="reflect", cval=0.0, origin=0):
    """``scipy.ndimage.minimum_filter1d``, differentiated in ``input`` and ``cval`` (a tie: shared evenly).

    >>> import numpy as np, mutagrad as mg
    >>> from mutagrad.scipy.ndimage import minimum_filter1d
    >>> mg.grad(lambda x: np.sum(minimum_filter1d(x, 3)))(np.array([3.0, 1.0, 2.0, 5.0]))
    array([0., 3., 1., 0.])
    """
    return _filter1d("minimum_filter1d", input, size, axis, output, mode, cval, origin)


def maximum_filter1d(input, size, axis=-1, output=None, mode="reflect", cval=0.0, origin=0):
    """``scipy.ndimage.maximum_filter1d``, differentiated in ``input`` and ``cval`` (a tie: shared evenly).

    >>> import numpy as np, mutagrad as mg
    >>> from mutagrad.scipy.ndimage import maximum_filter1d
    >>> mg.grad(lambda x: np.sum(maximum_filter1d(x, 3)))(np.array([3.0, 1.0, 2.0, 5.0]))
    array([2., 0., 0., 2.])
    """
    return _filter1d("maximum_filter1d", input, size, axis, output, mode, cval, origin)


def _min_or_max(name, input, size, footprint, structure, output, mode, cval, origin, axes, which, sign=1,
                call=None):
    if not _traced(input, output, cval, structure):
        return call(input, size, footprint, structure, output, mode, cval, origin, axes)
    x, dt, out = _prepare(input, output)
    plain_s = None if structure is None else _plain(structure)
    fpb = None if footprint is None else _plain(footprint)
    y = call(_plain(x), size, fpb, plain_s, dt, mode, _plain_scalar(cval), origin, axes)
    _axes_in_order(name, np.ndim(y), axes, size, fpb, plain_s, origin, mode)
    plan = _min_or_max_plan(np.ndim(y), size, fpb, structure, mode, origin, axes, which, sign)
    return _filter(name, x, cval, plan, dt, out, y)


def minimum_filter(input, size=None, footprint=None, output=None, mode="reflect", cval=0.0, origin=0, *, axes=None):
    """``scipy.ndimage.minimum_filter``, differentiated in ``input`` and ``cval`` (a tie: shared evenly).

    >>> import numpy as np, mutagrad as mg
    >>> from mutagrad.scipy.ndimage import minimum_filter
    >>> mg.grad(lambda x: minimum_filter(x, 2, mode="constant", cval=9.0)[1, 1])(np.array([[1.0, 2.0], [3.0, 4.0]]))
    array([[1., 0.],
           [0., 0.]])
    """
    def call(x, size, fp, s, output, mode, cval, origin, axes):
        return _nd().minimum_filter(x, size, fp, output, mode, cval, origin, axes=axes)

    return _min_or_max("minimum_filter", input, size, footprint, None, output, mode, cval, origin, axes, "min",
                       call=call)


def maximum_filter(input, size=None, footprint=None, output=None, mode="reflect", cval=0.0, origin=0, *, axes=None):
    """``scipy.ndimage.maximum_filter``, differentiated in ``input`` and ``cval`` (a tie: shared evenly).

    >>> import numpy as np, mutagrad as mg
    >>> from mutagrad.scipy.ndimage import maximum_filter
    >>> mg.grad(lambda x: maximum_filter(x, 2, mode="constant", cval=-9.0)[1, 1])(np.array([[1.0, 2.0], [3.0, 4.0]]))
    array([[0., 0.],
           [0., 1.]])
    """
    def call(x, size, fp, s, output, mode, cval, origin, axes):
        return _nd().maximum_filter(x, size, fp, output, mode, cval, origin, axes=axes)

    return _min_or_max("maximum_filter", input, size, footprint, None, output, mode, cval, origin, axes, "max",
                       call=call)


def grey_erosion(input, size=None, footprint=None, structure=None, output=None, mode="reflect", cval=0.0, origin=0,
                 *, axes=None):
    """``scipy.ndimage.grey_erosion``: the minimum of the window minus the structure, differentiated in
    ``input``, ``cval`` and ``structure`` (a tie: shared evenly).

    >>> import numpy as np, mutagrad as mg
    >>> from mutagrad.scipy.ndimage import grey_erosion
    >>> mg.grad(lambda s: np.sum(grey_erosion(np.array([1.0, 5.0, 2.0]), structure=s)))(np.array([0.5, 0.0, 0.25]))
    array([-2.,  0., -1.])
    """
    def call(x, size, fp, s, output, mode, cval, origin, axes):
        return _nd().grey_erosion(x, size, fp, s, output, mode, cval, origin, axes=axes)

    return _min_or_max("grey_erosion", input, size, footprint, structure, output, mode, cval, origin, axes, "min",
                       -1, call=call)


def grey_dilation(input, size=None, footprint=None, structure=None, output=None, mode="reflect", cval=0.0, origin=0,
                  *, axes=None):
    """``scipy.ndimage.grey_dilation``: the maximum of the reflected window plus the (reflected) structure,
    differentiated in ``input``, ``cval`` and ``structure`` (a tie: shared evenly).

    >>> import numpy as np, mutagrad as mg
    >>> from mutagrad.scipy.ndimage import grey_dilation
    >>> mg.grad(lambda x: grey_dilation(x, size=2)[1])(np.array([4.0, 1.0, 2.0]))  # (max(x[1], x[2]))
    array([0., 0., 1.])
    """
    def call(x, size, fp, s, output, mode, cval, origin, axes):
        return _nd().grey_dilation(x, size, fp, s, output, mode, cval, origin, axes=axes)

    if not _traced(input, output, cval, structure):
        return call(input, size, footprint, structure, output, mode, cval, origin, axes)
    # SciPy's grey_dilation: a maximum filter of the reflected footprint and structure, whose origins are
    # reflected too (one more for an axis of even length)
    ni = _support()
    x, dt, out = _prepare(input, output)
    ndim = np.ndim(bottom(x))
    flip = (lambda a: a[(slice(None, None, -1),) * np.ndim(a)])
    fp = None if footprint is None else flip(np.asarray(_plain(footprint)))
    s = None if structure is None else flip(structure if isinstance(structure, Tracer) else np.asarray(structure))
    naxes = len(ni._check_axes(axes, ndim))
    origins = [-int(o) for o in ni._normalize_sequence(origin, naxes)]
    for i in range(naxes):
        if fp is not None:
            sz = fp.shape[i]
        elif s is not None:
            sz = np.shape(s)[i]
        else:
            sz = size if np.isscalar(size) else size[i]
        if not sz & 1:
            origins[i] -= 1
    y = call(_plain(x), size, None if footprint is None else _plain(footprint),
             None if structure is None else _plain(structure), dt, mode, _plain_scalar(cval), origin, axes)
    _axes_in_order("grey_dilation", np.ndim(y), axes, size, fp, s, origin, mode)
    plan = _min_or_max_plan(np.ndim(y), size, fp, s, mode, origins, axes, "max", 1)
    return _filter("grey_dilation", x, cval, plan, dt, out, y)


def _rank_like(name, kind, input, rank, size, footprint, output, mode, cval, origin, axes):
    fn = getattr(_nd(), name)
    args = () if kind == "median" else (rank,)
    if not _traced(input, output, cval):
        return fn(input, *args, size, footprint, output, mode, cval, origin, axes=axes)
    x, dt, out = _prepare(input, output)
    fpb = None if footprint is None else _plain(footprint)
    y = fn(_plain(x), *args, size, fpb, dt, mode, _plain_scalar(cval), origin, axes=axes)
    _axes_in_order(name, np.ndim(y), axes, size, fpb, None, origin, mode)
    plan = _rank_plan(np.shape(y), rank, kind, size, fpb, mode, origin, axes)
    return _filter(name, x, cval, plan, dt, out, y)


def rank_filter(input, rank, size=None, footprint=None, output=None, mode="reflect", cval=0.0, origin=0, *,
                axes=None):
    """``scipy.ndimage.rank_filter``, differentiated in ``input`` and ``cval`` (a tie: shared evenly).

    >>> import numpy as np, mutagrad as mg
    >>> from mutagrad.scipy.ndimage import rank_filter
    >>> mg.grad(lambda x: rank_filter(x, 1, size=3)[1])(np.array([3.0, 1.0, 2.0, 5.0]))
    array([0., 0., 1., 0.])
    """
    rank = operator.index(rank)
    return _rank_like("rank_filter", "rank", input, rank, size, footprint, output, mode, cval, origin, axes)


def median_filter(input, size=None, footprint=None, output=None, mode="reflect", cval=0.0, origin=0, *, axes=None):
    """``scipy.ndimage.median_filter`` (for an even count, the upper of the two middle values, as SciPy),
    differentiated in ``input`` and ``cval`` (a tie: shared evenly).

    >>> import numpy as np, mutagrad as mg
    >>> from mutagrad.scipy.ndimage import median_filter
    >>> mg.grad(lambda x: median_filter(x, 3)[1])(np.array([3.0, 1.0, 2.0, 5.0]))
    array([0., 0., 1., 0.])
    """
    return _rank_like("median_filter", "median", input, None, size, footprint, output, mode, cval, origin, axes)


def percentile_filter(input, percentile, size=None, footprint=None, output=None, mode="reflect", cval=0.0, origin=0,
                      *, axes=None):
    """``scipy.ndimage.percentile_filter`` (SciPy's rank for the percentile; a traced ``percentile`` is
    read as a number: the rank is piecewise constant in it), differentiated in ``input`` and ``cval``.

    >>> import numpy as np, mutagrad as mg
    >>> from mutagrad.scipy.ndimage import percentile_filter
    >>> mg.grad(lambda x: percentile_filter(x, 80, size=3)[1])(np.array([3.0, 1.0, 2.0, 5.0]))
    array([1., 0., 0., 0.])
    """
    percentile = _plain_scalar(percentile)
    return _rank_like("percentile_filter", "percentile", input, percentile, size, footprint, output, mode, cval,
                      origin, axes)
