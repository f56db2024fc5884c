"""scipy.special: the ufuncs by their partial derivatives, and primitives for
the plain-Python functions (logsumexp, softmax, log_softmax, polygamma).

The ufuncs dispatch through ``__array_ufunc__`` like NumPy's, so
``scipy.special.gammaln(x)`` works on traced arrays once registered here.
The plain-Python functions call ``np.asarray`` and cannot be dispatched: the
primitives below are what ``mutagrad.scipy.special`` exports under their
names. Partial derivatives are written with registered functions only, so
every order is available.

Orders and shape parameters: an integer order (``polygamma``'s ``n``) has no
derivative (``NoTangent``); a real order or shape parameter (``jv``'s ``v``,
``gammainc``'s ``a``) has one that is not implemented
(``mg.not_implemented``).
"""
from __future__ import annotations

import numpy as np
import scipy.special as sp

from ...core import bottom
from ...registry import conj_if_complex as _cj
from ...registry import defelementwise, frule, primitive, rrule
from ...tangents import NoTangent, Thunk, ZeroTangent, is_zero, not_implemented, unbroadcast
from ..reductions import expand_to

ZERO = ZeroTangent()
_2_SQRT_PI = 2.0 / np.sqrt(np.pi)
_SQRT_PI_2 = np.sqrt(np.pi) / 2.0
_SQRT_2PI = np.sqrt(2.0 * np.pi)


def scipy_primitive(name):
    """``@mg.primitive`` under a readable name (``scipy.special.logsumexp``)."""

    def register(fun):
        w = primitive(fun)
        w._mutagrad_primitive.name = name
        return w

    return register


def _quotient0(x, y):
    """``x / y``, with 0 where both are 0: the derivative along ``y`` of
    ``x log(y)`` (xlogy, rel_entr...) is 0 on the line x = 0, also at y = 0."""
    both = (bottom(x) == 0) & (bottom(y) == 0)
    return x / np.where(both, 1.0, y) if np.any(both) else x / y


def defparametric(fn, nparams, dx, integer=False):
    """Both rules of ``fn(*params, x)``, elementwise in ``x`` with derivative
    ``dx(*params, x, y)``. The derivative w.r.t. the parameters is
    ``NoTangent`` for integer ones (orders) and not implemented otherwise."""
    p = defelementwise(fn, *([None] * nparams), dx)
    if integer:
        return p
    name = p.name
    why = f"the derivative of {name} w.r.t. its parameter is not implemented (only w.r.t. x)"
    base_rrule, base_frule = p.rrule, p.frule

    def rule(*xs):
        y, pullback = base_rrule(*xs)
        return y, lambda g: tuple(not_implemented(why) for _ in range(nparams)) + pullback(g)[nparams:]

    def forward(primals, tangents):
        y, ydot = base_frule(primals, tangents)
        if any(not is_zero(t) for t in tangents[:nparams]):
            return y, not_implemented(why)
        return y, ydot

    p.rrule, p.frule = rule, forward
    return p


# -- gamma and beta functions ---------------------------------------------------


@scipy_primitive("scipy.special.polygamma")
def polygamma(n, x):
    """``scipy.special.polygamma``: the n-th derivative of digamma (n an integer)."""
    return sp.polygamma(n, x)




def _polygamma_next(n, x):
    if np.iscomplexobj(bottom(x)):  # SciPy's polygamma is real only
        return not_implemented("scipy.special.polygamma of a complex argument (SciPy has none)")
    return polygamma(bottom(n) + 1, x)


defparametric(polygamma, 1, lambda n, x, y: _polygamma_next(n, x), integer=True)
defelementwise(sp.gammaln, lambda x, y: sp.digamma(x))
defelementwise(sp.loggamma, lambda x, y: sp.digamma(x))
defelementwise(sp.digamma, lambda x, y: _polygamma_next(0, x))
defelementwise(sp.gamma, lambda x, y: y * sp.digamma(x))
defelementwise(sp.beta,
               lambda a, b, y: y * (sp.digamma(a) - sp.digamma(a + b)),
               lambda a, b, y: y * (sp.digamma(b) - sp.digamma(a + b)))
defelementwise(sp.betaln,
               lambda a, b, y: sp.digamma(a) - sp.digamma(a + b),
               lambda a, b, y: sp.digamma(b) - sp.digamma(a + b))

# regularized incomplete gamma and beta functions, Student's t cdf: derivative
# w.r.t. the integration limit is the density
defparametric(sp.gammainc, 1, lambda a, x, y: np.exp(sp.xlogy(a - 1, x) - x - sp.gammaln(a)))
defparametric(sp.gammaincc, 1, lambda a, x, y: -np.exp(sp.xlogy(a - 1, x) - x - sp.gammaln(a)))


def _beta_density(a, b, x, y):
    return np.exp(sp.xlogy(a - 1, x) + sp.xlog1py(b - 1, -x) - sp.betaln(a, b))


defparametric(sp.betainc, 2, _beta_density)
defparametric(sp.betaincc, 2, lambda a, b, x, y: -_beta_density(a, b, x, y))


def _t_density(df, t, y):
    # the normalizer as -betaln(1/2, df/2) - log(df)/2 (the gammaln difference cancels for large
    # df: 2% off at 1e14); df = inf is the normal density
    inf = np.isinf(np.asarray(bottom(df)))
    d = np.where(inf, 1.0, df) if inf.any() else df
    p = np.exp(-sp.betaln(0.5, d / 2) - 0.5 * np.log(d) - (d + 1) / 2 * np.log1p(t * t / d))
    return np.where(inf, np.exp(-0.5 * t * t) / _SQRT_2PI, p) if inf.any() else p


defparametric(sp.stdtr, 1, _t_density)

# -- error function and normal distribution ---------------------------------------

defelementwise(sp.erf, lambda x, y: _2_SQRT_PI * np.exp(-x * x))
defelementwise(sp.erfc, lambda x, y: -_2_SQRT_PI * np.exp(-x * x))
defelementwise(sp.erfi, lambda x, y: _2_SQRT_PI * np.exp(x * x))


def _asymptotic(x, y, exact, series, both_signs, big=30.0):
    """``exact(x, y)``, or where x > big (|x| > big with ``both_signs``), where it cancels
    (erfcx' = 2 x erfcx - 2/sqrt(pi) lost all its digits by x = 1e8), the asymptotic
    ``series(1/x**2)``; each branch at safe inputs only."""
    xb = np.asarray(bottom(x))
    far = (np.abs(xb) if both_signs else xb) > big
    if not far.any():
        return exact(x, y)
    xs = np.where(far, big, x)
    u = 1.0 / (np.where(far, x, big) ** 2)
    return np.where(far, series(u), exact(xs, np.where(far, 0.0, y)))


# For x -> +inf, erfcx(x) ~ (1/(x sqrt pi)) sum (-1)^n (2n-1)!!/(2x^2)^n, so
# erfcx' = (2/sqrt pi) sum_{n>=1} (-1)^n (2n-1)!!/(2x^2)^n; for |x| -> inf, dawsn(x) ~ (1/2x)
# sum (2n-1)!!/(2x^2)^n, so dawsn' = -sum_{n>=1} (2n-1)!!/(2x^2)^n. Five terms: within 1e-12 past 30.
def _erfcx_far(u):
    return _2_SQRT_PI * u * (-0.5 + u * (0.75 + u * (-1.875 + u * (6.5625 - u * 29.53125))))


def _dawsn_far(u):
    return -u * (0.5 + u * (0.75 + u * (1.875 + u * (6.5625 + u * 29.53125))))


defelementwise(sp.erfcx, lambda x, y: _asymptotic(x, y, lambda x, y: 2 * x * y - _2_SQRT_PI, _erfcx_far, False))
defelementwise(sp.dawsn, lambda x, y: _asymptotic(x, y, lambda x, y: 1.0 - 2 * x * y, _dawsn_far, True))
defelementwise(sp.erfinv, lambda x, y: _SQRT_PI_2 * np.exp(y * y))
defelementwise(sp.erfcinv, lambda x, y: -_SQRT_PI_2 * np.exp(y * y))
defelementwise(sp.ndtr, lambda x, y: np.exp(-0.5 * x * x) / _SQRT_2PI)


def _log_ndtr_d(x, y):
    # phi/Phi. For x < 0 as sqrt(2/pi) / erfcx(-x/sqrt(2)): exp(-x*x/2 - y) subtracts two huge,
    # nearly equal numbers there (1% off at x = -1e7, inf at -1e100). For x > 0 that form
    # overflows erfcx (x > 37), while exp(-x*x/2 - y) is exact. Each branch at safe inputs only.
    neg = np.asarray(bottom(x)) < 0
    xn = np.where(neg, x, 0.0)
    xp = np.where(neg, 0.0, x)
    return np.where(neg, np.sqrt(2.0 / np.pi) / sp.erfcx(-xn / np.sqrt(2.0)),
                    np.exp(-0.5 * xp * xp - np.where(neg, 0.0, y)) / _SQRT_2PI)


defelementwise(sp.log_ndtr, _log_ndtr_d)
defelementwise(sp.ndtri, lambda p, y: _SQRT_2PI * np.exp(0.5 * y * y))

# -- logistic ------------------------------------------------------------------------

defelementwise(sp.expit, lambda x, y: y * sp.expit(-x))  # (y (1 - y) is 0 for x > 37: 1 - y rounds to 0)
defelementwise(sp.log_expit, lambda x, y: sp.expit(-x))
defelementwise(sp.logit, lambda p, y: 1.0 / (p * (1.0 - p)))

# -- x log y and entropies (exact on the line x = 0, where scipy defines them as 0) ---

defelementwise(sp.xlogy, lambda x, y, r: np.log(y), lambda x, y, r: _quotient0(x, y))
defelementwise(sp.xlog1py, lambda x, y, r: np.log1p(y), lambda x, y, r: _quotient0(x, 1.0 + y))
defelementwise(sp.entr, lambda x, y: -np.log(x) - 1.0)
defelementwise(sp.rel_entr, lambda x, y, r: np.log(x / y) + 1.0, lambda x, y, r: -_quotient0(x, y))
defelementwise(sp.kl_div, lambda x, y, r: np.log(x / y), lambda x, y, r: 1.0 - _quotient0(x, y))

# -- Bessel functions: f_v' from f_{v-1} and f_{v+1} (exact at x = 0 too) -------------


def _sign(x):
    return np.sign(bottom(x))


defparametric(sp.jv, 1, lambda v, x, y: 0.5 * (sp.jv(v - 1, x) - sp.jv(v + 1, x)))
defparametric(sp.yv, 1, lambda v, x, y: 0.5 * (sp.yv(v - 1, x) - sp.yv(v + 1, x)))
defparametric(sp.iv, 1, lambda v, x, y: 0.5 * (sp.iv(v - 1, x) + sp.iv(v + 1, x)))
defparametric(sp.kv, 1, lambda v, x, y: -0.5 * (sp.kv(v - 1, x) + sp.kv(v + 1, x)))
defparametric(sp.ive, 1, lambda v, x, y: 0.5 * (sp.ive(v - 1, x) + sp.ive(v + 1, x)) - _sign(x) * y)
defparametric(sp.kve, 1, lambda v, x, y: y - 0.5 * (sp.kve(v - 1, x) + sp.kve(v + 1, x)))
defelementwise(sp.j0, lambda x, y: -sp.j1(x))
defelementwise(sp.j1, lambda x, y: 0.5 * (sp.j0(x) - sp.jv(2, x)))
defelementwise(sp.y0, lambda x, y: -sp.y1(x))
defelementwise(sp.y1, lambda x, y: 0.5 * (sp.y0(x) - sp.yv(2, x)))
defelementwise(sp.i0, lambda x, y: sp.i1(x))
defelementwise(sp.i1, lambda x, y: 0.5 * (sp.i0(x) + sp.iv(2, x)))
defelementwise(sp.i0e, lambda x, y: sp.i1e(x) - _sign(x) * y)  # i0e = exp(-|x|) i0: kinked at 0
defelementwise(sp.i1e, lambda x, y: 0.5 * (sp.i0e(x) + sp.ive(2, x)) - _sign(x) * y)
defelementwise(sp.k0, lambda x, y: -sp.k1(x))
defelementwise(sp.k1, lambda x, y: -0.5 * (sp.k0(x) + sp.kv(2, x)))
defelementwise(sp.k0e, lambda x, y: y - sp.k1e(x))
defelementwise(sp.k1e, lambda x, y: y - 0.5 * (sp.k0e(x) + sp.kve(2, x)))


# -- logsumexp, softmax, log_softmax --------------------------------------------------
# The primitives take every array positionally (so that ``b`` can be traced);
# the public functions below them have SciPy's signatures.


@scipy_primitive("scipy.special.logsumexp")
def _logsumexp(a, b, *, axis=None, keepdims=False, return_sign=False):
    return sp.logsumexp(a, axis=axis, b=b, keepdims=keepdims, return_sign=return_sign)


def logsumexp(a, axis=None, b=None, keepdims=False, return_sign=False):
    """``scipy.special.logsumexp``: ``log(sum(b * exp(a), axis))``, differentiable
    w.r.t. ``a`` and ``b``; with ``return_sign`` the sign is a constant.

    >>> import numpy as np, mutagrad as mg
    >>> from mutagrad.scipy.special import logsumexp
    >>> mg.grad(logsumexp)(np.zeros(2))
    array([0.5, 0.5])
    """
    return _logsumexp(a, b, axis=axis, keepdims=keepdims, return_sign=return_sign)


def _lse_weights(a, b, out, axis, keepdims, return_sign):
    """∂y/∂a and ∂y/∂b, shaped like the broadcast of a and b:
    s * b * exp(a - y) and s * exp(a - y) (s the sign, 1 without return_sign)."""
    y, s = out if return_sign else (out, None)
    shape = np.broadcast_shapes(np.shape(a), np.shape(b)) if b is not None else np.shape(a)
    w = np.exp(a - expand_to(y, shape, axis, keepdims))
    if s is not None:
        w = w * expand_to(bottom(s), shape, axis, keepdims)
    return shape, (w if b is None else w * b), w


@rrule(_logsumexp)
def _logsumexp_rrule(a, b, *, axis=None, keepdims=False, return_sign=False):
    out = _logsumexp(a, b, axis=axis, keepdims=keepdims, return_sign=return_sign)

    def pullback(g):
        if return_sign:
            g = g[0]  # the sign is piecewise constant
        if is_zero(g):
            return ZERO, ZERO
        shape, da, db = _lse_weights(a, b, out, axis, keepdims, return_sign)
        gx = expand_to(g, shape, axis, keepdims)
        abar = Thunk(lambda: unbroadcast(gx * _cj(da), np.shape(a)))
        bbar = NoTangent() if b is None else Thunk(lambda: unbroadcast(gx * _cj(db), np.shape(b)))
        return abar, bbar

    return out, pullback


@frule(_logsumexp)
def _logsumexp_frule(primals, tangents, *, axis=None, keepdims=False, return_sign=False):
    (a, b), (ta, tb) = primals, tangents
    out = _logsumexp(a, b, axis=axis, keepdims=keepdims, return_sign=return_sign)
    _, da, db = _lse_weights(a, b, out, axis, keepdims, return_sign)
    acc = ZERO
    if not is_zero(ta):
        acc = ta * da
    if b is not None and not is_zero(tb):
        acc = acc + tb * db
    ydot = ZERO if is_zero(acc) else np.sum(acc, axis=axis, keepdims=keepdims)
    return out, ((ydot, ZERO) if return_sign else ydot)


def _axis_sum(x, axis):
    return np.sum(x, axis=axis, keepdims=True)


@scipy_primitive("scipy.special.softmax")
def _softmax(x, *, axis=None):
    return sp.softmax(x, axis=axis)


@scipy_primitive("scipy.special.log_softmax")
def _log_softmax(x, *, axis=None):
    return sp.log_softmax(x, axis=axis)


def softmax(x, axis=None):
    """``scipy.special.softmax``: ``exp(x) / sum(exp(x), axis)``.

    >>> import numpy as np, mutagrad as mg
    >>> from mutagrad.scipy.special import softmax
    >>> mg.jacobian(softmax)(np.zeros(2))
    array([[ 0.25, -0.25],
           [-0.25,  0.25]])
    """
    return _softmax(x, axis=axis)


def log_softmax(x, axis=None):
    """``scipy.special.log_softmax``: ``x - logsumexp(x, axis)``.

    >>> import numpy as np, mutagrad as mg
    >>> from mutagrad.scipy.special import log_softmax
    >>> mg.grad(lambda x: log_softmax(x)[0])(np.zeros(2))
    array([ 0.5, -0.5])
    """
    return _log_softmax(x, axis=axis)


# Jacobians: softmax diag(y) - y yᵀ; log_softmax I - 1 yᵀ (y = softmax)
@rrule(_softmax)
def _softmax_rrule(x, *, axis=None):
    y = _softmax(x, axis=axis)
    return y, lambda g: (_cj(y) * (g - _axis_sum(g * _cj(y), axis)),)


@frule(_softmax)
def _softmax_frule(primals, tangents, *, axis=None):
    (x,), (t,) = primals, tangents
    y = _softmax(x, axis=axis)
    return y, y * (t - _axis_sum(t * y, axis))


@rrule(_log_softmax)
def _log_softmax_rrule(x, *, axis=None):
    y = _log_softmax(x, axis=axis)
    return y, lambda g: (g - _cj(np.exp(y)) * _axis_sum(g, axis),)


@frule(_log_softmax)
def _log_softmax_frule(primals, tangents, *, axis=None):
    (x,), (t,) = primals, tangents
    y = _log_softmax(x, axis=axis)
    return y, t - _axis_sum(t * np.exp(y), axis)




def multigammaln(a, d):
    """``scipy.special.multigammaln``: the log of the multivariate gamma function
    (a composite of gammaln, so differentiable to any order)."""
    d = int(d)
    j = np.arange(d)
    a = np.asarray(a) if not hasattr(a, "shape") else a
    terms = sp.gammaln(np.expand_dims(a, -1) - j / 2.0)
    return d * (d - 1) / 4.0 * np.log(np.pi) + np.sum(terms, axis=-1)
