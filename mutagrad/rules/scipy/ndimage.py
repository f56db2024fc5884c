"""scipy.ndimage's linear filters. ``correlate1d``, ``correlate`` (N-dimensional) and
``uniform_filter1d`` are primitives whose value is SciPy's own call (its bits); the other
filters are written as SciPy writes them, with these: ``convolve1d`` and ``convolve`` flip the
kernel, ``uniform_filter`` and ``gaussian_filter`` run one pass per axis (the intermediate
results in the output's dtype), the Gaussian kernel is SciPy's, computed with NumPy operations
(so a traced ``sigma`` is differentiated), and ``sobel``, ``prewitt``, ``laplace``,
``gaussian_laplace`` and ``gaussian_gradient_magnitude`` combine passes as SciPy does.

Along an axis of n samples, a kernel k of K samples whose centre is c = K // 2 + origin gives

    y[i] = Σ_j k[j] e[i + j],      e = E(x, cval): x extended by lo = c samples before, hi = K - 1 - c after

(correlate1d passes k = conj(weights): SciPy conjugates complex weights; convolve1d the flipped
weights, unconjugated). SciPy extends a line as np.pad extends it, for any kernel length (the
tests check axes of 1 to 7 samples with kernels of 1 to 9, every origin): 'reflect' and
'grid-mirror' are np.pad's 'symmetric', 'mirror' its 'reflect', 'nearest' its 'edge', 'wrap' and
'grid-wrap' its 'wrap' (the same for filters), 'constant' and 'grid-constant' pad with cval. So
y is bilinear in (e, k) and e linear in (x, cval):

    ẏ = F(ẋ, k; cval = ċval) + F(x, k̇; cval)
    ē = Σ_i conj(k[q - i]) ȳ[i]       the full convolution: the same primitive, mode 'constant' and
                                       cval 0, on ȳ padded with K - 1 zeros, kernel conj(flip(k))
    x̄ = Eᵀ ē                          each extended sample's cotangent added to the sample it copies
                                       (runs of consecutive samples at a time; 'constant': the middle n)
    c̄val = Σ ē over the padded samples    (the constant modes; zero for the others)
    k̄[j] = Σ_i ȳ[i] conj(e[i + j])    over every other axis too

The N-dimensional correlate is the same along every axis at once (E extends each axis, Eᵀ folds
each axis back), uniform_filter1d the same with k = ones(size) / size (its ē is uniform_filter1d
again, on the padded ȳ). The rules apply these primitives, np.pad, np.take, flips and sums, so
every order is available.

SciPy's N-dimensional correlate (and convolve) in mode 'reflect' reads outside the array where the
extension before an axis of n >= 2 samples reaches 4n samples or more (the samples 2nm before the
axis, m >= 2, read the element before the line: a previous row's, or memory before the array); with
a traced argument that call raises
``UnsupportedInputError`` (correlate1d and the separable filters extend lines correctly).

``map_coordinates``, ``shift``, ``zoom`` and ``affine_transform`` (spline orders 0 to 5, every mode,
``prefilter``) are primitives whose value is SciPy's own call; their rules (see "interpolation" below)
evaluate the piecewise polynomial SciPy evaluates, with NumPy operations: the prefilter as a matrix per
axis (spline_filter1d of the identity), the B-spline weights as polynomials of the coordinates, the
stencil gathered with SciPy's boundary folds, and its transpose scattered with np.bincount. shift and
affine_transform sample at c = m k + o (k the output index), so the coordinates' cotangent maps to the
matrix's and the offset's by contraction with the grid k. ``rotate`` is written as SciPy writes it, an
affine_transform per plane whose matrix and offset are traced functions of the angle. ``spline_filter1d``
is a linear primitive (SciPy's call; its transpose the filter's matrix transposed, not the filter), and
``spline_filter`` a pass of it per axis.
"""
from __future__ import annotations

import copy
import functools
import itertools
import math
import numbers
from collections.abc import Iterable

import numpy as np

from ...core import Tracer, bind, bottom, get_primitive
from ...registry import conj_if_complex as _cj
from ...registry import deflinear
from ...tangents import Thunk, ZeroTangent, is_zero
from .linalg import _has_tracer, _plain
from .signal import _along
from .sparse import _dense


def _nd():
    import scipy.ndimage as nd

    return nd


def _support():
    from scipy.ndimage import _ni_support

    return _ni_support


# SciPy's filter modes as np.pad's
_PAD = {"reflect": "symmetric", "grid-mirror": "symmetric", "mirror": "reflect", "nearest": "edge", "wrap": "wrap",
        "grid-wrap": "wrap", "constant": "constant", "grid-constant": "constant"}
_CONSTANT = ("constant", "grid-constant")


# -- the primitives: SciPy's calls --------------------------------------------------------

def _correlate1d(x, k, cval, *, axis, mode, origin, output):
    return _nd().correlate1d(x, _cj(k), axis, output, mode, cval, origin)  # (SciPy conjugates it back)


def _correlate(x, k, cval, *, mode, origin, output):
    return _nd().correlate(x, _cj(k), output, mode, cval, list(origin))


def _uniform_filter1d(x, cval, *, size, axis, mode, origin, output):
    return _nd().uniform_filter1d(x, size, axis, output, mode, cval, origin)


CORRELATE1D_P = get_primitive(_correlate1d, "scipy.ndimage.correlate1d")
CORRELATE_P = get_primitive(_correlate, "scipy.ndimage.correlate")
UNIFORM_FILTER1D_P = get_primitive(_uniform_filter1d, "scipy.ndimage.uniform_filter1d")

# the functions written with them (docs/coverage.md's rows)
COMPOSITES = tuple(f"scipy.ndimage.{name}" for name in (
    "convolve", "convolve1d", "fourier_ellipsoid", "fourier_gaussian", "fourier_shift", "fourier_uniform",
    "gaussian_filter", "gaussian_filter1d", "gaussian_gradient_magnitude", "gaussian_laplace", "laplace", "prewitt",
    "rotate", "sobel", "spline_filter", "uniform_filter"))


# -- the extension and its adjoint -----------------------------------------------------------

def _widths(ndim, axis, before, after):
    w = [(0, 0)] * ndim
    w[axis] = (before, after)
    return w


@functools.lru_cache(maxsize=512)
def _source(n, lo, hi, mode):
    """The sample of x that each of the lo + n + hi samples of the extended axis copies (-1: cval)."""
    ramp = np.arange(n)
    if _PAD[mode] == "constant":
        src = np.pad(ramp, (lo, hi), constant_values=-1)
    else:
        src = np.pad(ramp, (lo, hi), mode=_PAD[mode])
    src.flags.writeable = False
    return src


@functools.lru_cache(maxsize=512)
def _runs(n, lo, hi, mode):
    """The extended axis as runs (start, stop, first source, step): consecutive samples copying
    ascending (step 1), descending (-1) or one (0) source."""
    src = _source(n, lo, hi, mode)
    runs, j, m = [], 0, len(src)
    while j < m:
        e = j + 1
        step = int(src[e] - src[j]) if e < m else 1
        step = step if step in (-1, 0, 1) else 1
        while e < m and src[e] - src[e - 1] == step:
            e += 1
        first = int(src[j] if step >= 0 else src[e - 1])
        runs.append((j, e, first, step if e - j > 1 else 1))
        j = e
    return tuple(runs)


def _extend(x, c, axis, lo, hi, mode):
    """E(x, cval) along ``axis``: x with lo samples before and hi after, as SciPy extends it."""
    if not (lo or hi):
        return x
    n = np.shape(x)[axis]
    if _PAD[mode] != "constant":
        return np.take(x, _source(n, lo, hi, mode), axis=axis)
    e = np.pad(x, _widths(np.ndim(x), axis, lo, hi))
    if isinstance(c, Tracer) or c != 0:
        mask = np.ones(lo + n + hi)
        mask[lo:lo + n] = 0.0
        e = e + c * np.reshape(mask, [-1 if d == axis else 1 for d in range(np.ndim(x))])
    return e


def _fold(g, axis, n, lo, hi, mode):
    """Eₓᵀ along ``axis``: each extended sample's cotangent added to the sample it copies."""
    if _PAD[mode] == "constant":
        return _along(g, lo, lo + n, axis)
    total = None
    for start, stop, first, step in _runs(n, lo, hi, mode):
        piece = _along(g, start, stop, axis)
        if step == 0:
            piece = np.sum(piece, axis=axis, keepdims=True)
        elif step == -1:
            piece = np.flip(piece, axis)
        m = np.shape(piece)[axis]
        if m < n:
            piece = np.pad(piece, _widths(np.ndim(g), axis, first, n - first - m))
        total = piece if total is None else total + piece
    return total


def _padded_sum(g, n, geometry):
    """Σ of ``g`` over the samples outside the middle block (of n samples along each axis at lo)."""
    middle = g[tuple(slice(lo, lo + m) for m, (lo, _) in zip(n, geometry))]
    return np.sum(g) - np.sum(middle)


def _padded_sum_along(g, axis, lo, n):
    """Σ of ``g`` over the samples outside the middle block (n samples at lo) along ``axis``."""
    return np.sum(g) - np.sum(_along(g, lo, lo + n, axis))


def _geometry(kshape, origins):
    """(lo, hi) along each axis: the samples the kernel reaches before and after the axis."""
    return tuple((k // 2 + o, k - 1 - k // 2 - o) for k, o in zip(kshape, origins))


def _cached(fn):
    """``fn()``, computed once (the ē that several cotangents share)."""
    box = []

    def get():
        if not box:
            box.append(fn())
        return box[0]

    return get


def _zeros_if(t, like):
    return np.zeros(np.shape(like), np.asarray(bottom(like)).dtype) if is_zero(t) else t


# -- correlate1d ------------------------------------------------------------------------------

def _correlate1d_rrule(x, k, c, *, axis, mode, origin, output):
    kw = {"axis": axis, "mode": mode, "origin": origin, "output": output}
    y = bind(CORRELATE1D_P, (x, k, c), kw)

    def pullback(g):
        if is_zero(g) or np.size(y) == 0:
            return ZeroTangent(), ZeroTangent(), ZeroTangent()
        ax = axis % np.ndim(y)
        n, nk = np.shape(x)[ax], np.shape(k)[0]
        ((lo, hi),) = _geometry((nk,), (origin,))
        ebar = _cached(lambda: bind(
            CORRELATE1D_P, (np.pad(g, _widths(np.ndim(g), ax, 0, nk - 1)), np.flip(_cj(k)), 0.0),
            {"axis": ax, "mode": "constant", "origin": nk - 1 - nk // 2, "output": None}))

        def kbar():
            e = _cj(_extend(x, c, ax, lo, hi, mode))
            return np.stack([np.sum(g * _along(e, j, j + n, ax)) for j in range(nk)])

        cbar = Thunk(lambda: _padded_sum_along(ebar(), ax, lo, n)) if mode in _CONSTANT else ZeroTangent()
        return Thunk(lambda: _fold(ebar(), ax, n, lo, hi, mode)), Thunk(kbar), cbar

    return y, pullback


def _correlation_frule(prim):
    """The forward rule of a correlation ``prim(x, k, cval)``: linear in (x, cval) and in k."""

    def frule(primals, tangents, **kw):
        (x, k, c), (tx, tk, tc) = primals, tangents
        y = bind(prim, primals, kw)
        ty = ZeroTangent()
        tc = tc if kw["mode"] in _CONSTANT else ZeroTangent()
        if not is_zero(tx) or not is_zero(tc):
            ty = bind(prim, (_zeros_if(tx, x), k, 0.0 if is_zero(tc) else tc), kw)
        if not is_zero(tk):
            t = bind(prim, (x, tk, c), kw)
            ty = t if is_zero(ty) else ty + t
        return y, ty

    return frule


CORRELATE1D_P.rrule, CORRELATE1D_P.frule = _correlate1d_rrule, _correlation_frule(CORRELATE1D_P)


# -- correlate (N-dimensional) ----------------------------------------------------------------

def _correlate_rrule(x, k, c, *, mode, origin, output):
    kw = {"mode": mode, "origin": origin, "output": output}
    y = bind(CORRELATE_P, (x, k, c), kw)

    def pullback(g):
        if is_zero(g) or np.size(y) == 0:
            return ZeroTangent(), ZeroTangent(), ZeroTangent()
        n, ks = np.shape(x), np.shape(k)
        geometry = _geometry(ks, origin)
        ebar = _cached(lambda: bind(
            CORRELATE_P, (np.pad(g, [(0, m - 1) for m in ks]), np.flip(_cj(k)), 0.0),
            {"mode": "constant", "origin": tuple(m - 1 - m // 2 for m in ks), "output": None}))

        def xbar():
            v = ebar()
            for ax, (m, (lo, hi)) in enumerate(zip(n, geometry)):
                v = _fold(v, ax, m, lo, hi, mode)
            return v

        def kbar():
            e = x
            for ax, (lo, hi) in enumerate(geometry):
                e = _extend(e, c, ax, lo, hi, mode)
            e = _cj(e)
            sums = [np.sum(g * e[tuple(slice(j, j + m) for j, m in zip(idx, n))]) for idx in np.ndindex(*ks)]
            return np.reshape(np.stack(sums), ks)

        cbar = Thunk(lambda: _padded_sum(ebar(), n, geometry)) if mode in _CONSTANT else ZeroTangent()
        return Thunk(xbar), Thunk(kbar), cbar

    return y, pullback


CORRELATE_P.rrule, CORRELATE_P.frule = _correlate_rrule, _correlation_frule(CORRELATE_P)


# -- uniform_filter1d -------------------------------------------------------------------------

def _uniform_filter1d_rrule(x, c, *, size, axis, mode, origin, output):
    kw = {"size": size, "axis": axis, "mode": mode, "origin": origin, "output": output}
    y = bind(UNIFORM_FILTER1D_P, (x, c), kw)

    def pullback(g):
        if is_zero(g) or np.size(y) == 0:
            return ZeroTangent(), ZeroTangent()
        ax = axis % np.ndim(y)
        n = np.shape(x)[ax]
        ((lo, hi),) = _geometry((size,), (origin,))
        ebar = _cached(lambda: bind(
            UNIFORM_FILTER1D_P, (np.pad(g, _widths(np.ndim(g), ax, 0, size - 1)), 0.0),
            {"size": size, "axis": ax, "mode": "constant", "origin": size - 1 - size // 2, "output": None}))
        cbar = Thunk(lambda: _padded_sum_along(ebar(), ax, lo, n)) if mode in _CONSTANT else ZeroTangent()
        return Thunk(lambda: _fold(ebar(), ax, n, lo, hi, mode)), cbar

    return y, pullback


def _uniform_filter1d_frule(primals, tangents, **kw):
    (x, _), (tx, tc) = primals, tangents
    y = bind(UNIFORM_FILTER1D_P, primals, kw)
    tc = tc if kw["mode"] in _CONSTANT else ZeroTangent()
    if is_zero(tx) and is_zero(tc):
        return y, ZeroTangent()
    return y, bind(UNIFORM_FILTER1D_P, (_zeros_if(tx, x), 0.0 if is_zero(tc) else tc), kw)


UNIFORM_FILTER1D_P.rrule, UNIFORM_FILTER1D_P.frule = _uniform_filter1d_rrule, _uniform_filter1d_frule


# -- the public functions -----------------------------------------------------------------------

def _traced(*values):
    """Whether any of ``values`` (or of the lists, tuples and dicts among them) is traced."""
    return _has_tracer(values)


def _complex(v):
    return np.iscomplexobj(bottom(v))


def _output(output, x, complex_output=False, shape=None):
    """(the output's dtype, the array to write the result into or None), as SciPy's _get_output
    resolves ``output`` (None, a dtype, or an array: traced too) for a result of ``shape`` (x's)."""
    if isinstance(output, (Tracer, np.ndarray)):
        if np.shape(output) != (np.shape(x) if shape is None else tuple(shape)):
            raise RuntimeError("output shape not correct")
        dt = bottom(output).dtype
        if complex_output and dt.kind != "c":
            raise RuntimeError("output must have complex dtype")
        return dt, output
    probe = np.empty(0, np.asarray(bottom(x)).dtype)
    return _support()._get_output(output, probe, shape=(0,), complex_output=complex_output).dtype, None


def _refuse_output_over_input(name, output, input, order, prefilter):
    """SciPy's interpolations read the input while they write the output. Where no prefilter copies it first (order 0
    or 1, or prefilter=False), an output sharing the input's memory makes SciPy read values it has already overwritten,
    which depend on the order of its own writes: the result computed as from a separate output was another one, and
    its derivative too, silently (the advect tester's semi-Lagrangian step, shift(q, s, output=q, order=1))."""
    if not isinstance(output, (Tracer, np.ndarray)) or (order > 1 and prefilter):
        return
    a, b = bottom(output), bottom(input)
    if isinstance(a, np.ndarray) and isinstance(b, np.ndarray) and np.may_share_memory(a, b) and np.shares_memory(a, b):
        from ...errors import UnsupportedInputError, user_line

        raise UnsupportedInputError(
            f"scipy.ndimage.{name} at {user_line()}: output= shares memory with the input, and at order {order}"
            f"{'' if order <= 1 else ' with prefilter=False'} SciPy reads the input while it writes the output, so "
            "the values it reads depend on the order of its own writes; mutagrad does not differentiate that. Write "
            f"the result into the array instead, `q[...] = {name}(q, ...)`, or pass an output of its own.")


def _into(out, y):
    """The result, written into the output array if one was given (which is then returned)."""
    if out is None:
        return y
    out[...] = y
    return out


def _copy(x, dt):
    """SciPy's output[...] = input[...] when no axis is filtered."""
    return x.astype(dt) if isinstance(x, Tracer) else np.asarray(x).astype(dt)


def _sequence(v, n):
    """SciPy's _normalize_sequence, for a traced array too (one entry per axis)."""
    if isinstance(v, Tracer):
        if np.ndim(v) == 0:
            return [v] * n
        v = [v[i] for i in range(len(v))]
    return _support()._normalize_sequence(v, n)


def _ndim_axis(x, axis):
    from numpy.lib.array_utils import normalize_axis_index

    return normalize_axis_index(axis, np.ndim(x))


def _corr1d(x, k, axis, dt, mode, cval, origin):
    """correlate1d's primitive with kernel k (not conjugated) into an output array of dtype ``dt``."""
    if (_complex(x) or _complex(k)) and dt.kind != "c":  # (SciPy's error for such an output array)
        raise RuntimeError("output must have complex dtype")
    return bind(CORRELATE1D_P, (x, k, cval), {"axis": axis, "mode": mode, "origin": origin, "output": dt})


def _weights(w):
    return np.asarray(w) if isinstance(w, (list, tuple)) and not _traced(w) else _dense(w)


def correlate1d(input, weights, axis=-1, output=None, mode="reflect", cval=0.0, origin=0):
    """``scipy.ndimage.correlate1d``, differentiated in ``input``, ``weights`` and ``cval``.

    >>> import numpy as np, mutagrad as mg
    >>> from mutagrad.scipy.ndimage import correlate1d
    >>> mg.grad(lambda w: correlate1d(np.array([1.0, 2.0, 4.0]), w, mode="constant")[1])(np.ones(3))
    array([1., 2., 4.])
    """
    if not _traced(input, weights, output, cval):
        return _nd().correlate1d(input, weights, axis, output, mode, cval, origin)
    x, w = _dense(input), _weights(weights)
    dt, out = _output(output, x, complex_output=_complex(x) or _complex(w))
    return _into(out, bind(CORRELATE1D_P, (x, _cj(w), cval),
                           {"axis": axis, "mode": mode, "origin": origin, "output": dt}))


def convolve1d(input, weights, axis=-1, output=None, mode="reflect", cval=0.0, origin=0):
    """``scipy.ndimage.convolve1d``, differentiated in ``input``, ``weights`` and ``cval``.

    >>> import numpy as np, mutagrad as mg
    >>> from mutagrad.scipy.ndimage import convolve1d
    >>> mg.grad(lambda w: convolve1d(np.array([1.0, 2.0, 4.0]), w, mode="constant")[1])(np.ones(3))
    array([4., 2., 1.])
    """
    if not _traced(input, weights, output, cval):
        return _nd().convolve1d(input, weights, axis, output, mode, cval, origin)
    x, w = _dense(input), _weights(weights)
    origin = -origin - (0 if np.shape(w)[0] & 1 else 1)  # (SciPy's: the flipped kernel's centre)
    dt, out = _output(output, x, complex_output=_complex(x) or _complex(w))
    return _into(out, bind(CORRELATE1D_P, (x, np.flip(w), cval),
                           {"axis": axis, "mode": mode, "origin": origin, "output": dt}))


def correlate(input, weights, output=None, mode="reflect", cval=0.0, origin=0, *, axes=None):
    """``scipy.ndimage.correlate`` (N-dimensional), differentiated in ``input``, ``weights`` and ``cval``.

    >>> import numpy as np, mutagrad as mg
    >>> from mutagrad.scipy.ndimage import correlate
    >>> mg.grad(lambda x: correlate(x, np.ones((2, 2)), mode="wrap")[0, 0])(np.eye(2))
    array([[1., 1.],
           [1., 1.]])
    """
    if not _traced(input, weights, output, cval):
        return _nd().correlate(input, weights, output, mode, cval, origin, axes=axes)
    return _correlate_nd(input, weights, output, mode, cval, origin, axes, False)


def convolve(input, weights, output=None, mode="reflect", cval=0.0, origin=0, *, axes=None):
    """``scipy.ndimage.convolve`` (N-dimensional), differentiated in ``input``, ``weights`` and ``cval``.

    >>> import numpy as np, mutagrad as mg
    >>> from mutagrad.scipy.ndimage import convolve
    >>> mg.grad(lambda c: np.sum(convolve(np.ones((2, 2)), np.ones((3, 3)), mode="constant", cval=c)))(0.0)
    20.0
    """
    if not _traced(input, weights, output, cval):
        return _nd().convolve(input, weights, output, mode, cval, origin, axes=axes)
    return _correlate_nd(input, weights, output, mode, cval, origin, axes, True)


def _correlate_nd(input, weights, output, mode, cval, origin, axes, convolution):
    """SciPy's _correlate_or_convolve: the kernel (conjugated for a correlation, flipped for a
    convolution, with its origins) given a length-1 axis for each axis not filtered."""
    ni = _support()
    x, w = _dense(input), _weights(weights)
    dt, out = _output(output, x, complex_output=_complex(x) or _complex(w))
    ndim = np.ndim(x)
    axes = ni._check_axes(axes, ndim)
    k = w if convolution else _cj(w)
    if len(axes) < ndim:
        if np.ndim(k) != len(axes):
            raise RuntimeError(f"weights.ndim ({np.ndim(k)}) must match len(axes) ({len(axes)})")
        k = np.expand_dims(k, tuple(ax for ax in range(ndim) if ax not in axes))
    origins = ni._normalize_sequence(origin, len(axes))
    if len(axes) < ndim:
        full = [0] * ndim
        for o, ax in zip(origins, axes):
            full[ax] = o
        origins = full
    if np.ndim(k) != ndim:
        raise RuntimeError(f"weights.ndim ({np.ndim(k)}) must match len(axes) ({len(axes)})")
    if convolution:
        k = np.flip(k)
        origins = [-o - (0 if m & 1 else 1) for o, m in zip(origins, np.shape(k))]
    if not isinstance(mode, str) and isinstance(mode, Iterable):
        raise RuntimeError("A sequence of modes is not supported")  # noqa: TRY004  (SciPy's error)
    origins = tuple(int(o) for o in origins)
    if mode in ("reflect", "grid-mirror"):
        _refuse_long_reflections(np.shape(x), np.shape(k), origins, convolution, mode)
    return _into(out, bind(CORRELATE_P, (x, k, cval), {"mode": mode, "origin": origins, "output": dt}))


def _refuse_long_reflections(shape, kshape, origins, convolution, mode):
    """SciPy's N-dimensional correlate reads outside the array in mode 'reflect' where the kernel
    reaches 4n or more samples before an axis of n >= 2: its value there is not a function of the input."""
    for n, (lo, _) in zip(shape, _geometry(kshape, origins)):
        if 2 <= n <= lo // 4:
            from ...errors import UnsupportedInputError, user_line

            name = "convolve" if convolution else "correlate"
            raise UnsupportedInputError(
                f"scipy.ndimage.{name} at {user_line()}: mode={mode!r} with a kernel reaching {lo} samples "
                f"before an axis of {n}. SciPy's N-dimensional filter reads memory outside the array for "
                "reflections this far (4 times the axis or more), so its value is not a function of the "
                "input, and mutagrad does not differentiate it. Filter along each axis with "
                "mutagrad.scipy.ndimage.correlate1d (which reflects correctly) for a separable kernel, or pad "
                "first: correlate(np.pad(x, widths, mode='symmetric'), weights, mode='constant') and crop.")


def uniform_filter1d(input, size, axis=-1, output=None, mode="reflect", cval=0.0, origin=0):
    """``scipy.ndimage.uniform_filter1d``, differentiated in ``input`` and ``cval``.

    >>> import numpy as np, mutagrad as mg
    >>> from mutagrad.scipy.ndimage import uniform_filter1d
    >>> mg.grad(lambda x: uniform_filter1d(x, 2)[0])(np.array([1.0, 2.0, 3.0]))  # (x[-1] + x[0]) / 2, reflected
    array([1., 0., 0.])
    """
    if not _traced(input, output, cval):
        return _nd().uniform_filter1d(input, size, axis, output, mode, cval, origin)
    x = _dense(input)
    dt, out = _output(output, x, complex_output=_complex(x))
    return _into(out, bind(UNIFORM_FILTER1D_P, (x, cval),
                           {"size": size, "axis": axis, "mode": mode, "origin": origin, "output": dt}))


def uniform_filter(input, size=3, output=None, mode="reflect", cval=0.0, origin=0, *, axes=None):
    """``scipy.ndimage.uniform_filter`` (a uniform_filter1d pass per axis), differentiated in ``input`` and ``cval``.

    >>> import numpy as np, mutagrad as mg
    >>> from mutagrad.scipy.ndimage import uniform_filter
    >>> mg.grad(lambda x: uniform_filter(x, 3, mode="wrap")[0, 0])(np.ones((3, 3)))
    array([[0.11111111, 0.11111111, 0.11111111],
           [0.11111111, 0.11111111, 0.11111111],
           [0.11111111, 0.11111111, 0.11111111]])
    """
    if not _traced(input, output, cval):
        return _nd().uniform_filter(input, size, output, mode, cval, origin, axes=axes)
    ni = _support()
    x = _dense(input)
    dt, out = _output(output, x, complex_output=_complex(x))
    axes = ni._check_axes(axes, np.ndim(x))
    sizes, origins, modes = (ni._normalize_sequence(v, len(axes)) for v in (size, origin, mode))
    passes = [(axes[i], sizes[i], origins[i], modes[i]) for i in range(len(axes)) if sizes[i] > 1]
    res = x
    for axis, s, o, m in passes:
        res = bind(UNIFORM_FILTER1D_P, (res, cval), {"size": int(s), "axis": axis, "mode": m, "origin": o, "output": dt})
    return _into(out, res if passes else _copy(x, dt))


# -- the Gaussian filters ---------------------------------------------------------------------

def _gaussian_kernel1d(sigma, order, radius):
    """SciPy's Gaussian kernel (scipy.ndimage._filters._gaussian_kernel1d), its operations in its
    order: the same values, differentiated in a traced sigma. For order > 0 the kernel is
    q(x) phi(x), the coefficients of q from order applications of d/dx + p'(x), p = -x²/(2 sigma²)."""
    if order < 0:
        raise ValueError("order must be non-negative")
    exponent_range = np.arange(order + 1)
    sigma2 = sigma * sigma
    x = np.arange(-radius, radius + 1)
    phi_x = np.exp(-0.5 / sigma2 * x ** 2)
    phi_x = phi_x / np.sum(phi_x)
    if order == 0:
        return phi_x
    q = np.zeros(order + 1)
    q[0] = 1
    d = np.diag(exponent_range[1:], 1)  # d @ q = q'
    p = np.diag(np.ones(order) / -sigma2, -1)  # p @ q = q p'
    q_deriv = d + p
    for _ in range(order):
        q = np.dot(q_deriv, q)
    q = np.dot(x[:, None] ** exponent_range, q)
    return q * phi_x


def _gaussian1d(x, sigma, axis, order, dt, mode, cval, truncate, radius):
    sd = float(bottom(sigma))
    lw = int(bottom(truncate) * sd + 0.5)  # (the radius: a step function of sigma, derivative 0)
    if radius is not None:
        lw = radius
    if not isinstance(lw, numbers.Integral) or lw < 0:
        raise ValueError("Radius must be a nonnegative integer.")
    weights = _gaussian_kernel1d(sigma, order, lw)[::-1]
    return _corr1d(x, weights, axis, dt, mode, cval, 0)


def _gaussian(x, sigma, order, dt, mode, cval, truncate=4.0, *, radius=None, axes=None):
    """gaussian_filter into an output of dtype ``dt``: a gaussian_filter1d pass per axis whose sigma > 1e-15."""
    ni = _support()
    axes = ni._check_axes(axes, np.ndim(x))
    n = len(axes)
    orders, modes, radii = (ni._normalize_sequence(v, n) for v in (order, mode, radius))
    sigmas = _sequence(sigma, n)
    passes = [(axes[i], sigmas[i], orders[i], modes[i], radii[i]) for i in range(n) if bottom(sigmas[i]) > 1e-15]
    res = x
    for axis, s, o, m, r in passes:
        res = _gaussian1d(res, s, axis, o, dt, m, cval, truncate, r)
    return res if passes else _copy(x, dt)


def gaussian_filter1d(input, sigma, axis=-1, order=0, output=None, mode="reflect", cval=0.0, truncate=4.0, *,
                      radius=None):
    """``scipy.ndimage.gaussian_filter1d`` (``order`` > 0: a derivative of the Gaussian), differentiated in
    ``input``, ``sigma`` (through SciPy's kernel, computed with NumPy operations) and ``cval``.

    >>> import numpy as np, mutagrad as mg
    >>> from mutagrad.scipy.ndimage import gaussian_filter1d
    >>> x = np.array([0.0, 0.0, 1.0, 0.0, 0.0])
    >>> round(float(mg.grad(lambda s: gaussian_filter1d(x, s, radius=2)[2])(1.0)), 6)  # the peak falls as sigma grows
    -0.372147
    """
    if not _traced(input, sigma, output, cval, truncate):
        return _nd().gaussian_filter1d(input, sigma, axis, order, output, mode, cval, truncate, radius=radius)
    x = _dense(input)
    dt, out = _output(output, x, complex_output=_complex(x))
    return _into(out, _gaussian1d(x, sigma, axis, order, dt, mode, cval, truncate, radius))


def gaussian_filter(input, sigma, order=0, output=None, mode="reflect", cval=0.0, truncate=4.0, *, radius=None,
                    axes=None):
    """``scipy.ndimage.gaussian_filter`` (per-axis ``sigma``, ``order``, ``mode`` and ``radius`` as SciPy takes them),
    differentiated in ``input``, ``sigma`` and ``cval``.

    >>> import numpy as np, mutagrad as mg
    >>> from mutagrad.scipy.ndimage import gaussian_filter
    >>> img = np.zeros((5, 5)); img[2, 2] = 1.0
    >>> float(mg.grad(lambda x: np.sum(gaussian_filter(x, 1.0, mode="wrap")))(img)[0, 0])  # a filter that keeps the sum
    1.0
    """
    if not _traced(input, sigma, output, cval, truncate):
        return _nd().gaussian_filter(input, sigma, order, output, mode, cval, truncate, radius=radius, axes=axes)
    x = _dense(input)
    dt, out = _output(output, x)
    return _into(out, _gaussian(x, sigma, order, dt, mode, cval, truncate, radius=radius, axes=axes))


# -- edge filters, Laplacians, gradient magnitudes --------------------------------------------

_DIFF = np.array([-1, 0, 1])
_SECOND = np.array([1, -2, 1])


def _edge(input, axis, output, mode, cval, smooth):
    """sobel / prewitt: the central difference along ``axis``, then ``smooth`` along every other axis."""
    x = _dense(input)
    axis = _ndim_axis(x, axis)
    dt, out = _output(output, x)
    modes = _support()._normalize_sequence(mode, np.ndim(x))
    res = _corr1d(x, _DIFF, axis, dt, modes[axis], cval, 0)
    for ii in range(np.ndim(x)):
        if ii != axis:
            res = _corr1d(res, smooth, ii, dt, modes[ii], cval, 0)
    return _into(out, res)


def sobel(input, axis=-1, output=None, mode="reflect", cval=0.0):
    """``scipy.ndimage.sobel``, differentiated in ``input`` and ``cval``.

    >>> import numpy as np, mutagrad as mg
    >>> from mutagrad.scipy.ndimage import sobel
    >>> mg.grad(lambda x: sobel(x)[1])(np.array([0.0, 1.0, 4.0]))  # x[2] - x[0]
    array([-1.,  0.,  1.])
    """
    if not _traced(input, output, cval):
        return _nd().sobel(input, axis, output, mode, cval)
    return _edge(input, axis, output, mode, cval, np.array([1, 2, 1]))


def prewitt(input, axis=-1, output=None, mode="reflect", cval=0.0):
    """``scipy.ndimage.prewitt``, differentiated in ``input`` and ``cval``.

    >>> import numpy as np, mutagrad as mg
    >>> from mutagrad.scipy.ndimage import prewitt
    >>> mg.grad(lambda x: prewitt(x, axis=0)[1, 1])(np.zeros((3, 3)))
    array([[-1., -1., -1.],
           [ 0.,  0.,  0.],
           [ 1.,  1.,  1.]])
    """
    if not _traced(input, output, cval):
        return _nd().prewitt(input, axis, output, mode, cval)
    return _edge(input, axis, output, mode, cval, np.array([1, 1, 1]))


def _laplacian(x, derivative2, dt, mode, axes, out):
    """SciPy's generic_laplace: the sum of the second derivatives along ``axes``, into the output
    array ``out`` (or None) in SciPy's order: the first derivative written into it, then each
    other one, computed from the input again, added to it (an output that is the input, or
    overlaps it, gives SciPy's result: the later derivatives read the values written; the
    ndimg tester)."""
    if not axes:
        return _into(out, _copy(x, dt))
    modes = _support()._normalize_sequence(mode, len(axes))
    res = _into(out, derivative2(x, axes[0], modes[0]))
    for ii in range(1, len(axes)):
        t = derivative2(x, axes[ii], modes[ii])
        if out is None:
            res = res + t
        else:
            out += t
    return res


def laplace(input, output=None, mode="reflect", cval=0.0, *, axes=None):
    """``scipy.ndimage.laplace``, differentiated in ``input`` and ``cval``.

    >>> import numpy as np, mutagrad as mg
    >>> from mutagrad.scipy.ndimage import laplace
    >>> mg.grad(lambda x: laplace(x)[1])(np.array([1.0, 2.0, 4.0]))
    array([ 1., -2.,  1.])
    """
    if not _traced(input, output, cval):
        return _nd().laplace(input, output, mode, cval, axes=axes)
    x = _dense(input)
    dt, out = _output(output, x)
    axes = _support()._check_axes(axes, np.ndim(x))
    return _laplacian(x, lambda v, axis, m: _corr1d(v, _SECOND, axis, dt, m, cval, 0), dt, mode, axes, out)


def gaussian_laplace(input, sigma, output=None, mode="reflect", cval=0.0, *, axes=None, **kwargs):
    """``scipy.ndimage.gaussian_laplace`` (keywords such as ``truncate`` and ``radius`` go to gaussian_filter),
    differentiated in ``input``, ``sigma`` and ``cval``.

    >>> import numpy as np, mutagrad as mg
    >>> from mutagrad.scipy.ndimage import gaussian_laplace
    >>> round(float(mg.grad(lambda s: np.sum(gaussian_laplace(np.eye(4), s, mode="wrap")))(1.0)), 6)
    -0.011409
    """
    if not _traced(input, sigma, output, cval, kwargs):
        return _nd().gaussian_laplace(input, sigma, output, mode, cval, axes=axes, **kwargs)
    x = _dense(input)
    ndim = np.ndim(x)
    axes = _support()._check_axes(axes, ndim)
    sigma = _sequence(sigma, len(axes))
    if len(axes) < ndim:  # (sigma 0 along the axes not filtered)
        full = [0] * ndim
        for s, ax in zip(sigma, axes):
            full[ax] = s
        sigma = full
    dt, out = _output(output, x)

    def derivative2(v, axis, m):
        order = [0] * ndim
        order[axis] = 2
        return _gaussian(v, sigma, order, dt, m, cval, **kwargs)

    return _laplacian(x, derivative2, dt, mode, axes, out)


def gaussian_gradient_magnitude(input, sigma, output=None, mode="reflect", cval=0.0, *, axes=None, **kwargs):
    """``scipy.ndimage.gaussian_gradient_magnitude`` (keywords such as ``truncate`` go to gaussian_filter),
    differentiated in ``input``, ``sigma`` and ``cval`` (where the magnitude is not 0).

    >>> import numpy as np, mutagrad as mg
    >>> from mutagrad.scipy.ndimage import gaussian_gradient_magnitude
    >>> g = mg.grad(lambda x: np.sum(gaussian_gradient_magnitude(x, 1.0)))(np.arange(5.0))
    >>> g.shape
    (5,)
    """
    if not _traced(input, sigma, output, cval, kwargs):
        return _nd().gaussian_gradient_magnitude(input, sigma, output, mode, cval, axes=axes, **kwargs)
    x = _dense(input)
    ndim = np.ndim(x)
    dt, out = _output(output, x)
    axes = _support()._check_axes(axes, ndim)
    if not axes:
        return _into(out, _copy(x, dt))
    modes = _support()._normalize_sequence(mode, len(axes))

    def derivative(axis, m):
        order = [0] * ndim
        order[axis] = 1
        return _gaussian(x, sigma, order, dt, m, cval, **kwargs)

    if out is not None:  # (SciPy's order, as _laplacian's: the later derivatives read an aliased input again)
        out[...] = derivative(axes[0], modes[0])
        np.multiply(out, out, out)
        for ii in range(1, len(axes)):
            t = derivative(axes[ii], modes[ii])
            out += t * t
        np.sqrt(out, out, casting="unsafe")
        return out
    res = derivative(axes[0], modes[0])
    res = res * res
    for ii in range(1, len(axes)):
        t = derivative(axes[ii], modes[ii])
        res = res + t * t
    res = np.sqrt(res)
    return res if bottom(res).dtype == dt else res.astype(dt)


# -- interpolation: map_coordinates, shift, zoom, affine_transform (rotate) ------------------------------
#
# SciPy's interpolation of order n (0 to 5) is, for fixed coordinates, linear in (input, cval):
#
#     y[p] = Σ_k Π_d w_n(u_d[p])[k_d] · X[j_0[k_0, p], ..., j_{D-1}[k_{D-1}, p]]
#
# X the coefficients: the input itself (order <= 1 or prefilter=False), else SciPy's
# spline_filter of it (after 12 samples of np.pad 'edge' for 'nearest', of cval for
# 'grid-constant', each axis): per axis a matrix A_d = F_d E_d (F_d: spline_filter1d of the
# identity, E_d: the padding), so X = (⊗ A_d) x + cval V. Along axis d, the coordinate c (+ the
# padding) is first mapped into the axis as SciPy's map_coordinate maps it: cc = s c + K (a
# reflection s = -1 or translation s = 1 by an integer K, s = 0 where it is clamped; 'nearest'
# and 'grid-constant' are not mapped, 'constant' gives cval at every point outside [0, n - 1]
# along some axis); the stencil starts at floor(cc) - n // 2 (odd n) or floor(cc + 1/2) - n // 2
# (even n), its n + 1 indices j folded into the axis by the spline's boundary ('mirror' for
# 'constant' and 'wrap', the mode itself for the others; 'grid-constant': cval outside), and the
# weights are the B-spline's, polynomials of u = cc - floor(cc) (odd n) or cc + 1/2 - floor(cc + 1/2):
#
#     w_n(u)[k] = (1/n!) Σ_{i=0}^{n-k} (-1)^i C(n+1, i) (u + n - k - i)^n.
#
# So ẏ = y(ẋ, ċval) + Σ_d s_d ∂_u y · ċ_d (∂_u y: the same sum with w_n' along axis d), and
# x̄ = (⊗ A_dᵀ) X̄, c̄val = <V, X̄> (+ ȳ at the 'constant' points outside), X̄ = Σ_k scatter-add of
# w ȳ at the stencil (np.bincount), c̄_d = Re(conj(s_d ∂_u y) ȳ). The piece is the one SciPy
# evaluates: at a coordinate on a node (or a fold), the derivative is the one-sided slope of
# the piece that starts at floor(cc) (the node's right side, after the fold). Every rule is
# written with NumPy operations on the traced values, so every order is available.

_INTERPOLATION_MODES = ("constant", "grid-constant", "nearest", "reflect", "grid-mirror", "mirror", "wrap",
                        "grid-wrap")


@functools.lru_cache(maxsize=8)
def _bspline_coefficients(order):
    """The power-series coefficients of w_n(u)[k] (row k) and of their derivatives."""
    n = order
    coef = np.zeros((n + 1, n + 1))
    for k in range(n + 1):
        for i in range(n - k + 1):
            a = n - k - i  # (u + a)^n = Σ_m C(n, m) a^(n-m) u^m
            sign = (-1) ** i * math.comb(n + 1, i)
            for m in range(n + 1):
                coef[k, m] += sign * math.comb(n, m) * a ** (n - m)
    coef /= math.factorial(n)
    deriv = coef[:, 1:] * np.arange(1, n + 1)
    coef.flags.writeable = deriv.flags.writeable = False
    return coef, deriv


def _horner(coef, u):
    """Σ_m coef[m] u^m (coef plain, u traced or plain)."""
    if len(coef) == 0:
        return 0.0 * u
    w = coef[-1]
    for a in coef[-2::-1]:
        w = w * u + a
    return w if len(coef) > 1 else w + 0.0 * u


def _mapped(v, n, mode):
    """SciPy's map_coordinate of the plain coordinates ``v`` on an axis of n samples as (s, K, outside):
    the mapped coordinate is s v + K (K an integer, s = ±1, or 0 where it is a constant), ``outside``
    the coordinates that mode 'constant' maps to -1 (cval)."""
    v = np.asarray(v, dtype=np.float64)
    s, k0 = np.ones(v.shape), np.zeros(v.shape)
    lo, hi = v < 0, v > n - 1
    outside = np.zeros(v.shape, bool)
    if mode == "constant":
        return s, k0, lo | hi
    if mode == "nearest":
        s[lo | hi] = 0.0
        k0[hi] = n - 1
        return s, k0, outside
    if n <= 1:
        s[lo | hi] = 0.0
        return s, k0, outside
    with np.errstate(invalid="ignore", over="ignore"):
        if mode == "mirror":
            p = 2 * n - 2
            q = np.trunc(-v / p)
            back = lo & (p * q + v <= 1 - n)
            flip = lo & ~back
            k0[back], s[flip], k0[flip] = (p * q + p)[back], -1.0, (-p * q)[flip]
            q = np.trunc(v / p)
            flip = hi & (v - p * q >= n)
            k0[flip], s[flip] = (p + p * q)[flip], -1.0
            k0[hi & ~flip] = (-p * q)[hi & ~flip]
        elif mode in ("reflect", "grid-mirror"):
            p = 2 * n
            q = np.where(v < -p, np.trunc(-v / p), 0.0)
            w = p * q + v
            back = lo & (w < -n)
            tiny = lo & ~back & (w > -1e-15)  # (SciPy's guard: a constant just inside)
            flip = lo & ~back & ~tiny
            k0[back] = (p * q + p)[back]
            s[tiny], k0[tiny] = 0.0, 1e-15 - 1
            s[flip], k0[flip] = -1.0, (-p * q - 1)[flip]
            q = np.trunc(v / p)
            flip = hi & (v - p * q >= n)
            s[flip], k0[flip] = -1.0, (p + p * q - 1)[flip]
            k0[hi & ~flip] = (-p * q)[hi & ~flip]
        elif mode == "wrap":
            p = n - 1
            k0[lo] = (p * (np.trunc(-v / p) + 1))[lo]
            k0[hi] = (-p * np.trunc(v / p))[hi]
        elif mode == "grid-wrap":
            k0[lo] = (n * (np.trunc((-1 - v) / n) + 1))[lo]
            k0[hi] = (-n * np.trunc(v / n))[hi]
    return s, k0, outside


class _Stencil:
    """The plain part of an interpolation at plain coordinates ``c`` (D, *points) of an input of shape
    ``shape``: per axis the map (s, K), the piece's origin and the n + 1 indices into the coefficients
    (the extra slot of each axis, index N_d, holds cval in mode 'grid-constant'); ``outside``: the
    points that are cval (mode 'constant')."""

    def __init__(self, c, shape, order, mode, npad):
        self.order, self.npad, self.mode = order, npad, mode
        self.shape = tuple(m + 2 * npad for m in shape)
        self.s, self.k, self.origin, self.idx, self.nodes = [], [], [], [], []
        self.outside = np.zeros(np.shape(c)[1:], bool)
        self._spline_mode = "mirror" if mode in ("constant", "wrap") else mode
        for d, n in enumerate(self.shape):
            v = np.asarray(c[d], dtype=np.float64) + npad
            bad = ~np.isfinite(v)  # (SciPy's cval, or an undefined value: a constant)
            v = np.where(bad, 0.0, v)
            if mode in ("nearest", "grid-constant"):
                s, k0, out = np.ones(v.shape), np.zeros(v.shape), np.zeros(v.shape, bool)
            else:
                s, k0, out = _mapped(v, n, mode)
            cc = np.where(out, 0.0, s * v + k0)
            origin = np.floor(cc + 0.5) if order % 2 == 0 else np.floor(cc)
            node = np.zeros(v.shape, bool)
            if order > 0:
                # on a node the pieces meet in value, and the slopes in a coordinate of order 1 (and higher
                # derivatives) differ: the piece to the right in the coordinate's own direction (a mirrored
                # point's mapped coordinate runs backwards: the one to the left there), and the coordinate's
                # derivatives the mean of both sides' (Stencil.other_side), as np.maximum splits a tie: an
                # integer shift's, a rotation's by 0 (the imgaffine and regress107 testers: one side per sample,
                # mixed by the fold or by the directions the samples move in, was neither one-sided derivative).
                # Where the right is a jump (the last sample in mode 'constant' or 'wrap', next to cval or the
                # first sample) the piece inside, alone.
                at = (origin == (cc + 0.5 if order % 2 == 0 else cc)) & ~out & ~bad
                jump = (v == n - 1) & (mode in ("constant", "wrap"))
                origin = np.where(at & ((s < 0) | jump), origin - 1, origin)
                node = at & ~jump & (s != 0)
            self.s.append(s)
            self.k.append(k0)
            self.origin.append(origin - (0.5 if order % 2 == 0 else 0.0))
            self.idx.append(self._indices(origin, out, n))
            self.nodes.append(node)
            self.outside |= out | bad
        self.ext = tuple(n + 1 for n in self.shape) if mode == "grid-constant" else self.shape

    def _indices(self, origin, out, n):
        """The order + 1 indices into the coefficients of the pieces at ``origin``, folded by the mode."""
        ks = np.arange(self.order + 1).reshape((-1,) + (1,) * np.ndim(origin))
        j = np.where(out, 0, origin.astype(np.intp) - self.order // 2) + ks
        if self.mode == "grid-constant":
            return np.where((j < 0) | (j >= n), n, j)
        fs, fk, _ = _mapped(j, n, self._spline_mode)
        return (fs * j + fk).astype(np.intp)

    def other_side(self, d):
        """This stencil with axis d's points on a node on the piece across it (None: no such point)."""
        node = self.nodes[d]
        if not node.any():
            return None
        half = 0.5 if self.order % 2 == 0 else 0.0
        chosen = self.origin[d] + half  # (the piece taken: the right one in the mapped coordinate, or the left)
        other = copy.copy(self)
        other.origin, other.idx = list(self.origin), list(self.idx)
        step = np.where(self.s[d] < 0, 1.0, -1.0)  # (across the node from the piece taken)
        origin = np.where(node, chosen + step, chosen)
        other.origin[d] = origin - half
        other.idx[d] = self._indices(origin, np.zeros(origin.shape, bool), self.shape[d])
        return other

    def weights(self, c, d, derivative=False):
        """The n + 1 weights along axis d (or their derivatives in c[d]), traced where c is."""
        coef, deriv = _bspline_coefficients(self.order)
        if self.order == 0:
            return [0.0 if derivative else 1.0]
        u = self.s[d] * (c[d] + self.npad) + (self.k[d] - self.origin[d])
        if derivative:
            return [self.s[d] * _horner(deriv[k], u) for k in range(self.order + 1)]
        return [_horner(coef[k], u) for k in range(self.order + 1)]

    def combos(self):
        return itertools.product(range(self.order + 1), repeat=len(self.shape))

    def evaluate(self, xe, ws):
        """Σ_k Π_d ws[d][k_d] xe[j(k)] at every point (0 at the points outside)."""
        total = None
        for k in self.combos():
            term = _weighted(xe[tuple(self.idx[d][k[d]] for d in range(len(self.shape)))], ws, k)
            total = term if total is None else total + term
        return np.where(self.outside, 0.0, total) if self.outside.any() else total

    def scatter(self, g, ws):
        """The transpose of ``evaluate``: Σ_k of each point's w g added at its stencil index, of shape ext."""
        if self.outside.any():
            g = np.where(self.outside, 0.0, g)
        flats, vals = [], []
        for k in self.combos():
            flats.append(np.ravel_multi_index(tuple(self.idx[d][k[d]] for d in range(len(self.shape))),
                                              self.ext).ravel())
            vals.append(np.ravel(_weighted(g, ws, k)))
        flat, val = np.concatenate(flats), np.concatenate(vals)
        size = int(np.prod(self.ext))
        if _complex(val):
            out = np.bincount(flat, np.real(val), size) + 1j * np.bincount(flat, np.imag(val), size)
        else:
            out = np.bincount(flat, val, size)
        return np.reshape(out, self.ext)


def _weighted(term, ws, k):
    """``term`` times the weights ws[d][k[d]] of every axis (an order-0 weight, the number 1.0, left out)."""
    for d, kd in enumerate(k):
        if not (isinstance(ws[d][kd], float) and ws[d][kd] == 1.0):
            term = term * ws[d][kd]
    return term


@functools.lru_cache(maxsize=64)
def _axis_map(n, order, mode, npad):
    """A_d = F E along an axis of n samples: (the matrix, F's row sums) for the prefilter of
    ``order`` in ``mode`` after padding by npad ('edge' for 'nearest', zeros for 'grid-constant')."""
    m = n + 2 * npad
    f = _nd().spline_filter1d(np.eye(m), order, axis=0, output=np.float64, mode=mode)
    e = np.eye(n)
    if npad:
        e = np.pad(e, ((npad, npad), (0, 0)), mode="edge" if mode == "nearest" else "constant")
    a, rows = f @ e, f.sum(axis=1)
    a.flags.writeable = rows.flags.writeable = False
    return a, rows


def _apply_along(a, v, axis):
    """The matrix a applied along ``axis`` of v."""
    return np.moveaxis(np.tensordot(a, v, axes=([1], [axis])), 0, axis)


class _Coefficients:
    """X = (⊗ A_d) x + cval V (with the cval slots of 'grid-constant'), and its transpose."""

    def __init__(self, shape, order, mode, prefilter):
        self.shape, self.mode = tuple(shape), mode
        filtered = prefilter and order > 1
        self.npad = 12 if filtered and mode in ("nearest", "grid-constant") else 0
        self.mats = [_axis_map(n, order, mode, self.npad)[0] for n in shape] if filtered else None
        self.v = None
        if mode == "grid-constant":
            v = np.zeros(tuple(n + 2 * self.npad for n in shape))
            if self.mats is not None:  # (⊗ F 1) - (⊗ A 1): the prefilter's response to the cval padding
                full, inner = np.ones(()), np.ones(())
                for n in shape:
                    a, rows = _axis_map(n, order, mode, self.npad)
                    full, inner = np.multiply.outer(full, rows), np.multiply.outer(inner, a.sum(axis=1))
                v = full - inner
            self.v = np.pad(v, [(0, 1)] * len(shape), constant_values=1.0)

    def __call__(self, x, cval):
        xe = x
        if self.mats is not None:
            for d, a in enumerate(self.mats):
                xe = _apply_along(a, xe, d)
        if self.v is not None:
            xe = np.pad(xe, [(0, 1)] * len(self.shape))
            if isinstance(cval, Tracer) or cval != 0:
                xe = xe + cval * self.v
        return xe

    def transpose(self, xbar):
        """(x̄, c̄val) of X̄ (c̄val None where cval is not read)."""
        cbar = None
        if self.v is not None:
            cbar = np.sum(xbar * self.v)
            xbar = xbar[tuple(slice(0, m - 1) for m in np.shape(xbar))]
        if self.mats is not None:
            for d, a in enumerate(self.mats):
                xbar = _apply_along(a.T, xbar, d)
        return xbar, cbar


def _map_coordinates(x, c, cval, *, order, mode, prefilter, output):
    return _nd().map_coordinates(x, c, output, order, mode, cval, prefilter)


MAP_COORDINATES_P = get_primitive(_map_coordinates, "scipy.ndimage.map_coordinates")


def _inexact(x):
    """x in double precision (complex128 for a complex x), for the rules' sums."""
    dt = np.complex128 if _complex(x) else np.float64
    return x if np.asarray(bottom(x)).dtype == dt else x.astype(dt)


def _plan(x, c, order, mode, prefilter):
    co = _Coefficients(np.shape(x), order, mode, prefilter)
    return co, _Stencil(np.asarray(bottom(c)), np.shape(x), order, mode, co.npad)


def _slopes(co, st, x, c, cval):
    """∂y/∂c_d at every point, for each axis d (0 at the points that are cval; on a node of axis d, the mean of
    the two sides' slopes: _Stencil.__init__)."""
    xe, ws = co(_inexact(x), cval), [st.weights(c, d) for d in range(len(st.shape))]
    slopes = []
    for d in range(len(st.shape)):
        slope = st.evaluate(xe, ws[:d] + [st.weights(c, d, True)] + ws[d + 1:])
        other = st.other_side(d)
        if other is not None:  # (the weights of the other axes are the same on either side: continuous there)
            across = other.evaluate(xe, ws[:d] + [other.weights(c, d, True)] + ws[d + 1:])
            slope = np.where(st.nodes[d], 0.5 * (slope + across), slope)
        slopes.append(slope)
    return slopes


def _interpolation_pullback(x, c, cval, g, order, mode, prefilter):
    """(x̄, c̄, c̄val) of y(x, c, cval) for the cotangent g (Thunks; c̄val ZeroTangent where cval is not read)."""
    co, st = _plan(x, c, order, mode, prefilter)
    g = _inexact(g)
    ws = [st.weights(c, d) for d in range(np.ndim(x))]
    linear = _cached(lambda: co.transpose(st.scatter(g, ws)))

    def xbar():
        xb = linear()[0]
        return xb.astype(bottom(x).dtype) if np.asarray(bottom(x)).dtype.kind in "fc" else xb

    def cbar():
        sl = _slopes(co, st, x, c, cval)
        return np.stack([np.real(np.conj(s) * g) if _complex(s) or _complex(g) else s * g for s in sl])

    def cvalbar():
        cb = linear()[1]
        if st.outside.any():
            out = np.sum(np.where(st.outside, g, 0.0))
            cb = out if cb is None else cb + out
        return cb

    return Thunk(xbar), Thunk(cbar), Thunk(cvalbar) if mode in _CONSTANT else ZeroTangent()


def _interpolation_tangent(x, c, cval, tx, tc, tcv, order, mode, prefilter, output):
    """ẏ of y(x, c, cval) (ZeroTangent where nothing moves)."""
    tcv = tcv if mode in _CONSTANT else ZeroTangent()
    if np.dtype(output).kind not in "fc" or (is_zero(tx) and is_zero(tc) and is_zero(tcv)):
        return ZeroTangent()
    co, st = _plan(x, c, order, mode, prefilter)
    ty = None
    if not (is_zero(tx) and is_zero(tcv)):
        v = _inexact(_zeros_if(tx, x))
        ty = st.evaluate(co(v, 0.0 if is_zero(tcv) else tcv), [st.weights(c, d) for d in range(np.ndim(x))])
        if st.outside.any() and not is_zero(tcv):
            ty = ty + np.where(st.outside, tcv, 0.0)
    if not is_zero(tc):
        for d, s in enumerate(_slopes(co, st, x, c, cval)):
            ty = s * tc[d] if ty is None else ty + s * tc[d]
    return ty if np.asarray(bottom(ty)).dtype == np.dtype(output) else ty.astype(output)


def _map_coordinates_rrule(x, c, cval, *, order, mode, prefilter, output):
    kw = {"order": order, "mode": mode, "prefilter": prefilter, "output": output}
    y = bind(MAP_COORDINATES_P, (x, c, cval), kw)

    def pullback(g):
        if is_zero(g) or np.size(y) == 0 or np.dtype(output).kind not in "fc":
            return ZeroTangent(), ZeroTangent(), ZeroTangent()
        return _interpolation_pullback(x, c, cval, g, order, mode, prefilter)

    return y, pullback


def _map_coordinates_frule(primals, tangents, *, order, mode, prefilter, output):
    (x, c, cval), (tx, tc, tcv) = primals, tangents
    y = bind(MAP_COORDINATES_P, primals, {"order": order, "mode": mode, "prefilter": prefilter, "output": output})
    if np.size(y) == 0:
        return y, ZeroTangent()
    return y, _interpolation_tangent(x, c, cval, tx, tc, tcv, order, mode, prefilter, output)


MAP_COORDINATES_P.rrule, MAP_COORDINATES_P.frule = _map_coordinates_rrule, _map_coordinates_frule


def _coordinates(coordinates):
    if isinstance(coordinates, Tracer):
        return coordinates
    if _traced(coordinates):
        return np.stack([_dense(v) for v in coordinates])
    return np.asarray(coordinates)


def map_coordinates(input, coordinates, output=None, order=3, mode="constant", cval=0.0, prefilter=True):
    """``scipy.ndimage.map_coordinates`` (spline orders 0 to 5, every mode, ``prefilter``), differentiated in
    ``input``, ``coordinates`` and ``cval``: its value is SciPy's call, its derivatives those of the
    piecewise polynomial SciPy evaluates (order 1: the slope of the linear interpolation, order 0: 0;
    on a node, the mean of the two sides' slopes, as np.maximum splits a tie: an integer shift or a rotation
    by 0 gets the mean of its one-sided derivatives; the last sample's in modes 'constant' and 'wrap', next
    to a jump, the slope inside).

    >>> import numpy as np, mutagrad as mg
    >>> from mutagrad.scipy.ndimage import map_coordinates
    >>> im = np.array([[0.0, 1.0], [2.0, 4.0]])
    >>> mg.grad(lambda c: map_coordinates(im, c[:, None], order=1)[0])(np.array([0.25, 0.5]))  # bilinear
    array([2.5 , 1.25])
    """
    if not _traced(input, coordinates, output, cval):
        return _nd().map_coordinates(input, coordinates, output, order, mode, cval, prefilter)
    x, c = _dense(input), _coordinates(coordinates)
    if _complex(c):
        raise TypeError("Complex type not supported")
    if np.ndim(c) < 2 or np.shape(c)[0] != np.ndim(x):
        raise RuntimeError("invalid shape for coordinate array" if np.ndim(c) >= 2
                           else "input and output rank must be > 0")
    dt, out = _output(output, x, complex_output=_complex(x), shape=np.shape(c)[1:])
    _refuse_output_over_input("map_coordinates", output, input, order, prefilter)
    return _into(out, bind(MAP_COORDINATES_P, (x, c, cval),
                           {"order": order, "mode": mode, "prefilter": bool(prefilter), "output": dt}))


# -- shift and zoom: the same interpolation on a grid of coordinates ------------------------------

def _shift(x, sh, cval, *, order, mode, prefilter, output):
    return _nd().shift(x, sh, output, order, mode, cval, prefilter)


def _zoom(x, cval, *, zoom, order, mode, prefilter, grid_mode, output):
    import warnings

    with warnings.catch_warnings():  # (the public function has given SciPy's warning)
        warnings.simplefilter("ignore")
        return _nd().zoom(x, zoom, output, order, mode, cval, prefilter, grid_mode=grid_mode)


SHIFT_P = get_primitive(_shift, "scipy.ndimage.shift")
ZOOM_P = get_primitive(_zoom, "scipy.ndimage.zoom")


def _shift_coordinates(shape, sh):
    """SciPy's shift samples x at k - shift along each axis: the coordinates (D, *shape)."""
    grid = np.indices(shape, dtype=np.float64)
    return grid - _column(sh, len(shape))


def _column(v, rank):
    """The 1-D ``v`` shaped (len(v), 1, ..., 1), to broadcast over a grid of ``rank`` axes."""
    return np.reshape(v, (-1,) + (1,) * rank)


# shift and affine_transform sample at c = m k + o, k the output index (m: a matrix, its diagonal, or none):
# the coordinates' cotangent c̄ (D, *out_shape) and tangent ċ map to and from the parameters' by the grid k.

def _grid_cotangents(cbar, out_shape, mdim):
    """(m̄, ō) of c̄ for c = m k + o at the output indices k: ō = Σ_k c̄[:, k], m̄ = Σ_k c̄[:, k] kᵀ for a
    matrix (mdim 2), m̄_d = Σ_k c̄[d, k] k_d for a diagonal (mdim 1), None without one (mdim 0)."""
    flat = np.reshape(cbar, (np.shape(cbar)[0], -1))
    obar = np.sum(flat, axis=1)
    if mdim == 0:
        return None, obar
    grid = np.reshape(np.indices(out_shape, dtype=np.float64), (len(out_shape), -1))
    if mdim == 1:
        return np.sum(flat * grid[:np.shape(flat)[0]], axis=1), obar
    return flat @ grid.T, obar


def _grid_tangent(tm, to, out_shape, mdim):
    """ċ = ṁ k + ȯ at the output indices k, (D, *out_shape) (ZeroTangent where neither moves)."""
    if is_zero(tm) and is_zero(to):
        return ZeroTangent()
    rank, tc = len(out_shape), None
    if not is_zero(to):
        tc = _column(to, rank) * np.ones((1,) + tuple(out_shape))
    if not is_zero(tm):
        grid = np.indices(out_shape, dtype=np.float64)
        t = _column(tm, rank) * grid[:np.shape(tm)[0]] if mdim == 1 else np.tensordot(tm, grid, axes=1)
        tc = t if tc is None else tc + t
    return tc


def _shift_rrule(x, sh, cval, *, order, mode, prefilter, output):
    kw = {"order": order, "mode": mode, "prefilter": prefilter, "output": output}
    y = bind(SHIFT_P, (x, sh, cval), kw)

    def pullback(g):
        if is_zero(g) or np.size(y) == 0 or np.dtype(output).kind not in "fc":
            return ZeroTangent(), ZeroTangent(), ZeroTangent()
        xb, cb, cvb = _interpolation_pullback(x, _shift_coordinates(np.shape(x), sh), cval, g, order, mode, prefilter)
        return xb, Thunk(lambda: -_grid_cotangents(cb(), np.shape(x), 0)[1]), cvb  # (c = k + o, o = -shift)

    return y, pullback


def _shift_frule(primals, tangents, *, order, mode, prefilter, output):
    (x, sh, cval), (tx, tsh, tcv) = primals, tangents
    y = bind(SHIFT_P, primals, {"order": order, "mode": mode, "prefilter": prefilter, "output": output})
    if np.size(y) == 0:
        return y, ZeroTangent()
    tc = ZeroTangent() if is_zero(tsh) else _grid_tangent(ZeroTangent(), -tsh, np.shape(x), 0)
    c = _shift_coordinates(np.shape(x), sh)
    return y, _interpolation_tangent(x, c, cval, tx, tc, tcv, order, mode, prefilter, output)


SHIFT_P.rrule, SHIFT_P.frule = _shift_rrule, _shift_frule


def _zoom_coordinates(shape, zoom, grid_mode):
    """The coordinates SciPy's zoom samples (D, *output shape), computed as SciPy computes them."""
    out_shape = tuple(round(n * z) for n, z in zip(shape, zoom))
    axes = []
    for n, m in zip(shape, out_shape):
        num, div = (n, m) if grid_mode else (n - 1, m - 1)
        ratio = num / div if div != 0 else 1.0
        k = np.arange(m, dtype=np.float64)
        axes.append((k + 0.5) * ratio - 0.5 if grid_mode else k * ratio)
    return np.stack(np.meshgrid(*axes, indexing="ij")) if axes else np.zeros((0,))


def _zoom_rrule(x, cval, *, zoom, order, mode, prefilter, grid_mode, output):
    kw = {"zoom": zoom, "order": order, "mode": mode, "prefilter": prefilter, "grid_mode": grid_mode, "output": output}
    y = bind(ZOOM_P, (x, cval), kw)

    def pullback(g):
        if is_zero(g) or np.size(y) == 0 or np.dtype(output).kind not in "fc":
            return ZeroTangent(), ZeroTangent()
        xb, _, cvb = _interpolation_pullback(x, _zoom_coordinates(np.shape(x), zoom, grid_mode), cval, g, order,
                                            mode, prefilter)
        return xb, cvb

    return y, pullback


def _zoom_frule(primals, tangents, **kw):
    (x, cval), (tx, tcv) = primals, tangents
    y = bind(ZOOM_P, primals, kw)
    if np.size(y) == 0:
        return y, ZeroTangent()
    c = _zoom_coordinates(np.shape(x), kw["zoom"], kw["grid_mode"])
    return y, _interpolation_tangent(x, c, cval, tx, ZeroTangent(), tcv, kw["order"], kw["mode"], kw["prefilter"],
                                     kw["output"])


ZOOM_P.rrule, ZOOM_P.frule = _zoom_rrule, _zoom_frule


def shift(input, shift, output=None, order=3, mode="constant", cval=0.0, prefilter=True):
    """``scipy.ndimage.shift`` (x sampled at k - shift along each axis), differentiated in ``input``, ``shift``
    and ``cval``: SciPy's value, the derivatives of map_coordinates at those coordinates.

    >>> import numpy as np, mutagrad as mg
    >>> from mutagrad.scipy.ndimage import shift
    >>> float(mg.grad(lambda s: shift(np.array([0.0, 1.0, 4.0]), s, order=1)[2])(0.25))  # -(x[2] - x[1])
    -3.0
    """
    if not _traced(input, shift, output, cval):
        return _nd().shift(input, shift, output, order, mode, cval, prefilter)
    x = _dense(input)
    if np.ndim(x) < 1:
        raise RuntimeError("input and output rank must be > 0")
    sh = _dense(list(_sequence(shift, np.ndim(x))))
    dt, out = _output(output, x, complex_output=_complex(x))
    _refuse_output_over_input("shift", output, input, order, prefilter)
    return _into(out, bind(SHIFT_P, (x, sh, cval),
                           {"order": order, "mode": mode, "prefilter": bool(prefilter), "output": dt}))


def zoom(input, zoom, output=None, order=3, mode="constant", cval=0.0, prefilter=True, *, grid_mode=False):
    """``scipy.ndimage.zoom``, differentiated in ``input`` and ``cval`` (the zoom factors set the output's
    shape, on which the result depends: their derivative is 0).

    >>> import numpy as np, mutagrad as mg
    >>> from mutagrad.scipy.ndimage import zoom
    >>> mg.grad(lambda x: zoom(x, 1.5, order=1)[1])(np.array([0.0, 1.0]))  # x sampled at 1/2
    array([0.5, 0.5])
    """
    zoom = _plain(zoom)  # (the factors' derivative is 0)
    if not _traced(input, output, cval):
        return _nd().zoom(input, zoom, output, order, mode, cval, prefilter, grid_mode=grid_mode)
    x = _dense(input)
    if np.ndim(x) < 1:
        raise RuntimeError("input and output rank must be > 0")
    factors = tuple(float(z) for z in _support()._normalize_sequence(zoom, np.ndim(x)))
    if grid_mode and mode in ("constant", "wrap"):
        import warnings

        warnings.warn(f"It is recommended to use mode = {'grid-' + mode} instead of {mode} when grid_mode is True.",
                      stacklevel=2)
    shape = tuple(round(n * z) for n, z in zip(np.shape(x), factors))
    dt, out = _output(output, x, complex_output=_complex(x), shape=shape)
    return _into(out, bind(ZOOM_P, (x, cval), {"zoom": factors, "order": order, "mode": mode,
                                                "prefilter": bool(prefilter), "grid_mode": bool(grid_mode),
                                                "output": dt}))


# -- affine_transform and rotate: the interpolation at c = m k + o ------------------------------------------
#
# affine_transform samples the input at c = m k + o, k the output index: m a (D, D_out) matrix or the diagonal
# (D,) of one (SciPy's zoom_shift then computes (k + o / m) m), o the offset. Its value is SciPy's call; its
# derivatives are map_coordinates' at those coordinates, with m̄ = Σ_k c̄ kᵀ (the diagonal's Σ_k c̄_d k_d) and
# ō = Σ_k c̄. rotate is written as SciPy writes it, with the matrix [[cos, sin], [-sin, cos]] of the angle (in
# degrees, special.cosdg and sindg) and the offset in_centre - m out_centre traced, the output's shape (a step
# function of the angle) from the plain angle, one affine_transform per plane along the two axes.

def _affine_transform(x, m, o, cval, *, output_shape, order, mode, prefilter, output):
    return _nd().affine_transform(x, m, o, output_shape, output, order, mode, cval, prefilter)


AFFINE_TRANSFORM_P = get_primitive(_affine_transform, "scipy.ndimage.affine_transform")


def _affine_coordinates(m, o, out_shape):
    """The coordinates SciPy's affine_transform samples, (D, *out_shape), in its operations (its bits): a
    matrix's o + k_0 m[:, 0] + k_1 m[:, 1] + ...; a diagonal's (k + o / m) m, there as m k + o plus the plain
    difference (a constant), so that the derivatives are m k + o's."""
    rank = len(out_shape)
    grid = np.indices(out_shape, dtype=np.float64)
    if np.ndim(m) == 2:
        c = _column(o, rank) + _column(m[:, 0], rank) * grid[0]
        for ll in range(1, rank):
            c = c + _column(m[:, ll], rank) * grid[ll]
        return c
    k = grid[:np.shape(m)[0]]  # (an output of higher rank: its other axes repeat the result)
    mp, op = np.asarray(bottom(m)), np.asarray(bottom(o))
    with np.errstate(divide="ignore", invalid="ignore"):
        scipys = (k + _column(op / mp, rank)) * _column(mp, rank)
        if not _traced(m, o):
            return scipys
        c = _column(m, rank) * k + _column(o, rank)
        return c + (scipys - np.asarray(bottom(c)))


def _affine_transform_rrule(x, m, o, cval, *, output_shape, order, mode, prefilter, output):
    kw = {"output_shape": output_shape, "order": order, "mode": mode, "prefilter": prefilter, "output": output}
    y = bind(AFFINE_TRANSFORM_P, (x, m, o, cval), kw)

    def pullback(g):
        if is_zero(g) or np.size(y) == 0 or np.dtype(output).kind not in "fc":
            return ZeroTangent(), ZeroTangent(), ZeroTangent(), ZeroTangent()
        xb, cb, cvb = _interpolation_pullback(x, _affine_coordinates(m, o, output_shape), cval, g, order, mode,
                                              prefilter)
        params = _cached(lambda: _grid_cotangents(cb(), output_shape, np.ndim(m)))
        return xb, Thunk(lambda: params()[0]), Thunk(lambda: params()[1]), cvb

    return y, pullback


def _affine_transform_frule(primals, tangents, *, output_shape, order, mode, prefilter, output):
    (x, m, o, cval), (tx, tm, to, tcv) = primals, tangents
    kw = {"output_shape": output_shape, "order": order, "mode": mode, "prefilter": prefilter, "output": output}
    y = bind(AFFINE_TRANSFORM_P, primals, kw)
    if np.size(y) == 0:
        return y, ZeroTangent()
    tc = _grid_tangent(tm, to, output_shape, np.ndim(m))
    return y, _interpolation_tangent(x, _affine_coordinates(m, o, output_shape), cval, tx, tc, tcv, order, mode,
                                     prefilter, output)


AFFINE_TRANSFORM_P.rrule, AFFINE_TRANSFORM_P.frule = _affine_transform_rrule, _affine_transform_frule


def _float64(v):
    if isinstance(v, Tracer):
        return v if bottom(v).dtype == np.float64 else v.astype(np.float64)
    return np.asarray(v, dtype=np.float64)


def _affine_parameters(matrix, offset, shape, out_rank):
    """SciPy's affine_transform's checks and forms: (the (D, out_rank) matrix or its diagonal (D,), the
    offset (D,)), float64; a homogeneous matrix, (D, D + 1) or (D + 1, D + 1), gives both."""
    ndim = len(shape)
    m = _float64(_dense(matrix))
    if np.ndim(m) not in (1, 2) or np.shape(m)[0] < 1:
        raise RuntimeError("no proper affine matrix provided")
    if np.ndim(m) == 2 and np.shape(m)[1] == ndim + 1 and np.shape(m)[0] in (ndim, ndim + 1):
        if np.shape(m)[0] == ndim + 1:
            exptd = [0] * ndim + [1]
            if not np.all(np.asarray(bottom(m))[ndim] == exptd):
                raise ValueError(f"Expected homogeneous transformation matrix with shape {np.shape(m)} for image "
                                 f"shape {tuple(shape)}, but bottom row was not equal to {exptd}")
        offset, m = m[:ndim, ndim], m[:ndim, :ndim]
    if np.shape(m)[0] != ndim:
        raise RuntimeError("affine matrix has wrong number of rows")
    if np.ndim(m) == 2 and np.shape(m)[1] != out_rank:
        raise RuntimeError("affine matrix has wrong number of columns")
    if np.ndim(m) == 1 and out_rank < ndim:
        from ...errors import UnsupportedInputError, user_line

        raise UnsupportedInputError(
            f"scipy.ndimage.affine_transform at {user_line()}: a diagonal matrix (1-D) with an output of rank "
            f"{out_rank} for an input of rank {ndim}: SciPy's zoom_shift reads the output's shape along every axis "
            "of the input (past its end: its result, if any, is not a function of the input), and mutagrad does "
            "not differentiate it. Give output_shape of the input's rank, or the matrix np.diag(matrix) with as "
            "many columns as output axes.")
    o = _float64(_dense(list(_sequence(offset, ndim))))
    if np.ndim(o) != 1:
        raise RuntimeError("no proper offset provided")
    return m, o


def affine_transform(input, matrix, offset=0.0, output_shape=None, output=None, order=3, mode="constant", cval=0.0,
                     prefilter=True):
    """``scipy.ndimage.affine_transform`` (the input sampled at ``matrix @ k + offset`` for each output index k;
    the matrix (D, D_out), its diagonal (D,), or homogeneous, (D, D + 1) or (D + 1, D + 1), which holds the offset),
    differentiated in ``input``, ``matrix``, ``offset`` and ``cval``: SciPy's value, the derivatives of
    map_coordinates at those coordinates.

    >>> import numpy as np, mutagrad as mg
    >>> from mutagrad.scipy.ndimage import affine_transform
    >>> im = np.array([[0.0, 1.0], [2.0, 4.0]])  # bilinear: 2 c0 + c1 + c0 c1 at c = m @ (0, 1)
    >>> mg.grad(lambda m: affine_transform(im, m, order=1, output_shape=(1, 2))[0, 1])(np.array([[1.0, 0.25],
    ...                                                                                          [0.0, 0.5]]))
    array([[0.  , 2.5 ],
           [0.  , 1.25]])
    """
    if not _traced(input, matrix, offset, output, cval):
        return _nd().affine_transform(input, matrix, offset, output_shape, output, order, mode, cval, prefilter)
    if order < 0 or order > 5:
        raise RuntimeError("spline order not supported")
    x = _dense(input)
    if output_shape is None:
        output_shape = np.shape(output) if isinstance(output, (Tracer, np.ndarray)) else np.shape(x)
    output_shape = tuple(int(n) for n in output_shape)
    if np.ndim(x) < 1 or len(output_shape) < 1:
        raise RuntimeError("input and output rank must be > 0")
    dt, out = _output(output, x, complex_output=_complex(x), shape=output_shape)
    _refuse_output_over_input("affine_transform", output, input, order, prefilter)
    m, o = _affine_parameters(matrix, offset, np.shape(x), len(output_shape))
    return _into(out, bind(AFFINE_TRANSFORM_P, (x, m, o, cval),
                           {"output_shape": output_shape, "order": order, "mode": mode, "prefilter": bool(prefilter),
                            "output": dt}))


def rotate(input, angle, axes=(1, 0), reshape=True, output=None, order=3, mode="constant", cval=0.0, prefilter=True):
    """``scipy.ndimage.rotate`` (by ``angle`` degrees in the plane of ``axes``), differentiated in ``input``,
    ``angle`` and ``cval``: SciPy's affine_transform of each plane, its matrix and offset traced functions of the
    angle (the output's shape, with ``reshape``, is a step function of it: its derivative 0).

    >>> import numpy as np, mutagrad as mg
    >>> from mutagrad.scipy.ndimage import rotate
    >>> im = np.outer(np.arange(3.0), np.ones(3))  # the row index: y[1, 2] = 1 + sin(a°)
    >>> round(float(mg.grad(lambda a: rotate(im, a, reshape=False, order=1)[1, 2])(30.0)), 6)  # cos(30°) π / 180
    0.015115
    """
    if not _traced(input, angle, output, cval):
        return _nd().rotate(input, angle, axes, reshape, output, order, mode, cval, prefilter)
    x = _dense(input)
    ndim = np.ndim(x)
    if ndim < 2:
        raise ValueError("input array should be at least 2D")
    axes = list(axes)
    if len(axes) != 2:
        raise ValueError("axes should contain exactly two values")
    if not all(float(ax).is_integer() for ax in axes):
        raise ValueError("axes should contain only integer values")
    axes = [ax + ndim if ax < 0 else ax for ax in axes]
    if axes[0] < 0 or axes[1] < 0 or axes[0] >= ndim or axes[1] >= ndim:
        raise ValueError("invalid rotation plane specified")
    axes.sort()
    sp, a0 = _special(), bottom(angle)
    c, s = sp.cosdg(angle), sp.sindg(angle)
    rot = _dense([[c, s], [-s, c]]) if _traced(angle) else np.array([[c, s], [-s, c]])
    img_shape = np.asarray(np.shape(x))
    in_plane_shape = img_shape[axes]
    if reshape:  # (SciPy's, on the plain angle)
        iy, ix = in_plane_shape
        out_bounds = np.array([[sp.cosdg(a0), sp.sindg(a0)], [-sp.sindg(a0), sp.cosdg(a0)]]) @ [[0, 0, iy, iy],
                                                                                                [0, ix, 0, ix]]
        out_plane_shape = (np.ptp(out_bounds, axis=1) + 0.5).astype(int)
    else:
        out_plane_shape = img_shape[axes]
    offset = (in_plane_shape - 1) / 2 - rot @ ((out_plane_shape - 1) / 2)
    output_shape = img_shape.copy()
    output_shape[axes] = out_plane_shape
    output_shape, plane = tuple(int(n) for n in output_shape), tuple(int(n) for n in out_plane_shape)
    dt, out = _output(output, x, complex_output=_complex(x), shape=output_shape)
    _refuse_output_over_input("rotate", output, input, order, prefilter)
    if ndim == 2:
        return _into(out, affine_transform(x, rot, offset, plane, dt, order, mode, cval, prefilter))
    planes = np.moveaxis(x, axes, (-2, -1))  # (SciPy's loop over the planes parallel to the axes)
    lead = np.shape(planes)[:-2]
    planes = np.reshape(planes, (-1,) + np.shape(planes)[-2:])
    if np.shape(planes)[0] == 0:
        return _into(out, np.zeros(output_shape, dt))
    res = np.stack([affine_transform(planes[i], rot, offset, plane, dt, order, mode, cval, prefilter)
                    for i in range(np.shape(planes)[0])])
    return _into(out, np.moveaxis(np.reshape(res, lead + plane), (-2, -1), axes))


# -- spline_filter1d, spline_filter -------------------------------------------------------------------------
#
# spline_filter1d is linear: y = F x along the axis, F (n, n) the filter's matrix, spline_filter1d of the
# identity (the prefilter's _axis_map). Its transpose x̄ = Fᵀ ȳ is not the filter: F is the inverse of the
# B-spline's sampling matrix with the mode's boundary, which is not symmetric at the ends ('mirror': a cubic's
# first row samples x[1] twice). spline_filter runs one pass per axis, as SciPy does.

def _spline_filter1d(x, *, order, axis, mode, output):
    return _nd().spline_filter1d(x, order, axis, output, mode)


def _spline_filter1d_transpose(g, x, *, order, axis, mode, output):
    if order > 1:
        from numpy.lib.array_utils import normalize_axis_index

        ax = normalize_axis_index(axis, x.ndim)
        g = _apply_along(_axis_map(x.shape[ax], order, mode, 0)[0].T, g, ax)
    return g.astype(x.dtype) if x.dtype.kind in "fc" and np.asarray(bottom(g)).dtype != x.dtype else g


SPLINE_FILTER1D_P = get_primitive(_spline_filter1d, "scipy.ndimage.spline_filter1d")
deflinear(_spline_filter1d, _spline_filter1d_transpose, impl=lambda x, **kw: bind(SPLINE_FILTER1D_P, (x,), kw))


def spline_filter1d(input, order=3, axis=-1, output=np.float64, mode="mirror"):
    """``scipy.ndimage.spline_filter1d`` (the B-spline coefficients of ``order`` along ``axis``), differentiated in
    ``input``: its reverse mode the filter's transpose, which is not the filter.

    >>> import numpy as np, mutagrad as mg
    >>> from mutagrad.scipy.ndimage import spline_filter1d
    >>> mg.grad(lambda x: np.sum(spline_filter1d(x)))(np.zeros(3))  # F's column sums (its row sums are 1)
    array([1.5, 0. , 1.5])
    """
    if not _traced(input, output):
        return _nd().spline_filter1d(input, order, axis, output, mode)
    if order < 0 or order > 5:
        raise RuntimeError("spline order not supported")
    x = _dense(input)
    dt, out = _output(output, x, complex_output=_complex(x))
    return _into(out, bind(SPLINE_FILTER1D_P, (x,), {"order": order, "axis": axis, "mode": mode, "output": dt}))


def spline_filter(input, order=3, output=np.float64, mode="mirror"):
    """``scipy.ndimage.spline_filter`` (spline_filter1d along each axis), differentiated in ``input``.

    >>> import numpy as np, mutagrad as mg
    >>> from mutagrad.scipy.ndimage import spline_filter
    >>> mg.grad(lambda x: np.sum(spline_filter(x)))(np.zeros((3, 3)))  # the product of the axes' column sums
    array([[2.25, 0.  , 2.25],
           [0.  , 0.  , 0.  ],
           [2.25, 0.  , 2.25]])
    """
    if not _traced(input, output):
        return _nd().spline_filter(input, order, output, mode)
    if order < 2 or order > 5:
        raise RuntimeError("spline order not supported")
    x = _dense(input)
    dt, out = _output(output, x, complex_output=_complex(x))
    res = x
    for axis in range(np.ndim(x)):
        res = bind(SPLINE_FILTER1D_P, (res,), {"order": order, "axis": axis, "mode": mode, "output": dt})
    return _into(out, res if np.ndim(x) else _copy(x, dt))


# -- the Fourier filters: fourier_gaussian, fourier_uniform, fourier_ellipsoid, fourier_shift ------------------
#
# Each multiplies its input (a transform) by a kernel K of the frequency grid, y = x K. Along axis d, of m_d
# samples, the frequency is f = k / L: k = 0, 1, ..., -2, -1 (NumPy's fftfreq(m_d) * m_d) and L = m_d, or,
# along ``axis`` when n >= 0 (the input there is a real FFT of n samples), k = 0, 1, ..., m_d - 1 and L = n
# (SciPy leaves an axis of one sample alone: f = 0 there). With per-axis parameters p_d:
#
#     fourier_gaussian   K = Π_d exp(-2 (π σ_d f_d)²)
#     fourier_uniform    K = Π_d sinc(s_d f_d)          sinc(t) = sin(π t) / (π t); s_d <= 0: 1 at f_d = 0, else 0
#     fourier_shift      K = Π_d exp(-2πi a_d f_d)
#     fourier_ellipsoid  K = φ(r), r = π (Σ_d (s_d f_d)²)^½:   sin(r) / r (1-D), 2 J₁(r) / r (2-D),
#                        3 (sin r - r cos r) / r³ (3-D), φ(0) = 1
#
# K is written with NumPy operations on the traced parameters (plain frequency grids), so every order is
# differentiated in x and in them. Below r = 1/4 the 2-D and 3-D φ are evaluated as their power series in
# q = r² (SciPy's 3-D formula cancels there, sin r - r cos r ~ r³/3: its value, computed on the plain q, is
# kept as a plain correction added to the series, so the value is SciPy's and the derivatives the series'):
#
#     2 J₁(r) / r = Σ_i (-q/4)^i / (i! (i + 1)!),     3 (sin r - r cos r) / r³ = Σ_i (-q)^i 6 (i + 1) / (2i + 3)!

_FOURIER_SMALL_Q = 1.0 / 16  # (r < 1/4: the series, 8 terms, to rounding)
_ELLIPSOID_SERIES = {
    2: tuple((-0.25) ** i / (math.factorial(i) * math.factorial(i + 1)) for i in range(8)),
    3: tuple((-1.0) ** i * 6 * (i + 1) / math.factorial(2 * i + 3) for i in range(8))}


def _fourier_grid(shape, n, axis):
    """(k, L) along each axis: the plain frequency indices and the length dividing them (None: SciPy
    leaves the axis alone)."""
    grid = []
    for d, m in enumerate(shape):
        if m <= 1:
            grid.append(None)
        elif d == axis and n >= 0:
            if n == 0:
                from ...errors import UnsupportedInputError, user_line

                raise UnsupportedInputError(
                    f"scipy.ndimage's Fourier filters at {user_line()}: n=0 along an axis of {m} samples: SciPy "
                    "divides the frequencies by n = 0 (its result holds NaN), and mutagrad does not differentiate "
                    "it. n is the length of the real signal whose rfft the input is along `axis` (n >= 1), or -1 "
                    "for a complex FFT.")
            grid.append((np.arange(m, dtype=np.float64), n))
        else:
            grid.append((np.concatenate([np.arange((m + 1) // 2), np.arange(-(m // 2), 0)]).astype(np.float64), m))
    return grid


def _along_axis(v, d, ndim):
    """The 1-D ``v`` shaped to broadcast along axis d of ndim."""
    return np.reshape(v, [-1 if e == d else 1 for e in range(ndim)])


def _separable(grid, params, factor):
    """Π_d factor(p_d, k_d, L_d), each along its axis (1.0 where no axis is filtered)."""
    kernel = 1.0
    for d, (g, p) in enumerate(zip(grid, params)):
        if g is not None:
            kernel = kernel * _along_axis(factor(p, *g), d, len(grid))
    return kernel


def _gaussian_factor(sigma, k, n):
    t = (np.pi * sigma / n) * k
    return np.exp(-2.0 * (t * t))


def _uniform_factor(size, k, n):
    if not np.pi * float(np.real(bottom(size))) / n > 0:  # (SciPy's: only the zero frequency passes)
        return (k == 0).astype(np.float64)
    return np.sinc(size * (k / n))


def _shift_factor(a, k, n):
    phase = (-2.0 * np.pi * a / n) * k
    return np.cos(phase) + 1j * np.sin(phase)


def _ellipsoid_plain(q, ndim):
    """φ of q = r² > 0, as SciPy writes it (2-D, 3-D): on plain values, SciPy's; on traced ones, differentiated."""
    r = np.sqrt(q)
    if ndim == 2:
        return 2.0 * _special().j1(r) / r
    return 3.0 * (np.sin(r) - r * np.cos(r)) / (r * r * r)


def _special():
    import scipy.special as sp

    return sp


def _ellipsoid_kernel(grid, sizes):
    """φ(r) of the ellipsoid (see above), r² = Σ_d (π s_d f_d)²."""
    ndim = len(grid)
    if ndim == 1:
        return 1.0 if grid[0] is None else np.sinc(sizes[0] * (grid[0][0] / grid[0][1]))
    q = 0.0
    for d, (g, s) in enumerate(zip(grid, sizes)):
        if g is not None:
            t = (np.pi * s / g[1]) * g[0]
            q = q + _along_axis(t * t, d, ndim)
    if np.ndim(q) == 0:
        return 1.0
    qv = np.real(np.asarray(bottom(q)))
    small = qv < _FOURIER_SMALL_Q
    kernel = None
    if not small.all():
        kernel = _ellipsoid_plain(np.where(small, 1.0, q) if small.any() else q, ndim)  # (traced q too)
    if small.any():
        qs = np.where(small, q, 0.0)
        series = _horner(_ELLIPSOID_SERIES[ndim], qs)
        with np.errstate(invalid="ignore", divide="ignore"):
            scipys = np.where(qv > 0, _ellipsoid_plain(np.where(small & (qv > 0), qv, 1.0), ndim), 1.0)
        series = series + np.where(small, scipys - np.asarray(bottom(series)), 0.0)  # (a plain correction)
        kernel = series if kernel is None else np.where(small, series, kernel)
    return kernel


_FOURIER_INPUTS = (np.float32, np.float64, np.complex64, np.complex128)


def _fourier_call(name, x, params, n, axis, output, kernel_of, complex_result):
    """y = x K into SciPy's output: the checks and dtypes of scipy.ndimage._fourier, then the kernel."""
    from scipy.ndimage import _fourier

    x = x if isinstance(x, Tracer) else np.asarray(x)
    xdt = np.asarray(bottom(x)).dtype
    if isinstance(output, (Tracer, np.ndarray)):
        if np.shape(output) != np.shape(x):
            raise RuntimeError("output shape not correct")
        dt, out = np.asarray(bottom(output)).dtype, output
    else:
        resolve = _fourier._get_output_fourier_complex if complex_result else _fourier._get_output_fourier
        dt, out = resolve(output, np.broadcast_to(np.zeros((), xdt), np.shape(x))).dtype, None
    if name == "fourier_ellipsoid" and np.size(x) == 0:
        return _into(out, np.zeros(np.shape(x), dt))
    ax = _ndim_axis(x, axis)
    params = _sequence(params, np.ndim(x))
    allowed = _FOURIER_INPUTS[2:] if complex_result else _FOURIER_INPUTS
    if (xdt.kind not in "biu" and xdt not in _FOURIER_INPUTS) or dt not in allowed or (xdt.kind == "c"
                                                                                        and dt.kind != "c"):
        raise RuntimeError("data type not supported")
    y = x * kernel_of(_fourier_grid(np.shape(x), int(n), ax), params)
    if np.asarray(bottom(y)).dtype != dt:
        y = y.astype(dt)
    return _into(out, y)


def fourier_gaussian(input, sigma, n=-1, axis=-1, output=None):
    """``scipy.ndimage.fourier_gaussian``: the input times Π_d exp(-2 (π σ_d f_d)²), differentiated in
    ``input`` and ``sigma`` (a number or one per axis).

    >>> import numpy as np, mutagrad as mg
    >>> from mutagrad.scipy.ndimage import fourier_gaussian
    >>> X = np.fft.fft(np.array([0.0, 1.0, 0.0, 0.0]))
    >>> round(float(mg.grad(lambda s: np.real(np.fft.ifft(fourier_gaussian(X, s)))[1])(1.0)), 6)  # the peak falls
    -0.377015
    """
    if not _traced(input, sigma, output):
        return _nd().fourier_gaussian(input, sigma, n, axis, output)
    return _fourier_call("fourier_gaussian", _dense(input), sigma, n, axis, output,
                         lambda grid, p: _separable(grid, p, _gaussian_factor), False)


def fourier_uniform(input, size, n=-1, axis=-1, output=None):
    """``scipy.ndimage.fourier_uniform``: the input times Π_d sinc(s_d f_d) (the transform of a box of s_d
    samples; SciPy's: s_d <= 0 keeps only the zero frequency), differentiated in ``input`` and ``size``.

    >>> import numpy as np, mutagrad as mg
    >>> from mutagrad.scipy.ndimage import fourier_uniform
    >>> round(float(mg.grad(lambda s: np.real(fourier_uniform(np.ones(4, complex), s))[1])(2.0)), 6)  # -1/π
    -0.31831
    """
    if not _traced(input, size, output):
        return _nd().fourier_uniform(input, size, n, axis, output)
    return _fourier_call("fourier_uniform", _dense(input), size, n, axis, output,
                         lambda grid, p: _separable(grid, p, _uniform_factor), False)


def fourier_ellipsoid(input, size, n=-1, axis=-1, output=None):
    """``scipy.ndimage.fourier_ellipsoid`` (1-D, 2-D and 3-D inputs, as SciPy's): the input times the transform
    of an ellipsoid of axes ``size``, φ(π (Σ_d (s_d f_d)²)^½) (sin r / r, 2 J₁(r) / r, 3 (sin r - r cos r) / r³),
    differentiated in ``input`` and ``size``.

    >>> import numpy as np, mutagrad as mg
    >>> from mutagrad.scipy.ndimage import fourier_ellipsoid
    >>> g = mg.grad(lambda s: np.sum(np.real(fourier_ellipsoid(np.ones((4, 4), complex), s))))(np.array([2.0, 1.0]))
    >>> g.shape
    (2,)
    """
    if not _traced(input, size, output):
        return _nd().fourier_ellipsoid(input, size, n, axis, output)
    x = _dense(input)
    if np.ndim(x) > 3:
        raise NotImplementedError("Only 1d, 2d and 3d inputs are supported")
    return _fourier_call("fourier_ellipsoid", x, size, n, axis, output, _ellipsoid_kernel, False)


def fourier_shift(input, shift, n=-1, axis=-1, output=None):
    """``scipy.ndimage.fourier_shift``: the input times Π_d exp(-2πi a_d f_d) (a shift by a_d samples; a
    complex result), differentiated in ``input`` and ``shift``.

    >>> import numpy as np, mutagrad as mg
    >>> from mutagrad.scipy.ndimage import fourier_shift
    >>> X = np.fft.fft(np.array([0.0, 1.0, 0.0, 0.0, 0.0]))
    >>> abs(float(mg.grad(lambda a: np.real(np.fft.ifft(fourier_shift(X, a)))[2])(1.0))) < 1e-12  # the peak's top
    True
    """
    if not _traced(input, shift, output):
        return _nd().fourier_shift(input, shift, n, axis, output)
    return _fourier_call("fourier_shift", _dense(input), shift, n, axis, output,
                         lambda grid, p: _separable(grid, p, _shift_factor), True)
