"""``mutagrad.scipy.stats``: ``scipy.stats`` with differentiable ``norm``,
``t``, ``gamma``, ``beta``, ``poisson`` and ``multivariate_normal``
(densities, cumulative and survival functions and their logs; see
``mutagrad/rules/scipy/stats.py``); every other name is SciPy's own.

>>> import numpy as np, mutagrad as mg
>>> from mutagrad.scipy.stats import norm
>>> float(mg.grad(lambda mu: norm.logpdf(2.0, loc=mu, scale=2.0))(1.0))  # (x - mu) / scale**2
0.25
"""
from ..rules.scipy.stats import beta, gamma, multivariate_normal, norm, poisson, t  # noqa: F401


def __getattr__(name):
    import scipy.stats  # slow to import: only on first use of another name

    return getattr(scipy.stats, name)


def __dir__():
    import scipy.stats

    return sorted(set(dir(scipy.stats)) | set(globals()))
