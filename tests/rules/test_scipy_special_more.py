"""More scipy.special rules (mutagrad/rules/scipy/special.py): fresnel, sici, shichi (two outputs), powm1,
agm, the orthogonal polynomials, fdtr and nbdtr families, factorial. Every derivative against central
finite differences of the plain SciPy function, in both modes, second order for most; the edges (x = 0,
the ends of the domains, where SciPy is NaN), broadcasting, float32."""
import numpy as np
import pytest

import mutagrad as mg
import mutagrad.scipy.special as msp
from mutagrad.testing import check_grads
from tests._oracles import fd_hessian
from tests.rules._draws import Draws

sp = pytest.importorskip("scipy.special")

_draws = Draws(11)
R, P, U01 = _draws.R, _draws.P, _draws.U01

X = np.array([-1.7, -0.05, 0.0, 1e-3, 0.3, 2.5])  # through the series near 0 and beyond
XNZ = np.array([-1.7, -0.05, 0.3, 2.5])
Z = np.array([0.5 + 0.3j, -1.2 + 0.7j])
XPOLY = np.array([-1.0, -0.3, 0.5, 1.0, 1.7])  # the ends ±1 and outside [-1, 1]
NI = np.array([0, 1, 2, 5, -1, -3])  # integer degrees (SciPy's integer loop)

# (covers, function, args, order)
CASES = [
    # two outputs, each alone and both
    ("scipy.special.fresnel", lambda x: sp.fresnel(x)[0], (X,), 2),
    ("scipy.special.fresnel", lambda x: sp.fresnel(x)[1], (X,), 2),
    ("scipy.special.fresnel", sp.fresnel, (Z,), 2),
    ("scipy.special.sici", lambda x: sp.sici(x)[0], (X,), 2),
    ("scipy.special.sici", sp.sici, (XNZ,), 2),
    ("scipy.special.sici", sp.sici, (Z,), 2),
    ("scipy.special.shichi", lambda x: sp.shichi(x)[0], (X,), 2),
    ("scipy.special.shichi", sp.shichi, (XNZ,), 2),
    ("scipy.special.shichi", sp.shichi, (Z,), 2),
    ("scipy.special.sici", lambda x: sp.sici(x)[1] * sp.shichi(x)[0] + sp.fresnel(x)[1], (R(2, 2) + 3.0,), 2),
    # powm1: both arguments, y near 0 (where SciPy is exact), x < 0 with integer y, broadcasting
    ("scipy.special.powm1", sp.powm1, (np.array([0.5, 2.0, 1.0, 3.0, 0.9]), np.array([1.5, -0.7, 0.3, 1e-10, 2.0])), 2),
    ("scipy.special.powm1", lambda x: sp.powm1(x, np.array([2.0, 3.0, 0.0])), (np.array([-2.0, -0.5, -1.5]),), 2),
    ("scipy.special.powm1", lambda x, y: sp.powm1(x[:, None], y), (P(2), R(3)), 2),
    # agm: a = b (x = 1, the series), far apart (both ways), both negative, broadcasting
    ("scipy.special.agm", sp.agm, (np.array([1.0, 2.0, 0.3, -1.0, 1.0, 3.0]),
                                   np.array([2.0, 0.7, 0.3, -4.0, 1.0 + 1e-6, 0.05])), 2),
    ("scipy.special.agm", lambda a, b: sp.agm(a[:, None], b), (P(2), P(3)), 2),
    # orthogonal polynomials w.r.t. x: integer degrees (with negative ones), real degrees, at the ends ±1
    ("scipy.special.eval_legendre", lambda x: sp.eval_legendre(NI[:, None], x), (XPOLY,), 2),
    ("scipy.special.eval_legendre", lambda x: sp.eval_legendre(np.array([0.5, 2.5, -1.5, 3.0]), x), (U01(4),), 2),
    ("scipy.special.eval_legendre", lambda z: sp.eval_legendre(3, z), (Z,), 2),
    ("scipy.special.eval_chebyt", lambda x: sp.eval_chebyt(NI[:, None], x), (XPOLY,), 2),
    ("scipy.special.eval_chebyt", lambda x: sp.eval_chebyt(np.array([0.5, 2.5, -1.5, -3.0]), x), (U01(4),), 2),
    ("scipy.special.eval_chebyu", lambda x: sp.eval_chebyu(NI[:, None], x), (XPOLY,), 2),
    ("scipy.special.eval_chebyu", lambda x: sp.eval_chebyu(np.array([0.5, 2.5, -1.5, -3.0]), x), (U01(4),), 2),
    ("scipy.special.eval_hermite", lambda x: sp.eval_hermite(np.array([[0], [1], [4]]), x), (R(3),), 2),
    ("scipy.special.eval_hermitenorm", lambda x: sp.eval_hermitenorm(np.array([[0], [1], [4]]), x), (R(3),), 2),
    ("scipy.special.eval_laguerre", lambda x: sp.eval_laguerre(NI[:, None], x), (P(3),), 2),
    ("scipy.special.eval_laguerre", lambda x: sp.eval_laguerre(np.array([0.5, 2.5, -1.5]), x), (R(3),), 2),
    ("scipy.special.eval_genlaguerre", lambda x: sp.eval_genlaguerre(NI[:, None], np.array([0.5, -0.3, 2.0]), x),
     (P(3),), 2),
    ("scipy.special.eval_genlaguerre", lambda x: sp.eval_genlaguerre(np.array([0.5, 3.7]), 1.5, x), (P(2),), 2),
    ("scipy.special.eval_gegenbauer", lambda x: sp.eval_gegenbauer(NI[:, None], np.array([[0.5], [2.0]])[:, None], x),
     (XPOLY,), 2),
    ("scipy.special.eval_gegenbauer", lambda x: sp.eval_gegenbauer(np.array([0.5, 2.5, 3.7]), -0.3, x), (U01(3),), 2),
    ("scipy.special.eval_jacobi", lambda x: sp.eval_jacobi(NI[:, None], 0.5, 1.5, x), (XPOLY[1:],), 2),
    ("scipy.special.eval_jacobi", lambda x: sp.eval_jacobi(np.array([[0], [1], [4]]), -0.5, 2.0, x), (XPOLY,), 2),
    ("scipy.special.eval_jacobi", lambda x: sp.eval_jacobi(np.array([0.5, 2.5, 3.7]), 0.0, 1.0, x), (U01(3),), 2),
    # the F and negative binomial distribution functions w.r.t. x (p)
    ("scipy.special.fdtr", lambda x: sp.fdtr(np.array([1.0, 2.0, 5.0]), np.array([3.0, 0.7, 10.0]), x),
     (np.array([0.4, 1.3, 2.5]),), 2),
    ("scipy.special.fdtrc", lambda x: sp.fdtrc(np.array([[1.0], [5.0]]), 4.0, x), (np.array([0.4, 1.3, 2.5]),), 2),
    ("scipy.special.fdtri", lambda p: sp.fdtri(np.array([1.0, 2.0, 5.0]), 4.0, p), (U01(3),), 2),
    ("scipy.special.nbdtr", lambda p: sp.nbdtr(np.array([0, 2, 5]), np.array([1, 3, 2]), p), (U01(3),), 2),
    ("scipy.special.nbdtrc", lambda p: sp.nbdtrc(np.array([[0], [5]]), 3, p), (U01(3),), 2),
    ("scipy.special.nbdtri", lambda y: sp.nbdtri(np.array([0, 2, 5]), 3, y), (U01(3),), 2),
    # the Faddeeva function (complex): near 0, both half planes, far out (the asymptotic series: |z| > 30)
    ("scipy.special.wofz", sp.wofz, (np.array([0.5 + 0.3j, -1.2 + 0.7j, 2.0 - 1.0j, 0.0j, 3.0 + 0j]),), 2),
    ("scipy.special.wofz", sp.wofz, (np.array([40.0 + 1.0j, -31.0 - 2.0j, 5.0 + 50.0j]),), 2),
    ("scipy.special.wofz", sp.wofz, (np.array([0.3, -1.5]),), 2),  # (a real argument, a complex result)
    # incomplete elliptic integrals: both arguments, m < 0, |phi| > pi/2 (periods), m = 0 and near it
    ("scipy.special.ellipkinc", sp.ellipkinc, (np.array([0.7, 1.2, -0.9, 2.5, -4.0, 7.0]),
                                               np.array([0.3, -2.0, 0.95, 0.4, 0.6, 0.2])), 2),
    ("scipy.special.ellipkinc", lambda phi: sp.ellipkinc(phi, np.array([0.0, 1e-9, 0.5])), (np.array([0.3, 4.0, 0.0]),), 2),
    ("scipy.special.ellipkinc", lambda m: sp.ellipkinc(np.array([0.3, 4.0, 0.2]), m), (np.array([0.0, 1e-9, 0.5]),), 2),
    ("scipy.special.ellipkinc", lambda m: sp.ellipkinc(np.array([1.0, -2.5, 0.0]), m), (np.array([2e-4, -5e-4, 0.0]),),
     2),  # (m sin² near 0: the series there, where R_D's second derivative is refused: specfun)
    ("scipy.special.ellipeinc", sp.ellipeinc, (np.array([0.7, 1.2, -0.9, 2.5, -4.0, 7.0]),
                                               np.array([0.3, -2.0, 0.95, 0.4, 0.6, 0.2])), 2),
    ("scipy.special.ellipeinc", lambda m: sp.ellipeinc(np.array([0.3, 4.0, -0.2]), m), (np.array([0.0, 1e-9, 0.5]),), 2),
    # Carlson's symmetric integrals (R_D's derivatives away from coinciding arguments), complex too
    ("scipy.special.elliprf", sp.elliprf, (np.array([0.7, 0.2, 3.0]), np.array([1.3, 2.0, 0.5]),
                                           np.array([2.1, 1.0, 1.5])), 2),
    ("scipy.special.elliprf", sp.elliprf, (np.array([0.7 + 0.2j, 1.0]), np.array([1.3, 2.0 - 1j]),
                                           np.array([2.1, 0.5 + 0.5j])), 1),
    ("scipy.special.elliprd", sp.elliprd, (np.array([0.7, 0.2, 3.0]), np.array([1.3, 2.0, 0.5]),
                                           np.array([2.1, 1.0, 1.5])), 2),
    ("scipy.special.elliprd", sp.elliprd, (np.array([0.7 + 0.2j, 1.0]), np.array([1.3, 2.0 - 1j]),
                                           np.array([2.1, 0.5 + 0.5j])), 1),
    ("scipy.special.elliprc", sp.elliprc, (np.array([0.7, 0.2, 3.0]), np.array([1.3, 2.0, 0.5])), 1),
    # factorial (plain Python in SciPy: mutagrad.scipy.special), both extensions
    ("scipy.special.factorial", msp.factorial, (np.array([0.5, 1.0, 3.7, 2.2]),), 2),
    ("scipy.special.factorial", lambda n: msp.factorial(n) * 2.0, (np.array([-1.5, -0.3]),), 2),
    ("scipy.special.factorial", lambda n: msp.factorial(n, extend="complex"), (np.array([-1.5, -0.3, 2.5]),), 2),
    ("scipy.special.factorial", lambda n: msp.factorial(n, extend="complex"), (np.array([0.5 + 0.5j, -1.5 + 0.2j]),), 1),
]


@pytest.mark.parametrize("covers,fn,args,order", CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_rule(covers, fn, args, order):
    check_grads(fn, *args, modes=("fwd", "rev"), order=order)


@pytest.mark.parametrize("fn", [sp.fresnel, sp.sici, sp.shichi, lambda x: sp.powm1(x, x[::-1]),
                                lambda x: sp.agm(x, x[::-1] * 2)])
def test_float32(fn):
    x = np.array([0.7, 0.3, 1.1], np.float32)
    assert all(np.asarray(o).dtype == np.float32 for o in np.atleast_1d(fn(x))) if isinstance(fn(x), tuple) \
        else fn(x).dtype == np.float32
    check_grads(fn, x, modes=("fwd", "rev"))


def _both_modes(f, x):
    g = mg.grad(lambda x: np.sum(f(x)))(x)
    t = mg.jvp(f, (x,), (np.ones_like(x),))[1]
    return g, t


def _central(f, x, h=1e-6):
    return (f(x + h) - f(x - h)) / (2 * h)


def test_sine_integrals_at_0():
    # Si' = sin x / x and Shi' = sinh x / x are 1 at 0, their third derivatives -1/3 and 1/3 (the series); the
    # cosine integrals are -inf there, with Ci' = Chi' = inf, which a cotangent of zero drops
    for f, d3 in ((lambda x: sp.sici(x)[0], -1 / 3), (lambda x: sp.shichi(x)[0], 1 / 3)):
        assert mg.grad(f)(0.0) == 1.0
        assert mg.jvp(f, (0.0,), (1.0,))[1] == 1.0
        assert mg.grad(mg.grad(f))(0.0) == 0.0
        assert mg.grad(mg.grad(mg.grad(f)))(0.0) == pytest.approx(d3, rel=1e-14)
    for f in (sp.sici, sp.shichi):
        assert mg.grad(lambda x, f=f: f(x)[1])(0.0) == np.inf
        (_, ci), (dsi, dci) = mg.jvp(f, (0.0,), (1.0,))
        assert ci == -np.inf and dsi == 1.0 and dci == np.inf
    # Fresnel: S'(0) = 0, C'(0) = 1, S'(1) = 1, C'(1) = 0
    assert mg.grad(lambda x: sp.fresnel(x)[1])(0.0) == 1.0
    np.testing.assert_allclose(mg.jvp(sp.fresnel, (1.0,), (1.0,))[1], (1.0, 0.0), atol=1e-15)


def test_sine_integrals_second_order_near_0():
    # Ci'' = -sin x / x - cos x / x², Chi'' = sinh x / x - cosh x / x² (by hand; -1e6 at x = 1e-3), and
    # against central differences of SciPy's Ci at -0.05
    for f, d2 in ((lambda x: sp.sici(x)[1], lambda x: -np.sin(x) / x - np.cos(x) / x ** 2),
                  (lambda x: sp.shichi(x)[1], lambda x: np.sinh(x) / x - np.cosh(x) / x ** 2)):
        for x in (1e-3, -0.05, 1.5):
            assert mg.grad(mg.grad(f))(x) == pytest.approx(d2(x), rel=1e-13)
            assert mg.jvp(mg.grad(f), (x,), (1.0,))[1] == pytest.approx(d2(x), rel=1e-13)
        assert mg.grad(mg.grad(f))(-0.05) == pytest.approx(_central(lambda v, f=f: _central(f, v, 1e-7), -0.05, 1e-4),
                                                           rel=1e-5)


def test_powm1_edges():
    # x = 0: ∂x = y 0^(y-1) (1 at y = 1, 0 for y > 1), ∂y = 0 (x^y = 0 for y > 0); (0, 0): powm1(x, 0) = 0 for
    # every x (∂x 0), but it jumps along y: NaN; x < 0: ∂y NaN (real at integer y only); SciPy's NaN: NaN
    x = np.array([0.0, 0.0, 0.0, -2.0, -2.0, 2.0])
    y = np.array([1.0, 2.5, 0.0, 2.0, 0.5, np.nan])
    gx = mg.grad(lambda x: np.sum(sp.powm1(x, y)))(x)
    gy = mg.grad(lambda y: np.sum(sp.powm1(x, y)))(y)
    np.testing.assert_array_equal(gx, [1.0, 0.0, 0.0, -4.0, np.nan, np.nan])
    np.testing.assert_array_equal(gy[[0, 1]], [0.0, 0.0])
    assert np.isnan(gy[2:]).all()
    tx = mg.jvp(lambda x: sp.powm1(x, y), (x,), (np.ones(6),))[1]
    np.testing.assert_array_equal(tx, gx)
    # y -> 0, where powm1 is y log x without cancellation: ∂y = x^y log x
    assert mg.grad(lambda y: sp.powm1(3.0, y))(1e-12) == pytest.approx(3.0 ** 1e-12 * np.log(3.0), rel=1e-15)
    assert mg.grad(lambda y: sp.powm1(3.0, y))(0.0) == pytest.approx(np.log(3.0), rel=1e-15)


def test_agm_closed_forms():
    # M(a, a) = a: both partials 1/2; M(1 + t, 1 - t) = 1 - t²/4 + ...: its Hessian along (1, -1) is -1/2
    assert mg.grad(sp.agm, argnums=(0, 1))(2.0, 2.0) == pytest.approx((0.5, 0.5), rel=1e-15)
    H = mg.hessian(lambda v: sp.agm(v[0], v[1]))(np.array([1.0, 1.0]))
    np.testing.assert_allclose(H, [[-0.125, 0.125], [0.125, -0.125]], rtol=1e-13)
    # symmetric, homogeneous (a ∂a + b ∂b = M), odd
    ga, gb = mg.grad(sp.agm, argnums=(0, 1))(1.0, 3.0)
    assert (ga, gb) == pytest.approx(mg.grad(sp.agm, argnums=(1, 0))(3.0, 1.0), rel=1e-15)
    assert ga + 3 * gb == pytest.approx(sp.agm(1.0, 3.0), rel=1e-14)
    assert mg.grad(sp.agm, argnums=(0, 1))(-1.0, -3.0) == pytest.approx((ga, gb), rel=1e-15)
    # b -> 0: M ~ πa / (2 log(4a/b)), ∂b ~ π / (2 b log(4a/b)²) (b² underflows below 1e-154)
    for b in (1e-120, 1e-200):
        L = np.log(4 / b)
        assert mg.grad(lambda b: sp.agm(1.0, b))(b) == pytest.approx(np.pi / (2 * b * L * L), rel=1e-12)
    # against central differences, both arguments, both modes
    for a, b in ((1.0, 2.0), (3.0, 1e-5), (5.0, 4.999), (1.0, 1.0 + 1e-9)):
        for i in (0, 1):
            f = (lambda v, b=b: sp.agm(v, b)) if i == 0 else (lambda v, a=a: sp.agm(a, v))
            v = (a, b)[i]
            want = _central(f, v, 1e-6 * v)
            for got in _both_modes(f, v):
                assert got == pytest.approx(want, rel=1e-7)


def test_agm_where_not_differentiable():
    # a zero argument: M = 0 along the other (∂ 0), one-sided and infinite along it (NaN); opposite signs: NaN
    assert mg.grad(sp.agm, argnums=(0, 1))(2.0, 0.0) == (0.0, pytest.approx(np.nan, nan_ok=True))
    for a, b in ((0.0, 0.0), (-2.0, 1.0)):
        assert all(np.isnan(g) for g in mg.grad(sp.agm, argnums=(0, 1))(a, b))


def test_polynomials_against_central_differences():
    # every polynomial, integer and real degrees, at the ends and outside [-1, 1]
    polys = [sp.eval_legendre, sp.eval_chebyt, sp.eval_chebyu, sp.eval_laguerre,
             lambda n, x: sp.eval_genlaguerre(n, 0.5, x), lambda n, x: sp.eval_gegenbauer(n, -0.3, x),
             lambda n, x: sp.eval_gegenbauer(n, 2.0, x), lambda n, x: sp.eval_jacobi(n, 0.5, 1.5, x)]
    for f in polys:
        for n in (0, 1, 2, 5, -1, -3, 0.0, 0.5, 2.5, -0.5, -1.5, -3.0, 3.7):
            y = f(n, XPOLY)
            g, t = _both_modes(lambda x, f=f, n=n: f(n, x), XPOLY)
            want = _central(lambda x, f=f, n=n: f(n, x), XPOLY)
            real_end = (XPOLY == -1) & (n != round(n))  # (Laguerre: no end there)
            ok = np.isfinite(y) & ~real_end & np.isfinite(want)
            np.testing.assert_allclose(g[ok], want[ok], rtol=1e-6, atol=1e-8)
            np.testing.assert_allclose(t, g, rtol=1e-14)
            # NaN where SciPy is not finite, and at x = -1 for a real degree (unbounded there; Laguerre aside)
            undefined = ~np.isfinite(y) | (real_end & (f not in (sp.eval_laguerre, polys[4])))
            assert np.isnan(g[undefined]).all()


def test_polynomial_closed_forms():
    # P_n'(1) = n(n+1)/2, P_n'(-1) = (-1)^(n+1) n(n+1)/2; T_n'(1) = n²; U_n'(1) = n(n+1)(n+2)/3;
    # H_3' = 24 x² - 12; a negative degree: P_{-3} = P_2 (3x² - 1)/2, U_{-3} = -U_1 = -2x
    for n in range(6):
        assert mg.grad(lambda x, n=n: sp.eval_legendre(n, x))(1.0) == pytest.approx(n * (n + 1) / 2, rel=1e-14)
        assert mg.grad(lambda x, n=n: sp.eval_legendre(n, x))(-1.0) == pytest.approx((-1) ** (n + 1) * n * (n + 1) / 2,
                                                                               rel=1e-14, abs=0)
        assert mg.grad(lambda x, n=n: sp.eval_chebyt(n, x))(1.0) == pytest.approx(n * n, rel=1e-14)
        assert mg.grad(lambda x, n=n: sp.eval_chebyu(n, x))(1.0) == pytest.approx(n * (n + 1) * (n + 2) / 3, rel=1e-14)
    assert mg.grad(lambda x: sp.eval_hermite(3, x))(0.5) == pytest.approx(24 * 0.25 - 12, rel=1e-14)
    assert mg.grad(lambda x: sp.eval_legendre(-3, x))(0.5) == pytest.approx(1.5, rel=1e-14)
    assert mg.grad(lambda x: sp.eval_chebyu(-3, x))(0.5) == pytest.approx(-2.0, rel=1e-14)
    # degree 0 (a constant) at x = -1, where the identity's degree -1 is NaN in SciPy
    for f in (sp.eval_legendre, sp.eval_chebyu, lambda n, x: sp.eval_jacobi(n, 0.5, 1.5, x)):
        assert mg.grad(lambda x, f=f: f(0.0, x))(-1.0) == 0.0


def test_polynomial_degree_derivative():
    # a real degree: not implemented; Hermite's integer degree: no derivative (NoTangent, a zero)
    for f, args, names in ((sp.eval_legendre, (2.5, 0.3), "eval_legendre"), (sp.eval_chebyt, (2.5, 0.3), "eval_chebyt"),
                           (sp.eval_gegenbauer, (2.5, 0.7, 0.3), "eval_gegenbauer"),
                           (sp.eval_jacobi, (2.5, 0.5, 1.5, 0.3), "eval_jacobi")):
        assert isinstance(mg.grad(f, argnums=0)(*args), mg.NotImplementedTangent)
        with mg.config(strict=True), pytest.raises(mg.NotImplementedTangentError, match=names):
            mg.grad(f, argnums=0)(*args)
        with mg.config(strict=True):  # (the derivative w.r.t. x is still there)
            assert mg.grad(lambda x, f=f, args=args: f(*args[:-1], x))(0.3) == pytest.approx(
                _central(lambda x, f=f, args=args: f(*args[:-1], x), 0.3), rel=1e-7)
    # the second derivative w.r.t. (n, x) too: not implemented, not a silent zero
    assert isinstance(mg.grad(mg.grad(sp.eval_legendre, argnums=1), argnums=0)(2.5, 0.3), mg.NotImplementedTangent)


def test_f_and_negative_binomial_edges():
    # x = 0: the F density's power (inf for dfn < 2, 1 for dfn = 2 with fdtr(2, d, x) = 1 - (1 + 2x/d)^(-d/2),
    # 0 for dfn > 2) and its own slope; p = 0 for nbdtr: p^(n-1) (1-p)^k / B(n, k+1) (n = 1, k = 2: 3)
    assert mg.grad(lambda x: sp.fdtr(1.0, 3.0, x))(0.0) == np.inf
    assert mg.grad(lambda x: sp.fdtr(2.0, 3.0, x))(0.0) == pytest.approx(1.0, rel=1e-14)
    assert mg.grad(mg.grad(lambda x: sp.fdtr(2.0, 3.0, x)))(0.0) == pytest.approx(-5 / 3, rel=1e-14)
    assert mg.grad(lambda x: sp.fdtr(4.0, 3.0, x))(0.0) == 0.0
    assert mg.grad(lambda p: sp.nbdtr(2, 1, p))(0.0) == pytest.approx(3.0, rel=1e-14)
    # a large x: the density in logs (1 - w rounds): d1^a d2^b x^(a-1) / (d1 x)^(a+b) / B(a, b)
    want = 2 * 3 ** 1.5 / (2e8) ** 2.5 * 1.5
    assert mg.grad(lambda x: sp.fdtr(2.0, 3.0, x))(1e8) == pytest.approx(want, rel=1e-12)
    # against central differences, both modes
    for f, v in ((lambda x: sp.fdtr(3.0, 5.0, x), 0.8), (lambda x: sp.fdtrc(0.7, 2.5, x), 1.9),
                 (lambda p: sp.fdtri(3.0, 5.0, p), 0.3), (lambda p: sp.nbdtr(3, 4, p), 0.35),
                 (lambda p: sp.nbdtrc(0, 2, p), 0.6), (lambda y: sp.nbdtri(3, 4, y), 0.45)):
        want = _central(f, v)
        for got in _both_modes(f, np.float64(v)):
            assert got == pytest.approx(want, rel=1e-7)
    # outside the domain (x < 0, k < 0, n < 1): SciPy's NaN, and the derivative's
    for f, v in ((lambda x: sp.fdtr(2.0, 3.0, x), -1.0), (lambda p: sp.nbdtr(-1, 3, p), 0.5),
                 (lambda p: sp.nbdtr(2, 0, p), 0.5), (lambda x: sp.fdtr(-1.0, 3.0, x), 0.5)):
        assert np.isnan(f(v)) and all(np.isnan(g) for g in _both_modes(f, np.float64(v)))


@pytest.mark.filterwarnings("ignore:non-integer arg n:DeprecationWarning")  # (SciPy's, for a float count)
@pytest.mark.filterwarnings("ignore:floating point number truncated:RuntimeWarning")
def test_counts_and_shapes():
    # nbdtr floors its counts: piecewise constant, no derivative (a zero); fdtr's degrees of freedom are real shapes,
    # with betainc's derivatives (tests/rules/test_scipy_special_betainc.py), also in strict mode
    for f, v in ((lambda k: sp.nbdtr(k, 3, 0.4), 2.5), (lambda n: sp.nbdtr(2, n, 0.4), 3.5),
                 (lambda k: sp.nbdtrc(k, 3, 0.4), 2.5)):
        assert _central(f, v, 1e-3) == 0.0
        assert _both_modes(f, np.float64(v)) == (0.0, 0.0)
    for f, i in ((sp.fdtr, 0), (sp.fdtrc, 1), (sp.fdtri, 1)):
        want = _central(lambda v, f=f, i=i: f(*(v if j == i else a for j, a in enumerate((2.0, 3.0, 0.4)))),
                        (2.0, 3.0)[i])
        with mg.config(strict=True):
            assert mg.grad(f, argnums=i)(2.0, 3.0, 0.4) == pytest.approx(want, rel=1e-6)


def test_factorial():
    n = np.array([-1.5, -1.0, 0.0, 0.5, 3.0, 3.7])
    np.testing.assert_array_equal(msp.factorial(n), sp.factorial(n))
    np.testing.assert_array_equal(msp.factorial(n, extend="complex"), sp.factorial(n, extend="complex"))
    # d/dn = n! ψ(n+1): 1 - γ at 1; 0 for n < 0 (SciPy's 0); NaN at the jump n = 0
    g, t = _both_modes(msp.factorial, np.array([-1.5, 0.0, 1.0, 3.0]))
    np.testing.assert_allclose(g, [0.0, np.nan, 1 - np.euler_gamma, 6 * sp.digamma(4.0)], rtol=1e-14)
    np.testing.assert_array_equal(t, g)
    # exact=True: SciPy's integers (no derivative), refused by SciPy for a float (every traced) n
    np.testing.assert_array_equal(msp.factorial(np.array([3, 4]), exact=True), [6, 24])
    with pytest.raises(ValueError, match="only supports integers"):
        mg.grad(lambda n: msp.factorial(n, exact=True))(3.0)


def test_multigammaln_checks_as_scipy():
    # SciPy's domain checks, also on a traced a (the composite returned inf)
    with pytest.raises(ValueError, match="not met"):
        mg.grad(lambda a: msp.multigammaln(a, 3))(0.7)
    with pytest.raises(ValueError, match="positive integer"):
        msp.multigammaln(2.0, 2.5)
    assert mg.grad(lambda a: msp.multigammaln(a, 2))(2.5) == pytest.approx(sp.digamma(2.5) + sp.digamma(2.0), rel=1e-14)


def test_wofz_far_out():
    # w' = -2z w + 2i/sqrt(pi) cancels for large |z| (w ~ i/(sqrt(pi) z)): w' ~ -i/(sqrt(pi) z²) (1 + 3/(2z²))
    for z in (1e6 + 1j, 1e10 - 3j, -1e8 + 0j):
        want = -1j / np.sqrt(np.pi) / z ** 2 * (1 + 1.5 / z ** 2)
        assert mg.jvp(sp.wofz, (np.complex128(z),), (np.complex128(1),))[1] == pytest.approx(want, rel=1e-14)
    # the two forms agree where both are accurate (|z| = 31, lower half plane with its exponential term)
    for z in (31.0 + 0j, 25.0 - 25.0j, -31.0 - 2.0j):
        want = -2 * z * sp.wofz(z) + 2j / np.sqrt(np.pi)
        assert mg.jvp(sp.wofz, (np.complex128(z),), (np.complex128(1),))[1] == pytest.approx(want, rel=1e-11)
    # w'' = (4z² - 2) w - 4iz/sqrt(pi), through the series
    z = 40.0 + 1j
    d2 = mg.jvp(lambda z: mg.jvp(sp.wofz, (z,), (np.complex128(1),))[1], (np.complex128(z),), (np.complex128(1),))[1]
    assert d2 == pytest.approx((4 * z * z - 2) * sp.wofz(z) - 4j * z / np.sqrt(np.pi), rel=1e-9)


def test_incomplete_elliptic_closed_forms():
    # dF/dm and dE/dm at m = 0: ±(2phi - sin 2phi)/8 (the textbook forms are 0/0 there); one period adds 2K'(m)
    phi = 0.3
    assert mg.grad(lambda m: sp.ellipkinc(phi, m))(0.0) == pytest.approx((2 * phi - np.sin(2 * phi)) / 8, rel=1e-14)
    assert mg.grad(lambda m: sp.ellipeinc(phi, m))(0.0) == pytest.approx(-(2 * phi - np.sin(2 * phi)) / 8, rel=1e-14)
    gk = mg.grad(sp.ellipk)(0.4)
    assert mg.grad(lambda m: sp.ellipkinc(np.pi + phi, m) - sp.ellipkinc(phi, m))(0.4) == pytest.approx(2 * gk, rel=1e-13)
    # dF/dphi = 1/sqrt(1 - m sin^2 phi); at phi = pi/2, m = 1 SciPy's F is inf: NaN
    assert mg.grad(lambda p: sp.ellipkinc(p, 0.5))(1.0) == pytest.approx(1 / np.sqrt(1 - 0.5 * np.sin(1.0) ** 2), rel=1e-15)
    assert np.isnan(mg.grad(lambda p: sp.ellipkinc(p, 1.0))(np.pi / 2))
    assert np.isnan(mg.grad(lambda m: sp.ellipkinc(np.pi / 2, m))(1.0))
    # against central differences of SciPy's own functions, both modes
    for f, v in ((lambda m: sp.ellipkinc(1.1, m), 0.35), (lambda m: sp.ellipeinc(-2.0, m), -1.5),
                 (lambda p: sp.ellipeinc(p, 0.8), 2.2)):
        want = _central(f, v)
        for got in _both_modes(f, np.float64(v)):
            assert got == pytest.approx(want, rel=1e-7)


def test_carlson_closed_forms_and_limits():
    # R_F(x, y, z) = R_C(x, y) at z = y; R_D(x, x, x) = x^(-3/2); dR_F/dz = -R_D(x, y, z)/6
    assert mg.grad(lambda z: sp.elliprf(0.5, 1.5, z))(2.0) == pytest.approx(-sp.elliprd(0.5, 1.5, 2.0) / 6, rel=1e-15)
    # R_C(0, y) = pi / (2 sqrt(y)): d/dy = -pi/(4 y^(3/2))
    assert mg.grad(lambda y: sp.elliprc(0.0, y))(2.0) == pytest.approx(-np.pi / (4 * 2.0 ** 1.5), rel=1e-14)
    # dR_D: against central differences, and Euler's relation x dx + y dy + z dz = -3/2 R_D
    x = np.array([0.7, 1.3, 2.1])
    g = mg.grad(lambda v: sp.elliprd(v[0], v[1], v[2]))(x)
    assert np.dot(x, g) == pytest.approx(-1.5 * sp.elliprd(*x), rel=1e-13)
    for i in range(3):
        want = _central(lambda t, i=i: sp.elliprd(*np.where(np.arange(3) == i, t, x)), x[i])
        assert g[i] == pytest.approx(want, rel=1e-7)
    # x = 0: R_F's slope there is -inf (R_F ~ R_F(0, y, z) - c sqrt(x))
    assert mg.grad(lambda x: sp.elliprf(x, 1.0, 2.0))(0.0) == -np.inf


def test_carlson_not_implemented_where_it_would_cancel():
    # R_D's derivatives are divided differences: refused where z is near x or y (R_C's second derivatives where
    # x is near y), and R_C's principal value for y < 0
    for f, args in ((sp.elliprd, (1.0, 2.0, 1.0 + 1e-6)), (sp.elliprd, (1.0, 1.0, 1.0))):
        g = mg.grad(f, argnums=2)(*args)
        assert isinstance(g, mg.NotImplementedTangent) and "elliprd" in g.message
        assert isinstance(mg.jvp(lambda z, f=f, args=args: f(*args[:2], z), (args[2],), (1.0,))[1],
                          mg.NotImplementedTangent)
    assert isinstance(mg.hessian(lambda y: sp.elliprc(0.5, y))(0.5 + 1e-6), mg.NotImplementedTangent)
    # away from x = y, R_C's own partials (of R_C itself): every order; the oracle, second differences of SciPy
    # (R_C's Hessian was refused at every point before: claims6)
    for v in (np.array([2.0, 3.0]), np.array([0.9, 0.4]), np.array([1.0, 5.0])):
        np.testing.assert_allclose(mg.hessian(lambda v: sp.elliprc(v[0], v[1]))(v),
                                   fd_hessian(lambda v: sp.elliprc(v[0], v[1]), v), rtol=1e-5, atol=1e-6)
    # (ellipkinc's and ellipeinc's m-derivative near m sin² = 0 is a series there, not R_D at coinciding arguments:
    # their second derivatives exist, against second differences of SciPy: specfun)
    for f in (lambda v: sp.ellipkinc(v[0], v[1]), lambda v: sp.ellipeinc(v[0], v[1])):
        for v in (np.array([0.3, 0.0]), np.array([1.0, 1e-4]), np.array([2.5, -3e-4])):
            np.testing.assert_allclose(mg.hessian(f)(v), fd_hessian(f, v), rtol=1e-5, atol=1e-6)
    with mg.config(strict=True), pytest.raises(mg.NotImplementedTangentError, match="principal"):
        mg.grad(lambda y: sp.elliprc(1.0, y))(-1.0)
