"""``mutagrad.scipy.spatial``: ``scipy.spatial`` with differentiable

* ``distance_matrix``, ``minkowski_distance`` and ``minkowski_distance_p`` (in both point arrays and in
  ``p``), written with NumPy operations as SciPy writes them: its values, its own call when nothing is
  traced;
* ``mutagrad.scipy.spatial.distance``: ``pdist``, ``cdist``, ``squareform`` and the pair functions of
  the real-valued metrics (see its docstring);

every other name is SciPy's own (the KD-trees, ``Delaunay``, ``ConvexHull``, ``Rotation``... hold plain
numbers and raise mutagrad's escape error on a traced array).

>>> import numpy as np, mutagrad as mg
>>> import mutagrad.scipy.spatial as msp
>>> mg.grad(lambda x: msp.distance_matrix(x, np.zeros((1, 2))).sum())(np.array([[3.0, 4.0], [6.0, 8.0]]))
array([[0.6, 0.8],
       [0.6, 0.8]])
"""
import importlib

import scipy.spatial as _sp

from ...rules.scipy.spatial import (  # noqa: F401
    distance_matrix,
    minkowski_distance,
    minkowski_distance_p,
)


def __getattr__(name):
    if name == "distance":  # (ours, not SciPy's scipy.spatial.distance)
        return importlib.import_module(f"{__name__}.distance")
    return getattr(_sp, name)


def __dir__():
    return sorted(set(dir(_sp)) | set(globals()) | {"distance"})
