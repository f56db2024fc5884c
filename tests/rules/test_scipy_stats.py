"""scipy.stats distributions (mutagrad/rules/scipy/stats.py) through
mutagrad.scipy.stats: values against SciPy, derivatives in both modes against
finite differences."""
import numpy as np
import pytest

st = pytest.importorskip("scipy.stats")

import mutagrad as mg  # noqa: E402
import mutagrad.scipy.stats as mst  # noqa: E402
from mutagrad.testing import check_grads  # noqa: E402
from tests.rules._draws import Draws  # noqa: E402

_draws = Draws(0)
R, P, U01, SPD = _draws.R, _draws.P, _draws.U01, _draws.SPD


X3 = R(3)
_SING_A = R(3, 2)  # a plain singular covariance _SING_A @ _SING_A.T
MU3 = R(3)
K = np.array([0, 1, 3, 6])
CONT = ("logpdf", "pdf", "cdf", "logcdf", "sf", "logsf")


def m(dist, method):
    return getattr(getattr(mst, dist), method)


# (covers, function, args, order): covers names the SciPy method
CASES = [
    # norm: x, loc, scale (keyword and positional), frozen
    *[(f"scipy.stats.norm.{meth}", m("norm", meth), (R(3), R(3), P(3)), 2) for meth in CONT],
    ("scipy.stats.norm.logpdf", lambda x, s: mst.norm.logpdf(x, scale=s), (R(3), P(3)), 2),
    ("scipy.stats.norm.logpdf", lambda loc, s: mst.norm(loc, s).logpdf(X3), (R(3), P(3)), 2),
    ("scipy.stats.norm.logcdf", m("norm", "logcdf"), (np.array([-30.0, -3.0, 0.5]),), 2),
    ("scipy.stats.norm.ppf", m("norm", "ppf"), (U01(3), R(3), P(3)), 2),
    ("scipy.stats.norm.isf", m("norm", "isf"), (U01(3), R(3), P(3)), 2),
    # t: densities w.r.t. df too; the cumulative functions and quantiles w.r.t. x (q), loc, scale to second order,
    # w.r.t. df to first (their second in df is not implemented)
    ("scipy.stats.t.logpdf", m("t", "logpdf"), (R(3), P(3) + 1, R(3), P(3)), 2),
    ("scipy.stats.t.pdf", m("t", "pdf"), (R(3), P(3) + 1, R(3), P(3)), 2),
    *[(f"scipy.stats.t.{meth}", lambda x, loc, s, meth=meth: m("t", meth)(x, 2.5, loc, s), (R(3), R(3), P(3)), 2)
      for meth in ("cdf", "logcdf", "sf", "logsf")],
    ("scipy.stats.t.ppf", lambda q, loc, s: mst.t.ppf(q, 2.5, loc, s), (U01(3), R(3), P(3)), 2),
    ("scipy.stats.t.isf", lambda q, loc, s: mst.t.isf(q, np.array([1.0, 4.0, np.inf]), loc=loc, scale=s),
     (U01(3), R(3), P(3)), 2),
    *[(f"scipy.stats.t.{meth}", m("t", meth), (R(3), P(3) + 1, R(3), P(3)), 1) for meth in CONT[2:]],
    *[(f"scipy.stats.t.{meth}", m("t", meth), (U01(3), P(3) + 1, R(3), P(3)), 1) for meth in ("ppf", "isf")],
    # gamma: densities w.r.t. a too; support x >= loc
    ("scipy.stats.gamma.logpdf", m("gamma", "logpdf"), (P(3) + 1, P(3), R(3) * 0.1, P(3)), 2),
    ("scipy.stats.gamma.pdf", m("gamma", "pdf"), (P(3) + 1, P(3), R(3) * 0.1, P(3)), 2),
    ("scipy.stats.gamma.pdf", lambda x, a: mst.gamma.pdf(x, a), (np.array([-1.0, 0.5, 2.0]), P(3)), 2),
    *[(f"scipy.stats.gamma.{meth}", lambda x, loc, s, meth=meth: m("gamma", meth)(x, 1.7, loc, s),
       (P(3) + 1, R(3) * 0.1, P(3)), 2) for meth in ("cdf", "logcdf", "sf", "logsf")],
    # beta: w.r.t. a, b too (the cumulative functions and quantiles to first order); support [loc, loc + scale]
    ("scipy.stats.beta.logpdf", m("beta", "logpdf"), (U01(3), P(3), P(3)), 2),
    ("scipy.stats.beta.pdf", m("beta", "pdf"), (U01(3) * 3 - 1, P(3), P(3), -1.0, 3.0), 2),
    ("scipy.stats.beta.pdf", lambda x, a, b: mst.beta.pdf(x, a, b), (np.array([-0.5, 0.3, 1.5]), P(3), P(3)), 2),
    *[(f"scipy.stats.beta.{meth}", lambda x, loc, s, meth=meth: m("beta", meth)(x, 2.5, 1.5, loc, s),
       (U01(3), np.zeros(3), np.ones(3) * 1.2), 2) for meth in ("cdf", "logcdf", "sf", "logsf")],
    *[(f"scipy.stats.beta.{meth}", m("beta", meth), (U01(3), P(3), P(3)), 1) for meth in CONT[2:]],
    *[(f"scipy.stats.beta.{meth}", m("beta", meth), (U01(3), P(3), P(3), R(3), P(3)), 1) for meth in ("ppf", "isf")],
    # poisson: w.r.t. mu (k is data)
    *[(f"scipy.stats.poisson.{meth}", lambda mu, meth=meth: m("poisson", meth)(K, mu), (P(4) + 1,), 2)
      for meth in ("logpmf", "pmf", "cdf", "logcdf", "sf", "logsf")],
    ("scipy.stats.poisson.pmf", lambda mu: mst.poisson.pmf(np.array([-1, 0.5, 2.0]), mu, loc=1), (P(3),), 2),
    # nbinom and binom: w.r.t. n and p (k is data), the cumulative functions to first order in n
    *[(f"scipy.stats.nbinom.{meth}", lambda n, p, meth=meth: m("nbinom", meth)(K, n, p), (P(4) + 1, U01(4)), 2)
      for meth in ("logpmf", "pmf")],
    *[(f"scipy.stats.nbinom.{meth}", lambda p, meth=meth: m("nbinom", meth)(K, 2.5, p), (U01(4),), 2)
      for meth in ("cdf", "logcdf", "sf", "logsf")],
    *[(f"scipy.stats.nbinom.{meth}", lambda n, p, meth=meth: m("nbinom", meth)(K, n, p), (P(4) + 1, U01(4)), 1)
      for meth in ("cdf", "logcdf", "sf", "logsf")],
    *[(f"scipy.stats.binom.{meth}", lambda p, meth=meth: m("binom", meth)(K, 7, p), (U01(4),), 2)
      for meth in ("logpmf", "pmf", "cdf", "logcdf", "sf", "logsf")],
    # multivariate normal: w.r.t. x, mean and cov
    ("scipy.stats.multivariate_normal.logpdf", m("multivariate_normal", "logpdf"), (R(3), R(3), SPD(3)), 2),
    ("scipy.stats.multivariate_normal.logpdf", lambda x, c: mst.multivariate_normal.logpdf(x, MU3, c), (R(4, 3), SPD(3)), 2),
    ("scipy.stats.multivariate_normal.pdf", m("multivariate_normal", "pdf"), (R(3), R(3), SPD(3)), 2),
    ("scipy.stats.multivariate_normal.logpdf", lambda x, c: mst.multivariate_normal.logpdf(x, cov=c), (R(2, 3), P(3)), 2),
    ("scipy.stats.multivariate_normal.logpdf", lambda x, c: mst.multivariate_normal.logpdf(x, 0.5, c), (R(4), 1.5), 2),
    ("scipy.stats.multivariate_normal.logpdf", lambda mu, c: mst.multivariate_normal(mu, c).logpdf(np.ones(2)),
     (R(2), SPD(2)), 2),
    # allow_singular: cov = A Aᵀ of rank 2 in 3-d (the rank is constant), x in the support mean + range(A);
    # first order (the pseudo-inverse cuts the zero eigenvalue off: its higher orders are not given)
    ("scipy.stats.multivariate_normal.logpdf",
     lambda a, z, mu: mst.multivariate_normal.logpdf(mu + a @ z, mu, a @ a.T, allow_singular=True), (R(3, 2), R(2), R(3)), 1),
    ("scipy.stats.multivariate_normal.logpdf",
     lambda a, z, mu: mst.multivariate_normal.logpdf(mu + z @ a.T, mu, a @ a.T, allow_singular=True),
     (R(3, 1), R(4, 1), R(3)), 1),
    ("scipy.stats.multivariate_normal.pdf",
     lambda a, z, mu: mst.multivariate_normal(mu, a @ a.T, allow_singular=True).pdf(mu + a @ z), (R(3, 2), R(2), R(3)), 1),
    ("scipy.stats.multivariate_normal.logpdf",
     lambda z, mu: mst.multivariate_normal.logpdf(mu + _SING_A @ z, mu, _SING_A @ _SING_A.T, allow_singular=True),
     (R(2), R(3)), 2),
    ("scipy.stats.multivariate_normal.logpdf",
     lambda x, mu: mst.multivariate_normal.logpdf(x * np.array([1.0, 0.0, 1.0]), mu * np.array([1.0, 0.0, 1.0]),
                                                  np.array([2.0, 0.0, 0.5]), allow_singular=True), (R(3), R(3)), 2),
]


@pytest.mark.parametrize("covers,fn,args,order", CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_rule(covers, fn, args, order):
    check_grads(fn, *args, modes=("fwd", "rev"), order=order)


def test_multivariate_normal_batch_with_traced_mean_second_order():
    check_grads(mst.multivariate_normal.logpdf, R(4, 3), R(3), SPD(3), modes=("fwd", "rev"), order=2)


X = np.array([-1.5, -0.2, 0.0, 0.4, 1.0, 2.7])


@pytest.mark.parametrize("dist,params", [("norm", (0.3, 1.5)), ("t", (2.5, 0.3, 1.5)), ("gamma", (2.5, -1.0, 1.5)),
                                         ("gamma", (1.0,)), ("gamma", (0.5,)), ("beta", (2.5, 1.5, -1.0, 4.0)),
                                         ("beta", (0.5, 3.0))])
def test_continuous_values_match_scipy(dist, params):
    with np.errstate(divide="ignore"):
        for meth in CONT:
            np.testing.assert_allclose(getattr(getattr(mst, dist), meth)(X, *params),
                                       getattr(getattr(st, dist), meth)(X, *params), rtol=1e-12, err_msg=meth)
    np.testing.assert_allclose(getattr(mst, dist)(*params).logpdf(X), getattr(st, dist)(*params).logpdf(X), rtol=1e-12)


def test_discrete_and_multivariate_values_match_scipy():
    k = np.array([-1, 0, 1.5, 2, 5, 9])
    with np.errstate(divide="ignore"):
        for meth in ("logpmf", "pmf", "cdf", "logcdf", "sf", "logsf"):
            for args in ((1.7,), (1.7, 1)):
                np.testing.assert_allclose(getattr(mst.poisson, meth)(k, *args), getattr(st.poisson, meth)(k, *args),
                                           rtol=1e-12, err_msg=meth)
    k = np.array([-1, 0, 1.5, 2, 5, 9, 12, np.nan])
    with np.errstate(divide="ignore", invalid="ignore"):
        for dist, params in (("nbinom", (2.5, 0.3)), ("nbinom", (2.5, 0.3, 1)), ("nbinom", (3, 1.0)),
                             ("nbinom", (-1.0, 0.3)), ("nbinom", (2.0, 1.5)), ("binom", (10, 0.3)),
                             ("binom", (10, 0.3, 1)), ("binom", (10, 1.0)), ("binom", (10, 0.0)),
                             ("binom", (4, -0.5))):
            for meth in ("logpmf", "pmf", "cdf", "logcdf", "sf", "logsf"):
                if meth == "logcdf" and params == (4, -0.5):
                    continue  # (SciPy's logcdf gives 0, not NaN, at k >= n for an invalid p)
                np.testing.assert_allclose(getattr(getattr(mst, dist), meth)(k, *params),
                                           getattr(getattr(st, dist), meth)(k, *params), rtol=1e-12,
                                           err_msg=f"{dist}{params}.{meth}")
    x, mu, cov = R(5, 3), R(3), SPD(3)
    for args in ((mu, cov), (mu, np.diag(cov)), (mu, 2.0)):
        np.testing.assert_allclose(mst.multivariate_normal.logpdf(x, *args), st.multivariate_normal.logpdf(x, *args),
                                   rtol=1e-12)
    np.testing.assert_allclose(mst.multivariate_normal.logpdf(x[:, 0], 0.5, 2.0),
                               st.multivariate_normal.logpdf(x[:, 0], 0.5, 2.0), rtol=1e-12)
    np.testing.assert_allclose(mst.multivariate_normal(mu, cov).pdf(x[0]), st.multivariate_normal(mu, cov).pdf(x[0]),
                               rtol=1e-12)


def test_gradients_closed_form():
    # d/dx log N(x; mu, s) = -(x - mu) / s^2; d/ds = -1/s + (x - mu)^2 / s^3
    g = mg.grad(mst.norm.logpdf, argnums=(0, 1, 2))(2.0, 0.5, 1.5)
    np.testing.assert_allclose(g, (-1.5 / 2.25, 1.5 / 2.25, -1 / 1.5 + 2.25 / 1.5 ** 3))
    # d/dmu log Poisson(k; mu) = k / mu - 1
    np.testing.assert_allclose(mg.grad(lambda mu: mst.poisson.logpmf(4, mu))(2.0), 1.0)
    # d/dp log NB(k; n, p) = n / p - k / (1 - p); the odefit tester's case-count likelihood (vs central differences)
    np.testing.assert_allclose(mg.grad(lambda p: mst.nbinom.logpmf(3, 2.0, p))(0.25), 2.0 / 0.25 - 3 / 0.75)
    y = np.array([0.0, 3.0, 10.0, 7.0])

    def nll(th):
        mu, r = np.exp(th[0]) * np.array([1.0, 2.0, 8.0, 6.0]), np.exp(th[1])
        return -np.sum(mst.nbinom.logpmf(y, r, r / (r + mu)))

    th = np.array([0.1, np.log(4.0)])
    fd = np.array([(nll(th + 1e-6 * e) - nll(th - 1e-6 * e)) / 2e-6 for e in np.eye(2)])
    np.testing.assert_allclose(mg.grad(nll)(th), fd, rtol=1e-7)
    # d/dp log Bin(k; n, p) = k / p - (n - k) / (1 - p)
    np.testing.assert_allclose(mg.grad(lambda p: mst.binom.logpmf(3, 10, p))(0.4), 3 / 0.4 - 7 / 0.6)
    # w.r.t. n, the log-gamma formula's: digamma(n + 1) - digamma(n - k + 1) + log(1 - p)
    import scipy.special as ssp

    np.testing.assert_allclose(mg.grad(lambda n: mst.binom.logpmf(3, n, 0.4))(10.0),
                               ssp.digamma(11.0) - ssp.digamma(8.0) + np.log(0.6), rtol=1e-12)
    # d/dmu P(K <= 2; mu) = -pmf(2; mu)
    np.testing.assert_allclose(mg.grad(lambda mu: mst.poisson.cdf(2, mu))(1.3), -st.poisson.pmf(2, 1.3))
    # d/dx gamma cdf = gamma pdf
    np.testing.assert_allclose(mg.grad(lambda x: mst.gamma.cdf(x, 2.5, scale=2.0))(1.2), st.gamma.pdf(1.2, 2.5, scale=2.0))


# (distribution, shapes, the point: x or a probability): each cumulative function and quantile w.r.t. each shape
SHAPE_POINTS = [("t", (2.5,), 0.7), ("t", (0.8,), -1.9), ("t", (40.0,), 2.2), ("beta", (2.5, 1.5), 0.3),
                ("beta", (0.4, 0.7), 0.9), ("beta", (30.0, 12.0), 0.65), ("f", (2.5, 3.5), 1.2),
                ("f", (0.8, 12.0), 0.1), ("f", (30.0, 5.0), 2.5)]


def _in_shape(method, arg, shapes, i, loc, scale):
    """``method`` as a function of its i-th shape."""
    return lambda v: method(arg, *shapes[:i], v, *shapes[i + 1:], loc, scale)


@pytest.mark.parametrize("dist,shapes,x", SHAPE_POINTS)
def test_cumulative_functions_and_quantiles_in_their_shapes(dist, shapes, x):
    # betainc's derivatives in its shapes, stdtr's in df, fdtr's in dfn and dfd and their inverses': against central
    # differences of SciPy's own distribution, both modes, also with loc and scale
    for meth in ("cdf", "logcdf", "sf", "logsf", "ppf", "isf"):
        for loc, scale in ((0.0, 1.0), (-0.3, 1.7)):
            arg = {"ppf": getattr(st, dist).cdf(x, *shapes), "isf": getattr(st, dist).sf(x, *shapes)}.get(
                meth, loc + scale * x)
            for i in range(len(shapes)):
                ref = _in_shape(getattr(getattr(st, dist), meth), arg, shapes, i, loc, scale)
                ours = _in_shape(getattr(getattr(mst, dist), meth), arg, shapes, i, loc, scale)
                h = 1e-6 * shapes[i]
                want = (ref(shapes[i] + h) - ref(shapes[i] - h)) / (2 * h)
                assert mg.grad(ours)(shapes[i]) == pytest.approx(want, rel=1e-5, abs=1e-10), (meth, i)
                assert mg.jvp(ours, (shapes[i],), (1.0,))[1] == pytest.approx(want, rel=1e-5, abs=1e-10), (meth, i)


def test_count_distributions_cumulative_functions_in_n():
    # nbinom's n is real (SciPy's own central differences); binom's is a count, SciPy's cdf NaN between, and its
    # derivative that of the formula, betainc(n - k, k + 1, 1 - p): the sum over j <= k of the pmf's
    # d/dn C(n, j) p^j (1-p)^(n-j) = pmf (ψ(n+1) - ψ(n-j+1) + log(1-p)), by SciPy's functions
    import scipy.special as ssp

    for k, n, p in ((3, 2.5, 0.4), (0, 0.7, 0.2), (12, 5.0, 0.6)):
        for meth in ("cdf", "sf", "logcdf", "logsf"):
            f, ours = (lambda n, d=d, meth=meth, k=k, p=p: getattr(d.nbinom, meth)(k, n, p) for d in (st, mst))
            want = (f(n + 1e-6) - f(n - 1e-6)) / 2e-6
            for got in (mg.grad(ours)(n), mg.jvp(ours, (n,), (1.0,))[1]):
                assert got == pytest.approx(want, rel=1e-6), (k, n, p, meth)
    for k, n, p in ((3, 10.0, 0.4), (0, 4.0, 0.7), (6, 7.0, 0.2)):
        j = np.arange(k + 1)
        pmf = st.binom.pmf(j, n, p)
        want = np.sum(pmf * (ssp.digamma(n + 1) - ssp.digamma(n - j + 1) + np.log1p(-p)))
        assert mg.grad(lambda n, k=k, p=p: mst.binom.cdf(k, n, p))(n) == pytest.approx(want, rel=1e-10)
        assert mg.grad(lambda n, k=k, p=p: mst.binom.sf(k, n, p))(n) == pytest.approx(-want, rel=1e-10)
    # their second derivative in n: not implemented, in p it is there
    h = mg.hessian(lambda n: mst.nbinom.cdf(3, n, 0.4))(2.5)
    assert isinstance(h, mg.NotImplementedTangent) and "second derivative of scipy.special.betainc" in h.message
    assert np.isfinite(mg.hessian(lambda p: mst.nbinom.cdf(3, 2.5, p))(0.4))


def test_other_names_fall_back_to_scipy():
    assert mst.ttest_ind is st.ttest_ind
    np.testing.assert_array_equal(mst.norm.rvs(size=2, random_state=0), st.norm.rvs(size=2, random_state=0))
    assert mst.norm(1.0, 2.0).mean() == 1.0


def test_t_logpdf_for_large_and_infinite_df_matches_scipy():
    # the log normalizer cancelled for large df (+1.91 instead of -1.16 at 1e15); df = inf is normal
    for df in (3.0, 1e10, 1e14, 1e15, np.inf):
        np.testing.assert_allclose(mst.t.logpdf(0.7, df), st.t.logpdf(0.7, df), rtol=1e-13)
    np.testing.assert_allclose(mg.grad(lambda z: mst.t.logpdf(z, np.inf))(0.7), -0.7, rtol=1e-15)


def test_multivariate_normal_allow_singular_matches_scipy():
    a, mu = R(3, 2), R(3)
    cov = a @ a.T
    inside = mu + R(5, 2) @ a.T  # in the support mean + range(cov)
    x = np.concatenate([inside, mu + np.ones((1, 3))])  # the last one off it: -inf, pdf 0
    for frozen in (False, True):
        for meth in ("logpdf", "pdf"):
            ours = (getattr(mst.multivariate_normal(mu, cov, allow_singular=True), meth)(x) if frozen
                    else getattr(mst.multivariate_normal, meth)(x, mu, cov, allow_singular=True))
            ref = getattr(st.multivariate_normal, meth)(x, mu, cov, allow_singular=True)
            np.testing.assert_allclose(ours, ref, rtol=1e-12, err_msg=meth)
    assert mst.multivariate_normal.logpdf(x[-1], mu, cov, allow_singular=True) == -np.inf
    for cov1 in (np.array([1.0, 0.0, 2.0]), np.diag([3.0, 1e-14, 1.0])):  # a zero and a below-cutoff eigenvalue
        np.testing.assert_allclose(mst.multivariate_normal.logpdf(x[0] * [1, 0, 1], np.zeros(3), cov1, allow_singular=True),
                                   st.multivariate_normal.logpdf(x[0] * [1, 0, 1], np.zeros(3), cov1, allow_singular=True),
                                   rtol=1e-12)


def test_multivariate_normal_singular_errors_as_scipy():
    cov = np.diag([1.0, 1e-14, 1.0])  # below SciPy's cutoff: singular
    with pytest.raises(np.linalg.LinAlgError, match="allow_singular"):
        mst.multivariate_normal.logpdf(np.zeros(3), np.zeros(3), cov)
    with pytest.raises(ValueError, match="positive semidefinite"):
        mst.multivariate_normal.logpdf(np.zeros(3), np.zeros(3), -np.eye(3), allow_singular=True)


def test_multivariate_normal_allow_singular_gradients_closed_form():
    # on the support: d/dx = -C⁺ (x - mu); d/dC (constant rank, x - mu in range(C)) = -(C⁺ - C⁺ r rᵀ C⁺)/2
    a, mu = R(3, 2), R(3)
    cov = a @ a.T
    x = mu + a @ R(2)
    pinv, r = np.linalg.pinv(cov), x - mu
    gx, gmu, gc = mg.grad(lambda x, mu, c: mst.multivariate_normal.logpdf(x, mu, c, allow_singular=True),
                          argnums=(0, 1, 2))(x, mu, cov)
    np.testing.assert_allclose(gx, -pinv @ r, rtol=1e-9)
    np.testing.assert_allclose(gmu, pinv @ r, rtol=1e-9)
    sym = -0.5 * (pinv - pinv @ np.outer(r, r) @ pinv)
    # SciPy's function reads the lower triangle of C: each entry below the diagonal stands for both
    np.testing.assert_allclose(gc, np.tril(sym) + np.tril(sym, -1), rtol=1e-9, atol=1e-12)
    # off the support the value is a constant -inf: zero gradient, not nan
    g = mg.grad(lambda x: mst.multivariate_normal.logpdf(x, mu, cov, allow_singular=True))(mu + np.ones(3))
    np.testing.assert_array_equal(g, np.zeros(3))


@pytest.mark.parametrize("method", ["logpdf", "pdf"])
def test_multivariate_normal_reads_the_lower_triangle_of_cov_as_scipy_does(method):
    # SciPy's eigh reads the lower triangle only: its function of C does not change with C[0, 1];
    # mutagrad's read both triangles (gradient -0.33 for both entries, SciPy's 0 and -0.67)
    m = np.array([0.3, -1.0])
    C = np.array([[2.0, 0.3], [0.3, 1.0]])
    x = np.array([[0.1, 0.2], [1.0, -2.0]])

    def f_sp(C):
        return np.sum(getattr(st.multivariate_normal, method)(x, m, C))

    def f_mg(C):
        return np.sum(getattr(mst.multivariate_normal, method)(x, m, C))

    h = 1e-6
    fd = np.zeros((2, 2))
    for i in range(2):
        for j in range(2):
            E = np.zeros((2, 2))
            E[i, j] = h
            fd[i, j] = (f_sp(C + E) - f_sp(C - E)) / (2 * h)
    assert fd[0, 1] == 0.0
    np.testing.assert_allclose(mg.grad(f_mg)(C), fd, rtol=1e-6, atol=1e-10)
    upper = C.copy()
    upper[0, 1] = 5.0  # not symmetric: SciPy's value ignores it
    assert f_mg(upper) == pytest.approx(f_sp(upper), rel=1e-12)


def test_second_derivatives_of_log_tail_probabilities_far_in_the_tail():
    # log cdf ~ -360: the chain rule's 1/c then -y/c (true_divide's partial w.r.t. its
    # denominator) overflowed to inf, where the derivative is finite; computed as quotients now
    # (the MLE tester's censored likelihoods). Oracles: closed forms without the tail
    # poisson: log P(K <= 3; mu) = -mu + log(1 + mu + mu^2/2 + mu^3/6)
    mu = 380.0
    P = np.array([1.0 / 6, 0.5, 1.0, 1.0])  # coefficients of mu^3 .. mu^0
    p, dp, ddp = np.polyval(P, mu), np.polyval(np.polyder(P), mu), np.polyval(np.polyder(P, 2), mu)
    want = (ddp * p - dp * dp) / (p * p)

    def f(v):
        return mst.poisson.logcdf(3.0, v[0])

    with np.errstate(all="ignore"):
        np.testing.assert_allclose(mg.hessian(f)(np.array([mu])), [[want]], rtol=1e-6)
        np.testing.assert_allclose(mg.jacobian(mg.grad(f), mode="rev")(np.array([mu])), [[want]], rtol=1e-6)
        # gamma(a=2): log sf = -x + log(1 + x), second derivative -1 / (1 + x)^2
        x = 500.0
        np.testing.assert_allclose(mg.hessian(lambda v: mst.gamma.logsf(v[0], 2.0))(np.array([x])),
                                   [[-1 / (1 + x) ** 2]], rtol=1e-6)
        # log(c) of a tiny c: d²/dc² log(c * s) at s = 1 is -1/s² = -1, through 1/(c s) (1e316 squared)
        c = 1e-158
        np.testing.assert_allclose(mg.hessian(lambda v: np.log(c * v[0]))(np.array([1.0])), [[-1.0]], rtol=1e-12)


def test_nbinom_logcdf_near_one_is_scipys():
    # SciPy computes log1p(-sf) where the cdf is above 1/2; log(cdf) lost the digits there
    k = np.array([-1.0, 0.0, 2.5, 12.0, 20.0, 30.0])
    with np.errstate(divide="ignore"):
        np.testing.assert_allclose(mst.nbinom.logcdf(k, 2.5, 0.85), st.nbinom.logcdf(k, 2.5, 0.85), rtol=1e-12)
    check_grads(lambda p: mst.nbinom.logcdf(np.array([0.0, 3.0, 12.0]), 2.5, p), np.array([0.3, 0.85, 0.6]))


def test_count_pmfs_at_the_ends_of_their_parameters():
    # (the popgen tester) pmf = exp(logpmf) had derivative 0 * inf -> 0 where a base is 0: binom at p = 0 or 1,
    # poisson at mu = 0, nbinom at p = 1. By hand: d/dp C(n,k) p^k (1-p)^(n-k) at p = 0 is n for k = 1,
    # d2/dp2 is n (n - 1) for k = 2; at p = 1, -n for k = n - 1; d/dmu mu e^-mu at 0 is 1; d/dp 3 p^3 (1-p)
    # at p = 1 is -3
    import scipy.stats as ss

    n = 10
    assert mg.grad(lambda p: mst.binom.pmf(1, n, p))(0.0) == pytest.approx(10.0, rel=1e-14)
    assert mg.hessian(lambda p: mst.binom.pmf(2, n, p))(0.0) == pytest.approx(90.0, rel=1e-14)
    assert mg.grad(lambda p: mst.binom.pmf(n - 1, n, p))(1.0) == pytest.approx(-10.0, rel=1e-14)
    k = np.arange(n + 1)
    assert mg.grad(lambda p: np.sum(k * mst.binom.pmf(k, n, p)))(1.0) == pytest.approx(10.0, rel=1e-13)  # the mean np
    assert mg.jvp(lambda m: mst.poisson.pmf(1, m), (0.0,), (1.0,))[1] == pytest.approx(1.0, rel=1e-14)
    assert mg.grad(lambda p: mst.nbinom.pmf(1, 3, p))(1.0) == pytest.approx(-3.0, rel=1e-14)
    for p in (0.0, 1.0):  # (SciPy's values, bit for bit)
        np.testing.assert_array_equal(mg.vjp(lambda p: mst.binom.pmf(k, n, p), p)[0], ss.binom.pmf(k, n, p))
    np.testing.assert_array_equal(mg.vjp(lambda m: mst.poisson.pmf(k, m), 0.0)[0], ss.poisson.pmf(k, 0.0))


def test_t_logpdf_is_scipys_to_the_bit_and_its_df_derivative_exact_at_large_df():
    # (built on betaln, it was 1e-9 off SciPy's log poch between df = 1e5 and 1e6; poch's own
    # derivative in df cancels there, so the derivatives stay betaln's)
    import scipy.stats

    from mutagrad.scipy.stats import t

    z = np.array([0.0, 0.3, -2.0, 10.0])
    for df in np.logspace(-1, 15, 40):
        want = scipy.stats.t.logpdf(z, df)
        assert np.array_equal(t.logpdf(z, df), want)
        assert np.array_equal(mg.vjp(lambda z, df=df: t.logpdf(z, df), z.copy())[0], want)
        assert np.array_equal(mg.vjp(lambda d: t.logpdf(z, d), df)[0], want)
    # d/d df log t(0; df) = (psi((df + 1)/2) - psi(df/2))/2 - 1/(2 df) = 1/(4 df^2) + O(df^-3), by hand
    for df in (1e6, 1e8, 1e10):
        np.testing.assert_allclose(mg.grad(lambda d: t.logpdf(0.0, d))(df), 1 / (4 * df * df), rtol=1e-5)
    h = 1e-6
    for df in (0.7, 3.0, 40.0):
        fd = (scipy.stats.t.logpdf(0.3, df + h) - scipy.stats.t.logpdf(0.3, df - h)) / (2 * h)
        np.testing.assert_allclose(mg.grad(lambda d: t.logpdf(0.3, d))(df), fd, rtol=1e-6, atol=1e-8)
