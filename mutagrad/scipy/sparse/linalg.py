"""``mutagrad.scipy.sparse.linalg``: ``scipy.sparse.linalg`` with ``spsolve``,
``spsolve_triangular``, ``splu``, ``spilu`` and ``factorized`` differentiated in the
right-hand side (the sparse matrix is a constant), and the Krylov solvers ``cg``, ``bicg``,
``bicgstab``, ``cgs``, ``gmres``, ``lgmres``, ``minres``, ``qmr``, ``gcrotmk`` and ``tfqmr``
(SciPy's values, differentiated as the exact solution A⁻¹ b in b and a dense A:
mutagrad.rules.scipy.krylov); every other name is SciPy's own (and raises mutagrad's
escape error on a traced array).

>>> import numpy as np, scipy.sparse as sp, mutagrad as mg
>>> import mutagrad.scipy.sparse.linalg as mssl
>>> A = sp.diags_array([2.0, 4.0]).tocsc()
>>> mg.grad(lambda b: mssl.spsolve(A, b).sum())(np.ones(2))
array([0.5 , 0.25])
"""
import scipy.sparse.linalg as _ssl

from ...rules.scipy.krylov import (  # noqa: F401
    bicg,
    bicgstab,
    cg,
    cgs,
    gcrotmk,
    gmres,
    lgmres,
    minres,
    qmr,
    tfqmr,
)
from ...rules.scipy.linalg import _overwrites
from ...rules.scipy.sparse import SuperLU, factorized, spilu, splu, spsolve  # noqa: F401
from ...rules.scipy.sparse import spsolve_triangular as _spsolve_triangular

# (overwrite_b: SciPy's call leaves its intermediate values in b where its dtype allows; replayed, as
# mutagrad.scipy.linalg's overwrite flags)
spsolve_triangular = _overwrites(_ssl.spsolve_triangular, module="scipy.sparse.linalg",
                                 overwrite_b=("b", ("A", "b")))(_spsolve_triangular)


def __getattr__(name):
    return getattr(_ssl, name)


def __dir__():
    return sorted(set(dir(_ssl)) | set(globals()))
