"""overwrite_a / overwrite_b of mutagrad.scipy.linalg (rules/scipy/linalg.py): after mg.grad and
mg.jvp the value and every argument hold what a plain SciPy call leaves, bit for bit (DESIGN 1.2.5),
for C- and Fortran-ordered inputs; the derivatives agree with central differences of the plain
SciPy function and with each other. What SciPy leaves is SciPy's decision: each case asks SciPy
(unchanged, one of its results, or intermediate values, which have no derivative)."""
import copy

import numpy as np
import pytest

sl = pytest.importorskip("scipy.linalg")

import mutagrad as mg
import mutagrad.scipy.linalg as msl
from mutagrad.testing import numerical_grad

rng = np.random.default_rng(5)
N = 3


def R(*shape):
    return rng.standard_normal(shape)


def WELL(*shape):
    return R(*shape) + 4 * np.eye(shape[-1])


def SPD(*shape):
    a = R(*shape)
    return a @ np.swapaxes(a, -1, -2) + shape[-1] * np.eye(shape[-1])


def BAND(lower, upper, n):
    ab = R(lower + upper + 1, n)
    ab[upper] += 8.0
    return ab


def HBAND(p, n, lower=False):
    ab = R(p + 1, n)
    ab[0 if lower else p] = 8.0 + np.abs(R(n))
    return ab


_A = WELL(N, N)
_LU, _PIV = sl.lu_factor(_A)
_C = sl.cho_factor(SPD(N, N), lower=True)[0]
_LU2 = [sl.lu_factor(m) for m in WELL(2, N, N)]

# (id, call(la, *args) with the flags, the arrays (the differentiated arguments))
CASES = [
    ("solve_triangular-b", lambda la, a, b: la.solve_triangular(a, b, lower=True, overwrite_b=True), (WELL(N, N), R(N))),
    ("solve_triangular-B", lambda la, a, b: la.solve_triangular(a, b, trans=1, overwrite_b=True), (WELL(N, N), R(N, 2))),
    ("solve_banded-11", lambda la, ab, b: la.solve_banded((1, 1), ab, b, overwrite_ab=True, overwrite_b=True),
     (BAND(1, 1, 4), R(4))),
    ("solve_banded-21", lambda la, ab, b: la.solve_banded((2, 1), ab, b, overwrite_ab=True, overwrite_b=True),
     (BAND(2, 1, 4), R(4, 2))),
    ("solveh_banded-1", lambda la, ab, b: la.solveh_banded(ab, b, overwrite_ab=True, overwrite_b=True),
     (HBAND(1, 4), R(4))),
    ("solveh_banded-2", lambda la, ab, b: la.solveh_banded(ab, b, overwrite_ab=True, overwrite_b=True, lower=True),
     (HBAND(2, 4, lower=True), R(4, 2))),
    ("cholesky", lambda la, a: la.cholesky(a, overwrite_a=True), (SPD(N, N),)),
    ("cholesky-lower", lambda la, a: la.cholesky(a, lower=True, overwrite_a=True), (SPD(N, N),)),
    ("cho_factor", lambda la, a: la.cho_factor(a, overwrite_a=True), (SPD(N, N),)),
    ("cho_factor-lower", lambda la, a: la.cho_factor(a, True, True), (SPD(N, N),)),  # (flags by position)
    ("cho_solve-b", lambda la, c, b: la.cho_solve((c, True), b, overwrite_b=True), (_C, R(N))),
    ("cho_solve-B", lambda la, c, b: la.cho_solve((c, True), b, True), (_C, R(N, 2))),
    ("lu_factor", lambda la, a: la.lu_factor(a, overwrite_a=True), (WELL(N, N),)),
    ("lu_factor-tall", lambda la, a: la.lu_factor(a, overwrite_a=True), (R(4, 2),)),
    ("lu", lambda la, a: la.lu(a, overwrite_a=True), (WELL(N, N),)),
    ("lu-tall-permute_l", lambda la, a: la.lu(a, permute_l=True, overwrite_a=True), (R(4, 2),)),
    ("lu_solve-b", lambda la, lu, b: la.lu_solve((lu, _PIV), b, overwrite_b=True), (_LU, R(N))),
    ("lu_solve-B", lambda la, lu, b: la.lu_solve((lu, _PIV), b, trans=1, overwrite_b=True), (_LU, R(N, 2))),
    ("svd", lambda la, a: la.svd(a, overwrite_a=True), (R(N, N),)),
    ("svd-values", lambda la, a: la.svd(a, compute_uv=False, overwrite_a=True), (R(4, 2),)),
    ("qr", lambda la, a: la.qr(a, overwrite_a=True), (R(4, N),)),
    ("qr-economic", lambda la, a: la.qr(a, overwrite_a=True, mode="economic"), (R(4, 2),)),
    ("null_space", lambda la, a: la.null_space(a, overwrite_a=True), (R(2, N),)),
    ("inv", lambda la, a: la.inv(a, overwrite_a=True), (WELL(N, N),)),
    ("inv-pos", lambda la, a: la.inv(a, overwrite_a=True, assume_a="pos"), (SPD(N, N),)),
    ("inv-upper", lambda la, a: la.inv(a, True, assume_a="upper triangular"), (WELL(N, N),)),
    ("solve", lambda la, a, b: la.solve(a, b, overwrite_a=True, overwrite_b=True), (WELL(N, N), R(N))),
    ("solve-B", lambda la, a, b: la.solve(a, b, overwrite_a=True, overwrite_b=True), (WELL(N, N), R(N, 2))),
    ("solve-pos", lambda la, a, b: la.solve(a, b, overwrite_a=True, overwrite_b=True, assume_a="pos"),
     (SPD(N, N), R(N, 2))),
    ("solve-sym-transposed", lambda la, a, b: la.solve(a, b, overwrite_a=True, assume_a="sym", transposed=True),
     (SPD(N, N), R(N))),
    ("solve-tridiagonal", lambda la, a, b: la.solve(a, b, overwrite_b=True, assume_a="tridiagonal"), (WELL(4, 4), R(4, 1))),
    ("solve-banded", lambda la, a, b: la.solve(a, b, overwrite_a=True, overwrite_b=True, assume_a="banded"),
     (np.triu(WELL(N, N)), R(N, 2))),
    ("det", lambda la, a: la.det(a, overwrite_a=True), (WELL(N, N),)),
    ("eigh", lambda la, a: la.eigh(a, overwrite_a=True, eigvals_only=True), (SPD(N, N),)),
    ("eigh-evd", lambda la, a: la.eigh(a, overwrite_a=True, driver="evd"), (SPD(N, N),)),
    ("eigh-generalized", lambda la, a, b: la.eigh(a, b, overwrite_a=True, overwrite_b=True), (SPD(N, N), SPD(N, N))),
    ("eigvalsh", lambda la, a: la.eigvalsh(a, overwrite_a=True, lower=False), (SPD(N, N),)),
    ("eigvalsh-generalized", lambda la, a, b: la.eigvalsh(a, b, overwrite_a=True, overwrite_b=True),
     (SPD(N, N), SPD(N, N))),
    # stacks, as SciPy 1.17 handles them: its batch decorator calls the function matrix by matrix,
    # so a vector for the whole stack is overwritten by the first solve and read so by the next
    ("stack-solve_triangular-chained", lambda la, a, b: la.solve_triangular(a, b, lower=True, overwrite_b=True),
     (WELL(2, N, N), R(N))),
    ("stack-cho_solve-chained", lambda la, c, b: la.cho_solve((c, False), b, overwrite_b=True),
     (np.stack([sl.cho_factor(SPD(N, N))[0] for _ in range(2)]), R(N, 2))),
    ("stack-lu_solve-chained", lambda la, lu, b: la.lu_solve((lu, np.stack([p for _, p in _LU2])), b, overwrite_b=True),
     (np.stack([lu for lu, _ in _LU2]), R(N))),
    ("stack-solve_banded-chained", lambda la, ab, b: la.solve_banded((1, 1), ab, b, overwrite_ab=True, overwrite_b=True),
     (np.stack([BAND(1, 1, 4), BAND(1, 1, 4)]), R(4))),
    ("stack-cho_factor", lambda la, a: la.cho_factor(a, overwrite_a=True), (SPD(2, N, N),)),
    ("stack-lu_factor", lambda la, a: la.lu_factor(a, overwrite_a=True), (WELL(2, N, N),)),
    ("stack-lu", lambda la, a: la.lu(a, overwrite_a=True), (WELL(2, N, N),)),
    ("stack-det", lambda la, a: la.det(a, overwrite_a=True), (WELL(2, N, N),)),
    ("stack-inv", lambda la, a: la.inv(a, overwrite_a=True), (WELL(2, N, N),)),
    ("stack-eigh", lambda la, a, b: la.eigh(a, b, overwrite_a=True, eigvals_only=True), (SPD(2, N, N), SPD(N, N))),
]
LAYOUTS = ("C", "F", "Fm")  # Fm: each matrix of a stack Fortran-ordered (the stack is not)


def _layout(x, order):
    if np.ndim(x) < 2 or order == "C":
        return np.ascontiguousarray(x)
    if order == "F":
        return np.asfortranarray(x)
    return np.ascontiguousarray(np.swapaxes(x, -1, -2)).swapaxes(-1, -2)


def _float_leaves(x):
    if isinstance(x, (tuple, list)):
        return [z for y in x for z in _float_leaves(y)]
    return [x] if (x.dtype if hasattr(x, "dtype") else np.asarray(x).dtype).kind in "fc" else []


def _w(shape, k):  # fixed weights: the scalar read from an output
    return np.cos(1.0 + k + np.arange(int(np.prod(shape)))).reshape(shape)


def _scalar(la, call, read):
    """A real scalar of the results, and (``read``) of the arrays after the call."""
    def f(*args):
        s = 0.0
        for k, y in enumerate(_float_leaves(call(la, *args))):
            s = s + np.sum(_w(np.shape(y), k) * np.real(y))
        if read:
            for k, a in enumerate(args):
                s = s + np.sum(_w(np.shape(a), 10 + k) * np.real(a))
        return s

    return f


def _bits(x):
    x = np.asarray(x)
    return x.dtype, x.shape, np.ascontiguousarray(x).tobytes()


def _draw_like(a):
    return R(*np.shape(a)) + (1j * R(*np.shape(a)) if np.iscomplexobj(a) else 0)


def _check(f_sl, f_mg, args, exact=True):
    """mg.value_and_grad and mg.jvp of ``f_mg`` against plain calls of ``f_sl``: the value and the
    arguments' final contents bit for bit (and a plain call of ``f_mg``'s: SciPy's own), the
    gradient against central differences of ``f_sl``, forward against reverse (``exact``), or a
    NotImplementedTangent that says why (not ``exact``)."""
    nums = tuple(range(len(args)))
    plain = copy.deepcopy(args)
    want = f_sl(*plain)
    a_rev, a_fwd, a_plain = copy.deepcopy(args), copy.deepcopy(args), copy.deepcopy(args)
    value, grads = mg.value_and_grad(f_mg, argnums=nums)(*a_rev)
    tangents = tuple(_draw_like(a) for a in args)
    out, tout = mg.jvp(f_mg, a_fwd, tangents)
    for got, final in ((value, a_rev), (out, a_fwd), (f_mg(*a_plain), a_plain)):
        assert _bits(got) == _bits(want)
        for g, w in zip(final, plain):  # the arguments hold what the plain call leaves
            assert _bits(g) == _bits(w)
    if not exact:
        bad = [g for g in grads if isinstance(g, mg.NotImplementedTangent)]
        assert bad and "left intermediate values" in bad[0].message
        assert isinstance(tout, mg.NotImplementedTangent) and "left intermediate values" in tout.message
        return
    fd = numerical_grad(f_sl, args, nums)  # (copies in the same layout, each evaluation)
    for g, d in zip(grads, fd):
        np.testing.assert_allclose(g, d, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(tout, sum(np.real(np.sum(g * t)) for g, t in zip(grads, tangents)), rtol=1e-9, atol=1e-9)


def _left(call, args):
    """What SciPy leaves in each array: "unchanged", "result" (of a stack: a matrix's) or "intermediate"."""
    work = copy.deepcopy(args)
    out = [np.asarray(y) for y in _float_leaves(call(sl, *work))]

    def result(w):
        return any(_bits(w) == _bits(y[i]) for y in out if y.ndim >= w.ndim for i in np.ndindex(y.shape[:y.ndim - w.ndim]))

    return ["unchanged" if _bits(w) == _bits(a) else "result" if result(w) else "intermediate"
            for w, a in zip(work, args)]


def _params():
    for case in CASES:
        stack = np.ndim(case[2][0]) > 2
        for order in LAYOUTS if stack else LAYOUTS[:2]:
            yield pytest.param(case[1], case[2], order, id=f"{case[0]}-{order}")


@pytest.mark.parametrize("call,args,order", list(_params()))
def test_overwrite_is_scipys(call, args, order):
    args = tuple(_layout(a, order) for a in args)
    exact = "intermediate" not in _left(call, args)
    # a function of the results alone, and one that reads the arrays afterwards too: exactly
    # differentiated where they hold results, a NotImplementedTangent where intermediate values
    _check(_scalar(sl, call, False), _scalar(msl, call, False), args)
    _check(_scalar(sl, call, True), _scalar(msl, call, True), args, exact)


def test_the_report():
    L = np.array([[2.0, 0.0], [1.0, 4.0]])

    def make(la):
        def f(b):
            la.solve_triangular(L, b, lower=True, overwrite_b=True)
            return np.sum(b ** 2)
        return f

    b = np.array([1.0, 2.0])
    value, g = mg.value_and_grad(make(msl))(b)
    assert value == 0.390625  # (b / 2, then solved into b: [0.5, 0.375])
    np.testing.assert_allclose(g, [0.40625, 0.1875], rtol=1e-14)
    np.testing.assert_array_equal(b, [0.5, 0.375])
    _check(make(sl), make(msl), (np.array([1.0, 2.0]),))


# SciPy returns the very array it wrote into (x is b, c is a, v is a), or a view of all of it
# (solve's x of a vector b): writes into the result reach the argument, as in a plain call
ALIAS_CASES = [
    ("solve_triangular", lambda la, a, b: la.solve_triangular(a, b, lower=True, overwrite_b=True), (WELL(N, N), R(N))),
    ("solve", lambda la, a, b: la.solve(a, b, overwrite_b=True), (WELL(N, N), R(N))),
    ("cho_factor", lambda la, a: la.cho_factor(a, overwrite_a=True)[0], (np.asfortranarray(SPD(N, N)),)),
    ("lu", lambda la, a: la.lu(a, overwrite_a=True)[2], (WELL(N, N),)),
    ("eigh", lambda la, a: la.eigh(a, overwrite_a=True, driver="evd")[1], (np.asfortranarray(SPD(N, N)),)),
    ("inv", lambda la, a: la.inv(a, overwrite_a=True), (np.asfortranarray(WELL(N, N)),)),
    ("lu_solve-complex", lambda la, lu, b: la.lu_solve((lu, _PIV), b, overwrite_b=True),
     (_LU + 0.1j * R(N, N), R(N) + 1j * R(N))),
]


@pytest.mark.parametrize("call,args", [c[1:] for c in ALIAS_CASES], ids=[c[0] for c in ALIAS_CASES])
def test_results_alias_the_argument_as_in_scipy(call, args):
    def make(la):
        def f(*xs):
            y = call(la, *xs)
            assert np.shares_memory(mg.value(y), mg.value(xs[-1]))
            if y.flags.writeable:  # (solve's is read-only, a view of np.broadcast_to(b[:, None]))
                y[0] *= 3.0  # (through the result, into the argument)
            else:
                with pytest.raises(ValueError, match="read-only"):
                    y[0] = 0.0
            return np.real(np.sum(xs[-1] * _w(np.shape(xs[-1]), 1)) + np.sum(y ** 2))
        return f

    _check(make(sl), make(msl), args)


@pytest.mark.parametrize("order", ["C", "F"])
def test_views_are_overwritten_where_scipy_overwrites_them(order):
    # a column of a Fortran-ordered matrix is contiguous (SciPy solves into it), of a C-ordered
    # one it is not (SciPy copies it); a reversed vector is not either
    a = WELL(N, N)

    def make(la):
        def f(m, v):
            la.solve_triangular(a, m[:, 1], lower=True, overwrite_b=True)
            la.solve_triangular(a, v[::-1], overwrite_b=True)
            return np.sum(m * _w(m.shape, 0)) + np.sum(v * _w(v.shape, 1))
        return f

    _check(make(sl), make(msl), (_layout(R(N, 2), order), R(N)))


def test_plain_array_receives_plain_values_traced_ones_raise():
    a0, b = np.asfortranarray(WELL(N, N)), R(N)
    left = {}

    def make(la):  # solve leaves a's LU factors in a (a plain matrix: plain values) and x in b (traced)
        def f(b):
            a = a0.copy(order="F")
            x = la.solve(a, b, overwrite_a=True)
            left[la] = a
            return np.sum(x ** 2) + np.sum(a)
        return f

    _check(make(sl), make(msl), (b,))
    assert _bits(left[msl]) == _bits(left[sl]) and not np.array_equal(left[sl], a0)
    b_plain = b.copy()
    with pytest.raises(mg.WriteToPlainArrayError, match=r"overwrite_b=True writing its result into `b`, a plain"):
        mg.grad(lambda a: np.sum(msl.solve_triangular(a, b_plain, lower=True, overwrite_b=True)))(a0)
    np.testing.assert_array_equal(b_plain, b)


def test_arrays_sharing_memory_are_refused():
    a = np.asfortranarray(WELL(N, N))
    with pytest.raises(mg.MutationError, match="`b` shares memory with `a`"):
        mg.grad(lambda a: np.sum(msl.solve_triangular(a, a[:, 0], lower=True, overwrite_b=True)))(a)


def test_intermediate_values_cost_nothing_unless_read():
    a = np.asfortranarray(R(N, N))

    def f(a):
        s = msl.svd(a, overwrite_a=True, compute_uv=False)  # (reflectors left in a)
        a[...] = 1.0
        return np.sum(s) + np.sum(a * a)

    np.testing.assert_allclose(mg.grad(f)(a.copy(order="F")), numerical_grad(f, (a,), (0,))[0], rtol=1e-6)
    with mg.config(strict=True):
        mg.grad(lambda a: np.sum(msl.svd(a, overwrite_a=True, compute_uv=False)))(a.copy(order="F"))
        with pytest.raises(mg.NotImplementedTangentError, match=r"scipy.linalg.svd with overwrite_a=True left"):
            mg.grad(lambda a: np.sum(msl.svd(a, overwrite_a=True, compute_uv=False)) + a[0, 0])(a.copy(order="F"))


def test_forward_mode_forgets_intermediate_values_once_every_element_is_rewritten():
    # a scratch buffer holding SciPy's workspace (det's LU factors), rewritten before it is read
    # again: forward mode (which marks a whole array) is right once every element is rewritten,
    # at once or row by row; reading it before that is still refused
    a0 = np.array([[2.0, 0.3], [0.3, 1.0]])

    def f(a, w, det=msl.det, rows=False):
        tot = 0.0
        for t in range(2):
            if rows:
                for i in range(2):
                    w[i] = a0[i] * a[0] + t
            else:
                w[...] = a0 * a[0] + t
            tot = tot + np.log(det(w, overwrite_a=True))
        return tot

    for rows in (False, True):
        fd = numerical_grad(lambda a, rows=rows: f(a, np.zeros((2, 2)), sl.det, rows), (np.array([1.0]),), (0,))[0]
        g = lambda a, w, rows=rows: f(a, w, rows=rows)
        t = mg.jvp(g, (np.array([1.0]), np.zeros((2, 2))), (np.array([1.0]), np.zeros((2, 2))))[1]
        np.testing.assert_allclose(t, fd[0], rtol=1e-6)
        np.testing.assert_allclose(mg.grad(g)(np.array([1.0]), np.zeros((2, 2))), fd, rtol=1e-6)

    def partly(a, w):
        w[...] = a0 * a[0]
        d = msl.det(w, overwrite_a=True)
        w[0] = a[0]  # (row 1 still holds the workspace)
        return d + np.sum(w)

    t = mg.jvp(partly, (np.array([1.0]), np.zeros((2, 2))), (np.array([1.0]), np.zeros((2, 2))))[1]
    assert isinstance(t, mg.NotImplementedTangent)


def test_rewritten_elements_are_read_without_the_workspace_mark():
    # (battery) the band rebuilt each step before solve_banded(overwrite_ab=True): a row set to a constant, then
    # `+=` a traced value, reads only rewritten elements while others still hold the workspace; forward mode
    # marked the sum (so the whole array again) and returned a NotImplementedTangent, and a Hessian's inner
    # pullback, whose cotangent of the workspace is traced (zero, with zero tangents), gave one too. Against
    # central differences of plain SciPy (first and second), forward against reverse
    def make(la):
        def f(p):
            ab = np.zeros_like(p, shape=(3, 3))
            c = np.ones(3) * p[1]
            for _ in range(2):
                ab[0, 0] = 0.0
                ab[2, -1] = 0.0
                ab[0, 1:] = -p[0]
                ab[1] = 3.0
                ab[1] += p[0]
                ab[2, :-1] = -p[0]
                c = la.solve_banded((1, 1), ab, c, overwrite_ab=True)
            return np.sum(c ** 2)
        return f

    f, plain = make(msl), make(sl)
    p = np.array([0.8, 0.2])
    fd = numerical_grad(plain, (p,), (0,))[0]
    np.testing.assert_allclose(mg.grad(f)(p), fd, rtol=1e-7)
    np.testing.assert_allclose(mg.jacobian(f, mode="fwd")(p), fd, rtol=1e-7)
    h = 1e-5
    fd2 = np.array([(numerical_grad(plain, (p + h * e,), (0,))[0] - numerical_grad(plain, (p - h * e,), (0,))[0])
                    / (2 * h) for e in np.eye(2)])
    np.testing.assert_allclose(mg.hessian(f)(p), fd2, rtol=1e-4)

    def half(p, la=msl, rewritten=slice(1, None)):
        ab = np.zeros_like(p, shape=(3, 3))
        ab[1] = 3.0 + p[0]
        ab[0, 1:] = ab[2, :-1] = -0.1
        c = la.solve_banded((1, 1), ab, np.ones(3), overwrite_ab=True)
        ab[1, rewritten] = 2.0
        return np.sum(c) + np.sum(ab[1])

    # (ab[1, 0], the first diagonal entry, is one SciPy's tridiagonal solver leaves as it was (in this call and in
    # the probe's): its derivative stays, the central difference's; ab[1, 1] holds the workspace when ab[1] is read)
    want = numerical_grad(lambda p: half(p, sl), (p,), (0,))[0] @ np.ones(2)
    np.testing.assert_allclose(mg.jvp(half, (p,), (np.ones(2),))[1], want, rtol=1e-7)
    assert isinstance(mg.jvp(lambda p: half(p, rewritten=slice(2, None)), (p,), (np.ones(2),))[1],
                      mg.NotImplementedTangent)


def test_a_workspace_in_a_view_marks_that_view_only():
    # (regress54) solve(big[:, 1:], b, overwrite_a=True) leaves LU factors in the view: forward mode marked all of
    # `big`, so its column 0 (never LAPACK's) and the view once rewritten gave NotImplementedTangents. Against
    # central differences of plain SciPy; the view read before its rewrite keeps the mark
    a = np.array([[4.0, 1.0, 0.5], [1.0, 3.0, 0.2], [0.3, 0.2, 2.0]])
    b = np.array([1.0, 2.0, 3.0])

    def make(la, read, rewrite=True):
        def f(x):
            big = np.zeros_like(x, shape=(3, 4)).copy(order="F")
            big[:, 0] = x[:3]
            big[:, 1:] = x.reshape(3, 3)
            y = la.solve(big[:, 1:], b, overwrite_a=True)
            if rewrite:
                big[:, 1:] = np.outer(y, y)
            return read(big) + np.sum(y)
        return f

    x = a.ravel()
    t = np.linspace(0.5, 1.5, 9)
    for read in (lambda m: np.sum(m ** 2), lambda m: np.sum(m[:, 1:] ** 2), lambda m: np.sum(m[:, 0] ** 2)):
        fd = numerical_grad(make(sl, read), (x,), (0,))[0]
        np.testing.assert_allclose(mg.jvp(make(msl, read), (x,), (t,))[1], fd @ t, rtol=1e-6)
        np.testing.assert_allclose(mg.jacobian(make(msl, read), mode="fwd")(x), fd, rtol=1e-6, atol=1e-9)
    fd = numerical_grad(make(sl, lambda m: np.sum(m[:, 0] ** 2), False), (x,), (0,))[0]
    np.testing.assert_allclose(mg.jvp(make(msl, lambda m: np.sum(m[:, 0] ** 2), False), (x,), (t,))[1], fd @ t,
                               rtol=1e-6)
    assert isinstance(mg.jvp(make(msl, lambda m: np.sum(m[:, 1:] ** 2), False), (x,), (t,))[1],
                      mg.NotImplementedTangent)


def test_second_order():
    a = np.asfortranarray(WELL(N, N))

    def f(a, b):
        x = msl.solve(a, b, overwrite_b=True, assume_a="lower triangular")
        c = msl.cho_factor(a @ a.T, lower=True, overwrite_a=True)[0]
        return np.sum(b ** 3) + np.sum(x * c[:, 0])

    mg.testing.check_grads(f, a, R(N), order=2)


_EYE = np.eye(N)
_FLIP = np.diag([1.0, -1.0, 1.0])  # (its own inverse)
_TRI = np.triu(R(N, N)) + 4 * np.eye(N)  # (zeros where SciPy's triangular solve zeroes a)


@pytest.mark.parametrize("call,args,exact", [
    (lambda la, a: la.inv(a, overwrite_a=True), (_EYE,), True),
    (lambda la, a: la.inv(a, overwrite_a=True), (_FLIP,), True),
    (lambda la, a: la.cholesky(a, overwrite_a=True), (_EYE,), True),
    (lambda la, a: la.cho_factor(a, overwrite_a=True)[0], (_EYE,), True),
    (lambda la, a, b: la.solve(a, b, overwrite_b=True), (_EYE, R(N)), True),
    (lambda la, a, b: la.solve_triangular(a, b, overwrite_b=True), (_EYE, R(N, 2)), True),
    (lambda la, a, b: la.solve(a, b, assume_a="upper triangular", overwrite_a=True), (_TRI, R(N)), False),
], ids=["inv-I", "inv-involutory", "cholesky-I", "cho_factor-I", "solve-I-b", "solve_triangular-I-B",
        "solve-triangular-a"])
def test_an_array_scipy_overwrites_with_its_own_bits(call, args, exact):
    # SciPy computed its result in the array (or zeroed a triangle that was zero): the same bits as
    # before, which were taken to mean "untouched", so the array kept its own derivative (inv(I):
    # d/da of a[0, 1] gave 1 for -1) where a plain call's result is there; SciPy is asked on a replica
    # of other values whether it writes into the array at all
    args = tuple(_layout(a, "F") for a in args)
    _check(_scalar(sl, call, False), _scalar(msl, call, False), args)
    _check(_scalar(sl, call, True), _scalar(msl, call, True), args, exact)


def test_a_result_scipy_writes_into_a_plain_array_with_its_own_bits_raises():
    # (solve(I, b) into a plain b: x = b, the same bits, returned plain with no derivative)
    b = R(N)
    with pytest.raises(mg.WriteToPlainArrayError, match="overwrite_b=True writing its result into `b`"):
        mg.grad(lambda a: msl.solve(a, b.copy(), overwrite_b=True)[0])(np.eye(N))


def test_a_result_with_the_arrays_own_bits_is_not_taken_for_it_where_scipy_writes_there():
    # solve(A, A @ A) is A: the array kept its bits, SciPy writes into it (its probe says so), and the
    # result matched them, so the result's derivative was given to the array (-2 for 1); either may
    # be what SciPy left: intermediate values, which refuse when read
    A = np.asfortranarray([[2.0, 1.0], [0.0, 3.0]])
    B = A @ A
    W = np.array([[1.0, 2.0], [3.0, 4.0]])

    def g(a):
        msl.solve(a, B.copy(order="F"), overwrite_a=True, assume_a="upper triangular")
        return np.sum(W * a)

    got = mg.grad(g)(A.copy(order="F"))
    assert isinstance(got, mg.NotImplementedTangent) and "left intermediate values" in got.message
    plain = A.copy(order="F")
    sl.solve(plain, B.copy(order="F"), overwrite_a=True, assume_a="upper triangular")
    a = A.copy(order="F")
    assert mg.value_and_grad(g)(a)[0] == np.sum(W * plain) and np.array_equal(a, plain)


def test_a_read_only_array_scipy_would_overwrite_is_refused_saying_so():
    # (SciPy's LAPACK wrappers write into a read-only array with overwrite_a=True; the refusal said
    # a plain call raises the same)
    a = np.asfortranarray([[4.0, 1.0], [1.0, 3.0]])
    a.flags.writeable = False
    with pytest.raises(mg.MutationError, match="writes into `a`, which is read-only: SciPy's LAPACK wrappers"):
        mg.grad(lambda a: np.sum(msl.cholesky(a, overwrite_a=True)))(a)
    assert np.array_equal(a, [[4.0, 1.0], [1.0, 3.0]])


@pytest.mark.parametrize("dtype", [np.longdouble, np.float16])
def test_a_result_scipy_computes_in_its_own_converted_copy_has_its_layout(dtype):
    # SciPy converts a longdouble (float16) b to float64 and, with overwrite_b, solves in that copy:
    # its result is Fortran-ordered, and a sum over it adds in that order (the value differed in
    # the last bit)
    a = np.asfortranarray(WELL(N, N)).astype(dtype, order="K")
    b = np.asfortranarray(R(N, 2)).astype(dtype, order="K")

    def f(a, b, solve):
        x = solve(a, b, overwrite_b=True)
        return np.sum(x * x * np.arange(1.0, 7.0).reshape(N, 2)), x.strides

    b1 = b.copy(order="K")
    want, strides = f(a.copy(order="K"), b1, sl.solve)
    a2, b2 = a.copy(order="K"), b.copy(order="K")
    (value, got_strides), g = mg.value_and_grad(lambda a, b: f(a, b, msl.solve), argnums=(0, 1), has_aux=True)(a2, b2)
    assert value == want and got_strides == strides
    assert np.array_equal(b2, b1)
    fd = numerical_grad(lambda a, b: f(a, b, sl.solve)[0], (a.astype(np.float64), b.astype(np.float64)), (0, 1))
    for gi, fi in zip(g, fd):  # (a float16 gradient: float16's precision)
        np.testing.assert_allclose(gi, fi, rtol=1e-6 if dtype is np.longdouble else 3e-3, atol=1e-8)


def test_solves_chained_through_scipys_read_only_result():
    # chemkin: `c = solve(J, c, overwrite_b=True)` in a loop: SciPy returns c itself as a read-only view and
    # writes into it again at the next call (LAPACK ignores the flag); mutagrad refused the second call.
    # By hand: after k steps c = J^-k c0, so d sum(c) / d c0 = 1^T J^-k; other read-only arrays stay refused
    J = np.array([[2.0, 0.1], [0.3, 1.5]])

    def make(solve, copied):
        def f(c0):
            c = c0.copy() if copied else c0
            for _ in range(3):
                c = solve(J, c, overwrite_b=True)
            return np.sum(c)
        return f

    Jinv = np.linalg.inv(J)
    for copied, c0 in ((True, np.array([1.0, 2.0])), (False, np.array([1.0, 2.0])), (True, np.array([[1.0], [2.0]]))):
        want = (np.ones(2) @ Jinv @ Jinv @ Jinv).reshape(c0.shape)  # (a column: SciPy's view has stride 0 there)
        plain = c0.copy()
        value = make(sl.solve, copied)(plain)
        c = c0.copy()
        v, g = mg.value_and_grad(make(msl.solve, copied))(c)
        assert v == value and np.array_equal(c, plain)  # (the argument overwritten as SciPy overwrites it)
        np.testing.assert_allclose(g, want, rtol=1e-13)
        t = np.array([0.3, -1.1]).reshape(c0.shape)
        np.testing.assert_allclose(mg.jvp(make(msl.solve, True), (c0,), (t,))[1], np.sum(want * t), rtol=1e-13)
    b = np.broadcast_to(np.array([1.0, 2.0]), (2,))
    with pytest.raises(mg.MutationError, match="writes into `b`, which is read-only"):
        mg.grad(lambda s: np.sum(msl.solve(J * s, b, overwrite_b=True)))(1.0)


def test_an_overwrite_into_mg_value_of_a_traced_array_is_refused():
    # (regress48) mg.value(c) is a read-only view of c's memory; SciPy wrote the solution into it regardless
    # and c's derivative stayed that of its old values: [2, 2] where the plain function's is 2 1^T J^-1
    J = np.array([[2.0, 0.1], [0.3, 1.5]])

    def f(p):
        c = p * 2.0
        msl.solve(J, mg.value(c), overwrite_b=True)
        return np.sum(c)

    with pytest.raises(mg.MutationError, match=r"writes into `b`, mg.value\(...\) of a traced array"):
        mg.grad(f)(np.array([0.3, 0.7]))

    def g(p):  # (a copy of the value is SciPy's to overwrite)
        c = p * 2.0
        return np.sum(c) + np.sum(msl.solve(J, np.array(mg.value(c)), overwrite_b=True))

    np.testing.assert_array_equal(mg.grad(g)(np.array([0.3, 0.7])), [2.0, 2.0])


def test_banded_storage_whose_unused_corners_a_loop_never_writes():
    # (cranknicolson) Crank-Nicolson with solve_banded(overwrite_ab=True): each step refills the three bands and
    # never writes ab[0, 0] and ab[2, -1], which LAPACK does not use (SciPy leaves them as they are): forward
    # mode kept the whole of ab marked and refused the jvp. Against central differences of plain SciPy
    def make(la):
        def f(k):
            ab = np.zeros_like(k, shape=(3, 6))
            v = np.linspace(1.0, 2.0, 6) + 0.0 * k
            for _ in range(3):
                ab[0, 1:] = -k
                ab[1, :] = 1 + 2 * k
                ab[2, :-1] = -k
                v = la.solve_banded((1, 1), ab, v, overwrite_ab=True)
            return np.sum(v ** 2)
        return f

    f, plain = make(msl), make(sl)
    h = 1e-6
    fd = (plain(0.3 + h) - plain(0.3 - h)) / (2 * h)
    np.testing.assert_allclose(mg.grad(f)(0.3), fd, rtol=1e-7)
    np.testing.assert_allclose(mg.jvp(f, (0.3,), (1.0,))[1], fd, rtol=1e-7)
    g = lambda k: (plain(k + 1e-4) - plain(k - 1e-4)) / 2e-4
    np.testing.assert_allclose(mg.hessian(f)(0.3), (g(0.3 + 1e-4) - g(0.3 - 1e-4)) / 2e-4, rtol=1e-4)
