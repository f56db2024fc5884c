"""``mutagrad.scipy.sparse``: ``scipy.sparse`` itself (every name is SciPy's), with
``mutagrad.scipy.sparse.linalg`` holding the differentiable solves.

Sparse matrices hold plain numbers, so they are constants of a differentiated
function; their products with traced arrays (``A @ x``, ``x @ A``, ``A.dot(x)``,
and ``A * x`` of the ``spmatrix`` classes) are differentiated wherever ``A`` comes
from (mutagrad.rules.sparse), without this module.
"""
import importlib

import scipy.sparse as _sp


def __getattr__(name):
    if name == "linalg":
        return importlib.import_module(f"{__name__}.linalg")
    return getattr(_sp, name)


def __dir__():
    return sorted(set(dir(_sp)) | {"linalg"})
