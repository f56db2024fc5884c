"""scipy.stats distributions as compositions of differentiable operations.

``norm``, ``t``, ``gamma``, ``beta``, ``poisson`` and ``multivariate_normal``
are written with NumPy and the scipy.special functions registered in
special.py, so they need no rules of their own and every order comes for
free. ``mutagrad.scipy.stats`` exports them under SciPy's names; they take
SciPy's arguments (``x, *shapes, loc=0, scale=1``; calling one freezes it)
and fall back to SciPy for the other methods (``rvs``, ``fit``...).

Derivatives: w.r.t. ``x``, ``loc`` and ``scale`` everywhere; w.r.t. the
shape parameters for the densities (``logpdf``/``pdf``/``logpmf``/``pmf``).
Cumulative functions are differentiable w.r.t. x, loc and scale (and
Poisson's ``mu``); their derivative w.r.t. a shape parameter (t's ``df``,
gamma's ``a``, beta's ``a, b``) is not implemented (``mg.not_implemented``).
Poisson's ``k`` is data: integers, no derivative.
"""
from __future__ import annotations

import numpy as np
import scipy.special as sp

from ...core import Tracer, bottom

_LOG_SQRT_2PI = 0.5 * np.log(2 * np.pi)


def _on_support(inside, fn, z, fill, safe):
    """``fn(z)`` where the plain mask ``inside`` holds, ``fill`` elsewhere;
    ``fn`` is evaluated at ``safe`` outside so that no NaN reaches a derivative."""
    if np.all(inside):
        return fn(z)
    return np.where(inside, fn(np.where(inside, z, safe)), fill)


def _log(p):
    with np.errstate(divide="ignore"):  # log(0) = -inf, as SciPy returns it
        return np.log(p)


def _scipy_dist(name):
    import scipy.stats  # slow to import: only when a method falls back to SciPy

    return getattr(scipy.stats, name)


class _Frozen:
    """``dist(*args, **kwds)``: the methods with those parameters bound."""

    def __init__(self, dist, args, kwds):
        self.dist, self.args, self.kwds = dist, args, kwds

    def __getattr__(self, name):
        method = getattr(self.dist, name)
        if name.startswith("_") or not callable(method):
            raise AttributeError(name)
        if name in self.dist.METHODS:
            return lambda x: method(x, *self.args, **self.kwds)
        return getattr(_scipy_dist(self.dist.name)(*self.args, **self.kwds), name)


class _Distribution:
    """Common parts: argument parsing, freezing, SciPy fallback."""

    name = ""
    shapes: tuple = ()
    METHODS: tuple = ()

    def __call__(self, *args, **kwds):
        return _Frozen(self, args, kwds)

    def __getattr__(self, name):
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(_scipy_dist(self.name), name)

    def __repr__(self):
        return f"<mutagrad.scipy.stats.{self.name}>"

    def _parse(self, args, kwds, defaults):
        """(shape parameters, loc[, scale]) from SciPy's positional/keyword arguments."""
        kwds = dict(kwds)
        n = len(self.shapes)
        names = list(self.shapes) + list(defaults)
        if len(args) > len(names):
            raise TypeError(f"{self.name}: too many arguments")
        vals = dict(zip(names, args))
        for k in names[len(args):]:
            if k in kwds:
                vals[k] = kwds.pop(k)
            elif k in defaults:
                vals[k] = defaults[k]
            else:
                raise TypeError(f"{self.name}: missing shape parameter {k!r}")
        if kwds:
            raise TypeError(f"{self.name}: unexpected arguments {sorted(kwds)}")
        return [vals[k] for k in names[:n]], [vals[k] for k in names[n:]]


def _standardized(method):
    """The public ``method(x, *shapes, loc, scale)`` from ``_method(z, *shapes)``."""

    def public(self, x, *args, **kwds):
        z, shapes, scale = self._standardize(x, args, kwds)
        return self._valid_scale(getattr(self, "_" + method)(z, *shapes), scale)

    public.__name__ = public.__qualname__ = method
    return public


class _Continuous(_Distribution):
    """A location-scale family from its standardized ``_logpdf``, ``_cdf``, ``_sf``
    (z = (x - loc) / scale), as scipy.stats.rv_continuous does it."""

    METHODS = ("logpdf", "pdf", "cdf", "logcdf", "sf", "logsf")

    def _standardize(self, x, args, kwds):
        shapes, (loc, scale) = self._parse(args, kwds, {"loc": 0.0, "scale": 1.0})
        return (x - loc) / scale, shapes, scale

    def _valid_scale(self, res, scale):
        bad = bottom(scale) <= 0
        return np.where(bad, np.nan, res) if np.any(bad) else res

    def logpdf(self, x, *args, **kwds):
        z, shapes, scale = self._standardize(x, args, kwds)
        return self._valid_scale(self._logpdf(z, *shapes) - np.log(scale), scale)

    def pdf(self, x, *args, **kwds):
        return np.exp(self.logpdf(x, *args, **kwds))

    cdf = _standardized("cdf")
    sf = _standardized("sf")
    logcdf = _standardized("logcdf")
    logsf = _standardized("logsf")

    def _logcdf(self, z, *shapes):
        return _log(self._cdf(z, *shapes))

    def _logsf(self, z, *shapes):
        return _log(self._sf(z, *shapes))


class _Norm(_Continuous):
    """``scipy.stats.norm``.

    >>> import mutagrad as mg
    >>> from mutagrad.scipy.stats import norm
    >>> float(mg.grad(norm.logpdf)(1.5))  # -x
    -1.5
    """

    name = "norm"
    METHODS = _Continuous.METHODS + ("ppf",)

    def _logpdf(self, z):
        return -0.5 * z * z - _LOG_SQRT_2PI

    def _cdf(self, z):
        return sp.ndtr(z)

    def _sf(self, z):
        return sp.ndtr(-z)

    def _logcdf(self, z):
        return sp.log_ndtr(z)

    def _logsf(self, z):
        return sp.log_ndtr(-z)

    def ppf(self, q, loc=0.0, scale=1.0):
        return loc + scale * sp.ndtri(q)


class _T(_Continuous):
    """``scipy.stats.t`` (shape ``df``).

    >>> import mutagrad as mg
    >>> from mutagrad.scipy.stats import t
    >>> round(float(mg.grad(t.cdf)(0.0, 1.0)), 12)  # Cauchy density at 0: 1/pi
    0.318309886184
    """

    name = "t"
    shapes = ("df",)

    def _logpdf(self, z, df):
        # log Gamma((df+1)/2) - log Gamma(df/2) - log(df pi)/2 as -betaln(1/2, df/2) - log(df)/2:
        # the difference of the two gammaln cancelled for large df (+1.91 instead of -1.16 at
        # df = 1e15); df = inf is the normal density, as SciPy has it
        inf = np.isinf(np.asarray(bottom(df)))
        if not inf.any():
            return -sp.betaln(0.5, df / 2) - 0.5 * np.log(df) - (df + 1) / 2 * np.log1p(z * z / df)
        d = np.where(inf, 1.0, df)
        t = -sp.betaln(0.5, d / 2) - 0.5 * np.log(d) - (d + 1) / 2 * np.log1p(z * z / d)
        return np.where(inf, -0.5 * z * z - 0.5 * np.log(2 * np.pi), t)

    def _cdf(self, z, df):
        return sp.stdtr(df, z)

    def _sf(self, z, df):
        return sp.stdtr(df, -z)


class _Gamma(_Continuous):
    """``scipy.stats.gamma`` (shape ``a``), supported on x >= loc.

    >>> import mutagrad as mg
    >>> from mutagrad.scipy.stats import gamma
    >>> float(mg.grad(gamma.logpdf)(2.0, 1.0))  # exponential: d/dx (-x)
    -1.0
    """

    name = "gamma"
    shapes = ("a",)

    def _logpdf(self, z, a):
        return _on_support(bottom(z) >= 0, lambda z: sp.xlogy(a - 1, z) - z - sp.gammaln(a), z, -np.inf, 1.0)

    def _cdf(self, z, a):
        return sp.gammainc(a, np.clip(z, 0.0, None))

    def _sf(self, z, a):
        return sp.gammaincc(a, np.clip(z, 0.0, None))


class _Beta(_Continuous):
    """``scipy.stats.beta`` (shapes ``a, b``), supported on [loc, loc + scale].

    >>> import mutagrad as mg
    >>> from mutagrad.scipy.stats import beta
    >>> float(mg.grad(beta.cdf)(0.25, 1.0, 1.0))  # uniform
    1.0
    """

    name = "beta"
    shapes = ("a", "b")

    def _logpdf(self, z, a, b):
        zb = bottom(z)
        return _on_support((zb >= 0) & (zb <= 1),
                           lambda z: sp.xlogy(a - 1, z) + sp.xlog1py(b - 1, -z) - sp.betaln(a, b), z, -np.inf, 0.5)

    def _cdf(self, z, a, b):
        return sp.betainc(a, b, np.clip(z, 0.0, 1.0))

    def _sf(self, z, a, b):
        return sp.betaincc(a, b, np.clip(z, 0.0, 1.0))


class _Poisson(_Distribution):
    """``scipy.stats.poisson`` (shape ``mu``; ``k`` is data, not differentiated).

    >>> import mutagrad as mg
    >>> from mutagrad.scipy.stats import poisson
    >>> float(mg.grad(lambda mu: poisson.logpmf(3, mu))(1.5))  # k / mu - 1
    1.0
    """

    name = "poisson"
    shapes = ("mu",)
    METHODS = ("logpmf", "pmf", "cdf", "logcdf", "sf", "logsf")

    def _k(self, k, args, kwds):
        (mu,), (loc,) = self._parse(args, kwds, {"loc": 0})
        return np.asarray(bottom(k)) - bottom(loc), mu

    def logpmf(self, k, *args, **kwds):
        k, mu = self._k(k, args, kwds)
        valid = (k >= 0) & (k == np.floor(k))
        return _on_support(valid, lambda k: sp.xlogy(k, mu) - sp.gammaln(k + 1) - mu, k, -np.inf, 0.0)

    def pmf(self, k, *args, **kwds):
        return np.exp(self.logpmf(k, *args, **kwds))

    def cdf(self, k, *args, **kwds):
        k, mu = self._k(k, args, kwds)
        k = np.floor(k)
        return _on_support(k >= 0, lambda k: sp.gammaincc(k + 1, mu), k, 0.0, 0.0)

    def sf(self, k, *args, **kwds):
        k, mu = self._k(k, args, kwds)
        k = np.floor(k)
        return _on_support(k >= 0, lambda k: sp.gammainc(k + 1, mu), k, 1.0, 0.0)

    def logcdf(self, k, *args, **kwds):
        return _log(self.cdf(k, *args, **kwds))

    def logsf(self, k, *args, **kwds):
        return _log(self.sf(k, *args, **kwds))


class _MultivariateNormal(_Distribution):
    """``scipy.stats.multivariate_normal``: ``logpdf``/``pdf`` w.r.t. ``x``,
    ``mean`` and ``cov`` (symmetric positive definite; the gradient w.r.t.
    ``cov`` is that of the formula with all entries free, as autograd's).

    With ``allow_singular=True`` a positive semidefinite ``cov`` is allowed,
    as in SciPy: the eigenvalues at most 1e6 machine epsilons times the
    largest are zero, the density is that of the normal on the support
    (``mean`` + the range of ``cov``) with the pseudo-determinant and the
    pseudo-inverse, and -inf (pdf 0) off it. Its derivative w.r.t. ``cov``
    is that of the formula with the pseudo-inverse (``np.linalg.pinv``'s
    rule), exact where the rank of ``cov`` is constant near the point.

    >>> import numpy as np, mutagrad as mg
    >>> from mutagrad.scipy.stats import multivariate_normal
    >>> mg.grad(multivariate_normal.logpdf)(np.array([1.0, 2.0]), np.zeros(2), np.eye(2))
    array([-1., -2.])
    >>> mg.grad(lambda x: multivariate_normal.logpdf(x, cov=np.diag([1.0, 0.0]), allow_singular=True))(
    ...     np.array([1.0, 0.0]))
    array([-1.,  0.])
    """

    name = "multivariate_normal"
    METHODS = ("logpdf", "pdf")

    def __call__(self, mean=None, cov=1, allow_singular=False, seed=None):
        return _Frozen(self, (), {"mean": mean, "cov": cov, "allow_singular": allow_singular})

    def logpdf(self, x, mean=None, cov=1, allow_singular=False):
        x, mean, cov, d = _mvn_parameters(x, mean, cov)
        r = x - mean
        s, u, eps = _mvn_spectrum(cov, allow_singular)
        keep = s > eps
        if keep.all():
            maha = np.sum(r * np.linalg.solve(cov, np.expand_dims(r, -1))[..., 0], axis=-1)
            return -0.5 * (d * np.log(2 * np.pi) + np.linalg.slogdet(cov)[1] + maha)
        # SciPy's _PSD: rank, pseudo-determinant and pseudo-inverse over the eigenvalues above eps
        rank = int(np.count_nonzero(keep))
        if isinstance(cov, Tracer):
            cp = np.linalg.pinv(cov, rcond=_psd_cond(s.dtype))
            # log pdet(C) = log det(C + I - C C⁺) where the rank is constant; - tr((I - C C⁺) C), 0 there,
            # makes the derivative tr(C⁺ dC) in every direction
            free = np.eye(d) - np.matmul(cov, cp)
            log_pdet = np.linalg.slogdet(cov + free)[1] - np.trace(np.matmul(free, cov))
            maha = np.sum(r * np.matmul(cp, np.expand_dims(r, -1))[..., 0], axis=-1)
        else:
            w = u[:, keep] / np.sqrt(s[keep])
            log_pdet = np.sum(np.log(s[keep]))
            maha = np.sum(np.square(np.matmul(r, w)), axis=-1)
        out = -0.5 * (rank * np.log(2 * np.pi) + log_pdet + maha)
        inside = np.linalg.norm(np.matmul(bottom(r), u[:, ~keep]), axis=-1) < 1e3 * eps
        return out if inside.all() else np.where(inside, out, -np.inf)

    def pdf(self, x, mean=None, cov=1, allow_singular=False):
        return np.exp(self.logpdf(x, mean, cov, allow_singular))


def _psd_cond(dtype):
    """SciPy's relative cutoff for a zero eigenvalue (scipy.stats._multivariate._eigvalsh_to_eps)."""
    return (1e3 if dtype == np.float32 else 1e6) * np.finfo(dtype).eps


def _mvn_spectrum(cov, allow_singular):
    """The plain eigendecomposition of ``cov`` and SciPy's cutoff for a zero
    eigenvalue; SciPy's errors for a matrix that is not positive semidefinite,
    or is singular without ``allow_singular``."""
    s, u = np.linalg.eigh(np.asarray(bottom(cov)))
    eps = _psd_cond(s.dtype) * np.max(np.abs(s))
    if np.min(s) < -eps:
        raise ValueError("The input matrix must be symmetric positive semidefinite.")
    if not allow_singular and np.any(s <= eps):
        raise np.linalg.LinAlgError("When `allow_singular is False`, the input matrix must be "
                                    "symmetric positive definite.")
    return s, u, eps


def _mvn_parameters(x, mean, cov):
    """SciPy's conventions: a scalar ``cov`` is a multiple of I, a vector its
    diagonal; with d = 1 every entry of ``x`` is a sample."""
    if np.ndim(cov) == 0:
        d = np.shape(mean)[-1] if mean is not None and np.ndim(mean) else 1
        cov = cov * np.eye(d)
    elif np.ndim(cov) == 1:
        d = np.shape(cov)[0]
        cov = np.eye(d) * cov
    else:
        d = np.shape(cov)[-1]
    if d == 1 and (np.ndim(x) == 0 or np.shape(x)[-1] != 1):
        x = np.expand_dims(x, -1)
    return x, (0.0 if mean is None else mean), cov, d


norm = _Norm()
t = _T()
gamma = _Gamma()
beta = _Beta()
poisson = _Poisson()
multivariate_normal = _MultivariateNormal()
