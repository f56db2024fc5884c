"""Reductions give NumPy's own values, not a composition's.

NumPy computes a masked sum (``where=``), a sum from ``initial=``, a mean
into ``out=`` and a float16 variance in its own order and precision. A
composition of primitives (select, then sum; sum, then add ``initial``)
differs in the last bits, or grossly: NumPy's masked float16 sum stalls
where a pairwise sum does not, and a float16 ``out`` overflows. Oracles: the
plain call's bits and dtype, central differences of the plain program, and
the other mode.
"""
import functools
import re

import numpy as np
import pytest

import mutagrad as mg
import mutagrad.numpy as mnp
from mutagrad.testing import check_grads, numerical_grad


def _x(n, dtype, lo=0.5, hi=1.5, seed=5):
    return np.random.default_rng(seed).uniform(lo, hi, n).astype(dtype)


def _mean_into(dtype):
    def f(x):
        o = mnp.zeros((), dtype)  # (a buffer mutagrad may write a traced value into)
        np.mean(x, out=o)
        return o * 1.0
    return f


def _mean_rows_into(x):
    A = x.reshape(6, 6)
    o = np.empty_like(A[0])
    np.mean(A, axis=1, out=o)
    return np.sum(o * o)


CASES = {
    "sum-where": lambda x: np.sum(x, where=x < 1.0),
    "add.reduce-where": lambda x: np.add.reduce(x, where=x < 1.0),
    "sum-initial-axis": lambda x: np.sum(np.sum(x.reshape(-1, 4), axis=0, initial=0.5) ** 2),
    "mean-where": lambda x: np.mean(x, where=x > 0.8),
    "prod-where": lambda x: np.prod(x[:40], where=x[:40] < 1.2),
    "prod-initial": lambda x: np.multiply.reduce(x[:40], initial=1.5),
    "var": lambda x: np.var(x),
    "std-where": lambda x: np.std(x, where=x < 1.3, ddof=1),
    "average-weights": lambda x: np.average(x, weights=np.linspace(0.1, 1.0, x.size)),
    "mean-out-f64": _mean_into(np.float64),
    "mean-rows-out": _mean_rows_into,
}

SIZES = {"prod-where": 40, "prod-initial": 40, "mean-rows-out": 36, "sum-initial-axis": 200}


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.float16])
@pytest.mark.parametrize("name", list(CASES))
def test_value_is_numpys_own(name, dtype):
    f = CASES[name]
    x = _x(SIZES.get(name, 4000), dtype)
    with np.errstate(all="ignore"):
        want = f(x.copy())
    got_rev = mg.value_and_grad(f)(x.copy())[0]
    got_fwd = mg.jvp(f, (x.copy(),), (np.ones_like(x),))[0]
    for got in (got_rev, got_fwd):
        assert np.asarray(got).dtype == np.asarray(want).dtype
        assert np.asarray(got).tobytes() == np.asarray(want).tobytes(), (got, want)


@pytest.mark.parametrize("name", list(CASES))
def test_derivative_of_the_composition_is_right(name):
    f = CASES[name]
    x = _x(min(SIZES.get(name, 12), 40), np.float64)
    check_grads(f, x, atol=1e-6, rtol=1e-5)


def test_float16_mean_into_a_float16_out_overflows_as_numpy_does():
    # NumPy sums into the float16 out (65504 at most) before it divides: inf
    def f(x):
        o = mnp.zeros((), np.float16)
        np.mean(x, out=o)
        return o * 1.0

    x = _x(100000, np.float16)
    with np.errstate(all="ignore"):
        want = np.mean(x, out=np.zeros((), np.float16))
        got = mg.value_and_grad(f)(x.copy())[0]
    assert np.isinf(want) and np.isinf(got)


@pytest.mark.parametrize("call,by_hand", [
    (lambda x, o: np.einsum("i,j->ij", x, x * 1.1, out=o, dtype=np.float32, casting="unsafe"),
     lambda x: 1.1 * np.outer(x, x)),
    (lambda x, o: o.__setitem__(Ellipsis, np.einsum("i,j->ij", x, x * 1.1, casting="same_kind",
                                                    out=np.zeros_like(o, dtype=np.float32))),
     lambda x: 1.1 * np.outer(x, x)),
    (lambda x, o: o.__setitem__(Ellipsis, 1.1 * np.einsum("ij,jk->ik", np.outer(x, x), x[:, None] * x,
                                                          dtype=np.float32, optimize=True)),
     lambda x: 1.1 * np.outer(x, x) * np.sum(x * x)),
], ids=["dtype narrower than out", "out narrower", "optimize with dtype"])
def test_einsum_with_dtype_or_casting_is_numpys_call(call, by_hand):
    # the write into out= replayed NumPy's call without dtype= and casting= (other bits in out;
    # a float32 out refused with the 'safe' rule), and with optimize= NumPy casts as it goes
    def f(x, o):
        call(x, o)
        return np.sum(o * o)

    x = np.array([0.35, 1.2, -0.7, 1 / 3])
    o_plain, o = np.zeros((4, 4)), np.zeros((4, 4))
    want = f(x.copy(), o_plain)
    value, g = mg.value_and_grad(f)(x.copy(), o)
    assert value == want and o.tobytes() == o_plain.tobytes()
    # central differences of the same products in float64 (by_hand)
    fd = numerical_grad(lambda x: np.sum(by_hand(x) ** 2), (x,), (0,))[0]
    np.testing.assert_allclose(g, fd, rtol=1e-5)  # (float32 values)
    _, t = mg.jvp(f, (x.copy(), np.zeros((4, 4))), (np.ones(4), np.zeros((4, 4))))
    np.testing.assert_allclose(t, np.sum(fd), rtol=1e-5)


def test_einsum_into_out_has_the_bits_of_numpys_call():
    # with negative-stride operands NumPy's loop into out rounds otherwise than into a new array
    def f(a, b):
        c = mnp.zeros(2)
        np.einsum("ij,ij->j", a, b, out=c)
        return c

    def rev(m):  # the same values, negative strides
        return m[::-1, ::-1].copy()[::-1, ::-1]

    rng = np.random.default_rng(0)
    for _ in range(50):
        a, b = rev(rng.uniform(0.5, 2, (3, 2))), rev(rng.uniform(0.5, 2, (3, 2)))
        want = np.zeros(2)
        np.einsum("ij,ij->j", a, b, out=want)
        out, pullback = mg.vjp(f, a, b)
        assert out.tobytes() == want.tobytes()
    ga, gb = pullback(np.array([1.0, -2.0]))
    np.testing.assert_allclose(ga, b * [1.0, -2.0], rtol=1e-15)  # d/da_ij of sum_j g_j sum_i a_ij b_ij
    np.testing.assert_allclose(gb, a * [1.0, -2.0], rtol=1e-15)


@pytest.mark.parametrize("ufunc", [np.multiply, np.maximum, np.minimum])
@pytest.mark.parametrize("indices", [[0, 2], [0, 3, 1, 5], [4, 1], [0], [5, 5, 0]], ids=str)
def test_reduceat_of_multiply_maximum_minimum(ufunc, indices):
    # each segment's reduction, or the element alone where the indices do not increase; the
    # values are NumPy's own, the derivatives against central differences in both modes
    def f(x):
        return np.sum(ufunc.reduceat(x, indices) ** 2)

    x = np.array([1.0, 3.0, 2.0, 5.0, 0.7, 1.3])
    assert mg.value_and_grad(f)(x.copy())[0] == f(x.copy())
    check_grads(f, x)


def test_reduceat_along_an_axis_into_out():
    def f(a):
        out = mnp.zeros((3, 3))
        np.multiply.reduceat(a, [0, 2, 3], axis=1, out=out)
        return np.sum(out ** 2)

    a = np.random.default_rng(0).random((3, 5)) + 0.5
    check_grads(f, a)
    def g(a, bad):
        return np.sum(np.maximum.reduceat(a, bad, axis=1))

    for bad in ([0, 7], [-2, 1]):  # NumPy's IndexError (it takes no negative indices)
        with pytest.raises(IndexError, match="out-of-bounds in maximum.reduceat"):
            mg.grad(g)(a, bad)


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.complex128])
def test_inner_of_two_vectors_is_a_numpy_scalar_with_numpys_bits(dtype):
    rng = np.random.default_rng(0)
    x, y = rng.random(100).astype(dtype), rng.random(100).astype(dtype)

    def f(x):
        return np.inner(x, y)

    want = f(x)
    got = mg.jvp(f, (x,), (np.ones_like(x),))[0]
    assert type(got) is type(want) and got.tobytes() == want.tobytes()
    if dtype is not np.complex128:
        np.testing.assert_allclose(mg.grad(f)(x), y, rtol=1e-6)  # d/dx_i of sum x_i y_i


_PRODUCTS = {  # (f(c, x), with c the constant's strided view, x traced of shape (n,); its value is linear in x)
    "matmul": lambda c, x: c @ x, "dot": lambda c, x: np.dot(c, x), "dot 1-d": lambda c, x: np.dot(c[0], x),
    "vdot": lambda c, x: np.vdot(c[0], x), "inner": lambda c, x: np.inner(c, x),
    "tensordot": lambda c, x: np.tensordot(c, x, axes=1), "einsum": lambda c, x: np.einsum("ij,j->i", c, x),
    "vecdot": lambda c, x: np.vecdot(c, x), "matvec": lambda c, x: np.matvec(c, x),
}


@pytest.mark.parametrize("name", list(_PRODUCTS))
@pytest.mark.parametrize("layout", ["columns ::2", "rows reversed", "transposed ::2"])
@pytest.mark.parametrize("dtype", [np.float64, np.complex128])
def test_products_with_strided_operands_have_numpys_bits(name, layout, dtype):
    # NumPy's product kernels sum a strided operand in another order than a contiguous one: the
    # private copy the pullback keeps of a plain constant (contiguous) gave values 1-4 ulp off a
    # plain call's, and those of a traced strided argument copied by np.vdot's ravel; written into
    # the argument, its final contents were not a plain call's
    rng = np.random.default_rng(3)
    f = _PRODUCTS[name]
    for n in (7, 20, 33):
        big = rng.uniform(-1, 1, (n, 2 * n)) + (1j * rng.uniform(-1, 1, (n, 2 * n)) if dtype is np.complex128 else 0)
        c = {"columns ::2": big[:, ::2], "rows reversed": big[::-1, :n], "transposed ::2": big[:, ::2].T}[layout]
        x = rng.uniform(-1, 1, n).astype(dtype)

        product = functools.partial(f, c)

        def g(b, product=product):
            b[:2] = np.reshape(product(b), -1)[:2]
            return np.sum(np.abs(b) ** 2)

        want = product(x)
        for got in (mg.vjp(product, x)[0], mg.jvp(product, (x,), (x,))[0]):
            assert np.asarray(got).tobytes() == np.asarray(want).tobytes(), (n, got - want)
        plain, traced = x.copy(), x.copy()
        g(plain)
        mg.grad(g)(traced)
        assert traced.tobytes() == plain.tobytes()
        if dtype is np.float64:  # d/dx of w . f(c, x) = the transpose of its matrix times w, by hand
            w = rng.uniform(-1, 1, np.shape(want))
            m = np.stack([product(e) for e in np.eye(n)], axis=-1)  # (the linear map's matrix, column by column)
            np.testing.assert_allclose(mg.grad(lambda b, w=w, product=product: np.sum(w * product(b)))(x),
                                       np.reshape(w, -1) @ np.reshape(m, (-1, n)), rtol=1e-12, atol=1e-14)
    # a traced strided argument flattened by np.vdot (a strided view: np.ravel copied it)
    a = rng.uniform(0.2, 1.5, (9, 18)).astype(dtype)[:, ::2]
    y = rng.uniform(0.2, 1.5, (9, 9)).astype(dtype)
    for got in (mg.vjp(lambda a: np.vdot(a, y), a)[0], mg.vjp(lambda y: np.vdot(a, y), y)[0]):
        assert got.tobytes() == np.vdot(a, y).tobytes()


def test_vdot_derivatives_are_those_of_the_conjugated_dot():
    # d/da of sum(conj(a) * b) in both modes, against the composition written out, and its errors
    rng = np.random.default_rng(4)
    a = rng.standard_normal((3, 4)) + 1j * rng.standard_normal((3, 4))
    b = rng.standard_normal(12) + 1j * rng.standard_normal(12)
    g = 0.7 - 0.2j
    def by_hand(a, b):
        return np.sum(np.conj(a).reshape(-1) * b)

    np.testing.assert_allclose(mg.vjp(lambda v: np.vdot(v, b), a)[1](g)[0],
                               mg.vjp(lambda v: by_hand(v, b), a)[1](g)[0], rtol=1e-14)
    np.testing.assert_allclose(mg.vjp(lambda v: np.vdot(a, v), b)[1](g)[0],
                               mg.vjp(lambda v: by_hand(a, v), b)[1](g)[0], rtol=1e-14)
    # of a real function of complex operands: d/dRe - i d/dIm (central differences of the plain call)
    def loss(a, b):
        return np.real(0.3 * np.vdot(a, b) ** 2)

    for i, z in enumerate((a, b)):
        fd = np.zeros(z.shape, complex)
        for k in np.ndindex(z.shape):
            for step, part in ((1e-6, 1.0), (1e-6j, -1j)):
                hi, lo = z.copy(), z.copy()
                hi[k] += step
                lo[k] -= step
                args_hi, args_lo = ((hi, b), (lo, b)) if i == 0 else ((a, hi), (a, lo))
                fd[k] += part * (loss(*args_hi) - loss(*args_lo)) / 2e-6
        np.testing.assert_allclose(mg.grad(loss, argnums=i)(a, b), fd, rtol=1e-7)
    # real: d/dx (x . y)^2 = 2 (x . y) y, by hand; second order d2/dx2 (x . x) = 2 I
    x, y = rng.standard_normal((3, 4)), rng.standard_normal(12)
    np.testing.assert_allclose(mg.grad(lambda x: np.vdot(x, y) ** 2)(x), (2 * np.vdot(x, y) * y).reshape(3, 4),
                               rtol=1e-14)
    np.testing.assert_allclose(mg.jvp(lambda x: np.vdot(x, y), (x,), (np.ones((3, 4)),))[1], np.sum(y), rtol=1e-14)
    np.testing.assert_array_equal(mg.hessian(lambda x: np.vdot(x, x))(np.ones(3)), 2 * np.eye(3))
    with pytest.raises(ValueError, match="cannot reshape array of size 4"):
        mg.grad(lambda x: np.vdot(x, np.ones(4)))(np.ones(3))


@pytest.mark.parametrize("axis, wshape", [((0, 1), (2, 3)), ((1, 0), (3, 2)), ((-1, 0), (4, 2)), ((2,), (4,)),
                                          (1, (3,))])
def test_average_with_weights_along_several_axes(axis, wshape):
    # weights of a's shape along the axes, in the axes' order (NumPy's docstring example:
    # axis=(0, 1) with 2-D weights); it raised from inside mutagrad
    x = np.random.default_rng(3).uniform(0.5, 1.5, (2, 3, 4))
    w = np.random.default_rng(4).uniform(0.1, 1.0, wshape)

    def f(x):
        avg, scl = np.average(x, axis=axis, weights=w, returned=True)
        return np.sum(avg * np.arange(1.0, avg.size + 1).reshape(avg.shape)) + np.sum(scl)

    plain = np.average(x, axis=axis, weights=w)
    assert mg.value_and_grad(f)(x)[0] == f(x)
    np.testing.assert_array_equal(mg.vjp(lambda x: np.average(x, axis=axis, weights=w), x)[0], plain)
    check_grads(f, x)


@pytest.mark.parametrize("keepdims", [False, True])
@pytest.mark.parametrize("traced", ["a", "weights"])
def test_average_returned_gives_numpys_values(keepdims, traced):
    # (statsml: with returned=True, both results were the composition's, off in the last bits)
    rng = np.random.default_rng(5)
    A = rng.standard_normal((37, 5)) * 10 + 3
    w = rng.uniform(0.1, 3, 37)

    def f(v):
        a, weights = (v, w) if traced == "a" else (A, v)
        return np.average(a, axis=0, weights=weights, returned=True, keepdims=keepdims)

    arg = A if traced == "a" else w
    avg, scl = f(arg)
    for got in (mg.vjp(f, arg.copy())[0], mg.jvp(f, (arg.copy(),), (np.ones_like(arg),))[0]):
        assert np.array_equal(got[0], avg) and np.array_equal(got[1], scl)


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.float16, np.complex128])
@pytest.mark.parametrize("weights", [None, "full", "axis", "float32", "int"])
def test_average_returned_sum_of_weights_has_numpys_type_and_dtype(dtype, weights):
    # (regress25: the sum of weights of returned=True came as a 0-d float64 array without weights, and in the
    # weights' dtype (float32, int) with them, where NumPy gives a scalar of the average's result type)
    rng = np.random.default_rng(1)
    a = (rng.standard_normal((3, 4)) * 3).astype(dtype)
    kw = {None: {}, "full": {"weights": rng.uniform(0.1, 2, (3, 4))}, "axis": {"weights": rng.uniform(0.1, 2, 4)},
          "float32": {"weights": rng.uniform(0.1, 2, (3, 4)).astype(np.float32)},
          "int": {"weights": np.arange(1, 13).reshape(3, 4)}}[weights]
    for axis in ((None, 0, 1) if weights != "axis" else (1,)):
        want = np.average(a, axis=axis, returned=True, **kw)
        seen = {}

        def f(x, axis=axis, seen=seen):
            avg, scl = np.average(x, axis=axis, returned=True, **kw)
            seen["r"] = mg.value(avg), mg.value(scl)
            return np.sum(np.real(avg))

        mg.grad(f)(a.copy())
        for w, g in zip(want, seen["r"]):
            assert type(g) is type(w) and np.result_type(g) == np.result_type(w)
            np.testing.assert_array_equal(g, w)


def test_average_with_weights_of_the_wrong_shape_raises_numpys_error():
    x = np.ones((2, 3, 4))
    with pytest.raises(ValueError, match="Shape of weights must be consistent"):
        np.average(x, axis=(0, 1), weights=np.ones((3, 2)))
    with pytest.raises(ValueError, match="Shape of weights must be consistent"):
        mg.grad(lambda x: np.average(x, axis=(0, 1), weights=np.ones((3, 2))))(x)


_SIGNED_ZEROS = np.array([1.0, 0.0, -0.0, 0.0, -0.0, 2.0, -0.0, -3.0])


def _sort_in_place(x, **kind):
    y = x * 1.0
    y.sort(**kind)
    return y


@pytest.mark.parametrize("name,fn", [
    ("sort", np.sort), ("sort in place", _sort_in_place), ("sort long", lambda x: np.sort(np.tile(x, 5))),
    ("sort stable", lambda x: np.sort(x, kind="stable")), ("sort stable=True", lambda x: np.sort(x, stable=True)),
    ("sort mergesort in place", lambda x: _sort_in_place(x, kind="mergesort")),
    ("clip", lambda x: np.clip(x, 0.0, 1.5)), ("clip -0", lambda x: np.clip(x, -0.0, 0.0)),
    ("ndarray.clip", lambda x: x.clip(0.0)), ("maximum.accumulate", np.maximum.accumulate),
    ("minimum.accumulate", np.minimum.accumulate), ("fmax.accumulate", np.fmax.accumulate),
    ("nanmax", lambda x: np.nanmax(x[1:5])), ("nanmin", lambda x: np.nanmin(x[1:5])),
    ("fmax.reduce", lambda x: np.fmax.reduce(x[1:5])), ("nanmax axis", lambda x: np.nanmax(x.reshape(4, 2), axis=0)),
    ("median", lambda x: np.median(x[2:3])), ("median 4", lambda x: np.median(x[1:5])),
    ("nanmedian", lambda x: np.nanmedian(x[2:3])), ("quantile", lambda x: np.quantile(x[2:3], 0.3)),
    ("percentile", lambda x: np.percentile(x[1:5], [10.0, 50.0, 90.0])),
    ("partition", lambda x: np.partition(np.tile(x, 2), 8)),
])
def test_signed_zeros_are_numpys(name, fn):
    # a stable sort of tied zeros, np.maximum's tie (its second operand) inside clip and the running
    # extremes, and max's order inside nanmax returned +0.0 where NumPy returns -0.0 (or the reverse):
    # a later arctan2 or copysign gave another number (the fuzz2 tester)
    want = fn(_SIGNED_ZEROS.copy())
    for out in (mg.vjp(fn, _SIGNED_ZEROS.copy())[0], mg.jvp(fn, (_SIGNED_ZEROS.copy(),), (np.ones(8),))[0]):
        np.testing.assert_array_equal(out, want)
        assert np.array_equal(np.signbit(out), np.signbit(want)), (out, want)
    # the derivative is unchanged by the bits: reverse mode agrees with forward mode through a
    # sign-sensitive arctan2 (its partial in y at y = ±0 is -1 either way)
    def h(x):
        y = fn(x)
        return np.sum(np.arctan2(y, -1.0) * np.arange(1.0, 1.0 + np.size(y)).reshape(np.shape(y)))

    g = mg.grad(h)(_SIGNED_ZEROS.copy())
    np.testing.assert_allclose(g, mg.jacobian(h, mode="fwd")(_SIGNED_ZEROS.copy()), rtol=1e-14, atol=0)
    assert np.all(np.isfinite(g))


@pytest.mark.parametrize("fn", [np.unique, lambda x: np.unique(x, return_counts=True)[0]])
def test_unique_signed_zeros_are_numpys(fn):
    # np.unique keeps NumPy's bits of the tied zeros; their derivative is refused (a repeated value)
    want = fn(_SIGNED_ZEROS.copy())
    for out in (mg.vjp(fn, _SIGNED_ZEROS.copy())[0], mg.jvp(fn, (_SIGNED_ZEROS.copy(),), (np.ones(8),))[0]):
        np.testing.assert_array_equal(out, want)
        assert np.array_equal(np.signbit(out), np.signbit(want)), (out, want)
    assert isinstance(mg.grad(lambda x: np.sum(fn(x)))(_SIGNED_ZEROS.copy()), mg.NotImplementedTangent)


def test_sort_derivative_at_signed_zero_ties_shares_evenly():
    # the values are NumPy's; -0.0 and 0.0 are a tie, whose derivative the tied elements share evenly
    # (docs/errors.md): d/dx sum(w * sort(x)) = the mean of w over the ranks of x's tie, by hand
    w = np.arange(1.0, 9.0)
    rank = np.empty(8, int)
    rank[np.argsort(_SIGNED_ZEROS, kind="stable")] = np.arange(8)
    want = np.array([np.mean(w[rank[_SIGNED_ZEROS == v]]) for v in _SIGNED_ZEROS])
    assert len(set(want)) < 8  # (the case: a tie)
    np.testing.assert_allclose(mg.grad(lambda x: np.sum(w * np.sort(x)))(_SIGNED_ZEROS.copy()), want, rtol=1e-15)
    np.testing.assert_array_equal(mg.jacobian(np.sort, mode="fwd")(_SIGNED_ZEROS.copy()) @ np.ones(8), np.ones(8))


def test_boolean_ufunc_methods_into_a_traced_out():
    # a plain array's any/all with a traced out= (they call logical_or/logical_and.reduce), and the
    # other methods of boolean-valued ufuncs: NumPy's values written as constants (they raised
    # NoRuleError naming a traced input there was none of)
    M = np.arange(1.0, 10.0).reshape(3, 3) - 5
    ops = [lambda b: M.any(axis=1, out=b[:3]), lambda b: M.all(axis=0, out=b[3:6]),
           lambda b: np.logical_or.reduce(M > 0, axis=1, out=b[:3]),
           lambda b: np.greater.outer(M[0], M[1], out=b[:9].reshape(3, 3)),
           lambda b: np.logical_or.reduce(b[:3], out=b[3:4].reshape(()))]
    for op in ops:
        def f(x, op=op):
            b = x * 2.0
            op(b)
            return np.sum(b ** 2)

        x = np.linspace(0.3, 1.7, 9)
        assert mg.value_and_grad(f)(x.copy())[0] == f(x.copy())
        check_grads(f, x.copy(), order=2)


_INTO_OUT = {
    "sum": lambda x, o: np.sum(x, axis=0, out=o), "x.sum": lambda x, o: x.sum(0, out=o),
    "mean": lambda x, o: np.mean(x, axis=0, out=o), "prod": lambda x, o: np.prod(x, axis=0, out=o),
    "max": lambda x, o: np.max(x, axis=0, out=o), "x.min": lambda x, o: x.min(axis=0, out=o),
    "std": lambda x, o: np.std(x, axis=0, out=o), "ptp": lambda x, o: np.ptp(x, axis=0, out=o),
    "median": lambda x, o: np.median(x, axis=0, out=o), "nansum": lambda x, o: np.nansum(x, axis=0, out=o),
    "nanmean": lambda x, o: np.nanmean(x, axis=0, out=o), "nanmax": lambda x, o: np.nanmax(x, axis=0, out=o),
    "add.reduce": lambda x, o: np.add.reduce(x, 0, out=o),
    "maximum.reduce": lambda x, o: np.maximum.reduce(x, 0, out=o),
    "subtract.reduce": lambda x, o: np.subtract.reduce(x, 0, out=o),
    "logaddexp.reduce": lambda x, o: np.logaddexp.reduce(x, 0, out=o),
    "trace": lambda x, o: np.trace(np.stack([x, x]), axis1=0, axis2=1, out=o),
}


@pytest.mark.parametrize("oshape", [(1, 3), (3, 1), (1, 1, 3), (1,)], ids=str)
@pytest.mark.parametrize("name", list(_INTO_OUT))
def test_a_reduction_into_an_out_of_another_shape_raises_numpys_error(name, oshape):
    # a reduction's out= must have the result's shape (3,): NumPy does not broadcast the result
    # into it as an elementwise call's out=, so (1, 3) is an error (it was written, in both modes)
    x = np.arange(1.0, 7.0).reshape(2, 3)

    def f(x, xp=np):
        o = xp.zeros(oshape)
        _INTO_OUT[name](x, o)
        return np.sum(o * o)

    with pytest.raises(ValueError) as plain:
        f(x.copy())
    with pytest.raises(ValueError) as traced:
        mg.grad(f)(x.copy(), mnp)
    if "number of dimensions" in str(plain.value):
        assert str(traced.value) == str(plain.value)
    with pytest.raises(ValueError):
        mg.jvp(lambda x: f(x, mnp), (x.copy(),), (np.ones_like(x),))


@pytest.mark.parametrize("name", list(_INTO_OUT))
def test_a_reduction_into_an_out_of_the_results_shape(name):
    x = np.linspace(0.3, 1.9, 6).reshape(2, 3)

    def f(x, xp=np):
        o = xp.zeros(3)
        r = _INTO_OUT[name](x, o)
        return np.sum(o * o) + np.sum(r)

    assert mg.value(mg.value_and_grad(f)(x.copy(), mnp)[0]) == f(x.copy())
    check_grads(lambda x: f(x, mnp), x.copy(), order=1)


@pytest.mark.parametrize("fn", [np.median, np.nanmedian])
def test_median_of_no_values_writes_its_nans_into_out(fn):
    # NumPy writes the NaNs into out= and returns out (mutagrad returned a new array, out untouched)
    def f(x):
        o = x[:3] * 1.0
        with np.errstate(all="ignore"), pytest.warns(RuntimeWarning):
            r = fn(np.empty((0, 3)), axis=0, out=o)
        assert r is o
        return np.sum(np.nan_to_num(o)) + np.sum(x)

    x = np.arange(4.0)
    assert mg.value_and_grad(f)(x.copy())[0] == f(x.copy()) == 6.0
    np.testing.assert_array_equal(mg.grad(f)(x.copy()), np.ones(4))  # o holds NaNs (0 after nan_to_num): no x there


_WITH_INITIAL = {
    "sum int64": lambda x: np.sum(x, initial=0.5, dtype=np.int64),
    "sum float32": lambda x: np.sum(x, initial=x[0] * 3, dtype=np.float32),
    "max float32": lambda x: np.max(x.astype(np.float32), initial=x[0] * 3),
    "prod float32": lambda x: np.prod(x, initial=2.5, dtype=np.float32),
    "add.reduce float32": lambda x: np.add.reduce(x, initial=x[1] / 3, dtype=np.float32),
    "minimum.reduce float32": lambda x: np.minimum.reduce(x.astype(np.float32), initial=x[2] * 0.1),
    "max float64": lambda x: np.max(x, initial=x[0] * 3),
}


@pytest.mark.parametrize("name", list(_WITH_INITIAL))
def test_initial_is_cast_to_the_reductions_loop(name):
    # NumPy casts initial= to the loop's dtype before starting from it: 0.5 with dtype=int64 is 0, a
    # float64 start of a float32 maximum a float32 (mutagrad added it in float64: -1.5, not -2)
    fn = _WITH_INITIAL[name]
    x = np.array([-1.319, -1.844, 0.77])
    want = fn(x.copy())
    got = mg.vjp(fn, x.copy())[0]
    assert type(got) is type(want) and got.dtype == want.dtype and _bits(got) == _bits(want)
    if want.dtype == np.float64:
        check_grads(fn, x.copy(), order=1)
    by_hand = {  # (float32 results: the derivative by hand, to float32's precision)
        "sum float32": [4.0, 1.0, 1.0], "max float32": [0.0, 0.0, 1.0], "add.reduce float32": [1.0, 4 / 3, 1.0],
        "prod float32": 2.5 * np.array([x[1] * x[2], x[0] * x[2], x[0] * x[1]]),
        "minimum.reduce float32": [0.0, 1.0, 0.0]}
    if name in by_hand:
        np.testing.assert_allclose(mg.grad(lambda x: fn(x).astype(np.float64))(x.copy()), by_hand[name], rtol=1e-6)


def _bits(v):
    return np.asarray(v).tobytes()


@pytest.mark.parametrize("fn", [np.mean, np.var, np.std])
@pytest.mark.parametrize("where", [[1.0, 0.0, 0.5, 1.0], [2, 0, 1, 1]], ids=["floats", "ints"])
def test_mean_and_var_count_a_where_list_as_numpy_does(fn, where):
    # NumPy divides by the mask's values summed as integers (0.5 counts 0, 2 counts 2), while it
    # selects the nonzero ones: its value was NumPy's, the derivative divided by the nonzero count
    f = lambda x: fn(x ** 2, where=where)
    x = np.array([0.3, 1.7, -0.4, 2.2])
    assert mg.value_and_grad(f)(x.copy())[0] == f(x.copy())
    check_grads(f, x.copy(), order=1)


@pytest.mark.parametrize("call", [
    lambda x: np.sum(x, where=None), lambda x: np.max(x, where=None, initial=-10.0),
    lambda x: np.add.reduce(x, where=None), lambda x: np.prod(x, where=None),
    lambda x: np.nansum(x, where=None), lambda x: np.minimum.reduce(x, where=None, initial=5.0),
    lambda x: np.subtract.reduce(x, where=None, initial=0.0), lambda x: np.nanmax(x, where=None, initial=-3.0),
], ids=["sum", "max", "add.reduce", "prod", "nansum", "minimum.reduce", "subtract.reduce", "nanmax"])
def test_where_none_selects_nothing_as_in_numpy(call):
    # NumPy's ufunc machinery takes where=None for False: the identity or initial=, a constant (it
    # was taken as no mask: the sum of x and its derivative)
    x = np.array([0.3, 1.7, -0.4, 2.2])
    val, g = mg.value_and_grad(call)(x.copy())
    assert val == call(x.copy())
    np.testing.assert_array_equal(g, np.zeros(4))
    for fn in (np.mean, np.var):  # (they count the mask with int(): NumPy's TypeError)
        with pytest.raises(TypeError):
            fn(x, where=None)
        with pytest.raises(TypeError):
            mg.grad(lambda x, fn=fn: fn(x, where=None))(x.copy())


_X9 = np.array([float.fromhex(h) for h in [
    '-0x1.43f2a959cc8bbp+0', '-0x1.3f1dd4920f4fbp-1', '0x1.528adc38b0ce3p-5', '-0x1.299a9bc1a2383p+1',
    '-0x1.c015d809d257ep-3', '-0x1.3ef405142e27ep+0', '-0x1.76ebbf28c26f7p-1', '-0x1.16a91d07da4d4p-1',
    '-0x1.43e4302d4d028p-2']])


@pytest.mark.parametrize("call,shape,odt", [
    (lambda x, o: np.quantile(x * 1.5, 0.3, out=o), (), np.float32),
    (lambda x, o: np.percentile(x * 1.5, [30, 70], out=o), (2,), np.float32),
    (lambda x, o: np.nanquantile(x * 1.5, 0.3, out=o), (), np.float32),
    (lambda x, o: np.nanmean(x, out=o), (), np.complex128),
    (lambda x, o: np.nanmean(x, out=o), (), np.float32),
], ids=["quantile-f32", "percentile-f32", "nanquantile-f32", "nanmean-c128", "nanmean-f32"])
def test_a_reduction_into_an_out_of_another_dtype_has_numpys_bits(call, shape, odt):
    # NumPy computes into out= (a float32 interpolation, a complex mean): the cast of the float64
    # result was a last bit off
    def f(x, zeros, dt=odt):
        o = zeros(shape, dt)
        call(x, o)
        return o

    want = f(_X9.copy(), np.zeros)
    got = np.asarray(mg.vjp(lambda x: f(x, mnp.zeros), _X9.copy())[0])
    assert got.dtype == want.dtype and got.tobytes() == want.tobytes()
    # the derivative: that of the float64 result (checked against central differences), cast
    wide = lambda x: np.sum(f(x, mnp.zeros, np.float64))
    check_grads(wide, _X9.copy(), order=1)
    np.testing.assert_allclose(mg.grad(lambda x: np.sum(np.real(f(x, mnp.zeros))).astype(np.float64))(_X9.copy()),
                               mg.grad(wide)(_X9.copy()), rtol=1e-6, atol=1e-7)


def test_nanmean_into_a_complex_out_argument_has_numpys_bits():
    def f(x, o):
        return np.sum(np.real(np.nanmean(x, out=o)))

    o1, o2 = np.zeros((), complex), np.zeros((), complex)
    want = f(_X9.copy(), o1)
    val, g = mg.value_and_grad(f)(_X9.copy(), o2)
    assert val == want and o2.tobytes() == o1.tobytes()
    np.testing.assert_allclose(g, np.full(9, 1 / 9), rtol=1e-15)  # d/dx_i of the mean, by hand


@pytest.mark.parametrize("method", ["nearest", "inverted_cdf", "closest_observation", "lower", "higher", "linear"])
def test_quantile_into_an_out_the_result_broadcasts_to(method):
    # NumPy's discrete methods gather with np.take, whose out= must have the result's shape; the
    # interpolating ones broadcast into it (mutagrad accepted both)
    def f(x, zeros):
        out = zeros((2, 3))
        np.quantile(x.reshape(2, 3), 0.3, axis=0, method=method, out=out)
        return np.sum(out * out)

    x = np.linspace(0.3, 1.9, 6)
    if method == "linear":
        assert mg.value_and_grad(lambda x: f(x, mnp.zeros))(x.copy())[0] == f(x.copy(), np.zeros)
        check_grads(lambda x: f(x, mnp.zeros), x.copy(), order=1)
        return
    with pytest.raises(ValueError, match="output array does not match result of ndarray.take"):
        f(x.copy(), np.zeros)
    with pytest.raises(ValueError, match="output array does not match result of ndarray.take"):
        mg.grad(lambda x: f(x, mnp.zeros))(x.copy())


@pytest.mark.parametrize("fn", [np.median, np.nanmedian, lambda x, **k: np.quantile(x, 0.3, **k),
                                lambda x, **k: np.nanpercentile(x, 30, **k)])
@pytest.mark.parametrize("shape", [(4,), (4, 1)])
def test_keepdims_median_into_an_out_of_another_shape_is_numpys_error(fn, shape):
    # a keepdims result of shape (1, 4) into out= of fewer dimensions: NumPy raises IndexError,
    # into a transposed one ValueError (mutagrad wrote the (4,) out and went on)
    def f(x, zeros):
        out = zeros(shape)
        fn(x.reshape(3, 4), axis=0, keepdims=True, out=out)
        return np.sum(out * out)

    x = np.linspace(0.3, 1.9, 12)
    with pytest.raises((IndexError, ValueError)) as plain:
        f(x.copy(), np.zeros)
    with pytest.raises(type(plain.value), match=re.escape(str(plain.value)[:40])):
        mg.grad(lambda x: f(x, mnp.zeros))(x.copy())


@pytest.mark.parametrize("fn", [np.quantile, np.nanquantile])
def test_weighted_quantile_with_overwrite_input_leaves_the_argument_as_numpy_does(fn):
    # NumPy's weighted quantile sorts a copy: the replay of overwrite_input without weights= sorted
    # the argument itself
    w = np.arange(1.0, 6.0)[:, None] * np.ones((5, 4))

    def f(a):
        return np.sum(fn(a, 0.3, axis=0, method="inverted_cdf", weights=w, overwrite_input=True) * [1.0, 2, 3, 4])

    x = np.random.default_rng(9).standard_normal((5, 4))
    xp, xm = x.copy(), x.copy()
    want = f(xp)
    value, g = mg.value_and_grad(f)(xm)
    assert value == want and xm.tobytes() == xp.tobytes()
    np.testing.assert_allclose(g, numerical_grad(f, (x,), (0,))[0], atol=1e-8)  # (a selection: 0s and 1..4)


@pytest.mark.parametrize("fn", [np.median, np.nanmedian])
@pytest.mark.parametrize("xdt,odt", [(np.float32, np.float64), (np.float64, np.longdouble), (np.float32, np.complex128)])
def test_median_into_a_wider_out_averages_there_as_numpy(fn, xdt, odt):
    # NumPy averages the two middle values in out's dtype; mutagrad averaged in the input's
    x = np.array([[0.1, 0.2, 0.7, 0.4], [0.3, 0.9, 0.11, 0.5]], xdt)

    def f(a, zeros):
        o = zeros(2, odt)
        fn(a, axis=1, out=o)
        return np.sum(np.real(o) * [1.0, 2.0]), o

    want, o_plain = f(x, np.zeros)
    (value, o), g = mg.value_and_grad(lambda a: f(a, mnp.zeros), has_aux=True)(x)
    assert value == want and np.array_equal(o, o_plain) and o.dtype == o_plain.dtype
    np.testing.assert_allclose(g, [[0, 0.5, 0, 0.5], [1, 0, 0, 1]], rtol=1e-7)  # (the middle two, by hand)


@pytest.mark.parametrize("kw", [{"dtype": np.float64}, {"signature": "dd->d"}])
def test_a_ufunc_dtype_of_the_operands_own_type_reads_them_in_place(kw):
    # NumPy's loop reads a strided operand in place; a copy for dtype= ran the contiguous loop,
    # whose last bit differs (arctan2)
    a = np.random.default_rng(0).standard_normal(200)

    def f(a):
        return np.arctan2(a, a[::-1], **kw)

    assert mg.vjp(f, a)[0].tobytes() == f(a).tobytes()
    assert mg.jvp(f, (a,), (a,))[0].tobytes() == f(a).tobytes()
