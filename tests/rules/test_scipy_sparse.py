"""Constant scipy.sparse matrices: their products with traced arrays and the sparse solves of
mutagrad.scipy.sparse.linalg, against central differences (check_grads: both modes, second
order) and SciPy's own values."""
import numpy as np
import pytest

import mutagrad as mg
from mutagrad.testing import check_grads, numerical_grad

sp = pytest.importorskip("scipy.sparse")
ssl = pytest.importorskip("scipy.sparse.linalg")
import mutagrad.scipy.sparse.linalg as mssl

RNG = np.random.default_rng(0)
DENSE = RNG.standard_normal((5, 4)) * (RNG.random((5, 4)) < 0.5)
MAKERS = [sp.csr_matrix, sp.csc_array, sp.coo_matrix, sp.csr_array, sp.lil_matrix, sp.bsr_array]


PRODUCT = "scipy.sparse matrix product (A @ x, x @ A, A.dot(x))"
_A = sp.csr_matrix(DENSE)
_K = sp.csc_matrix(np.diag([4.0, 5.0, 6.0, 7.0]) + np.diag([1.0, -1.0, 0.5], 1))
_LU = mssl.splu(_K)
CASES = [  # (what it covers, function, arguments, order): check_grads in both modes
    (PRODUCT, lambda x: np.sin(_A @ x), (RNG.standard_normal(4),), 2),
    (PRODUCT, lambda y: np.cos(y @ _A), (RNG.standard_normal((2, 5)),), 2),
    ("scipy.sparse.linalg.spsolve", lambda b: np.exp(mssl.spsolve(_K, b)), (RNG.standard_normal(4),), 2),
    ("scipy.sparse.linalg.SuperLU.solve", lambda b: np.sin(_LU.solve(b, "T")), (RNG.standard_normal((4, 2)),), 2),
    ("scipy.sparse.linalg.spsolve_triangular", lambda b: np.exp(mssl.spsolve_triangular(sp.csr_array(np.tril(
        _K.toarray().T)), b)), (RNG.standard_normal(4),), 2),
]


@pytest.mark.parametrize("covers,fn,args,order", CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_rule(covers, fn, args, order):
    check_grads(fn, *args, modes=("fwd", "rev"), order=order)


@pytest.mark.parametrize("make", MAKERS, ids=lambda m: m.__name__)
def test_products_of_a_constant_sparse_matrix(make):
    A = make(DENSE)
    x, X, Y = RNG.standard_normal(4), RNG.standard_normal((4, 3)), RNG.standard_normal((2, 5))
    cases = [(lambda x: A @ x, x), (lambda x: A.dot(x), x), (lambda X: A @ X, X), (lambda y: y @ A, Y),
             (lambda y: A.T @ y, Y[0]), (lambda x: A @ x.reshape(4, 1), x)]
    if sp.isspmatrix(A):  # (`*` is the matrix product of the spmatrix classes)
        cases += [(lambda x: A * x, x), (lambda y: y * A, Y[0])]
    for prod, arg in cases:
        np.testing.assert_array_equal(mg.vjp(prod, arg)[0], prod(arg))  # SciPy's own product
        check_grads(lambda v, prod=prod: np.sum(np.sin(prod(v)) ** 2), arg, order=2)


def test_products_of_a_complex_sparse_matrix():
    A = sp.csr_matrix(DENSE + 1j * np.roll(DENSE, 1))
    x = RNG.standard_normal(4)
    check_grads(lambda x: np.sum(np.abs(A @ x) ** 2), x, order=2)
    check_grads(lambda z: np.sum(np.abs(z @ A.T) ** 2), x + 0.3j, order=2)


def test_the_matrix_as_it_was_at_the_product():
    # the matrix is changed in place after its product: the derivative is the product's then
    D = RNG.standard_normal((4, 4)) * (RNG.random((4, 4)) < 0.6)
    A = sp.csr_matrix(D)

    def f(x):
        y = A @ x
        A.data *= 2.0
        z = A @ np.sin(y)
        A.data /= 2.0
        return np.sum(z ** 2)

    x = RNG.standard_normal(4)
    np.testing.assert_allclose(mg.grad(f)(x), numerical_grad(f, (x,), (0,))[0], rtol=1e-7)
    np.testing.assert_array_equal(A.toarray(), D)

    def power(x):  # many products of one matrix
        for _ in range(30):
            x = A @ x
            x = x / np.linalg.norm(x)
        return x[0] + x[1]

    np.testing.assert_allclose(mg.grad(power)(x), numerical_grad(power, (x,), (0,))[0], rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(mg.jacobian(lambda x: A @ x, mode="fwd")(x), D, rtol=0, atol=0)


@pytest.mark.parametrize("dtype", [np.float64, np.complex128])
def test_sparse_solves(dtype):
    n = 6
    D = RNG.standard_normal((n, n)) * (RNG.random((n, n)) < 0.4) + 4 * np.eye(n)
    if dtype == np.complex128:
        D = D + 0.5j * np.eye(n, k=1)
    A = sp.csc_matrix(D)
    b, B = RNG.standard_normal(n), RNG.standard_normal((n, 2))
    lu, solve = mssl.splu(A), mssl.factorized(A)
    cases = [(lambda b: mssl.spsolve(A, b), lambda b: ssl.spsolve(A, b), b),
             (lambda B: mssl.spsolve(sp.csr_array(A), B), lambda B: ssl.spsolve(sp.csr_array(A), B), B),
             (lambda b: mssl.spsolve(A, b.reshape(n, 1)), lambda b: ssl.spsolve(A, b.reshape(n, 1)), b),
             (lambda b: lu.solve(b), lambda b: ssl.splu(A).solve(b), b),
             (lambda b: lu.solve(b, "T"), lambda b: ssl.splu(A).solve(b, "T"), b),
             (lambda B: lu.solve(B, "H"), lambda B: ssl.splu(A).solve(B, "H"), B),
             (lambda b: solve(b), lambda b: ssl.factorized(A)(b), b)]
    for ours, theirs, arg in cases:
        np.testing.assert_array_equal(mg.vjp(ours, arg)[0], theirs(arg))
        check_grads(lambda v, ours=ours: np.sum(np.abs(ours(np.sin(v))) ** 2), arg, order=2)
        if dtype == np.complex128:
            check_grads(lambda v, ours=ours: np.sum(np.abs(ours(v)) ** 2), arg + 0.2j, order=2)
    assert lu.shape == (n, n) and lu.nnz == ssl.splu(A).nnz  # SciPy's attributes


@pytest.mark.parametrize("fmt", [sp.csr_array, sp.csc_matrix])
@pytest.mark.parametrize("lower,unit", [(True, False), (False, False), (True, True), (False, True)])
def test_sparse_triangular_solves(fmt, lower, unit):
    # (optctl: refused, though linear in b as spsolve is)
    n = 6
    M = np.tril(RNG.standard_normal((n, n)) * (RNG.random((n, n)) < 0.6)) + 3 * np.eye(n)
    T = fmt(M if lower else M.T)
    w = RNG.standard_normal((n, 2))
    for b in (RNG.standard_normal(n), RNG.standard_normal((n, 2))):
        def ours(b, ow=False):
            return mssl.spsolve_triangular(T, b, lower=lower, unit_diagonal=unit, overwrite_b=ow)

        def theirs(b, ow=False):
            return ssl.spsolve_triangular(T, b, lower=lower, unit_diagonal=unit, overwrite_b=ow)

        np.testing.assert_array_equal(mg.vjp(ours, b)[0], theirs(b))  # SciPy's own values
        check_grads(lambda v: np.sum(np.sin(ours(v)) * w[:, :np.ndim(v)].squeeze()), b, order=2)

        # overwrite_b=True on the argument itself: the argument ends as SciPy's call leaves it, and the
        # derivative of what is read afterwards is the plain program's (central differences)
        def f(v, mod=mssl):
            x = (ours if mod is mssl else theirs)(v, True)
            return np.sum(x * w[:, :np.ndim(v)].squeeze()) + 0.1 * np.sum(v * v)

        arg, plain = b.copy(), b.copy()
        g = mg.grad(f)(arg)
        f(plain, None)
        np.testing.assert_array_equal(arg, plain)
        np.testing.assert_allclose(g, numerical_grad(lambda v: f(v.copy(), None), (b,), (0,))[0], rtol=1e-6, atol=1e-8)


def test_a_sparse_matrix_whose_data_is_traced_names_the_dense_fix_which_works():
    # (fem: K.data = traced values with the pattern kept; the solvers' messages named the C code, or the
    # mutagrad functions being called, as the fix)
    K0 = sp.csc_matrix(np.diag([2.0, 3.0, 4.0, 5.0]) + np.diag([1.0, 1.0, 1.0], 1))
    b = np.ones(4)
    for solve in (lambda K: mssl.spsolve(K, b), lambda K: mssl.splu(K).solve(b),
                  lambda K: mssl.factorized(K)(b), lambda K: mssl.spsolve_triangular(K, b, lower=False)):
        def J(s, solve=solve):
            K = K0.copy()
            K.data = K.data * s
            return np.sum(solve(K))

        with pytest.raises(mg.errors.TracedTypeError, match=r"holding traced values .*np.linalg.solve\(K, b\)"):
            mg.grad(J)(np.array(1.5))
    # the fix: K(s) = s K0 dense; by hand, d/ds sum(K(s)⁻¹ b) = -sum(K0⁻¹ b) / s²
    g = mg.grad(lambda s: np.sum(np.linalg.solve(K0.toarray() * s, b)))(np.array(1.5))
    np.testing.assert_allclose(g, -np.sum(np.linalg.solve(K0.toarray(), b)) / 1.5 ** 2, rtol=1e-14)


def test_a_triangular_solve_of_another_format_warns_once_as_scipy_does():
    # (regress23: the reverse pass solved with the adjoint in COO again, and SciPy warned a second time)
    import warnings

    T = sp.coo_array(np.tril(np.ones((3, 3))) + np.eye(3))
    b = np.array([1.0, 2.0, 3.0])
    with warnings.catch_warnings(record=True) as plain:
        warnings.simplefilter("always")
        ssl.spsolve_triangular(T, b)
    with warnings.catch_warnings(record=True) as ours:
        warnings.simplefilter("always")
        g = mg.grad(lambda b: np.sum(mssl.spsolve_triangular(T, b)))(b)
    assert len(ours) == len(plain) == 1
    np.testing.assert_allclose(g, np.linalg.solve(T.toarray().T, np.ones(3)), rtol=1e-14)  # b̄ = T⁻ᵀ 1


def test_a_sparse_matrix_scaled_by_a_traced_number_names_the_rewrite_which_works():
    # (optctl: the message spoke of a dense array where the operand was a number)
    L = sp.diags_array([np.ones(4), -2 * np.ones(5), np.ones(4)], offsets=[-1, 0, 1], format="csr")
    v = np.linspace(0.1, 0.9, 5)
    with pytest.raises(mg.TracerEscapeError, match=r"scales a sparse matrix by a number.*v - c \* \(L @ v\)"):
        mg.grad(lambda p: np.sum((sp.identity(5) - p[0] * L) @ v))(np.array([0.1]))
    # by hand: d/dc sum(v - c L v) = -sum(L v)
    g = mg.grad(lambda p: np.sum(v - p[0] * (L @ v)))(np.array([0.1]))
    np.testing.assert_allclose(g, [-np.sum(L @ v)], rtol=1e-15)


def test_expm_multiply_over_an_interval_names_the_rewrite_which_works():
    # (optctl: the message said only that SciPy's own function has no rule)
    A = sp.csc_array(np.array([[-1.0, 0.5], [0.2, -2.0]]))
    with pytest.raises(mg.TracerEscapeError, match=r"call it once per time: np.stack\(\[expm_multiply\(t \* A, b\)"):
        mg.grad(lambda b: np.sum(mssl.expm_multiply(A, b, start=0.0, stop=1.0, num=3)))(np.ones(2))
    ts = np.linspace(0.0, 1.0, 3)

    def f(b, mod=mssl):
        return np.sum(np.sin(np.stack([mod.expm_multiply(t * A, b) for t in ts])))

    b = np.array([0.3, -0.8])
    np.testing.assert_allclose(mg.grad(f)(b), numerical_grad(lambda v: f(v, ssl), (b,), (0,))[0], rtol=1e-7)
    dense = A.toarray()  # (the bateman tester: a dense A is converted by its products with b; the message says so)
    with pytest.raises(mg.TracerEscapeError, match=r"pass a dense A as scipy.sparse.csr_array\(A\)"):
        mg.grad(lambda b: np.sum(np.sin(mssl.expm_multiply(dense, b))))(b)
    np.testing.assert_allclose(mg.grad(lambda b: np.sum(np.sin(mssl.expm_multiply(sp.csr_array(dense), b))))(b),
                               numerical_grad(lambda v: np.sum(np.sin(ssl.expm_multiply(dense, v))), (b,), (0,))[0],
                               rtol=1e-7)


def test_sparse_matrices_from_traced_values_and_scipys_own_solvers_name_the_fix():
    with pytest.raises(mg.TracerEscapeError, match=r"cannot be built from traced values.*A @ x"):
        mg.grad(lambda w: np.sum(sp.csr_matrix((w, ([0, 1], [1, 0])), shape=(2, 2)) @ np.ones(2)))(np.ones(2))
    with pytest.raises(mg.TracerEscapeError, match=r"Use mutagrad.scipy.sparse.linalg in place"):
        mg.grad(lambda b: np.sum(ssl.spsolve(sp.csc_matrix(np.eye(2)), b)))(np.ones(2))
    with pytest.raises(mg.TracerEscapeError, match=r"mutagrad.scipy.sparse.linalg.lsqr is SciPy's own"):
        mg.grad(lambda b: np.sum(mssl.lsqr(sp.csc_matrix(np.eye(2)), b)[0]))(np.ones(2))
    for solve in (lambda a: mssl.spsolve(a, np.ones(2)), lambda a: mssl.splu(a).solve(np.ones(2))):
        with pytest.raises(mg.errors.TracedTypeError, match=r"with a traced matrix at .*np.linalg.solve\(A, b\)"):
            mg.grad(lambda a, solve=solve: np.sum(solve(a)))(np.eye(2))
    # a sparse matrix added to (or multiplied elementwise with) a traced array: SciPy's plain copy of it;
    # the advice, the dense matrix, is differentiated (d/dv sum(sin(v + A)) = cos(v + A) summed over rows)
    A = sp.csr_array(np.array([[2.0, 0.0], [1.0, 3.0]]))
    v = np.array([0.5, -1.0])
    for f in (lambda v: np.sum(np.sin(v + A)), lambda v: np.sum(A + v), lambda v: np.sum(A * v)):
        with pytest.raises(mg.TracerEscapeError, match=r"A.toarray\(\) \(v \+ A.toarray\(\)"):
            mg.grad(f)(v)
    np.testing.assert_allclose(mg.grad(lambda v: np.sum(np.sin(v + A.toarray())))(v),
                               np.cos(v + A.toarray()).sum(axis=0), rtol=1e-15)
    # x - A of a *_matrix class is an np.matrix (SciPy's): the message says where it came from
    M = sp.csr_matrix(A.toarray())
    with pytest.raises(mg.NoRuleError, match=r"scipy.sparse's \*_matrix classes give np.matrix results"):
        mg.grad(lambda v: np.sum(np.asarray(v - M)))(v)
    for make in (sp.csr_array, sp.csr_matrix, sp.bsr_array):  # (SciPy's "unrecognized ... input" before)
        with pytest.raises(mg.TracerEscapeError, match=rf"scipy.sparse function {make.__name__} .*A @ x"):
            mg.grad(lambda x, make=make: np.sum(make(np.diag(x)) @ np.ones(3)))(np.ones(3))
    with pytest.raises(mg.TracerEscapeError, match="scipy.sparse function __matmul__"):  # a list of traced numbers
        mg.grad(lambda x: np.sum(sp.csr_array(np.eye(2)) @ [x[0], x[1]]))(np.ones(2))
    with pytest.raises(ValueError, match="trans must be N, T, or H"):  # (SciPy's error)
        mssl.splu(sp.csc_array(np.eye(2))).solve(np.ones(2), trans="C")


def test_a_right_hand_side_given_as_a_list_of_traced_numbers():
    A = sp.csc_array(np.array([[4.0, 1.0, 0.0], [1.0, 3.0, 0.5], [0.0, 0.5, 2.0]]))
    lu = mssl.splu(A)
    for solve in (lambda b: mssl.spsolve(A, b), lambda b: lu.solve(b)):
        check_grads(lambda x, solve=solve: np.sum(solve([x[0], x[1] ** 2, 1.0]) ** 2), np.array([0.3, 0.7]), order=2)


def test_a_sparse_product_of_a_constant_copy_then_written_with_traced_values():
    # SciPy's K @ u converts u with np.asarray (its memory, handed out): the plain array is gone
    # when u is written, which was refused as if it were still held
    K = sp.identity(3, format="csr") * 2.0

    def f(amp, u0):
        u = u0.copy()
        r = K @ u
        u[:] = amp * r
        return np.sum(u ** 2)

    u0 = np.array([1.0, -2.0, 0.5])
    h = 1e-6
    fd = (f(2.0 + h, u0) - f(2.0 - h, u0)) / (2 * h)
    np.testing.assert_allclose(mg.grad(f)(2.0, u0.copy()), fd, rtol=1e-7)


def test_a_closed_over_sparse_matrix_s_transpose_in_a_loop_is_kept_once():
    # (tomography tester) `A.T @ r` of a closed-over csr A in a Landweber loop: each A.T is a new csc matrix
    # over A's arrays, and each kept its own copy (tape memory one matrix per iteration). The gradient: the
    # loop is linear in b, so its derivative is checked against central differences of the plain loop
    import tracemalloc

    A = sp.random(300, 200, density=0.2, format="csr", random_state=3)
    b = np.random.default_rng(3).random(300)
    target = np.linspace(0.0, 1.0, 200)

    def landweber(bb, niter):
        x = np.zeros_like(bb, shape=200)
        for _ in range(niter):
            x += 1e-3 * (A.T @ (bb - A @ x))
        return 0.5 * np.sum((x - target) ** 2)

    peaks = []
    for niter in (5, 40):
        tracemalloc.start()
        g = mg.grad(landweber)(b.copy(), niter)
        peaks.append(tracemalloc.get_traced_memory()[1])
        tracemalloc.stop()
    nbytes = A.data.nbytes + A.indices.nbytes + A.indptr.nbytes
    assert peaks[1] - peaks[0] < 2 * nbytes  # (was 35 more copies)
    e = np.zeros(300)
    e[7] = 1.0
    fd = (landweber(b + 1e-6 * e, 40) - landweber(b - 1e-6 * e, 40)) / 2e-6
    np.testing.assert_allclose(g[7], fd, rtol=1e-6)


def test_spilu_solve_is_differentiated_in_the_right_hand_side():
    # (the sparsesolve tester) an ILU preconditioner's solve, a linear map with fixed incomplete factors, raised
    # a TracedTypeError; now as splu's, in every trans. Oracles: central differences of the plain function, and
    # SciPy's own values bit for bit
    import scipy.sparse.linalg as ssl

    n = 30
    A = (sp.diags([-1.0, 2.5, -1.2], [-1, 0, 1], shape=(n, n))
         + sp.random(n, n, density=0.05, random_state=4902, format="csc")).tocsc()
    ilu = mssl.spilu(A, drop_tol=1e-2)
    r = np.linspace(1.0, 2.0, n)
    assert np.array_equal(ilu.solve(r), ssl.spilu(A, drop_tol=1e-2).solve(r))
    w = np.arange(n, dtype=float)
    for trans in ("N", "T", "H"):
        f = lambda r, trans=trans: w @ ilu.solve(r * r, trans=trans)
        fd = np.array([(f(r + 1e-6 * e) - f(r - 1e-6 * e)) / 2e-6 for e in np.eye(n)])
        np.testing.assert_allclose(mg.grad(f)(r), fd, rtol=1e-6, atol=1e-9)
        np.testing.assert_allclose(mg.jvp(f, (r,), (w,))[1], mg.grad(f)(r) @ w, rtol=1e-12)
