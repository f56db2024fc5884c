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
"""
from __future__ import annotations

import functools
import numbers
from collections.abc import Iterable

import numpy as np

from ...core import Tracer, bind, bottom, get_primitive
from ...registry import conj_if_complex as _cj
from ...tangents import Thunk, ZeroTangent, is_zero
from .linalg import _has_tracer
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
    "convolve", "convolve1d", "gaussian_filter", "gaussian_filter1d", "gaussian_gradient_magnitude",
    "gaussian_laplace", "laplace", "prewitt", "sobel", "uniform_filter"))


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


def _output(output, x, complex_output=False):
    """(the output's dtype, the array to write the result into or None), as SciPy's _get_output
    resolves ``output`` (None, a dtype, or an array: traced too)."""
    if isinstance(output, (Tracer, np.ndarray)):
        if np.shape(output) != np.shape(x):
            raise RuntimeError("output shape not correct")
        dt = bottom(output).dtype
        if complex_output and dt.kind != "c":
            raise RuntimeError("output must have complex dtype")
        return dt, output
    probe = np.empty(0, np.asarray(bottom(x)).dtype)
    return _support()._get_output(output, probe, shape=(0,), complex_output=complex_output).dtype, None


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
