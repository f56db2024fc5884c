"""Nested differentiation: level tags keep perturbations apart; grad of
grad, jvp of grad and grad of jvp work, on mutating functions too."""
import warnings

import numpy as np
import pytest

import mutagrad as mg
import mutagrad.numpy as mnp
from mutagrad.testing import check_grads, numerical_grad
from tests._oracles import fd_hessian


def test_no_perturbation_confusion():
    assert mg.grad(lambda x: x * mg.grad(lambda y: x + y)(1.0))(2.0) == 1.0
    # the classic Siskind-Pearlmutter example with forward mode inside reverse
    inner = lambda x: mg.jvp(lambda y: x * y, (1.0,), (1.0,))[1]
    assert mg.grad(lambda x: x * inner(x))(3.0) == 6.0


def test_grad_of_grad():
    f = lambda x: np.sin(x) * x ** 2
    d2 = mg.grad(mg.grad(f))(0.7)
    x = 0.7
    expected = -np.sin(x) * x ** 2 + 4 * x * np.cos(x) + 2 * np.sin(x)
    assert abs(d2 - expected) < 1e-12


def mutating(x):
    buf = mnp.zeros(x.shape)
    buf[:] = x
    buf[1:] = buf[:-1] * x[1:]
    y = np.exp(buf)
    buf.fill(0.0)
    x[0] = 3.0 * x[0] ** 2
    return np.sum(y * x) + np.sum(buf)


X = np.array([0.2, -0.4, 0.6])


@pytest.mark.parametrize("order_modes", [("fwd",), ("rev",), ("fwd", "rev")])
def test_second_order_on_mutating_function(order_modes):
    check_grads(mutating, X, modes=order_modes, order=2)


def test_hessian_matches_finite_differences_of_gradient():
    H = mg.hessian(mutating)(X.copy())
    g = mg.grad(mutating)
    fd = np.stack([numerical_grad(lambda x: g(x)[k], (X,), (0,))[0] for k in range(3)])
    np.testing.assert_allclose(H, fd, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(H, H.T, rtol=1e-10, atol=1e-12)


def test_rev_over_rev_hessian_agrees_with_fwd_over_rev():
    H = mg.hessian(mutating)(X.copy())
    Hr = mg.jacobian(mg.grad(mutating))(X.copy())
    np.testing.assert_allclose(Hr, H, rtol=1e-10, atol=1e-12)


def test_grad_of_jvp():
    def directional(x):
        return mg.jvp(mutating, (x,), (np.array([1.0, 0.5, -1.0]),))[1]

    g = mg.grad(directional)(X.copy())
    H = mg.hessian(mutating)(X.copy())
    np.testing.assert_allclose(g, H @ np.array([1.0, 0.5, -1.0]), rtol=1e-10)


def test_outer_value_written_into_inner_buffer():
    def outer(x):
        def inner(y):
            b = mnp.zeros(2)
            b[0] = x * y
            b[1] = x ** 2
            return np.sum(b * y)

        return mg.grad(inner)(2.0)  # d/dy = 2xy + x^2

    assert abs(mg.grad(outer)(1.5) - (2 * 2.0 + 2 * 1.5)) < 1e-12


def test_inner_value_written_into_outer_buffer_raises():
    def outer(x):
        buf = mnp.zeros(1)

        def inner(y):
            buf[0] = y * x
            return y * 2.0

        return mg.grad(inner)(1.0) + buf[0]

    with pytest.raises(mg.MutationError, match="inner differentiation"):
        mg.grad(outer)(1.0)


def test_third_order():
    f = lambda x: np.exp(2 * x)
    assert abs(mg.grad(mg.grad(mg.grad(f)))(0.3) - 8 * np.exp(0.6)) < 1e-10


def test_hessian_of_a_mutating_function_inside_grad():
    """Forward-mode jacobians restore the arguments between passes; inside an
    outer differentiation that restoring must be traced too (it was not, and
    the outer gradient was silently wrong)."""
    def f(x):
        y = np.sum(x ** 3) + x[0] ** 2 * x[1] + x[0] * x[2] ** 2
        x[0] = x[1] * 5.0  # the argument is overwritten: later passes must start from its value
        return y + np.sum(np.sin(x))

    W = np.arange(1.0, 10.0).reshape(3, 3)

    def outer(x):
        return np.sum(mg.hessian(f)(x) * W)

    x = np.array([0.3, -0.5, 0.8])
    g = mg.grad(outer)(x.copy())
    eps = 1e-5
    fd = np.array([(outer(x + eps * e) - outer(x - eps * e)) / (2 * eps) for e in np.eye(3)])
    np.testing.assert_allclose(g, fd, rtol=1e-6, atol=1e-6)


def test_grad_through_jvp_with_respect_to_a_complex_tangent():
    # the tangent is traced by the outer grad; the primal is complex (was a WriteToPlainArrayError)
    z = np.array([1 + 2j, 0.5 - 1j])

    def h(v):
        return np.sum(np.real(mg.jvp(np.sin, (z,), (v,))[1]))

    v = np.array([1 + 0j, 0.5 + 0.5j])
    np.testing.assert_allclose(mg.grad(h)(v), np.cos(z), rtol=1e-14)  # d Re(cos(z) v) / dv, as JAX
    check_grads(h, v)


# -- an inner differentiation and the outer level's arrays -----------------------
# The inner function reads an array of the outer level (passed as an argument it
# does not differentiate, or closed over), and the outer level's code then writes
# into it; or it writes an inner value into a view of such an array. The first
# must give the derivatives of a plain call; the second raises MutationError.

U = np.array([0.6, -0.8])  # the inner derivative's direction
W = np.array([-0.3, 0.9])  # the outer one's


def read_then_overwrite_view(x, a):
    v = a[0:2]
    y = np.sin(v * x[0])
    a[0] = 5.0  # overwrites what the product's pullback reads
    return np.sum(y) + x[1] * a[1]


def read_then_shift(x, a):
    y = np.sin(a * x[0])
    a[1:] = a[:-1] * 0.5
    return np.sum(y * x[1]) + np.sum(a * x[0])


def read_view_then_write_through_it(x, a):
    v = a.reshape(3, 1)[1:, 0]
    y = np.exp(v * x[1])
    v[...] = 2.0
    return np.sum(y) * x[0] + np.sum(np.cos(a) * x[1])


def inner_derivative(body, mode):
    if mode == "rev":
        return lambda x, a: mg.grad(body)(x, a) @ U
    return lambda x, a: mg.jvp(lambda y: body(y, a), (x,), (U,))[1]


def _fd(f, x, d, h=1e-6):
    return (f(x + h * d) - f(x - h * d)) / (2 * h)


A0 = np.array([0.4, -0.7, 1.1])
X0 = np.array([0.3, -0.5])


@pytest.mark.parametrize("body", [read_then_overwrite_view, read_then_shift, read_view_then_write_through_it])
@pytest.mark.parametrize("inner", ["rev", "fwd"])
@pytest.mark.parametrize("outer", ["rev", "fwd"])
@pytest.mark.parametrize("how", ["argument", "closure"])
def test_inner_level_reads_outer_array_that_outer_code_overwrites(body, inner, outer, how):
    d1 = inner_derivative(body, inner)
    # the outer level's array depends on x, so outer derivatives flow through it too
    if how == "argument":
        def first(x):
            return d1(x, A0 * x[1])
    else:
        def first(x):
            a = A0 * x[1]
            return inner_derivative(lambda y, _: body(y, a), inner)(x, None)
    seen = []

    def outer_fn(x):
        d = first(x)
        seen.append(float(mg.value(d)))
        return d

    # first derivative, at the top level and as the outer level sees it, against FD of a plain call
    want1 = _fd(lambda y: body(y, A0 * X0[1]), X0, U)  # the inner level holds a fixed
    assert abs(first(X0) - want1) < 1e-6
    if outer == "rev":
        got2 = mg.grad(outer_fn)(X0) @ W
    else:
        got2 = mg.jvp(outer_fn, (X0,), (W,))[1]
    assert abs(seen[0] - want1) < 1e-6
    want2 = _fd(first, X0, W, h=1e-5)
    assert abs(got2 - want2) < 1e-5 * max(1.0, abs(want2))


def write_inner_through_slice(x, a):
    v = a[0:1]
    v[0] = x[0]
    return np.sum(np.sin(a)) * x[1]


def write_inner_through_reshape(x, a):
    np.copyto(a.reshape(3, 1)[1:, 0], x * 2.0)
    return np.sum(a * a) + x[0]


def write_inner_by_out(x, a):
    v = a[1:]
    np.sin(x, out=v)
    return np.sum(a) * x[0]


def write_inner_in_place(x, a):
    v = a[:2]
    v += x
    return np.sum(a ** 2)


@pytest.mark.parametrize("body", [write_inner_through_slice, write_inner_through_reshape, write_inner_by_out,
                                  write_inner_in_place])
@pytest.mark.parametrize("inner", ["rev", "fwd"])
@pytest.mark.parametrize("how", ["argument", "closure"])
def test_inner_value_written_into_view_of_outer_array_raises(body, inner, how):
    def outer_fn(x):
        a = A0 * x[1]
        if how == "argument":
            return inner_derivative(body, inner)(x, a)
        return inner_derivative(lambda y, _: body(y, a), inner)(x, None)

    if how == "argument" and inner == "rev":
        # an argument of the inner grad, even one it does not differentiate, is a constant
        # traced array of the inner level: the write is the inner level's, and the outer
        # level sees its side effect as a plain call makes it
        got = mg.grad(outer_fn)(X0) @ W
        want = _fd(outer_fn, X0, W, h=1e-5)
        assert abs(got - want) < 1e-5 * max(1.0, abs(want))
    else:  # a closure (or jvp's closed-over array): a view of memory from outside, raises
        with pytest.raises(mg.MutationError, match=r"test_nested.py.*into a view of an array created outside it"):
            mg.grad(outer_fn)(X0)
    # at the top level the same body is an ordinary mutating function of x (a: an argument)
    g = mg.grad(body)(X0, A0.copy())
    for d in (U, W):
        assert abs(g @ d - _fd(lambda y: body(y, A0.copy()), X0, d)) < 1e-6


def test_inner_argument_that_is_an_outer_array_the_inner_function_names_raises_on_write():
    # as at the top level: the inner function writes its argument p and reads the same memory
    # through its closure name a2, whose read would not carry the inner derivative
    def outer(x):
        a2 = np.zeros_like(x)

        def inner(y, p):
            p[1] = y[0] * 2.0
            return np.sum(a2 * y)

        return mg.grad(inner)(x, a2)[0]

    x = np.array([0.5, 1.5])
    with pytest.raises(mg.AliasingError, match="a2"):
        outer(x)
    with pytest.raises(mg.AliasingError, match="a2"):
        mg.grad(outer)(x)
    with pytest.raises(mg.AliasingError, match="a2"):
        mg.jvp(outer, (x,), (np.ones(2),))

    def reads_only(x):  # reading the alias is fine at every level
        a2 = x * 1.0

        def inner(y, p):
            return np.sum(a2 * y * p)

        return mg.grad(inner)(x, a2)[0]

    check_grads(reads_only, x)


def test_alias_search_through_mutagrad_wrappers_walks_the_users_functions_only():
    from mutagrad import api

    G = np.array([1.0, 2.0, 3.0])

    def h(x):
        x[0] = x[1] * 2.0  # a write through the argument into G's memory
        return np.sum(G * x)  # G read plainly: the write's derivative would be lost

    for d in (mg.grad(h), mg.jacobian(mg.grad(h)), mg.hessian(h)):
        with pytest.raises(mg.AliasingError, match="`G`"):
            d(G)
    # the wrappers' closures hold h, which is searched; the functions of mutagrad's modules that
    # their code names are not (they were: ~200 functions per nested call, most of its cost)
    found, budget = api._search(mg.hessian(h), 1, (), ())
    assert any(a is G for _, a in found)
    assert api.ALIAS_SEARCH_BUDGET - budget.left < 20


def test_primitive_called_by_a_level_with_no_derivative_to_carry_sees_the_outer_levels():
    # jvp of a two-argument hessian: the level of the second argument's direction carries no
    # derivative through digamma's rule, whose partial calls the polygamma primitive, a plain
    # Python function; it was called on the outer level's traced value (a TracerEscapeError)
    scipy_special = pytest.importorskip("scipy.special")

    def f(x, y):
        return np.sum(scipy_special.digamma(x)) + np.sum(y ** 2)

    x, y = np.array([1.3, 2.2]), np.array([0.5])
    dh = mg.jvp(mg.hessian(f, argnums=(0, 1)), (x, y), (np.ones(2), np.ones(1)))[1]
    h = 1e-4  # central differences of the Hessian's diagonal, polygamma(2, x)
    fd = (scipy_special.polygamma(2, x + h) - scipy_special.polygamma(2, x - h)) / (2 * h)
    np.testing.assert_allclose(np.diag(dh[0][0]), fd, rtol=1e-6)
    np.testing.assert_allclose(dh[1][1], [[0.0]])
    np.testing.assert_allclose(dh[0][1], np.zeros((2, 1)))

    @mg.primitive
    def cube(v):
        return np.asarray(v) ** 3  # (plain Python: a traced value would escape)

    @mg.rrule(cube)
    def _cube_rrule(v):
        return cube(v), lambda g: (3 * g * square(v),)

    @mg.frule(cube)
    def _cube_frule(primals, tangents):
        (v,), (t,) = primals, tangents
        return cube(v), 3 * square(v) * t

    @mg.primitive
    def square(v):
        return np.asarray(v) ** 2

    @mg.rrule(square)
    def _square_rrule(v):
        return square(v), lambda g: (2 * g * v,)

    @mg.frule(square)
    def _square_frule(primals, tangents):
        (v,), (t,) = primals, tangents
        return square(v), 2 * v * t

    def k(a, b):
        return np.sum(cube(a)) + np.sum(b ** 2)

    a = np.array([0.7, -1.1])
    dk = mg.jvp(mg.hessian(k, argnums=(0, 1)), (a, y), (np.ones(2), np.ones(1)))[1]
    np.testing.assert_allclose(np.diag(dk[0][0]), [6.0, 6.0])  # d/da of 6a along 1: the third derivative of a^3


def test_inner_argument_written_through_another_reference_raises():
    # the inner grad's argument is an outer traced array; the inner function overwrites it
    # through a list entry after reading it: the inner pullback would read the new values
    # (inner gradient cos(0) for cos(0.3), outer gradient 0 for -sin(0.3)), as the caller's
    # array reached that way is refused at the top level
    t0 = np.array([0.3, 0.2, -0.1])

    def outer(t, how):
        w = t * 1.0
        holder = {"list": [w], "dict": {"w": w}, "out=": {"w": w}}[how]

        def loss(ww):
            y = np.sum(np.sin(ww))
            if how == "list":
                holder[0][0] = 0.0
            elif how == "dict":
                holder["w"][1:] *= 2.0
            else:
                np.exp(holder["w"], out=holder["w"])
            return y

        return np.sum(mg.grad(loss)(w))

    for how in ("list", "dict", "out="):
        with pytest.raises(mg.AliasingError, match="inner differentiation"):
            mg.grad(outer)(t0, how)
        with pytest.raises(mg.AliasingError, match="inner differentiation"):
            mg.jvp(lambda t, how=how: outer(t, how), (t0,), (np.ones(3),))

    def writes_its_argument(t):  # through the argument itself: differentiated, and w writable after
        w = t * 1.0
        store = [w]

        def loss(ww):
            y = np.sum(np.sin(ww))
            ww[0] = 0.0  # after the read: the inner derivative stays cos(t)
            return y + np.sum(ww * ww)

        g = mg.grad(loss)(w)  # cos(t) + 2 * [0, t1, t2]
        store[0][2] = 5.0  # the inner differentiation is over: writable again
        return np.sum(g * g) + np.sum(w)

    def plain(t):
        g = np.cos(t) + 2 * np.array([0.0, t[1], t[2]])
        return np.sum(g * g) + t[1] + 5.0

    np.testing.assert_allclose(writes_its_argument(t0), plain(t0), rtol=1e-14)
    expected = np.array([_fd(plain, t0, e) for e in np.eye(3)])
    np.testing.assert_allclose(mg.grad(writes_its_argument)(t0), expected, rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(mg.jvp(writes_its_argument, (t0,), (np.ones(3),))[1], expected.sum(), rtol=1e-7)


@mg.primitive
def _squared(p):
    return p ** 2


@mg.rrule(_squared)
def _squared_rrule(p):
    d = mg.grad(lambda q: np.sum(q ** 2))(p)  # mutagrad inside the rule: 2p
    return _squared(p), lambda g: (g * d,)


@mg.primitive
def _squared_late(p):
    return p ** 2


@mg.rrule(_squared_late)
def _squared_late_rrule(p):
    return _squared_late(p), lambda g: (g * mg.grad(lambda q: np.sum(q ** 2))(p),)  # inside the pullback


@mg.primitive
def _squared_fwd(p):
    return p ** 2


@mg.frule(_squared_fwd)
def _squared_fwd_frule(primals, tangents):
    (p,), (t,) = primals, tangents
    return _squared_fwd(p), mg.jvp(lambda q: q ** 2, (p,), (t,))[1]  # mutagrad inside the forward rule


@pytest.mark.parametrize("prim", [_squared, _squared_late, _squared_fwd], ids=lambda p: p.__name__)
def test_rules_that_differentiate_inside(prim):
    # a rule runs below its level: mutagrad called in it differentiates its values, and the
    # caller's arrays are writable again afterwards (an inner grad of the argument's writable
    # view left the caller's array read-only; an inner jvp's tangent was the rule's level's own)
    p0 = np.array([1.0, 3.0])
    np.testing.assert_allclose(mg.grad(lambda p: np.sum(prim(p) * p))(p0), 3 * p0 ** 2)
    assert p0.flags.writeable
    p0[0] = 1.0
    np.testing.assert_allclose(mg.jvp(prim, (p0,), (np.ones(2),))[1], 2 * p0)
    for mode in ("rev", "fwd"):
        np.testing.assert_allclose(mg.jacobian(prim, mode=mode)(p0), np.diag(2 * p0))
    np.testing.assert_allclose(mg.hessian(lambda p: np.sum(prim(p) * p))(p0), np.diag(6 * p0))
    assert p0.flags.writeable


def test_a_plain_argument_of_an_inner_grad_written_with_outer_values_names_mnp_array():
    # (the hofuzz tester: the fix said to make "the plain array" in the outer function, which for an
    # argument of the inner call gave nothing to act on)
    def sim(u0, k):
        u = u0.copy()
        u[1:] += k[0] * u[:-1]
        return np.sum(u ** 3)

    x, k = np.array([0.1, 0.5, -0.3]), np.array([0.2])
    want = 6 * (x[1] + k[0] * x[0]) * x[0] ** 2 + 6 * (x[2] + k[0] * x[1]) * x[1] ** 2  # by hand
    # (a copy of an argument the inner grad does not differentiate is a constant of the outer level too
    # now, which can hold its values: the thomas tester's jvp(lambda k: mg.grad(step)(k, u0)))
    assert mg.grad(lambda kk: mg.grad(sim, argnums=1)(x, kk)[0])(k.copy()) == pytest.approx([want], rel=1e-14)
    assert mg.jvp(lambda kk: mg.grad(sim, argnums=1)(x, kk)[0], (k.copy(),), (np.ones(1),))[1] == pytest.approx(
        want, rel=1e-14)

    def into_the_argument(u0, k):  # (the argument's own memory, which the caller keeps: still refused)
        u0[1:] += k[0] * u0[:-1]
        return np.sum(u0 ** 3)

    with pytest.raises(mg.WriteToPlainArrayError, match=r"pass mnp.array\(x\) made in the outer function"):
        mg.grad(lambda kk: mg.grad(into_the_argument, argnums=1)(x.copy(), kk)[0])(k.copy())
    assert mg.grad(lambda kk: mg.grad(sim, argnums=1)(mnp.array(x), kk)[0])(k.copy()) == pytest.approx([want], rel=1e-14)
    np.testing.assert_allclose(mg.hessian(sim, argnums=1)(x, k.copy()), [[want]], rtol=1e-14)


def test_an_inner_loss_logged_into_an_outer_buffer_names_has_aux():
    # (metalearn: the message said only "create the buffer inside the inner function", which does not fit
    # a loss history; returning it as an auxiliary output does). Oracle: central differences of the same
    # loop with the inner gradient written by hand.
    def outer(lr, log_inside):
        hist = np.zeros_like(lr, shape=3)
        w = np.array([1.0, 2.0])
        for t in range(3):
            def L(w):
                out = np.sum((w * lr) ** 2)
                if log_inside:
                    hist[t] = out  # noqa: B023  (called within the iteration)
                return out, out

            g, aux = mg.grad(L, has_aux=True)(w)
            hist[t] = aux
            w = w - 0.1 * g
        return np.sum(w) + np.sum(hist)

    with pytest.raises(mg.MutationError, match=r"has_aux=True"):
        mg.grad(lambda lr: outer(lr, True))(0.5)

    def outer_out(lr):  # (regress35: the out= form, a view of the outer buffer, did not name it)
        hist = np.zeros_like(lr, shape=3)
        w = np.array([1.0, 2.0])
        for t in range(3):
            w = w - 0.1 * mg.grad(lambda w: np.sum((w * lr) ** 2, out=hist[t, ...]))(w)  # noqa: B023
        return np.sum(w) + np.sum(hist)

    with pytest.raises(mg.MutationError, match=r"has_aux=True"):
        mg.grad(outer_out)(0.5)

    def plain(lr):
        hist, w = np.zeros(3), np.array([1.0, 2.0])
        for t in range(3):
            hist[t] = np.sum((w * lr) ** 2)
            w = w - 0.1 * 2 * w * lr ** 2
        return np.sum(w) + np.sum(hist)

    h = 1e-6
    assert mg.grad(lambda lr: outer(lr, False))(0.5) == pytest.approx((plain(0.5 + h) - plain(0.5 - h)) / (2 * h),
                                                                       rel=1e-7)


def test_an_inner_derivative_that_is_zero_takes_writes_as_a_fresh_array():
    # (nestfuzz: an inner derivative exactly zero came back a plain np.zeros, and a write of an outer-traced
    # value into it raised WriteToPlainArrayError "create it with mnp.zeros", where a constant nonzero one
    # took the write). F = x0 * x1**2 whichever inner call made g: dF/dx = [x1**2, 2 x0 x1, 0]
    x = np.array([0.5, 1.0, 2.0])
    want = np.array([x[1] ** 2, 2 * x[0] * x[1], 0.0])
    u = np.array([0.3, -0.2, 0.7])
    inner = {
        "grad": lambda x: mg.grad(lambda z: np.sum(np.sin(x)))(x * 1.0),
        "grad through stop_gradient": lambda x: mg.grad(lambda z: np.sum(mg.stop_gradient(z) * x))(u),
        "jvp with a zero tangent": lambda x: mg.jvp(lambda z: np.sin(z) * x, (u,), (np.zeros(3),))[1],
        "vjp": lambda x: mg.vjp(lambda z: np.sin(x), u)[1](np.ones(3))[0],
        "jacobian rev": lambda x: mg.jacobian(lambda z: np.sin(x), mode="rev")(u)[0],
        "jacobian fwd": lambda x: mg.jacobian(lambda z: np.sin(x), mode="fwd")(u)[0],
        "hessian": lambda x: mg.hessian(lambda z: np.sum(z) + np.sum(x ** 2))(u)[0],
        # (regress44: a scalar's Jacobian in forward mode is a view of its stack)
        "jacobian fwd of a constant": lambda x: mg.jacobian(lambda z: 2.0, mode="fwd")(u),
    }
    for name, make in inner.items():
        def F(x, make=make):
            g = make(x)
            g[0] = x[1] ** 2  # (g is a fresh array: written as a plain call writes it)
            return np.sum(g * x)

        assert F(x.copy()) == x[0] * x[1] ** 2, name
        fd = np.array([(F(x + 1e-6 * e) - F(x - 1e-6 * e)) / 2e-6 for e in np.eye(3)])
        np.testing.assert_allclose(fd, want, rtol=1e-7, atol=1e-9)
        np.testing.assert_allclose(mg.grad(F)(x.copy()), want, rtol=1e-14, err_msg=name)
        np.testing.assert_allclose(mg.jacobian(F, mode="fwd")(x.copy()), want, rtol=1e-14, err_msg=name)
    # at the top level a zero gradient is a plain array, as before
    g = mg.grad(lambda z: np.sum(np.sin(x)))(x)
    assert type(g) is np.ndarray and not np.any(g)


def test_hessian_vector_products_through_copies_of_an_argument_held_fixed():
    # (thomas tester) the documented Hessian-vector product, jvp of grad, of a solver whose state starts as a
    # copy of an initial condition passed but not differentiated: the copy was memory plain to the outer
    # level, and the parameters' values written into it were refused. Oracle: central differences of the plain
    # function's Hessian (tests._oracles.fd_hessian) times v; reverse over reverse beside it
    def step(k, u0):
        u = u0.copy()
        for _ in range(3):
            lap = u[2:] - 2 * u[1:-1] + u[:-2]
            u[1:-1] += 0.2 * k[1:-1] * lap + 0.05 * k[1:-1] ** 2 * u[1:-1]
        return np.sum(u ** 2)

    u0 = np.array([0.0, 1.0, 2.0, 0.5, 0.0])
    k = np.array([0.3, 0.8, 1.1, 0.6, 0.2])
    v = np.array([0.5, -1.0, 0.25, 2.0, 1.0])
    want = fd_hessian(lambda kk: step(kk, u0), k, 1e-4) @ v
    hvp = mg.jvp(lambda kk: mg.grad(step)(kk, u0), (k,), (v,))[1]
    np.testing.assert_allclose(hvp, want, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(mg.jacobian(lambda kk: mg.grad(step)(kk, u0), mode="rev")(k) @ v, want,
                               rtol=1e-6, atol=1e-8)
    assert u0.tolist() == [0.0, 1.0, 2.0, 0.5, 0.0]

    # (transformer tester) a layer norm scaling its normalised data in place, in a one-step meta-gradient whose
    # data is a global: xc = x - mean is computed from the inner call's constant only
    X = np.array([[0.3, -1.2, 0.8], [1.5, 0.1, -0.4]])

    def ln_loss(g, x):
        xc = x - x.mean(-1, keepdims=True)
        xc /= np.sqrt((xc ** 2).mean(-1, keepdims=True) + 1e-5)
        xc *= g
        return np.sum(np.tanh(xc) ** 2)

    def meta(g):
        return ln_loss(g - 0.1 * mg.grad(ln_loss)(g, X), X)

    def meta_plain(g):  # the inner gradient by central differences: an oracle with no mutagrad in it
        h = 1e-5
        inner = np.array([(ln_loss(g + h * e, X) - ln_loss(g - h * e, X)) / (2 * h) for e in np.eye(3)])
        return ln_loss(g - 0.1 * inner, X)

    g0 = np.array([1.0, 0.7, 1.3])
    want = np.array([(meta_plain(g0 + 1e-4 * e) - meta_plain(g0 - 1e-4 * e)) / 2e-4 for e in np.eye(3)])
    np.testing.assert_allclose(mg.grad(meta)(g0), want, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(mg.jvp(meta, (g0,), (np.ones(3),))[1], np.sum(want), rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("make", [
    lambda q: q.copy(), lambda q: q - q.mean(), lambda q: q[[0, 1, 2, 3]], lambda q: q[q > -5], np.sort,
    lambda q: np.roll(q, 1), lambda q: np.repeat(q, 1), lambda q: np.take(q, [3, 2, 1, 0]), np.cumsum,
], ids=["copy", "centred", "fancy", "mask", "sort", "roll", "repeat", "take", "cumsum"])
def test_new_memory_of_an_inner_argument_holds_outer_values(make):
    # (regress61) new arrays the inner function computes from a plain argument alone, by any operation
    # (gathers, np.sort, np.roll's reshaped result), take values the outer differentiation traces: the inner
    # derivative in a is sum(u ** 2), by hand, so the oracle is central differences of plain NumPy code
    U0 = np.array([0.3, -0.7, 1.1, 0.5])

    def inner(a, q, y):
        u = make(q)
        u[1] = y[0] * y[1]
        return a * np.sum(u ** 2)

    def outer(y):
        return mg.grad(inner)(np.array(0.7), U0.copy(), y) * y[0]

    def outer_plain(y):
        u = make(U0.copy())
        u[1] = y[0] * y[1]
        return np.sum(u ** 2) * y[0]

    y0 = np.array([0.8, -1.2])
    want = np.array([(outer_plain(y0 + 1e-6 * e) - outer_plain(y0 - 1e-6 * e)) / 2e-6 for e in np.eye(2)])
    np.testing.assert_allclose(mg.grad(outer)(y0.copy()), want, rtol=1e-7)
    np.testing.assert_allclose(mg.jacobian(outer, mode="fwd")(y0.copy()), want, rtol=1e-7)


def test_a_nested_hessian_of_an_argument_with_a_plain_alias_is_not_a_write():
    # (econometrics) Heckman's two steps: mg.hessian(ll)(b, X) inside mg.grad w.r.t. X, beside a plain view
    # W = X[:, :2] read later; the inner forward jacobian's passes wrote X's own values back between them,
    # which the alias took for a write into the argument (AliasingError). Oracle: central differences of
    # the Hessian's trace written by hand, sum_i 2 |x_i|^2 (1 - 3 t_i^2)(1 - t_i^2), t = tanh(X b)
    rng = np.random.default_rng(0)
    X = rng.standard_normal((6, 3))
    W = X[:, :2]
    b = np.full(3, 0.1)

    def ll(b, X):
        return np.sum(np.tanh(X @ b) ** 2)

    def est(X):
        return np.trace(mg.hessian(ll)(b, X)) + np.sum(W)

    def plain(X):
        t = np.tanh(X @ b)
        return np.sum(2 * np.sum(X ** 2, axis=1) * (1 - 3 * t ** 2) * (1 - t ** 2)) + np.sum(W)

    want = numerical_grad(plain, (X,), (0,))[0]
    np.testing.assert_allclose(mg.grad(est)(X), want, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(mg.grad(lambda X: np.trace(mg.jacobian(mg.grad(ll), mode="fwd")(b, X)) + np.sum(W))(X),
                               want, rtol=1e-6, atol=1e-8)


def test_forward_over_forward_through_abs_at_its_zero_warns():
    # (forward over forward keeps no tape, on which the reverse watches find the abs of a curved function): the
    # Hessian of sum(|x| ** 2) at x = [0, 1] came out [[0, 0], [0, 2]] for 2I silently; now the abs warns there
    def f(x):
        return np.sum(np.abs(x) ** 2)

    x = np.array([0.0, 1.0])
    with pytest.warns(mg.KinkWarning, match=r"np.abs\(x\) at x = 0 \(forward over forward\)"):
        H = mg.jacobian(mg.jacobian(f, mode="fwd"), mode="fwd")(x)
    assert H[0, 0] == 0.0 and H[1, 1] == pytest.approx(2.0)  # (the convention, warned; 2 off the kink)
    with pytest.warns(mg.KinkWarning):
        mg.jvp(lambda y: mg.jvp(f, (y,), (np.array([1.0, 0.0]),))[1], (x,), (np.array([1.0, 0.0]),))
    with warnings.catch_warnings():  # (away from zeros, and at first order: silent and right)
        warnings.simplefilter("error")
        y = np.array([-0.5, 1.5])
        np.testing.assert_allclose(mg.jacobian(mg.jacobian(f, mode="fwd"), mode="fwd")(y), 2 * np.eye(2))
        assert mg.jacobian(lambda z: np.abs(z), mode="fwd")(x)[0, 0] == 0.0


def test_second_derivative_of_a_power_with_a_complex_exponent():
    # (peersuite, autograd's test_complex) the Hessian of np.real(x ** c), c a Python complex: the power's kink
    # watch compared 0 < c and raised a bare TypeError; first derivative right before, now the second too
    c = 0.4 + 1.2j
    x = np.array([1.48, 0.7])
    for f in (lambda x: np.sum(np.real(x ** c)), lambda x: np.sum(np.imag((np.abs(x) + 1.0) ** c))):
        want = fd_hessian(f, x, 1e-4)
        np.testing.assert_allclose(mg.hessian(f)(x), want, rtol=1e-6, atol=1e-7)
        np.testing.assert_allclose(mg.jacobian(mg.grad(f), mode="rev")(x), want, rtol=1e-6, atol=1e-7)


def test_a_hessian_vector_product_of_a_piecewise_linear_function_is_quiet():
    # (peersuite) jvp(grad(f)) of a leaky ReLU: grad's output, partials that comparisons chose, carries no
    # derivative, and a warning told of a bisection's chosen point; its zero is right (as hessian's, which was
    # quiet): central differences of the gradient. A bisection's chosen point itself still warns
    x = np.array([-0.4, 1.3, 0.2])
    f = lambda x: np.sum(np.where(x > 0, x, 0.1 * x))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _, t = mg.jvp(mg.grad(f), (x,), (np.array([1.0, -2.0, 0.5]),))
        h = mg.hessian(f)(x)
    g = mg.grad(f)
    want = np.array([(g(x + 1e-6 * e) - g(x - 1e-6 * e)) / 2e-6 for e in np.eye(3)])
    np.testing.assert_allclose(t, want @ np.array([1.0, -2.0, 0.5]), atol=1e-9)
    np.testing.assert_allclose(h, want, atol=1e-9)

    def root(c):  # (a bisection on plain brackets: its point has the brackets' zero derivative)
        lo, hi = 0.0, 2.0
        for _ in range(60):
            mid = 0.5 * (lo + hi)
            if mid * mid - c > 0:
                hi = mid
            else:
                lo = mid
        return mid

    with pytest.warns(UserWarning, match="bisection"):
        mg.jvp(root, (2.0,), (1.0,))

    def loop(x, w):  # (regress136) an element loop's branches, its gradient taken inside a lambda: 10 comparisons
        s = 0.0
        for i in range(x.shape[0]):
            if x[i] > -0.4:
                s = s + w * x[i]
            else:
                s = s - x[i]
        return s

    x = np.linspace(-1.0, 1.0, 10)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _, t = mg.jvp(lambda xx: mg.grad(loop)(xx, 0.5), (x,), (np.ones(10),))
    np.testing.assert_array_equal(t, np.zeros(10))  # (by hand: the gradient is 0.5 or -1 per element, constant)


def test_jvp_of_jvp_of_an_elementwise_kink_away_from_it_is_quiet():
    # (regress120) np.abs's partial, sign(x), computed under jvp of jvp: its sign test was taken for the user's
    # comparison, and the zero second derivative (right: central differences of sign at 1) warned of a bisection
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        r = mg.jvp(lambda a: mg.jvp(np.abs, (a,), (1.0,))[1], (1.0,), (1.0,))[1]
        W, c = np.array([[1.0, -2.0], [0.5, 1.5]]), np.array([0.3, 0.7])
        f = lambda x: np.sum(np.abs(W @ x) * c)  # noqa: E731
        v = np.array([1.0, 0.5])
        t = mg.jvp(lambda x: mg.jvp(f, (x,), (v,))[1], (np.array([0.4, -0.9]),), (v,))[1]
    assert r == 0.0 and t == 0.0
    x0 = np.array([0.4, -0.9])
    assert (f(x0 + 1e-4 * v) - 2 * f(x0) + f(x0 - 1e-4 * v)) / 1e-8 == pytest.approx(0.0, abs=1e-5)
