"""scipy.linalg rules (mutagrad/rules/scipy/linalg.py) through
mutagrad.scipy.linalg, both modes, against finite differences."""
import functools

import numpy as np
import pytest

sl = pytest.importorskip("scipy.linalg")

import mutagrad as mg  # noqa: E402
import mutagrad.scipy.linalg as msl  # noqa: E402
from mutagrad.testing import check_grads, numerical_grad  # noqa: E402
from tests.rules._draws import Draws  # noqa: E402

_draws = Draws(0)
rng = _draws.rng
R, C = _draws.R, _draws.C
KR = Draws(44)  # (khatri_rao's cases draw their own: the others' draws stay as they were)


def WELL(*shape):  # well-conditioned square matrices
    n = shape[-1]
    return rng.standard_normal(shape) + 3 * np.eye(n)


def SPD(*shape):
    a = rng.standard_normal(shape)
    return a @ np.swapaxes(a, -1, -2) + shape[-1] * np.eye(shape[-1])


def HPD(n):
    a = C(n, n)
    return a @ a.conj().T + n * np.eye(n)


A3, S3, B32, b3 = WELL(3, 3), SPD(3, 3), R(3, 2), R(3)
LU3, PIV3 = sl.lu_factor(A3)


def _band(lower, upper, n, cplx=False):  # the diagonals of a diagonally dominant banded matrix
    ab = (C if cplx else R)(lower + upper + 1, n)
    ab[upper] += 8.0
    return ab


def _hband(p, lower, n, cplx=False):  # a Hermitian band, diagonally dominant, one triangle stored
    ab = (C if cplx else R)(p + 1, n)
    ab[0 if lower else p] = 8.0 + np.abs(R(n))
    return ab


def _tri(trans, lower, unit):
    return lambda a, b: msl.solve_triangular(a, b, trans=trans, lower=lower, unit_diagonal=unit)


def _cho(lower):
    return lambda a, b: msl.cho_solve(msl.cho_factor(a, lower=lower), b)


# (covers, function, args, order)
CASES = [
    # triangular solves: only the triangle read (strictly, with unit_diagonal) gets a cotangent
    ("scipy.linalg.solve_triangular", _tri(0, False, False), (WELL(3, 3), B32), 2),
    ("scipy.linalg.solve_triangular", _tri(0, True, False), (WELL(3, 3), b3), 2),
    ("scipy.linalg.solve_triangular", _tri(1, True, True), (WELL(3, 3), B32), 2),
    ("scipy.linalg.solve_triangular", _tri("T", False, True), (WELL(3, 3), b3), 2),
    ("scipy.linalg.solve_triangular", _tri(2, True, False), (WELL(3, 3), B32), 2),
    ("scipy.linalg.solve_triangular", _tri("C", False, False), (WELL(3, 3) + 1j * R(3, 3), C(3, 2)), 1),
    ("scipy.linalg.solve_triangular", _tri(1, False, False), (WELL(3, 3) + 1j * R(3, 3), C(3)), 1),
    ("scipy.linalg.solve_triangular", _tri(0, True, False), (WELL(2, 3, 3), R(2, 3, 2)), 2),
    # Cholesky (reads one triangle)
    ("scipy.linalg.cholesky", msl.cholesky, (S3,), 2),
    ("scipy.linalg.cholesky", lambda a: msl.cholesky(a, lower=True), (S3 + np.triu(R(3, 3), 1),), 2),
    ("scipy.linalg.cholesky", lambda a: msl.cholesky(a, lower=True), (HPD(3),), 1),
    ("scipy.linalg.cholesky", msl.cholesky, (SPD(2, 3, 3),), 2),
    ("scipy.linalg.cho_factor", lambda a: msl.cho_factor(a)[0], (S3,), 2),
    ("scipy.linalg.cho_factor", lambda a: msl.cho_factor(a, lower=True)[0], (S3,), 2),
    ("scipy.linalg.cho_solve", _cho(False), (S3, B32), 2),
    ("scipy.linalg.cho_solve", _cho(True), (S3, b3), 2),
    ("scipy.linalg.cho_solve", lambda c, b: msl.cho_solve((c, True), b), (sl.cho_factor(S3, lower=True)[0], B32), 2),
    ("scipy.linalg.cho_solve", _cho(False), (HPD(3), C(3)), 1),
    # LU (square): the factors, and solves w.r.t. b and the factors
    ("scipy.linalg.lu_factor", lambda a: msl.lu_factor(a)[0], (A3,), 2),
    ("scipy.linalg.lu_factor", lambda a: msl.lu_factor(a)[0], (C(3, 3),), 1),
    ("scipy.linalg.lu_solve", lambda a, b: msl.lu_solve(msl.lu_factor(a), b), (R(3, 3), B32), 2),
    ("scipy.linalg.lu_solve", lambda a, b: msl.lu_solve(msl.lu_factor(a), b, trans=1), (R(3, 3), b3), 2),
    ("scipy.linalg.lu_solve", lambda a, b: msl.lu_solve(msl.lu_factor(a), b, trans=2), (C(3, 3), C(3, 2)), 1),
    ("scipy.linalg.lu_solve", lambda lu, b: msl.lu_solve((lu, PIV3), b, trans=1), (LU3, b3), 2),
    # Sylvester equation, matrix exponential and square root
    ("scipy.linalg.solve_sylvester", msl.solve_sylvester, (WELL(3, 3), WELL(3, 3), R(3, 3)), 2),
    ("scipy.linalg.solve_sylvester", msl.solve_sylvester, (WELL(2, 2) + 1j * R(2, 2), WELL(2, 2), C(2, 2)), 1),
    ("scipy.linalg.expm", msl.expm, (0.5 * R(3, 3),), 2),
    ("scipy.linalg.expm", msl.expm, (0.5 * C(3, 3),), 1),
    ("scipy.linalg.expm", msl.expm, (0.5 * R(2, 3, 3),), 2),
    ("scipy.linalg.logm", msl.logm, (SPD(3, 3),), 2),
    ("scipy.linalg.logm", msl.logm, (WELL(3, 3) + 2 * np.eye(3),), 1),  # not symmetric
    ("scipy.linalg.logm", msl.logm, (HPD(3),), 1),
    ("scipy.linalg.logm", lambda a: msl.logm(a + a.T + np.diag([6.0, 6.0, 7.0])), (np.zeros((3, 3)),), 1),  # a tie
    ("scipy.linalg.sqrtm", msl.sqrtm, (SPD(3, 3),), 2),
    ("scipy.linalg.sqrtm", msl.sqrtm, (WELL(3, 3) + 2 * np.eye(3),), 2),  # not symmetric
    ("scipy.linalg.sqrtm", msl.sqrtm, (HPD(3),), 1),
    # SciPy's values with np.linalg's formulas; assume_a selects the entries read
    ("scipy.linalg.inv", msl.inv, (WELL(3, 3),), 2),
    ("scipy.linalg.inv", lambda a: msl.inv(a, assume_a="pos", lower=True), (S3 + np.triu(R(3, 3), 1),), 2),
    ("scipy.linalg.inv", lambda a: msl.inv(a, assume_a="upper triangular"), (WELL(3, 3),), 2),
    ("scipy.linalg.solve", msl.solve, (WELL(3, 3), B32), 2),
    ("scipy.linalg.solve", lambda a, b: msl.solve(a, b, transposed=True), (WELL(3, 3), b3), 2),
    ("scipy.linalg.solve", lambda a, b: msl.solve(a, b, assume_a="sym"), (WELL(3, 3), b3), 2),
    ("scipy.linalg.solve", lambda a, b: msl.solve(a, b, assume_a="her", lower=True), (HPD(3), C(3)), 1),
    ("scipy.linalg.solve", lambda a, b: msl.solve(a, b, assume_a="diagonal"), (WELL(3, 3), B32), 2),
    ("scipy.linalg.solve", lambda a, b: msl.solve(a, b, assume_a="tridiagonal"), (WELL(4, 4), R(4)), 2),
    ("scipy.linalg.solve", lambda a, b: msl.solve(a, b, assume_a="lower triangular"), (WELL(3, 3), b3), 2),
    ("scipy.linalg.det", msl.det, (R(3, 3),), 2),
    ("scipy.linalg.solve_banded", lambda ab, b: msl.solve_banded((1, 1), ab, b), (_band(1, 1, 6), R(6)), 2),
    ("scipy.linalg.solve_banded", lambda ab, b: msl.solve_banded((2, 0), ab, b), (_band(2, 0, 5), R(5, 3)), 2),
    ("scipy.linalg.solve_banded", lambda ab, b: msl.solve_banded((0, 3), ab, b), (_band(0, 3, 6), R(6, 2)), 1),
    ("scipy.linalg.solve_banded", lambda ab, b: msl.solve_banded((1, 2), ab, b), (_band(1, 2, 5, True), C(5)), 1),
    # solveh_banded: one triangle of a Hermitian positive definite band (upper form by default)
    ("scipy.linalg.solveh_banded", msl.solveh_banded, (_hband(1, False, 6), R(6)), 2),
    ("scipy.linalg.solveh_banded", lambda ab, b: msl.solveh_banded(ab, b, lower=True), (_hband(2, True, 6), R(6, 2)), 2),
    ("scipy.linalg.solveh_banded", msl.solveh_banded, (_hband(2, False, 5, True), C(5)), 1),
    ("scipy.linalg.solveh_banded", lambda ab, b: msl.solveh_banded(ab, b, lower=True), (_hband(1, True, 5, True), C(5)), 1),
    # eigh: the standard and the generalized problem (one triangle of each read), values and vectors
    ("scipy.linalg.eigh", lambda a: msl.eigh(a, eigvals_only=True), (S3 + np.triu(R(3, 3), 1),), 2),
    ("scipy.linalg.eigvalsh", lambda a: msl.eigvalsh(a, lower=False), (S3 + np.tril(R(3, 3), -1),), 2),
    ("scipy.linalg.eigvalsh", lambda a, b: msl.eigvalsh(a, b), (R(3, 3) + np.triu(R(3, 3)), SPD(3, 3)), 2),
    ("scipy.linalg.eigh", lambda a, b: msl.eigh(a, b), (S3 + np.triu(R(3, 3), 1), SPD(3, 3) + np.triu(R(3, 3), 1)), 2),
    ("scipy.linalg.eigh", lambda a, b: msl.eigh(a, b, lower=False), (R(4, 4), SPD(4, 4) + np.tril(R(4, 4), -1)), 2),
    ("scipy.linalg.eigh", lambda a: msl.eigh(a, driver="evd"), (S3 + np.triu(R(3, 3), 1),), 2),
    ("scipy.linalg.eigh", lambda a: msl.eigh(a, lower=False, driver="ev"), (R(4, 4),), 2),
    ("scipy.linalg.eigh", lambda a: msl.eigh(a, driver="evx"), (R(3, 3),), 1),
    ("scipy.linalg.eigh", lambda a: msl.eigh(a, driver="evd"), (HPD(3),), 1),  # complex: LAPACK's real row
    ("scipy.linalg.eigh", lambda a: msl.eigh(a, lower=False, driver="evd"), (HPD(3),), 1),
    ("scipy.linalg.eigh", lambda a, b: msl.eigh(a, b, lower=False), (HPD(3), HPD(3)), 1),
    ("scipy.linalg.eigh", lambda a, b: msl.eigh(a, b, eigvals_only=True), (HPD(3), HPD(3)), 1),
    # the lowest modes: subset_by_index of the values
    ("scipy.linalg.eigvalsh", lambda a, b: msl.eigh(a, b, eigvals_only=True, subset_by_index=[0, 1]),
     (S3 + np.triu(R(3, 3), 1), SPD(3, 3)), 2),
    ("scipy.linalg.eigvalsh", lambda a: msl.eigvalsh(a, subset_by_index=(1, 2), lower=False), (R(3, 3),), 2),
    ("scipy.linalg.eigvalsh", lambda a, b: msl.eigvalsh(a, b, subset_by_index=(2, 2)), (HPD(3), HPD(3)), 1),
    # lu of rectangular matrices: the square part's rule, then L's extra rows (tall) or U's extra columns (wide)
    ("scipy.linalg.lu_factor", lambda a: msl.lu_factor(a)[0], (R(5, 3),), 2),
    ("scipy.linalg.lu_factor", lambda a: msl.lu_factor(a)[0], (R(3, 5),), 2),
    ("scipy.linalg.lu_factor", lambda a: msl.lu_factor(a)[0], (C(4, 2),), 1),
    ("scipy.linalg.lu", lambda a: msl.lu(a)[1:], (R(6, 4),), 2),
    ("scipy.linalg.lu", lambda a: msl.lu(a, permute_l=True), (R(2, 5),), 2),
    # svd and qr: SciPy's factors with np.linalg's rules (the one extra vector of full_matrices/"full" too)
    ("scipy.linalg.svd", lambda a: msl.svd(a, compute_uv=False), (R(4, 3),), 2),
    ("scipy.linalg.svd", msl.svdvals, (R(3, 4),), 2),  # (svdvals: SciPy's svd(a, compute_uv=False); regress58)
    ("scipy.linalg.svd", lambda a: msl.svd(a, full_matrices=False), (R(4, 3),), 2),
    ("scipy.linalg.svd", msl.svd, (R(3, 4),), 2),
    ("scipy.linalg.svd", lambda a: msl.svd(a, lapack_driver="gesvd"), (R(4, 3),), 1),
    ("scipy.linalg.svd", lambda a: msl.svd(a, full_matrices=False), (R(2, 3, 3),), 1),
    ("scipy.linalg.svd", lambda a: msl.svd(a, compute_uv=False), (C(3, 2),), 1),
    ("scipy.linalg.qr", msl.qr, (R(4, 3),), 2),
    ("scipy.linalg.qr", lambda a: msl.qr(a, mode="economic"), (R(5, 3),), 2),
    ("scipy.linalg.qr", lambda a: msl.qr(a, mode="r")[0], (R(3, 4),), 2),
    ("scipy.linalg.qr", lambda a: msl.qr(a, mode="r")[0], (R(5, 2),), 2),  # (tall: no extra Q columns read)
    ("scipy.linalg.qr", lambda a: msl.qr(a, mode="economic"), (C(3, 3),), 1),
    ("scipy.linalg.null_space", msl.null_space, (R(2, 3),), 2),
    ("scipy.linalg.orth", msl.orth, (R(4, 3),), 2),
]
_POLAR = np.random.default_rng(4601)  # (its own draws: the tables above keep theirs)
_ROT = np.array([[np.cos(0.3), -np.sin(0.3), 0.0], [np.sin(0.3), np.cos(0.3), 0.0], [0.0, 0.0, 1.0]])
CASES += [
    ("scipy.linalg.polar", msl.polar, (_POLAR.standard_normal((3, 3)),), 2),
    ("scipy.linalg.polar", lambda a: msl.polar(a, side="left"), (_POLAR.standard_normal((3, 3)),), 2),
    ("scipy.linalg.polar", msl.polar, (_POLAR.standard_normal((4, 2)),), 2),  # tall: u's columns orthonormal
    ("scipy.linalg.polar", lambda a: msl.polar(a, "left"), (_POLAR.standard_normal((2, 4)),), 2),
    ("scipy.linalg.polar", msl.polar, (_POLAR.standard_normal((3, 3)) + 1j * _POLAR.standard_normal((3, 3)),), 2),
    ("scipy.linalg.polar", msl.polar, (2.0 * _ROT,), 2),  # repeated singular values: a rotation, stretched evenly
]

# stacks (SciPy 1.17 batches over leading axes, broadcasting them; a vector right-hand side
# serves every matrix), from a stream of their own so the draws above stay as they were
_stacks = Draws(11)
SR, SC = _stacks.R, _stacks.C


def _swell(*shape, cplx=False):
    return (SC if cplx else SR)(*shape) + 3 * np.eye(shape[-1])


def _sspd(*shape):
    a = SR(*shape)
    return a @ np.swapaxes(a, -1, -2) + shape[-1] * np.eye(shape[-1])


def _sband(lower, upper, *shape):  # a stack of diagonally dominant bands (..., l + u + 1, n)
    ab = SR(*shape[:-1], lower + upper + 1, shape[-1])
    ab[..., upper, :] += 8.0
    return ab


def _shband(p, lower, *shape):
    ab = SR(*shape[:-1], p + 1, shape[-1])
    ab[..., 0 if lower else p, :] = 8.0 + np.abs(SR(*shape[:-1], shape[-1]))
    return ab


_C24 = SR(2, 2, 4)  # orth of b @ _C24: a stack of 4 x 4 matrices of rank 2 for every b

CASES += [
    ("scipy.linalg.lu_factor", lambda a: msl.lu_factor(a)[0], (SR(2, 3, 3),), 2),
    ("scipy.linalg.lu_factor", lambda a: msl.lu_factor(a)[0], (SC(2, 4, 3),), 1),
    ("scipy.linalg.lu_solve", lambda a, b: msl.lu_solve(msl.lu_factor(a), b, trans=1), (SR(2, 3, 3), SR(2, 3, 2)), 1),
    ("scipy.linalg.lu_solve", lambda a, b: msl.lu_solve(msl.lu_factor(a), b), (SR(2, 3, 3), SR(3)), 1),  # one b for all
    ("scipy.linalg.lu_solve", lambda a, b: msl.lu_solve(msl.lu_factor(a), b), (SR(3, 3), SR(2, 3, 2)), 1),  # a broadcast
    ("scipy.linalg.lu", lambda a: msl.lu(a, permute_l=True), (SR(2, 3, 4),), 1),
    ("scipy.linalg.solve_triangular", _tri(1, True, False), (_swell(2, 3, 3), SR(3)), 1),
    ("scipy.linalg.cho_solve", _cho(True), (_sspd(2, 3, 3), SR(3)), 1),
    ("scipy.linalg.cho_factor", lambda a: msl.cho_factor(a)[0], (_sspd(2, 3, 3),), 1),
    ("scipy.linalg.solve_banded", lambda ab, b: msl.solve_banded((1, 2), ab, b), (_sband(1, 2, 2, 5), SR(2, 5, 2)), 2),
    ("scipy.linalg.solve_banded", lambda ab, b: msl.solve_banded((1, 1), ab, b), (_sband(1, 1, 2, 4), SR(4)), 1),
    ("scipy.linalg.solve_banded", lambda ab, b: msl.solve_banded((2, 0), ab, b), (_sband(2, 0, 4), SR(2, 4, 1)), 1),
    ("scipy.linalg.solveh_banded", msl.solveh_banded, (_shband(1, False, 2, 5), SR(2, 5, 2)), 2),
    ("scipy.linalg.solveh_banded", lambda ab, b: msl.solveh_banded(ab, b, lower=True), (_shband(2, True, 2, 5), SR(5)), 1),
    ("scipy.linalg.solveh_banded", lambda ab, b: msl.solveh_banded(ab, b, lower=True), (_shband(1, True, 5), SR(2, 5, 1)), 1),
    ("scipy.linalg.solve_sylvester", msl.solve_sylvester, (_swell(3, 3), _swell(2, 3, 3), SR(3, 3)), 1),
    ("scipy.linalg.eigh", lambda a, b: msl.eigh(a, b), (_sspd(2, 3, 3), _sspd(3, 3)), 1),
    ("scipy.linalg.eigvalsh", lambda a, b: msl.eigvalsh(a, b), (_sspd(3, 3), _sspd(2, 3, 3)), 1),
    ("scipy.linalg.solve", msl.solve, (_swell(2, 3, 3), SR(3)), 1),
    ("scipy.linalg.orth", msl.orth, (SR(2, 4, 3),), 2),
    ("scipy.linalg.orth", msl.orth, (SC(2, 3, 2),), 1),
    ("scipy.linalg.orth", lambda b: msl.orth(b @ _C24), (SR(2, 4, 2),), 2),  # rank 2, every matrix
    ("scipy.linalg.null_space", msl.null_space, (SR(2, 2, 3),), 2),
    ("scipy.linalg.null_space", lambda a: msl.null_space(a, lapack_driver="gesvd"), (SR(3, 4),), 1),
]


# inv, solve and det (more below): SciPy's values, and the structures SciPy 1.17 reads
_sv = Draws(23)  # (a stream of their own)
_SOLVE_STRUCTURES = [None, "gen", "diagonal", "tridiagonal", "banded", "upper triangular", "lower triangular",
                     "sym", "her", "pos"]
_ALIASES = {"general": "gen", "symmetric": "sym", "hermitian": "her", "positive definite": "pos"}


def _draw(shape, cplx):
    return _sv.C(*shape) if cplx else _sv.R(*shape)


def _structured_input(assume_a, lower, cplx, batch=(), n=3):
    """A matrix for ``assume_a`` whose entries SciPy does not read are noise (the diagonal's
    imaginary part of a Hermitian one too); for None, alternately a general and an exactly
    positive definite one (SciPy finds the structure: Cholesky)."""
    shape = batch + (n, n)
    eye = np.eye(n)
    if assume_a in ("sym", "her", "pos") or (assume_a is None and lower):
        g = _draw(shape, cplx)
        h = g @ np.swapaxes(g, -1, -2) if assume_a == "sym" else g @ np.swapaxes(g, -1, -2).conj()
        h = h + n * eye
        if assume_a is None:
            return h
        unread = np.triu(_draw(shape, cplx), 1) if lower else np.tril(_draw(shape, cplx), -1)
        return h + unread + (1j * eye * _sv.R(*shape) if cplx and assume_a != "sym" else 0)
    if assume_a == "banded":  # (SciPy finds the band: one below the diagonal, two above)
        i, j = np.indices((n, n))
        return np.where((j - i <= 2) & (i - j <= 1), _draw(shape, cplx), 0) + 4 * eye
    return _draw(shape, cplx) + 4 * eye


CASES += [  # (every order: the derivative's solves are SciPy's, with the matrix read)
    ("scipy.linalg.solve", lambda a, b: msl.solve(a, b, assume_a="pos", lower=True),
     (_structured_input("pos", True, False), _sv.R(3, 2)), 2),
    ("scipy.linalg.solve", lambda a, b: msl.solve(a, b, assume_a="upper triangular", transposed=True),
     (_structured_input("gen", False, False), _sv.R(3)), 2),
    ("scipy.linalg.solve", lambda a, b: msl.solve(a, b, assume_a="sym"),
     (_structured_input("sym", False, True), _sv.C(3)), 1),
    ("scipy.linalg.solve", msl.solve, (np.array([[2.0]]), _sv.R(3, 2)), 2),  # (one entry: SciPy divides)
    ("scipy.linalg.inv", lambda a: msl.inv(a, assume_a="diagonal"), (_structured_input("gen", False, False),), 2),
    ("scipy.linalg.inv", lambda a: msl.inv(a, assume_a="her"), (_structured_input("her", False, True),), 1),
    ("scipy.linalg.det", msl.det, (_sv.C(2, 3, 3),), 1),
]


# Lyapunov and Riccati equations (a stream of their own). SciPy requires q and r Hermitian (it
# raises beyond rounding), so central differences move them through p ↦ p + pᴴ + 4 I; a, e, s
# and b move freely. The problems are well conditioned: a stable a for the continuous Lyapunov
# equation, one of spectral radius below 1 for the discrete one, a full-rank b and positive
# definite q and r (stabilizable and detectable) for the Riccati equations.
_eq = Draws(31)


def _eq_draw(shape, cplx=False):
    return _eq.C(*shape) if cplx else _eq.R(*shape)


def _hurwitz(*shape, cplx=False):  # eigenvalues in the open left half plane, away from the axis
    return 0.5 * _eq_draw(shape, cplx) - 2.5 * np.eye(shape[-1])


def _schur_stable(*shape, cplx=False):  # spectral radius 0.6
    a = _eq_draw(shape, cplx)
    return 0.6 * a / np.max(np.abs(np.linalg.eigvals(a)), axis=-1)[..., None, None]


def _herm(p):
    return p + np.swapaxes(p, -1, -2).conj() + 4 * np.eye(p.shape[-1])


def _riccati(solve, extra="", **kw):
    """``solve`` of (a, b, p, w, *more): q = _herm(p), r = _herm(w), and ``more`` the matrices
    named by ``extra`` ("e", "s" or "es")."""
    def f(a, b, p, w, *more):
        return solve(a, b, _herm(p), _herm(w), **dict(zip(extra, more)), **kw)

    return f


def _riccati_args(solve, n=3, m=2, batch=(), cplx=False, extra=""):
    """(a, b, p, w, *more) for _riccati(solve, extra): a stack of a, r and s matrices for
    ``batch``; drawn again until SciPy's X is moderate (|X| < 20: central differences of a
    Riccati solution lose its size times SciPy's rounding over the step)."""
    while True:
        args = [0.5 * _eq_draw(batch + (n, n), cplx), _eq_draw((n, m), cplx), 0.3 * _eq_draw((n, n), cplx),
                0.3 * _eq_draw(batch + (m, m), cplx)]
        if "e" in extra:
            args.append(np.eye(n) + 0.2 * _eq_draw((n, n), cplx))
        if "s" in extra:
            args.append(0.3 * _eq_draw(batch + (n, m), cplx))
        try:
            if np.max(np.abs(_riccati(getattr(sl, solve), extra, balanced=False)(*args))) < 20:
                return tuple(args)
        except np.linalg.LinAlgError:
            pass


_care, _dare = (functools.partial(_riccati, msl.solve_continuous_are),
                functools.partial(_riccati, msl.solve_discrete_are))
_care_args, _dare_args = (functools.partial(_riccati_args, "solve_continuous_are"),
                          functools.partial(_riccati_args, "solve_discrete_are"))
_dlyap_bilinear = functools.partial(msl.solve_discrete_lyapunov, method="bilinear")

CASES += [  # (every order: the derivatives' equations are solved by the same, differentiable, solvers)
    ("scipy.linalg.solve_continuous_lyapunov", msl.solve_continuous_lyapunov, (_hurwitz(3, 3), _eq.R(3, 3)), 2),
    ("scipy.linalg.solve_continuous_lyapunov", msl.solve_continuous_lyapunov,
     (_hurwitz(3, 3, cplx=True), _eq.C(3, 3)), 1),
    ("scipy.linalg.solve_continuous_lyapunov", msl.solve_lyapunov, (_hurwitz(2, 3, 3), _eq.R(3, 3)), 1),
    ("scipy.linalg.solve_continuous_lyapunov", msl.solve_continuous_lyapunov,  # (real a, real eigenvalues)
     (np.triu(_eq.R(3, 3), 1) - np.diag([1.0, 2.0, 3.0]), _eq.C(3, 3)), 1),
    ("scipy.linalg.solve_discrete_lyapunov", msl.solve_discrete_lyapunov, (_schur_stable(3, 3), _eq.R(3, 3)), 2),
    ("scipy.linalg.solve_discrete_lyapunov", _dlyap_bilinear, (_schur_stable(3, 3), _eq.R(3, 3)), 2),
    ("scipy.linalg.solve_discrete_lyapunov", msl.solve_discrete_lyapunov,
     (_schur_stable(3, 3, cplx=True), _eq.C(3, 3)), 1),
    ("scipy.linalg.solve_discrete_lyapunov", _dlyap_bilinear, (_schur_stable(3, 3, cplx=True), _eq.C(3, 3)), 1),
    ("scipy.linalg.solve_discrete_lyapunov", msl.solve_discrete_lyapunov,  # (direct: a real a, a complex q)
     (_schur_stable(3, 3), _eq.C(3, 3)), 1),
    ("scipy.linalg.solve_discrete_lyapunov", msl.solve_discrete_lyapunov, (_schur_stable(3, 3), _eq.R(2, 3, 3)), 1),
    ("scipy.linalg.solve_continuous_are", _care(), _care_args(), 2),
    ("scipy.linalg.solve_continuous_are", _care(balanced=False), _care_args(m=1), 2),
    ("scipy.linalg.solve_continuous_are", _care("s"), _care_args(extra="s"), 2),
    ("scipy.linalg.solve_continuous_are", _care("es", balanced=False), _care_args(extra="es"), 2),
    ("scipy.linalg.solve_continuous_are", _care(), _care_args(cplx=True), 1),
    ("scipy.linalg.solve_continuous_are", _care("es", balanced=False), _care_args(cplx=True, extra="es"), 1),
    ("scipy.linalg.solve_continuous_are", _care(), _care_args(batch=(2,)), 1),
    ("scipy.linalg.solve_discrete_are", _dare(), _dare_args(), 2),
    ("scipy.linalg.solve_discrete_are", _dare(balanced=False), _dare_args(m=1), 2),
    ("scipy.linalg.solve_discrete_are", _dare("s"), _dare_args(extra="s"), 2),
    ("scipy.linalg.solve_discrete_are", _dare("es", balanced=False), _dare_args(extra="es"), 2),
    ("scipy.linalg.solve_discrete_are", _dare(), _dare_args(cplx=True), 1),
    ("scipy.linalg.solve_discrete_are", _dare("es", balanced=False), _dare_args(cplx=True, extra="es"), 1),
    ("scipy.linalg.solve_discrete_are", _dare(), _dare_args(batch=(2,)), 1),
]


@pytest.mark.parametrize("covers,fn,args,order", CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_rule(covers, fn, args, order):
    check_grads(fn, *args, modes=("fwd", "rev"), order=order)


@pytest.mark.parametrize("assume_a", [None, "gen", "pos", "sym", "her", "diagonal", "tridiagonal", "banded",
                                      "upper triangular", "lower triangular"])
def test_solve_reads_what_scipy_reads(assume_a):
    a = np.triu(A3) if assume_a == "banded" else A3
    np.testing.assert_array_equal(msl.solve(a, B32, assume_a=assume_a), sl.solve(a, B32, assume_a=assume_a))


def test_values_match_scipy():
    for lower in (False, True):
        c, low = msl.cho_factor(S3, lower=lower)
        c_ref, low_ref = sl.cho_factor(S3, lower=lower)
        np.testing.assert_array_equal(c, c_ref)
        assert low is low_ref
        np.testing.assert_allclose(msl.cho_solve((c, low), B32), sl.cho_solve((c_ref, low_ref), B32), rtol=1e-13)
    lu, piv = msl.lu_factor(A3)
    np.testing.assert_array_equal(lu, LU3)
    np.testing.assert_array_equal(piv, PIV3)
    np.testing.assert_array_equal(msl.inv(S3, assume_a="pos"), sl.inv(S3, assume_a="pos"))
    np.testing.assert_array_equal(msl.det(A3), sl.det(A3))
    np.testing.assert_array_equal(msl.logm(S3), sl.logm(S3))
    assert msl.funm is sl.funm  # everything else is SciPy's


def test_lu_pivots_are_plain_integers():
    def f(a):
        lu, piv = msl.lu_factor(a)
        assert type(piv) is np.ndarray and piv.dtype.kind == "i"
        return np.sum(lu)

    mg.grad(f)(A3)


def test_lu_of_a_rectangular_matrix_closed_form():
    # a tall [[a], [c]] (|a| > |c|): L = [[1], [c / a]], U = [[a]]; a wide [a, b]: L = 1, U = [a, b]
    g = mg.grad(lambda x: msl.lu_factor(x)[0][1, 0])(np.array([[2.0], [1.0]]))
    np.testing.assert_allclose(g, [[-0.25], [0.5]], rtol=1e-14)  # d(c/a) = (-c/a², 1/a)
    np.testing.assert_allclose(mg.grad(lambda x: np.sum(msl.lu(x)[2]))(np.array([[2.0, 1.0]])), [[1.0, 1.0]])


def test_expm_closed_form():
    # d/dt expm(t N) = N expm(t N); for nilpotent N = [[0, 1], [0, 0]], expm(t N) = I + t N
    n = np.array([[0.0, 1.0], [0.0, 0.0]])
    np.testing.assert_allclose(mg.jacobian(lambda t: msl.expm(t * n))(0.7), n, atol=1e-12)
    # third order: expm(t I)[0, 0] = e^t
    d3 = mg.grad(mg.grad(mg.grad(lambda t: msl.expm(t * np.eye(2))[0, 0])))(0.3)
    np.testing.assert_allclose(d3, np.exp(0.3), rtol=1e-10)


def test_eigh_values_and_vectors_are_scipys():
    a, b = S3 + np.triu(R(3, 3), 1), SPD(3, 3)
    for args in ((a,), (a, b)):
        for lower in (True, False):
            w, v = msl.eigh(*args, lower=lower)
            w_ref, v_ref = sl.eigh(*args, lower=lower)
            np.testing.assert_array_equal(w, w_ref)
            np.testing.assert_array_equal(v, v_ref)
            np.testing.assert_array_equal(msl.eigvalsh(*args, lower=lower), sl.eigvalsh(*args, lower=lower))
            np.testing.assert_array_equal(msl.eigvalsh(*args, lower=lower, subset_by_index=(1, 2)),
                                          sl.eigvalsh(*args, lower=lower, subset_by_index=(1, 2)))


def test_generalized_eigenvalues_of_diagonal_matrices_closed_form():
    # A v = λ B v with A = diag(a), B = diag(b): λ = a / b (sorted), dλ/da = 1/b, dλ/db = -a/b²
    a, b = np.array([1.0, 9.0, 3.0]), np.array([2.0, 3.0, 4.0])  # λ = 0.5, 3, 0.75
    weights = np.array([1.0, 10.0, 100.0])  # on the sorted values 0.5, 0.75, 3
    f = lambda a, b: np.sum(weights * msl.eigvalsh(np.diag(a), np.diag(b)))
    order = np.argsort(a / b)  # which weight each diagonal entry's value gets
    w_of = np.empty(3)
    w_of[order] = weights
    np.testing.assert_allclose(mg.grad(f, 0)(a, b), w_of / b, rtol=1e-12)
    np.testing.assert_allclose(mg.grad(f, 1)(a, b), -w_of * a / b**2, rtol=1e-12)
    _, jv = mg.jvp(f, (a, b), (np.ones(3), np.zeros(3)))
    np.testing.assert_allclose(jv, np.sum(w_of / b), rtol=1e-12)


def test_eigh_vectors_with_the_default_driver_are_refused():
    # SciPy's default standard-problem driver ("evr") picks vector signs that jump under
    # rounding-level changes of the matrix: no derivative; the values keep theirs
    a = S3 + np.triu(R(3, 3), 1)
    g = mg.grad(lambda a: msl.eigh(a)[1][0, 0])(a)
    assert isinstance(g, mg.NotImplementedTangent) and "driver='evd'" in g.message
    with mg.config(strict=True), pytest.raises(mg.DifferentiationError, match="evr"):
        mg.grad(lambda a: msl.eigh(a)[1][0, 0])(a)
    dw, dv = mg.jvp(lambda a: msl.eigh(a), (a,), (a,))[1]
    assert isinstance(dv, mg.NotImplementedTangent) and "driver='evd'" in dv.message
    fd = (sl.eigh(a + 1e-6 * a, eigvals_only=True) - sl.eigh(a - 1e-6 * a, eigvals_only=True)) / 2e-6
    np.testing.assert_allclose(dw, fd, rtol=1e-6)  # the values' tangent along a, against central differences
    check_grads(lambda a: msl.eigh(a)[0], a, order=2)


def test_eigh_phase_of_generalized_complex_vectors_with_lower_is_refused():
    a, b = HPD(3), HPD(3)
    # no row of the vectors is real (L⁻ᴴ mixes LAPACK's real row): phase-invariant functions only,
    # in reverse mode (forward mode cannot tell whether the function depends on the phase)
    check_grads(lambda a, b: np.abs(msl.eigh(a, b)[1]) ** 2, a, b, modes=("rev",))
    g = mg.grad(lambda a: np.real(msl.eigh(a, b)[1][1, 0]))(a)
    assert isinstance(g, mg.NotImplementedTangent) and "phase" in g.message


def test_eigh_options_on_plain_matrices_are_scipys_and_on_traced_ones_differentiated_or_named():
    b = SPD(3, 3)
    for kw in ({"b": b, "type": 2}, {"b": b, "type": 3}, {"subset_by_index": [0, 1]},
               {"subset_by_value": (0.0, 1.5)}, {"subset_by_value": (-np.inf, np.inf), "eigvals_only": True}):
        mine, theirs = msl.eigh(S3, **kw), sl.eigh(S3, **kw)
        for x, y in zip(mine if isinstance(mine, tuple) else (mine,), theirs if isinstance(theirs, tuple) else (theirs,)):
            np.testing.assert_array_equal(x, y)  # (SciPy's own call: the same bits)
    with pytest.raises(mg.NoRuleError, match="type=2") as info:
        mg.grad(lambda a: np.sum(msl.eigh(a, b, type=2)[0]))(S3)
    assert isinstance(info.value, ValueError) and "test_scipy_linalg.py" in str(info.value)
    with pytest.raises(ValueError, match="Requested eigenvalue indices are not valid"):  # SciPy's message
        msl.eigvalsh(S3, subset_by_index=(2, 5))
    with pytest.raises(ValueError, match="cannot compute subsets"):  # (SciPy's, also traced)
        mg.grad(lambda a: np.sum(msl.eigh(a, subset_by_index=[0, 1], driver="evd")[0]))(S3)
    # the vectors of a subset, and a subset by value: from every pair, vs central differences
    w = np.arange(9.0).reshape(3, 3) / 9.0
    check_grads(lambda a: msl.eigh(a, subset_by_index=[1, 2], driver="evx")[0], S3)
    check_grads(lambda a: np.abs(msl.eigh(a, subset_by_index=[1, 2], driver="evx")[1][:, -1]) ** 2 * w[0], S3,
                modes=("rev",))
    lo = float(np.linalg.eigvalsh(S3)[0]) + 1e-3
    check_grads(lambda a: msl.eigh(a, subset_by_value=(lo, np.inf), eigvals_only=True), S3)


@pytest.mark.parametrize("name,args", [
    ("toeplitz", (R(3),)), ("toeplitz", (R(3), R(4))), ("toeplitz", (C(3),)), ("toeplitz", (R(2, 3), R(4))),
    ("toeplitz", ([1, 2, 3], [1, 4, 5, 6])), ("circulant", (R(4),)), ("circulant", (C(2, 3),)),
    ("hankel", (R(3),)), ("hankel", (R(3), R(5))), ("hankel", ([1, 2, 3],)),
    ("block_diag", (R(1, 3),)), ("block_diag", (1.0, [2, 3], [[4, 5], [6, 7]])), ("block_diag", (R(2, 2), C(3, 1))),
    ("block_diag", ()), ("block_diag", (R(2, 2, 2), R(1, 1))),
    ("khatri_rao", (KR.R(3, 2), KR.R(4, 2))), ("khatri_rao", (KR.C(2, 3), KR.R(2, 3))),
    ("khatri_rao", (KR.R(2, 3, 2), KR.R(4, 2))), ("khatri_rao", (np.ones((0, 2)), KR.R(3, 2))),
    ("khatri_rao", ([[1, 2], [3, 4]], [[1.5, 2.5]])),
    ("khatri_rao", (np.array([[1.0, 2.0], [3.0, 4.0]]).view(np.matrix), KR.R(2, 2))),  # (a view: no warning)
])
def test_special_matrices_are_scipys(name, args):
    got, want = getattr(msl, name)(*args), getattr(sl, name)(*args)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("fn,args", [
    (msl.toeplitz, (R(3), R(4))), (msl.toeplitz, (C(3),)), (msl.toeplitz, (R(2, 3), R(2, 2))),
    (msl.circulant, (R(2, 3),)), (msl.hankel, (R(3), R(2))), (msl.khatri_rao, (KR.R(3, 2), KR.R(4, 2))),
    (msl.khatri_rao, (KR.R(2, 3, 2), KR.C(4, 2))),
    (lambda a, b: msl.block_diag(a, b, a), (R(2, 3), R(1, 2))), (lambda a, b: msl.block_diag(a, b), (R(2, 2, 2), C(1, 1))),
])
def test_special_matrices_derivatives(fn, args):
    check_grads(fn, *args, order=2 if not any(np.iscomplexobj(a) for a in args) else 1)


def test_toeplitz_solve_with_writes():
    def f(x):
        t = msl.toeplitz(x)
        t[0, :] *= 2.0  # (a fresh array: written in place)
        return np.sum(np.linalg.solve(t + 5 * np.eye(3), x))

    check_grads(f, R(3), order=2)


@pytest.mark.parametrize("a", [R(4, 4), R(3, 3).astype(np.float32), C(3, 3), R(2, 3, 3), R(3, 5), R(5, 3)],
                         ids=["square", "float32", "complex", "batch", "wide", "tall"])
@pytest.mark.parametrize("kw", [{}, {"permute_l": True}, {"p_indices": True}], ids=["plu", "permute_l", "p_indices"])
def test_lu_is_scipys(a, kw):
    want = sl.lu(a, **kw)
    for out in (msl.lu(a, **kw), mg.vjp(lambda x: msl.lu(x, **kw), a)[0]):  # plain and traced
        for got, w in zip(out, want, strict=True):
            assert got.dtype == w.dtype
            np.testing.assert_array_equal(got, w)


@pytest.mark.parametrize("fn,a,order", [
    (lambda a: msl.lu(a)[1:], R(4, 4), 2), (lambda a: msl.lu(a, permute_l=True), R(3, 3), 2),
    (lambda a: msl.lu(a)[1:], R(2, 3, 3), 1), (lambda a: msl.lu(a)[1:], C(3, 3), 1),
])
def test_lu_derivatives(fn, a, order):
    check_grads(fn, a, order=order)


def test_lu_closed_form():
    # A = [[a, b], [c, d]] with |a| > |c| (no row exchange): U₁₁ = d - b c / a
    a = np.array([[2.0, 1.0], [1.0, 3.0]])
    np.testing.assert_allclose(mg.grad(lambda a: msl.lu(a)[2][1, 1])(a), [[0.25, -0.5], [-0.5, 1.0]], rtol=1e-14)
    check_grads(lambda a: msl.lu(a)[2].sum(), R(3, 4), modes=("fwd", "rev"), order=2)  # rectangular


@pytest.mark.parametrize("lower", [False, True])
def test_solveh_banded_is_scipys_and_the_dense_solve(lower):
    ab, b = _hband(2, lower, 6), R(6)
    np.testing.assert_array_equal(msl.solveh_banded(ab, b, lower=lower), sl.solveh_banded(ab, b, lower=lower))
    a = np.zeros((6, 6))  # the dense matrix the band stands for
    for d in range(3):
        for j in range(6 - d):
            a[j + d, j] = a[j, j + d] = ab[d, j] if lower else ab[2 - d, j + d]
    g = mg.grad(lambda b: np.sum(msl.solveh_banded(ab, b, lower=lower) ** 2))(b)
    x = np.linalg.solve(a, b)
    np.testing.assert_allclose(g, 2 * np.linalg.solve(a, x), rtol=1e-12)  # d|x|²/db = 2 A⁻¹ x
    # a 1-D ab: SciPy solves a 1 x 1 system from it and keeps the rest of b (its derivative was an IndexError
    # from inside the rule): refused at the call, with the 2-D form of a diagonal band (claims5)
    with pytest.raises(ValueError, match=r"ab must be 2-D.*d\[None, :\]"):
        mg.grad(lambda b: np.sum(msl.solveh_banded(np.array([2.0, 3.0, 4.0]), b)))(np.ones(3))


def test_generalized_complex_eigenvalues_have_every_order():
    # the values' derivative reads vectors (V diag(λ̄) Vᴴ); with lower=True no row of SciPy's complex
    # vectors is real, so their own derivative, needed at second order, was refused: taken from the
    # upper-triangle problem of the same matrices, whose phase convention is recognised
    a, b = HPD(3), HPD(3)
    check_grads(lambda a, b: msl.eigvalsh(a, b), a, b, order=2)
    check_grads(lambda t: np.sum(msl.eigvalsh(a, b + t * np.eye(3)) ** 2), 0.3, order=2)


def test_svd_and_qr_values_are_scipys():
    # the traced call returns SciPy's own factors (its LAPACK), whichever driver and mode
    a = R(5, 3)
    for fn in (lambda x: msl.svd(x), lambda x: msl.svd(x.T, lapack_driver="gesvd"),
               lambda x: msl.svd(x, compute_uv=False), lambda x: msl.qr(x), lambda x: msl.qr(x, mode="economic"),
               lambda x: msl.qr(x.T, mode="r"), lambda x: msl.null_space(x.T), lambda x: msl.orth(x)):
        plain = fn(a)
        with np.errstate(all="ignore"):
            traced = mg.vjp(fn, a)[0]
        for p, t in zip(plain if isinstance(plain, tuple) else (plain,), traced if isinstance(traced, tuple) else (traced,)):
            assert type(t) is np.ndarray
            np.testing.assert_array_equal(t, p)


def test_svd_extra_vectors_of_a_wide_matrix_are_not_unique():
    # two extra rows of Vh (a 2 x 4 matrix): any rotation of them will do, so no derivative (a
    # function of the first rows only is); null_space of that matrix likewise
    a = R(2, 4)
    g = mg.grad(lambda x: np.sum(msl.svd(x)[2][3]))(a)
    assert isinstance(g, mg.NotImplementedTangent)
    assert isinstance(mg.grad(lambda x: np.sum(msl.null_space(x)))(a), mg.NotImplementedTangent)
    check_grads(lambda x: msl.svd(x)[2][:2], a, modes=("rev",), order=1)


def test_qr_raw_and_pivoting_have_no_rule():
    a = R(4, 3)
    with pytest.raises(mg.NoRuleError, match=r"pivoting=True.*a\[:, P\]"):
        mg.grad(lambda x: np.sum(msl.qr(x, pivoting=True)[1]))(a)
    with pytest.raises(mg.NoRuleError, match="mode='raw'"):
        mg.grad(lambda x: np.sum(msl.qr(x, mode="raw")[1]))(a)
    with pytest.raises(ValueError, match="lapack_driver"):
        msl.svd(a, lapack_driver="gesvx")


def test_qr_plain_calls_and_stacks_are_scipys():
    # a plain matrix: SciPy's own call, every mode (pivoting and raw too); a stack: SciPy's list
    # of factors, and its R alone for mode "r"
    a = R(4, 3)
    for kw in ({"pivoting": True}, {"mode": "raw"}, {"mode": "r", "pivoting": True}):
        got, want = msl.qr(a, **kw), sl.qr(a, **kw)
        assert type(got) is type(want) and len(got) == len(want)
    np.testing.assert_array_equal(msl.qr(a, pivoting=True)[2], sl.qr(a, pivoting=True)[2])
    s = R(2, 4, 3)
    for mode in ("full", "economic", "r"):
        want = sl.qr(s, mode=mode)
        got = mg.vjp(lambda x, m=mode: msl.qr(x, mode=m), s)[0]
        assert type(got) is type(want)
        for g, w in zip(got if isinstance(got, list) else [got], want if isinstance(want, list) else [want]):
            np.testing.assert_array_equal(g, w)


def test_orth_of_a_matrix_of_lower_rank():
    # rank 2 for every b: the projector onto the range is smooth; orth reads the vectors of the
    # nonzero singular values only (the two zero ones repeat, and their vectors are not read)
    rng = np.random.default_rng(7)
    b0, c, w = rng.standard_normal((5, 2)), rng.standard_normal((2, 4)), rng.standard_normal((5, 5))

    def f(b):
        q = msl.orth(b @ c)
        return np.sum(w * (q @ q.T))

    fd = np.array([(f(b0 + 1e-6 * e) - f(b0 - 1e-6 * e)) / 2e-6 for e in np.eye(10).reshape(10, 5, 2)]).reshape(5, 2)
    np.testing.assert_allclose(mg.grad(f)(b0), fd, rtol=1e-6, atol=1e-8)


# -- stacks: SciPy 1.17's values, shapes, return types and errors; derivatives per matrix ---------

_rng3 = np.random.default_rng(3)  # (the report's matrices)
_A43 = _rng3.standard_normal((4, 2)) @ _rng3.standard_normal((2, 4))  # rank 2
_STACK_CALLS = [  # (name, function of the module sl or msl, args)
    ("solve_triangular", lambda m, a, b: m.solve_triangular(a, b, trans=1), (_swell(2, 3, 3), SR(3))),
    ("cho_factor", lambda m, a: m.cho_factor(a, lower=True), (_sspd(2, 3, 3),)),
    ("cho_solve", lambda m, a, b: m.cho_solve(m.cho_factor(a, lower=True), b), (_sspd(2, 3, 3), SR(3))),
    ("lu_factor", lambda m, a: m.lu_factor(a), (SR(2, 4, 3),)),
    ("lu_solve", lambda m, a, b: m.lu_solve(m.lu_factor(a), b, trans=2), (SC(2, 3, 3), SC(3))),
    ("lu", lambda m, a: m.lu(a, p_indices=True), (SR(2, 3, 4),)),
    ("solve_banded", lambda m, ab, b: m.solve_banded((1, 1), ab, b), (_sband(1, 1, 2, 4), SR(4))),
    ("solveh_banded", lambda m, ab, b: m.solveh_banded(ab, b), (_shband(1, False, 2, 4), SR(4))),
    ("solve_sylvester", lambda m, a, b, q: m.solve_sylvester(a, b, q), (_swell(3, 3), _swell(2, 3, 3), SR(3, 3))),
    ("eigh", lambda m, a, b: m.eigh(a, b), (_sspd(2, 3, 3), _sspd(3, 3))),
    ("eigh", lambda m, a: m.eigh(a, driver="evd"), (_sspd(2, 3, 3),)),
    ("svd", lambda m, a: m.svd(a), (SR(2, 3, 4),)),
    ("null_space", lambda m, a: m.null_space(a), (np.random.default_rng(2).standard_normal((3, 2, 4)),)),  # (3, 4, 2)
    ("orth", lambda m, a: m.orth(a), (np.stack([_A43, _A43]),)),  # the report: (2, 4, 2), not (2, 4, 4)
    ("solve", lambda m, a, b: m.solve(a, b, assume_a="pos"), (_sspd(2, 3, 3), SR(2, 3, 1))),
]


def _leaves(x):
    return [y for z in x for y in _leaves(z)] if isinstance(x, (tuple, list)) else [x]


@pytest.mark.parametrize("name,fn,args", _STACK_CALLS, ids=[c[0] for c in _STACK_CALLS])
def test_stacks_are_scipys(name, fn, args):
    want = fn(sl, *args)
    for got in (fn(msl, *args), mg.vjp(lambda *a: fn(msl, *a), *args)[0]):  # plain and traced
        assert type(got) is type(want)  # (SciPy's lists for a stack's factors)
        for g, w in zip(_leaves(got), _leaves(want), strict=True):
            assert np.shape(g) == np.shape(w) and np.asarray(g).dtype == np.asarray(w).dtype
            np.testing.assert_array_equal(g, w)


def test_lu_factor_of_a_stack_is_differentiated():
    # the report: grad (and the forward Jacobian) of lu_factor of a stack raised in _row_order
    s = np.random.default_rng(2).standard_normal((2, 4, 4))
    f = lambda s: np.sum(msl.lu_factor(s)[0] ** 2)
    fd = numerical_grad(lambda s: np.sum(sl.lu_factor(s)[0] ** 2), (s,), (0,))[0]  # (the pivots do not change)
    np.testing.assert_allclose(mg.grad(f)(s), fd, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(mg.jacobian(f, mode="fwd")(s), mg.grad(f)(s), rtol=1e-12)
    check_grads(f, s, order=1)  # vs central differences of the same function on plain arrays


@pytest.mark.parametrize("fn", [msl.orth, msl.null_space])
def test_bases_of_matrices_of_different_ranks_do_not_stack(fn):
    # SciPy computes each matrix's basis and stacks them: different ranks, its error
    a = np.stack([_A43, SR(4, 4)])
    with pytest.raises(ValueError, match="all input arrays must have the same shape"):
        getattr(sl, fn.__name__)(a)
    for call in (lambda: fn(a), lambda: mg.vjp(fn, a)):
        with pytest.raises(ValueError, match="all input arrays must have the same shape"):
            call()


def test_orth_of_a_stack_of_lower_rank_both_modes():
    # each matrix's rank (2) is its own: the basis has 2 columns, differentiable along the
    # matrices of that rank (b @ c), against central differences, forward against reverse
    c = SR(2, 2, 5)
    f = lambda b: msl.orth(b @ c)
    assert f(SR(2, 3, 2)).shape == (2, 3, 2)
    check_grads(f, SR(2, 3, 2), order=1)


def test_null_space_that_is_not_unique_is_refused_naming_null_space():
    a = SR(3, 5)  # a null space of dimension 2
    with mg.config(strict=True), pytest.raises(mg.DifferentiationError) as err:
        mg.grad(lambda a: np.sum(msl.null_space(a)))(a)
    msg = str(err.value)
    assert "scipy.linalg.null_space" in msg and "dimension 2" in msg and "orth(A.conj().T)" in msg
    assert "scipy.linalg.svd" not in msg and "full_matrices" not in msg
    assert isinstance(mg.jvp(msl.null_space, (a,), (a,))[1], mg.NotImplementedTangent)
    # the fix it offers: the projector onto the null space, I - Q Qᴴ with Q = orth(Aᴴ)
    n = sl.null_space(a)
    def proj(a):
        q = msl.orth(a.T)
        return np.eye(5) - q @ q.T

    np.testing.assert_allclose(proj(a), n @ n.T, atol=1e-12)
    check_grads(proj, a, order=1)


def test_null_vector_of_a_matrix_of_lower_rank_continues_smoothly():
    # a 3 x 3 matrix of rank 2 (b @ c, singular for every c): its null vector (c's) belongs to a
    # zero singular value, whose sign LAPACK picks from rounding; functions that do not read the
    # sign (a normalised vector, as a Markov chain's stationary distribution, and v vᵀ) are
    # smooth, and their derivative is the vector's continued smoothly; a single matrix and a stack
    w = np.array([0.3, -1.1, 2.0])

    def make(null_space, b):
        def f(c):
            v = null_space(b @ c)[..., 0]
            p = v / np.sum(v, axis=-1, keepdims=True)
            return np.sum(p * w) + np.sum((v[..., :, None] * v[..., None, :]) ** 2 * w)
        return f

    for b, c in ((SR(3, 2), SR(2, 3)), (SR(2, 3, 2), SR(2, 2, 3))):
        assert sl.null_space(b @ c).shape[-1] == 1
        fd = numerical_grad(make(sl.null_space, b), (c,), (0,))[0]
        f = make(msl.null_space, b)
        np.testing.assert_allclose(mg.grad(f)(c), fd, rtol=1e-6, atol=1e-8)
        np.testing.assert_allclose(mg.jacobian(f, mode="fwd")(c), fd, rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("name,args", [
    ("cho_factor", (np.zeros((0, 2, 2)),)), ("eigvalsh", (np.zeros((0, 2, 2)),)), ("orth", (np.zeros((0, 2, 2)),)),
    ("null_space", (np.zeros((0, 2, 2)),)), ("lu_factor", (np.zeros((0, 2, 2)),)),
    ("solve", (np.ones((2, 3, 3)), np.ones((2, 3)))),  # b of two axes is a matrix, of 2 rows
    ("solve_triangular", (np.ones((2, 3, 3)), np.ones((2, 3)))),
    ("lu", (np.ones(3),)),
])
def test_stack_errors_are_scipys(name, args):
    with pytest.raises(ValueError) as want:
        getattr(sl, name)(*args)
    for call in (lambda: getattr(msl, name)(*args), lambda: mg.vjp(getattr(msl, name), *args)):
        with pytest.raises(ValueError) as got:
            call()
        assert str(got.value) == str(want.value)


# -- inv, solve, det: SciPy's own values, dtypes, warnings and errors, plain and traced; the
# derivatives against central differences of the plain SciPy function, forward against reverse ----


def _solve_cases():
    cases = []
    for k, (assume_a, lower, kind) in enumerate(
            (s, lo, kd) for s in _SOLVE_STRUCTURES for lo in (False, True) for kd in ("real", "transposed", "complex")):
        cplx = kind == "complex"
        batch = (2,) if k % 2 else ()
        # (b: a vector, and a matrix or a stack of them; the derivatives with either, in turn)
        cases.append((assume_a, lower, kind == "transposed", _structured_input(assume_a, lower, cplx, batch),
                      _draw((3,), cplx), _draw((2, 3, 2) if k % 4 == 1 else (3, 4), cplx), k % 4 < 2))
    return cases


_SOLVE_CASES = _solve_cases()


def _solvers(**kw):
    return (lambda a, b: msl.solve(a, b, **kw)), (lambda a, b: sl.solve(a, b, **kw))


def _inverters(**kw):
    return (lambda a: msl.inv(a, **kw)), (lambda a: sl.inv(a, **kw))


def _orders(a):
    return (a, np.asfortranarray(a))


def _assert_scipys(got, want):
    assert type(got) is type(want)
    assert np.asarray(got).dtype == np.asarray(want).dtype and np.shape(got) == np.shape(want)
    np.testing.assert_array_equal(got, want)


def _assert_values_scipys(msl_fn, sl_fn, args):
    """Plain, under mg.vjp and under mg.jvp: SciPy's value, bit for bit, dtype and type."""
    want = sl_fn(*args)
    _assert_scipys(msl_fn(*args), want)
    _assert_scipys(mg.vjp(msl_fn, *args)[0], want)
    _assert_scipys(mg.jvp(msl_fn, args, tuple(np.ones_like(x) for x in args))[0], want)


def _assert_derivatives(msl_fn, sl_fn, args, rtol=1e-6, atol=1e-8):
    """Reverse mode against central differences of the plain SciPy function, and forward mode
    against reverse (Re Σ w ẏ = Re Σ ḡ ẋ, the JAX convention for complex arguments)."""
    y = sl_fn(*args)
    w = _draw(np.shape(y), np.iscomplexobj(y))
    argnums = tuple(range(len(args)))
    fd = numerical_grad(lambda *a: np.real(np.sum(w * sl_fn(*a))), args, argnums)
    grads = mg.grad(lambda *a: np.real(np.sum(w * msl_fn(*a))), argnums=argnums)(*args)
    for g, d in zip(grads, fd, strict=True):
        np.testing.assert_allclose(g, d, rtol=rtol, atol=atol)
    ts = tuple(_draw(np.shape(x), np.iscomplexobj(x)) for x in args)
    dy = mg.jvp(msl_fn, args, ts)[1]
    np.testing.assert_allclose(np.real(np.sum(w * dy)), sum(np.real(np.sum(g * t)) for g, t in zip(grads, ts)),
                               rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("assume_a,lower,transposed,a,b,B,matrix_b", _SOLVE_CASES,
                         ids=[f"{c[0]}-{'lower' if c[1] else 'upper'}-{'T' if c[2] else ''}"
                              f"{'complex' if np.iscomplexobj(c[3]) else 'real'}-{c[3].ndim}d" for c in _SOLVE_CASES])
def test_solve_is_scipys(assume_a, lower, transposed, a, b, B, matrix_b):
    f, g = _solvers(lower=lower, assume_a=assume_a, transposed=transposed)
    for a_ in _orders(a):
        for rhs in (b, B):
            _assert_values_scipys(f, g, (a_, rhs))
    for name, alias in _ALIASES.items():  # (SciPy's other names of the structures)
        if alias == assume_a:
            _assert_values_scipys(*_solvers(lower=lower, assume_a=name, transposed=transposed), (a, B))
    # the entries SciPy does not read get a zero cotangent, as central differences show
    _assert_derivatives(f, g, (a, B if matrix_b else b))


_INV_STRUCTURES = [None, "gen", "general", "diagonal", "upper triangular", "lower triangular", "sym", "her", "pos"]
_INV_CASES = [(s, lo, _structured_input(_ALIASES.get(s, s), lo, cplx, (2,) if lo == cplx else ()))
              for s in _INV_STRUCTURES for lo in (False, True) for cplx in (False, True)]


@pytest.mark.parametrize("assume_a,lower,a", _INV_CASES,
                         ids=[f"{c[0]}-{c[1]}-{c[2].dtype}-{c[2].ndim}d" for c in _INV_CASES])
def test_inv_is_scipys(assume_a, lower, a):
    # assume_a="diagonal": SciPy 1.17 inverts the diagonal and returns the other entries as they
    # are, which its differences show too (they pass through)
    f, g = _inverters(lower=lower, assume_a=assume_a)
    for a_ in _orders(a):
        _assert_values_scipys(f, g, (a_,))
    _assert_derivatives(f, g, (a,))


_DET_CASES = [
    _sv.R(3, 3), _sv.C(3, 3), _sv.R(2, 4, 4), _sv.R(1, 1), _sv.C(2, 1, 1), _sv.R(0, 0),
    _sv.R(4, 2) @ _sv.R(2, 4),  # singular: through the adjugate
]


@pytest.mark.parametrize("a", _DET_CASES, ids=[f"{a.dtype}-{a.shape}" for a in _DET_CASES])
def test_det_is_scipys(a):
    for a_ in _orders(a):
        _assert_values_scipys(msl.det, sl.det, (a_,))
    if a.size:
        _assert_derivatives(msl.det, sl.det, (a,), atol=1e-7)


def test_single_precision_and_integers_have_scipys_dtypes():
    for kw in ({}, {"assume_a": "pos"}):
        a, b = 10 * _structured_input(kw.get("assume_a"), False, False), _sv.R(3)
        for ta, tb in ((np.float32, np.float32), (np.float32, np.float64), (np.complex64, np.float32)):
            args = (a.astype(ta), b.astype(tb))
            _assert_values_scipys(*_solvers(**kw), args)
            _assert_values_scipys(*_inverters(**kw), args[:1])
        ai = a.astype(np.int64)  # (a constant: integers are not differentiated)
        f, g = _solvers(**kw)
        _assert_values_scipys(functools.partial(f, ai), functools.partial(g, ai), (b.astype(np.float32),))
        _assert_scipys(msl.inv(ai, **kw), sl.inv(ai, **kw))
    for t in (np.float32, np.complex64):  # (det: double precision for every input)
        _assert_values_scipys(msl.det, sl.det, ((10 * a).astype(t),))
        _assert_values_scipys(msl.det, sl.det, ((10 * _sv.R(2, 3, 3)).astype(t),))
    _assert_scipys(msl.det(a.astype(np.int64)), sl.det(a.astype(np.int64)))
    g = mg.grad(msl.det)(a.astype(np.float32))
    assert g.dtype == np.float32  # (a gradient has its argument's dtype)
    np.testing.assert_allclose(g, numerical_grad(sl.det, (a.astype(np.float32).astype(float),), (0,))[0], rtol=1e-4)


_ONE_BY_ONE = [  # SciPy divides every row of b by a matrix of one entry (or a scalar), whatever b's shape
    (np.array([[2.5]]), _sv.R(3), {}),
    (np.array([[1.5 - 0.5j]]), _sv.C(3, 2), {"assume_a": "her"}),  # (all of it: no triangle read)
    (np.array(-2.0), _sv.R(4, 2), {}),  # (with a stack b, SciPy 1.17 fails: a1.item() of the broadcast a)
    (np.array([0.7]), _sv.R(4), {"transposed": True}),
    (np.array([[[3.0]]]), _sv.R(5, 2), {"assume_a": "pos"}),
    (np.array([[2.0]]), _sv.R(3), {"assume_a": "banded"}),  # (SciPy 1.17 fails for a matrix b)
]


@pytest.mark.parametrize("a,b,kw", _ONE_BY_ONE, ids=[f"{c[0].shape}-{c[1].shape}-{c[2]}" for c in _ONE_BY_ONE])
def test_solve_with_one_entry_divides_as_scipy(a, b, kw):
    f, g = _solvers(**kw)
    _assert_values_scipys(f, g, (a, b))
    _assert_derivatives(f, g, (a, b))


def test_plain_lists_are_scipys_arrays():  # (the rules conjugate and transpose a plain a too)
    for a in ([[2 + 1j]], [[2 + 1j, 1], [1, 3 - 1j]]):
        for kw in ({}, {"assume_a": "sym"}):
            f, g = (functools.partial(h, a) for h in _solvers(**kw))
            _assert_values_scipys(f, g, (_sv.C(2),))
            _assert_derivatives(f, g, (_sv.C(2),))
    _assert_scipys(msl.det([[1.0, 2.0], [3.0, 4.0]]), sl.det([[1.0, 2.0], [3.0, 4.0]]))
    _assert_scipys(msl.inv([[2.0, 1.0], [1.0, 3.0]], assume_a="pos"), sl.inv([[2.0, 1.0], [1.0, 3.0]], assume_a="pos"))


def _paths(call):
    """A call of the plain function, under mg.vjp (with its pullback) and under mg.jvp."""
    def rev(*args):
        out, pb = mg.vjp(call, *args)
        pb(np.ones_like(out))
        return out

    return (call, rev, lambda *args: mg.jvp(call, args, tuple(np.ones_like(x) for x in args))[0])


_HILBERT = 1.0 / (np.arange(1, 13)[:, None] + np.arange(12))  # (rcond ~ 1e-17)
_WARNING_CALLS = [
    ("solve", lambda m, a: m.solve(a, np.ones(12)), _HILBERT),
    ("solve-pos", lambda m, a: m.solve(a, np.ones((12, 2)), assume_a="pos"), _HILBERT),
    ("solve-sym-transposed", lambda m, a: m.solve(a, np.ones(12), assume_a="sym", transposed=True), _HILBERT),
    ("solve-stack", lambda m, a: m.solve(a, np.ones(12)), np.stack([np.eye(12), _HILBERT])),
    ("inv", lambda m, a: m.inv(a), _HILBERT),
    ("inv-pos", lambda m, a: m.inv(a, assume_a="pos", lower=True), _HILBERT),
]


@pytest.mark.parametrize("name,call,a", _WARNING_CALLS, ids=[c[0] for c in _WARNING_CALLS])
def test_ill_conditioned_matrices_warn_as_in_scipy(name, call, a):
    with pytest.warns(sl.LinAlgWarning) as want:
        call(sl, a)
    for path in _paths(lambda a: call(msl, a)):
        with pytest.warns(sl.LinAlgWarning) as got:
            path(a)
        # SciPy's message, once: the derivative's solves, with the same matrix, do not repeat it
        assert [str(w.message) for w in got if issubclass(w.category, sl.LinAlgWarning)] == \
            [str(w.message) for w in want]


_ERROR_CALLS = [
    ("singular", lambda m, a, b: m.solve(a, b), (np.ones((3, 3)), _sv.R(3))),
    ("singular-stack", lambda m, a, b: m.solve(a, b, assume_a="pos"),
     (np.stack([np.eye(3), np.zeros((3, 3))]), _sv.R(3))),
    ("singular-1x1", lambda m, a, b: m.solve(a, b), (np.zeros((1, 1)), _sv.R(3))),
    ("singular-inv", lambda m, a: m.inv(a, assume_a="upper triangular"),
     (np.triu(np.ones((3, 3))) - np.diag([0.0, 1.0, 0.0]),)),
    ("complex-transposed", lambda m, a, b: m.solve(a, b, transposed=True), (_sv.C(3, 3), _sv.R(3))),
    ("complex-b-transposed", lambda m, a, b: m.solve(a, b, transposed=True), (_sv.R(3, 3), _sv.C(3))),
    ("not-finite", lambda m, a, b: m.solve(a, b), (np.diag([1.0, np.nan, 1.0]), _sv.R(3))),
    ("not-finite-unread", lambda m, a, b: m.solve(a, b, assume_a="sym"),  # (SciPy checks every entry)
     (np.eye(3) + np.tril(np.full((3, 3), np.inf), -1), _sv.R(3))),
    ("not-finite-det", lambda m, a: m.det(a), (np.diag([1.0, np.inf]),)),
    ("structure", lambda m, a, b: m.solve(a, b, assume_a="tridiagonl"), (np.eye(3), _sv.R(3))),
    ("structure-inv", lambda m, a: m.inv(a, assume_a="tridiagonal"), (np.eye(3),)),
    ("not-square", lambda m, a, b: m.solve(a, b), (_sv.R(3, 2), _sv.R(3))),
    ("shapes", lambda m, a, b: m.solve(a, b), (np.eye(3), _sv.R(2))),
    ("not-square-inv", lambda m, a: m.inv(a), (_sv.R(2, 3),)),
    ("vector-det", lambda m, a: m.det(a), (_sv.R(3),)),
]


@pytest.mark.parametrize("name,call,args", _ERROR_CALLS, ids=[c[0] for c in _ERROR_CALLS])
def test_errors_are_scipys(name, call, args):
    with pytest.raises(Exception) as want:
        call(sl, *args)
    for path in _paths(lambda *a: call(msl, *a)):
        with pytest.raises(want.type) as got:
            path(*args)
        assert got.type is want.type and str(got.value) == str(want.value)


@pytest.mark.parametrize("seed", range(6))
def test_eigh_subset_vectors_have_scipys_signs(seed):
    # the vectors of a traced subset come from every pair: turned to the signs SciPy's subset call
    # picks, so that a function reading them has the plain call's value, and its derivative the
    # central differences of the plain function
    rng = np.random.default_rng(seed)
    m = rng.standard_normal((5, 5))
    a = m + m.T
    bm = rng.standard_normal((5, 5))
    b = bm @ bm.T + 5 * np.eye(5)
    for kw in ({"driver": "evx", "subset_by_index": [1, 2]}, {"driver": "evx", "subset_by_value": (-1.0, 1.0)},
               {"b": b, "driver": "gvx", "subset_by_index": [1, 2]}, {"b": b, "subset_by_value": (-0.5, 0.5)}):
        if sl.eigh(a, **kw)[0].size == 0:
            continue

        def f(a, kw=kw):
            w, v = msl.eigh(a, **kw)
            return np.sum(v[0]) + np.sum(w)

        val, g = mg.value_and_grad(f)(a)
        np.testing.assert_allclose(val, f(a), rtol=1e-12)
        h = 1e-6
        e = np.zeros((5, 5))
        e[2, 0] = e[0, 2] = h
        np.testing.assert_allclose(g[2, 0] + g[0, 2], (f(a + e) - f(a - e)) / (2 * h), rtol=1e-5, atol=1e-7)


def _buckling_family():
    """(K(t), KG(t)) at t = 0: K positive definite, -KG with a null space of dimension 2 (its generalized
    values 0, 0, then two distinct positive ones), both moving with t."""
    rng = np.random.default_rng(5)
    q = np.linalg.qr(rng.standard_normal((4, 4)))[0]
    kg0 = -q @ np.diag([0.0, 0.0, 0.4, 1.1]) @ q.T
    m = rng.standard_normal((4, 4))
    k0 = m @ m.T + 4 * np.eye(4)
    e1, e2 = (x + x.T for x in rng.standard_normal((2, 4, 4)))
    return lambda t: (k0 + t[0] * e1, kg0 + t[1] * q @ np.diag([0.0, 0.0, 0.3, -0.5]) @ q.T + t[0] * t[1] * e2)


@pytest.mark.parametrize("kw", [{"subset_by_index": [3, 3]}, {"subset_by_index": [2, 3]},
                                {"subset_by_value": (0.05, np.inf)}, {"standard": True}],
                         ids=["top", "two-simple", "by-value", "standard"])
def test_eigh_subset_vectors_beside_repeated_values_have_forward_derivatives(kw):
    # the buckling mode of the largest load factor, beside a geometric stiffness's null space (values 0, 0):
    # forward mode refused the mode's tangent because other values repeat (the truss tester)
    fam = _buckling_family()
    kw = dict(kw)
    standard = kw.pop("standard", False)

    def f(t):
        k, kg = fam(t)
        if standard:
            w, v = msl.eigh(-kg + t[0] * np.diag([0.0, 1.0, 0.0, 0.0]), driver="evx", subset_by_index=[2, 3], **kw)
        else:
            w, v = msl.eigh(-kg, k, **kw)
        mode = v[:, -1]
        return (mode @ k @ mode) * w[-1] + mode[0] ** 2

    t0 = np.array([0.0, 0.0])
    g = numerical_grad(f, (t0,), (0,))[0]
    for d in (np.array([1.0, 0.0]), np.array([0.3, -0.7])):
        np.testing.assert_allclose(mg.jvp(f, (t0,), (d,))[1], g @ d, rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(mg.grad(f)(t0), g, rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(mg.jacobian(f, mode="fwd")(t0), g, rtol=1e-6, atol=1e-9)


def test_eigh_subset_vector_of_a_repeated_value_stays_refused_in_forward_mode():
    fam = _buckling_family()

    def f(t):
        k, kg = fam(t)
        return np.sum(msl.eigh(-kg, k, subset_by_index=[1, 2])[1][:, 0] ** 2)  # (value 0, repeated)

    t = mg.jvp(f, (np.zeros(2),), (np.ones(2),))[1]
    assert isinstance(t, mg.NotImplementedTangent) and "repeated values" in t.message


# -- Lyapunov and Riccati equations: SciPy's values, derivatives against central differences of
# SciPy's functions (first and second order) and closed forms; the inputs SciPy solves wrongly -----

_eqv = Draws(37)  # (a stream of their own)


def _riccati_problem(solve, n=3, m=2, extra="", cplx=False):
    """(a, b, q, r, *more), q and r Hermitian positive definite, |X| moderate (see _riccati_args)."""
    while True:
        d = (lambda *s: _eqv.C(*s)) if cplx else (lambda *s: _eqv.R(*s))
        a, b, q, r = 0.5 * d(n, n), d(n, m), _herm(0.3 * d(n, n)), _herm(0.3 * d(m, m))
        more = {"e": np.eye(n) + 0.2 * d(n, n)} if "e" in extra else {}
        if "s" in extra:
            more["s"] = 0.3 * d(n, m)
        try:
            if np.max(np.abs(getattr(sl, solve)(a, b, q, r, balanced=False, **more))) < 20:
                return (a, b, q, r) + tuple(more[k] for k in extra)
        except np.linalg.LinAlgError:
            pass


_EQ_VALUE_CALLS = [  # (name, function of the module sl or msl, args)
    ("clyap", lambda m, a, q: m.solve_continuous_lyapunov(a, q), (_hurwitz(3, 3), _eqv.R(3, 3))),
    ("solve_lyapunov", lambda m, a, q: m.solve_lyapunov(a, q), (_hurwitz(3, 3, cplx=True), _eqv.C(3, 3))),
    ("clyap-stack", lambda m, a, q: m.solve_continuous_lyapunov(a, q), (_hurwitz(2, 3, 3), _eqv.R(3, 3))),
    ("dlyap", lambda m, a, q: m.solve_discrete_lyapunov(a, q), (_schur_stable(3, 3), _eqv.R(3, 3))),
    ("dlyap-10", lambda m, a, q: m.solve_discrete_lyapunov(a, q), (_schur_stable(10, 10), _eqv.R(10, 10))),
    ("dlyap-bilinear", lambda m, a, q: m.solve_discrete_lyapunov(a, q, method="bilinear"),
     (_schur_stable(3, 3, cplx=True), _eqv.C(3, 3))),
    ("care", lambda m, *args: m.solve_continuous_are(*args), _riccati_problem("solve_continuous_are")),
    ("care-s", lambda m, a, b, q, r, s: m.solve_continuous_are(a, b, q, r, s=s),
     _riccati_problem("solve_continuous_are", extra="s")),
    ("care-es", lambda m, *args: m.solve_continuous_are(*args, balanced=False),
     _riccati_problem("solve_continuous_are", extra="es", cplx=True)),
    ("care-scalars", lambda m, a, q: m.solve_continuous_are(a, 1.0, q, 2.0), (3.0, 16.0)),
    ("dare", lambda m, *args: m.solve_discrete_are(*args), _riccati_problem("solve_discrete_are", cplx=True)),
    ("dare-s", lambda m, a, b, q, r, s: m.solve_discrete_are(a, b, q, r, s=s),
     _riccati_problem("solve_discrete_are", extra="s")),
    ("dare-es", lambda m, *args: m.solve_discrete_are(*args, balanced=False),
     _riccati_problem("solve_discrete_are", extra="es")),
]


@pytest.mark.parametrize("name,fn,args", _EQ_VALUE_CALLS, ids=[c[0] for c in _EQ_VALUE_CALLS])
def test_matrix_equations_are_scipys(name, fn, args):
    # plain, under mg.vjp and under mg.jvp: SciPy's own value, bit for bit
    want = fn(sl, *args)
    for got in (fn(msl, *args), mg.vjp(lambda *a: fn(msl, *a), *args)[0],
                mg.jvp(lambda *a: fn(msl, *a), args, tuple(np.ones_like(x) for x in args))[0]):
        assert type(got) is np.ndarray and got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)


def _flat(*xs):
    return np.concatenate([np.ravel(x) for x in xs])


def _unflat(theta, like):
    out, k = [], 0
    for x in like:
        out.append(theta[k:k + np.size(x)].reshape(np.shape(x)))
        k += np.size(x)
    return out


def _hermitian_directions(n, rng):
    d = rng.standard_normal((n, n))
    return d + d.T


@pytest.mark.parametrize("solve,extra", [("solve_continuous_are", ""), ("solve_continuous_are", "es"),
                                         ("solve_discrete_are", ""), ("solve_discrete_are", "es")])
def test_riccati_gradients_against_central_differences(solve, extra):
    # the gradient of sum(X * W) w.r.t. every matrix against central differences of SciPy's function
    # (q and r: moved along Hermitian directions only, which SciPy requires; their gradients are
    # Hermitian), the forward Jacobian against the reverse one and against differences too
    kw = {"balanced": False} if "e" in extra else {}
    args = _riccati_problem(solve, extra=extra)
    w = _eqv.R(3, 3)

    def f(mod):
        return lambda *a: np.sum(w * getattr(mod, solve)(*a[:4], **dict(zip(extra, a[4:])), **kw))

    argnums = tuple(range(len(args)))
    grads = mg.grad(f(msl), argnums=argnums)(*args)
    free = tuple(n for n in argnums if n not in (2, 3))  # (a, b, e, s)
    fd = numerical_grad(f(sl), args, free)
    for n, d in zip(free, fd):
        np.testing.assert_allclose(grads[n], d, rtol=1e-6, atol=1e-7)
    rng = np.random.default_rng(0)
    for n in (2, 3):
        np.testing.assert_allclose(grads[n], grads[n].T, rtol=1e-12, atol=1e-12)  # Hermitian
        for _ in range(2):
            d = _hermitian_directions(args[n].shape[0], rng)
            h = 1e-6
            plus, minus = list(args), list(args)
            plus[n], minus[n] = args[n] + h * d, args[n] - h * d
            np.testing.assert_allclose(np.sum(grads[n] * d), (f(sl)(*plus) - f(sl)(*minus)) / (2 * h),
                                       rtol=1e-6, atol=1e-7)
    # Jacobians of X w.r.t. a (and b): forward and reverse mode against central differences
    for n in (0, 1):
        def x_of(v, n=n):
            full = list(args)
            full[n] = v
            return getattr(msl, solve)(*full[:4], **dict(zip(extra, full[4:])), **kw)

        def x_of_plain(v, n=n):
            full = list(args)
            full[n] = v
            return getattr(sl, solve)(*full[:4], **dict(zip(extra, full[4:])), **kw)

        jf, jr = mg.jacobian(x_of, mode="fwd")(args[n]), mg.jacobian(x_of, mode="rev")(args[n])
        np.testing.assert_allclose(jf, jr, rtol=1e-10, atol=1e-11)
        h = 1e-6
        fdj = np.stack([(x_of_plain(args[n] + h * t) - x_of_plain(args[n] - h * t)) / (2 * h)
                        for t in np.eye(args[n].size).reshape((-1,) + args[n].shape)], axis=-1)
        np.testing.assert_allclose(jf, fdj.reshape(jf.shape), rtol=1e-6, atol=1e-7)


def _second_differences(f, x, h=1e-3):
    """The Hessian of the plain scalar function ``f`` at ``x`` (a vector), by central differences
    of f itself (independent of any gradient)."""
    e = h * np.eye(x.size)
    hess = np.empty((x.size, x.size))
    for i in range(x.size):
        for j in range(i, x.size):
            hess[i, j] = hess[j, i] = (f(x + e[i] + e[j]) - f(x + e[i] - e[j]) - f(x - e[i] + e[j])
                                       + f(x - e[i] - e[j])) / (4 * h * h)
    return hess


def _hessian_cases():
    lyap_a, dlyap_a, q = _hurwitz(2, 2), _schur_stable(2, 2), _eqv.R(2, 2)
    cases = [("solve_continuous_lyapunov", (lyap_a, q), lambda m, a, q: m.solve_continuous_lyapunov(a, q)),
             ("solve_discrete_lyapunov", (dlyap_a, q), lambda m, a, q: m.solve_discrete_lyapunov(a, q))]
    for solve in ("solve_continuous_are", "solve_discrete_are"):
        a, b, _, _ = _riccati_problem(solve, n=2, m=1)
        p, w = 0.3 * _eqv.R(2, 2), 0.3 * _eqv.R(1, 1)
        cases.append((solve, (a, b, p, w), lambda m, a, b, p, w, s=solve: getattr(m, s)(a, b, _herm(p), _herm(w))))
        e, s_ = np.eye(2) + 0.2 * _eqv.R(2, 2), 0.3 * _eqv.R(2, 1)
        cases.append((solve + "-es", (a, b, p, w, e, s_), lambda m, a, b, p, w, e, s_, s=solve: getattr(m, s)(
            a, b, _herm(p), _herm(w), e, s_, balanced=False)))
    return cases


_HESSIAN_CASES = _hessian_cases()


@pytest.mark.parametrize("name,args,call", _HESSIAN_CASES, ids=[c[0] for c in _HESSIAN_CASES])
def test_matrix_equation_hessians_against_second_differences(name, args, call):
    # mg.hessian (forward over reverse) and the reverse Jacobian of the gradient, against second
    # central differences of SciPy's function itself
    wt = _eqv.R(2, 2)
    theta = _flat(*args)

    def f(mod):
        return lambda t: np.sum(wt * call(mod, *_unflat(t, args)))

    want = _second_differences(f(sl), theta)
    np.testing.assert_allclose(mg.hessian(f(msl))(theta), want, rtol=1e-4, atol=2e-5)
    np.testing.assert_allclose(mg.jacobian(mg.grad(f(msl)), mode="rev")(theta), want, rtol=1e-4, atol=2e-5)


def test_scalar_riccati_closed_forms():
    # n = m = 1, real: 2 a x - b² x² / r + q = 0 has x = r (a + D) / b², D = sqrt(a² + b² q / r),
    # whose partial derivatives are written out below; and a x a - x - (a x b)² / (r + b² x) + q = 0
    # has x, the positive root of b² x² - ((a² - 1) r + b² q) x - q r = 0
    a, b, q, r = 0.7, 1.3, 2.0, 0.5
    d = np.sqrt(a * a + b * b * q / r)
    x = r * (a + d) / b**2
    np.testing.assert_allclose(sl.solve_continuous_are(a, b, q, r)[0, 0], x, rtol=1e-12)
    want = (r * (1 + a / d) / b**2, q / (b * d) - 2 * x / b, 1 / (2 * d), (a + d - b * b * q / (2 * r * d)) / b**2)
    got = mg.grad(lambda *v: msl.solve_continuous_are(*v)[0, 0], argnums=(0, 1, 2, 3))(a, b, q, r)
    np.testing.assert_allclose(got, want, rtol=1e-10)
    # second derivative in q: d²x/dq² = -(b² / r) / (4 D³)
    d2 = mg.grad(mg.grad(lambda q: msl.solve_continuous_are(a, b, q, r)[0, 0]))(q)
    np.testing.assert_allclose(d2, -(b * b / r) / (4 * d**3), rtol=1e-9)

    def dare_x(a, b, q, r):
        c = (a * a - 1) * r + b * b * q
        return (c + np.sqrt(c * c + 4 * b * b * q * r)) / (2 * b * b)

    np.testing.assert_allclose(sl.solve_discrete_are(a, b, q, r)[0, 0], dare_x(a, b, q, r), rtol=1e-12)
    v = np.array([a, b, q, r])
    fd = [(dare_x(*(v + h)) - dare_x(*(v - h))) / 2e-6 for h in 1e-6 * np.eye(4)]
    got = mg.grad(lambda *v: msl.solve_discrete_are(*v)[0, 0], argnums=(0, 1, 2, 3))(a, b, q, r)
    np.testing.assert_allclose(got, fd, rtol=1e-7)


def test_lyapunov_of_a_real_matrix_with_complex_eigenvalues_and_a_complex_q_is_refused():
    # SciPy passes a real a's real Schur form (2 x 2 blocks) to the complex solver, which takes it
    # for a triangle: its X does not solve the equation, so it has no derivative that would
    a = np.array([[-2.0, 1.0, 0.3], [-1.0, -2.0, 0.1], [0.0, 0.2, -1.0]])  # eigenvalues -2 ± i, -1
    q = _eqv.C(3, 3)
    x = sl.solve_continuous_lyapunov(a, q)
    assert np.max(np.abs(a @ x + x @ a.T - q)) > 1e-2  # (SciPy's value: not a solution)
    np.testing.assert_array_equal(msl.solve_continuous_lyapunov(a, q), x)  # (plain: SciPy's own call)
    for call in (lambda: mg.grad(lambda q: np.real(np.sum(msl.solve_continuous_lyapunov(a, q))))(q),
                 lambda: mg.jvp(lambda a: msl.solve_continuous_lyapunov(a, q), (a,), (a,))):
        with pytest.raises(mg.NoRuleError, match=r"a\.astype\(complex\)") as info:
            call()
        assert isinstance(info.value, ValueError) and "test_scipy_linalg.py" in str(info.value)
    # the fix it offers: a complex a, which SciPy solves, differentiated
    xc = sl.solve_continuous_lyapunov(a.astype(complex), q)
    np.testing.assert_allclose(a @ xc + xc @ a.T, q, atol=1e-12)
    check_grads(lambda q: msl.solve_continuous_lyapunov(a.astype(complex), q), q)
    # the discrete equation: "bilinear" (SciPy's choice from 10 x 10 on) solves such an equation;
    # "direct" does not, and is differentiated
    a10, q10 = _schur_stable(10, 10), _eqv.C(10, 10)
    x10 = sl.solve_discrete_lyapunov(a10, q10)
    assert np.max(np.abs(a10 @ x10 @ a10.T - x10 + q10)) > 1e-2
    with pytest.raises(mg.NoRuleError, match="method='direct'"):
        mg.grad(lambda q: np.real(np.sum(msl.solve_discrete_lyapunov(a10, q))))(q10)
    check_grads(lambda q: msl.solve_discrete_lyapunov(0.3 * a, q, method="direct"), q)


def test_sylvester_of_a_real_matrix_with_complex_eigenvalues_and_a_complex_argument_is_refused():
    # the same SciPy path as the Lyapunov solvers': real Schur forms handed to the complex solver
    a = np.array([[0.0, 1.0], [-1.0, 0.2]])  # eigenvalues 0.1 ± 0.99i
    b = np.array([[2.0, 0.5], [0.0, 1.0]])  # real eigenvalues: its Schur form is triangular
    q = np.array([[1.0 + 1.0j, 0.5], [-0.3j, 2.0]])
    x = sl.solve_sylvester(a, b, q)
    assert np.max(np.abs(a @ x + x @ b - q)) > 1e-2  # (SciPy's value: not a solution)
    np.testing.assert_array_equal(msl.solve_sylvester(a, b, q), x)  # (plain: SciPy's own call)
    for call in (lambda: mg.grad(lambda a: np.real(np.sum(msl.solve_sylvester(a, b, q))))(a),
                 lambda: mg.grad(lambda b: np.real(np.sum(msl.solve_sylvester(b, a.T, q))))(b)):
        with pytest.raises(mg.NoRuleError, match=r"a\.astype\(complex\)") as info:
            call()
        assert isinstance(info.value, ValueError) and "test_scipy_linalg.py" in str(info.value)
    # the fix it offers: complex matrices, which SciPy solves, differentiated
    xc = sl.solve_sylvester(a.astype(complex), b, q)
    np.testing.assert_allclose(a @ xc + xc @ b, q, atol=1e-12)
    check_grads(lambda q: msl.solve_sylvester(a.astype(complex), b, q), q)
    check_grads(lambda a: msl.solve_sylvester(a, b, q.real), a)  # (all real: SciPy's real solver)


def test_riccati_with_e_and_balancing_is_refused():
    # SciPy 1.17 balances the pencil but corrects its stable basis with the unbalanced E: here its
    # X does not solve the equation (balanced=False's does): refused where it does not
    rng = np.random.default_rng(74)
    a, b = rng.standard_normal((3, 3)), rng.standard_normal((3, 2))
    e = np.eye(3) + 0.3 * rng.standard_normal((3, 3))
    q, r = np.eye(3), np.eye(2)

    def residual(x):
        return np.max(np.abs(a.T @ x @ e + e.T @ x @ a - e.T @ x @ b @ b.T @ x @ e + q))

    x = sl.solve_continuous_are(a, b, q, r, e)
    assert residual(x) > 0.1 and residual(sl.solve_continuous_are(a, b, q, r, e, balanced=False)) < 1e-12
    np.testing.assert_array_equal(msl.solve_continuous_are(a, b, q, r, e), x)  # (plain: SciPy's own call)
    for argnum in (0, 4):  # (a traced, and e)
        def f(a, e):
            return np.sum(msl.solve_continuous_are(a, b, q, r, e))

        with pytest.raises(mg.NoRuleError, match="balanced=False") as info:
            mg.grad(f, argnums=0 if argnum == 0 else 1)(a, e)
        assert "solve_continuous_are" in str(info.value) and "test_scipy_linalg.py" in str(info.value)
    with pytest.raises(np.linalg.LinAlgError):  # (SciPy's own error for the discrete one, as in a plain call)
        mg.grad(lambda a: np.sum(msl.solve_discrete_are(a, b, q, r, e)))(a)
    # where SciPy's balanced X solves the equation (0.5 a), it is differentiated: the derivative of
    # the equation's solution, the same as balanced=False's, and finite differences'
    for solve in (msl.solve_continuous_are, msl.solve_discrete_are):
        g = mg.grad(lambda a, e, solve=solve: np.sum(solve(a, b, q, r, e)), argnums=(0, 1))(0.5 * a, e)
        g0 = mg.grad(lambda a, e, solve=solve: np.sum(solve(a, b, q, r, e, balanced=False)), argnums=(0, 1))(
            0.5 * a, e)
        np.testing.assert_allclose(g[0], g0[0], rtol=1e-7, atol=1e-9)
        np.testing.assert_allclose(g[1], g0[1], rtol=1e-7, atol=1e-9)
        check_grads(lambda a, e, solve=solve: solve(a, b, q, r, e), 0.5 * a, e)
    # the fix it offers
    check_grads(lambda a, e: msl.solve_continuous_are(a, b, q, r, e, balanced=False), a, e)


def test_riccati_tangent_is_hermitian_along_any_direction():
    # SciPy returns (X + Xᴴ)/2: the tangent along a non-Hermitian direction of q is that of its
    # Hermitian part (forward mode), as the reverse mode's Hermitian cotangent says
    a, b, q, r = _riccati_problem("solve_discrete_are", cplx=True)
    t = _eqv.C(3, 3)
    _, xdot = mg.jvp(lambda q: msl.solve_discrete_are(a, b, q, r), (q,), (t,))
    _, xdot_h = mg.jvp(lambda q: msl.solve_discrete_are(a, b, q, r), (q,), ((t + t.conj().T) / 2,))
    np.testing.assert_allclose(xdot, xdot.conj().T, atol=1e-12)
    np.testing.assert_allclose(xdot, xdot_h, rtol=1e-12, atol=1e-12)


def test_matrix_equations_take_numbers_and_lists_as_scipy_does():
    # a number is a 1 x 1 matrix, a list of traced numbers a matrix: derivatives against central
    # differences of SciPy's function of the same arguments
    calls = [
        lambda m, t: m.solve_continuous_are([[t, 0.2], [0.1, -2.0]], [[1.0], [0.5]], np.eye(2), 1),
        lambda m, t: m.solve_discrete_are(0.5, 1.0, 2.0, t),
        lambda m, t: m.solve_continuous_lyapunov([[t, 0.2], [0.1, -2.0]], [[1.0, t], [t, 2.0]]),
        lambda m, t: m.solve_discrete_lyapunov([[t, 0.2], [0.1, 0.3]], np.eye(2)),
    ]
    for call in calls:
        g = mg.grad(lambda t, call=call: np.sum(call(msl, t)))(0.5)
        assert type(g) is float
        h = 1e-6
        np.testing.assert_allclose(g, (np.sum(call(sl, 0.5 + h)) - np.sum(call(sl, 0.5 - h))) / (2 * h), rtol=1e-7)


@pytest.mark.parametrize("opts", [
    {"subset_by_index": [0, 1]}, {"subset_by_index": [1, 2], "driver": "evx"}, {"subset_by_value": [-np.inf, 0.0]},
    {"subset_by_index": [0, 1], "eigvals_only": True}, {"subset_by_value": [-np.inf, 0.0], "eigvals_only": True},
], ids=["index", "evx", "value", "index-values", "value-values"])
@pytest.mark.parametrize("generalized", [False, True])
def test_traced_eigh_subsets_return_scipys_bits(opts, generalized):
    # the subset was taken from every pair: values and vectors 1-4 ulp from SciPy's subset call,
    # enough for a convergence test to branch another way than the plain run
    if generalized and opts.get("driver") == "evx":
        opts = {**opts, "driver": "gvx"}  # (SciPy's name for the generalized subset driver)
    rng = np.random.default_rng(5)
    a = rng.standard_normal((5, 5))
    a = a + a.T
    m = rng.standard_normal((5, 5))
    b = np.eye(5) + 0.1 * (m @ m.T) if generalized else None
    want = sl.eigh(a, b, **opts)
    seen = []

    def f(a):
        got = msl.eigh(a, b, **opts)
        seen.append([np.array(mg.value(g)) for g in (got if isinstance(got, tuple) else (got,))])
        w = got if opts.get("eigvals_only") else got[0]
        return np.sum(w ** 2)

    g = mg.grad(f)(a)
    for got, ref in zip(seen[0], want if isinstance(want, tuple) else (want,)):
        np.testing.assert_array_equal(got, ref)
    np.testing.assert_allclose(g, numerical_grad(lambda a: np.sum(
        (sl.eigh(a, b, **opts) if opts.get("eigvals_only") else sl.eigh(a, b, **opts)[0]) ** 2), (a,), (0,))[0],
        rtol=1e-6, atol=1e-8)


def test_logm_forward_mode_near_a_rotation_by_pi_is_real():
    # (the newfeat22 tester) SciPy's logm of the block matrix [[R, E], [0, R]] came back complex (Im ~ 1e-10)
    # for a real R whose log is real: forward mode raised a RuleError. Both modes agree (reverse was right)
    t = np.pi - 1e-4
    R = np.array([[np.cos(t), -np.sin(t), 0.0], [np.sin(t), np.cos(t), 0.0], [0.0, 0.0, 1.0]])
    E = np.array([[0.1, 0.2, 0.0], [-0.3, 0.05, 0.1], [0.0, 0.2, -0.1]])
    _, tangent = mg.jvp(msl.logm, (R,), (E,))
    assert tangent.dtype == np.float64
    W = np.arange(9.0).reshape(3, 3)
    np.testing.assert_allclose(np.sum(W * tangent), np.sum(mg.grad(lambda a: np.sum(W * msl.logm(a)))(R) * E),
                               rtol=1e-7)


def test_logm_reverse_mode_on_its_branch_cut():
    # (the newfeat23 tester) a real matrix with a negative eigenvalue has a complex log; the reverse rule
    # L(Aᴴ, ḡ) assumed f(z̄) = conj f(z), false on the cut: Im logm's gradient had the wrong sign. By hand:
    # logm(A)[0, 1] = (log(-2) - log 3) / (-2 - 3) A[0, 1] for A = diag(-2, 3), Im part -pi/5 per A[0, 1]
    A = np.array([[-2.0, 0.0], [0.0, 3.0]])
    f = lambda a: np.imag(msl.logm(a)[0, 1])
    np.testing.assert_allclose(mg.grad(f)(A)[0, 1], -np.pi / 5, rtol=1e-12)
    np.testing.assert_allclose(mg.jvp(f, (A,), (np.array([[0.0, 1.0], [0.0, 0.0]]),))[1], -np.pi / 5, rtol=1e-12)
    B = np.array([[-2.0, 0.5], [0.3, 3.0]])
    g = lambda b: np.sum(np.abs(msl.logm(b)) ** 2)
    np.testing.assert_allclose(mg.grad(g)(B).ravel() @ np.array([0.3, -0.7, 1.1, 0.2]),
                               mg.jvp(g, (B,), (np.array([[0.3, -0.7], [1.1, 0.2]]),))[1], rtol=1e-10)



def test_structure_predicates_of_a_traced_matrix():
    # sl.issymmetric / ishermitian / bandwidth answer yes/no or two ints: nothing to lose (an
    # AttributeError escaped from the refusal's hint, which looked for a SciPy subpackage)
    def f(a):
        if sl.issymmetric(a) and sl.ishermitian(a) and sl.bandwidth(a) == (1, 1):
            return np.sum(a ** 2)
        return np.sum(a)

    a = np.array([[1.0, 2.0], [2.0, 1.0]])
    np.testing.assert_allclose(mg.grad(f)(a), 2 * a, rtol=1e-15)  # d/da sum(a²) = 2a, by hand
    np.testing.assert_allclose(mg.grad(f)(np.triu(a)), np.ones((2, 2)), rtol=1e-15)  # not symmetric: sum(a)


@pytest.mark.parametrize("which", ["eigh", "eigh_vectors", "cholesky", "cho_factor", "solve_triangular"])
def test_check_finite_false_reads_only_the_triangle(which):
    # check_finite=False with NaN in the triangle LAPACK does not read (a buffer filled in its lower
    # half): SciPy's values; mutagrad called SciPy with its check (ValueError), and forward mode's
    # Hermitian stand-in spread the NaN through a mask product (nan * 0)
    def make(lin):
        def f(x):
            a = np.full((3, 3), np.nan) * x[0]
            a[np.tril_indices(3)] = x
            a[np.diag_indices(3)] += 4.0
            if which == "eigh":
                return np.sum(lin.eigh(a, lower=True, eigvals_only=True, check_finite=False) ** 2)
            if which == "eigh_vectors":
                w, v = lin.eigh(a, lower=True, check_finite=False, driver="evd")
                return np.sum(w ** 2) + np.sum((v[:, :1] @ v[:, :1].T) ** 3)
            if which == "cholesky":
                return np.sum(lin.cholesky(a, lower=True, check_finite=False))
            if which == "cho_factor":
                return np.sum(np.tril(lin.cho_factor(a, lower=True, check_finite=False)[0]))
            return np.sum(lin.solve_triangular(a, np.ones(3), lower=True, check_finite=False))

        return f

    x = np.array([1.0, 0.3, 1.2, 0.1, -0.2, 0.9])
    val, g = mg.value_and_grad(make(msl))(x.copy())
    assert val == make(sl)(x.copy())
    np.testing.assert_allclose(g, numerical_grad(make(sl), (x.copy(),), (0,))[0], rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(mg.jvp(make(msl), (x.copy(),), (np.ones(6),))[1], np.sum(g), rtol=1e-10)
    with pytest.raises(ValueError, match="must not contain infs or NaNs"):  # check_finite=True: SciPy's check
        mg.grad(lambda x: np.sum(msl.cholesky(np.full((2, 2), np.nan) * x[0] + np.eye(2))))(x)


def test_check_finite_false_of_eigvalsh_and_cho_solve():
    # eigvalsh passed no check_finite to eigh, and cho_solve called SciPy with its check: NaN in the
    # triangle LAPACK does not read raised where SciPy returns values
    def make(lin):
        def f(x):
            a = np.full((2, 2), np.nan) * x[0]
            a[np.tril_indices(2)] = x
            a[np.diag_indices(2)] += 3.0
            c = lin.cho_factor(a, lower=True, check_finite=False)
            w = lin.eigvalsh(a, lower=True, check_finite=False)
            return np.sum(lin.cho_solve(c, np.ones(2), check_finite=False)) + np.sum(w ** 2)

        return f

    x = np.array([1.0, 0.3, 1.2])
    val, g = mg.value_and_grad(make(msl))(x.copy())
    assert val == pytest.approx(make(sl)(x.copy()), rel=1e-14)
    np.testing.assert_allclose(g, numerical_grad(make(sl), (x.copy(),), (0,))[0], rtol=1e-6, atol=1e-9)


def test_cho_factor_lays_out_its_factor_as_scipy():
    # each matrix in Fortran order, as SciPy's: a sum over c added in another order (its last bit
    # differed from the plain call's in 153 of 400 sums)
    rng = np.random.default_rng(3)
    for _ in range(40):
        m = rng.standard_normal((3, 3))
        a = m @ m.T + 3 * np.eye(3)
        val = mg.value_and_grad(lambda a: np.sum(msl.cho_factor(a)[0]))(a.copy())[0]
        assert val == np.sum(sl.cho_factor(a)[0])
    stack = np.stack([a, 2 * a])
    assert msl.cho_factor(stack)[0].strides == sl.cho_factor(stack)[0].strides
    f = lambda a: np.sum(msl.cho_factor(a)[0] ** 3)
    np.testing.assert_allclose(mg.hessian(f)(a), mg.jacobian(mg.grad(f))(a), rtol=1e-10, atol=1e-12)
    check_grads(f, a, modes=("rev", "fwd"))


def test_plain_scipy_overwrite_on_a_traced_constant_is_refused():
    # scipy.linalg.det(A, overwrite_a=True) of a non-differentiated argument: SciPy got a read-only
    # array, copied it, and the program read A's old values where a plain call reads the factors
    # (value 60 for 58.75, gradient [30, 40] for [28.75, 40]); mutagrad.scipy.linalg.det overwrites
    a0 = np.array([[4.0, 1.0], [2.0, 3.0]])

    def make(det):
        def g(a, b):
            d = det(a, overwrite_a=True)
            return d * np.sum(b ** 2) + np.sum(a) * b[0]

        return g

    b = np.array([1.0, 2.0])
    with pytest.raises(mg.TracerEscapeError, match=r"overwrite_a=True.*mutagrad.scipy.linalg.det"):
        mg.grad(make(sl.det), argnums=1)(a0.copy(), b)
    plain_a, a = a0.copy(), a0.copy()
    want = make(sl.det)(plain_a, b)
    val, g = mg.value_and_grad(make(msl.det), argnums=1)(a, b)
    assert val == pytest.approx(want, rel=1e-14)
    np.testing.assert_array_equal(a, plain_a)
    np.testing.assert_allclose(g, numerical_grad(lambda b: make(sl.det)(a0.copy(), b), (b,), (0,))[0], rtol=1e-7)
    np.testing.assert_allclose(mg.grad(lambda a, b: sl.det(a, overwrite_a=False) * np.sum(b), argnums=1)(a0.copy(), b),
                               [10.0, 10.0], rtol=1e-14)  # overwrite_a=False: det = 10, by hand
    # the flag by position, through **kw, a partial or a variable: SciPy's own frame says (a variable
    # False is no overwrite)
    import functools

    flag = False
    for det in (lambda a: sl.det(a, True), lambda a: sl.det(a, **{"overwrite_a": True}),  # noqa: PIE804
                functools.partial(sl.det, overwrite_a=True)):
        with pytest.raises(mg.TracerEscapeError, match="overwrite_a=True"):
            mg.grad(lambda a, b, det=det: det(a) * np.sum(b), argnums=1)(a0.copy(), b)
    np.testing.assert_allclose(mg.grad(lambda a, b: sl.det(a, overwrite_a=flag) * np.sum(b), argnums=1)(a0.copy(), b),
                               [10.0, 10.0], rtol=1e-14)


@pytest.mark.parametrize("n", [2, 4, 6])
def test_det_of_float16_is_differentiated_in_float32(n):
    # NumPy's linalg has no float16 (the adjugate's inverse raised); SciPy's det computes in float32
    rng = np.random.default_rng(1)
    a = (rng.standard_normal((n, n)) + 3 * np.eye(n)).astype(np.float16)
    value, g = mg.value_and_grad(msl.det)(a)
    assert value == sl.det(a) and g.dtype == np.float16
    a64 = a.astype(np.float64)
    fd = numerical_grad(sl.det, (a64,), (0,))[0]
    np.testing.assert_allclose(g, fd, rtol=0, atol=2e-3 * np.abs(fd).max())  # (a float16 gradient)
    np.testing.assert_allclose(mg.jvp(msl.det, (a,), (np.ones_like(a),))[1], np.sum(fd), rtol=1e-6)


_NESTED = {  # matrices written as nested lists of traced numbers, as SciPy takes them
    "solve": lambda p, L: L.solve([[p[0], p[1]], [p[1], p[2]]], [1.0, 0.5]),
    "solve rhs": lambda p, L: L.solve(3.0 * np.eye(2), [p[0], p[1] * p[2]]),
    "solve tuples": lambda p, L: L.solve(((p[0], p[1]), (p[1], p[2])), np.array([1.0, 0.5])),
    "inv": lambda p, L: L.inv([[p[0], p[1]], [p[1], p[2]]]),
    "det": lambda p, L: L.det([[p[0], p[1]], [p[1], p[2]]]),
    "expm": lambda p, L: L.expm([[p[0] - 3.0, p[1]], [p[1], p[2] - 2.0]]),
    "solve_banded": lambda p, L: L.solve_banded((1, 1), [[0.0, p[1]], [p[0], p[2]], [p[1], 0.0]], [1.0, 2.0]),
    "solveh_banded": lambda p, L: L.solveh_banded([[0.0, p[1]], [p[0], p[2]]], [1.0, 2.0]),
    "cholesky": lambda p, L: L.cholesky([[p[0], p[1]], [p[1], p[2]]]),
    "eigvalsh": lambda p, L: L.eigvalsh([[p[0], p[1]], [p[1], p[2]]]),
    "block_diag": lambda p, L: L.block_diag([[p[0], p[1]]], [[p[2]]]),
    "toeplitz": lambda p, L: L.toeplitz([p[0], p[1], p[2]]),
    "solve_sylvester": lambda p, L: L.solve_sylvester([[p[0], 0.0], [p[1], p[2]]], np.eye(2), [[1.0, p[1]], [0.0, 1.0]]),
}


@pytest.mark.parametrize("name", sorted(_NESTED))
def test_matrices_given_as_nested_lists_of_traced_numbers(name):
    # (implicit: the rules got the list itself, and gave one array as the cotangent of a list (a RuleError
    # naming the rule), or indexed it as an array (a TypeError from inside mutagrad))
    fn = _NESTED[name]
    p = np.array([3.0, 1.0, 2.0])
    want = fn(p, sl)
    got = mg.value_and_grad(lambda q: np.sum(np.abs(fn(q, msl)) ** 2))(p.copy())[0]
    assert got == pytest.approx(np.sum(np.abs(want) ** 2), rel=1e-13)
    J = np.stack([(np.asarray(fn(p + 1e-6 * e, sl)) - np.asarray(fn(p - 1e-6 * e, sl))) / 2e-6 for e in np.eye(3)],
                 axis=-1)
    for mode in ("rev", "fwd"):
        np.testing.assert_allclose(mg.jacobian(lambda q: fn(q, msl), mode=mode)(p.copy()), J, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("hermitian", [False, True])
def test_banded_solves_with_check_finite_false_ignore_the_unused_corners(hermitian):
    # (implicit: the corners of a band made with np.empty or np.full(nan) hold anything; SciPy solves
    # with check_finite=False, and mutagrad raised its "must not contain infs or NaNs")
    b = np.array([1.0, 2.0, 3.0])

    def f(p, L, full):
        if hermitian:
            ab = full((2, 3), np.nan)
            ab[0, 1:] = -p[0]
            ab[1] = 4.0 + p[1]
            return L.solveh_banded(ab, b * p[2], check_finite=False)
        ab = full((3, 3), np.nan)
        ab[0, 1:] = -p[0]
        ab[1] = 4.0 + p[1]
        ab[2, :-1] = -p[0] * p[2]
        return L.solve_banded((1, 1), ab, b * p[1], check_finite=False)

    import mutagrad.numpy as mnp

    p = np.array([1.0, 0.5, 0.7])
    np.testing.assert_array_equal(f(p, msl, np.full), f(p, sl, np.full))
    J = np.stack([(f(p + 1e-6 * e, sl, np.full) - f(p - 1e-6 * e, sl, np.full)) / 2e-6 for e in np.eye(3)], axis=-1)
    for mode in ("rev", "fwd"):
        np.testing.assert_allclose(mg.jacobian(lambda q: f(q, msl, mnp.full), mode=mode)(p.copy()), J, atol=1e-7)
    with pytest.raises(ValueError, match="must not contain infs or NaNs"):  # (check_finite=True: SciPy's check)
        (msl.solveh_banded if hermitian else lambda ab, b: msl.solve_banded((1, 1), ab, b))(
            np.full((2 if hermitian else 3, 3), np.nan), b)


def test_khatri_rao_batch_errors_are_scipys():
    for a, b in [(KR.R(0, 2, 3), KR.R(4, 3)), (KR.R(5, 2, 3), KR.R(6, 4, 3))]:
        with pytest.raises(ValueError) as want:
            sl.khatri_rao(a, b)
        with pytest.raises(ValueError) as got:
            mg.grad(lambda a, b=b: np.sum(msl.khatri_rao(a, b)))(a)
        assert str(got.value) == str(want.value)


def test_polar_at_a_rotation_closed_form_and_its_refusals():
    # (the ARAP tester) u of s R (R a rotation by t, all singular values s) is R: du/dt = dR/dt, whatever s; by hand.
    # Where u has no derivative (rank deficient; a wide matrix's right decomposition, whose p is singular): refused
    def rot(t):
        return np.stack([np.stack([np.cos(t), -np.sin(t)]), np.stack([np.sin(t), np.cos(t)])])

    t = 0.3
    for s in (1.0, 2.5):
        du = mg.jacobian(lambda t, s=s: msl.polar(s * rot(t))[0])(t)
        np.testing.assert_allclose(du, [[-np.sin(t), -np.cos(t)], [np.cos(t), -np.sin(t)]], rtol=1e-12, atol=1e-14)
        dp = mg.jacobian(lambda t, s=s: msl.polar(s * rot(t))[1])(t)
        np.testing.assert_allclose(dp, np.zeros((2, 2)), atol=1e-13)  # (p = s I)
    g = mg.grad(lambda a: np.sum(msl.polar(a)[0]))(np.array([[1.0, 2.0], [2.0, 4.0]]))
    assert isinstance(g, mg.NotImplementedTangent) and "rank-deficient" in g.message
    # a tall matrix's left decomposition, a wide one's right (their p singular, u the other side's): against
    # central differences of SciPy's (regress86)
    for a, side in ((np.arange(8.0).reshape(4, 2) + np.eye(4, 2), "left"),
                    (np.arange(8.0).reshape(2, 4) + np.eye(2, 4), "right")):
        check_grads(lambda a, side=side: msl.polar(a, side), a, order=2)
        traced_p = mg.jvp(lambda a, side=side: msl.polar(a, side)[1], (a,), (np.ones_like(a),))[0]
        np.testing.assert_allclose(traced_p, sl.polar(a, side)[1], rtol=1e-12, atol=1e-12)
    with pytest.raises(ValueError, match="side"):
        msl.polar(np.eye(2), side="up")
    u, p = msl.polar(np.eye(2) * 3.0)  # (plain: SciPy's own)
    np.testing.assert_allclose(u, np.eye(2), atol=1e-15)
    np.testing.assert_allclose(p, 3.0 * np.eye(2), rtol=1e-15)


# -- lu_solve / cho_solve with few right-hand sides: products with the columns, not an n x n matrix ----------


_FEW = np.random.default_rng(4704)


@pytest.mark.parametrize("k", [None, 1, 3, 4])  # (a vector, few columns of 6 rows, and as many as the old path takes)
@pytest.mark.parametrize("trans", [0, 1, 2])
@pytest.mark.parametrize("dtype", [float, complex])
def test_lu_solve_few_and_many_columns(k, trans, dtype):
    a = _FEW.standard_normal((6, 6)) + 3 * np.eye(6)
    b = _FEW.standard_normal(6 if k is None else (6, k))
    if dtype is complex:
        a = a + 1j * _FEW.standard_normal((6, 6))
        b = b + 1j * _FEW.standard_normal(b.shape)
    w = _FEW.standard_normal(b.shape)

    def f(a, b):
        lu = msl.lu_factor(a)
        x = msl.lu_solve(lu, b, trans=trans)
        x = msl.lu_solve(lu, x * w + 1.0, trans=trans)  # (one factorization, two solves: its cotangents add up)
        return np.sum(np.abs(x) ** 2)

    check_grads(f, a, b, order=2 if dtype is float else 1)


@pytest.mark.parametrize("k", [None, 1, 3, 4])
@pytest.mark.parametrize("lower", [False, True])
def test_cho_solve_few_and_many_columns(k, lower):
    m = _FEW.standard_normal((6, 6))
    a = m @ m.T + 6 * np.eye(6)
    b = _FEW.standard_normal(6 if k is None else (6, k))

    def f(a, b):
        c = msl.cho_factor(a, lower=lower)
        x = msl.cho_solve(c, b)
        return np.sum(msl.cho_solve(c, x ** 2) * np.arange(1.0, 7.0).reshape((6,) + (1,) * (np.ndim(b) - 1)))

    check_grads(f, a, b, order=2)


def test_trans_as_scipy_reads_it():
    # (regress88) lu_solve took the names 'N', 'T', 'C', which SciPy's refuses, and a bad value raised a bare
    # KeyError: now SciPy's own errors, and solve_triangular's reading of an unusual value (SciPy's too)
    lu = msl.lu_factor(np.array([[2.0, 1.0], [0.5, 3.0]]))
    for t in ("T", "N", "x"):
        with pytest.raises(ValueError, match="trans"):
            msl.lu_solve(lu, np.ones(2), trans=t)
    for t in (1, True, 1.0, np.int64(1)):
        np.testing.assert_array_equal(msl.lu_solve(lu, np.ones(2), trans=t), sl.lu_solve(lu, np.ones(2), trans=t))
    a = np.array([[2.0, 0.0], [1.0, 4.0]])
    for t in (0, "T", "C", "X", 5, 1.0, "n"):
        want = sl.solve_triangular(a, np.ones(2), trans=t, lower=True)
        np.testing.assert_array_equal(msl.solve_triangular(a, np.ones(2), trans=t, lower=True), want)
    # (regress89: SciPy transposes a C-ordered matrix itself, negating an unknown trans, and passes an F-ordered
    # one's to LAPACK, which refuses it; a complex 'c' is then a plain transpose)
    ac = np.array([[2.0, 0.0, 0.0], [1.0 + 1.0j, 4.0, 0.0], [0.5j, -1.0, 3.0 - 1.0j]])
    bc = np.array([1.0, 2.0j, -1.0])
    for t in ("c", "n", 2, "C"):
        np.testing.assert_allclose(msl.solve_triangular(ac, bc, trans=t, lower=True),
                                   sl.solve_triangular(ac, bc, trans=t, lower=True), rtol=1e-14)
    af = np.asfortranarray(a)
    for t in ("n", 3, "X"):
        with pytest.raises(Exception) as plain:
            sl.solve_triangular(af, np.ones(2), trans=t, lower=True)
        with pytest.raises(type(plain.value)):
            msl.solve_triangular(af, np.ones(2), trans=t, lower=True)
        g = mg.grad(lambda b, t=t: np.sum(msl.solve_triangular(a, b, trans=t, lower=True) * [1.0, 3.0]))(np.ones(2))
        np.testing.assert_allclose(g, numerical_grad(
            lambda b, t=t: np.sum(sl.solve_triangular(a, b, trans=t, lower=True) * [1.0, 3.0]), (np.ones(2),), (0,))[0])
