"""scipy.signal's frequency responses, IIR filter design, Savitzky-Golay filters and spectral
estimates, written as SciPy 1.17 writes them with NumPy operations on traced values, so their
derivatives follow and their values are SciPy's to rounding (its own call when nothing is traced).

* Frequency responses: ``freqz`` (SciPy's FFT of the numerator where it takes that path, Horner's
  rule in z⁻¹ = exp(-iw) otherwise), ``freqz_sos`` (``sosfreqz``), ``freqz_zpk``, ``freqs``,
  ``freqs_zpk`` and ``group_delay``: in the coefficients (zeros, poles, gain), in the frequencies
  ``worN`` and in ``fs``. ``freqs``' automatic frequencies (worN an int) are rounded powers of ten:
  plain, as their derivative is zero.
* Filter design: ``iirnotch``, ``iirpeak``, ``bilinear``, ``bilinear_zpk``, ``lp2lp_zpk``,
  ``lp2hp_zpk``, ``lp2bp_zpk``, ``lp2bs_zpk``, ``zpk2tf``, ``tf2zpk`` (``np.roots``: simple roots),
  ``zpk2sos`` and ``iirfilter`` with ``butter``, ``cheby1``, ``cheby2``, ``ellip`` and ``bessel``:
  SciPy's path (analog prototype, frequency transform of the pre-warped ``Wn``, bilinear transform,
  then 'ba', 'zpk' or 'sos'), differentiated in ``Wn``, ``fs`` and the ripples of ``cheby1``
  (``rp``) and ``cheby2`` (``rs``). The orders are integers; the choices SciPy makes on values (which
  leading coefficients are zero, zpk2sos's pairing of poles and zeros) are made on the plain values
  and the traced ones arranged by them.
* ``savgol_coeffs`` (in ``delta``) and ``savgol_filter`` (in ``x``, ``delta`` and ``cval``): SciPy's
  least squares (np.linalg.lstsq of its plain matrices), ndimage's convolve1d and, for
  mode='interp', its polynomial fits of the edges.
* ``periodogram``, ``welch``, ``csd`` and ``coherence`` (in the signals, ``fs`` and a window given as its
  samples): the segments of SciPy's ShortTimeFFT (detrend 'constant', 'linear', a function or none), its
  scaled window (a named window's plain; a (name, parameter) window with a traced parameter, ('kaiser', beta),
  by signal_resample.get_window, differentiated in the parameter),
  scipy.fft's transforms, the one-sided bins doubled, the 'mean' or 'median' over the segments. SciPy's
  own call on the plain values checks the arguments first (its errors and warnings).
"""
from __future__ import annotations

import operator
import warnings
from math import pi

import numpy as np

from ...core import Tracer, bottom
from .linalg import _plain
from .signal import _along, _dense, _ss, _traced, _validate_sos, _with

COMPOSITES = tuple(f"scipy.signal.{name}" for name in (
    "freqz", "freqz_sos", "sosfreqz", "freqz_zpk", "freqs", "freqs_zpk", "group_delay",
    "iirnotch", "iirpeak", "bilinear", "bilinear_zpk", "lp2lp_zpk", "lp2hp_zpk", "lp2bp_zpk", "lp2bs_zpk",
    "zpk2tf", "tf2zpk", "zpk2sos", "iirfilter", "butter", "cheby1", "cheby2", "ellip", "bessel",
    "savgol_coeffs", "savgol_filter", "periodogram", "welch", "csd", "coherence"))


# -- shared pieces ------------------------------------------------------------------------

def _dtype(v):
    return np.result_type(bottom(v))


def _as(v, dtype):
    """``v`` cast to ``dtype`` (a no-op when it has it)."""
    if _dtype(v) == dtype:
        return v
    return v.astype(dtype) if isinstance(v, Tracer) else np.asarray(v, dtype=dtype)


def _is_int(v):
    """SciPy's _is_int_type: a scalar integer (5, np.array(5)), not 5.0 nor [5]."""
    if isinstance(v, Tracer) or np.ndim(v) != 0:
        return False
    try:
        operator.index(v)
    except TypeError:
        return False
    return True


def _fs(fs):
    """SciPy's _validate_fs(fs, allow_none=False): a scalar (a float when plain)."""
    if fs is None:
        raise ValueError("Sampling frequency can not be none.")
    if isinstance(fs, Tracer):
        if np.ndim(fs) != 0:
            raise ValueError("Sampling frequency fs must be a single scalar.")
        return fs
    if not np.isscalar(fs):
        raise ValueError("Sampling frequency fs must be a single scalar.")
    return float(fs)


def _scalar(v):
    """A number SciPy reads with float(v): a traced one kept (0-d, as float() requires)."""
    if not isinstance(v, Tracer):
        return float(v)
    if np.ndim(v) != 0:
        raise TypeError("only 0-dimensional arrays can be converted to Python scalars")
    return v


def _horner(c, x):
    """Σ_j c[j] x^(n-1-j) by Horner's rule from c[0], the highest power (np.polyval's order, and that
    of SciPy's polynomial helpers): c's trailing axes broadcast against x."""
    shape = np.broadcast_shapes(np.shape(c)[1:], np.shape(x))
    y = c[0] * np.ones(shape, np.result_type(bottom(c), bottom(x)))
    for j in range(1, np.shape(c)[0]):
        y = y * x + c[j]
    return y


def _from_roots(x, r):
    """SciPy's npp_polyvalfromroots(x, r): Π_i (x - r[i]), the roots along a new first axis."""
    r = np.atleast_1d(r)
    return np.prod(x - np.reshape(r, np.shape(r) + (1,) * np.ndim(x)), axis=0)


def _lead_zeros(v):
    """How many leading entries of v are exactly zero (on its plain values)."""
    p = np.asarray(bottom(v))
    nz = np.flatnonzero(p)
    return int(nz[0]) if nz.size else p.shape[0]


# -- frequency responses ------------------------------------------------------------------

def freqz(b, a=1, worN=512, whole=False, plot=None, fs=2 * pi, include_nyquist=False):
    """``scipy.signal.freqz``, differentiated in ``b``, ``a``, the frequencies ``worN`` and ``fs``.

    SciPy's two paths: with an int ``worN``, an FIR filter (one coefficient in ``a``) is the FFT of
    ``b`` (scipy.fft, as SciPy calls it); otherwise Horner's rule in z⁻¹ = exp(-iw). Returns (w, h), w
    plain unless ``worN`` or ``fs`` is traced.

    >>> import numpy as np, mutagrad as mg
    >>> from mutagrad.scipy.signal import freqz
    >>> float(mg.grad(lambda p: freqz([1.0], [1.0, -p], worN=[0.0])[1][0].real)(0.5))  # 1/(1-p): 1/(1-p)²
    4.0
    """
    if not _traced(b, a, worN, fs):
        return _ss().freqz(b, a, worN, whole, plot, fs, include_nyquist)
    import scipy.fft as sp_fft

    b, a = np.atleast_1d(_dense(b)), np.atleast_1d(_dense(a))
    if _dtype(a).kind in "iub":
        a = _as(a, np.float64)
    res_dtype = np.result_type(bottom(b), bottom(a))
    real_dtype = np.finfo(res_dtype).dtype if res_dtype.kind == "c" else res_dtype
    fs = _fs(fs)
    if worN is None:
        worN = 512
    h = None
    if _is_int(worN):
        n = operator.index(worN)
        if n < 0:
            raise ValueError(f"worN must be nonnegative, got {n}")
        w = np.linspace(0, 2 * pi if whole else pi, n, endpoint=include_nyquist and not whole, dtype=real_dtype)
        n_fft = n if whole else 2 * (n - 1) if include_nyquist else 2 * n
        if np.size(a) == 1 and (np.ndim(b) == 1 or np.shape(b)[-1] == 1) and n_fft >= np.shape(b)[0] and n_fft > 0:
            rfft = _dtype(b).kind == "f" and _dtype(a).kind == "f"
            h = (sp_fft.rfft if rfft else sp_fft.fft)(b, n=n_fft, axis=0)
            h = h[:min(n, np.shape(h)[0]), ...] / a
            if rfft and whole:  # (the negative frequencies: the conjugates, without DC and Nyquist)
                h = np.concatenate((h, np.conj(np.flip(h[1:None if n_fft % 2 == 1 else -1, ...], axis=0))))
            if np.ndim(b) > 1:
                h = np.moveaxis(h[..., 0], 0, -1)
    else:
        if isinstance(worN, complex):
            worN = worN.real
        w = np.atleast_1d(_as(_dense(worN), res_dtype))
        if _dtype(w).kind in "iub":
            w = _as(w, np.float64)
        w = 2 * pi * w / fs
    if h is None:
        zm1 = np.exp(-1j * w)
        h = _horner(np.flip(_floats_of_ints(b), axis=0), zm1) / _horner(np.flip(_floats_of_ints(a), axis=0), zm1)
    w = w * (fs / (2 * pi))
    if plot is not None:
        plot(w, h)
    return w, h


def _floats_of_ints(c):
    """Coefficients as SciPy's npp_polyval reads them (integers as floats)."""
    return _as(c, np.float64) if _dtype(c).kind in "iub" else c


def freqz_sos(sos, worN=512, whole=False, fs=2 * pi):
    """``scipy.signal.freqz_sos``: the product of the sections' responses, differentiated in ``sos``,
    ``worN`` and ``fs``.

    >>> import numpy as np, mutagrad as mg
    >>> from mutagrad.scipy.signal import freqz_sos
    >>> float(mg.grad(lambda p: freqz_sos([[1.0, 0.0, 0.0, 1.0, -p, 0.0]], worN=[0.0])[1][0].real)(0.5))
    4.0
    """
    if not _traced(sos, worN, fs):
        return _ss().freqz_sos(sos, worN=worN, whole=whole, fs=fs)
    fs = _fs(fs)
    sos, n_sections = _validate_sos(sos)
    if n_sections == 0:
        raise ValueError("Cannot compute frequencies with no sections")
    h = 1.0
    for j in range(n_sections):
        w, rowh = freqz(sos[j, :3], sos[j, 3:], worN=worN, whole=whole, fs=fs)
        h = h * rowh
    return w, h


def sosfreqz(*args, **kwargs):
    """``scipy.signal.sosfreqz``, SciPy's other name of ``freqz_sos`` (see there).

    >>> import numpy as np, mutagrad as mg
    >>> from mutagrad.scipy.signal import sosfreqz
    >>> float(mg.grad(lambda p: sosfreqz([[1.0, p, 0.0, 1.0, 0.0, 0.0]], worN=[np.pi])[1][0].real)(0.5))  # 1 - p
    -1.0
    """
    if not _traced(args, kwargs):
        return _ss().sosfreqz(*args, **kwargs)
    return freqz_sos(*args, **kwargs)


def freqz_zpk(z, p, k, worN=512, whole=False, fs=2 * pi):
    """``scipy.signal.freqz_zpk``: k Π(e^{iw} - z) / Π(e^{iw} - p), differentiated in ``z``, ``p``,
    ``k``, ``worN`` and ``fs``.

    >>> import numpy as np, mutagrad as mg
    >>> from mutagrad.scipy.signal import freqz_zpk
    >>> float(mg.grad(lambda p: freqz_zpk([], [p], 1.0, worN=[0.0])[1][0].real)(0.5))  # 1/(1-p)
    4.0
    """
    if not _traced(z, p, k, worN, fs):
        return _ss().freqz_zpk(z, p, k, worN=worN, whole=whole, fs=fs)
    z, p = np.atleast_1d(_dense(z)), np.atleast_1d(_dense(p))
    res_dtype = np.result_type(bottom(z), bottom(p))
    res_dtype = np.dtype(np.float64) if res_dtype in (np.float64, np.complex128) else np.dtype(np.float32)
    fs = _fs(fs)
    last = 2 * pi if whole else pi
    if worN is None or _is_int(worN):
        w = np.linspace(0, last, 512 if worN is None else worN, endpoint=False, dtype=res_dtype)
    else:
        w = _dense(worN)
        if _dtype(w).kind in "iub":
            w = _as(w, np.float64)
        w = 2 * pi * np.atleast_1d(w) / fs
    zm1 = np.exp(1j * w)
    h = _gain(k, res_dtype) * _from_roots(zm1, z) / _from_roots(zm1, p)
    return w * (fs / (2 * pi)), h


def _gain(k, dtype):
    """SciPy's np.asarray(k, dtype=...) of a real gain."""
    k = _dense(k)
    if _dtype(k).kind == "c":
        warnings.warn("Casting complex values to real discards the imaginary part", np.exceptions.ComplexWarning,
                      stacklevel=3)
        k = np.real(k)
    return _as(k, dtype)


def freqs(b, a, worN=200, plot=None):
    """``scipy.signal.freqs``: the analog response b(iw) / a(iw), differentiated in ``b``, ``a`` and ``worN``.

    With ``worN`` None or an int, SciPy's frequencies (``findfreqs``: powers of ten rounded from the
    roots) are plain: their derivative is zero.

    >>> import numpy as np, mutagrad as mg
    >>> from mutagrad.scipy.signal import freqs
    >>> float(mg.grad(lambda p: freqs([1.0], [1.0, p], worN=[0.0])[1][0].real)(2.0))  # 1/p: -1/p²
    -0.25
    """
    if not _traced(b, a, worN):
        return _ss().freqs(b, a, worN=worN, plot=plot)
    b, a = np.atleast_1d(_dense(b)), np.atleast_1d(_dense(a))
    if worN is None or _is_int(worN):
        w = _ss().findfreqs(bottom(b), bottom(a), 200 if worN is None else worN)
    else:
        w = np.atleast_1d(_dense(worN))
    s = 1j * w
    h = _horner(b, s) / _horner(a, s)
    if plot is not None:
        plot(w, h)
    return w, h


def freqs_zpk(z, p, k, worN=200):
    """``scipy.signal.freqs_zpk``: k Π(iw - z) / Π(iw - p), differentiated in ``z``, ``p``, ``k`` and ``worN``.

    >>> import numpy as np, mutagrad as mg
    >>> from mutagrad.scipy.signal import freqs_zpk
    >>> float(mg.grad(lambda k: freqs_zpk([], [-2.0], k, worN=[0.0])[1][0].real)(3.0))  # k/2
    0.5
    """
    if not _traced(z, p, k, worN):
        return _ss().freqs_zpk(z, p, k, worN=worN)
    z, p = _dense(z), _dense(p)
    k = _gain(k, np.float64)
    if np.size(k) > 1:
        raise ValueError("k must be a single scalar gain")
    if worN is None or _is_int(worN):
        w = _ss().findfreqs(bottom(z), bottom(p), 200 if worN is None else worN, kind="zp")
    else:
        w = _dense(worN)
    w = np.atleast_1d(w)
    s = 1j * w
    return w, k * _from_roots(s, z) / _from_roots(s, p)


def group_delay(system, w=512, whole=False, fs=2 * pi):
    """``scipy.signal.group_delay`` of ``system = (b, a)``, differentiated in ``b``, ``a``, ``w`` and ``fs``.

    SciPy's formula: with c = b * conj(reversed a) (a convolution), Re(Σ k c[k] z^k / Σ c[k] z^k) -
    len(a) + 1 at z = exp(-iw); where it is singular, 0 (with SciPy's warning) and no derivative.

    >>> import numpy as np, mutagrad as mg
    >>> from mutagrad.scipy.signal import group_delay
    >>> float(mg.grad(lambda p: group_delay(([1.0, p], [1.0]), w=[0.0])[1][0])(1.0))  # p/(1+p): 1/(1+p)²
    0.25
    """
    if not _traced(system, w, fs):
        return _ss().group_delay(system, w=w, whole=whole, fs=fs)
    b, a = (np.atleast_1d(_dense(v)) for v in system)
    if w is None:
        w = 512
    fs = _fs(fs)
    if _is_int(w):
        w = np.linspace(0, 2 * pi if whole else pi, w, endpoint=False)
    else:
        w = 2 * pi * np.atleast_1d(_dense(w)) / fs
    c = np.convolve(b, np.conj(np.flip(a)))
    cr = c * np.arange(np.size(c))
    z = np.exp(-1j * w)
    num, den = np.polyval(np.flip(cr), z), np.polyval(np.flip(c), z)
    with np.errstate(divide="ignore", invalid="ignore"):
        plain = np.real(bottom(num) / bottom(den)) - np.size(bottom(a)) + 1
    singular = ~np.isfinite(plain)
    near_singular = np.absolute(bottom(den)) < 10 * 2e-16
    if np.any(singular):  # (SciPy's 0 there: its value, with a derivative of zero rather than nan)
        num, den = np.where(singular, 0.0, num), np.where(singular, 1.0, den)
    gd = np.real(num / den) - np.size(bottom(a)) + 1
    pw = np.asarray(bottom(w))
    if np.any(singular):
        gd = np.where(singular, 0.0, gd)
        warnings.warn("The group delay is singular at frequencies "
                      f"[{', '.join(f'{ws:.3f}' for ws in pw[singular])}], setting to 0", stacklevel=2)
    elif np.any(near_singular):
        warnings.warn("The filter's denominator is extremely small at frequencies "
                      f"[{', '.join(f'{ws:.3f}' for ws in pw[near_singular])}], "
                      "around which a singularity may be present", stacklevel=2)
    return w * (fs / (2 * pi)), gd


# -- filter design ------------------------------------------------------------------------

def _notch_peak(w0, Q, ftype, fs):
    """SciPy's _design_notch_peak_filter (its notation: w0, bw in half-cycles, then radians)."""
    from ...numpy import array

    fs = _fs(fs)
    w0, Q = _scalar(w0), _scalar(Q)
    w0 = 2 * w0 / fs
    if bottom(w0) > 1.0 or bottom(w0) < 0.0:
        raise ValueError("w0 should be such that 0 < w0 < 1")
    bw = w0 / Q
    bw = bw * pi
    w0 = w0 * pi
    beta = np.tan(bw / 2.0)
    gain = 1.0 / (1.0 + beta)
    if ftype == "notch":
        b = gain * array([1.0, -2.0 * np.cos(w0), 1.0])
    else:
        b = (1.0 - gain) * np.array([1.0, 0.0, -1.0])
    a = array([1.0, -2.0 * gain * np.cos(w0), 2.0 * gain - 1.0])
    return b, a


def iirnotch(w0, Q, fs=2.0, *, xp=None, device=None):
    """``scipy.signal.iirnotch``: a second-order notch filter's (b, a), differentiated in ``w0``, ``Q`` and ``fs``.

    >>> import numpy as np, mutagrad as mg
    >>> from mutagrad.scipy.signal import iirnotch
    >>> g = mg.grad(lambda w0: (lambda b, a: b[1] / b[0])(*iirnotch(w0, 10.0)))(0.5)  # -2 cos(pi w0)
    >>> bool(np.isclose(g, 2 * np.pi))
    True
    """
    if not _traced(w0, Q, fs):
        return _ss().iirnotch(w0, Q, fs, xp=xp, device=device)
    return _notch_peak(w0, Q, "notch", fs)


def iirpeak(w0, Q, fs=2.0, *, xp=None, device=None):
    """``scipy.signal.iirpeak``: a second-order peak (resonant) filter's (b, a), differentiated in ``w0``,
    ``Q`` and ``fs``.

    >>> import numpy as np, mutagrad as mg
    >>> from mutagrad.scipy.signal import iirpeak
    >>> g = mg.grad(lambda w0: (lambda b, a: a[1] / (a[2] + 1))(*iirpeak(w0, 10.0)))(0.5)  # -cos(pi w0)
    >>> bool(np.isclose(g, np.pi))
    True
    """
    if not _traced(w0, Q, fs):
        return _ss().iirpeak(w0, Q, fs, xp=xp, device=device)
    return _notch_peak(w0, Q, "peak", fs)


def _trimseq_high(c):
    """numpy.polynomial's trimseq: trailing (highest-power) exact zeros dropped, one kept."""
    p = np.asarray(bottom(c))
    n = p.shape[0]
    while n > 1 and p[n - 1] == 0:
        n -= 1
    return c[:n]


def _polypow(c, n):
    """numpy.polynomial's power, lowest power first: np.convolve n - 1 times."""
    if n == 0:
        return np.ones(1, dtype=_dtype(c))
    prd = c
    for _ in range(2, n + 1):
        prd = np.convolve(prd, c)
    return prd


def _kept(c, n):
    """c (highest power first) without its leading exact zeros beyond degree n (SciPy trims them all;
    those within degree n add exact zeros, and keep their derivative)."""
    return c[max(min(_lead_zeros(c), np.shape(c)[0] - n - 1), 0):]


def bilinear(b, a, fs=1.0):
    """``scipy.signal.bilinear``: the digital filter of an analog one by s = 2 fs (z - 1)/(z + 1), differentiated
    in ``b``, ``a`` and ``fs``.

    SciPy's polynomial sums, Σ_q b[-1-q] (z + 1)^(N-q) (z - 1)^q with the factor 2 fs split between them,
    written with np.convolve; then ``normalize``.

    >>> import numpy as np, mutagrad as mg
    >>> from mutagrad.scipy.signal import bilinear
    >>> float(mg.grad(lambda p: bilinear([1.0], [1.0, p], fs=0.5)[1][1])(1.0))  # (p - 1)/(p + 1)
    0.5
    """
    if not _traced(b, a, fs):
        return _ss().bilinear(b, a, fs)
    b, a = np.atleast_1d(_dense(b)), np.atleast_1d(_dense(a))
    if np.ndim(a) != 1:
        raise ValueError(f"Parameter a is not a 1d array since a.shape={np.shape(a)}")
    if np.ndim(b) != 1:
        raise ValueError(f"Parameter b is not a 1d array since b.shape={np.shape(b)}")
    n = max(np.shape(b)[0] - _lead_zeros(b), np.shape(a)[0] - _lead_zeros(a)) - 1
    b, a = _kept(b, n), _kept(a, n)
    fs = _fs(fs)
    fac = np.sqrt(fs * 2)
    zp1 = np.ones(2) / fac  # (z + 1) / fac, lowest power first
    zm1 = np.array([-1.0, 1.0]) * fac  # (z - 1) * fac

    def poly(c):
        total = None
        for q, c_q in enumerate(np.flip(c)):
            term = np.convolve(c_q * _polypow(zp1, n - q), _polypow(zm1, q))
            total = term if total is None else total + term
        return np.flip(_trimseq_high(total))

    return _normalize(poly(b), poly(a))


def _normalize(b, a):
    """SciPy's normalize of 1-d or 2-d numerators and a 1-d denominator."""
    den = np.atleast_1d(a)
    num = np.atleast_2d(b)
    if np.ndim(den) != 1:
        raise ValueError("Denominator polynomial must be rank-1 array.")
    if np.ndim(num) > 2:
        raise ValueError("Numerator polynomial must be rank-1 or rank-2 array.")
    if np.all(bottom(den) == 0):
        raise ValueError("Denominator must have at least on nonzero element.")
    den = den[min(_lead_zeros(den), np.shape(den)[0] - 1):]
    num, den = num / den[0], den / den[0]
    small = np.all(np.abs(np.asarray(bottom(num))) <= 1e-14, axis=0)
    leading = int(np.argmin(small)) if not np.all(small) else np.shape(num)[1]
    if leading > 0:
        warnings.warn("Badly conditioned filter coefficients (numerator): the results may be meaningless",
                      _ss().BadCoefficients, stacklevel=3)
        num = num[:, min(leading, np.shape(num)[1] - 1):]
    if np.shape(num)[0] == 1:
        num = num[0, :]
    return num, den


def _degree(z, p):
    degree = np.shape(p)[0] - np.shape(z)[0]
    if degree < 0:
        raise ValueError("Improper transfer function. Must have at least as many poles as zeros.")
    return degree


def _zp(z, p, floating=False):
    z, p = np.atleast_1d(_dense(z)), np.atleast_1d(_dense(p))
    if floating:  # (SciPy's xp_promote(z, p, force_floating=True))
        dt = _floating(z, p)
        z, p = _as(z, dt), _as(p, dt)
    return z, p


def _floating(*vs):
    dt = np.result_type(*(bottom(v) for v in vs))
    return np.dtype(np.float64) if dt.kind in "iub" else dt


def bilinear_zpk(z, p, k, fs):
    """``scipy.signal.bilinear_zpk``, differentiated in ``z``, ``p``, ``k`` and ``fs``.

    >>> import numpy as np, mutagrad as mg
    >>> from mutagrad.scipy.signal import bilinear_zpk
    >>> float(mg.grad(lambda p: bilinear_zpk([], [-p], p, fs=0.5)[1][0].real)(1.0))  # (1 - p)/(1 + p)
    -0.5
    """
    if not _traced(z, p, k, fs):
        return _ss().bilinear_zpk(z, p, k, fs)
    z, p = _zp(z, p)
    fs = _fs(fs)
    degree = _degree(z, p)
    fs2 = 2.0 * fs
    z_z = (fs2 + z) / (fs2 - z)
    p_z = (fs2 + p) / (fs2 - p)
    z_z = np.concatenate((z_z, -np.ones(degree)))
    return z_z, p_z, k * np.real(np.prod(fs2 - z) / np.prod(fs2 - p))


def lp2lp_zpk(z, p, k, wo=1.0):
    """``scipy.signal.lp2lp_zpk``: a lowpass prototype's cutoff moved to ``wo``, differentiated in ``z``, ``p``,
    ``k`` and ``wo``.

    >>> import numpy as np, mutagrad as mg
    >>> from mutagrad.scipy.signal import lp2lp_zpk
    >>> float(mg.grad(lambda wo: lp2lp_zpk([], [-1.0], 1.0, wo)[2])(2.0))  # k wo
    1.0
    """
    if not _traced(z, p, k, wo):
        return _ss().lp2lp_zpk(z, p, k, wo)
    z, p = _zp(z, p)
    wo = _scalar(wo)
    degree = _degree(z, p)
    return wo * z, wo * p, k * wo ** degree


def lp2hp_zpk(z, p, k, wo=1.0):
    """``scipy.signal.lp2hp_zpk``: a lowpass prototype turned highpass at ``wo``, differentiated in ``z``,
    ``p``, ``k`` and ``wo``.

    >>> import numpy as np, mutagrad as mg
    >>> from mutagrad.scipy.signal import lp2hp_zpk
    >>> float(mg.grad(lambda wo: lp2hp_zpk([], [-1.0], 1.0, wo)[1][0].real)(2.0))  # -wo
    -1.0
    """
    if not _traced(z, p, k, wo):
        return _ss().lp2hp_zpk(z, p, k, wo)
    z, p = _zp(z, p)
    wo = _scalar(wo)
    degree = _degree(z, p)
    z_hp = np.concatenate((wo / z, np.zeros(degree)))
    return z_hp, wo / p, k * np.real(np.prod(-z) / np.prod(-p))


def _shifted(r, wo):
    """Each root r split into r ± sqrt(r² - wo²) (lp2bp_zpk's and lp2bs_zpk's), complex."""
    r = _as(r, np.complex128)
    return np.concatenate((r + np.sqrt(r ** 2 - wo ** 2), r - np.sqrt(r ** 2 - wo ** 2)))


def lp2bp_zpk(z, p, k, wo=1.0, bw=1.0):
    """``scipy.signal.lp2bp_zpk``: a lowpass prototype turned bandpass (centre ``wo``, width ``bw``),
    differentiated in ``z``, ``p``, ``k``, ``wo`` and ``bw``.

    >>> import numpy as np, mutagrad as mg
    >>> from mutagrad.scipy.signal import lp2bp_zpk
    >>> float(mg.grad(lambda bw: np.sum(lp2bp_zpk([], [-1.0], 1.0, 1.0, bw)[1]).real)(0.5))  # -bw
    -1.0
    """
    if not _traced(z, p, k, wo, bw):
        return _ss().lp2bp_zpk(z, p, k, wo, bw)
    z, p = _zp(z, p, floating=True)
    wo, bw = _scalar(wo), _scalar(bw)
    degree = _degree(z, p)
    z_bp = np.concatenate((_shifted(z * bw / 2, wo), np.zeros(degree)))
    return z_bp, _shifted(p * bw / 2, wo), k * bw ** degree


def lp2bs_zpk(z, p, k, wo=1.0, bw=1.0):
    """``scipy.signal.lp2bs_zpk``: a lowpass prototype turned bandstop (centre ``wo``, width ``bw``),
    differentiated in ``z``, ``p``, ``k``, ``wo`` and ``bw``.

    >>> import numpy as np, mutagrad as mg
    >>> from mutagrad.scipy.signal import lp2bs_zpk
    >>> float(mg.grad(lambda wo: lp2bs_zpk([], [-1.0], 1.0, wo, 0.5)[0][0].imag)(2.0))  # the zero at i wo
    1.0
    """
    if not _traced(z, p, k, wo, bw):
        return _ss().lp2bs_zpk(z, p, k, wo, bw)
    z, p = _zp(z, p, floating=True)
    wo, bw = _scalar(wo), _scalar(bw)
    degree = _degree(z, p)
    ones = np.ones(degree, dtype=complex)
    z_bs = np.concatenate((_shifted((bw / 2) / z, wo), ones * (1j * wo), ones * (-1j * wo)))
    return z_bs, _shifted((bw / 2) / p, wo), k * np.real(np.prod(-z) / np.prod(-p))


def _poly(seq):
    """SciPy's polynomial of the roots ``seq`` (highest power first, np.convolve by each): real when the
    imaginary parts come in conjugate pairs (decided on the plain values)."""
    seq = np.atleast_1d(seq)
    if np.shape(seq)[0] == 0:
        return np.asarray(1.0, dtype=np.real(np.zeros(0, _dtype(seq))).dtype)
    dt = _dtype(seq)
    a = np.ones((1,), dt)
    for i in range(np.shape(seq)[0]):
        a = np.convolve(a, np.stack((np.ones((), dt), -seq[i])))
    if dt.kind == "c":
        im = np.imag(np.asarray(bottom(seq), dtype=np.complex128))
        if np.all(np.sort(im) == np.sort(-im)):
            a = np.real(a)
    return a


def zpk2tf(z, p, k):
    """``scipy.signal.zpk2tf``: (b, a) = (k Π(x - z), Π(x - p)), differentiated in ``z``, ``p`` and ``k``.

    >>> import numpy as np, mutagrad as mg
    >>> from mutagrad.scipy.signal import zpk2tf
    >>> float(mg.grad(lambda p: zpk2tf([], [p, 2.0], 1.0)[1][2])(0.5))  # a = [1, -(p + 2), 2 p]
    2.0
    """
    if not _traced(z, p, k):
        return _ss().zpk2tf(z, p, k)
    z, p, k = _dense(z), _dense(p), _dense(k)
    kt = np.result_type(np.real(np.zeros(0, _dtype(z))), np.real(np.zeros(0, _dtype(p))), bottom(k))
    k = np.atleast_1d(_as(k, np.float64 if kt.kind in "iub" else kt))
    z = np.atleast_1d(z)
    if np.ndim(z) > 1:
        ks = [k[0]] * np.shape(z)[0] if np.shape(k)[0] == 1 else [k[i] for i in range(np.shape(z)[0])]
        b = np.stack([ks[i] * _poly(z[i]) for i in range(np.shape(z)[0])])
    else:
        b = k * _poly(z)
    return b, np.atleast_1d(_poly(p))


def tf2zpk(b, a):
    """``scipy.signal.tf2zpk``: zeros, poles (np.roots) and gain, differentiated in ``b`` and ``a`` (at
    simple roots).

    >>> import numpy as np, mutagrad as mg
    >>> from mutagrad.scipy.signal import tf2zpk
    >>> float(mg.grad(lambda p: np.sum(tf2zpk([1.0], [1.0, -3 * p, 2 * p * p])[1]).real)(1.0))  # p + 2p
    3.0
    """
    if not _traced(b, a):
        return _ss().tf2zpk(b, a)
    b, a = _normalize(_dense(b), _dense(a))
    dt = _floating(a, b)
    a, b = _as(a, dt), _as(b, dt)
    k = b[0]
    b = b / b[0]
    z = np.roots(b) if np.shape(b)[0] >= 2 else np.zeros(0, dtype=_dtype(b))
    p = np.roots(a) if np.shape(a)[0] >= 2 else np.zeros(0, dtype=_dtype(a))
    return z, p, k


def _cplxreal(z):
    """SciPy's _cplxreal (its order, its tolerance, its checks) on the plain values: (the complex roots
    with positive imaginary part, each averaged with its conjugate; the real ones), traced, with their
    plain values."""
    from scipy.signal._filter_design import _cplxreal as plain_cplxreal

    pz = np.atleast_1d(np.asarray(bottom(z)))
    plain_cplxreal(pz)  # (SciPy's errors)
    if pz.size == 0:
        return z, z
    tol = 100 * np.finfo((1.0 * pz).dtype).eps
    order = np.lexsort((abs(pz.imag), pz.real))
    s = pz[order]
    real = abs(s.imag) <= tol * abs(s)
    zr = np.real(z[order[real]])
    if real.all():
        return np.array([]), zr
    rest = order[~real]
    zp, zn = rest[pz[rest].imag > 0], rest[pz[rest].imag < 0]
    same_real = np.diff(pz[zp].real) <= tol * abs(pz[zp][:-1])
    diffs = np.diff(np.concatenate(([0], same_real, [0])))
    for start, stop in zip(np.nonzero(diffs > 0)[0], np.nonzero(diffs < 0)[0] + 1):
        for chunk in (zp[start:stop], zn[start:stop]):
            chunk[...] = chunk[np.lexsort([abs(pz[chunk].imag)])]
    return (z[zp] + np.conj(z[zn])) / 2, zr


def zpk2sos(z, p, k, pairing=None, *, analog=False):
    """``scipy.signal.zpk2sos``: second-order sections, differentiated in ``z``, ``p`` and ``k``.

    SciPy's pairing of poles and zeros (nearest, keep_odd, minimal) is made on the plain values (a
    choice: piecewise constant), and each section's coefficients are zpk2tf of its traced roots.

    >>> import numpy as np, mutagrad as mg
    >>> from mutagrad.scipy.signal import zpk2sos
    >>> float(mg.grad(lambda p: zpk2sos([-1.0], [p], 1.0)[0, 4])(0.5))  # [1, 1, 0, 1, -p, 0]
    -1.0
    """
    if not _traced(z, p, k):
        return _ss().zpk2sos(z, p, k, pairing=pairing, analog=analog)
    z, p, k = np.atleast_1d(_dense(z)), np.atleast_1d(_dense(p)), _dense(k)
    _ss().zpk2sos(bottom(z), bottom(p), bottom(k), pairing=pairing, analog=analog)  # (SciPy's errors)
    if pairing is None:
        pairing = "minimal" if analog else "nearest"
    from ...numpy import array

    if np.shape(z)[0] == np.shape(p)[0] == 0:
        return array([[k, 0.0, 0.0, 1.0, 0.0, 0.0]] if not analog else [[0.0, 0.0, k, 0.0, 0.0, 1.0]])
    if pairing != "minimal":
        p = np.concatenate((p, np.zeros(max(np.shape(z)[0] - np.shape(p)[0], 0))))
        z = np.concatenate((z, np.zeros(max(np.shape(p)[0] - np.shape(z)[0], 0))))
        n_sections = (max(np.shape(p)[0], np.shape(z)[0]) + 1) // 2
        if np.shape(p)[0] % 2 == 1 and pairing == "nearest":
            p, z = np.concatenate((p, [0.0])), np.concatenate((z, [0.0]))
    else:
        n_sections = (np.shape(p)[0] + 1) // 2
    z, p = np.concatenate(_cplxreal(z)), np.concatenate(_cplxreal(p))
    k = np.real(k)
    # the roots left: (plain value, traced value), popped as SciPy deletes them
    zs = [(v, z[i]) for i, v in enumerate(np.asarray(bottom(z)))]
    ps = [(v, p[i]) for i, v in enumerate(np.asarray(bottom(p)))]

    def worst(rs):
        vals = np.array([v for v, _ in rs])
        return int(np.argmin(np.abs(np.real(vals)) if analog else np.abs(1 - np.abs(vals))))

    def nearest(rs, to, which):
        vals = np.array([v for v, _ in rs])
        order = np.argsort(np.abs(vals - to))
        if which == "any":
            return int(order[0])
        mask = np.isreal(vals[order])
        return int(order[np.nonzero(~mask if which == "complex" else mask)[0][0]])

    def section(zeros, poles):
        b, a = _poly(array(zeros)) if zeros else np.ones(1), _poly(array(poles))
        b, a = np.atleast_1d(b), np.atleast_1d(a)
        if np.iscomplexobj(bottom(b)) or np.iscomplexobj(bottom(a)):  # (SciPy writes them into a real array)
            warnings.warn("Casting complex values to real discards the imaginary part",
                          np.exceptions.ComplexWarning, stacklevel=4)
            b, a = np.real(b), np.real(a)
        return np.concatenate((np.zeros(3 - np.shape(b)[0]), b, np.zeros(3 - np.shape(a)[0]), a))

    isreal = np.isreal
    sos = [None] * n_sections
    for si in range(n_sections - 1, -1, -1):
        p1, p1t = ps.pop(worst(ps))
        n_real_p = sum(isreal(v) for v, _ in ps)
        if isreal(p1) and n_real_p == 0:
            if pairing != "minimal":
                _, z1t = zs.pop(nearest(zs, p1, "real"))
                sos[si] = section([z1t, 0.0], [p1t, 0.0])
            elif zs:
                _, z1t = zs.pop(nearest(zs, p1, "real"))
                sos[si] = section([z1t], [p1t])
            else:
                sos[si] = section([], [p1t])
        elif (len(ps) + 1 == len(zs) and not isreal(p1) and n_real_p == 1
              and sum(isreal(v) for v, _ in zs) == 1):
            _, z1t = zs.pop(nearest(zs, p1, "complex"))
            sos[si] = section([z1t, np.conj(z1t)], [p1t, np.conj(p1t)])
        else:
            if isreal(p1):
                real_idx = [i for i, (v, _) in enumerate(ps) if isreal(v)]
                _, p2t = ps.pop(real_idx[worst([ps[i] for i in real_idx])])
            else:
                p2t = np.conj(p1t)
            if zs:
                z1, z1t = zs.pop(nearest(zs, p1, "any"))
                if not isreal(z1):
                    sos[si] = section([z1t, np.conj(z1t)], [p1t, p2t])
                elif zs:
                    _, z2t = zs.pop(nearest(zs, p1, "real"))
                    sos[si] = section([z1t, z2t], [p1t, p2t])
                else:
                    sos[si] = section([z1t], [p1t, p2t])
            else:
                sos[si] = section([], [p1t, p2t])
    sos[0] = np.concatenate((sos[0][:3] * k, sos[0][3:]))
    return np.stack(sos)


def _cheb1ap(n, rp):
    """SciPy's cheb1ap with a traced ripple."""
    if n == 0:
        return np.array([]), np.array([], dtype=complex), 10 ** (-rp / 20)
    eps = np.sqrt(10 ** (0.1 * rp) - 1.0)
    mu = 1.0 / n * np.arcsinh(1 / eps)
    theta = pi * np.arange(-n + 1, n, 2, dtype=np.float64) / (2 * n)
    p = -np.sinh(mu + 1j * theta)
    k = np.real(np.prod(-p, axis=0))
    if n % 2 == 0:
        k = k / np.sqrt(1 + eps * eps)
    return np.array([]), p, k


def _cheb2ap(n, rs):
    """SciPy's cheb2ap with a traced attenuation."""
    if n == 0:
        return np.array([], dtype=complex), np.array([], dtype=complex), 1.0
    de = 1.0 / np.sqrt(10 ** (0.1 * rs) - 1)
    mu = np.arcsinh(1.0 / de) / n
    if n % 2:
        m = np.concatenate((np.arange(-n + 1, 0, 2, dtype=np.float64), np.arange(2, n, 2, dtype=np.float64)))
    else:
        m = np.arange(-n + 1, n, 2, dtype=np.float64)
    z = 1j / np.sin(m * pi / (2 * n))
    theta1 = pi * np.arange(-n + 1, n, 2, dtype=np.float64) / (2 * n)
    p = -1 / np.sinh(mu + 1j * theta1)
    return z, p, np.real(np.prod(-p, axis=0) / np.prod(-z, axis=0))


def _prototype(ftype, n, rp, rs):
    """The analog lowpass prototype: traced ripples for cheby1 and cheby2, plain ones elsewhere."""
    from scipy.signal._filter_design import bessel_norms, filter_dict

    from ...errors import NoRuleError, user_line

    proto = filter_dict[ftype][0].__name__
    if proto == "cheb1ap" and isinstance(rp, Tracer):
        return _cheb1ap(n, rp)
    if proto == "cheb2ap" and isinstance(rs, Tracer):
        return _cheb2ap(n, rs)
    if proto == "ellipap" and _traced(rp, rs):
        raise NoRuleError(
            f"scipy.signal's elliptic filter design at {user_line()}: its prototype (elliptic functions, "
            "solved for the ripples rp and rs) is not differentiated in rp or rs. Pass plain ripples "
            "(mg.stop_gradient(rp)); Wn and fs are differentiated, and so are cheby1's rp and cheby2's rs.")
    ss = _ss()
    if proto == "besselap":
        return ss.besselap(n, norm=bessel_norms[ftype])
    return {"buttap": lambda: ss.buttap(n), "cheb1ap": lambda: ss.cheb1ap(n, rp),
            "cheb2ap": lambda: ss.cheb2ap(n, rs), "ellipap": lambda: ss.ellipap(n, rp, rs)}[proto]()


def iirfilter(N, Wn, rp=None, rs=None, btype="band", analog=False, ftype="butter", output="ba", fs=None):
    """``scipy.signal.iirfilter``, differentiated in ``Wn``, ``fs`` and (cheby1, cheby2) ``rp``, ``rs``.

    SciPy's path: the analog prototype of order ``N``, its frequency transform (lp2lp_zpk, lp2hp_zpk,
    lp2bp_zpk, lp2bs_zpk) to the pre-warped 4 tan(pi Wn / 2), bilinear_zpk, then zpk2tf or zpk2sos (its
    pairing on the plain values). SciPy's own call on the plain values checks the arguments first.

    >>> import numpy as np, mutagrad as mg
    >>> from mutagrad.scipy.signal import iirfilter
    >>> float(mg.grad(lambda w: iirfilter(1, w, btype="low", analog=True)[1][1])(2.0))  # a = [1, Wn]
    1.0
    """
    if not _traced(N, Wn, rp, rs, fs):
        return _ss().iirfilter(N, Wn, rp, rs, btype, analog, ftype, output, fs)
    _ss().iirfilter(N, _plain(Wn), _plain(rp), _plain(rs), btype, analog, ftype, output, _plain(fs))  # (its checks)
    from scipy.signal._filter_design import band_dict

    Wn = _dense(Wn)
    Wn = _as(Wn if isinstance(Wn, Tracer) else np.asarray(Wn), np.float64)
    ftype, btype, output = ftype.lower(), band_dict[btype.lower()], output.lower()
    if fs is not None:
        Wn = Wn / (_fs(fs) / 2)
    z, p, k = _prototype(ftype, N, rp, rs)
    if not analog:
        warped = 2 * 2.0 * np.tan(pi * Wn / 2.0)
    else:
        warped = Wn
    if btype in ("lowpass", "highpass"):
        wo = np.reshape(warped, ())
        z, p, k = (lp2lp_zpk if btype == "lowpass" else lp2hp_zpk)(z, p, k, wo=wo)
    else:
        bw, wo = warped[1] - warped[0], np.sqrt(warped[0] * warped[1])
        z, p, k = (lp2bp_zpk if btype == "bandpass" else lp2bs_zpk)(z, p, k, wo=wo, bw=bw)
    if not analog:
        z, p, k = bilinear_zpk(z, p, k, fs=2.0)
    if output == "zpk":
        return z, p, k
    if output == "ba":
        return zpk2tf(z, p, k)
    return zpk2sos(z, p, k, analog=analog)


def butter(N, Wn, btype="low", analog=False, output="ba", fs=None):
    """``scipy.signal.butter``, differentiated in ``Wn`` and ``fs`` (every btype and output; see ``iirfilter``).

    >>> import numpy as np, mutagrad as mg
    >>> from mutagrad.scipy.signal import butter
    >>> g = mg.grad(lambda w: butter(1, w)[0][0])(0.5)  # b0 = t/(1 + t), t = tan(pi Wn/2)
    >>> bool(np.isclose(g, np.pi / 4))
    True
    """
    return iirfilter(N, Wn, btype=btype, analog=analog, output=output, ftype="butter", fs=fs)


def cheby1(N, rp, Wn, btype="low", analog=False, output="ba", fs=None):
    """``scipy.signal.cheby1``, differentiated in ``rp``, ``Wn`` and ``fs`` (see ``iirfilter``).

    >>> import numpy as np, mutagrad as mg
    >>> from mutagrad.scipy.signal import cheby1
    >>> g = mg.grad(lambda w: cheby1(1, 3.0, w, analog=True)[1][1])(2.0)  # a = [1, Wn/eps]
    >>> bool(np.isclose(g, 1 / np.sqrt(10 ** 0.3 - 1)))
    True
    """
    return iirfilter(N, Wn, rp=rp, btype=btype, analog=analog, output=output, ftype="cheby1", fs=fs)


def cheby2(N, rs, Wn, btype="low", analog=False, output="ba", fs=None):
    """``scipy.signal.cheby2``, differentiated in ``rs``, ``Wn`` and ``fs`` (see ``iirfilter``).

    >>> import numpy as np, mutagrad as mg
    >>> from mutagrad.scipy.signal import cheby2
    >>> g = mg.grad(lambda w: cheby2(1, 20.0, w, analog=True)[1][1])(2.0)  # a = [1, Wn de]
    >>> bool(np.isclose(g, 1 / np.sqrt(10 ** 2.0 - 1)))
    True
    """
    return iirfilter(N, Wn, rs=rs, btype=btype, analog=analog, output=output, ftype="cheby2", fs=fs)


def ellip(N, rp, rs, Wn, btype="low", analog=False, output="ba", fs=None):
    """``scipy.signal.ellip``, differentiated in ``Wn`` and ``fs`` (plain ripples ``rp``, ``rs``; see ``iirfilter``).

    >>> import numpy as np, mutagrad as mg
    >>> from mutagrad.scipy.signal import ellip
    >>> g = mg.grad(lambda w: ellip(1, 3.0, 40.0, w, analog=True)[1][1])(2.0)  # a = [1, Wn/eps]
    >>> bool(np.isclose(g, 1 / np.sqrt(10 ** 0.3 - 1)))
    True
    """
    return iirfilter(N, Wn, rs=rs, rp=rp, btype=btype, analog=analog, output=output, ftype="elliptic", fs=fs)


def bessel(N, Wn, btype="low", analog=False, output="ba", norm="phase", fs=None):
    """``scipy.signal.bessel``, differentiated in ``Wn`` and ``fs`` (see ``iirfilter``).

    >>> import numpy as np, mutagrad as mg
    >>> from mutagrad.scipy.signal import bessel
    >>> float(mg.grad(lambda w: bessel(1, w, analog=True)[1][1])(2.0))  # a = [1, Wn]
    1.0
    """
    return iirfilter(N, Wn, btype=btype, analog=analog, output=output, ftype="bessel_" + norm, fs=fs)


# -- Savitzky-Golay -----------------------------------------------------------------------

def savgol_coeffs(window_length, polyorder, deriv=0, delta=1.0, pos=None, use="conv", *, xp=None, device=None):
    """``scipy.signal.savgol_coeffs``, differentiated in ``delta``.

    SciPy's least squares, lstsq(A, y) with A its plain Vandermonde matrix and y = deriv! / delta**deriv
    in entry ``deriv`` (np.linalg.lstsq, SciPy's cutoff).

    >>> import numpy as np, mutagrad as mg
    >>> from mutagrad.scipy.signal import savgol_coeffs
    >>> float(mg.grad(lambda d: savgol_coeffs(3, 1, deriv=1, delta=d)[0])(1.0))  # 0.5/delta
    -0.5
    """
    if not _traced(delta):
        kw = {} if xp is None and device is None else {"xp": xp, "device": device}
        return _ss().savgol_coeffs(window_length, polyorder, deriv, delta, pos, use, **kw)
    from scipy._lib._util import float_factorial

    if polyorder >= window_length:
        raise ValueError("polyorder must be less than window_length.")
    halflen, rem = divmod(window_length, 2)
    if pos is None:
        pos = halflen - 0.5 if rem == 0 else halflen
    if not (0 <= pos < window_length):
        raise ValueError("pos must be nonnegative and less than window_length.")
    if use not in ["conv", "dot"]:
        raise ValueError("`use` must be 'conv' or 'dot'")
    if deriv > polyorder:
        return np.zeros(window_length)
    x = np.arange(-pos, window_length - pos, dtype=np.float64)
    if use == "conv":
        x = np.flip(x)
    A = x ** np.reshape(np.arange(polyorder + 1, dtype=np.float64), (-1, 1))
    y = np.eye(1, polyorder + 1, deriv)[0] * (float_factorial(deriv) / (_scalar(delta) ** deriv))
    return np.linalg.lstsq(A, y, rcond=np.finfo(np.float64).eps * max(A.shape))[0]


def _polyfit(x, y, deg):
    """SciPy's polyfit helper (columns scaled, least squares with its cutoff) of plain x, traced y."""
    order = int(deg) + 1
    lhs = x[:, None] ** np.flip(np.arange(order, dtype=x.dtype))[None, :]
    scale = np.sqrt(np.sum(lhs * lhs, axis=0))
    lhs /= scale
    c, _, rank, _ = np.linalg.lstsq(lhs, y, rcond=x.shape[0] * np.finfo(x.dtype).eps)
    if rank != order:
        warnings.warn("Polyfit may be poorly conditioned", np.exceptions.RankWarning, stacklevel=4)
    return (c.T / scale).T


def _fit_edge(x, window_start, window_stop, interp_start, interp_stop, axis, polyorder, deriv, delta, y):
    """SciPy's _fit_edge: y's samples interp_start:interp_stop along the axis from the polynomial fitted
    to x's window_start:window_stop (its deriv-th derivative, divided by delta**deriv)."""
    edge = np.moveaxis(_along(x, window_start, window_stop, axis), axis, 0)
    shp = np.shape(edge)
    coeffs = _polyfit(np.arange(0, window_stop - window_start, dtype=_dtype(x)), np.reshape(edge, (shp[0], -1)),
                      polyorder)
    if deriv > 0:  # SciPy's _polyder
        n = np.shape(coeffs)[0]
        if n <= deriv:
            coeffs = np.zeros_like(coeffs[:1])
        else:
            dp = coeffs[:-deriv]
            for k in range(deriv):
                dp = dp * np.reshape(np.arange(n - k - 1, deriv - k - 1, -1, dtype=_dtype(coeffs)), (n - deriv, 1))
            coeffs = dp
    i = np.arange(interp_start - window_start, interp_stop - window_start, dtype=_dtype(coeffs))
    values = _horner(coeffs, np.reshape(i, (-1, 1))) / (delta ** deriv)
    values = np.moveaxis(np.reshape(values, (interp_stop - interp_start,) + shp[1:]), 0, axis)
    index = [slice(None)] * np.ndim(y)
    index[axis] = slice(interp_start, interp_stop)
    y[tuple(index)] = values
    return y


def savgol_filter(x, window_length, polyorder, deriv=0, delta=1.0, axis=-1, mode="interp", cval=0.0):
    """``scipy.signal.savgol_filter``, differentiated in ``x``, ``delta`` and ``cval``.

    SciPy's steps: its coefficients (``savgol_coeffs``), mutagrad.scipy.ndimage.convolve1d with the
    mode, and for mode='interp' the polynomials fitted to the first and last windows (least squares
    with SciPy's plain matrix) for the edge samples.

    >>> import numpy as np, mutagrad as mg
    >>> from mutagrad.scipy.signal import savgol_filter
    >>> np.round(mg.grad(lambda x: savgol_filter(x, 3, 1)[2])(np.arange(5.0)), 12)  # a mean of 3
    array([0.        , 0.33333333, 0.33333333, 0.33333333, 0.        ])
    """
    if not _traced(x, delta, cval):
        return _ss().savgol_filter(x, window_length, polyorder, deriv, delta, axis, mode, cval)
    from .ndimage import convolve1d

    if mode not in ["mirror", "constant", "nearest", "interp", "wrap"]:
        raise ValueError("mode must be 'mirror', 'constant', 'nearest' 'wrap' or 'interp'.")
    x = _dense(x)
    if _dtype(x) not in (np.float64, np.float32):
        x = _as(x, np.float64)
    coeffs = savgol_coeffs(window_length, polyorder, deriv=deriv, delta=delta)
    if mode != "interp":
        return convolve1d(x, coeffs, axis=axis, mode=mode, cval=cval)
    if window_length > np.shape(x)[axis]:
        raise ValueError("If mode is 'interp', window_length must be less than or equal to the size of x.")
    y = convolve1d(x, coeffs, axis=axis, mode="constant")
    halflen, n = window_length // 2, np.shape(x)[axis]
    y = _fit_edge(x, 0, window_length, 0, halflen, axis, polyorder, deriv, delta, y)
    return _fit_edge(x, n - window_length, n, n - halflen, n, axis, polyorder, deriv, delta, y)


# -- spectral estimates -------------------------------------------------------------------

def _detrended(d, detrend):
    """Each segment (the last axis) detrended as SciPy's ShortTimeFFT detrends it."""
    if detrend is None or detrend is False:
        return d
    if callable(detrend):  # (called on one segment at a time, as SciPy calls it)
        return np.stack([detrend(d[..., j, :]) for j in range(np.shape(d)[-2])], axis=-2)
    if detrend in ("constant", "c"):
        return d - np.mean(d, -1, keepdims=True)
    # 'linear' (SciPy's detrend: the residual of a least-squares line through each segment)
    n = np.shape(d)[-1]
    A = np.ones((n, 2))
    A[:, 0] = np.arange(1, n + 1, dtype=np.float64) / n
    cols = np.reshape(np.moveaxis(d, -1, 0), (n, -1))
    resid = cols - A @ np.linalg.lstsq(A, cols, rcond=None)[0]
    return np.moveaxis(np.reshape(resid, (n,) + np.shape(d)[:-1]), 0, -1)


def _csd(x, y, same, fs, window, nperseg, noverlap, nfft, detrend, return_onesided, scaling, axis, average):
    """SciPy's csd (welch's, with y = x): its ShortTimeFFT segments, scaled window, transforms and average.
    Returns (f, Pxy), Pxy real when ``same``."""
    import scipy.fft as sp_fft

    ss = _ss()
    px = np.asarray(bottom(_dense(x)))
    py = px if same else np.asarray(bottom(_dense(y)))
    traced_window = _window_traced(window)
    if traced_window and isinstance(window, tuple):
        # (a (name, parameter) window with a traced parameter, ('kaiser', beta): its samples as SciPy makes them for
        # the segments, periodic, differentiated in the parameter by signal_resample.get_window: the audio tester)
        from .signal_resample import get_window

        length = max(px.shape[int(axis)], 1 if same else py.shape[int(axis)])
        window = get_window(window, min(int(nperseg) if nperseg is not None else 256, length))
    if traced_window:  # (a window given as traced samples: a learned window, differentiated)
        window = _dense(window)
    # SciPy's own call on the plain values: its checks (errors, warnings) and its frequencies
    f, plain = ss.csd(px, py, fs=bottom(fs), window=np.array(bottom(window)) if traced_window else window,
                      nperseg=nperseg, noverlap=noverlap, nfft=nfft, detrend=detrend, return_onesided=return_onesided,
                      scaling=scaling, axis=axis, average=average)
    if px.size == 0 or py.size == 0:
        return f, plain
    axis = int(axis)
    x = _dense(x)
    y = x if same else _dense(y)
    n = px.shape[axis] if same else max(px.shape[axis], py.shape[axis])
    if isinstance(window, (str, tuple)):
        nperseg = min(int(nperseg) if nperseg is not None else 256, n)
        win = ss.get_window(window, nperseg)
    else:
        win = window if traced_window else np.asarray(window)
        nperseg = len(win) if nperseg is None else nperseg
    nfft = int(nfft) if nfft is not None else nperseg
    noverlap = int(noverlap) if noverlap is not None else nperseg // 2
    onesided = return_onesided and not np.iscomplexobj(px)
    if not same:  # (the shorter one padded with zeros)
        x, y = (v if np.shape(v)[axis] == n else np.concatenate(
            (v, np.zeros(_with(np.shape(v), axis, n - np.shape(v)[axis]))), axis=axis) for v in (x, y))
    hop = nperseg - noverlap
    # (a copy of the window: SciPy makes the one it is given read-only, the caller's array; regress109)
    sft = ss.ShortTimeFFT(np.array(bottom(win)), hop, bottom(fs), fft_mode="onesided" if onesided else "twosided",
                          mfft=nfft, scale_to={"spectrum": "magnitude", "density": "psd"}[scaling], phase_shift=None)
    scaled = sft.win
    if traced_window:  # (SciPy's scaled window, of the traced samples: ShortTimeFFT.scale_to)
        scaled = (win * (1 / np.sqrt(np.sum(np.real(win) ** 2 + np.imag(win) ** 2) / (1 / fs)))
                  if scaling == "density" else win / np.sum(win))
    if isinstance(fs, Tracer):  # (SciPy's factors, with T = 1 / fs traced)
        if scaling == "density" and not traced_window:
            scaled = win * (1 / np.sqrt(sum(win.real ** 2 + win.imag ** 2) / (1 / fs)))
        T = 1 / fs
        k = np.arange(nfft // 2 + 1) if onesided else np.concatenate(
            (np.arange(0, (nfft - 1) // 2 + 1), np.arange(-(nfft // 2), 0)))
        f = k * (1.0 / (nfft * T))
    segments = hop * np.arange((n - noverlap) // hop)[:, None] + np.arange(nperseg)

    def stft(v):  # (..., segment, frequency)
        frames = _detrended(np.moveaxis(v, axis, -1)[..., segments], None if detrend is False else detrend)
        return (sp_fft.rfft if onesided else sp_fft.fft)(frames * np.conj(scaled), n=nfft, axis=-1)

    sx = stft(x)
    pxy = np.real(sx) ** 2 + np.imag(sx) ** 2 if same else stft(y) * np.conj(sx)
    if onesided:
        double = np.ones(np.shape(pxy)[-1])
        double[1:-1 if nfft % 2 == 0 else None] = 2
        pxy = pxy * double
    m = np.shape(pxy)[-2]
    if m > 1:
        if average == "median":
            from scipy.signal._spectral_py import _median_bias

            bias = _median_bias(m)
            if np.iscomplexobj(bottom(pxy)):
                pxy = np.median(np.real(pxy), axis=-2) + np.median(np.imag(pxy), axis=-2) * 1j
            else:
                pxy = np.median(pxy, axis=-2)
            pxy = pxy / bias
        else:
            pxy = np.mean(pxy, axis=-2)
    else:
        pxy = pxy[..., 0, :]
    if np.ndim(pxy) > 1:
        pxy = np.moveaxis(pxy, -1, axis)
    # (SciPy's cast to the inputs' complex type, single precision for float32 ones)
    return f, _as(np.real(pxy) if same else pxy, plain.dtype)


def _window_traced(window) -> bool:
    """Whether ``window`` holds traced values (samples, or a (name, parameter) tuple)."""
    parts = window if isinstance(window, (tuple, list)) else (window,)
    return any(isinstance(w, Tracer) or (isinstance(w, (list, tuple)) and _traced(*w)) for w in parts)


def csd(x, y, fs=1.0, window="hann_periodic", nperseg=None, noverlap=None, nfft=None, detrend="constant",
        return_onesided=True, scaling="density", axis=-1, average="mean"):
    """``scipy.signal.csd``: the cross power spectral density (Welch), differentiated in ``x``, ``y`` and ``fs``.

    >>> import numpy as np, mutagrad as mg
    >>> from mutagrad.scipy.signal import csd
    >>> g = mg.grad(lambda y: csd(np.ones(4), y, window="boxcar", nperseg=4, detrend=False)[1][0].real)(np.zeros(4))
    >>> g  # Pxy[0] = sum(x) sum(y) / (fs n)
    array([1., 1., 1., 1.])
    """
    if not (_traced(x, y, fs) or _window_traced(window)):
        return _ss().csd(x, y, fs, window, nperseg, noverlap, nfft, detrend, return_onesided, scaling, axis,
                         average)
    return _csd(x, y, y is x, fs, window, nperseg, noverlap, nfft, detrend, return_onesided, scaling, axis, average)


def welch(x, fs=1.0, window="hann_periodic", nperseg=None, noverlap=None, nfft=None, detrend="constant",
          return_onesided=True, scaling="density", axis=-1, average="mean"):
    """``scipy.signal.welch``: the power spectral density averaged over segments, differentiated in ``x`` and ``fs``.

    >>> import numpy as np, mutagrad as mg
    >>> from mutagrad.scipy.signal import welch
    >>> f = lambda x: welch(x, window="boxcar", nperseg=4, noverlap=0, detrend=False)[1][0]
    >>> mg.grad(f)(np.ones(8))  # the mean over 2 segments of sum(segment)² / 4
    array([1., 1., 1., 1., 1., 1., 1., 1.])
    """
    if not (_traced(x, fs) or _window_traced(window)):
        return _ss().welch(x, fs, window, nperseg, noverlap, nfft, detrend, return_onesided, scaling, axis, average)
    return _csd(x, x, True, fs, window, nperseg, noverlap, nfft, detrend, return_onesided, scaling, axis, average)


def periodogram(x, fs=1.0, window="boxcar", nfft=None, detrend="constant", return_onesided=True, scaling="density",
                axis=-1):
    """``scipy.signal.periodogram`` (one segment of ``welch``), differentiated in ``x`` and ``fs``.

    >>> import numpy as np, mutagrad as mg
    >>> from mutagrad.scipy.signal import periodogram
    >>> mg.grad(lambda x: periodogram(x, detrend=False)[1][0])(np.ones(4))  # sum(x)² / 4
    array([2., 2., 2., 2.])
    """
    if not (_traced(x, fs) or _window_traced(window)):
        return _ss().periodogram(x, fs, window, nfft, detrend, return_onesided, scaling, axis)
    x = _dense(x)
    if np.size(x) == 0:
        return _ss().periodogram(bottom(x), bottom(fs), window, nfft, detrend, return_onesided, scaling, axis)
    if window is None:
        window = "boxcar"
    n = np.shape(x)[axis]
    if nfft is None or nfft >= n:
        nperseg = n
    else:
        index = [slice(None)] * np.ndim(x)
        index[axis] = slice(None, nfft)
        x = x[tuple(index)]
        nperseg, nfft = nfft, None
    if hasattr(window, "size") and window.size != nperseg:
        raise ValueError("the size of the window must be the same size of the input on the specified axis")
    return welch(x, fs=fs, window=window, nperseg=nperseg, noverlap=0, nfft=nfft, detrend=detrend,
                 return_onesided=return_onesided, scaling=scaling, axis=axis)


def coherence(x, y, fs=1.0, window="hann_periodic", nperseg=None, noverlap=None, nfft=None, detrend="constant",
              axis=-1):
    """``scipy.signal.coherence``: |Pxy|² / (Pxx Pyy), differentiated in ``x``, ``y`` and ``fs``.

    >>> import numpy as np, mutagrad as mg
    >>> from mutagrad.scipy.signal import coherence
    >>> x = np.sin(np.arange(16.0))
    >>> g = mg.grad(lambda x: coherence(x, 2 * x, nperseg=8)[1][1])(x)  # 1 for any x: no derivative
    >>> bool(np.allclose(g, 0.0))
    True
    """
    if not (_traced(x, y, fs) or _window_traced(window)):
        return _ss().coherence(x, y, fs, window, nperseg, noverlap, nfft, detrend, axis)
    kw = {"fs": fs, "window": window, "nperseg": nperseg, "noverlap": noverlap, "nfft": nfft, "detrend": detrend,
          "axis": axis}
    freqs, pxx = welch(x, **kw)
    _, pyy = welch(y, **kw)
    _, pxy = csd(x, y, **kw)
    return freqs, np.abs(pxy) ** 2 / pxx / pyy
