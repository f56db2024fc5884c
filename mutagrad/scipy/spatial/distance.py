"""``mutagrad.scipy.spatial.distance``: ``scipy.spatial.distance`` with differentiable

* ``pdist(X, metric, *, out=None, **kwargs)`` and ``cdist(XA, XB, metric, *, out=None, **kwargs)`` for
  the metrics 'euclidean', 'sqeuclidean', 'cityblock', 'chebyshev', 'minkowski' (``p``), 'cosine',
  'correlation', 'seuclidean' (``V``), 'mahalanobis' (``VI``), 'braycurtis', 'canberra' and their
  aliases, differentiated in the points and in the weights ``w`` (where SciPy takes them), ``V``,
  ``VI`` and ``p``; ``V`` and ``VI`` left out are computed from the points, as SciPy does (``np.var``,
  the inverse of ``np.cov``), and differentiated through them. A callable metric is called per pair
  of traced rows (slow, but its own derivative; SciPy's pair functions are replaced by the ones here).
  ``out=``: a traced buffer (``mnp.empty``) is written into and returned;
* ``squareform`` (vector to matrix and back: linear);
* the pair functions ``euclidean``, ``sqeuclidean``, ``cityblock``, ``chebyshev``, ``minkowski``,
  ``cosine``, ``correlation``, ``seuclidean``, ``mahalanobis``, ``braycurtis``, ``canberra``, in
  ``u``, ``v`` and their parameters;

written with NumPy operations on traced values: SciPy's values to rounding, SciPy's own call when
nothing is traced. At a zero distance (``cdist(X, X)``'s diagonal, two equal points) the derivative
is what mutagrad's ``np.sqrt``, ``np.abs`` and ``np.max`` give there: 0 (a subgradient), a KinkWarning
where a higher derivative goes through it; ties of chebyshev's maximum share the derivative evenly.

Refused on traced values: the boolean metrics ('hamming', 'jaccard', 'dice', 'rogerstanimoto',
'russellrao', 'sokalsneath', 'yule': a count of unequal coordinates is piecewise constant, with no
derivative where coordinates meet) and 'jensenshannon' (``NoRuleError``); complex points and a traced
``p = inf`` (``UnsupportedInputError``); a plain ``out=`` array (``WriteToPlainArrayError``). Every
other name is SciPy's own (and raises mutagrad's escape error on a traced array).

>>> import numpy as np, mutagrad as mg
>>> import mutagrad.scipy.spatial.distance as msd
>>> X = np.array([[0.0, 0.0], [3.0, 4.0], [6.0, 8.0]])
>>> mg.grad(lambda X: np.sum(msd.pdist(X)))(X)
array([[-1.2, -1.6],
       [ 0. ,  0. ],
       [ 1.2,  1.6]])
>>> float(msd.squareform(msd.pdist(X))[2, 0])
10.0
"""
import scipy.spatial.distance as _sd

from ...rules.scipy.spatial import (  # noqa: F401
    braycurtis,
    canberra,
    cdist,
    chebyshev,
    cityblock,
    correlation,
    cosine,
    euclidean,
    mahalanobis,
    minkowski,
    pdist,
    seuclidean,
    sqeuclidean,
    squareform,
)


def __getattr__(name):
    return getattr(_sd, name)


def __dir__():
    return sorted(set(dir(_sd)) | set(globals()))
