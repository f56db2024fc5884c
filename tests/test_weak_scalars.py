"""A differentiated Python float is NumPy's weak scalar, as in a plain call.

NumPy 2 (NEP 50) lets a Python float or complex take the dtype of the array
or NumPy scalar it meets: ``float32_array * 0.5`` is float32, and
``float32_array * np.float64(0.5)`` is float64. A function differentiated
w.r.t. a Python float must compute what its plain call computes: same
dtypes, same bits. Python arithmetic on such numbers (``s * 2.0``, ``-s``,
``s % 1.0``) stays weak; a NumPy function of one (``np.exp(s)``) is a float64
scalar, strong.

Oracles: the plain call (values, dtypes and bits), central differences of
the same function with its arrays upcast to float64 (the derivative of the
low-precision program equals that to its precision), and the other mode.
"""
import numpy as np
import pytest

import mutagrad as mg
import mutagrad.numpy as mnp

W = np.array([0.3, -1.2, 0.7, 2.1])


def _data(dtype):
    a = np.array([1.5, 2.5, 0.25, 3.0])
    if np.dtype(dtype).kind == "c":
        a = a + 1j * np.array([0.5, -1.0, 2.0, 0.1])
    return a.astype(dtype)


def _reduce(y):
    y = np.real(y) if np.iscomplexobj(y) else y
    return np.sum(y * y.dtype.type(0.5)) if np.ndim(y) else y * 0.5


def _inplace(s, a):
    buf = mnp.zeros(a.shape, a.dtype)  # a buffer that may hold traced values
    buf[1:] = a[1:] * s
    buf += s
    buf[0] = s * s
    return buf


def _divmod(s, a):
    q, r = divmod(s * 3.0, 0.7)
    return a * r + q


def _run_loop(s, a):
    t = s
    for _ in range(8):  # enough one-element operations in a row to be recorded by a run
        t = t * 1.01 + 0.5
        t = t - 0.1 * t
    return a * t


def _python_ops(s, a):
    t = -s + abs(s - 4.0) * 0.5
    t = t ** 2 / (1.0 + s)
    t += 0.25
    return a * t + (s % 0.9)


PROGRAMS = {
    "a * s": lambda s, a: a * s,
    "s * a + s": lambda s, a: s * a + s,
    "a ** s": lambda s, a: np.abs(a) ** s,
    "s ** a": lambda s, a: s ** np.abs(a),
    "np.multiply(s, a)": lambda s, a: np.multiply(s, a),
    "where": lambda s, a: np.where(np.real(a) > 2, s, a),
    "clip": lambda s, a: np.clip(np.real(a), 0.0, s),
    "maximum": lambda s, a: np.maximum(np.real(a), s * 0.8),
    "stack": lambda s, a: np.stack([a, a * 0 + s]),
    "select": lambda s, a: np.select([np.real(a) > 2], [a * s], 0.5),
    "divide": lambda s, a: a / (1.0 + s ** 2),
    "in place": _inplace,
    "divmod": _divmod,
    "run": _run_loop,
    "python ops": _python_ops,
    "strong np.exp(s)": lambda s, a: np.exp(s) * a,
    "strong np.float64": lambda s, a: np.float64(2.0) * s * a,
    "np.float32 scalar": lambda s, a: (s * np.float32(2.0)) * a,
}


def _fd(fn, s, h=1e-6):
    return (fn(s + h) - fn(s - h)) / (2 * h)


def _same(got, want):
    assert type(got) is type(want), (type(got), type(want))
    assert np.asarray(got).dtype == np.asarray(want).dtype
    np.testing.assert_array_equal(got, want, strict=True)


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.complex64])
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_weak_python_float(name, dtype):
    prog = PROGRAMS[name]
    a = _data(dtype)
    s = 1.3

    def f(s, a=a):
        return _reduce(prog(s, a))

    def f64(s):
        return _reduce(prog(s, a.astype(np.complex128 if a.dtype.kind == "c" else np.float64)))

    want = f(s)
    val, g = mg.value_and_grad(f)(s)
    _same(val, want)  # the plain call's dtype and bits
    assert type(g) is float
    out, tan = mg.jvp(f, (s,), (1.0,))
    _same(out, want)
    tol = {np.float32: 1e-4, np.float16: 3e-2, np.complex64: 1e-4}[dtype]
    ref = _fd(f64, s, 1e-3)  # (a step the float32 rounding of s * np.float32(2) does not swamp)
    assert abs(g - ref) <= tol * max(1.0, abs(ref)), (g, ref)
    assert abs(float(tan) - g) <= tol * max(1.0, abs(g)), (tan, g)


def test_weak_complex_python_scalar():
    a = _data(np.float32)
    z = 0.4 + 0.3j

    def f(z):
        y = a * z  # complex64, as in a plain call
        return np.sum(np.abs(y) ** 2)

    def f64(z):
        return np.sum(np.abs(a.astype(np.float64) * z) ** 2)

    _same(mg.value_and_grad(f)(z)[0], f(z))
    g = mg.grad(f)(z)
    assert type(g) is complex
    h = 1e-6
    ref = complex((f64(z + h) - f64(z - h)) / (2 * h), -(f64(z + 1j * h) - f64(z - 1j * h)) / (2 * h))
    assert abs(g - ref) <= 1e-4 * abs(ref)


@pytest.mark.parametrize("fn", [
    lambda s: s * 2.0 + 1.0,
    lambda s: -abs(s) ** 2 % 2.0,
    lambda s: divmod(s, 0.4)[1] * s,
    lambda s: np.sin(s) * 2.0,  # a NumPy function: a NumPy scalar
    lambda s: s * np.float32(2.0),
], ids=["arith", "unary-mod", "divmod", "np.sin", "np.float32"])
def test_scalar_outputs_keep_their_python_type(fn):
    s = 0.7
    want = fn(s)
    val, g = mg.value_and_grad(fn)(s)
    _same(val, want)
    out, tan = mg.jvp(fn, (s,), (1.0,))
    _same(out, want)
    assert type(tan) is type(want)  # a Python float output has a Python float tangent
    ref = _fd(lambda x: float(fn(x)), s, 1e-4 if np.asarray(want).dtype == np.float32 else 1e-6)
    tol = 1e-2 if np.asarray(want).dtype == np.float32 else 1e-7
    assert abs(g - ref) <= tol * max(1.0, abs(ref))
    assert abs(float(tan) - g) <= 1e-6 * max(1.0, abs(g))


def test_weak_nested_and_hessian():
    a = _data(np.float32)

    def f(s):
        return np.sum(a * s ** 3)  # float32 throughout, as in a plain call

    h = 1e-4
    a64 = a.astype(np.float64)
    ref = (np.sum(a64 * (1.3 + h) ** 3) - 2 * np.sum(a64 * 1.3 ** 3) + np.sum(a64 * (1.3 - h) ** 3)) / h ** 2
    for d2 in (mg.grad(mg.grad(f))(1.3), mg.hessian(f)(1.3)):
        assert abs(d2 - ref) <= 1e-4 * abs(ref)

    def outer(x):  # a Python float made weak inside an inner differentiation
        def inner(y):
            v = a * (y * 2.0 - 1.0) * x  # Python arithmetic on it stays weak too
            assert v.dtype == np.float32
            return np.sum(v)
        return mg.grad(inner)(0.5)

    g = mg.grad(outer)(1.0)
    assert abs(g - 2 * float(np.sum(a64))) <= 1e-5 * float(np.sum(a64))  # d/dx of 2 x sum(a)


def test_non_differentiated_python_float_stays_weak():
    a = _data(np.float32)

    def f(x, s):
        y = x * s
        assert y.dtype == np.float32
        return np.sum(y * y)

    g = mg.grad(f)(a, 0.5)
    assert g.dtype == np.float32
    a64 = a.astype(np.float64)
    np.testing.assert_allclose(g, 2 * 0.25 * a64, rtol=1e-6)


@pytest.mark.parametrize("mode", ["rev", "fwd"])
def test_partial_of_python_number_divisor_is_numpy_arithmetic(mode):
    # d(x / 0.0)/dx = 1 / 0.0: Python raises ZeroDivisionError, NumPy gives inf. The partial is
    # NumPy's, and where np.where discards it the derivative is the other branch's (strong zero).
    def f(x, s=0.0):
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.sum(np.where(x > 5, x / s, 3.0 * x))

    x = np.array([1.0, 2.0])
    g = mg.grad(f)(x) if mode == "rev" else np.array([mg.jvp(f, (x,), (e,))[1] for e in np.eye(2)])
    h = 1e-6
    ref = np.array([(f(x + h * e) - f(x - h * e)) / (2 * h) for e in np.eye(2)])
    np.testing.assert_allclose(g, ref, rtol=1e-8)
    with np.errstate(divide="ignore"):
        assert np.all(np.isinf(mg.grad(lambda x: np.sum(x / 0.0))(x)))  # as 1 / np.float64(0.0)


@pytest.mark.parametrize("f, x0, want", [
    (np.log, 0.0, -np.inf),  # d²/dx² log x = -1/x²
    (lambda x: np.log1p(x - 1.0), 0.0, -np.inf),  # -1/x² at x = 0
    (np.arctanh, 1.0, np.inf),  # 2x / (1 - x²)²
    (np.cbrt, 0.0, -np.inf),  # -2/9 x^(-5/3) (it was 0: the tangent of y * y in the partial, a strong zero)
])
def test_second_order_partial_at_a_python_number_is_numpy_arithmetic(f, x0, want):
    # at second order the partial's argument is an outer level's traced Python float: 1 / 0.0 is
    # NumPy's inf there too (it raised ZeroDivisionError), as at the NumPy scalar np.float64(x0)
    with np.errstate(divide="ignore", invalid="ignore"):
        results = [mg.hessian(f)(x0), mg.grad(mg.grad(f))(x0), mg.jvp(mg.grad(f), (x0,), (1.0,))[1],
                   mg.hessian(f)(np.float64(x0))]
    for r in results:
        assert r == want, results


# NumPy functions whose result dtype depends on how they treat a Python number: some make it
# an array first (strong: np.dot, np.kron, ufunc.outer), others let it take the arrays' dtype
# (weak: np.choose, np.select, np.linspace, the quantiles' interpolation weight), and
# np.ediff1d casts its ends into the input's dtype.
DTYPE_CASES = {
    "dot": lambda x, s: np.dot(x, s),
    "dot scalar first": lambda x, s: np.dot(s, x),
    "inner": lambda x, s: np.inner(x, s),
    "kron": lambda x, s: np.kron(x, s),
    "add.outer": lambda x, s: np.add.outer(x, s),
    "choose": lambda x, s: np.choose(np.array([0, 1, 0, 1]), [x, s]),
    "select": lambda x, s: np.select([x > 0], [x * s], 0.5),
    "linspace": lambda x, s: np.linspace(x[0], s, 5),
    "linspace reversed": lambda x, s: np.linspace(s, x[1], 4, endpoint=False),
    "logspace": lambda x, s: np.logspace(x[0], s, 3),
    "ediff1d": lambda x, s: np.ediff1d(x, to_begin=s, to_end=[s, 1.0]),
    "quantile": lambda x, s: np.quantile(x * s, 0.3),
    "quantile q": lambda x, s: np.quantile(x, s * 0.5),
    "percentile": lambda x, s: np.percentile(x * s, [30.0, 95.0], method="hazen"),
    "nanquantile": lambda x, s: np.nanquantile(np.where(x > 2.9, np.nan, x) * s, 0.3),
    "mnp.array of NumPy scalars": lambda x, s: mnp.array([x[0] * s, np.float32(2.0), x[1]]),
    "mnp.array complex64 item": lambda x, s: np.abs(mnp.array([x[0] * s, np.complex64(0.7 + 0.3j)])),
}


@pytest.mark.parametrize("traced", ["x", "s"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", sorted(DTYPE_CASES))
def test_values_and_dtypes_follow_numpy(name, dtype, traced):
    fn = DTYPE_CASES[name]
    x = np.array([1.5, -2.5, 0.25, 3.0], dtype)
    s = 0.7
    want = fn(x.copy(), s)
    seen = []

    def keep(y):
        seen.append(np.array(mg.value(y)))
        return np.nansum(y) * 1.0

    if traced == "x":
        g = mg.grad(lambda x: keep(fn(x, s)))(x.copy())
    else:
        g = mg.grad(lambda s: keep(fn(x.copy(), s)))(s)
    assert seen[0].dtype == np.asarray(want).dtype
    np.testing.assert_array_equal(seen[0], want)
    if dtype == np.float64:  # the derivative against central differences
        plain = (lambda x: np.nansum(fn(x, s))) if traced == "x" else (lambda s: np.nansum(fn(x.copy(), s)))
        at = x if traced == "x" else s
        h = 1e-6
        if traced == "x":
            ref = np.array([(plain(at + h * e) - plain(at - h * e)) / (2 * h) for e in np.eye(len(at))])
        else:
            ref = (plain(at + h) - plain(at - h)) / (2 * h)
        np.testing.assert_allclose(g, ref, rtol=1e-6, atol=1e-8)


def test_traced_initial_of_a_plain_reduction_is_a_clear_error():
    a = np.array([1.5, -2.5, 0.25], np.float32)
    with pytest.raises(mg.DifferentiationError, match=r"test_weak_scalars.py:\d+.*initial="):
        mg.grad(lambda s: np.sum(a, initial=s))(0.7)
    g = mg.grad(lambda s: np.sum(a * s, initial=s))(0.7)  # the array traced: dispatched, differentiated
    assert abs(g - (float(np.sum(a.astype(np.float64))) + 1.0)) < 1e-6


def test_weak_scalar_in_out_and_comparisons():
    x = np.array([0.61, 1.13, 0.7, 1.45], np.float32)

    def f(x, s):
        y = np.empty_like(x)
        np.hypot(x, s, out=y)  # a float32 loop, as in a plain call, then replayed into y
        z = x.copy()
        z **= s
        keep = x >= s  # 0.7 compared as float32, as NumPy's weak scalar
        return np.sum(y + z * keep)

    want = f(x.copy(), 0.7)
    val, g = mg.value_and_grad(f, argnums=1)(x.copy(), 0.7)
    _same(val, want)
    x64 = x.astype(np.float64)
    keep = x >= 0.7  # (the plain float32 comparison decides the branch of the upcast oracle too)
    ref_f = lambda s: np.sum(np.hypot(x64, s) + x64 ** s * keep)
    ref = _fd(ref_f, 0.7, 1e-6)
    assert abs(g - ref) <= 1e-4 * abs(ref)


@pytest.mark.parametrize("fn", [
    lambda z: abs(z) * 2.0,
    lambda z: abs(3 / z),
    lambda z: abs(z * z - 1) + (2 / z).real,
    lambda z: z.imag + z.conjugate().real * z.real,
], ids=["abs", "int/z", "poly", "parts"])
def test_python_complex_arithmetic_is_pythons(fn):
    # Python's complex abs and division differ from NumPy's in the last bit for a third of
    # the values or more: a Python complex argument computes what the plain call computes
    rng = np.random.default_rng(3)
    for z in rng.uniform(-5, 5, 20) + 1j * rng.uniform(-5, 5, 20):
        z = complex(z)
        want = fn(z)
        val, g = mg.value_and_grad(fn)(z)
        assert type(val) is type(want) and val == want
        h = 1e-6
        ref = complex((fn(z + h) - fn(z - h)) / (2 * h), -(fn(z + 1j * h) - fn(z - 1j * h)) / (2 * h))
        assert abs(g - ref) <= 1e-6 * max(1.0, abs(ref))
        out, tan = mg.jvp(fn, (z,), (1.0,))
        assert type(out) is type(want) and out == want
        assert abs(tan - g.real) <= 1e-9 * max(1.0, abs(g))


@pytest.mark.parametrize("fn", [np.max, np.min, np.ptp, np.nanmax, np.real, np.imag, np.atleast_1d],
                         ids=lambda f: f.__name__)
@pytest.mark.parametrize("x", [3.5, -0.4 + 0.1j, np.float64(3.5), np.complex128(-0.4 + 0.1j)],
                         ids=["float", "complex", "np.float64", "np.complex128"])
def test_functions_of_a_scalar_argument(fn, x):
    want = fn(x)
    f = (lambda x: np.real(np.sum(fn(x)))) if np.iscomplexobj(x) else (lambda x: np.sum(fn(x)))
    seen = []
    g = mg.grad(lambda x: (seen.append(fn(x)), f(x))[1])(x)
    got = seen[0]
    assert type(mg.value(got)) is type(np.asarray(want) if type(want) is np.ndarray else want) or (
        np.ndim(want) and np.shape(mg.value(got)) == np.shape(want))
    np.testing.assert_array_equal(mg.value(got), want)
    h = 1e-6
    ref = (f(x + h) - f(x - h)) / (2 * h)
    if np.iscomplexobj(x):
        ref = complex(ref, -(f(x + 1j * h) - f(x - 1j * h)) / (2 * h))
    assert abs(g - ref) <= 1e-8 * max(1.0, abs(ref))
    assert type(g) is type(x)


def test_python_complex_times_numpy_float64_is_a_python_complex():
    # np.float64 is a float subclass: Python's complex operator takes it, so the product is a
    # Python complex, which NumPy refuses to write into a real array (TypeError)
    def f(x):
        out = x * 0.0
        out[1] = (0.5 + 0.3j) * x[0]
        return np.sum(out ** 2)

    with pytest.raises(TypeError) as want:
        f(np.array([1.0, 2.0]))
    with pytest.raises(TypeError) as got:
        mg.grad(f)(np.array([1.0, 2.0]))
    assert str(got.value) == str(want.value)


@pytest.mark.parametrize("fn, args", [
    (lambda s: abs((-s) ** 0.5), (2.0,)),                            # = sqrt(s)
    (lambda c: ((-1.0 + (1.0 - 4.0 * c) ** 0.5) / 2.0).imag, (1.0,)),  # a complex root's imaginary part
    (lambda p: ((-2.0) ** p).real, (0.3,)),                          # traced exponent
    (lambda s, p: ((-s) ** p).imag * s, (2.0, 0.3)),
])
def test_python_power_of_a_negative_float_is_complex(fn, args):
    # Python's (-2.0) ** 0.5 is 1.414j: its derivative is the complex power's (it was NaN)
    from mutagrad.testing import numerical_grad

    nums = tuple(range(len(args)))
    want = numerical_grad(fn, args, nums)
    got = mg.grad(fn, argnums=nums)(*args)
    np.testing.assert_allclose(np.array(got, float), np.array(want, float), rtol=1e-7)
    v = (1.0,) * len(args)
    _, t = mg.jvp(fn, args, v)
    np.testing.assert_allclose(t, sum(want), rtol=1e-7)


@pytest.mark.parametrize("dtype", [np.complex128, np.complex64])
def test_abs_of_a_numpy_complex_element_is_the_scalars_own(dtype):
    # abs(z[0]) calls the NumPy scalar's abs (hypot), whose last bit differs from np.absolute's
    # for about a third of the values: the value, and the argument it is written into, keep it
    rng = np.random.default_rng(5)
    zs = (rng.standard_normal(64) + 1j * rng.standard_normal(64)).astype(dtype)

    def f(x, z):
        for i in range(len(z)):
            x[i % 3] = abs(z[i]) * x[(i + 1) % 3]
        return np.sum(x)

    x = np.array([0.5, 1.5, -0.7], np.result_type(dtype(0).real))
    xp, xm = x.copy(), x.copy()
    want = f(xp, zs)
    got, g = mg.value_and_grad(f)(xm, zs)
    assert np.asarray(got).tobytes() == np.asarray(want).tobytes()
    assert xm.tobytes() == xp.tobytes()
    from mutagrad.testing import numerical_grad

    if dtype == np.complex128:
        np.testing.assert_allclose(g, numerical_grad(lambda a: f(a.copy(), zs), (x,), (0,))[0], rtol=1e-6)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize("absf", [abs, np.abs])
def test_abs_of_an_infinite_complex_element_later_overwritten(absf):
    # a zero cotangent through abs at inf + 0j (partial inf / inf) is zero, as for a real buffer
    def f(x, p):
        c = np.zeros_like(x, dtype=complex)
        c[0] = 1e200 * (2.0 + p)
        c[1] = absf(c[0]) ** 2  # inf + 0j
        c[0] = absf(c[1])
        c[0] = p                # both overwritten
        c[1] = p
        return np.sum(np.abs(c) ** 2)  # 2 p**2

    x, p = np.zeros(2), 0.3
    want = (f(x.copy(), p + 1e-6) - f(x.copy(), p - 1e-6)) / 2e-6
    assert abs(mg.grad(f, argnums=1)(x.copy(), p) - want) < 1e-6
    assert abs(mg.jvp(f, (x.copy(), p), (np.zeros(2), 1.0))[1] - want) < 1e-6


@pytest.mark.parametrize("fn, arg", [(lambda s: abs(s + 0.5j) ** 3, 0.7), (lambda s: abs((s + 0.5j) * (s - 1j)), 0.7),
                                     (lambda z: abs(z[0]) ** 2 + abs(z[1]), np.array([0.3 + 0.4j, -1.2 + 0.5j]))])
def test_second_derivative_of_abs_of_a_complex_scalar(fn, arg):
    # abs() of a Python or NumPy complex scalar, differentiated twice (it raised an escape error)
    from mutagrad.testing import check_grads

    check_grads(fn, arg, order=2)


def _nested_results(x):
    # an inner grad/jvp w.r.t. a Python float gives Python floats in a plain call: under an
    # outer differentiation they must stay weak, so that x (float32) keeps its dtype
    def inner(t):
        return np.sum(np.tanh(t * x))

    _, s = mg.jvp(lambda t: t * 2.0, (0.7,), (1.0,))
    v, tv = mg.jvp(inner, (0.7,), (1.0,))
    return mg.grad(inner)(0.7) * x[0] + s * x[1] + (v + tv) * x[2] + np.sum(np.sin(x))


def test_inner_derivatives_of_python_floats_stay_weak():
    x = np.array([0.1, -0.4, 0.3, 0.8], dtype=np.float32)
    plain = _nested_results(x.copy())
    assert plain.dtype == np.float32
    for value in (mg.value_and_grad(_nested_results)(x.copy())[0],
                  mg.jvp(_nested_results, (x.copy(),), (np.ones(4, np.float32),))[0]):
        assert value.dtype == np.float32 and value.tobytes() == plain.tobytes()
    # the derivative, against central differences of the program on float64 arrays
    x64 = x.astype(np.float64)
    fd = [(_nested_results(x64 + 1e-6 * e) - _nested_results(x64 - 1e-6 * e)) / 2e-6 for e in np.eye(4)]
    np.testing.assert_allclose(mg.grad(_nested_results)(x.copy()), fd, rtol=2e-5)


_SCALAR_OPERATORS = {"*": lambda c, s: c * s, "+": lambda c, s: c + s, "-": lambda c, s: c - s,
                     "/": lambda c, s: c / s, "**": lambda c, s: c ** s}


@pytest.mark.parametrize("dtype", [np.complex128, np.complex64, np.float64, np.float32, np.longdouble])
@pytest.mark.parametrize("sym", sorted(_SCALAR_OPERATORS))
def test_numpy_scalar_operator_on_a_traced_element_has_a_plain_calls_bits(dtype, sym):
    # `w * a[0]` with w a NumPy scalar: NumPy's scalar operator hands the traced element to the
    # ufunc, whose complex products (and powers) differ in the last bit from the scalar arithmetic
    # of a plain call; the element and the value took the ufunc's bits (a hand-written FFT's
    # twiddle products)
    op = _SCALAR_OPERATORS[sym]
    rng = np.random.default_rng(7)
    cplx = np.dtype(dtype).kind == "c"

    def f(a, w):
        a[0] = op(w, a[0])
        return np.sum(np.abs(a) ** 2)

    for _ in range(40):
        z = rng.uniform(0.5, 1.5, 3) + (1j * rng.uniform(0.5, 1.5, 3) if cplx else 0)
        z = z.astype(dtype)
        w = dtype(rng.uniform(0.5, 1.5) + (1j * rng.uniform(0.5, 1.5) if cplx else 0))
        plain, r, t = z.copy(), z.copy(), z.copy()
        want = f(plain, w)
        val, _ = mg.value_and_grad(f)(r, w)
        jval, _ = mg.jvp(lambda a, w=w: f(a, w), (t,), (np.ones_like(z),))
        np.testing.assert_array_equal(r, plain)
        np.testing.assert_array_equal(t, plain)
        assert val == want and jval == want
    if dtype is np.float64:  # the derivative, against central differences
        from mutagrad.testing import check_grads

        check_grads(lambda a: f(a.copy(), np.float64(1.3)), np.array([0.7, 1.1, 0.9]))


def test_numpy_scalar_operator_called_as_a_function_has_a_plain_calls_bits():
    # operator.mul(w, a[0]) and w.__mul__(a[0]) as w * a[0]: the scalars' own arithmetic
    import operator

    w = np.complex128(0.9 + 1.1j)
    z = np.array([0.7 + 0.3j, 1.2 - 0.4j])
    for fn in (lambda a: operator.mul(w, a[0]), lambda a: w.__mul__(a[0]), lambda a: operator.pow(w, a[1])):
        def f(a, fn=fn):
            a[0] = fn(a)
            return np.sum(np.abs(a) ** 2)

        plain, r = z.copy(), z.copy()
        assert mg.value_and_grad(f)(r)[0] == f(plain)
        np.testing.assert_array_equal(r, plain)


@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int16, np.bool_])
def test_partials_at_an_integer_constant_are_in_the_loops_precision(dtype):
    # NumPy's log of an int8 is a float16: d/dx c ** x = c ** x log c lost 4 digits (1.9e-5); -y of
    # a uint8 y in arctan2's partial wrapped around (26.66 for -0.316)
    c = np.array([3], dtype)
    x = np.array([0.7])
    if dtype is not np.bool_:
        g = mg.grad(lambda x: np.sum(c ** x))(x)
        np.testing.assert_allclose(g, 3.0 ** 0.7 * np.log(3.0), rtol=1e-15)  # by hand
        np.testing.assert_allclose(mg.jvp(lambda x: np.sum(np.power(c[0], x)), (x,), (np.ones(1),))[1],
                                   3.0 ** 0.7 * np.log(3.0), rtol=1e-15)
    y = float(c[0])
    g = mg.grad(lambda x: np.sum(np.arctan2(c, x)))(x)
    np.testing.assert_allclose(g, -y / (0.49 + y * y), rtol=1e-15)  # d/dx atan2(y, x), by hand


def test_complex_scalar_products_under_nested_differentiation_have_a_plain_calls_bits():
    # a Hessian-vector product (jvp of grad): the outer level computed complex128 scalar products
    # with the ufunc loop (39 of 100 arguments' contents differed in the last bit)
    def f(z, p):
        z[0] = (z[1] * p) * z[2]
        return np.sum(np.abs(z) ** 2)

    rng = np.random.default_rng(1)
    for _ in range(40):
        z0 = rng.standard_normal(3) + 1j * rng.standard_normal(3)
        plain, h = z0.copy(), z0.copy()
        f(plain, 0.5)
        mg.jvp(mg.grad(f, argnums=1), (h, 0.5), (np.zeros(3, complex), 1.0))
        np.testing.assert_array_equal(h, plain)


@pytest.mark.parametrize("op", ["%", "//", "divmod", "rdivmod", "/", "**"])
@pytest.mark.parametrize("how", ["rev", "fwd"])
def test_python_numbers_dividing_by_zero_raise_as_python_does(op, how):
    # (regress16: %, // and divmod of a weak scalar by 0.0 gave nan/inf where Python raises
    # ZeroDivisionError; a program that catches it took the other branch in a plain call)
    fns = {"%": lambda a, b: a % b, "//": lambda a, b: a // b, "divmod": lambda a, b: divmod(a, b)[1],
           "rdivmod": lambda a, b: divmod(2.0, b)[0] * a, "/": lambda a, b: a / b, "**": lambda a, b: a * b ** -1.0}
    f = fns[op]

    def safe(a, b):
        try:
            return f(a, b)
        except ZeroDivisionError:
            return 3.0 * a

    with pytest.raises(ZeroDivisionError):
        f(1.5, 0.0)
    assert safe(1.5, 0.0) == 4.5
    if how == "rev":
        v, g = mg.value_and_grad(safe, argnums=(0, 1))(1.5, 0.0)
        assert v == 4.5 and g == (3.0, 0.0)  # by hand: d(3a)
    else:
        assert mg.jvp(safe, (1.5, 0.0), (1.0, 1.0)) == (4.5, 3.0)


def test_an_element_loop_of_python_floats_dividing_by_zero_raises_in_reverse_mode():
    # (regress16: once a NumPy float64 had gone through the line, a run of the element loop
    # recorded the weak scalars' divisions too, with NumPy's inf)
    def safe(a, b):
        try:
            return a / b
        except ZeroDivisionError:
            return 0.0

    x, y = np.array([1.0, 2.0]), np.array([0.5, 0.0])
    assert np.sum(np.vectorize(safe)(x, y)) == 2.0
    v, (gx, gy) = mg.value_and_grad(lambda x, y: np.sum(mnp.vectorize(safe)(x, y)), argnums=(0, 1))(x, y)
    assert v == 2.0
    np.testing.assert_array_equal(gx, [2.0, 0.0])  # by hand: 1/b, and the constant 0.0
    np.testing.assert_array_equal(gy, [-4.0, 0.0])  # -a/b^2

    def powered(a, b):
        try:
            return a + b ** -1.0
        except ZeroDivisionError:
            return a

    v, g = mg.vjp(lambda y: mnp.vectorize(powered)(x, y), y)
    np.testing.assert_array_equal(v, np.vectorize(powered)(x, y))
    np.testing.assert_array_equal(g(np.ones(2))[0], [-4.0, 0.0])  # -b^-2


def test_order_comparisons_of_python_complex_numbers_raise_as_python_does():
    f = lambda a: a * 2 if a > 0 else -a
    with pytest.raises(TypeError, match="'>' not supported between instances of 'complex' and 'int'"):
        f(1 + 1j)
    with pytest.raises(TypeError, match="'>' not supported between instances of 'complex' and 'int'"):
        mg.jvp(f, (1 + 1j,), (1 + 0j,))
    z = np.array([1 + 1j, 2 - 0.5j])
    with pytest.raises(TypeError, match="not supported between instances of 'complex'"):
        np.vectorize(f)(z)
    with pytest.raises(TypeError, match="not supported between instances of 'complex'"):
        mg.jvp(lambda z: mnp.vectorize(f)(z), (z,), (np.ones_like(z),))
    g = lambda z: np.sum(np.abs(mnp.vectorize(lambda a: a * 2 if a.real > 0 else -a)(z)) ** 2)
    # by hand: |2z|^2 = 4(x^2 + y^2), whose gradient (df/dx - i df/dy, as JAX's) is 8 conj(z)
    np.testing.assert_allclose(mg.grad(g)(z), 8 * np.conj(z), rtol=1e-15)


def test_an_object_array_of_traced_values_as_an_output_is_refused():
    x = np.array([0.5, -1.5])
    with pytest.raises(TypeError, match="array of dtype object holding traced values"):
        mg.jvp(lambda x: mnp.vectorize(lambda a: (a, a), otypes=[object])(x), (x,), (np.ones(2),))


def test_weak_floor_division_and_divmod_take_a_float32_operands_dtype():
    # (regress17: a Python float // np.float32 computed in float64 and gave 0.0 for NumPy's 1.0)
    c = np.float32(1.7)
    a32 = np.array([1.7, 2.5], np.float32)
    f = lambda x: (x // c) * x
    assert f(1.7) == np.float32(1.7)
    v, g = mg.value_and_grad(f)(1.7)
    assert v == f(1.7) and type(v) is type(f(1.7)) and g == 1.0  # by hand: q = 1, d(q x) = q
    y, t = mg.jvp(lambda x: divmod(x, c), (1.7,), (1.0,))
    assert y == divmod(1.7, c) and all(type(u) is np.float32 for u in y) and t[1] == 1.0
    np.testing.assert_array_equal(mg.jvp(lambda x: x // a32, (1.7,), (1.0,))[0], 1.7 // a32)
    assert mg.grad(lambda x: np.sum((x // a32) * x))(1.7) == np.sum(1.7 // a32)


@pytest.mark.parametrize("fn", ["remainder", "fmod", "divmod"])
def test_remainders_derivative_uses_the_exact_quotient(fn):
    # 1.0 % 0.1 = 1.0 - 9 * 0.1 (0.1 is a little above 1/10): d/db = -9, where np.floor(1.0 / 0.1) = 10
    f = {"remainder": np.remainder, "fmod": np.fmod, "divmod": lambda a, b: np.divmod(a, b)[1]}[fn]
    a = np.float64(1.0)
    from fractions import Fraction
    q = Fraction(1.0) // Fraction(0.1)  # the exact quotient, by rational arithmetic
    assert q == 9 and f(a, np.float64(0.1)) == float(Fraction(1.0) - 9 * Fraction(0.1))  # (exact)
    assert mg.grad(lambda b: f(a, b))(np.float64(0.1)) == -9.0
    assert mg.jvp(lambda b: f(a, b), (np.float64(0.1),), (1.0,))[1] == -9.0
    # (regress18: a quotient from (a - fmod(a, b)) / b rounded to even at an exact .5: -1753 for -1754 in
    # float16, 1e16 / 3 off by one)
    for a, b in ((1e16, 3.0), (-1e16, 3.0), (7.5, -2.0), (-66.25, -0.03778), (1.0, 0.1)):
        qa, qb = Fraction(a), Fraction(b)
        floor_q = qa // qb
        q = int(qa / qb) if fn == "fmod" else floor_q  # (fmod's quotient rounds towards zero)
        got = mg.grad(lambda y, a=a: f(np.float64(a), y))(np.float64(b))
        # (within NumPy's own floor_divide at |q| ~ 1e16, where (a - r) / b rounds: one part in 3e15)
        assert got == pytest.approx(-float(q), rel=1e-15, abs=0), (fn, a, b, got, q)
    # (claims2: float16's floor quotient -2635 plus one rounded back to -2636 in float16)
    for a16, b16 in ((np.float16(-66.25), np.float16(-0.03778)), (np.float16(37.7), np.float16(-0.014305)),
                     (np.float32(-1.2145608e+06), np.float32(-0.01675032))):  # (float32's floor quotient: a tie rounded twice)
        q16 = Fraction(float(a16)) / Fraction(float(b16))
        q16 = int(q16) if fn == "fmod" else q16.__floor__()  # (exact: towards zero for fmod)
        assert mg.grad(lambda y, a16=a16: f(a16, y))(b16) == -q16, (fn, a16, b16)


def test_floor_division_by_zero_warns_once_as_a_plain_call():
    import warnings

    for f in (lambda x: x[0] // 0, lambda x: x[0] % 0):
        counts = []
        for call in (lambda f=f: f(np.array([1.5])), lambda f=f: mg.grad(f)(np.array([1.5])),
                     lambda f=f: mg.jvp(f, (np.array([1.5]),), (np.ones(1),))):
            with warnings.catch_warnings(record=True) as w:
                warnings.simplefilter("always")
                call()
            counts.append(len(w))
        assert counts == [1, 1, 1], counts


def test_object_arrays_nested_in_an_object_output_are_looked_into():
    def inner_array(x):
        inner = np.empty(1, dtype=object)
        inner[0] = x[0] * 3
        o = np.empty(1, dtype=object)
        o[0] = inner
        return o

    def inner_dict(x):
        o = np.empty(1, dtype=object)
        o[0] = {"a": x[0] * 3}
        return o

    for f in (inner_array, inner_dict):
        with pytest.raises(TypeError, match="array of dtype object holding traced values"):
            mg.jvp(f, (np.array([1.0, 2.0]),), (np.ones(2),))


def test_divmod_and_modf_with_a_dtype_keyword():
    # (regress18: the casting check passed out=None to a ufunc of two outputs: NumPy's TypeError)
    x = np.array([1.7, 2.9])
    np.testing.assert_array_equal(mg.grad(lambda x: np.sum(np.divmod(x, 0.3, dtype=np.float64)[1]))(x), [1.0, 1.0])
    np.testing.assert_array_equal(mg.grad(lambda x: np.sum(np.modf(x, dtype=np.float64)[0]))(x), [1.0, 1.0])
