"""Clear errors where mutagrad had given a silently wrong number.

Malformed user rules, a primitive whose rule closes over a traced value,
writes through an integer view of a traced array, a view that reinterprets
bits at another precision, and digits of a traced value formatted as text.
Each error names the operation and the user's line; the cases that stay
allowed are checked against central differences.
"""
import numpy as np
import pytest

import mutagrad as mg

HERE = "test_rule_and_view_errors.py:"


def _fresh_mul(pullback):
    @mg.primitive
    def mul(x, y):
        return x * y

    @mg.rrule(mul)
    def _(x, y):
        return mul(x, y), lambda g: pullback(g, x, y)

    return mul


@pytest.mark.parametrize("pullback, match", [
    (lambda g, x, y: (g * y, None), "returned None for argument 1"),
    (lambda g, x, y: None, "forget `return`"),
    (lambda g, x, y: (g * y,), "1 cotangents for 2"),
    (lambda g, x, y: (np.full((3, 3), g) * y, g * x), r"shape \(3, 3\) for argument 0 of shape \(3,\)"),
], ids=["none-cotangent", "no-return", "too-few", "misshapen"])
def test_malformed_pullback_raises(pullback, match):
    mul = _fresh_mul(pullback)
    with pytest.raises(mg.RuleError, match=match):
        mg.grad(lambda x: np.sum(mul(x, 2.0 * x)))(np.ones(3))


def test_malformed_forward_rule_raises():
    @mg.primitive
    def triple(x):
        return x * 3.0

    @mg.frule(triple)
    def _(primals, tangents):
        return triple(primals[0]), None

    with pytest.raises(mg.RuleError, match="None as the tangent"):
        mg.jvp(triple, (2.0,), (1.0,))


def test_a_wellformed_rule_still_works():
    mul = _fresh_mul(lambda g, x, y: (g * y, g * x))
    f = lambda x: np.sum(mul(x, np.sin(x)))
    x = np.array([0.3, 1.1])
    h = 1e-6
    ref = [(f(x + h * e) - f(x - h * e)) / (2 * h) for e in np.eye(2)]
    np.testing.assert_allclose(mg.grad(f)(x), ref, rtol=1e-7)


@pytest.mark.parametrize("mode", ["rev", "fwd"])
def test_rule_closing_over_a_traced_value_raises(mode):
    def f(x):
        a = x[0] * 2.0

        @mg.primitive
        def g(y):
            return y * a

        @mg.rrule(g)
        def _(y):
            return g(y), lambda gb: (gb * a,)

        @mg.frule(g)
        def _(primals, tangents):
            return g(primals[0]), tangents[0] * a

        return g(x[1])

    x = np.array([0.6, 1.3])
    with pytest.raises(mg.RuleError, match=HERE + r"\d+.*closes over|closes over.*" + HERE):
        if mode == "rev":
            mg.grad(f)(x)
        else:
            mg.jvp(f, (x,), (np.ones(2),))


@pytest.mark.parametrize("bits_back", [
    lambda x: x.view(np.int64).view(np.float64),  # the same bits: still no derivative through bits
    lambda x: (x.view(np.int64) & 0x7FFFFFFFFFFFFFFF).view(np.float64),  # |x| by the sign bit
    lambda x: x.view(np.uint8).copy().view(float),
    lambda x: np.array(x.view(np.int64)).view(np.float64),  # (a plain copy: no way to follow it)
    lambda x: x.view(np.int64) / 2.0 ** 52 - 1023.0,  # fast log2 from the bits
    lambda x: (0x5FE6EB50C7B537A9 - (x.view(np.int64) >> 1)).view(np.float64),  # fast 1/sqrt
    lambda x: x * (x[0].view(np.int64) > 0),  # a sign test on a scalar's bits
], ids=["same", "mask", "uint8 copy", "np.array copy", "fast log2", "inverse sqrt", "scalar sign"])
def test_bits_of_a_traced_array_raise(bits_back):
    # floats made from them again were a plain array: the derivative was silently zero
    # (finite differences: 2x); a write through the bits changed x unseen
    x = np.array([0.7, 1.3, 2.1])
    with pytest.raises(mg.NoRuleError, match=HERE + r"\d+.*bit manipulation has no derivative.*signbit"):
        mg.grad(lambda v: np.sum(bits_back(v) ** 2))(x)
    with pytest.raises(mg.NoRuleError, match="bit manipulation"):
        mg.jvp(lambda v: np.sum(bits_back(v) ** 2), (x,), (np.ones(3),))
    # bits of a constant (an argument not differentiated), and of mg.value(x), are plain
    g = mg.grad(lambda v, c: np.sum(v * bits_back(c)), argnums=0)(x, x.copy())
    np.testing.assert_array_equal(g, bits_back(x.copy()))
    g = mg.grad(lambda v: np.sum(v * bits_back(mg.value(v))))(x.copy())
    np.testing.assert_array_equal(g, bits_back(x.copy()))


def test_sign_tests_without_bits():
    def reads(x):  # the advice: np.signbit, comparisons
        return np.sum(x * ~np.signbit(x)) + np.sum(x * (x > 0))

    np.testing.assert_array_equal(mg.grad(reads)(np.array([1.0, -2.0])), [2.0, 0.0])


def test_view_at_another_precision_raises_and_complex_views_are_linear():
    with pytest.raises(mg.NoRuleError, match=r"view\(float32\).*" + HERE):
        mg.grad(lambda x: np.sum(x.view(np.float32)).astype(float))(np.ones(2))
    w = np.array([1.0, 2.0, 3.0, 4.0])
    c = np.array([1 + 1j, 2 - 1j])
    f = lambda x: np.real(np.sum(x.view(np.complex128) * c * x.view(np.complex128)))
    h = 1e-6
    ref = [(f(w + h * e) - f(w - h * e)) / (2 * h) for e in np.eye(4)]
    np.testing.assert_allclose(mg.grad(f)(w.copy()), ref, rtol=1e-7)
    np.testing.assert_allclose([mg.jvp(f, (w.copy(),), (e,))[1] for e in np.eye(4)], ref, rtol=1e-7)


def test_formatting_digits_of_a_traced_value_raises():
    def f(x):
        s = f"{x[0]:.17g}"
        return float(s) * x[1]

    with pytest.raises(mg.TracerEscapeError, match=HERE + r"\d+.*mg.value"):
        mg.grad(f)(np.array([0.5, 1.5]))

    def logs(x):  # formatting the plain value, as the message says (repr: the tracer's own text)
        text = f"{mg.value(x[0]):.3f} {x!r}"
        assert text.startswith("0.500 Tracer(")
        return np.sum(x * x)

    np.testing.assert_allclose(mg.grad(logs)(np.array([0.5, 1.5])), [1.0, 3.0])


def test_api_misuse_is_reported():
    x = np.array([0.5, 1.5, 2.5])
    with pytest.raises(TypeError, match="primals must be a tuple"):
        mg.jvp(lambda x: x ** 2, x, np.ones(3))
    for mode in ("rev", "fwd"):
        with pytest.raises(TypeError, match=r"jacobian: output\[1\] is a str"):  # (named by its path)
            mg.jacobian(lambda x: (x ** 2, "s"), mode=mode)(x)
    with pytest.raises(TypeError, match="nothing to check"):
        mg.testing.check_grads(lambda n: n * 2.0, 3)
    # (regress122) a cotangent or tangent of another shape names the caller's line, as other errors do
    _, pb = mg.vjp(lambda x: np.outer(x, x), x)
    with pytest.raises(ValueError, match=r"cotangent shape \(3,\) does not match output shape \(3, 3\), the "
                       r"pullback called at .*test_rule_and_view_errors.py"):
        pb(np.ones(3))
    with pytest.raises(ValueError, match=r"tangent shape \(2,\) does not match primal shape \(3,\) \(argument 0\) "
                       r"at .*test_rule_and_view_errors.py"):
        mg.jvp(np.sin, (x,), (np.ones(2),))


def test_plain_write_through_an_aliased_name_names_the_call():
    buf = np.array([1.0, 2.0])

    def f(x):
        y = x * x  # the pullback reads x (= buf)
        buf[0] = 100.0  # plain code changes it behind mutagrad's back
        return np.sum(y)

    with pytest.raises(mg.MutationError, match=HERE + r"\d+"):
        mg.grad(f)(buf)


def test_rule_for_a_plain_python_function_is_refused():
    def clipped(x):
        return np.minimum(x, 0.1)

    with pytest.raises(TypeError, match="@mg.primitive"):
        mg.rrule(clipped)
    with pytest.raises(TypeError, match="expected the function"):
        mg.rrule(3)
    # NumPy callables and primitives take rules
    assert callable(mg.frule(np.sinc)) and callable(mg.rrule(mg.primitive(clipped)))


def test_misshapen_forward_tangent_raises():
    @mg.primitive
    def double(x):
        return 2.0 * x

    @mg.frule(double)
    def _(primals, tangents):
        return double(primals[0]), np.full((3, 3), 2.0) * tangents[0]

    with pytest.raises(mg.RuleError, match=r"shape \(3, 3\) for an output of shape \(3,\)"):
        mg.jvp(double, (np.ones(3),), (np.ones(3),))


def test_primitive_with_a_traced_keyword_or_structured_argument_raises():
    # its rules take traced values positionally; one in a keyword argument or a dict would have
    # reached its body, traced as if it were no primitive (a silently wrong [0, 0] here)
    @mg.primitive
    def ste(x):
        return np.round(x)

    @mg.rrule(ste)
    def _(x):
        return ste(x), lambda yb: (yb,)

    x = np.array([0.4, 1.6])
    np.testing.assert_array_equal(mg.grad(lambda v: np.sum(ste(v)))(x), [1.0, 1.0])  # straight-through
    np.testing.assert_array_equal(mg.grad(lambda v: np.sum(ste(*[v])))(x), [1.0, 1.0])
    for call in (lambda v: ste(x=v), lambda v: ste({"x": v}["x"] * 1.0) + ste(x=v)):
        with pytest.raises(TypeError, match=r"primitive .*ste at .*test_rule_and_view_errors.py.*positional"):
            mg.grad(lambda v, c=call: np.sum(c(v)))(x)

    @mg.primitive
    def ste_d(d):
        return np.round(d["x"])

    with pytest.raises(TypeError, match="inside a dict"):
        mg.jvp(lambda v: ste_d({"x": v}), (x,), (np.ones(2),))
    np.testing.assert_array_equal(ste(x=x), [0.0, 2.0])  # plain calls as before


def test_primitive_with_a_traced_value_in_an_object_or_closure_raises():
    # the same silent [0, 0] as above when the traced value hides in an object's attributes,
    # __slots__, a function's closure or defaults, a functools.partial or a bound method
    import functools

    class Box:
        def __init__(self, w):
            self.w = w

        def value(self):
            return self.w

    class Slotted:
        __slots__ = ("w",)

        def __init__(self, w):
            self.w = w

    @mg.primitive
    def ste_obj(o):
        return np.round(o.w)

    @mg.primitive
    def ste_fn(fn):
        return np.round(fn())

    for prim in (ste_obj, ste_fn):
        mg.rrule(prim)(lambda o, p=prim: (p(o), lambda yb: (yb,)))

    x = np.array([0.4, 1.6])
    calls = [lambda v: ste_obj(Box(v * 2.0)), lambda v: ste_obj(Slotted(v)),
             lambda v: ste_fn(functools.partial(lambda b: b.w, Box(v))), lambda v: ste_fn(lambda: v * 2.0),
             lambda v: ste_fn(lambda w=v: w), lambda v: ste_fn(functools.partial(np.multiply, v, 2.0)),
             lambda v: ste_fn(Box(v).value)]
    for call in calls:
        with pytest.raises(TypeError, match=r"primitive .*ste_.* at .*test_rule_and_view_errors.py.*"
                                            r"object's attributes or in a function's closure"):
            mg.grad(lambda v, c=call: np.sum(c(v)))(x)
    with pytest.raises(TypeError, match="closure"):
        mg.jvp(lambda v: ste_fn(lambda: v), (x,), (np.ones(2),))

    # an object holding only plain values passes, and the rule is used: the cube's derivative
    # against central differences of the plain function
    @mg.primitive
    def scaled_cube(x, o):
        return o.w * x ** 3

    mg.rrule(scaled_cube)(lambda x, o: (scaled_cube(x, o), lambda yb: (3.0 * o.w * x ** 2 * yb, mg.NoTangent())))
    box = Box(np.array([2.0, -1.0]))
    g = mg.grad(lambda v: np.sum(scaled_cube(v, box)))(x)
    h = 1e-6
    fd = [(np.sum(box.w * (x + h * e) ** 3) - np.sum(box.w * (x - h * e) ** 3)) / (2 * h) for e in np.eye(2)]
    np.testing.assert_allclose(g, fd, rtol=1e-7)


def test_primitive_writing_into_its_argument_raises():
    @mg.primitive
    def double_inplace(x):
        x *= 2.0
        return np.sum(x)

    @mg.rrule(double_inplace)
    def _(x):
        return double_inplace(x), lambda yb: (2.0 * yb * np.ones_like(x),)

    def f(x):
        return double_inplace(x) + np.sum(x ** 2)

    with pytest.raises(mg.MutationError, match=r"double_inplace (called )?at .*wrote into an array passed to it"):
        mg.grad(f)(np.array([0.2, -0.5, 1.0]))


@mg.primitive
def _with_reversed(x):
    y = np.exp(x)
    return y, y[::-1]  # (the second output is a view of the first)


@mg.rrule(_with_reversed)
def _with_reversed_rrule(x):
    y, r = _with_reversed(x)
    return (y, r), lambda cts: ((cts[0] + cts[1][::-1]) * y,)


@mg.frule(_with_reversed)
def _with_reversed_frule(primals, tangents):
    y, r = _with_reversed(*primals)
    t = tangents[0] * y
    return (y, r), (t, t[::-1])


@mg.primitive
def _split_pair(x):
    return np.exp(x), np.sin(x)[::-1]


@mg.rrule(_split_pair)
def _split_pair_rrule(x):
    return _split_pair(x), lambda cts: (cts[0] * np.exp(x) + cts[1][::-1] * np.cos(x),)


def test_primitive_outputs_that_share_memory_raise():
    # (customrules) a write through one output changed the other's value, not its derivative: grad gave
    # [19.99, 2.24, 7.38] for FD's [34.99, 2.24, 0], silently; now a RuleError in both modes
    def f(x):
        y, r = _with_reversed(x)
        r[0] = 5.0 * x[0]
        return np.sum(y * np.array([1.0, 2.0, 3.0])) + np.sum(r ** 2)

    x0 = np.array([0.3, -0.4, 0.9])
    with pytest.raises(mg.RuleError, match=r"_with_reversed returned outputs 0 and 1 that share memory.*np.copy"):
        mg.grad(f)(x0.copy())
    with pytest.raises(mg.RuleError, match=r"share memory"):
        mg.jvp(f, (x0.copy(),), (np.ones(3),))

    def g(x):  # (two outputs of their own: as before, against central differences)
        a, b = _split_pair(x)
        b[0] = b[0] * x[1]
        return np.sum(a * b)

    want = [(g(x0 + 1e-6 * e) - g(x0 - 1e-6 * e)) / 2e-6 for e in np.eye(3)]
    np.testing.assert_allclose(mg.grad(g)(x0.copy()), want, rtol=1e-6)


def _energy(a):
    a[0] = a[0] * a[1]  # writes into its argument
    return np.sum(a ** 2)


@mg.primitive
def _energy_of_copy(x):
    return _energy(x.copy())


@mg.rrule(_energy_of_copy)
def _energy_of_copy_rrule(x):
    return _energy_of_copy(x), lambda yb: (yb * mg.grad(_energy)(x),)  # the inner grad writes into x


@mg.primitive
def _twice(x):
    return 2.0 * x


@mg.rrule(_twice)
def _twice_rrule(x):
    def pullback(g):
        g *= 2.0  # modifies ȳ in place
        return (g,)

    return _twice(x), pullback


def test_pullback_modifying_its_argument_or_cotangent_raises():
    # the argument: the gradient was [0.545, 1.591, 22.05] for [1.098, 1.591, 22.05], and the
    # caller's array was left changed. ȳ: it may be another value's adjoint buffer too
    x0 = np.array([0.4, -0.7, 1.2])
    for call in (lambda x: mg.grad(lambda z: _energy_of_copy(np.exp(z)))(x), lambda x: mg.grad(_energy_of_copy)(x)):
        x = x0.copy()
        with pytest.raises(mg.RuleError, match="changed its argument 0"):
            call(x)
        np.testing.assert_array_equal(x, x0)
        assert x.flags.writeable
    with pytest.raises(mg.RuleError, match="read-only"):
        mg.grad(lambda x: np.sum(_twice(x + x) * x))(x0.copy())


def test_alias_error_names_the_write_not_the_except_clause():
    x = np.ones(3)
    ref = [x]

    def f(a):
        try:
            ref[0][0] = 5.0
        except KeyError:
            pass
        return np.sum(a)

    with pytest.raises(mg.AliasingError, match=r"`ref\[0\]\[0\] = 5.0`"):
        mg.grad(f)(x)


def test_zero_tangent_in_a_rules_linear_arithmetic():
    # a rule gets ZeroTangent() for an argument with no tangent: the documented polar frule
    # subtracts and divides with it
    @mg.primitive
    def polar(x, y):
        return np.hypot(x, y), np.arctan2(y, x)

    @mg.frule(polar)
    def _(primals, tangents):
        (x, y), (xd, yd) = primals, tangents
        r, phi = polar(x, y)
        return (r, phi), ((x * xd + y * yd) / r, (x * yd - y * xd) / r ** 2)

    _, t = mg.jvp(lambda x: polar(x, 1.0)[1], (2.0,), (1.0,))
    assert abs(t - (np.arctan2(1.0, 2.0 + 1e-6) - np.arctan2(1.0, 2.0 - 1e-6)) / 2e-6) < 1e-8
    z, a = mg.ZeroTangent(), np.array([1.0, 2.0])
    assert z - 1.0 == -1.0 and 1.0 - z == 1.0 and (z / 2.0) is z and (a @ z) is z and (a * z) is z
    np.testing.assert_array_equal(a - z, a)
    assert z.T is z and z.conj() is z


def test_not_implemented_for_one_argument_in_forward_mode():
    # an frule's not_implemented(...) times the other argument's zero tangent is zero: the
    # missing derivative is not asked for (reverse mode already gave the number)
    @mg.primitive
    def power(x, n):
        return x ** n

    @mg.rrule(power)
    def _(x, n):
        return power(x, n), lambda g: (g * n * x ** (n - 1), mg.not_implemented("d/dn"))

    @mg.frule(power)
    def _(primals, tangents):
        (x, n), (xd, nd) = primals, tangents
        return power(x, n), n * x ** (n - 1) * xd + mg.not_implemented("d/dn") * nd

    assert mg.jvp(lambda x: power(x, 3.0), (2.0,), (1.0,))[1] == 12.0 == mg.grad(lambda x: power(x, 3.0))(2.0)
    t = mg.jvp(lambda n: power(2.0, n), (3.0,), (1.0,))[1]
    assert isinstance(t, mg.NotImplementedTangent)  # asked for: still poisoned


def _fd(f, x, h=1e-6):
    return np.array([(f(x + h * e) - f(x - h * e)) / (2 * h) for e in np.eye(x.size)])


@mg.primitive
def _sincos_dict(x):
    return {"s": np.sin(x), "c": np.cos(x)}


@mg.rrule(_sincos_dict)
def _(x):
    return _sincos_dict(x), lambda ct: (ct["s"] * np.cos(x) - ct["c"] * np.sin(x),)


@mg.frule(_sincos_dict)
def _(p, t):
    return _sincos_dict(p[0]), {"c": -np.sin(p[0]) * t[0], "s": np.cos(p[0]) * t[0]}  # (keys in another order)


@mg.primitive
def _nested(x):
    return np.sin(x), ({"c": np.cos(x)}, [x * 2.0])


@mg.rrule(_nested)
def _(x):
    return _nested(x), lambda ct: (ct[0] * np.cos(x) - ct[1][0]["c"] * np.sin(x) + 2.0 * ct[1][1][0],)


@mg.frule(_nested)
def _(p, t):
    x, dx = p[0], t[0]
    return _nested(x), (np.cos(x) * dx, ({"c": -np.sin(x) * dx}, [2.0 * dx]))


def test_primitive_outputs_in_dicts_and_nested_containers():
    # each output leaf carries its derivative (a dict output got zero derivatives, silently)
    x = np.array([0.1, 0.5, 1.0])
    for f in (lambda v: np.sum(_sincos_dict(v)["s"] * 2.0 + _sincos_dict(v)["c"] ** 2),
              lambda v: np.sum(_nested(v)[0] + _nested(v)[1][0]["c"] ** 2 + _nested(v)[1][1][0] ** 3)):
        fd = _fd(f, x)
        np.testing.assert_allclose(mg.grad(f)(x), fd, rtol=1e-7)
        np.testing.assert_allclose(mg.jvp(f, (x,), (np.ones(3),))[1], np.sum(fd), rtol=1e-7)
        np.testing.assert_allclose(mg.jacobian(f, mode="fwd")(x), fd, rtol=1e-7)
        np.testing.assert_allclose(mg.hessian(f)(x), _fd(mg.grad(f), x).T, rtol=1e-5, atol=1e-8)
    out = _nested(x)
    assert type(out[1][0]) is dict and type(out[1][1]) is list


def test_malformed_structures_of_a_rule_raise():
    @mg.primitive
    def q(xs):
        return xs[0] * 2.0 + xs[1]

    @mg.rrule(q)
    def _(xs):
        return q(xs), lambda g: (np.stack([2.0 * g, g]),)  # one array for a list of two traced values

    with pytest.raises(mg.RuleError, match="list or tuple argument holding traced values"):
        mg.grad(lambda x: np.sum(q([x, x ** 2])))(np.array([0.3, 1.1]))

    @mg.rrule(q)
    def _(xs):
        return q(xs), lambda g: ([2.0 * g],)  # one cotangent for two elements

    with pytest.raises(mg.RuleError, match="1 cotangents for an argument of 2 elements"):
        mg.grad(lambda x: np.sum(q([x, x ** 2])))(np.array([0.3, 1.1]))

    @mg.primitive
    def two(x):
        return x * 2.0, x * 3.0

    @mg.frule(two)
    def _(p, t):
        return two(p[0]), (2.0 * t[0],)  # one tangent for two outputs (the primal was truncated)

    with pytest.raises(mg.RuleError, match="1 items where the structure has 2"):
        mg.jvp(lambda x: two(x)[0] + two(x)[1], (np.ones(3),), (np.ones(3),))


@pytest.mark.parametrize("x", [np.float32(2.0), np.array(2.0, np.float32), np.float16(2.0), 2.0])
def test_second_derivatives_of_scalars_keep_their_type(x):
    # the gradient of an outer level's traced np.float32 is an np.float32 (it became a Python float)
    def f(v):
        return v * v * v

    h = mg.hessian(f)(x)
    assert np.result_type(h) == np.result_type(x) and h == 6.0 * x
    g2 = mg.grad(mg.grad(f))(x)
    assert type(g2) is type(x) and g2 == 6.0 * x


def test_complex_tangent_for_a_real_output_raises():
    @mg.primitive
    def dbl(x):
        return 2.0 * x

    @mg.frule(dbl)
    def _(p, t):
        return dbl(p[0]), (2.0 + 1.0j) * t[0]  # (its imaginary part was dropped silently)

    with pytest.raises(mg.RuleError, match="complex tangent for a real output"):
        mg.jvp(dbl, (np.ones(3),), (np.ones(3),))


def test_complex_or_integer_cotangents_and_integer_tangents_of_users_rules_raise():
    # a complex cotangent for a real argument kept its real part (the gradient came back 0 for a
    # purely imaginary one); integer (co)tangents were truncated
    @mg.primitive
    def w(x, y):
        return x * y

    @mg.rrule(w)
    def _(x, y):
        return w(x, y), lambda g: (g * y, 1j * g * x)

    with pytest.raises(mg.RuleError, match="complex cotangent for argument 1, which is real"):
        mg.grad(lambda y: np.sum(w(np.ones(3), y)))(np.ones(3))

    @mg.primitive
    def s(x):
        return 2.0 * x

    @mg.frule(s)
    def _(p, t):
        return s(p[0]), (2 * t[0]).astype(np.int64)

    with pytest.raises(mg.RuleError, match="tangent of integer"):
        mg.jvp(s, (np.ones(3),), (np.full(3, 0.4),))

    @mg.primitive
    def u(x):
        return 3.0 * x

    @mg.rrule(u)
    def _(x):
        return u(x), lambda g: (np.round(3 * g).astype(np.int64), )

    with pytest.raises(mg.RuleError, match="cotangent of integer"):
        mg.grad(lambda x: np.sum(u(x) * 0.1))(np.ones(3))

    @mg.rrule(u)
    def _(x):
        return u(x), lambda g: (0,)  # (a Python 0 is a zero, not a truncation)

    assert mg.grad(lambda x: u(x) * 1.0)(1.5) == 0.0


@mg.primitive
def _doubled(x):
    return x * 2.0


@mg.frule(_doubled)
def _doubled_frule(primals, tangents):
    (x,), (xd,) = primals, tangents
    return _doubled(x), (xd * 2.0, xd * 5.0)  # a user's mistake: a tuple for one output


def test_forward_rule_returning_a_tuple_for_one_output_raises():
    # (NumPy would sum the tuple into the tangent: jvp gave 7 for 2)
    for x, t in ((3.0, 1.0), (np.array([3.0, 4.0]), np.array([1.0, 0.0]))):
        with pytest.raises(mg.RuleError, match="forward rule of _doubled returned a tuple"):
            mg.jvp(_doubled, (x,), (t,))


def test_pullback_cotangent_of_the_wrong_shape_inside_a_list_argument():
    # checked as a top-level argument's is (it reached NumPy's broadcasting error)
    @mg.primitive
    def mul(xs):
        return xs[0] * xs[1]

    @mg.rrule(mul)
    def _(xs):
        return mul(xs), lambda g: ([g * xs[1], np.ones(3)],)

    f = lambda a, b: np.sum(mul([a, b]))
    with pytest.raises(mg.RuleError, match=r"shape \(3,\) for argument 0\[1\] of shape \(2,\)"):
        mg.grad(f, (0, 1))(np.ones(2), np.full(2, 3.0))

    @mg.rrule(mul)
    def _(xs):
        return mul(xs), lambda g: ([g * xs[1], g * xs[0]],)

    ga, gb = mg.grad(f, (0, 1))(np.ones(2), np.full(2, 3.0))
    np.testing.assert_allclose(ga, [3.0, 3.0])  # d/da sum(a * b) = b, by hand
    np.testing.assert_allclose(gb, [1.0, 1.0])


@pytest.mark.parametrize("drop", [mg.value, mg.stop_gradient], ids=["value", "stop_gradient"])
def test_value_or_stop_gradient_in_a_rule_differentiated_again_raises(drop):
    # the second derivative came back as exact zeros (the rule's cos(x) taken as a constant)
    @mg.primitive
    def s(a):
        return np.sin(a)

    @mg.rrule(s)
    def _(a):
        c = np.cos(drop(a))
        return s(a), lambda g: (g * c,)

    x = np.array([0.5, 1.2, -0.7])
    np.testing.assert_allclose(mg.grad(lambda a: np.sum(s(a)))(x), np.cos(x), rtol=1e-15)  # (first order: fine)
    with pytest.raises(mg.TracerEscapeError, match=r"mg\.(value|stop_gradient)\(x\) of a value traced.*reverse rule"):
        mg.hessian(lambda a: np.sum(s(a)))(x)


def test_a_rule_whose_signature_does_not_fit_names_the_rule():
    # a bare "takes 1 positional argument but 2 were given" named no rule and no line
    @mg.primitive
    def s(a):
        return np.sin(a)

    @mg.frule(s)
    def _(a):  # (a reverse rule's signature)
        return np.sin(a), np.cos(a)

    with pytest.raises(mg.RuleError, match=r"forward rule of .*s cannot be called as rule\(primals, tangents\)"):
        mg.jvp(s, (np.ones(2),), (np.ones(2),))

    @mg.primitive
    def s3(a, b=2.0):
        return np.sin(a) * b

    @mg.rrule(s3)
    def _(a):  # (leaves out b, which the call passes)
        return s3(a), lambda g: (g,)

    with pytest.raises(mg.RuleError, match=r"reverse rule of .*s3 cannot take the primitive's arguments"):
        mg.grad(lambda a: np.sum(s3(a, 3.0)))(np.ones(2))

    @mg.primitive
    def s4(a):
        return np.sin(a)

    @mg.rrule(s4)
    def _(a):
        raise TypeError("inside the body")  # (the rule's own error stays as it is)

    with pytest.raises(TypeError, match="inside the body"):
        mg.grad(lambda a: np.sum(s4(a)))(np.ones(2))


def test_a_forward_rule_returning_a_tuple_for_one_output_names_the_rule_in_both_modes():
    # grad (the reverse rule transposed from it) spoke of a pullback the user never wrote
    @mg.primitive
    def s(a):
        return np.sin(a)

    @mg.frule(s)
    def _(p, t):
        return np.sin(p[0]), (np.cos(p[0]) * t[0],)

    with pytest.raises(mg.RuleError, match="returned a tuple of tangents for its one output"):
        mg.jvp(s, (np.ones(2),), (np.ones(2),))
    with pytest.raises(mg.DifferentiationError, match="returned a tuple of tangents for its one output"):
        mg.grad(lambda a: np.sum(s(a)))(np.ones(2))


def test_a_rule_may_differentiate_its_own_helpers_that_use_stop_gradient():
    # the refusal of mg.stop_gradient / mg.value in rules is for values a differentiation of the
    # rule traces, not for a differentiation the rule starts itself
    def helper(u):
        return np.sum(mg.stop_gradient(u) * u ** 2)  # d/du = 2 u^2 (the first factor a constant)

    @mg.primitive
    def g5(v):
        return np.sum(v ** 3)

    @mg.rrule(g5)
    def _(v):
        gr = mg.grad(helper)(v)
        return g5(v), lambda gg: (gg * 1.5 * gr,)

    x = np.array([0.5, -1.0, 2.0])
    np.testing.assert_allclose(mg.grad(g5)(x), 3 * x ** 2, rtol=1e-15)  # by hand


def test_defelementwise_wants_a_partial_for_a_parameter_with_a_default_too():
    # sp(x, b) with one partial: the traced b got a zero tangent, grad an IndexError
    from mutagrad.registry import defelementwise

    @mg.primitive
    def sp(v, beta=1.0):
        return np.log1p(np.exp(beta * v)) / beta

    with pytest.raises(TypeError, match=r"1 partial\(s\) for a function of 2 positional"):
        defelementwise(sp, lambda v, beta, y: 1 / (1 + np.exp(-beta * v)))


def test_an_elementwise_primitive_with_a_default_takes_calls_with_and_without_it():
    # one partial per positional parameter; a call leaving the default out crashed (IndexError)
    from mutagrad.registry import defelementwise

    @mg.primitive
    def sc(x, s=2.0):
        return np.sin(x) * s

    defelementwise(sc, lambda x, s, y: np.cos(x) * s, lambda x, s, y: np.sin(x))
    z = np.array([0.3, 1.1])
    np.testing.assert_allclose(mg.grad(lambda z: np.sum(sc(z)))(z), 2 * np.cos(z), rtol=1e-15)  # by hand
    for call in (lambda t: np.sum(sc(z, t)), lambda t: np.sum(sc(z, s=t))):
        np.testing.assert_allclose(mg.grad(call)(3.0), np.sum(np.sin(z)), rtol=1e-15)
        np.testing.assert_allclose(mg.jvp(call, (3.0,), (1.0,))[1], np.sum(np.sin(z)), rtol=1e-15)


def test_stop_gradient_in_a_rules_own_helper_of_the_rules_traced_argument_raises():
    # the helper's value wraps the outer hessian's tracer: stop_gradient dropped its derivative there
    def h(z):
        return np.sum(z ** 2 * mg.stop_gradient(z))

    @mg.primitive
    def cube(x):
        return np.sum(x ** 3)

    @mg.rrule(cube)
    def _(x):
        return cube(x), lambda g: (g * (mg.grad(h)(x) + x ** 2),)

    x = np.array([0.3, 1.2, -0.7])
    np.testing.assert_allclose(mg.grad(cube)(x), 3 * x ** 2, rtol=1e-15)  # (first order: fine; by hand)
    with pytest.raises(mg.TracerEscapeError, match="mg.stop_gradient"):
        mg.hessian(cube)(x)


def test_a_pullbacks_plain_buffer_under_forward_mode_names_the_buffers_fix():
    # (customrules) a pullback filling np.zeros_like(b) of a constant b works in reverse mode; forward mode,
    # which differentiates the pullback, refused it with advice that did not name the buffer. Now it does, and
    # the buffer made from the cotangent works in both modes (central differences)
    def make(buffer):
        @mg.primitive
        def diag_solve(d, b):
            return b / d

        @mg.rrule(diag_solve)
        def _(d, b):
            x = diag_solve(d, b)

            def pb(g):
                bbar = buffer(b, g)
                bbar[:] = g / d
                return -bbar * x, bbar

            return x, pb

        return lambda d, b: np.sum(diag_solve(d, b) ** 2)

    d0, b0 = np.array([2.0, 4.0]), np.array([1.0, 3.0])
    f = make(lambda b, g: np.zeros_like(b))
    with pytest.raises(mg.ForwardRuleMissingError, match=r"np.zeros_like\(g\).*mnp.zeros_like\(b\)"):
        mg.jvp(f, (d0, b0), (np.ones(2), None))
    f = make(lambda b, g: np.zeros_like(g))
    want = sum((f(d0 + 1e-6 * e, b0) - f(d0 - 1e-6 * e, b0)) / 2e-6 for e in np.eye(2))
    assert mg.jvp(f, (d0, b0), (np.ones(2), None))[1] == pytest.approx(want, rel=1e-7)
    assert np.sum(mg.grad(f)(d0, b0)) == pytest.approx(want, rel=1e-7)
