"""scipy.special rules (mutagrad/rules/scipy/special.py), both modes, against
finite differences; the plain-Python functions through mutagrad.scipy.special."""
import re

import numpy as np
import pytest

sp = pytest.importorskip("scipy.special")

import mutagrad as mg  # noqa: E402
import mutagrad.scipy.special as msp  # noqa: E402
from mutagrad.testing import check_grads, numerical_grad  # noqa: E402
from tests._oracles import fd_hessian
from tests.rules._draws import Draws  # noqa: E402

_draws = Draws(0)
rng = _draws.rng
R, P, U01 = _draws.R, _draws.P, _draws.U01


def NZ(*shape):  # away from 0, both signs
    return rng.uniform(0.3, 1.5, shape) * rng.choice([-1.0, 1.0], shape)


def C(*shape):
    return rng.uniform(0.5, 1.5, shape) + 1j * rng.uniform(-0.5, 0.5, shape)


NEG_B = np.array([1.0, -0.5, 2.0])  # a negative weight: logsumexp needs return_sign

# (covers, function, args, order)
CASES = [
    # gamma and beta functions
    ("scipy.special.gammaln", sp.gammaln, (np.array([-1.5, -0.5, 0.7, 3.2]),), 2),
    ("scipy.special.loggamma", sp.loggamma, (P(3),), 2),
    ("scipy.special.loggamma", sp.loggamma, (C(3),), 1),  # no complex polygamma in SciPy
    ("scipy.special.psi", sp.digamma, (P(3),), 2),
    ("scipy.special.psi", sp.psi, (np.array([-1.5, -0.5, 2.5]),), 2),
    ("scipy.special.polygamma", lambda x: msp.polygamma(np.array([0, 1, 2]), x), (P(3),), 2),
    ("scipy.special.polygamma", lambda x: msp.polygamma(3, x), (P(2, 2),), 2),
    ("scipy.special.gamma", sp.gamma, (np.array([-1.5, 0.7, 2.2]),), 2),
    ("scipy.special.beta", sp.beta, (P(3), P(3)), 2),
    ("scipy.special.betaln", sp.betaln, (P(3), P(2, 3)), 2),
    ("scipy.special.multigammaln", lambda a: msp.multigammaln(a, 3), (P(3) + 1.5,), 2),
    ("scipy.special.gammainc", lambda x: sp.gammainc(np.array([0.5, 1.0, 2.5]), x), (P(3),), 2),
    ("scipy.special.gammaincc", lambda x: sp.gammaincc(np.array([0.5, 1.0, 2.5]), x), (P(3),), 2),
    ("scipy.special.betainc", lambda x: sp.betainc(np.array([0.5, 2.0]), np.array([3.0, 1.5]), x), (U01(2),), 2),
    ("scipy.special.betaincc", lambda x: sp.betaincc(np.array([0.5, 2.0]), np.array([3.0, 1.5]), x), (U01(2),), 2),
    ("scipy.special.stdtr", lambda t: sp.stdtr(np.array([1.0, 2.5, 30.0]), t), (R(3),), 2),
    ("scipy.special.stdtrit", lambda p: sp.stdtrit(np.array([1.0, 2.5, 30.0]), p), (np.array([0.02, 0.3, 0.9]),), 2),
    # error function and normal distribution
    ("scipy.special.erf", sp.erf, (R(3),), 2),
    ("scipy.special.erf", sp.erf, (C(3),), 2),
    ("scipy.special.erfc", sp.erfc, (R(3),), 2),
    ("scipy.special.erfi", sp.erfi, (R(3),), 2),
    ("scipy.special.erfcx", sp.erfcx, (R(3),), 2),
    ("scipy.special.dawsn", sp.dawsn, (R(3),), 2),
    ("scipy.special.erfinv", sp.erfinv, (rng.uniform(-0.9, 0.9, 3),), 2),
    ("scipy.special.erfcinv", sp.erfcinv, (rng.uniform(0.2, 1.8, 3),), 2),
    ("scipy.special.ndtr", sp.ndtr, (R(3),), 2),
    ("scipy.special.log_ndtr", sp.log_ndtr, (np.array([-30.0, -2.0, 0.3, 4.0]),), 2),
    ("scipy.special.ndtri", sp.ndtri, (U01(3),), 2),
    # logistic
    ("scipy.special.expit", sp.expit, (R(3),), 2),
    ("scipy.special.log_expit", sp.log_expit, (np.array([-40.0, -1.0, 0.5, 30.0]),), 2),
    ("scipy.special.logit", sp.logit, (U01(3),), 2),
    # x log y and entropies, including the line x = 0
    ("scipy.special.xlogy", sp.xlogy, (R(3), P(3)), 2),
    ("scipy.special.xlogy", sp.xlogy, (C(2), C(2)), 2),
    ("scipy.special.xlogy", lambda y: sp.xlogy(np.zeros(3), y), (np.array([0.0, 0.5, 2.0]),), 2),
    ("scipy.special.xlogy", lambda x: sp.xlogy(x, np.array([0.5, 2.0])), (np.zeros(2),), 2),
    ("scipy.special.xlog1py", sp.xlog1py, (R(3), P(3)), 2),
    ("scipy.special.xlog1py", lambda y: sp.xlog1py(np.zeros(3), y), (np.array([-1.0, -0.5, 2.0]),), 2),
    ("scipy.special.entr", sp.entr, (P(3),), 2),
    ("scipy.special.rel_entr", sp.rel_entr, (P(3), P(3)), 2),
    ("scipy.special.rel_entr", lambda y: sp.rel_entr(np.zeros(2), y), (np.array([0.5, 2.0]),), 2),
    ("scipy.special.kl_div", sp.kl_div, (P(3), P(3)), 2),
    ("scipy.special.kl_div", lambda y: sp.kl_div(np.zeros(2), y), (P(2),), 2),
    # Bessel functions, including x = 0 where they are smooth
    ("scipy.special.j0", sp.j0, (R(3),), 2),
    ("scipy.special.j1", sp.j1, (np.array([0.0, -1.3, 2.5]),), 2),
    ("scipy.special.y0", sp.y0, (P(3),), 2),
    ("scipy.special.y1", sp.y1, (P(3),), 2),
    ("scipy.special.i0", sp.i0, (np.array([0.0, -1.3, 2.5]),), 2),
    ("scipy.special.i1", sp.i1, (np.array([0.0, -1.3, 2.5]),), 2),
    ("scipy.special.i0e", sp.i0e, (NZ(3),), 2),
    ("scipy.special.i1e", sp.i1e, (NZ(3),), 2),
    ("scipy.special.k0", sp.k0, (P(3),), 2),
    ("scipy.special.k1", sp.k1, (P(3),), 2),
    ("scipy.special.k0e", sp.k0e, (P(3),), 2),
    ("scipy.special.k1e", sp.k1e, (P(3),), 2),
    ("scipy.special.jv", lambda x: sp.jv(np.array([0.0, 1.5, 3.0]), x), (P(3),), 2),
    ("scipy.special.jv", lambda x: sp.jv(2, x), (np.array([0.0, 1.0]),), 2),
    ("scipy.special.yv", lambda x: sp.yv(1.5, x), (P(3),), 2),
    ("scipy.special.iv", lambda x: sp.iv(np.array([0.0, 0.5, 2.0]), x), (P(3),), 2),
    ("scipy.special.kv", lambda x: sp.kv(0.7, x), (P(3),), 2),
    ("scipy.special.ive", lambda x: sp.ive(1.5, x), (P(3),), 2),
    ("scipy.special.ive", lambda x: sp.ive(2, x), (NZ(3),), 2),
    ("scipy.special.kve", lambda x: sp.kve(2.0, x), (P(3),), 2),
    # more gamma functions: 1/gamma through its zeros (the poles of gamma), sign, Pochhammer
    ("scipy.special.rgamma", sp.rgamma, (np.array([-2.5, -0.3, 0.7, 3.2]),), 2),
    ("scipy.special.rgamma", sp.rgamma, (np.array([0.0, -1.0, -2.0, -5.0]),), 2),
    ("scipy.special.rgamma", sp.rgamma, (np.array([0.7 + 0.3j, -1.5 + 0.2j]),), 1),  # no complex polygamma
    ("scipy.special.gammasgn", sp.gammasgn, (np.array([-2.5, -0.3, 0.7, 3.2]),), 2),
    ("scipy.special.poch", sp.poch, (np.array([0.7, 2.5, -1.5]), np.array([0.5, 1.2, 0.3])), 2),
    ("scipy.special.gammaincinv", lambda y: sp.gammaincinv(np.array([0.5, 1.0, 3.0]), y), (U01(3),), 2),
    ("scipy.special.gammainccinv", lambda y: sp.gammainccinv(np.array([0.5, 1.0, 3.0]), y), (U01(3),), 2),
    ("scipy.special.betaincinv", lambda y: sp.betaincinv(np.array([0.5, 1.0, 3.0]), 2.5, y), (U01(3),), 2),
    ("scipy.special.betainccinv", lambda y: sp.betainccinv(np.array([0.5, 1.0, 3.0]), 2.5, y), (U01(3),), 2),
    ("scipy.special.ndtri_exp", sp.ndtri_exp, (np.array([-30.0, -5.0, -0.7, -0.01]),), 2),
    ("scipy.special.owens_t", sp.owens_t, (np.array([-1.5, 0.0, 0.5, 2.0]), np.array([-2.0, 0.3, 1.0, 5.0])), 2),
    # integer-order Bessel functions (the order is data)
    ("scipy.special.yn", lambda x: sp.yn(np.array([0, 1, 3]), x), (P(3),), 2),
    ("scipy.special.kn", lambda x: sp.kn(np.array([0, 1, 3]), x), (P(3),), 2),
    # exponential integrals, dilogarithm (including z = 1, 0/0 in the integrand), Hurwitz zeta in q
    ("scipy.special.expn", lambda x: sp.expn(np.array([0, 1, 2, 5]), x), (P(4),), 2),
    ("scipy.special.exp1", sp.exp1, (P(3),), 2),
    ("scipy.special.exp1", sp.exp1, (np.array([-1.0 + 0.5j, 1.5 - 0.2j]),), 2),
    ("scipy.special.expi", sp.expi, (np.array([-2.0, -0.3, 0.2, 1.5]),), 2),
    ("scipy.special.spence", sp.spence, (np.array([0.3, 1.0, 2.5]),), 2),
    ("scipy.special.spence", sp.spence, (np.array([0.5 + 0.5j, 2.0 - 1.0j]),), 2),
    ("scipy.special._zeta", lambda q: sp.zeta(np.array([2.0, 3.5, 4.0]), q), (np.array([0.7, 2.0, -1.5]),), 2),
    # Lambert W (a Python function calling the ufunc _lambertw): z = 0 (0/0), the branches -1 and 1,
    # complex z, a huge z (e^W overflows there), the tolerance argument
    ("scipy.special._lambertw", lambda x: sp.lambertw(x).real, (np.array([0.0, 0.5, -0.2, 30.0, 1e300]),), 2),
    # robust losses (both pieces of huber; pseudo_huber's delta near and far from r) and exprel
    # (its series near 0 and the quotient beyond)
    ("scipy.special.huber", sp.huber, (np.array([0.5, 2.0, 1.0, 0.7]), np.array([-3.0, 0.3, 1.4, -0.2])), 1),
    ("scipy.special.pseudo_huber", sp.pseudo_huber, (np.array([0.5, 2.0, 1e-3, 0.7]),
                                                     np.array([-3.0, 0.3, 1.4, -1e-4])), 2),
    ("scipy.special.exprel", sp.exprel, (np.array([1e-9, 0.05, -0.09, 0.11, 1.0, -5.0, 3.0]),), 2),
    ("scipy.special._lambertw", sp.lambertw, (C(3),), 2),
    ("scipy.special._lambertw", lambda x: msp.lambertw(x, -1, 1e-12), (np.array([-0.3, -0.1]),), 2),  # (real: -1's
    ("scipy.special._lambertw", lambda z: msp.lambertw(z, -1), (np.array([-0.1 + 0.2j, 2.0 - 1.0j]),), 2),  # cut)
    ("scipy.special._lambertw", lambda z: sp.lambertw(z, k=2), (C(2),), 2),
    # complete elliptic integrals, including m = 0 (0/0) and m < 0
    ("scipy.special.ellipk", sp.ellipk, (np.array([-3.0, -1e-4, 0.0, 1e-5, 0.3, 0.9]),), 2),
    ("scipy.special.ellipe", sp.ellipe, (np.array([-3.0, -1e-4, 0.0, 1e-5, 0.3, 0.9]),), 2),
    ("scipy.special.ellipkm1", sp.ellipkm1, (np.array([0.02, 0.1, 0.7, 1.0, 1.0 - 1e-5, 4.0]),), 2),
    # Box-Cox and inverses, both arguments, including lambda = 0 (0/0) and near it
    ("scipy.special.boxcox", sp.boxcox, (np.array([0.3, 1.0, 2.5, 4.0, 0.7]), np.array([-1.0, 0.5, 0.0, 1e-5, 2.0])), 2),
    ("scipy.special.boxcox1p", sp.boxcox1p,
     (np.array([-0.7, 0.0, 2.5, 4.0, 0.3]), np.array([-1.0, 0.5, 0.0, 1e-5, 2.0])), 2),
    ("scipy.special.inv_boxcox", sp.inv_boxcox,
     (np.array([-0.5, 0.0, 1.5, 0.7, 0.3]), np.array([-1.0, 0.5, 0.0, 1e-5, 2.0])), 2),
    ("scipy.special.inv_boxcox1p", sp.inv_boxcox1p,
     (np.array([-0.5, 0.0, 1.5, 0.7, 0.3]), np.array([-1.0, 0.5, 0.0, 1e-5, 2.0])), 2),
    # elementary functions, in degrees, Wright omega
    ("scipy.special.cbrt", sp.cbrt, (np.array([-2.0, 0.3, 5.0]),), 2),
    ("scipy.special.exp2", sp.exp2, (R(3),), 2),
    ("scipy.special.exp10", sp.exp10, (R(3),), 2),
    ("scipy.special.expm1", sp.expm1, (np.array([-40.0, 0.3, 1e-9]),), 2),
    ("scipy.special.log1p", sp.log1p, (np.array([-0.5, 0.3, 1e-9]),), 2),
    ("scipy.special.cosm1", sp.cosm1, (np.array([-2.0, 0.3, 1e-9]),), 2),
    ("scipy.special.sindg", sp.sindg, (np.array([-200.0, 30.0, 95.0]),), 2),
    ("scipy.special.cosdg", sp.cosdg, (np.array([-200.0, 30.0, 95.0]),), 2),
    ("scipy.special.tandg", sp.tandg, (np.array([-200.0, 30.0, 75.0]),), 2),
    ("scipy.special.cotdg", sp.cotdg, (np.array([-200.0, 30.0, 75.0]),), 2),
    ("scipy.special.wrightomega", sp.wrightomega, (np.array([-3.0, 0.3, 5.0]),), 2),
    # hypergeometric functions w.r.t. the argument
    ("scipy.special.hyp1f1", lambda x: sp.hyp1f1(np.array([0.5, 2.0, -1.5]), np.array([1.5, 3.0, 2.5]), x),
     (np.array([-1.0, 0.3, 2.0]),), 2),
    ("scipy.special.hyperu", lambda x: sp.hyperu(np.array([0.5, 2.0, 1.5]), np.array([1.5, 3.0, 0.5]), x),
     (P(3),), 2),
    ("scipy.special.hyp2f1", lambda z: sp.hyp2f1(np.array([0.5, 2.0, 1.5]), np.array([1.5, 3.0, 0.5]),
                                                 np.array([2.5, 4.5, 3.0]), z), (np.array([-1.0, 0.3, 0.7]),), 2),
    # logsumexp, softmax, log_softmax (plain-Python in SciPy: mutagrad.scipy.special)
    ("scipy.special.logsumexp", msp.logsumexp, (R(2, 3),), 2),
    ("scipy.special.logsumexp", lambda a: msp.logsumexp(a, axis=1), (R(2, 3),), 2),
    ("scipy.special.logsumexp", lambda a: msp.logsumexp(a, axis=(0, 2), keepdims=True), (R(2, 3, 2),), 2),
    ("scipy.special.logsumexp", lambda a, b: msp.logsumexp(a, axis=-1, b=b), (R(2, 3), P(3)), 2),
    ("scipy.special.logsumexp", lambda a, b: msp.logsumexp(a, b=b, return_sign=True)[0], (R(3), NEG_B), 2),
    ("scipy.special.logsumexp", lambda a: msp.logsumexp(a, b=-NEG_B, return_sign=True)[0], (R(3),), 2),
    ("scipy.special.logsumexp", lambda a: msp.logsumexp(a, axis=0), (C(3, 2),), 2),
    # a 0-d a (SciPy reduces it as shape (1,): keepdims and axis=() give shape (1,)), and b broadcasting a
    *[("scipy.special.logsumexp", lambda a, axis=axis, kd=kd: msp.logsumexp(a, axis=axis, keepdims=kd) * 3.0,
       (np.array(1.5),), 2) for axis in (None, 0, -1, (), (0,)) for kd in (False, True)],
    ("scipy.special.logsumexp", lambda a, b: msp.logsumexp(a, b=b, axis=0, keepdims=True), (np.array(0.3), P(3)), 2),
    ("scipy.special.logsumexp", lambda a, b: msp.logsumexp(a, b=b, keepdims=True, return_sign=True)[0],
     (np.array(0.3), np.array(-2.0)), 2),
    ("scipy.special.logsumexp", lambda a, b: msp.logsumexp(a, b=b, axis=(0, 1), keepdims=True), (R(3), P(2, 3)), 2),
    *[(f"scipy.special.{name}", lambda x, name=name, axis=axis: getattr(msp, name)(x, axis=axis) * 3.0,
       (np.array(0.7),), 2) for name in ("softmax", "log_softmax") for axis in (None, 0, -1, ())],
    ("scipy.special.softmax", msp.softmax, (R(2, 3),), 2),
    ("scipy.special.softmax", lambda x: msp.softmax(x, axis=1), (R(2, 3),), 2),
    ("scipy.special.log_softmax", msp.log_softmax, (R(2, 3),), 2),
    ("scipy.special.log_softmax", lambda x: msp.log_softmax(x, axis=0), (R(2, 3),), 2),
]


@pytest.mark.parametrize("covers,fn,args,order", CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_rule(covers, fn, args, order):
    check_grads(fn, *args, modes=("fwd", "rev"), order=order)


def test_namespace_matches_scipy():
    x = np.array([[0.3, -1.2, 2.0], [1.0, 0.0, -0.5]])
    b = np.array([1.0, -0.5, 2.0])
    np.testing.assert_allclose(msp.logsumexp(x, axis=1, b=b, return_sign=True),
                               sp.logsumexp(x, axis=1, b=b, return_sign=True), rtol=1e-14)
    np.testing.assert_allclose(msp.softmax(x, axis=0), sp.softmax(x, axis=0), rtol=1e-14)
    np.testing.assert_allclose(msp.log_softmax(x), sp.log_softmax(x), rtol=1e-14)
    np.testing.assert_allclose(msp.polygamma([0, 2], 1.5), sp.polygamma([0, 2], 1.5), rtol=1e-14)
    np.testing.assert_allclose(msp.multigammaln(np.array([2.5, 4.0]), 3),
                               sp.multigammaln(np.array([2.5, 4.0]), 3), rtol=1e-13)
    assert msp.gammaln is sp.gammaln and msp.zeta is sp.zeta  # everything else is SciPy's


@pytest.mark.parametrize("axis", [None, 0, -1, (), (0,)])
@pytest.mark.parametrize("keepdims", [False, True])
@pytest.mark.parametrize("b", [None, np.array(2.0), np.array([0.5, 2.0])])
def test_logsumexp_of_0d_matches_scipy(axis, keepdims, b):
    # SciPy makes a (broadcast with b) at least 1-d: shape (1,) for keepdims=True or axis=() of a 0-d a
    a = np.array(1.5)
    ref = sp.logsumexp(a, axis=axis, b=b, keepdims=keepdims)
    val = msp.logsumexp(a, axis=axis, b=b, keepdims=keepdims)
    assert np.shape(val) == np.shape(ref)
    np.testing.assert_allclose(val, ref, rtol=1e-14)
    ct = np.arange(1.0, np.size(ref) + 1).reshape(np.shape(ref))
    g = mg.grad(lambda a: np.sum(msp.logsumexp(a, axis=axis, b=b, keepdims=keepdims) * ct))(a)
    # each output is a + log(sum of some b): derivative 1, summed against the cotangent
    np.testing.assert_allclose(g, np.sum(ct), rtol=1e-14)
    _, t = mg.jvp(lambda a: msp.logsumexp(a, axis=axis, b=b, keepdims=keepdims), (a,), (np.array(1.0),))
    np.testing.assert_allclose(t, np.ones(np.shape(ref)), rtol=1e-14)


def test_special_points_closed_form():
    # d/dy xlogy(0, y) = 0 (also at y = 0); d/dx xlogy(x, y) at x = 0 is log(y)
    g = mg.grad(lambda y: np.sum(sp.xlogy(0.0, y)))(np.array([0.0, 2.0]))
    np.testing.assert_array_equal(g, [0.0, 0.0])
    g = mg.grad(lambda x: np.sum(sp.xlogy(x, np.array([0.5, 2.0]))))(np.zeros(2))
    np.testing.assert_allclose(g, np.log([0.5, 2.0]))
    # j1'(0) = i1'(0) = 1/2
    np.testing.assert_allclose(mg.grad(sp.j1)(0.0), 0.5)
    np.testing.assert_allclose(mg.grad(sp.i1)(0.0), 0.5)
    # digamma'(1) = pi^2 / 6
    np.testing.assert_allclose(mg.grad(sp.digamma)(1.0), np.pi ** 2 / 6)


def test_real_parameter_derivative_is_not_implemented():
    g = mg.grad(lambda v: sp.jv(v, 1.5))(0.5)
    assert isinstance(g, mg.NotImplementedTangent)
    with mg.config(strict=True), pytest.raises(mg.NotImplementedTangentError, match="scipy.special.hyp1f1"):
        mg.grad(lambda a: sp.hyp1f1(a, 2.0, 0.4))(0.5)
    # not requested: no error
    with mg.config(strict=True):
        np.testing.assert_allclose(mg.grad(lambda x: sp.gammainc(0.5, x))(1.5),
                                   np.exp(-1.5) * 1.5 ** -0.5 / sp.gamma(0.5))


def test_real_parameter_tangent_is_not_implemented():
    _, t = mg.jvp(lambda v: sp.iv(v, 1.5), (0.5,), (1.0,))
    assert isinstance(t, mg.NotImplementedTangent)


def test_plain_python_scipy_function_on_a_traced_value_raises():
    with pytest.raises(mg.DifferentiationError):
        mg.grad(lambda x: sp.logsumexp(x))(np.zeros(3))


def test_tails_closed_forms():
    # log_ndtr' = phi/Phi ~ -x + 1/(-x) for x << 0 (was 1% off at -1e7, inf at -1e100)
    for x in (-1e4, -1e7):
        np.testing.assert_allclose(mg.grad(sp.log_ndtr)(np.float64(x)), -x + 1 / -x, rtol=1e-12)
    assert np.isfinite(mg.grad(sp.log_ndtr)(np.float64(-1e100)))
    np.testing.assert_allclose(mg.grad(mg.grad(sp.log_ndtr))(np.float64(-1e4)), -1.0, rtol=1e-6)
    # expit' = e^-x / (1 + e^-x)^2, not 0 for x > 37
    np.testing.assert_allclose(mg.grad(sp.expit)(np.float64(40.0)), np.exp(-40.0) / (1 + np.exp(-40.0)) ** 2, rtol=1e-14)


def test_erfcx_and_dawsn_derivatives_far_out():
    # erfcx' ~ -1/(sqrt(pi) x^2) and erfcx'' ~ 2/(sqrt(pi) x^3); dawsn' ~ -1/(2x^2), dawsn'' ~ 1/x^3
    # (2x erfcx - 2/sqrt(pi) and 1 - 2x dawsn cancel: 0 at x = 1e8, wrong signs for the second)
    rp = 1 / np.sqrt(np.pi)
    np.testing.assert_allclose(mg.grad(sp.erfcx)(np.float64(1e8)), -rp / 1e16, rtol=1e-14)
    np.testing.assert_allclose(mg.grad(mg.grad(sp.erfcx))(np.float64(1e5)), 2 * rp / 1e15, rtol=1e-9)
    np.testing.assert_allclose(mg.grad(sp.dawsn)(np.float64(1e8)), -0.5 / 1e16, rtol=1e-14)
    np.testing.assert_allclose(mg.grad(mg.grad(sp.dawsn))(np.float64(-1e6)), -1 / 1e18, rtol=1e-9)
    check_grads(lambda x: np.sum(sp.erfcx(x) + sp.dawsn(x)), np.array([-2.0, 0.3, 29.0, 31.0, 150.0]), order=2)


def test_stdtr_density_for_large_and_infinite_df():
    # d stdtr(df, t)/dt tends to the normal density (was 2% off at df = 1e14 and nan at inf)
    normal = np.exp(-0.7 ** 2 / 2) / np.sqrt(2 * np.pi)
    for df in (1e14, 1e16, np.inf):
        np.testing.assert_allclose(mg.grad(lambda t: sp.stdtr(df, t))(np.float64(0.7)), normal, rtol=1e-13)
    # stdtrit, its inverse: d/dp = 1 / the density at stdtrit(df, p); ndtri's at df = inf (SciPy's value there)
    st = pytest.importorskip("scipy.stats")
    for df in (4.0, 1e16, np.inf):
        want = 1 / st.t.pdf(sp.stdtrit(df, 0.3), df) if np.isfinite(df) else np.sqrt(2 * np.pi) * np.exp(
            sp.ndtri(0.3) ** 2 / 2)
        np.testing.assert_allclose(mg.grad(lambda p, df=df: sp.stdtrit(df, p))(0.3), want, rtol=1e-13)
    # w.r.t. df: betainc's derivative in its shape (tests/rules/test_scipy_special_betainc.py), against central
    # differences of SciPy's stdtrit
    g = mg.grad(lambda df: sp.stdtrit(df, 0.3))(4.0)
    assert g == pytest.approx((sp.stdtrit(4.0 + 1e-6, 0.3) - sp.stdtrit(4.0 - 1e-6, 0.3)) / 2e-6, rel=1e-6)


# (covers, function, args, what the message names): no derivative at all, as SciPy has none
NOT_DIFFERENTIABLE_CASES = [
    ("scipy.special._riemann_zeta", sp.zeta, (np.array([2.5, 4.0]),), "zeta(x)"),
    ("scipy.special.zetac", sp.zetac, (np.array([2.5, 4.0]),), "zetac"),
]


@pytest.mark.parametrize("covers,fn,args,names", NOT_DIFFERENTIABLE_CASES)
def test_no_derivative_is_not_implemented(covers, fn, args, names):
    out, pullback = mg.vjp(fn, *args)
    np.testing.assert_array_equal(out, fn(*args))
    (g,) = pullback(np.ones_like(out))
    assert isinstance(g, mg.NotImplementedTangent) and names in g.message
    _, t = mg.jvp(fn, args, (np.ones_like(args[0]),))
    assert isinstance(t, mg.NotImplementedTangent) and names in t.message
    with mg.config(strict=True), pytest.raises(mg.NotImplementedTangentError, match=re.escape(names)):
        mg.grad(lambda x: np.sum(fn(x)))(*args)


@pytest.mark.parametrize("fn,args,argnum,names", [
    (sp.zeta, (3.0, 1.5), 0, r"zeta\(x, q\) w.r.t. x"),
    (sp.hyp1f1, (1.5, 2.5, 0.3), 1, "hyp1f1"),
    (sp.hyp2f1, (0.5, 1.5, 2.5, 0.3), 2, "hyp2f1"),
])
def test_parameter_derivative_is_not_implemented(fn, args, argnum, names):
    assert isinstance(mg.grad(fn, argnums=argnum)(*args), mg.NotImplementedTangent)
    tangents = tuple(1.0 if i == argnum else 0.0 for i in range(len(args)))
    assert isinstance(mg.jvp(fn, args, tangents)[1], mg.NotImplementedTangent)
    with mg.config(strict=True), pytest.raises(mg.NotImplementedTangentError, match=names):
        mg.grad(fn, argnums=argnum)(*args)
    # the other argument still has its derivative, also in strict mode
    with mg.config(strict=True):
        check_grads(lambda v: fn(*args[:-1], v), args[-1], order=1)


def test_integer_order_has_no_tangent():
    # the order of yn, kn, expn is data: Y_n' = (Y_{n-1} - Y_{n+1}) / 2, Y_{-1} = -Y_1
    x, n = np.array([0.5, 1.5, 2.5]), np.array([0, 1, 2])
    gx = mg.grad(lambda x: np.sum(sp.yn(n, x)))(x)
    np.testing.assert_allclose(gx, [-sp.y1(0.5), 0.5 * (sp.y0(1.5) - sp.yn(2, 1.5)), 0.5 * (sp.y1(2.5) - sp.yn(3, 2.5))],
                               rtol=1e-14)
    # E_1' = -E_0 = -exp(-x)/x
    np.testing.assert_allclose(mg.grad(lambda x: sp.expn(1, x))(0.7), -np.exp(-0.7) / 0.7, rtol=1e-14)


def test_new_rules_closed_forms():
    # 1/gamma at its zeros x = -n: (-1)^n n!; (1/gamma)''(0) = 2 Euler's gamma
    for n in range(5):
        np.testing.assert_allclose(mg.grad(sp.rgamma)(float(-n)), (-1) ** n * np.prod(np.arange(1, n + 1)), rtol=1e-14)
    np.testing.assert_allclose(mg.grad(mg.grad(sp.rgamma))(0.0), 2 * np.euler_gamma, rtol=1e-14)
    # spence'(1) = lim log(z)/(1-z) = -1, spence''(1) = 1/2
    assert mg.grad(sp.spence)(1.0) == -1.0
    assert mg.grad(mg.grad(sp.spence))(1.0) == 0.5
    # K'(0) = pi/8, E'(0) = -pi/8; ellipkm1'(1) = -pi/8
    np.testing.assert_allclose(mg.grad(sp.ellipk)(0.0), np.pi / 8, rtol=1e-15)
    np.testing.assert_allclose(mg.grad(sp.ellipe)(0.0), -np.pi / 8, rtol=1e-15)
    np.testing.assert_allclose(mg.grad(sp.ellipkm1)(1.0), -np.pi / 8, rtol=1e-15)
    # boxcox at lambda = 0 is log x: d/dx = 1/x, d/dlambda = log(x)^2 / 2
    gx, gl = mg.grad(sp.boxcox, argnums=(0, 1))(2.5, 0.0)
    np.testing.assert_allclose((gx, gl), (0.4, np.log(2.5) ** 2 / 2), rtol=1e-15)
    # boxcox(0, lambda) = -1/lambda for lambda > 0: d/dlambda = 1/lambda^2
    np.testing.assert_allclose(mg.grad(lambda lm: sp.boxcox(0.0, lm))(0.5), 4.0, rtol=1e-15)
    # gammasgn: zero derivative
    assert mg.grad(sp.gammasgn)(-2.5) == 0.0
    # Owen's T(0, a) = arctan(a) / (2 pi): d/da = 1 / (2 pi (1 + a^2)); T(h, 1) = Phi(h)(1 - Phi(h))/2
    np.testing.assert_allclose(mg.grad(lambda a: sp.owens_t(0.0, a))(0.7), 1 / (2 * np.pi * 1.49), rtol=1e-15)
    h = 0.8
    phi, cdf = np.exp(-h * h / 2) / np.sqrt(2 * np.pi), sp.ndtr(h)
    np.testing.assert_allclose(mg.grad(lambda h: sp.owens_t(h, 1.0))(h), phi * (1 - 2 * cdf) / 2, rtol=1e-14)
    # Lambert W: W(0) = 0 with W'(0) = 1, W''(0) = -2 (from W e^W = z); W(e) = 1 with W'(e) = 1 / (2e)
    w = lambda z: sp.lambertw(z).real
    assert mg.grad(w)(0.0) == 1.0
    assert mg.grad(mg.grad(w))(0.0) == -2.0
    np.testing.assert_allclose(mg.grad(w)(np.e), 1 / (2 * np.e), rtol=1e-14)
    # near the branch point -1/e SciPy's 1 + W is inaccurate (W'/W' = 3e4 at z = -1/e + 1e-10): the
    # series of 1 + W in sqrt(2 (e z + 1)) gives W' = 1 / (e^W (1 + W)); values from mpmath (40 digits)
    z = np.array([-1 / np.e + 2e-5, -1 / np.e + 3e-6, -1 / np.e + 1e-10])
    want = {0: [258.8864320784897, 671.280469766916, 116580.38934284961],
            -1: [-262.5109961438859, -674.9048737810346, -116584.01371862183]}
    for k in (0, -1):
        g = mg.grad(lambda z, k=k: np.sum(sp.lambertw(z, k).real))(z)
        np.testing.assert_allclose(g, want[k], rtol=1e-12)
        t = mg.jvp(lambda z, k=k: sp.lambertw(z, k).real, (z,), (np.ones(3),))[1]
        np.testing.assert_allclose(t, want[k], rtol=1e-12)
    # the same points as complex numbers, off the real axis (k = -1 from above, k = 1 from below:
    # the branches that meet 0 there), and a real z below -1/e (complex W: the series' root is
    # imaginary; it was inf): W' from mpmath (40 digits) (the newfeat20 tester: complex input was
    # up to 28,000x off, a real z < -1/e gave inf)
    b = -0.3678794410714423  # (-1/e + 1e-10)
    cases = [(complex(b), 0, 116580.38934284961), (complex(b), -1, -116584.01371862183),
             (complex(b, 1e-11), -1, -116149.99214939897 + 5792.962854226748j),
             (complex(b, -1e-11), 1, -116149.99214939897 - 5792.962854226748j),
             (complex(b, -1e-11), 0, 116146.36777362674 + 5792.962854226843j),
             (-0.36787944217144236, 0, -1.812187880932261 - 36866.52754946483j),
             (-0.36787944217144236, -1, -1.812187880932261 + 36866.52754946483j),
             (complex(-0.36787944217144236, -0.0), 0, -1.812187880932261 + 36866.52754946483j),
             (-1.0, 0, -0.6973702056886966 - 0.5934976734644826j), (-1.0, -1, -0.6973702056886966 + 0.5934976734644826j),
             (-0.5, -1, -1.3517642951383535 + 2.423646649841584j), (-2.0, 0, -0.3596009553764567 - 0.20035877146935221j)]
    for z, k, want in cases:
        t = mg.jvp(lambda z, k=k: sp.lambertw(z, k), (z,), (np.ones((), type(z)),))[1]
        np.testing.assert_allclose(t, want, rtol=1e-13)
    np.testing.assert_allclose(mg.grad(lambda z: sp.lambertw(z).real)(-1.0), -0.6973702056886966, rtol=1e-14)


_EULER_GAMMA = 0.5772156649015329


def _second_difference(f, x, h):
    """Five-point central second difference (error O(h^4))."""
    return (-f(x + 2 * h) + 16 * f(x + h) - 30 * f(x) + 16 * f(x - h) - f(x - 2 * h)) / (12 * h * h)


@pytest.mark.parametrize("x", [1e-300, 1e-160, 1e-8, -1 + 1e-9, -3 + 1e-10, -2.2, 0.2])
def test_rgamma_second_derivative_near_its_zeros(x):
    # 1/Γ is entire; -ψ/Γ differentiated again is Γ⁻¹(ψ² - ψ'), inf - inf near the poles of Γ:
    # -inf at x = 1e-300 (the true value is 2γ), 205.5 for 0.8456 at -1 + 1e-9
    d2 = mg.grad(mg.grad(lambda x: msp.rgamma(x)))(x)
    want = 2 * _EULER_GAMMA if abs(x) < 1e-6 else _second_difference(sp.rgamma, x, 1e-3)
    assert d2 == pytest.approx(want, rel=1e-7)
    d1 = mg.grad(lambda x: msp.rgamma(x))(x)
    # 1/Γ(x) = x + γx² + ... near 0
    assert d1 == pytest.approx((sp.rgamma(x + 1e-6) - sp.rgamma(x - 1e-6)) / 2e-6 if abs(x) > 1e-6
                               else 1.0 + 2 * _EULER_GAMMA * x, rel=1e-8)


@pytest.mark.parametrize("z, m, want", [(1e-10, -1.0, -1 / (1e-10 - 1) ** 2), (1e-8, -1.0, -1 / (1e-8 - 1) ** 2),
                                        (1e-12, -2.0, None), (1e-10, 2.0, 2e-10 + 1), (0.3, 3, None)])
def test_poch_derivative_near_the_poles_of_digamma(z, m, want):
    # y (ψ(z+m) - ψ(z)): two digammas of 1e10 cancel at z = 1e-10 (-7076.85 for -1)
    if want is None:  # closed form: poch(z, m) is a rational function for an integer m
        if m < 0:
            want = -sum(1.0 / (z - k) for k in range(1, int(-m) + 1)) * sp.poch(z, m)
        else:
            want = sum(1.0 / (z + k) for k in range(int(m))) * sp.poch(z, m)
    assert mg.grad(lambda z: msp.poch(z, m))(z) == pytest.approx(want, rel=1e-12)
    assert mg.jvp(lambda z: msp.poch(z, m), (z,), (1.0,))[1] == pytest.approx(want, rel=1e-12)


def test_ive_of_a_complex_argument_is_not_holomorphic():
    # ive(v, z) = iv(v, z) exp(-|Re z|) is not holomorphic: the holomorphic formula gave every derivative wrong
    # (0.02997+0.14721j for d/dx = 0.0015076-0.0245378j, central differences); then it was refused (mom)
    z = np.array([2.5 + 3j])
    fd = (sp.ive(0, z + 1e-6) - sp.ive(0, z - 1e-6)) / 2e-6
    np.testing.assert_allclose(fd, 0.0015076 - 0.0245378j, atol=1e-7)  # (the value the comment gives)
    np.testing.assert_allclose(mg.jvp(lambda z: msp.ive(0, z), (z,), (np.ones(1, complex),))[1], fd, atol=1e-8)
    x = np.array([2.5, 0.7])
    check_grads(lambda x: msp.ive(1.5, x), x)  # real: exp(-|x|) iv, differentiable away from 0
    check_grads(lambda x: msp.ive(2, x), -x)


def test_beta_derivative_where_one_argument_is_tiny():
    # (the specialsweep tester) d/db beta(a, b) = beta (psi(b) - psi(a + b)) lost every digit for a ~ 1e-17
    # (0.0): the digamma difference is a's Taylor series there. By hand: beta(a, 2) = 1 / (a (a + 1)), so
    # d/db at b = 2 is -(1/a) a psi1(2) (1 + O(a)) -> -(pi^2/6 - 1)
    for a in (1e-17, 1e-12):
        np.testing.assert_allclose(mg.grad(lambda b, a=a: sp.beta(a, b))(2.0), -(np.pi ** 2 / 6 - 1), rtol=1e-11)
        np.testing.assert_allclose(mg.grad(lambda b, a=a: sp.betaln(a, b))(2.0), -a * (np.pi ** 2 / 6 - 1),
                                   rtol=1e-9)
    # the series branch at a = 1e-4, both arguments and d2/db2: mpmath (40 digits)
    g = mg.grad(lambda v: sp.beta(v[0], v[1]))(np.array([1e-4, 2.0]))
    np.testing.assert_allclose(g, [-99999999.000199970004, -0.64484937704340154798], rtol=1e-12)
    np.testing.assert_allclose(mg.hessian(lambda b: sp.beta(1e-4, b))(2.0), 0.4040902931857176915, rtol=1e-9)


def test_incomplete_gamma_and_beta_second_derivatives_at_the_support_ends():
    # (the specialsweep tester) the densities in logs were 0 * inf at x = 0: the second derivative was 0.
    # By hand: d2/dx2 gammainc(a, x) at 0 is (a - 1) 0**(a-2) / Gamma(a): 1 for a = 2, 0 for a = 3;
    # betainc(2, 3, x)'s density 12 x (1 - x)^2 has slope 12 at 0, betainc(3, 2, x)'s 12 x^2 (1 - x) -12 at 1
    for f, x, want in ((lambda x: sp.gammainc(2.0, x), 0.0, 1.0), (lambda x: sp.gammainc(3.0, x), 0.0, 0.0),
                       (lambda x: sp.gammaincc(2.0, x), 0.0, -1.0), (lambda x: sp.betainc(2.0, 3.0, x), 0.0, 12.0),
                       (lambda x: sp.betaincc(2.0, 3.0, x), 0.0, -12.0), (lambda x: sp.betainc(3.0, 2.0, x), 1.0, -12.0)):
        assert mg.hessian(f)(x) == pytest.approx(want, abs=1e-12)
        assert mg.jvp(mg.grad(f), (x,), (1.0,))[1] == pytest.approx(want, abs=1e-12)
    assert mg.grad(lambda x: sp.gammainc(0.5, x))(0.0) == np.inf  # (the density itself, as before)
    # a, b < 1: both ends' densities are infinite, and their slopes the one-sided limits (-inf at 0, +inf at 1:
    # the end's own power dominates; they were inf - inf, NaN: the newfeat23 tester)
    f = lambda x: sp.betainc(0.5, 0.3, x)
    assert mg.hessian(f)(0.0) == -np.inf and mg.hessian(f)(1.0) == np.inf
    assert mg.jvp(mg.grad(f), (0.0,), (1.0,))[1] == -np.inf


def test_exprel_derivative_where_exp_times_x_overflows():
    # (the newfeat22 tester) e^x (x - 1) overflowed before the derivative did: inf for 703 < x < 709.78;
    # at -inf NaN where the limit is 0. mpmath (40 digits) at 35 and 709
    np.testing.assert_allclose(mg.grad(sp.exprel)(35.0), 44019965207066.65, rtol=1e-13)
    np.testing.assert_allclose(mg.grad(sp.exprel)(709.0), 1.1575198749865064e305, rtol=1e-13)
    assert mg.grad(sp.exprel)(-np.inf) == 0.0
    assert mg.grad(sp.exprel)(np.inf) == np.inf  # (the limit: NaN from inf - log inf before)
    assert mg.jvp(sp.exprel, (np.inf,), (1.0,))[1] == np.inf
    check_grads(sp.exprel, np.array([29.0, 31.0, 40.0]), order=2)


@pytest.mark.parametrize("z, m, want", [(0.0, 1.0, 1.0), (0.0, 2.0, 1.0), (-1.0, 2.0, -1.0), (-1.0, 3.0, -1.0),
                                        (-2.0, 3.0, 2.0), (0.0, 3.0, 2.0)])
def test_poch_derivative_at_its_roots(z, m, want):
    # poch(z, m) = z (z+1) ... (z+m-1): at a root the product rule's sum, by hand ((z(z+1))' = 2z + 1;
    # (z(z+1)(z+2))' = 3z² + 6z + 2); y Σ 1/(z+k) was 0 * inf = nan
    assert mg.grad(lambda z: msp.poch(z, m))(z) == pytest.approx(want, rel=1e-15)
    assert mg.jvp(lambda z: msp.poch(z, m), (z,), (1.0,))[1] == pytest.approx(want, rel=1e-15)
    h = 2.0 if m == 2.0 else 6.0 * z + 6.0 if m == 3.0 else 0.0  # the second derivative, by hand
    assert mg.hessian(lambda z: msp.poch(z, m))(z) == pytest.approx(h, abs=1e-14)
    zz = np.array([z, 0.5, 1.7, -0.5])  # mixed orders in one call: rising, zero and falling
    mm = np.array([m, 0.0, -2.0, -3.0])
    check_grads(lambda zz: np.sum(msp.poch(zz, mm)), zz, modes=("rev", "fwd"))


@pytest.mark.parametrize("z, m", [(0.3, 2.0), (-1.0, 3.0), (0.0, 2.0), (2.5, -2.0), (1e-10, 2.0), (0.3, 0.0),
                                  (-1.0, 2.5), (-2.0 + 1e-9, 2.5)])
def test_poch_second_derivatives_in_both_arguments(z, m):
    # the mixed derivative d/dm of d/dz poch at an integer m was that of the product computed with m's value
    # (0 at (0.3, 2), half of it for m < 0), and d/dz poch at a root z with a non-integer m was 0 * inf = nan;
    # the oracle: central differences of SciPy's poch (second, and of the Hessian for the third order)
    v = np.array([z, m])

    def f(v):
        return sp.poch(v[0], v[1])

    np.testing.assert_allclose(mg.hessian(f)(v), fd_hessian(f, v), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(mg.jacobian(mg.grad(f), mode="rev")(v), fd_hessian(f, v), rtol=1e-5, atol=1e-6)
    g = np.array([(f(v + 1e-6 * e) - f(v - 1e-6 * e)) / 2e-6 for e in np.eye(2)])
    np.testing.assert_allclose(mg.grad(f)(v), g, rtol=1e-7, atol=1e-9)
    if z == 0.3:
        # (third order: central differences of SciPy's second differences, an oracle of plain values only)
        third = np.stack([(fd_hessian(f, v + 5e-4 * e, 5e-4) - fd_hessian(f, v - 5e-4 * e, 5e-4)) / 1e-3
                          for e in np.eye(2)], -1)
        np.testing.assert_allclose(mg.jacobian(mg.hessian(f))(v), third, rtol=2e-4, atol=1e-5)


def test_special_ufunc_with_where_is_refused():
    # SciPy 1.17's special-function ufuncs misread where= (expit(x, where=mask, out=buf) wrote
    # elements 0, 1, 5, 6, 7 for the mask 0, 1, 3, 4, 5, 7): the value was SciPy's and the derivative
    # that of NumPy's where=, a wrong gradient
    mask = np.array([1, 1, 0, 1, 1, 1, 0, 1], bool)

    def f(x):
        buf = np.zeros_like(x)
        sp.expit(x, where=mask, out=buf)
        return np.sum(buf)

    with pytest.raises(mg.MutationError, match=r"scipy.special.expit\(..., where=...\).*np.where"):
        mg.grad(f)(np.linspace(-1.0, 1.0, 8))
    with pytest.raises(mg.MutationError, match="where="):
        mg.jvp(f, (np.linspace(-1.0, 1.0, 8),), (np.ones(8),))
    x = np.linspace(-1.0, 1.0, 8)  # the rewrite the message gives: the derivative of NumPy's where=
    g = mg.grad(lambda x: np.sum(np.where(mask, sp.expit(x), 0.0)))(x)
    np.testing.assert_allclose(g, np.where(mask, sp.expit(x) * (1 - sp.expit(x)), 0.0), rtol=1e-14)


def test_digamma_of_a_complex_argument_has_no_derivative_named_as_such():
    # its derivative is polygamma(1, z), real only in SciPy: a NotImplementedTangent that names
    # digamma (it named polygamma), also through an in-place product into the cotangent (the
    # missing derivative was multiplied as a number there: NotImplementedTangentError)
    z = np.array([0.7 + 0.4j, 1.0 + 1.0j])

    def f(z):
        w = sp.digamma(z)
        buf = np.zeros_like(w)
        buf[...] = w
        return np.sum(np.abs(buf) ** 2)

    for g in (mg.grad(f)(z), mg.grad(lambda z: np.sum(np.abs(sp.digamma(z)) ** 2))(z)):
        assert isinstance(g, mg.NotImplementedTangent) and "scipy.special.digamma" in str(g)
        assert "polygamma(1, z)" in str(g)
    # a real argument: trigamma, against central differences
    check_grads(lambda x: np.sum(sp.digamma(x) ** 2), np.array([0.7, 1.3, 2.5]), modes=("rev", "fwd"))


def test_poch_derivative_with_an_array_of_mixed_orders():
    # an integer order among others took the digamma difference for every element: -75.03 for
    # -1.000000002 (m = -1 near z = 0), nan at a root (m = 3 at z = -1)
    z = np.array([1e-9, 0.5, -1.0, 0.7])
    m = np.array([-1.0, 2.5, 3.0, 1.5])
    g = mg.grad(lambda z: np.sum(msp.poch(z, m)))(z)
    assert g[0] == pytest.approx(-1.0 / (1e-9 - 1.0) ** 2, rel=1e-12)  # poch(z, -1) = 1/(z-1), by hand
    assert g[2] == pytest.approx(-1.0, rel=1e-15)  # (z(z+1)(z+2))' = 3z² + 6z + 2 at -1
    for k in (1, 3):  # the others: ψ(z+m) - ψ(z) times poch
        assert g[k] == pytest.approx(sp.poch(z[k], m[k]) * (sp.digamma(z[k] + m[k]) - sp.digamma(z[k])), rel=1e-12)
        fd = (sp.poch(z[k] + 1e-6, m[k]) - sp.poch(z[k] - 1e-6, m[k])) / 2e-6  # (and central differences)
        assert g[k] == pytest.approx(fd, rel=1e-7)
    np.testing.assert_allclose(mg.jvp(lambda z: msp.poch(z, m), (z,), (np.ones(4),))[1], g, rtol=1e-12)


def test_special_ufunc_with_a_numpy_true_where_is_computed():
    x = np.linspace(-1.0, 1.0, 4)
    g = mg.grad(lambda x: np.sum(sp.expit(x, where=np.True_)))(x)
    np.testing.assert_allclose(g, sp.expit(x) * (1 - sp.expit(x)), rtol=1e-14)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # (SciPy's, for a float order it truncates)
@pytest.mark.parametrize("fn,n,x", [(sp.kn, 0.7, 2.5), (sp.yn, 0.05, 0.05), (sp.expn, 0.7, 1.3), (sp.kn, -1.5, 2.5),
                                    (sp.yn, 1.9, 1.7), (sp.expn, 2.5, 0.8), (sp.kn, 1.5, 0.9)])
def test_integer_order_functions_of_a_float_order_use_scipys_truncated_order(fn, n, x):
    # SciPy truncates a float order toward zero; the rule took n - 1 and n + 1 of the float order,
    # which SciPy truncated too (kn(0.7, x)' gave -(k_0 + k_0)/2... of the wrong neighbours)
    f = lambda x: fn(n, x)
    h = 1e-6
    np.testing.assert_allclose(mg.grad(f)(x), (f(x + h) - f(x - h)) / (2 * h), rtol=1e-6)
    d = lambda x: (f(x + h) - f(x - h)) / (2 * h)
    np.testing.assert_allclose(mg.grad(mg.grad(f))(x), (d(x + 1e-4) - d(x - 1e-4)) / 2e-4, rtol=1e-4)


def test_lists_of_traced_values_are_arrays_as_scipy_makes_them():
    # (hmc) msp.logsumexp([a, b], b=[0.3, 0.7]), softmax([a, b]), log_softmax, polygamma(1, [a, b]): SciPy converts
    # the lists with np.asarray; the rules got the list and their pullbacks returned one array for it (RuleError).
    # Against central differences of SciPy's own functions, forward against reverse, Hessians too
    def mix(lse, softmax, log_softmax, polygamma):
        def f(x):
            a, b = -0.5 * np.sum(x ** 2), -np.sum((x + 1.0) ** 2)
            return (lse([a, b], b=[0.3, 0.7]) + lse((a, x[0]), b=[x[1] + 2.0, 1.0]) + softmax([a, b])[0]
                    + 2.0 * log_softmax((a, b))[1] + np.sum(polygamma(1, [a + 3.0, b + 4.0]))
                    + lse([x, 2.0 * x], axis=0)[1])
        return f

    f = mix(msp.logsumexp, msp.softmax, msp.log_softmax, msp.polygamma)
    plain = mix(sp.logsumexp, sp.softmax, sp.log_softmax, sp.polygamma)
    x = np.array([0.2, -0.4])
    np.testing.assert_allclose(f(x), plain(x), rtol=1e-14)
    g = mg.grad(f)(x)
    np.testing.assert_allclose(g, numerical_grad(plain, (x,), (0,))[0], rtol=1e-7)
    np.testing.assert_allclose(mg.jvp(f, (x,), (np.array([0.3, -1.0]),))[1], g @ [0.3, -1.0], rtol=1e-12)
    np.testing.assert_allclose(mg.hessian(f)(x), fd_hessian(plain, x), rtol=1e-4, atol=1e-6)


def test_polygamma_orders_as_a_list_and_scipy_ufuncs_of_lists_named_as_spelled():
    # regress54: msp.polygamma([0, 1], x) raised a TypeError inside its rule (list + 1); against central differences.
    # A SciPy ufunc given a list of traced values is refused (NumPy converts the list) under the name the program
    # wrote, not "np.erf" (no such function)
    f = lambda x: np.sum(msp.polygamma([0, 1], x) * [1.0, 2.0]) + np.sum(msp.polygamma((1, 2), x[::-1]))
    plain = lambda x: np.sum(sp.polygamma([0, 1], x) * [1.0, 2.0]) + np.sum(sp.polygamma((1, 2), x[::-1]))
    x = np.array([1.5, 2.0])
    fd = numerical_grad(plain, (x,), (0,))[0]
    np.testing.assert_allclose(mg.grad(f)(x), fd, rtol=1e-7)
    np.testing.assert_allclose(mg.jvp(f, (x,), (np.ones(2),))[1], np.sum(fd), rtol=1e-7)
    # (regress55) a traced order: no derivative (SciPy's polygamma is NaN between integer orders), not a zero one
    with np.errstate(invalid="ignore"):
        assert np.all(np.isnan(sp.polygamma(np.array([0.5, 1.5]), 2.0)))
    assert isinstance(mg.grad(lambda n: np.sum(msp.polygamma(n, 2.0)))(np.array([0.0, 1.0])), mg.NotImplementedTangent)
    with pytest.raises(mg.TracerEscapeError, match=r"msp\.erf of traced values inside a list") as e:
        mg.grad(lambda x: np.sum(msp.erf([x[0], 0.3])))(x)
    assert "np.erf" not in str(e.value)


# (a, x) in both of its regimes (the series below a + 1, the continued fraction above), small and large a
_GAMMA_POINTS = [(0.05, 0.01), (0.3, 0.2), (0.7, 2.5), (1.0, 1.0), (2.5, 0.4), (2.5, 9.0), (7.0, 7.5), (30.0, 25.0),
                 (30.0, 45.0), (200.0, 201.5), (1500.0, 1450.0)]


@pytest.mark.parametrize("fn", [sp.gammainc, sp.gammaincc, sp.gammaincinv, sp.gammainccinv])
def test_the_incomplete_gamma_functions_derivative_in_a(fn):
    # (the mcmc tester: a Gamma sample's implicit reparameterization, stats.gamma.ppf(u, a), had no derivative in
    # the shape) against central differences of SciPy's own function, in both modes
    for a, x in _GAMMA_POINTS:
        if fn in (sp.gammaincinv, sp.gammainccinv):
            x = float(sp.gammainc(a, x)) if fn is sp.gammaincinv else float(sp.gammaincc(a, x))
            if not 1e-6 < x < 1 - 1e-6:
                continue
        h = 1e-6 * a
        fd = (fn(a + h, x) - fn(a - h, x)) / (2 * h)
        g = mg.grad(fn, argnums=0)(a, x)
        np.testing.assert_allclose(g, fd, rtol=2e-6, atol=1e-12, err_msg=f"{fn.__name__}({a}, {x})")
        np.testing.assert_allclose(mg.jvp(fn, (a, x), (1.0, 0.0))[1], g, rtol=1e-13)


def test_the_incomplete_gamma_functions_derivative_in_a_over_many_points():
    # (bayesvi: 200 points above a + 1 took 34 s, the continued fraction's stopping test never met for all)
    x = np.random.default_rng(0).uniform(3.0, 8.0, 200)
    f = lambda a: np.sum(sp.gammainc(a, x))
    np.testing.assert_allclose(mg.grad(f)(1.6), (f(1.6 + 1e-6) - f(1.6 - 1e-6)) / 2e-6, rtol=1e-7)


def test_the_incomplete_gamma_functions_relatives_in_their_shape():
    # chdtr(v, x) = gammainc(v/2, x/2), gdtr(a, b, x) = gammainc(b, a x), their complements and chdtri, and
    # scipy.stats.gamma's and chi2's distribution functions in the shape: central differences of SciPy's
    import mutagrad.scipy.stats as mst

    u = np.array([0.2, 0.7, 0.95])
    z = np.array([0.5, 2.0, 7.0])
    cases = [lambda v: np.sum(sp.chdtr(v, z)), lambda v: np.sum(sp.chdtrc(v, z)), lambda v: np.sum(sp.chdtri(v, u)),
             lambda b: np.sum(sp.gdtr(1.4, b, z)), lambda b: np.sum(sp.gdtrc(1.4, b, z)),
             lambda a: np.sum(mst.gamma.ppf(u, a, scale=1.4)), lambda a: np.sum(mst.gamma.isf(u, a)),
             lambda a: np.sum(mst.gamma.cdf(z, a, scale=1.4)), lambda df: np.sum(mst.chi2.sf(z, df)),
             lambda df: np.sum(mst.chi2.ppf(u, df))]
    for f in cases:
        p = np.array([2.3])
        want = numerical_grad(f, (p,), (0,))[0]
        np.testing.assert_allclose(mg.grad(f)(p.copy()), want, rtol=1e-6)
        np.testing.assert_allclose(mg.jvp(f, (p.copy(),), (np.ones(1),))[1], want[0], rtol=1e-6)


def test_the_incomplete_gamma_functions_second_derivatives_in_a():
    # mixed: d/dx of dP/da is d/da of the density x^(a-1) e^-x / Γ(a), the density times (ln x - ψ(a)), by
    # SciPy's functions (an oracle without mutagrad); twice in a: not implemented
    a = 2.0
    da = lambda x: mg.grad(sp.gammainc, argnums=0)(a, x)
    for x in (0.4, 1.5, 6.0):
        want = x ** (a - 1) * np.exp(-x) / sp.gamma(a) * (np.log(x) - sp.digamma(a))
        np.testing.assert_allclose(mg.grad(da)(x), want, rtol=1e-12)
    h = mg.hessian(lambda p: sp.gammainc(p[0], p[1]))(np.array([2.0, 1.5]))
    assert isinstance(h, mg.NotImplementedTangent) and "second derivative of scipy.special.gammainc" in h.message


def test_a_second_derivative_refusal_names_the_users_call_not_the_hessians():
    # the refusal arises in the reverse pass that the outer level differentiates: it named the line of
    # mg.hessian (or of the outer grad, jvp), not the gammainc among several calls (the phylo tester)
    def f(p):
        y = p * 2.0
        rate = sp.gammainc(y, 1.5)  # the line named
        return np.sum(rate) + np.sum(sp.gammaln(p))

    p = np.array([0.7, 1.2])
    for h in (mg.hessian(f)(p), mg.jacobian(mg.grad(f), mode="rev")(p), mg.jvp(mg.grad(f), (p,), (np.ones(2),))[1]):
        assert isinstance(h, mg.NotImplementedTangent) and "second derivative of scipy.special.gammainc" in h.message
        assert "rate = sp.gammainc(y, 1.5)" in h.where, h.where
    with mg.config(strict=True), pytest.raises(mg.NotImplementedTangentError, match=r"rate = sp\.gammainc"):
        mg.hessian(f)(p)


def test_lambertw_derivative_of_an_argument_near_the_largest_float():
    # (the photovoltaic tester) lambertw(np.exp(u)) for u >= 704: z (1 + W) overflowed, and W' = W / (z (1 + W))
    # came out 0; the derivative in u is W / (1 + W) (by hand, W e^W = z), as wrightomega's
    for u in (700.0, 704.0, 709.0):
        w = float(sp.lambertw(np.exp(u)).real)
        for g in (mg.grad(lambda u: sp.lambertw(np.exp(u)).real)(u), mg.jvp(lambda u: sp.lambertw(np.exp(u)).real,
                                                                             (u,), (1.0,))[1]):
            assert g == pytest.approx(w / (1 + w), rel=1e-12)


def _with_scipy_array_api(code):
    """``code`` run by a new Python with SciPy's SCIPY_ARRAY_API=1 (read when SciPy is imported)."""
    import os
    import subprocess
    import sys

    return subprocess.run([sys.executable, "-c", code], env=dict(os.environ, SCIPY_ARRAY_API="1"),
                          capture_output=True, text=True, timeout=120, check=False)


def test_import_and_rules_with_scipys_array_api_switch():
    # (arrayapi2) with SCIPY_ARRAY_API=1, scipy.special's ufuncs are Python wrappers (gammaln, digamma's psi...):
    # `import mutagrad` failed registering them; the rules are on the ufuncs, and mutagrad.scipy.special's names
    # are those ufuncs. Oracle: central differences of the same function, in the same process
    code = ("import numpy as np, mutagrad as mg, mutagrad.scipy.special as ss\n"
            "f = lambda x: np.sum(ss.gammaln(x) + ss.digamma(x) + ss.betainc(2.0, 3.0, x / 10))\n"
            "x, h = np.array([1.5, 2.5]), 1e-6\n"
            "fd = np.array([(f(x + h * e) - f(x - h * e)) / (2 * h) for e in np.eye(2)])\n"
            "assert np.allclose(mg.grad(f)(x), fd, rtol=1e-6), (mg.grad(f)(x), fd)\n"
            "import mutagrad.scipy.stats as st\n"  # (regress113) the stats rules call the ufuncs too
            "g = lambda p: np.sum(st.t.logpdf(x, p[0], scale=p[1]) + st.gamma.logcdf(x, p[0]))\n"
            "p = np.array([3.5, 1.25])\n"
            "fd = np.array([(g(p + h * e) - g(p - h * e)) / (2 * h) for e in np.eye(2)])\n"
            "assert np.allclose(mg.grad(g)(p), fd, rtol=1e-6), (mg.grad(g)(p), fd)\n"
            "print('ok')\n")
    run = _with_scipy_array_api(code)
    assert run.returncode == 0 and run.stdout.strip() == "ok", run.stderr[-2000:]


def test_refusals_under_scipys_array_api_switch_name_scipys_function_and_the_fix():
    # (regress114) SciPy's array-API wrappers: the message named "wrapped" and "gaussian_filter_signature", and
    # a traced array beside a plain one raised SciPy's bare "Multiple namespaces" TypeError
    code = ("import numpy as np, mutagrad as mg, scipy.special as sp, scipy.ndimage as nd, scipy.stats as st\n"
            "x, w = np.array([0.3, 1.2, 2.0]), np.array([0.5, 1.0, 2.0])\n"
            "for f in (lambda x: np.sum(sp.gammaln(x)), lambda x: np.sum(nd.gaussian_filter(x, 1.0)),\n"
            "          lambda x: sp.logsumexp(x, b=w), lambda x: st.tmean(x)):\n"
            "    try:\n"
            "        mg.grad(f)(x)\n"
            "    except mg.DifferentiationError as e:\n"
            "        print(type(e).__name__, str(e).replace(chr(10), ' '))\n")
    run = _with_scipy_array_api(code)
    assert run.returncode == 0, run.stderr[-2000:]
    lines = run.stdout.strip().split("\n")
    assert len(lines) == 4, run.stdout
    assert "mutagrad.scipy.special.gammaln is the same function, differentiated" in lines[0], lines[0]
    assert "wrapped" not in lines[0], lines[0]
    assert "mutagrad.scipy.ndimage.gaussian_filter is the same function" in lines[1], lines[1]
    assert "signature" not in lines[1], lines[1]
    for line, name in zip(lines[2:], ("scipy.special.logsumexp", "scipy.stats.tmean")):
        assert line.startswith("TracedTypeError " + name) and "SCIPY_ARRAY_API=1" in line and "<string>:" in line, line


def test_the_hessian_through_a_softmax_weight_that_is_zero_is_finite():
    # (rl) an action masked by a -1e9 logit has probability exactly 0, where entr', xlogy's and log's derivatives
    # are infinite: softmax's pullback multiplied them by the 0 weight, NaN, which the gradient's forward fill
    # repairs but a Hessian's inner pass did not (NaN everywhere). The weight now drops its cotangent (as the
    # forward rule did); against central differences of central differences of the plain function
    ss = pytest.importorskip("scipy.special")
    mss = pytest.importorskip("mutagrad.scipy.special")
    z0 = np.array([0.3, -0.5, -1e9])
    for sm, plain_sm in ((mss.softmax, ss.softmax), (lambda z: np.exp(mss.log_softmax(z)),
                                                     lambda z: np.exp(ss.log_softmax(z)))):
        f = lambda z, sm=sm: np.sum(ss.entr(sm(z))) + np.sum(ss.xlogy(sm(z), sm(z)) ** 2)
        plain = lambda z, sm=plain_sm: np.sum(ss.entr(sm(z))) + np.sum(ss.xlogy(sm(z), sm(z)) ** 2)
        want = fd_hessian(plain, z0, 1e-4)
        np.testing.assert_allclose(mg.hessian(f)(z0), want, atol=1e-6)
        np.testing.assert_allclose(mg.jvp(mg.grad(f), (z0,), (np.array([1.0, 0.0, 0.0]),))[1], want[0], atol=1e-6)
