"""scipy.stats distributions as compositions of differentiable operations.

Continuous, location-scale (``x, *shapes, loc=0, scale=1``): ``norm``,
``t`` (df), ``gamma`` (a), ``beta`` (a, b), ``expon``, ``laplace``,
``cauchy``, ``logistic``, ``uniform``, ``chi2`` (df), ``lognorm`` (s),
``weibull_min`` (c), ``gumbel_r``, ``halfnorm``, ``f`` (dfn, dfd): ``logpdf``,
``pdf``, ``cdf``, ``logcdf``, ``sf``, ``logsf``, ``ppf`` and ``isf``. Discrete:
``poisson`` (mu), ``nbinom`` and ``binom`` (n, p): ``logpmf``, ``pmf`` and the
cumulative functions. Multivariate: ``multivariate_normal`` (``logpdf``,
``pdf``, ``entropy``) and ``dirichlet`` (``logpdf``, ``pdf``).

They are written with NumPy and the scipy.special functions registered in
special.py, so they need no rules of their own and every order comes for
free. ``mutagrad.scipy.stats`` exports them under SciPy's names; they take
SciPy's arguments (calling one freezes it), formulas (log1p, expm1,
log_ndtr... where SciPy has them) and conventions: off the support the
density is 0 (logpdf -inf) and the cumulative functions are 0 or 1, with
zero derivatives (the formulas are evaluated at a point inside the support
there, so no NaN reaches a derivative); an invalid parameter (scale <= 0, a
shape parameter <= 0) or a NaN gives NaN. The other methods (``rvs``,
``fit``, ``mean``...) are SciPy's own.

Derivatives: w.r.t. ``x``, ``loc`` and ``scale`` everywhere, and w.r.t. the
shape parameters. Those of the cumulative functions and quantiles of ``t``,
``beta``, ``f``, ``nbinom`` and ``binom`` are scipy.special's incomplete beta
functions' (and their inverses'), and those of ``gamma`` and ``chi2`` the
incomplete gamma function's: their first derivative w.r.t. df, a, b, dfn,
dfd, n is there, their second a ``NotImplementedTangent``
(``SHAPE_SECOND_DERIVATIVE_NOT_IMPLEMENTED`` lists those methods;
docs/coverage.md shows them). Poisson's ``k`` is data: integers, no derivative. Where the
value is an infinite density (chi2 with df < 2 at x = loc) the derivatives
have no value and may be NaN.
"""
from __future__ import annotations

import numpy as np

from ...core import Tracer, bottom, strong_operand
from ..reductions import _with_value
from .special import sp

_LOG_2 = np.log(2.0)
_LOG_PI = np.log(np.pi)
_LOG_2PI = np.log(2 * np.pi)
_LOG_SQRT_2PI = 0.5 * np.log(2 * np.pi)
_SQRT_2PI = np.sqrt(2 * np.pi)
_CUMULATIVE = ("cdf", "logcdf", "sf", "logsf")


def _on_support(inside, fn, z, fill, safe):
    """``fn(z)`` where the plain mask ``inside`` holds, ``fill`` elsewhere;
    ``fn`` is evaluated at ``safe`` outside so that no NaN reaches a derivative."""
    if np.all(inside):
        return fn(z)
    return np.where(inside, fn(np.where(inside, z, safe)), fill)


def _piecewise(x, *pieces):
    """``f(x)`` where the plain mask ``cond`` holds, for each ``(cond, f, safe)`` of
    ``pieces`` (the masks do not overlap and cover ``x``). Each ``f`` is evaluated at
    ``safe``, a point of its domain, where it does not apply: no inf or NaN of a branch
    that is not taken reaches a derivative."""
    res = None
    for cond, fn, safe in pieces:
        if np.all(cond):  # (an empty x too)
            return fn(x)
        if np.any(cond):
            val = fn(np.where(cond, x, safe))
            res = val if res is None else np.where(cond, val, res)
    return res


def _nan_where(bad, res):
    """SciPy's NaN (its ``badvalue``) where the plain mask ``bad`` holds; a plain 0-d
    result as a NumPy scalar, as SciPy returns it."""
    if np.any(bad):
        res = np.where(bad, np.nan, res)
    return res[()] if type(res) is np.ndarray and res.ndim == 0 else res


def _plain(v):
    """``v`` as SciPy's methods take it (np.asarray): a list or tuple as an array, a Python number as
    a NumPy one (of float64 or int64, which a float32 array meets as such: float64 results), an array
    in its own dtype (SciPy computes z = (x - loc) / scale in the operands' dtypes, then in float64
    at least: see _off_support)."""
    if isinstance(v, (list, tuple)):
        return np.asarray(v)
    if type(v) is bool:  # (an integer to SciPy's formulas: np.negative refuses NumPy's bools)
        return np.int64(v)
    return strong_operand(v)  # (a Python number, or a traced one: a strong NumPy value, as np.asarray makes it)


def _at_least_f64(v):
    """``v`` in float64 if it is of a narrower float dtype (SciPy's result arrays are float64)."""
    dt = getattr(v, "dtype", None)
    return v.astype(np.float64) if dt is not None and dt.kind == "f" and dt.itemsize < 8 else v


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
            if name in self.dist.PARAMETER_METHODS:  # of the parameters only (entropy)
                return lambda: getattr(self.dist, "_" + name)(*self.args, **self.kwds)
            return lambda x: method(x, *self.args, **self.kwds)
        return getattr(_scipy_dist(self.dist.name)(*self.args, **self.kwds), name)


class _Distribution:
    """Common parts: argument parsing, freezing, SciPy fallback."""

    name = ""
    shapes: tuple = ()
    METHODS: tuple = ()  # the differentiable methods, listed in docs/coverage.md
    PARAMETER_METHODS: tuple = ()  # those of them that take no x (frozen: ``_name(*parameters)``)
    SHAPE_SECOND_DERIVATIVE_NOT_IMPLEMENTED: tuple = ()  # methods with a first one only (gammainc's in a)

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
        return [_plain(vals[k]) for k in names[:n]], [_plain(vals[k]) for k in names[n:]]


def _off_support(method, closed, below, above):
    """The public ``method(x, *shapes, loc=0, scale=1)`` from the standardized
    ``_method(z, *shapes)``, as scipy.stats.rv_continuous has it: evaluated on the
    support (closed, or open as SciPy's cumulative functions), ``below`` under it and
    ``above`` over it."""

    def public(self, x, *args, **kwds):
        shapes, loc, scale, bad = self._parameters(args, kwds)
        z = _at_least_f64((_plain(x) - loc) / scale)  # (SciPy's dtype: np.promote_types(x.dtype, float64))
        zb = np.asarray(bottom(z))
        a, b = self._a, self._b
        inside = (zb >= a) & (zb <= b) if closed and not self._open else (zb > a) & (zb < b)
        if method == "logpdf":
            def fn(z, *shapes):  # (so that off the support the value is a constant -inf)
                return self._logpdf(z, *shapes) - np.log(scale)
        elif method == "pdf":
            def fn(z, *shapes):  # (SciPy's _pdf(z) / scale: a float32 scale's log would round)
                return np.exp(self._logpdf(z, *shapes)) / scale
        else:
            fn = getattr(self, "_" + method)
        off = below if below == above else np.where(zb >= b, above, below)
        res = _on_support(inside, lambda z: fn(z, *shapes), z, off, self._inner)
        return _nan_where(bad | np.isnan(zb), res)

    public.__name__ = public.__qualname__ = method
    return public


def _quantile(self, q, *args, **kwds):
    """``ppf(q, *shapes, loc=0, scale=1)`` from the standardized ``_ppf`` as SciPy has
    it: the ends of the support at q = 0 and 1, NaN outside [0, 1]."""
    return _inverse(self, self._ppf, (self._a, self._b), q, args, kwds)


def _inverse_sf(self, q, *args, **kwds):
    """``isf(q, *shapes, loc=0, scale=1)``, the inverse of the survival function, from the
    standardized ``_isf`` (``_ppf(1 - q)`` unless the class has SciPy's own formula) as SciPy has it."""
    return _inverse(self, self._isf, (self._b, self._a), q, args, kwds)


def _inverse(self, fn, ends, q, args, kwds):
    shapes, loc, scale, bad = self._parameters(args, kwds)
    q = _plain(q)  # (in its own dtype: SciPy's fn(q) * scale + loc, put into a float64 array)
    qb = np.asarray(bottom(q))
    inside = (qb > 0) & (qb < 1)
    if np.all(inside):
        res = _at_least_f64(fn(q, *shapes) * scale + loc)
    else:
        res = _at_least_f64(fn(np.where(inside, q, 0.5), *shapes) * scale + loc)
        at = np.where(qb == 0, self._end(ends[0], loc, scale), np.where(qb == 1, self._end(ends[1], loc, scale), np.nan))
        res = np.where(inside, res, at)
    return _nan_where(bad | np.isnan(np.asarray(bottom(loc))), res)


class _Continuous(_Distribution):
    """A location-scale family from its standardized ``_logpdf``, ``_cdf``, ``_sf``
    (z = (x - loc) / scale; optional ``_logcdf``, ``_logsf``, and ``_ppf`` with
    ``ppf = _quantile``) on the support ``[_a, _b]``, as scipy.stats.rv_continuous
    does it."""

    METHODS = ("logpdf", "pdf", "cdf", "logcdf", "sf", "logsf")
    _a, _b = -np.inf, np.inf  # the standardized support, SciPy's a and b
    _open = False  # the density on the open support too (SciPy's _open_support_mask: lognorm)

    @property
    def _inner(self):
        """A point inside the support, where the formulas are evaluated off it."""
        a, b = self._a, self._b
        if np.isfinite(a):
            return (a + b) / 2 if np.isfinite(b) else a + 1.0
        return b - 1.0 if np.isfinite(b) else 0.0

    @staticmethod
    def _end(end, loc, scale):
        """An end of the support, SciPy's ``end * scale + loc`` (an infinite one alone:
        its derivative w.r.t. scale would be inf, and NaN where masked off)."""
        return end if np.isinf(end) else end * scale + loc

    def _argcheck(self, *shapes):
        """Where the (plain) shape parameters are valid: all positive, SciPy's default."""
        ok = np.True_
        for s in shapes:
            ok = ok & (s > 0)
        return ok

    def _parameters(self, args, kwds):
        """(shapes, loc, scale, bad) from SciPy's arguments. Where ``bad`` (an invalid
        parameter) the result is NaN; the formulas see scale 1 and shapes 1 there, so
        that no NaN reaches a derivative elsewhere."""
        shapes, (loc, scale) = self._parse(args, kwds, {"loc": 0.0, "scale": 1.0})
        bad = ~self._argcheck(*(np.asarray(bottom(s)) for s in shapes)) | ~(np.asarray(bottom(scale)) > 0)
        if np.any(bad):
            scale = np.where(bad, 1.0, scale)
            shapes = [np.where(bad, 1.0, s) for s in shapes]
        return shapes, loc, scale, bad

    logpdf = _off_support("logpdf", True, -np.inf, -np.inf)
    cdf = _off_support("cdf", False, 0.0, 1.0)
    logcdf = _off_support("logcdf", False, -np.inf, 0.0)
    sf = _off_support("sf", False, 1.0, 0.0)
    logsf = _off_support("logsf", False, 0.0, -np.inf)

    pdf = _off_support("pdf", True, 0.0, 0.0)

    def _median(self, *shapes):
        """The standardized median at the plain shape parameters."""
        return self._ppf(0.5, *shapes)

    def _isf(self, q, *shapes):  # (SciPy's default; the classes with a formula of their own have it too)
        return self._ppf(1.0 - q, *shapes)

    def _logcdf(self, z, *shapes):
        # SciPy's: log(cdf) under the median, log1p(-sf) over it (log(cdf) is 0 there when cdf
        # rounds to 1); each branch evaluated at the median where the other applies
        med = self._median(*(np.asarray(bottom(s)) for s in shapes))
        low = np.asarray(bottom(z)) < med
        return _piecewise(z, (low, lambda z: _log(self._cdf(z, *shapes)), med),
                          (~low, lambda z: sp.log1p(-self._sf(z, *shapes)), med))

    def _logsf(self, z, *shapes):
        med = self._median(*(np.asarray(bottom(s)) for s in shapes))
        high = np.asarray(bottom(z)) > med
        return _piecewise(z, (high, lambda z: _log(self._sf(z, *shapes)), med),
                          (~high, lambda z: sp.log1p(-self._cdf(z, *shapes)), med))


_WITH_PPF = _Continuous.METHODS + ("ppf", "isf")


class _Symmetric(_Continuous):
    """A standardized distribution symmetric about 0: sf(z) = cdf(-z), median 0."""

    def _median(self, *shapes):
        return 0.0

    def _sf(self, z, *shapes):
        return self._cdf(-z, *shapes)

    def _logsf(self, z, *shapes):
        return self._logcdf(-z, *shapes)


class _Norm(_Symmetric):
    """``scipy.stats.norm``.

    >>> import mutagrad as mg
    >>> from mutagrad.scipy.stats import norm
    >>> float(mg.grad(norm.logpdf)(1.5))  # -x
    -1.5
    """

    name = "norm"
    METHODS = _WITH_PPF
    ppf = _quantile
    isf = _inverse_sf

    def _logpdf(self, z):
        return -0.5 * z * z - _LOG_SQRT_2PI

    def _cdf(self, z):
        return sp.ndtr(z)

    def _logcdf(self, z):
        return sp.log_ndtr(z)

    def _isf(self, q):  # SciPy: _norm_isf
        return -sp.ndtri(q)

    def _ppf(self, q):
        return sp.ndtri(q)


class _T(_Symmetric):
    """``scipy.stats.t`` (shape ``df``).

    >>> import mutagrad as mg
    >>> from mutagrad.scipy.stats import t
    >>> round(float(mg.grad(t.cdf)(0.0, 1.0)), 12)  # Cauchy density at 0: 1/pi
    0.318309886184
    """

    name = "t"
    shapes = ("df",)
    METHODS = _WITH_PPF
    SHAPE_SECOND_DERIVATIVE_NOT_IMPLEMENTED = _CUMULATIVE + ("ppf", "isf")  # stdtr's, stdtrit's in df
    ppf = _quantile
    isf = _inverse_sf

    def _logpdf(self, z, df):
        # log Gamma((df+1)/2) - log Gamma(df/2) as log poch(df/2, 1/2), as SciPy writes it (the
        # difference of the two gammaln cancelled for large df, +1.91 instead of -1.16 at df = 1e15;
        # betaln(1/2, df/2) lost 1e-9 of it between df = 1e5 and 1e6); df = inf is the normal
        # density, as SciPy has it
        inf = np.isinf(np.asarray(bottom(df)))
        if not inf.any():
            return self._finite_logpdf(z, df)
        t = self._finite_logpdf(z, np.where(inf, 1.0, df))
        return np.where(inf, -0.5 * z * z - 0.5 * np.log(2 * np.pi), t)

    @staticmethod
    def _finite_logpdf(z, df):
        """SciPy's value (log poch), with the derivatives of -betaln(1/2, df/2) - log(df)/2 for
        its first terms: poch's in df is psi(df/2 + 1/2) - psi(df/2), which cancels for large df
        (off by 1e5 times at df = 1e10), where betaln's is exact."""
        def value(z, df):
            return np.log(sp.poch(0.5 * df, 0.5)) - 0.5 * (np.log(df) + np.log(np.pi)) - (df + 1) / 2 * np.log1p(
                z * z / df)

        if not (isinstance(z, Tracer) or isinstance(df, Tracer)):
            return value(z, df)
        res = -sp.betaln(0.5, df / 2) - 0.5 * np.log(df) - (df + 1) / 2 * np.log1p(z * z / df)
        return _with_value(res, lambda: value(bottom(z), bottom(df)))

    def _cdf(self, z, df):
        return sp.stdtr(df, z)

    def _ppf(self, q, df):
        return sp.stdtrit(df, q)

    def _isf(self, q, df):  # (SciPy's)
        return -sp.stdtrit(df, q)



class _Gamma(_Continuous):
    """``scipy.stats.gamma`` (shape ``a``), supported on x >= loc.

    >>> import mutagrad as mg
    >>> from mutagrad.scipy.stats import gamma
    >>> float(mg.grad(gamma.logpdf)(2.0, 1.0))  # exponential: d/dx (-x)
    -1.0
    """

    name = "gamma"
    shapes = ("a",)
    METHODS = _WITH_PPF
    SHAPE_SECOND_DERIVATIVE_NOT_IMPLEMENTED = _CUMULATIVE + ("ppf", "isf")  # gammainc's in a
    ppf = _quantile
    isf = _inverse_sf
    _a = 0.0

    def _logpdf(self, z, a):
        return sp.xlogy(a - 1, z) - z - sp.gammaln(a)

    def _cdf(self, z, a):
        return sp.gammainc(a, z)

    def _sf(self, z, a):
        return sp.gammaincc(a, z)

    def _isf(self, q, a):  # SciPy's gammainccinv
        return sp.gammainccinv(a, q)

    def _ppf(self, q, a):
        return sp.gammaincinv(a, q)


class _Beta(_Continuous):
    """``scipy.stats.beta`` (shapes ``a, b``), supported on [loc, loc + scale].

    >>> import mutagrad as mg
    >>> from mutagrad.scipy.stats import beta
    >>> float(mg.grad(beta.cdf)(0.25, 1.0, 1.0))  # uniform
    1.0
    """

    name = "beta"
    shapes = ("a", "b")
    METHODS = _WITH_PPF
    SHAPE_SECOND_DERIVATIVE_NOT_IMPLEMENTED = _CUMULATIVE + ("ppf", "isf")  # betainc's, betainc(c)inv's in a, b
    ppf = _quantile
    isf = _inverse_sf
    _a, _b = 0.0, 1.0

    def _ppf(self, q, a, b):
        return sp.betaincinv(a, b, q)

    def _isf(self, q, a, b):
        return sp.betainccinv(a, b, q)

    def _logpdf(self, z, a, b):
        return sp.xlogy(a - 1, z) + sp.xlog1py(b - 1, -z) - sp.betaln(a, b)

    def _median(self, a, b):
        return sp.betaincinv(a, b, 0.5)  # (plain: no rule)

    def _cdf(self, z, a, b):
        return sp.betainc(a, b, z)

    def _sf(self, z, a, b):
        return sp.betaincc(a, b, z)


class _Expon(_Continuous):
    """``scipy.stats.expon``, supported on x >= loc.

    >>> import mutagrad as mg
    >>> from mutagrad.scipy.stats import expon
    >>> float(mg.grad(lambda s: expon.logpdf(3.0, scale=s))(2.0))  # -1/s + x/s**2
    0.25
    """

    name = "expon"
    METHODS = _WITH_PPF
    ppf = _quantile
    isf = _inverse_sf
    _a = 0.0

    def _logpdf(self, z):
        return -z

    def _cdf(self, z):
        return -sp.expm1(-z)

    def _sf(self, z):
        return np.exp(-z)

    def _logsf(self, z):
        return -z

    def _isf(self, q):
        return -np.log(q)

    def _ppf(self, q):
        return -sp.log1p(-q)


class _Laplace(_Symmetric):
    """``scipy.stats.laplace`` (at x = loc, where the density has a kink, the
    derivative w.r.t. x is 0, the mean of the one-sided ones).

    >>> import mutagrad as mg
    >>> from mutagrad.scipy.stats import laplace
    >>> float(mg.grad(laplace.logpdf)(-2.0))  # d/dx -|x|
    1.0
    """

    name = "laplace"
    METHODS = _WITH_PPF
    ppf = _quantile
    isf = _inverse_sf

    def _logpdf(self, z):
        return -np.abs(z) - _LOG_2

    def _cdf(self, z):
        pos = np.asarray(bottom(z)) > 0
        return _piecewise(z, (pos, lambda z: 1.0 - 0.5 * np.exp(-z), 1.0), (~pos, lambda z: 0.5 * np.exp(z), -1.0))

    def _logcdf(self, z):  # SciPy: log(cdf); log1p keeps the right tail
        pos = np.asarray(bottom(z)) > 0
        return _piecewise(z, (pos, lambda z: sp.log1p(-0.5 * np.exp(-z)), 1.0), (~pos, lambda z: z - _LOG_2, -1.0))

    def _isf(self, q):  # (by symmetry, as SciPy's)
        return -self._ppf(q)

    def _ppf(self, q):
        upper = np.asarray(bottom(q)) > 0.5
        return _piecewise(q, (upper, lambda q: -np.log(2 * (1 - q)), 0.75), (~upper, lambda q: np.log(2 * q), 0.25))


class _Cauchy(_Symmetric):
    """``scipy.stats.cauchy``.

    >>> import mutagrad as mg
    >>> from mutagrad.scipy.stats import cauchy
    >>> float(mg.grad(cauchy.logpdf)(1.0))  # -2x / (1 + x**2)
    -1.0
    """

    name = "cauchy"
    METHODS = _WITH_PPF
    ppf = _quantile
    isf = _inverse_sf

    def _logpdf(self, z):
        # log(z * z) overflows for |z| > 1e154: SciPy's 2 log|z| + log1p(1/z**2) there
        small = np.abs(np.asarray(bottom(z))) < 1
        return _piecewise(z, (small, lambda z: -_LOG_PI - np.log1p(z * z), 0.0),
                          (~small, lambda z: -_LOG_PI - (2 * np.log(np.abs(z)) + np.log1p((1 / z) ** 2)), 1.0))

    def _cdf(self, z):
        return np.arctan2(1, -z) / np.pi

    def _isf(self, q):  # (by symmetry: the digits of small q; SciPy's ufunc computes in float64)
        return -self._ppf(_at_least_f64(q))

    def _ppf(self, q):
        # tan(pi (q - 1/2)) loses the tails (q - 1/2 rounds, tan is steep near pi/2): there
        # -cot(pi q) and cot(pi (1 - q)), exact arguments
        qb = np.asarray(bottom(q))
        low, high = qb < 0.25, qb > 0.75
        return _piecewise(q, (low, lambda q: -1 / np.tan(np.pi * q), 0.125),
                          (~low & ~high, lambda q: np.tan(np.pi * (q - 0.5)), 0.5),
                          (high, lambda q: 1 / np.tan(np.pi * (1 - q)), 0.875))


class _Logistic(_Symmetric):
    """``scipy.stats.logistic``.

    >>> import mutagrad as mg
    >>> from mutagrad.scipy.stats import logistic
    >>> float(mg.grad(logistic.cdf)(0.0))  # the density at 0
    0.25
    """

    name = "logistic"
    METHODS = _WITH_PPF
    ppf = _quantile
    isf = _inverse_sf

    def _logpdf(self, z):
        # SciPy's y - 2 log1p(exp(y)), y = -|z|, by the sign of z: -|z| has derivative 0 at 0,
        # which gives a second derivative 0 there instead of -1/2
        pos = np.asarray(bottom(z)) > 0
        return _piecewise(z, (pos, lambda z: -z - 2.0 * sp.log1p(np.exp(-z)), 1.0),
                          (~pos, lambda z: z - 2.0 * sp.log1p(np.exp(z)), -1.0))

    def _cdf(self, z):
        return sp.expit(z)

    def _logcdf(self, z):
        return sp.log_expit(z)

    def _isf(self, q):
        return -sp.logit(q)

    def _ppf(self, q):
        return sp.logit(q)


class _Uniform(_Continuous):
    """``scipy.stats.uniform`` on [loc, loc + scale].

    >>> import mutagrad as mg
    >>> from mutagrad.scipy.stats import uniform
    >>> float(mg.grad(lambda s: uniform.cdf(1.0, 0.0, s))(4.0))  # d/ds x/s
    -0.0625
    """

    name = "uniform"
    METHODS = _WITH_PPF
    ppf = _quantile
    isf = _inverse_sf
    _a, _b = 0.0, 1.0

    def _logpdf(self, z):
        return 0.0 * z

    def _cdf(self, z):
        return 1.0 * z

    def _sf(self, z):
        return 1.0 - z

    def _ppf(self, q):
        return 1.0 * q


class _Chi2(_Continuous):
    """``scipy.stats.chi2`` (shape ``df``), supported on x >= loc.

    >>> import mutagrad as mg
    >>> from mutagrad.scipy.stats import chi2
    >>> float(mg.grad(chi2.logpdf)(4.0, 2.0))  # df = 2: exponential with scale 2
    -0.5
    """

    name = "chi2"
    shapes = ("df",)
    METHODS = _WITH_PPF
    SHAPE_SECOND_DERIVATIVE_NOT_IMPLEMENTED = _CUMULATIVE + ("ppf", "isf")  # gammainc's in a
    ppf = _quantile
    isf = _inverse_sf
    _a = 0.0

    def _logpdf(self, z, df):
        return sp.xlogy(df / 2.0 - 1, z) - z / 2.0 - sp.gammaln(df / 2.0) - (_LOG_2 * df) / 2.0

    def _cdf(self, z, df):
        return sp.gammainc(df / 2, z / 2)  # scipy.special.chdtr

    def _sf(self, z, df):
        return sp.gammaincc(df / 2, z / 2)  # scipy.special.chdtrc

    def _isf(self, q, df):  # SciPy's chdtri(df, q) = 2 gammainccinv(df / 2, q)
        return 2 * sp.gammainccinv(df / 2, q)

    def _ppf(self, q, df):
        return 2 * sp.gammaincinv(df / 2, q)


class _Lognorm(_Continuous):
    """``scipy.stats.lognorm`` (shape ``s``), supported on x > loc.

    >>> import mutagrad as mg
    >>> from mutagrad.scipy.stats import lognorm
    >>> float(mg.grad(lognorm.logpdf)(1.0, 0.5))  # -(1 + log(x) / s**2) / x
    -1.0
    """

    name = "lognorm"
    shapes = ("s",)
    METHODS = _WITH_PPF
    ppf = _quantile
    isf = _inverse_sf
    _a = 0.0
    _open = True

    def _logpdf(self, z, s):
        return -np.log(z) ** 2 / (2 * s**2) - np.log(s * z * _SQRT_2PI)

    def _cdf(self, z, s):
        return sp.ndtr(np.log(z) / s)

    def _logcdf(self, z, s):
        return sp.log_ndtr(np.log(z) / s)

    def _sf(self, z, s):
        return sp.ndtr(-(np.log(z) / s))

    def _logsf(self, z, s):
        return sp.log_ndtr(-(np.log(z) / s))

    def _isf(self, q, s):
        return np.exp(s * -sp.ndtri(q))

    def _ppf(self, q, s):
        return np.exp(s * sp.ndtri(q))


class _WeibullMin(_Continuous):
    """``scipy.stats.weibull_min`` (shape ``c``), supported on x >= loc.

    >>> import mutagrad as mg
    >>> from mutagrad.scipy.stats import weibull_min
    >>> float(mg.grad(weibull_min.logsf, argnums=1)(1.0, 2.0))  # d/dc -x**c = -x**c log x
    -0.0
    """

    name = "weibull_min"
    shapes = ("c",)
    METHODS = _WITH_PPF
    ppf = _quantile
    isf = _inverse_sf
    _a = 0.0

    def _logpdf(self, z, c):
        return np.log(c) + sp.xlogy(c - 1, z) - np.power(z, c)

    def _cdf(self, z, c):
        return -sp.expm1(-np.power(z, c))

    def _sf(self, z, c):
        return np.exp(-np.power(z, c))

    def _logsf(self, z, c):
        return -np.power(z, c)

    def _isf(self, q, c):
        return np.power(-np.log(q), 1.0 / c)

    def _ppf(self, q, c):
        return np.power(-sp.log1p(-q), 1.0 / c)


class _GumbelR(_Continuous):
    """``scipy.stats.gumbel_r``.

    >>> import mutagrad as mg
    >>> from mutagrad.scipy.stats import gumbel_r
    >>> float(mg.grad(gumbel_r.logcdf)(0.0))  # d/dx -exp(-x)
    1.0
    """

    name = "gumbel_r"
    METHODS = _WITH_PPF
    ppf = _quantile
    isf = _inverse_sf

    def _logpdf(self, z):
        return -z - np.exp(-z)

    def _cdf(self, z):
        return np.exp(-np.exp(-z))

    def _logcdf(self, z):
        return -np.exp(-z)

    def _sf(self, z):
        return -sp.expm1(-np.exp(-z))

    def _isf(self, q):
        return -np.log(-np.log1p(-q))

    def _ppf(self, q):
        return -np.log(-np.log(q))


class _Halfnorm(_Continuous):
    """``scipy.stats.halfnorm``, supported on x >= loc.

    >>> import mutagrad as mg
    >>> from mutagrad.scipy.stats import halfnorm
    >>> float(mg.grad(halfnorm.logpdf)(1.5))  # -x
    -1.5
    """

    name = "halfnorm"
    METHODS = _WITH_PPF
    ppf = _quantile
    isf = _inverse_sf
    _a = 0.0

    def _logpdf(self, z):
        return 0.5 * np.log(2.0 / np.pi) - z * z / 2.0

    def _cdf(self, z):
        return sp.erf(z / np.sqrt(2))

    def _sf(self, z):
        return 2 * sp.ndtr(-z)

    def _logsf(self, z):  # SciPy: log(sf); log_ndtr keeps the tail, log1p(-erf) the digits near 0
        zp = bottom(z)
        near = np.asarray(zp < 1.0)  # (plain: where log(2) + log_ndtr(-z) cancels to a small number)
        return _piecewise(z, (near, lambda t: np.log1p(-sp.erf(t / np.sqrt(2))), 0.5),
                          (~near, lambda t: _LOG_2 + sp.log_ndtr(-t), 2.0))

    def _isf(self, q):
        return -sp.ndtri(q / 2)

    def _ppf(self, q):
        return sp.ndtri((1 + q) / 2.0)


class _F(_Continuous):
    """``scipy.stats.f`` (shapes ``dfn, dfd``), supported on x >= loc.

    >>> import mutagrad as mg
    >>> from mutagrad.scipy.stats import f
    >>> float(mg.grad(f.logpdf)(1.0, 2.0, 2.0))  # -2 / (1 + x)
    -1.0
    """

    name = "f"
    shapes = ("dfn", "dfd")
    METHODS = _WITH_PPF
    SHAPE_SECOND_DERIVATIVE_NOT_IMPLEMENTED = _CUMULATIVE + ("ppf", "isf")  # betainc's, fdtri's in a, b
    ppf = _quantile
    isf = _inverse_sf
    _a = 0.0

    def _logpdf(self, z, dfn, dfd):
        n, m = 1.0 * dfn, 1.0 * dfd
        return (m / 2 * np.log(m) + n / 2 * np.log(n) + sp.xlogy(n / 2 - 1, z)
                - (((n + m) / 2) * np.log(m + n * z) + sp.betaln(n / 2, m / 2)))

    def _median(self, dfn, dfd):
        return sp.fdtri(dfn, dfd, 0.5)  # (plain shapes)

    def _ppf(self, q, dfn, dfd):  # scipy.special.fdtri (SciPy's isf: _ppf(1 - q), _Continuous._isf)
        return sp.fdtri(dfn, dfd, q)

    def _cdf(self, z, dfn, dfd):  # scipy.special.fdtr
        w = dfn * z
        return sp.betainc(dfn / 2, dfd / 2, w / (dfd + w))

    def _sf(self, z, dfn, dfd):  # scipy.special.fdtrc
        return sp.betainc(dfd / 2, dfn / 2, dfd / (dfd + dfn * z))


def _at_edges(edge, power, res):
    """A pmf ``res`` (exp of its log) with its power form ``power`` where the plain mask ``edge``
    marks a parameter at the end of its range (p = 0 or 1, mu = 0): there a power's base is 0 and
    the log form's derivative is 0 · inf, a zero (binom.pmf(1, n, p) at p = 0 had derivative 0
    where it is n); the powers differentiate as themselves (p**1 has slope 1 at 0)."""
    res = np.where(edge, power, res)
    return res[()] if type(res) is np.ndarray and res.ndim == 0 else res


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
        res = np.exp(self.logpmf(k, *args, **kwds))
        kk, mu = self._k(k, args, kwds)
        edge = np.asarray(bottom(mu)) == 0
        if not np.any(edge):
            return res
        valid = (kk >= 0) & (kk == np.floor(kk))
        power = _on_support(valid, lambda kk: mu ** kk * np.exp(-mu - sp.gammaln(kk + 1)), kk, 0.0, 0.0)
        return _at_edges(edge, power, res)

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


class _CountDistribution(_Distribution):
    """A discrete distribution of counts k = 0, 1, ... (up to ``_upper``) with two shape
    parameters (``n``, ``p``): SciPy's NaN for invalid parameters, -inf (pmf 0) off the
    support and at non-integer k, the cumulative functions from the regularized incomplete
    beta function (w.r.t. ``n`` its derivative in a shape, whose second is a
    NotImplementedTangent)."""

    shapes = ("n", "p")
    METHODS = ("logpmf", "pmf", "cdf", "logcdf", "sf", "logsf")
    SHAPE_SECOND_DERIVATIVE_NOT_IMPLEMENTED = _CUMULATIVE  # betainc's in its shapes (n's)
    SHAPES_NOT_DIFFERENTIATED = ("n",)  # (the one of those methods' shapes without it: p has its second derivative)
    _SAFE = (1.0, 0.5)  # parameters at which the formulas are evaluated where the given ones are invalid

    def _k(self, k, args, kwds):
        (n, p), (loc,) = self._parse(args, kwds, {"loc": 0})
        k = np.asarray(bottom(k)) - bottom(loc)
        bad = ~self._valid(np.asarray(bottom(n)), np.asarray(bottom(p))) | np.isnan(k)
        if np.any(bad):
            n, p = np.where(bad, self._SAFE[0], n), np.where(bad, self._SAFE[1], p)
        return k, n, p, bad

    def logpmf(self, k, *args, **kwds):
        k, n, p, bad = self._k(k, args, kwds)
        valid = (k >= 0) & (k == np.floor(k)) & (k <= self._upper(np.asarray(bottom(n))))
        return _nan_where(bad, _on_support(valid, lambda k: self._logpmf(k, n, p), k, -np.inf, 0.0))

    def pmf(self, k, *args, **kwds):
        res = np.exp(self.logpmf(k, *args, **kwds))
        kk, n, p, bad = self._k(k, args, kwds)
        edge = self._edge(np.asarray(bottom(p))) & ~bad
        if not np.any(edge):
            return res
        valid = (kk >= 0) & (kk == np.floor(kk)) & (kk <= self._upper(np.asarray(bottom(n))))
        return _at_edges(edge, _on_support(valid, lambda kk: self._pmf_power(kk, n, p), kk, 0.0, 0.0), res)

    def cdf(self, k, *args, **kwds):
        k, n, p, bad = self._k(k, args, kwds)
        k = np.floor(k)
        inside = (k >= 0) & (k < self._upper(np.asarray(bottom(n))))
        return _nan_where(bad, _on_support(inside, lambda k: self._cdf(k, n, p), k, np.where(k < 0, 0.0, 1.0), 0.0))

    def sf(self, k, *args, **kwds):
        k, n, p, bad = self._k(k, args, kwds)
        k = np.floor(k)
        inside = (k >= 0) & (k < self._upper(np.asarray(bottom(n))))
        return _nan_where(bad, _on_support(inside, lambda k: self._sf(k, n, p), k, np.where(k < 0, 1.0, 0.0), 0.0))

    def logcdf(self, k, *args, **kwds):
        return _log(self.cdf(k, *args, **kwds))

    def logsf(self, k, *args, **kwds):
        return _log(self.sf(k, *args, **kwds))


def _float64_result(method):
    """``method`` with its result in float64 at least, as SciPy's discrete methods fill a float64 array
    (float32 counts or parameters compute in float32 there, not the result's dtype)."""
    def public(self, *args, **kwds):
        return _at_least_f64(method(self, *args, **kwds))

    public.__name__ = public.__qualname__ = method.__name__
    public.__doc__ = method.__doc__
    return public


for _cls in (_Poisson, _CountDistribution):
    for _m in _cls.METHODS:
        setattr(_cls, _m, _float64_result(_cls.__dict__[_m]))


class _NBinom(_CountDistribution):
    """``scipy.stats.nbinom`` (shapes ``n`` > 0, ``p`` in (0, 1]; ``k`` is data): the number of
    failures before the n-th success. Every method w.r.t. ``n`` and ``p``.

    >>> import mutagrad as mg
    >>> from mutagrad.scipy.stats import nbinom
    >>> float(mg.grad(lambda p: nbinom.logpmf(3, 2.0, p))(0.5))  # n / p - k / (1 - p)
    -2.0
    """

    name = "nbinom"

    @staticmethod
    def _valid(n, p):
        return (n > 0) & (p > 0) & (p <= 1)

    @staticmethod
    def _upper(n):
        return np.inf

    @staticmethod
    def _logpmf(k, n, p):
        return sp.gammaln(n + k) - sp.gammaln(k + 1) - sp.gammaln(n) + n * np.log(p) + sp.xlog1py(k, -p)

    @staticmethod
    def _edge(p):
        return p == 1

    @staticmethod
    def _pmf_power(k, n, p):
        return np.exp(sp.gammaln(n + k) - sp.gammaln(k + 1) - sp.gammaln(n)) * p ** n * (1 - p) ** k

    @staticmethod
    def _cdf(k, n, p):
        return sp.betainc(n, k + 1, p)

    @staticmethod
    def _sf(k, n, p):
        return sp.betainc(k + 1, n, 1 - p)

    def logcdf(self, k, *args, **kwds):
        """SciPy's: log1p(-sf) where the cdf is above 1/2 (log(cdf) loses the digits there)."""
        cdf = self.cdf(k, *args, **kwds)
        cb = np.asarray(bottom(cdf))
        if not np.any(cb > 0.5):
            return _log(cdf)
        sf = self.sf(k, *args, **kwds)
        high = cb > 0.5
        with np.errstate(divide="ignore"):
            res = np.where(high, np.log1p(-np.where(high, sf, 0.0)), _log(np.where(high, 0.5, cdf)))
        return res[()] if type(res) is np.ndarray and res.ndim == 0 else res


class _Binom(_CountDistribution):
    """``scipy.stats.binom`` (shapes ``n``, a count, and ``p`` in [0, 1]; ``k`` is data).
    Every method w.r.t. ``p``, and w.r.t. ``n`` the derivative of its formula, the densities'
    log-gamma one, the cumulative functions' incomplete beta one (SciPy's function itself is NaN
    at a non-integer n, as JAX's is not).

    >>> import mutagrad as mg
    >>> from mutagrad.scipy.stats import binom
    >>> float(mg.grad(lambda p: binom.logpmf(3, 10, p))(0.5))  # k / p - (n - k) / (1 - p)
    -8.0
    """

    name = "binom"
    _SAFE = (0.0, 0.5)

    @staticmethod
    def _valid(n, p):
        return (n >= 0) & (n == np.floor(n)) & (p >= 0) & (p <= 1)

    @staticmethod
    def _upper(n):
        return n

    @staticmethod
    def _logpmf(k, n, p):
        return (sp.gammaln(n + 1) - (sp.gammaln(k + 1) + sp.gammaln(n - k + 1)) + sp.xlogy(k, p)
                + sp.xlog1py(n - k, -p))

    @staticmethod
    def _edge(p):
        return (p == 0) | (p == 1)

    @staticmethod
    def _pmf_power(k, n, p):
        return np.exp(sp.gammaln(n + 1) - (sp.gammaln(k + 1) + sp.gammaln(n - k + 1))) * p ** k * (1 - p) ** (n - k)

    @staticmethod
    def _cdf(k, n, p):
        return sp.betainc(n - k, k + 1, 1 - p)

    @staticmethod
    def _sf(k, n, p):
        return sp.betainc(k + 1, n - k, p)


class _MultivariateNormal(_Distribution):
    """``scipy.stats.multivariate_normal``: ``logpdf``/``pdf`` w.r.t. ``x``,
    ``mean`` and ``cov``, ``entropy`` w.r.t. ``cov`` (symmetric positive
    definite). As SciPy's, the function reads the lower triangle of ``cov``
    only: the gradient w.r.t. an entry above the diagonal is 0, and one below
    it stands for both (what central differences of SciPy's function give).

    With ``allow_singular=True`` (always for ``entropy``, as in SciPy) a
    positive semidefinite ``cov`` is allowed: the eigenvalues at most 1e6
    machine epsilons times the largest are zero, the density is that of the
    normal on the support (``mean`` + the range of ``cov``) with the
    pseudo-determinant and the pseudo-inverse, and -inf (pdf 0) off it. Its
    derivative w.r.t. ``cov`` is that of the formula with the pseudo-inverse
    (``np.linalg.pinv``'s rule), exact where the rank of ``cov`` is constant
    near the point; its derivatives of higher order w.r.t. a singular ``cov``
    are a NotImplementedTangent (the pseudo-inverse cuts a zero eigenvalue off).

    >>> import numpy as np, mutagrad as mg
    >>> from mutagrad.scipy.stats import multivariate_normal
    >>> mg.grad(multivariate_normal.logpdf)(np.array([1.0, 2.0]), np.zeros(2), np.eye(2))
    array([-1., -2.])
    >>> mg.grad(lambda x: multivariate_normal.logpdf(x, cov=np.diag([1.0, 0.0]), allow_singular=True))(
    ...     np.array([1.0, 0.0]))
    array([-1.,  0.])
    >>> mg.grad(lambda c: multivariate_normal.entropy(cov=c))(np.diag([2.0, 4.0]))  # inv(cov) / 2
    array([[0.25 , 0.   ],
           [0.   , 0.125]])
    """

    name = "multivariate_normal"
    METHODS = ("logpdf", "pdf", "entropy")
    PARAMETER_METHODS = ("entropy",)

    def __call__(self, mean=None, cov=1, allow_singular=False, seed=None):
        return _Frozen(self, (), {"mean": mean, "cov": cov, "allow_singular": allow_singular})

    def logpdf(self, x, mean=None, cov=1, allow_singular=False):
        allow_singular = allow_singular or _covariance_object(cov)  # (SciPy's Covariance objects: as they are)
        x, mean, cov, d = _mvn_parameters(x, mean, cov)
        r = x - mean
        s, u, eps = _mvn_spectrum(cov, allow_singular)
        keep = s > eps
        if keep.all():
            maha = np.sum(r * np.linalg.solve(cov, np.expand_dims(r, -1))[..., 0], axis=-1)
            return -0.5 * (d * _LOG_2PI + np.linalg.slogdet(cov)[1] + maha)
        # SciPy's _PSD: rank, pseudo-determinant and pseudo-inverse over the eigenvalues above eps
        log_pdet, cp = _mvn_log_pdet(cov, s, keep)
        if cp is not None:
            maha = np.sum(r * np.matmul(cp, np.expand_dims(r, -1))[..., 0], axis=-1)
        else:
            w = u[:, keep] / np.sqrt(s[keep])
            maha = np.sum(np.square(np.matmul(r, w)), axis=-1)
        out = -0.5 * (np.count_nonzero(keep) * _LOG_2PI + log_pdet + maha)
        inside = np.linalg.norm(np.matmul(bottom(r), u[:, ~keep]), axis=-1) < 1e3 * eps
        return out if inside.all() else np.where(inside, out, -np.inf)

    def pdf(self, x, mean=None, cov=1, allow_singular=False):
        return np.exp(self.logpdf(x, mean, cov, allow_singular))

    def entropy(self, mean=None, cov=1):
        """The differential entropy, ``(rank (log(2 pi) + 1) + log pdet(cov)) / 2``;
        ``cov`` may be singular, as in SciPy."""
        return self._entropy(mean, cov)

    def _entropy(self, mean=None, cov=1, allow_singular=True):
        cov = _mvn_parameters(0.0, mean, cov)[2]
        s, _, eps = _mvn_spectrum(cov, allow_singular)
        keep = s > eps
        log_pdet = np.linalg.slogdet(cov)[1] if keep.all() else _mvn_log_pdet(cov, s, keep)[0]
        return 0.5 * (np.count_nonzero(keep) * (_LOG_2PI + 1) + log_pdet)


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


def _mvn_log_pdet(cov, s, keep):
    """(log pseudo-determinant, pseudo-inverse) of a singular ``cov`` with eigenvalues
    ``s`` (``keep``: those above the cutoff); a plain ``cov`` needs no pseudo-inverse (None)."""
    if not isinstance(cov, Tracer):
        return np.sum(np.log(s[keep])), None
    cp = np.linalg.pinv(cov, rcond=_psd_cond(s.dtype))
    # log pdet(C) = log det(C + I - C C⁺) where the rank is constant; - tr((I - C C⁺) C), 0 there,
    # makes the derivative tr(C⁺ dC) in every direction
    free = np.eye(s.shape[0]) - np.matmul(cov, cp)
    return np.linalg.slogdet(cov + free)[1] - np.trace(np.matmul(free, cov)), cp


def _covariance_object(cov) -> bool:
    """Whether ``cov`` is a ``scipy.stats.Covariance`` (from_diagonal, from_cholesky, ...)."""
    # (by its class: the covariance property of one made from traced values computes with plain LAPACK)
    return any(k.__name__ == "Covariance" and k.__module__.startswith("scipy.stats") for k in type(cov).__mro__)


def _covariance_matrix(cov):
    """The matrix a ``scipy.stats.Covariance`` stands for (``cov`` itself otherwise): from a Cholesky
    factor, of its lower triangle only, as SciPy's triangular solves read it."""
    if not _covariance_object(cov):
        return cov
    factor = getattr(cov, "_factor", None) if type(cov).__name__ == "CovViaCholesky" else None
    if factor is not None:
        low = np.tril(factor)
        return low @ np.swapaxes(low, -1, -2)
    chol_p = getattr(cov, "_chol_P", None) if type(cov).__name__ == "CovViaPrecision" else None
    if chol_p is not None:
        # from_precision(P[, covariance]): P⁻¹ from the Cholesky factor L of P that SciPy computed
        # (np.linalg.cholesky: of P's lower triangle), L⁻ᵀ L⁻¹, as SciPy's cho_solve; SciPy's densities
        # read P (its factor), not a covariance given with it
        inv = np.linalg.solve(chol_p, np.broadcast_to(np.eye(np.shape(chol_p)[-1]), np.shape(chol_p)))
        return np.swapaxes(inv, -1, -2) @ inv
    return cov.covariance


def _mvn_parameters(x, mean, cov):
    """SciPy's conventions: a scalar ``cov`` is a multiple of I, a vector its
    diagonal; with d = 1 every entry of ``x`` is a sample; a ``scipy.stats.Covariance`` object (plain
    values: SciPy's own) is the matrix it stands for."""
    cov = _covariance_matrix(cov)
    x, mean, cov = _plain(x), _plain(mean), _plain(cov)
    if np.ndim(cov) == 0:
        d = np.shape(mean)[-1] if mean is not None and np.ndim(mean) else 1
        cov = cov * np.eye(d)
    elif np.ndim(cov) == 1:
        d = np.shape(cov)[0]
        cov = np.eye(d) * cov
    else:
        d = np.shape(cov)[-1]
        # SciPy reads the lower triangle only (eigh, lower=True): so does this function
        cov = np.tril(cov) + np.swapaxes(np.tril(cov, -1), -1, -2)
    if d == 1 and (np.ndim(x) == 0 or np.shape(x)[-1] != 1):
        x = np.expand_dims(x, -1)
    return x, (0.0 if mean is None else mean), cov, d


class _Dirichlet(_Distribution):
    """``scipy.stats.dirichlet``: ``logpdf``/``pdf`` w.r.t. ``x`` and ``alpha``,
    with SciPy's conventions (the components of ``x`` along its first axis; with
    one fewer than ``alpha`` the last is ``1 - sum(x)``, and its derivative flows
    to the others) and argument checks.

    >>> import numpy as np, mutagrad as mg
    >>> from mutagrad.scipy.stats import dirichlet
    >>> mg.grad(dirichlet.logpdf)(np.array([0.25, 0.75]), np.array([2.0, 3.0]))  # (alpha - 1) / x
    array([4.        , 2.66666667])
    """

    name = "dirichlet"
    METHODS = ("logpdf", "pdf")

    def __call__(self, alpha, seed=None):
        return _Frozen(self, (alpha,), {})

    def logpdf(self, x, alpha):
        x, alpha = _dirichlet_arguments(x, alpha)
        lnb = np.sum(sp.gammaln(alpha)) - sp.gammaln(np.sum(alpha))
        out = -lnb + np.sum(np.transpose(sp.xlogy(alpha - 1, np.transpose(x))), axis=0)
        out = np.squeeze(out)  # SciPy's _squeeze_output
        return out[()] if np.ndim(out) == 0 else out

    def pdf(self, x, alpha):
        return np.exp(self.logpdf(x, alpha))


def _dirichlet_arguments(x, alpha):
    """``x`` with its last component if it lacks it, and ``alpha``, after SciPy's checks
    (scipy.stats._multivariate._dirichlet_check_parameters and _check_input)."""
    x = x if isinstance(x, Tracer) else np.asarray(x)
    alpha = alpha if isinstance(alpha, Tracer) else np.asarray(alpha)
    ab = np.asarray(bottom(alpha))
    if np.min(ab) <= 0:
        raise ValueError("All parameters must be greater than 0")
    if ab.ndim != 1:
        raise ValueError(f"Parameter vector 'a' must be one dimensional, but a.shape = {ab.shape}.")
    if x.shape[0] + 1 != ab.shape[0] and x.shape[0] != ab.shape[0]:
        raise ValueError("Vector 'x' must have either the same number of entries as, or one entry fewer than, "
                         f"parameter vector 'a', but alpha.shape = {ab.shape} and x.shape = {x.shape}.")
    if x.shape[0] != ab.shape[0]:
        if x.ndim > 2:
            raise ValueError("The input must be one dimensional or a two dimensional matrix containing the entries.")
        last = 1 - np.sum(x, 0)
        x = np.concatenate([x, np.reshape(last, (1,) + np.shape(last))])
    xb = np.asarray(bottom(x))
    if np.min(xb) < 0:
        raise ValueError("Each entry in 'x' must be greater than or equal to zero.")
    if np.max(xb) > 1:
        raise ValueError("Each entry in 'x' must be smaller or equal one.")
    below1 = ab < 1
    if xb.shape != ab.shape:
        below1 = np.repeat(below1, xb.shape[-1], axis=-1).reshape(xb.shape)
    if np.sum((xb == 0) & below1):
        raise ValueError("Each entry in 'x' must be greater than zero if its alpha is less than one.")
    if (np.abs(np.sum(xb, 0) - 1.0) > 10e-10).any():
        raise ValueError(f"The input vector 'x' must lie within the normal simplex. but np.sum(x, 0) = {np.sum(xb, 0)}.")
    return x, alpha


norm = _Norm()
t = _T()
gamma = _Gamma()
beta = _Beta()
expon = _Expon()
laplace = _Laplace()
cauchy = _Cauchy()
logistic = _Logistic()
uniform = _Uniform()
chi2 = _Chi2()
lognorm = _Lognorm()
weibull_min = _WeibullMin()
gumbel_r = _GumbelR()
halfnorm = _Halfnorm()
f = _F()
poisson = _Poisson()
nbinom = _NBinom()
binom = _Binom()
multivariate_normal = _MultivariateNormal()
dirichlet = _Dirichlet()

#: every distribution above: docs/coverage.md lists their METHODS
DISTRIBUTIONS = (norm, t, gamma, beta, expon, laplace, cauchy, logistic, uniform, chi2, lognorm, weibull_min,
                 gumbel_r, halfnorm, f, poisson, nbinom, binom, multivariate_normal, dirichlet)
