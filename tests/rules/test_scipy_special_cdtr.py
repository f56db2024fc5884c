"""scipy.special's distribution functions (chdtr, pdtr, gdtr, bdtr families) and binom
(mutagrad/rules/scipy/special.py): every derivative against central finite differences of
the plain SciPy function, in both modes, second order for some; the edges, the counts (no
derivative: piecewise constant), the shapes whose derivative is not implemented."""
import numpy as np
import pytest

import mutagrad as mg
from mutagrad.testing import check_grads
from tests.rules._draws import Draws

sp = pytest.importorskip("scipy.special")

_draws = Draws(7)
P, U01 = _draws.P, _draws.U01

V = np.array([1.0, 2.5, 7.0])  # chi-square degrees of freedom
K = np.array([0, 2, 5])  # counts
# binom at ordinary points, where it is 0 (k an integer > n >= 0, k a negative integer, n - k + 1 = -1
# with k not an integer), negative non-integer n, both arguments near poles of Γ, large n
BINOM_N = np.array([5.5, 2.0, 3.0, 2.0, 2.5, 0.5, -2.5, -0.75, -2.3, 200.0, 7.0])
BINOM_K = np.array([2.3, 3.0, 5.0, -1.0, -2.0, 2.5, 3.0, 1.25, -1.15, 201.0, 3.5])

# (covers, function, args, order)
CASES = [
    ("scipy.special.chdtr", lambda x: sp.chdtr(V, x), (np.array([0.3, 1.7, 5.0]),), 2),
    ("scipy.special.chdtrc", lambda x: sp.chdtrc(V[:, None], x), (np.array([0.3, 1.7]),), 2),  # broadcast (3, 2)
    ("scipy.special.chdtri", lambda p: sp.chdtri(V, p), (np.array([0.3, 0.7, 0.95]),), 2),
    ("scipy.special.pdtr", lambda m: sp.pdtr(np.array([0, 2, 5]), m), (np.array([0.3, 1.7, 5.0]),), 2),
    ("scipy.special.pdtrc", lambda m: sp.pdtrc(K[:, None], m), (P(2),), 2),
    ("scipy.special.pdtri", lambda y: sp.pdtri(K, y), (U01(3),), 2),
    ("scipy.special.gdtr", lambda a, x: sp.gdtr(a, np.array([0.5, 1.0, 2.5]), x), (P(3), P(3)), 2),
    ("scipy.special.gdtrc", lambda a, x: sp.gdtrc(a, np.array([[0.5], [2.5]]), x), (P(3), P(1)), 2),
    ("scipy.special.bdtr", lambda p: sp.bdtr(K, np.array([5, 6, 10]), p), (U01(3),), 2),
    ("scipy.special.bdtrc", lambda p: sp.bdtrc(K[:, None], 10, p), (U01(2),), 2),
    ("scipy.special.bdtri", lambda y: sp.bdtri(K, 10, y), (U01(3),), 2),
    ("scipy.special.binom", sp.binom, (BINOM_N, BINOM_K), 2),
    ("scipy.special.binom", lambda n: sp.binom(n, np.array([[0.0], [3.0]])), (np.array([0.5, 2.0, 4.0]),), 2),
]


@pytest.mark.parametrize("covers,fn,args,order", CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_rule(covers, fn, args, order):
    check_grads(fn, *args, modes=("fwd", "rev"), order=order)


def _central(f, args, i, h):
    up, down = list(args), list(args)
    up[i], down[i] = args[i] + h, args[i] - h
    return (f(*up) - f(*down)) / (2 * h)


def _both_modes(f, args, i):
    g = mg.grad(f, argnums=i)(*args)
    t = mg.jvp(lambda v: f(*args[:i], v, *args[i + 1:]), (args[i],), (1.0,))[1]
    return g, t


# (function, args, which argument): scalars, against central differences of SciPy's function
POINTS = [
    (sp.chdtr, (3.3, 2.1), 1), (sp.chdtrc, (0.7, 0.4), 1), (sp.chdtri, (3.3, 0.4), 1), (sp.chdtri, (1.0, 0.9), 1),
    (sp.pdtr, (2.7, 1.3), 1),  # (SciPy floors k: gammaincc(3, m))
    (sp.pdtrc, (0.0, 0.2), 1), (sp.pdtri, (3.0, 0.25), 1),
    (sp.gdtr, (1.5, 2.5, 0.7), 0), (sp.gdtr, (1.5, 2.5, 0.7), 2), (sp.gdtrc, (0.4, 0.7, 3.0), 0),
    (sp.gdtrc, (0.4, 0.7, 3.0), 2),
    (sp.bdtr, (2, 5, 0.3), 2), (sp.bdtrc, (0, 7, 0.05), 2), (sp.bdtri, (2, 5, 0.4), 2), (sp.bdtri, (0, 3, 0.9), 2),
    # binom: n, then k; where it is 0, at k = -1, negative n, n - k + 1 = -1 with k not an integer
    *[(sp.binom, nk, i) for nk in ((5.5, 2.3), (2.0, 3.0), (3.0, 5.0), (2.0, -1.0), (-2.5, 3.0), (0.5, 2.5),
                                   (-0.75, 1.25), (4.0, 4.0), (6.0, 0.5)) for i in (0, 1)],
]


@pytest.mark.parametrize("f,args,i", POINTS)
def test_derivative_matches_central_differences(f, args, i):
    args = tuple(float(a) if j == i else a for j, a in enumerate(args))  # (bdtr's counts stay integers)
    want = _central(f, args, i, 1e-6)
    for got in _both_modes(f, args, i):
        assert got == pytest.approx(want, rel=1e-6, abs=1e-9)


def _one_sided(f, x, h=1e-6):
    """Second-order forward difference, for a function undefined left of x."""
    return (-3 * f(x) + 4 * f(x + h) - f(x + 2 * h)) / (2 * h)


@pytest.mark.parametrize("f,args,i", [
    (sp.chdtr, (2.0, 0.0), 1), (sp.chdtr, (4.0, 0.0), 1), (sp.chdtrc, (2.0, 0.0), 1),
    (sp.pdtr, (0.0, 0.0), 1), (sp.pdtrc, (1.0, 0.0), 1),
    (sp.gdtr, (1.5, 1.0, 0.0), 2), (sp.gdtrc, (1.5, 3.0, 0.0), 2),
    (sp.bdtr, (0, 5, 0.0), 2), (sp.bdtrc, (1, 5, 0.0), 2),
])
def test_derivative_at_the_lower_end(f, args, i):
    args = tuple(float(a) if j == i else a for j, a in enumerate(args))
    # x = 0 (p = 0): the density's power at 0, 0**0 = 1 for the exponential case
    want = _one_sided(lambda v: f(*args[:i], v, *args[i + 1:]), args[i])
    for got in _both_modes(f, args, i):
        assert got == pytest.approx(want, rel=1e-5, abs=1e-8)


def test_gdtr_rate_derivative_at_x_0():
    # gdtr(a, b, 0) = 0 for every a: d/da is 0, also for b < 1 (x dens(b, a x) was 0 * inf);
    # gdtr(a, 1, x) = 1 - exp(-a x): its Hessian in (a, x) at x = 0 is [[0, 1], [1, -a^2]] (by hand)
    for b in (0.5, 1.0, 2.5):
        for got in _both_modes(sp.gdtr, (1.5, b, 0.0), 0):
            assert got == 0.0
    H = mg.hessian(lambda v: sp.gdtr(v[0], 1.0, v[1]))(np.array([1.5, 0.0]))
    np.testing.assert_allclose(H, [[0.0, 1.0], [1.0, -2.25]], atol=1e-14)


def _hessian_fd(f, x, h=1e-4):
    """Central differences of a central-difference gradient."""
    def grad(v, e=1e-6):
        return np.array([(f(v + e * u) - f(v - e * u)) / (2 * e) for u in np.eye(len(v))])
    return np.array([(grad(x + h * u) - grad(x - h * u)) / (2 * h) for u in np.eye(len(x))])


@pytest.mark.parametrize("n,k", [(2.0, 3.0), (2.0, 3.0 + 1e-7), (2.0, -1.0), (5.5, 2.3), (-2.5, 3.0), (0.5, 2.5),
                                 (200.0, 201.0), (-0.75, 1.25), (-2.3, -1.15), (2.5, -2.0)])
def test_binom_hessian(n, k):
    # the mixed partial too (at an integer k, through poch's rule, it would lose its k dependence)
    f = lambda v: sp.binom(v[0], v[1])
    x = np.array([n, k])
    want = _hessian_fd(f, x)
    scale = np.max(np.abs(want))
    np.testing.assert_allclose(mg.hessian(f)(x), want, atol=1e-6 * scale)
    np.testing.assert_allclose(mg.jacobian(mg.grad(f))(x), want, atol=1e-6 * scale)


def test_binom_closed_forms():
    # d/dn binom(n, 3) = (3n^2 - 6n + 2)/6: 1/3 at n = 2 though binom(2, 3) = 0; d/dk binom(n, k) at an
    # integer k > n >= 0 integer is -(-1)^(k-n-1) n! (k-n-1)! / k!: -1/3 at (2, 3), 1/12 at (2, 4);
    # at k = -1, 1/(n+1)
    for n, k, i, want in ((2.0, 3.0, 0, 1 / 3), (2.0, 3.0, 1, -1 / 3), (2.0, 4.0, 1, 1 / 12),
                          (1e6, 3.0, 0, (3e12 - 6e6 + 2) / 6), (4.0, -1.0, 1, 0.2)):
        for got in _both_modes(sp.binom, (n, k), i):
            assert got == pytest.approx(want, rel=1e-12)


@pytest.mark.filterwarnings("ignore:non-integer arg n:DeprecationWarning")  # (SciPy's, for a float n)
@pytest.mark.filterwarnings("ignore:floating point number truncated:RuntimeWarning")  # (pdtri's)
def test_counts_have_no_derivative():
    # pdtr and bdtr floor k (bdtr truncates n): piecewise constant, so a traced float count gets 0 (NoTangent),
    # which its central difference away from the integers agrees with
    for f, args, i in ((sp.pdtr, (2.5, 1.3), 0), (sp.pdtrc, (2.5, 1.3), 0), (sp.pdtri, (2.5, 0.4), 0),
                       (sp.bdtr, (2.5, 5.0, 0.3), 0), (sp.bdtr, (2.0, 5.5, 0.3), 1), (sp.bdtrc, (2.5, 5.0, 0.3), 0),
                       (sp.bdtri, (2.5, 5.0, 0.4), 0)):
        assert _central(f, args, i, 1e-3) == 0.0
        assert _both_modes(f, args, i) == (0.0, 0.0)


def test_an_endless_count_or_shape_is_flat():
    # pdtr(inf, m) = gammaincc(inf, m) = 1 at every finite m (an open upper bound of an interval-censored count,
    # the scipystats tester): derivative 0 in m and in the shape, and so the second; the formula was inf - inf
    m = 1.5
    for f, args, i in ((sp.pdtr, (np.inf, m), 1), (sp.pdtrc, (np.inf, m), 1), (sp.gammaincc, (np.inf, m), 1),
                       (sp.gammainc, (np.inf, m), 1), (sp.gammainc, (np.inf, m), 0), (sp.gammaincc, (np.inf, m), 0)):
        assert _central(f, args, i, 1e-3) == 0.0
        assert _both_modes(f, args, i) == (0.0, 0.0)
    assert mg.hessian(lambda m: sp.pdtr(np.inf, m))(m) == 0.0
    # beside it a finite count keeps its derivative: an interval-censored likelihood with one open interval
    lo, hi = np.array([0.0, 2.0, 5.0]), np.array([1.0, 4.0, np.inf])

    def nll(th):
        mu = np.exp(th[0])
        return -np.sum(np.log(sp.pdtr(hi, mu) - sp.pdtr(lo - 1, mu)))

    th = np.array([0.9])
    fd = (nll(th + 1e-6) - nll(th - 1e-6)) / 2e-6
    np.testing.assert_allclose(mg.grad(nll)(th), [fd], rtol=1e-7)


def test_derivative_is_nan_where_scipy_is():
    # outside the domain (k < 0, m < 0, x < 0) SciPy's value is NaN: the formulas were finite there
    for f, args, i in ((sp.pdtr, (-0.5, 1.3), 1), (sp.pdtr, (0.0, -1.0), 1), (sp.chdtr, (2.0, -1.0), 1),
                       (sp.bdtr, (6, 5, 0.3), 2), (sp.bdtri, (5, 5, 0.4), 2)):
        assert np.isnan(f(*args))
        assert all(np.isnan(g) for g in _both_modes(f, args, i))
    # and at second order, in every nesting (reverse over reverse gave 0: regress39); an entry where SciPy's value
    # is a number keeps its derivatives: bdtr(1, 3, p) = (1-p)^3 + 3p(1-p)^2, d/dp = -6p(1-p), d2 = -6(1 - 2p)
    for g in (lambda p: sp.bdtr(5, 3, p), lambda x: sp.chdtr(-1.0, x), lambda x: sp.gdtr(1.0, -1.0, x)):
        for h in (mg.hessian(g), mg.jacobian(mg.grad(g)), mg.jacobian(mg.grad(g), mode="fwd")):
            assert np.isnan(h(0.5))
    p = np.array([0.5, 0.4])
    for mode in ("rev", "fwd"):
        H = mg.jacobian(mg.grad(lambda p: np.sum(sp.bdtr(np.array([5, 1]), 3, p))), mode=mode)(p)
        assert np.isnan(H[0, 0]) and H[1, 1] == pytest.approx(-6 * (1 - 2 * 0.4), rel=1e-12)
    # where SciPy's value is a constant (k >= n for bdtr; k < 0 for bdtrc): 0
    for f, args in ((sp.bdtr, (5, 5, 0.3)), (sp.bdtrc, (-0.5, 5, 0.3)), (sp.bdtrc, (5, 5, 0.0))):
        assert _both_modes(f, args, 2) == (0.0, 0.0)


def test_gdtr_rate_keeps_its_derivative_beside_the_refused_shape():
    # (the refusals of chdtr's v and gdtr's b: tests/rules/test_scipy_special.py's parameter table) gdtr's rate
    # a, before the refused b, has its derivative, also in strict mode, in both modes, and a zero tangent along
    # b asks for no derivative along it; the oracle, central differences of SciPy's function
    for fn in (sp.gdtr, sp.gdtrc):
        args = (1.5, 2.5, 0.7)
        with mg.config(strict=True):
            for i in (0, 2):
                want = _central(fn, args, i, 1e-6)
                for got in _both_modes(fn, args, i):
                    assert got == pytest.approx(want, rel=1e-6)
                t = tuple(1.0 if j == i else 0.0 for j in range(3))
                assert mg.jvp(fn, args, t)[1] == pytest.approx(want, rel=1e-6)


def test_complex_argument_raises_as_in_scipy():
    # these ufuncs have real loops only: SciPy's own TypeError, traced or not
    for f in (lambda z: sp.binom(z, 2.0), lambda z: sp.chdtr(2.0, z)):
        with pytest.raises(TypeError, match="not supported for the input types"):
            f(1.0 + 1j)
        with pytest.raises(TypeError, match="not supported for the input types"):
            mg.grad(lambda z, f=f: np.abs(f(z)))(1.0 + 1j)


def test_binom_near_a_negative_integer_n_is_refused():
    # n within 1e-4 of a negative integer, k near an integer: the poles of Γ(n+1) and Γ(n-k+1) cancel
    # (d/dn binom(n, 3) = (3n^2 - 6n + 2)/6 came out 4.3343 for 4.3333 at n = -2 + 1e-6): refused, in
    # both modes; at 1e-3 computed (by hand, the polynomial's derivative)
    n = -2 + 1e-6
    for i, args in ((0, (n, 3.0)), (1, (n, 3.0))):
        for got in _both_modes(sp.binom, args, i):
            assert isinstance(got, mg.NotImplementedTangent) and "negative integer n" in got.message
    with mg.config(strict=True), pytest.raises(mg.NotImplementedTangentError, match="binom"):
        mg.grad(sp.binom)(n, 3.0)
    n = -2 + 1e-3
    for got in _both_modes(sp.binom, (n, 3.0), 0):
        assert got == pytest.approx((3 * n * n - 6 * n + 2) / 6, rel=1e-8)
