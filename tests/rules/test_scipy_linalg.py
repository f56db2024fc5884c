"""scipy.linalg rules (mutagrad/rules/scipy/linalg.py) through
mutagrad.scipy.linalg, both modes, against finite differences."""
import numpy as np
import pytest

sl = pytest.importorskip("scipy.linalg")

import mutagrad as mg  # noqa: E402
import mutagrad.scipy.linalg as msl  # noqa: E402
from mutagrad.testing import check_grads  # noqa: E402
from tests.rules._draws import Draws  # noqa: E402

_draws = Draws(0)
rng = _draws.rng
R, C = _draws.R, _draws.C


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
    ("scipy.linalg.lu_solve", lambda lu, b: msl.lu_solve((lu, PIV3), b, trans="T"), (LU3, b3), 2),
    # Sylvester equation, matrix exponential and square root
    ("scipy.linalg.solve_sylvester", msl.solve_sylvester, (WELL(3, 3), WELL(3, 3), R(3, 3)), 2),
    ("scipy.linalg.solve_sylvester", msl.solve_sylvester, (WELL(2, 2) + 1j * R(2, 2), WELL(2, 2), C(2, 2)), 1),
    ("scipy.linalg.expm", msl.expm, (0.5 * R(3, 3),), 2),
    ("scipy.linalg.expm", msl.expm, (0.5 * C(3, 3),), 1),
    ("scipy.linalg.expm", msl.expm, (0.5 * R(2, 3, 3),), 2),
    ("scipy.linalg.sqrtm", msl.sqrtm, (SPD(3, 3),), 2),
    ("scipy.linalg.sqrtm", msl.sqrtm, (WELL(3, 3) + 2 * np.eye(3),), 2),  # not symmetric
    ("scipy.linalg.sqrtm", msl.sqrtm, (HPD(3),), 1),
    # NumPy's rules under SciPy's names; assume_a selects the entries read
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
]


@pytest.mark.parametrize("covers,fn,args,order", CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_rule(covers, fn, args, order):
    check_grads(fn, *args, modes=("fwd", "rev"), order=order)


@pytest.mark.parametrize("assume_a", [None, "gen", "pos", "sym", "her", "diagonal", "tridiagonal", "banded",
                                      "upper triangular", "lower triangular"])
def test_solve_reads_what_scipy_reads(assume_a):
    a = np.triu(A3) if assume_a == "banded" else A3
    np.testing.assert_allclose(msl.solve(a, B32, assume_a=assume_a), sl.solve(a, B32, assume_a=assume_a),
                               rtol=1e-11)


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
    np.testing.assert_allclose(msl.inv(S3, assume_a="pos"), sl.inv(S3, assume_a="pos"), rtol=1e-12)
    np.testing.assert_allclose(msl.det(A3), sl.det(A3), rtol=1e-13)
    assert msl.logm is sl.logm  # everything else is SciPy's


def test_lu_pivots_are_plain_integers():
    def f(a):
        lu, piv = msl.lu_factor(a)
        assert type(piv) is np.ndarray and piv.dtype.kind == "i"
        return np.sum(lu)

    mg.grad(f)(A3)


def test_lu_factor_of_a_rectangular_matrix_is_not_implemented():
    g = mg.grad(lambda a: np.sum(msl.lu_factor(a)[0]))(R(3, 2))
    assert isinstance(g, mg.NotImplementedTangent)
    assert "non-square" in g.message


def test_expm_closed_form():
    # d/dt expm(t N) = N expm(t N); for nilpotent N = [[0, 1], [0, 0]], expm(t N) = I + t N
    n = np.array([[0.0, 1.0], [0.0, 0.0]])
    np.testing.assert_allclose(mg.jacobian(lambda t: msl.expm(t * n))(0.7), n, atol=1e-12)
    # third order: expm(t I)[0, 0] = e^t
    d3 = mg.grad(mg.grad(mg.grad(lambda t: msl.expm(t * np.eye(2))[0, 0])))(0.3)
    np.testing.assert_allclose(d3, np.exp(0.3), rtol=1e-10)
