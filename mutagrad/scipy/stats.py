"""``mutagrad.scipy.stats``: ``scipy.stats`` with differentiable ``norm``,
``t``, ``gamma``, ``beta``, ``expon``, ``laplace``, ``cauchy``, ``logistic``,
``uniform``, ``chi2``, ``lognorm``, ``weibull_min``, ``gumbel_r``,
``halfnorm``, ``f`` (densities, cumulative and survival functions and their
logs, most quantile functions), ``poisson``, ``nbinom``, ``binom``, ``multivariate_normal``
(densities, entropy) and ``dirichlet`` (densities); see
``mutagrad/rules/scipy/stats.py`` and the ``scipy.stats`` rows of
docs/coverage.md. Every other name is SciPy's own.

>>> import numpy as np, mutagrad as mg
>>> from mutagrad.scipy.stats import norm
>>> float(mg.grad(lambda mu: norm.logpdf(2.0, loc=mu, scale=2.0))(1.0))  # (x - mu) / scale**2
0.25
"""
from ..rules.scipy.stats import (  # noqa: F401
    beta,
    binom,
    cauchy,
    chi2,
    dirichlet,
    expon,
    f,
    gamma,
    gumbel_r,
    halfnorm,
    laplace,
    logistic,
    lognorm,
    multivariate_normal,
    nbinom,
    norm,
    poisson,
    t,
    uniform,
    weibull_min,
)


def __getattr__(name):
    import scipy.stats  # slow to import: only on first use of another name

    return getattr(scipy.stats, name)


def __dir__():
    import scipy.stats

    return sorted(set(dir(scipy.stats)) | set(globals()))
