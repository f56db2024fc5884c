"""``mutagrad.scipy.special``: ``scipy.special`` with differentiable
``logsumexp``, ``softmax``, ``log_softmax``, ``polygamma``, ``factorial``,
``multigammaln`` and ``spherical_jn``, ``spherical_yn``, ``spherical_in``,
``spherical_kn``; every other name is SciPy's own (its ufuncs dispatch on
traced arrays; see ``mutagrad/rules/scipy/special.py`` for which have rules).

>>> import numpy as np, mutagrad as mg
>>> import mutagrad.scipy.special as msp
>>> float(mg.grad(msp.gammaln)(1.0))  # digamma(1) = -Euler's gamma
-0.5772156649015329
"""
import scipy.special as _sp

from ..rules.scipy.special import (  # noqa: F401
    factorial,
    log_softmax,
    logsumexp,
    multigammaln,
    polygamma,
    softmax,
    spherical_in,
    spherical_jn,
    spherical_kn,
    spherical_yn,
)


def __getattr__(name):
    # (SciPy's own name; with SCIPY_ARRAY_API=1 a ufunc SciPy wraps in a Python function, which converts a
    # traced array, is the ufunc itself)
    from ..rules.scipy.special import sp

    return getattr(sp, name)


def __dir__():
    return sorted(set(dir(_sp)) | set(globals()))
