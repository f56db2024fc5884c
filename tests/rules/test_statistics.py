"""Statistics rules (mutagrad/rules/statistics.py): nan-reductions, order
statistics, differences, gradient, trapezoid, cov/corrcoef, histograms and the
reduce/accumulate methods of binary ufuncs, one line per case, checked in both
modes against finite differences. Inputs stay away from ties and kinks."""

import functools
import warnings

import numpy as np
import pytest

import mutagrad as mg
import mutagrad.numpy as mnp
from mutagrad.testing import check_grads, numerical_grad
from tests.rules._draws import Draws, assert_values_match_numpy  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore:All-NaN slice:RuntimeWarning")

_draws = Draws(1)
rng = _draws.rng
R, P = _draws.R, _draws.P


def NAN(*shape):  # with a NaN in every row but the last
    x = R(*shape)
    for i in range(shape[0] - 1):
        x[i, (i + 1) % shape[1]] = np.nan
    return x


def nonan(f):
    """f with NaN outputs zeroed: finite differences cannot pair with NaN."""
    def g(*a):
        r = f(*a)
        return np.where(np.isnan(r), 0.0, r)
    return g


X = R(3, 5)
XN = NAN(3, 5)
W = P(3, 5)
COORD = np.cumsum(P(5))
METHODS = ["linear", "lower", "higher", "nearest", "midpoint", "inverted_cdf", "averaged_inverted_cdf",
           "closest_observation", "interpolated_inverted_cdf", "hazen", "weibull", "median_unbiased",
           "normal_unbiased"]
SMOOTH = {"linear", "interpolated_inverted_cdf", "hazen", "weibull", "median_unbiased", "normal_unbiased"}

CASES = [
    # nan-ignoring reductions
    ("np.nansum", lambda a: np.nansum(a, axis=1), (XN,), 2),
    ("np.nansum", lambda a: np.nansum(a, where=np.array([True, False, True, True, True])), (XN,), 1),
    ("np.nanprod", lambda a: np.nanprod(a, axis=1), (XN,), 2),
    ("np.nanmean", lambda a: np.nanmean(a, axis=0), (XN,), 2),
    ("np.nanmean", lambda a: np.nanmean(a, axis=1, keepdims=True), (XN,), 1),
    ("np.nanmax", lambda a: np.nanmax(a, axis=1), (XN,), 1),
    ("np.nanmax", lambda a: np.nanmax(a, axis=0, initial=-5.0), (np.where(np.isnan(XN), np.nan, XN),), 1),
    ("np.nanmin", lambda a: np.nanmin(a), (XN,), 1),
    ("np.nanmin", nonan(lambda a: np.nanmin(a, axis=1)), (np.array([[np.nan, np.nan], [1.0, 2.0]]),), 1),
    ("np.nanvar", lambda a: np.nanvar(a, axis=1), (XN,), 2),
    ("np.nanstd", lambda a: np.nanstd(a, axis=0, ddof=1), (XN,), 2),
    ("np.nancumsum", lambda a: np.nancumsum(a, axis=1), (XN,), 2),
    ("np.nancumprod", lambda a: np.nancumprod(a, axis=1), (XN,), 2),
    # order statistics
    ("np.median", lambda a: np.median(a, axis=0), (X,), 2),
    ("np.median", lambda a: np.median(a, axis=1, keepdims=True), (R(3, 4),), 2),
    ("np.median", lambda a: np.median(a), (R(2, 3, 2),), 1),
    ("np.median", nonan(lambda a: np.median(a, axis=1)), (XN,), 1),
    ("np.nanmedian", lambda a: np.nanmedian(a, axis=1), (XN,), 2),
    ("np.nanmedian", lambda a: np.nanmedian(a), (XN,), 1),
    ("np.quantile", lambda a: np.quantile(a, [0.1, 0.5, 0.93], axis=1), (X,), 2),
    ("np.quantile", lambda a: np.quantile(a, 0.3, axis=(0, 2), keepdims=True), (R(2, 3, 4),), 1),
    ("np.quantile", lambda q: np.quantile(X, q, axis=1), (np.array([0.13, 0.77]),), 1),
    ("np.quantile", lambda a: np.quantile(a, [0.3, 0.6], axis=1, method="inverted_cdf", weights=W), (X,), 1),
    ("np.quantile", lambda a: np.quantile(a, 0.6, axis=1, method="inverted_cdf", weights=W[0]), (X,), 1),
    ("np.percentile", lambda a: np.percentile(a, [37.0, 80.0], axis=0), (X,), 2),
    ("np.percentile", lambda q: np.percentile(X[0], q), (33.0,), 1),
    ("np.nanquantile", lambda a: np.nanquantile(a, [0.2, 0.7], axis=1), (XN,), 2),
    ("np.nanquantile", lambda a: np.nanquantile(a, [0.3], axis=1, method="inverted_cdf", weights=W), (XN,), 1),
    ("np.nanpercentile", lambda a: np.nanpercentile(a, 70.0, axis=0, method="hazen"), (XN,), 1),
] + [
    ("np.quantile", lambda a, m=m: np.quantile(a, [0.1, 0.45, 0.93], axis=1, method=m), (X,), 2 if m in SMOOTH else 1)
    for m in METHODS
] + [
    ("np.nanquantile", lambda a, m=m: np.nanquantile(a, [0.1, 0.45, 0.93], axis=1, method=m), (XN,), 1)
    for m in METHODS
] + [
    # differences and integration
    ("np.diff", lambda a: np.diff(a), (X,), 2),
    ("np.diff", lambda a: np.diff(a, n=2, axis=0, prepend=1.5, append=a[:1]), (X,), 1),
    ("np.diff", lambda a, p: np.diff(a, prepend=p), (X[0], 2.0), 1),
    ("np.ediff1d", lambda a, e: np.ediff1d(a, to_end=e, to_begin=[1.0, 2.0]), (X, X[0]), 2),
    ("np.ediff1d", lambda a: np.ediff1d(a), (X[0],), 1),
    ("np.gradient", lambda f: np.gradient(f), (X,), 2),
    ("np.gradient", lambda f: np.gradient(f, 0.5, axis=1, edge_order=2), (X,), 2),
    ("np.gradient", lambda f, h: np.gradient(f, h, edge_order=2), (X, 0.7), 2),
    ("np.gradient", lambda f, c: np.gradient(f, c, axis=1), (X, COORD), 2),
    ("np.gradient", lambda f, c: np.gradient(f, c, axis=-1, edge_order=2), (X, COORD), 2),
    ("np.gradient", lambda f, c: np.gradient(f, c, axis=1, edge_order=2), (X, np.arange(5.0)), 1),
    ("np.gradient", lambda f: np.gradient(f, np.array([0.0, 1.0, 3.0]), COORD, edge_order=2), (X,), 1),
    ("np.gradient", lambda c: np.gradient(X[0], c), (COORD,), 1),
    ("np.trapezoid", lambda y: np.trapezoid(y), (X,), 2),
    ("np.trapezoid", lambda y, x: np.trapezoid(y, x, axis=1), (X, COORD), 2),
    ("np.trapezoid", lambda y, x: np.trapezoid(y, x, axis=0), (X, np.cumsum(P(3, 5), axis=0)), 1),
    ("np.trapezoid", lambda y, d: np.trapezoid(y, dx=d), (X, 0.3), 2),
    # covariance and correlation
    ("np.cov", lambda m: np.cov(m), (X,), 2),
    ("np.cov", lambda m, y: np.cov(m, y, rowvar=False, ddof=0), (X, X[:, :2]), 2),
    ("np.cov", lambda m, aw: np.cov(m, aweights=aw, fweights=np.array([1, 2, 1, 3, 1])), (X, P(5)), 2),
    ("np.cov", lambda m: np.cov(m[0], bias=True), (X,), 2),
    ("np.cov", lambda m: np.cov(m), (R(2, 4) + 1j * R(2, 4),), 1),
    ("np.corrcoef", lambda m: np.corrcoef(m), (X,), 2),
    ("np.corrcoef", lambda m, y: np.corrcoef(m, y), (X[0], X[1]), 1),
    # ufunc.reduce / .accumulate (UFUNC_HANDLERS; not in the sweep, covered here)
    ("np.logaddexp.reduce", lambda a: np.logaddexp.reduce(a), (X,), 2),
    # segments, overlapping ones (5 >= 2: x[5] alone) and one to the end; along an axis; into out=
    ("np.add.reduceat", lambda a: np.add.reduceat(a.reshape(-1), [0, 5, 2, 8]) ** 2, (X,), 2),
    ("np.add.reduceat", lambda a: np.add.reduceat(a, [0, 2, 2, 4], axis=1) * a[:, :4], (X,), 2),
    ("np.add.reduceat", lambda a: (np.add.reduceat(a, [1, 2], axis=0, out=a[:2]), a * a)[1], (X,), 1),
    ("np.logaddexp.reduce", lambda a: np.logaddexp.reduce(a, axis=None), (X,), 1),
    ("np.logaddexp.reduce", lambda a, i: np.logaddexp.reduce(a, axis=1, initial=i, keepdims=True), (X, 0.3), 2),
    ("np.logaddexp2.accumulate", lambda a: np.logaddexp2.accumulate(a, axis=1), (X,), 2),
    # a running log-sum-exp is one rule (it was one operation per element: the survival tester's
    # Cox risk sets, 1400x the primal), and the elementwise fold where the values span too much
    ("np.logaddexp.accumulate", lambda a: np.logaddexp.accumulate(a[:, ::-1] * 3.0, axis=1)[:, ::-1], (X,), 2),
    ("np.logaddexp.accumulate", lambda a: np.logaddexp.accumulate(a, axis=0, out=a), (X,), 1),
    ("np.logaddexp.accumulate", lambda a: np.logaddexp.accumulate(a * np.array([1.0, 1e3, 1.0, 1.0, 1.0])), (X,), 1),
    ("np.logaddexp.accumulate", lambda a: np.logaddexp.accumulate(a.astype(np.float32), axis=1), (X,), 1),
    # reduceat of every ufunc whose reduction is order-free: segments, x[5] alone (5 >= 1), one element
    ("np.logaddexp.reduceat", lambda a: np.logaddexp.reduceat(a, [0, 2, 2, 4, 1], axis=1), (X,), 2),
    ("np.logaddexp2.reduceat", lambda a: np.logaddexp2.reduceat(a.reshape(-1), [0, 7, 3, 14]), (X,), 1),
    ("np.hypot.reduceat", lambda a: np.hypot.reduceat(a, [0, 2, 2, 3, 1], axis=1), (X,), 2),
    ("np.fmax.reduceat", lambda a: np.fmax.reduceat(a, [0, 1, 3], axis=1), (XN,), 1),
    ("np.fmin.reduceat", lambda a: np.fmin.reduceat(a, [1, 2], axis=0), (X,), 1),
    ("np.subtract.reduce", lambda a: np.subtract.reduce(a, axis=1), (X,), 1),
    ("np.subtract.accumulate", lambda a: np.subtract.accumulate(a), (X,), 1),
    ("np.divide.reduce", lambda a: np.divide.reduce(a, axis=0), (P(3, 5),), 2),
    ("np.power.accumulate", lambda a: np.power.accumulate(a, axis=1), (P(3, 4),), 2),
    ("np.float_power.reduce", lambda a: np.float_power.reduce(a, axis=1), (P(3, 4),), 1),
    ("np.hypot.reduce", lambda a: np.hypot.reduce(a, axis=1, where=np.array([True, False, True, True, True]),
                                                  initial=0.5), (X,), 2),
    ("np.arctan2.accumulate", lambda a: np.arctan2.accumulate(a, axis=1), (P(3, 4),), 1),
    ("np.maximum.accumulate", lambda a: np.maximum.accumulate(a, axis=1), (X,), 1),
    ("np.minimum.accumulate", lambda a: np.minimum.accumulate(a), (X,), 1),
    ("np.fmax.accumulate", lambda a: np.fmax.accumulate(a, axis=1), (XN,), 1),
    ("np.fmin.accumulate", lambda a: np.fmin.accumulate(a, axis=1), (XN,), 1),
    ("np.fmax.reduce", lambda a: np.fmax.reduce(a, axis=1), (XN,), 1),
    ("np.fmin.reduce", lambda a: np.fmin.reduce(a), (X,), 1),
]


# histograms: their own draws (the cases above keep theirs)
_more = Draws(7)
HX = _more.R(40)
HW = _more.R(40)
EDGES = np.array([-3.0, -0.5, 0.0, 0.1, 2.0, 2.0, 4.0])  # explicit, with an empty bin

NEW_CASES = [
    ("np.histogram_bin_edges", lambda a: np.histogram_bin_edges(a), (HX,), 1),
    ("np.histogram_bin_edges", lambda a: np.histogram_bin_edges(a, bins="auto"), (HX,), 1),
    ("np.histogram_bin_edges", lambda a, lo: np.histogram_bin_edges(a, 5, range=(lo, 3.0)), (HX, -2.5), 2),
    ("np.histogram_bin_edges", lambda a: np.histogram_bin_edges(a * 0.0 + 1.5, 4), (HX,), 1),  # min == max
    ("np.histogram", lambda a: np.histogram(a, 6)[1], (HX,), 1),
    ("np.histogram", lambda a, w: np.histogram(a, 6, weights=w), (HX, HW), 1),
    ("np.histogram", lambda a, w: np.histogram(a, EDGES, weights=w), (HX, HW), 1),
    ("np.histogram", lambda a, w: np.histogram(a, 5, weights=w, density=True), (HX, _more.P(40)), 2),
    ("np.histogram", lambda a: np.histogram(a, 5, density=True), (HX,), 1),
    ("np.histogram", lambda w: np.histogram(HX, 5, range=(-1.0, 1.0), weights=w + 1j * w), (HW,), 1),
    ("np.histogram", lambda a, b: np.histogram(a, b, density=True), (HX, EDGES[[0, 1, 2, 3, 4, 6]]), 1),
]
CASES += NEW_CASES
_HY, _HS = np.random.default_rng(7).standard_normal(HX.shape), np.random.default_rng(8).standard_normal((HX.size, 3))
CASES += [  # histogram2d/dd: linear in the weights; the data move the edges they make (density)
    ("np.histogram2d", lambda w: np.histogram2d(HX, _HY, 4, weights=w)[0], (HW,), 2),
    ("np.histogram2d", lambda w: np.histogram2d(HX, _HY, [3, 5], range=[[-2, 2], [-3, 3]], weights=w,
                                                density=True)[0], (HW,), 2),
    ("np.histogram2d", lambda x: np.histogram2d(x, _HY, 4, density=True)[0], (HX,), 1),
    ("np.histogramdd", lambda w: np.histogramdd(_HS, [np.linspace(-3, 3, 4), 2, 5], weights=w, density=True)[0],
     (HW,), 2),
    ("np.histogramdd", lambda s: np.histogramdd(s, 3, density=True)[0], (_HS,), 1),
]


@pytest.mark.parametrize("covers,fn,args,order", CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_rule(covers, fn, args, order):
    check_grads(fn, *args, modes=("fwd", "rev"), order=order)


@pytest.mark.parametrize("method", METHODS)
def test_quantile_values_match_numpy(method):
    x = R(4, 7)
    q = np.array([0.0, 0.05, 0.5, 0.61, 1.0])
    out, _ = mg.vjp(lambda a: np.quantile(a, q, axis=1, method=method), x)
    np.testing.assert_array_equal(out, np.quantile(x, q, axis=1, method=method))


def test_running_logsumexp_is_one_operation_with_numpys_values():
    # (the survival tester: one operation per element, 1400x the primal at n = 4000)
    x = np.random.default_rng(4).normal(size=200)
    report = str(mg.explain(lambda x: np.sum(np.logaddexp.accumulate(x)), x))
    assert "2 records" in report and "logaddexp.accumulate" in report
    for u in (np.logaddexp, np.logaddexp2):
        np.testing.assert_array_equal(mg.vjp(u.accumulate, x)[0], u.accumulate(x))
    # d/dx_j sum(w * y) = e^{x_j} sum_{i >= j} w_i e^{-y_i}, by hand (on a small x: no overflow)
    w = np.linspace(-1.0, 1.0, 200)
    y = np.logaddexp.accumulate(x)
    want = np.exp(x) * np.cumsum((w * np.exp(-y))[::-1])[::-1]
    np.testing.assert_allclose(mg.grad(lambda x: np.sum(w * np.logaddexp.accumulate(x)))(x), want, rtol=1e-12)
    # an entry of -inf after a finite start (a log of a zero weight) stays in the rule: it weighs nothing
    # (the newfeat21 tester: the elementwise fallback, 100x slower); a -inf start falls back
    xi = x.copy()
    xi[[50, 199]] = -np.inf
    assert "2 records" in str(mg.explain(lambda x: np.sum(np.logaddexp.accumulate(x)), xi))
    yi = np.logaddexp.accumulate(xi)
    want = np.exp(xi) * np.cumsum((w * np.exp(-yi))[::-1])[::-1]
    np.testing.assert_allclose(mg.grad(lambda x: np.sum(w * np.logaddexp.accumulate(x)))(xi), want, rtol=1e-12)
    assert "\n2 records" not in str(mg.explain(lambda x: np.sum(np.logaddexp.accumulate(x)), np.r_[-np.inf, x]))


@pytest.mark.parametrize("ufunc", [np.maximum, np.minimum, np.fmax, np.logaddexp, np.hypot, np.multiply])
def test_segment_reductions_are_a_few_operations_whatever_the_segments(ufunc):
    # (the sparsegraph tester: one reduction per segment, 4500x the primal at 1e4 segments) a gather and
    # a segment sum; NumPy's values, and by hand for max: each segment's maximum's element gets 1
    rng = np.random.default_rng(2)
    x = rng.random(300)
    starts = np.r_[0, np.sort(rng.choice(np.arange(1, 300), 99, replace=False))]
    f = lambda x: np.sum(ufunc.reduceat(x, starts) ** 2)
    assert str(mg.explain(f, x)).count(" op ") < 12
    np.testing.assert_array_equal(mg.vjp(lambda x: ufunc.reduceat(x, starts), x)[0], ufunc.reduceat(x, starts))
    if ufunc is np.maximum:
        seg = np.repeat(np.arange(100), np.diff(np.r_[starts, 300]))
        top = np.array([starts[k] + np.argmax(x[seg == k]) for k in range(100)])
        want = np.zeros(300)
        want[top] = 2 * x[top]
        np.testing.assert_array_equal(mg.grad(f)(x), want)
    check_grads(f, x)
    # a one-element segment is its element, whatever it holds (±inf had derivative 0 in logaddexp's)
    y = np.array([np.inf, 1.0, -2.0, 0.0])
    _, t = mg.jvp(lambda y: ufunc.reduceat(y, [0, 1, 2, 3]), (y,), (np.arange(1.0, 5.0),))
    np.testing.assert_array_equal(t, np.arange(1.0, 5.0))


def test_histogram2d_and_histogramdd_values_are_numpys():
    w = np.random.default_rng(9).random(HX.shape)
    for f in (lambda w: np.histogram2d(HX, _HY, 4, weights=w), lambda w: np.histogram2d(HX, _HY, 4, density=True),
              lambda w: np.histogramdd(_HS, (2, 3, np.linspace(-2, 2, 4)), weights=w, density=True),
              lambda w: np.histogram2d(HX, _HY, np.linspace(-2, 2, 6), weights=w)):
        got, want = _arrays(mg.vjp(f, w)[0]), _arrays(f(w))
        assert len(got) == len(want)
        for g, e in zip(got, want):
            np.testing.assert_array_equal(g, e)


def test_histogram2d_with_a_traced_range():
    # NumPy's dispatch does not look at range=: NumPy's own code runs on the traced ends (it reshapes
    # the bin widths by an array shape, which crashed a traced reshape)
    def f(r):
        return np.sum(np.histogram2d(HX, _HY, 3, range=[[-2.0, r[0]], [-2.0, r[1]]], density=True)[0] ** 2)

    r = np.array([2.5, 3.0])
    assert mg.value_and_grad(f)(r)[0] == f(r)
    check_grads(f, r)


def _arrays(r):
    """The arrays of a result: (hist, edges...) or (hist, [edges...])."""
    if isinstance(r, (tuple, list)):
        return [a for v in r for a in _arrays(v)]
    return [r]


@pytest.mark.parametrize("method", METHODS)
def test_quantile_of_a_2d_q(method):
    # NumPy takes q of any shape (the result's leading axes): mutagrad's rule refused one of 2-d
    Q = np.array([[0.1, 0.5], [0.7, 0.95]])
    x = R(3, 7)
    for fn in (np.quantile, np.nanquantile, lambda a, q, **k: np.percentile(a, q * 100, **k)):
        for axis in (None, 1):
            f = lambda a, fn=fn, axis=axis: fn(a, Q, axis=axis, method=method, keepdims=True)
            np.testing.assert_array_equal(mg.vjp(f, x)[0], f(x))
    with pytest.raises(ValueError, match="q must be a scalar or 1d"):  # (NumPy's limit: 2 dimensions)
        mg.vjp(lambda a: np.quantile(a, np.full((2, 2, 2), 0.5), method=method), x)
    if method in ("linear", "weibull", "hazen", "median_unbiased"):
        check_grads(lambda a: np.sum(np.quantile(a, Q, axis=1, method=method) ** 2), x, order=2)
        check_grads(lambda q: np.sum(np.quantile(x, q, method=method)), Q * 0.9 + 0.0137)  # (away from kinks)


def test_median_gradient_splits_between_middle_values():
    # closed form: the median of an even count is the mean of the two middle values
    g = mg.grad(lambda a: np.median(a))(np.array([4.0, 1.0, 3.0, 2.0]))
    np.testing.assert_array_equal(g, [0.0, 0.0, 0.5, 0.5])


def _long_lanes():
    """Lanes of more than 256 values (read by partition, not sorted): ties (values rounded to a
    few levels), -0.0 beside 0.0, and a lane with NaNs."""
    x = np.round(np.random.default_rng(11).standard_normal((3, 301)) * 2) / 2
    x[0, :5] = -0.0
    x[2, [7, 100]] = np.nan
    return x


@pytest.mark.parametrize("method", METHODS)
def test_quantiles_of_long_lanes_are_numpys_and_their_ties_share_evenly(method):
    x = _long_lanes()
    q = np.array([0.0, 0.13, 0.5, 0.77, 1.0])
    for axis in (1, None, (0, 1)):
        f = lambda a, axis=axis: np.quantile(a, q, axis=axis, method=method)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            out, _ = mg.vjp(f, x)
        np.testing.assert_array_equal(out, f(x))
    # the median of each lane without NaNs (n odd: one rank) sits on a tie: its derivative is shared evenly
    # by the elements equal to it, as np.max's is (the mean of the tied values is the same function there);
    # the sorted lanes' element at that rank has the same derivative
    lanes = x[:2]
    want = np.zeros_like(lanes)
    for r, lane in enumerate(lanes):
        tied = lane == np.median(lane)
        assert tied.sum() > 1  # (the case)
        want[r, tied] = 1.0 / tied.sum()
    for f in (lambda a: np.sum(np.median(a, axis=1)), lambda a: np.sum(np.sort(a, axis=1)[:, 150])):
        np.testing.assert_allclose(mg.grad(f)(lanes), want, rtol=1e-15, atol=0)


def test_quantiles_of_long_lanes_against_differences():
    x = np.random.default_rng(12).standard_normal((2, 400))  # (distinct values: differentiable)
    check_grads(lambda a: np.sum(np.median(a, axis=1) ** 2) + np.quantile(a, 0.3), x)
    check_grads(lambda a: np.sum(np.percentile(a, [10, 95], axis=1, method="hazen")), x)


def test_dtype_is_kept():
    x = R(3, 4).astype(np.float32)
    for f in (lambda a: np.median(a, axis=0), lambda a: np.quantile(a, 0.3), np.nanmean,
              lambda a: np.gradient(a, axis=0), np.trapezoid):
        out, pb = mg.vjp(f, x)
        assert out.dtype == np.float32
        assert pb(np.ones_like(out))[0].dtype == np.float32


@pytest.mark.parametrize("ufunc,method", [(np.power, "reduce"), (np.arctan2, "reduce")])
def test_reduce_where_numpy_may_not_fold(ufunc, method):
    # NumPy 2.4 computes something else for these on some CPUs and the left fold on
    # others (it varies between machines): the fold's derivative where NumPy folds, else
    # NoRuleError naming the function and the line, never another function's derivative
    a = P(3, 4)
    r = a[:, 0]
    for i in range(1, 4):
        r = ufunc(r, a[:, i])
    if np.allclose(getattr(ufunc, method)(a, axis=1), r, rtol=1e-14, atol=0):
        check_grads(lambda a: getattr(ufunc, method)(a, axis=1), a, order=1)
    else:
        with pytest.raises(mg.NoRuleError, match=f"np.{ufunc.__name__}.{method}.*test_statistics.py"):
            mg.grad(lambda a: getattr(ufunc, method)(a, axis=1).sum())(a)


def test_reduce_that_numpy_does_not_fold_raises(monkeypatch):
    # the same check forced to "does not fold", so the error path runs on every machine
    from mutagrad.rules import statistics

    monkeypatch.setitem(statistics._FOLDS_HERE, (np.power, "reduce"), False)
    with pytest.raises(mg.NoRuleError, match=r"np.power.reduce.*test_statistics.py.*loop of np.power"):
        mg.grad(lambda a: np.power.reduce(a, axis=1).sum())(P(3, 4))
    # reduceat folds each segment: the message names the method called (it named reduce; npfunctional)
    with pytest.raises(mg.NoRuleError, match=r"^np.power.reduceat was applied.*np.power.reduceat does not"):
        mg.grad(lambda a: np.power.reduceat(a, [0, 2], axis=1).sum())(P(3, 4))
    # forced to "folds", the handler differentiates the left fold: compared with
    # differences of that fold written as a loop (NumPy's own reduce may not fold here)
    monkeypatch.setitem(statistics._FOLDS_HERE, (np.power, "reduce"), True)
    w = R(3)

    def loop(a):
        r = a[:, 0]
        for i in range(1, a.shape[1]):
            r = np.power(r, a[:, i])
        return np.sum(w * r)

    a = P(3, 4)
    want = numerical_grad(loop, (a,), (0,))[0]
    got = mg.grad(lambda a: np.sum(w * np.power.reduce(a, axis=1)))(a)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-7)


def test_noisy_objective_with_generator_draws():
    # draws with plain parameters are constants inside the differentiated code
    data = R(6)

    def f(theta):
        g = np.random.default_rng(42)
        noise = g.normal(0.0, 0.1, size=6)
        eps = g.standard_normal(6)
        return np.mean((theta[0] + theta[1] * eps - data - noise) ** 2)

    check_grads(f, np.array([0.3, 1.2]), order=2)


def test_generator_draw_with_traced_parameter_raises():
    # rng.normal(loc=traced) would drop d(draw)/d(loc): NumPy converts its
    # parameters with asarray, which raises our escape error instead
    def f(mu):
        return np.sum(np.random.default_rng(0).normal(loc=mu, scale=1.0, size=3))

    with pytest.raises(mg.DifferentiationError, match="stop_gradient"):
        mg.grad(f)(np.zeros(3))
    with pytest.raises(mg.DifferentiationError):
        mg.grad(lambda s: np.sum(np.random.default_rng(0).normal(0.0, s, size=3)))(1.0)


def test_reparameterized_draw():
    # the differentiable way: a standard draw, scaled and shifted by traced values
    def f(mu, sigma):
        eps = np.random.default_rng(3).standard_normal(4)
        return np.sum(np.sin(mu + sigma * eps))

    check_grads(f, 0.4, 1.3, order=2)


@pytest.mark.parametrize("covers,fn,args,order", NEW_CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(NEW_CASES)])
def test_values_match_numpy(covers, fn, args, order):
    assert_values_match_numpy(fn, args)


def test_histogram_counts_without_weights_are_plain():
    def f(a):
        counts, edges = np.histogram(a, 5)
        assert not isinstance(counts, mg.core.Tracer) and isinstance(edges, mg.core.Tracer)
        np.testing.assert_array_equal(counts, np.histogram(HX, 5)[0])
        return edges

    # closed form: the edges are min + k (max - min) / 5
    J = mg.jacobian(f)(HX)
    k = np.arange(6) / 5
    expected = np.zeros((6, HX.size))
    expected[:, np.argmin(HX)] = 1 - k
    expected[:, np.argmax(HX)] += k
    np.testing.assert_allclose(J, expected, atol=1e-15)


@pytest.mark.parametrize("bins", [7, EDGES])
def test_weighted_histogram_of_many_values_matches_numpy(bins):
    # more than one of NumPy's blocks of 65536 values: the sums are added as NumPy adds them
    a, w = _more.R(150000), _more.R(150000)
    out, pullback = mg.vjp(lambda v: np.histogram(a, bins, weights=v)[0], w)
    np.testing.assert_array_equal(out, np.histogram(a, bins, weights=w)[0])
    g = pullback(np.arange(out.size, dtype=float))[0]  # closed form: each weight gets its bin's number
    edges = np.histogram_bin_edges(a, bins)
    inside = (a >= edges[0]) & (a <= edges[-1])
    expected = np.where(inside, np.clip(np.searchsorted(edges, a, "right") - 1, 0, out.size - 1), 0.0)
    np.testing.assert_array_equal(g, expected)


@pytest.mark.parametrize("ufunc", [np.subtract, np.true_divide, np.fmod, np.remainder, np.float_power,
                                   np.copysign, np.heaviside, np.hypot, np.logaddexp])
def test_fold_over_one_element_is_numpys_new_array(ufunc):
    # a fold over a length-1 axis: NumPy's value (hypot starts from its identity: |x|), in
    # NumPy's dtype (float_power computes in float64), and a new array, not a view of x,
    # which the function writes afterwards
    def f(x):
        r = ufunc.reduce(x, axis=0)
        x *= 3.0
        return np.sum(r * np.array([0.7, -1.3])) + np.sum(x)

    x = np.array([[-0.75, 1.5]])
    want = numerical_grad(lambda a: f(a.copy()), (x,), (0,))[0]
    val, got = mg.value_and_grad(f)(x.copy())
    assert val == f(x.copy())
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-8)
    for xs in (x, x.astype(np.float32)):
        for method in ("reduce", "accumulate"):
            out = getattr(ufunc, method)(xs, axis=0)
            got_out = mg.vjp(lambda a, m=method: getattr(ufunc, m)(a, axis=0), xs)[0]
            assert got_out.dtype == out.dtype
            np.testing.assert_array_equal(got_out, out)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize("fn", [
    lambda x, w: np.mean(x, axis=0, where=w), lambda x, w: np.mean(x, axis=0, dtype=np.float32, where=w),
    lambda x, w: np.std(x, axis=0, where=w), lambda x, w: np.var(x, where=w, ddof=1),
    lambda x, w: np.std(x, where=w, dtype=np.float64), lambda x, w: np.var(x, where=w, ddof=3),
    lambda x, w: np.mean(x.astype(np.float16), where=w), lambda x, w: np.mean(x[:0], where=w[:0]),
])
def test_masked_mean_and_var_keep_numpys_dtype_and_value(fn):
    # NumPy divides by the count into the sum's dtype: a float32 array's masked mean is float32
    x = np.array([1.9345767, -0.9456922, 0.3], dtype=np.float32)
    w = np.array([True, True, False])
    want = fn(x, w)
    got = mg.vjp(lambda a: fn(a, w), x)[0]
    assert np.result_type(got) == np.result_type(want)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("fn", [lambda x: np.max(x, axis=0, initial=0.1), lambda x: np.min(x, initial=-2.0),
                                lambda x: np.max(x, axis=1, initial=0.1, keepdims=True),
                                lambda x: x.min(axis=0, initial=0.5, where=np.ones((0, 3), bool))])
def test_extremum_of_an_empty_array_with_initial(fn):
    x = np.zeros((0, 3))
    out, pb = mg.vjp(fn, x)
    np.testing.assert_array_equal(out, fn(x))
    assert pb(np.ones(np.shape(out)))[0].shape == (0, 3)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize("ddof", [2, 3])
def test_var_with_ddof_beyond_the_count_is_numpys_inf(ddof):
    x = np.array([1.0, 2.0])
    for fn in (np.var, np.std):
        np.testing.assert_array_equal(mg.vjp(lambda a, f=fn: f(a, ddof=ddof), x)[0], fn(x, ddof=ddof))


_OVERWRITE_CALLS = {
    "median-axis1": lambda b: np.median(b, axis=1, overwrite_input=True),
    "median-all": lambda b: np.median(b, overwrite_input=True),
    "percentile-axis0": lambda b: np.percentile(b, [30, 80], axis=0, overwrite_input=True),
    "quantile-lower": lambda b: np.quantile(b, 0.4, axis=-1, overwrite_input=True, method="lower"),
    "nanmedian": lambda b: np.nanmedian(b, axis=1, overwrite_input=True),
    "nanpercentile-all": lambda b: np.nanpercentile(b, 60, overwrite_input=True),
    "strided-all": lambda b: np.median(b[:, ::2], overwrite_input=True),  # NumPy partitions a copy
}


@pytest.mark.parametrize("name", list(_OVERWRITE_CALLS))
def test_overwrite_input_leaves_the_array_as_numpy_does(name):
    # NumPy partitions the input in place; a program reading it afterwards saw it untouched
    call = _OVERWRITE_CALLS[name]
    b0 = np.array([[10.0, 7.0, 4.0, -0.0, 8.5], [3.0, 2.0, 1.0, 0.25, 2.5], [5.0, 9.0, 6.0, 7.5, 1.5]])
    w = np.arange(1.0, 16.0).reshape(3, 5)

    def f(b):
        m = call(b)
        return np.sum(m) + np.nansum(b * w)  # reads b after the call

    plain = b0.copy()
    call(plain)
    traced = b0.copy()
    value, g = mg.value_and_grad(f)(traced)
    np.testing.assert_array_equal(traced, plain)  # values and the signs of zeros
    assert np.array_equal(np.signbit(traced), np.signbit(plain))
    assert value == f(b0.copy())
    h = 1e-6
    fd = np.array([(f(b0 + h * e) - f(b0 - h * e)) / (2 * h) for e in np.eye(15).reshape(15, 3, 5)])
    np.testing.assert_allclose(g.ravel(), fd, atol=1e-6)


def test_overwrite_input_of_a_plain_array_and_with_a_tuple_axis():
    b0 = np.array([[3.0, 1.0, 2.0], [9.0, 7.0, 8.0]])
    seen = {}

    def f(x):
        plain = b0.copy()
        m = np.median(plain * 1.0 + 0.0, axis=1)  # (a plain temporary: nothing to see)
        np.median(plain, axis=1, overwrite_input=True)  # a plain array: NumPy's own side effect
        seen["plain"] = plain.copy()
        return np.sum(x * m)

    mg.grad(f)(np.ones(2))
    want = b0.copy()
    np.median(want, axis=1, overwrite_input=True)
    np.testing.assert_array_equal(seen["plain"], want)
    with pytest.raises(mg.DifferentiationError, match="overwrite_input=False"):
        mg.grad(lambda b: np.median(b, axis=(0, 1), overwrite_input=True))(b0.copy())
    # over NaNs, np.nanmedian copies values over them (no permutation): refused, not reproduced wrong
    b1 = np.array([3.0, np.nan, 1.0, 2.0, 5.0])
    with pytest.raises(mg.DifferentiationError, match="overwrite_input=False"):
        mg.grad(lambda b: np.nanmedian(b, overwrite_input=True) + np.nansum(b))(b1.copy())


@pytest.mark.parametrize("edge_order", [1, 2])
def test_gradient_with_uniform_traced_coordinates_has_numpys_bits(edge_order):
    # NumPy takes its uniform formula for evenly spaced coordinates; the traced general one
    # differed in the last bit (NumPy's docstring example); the derivative stays the general one's
    y = np.array([0.0, 3.0, 6.0, 9.0])
    zs = np.random.default_rng(5).uniform(-1, 1, (3, 4)) * 7.3
    w = np.random.default_rng(6).standard_normal((3, 4))

    def f(zs, y):
        return np.sum(np.gradient(zs, 1.5, y, edge_order=edge_order)[1] * w)

    plain = np.gradient(zs, 1.5, y, edge_order=edge_order)
    traced = mg.vjp(lambda zs, y: np.gradient(zs, 1.5, y, edge_order=edge_order), zs, y)[0]
    for p, t in zip(plain, traced):
        np.testing.assert_array_equal(t, p)
    check_grads(f, zs, y)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("call", [lambda x: np.cov(x), lambda x: np.corrcoef(x), lambda x: np.cov(x, ddof=0),
                                  lambda x: np.cov(x[0], x[1], aweights=np.linspace(0.5, 1.5, x.shape[1])),
                                  lambda x: np.corrcoef(x.T, rowvar=False)],
                         ids=["cov", "corrcoef", "cov-ddof0", "cov-y-aweights", "corrcoef-columns"])
def test_cov_and_corrcoef_have_numpys_bits(call, dtype):
    # NumPy's symmetric product np.dot(X, X.T) left other last bits (3-5 ulp) than the
    # traced composition (found with PyTorch's OpInfo reference inputs)
    x = (np.random.default_rng(1).standard_normal((3, 300)) * 3).astype(dtype)
    plain = call(x)
    np.testing.assert_array_equal(mg.jvp(call, (x,), (np.ones_like(x),))[0], plain)
    np.testing.assert_array_equal(mg.vjp(call, x)[0], plain)
    if dtype == np.float64:
        check_grads(lambda x: np.sum(call(x) * np.arange(1.0, np.size(plain) + 1).reshape(np.shape(plain))), x)


def test_nan_reductions_of_a_broadcast_array_add_in_numpys_order():
    # NumPy's nan-functions copy a floating-point array in its own layout (order 'K') first;
    # the sum of a broadcast array's copy then differs from a C-ordered sum in the last bit
    a = np.array([0.9253584365048412, 1.1766099142591064, 1.2302650866284766, 1.5223440977785154, 0.5537094996654459], dtype=np.float64).reshape((5,))
    f = lambda x: np.nansum(np.broadcast_to(x, (2,) + x.shape), keepdims=True)
    assert mg.vjp(f, a)[0] == f(a)
    check_grads(lambda x: np.nanmean(np.broadcast_to(x, (2,) + x.shape).T, axis=0), a)


@pytest.mark.parametrize("fn", [np.quantile, np.nanquantile, np.percentile, np.nanpercentile])
@pytest.mark.parametrize("axis", [0, 1, None])
def test_quantiles_of_an_empty_array_are_numpys(fn, axis):
    # no values: NumPy's NaNs (nan*) or its IndexError (quantile of an empty lane), traced or not
    x = np.zeros((0, 3))
    q = 70.0 if "percentile" in fn.__name__ else 0.7
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        try:
            want = fn(x, q, axis=axis, keepdims=True)
        except IndexError:
            with pytest.raises(IndexError):
                mg.vjp(lambda x: fn(x, q, axis=axis, keepdims=True), x)
            return
        got = mg.vjp(lambda x: fn(x, q, axis=axis, keepdims=True), x)[0]
    assert np.shape(got) == np.shape(want) and np.array_equal(got, want, equal_nan=True)


@pytest.mark.parametrize("f,x", [
    (lambda x: np.std(x, ddof=1), np.array([0.7])),  # 0 / 0: NumPy's nan
    (lambda x: np.var(x, ddof=2), np.array([0.7, 1.9])),  # s / 0: NumPy's inf
    (lambda x: np.var(x, ddof=5), np.array([[0.7, 1.9], [0.1, -0.4]]).T),  # (count 4 < ddof)
    (lambda x: np.std(x, ddof=3), np.array([0.3, 1.2, -0.5])),  # sqrt(inf): its zero slope met NaN
], ids=["std-nan", "var-inf", "var-count-below", "std-inf"])
def test_variance_over_no_degrees_of_freedom_has_nan_derivatives_in_both_modes(f, x):
    # reverse mode gave 0 (strong zeros of the zero deviations) where forward gave NaN: both NaN
    # now, as JAX and PyTorch give; the value stays NumPy's
    with np.errstate(divide="ignore", invalid="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        want = f(x.copy())
        assert np.all(np.isnan(want) | np.isinf(want))
        assert np.array_equal(mg.vjp(f, x.copy())[0], want, equal_nan=True)
        assert np.all(np.isnan(mg.grad(lambda x: np.sum(f(x)))(x.copy())))
        assert np.all(np.isnan(mg.jvp(lambda x: np.sum(f(x)), (x.copy(),), (np.ones_like(x),))[1]))
        assert np.all(np.isnan(mg.hessian(lambda x: np.sum(f(x)))(x.copy())))


def test_cov_and_corrcoef_with_a_plain_list_as_y():
    # (np.result_type read the list as a dtype spec: "Field elements must be 2- or 3-tuples")
    x = np.array([0.3, 1.2, 0.7])
    w = np.array([[1.0, 2.0], [3.0, 4.0]])
    for fn in (lambda x: np.cov(x, [1.0, 3.0, 2.0]), lambda x: np.corrcoef(x, [1.0, 3.0, 2.0]),
               lambda x: np.cov([1.0, 3.0, 2.0], x)):
        np.testing.assert_allclose(mg.vjp(fn, x)[0], fn(x), rtol=1e-14)
        check_grads(lambda x, fn=fn: np.sum(fn(x) * w), x)


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.complex128])
@pytest.mark.parametrize("kw", [{}, {"density": True}, {"bins": [0.0, 0.3, 1.0]}], ids=["uniform", "density", "edges"])
def test_histogram_of_no_data_with_traced_weights_is_numpys(dtype, kw):
    # (the weighted sums started from None: None, or a bare AttributeError / TypeError inside mutagrad)
    w = np.zeros(0, dtype)
    kw = {"bins": 2, "range": (0.0, 1.0), **kw}
    f = lambda w: np.histogram(np.zeros(0), weights=w, **kw)[0]
    with np.errstate(all="ignore"):
        want = f(w)
        got, pullback = mg.vjp(f, w)
    assert got.dtype == want.dtype and np.array_equal(got, want, equal_nan=True)
    if not kw.get("density"):
        (g,) = pullback(np.ones_like(got))
        assert g.shape == (0,) and g.dtype == dtype


@pytest.mark.parametrize("fn", [
    lambda w: np.histogram2d(np.zeros(0), np.zeros(0), bins=2, range=[[0, 1], [0, 1]], weights=w)[0],
    lambda w: np.histogramdd(np.zeros((0, 2)), bins=2, range=[[0, 1], [0, 1]], weights=w)[0],
], ids=["histogram2d", "histogramdd"])
def test_histogramdd_of_no_data_with_traced_weights_is_float_as_numpys(fn):
    # (np.bincount of no weights is an integer array; NumPy's histogramdd casts it to float)
    w = np.zeros(0)
    got = mg.vjp(fn, w)[0]
    assert got.dtype == fn(w).dtype == np.float64 and np.array_equal(got, fn(w))


@pytest.mark.parametrize("ufunc", [np.power, np.arctan2, np.subtract, np.hypot, np.true_divide])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_accumulate_folds_have_numpys_bits_and_the_folds_derivative(ufunc, dtype):
    # (NumPy's accumulate loop rounds power and arctan2 otherwise than the elementwise ufunc: the
    # left fold of np.power was 1-2 ulp away from np.power.accumulate)
    x = np.random.default_rng(3).uniform(0.5, 2.0, (4, 6)).astype(dtype)
    for axis in (0, 1):
        f = functools.partial(ufunc.accumulate, axis=axis)
        got = mg.vjp(f, x.copy())[0]
        want = f(x)
        assert got.dtype == want.dtype and np.array_equal(got, want)
    if dtype is np.float64:
        w = np.random.default_rng(4).standard_normal((4, 6))
        check_grads(lambda x: np.sum(w * ufunc.accumulate(x, axis=1)), x, modes=("fwd", "rev"))


@pytest.mark.parametrize("p", [1, -1, np.inf, -np.inf, "fro", "nuc", None, 2])
@pytest.mark.parametrize("dtype", [np.float32, np.complex64, np.float64])
def test_cond_has_numpys_bits_in_single_precision(p, dtype):
    # (NumPy inverts in double precision and casts the product back: mutagrad inverted in float32)
    rng = np.random.default_rng(5)
    for _ in range(5):
        a = rng.standard_normal((3, 3)) + 3 * np.eye(3)
        if np.dtype(dtype).kind == "c":
            a = a + 1j * rng.standard_normal((3, 3))
        a = a.astype(dtype)
        got = mg.vjp(lambda a: np.linalg.cond(a, p), a)[0]
        want = np.linalg.cond(a, p)
        assert type(got) is type(want) and got.dtype == want.dtype and np.array_equal(got, want)


def test_median_and_quantile_results_are_numpys_scalars_or_arrays():
    # (a NaN lane made the median a 0-d array; the weighted quantile a scalar; keepdims of a 0-d
    # array a scalar, where NumPy returns the other kind)
    x = np.array([0.5, np.nan, 0.1])
    w = np.array([1.0, 2.0, 3.0])
    calls = [lambda x: np.median(x), lambda x: np.median(x, axis=0), lambda x: np.nanmedian(x),
             lambda x: np.quantile(x, 0.5, weights=w, method="inverted_cdf"),
             lambda x: np.quantile(x, 0.5, axis=0, weights=w, method="inverted_cdf")]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        for x0 in (x, np.array([0.5, 0.3, 0.1])):
            for f in calls:
                got, want = mg.vjp(f, x0.copy())[0], f(x0)
                assert type(got) is type(want) and np.array_equal(got, want, equal_nan=True)
        for f in (lambda x: np.median(x, keepdims=True), lambda x: np.nanmedian(x, keepdims=True),
                  lambda x: np.percentile(x, 40, keepdims=True), lambda x: np.nanquantile(x, 0.4, keepdims=True)):
            x0 = np.array(0.3)
            got, want = mg.vjp(f, x0)[0], f(x0)
            assert type(got) is type(want) is np.ndarray and got.shape == () and got == want
    np.testing.assert_allclose(mg.grad(lambda x: np.quantile(x, 0.5, weights=w, method="inverted_cdf"))(
        np.array([0.5, 0.3, 0.1])), [0.0, 0.0, 1.0])  # (by hand: sorted, 0.1 of weight 3 reaches 3/6 = q)


def test_folds_keep_numpys_signed_zeros_and_scalars():
    # (the bit correction added +0.0 to every element, turning NumPy's -0.0 into +0.0: arctan2 of
    # it then gave another value; a reduction to one value was a 0-d array where NumPy gives a scalar)
    x = np.array([[-0.0, 1.5, 0.75, 1.125, 1.75], [1.25, 1.5, 0.75, 1.125, 1.75]])

    def f(x):
        a = np.arctan2.accumulate(x, axis=1)
        return np.arctan2(a[0, 0], -1.0) + a[1, -1]

    assert mg.value_and_grad(f)(x.copy())[0] == f(x.copy())
    for ufunc in (np.subtract, np.divide, np.hypot, np.fmod, np.float_power):
        for v, kw in ((np.array([2.5]), {}), (np.zeros(0), {"initial": 1.5}), (np.array([2.5, 1.25]), {})):
            got, want = mg.vjp(lambda v, u=ufunc, kw=kw: u.reduce(v, **kw), v)[0], ufunc.reduce(v, **kw)
            assert type(got) is type(want) and got == want


def test_fold_reduce_into_a_narrower_out_has_numpys_bits():
    # NumPy accumulates in out=, rounding each step to its dtype
    x = np.random.default_rng(2).uniform(-1, 1, (9, 2))
    f = lambda x: np.subtract.reduce(x, axis=0, out=mnp.empty(2, np.float32))
    want = np.subtract.reduce(x, axis=0, out=np.empty(2, np.float32))
    got = mg.vjp(f, x.copy())[0]
    assert got.dtype == np.float32 and np.array_equal(got, want)
    g = mg.grad(lambda x: np.sum(f(x)))(x.copy())
    np.testing.assert_allclose(g, np.vstack([np.ones(2), -np.ones((8, 2))]))  # (d/dx of x0 - x1 - ...)


def test_float_power_accumulate_of_nothing_is_float64_as_numpys():
    x = np.zeros(0, np.float32)
    assert mg.vjp(np.float_power.accumulate, x)[0].dtype == np.float_power.accumulate(x).dtype == np.float64


def _partitions_as_numpy(f, x0):
    """``f``'s value and the array it partitions in place are a plain call's, bit for bit; its
    gradient is central differences' (the partition is locally constant)."""
    plain = x0.copy()
    want = f(plain)
    x = x0.copy()
    val, g = mg.value_and_grad(f)(x)
    assert val == want and np.array_equal(x, plain)
    np.testing.assert_allclose(g, numerical_grad(lambda a: f(a.copy()), (x0.copy(),), (0,))[0], atol=1e-8)


@pytest.mark.parametrize("fn", [np.nanquantile, np.nanpercentile])
def test_nanquantile_overwrite_input_with_keepdims_partitions_once(fn):
    # (the layout step ran NumPy's call again on the argument's memory: a second, unrecorded partition)
    x0 = np.array([[0.9, -0.2, 0.4], [-0.7, 0.1, 0.6], [0.3, -0.5, 0.8]])
    w = np.arange(9.0).reshape(3, 3)

    def f(x):
        fn(x, 50.0 if fn is np.nanpercentile else 0.5, keepdims=True, overwrite_input=True)
        return np.sum(x * w)

    _partitions_as_numpy(f, x0)


def test_cond_of_singular_and_empty_stacks_is_numpys():
    # (mutagrad's inverse raised LinAlgError('Singular matrix') where NumPy returns inf; an empty
    # stack raised where NumPy returns []; an inf entry gave a 0-d array for NumPy's scalar)
    S = np.array([[1.0, 1.0], [1.0, 1.0]])
    A = np.array([[2.0, 0.5], [0.3, 1.0]])
    for p in (1, -1, np.inf, -np.inf, "fro", "nuc", None, 2):
        for x in (S, np.array([[1.0, np.inf], [0.5, 2.0]]), np.stack([S, A]), np.zeros((0, 2, 2))):
            with np.errstate(all="ignore"):
                try:
                    want = np.linalg.cond(x, p)
                except np.linalg.LinAlgError:  # (NumPy's SVD of an inf entry, p="nuc": the same error)
                    with pytest.raises(np.linalg.LinAlgError):
                        mg.vjp(lambda a, p=p: np.linalg.cond(a, p), x.copy())
                    continue
                got = mg.vjp(lambda a, p=p: np.linalg.cond(a, p), x.copy())[0]
            assert type(got) is type(want) and np.array_equal(got, want, equal_nan=True), (p, x)
        if p in (1, "fro"):  # the invertible matrix of a stack keeps its derivative (by finite differences)
            J = mg.jacobian(lambda a, p=p: np.linalg.cond(a, p))(np.stack([S, A]))
            fd = numerical_grad(lambda a, p=p: np.linalg.cond(a, p), (A.copy(),), (0,))[0]
            np.testing.assert_allclose(J[1, 1], fd, rtol=1e-6)


@pytest.mark.parametrize("ufunc", [np.subtract, np.divide, np.float_power, np.fmod, np.copysign, np.remainder])
def test_reduceat_of_the_folded_ufuncs(ufunc):
    # (NoRuleError before: each segment is the fold of ufunc.reduce, NumPy's bits)
    x = np.random.default_rng(6).uniform(0.5, 2.0, (7, 3))
    w = np.random.default_rng(7).standard_normal((4, 3))
    for idx in ([0, 2, 5, 6], [0, 3, 1, 6]):  # (3 >= 1: x[3] alone, as NumPy)
        got = mg.vjp(lambda x, idx=idx: ufunc.reduceat(x, idx, axis=0), x.copy())[0]
        want = ufunc.reduceat(x, idx, axis=0)
        assert got.dtype == want.dtype and np.array_equal(got, want)
        check_grads(lambda x, idx=idx: np.sum(w * ufunc.reduceat(x, idx, axis=0)), x, modes=("fwd", "rev"))


@pytest.mark.parametrize("view", [lambda x: x[:, ::-1], lambda x: x.T, lambda x: x[:, ::2], lambda x: x[:, 1::2]])
@pytest.mark.parametrize("axis", [0, 1])
def test_nanquantile_overwrite_input_partitions_the_lanes_numpy_partitions(view, axis):
    # NumPy partitions a contiguous lane in place and a copy of any other (x[:, ::-1] is left as it
    # is, x.T along axis 0 is partitioned): mutagrad ran NumPy on a C-ordered copy
    x0 = np.array([[0.4, -0.3, 0.9, 0.1], [0.2, 0.8, -0.5, 0.6]])
    w = np.arange(8.0).reshape(2, 4)

    def f(x):
        np.nanquantile(view(x), 0.5, axis=axis, overwrite_input=True)
        return np.sum(x * w)

    _partitions_as_numpy(f, x0)


def test_ufunc_methods_of_0d_arrays_are_numpys():
    # (a bare AxisError from the fold of a 0-d array; accumulate of one returned a (1,) array; polyval
    # of 0-d coefficients a bare IndexError: NumPy's values and TypeErrors)
    for ufunc in (np.subtract, np.divide, np.logaddexp, np.hypot):
        for kw in ({}, {"initial": 1.0}, {"keepdims": True}, {"axis": None}):
            want = ufunc.reduce(np.array(1.7), **kw)
            got = mg.vjp(lambda x, u=ufunc, kw=kw: u.reduce(x, **kw), np.array(1.7))[0]
            assert type(got) is type(want) and got == want
        g = mg.grad(lambda x, u=ufunc: u.reduce(x, initial=1.0))(np.array(1.7))
        np.testing.assert_allclose(g, numerical_grad(lambda x, u=ufunc: u.reduce(x, initial=1.0), (np.array(1.7),),
                                                     (0,))[0], rtol=1e-7)
    for call in (lambda x: np.add.accumulate(x[0]), lambda x: np.subtract.accumulate(x[0]),
                 lambda x: np.polyval(x[0], 0.5)):
        with pytest.raises(TypeError):
            call(np.array([1.3, 0.5]))
        with pytest.raises(TypeError):
            mg.vjp(call, np.array([1.3, 0.5]))


def test_reduceat_keeps_numpys_loops_axes_and_indices():
    # (a dtype= NumPy has no loop for gave numbers; axis=None of a 1-d array and float indices were
    # bare TypeErrors; bool and int32 loops came back as int64)
    x = np.array([1.5, -0.8, 1.2, 2.0, 0.7])
    for ufunc, dtype in ((np.float_power, np.float32), (np.divide, np.int64)):
        with pytest.raises(TypeError):
            ufunc.reduceat(x, [0, 2], dtype=dtype)
        with pytest.raises(TypeError):
            mg.vjp(lambda x, u=ufunc, d=dtype: u.reduceat(x, [0, 2], dtype=d), x)
    for call in (lambda x: np.subtract.reduceat(x, [0, 2], axis=None), lambda x: np.subtract.reduceat(x, [0.0, 2]),
                 lambda x: np.add.reduceat(x, [0, 2, 4], dtype=bool), lambda x: np.maximum.reduceat(x, [0, 3], dtype=bool),
                 lambda x: np.multiply.reduceat(x, [0, 2, 3], dtype=np.int32)):
        got, want = mg.vjp(call, x.copy())[0], call(x)
        assert got.dtype == want.dtype and np.array_equal(got, want)
    check_grads(lambda x: np.sum(np.subtract.reduceat(x, [0.0, 2], axis=None) ** 2), x, modes=("fwd", "rev"))


@pytest.mark.parametrize("expr", ["np.float_power.accumulate(x, dtype=np.float32)",
                                  "np.logaddexp.reduce(x, dtype=np.int64)", "np.copysign.accumulate(x, dtype=np.int64)",
                                  "np.arctan2.accumulate(x, dtype=np.int64)", "np.logaddexp2.accumulate(x, dtype=np.int32)",
                                  "np.true_divide.accumulate(x, dtype=np.int64)",
                                  "np.float_power.reduce(x, dtype=np.float32)"])
def test_a_fold_with_a_dtype_numpy_has_no_loop_for_raises_numpys_error(expr):
    # (the folds cast to dtype= and computed: numbers where NumPy has no loop for that dtype)
    call = eval(f"lambda x: {expr}", {"np": np})  # (the test's own expressions)
    x = np.array([1.5, 2.0, 0.7])
    with pytest.raises(TypeError) as plain:
        call(x.copy())
    for run in (lambda: mg.vjp(call, x.copy()), lambda: mg.jvp(call, (x.copy(),), (np.ones(3),))):
        with pytest.raises(TypeError) as traced:
            run()
        assert str(traced.value) == str(plain.value)


def test_reduceat_with_an_integer_loop_is_numpys():
    # (maximum/minimum.reduceat(x, ..., dtype=np.int64) picked from the floats: [1 2 0] for NumPy's [1 2 1])
    x = np.array([0.7, 1.3, 2.1, 0.4, 1.9, 1.1])
    for ufunc in (np.maximum, np.minimum, np.fmax, np.fmin, np.add, np.multiply):
        for dt in (np.int64, np.int32, bool):
            call = lambda x, u=ufunc, dt=dt: u.reduceat(x, [0, 2, 3], dtype=dt)
            got, want = mg.vjp(call, x.copy())[0], call(x)
            assert got.dtype == want.dtype and np.array_equal(got, want)


def test_hessian_names_itself_where_its_runs_differ():
    # (an array output: forward over reverse, one run per element; a real scalar output is one run)
    state = [0.0]

    def f(x):
        state[0] += 1.0
        return np.sin(state[0] * x) ** 2

    with pytest.raises(mg.MutationError, match=r"^hessian at .*test_statistics\.py"):
        mg.hessian(f)(np.array([0.3, 0.5]))


def test_a_second_derivative_through_a_sorted_tie_warns_unless_the_tie_moves_alike():
    # (regress125) np.sum(np.sort(x) ** 2) is np.sum(x ** 2), smooth everywhere, but at tied x the even share of the
    # tie's derivative gives every Hessian entry 2/3 for 2 I, silently: it warns now (hessian, jvp of grad, the median
    # too). Quiet where the tied values move alike (copies of one value, a ReLU's zeros), whose Hessians are right
    # (against central differences), at first order, and away from ties
    from tests._oracles import fd_hessian

    f = lambda x: np.sum(np.sort(x) ** 2)
    for run in (lambda: mg.hessian(f)(np.zeros(3)), lambda: mg.jvp(mg.grad(f), (np.zeros(3),), (np.eye(3)[0],)),
                lambda: mg.hessian(lambda x: np.median(x) ** 2)(np.array([0.2, 0.2, 0.5]))):
        with pytest.warns(mg.KinkWarning, match="a tie among sorted values"):
            run()
    quiet = [(lambda x: np.sum(np.sort(x[[0, 0, 1]]) ** 2), np.array([0.5, 0.7])),
             (lambda x: np.sum(np.sort(np.maximum(x, 0.0)) ** 3), np.array([-0.5, -0.7, 0.3])),
             (f, np.array([0.1, 0.3, 0.2]))]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for g, x in quiet:
            np.testing.assert_allclose(mg.hessian(g)(x), fd_hessian(g, x), rtol=1e-6, atol=1e-6)
        np.testing.assert_array_equal(mg.grad(f)(np.zeros(3)), np.zeros(3))


def test_a_tied_order_statistic_shares_its_derivative_as_clip_and_max_do():
    # (the sortstats tester) the winsorized mean at a 95th percentile on a tied pair got 0.5 and 2.5 for
    # the pair, outside the one-sided slopes 1 and 2; a tie of two is where central differences give the
    # mean of the one-sided slopes, the derivative of sharing the tie evenly
    x = np.round(np.linspace(0.0, 2.0, 21) ** 1.3, 1)
    x[18] = x[19] = 2.2
    x[20] = 2.5
    x = np.random.default_rng(0).permutation(x)
    assert np.sum(x == np.percentile(x, 95)) == 2  # (the case)

    def winsorized(a, pick):
        lo, hi = pick(a)
        return np.mean(np.clip(a, lo, hi))

    picks = [lambda a: np.percentile(a, [5, 95]), lambda a: np.sort(a)[[1, 19]],
             lambda a: np.partition(a, [1, 19])[[1, 19]], lambda a: np.quantile(a, [0.05, 0.95], method="lower")]
    for pick in picks:
        f = functools.partial(winsorized, pick=pick)
        g = mg.grad(f)(x.copy())
        np.testing.assert_allclose(g, numerical_grad(f, (x,), (0,))[0], rtol=1e-6, atol=1e-9)
        np.testing.assert_allclose(mg.jvp(f, (x.copy(),), (np.ones(21),))[1], np.sum(g), rtol=1e-12)
    # identities at a tied maximum: their derivatives are those of the identities, exactly
    a = np.array([0.3, 2.0, -0.5, 1.0, 2.0, -1.2])
    for f, want in [(lambda a: np.sum(np.clip(a, *np.percentile(a, [0, 100]))), np.ones(6)),
                    (lambda a: np.max(a) - np.sort(a)[-1], np.zeros(6)),
                    (lambda a: np.max(a) - np.partition(a, -1)[-1], np.zeros(6)),
                    (lambda a: np.sum(np.partition(a, -2)), np.ones(6))]:
        np.testing.assert_array_equal(mg.grad(f)(a.copy()), want)

    def sorted_in_place(a):
        b = a * 1.0
        b.sort()
        return b[-1] - np.max(a)

    np.testing.assert_array_equal(mg.grad(sorted_in_place)(a.copy()), np.zeros(6))
    # long lanes (read by partition) and sorted ones give the same shares
    lane = np.round(np.random.default_rng(3).standard_normal(301), 1)
    g1 = mg.grad(lambda a: np.median(a))(lane.copy())
    g2 = mg.grad(lambda a: np.sort(a)[150])(lane.copy())
    tied = lane == np.median(lane)
    assert tied.sum() > 1
    np.testing.assert_allclose(g1, np.where(tied, 1.0 / tied.sum(), 0.0), rtol=1e-15)
    np.testing.assert_allclose(g2, g1, rtol=1e-15)


def test_tied_sorts_share_in_complex_and_float32_and_along_an_axis():
    # the even shares by parts for complex values (np.bincount takes real weights: it raised), in the input's
    # dtype for float32, and per lane along an axis; oracles: the rank weights by hand, central differences
    z = np.array([1 + 1j, 0.5 + 0j, 1 + 1j, 2 - 1j])
    w = np.arange(1.0, 5.0)
    f = lambda z: np.real(np.sum(w * np.sort(z) * np.conj(np.sort(z))))
    # d/dz of sum w_r |z_(r)|^2 (mutagrad's convention df/dx - i df/dy: 2 w conj(z)); the tie at ranks 1, 2 shares 2.5
    want = 2 * np.array([2.5, 1.0, 2.5, 4.0]) * np.conj(z)
    np.testing.assert_allclose(mg.grad(f)(z.copy()), want, rtol=1e-15)
    np.testing.assert_allclose(mg.jvp(f, (z.copy(),), (np.array([1, 0, 0, 0j]),))[1], want[0].real, rtol=1e-15)
    x32 = np.array([1.0, 2.0, 1.0, 0.0], dtype=np.float32)
    g = mg.grad(lambda x: np.sum(np.sort(x) * np.arange(4.0, dtype=np.float32)))(x32)
    assert g.dtype == np.float32
    np.testing.assert_array_equal(g, np.array([1.5, 3.0, 1.5, 0.0], dtype=np.float32))
    h = lambda x: np.sum(np.sort(x, axis=0) * np.arange(6.0).reshape(3, 2))
    x = np.array([[1.0, 2.0], [1.0, 2.0], [0.0, 3.0]])
    np.testing.assert_allclose(mg.grad(h)(x.copy()), numerical_grad(h, (x,), (0,))[0], rtol=1e-7)


@pytest.mark.parametrize("ufunc", [np.subtract, np.divide, np.hypot])
def test_running_folds_of_subtract_divide_and_hypot_are_a_few_operations(ufunc):
    # (the npfunctional tester: one operation per element, ~10^4x the primal at n = 20000) x_0 less a running
    # sum, over a running product, the running norm: a few operations, NumPy's values; the derivatives against
    # central differences of NumPy's own accumulate, along either axis, and the Hessian against the other mode
    rng = np.random.default_rng(4980)
    x = rng.uniform(0.5, 2.0, (6, 5)) * rng.choice([-1.0, 1.0], (6, 5))
    w = rng.standard_normal((6, 5))
    for axis in (0, 1):
        f = lambda x, axis=axis: np.sum(w * ufunc.accumulate(x, axis=axis))
        assert str(mg.explain(f, x)).count(" op ") < 12
        np.testing.assert_array_equal(mg.vjp(lambda x, axis=axis: ufunc.accumulate(x, axis=axis), x)[0],
                                      ufunc.accumulate(x, axis=axis))
        want = numerical_grad(f, (x,), (0,))[0]
        np.testing.assert_allclose(mg.grad(f)(x), want, rtol=1e-6, atol=1e-8)
        np.testing.assert_allclose(mg.jvp(f, (x,), (w,))[1], np.sum(want * w), rtol=1e-6)
    g = lambda v: np.sum(ufunc.accumulate(v) ** 2)
    v = x[0]
    np.testing.assert_allclose(mg.hessian(g)(v), mg.jacobian(mg.grad(g), mode="rev")(v), rtol=1e-10, atol=1e-12)
    # where the formula could part from the fold (a zero factor, a zero start of the norm, a non-finite value)
    # the elementwise fold runs, with its derivative (central differences where it is smooth)
    edge = {np.subtract: np.array([1.0, np.inf, 2.0]), np.divide: np.array([0.0, 2.0, 0.5]),
            np.hypot: np.array([0.0, 0.0, 1.5, -2.0])}[ufunc]
    assert str(mg.explain(lambda v: np.sum(ufunc.accumulate(v)), edge)).count(" op ") >= len(edge) - 1
    if np.all(np.isfinite(edge)) and ufunc is not np.hypot:
        h = lambda v: np.sum(np.linspace(1.0, 2.0, len(edge)) * ufunc.accumulate(v))
        np.testing.assert_allclose(mg.grad(h)(edge), numerical_grad(h, (edge,), (0,))[0], rtol=1e-6)


def test_subtract_reduceat_is_a_few_operations():
    # (the npfunctional tester: 32000x the primal at segments of 10) each segment's first value less the others'
    # sum in one pass; NumPy's values, an empty segment (5 >= 5) its start alone; central differences
    rng = np.random.default_rng(4981)
    x = rng.standard_normal((4, 9))
    starts = [0, 2, 5, 5, 8]
    w = rng.standard_normal((4, 5))
    f = lambda x: np.sum(w * np.subtract.reduceat(x, starts, axis=1))
    assert str(mg.explain(f, x)).count(" op ") < 12
    np.testing.assert_array_equal(mg.vjp(lambda x: np.subtract.reduceat(x, starts, axis=1), x)[0],
                                  np.subtract.reduceat(x, starts, axis=1))
    np.testing.assert_allclose(mg.grad(f)(x), numerical_grad(f, (x,), (0,))[0], rtol=1e-6, atol=1e-8)
