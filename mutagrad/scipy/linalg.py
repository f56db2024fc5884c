"""``mutagrad.scipy.linalg``: ``scipy.linalg`` with differentiable
``solve_triangular``, ``cholesky``, ``cho_factor``/``cho_solve``,
``lu_factor``/``lu_solve``, ``solve_sylvester``, ``solve_continuous_lyapunov`` (``solve_lyapunov``),
``solve_discrete_lyapunov``, ``solve_continuous_are``, ``solve_discrete_are``, ``expm``, ``logm``, ``sqrtm``,
``inv``, ``solve``, ``solve_banded``, ``det``, ``eigh``, ``eigvalsh``, ``solveh_banded``, ``lu``,
``svd``, ``svdvals``, ``qr``, ``null_space``, ``orth``, ``polar``, ``block_diag``, ``toeplitz``, ``circulant``,
``hankel`` and ``khatri_rao``; every other name is SciPy's own (and raises mutagrad's escape error on a traced array).
Stacks of matrices (leading axes) are SciPy 1.17's: its values, shapes, lists and errors.
``overwrite_a=True`` / ``overwrite_b=True`` (``overwrite_ab``) leave in the arrays what SciPy's own
call leaves, which depends on their dtype and memory layout: nothing, a result (b the solution, a
the factor; the array is then returned, as SciPy returns it), differentiated exactly, or
intermediate values, whose derivative is a ``NotImplementedTangent`` (read the array afterwards
only with the flag off). Without a traced argument a call is SciPy's own.

>>> import numpy as np, mutagrad as mg
>>> import mutagrad.scipy.linalg as msl
>>> float(mg.grad(lambda t: msl.expm(t * np.eye(2))[0, 0])(1.0))  # d/dt e^t
2.718281828459045
"""
import scipy.linalg as _sl

from ..rules.scipy.linalg import (  # noqa: F401
    block_diag,
    cho_factor,
    cho_solve,
    cholesky,
    circulant,
    det,
    eigh,
    eigvalsh,
    expm,
    hankel,
    inv,
    khatri_rao,
    logm,
    lu,
    lu_factor,
    lu_solve,
    null_space,
    orth,
    polar,
    qr,
    solve,
    solve_banded,
    solve_continuous_are,
    solve_continuous_lyapunov,
    solve_discrete_are,
    solve_discrete_lyapunov,
    solve_lyapunov,
    solve_sylvester,
    solve_triangular,
    solveh_banded,
    sqrtm,
    svd,
    svdvals,
    toeplitz,
)


def __getattr__(name):
    return getattr(_sl, name)


def __dir__():
    return sorted(set(dir(_sl)) | set(globals()))
