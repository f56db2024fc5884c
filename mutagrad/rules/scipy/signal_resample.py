"""scipy.signal's multirate filtering, resampling, FIR design, short-time Fourier transforms and windows,
written with NumPy operations on traced values, so their derivatives follow and their values are SciPy
1.17's to rounding (its own call when nothing is traced, returned unchanged; its own call on the plain
values first when something is, for its argument checks, errors, warnings and output dtype).

* ``upfirdn`` (in ``h``, ``x`` and ``cval``): the signal extended by the mode's rule (every mode of
  SciPy's: 'constant', 'wrap', 'edge', 'smooth', 'symmetric', 'reflect', 'antisymmetric', 'antireflect',
  'line'), zeros inserted (``up``), a direct full convolution with ``h``, every ``down``-th sample kept.
  The modes that read two samples ('reflect', 'antireflect', 'smooth', 'line') are refused for a signal
  of one sample, where SciPy's own code divides by zero or reads past the signal.
* ``resample_poly`` (in ``x``, a window given as taps, and a ('kaiser', beta) window's traced beta):
  SciPy's filter (``firwin``), padding and background (every ``padtype``) around ``upfirdn``.
* ``resample`` (in ``x``, ``t`` and a window given as samples, a callable's traced samples or a traced
  window parameter): SciPy's FFT path (rfft for real signals in the time domain, fft otherwise).
* ``firwin`` (in ``cutoff``, ``width``, ``fs`` and a traced window parameter) and ``firwin2`` (in
  ``freq`` and ``gain`` through np.interp, whose derivative in a knot is one-sided where a grid
  frequency falls on it, and ``fs``).
* ``stft`` and ``istft`` (in the signal or the transform, ``fs`` and a window given as traced samples or
  by a traced parameter): SciPy's legacy functions (not ShortTimeFFT), every ``boundary``, ``padded``,
  ``detrend`` (False, 'constant', 'linear' or a function), ``return_onesided``, ``scaling``.
* ``get_window`` and the windows ``kaiser``, ``kaiser_bessel_derived``, ``gaussian``,
  ``general_gaussian``, ``tukey``, ``exponential``, ``chebwin``, ``general_hamming`` and
  ``general_cosine`` with traced parameters: their formulas (``np.i0`` for Kaiser's Bessel function),
  differentiated in the parameters. ``taylor`` and ``dpss`` with a traced parameter are refused.
  ``windows`` is a namespace of these, SciPy's scipy.signal.windows for every other name.
"""
from __future__ import annotations

import math
import sys
import types
import warnings

import numpy as np

from ...core import Tracer, bottom
from ..reductions import _with_value
from .linalg import _plain
from .signal import _along, _const_ext, _dense, _even_ext, _odd_ext, _ss, _traced
from .signal_design import _as, _detrended, _dtype, _window_traced

_WINDOWS = ("kaiser", "kaiser_bessel_derived", "gaussian", "general_gaussian", "tukey", "exponential", "chebwin",
            "general_hamming", "general_cosine")
COMPOSITES = tuple(f"scipy.signal.{name}" for name in (
    "upfirdn", "resample_poly", "resample", "firwin", "firwin2", "stft", "istft", "get_window",
    *(f"windows.{w}" for w in _WINDOWS)))


def _refuse(what, why):
    from ...errors import NoRuleError, user_line

    return NoRuleError(f"{what} at {user_line()}: {why}")


def _fft():
    import scipy.fft as sp_fft

    return sp_fft


# -- windows ------------------------------------------------------------------------------

def _win():
    import scipy.signal.windows as w

    return w


def _checked_window(name, M, args, sym, xp, device):
    """SciPy's window on the plain values (its checks, errors and warnings) when some are traced, then
    (M, needs truncation) as SciPy's _len_guards and _extend give them, M None for a short window."""
    if xp is not None or device is not None:
        raise _refuse(f"scipy.signal.windows.{name} with xp or device and a traced parameter",
                      "mutagrad's windows are NumPy arrays; leave xp and device unset")
    getattr(_win(), name)(M, *_plain(args), sym=sym)  # (SciPy's checks and warnings)
    if M <= 1:
        return None, False
    return (M, False) if sym else (M + 1, True)


def _cut(w, trunc):
    return w[:-1] if trunc else w


def kaiser(M, beta, sym=True, *, xp=None, device=None):
    """``scipy.signal.windows.kaiser``: I0(beta sqrt(1 - (2n/(M-1) - 1)²)) / I0(beta), differentiated in ``beta``.

    >>> import numpy as np, mutagrad as mg
    >>> from mutagrad.scipy.signal import windows
    >>> round(float(mg.grad(lambda b: windows.kaiser(3, b)[0])(0.0)), 12)  # 1/I0(b): -I1(b)/I0(b)² = 0 at 0
    0.0
    """
    if not _traced(beta):
        return _win().kaiser(M, beta, sym, xp=xp, device=device)
    M0, (M, trunc) = M, _checked_window("kaiser", M, (beta,), sym, xp, device)
    if M is None:
        return np.ones(M0)
    n = np.arange(0, M, dtype=np.float64)
    alpha = (M - 1) / 2.0
    w = np.i0(beta * np.sqrt(1 - ((n - alpha) / alpha) ** 2.0)) / np.i0(_as(beta, np.float64))
    return _cut(w, trunc)


def kaiser_bessel_derived(M, beta, *, sym=True, xp=None, device=None):
    """``scipy.signal.windows.kaiser_bessel_derived``: the square roots of the Kaiser window's normalised
    cumulative sums, differentiated in ``beta``.

    >>> import numpy as np, mutagrad as mg
    >>> from mutagrad.scipy.signal import windows
    >>> float(mg.grad(lambda b: np.sum(windows.kaiser_bessel_derived(2, b) ** 2))(3.0))  # 2 (1/2): constant
    0.0
    """
    if not _traced(beta):
        return _win().kaiser_bessel_derived(M, beta, sym=sym, xp=xp, device=device)
    _win().kaiser_bessel_derived(M, bottom(beta), sym=sym)
    if M < 1:
        return np.asarray([])
    csum = np.cumsum(kaiser(M // 2 + 1, beta))
    half = np.sqrt(csum[:-1] / csum[-1])
    return np.concatenate((half, np.flip(half)))


def gaussian(M, std, sym=True, *, xp=None, device=None):
    """``scipy.signal.windows.gaussian``: exp(-n² / (2 std²)), differentiated in ``std``.

    >>> import numpy as np, mutagrad as mg
    >>> from mutagrad.scipy.signal import windows
    >>> round(float(mg.grad(lambda s: windows.gaussian(3, s)[0])(1.0)), 12)  # exp(-1/(2s²)): /s³
    0.60653065971
    """
    if not _traced(std):
        return _win().gaussian(M, std, sym, xp=xp, device=device)
    M0, (M, trunc) = M, _checked_window("gaussian", M, (std,), sym, xp, device)
    if M is None:
        return np.ones(M0)
    n = np.arange(0, M, dtype=np.float64) - (M - 1.0) / 2.0
    return _cut(np.exp(-n ** 2 / (2 * std * std)), trunc)


def general_gaussian(M, p, sig, sym=True, *, xp=None, device=None):
    """``scipy.signal.windows.general_gaussian``: exp(-|n/sig|^(2p) / 2), differentiated in ``p`` and ``sig``.

    >>> import numpy as np, mutagrad as mg
    >>> from mutagrad.scipy.signal import windows
    >>> round(float(mg.grad(lambda p: windows.general_gaussian(3, p, 1.0)[0])(1.0)), 12)  # |n| = 1: constant
    0.0
    """
    if not _traced(p, sig):
        return _win().general_gaussian(M, p, sig, sym, xp=xp, device=device)
    M0, (M, trunc) = M, _checked_window("general_gaussian", M, (p, sig), sym, xp, device)
    if M is None:
        return np.ones(M0)
    n = np.arange(0, M, dtype=np.float64) - (M - 1.0) / 2.0
    return _cut(np.exp(-0.5 * np.abs(n / sig) ** (2 * p)), trunc)


def tukey(M, alpha=0.5, sym=True, *, xp=None, device=None):
    """``scipy.signal.windows.tukey``: cosine tapers of a fraction ``alpha`` of the window, differentiated in
    ``alpha`` (a constant one for alpha <= 0 or >= 1, SciPy's rectangular and Hann windows).

    >>> import numpy as np, mutagrad as mg
    >>> from mutagrad.scipy.signal import windows
    >>> g = float(mg.grad(lambda a: windows.tukey(5, a)[1])(0.8))  # (1 + cos(pi (-1 + 0.5/a))) / 2
    >>> bool(np.isclose(g, np.pi / 4 / 0.8 ** 2 * np.sin(np.pi * (-1 + 0.5 / 0.8))))
    True
    """
    if not _traced(alpha):
        return _win().tukey(M, alpha, sym, xp=xp, device=device)
    M0, (M, trunc) = M, _checked_window("tukey", M, (alpha,), sym, xp, device)
    if M is None or bottom(alpha) <= 0 or bottom(alpha) >= 1.0:  # (constant in alpha)
        return _win().tukey(M0, bottom(alpha), sym)
    n = np.arange(0, M, dtype=np.float64)
    width = math.floor(bottom(alpha) * (M - 1) / 2.0)
    n1, n2, n3 = n[0:width + 1], n[width + 1:M - width - 1], n[M - width - 1:]
    w1 = 0.5 * (1 + np.cos(np.pi * (-1 + 2.0 * n1 / alpha / (M - 1))))
    w3 = 0.5 * (1 + np.cos(np.pi * (-2.0 / alpha + 1 + 2.0 * n3 / alpha / (M - 1))))
    return _cut(np.concatenate((w1, np.ones(n2.shape), w3)), trunc)


def exponential(M, center=None, tau=1.0, sym=True, *, xp=None, device=None):
    """``scipy.signal.windows.exponential``: exp(-|n - center| / tau), differentiated in ``center`` and ``tau``.

    >>> import numpy as np, mutagrad as mg
    >>> from mutagrad.scipy.signal import windows
    >>> round(float(mg.grad(lambda t: windows.exponential(3, tau=t)[0])(1.0)), 12)  # exp(-1/t): exp(-1)/t²
    0.367879441171
    """
    if not _traced(center, tau):
        return _win().exponential(M, center, tau, sym, xp=xp, device=device)
    M0, (M, trunc) = M, _checked_window("exponential", M, (center, tau), sym, xp, device)
    if M is None:
        return np.ones(M0)
    if center is None:
        center = (M - 1) / 2
    n = np.arange(0, M, dtype=np.float64)
    return _cut(np.exp(-np.abs(n - center) / tau), trunc)


def chebwin(M, at, sym=True, *, xp=None, device=None):
    """``scipy.signal.windows.chebwin``: the Dolph-Chebyshev window (SciPy's DFT of the Chebyshev polynomial's
    samples), differentiated in the attenuation ``at``.

    >>> import numpy as np, mutagrad as mg
    >>> from mutagrad.scipy.signal import windows
    >>> bool(mg.grad(lambda a: windows.chebwin(7, a)[0])(60.0) < 0)  # more attenuation, smaller ends
    True
    """
    if not _traced(at):
        return _win().chebwin(M, at, sym, xp=xp, device=device)
    M0, (M, trunc) = M, _checked_window("chebwin", M, (at,), sym, xp, device)
    if M is None:
        return np.ones(M0)
    order = M - 1.0
    beta = np.cosh(1.0 / order * np.arccosh(_as(10 ** (np.abs(at) / 20.), np.float64)))
    k = np.arange(M, dtype=np.float64)
    x = beta * np.cos(np.pi * k / M)
    px = np.asarray(bottom(x))
    hi, lo = px > 1, px < -1
    mid = ~(hi | lo)
    # (each branch of safe arguments: the others' derivatives are finite, and multiplied by zero)
    p = np.where(hi, np.cosh(order * np.arccosh(np.where(hi, x, 2.0))),
                 np.where(lo, (2 * (M % 2) - 1) * np.cosh(order * np.arccosh(np.where(lo, -x, 2.0))),
                          np.cos(order * np.arccos(np.where(mid, x, 0.0)))))
    if M % 2:
        w = np.real(_fft().fft(p))
        n = (M + 1) // 2
        w = w[:n]
        w = np.concatenate((np.flip(w[1:n]), w))
    else:
        p = p * np.exp(1j * np.pi / M * np.arange(M, dtype=np.float64))
        w = np.real(_fft().fft(p))
        n = M // 2 + 1
        w = np.concatenate((np.flip(w[1:n]), w[1:n]))
    return _cut(w / np.max(w), trunc)


def general_cosine(M, a, sym=True):
    """``scipy.signal.windows.general_cosine``: Σ_k a[k] cos(k f), f from -pi to pi, differentiated in ``a``.

    >>> import numpy as np, mutagrad as mg
    >>> from mutagrad.scipy.signal import windows
    >>> mg.grad(lambda a: windows.general_cosine(3, a)[1])(np.array([0.5, 0.5]))  # f = 0: Σ a[k]
    array([1., 1.])
    """
    if not _traced(a):
        return _win().general_cosine(M, a, sym)
    a = _dense(a)
    _win().general_cosine(M, np.asarray(bottom(a)), sym)
    if M <= 1:
        return np.ones(M)
    M, trunc = (M, False) if sym else (M + 1, True)
    fac = np.linspace(-np.pi, np.pi, M, dtype=np.float64)
    w = np.zeros(M)
    for k in range(np.shape(a)[0]):
        w = w + a[k] * np.cos(k * fac)
    return _cut(w, trunc)


def general_hamming(M, alpha, sym=True, *, xp=None, device=None):
    """``scipy.signal.windows.general_hamming``: alpha - (1 - alpha) cos(2 pi n / (M - 1)), differentiated in
    ``alpha``.

    >>> import numpy as np, mutagrad as mg
    >>> from mutagrad.scipy.signal import windows
    >>> float(mg.grad(lambda a: windows.general_hamming(3, a)[0])(0.54))  # 2 alpha - 1
    2.0
    """
    if not _traced(alpha):
        return _win().general_hamming(M, alpha, sym, xp=xp, device=device)
    _checked_window("general_hamming", M, (alpha,), sym, xp, device)
    from ...numpy import array

    return general_cosine(M, _as(array([alpha, 1. - alpha]), np.float64), sym)


_OURS = {"kaiser": kaiser, "kaiser_bessel_derived": kaiser_bessel_derived, "gaussian": gaussian,
         "general_gaussian": general_gaussian, "tukey": tukey, "exponential": exponential, "chebwin": chebwin,
         "general_hamming": general_hamming, "general_cosine": general_cosine}


def get_window(window, Nx, fftbins=True, *, xp=None, device=None):
    """``scipy.signal.get_window``, differentiated in a window's parameters: ('kaiser', beta), a number (a
    Kaiser beta), ('gaussian', std), ('general_gaussian', p, sig), ('tukey', alpha), ('exponential', center,
    tau), ('chebwin', at), ('general_hamming', alpha), ('general_cosine', a), ('kaiser_bessel_derived', beta).

    >>> import numpy as np, mutagrad as mg
    >>> from mutagrad.scipy.signal import get_window
    >>> round(float(mg.grad(lambda s: get_window(("gaussian", s), 4)[0])(1.0)), 12)  # exp(-2/s²): 4 exp(-2)/s³
    0.541341132946
    """
    if not _traced(window):
        return _ss().get_window(window, Nx, fftbins, xp=xp, device=device)
    if xp is not None or device is not None:
        raise _refuse("scipy.signal.get_window with xp or device and a traced window parameter",
                      "mutagrad's windows are NumPy arrays; leave xp and device unset")
    if not isinstance(window, tuple):  # (a traced number: a Kaiser window's beta)
        if isinstance(window, Tracer) and np.ndim(window) != 0:
            raise ValueError(f"Parameter window={bottom(window)!r} must be a tuple, a string or a float!")
        _ss().get_window(bottom(window), Nx, fftbins)  # (SciPy's checks of Nx and fftbins)
        return kaiser(Nx, window, not fftbins)
    with warnings.catch_warnings():  # (SciPy's errors, and its warnings once: below, not again)
        _ss().get_window(_plain(window), Nx, fftbins)
    from scipy.signal.windows._windows import _WIN_FUNCS

    sym, name = not fftbins, window[0]
    if name.endswith("_symmetric"):
        sym, name = True, name[:-10]
    elif name.endswith("_periodic"):
        sym, name = False, name[:-9]
    func = _WIN_FUNCS[name][0]
    ours = _OURS.get(func.__name__)
    if ours is None:
        raise _refuse(f"scipy.signal.get_window({window[0]!r}) with a traced parameter",
                      f"mutagrad does not differentiate the {func.__name__} window in its parameters; pass "
                      "mg.stop_gradient of them, or the window's samples written with NumPy operations")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (SciPy's, given above)
        return ours(Nx, *window[1:], sym=sym)


class _WindowsModule(types.ModuleType):
    """mutagrad.scipy.signal.windows: the windows above, SciPy's scipy.signal.windows for every other name."""

    def __getattr__(self, name):
        return getattr(_win(), name)

    def __dir__(self):
        return sorted(set(dir(_win())) | set(self.__dict__))


windows = _WindowsModule("mutagrad.scipy.signal.windows", _WindowsModule.__doc__)
for _f in (*_OURS.values(), get_window):
    setattr(windows, _f.__name__, _f)
sys.modules.setdefault("mutagrad.scipy.signal.windows", windows)


# -- upfirdn ------------------------------------------------------------------------------

_TWO_SAMPLE_MODES = ("reflect", "antireflect", "smooth", "line")


def _out_len(len_h, n, up, down):
    """SciPy's _output_len: ceil((len_h + (n - 1) up) / down)."""
    return -(-(len_h + (n - 1) * up) // down)


def _extension(x, j, mode, cval, dtype):
    """The samples at the (out of range) indices j of x's last axis, by ``mode``'s rule."""
    n = np.shape(x)[-1]
    if j.size == 0:
        return x[..., :0]
    if mode == "constant":
        return np.zeros(np.shape(x)[:-1] + (j.size,), dtype) + _as(_dense(cval), dtype)
    if mode == "wrap":
        return np.take(x, j % n, axis=-1)
    if mode == "edge":
        return np.take(x, np.clip(j, 0, n - 1), axis=-1)
    if mode == "symmetric":
        r = j % (2 * n)
        return np.take(x, np.where(r < n, r, 2 * n - 1 - r), axis=-1)
    if mode == "reflect":
        r = j % (2 * n - 2)
        return np.take(x, np.where(r < n, r, 2 * n - 2 - r), axis=-1)
    if mode == "antisymmetric":
        q, r = np.divmod(j, n)
        even = q % 2 == 0
        return np.take(x, np.where(even, r, n - 1 - r), axis=-1) * np.where(even, 1.0, -1.0).astype(dtype)
    x0, xl = x[..., :1], x[..., -1:]
    if mode == "antireflect":  # (the odd reflection repeated: each block of n - 1 shifted by x[-1] - x[0])
        q, r = np.divmod(j, n - 1)
        even = q % 2 == 0
        sign = np.where(even, 1.0, -1.0).astype(dtype)
        return (np.take(x, np.where(even, r, n - 1 - r), axis=-1) * sign + np.where(even, 0.0, 1.0) * (x0 + xl)
                + q * (xl - x0))
    if mode == "line":
        slope = (xl - x0) / (n - 1)
        return np.where(j < 0, x0 + j * slope, xl + (j - n + 1) * slope)
    # 'smooth': the slope of the last two samples at each end
    return np.where(j < 0, x0 + j * (x[..., 1:2] - x0), xl + (j - n + 1) * (xl - x[..., -2:-1]))


def _upfirdn(h, x, up, down, axis, mode, cval, dtype):
    """SciPy's upfirdn of traced values (arguments checked): along the last axis after moving ``axis``."""
    from .signal import convolve

    h, x = _as(h, dtype), _as(x, dtype)
    ax = axis % np.ndim(x)
    xm = np.moveaxis(x, ax, -1)
    n, L = np.shape(xm)[-1], np.shape(h)[0]
    out_len = _out_len(L, n, up, down)
    nl = -(-(L - 1) // up)
    nr = max(0, ((out_len - 1) * down) // up - (n - 1))
    ext = np.concatenate((_extension(xm, np.arange(-nl, 0), mode, cval, dtype), xm,
                          _extension(xm, np.arange(n, n + nr), mode, cval, dtype)), axis=-1)
    if up > 1:  # (zeros inserted after each sample)
        shape = np.shape(ext)
        ext = np.reshape(np.concatenate((ext[..., None], np.zeros(shape + (up - 1,), dtype)), axis=-1),
                         shape[:-1] + (shape[-1] * up,))
    full = convolve(ext, np.reshape(h, (1,) * (np.ndim(ext) - 1) + (L,)), mode="full", method="direct")
    start = nl * up
    y = full[..., start:start + (out_len - 1) * down + 1:down]
    return np.moveaxis(y, -1, ax)


def upfirdn(h, x, up=1, down=1, axis=-1, mode="constant", cval=0):
    """``scipy.signal.upfirdn``: upsample, FIR filter, downsample, differentiated in ``h``, ``x`` and ``cval``.

    >>> import numpy as np, mutagrad as mg
    >>> from mutagrad.scipy.signal import upfirdn
    >>> mg.grad(lambda x: upfirdn([0.5, 1.0, 0.5], x, 2)[2])(np.array([1.0, 2.0, 3.0]))  # (x0 + x1) / 2
    array([0.5, 0.5, 0. ])
    """
    if not _traced(h, x, cval):
        return _ss().upfirdn(h, x, up, down, axis, mode, cval)
    h, x = _dense(h), _dense(x)
    m = mode.lower() if isinstance(mode, str) else mode
    if m in _TWO_SAMPLE_MODES and np.ndim(x) > 0 and np.shape(x)[axis] < 2:
        raise _refuse(f"scipy.signal.upfirdn(mode={mode!r}) of a signal of one sample",
                      "the mode extends the signal from two samples; SciPy's own code divides by zero or reads "
                      "past the signal here. Use mode='edge' or 'constant'")
    plain = _ss().upfirdn(_plain(h), _plain(x), up, down, axis, mode, _plain(cval))  # (SciPy's checks, dtype)
    if plain.size == 0:
        return plain
    # (SciPy's bits: its C loop sums in another order, 1 ulp apart, and a function writing the result into its
    # argument left it otherwise than a plain call: newrules)
    return _with_value(_as(_upfirdn(h, x, int(up), int(down), axis, m, cval, plain.dtype), plain.dtype),
                       lambda: plain)


# -- resample_poly, resample ----------------------------------------------------------------

def resample_poly(x, up, down, axis=0, window=("kaiser", 5.0), padtype="constant", cval=None):
    """``scipy.signal.resample_poly``, differentiated in ``x``, ``cval``, a window given as taps and a traced
    window parameter.

    >>> import numpy as np, mutagrad as mg
    >>> from mutagrad.scipy.signal import resample_poly
    >>> mg.grad(lambda x: resample_poly(x, 2, 1, window=[0.5, 1.0, 0.5])[1])(np.arange(3.0))  # (x0 + x1) / 2, times 2
    array([1., 1., 0.])
    """
    if not _traced(x, window, cval):
        return _ss().resample_poly(x, up, down, axis, window, padtype, cval)
    x = _dense(x)
    win_taps = isinstance(window, (list, np.ndarray, Tracer))
    plain_window = np.array(_plain(window)) if win_taps else _plain(window)
    plain = _ss().resample_poly(_plain(x), up, down, axis, plain_window, padtype, _plain(cval))
    up, down = int(up), int(down)
    g = math.gcd(up, down)
    up, down = up // g, down // g
    if up == down == 1:
        return x * 1 if isinstance(x, Tracer) else plain
    n_in = np.shape(x)[axis]
    n_out = n_in * up
    n_out = n_out // down + bool(n_out % down)
    if win_taps:
        h = _dense(window)
        half_len = (np.size(h) - 1) // 2
    else:
        max_rate = max(up, down)
        half_len = 10 * max_rate
        h = firwin(2 * half_len + 1, 1. / max_rate, window=window)
        if _dtype(x).kind in "fc":
            h = _as(h, _dtype(x))
    h = h * up
    n_pre_pad = down - half_len % down
    n_post_pad = 0
    n_pre_remove = (half_len + n_pre_pad) // down
    while _out_len(np.shape(h)[0] + n_pre_pad + n_post_pad, n_in, up, down) < n_out + n_pre_remove:
        n_post_pad += 1
    hd = _dtype(h)
    h = np.concatenate((np.zeros(n_pre_pad, hd), h, np.zeros(n_post_pad, hd)))
    funcs = {"mean": np.mean, "median": np.median, "minimum": np.min, "maximum": np.max}
    mode, c = "constant", 0
    if padtype in funcs:
        background = funcs[padtype](x, axis=axis, keepdims=True)
        x = x - background
    else:
        mode = padtype
        if padtype == "constant":
            c = 0 if cval is None else cval
    y = _upfirdn(h, x, up, down, axis, mode, c, np.result_type(hd, _dtype(x), np.float32))
    y = _along(y, n_pre_remove, n_pre_remove + n_out, axis)
    if padtype in funcs:
        y = y + background
    return _with_value(_as(y, plain.dtype), lambda: plain)  # (SciPy's bits, as upfirdn's)


def resample(x, num, t=None, axis=0, window=None, domain="time"):
    """``scipy.signal.resample`` (Fourier method), differentiated in ``x``, ``t`` and the window (samples, a
    callable's traced samples or a traced window parameter).

    >>> import numpy as np, mutagrad as mg
    >>> from mutagrad.scipy.signal import resample
    >>> mg.grad(lambda x: resample(x, 8)[0])(np.ones(4))  # the even samples are the input's
    array([1., 0., 0., 0.])
    """
    sp_fft = _fft()
    W = None
    if callable(window):  # (called once, as SciPy calls it: its samples may be traced)
        n_x = np.shape(x)[axis] if np.ndim(x) > 1 else np.shape(x)[-1]
        W = window(sp_fft.fftfreq(n_x))
        window = W if _traced(W) else (lambda f, _w=W: _w)
    if not _traced(x, t, window):
        return _ss().resample(x, num, t, axis, window, domain)
    x = _dense(x)
    plain_window = np.array(_plain(window)) if isinstance(window, (Tracer, list)) else _plain(window)
    plain = _ss().resample(_plain(x), num, _plain(t), axis, plain_window, domain)
    x_r = plain[0] if t is not None else plain
    if _traced(x, window):
        x_r = _resampled(x, num, axis, window, domain, x_r.dtype)
    if t is not None:
        t = _dense(t)
        s_fac = np.shape(x)[axis if np.ndim(x) > 1 else -1] / num
        return x_r, t[0] + (t[1] - t[0]) * s_fac * np.arange(num)
    return x_r


def _resampled(x, num, axis, window, domain, dtype):
    sp_fft = _fft()
    if np.ndim(x) > 1:
        x = np.moveaxis(x, axis, -1)
    n_x = np.shape(x)[-1]
    s_fac = n_x / num
    m = min(num, n_x)
    m2 = m // 2 + 1
    if window is None:
        W = None
    elif isinstance(window, Tracer) or hasattr(window, "shape"):
        W = window
    elif callable(window):  # (a callable's plain samples, in the FFT's order as SciPy takes them: newrules)
        W = np.asarray(window(sp_fft.fftfreq(n_x)))
    else:
        W = _as(sp_fft.fftshift(get_window(window, n_x)), np.float64)
    if domain == "time" and _dtype(x).kind != "c":
        X = sp_fft.rfft(x)
        if W is not None:  # (SciPy's folded window: (W[l] + W[-l]) / 2 for l > 0)
            n_X = np.shape(X)[-1]
            W = np.concatenate((W[:1], (W[1:n_X] + np.flip(W[-n_X + 1:])) / 2)) if n_X > 1 else W[:1]
            X = X * W[:n_X]
        X = X[..., :m2]
        if m % 2 == 0 and num != n_x:
            f = np.ones(m2)
            f[m // 2] = 2 if num < n_x else 0.5
            X = X * f
        x_r = sp_fft.irfft(X / s_fac, n=num)
    else:
        X = sp_fft.fft(x) if domain == "time" else x
        if W is not None:
            X = X * W
        Y = np.zeros_like(X, shape=np.shape(X)[:-1] + (num,))
        Y[..., :m2] = X[..., :m2]
        if m2 < m:
            Y[..., m2 - m:] = X[..., m2 - m:]
        if m % 2 == 0:
            if num < n_x:
                Y[..., -m // 2] += X[..., -m // 2]
            elif n_x < num:
                Y[..., m // 2] /= 2
                Y[..., num - m // 2] = Y[..., m // 2]
        x_r = sp_fft.ifft(Y / s_fac, n=num)
    if np.ndim(x_r) > 1:
        x_r = np.moveaxis(x_r, -1, axis)
    return _as(x_r, dtype)


# -- FIR design ---------------------------------------------------------------------------

def firwin(numtaps, cutoff, *, width=None, window="hamming", pass_zero=True, scale=True, fs=None):
    """``scipy.signal.firwin`` (the window method), differentiated in ``cutoff``, ``width``, ``fs`` and a
    traced window parameter.

    >>> import numpy as np, mutagrad as mg
    >>> from mutagrad.scipy.signal import firwin
    >>> g = mg.grad(lambda c: firwin(5, c, window="boxcar", scale=False)[2])(0.3)  # c sinc(0): 1
    >>> float(g)
    1.0
    """
    if not _traced(cutoff, width, window, fs):
        return _ss().firwin(numtaps, cutoff, width=width, window=window, pass_zero=pass_zero, scale=scale, fs=fs)
    plain = _ss().firwin(numtaps, _plain(cutoff), width=_plain(width), window=_plain(window), pass_zero=pass_zero,
                         scale=scale, fs=_plain(fs))
    fs = 2 if fs is None else fs
    nyq = 0.5 * fs
    cutoff = np.atleast_1d(_as(_dense(cutoff), np.float64)) / nyq
    if width is not None:
        atten = 2.285 * (numtaps - 1) * np.pi * (width / nyq) + 7.95  # (SciPy's kaiser_atten, kaiser_beta)
        a = bottom(atten)
        beta = 0.1102 * (atten - 8.7) if a > 50 else (0.5842 * (atten - 21) ** 0.4 + 0.07886 * (atten - 21)
                                                      if a > 21 else 0.0)
        window = ("kaiser", beta)
    if pass_zero in ("bandstop", "lowpass"):
        pass_zero = True
    elif pass_zero in ("bandpass", "highpass"):
        pass_zero = False
    pass_nyquist = (np.size(cutoff) % 2 == 0) == pass_zero
    cutoff = np.concatenate((np.zeros(int(pass_zero)), cutoff, np.ones(int(pass_nyquist))))
    bands = np.reshape(cutoff, (-1, 2))
    m = np.arange(0, numtaps, dtype=np.float64) - 0.5 * (numtaps - 1)
    h = 0
    for j in range(np.shape(bands)[0]):
        left, right = bands[j, 0], bands[j, 1]
        h = h + right * np.sinc(right * m)
        h = h - left * np.sinc(left * m)
    h = h * get_window(window, numtaps, fftbins=False)
    if scale:
        left, right = bands[0, 0], bands[0, 1]
        if bottom(left) == 0:
            f = 0.0
        elif bottom(right) == 1:
            f = 1.0
        else:
            f = 0.5 * (left + right)
        h = h / np.sum(h * np.cos(np.pi * m * f))
    return _as(h, plain.dtype)


def firwin2(numtaps, freq, gain, *, nfreqs=None, window="hamming", antisymmetric=False, fs=None):
    """``scipy.signal.firwin2`` (frequency sampling), differentiated in ``gain``, ``freq`` (np.interp's
    derivative: one-sided in a frequency that falls on SciPy's grid), ``fs`` and a traced window parameter.

    >>> import numpy as np, mutagrad as mg
    >>> from mutagrad.scipy.signal import firwin2
    >>> g = mg.grad(lambda g: np.sum(firwin2(5, [0.0, 0.5, 1.0], g, window=None)))(np.ones(3))
    >>> bool(np.all(g > 0)) and bool(np.isclose(np.sum(g), 1.0))  # (linear in the gains; all ones: h = δ)
    True
    """
    if not _traced(freq, gain, window, fs):
        return _ss().firwin2(numtaps, freq, gain, nfreqs=nfreqs, window=window, antisymmetric=antisymmetric, fs=fs)
    plain = _ss().firwin2(numtaps, _plain(freq), _plain(gain), nfreqs=nfreqs, window=_plain(window),
                          antisymmetric=antisymmetric, fs=_plain(fs))
    freq, gain = _dense(freq), _dense(gain)
    fs = 2 if fs is None else fs
    nyq = 0.5 * fs
    ftype = (4 if numtaps % 2 == 0 else 3) if antisymmetric else (2 if numtaps % 2 == 0 else 1)
    if nfreqs is None:
        nfreqs = 1 + 2 ** math.ceil(math.log(numtaps, 2))  # noqa: FURB163 (SciPy's rounding)
    pf = np.array(bottom(freq), dtype=np.float64)
    if np.any(np.diff(pf) == 0):  # (SciPy's tweak of repeated frequencies, on the plain values)
        tweaked = pf.copy()
        eps = np.finfo(np.float64).eps * float(bottom(nyq))
        for k in range(tweaked.shape[0] - 1):
            if tweaked[k] == tweaked[k + 1]:
                tweaked[k] = tweaked[k] - eps
                tweaked[k + 1] = tweaked[k + 1] + eps
        freq = freq + (tweaked - pf)
    grid = np.linspace(0.0, 1.0, nfreqs) * nyq if isinstance(nyq, Tracer) else np.linspace(0.0, nyq, nfreqs)
    fx = np.interp(grid, freq, gain)
    shift = np.exp(-(numtaps - 1) / 2. * 1j * np.pi * grid / nyq)
    if ftype > 2:
        shift = shift * 1j
    out = _fft().irfft(fx * shift)[:numtaps]
    if window is not None:
        out = out * get_window(window, numtaps, fftbins=False)
    if ftype == 3:
        keep = np.ones(numtaps)
        keep[numtaps // 2] = 0.0
        out = out * keep
    return _as(out, plain.dtype)


# -- short-time Fourier transforms --------------------------------------------------------

_BOUNDARY = {"even": _even_ext, "odd": _odd_ext, "constant": _const_ext}


def _zero_ext(x, n, axis):
    if n < 1:
        return x
    z = np.zeros(np.shape(x)[:-1] + (n,), _dtype(x))
    return np.concatenate((z, x, z), axis=-1)


def stft(x, fs=1.0, window="hann_periodic", nperseg=256, noverlap=None, nfft=None, detrend=False,
         return_onesided=True, boundary="zeros", padded=True, axis=-1, scaling="spectrum"):
    """``scipy.signal.stft`` (the legacy function), differentiated in ``x``, ``fs`` and the window (traced
    samples or a traced parameter). Returns (f, t, Zxx); f and t plain unless ``fs`` is traced.

    >>> import numpy as np, mutagrad as mg
    >>> from mutagrad.scipy.signal import stft
    >>> g = mg.grad(lambda x: stft(x, window="boxcar", nperseg=4, boundary=None)[2][0, 0].real)(np.ones(4))
    >>> g  # the first segment's mean
    array([0.25, 0.25, 0.25, 0.25])
    """
    if not (_traced(x, fs) or _window_traced(window)):
        return _ss().stft(x, fs, window, nperseg, noverlap, nfft, detrend, return_onesided, boundary, padded,
                          axis, scaling)
    traced_window = _window_traced(window)
    plain_window = np.array(_plain(window)) if traced_window and not isinstance(window, tuple) else _plain(window)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        freqs, time, plain = _ss().stft(_plain(x), bottom(fs), plain_window, nperseg, noverlap, nfft, detrend,
                                        return_onesided, boundary, padded, axis, scaling)
    for w in caught:  # (SciPy's warnings, at the caller's line)
        warnings.warn(w.message, w.category, stacklevel=2)
    x = _dense(x)
    if np.size(bottom(x)) == 0:
        return freqs, time, plain
    axis = int(axis)
    if np.ndim(x) > 1 and axis != -1:
        x = np.moveaxis(x, axis, -1)
    n_in = np.shape(x)[-1]
    if isinstance(window, (str, tuple)):
        nperseg = min(int(nperseg) if nperseg is not None else 256, n_in)
        win = get_window(window, nperseg)
    else:
        win = _dense(window)
        nperseg = np.shape(win)[0]
    nfft = nperseg if nfft is None else int(nfft)
    noverlap = nperseg // 2 if noverlap is None else int(noverlap)
    nstep = nperseg - noverlap
    if boundary is not None:
        x = (_zero_ext if boundary == "zeros" else _BOUNDARY[boundary])(x, nperseg // 2, -1)
    if padded:
        nadd = (-(np.shape(x)[-1] - nperseg) % nstep) % nperseg
        x = np.concatenate((x, np.zeros(np.shape(x)[:-1] + (nadd,), _dtype(x))), axis=-1)
    outdtype = plain.dtype
    real = np.finfo(outdtype).dtype
    if _dtype(win).kind == "c" or _dtype(win) != real:  # (SciPy's cast of the window to the output's type)
        win = _as(win, outdtype if _dtype(win).kind == "c" else real)
    scale = 1.0 / (fs * np.sum(win * win)) if scaling in ("psd", "density") else 1.0 / np.sum(win) ** 2
    scale = np.sqrt(scale)
    onesided = return_onesided and _dtype(x).kind != "c"
    nseg = (np.shape(x)[-1] - nperseg) // nstep + 1
    segments = nstep * np.arange(nseg)[:, None] + np.arange(nperseg)
    frames = x[..., segments]
    if detrend:
        if callable(detrend):
            frames = detrend(frames) if axis == -1 else np.moveaxis(detrend(np.moveaxis(frames, -1, axis)), axis, -1)
        else:
            frames = _detrended(frames, detrend)
    frames = win * frames
    result = _fft().rfft(np.real(frames), n=nfft) if onesided else _fft().fft(frames, n=nfft)
    result = _as(result * scale, outdtype)
    result = np.moveaxis(result, -1, axis - 1 if axis < 0 else axis)
    if isinstance(fs, Tracer):
        k = np.arange(nfft // 2 + 1) if onesided else np.concatenate(
            (np.arange(0, (nfft - 1) // 2 + 1), np.arange(-(nfft // 2), 0)))
        freqs = k / (nfft * (1 / fs))
        time = np.asarray(time) * bottom(fs) / fs
    return freqs, time, result


def _buffer(shape, dtype, *like):
    """Zeros to accumulate into: traced (so traced values may be added) when one of ``like`` is."""
    t = next((v for v in like if isinstance(v, Tracer)), None)
    return np.zeros(shape, dtype) if t is None else np.zeros_like(t, shape=shape, dtype=dtype)


def istft(Zxx, fs=1.0, window="hann_periodic", nperseg=None, noverlap=None, nfft=None, input_onesided=True,
          boundary=True, time_axis=-1, freq_axis=-2, scaling="spectrum"):
    """``scipy.signal.istft`` (the legacy function: overlap-add of the windowed inverse transforms, divided by the
    summed squared window), differentiated in ``Zxx``, ``fs`` and the window (traced samples or parameter).

    >>> import numpy as np, mutagrad as mg
    >>> from mutagrad.scipy.signal import stft, istft
    >>> x = np.sin(np.arange(16.0))
    >>> g = mg.grad(lambda x: np.sum(istft(stft(x, nperseg=8)[2], nperseg=8)[1][:16] * x))(x)
    >>> bool(np.allclose(g, 2 * x))  # istft(stft(x)) = x
    True
    """
    if not (_traced(Zxx, fs) or _window_traced(window)):
        return _ss().istft(Zxx, fs, window, nperseg, noverlap, nfft, input_onesided, boundary, time_axis,
                           freq_axis, scaling)
    traced_window = _window_traced(window)
    plain_window = np.array(_plain(window)) if traced_window and not isinstance(window, tuple) else _plain(window)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        time, plain = _ss().istft(_plain(Zxx), bottom(fs), plain_window, nperseg, noverlap, nfft, input_onesided,
                                  boundary, time_axis, freq_axis, scaling)
    for w in caught:
        warnings.warn(w.message, w.category, stacklevel=2)
    Z = _dense(Zxx)
    if _dtype(Z).kind != "c":
        Z = Z + 0j
    freq_axis, time_axis = int(freq_axis), int(time_axis)
    nd = np.ndim(Z)
    nseg = np.shape(Z)[time_axis]
    n_default = 2 * (np.shape(Z)[freq_axis] - 1) if input_onesided else np.shape(Z)[freq_axis]
    nperseg = n_default if nperseg is None else int(nperseg)
    if nfft is None:
        nfft = nperseg if input_onesided and nperseg == n_default + 1 else n_default
    nfft = int(nfft)
    noverlap = nperseg // 2 if noverlap is None else int(noverlap)
    nstep = nperseg - noverlap
    if time_axis != nd - 1 or freq_axis != nd - 2:
        freq_axis, time_axis = freq_axis % nd, time_axis % nd
        outer = [a for a in range(nd) if a not in (freq_axis, time_axis)]
        Z = np.transpose(Z, outer + [freq_axis, time_axis])
    win = get_window(window, nperseg) if isinstance(window, (str, tuple)) else _dense(window)
    xsubs = (_fft().irfft if input_onesided else _fft().ifft)(Z, axis=-2, n=nfft)[..., :nperseg, :]
    if np.result_type(bottom(win), bottom(xsubs)) != _dtype(xsubs):
        win = _as(win, _dtype(xsubs))
    xsubs = xsubs * (np.sum(win) if scaling == "spectrum" else np.sqrt(fs * np.sum(win ** 2)))
    length = nperseg + (nseg - 1) * nstep
    x = _buffer(np.shape(Z)[:-2] + (length,), _dtype(xsubs), xsubs, win)
    norm = _buffer((length,), _dtype(win), win)
    for ii in range(nseg):
        x[..., ii * nstep:ii * nstep + nperseg] += xsubs[..., ii] * win
        norm[ii * nstep:ii * nstep + nperseg] += win ** 2
    if boundary:
        x = x[..., nperseg // 2:-(nperseg // 2)]
        norm = norm[nperseg // 2:-(nperseg // 2)]
    x = x / np.where(np.asarray(bottom(norm)) > 1e-10, norm, 1.0)
    if input_onesided:
        x = np.real(x)
    if np.ndim(x) > 1 and time_axis != nd - 1:  # (SciPy's test, of the axes as given unless transposed)
        if freq_axis < time_axis:
            time_axis -= 1
        x = np.moveaxis(x, -1, time_axis)
    if isinstance(fs, Tracer):
        time = np.asarray(time) * bottom(fs) / fs
    return time, _as(x, plain.dtype)
