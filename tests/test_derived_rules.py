"""A primitive with one rule is differentiated in the other mode through it (mutagrad.derived):
reverse mode transposes a forward rule's tangent map, forward mode a reverse rule's pullback.
Oracles: central differences of the plain function (check_grads), and the same primitive with
both rules."""
import numpy as np
import pytest

import mutagrad as mg
from mutagrad.registry import conj_if_complex
from mutagrad.testing import check_grads


def _sincos(rules):
    """f(x, k) = (sin(k x) * x, cos(x)): two outputs, an integer parameter without a tangent."""
    @mg.primitive
    def f(x, k):
        return np.sin(k * x) * x, np.cos(x)

    if "rev" in rules:
        @mg.rrule(f)
        def _(x, k):
            def pullback(g):
                g0, g1 = g
                return (g0 * (k * np.cos(k * x) * x + np.sin(k * x)) - g1 * np.sin(x), mg.NoTangent())
            return f(x, k), pullback

    if "fwd" in rules:
        @mg.frule(f)
        def _(primals, tangents):
            (x, k), (t, _) = primals, tangents
            return f(x, k), ((k * np.cos(k * x) * x + np.sin(k * x)) * t, -np.sin(x) * t)

    return f


X = np.array([0.3, -0.8, 1.7])


@pytest.mark.parametrize("rules", ["rev", "fwd"])
def test_one_rule_gives_both_modes_to_third_order(rules):
    f = _sincos(rules)

    def program(x):
        y = np.empty_like(x)
        a, b = f(x, 3)
        y[...] = a
        y[1:] += b[:-1] * y[:-1]  # (in place around the primitive)
        return y

    check_grads(program, X, order=2)
    # closed forms: u = x sin(3x) cos(x); g = x sin(2x) and its derivatives
    x = X
    du = (3 * np.cos(3 * x) * x + np.sin(3 * x)) * np.cos(x) - x * np.sin(3 * x) * np.sin(x)
    for mode in ("rev", "fwd"):
        jac = mg.jacobian(lambda v: f(v, 3)[0] * f(v, 2)[1], mode=mode)(X)
        np.testing.assert_allclose(jac, np.diag(du), rtol=1e-12, atol=1e-15)
    g = x * np.sin(2 * x)
    g1 = np.sin(2 * x) + 2 * x * np.cos(2 * x)
    g2 = 4 * np.cos(2 * x) - 4 * x * np.sin(2 * x)
    g3 = -12 * np.sin(2 * x) - 8 * x * np.cos(2 * x)
    third = mg.jvp(mg.hessian(lambda v: np.sum(f(v, 2)[0])), (X,), (np.ones(3),))[1]
    np.testing.assert_allclose(third, np.diag(g3), rtol=1e-12, atol=1e-14)
    gg = mg.grad(lambda v: np.sum(mg.grad(lambda w: np.sum(f(w, 2)[0] ** 2))(v) ** 2))(X)
    np.testing.assert_allclose(gg, 8 * g * g1 * (g1 ** 2 + g * g2), rtol=1e-12)


def _cube(rules):
    """z^3 conj(z), not holomorphic: the derived rules follow the conjugate conventions."""
    @mg.primitive
    def c(z):
        return z ** 3 * np.conj(z)

    if "rev" in rules:
        @mg.rrule(c)
        def _(z):
            return c(z), lambda g: (conj_if_complex(3 * z ** 2 * np.conj(z)) * g + z ** 3 * np.conj(g),)

    if "fwd" in rules:
        @mg.frule(c)
        def _(primals, tangents):
            (z,), (t,) = primals, tangents
            return c(z), 3 * z ** 2 * np.conj(z) * t + z ** 3 * np.conj(t)

    return c


@pytest.mark.parametrize("rules", ["rev", "fwd"])
def test_complex_arguments(rules):
    c = _cube(rules)
    z = np.array([0.5 + 0.3j, -1.2 + 0.7j])
    check_grads(c, z, order=2)
    check_grads(lambda x: np.real(c(x + 0.5j)), np.array([0.4, -0.9]), order=2)  # real in, complex inside


def test_a_rule_the_derivation_cannot_differentiate_raises_the_missing_rules_error():
    @mg.primitive
    def f(x):
        return np.sin(x)

    @mg.frule(f)
    def _(primals, tangents):
        (x,), (t,) = primals, tangents
        out = np.empty(np.shape(x))  # a plain buffer: fine for plain tangents only
        out[...] = np.cos(x) * t
        return f(x), out

    np.testing.assert_allclose(mg.jvp(f, (X,), (np.ones(3),))[1], np.cos(X))
    with pytest.raises(mg.NoRuleError, match=r"no reverse rule.*plain NumPy array.*@mg.rrule\(f\)"):
        mg.grad(lambda x: np.sum(f(x)))(X)


def test_a_rules_own_error_is_raised_as_it_is():
    @mg.primitive
    def f(x):
        return np.sin(x)

    @mg.rrule(f)
    def _(x):
        def pullback(g):
            if np.ndim(g) > 0 and np.shape(g) != np.shape(x):
                raise ValueError("bad cotangent shape")
            raise KeyError("the rule's own bug")
        return f(x), pullback

    with pytest.raises(KeyError, match="own bug"):
        mg.jvp(f, (X,), (np.ones(3),))


def test_a_not_implemented_derivative_stays_its_arguments():
    # the derived rule transposes one argument at a time: a NotImplementedTangent for the scale
    # does not poison the derivative w.r.t. x
    @mg.primitive
    def f(x, a):
        return np.sin(x) * a

    @mg.frule(f)
    def _(primals, tangents):
        (x, a), (tx, ta) = primals, tangents
        nit = mg.not_implemented("no derivative in a") if not mg.tangents.is_zero(ta) else 0.0
        return f(x, a), np.cos(x) * a * tx + nit

    @mg.primitive
    def h(x, a):
        return np.sin(x) * a

    @mg.rrule(h)
    def _(x, a):
        return h(x, a), lambda g: (g * np.cos(x) * a, mg.not_implemented("no derivative in a"))

    fd = (np.sin(X + 1e-6) - np.sin(X - 1e-6)) / 2e-6 * 2.0
    np.testing.assert_allclose(mg.grad(lambda x: np.sum(f(x, 2.0)))(X), fd, rtol=1e-8)
    np.testing.assert_allclose(mg.jvp(lambda x: h(x, 2.0), (X,), (np.ones(3),))[1], fd, rtol=1e-8)
    assert isinstance(mg.grad(lambda a: np.sum(f(X, a)))(2.0), mg.NotImplementedTangent)
    assert isinstance(mg.jvp(lambda a: h(X, a), (2.0,), (1.0,))[1], mg.NotImplementedTangent)
    with mg.config(strict=True), pytest.raises(mg.NotImplementedTangentError, match="no derivative in a"):
        mg.grad(lambda a: np.sum(f(X, a)))(2.0)


def test_list_arguments_rules_that_need_arrays_and_self_application():
    # a list argument's derivative was silently zero in the derived mode; a forward rule calling
    # np.sum on a symbolic zero, and a scalar one adding it, crashed; a forward rule applying its
    # own primitive to the tangent recursed
    @mg.primitive
    def lsum(xs, c):
        return xs[0] * xs[1] + c

    @mg.rrule(lsum)
    def _(xs, c):
        return lsum(xs, c), lambda g: ([g * xs[1], g * xs[0]], np.sum(g))

    @mg.primitive
    def lsum2(xs, c):
        return xs[0] * xs[1] + c

    @mg.frule(lsum2)
    def _(primals, tangents):
        (xs, c), (xd, cd) = primals, tangents
        yd = 0.0 * xs[0]
        if not mg.tangents.is_zero(xd):
            yd = yd + xd[0] * xs[1] + xs[0] * xd[1]
        return lsum2(xs, c), yd + (0.0 if mg.tangents.is_zero(cd) else cd)

    a, b = np.array([2.0, -0.5]), np.array([3.0, 1.5])
    for p in (lsum, lsum2):
        check_grads(lambda u, v, p=p: p([u, v], 1.0), a, b, order=2)

    @mg.primitive
    def q(x, s):
        return np.sum(x) * s

    @mg.frule(q)
    def _(primals, tangents):
        (x, s), (xd, sd) = primals, tangents
        return q(x, s), np.sum(xd) * s + np.sum(x) * sd

    check_grads(q, X, 0.8)

    @mg.primitive
    def solve(A, v):
        return np.linalg.solve(A, v)

    @mg.frule(solve)
    def _(primals, tangents):
        (A, v), (Ad, vd) = primals, tangents
        y = solve(A, v)
        return y, solve(A, vd - Ad @ y)

    A = np.array([[3.0, 1.0], [0.5, 2.0]])
    np.testing.assert_allclose(mg.jvp(lambda v: solve(A, v), (np.ones(2),), (np.array([1.0, 0.0]),))[1],
                               np.linalg.solve(A, [1.0, 0.0]))
    with pytest.raises(mg.NoRuleError, match=r"applies .*solve itself to a tangent.*@mg.rrule\(solve\)"):
        mg.grad(lambda v: np.sum(solve(A, v)))(np.ones(2))


def test_a_primitive_returning_its_argument_is_differentiated_by_its_rule():
    # the output was the input's memory, taken for a view of it: the rule's cotangents were dropped
    # and the input's own derivative (1) came back, silently ([1, 1, 1] and [0, 0, 0] here)
    @mg.primitive
    def first(a, b):
        return a

    @mg.rrule(first)
    def _(a, b):
        return first(a, b), lambda g: (0.0 * g, 7.0 * g)  # (a planted rule: derivative 7 w.r.t. b only)

    x = np.arange(3.0)
    ga, gb = mg.grad(lambda a, b: np.sum(first(a, b)), argnums=(0, 1))(x, x + 1.0)
    np.testing.assert_array_equal(ga, [0.0, 0.0, 0.0])
    np.testing.assert_array_equal(gb, [7.0, 7.0, 7.0])
    _, t = mg.jvp(lambda a, b: first(a, b), (x, x + 1.0), (np.ones(3), np.ones(3)))
    np.testing.assert_array_equal(t, [7.0, 7.0, 7.0])  # (the forward rule derived from the reverse one)
    assert first(x, x) is x  # (a plain call is the function's own)
