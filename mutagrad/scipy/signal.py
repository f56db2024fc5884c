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

every other name is SciPy's own (and raises mutagrad's escape error on a traced array).

>>> import numpy as np, mutagrad as mg
>>> import mutagrad.scipy.signal as mss
>>> float(mg.grad(lambda p: mss.lfilter([1.0], [1.0, -p], np.ones(3))[-1])(0.5))  # d/dp (1 + p + p²)
2.0
>>> mg.grad(lambda x: np.sum(mss.convolve(x, np.array([1.0, -1.0]), mode="same") ** 2))(np.array([1.0, 2.0, 4.0]))
array([ 0., -2.,  4.])
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


def __getattr__(name):
    return getattr(_ss, name)


def __dir__():
    return sorted(set(dir(_ss)) | set(globals()))
