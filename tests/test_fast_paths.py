"""The tape's fast paths give the general path's numbers.

Elementwise operations are recorded as one ``EWRecord``; their backward step
computes a cotangent in the dead output adjoint and passes the adjoint on to
an input (adoption). Traced scalars are NumPy scalars and two float64
scalars use the scalars' own operator. Views find their place in the storage
through the array's data pointer. Each is checked here against finite
differences and the other mode (check_grads), or against NumPy's own bits.
"""
import numpy as np
import pytest

import mutagrad as mg
from mutagrad import core
from mutagrad.testing import check_grads

try:
    from numpy.lib.array_utils import byte_bounds
except ImportError:  # NumPy < 2
    byte_bounds = np.byte_bounds

RNG = np.random.default_rng(7)
X = RNG.uniform(0.5, 1.5, 12)


def shared_input_twice(x):
    return np.sum(x * x + x)  # one storage reaches the add through two paths


def views_and_subtraction(x):
    # the heat stencil's shape: the donation must pass over views to the fresh operand
    return np.sum(x[1:-1] + 0.25 * (x[2:] - 2 * x[1:-1] + x[:-2]))


def chain_of_one_input_ops(x):
    y = np.sin(x)
    y = y * 2.0
    y = -y
    y = np.exp(y) / 3.0
    return np.sum(y * y)


def reused_intermediate(x):
    t = np.tanh(x)
    u = t * 3.0  # t's adjoint gets contributions from three operations
    v = t - u
    return np.sum(v * t + u)


def broadcast_operands(x):
    m = x.reshape(3, 4)
    return np.sum(m * x[:4] - m[:, :1] * 2.0)  # cotangents summed to a smaller shape: never in place


def complex_partial(x):
    return np.sum(np.abs(x * (1.0 + 2.0j)) ** 2)  # the partial is complex, the adjoint real


def scalar_loop(x):
    y = x[0]
    for k in range(1, 6):
        y = y * 1.0001 + np.sin(y) - x[k] / 3.0
    return y


def broadcast_of_a_traced_scalar(x):
    s = np.sum(x)
    b = np.broadcast_to(s, (2, 3))  # NumPy copies the scalar into new memory first
    return np.sum(b * np.arange(6.0).reshape(2, 3)) + s * s


def full_overwrites(x):
    """`buf[:] = v` and `u += ...` overwrite whole storages: the value takes the adjoint over."""
    buf = x * 1.0
    y = np.sin(buf)  # reads buf before it is overwritten
    buf[:] = np.exp(x)  # handed over: buf's earlier contents get a zero adjoint
    z = buf * y
    buf[...] = np.cos(z) + buf  # the value reads buf itself
    u = x.copy()
    for _ in range(3):
        u += 0.1 * np.tanh(u) * buf  # out= write of a fresh result over all of u
    return np.sum(u * z)


def full_overwrite_of_a_value_used_later(x):
    buf = np.zeros_like(x)
    v = np.exp(x)
    buf[:] = v
    w = v * 3.0  # v has an adjoint before the write is undone: no hand-over
    buf[:] = buf * w
    return np.sum(buf) + np.sum(v * v)


def view_subtrahends(x):
    """Views subtracted (partial -1) are accumulated by subtraction, first contribution or not."""
    y = x * 1.0
    a = 1.0 - y[1:-1]  # y's first cotangent: a subtraction into one block
    b = y[2:] - y[:-2]  # one added, one subtracted view of the same storage
    c = -y[::2]  # strided: not one block
    return np.sum(a * b * np.cos(y[1:-1])) + np.sum(c * c * c) - np.sum(x[1:] - x[:-1] ** 2)


def first_cotangent_by_subtraction(x):
    y = x * 1.0
    z = np.sin(y[:-2])  # read first, so its cotangent arrives last
    a = 2.0 - y[1:-1]  # the last read: y's first cotangent is subtracted into a fresh buffer
    return np.sum(a * a * z)


def inplace_ufuncs_on_whole_arrays(x):
    """`u op= v` and `ufunc(..., out=u)` over all of u are computed in place, as NumPy does."""
    u = x * 1.0
    c = np.sin(u)  # reads u: every write below must save what it overwrites
    u += np.cos(x)  # the partials read nothing
    u *= u  # reads the destination itself
    np.sin(u, out=u)  # a layout-dependent ufunc, in place
    np.add(u, u[::-1], out=u)  # an input overlapping the destination
    w = np.zeros_like(x)
    np.multiply(c, u, out=w)  # a fresh buffer
    w -= 0.5 * x
    np.exp(w, out=w)  # reads its output: the general path
    return np.sum(w * c) + np.sum(u)


def inplace_ufunc_into_an_argument(x):
    x *= 2.0  # the caller's array, overwritten in place (its final contents are checked too)
    np.tanh(x, out=x)
    return np.sum(x ** 3)


def inplace_op_first_reader(x):
    w = x * 1.0
    w *= w  # the first read of w is this in-place product: it must save the old w itself
    np.multiply(w, x, out=w)
    w += np.sin(w)
    return np.sum(w * w)


def block_writes(x):
    """`buf[a:b] = fresh` hands that block of buf's adjoint to the value; the rest stays buf's."""
    n = x.shape[0]
    u = x * 1.0
    new = np.zeros_like(x)
    for _ in range(3):
        new[1:-1] = u[1:-1] + 0.25 * (u[2:] - 2 * u[1:-1] + u[:-2])  # the heat stencil
        new[0] = new[1] * 0.5
        new[-1] = np.sin(new[-2])
        u, new = new, u
    m = u.reshape(3, n // 3).copy()
    m[1:, :] = np.cos(m[:-1, :]) * m[1:, :]  # a block of rows, from values that overlap it
    m[0, 1:3] = m[2, :2] * 3.0
    return np.sum(m * m) + np.sum(u[::2])


def block_writes_over_zero_and_live_ends(x):
    """A block write whose destination's adjoint is zero outside the block (its ends were
    overwritten later) leaves no buffer behind; with a live end it keeps one."""
    buf = x * 2.0
    early = buf * np.cos(x)  # reads buf's first contents: their adjoint comes after the writes
    buf[1:-1] = np.sin(x[1:-1])  # later: the ends are overwritten, so the rest's adjoint is zero
    buf[0] = x[1] * 3.0
    buf[-1] = 0.5
    mid = buf * buf
    buf[1:] = np.exp(x[:-1])  # later: buf[0] is still read below, its adjoint is live
    return np.sum(mid) + np.sum(early * early) + np.sum(buf * x) + buf[0] * x[2]


def unit_factors(x):
    """A factor of exactly 1.0 passes the cotangent on without a pass (D * u'' with D = 1.0)."""
    y = 1.0 * x[1:] + 1.0 * np.sin(x[:-1])
    z = np.float32(1.0) * y * 1.0
    return np.sum(z * z) + 1.0 * np.sum(x) * 1.0


def slices_of_overlapping_views(x):
    """A basic index of a view whose elements share memory keeps sharing: its
    cotangent must still be summed over the aliases."""
    w = np.arange(24.0).reshape(6, 4)[:, :3] + 1
    b = np.broadcast_to(x[:3], (6, 3))
    c = b[1:, ::2]
    d = np.lib.stride_tricks.sliding_window_view(x, 3)[1:]
    return np.sum(np.sin(c) * w[1:, ::2]) + np.sum(d * d * (np.arange(d.size).reshape(d.shape) + 1.0))


def products_and_totals(x):
    """`a @ b` of two traced real arrays and np.sum(x) of a traced array are
    recorded directly (Primitive.fast, reductions._total): views, a constant
    traced operand, writes into an operand after the product read it."""
    a = x.reshape(3, 4)  # a view of the argument
    v = np.sin(x[:4])
    y = a @ v  # 2-D @ 1-D, both active
    c = a @ np.cos(a).T  # 2-D @ 2-D, both active, a view
    k = (mg.stop_gradient(x) * 0.0 + np.arange(12.0)).reshape(3, 4)  # a traced constant
    z = k @ v + (k.T @ a[:, :2]).ravel()[:3]  # one active operand each
    d = x[4:7] - x[:3]
    q = d @ d + v[:3] @ d + k[0, :3] @ d  # 1-D @ 1-D: one storage twice, two, a constant operand
    a[0, 0] = 5.0  # overwrites what the products read
    a[1] *= 2.0
    v += 1.0
    d *= 3.0
    return np.sum(y * y) + np.sum(c) + np.sum(z * z) + np.sum(x[::3] ** 2) + np.sum(a * v) + q * q + np.sum(d)


# `a + b` whose operands have no adjoint yet gives both its cotangent as is: one buffer, shared by
# two storages until one of them writes into it (each program below writes into it in another way
# while the other operand, computed first, still has to read it further down the reverse pass)


def shared_then_accumulated(x):
    b = np.sin(x)
    a = x * 2.0
    c = a * a  # a read before the sum: its contribution arrives after the sum's in the reverse pass
    z = a + b
    return np.sum(z * z) + np.sum(c)


def shared_then_scaled_in_place(x):
    b = np.exp(x)
    a = np.sin(x) * x  # a's pullback would compute its operands' cotangents in the buffer it was given
    z = b - 0.5 + a
    return np.sum(z * np.cos(x))


def shared_block_handover(x):
    t = np.cos(x)
    buf = np.zeros_like(x)
    buf[1:-1] = np.sin(x[1:-1]) * x[:-2]  # a fresh value written into one block
    z = buf + t
    return np.sum(z * z)


def shared_full_handover(x):
    t = np.cos(x)
    buf = np.empty_like(x)
    buf[:] = x * x  # a fresh value written over all of buf
    z = buf + t
    return np.sum(z * z * x)


def shared_then_gathered(x):
    t = np.cos(x)
    a = x * 2.0
    e = a[[0, 3, 3, 7]]  # a gather with a repeated index: a scatter into a's adjoint
    f = a[2:5] * 3.0  # a view read: an addition into a block of a's adjoint
    z = a + t
    return np.sum(z * z) + np.sum(e ** 2) + np.sum(f * f)


def shared_then_element_loop(x):
    t = np.cos(x)
    a = x * 2.0
    s = 0.0
    for i in range(8):  # element reads recorded by a run
        s = s + a[i] * a[i + 1] * 0.5
    z = a + t
    return np.sum(z * z) + s


def shared_then_written(x):
    t = np.cos(x)
    a = x * 2.0
    a[[0, 5]] = x[:2] * 5.0  # a write with an index array: zeroes what it overwrote in a's adjoint
    a[7] = x[3] * x[4]
    z = a + t
    return np.sum(z * z)


def shared_with_an_operand_of_its_reader(x):
    """`u += h(u)`: u's old contents and h share the cotangent; h's pullback adds into u's adjoint
    (the other holder) and still reads the cotangent afterwards, for h's other operand."""
    u = x * 1.0
    u += np.hypot(u, 1.0 + (u * x[::-1]) ** 2)
    return np.sum(u * np.linspace(-1.0, 1.0, u.size))


def shared_zero_d(x):
    t = np.sum(np.cos(x), keepdims=True).reshape(())
    a = np.zeros_like(x, shape=())
    a[...] = np.sum(x * x)
    c = a * 3.0
    z = a + t
    return z * z + c * c


PROGRAMS = [shared_then_accumulated, shared_then_scaled_in_place, shared_block_handover, shared_full_handover,
            shared_then_gathered, shared_then_element_loop, shared_then_written, shared_with_an_operand_of_its_reader,
            shared_zero_d,
            products_and_totals, slices_of_overlapping_views, block_writes, block_writes_over_zero_and_live_ends, unit_factors, inplace_op_first_reader, inplace_ufuncs_on_whole_arrays, inplace_ufunc_into_an_argument,
            first_cotangent_by_subtraction, view_subtrahends, full_overwrites, full_overwrite_of_a_value_used_later,
            shared_input_twice, views_and_subtraction, chain_of_one_input_ops, reused_intermediate,
            broadcast_operands, complex_partial, scalar_loop, broadcast_of_a_traced_scalar]


@pytest.mark.parametrize("fn", PROGRAMS, ids=lambda f: f.__name__)
def test_fast_paths_against_finite_differences_and_forward_mode(fn):
    check_grads(fn, X.copy(), order=2)


def test_arguments_given_one_cotangent_get_gradients_of_their_own():
    """`x + y` hands its cotangent to both arguments as one buffer: each gradient is an array of
    its own (the complex convention conjugates each in place)."""
    x, y = X.copy(), X[::-1].copy()
    gx, gy = mg.grad(lambda a, b: np.sum(np.sin(a + b)), argnums=(0, 1))(x, y)
    assert not np.shares_memory(gx, gy)
    np.testing.assert_allclose(gx, np.cos(x + y), rtol=1e-14)
    gx += 1.0
    np.testing.assert_allclose(gy, np.cos(x + y), rtol=1e-14)
    z, w = X + 0.5j * X[::-1], X[::-1] - 2j
    gz, gw = mg.grad(lambda a, b: np.sum(np.abs(a + b) ** 2), argnums=(0, 1))(z, w)
    np.testing.assert_allclose(gz, 2 * np.conj(z + w), rtol=1e-14)  # docs/complex.md: d|u|^2 -> 2 conj(u)
    np.testing.assert_allclose(gw, 2 * np.conj(z + w), rtol=1e-14)


def test_scalar_arithmetic_gives_numpys_bits():
    """Two float64 scalars use their own operator: the value must be exactly a plain call's."""
    x = RNG.standard_normal(6)

    def f(x):
        a, b = x[0], x[1]
        y = a * 1.0001 + b / 3.0 - a * b
        y = y / (b - 7.0) + 2.0 * y - y * y
        for k in range(2, 6):
            y = y * x[k] + np.sin(y) / x[k]
        return y

    value, _ = mg.value_and_grad(f)(x)
    plain = f(x)
    assert type(value) is type(plain)
    assert value.tobytes() == plain.tobytes()


def test_traced_scalars_are_numpy_scalars_inside():
    seen = []

    def f(x):
        s = np.sum(x) * 2.0
        seen.append(type(core.bottom(s)))
        return s

    mg.grad(f)(X.copy())
    assert seen == [np.float64]


@pytest.mark.parametrize("idx", [(), None, Ellipsis, (None, None), (np.newaxis, Ellipsis), True],
                         ids=["()", "None", "...", "None,None", "newaxis,...", "True"])
def test_traced_scalars_are_indexed_as_numpy_scalars(idx):
    def f(x):
        s = np.sum(x * x)
        r = s[idx]
        return np.sum(r * x) if np.ndim(r) else r * x[0]

    plain = np.float64(2.5)[idx]
    seen = []
    mg.grad(lambda x: seen.append(mg.value(np.sum(x)[idx])) or np.sum(x))(X.copy())
    assert np.shape(seen[0]) == np.shape(plain) and np.ndim(seen[0]) == np.ndim(plain)
    check_grads(f, X.copy())


def test_traced_scalars_have_no_len_and_no_iteration():
    for use in (len, iter, lambda s: s[0]):
        with pytest.raises((TypeError, IndexError)):
            mg.grad(lambda x, use=use: use(np.sum(x)) and np.sum(x))(X.copy())


@pytest.mark.parametrize("make", [
    lambda: np.zeros(7),
    lambda: np.arange(24.0).reshape(4, 6)[1:, ::2],
    lambda: np.asfortranarray(np.ones((3, 5))),
    lambda: np.ones((4, 6)).T[::-1],
    lambda: np.zeros(0),
    lambda: np.zeros(()),
    lambda: np.broadcast_to(np.arange(3.0), (4, 3)),
    lambda: np.zeros(10, dtype=np.complex64).imag,
], ids=["contiguous", "strided", "fortran", "reversed", "empty", "0-d", "broadcast", "imag"])
def test_data_pointer_and_bounds_match_numpy(make):
    a = make()
    assert core._ptr(a) == a.__array_interface__["data"][0]
    assert core._bounds_of(a) == byte_bounds(a)


def test_view_reads_and_writes_through_basic_indices():
    """Views made by basic indices (no containment test) land on the right elements."""

    def f(x):
        m = x.reshape(3, 4).copy()
        r = m[1:, ::2]  # strided view
        r[0, :] = m[0, 1:3] * 2.0  # written through the view, read from another
        c = m[..., None][:, 1, 0]  # Ellipsis and a new axis
        m[2, 1:] = np.sin(c)
        return np.sum(m * m) + np.sum(r[::-1] ** 3)

    check_grads(f, X.copy(), order=1)


@pytest.mark.parametrize("n", [10, 300, 5000])
def test_first_contribution_through_a_view_leaves_the_rest_zero(n):
    """The first cotangent of a storage that arrives through one block of it is
    copied into an uninitialised buffer whose other elements are zeroed: with
    freed NaN-filled memory around, the elements no view reached must be 0."""
    w = np.linspace(1.0, 2.0, n - 5)

    def f(x):
        y = x * 1.0  # a fresh storage whose only reader is the view below
        return np.sum(y[2:-3] * w)

    g = mg.grad(f)
    for _ in range(20):
        junk = [np.full(n, np.nan) for _ in range(4)]
        del junk
        got = g(np.ones(n))
        assert np.array_equal(got[:2], [0.0, 0.0]) and np.array_equal(got[-3:], [0.0, 0.0, 0.0])
        assert np.array_equal(got[2:-3], w)


def test_inplace_ufunc_leaves_numpys_bits():
    x = RNG.standard_normal(37)

    def f(x):
        u = x * 1.0
        u *= np.float64(1.0001)
        np.sin(u, out=u)
        np.add(u, u[::-1], out=u)
        u /= 3.0
        return np.sum(u * u), u

    (val, u_traced), _ = mg.value_and_grad(f, has_aux=True)(x.copy())
    val_plain, u_plain = f(x.copy())
    assert val.tobytes() == val_plain.tobytes()
    assert u_traced.tobytes() == u_plain.tobytes()


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_direct_products_and_totals_give_the_general_paths_bits(dtype):
    # strict mode records every operation with its line, through the general path
    def f(x, w):
        m = x.reshape(3, 4)
        return np.sum(np.tanh(m @ w) ** 2) + np.sum(m.T @ m) + np.sum(x)

    x = X.astype(dtype)
    w = RNG.standard_normal((4, 2)).astype(dtype)
    fast = mg.grad(f, (0, 1))(x, w)
    with mg.config(strict=True):
        general = mg.grad(f, (0, 1))(x, w)
    for a, b in zip(fast, general):
        assert a.dtype == b.dtype == dtype
        assert np.array_equal(a, b)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_unit_factor_keeps_dtype_and_value(dtype):
    x = X.astype(dtype)
    w = np.linspace(-1.0, 2.0, 12).astype(dtype)
    g = mg.grad(lambda x: np.sum(1.0 * x * w))(x)
    assert g.dtype == dtype
    assert np.array_equal(g, w)  # 1 * 1.0 * w, exact


BITS_CASES = {
    "norm": np.linalg.norm,
    "norm fro": lambda X: np.linalg.norm(X.reshape(3, -1), "fro"),
    "norm 2 of a vector": lambda x: np.linalg.norm(x, 2),
    "norm keepdims": lambda x: np.sum(np.linalg.norm(x, keepdims=True)),
    "norm complex": lambda x: np.linalg.norm(x * (1 + 0.5j) + x[::-1] * 1j),
    "vdot": lambda x: np.vdot(x, np.sin(x)),
    "vdot complex": lambda x: np.real(np.vdot(x * 1j + 0.5, x + 2j)),
    "logaddexp.reduce": np.logaddexp.reduce,
    "logaddexp2.reduce initial": lambda x: np.logaddexp2.reduce(x, initial=0.25),
    "logaddexp.reduce axis": lambda x: np.sum(np.logaddexp.reduce(x.reshape(3, -1), axis=1) ** 2),
    # (one pass instead of a traced step per element: 9000x and 1100x a plain call before; graphalgo)
    "subtract.reduce": np.subtract.reduce,
    "subtract.reduce axis": lambda x: np.sum(np.subtract.reduce(x.reshape(3, -1), axis=1) ** 2),
    "hypot.reduce": np.hypot.reduce,
    "hypot.reduce axis keepdims": lambda x: np.sum(np.hypot.reduce(x.reshape(3, -1), axis=0, keepdims=True) ** 3),
}


def test_hypot_reduce_second_derivative_where_a_leading_pair_is_zero():
    # the norm's Hessian (I - u u^T) / r, by hand; the fold's first step hypot(0, 0) sat on a kink (0 before)
    x = np.array([0.0, 0.0, 2.0])
    np.testing.assert_allclose(mg.hessian(np.hypot.reduce)(x), np.diag([0.5, 0.5, 0.0]), atol=1e-15)
    np.testing.assert_array_equal(mg.grad(np.hypot.reduce)(x), [0.0, 0.0, 1.0])


@pytest.mark.parametrize("name", list(BITS_CASES))
def test_values_have_numpys_bits(name):
    # the traced value is NumPy's, bit for bit (a branch on it goes as in a plain call);
    # these were computed by other formulas (sum of squares, one-pass log-sum-exp): 1 ulp off
    f = BITS_CASES[name]
    rng = np.random.default_rng(11)
    for _ in range(40):
        x = rng.standard_normal(3 * int(rng.integers(1, 12)))
        value, _ = mg.value_and_grad(f)(x.copy())
        assert np.array_equal(value, f(x.copy())), (name, value, f(x.copy()))
        primal, _ = mg.jvp(f, (x.copy(),), (np.ones_like(x),))
        assert np.array_equal(primal, f(x.copy())), (name, "forward mode", primal)
    check_grads(f, rng.standard_normal(6), order=2)


def test_branch_on_a_norm_goes_as_in_a_plain_call():
    rng = np.random.default_rng(0)
    for _ in range(50):
        x = rng.standard_normal(12)
        tol = float(np.linalg.norm(x))  # exactly the plain value: the plain call takes the 3r branch

        def f(x, tol=tol):
            r = np.linalg.norm(x)
            return 2.0 * r if r > tol else 3.0 * r

        value, g = mg.value_and_grad(f)(x.copy())
        assert value == f(x.copy())
        np.testing.assert_allclose(g, 3.0 * x / tol, rtol=1e-12)


# -- plain NumPy's bits in in-place and complex code ----------------------------------


def _same_as_plain(f, x):
    plain = x.copy()
    want = f(plain)
    arg = x.copy()
    value, _ = mg.value_and_grad(f)(arg)
    assert np.array_equal(value, want), (value, want)
    assert np.array_equal(arg, plain)  # the side effects, bit for bit
    arg = x.copy()
    value, _ = mg.jvp(f, (arg,), (np.ones_like(x),))
    assert np.array_equal(value, want), ("forward mode", value, want)
    assert np.array_equal(arg, plain), "forward mode side effects"


def test_float32_ufunc_with_a_python_float_and_where_computes_in_float32():
    mask = np.array([True, False, True, True])

    def f(x):
        np.multiply(x, 0.61, out=x, where=mask)  # 0.61 is weak (NEP 50): float32 arithmetic
        np.subtract(x, 0.3, out=x, where=mask)
        return np.sum(x.astype(np.float64) ** 2)

    _same_as_plain(f, np.array([0.9, 0.3, 0.7, 0.55], dtype=np.float32))


def test_complex_scalar_arithmetic_is_numpys_scalar_arithmetic():
    rng = np.random.default_rng(1)
    z = rng.uniform(0.1, 1, 60) + 1j * rng.uniform(0.1, 1, 60)

    def f(z):
        for i in range(0, 60, 2):
            z[i] = z[i] * z[i + 1] + z[i] / (z[i + 1] + 1j)
        return np.sum(np.abs(z) ** 2)

    _same_as_plain(f, z)


@pytest.mark.parametrize("e", [2, 0.5, -1, 2.0, -1.0, 3])
def test_complex_array_power_takes_numpys_shortcuts(e):
    # array ** 2 is np.square, ** 0.5 np.sqrt, ** -1 np.reciprocal (NumPy's own choice)
    rng = np.random.default_rng(2)
    z = rng.uniform(0.1, 3, 40) + 1j * rng.uniform(0.1, 3, 40)

    def f(z):
        y = z ** e
        z **= e
        return np.sum(np.abs(y) + np.abs(z))

    _same_as_plain(f, z)
    check_grads(lambda z: z ** e, z[:4], order=1)


def test_complex_var_and_std_have_numpys_bits():
    rng = np.random.default_rng(0)
    X = rng.uniform(0.1, 1, (30, 4)) + 1j * rng.uniform(0.1, 1, (30, 4))

    def f(x):
        v = x.var(axis=1) + x.std(axis=0).sum()
        (x * 1.0).var(axis=1, out=x[:, 1])  # into a complex column: NumPy sums in complex there
        return np.sum(v) + np.sum(np.abs(x) ** 2)

    _same_as_plain(f, X)

    def g(y):
        o = np.zeros_like(y[:, 0], dtype=np.float32)
        np.var(y, axis=1, out=o)
        return np.sum(o.astype(np.float64))

    _same_as_plain(g, rng.standard_normal((30, 5)))
    check_grads(lambda x: x.var(axis=1), X[:3], order=2)


def test_copyto_checks_casting_as_numpy():
    import mutagrad.numpy as mnp

    def f(x, casting):
        b = mnp.zeros(3, np.float32)
        np.copyto(b, x * 2.0, casting=casting)
        return np.sum(b.astype(np.float64))

    with pytest.raises(TypeError, match="safe"):
        mg.grad(f)(np.array([1.0, 2.0, 3.0]), "safe")
    np.testing.assert_array_equal(mg.grad(f)(np.array([1.0, 2.0, 3.0]), "same_kind"), [2.0, 2.0, 2.0])


@pytest.mark.parametrize("ufunc", [np.multiply, np.divide, np.add])
def test_complex_ufunc_at_with_repeats_has_numpys_bits(ufunc):
    rng = np.random.default_rng(0)
    v = rng.uniform(0.1, 2, 5) + 1j * rng.uniform(0.1, 2, 5)

    def f(x):
        ufunc.at(x, [0, 2, 0, 0, 2], v)
        return np.sum(np.abs(x) ** 2)

    for _ in range(10):
        _same_as_plain(f, rng.uniform(0.1, 2, 6) + 1j * rng.uniform(0.1, 2, 6))
    check_grads(f, rng.uniform(0.1, 2, 6) + 1j * rng.uniform(0.1, 2, 6), order=1)


_SWV = np.lib.stride_tricks.sliding_window_view


@pytest.mark.parametrize("view", [
    lambda x: _SWV(x, 5) @ np.array([0.1, 0.2, 0.4, 0.2, 0.1]),  # a 1-D stencil
    lambda x: np.einsum("ijkl,kl->ij", _SWV(x.reshape(6, 7), (3, 3)), np.arange(9.0).reshape(3, 3)),  # 2-D
    lambda x: np.broadcast_to(x[:, None], (42, 4)) * np.arange(4.0),  # a zero-stride axis
    lambda x: np.broadcast_to(x.reshape(6, 7)[:, None, :], (6, 3, 7)) * np.arange(3.0)[:, None],
    lambda x: _SWV(x[1::2], (4,)) ** 2,  # a window of a strided view
    lambda x: _SWV(x.reshape(6, 7).T, (2, 3)) * 1.5,  # of a transposed one
    lambda x: mg.numpy.as_strided(x, (20, 3), (16, 8)) ** 2,  # rows overlapping by one element
    lambda x: _SWV(x, 40)[::3] * np.linspace(0.0, 1.0, 40),  # a long window, every third start
], ids=["1d", "2d", "broadcast", "broadcast-mid", "strided", "transposed", "as_strided", "long"])
def test_overlapping_views_accumulate_by_slices(view):
    # the cotangent of a view whose elements share memory is added slice by slice (it went
    # element by element through np.add.at): against central differences and forward mode
    x = np.random.default_rng(3).standard_normal(42)
    check_grads(lambda x: np.sum(np.sin(view(x))), x)


def test_flat_element_loop_reads_and_writes_one_element_at_a_time():
    # y.flat[i] with one integer goes to the element itself (it went through the flat-position
    # machinery and np.shape's dispatch, 6x the y[i] loop): 2-D, negative indices, a 0-d array
    def f(x):
        y = x.reshape(3, 4) * 1.0
        for i in range(1, 12):
            y.flat[i] = 0.5 * y.flat[i - 1] + y.flat[-i] * y.flat[i]
        z = x[:1].reshape(()).copy()  # (a 0-d array)
        z.flat[0] = z.flat[-1] * 3.0
        return np.sum(y ** 2) + z

    check_grads(f, np.linspace(-1.0, 1.0, 12))
    for bad in (12, -13):
        with pytest.raises(IndexError):
            mg.grad(lambda x, bad=bad: x.flat[bad])(np.ones(12))
        with pytest.raises(IndexError):
            np.ones(12).flat[bad]


def test_source_positions_are_looked_up_not_walked(monkeypatch):
    # the traced array's conversions (scipy.sparse's A @ u asks for one each product) look up the
    # call at the current instruction: by an index of the file's nodes made once, not a walk of the
    # whole file's AST per conversion (a 6000-line file made each product ~100 ms)
    sp = pytest.importorskip("scipy.sparse")
    import ast

    A = sp.diags([np.ones(9), -2 * np.ones(10), np.ones(9)], [-1, 0, 1], format="csr")

    def f(u0):
        u = u0.copy()
        for _ in range(3):
            u += 0.2 * (A @ u)
        return np.sum(u ** 2)

    u0 = np.linspace(0.0, 1.0, 10)
    want = mg.grad(f)(u0.copy())  # (parses and indexes this file once)
    walks = []
    real_walk = ast.walk
    monkeypatch.setattr(ast, "walk", lambda node: (walks.append(node), real_walk(node))[1])
    np.testing.assert_array_equal(mg.grad(f)(u0.copy()), want)
    assert not any(isinstance(w, ast.Module) and len(w.body) > 5 for w in walks), len(walks)
    # d/du0 of sum((M u0)^2) with M = (I + 0.2 A)^3: 2 M^T M u0, by hand
    M = np.linalg.matrix_power(np.eye(10) + 0.2 * A.toarray(), 3)
    np.testing.assert_allclose(want, 2 * M.T @ M @ u0, rtol=1e-13)


@pytest.mark.parametrize("op", ["mul", "div", "rdiv", "pow", "rpow", "hypot", "iadd_mul", "out"])
def test_plain_array_operands_take_the_fast_path_with_their_values_at_the_operation(op):
    # x * A of a constant A goes to the level's elementwise path (it took the general one): the
    # pullback reads A as it was at the operation, whatever the function (or a caller) writes into
    # it later; against central differences of the plain function
    def f(x, A):
        y = {"mul": lambda: x * A, "div": lambda: x / A, "rdiv": lambda: A / x, "pow": lambda: x ** A,
             "rpow": lambda: A ** x, "hypot": lambda: np.hypot(x, A)}.get(op, lambda: None)()
        if op == "iadd_mul":
            y = x * 1.0
            y += x * A
        elif op == "out":
            y = np.empty_like(x)
            np.multiply(x, A, out=y)
        A[:] = 7.0  # (overwritten after it was read)
        return np.sum(y * y)

    x0 = np.array([0.7, 1.3, 2.1])
    base = np.array([1.5, 0.5, 2.5, 3.0, 0.25])

    def plain(x):
        return f(x, base.copy()[::2])

    want = np.array([(plain(x0 + h) - plain(x0 - h)) / 2e-6 for h in np.eye(3) * 1e-6])
    A = base.copy()[::2]  # (closed over: a plain array, not an argument, which would be traced)
    got = mg.grad(lambda x: f(x, A))(x0.copy())
    np.testing.assert_allclose(got, want, rtol=1e-6)
    np.testing.assert_array_equal(A, 7.0)  # (the plain call's write)
    A = base.copy()[::2]  # (forward mode: the same operations, on its own elementwise path)
    np.testing.assert_allclose(mg.jvp(lambda x: f(x, A), (x0.copy(),), (np.ones(3),))[1], np.sum(want), rtol=1e-6)


def test_read_only_views_of_writable_memory_are_copied_for_the_pullback(tmp_path):
    # a read-only view whose base is no ndarray (sliding_window_view's and as_strided's pass through an
    # object holding the array; np.frombuffer of a read-only memoryview of a bytearray) was taken for
    # memory that cannot change, and an np.memmap was not copied at all: the pullback read the values
    # written after the operation (gradient 0); d/dw sum((C * w)^2) = 2 sum(C^2 w) over rows, by hand
    from numpy.lib.stride_tricks import as_strided, sliding_window_view

    def windows():
        sig = np.linspace(1.0, 2.0, 40)
        return sig, sliding_window_view(sig, 3)

    def strided():
        sig = np.linspace(1.0, 2.0, 40)
        return sig, as_strided(sig, shape=(38, 3), strides=(8, 8), writeable=False)

    def buffered():
        buf = bytearray(np.linspace(1.0, 2.0, 114).tobytes())
        return np.frombuffer(buf, dtype=np.float64), np.frombuffer(memoryview(buf).toreadonly()).reshape(38, 3)

    def mapped():
        mm = np.memmap(tmp_path / "c.dat", dtype=np.float64, mode="w+", shape=(38, 3))
        mm[:] = np.linspace(1.0, 2.0, 114).reshape(38, 3)
        return mm, mm

    w0 = np.array([0.2, 0.5, 0.3])
    for make in (windows, strided, buffered, mapped):
        memory, C = make()
        want = 2 * np.sum(np.array(C) ** 2 * w0, axis=0)

        def f(w, memory=memory, C=C):
            y = C * w
            memory[...] = 0.0  # (the memory under C, written after the product read it)
            return np.sum(y * y)

        np.testing.assert_allclose(mg.grad(f)(w0.copy()), want, rtol=1e-14, err_msg=make.__name__)


def test_private_copies_of_constants_keep_their_layout_and_are_reused():
    # a broadcast constant was copied compact (laid out otherwise: t * c came out F-ordered, and its
    # sum differed from a plain call's in the last bit); a sliding window view was copied element by
    # element on every use (window 200 of 20000 values, 30 uses: ~1 GB); an np.memmap on every operation
    import tracemalloc

    from numpy.lib.stride_tricks import as_strided, sliding_window_view

    rng = np.random.default_rng(7)
    row = rng.standard_normal(80)
    c = as_strided(row, shape=(80, 80), strides=(0, 8), writeable=False)
    for _ in range(10):
        t0 = rng.standard_normal((80, 80))
        f = lambda t: np.sum(t * c)
        assert mg.value_and_grad(f)(t0)[0] == f(t0)  # (bits)
        np.testing.assert_array_equal(mg.grad(f)(t0), np.broadcast_to(row, (80, 80)))  # d/dt sum(t * c) = c

    sig = np.linspace(1.0, 2.0, 20_000)
    W = sliding_window_view(sig, 200)

    def g(w):
        s = 0.0
        for _ in range(30):
            s = s + np.sum((W * w) ** 2)
        return s

    w0 = np.linspace(0.5, 1.5, 200)
    tracemalloc.start()
    got = mg.grad(g)(w0)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    np.testing.assert_allclose(got, 60 * np.sum(W ** 2 * w0, axis=0), rtol=1e-12)  # by hand
    # (the products themselves: 30 results of 32 MB each are kept for the pullback; the copy of W is
    # 160 kB once, where one per use was 32 MB each)
    assert peak < 30 * W.nbytes * 1.6, peak / W.nbytes


def test_a_hessian_vector_product_lets_the_inner_temporaries_go():
    # (fourdvar) forward over reverse: the inner reverse level's storages held their values, outer-level traced
    # arrays with their tangents, strongly, so every temporary of the inner forward pass lived until its reverse
    # pass (an in-place Lorenz-96 step: ~20 arrays a step, 10x the gradient's memory); they are held weakly, as
    # plain ones are at first order. The product against central second differences of the plain function
    import tracemalloc

    def l96(x, out):
        np.subtract(np.roll(x, -1), np.roll(x, 2), out=out)
        out *= np.roll(x, 1)
        out -= x
        out += 8.0

    def cost(x0, nsteps=30, dt=0.01):
        x = x0.copy()
        k = np.empty_like(x)
        for _ in range(nsteps):
            l96(x, k)
            x += dt * k
        return 0.5 * np.sum(x ** 2)

    rng = np.random.default_rng(0)
    x, v = 8 + rng.standard_normal(12), rng.standard_normal(12)
    hv = mg.jvp(mg.grad(cost), (x,), (v,))[1]
    h = 2e-3  # (the cost is ~400: a smaller step's rounding is larger than its truncation)
    np.testing.assert_allclose(v @ hv, (cost(x + h * v) - 2 * cost(x) + cost(x - h * v)) / h ** 2, rtol=1e-5)
    w = rng.standard_normal(12)  # (w' H v, by the mixed second difference)
    mixed = (cost(x + h * v + h * w) - cost(x + h * v - h * w) - cost(x - h * v + h * w) + cost(x - h * v - h * w))
    np.testing.assert_allclose(w @ hv, mixed / (4 * h * h), rtol=1e-5)
    n = 10 ** 4
    x = 8 + rng.standard_normal(n)
    tracemalloc.start()
    mg.jvp(mg.grad(cost), (x,), (np.ones(n),))
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 300 * x.nbytes, peak / x.nbytes  # (30 steps: ~140 arrays now, ~620 before)


def test_forward_mode_computes_in_place_updates_in_place():
    # (regress53) jvp of `u *= 0.99; u += 0.001` made the value and the tangent as new arrays and wrote both over
    # u's (25x grad's time at 2e5 elements); in place now, as NumPy computes. Each program against central
    # differences of the plain function along the tangent, and against reverse mode; the argument's final contents
    # are a plain call's, bit for bit
    import tracemalloc

    def programs():
        def damp(u):
            for _ in range(5):
                u *= 0.99
                u += 0.001
                u /= 1.01
            return np.sum(u ** 2)

        def mixed(u, v):
            k = np.empty_like(u)
            for _ in range(3):
                np.subtract(u, v, out=k)  # (k: no tangent before its first write)
                k *= u  # (a partial that reads the destination's old values)
                np.multiply(u, 0.5, out=u)
                u += k
                u -= 0.3 * u[::-1]  # (an operand overlapping the destination)
                np.divide(u, v, out=u)  # (v's partial reads u)
                u **= 1.0
            return np.sum(u * v)

        def f32(u):
            w = u.astype(np.float32)
            w *= np.float32(1.5)
            w -= w * w
            return np.sum(w.astype(np.float64))

        return [(damp, 1), (mixed, 2), (f32, 1)]

    rng = np.random.default_rng(2)
    for f, nargs in programs():
        args = [rng.uniform(0.5, 1.5, 7) for _ in range(nargs)]
        tans = [rng.standard_normal(7) for _ in range(nargs)]
        plain = [a.copy() for a in args]
        value = f(*plain)
        traced = [a.copy() for a in args]
        v, t = mg.jvp(f, tuple(traced), tuple(tans))
        assert v == value and all(np.array_equal(a, b) for a, b in zip(traced, plain))
        h = 1e-6

        def step(s, f=f, args=args, tans=tans, h=h):
            return f(*[a + s * h * d for a, d in zip(args, tans)])

        if f.__name__ == "f32":  # (by hand: d/du sum(1.5u - (1.5u)^2) = 1.5 - 4.5u, at float32's precision)
            np.testing.assert_allclose(t, np.sum((1.5 - 4.5 * args[0]) * tans[0]), rtol=1e-5)
        else:
            np.testing.assert_allclose(t, (step(1) - step(-1)) / (2 * h), rtol=1e-6)
        g = mg.grad(f, argnums=tuple(range(nargs)))(*[a.copy() for a in args])
        np.testing.assert_allclose(t, sum(np.sum(gi * di) for gi, di in zip(g, tans)),
                                   rtol=1e-6 if f.__name__ == "f32" else 1e-12)
    # an infinite factor: the careful product (0 where the tangent is 0), as reverse mode gives it
    x = np.array([1.0, 2.0])
    t = mg.jvp(lambda u: np.sum(np.minimum(u * np.inf, 5.0) + u), (x,), (np.array([0.0, 1.0]),))[1]
    assert t == 1.0
    big = rng.standard_normal(10 ** 5)

    def damp_big(u):
        for _ in range(10):
            u *= 0.99
            u += 0.001
        return np.sum(u)

    tracemalloc.start()
    mg.jvp(damp_big, (big.copy(),), (np.ones(10 ** 5),))
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 5 * big.nbytes, peak / big.nbytes  # (new value and tangent arrays per step before)
