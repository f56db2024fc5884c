"""The caller's arrays passed as arguments are read-only to plain code while the
function runs: a write into one through another reference to the same array
(a dict entry, an attribute, a list, a module) would change values the
derivative reads without its knowing. It raises AliasingError (also a
ValueError, as NumPy's read-only error is) naming the line, and every array is
writable again afterwards. Writes through the argument itself are
differentiated as always; oracles: central differences of the plain function.
"""
import collections
import gc
import itertools
import types
import warnings
import weakref

import numpy as np
import pytest

import mutagrad as mg
import mutagrad.numpy as mnp


def fd_grad(f, x, step=1e-6):
    g = np.zeros_like(x)
    for i in range(x.size):
        e = np.zeros_like(x)
        e.flat[i] = step
        g.flat[i] = (f(x + e) - f(x - e)) / (2 * step)
    return g


STATE = {}
OBJ = types.SimpleNamespace()
LIST = [None]


def write_through_dict(x):
    y = np.sum(x ** 2)  # the pullback reads x
    STATE["u"][0] = 5.0
    return y + np.sum(x)


def write_through_attribute(x):
    OBJ.u *= 2.0
    return np.sum(x ** 2)


def write_through_list(x):
    np.copyto(LIST[0], 0.0)
    return np.sum(np.sin(x))


def ufunc_out_through_dict(x):
    np.exp(STATE["u"], out=STATE["u"])
    return np.sum(x * x)


def fill_through_attribute(x):
    OBJ.u.fill(1.0)
    return np.sum(x)


def sort_through_list(x):
    LIST[0].sort()
    return np.sum(x * x)


def view_write_through_dict(x):
    v = STATE["u"][1:]  # a plain view of the locked array is read-only too
    v[0] = 3.0
    return np.sum(x * x)


CASES = [
    (write_through_dict, r'`STATE\["u"\]\[0\] = 5.0`'),
    (write_through_attribute, r"`OBJ.u \*= 2.0`"),
    (write_through_list, r"`np.copyto\(LIST\[0\], 0.0\)`"),
    (ufunc_out_through_dict, r"np.exp\(STATE"),
    (fill_through_attribute, r"OBJ.u.fill"),
    (sort_through_list, r"LIST\[0\].sort"),
    (view_write_through_dict, r"v\[0\] = 3.0"),
]


def _alias(x):
    STATE["u"] = OBJ.u = LIST[0] = x


@pytest.mark.parametrize("f, line", CASES, ids=[c[0].__name__ for c in CASES])
@pytest.mark.parametrize("mode", ["grad", "vjp", "jvp", "hessian"])
def test_plain_write_through_another_reference_raises(f, line, mode):
    x = np.array([1.0, 2.0, 3.0])
    _alias(x)
    run = {
        "grad": lambda: mg.grad(f)(x),
        "vjp": lambda: mg.vjp(f, x),
        "jvp": lambda: mg.jvp(f, (x,), (np.ones(3),)),
        "hessian": lambda: mg.hessian(f)(x),
    }[mode]
    with pytest.raises(mg.AliasingError, match=line) as info:
        run()
    assert isinstance(info.value, ValueError)  # as NumPy's read-only error
    assert "argument 0" in str(info.value) and "Write through the argument itself" in str(info.value)
    assert x.flags.writeable  # unlocked once the differentiation is over
    np.testing.assert_array_equal(x, [1.0, 2.0, 3.0])  # the refused write changed nothing


def test_the_unseen_write_was_silently_wrong():
    # what the error prevents: the derivative of write_through_dict w.r.t. x, where the plain
    # write changes x[0] to a constant after x ** 2 read it, is not what the tape would give
    def plain(x):
        STATE["u"] = x
        return write_through_dict(x)

    x = np.array([1.0, 2.0, 3.0])
    fd = fd_grad(plain, x)
    # y = sum(x**2) before the write, then + sum(x) with x0 replaced by 5: d/dx0 = 2 x0 only (a tape
    # that missed the write would add 1)
    np.testing.assert_allclose(fd, [2.0, 5.0, 7.0], rtol=1e-6)
    _alias(x)
    with pytest.raises(mg.AliasingError):
        mg.grad(write_through_dict)(x)


def test_writes_through_the_argument_are_differentiated_and_arrays_unlocked():
    def f(x, buf):
        buf[:] = np.sin(x)  # a constant argument written with traced values
        x[0] = buf[1] * x[2]
        return np.sum(x ** 2) + np.sum(buf)

    x0 = np.array([0.3, 0.7, 1.1])
    buf = np.zeros(3)
    g = mg.grad(f)(x0.copy(), buf)
    assert buf.flags.writeable
    np.testing.assert_allclose(g, fd_grad(lambda x: f(x.copy(), np.zeros(3)), x0), rtol=1e-6)
    np.testing.assert_array_equal(buf, np.sin(x0))  # as a plain call leaves it


def test_unlocked_after_an_error_in_the_function_and_read_only_arrays_stay_so():
    x = np.array([1.0, 2.0])
    c = np.array([3.0, 4.0])
    c.flags.writeable = False

    def f(x, c):
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        mg.grad(f)(x, c)
    assert x.flags.writeable and not c.flags.writeable


def test_containers_keyword_constants_and_the_same_array_twice():
    x = np.array([0.5, 1.5])
    w = np.array([2.0, 3.0])
    seen = {}

    def f(p, scale=None):
        a, b = p
        seen["flags"] = (x.flags.writeable, w.flags.writeable, scale.flags.writeable)
        return np.sum(a * b * scale)

    g = mg.grad(f)([x, w], scale=w)
    # the caller's arrays were read-only to plain code meanwhile; the argument itself is writable
    assert seen["flags"] == (False, False, True)
    assert x.flags.writeable and w.flags.writeable
    # w is b and scale, but only b is differentiated: scale is a constant, as for differences
    # that perturb b by new arrays
    np.testing.assert_allclose(g[0], fd_grad(lambda a: f([a, w], scale=w), x), rtol=1e-6)
    np.testing.assert_allclose(g[1], fd_grad(lambda b: f([x, b], scale=w), w), rtol=1e-6)
    # the same array as two differentiated arguments, read only
    h = lambda a, b: np.sum(a * np.sin(b))
    gx, gy = mg.grad(h, argnums=(0, 1))(x, x)
    np.testing.assert_allclose(gx, fd_grad(lambda a: h(a, x), x), rtol=1e-6)
    np.testing.assert_allclose(gy, fd_grad(lambda b: h(x, b), x), rtol=1e-6)
    assert x.flags.writeable


def test_identity_and_base_of_an_argument_as_in_a_plain_call():
    x = np.arange(1.0, 4.0)
    seen = {}

    def f(a):
        seen["base"] = a.base is None
        seen["view base"] = a[1:].base is not None
        return a

    out, pb = mg.vjp(f, x)
    assert out is x  # the function returned its argument: the caller's array
    assert seen == {"base": True, "view base": True}
    np.testing.assert_array_equal(pb(np.ones(3))[0], np.ones(3))
    base = np.arange(6.0)
    mg.vjp(f, base[2:])
    assert seen["base"] is False  # an argument that is a view has a base, as in NumPy
    # that base is the caller's array, which is not traced: reading it refuses (the mutsem tester: x.base
    # was the argument itself, x.base[0] its own first element, silently)
    with pytest.raises(mg.TracerEscapeError, match="x.base of an argument that is a view"):
        mg.grad(lambda a: a.base[0] * np.sum(a))(base[1:])


def test_nested_differentiation_of_a_function_writing_through_a_dict():
    def inner(y):
        STATE["v"][0] = 0.0
        return np.sum(y ** 3)

    def outer(x):
        return np.sum(mg.grad(inner)(x * 2.0))

    x = np.array([1.0, 2.0])
    STATE["v"] = x  # the outer argument, locked by the outer level
    with pytest.raises(mg.AliasingError):
        mg.grad(outer)(x)
    assert x.flags.writeable


def test_inner_differentiation_writing_outer_values_into_a_plain_array():
    # a plain array passed to an inner differentiation is plain to the outer one: an outer-traced
    # value written into it would stay there without its derivative (read after the inner call,
    # or by the next pass of a forward jacobian), so it raises, as writing it directly would.
    # A buffer the outer differentiation traces (np.zeros_like) carries the derivative.
    w = np.array([1.0, 2.0, 3.0])

    def outer(y, make):
        c = make(y)

        def inner(a):
            a[0] = y[0] * 2.0
            return a

        out, _ = mg.vjp(inner, c)
        return np.sum(out * w) + np.sum(c * w) + np.sum(y)

    def plain(y):
        c = np.zeros(3)
        c[0] = y[0] * 2.0
        return 2.0 * np.sum(c * w) + np.sum(y)

    y = np.array([0.5, 1.5, 0.2])
    with pytest.raises(mg.WriteToPlainArrayError, match=r"a\[0\] = y\[0\] \* 2.0.*np.zeros_like"):
        mg.grad(outer)(y, lambda y: np.zeros(3))
    np.testing.assert_allclose(mg.grad(outer)(y, lambda y: np.zeros_like(y)), fd_grad(plain, y), rtol=1e-7)

    def through_jacobian(x):  # found by a nested-differentiation fuzzer: the passes share p
        p = np.array([1.5, -0.3, 1.1])

        def inner(b, p):
            w = np.cumsum(p * b)
            p[2] = x[0]
            return w * b

        return np.sum(np.sin(mg.jacobian(inner, mode="fwd")(np.array([0.3, 0.7, 1.1]), p)) * x)

    with pytest.raises(mg.WriteToPlainArrayError, match="plain to the outer differentiation"):
        mg.grad(through_jacobian)(np.array([0.62, 0.91, 0.47]))


@pytest.mark.parametrize("fresh", [lambda x: x.copy(), lambda x: x * 1.0, lambda x: np.copy(x), lambda x: x[::-1].copy()])
def test_inner_differentiation_arrays_made_from_a_plain_argument_hold_outer_values(fresh):
    # y = x.copy() of a plain array x passed to (and differentiated by) an inner differentiation is new
    # memory computed from values plain to the outer level: it is a constant of the outer level too, and
    # an outer-traced value written into it keeps its derivative, as with x made by mnp.array in the outer
    # function (it raised before, naming the array as plain to the outer level; regress61)
    def inner(x, a):
        y = fresh(x)
        y *= a
        y[0] = y[1] * a
        return np.sum(np.sin(y))

    def outer(a, make):
        x = make([0.3, 0.5, 0.9])
        g = mg.grad(inner)(x, a)
        return np.sum(g ** 2)

    def outer_plain(a):  # (the inner gradient by central differences too: no mutagrad in the oracle)
        x = np.array([0.3, 0.5, 0.9])
        g = np.array([(inner(x + 1e-5 * e, a) - inner(x - 1e-5 * e, a)) / 2e-5 for e in np.eye(3)])
        return np.sum(g ** 2)

    want = (outer_plain(1.3 + 1e-4) - outer_plain(1.3 - 1e-4)) / 2e-4
    for make in (np.array, mnp.array):
        assert abs(mg.grad(outer)(1.3, make) - want) <= 1e-6 * abs(want)
        assert abs(mg.jvp(lambda a, make=make: outer(a, make), (1.3,), (1.0,))[1] - want) <= 1e-6 * abs(want)


def test_plain_arrays_of_the_outer_function_stay_plain_to_it():
    # the outer level never records the memory of a plain array passed to (or read by) an inner
    # differentiation: plain writes into it after the inner call, or the restores between the
    # passes of a forward jacobian, must not change what the outer pullbacks read
    def after_call(p, closed):
        x = np.array([1.0, 2.0])

        def inner(b, *xs):
            v = x if closed else xs[0]
            return np.sum(np.sin(v * p) * b * (v if xs and len(xs) > 1 else 1.0))

        g = mg.grad(inner)(np.array([1.0, 3.0]), *(() if closed else (x, x)))
        x[0] = 5.0  # plain code, after the inner call
        return np.sum(g) + np.sum(x)

    def forward_jacobian(p):
        def inner(x):
            y = x * p
            x *= 0.9
            return y * x

        return np.sum(mg.jacobian(inner, mode="fwd")(np.array([1.0, 2.0])))  # 5.4 p

    for f in (lambda p: after_call(p, True), lambda p: after_call(p, False), forward_jacobian):
        want = fd_grad(lambda v, f=f: f(v[0]), np.array([0.7]))[0]
        assert abs(mg.grad(f)(0.7) - want) <= 1e-6 * max(1.0, abs(want))
        assert abs(mg.jvp(f, (0.7,), (1.0,))[1] - want) <= 1e-6 * max(1.0, abs(want))


def test_inner_differentiation_writes_its_own_constants_into_a_plain_argument():
    # values computed from the plain argument alone are constants to the outer level: writing
    # them into it loses nothing, before or after an outer-traced value is read from it
    def outer(a):
        x = np.array([0.3, 0.5, 0.9])

        def inner(x, b):
            x[0] = x[1] * 2.0
            x[2] = x[0] * x[1]
            return np.sum(x * b * a)

        g = mg.grad(inner, argnums=1)(x, np.array([1.0, 2.0, 3.0]))
        return np.sum(g * x)

    want = fd_grad(lambda v: outer(v[0]), np.array([0.7]))[0]
    assert abs(mg.grad(outer)(0.7) - want) <= 1e-7 * max(1.0, abs(want))


def test_arrays_numpy_could_not_make_writable_again_are_not_locked():
    # memory with no NumPy owner (SciPy's MINPACK and LSODA pass such arrays): locking it would
    # leave it read-only for good, and the forward jacobian's restores between passes failed
    class Interface:
        def __init__(self, a):
            self.a = a
            self.__array_interface__ = a.__array_interface__

    def f(x):
        return np.sum(np.sin(x) * x[::-1])

    for make in (lambda v: np.asarray(Interface(v)), lambda v: np.frombuffer(bytearray(v.tobytes()))):
        x = make(np.array([1.0, 2.0, 3.0]))
        assert x.flags.writeable
        g = mg.grad(f)(x)
        np.testing.assert_allclose(g, fd_grad(f, x.copy()), rtol=1e-7)
        np.testing.assert_allclose(mg.jacobian(mg.grad(f), mode="fwd")(x), mg.jacobian(mg.grad(f), mode="rev")(x),
                                   rtol=1e-12)  # the forward passes restore x between them; the other mode
        hv = fd_grad(lambda v: fd_grad(f, v, 1e-4) @ np.ones(3), x.copy(), 1e-4)  # plain second differences
        np.testing.assert_allclose(mg.hessian(f)(x) @ np.ones(3), hv, rtol=1e-5, atol=1e-6)
        assert x.flags.writeable
        x[0] = 1.0


def test_argument_whose_elements_share_memory():
    # np.broadcast_to: one memory cell for every element; each element's derivative is its own
    w = np.array([1.0, 2.0, 3.0])
    x = np.broadcast_to(np.array(0.5), (3,))

    def f(x):
        return np.sum(w * np.sin(x) * np.arange(1.0, 4.0))

    want = fd_grad(f, x.copy())  # (differences of the plain function at separate elements)
    np.testing.assert_allclose(mg.grad(f)(x), want, rtol=1e-7)
    v = np.array([1.0, -2.0, 0.5])
    np.testing.assert_allclose(mg.jvp(f, (x,), (v,))[1], want @ v, rtol=1e-7)
    jr, jf = (mg.jacobian(lambda x: w * np.sin(x), mode=mode)(x) for mode in ("rev", "fwd"))
    np.testing.assert_allclose(jr, jf, rtol=1e-12)
    np.testing.assert_allclose(jr[1], fd_grad(lambda x: (w * np.sin(x))[1], x.copy()), rtol=1e-7)
    np.testing.assert_allclose(mg.vjp(lambda x: w * np.sin(x), x)[1](np.ones(3))[0], jr.sum(axis=0), rtol=1e-12)

    def write(x):
        x[0] = 1.0
        return np.sum(x)

    with pytest.raises(ValueError, match="read-only"):  # as in a plain call
        mg.grad(write)(x)
    shared = np.lib.stride_tricks.as_strided(np.zeros(1), (3,), (0,))  # writable
    with pytest.raises(mg.MutationError, match="share memory.*x.copy"):
        mg.grad(lambda x: np.sum(x))(shared)


def test_memmap_arguments_are_differentiated_through_views(tmp_path):
    # an np.memmap's views and results are memmaps: the tracer held one, and a view
    # (reshape, .T, ravel; norm and outer take them) escaped as a plain memmap, with no
    # derivative (zeros, or half of x @ x.T's)
    x0 = np.array([0.63, 1.71, 0.87, 1.46, 1.12, 0.74])

    def memmap(name):
        m = np.memmap(tmp_path / name, float, "w+", shape=x0.shape)
        m[:] = x0
        return m

    def f(x):
        a = x.reshape(2, 3)
        b = np.empty_like(x)           # a buffer like the argument
        np.multiply(x, x, out=b)
        x *= 2.0                       # and a write into the file's memory
        return np.sum(a.T @ a) + np.linalg.norm(x) + np.sum(np.outer(b, x.ravel()))

    fd = [(f(x0 + 1e-6 * e) - f(x0 - 1e-6 * e)) / 2e-6 for e in np.eye(6)]
    m = memmap("g.dat")
    np.testing.assert_allclose(mg.grad(f)(m), fd, rtol=1e-7)
    plain = x0.copy()
    f(plain)
    np.testing.assert_array_equal(np.asarray(m), plain)  # the file holds what a plain call leaves
    _, t = mg.jvp(f, (memmap("j.dat"),), (np.ones(6),))
    np.testing.assert_allclose(t, np.sum(fd), rtol=1e-7)
    m = memmap("id.dat")
    assert mg.vjp(lambda x: x, m)[0] is m  # returned as itself, as a plain call returns it


def test_base_of_a_view_is_the_array_it_was_made_from():
    # code that branches on `v.base is y` takes the plain call's branch: here it copies, so the
    # write below does not reach y (a wrong branch gave 10010 and gradient [2, 0, 6])
    def f(x):
        y = x * 1.0
        v = y[1:]
        if v.base is y:
            v = v.copy()
        v[0] = 100.0
        w = y.T[::2]
        assert w.base is y and y[1:][1:].base is y and x[1:].base is x
        return np.sum(y ** 2)

    x = np.array([1.0, 2.0, 3.0])
    val, g = mg.value_and_grad(f)(x)
    assert val == f(x.copy())
    np.testing.assert_allclose(g, fd_grad(lambda a: f(a.copy()), x), rtol=1e-7)
    np.testing.assert_allclose(mg.jvp(f, (x,), (np.ones(3),))[1], np.sum(fd_grad(lambda a: f(a.copy()), x)),
                               rtol=1e-7)


def test_owndata_of_an_argument_is_the_callers():
    # "only write into memory I own": the plain call owns x and doubles it in place
    def f(x, c):
        assert c.flags.owndata and c.flags["OWNDATA"] and not c[1:].flags.owndata
        if not x.flags.owndata:
            x = x.copy()
        x *= 2.0
        return np.sum(x ** 2 * c)

    x0, c = np.array([0.3, 1.2, -0.7]), np.array([1.0, 2.0, 3.0])
    plain = x0.copy()
    f(plain, c)
    for run in (lambda a: mg.grad(f)(a, c), lambda a: mg.jvp(lambda v: f(v, c), (a,), (np.ones(3),))):
        x = x0.copy()
        run(x)
        np.testing.assert_array_equal(x, plain)
    np.testing.assert_allclose(mg.grad(f)(x0.copy(), c), fd_grad(lambda a: f(a.copy(), c), x0), rtol=1e-7)
    def h(v):
        assert not v.flags.owndata  # an argument that is a view does not own its memory, as in NumPy
        return np.sum(v)

    np.testing.assert_array_equal(mg.grad(h)(np.arange(6.0)[::2]), np.ones(3))


def test_argument_made_read_only_after_writes_into_it():
    # the reverse pass rewinds and redoes the writes into memory the program made read-only
    # (it raised a bare "assignment destination is read-only" from inside the reverse pass);
    # the caller's array is left read-only, as a plain call leaves it
    def f(x):
        s = np.sum(np.sin(x))
        x[0] = x[1] ** 2
        x.flags.writeable = False
        return s + np.sum(x ** 2)

    def loop(x):  # element writes, recorded by runs
        s = np.sum(np.sin(x))
        for i in range(6):
            x[i] = x[i + 1] * 0.5
        x.setflags(write=False)
        return s + np.sum(x ** 2)

    x0 = np.linspace(0.3, 1.2, 8)
    for fn in (f, loop):
        plain = x0.copy()
        fn(plain)
        x = x0.copy()
        g = mg.grad(fn)(x)
        np.testing.assert_allclose(g, fd_grad(lambda a, fn=fn: fn(a.copy()), x0), rtol=1e-6)
        np.testing.assert_array_equal(x, plain)
        assert not x.flags.writeable and not plain.flags.writeable
        _, pb = mg.vjp(fn, x0.copy())
        np.testing.assert_allclose(pb(1.0)[0], g, rtol=1e-12)
        np.testing.assert_allclose(pb(1.0)[0], g, rtol=1e-12)  # twice: rewound and redone again
        _, t = mg.jvp(fn, (x0.copy(),), (np.ones(8),))
        np.testing.assert_allclose(t, np.sum(g), rtol=1e-7)


def _read_only_then_writeable(a, how):
    if how == "setflags":
        a.setflags(write=False)
        a.setflags(write=True)
    else:
        a.flags.writeable = False
        a.flags.writeable = True


def test_setflags_write_true_as_flags_writeable():
    # y.setflags(write=True) after write=False, as y.flags.writeable = True (it was refused)
    def f(x, how):
        y = x * 2.0
        _read_only_then_writeable(y, how)
        y[0] = np.sin(y[1])
        return np.sum(y ** 2)

    x0 = np.array([0.3, 1.2, -0.7])
    for how in ("setflags", "flags"):
        g = mg.grad(f)(x0.copy(), how)
        np.testing.assert_allclose(g, fd_grad(lambda a, how=how: f(a.copy(), how), x0), rtol=1e-6)
        np.testing.assert_allclose(mg.jvp(lambda a, how=how: f(a, how), (x0.copy(),), (np.ones(3),))[1],
                                   np.sum(g), rtol=1e-7)
    # a broadcast view of a writable argument made writable: NumPy allows it (it refused while the
    # caller's array was locked); a write through its overlapping elements raises (test_errors)
    b = lambda x: np.sum(np.broadcast_to(x, (2, 3)).setflags(write=True) or x ** 2)
    np.testing.assert_allclose(mg.grad(b)(x0.copy()), 2 * x0, rtol=1e-15)
    ro = x0.copy()
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="WRITEABLE"):  # NumPy's refusal for a view of a read-only array
        mg.grad(b)(ro)


def test_asarray_of_a_constant_argument_is_its_memory():
    # NumPy's np.asarray(p) is p itself: a copy showed p's old values once p was updated in place
    # (value 9.6 and gradient p instead of 19.2 and 2p)
    def f(x, p):
        c = np.asarray(p)
        shared = np.shares_memory(c, p)
        p *= 2.0
        p[0] += 1.0
        return np.sum(c * x) + shared

    x0, p0 = np.array([0.7, 1.3, 2.1]), np.array([1.0, 2.0, 3.0])
    value, g = mg.value_and_grad(f)(x0.copy(), p0.copy())
    assert value == f(x0.copy(), p0.copy())
    np.testing.assert_allclose(g, fd_grad(lambda a: f(a, p0.copy()), x0), rtol=1e-7)
    c = mg.grad(lambda x, p: np.sum(np.asarray(p) * x))  # read-only: a write through it raises
    with pytest.raises(ValueError, match="read-only"):
        mg.grad(lambda x, p: np.asarray(p).fill(0.0) or np.sum(x))(x0.copy(), p0.copy())
    np.testing.assert_array_equal(c(x0.copy(), p0.copy()), p0)

    def later(x, p):  # traced values written into p afterwards would show in c without derivative
        c = np.asarray(p)
        p[0] = x[0] ** 2
        return np.sum(c * x)

    with pytest.raises(mg.MutationError, match=r"np.asarray.*handed out.*test_argument_locking.py:\d+"):
        mg.grad(later)(x0.copy(), p0.copy())

    def gone(x, p):  # the plain array is gone before the write (a library's temporary: K @ u of a sparse K)
        s = float(np.sum(np.asarray(p) * 2.0))
        p[0] = x[0] ** 2
        return np.sum(p * x) + s

    np.testing.assert_allclose(mg.grad(gone)(x0.copy(), p0.copy()), fd_grad(lambda a: gone(a, p0.copy()), x0),
                               rtol=1e-6)


@pytest.mark.parametrize("form", ["[1:]", ".T", ".reshape(3)", ".view()", "[::2]"])
def test_a_view_of_an_array_handed_out_is_held_as_the_array(form):
    # a plain view made from np.asarray(c) of a constant c (an argument not differentiated, a
    # buffer holding constants only) shows a later traced write into c, as NumPy's would; the
    # view's base was c's memory owner, so that np.asarray's array died and the write went on:
    # the view summed the write's value without its derivative (gradient [0, 2], not [3, 2])
    def through_buffer(x):
        c = mnp.zeros(3)
        q = eval("np.asarray(c)" + form)
        c[1] = x[0]
        return np.sum(q) * x[1]

    def through_argument(x, p):
        q = eval("np.asarray(p)" + form)
        p[1] = x[0]
        return np.sum(q) * x[1]

    x = np.array([2.0, 3.0])
    with pytest.raises(mg.MutationError, match="handed out"):
        mg.grad(through_buffer)(x)
    with pytest.raises(mg.MutationError, match="handed out"):
        mg.grad(through_argument)(x, np.zeros(3))


def test_a_write_that_no_array_handed_out_shows_is_not_refused():
    # a plain array of another part of c (np.asarray(c[2:]) and c[0] written), or one only a reference
    # cycle that is gone holds (the cyclic GC is paused during a differentiation)
    def other_part(x):
        c = mnp.zeros(4)
        q = np.asarray(c[2:])
        c[0] = x[0]
        return np.sum(c) * x[1] + np.sum(q)

    def in_a_dead_cycle(x):
        c = mnp.zeros(4)
        a, b = types.SimpleNamespace(), types.SimpleNamespace()
        a.other, b.other, a.view = b, a, np.asarray(c)[1:]
        del a, b
        c[1] = x[0]
        return np.sum(c) * x[1]

    x = np.array([2.0, 3.0])
    for f in (other_part, in_a_dead_cycle):
        np.testing.assert_array_equal(mg.grad(f)(x), [3.0, 2.0])  # d/dx x0 x1, by hand

    def same_part(x):
        c = mnp.zeros(4)
        q = np.asarray(c[2:])
        c[3] = x[0]
        return np.sum(q) * x[1]

    with pytest.raises(mg.MutationError, match="handed out"):
        mg.grad(same_part)(x)


def test_an_argument_made_writeable_again():
    # the caller's array is locked while the function runs; the function's own
    # writeable = False, then True, raised NumPy's bare "cannot set WRITEABLE flag"
    def f(x, how):
        _read_only_then_writeable(x, how)
        x[0] = x[1] ** 2
        return np.sum(x ** 2)

    x0 = np.array([0.5, 1.5])
    for how in ("setflags", "flags"):
        x = x0.copy()
        g = mg.grad(f)(x, how)
        np.testing.assert_allclose(g, fd_grad(lambda a, how=how: f(a.copy(), how), x0), rtol=1e-6)
        plain = x0.copy()
        f(plain, how)
        np.testing.assert_array_equal(x, plain)
        assert x.flags.writeable
        np.testing.assert_allclose(mg.jvp(lambda a, how=how: f(a, how), (x0.copy(),), (np.ones(2),))[1],
                                   np.sum(g), rtol=1e-7)


@pytest.mark.parametrize("mode", ["rev", "fwd"])
def test_outer_traced_value_without_derivative_may_go_into_an_array_plain_to_the_outer(mode):
    # np.empty_like(u) of the inner state is traced by the outer differentiation too, but filled
    # from plain values only it carries no outer derivative: `u += k` into u (plain to the outer
    # differentiation) loses nothing and is allowed (it raised, blaming the write)
    x0 = np.array([0.3, -1.2, 0.5])

    def model(u0):
        u = u0.copy()
        k = np.empty_like(u)
        k[:] = u
        u += k
        return u

    def cost(x, y):
        return 0.5 * np.sum((model(x) - y) ** 2)

    def sens(y):
        return np.sum(mg.grad(cost)(x0, y) ** 2)

    y0 = np.array([1.0, 2.0, -0.5])
    h = 1e-6
    fd = np.array([(sens(y0 + h * e) - sens(y0 - h * e)) / (2 * h) for e in np.eye(3)])
    if mode == "rev":
        np.testing.assert_allclose(mg.grad(sens)(y0), fd, rtol=1e-7)
    else:
        v = np.array([1.0, -0.5, 2.0])
        np.testing.assert_allclose(mg.jvp(sens, (y0,), (v,))[1], fd @ v, rtol=1e-7)


def test_an_array_two_threads_differentiate_stays_locked_until_both_end():
    # the first differentiation to end made the array writable while the other still ran: a
    # third thread's plain write then went through, behind the second one's tape
    import threading

    X = np.array([1.0, 2.0, 3.0])
    a_in, b_in, a_done, b_read, c_done = (threading.Event() for _ in range(5))
    out = {}

    def fa(x):
        a_in.set()
        b_in.wait(5)
        return np.sum(x ** 2)

    def fb(x):
        b_in.set()
        a_done.wait(5)
        y = np.log(x)
        b_read.set()
        c_done.wait(5)
        return np.sum(y * x)

    def first():
        out["a"] = mg.grad(fa)(X)
        a_done.set()

    def second():
        a_in.wait(5)
        out["b"] = mg.grad(fb)(X)

    def writer():
        b_read.wait(5)
        try:
            X[0] = 5.0
            out["c"] = "written"
        except ValueError:
            out["c"] = "refused"
        c_done.set()

    threads = [threading.Thread(target=t) for t in (first, second, writer)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert out["c"] == "refused"
    np.testing.assert_array_equal(X, [1.0, 2.0, 3.0])
    np.testing.assert_allclose(out["a"], 2 * X)
    np.testing.assert_allclose(out["b"], 1.0 + np.log(X))  # d/dx sum(x log x), by hand
    assert X.flags.writeable  # (both ended)


@pytest.mark.parametrize("how", ["setflags", "flags", "item"])
def test_view_of_an_argument_made_writable_again(how):
    # np.diagonal's read-only view (or a view made read-only) of an argument made writable again,
    # as NumPy allows where the argument is writable: NumPy's bare ValueError (the caller's array is
    # read-only while the function runs) where a plain call writes through the view
    def f(x):
        d = np.diagonal(x)
        if how == "setflags":
            d.setflags(write=True)
        elif how == "flags":
            d.flags.writeable = True
        else:
            d.flags["WRITEABLE"] = True
        d[0] = 2.0 * x[0, 1]
        v = x[1:]
        _read_only_then_writeable(v, "setflags" if how == "setflags" else "flags")
        v[0, 0] = v[0, 1] ** 2
        return np.sum(x ** 2)

    x0 = np.array([[1.0, 2.0], [3.0, 4.0]])
    plain, x = x0.copy(), x0.copy()
    val, g = mg.value_and_grad(f)(x)
    assert val == f(plain)
    np.testing.assert_array_equal(x, plain)
    assert x.flags.writeable
    # f = (2 x01)² + x01² + (x11²)² + x11², by hand: d/dx01 = 10 x01, d/dx11 = 4 x11³ + 2 x11, else 0
    np.testing.assert_allclose(g, [[0.0, 20.0], [0.0, 264.0]], rtol=1e-15)
    np.testing.assert_allclose(g, fd_grad(lambda a: f(a.copy()), x0), rtol=1e-6)
    np.testing.assert_allclose(mg.jvp(f, (x0.copy(),), (np.ones((2, 2)),))[1], np.sum(g), rtol=1e-12)
    ro = x0.copy()
    ro.flags.writeable = False  # (a read-only caller's array: NumPy's refusal, as in a plain call)
    with pytest.raises(ValueError, match="WRITEABLE"):
        f(ro)
    with pytest.raises(ValueError, match="WRITEABLE"):
        mg.grad(f)(ro)


def test_view_made_writable_as_numpy_decides_and_in_nested_differentiation():
    # NumPy asks the array a view views: one the function made read-only keeps its views read-only
    # (the view was made writable, and the write reached the read-only argument: value 35, gradient
    # [[6, 1], [1, 6]]); inside a nested differentiation the inner argument's view too (NumPy's
    # bare ValueError: the outer level's lock)
    def protects(x):
        x.flags.writeable = False
        d = np.diagonal(x)
        try:
            d.flags.writeable = True
        except ValueError:
            d = d.copy()
        d *= 3.0
        return np.sum(x) + np.sum(d)

    x0 = np.array([[1.0, 2.0], [3.0, 4.0]])
    plain, x = x0.copy(), x0.copy()
    val, g = mg.value_and_grad(protects)(x)
    assert val == protects(plain) == 25.0
    np.testing.assert_array_equal(x, x0)
    np.testing.assert_allclose(g, [[4.0, 1.0], [1.0, 4.0]], rtol=1e-15)  # sum(x) + 3 tr(x), by hand

    def h(x):
        d = np.diagonal(x)
        d.flags.writeable = True
        d *= 2.0
        return np.sum(x ** 2)

    # h = sum of the off-diagonal squares + 4 x_ii²: the Hessian is diag(8 on the diagonal, 2 off it)
    want = np.diag([8.0, 2.0, 2.0, 8.0]).reshape(2, 2, 2, 2)
    np.testing.assert_allclose(mg.hessian(h)(x0.copy()), want, rtol=1e-15)
    np.testing.assert_allclose(mg.jacobian(mg.grad(h))(x0.copy()), want, rtol=1e-15)
    np.testing.assert_allclose(mg.grad(lambda y: mg.grad(h)(y * 1.0)[0, 0])(x0.copy()),
                               [[8.0, 0.0], [0.0, 0.0]], rtol=1e-15)


def test_caller_arrays_stay_read_only_through_grads_reverse_pass():
    # the reverse pass reads the caller's memory (the tracers hold views of it): another thread's
    # write there while it ran went through (the arrays were unlocked when the function returned),
    # and the gradient read the new values; it raises NumPy's read-only error in that thread now
    x = np.array([0.5, 1.5, -0.7])
    seen = []

    @mg.primitive
    def square(v):
        return v * v

    @mg.rrule(square)
    def _(v):
        def pullback(g):
            seen.append(x.flags.writeable)  # (what another thread would meet, during the reverse pass)
            return (2.0 * v * g,)

        return square(v), pullback

    np.testing.assert_allclose(mg.grad(lambda x: np.sum(square(x)))(x), 2 * x, rtol=1e-15)
    assert seen == [False] and x.flags.writeable  # (locked in the pass, writable after it)
    with pytest.raises(TypeError, match="scalar output"):  # (and unlocked after a failing call too)
        mg.grad(lambda x: np.sum(square(x)) + np.zeros(2))(x)
    assert x.flags.writeable


def test_vjp_pullbacks_nan_fill_refuses_arguments_changed_since_the_call():
    # a NaN the reverse pass leaves (sqrt(t - a) at t = a: inf - inf) is computed again by forward
    # mode, running the function again: on the arrays as the caller had changed them ([7, 0] for
    # [3, 0], FD, silently); now MutationError, and the caller's own arrays (not copies, which a
    # function could tell apart: np.shares_memory of two arguments, strides) when unchanged
    k = np.arange(4.0)

    def f(x):
        t = x[0] + 0.1 * k
        return np.sum(np.sqrt(t - x[0])) + x[0] * x[1]

    x = np.array([0.0, 3.0])
    _, pb = mg.vjp(f, x)
    np.testing.assert_allclose(pb(1.0)[0], [3.0, 0.0], rtol=1e-15)  # d/dx0 = x1 (the sqrt terms' cancel)
    x[1] = 7.0
    with pytest.raises(mg.MutationError, match="modified after vjp returned"):
        pb(1.0)
    x = np.array([0.0, 0.0, np.nan])  # bit for bit: -0.0 is a change (copysign reads it), a NaN is not
    _, pb = mg.vjp(lambda x: f(x) * np.copysign(1.0, x[1]) + 0.0 * np.nansum(x), x)
    np.testing.assert_allclose(pb(1.0)[0][:2], [0.0, 0.0], atol=0)
    x[1] = -0.0
    with pytest.raises(mg.MutationError, match="modified after vjp returned"):
        pb(1.0)

    def g(a, b):  # the same array twice: the function sees it so in the fill's run too
        c = 1.0 if np.shares_memory(a, b) else 2.0
        t = a[0] + 0.1 * k
        return np.sum(np.sqrt(t - a[0])) + c * a[0] * b[1]

    a = np.array([0.0, 3.0])
    np.testing.assert_allclose(mg.vjp(g, a, a)[1](1.0)[0], [3.0, 0.0], rtol=1e-15)


def test_forward_runs_restore_an_argument_the_function_made_read_only():
    # hessian and jacobian(mode="fwd") put the arguments back before each run: into an array the
    # previous run made read-only (NumPy's bare "assignment destination is read-only")
    def f(x):
        x[1] = x[0] ** 2
        x.flags.writeable = False
        return np.sum(np.sin(x))

    x0 = np.array([0.3, -1.2, 0.7])
    plain, x = x0.copy(), x0.copy()
    f(plain)
    h = mg.hessian(f)(x)
    # f = sin(x0) + sin(x0²) + sin(x2), by hand
    want = np.diag([-np.sin(0.3) + 2 * np.cos(0.09) - 4 * 0.09 * np.sin(0.09), 0.0, -np.sin(0.7)])
    np.testing.assert_allclose(h, want, rtol=1e-14, atol=1e-15)
    np.testing.assert_array_equal(x, plain)
    assert not x.flags.writeable  # (as one plain call leaves it)


def test_a_view_of_a_read_only_view_of_a_writable_array_can_be_made_writable():
    # NumPy asks the array that owns the memory: a read-only view of a writable base passed as an
    # argument lets a view of it be made writable (mutagrad refused: value 1.25 for 2.69, a gradient
    # of the unwritten program, the base unchanged)
    def f(x, c):
        v = c[1:]
        v.flags.writeable = True
        v[0] = x[0]
        return np.sum(x * c)

    def run(how):
        base = np.array([9.0, 1.5, 0.5, -2.0])
        c = base[:3]
        c.flags.writeable = False
        x = np.array([0.3, 0.2, 1.0])
        out = f(x, c) if how == "plain" else mg.value_and_grad(f)(x, c)
        return out, base

    (val, g), base = run("grad")
    plain, plain_base = run("plain")
    assert val == plain
    np.testing.assert_array_equal(base, plain_base)
    np.testing.assert_allclose(g, [9.0 + 0.2, 0.3, 0.5], rtol=1e-15)  # c[1] = x0: d/dx0 = c0 + x1, by hand


def test_nested_arguments_report_the_outer_arguments_owndata_and_base():
    # inside hessian / grad of grad an argument said owndata False (base not None): a function that
    # copies a view first (`if not x.flags.owndata: x = x.copy()`) left its argument unwritten
    seen = []

    def f(x):
        seen.append((bool(x.flags.owndata), x.base is None))
        if not x.flags.owndata:
            x = x.copy()
        x *= 2.0
        return np.sum(x ** 3)

    x0 = np.array([0.3, -1.2, 0.7])
    plain = x0.copy()
    f(plain)
    for d in (mg.hessian(f), mg.jacobian(mg.grad(f)), lambda x: mg.grad(lambda y: mg.grad(f)(y)[0])(x)):
        seen.clear()
        x = x0.copy()
        d(x)
        np.testing.assert_array_equal(x, plain)
        assert set(seen) == {(True, True)}
    np.testing.assert_allclose(mg.hessian(f)(x0.copy()), np.diag(48.0 * x0), rtol=1e-14)  # (2x)³: 48x, by hand


def test_forward_runs_put_back_a_read_only_argument_a_run_made_writable():
    # the caller's read-only array, made writable and written by the function: the runs of hessian
    # started from the written values (MutationError, "took other steps"); each starts from the
    # array as given now, and it ends as one plain call leaves it
    def f(x):
        x.flags.writeable = True
        x[2] = x[0] * x[1]
        return np.sum(np.cos(x))

    def given():
        x = np.array([0.3, -1.2, 0.7])
        x.flags.writeable = False
        return x

    plain, x = given(), given()
    f(plain)
    h = mg.hessian(f)(x)
    # cos(x0) + cos(x1) + cos(x0 x1), by hand
    a, b = 0.3, -1.2
    want = [[-np.cos(a) - b * b * np.cos(a * b), -np.sin(a * b) - a * b * np.cos(a * b), 0.0],
            [-np.sin(a * b) - a * b * np.cos(a * b), -np.cos(b) - a * a * np.cos(a * b), 0.0], [0.0, 0.0, 0.0]]
    np.testing.assert_allclose(h, want, rtol=1e-14, atol=1e-15)
    np.testing.assert_array_equal(x, plain)
    assert x.flags.writeable == plain.flags.writeable


_HIDDEN = {}


def _written_through_a_view_made_before(x):
    y = np.sum(x ** 3)
    _HIDDEN["holder"][-1][0] = 5.0  # (a plain view of x made before the call)
    return y + np.sum(x ** 2)


@pytest.mark.parametrize("holder", ["long list", "long list with a dict", "global view"])
def test_a_plain_view_made_before_the_call_written_raises_in_both_modes(holder):
    # the derivative of x0 ** 3 read x0 = 5 (85 for 3): the view sat in a list of more than 256
    # items, which the alias search skipped; forward mode did not check found views at all
    x = np.array([1.0, 2.0, 3.0])
    _HIDDEN["holder"] = {"long list": [None] * 300, "long list with a dict": [None] * 300 + [{}],
                         "global view": []}[holder] + [x[:]]
    plain = x.copy()
    try:
        for run in (mg.grad(_written_through_a_view_made_before),
                    lambda x: mg.jvp(_written_through_a_view_made_before, (x,), (np.array([1.0, 0, 0]),))):
            x[...] = plain
            with pytest.raises(mg.MutationError, match="plain"):
                run(x)
    finally:
        _HIDDEN.clear()


def test_long_containers_of_numbers_are_searched_without_warnings():
    # a list or dictionary of more than 256 numbers holds no array: no warning at a write
    data = [float(i) for i in range(5000)]
    table = {f"k{i}": i for i in range(1000)}
    arrays = [np.zeros(2)] * 300  # (arrays only: each one is checked)

    def f(x):
        x[0] = x[0] * data[3] + table["k2"] + arrays[5][0]
        return np.sum(x * x)

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        g = mg.grad(f)(np.array([1.0, 2.0]))
    np.testing.assert_allclose(g, [2 * (3 * 1.0 + 2) * 3, 4.0])  # d/dx of (3 x0 + 2)^2 + x1^2, by hand


def _three_views_of_one(value=0.3):
    return np.lib.stride_tricks.as_strided(np.array([value, -1.2, 0.8]), shape=(3,), strides=(0,))


def test_a_traced_write_into_a_constant_argument_whose_elements_share_memory_is_refused():
    # x[0] = y changes all three elements: the reverse pass kept one derivative per element and gave
    # 8 where d/dy (3 y^2) = 12 (the views2 tester); forward mode, which mirrors the memory, is right
    def f(y, x):
        x[0] = y
        return np.sum(x) * y

    assert f(2.0, _three_views_of_one()) == 12.0
    with pytest.raises(mg.MutationError, match=r"argument 1 at .*x\[0\] = y.*share memory"):
        mg.grad(f)(2.0, _three_views_of_one())
    np.testing.assert_allclose(mg.jvp(f, (2.0, _three_views_of_one()), (1.0, np.zeros(3)))[1], 12.0)
    # reading it is fine: a constant
    np.testing.assert_allclose(mg.grad(lambda y, x: np.sum(x * y))(2.0, _three_views_of_one()), 0.9)


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_a_differentiated_broadcast_argument_made_writable_is_refused():
    # the function's write went into mutagrad's private copy, not the caller's memory as in NumPy
    def f(x):
        x.flags.writeable = True
        x[0, 1] = x[0, 0] * 3.0
        return np.sum(x ** 2)

    with pytest.raises(mg.MutationError, match=r"making argument 0 writable at .*share memory"):
        mg.grad(f)(np.broadcast_to(np.array([0.3, -1.2, 0.8]), (2, 3)))


@pytest.mark.parametrize("strides", [(12,), (4,)])
def test_as_strided_with_strides_off_the_element_grid_is_refused(strides):
    # elements made of parts of two elements' bytes: garbage derivatives (5e-315) in both modes
    def f(x):
        return np.sum(mnp.as_strided(x, (2,), strides))

    with pytest.raises(mg.NoRuleError, match=r"as_strided at .*not multiples of the array's itemsize"):
        mg.grad(f)(np.arange(1.0, 5.0))
    with pytest.raises(mg.NoRuleError, match=r"as_strided at"):
        mg.jvp(f, (np.arange(1.0, 5.0),), (np.ones(4),))


_V = {}


def test_a_write_and_restore_through_a_plain_view_fails_at_the_write():
    # the reads between the write and the restore saw 10 for x[1]: reverse mode gave 4, forward
    # mode 20, where d/dx1 = 0 (x[1] was the constant 10 then); the check at the return saw nothing
    def f(x):
        old = float(_V["view"][0])
        _V["view"][0] = 10.0
        y = np.sum(x * x)
        _V["view"][0] = old
        return y

    x = np.array([1.0, 2.0, 3.0, 4.0])
    _V["view"] = x[1:3]
    try:
        for run in (mg.grad(f), lambda x: mg.jvp(f, (x,), (np.array([0.0, 1, 0, 0]),))):
            with pytest.raises(mg.AliasingError, match=r"_V\[.view.\]\[0\] = 10\.0.*a plain array sharing memory with argument 0"):
                run(x)
            assert x.flags.writeable and _V["view"].flags.writeable and np.array_equal(x, [1.0, 2, 3, 4])
    finally:
        _V.clear()


def test_long_lists_of_records_are_searched_without_warnings():
    # (x, y) tuples, rows as lists, a dict of arrays: they hold no view of the argument
    points = [(float(i), 0.5 * i) for i in range(1000)]
    rows = [[1.0, 2.0, "a"] for _ in range(1000)]
    table = {i: np.zeros(2) for i in range(300)}

    def f(x):
        x[0] = x[1] * points[3][1] + rows[2][0] + table[3][0]
        return np.sum(x * x)

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        g = mg.grad(f)(np.array([1.0, 2.0, 3.0]))
    np.testing.assert_allclose(g, [0.0, 4.0 + 2 * 4.0 * 1.5, 6.0])  # by hand: x0 = 1.5 x1 + 1


def test_a_locked_argument_reached_where_the_search_did_not_look_is_named_plainly():
    # the message named "(the plain array `None`)" for an argument the search could not check (a list of
    # 300 dicts is searched now; one of 2000 still is not)
    records = [{"k": i} for i in range(2000)]

    def f(x):
        records[-1][0] = 1.0
        return np.sum(x * x)

    x = np.array([1.0, 2.0])
    records.append(x)
    with pytest.raises(mg.AliasingError) as info:
        mg.grad(f)(x)
    assert "(argument 0)" in str(info.value) and "None" not in str(info.value)
    assert x.flags.writeable and np.array_equal(x, [1.0, 2.0])


_G = {}


@pytest.mark.parametrize("holder", ["records", "record dict", "memmap", "memmap records"])
def test_plain_views_in_records_and_of_memmaps_are_found(holder, tmp_path):
    # a view inside a long list of (number, array) records, or of a memmap argument (not a plain
    # ndarray): neither was searched, and a write-and-restore gave wrong derivatives
    if holder.startswith("memmap"):
        x = np.memmap(tmp_path / "a.dat", dtype=float, mode="w+", shape=(3,))
        x[:] = [1.0, 2.0, 3.0]
    else:
        x = np.array([1.0, 2.0, 3.0])
    view = x[1:]
    _G["view"] = {"records": [(0.0, np.zeros(2))] * 300 + [(3.0, view)],
                  "record dict": {**{i: (0.0, np.zeros(2)) for i in range(300)}, 300: (3.0, view)},
                  "memmap": [view], "memmap records": [(0.0, x[:1])] * 300 + [(3.0, view)]}[holder]

    def f(x):
        held = _G["view"]
        v = held[len(held) - 1][1] if holder != "memmap" else held[0]
        old = float(v[0])
        v[0] = 10.0
        y = np.sum(x * x)
        v[0] = old
        return y

    try:
        for run in (mg.grad(f), lambda x: mg.jvp(f, (x,), (np.array([0.0, 1, 0]),))):
            with pytest.raises(mg.AliasingError, match=r"v\[0\] = 10\.0"):
                run(x)
            assert view.flags.writeable and np.array_equal(x, [1.0, 2.0, 3.0])
    finally:
        _G.clear()


def test_a_caller_array_made_writable_again_through_a_global_is_refused():
    x = np.array([1.0, 2.0, 3.0])
    _G["x"] = x

    def f(x):
        s = np.sum(x ** 2)
        _G["x"].flags.writeable = True
        _G["x"][1] = 100.0
        t = np.sum(x * x)
        _G["x"][1] = 2.0
        return s + t

    try:
        for run in (mg.grad(f), lambda x: mg.jvp(f, (x,), (np.array([0.0, 1, 0]),))):
            with pytest.raises(mg.MutationError, match="made writable again while the function ran"):
                run(x)
            assert x.flags.writeable
    finally:
        _G.clear()


class _Node:
    pass


def _nested_view(x, depth):
    """An object holding a plain view of ``x`` ``depth`` attribute steps and one dict entry down."""
    root = cur = _Node()
    for _ in range(depth - 1):
        cur.a = _Node()
        cur = cur.a
    cur.cache = {"u": x[:]}
    return root


@pytest.mark.parametrize("beyond", [-7, -1, 0, 1, 3])
def test_a_plain_write_through_a_view_deeper_than_the_search_is_not_silent(beyond):
    # (claims4: past the search's depth the view went unseen, and the write into the values sin's pullback
    # reads gave cos(2 x) silently; now the search is incomplete there, so the argument is checked at return)
    from mutagrad import api

    depth = api.ALIAS_SEARCH_DEPTH + beyond
    x = np.array([1.0, 2.0])
    holder = _nested_view(x, depth)

    def f(x):
        y = np.sum(np.sin(x))
        c = holder
        for _ in range(depth - 1):
            c = c.a
        c.cache["u"] *= 2.0
        return y

    for run in (mg.grad(f), lambda x: mg.jvp(f, (x,), (np.array([1.0, 0.0]),))):
        x[:] = [1.0, 2.0]
        with pytest.raises((mg.MutationError, mg.AliasingError)):
            run(x)
        assert x.flags.writeable


def test_a_write_through_an_argument_past_the_search_depth_warns():
    from mutagrad import api

    depth = api.ALIAS_SEARCH_DEPTH + 2
    x = np.array([1.0, 2.0])
    holder = _nested_view(x, depth)

    def f(x):
        x[1] = 3.0 * x[0]
        c = holder
        for _ in range(depth - 1):
            c = c.a
        return np.sum(np.sin(x)) + len(c.cache)

    with pytest.warns(UserWarning, match="could not check"):
        g = mg.grad(f)(x.copy())
    np.testing.assert_allclose(g, [np.cos(1.0) + 3.0 * np.cos(3.0), 0.0])  # by hand: sin(x0) + sin(3 x0)


def test_a_shallow_nested_structure_searched_to_its_end_gives_no_warning():
    x = np.array([1.0, 2.0])
    config = {"a": {"b": [{"scale": 2.0, "tags": ("p", "q")}]}}

    def f(x):
        x[1] = config["a"]["b"][0]["scale"] * x[0]
        return np.sum(x * x)

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        g = mg.grad(f)(x)
    np.testing.assert_allclose(g, [2.0 + 2 * 2.0 * 2.0, 0.0])  # by hand: x0^2 + (2 x0)^2


_ITERATORS = {
    "iter": lambda X: iter(X),
    "generator expression": lambda X: (r for r in X),
    "enumerate": lambda X: (r for _, r in enumerate(X)),
    "map": lambda X: map(lambda r: r, X),  # noqa: C417  (a map object is what is tested)
    "zip": lambda X: (b for _, b in zip(X, X)),
    "flat": lambda X: X.flat,
    "dict values": lambda X: iter({"u": X}.values()),
}


@pytest.mark.parametrize("kind", sorted(_ITERATORS))
def test_an_iterator_over_the_argument_made_before_the_call_is_found(kind):
    # (memo: an iterator, a generator or X.flat made before the call was not looked into: the function
    # wrote into its argument, then read the same memory through the iterator as a constant, and the
    # derivative through that read was silently 0: FD of the plain program gives [8, 16, 24])
    X = np.array([1.0, 2.0, 3.0])
    rows = _ITERATORS[kind](X)

    def f(x):
        x *= 2.0
        total = 0.0
        for r in itertools.islice(rows, 3):
            total = total + np.sum(np.square(r))
        return total

    with pytest.raises(mg.AliasingError):
        mg.value_and_grad(f)(X)
    assert X.flags.writeable and np.array_equal(X, [1.0, 2.0, 3.0])


def test_an_iterator_over_another_array_is_read_as_a_constant():
    Y = np.array([1.0, 2.0, 3.0])
    rows = iter(Y)
    seen = weakref.ref(Y)

    def f(x):
        x *= 2.0
        return sum(r * xi for r, xi in zip(rows, x)) + np.sum(seen()) * x[0]

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        g = mg.grad(f)(np.array([0.5, 1.0, 1.5]))
    np.testing.assert_allclose(g, [2.0 * 1.0 + 2.0 * 6.0, 4.0, 6.0])  # by hand: 2 x . Y + 2 x0 sum(Y)


def test_a_logging_call_or_a_deep_config_does_not_make_the_search_incomplete():
    # (regress34: at a depth of six steps, logging.info's root logger's handlers and a config nested seven
    # levels deep made every write through the argument warn that it could not be checked)
    import logging

    cfg = {"model": {"solver": {"time": {"scheme": {"rk": {"stages": {"coef": 0.5}}}}}}}

    def f(x):
        logging.info("step")  # noqa: LOG015  (the root logger is what is tested)
        x *= cfg["model"]["solver"]["time"]["scheme"]["rk"]["stages"]["coef"]
        return np.sum(x ** 2)

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        g = mg.grad(f)(np.ones(3))
    np.testing.assert_array_equal(g, [0.5, 0.5, 0.5])  # by hand: d/dx (0.5 x)^2 = 0.5 x


class _Loader:  # a data loader: its __next__ reads self.data
    def __init__(self, data):
        self.data, self.i = data, 0

    def __iter__(self):
        return self

    def __next__(self):
        self.i += 1
        return self.data[self.i - 1:self.i]


class _Box:
    pass


def _weak_values(X):
    b = _Box()
    b.a = X[:1]
    d = weakref.WeakValueDictionary({"k": b})
    d.keep = b
    return d


_MORE_ITERATORS = {  # (made before the call; how the function reads X[0] through it)
    "tee": (lambda X: itertools.tee([X[:1]])[0], next),
    "pairwise": (lambda X: itertools.pairwise([X[:1], X[:1]]), lambda it: next(it)[1]),
    "deque iterator": (lambda X: iter(collections.deque([X[:1]])), next),
    "np.nditer": (lambda X: np.nditer(X), lambda it: np.array([float(next(it))])),
    "np.ndenumerate": (lambda X: np.ndenumerate(X), lambda it: np.array([next(it)[1]])),
    "WeakValueDictionary": (_weak_values, lambda d: d["k"].a),
    "a loader class": (_Loader, next),
}


@pytest.mark.parametrize("kind", sorted(_MORE_ITERATORS))
def test_compiled_iterators_weak_dictionaries_and_iterator_classes_are_looked_into(kind):
    # (regress34: these still read X's memory as a constant after the function wrote it through its
    # argument: grad [0, 0, 0] where FD of the plain program gives [8, 0, 0])
    make, read = _MORE_ITERATORS[kind]
    X = np.array([1.0, 2.0, 3.0])
    it = make(X)

    def f(x):
        x *= 2.0
        return np.sum(read(it) ** 2)

    with pytest.raises(mg.AliasingError):
        mg.grad(f)(X)
    assert X.flags.writeable and np.array_equal(X, [1.0, 2.0, 3.0])


def test_a_logging_line_costs_the_alias_search_little():
    # (regress35: a log.debug line in the function made the search walk every logger and handler, 10^4
    # objects and 20 ms per gradient; the logging module's functions are not walked now, as NumPy's are not)
    import logging

    from mutagrad import api

    log = logging.getLogger("mutagrad-test-logging")
    A = np.array([[2.0, 1.0], [0.5, 3.0]])

    def f(w):
        r = A @ w
        log.debug("residual %s", 1)
        logging.info("step")  # noqa: LOG015  (the root logger is what is tested)
        return np.sum(np.tanh(r) ** 2)

    found, budget = api._search(f, 1, (), ())
    assert any(a is A for _, a in found)
    assert api.ALIAS_SEARCH_BUDGET - budget.left < 200
    w = np.array([0.3, -0.2])
    t = np.tanh(A @ w)
    np.testing.assert_allclose(mg.grad(f)(w), A.T @ (2 * t * (1 - t * t)), rtol=1e-12)  # by hand


def test_a_view_in_a_mapping_proxy_is_found():
    # (geom: types.MappingProxyType was not looked into: a plain write through the view it held into
    # values x ** 2's pullback reads gave [13, 7, 9] silently; FD of the plain program gives [2, 7, 9])
    X = np.array([1.0, 2.0, 3.0])
    params = types.MappingProxyType({"v": X[:2]})

    def f(x):
        y = x ** 2
        params["v"][0] = 5.0
        return np.sum(y) + np.sum(x * 3.0)

    with pytest.raises(mg.AliasingError):
        mg.value_and_grad(f)(X)
    assert X.flags.writeable and np.array_equal(X, [1.0, 2.0, 3.0])


def test_an_argument_changed_through_a_view_no_search_finds_is_caught_at_return():
    # (geom: a view an lru_cache getter returns is made by a call, which the alias search does not make;
    # a plain write through it into an argument mutagrad never wrote gave a silent wrong gradient. The
    # arguments' checksums at the call are compared when the function returns)
    import functools

    X = np.array([1.0, 2.0, 3.0])

    @functools.lru_cache
    def getter():
        return X[:2]

    getter()

    def f(x):
        y = x ** 2
        getter()[0] = 5.0
        return np.sum(y)

    for run in (mg.grad(f), lambda x: mg.jvp(f, (x,), (np.ones(3),))):
        X[:] = [1.0, 2.0, 3.0]
        with pytest.raises(mg.MutationError, match="changed while the function ran"):
            run(X)
        assert X.flags.writeable
    Y = np.array([1.0, 2.0, 3.0])  # another array: its gradient, as a plain call's (getter writes X)
    np.testing.assert_array_equal(mg.grad(f)(Y), [2.0, 4.0, 6.0])


def test_a_long_list_of_objects_holding_views_of_the_argument_is_searched():
    # (geom: 300 particle objects, each holding a row view of the positions, were more than the 256 items
    # a list is searched through: only a warning at the write, and a zero gradient through the reads)
    class Particle:
        def __init__(self, x):
            self.x = x

    X = np.linspace(1.0, 2.0, 900).reshape(300, 3)
    parts = [Particle(X[i]) for i in range(300)]

    def f(x):
        x *= 2.0
        return sum(np.sum(p.x ** 2) for p in parts)

    with pytest.raises(mg.AliasingError, match=r"parts\[0\]\.x"):
        mg.grad(f)(X)
    assert X.flags.writeable and np.array_equal(X, np.linspace(1.0, 2.0, 900).reshape(300, 3))


def test_the_argument_checksum_sees_every_bit():
    # (regress37: a weighted float sum lost a change next to a 1e20 element, and the sign of a zero)
    import functools

    for values, index, new in (([1e20, 1.0, 3.0], 1, 2.0), ([0.0, 0.0, 3.0], 1, -0.0)):
        X = np.array(values)

        @functools.lru_cache
        def view():
            return X[:2]  # noqa: B023  (called at once)

        view()

        def f(x):
            y = x ** 2
            view()[index] = new  # noqa: B023
            return np.sum(y[1:])

        with pytest.raises(mg.MutationError, match="changed while the function ran"):
            mg.grad(f)(X)


def test_a_raising_function_leaves_its_arguments_to_reference_counting():
    # (regress37: the checksums' entries held the level in a cycle when the function raised: the caller's
    # arrays lived until the cyclic collector ran, 600 MB over 200 failing gradients of 8 MB arrays)
    def f(x):
        x * 2.0
        raise ValueError("the program's own error")

    was = gc.isenabled()
    gc.disable()
    try:
        refs = []
        for run in (mg.grad(f), lambda a: mg.jvp(f, (a,), (a,)), lambda a: mg.vjp(f, a), mg.jacobian(f), mg.hessian(f),
                    mg.grad(lambda z: np.sum(mg.grad(f)(z)))):  # (regress38: vjp, jacobian, hessian kept the tape)
            a = np.random.default_rng(0).random(1000)
            refs.append(weakref.ref(a))
            with pytest.raises(ValueError, match="own error"):
                run(a)
            del a
        assert all(r() is None for r in refs)
    finally:
        if was:
            gc.enable()


def test_the_argument_checksum_has_no_weight_pairs_that_cancel():
    # (regress38: weights w[i % 8192] * w[::-1][i // 8192] gave words (a, b) and (8191 - b, 8191 - a) one
    # weight: x[4094] *= 2 with x[12287] /= 2 left the sum unchanged, and the gradient was off by 2 at both)
    import functools

    X = np.linspace(1.0, 1.5, 16384)

    @functools.lru_cache
    def view():
        return X[:]

    view()

    def f(x):
        v = view()
        v[4094] *= 2.0
        v[12287] /= 2.0
        return np.sum(x ** 2)

    with pytest.raises(mg.MutationError, match="changed while the function ran"):
        mg.grad(f)(X)


def test_a_view_of_an_argument_among_a_long_list_of_arrays_is_found():
    # (the alias search takes a long list of plain arrays in one comprehension) the view at the end of 300
    # arrays is named as a short list's is
    X = np.zeros(4)
    for n in (3, 300):
        views = [np.zeros(2) for _ in range(n)] + [X[1:3]]

        def f(x, views=views):
            x *= 2.0
            return np.sum(x) + np.sum(views[-1])

        with pytest.raises(mg.AliasingError, match=rf"shares its memory with the plain array `views\[{n}\]`"):
            mg.grad(f)(X)


# --- the caller's array read back through a reference the alias search cannot see (the oop tester):
# a context variable, threading.local, an lru_cache'd accessor, globals()[name]. After the function
# wrote into its argument, the plain reference holds the written values with no derivative: the plain
# function of the FD oracle (fresh arrays, the same reference set to them) gives 8x for
# sum(get() * x) after x *= 2, mutagrad gave 4x with no error. Now an AliasingError.
_CV = __import__("contextvars").ContextVar("mutagrad_test_state")
_TL = __import__("threading").local()


def _accessors():
    def by_contextvar(x):
        _CV.set(x)
        return _CV.get

    def by_local(x):
        _TL.u = x
        return lambda: _TL.u

    def by_cache(x):
        @__import__("functools").lru_cache(maxsize=None)
        def current():
            return x
        return current

    def by_globals(x):
        globals()["_HIDDEN_STATE"] = x
        return lambda: globals()["_HIDDEN_STATE"]

    return [by_contextvar, by_local, by_cache, by_globals]


@pytest.mark.parametrize("make", _accessors(), ids=["ContextVar", "threading.local", "lru_cache", "globals()"])
@pytest.mark.parametrize("read", [lambda g, x: g() * x, lambda g, x: x * g()[::-1],
                                  lambda g, x: np.add(g()[1:], x[:-1])], ids=["itself", "view", "ufunc"])
def test_reading_the_argument_after_a_write_through_an_unsearched_reference_raises(make, read):
    x = np.array([1.0, 2.0, 3.0])
    get = make(x)

    def f(x):
        x *= 2.0
        return np.sum(read(get, x))

    # (a threading.local's attributes are searched now, regress123: its array is named at the write)
    found = r"|shares its memory with the plain array `_TL.u`" if make.__name__ == "by_local" else ""
    with pytest.raises(mg.AliasingError, match=r"memory of argument 0.*after the function wrote into it" + found):
        mg.grad(f)(x)
    assert x.flags.writeable  # (unlocked, however it ended)
    x = np.array([1.0, 2.0, 3.0])
    get = make(x)
    with pytest.raises(mg.AliasingError, match="after the function wrote into it" + found):
        mg.jvp(f, (x,), (np.ones(3),))


def test_a_write_of_the_argument_read_back_through_an_unsearched_reference_raises():
    x = np.array([1.0, 2.0, 3.0])
    get = _accessors()[0](x)

    def f(x):
        x[0] = 5.0 * x[1]
        y = mnp.zeros(2)
        y[:] = get()[:2]
        return np.sum(y * x[1:])

    with pytest.raises(mg.AliasingError, match="after the function wrote into it"):
        mg.grad(f)(x)


def test_reading_the_argument_through_a_reference_before_any_write_is_a_constant():
    # before a write the reference holds the values at the call: a constant, as any plain array the
    # function reads (the FD oracle's reference stays the unperturbed array)
    x0 = np.array([1.0, 2.0, 3.0])

    def make_f(get):
        def f(x):
            y = np.sum(get() * x)
            x *= 2.0
            return y + np.sum(x ** 2)
        return f

    x = x0.copy()
    g = mg.grad(make_f(_accessors()[0](x)))(x)
    ref = fd_grad(make_f(lambda: x0), x0.copy())
    np.testing.assert_allclose(g, ref, rtol=1e-7)


def test_mg_value_of_a_written_argument_is_a_constant_not_an_alias():
    # mg.value asks for the values as a constant: no error, its derivative is not carried
    # (closed form: f = sum(c * 2 x) with c = 2 x0 constant, df/dx = 2 c = 4 x0; the slice: 2 c[1:] padded)
    x0 = np.array([1.0, 2.0, 3.0])

    def f(x):
        x *= 2.0
        return np.sum(mg.value(x) * x) + np.sum(mg.value(x)[1:] * x[:-1])

    g = mg.grad(f)(x0.copy())
    np.testing.assert_allclose(g, 4.0 * x0 + 2.0 * np.append(2.0 * x0[1:], 0.0), rtol=1e-12)


class _Validated:
    """A descriptor keeping each instance's array in a weak dictionary (a validated attribute)."""

    def __init__(self):
        self.values = weakref.WeakKeyDictionary()

    def __get__(self, obj, owner=None):
        return self if obj is None else self.values[obj]

    def __set__(self, obj, v):
        self.values[obj] = v


class _Rod:
    T = _Validated()

    def __init__(self, T):
        self.T = T

    def energy(self):
        return np.sum(self.T ** 2)


def test_an_argument_held_by_a_descriptor_of_the_program_is_found_by_the_alias_search():
    # (the oop tester: a plain attribute gave AliasingError, the descriptor's store a gradient of zeros)
    def relax(T, rod):
        T[1:-1] += 0.25 * (T[2:] - 2 * T[1:-1] + T[:-2])
        return rod.energy()

    T = np.array([1.0, 2.0, 4.0, 3.0, 1.0])
    with pytest.raises(mg.AliasingError, match="shares its memory"):
        mg.grad(relax)(T, _Rod(T))
    # not written: the read through the descriptor is a constant, and the result is the plain one
    rod = _Rod(T)
    np.testing.assert_allclose(mg.grad(lambda T, rod: np.sum(T * rod.T))(T, rod), T, rtol=1e-12)


# --- the same check where the reference holds a view made before the call, the whole array whose interior is
# the argument, a strided view made inside the function, or an outer differentiation's traced array (the
# regress92 tester: each gave the gradient of the constant, 4x for 8x, with no error)
@pytest.mark.parametrize("hold", [lambda x: x[:], lambda x: x.reshape(3), lambda x: np.broadcast_to(x, (2, 3))[0],
                                  lambda x: np.lib.stride_tricks.as_strided(x, (3,), x.strides)],
                         ids=["slice", "reshape", "broadcast_to", "as_strided"])
def test_a_view_made_before_the_call_read_after_a_write_raises(hold):
    x = np.array([1.0, 2.0, 3.0])
    _CV.set(hold(x))

    def f(x):
        x *= 2.0
        return np.sum(_CV.get() * x)

    for run in (lambda: mg.grad(f)(x), lambda: mg.jvp(f, (x,), (np.ones(3),))):
        with pytest.raises(mg.AliasingError, match="after the function wrote into it"):
            run()


def test_the_whole_array_of_an_interior_argument_read_after_a_write():
    A = np.array([0.5, 1.0, 2.0, 3.0, 0.25])
    _CV.set(A)

    def overlapping(u):
        u *= 2.0
        return np.sum(_CV.get()[1:-1] * u)

    with pytest.raises(mg.AliasingError, match="after the function wrote into it"):
        mg.grad(overlapping)(A[1:-1])

    def ghosts(u):  # the ghost cells only: not the argument's memory, constants (the FD oracle keeps A)
        u *= 2.0
        return np.sum(_CV.get()[::4] * u[::2])

    A0 = A.copy()
    g = mg.grad(ghosts)(A[1:-1])
    np.testing.assert_allclose(g, fd_grad(lambda u: np.sum(A0[::4] * 2.0 * u[::2]), A0[1:-1]), rtol=1e-7)


def test_a_strided_view_made_inside_the_function_after_a_write_raises():
    x = np.array([1.0, 2.0, 3.0, 4.0])
    _CV.set(x)

    def lagged(x):
        x *= 2.0
        w = np.lib.stride_tricks.sliding_window_view(_CV.get(), 2)
        return np.sum(w[:, 1] * x[:-1])

    with pytest.raises(mg.AliasingError, match="after the function wrote into it"):
        mg.grad(lagged)(x)


def test_an_outer_traced_array_read_by_an_inner_differentiation_after_it_wrote_into_it():
    def inner(y):
        y *= 2.0
        return np.sum(_CV.get() * y)

    def outer(p):
        x = p * 1.0
        _CV.set(x)
        return np.sum(mg.grad(inner)(x))

    with pytest.raises(mg.AliasingError, match="outer differentiation's traced array"):
        mg.grad(outer)(np.array([1.0, 2.0, 3.0]))


def test_constant_writes_and_mg_value_of_the_reference_are_no_alias_reads():
    # a write of constants leaves the memory's derivative zero, which the plain read gives (by hand: d/dx of
    # sum(1.5 * (3 x)) = 4.5); mg.value of the reference asks for a constant
    x0 = np.array([1.0, 2.0, 3.0])

    def reset(x, ws):
        ws.fill(1.5)
        return np.sum(_CV.get() * (3.0 * x))

    ws = np.zeros(3)
    _CV.set(ws)
    np.testing.assert_allclose(mg.grad(reset)(x0.copy(), ws), np.full(3, 4.5), rtol=1e-12)

    def valued(x):
        x *= 2.0
        return np.sum(mg.value(_CV.get()) * x)  # (by hand: c = 2 x0 constant, d/dx sum(c * 2 x) = 4 x0)

    x = x0.copy()
    _CV.set(x)
    np.testing.assert_allclose(mg.grad(valued)(x), 4.0 * x0, rtol=1e-12)
