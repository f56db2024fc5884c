"""``mutagrad.scipy.signal``: ``scipy.signal`` with differentiable

* ``lfilter`` (in the coefficients ``b`` and ``a``, the signal and the initial state ``zi``,
  along any axis, with the final state ``zf``);
* ``convolve``, ``correlate`` (N-dimensional, every ``mode`` and ``method``), ``fftconvolve``,
  ``oaconvolve`` (along ``axes``) and ``convolve2d``, ``correlate2d`` (every ``boundary``), in
  both inputs, real or complex, with SciPy's values (its own call) and its 'valid'-mode swap;
* ``filtfilt`` (every ``padtype``, ``padlen``, ``method='pad'`` or ``'gust'`` with ``irlen``),
  ``sosfilt`` (with ``zi`` and ``zf``), ``sosfiltfilt``, ``lfilter_zi``, ``sosfilt_zi`` (in the
  coefficients ``b``, ``a``, ``sos``, the signal and ``zi``) and ``hilbert`` (``N``, ``axis``),
  written as SciPy writes them with ``lfilter``, ``np.linalg.solve``/``lstsq`` and ``scipy.fft``:
  SciPy's values to rounding (``hilbert``'s bit for bit), its own call when nothing is traced;
* the frequency responses ``freqz`` (SciPy's FFT or polynomial path), ``freqz_sos`` (``sosfreqz``),
  ``freqz_zpk``, ``freqs``, ``freqs_zpk`` and ``group_delay`` (in the coefficients, zeros, poles and
  gain, the frequencies ``worN`` and ``fs``);
* filter design: ``iirnotch``, ``iirpeak`` (in ``w0``, ``Q``, ``fs``), ``bilinear``, ``bilinear_zpk``,
  ``lp2lp_zpk``, ``lp2hp_zpk``, ``lp2bp_zpk``, ``lp2bs_zpk``, ``zpk2tf``, ``tf2zpk``, ``zpk2sos`` (SciPy's
  pairing, made on the plain values) and ``iirfilter``, ``butter``, ``cheby1``, ``cheby2``, ``ellip``,
  ``bessel`` (in ``Wn``, ``fs`` and the Chebyshev ripples ``rp``, ``rs``; every ``btype`` and ``output``);
* ``savgol_coeffs`` (in ``delta``) and ``savgol_filter`` (in ``x``, ``delta``, ``cval``; every mode);
* the spectral estimates ``periodogram``, ``welch``, ``csd`` and ``coherence`` (in the signals and
  ``fs``; ``detrend`` 'constant', 'linear', a function or False, ``scaling``, ``return_onesided``,
  ``average`` 'mean' or 'median'), written as SciPy writes them: its values to rounding, its own call
  when nothing is traced;
* the linear time-invariant systems: ``tf2ss``, ``ss2tf``, ``zpk2ss``, ``ss2zpk``, ``cont2discrete``
  (every method: 'zoh', 'foh', 'impulse' by ``scipy.linalg.expm``, 'gbt', 'bilinear', 'euler',
  'backward_diff'; every system form), ``dlsim`` and ``lsim`` (equally spaced times), in the
  matrices, coefficients, zeros, poles and gain, ``dt``, the input and the initial state;
* multirate filtering and resampling: ``upfirdn`` (in ``h``, ``x``, ``cval``; every mode),
  ``resample_poly`` (in ``x``, a window given as taps or a traced window parameter; every ``padtype``)
  and ``resample`` (in ``x``, ``t`` and the window);
* FIR design: ``firwin`` (in ``cutoff``, ``width``, ``fs``) and ``firwin2`` (in ``freq``, ``gain``);
* the short-time Fourier transforms ``stft`` and ``istft`` (SciPy's legacy functions; in the signal or the
  transform, ``fs`` and the window as samples or by a traced parameter);
* ``get_window`` with traced window parameters (kaiser's beta, gaussian's std, general_gaussian's p and
  sig, tukey's alpha, exponential's center and tau, chebwin's at, general_hamming's alpha,
  general_cosine's coefficients, kaiser_bessel_derived's beta), and those windows in ``windows``
  (``mutagrad.scipy.signal.windows``: SciPy's scipy.signal.windows for every other name);

every other name is SciPy's own (and raises mutagrad's escape error on a traced array).

>>> import numpy as np, mutagrad as mg
>>> import mutagrad.scipy.signal as mss
>>> float(mg.grad(lambda p: mss.lfilter([1.0], [1.0, -p], np.ones(3))[-1])(0.5))  # d/dp (1 + p + p²)
2.0
>>> mg.grad(lambda x: np.sum(mss.convolve(x, np.array([1.0, -1.0]), mode="same") ** 2))(np.array([1.0, 2.0, 4.0]))
array([ 0., -2.,  4.])
>>> float(mg.grad(lambda p: np.abs(mss.freqz([1.0], [1.0, -p], worN=[0.0])[1][0]))(0.5))  # 1/(1-p)
4.0
"""
import scipy.signal as _ss

from ..rules.scipy.signal import (  # noqa: F401
    convolve,
    convolve2d,
    correlate,
    correlate2d,
    fftconvolve,
    filtfilt,
    hilbert,
    lfilter,
    lfilter_zi,
    oaconvolve,
    sosfilt,
    sosfilt_zi,
    sosfiltfilt,
)
from ..rules.scipy.signal_design import (  # noqa: F401
    bessel,
    bilinear,
    bilinear_zpk,
    butter,
    cheby1,
    cheby2,
    coherence,
    csd,
    ellip,
    freqs,
    freqs_zpk,
    freqz,
    freqz_sos,
    freqz_zpk,
    group_delay,
    iirfilter,
    iirnotch,
    iirpeak,
    lp2bp_zpk,
    lp2bs_zpk,
    lp2hp_zpk,
    lp2lp_zpk,
    periodogram,
    savgol_coeffs,
    savgol_filter,
    sosfreqz,
    tf2zpk,
    welch,
    zpk2sos,
    zpk2tf,
)
from ..rules.scipy.signal_lti import (  # noqa: F401
    cont2discrete,
    dlsim,
    lsim,
    ss2tf,
    ss2zpk,
    tf2ss,
    zpk2ss,
)
from ..rules.scipy.signal_resample import (  # noqa: F401
    firwin,
    firwin2,
    get_window,
    istft,
    resample,
    resample_poly,
    stft,
    upfirdn,
    windows,
)


def __getattr__(name):
    return getattr(_ss, name)


def __dir__():
    return sorted(set(dir(_ss)) | set(globals()))
