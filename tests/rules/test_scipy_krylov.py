"""The Krylov solvers of mutagrad.scipy.sparse.linalg (cg, bicg, bicgstab, cgs, gmres, lgmres, minres, qmr,
gcrotmk, tfqmr): SciPy's values, and the derivative of the exact solution x = A⁻¹ b.

Oracles, never mutagrad: central differences of the same function run with plain SciPy (scipy.sparse.linalg,
rtol=1e-12) on plain arrays; and forward mode (mg.jvp) against reverse mode (mg.grad). A Hessian is checked
against central differences of a gradient written with plain SciPy solves (b̄ = A⁻ᵀ x̄).
"""
import warnings

import numpy as np
import pytest

import mutagrad as mg
from mutagrad.testing import numerical_grad

sp = pytest.importorskip("scipy.sparse")
ssl = pytest.importorskip("scipy.sparse.linalg")
import mutagrad.scipy.sparse.linalg as mssl

SOLVERS = ("cg", "bicg", "bicgstab", "cgs", "gmres", "lgmres", "minres", "qmr", "gcrotmk", "tfqmr")
HERMITIAN = ("cg", "minres")
N = 8
RNG = np.random.default_rng(7)
_R = RNG.standard_normal((N, N))
NONSYM = 4.0 * np.eye(N) + 0.5 * _R  # well conditioned, not symmetric
SPD = _R @ _R.T / N + np.eye(N)
B = RNG.standard_normal(N)
W = RNG.standard_normal(N)


def matrix(name):
    return SPD if name in HERMITIAN else NONSYM


def tight(name, **kw):
    kw.setdefault("rtol", 1e-12)
    if name != "minres":  # (minres has no atol)
        kw.setdefault("atol", 0.0)
    return kw


def solve(mod, name, A, b, **kw):
    return getattr(mod, name)(A, b, **tight(name, **kw))[0]


def fd_grad(f, x, h=1e-5):
    """Central differences of scalar f at every element of x (d/dx - i d/dy for a complex x)."""
    x = np.asarray(x)
    g = np.zeros(x.shape, complex if x.dtype.kind == "c" else float)
    for k in np.ndindex(x.shape):
        e = np.zeros_like(x)
        e[k] = h
        g[k] = (f(x + e) - f(x - e)) / (2 * h)
        if x.dtype.kind == "c":
            e[k] = 1j * h
            g[k] -= 1j * (f(x + e) - f(x - e)) / (2 * h)
    return g


def fd_dir(f, x, v, h=1e-5):
    return (f(x + h * v) - f(x - h * v)) / (2 * h)


def check(ours, plain, x, rtol=1e-6, atol=1e-8, direction=None):
    """mg.grad against central differences of the plain-SciPy function; mg.jvp against central differences
    along a direction and against the gradient (forward against reverse)."""
    g = mg.grad(ours)(x)
    np.testing.assert_allclose(g, fd_grad(plain, x), rtol=rtol, atol=atol)
    v = direction if direction is not None else RNG.standard_normal(np.shape(x)) + (
        1j * RNG.standard_normal(np.shape(x)) if np.iscomplexobj(x) else 0)
    _, t = mg.jvp(ours, (x,), (v,))
    np.testing.assert_allclose(t, fd_dir(plain, x, v), rtol=rtol, atol=atol)
    np.testing.assert_allclose(t, np.real(np.sum(g * v)), rtol=1e-9, atol=1e-12)
    return g


def loss(mod, name, A, **kw):
    return lambda b: np.sum(W * np.sin(solve(mod, name, A, b, **kw)))


# (the rule sweep: a case per primitive; every one is checked against plain SciPy below)
CASES = [(f"scipy.sparse.linalg.{name}", name) for name in SOLVERS]


# -- values ------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", SOLVERS)
def test_values_are_scipys(name):
    A = matrix(name)
    for kw in ({}, {"rtol": 1e-3}, {"maxiter": 2}):
        x, info = getattr(mssl, name)(A, B, **kw)
        x0, info0 = getattr(ssl, name)(A, B, **kw)
        np.testing.assert_array_equal(x, x0)
        assert info == info0 and type(info) is int
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (maxiter=2: the non-convergence warning, tested below)
        (x, info), _ = mg.vjp(lambda b: getattr(mssl, name)(A, b, maxiter=2), B)
    np.testing.assert_array_equal(x, getattr(ssl, name)(A, B, maxiter=2)[0])
    assert type(info) is int


# -- derivatives in b and A, each solver -------------------------------------------------------


@pytest.mark.parametrize("name", SOLVERS)
def test_derivative_in_b(name):
    A = matrix(name)
    check(loss(mssl, name, A), loss(ssl, name, A), B)


@pytest.mark.parametrize("name", SOLVERS)
def test_derivative_in_a_traced_dense_matrix(name):
    A = matrix(name)

    def ours(a):
        return np.sum(W * np.sin(solve(mssl, name, a, B)))

    def plain(a):
        return np.sum(W * np.sin(solve(ssl, name, a, B)))

    if name in HERMITIAN:  # (A must stay Hermitian: differences along symmetric directions)
        D = RNG.standard_normal((N, N))
        D = D + D.T
        g = mg.grad(ours)(A)
        np.testing.assert_allclose(np.sum(g * D), fd_dir(plain, A, D), rtol=1e-6)
        _, t = mg.jvp(ours, (A,), (D,))
        np.testing.assert_allclose(t, fd_dir(plain, A, D), rtol=1e-6)
    else:
        check(ours, plain, A)


@pytest.mark.parametrize("name", SOLVERS)
def test_derivative_with_a_sparse_matrix(name):
    A = sp.csr_array(matrix(name) * (np.abs(matrix(name)) > 0.3))
    check(loss(mssl, name, A), loss(ssl, name, A), B)


@pytest.mark.parametrize("name", ["cg", "minres", "gmres", "bicg", "bicgstab", "qmr", "lgmres"])
def test_derivative_with_a_linear_operator(name):
    A0 = matrix(name)
    A = ssl.LinearOperator((N, N), matvec=lambda v: A0 @ v, rmatvec=lambda v: A0.T @ v, dtype=float)
    check(loss(mssl, name, A), loss(ssl, name, A), B)


def test_b_given_as_a_column():
    A = NONSYM
    ours = lambda b: np.sum(W * np.sin(solve(mssl, "gmres", A, b)))
    plain = lambda b: np.sum(W * np.sin(solve(ssl, "gmres", A, b)))
    g = check(ours, plain, B.reshape(N, 1))
    assert g.shape == (N, 1)


# -- preconditioners and x0 -----------------------------------------------------------------------


# a preconditioner that is not symmetric (its adjoint, not itself, preconditions the adjoint solve)
_MINV = np.linalg.inv(NONSYM + 0.3 * RNG.standard_normal((N, N)))


def _preconditioners():
    yield "dense", _MINV
    yield "sparse", sp.csr_array(_MINV)
    yield "operator", ssl.LinearOperator((N, N), matvec=lambda v: _MINV @ v, rmatvec=lambda v: _MINV.T @ v,
                                         dtype=float)


@pytest.mark.parametrize("name", ["bicg", "bicgstab", "cgs", "gmres", "lgmres", "gcrotmk"])
def test_preconditioner(name):
    for _, M in _preconditioners():
        check(loss(mssl, name, NONSYM, M=M), loss(ssl, name, NONSYM, M=M), B)


def test_the_adjoint_solve_uses_the_preconditioners_adjoint():
    calls = {"matvec": 0, "rmatvec": 0}

    def mv(v, kind):
        calls[kind] += 1
        return (_MINV if kind == "matvec" else _MINV.T) @ v

    M = ssl.LinearOperator((N, N), matvec=lambda v: mv(v, "matvec"), rmatvec=lambda v: mv(v, "rmatvec"), dtype=float)
    f = loss(mssl, "gmres", NONSYM, M=M)
    g = mg.grad(f)(B)
    assert calls["rmatvec"] > 0
    np.testing.assert_allclose(g, fd_grad(loss(ssl, "gmres", NONSYM, M=M), B), rtol=1e-6)


@pytest.mark.parametrize("name", HERMITIAN)
def test_hermitian_preconditioner(name):
    M = np.diag(1 / np.diag(SPD))  # Jacobi
    check(loss(mssl, name, SPD, M=M), loss(ssl, name, SPD, M=M), B)


def test_qmr_with_two_preconditioners():
    # (SciPy's qmr takes them as LinearOperators only)
    M1, M2 = ssl.aslinearoperator(_MINV), ssl.aslinearoperator(np.eye(N) + 0.05 * RNG.standard_normal((N, N)))
    check(loss(mssl, "qmr", NONSYM, M1=M1, M2=M2), loss(ssl, "qmr", NONSYM, M1=M1, M2=M2), B)


def test_tfqmr_preconditioner():
    # SciPy 1.17's tfqmr applies M on the wrong side: with an M that does not commute with A its value (info 0)
    # does not solve A x = b. The value is still SciPy's; the derivative is the exact solution's (that of
    # tfqmr without M, which solves the system), as the module says.
    x, _ = mssl.tfqmr(NONSYM, B, M=_MINV)
    np.testing.assert_array_equal(x, ssl.tfqmr(NONSYM, B, M=_MINV)[0])
    # (a loss linear in x: its gradient A⁻ᵀ W does not depend on the point SciPy returns). Differentiated, the
    # call warns that its x leaves a residual above the tolerance with info 0 (the krylovuse tester: a loss
    # nonlinear in x then has a derivative at the wrong point, silently)
    with pytest.warns(UserWarning, match=r"returned info=0 .* residual \|b - A x\| above the tolerance"):
        check(lambda b: W @ solve(mssl, "tfqmr", NONSYM, b, M=_MINV), lambda b: W @ solve(ssl, "tfqmr", NONSYM, b),
              B)
    assert np.linalg.norm(B - NONSYM @ x) > 1e-3 * np.linalg.norm(B)  # (what the warning is about, by hand)


@pytest.mark.parametrize("name", ["cg", "gmres", "bicgstab", "minres"])
def test_x0_has_no_derivative(name):
    A = matrix(name)
    x0 = RNG.standard_normal(N)
    check(loss(mssl, name, A, x0=x0), loss(ssl, name, A, x0=x0), B)

    # x0 = b itself, traced: the exact solution does not depend on x0
    def ours(b):
        return np.sum(W * np.sin(solve(mssl, name, A, b, x0=b)))

    def plain(b):
        return np.sum(W * np.sin(solve(ssl, name, A, b, x0=b)))

    check(ours, plain, B)


# -- complex -----------------------------------------------------------------------------------------


_CNONSYM = NONSYM + 0.4j * RNG.standard_normal((N, N))
_C = RNG.standard_normal((N, N)) + 1j * RNG.standard_normal((N, N))
_HPD = _C @ _C.conj().T / N + np.eye(N)


@pytest.mark.parametrize("name,A", [("gmres", _CNONSYM), ("bicgstab", _CNONSYM), ("qmr", _CNONSYM), ("cg", _HPD)],
                         ids=["gmres", "bicgstab", "qmr", "cg"])
def test_complex(name, A):
    c = RNG.standard_normal(N) + 1j * RNG.standard_normal(N)

    def f(mod):
        return lambda b: np.sum(np.abs(solve(mod, name, A, b) - c) ** 2)

    bc = B + 1j * W
    check(f(mssl), f(ssl), bc)  # complex b
    check(f(mssl), f(ssl), B)  # real b, complex A
    if name in HERMITIAN:
        return

    def g(mod):
        return lambda a: np.sum(np.abs(solve(mod, name, a, bc) - c) ** 2)

    check(g(mssl), g(ssl), A)  # a traced complex A


# -- higher order ---------------------------------------------------------------------------------


def _plain_grad_b(name, A, b):
    """∇_b Σ sin(x) · W with plain SciPy: A⁻ᵀ (W cos x) (A⁻¹ for the Hermitian solvers)."""
    x = solve(ssl, name, A, b)
    return solve(ssl, name, A if name in HERMITIAN else A.T, W * np.cos(x))


@pytest.mark.parametrize("name", ["gmres", "cg", "bicgstab"])
def test_hessian_in_b(name):
    A = matrix(name)
    f = loss(mssl, name, A)
    H = mg.hessian(f)(B)
    H_fd = np.stack([fd_dir(lambda b: _plain_grad_b(name, A, b), B, e) for e in np.eye(N)], axis=-1)
    np.testing.assert_allclose(H, H_fd, rtol=1e-5, atol=1e-8)
    v = RNG.standard_normal(N)
    np.testing.assert_allclose(mg.jvp(mg.grad(f), (B,), (v,))[1], H_fd @ v, rtol=1e-5, atol=1e-8)


@pytest.mark.parametrize("name", ["gmres", "cg"])
def test_hessian_in_a_parameter_of_the_matrix(name):
    A0 = matrix(name)
    A1 = RNG.standard_normal((N, N))
    A1 = A1 + A1.T if name in HERMITIAN else A1

    def ours(t):
        return np.sum(W * np.sin(solve(mssl, name, A0 + t * A1, B)))

    def plain_grad(t):  # d/dt = -ȳᵀ A1 x, ȳ = A⁻ᵀ (W cos x)
        A = A0 + t * A1
        x = solve(ssl, name, A, B)
        y = solve(ssl, name, A if name in HERMITIAN else A.T, W * np.cos(x))
        return -y @ A1 @ x

    t = 0.1
    d2 = fd_dir(plain_grad, t, 1.0)
    np.testing.assert_allclose(mg.hessian(ours)(t), d2, rtol=1e-5)
    np.testing.assert_allclose(mg.jvp(mg.grad(ours), (t,), (1.0,))[1], d2, rtol=1e-5)
    np.testing.assert_allclose(mg.grad(ours)(t), fd_dir(ours, t, 1.0), rtol=1e-6)


def test_minres_shift():
    def ours(s):
        return np.sum(W * np.sin(solve(mssl, "minres", SPD, B, shift=s)))

    def plain(s):
        return np.sum(W * np.sin(solve(ssl, "minres", SPD, B, shift=s)))

    def plain_grad(s):  # x = (A - sI)⁻¹ b: d/ds = ȳᵀ x, ȳ = (A - sI)⁻¹ (W cos x)
        x = solve(ssl, "minres", SPD, B, shift=s)
        return solve(ssl, "minres", SPD, W * np.cos(x), shift=s) @ x

    s = 0.3
    np.testing.assert_allclose(mg.grad(ours)(s), fd_dir(plain, s, 1.0), rtol=1e-6)
    np.testing.assert_allclose(mg.jvp(ours, (s,), (1.0,))[1], fd_dir(plain, s, 1.0), rtol=1e-6)
    np.testing.assert_allclose(mg.hessian(ours)(s), fd_dir(plain_grad, s, 1.0), rtol=1e-5)
    check(lambda b: np.sum(W * np.sin(solve(mssl, "minres", SPD, b, shift=s))),
          lambda b: np.sum(W * np.sin(solve(ssl, "minres", SPD, b, shift=s))), B)


def test_hessian_with_a_sparse_matrix():
    A = sp.csc_array(NONSYM)
    H = mg.hessian(loss(mssl, "bicgstab", A))(B)
    H_fd = np.stack([fd_dir(lambda b: _plain_grad_b("bicgstab", NONSYM, b), B, e) for e in np.eye(N)], axis=-1)
    np.testing.assert_allclose(H, H_fd, rtol=1e-5, atol=1e-8)


@pytest.mark.parametrize("name,A", [("cgs", np.array([[4.0, 1.0], [0.0, 2.0]])),
                                    ("qmr", np.array([[2.0, 1.0], [0.0, 4.0]]))], ids=["cgs", "qmr"])
def test_a_breakdown_of_a_derivative_solve_is_solved_again_by_gmres(name, A):
    # the cotangent of x[0] is e₀, on which these solvers break down for Aᵀ (info < 0), as SciPy's own call shows
    e0 = np.array([1.0, 0.0])
    assert getattr(ssl, name)(A.T, e0, **tight(name))[1] < 0
    b = np.array([1.0, 2.0])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        g = mg.grad(lambda b: solve(mssl, name, A, b)[0])(b)
        J = mg.jacobian(lambda b: solve(mssl, name, A, b))(b)
    # (the call itself, on b and its neighbours, converges)
    np.testing.assert_allclose(g, fd_grad(lambda b: solve(ssl, name, A, b)[0], b), rtol=1e-7)
    np.testing.assert_allclose(J, np.stack([fd_dir(lambda b: solve(ssl, name, A, b), b, e) for e in np.eye(2)],
                                           axis=-1), rtol=1e-7, atol=1e-10)


# -- callback, warnings and errors --------------------------------------------------------------


def test_the_callback_gets_plain_arrays_of_the_call_only():
    seen, plain_seen = [], []
    mg.grad(lambda b: np.sum(mssl.gmres(NONSYM, b, callback=seen.append, callback_type="x")[0]))(B)
    ssl.gmres(NONSYM, B, callback=plain_seen.append, callback_type="x")
    assert seen and all(type(v) is np.ndarray for v in seen)
    assert len(seen) == len(plain_seen)  # (not called by the derivative's solves)
    seen.clear()
    mg.jvp(lambda b: mssl.cg(SPD, b, callback=lambda xk: seen.append(type(xk)))[0], (B,), (W,))
    assert seen and set(seen) == {np.ndarray}


def test_non_convergence_warns_and_returns_scipys_iterate():
    f = lambda b: np.sum(mssl.gmres(NONSYM, b, restart=2, maxiter=1)[0])
    with pytest.warns(UserWarning) as record:
        val, _ = mg.value_and_grad(f)(B)
    messages = [str(w.message) for w in record]
    assert any(m.startswith("scipy.sparse.linalg.gmres did not converge") and "Raise maxiter" in m
               and "info=1" in m for m in messages)
    # (its derivative's solves take the call's maxiter: they warn too)
    assert any("the adjoint (Aᴴ y = x̄) solve of its derivative by gmres did not converge" in m for m in messages)
    assert {w.filename for w in record} == {__file__}  # (at the user's line, the pullback's too)
    np.testing.assert_allclose(val, np.sum(ssl.gmres(NONSYM, B, restart=2, maxiter=1)[0]), rtol=1e-14)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        mssl.gmres(NONSYM, B, restart=2, maxiter=1)  # (a plain call: SciPy's, no warning)


def test_a_derivative_solve_that_does_not_converge_warns():
    # the call converges to rtol=1e-2 in the iterations allowed, the derivative's solve to 1e-12 does not
    A, b = np.diag(np.logspace(0, 2, 40)), np.ones(40)
    assert ssl.cg(A, b, rtol=1e-2, maxiter=25)[1] == 0
    assert ssl.cg(A, b, rtol=1e-12, atol=0.0, maxiter=25)[1] != 0
    with pytest.warns(UserWarning, match=r"cg: the adjoint .* did not converge to rtol=1e-12.*Raise maxiter"):
        mg.grad(lambda b: np.sum(mssl.cg(A, b, rtol=1e-2, maxiter=25)[0]))(b)
    with pytest.warns(UserWarning, match=r"cg: the tangent .* did not converge"):
        mg.jvp(lambda b: mssl.cg(A, b, rtol=1e-2, maxiter=25)[0], (b,), (b,))
    with warnings.catch_warnings():  # (with SciPy's default maxiter, it converges)
        warnings.simplefilter("error")
        mg.grad(lambda b: np.sum(mssl.cg(A, b, rtol=1e-2)[0]))(b)


def test_a_sparse_matrix_whose_data_is_traced_is_refused():
    K0 = sp.csr_matrix(SPD * (np.abs(SPD) > 0.2))

    def f(s):
        K = K0.copy()
        K.data = K.data * s
        return np.sum(mssl.cg(K, B)[0])

    with pytest.raises(mg.errors.TracedTypeError, match=r"scipy\.sparse\.linalg\.cg of a scipy\.sparse matrix "
                                                        r"holding traced values.*pass that traced array"):
        mg.grad(f)(1.5)


def test_an_operator_without_rmatvec():
    A = ssl.LinearOperator((N, N), matvec=lambda v: NONSYM @ v, dtype=float)
    with pytest.raises(mg.errors.NoRuleError, match=r"scipy\.sparse\.linalg\.gmres at .*adjoint of A, a "
                                                    r"LinearOperator that has no rmatvec.*rmatvec=fh"):
        mg.grad(loss(mssl, "gmres", A))(B)
    # a preconditioner without rmatvec (an incomplete factorization's solve: the krylovuse tester) shapes the
    # iteration only: the adjoint solve goes on without it
    M = ssl.LinearOperator((N, N), matvec=lambda v: _MINV @ v, dtype=float)
    check(loss(mssl, "bicgstab", NONSYM, M=M), loss(ssl, "bicgstab", NONSYM), B)
    # a preconditioner computing with traced values (a Jacobi preconditioner of a traced matrix) is its values
    def jacobi(b):
        d = np.diag(NONSYM) * (1.0 + 0.0 * b[0])
        P = ssl.LinearOperator((N, N), matvec=lambda v: v / d, dtype=float)
        return W @ solve(mssl, "gmres", NONSYM, b, M=P)

    check(jacobi, lambda b: W @ solve(ssl, "gmres", NONSYM, b), B)
    # and so under a forward jacobian, whose runs apply it to other vectors (regress107: MutationError), and with
    # an rmatvec computing with traced values too, which bicg applies (regress107: refused)
    def scaled(p):
        d = np.diag(NONSYM) * (1.0 + 0.0 * p[0])
        P = ssl.LinearOperator((N, N), matvec=lambda v: v / d, rmatvec=lambda v: v / d, dtype=float)
        return solve(mssl, "bicg", NONSYM + np.diag(p), B, M=P)

    p0 = np.linspace(0.1, 0.5, N)
    plain_scaled = lambda p: solve(ssl, "bicg", NONSYM + np.diag(p), B)
    want = numerical_grad(lambda p: W @ plain_scaled(p), (p0,), (0,))[0]
    np.testing.assert_allclose(mg.grad(lambda p: W @ scaled(p))(p0), want, rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(W @ mg.jacobian(scaled, mode="fwd")(p0), want, rtol=1e-6, atol=1e-9)
    # without dtype=, SciPy applies the matvec to zeros to find it: refused there, naming dtype= (regress109)
    def untyped(b):
        d = np.diag(NONSYM) * (1.0 + 0.0 * b[0])
        P = ssl.LinearOperator((N, N), matvec=lambda v: v / d)
        return W @ solve(mssl, "gmres", NONSYM, b, M=P)

    with pytest.raises(mg.TracerEscapeError, match=r"Give it dtype=float"):
        mg.grad(untyped)(B)
    # an A computing with traced values is refused, naming the operator and the dense rewrite
    def traced_operator(k):
        op = ssl.LinearOperator((N, N), matvec=lambda v: k * (SPD @ v), dtype=float)
        return np.sum(mssl.cg(op, B)[0])

    with pytest.raises(mg.TracerEscapeError, match=r"the LinearOperator A computes with traced values.*toarray"):
        mg.grad(traced_operator)(2.0)
    # forward mode, and a Hermitian solver's adjoint (A itself), need none
    Asym = ssl.LinearOperator((N, N), matvec=lambda v: SPD @ v, dtype=float)
    check(loss(mssl, "cg", Asym), loss(ssl, "cg", Asym), B)
    _, t = mg.jvp(loss(mssl, "gmres", A), (B,), (W,))
    np.testing.assert_allclose(t, fd_dir(loss(ssl, "gmres", A), B, W), rtol=1e-6)
