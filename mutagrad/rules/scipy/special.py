"""scipy.special: the ufuncs by their partial derivatives, and primitives for
the plain-Python functions (logsumexp, softmax, log_softmax, polygamma, factorial,
spherical_jn, spherical_yn, spherical_in, spherical_kn).

The ufuncs dispatch through ``__array_ufunc__`` like NumPy's, so
``scipy.special.gammaln(x)`` works on traced arrays once registered here.
The plain-Python functions call ``np.asarray`` and cannot be dispatched: the
primitives below are what ``mutagrad.scipy.special`` exports under their
names. Partial derivatives are written with registered functions only, so
every order is available.

Orders and shape parameters: an integer order (``polygamma``'s ``n``) has no
derivative (``NoTangent``); a real order or shape parameter (``jv``'s ``v``,
``hyp1f1``'s ``a``) has one that is not implemented
(``mg.not_implemented``; ``gammainc``'s ``a``, ``betainc``'s ``a`` and ``b`` and
the distribution functions built on them have their first derivative, not their second),
as is the derivative w.r.t. x of ``zeta(x[, q])``
(SciPy has no zeta'; ``scipy.special.zeta`` calls the ufuncs ``_zeta`` and
``_riemann_zeta``, registered under those names).
"""
from __future__ import annotations

import math

import numpy as np
import scipy.special as _scipy_special
from scipy.special import _ufuncs as _spu  # zeta(x[, q]) is a Python function calling these

from ...core import Tracer, bottom, get_primitive, stop_gradient
from ...registry import conj_if_complex as _cj
from ...registry import defelementwise, defnotimplemented, defzero, frule, primitive, rrule, strong_times
from ...tangents import NoTangent, Thunk, ZeroTangent, is_zero, not_implemented, unbroadcast
from ..reductions import expand_to


class _Special:
    """scipy.special's names, each its ufunc itself where SciPy wraps one in a Python function (with
    SCIPY_ARRAY_API=1 gammaln, betainc... are such wrappers, which call the ufunc for NumPy arrays, traced
    ones too): the rules are registered on the ufuncs (arrayapi2: `import mutagrad` failed)."""

    def __getattr__(self, name):
        f = getattr(_scipy_special, name)
        wrapped = getattr(f, "__wrapped__", None)  # (functools.wraps of the ufunc: digamma's is psi)
        return wrapped if not isinstance(f, np.ufunc) and isinstance(wrapped, np.ufunc) else f


sp = _Special()

ZERO = ZeroTangent()
_2_SQRT_PI = 2.0 / np.sqrt(np.pi)
_SQRT_PI_2 = np.sqrt(np.pi) / 2.0
_SQRT_2PI = np.sqrt(2.0 * np.pi)
_PI_2 = np.pi / 2.0
_DEG = np.pi / 180.0


def scipy_primitive(name):
    """``@mg.primitive`` under a readable name (``scipy.special.logsumexp``)."""

    def register(fun):
        w = primitive(fun)
        w._mutagrad_primitive.name = name  # (which decides Primitive.names_line again)
        w._mutagrad_primitive.lists_as_arrays = True  # (SciPy's function converts them with np.asarray)
        return w

    return register


def _quotient0(x, y):
    """``x / y``, with 0 where both are 0: the derivative along ``y`` of
    ``x log(y)`` (xlogy, rel_entr...) is 0 on the line x = 0, also at y = 0."""
    both = (bottom(x) == 0) & (bottom(y) == 0)
    return x / np.where(both, 1.0, y) if np.any(both) else x / y


# name -> how many leading arguments (the parameters) have no derivative, or their positions when they do not
# lead (gdtr's b): docs/coverage.md says so
PARAMETER_DERIVATIVE_NOT_IMPLEMENTED: dict = {}
# name -> the parameter whose second derivative is not implemented (the first is): docs/coverage.md says so
SECOND_DERIVATIVE_NOT_IMPLEMENTED = {f"scipy.special.{n}": p for n, p in (
    ("gammainc", "a"), ("gammaincc", "a"), ("gammaincinv", "a"), ("gammainccinv", "a"), ("chdtr", "v"),
    ("chdtrc", "v"), ("chdtri", "v"), ("gdtr", "b"), ("gdtrc", "b"), ("betainc", "a and b"), ("betaincc", "a and b"),
    ("betaincinv", "a and b"), ("betainccinv", "a and b"), ("stdtr", "df"), ("stdtrit", "df"), ("fdtr", "dfn and dfd"),
    ("fdtrc", "dfn and dfd"), ("fdtri", "dfn and dfd"))}


def defparametric(fn, nparams, dx, integer=False, why=None, dparams=None):
    """Both rules of ``fn(*params, x)``, elementwise in ``x`` with derivative
    ``dx(*params, x, y)``. The derivative w.r.t. the parameters is
    ``NoTangent`` for integer ones (orders) and not implemented otherwise
    (``why``: the message, if the default's "x" is not the argument's name);
    ``dparams`` maps the position of a parameter that has a derivative to its
    partial (gdtr's rate ``a``)."""
    dparams = dparams or {}
    p = defelementwise(fn, *(dparams.get(i) for i in range(nparams)), dx)
    p.names_line = True  # (its rules may not implement a derivative: see Primitive.names_line)
    missing = tuple(i for i in range(nparams) if i not in dparams)
    if integer or not missing:
        return p
    name = p.name
    # (the leading ones by their count, others by their positions: what the coverage table says)
    PARAMETER_DERIVATIVE_NOT_IMPLEMENTED[name] = len(missing) if missing == tuple(range(len(missing))) else missing
    why = why or f"the derivative of {name} w.r.t. its parameter is not implemented (only w.r.t. x)"
    base_rrule, base_frule = p.rrule, p.frule

    def rule(*xs):
        y, pullback = base_rrule(*xs)
        return y, lambda g: tuple(not_implemented(why) if i in missing else gi for i, gi in enumerate(pullback(g)))

    def forward(primals, tangents):
        y, ydot = base_frule(primals, tangents)
        # (a parameter's tangent of zeros asks for no derivative along it: a parameter held fixed
        # inside a traced vector; the missing partial is finite, so its product is exactly zero)
        if any(not is_zero(tangents[i]) and np.any(bottom(tangents[i]) != 0) for i in missing):
            return y, not_implemented(why)
        return y, ydot

    p.rrule, p.frule = rule, forward
    return p


# -- gamma and beta functions ---------------------------------------------------


@scipy_primitive("scipy.special.polygamma")
def polygamma(n, x):
    """``scipy.special.polygamma``: the n-th derivative of digamma (n an integer)."""
    return sp.polygamma(n, x)


def _polygamma_next(n, x, name):
    if np.iscomplexobj(bottom(x)):  # SciPy's polygamma is real only
        order = "n + 1" if isinstance(n, Tracer) or np.ndim(n) else int(n) + 1
        return not_implemented(f"the derivative of scipy.special.{name} at a complex argument: it is "
                               f"polygamma({order}, z), which SciPy computes for real arguments only")
    return polygamma(np.add(bottom(n), 1), x)  # (n as SciPy takes it: a number, an array, a list of orders)


# (its order: SciPy's polygamma is NaN between integers, not a step function as the counts below: a traced order
# has no derivative, not a zero one; regress55)
defparametric(polygamma, 1, lambda n, x, y: _polygamma_next(n, x, "polygamma"),
              why="scipy.special.polygamma(n, x) has no derivative w.r.t. its order n (SciPy's value is NaN between "
                  "integer orders): pass n as integers (a constant), not a differentiated array")
defelementwise(sp.gammaln, lambda x, y: sp.digamma(x))
defelementwise(sp.loggamma, lambda x, y: sp.digamma(x))
defelementwise(sp.digamma, lambda x, y: _polygamma_next(0, x, "digamma"))
defelementwise(sp.gamma, lambda x, y: y * sp.digamma(x))


def _digamma_step(b, a, pg=polygamma):
    """ψ(b) - ψ(b + a): where |a| <= 1e-3 |b| by its Taylor series in a, -Σ_k a^k ψ^(k)(b) / k!
    (to a^4: within 1e-12), since the difference of two nearly equal digammas loses the digits
    there (beta(1e-17, 2)'s derivative in b came out 0, and only 4 digits were right at 1e-12).
    ``pg``: SciPy's polygamma for plain arrays (inside a primitive's plain computation)."""
    ab, bb = np.asarray(bottom(a)), np.asarray(bottom(b))
    direct = sp.digamma(b) - sp.digamma(a + b)
    if np.iscomplexobj(ab) or np.iscomplexobj(bb):
        return direct
    small = (np.abs(ab) <= 1e-3 * np.abs(bb)) & (ab != 0) & np.isfinite(bb)
    if not np.any(small):
        return direct
    bs = np.where(small, b, 1.0)
    series = 0.0
    for k in (4, 3, 2, 1):  # (Horner in a: a (ψ1 + a/2 (ψ2 + a/3 (ψ3 + a/4 ψ4))))
        series = (pg(k, bs) + series) * (a / k)
    return np.where(small, -series, direct)


defelementwise(sp.beta,
               lambda a, b, y: y * _digamma_step(a, b),
               lambda a, b, y: y * _digamma_step(b, a))
defelementwise(sp.betaln,
               lambda a, b, y: _digamma_step(a, b),
               lambda a, b, y: _digamma_step(b, a))


def _rgamma_d(x, y):
    """(1/Γ)' = -ψ/Γ. At and near the poles of Γ (0, -1, -2...), where 1/Γ is 0 and ψ
    infinite (the product loses digits, and its derivative ψ² - ψ' cancels inf - inf),
    from the reflection 1/Γ(x) = Γ(1-x) sin(πx)/π: Γ(1-x) (cos πx - sin(πx) ψ(1-x)/π),
    smooth there (so every order is accurate). Each branch at safe inputs only."""
    xb = np.asarray(bottom(x))
    xr = xb.real
    # within 1/4 of a pole, real, and where Γ(1-x) is finite
    pole = (xr < 0.25) & (xr > -170) & (np.abs(xr - np.round(xr)) < 0.25) & (xb.imag == 0)
    if not pole.any():
        return -y * sp.digamma(x)
    xp = np.where(pole, x, 0.5)
    xo = np.where(pole, 0.5, x)
    at_pole = sp.gamma(1 - xp) * (np.cos(np.pi * xp) - np.sin(np.pi * xp) * sp.digamma(1 - xp) / np.pi)
    return np.where(pole, at_pole, -sp.rgamma(xo) * sp.digamma(xo))


defelementwise(sp.rgamma, _rgamma_d)
defzero(sp.gammasgn)


def _poch_dz(z, m, y):
    """d/dz poch(z, m) = poch(z, m) (ψ(z+m) - ψ(z)). For an integer m (|m| <= 64) poch is a
    product: for m >= 0, (z)(z+1)...(z+m-1), whose derivative is the product rule's sum of the
    products leaving out one factor each (no division: finite at its roots z = 0, -1, ..., where
    y Σ 1/(z+k) is 0 * inf); for m < 0, 1 / ((z-1)...(z+m)), -y Σ 1/(z-k), k = 1..-m. Near a pole
    of ψ the two digammas are huge and cancel (1e10 - 1e10 at z = 1e-10). Element by element:
    an array m may mix integers and others."""
    mb = np.asarray(bottom(m))
    if mb.dtype.kind not in "fiu" or np.iscomplexobj(bottom(z)):
        return y * (sp.digamma(z + m) - sp.digamma(z))
    with np.errstate(invalid="ignore"):
        exact = (mb == np.round(mb)) & (np.abs(mb) <= 64)
    if not exact.any():
        return _poch_dz_formula(z, m)
    mx = np.where(exact, mb, 0)
    top = int(np.max(mx, initial=0))
    factors = [np.where(mx > k, z + k, 1.0) for k in range(top)]
    before, after = [1.0], [1.0]  # (products of the factors before k, and after it)
    for k in range(top - 1):
        before.append(before[-1] * factors[k])
        after.append(after[-1] * factors[top - 1 - k])
    rising = 0.0
    for k in range(top):
        rising = rising + np.where(mx > k, before[k] * after[top - 1 - k], 0.0)
    falling = 0.0
    for k in range(1, int(-np.min(mx, initial=0)) + 1):
        falling = falling - np.where(mx <= -k, 1.0 / (z - k), 0.0)
    if isinstance(m, Tracer):  # (the product's derivatives along m: see _poch_dz_along_m; y has them)
        d = np.where(mx >= 0, rising, sp.poch(z, mb) * falling) + _poch_dz_along_m(z, m, exact)
    else:
        d = np.where(mx >= 0, rising, y * falling)
    if exact.all():
        return d
    zg, mg_ = np.where(exact, 0.5, z), np.where(exact, 0.5, m)  # (the others: finite where not used)
    return np.where(exact, d, _poch_dz_formula(zg, mg_))


def _poch_dz_along_m(z, m, exact):
    """Zero, whose derivatives along m are those of d/dz poch(z, m) where m is an integer (``exact``):
    the product there is computed with m's value, a constant. It is G(z, m) - G(z, m0), m0 m's value, of
    G = _poch_dz_formula. Where G is not finite at m0 (z a non-positive integer with z + m one too, where
    the derivative along m is not finite either) the term is 0."""
    m0 = np.asarray(bottom(m), dtype=float)
    with np.errstate(all="ignore"):
        ok = exact & np.isfinite(_poch_dz_formula(np.asarray(bottom(z), dtype=float), m0))
    if not ok.any():
        return 0.0
    zq, mq, m0q = np.where(ok, z, 0.5), np.where(ok, m, 1.5), np.where(ok, m0, 1.5)
    return np.where(ok, _poch_dz_formula(zq, mq) - _poch_dz_formula(zq, m0q), 0.0)


def _poch_dz_formula(z, m):
    """d/dz poch(z, m) = poch(z, m) (ψ(z+m) - ψ(z)); within 1/4 of a pole of Γ(z) (z = 0, -1, ...) with
    z + m not near one, where poch is Γ(z+m) rgamma(z) and that is 0 · inf, Γ(z+m) (ψ(z+m) rgamma(z) +
    rgamma'(z)), the same function, finite."""
    zb, mb = np.asarray(bottom(z), dtype=float), np.asarray(bottom(m), dtype=float)
    with np.errstate(invalid="ignore"):
        root = _near_pole(zb) & ~_near_pole(zb + mb)
    if not root.any():
        return sp.poch(z, m) * (sp.digamma(z + m) - sp.digamma(z))
    zr, zo, mr, mo = np.where(root, z, 0.5), np.where(root, 0.5, z), np.where(root, m, 0.5), np.where(root, 0.5, m)
    general = sp.poch(zo, mo) * (sp.digamma(zo + mo) - sp.digamma(zo))
    at_root = sp.gamma(zr + mr) * (sp.digamma(zr + mr) * sp.rgamma(zr) + _rgamma_d(zr, sp.rgamma(zr)))
    return np.where(root, at_root, general)


defelementwise(sp.poch, _poch_dz, lambda z, m, y: y * sp.digamma(z + m))

# regularized incomplete gamma and beta functions, Student's t cdf: derivative
# w.r.t. the integration limit is the density
def _gamma_density(a, x, y):
    """x^(a-1) e^-x / Γ(a), in logs (no overflow); at x = 0 as the power itself, whose own
    derivative there is (a-1) x^(a-2) / Γ(a) (1 for a = 2: in logs it was 0 · inf, a zero)."""
    at0 = np.asarray(bottom(x)) == 0
    endless = np.isposinf(np.asarray(bottom(a), dtype=float))  # (a = inf: P = 0, Q = 1 at every finite x, flat;
    if np.any(endless):  # pdtr(inf, m), a count with no upper limit: the formula was inf - inf)
        a = np.where(endless, 1.0, a)
    d = np.exp(sp.xlogy(a - 1, x) - x - sp.gammaln(a))
    if np.any(at0):
        d = np.where(at0, x ** (a - 1) * np.exp(-x) * sp.rgamma(a), d)
    if np.any(endless):
        d = np.where(endless & np.isfinite(np.asarray(bottom(x), dtype=float)), 0.0, d)
    return d


# d/da of the regularized lower incomplete gamma function P(a, x) (JAX's igamma_grad_a): below a + 1 by the
# series P = e^L sum_n c_n (L = a ln x - x - ln Γ(a+1), c_n = x^n / ((a+1)...(a+n))), each term with its
# derivative; above, by the continued fraction of Γ(a, x) (Lentz's method), carried with its derivative in a:
# where P or Q is near 1 the other, small one, so no digits cancel (within 1e-11 of mpmath over a in
# [0.05, 3000]). Its own derivative in x is the density's; in a (a second derivative) it is not implemented.
def _gammainc_da_plain(a, x):
    a, x = np.asarray(a, dtype=float), np.asarray(x, dtype=float)
    shape = np.broadcast_shapes(a.shape, x.shape)
    a, x = np.broadcast_to(a, shape), np.broadcast_to(x, shape)  # (read only: the arguments may be)
    out = np.full(shape, np.nan)
    ok = (a > 0) & (x >= 0) & np.isfinite(a)
    out[ok & ((x == 0) | np.isposinf(x))] = 0.0
    out[np.isposinf(a) & (x >= 0) & np.isfinite(x)] = 0.0  # (P = 0 for every a large enough: flat)
    fin = ok & (x > 0) & np.isfinite(x)
    low = fin & (x < a + 1)
    if low.any():
        out[low] = _gammainc_da_series(a[low], x[low])
    high = fin & ~low
    if high.any():
        out[high] = -_gammaincc_da_fraction(a[high], x[high])
    return out[()] if out.ndim == 0 else out


def _gammainc_da_series(a, x):
    c, s, ds, h = np.ones_like(a), np.ones_like(a), np.zeros_like(a), np.zeros_like(a)
    for n in range(1, 1_000_000):
        c = c * x / (a + n)
        h = h + 1.0 / (a + n)
        s = s + c
        ds = ds - c * h
        if np.all(c * (1.0 + h) <= 1e-17 * np.minimum(s, 1.0)):
            break
    e = np.exp(a * np.log(x) - x - sp.gammaln(a + 1))
    return e * (s * (np.log(x) - sp.digamma(a + 1)) + ds)


def _gammaincc_da_fraction(a, x):
    tiny = 1e-300
    b, db = x + 1.0 - a, -np.ones_like(a)
    c, dc = np.full_like(a, 1.0 / tiny), np.zeros_like(a)
    d, dd = 1.0 / b, db / -b ** 2
    h, dh = d.copy(), dd.copy()
    for i in range(1, 1_000_000):
        an, dan = -i * (i - a), float(i)
        b = b + 2.0
        den = an * d + b
        dden = dan * d + an * dd + db
        den = np.where(np.abs(den) < tiny, tiny, den)
        d, dd = 1.0 / den, -dden / den ** 2
        c, dc = b + an / c, db + dan / c - (an / c) * (dc / c)
        c = np.where(np.abs(c) < tiny, tiny, c)
        delta, ddelta = d * c, dd * c + d * dc
        h, dh = h * delta, dh * delta + h * ddelta
        # (both converged: the fraction, and its derivative, relative to h's own scale; to 2 eps, not below it,
        # where the rounding of delta near 1 never gets for every element: 34 s for 200 of them, bayesvi)
        if np.all(np.abs(delta - 1.0) <= 4e-16) and np.all(np.abs(ddelta) <= 4e-16 * (1.0 + np.abs(dh / h))):
            break
    return np.exp(a * np.log(x) - x - sp.gammaln(a)) * (h * (np.log(x) - sp.digamma(a)) + dh)


@scipy_primitive("the derivative of scipy.special.gammainc w.r.t. a")
def gammainc_da(a, x):
    """d/da of ``scipy.special.gammainc(a, x)``."""
    with np.errstate(all="ignore"):
        return _gammainc_da_plain(a, x)


def _gammainc_da_dx(a, x, y):
    d = _gamma_density(a, x, y)
    return d * np.log(np.where(np.asarray(bottom(x)) == 0, 1.0, x)) - d * sp.digamma(a)


defparametric(gammainc_da, 1, _gammainc_da_dx,
              why="the second derivative of scipy.special.gammainc (and of its relatives) w.r.t. a is not implemented")
PARAMETER_DERIVATIVE_NOT_IMPLEMENTED.pop(gammainc_da._mutagrad_primitive.name, None)  # (internal: no coverage.md row)


def _inverse_gamma_da(a, x):
    """dx/da of the x with gammainc(a, x) = p (or gammaincc(a, x) = q): -dP/da over the density."""
    return -gammainc_da(a, x) * _inverse_gamma_density(a, x)


defparametric(sp.gammainc, 1, _gamma_density, dparams={0: lambda a, x, y: gammainc_da(a, x)})
defparametric(sp.gammaincc, 1, lambda a, x, y: -_gamma_density(a, x, y), dparams={0: lambda a, x, y: -gammainc_da(a, x)})
# their inverses w.r.t. the probability: the reciprocal of the density at the result
defparametric(sp.gammaincinv, 1, lambda a, p, x: _inverse_gamma_density(a, x),
              dparams={0: lambda a, p, x: _inverse_gamma_da(a, x)})
defparametric(sp.gammainccinv, 1, lambda a, p, x: -_inverse_gamma_density(a, x),
              dparams={0: lambda a, p, x: _inverse_gamma_da(a, x)})


def _beta_density(a, b, x, y):
    """x^(a-1) (1-x)^(b-1) / B(a, b), in logs; at x = 0 and x = 1 as the powers themselves (as
    _gamma_density: their own derivatives there)."""
    xb = np.asarray(bottom(x))
    ends = (xb == 0) | (xb == 1)
    d = np.exp(sp.xlogy(a - 1, x) + sp.xlog1py(b - 1, -x) - sp.betaln(a, b))
    if np.any(ends):
        # (where the end's own power is infinite, a < 1 at 0 or b < 1 at 1, its slope dominates the other
        # factor's: that one is held at its value there, else -inf + inf gave NaN)
        ab, bb = np.asarray(bottom(a)), np.asarray(bottom(b))
        x0 = np.where((xb == 1) & (ab < 1) & (bb < 1), stop_gradient(x), x)
        x1 = np.where((xb == 0) & (ab < 1) & (bb < 1), stop_gradient(x), x)
        d = np.where(ends, x0 ** (a - 1) * (1 - x1) ** (b - 1) / sp.beta(a, b), d)
    return d


# d/da and d/db of the regularized incomplete beta function I_x(a, b), and the two derivatives its relatives need:
# along a with a (1-x)/x held (x moves as x (1-x)/a) and along b with b x/(1-x) held (x moves as -x (1-x)/b). fdtr
# in dfn and dfd and stdtr in df are those (fdtr's w = dfn x/(dfd + dfn x) keeps dfd/(2x) = a (1-w)/w and
# dfn x/2 = b w/(1-w)), and to first order the shape's change and x's cancel there: for a large shape the two
# partials of a sum are 1/df and the sum 1/df^2 (summed so, stdtr's derivative at df = 1e8 is 9% off).
# Below x = (a+1)/(a+b+2), where it converges (in O(sqrt(max(a, b))) steps), by the even part of the continued
# fraction of Numerical Recipes' betacf, with λ = a (1-x) - b x (each side without rounding):
# I = x^a (1-x)^b (a+1) / (a B(a, b)) / G, G = λ + 1 + A1/(B1 + A2/(B2 + ...)),
# A_m = (a+m-1)(a+b+m-1) m (b-m) x^2 / (a+2m-1)^2 (A1 = (a+b)(b-1) x^2 / (a+1)),
# B_m = λ + 2m + (a+b) x/(a+2m+1) + m (b-m) x (1/(a+2m-1) + 1/(a+2m+1)),
# where betacf's own terms near -1 (a large, x near 1: 1 - x = O(1/a)) would cancel to O(1/a) at every other step;
# by Lentz's method, each step with its derivative (dI = I (dlog P - dlog G)). Above, by I_x(a, b) = 1 -
# I_(1-x)(b, a): the shapes swap and the derivative changes sign. The prefactor's log by Stirling's series for large
# shapes (SciPy's betaln(1.5, 5e5) is 5e-10 off), and each derivative's pieces grouped so that none cancels
# (ψ(a+b) - ψ(a) - b/a by its asymptotic series). A whole number b ends the fraction (A_b = 0) while its derivative
# along b goes on. Within 2e-12 of mpmath over a, b in [0.05, 1000], x in (0, 1), and stdtr's derivative in df within
# 3e-14 up to df = 1e12. Its own derivative in x is a closed form; in a and b (second derivatives) not implemented.
_HALF_LOG_2PI = 0.5 * np.log(2.0 * np.pi)
_BERNOULLI = (1 / 6, -1 / 30, 1 / 42, -1 / 30, 5 / 66)  # B2, B4, ..., B10
_SWAPPED = (1, 0, 3, 2)  # (each derivative's own in I_(1-x)(b, a))


def _log1pmx(u, log1pu=None):
    """log(1 + u) - u (plain; ``log1pu``: log(1 + u) if the caller has it without rounding), by its series where
    |u| < 1/4 (the difference cancels there)."""
    out = (np.log1p(u) if log1pu is None else log1pu) - u
    small = np.abs(u) < 0.25
    if small.any():
        us, s = u[small], 0.0
        for k in range(32, 1, -1):  # (u^2 (-1/2 + u (1/3 - u (1/4 - ...))): 1/4^30 is below the rounding)
            s = s * us + (-1.0) ** (k + 1) / k
        out[small] = s * us * us
    return out


def _stirling(z):
    """ln Γ(z) - ((z - 1/2) ln z - z + ln(2π)/2) (plain), by its series from z = 10 (to 1e-16 there)."""
    big = z >= 10
    zs, zb = z[~big], z[big]
    out = np.empty_like(z)
    out[~big] = sp.gammaln(zs) - ((zs - 0.5) * np.log(zs) - zs + _HALF_LOG_2PI)
    w, s = 1 / (zb * zb), 0.0
    for k in range(len(_BERNOULLI), 0, -1):
        s = s * w + _BERNOULLI[k - 1] / (2 * k * (2 * k - 1))
    out[big] = s / zb
    return out


def _digamma_excess(p, q):
    """ψ(p + q) - ψ(p) - q/p (plain), from p = 20 by the asymptotic series of ψ, where the difference cancels:
    ln(1 + v) - v + v / (2 (p + q)) - Σ_k B_2k / (2k p^2k) ((1 + v)^-2k - 1), v = q/p."""
    out = sp.digamma(p + q) - sp.digamma(p) - q / p
    big = p >= 20
    if big.any():
        pb, qb = p[big], q[big]
        v = qb / pb
        lv = np.log1p(v)
        s = _log1pmx(v) + 0.5 * v / (pb + qb)
        for k in range(1, len(_BERNOULLI) + 1):
            s = s - _BERNOULLI[k - 1] / (2 * k) * pb ** (-2 * k) * np.expm1(-2 * k * lv)
        out[big] = s
    return out


def _betainc_log_prefactor(p, q, lx, ly, lam):
    """ln(x^p y^q / (p B(p, q))), y = 1 - x, λ = p y - q x. From max(p, q) = 10 by Stirling's series: p ln(x (p+q)/p)
    + q ln(y (p+q)/q) + ln(q / (p (p+q)))/2 - ln(2π)/2 - μ(p) - μ(q) + μ(p+q), the first two as p log1p(-λ/p) and
    q log1p(λ/q) near the mean (where their roundings of λ cancel), each term moderate."""
    out = p * lx + q * ly - np.log(p) - sp.betaln(p, q)
    big = np.maximum(p, q) >= 10
    if big.any():
        p, q, lx, ly, lam = (v[big] for v in (p, q, lx, ly, lam))
        tp = np.where(np.abs(lam) < 0.5 * p, p * np.log1p(-lam / p), p * (lx + np.log1p(q / p)))
        tq = np.where(np.abs(lam) < 0.5 * q, q * np.log1p(lam / q), q * (ly + np.log1p(p / q)))
        out[big] = (tp + tq + 0.5 * np.log(q / (p * (p + q))) - _HALF_LOG_2PI - _stirling(p) - _stirling(q)
                    + _stirling(p + q))
    return out


def _betainc_fraction_d(p, q, x, y, lx, ly, wrt):
    """The derivative of I_x(p, q) for x below (p+1)/(p+q+2) (plain), along p (wrt 0), q (1), p with p y/x held
    (2) or q with q x/y held (3); y = 1 - x and the logarithms from the caller, without rounding."""
    tiny = 1e-300
    pq, x2 = p + q, x * x
    lam = p * y - q * x
    dp = 1.0 if wrt in (0, 2) else 0.0
    dlam = (y, -x, y * lam / p, x * lam / q)[wrt]
    # d log of the prefactor, each grouped so that no terms of 1/p (1/q) cancel to 1/p^2 for a large p (q)
    if wrt == 0:
        dlogp = lx - _digamma_step(p + 1, q - 1, sp.polygamma) + 1 / (p + 1)
    elif wrt == 1:
        dlogp = ly - _digamma_step(q, p, sp.polygamma)
    elif wrt == 2:
        dlogp = np.where(q <= p, _log1pmx(-y, lx) + _digamma_excess(p, q) + q * y / p - 1 / (p * (p + 1)),
                         lx + y - _digamma_step(p + 1, q - 1, sp.polygamma) - q * x / p + 1 / (p + 1))
    else:
        dlogp = np.where(p <= q, _log1pmx(-x, ly) + _digamma_excess(q, p) + p * x / q,
                         ly + x - _digamma_step(q, p, sp.polygamma) - p * y / q)
    f = lam + 1.0  # (G so far; positive below (p+1)/(p+q+2))
    g = dlam / f  # (d log G so far)
    c, dc = f.copy(), dlam + np.zeros_like(f)  # (Lentz: C0 = G0, D0 = 0)
    d, dd = np.zeros_like(p), np.zeros_like(p)
    live = np.ones(p.shape, dtype=bool)
    for m in range(1, 50_000):  # (a, b up to 1e10 near x = a/(a+b); beyond, NaN below)
        # A_m = u (q - m) and B_m = λ + 2m + w + m (q - m) x h; the derivatives of log u, w and (q - m) x, each
        # grouped so that no terms cancel, and A_m's without a division by q - m (0 at a whole number q)
        e0, e1 = p + 2 * m - 1, p + 2 * m + 1
        u = pq * x2 / (p + 1) if m == 1 else (p + m - 1) * (pq + m - 1) * m * x2 / (e0 * e0)
        h, w = 1 / e0 + 1 / e1, pq * x / e1
        if wrt in (0, 2):
            dlu = (1 - q) / (pq * (p + 1)) if m == 1 else m / ((p + m - 1) * e0) + (m - q) / ((pq + m - 1) * e0)
            dw = x * (2 * m + 1 - q) / (e1 * e1)
            dqmx = 0.0
            if wrt == 2:
                dlu, dw, dqmx = dlu + 2 * y / p, dw + x * pq * y / (p * e1), (q - m) * x * y / p
        elif wrt == 1:
            dlu, dw, dqmx = 1 / (pq + m - 1), x / e1, x
        else:
            dw, dqmx = -x * lam / (q * e1), x * (q * x + m * y) / q
        a = u * (q - m)
        if wrt == 3:  # (u ((q - m) dlog u + 1), whose terms of 1/q would cancel)
            da = u / q * ((q - m) * (q * x - y * (p + m - 1)) / (pq + m - 1) + q * x + m * y)
        else:
            da = a * dlu + (u if wrt == 1 else 0.0)
        b = lam + 2 * m + w + m * (q - m) * x * h
        db = dlam + dw + m * dqmx * h - m * (q - m) * x * dp * (1 / (e0 * e0) + 1 / (e1 * e1))
        den = b + a * d
        dden = db + da * d + a * dd
        den = np.where(np.abs(den) < tiny, tiny, den)
        d = 1.0 / den
        dd = -dden * d * d
        c, dc = b + a / c, db + da / c - a * dc / (c * c)
        c = np.where(np.abs(c) < tiny, tiny, c)
        delta, step = c * d, dc / c - dden * d
        f, g = np.where(live, f * delta, f), np.where(live, g + step, g)
        # (each element stops when both have converged, to a few roundings: a tighter test, which the rounding of
        # delta need not meet, kept every element going to the last step)
        live &= ~((np.abs(delta - 1.0) <= 1e-15) & (np.abs(step) <= 1e-15 * (np.abs(g) + np.abs(dlogp)) + 1e-300))
        if not live.any():
            break
    res = np.exp(_betainc_log_prefactor(p, q, lx, ly, lam) + np.log1p(p)) / f * (dlogp - g)
    return np.where(live, np.nan, res)


def _betainc_d_plain(a, b, x, wrt):
    a, b, x = (np.asarray(v, dtype=float) for v in (a, b, x))
    shape = np.broadcast_shapes(a.shape, b.shape, x.shape)
    a, b, x = (np.broadcast_to(v, shape) for v in (a, b, x))  # (read only: the arguments may be)
    out = np.full(a.shape, np.nan)
    ok = (a > 0) & (b > 0) & (x >= 0) & (x <= 1)
    inner = ok & (x > 0) & (x < 1)
    out[ok & ~inner] = 0.0  # (I = 0 at x = 0 and 1 at x = 1 for every a and b)
    out[inner & (np.isinf(a) != np.isinf(b))] = 0.0  # (I = 0 for every a large enough, 1 for every b: flat)
    fin = inner & np.isfinite(a) & np.isfinite(b)
    swap = fin & (x > (a + 1) / (a + b + 2))
    low = fin & ~swap
    if low.any():
        xl = x[low]
        out[low] = _betainc_fraction_d(a[low], b[low], xl, 1.0 - xl, np.log(xl), np.log1p(-xl), wrt)
    if swap.any():
        # (1 - x exact from x = 1/2 up; below, a relative rounding of 1e-16 of 1 - x: its logarithms from x)
        xs = x[swap]
        out[swap] = -_betainc_fraction_d(b[swap], a[swap], 1.0 - xs, xs, np.log1p(-xs), np.log(xs), _SWAPPED[wrt])
    return out[()] if out.ndim == 0 else out


def _betainc_d(a, b, x, wrt):
    with np.errstate(all="ignore"):
        return _betainc_d_plain(a, b, x, wrt)


@scipy_primitive("the derivative of scipy.special.betainc w.r.t. a")
def betainc_da(a, b, x):
    """d/da of ``scipy.special.betainc(a, b, x)``."""
    return _betainc_d(a, b, x, 0)


@scipy_primitive("the derivative of scipy.special.betainc w.r.t. b")
def betainc_db(a, b, x):
    """d/db of ``scipy.special.betainc(a, b, x)``."""
    return _betainc_d(a, b, x, 1)


@scipy_primitive("the derivative of scipy.special.betainc w.r.t. a with a (1 - x) / x held")
def betainc_da_held(a, b, x):
    """d/da of ``scipy.special.betainc(a, b, x)`` with x moving as x (1 - x) / a."""
    return _betainc_d(a, b, x, 2)


@scipy_primitive("the derivative of scipy.special.betainc w.r.t. b with b x / (1 - x) held")
def betainc_db_held(a, b, x):
    """d/db of ``scipy.special.betainc(a, b, x)`` with x moving as -x (1 - x) / b."""
    return _betainc_d(a, b, x, 3)


_BETAINC_D = (betainc_da, betainc_db, betainc_da_held, betainc_db_held)


def _betainc_d_dx(a, b, x, y, wrt):
    """d/dx of each derivative: d/da of the density is the density times ln x - ψ(a) + ψ(a+b), d/db times
    ln(1-x) - ψ(b) + ψ(a+b); the held ones add d/dx of x (1-x) dens / a (of -x (1-x) dens / b), which is
    dens (a (1-x) - b x) / a (its negative over b). The logarithm's factor as 0 at x = 0 and 1 (as _gammainc_da_dx)."""
    xb = np.asarray(bottom(x))
    if wrt in (0, 2):
        log = np.log(np.where(xb == 0, 1.0, x)) - _digamma_step(a, b)
        held = 1 - x - b * x / a if wrt == 2 else 0.0
    else:
        log = np.log1p(-np.where(xb == 1, 0.0, x)) - _digamma_step(b, a)
        held = x - a * (1 - x) / b if wrt == 3 else 0.0
    return _beta_density(a, b, x, y) * (log + held)


_BETAINC_WHY = ("the second derivative of scipy.special.betainc (and of its relatives: stdtr, fdtr, the t, beta, F, "
                "binomial (in n) and negative binomial (in n) distributions) w.r.t. its shapes a and b is not "
                "implemented")
defparametric(betainc_da, 2, lambda a, b, x, y: _betainc_d_dx(a, b, x, y, 0), why=_BETAINC_WHY)
defparametric(betainc_db, 2, lambda a, b, x, y: _betainc_d_dx(a, b, x, y, 1), why=_BETAINC_WHY)
defparametric(betainc_da_held, 2, lambda a, b, x, y: _betainc_d_dx(a, b, x, y, 2), why=_BETAINC_WHY)
defparametric(betainc_db_held, 2, lambda a, b, x, y: _betainc_d_dx(a, b, x, y, 3), why=_BETAINC_WHY)
for _p in _BETAINC_D:  # (internal: no coverage.md row)
    PARAMETER_DERIVATIVE_NOT_IMPLEMENTED.pop(_p._mutagrad_primitive.name, None)


def _betainc_dshape(a, b, x, y, wrt):
    """The derivative ``wrt`` (as _betainc_fraction_d's) of I_x(a, b), with y = 1 - x from the caller without
    rounding: above x = 1/2 from I_y(b, a), whose 1 - x would lose the digits of a small y (fdtr at a large x, stdtr
    near t = 0)."""
    hi = np.asarray(bottom(x)) > 0.5
    if not hi.any():
        return _BETAINC_D[wrt](a, b, x)
    swapped = _BETAINC_D[_SWAPPED[wrt]]
    if hi.all():
        return -swapped(b, a, y)
    return np.where(hi, -swapped(b, a, np.where(hi, y, 0.5)), _BETAINC_D[wrt](a, b, np.where(hi, 0.5, x)))


def _flat_outside(inner, fn, *args):
    """``fn`` of the values of ``args``, pairs (value, a safe stand-in), where the plain mask ``inner`` holds, and 0
    elsewhere (the ends, where no shape moves the function), each value replaced by its stand-in there so that no
    inf or NaN of the formula reaches a derivative."""
    if inner.all():
        return fn(*(v for v, _ in args))
    return np.where(inner, fn(*(np.where(inner, v, safe) for v, safe in args)), 0.0)


def _betaincinv_d(a, b, x, wrt):
    """dx/da (wrt 0) or dx/db of the x with betainc(a, b, x) = p, or with betaincc(a, b, x) = q (the same: 1 - q
    is constant too): -dI/da over the density at x; 0 at x = 0 and 1, which no shape moves."""
    xb = np.asarray(bottom(x))
    return _undefined(x, _flat_outside((xb > 0) & (xb < 1), lambda xs: -(betainc_da, betainc_db)[wrt](a, b, xs)
                                       / _beta_density(a, b, xs, None), (x, 0.5)))


defparametric(sp.betainc, 2, _beta_density,
              dparams={0: lambda a, b, x, y: betainc_da(a, b, x), 1: lambda a, b, x, y: betainc_db(a, b, x)})
defparametric(sp.betaincc, 2, lambda a, b, x, y: -_beta_density(a, b, x, y),
              dparams={0: lambda a, b, x, y: -betainc_da(a, b, x), 1: lambda a, b, x, y: -betainc_db(a, b, x)})
# their inverses w.r.t. the probability: the reciprocal of the density at the result (a Beta sample by inversion,
# beta.ppf(u, a, b): the bayesvi tester)
defparametric(sp.betaincinv, 2, lambda a, b, p, x: 1.0 / _beta_density(a, b, x, None),
              dparams={0: lambda a, b, p, x: _betaincinv_d(a, b, x, 0),
                       1: lambda a, b, p, x: _betaincinv_d(a, b, x, 1)})
defparametric(sp.betainccinv, 2, lambda a, b, q, x: -1.0 / _beta_density(a, b, x, None),
              dparams={0: lambda a, b, q, x: _betaincinv_d(a, b, x, 0),
                       1: lambda a, b, q, x: _betaincinv_d(a, b, x, 1)})


# -- the distribution functions of scipy.special (cdtr family) and binom ---------------------
# Each is a gammainc or betainc in disguise, so its derivative w.r.t. the integration limit is a
# density above. Counts are data: SciPy floors pdtr's k and bdtr's k (truncates bdtr's n, pdtri's k,
# with a warning), so the function is piecewise constant in them and their derivative NoTangent
# (integer=True), which a traced float count receives as a zero: right except at the integers,
# where the function jumps. A real shape (chdtr's v, gdtr's b; fdtr's dfn and dfd) has gammainc's (betainc's)
# derivative in its shape (its second derivative there is not implemented). Where SciPy's value is NaN (outside the
# domain) so is the derivative.


def _undefined(y, d, infinite=False):
    """``d``, NaN where SciPy's value ``y`` is NaN (``infinite``: also where it is infinite), where the
    formulas were finite (pdtr(k, m < 0); ellipkinc at φ = π/2, m = 1)."""
    yb = np.asarray(bottom(y))
    bad = ~np.isfinite(yb) if infinite else np.isnan(yb)
    # (of y there, not a constant NaN: its derivatives, this rule's at every order, are NaN there too)
    return np.where(bad, y * np.nan, d) if bad.any() else d


def _count(k, round=np.floor):
    """The integer SciPy computes with (a plain array: the count has no derivative)."""
    return round(np.asarray(bottom(k), dtype=float))


def _inverse_gamma_density(a, x):
    """1 / (x^(a-1) e^-x / Γ(a)), in logs: the derivative of an inverse incomplete gamma function."""
    return np.exp(x - sp.xlogy(a - 1, x) + sp.gammaln(a))


# chdtr(v, x) = gammainc(v/2, x/2); chdtri(v, p) is the x with chdtrc(v, x) = p
defparametric(sp.chdtr, 1, lambda v, x, y: _undefined(y, 0.5 * _gamma_density(v / 2, x / 2, y)),
              dparams={0: lambda v, x, y: _undefined(y, 0.5 * gammainc_da(v / 2, x / 2))})
defparametric(sp.chdtrc, 1, lambda v, x, y: _undefined(y, -0.5 * _gamma_density(v / 2, x / 2, y)),
              dparams={0: lambda v, x, y: _undefined(y, -0.5 * gammainc_da(v / 2, x / 2))})
defparametric(sp.chdtri, 1, lambda v, p, x: _undefined(x, -2.0 * _inverse_gamma_density(v / 2, x / 2)),
              dparams={0: lambda v, p, x: _undefined(x, _inverse_gamma_da(v / 2, x / 2))})
# pdtr(k, m) = gammaincc(floor(k) + 1, m): d/dm = -m^k e^-m / k!; pdtri(k, y) is the m with pdtr(k, m) = y
defparametric(sp.pdtr, 1, lambda k, m, y: _undefined(y, -_gamma_density(_count(k) + 1, m, y)), integer=True)
defparametric(sp.pdtrc, 1, lambda k, m, y: _undefined(y, _gamma_density(_count(k) + 1, m, y)), integer=True)
defparametric(sp.pdtri, 1, lambda k, p, m: _undefined(m, -_inverse_gamma_density(_count(k, np.trunc) + 1, m)),
              integer=True)


# gdtr(a, b, x) = gammainc(b, a x): d/dx = a dens(b, a x), d/da = x dens(b, a x)
def _gdtr_da(a, b, x, y):
    """x dens(b, a x); at x = 0 as the power x^b a^(b-1) / Γ(b), 0 there also for b < 1 (the density
    is infinite: 0 · inf), with its own derivatives there (b x^(b-1) a^(b-1) / Γ(b) along x)."""
    at0 = np.asarray(bottom(x)) == 0
    if not np.any(at0):
        return _undefined(y, x * _gamma_density(b, a * x, y))
    xs = np.where(at0, 1.0, x)
    power = x ** b * a ** (b - 1) * np.exp(-a * x) * sp.rgamma(b)
    return _undefined(y, np.where(at0, power, xs * _gamma_density(b, a * xs, y)))


defparametric(sp.gdtr, 2, lambda a, b, x, y: _undefined(y, a * _gamma_density(b, a * x, y)),
              dparams={0: _gdtr_da, 1: lambda a, b, x, y: _undefined(y, gammainc_da(b, a * x))})
defparametric(sp.gdtrc, 2, lambda a, b, x, y: _undefined(y, -a * _gamma_density(b, a * x, y)),
              dparams={0: lambda a, b, x, y: -_gdtr_da(a, b, x, y), 1: lambda a, b, x, y: _undefined(y, -gammainc_da(b, a * x))})


# bdtr(k, n, p) = betainc(n - k, k + 1, 1 - p) = 1 - betainc(k + 1, n - k, p), k floored and n truncated:
# d/dp = -p^k (1-p)^(n-k-1) / B(k+1, n-k), the density in p (no 1 - p to round). Where SciPy's value is a
# constant (bdtr's k >= n: 1; bdtrc's k < 0: 1, k >= n: 0) the derivative is 0 (the density's B(k+1, n-k)
# is infinite there: 0, or NaN at p = 0 or 1).
def _bdtr_dp(k, n, p, y):
    fk, fn = _count(k), _count(n, np.trunc)
    const = (fk < 0) | (fk >= fn)
    a, b = np.where(const, 1.0, fk + 1), np.where(const, 1.0, fn - fk)
    return _undefined(y, np.where(const, 0.0, _beta_density(a, b, p, y)))


def _bdtri_dy(k, n, y, p):
    """1 / (d bdtr / dp) at the result p."""
    fk, fn = _count(k), _count(n, np.trunc)
    bad = (fk < 0) | (fk >= fn)  # (SciPy: NaN)
    a, b = np.where(bad, 1.0, fk + 1), np.where(bad, 1.0, fn - fk)
    return _undefined(p, -np.exp(sp.betaln(a, b) - sp.xlogy(a - 1, p) - sp.xlog1py(b - 1, -p)))


defparametric(sp.bdtr, 2, lambda k, n, p, y: -_bdtr_dp(k, n, p, y), integer=True)
defparametric(sp.bdtrc, 2, _bdtr_dp, integer=True)
defparametric(sp.bdtri, 2, _bdtri_dy, integer=True)


# fdtr(dfn, dfd, x) = betainc(a, b, w), a = dfn/2, b = dfd/2, w = dfn x / (dfd + dfn x): d/dx is the F density
# dfn^a dfd^b x^(a-1) / ((dfd + dfn x)^(a+b) B(a, b)), in logs (no 1 - w, which loses the digits of a large x),
# at x = 0 as those powers themselves (their own derivatives there, as _gamma_density). fdtri(dfn, dfd, p) is
# the x with fdtr = p: 1 / density. The degrees of freedom are real shapes: betainc's derivatives in a and b.
def _f_density(dfn, dfd, x, y):
    a, b = dfn / 2, dfd / 2
    at0 = np.asarray(bottom(x)) == 0
    xs = np.where(at0, 1.0, x) if at0.any() else x
    d = np.exp(a * np.log(dfn) + b * np.log(dfd) + (a - 1) * np.log(xs) - (a + b) * np.log(dfd + dfn * xs)
               - sp.betaln(a, b))
    if at0.any():
        power = dfn ** a * dfd ** b * x ** (a - 1) / ((dfd + dfn * x) ** (a + b) * sp.beta(a, b))
        d = np.where(at0, power, d)
    return _undefined(y, d)


def _fdtr_d(dfn, dfd, x, y, wrt):
    """d fdtr / d dfn (wrt 0) or d dfd (wrt 1). fdtr = I_w(a, b), a = dfn/2, b = dfd/2, with w = dfn x / (dfd + dfn x)
    and its complement dfd / (dfd + dfn x), each without rounding; dfn moves w with a (1-w)/w = dfd / (2x) held, dfd
    with b w/(1-w) = dfn x / 2 held: half of betainc's derivatives along those. 0 at x = 0 and x = inf, where fdtr
    is 0 or 1 for every shape."""
    xb = np.asarray(bottom(x))

    def along(xs):
        s = dfd + dfn * xs
        return 0.5 * _betainc_dshape(dfn / 2, dfd / 2, dfn * xs / s, dfd / s, 2 + wrt)

    return _undefined(y, _flat_outside((xb > 0) & np.isfinite(xb), along, (x, 1.0)))


def _fdtri_d(dfn, dfd, x, wrt):
    """dx/ddfn (wrt 0) or dx/ddfd of the x with fdtr(dfn, dfd, x) = p: -d fdtr / d dfn over the F density at x;
    0 at x = 0 and x = inf (p = 0 and 1)."""
    xb = np.asarray(bottom(x))
    return _undefined(x, _flat_outside((xb > 0) & np.isfinite(xb), lambda xs: -_fdtr_d(dfn, dfd, xs, xs, wrt)
                                       / _f_density(dfn, dfd, xs, xs), (x, 1.0)))


defparametric(sp.fdtr, 2, _f_density, dparams={0: lambda dfn, dfd, x, y: _fdtr_d(dfn, dfd, x, y, 0),
                                                1: lambda dfn, dfd, x, y: _fdtr_d(dfn, dfd, x, y, 1)})
defparametric(sp.fdtrc, 2, lambda dfn, dfd, x, y: -_f_density(dfn, dfd, x, y),
              dparams={0: lambda dfn, dfd, x, y: -_fdtr_d(dfn, dfd, x, y, 0),
                       1: lambda dfn, dfd, x, y: -_fdtr_d(dfn, dfd, x, y, 1)})
defparametric(sp.fdtri, 2, lambda dfn, dfd, p, x: _undefined(x, 1.0 / _f_density(dfn, dfd, x, p)),
              dparams={0: lambda dfn, dfd, p, x: _fdtri_d(dfn, dfd, x, 0),
                       1: lambda dfn, dfd, p, x: _fdtri_d(dfn, dfd, x, 1)})


# nbdtr(k, n, p) = betainc(n, k + 1, p), k and n floored (counts: NoTangent): d/dp = p^(n-1) (1-p)^k / B(n, k+1);
# nbdtrc = 1 - nbdtr; nbdtri(k, n, y) is the p with nbdtr = y: 1 / density.
def _nbdtr_dp(k, n, p, y):
    fk, fn = _count(k), _count(n)
    bad = (fk < 0) | (fn < 1)  # (SciPy: NaN)
    a, b = np.where(bad, 1.0, fn), np.where(bad, 1.0, fk + 1)
    return _undefined(y, _beta_density(a, b, p, y))


defparametric(sp.nbdtr, 2, _nbdtr_dp, integer=True)
defparametric(sp.nbdtrc, 2, lambda k, n, p, y: -_nbdtr_dp(k, n, p, y), integer=True)
defparametric(sp.nbdtri, 2, lambda k, n, y, p: _undefined(p, 1.0 / _nbdtr_dp(k, n, p, y)), integer=True)


# binom(n, k) = Γ(n+1) / (Γ(k+1) Γ(n-k+1)), real in both arguments: d/dn = binom (ψ(n+1) - ψ(n-k+1)),
# d/dk = binom (ψ(n-k+1) - ψ(k+1)). Where k+1 or w = n-k+1 is at a pole of Γ (a non-positive integer)
# binom is 0 and a digamma infinite (0 · inf: k integer > n >= 0 integer, k a negative integer); near
# one, the second derivative cancels (ψ² - ψ', as _rgamma_d says). Within 1/4 of such a pole the
# derivatives come from the factor 1/Γ that vanishes there (its derivative _rgamma_d is smooth):
# binom = rgamma(k+1) q1 with q1 = Γ(n+1)/Γ(w), or rgamma(w) q2 with q2 = Γ(n+1)/Γ(k+1), the ratios
# in logs (no overflow for large n). For n >= -1/2 at most one of k+1, w is near a pole; for n < -1/2
# (both may be) from Γ(n+1) (rgamma(k+1) rgd(w) ...) itself. SciPy's binom is NaN at a negative integer
# n; near one, with k near an integer, both poles are near and cancel: the derivatives lose digits as
# 1/distance² (1e-8 at 1e-4), and within 1e-4 they are not implemented.
def _near_pole(z):
    """Whether z is within 1/4 of 0, -1, -2, ... (real)."""
    zb = np.asarray(bottom(z), dtype=float)
    with np.errstate(invalid="ignore"):
        return (zb < 0.25) & (np.abs(zb - np.round(zb)) < 0.25)


def _gamma_ratio(a, b):
    """Γ(a)/Γ(b) in logs (a and b away from the poles)."""
    return sp.gammasgn(a) * sp.gammasgn(b) * np.exp(sp.gammaln(a) - sp.gammaln(b))


def _binom_parts(n, k):
    """The masks (at a pole of k+1, of w, n < -1/2 with either), each as a plain array."""
    nb = np.asarray(bottom(n), dtype=float)
    at_k, at_w = _near_pole(bottom(k) + 1), _near_pole(nb - bottom(k) + 1)
    neg = (nb < -0.5) & (nb > -170) & (at_k | at_w)
    return at_k & ~neg, at_w & ~neg, neg


def _at(mask, x, safe):
    return np.where(mask, x, safe)


def _rgd(z):
    return _rgamma_d(z, sp.rgamma(z))


_BINOM_CANCELS = ("the derivative of scipy.special.binom(n, k) within 1e-4 of a negative integer n, with k near an "
                  "integer, is not implemented: the poles of Γ(n+1) and Γ(n-k+1) cancel there (SciPy's binom is NaN "
                  "at the integer)")


def _binom_d(n, k, y, wrt):
    """∂binom/∂n (wrt 0) or ∂k (wrt 1): each branch at safe inputs only."""
    at_k, at_w, neg = _binom_parts(n, k)
    nb = np.asarray(bottom(n), dtype=float)
    with np.errstate(invalid="ignore"):
        dist = np.abs(nb - np.round(nb))
    if np.any((nb < -0.5) & (dist > 0) & (dist < 1e-4) & (_near_pole(bottom(k) + 1) | _near_pole(nb - bottom(k) + 1))):
        return not_implemented(_BINOM_CANCELS)  # (4 digits were lost at 1e-6: 4.3343 for 4.3333)
    near = at_k | at_w | neg
    if not near.any():
        return y * (sp.digamma(n - k + 1) - sp.digamma(k + 1)) if wrt else -y * _digamma_step(n - k + 1, k)
    ng, kg, yg = _at(near, 0.5, n), _at(near, 0.25, k), _at(near, 0.0, y)
    d = yg * (sp.digamma(ng - kg + 1) - sp.digamma(kg + 1)) if wrt else -yg * _digamma_step(ng - kg + 1, kg)
    if at_k.any():  # binom = rgamma(k+1) q1: d/dk = q1 (rgd(k+1) + rgamma(k+1) ψ(w)); d/dn the general one
        na, ka = _at(at_k, n, 0.5), _at(at_k, k, -1.0)
        wa = na - ka + 1
        if wrt:
            da = _gamma_ratio(na + 1, wa) * (_rgd(ka + 1) + sp.rgamma(ka + 1) * sp.digamma(wa))
        else:
            da = -sp.rgamma(ka + 1) * _gamma_ratio(na + 1, wa) * _digamma_step(wa, ka)
        d = np.where(at_k, da, d)
    if at_w.any():  # binom = rgamma(w) q2: d/dk = -q2 (rgd(w) + rgamma(w) ψ(k+1)), d/dn q2 (rgd(w) + rgamma(w) ψ(n+1))
        nw, kw = _at(at_w, n, 0.5), _at(at_w, k, 1.5)
        ww = nw - kw + 1
        dw = _gamma_ratio(nw + 1, kw + 1) * (_rgd(ww) + sp.rgamma(ww) * sp.digamma(kw + 1 if wrt else nw + 1))
        d = np.where(at_w, -dw if wrt else dw, d)
    if neg.any():  # Γ(n+1) (rgamma(w) rgd(k+1) - rgamma(k+1) rgd(w)), Γ(n+1) rgamma(k+1) (rgd(w) + ψ(n+1) rgamma(w))
        nn, kn = _at(neg, n, -0.75), _at(neg, k, 0.5)
        wn = nn - kn + 1
        if wrt:
            dn = sp.gamma(nn + 1) * (sp.rgamma(wn) * _rgd(kn + 1) - sp.rgamma(kn + 1) * _rgd(wn))
        else:
            dn = sp.gamma(nn + 1) * sp.rgamma(kn + 1) * (_rgd(wn) + sp.digamma(nn + 1) * sp.rgamma(wn))
        d = np.where(neg, dn, d)
    return d


defelementwise(sp.binom, lambda n, k, y: _binom_d(n, k, y, 0), lambda n, k, y: _binom_d(n, k, y, 1))


def _t_density(df, t, y):
    # the normalizer as -betaln(1/2, df/2) - log(df)/2 (the gammaln difference cancels for large
    # df: 2% off at 1e14); df = inf is the normal density
    inf = np.isinf(np.asarray(bottom(df)))
    d = np.where(inf, 1.0, df) if inf.any() else df
    p = np.exp(-sp.betaln(0.5, d / 2) - 0.5 * np.log(d) - (d + 1) / 2 * np.log1p(t * t / d))
    return np.where(inf, np.exp(-0.5 * t * t) / _SQRT_2PI, p) if inf.any() else p


def _stdtr_ddf(df, t, y):
    """d stdtr / d df. stdtr = 1/2 + sign(t) I_z(1/2, df/2) / 2 with z = t^2 / (df + t^2) and its complement
    df / (df + t^2), each without rounding, and df moves z with (df/2) z/(1-z) = t^2/2 held: sign(t) / 4 times
    betainc's derivative along b so. 0 at t = 0 (stdtr = 1/2 for every df), at t = +-inf (0 or 1) and at
    df = inf (the normal cdf)."""
    dfb, tb = np.asarray(bottom(df)), np.asarray(bottom(t))

    def along(df, t):
        t2 = t * t
        return np.sign(np.asarray(bottom(t))) / 4 * _betainc_dshape(0.5, df / 2, t2 / (df + t2), df / (df + t2), 3)

    return _undefined(y, _flat_outside(np.isfinite(dfb) & np.isfinite(tb) & (tb != 0), along, (df, 1.0), (t, 1.0)))


def _stdtrit_ddf(df, t):
    """dt/ddf of the t with stdtr(df, t) = p: -d stdtr / d df over the density at t; 0 at t = +-inf (p = 0, 1)."""
    return _undefined(t, _flat_outside(np.isfinite(np.asarray(bottom(t))),
                                       lambda ts: -_stdtr_ddf(df, ts, ts) / _t_density(df, ts, None), (t, 0.0)))


defparametric(sp.stdtr, 1, _t_density, dparams={0: _stdtr_ddf})
# stdtrit(df, p) is the t with stdtr(df, t) = p: 1 / the density there
defparametric(sp.stdtrit, 1, lambda df, p, t: _undefined(t, 1.0 / _t_density(df, t, t)),
              dparams={0: lambda df, p, t: _stdtrit_ddf(df, t)})

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
defelementwise(sp.ndtri_exp, lambda v, y: _SQRT_2PI * np.exp(v + 0.5 * y * y))  # ndtri(exp(v))
# Owen's T(h, a) = (1/2π) ∫_0^a exp(-h²(1+t²)/2) / (1+t²) dt
defelementwise(sp.owens_t,
               lambda h, a, y: -0.5 * np.exp(-0.5 * h * h) / _SQRT_2PI * sp.erf(a * h / np.sqrt(2.0)),
               lambda h, a, y: np.exp(-0.5 * h * h * (1 + a * a)) / (2 * np.pi * (1 + a * a)))

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


def _ive_d(v, z, y):  # (the derivative of iv times the scaling: for a complex z, _scaled_by_imag's A)
    return 0.5 * (sp.ive(v - 1, z) + sp.ive(v + 1, z))


def _ive_dx(v, x, y):  # (a real x: ive = iv e^{-|x|})
    return _ive_d(v, x, y) - _sign(x) * y
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


def _integer_order(n):
    """The order SciPy's integer-order functions (yn, kn, expn) compute with: a float one truncated
    toward zero (with SciPy's warning), so that n - 1 and n + 1 are the neighbours of that one."""
    return np.trunc(np.asarray(bottom(n), dtype=float))


defparametric(sp.yn, 1, lambda n, x, y: 0.5 * (sp.yn(_integer_order(n) - 1, x) - sp.yn(_integer_order(n) + 1, x)),
              integer=True)
defparametric(sp.kn, 1, lambda n, x, y: -0.5 * (sp.kn(_integer_order(n) - 1, x) + sp.kn(_integer_order(n) + 1, x)),
              integer=True)

# -- Hankel functions, jve and yve, spherical Bessel functions, Airy and Struve functions ---------------------
# H^(1)_v' = (H^(1)_{v-1} - H^(1)_{v+1}) / 2, H^(2) likewise (holomorphic: real or complex z). The scaled
# hankel1e = H^(1) e^{-iz} and hankel2e = H^(2) e^{iz} (holomorphic too) add -i and +i times themselves.
defparametric(sp.hankel1, 1, lambda v, z, y: 0.5 * (sp.hankel1(v - 1, z) - sp.hankel1(v + 1, z)))
defparametric(sp.hankel2, 1, lambda v, z, y: 0.5 * (sp.hankel2(v - 1, z) - sp.hankel2(v + 1, z)))
defparametric(sp.hankel1e, 1, lambda v, z, y: 0.5 * (sp.hankel1e(v - 1, z) - sp.hankel1e(v + 1, z)) - 1j * y)
defparametric(sp.hankel2e, 1, lambda v, z, y: 0.5 * (sp.hankel2e(v - 1, z) - sp.hankel2e(v + 1, z)) + 1j * y)


def _jve_d(v, z, y):
    return 0.5 * (sp.jve(v - 1, z) - sp.jve(v + 1, z))


def _yve_d(v, z, y):
    return 0.5 * (sp.yve(v - 1, z) - sp.yve(v + 1, z))


def _scaled_by_imag(p, holomorphic, part=np.imag):
    """The rules of jve(v, z) = jv(v, z) e^{-|Im z|} (yve likewise) over those defparametric gave ``p``,
    which are right for a real z (the scaling is 1 there). For a complex z the function is not holomorphic:
    dy = A dz - sign(Im z) y d(Im z), A = ``holomorphic(v, z, y)`` = (f_{v-1} - f_{v+1}) / 2 of the scaled
    functions (the derivative of f_v times the scaling). Where Im z = 0 exactly (a complex z on the real
    axis) |Im z| has its kink: its derivative is taken as 0 there, as np.abs's rule takes |x|' at 0, so
    dy = A dz (the real direction's derivative; the imaginary direction's one-sided ones are A i -+ y).
    The sign is a constant: every order follows from A's and y's own rules. ``part=np.real``: the scaling
    e^{-|Re z|} of ive(v, z) = iv(v, z) e^{-|Re z|}, dy = A dz - sign(Re z) y d(Re z) (the mom tester)."""
    base_rrule, base_frule = p.rrule, p.frule

    def rule(v, z):
        y, base_pullback = base_rrule(v, z)
        if not np.iscomplexobj(bottom(z)):
            return y, base_pullback

        def pullback(g):
            gv = base_pullback(g)[0]  # (the order's: not implemented)
            if is_zero(g):
                return gv, ZERO

            def total():  # (the adjoint of t -> A t + B Im t: conj(A) g + i Re(conj(B) g), B = -sign(Im z) y;
                s = np.sign(part(bottom(z)))  # of t -> A t + B Re t: conj(A) g + Re(conj(B) g))
                scaled = np.real(g * _cj(s * y))
                return unbroadcast(g * _cj(holomorphic(v, z, y)) - (1j * scaled if part is np.imag else scaled),
                                   np.shape(z))

            return gv, Thunk(total)

        return y, pullback

    def forward(primals, tangents):
        if not np.iscomplexobj(bottom(primals[1])):
            return base_frule(primals, tangents)
        (v, z), tz = primals, tangents[1]
        y, vdot = base_frule(primals, (tangents[0], ZERO))  # (the order's: zero, or not implemented)
        if not is_zero(vdot) or is_zero(tz):
            return y, vdot
        s = np.sign(part(bottom(z)))
        return y, strong_times(tz, holomorphic(v, z, y)) - (s * y) * part(tz)

    p.rrule, p.frule = rule, forward
    return p


_scaled_by_imag(defparametric(sp.ive, 1, _ive_dx), _ive_d, np.real)  # (ive(v, z) = iv e^{-|Re z|}: not holomorphic)
_scaled_by_imag(defparametric(sp.jve, 1, _jve_d), _jve_d)
_scaled_by_imag(defparametric(sp.yve, 1, _yve_d), _yve_d)


# Spherical Bessel functions: SciPy's spherical_jn, spherical_yn, spherical_in, spherical_kn are plain Python
# (np.asarray on z), so mutagrad.scipy.special exports the functions below, calling these primitives.
# f_n' is SciPy's derivative=True; its own derivative, f_n'', by the recurrence (2n+1) f_n' = a n f_{n-1} +
# b (n+1) f_{n+1} (DLMF 10.51.2, 10.51.5; (a, b) = (1, -1) for j and y, (1, 1) for i, (-1, -1) for k)
# differentiated: (2n+1) f_n'' = a n f'_{n-1} + b (n+1) f'_{n+1}. It is the ODE f'' = -(2/z) f' - (1 -
# n(n+1)/z^2) f (+ (1 + n(n+1)/z^2) f for i and k) without its divisions by z (exact at z = 0, where j_0''
# = -1/3). The order n is an integer (no derivative).
def _spherical(kind, a, b):
    name = f"scipy.special.spherical_{kind}n"
    fun = getattr(sp, f"spherical_{kind}n")

    # (copies: SciPy's wrapper broadcasts n and z with np.broadcast_arrays, which fails on the read-only
    # arrays a rule saved, "cannot set WRITEABLE flag")
    @scipy_primitive(name)
    def value(n, z):
        return fun(np.array(n), np.array(z))

    @scipy_primitive(name)
    def derivative(n, z):
        return fun(np.array(n), np.array(z), derivative=True)

    def second(n, z, y):
        nb = np.asarray(bottom(n), dtype=float)
        below = np.maximum(nb - 1, 0).astype(np.int64)  # (n = 0: its coefficient is 0)
        return (a * nb * derivative(below, z) + b * (nb + 1) * derivative((nb + 1).astype(np.int64), z)) / (
            2 * nb + 1)

    defparametric(value, 1, lambda n, z, y: derivative(n, z), integer=True)
    defparametric(derivative, 1, second, integer=True)

    def public(n, z, derivative_=False):
        return derivative(n, z) if derivative_ else value(n, z)

    return value, derivative, public


_spherical_jn, _spherical_jn_d, _spherical_jn_public = _spherical("j", 1, -1)
_spherical_yn, _spherical_yn_d, _spherical_yn_public = _spherical("y", 1, -1)
_spherical_in, _spherical_in_d, _spherical_in_public = _spherical("i", 1, 1)
_spherical_kn, _spherical_kn_d, _spherical_kn_public = _spherical("k", -1, -1)


def spherical_jn(n, z, derivative=False):
    """``scipy.special.spherical_jn``: j_n(z), or j_n'(z) with ``derivative=True``, differentiable w.r.t. z
    (real or complex) to any order; the integer order n has no derivative.

    >>> import numpy as np, mutagrad as mg
    >>> from mutagrad.scipy.special import spherical_jn
    >>> bool(np.isclose(mg.grad(lambda z: spherical_jn(0, z))(1.0), -spherical_jn(1, 1.0)))
    True
    """
    return _spherical_jn_public(n, z, derivative)


def spherical_yn(n, z, derivative=False):
    """``scipy.special.spherical_yn``: y_n(z), or y_n'(z) with ``derivative=True``, differentiable w.r.t. z
    to any order; the integer order n has no derivative."""
    return _spherical_yn_public(n, z, derivative)


def spherical_in(n, z, derivative=False):
    """``scipy.special.spherical_in``: i_n(z), or i_n'(z) with ``derivative=True``, differentiable w.r.t. z
    to any order; the integer order n has no derivative."""
    return _spherical_in_public(n, z, derivative)


def spherical_kn(n, z, derivative=False):
    """``scipy.special.spherical_kn``: k_n(z), or k_n'(z) with ``derivative=True``, differentiable w.r.t. z
    to any order; the integer order n has no derivative."""
    return _spherical_kn_public(n, z, derivative)


# Struve functions (real x): H_v' = (H_{v-1} - H_{v+1}) / 2 + c, L_v' = (L_{v-1} + L_{v+1}) / 2 + c, c = (x/2)^v
# / (2 sqrt(pi) Gamma(v + 3/2)) (DLMF 11.4.25, 11.4.26; checked against central differences), without the
# division by x of H_v' = H_{v-1} - (v/x) H_v.
def _struve_c(v, x):
    return np.power(0.5 * x, v) * sp.rgamma(v + 1.5) / (2.0 * np.sqrt(np.pi))


defparametric(sp.struve, 1, lambda v, x, y: 0.5 * (sp.struve(v - 1, x) - sp.struve(v + 1, x)) + _struve_c(v, x))
defparametric(sp.modstruve, 1,
              lambda v, x, y: 0.5 * (sp.modstruve(v - 1, x) + sp.modstruve(v + 1, x)) + _struve_c(v, x))

# -- exponential integrals, dilogarithm, zeta ------------------------------------------


def _expn_d(n, x, y):
    """E_n' = -E_{n-1} for n >= 1; E_0 = exp(-x)/x (SciPy has no E_{-1})."""
    nb = _integer_order(n)
    if (nb >= 1).all():
        return -sp.expn(nb - 1, x)
    return np.where(nb == 0, -np.exp(-x) * (1 + x) / (x * x), -sp.expn(np.maximum(nb - 1, 0), x))


defparametric(sp.expn, 1, _expn_d, integer=True)
defelementwise(sp.exp1, lambda x, y: -np.exp(-x) / x)
defelementwise(sp.expi, lambda x, y: np.exp(x) / x)


def _spence_d(z, y):
    """SciPy's spence(z) = ∫_1^z log(t)/(1-t) dt: the integrand log(z)/(1-z), and at z = 1
    (0/0) its Taylor polynomial -log1p(u)/u = -(1 - u/2 + u²/3 - u³/4 + u⁴/5), u = z - 1,
    exact there to the fourth order. Each branch at safe inputs only."""
    one = bottom(z) == 1
    if not np.any(one):
        return np.log(z) / (1.0 - z)
    u = z - 1.0
    zs = np.where(one, 2.0, z)
    return np.where(one, -(1 - u * (0.5 - u * (1 / 3 - u * (0.25 - u / 5)))), np.log(zs) / (1.0 - zs))


defelementwise(sp.spence, _spence_d)
# zeta(x, q) = sum_k (k + q)^-x: d/dq = -x zeta(x + 1, q); SciPy has no derivative in x
defparametric(_spu._zeta, 1, lambda x, q, y: -x * _spu._zeta(x + 1, q),
              why="the derivative of scipy.special.zeta(x, q) w.r.t. x is not implemented (only w.r.t. q)")
defnotimplemented(_spu._riemann_zeta, "the derivative of scipy.special.zeta(x) w.r.t. x is not implemented "
                  "(SciPy has no zeta')")
defnotimplemented(sp.zetac, "the derivative of scipy.special.zetac(x) w.r.t. x is not implemented "
                  "(SciPy has no zeta')")


_BRANCH_SERIES = (1.0, -1.0 / 3, 11.0 / 72, -43.0 / 540, 769.0 / 17280, -221.0 / 8505)  # 1 + W in powers of q
_INV_E = (0.36787944117144233, -1.2428753672788363e-17)  # 1/e as a sum of two doubles


def _lambertw_d(z, k, tol, y):
    """W' = W / (z (1 + W)), which is 1 / ((1 + W) e^W) at z = 0 (W(0) = 0 on
    branch 0; other branches are -inf there: NaN, the derivative being unbounded). Near the
    branch point -1/e, 1 + W is small and SciPy's W carries an error there that the quotient
    would magnify (10^4 times at z = -1/e + 1e-10): 1 + W comes from its series in
    q = ±sqrt(2 (e z + 1)) instead (to q^6: within 1e-14 for |e z + 1| < 5e-5; e z + 1 as
    e (z + 1/e), with 1/e in two parts, which does not cancel). The branches meeting there:
    k = 0 (q the principal root: on the cut z < -1/e, the side of the sign of Im z, a real z
    taking +0 as SciPy does), k = -1 from Im z >= +0 and k = 1 from Im z <= -0 (q negated)."""
    zb = np.asarray(bottom(z))
    at0 = zb == 0
    # (W / z first: z (1 + W) overflows for z near the largest float, where W' is an ordinary number: the
    # photovoltaic tester's lambertw(np.exp(u)) of a module's diode term, u >= 704, got 0)
    if np.any(at0):
        d = np.where(at0, np.exp(-y) / (1.0 + y), y / np.where(at0, 1.0, z) / (1.0 + y))
    else:
        d = y / z / (1.0 + y)
    if zb.dtype.kind in "fc":
        kb = np.asarray(bottom(k))
        gap = np.e * ((zb + _INV_E[0]) + _INV_E[1])  # e z + 1 = e (z + 1/e): z + 1/e exact near -1/e
        im = np.imag(zb)
        upper = (im > 0) | ((im == 0) & ~np.signbit(im))
        near = (np.abs(gap) < 5e-5) & ((kb == 0) | ((kb == -1) & upper) | ((kb == 1) & ~upper))
        if np.any(near):
            g = np.where(near, np.e * ((z + _INV_E[0]) + _INV_E[1]), 1.0)
            g2 = 2.0 * g if zb.dtype.kind == "c" else 2.0 * g + 0j  # (a real z: Im +0, as SciPy's)
            q = np.where(kb == 0, 1.0, -1.0) * np.sqrt(g2)
            if zb.dtype.kind == "c" and np.any((im == 0) & np.signbit(im)):  # (z + 1/e lost Im z's -0)
                q = np.where((im == 0) & np.signbit(im), np.conj(q), q)
            opw = 0.0
            for c in reversed(_BRANCH_SERIES):
                opw = (opw + c) * q
            d = np.where(near, 1.0 / (np.exp(opw - 1.0) * np.where(near, opw, 1.0)), d)
    undefined = np.isnan(np.asarray(bottom(y)))  # (SciPy's NaN just below -1/e: no derivative either)
    if np.any(undefined):
        d = np.where(undefined, np.nan, d)
    return d


# -- robust losses and exprel -----------------------------------------------------------
# huber(d, r) = r²/2 (|r| <= d), d (|r| - d/2) else; inf for d < 0 (NaN derivatives there).
# pseudo_huber(d, r) = d² (s - 1), s = sqrt(1 + (r/d)²); 0 at d = 0, where its slope in d is |r|
# (from above: d |r| - d²), in r 0. s - 1 as t / (s + 1), t = (r/d)², which does not cancel.
# exprel(x) = (e^x - 1) / x (1 at 0): its derivative (e^x (x - 1) + 1) / x², by its series
# Σ n x^(n-1) / (n+1)! near 0 (to x^7: within 1e-13 for |x| < 0.1).


def _huber_dd(d, r, y):
    a = np.abs(r)
    return np.where(d < 0, np.nan, np.where(a <= d, 0.0, a - d))


def _huber_dr(d, r, y):
    return np.where(d < 0, np.nan, np.where(np.abs(r) <= d, r, d * np.sign(r)))


def _pseudo_huber_parts(d, r):
    db = np.asarray(bottom(d))
    safe = np.where(db == 0, 1.0, d)
    t = (r / safe) ** 2
    s = np.sqrt(1.0 + t)
    return db, safe, s


def _pseudo_huber_dd(d, r, y):
    db, safe, s = _pseudo_huber_parts(d, r)
    dd = (r * r / safe) * (2.0 / (s + 1.0) - 1.0 / s)
    return np.where(db < 0, np.nan, np.where(db == 0, np.abs(r), dd))


def _pseudo_huber_dr(d, r, y):
    db, _, s = _pseudo_huber_parts(d, r)
    return np.where(db < 0, np.nan, np.where(db == 0, 0.0, r / s))


defelementwise(sp.huber, _huber_dd, _huber_dr)
defelementwise(sp.pseudo_huber, _pseudo_huber_dd, _pseudo_huber_dr)

_EXPREL_SERIES = tuple(n / math.factorial(n + 1) for n in range(1, 9))  # x^0 ... x^7


def _exprel_d(x, y):
    """(e^x (x - 1) + 1) / x²; for x > 30 as e^(x - log x + log1p(-1/x)) + 1/x² (e^x (x - 1)
    overflows before the derivative does: inf for 703 < x < 709.78); 0 at -inf, inf at inf."""
    xb = np.asarray(bottom(x))
    small = np.abs(xb) < 0.1
    large = xb > 30
    inf = np.isposinf(xb)
    safe = np.where(small | large | np.isneginf(xb), 1.0, x)
    d = (np.exp(safe) * (safe - 1.0) + 1.0) / (safe * safe)
    if np.any(large):
        xl = np.where(large & ~inf, x, 31.0)
        d = np.where(large, np.exp(xl - np.log(xl) + np.log1p(-1.0 / xl)) + 1.0 / (xl * xl), d)
        if np.any(inf):
            d = np.where(inf, np.inf, d)
    if np.any(np.isneginf(xb)):
        d = np.where(np.isneginf(xb), 0.0, d)
    if np.any(small):
        series = 0.0
        for c in reversed(_EXPREL_SERIES):
            series = series * x + c
        d = np.where(small, series, d)
    return d


defelementwise(sp.exprel, _exprel_d)

# scipy.special.lambertw(z, k=0, tol=1e-8) is a Python function calling the ufunc _lambertw(z, k, tol);
# the branch k is an integer, and the exact W does not depend on the tolerance
defelementwise(_spu._lambertw, _lambertw_d, None, None)

# -- complete elliptic integrals (parameter m) ------------------------------------------
# K' = (E - (1-m) K) / (2m(1-m)), E' = (E - K) / (2m). Both cancel as m -> 0 (0/0 at 0):
# for |m| < 1e-3 the Maclaurin series to m⁵ (from K = π/2 sum ((2n)!/(4^n n!²))² m^n and
# E = π/2 sum -((2n)!/(4^n n!²))² m^n / (2n-1)), within 2e-15; each branch at safe inputs.


def _ellipk_series_d(m):
    return _PI_2 * (0.25 + m * (9 / 32 + m * (75 / 256 + m * (1225 / 4096 + m * (19845 / 65536 + m * 160083 / 524288)))))


def _ellipe_series_d(m):
    return -_PI_2 * (0.25 + m * (3 / 32 + m * (15 / 256 + m * (175 / 4096 + m * (2205 / 65536 + m * 14553 / 524288)))))


def _near_zero(m, series, exact):
    """``exact(m)``, or ``series(m)`` where |m| < 1e-3; each at safe inputs only."""
    near = np.abs(np.asarray(bottom(m))) < 1e-3
    if not near.any():
        return exact(m)
    return np.where(near, series(np.where(near, m, 0.0)), exact(np.where(near, 0.5, m)))


def _ellipk_d(m, p, k):
    """K'(m) from K = k, given p = 1 - m separately (exact for ellipkm1's small p)."""
    return (sp.ellipe(m) - p * k) / (2 * m * p)


def _ellipkm1_d(p, y):
    """ellipkm1(p) = K(1 - p): -K'(1 - p), with p itself as 1 - m (1 - p is exact near p = 1,
    where the series is used); each branch at safe inputs only."""
    near = np.abs(1 - np.asarray(bottom(p))) < 1e-3
    if not near.any():
        return -_ellipk_d(1 - p, p, sp.ellipkm1(p))
    ps = np.where(near, 0.5, p)
    return np.where(near, -_ellipk_series_d(np.where(near, 1 - p, 0.0)), -_ellipk_d(1 - ps, ps, sp.ellipkm1(ps)))


defelementwise(sp.ellipk, lambda m, y: _near_zero(m, _ellipk_series_d, lambda m: _ellipk_d(m, 1 - m, sp.ellipk(m))))
defelementwise(sp.ellipe, lambda m, y: _near_zero(m, _ellipe_series_d, lambda m: (sp.ellipe(m) - sp.ellipk(m)) / (2 * m)))
defelementwise(sp.ellipkm1, _ellipkm1_d)


# -- incomplete elliptic integrals and Carlson's symmetric integrals --------------------------
# F(φ|m) and E(φ|m): ∂φ = 1/Δ and Δ, Δ = sqrt(1 - m sin²φ). ∂m from Carlson's forms F = s R_F(c², Δ², 1) and
# E = F - (m/3) s³ R_D(c², Δ², 1) (s = sin φ, c = cos φ, |φ| <= π/2), which do not cancel as m -> 0 or
# φ -> 0 (the textbook (E - (1-m)F)/(2m(1-m)) - sc/(2(1-m)Δ) and (E - F)/(2m) do): ∂F/∂m = s³ R_D(c², 1, Δ²)/6,
# ∂E/∂m = -s³ R_D(c², Δ², 1)/6, with φ = φ' + kπ (|φ'| <= π/2) adding 2k K'(m) and 2k E'(m) (F and E grow by
# 2k K(m), 2k E(m)). NaN where SciPy's value is not finite (φ = ±π/2 at m = 1; SciPy is NaN for m > 1).
# Carlson: ∂R_F/∂x = -R_D(y, z, x)/6 (each argument, DLMF 19.18.1); R_C(x, y) = R_F(x, y, y): ∂x = -R_D(y, y, x)/6,
# ∂y = -R_D(x, y, y)/3 (R_C's Cauchy principal value for y < 0: not implemented); R_D by divided differences,
# ∂x R_D = (R_D(x, y, z) - R_D(y, z, x)) / (2(z - x)) (the same for y), ∂z from Euler's relation
# x∂x + y∂y + z∂z = -3/2 R_D. Those cancel where z is near x or y: not implemented within 1e-3 (relative).


def _carlson_split(phi):
    """k and φ' = φ - kπ, |φ'| <= π/2 (k a plain array)."""
    k = np.round(np.asarray(bottom(phi), dtype=float) / np.pi)
    return k, phi - k * np.pi


def _ellipinc_dm_series(p, s, c, m, kind, terms=8):
    """dF/dm (dE/dm) of ellipkinc (ellipeinc) at φ' = p, |φ'| <= π/2, for |m sin(φ')²| <= 1e-3: the binomial series
    of (1 - m sin²θ) ** (-3/2) (** (-1/2)) integrated term by term, Σ (a)_k / k! m^k I_(2k+2), I_n = ∫_0^p sin^n θ dθ
    by its recurrence; 8 terms reach rounding there, and every order of derivative in m and φ is the series'."""
    a = 1.5 if kind == "F" else 0.5
    integral = p / 2 - s * c / 2  # I_2
    total = integral
    power = s * s * s  # sin(p) ** (n - 1), n = 4
    coef, mk = 1.0, 1.0
    for k in range(1, terms):
        n = 2 * k + 2
        integral = (n - 1) / n * integral - power * c / n
        power = power * s * s
        coef = coef * (a + k - 1) / k
        mk = mk * m
        total = total + coef * mk * integral
    return total / 2 if kind == "F" else -total / 2


def _ellipinc_dm(phi, m, y, kind):
    k, p = _carlson_split(phi)
    s, c = np.sin(p), np.cos(p)
    # (near m sin² = 0, R_D's arguments 1 and Δ² meet, where its derivative, this one's second, is refused: the
    # series there, R_D at safe inputs elsewhere: specfun)
    sb = np.asarray(bottom(s))
    near = np.abs(np.asarray(bottom(m)) * sb * sb) <= 1e-3
    cc, delta2 = c * c, 1 - m * s * s
    if near.any():  # (R_D's arguments apart there: 0.25, 1 and 3)
        cc, delta2 = np.where(near, 0.25, cc), np.where(near, 3.0, delta2)
    if kind == "F":
        d = s ** 3 * sp.elliprd(cc, 1.0, delta2) / 6
    else:
        d = -(s ** 3) * sp.elliprd(cc, delta2, 1.0) / 6
    if near.any():
        d = np.where(near, _ellipinc_dm_series(p, s, c, np.where(near, m, 0.0), kind), d)
    periods = k != 0
    if periods.any():  # (each branch at safe inputs: K'(1) is infinite)
        mk = np.where(periods, m, 0.5)
        if kind == "F":
            dfull = _near_zero(mk, _ellipk_series_d, lambda m: _ellipk_d(m, 1 - m, sp.ellipk(m)))
        else:
            dfull = _near_zero(mk, _ellipe_series_d, lambda m: (sp.ellipe(m) - sp.ellipk(m)) / (2 * m))
        d = d + np.where(periods, 2 * k * dfull, 0.0)
    return _undefined(y, d, infinite=True)


defelementwise(sp.ellipkinc, lambda phi, m, y: _undefined(y, 1 / np.sqrt(1 - m * np.sin(phi) ** 2), infinite=True),
               lambda phi, m, y: _ellipinc_dm(phi, m, y, "F"))
defelementwise(sp.ellipeinc, lambda phi, m, y: _undefined(y, np.sqrt(1 - m * np.sin(phi) ** 2), infinite=True),
               lambda phi, m, y: _ellipinc_dm(phi, m, y, "E"))
defelementwise(sp.elliprf,
               lambda x, y, z, r: -sp.elliprd(y, z, x) / 6,
               lambda x, y, z, r: -sp.elliprd(z, x, y) / 6,
               lambda x, y, z, r: -sp.elliprd(x, y, z) / 6)


def _rc_d(x, y, r, wrt):
    yb = np.asarray(bottom(y))
    if np.any((yb.imag == 0) & (yb.real < 0)):
        return not_implemented("the derivative of scipy.special.elliprc(x, y) for y < 0 (its Cauchy principal "
                               "value) is not implemented")
    if not _rd_near(x, y).any():
        # R_C's own partials (by parts from its integral): ∂x = (1/√x - R_C) / (2(x - y)), ∂y = (R_C - √x/y) /
        # (2(x - y)); of R_C itself, so its second derivatives exist too (through R_D(x, y, y) they did not)
        return (r - np.sqrt(x) / y) / (2 * (x - y)) if wrt else (1 / np.sqrt(x) - r) / (2 * (x - y))
    return -sp.elliprd(x, y, y) / 3 if wrt else -sp.elliprd(y, y, x) / 6


defelementwise(sp.elliprc, lambda x, y, r: _rc_d(x, y, r, 0), lambda x, y, r: _rc_d(x, y, r, 1))

_RD_CANCELS = ("the derivative of scipy.special.elliprd(x, y, z) where z is within 1e-3 (relative) of x or y is not "
               "implemented: its divided differences cancel there")


def _rd_near(a, z):
    ab, zb = np.asarray(bottom(a)), np.asarray(bottom(z))
    with np.errstate(invalid="ignore"):
        return np.abs(zb - ab) <= 1e-3 * np.maximum(np.abs(ab), np.abs(zb))


def _rd_dfirst(x, y, z, r):
    """∂R_D/∂x (x and y symmetric)."""
    if _rd_near(x, z).any():
        return not_implemented(_RD_CANCELS)
    return (r - sp.elliprd(y, z, x)) / (2 * (z - x))


def _rd_dz(x, y, z, r):
    if (_rd_near(x, z) | _rd_near(y, z)).any():
        return not_implemented(_RD_CANCELS)
    terms = []
    for a, b in ((x, y), (y, x)):  # a ∂a R_D, 0 at a = 0 (where ∂a is infinite, as a^(-1/2))
        ab = np.asarray(bottom(a))
        at0 = ab == 0
        if at0.any():  # (each branch at safe inputs: a moved off 0 and away from z where it is 0)
            a = np.where(at0, np.abs(np.asarray(bottom(z))) + 1.0, a)
        term = a * (r - sp.elliprd(b, z, a)) / (2 * (z - a))
        terms.append(np.where(at0, 0.0, term) if at0.any() else term)
    return (-1.5 * r - terms[0] - terms[1]) / z


defelementwise(sp.elliprd, _rd_dfirst, lambda x, y, z, r: _rd_dfirst(y, x, z, r), _rd_dz)


# -- Box-Cox transforms ------------------------------------------------------------------


def _boxcox_dl(x, lmbda, y, log, xlog, safe_x):
    """∂y/∂λ of y = (b^λ - 1)/λ (log b at λ = 0), b = x (log, xlogy) or 1 + x (log1p,
    xlog1py): (b^λ log b - y)/λ, with b^λ log b as xlog (0 at b = 0). It cancels as
    t = λ log b -> 0 (0/0 at λ = 0); for |t| < 1e-3 the series
    L² (1/2 + t/3 + t²/8 + t³/30 + t⁴/144 + t⁵/840), L = log b, within 1e-19. Each
    branch at safe inputs only (``safe_x``: where log b = 0)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        near = np.abs(bottom(lmbda) * log(bottom(x))) < 1e-3

    def exact(x, lmbda):
        with np.errstate(divide="ignore"):  # log 0 = -inf: b^λ log b is 0 there for λ > 0
            return (xlog(np.exp(lmbda * log(x)), x) - y) / lmbda

    if not np.any(near):
        return exact(x, lmbda)
    L = log(np.where(near, x, safe_x))
    t = lmbda * L
    series = L * L * (0.5 + t * (1 / 3 + t * (1 / 8 + t * (1 / 30 + t * (1 / 144 + t / 840)))))
    return np.where(near, series, exact(x, np.where(near, 1.0, lmbda)))


defelementwise(sp.boxcox,
               lambda x, lmbda, y: np.power(x, lmbda - 1),
               lambda x, lmbda, y: _boxcox_dl(x, lmbda, y, np.log, sp.xlogy, 1.0))
defelementwise(sp.boxcox1p,
               lambda x, lmbda, y: np.exp((lmbda - 1) * np.log1p(x)),
               lambda x, lmbda, y: _boxcox_dl(x, lmbda, y, np.log1p, sp.xlog1py, 0.0))
# the inverses x(y, λ): dx/dy = 1/(∂y/∂x), dx/dλ = -(∂y/∂λ)/(∂y/∂x) (implicit function theorem)
defelementwise(sp.inv_boxcox,
               lambda y, lmbda, x: np.power(x, 1 - lmbda),
               lambda y, lmbda, x: -_boxcox_dl(x, lmbda, y, np.log, sp.xlogy, 1.0) * np.power(x, 1 - lmbda))
defelementwise(sp.inv_boxcox1p,
               lambda y, lmbda, x: np.exp((1 - lmbda) * np.log1p(x)),
               lambda y, lmbda, x: -_boxcox_dl(x, lmbda, y, np.log1p, sp.xlog1py, 0.0)
               * np.exp((1 - lmbda) * np.log1p(x)))

# -- elementary functions, in degrees, Wright omega ---------------------------------------

defelementwise(sp.cbrt, lambda x, y: 1.0 / (3.0 * y * y))
defelementwise(sp.exp2, lambda x, y: np.log(2.0) * y)
defelementwise(sp.exp10, lambda x, y: np.log(10.0) * y)
defelementwise(sp.expm1, lambda x, y: np.exp(x))
defelementwise(sp.log1p, lambda x, y: 1.0 / (1.0 + x))
defelementwise(sp.cosm1, lambda x, y: -np.sin(x))
defelementwise(sp.sindg, lambda x, y: _DEG * sp.cosdg(x))
defelementwise(sp.cosdg, lambda x, y: -_DEG * sp.sindg(x))
defelementwise(sp.tandg, lambda x, y: _DEG * (1 + y * y))
defelementwise(sp.cotdg, lambda x, y: -_DEG * (1 + y * y))
defelementwise(sp.wrightomega, lambda x, w: w / (1 + w))  # w + log w = x


# -- the Faddeeva function ---------------------------------------------------------------------
# w(z) = e^(-z²) erfc(-iz), entire: w' = -2z w + 2i/√π (holomorphic, complex z only in SciPy). For |z| > 30
# the two terms cancel (w ~ i/(√π z)): there from w's asymptotic series, w' ~ -(i/√π) Σ (2n+1)!!/(2z²)^n / z²
# (n = 0..5: within 1e-16), valid for Im z >= 0; below, w(z) = 2e^(-z²) - w(-z) adds -4z e^(-z²).
_WOFZ_FAR = tuple(-math.prod(range(1, 2 * n + 2, 2)) / 2.0 ** n for n in range(6))  # -(2n+1)!!/2^n


def _wofz_d(z, w):
    zb = np.asarray(bottom(z))
    far = np.abs(zb) > 30
    if not far.any():
        return -2 * z * w + 2j / np.sqrt(np.pi)
    zn, zf = np.where(far, 1.0, z), np.where(far, z, 31.0)
    u = 1.0 / (zf * zf)
    series = 0.0
    for c in reversed(_WOFZ_FAR):
        series = series * u + c
    d = 1j / np.sqrt(np.pi) * series * u
    lower = far & (zb.imag < 0)
    if lower.any():
        zl = np.where(lower, z, 0.0)
        d = d + np.where(lower, -4 * zl * np.exp(-zl * zl), 0.0)
    return np.where(far, d, -2 * zn * np.where(far, 0.0, w) + 2j / np.sqrt(np.pi))


defelementwise(sp.wofz, _wofz_d)


# -- hypergeometric functions: d/dz from the contiguous function --------------------------

defparametric(sp.hyp1f1, 2, lambda a, b, x, y: a / b * sp.hyp1f1(a + 1, b + 1, x))
defparametric(sp.hyperu, 2, lambda a, b, x, y: -a * sp.hyperu(a + 1, b + 1, x))
defparametric(sp.hyp2f1, 3, lambda a, b, c, z, y: a * b / c * sp.hyp2f1(a + 1, b + 1, c + 1, z),
              why="the derivative of scipy.special.hyp2f1 w.r.t. a, b, c is not implemented (only w.r.t. z)")


# -- Fresnel, sine and cosine integrals: ufuncs with two outputs, both differentiable ------
# fresnel(x) = (S, C): S' = sin(πx²/2), C' = cos(πx²/2). sici(x) = (Si, Ci): Si' = sin x / x (1 at 0),
# Ci' = cos x / x (inf at 0, where Ci is -inf). shichi(x) = (Shi, Chi): sinh x / x (1 at 0), cosh x / x.
# For x < 0 SciPy's real Ci and Chi are the real parts, Ci(|x|) and Chi(|x|), whose derivatives are the
# same quotients. Complex arguments: the same, holomorphic (off Ci's and Chi's cut on the negative axis).

_SIN_X_SERIES = tuple(1.0 / math.factorial(2 * k + 1) for k in range(6))  # x^0, x^2, ... x^10


def _over_x(x, f, sign):
    """f(x) / x for f = sin (sign -1) or sinh (sign 1), 1 at 0: for |x| < 0.1 its Maclaurin series
    Σ (sign x²)^k / (2k+1)! to x^10 (within 1e-22), so that every order is exact at 0 too; each
    branch at safe inputs only."""
    near = np.abs(np.asarray(bottom(x))) < 0.1
    if not near.any():
        return f(x) / x
    xs = np.where(near, 1.0, x)
    u = sign * x * x
    series = 0.0
    for c in reversed(_SIN_X_SERIES):
        series = series * u + c
    return np.where(near, series, f(xs) / xs)


def _defoutputs(ufunc, *partials):
    """Rules of a one-argument ufunc with several outputs, all differentiable: ``partials[k](x, ys)``
    is d ys[k] / dx (np.modf's and np.frexp's rules, in rules/elementwise.py, have one such output)."""
    p = get_primitive(ufunc)

    def rule(x):
        ys = ufunc(x)

        def pullback(cts):
            used = [(g, d) for g, d in zip(cts, partials) if not is_zero(g)]
            if not used:
                return (ZERO,)

            def total():  # (a cotangent of zero drops its output, whose partial may be infinite: Ci' at 0)
                acc = ZERO
                for g, d in used:
                    acc = acc + strong_times(g, _cj(d(x, ys)))
                return unbroadcast(acc, np.shape(x))

            return (Thunk(total),)

        return ys, pullback

    def forward(primals, tangents):
        (x,), (t,) = primals, tangents
        ys = ufunc(x)
        if is_zero(t):
            return ys, tuple(ZERO for _ in partials)
        return ys, tuple(strong_times(t, d(x, ys)) for d in partials)

    p.rrule, p.frule = rule, forward
    p.weak_args = True
    return p


_defoutputs(sp.fresnel, lambda x, ys: np.sin(_PI_2 * x * x), lambda x, ys: np.cos(_PI_2 * x * x))
_defoutputs(sp.sici, lambda x, ys: _over_x(x, np.sin, -1.0), lambda x, ys: np.cos(x) / x)
_defoutputs(sp.shichi, lambda x, ys: _over_x(x, np.sinh, 1.0), lambda x, ys: np.cosh(x) / x)
# airy(z) = (Ai, Ai', Bi, Bi'): Ai'' = z Ai, Bi'' = z Bi (holomorphic: real or complex z)
_defoutputs(sp.airy, lambda x, ys: ys[1], lambda x, ys: x * ys[0], lambda x, ys: ys[3], lambda x, ys: x * ys[2])


# -- powm1, the arithmetic-geometric mean -------------------------------------------------
# powm1(x, y) = x^y - 1: ∂x = y x^(y-1), ∂y = x^y log x (0 where x^y is: x = 0 < y). At x = y = 0 SciPy's
# value is 0 (0^0 = 1), and powm1(x, 0) = 0 for every x: ∂x = 0 there (y x^(y-1) was 0 · inf), while
# along y it jumps (-1 for y > 0, inf for y < 0): ∂y NaN. For x < 0, ∂y is NaN (x^y is real at the
# integers y only).


def _powm1_dx(x, y, r):
    both0 = (np.asarray(bottom(x)) == 0) & (np.asarray(bottom(y)) == 0)
    d = y * np.power(x, y - 1)
    return np.where(both0, 0.0, d) if both0.any() else d


def _powm1_dy(x, y, r):
    both0 = (np.asarray(bottom(x)) == 0) & (np.asarray(bottom(y)) == 0)
    d = sp.xlogy(np.power(x, y), x)
    return np.where(both0, np.nan, d) if both0.any() else d


defelementwise(sp.powm1, _powm1_dx, _powm1_dy)


# agm(a, b) = M: positively homogeneous of degree 1 and odd (SciPy: -agm(-a, -b) for a, b < 0; NaN for
# opposite signs; 0 if either is 0), so its partials are functions of x = lo / hi <= 1 (lo, hi the smaller
# and the larger of |a|, |b|), the same at (a, b) and (-a, -b). M(1, x) = π / (2 K(1 - x²)), so
# ∂M/∂lo = d/dx M(1, x) = π x K'(m) / K(m)², m = 1 - x² = (1 - x)(1 + x) (K'(m) by its series near m = 0:
# x = 1, a = b, where both partials are 1/2), and ∂M/∂hi = M/hi - x ∂M/∂lo (Euler: a ∂a + b ∂b = M).
# K(m) = ellipkm1(x²) (accurate for small x); for x < 1e-100 (x² underflows) d/dx M(1, x) = π / (2 x L²),
# L = log(4/x), to within x² L. At a zero argument (M = 0 along the other, which has ∂ 0) the slope along
# it is one-sided and infinite: NaN, as both at (0, 0) and where SciPy's M is NaN.


def _agm_dlo(x):
    """d/dx M(1, x) for 0 < x <= 1; each branch at safe inputs only."""
    tiny = np.asarray(bottom(x)) < 1e-100
    xs = np.where(tiny, 0.5, x) if tiny.any() else x
    p = xs * xs
    m = (1 - xs) * (1 + xs)
    k = sp.ellipkm1(p)
    dk = _near_zero(m, _ellipk_series_d, lambda m: _ellipk_d(m, p, k))  # (p = 1 - m, exact for small x)
    d = np.pi * xs * dk / (k * k)
    if tiny.any():
        xt = np.where(tiny, x, 1e-200)
        L = np.log(4.0 / xt)
        d = np.where(tiny, np.pi / (2 * xt * L * L), d)
    return d


def _agm_d(a, b, y, wrt):
    ab, bb = np.asarray(bottom(a)), np.asarray(bottom(b))
    ok = (ab * bb > 0) & np.isfinite(ab) & np.isfinite(bb)
    s = np.where(bb < 0, -1.0, 1.0)  # (a's sign where ok)
    A, B = np.where(ok, a * s, 1.0), np.where(ok, b * s, 1.0)
    b_lo = np.where(ok, np.abs(bb) <= np.abs(ab), True)
    lo, hi = np.where(b_lo, B, A), np.where(b_lo, A, B)
    x = lo / hi
    dlo = _agm_dlo(x)
    dhi = np.where(ok, s * y, 1.0) / hi - x * dlo
    d = np.where(b_lo == bool(wrt), dlo, dhi)
    if ok.all():
        return d
    # a zero argument: the other one's partial is 0 (M = 0 along it); everything else NaN
    this, other = (bb, ab) if wrt else (ab, bb)
    zero_other = (other == 0) & (this != 0) & np.isfinite(this)
    return np.where(ok, d, np.where(zero_other, 0.0, np.nan))


defelementwise(sp.agm, lambda a, b, y: _agm_d(a, b, y, 0), lambda a, b, y: _agm_d(a, b, y, 1))


# -- orthogonal polynomials, w.r.t. x ---------------------------------------------------------
# d/dx by the derivative identities (finite at x = ±1, unlike the recurrences over x² - 1):
# P_n' = C^(3/2)_{n-1}, T_n' = n U_{n-1}, U_n' = 2 C^(2)_{n-1}, C^(α)_n' = 2α C^(α+1)_{n-1},
# L^(α)_n' = -L^(α+1)_{n-1}, P^(α,β)_n' = (n+α+β+1)/2 P^(α+1,β+1)_{n-1}, H_n' = 2n H_{n-1}, He_n' = n He_{n-1}.
# SciPy takes a real degree n too (through hypergeometric functions), for which the same identities hold
# (checked against central differences): the derivative w.r.t. n is then not implemented; hermite's n is an
# integer (NoTangent). Negative degrees as SciPy evaluates them: P_n = P_{-n-1}, T_n = T_{-n}, U_n = -U_{-n-2};
# the others are constant (0, or NaN) at a negative integer n. Degree 0 (a constant) has derivative 0, where
# the identity's degree -1 was NaN at x = -1. Where SciPy's value is NaN or infinite (a real degree at x = -1)
# so is the derivative.


def _poly_d(n, y, m, d, x=None, negative_constant=False):
    """``d(m')``, m' = m with its degree-0 elements (constants) safe, 0 there. With
    ``negative_constant``, a negative integer n is a constant too (SciPy: 0, or NaN). NaN where y is not
    finite, and with ``x``, at x = -1 for a non-integer n, where the derivative is unbounded (the
    function is finite there for some: T_ν, C^(α)_ν with α < 1/2) and the sign of SciPy's infinite value
    of the identity there is not the one-sided limit's (C^(-0.3)_0.5: -inf for a slope going to -inf,
    C^(-0.3)_-0.5: -inf for +inf)."""
    mb, nb = np.asarray(bottom(m)), np.asarray(bottom(n))
    zero = mb == 0
    if negative_constant:
        zero = zero | ((nb < 0) & (nb == np.round(nb)))
    if zero.any():
        out = np.where(zero, 0.0, d(_degree(np.where(zero, 1, m))))
    else:
        out = d(_degree(m))
    bad = ~np.isfinite(np.asarray(bottom(y)))
    if x is not None:
        bad = bad | ((np.asarray(bottom(x)) == -1) & (nb != np.round(nb)))
    return np.where(bad, y * np.nan, out) if bad.any() else out


def _degree(m):
    """A constant integral degree as integers, for SciPy's integer loop (exact recurrences; eval_hermite has
    no other), as the user's integer n (which reaches the rule as floats) was computed."""
    if isinstance(m, Tracer):
        return m
    a = np.asarray(m)
    if a.dtype.kind == "f" and np.isfinite(a).all() and (a == np.round(a)).all():
        return a.astype(np.int64)
    return m


def _reflect(n, pivot):
    """n, or pivot - n where n < pivot/2 (P_n = P_{-n-1}: pivot -1; T_n = T_{-n}: 0)."""
    nb = np.asarray(bottom(n))
    neg = nb < pivot / 2.0
    return np.where(neg, pivot - n, n) if neg.any() else n


def _chebyu_d(n, x, y):
    nb = np.asarray(bottom(n))
    neg = nb < -1  # U_n = -U_{-n-2}
    m = np.where(neg, -2 - n, n) if neg.any() else n
    sign = np.where(neg, -2.0, 2.0)
    # (U_{-1} = 0: degree -1 is a constant too)
    m = np.where(np.asarray(bottom(m)) == -1, 0, m)
    return _poly_d(n, y, m, lambda m: sign * sp.eval_gegenbauer(m - 1, 2.0, x), x)


def _why_degree(name):
    return (f"the derivative of scipy.special.{name} w.r.t. its degree n (or a shape parameter) is not "
            "implemented (only w.r.t. x)")


defparametric(sp.eval_legendre, 1,
              lambda n, x, y: _poly_d(n, y, _reflect(n, -1), lambda m: sp.eval_gegenbauer(m - 1, 1.5, x), x),
              why=_why_degree("eval_legendre"))
defparametric(sp.eval_chebyt, 1,
              lambda n, x, y: _poly_d(n, y, _reflect(n, 0), lambda m: m * sp.eval_chebyu(m - 1, x), x),
              why=_why_degree("eval_chebyt"))
defparametric(sp.eval_chebyu, 1, _chebyu_d, why=_why_degree("eval_chebyu"))
defparametric(sp.eval_laguerre, 1,
              lambda n, x, y: _poly_d(n, y, n, lambda m: -sp.eval_genlaguerre(m - 1, 1.0, x), negative_constant=True),
              why=_why_degree("eval_laguerre"))
defparametric(sp.eval_genlaguerre, 2,
              lambda n, a, x, y: _poly_d(n, y, n, lambda m: -sp.eval_genlaguerre(m - 1, a + 1, x),
                                         negative_constant=True),
              why=_why_degree("eval_genlaguerre"))
defparametric(sp.eval_gegenbauer, 2,
              lambda n, a, x, y: _poly_d(n, y, n, lambda m: 2 * a * sp.eval_gegenbauer(m - 1, a + 1, x), x,
                                         negative_constant=True),
              why=_why_degree("eval_gegenbauer"))


def _jacobi_d(n, a, b, x, y):
    return _poly_d(n, y, n, lambda m: 0.5 * (m + a + b + 1) * sp.eval_jacobi(m - 1, a + 1, b + 1, x), x,
                   negative_constant=True)


defparametric(sp.eval_jacobi, 3, _jacobi_d, why=_why_degree("eval_jacobi"))
defparametric(sp.eval_hermite, 1, lambda n, x, y: _poly_d(n, y, n, lambda m: 2 * m * sp.eval_hermite(m - 1, x)),
              integer=True)
defparametric(sp.eval_hermitenorm, 1, lambda n, x, y: _poly_d(n, y, n, lambda m: m * sp.eval_hermitenorm(m - 1, x)),
              integer=True)


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
    """∂y/∂a and ∂y/∂b, shaped like the broadcast of a and b, at least 1-d
    (SciPy reduces that: a 0-d ``a`` reduces as shape (1,), so that
    ``keepdims=True`` or ``axis=()`` give shape (1,)):
    s * b * exp(a - y) and s * exp(a - y) (s the sign, 1 without return_sign)."""
    y, s = out if return_sign else (out, None)
    shape = np.broadcast_shapes(np.shape(a), np.shape(b)) if b is not None else np.shape(a)
    shape = shape or (1,)
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
        # (a zero cotangent drops an element whose weight is undefined: a slice all -inf, as the frule)
        abar = Thunk(lambda: unbroadcast(strong_times(gx, _cj(da)), np.shape(a)))
        bbar = NoTangent() if b is None else Thunk(lambda: unbroadcast(strong_times(gx, _cj(db)), np.shape(b)))
        return abar, bbar

    return out, pullback


@frule(_logsumexp)
def _logsumexp_frule(primals, tangents, *, axis=None, keepdims=False, return_sign=False):
    (a, b), (ta, tb) = primals, tangents
    out = _logsumexp(a, b, axis=axis, keepdims=keepdims, return_sign=return_sign)
    _, da, db = _lse_weights(a, b, out, axis, keepdims, return_sign)
    acc = ZERO
    if not is_zero(ta):  # (an element with weight 0 drops its tangent, an infinite one too)
        acc = strong_times(ta, da)
    if b is not None and not is_zero(tb):
        acc = acc + strong_times(tb, db)
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
    # (a weight y = 0, a masked logit's, drops its cotangent: an infinite one, entr's or log's at 0, gave NaN,
    # which the first derivative's forward fill repairs but a Hessian's inner pass did not: the rl tester)
    return y, lambda g: (strong_times(_cj(y), g - _axis_sum(strong_times(g, _cj(y)), axis)),)


@frule(_softmax)
def _softmax_frule(primals, tangents, *, axis=None):
    (x,), (t,) = primals, tangents
    y = _softmax(x, axis=axis)
    return y, strong_times(y, t - _axis_sum(strong_times(t, y), axis))  # (y = 0 drops its tangent)


@rrule(_log_softmax)
def _log_softmax_rrule(x, *, axis=None):
    y = _log_softmax(x, axis=axis)
    return y, lambda g: (g - strong_times(_cj(np.exp(y)), _axis_sum(g, axis)),)


@frule(_log_softmax)
def _log_softmax_frule(primals, tangents, *, axis=None):
    (x,), (t,) = primals, tangents
    y = _log_softmax(x, axis=axis)
    return y, t - _axis_sum(strong_times(t, np.exp(y)), axis)


# factorial(n, exact=False) = Γ(n + 1), 0 for n < 0 (extend="zero", SciPy's default; extend="complex" is Γ(n + 1)
# everywhere, complex n too): d/dn = n! ψ(n + 1), 0 for n < 0; at n = 0 (with extend="zero") the function jumps
# from 0 to 1: NaN. exact=True is SciPy's integer arithmetic, for integers only (SciPy refuses a float n, which
# every traced n is): passed through, with no derivative.
@scipy_primitive("scipy.special.factorial")
def _factorial(n):
    return sp.factorial(n)


@scipy_primitive("scipy.special.factorial")
def _factorial_complex(n):
    return sp.factorial(n, extend="complex")


def _factorial_d(n, y):
    nb = np.asarray(bottom(n))
    neg = nb <= 0
    if not neg.any():
        return y * sp.digamma(n + 1)
    d = np.where(neg, 0.0, y * sp.digamma(np.where(neg, 1.0, n) + 1))
    return np.where(nb == 0, np.nan, d) if (nb == 0).any() else d


defelementwise(_factorial, _factorial_d)
defelementwise(_factorial_complex, lambda n, y: y * sp.digamma(n + 1))


def factorial(n, exact=False, extend="zero"):
    """``scipy.special.factorial``: ``n!`` as ``Γ(n + 1)`` (0 for n < 0 unless ``extend="complex"``),
    differentiable w.r.t. a float ``n`` (``n! ψ(n + 1)``; no derivative at the jump n = 0). ``exact=True``
    is SciPy's integer result, for integer ``n`` only, without a derivative.

    >>> import numpy as np, mutagrad as mg
    >>> from mutagrad.scipy.special import factorial
    >>> float(mg.grad(factorial)(1.0))  # 1 - Euler's gamma
    0.42278433509846713
    """
    if exact:
        return sp.factorial(bottom(n) if isinstance(n, Tracer) else n, exact=True, extend=extend)
    if extend == "complex":
        return _factorial_complex(n)
    if extend != "zero":
        return sp.factorial(n, extend=extend)  # (SciPy's own error)
    return _factorial(n)


def multigammaln(a, d):
    """``scipy.special.multigammaln``: the log of the multivariate gamma function
    (a composite of gammaln, so differentiable to any order). SciPy's checks: d a positive integer,
    a > (d - 1) / 2."""
    dv = np.asarray(d)[()]
    if not np.isscalar(dv) or np.floor(dv) != dv:
        raise ValueError("d should be a positive integer (dimension)")
    d = int(dv)
    if np.any(np.asarray(bottom(a)) <= 0.5 * (d - 1)):
        raise ValueError(f"condition a ({np.asarray(bottom(a))}) > 0.5 * (d-1) ({0.5 * (d - 1)}) not met")
    j = np.arange(d)
    a = np.asarray(a) if not hasattr(a, "shape") else a
    terms = sp.gammaln(np.expand_dims(a, -1) - j / 2.0)
    return d * (d - 1) / 4.0 * np.log(np.pi) + np.sum(terms, axis=-1)
