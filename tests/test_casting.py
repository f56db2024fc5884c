"""NumPy's casting rules hold inside differentiation.

What NumPy refuses (a complex result into a real out=, a Python complex into
a real array, casting="no" across dtypes) raises the same error under
mutagrad; what NumPy accepts computes the dtype NumPy computes (dtype= of
reductions, np.trace, np.einsum). Oracles: the plain call (its error, or its
value and dtype) and central differences.
"""
import warnings

import numpy as np
import pytest

import mutagrad as mg
import mutagrad.numpy as mnp


def _inplace_complex(x, s):
    y = x.copy()
    y *= s
    return np.sum(y ** 2)


def _out_complex(x):
    out = mnp.zeros(2)
    np.add(x, 2j, out=out)
    return np.sum(out)


def _casting_no(x):
    out = mnp.zeros(2, np.float32)
    np.multiply(x, 2.0, out=out, casting="no")
    return np.sum(out)


def _setitem_complex(x, s):
    y = x.copy()
    y[0] = s
    return np.sum(y ** 2)


@pytest.mark.parametrize("fn, args, argnums", [
    (_inplace_complex, (np.array([1.0, 2.0]), 0.5 + 0.5j), 0),
    (_inplace_complex, (np.array([1.0, 2.0]), 0.5 + 0.5j), 1),
    (_out_complex, (np.array([1.0, 2.0]),), 0),
    (_casting_no, (np.array([1.0, 2.0]),), 0),
    (_setitem_complex, (np.array([1.0, 2.0]), 0.5 + 0.5j), 1),
], ids=["iop-x", "iop-s", "out-complex", "casting-no", "setitem-python-complex"])
def test_what_numpy_refuses_raises_the_same(fn, args, argnums):
    plain_args = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    with pytest.raises(TypeError) as want:
        if fn in (_out_complex, _casting_no):  # the plain program, with a plain buffer
            buf = np.zeros(2, np.float32 if fn is _casting_no else np.float64)
            if fn is _out_complex:
                np.add(plain_args[0], 2j, out=buf)
            else:
                np.multiply(plain_args[0], 2.0, out=buf, casting="no")
        else:
            fn(*plain_args)
    with pytest.raises(type(want.value)) as got:
        mg.grad(fn, argnums=argnums)(*args)
    assert str(got.value) == str(want.value)


def test_what_numpy_accepts_still_runs():
    # a real Python float into a float array, complex into a complex array, unsafe casting
    x = np.array([1.0, 2.0])
    g = mg.grad(lambda x: _inplace_complex(x, 0.5))(x)
    np.testing.assert_allclose(g, 2 * 0.25 * x, rtol=1e-12)
    def set_abs2(x, s):
        y = x.copy()
        y[0] = s
        return np.sum(np.abs(y) ** 2)

    gz = mg.grad(set_abs2, argnums=1)(x.astype(complex), 0.5 + 0.5j)
    assert gz == pytest.approx(2 * np.conj(0.5 + 0.5j))  # d|s|^2/dRe - i d|s|^2/dIm (JAX's convention)

    def unsafe(x):
        out = mnp.zeros(2, np.float32)
        np.multiply(x, 2.0, out=out, casting="unsafe")
        return np.sum(out)

    np.testing.assert_allclose(mg.grad(unsafe)(x), [2.0, 2.0])


X32 = np.array([1.5, -2.5, 0.25, 3.0], np.float32)
DTYPE_ARG = {
    "std": lambda x: np.std(x, dtype=np.float64),
    "var": lambda x: np.var(x, dtype=np.float64),
    "var narrower": lambda x: np.var(x.astype(np.float64), dtype=np.float32),
    "var axis ddof": lambda x: np.var(np.outer(x, x), axis=0, dtype=np.float64, ddof=1),
    "nanstd": lambda x: np.nanstd(x, dtype=np.float64),
    "trace": lambda x: np.trace(np.outer(x, x), dtype=np.float64),
    "einsum": lambda x: np.einsum("i,i->", x, x, dtype=np.float64),
    "einsum unsafe": lambda x: np.einsum("i,i->i", x.astype(np.float64), x, dtype=np.float32, casting="unsafe"),
    "matmul": lambda x: np.matmul(x, x, dtype=np.float64),
}


@pytest.mark.parametrize("name", sorted(DTYPE_ARG))
def test_dtype_argument_is_numpys(name):
    fn = DTYPE_ARG[name]
    want = fn(X32.copy())
    seen = []
    g = mg.grad(lambda x: (seen.append(np.array(mg.value(fn(x)))), np.sum(fn(x)) * 1.0)[1])(X32.copy())
    assert seen[0].dtype == np.asarray(want).dtype
    np.testing.assert_array_equal(seen[0], want)
    x64 = X32.astype(np.float64)
    h = 1e-2  # (quadratic functions: no truncation error, and a step float32 rounding does not swamp)
    ref = np.array([(np.sum(fn(x64 + h * e)) - np.sum(fn(x64 - h * e))) / (2 * h) for e in np.eye(4)])
    np.testing.assert_allclose(g, ref, rtol=2e-3, atol=1e-4)


_VAR_CASES = [(fn, dt, kind) for fn in (np.var, np.std, np.nanvar, np.nanstd)
              for dt in (None, np.float64, np.float32, np.complex128)
              for kind in ("float32", "float16", "complex64", "complex128", "float64-nan", "complex128-nan")
              if fn in (np.nanvar, np.nanstd) or not kind.endswith("nan")]  # (np.var of NaN is NaN)


@pytest.mark.parametrize("fn, dtype, kind", _VAR_CASES,
                         ids=[f"{f.__name__}-{d and np.dtype(d).name}-{k}" for f, d, k in _VAR_CASES])
def test_var_family_values_are_numpys(fn, dtype, kind):
    # NumPy's algorithms: nanvar subtracts the mean into the array's own dtype, a complex array
    # summed in a real dtype loses its imaginary parts (NumPy warns)
    base = np.array([0.61, 1.13, 0.87, 1.45, 0.79])
    if kind.endswith("nan"):
        base[2] = np.nan
        kind = kind[:-4]
    x = (base + 0.2j).astype(kind) if "complex" in kind else base.astype(kind)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", np.exceptions.ComplexWarning)
        want = fn(x.copy(), dtype=dtype)
        got = mg.vjp(lambda x: fn(x, dtype=dtype), x.copy())[0]
    assert np.asarray(got).dtype == np.asarray(want).dtype
    np.testing.assert_array_equal(got, want)


def test_nanvar_gradient_against_finite_differences():
    X = np.array([[0.61, np.nan, 0.3], [1.13, 0.87, np.nan], [0.2, 0.4, 0.9]])
    for fn in (np.nanvar, np.nanstd):
        f = lambda x: np.sum(fn(x, axis=0, ddof=0) * np.array([1.0, 2.0, 3.0]))  # noqa: B023
        g = mg.grad(f)(X.copy())
        h = 1e-6
        for i in np.ndindex(X.shape):
            if np.isnan(X[i]):
                assert g[i] == 0
                continue
            e = np.zeros_like(X)
            e[i] = h
            assert abs(g[i] - (f(X + e) - f(X - e)) / (2 * h)) <= 1e-7


def test_longdouble_power_shortcut_and_repeated_pullbacks():
    # NumPy computes longdouble ``x ** 0.5`` (and ``**=``) with np.sqrt: the same bits here
    x = np.array([1.1, 2.3, 0.7], np.longdouble)
    seen = []

    def f(x):
        y = x ** 0.5
        z = x.copy()
        z **= 0.5
        seen.extend([np.array(mg.value(y)), np.array(mg.value(z))])
        return np.sum(y + z)

    g = mg.grad(f)(x)
    np.testing.assert_array_equal(seen[0], x ** 0.5)
    np.testing.assert_array_equal(seen[1], x ** 0.5)
    np.testing.assert_allclose(g.astype(float), 1 / np.sqrt(x.astype(float)), rtol=1e-14)

    # a longdouble output's padding bytes are not its value: a second pullback call is fine
    s = np.longdouble(0.7)

    def h(x):
        y = np.clip(x * s, 0.05, 0.95)
        y[0] = x[0]
        return y

    xs = np.array([0.61, 1.13, 0.87])
    J = mg.jacobian(h)(xs.copy())
    np.testing.assert_allclose(J.astype(float), mg.jacobian(h, mode="fwd")(xs.copy()).astype(float), rtol=0, atol=0)
    np.testing.assert_allclose(np.diag(J).astype(float), [1.0, 0.7, 0.7], rtol=1e-15)


@pytest.mark.parametrize("x", [np.array([0.5, 1.5], np.longdouble), np.array([0.5 + 0.1j, 1.5 + 0j])], ids=str)
def test_interp_refuses_what_numpy_refuses(x):
    k = lambda x: np.sum(np.interp(x, [0.0, 1.0, 2.0], [0.0, 1.0, 0.5]))
    with pytest.raises(TypeError) as want:
        k(x.copy())
    with pytest.raises(TypeError) as got:
        mg.grad(k)(x.copy())
    assert str(got.value) == str(want.value)


def test_longdouble_i0_and_weighted_histogram():
    x = np.array([0.61, 1.13, 0.87, 1.45, 0.79], np.longdouble)
    _, t = mg.jvp(np.i0, (x,), (np.ones(5, np.longdouble),))
    h = 1e-6
    xf = x.astype(float)
    np.testing.assert_allclose(t.astype(float), (np.i0(xf + h) - np.i0(xf - h)) / (2 * h), rtol=1e-8)

    def f(x):
        return np.histogram(np.arange(5.0), bins=2, weights=x)[0]

    out = mg.vjp(f, x)[0]
    assert out.dtype == f(x).dtype
    np.testing.assert_array_equal(out, f(x))
    g = mg.grad(lambda x: np.sum(f(x) * np.array([1.0, 2.0])))(x)
    np.testing.assert_array_equal(g.astype(float), [1.0, 1.0, 2.0, 2.0, 2.0])  # bins [0, 2), [2, 4]


@pytest.mark.parametrize("dtype", [np.complex64, np.float32, np.float16, np.longdouble, np.clongdouble, np.complex128],
                         ids=lambda d: np.dtype(d).name)
def test_scalar_element_arithmetic_has_numpy_scalar_bits(dtype):
    # y[1] * y[2] of NumPy scalars is NumPy's scalar arithmetic, whose last bit can differ
    # from the ufunc loop's (complex64 products): the traced values are the plain call's
    rng = np.random.default_rng(0)

    def f(y):
        y = y.copy()
        y[0] = y[1] * y[2] + y[1] / y[2] - y[2] * 2.5
        return y

    for _ in range(40):
        y = rng.standard_normal(3).astype(dtype)
        if np.dtype(dtype).kind == "c":
            y = (y + 1j * rng.standard_normal(3)).astype(dtype)
        want = f(y)
        np.testing.assert_array_equal(mg.vjp(f, y)[0], want)
        np.testing.assert_array_equal(mg.jvp(f, (y,), (np.ones_like(y),))[0], want)


def test_cumsum_of_a_scalar_into_a_larger_out_of_another_dtype():
    # NumPy accepts a larger out= for the cumsum of a NumPy scalar when the dtypes differ
    # (it casts through a buffer) and writes the first element; the same here
    y = np.array([0.582, 0.28, -1.284])
    x0 = np.array([0.54 + 0.14j, -0.681 + 0.443j, -0.113 - 0.322j])

    def f(y):
        x = mnp.zeros(3, complex)
        x[...] = x0
        np.cumsum(np.min(y), axis=0, out=x)
        return np.sum(np.sin(x).real)

    def plain(y):
        x = x0.copy()
        np.cumsum(np.min(y), axis=0, out=x)
        return np.sum(np.sin(x).real)

    assert mg.value_and_grad(f)(y)[0] == plain(y)
    h = 1e-6
    np.testing.assert_allclose(mg.grad(f)(y), [(plain(y + h * e) - plain(y - h * e)) / (2 * h) for e in np.eye(3)],
                               rtol=1e-7, atol=1e-10)


def _putmask_f64(x):
    np.putmask(x, x > 1.0, np.array([0.9]))
    return np.sum(x * x)


def _place_f64(x):
    np.place(x, x > 1.0, np.array([0.9]))
    return np.sum(x * x)


def _astype(dt, casting):
    return lambda x: np.sum(x.astype(dt, casting=casting)) * 1.0


@pytest.mark.parametrize("fn", [_putmask_f64, _place_f64, _astype(np.float16, "safe"),
                                _astype(np.int32, "same_kind"), _astype(np.float64, "no")],
                         ids=["putmask", "place", "astype-safe", "astype-same_kind", "astype-no"])
def test_casting_rules_of_putmask_place_and_astype_are_numpys(fn):
    # np.place/np.putmask cast the values under the 'safe' rule; astype takes casting=
    x = np.array([1.3, 0.6, 0.7, 1.9], np.float32)
    with pytest.raises(TypeError) as want:
        fn(x.copy())
    for run in (lambda: mg.grad(fn)(x.copy()), lambda: mg.jvp(fn, (x.copy(),), (np.ones(4, np.float32),))):
        with pytest.raises(TypeError) as got:
            run()
        assert str(got.value) == str(want.value)


def test_putmask_and_astype_still_take_what_numpy_takes():
    # a Python float or a NumPy scalar into putmask (weak, or NumPy's scalar rule), a widening astype
    def f(x):
        np.putmask(x, x > 1.0, 0.9)
        np.place(x, x < 0.65, np.float64(0.5))
        return np.sum(x.astype(np.float64, casting="safe") ** 2)

    x = np.array([1.3, 0.6, 0.7, 1.9])
    want = np.where((x > 1.0) | (x < 0.65), 0.0, 2 * x)  # the replaced elements are constants
    np.testing.assert_allclose(mg.grad(f)(x.copy()), want, rtol=1e-12)
    np.testing.assert_allclose(mg.jvp(f, (x.copy(),), (np.ones(4),))[1], want.sum(), rtol=1e-12)


def test_unsafe_casting_of_a_complex_result_into_a_real_out():
    # NumPy takes casting="unsafe" (the real part, one ComplexWarning per call); the gradient of
    # Re(z*z) + Re(exp(z)) on the kept element is checked against central differences
    def f(z):
        r = mnp.zeros(2)
        np.multiply(z, z, out=r, casting="unsafe")
        np.exp(z, out=r, casting="unsafe", where=np.array([True, False]))
        return np.sum(r)

    z = np.array([1 + 2j, 3 - 1j])
    with warnings.catch_warnings(record=True) as plain_w:
        warnings.simplefilter("always")
        want_v = f(z.copy())
    h = 1e-6
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", np.exceptions.ComplexWarning)
        want = np.array([(f(z + h * e) - f(z - h * e)) / (2 * h)
                         - 1j * (f(z + 1j * h * e) - f(z - 1j * h * e)) / (2 * h) for e in np.eye(2)])
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        v, g = mg.value_and_grad(f)(z.copy())
    assert v == want_v and len(w) == len(plain_w) == 2
    np.testing.assert_allclose(g, want, rtol=1e-6)
    t = np.array([0.3 - 0.2j, 1.1 + 0.4j])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", np.exceptions.ComplexWarning)
        np.testing.assert_allclose(mg.jvp(f, (z.copy(),), (t,))[1], np.real(np.sum(want * t)), rtol=1e-6)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_a_numpy_scalar_to_a_traced_power_has_the_scalar_operators_bits(dtype):
    # `c ** x[0]` of a NumPy scalar c: NumPy's scalar arithmetic, whose last bit differs from the
    # power ufunc's for some inputs (np.power itself keeps the ufunc's bits)
    rng = np.random.default_rng(7)
    c = dtype(2.3)

    def op(x):
        return c ** x[0]

    def ufunc(x):
        return np.power(c, x[0])

    for v in rng.uniform(0.1, 3.0, 40).astype(dtype):
        x = np.array([v])
        for f, want in ((op, c ** x[0]), (ufunc, np.power(c, x[0]))):
            got = mg.value_and_grad(f)(x.copy())[0]
            assert got.dtype == want.dtype and got.tobytes() == want.tobytes()
    x = np.array([dtype(1.7)])
    np.testing.assert_allclose(mg.grad(op)(x), [np.log(c) * c ** x[0]], rtol=1e-6)  # d/dx c^x


@pytest.mark.parametrize("x, dt, ok", [(np.array([1.5, 2.0]), np.int64, False),
                                        (np.array([1.0, 2.0]), np.int64, True),
                                        (np.array([1e300]), np.float32, False),
                                        (np.array([0.5, -2.25]), np.float32, True)])
def test_astype_same_value_checks_the_values(x, dt, ok):
    # NumPy >= 2.4 raises where the cast would change a value; the traced cast truncated (or
    # overflowed to inf) without a word
    def f(x):
        y = x.astype(dt, casting="same_value")
        return np.sum(y * 2.0) if y.dtype.kind == "f" else np.sum(x * y)

    if ok:
        # closed forms: the cast's derivative is 1; an integer cast is a constant
        want = np.full(x.shape, 2.0) if dt is np.float32 else x.astype(dt)
        np.testing.assert_allclose(mg.grad(f)(x.copy()), want)
        assert mg.value_and_grad(f)(x.copy())[0] == f(x.copy())
    else:
        with pytest.raises(ValueError) as plain:
            f(x.copy())
        with pytest.raises(ValueError) as traced:
            mg.grad(f)(x.copy())
        assert str(traced.value) == str(plain.value)


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
@pytest.mark.parametrize("increasing", [False, True])
def test_vander_computes_in_its_result_dtype(dtype, increasing):
    # NumPy writes x into a float64 result and multiplies there; the traced powers were
    # multiplied in float32 (or float16) and then widened: 1939.32947 for 1939.32966 (found
    # with PyTorch's OpInfo reference inputs)
    x = np.array([-6.6361, 7.855, 0.5, 3.25], dtype=dtype)
    w = np.random.default_rng(2).standard_normal((4, 5))
    plain = np.vander(x, 5, increasing=increasing)
    traced = mg.vjp(lambda x: np.vander(x, 5, increasing=increasing), x)[0]
    assert traced.dtype == plain.dtype == np.float64
    np.testing.assert_array_equal(traced, plain)
    # the derivative of the float64 powers of x's (exactly representable) values, in closed form
    xs = x.astype(np.float64)
    k = np.arange(5) if increasing else np.arange(4, -1, -1)
    want = np.sum(w * k * np.where(k > 0, xs[:, None] ** np.maximum(k - 1, 0), 0.0), axis=1)
    g = mg.grad(lambda x: np.sum(np.vander(x, 5, increasing=increasing) * w))(x)
    assert g.dtype == dtype
    np.testing.assert_allclose(g, want.astype(dtype), rtol=2e-3 if dtype == np.float16 else 1e-6)
    tangent = mg.jvp(lambda x: np.sum(np.vander(x, 5, increasing=increasing) * w), (x,), (np.ones(4, dtype),))[1]
    assert tangent == pytest.approx(np.sum(want), rel=1e-12)


def test_a_lower_precision_constant_gives_partials_at_the_loop_precision():
    # NumPy casts a float32 constant to float64 before a float64 loop; the partials must be
    # computed on the cast value (they were float32-accurate: 1/c off by 7e-9 relative).
    # Oracles: closed forms in float64 and central differences
    c = np.float32(0.7)
    c64 = np.float64(c)
    x = np.array([1.3])
    cases = [(lambda x: np.sum(x / c), 1 / c64), (lambda x: np.sum(c ** x), np.log(c64) * c64 ** 1.3),
             (lambda x: np.sum(x * np.array([c])), c64), (lambda x: np.sum(np.arctan2(x, c)), c64 / (c64 ** 2 + 1.69))]
    for f, want in cases:
        np.testing.assert_allclose(mg.grad(f)(x), [want], rtol=1e-14)
        np.testing.assert_allclose(mg.jvp(f, (x,), (np.ones(1),))[1], want, rtol=1e-14)
        fd = (f(x + 1e-6) - f(x - 1e-6)) / 2e-6
        np.testing.assert_allclose(mg.grad(f)(x), [fd], rtol=1e-9)
    np.testing.assert_allclose(mg.hessian(lambda x: np.sum(c ** x))(x), [[np.log(c64) ** 2 * c64 ** 1.3]], rtol=1e-13)


@pytest.mark.parametrize("call", [
    lambda x, y: np.sin(x, signature=(np.float64, np.float64)),
    lambda x, y: np.sin(x, signature="d->d"),
    lambda x, y: np.add(x, y, signature="ff->f"),
    lambda x, y: np.multiply(x, y, signature=(np.float64,) * 3),
], ids=["tuple", "string", "float32", "binary tuple"])
def test_a_ufunc_signature_of_one_loop_type_is_its_dtype(call):
    # signature= of one type selects the loop dtype= selects (mutagrad refused the keyword)
    x, y = np.array([0.35, 1.2], np.float32), np.array([0.5, -0.3], np.float32)

    def f(x):
        r = call(x, y)
        return np.sum(r * r)

    value, g = mg.value_and_grad(f)(x)
    want = f(x)
    assert value == want and type(value) is type(want)
    h = 1e-3  # (central differences in the loop's precision, on the plain function)
    fd = [(f(x + h * e) - f(x - h * e)) / (2 * h) for e in np.eye(2, dtype=np.float32)]
    np.testing.assert_allclose(g, fd, rtol=2e-3)


def test_a_ufunc_signature_numpy_refuses_or_of_several_types_is_refused():
    x = np.array([0.35, 1.2])
    with pytest.raises(ValueError, match="type-string for sin"):  # (NumPy's own error)
        mg.grad(lambda x: np.sum(np.sin(x, signature="dd->d")))(x)
    with pytest.raises(TypeError, match=r"signature= of several loop types.*x\.astype\(dtype\)"):
        mg.grad(lambda x: np.sum(np.add(x, x, signature=(None, None, np.float64))))(x)


def test_a_zero_d_ufunc_call_that_where_leaves_out_warns_of_nothing():
    # (rotations) np.divide(np.sin(n), n, out=s, where=n > 0) at n = 0: NumPy divides nothing and warns of nothing;
    # mutagrad divided the 0-d operands anyway and warned "invalid value encountered in divide"
    def f(x):
        n = np.linalg.norm(x)
        s = np.ones_like(n)
        np.divide(np.sin(n), n, out=s, where=n > 0)
        return s * np.sum(x)

    x0 = np.zeros(3)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert f(x0) == 0.0
        g = mg.grad(f)(x0)
        t = mg.jvp(f, (x0,), (np.array([1.0, 2.0, 3.0]),))[1]
        with np.errstate(all="raise"):  # (nor raises, as NumPy's call does not)
            mg.grad(f)(x0)
    h = 1e-6  # (near 0, s = sin(n) / n = 1 - n^2 / 6: f is sum(x) to second order)
    fd = np.array([(f(h * e) - f(-h * e)) / (2 * h) for e in np.eye(3)])
    np.testing.assert_allclose(g, fd, rtol=1e-9)
    assert t == pytest.approx(fd @ [1.0, 2.0, 3.0])
