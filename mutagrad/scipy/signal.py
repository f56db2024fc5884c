"""``mutagrad.scipy.signal``: ``scipy.signal`` with a differentiable ``lfilter``
(in the coefficients ``b`` and ``a``, the signal and the initial state ``zi``,
along any axis, with the final state ``zf``); every other name is SciPy's own
(and raises mutagrad's escape error on a traced array).

>>> import numpy as np, mutagrad as mg
>>> import mutagrad.scipy.signal as mss
>>> float(mg.grad(lambda p: mss.lfilter([1.0], [1.0, -p], np.ones(3))[-1])(0.5))  # d/dp (1 + p + p²)
2.0
"""
import scipy.signal as _ss

from ..rules.scipy.signal import lfilter  # noqa: F401


def __getattr__(name):
    return getattr(_ss, name)


def __dir__():
    return sorted(set(dir(_ss)) | set(globals()))
