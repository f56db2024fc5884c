"""scipy.spatial.distance's real-valued metrics (``pdist``, ``cdist``, the pair functions), ``squareform``,
and scipy.spatial's ``distance_matrix``, ``minkowski_distance`` and ``minkowski_distance_p``, written with
NumPy operations on traced values, so that mutagrad differentiates them (every order, both modes) and
their values are SciPy's to rounding (SciPy's own call when nothing is traced).

One kernel per metric computes the distances of rows ``u``, ``v`` along the last axis, broadcast: ``pdist``
gives it the rows of the pairs i < j (``X[i]``, ``X[j]`` gathered by ``np.triu_indices``), ``cdist``
``XA[:, None, :]`` and ``XB[None, :, :]`` (the row norms of cosine and correlation then stay one per row),
the pair functions the two vectors. At a kink the derivative is what mutagrad's own rules give there:
``np.sqrt`` of a sum of squares at a zero distance (0, and a KinkWarning for a higher derivative),
``np.abs`` at 0 (0), ``np.max`` at a tie (shared evenly). Canberra's 0 / 0 terms (SciPy's 0) have
derivative 0 (the term is discontinuous there); chebyshev's weights only select coordinates (w > 0), so
their derivative is 0.

Refused on traced input: the boolean metrics (a count of unequal or nonzero coordinates, piecewise
constant: no derivative where coordinates meet, 0 elsewhere), jensenshannon, complex points (SciPy
casts them to float64, dropping the imaginary part), a traced ``p = inf``, and a plain ``out=`` array
(it cannot hold traced values: pass a traced buffer, ``mnp.empty``).
"""
from __future__ import annotations

import numpy as np

from ...core import Tracer, bottom, stop_gradient
from .signal import _traced
from .signal_design import _as, _dtype
from .signal_lti import _array
from .sparse import _dense

COMPOSITES = (
    *(f"scipy.spatial.distance.{name}" for name in (
        "pdist", "cdist", "squareform", "euclidean", "sqeuclidean", "cityblock", "chebyshev", "minkowski",
        "cosine", "correlation", "seuclidean", "mahalanobis", "braycurtis", "canberra")),
    *(f"scipy.spatial.{name}" for name in ("distance_matrix", "minkowski_distance", "minkowski_distance_p")),
)


def _sd():
    import scipy.spatial.distance as sd

    return sd


def _sp():
    import scipy.spatial as sp

    return sp


def _where(fname):
    from ...errors import user_line

    return f"scipy.spatial.{fname} at {user_line()}"


def _real(v, fname):
    """``v`` as float64 (SciPy's C code takes doubles), refusing complex values."""
    if _dtype(v).kind == "c":
        from ...errors import UnsupportedInputError

        raise UnsupportedInputError(
            f"{_where(fname)}: complex points. SciPy converts them to float64 and drops the imaginary parts (with a "
            "ComplexWarning): pass np.real(X) (or the moduli np.abs(X)) if that is what is meant, or write the "
            "distance of the complex vectors with NumPy, np.sqrt(np.sum(np.abs(u - v) ** 2)).")
    return _as(v, np.float64)


# -- the kernels: distances of rows u, v (broadcast) along the last axis -------------------------------

def _wsum(t, w):
    """Σ w t along the last axis (w None: weight 1)."""
    return np.sum(t if w is None else w * t, axis=-1)


def _root(s, name):
    """np.sqrt of a sum of squares (a norm), watched at its zeros as mutagrad watches one written in the
    user's code (a KinkWarning where a higher derivative goes through a zero distance; its watch of np.sqrt
    leaves out the calls from mutagrad's own rules)."""
    from ..linalg import _norm_kink

    return _norm_kink(np.sqrt(s), f"the {name} distance of scipy.spatial.distance at a zero distance (two equal "
                                  "points)")


def _k_euclidean(u, v, w=None):
    d = u - v
    return _root(_wsum(d * d, w), "euclidean")


def _k_sqeuclidean(u, v, w=None):
    d = u - v
    return _wsum(d * d, w)


def _k_cityblock(u, v, w=None):
    return _wsum(np.abs(u - v), w)


def _k_chebyshev(u, v, w=None):
    a = np.abs(u - v)
    if w is not None:  # (SciPy's weights only select the coordinates with w > 0: a plain mask)
        a = (np.asarray(bottom(w)) > 0) * a
    return np.max(a, axis=-1)


def _k_minkowski(u, v, p=2.0, w=None, fname="distance.minkowski"):
    if not isinstance(p, Tracer):
        if p == 1:
            return _k_cityblock(u, v, w)
        if p == 2:
            return _k_euclidean(u, v, w)
        if p == np.inf:
            return _k_chebyshev(u, v, w)
    elif np.isinf(bottom(p)):
        _refuse_infinite_p(fname)
    # (a traced p: this formula for every p, so that its derivative in p is there at p = 1 and 2 too)
    from ..linalg import _norm_kink

    s = _norm_kink(_wsum(_abs_pow(u - v, p), w), "the minkowski distance of scipy.spatial.distance at a zero "
                                                  "distance (two equal points)")
    return s ** (1.0 / p)


def _abs_pow(d, p):
    """|d| ** p. A plain p = 2 of real d: d * d (through np.abs, whose derivative at 0 is 0, the second
    derivative of |d| ** 2 at d = 0 would come out 0, not 2). Otherwise |d| watched at its zeros where p may
    be at most 2 (a traced p too): a higher derivative through |d| ** p at d = 0 gets a KinkWarning there, as
    in the user's own code (mutagrad's watch of np.abs(x) ** p leaves out calls from its own rules)."""
    if not isinstance(p, Tracer) and p == 2 and _dtype(d).kind != "c":
        return d * d
    a = np.abs(d)
    if isinstance(p, Tracer) or p < 2:
        from ..linalg import _norm_kink

        a = _norm_kink(a, "|u - v| ** p of a Minkowski distance at u_i == v_i (p <= 2: no second derivative; "
                          "a traced p = 2: its second derivative there comes out 0, not 2)",
                       first_right=not isinstance(p, Tracer) and p > 1)
    return a ** p


def _refuse_infinite_p(fname):
    from ...errors import UnsupportedInputError

    raise UnsupportedInputError(
        f"{_where(fname)}: a traced p = inf. The distance is then the maximum max|u - v|, which p no longer "
        "enters, and a derivative in p has no meaning at p = inf: pass p as a plain number (float(mg.value(p))) "
        "or differentiate at a finite p.")


def _k_cosine(u, v, w=None, centered=False):
    if w is not None:
        w = w / np.sum(w)
    if centered:
        if w is None:
            u, v = u - np.mean(u, axis=-1, keepdims=True), v - np.mean(v, axis=-1, keepdims=True)
        else:
            u, v = u - np.sum(u * w, axis=-1, keepdims=True), v - np.sum(v * w, axis=-1, keepdims=True)
    uv, uu, vv = _wsum(u * v, w), _wsum(u * u, w), _wsum(v * v, w)
    d = 1.0 - uv / np.sqrt(uu * vv)
    # SciPy clips the rounding errors to [0, 2]: its bits, with the derivative of 1 - cos, which the clip's would
    # halve (a tie at the bound) or zero at parallel vectors, where the function is smooth (newrules: a Hessian
    # at a duplicate point). d + (clip(d) - d) is clip(d) exactly: 0 - d and 2 - d are exact (Sterbenz)
    return d + stop_gradient(np.clip(d, 0.0, 2.0) - d)


def _k_correlation(u, v, w=None):
    return _k_cosine(u, v, w, centered=True)


def _k_seuclidean(u, v, V):
    d = u - v
    return _root(np.sum(d * d / V, axis=-1), "seuclidean")


def _k_mahalanobis(u, v, VI):
    d = u - v
    return _root(np.sum(np.matmul(d, VI) * d, axis=-1), "mahalanobis")


def _k_braycurtis(u, v, w=None):
    return _wsum(np.abs(u - v), w) / _wsum(np.abs(u + v), w)


def _k_canberra(u, v, w=None, nansum=False):
    num, den = np.abs(u - v), np.abs(u) + np.abs(v)
    zero = np.asarray(bottom(den)) == 0  # (SciPy's 0 / 0 = 0: a plain mask, and no NaN in the derivative)
    t = np.where(zero, 0.0, num / np.where(zero, 1.0, den))
    if w is not None:
        t = w * t
    return np.nansum(t, axis=-1) if nansum else np.sum(t, axis=-1)


_KERNELS = {
    "euclidean": _k_euclidean, "sqeuclidean": _k_sqeuclidean, "cityblock": _k_cityblock,
    "chebyshev": _k_chebyshev, "minkowski": _k_minkowski, "cosine": _k_cosine, "correlation": _k_correlation,
    "seuclidean": _k_seuclidean, "mahalanobis": _k_mahalanobis, "braycurtis": _k_braycurtis,
    "canberra": _k_canberra,
}
# SciPy's names for its metrics (scipy.spatial.distance's table of aliases)
_ALIASES = {
    **dict.fromkeys(("braycurtis",), "braycurtis"), **dict.fromkeys(("canberra",), "canberra"),
    **dict.fromkeys(("chebychev", "chebyshev", "cheby", "cheb", "ch"), "chebyshev"),
    **dict.fromkeys(("cityblock", "cblock", "cb", "c"), "cityblock"),
    **dict.fromkeys(("correlation", "co"), "correlation"), **dict.fromkeys(("cosine", "cos"), "cosine"),
    **dict.fromkeys(("euclidean", "euclid", "eu", "e"), "euclidean"),
    **dict.fromkeys(("mahalanobis", "mahal", "mah"), "mahalanobis"),
    **dict.fromkeys(("minkowski", "mi", "m", "pnorm"), "minkowski"),
    **dict.fromkeys(("seuclidean", "se", "s"), "seuclidean"),
    **dict.fromkeys(("sqeuclidean", "sqe", "sqeuclid"), "sqeuclidean"),
    # not differentiated (refused on traced input)
    **dict.fromkeys(("matching", "hamming", "hamm", "ha", "h"), "hamming"),
    **dict.fromkeys(("jaccard", "jacc", "ja", "j"), "jaccard"),
    **dict.fromkeys(("jensenshannon", "js"), "jensenshannon"),
    **{name: name for name in ("dice", "rogerstanimoto", "russellrao", "sokalsneath", "yule")},
}
_BOOLEAN = frozenset(("hamming", "jaccard", "dice", "rogerstanimoto", "russellrao", "sokalsneath", "yule"))
_PARAMETERS = {  # the keyword arguments each metric takes in pdist / cdist
    "minkowski": ("p", "w"), "seuclidean": ("V",), "mahalanobis": ("VI",),
    **{name: ("w",) for name in ("euclidean", "sqeuclidean", "cityblock", "chebyshev", "cosine", "correlation",
                                 "braycurtis", "canberra")},
}


def _refuse_metric(name, fname):
    from ...errors import NoRuleError

    if name in _BOOLEAN:
        raise NoRuleError(
            f"{_where(fname)} with metric {name!r} on traced values: the {name} distance counts the coordinates "
            "that differ (or are nonzero), a piecewise-constant function of the points. Its derivative is 0 "
            "where it is defined and does not exist where a coordinate changes its comparison (0/1 data sits "
            "exactly there), so mutagrad does not differentiate it. If the points are constants here, pass "
            "mg.stop_gradient(X); for a differentiable relaxation write it with NumPy (np.mean(np.abs(u - v)) "
            "for hamming of 0/1 data, with u = X[:, None, :], v = X[None, :, :] reduced along axis=-1).")
    raise NoRuleError(
        f"{_where(fname)} with metric {name!r} on traced values: mutagrad.scipy.spatial does not differentiate "
        "this metric. Write it with NumPy operations, which are differentiated (jensenshannon: with p, q "
        "normalised and m = (p + q) / 2, np.sqrt((np.sum(scipy.special.rel_entr(p, m)) + "
        "np.sum(scipy.special.rel_entr(q, m))) / 2)), or pass a callable metric (called per pair).")


def _canonical(metric, fname):
    """SciPy's canonical name of a metric given by name (its errors for the others)."""
    if not isinstance(metric, str):
        raise TypeError("2nd argument metric must be a string identifier or a function.")
    mstr = metric.lower()
    if mstr.startswith("test_") and mstr[5:] in _KERNELS:  # (SciPy's pair function per pair: the same values)
        return mstr[5:]
    name = _ALIASES.get(mstr)
    if name is None:
        if mstr.startswith("test_"):
            if mstr[5:] in _ALIASES.values():
                _refuse_metric(mstr[5:], fname)
            raise ValueError(f'Unknown "Test" Distance Metric: {mstr[5:]}')
        raise ValueError(f"Unknown Distance Metric: {mstr}")
    if name not in _KERNELS:
        _refuse_metric(name, fname)
    return name


def _weights(w, n=None):
    """SciPy's weights: 1-d (of n entries), float64, none negative."""
    w = _real(_array(w), "distance")
    if np.ndim(w) != 1 or (n is not None and np.shape(w)[0] != n):
        size = np.shape(w)[0] if np.ndim(w) else np.shape(w)
        if np.ndim(w) != 1 and n is None:
            raise ValueError("Input vector should be 1-D.")
        raise ValueError(f"Weights must have same size as input vector. {size} vs. {n}.")
    if np.any(np.asarray(bottom(w)) < 0):
        raise ValueError("Input weights should be all non-negative")
    return w


def _parameters(name, points, m, n, kwargs, fname):
    """The metric's keyword arguments, checked and completed as SciPy does (V and VI from the points when
    not given: differentiated through them)."""
    kwargs = dict(kwargs)
    allowed = _PARAMETERS[name]
    for k in kwargs:
        if k not in allowed:
            raise TypeError(f"{fname}() got an unexpected keyword argument '{k}' for metric '{name}' "
                            f"(it takes {', '.join(allowed)})")
    if kwargs.get("w") is not None:
        kwargs["w"] = _weights(kwargs["w"], n)
    else:
        kwargs.pop("w", None)
    if name == "minkowski":
        p = kwargs.setdefault("p", 2.0)
        if bottom(p) == 0:  # (SciPy's C code takes any other p, a negative one too, and gives inf here)
            raise ValueError("p must be greater than 0")
        kwargs["fname"] = "distance." + fname
    elif name == "seuclidean":
        V = kwargs.get("V")
        if V is None:
            X = points[0] if len(points) == 1 else np.concatenate(points)
            kwargs["V"] = np.var(X, axis=0, ddof=1)
        else:
            V = _real(_array(V), "distance." + fname)
            if np.ndim(V) != 1:
                raise ValueError("Variance vector V must be one-dimensional.")
            if np.shape(V)[0] != n:
                raise ValueError("Variance vector V must be of the same dimension as the vectors on which the "
                                 "distances are computed.")
            kwargs["V"] = V
    elif name == "mahalanobis":
        VI = kwargs.get("VI")
        if VI is None:
            if m <= n:
                raise ValueError(
                    f"The number of observations ({m}) is too small; the covariance matrix is singular. For "
                    f"observations with {n} dimensions, at least {n + 1} observations are required.")
            X = points[0] if len(points) == 1 else np.concatenate(points)
            kwargs["VI"] = np.transpose(np.linalg.inv(np.atleast_2d(np.cov(np.transpose(X)))))
        else:
            kwargs["VI"] = _real(np.atleast_2d(_array(VI)), "distance." + fname)
    return kwargs


def _points(X, fname, what="A 2-dimensional array must be passed."):
    X = _array(X)
    if np.ndim(X) != 2:
        raise ValueError(what if what.startswith("X") else f"{what} (Shape was {np.shape(X)}).")
    return _real(X, "distance." + fname)


def _into(out, D, fname):
    """SciPy's ``out=``: the distances written into it (a traced buffer), which is returned."""
    if out is None:
        return D
    if np.shape(out) != np.shape(D):
        raise ValueError("Output array has incorrect shape.")
    if not np.asarray(bottom(out)).flags.c_contiguous:
        raise ValueError("Output array must be C-contiguous.")
    if _dtype(out) != np.float64:
        raise ValueError("Output array must be double type.")
    if not isinstance(out, Tracer):
        from ...errors import WriteToPlainArrayError

        raise WriteToPlainArrayError(
            f"{_where('distance.' + fname)}: out= is a plain NumPy array, which cannot hold the traced distances "
            f"(their derivatives would be dropped). Create it with mnp.empty({np.shape(D)}) (import "
            "mutagrad.numpy as mnp), a traced buffer, or leave out= out and use the returned array.")
    out[...] = D
    return out


def _twin(metric):
    """A callable metric that is one of SciPy's pair functions: mutagrad's twin of it (SciPy's converts
    the traced rows with np.asarray), None for another callable."""
    name = getattr(metric, "__name__", None)
    if name in _ALIASES and getattr(_sd(), name, None) is metric:
        if name in _KERNELS:
            return globals()[name]
        return name
    return None


def _by_callable(metric, rows_a, rows_b, pairs, kwargs, fname, shape):
    """The distances of a callable metric, called per pair (SciPy's loop), collected as float64."""
    twin = _twin(metric)
    if isinstance(twin, str):
        _refuse_metric(twin, fname)
    name = _ALIASES.get(getattr(metric, "__name__", None))
    if name in _PARAMETERS:  # (SciPy checks and completes the keywords of a callable by its name)
        m, n = np.shape(rows_a)[0] + (0 if rows_b is rows_a else np.shape(rows_b)[0]), np.shape(rows_a)[1]
        points = (rows_a,) if rows_b is rows_a else (rows_a, rows_b)
        if name in ("minkowski", "seuclidean", "mahalanobis"):
            kwargs = _parameters(name, points, m, n, kwargs, fname)
            kwargs.pop("fname", None)
    elif name == "hamming" and "w" not in kwargs:
        kwargs = {**kwargs, "w": np.ones(np.shape(rows_a)[1])}
    fn = twin or metric
    values = [fn(rows_a[i], rows_b[j], **kwargs) for i, j in pairs]
    if not values:
        return np.zeros(shape)
    return np.reshape(_as(_dense(values), np.float64), shape)


# -- pdist, cdist, squareform -------------------------------------------------------------------------

def pdist(X, metric="euclidean", *, out=None, **kwargs):
    """``scipy.spatial.distance.pdist``: the distances of the pairs of rows i < j of ``X``, differentiated in
    ``X`` and the metric's arrays (``w``, ``V``, ``VI``, and ``p``).

    >>> import numpy as np, mutagrad as mg
    >>> from mutagrad.scipy.spatial.distance import pdist
    >>> mg.grad(lambda X: pdist(X)[0])(np.array([[0.0, 0.0], [3.0, 4.0]]))
    array([[-0.6, -0.8],
           [ 0.6,  0.8]])
    """
    if not _traced(X, out, kwargs):
        return _sd().pdist(X, metric, out=out, **kwargs)
    X = _points(X, "pdist")
    m, n = np.shape(X)
    i, j = np.triu_indices(m, 1)
    if callable(metric):
        D = _by_callable(metric, X, X, zip(i.tolist(), j.tolist()), kwargs, "pdist", (m * (m - 1) // 2,))
    else:
        name = _canonical(metric, "distance.pdist")
        D = _KERNELS[name](X[i], X[j], **_parameters(name, (X,), m, n, kwargs, "pdist"))
    return _into(out, D, "pdist")


def cdist(XA, XB, metric="euclidean", *, out=None, **kwargs):
    """``scipy.spatial.distance.cdist``: the distances of every row of ``XA`` to every row of ``XB``,
    differentiated in both and in the metric's arrays (``w``, ``V``, ``VI``, and ``p``).

    >>> import numpy as np, mutagrad as mg
    >>> from mutagrad.scipy.spatial.distance import cdist
    >>> mg.grad(lambda A: cdist(A, np.array([[0.0, 0.0], [1.0, 0.0]]), "sqeuclidean").sum())(np.array([[3.0, 0.0]]))
    array([[10.,  0.]])
    """
    if not _traced(XA, XB, out, kwargs):
        return _sd().cdist(XA, XB, metric, out=out, **kwargs)
    XA = _points(XA, "cdist", "XA must be a 2-dimensional array.")
    XB = _points(XB, "cdist", "XB must be a 2-dimensional array.")
    (mA, n), (mB, nB) = np.shape(XA), np.shape(XB)
    if n != nB:
        raise ValueError("XA and XB must have the same number of columns (i.e. feature dimension.)")
    if callable(metric):
        pairs = ((a, b) for a in range(mA) for b in range(mB))
        D = _by_callable(metric, XA, XB, pairs, kwargs, "cdist", (mA, mB))
    else:
        name = _canonical(metric, "distance.cdist")
        D = _KERNELS[name](XA[:, None, :], XB[None, :, :], **_parameters(name, (XA, XB), mA + mB, n, kwargs, "cdist"))
    return _into(out, D, "cdist")


def squareform(X, force="no", checks=True):
    """``scipy.spatial.distance.squareform``: a condensed distance vector as the symmetric matrix (zero
    diagonal), or a matrix's upper triangle as the vector; linear, differentiated in ``X``.

    >>> import numpy as np, mutagrad as mg
    >>> from mutagrad.scipy.spatial.distance import squareform
    >>> mg.grad(lambda d: squareform(d)[2, 0])(np.array([1.0, 2.0, 3.0]))
    array([0., 1., 0.])
    """
    if not _traced(X):
        return _sd().squareform(X, force=force, checks=checks)
    X = _array(X)
    s, dtype = np.shape(X), _dtype(X)
    if force.lower() == "tomatrix" and len(s) != 1:
        raise ValueError("Forcing 'tomatrix' but input X is not a distance vector.")
    if force.lower() == "tovector" and len(s) != 2:
        raise ValueError("Forcing 'tovector' but input X is not a distance matrix.")
    if len(s) == 1:
        if s[0] == 0:
            return np.zeros((1, 1), dtype=dtype)
        d = int(np.ceil(np.sqrt(s[0] * 2)))
        if d * (d - 1) != s[0] * 2:
            raise ValueError("Incompatible vector size. It must be a binomial coefficient n choose 2 for some "
                             "integer n >= 2.")
        # (a gather: every entry of the matrix is one of the vector's, or the zero appended for the diagonal)
        k = np.full((d, d), s[0])
        i, j = np.triu_indices(d, 1)
        k[i, j] = k[j, i] = np.arange(s[0])
        return np.concatenate((X, np.zeros(1, dtype=dtype)))[k]
    if len(s) == 2:
        if s[0] != s[1]:
            raise ValueError("The matrix argument must be square.")
        if checks:
            _sd().is_valid_dm(np.asarray(bottom(X)), throw=True, name="X")
        if s[0] <= 1:
            return np.array([], dtype=dtype)
        return X[np.triu_indices(s[0], 1)]  # (SciPy reads the upper triangle)
    raise ValueError(f"The first argument must be one or two dimensional array. A {len(s)}-dimensional array is "
                     "not permitted")


# -- the pair functions --------------------------------------------------------------------------------

def _vector(u, fname):
    u = _array(u)
    if np.ndim(u) != 1:
        raise ValueError("Input vector should be 1-D.")
    return _real(u, "distance." + fname)


def _pair(fname, kernel, u, v, w=None, **kw):
    u, v = _vector(u, fname), _vector(v, fname)
    if w is not None:
        w = _weights(w)
    return kernel(u, v, w=w, **kw)


def euclidean(u, v, w=None):
    """``scipy.spatial.distance.euclidean``: sqrt(Σ w (u - v)²), differentiated in ``u``, ``v`` and ``w``.

    >>> import numpy as np, mutagrad as mg
    >>> from mutagrad.scipy.spatial.distance import euclidean
    >>> mg.grad(lambda u: euclidean(u, np.zeros(2)))(np.array([3.0, 4.0]))
    array([0.6, 0.8])
    """
    if not _traced(u, v, w):
        return _sd().euclidean(u, v, w=w)
    return _pair("euclidean", _k_euclidean, u, v, w)


def sqeuclidean(u, v, w=None):
    """``scipy.spatial.distance.sqeuclidean``: Σ w (u - v)², differentiated in ``u``, ``v`` and ``w``.

    >>> import numpy as np, mutagrad as mg
    >>> from mutagrad.scipy.spatial.distance import sqeuclidean
    >>> mg.grad(lambda u: sqeuclidean(u, np.zeros(2)))(np.array([3.0, 4.0]))
    array([6., 8.])
    """
    if not _traced(u, v, w):
        return _sd().sqeuclidean(u, v, w=w)
    return _pair("sqeuclidean", _k_sqeuclidean, u, v, w)


def cityblock(u, v, w=None):
    """``scipy.spatial.distance.cityblock``: Σ w |u - v|, differentiated in ``u``, ``v`` and ``w``.

    >>> import numpy as np, mutagrad as mg
    >>> from mutagrad.scipy.spatial.distance import cityblock
    >>> mg.grad(lambda u: cityblock(u, np.zeros(2), w=np.array([1.0, 2.0])))(np.array([3.0, 4.0]))
    array([1., 2.])
    """
    if not _traced(u, v, w):
        return _sd().cityblock(u, v, w=w)
    return _pair("cityblock", _k_cityblock, u, v, w)


def chebyshev(u, v, w=None):
    """``scipy.spatial.distance.chebyshev``: max |u - v| over the coordinates with w > 0 (the weights only select them: derivative 0 in w), differentiated in ``u``, ``v`` and ``w``.

    >>> import numpy as np, mutagrad as mg
    >>> from mutagrad.scipy.spatial.distance import chebyshev
    >>> mg.grad(lambda u: chebyshev(u, np.zeros(2)))(np.array([3.0, 4.0]))
    array([0., 1.])
    """
    if not _traced(u, v, w):
        return _sd().chebyshev(u, v, w=w)
    return _pair("chebyshev", _k_chebyshev, u, v, w)


def minkowski(u, v, p=2, w=None):
    """``scipy.spatial.distance.minkowski``: (Σ w |u - v|ᵖ)^(1/p), differentiated in ``u``, ``v``, ``w`` and
    ``p`` (a traced ``p`` takes this formula at every p, so its derivative in p is there at 1 and 2 too).

    >>> import numpy as np, mutagrad as mg
    >>> from mutagrad.scipy.spatial.distance import minkowski
    >>> float(mg.grad(lambda u: minkowski(u, np.zeros(2), p=1))(np.array([2.0, -1.0]))[1])
    -1.0
    """
    if not _traced(u, v, p, w):
        return _sd().minkowski(u, v, p=p, w=w)
    if bottom(p) <= 0:
        raise ValueError("p must be greater than 0")
    return _pair("minkowski", _k_minkowski, u, v, w, p=p)


def cosine(u, v, w=None):
    """``scipy.spatial.distance.cosine``: 1 - u·v / (|u| |v|) (weighted inner products), clipped to [0, 2] as SciPy does, differentiated in ``u``, ``v`` and ``w``.

    >>> import numpy as np, mutagrad as mg
    >>> from mutagrad.scipy.spatial.distance import cosine
    >>> mg.grad(lambda u: cosine(u, np.array([4.0, -3.0])))(np.array([3.0, 4.0]))
    array([-0.16,  0.12])
    """
    if not _traced(u, v, w):
        return _sd().cosine(u, v, w=w)
    _no_complex(u, v)
    return _pair("cosine", _k_cosine, u, v, w)


def correlation(u, v, w=None, centered=True):
    """``scipy.spatial.distance.correlation``: the cosine distance of ``u`` and ``v`` less their (weighted)
    means, clipped to [0, 2] as SciPy does; differentiated in ``u``, ``v`` and ``w``."""
    if not _traced(u, v, w):
        return _sd().correlation(u, v, w=w, centered=centered)
    _no_complex(u, v)
    return _pair("correlation", _k_cosine, u, v, w, centered=centered)


def _no_complex(u, v):
    if _dtype(_array(u)).kind == "c" or _dtype(_array(v)).kind == "c":
        raise TypeError("`u` and `v` must be real.")


def seuclidean(u, v, V):
    """``scipy.spatial.distance.seuclidean``: sqrt(Σ (u - v)² / V), differentiated in ``u``, ``v`` and ``V``."""
    if not _traced(u, v, V):
        return _sd().seuclidean(u, v, V)
    u, v = _vector(u, "seuclidean"), _vector(v, "seuclidean")
    V = _vector(V, "seuclidean")
    if np.shape(V)[0] != np.shape(u)[0] or np.shape(u)[0] != np.shape(v)[0]:
        raise TypeError("V must be a 1-D array of the same dimension as u and v.")
    return _k_seuclidean(u, v, V)


def mahalanobis(u, v, VI):
    """``scipy.spatial.distance.mahalanobis``: sqrt((u - v) VI (u - v)), differentiated in ``u``, ``v`` and
    ``VI``."""
    if not _traced(u, v, VI):
        return _sd().mahalanobis(u, v, VI)
    u, v = _vector(u, "mahalanobis"), _vector(v, "mahalanobis")
    return _k_mahalanobis(u, v, _real(np.atleast_2d(_array(VI)), "distance.mahalanobis"))


def braycurtis(u, v, w=None):
    """``scipy.spatial.distance.braycurtis``: Σ w |u - v| / Σ w |u + v|, differentiated in ``u``, ``v`` and ``w``.

    >>> import numpy as np, mutagrad as mg
    >>> from mutagrad.scipy.spatial.distance import braycurtis
    >>> mg.grad(lambda u: braycurtis(u, np.array([1.0, 0.0])))(np.array([3.0, 4.0]))
    array([0.03125, 0.03125])
    """
    if not _traced(u, v, w):
        return _sd().braycurtis(u, v, w=w)
    return _pair("braycurtis", _k_braycurtis, u, v, w)


def canberra(u, v, w=None):
    """``scipy.spatial.distance.canberra``: Σ w |u - v| / (|u| + |v|), a 0 / 0 term 0 as SciPy's (derivative 0 there: the term is discontinuous), differentiated in ``u``, ``v`` and ``w``.

    >>> import numpy as np, mutagrad as mg
    >>> from mutagrad.scipy.spatial.distance import canberra
    >>> mg.grad(lambda u: canberra(u, np.array([1.0, 0.0])))(np.array([3.0, 4.0]))
    array([0.125, 0.   ])
    """
    if not _traced(u, v, w):
        return _sd().canberra(u, v, w=w)
    return _pair("canberra", _k_canberra, u, v, w, nansum=True)


# -- scipy.spatial's minkowski distances --------------------------------------------------------------

def _common(x, y):
    """x, y as arrays of their common dtype with float64 (complex kept), as SciPy's."""
    x, y = _array(x), _array(y)
    dtype = np.promote_types(np.promote_types(_dtype(x), _dtype(y)), np.float64)
    return _as(x, dtype), _as(y, dtype)


def minkowski_distance_p(x, y, p=2.0):
    """``scipy.spatial.minkowski_distance_p``: Σ |y - x|ᵖ along the last axis (max for p = inf, without
    the root), differentiated in ``x``, ``y`` and ``p``.

    >>> import numpy as np, mutagrad as mg
    >>> from mutagrad.scipy.spatial import minkowski_distance_p
    >>> mg.grad(lambda x: minkowski_distance_p(x, np.zeros(2)))(np.array([1.0, 2.0]))
    array([2., 4.])
    """
    if not _traced(x, y, p):
        return _sp().minkowski_distance_p(x, y, p)
    x, y = _common(x, y)
    if isinstance(p, Tracer):
        if np.isinf(bottom(p)):
            _refuse_infinite_p("minkowski_distance_p")
        return np.sum(_abs_pow(y - x, p), axis=-1)
    if p == np.inf:
        return np.amax(np.abs(y - x), axis=-1)
    if p == 1:
        return np.sum(np.abs(y - x), axis=-1)
    return np.sum(_abs_pow(y - x, p), axis=-1)


def minkowski_distance(x, y, p=2.0):
    """``scipy.spatial.minkowski_distance``: (Σ |y - x|ᵖ)^(1/p) along the last axis, differentiated in
    ``x``, ``y`` and ``p``.

    >>> import numpy as np, mutagrad as mg
    >>> from mutagrad.scipy.spatial import minkowski_distance
    >>> mg.grad(lambda x: minkowski_distance(x, np.zeros(2)))(np.array([3.0, 4.0]))
    array([0.6, 0.8])
    """
    if not _traced(x, y, p):
        return _sp().minkowski_distance(x, y, p)
    if not isinstance(p, Tracer) and (p == np.inf or p == 1):
        return minkowski_distance_p(x, y, p)
    from ..linalg import _norm_kink

    return _norm_kink(minkowski_distance_p(x, y, p), "scipy.spatial.minkowski_distance at a zero distance (two "
                                                     "equal points)") ** (1.0 / p)


def distance_matrix(x, y, p=2.0, threshold=1000000):
    """``scipy.spatial.distance_matrix``: the Minkowski p-distances of every row of ``x`` to every row of
    ``y``, differentiated in ``x``, ``y`` and ``p``.

    >>> import numpy as np, mutagrad as mg
    >>> from mutagrad.scipy.spatial import distance_matrix
    >>> mg.grad(lambda x: distance_matrix(x, np.zeros((1, 2)))[0, 0])(np.array([[3.0, 4.0]]))
    array([[0.6, 0.8]])
    """
    if not _traced(x, y, p):
        return _sp().distance_matrix(x, y, p, threshold)
    x, y = _array(x), _array(y)
    m, k = np.shape(x)
    n, kk = np.shape(y)
    if k != kk:
        raise ValueError(f"x contains {k}-dimensional vectors but y contains {kk}-dimensional vectors")
    if m * n * k <= threshold:
        return minkowski_distance(x[:, np.newaxis, :], y[np.newaxis, :, :], p)
    # (SciPy's loop over the shorter side, to bound the memory; its rows written into a float array)
    if m < n:
        rows = np.stack([minkowski_distance(x[i], y, p) for i in range(m)])
    else:
        rows = np.stack([minkowski_distance(x, y[j], p) for j in range(n)], axis=1)
    return _as(rows, np.dtype(float))
