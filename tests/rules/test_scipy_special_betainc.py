"""The derivatives of scipy.special.betainc in its shapes a and b (mutagrad/rules/scipy/special.py), and of
everything built on it: betaincc, betaincinv, betainccinv, stdtr and stdtrit in df, fdtr, fdtrc and fdtri in dfn
and dfd. Against mpmath at high precision (a table of its values, from _mpmath_d and _stdtr_mp below) and central
finite differences of SciPy's own functions, in both modes; the ends, the domain, the second derivatives."""
import numpy as np
import pytest

import mutagrad as mg
from mutagrad.testing import check_grads
from tests.rules._draws import Draws

sp = pytest.importorskip("scipy.special")

_draws = Draws(11)
P, U01 = _draws.P, _draws.U01

# (regime, a, b, x, dI/da, dI/db): mpmath.diff of mpmath.betainc(a, b, 0, x, regularized=True) at 50 digits, or
# where x is above the mean a/(a+b), of -mpmath.betainc(b, a, 0, 1 - x, ...) (1 - I is lost below 1e-50 otherwise):
# _mpmath_d. Both sides of the switch to I_(1-x)(b, a) at x = (a+1)/(a+b+2), whole numbers b (the fraction ends)
MPMATH = [
    ('moderate', 2.0, 3.0, 0.4, -0.24086937608755657, 0.15634433641359877),
    ('moderate', 0.5, 0.3, 0.2, -0.5255289045417114, 0.5089963099643555),
    ('moderate', 1.5, 6.5, 0.05, -0.21586346968134676, 0.024112376361362497),
    ('small a, b', 0.05, 0.05, 0.3, -5.19900112872078, 4.829019884175453),
    ('small a', 0.05, 2.0, 0.01, -3.0527035789335932, 0.02607351835839594),
    ('small b', 0.3, 0.05, 0.9, -0.41159434432004605, 3.682447300319173),
    ('small a, large b', 0.05, 1000.0, 0.0001, -1.7257918850776166, 4.143985476302826e-05),
    ('small a, large b, at the switch', 0.05, 1000.0, 0.001047851903597625, -0.22367458064413212,
     1.8061584053205087e-05),
    ('large a, small b', 1000.0, 0.05, 0.999, -1.890312305921982e-05, 0.24140336552826036),
    ('small a, tiny x', 0.3, 6.5, 1e-12, -0.012369593056102567, 2.3504684085240654e-05),
    ('whole b', 2.5, 1.0, 0.3, -0.05934987571968617, 0.07078807211425339),
    ('whole b', 2.5, 2.0, 0.7, -0.13290241146078635, 0.22643705851329024),
    ('whole b', 7.0, 3.0, 0.5, -0.04372025450343259, 0.06902328022317938),
    ('whole b', 30.0, 6.0, 0.9, -0.013439204104219013, 0.09104996347559151),
    ('whole b, large a', 1000.0, 3.0, 0.996, -0.0005837497968260374, 0.17713873694660742),
    ('whole b, small a', 0.05, 1.0, 0.5, -0.6695360429946806, 0.049784380440017754),
    ('x near 0', 0.05, 3.0, 1e-300, -7.41897161900451e-13, 2.1047687463789215e-17),
    ('x near 0', 7.0, 40.0, 1e-12, -1.3813216406118687e-75, 8.732241475845652e-78),
    ('x near 0', 30.0, 1000.0, 0.0001, -2.9968087053186687e-62, 1.5520948788193038e-64),
    ('x near 1', 2.5, 3.0, 0.999999, -5.9583217088526176e-18, 8.833466269423557e-17),
    ('x near 1', 7.0, 0.5, 0.9999999999999998, -3.2325823397012063e-09, 1.4916085317117605e-06),
    ('x near 1, small b', 0.3, 0.05, 0.999999, -0.23286901977225882, 7.137300503158819),
    ('x near 1', 150.0, 40.0, 0.99, -8.652658288570347e-41, 1.1660254275490926e-39),
    ('large a, b', 1000.0, 1000.0, 0.5, -0.008922479336000141, 0.008922479336000141),
    ('large a, b', 1000.0, 1000.0, 0.52, -0.001764063004894656, 0.0018360790569215042),
    ('large a, b', 150.0, 1000.0, 0.13, -0.030421858656989424, 0.004550231959389383),
    ('large a, b', 1000.0, 40.0, 0.95, -0.0005128920701995782, 0.011191144309688204),
    ('below the switch', 7.0, 40.0, 0.16326530595918368, -0.13053602860420147, 0.023655215962383656),
    ('above the switch', 7.0, 40.0, 0.16326530628571428, -0.13053602826202307, 0.023655215928890548),
    ('below the switch', 1000.0, 1000.0, 0.4999999995, -0.008922479340461, 0.008922479331539265),
    ('above the switch', 1000.0, 1000.0, 0.5000000005, -0.008922479331539265, 0.008922479340461),
]
# (df, t, d stdtr/d df): mpmath at 80 digits (_stdtr_mp), where central differences of SciPy's stdtr have no digits
# left (the derivative is 1/df^2 of a value near 1/2)
STDTR_MPMATH = [
    (30.0, 0.001, 1.0983696417731622e-07),
    (1000.0, 0.7, 8.13893253742346e-08),
    (1000.0, -3.0, -3.367402917998611e-08),
    (100000.0, 0.001, 9.973537062421459e-15),
    (100000.0, 10.0, 1.9903869126225287e-30),
    (100000000.0, 0.7, 8.142021281674423e-18),
    (100000000.0, -3.0, -3.3238867443826093e-18),
    (1000000000000.0, 2.0, 1.3497741628309836e-25),
]
# (dfn, dfd, x, d fdtr/d dfn, d fdtr/d dfd): mpmath at 80 digits, of betainc as fdtr's comment in special.py has it
FDTR_MPMATH = [
    (3.0, 1000000.0, 1.5, 0.012655074180313464, 7.024299740627068e-13),
    (1000000.0, 5.0, 2.0, 9.412551474461758e-14, 0.03603064376040811),
    (10000.0, 10000.0, 1.01, 4.2524707568136435e-06, 4.516559982157997e-06),
]


def _mpmath_d(a, b, x):
    """(dI/da, dI/db) by mpmath, as the table's values were made."""
    mp = pytest.importorskip("mpmath")
    with mp.workdps(50):
        a, b, x = mp.mpf(a), mp.mpf(b), mp.mpf(x)
        if x <= a / (a + b):
            da = mp.diff(lambda t: mp.betainc(t, b, 0, x, regularized=True), a)
            db = mp.diff(lambda t: mp.betainc(a, t, 0, x, regularized=True), b)
        else:
            da = -mp.diff(lambda t: mp.betainc(b, t, 0, 1 - x, regularized=True), a)
            db = -mp.diff(lambda t: mp.betainc(t, a, 0, 1 - x, regularized=True), b)
        return float(da), float(db)


def _stdtr_mp(df, t):
    """stdtr by mpmath, as STDTR_MPMATH's derivatives were taken (mpmath.diff of it at 80 digits)."""
    mp = pytest.importorskip("mpmath")
    df, t = mp.mpf(df), mp.mpf(t)
    if df > 1e5:  # (the hypergeometric series of betainc converges too slowly: the integral of the density)
        def density(s):
            log = mp.loggamma((df + 1) / 2) - mp.loggamma(df / 2) - (df + 1) / 2 * mp.log1p(s * s / df)
            return mp.exp(log) / mp.sqrt(df * mp.pi)
        return mp.mpf(1) / 2 + mp.quad(density, [0, t])
    return mp.mpf(1) / 2 + mp.sign(t) / 2 * mp.betainc(mp.mpf(1) / 2, df / 2, 0, t * t / (df + t * t), regularized=True)


def _central(f, args, i, h):
    up, down = list(args), list(args)
    up[i], down[i] = args[i] + h, args[i] - h
    return (f(*up) - f(*down)) / (2 * h)


def _both_modes(f, args, i):
    """d f / d args[i], elementwise, in reverse mode (the gradient of the sum: each output depends on its own
    element) and in forward mode."""
    g = mg.grad(lambda *a: np.sum(f(*a)), argnums=i)(*args)
    tangent = 1.0 if np.ndim(args[i]) == 0 else np.ones_like(args[i])
    t = mg.jvp(lambda v: f(*args[:i], v, *args[i + 1:]), (args[i],), (tangent,))[1]
    return g, t


def test_betainc_shape_derivatives_match_mpmath():
    # every point in one call, each output its own point's: the gradient of the sum is the derivatives
    regimes, a, b, x, da, db = zip(*MPMATH)
    a, b, x, da, db = map(np.array, (a, b, x, da, db))
    for fn, sign in ((sp.betainc, 1.0), (sp.betaincc, -1.0)):
        for i, want in ((0, da), (1, db)):
            for got in _both_modes(fn, (a, b, x), i):
                for r, g, w in zip(regimes, got, sign * want):
                    assert g == pytest.approx(w, rel=1e-10, abs=1e-300), (fn.__name__, i, r)
    # the table is mpmath's (two of its points again, the cheap ones)
    for row in (MPMATH[0], MPMATH[10]):
        assert _mpmath_d(*row[1:4]) == pytest.approx(row[4:], rel=1e-14)


def test_betainc_shape_derivatives_vectorized_and_against_central_differences():
    # broadcast shapes, in both modes, against central differences of SciPy's betainc, and every x in (0, 1) of a
    # grid at once (each element stops its continued fraction on its own)
    a, b = np.array([[0.5], [2.5], [40.0]]), np.array([0.3, 1.0, 7.5])
    x = np.array([[0.05, 0.5, 0.97]])
    check_grads(lambda a, b, x: sp.betainc(a, b, x), a, b, x)
    check_grads(lambda a, b: sp.betaincc(a, b, 0.4), a, b)
    ag, bg, xg = np.meshgrid([0.1, 1.5, 12.0, 300.0], [0.2, 2.0, 9.0, 500.0], np.linspace(0.01, 0.99, 15))
    for i in (0, 1):
        want = _central(sp.betainc, (ag, bg, xg), i, 1e-5 * (ag, bg)[i])
        for got in _both_modes(sp.betainc, (ag, bg, xg), i):
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-9)


def test_betainc_shape_derivatives_at_the_ends_and_outside_the_domain():
    # x = 0 and 1: I is 0 and 1 for every shape; a = inf (b = inf): I = 0 (1) at every x < 1 (x > 0): flat
    for a, b, x in ((2.5, 3.0, 0.0), (0.3, 0.5, 1.0), (np.inf, 2.0, 0.4), (2.0, np.inf, 0.4)):
        for i in (0, 1):
            assert _both_modes(sp.betainc, (a, b, x), i) == (0.0, 0.0)
    # outside the domain SciPy's value is NaN, and so is the derivative; at a = 0 (b = 0), the end of the shape's
    # range, SciPy's value is the limit 1 (0) and the derivative one-sided: NaN as well
    for a, b, x in ((-1.0, 2.0, 0.4), (2.0, -1.0, 0.4), (2.0, 3.0, -0.1), (2.0, 3.0, 1.5), (np.nan, 2.0, 0.4),
                    (2.0, 3.0, np.nan), (0.0, 2.0, 0.4), (2.0, 0.0, 0.4)):
        for i in (0, 1):
            assert all(np.isnan(g) for g in _both_modes(sp.betainc, (a, b, x), i)), (a, b, x, i)


@pytest.mark.parametrize("fn", [sp.betaincinv, sp.betainccinv])
def test_inverse_beta_functions_in_their_shapes(fn):
    # the x with I = p (1 - I = q) moves as -dI/da over the density there (for both: 1 - q is constant too);
    # against central differences of SciPy's inverse, in both modes
    for a, b, p in ((2.0, 3.0, 0.3), (0.5, 0.5, 0.99), (0.3, 7.0, 1e-4), (40.0, 25.0, 0.6), (1.0, 1.0, 0.5)):
        for i in (0, 1):
            want = _central(fn, (a, b, p), i, 1e-6 * (a, b)[i])
            for got in _both_modes(fn, (a, b, p), i):
                assert got == pytest.approx(want, rel=2e-6), (fn.__name__, a, b, p, i)
    # p = 0 and 1: x = 0 and 1 for every shape
    for p in (0.0, 1.0):
        for i in (0, 1):
            assert _both_modes(fn, (2.0, 3.0, p), i) == (0.0, 0.0)
    check_grads(lambda a, b: fn(a, b, np.array([0.2, 0.5, 0.9])), P(3), P(3))


def test_stdtr_and_stdtrit_in_df():
    # stdtr(df, t) = 1/2 + sign(t) I_(t^2/(df+t^2))(1/2, df/2) / 2: against central differences of SciPy's, both
    # modes, both signs of t, a small df, t far out
    for df, t in ((2.5, 0.7), (2.5, -0.7), (0.3, 2.0), (5.0, 0.05), (5.0, -30.0), (100.0, -1.5), (1.0, 0.2)):
        want = _central(sp.stdtr, (df, t), 0, 1e-6 * df)
        for got in _both_modes(sp.stdtr, (df, t), 0):
            assert got == pytest.approx(want, rel=1e-6, abs=1e-12), (df, t)
    for df, p in ((2.5, 0.3), (2.5, 0.9), (50.0, 0.01), (0.7, 0.6)):
        want = _central(sp.stdtrit, (df, p), 0, 1e-6 * df)
        for got in _both_modes(sp.stdtrit, (df, p), 0):
            assert got == pytest.approx(want, rel=1e-6), (df, p)
    # t = 0 (stdtr = 1/2 for every df), t = +-inf, df = inf (the normal cdf): 0; p = 1/2, 0, 1 for stdtrit
    for df, t in ((3.0, 0.0), (3.0, np.inf), (3.0, -np.inf), (np.inf, 0.7)):
        assert _both_modes(sp.stdtr, (df, t), 0) == (0.0, 0.0)
    for df, p in ((3.0, 0.5), (3.0, 0.0), (3.0, 1.0), (np.inf, 0.3)):
        assert _both_modes(sp.stdtrit, (df, p), 0) == (0.0, 0.0)
    # where SciPy's value is NaN, so is the derivative
    for df in (-1.0, np.nan):
        assert all(np.isnan(g) for g in _both_modes(sp.stdtr, (df, 0.7), 0))
        assert all(np.isnan(g) for g in _both_modes(sp.stdtrit, (df, 0.3), 0))
    check_grads(lambda df, t: sp.stdtr(df, t), P(3) * 3, np.array([-1.2, 0.3, 2.5]))
    check_grads(lambda df: sp.stdtrit(df, np.array([0.1, 0.45, 0.8])), P(3) * 3)


def test_stdtr_in_df_for_large_df_matches_mpmath():
    # the shape's change and t^2/(df+t^2)'s cancel to first order: 1/df^2 from two terms of 1/df (9% off at 1e8 as
    # such a sum), betainc's derivative along b with b x/(1-x) held
    df, t, want = map(np.array, zip(*STDTR_MPMATH))
    for got in _both_modes(sp.stdtr, (df, t), 0):
        np.testing.assert_allclose(got, want, rtol=1e-12)
    assert float(_mpmath_stdtr_d(*STDTR_MPMATH[1][:2])) == pytest.approx(STDTR_MPMATH[1][2], rel=1e-14)


def _mpmath_stdtr_d(df, t):
    mp = pytest.importorskip("mpmath")
    with mp.workdps(80):
        return mp.diff(lambda d: _stdtr_mp(d, t), mp.mpf(df))


def test_fdtr_family_in_dfn_and_dfd():
    # fdtr(dfn, dfd, x) = I_w(dfn/2, dfd/2), w = dfn x / (dfd + dfn x); fdtrc = 1 - fdtr; fdtri its inverse in x:
    # against central differences of SciPy's own, both modes
    for dfn, dfd, x in ((2.0, 3.0, 0.4), (0.5, 7.0, 10.0), (30.0, 2.0, 0.01), (5.0, 5.0, 3.0), (1.0, 40.0, 0.2)):
        for fn in (sp.fdtr, sp.fdtrc):
            for i in (0, 1):
                want = _central(fn, (dfn, dfd, x), i, 1e-6 * (dfn, dfd)[i])
                for got in _both_modes(fn, (dfn, dfd, x), i):
                    assert got == pytest.approx(want, rel=2e-6, abs=1e-12), (fn.__name__, dfn, dfd, x, i)
        p = float(sp.fdtr(dfn, dfd, x))
        for i in (0, 1):
            want = _central(sp.fdtri, (dfn, dfd, p), i, 1e-6 * (dfn, dfd)[i])
            for got in _both_modes(sp.fdtri, (dfn, dfd, p), i):
                assert got == pytest.approx(want, rel=2e-6), (dfn, dfd, p, i)
    # large shapes, where central differences have no digits left: mpmath
    dfn, dfd, x, wn, wd = map(np.array, zip(*FDTR_MPMATH))
    for i, want in ((0, wn), (1, wd)):
        for got in _both_modes(sp.fdtr, (dfn, dfd, x), i):
            np.testing.assert_allclose(got, want, rtol=1e-11)
    # x = 0 and inf (p = 0 and 1): 0 for every shape; NaN where SciPy's is
    for i in (0, 1):
        assert _both_modes(sp.fdtr, (2.0, 3.0, 0.0), i) == (0.0, 0.0)
        assert _both_modes(sp.fdtr, (2.0, 3.0, np.inf), i) == (0.0, 0.0)
        assert _both_modes(sp.fdtri, (2.0, 3.0, 0.0), i) == (0.0, 0.0)
        assert all(np.isnan(g) for g in _both_modes(sp.fdtr, (-1.0, 3.0, 0.4), i))
    check_grads(lambda dfn, dfd: sp.fdtr(dfn, dfd, np.array([0.3, 1.0, 4.0])), P(3) * 2, P(3) * 4)
    check_grads(lambda dfn, dfd: sp.fdtri(dfn, dfd, np.array([0.1, 0.5, 0.8])), P(3) * 2, P(3) * 4)


def _mixed(f, s, x):
    """d/dx d/ds f(s, x), d/ds d/dx f(s, x), and the first in forward over reverse mode."""
    def ds(x):
        return mg.grad(f, argnums=0)(s, x)

    return mg.grad(ds)(x), mg.grad(lambda s: mg.grad(f, argnums=1)(s, x))(s), mg.jvp(ds, (x,), (1.0,))[1]


def test_second_derivatives_mixing_a_shape_and_x():
    # d/dx of dI/da is d/da of the density x^(a-1) (1-x)^(b-1) / B(a, b): the density times ln x - ψ(a) + ψ(a+b)
    # (ln(1-x) - ψ(b) + ψ(a+b) for b), by SciPy's functions; both orders of differentiation, and central
    # differences of SciPy's betainc in both variables
    b = 3.0
    for a, x in ((2.0, 0.4), (0.5, 0.03), (40.0, 0.9)):
        dens = x ** (a - 1) * (1 - x) ** (b - 1) / sp.beta(a, b)
        closed = (dens * (np.log(x) - sp.digamma(a) + sp.digamma(a + b)),
                  dens * (np.log1p(-x) - sp.digamma(b) + sp.digamma(a + b)))
        for i, want in enumerate(closed):
            s, f = (a, lambda s, x: sp.betainc(s, b, x)) if i == 0 else (b, lambda s, x, a=a: sp.betainc(a, s, x))
            h, k = 1e-4 * s, 1e-4 * min(x, 1 - x)
            fd = (f(s + h, x + k) - f(s + h, x - k) - f(s - h, x + k) + f(s - h, x - k)) / (4 * h * k)
            assert fd == pytest.approx(want, rel=1e-5)
            for got in _mixed(f, s, x):
                assert got == pytest.approx(want, rel=1e-11), (a, x, i)
    # the Hessian block in x and the shape of a sum over points: against central differences of SciPy's values
    # (the gradient in a by columns)
    xs, a0 = np.array([0.2, 0.5, 0.8]), 2.5

    def loss(a, xs):
        return np.sum(sp.betainc(a, b, xs))

    block = mg.jacobian(lambda xs: mg.grad(loss, argnums=0)(a0, xs))(xs)
    fd = np.array([_central(lambda a, x: (sp.betainc(a, b, x + 1e-5) - sp.betainc(a, b, x - 1e-5)) / 2e-5,
                            (a0, x), 0, 1e-4) for x in xs])
    np.testing.assert_allclose(block, fd, rtol=1e-5)


def test_second_derivative_in_the_shapes_is_refused():
    # twice in the shapes (a, a; a, b; df): a NotImplementedTangent that says so, and in strict mode its error
    msg = "second derivative of scipy.special.betainc"
    h = mg.hessian(lambda p: sp.betainc(p[0], 3.0, p[1]))(np.array([2.0, 0.4]))
    assert isinstance(h, mg.NotImplementedTangent) and msg in h.message
    h = mg.hessian(lambda p: sp.betainc(p[0], p[1], 0.4))(np.array([2.0, 3.0]))
    assert isinstance(h, mg.NotImplementedTangent) and msg in h.message
    for f, v in ((lambda df: sp.stdtr(df, 0.7), 3.0), (lambda d: sp.fdtr(2.0, d, 0.4), 3.0),
                 (lambda a: sp.betaincinv(a, 2.0, 0.3), 1.5)):
        for second in (mg.grad(mg.grad(f)), lambda v, f=f: mg.jvp(mg.grad(f), (v,), (1.0,))[1]):
            h = second(v)
            assert isinstance(h, mg.NotImplementedTangent) and msg in h.message
    with mg.config(strict=True), pytest.raises(mg.NotImplementedTangentError, match=msg):
        mg.grad(mg.grad(lambda a: sp.betainc(a, 3.0, 0.4)))(2.0)
    # the first derivative in the shape stays, also in strict mode
    with mg.config(strict=True):
        assert mg.grad(lambda a: sp.betainc(a, 3.0, 0.4))(2.0) == pytest.approx(MPMATH[0][4], rel=1e-13)
