"""The checkers themselves must be able to fail: a wrong rule is caught."""
import numpy as np
import pytest

import mutagrad as mg
from mutagrad.testing import check_grads, check_rule


def _prim(rev_scale=1.0, fwd_scale=1.0, with_frule=True):
    @mg.primitive
    def f(x):
        return np.sin(x)

    @mg.rrule(f)
    def _(x):
        return f(x), lambda g: (g * np.cos(x) * rev_scale,)

    if with_frule:
        @mg.frule(f)
        def _(primals, tangents):
            (x,), (t,) = primals, tangents
            return f(x), t * np.cos(x) * fwd_scale

    return f


X = np.array([0.3, -0.8])


def test_correct_rule_passes():
    check_rule(_prim(), X)


def test_wrong_reverse_rule_is_caught():
    with pytest.raises(AssertionError, match="reverse mode"):
        check_rule(_prim(rev_scale=1.01), X)


def test_wrong_forward_rule_is_caught():
    with pytest.raises(AssertionError, match="forward"):
        check_rule(_prim(fwd_scale=0.99), X)


def test_wrong_second_order_is_caught():
    @mg.primitive
    def cube(x):
        return x ** 3

    @mg.rrule(cube)
    def _(x):
        # right value, but written with a detached factor: its own derivative is lost
        return cube(x), lambda g: (g * 3 * mg.stop_gradient(x) ** 2,)

    @mg.frule(cube)
    def _(primals, tangents):
        return cube(primals[0]), tangents[0] * 3 * primals[0] ** 2

    check_grads(cube, X, order=1)
    with pytest.raises(mg.TracerEscapeError, match=r"mg\.stop_gradient\(x\) of a value traced"):
        check_grads(cube, X, order=2)  # (refused where the rule is differentiated again: it dropped the factor's)


def test_a_missing_forward_rule_is_derived_and_a_wrong_reverse_rule_still_caught():
    f = _prim(with_frule=False)
    _, t = mg.jvp(f, (X,), (np.ones(2),))
    np.testing.assert_allclose(t, (np.sin(X + 1e-6) - np.sin(X - 1e-6)) / 2e-6, rtol=1e-8)
    check_rule(f, X, order=2)
    with pytest.raises(AssertionError):  # the derived forward rule carries the reverse rule's error
        check_rule(_prim(rev_scale=1.01, with_frule=False), X)


def test_a_primitive_without_rules_is_a_clear_error():
    @mg.primitive
    def f(x):
        return np.sin(x)

    with pytest.raises(mg.ForwardRuleMissingError, match=r"@mg.rrule\(f\) or @mg.frule\(f\)"):
        mg.jvp(f, (X,), (np.ones(2),))
    with pytest.raises(mg.NoRuleError, match=r"@mg.rrule\(f\) or @mg.frule\(f\)"):
        mg.grad(lambda x: np.sum(f(x)))(X)


def test_wrong_side_effects_are_caught():
    state = {"calls": 0}

    def f(x):
        state["calls"] += 1
        if state["calls"] > 1:  # behaves differently when called again: not a pure program
            x[0] = 1.0
        return x * 2.0

    with pytest.raises(AssertionError):
        check_grads(f, X, final_state=False)


def test_a_wrong_derivative_seen_only_in_the_final_state_is_caught():
    bad = _prim(rev_scale=1.01, fwd_scale=1.01)

    def f(x):
        x[0] = bad(x[1])  # the output does not depend on it: only the argument does
        return 0.0

    with pytest.raises(AssertionError):
        check_grads(f, X)
    check_grads(lambda x: (x.__setitem__(0, _prim()(x[1])), 0.0)[1], X)


def test_check_grads_with_the_same_array_passed_twice():
    # mg.grad gives one partial per argument; the finite differences must move one argument
    # at a time, not both copies of the same array
    x = np.array([0.5, 1.5, -0.3])
    check_grads(lambda a, b: np.sum(a * b ** 2 + np.arctan2(a, b + 3.0)), x, x, argnums=(0, 1), order=2)
    np.testing.assert_allclose(mg.grad(lambda a, b: np.sum(a * b ** 2), argnums=(0, 1))(x, x)[0], x ** 2)


def test_check_grads_allows_for_the_rounding_of_a_badly_scaled_function():
    # |f| ~ 1e18: central differences lose ~1e18 * 1e-16 / 1e-6 to rounding; a wrong
    # derivative of the same function is still caught
    def f(x):
        return 0.001 * (x[0] ** 10 + 50.0 * x[1] ** 2) ** 2

    x = np.array([-7.1, -2.4])
    check_grads(f, x, modes=("rev",))

    @mg.primitive
    def off(x):
        return x ** 10

    @mg.rrule(off)
    def _(x):
        return off(x), lambda g: (g * 10.0 * x ** 9 * 1.001,)

    with pytest.raises(AssertionError):
        check_grads(lambda x: 0.001 * (np.sum(off(x)) ** 2), x, modes=("rev",))


@pytest.mark.parametrize("dtype", [np.float32, np.complex64])
def test_checkers_work_in_single_precision(dtype):
    # the step and the tolerances follow the precision: a right rule passes (it always failed in
    # float32: the step vanished and the modes' agreement was asked to 1e-8), a wrong one fails
    x = np.array([0.3, -0.8, 1.1], dtype=dtype)
    check_rule(np.sin, x, order=2)
    check_grads(lambda a: a ** 2 * np.exp(a), x)
    with pytest.raises(AssertionError):
        check_grads(_prim(rev_scale=1.02), np.array([0.3, -0.8], dtype=np.float32), modes=("rev",))
    with pytest.raises(AssertionError):
        check_grads(_prim(fwd_scale=1.02), np.array([0.3, -0.8], dtype=np.float32), modes=("fwd",))


def test_check_grads_refuses_arguments_that_check_nothing():
    # a typo in modes checked no mode and passed; order 0 or 1.5 ran the first order silently
    f = lambda x: np.sum(x ** 2)
    for kw in ({"modes": ("backward",)}, {"modes": ()}, {"modes": None}, {"order": 0}, {"order": 1.5}, {"order": True},
               {"argnums": ()}, {"argnums": "0"}, {"eps": 1e-20}, {"eps": 0}, {"atol": -1}, {"final_state": "no"}):
        with pytest.raises((ValueError, TypeError), match="check_grads"):
            check_grads(f, np.ones(2), **kw)
    check_grads(f, np.ones(2), modes="rev")  # one mode given as a string


def test_a_rule_that_branches_on_its_cotangent_or_tangent_is_caught():
    # (regress80) a pullback g * d if g[0] > 0 else 1.5 g * d agrees with finite differences at the one cotangent
    # check_grads used, and the derived forward mode transposes it at a point where it took the same branch;
    # so does one that returns a nonzero value for a zero cotangent, and a forward rule branching on t[0]
    d = np.array([1.0, -2.0, 0.5])

    def make(kind):
        @mg.primitive
        def scale(x):
            return x * d

        if kind == "frule":
            @mg.frule(scale)
            def _(primals, tangents):
                (x,), (t,) = primals, tangents
                return scale(x), (t * d if t[0] > 0 else 1.5 * t * d)
        else:
            @mg.rrule(scale)
            def _(x):
                def pullback(g):
                    if kind == "sign":
                        return (g * d if g[0] > 0 else 1.5 * g * d,)
                    if kind == "clip":  # (regress83: a cap that small cotangents never reach)
                        return (np.clip(g, -3.0, 3.0) * d,)
                    return (g * d + (0.1 if not np.any(g) else 0.0),)
                return scale(x), pullback
        return scale

    x = np.array([0.3, -0.7, 1.1])
    for kind, what in (("sign", "not linear in the cotangent"), ("zero", "not linear in the cotangent"),
                       ("clip", "not linear in the cotangent"),
                       ("frule", "not linear in the tangent")):
        with pytest.raises(AssertionError, match=what):
            check_rule(make(kind), x)

    @mg.primitive
    def good(x):
        return x * d

    @mg.rrule(good)
    def _(x):
        return good(x), lambda g: (g * d,)

    check_rule(good, x, order=2)
