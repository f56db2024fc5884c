"""np.linalg factorizations and solvers, kron, cross: one line per case, both
modes against finite differences (the older linalg cases live in
test_numpy_core.py). Complex eigen- and singular vectors are only defined up
to a phase; LAPACK fixes it (a row of eigh's and svd's vectors real, R's
diagonal of qr real) and the rules follow it, which the phase tests at the
end check on phase-dependent functions. eig's eigenvectors are
normalized to unit norm with their largest component real, which leaves a
sign that LAPACK does not fix: on some machines it depends on the memory
layout of the call, so the cases differentiate sign-free products of them."""
import functools
import warnings

import numpy as np
import pytest

import mutagrad as mg
from mutagrad.testing import check_grads, numerical_grad
from tests._oracles import fd_hessian
from tests.rules._draws import Draws

_draws = Draws(5)
R, C = _draws.R, _draws.C


def SPD(n, batch=(), cplx=False):
    a = R(*batch, n, n) + (1j * R(*batch, n, n) if cplx else 0)
    return a @ np.swapaxes(a.conj(), -1, -2) + n * np.eye(n)


def WELL(*shape):  # well-conditioned square matrices (a dominant diagonal)
    return R(*shape) / 2 + 2 * np.eye(shape[-1])


def SYM(n):
    a = R(n, n)
    return a + a.T


def _usv(full=False):
    """A phase-invariant function of the singular vectors: U sin(S) Vh."""
    def f(a):
        U, S, Vh = np.linalg.svd(a, full_matrices=full)
        k = S.shape[-1]
        return (U[..., :k] * np.sin(S)[..., None, :]) @ Vh[..., :k, :]
    return f


def _abs2_all(fn):
    return lambda a: [np.abs(x) ** 2 for x in fn(a)]


def _eig_sign_free(a):
    """eig's eigenvalues and, per eigenvector v, the products v_i v_j (kept by a
    sign flip, not by a change of phase: they test the phase normalization)."""
    w, v = np.linalg.eig(a)
    return w, v[..., :, None, :] * v[..., None, :, :]


# (covers, function, args, order)
CASES = [
    ("np.linalg.cholesky", np.linalg.cholesky, (SPD(3),), 2),
    ("np.linalg.cholesky", lambda a: np.linalg.cholesky(a, upper=True), (SPD(3),), 2),
    ("np.linalg.cholesky", np.linalg.cholesky, (SPD(3, cplx=True),), 2),
    ("np.linalg.cholesky", lambda a: np.linalg.cholesky(a, upper=True), (SPD(2, (2,), cplx=True),), 1),
    ("np.linalg.cholesky", np.linalg.cholesky, (SPD(3, (2,)),), 1),
    ("np.linalg.eigh", np.linalg.eigh, (SPD(3),), 2),
    ("np.linalg.eigh", lambda a: np.linalg.eigh(a, UPLO="U"), (SYM(3),), 2),
    ("np.linalg.eigh", np.linalg.eigh, (SPD(3, (2,)),), 1),
    ("np.linalg.eigh", lambda a: np.linalg.eigh(a)[0], (SPD(3, cplx=True),), 2),
    ("np.linalg.eigh", _abs2_all(np.linalg.eigh), (SPD(3, cplx=True),), 2),
    ("np.linalg.eigvalsh", np.linalg.eigvalsh, (SYM(3),), 2),
    ("np.linalg.eigvalsh", lambda a: np.linalg.eigvalsh(a, "U"), (SPD(3, (2,), cplx=True),), 2),
    ("np.linalg.svd", lambda a: np.linalg.svd(a, full_matrices=False), (R(3, 3),), 2),
    ("np.linalg.svd", lambda a: np.linalg.svd(a, full_matrices=False), (R(4, 2),), 2),
    ("np.linalg.svd", lambda a: np.linalg.svd(a, False), (R(2, 3, 4),), 1),
    ("np.linalg.svd", np.linalg.svd, (R(3, 3),), 1),  # full_matrices=True, square: unique
    ("np.linalg.svd", lambda a: np.linalg.svd(a, compute_uv=False), (R(2, 4),), 2),
    ("np.linalg.svd", lambda a: np.linalg.svd(a, compute_uv=False), (C(3, 2),), 2),
    ("np.linalg.svd", _usv(), (C(3, 3),), 2),
    ("np.linalg.svd", _usv(), (C(2, 4, 2),), 1),
    ("np.linalg.svd", _abs2_all(lambda a: np.linalg.svd(a, full_matrices=False)), (C(2, 3),), 1),
    ("np.linalg.svd", lambda a: np.linalg.svd(a, hermitian=True), (SYM(3),), 1),
    ("np.linalg.svd", lambda a: np.linalg.svd(a, hermitian=True, compute_uv=False), (SYM(3),), 1),
    ("np.linalg.svdvals", np.linalg.svdvals, (R(3, 2),), 2),
    ("np.linalg.norm", lambda a: np.linalg.norm(a, 2), (R(3, 2),), 2),
    ("np.linalg.norm", lambda a: np.linalg.norm(a, -2), (C(3, 2),), 2),
    ("np.linalg.norm", lambda a: np.linalg.norm(a, "nuc"), (R(2, 3),), 2),
    ("np.linalg.norm", lambda a: np.linalg.norm(a, "nuc", axis=(2, 0), keepdims=True), (C(3, 2, 4),), 1),
    ("np.linalg.vector_norm", np.linalg.vector_norm, (R(2, 3),), 2),
    ("np.linalg.vector_norm", lambda a: np.linalg.vector_norm(a, axis=(0, 2), keepdims=True, ord=3), (R(2, 3, 2),), 1),
    ("np.linalg.vector_norm", lambda a: np.linalg.vector_norm(a, axis=1, ord=1), (C(2, 3),), 1),
    ("np.linalg.matrix_norm", lambda a: np.linalg.matrix_norm(a, ord=2), (R(2, 3, 3),), 2),
    ("np.linalg.matrix_norm", np.linalg.matrix_norm, (C(3, 2),), 1),
    ("np.linalg.cond", np.linalg.cond, (R(3, 3),), 2),
    ("np.linalg.cond", lambda a: np.linalg.cond(a, -2), (C(3, 3),), 1),
    ("np.linalg.cond", lambda a: np.linalg.cond(a, "fro"), (WELL(2, 3, 3),), 1),
    ("np.linalg.matrix_rank", lambda a: a * np.linalg.matrix_rank(a), (R(3, 3),), 1),  # an integer
    ("np.linalg.qr", np.linalg.qr, (R(3, 3),), 2),
    ("np.linalg.qr", np.linalg.qr, (R(4, 2),), 2),
    ("np.linalg.qr", np.linalg.qr, (R(2, 4),), 2),
    ("np.linalg.qr", np.linalg.qr, (C(3, 2),), 2),
    ("np.linalg.qr", np.linalg.qr, (C(2, 2, 3),), 1),
    ("np.linalg.qr", lambda a: np.linalg.qr(a, mode="r"), (R(2, 4, 3),), 1),
    ("np.linalg.qr", lambda a: np.linalg.qr(a, mode="complete"), (R(2, 3),), 1),  # wide: unique
    ("np.linalg.pinv", np.linalg.pinv, (R(3, 3),), 2),
    ("np.linalg.pinv", np.linalg.pinv, (R(4, 2),), 2),
    ("np.linalg.pinv", np.linalg.pinv, (C(2, 2, 3),), 1),
    ("np.linalg.pinv", lambda a: np.linalg.pinv(a, hermitian=True), (SYM(3),), 1),
    ("np.linalg.lstsq", lambda a, b: np.linalg.lstsq(a, b), (R(4, 2), R(4)), 2),
    ("np.linalg.lstsq", lambda a, b: np.linalg.lstsq(a, b, rcond=None), (R(4, 2), R(4, 3)), 1),
    ("np.linalg.lstsq", lambda a, b: np.linalg.lstsq(a, b), (R(2, 3), R(2)), 2),  # underdetermined
    ("np.linalg.lstsq", lambda a, b: np.linalg.lstsq(a, b), (C(4, 2), C(4, 2)), 1),
    ("np.linalg.eig", _eig_sign_free, (R(3, 3),), 2),  # real matrix, complex pair
    ("np.linalg.eig", _eig_sign_free, (SYM(3) + R(3, 3) / 10,), 2),  # real eigenvalues
    ("np.linalg.eig", _eig_sign_free, (C(3, 3),), 2),
    ("np.linalg.eig", _eig_sign_free, (C(2, 2, 2),), 1),
    ("np.linalg.eigvals", np.linalg.eigvals, (R(3, 3),), 2),
    ("np.linalg.eigvals", np.linalg.eigvals, (C(2, 3, 3),), 1),
    # a repeated eigenvalue of a diagonalizable matrix: each eigenvalue gets its own eigenvector
    ("np.linalg.eigvals", lambda a: np.sum(np.linalg.eigvals(a) ** 2), (np.diag([1.0, 1.0, 2.0]),), 1),
    ("np.linalg.matrix_power", lambda a: np.linalg.matrix_power(a, 5), (R(3, 3) / 2,), 2),
    ("np.linalg.matrix_power", lambda a: np.linalg.matrix_power(a, -2), (WELL(2, 3, 3),), 1),
    ("np.linalg.matrix_power", lambda a: np.linalg.matrix_power(a, 0) + a, (C(3, 3),), 1),
    ("np.linalg.matrix_power", lambda a: np.linalg.matrix_power(a, 3), (C(3, 3),), 1),
    ("np.linalg.multi_dot", lambda a, b: np.linalg.multi_dot([a, b]), (R(2, 3), R(3, 2)), 2),
    ("np.linalg.multi_dot", lambda a, b, c: np.linalg.multi_dot([a, b, c]), (R(3), R(3, 4), R(4, 2)), 2),
    ("np.linalg.multi_dot", lambda a, b, c, d: np.linalg.multi_dot([a, b, c, d]),
     (C(2, 3), R(3, 4), R(4, 2), C(2)), 1),
    ("np.linalg.tensorsolve", np.linalg.tensorsolve, (WELL(6, 6).reshape(6, 2, 3), R(6)), 2),
    ("np.linalg.tensorsolve", lambda a, b: np.linalg.tensorsolve(a, b, axes=(0,)),
     (WELL(6, 6).reshape(6, 3, 2).transpose(2, 0, 1), R(6)), 1),
    ("np.linalg.tensorsolve", np.linalg.tensorsolve, (WELL(4, 4).reshape(2, 2, 2, 2) + 0j, C(2, 2)), 1),
    ("np.linalg.tensorinv", lambda a: np.linalg.tensorinv(a, ind=1), (WELL(6, 6).reshape(6, 2, 3),), 2),
    ("np.linalg.tensorinv", np.linalg.tensorinv, (WELL(4, 4).reshape(2, 2, 4),), 1),
    ("np.kron", np.kron, (R(2, 3), R(3, 2)), 2),
    ("np.kron", np.kron, (R(2), C(3, 2)), 1),
    ("np.kron", np.kron, (R(2, 2), 1.5), 1),
    ("np.cross", np.cross, (R(3), R(3)), 2),
    ("np.cross", lambda a, b: np.cross(a, b, axisa=0, axisc=0), (R(3, 4), R(4, 3)), 1),
    ("np.cross", np.cross, (R(2, 3), R(3)), 1),
    ("np.cross", np.cross, (R(4, 1, 3), R(2, 3)), 2),  # broadcast: summed cotangents
    ("np.cross", np.cross, (C(2, 3), C(3)), 1),
    ("np.cross", lambda a, b: np.cross(a, b, axis=1), (C(2, 3, 2), C(2, 3, 2)), 1),
    ("np.linalg.cross", np.linalg.cross, (R(2, 3), C(2, 3)), 1),
    ("np.linalg.outer", np.linalg.outer, (R(2), C(3)), 1),
    # the array API's np.linalg functions (matrix axes last)
    ("np.linalg.vecdot", np.linalg.vecdot, (R(2, 3), R(3)), 2),
    ("np.linalg.vecdot", lambda a, b: np.linalg.vecdot(a, b, axis=1), (C(2, 3, 2), C(2, 3, 2)), 1),
    ("np.linalg.matrix_transpose", lambda a: np.linalg.matrix_transpose(a) @ a, (R(2, 3, 2),), 2),
    ("np.linalg.tensordot", np.linalg.tensordot, (R(2, 3, 4), R(3, 4)), 2),
    ("np.linalg.tensordot", lambda a, b: np.linalg.tensordot(a, b, axes=1), (R(2, 3), C(3, 2)), 1),
    ("np.linalg.matmul", np.linalg.matmul, (R(2, 2, 3), R(3, 2)), 2),
    ("np.linalg.trace", lambda a: np.linalg.trace(a, offset=1), (R(2, 3, 4),), 1),
    ("np.linalg.diagonal", lambda a: np.linalg.diagonal(a, offset=-1) ** 2, (R(2, 4, 3),), 2),
]

# 2-vectors are deprecated in NumPy 2 (a DeprecationWarning) but still computed
CROSS_2D = [
    ("np.cross", np.cross, (R(4, 2), R(4, 2)), 1),
    ("np.cross", np.cross, (R(2), R(3)), 1),
    ("np.cross", np.cross, (R(2, 3), R(2, 2)), 1),
]


@pytest.mark.parametrize("covers,fn,args,order", CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_rule(covers, fn, args, order):
    check_grads(fn, *args, modes=("fwd", "rev"), order=order)


@pytest.mark.parametrize("covers,fn,args,order", CROSS_2D, ids=[f"cross2d-{i}" for i in range(len(CROSS_2D))])
def test_cross_of_2_vectors(covers, fn, args, order):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        check_grads(fn, *args, modes=("fwd", "rev"), order=order)


# -- full_matrices / mode="complete": the extra columns are not unique ---------------------


@pytest.mark.parametrize("shape", [(4, 2), (2, 4), (2, 3, 2), (5, 2), (2, 3, 5)])
def test_svd_full_matrices_through_the_unique_columns(shape):
    # (forward mode too: the extra vectors' tangents are poisoned alone, so reading the others keeps the
    # derivative, as reverse mode's pullback, which sees what is read: the tensortrain tester's jvp and
    # hessian of np.linalg.svd's default, full_matrices=True, of a wide matrix)
    check_grads(_usv(full=True), R(*shape), order=2)


def test_qr_complete_through_the_unique_columns_forward_and_hessian():
    def f(x):
        Q, Rf = np.linalg.qr(x.reshape(6, 3), mode="complete")
        return np.sum(Q[:, :3] ** 3) + np.sum(Rf ** 2)

    x = np.random.default_rng(4702).standard_normal(18)
    check_grads(f, x, order=2)
    np.testing.assert_allclose(mg.hessian(f)(x), fd_hessian(f, x), atol=1e-5)


@pytest.mark.parametrize("read", [lambda Vh: Vh[3:], lambda Vh: Vh, lambda Vh: Vh[:, 1:]])
def test_svd_full_matrices_forward_reading_extra_vectors_not_implemented(read):
    x = np.random.default_rng(4703).standard_normal((3, 5))

    def f(x, read=read):
        v = read(np.linalg.svd(x)[2])
        return np.sum(v ** 2 * np.arange(v.shape[-1]))

    t = mg.jvp(f, (x,), (x,))[1]
    assert isinstance(t, mg.NotImplementedTangent) and "full_matrices" in t.message
    with mg.config(strict=True), pytest.raises(mg.NotImplementedTangentError):
        mg.jvp(f, (x,), (x,))


@pytest.mark.parametrize("shape", [(4, 2), (2, 4)])
def test_svd_full_matrices_extra_columns_not_implemented(shape):
    g = mg.grad(lambda a: np.sum(np.linalg.svd(a)[0] ** 3) + np.sum(np.linalg.svd(a)[2] ** 3))(R(*shape))
    assert isinstance(g, mg.NotImplementedTangent)
    assert "full_matrices" in g.message


def test_qr_complete_tall():
    check_grads(lambda a: [np.linalg.qr(a, "complete")[0][:, :2], np.linalg.qr(a, "complete")[1]],
                R(4, 2), modes=("rev",))
    g = mg.grad(lambda a: np.sum(np.linalg.qr(a, "complete")[0]))(R(4, 2))
    assert isinstance(g, mg.NotImplementedTangent) and "complete" in g.message


def test_svd_full_matrices_forward_not_implemented():
    a = R(4, 2)
    _, t = mg.jvp(lambda x: np.linalg.svd(x)[0], (a,), (R(4, 2),))
    assert isinstance(t, mg.NotImplementedTangent)


# -- repeated eigenvalues ------------------------------------------------------------------


def test_eigh_repeated_eigenvalues():
    a = np.diag([1.0, 1.0, 3.0])
    # eigenvalues: fine (the derivative picks the formula's branch, diag(Vᴴ dA V))
    np.testing.assert_allclose(mg.grad(lambda x: np.sum(np.linalg.eigh(x)[0]))(a), np.eye(3))
    # eigenvectors: no derivative exists; said so, never a silent number
    g = mg.grad(lambda x: np.sum(np.linalg.eigh(x)[1][:, 0] ** 3))(a)
    assert isinstance(g, mg.NotImplementedTangent) and "repeated" in g.message


def test_svd_repeated_singular_values():
    g = mg.grad(lambda x: np.sum(np.linalg.svd(x)[0] ** 3))(np.eye(3))
    assert isinstance(g, mg.NotImplementedTangent) and "repeated" in g.message
    np.testing.assert_allclose(mg.grad(lambda x: np.sum(np.linalg.svd(x, compute_uv=False)))(np.eye(3)), np.eye(3))


@pytest.mark.parametrize("shape,cplx", [((5, 3), False), ((3, 5), False), ((2, 6, 4), False), ((5, 3), True)])
def test_svd_zero_singular_value_of_a_non_square_matrix(shape, cplx):
    # rank one short: the zero value's vectors are not unique, the others' derivative is (it was a
    # NotImplementedTangent); a function of the zero value's own vectors still gets none
    rng = np.random.default_rng(11)
    *batch, m, n = shape
    r = min(m, n) - 1
    def draw(*s):
        return rng.standard_normal(s) + 1j * rng.standard_normal(s) if cplx else rng.standard_normal(s)

    a = draw(*batch, m, r) @ draw(*batch, r, n)
    w = rng.standard_normal(m)

    def top(x):
        u, s, vh = np.linalg.svd(x, full_matrices=False)
        return np.sum(s[..., :r] * np.abs(u[..., 0, :r]) ** 2) + np.sum(np.abs(vh[..., :r, 0] * s[..., :r]) ** 2)

    check_grads(top, a, modes=("rev",))
    np.testing.assert_allclose(np.linalg.svd(a, compute_uv=False)[..., -1], 0.0, atol=1e-12)
    last_u = lambda x: np.sum(np.abs(np.linalg.svd(x, full_matrices=False)[0][..., -1]) ** 2 * w)
    if m < n and not cplx:  # (u_k of a wide matrix of rank m - 1: the left null vector, unique up to its sign, which
        check_grads(last_u, a)  # forward mode differentiates, and grad's forward fill with it: regress87)
    else:
        g = mg.grad(last_u)(a)
        assert isinstance(g, mg.NotImplementedTangent) and "zero singular value" in g.message
    if cplx:  # (forward mode computes every vector's tangent: of a complex matrix it refuses, and names reverse mode)
        _, t = mg.jvp(top, (a,), (draw(*a.shape),))
        assert isinstance(t, mg.NotImplementedTangent) and "reverse mode (mg.grad, mg.vjp" in t.message
    else:  # (of a real one, the non-unique vectors alone are poisoned: regress87)
        check_grads(top, a, modes=("fwd",))


def test_qr_raw_not_differentiable():
    g = mg.grad(lambda x: np.sum(np.linalg.qr(x, mode="raw")[0]))(R(3, 3))
    assert isinstance(g, mg.NotImplementedTangent) and "raw" in g.message


def test_multi_dot_out():
    def f(a, b, c):
        out = np.zeros_like(a @ b @ c)
        np.linalg.multi_dot([a, b, c], out=out)
        return out * 1.0
    check_grads(f, R(2, 3), R(3, 4), R(4, 2))


def test_eigvals_repeated_and_defective():
    # the identity: d sum(eigvals)/dA = I (the trace), was LinAlgError (one eigenvector matched twice)
    g = mg.grad(lambda a: np.real(np.sum(np.linalg.eigvals(a))))(np.eye(3))
    np.testing.assert_allclose(g, np.eye(3), atol=1e-12)
    # a Jordan block is not diagonalizable: its eigenvalues have no derivative (they used to come
    # out as a number: 2I for sum(eigvals**2), whose true gradient, 2 A^T, is [[2, 0], [2, 2]])
    jordan = np.array([[1.0, 1.0], [0.0, 1.0]])
    assert isinstance(mg.grad(lambda a: np.real(np.sum(np.linalg.eigvals(a) ** 2)))(jordan), mg.NotImplementedTangent)
    _, t = mg.jvp(np.linalg.eigvals, (jordan,), (np.eye(2),))
    assert isinstance(t, mg.NotImplementedTangent)


def test_eigvals_at_a_tie_of_a_diagonalizable_matrix_take_the_groups_mean():
    # an eigenvalue repeated in a diagonalizable matrix has no derivative of its own; its slope was
    # whichever LAPACK's basis gave, changing under 1e-15 perturbations (the newfeat20 tester). As
    # eigvalsh's: the group's mean, tr((Q⁻¹ D Q)[:2, :2]) / 2, by hand, in both modes
    Q = np.array([[1.0, 0.2, -0.3], [0.1, 1.0, 0.4], [-0.2, 0.3, 1.0]])
    A0 = Q @ np.diag([2.0, 2.0, 5.0]) @ np.linalg.inv(Q)
    D = np.array([[0.3, -0.1, 0.2], [0.05, 0.1, -0.4], [0.2, 0.1, -0.3]])
    X = np.linalg.inv(Q) @ D @ Q
    mean, top = np.trace(X[:2, :2]) / 2, X[2, 2]
    rng = np.random.default_rng(3)
    def extremes(A, t):
        w = np.linalg.eigvals(A + t * D).real
        return np.min(w) + 10 * np.max(w)

    for _ in range(4):
        f = functools.partial(extremes, A0 + rng.normal(size=(3, 3)) * 1e-15)

        np.testing.assert_allclose(mg.grad(f)(0.0), mean + 10 * top, rtol=1e-9)
        np.testing.assert_allclose(mg.jvp(f, (0.0,), (1.0,))[1], mean + 10 * top, rtol=1e-9)
    # a symmetric matrix: eig's mean is eigvalsh's
    S = np.diag([1.0, 1.0, 3.0])
    Ds = D + D.T
    np.testing.assert_allclose(mg.jvp(lambda a: np.min(np.linalg.eigvals(a).real), (S,), (Ds,))[1],
                               mg.jvp(lambda a: np.linalg.eigvalsh(a)[0], (S,), (Ds,))[1], rtol=1e-12)


def _k_eff(x, A):
    """The dominant eigenvalue of A⁻¹ F, F's fission rows [diag(x[:n]), diag(x[n:])] over zero rows: an n-fold
    zero eigenvalue beside it (the neutronics tester)."""
    n = len(x) // 2
    F = np.zeros_like(x, shape=(2 * n, 2 * n))
    F[:n, :n] = np.diag(x[:n])
    F[:n, n:] = np.diag(x[n:])
    return np.linalg.solve(A, F)


def test_second_derivatives_of_simple_eigenvalues_beside_a_repeated_unread_one():
    # eigvals' reverse pass took every vector (V⁻ᴴ diag(ḡ) Vᴴ), so its derivative refused at the repeated zero
    # eigenvalue though only the dominant one is read; now the read columns' vectors only. Oracles: central
    # differences of the gradient (itself checked against central differences of the plain function), and
    # forward mode of the eigenvectors against reverse mode
    n = 3
    A = np.diag(np.full(2 * n, 2.0)) - np.diag(np.full(2 * n - 1, 0.5), 1) - np.diag(np.full(2 * n - 1, 0.5), -1)
    x = 0.5 + np.random.default_rng(4802).random(2 * n)

    def f(x):
        w = np.linalg.eigvals(_k_eff(x, A))
        top = w[np.argsort(-np.abs(w))[:n]]  # (the nonzero ones)
        return np.max(w.real) + 0.1 * np.sum(np.real(top ** 2))

    w0 = np.linalg.eigvals(_k_eff(x, A))
    assert np.sum(np.abs(w0) < 1e-12) == n  # (the repeated zero)
    check_grads(f, x, modes=("rev",))
    g = mg.grad(f)
    fd = np.array([(g(x + 1e-5 * e) - g(x - 1e-5 * e)) / 2e-5 for e in np.eye(2 * n)])
    with mg.config(strict=True):
        H = mg.hessian(f)(x)
        Hr = mg.jacobian(mg.grad(f), mode="rev")(x)
    np.testing.assert_allclose(H, fd, atol=1e-7)
    np.testing.assert_allclose(Hr, H, atol=1e-10)

    def shape(x):  # a function of the dominant eigenvector, in forward mode
        w, V = np.linalg.eig(_k_eff(x, A))
        v = V[:, np.argmax(w.real)]
        v = v / np.sum(v)
        return np.sum(np.abs(v[:n]) ** 2)

    d = np.linspace(-1.0, 1.0, 2 * n)
    with mg.config(strict=True):
        _, t = mg.jvp(shape, (x,), (d,))
    np.testing.assert_allclose(t, (shape(x + 1e-6 * d) - shape(x - 1e-6 * d)) / 2e-6, rtol=1e-6)
    np.testing.assert_allclose(t, mg.grad(shape)(x) @ d, rtol=1e-9)
    # reading the repeated values: still no second derivative
    with mg.config(strict=True), pytest.raises(mg.NotImplementedTangentError):
        mg.hessian(lambda x: np.sum(np.sort(np.linalg.eigvals(_k_eff(x, A)).real)[:2] ** 2))(x)


def test_second_derivative_of_eig_values_alone_beside_a_repeated_one():
    # (the regress93 tester) the values of np.linalg.eig, its vectors unread, as eigvals' (it refused); oracle:
    # central differences of the gradient
    rng = np.random.default_rng(4809)
    N = rng.standard_normal((4, 4)) + 3 * np.eye(4)
    B = N @ np.diag([5.0, 1.0, 1.0, -2.0]) @ np.linalg.inv(N)
    f = lambda A: np.max(np.linalg.eig(A)[0].real) ** 2
    D = rng.standard_normal((4, 4))
    g = mg.grad(f)
    fd = (g(B + 1e-5 * D) - g(B - 1e-5 * D)) / 2e-5
    with mg.config(strict=True):
        _, hv = mg.jvp(g, (B,), (D,))
        H = mg.jacobian(g, mode="rev")(B)
    np.testing.assert_allclose(hv, fd, atol=1e-6)
    np.testing.assert_allclose(np.einsum("ijkl,kl->ij", H, D), fd, atol=1e-6)


def test_second_derivatives_of_a_complex_pair_beside_a_repeated_unread_zero():
    # Q D(x) Q⁻¹ with eigenvalues x0 ± i x1, x2 and a double zero
    rng = np.random.default_rng(4803)
    Q = rng.standard_normal((5, 5)) + 3 * np.eye(5)

    def f(x):
        D = np.zeros_like(x, shape=(5, 5))
        D[0, 0] = D[1, 1] = x[0]
        D[0, 1] = -x[1]
        D[1, 0] = x[1]
        D[2, 2] = x[2] ** 2
        w = np.linalg.eigvals(Q @ D @ np.linalg.inv(Q))
        top = w[np.argsort(-np.abs(w))[:3]]
        return np.sum(np.real(top ** 3)) + np.max(np.abs(top))

    x = np.array([0.7, 0.4, 1.3])
    check_grads(f, x, modes=("rev",))
    g = mg.grad(f)
    fd = np.array([(g(x + 1e-5 * e) - g(x - 1e-5 * e)) / 2e-5 for e in np.eye(3)])
    with mg.config(strict=True):
        np.testing.assert_allclose(mg.hessian(f)(x), fd, atol=1e-7)
        np.testing.assert_allclose(mg.jacobian(mg.grad(f), mode="rev")(x), fd, atol=1e-7)


def test_vectors_of_tied_values_with_a_zero_cotangent_are_not_unused():
    # V f(w) Vᵀ with f = 0 at a tie sends the vectors a zero cotangent, yet its derivative has a tied
    # block f'(λ) P dA P: the rule dropped it (the hyperelastic tester: [[2.5, 0], [0, 2.5]] where
    # central differences give [[1, 0], [5, 4]], and the Hencky stiffness at F = I lost its shear part)
    A = np.array([[1.0, 2.0], [3.0, 4.0]])

    def f(C):
        w, V = np.linalg.eigh(C)
        return np.sum(A * ((V * w) @ V.T))

    def g(F):
        U, s, Vh = np.linalg.svd(F)
        return np.sum(A * ((U * np.log(s)) @ Vh))

    assert isinstance(mg.grad(f)(np.zeros((2, 2))), mg.NotImplementedTangent)
    assert isinstance(mg.grad(g)(np.eye(2)), mg.NotImplementedTangent)
    def h(a):
        w, V = np.linalg.eig(a)
        return np.sum(A * ((V * w) @ np.linalg.inv(V)).real)

    assert isinstance(mg.grad(h)(np.zeros((2, 2))), mg.NotImplementedTangent)
    # off the tie the same functions are right (central differences)
    C = np.array([[0.3, 0.1], [0.1, -0.2]])
    fd = np.array([(f(C + 1e-6 * e) - f(C - 1e-6 * e)) / 2e-6 for e in np.eye(4).reshape(4, 2, 2)]).reshape(2, 2)
    np.testing.assert_allclose(mg.grad(f)(C), fd, atol=1e-8)

    # the values read beside the vectors: whatever their cotangent's values, the tied block is unseen. A
    # Hencky misfit at F = I with a pure-shear target has gw = 0 and gV = 0 there, and a gradient of -0.2
    # in the shear entries (the newfeat21 tester: mutagrad gave 0); the quadratic energy's gradient there
    # is 0 with the same cotangents: both refuse, and scipy.linalg.logm (a rule, no eigenvectors) gives
    # each one's (central differences)
    import mutagrad.scipy.linalg as msl

    target = np.array([[0.0, 0.1, 0.0], [0.1, 0.0, 0.0], [0.0, 0.0, 0.0]])

    def hencky(F, log):
        C = F.T @ F
        if log is None:
            w, V = np.linalg.eigh(C)
            return 0.5 * (V * np.log(w)) @ V.T
        return 0.5 * log(C)

    misfit = lambda F, log=None: np.sum((hencky(F, log) - target) ** 2)

    def W(F, log=None):
        E = hencky(F, log)
        dev = E - np.trace(E) / 3 * np.eye(3)
        return np.sum(dev * dev) + 1.5 * np.trace(E) ** 2

    for fn in (misfit, W):
        assert isinstance(mg.grad(fn)(np.eye(3)), mg.NotImplementedTangent)
        g = mg.grad(lambda F, fn=fn: fn(F, msl.logm))(np.eye(3))
        fd = np.array([(fn(np.eye(3) + 1e-6 * e) - fn(np.eye(3) - 1e-6 * e)) / 2e-6
                       for e in np.eye(9).reshape(9, 3, 3)]).reshape(3, 3)
        np.testing.assert_allclose(g, fd, atol=1e-8)
    assert isinstance(mg.jacobian(mg.grad(W), mode="rev")(np.eye(3)), mg.NotImplementedTangent)
    # the same from two calls, the values of eigvalsh or svd(compute_uv=False) and the vectors of eigh or svd,
    # in either order: the tied block was dropped, silently (diag(1/6) where central differences give Wt; the
    # svdpolar tester); off the tie the same functions are right
    Wt = np.array([[1.0, 2.0, 0.0], [2.0, -1.0, 3.0], [0.0, 3.0, 0.5]])

    def values_first(F):
        w = np.linalg.eigvalsh(F.T @ F)
        V = np.linalg.eigh(F.T @ F)[1]
        return np.sum(Wt * ((V * np.log(w)) @ V.T)) / 2

    def vectors_first(F):
        V = np.linalg.eigh(F.T @ F)[1]
        w = np.linalg.eigvalsh(F.T @ F)
        return np.sum(Wt * ((V * np.log(w)) @ V.T)) / 2

    def singular(F):
        s = np.linalg.svd(F, compute_uv=False)
        Vt = np.linalg.svd(F)[2]
        return np.sum(Wt * ((Vt.T * np.log(s)) @ Vt))

    def scipy_values(F):  # (mutagrad.scipy.linalg's values with NumPy's vectors)
        w = msl.eigh(F.T @ F, eigvals_only=True)
        V = np.linalg.eigh(F.T @ F)[1]
        return np.sum(Wt * ((V * np.log(w)) @ V.T)) / 2

    for fn in (values_first, vectors_first, singular, scipy_values):
        assert isinstance(mg.grad(fn)(np.eye(3)), mg.NotImplementedTangent)
        F = np.eye(3) + 0.1 * Wt
        fd = np.array([(fn(F + 1e-6 * e) - fn(F - 1e-6 * e)) / 2e-6 for e in np.eye(9).reshape(9, 3, 3)]).reshape(3, 3)
        np.testing.assert_allclose(mg.grad(fn)(F), fd, rtol=1e-6, atol=1e-8)
    # the stiffness at F = I through logm: kappa + 4/3 mu = 1 + 4/3 * 1... by hand for this W (mu = 1,
    # bulk term 1.5 tr(E)**2: kappa = 3): d2W/dF11^2 = 3 + 4/3, d2W/dF12^2 = mu = 1
    K = mg.hessian(lambda F: W(F, msl.logm))(np.eye(3)).reshape(9, 9)
    np.testing.assert_allclose([K[0, 0], K[1, 1]], [3 + 4 / 3, 1.0], rtol=1e-9)
    # eigvalsh's second derivative at a tie: sum(w**2) is sum(A * A) (lower triangle read), whose
    # Hessian reverse over reverse gave I / 2 per diagonal block (the tie's mean) where it is 2 and 4:
    # refused; off the tie it is right (by hand: 2 on the diagonal entries, 4 on the lower one)
    f2 = lambda A: np.sum(np.linalg.eigvalsh(A) ** 2)
    assert isinstance(mg.jacobian(mg.grad(f2), mode="rev")(np.zeros((2, 2))), mg.NotImplementedTangent)
    np.testing.assert_allclose(mg.jacobian(mg.grad(f2), mode="rev")(np.diag([1.0, 2.0])).reshape(4, 4),
                               np.diag([2.0, 0.0, 4.0, 2.0]), atol=1e-12)


def test_nearly_repeated_values_count_as_repeated():
    # a rank-1 3x3 matrix has singular values [14, 1e-15, 0]: the vector derivatives divide by
    # their differences, and the second derivatives came out up to 0.35 where they are 0
    u = np.array([1.0, 2.0, 3.0])
    a = np.outer(u, u)
    m = np.arange(9.0).reshape(3, 3)

    def f(x):
        uu, s, vh = np.linalg.svd(x)
        return np.sum((uu * s) @ vh * m)

    assert isinstance(mg.hessian(f)(a), mg.NotImplementedTangent)
    # eigenvectors of eigenvalues 1e-15 apart: their derivative is not a number worth returning
    w = np.diag([1.0, 1.0 + 1e-15, 2.0])
    assert isinstance(mg.grad(lambda x: np.sum(np.linalg.eigh(x)[1][:, 0] ** 4))(w), mg.NotImplementedTangent)
    # values apart by more than the tolerance keep their derivatives
    check_grads(f, a + np.diag([0.0, 0.5, 1.0]), order=2)


# -- the phase of complex eigen- and singular vectors -----------------------------
# NumPy's LAPACK makes one row of the vectors real (eigh: row 0 with UPLO="L", the last
# with "U"; svd: row 0 of V when m >= n, of U when m < n), so NumPy's vectors are smooth
# functions of the matrix, phase included. Their derivatives are checked on functions that
# depend on the phase, against central differences along a complex direction.


def _phase_cases():
    rng = np.random.default_rng(11)

    def cplx(*s):
        return rng.standard_normal(s) + 1j * rng.standard_normal(s)

    def herm(*s):
        m = cplx(*s)
        return m + np.conj(np.swapaxes(m, -1, -2))

    cases = []
    for uplo in ("L", "U"):
        for n in (2, 4):
            a, d, w = herm(n, n), herm(n, n), cplx(n, n)
            cases.append((f"eigh {uplo} {n}x{n}", lambda t, a=a, d=d, w=w, uplo=uplo:
                          np.sum(np.linalg.eigh(a + t * d, UPLO=uplo)[1] * w).real))
    a, d, w = herm(2, 3, 3), herm(2, 3, 3), cplx(2, 3, 3)
    cases.append(("eigh stacked", lambda t: np.sum(np.linalg.eigh(a + t * d)[1] * w).imag))
    for m, n in ((4, 3), (3, 3), (3, 4), (2, 5)):
        a, d, wu, wv = cplx(m, n), cplx(m, n), cplx(m, min(m, n)), cplx(min(m, n), n)
        cases.append((f"svd {m}x{n}", lambda t, a=a, d=d, wu=wu, wv=wv: np.sum(
            np.linalg.svd(a + t * d, full_matrices=False)[0] * wu).real + np.sum(
            np.linalg.svd(a + t * d, full_matrices=False)[2] * wv).imag))
    a, d, w = cplx(3, 3), cplx(3, 3), cplx(3, 3)
    cases.append(("svd square full", lambda t: np.sum(np.linalg.svd(a + t * d)[2] * w).real))
    a, d, w = herm(3, 3), herm(3, 3), cplx(3, 3)
    cases.append(("svd hermitian", lambda t: np.sum(np.linalg.svd(a + t * d, hermitian=True)[0] * w).real))
    return cases


@pytest.mark.parametrize("name, f", _phase_cases(), ids=[c[0] for c in _phase_cases()])
def test_phase_dependent_functions_of_complex_vectors(name, f):
    t0, h = 0.3, 1e-6
    fd = (f(t0 + h) - f(t0 - h)) / (2 * h)
    g = mg.grad(f)(t0)
    _, j = mg.jvp(f, (t0,), (1.0,))
    np.testing.assert_allclose(g, fd, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(j, g, rtol=1e-10, atol=1e-12)


def test_phase_dependent_second_derivative_of_eigh():
    rng = np.random.default_rng(12)
    m, k = rng.standard_normal((2, 3, 3)) + 1j * rng.standard_normal((2, 3, 3))
    a, b = m + m.conj().T, k + k.conj().T

    def f(t):
        return np.linalg.eigh(a + t[0] * b + t[1] * (b @ b))[1][2, 1].imag

    t0 = np.array([0.3, 0.1])
    g = mg.grad(f)
    # the gradient the differences are taken of is itself checked against differences of f at
    # every point used, so the oracle does not rest on mutagrad
    for t in [t0] + [t0 + s * 1e-5 * e for e in np.eye(2) for s in (1, -1)]:
        fd1 = [(f(t + 1e-6 * e) - f(t - 1e-6 * e)) / 2e-6 for e in np.eye(2)]
        np.testing.assert_allclose(g(t), fd1, rtol=1e-5, atol=1e-7)
    fd = np.array([(g(t0 + 1e-5 * e) - g(t0 - 1e-5 * e)) / 2e-5 for e in np.eye(2)])
    np.testing.assert_allclose(mg.hessian(f)(t0), fd, rtol=1e-5, atol=1e-6)


def test_phase_with_no_real_row_is_not_guessed():
    # a block-diagonal matrix: row 0 of V is zero in two columns, so LAPACK's real row cannot
    # fix their phase. A function that depends on it gets NotImplementedTangent; one that does
    # not (to first order) gets its derivative, checked against central differences.
    A = np.zeros((3, 3), complex)
    A[0, 0], A[1:, 1:] = 5.0, [[1.0, 0.5 + 0.5j], [0.5 - 0.5j, -1.0]]
    D = np.zeros((3, 3), complex)
    D[1:, 1:] = [[0.3, 1j], [-1j, 0.2]]

    def dependent(t):
        return np.linalg.eigh(A + t * D)[1][2, 0].real

    def invariant(t):
        return np.sum(np.abs(np.linalg.eigh(A + t * D)[1]) ** 2 * np.arange(9.0).reshape(3, 3))

    assert isinstance(mg.grad(dependent)(0.3), mg.NotImplementedTangent)
    assert isinstance(mg.jvp(dependent, (0.3,), (1.0,))[1], mg.NotImplementedTangent)
    fd = (invariant(0.3 + 1e-6) - invariant(0.3 - 1e-6)) / 2e-6
    np.testing.assert_allclose(mg.grad(invariant)(0.3), fd, atol=1e-7)


def test_solve_of_stacked_matrices_and_one_vector():
    # NumPy 2: a 1-D b is one vector for every matrix of the stack
    a = R(2, 3, 3) / 2 + 2 * np.eye(3)
    b = R(3)
    check_grads(lambda a, b: np.linalg.solve(a, b), a, b)


def test_det_of_an_empty_matrix_and_slogdet_of_a_singular_one():
    g = mg.grad(np.linalg.det)(np.zeros((0, 0)))  # det of a 0x0 matrix is the constant 1
    assert g.shape == (0, 0)
    assert mg.jvp(np.linalg.det, (np.zeros((0, 0)),), (np.zeros((0, 0)),)) == (1.0, 0.0)
    singular = np.array([[1.0, 2.0], [2.0, 4.0]])
    assert tuple(np.linalg.slogdet(singular)) == (0.0, -np.inf)  # NumPy's value, no error
    assert isinstance(mg.grad(lambda a: np.linalg.slogdet(a)[1])(singular), mg.NotImplementedTangent)
    value, tangent = mg.jvp(lambda a: np.linalg.slogdet(a)[1], (singular,), (np.eye(2),))
    assert value == -np.inf and isinstance(tangent, mg.NotImplementedTangent)
    check_grads(np.linalg.det, singular)  # det itself has a derivative there


EMPTY_DECOMPOSITIONS = {
    "eig values": lambda a: np.linalg.eig(a)[0], "eig vectors": lambda a: np.linalg.eig(a)[1],
    "eigvals": np.linalg.eigvals, "eigh vectors": lambda a: np.linalg.eigh(a)[1],
    "eigvalsh": np.linalg.eigvalsh, "svd U": lambda a: np.linalg.svd(a)[0],
    "svd Vh reduced": lambda a: np.linalg.svd(a, full_matrices=False)[2], "qr R": lambda a: np.linalg.qr(a)[1],
    "cholesky": np.linalg.cholesky,
}


@pytest.mark.parametrize("shape", [(0, 0), (3, 0, 0), (0, 4, 4), (2, 0, 3, 3)])
@pytest.mark.parametrize("name", sorted(EMPTY_DECOMPOSITIONS))
def test_decompositions_of_no_elements(name, shape):
    # the reverse rules' reductions and reshapes failed on zero-size input; a function of
    # no elements has a gradient of no elements (as forward mode and PyTorch give)
    f = EMPTY_DECOMPOSITIONS[name]
    a = np.zeros(shape)
    plain = f(a.copy())
    out, pullback = mg.vjp(f, a.copy())
    np.testing.assert_array_equal(out, plain)
    (g,) = pullback(np.zeros(np.shape(out), np.result_type(out)))
    assert np.shape(g) == shape
    _, t = mg.jvp(f, (a.copy(),), (np.zeros(shape),))
    assert np.shape(t) == np.shape(plain)


@pytest.mark.parametrize("order", ["fro", "nuc", "f"])
def test_string_norm_orders_of_vectors_raise_numpys_error(order):
    with pytest.raises(ValueError, match=f"Invalid norm order '{order}' for vectors"):
        mg.grad(lambda x: np.linalg.norm(x, ord=order))(np.ones(3))


def test_slogdet_of_a_stack_with_a_singular_matrix_the_loss_does_not_use():
    A = np.stack([[[1.0, 2.0], [2.0, 4.0]], [[2.0, 1.0], [0.5, 3.0]]])
    check_grads(lambda A: np.linalg.slogdet(A)[1][1], A, modes=("rev",))
    assert isinstance(mg.grad(lambda A: np.sum(np.linalg.slogdet(A)[1]))(A), mg.NotImplementedTangent)


def test_phase_at_a_complex_matrix_with_zero_imaginary_part():
    # there LAPACK's vectors are real, with another sign than at every nearby complex matrix:
    # a phase-dependent derivative exists along real directions only. The pullback refuses a
    # cotangent that sees the phase; phase-invariant functions are differentiable.
    rng = np.random.default_rng(13)
    m = rng.standard_normal((4, 4))
    a = (m + m.T).astype(complex)
    n = rng.standard_normal((4, 4))
    real_dir = (n + n.T).astype(complex)
    w = rng.standard_normal((4, 4)) + 1j * rng.standard_normal((4, 4))

    def dependent(a):
        return np.sum(np.linalg.eigh(a)[1] * w).real

    def invariant(a):
        return np.sum(np.abs(np.linalg.eigh(a)[1]) ** 2 * w.real)

    def svd_dependent(a):
        return np.sum(np.linalg.svd(a)[2] * w).imag

    assert isinstance(mg.grad(dependent)(a), mg.NotImplementedTangent)
    assert isinstance(mg.grad(svd_dependent)(a), mg.NotImplementedTangent)
    h = 1e-6
    fd = (dependent(a + h * real_dir) - dependent(a - h * real_dir)) / (2 * h)
    np.testing.assert_allclose(mg.jvp(dependent, (a,), (real_dir,))[1], fd, rtol=1e-6, atol=1e-8)
    check_grads(invariant, a, modes=("rev",))
    # the dependent function jumps along a complex direction (no derivative: the difference
    # quotient grows as 1/h); forward mode cannot tell it from an invariant one, so it refuses
    # every complex direction there, where it gave the real branch's derivative
    imag_dir = 1j * (n - n.T)
    jump = abs(dependent(a + 1e-9 * imag_dir) - dependent(a))
    assert jump > 1e-3
    for f in (dependent, invariant, svd_dependent):
        assert isinstance(mg.jvp(f, (a,), (imag_dir,))[1], mg.NotImplementedTangent)
    fd = (invariant(a + h * real_dir) - invariant(a - h * real_dir)) / (2 * h)
    np.testing.assert_allclose(mg.jvp(invariant, (a,), (real_dir,))[1], fd, rtol=1e-6, atol=1e-8)


def test_hessian_at_zero_imaginary_part_is_reverse_over_reverse():
    # (quantum: a Hamiltonian whose p*Y term starts at p = 0; forward over reverse refuses the phase
    # there, and the message named only grad/vjp). The fix it names: reverse over reverse, which
    # matches central differences of central differences of the plain function, and which hessian
    # of a real scalar function now takes itself.
    xp, yp, zp = np.array([[0, 1], [1, 0]], complex), np.array([[0, -1j], [1j, 0]]), np.diag([1, -1]).astype(complex)
    i2 = np.eye(2)

    def f(p):
        h = (p[0] * np.kron(zp, zp) + p[1] * np.kron(xp, i2) + p[2] * np.kron(yp, i2) + 0.3 * np.kron(i2, xp)
             + 0.2 * np.kron(zp, i2))
        e, v = np.linalg.eigh(h)
        return e[0] + np.abs(v[1, 0]) ** 2

    p = np.array([1.0, 0.6, 0.0])
    h = mg.jacobian(mg.jacobian(f), mode="fwd")(p)
    assert isinstance(h, mg.NotImplementedTangent) and 'mg.jacobian(mg.grad(f), mode="rev")' in h.message
    eps, eye = 1e-4, np.eye(3)

    def fd_grad(q):
        return np.array([(f(q + eps * e) - f(q - eps * e)) / (2 * eps) for e in eye])

    fd = np.array([(fd_grad(p + eps * e) - fd_grad(p - eps * e)) / (2 * eps) for e in eye])
    np.testing.assert_allclose(mg.jacobian(mg.grad(f), mode="rev")(p), fd, atol=1e-5)
    np.testing.assert_allclose(mg.hessian(f)(p), fd, atol=1e-5)


def _check_null_vector_of_svd(A, W):
    m, n = np.shape(A)[-2:]

    def vec(A):
        U, _, Vh = np.linalg.svd(A)
        return Vh[..., -1, :] if m < n else U[..., :, -1]

    check_grads(lambda A: np.sum(vec(A) * W[..., 0, :]), A, order=2)  # the sign LAPACK picked
    check_grads(lambda A: np.sum(vec(A)[..., :, None] * vec(A)[..., None, :] * W), A, order=2)
    check_grads(lambda A: np.sum(np.linalg.svd(A)[0] * W[..., :m, :m]) + np.sum(np.linalg.svd(A)[2] * W[..., :n, :n]),
                A, order=2)


def test_the_one_extra_singular_vector_is_a_null_vector():
    # svd(full_matrices=True) of an m x (m + 1) real matrix of full rank: its last right singular
    # vector spans the null space, unique up to its sign (a minimal DLT homography, an 8-point
    # essential matrix); likewise U's last column of an (n + 1) x n matrix and qr(mode="complete")'s
    # last column of Q. Oracle: central differences (check_grads), both modes, second order.
    rng = np.random.default_rng(11)
    for shape in ((3, 4), (4, 3), (2, 2, 3), (2, 3, 2), (1, 2)):
        _check_null_vector_of_svd(rng.standard_normal(shape), rng.standard_normal(shape[:-2] + (max(shape),) * 2))
    for shape in ((4, 3), (2, 3, 2), (2, 1)):
        W = rng.standard_normal(shape[:-2] + (shape[-2], shape[-2]))
        check_grads(lambda A, W=W: np.sum(np.linalg.qr(A, mode="complete")[0] * W), rng.standard_normal(shape),
                    order=2)
    # a function of the null vector only needs no distinct singular values (the forward tester's
    # 2 x 3 matrix with singular values (2, 2)); central differences
    Q, _ = np.linalg.qr(rng.standard_normal((3, 3)))
    c = rng.standard_normal(3)
    check_grads(lambda A: (np.linalg.svd(A)[2][-1] @ c) ** 2, 2.0 * Q[:2], modes=("rev",))
    # more than one extra vector, a complex matrix, a rank-deficient one: not unique, refused
    wide = rng.standard_normal((2, 4))
    low = np.outer(rng.standard_normal(3), rng.standard_normal(4))
    cplx = rng.standard_normal((3, 4)) + 1j * rng.standard_normal((3, 4))
    for A in (wide, low):
        for mode in ("rev", "fwd"):
            J = mg.jacobian(lambda A: np.linalg.svd(A)[2][-1], mode=mode)(A)
            assert isinstance(J, mg.NotImplementedTangent), J
    assert isinstance(mg.grad(lambda A: np.sum(np.abs(np.linalg.svd(A)[2][-1]) ** 2 * np.arange(4.0)))(cplx),
                      mg.NotImplementedTangent)
    assert isinstance(mg.grad(lambda A: np.sum(np.linalg.qr(A, mode="complete")[0]))(rng.standard_normal((5, 3))),
                      mg.NotImplementedTangent)


def test_a_stack_with_one_real_member_is_judged_matrix_by_matrix():
    # the refusal at a complex matrix with zero imaginary part (above) concerns that matrix
    # only: its stack mates keep their phase-dependent derivatives, and a tangent that stays
    # real at it is fine (a band structure's k = 0 point; it refused the whole stack)
    rng = np.random.default_rng(5)
    m = rng.standard_normal((3, 3, 3)) + 1j * rng.standard_normal((3, 3, 3))
    m[1] = m[1].real
    a = m + np.conj(np.swapaxes(m, -1, -2))
    n = rng.standard_normal((3, 3, 3)) + 1j * rng.standard_normal((3, 3, 3))
    n[1] = n[1].real
    d = n + np.conj(np.swapaxes(n, -1, -2))  # real at the real member
    w = rng.standard_normal((3, 3)) + 1j * rng.standard_normal((3, 3))

    def dependent(t):  # the phase of members 0 and 2, |v|² of member 1
        V = np.linalg.eigh(a + t * d)[1]
        return np.sum(V[0] * w).real + np.sum(np.abs(V[1]) ** 2 * w.real) + np.sum(V[2] * w).imag

    def svd_dependent(t):
        U, _, Vh = np.linalg.svd(a + t * d)
        return np.sum(Vh[0] * w).real + np.sum(np.abs(U[1]) ** 2 * w.real) + np.sum(U[2] * w).imag

    t0, h = 0.2, 1e-6
    for f in (dependent, svd_dependent):
        fd = (f(t0 + h) - f(t0 - h)) / (2 * h)
        np.testing.assert_allclose(mg.grad(f)(t0), fd, rtol=1e-6, atol=1e-8)
        np.testing.assert_allclose(mg.jvp(f, (t0,), (1.0,))[1], fd, rtol=1e-6, atol=1e-8)

    # the real member's own phase has no derivative along every direction: the reverse pass
    # refuses it (strict mode raises), and grad, with one real direction d, takes it from forward
    # mode, where the tangent stays real at the real member (vs central differences)
    def real_member_phase(t):
        return np.sum(np.linalg.eigh(a + t * d)[1][1] * w).imag

    with mg.config(strict=True), pytest.raises(mg.NotImplementedTangentError):
        mg.grad(real_member_phase)(0.0)
    fd = (real_member_phase(h) - real_member_phase(-h)) / (2 * h)
    np.testing.assert_allclose(mg.grad(real_member_phase)(0.0), fd, rtol=1e-6)
    big = np.zeros(65)  # (beyond the entries forward mode computes again: the refusal stays)
    assert isinstance(mg.grad(lambda z: real_member_phase(z[0] + np.sum(z[1:]) * 0.0))(big),
                      mg.NotImplementedTangent)
    # and a tangent leaving the reals at the real member is refused in forward mode
    d2 = d.copy()
    d2[1] = d2[1] + 1j * (n[0] - n[0].T).imag
    assert isinstance(mg.jvp(lambda t: np.sum(np.abs(np.linalg.eigh(a + t * d2)[1]) ** 2 * w.real), (0.0,),
                             (1.0,))[1], mg.NotImplementedTangent)


@pytest.mark.parametrize("fn", [np.linalg.norm, lambda x: np.linalg.norm(x.reshape(3, 1)),
                                lambda x: np.linalg.norm(x + 0j), lambda x: np.hypot(x[0], x[1]) + x[2],
                                lambda x: np.sum(np.hypot(x, 0.0 * x))])
def test_norm_at_zero_is_zero_in_both_modes(fn):
    # no derivative at the zero vector: both modes give 0 there (central differences give 0, as
    # does sqrt(sum(x**2)) and |x| at 0), not NaN in one mode and 0 in the other
    x = np.zeros(3)
    want = np.array([(fn(x + 1e-6 * e) - fn(x - 1e-6 * e)) / 2e-6 for e in np.eye(3)])
    np.testing.assert_allclose(mg.grad(fn)(x), want, atol=1e-12)
    v = np.array([0.3, -1.2, 0.5])
    np.testing.assert_allclose(mg.jvp(fn, (x,), (v,))[1], want @ v)


def test_forward_jacobian_of_a_complex_input_passes_a_missing_derivative_on():
    # full_matrices=True of a non-square matrix: the extra vectors are not unique; both modes of
    # jacobian return the NotImplementedTangent (forward mode combined the x and iy columns of
    # a complex input and crashed on it)
    rng = np.random.default_rng(3)
    m = rng.standard_normal((3, 4)) + 1j * rng.standard_normal((3, 4))

    def f(m):
        return np.sum(np.abs(np.linalg.svd(m)[2]) ** 2 * np.arange(16.0).reshape(4, 4))

    for mode in ("rev", "fwd"):
        assert isinstance(mg.jacobian(f, mode=mode)(m), mg.NotImplementedTangent)


def test_sign_times_exp_of_slogdet_at_a_singular_matrix_is_not_zero():
    # s * exp(logabsdet) is det, whose derivative at this rank-2 matrix is its cofactor matrix
    # (central differences: 4 at [0, 0]); the cotangent of logabsdet is exp(-inf) = 0, a
    # computed zero, and the pullback took it for an unused logabsdet: a gradient of zeros
    A = np.array([[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [1.0, 0.0, 1.0]])

    def f(a):
        s, logabs = np.linalg.slogdet(a)
        return s * np.exp(logabs)

    h = 1e-6
    E = np.zeros((3, 3))
    E[0, 0] = h
    assert (f(A + E) - f(A - E)) / (2 * h) == pytest.approx(4.0, rel=1e-6)
    assert isinstance(mg.grad(f)(A.copy()), mg.NotImplementedTangent)
    with mg.config(strict=True), pytest.raises(mg.NotImplementedTangentError, match="slogdet"):
        mg.grad(f)(A.copy())
    assert isinstance(mg.jvp(f, (A.copy(),), (np.eye(3),))[1], mg.NotImplementedTangent)


def test_slogdet_of_a_matrix_singular_to_working_precision():
    # rank 2 in exact arithmetic; LU leaves a pivot of 1e-16, so inv does not raise: log|det| is
    # rounding (-inf exactly), and sign·exp(logabsdet) got a wrong Hessian from the cancellation of
    # terms of size cond(A). Refused as at an exactly singular matrix; det has its derivatives
    a = np.outer([1.0, 2.0, 3.0], [1.0, 0.0, 1.0]) + np.outer([0.0, 1.0, 1.0], [2.0, 1.0, 0.0])
    def via_slogdet(x):
        sign, logabsdet = np.linalg.slogdet(x.reshape(3, 3))
        return sign * np.exp(logabsdet)

    assert isinstance(mg.hessian(via_slogdet)(a.ravel()), mg.NotImplementedTangent)
    assert isinstance(mg.grad(via_slogdet)(a.ravel()), mg.NotImplementedTangent)
    # det's own rule: its Hessian (d²det/dA_ij dA_kl, the signed 1x1 minors) against finite differences
    det = lambda x: np.linalg.det(x.reshape(3, 3))
    h = mg.hessian(det)(a.ravel())
    g = mg.grad(det)
    fd = np.array([(g(a.ravel() + 1e-6 * e) - g(a.ravel() - 1e-6 * e)) / 2e-6 for e in np.eye(9)])
    np.testing.assert_allclose(h, fd, atol=1e-6)


@pytest.mark.parametrize("gap", [0.0, 1e-13], ids=["repeated", "nearly"])
def test_eigh_vector_of_a_distinct_value_beside_a_repeated_pair(gap):
    # v₃'s derivative sums over the other vectors, and over the cluster {λ₁ = λ₂} that sum,
    # P / (λ₃ - λc), does not depend on the basis chosen in it: it exists (JAX gives it too)
    q, _ = np.linalg.qr(np.random.default_rng(1).standard_normal((4, 4)))
    a = q @ np.diag([1.0, 1.0 + gap, 3.0, 4.0]) @ q.T
    c = np.arange(4.0)
    f = lambda a: np.sum(np.linalg.eigh(a)[1][:, 3] ** 2 * c)  # (sign-invariant)
    g = mg.grad(f)(a)
    e = np.eye(16).reshape(16, 4, 4)
    fd = np.array([(f(a + 1e-6 * d) - f(a - 1e-6 * d)) / 2e-6 for d in e]).reshape(4, 4)
    np.testing.assert_allclose(g, fd, atol=1e-8)
    # a function of a vector of the cluster has none
    assert isinstance(mg.grad(lambda a: np.sum(np.linalg.eigh(a)[1][:, 0] ** 2 * c))(a), mg.NotImplementedTangent)


def _two_blocks(p):
    """A 4x4 symmetric matrix with a repeated eigenvalue (2, twice: a symmetric structure's pair of
    modes) beside the block of p (the fem tester)."""
    K = np.zeros_like(p, shape=(4, 4))
    K[0, 0] = K[1, 1] = 2.0
    K[2, 2] = 5.0 + p[0]
    K[3, 3] = 7.0
    K[2, 3] = K[3, 2] = p[1]
    return K


@pytest.mark.parametrize("read", [
    lambda w, V: V[3, 2] + w[3],                       # an element of a distinct value's vector and a value
    lambda w, V: np.sum(V[:, 2:] ** 2 * np.arange(4.0)[:, None]) * w[3],   # a block of them, nonlinear
    lambda w, V: V.T[3] @ np.arange(4.0) + np.sum(w ** 2),                  # through a transposed view
    lambda w, V: np.linalg.norm(V[2:, 2:] - 0.1) + w[2],                    # the block the pair leaves alone
])
def test_eigh_vectors_of_distinct_values_beside_an_unread_repeated_pair(read):
    # the pair's vectors are read by no operation: they get no cotangent at all, so the values'
    # cotangent (not a symbolic zero here) hides no derivative of theirs; it was refused
    p = np.array([0.3, 0.4])
    f = lambda p: read(*np.linalg.eigh(_two_blocks(p)))
    check_grads(f, p, modes=("rev",))
    with mg.config(strict=True):
        np.testing.assert_allclose(mg.grad(f)(p), numerical_grad(f, (p,), (0,))[0], rtol=1e-6)
    np.testing.assert_allclose(mg.jacobian(f, mode="rev")(p), numerical_grad(f, (p,), (0,))[0], rtol=1e-6)
    # scipy.linalg.eigh with a driver whose signs are stable, and the generalized problem
    msl = pytest.importorskip("mutagrad.scipy.linalg")
    for h in (lambda p: read(*msl.eigh(_two_blocks(p), driver="evd")),
              lambda p: read(*msl.eigh(_two_blocks(p), 2.0 * np.eye(4)))):
        np.testing.assert_allclose(mg.grad(h)(p), numerical_grad(h, (p,), (0,))[0], rtol=1e-6)


_DISTINCT_READS = [
    lambda w, V: V[3, 2] + w[3],
    lambda w, V: np.sum(V[:, 2:] ** 2 * np.arange(4.0)[:, None]) * w[3],
    lambda w, V: V.T[3] @ np.arange(4.0) + np.sum(w ** 2),
]


@pytest.mark.parametrize("read", _DISTINCT_READS)
@pytest.mark.parametrize("which", ["numpy", "scipy evd", "scipy generalized"])
def test_eigh_forward_keeps_the_tangents_of_vectors_of_distinct_values_beside_a_tie(read, which):
    # forward mode poisoned every vector at a repeated pair; only the pair's columns have no tangent (the
    # batchedlinalg tester). Oracles: central differences along the direction, and reverse mode
    msl = pytest.importorskip("mutagrad.scipy.linalg")
    eig = {"numpy": np.linalg.eigh, "scipy evd": lambda K: msl.eigh(K, driver="evd"),
           "scipy generalized": lambda K: msl.eigh(K, 2.0 * np.eye(4))}[which]
    f = lambda p: read(*eig(_two_blocks(p)))
    p, d = np.array([0.3, 0.4]), np.array([0.7, -1.3])
    with mg.config(strict=True):
        _, t = mg.jvp(f, (p,), (d,))
        g = mg.grad(f)(p)
    fd = (f(p + 1e-6 * d) - f(p - 1e-6 * d)) / 2e-6
    np.testing.assert_allclose(t, fd, rtol=1e-6)
    np.testing.assert_allclose(t, g @ d, rtol=1e-10)
    # a vector of the pair itself: no tangent, said so
    with mg.config(strict=True), pytest.raises(mg.NotImplementedTangentError, match="repeated value"):
        mg.jvp(lambda p: np.sum(eig(_two_blocks(p))[1][:, 0] ** 3), (p,), (d,))


def test_eigh_forward_of_a_stack_with_one_tied_member():
    # the batchedlinalg tester: member 1 has a repeated value, the function reads member 0's vectors only
    rng = np.random.default_rng(4801)
    m = rng.standard_normal((4, 4))
    S = np.stack([m @ m.T + np.eye(4), np.diag([1.0, 2.0, 2.0, 5.0])])
    f = lambda S: np.sum(np.linalg.eigh(S)[1][0] ** 3) + np.sum(np.linalg.eigh(S)[1][1][:, 3] ** 2)
    v = rng.standard_normal(S.shape)
    v = v + np.swapaxes(v, -1, -2)
    with mg.config(strict=True):
        _, t = mg.jvp(f, (S,), (v,))
        g = mg.grad(f)(S)
    fd = (f(S + 1e-6 * v) - f(S - 1e-6 * v)) / 2e-6
    np.testing.assert_allclose(t, fd, rtol=1e-6)
    np.testing.assert_allclose(t, np.sum(g * v), rtol=1e-10)


@pytest.mark.parametrize("shape", [(4, 4), (6, 4), (4, 6), (2, 5, 4)], ids=["square", "tall", "wide", "stack"])
def test_svd_forward_keeps_the_vectors_of_distinct_values_beside_a_repeated_pair(shape):
    # forward mode refused every singular vector at a repeated pair; only the pair's columns have none now
    # (the statmech tester's TRG). Oracles: central differences along the direction, and reverse mode
    rng = np.random.default_rng(4804)
    *batch, m, n = shape
    k = min(m, n)
    U, _ = np.linalg.qr(rng.standard_normal((*batch, m, k)))
    V, _ = np.linalg.qr(rng.standard_normal((*batch, n, k)))
    A = U @ (np.array([3.0, 2.0, 2.0, 0.7])[..., :, None] * np.swapaxes(V, -1, -2))
    if batch:
        A[0] = rng.standard_normal((m, n))  # (one member without a tie)
    c, d = rng.standard_normal((m, n)), rng.standard_normal(A.shape)

    def f(A):  # sign-invariant functions of the vectors of the distinct values 3 and 0.7
        u, s, vh = np.linalg.svd(A, full_matrices=False)
        return np.sum((u[..., :, 0, None] * vh[..., None, 0, :] * c) ** 2) + np.sum(u[..., :, 3] ** 4) + np.sum(s)

    with mg.config(strict=True):
        _, t = mg.jvp(f, (A,), (d,))
        g = mg.grad(f)(A)
    np.testing.assert_allclose(t, (f(A + 1e-6 * d) - f(A - 1e-6 * d)) / 2e-6, rtol=1e-6)
    np.testing.assert_allclose(t, np.sum(g * d), rtol=1e-10)
    with mg.config(strict=True), pytest.raises(mg.NotImplementedTangentError, match="repeated"):
        mg.jvp(lambda A: np.sum(np.linalg.svd(A, full_matrices=False)[2][..., 1, :] ** 4), (A,), (d,))


def test_eigh_vectors_of_a_whole_repeated_group_are_refused_and_the_complement_is_named():
    # (the radar tester) MUSIC reads the noise subspace En = V[:, :m-2] of 6 equal eigenvalues through En Enᴴ only,
    # a smooth function; but its cotangent cannot be told from one of a function that is not (the regress93
    # tester's mode tracking by MAC, trace((V_ref.T @ V) ** 2), discontinuous at the tie: its cotangent 2V passes
    # a first-order basis-invariance test too, and accepting it gave 0): both are refused, and the message names
    # the complement I - Es Esᴴ, which is differentiated (oracle: central differences)
    m, k = 8, 2 * np.pi
    thetas = np.deg2rad(np.linspace(-80.5, 79.5, 41))
    x0 = 0.5 * np.arange(m) + 0.03 * np.random.default_rng(4805).standard_normal(m)

    def spectrum(x, complement):
        A = np.exp(1j * k * np.outer(x, np.sin(np.deg2rad([10.2, 22.3]))))
        _, V = np.linalg.eigh(A @ A.conj().T + 0.01 * np.eye(m))
        sv = np.exp(1j * k * np.outer(np.sin(thetas), x))
        if complement:
            Es = V[:, m - 2:]
            Pn = np.eye(m) - Es @ Es.conj().T
            return np.log(np.sum(1.0 / np.real(np.einsum("ti,ij,tj->t", sv.conj(), Pn, sv))))
        return np.log(np.sum(1.0 / np.sum(np.abs(sv.conj() @ V[:, :m - 2]) ** 2, axis=1)))

    g = mg.grad(spectrum)(x0, False)
    assert isinstance(g, mg.NotImplementedTangent) and "I - Es @ Es.conj().T" in g.message
    np.testing.assert_allclose(mg.grad(spectrum)(x0, True), numerical_grad(spectrum, (x0, True), (0,))[0],
                               rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(spectrum(x0, True), spectrum(x0, False), rtol=1e-10)

    q, _ = np.linalg.qr(np.random.default_rng(4806).standard_normal((4, 4)))
    K0 = q @ np.diag([1.0, 2.0, 2.0, 5.0]) @ q.T
    V_ref = np.linalg.eigh(K0)[1]
    mac = lambda K: np.trace((V_ref.T @ np.linalg.eigh(K)[1]) ** 2)
    msl = pytest.importorskip("mutagrad.scipy.linalg")
    mac_scipy = lambda K: np.trace((V_ref.T @ msl.eigh(K, driver="evd")[1]) ** 2)
    for f in (mac, mac_scipy):
        assert isinstance(mg.grad(f)(K0), mg.NotImplementedTangent)


def test_forward_poison_of_tied_columns_follows_elementwise_operations():
    # (the regress93 tester) the poison of a tied member's columns spread to the whole array at the first
    # elementwise operation (V ** 3, V * turn in mutagrad.scipy.linalg.eigh's subset path), refusing reads of the
    # distinct values' vectors after it. Oracles: central differences along the direction, reverse mode
    rng = np.random.default_rng(4807)
    m = rng.standard_normal((4, 4))
    q, _ = np.linalg.qr(rng.standard_normal((4, 4)))
    S = np.stack([m @ m.T + np.eye(4), q @ np.diag([1.0, 2.0, 2.0, 5.0]) @ q.T])  # (member 1: a tie)
    d = rng.standard_normal(S.shape)
    d = d + np.swapaxes(d, -1, -2)
    def in_place(S):  # (the partial poison carried by a write too: regress94)
        V = np.linalg.eigh(S)[1]
        V *= 2.0
        return np.sum(V[1][:, [0, 3]] ** 2 * np.arange(4.0)[:, None])

    for f in (lambda S: np.sum((np.linalg.eigh(S)[1] ** 3)[0]),
              lambda S: np.sum(np.cos(np.linalg.eigh(S)[1] * np.arange(4.0))[1][:, [0, 3]]),  # (even: sign-free)
              in_place, lambda S: np.sum(np.where(np.arange(4)[:, None] > 1, np.linalg.eigh(S)[1], 0.0)[1][:, 3] ** 2),
              lambda S: np.sum(np.linalg.eigh(S)[1].copy()[1][:, 3] ** 3 * np.arange(4.0))):
        with mg.config(strict=True):
            _, t = mg.jvp(f, (S,), (d,))
        np.testing.assert_allclose(t, (f(S + 1e-6 * d) - f(S - 1e-6 * d)) / 2e-6, rtol=1e-6)
        np.testing.assert_allclose(t, np.sum(mg.grad(f)(S) * d), rtol=1e-10)
    with mg.config(strict=True), pytest.raises(mg.NotImplementedTangentError):
        mg.jvp(lambda S: np.sum((np.linalg.eigh(S)[1] ** 3)[1]), (S,), (d,))

    # a subset of scipy.linalg.eigh's whose first value ties with one outside it: the other's vector
    msl = pytest.importorskip("mutagrad.scipy.linalg")
    q, _ = np.linalg.qr(rng.standard_normal((4, 4)))
    A0 = q @ np.diag([1.0, 1.0, 2.0, 3.0]) @ q.T
    A0 = (A0 + A0.T) / 2
    D = rng.standard_normal((4, 4))
    D = D + D.T
    sub = lambda A: np.sum(np.outer(*[msl.eigh(A, subset_by_index=[1, 2], driver="evx")[1][:, 1]] * 2)
                           * np.arange(16.0).reshape(4, 4))
    with mg.config(strict=True):
        _, t = mg.jvp(sub, (A0,), (D,))
    np.testing.assert_allclose(t, (sub(A0 + 1e-6 * D) - sub(A0 - 1e-6 * D)) / 2e-6, rtol=1e-6)


@pytest.mark.parametrize("shape", [(4, 3), (3, 4), (2, 4, 3)])
def test_svd_full_matrices_forward_beside_a_repeated_value_and_the_null_vector(shape):
    # (the regress93 tester) a ValueError from concatenating the null vector's tangent to a partly poisoned one
    rng = np.random.default_rng(4808)
    *batch, m, n = shape
    k = min(m, n)
    U, _ = np.linalg.qr(rng.standard_normal((*batch, m, k)))
    V, _ = np.linalg.qr(rng.standard_normal((*batch, n, k)))
    A = U @ (np.array([2.0, 2.0, 1.0])[..., :, None] * np.swapaxes(V, -1, -2))
    d = rng.standard_normal(A.shape)
    values = lambda A: np.sum(np.linalg.svd(A)[1] ** 2)
    distinct = lambda A: np.sum(np.linalg.svd(A)[0][..., :, 2] ** 4) + np.sum(np.linalg.svd(A)[2][..., 2, :] ** 4)
    for f in (values, distinct):
        with mg.config(strict=True):
            _, t = mg.jvp(f, (A,), (d,))
        np.testing.assert_allclose(t, (f(A + 1e-6 * d) - f(A - 1e-6 * d)) / 2e-6, rtol=1e-6)


def test_eigh_vectors_gathered_by_an_argsort_read_only_where_the_copies_are():
    # w[idx], V[:, idx] with idx = argsort(w)[::-1] (the materials tester's principal direction) copies every
    # column: only the columns whose copies are read count as read (gathers followed a few deep)
    p = np.array([0.3, 0.4])

    def principal(p):
        w, V = np.linalg.eigh(_two_blocks(p))
        idx = np.argsort(w)[::-1]
        w, V = w[idx], V[:, idx]
        return w[0] + V[2, 0] ** 2 + np.sum(V[[1, 3]][:, [0, 1]] ** 2)  # (columns 3 and 2 of the original)

    np.testing.assert_allclose(mg.grad(principal)(p), numerical_grad(principal, (p,), (0,))[0], rtol=1e-6)

    def tied_copy(p):
        w, V = np.linalg.eigh(_two_blocks(p))
        V = V[:, np.argsort(w)[::-1]]
        return w[3] + V[2, 0] ** 2 + np.sum(V[:, 3] * 0.0)  # (a copy of a tied column, read through a zero)

    g = mg.grad(tied_copy)(p)
    assert isinstance(g, mg.NotImplementedTangent) and "repeated values" in g.message


def test_eigh_vectors_after_an_in_place_step_on_all_of_them_are_read_where_their_results_are():
    # a sign convention on every mode shape, V *= np.sign(V[0]), then only a distinct value's mode read: the
    # in-place step's result, written over V, is read only in that column, and so is V (it counted as read
    # everywhere, and the gradient was refused: the eigdegen tester)
    p = np.array([0.3, 0.4])

    def f(p):
        w, V = np.linalg.eigh(_two_blocks(p))
        V *= np.sign(V[0] + 1e-300)
        return w[3] + (np.arange(1.0, 5.0) @ V[:, 2]) ** 2

    np.testing.assert_allclose(mg.grad(f)(p), numerical_grad(f, (p,), (0,))[0], rtol=1e-6)

    def tied_read(p):  # the same step, then a tied column read through a zero: still refused
        w, V = np.linalg.eigh(_two_blocks(p))
        V *= np.sign(V[0] + 1e-300)
        return w[3] + (np.arange(1.0, 5.0) @ V[:, 2]) ** 2 + V[0, 1] * 0.0

    g = mg.grad(tied_read)(p)
    assert isinstance(g, mg.NotImplementedTangent) and "repeated values" in g.message


def test_eigh_tied_values_and_a_distinct_vector_read_element_by_element():
    # (the vibration tester) a ring of six springs: values 10, 60, 60, 160, 160, 210. Two tied values and a distinct
    # mode's elements, read by scalar arithmetic (a run of element operations, which counted as reading all of V:
    # refused), against central differences; a tied vector read the same way is still refused
    n = 6

    def stiffness(k):
        K = np.zeros_like(k, shape=(n, n))
        for e in range(n):
            i, j = e, (e + 1) % n
            K[i, i] += k[e]
            K[j, j] += k[e]
            K[i, j] -= k[e]
            K[j, i] -= k[e]
        K[np.diag_indices(n)] += 10.0
        return K

    def f(k):
        w, V = np.linalg.eigh(stiffness(k))
        return w[1] + w[3] + np.sign(V[1, 0]) * V[2, 0] + V[4, 5] * V[3, 5]

    k = np.full(n, 50.0)
    np.testing.assert_allclose(mg.grad(f)(k.copy()), numerical_grad(f, (k,), (0,))[0], rtol=1e-6, atol=1e-9)

    def tied(k):
        w, V = np.linalg.eigh(stiffness(k))
        return w[1] + w[3] + np.sign(V[1, 0]) * V[2, 0] + V[2, 1] * 0.0

    g = mg.grad(tied)(k.copy())
    assert isinstance(g, mg.NotImplementedTangent) and "repeated values" in g.message


@pytest.mark.parametrize("body", [
    lambda w, V: np.sum((w[:2] - 1.0) * V[0, :2] ** 2),
    lambda w, V: np.sum((w[:2] - 1.0) * V[:, :2] ** 2 * np.array([[1.0], [0.0], [0.0]])),
    lambda w, V: np.sum((w[:2] - 1.0) * V[0, [0, 1]] ** 2),
    lambda w, V: np.sum((w - 1.0) * V[0] ** 2 * np.array([1.0, 1.0, 0.0])),
    lambda w, V: (w[0] - 1.0) * V[0, 0] ** 2 + (w[1] - 1.0) * V[0, 1] ** 2,
], ids=["slice", "block", "fancy", "row", "elements"])
@pytest.mark.parametrize("strict", [False, True])
def test_eigh_tied_vectors_read_through_a_factor_that_is_zero_at_the_tie_are_refused(body, strict):
    # (regress81) (w - 1) * V ** 2 over a tied pair at w = 1 is [(C - I) P]_00 of the pair's projector P: smooth, 0.3
    # by central differences, but a product with the factor w - 1, 0 at the tie, counted as no read of the vectors
    # (the exemption of a kink's value), so the gradient was the values' alone, -0.05, silently (in strict mode
    # element by element too); the vectors are read there, and refused
    B, D = np.diag([1.0, 1.0, 2.0]), np.array([[0.3, 1.0, 0.2], [1.0, -0.4, 0.5], [0.2, 0.5, 0.1]])

    def f(p):
        return body(*np.linalg.eigh(B + p[0] * D))

    h = 1e-6
    assert abs((f(np.array([h])) - f(np.array([-h]))) / (2 * h) - 0.3) < 1e-5  # (what the gradient would be)
    with mg.config(strict=strict):
        if strict:
            with pytest.raises(mg.NotImplementedTangentError, match="repeated values"):
                mg.grad(f)(np.zeros(1))
        else:
            g = mg.grad(f)(np.zeros(1))
            assert isinstance(g, mg.NotImplementedTangent) and "repeated values" in g.message


def test_a_zero_singular_values_second_derivative_is_refused_in_reverse_over_reverse_too():
    # (regress85) norm(x[None], 2) ** 2 is x @ x (Hessian 2 I); at x = 0 the 1 x 3 matrix's one singular value is 0,
    # whose vectors have no derivative: mg.hessian refused, reverse over reverse gave [[2, 0, 0], 0, 0] (LAPACK's
    # basis) without a word
    for f in (lambda x: np.linalg.norm(x[None, :], 2) ** 2, lambda x: np.linalg.norm(x[:, None], 2) ** 2,
              lambda x: np.linalg.svd(x[None], compute_uv=False)[0] ** 2):
        for h in (mg.hessian(f), mg.jacobian(mg.grad(f))):
            assert isinstance(h(np.zeros(3)), mg.NotImplementedTangent)
        np.testing.assert_allclose(mg.jacobian(mg.grad(f))(np.array([0.3, -0.2, 0.5])), 2 * np.eye(3), atol=1e-12)


def test_eigh_tied_vector_read_with_a_factor_zero_at_the_point_alone_is_refused_without_the_values():
    # (regress84) first-order degenerate perturbation theory written out, v @ (H - H0) @ v with v a vector of the
    # tied pair of H0 = diag(1, 1, 2), at H = H0: its cotangent (H - H0) v is 0 there, and no value is read; the
    # gradient came out v v^T for LAPACK's basis (central differences: 0.5 at (0, 0) and (1, 1)); refused now,
    # and the distinct vector's own form still has its derivative (against central differences)
    H0 = np.diag([1.0, 1.0, 2.0])

    def tied(H):
        v = np.linalg.eigh(H)[1][:, 1]
        return v @ (H - H0) @ v

    g = mg.grad(tied)(H0.copy())
    assert isinstance(g, mg.NotImplementedTangent) and "repeated values" in g.message
    B = np.array([[0.3, 1.0, 0.2], [1.0, -0.4, 0.5], [0.2, 0.5, 0.1]])

    def distinct(p):
        v = np.linalg.eigh(H0 + p[0] * B)[1][:, 2]
        return v @ B @ v * p[0] + v @ np.array([1.0, 2.0, 3.0]) ** 2

    p = np.array([0.0])
    np.testing.assert_allclose(mg.grad(distinct)(p), numerical_grad(distinct, (p,), (0,))[0], rtol=1e-6, atol=1e-9)


@pytest.mark.parametrize("read", [
    lambda w, V: V[3, 2] + V[0, 1] * 0.0 + w[3],       # a vector of the pair, read (its cotangent: a zero)
    lambda w, V: V[3, 2] + np.sum(V * 0.0) + w[3],     # all of them, read
    lambda w, V: V[3, 2] + np.sum(V[:, :2] @ np.diag([0.0, 0.0]) @ V[:, :2].T) + w[3],  # V f(w) Vᵀ, f = 0
    lambda w, V: V[3, 2] + sum(V[i, 1] * 0.0 for i in range(4)) + w[3],   # element by element
])
def test_eigh_vectors_of_a_repeated_pair_read_with_zero_cotangents_are_still_refused(read):
    # a read of the pair's vectors whose cotangent is zero in value may hide divided differences
    # (V f(w) Vᵀ with f = 0 at the tie): refused, as before, whatever the rest reads
    p = np.array([0.3, 0.4])
    g = mg.grad(lambda p: read(*np.linalg.eigh(_two_blocks(p))))(p)
    assert isinstance(g, mg.NotImplementedTangent) and "repeated values" in g.message


def test_values_and_vectors_of_two_calls_meeting_at_a_repeated_value_refuse():
    # V diag(log w) Vᵀ with V from eigh of one matrix and w from another routine or matrix with the same
    # spectrum (a Hencky strain as eigvalsh(F Fᵀ) beside eigh(Fᵀ F); eigvals; a permuted matrix): log 1 = 0
    # at the tie hides the tied block from V's cotangent; it came out silently wrong (the regress57
    # tester), and refuses now as for two calls on one matrix; the same functions off the tie match
    # central differences
    P = np.eye(3)[[2, 0, 1]]
    C = np.diag([1.0, 1.0, 2.0])
    G = np.array([[0.3, 0.1, -0.2], [0.1, 0.5, 0.4], [-0.2, 0.4, 0.7]])

    def hencky(F):
        w = np.linalg.eigvalsh(F @ F.T)
        V = np.linalg.eigh(F.T @ F)[1]
        return np.sum(G * (V @ np.diag(np.log(w)) @ V.T))

    def with_eigvals(a):
        w = np.sort(np.linalg.eigvals(a).real)
        V = np.linalg.eigh(a)[1]
        return np.sum(G * (V @ np.diag(np.log(w)) @ V.T))

    def permuted(a):
        w = np.linalg.eigvalsh(P @ a @ P.T)
        V = np.linalg.eigh(a)[1]
        return np.sum(G * (V @ np.diag(np.log(w)) @ V.T))

    for f, x in ((hencky, P @ np.diag([1.0, 1.0, np.sqrt(2.0)])), (with_eigvals, C), (permuted, C)):
        g = mg.grad(f)(x)
        assert isinstance(g, mg.NotImplementedTangent) and "another" in g.message, (f.__name__, g)
        off = x + np.diag([0.0, 0.2, 0.0])  # (off the tie)
        np.testing.assert_allclose(mg.grad(f)(off), numerical_grad(f, (off,), (0,))[0], atol=1e-7)


def test_svd_vectors_of_distinct_values_beside_an_unread_repeated_pair():
    # singular values (3, 1, 1, 0.5): a function of the values and of the first singular pair, whose
    # vectors no operation reads for the repeated 1s, is differentiated (it was refused where the values
    # were read too); read through a zero, the pair's vectors still refuse
    q1, _ = np.linalg.qr(np.random.default_rng(3).standard_normal((5, 5)))
    q2, _ = np.linalg.qr(np.random.default_rng(4).standard_normal((4, 4)))
    a = q1[:, :4] @ np.diag([3.0, 1.0, 1.0, 0.5]) @ q2.T
    def f(a):
        U, S, Vh = np.linalg.svd(a, full_matrices=False)
        return S[0] * np.sum(U[:, 0] ** 2 * np.arange(5.0)) + Vh[0, 1] ** 2 + S[3]

    np.testing.assert_allclose(mg.grad(f)(a), numerical_grad(f, (a,), (0,))[0], atol=1e-7)
    def zero_read(a):
        U, S, _ = np.linalg.svd(a, full_matrices=False)
        return S[0] * np.sum(U[:, 0] ** 2) + np.sum(U[:, 1] * 0.0)

    g = mg.grad(zero_read)(a)
    assert isinstance(g, mg.NotImplementedTangent) and "repeated values" in g.message


def test_eigh_vector_of_an_unread_pair_in_a_vjp_with_a_traced_cotangent_is_refused():
    # a plain cotangent of a vjp's output is the caller's number: zero on the pair, exact
    p = np.array([0.3, 0.4])
    E = np.zeros((4, 4))
    E[3, 2] = 1.0
    _, pb = mg.vjp(lambda p: np.linalg.eigh(_two_blocks(p)), p)
    both = lambda p: np.linalg.eigh(_two_blocks(p))[1][3, 2] + np.linalg.eigh(_two_blocks(p))[0][3]
    np.testing.assert_allclose(pb((np.eye(4)[3], E))[0], numerical_grad(both, (p,), (0,))[0], rtol=1e-6)
    # one traced by an outer differentiation counts as a read of all of V: at c = 0 its value is zero
    # on the pair, and its derivative along M, which is not, has none (1 / (λ1 - λ2))
    M = np.ones((4, 4))

    def along(c):
        _, pb = mg.vjp(lambda p: np.linalg.eigh(_two_blocks(p)), p)
        return np.sum(pb((np.zeros(4), c * M))[0])

    with pytest.raises(mg.NotImplementedTangentError, match="repeated values"):
        mg.grad(along)(0.0)


def _with_singular_values(m, n, s, complex_=False, seed=0):
    rng = np.random.default_rng(seed)
    u = rng.standard_normal((m, m)) + (1j * rng.standard_normal((m, m)) if complex_ else 0)
    v = rng.standard_normal((n, n)) + (1j * rng.standard_normal((n, n)) if complex_ else 0)
    U, V = np.linalg.qr(u)[0], np.linalg.qr(v)[0]
    r = min(m, n)
    return U[:, :r] @ np.diag(s[:r]) @ V[:, :r].conj().T


@pytest.mark.parametrize("shape,cut", [((8, 3), 0.05), ((8, 3), 1e-11), ((3, 6), 0.05), ((4, 4), 0.02)])
@pytest.mark.parametrize("complex_", [False, True])
def test_pinv_and_lstsq_cutting_off_a_nonzero_singular_value(shape, cut, complex_):
    # rcond/rtol drops a singular value that is not zero: the derivative of the truncated
    # pseudo-inverse A -> A_k+ (the kept vectors turn under dA by terms of the value dropped),
    # against central differences of NumPy's own functions (the cutoff far from every value)
    A = _with_singular_values(*shape, [3.0, 1.0, 0.6, cut][:min(shape) - 1] + [cut], complex_)
    rc = cut if cut > 1e-6 else 1e-5  # (the cutoff rc * 3: between the value dropped and those kept)
    C = np.random.default_rng(1).standard_normal(shape[::-1])
    b = np.random.default_rng(2).standard_normal(shape[0])
    check_grads(lambda A: np.sum(np.abs(np.linalg.pinv(A, rcond=rc) - C) ** 2), A, modes=("fwd", "rev"))
    check_grads(lambda A: np.sum(np.abs(np.linalg.pinv(A, rtol=rc) - C) ** 2), A, modes=("fwd", "rev"))
    check_grads(lambda A, b: np.sum(np.abs(np.linalg.lstsq(A, b, rcond=rc)[0] - C[:, 0]) ** 2), A, b,
                modes=("fwd", "rev"))


def test_truncated_hermitian_pinv_polyfit_and_higher_orders():
    S = _with_singular_values(4, 4, [3.0, 1.0, 0.2, 0.02])
    S = S + S.T
    W = np.random.default_rng(3).standard_normal((4, 4))
    check_grads(lambda S: np.sum(np.linalg.pinv(S, rtol=0.05, hermitian=True) * W), S, modes=("fwd", "rev"))
    t, y = np.linspace(0, 1, 10), np.sin(3 * np.linspace(0, 1, 10))
    with warnings.catch_warnings():  # (NumPy's RankWarning: the fit is truncated, as meant)
        warnings.simplefilter("ignore", np.exceptions.RankWarning)
        check_grads(lambda y: np.polyfit(t, y, 6, rcond=1e-3)[0], y, modes=("fwd", "rev"))
    # a second derivative of the truncated function: not given (a NotImplementedTangent)
    A = _with_singular_values(5, 3, [3.0, 1.0, 0.05])
    with mg.config(strict=True), pytest.raises(mg.DifferentiationError, match="truncated pseudo-inverse"):
        mg.hessian(lambda A: np.sum(np.linalg.pinv(A, rcond=0.1) ** 2))(A)
    rank1 = np.outer([1.0, 2.0, -1.0], [0.5, 1.5])  # (a rank-deficient matrix: the zero value is cut off)
    for f in (lambda A: np.sum(np.linalg.pinv(A, rcond=1e-3) * W[:2, :3]),
              lambda A: np.sum(np.linalg.lstsq(A, np.array([1.0, 0.5, 2.0]), rcond=1e-3)[0] ** 2)):
        with mg.config(strict=True), pytest.raises(mg.DifferentiationError, match="truncated pseudo-inverse"):
            mg.jvp(mg.grad(f), (rank1,), (np.ones_like(rank1),))


def test_the_extra_vectors_message_names_the_reduced_factorization():
    # the full factorizations' Hessians where the extra vectors are not read: the squared Frobenius norm's, 2 I
    # (sum of the squared singular values; of R's squared entries), as from the reduced factorizations
    A = np.random.default_rng(2).standard_normal((3, 5))
    B = np.random.default_rng(3).standard_normal((5, 3))
    for full in (True, False):
        H = mg.hessian(lambda A, full=full: np.sum(np.linalg.svd(A, full_matrices=full)[1] ** 2))(A)
        np.testing.assert_allclose(H.reshape(15, 15), 2 * np.eye(15), atol=1e-9)
        H = mg.hessian(lambda B, full=full: np.sum(np.linalg.qr(B, mode="complete" if full else "reduced")[1] ** 2))(B)
        np.testing.assert_allclose(H.reshape(15, 15), 2 * np.eye(15), atol=1e-9)
    # where they are read, the message says what to call
    H = mg.hessian(lambda A: np.sum(np.linalg.svd(A)[2][3:] ** 2 * np.arange(5.0)))(A)
    assert isinstance(H, mg.NotImplementedTangent) and "full_matrices=False" in H.message
    H = mg.hessian(lambda B: np.sum(np.linalg.qr(B, mode="complete")[0][:, 3:] ** 2 * np.arange(5.0)[:, None]))(B)
    assert isinstance(H, mg.NotImplementedTangent) and "mode='reduced'" in H.message


def _fd_jacobian(f, a, h=1e-6):
    return np.array([(f(a + h * e) - f(a - h * e)) / (2 * h) for e in np.eye(a.size).reshape((a.size,) + a.shape)])


def test_qr_of_a_square_matrix_of_rank_n_minus_1():
    # the third column is the sum of the others (R's last diagonal entry is rounding, 4e-16): Q's
    # last column is the complement of the others and R's last column their coefficients, both
    # smooth; the derivative reads R's leading block only (it cancelled two terms of size 1e16)
    a = np.array([[2.0, 1.0, 3.0], [1.0, 1.0, 2.0], [0.5, -1.0, -0.5]])
    w = np.arange(18.0).reshape(2, 3, 3) / 10

    def f(x):
        q, r = np.linalg.qr(x)
        return np.sum(w[0] * q) + np.sum(w[1] * r)

    fd = _fd_jacobian(f, a).reshape(3, 3)
    np.testing.assert_allclose(mg.grad(f)(a), fd, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(mg.jacobian(f, mode="fwd")(a), fd, rtol=1e-6, atol=1e-7)
    # a stack: the rank-deficient matrix beside a regular one
    b = np.stack([a, a + np.eye(3)])
    np.testing.assert_allclose(mg.grad(lambda x: f(x[0]) + f(x[1]))(b)[0], fd, rtol=1e-6, atol=1e-7)


def test_qr_of_a_matrix_of_rank_below_n_minus_1_has_no_derivative():
    # a zero column before the last: the columns of Q beyond the rank are any orthonormal pair
    a = np.array([[1.0, 0.0, 2.0], [2.0, 0.0, 1.0], [3.0, 0.0, 1.0]])
    g = mg.grad(lambda x: np.sum(np.linalg.qr(x)[0][:, 2]))(a)
    assert isinstance(g, mg.NotImplementedTangent) and "lower rank" in g.message
    _, t = mg.jvp(lambda x: np.linalg.qr(x)[1], (a,), (np.ones((3, 3)),))
    assert isinstance(t, mg.NotImplementedTangent)


def test_det_hessian_at_a_matrix_singular_to_working_precision():
    # rank 3 in exact arithmetic, sigma_min ~ 1e-16: det(A) A⁻¹ multiplied sizes 1e-16 and 1e16,
    # whose derivatives cancelled wrongly (a Hessian entry -2.0 for -0.962); det is a polynomial, so
    # second-order central differences with a large step are exact up to rounding
    rng = np.random.default_rng(5)
    a = rng.standard_normal((4, 3)) @ rng.standard_normal((3, 4))
    h, e = 1e-3, np.eye(16).reshape(16, 4, 4)
    d = np.linalg.det
    fd = np.array([[(d(a + h * p + h * q) - d(a + h * p - h * q) - d(a - h * p + h * q) + d(a - h * p - h * q))
                    / (4 * h * h) for q in e] for p in e])
    np.testing.assert_allclose(np.reshape(mg.hessian(d)(a), (16, 16)), fd, atol=1e-8)
    np.testing.assert_allclose(np.reshape(mg.jacobian(mg.grad(d), mode="rev")(a), (16, 16)), fd, atol=1e-8)
    # in a stack beside an orthogonal matrix (repeated singular values: its own path)
    p4 = np.eye(4)[[1, 0, 2, 3]]
    fd_p = np.array([[(d(p4 + h * p + h * q) - d(p4 + h * p - h * q) - d(p4 - h * p + h * q) + d(p4 - h * p - h * q))
                      / (4 * h * h) for q in e] for p in e])
    hs = np.reshape(mg.hessian(lambda x: np.sum(d(x)))(np.stack([a, p4])), (32, 32))
    np.testing.assert_allclose(hs[:16, :16], fd, atol=1e-8)
    np.testing.assert_allclose(hs[16:, 16:], fd_p, atol=1e-8)


@pytest.mark.parametrize("n, rank", [(4, 2), (5, 3), (5, 4)])
def test_det_hessian_at_low_rank_matrices(n, rank):
    # singular to working precision with two zero singular values (rank n - 2): the SVD's vectors
    # have no derivative there, the cofactors' polynomial has; det is a polynomial, so second-order
    # central differences with a large step are exact up to rounding
    rng = np.random.default_rng(n + rank)
    a = rng.standard_normal((n, rank)) @ rng.standard_normal((rank, n))
    h, e, d = 1e-3, np.eye(n * n).reshape(n * n, n, n), np.linalg.det
    fd = np.array([[(d(a + h * p + h * q) - d(a + h * p - h * q) - d(a - h * p + h * q) + d(a - h * p - h * q))
                    / (4 * h * h) for q in e] for p in e])
    np.testing.assert_allclose(np.reshape(mg.hessian(d)(a), (n * n, n * n)), fd, atol=1e-7)


def test_svd_null_vector_of_a_stack_with_a_lower_rank_member():
    # member 1 has rank 2 (its extra singular vectors are a plane): a function of member 0's null
    # vector is differentiated (it was refused for the whole stack); one of member 1's is not
    rng = np.random.default_rng(2)
    s = rng.standard_normal((2, 3, 4))
    s[1, 2] = s[1, 0] + s[1, 1]
    w = np.array([0.3, -1.0, 0.6, 2.0])

    def f(x):
        return np.linalg.svd(x)[2][0, -1] @ w

    np.testing.assert_allclose(mg.grad(f)(s), _fd_jacobian(f, s).reshape(s.shape), rtol=1e-6, atol=1e-8)
    g = mg.grad(lambda x: np.linalg.svd(x)[2][1, -1] @ w)(s)
    assert isinstance(g, mg.NotImplementedTangent) and "not unique" in g.message


def test_qr_extra_column_of_a_stack_with_a_lower_rank_member():
    # member 1's third column is the sum of the others: its extra columns of Q are a plane; a
    # function of member 0's extra column is differentiated, one of member 1's is not
    rng = np.random.default_rng(2)
    s = rng.standard_normal((2, 4, 3))
    s[1, :, 2] = s[1, :, 0] + s[1, :, 1]
    w = np.array([0.3, -1.0, 0.6, 2.0])

    def f(x):
        return np.linalg.qr(x, mode="complete")[0][0][:, -1] @ w

    np.testing.assert_allclose(mg.grad(f)(s), _fd_jacobian(f, s).reshape(s.shape), rtol=1e-6, atol=1e-8)
    g = mg.grad(lambda x: np.linalg.qr(x, mode="complete")[0][1][:, -1] @ w)(s)
    assert isinstance(g, mg.NotImplementedTangent) and "not unique" in g.message


def test_qr_of_a_matrix_of_rank_n_minus_2_to_rounding_has_no_derivative():
    # R's third diagonal entry is rounding (4e-16): Q's last two columns are any orthonormal pair
    # (the derivative was 1e17, where central differences give O(10) and depend on the step); in a
    # stack, a function of the regular member alone is differentiated
    rr = np.random.default_rng(9)
    a = rr.standard_normal((4, 2)) @ rr.standard_normal((2, 4))
    w = np.arange(16.0).reshape(4, 4)
    g = mg.grad(lambda x: np.sum(w * np.linalg.qr(x)[0]))(a)
    assert isinstance(g, mg.NotImplementedTangent) and "lower rank" in g.message
    _, t = mg.jvp(lambda x: np.linalg.qr(x)[0], (a,), (np.ones((4, 4)),))
    assert isinstance(t, mg.NotImplementedTangent)
    b = rr.standard_normal((4, 4))
    s = np.stack([b, a])

    def f(x):
        return np.sum(w * np.linalg.qr(x)[0][0])

    np.testing.assert_allclose(mg.grad(f)(s), _fd_jacobian(f, s).reshape(s.shape), rtol=1e-6, atol=1e-8)


def test_det_hessian_at_an_ill_conditioned_matrix():
    # smallest singular value 1e-14 (cond ~1e14, below "singular to working precision"): det(A) A⁻¹'s
    # second derivatives lost 3-4 digits; the cofactors' polynomial has none to lose
    rr = np.random.default_rng(104)
    a = rr.standard_normal((5, 4)) @ rr.standard_normal((4, 5)) + 1e-14 * np.random.default_rng(5).standard_normal((5, 5))
    h, e, d = 1e-3, np.eye(25).reshape(25, 5, 5), np.linalg.det
    fd = np.array([[(d(a + h * p + h * q) - d(a + h * p - h * q) - d(a - h * p + h * q) + d(a - h * p - h * q))
                    / (4 * h * h) for q in e] for p in e])
    np.testing.assert_allclose(np.reshape(mg.hessian(d)(a), (25, 25)), fd, atol=1e-7, rtol=1e-6)


@pytest.mark.parametrize("shape, kw", [((0, 3), {"ord": np.inf}), ((3, 0), {"ord": 1}), ((0, 0), {"ord": 2}),
                                       ((0, 3), {"ord": "nuc"}), ((0, 3), {"axis": 0}), ((0,), {"ord": -1})])
def test_norm_of_an_empty_array_is_numpys(shape, kw):
    # NumPy's maxima start at 0 for an empty array (inf for the vector ord=-1): it raised from
    # mutagrad's own reduction
    x = np.zeros(shape)
    with np.errstate(all="ignore"):
        want = np.linalg.norm(x, **kw)
        val, pb = mg.vjp(lambda a: np.linalg.norm(a, **kw), x)
    np.testing.assert_array_equal(val, want)
    assert pb(np.ones_like(want))[0].shape == shape
    with pytest.raises(np.linalg.LinAlgError, match="empty"):
        mg.grad(np.linalg.cond)(np.zeros((0, 0)))


def test_svd_vector_of_a_distinct_singular_value_beside_repeated_ones():
    # singular values (3, 1, 1): u₀ has a derivative (the repeated pair drops out, as eigh's), the
    # vectors of the repeated value have none; in a stack beside the identity (all repeated), a
    # function of the other member alone is differentiated
    rng = np.random.default_rng(1)
    u = np.linalg.qr(rng.standard_normal((4, 4)))[0]
    v = np.linalg.qr(rng.standard_normal((3, 3)))[0]
    a = u[:, :3] @ np.diag([3.0, 1.0, 1.0]) @ v.T

    def f(x):
        return np.sum(np.linalg.svd(x, full_matrices=False)[0][:, 0] ** 3)

    np.testing.assert_allclose(mg.grad(f)(a), _fd_jacobian(f, a).reshape(a.shape), rtol=1e-6, atol=1e-8)
    g = mg.grad(lambda x: np.sum(np.linalg.svd(x, full_matrices=False)[0][:, 1] ** 3))(a)
    assert isinstance(g, mg.NotImplementedTangent)
    s = np.stack([rng.standard_normal((3, 3)), np.eye(3)])

    def h(x):
        return np.sum(np.linalg.svd(x)[0][0] ** 3)

    np.testing.assert_allclose(mg.grad(h)(s), _fd_jacobian(h, s).reshape(s.shape), rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("dtype", [np.float32, np.complex64, np.float64])
def test_norm_order_zero_has_numpys_dtype(dtype):
    # the count of nonzero entries, in the real dtype of x (float32 for float32 and complex64)
    x = np.array([0.5, 0.0, 2.0], dtype=dtype)
    for f in (lambda a: np.linalg.norm(a, 0) * a, lambda a: np.linalg.vector_norm(a, ord=0)):
        want = f(x)
        got = mg.vjp(f, x)[0]
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("dtype", [np.longdouble, np.clongdouble, np.float16, np.float32])
@pytest.mark.parametrize("order", [3, 2.5, -2])
def test_norm_of_general_order_has_numpys_bits(dtype, order):
    # NumPy raises the sum to 1/ord computed in the sum's dtype (1.0 / ord in float64 missed the
    # last bits of a longdouble norm)
    x = np.array([0.3, 1.7, -2.1, 0.9]).astype(dtype)
    for f in (lambda a: np.linalg.norm(a, order), lambda a: np.linalg.vector_norm(a.reshape(2, 2), ord=order, axis=1)):
        want = f(x)
        for got in (mg.vjp(f, x)[0], mg.jvp(f, (x,), (np.ones_like(x),))[0]):
            assert got.dtype == want.dtype and np.array_equal(got, want)  # (exact: longdouble's padding aside)


@pytest.mark.parametrize("case", ["real", "upper", "complex", "stack"])
def test_eigvalsh_second_derivatives_vs_central_differences(case):
    rng = np.random.default_rng(4)
    a = rng.standard_normal((4, 4))
    a = a + a.T
    if case == "complex":
        m = rng.standard_normal((4, 4))
        a = a + 1j * (m - m.T)
    if case == "stack":
        a = np.stack([a, a[::-1, ::-1] * 0.5])
    w = np.array([0.3, -1.0, 2.0, 0.7])
    check_grads(lambda a: np.sum(np.sin(np.linalg.eigvalsh(a, UPLO="U" if case == "upper" else "L")) * w), a,
                order=2)


def _tied_family():
    """S(p) = S0 + Σ p_k B_k with S0 = Q diag(1, 1, 3) Qᵀ: the two lowest values tie at p = 0 and
    split along every direction (the B_k are not multiples of the identity on the eigenspace)."""
    rng = np.random.default_rng(0)
    q = np.linalg.qr(rng.standard_normal((3, 3)))[0]
    s0 = q @ np.diag([1.0, 1.0, 3.0]) @ q.T
    bs = [np.diag([1.0, 0.0, 0.0]), np.diag([0.0, 1.0, 0.0]), np.array([[0.0, 1.0, 0.0], [1.0, 0.0, 0.0], [0.0] * 3])]
    return lambda p: s0 + p[0] * bs[0] + p[1] * bs[1] + p[2] * bs[2]


def _tied_cases():
    msl = pytest.importorskip("mutagrad.scipy.linalg")
    S = _tied_family()
    m = np.diag([1.0, 2.0, 2.5])
    r = np.sqrt(m)  # (A = R S R with B = M: the generalized values are S's, tied)
    return [
        ("eigvalsh", lambda p, k: np.linalg.eigvalsh(S(p))[k]),
        ("eigh", lambda p, k: np.linalg.eigh(S(p))[0][k]),
        ("svd", lambda p, k: np.linalg.svd(S(p))[1][::-1][k]),
        ("svdvals", lambda p, k: np.linalg.svd(S(p), compute_uv=False)[::-1][k]),
        ("norm-2", lambda p, k: np.linalg.norm(S(p) - 4.0 * np.eye(3), 2)),  # (the larger, tied, of 3, 3, 1)
        ("scipy", lambda p, k, e=msl.eigh: e(S(p), eigvals_only=True)[k]),
        ("scipy-vectors", lambda p, k, e=msl.eigh: e(S(p), driver="evd")[0][k]),
        ("scipy-subset", lambda p, k, e=msl.eigh: e(S(p), eigvals_only=True, subset_by_index=(k, k))[0]),
        ("generalized", lambda p, k, e=msl.eigh: e(r @ S(p) @ r, m, eigvals_only=True)[k]),
        ("generalized-subset", lambda p, k, e=msl.eigh: e(r @ S(p) @ r, m, eigvals_only=True,
                                                           subset_by_index=(0, k))[k]),
    ]


@pytest.mark.parametrize("case", range(10))
def test_derivative_of_one_of_tied_values_is_the_mean_over_the_tie(case):
    # at a tie a single value has no derivative; the vector LAPACK returned picked one slope by
    # chance (changing the matrix by 1e-15 changed it by 97%): now the mean over the tied group,
    # basis-invariant, which central differences give; the sum of the pair is unchanged
    name, f = _tied_cases()[case]
    p0 = np.zeros(3)
    for k in (0, 1):
        fk = functools.partial(f, k=k)
        fd = _fd_jacobian(fk, p0)
        np.testing.assert_allclose(mg.grad(fk)(p0), fd, rtol=1e-6, atol=1e-8, err_msg=name)
        np.testing.assert_allclose(mg.jacobian(fk, mode="fwd")(p0), fd, rtol=1e-6, atol=1e-8, err_msg=name)
    # both tied values get the same derivative, half the pair sum's
    g0, g1 = (mg.grad(functools.partial(f, k=k))(p0) for k in (0, 1))
    np.testing.assert_allclose(g0, g1, rtol=1e-12, atol=1e-14)
    # away from the tie, each value's own derivative (the vector's), against differences
    p1 = np.array([0.3, -0.2, 0.1])
    for k in (0, 1):
        fk = functools.partial(f, k=k)
        np.testing.assert_allclose(mg.grad(fk)(p1), _fd_jacobian(fk, p1), rtol=1e-6, atol=1e-8, err_msg=name)


@pytest.mark.parametrize("gap", [1e-9, 1e-10, 1e-11, 1e-13])
def test_values_resolved_by_lapack_are_not_tied(gap):
    # 0 and 1e-10 beside 1: LAPACK resolves them, and the middle value's derivative is its own
    # (1: it is gap + t), not the tie's mean (0.5, which a tolerance of 1e-10 gave)
    def f(t):
        return np.linalg.eigvalsh(np.diag([0.0, gap, 1.0]) + t * np.diag([0.0, 1.0, 0.0]))[1]

    h = gap / 100
    fd = (f(h) - f(-h)) / (2 * h)
    np.testing.assert_allclose([mg.grad(f)(0.0), mg.jvp(f, (0.0,), (1.0,))[1]], [fd, fd], rtol=1e-5)


def test_second_derivative_of_values_at_a_tie_names_the_values_function_and_its_line():
    # log det through eigvalsh at I: the refusal named np.linalg.eigh (which the code never
    # called), the mg.hessian line, and the fix "use only the values" the code already followed
    c = np.array([[0.3, 0.5, 0.1], [0.5, -0.2, 0.4], [0.1, 0.4, 0.7]])

    def logdet(t):
        w = np.linalg.eigvalsh(np.eye(3) + t * c)  # the line named
        return np.sum(np.log(w))

    h = mg.hessian(logdet)(0.0)
    assert isinstance(h, mg.NotImplementedTangent)
    assert h.message.startswith("np.linalg.eigvalsh at repeated values") and "slogdet" in h.message
    assert "w = np.linalg.eigvalsh(np.eye(3) + t * c)" in h.where
    with mg.config(strict=True), pytest.raises(mg.NotImplementedTangentError, match=r"eigvalsh\(np.eye\(3\)"):
        mg.hessian(logdet)(0.0)
    # the form it names: exact, -tr(C²) by hand
    np.testing.assert_allclose(mg.hessian(lambda t: np.linalg.slogdet(np.eye(3) + t * c)[1])(0.0),
                               -np.trace(c @ c), rtol=1e-12)
    s = mg.hessian(lambda t: np.sum(np.log(np.linalg.svd(np.eye(3) + t * c, compute_uv=False))))(0.0)
    assert isinstance(s, mg.NotImplementedTangent) and s.message.startswith("np.linalg.svd(compute_uv=False)")
    # reverse over reverse too (docs/index.md's form of a full Hessian): it named np.linalg.eigh and
    # the mg.jacobian line
    h = mg.jacobian(mg.grad(logdet), mode="rev")(0.0)
    assert isinstance(h, mg.NotImplementedTangent)
    assert h.message.startswith("np.linalg.eigvalsh at repeated values") and "slogdet" in h.message
    assert "w = np.linalg.eigvalsh(np.eye(3) + t * c)" in h.where

    def logsv(t):
        sv = np.linalg.svd(np.eye(3) + t * c, compute_uv=False)  # the line named
        return np.sum(np.log(sv))

    s = mg.jacobian(mg.grad(logsv), mode="rev")(0.0)
    assert isinstance(s, mg.NotImplementedTangent) and s.message.startswith("np.linalg.svd(compute_uv=False)")
    assert "sv = np.linalg.svd(" in s.where
    # off the tie, reverse over reverse is exact: -tr((C (I + tC)^-1)^2) by hand at t = 0.1
    m = np.linalg.inv(np.eye(3) + 0.1 * c) @ c
    np.testing.assert_allclose(mg.jacobian(mg.grad(logdet), mode="rev")(0.1), -np.trace(m @ m), rtol=1e-10)


def _simple_beside_a_tie():
    """M(t) = Q diag(1, 1, 1, 2.5, 4) Qᵀ + t0 E0 + 0.3 t1 E1 + t0 t2 E2: a triple tie at t = 0 that the
    first-order terms split; the two largest values are simple there."""
    rng = np.random.default_rng(11)
    q = np.linalg.qr(rng.standard_normal((5, 5)))[0]
    m0 = q @ np.diag([1.0, 1.0, 1.0, 2.5, 4.0]) @ q.T
    es = [e + e.T for e in rng.standard_normal((3, 5, 5))]
    return lambda t: m0 + t[0] * es[0] + 0.3 * t[1] * es[1] + t[0] * t[2] * es[2]


def _simple_beside_a_tie_cases():
    msl = pytest.importorskip("mutagrad.scipy.linalg")
    M = _simple_beside_a_tie()
    B = lambda t: 2.0 * np.eye(5) + t[1] * np.diag(np.arange(5.0))
    z = np.diag([1.0, 2.0, 1.0, 0.5, 3.0]) * 1j
    return {
        "eigvalsh": lambda t: np.linalg.eigvalsh(M(t))[-1],
        "upper": lambda t: np.linalg.eigvalsh(np.triu(M(t)) + 7 * np.tril(M(t), -1), UPLO="U")[-1],
        "eigh-values": lambda t: np.linalg.eigh(M(t))[0][-1],
        "weights-equal-on-the-tie": lambda t: np.linalg.eigvalsh(M(t)) @ np.array([2.0, 2.0, 2.0, 1.0, 3.0]),
        "reciprocal": lambda t: 1.0 / np.linalg.eigvalsh(M(t))[-1],  # (a traced cotangent, 0 on the tie)
        "two-simple": lambda t: np.linalg.eigvalsh(M(t))[-1] ** 2 + np.sin(np.linalg.eigvalsh(M(t))[3]),
        "complex": lambda t: np.linalg.eigvalsh(M(t) + t[2] * (z - z.T))[-1],
        "stack": lambda t: np.linalg.eigvalsh(np.stack([M(t), M(t[::-1])]))[:, -1] @ np.array([1.0, 2.0]),
        "scipy": lambda t: msl.eigvalsh(M(t))[-1],
        "scipy-evd-values": lambda t: msl.eigh(M(t), driver="evd")[0][-1],
        "scipy-subset": lambda t: 1.0 / msl.eigvalsh(M(t), subset_by_index=[4, 4])[0],
        "generalized": lambda t: 1.0 / msl.eigvalsh(M(t), B(t))[-1],
        "generalized-upper": lambda t: msl.eigvalsh(M(t), B(t), lower=False)[-1],
        "generalized-values": lambda t: msl.eigh(M(t), B(t))[0][-1],
        "generalized-subset": lambda t: msl.eigvalsh(M(t), B(t), subset_by_index=[3, 4])[1],
        # (a traced weight on every value of a subset without the tie: a subset read whole)
        "subset-squares": lambda t: np.sum(msl.eigvalsh(M(t), subset_by_index=[3, 4]) ** 2),
        "generalized-subset-squares": lambda t: np.sum(msl.eigvalsh(M(t), B(t), subset_by_index=[3, 4]) ** 2),
    }


@pytest.mark.parametrize("case", ["eigvalsh", "upper", "eigh-values", "weights-equal-on-the-tie", "reciprocal",
                                  "two-simple", "complex", "stack", "scipy", "scipy-evd-values", "scipy-subset",
                                  "generalized", "generalized-upper", "generalized-values", "generalized-subset",
                                  "subset-squares", "generalized-subset-squares"])
def test_second_derivative_of_simple_values_beside_a_tie(case):
    # the Hessian of a buckling load, the largest generalized eigenvalue, where a geometric stiffness
    # with a null space repeats other values (0): it was refused in every mode (the truss tester);
    # V diag(g) Vᵀ with g equal (or unread) on the tie is a smooth sum of projectors
    f = _simple_beside_a_tie_cases()[case]
    t0 = np.zeros(3)
    want = fd_hessian(f, t0)
    for h in (mg.hessian(f)(t0), mg.jacobian(mg.grad(f), mode="rev")(t0),
              np.stack([mg.jvp(mg.grad(f), (t0,), (e,))[1] for e in np.eye(3)])):
        assert not isinstance(h, mg.NotImplementedTangent), h.message
        np.testing.assert_allclose(h, want, rtol=1e-5, atol=1e-5 * np.abs(want).max())


def _rank_deficient():
    """A(t) = U diag(3, 1, 0, 0) Vᵀ + t0 E0 + 0.3 t1 E1 + t0 t2 E2 (5 x 4): repeated zero singular values at
    t = 0, which the first-order terms split; the two largest are simple."""
    rng = np.random.default_rng(1)
    u, v = np.linalg.qr(rng.standard_normal((5, 5)))[0], np.linalg.qr(rng.standard_normal((4, 4)))[0]
    s = np.zeros((5, 4))
    s[0, 0], s[1, 1] = 3.0, 1.0
    es = rng.standard_normal((3, 5, 4))
    return lambda t: u @ s @ v.T + t[0] * es[0] + 0.3 * t[1] * es[1] + t[0] * t[2] * es[2]


_RD = _rank_deficient()


@pytest.mark.parametrize("f", [
    lambda t: np.linalg.norm(_RD(t), 2),
    lambda t: np.linalg.norm(_RD(t), 2) ** 2,  # (a traced weight: the norm reads the largest value alone, regress73)
    lambda t: np.linalg.svd(_RD(t), compute_uv=False)[0],
    lambda t: np.linalg.svd(_RD(t))[1][0],
    lambda t: np.linalg.svd(_RD(t).T, compute_uv=False)[:2] @ np.array([1.0, 2.0]),  # (wide)
    lambda t: 1.0 / np.linalg.svd(_RD(t) + 1j * t[2] * _RD(t[::-1]), compute_uv=False)[1],  # (complex; traced weight)
    lambda t: np.linalg.svd(np.stack([_RD(t), _RD(t[::-1])]), compute_uv=False)[:, 0] @ np.array([1.0, 2.0]),
], ids=["norm-2", "norm-2-squared", "svdvals", "svd-values", "wide", "complex", "stack"])
def test_second_derivative_of_simple_singular_values_beside_zero_ones(f):
    # the spectral norm of a rank-deficient matrix: repeated zero singular values refused its Hessian in every
    # mode; U diag(g) Vᵀ is the corner of a sum of projectors of the Hermitian dilation [[0, A], [Aᵀ, 0]]
    t0 = np.zeros(3)
    want = fd_hessian(f, t0)
    for h in (mg.hessian(f)(t0), mg.jacobian(mg.grad(f), mode="rev")(t0)):
        assert not isinstance(h, mg.NotImplementedTangent), h.message
        np.testing.assert_allclose(h, want, rtol=1e-5, atol=1e-5 * np.abs(want).max())


def test_second_derivative_of_a_zero_singular_value_stays_refused():
    # the smallest singular value of a rank-deficient matrix is a kink (|x| at 0): no Hessian
    h = mg.hessian(lambda t: np.linalg.svd(_RD(t), compute_uv=False)[3])(np.zeros(3))
    assert isinstance(h, mg.NotImplementedTangent)


@pytest.mark.parametrize("f", [lambda w: np.sum(w[:3] ** 2), lambda w: np.sum(np.log(w)),
                               lambda w: w @ np.array([1.0, 2.0, 2.0, 0.0, 1.0])],
                         ids=["tie-read-traced", "log-det", "weights-differ-on-the-tie"])
def test_second_derivative_of_tied_values_read_stays_refused(f):
    # a traced cotangent read on the tie needs the divided differences of the function of the values
    # there; weights that differ within the tie pick a value of it (no second derivative)
    M = _simple_beside_a_tie()
    h = mg.hessian(lambda t: f(np.linalg.eigvalsh(M(t))))(np.zeros(3))
    assert isinstance(h, mg.NotImplementedTangent) and "repeated values" in h.message


def test_second_derivative_of_eigvals_at_a_tie_names_eigvals_and_its_line():
    # the spectral radius of a block matrix whose other eigenvalues tie at 0 (the stiffchem tester):
    # the refusal named np.linalg.eig's vectors and the mg.hessian / mg.jacobian line
    def rho(lk):
        k = np.exp(lk)
        J = np.zeros_like(k, shape=(4, 4))
        J[0, 0], J[0, 1], J[1, 0], J[1, 1] = -k[0], k[1], k[0], -k[1]
        J[2, 2], J[2, 3], J[3, 2], J[3, 3] = -k[2], k[3], k[2], -k[3]
        return np.max(np.abs(np.linalg.eigvals(J)))  # the line named

    lk = np.log([3.0, 1.0, 2.0, 0.5])
    np.testing.assert_allclose(mg.grad(rho)(lk), [3.0, 1.0, 0.0, 0.0], rtol=1e-12)  # rho = k0 + k1, by hand
    # the tied zeros are not read: the read value's own vectors give the second derivative, diag(k0, k1, 0, 0)
    for h in (mg.hessian(rho)(lk), mg.jacobian(mg.grad(rho), mode="rev")(lk)):
        np.testing.assert_allclose(h, np.diag([3.0, 1.0, 0.0, 0.0]), atol=1e-12)

    def zeros(lk):  # reads the two tied zeros
        k = np.exp(lk)
        J = np.zeros_like(k, shape=(4, 4))
        J[0, 0], J[0, 1], J[1, 0], J[1, 1] = -k[0], k[1], k[0], -k[1]
        J[2, 2], J[2, 3], J[3, 2], J[3, 3] = -k[2], k[3], k[2], -k[3]
        return np.sum(np.sort(np.linalg.eigvals(J).real)[-2:] * np.array([1.0, 2.0]))  # the line named

    for h in (mg.hessian(zeros)(lk), mg.jacobian(mg.grad(zeros), mode="rev")(lk)):
        assert isinstance(h, mg.NotImplementedTangent)
        assert h.message.startswith("np.linalg.eigvals at repeated values"), h.message
        assert "np.sort(np.linalg.eigvals(J).real)" in h.where
    for second in (mg.hessian(zeros), mg.jacobian(mg.grad(zeros), mode="rev")):
        with mg.config(strict=True), pytest.raises(mg.NotImplementedTangentError) as e:
            second(lk)
        assert "np.sort(np.linalg.eigvals(J).real)" in str(e.value) and "eigvals at repeated" in str(e.value)


def _expm_sym_grad(X, W):
    """d/dX of sum(W * V exp(w) Vᵀ) for eigh's input X (lower triangle read), by Daleckii–Krein in
    float64: G = V (L ∘ Vᵀ W V) Vᵀ, L the divided differences of exp; folded onto the triangle."""
    w, V = np.linalg.eigh(X.astype(np.float64))
    e = np.exp(w)
    d = w[:, None] - w[None, :]
    L = np.where(np.abs(d) > 0, (e[:, None] - e[None, :]) / np.where(d == 0, 1.0, d), e[:, None])
    G = V @ (L * (V.T @ W @ V)) @ V.T
    return np.tril(G + G.T, -1) + np.diag(np.diag(G))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_vector_derivatives_near_a_tie_are_refused_where_rounding_dominates_them(dtype):
    # float32 vectors at a relative gap of 3e-6 got a 10 % wrong derivative (the tie test for the vectors
    # was double precision's 1e-10 in every dtype); now they are refused there, and accurate at 3e-4
    rng = np.random.default_rng(0)
    Q, _ = np.linalg.qr(rng.standard_normal((4, 4)))
    W = rng.standard_normal((4, 4))

    def f(X):
        w, V = np.linalg.eigh(X)
        return np.sum(W.astype(X.dtype) * ((V * np.exp(w)) @ V.T))

    for gap, refused in ((1e-3, False), (1e-5, dtype == np.float32), (1e-11, True)):
        X = (Q @ np.diag([1.0, 1.0 + gap, 2.0, 3.0]) @ Q.T).astype(dtype)
        X = np.tril(X) + np.tril(X, -1).T  # (exactly symmetric)
        g = mg.grad(f)(X)
        t = mg.jvp(f, (X,), (np.tril(W).astype(dtype),))[1]
        if refused:
            assert isinstance(g, mg.NotImplementedTangent) and "nearly repeated" in g.message
            assert isinstance(t, mg.NotImplementedTangent)
            continue
        want = _expm_sym_grad(X, W)
        tol = 1e-3 if dtype == np.float32 else 1e-7 if gap < 1e-4 else 1e-10
        np.testing.assert_allclose(g, want, rtol=tol, atol=tol * np.abs(want).max())
        np.testing.assert_allclose(t, np.sum(want * np.tril(W)), rtol=tol)
        assert g.dtype == dtype


def _leslie(p, zeros):
    """A Leslie matrix whose last two age classes do not reproduce: eigenvalue 0 is a 2 x 2 Jordan block."""
    A = zeros((4, 4))
    A[0, 1] = p[0]
    A[1, 0], A[2, 1], A[3, 2] = p[1], p[2], p[3]
    return A


def test_simple_eigenvalues_of_a_matrix_that_is_not_diagonalizable_have_their_gradient():
    # (the IPM tester) the growth rate sqrt(f1 s0) of a Leslie matrix with post-reproductive classes:
    # the defective eigenvalue 0 made every eigenvalue's derivative refused; by hand: [s0, f1, 0, 0] / (2 λ)
    import mutagrad.numpy as mnp

    p = np.array([2.0, 0.5, 0.5, 0.5])
    lam = np.sqrt(p[0] * p[1])
    want = np.array([p[1], p[0], 0.0, 0.0]) / (2 * lam)
    for values in (np.linalg.eigvals, lambda A: np.linalg.eig(A)[0]):
        g = mg.grad(lambda p, values=values: np.max(values(_leslie(p, mnp.zeros)).real))(p)
        np.testing.assert_allclose(g, want, rtol=1e-12, atol=1e-15)
    assert np.max(np.linalg.eigvals(_leslie(p, np.zeros)).real) == pytest.approx(lam, rel=1e-15)
    # a function that reads the defective eigenvalue has no derivative: refused
    def zero_eigenvalue(p):
        w = np.linalg.eigvals(_leslie(p, mnp.zeros)).real
        return w[np.argmin(np.abs(mg.value(w)))] * 3.0

    bad = mg.grad(zero_eigenvalue)(p)
    assert isinstance(bad, mg.NotImplementedTangent) and "Jordan block" in bad.message
    # the sum of squares reads it with a zero cotangent: trace(A²) = 2 f1 s0, by hand [2 s0, 2 f1, 0, 0]
    np.testing.assert_allclose(mg.grad(lambda p: np.sum(np.linalg.eigvals(_leslie(p, mnp.zeros)).real ** 2))(p),
                               [1.0, 4.0, 0.0, 0.0], atol=1e-14)
    def stable_stage(p):  # (a vector of the simple eigenvalue: not implemented, and the message says so)
        w, V = np.linalg.eig(_leslie(p, mnp.zeros))
        v = V[:, np.argmax(mg.value(w).real)].real
        return np.sum(v / np.sum(v) * np.arange(4.0))

    vec = mg.grad(stable_stage)(p)
    assert isinstance(vec, mg.NotImplementedTangent) and "eigenvectors is not implemented" in vec.message
    fwd = mg.jvp(lambda p: np.max(np.linalg.eigvals(_leslie(p, mnp.zeros)).real), (p,), (np.ones(4),))[1]
    assert isinstance(fwd, mg.NotImplementedTangent) and "reverse mode" in fwd.message
    # a dense direction: the gradient w.r.t. the whole matrix is v uᴴ-shaped, u the left eigenvector
    A = _leslie(p, np.zeros)
    gA = mg.grad(lambda A: np.max(np.linalg.eigvals(A).real))(A)
    w, V = np.linalg.eig(A)
    wl, U = np.linalg.eig(A.T)
    k, kl = np.argmax(w.real), np.argmax(wl.real)
    u, v = U[:, kl].real, V[:, k].real
    np.testing.assert_allclose(gA, np.outer(u, v) / (u @ v), rtol=1e-12, atol=1e-14)


def test_eig_near_a_split_jordan_block_refuses_second_derivatives_not_the_first():
    # (the markov tester) eigenvalue 0 of P0 is a Jordan block that rounding splits into ±6.6e-9: its
    # vectors' derivatives divide by that gap, and every second derivative of the stationary vector
    # (which goes through them) came out ~1e7 off. The first, in reverse mode, reads only the simple
    # eigenvalue's vector: by the solve formulation, 4/9 and 32/27 (central differences agree)
    P0 = np.array([[0.5, 0.5, 0.0], [1 / 6, 1 / 6, 2 / 3], [1 / 3, 1 / 3, 1 / 3]])
    d = np.array([[1.0, -1.0, 0.0], [0.0, 0.0, 0.0], [0.0, 0.0, 0.0]])

    def pi0(s):
        w, V = np.linalg.eig((P0 + s * d).T)
        v = V[:, np.argmin(np.abs(mg.value(w) - 1.0))].real
        return v[0] / v.sum()

    def pi0_solve(s):
        A = (P0 + s * d).T - np.eye(3)
        A[-1] = 1.0
        return np.linalg.solve(A, np.array([0.0, 0.0, 1.0]))[0]

    np.testing.assert_allclose(mg.grad(pi0_solve)(0.0), 4 / 9, rtol=1e-12)
    np.testing.assert_allclose(mg.grad(mg.grad(pi0_solve))(0.0), 32 / 27, rtol=1e-12)
    np.testing.assert_allclose(mg.grad(pi0)(0.0), 4 / 9, rtol=1e-7)  # (the eigenbasis's conditioning)
    for second in (lambda: mg.grad(mg.grad(pi0))(0.0), lambda: mg.hessian(pi0)(0.0),
                   lambda: mg.jvp(lambda t: mg.jvp(pi0, (t,), (1.0,))[1], (0.0,), (1.0,))[1]):
        assert isinstance(second(), mg.NotImplementedTangent)


def test_eig_vector_of_a_distinct_eigenvalue_beside_a_repeated_one_in_reverse_mode():
    # a diagonalizable matrix with eigenvalue 2 twice and 5 once: the vector of 5 has its derivative
    # (the repeated pair's terms belong to their own vectors), by central differences
    Q = np.array([[1.0, 0.2, -0.3], [0.1, 1.0, 0.4], [-0.2, 0.3, 1.0]])
    A0 = Q @ np.diag([2.0, 2.0, 5.0]) @ np.linalg.inv(Q)
    D = np.array([[0.3, -0.1, 0.2], [0.05, 0.1, -0.4], [0.2, 0.1, -0.3]])

    def top(t):
        w, V = np.linalg.eig(A0 + t * D)
        v = V[:, np.argmax(mg.value(w).real)].real
        return v[1] / v[0]

    h = 1e-6
    fd = (top(h) - top(-h)) / (2 * h)
    np.testing.assert_allclose(mg.grad(top)(0.0), fd, rtol=1e-6)


def _near_tie_matrix(gap):
    Q, _ = np.linalg.qr(np.array([[1.0, 2, 0.5], [0.3, -1, 2], [1, 1, 1]]))
    return (Q @ np.diag([1.0, 1.0 + gap, 2.5]) @ Q.T).ravel()


def _expm_by_eigh(a):
    S = a.reshape(3, 3)
    w, V = np.linalg.eigh((S + S.T) / 2)
    return np.sum((V * np.exp(w)) @ V.T)


def _frobenius_by_svd(a):
    U, s, Vt = np.linalg.svd(a.reshape(3, 3))
    return np.sum(((U * s) @ Vt) ** 2)


def test_second_derivatives_through_vectors_at_nearly_repeated_values_are_refused():
    # the vectors' derivative divides by the values' gap, its derivative by the gap's square: at a
    # relative gap of 4e-9 the eigh-based Hessian was 2.4x off (the gradient, 1.5e-8), now refused;
    # at 4e-3 it is the expm-based one's (msl.expm's own rule) and the svd one is 2I, by hand
    msl = pytest.importorskip("mutagrad.scipy.linalg")
    ref = lambda a: np.sum(msl.expm((a.reshape(3, 3) + a.reshape(3, 3).T) / 2))
    a = _near_tie_matrix(1e-8)
    h = 1e-6  # (the gradient is accurate there: central differences of the plain function)
    fd = np.array([(_expm_by_eigh(a + h * e) - _expm_by_eigh(a - h * e)) / (2 * h) for e in np.eye(9)])
    np.testing.assert_allclose(mg.grad(_expm_by_eigh)(a.copy()), fd, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(mg.grad(_expm_by_eigh)(a.copy()), mg.grad(ref)(a.copy()), rtol=1e-6)
    for f in (_expm_by_eigh, _frobenius_by_svd):
        H = mg.hessian(f)(a.copy())
        assert isinstance(H, mg.NotImplementedTangent) and "second derivative through its vectors" in H.message
    a = _near_tie_matrix(1e-2)
    H = mg.hessian(_expm_by_eigh)(a.copy())
    h = 1e-4  # (second central differences of the plain function: to about 1e-6 here)
    E = np.eye(9) * h
    fd = np.array([[(_expm_by_eigh(a + E[i] + E[j]) - _expm_by_eigh(a + E[i] - E[j]) - _expm_by_eigh(a - E[i] + E[j])
                     + _expm_by_eigh(a - E[i] - E[j])) / (4 * h * h) for j in range(9)] for i in range(9)])
    np.testing.assert_allclose(H, fd, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(H, mg.hessian(ref)(a.copy()), rtol=1e-7, atol=1e-9)  # (and expm's own rule)
    np.testing.assert_allclose(mg.hessian(_frobenius_by_svd)(a.copy()), 2 * np.eye(9), atol=1e-8)


def test_a_mixed_partial_through_vectors_at_a_near_tie_is_a_first_derivative():
    # the matrix is an argument the outer jacobian does not differentiate: nothing second order goes
    # through the vectors (it was refused); d/dc of grad_a(c f(a)) is grad f(a)
    a = _near_tie_matrix(1e-8)

    def f(a):
        w, V = np.linalg.eigh(a.reshape(3, 3))
        return np.sum((V * w ** 3) @ V.T)

    got = mg.jacobian(mg.grad(lambda a, c: c * f(a), argnums=0), argnums=1)(a.copy(), 2.0)
    h = 1e-6  # (the first derivative of f, by central differences of the plain function)
    fd = np.array([(f(a + h * e) - f(a - h * e)) / (2 * h) for e in np.eye(9)])
    np.testing.assert_allclose(got, fd, rtol=1e-6, atol=1e-7)
    with pytest.raises(mg.NotImplementedTangentError, match="second derivative through its vectors"):
        mg.grad(lambda x: mg.jvp(_expm_by_eigh, (x,), (np.ones(9),))[1])(a.copy())


@pytest.mark.parametrize("order", ["C", "F", "A"])
@pytest.mark.parametrize("spec", ["ij->", "ij->i", "ij->j", "ij,kj->ik"])
def test_einsum_sums_in_the_order_asked(spec, order):
    # (tensors: NumPy's einsum sums in the order= asked, which changes the last bits; mutagrad summed in its
    # default order and only laid the result out as asked). Oracle: NumPy's own call, bit for bit.
    r = np.random.default_rng(3)
    for x in (r.standard_normal((20, 30)), np.asfortranarray(r.standard_normal((20, 30)))):
        ops = (x,) if "," not in spec else (x, r.standard_normal((25, 30)))
        f = lambda a: np.einsum(spec, a, *ops[1:], order=order)  # noqa: B023  (called within the iteration)
        want = f(x.copy(order="K"))
        got = mg.vjp(f, x.copy(order="K"))[0]
        assert np.array_equal(got, want)
        assert np.array_equal(mg.jvp(f, (x.copy(order="K"),), (np.ones_like(x),))[0], want)
        o_plain, o_traced = np.zeros(np.shape(want)), np.zeros(np.shape(want))
        np.einsum(spec, x, *ops[1:], order=order, out=o_plain)
        mg.grad(lambda a, o: np.sum(np.einsum(spec, a, *ops[1:], order=order, out=o)), argnums=(0, 1))(  # noqa: B023
            x.copy(order="K"), o_traced)
        assert np.array_equal(o_traced, o_plain)


def test_einsum_order_with_optimize_and_dtype_and_views():
    # (regress36: order= with optimize=, and a redundant dtype= with a strided operand, still differed in
    # the last bits; a transposition with order= is a view of its operand in NumPy, and was a copy).
    # Oracle: NumPy's own call, bit for bit, and its writes through the view.
    r = np.random.default_rng(5)
    a = np.asfortranarray(r.standard_normal((17, 23)))
    for optimize in (True, "greedy", "optimal"):
        f = lambda a: np.einsum("ij->", a, order="C", optimize=optimize)  # noqa: B023
        assert mg.value_and_grad(f)(a.copy(order="K"))[0] == f(a)
    s = r.standard_normal((26, 58))[::2, ::2]
    b = np.asfortranarray(r.standard_normal((29, 11)))
    g = lambda s: np.einsum("ij,jk->ik", s, b, dtype=np.float64)
    assert np.array_equal(mg.vjp(g, s)[0], g(s))
    c0 = np.arange(12.0).reshape(3, 4)
    for spec, order in (("ij->ji", "C"), ("ij->ji", "F"), ("ij", "F")):
        def h(c):
            t = np.einsum(spec, c, order=order)  # noqa: B023
            t[0, 0] = 100.0
            return np.sum(c * c)

        c1, c2 = c0.copy(), c0.copy()
        assert mg.value_and_grad(h)(c2)[0] == h(c1) and np.array_equal(c1, c2)


def test_a_zero_singular_value_whose_vectors_are_not_unique_gets_zero():
    # (found while extending forward mode to rank-deficient SVDs) the zero singular value of a 5 x 3 matrix of rank
    # 2 is a cone, |t| |P dA v|: its derivative came from the left null vector LAPACK returned, one of a
    # 3-dimensional space (0.78, -0.2 or 0.65 for one direction in three bases); now 0, central differences'
    rng = np.random.default_rng(4706)
    A = rng.standard_normal((5, 2)) @ rng.standard_normal((2, 3))
    T = rng.standard_normal((5, 3))
    smallest = lambda A: np.linalg.svd(A, compute_uv=False)[2]
    both = lambda A: np.linalg.svd(A, full_matrices=False)[1][[0, 2]] @ [1.0, 1.0]
    h = 1e-6
    assert abs((smallest(A + h * T) - smallest(A - h * T)) / (2 * h)) < 1e-6
    want = (both(A + h * T) - both(A - h * T)) / (2 * h)
    for seed in range(3):
        Q = np.linalg.qr(np.random.default_rng(seed).standard_normal((5, 5)))[0]  # (another basis, same values)
        for f, w in ((smallest, 0.0), (both, want)):
            np.testing.assert_allclose(mg.jvp(f, (Q @ A,), (Q @ T,))[1], w, atol=1e-7)
            np.testing.assert_allclose(np.sum(mg.grad(f)(Q @ A) * (Q @ T)), w, atol=1e-7)
    # the spectral norm at 0: all its values zero and tied: 0, not the I / n of LAPACK's identity bases
    np.testing.assert_array_equal(mg.grad(lambda A: np.linalg.norm(A, 2))(np.zeros((3, 3))), np.zeros((3, 3)))
    # a single zero of a square matrix: of the values alone 0 too (the lowrank tester: norm(H, 'nuc') at rank 2
    # differed from central differences by u₃v₃ᵀ, whose sign is LAPACK's); with the vectors, the factorization
    # continued through zero, whose reconstruction U S Vᵀ has the derivative dA
    D = np.diag([3.0, 2.0, 0.0]) @ np.linalg.qr(rng.standard_normal((3, 3)))[0]
    E = T[:3]
    assert mg.jvp(lambda A: np.linalg.svd(A, compute_uv=False)[2], (D,), (E,))[1] == 0.0
    assert abs(np.linalg.svd(D + h * E, compute_uv=False)[2] - np.linalg.svd(D - h * E, compute_uv=False)[2]) < 1e-9

    def nuc(A):
        return np.linalg.norm(A, "nuc")

    fd = np.array([(nuc(D + h * e) - nuc(D - h * e)) / (2 * h) for e in np.eye(9).reshape(9, 3, 3)]).reshape(3, 3)
    np.testing.assert_allclose(mg.grad(nuc)(D), fd, atol=1e-6)
    np.testing.assert_allclose(mg.grad(nuc)(D.T).T, fd, atol=1e-6)
    def rebuild(A):
        u, s, vt = np.linalg.svd(A)
        return (u * s) @ vt

    np.testing.assert_allclose(mg.jvp(rebuild, (D,), (E,))[1], E, atol=1e-12)


@pytest.mark.parametrize("shape", [(5, 3), (3, 5)])
@pytest.mark.parametrize("full", [True, False])
def test_forward_svd_of_a_rank_deficient_non_square_matrix(shape, full):
    # (regress87) rank 2: the zero value's vectors on the side whose null space has two dimensions or more are not
    # unique, the rest are: forward mode refused every vector; now only those (reverse mode read them apart)
    rng = np.random.default_rng(4707)
    R = rng.standard_normal((shape[0], 2)) @ rng.standard_normal((2, shape[1]))
    W = rng.standard_normal(shape)
    w3 = rng.standard_normal(3)
    T = rng.standard_normal(shape)

    def nonzero_triplets(a):
        U, s, Vt = np.linalg.svd(a, full_matrices=full)
        return np.sum(s[:2] ** 2) + np.sum((U[:, :2] * s[:2]) @ Vt[:2] * W)

    def unique_zero_vector(a):  # (tall: v_3 is the right null vector, unique up to its sign; wide: u_3)
        U, _, Vt = np.linalg.svd(a, full_matrices=full)
        return np.sum((Vt[2] if shape[0] > shape[1] else U[:, 2]) ** 2 * w3)

    def other_zero_vector(a):
        U, _, Vt = np.linalg.svd(a, full_matrices=full)
        return np.sum((U[:, 2] if shape[0] > shape[1] else Vt[2]) ** 2 * np.arange(1.0, max(shape) + 1))

    h = 1e-6
    for f in (nonzero_triplets, unique_zero_vector):
        fd = (f(R + h * T) - f(R - h * T)) / (2 * h)
        np.testing.assert_allclose(mg.jvp(f, (R,), (T,))[1], fd, rtol=1e-6, atol=1e-8)
        np.testing.assert_allclose(np.sum(mg.grad(f)(R) * T), fd, rtol=1e-6, atol=1e-8)
    assert isinstance(mg.jvp(other_zero_vector, (R,), (T,))[1], mg.NotImplementedTangent)


@pytest.mark.parametrize("fit", ["lstsq", "pinv"])
def test_second_derivatives_through_a_tall_least_squares_fit_form_no_n_by_n_projection(fit):
    # (lsm) I - A X of a tall A (n x n) was formed by pinv's rules, which lstsq's pullback differentiates: an HVP
    # at n = 10000 took 1.6 GB. Memory, measured by tracemalloc (deterministic), not time; values against central
    # differences of mutagrad's gradient are in the rule tables, and here against FD of it too
    import tracemalloc

    n = 3000  # (an n x n float64 matrix: 72 MB)
    rng = np.random.default_rng(5)
    x, y, v = rng.uniform(0.5, 1.5, n), rng.standard_normal(n), rng.standard_normal(n)
    solve = (lambda A: np.linalg.lstsq(A, y, rcond=None)[0]) if fit == "lstsq" else (lambda A: np.linalg.pinv(A) @ y)

    def f(xx):
        A = np.vander(xx, 4)
        return np.sum((A @ solve(A)) ** 2)

    tracemalloc.start()
    try:
        hv = mg.jvp(mg.grad(f), (x,), (v,))[1]
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 20e6, peak
    g = mg.grad(f)
    fd = (g(x + 1e-6 * v) - g(x - 1e-6 * v)) / 2e-6
    np.testing.assert_allclose(hv, fd, rtol=1e-5, atol=1e-6 * np.max(np.abs(fd)))


def test_lstsq_and_pinv_of_an_ill_conditioned_full_rank_matrix():
    # (finance2) the projections I - X A of a tall full-rank A (and I - A X of a wide one) are zero, but formed in
    # floating point they were rounding times |X|^2: at cond 7e8 (a regression on a cubic of raw prices, as in a
    # Longstaff-Schwartz pricer) the derivative came out 500 times too large, reverse and forward disagreeing.
    # The oracle: the same derivatives by the QR factorization (A = Q R: x = R^-1 Q^T b), worked by hand in NumPy
    rng = np.random.default_rng(0)
    S0, cash = 100 * rng.uniform(0.7, 1.0, 40), rng.uniform(0.0, 30.0, 40)
    w = (rng.uniform(size=40) < 0.5) * 0.95
    basis = lambda S: np.stack([np.ones_like(S), S, S ** 2, S ** 3], 1)

    def value(S):
        A = basis(S)
        return np.sum(w * (A @ np.linalg.lstsq(A, cash, rcond=None)[0]))

    A = basis(S0)
    Q, R = np.linalg.qr(A)
    Ri = lambda v: np.linalg.solve(R, v)
    RiT = lambda v: np.linalg.solve(R.T, v)
    x = Ri(Q.T @ cash)
    r = cash - A @ x
    dcol = np.stack([0 * S0, 1 + 0 * S0, 2 * S0, 3 * S0 ** 2], 1)  # (dA/dS_k: row k)
    want = np.empty(40)
    for k in range(40):
        dA = np.zeros_like(A)
        dA[k] = dcol[k]
        dx = Ri(RiT(dA.T @ r)) - Ri(Q.T @ (dA @ x))  # dx of a full-column-rank least-squares solution
        want[k] = w @ (dA @ x + A @ dx)
    np.testing.assert_allclose(mg.grad(value)(S0), want, rtol=0, atol=1e-7 * np.max(np.abs(want)))
    v = rng.standard_normal(40)
    _, t = mg.jvp(value, (S0,), (v,))
    assert abs(t - want @ v) <= 1e-7 * np.abs(want) @ np.abs(v)
    # pinv: dX = -X dA X + X X^T dA^T (I - A X), X X^T = R^-1 R^-T
    dA = rng.standard_normal(A.shape)
    X = Ri(Q.T)
    want_dX = -X @ dA @ X + Ri(RiT(dA.T - dA.T @ A @ X))
    _, tX = mg.jvp(np.linalg.pinv, (A,), (dA,))
    np.testing.assert_allclose(tX, want_dX, rtol=1e-6, atol=1e-6 * np.max(np.abs(want_dX)))
    C = rng.standard_normal(X.shape)
    g = mg.grad(lambda a: np.sum(C * np.linalg.pinv(a)))(A)
    assert np.sum(g * dA) == pytest.approx(np.sum(C * want_dX), rel=1e-6)
    # a wide full-row-rank A (the minimum-norm solution: A^T = Q R, x = Q R^-T b): I - A X is zero
    W = A.T.copy()
    bw, dW = rng.uniform(0, 30, 4), rng.standard_normal(W.shape)
    Q2, R2 = np.linalg.qr(W.T)
    Xw = Q2 @ np.linalg.inv(R2.T)
    xw = Xw @ bw
    want_dxw = -Xw @ (dW @ xw) + (dW.T @ (Xw.T @ xw) - Xw @ (W @ (dW.T @ (Xw.T @ xw))))
    _, tw = mg.jvp(lambda a: np.linalg.lstsq(a, bw, rcond=None)[0], (W,), (dW,))
    np.testing.assert_allclose(tw, want_dxw, rtol=1e-6, atol=1e-6 * np.max(np.abs(want_dxw)))
