"""``mutagrad.scipy.linalg``: ``scipy.linalg`` with differentiable
``solve_triangular``, ``cholesky``, ``cho_factor``/``cho_solve``,
``lu_factor``/``lu_solve``, ``solve_sylvester``, ``solve_continuous_lyapunov`` (``solve_lyapunov``),
``solve_discrete_lyapunov``, ``solve_continuous_are``, ``solve_discrete_are``, ``expm``, ``expm_frechet``,
``logm``, ``sqrtm``, ``cosm``, ``sinm``, ``tanm``, ``coshm``, ``sinhm``, ``tanhm``, ``fractional_matrix_power``,
``inv``, ``solve``, ``solve_banded``, ``solve_toeplitz``, ``matmul_toeplitz``, ``solve_circulant``, ``det``,
``eigh``, ``eigvalsh``, ``eig``, ``eigvals``, ``eigh_tridiagonal``, ``eigvalsh_tridiagonal``, ``solveh_banded``,
``cholesky_banded``, ``cho_solve_banded``, ``lu``, ``svd``, ``svdvals``, ``qr``, ``null_space``, ``orth``,
``polar``, ``pinv``, ``pinvh``, ``lstsq``, ``norm``, ``orthogonal_procrustes``, ``subspace_angles``,
``block_diag``, ``toeplitz``, ``circulant``, ``hankel``, ``khatri_rao``, ``diagsvd``, ``companion``,
``convolution_matrix``, ``leslie``, ``fiedler`` and ``fiedler_companion``; ``bandwidth``, ``issymmetric``
and ``ishermitian`` answer about the values (no derivative). Every other name is SciPy's own (and raises
mutagrad's escape error on a traced array).
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
    bandwidth,
    block_diag,
    cho_factor,
    cho_solve,
    cho_solve_banded,
    cholesky,
    cholesky_banded,
    circulant,
    companion,
    convolution_matrix,
    coshm,
    cosm,
    det,
    diagsvd,
    eig,
    eigh,
    eigh_tridiagonal,
    eigvals,
    eigvalsh,
    eigvalsh_tridiagonal,
    expm,
    expm_frechet,
    fiedler,
    fiedler_companion,
    fractional_matrix_power,
    hankel,
    inv,
    ishermitian,
    issymmetric,
    khatri_rao,
    leslie,
    logm,
    lstsq,
    lu,
    lu_factor,
    lu_solve,
    matmul_toeplitz,
    norm,
    null_space,
    orth,
    orthogonal_procrustes,
    pinv,
    pinvh,
    polar,
    qr,
    sinhm,
    sinm,
    solve,
    solve_banded,
    solve_circulant,
    solve_continuous_are,
    solve_continuous_lyapunov,
    solve_discrete_are,
    solve_discrete_lyapunov,
    solve_lyapunov,
    solve_sylvester,
    solve_toeplitz,
    solve_triangular,
    solveh_banded,
    sqrtm,
    subspace_angles,
    svd,
    svdvals,
    tanhm,
    tanm,
    toeplitz,
)


def __getattr__(name):
    return getattr(_sl, name)


def __dir__():
    return sorted(set(dir(_sl)) | set(globals()))
