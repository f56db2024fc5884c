"""scipy.linalg's Toeplitz and circulant solves, expm_frechet, the trigonometric and hyperbolic matrix
functions, fractional_matrix_power, pseudo-inverses and least squares, eig, the special matrices, banded
Cholesky and tridiagonal eigenproblems (mutagrad/rules/scipy/linalg.py) through mutagrad.scipy.linalg.

Every derivative is checked against an oracle that does not run mutagrad: reverse mode against central
differences of the plain SciPy function on plain arrays, and forward mode against reverse mode
(Re Σ w ẏ = Re Σ ḡ ẋ); second derivatives against second differences of the SciPy function. Values are
SciPy's: its own call, or equal to rounding where mutagrad computes them another way (noted)."""
import functools

import numpy as np
import pytest

sl = pytest.importorskip("scipy.linalg")

import mutagrad as mg
import mutagrad.scipy.linalg as msl
from mutagrad.errors import UnsupportedInputError
from mutagrad.pytree import tree_flatten
from mutagrad.testing import numerical_grad
from tests._oracles import fd_hessian
from tests.rules._draws import Draws

_d = Draws(5011)
R, C = _d.R, _d.C


def _well(*shape, cplx=False):
    return (C if cplx else R)(*shape) + 4 * np.eye(shape[-1])


def _spd(*shape, cplx=False):
    a = (C if cplx else R)(*shape)
    return a @ np.conj(np.swapaxes(a, -1, -2)) + shape[-1] * np.eye(shape[-1])


def _toeplitz_c(n, *batch, cplx=False):  # a diagonally dominant first column (and row)
    c = 0.3 * (C if cplx else R)(*batch, n)
    c[..., 0] += 3.0
    return c


def _hband(p, n, *batch, lower=False, cplx=False):  # a Hermitian positive definite band, one triangle
    ab = 0.5 * (C if cplx else R)(*batch, p + 1, n)
    ab[..., 0 if lower else p, :] = 4.0 + np.abs(R(*batch, n))
    return ab


# -- the oracles ----------------------------------------------------------------------------------


def _leaves(y):
    """The floating-point leaves of a result (ranks, and gelsy's None, left out)."""
    return [v for v in tree_flatten(y)[0] if v is not None and np.asarray(mg.value(v)).dtype.kind in "fc"]


def _draw(shape, cplx, w=None):
    w = w or Draws(5012)
    return w.C(*shape) if cplx else w.R(*shape)


def _projection(fn, weights):
    return lambda *a: sum(np.real(np.sum(w * y)) for w, y in zip(weights, _leaves(fn(*a))))


def _float_args(args):
    return tuple(i for i, a in enumerate(args) if np.asarray(a).dtype.kind in "fc")


def assert_derivatives(msl_fn, sl_fn, args, rtol=1e-6, atol=1e-8, eps=1e-6):
    """Reverse mode against central differences of the plain SciPy function (every floating-point
    argument, every floating-point output through a random projection), and forward mode against
    reverse mode."""
    w = Draws(5012)  # (the projections' weights and the tangents: the same stream for every call, in any order)
    weights = [_draw(np.shape(y), np.iscomplexobj(y), w) for y in _leaves(sl_fn(*args))]
    argnums = _float_args(args)
    fd = numerical_grad(_projection(sl_fn, weights), args, argnums, eps)
    grads = mg.grad(_projection(msl_fn, weights), argnums=argnums)(*args)
    for g, d in zip(grads, fd, strict=True):
        np.testing.assert_allclose(g, d, rtol=rtol, atol=atol)
    ts = [_draw(np.shape(args[i]), np.iscomplexobj(args[i]), w) for i in argnums]

    def of_floats(*xs):
        full = list(args)
        for i, x in zip(argnums, xs):
            full[i] = x
        return msl_fn(*full)

    y, dy = mg.jvp(of_floats, tuple(args[i] for i in argnums), tuple(ts))
    dy = [d for v, d in zip(tree_flatten(y)[0], tree_flatten(dy)[0], strict=True) if _leaves(v)]  # (not the rank's)
    lhs = sum(np.real(np.sum(w * d)) for w, d in zip(weights, dy))
    rhs = sum(np.real(np.sum(g * t)) for g, t in zip(grads, ts))
    np.testing.assert_allclose(lhs, rhs, rtol=1e-9, atol=1e-11)


def assert_values(msl_fn, sl_fn, args, rtol=0.0, atol=0.0):
    """Plain: SciPy's own result (type, dtype, bits); traced (under mg.vjp): SciPy's values, bit for
    bit (rtol=0) or to rounding."""
    want = sl_fn(*args)
    got = msl_fn(*args)
    assert type(got) is type(want)
    for g, w in zip(tree_flatten(got)[0], tree_flatten(want)[0], strict=True):
        np.testing.assert_array_equal(g, w)
    traced = mg.vjp(msl_fn, *args)[0]
    assert type(traced) is type(want) or (np.isscalar(want) and np.ndim(traced) == 0)  # (a traced number: NumPy's)
    for g, w in zip(tree_flatten(traced)[0], tree_flatten(want)[0], strict=True):
        if w is None:
            assert g is None
            continue
        assert np.shape(g) == np.shape(w) and np.asarray(g).dtype == np.asarray(w).dtype
        if rtol == 0.0 and atol == 0.0:
            np.testing.assert_array_equal(g, w)
        else:
            np.testing.assert_allclose(g, w, rtol=rtol, atol=atol)


def _both(name, call):
    """(mutagrad's, SciPy's) of ``call(module, *args)``."""
    return (lambda *a: call(msl, *a)), (lambda *a: call(sl, *a))


# -- the table: (covers, call(module, *args), args, value tolerance: 0 for SciPy's bits) ---------------

_T4, _R4 = _toeplitz_c(4), _toeplitz_c(4)
CASES = [
    # solve_toeplitz: c alone (r = conj(c)), (c, r), complex, a matrix b, batches (a vector b for every matrix)
    ("scipy.linalg.solve_toeplitz", lambda m, c, b: m.solve_toeplitz(c, b), (_toeplitz_c(4), R(4)), 0),
    ("scipy.linalg.solve_toeplitz", lambda m, c, r, b: m.solve_toeplitz((c, r), b), (_toeplitz_c(4), _toeplitz_c(4), R(4, 2)), 0),
    ("scipy.linalg.solve_toeplitz", lambda m, c, r, b: m.solve_toeplitz((c, r), b),
     (_toeplitz_c(3, cplx=True), _toeplitz_c(3, cplx=True), C(3)), 0),
    ("scipy.linalg.solve_toeplitz", lambda m, c, b: m.solve_toeplitz(c, b), (_toeplitz_c(3, cplx=True), R(3, 2)), 0),
    ("scipy.linalg.solve_toeplitz", lambda m, c, r, b: m.solve_toeplitz((c, r), b), (_toeplitz_c(3, 2), _toeplitz_c(3), R(3)), 0),
    ("scipy.linalg.solve_toeplitz", lambda m, c, b: m.solve_toeplitz(c, b), (_toeplitz_c(3), R(2, 3, 2)), 0),
    ("scipy.linalg.solve_toeplitz", lambda m, c, b: m.solve_toeplitz(c, b), (_toeplitz_c(3), C(3)), 0),  # (real c)
    # matmul_toeplitz: square and rectangular T, complex, batches
    ("scipy.linalg.matmul_toeplitz", lambda m, c, x: m.matmul_toeplitz(c, x), (R(4), R(4)), 1e-12),
    ("scipy.linalg.matmul_toeplitz", lambda m, c, r, x: m.matmul_toeplitz((c, r), x), (R(5), R(3), R(3, 2)), 1e-12),
    ("scipy.linalg.matmul_toeplitz", lambda m, c, r, x: m.matmul_toeplitz((c, r), x), (C(3), C(4), C(4)), 1e-12),
    ("scipy.linalg.matmul_toeplitz", lambda m, c, r, x: m.matmul_toeplitz((c, r), x), (R(2, 3), R(3), R(3)), 1e-12),
    # solve_circulant: SciPy's FFT formula on the values; complex; broadcast collections
    ("scipy.linalg.solve_circulant", lambda m, c, b: m.solve_circulant(c, b), (_toeplitz_c(4), R(4)), 0),
    ("scipy.linalg.solve_circulant", lambda m, c, b: m.solve_circulant(c, b), (_toeplitz_c(3, cplx=True), R(3, 2)), 0),
    ("scipy.linalg.solve_circulant", lambda m, c, b: m.solve_circulant(c[:, None, :], b, baxis=-1, outaxis=-1),
     (_toeplitz_c(4, 2), R(3, 4)), 0),
    # expm_frechet: both outputs, L alone, complex, a batch of A with one E, blockEnlarge
    ("scipy.linalg.expm_frechet", lambda m, a, e: m.expm_frechet(a, e), (0.5 * R(3, 3), R(3, 3)), 0),
    ("scipy.linalg.expm_frechet", lambda m, a, e: m.expm_frechet(a, e, compute_expm=False), (0.5 * R(3, 3), R(3, 3)), 0),
    ("scipy.linalg.expm_frechet", lambda m, a, e: m.expm_frechet(a, e), (0.5 * C(2, 2), C(2, 2)), 0),
    ("scipy.linalg.expm_frechet", lambda m, a, e: m.expm_frechet(a, e), (0.5 * R(2, 2, 2), R(2, 2)), 0),
    ("scipy.linalg.expm_frechet", lambda m, a, e: m.expm_frechet(a, e, method="blockEnlarge"), (0.5 * R(2, 2), R(2, 2)), 0),
    ("scipy.linalg.expm_frechet", lambda m, a, e: m.expm_frechet(a, e), (0.5 * R(2, 2), C(2, 2)), 0),  # (real A)
    # SciPy's formulas with expm and solve: the same calls, SciPy's bits
    ("scipy.linalg.cosm", lambda m, a: m.cosm(a), (0.5 * R(3, 3),), 0),
    ("scipy.linalg.cosm", lambda m, a: m.cosm(a), (0.5 * C(2, 2),), 0),
    ("scipy.linalg.sinm", lambda m, a: m.sinm(a), (0.5 * R(3, 3),), 0),
    ("scipy.linalg.sinm", lambda m, a: m.sinm(a), (0.5 * C(2, 2),), 0),
    ("scipy.linalg.tanm", lambda m, a: m.tanm(a), (0.3 * R(3, 3),), 0),
    ("scipy.linalg.tanm", lambda m, a: m.tanm(a), (0.3 * C(2, 2),), 0),
    ("scipy.linalg.coshm", lambda m, a: m.coshm(a), (0.5 * R(2, 3, 3),), 0),
    ("scipy.linalg.sinhm", lambda m, a: m.sinhm(a), (0.5 * C(2, 2),), 0),
    ("scipy.linalg.tanhm", lambda m, a: m.tanhm(a), (0.5 * R(2, 2),), 0),
    ("scipy.linalg.tanhm", lambda m, a: m.tanhm(a), (0.3 * R(2, 2, 2),), 0),
    # fractional_matrix_power: SciPy's values; the derivatives of expm(t logm(A)), in A and t
    ("scipy.linalg.fractional_matrix_power", lambda m, a, t: m.fractional_matrix_power(a, t), (_well(2, 2), 0.4), 0),
    ("scipy.linalg.fractional_matrix_power", lambda m, a, t: m.fractional_matrix_power(a, t), (_spd(2, 2), -1.3), 0),
    ("scipy.linalg.fractional_matrix_power", lambda m, a: m.fractional_matrix_power(a, 0.5), (_well(2, 2, cplx=True),), 0),
    ("scipy.linalg.fractional_matrix_power", lambda m, a, t: m.fractional_matrix_power(a, t), (_spd(2, 2, 2), 2.0), 0),
    # pinv, pinvh, lstsq: SciPy's values, np.linalg's rules (of full rank, and with a value cut off)
    ("scipy.linalg.pinv", lambda m, a: m.pinv(a), (R(4, 3),), 0),
    ("scipy.linalg.pinv", lambda m, a: m.pinv(a), (C(2, 3),), 0),
    ("scipy.linalg.pinv", lambda m, a: m.pinv(a, atol=0.5), (R(3, 2) @ np.diag([2.0, 0.1]) @ R(2, 3),), 0),
    ("scipy.linalg.pinv", lambda m, a: m.pinv(a, return_rank=True), (R(2, 4, 3),), 0),
    ("scipy.linalg.pinvh", lambda m, a: m.pinvh(a), (_spd(3, 3) + np.triu(R(3, 3), 1),), 0),
    ("scipy.linalg.pinvh", lambda m, a: m.pinvh(a, lower=False), (_spd(3, 3, cplx=True) + np.tril(C(3, 3), -1),), 0),
    ("scipy.linalg.pinvh", lambda m, a: m.pinvh(a, return_rank=True), (_spd(2, 3, 3),), 0),
    ("scipy.linalg.lstsq", lambda m, a, b: m.lstsq(a, b), (R(5, 3), R(5)), 0),
    ("scipy.linalg.lstsq", lambda m, a, b: m.lstsq(a, b), (R(5, 3), R(5, 2)), 0),
    ("scipy.linalg.lstsq", lambda m, a, b: m.lstsq(a, b), (R(2, 4), R(2)), 0),  # (wide: no residues)
    ("scipy.linalg.lstsq", lambda m, a, b: m.lstsq(a, b), (C(4, 2), C(4)), 0),
    ("scipy.linalg.lstsq", lambda m, a, b: m.lstsq(a, b), (R(4, 2), C(4, 2)), 0),
    ("scipy.linalg.lstsq", lambda m, a, b: m.lstsq(a, b, lapack_driver="gelsy"), (R(4, 3), R(4)), 0),
    ("scipy.linalg.lstsq", lambda m, a, b: m.lstsq(a, b, lapack_driver="gelss"), (R(4, 3), R(4, 2)), 0),
    ("scipy.linalg.lstsq", lambda m, a, b: m.lstsq(a, b), (R(2, 4, 3), R(4)), 0),
    # (of rank 2, its second singular value cut off: x; the zero singular value is a kink, which differences miss)
    ("scipy.linalg.lstsq", lambda m, a, b: m.lstsq(a, b, cond=0.2)[0], (R(4, 2) @ np.diag([3.0, 0.1]) @ R(2, 3), R(4)), 0),
    # norm: np.linalg.norm's (SciPy's BLAS and LAPACK norms to rounding)
    ("scipy.linalg.norm", lambda m, a: m.norm(a), (R(5),), 1e-15),
    ("scipy.linalg.norm", lambda m, a: m.norm(a, 2), (R(3, 4),), 1e-14),
    ("scipy.linalg.norm", lambda m, a: m.norm(a, 1), (np.asfortranarray(R(3, 4)),), 1e-15),
    ("scipy.linalg.norm", lambda m, a: m.norm(a, axis=-1, keepdims=True), (C(2, 3),), 1e-15),
    # eig, eigvals: np.linalg's rules, SciPy's order and signs (its values to rounding)
    ("scipy.linalg.eig", lambda m, a: m.eig(a), (R(3, 3),), 1e-12),
    ("scipy.linalg.eig", lambda m, a: m.eig(a, left=True), (R(3, 3) + np.diag([0.0, 3.0, 6.0]),), 1e-12),
    ("scipy.linalg.eig", lambda m, a: m.eig(a, left=True, right=False), (C(3, 3),), 1e-12),
    ("scipy.linalg.eig", lambda m, a: m.eig(a, homogeneous_eigvals=True), (R(2, 3, 3),), 1e-12),
    ("scipy.linalg.eigvals", lambda m, a: m.eigvals(a), (R(4, 4),), 1e-12),
    ("scipy.linalg.eigvals", lambda m, a: m.eigvals(a), (C(2, 3, 3),), 1e-12),
    # orthogonal_procrustes, subspace_angles: SciPy's code on the differentiable svd and orth
    ("scipy.linalg.orthogonal_procrustes", lambda m, a, b: m.orthogonal_procrustes(a, b), (R(4, 3), R(4, 3)), 0),
    ("scipy.linalg.orthogonal_procrustes", lambda m, a, b: m.orthogonal_procrustes(a, b), (C(3, 2), C(3, 2)), 0),
    ("scipy.linalg.orthogonal_procrustes", lambda m, a, b: m.orthogonal_procrustes(a, b), (R(2, 3, 2), R(3, 2)), 0),
    ("scipy.linalg.subspace_angles", lambda m, a, b: m.subspace_angles(a, b), (R(7, 2), R(7, 3)), 0),
    ("scipy.linalg.subspace_angles", lambda m, a, b: m.subspace_angles(a, b), (R(5, 3), R(5, 1)), 0),
    ("scipy.linalg.subspace_angles", lambda m, a, b: m.subspace_angles(a, b), (R(2, 4, 2), R(4, 2)), 0),
    # special matrices: exact copies of the entries
    ("scipy.linalg.diagsvd", lambda m, s: m.diagsvd(s, 3, 2), (R(2),), 0),
    ("scipy.linalg.diagsvd", lambda m, s: m.diagsvd(s, 2, 4), (R(3, 2),), 0),
    ("scipy.linalg.companion", lambda m, a: m.companion(a), (R(4),), 0),
    ("scipy.linalg.companion", lambda m, a: m.companion(a), (C(2, 3),), 0),
    ("scipy.linalg.leslie", lambda m, f, s: m.leslie(f, s), (R(4), R(3)), 0),
    ("scipy.linalg.leslie", lambda m, f, s: m.leslie(f, s), (R(2, 3), R(2)), 0),
    ("scipy.linalg.fiedler", lambda m, a: m.fiedler(a), (R(4),), 0),
    ("scipy.linalg.fiedler", lambda m, a: m.fiedler(a), (R(2, 3),), 0),
    ("scipy.linalg.fiedler_companion", lambda m, a: m.fiedler_companion(a), (R(6),), 0),
    ("scipy.linalg.fiedler_companion", lambda m, a: m.fiedler_companion(a), (R(2, 5),), 0),
    ("scipy.linalg.fiedler_companion", lambda m, a: m.fiedler_companion(a), (R(2),), 0),
    ("scipy.linalg.convolution_matrix", lambda m, a: m.convolution_matrix(a, 4), (R(3),), 0),
    ("scipy.linalg.convolution_matrix", lambda m, a: m.convolution_matrix(a, 3, "same"), (R(5),), 0),
    ("scipy.linalg.convolution_matrix", lambda m, a: m.convolution_matrix(a, 2, "valid"), (C(2, 4),), 0),
    # banded Cholesky: the factor's band, and solves with it
    ("scipy.linalg.cholesky_banded", lambda m, ab: m.cholesky_banded(ab), (_hband(1, 4),), 0),
    ("scipy.linalg.cholesky_banded", lambda m, ab: m.cholesky_banded(ab, lower=True), (_hband(2, 5, lower=True),), 0),
    ("scipy.linalg.cholesky_banded", lambda m, ab: m.cholesky_banded(ab), (_hband(1, 4, cplx=True),), 0),
    ("scipy.linalg.cholesky_banded", lambda m, ab: m.cholesky_banded(ab, lower=True), (_hband(1, 3, 2, lower=True),), 0),
    ("scipy.linalg.cho_solve_banded", lambda m, cb, b: m.cho_solve_banded((cb, False), b),
     (sl.cholesky_banded(_hband(1, 4)), R(4)), 0),
    ("scipy.linalg.cho_solve_banded", lambda m, cb, b: m.cho_solve_banded((cb, True), b),
     (sl.cholesky_banded(_hband(2, 5, lower=True), lower=True), R(5, 2)), 0),
    ("scipy.linalg.cho_solve_banded", lambda m, cb, b: m.cho_solve_banded((cb, False), b),
     (sl.cholesky_banded(_hband(1, 3, cplx=True)), C(3)), 0),
    ("scipy.linalg.cho_solve_banded", lambda m, cb, b: m.cho_solve_banded((cb, True), b),
     (sl.cholesky_banded(_hband(1, 3, 2, lower=True), lower=True), R(3)), 0),
    ("scipy.linalg.cho_solve_banded", lambda m, cb, b: m.cho_solve_banded((cb, True), b),
     (sl.cholesky_banded(_hband(1, 3, lower=True), lower=True), C(3, 2)), 0),  # (a real factor)
    ("scipy.linalg.cho_solve_banded", lambda m, ab, b: m.cho_solve_banded((m.cholesky_banded(ab), False), b),
     (_hband(1, 4), R(4)), 0),
    # eigh_tridiagonal: eigh of the dense matrix, SciPy's selection and signs (values to rounding)
    ("scipy.linalg.eigh_tridiagonal", lambda m, d, e: m.eigh_tridiagonal(d, e), (R(4), R(3)), 1e-13),
    ("scipy.linalg.eigh_tridiagonal", lambda m, d, e: m.eigh_tridiagonal(d, e, select="i", select_range=(1, 2)),
     (R(4), R(3)), 1e-13),
    ("scipy.linalg.eigh_tridiagonal", lambda m, d, e: m.eigh_tridiagonal(d, e), (R(2, 3), R(2)), 1e-13),
    ("scipy.linalg.eigvalsh_tridiagonal", lambda m, d, e: m.eigvalsh_tridiagonal(d, e), (R(4), R(3)), 1e-13),
    ("scipy.linalg.eigvalsh_tridiagonal", lambda m, d, e: m.eigvalsh_tridiagonal(d, e, select="v", select_range=(-0.5, 5.0)),
     (np.array([0.0, 1.0, 2.0, 3.0]), R(3)), 1e-13),
]


@pytest.mark.parametrize("covers,call,args,tol", CASES, ids=[f"{c[0][13:]}-{i}" for i, c in enumerate(CASES)])
def test_values_are_scipys(covers, call, args, tol):
    assert_values(*_both(covers, call), args, rtol=tol, atol=tol)


@pytest.mark.parametrize("covers,call,args,tol", CASES, ids=[f"{c[0][13:]}-{i}" for i, c in enumerate(CASES)])
def test_derivatives_against_scipys_differences(covers, call, args, tol):
    assert_derivatives(*_both(covers, call), args)


# -- second derivatives: mg.hessian (forward over reverse) and reverse over reverse, against second
# differences of SciPy's function ------------------------------------------------------------------


def _unflat(theta, like):
    out, k = [], 0
    for x in like:
        out.append(np.reshape(theta[k:k + np.size(x)], np.shape(x)))
        k += np.size(x)
    return out


_B3 = R(3)
_HESSIAN_CASES = [
    ("solve_toeplitz", lambda m, c, r, b: m.solve_toeplitz((c, r), b), (_toeplitz_c(3), _toeplitz_c(3), R(3))),
    ("solve_toeplitz-c", lambda m, c, b: m.solve_toeplitz(c, b), (_toeplitz_c(3), R(3, 2))),
    ("expm_frechet", lambda m, a, e: m.expm_frechet(a, e), (0.5 * R(2, 2), R(2, 2))),
    ("cho_solve_banded", lambda m, ab: m.cho_solve_banded((m.cholesky_banded(ab, lower=True), True), _B3),
     (_hband(1, 3, lower=True),)),
    ("matmul_toeplitz", lambda m, c, r, x: m.matmul_toeplitz((c, r), x), (R(3), R(2), R(2))),
]


@pytest.mark.parametrize("name,call,args", _HESSIAN_CASES, ids=[c[0] for c in _HESSIAN_CASES])
def test_hessians_against_second_differences(name, call, args):
    weights = [_draw(np.shape(y), np.iscomplexobj(y)) for y in _leaves(call(sl, *args))]
    theta = np.concatenate([np.ravel(x) for x in args])

    def f(mod):
        return lambda t: sum(np.real(np.sum(w * y)) for w, y in zip(weights, _leaves(call(mod, *_unflat(t, args)))))

    want = fd_hessian(f(sl), theta, h=1e-3)
    np.testing.assert_allclose(mg.hessian(f(msl))(theta), want, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(mg.jacobian(mg.grad(f(msl)), mode="rev")(theta), want, rtol=1e-4, atol=1e-5)


# -- what the rules rest on, by hand --------------------------------------------------------------------


def test_solve_toeplitz_reads_c0_not_r0():
    # SciPy's T has c[0] on its diagonal and ignores r[0]: its cotangent is zero, c[0]'s is -Σ b̄ᵢ xᵢ
    c, r, b = _toeplitz_c(4), _toeplitz_c(4), R(4)
    w = R(4)
    gc, gr = mg.grad(lambda c, r: w @ msl.solve_toeplitz((c, r), b), argnums=(0, 1))(c, r)
    x = sl.solve_toeplitz((c, r), b)
    bbar = np.linalg.solve(sl.toeplitz(c, r).T, w)
    assert gr[0] == 0.0
    np.testing.assert_allclose(gc[0], -bbar @ x, rtol=1e-12)
    np.testing.assert_allclose(gr[1:], [-sum(bbar[i] * x[i + d] for i in range(4 - d)) for d in (1, 2, 3)], rtol=1e-12)


def test_expm_frechet_is_the_block_exponential_and_its_derivative():
    # L(A, E) is linear in E: its derivative along E is L(A, Ė), SciPy's own call
    a, e, te = 0.5 * R(3, 3), R(3, 3), R(3, 3)
    np.testing.assert_allclose(mg.jvp(lambda e: msl.expm_frechet(a, e)[1], (e,), (te,))[1],
                               sl.expm_frechet(a, te, compute_expm=False), rtol=1e-12, atol=1e-14)
    # and e^A's derivative along Ȧ is L(A, Ȧ)
    ta = R(3, 3)
    np.testing.assert_allclose(mg.jvp(lambda a: msl.expm_frechet(a, e)[0], (a,), (ta,))[1],
                               sl.expm_frechet(a, ta, compute_expm=False), rtol=1e-12, atol=1e-14)


def test_fractional_matrix_power_agrees_with_exp_t_log():
    # the derivative rests on A^t = expm(t logm(A)), which SciPy's values agree with to rounding
    for a, t in ((_well(3, 3), 0.4), (_spd(3, 3), -1.7), (_well(2, 2, cplx=True), 0.25), (_spd(2, 2), 2.0)):
        want = sl.fractional_matrix_power(a, t)
        np.testing.assert_allclose(sl.expm(t * sl.logm(a)), want, rtol=1e-12, atol=1e-12 * np.abs(want).max())
    # d/dt (4 I)^t = log(4) 4^t I, d/da of a^t I at a = 4 is t 4^(t-1) I
    t = 0.3
    np.testing.assert_allclose(mg.grad(lambda t: np.real(msl.fractional_matrix_power(4.0 * np.eye(2), t)[1, 1]))(t),
                               np.log(4.0) * 4.0 ** t, rtol=1e-12)
    np.testing.assert_allclose(mg.grad(lambda s: np.real(msl.fractional_matrix_power(s * np.eye(2), t)[0, 0]))(4.0),
                               t * 4.0 ** (t - 1), rtol=1e-12)
    # second derivatives: d²/dt² 4^t = log(4)² 4^t, forward over reverse and reverse over reverse
    f = lambda t: np.real(msl.fractional_matrix_power(np.diag([4.0, 2.0]), t[0])[0, 0])
    for hess in (mg.hessian(f), mg.jacobian(mg.grad(f), mode="rev")):
        np.testing.assert_allclose(np.ravel(hess(np.array([t]))), [np.log(4.0) ** 2 * 4.0 ** t], rtol=1e-10)


def test_cosm_and_sinm_of_a_rotation_generator_closed_form():
    # J = [[0, -1], [1, 0]], J² = -I: cos(θ J) = Σ θ²ᵏ/(2k)! I = cosh θ I, sin(θ J) = sinh θ J
    J = np.array([[0.0, -1.0], [1.0, 0.0]])
    th = 0.7
    np.testing.assert_allclose(mg.grad(lambda t: msl.cosm(t * J)[0, 0])(th), np.sinh(th), rtol=1e-12)
    np.testing.assert_allclose(mg.grad(lambda t: msl.sinm(t * J)[1, 0])(th), np.cosh(th), rtol=1e-12)
    np.testing.assert_allclose(mg.grad(lambda t: msl.tanhm(t * np.eye(2))[0, 0])(th), 1 / np.cosh(th) ** 2, rtol=1e-12)


def test_pseudo_inverse_ranks_and_cutoffs_are_scipys():
    a = R(4, 2) @ np.diag([2.0, 1e-3]) @ R(2, 3)  # rank 2, its second singular value small
    for kw in ({}, {"atol": 0.1}, {"rtol": 1e-2}):
        ours, theirs = functools.partial(msl.pinv, **kw), functools.partial(sl.pinv, **kw)
        rank = ours(a, return_rank=True)[1]
        want, wrank = theirs(a, return_rank=True)
        got, grank = mg.vjp(functools.partial(ours, return_rank=True), a)[0]
        assert rank == wrank == grank and type(grank) is type(wrank)
        np.testing.assert_array_equal(got, want)
        if kw:  # (the cutoffs given drop values far above rounding: differences keep the rank)
            assert_derivatives(ours, theirs, (a,))
    h = _spd(3, 3)
    got, grank = mg.vjp(lambda h: msl.pinvh(h, return_rank=True, rtol=0.9), h)[0]
    want, wrank = sl.pinvh(h, return_rank=True, rtol=0.9)
    assert grank == wrank and type(grank) is type(wrank)
    np.testing.assert_array_equal(got, want)


def test_pinvh_and_cholesky_banded_ignore_the_diagonals_imaginary_part():
    # LAPACK reads a Hermitian diagonal as real: the imaginary part's cotangent is zero, as differences show
    h = _spd(3, 3, cplx=True) + 1j * np.diag(R(3))
    assert_derivatives(msl.pinvh, sl.pinvh, (h,))
    ab = _hband(1, 4, cplx=True) + 1j * np.vstack([np.zeros(4), R(4)])
    assert_derivatives(msl.cholesky_banded, sl.cholesky_banded, (ab,))
    g = mg.grad(lambda ab: np.sum(np.abs(msl.cholesky_banded(ab)) ** 2))(ab)
    np.testing.assert_array_equal(np.imag(g[1]), 0.0)


def test_lstsq_residues_and_singular_values():
    # residues ‖b - a x‖² of a tall matrix of full rank: d/db = 2 r; the rank is SciPy's integer
    a, b = R(5, 2), R(5)
    assert type(msl.lstsq(a, b)[2]) is type(sl.lstsq(a, b)[2])
    r = b - a @ sl.lstsq(a, b)[0]
    np.testing.assert_allclose(mg.grad(lambda b: msl.lstsq(a, b)[1])(b), 2 * r, rtol=1e-10)
    # gelsy returns no singular values
    assert mg.vjp(lambda a: msl.lstsq(a, b, lapack_driver="gelsy"), a)[0][3] is None


def test_eig_vectors_are_scipys_and_normalised():
    a = R(4, 4)
    w, vl, vr = mg.vjp(lambda a: msl.eig(a, left=True), a)[0]
    ws, vls, vrs = sl.eig(a, left=True)
    np.testing.assert_allclose(w, ws, rtol=1e-12)
    np.testing.assert_allclose(vr, vrs, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(vl, vls, rtol=1e-10, atol=1e-12)
    assert w.dtype == ws.dtype and vr.dtype == vrs.dtype
    # a simple eigenvalue's derivative: u_kᴴ Ȧ v_k / (u_kᴴ v_k), by hand
    ta = R(4, 4)
    dw = mg.jvp(lambda a: msl.eigvals(a), (a,), (ta,))[1]
    np.testing.assert_allclose(dw, np.einsum("ik,ij,jk->k", vls.conj(), ta, vrs) / np.einsum("ik,ik->k", vls.conj(), vrs),
                               rtol=1e-9)


def test_eigh_tridiagonal_is_eigh_of_the_dense_matrix():
    d, e = R(5), R(4)
    t = np.diag(d) + np.diag(e, 1) + np.diag(e, -1)
    w, v = mg.vjp(lambda d, e: msl.eigh_tridiagonal(d, e), d, e)[0]
    ws, vs = sl.eigh_tridiagonal(d, e)
    np.testing.assert_allclose(w, ws, rtol=1e-13, atol=1e-14)
    np.testing.assert_allclose(v, vs, atol=1e-12)
    # dλ_k = v_kᵀ Ṫ v_k, by hand
    td, te = R(5), R(4)
    dt = np.diag(td) + np.diag(te, 1) + np.diag(te, -1)
    np.testing.assert_allclose(mg.jvp(lambda d, e: msl.eigvalsh_tridiagonal(d, e), (d, e), (td, te))[1],
                               np.einsum("ik,ij,jk->k", vs, dt, vs), rtol=1e-10)
    assert np.allclose(t @ vs, vs * ws)


def test_solve_circulant_least_squares_of_a_singular_matrix():
    # c = [1, 1, 0, 0] is singular: singular="lstsq" zeroes the quotient of the zero eigenvalue, as SciPy
    c, b = np.array([1.0, 1.0, 0.0, 0.0]), R(4)
    assert_values(lambda c, b: msl.solve_circulant(c, b, singular="lstsq"),
                  lambda c, b: sl.solve_circulant(c, b, singular="lstsq"), (c, b))
    np.testing.assert_allclose(mg.grad(lambda b: msl.solve_circulant(c, b, singular="lstsq") @ b)(b),
                               (np.linalg.pinv(sl.circulant(c)) + np.linalg.pinv(sl.circulant(c)).T) @ b, rtol=1e-10)


def test_queries_answer_about_the_values():
    a = np.triu(R(3, 3)) + np.eye(3)
    answers = []

    def f(a):
        answers.append((msl.bandwidth(a), msl.issymmetric(a), msl.ishermitian(a)))
        return np.sum(a ** 2) * answers[-1][0][1]

    np.testing.assert_allclose(mg.grad(f)(a), 2 * a * 2, rtol=1e-15)  # (upper bandwidth 2: 2 sum(a²))
    assert answers == [((0, 2), False, False)] == [(sl.bandwidth(a), sl.issymmetric(a), sl.ishermitian(a))]


def test_overwrites_leave_what_scipys_call_leaves():
    # SciPy's LAPACK calls overwrite a contiguous b with the solution, a Fortran-ordered band with the
    # factor's: so do the traced calls, the derivatives of the arrays read afterwards those of the results
    cb, b0, ab = sl.cholesky_banded(_hband(1, 4)), R(4), _hband(1, 4)

    def solve(mod, b):
        b = b.copy()
        mod.cho_solve_banded((cb, False), b, overwrite_b=True)
        return b

    def factor(mod, ab):
        ab = ab.copy(order="F")
        return mod.cholesky_banded(ab, overwrite_ab=True), ab

    for f, x in ((solve, b0), (factor, ab)):
        assert_values(functools.partial(f, msl), functools.partial(f, sl), (x,))
        assert_derivatives(functools.partial(f, msl), functools.partial(f, sl), (x,))


# -- errors: SciPy's, for traced arguments too ------------------------------------------------------------

_ERRORS = [
    ("solve_toeplitz", lambda m, c, b: m.solve_toeplitz(c, b), (R(3), R(4))),
    ("solve_toeplitz", lambda m, c, b: m.solve_toeplitz(c, b), (np.array([1.0, np.nan]), R(2))),
    ("matmul_toeplitz", lambda m, c, x: m.matmul_toeplitz(c, x), (R(3), R(4))),
    ("solve_circulant", lambda m, c, b: m.solve_circulant(c, b), (R(3), R(4))),
    ("solve_circulant", lambda m, c, b: m.solve_circulant(c, b, caxis=2), (R(3), R(3))),
    ("solve_circulant", lambda m, c, b: m.solve_circulant(c, b), (np.array([1.0, 1.0, 0.0, 0.0]), R(4))),
    ("expm_frechet", lambda m, a, e: m.expm_frechet(a, e), (R(2, 3), R(2, 3))),
    ("expm_frechet", lambda m, a, e: m.expm_frechet(a, e), (R(2, 2), R(3, 3))),
    ("expm_frechet", lambda m, a, e: m.expm_frechet(a, e, method="fast"), (R(2, 2), R(2, 2))),
    ("fractional_matrix_power", lambda m, a: m.fractional_matrix_power(a, 0.5), (R(2, 3),)),
    ("pinv", lambda m, a: m.pinv(a, atol=-1.0), (R(3, 2),)),
    ("pinvh", lambda m, a: m.pinvh(a, rtol=-1.0), (_spd(2, 2),)),
    ("lstsq", lambda m, a, b: m.lstsq(a, b), (R(3), R(3))),
    ("lstsq", lambda m, a, b: m.lstsq(a, b), (R(3, 2), R(4))),
    ("lstsq", lambda m, a, b: m.lstsq(a, b, lapack_driver="gelsx"), (R(3, 2), R(3))),
    ("eig", lambda m, a: m.eig(a), (R(2, 3),)),
    ("eigvals", lambda m, a: m.eigvals(a), (R(3),)),
    ("orthogonal_procrustes", lambda m, a, b: m.orthogonal_procrustes(a, b), (R(3, 2), R(3, 3))),
    ("subspace_angles", lambda m, a, b: m.subspace_angles(a, b), (R(3, 2), R(4, 2))),
    ("diagsvd", lambda m, s: m.diagsvd(s, 2, 2), (R(3),)),
    ("companion", lambda m, a: m.companion(a), (np.array([0.0, 1.0, 2.0]),)),
    ("companion", lambda m, a: m.companion(a), (R(1),)),
    ("leslie", lambda m, f, s: m.leslie(f, s), (R(3), R(3))),
    ("fiedler_companion", lambda m, a: m.fiedler_companion(a), (np.array([0.0, 1.0, 2.0, 3.0]),)),
    ("convolution_matrix", lambda m, a: m.convolution_matrix(a, 0), (R(3),)),
    ("convolution_matrix", lambda m, a: m.convolution_matrix(a, 2, "middle"), (R(3),)),
    ("cho_solve_banded", lambda m, cb, b: m.cho_solve_banded((cb, False), b), (sl.cholesky_banded(_hband(1, 4)), R(3))),
    ("cholesky_banded", lambda m, ab: m.cholesky_banded(ab), (np.array([[0.0, 2.0], [1.0, 1.0]]),)),
    ("eigh_tridiagonal", lambda m, d, e: m.eigh_tridiagonal(d, e), (R(3), R(3))),
    ("eigh_tridiagonal", lambda m, d, e: m.eigh_tridiagonal(d, e, select="i", select_range=(2, 5)), (R(3), R(2))),
    ("cosm", lambda m, a: m.cosm(a), (R(2, 3),)),
    ("tanhm", lambda m, a: m.tanhm(a), (R(3),)),
    ("fractional_matrix_power", lambda m, a: m.fractional_matrix_power(a, 0.5), (R(2, 2, 3),)),
]


@pytest.mark.parametrize("name,call,args", _ERRORS, ids=[f"{c[0]}-{i}" for i, c in enumerate(_ERRORS)])
def test_errors_are_scipys(name, call, args):
    with pytest.raises(Exception) as want:
        call(sl, *args)
    for run in (lambda: call(msl, *args), lambda: mg.vjp(lambda *a: call(msl, *a), *args)):
        with pytest.raises(type(want.value)) as got:
            run()
        assert str(got.value) == str(want.value)


def test_generalized_eig_is_refused_naming_the_rewrite():
    a, b = R(3, 3), _spd(3, 3)
    for fn in (lambda a: msl.eig(a, b)[0], lambda a: msl.eigvals(a, b)):
        with pytest.raises(UnsupportedInputError, match=r"scipy.linalg.eig.*solve\(b, a\)"):
            mg.vjp(fn, a)
    np.testing.assert_array_equal(msl.eigvals(a, b), sl.eigvals(a, b))  # (plain: SciPy's own call)
    # the rewrite it names: the same eigenvalues, differentiated
    w = mg.vjp(lambda a: msl.eigvals(msl.solve(b, a)), a)[0]
    want = sl.eigvals(a, b)
    np.testing.assert_allclose(np.min(np.abs(w[:, None] - want[None, :]), axis=1), 0.0, atol=1e-10)


def test_nested_lists_are_scipys_arrays():
    # array_like arguments: plain lists as np.asarray makes them, lists of traced numbers as one traced array
    def f(mod, t):
        x = mod.solve_toeplitz(([2.0, t], [2.0, 0.5]), [1.0, 1.0])
        e = mod.expm_frechet([[t, 0.0], [0.0, 2 * t]], [[0.0, 1.0], [1.0, 0.0]], compute_expm=False)
        return np.sum(x) + np.sum(e) + np.sum(mod.companion([1.0, t, 2.0]))

    t = 0.7
    want = (f(sl, t + 1e-6) - f(sl, t - 1e-6)) / 2e-6
    np.testing.assert_allclose(mg.grad(lambda t: f(msl, t))(t), want, rtol=1e-7)
    np.testing.assert_allclose(mg.jvp(lambda t: f(msl, t), (t,), (1.0,))[1], want, rtol=1e-7)
