"""``mutagrad.scipy``: drop-in SciPy namespaces, like ``autograd.scipy``.

``mutagrad.scipy.special``, ``.linalg``, ``.stats``, ``.signal``, ``.ndimage``, ``.interpolate``,
``.spatial`` (with ``.spatial.distance``) and ``.sparse`` (with ``.sparse.linalg``) hold every name of the SciPy module of the same name; the
functions SciPy writes in plain Python (which call ``np.asarray`` and so cannot see traced arrays)
are replaced by differentiable ones (``.interpolate``'s classes are subclasses of SciPy's,
differentiated in the data, the knots and the points). SciPy's ufuncs (``scipy.special.gammaln``...) dispatch
by themselves and are the same objects here.

>>> import numpy as np, mutagrad as mg
>>> import mutagrad.scipy.special as msp
>>> float(mg.grad(lambda x: msp.logsumexp(x))(np.zeros(4))[0])
0.25
"""
import importlib

__all__ = ["interpolate", "linalg", "ndimage", "signal", "sparse", "spatial", "special", "stats"]


def __getattr__(name):
    if name in __all__:  # imported on first use: scipy.stats is slow to import
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
