"""mutagrad.scipy.spatial (distance_matrix, minkowski_distance(_p)) and mutagrad.scipy.spatial.distance
(pdist, cdist, squareform, the pair functions).

Every derivative against central differences of SciPy's own function on plain arrays (check_grads:
mutagrad's functions call SciPy's when nothing is traced), forward against reverse mode (the
dot-product identity, and whole Jacobians both ways); second order (mg.hessian of a scalar of the
distances) against second differences of SciPy's function (tests/_oracles.fd_hessian); the values
against SciPy's with every float argument traced (rtol 1e-12), SciPy's own result when nothing is;
the refusals (boolean metrics, complex points, a plain out=, a traced p = inf) and SciPy's errors."""
import re
import warnings

import numpy as np
import pytest

import mutagrad as mg
import mutagrad.numpy as mnp
from mutagrad.errors import NoRuleError, UnsupportedInputError, WriteToPlainArrayError
from mutagrad.testing import check_grads

sd = pytest.importorskip("scipy.spatial.distance")
import scipy.spatial as sp

import mutagrad.scipy.spatial as msp
import mutagrad.scipy.spatial.distance as msd
from tests._oracles import fd_hessian
from tests.rules._draws import Draws, assert_raises_as_theirs, float_argnums

D = Draws(71)
X = D.R(5, 3)  # five points in 3-d (mahalanobis without VI needs more points than dimensions)
XA, XB = D.R(4, 3), D.R(3, 3)
XP, XQ = D.P(5, 3), D.P(3, 3)  # positive coordinates (braycurtis, canberra: away from their kinks)
W = D.P(3)
V = D.P(3)
VI = np.linalg.inv(D.SPD(3))
U, Vv = D.R(4), D.R(4)

METRICS = ("euclidean", "sqeuclidean", "cityblock", "chebyshev", "minkowski", "cosine", "correlation",
           "seuclidean", "mahalanobis", "braycurtis", "canberra")
WEIGHTED = ("euclidean", "sqeuclidean", "cityblock", "chebyshev", "minkowski", "cosine", "correlation",
            "braycurtis", "canberra")
POSITIVE = ("braycurtis", "canberra")


def _pts(metric, *arrays):
    return (XP, XQ)[:len(arrays)] if metric in POSITIVE else arrays


CASES = [  # (what it covers, function, arguments)
    # pdist and cdist: every metric in the points; weights, V, VI and p as arguments too
    *[("pdist", lambda x, m=m: msd.pdist(x, m), _pts(m, X)) for m in METRICS],
    *[("cdist", lambda a, b, m=m: msd.cdist(a, b, m), _pts(m, XA, XB)) for m in METRICS],
    *[("pdist", lambda x, w, m=m: msd.pdist(x, m, w=w), (*_pts(m, X), W)) for m in WEIGHTED],
    *[("cdist", lambda a, b, w, m=m: msd.cdist(a, b, m, w=w), (*_pts(m, XA, XB), W)) for m in WEIGHTED],
    ("pdist", lambda x, p: msd.pdist(x, "minkowski", p=p), (X, 3.0)),
    ("pdist", lambda x, p: msd.pdist(x, "minkowski", p=p), (X, 2.0)),  # (a traced p = 2: the general formula)
    ("cdist", lambda a, b, w: msd.cdist(a, b, "minkowski", p=1.5, w=w), (XA, XB, W)),
    ("cdist", lambda a, b, w: msd.cdist(a, b, "minkowski", p=np.inf, w=w), (XA, XB, W)),
    ("pdist", lambda x, v: msd.pdist(x, "seuclidean", V=v), (X, V)),
    ("cdist", lambda a, b, v: msd.cdist(a, b, "seuclidean", V=v), (XA, XB, V)),
    ("pdist", lambda x, vi: msd.pdist(x, "mahalanobis", VI=vi), (X, VI)),
    ("cdist", lambda a, b, vi: msd.cdist(a, b, "mahalanobis", VI=vi), (XA, XB, VI)),
    ("pdist", lambda w: msd.pdist(X, "cosine", w=w), (W,)),  # (only the weights traced)
    ("pdist", lambda x: msd.pdist(x, "test_euclidean"), (X,)),  # (SciPy's test_ metrics: the pair function)
    ("cdist", lambda a, b: msd.cdist(a, b, "eu"), (XA, XB)),  # (an alias)
    # callable metrics, per pair: the user's, and SciPy's own pair function (replaced by ours)
    ("pdist", lambda x: msd.pdist(x, lambda u, v: np.sum(np.sin(u) * v)), (X,)),
    ("cdist", lambda a, b: msd.cdist(a, b, lambda u, v: np.sqrt(np.sum((u - v) ** 2))), (XA, XB)),
    ("pdist", lambda x: msd.pdist(x, sd.mahalanobis), (X,)),
    ("cdist", lambda a, b: msd.cdist(a, b, sd.minkowski, p=3.0), (XA, XB)),
    # squareform, both ways
    ("squareform", lambda d: msd.squareform(d), (D.R(10),)),
    ("squareform", lambda m: msd.squareform(m + m.T, checks=False), (np.triu(D.R(4, 4), 1),)),
    ("squareform", lambda x: msd.squareform(msd.pdist(x)), (X,)),
    # the pair functions
    ("euclidean", lambda u, v: msd.euclidean(u, v), (U, Vv)),
    ("euclidean", lambda u, v, w: msd.euclidean(u, v, w), (U, Vv, D.P(4))),
    ("sqeuclidean", lambda u, v, w: msd.sqeuclidean(u, v, w), (U, Vv, D.P(4))),
    ("cityblock", lambda u, v, w: msd.cityblock(u, v, w), (U, Vv, D.P(4))),
    ("chebyshev", lambda u, v: msd.chebyshev(u, v), (U, Vv)),
    ("chebyshev", lambda u, v, w: msd.chebyshev(u, v, w), (U, Vv, D.P(4))),
    ("minkowski", lambda u, v, p: msd.minkowski(u, v, p), (U, Vv, 3.0)),
    ("minkowski", lambda u, v, w: msd.minkowski(u, v, 2.5, w), (U, Vv, D.P(4))),
    ("minkowski", lambda u, v, w: msd.minkowski(u, v, 1, w), (U, Vv, D.P(4))),
    ("cosine", lambda u, v, w: msd.cosine(u, v, w), (U, Vv, D.P(4))),
    ("correlation", lambda u, v: msd.correlation(u, v), (U, Vv)),
    ("correlation", lambda u, v, w: msd.correlation(u, v, w), (U, Vv, D.P(4))),
    ("correlation", lambda u, v, w: msd.correlation(u, v, w, centered=False), (U, Vv, D.P(4))),
    ("seuclidean", lambda u, v, var: msd.seuclidean(u, v, var), (U, Vv, D.P(4))),
    ("mahalanobis", lambda u, v, vi: msd.mahalanobis(u, v, vi), (U, Vv, np.linalg.inv(D.SPD(4)))),
    ("braycurtis", lambda u, v, w: msd.braycurtis(u, v, w), (D.P(4), D.P(4), D.P(4))),
    ("canberra", lambda u, v: msd.canberra(u, v), (D.R(4), D.R(4))),
    ("canberra", lambda u, v, w: msd.canberra(u, v, w), (D.P(4), D.P(4), D.P(4))),
    # scipy.spatial's
    ("distance_matrix", lambda a, b: msp.distance_matrix(a, b), (XA, XB)),
    ("distance_matrix", lambda a, b, p: msp.distance_matrix(a, b, p), (XA, XB, 3.0)),
    ("distance_matrix", lambda a, b: msp.distance_matrix(a, b, 1, threshold=5), (XA, XB)),  # (SciPy's loop)
    ("distance_matrix", lambda a, b: msp.distance_matrix(a, b, np.inf, threshold=5), (XB, XA)),
    ("minkowski_distance", lambda a, b: msp.minkowski_distance(a, b), (XA, XB[:1])),
    ("minkowski_distance", lambda a, b, p: msp.minkowski_distance(a, b, p), (XA[0], XB[0], 1.5)),
    ("minkowski_distance_p", lambda a, b: msp.minkowski_distance_p(a, b, 3), (XA, XB[0])),
    ("minkowski_distance_p", lambda a, b: msp.minkowski_distance_p(a, b, np.inf), (XA, XB[0])),
    ("minkowski_distance_p", lambda a, b, p: msp.minkowski_distance_p(a, b, p), (XA, XB[0], 1.0)),
]


@pytest.mark.parametrize("covers,fn,args", CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_derivatives(covers, fn, args):
    check_grads(fn, *args, modes=("fwd", "rev"))


def test_every_function_has_a_case():
    from mutagrad.rules.scipy import spatial

    assert {c[0] for c in CASES} == {name.split(".")[-1] for name in spatial.COMPOSITES}
    assert {c[0] for c in CASES if c[0] not in ("distance_matrix", "minkowski_distance", "minkowski_distance_p")
            } <= set(vars(msd))


@pytest.mark.parametrize("metric", ["euclidean", "cosine", "mahalanobis", "canberra", "chebyshev"])
def test_jacobian_forward_equals_reverse(metric):
    xa, xb = _pts(metric, XA, XB)
    f = lambda a: msd.cdist(a, xb, metric)
    np.testing.assert_allclose(mg.jacobian(f, mode="fwd")(xa), mg.jacobian(f, mode="rev")(xa), rtol=1e-12, atol=1e-14)
    g = lambda x: msd.pdist(x, metric)
    np.testing.assert_allclose(mg.jacobian(g, mode="fwd")(xa), mg.jacobian(g, mode="rev")(xa), rtol=1e-12, atol=1e-14)


SECOND = [  # (metric, keywords): a scalar of the distances, its Hessian in the points
    ("euclidean", {}), ("cosine", {}), ("correlation", {}), ("minkowski", {"p": 3.0}),
    ("seuclidean", {}), ("mahalanobis", {}), ("braycurtis", {}),
]


@pytest.mark.parametrize("metric,kw", SECOND, ids=[s[0] for s in SECOND])
def test_hessian_against_second_differences(metric, kw):
    x0 = XP if metric in POSITIVE else X

    def s(x, dist):
        return np.sum(np.sin(dist(np.reshape(x, x0.shape), metric, **kw)))

    H = mg.hessian(lambda x: s(x, msd.pdist))(x0.ravel())
    np.testing.assert_allclose(H, fd_hessian(lambda x: s(x, sd.pdist), x0.ravel()), rtol=1e-5, atol=1e-6)
    xb = XQ if metric in POSITIVE else XB

    def c(x, dist):
        return np.sum(np.cos(dist(np.reshape(x, x0.shape), xb, metric, **kw)))

    H = mg.hessian(lambda x: c(x, msd.cdist))(x0.ravel())
    np.testing.assert_allclose(H, fd_hessian(lambda x: c(x, sd.cdist), x0.ravel()), rtol=1e-5, atol=1e-6)


def test_second_order_in_the_parameters():
    check_grads(lambda x, vi: msd.pdist(x, "mahalanobis", VI=vi), X, VI, order=2)
    check_grads(lambda x, w, p: msd.cdist(x, XB, "minkowski", p=p, w=w), XA, W, 2.5, order=2)
    check_grads(lambda x: msp.distance_matrix(x, XB, 3.0), XA, order=2)


# -- values -------------------------------------------------------------------------------------------

VALUES = [  # (function, positional arguments, keywords): traced, against SciPy's call
    *[("pdist", _pts(m, X), {"metric": m}) for m in METRICS],
    *[("cdist", _pts(m, XA, XB), {"metric": m}) for m in METRICS],
    *[("pdist", _pts(m, X), {"metric": m, "w": W}) for m in WEIGHTED],
    *[("cdist", _pts(m, XA, XB), {"metric": m, "w": W}) for m in WEIGHTED],
    ("pdist", (X,), {"metric": "minkowski", "p": 0.7}),
    ("pdist", (X,), {"metric": "minkowski", "p": -1.0}),  # (SciPy's C code takes it)
    ("cdist", (XA, XB), {"metric": "minkowski", "p": 1}),
    ("cdist", (XA, XB), {"metric": "minkowski", "p": np.inf}),
    ("pdist", (X,), {"metric": "seuclidean", "V": V}),
    ("cdist", (XA, XB), {"metric": "mahalanobis", "VI": VI}),
    ("pdist", (X,), {"metric": "test_cosine"}),
    ("pdist", (X[:1],), {}),  # (one point: no pairs)
    ("cdist", (XA.astype(np.float32), XB), {"metric": "sqeuclidean"}),  # (SciPy computes in float64)
    ("squareform", (sd.pdist(X),), {}),
    ("squareform", (sd.squareform(sd.pdist(X)),), {}),
    ("squareform", (np.zeros(0),), {}),
    ("squareform", (np.zeros((1, 1)),), {}),
    ("distance_matrix", (XA, XB), {}),
    ("distance_matrix", (XA, XB), {"p": 1.5, "threshold": 5}),
    ("minkowski_distance", (XA, XB[0]), {"p": np.inf}),
    ("minkowski_distance_p", (XA, XB[0]), {"p": 1}),
    ("minkowski_distance", (XA + 1j * XA[::-1], XB[0]), {"p": 3}),  # (complex points: SciPy's |y - x|)
    *[(name, (U, Vv), {}) for name in ("euclidean", "sqeuclidean", "cityblock", "chebyshev", "minkowski", "cosine",
                                        "correlation", "canberra")],
    ("braycurtis", (D.P(4), D.P(4)), {"w": D.P(4)}),
    ("canberra", (np.array([0.0, 1.0, -2.0]), np.array([0.0, 3.0, 1.0])), {}),  # (a 0 / 0 term: 0)
    ("seuclidean", (U, Vv, D.P(4)), {}),
    ("mahalanobis", (U, Vv, np.linalg.inv(D.SPD(4))), {}),
    ("minkowski", (U, Vv), {"p": 3, "w": D.P(4)}),
]


@pytest.mark.parametrize("name,args,kw", VALUES, ids=[f"{v[0]}-{i}" for i, v in enumerate(VALUES)])
def test_values_are_scipys(name, args, kw):
    keys = [k for k, v in kw.items() if isinstance(v, np.ndarray)]  # (w, V, VI: traced too)
    ours, theirs = getattr(msd if hasattr(sd, name) else msp, name), getattr(sd if hasattr(sd, name) else sp, name)

    def f(*a):
        return ours(*a[:len(args)], **{**kw, **dict(zip(keys, a[len(args):]))})

    want = theirs(*args, **kw)
    argnums = float_argnums(args) + tuple(range(len(args), len(args) + len(keys)))
    got = np.asarray(mg.value(mg.vjp(f, *args, *(kw[k] for k in keys), _argnums=argnums)[0]))
    want = np.asarray(want)
    assert got.shape == want.shape and got.dtype == want.dtype, (got.shape, want.shape, got.dtype, want.dtype)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-15)
    plain = ours(*args, **kw)  # nothing traced: SciPy's own call, its result unchanged
    assert type(plain) is type(theirs(*args, **kw)) and np.array_equal(plain, want)


def test_squareform_is_a_gather():
    d = D.R(6)
    got = mg.vjp(msd.squareform, d)[0]
    assert np.array_equal(mg.value(got), sd.squareform(d))
    g = mg.grad(lambda d: np.sum(msd.squareform(d) * np.arange(16.0).reshape(4, 4)))(d)
    i, j = np.triu_indices(4, 1)
    np.testing.assert_array_equal(g, np.arange(16.0).reshape(4, 4)[i, j] + np.arange(16.0).reshape(4, 4)[j, i])


# -- kinks: zero distances ----------------------------------------------------------------------------

def test_cdist_of_x_with_itself_has_the_off_diagonal_gradient():
    """D = cdist(X, X): the diagonal is 0 for every X (its derivative 0, as mutagrad's np.sqrt of a sum of
    squares gives there): the gradient is the off-diagonal distances', which FD of SciPy's confirms."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # (no warning, no NaN: the diagonal is identically 0)
        g = mg.grad(lambda x: np.sum(msd.cdist(x, x)))(X)
    assert np.all(np.isfinite(g))
    np.testing.assert_allclose(g, 2 * mg.grad(lambda x: np.sum(msd.pdist(x)))(X), rtol=1e-12)
    check_grads(lambda x: msd.cdist(x, x), X)
    # a higher derivative: mutagrad's own np.sqrt of a sum of squares warns at the zeros (it cannot tell an
    # identically 0 diagonal from two equal points), and the value is right (the diagonal's part is 0)
    with pytest.warns(mg.KinkWarning, match="euclidean distance of scipy.spatial.distance at a zero distance"):
        H = mg.hessian(lambda x: np.sum(np.exp(-msd.cdist(x, x) ** 2)))(X)
    s = lambda x: np.sum(np.exp(-sd.cdist(x.reshape(X.shape), x.reshape(X.shape)) ** 2))
    np.testing.assert_allclose(H.reshape(X.size, X.size), fd_hessian(s, X.ravel()), rtol=1e-5, atol=1e-6)
    with pytest.warns(mg.KinkWarning):
        H = mg.hessian(lambda x: np.sum(msd.cdist(x, x)))(X)
    np.testing.assert_allclose(H, 2 * mg.hessian(lambda x: np.sum(msd.pdist(x)))(X), rtol=1e-12, atol=1e-14)


def test_squared_minkowski_terms_are_smooth_at_equal_points():
    """|d| ** 2 through np.abs would give a second derivative 0 at d = 0: p = 2 is written d * d (SciPy's
    values), whose Hessian is 2 there, with no warning."""
    c = np.array([1.0, -2.0])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        np.testing.assert_array_equal(mg.hessian(lambda x: msp.minkowski_distance_p(x, c))(c), 2 * np.eye(2))
        H = mg.hessian(lambda x: np.sum(msd.pdist(x, "sqeuclidean")))(np.stack([c, c]))
    np.testing.assert_array_equal(H.reshape(4, 4), np.kron([[2.0, -2.0], [-2.0, 2.0]], np.eye(2)))


def test_coincident_points_follow_mutagrads_sqrt_and_abs():
    x = np.array([[0.0, 1.0], [0.0, 1.0], [2.0, -1.0]])  # points 0 and 1 coincide: a kink of the distance
    want = mg.grad(lambda x: np.sum(np.sqrt(np.sum((x[[0, 0, 1]] - x[[1, 2, 2]]) ** 2, axis=1))))(x)
    np.testing.assert_array_equal(mg.grad(lambda x: np.sum(msd.pdist(x)))(x), want)
    assert np.all(np.isfinite(want))
    want = mg.grad(lambda x: np.sum(np.abs(x[[0, 0, 1]] - x[[1, 2, 2]])))(x)
    np.testing.assert_array_equal(mg.grad(lambda x: np.sum(msd.pdist(x, "cityblock")))(x), want)
    with pytest.warns(mg.KinkWarning):
        mg.hessian(lambda x: np.sum(msd.pdist(x)))(x)


def test_chebyshev_tie_is_shared_as_np_max():
    u, v = np.array([1.0, -1.0, 0.5]), np.zeros(3)
    np.testing.assert_allclose(mg.grad(lambda u: msd.chebyshev(u, v))(u), [0.5, -0.5, 0.0])


# -- out= ---------------------------------------------------------------------------------------------

def test_out_into_a_traced_buffer():
    def f(x):
        out = mnp.empty(10)
        r = msd.pdist(x, "cityblock", out=out)
        assert r is out
        return out * 2.0

    check_grads(f, X)

    def g(a):
        out = mnp.zeros((4, 3))
        msd.cdist(a, XB, out=out)
        return out

    check_grads(g, XA)
    assert np.array_equal(mg.vjp(g, XA)[0], sd.cdist(XA, XB))


def test_plain_out_is_refused():
    with pytest.raises(WriteToPlainArrayError, match=r"scipy\.spatial\.distance\.pdist .*out= is a plain"):
        mg.grad(lambda x: np.sum(msd.pdist(x, out=np.empty(10))))(X)
    with pytest.raises(ValueError, match="Output array has incorrect shape"):
        mg.grad(lambda x: np.sum(msd.cdist(x, XB, out=mnp.empty(3))))(XA)


# -- refusals and SciPy's errors ----------------------------------------------------------------------

@pytest.mark.parametrize("metric", ["hamming", "jaccard", "dice", "yule", "matching", "rogerstanimoto"])
def test_boolean_metrics_are_refused(metric):
    with pytest.raises(NoRuleError, match=r"scipy\.spatial\.distance\.pdist .*piecewise-constant"):
        mg.grad(lambda x: np.sum(msd.pdist(x, metric)))(X)
    with pytest.raises(NoRuleError, match=r"scipy\.spatial\.distance\.cdist .*piecewise-constant"):
        mg.grad(lambda x: np.sum(msd.cdist(x, XB, metric)))(XA)
    assert np.array_equal(msd.pdist(X > 0, metric), sd.pdist(X > 0, metric))  # (plain: SciPy's)


def test_scipys_boolean_pair_function_as_metric_is_refused():
    with pytest.raises(NoRuleError, match=r"cdist .*'hamming'.*piecewise-constant"):
        mg.grad(lambda x: np.sum(msd.cdist(x, XB, sd.hamming)))(XA)


def test_jensenshannon_is_refused():
    with pytest.raises(NoRuleError, match=r"scipy\.spatial\.distance\.pdist at .*'jensenshannon'.*does not differentiate"):
        mg.grad(lambda x: np.sum(msd.pdist(x, "jensenshannon")))(XP)


def test_complex_points_are_refused():
    with pytest.raises(UnsupportedInputError, match=r"scipy\.spatial\.distance\.cdist .*complex points"):
        mg.vjp(lambda x: msd.cdist(x, XB), XA + 1j)
    with pytest.raises(TypeError, match="must be real"):
        mg.grad(lambda u: msd.cosine(u, U))(U + 1j)


def test_traced_infinite_p_is_refused():
    with pytest.raises(UnsupportedInputError, match=r"scipy\.spatial\.distance\.pdist .*traced p = inf"):
        mg.grad(lambda p: np.sum(msd.pdist(X, "minkowski", p=p)))(np.inf)
    with pytest.raises(UnsupportedInputError, match=r"scipy\.spatial\.minkowski_distance_p .*traced p = inf"):
        mg.grad(lambda p: np.sum(msp.distance_matrix(XA, XB, p)))(np.inf)


ERRORS = [  # (SciPy's function, arguments, keywords): the same error traced
    ("pdist", (X,), {"metric": "nosuch"}),
    ("pdist", (X,), {"metric": "test_nosuch"}),
    ("pdist", (X[0],), {}),
    ("cdist", (XA, XB[:, :2]), {}),
    ("cdist", (XA, XB), {"metric": "euclidean", "w": np.ones(2)}),
    ("pdist", (X,), {"metric": "cityblock", "w": -W}),
    ("pdist", (X[:3],), {"metric": "mahalanobis"}),
    ("pdist", (X,), {"metric": "seuclidean", "V": np.ones(2)}),
    ("squareform", (np.ones(4),), {}),
    ("squareform", (np.ones((3, 3)),), {}),
    ("squareform", (np.ones(3),), {"force": "tovector"}),
    ("seuclidean", (U, Vv, np.ones(3)), {}),
    ("minkowski", (U, Vv, -2.0), {}),
    ("euclidean", (X, U), {}),
    ("distance_matrix", (XA, XB[:, :2]), {}),
]


@pytest.mark.parametrize("name,args,kw", ERRORS, ids=[f"{e[0]}-{i}" for i, e in enumerate(ERRORS)])
def test_errors_are_scipys(name, args, kw):
    theirs, ours = ((getattr(sd, name), getattr(msd, name)) if hasattr(sd, name)
                    else (getattr(sp, name), getattr(msp, name)))
    assert_raises_as_theirs(theirs, ours, args, kw)


# -- the namespaces -----------------------------------------------------------------------------------

def test_namespaces():
    from mutagrad.scipy.spatial import distance

    assert distance is msd and msp.distance is msd
    assert msd.hamming is sd.hamming and msd.is_valid_dm is sd.is_valid_dm  # (SciPy's own)
    assert msp.KDTree is sp.KDTree and msp.Delaunay is sp.Delaunay
    assert {"pdist", "cdist", "hamming"} <= set(dir(msd)) and {"distance", "distance_matrix", "KDTree"} <= set(dir(msp))
    assert re.search(r"pdist", msd.__doc__) and msd.pdist.__doc__


def test_cosine_and_correlation_have_the_smooth_hessian_at_parallel_vectors():
    # (newrules) SciPy clips 1 - cos to [0, 2]; at parallel vectors the clip sits at its bound, and its tie (or a
    # rounding below 0) halved or zeroed the Hessian, silently. The values stay SciPy's; the derivatives are those
    # of 1 - cos, against second differences of SciPy's own functions
    sd = pytest.importorskip("scipy.spatial.distance")
    import mutagrad.scipy.spatial.distance as msd

    u = np.array([0.3, -1.2, 0.8])
    for name, v in (("cosine", 2.0 * u), ("correlation", 3.0 * u + 1.0)):
        f = lambda a, m=msd, name=name, v=v: getattr(m, name)(a, v)
        assert f(u) == getattr(sd, name)(u, v)
        np.testing.assert_allclose(mg.hessian(f)(u), fd_hessian(lambda a, f=f: f(a, sd), u, 1e-4), rtol=1e-5, atol=1e-6)
    X = np.array([[0.3, -1.2, 0.8], [0.3, -1.2, 0.8], [1.0, 0.5, -0.4]])  # (a duplicated row)
    loss = lambda Y, m=msd: np.sum(m.pdist(Y.reshape(3, 3), "cosine") ** 2 + m.pdist(Y.reshape(3, 3), "cosine"))
    np.testing.assert_allclose(mg.hessian(loss)(X.ravel()), fd_hessian(lambda Y: loss(Y, sd), X.ravel(), 1e-4),
                               rtol=1e-5, atol=1e-6)
