"""The scipy.stats distributions beyond norm, t, gamma, beta, poisson and the
multivariate normal's density (mutagrad/rules/scipy/stats.py): values under
differentiation against SciPy's, derivatives in both modes against finite
differences, SciPy's conventions off the support and for invalid parameters."""
import itertools

import numpy as np
import pytest

st = pytest.importorskip("scipy.stats")

import mutagrad as mg
import mutagrad.scipy.stats as mst
from mutagrad.rules.scipy.stats import DISTRIBUTIONS
from mutagrad.testing import check_grads
from tests.rules import test_scipy_stats
from tests.rules._draws import Draws

_draws = Draws(1)
R, P, U01, SPD = _draws.R, _draws.P, _draws.U01, _draws.SPD

LOC, SCALE = R(3) * 0.3, P(3)


def m(dist, method):
    return getattr(getattr(mst, dist), method)


# name -> (standardized points inside the support (away from laplace's kink at 0),
#          shape parameters for the derivative checks, one standardized point off the support or None)
NEW = {
    "expon": (P(3), (), -0.5),
    "laplace": (np.array([-1.2, 0.4, 1.7]), (), None),
    "cauchy": (R(3) * 2, (), None),
    "logistic": (R(3) * 2, (), None),
    "uniform": (U01(3), (), 1.5),
    "chi2": (P(3) * 2, (P(3) + 1,), -0.5),
    "lognorm": (P(3), (P(3) * 0.5 + 0.3,), -0.5),
    "weibull_min": (P(3), (P(3) + 0.5,), -0.5),
    "gumbel_r": (R(3), (), None),
    "halfnorm": (P(3), (), -0.5),
    "f": (P(3), (P(3) + 1, P(3) + 3), -0.5),
}


def _q(name):
    # laplace's quantile has a kink at 1/2
    return np.array([0.1, 0.3, 0.8]) if name == "laplace" else U01(3)


def _fixed_shapes(name, meth, shapes):
    """The method as a function of x, loc and scale only."""
    def fn(x, loc, scale):
        return m(name, meth)(x, *shapes, loc, scale)

    return fn


def _keywords(name, meth):
    """The method with loc and scale passed as keywords."""
    def fn(x, *args):
        return m(name, meth)(x, *args[:-2], scale=args[-1], loc=args[-2])

    return fn


def _frozen_logpdf(name, shapes):
    def fn(x):
        return getattr(mst, name)(*shapes).logpdf(x)

    return fn


def _cases(name):
    z, shapes, off = NEW[name]
    dist = getattr(mst, name)
    x = LOC + SCALE * z
    cases = []
    for meth in dist.METHODS:
        covers = f"scipy.stats.{name}.{meth}"
        arg = _q(name) if meth in ("ppf", "isf") else x
        order = 2 if meth in ("logpdf", "cdf", "ppf") else 1
        # w.r.t. the shape parameters too (to first order only where their second derivative is missing)
        if meth in dist.SHAPE_SECOND_DERIVATIVE_NOT_IMPLEMENTED:
            cases.append((covers, _fixed_shapes(name, meth, shapes), (arg, LOC, SCALE), order))
            order = 1
        cases.append((covers, m(name, meth), (arg, *shapes, LOC, SCALE), order))
        cases.append((covers, _keywords(name, meth), (arg, *shapes, LOC, SCALE), 1))
    if off is not None:  # a point off the support: density 0, cdf 0, sf 1, zero derivatives there
        xo = np.append(x, LOC[0] + SCALE[0] * off)
        for meth in ("pdf", "cdf", "sf"):
            fn = _fixed_shapes(name, meth, [v[0] for v in shapes])
            cases.append((f"scipy.stats.{name}.{meth}", fn, (xo, LOC[0], SCALE[0]), 1))
    cases.append((f"scipy.stats.{name}.logpdf", _frozen_logpdf(name, shapes), (z,), 1))
    return cases


SIMPLEX3 = np.array([0.2, 0.3, 0.5])
ALPHA3 = P(3) + 0.5

# (covers, function, args, order): covers names the SciPy method
CASES = [
    *[c for name in NEW for c in _cases(name)],
    ("scipy.stats.gamma.ppf", lambda q, loc, s: mst.gamma.ppf(q, 2.5, loc, s), (U01(3), R(3), P(3)), 2),
    ("scipy.stats.gamma.ppf", lambda q, s: mst.gamma.ppf(q, ALPHA3, scale=s), (U01(3), P(3)), 1),
    ("scipy.stats.gamma.isf", lambda q, loc, s: mst.gamma.isf(q, 2.5, loc, s), (U01(3), R(3), P(3)), 2),
    # (beta by inversion, in the probability, loc and scale: the bayesvi tester; in its shapes: test_scipy_stats.py)
    ("scipy.stats.beta.ppf", lambda q, loc, s: mst.beta.ppf(q, 2.5, 1.7, loc, s), (U01(3), R(3), P(3)), 2),
    ("scipy.stats.beta.isf", lambda q, loc, s: mst.beta.isf(q, 2.5, 1.7, loc, s), (U01(3), R(3), P(3)), 2),
    # dirichlet: x without its last component (1 - sum), so that x stays on the simplex
    ("scipy.stats.dirichlet.logpdf", lambda x, a: mst.dirichlet.logpdf(x, a), (SIMPLEX3[:2], ALPHA3), 2),
    ("scipy.stats.dirichlet.logpdf", lambda a: mst.dirichlet.logpdf(SIMPLEX3, a), (ALPHA3,), 2),
    ("scipy.stats.dirichlet.logpdf", lambda x, a: mst.dirichlet(a).logpdf(x), (np.array([[0.2, 0.6], [0.3, 0.1]]), ALPHA3), 1),
    ("scipy.stats.dirichlet.pdf", lambda x, a: mst.dirichlet.pdf(x, a), (SIMPLEX3[:2], ALPHA3), 1),
    # multivariate normal entropy: w.r.t. cov, full and of constant rank 2 in 3-d
    ("scipy.stats.multivariate_normal.entropy", lambda c: mst.multivariate_normal.entropy(cov=c), (SPD(3),), 2),
    ("scipy.stats.multivariate_normal.entropy", lambda c: mst.multivariate_normal.entropy(np.zeros(3), c), (P(3),), 1),
    ("scipy.stats.multivariate_normal.entropy", lambda c: mst.multivariate_normal(np.zeros(2), c).entropy(), (SPD(2),), 1),
    ("scipy.stats.multivariate_normal.entropy", lambda a: mst.multivariate_normal.entropy(cov=a @ a.T), (R(3, 2),), 1),  # (singular: first order)
]


@pytest.mark.parametrize("covers,fn,args,order", CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_rule(covers, fn, args, order):
    check_grads(fn, *args, modes=("fwd", "rev"), order=order)


def test_every_distribution_method_has_a_case():
    covered = {c[0] for c in CASES} | {c[0] for c in test_scipy_stats.CASES}
    names = {f"scipy.stats.{d.name}.{meth}" for d in DISTRIBUTIONS for meth in d.METHODS}
    missing = sorted(names - covered)
    assert not missing, f"distribution methods without a test case: {missing}"


# name -> parameter sets (shapes, then loc and scale) for the comparisons with SciPy
PARAMS = {
    "expon": [(), (0.3, 1.5)], "laplace": [(), (0.3, 1.5)], "cauchy": [(), (0.3, 1.5)], "logistic": [(), (0.3, 1.5)],
    "uniform": [(), (-1.0, 2.5)], "chi2": [(3.5,), (2.0,), (0.7, 0.2, 1.3)], "lognorm": [(0.6,), (1.4, -0.5, 2.0)],
    "weibull_min": [(1.7,), (1.0,), (0.6, 0.2, 1.5)], "gumbel_r": [(), (0.3, 1.5)], "halfnorm": [(), (-0.5, 2.0)],
    "f": [(2.5, 3.5), (2.0, 5.0), (1.0, 7.0, 0.1, 1.2)], "gamma": [(2.5, -1.0, 1.5), (1.0,)],
}
# standardized points: off the support, its ends, inside
Z = np.array([-2.0, 0.0, 0.3, 0.75, 1.0, 2.7])
QS = np.array([-0.1, 0.0, 0.001, 0.2, 0.5, 0.9, 1.0, 1.5])


def _value_and_grad_each(fn, points, params, nums):
    """fn(point, *params) and its gradient w.r.t. the arguments ``nums``, one point at a time."""
    values, grads = [], []
    for p in points:
        v, g = mg.value_and_grad(fn, argnums=nums)(float(p), *map(float, params))
        values.append(v)
        grads.append(g)
    return np.array(values), grads


@pytest.mark.parametrize("name", sorted(PARAMS))
def test_values_under_differentiation_match_scipy(name):
    dist, ref_dist = getattr(mst, name), getattr(st, name)
    for params in PARAMS[name]:
        nshape = len(dist.shapes)
        loc, scale = (params[nshape:] + (0.0, 1.0))[:2]
        for meth in dist.METHODS:
            points = QS if meth in ("ppf", "isf") else loc + scale * Z
            nums = tuple(range(1 + len(params)))
            values, grads = _value_and_grad_each(getattr(dist, meth), points, params, nums)
            with np.errstate(all="ignore"):
                ref = getattr(ref_dist, meth)(points, *params)
            np.testing.assert_allclose(values, ref, rtol=1e-12, atol=0, err_msg=f"{name}{params}.{meth}")
            for p, v, g in zip(points, values, grads):
                # no NaN reaches a derivative, off the support too; an infinite density at an end of
                # the support (chi2 with df < 2 at 0) has none (an inf cotangent meets partials of both signs)
                assert v == np.inf or not np.isnan(np.asarray(g, dtype=float)).any(), (name, params, meth, p, v, g)
            with np.errstate(all="ignore"):
                ref = getattr(ref_dist(*params), meth)(points)
            np.testing.assert_allclose(getattr(dist(*params), meth)(points), ref, rtol=1e-12, atol=0,
                                       err_msg=f"frozen {name}{params}.{meth}")


def test_derivatives_off_the_support_are_zero():
    # the value there is a constant (-inf, 0 or 1): its derivative is 0, not NaN
    for name in ("expon", "uniform", "chi2", "lognorm", "weibull_min", "halfnorm", "f"):
        shapes = tuple(float(s[0]) for s in NEW[name][1])
        for meth in ("logpdf", "pdf", "cdf", "logcdf", "sf", "logsf"):
            g = mg.grad(getattr(getattr(mst, name), meth), argnums=(0, 1 + len(shapes), 2 + len(shapes)))(
                -0.5, *shapes, 0.0, 1.0)
            assert g == (0.0, 0.0, 0.0), (name, meth, g)
    assert mg.grad(lambda x: mst.uniform.cdf(x, 0.0, 2.0))(2.5) == 0.0


def test_invalid_parameters_give_nan_as_scipy():
    x = np.array([-1.0, 0.5, 2.0, np.nan])
    for name, params in [("expon", (0.0, 0.0)), ("laplace", (0.0, -1.0)), ("chi2", (-1.0,)), ("lognorm", (0.0,)),
                         ("weibull_min", (np.nan,)), ("f", (1.0, 0.0)), ("uniform", (0.0, -1.0)),
                         ("chi2", (np.array([1.0, -1.0, 2.0, 3.0]),)), ("gamma", (0.0,)), ("t", (-1.0,))]:
        for meth in getattr(mst, name).METHODS:
            arg = np.array([0.2, 0.5, 0.0, 1.0]) if meth in ("ppf", "isf") else x
            with np.errstate(all="ignore"):
                ref = getattr(getattr(st, name), meth)(arg, *params)
            np.testing.assert_array_equal(getattr(getattr(mst, name), meth)(arg, *params), ref, err_msg=f"{name}.{meth}")


def test_tails_where_scipy_uses_log1p():
    # SciPy's logcdf is log1p(-sf) over the median, logsf log1p(-cdf) under it (not log(cdf) = 0)
    for name, params, x in [("expon", (), 40.0), ("weibull_min", (1.7,), 40.0), ("chi2", (3.5,), 60.0),
                            ("gumbel_r", (), -3.0), ("cauchy", (), 1e6), ("f", (2.5, 3.5), 1e5)]:
        for meth in ("logcdf", "logsf"):
            ref = getattr(getattr(st, name), meth)(x, *params)
            np.testing.assert_allclose(getattr(getattr(mst, name), meth)(x, *params), ref, rtol=1e-12, err_msg=name)
    assert mst.expon.logcdf(40.0) < 0
    # halfnorm's logsf as log(2) + log_ndtr(-x): finite where SciPy's log(2 ndtr(-x)) underflows
    np.testing.assert_allclose(mst.halfnorm.logsf(40.0), np.log(2) + st.norm.logsf(40.0), rtol=1e-14)
    # float32 arguments: SciPy computes z = (x - loc) / scale in the operands' dtypes, then in float64 at
    # least; its ppf multiplies _ppf(q) by scale in theirs; Python numbers are float64 (or int64) to it:
    # the same dtypes and values to rounding (float32 results, 1e-8 off, before), every dtype combination
    for dx, dp in itertools.product((np.float32, np.float64), (float, np.float32, np.float64)):
        x, q = np.array([0.2, 0.5, 0.7], dx), np.array([0.1, 0.5, 0.9], dx)
        loc, scale = (0.1, 1.3) if dp is float else (dp(0.1), np.array(1.3, dp))
        for name, params in (("norm", ()), ("lognorm", (0.5,)), ("gamma", (2.0,)), ("t", (3.0,)), ("expon", ()),
                             ("uniform", ()), ("halfnorm", ()), ("weibull_min", (1.7,)), ("beta", (2.0, 3.0))):
            for meth in getattr(mst, name).METHODS:
                arg = q if meth in ("ppf", "isf") else x
                want = getattr(getattr(st, name), meth)(arg, *params, loc=loc, scale=scale)
                got = getattr(getattr(mst, name), meth)(arg, *params, loc=loc, scale=scale)
                assert np.asarray(got).dtype == want.dtype, (name, meth, dx, dp)
                np.testing.assert_allclose(got, want, rtol=1e-13, err_msg=f"{name}.{meth} {dx} {dp}")
    # a traced Python float beside a float32 parameter is float64, as SciPy's np.asarray makes it (it was
    # weak: float32 arithmetic, 1e-8 off); float32 counts give float64 results; a bool p is a number
    f = lambda x: mst.norm.cdf(x, loc=np.float32(0.1), scale=2.0)
    v, g = mg.value_and_grad(f)(0.3)
    assert v == st.norm.cdf(0.3, loc=np.float32(0.1), scale=2.0)
    np.testing.assert_allclose(g, st.norm.pdf(0.3, loc=np.float32(0.1), scale=2.0), rtol=1e-15)  # (the density)
    want = st.poisson.pmf(np.float32(2), np.float32(2.5), loc=np.float32(1))
    got = mst.poisson.pmf(np.float32(2), np.float32(2.5), loc=np.float32(1))
    assert np.asarray(got).dtype == np.float64 and np.asarray(want).dtype == np.float64
    assert mst.nbinom.pmf(2, 3, True) == st.nbinom.pmf(2, 3, True)
    for dk in (np.float32, np.float64, np.int64):
        k = np.array([0, 2, 5], dk)
        for name, params in (("poisson", (2.5,)), ("binom", (10, 0.3)), ("nbinom", (4, 0.6))):
            for meth in getattr(mst, name).METHODS:
                want, got = getattr(getattr(st, name), meth)(k, *params), getattr(getattr(mst, name), meth)(k, *params)
                assert np.asarray(got).dtype == want.dtype, (name, meth, dk)
                np.testing.assert_allclose(got, want, rtol=1e-13, err_msg=f"{name}.{meth} {dk}")
    # a scipy.stats.Covariance object: the matrix it stands for (TypeError before); d/dmean of the
    # summed logpdf with a diagonal covariance is sum((x - mean) / d) over the samples, by hand
    X, m, d = np.array([[0.5, 1.0], [1.0, -0.5]]), np.array([0.1, 0.2]), np.array([1.5, 2.0])
    for cov in (st.Covariance.from_diagonal(d), st.Covariance.from_cholesky(np.diag(np.sqrt(d)))):
        np.testing.assert_allclose(mst.multivariate_normal.logpdf(X, m, cov), st.multivariate_normal.logpdf(X, m, cov),
                                   rtol=1e-14)
        np.testing.assert_allclose(mg.grad(lambda m, cov=cov: np.sum(mst.multivariate_normal.logpdf(X, m, cov)))(m),
                                   np.sum((X - m) / d, axis=0), rtol=1e-14)
    # from_cholesky reads the factor's lower triangle only (SciPy's triangular solves); singular
    # Covariance objects as SciPy takes them (-inf off the support)
    X3 = np.array([[0.5, 1.0, 0.2], [1.0, -0.5, 0.0]])
    L = np.array([[1.0, 0.7, 0.0], [0.5, 2.0, 0.3], [0.1, 0.2, 1.5]])
    for cov in (st.Covariance.from_cholesky(L), st.Covariance.from_diagonal([1.0, 2.0, 0.0]),
                st.Covariance.from_eigendecomposition((np.array([1.0, 2.0, 0.0]), np.eye(3)))):
        np.testing.assert_allclose(mst.multivariate_normal.logpdf(X3, np.zeros(3), cov),
                                   st.multivariate_normal.logpdf(X3, np.zeros(3), cov), rtol=1e-14)

    def chol_loss(L):
        return np.sum(mst.multivariate_normal.logpdf(X3, np.zeros(3), st.Covariance.from_cholesky(L)))

    def scipy_loss(L):
        return np.sum(st.multivariate_normal.logpdf(X3, np.zeros(3), st.Covariance.from_cholesky(L)))

    fd = np.zeros((3, 3))
    for k in np.ndindex(3, 3):
        e = np.zeros((3, 3))
        e[k] = 1e-6
        fd[k] = (scipy_loss(L + e) - scipy_loss(L - e)) / 2e-6
    np.testing.assert_allclose(mg.grad(chol_loss)(L), fd, rtol=1e-6, atol=1e-9)  # (0 above the diagonal)
    # from_precision(P) of a traced P (TracerEscapeError before: SciPy's covariance property solves with
    # plain LAPACK): P's lower triangle only, as SciPy's Cholesky factor reads it; the same value
    P = np.array([[2.0, 0.3, 0.1], [0.25, 1.5, -0.2], [0.05, -0.3, 1.2]])

    C = np.linalg.inv(P)  # (given with P, SciPy's densities still read P: a zero gradient before, regress39)
    for given in ((), (C,)):
        def prec_loss(P, mvn=mst.multivariate_normal, given=given):
            return np.sum(mvn.logpdf(X3, np.zeros(3), st.Covariance.from_precision(P, *given)))

        fd = np.zeros((3, 3))
        for k in np.ndindex(3, 3):
            e = np.zeros((3, 3))
            e[k] = 1e-6
            fd[k] = (prec_loss(P + e, st.multivariate_normal) - prec_loss(P - e, st.multivariate_normal)) / 2e-6
        np.testing.assert_allclose(mg.grad(prec_loss)(P), fd, rtol=1e-6, atol=1e-9)
        np.testing.assert_allclose(prec_loss(P), prec_loss(P, st.multivariate_normal), rtol=1e-14)
    # and its digits near 0, where log(2) + log_ndtr(-x) cancels (7e-7 relative at 1e-10): the series
    # log(erfc(x / sqrt 2)) = -sqrt(2/pi) x - x^2/pi + O(x^3), and its derivative -sqrt(2/pi) - 2x/pi
    for x in (1e-12, 1e-10, 1e-7):
        np.testing.assert_allclose(mst.halfnorm.logsf(x), -np.sqrt(2 / np.pi) * x - x * x / np.pi, rtol=1e-14)
        np.testing.assert_allclose(mg.grad(mst.halfnorm.logsf)(x), -np.sqrt(2 / np.pi) - 2 * x / np.pi, rtol=1e-14)
    # cauchy's quantile near 0 and 1 (cot of an exact argument), as SciPy's
    q = np.array([1e-10, 0.1, 0.25, 0.5, 0.75, 0.9, 1 - 1e-10])
    np.testing.assert_allclose(mst.cauchy.ppf(q), st.cauchy.ppf(q), rtol=1e-12, atol=1e-300)


def test_gradients_closed_form():
    # d/dx log Laplace = -sign(x - loc) / scale; d/dscale = -1/s + |x - loc|/s**2
    g = mg.grad(mst.laplace.logpdf, argnums=(0, 1, 2))(2.0, 0.5, 1.5)
    np.testing.assert_allclose(g, (-1 / 1.5, 1 / 1.5, -1 / 1.5 + 1.5 / 1.5 ** 2))
    # d/dx cdf = pdf (SciPy's), for every distribution
    for name, params in [("expon", (0.2, 1.3)), ("cauchy", (0.2, 1.3)), ("chi2", (3.5,)), ("lognorm", (0.6,)),
                         ("weibull_min", (1.7,)), ("gumbel_r", ()), ("halfnorm", ()), ("f", (2.5, 3.5)),
                         ("logistic", ()), ("uniform", (0.0, 2.0)), ("laplace", ()), ("t", (4.0,)), ("t", (1.0,))]:
        for x in (0.7, 1.9):
            dist, ref = getattr(mst, name), getattr(st, name)
            np.testing.assert_allclose(mg.grad(dist.cdf)(x, *params), ref.pdf(x, *params), rtol=1e-10, err_msg=name)
            np.testing.assert_allclose(mg.grad(dist.sf)(x, *params), -ref.pdf(x, *params), rtol=1e-10, err_msg=name)
            if "ppf" in dist.METHODS:  # the quantile's derivative is 1 / pdf
                q = ref.cdf(x, *params)
                np.testing.assert_allclose(mg.grad(dist.ppf)(q, *params), 1 / ref.pdf(x, *params), rtol=1e-8,
                                           err_msg=name)
    # second order: d²/dx² log logistic = -2 pdf(x) at x = loc (the sign of x - loc is 0 there)
    np.testing.assert_allclose(mg.hessian(mst.logistic.logpdf)(0.0), -0.5, rtol=1e-14)


def test_every_first_shape_derivative_is_implemented():
    for dist in DISTRIBUTIONS:
        if not dist.shapes or dist.name in ("poisson",):
            continue
        shapes = [2.5] * len(dist.shapes)
        for meth in dist.METHODS:
            method, arg = getattr(dist, meth), (0.3 if meth in ("ppf", "isf") else 0.7)
            g = mg.grad(method, argnums=1)(arg, *shapes)
            assert not isinstance(g, mg.NotImplementedTangent), (dist.name, meth, g)  # (the values: the cases above)


def test_second_shape_derivatives_not_implemented_where_declared():
    # SHAPE_SECOND_DERIVATIVE_NOT_IMPLEMENTED: the methods whose second derivative w.r.t. a shape (those
    # SHAPES_NOT_DIFFERENTIATED names, if the class says) is a NotImplementedTangent; the others' is a number
    # (gamma's and chi2's incomplete gamma function in a, t's, beta's, f's, nbinom's and binom's incomplete beta
    # function in its shapes: their first derivatives are the tests above and test_scipy_stats.py's)
    valid = {"binom": [10.0, 0.3], "nbinom": [2.5, 0.3]}
    for dist in DISTRIBUTIONS:
        refused = getattr(dist, "SHAPES_NOT_DIFFERENTIATED", dist.shapes)
        for meth in dist.METHODS:
            method, arg = getattr(dist, meth), (0.3 if meth in ("ppf", "isf") else 0.7)
            for i, name in enumerate(dist.shapes):
                shapes = valid.get(dist.name, [2.5] * len(dist.shapes))
                h = mg.hessian(lambda v, f=method, a=arg, s=shapes, i=i: f(a, *s[:i], v, *s[i + 1:]))(shapes[i])
                declared = meth in dist.SHAPE_SECOND_DERIVATIVE_NOT_IMPLEMENTED and name in refused
                assert isinstance(h, mg.NotImplementedTangent) == declared, (dist.name, meth, name, h)
                assert declared or np.isfinite(h), (dist.name, meth, name, h)


def test_dirichlet_matches_scipy():
    alpha = np.array([0.7, 2.0, 3.5])
    for x in (SIMPLEX3, SIMPLEX3[:2], np.array([[0.2, 0.6], [0.3, 0.1], [0.5, 0.3]]), np.array([[0.2, 0.6], [0.3, 0.1]])):
        for meth in ("logpdf", "pdf"):
            ours = getattr(mst.dirichlet, meth)(x, alpha)
            np.testing.assert_allclose(ours, getattr(st.dirichlet, meth)(x, alpha), rtol=1e-12)
            assert np.ndim(ours) == np.ndim(getattr(st.dirichlet, meth)(x, alpha))
        np.testing.assert_allclose(mst.dirichlet(alpha).logpdf(x), st.dirichlet(alpha).logpdf(x), rtol=1e-12)
    # a zero component with alpha >= 1: SciPy's value (-inf where alpha > 1)
    x0 = np.array([0.4, 0.0, 0.6])
    np.testing.assert_allclose(mst.dirichlet.logpdf(x0, alpha), st.dirichlet.logpdf(x0, alpha))
    # d/dx of the free components: (a_i - 1)/x_i - (a_K - 1)/x_K; d/dalpha: log x - psi(a) + psi(sum a)
    from scipy.special import digamma

    gx, ga = mg.grad(mst.dirichlet.logpdf, argnums=(0, 1))(SIMPLEX3[:2], alpha)
    np.testing.assert_allclose(gx, (alpha[:2] - 1) / SIMPLEX3[:2] - (alpha[2] - 1) / SIMPLEX3[2], rtol=1e-12)
    np.testing.assert_allclose(ga, np.log(SIMPLEX3) - digamma(alpha) + digamma(alpha.sum()), rtol=1e-12)


@pytest.mark.parametrize("x,alpha", [
    (SIMPLEX3, np.array([1.0, 0.0, 2.0])),  # alpha <= 0
    (SIMPLEX3, np.ones((3, 1))),  # alpha not a vector
    (np.array([0.5, 0.5]), np.ones(4)),  # too few components
    (np.array([0.5, 0.7, -0.2]), np.ones(3)),  # negative
    (np.array([1.5, -0.5]), np.ones(2)),  # negative, before greater than 1
    (np.array([0.0, 1.0]), np.array([0.5, 2.0])),  # zero where alpha < 1
    (np.array([0.2, 0.3, 0.4]), np.ones(3)),  # off the simplex
    (np.full((1, 2, 2), 0.2), np.ones(2)),  # three dimensions, completed
])
def test_dirichlet_argument_errors_are_scipys(x, alpha):
    with pytest.raises(ValueError) as theirs:
        st.dirichlet.logpdf(x, alpha)
    with pytest.raises(ValueError) as ours:
        mst.dirichlet.logpdf(x, alpha)
    assert str(ours.value) == str(theirs.value)
    with pytest.raises(ValueError, match=str(theirs.value)[:20]):
        mg.grad(lambda a: mst.dirichlet.logpdf(x, a))(alpha * 1.0)


def test_multivariate_normal_entropy_matches_scipy():
    cov, a = SPD(3), R(3, 2)
    for args in ((None, cov), (np.zeros(3), np.diag(cov)), (np.zeros(3), 2.0), (None, 2.0), (None, a @ a.T)):
        np.testing.assert_allclose(mst.multivariate_normal.entropy(*args), st.multivariate_normal.entropy(*args),
                                   rtol=1e-12)
    np.testing.assert_allclose(mst.multivariate_normal(np.zeros(3), cov).entropy(),
                               st.multivariate_normal(np.zeros(3), cov).entropy(), rtol=1e-12)
    np.testing.assert_allclose(mst.multivariate_normal(None, a @ a.T, allow_singular=True).entropy(),
                               st.multivariate_normal(None, a @ a.T, allow_singular=True).entropy(), rtol=1e-12)
    with pytest.raises(np.linalg.LinAlgError, match="allow_singular"):  # SciPy raises when freezing
        mst.multivariate_normal(None, a @ a.T).entropy()
    with pytest.raises(ValueError, match="positive semidefinite"):
        mst.multivariate_normal.entropy(cov=-np.eye(2))
    # d/dC (log det C)/2 = inv(C)/2; of a singular C (constant rank): pinv(C)/2. SciPy reads the
    # lower triangle of C: an entry below the diagonal stands for both, one above for none
    def lower(g):
        return np.tril(g) + np.tril(g, -1)

    np.testing.assert_allclose(mg.grad(lambda c: mst.multivariate_normal.entropy(cov=c))(cov),
                               lower(np.linalg.inv(cov) / 2), rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(mg.grad(lambda c: mst.multivariate_normal.entropy(cov=c))(a @ a.T),
                               lower(np.linalg.pinv(a @ a.T) / 2), rtol=1e-8, atol=1e-12)


def test_arguments_as_scipy_takes_them():
    # lists, keywords, frozen with keywords, broadcasting of parameters against x
    np.testing.assert_allclose(mst.chi2.logpdf([0.5, 1.5], df=[2.0, 3.0], scale=2.0),
                               st.chi2.logpdf([0.5, 1.5], df=[2.0, 3.0], scale=2.0), rtol=1e-12)
    np.testing.assert_allclose(mst.lognorm(s=0.5, loc=0.1).cdf(np.array([[0.5], [2.0]])),
                               st.lognorm(s=0.5, loc=0.1).cdf(np.array([[0.5], [2.0]])), rtol=1e-12)
    np.testing.assert_allclose(mst.f.sf(1.3, np.array([1.0, 2.0, 3.0]), 4.0), st.f.sf(1.3, np.array([1.0, 2.0, 3.0]), 4.0),
                               rtol=1e-12)
    with pytest.raises(TypeError, match="missing shape parameter 'c'"):
        mst.weibull_min.logpdf(1.0)
    # the methods mutagrad does not write are SciPy's
    assert mst.expon(scale=2.0).mean() == 2.0
    assert mst.f.ppf(0.5, 2.0, 3.0) == st.f.ppf(0.5, 2.0, 3.0)
