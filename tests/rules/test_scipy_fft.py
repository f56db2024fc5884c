"""scipy.fft called as written (rules/scipy/fft.py, a uarray backend): every transform with
n/s, axis/axes, the three norms, DCT/DST types 1-4 and orthogonalize, real, complex and
float32 inputs. Each case is checked three ways: against the explicit matrix (the plain
SciPy transform applied to the identity: the reverse rule must give its transpose for the
real inner product, the forward rule the matrix itself), against central differences of
the plain function (mg.testing.check_grads, which also checks forward against reverse),
and its value against the plain SciPy call, bit for bit."""
import numpy as np
import pytest

sf = pytest.importorskip("scipy.fft")

import mutagrad as mg
from mutagrad.testing import check_grads

rng = np.random.default_rng(11)
NORMS = (None, "backward", "ortho", "forward")


def draw(shape, dtype):
    x = rng.standard_normal(shape)
    if np.dtype(dtype).kind == "c":
        x = x + 1j * rng.standard_normal(shape)
    return x.astype(dtype)


def _real_basis(x):
    """The real coordinates of x's space: unit vectors (and i times them for a complex x)."""
    for k in range(x.size):
        e = np.zeros(x.size, dtype=x.dtype)
        e[k] = 1
        yield e.reshape(x.shape)
        if x.dtype.kind == "c":
            e = np.zeros(x.size, dtype=x.dtype)
            e[k] = 1j
            yield e.reshape(x.shape)


def _from_real(x, coords):
    c = np.asarray(coords)
    if x.dtype.kind == "c":
        c = c[0::2] + 1j * c[1::2]
    return c.reshape(x.shape)


def check_against_matrix(fn, x, tol):
    """The reverse rule against the transpose of the explicit matrix (columns: fn of the unit
    vectors and of i times them), the forward rule against the matrix itself,
    and the value against the plain call, bit for bit."""
    cols = [np.asarray(fn(e)) for e in _real_basis(x)]  # (plain SciPy on the identity's columns)
    ref = fn(x.copy())
    y, pull = mg.vjp(fn, x)
    assert np.asarray(y).dtype == ref.dtype
    np.testing.assert_array_equal(y, ref)
    gbar = draw(ref.shape, np.result_type(ref.dtype, np.float64))
    (xbar,) = pull(gbar.astype(ref.dtype))
    # (the public cotangents are JAX's: x̄ = conj(Σ Re(conj(ȳ*) y_k)) with y_k fn of each real coordinate)
    want = np.conj(_from_real(x, [np.sum(np.real(gbar * c)) for c in cols]))
    assert np.asarray(xbar).dtype == x.dtype
    np.testing.assert_allclose(xbar, want, rtol=tol, atol=tol * np.max(np.abs(want)))
    v = draw(x.shape, x.dtype)
    coords = [t for vk in v.ravel() for t in ((vk.real, vk.imag) if x.dtype.kind == "c" else (vk,))]
    ydot_want = sum(float(ck) * c for ck, c in zip(coords, cols))
    _, ydot = mg.jvp(fn, (x,), (v,))
    np.testing.assert_allclose(ydot, ydot_want, rtol=tol, atol=tol * np.max(np.abs(ydot_want)))
    # the dot-product identity between the two modes: Re Σ ȳ ẏ = Re Σ x̄ ẋ (public cotangents)
    lhs = np.sum(np.real(gbar * ydot))
    rhs = np.sum(np.real(xbar * v))
    assert abs(lhs - rhs) <= tol * 10 * (abs(lhs) + 1)


def run(fn, x):
    single = x.dtype in (np.float32, np.complex64)
    check_against_matrix(fn, x, 2e-4 if single else 1e-10)
    if single:  # (each mode against central differences; the modes' identity was checked above)
        check_grads(fn, x, modes=("fwd",), atol=2e-2, rtol=2e-2)
        check_grads(fn, x, modes=("rev",), atol=2e-2, rtol=2e-2)
    else:
        check_grads(fn, x)


# -- the rule table: (covers, function, input), every case checked by run() -------------------


def case(name, x, *args, **kw):
    fn = getattr(sf, name)
    return (f"scipy.fft.{name}", lambda a: fn(a, *args, **kw), x)


# (input shape, n choices: default, crop, pad, the inputs' dtypes)
ONE_D = {
    "fft": ((5,), (None, 3, 7), ("float64", "complex128", "float32")),
    "ifft": ((5,), (None, 4, 8), ("complex128", "float64", "complex64")),
    "rfft": ((6,), (None, 4, 9), ("float64", "float32")),
    "ihfft": ((5,), (None, 3, 8), ("float64", "float32")),
    "irfft": ((4,), (None, 5, 9), ("complex128", "float64", "complex64")),
    "hfft": ((5,), (None, 6, 11), ("complex128", "float64", "complex64")),
}
CASES = [case(name, draw(shape + (2,) if axis == 0 else (2,) + shape, dtype), n=n, axis=axis, norm=norm)
         for name, (shape, ns, dtypes) in ONE_D.items()
         for n in ns for norm in NORMS for axis in (-1, 0) for dtype in dtypes[:2]
         if not (axis == 0 and norm in (None, "forward"))]
CASES += [case(name, draw((2,) + shape, dtypes[-1]), n=ns[i % 3], norm=NORMS[i])  # (single precision)
          for name, (shape, ns, dtypes) in ONE_D.items() for i in range(4)]
# n-D: (suffix, input shape, s, axes)
CASES += [case(kind + suffix, draw(shape, "float64" if kind in ("rfft", "ihfft") else "complex128"),
               s=s, axes=axes, norm=norm)
          for kind in ("fft", "ifft", "rfft", "irfft", "hfft", "ihfft")
          for suffix, shape, s, axes in (("2", (3, 4), None, (-2, -1)), ("2", (2, 3, 4), (4, 3), (0, 2)),
                                         ("n", (2, 3, 4), None, None), ("n", (3, 4, 2), (2, 5), (1, 0)),
                                         ("n", (3, 4), (5,), (-1,)))
          for norm in NORMS[1:]]
CASES += [case(name, draw((3, 4), "float32" if name in ("rfft2", "ihfft2", "ihfftn") else "complex64"))
          for name in ("fft2", "ifft2", "rfft2", "irfft2", "hfft2", "ihfft2", "fftn", "irfftn", "ihfftn")]
# DCT and DST: every type, norm and orthogonalize; then n (crop, pad), axis, complex and float32
R2R = ("dct", "idct", "dst", "idst")
CASES += [case(name, draw((2, 5), "float64"), type=t, norm=norm, orthogonalize=orth)
          for name in R2R for t in (1, 2, 3, 4) for norm in NORMS for orth in (None, False, True)]
CASES += [case(name, draw((5, 2) if axis == 0 else (2, 5), dtype), type=t, n=n, axis=axis, norm=norm)
          for name in R2R for t in (1, 2, 3, 4) for norm, n, axis, dtype in
          (("ortho", 3, 0, "float64"), ("backward", 7, -1, "complex128"), ("forward", 4, 0, "float32"))]
CASES += [case(name + "n", draw((3, 4), "float64"), type=t, s=s, axes=axes, norm=norm)
          for name in R2R for t in (1, 2, 3, 4) for norm, s, axes in
          ((None, None, None), ("ortho", (4, 3), (1, 0)), ("forward", (3,), (-1,)))]
CASES += [case("dct", draw((3, 5), "float64"), 3, 4, 0, "ortho", False, None, False),  # (positional)
          case("idstn", draw((3, 5), "float64"), 2, (4, 4), (0, 1), "forward", orthogonalize=True)]
# the fast Hankel transform, in a (with an offset and a bias)
CASES += [case(name, draw(shape, "float64"), dln, mu, offset=offset, bias=bias)
          for name in ("fht", "ifht") for offset, bias in ((0.0, 0.0), (0.3, 0.0), (0.2, 0.4), (0.0, -0.6))
          for shape, dln, mu in (((2, 6), 0.1, 0.5), ((7,), 0.05, -0.3))]


@pytest.mark.parametrize("covers,fn,x", CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_rule(covers, fn, x):
    run(fn, x)


def test_shifts_and_frequencies():
    run(sf.fftshift, draw((5,), "float64"))
    run(lambda a: sf.ifftshift(a, axes=1), draw((2, 5), "complex128"))
    # a traced spacing d: fftfreq is [0, 1, ..., -1] / (n d), differentiated in d
    g = mg.grad(lambda d: np.sum(sf.fftfreq(4, d) * np.arange(4.0)))(0.5)
    assert np.isclose(g, 6 / (4 * 0.25))
    check_grads(lambda d: sf.rfftfreq(5, d=d) ** 2, 0.7)
    assert np.array_equal(mg.vjp(lambda d: sf.fftfreq(6, d), 0.3)[0], sf.fftfreq(6, 0.3))


# -- values, arguments, higher order, mutation ----------------------------------------------


@pytest.mark.parametrize("dtype", ("float32", "float64", "longdouble", "complex64", "complex128", "clongdouble"))
def test_values_bit_for_bit_every_dtype(dtype):
    x = draw((3, 6), dtype)
    calls = [lambda a: sf.fft(a), lambda a: sf.ifftn(a, norm="ortho"), lambda a: sf.dct(a, type=3, n=4),
             lambda a: sf.idstn(a, type=1, norm="forward"), lambda a: sf.fft2(a, s=(4, 5), workers=2)]
    if dtype in ("float32", "float64", "longdouble"):
        calls += [lambda a: sf.rfft(a, n=5), lambda a: sf.ihfft2(a), lambda a: sf.fht(a, 0.1, 0.5, bias=0.2)]
    else:
        calls += [lambda a: sf.irfft(a, 9), lambda a: sf.hfftn(a, axes=(0,))]
    for fn in calls:
        ref = fn(x.copy())
        out, pull = mg.vjp(fn, x)
        assert out.dtype == ref.dtype
        np.testing.assert_array_equal(out, ref)
        _, tan = mg.jvp(fn, (x,), (x,))
        np.testing.assert_array_equal(tan, ref)  # (linear: the tangent is the same transform of x)
        (g,) = pull(np.ones_like(ref))
        assert g.dtype == x.dtype


def test_list_input_and_traced_scalars():
    check_grads(lambda a, b: sf.fft([a, b, 1.0, a * b]), 0.3, -1.2)
    check_grads(lambda a: sf.dct(a.tolist() if False else [a[0], a[1], a[2]], type=4), draw((3,), "float64"))


@pytest.mark.parametrize("name,kw", (("fft", {}), ("fft", {"n": 4}), ("fft", {"n": 9}), ("ifftn", {"axes": (0,)}),
                                     ("fft2", {"s": (3, 5)}), ("rfft", {}), ("irfft", {}), ("dct", {}),
                                     ("dctn", {"type": 1}), ("idst", {"n": 3, "axis": 0}), ("dstn", {"s": (2, 8)})))
def test_overwrite_x_does_what_a_plain_call_does(name, kw):
    # SciPy computes in x's memory where it can (the result is then x, or x cropped to n):
    # mutagrad asks SciPy what it does and does the same, as a write into the traced x
    x = draw((4, 6), "complex128" if name in ("fft", "ifftn", "fft2", "irfft") else "float64")
    fn = getattr(sf, name)

    def f(a):
        y = fn(a, overwrite_x=True, **kw)
        out = y * 1.0
        y[0] = 2.5  # (seen in a when y is a's memory, as in a plain call)
        return out, a * 1.0

    xp = x.copy()
    want = f(xp)
    got, _ = mg.vjp(f, x)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype
        np.testing.assert_array_equal(g, w)
    np.testing.assert_array_equal(x, xp)  # (the caller's array: what the plain call left)
    check_grads(f, draw((4, 6), x.dtype))  # (and the arguments' final contents, as a plain call leaves them)


def test_arguments_unchanged_as_a_plain_call_leaves_them():
    x = draw((3, 5), "float64")
    x0 = x.copy()
    mg.grad(lambda a: np.sum(sf.dct(a, axis=0) ** 2) + np.sum(np.abs(sf.rfft2(a)) ** 2))(x)
    mg.jvp(lambda a: sf.idctn(a, type=1), (x,), (x,))
    np.testing.assert_array_equal(x, x0)


def test_second_order_through_a_nonlinearity():
    x = draw((5,), "float64")
    check_grads(lambda a: np.sum(np.abs(sf.fft(np.sin(a), n=7, norm="ortho")) ** 3), x, order=2)
    check_grads(lambda a: np.sum(sf.dct(a ** 2, type=1) * sf.idst(a, type=3, norm="forward")), x, order=2)
    check_grads(lambda a: np.sum(sf.irfft(np.exp(1j * a), n=8) ** 2), x, order=2)
    check_grads(lambda a: np.sum(sf.fht(a ** 3, 0.1, 0.2, bias=0.3) ** 2), x, order=2)
    h = mg.hessian(lambda a: np.sum(sf.dctn(a.reshape(2, 3), norm="ortho") ** 2))(draw((6,), "float64"))
    np.testing.assert_allclose(h, 2 * np.eye(6), atol=1e-12)  # (an orthogonal map keeps the norm)
    # nested: grad of a function that takes a grad
    inner = mg.grad(lambda a: np.sum(sf.dst(a) * np.cos(a)))
    check_grads(lambda a: np.sum(inner(a) ** 2), x)


def test_a_mutating_program():
    def prog(u):
        out = np.zeros_like(u)
        out[1:] = sf.dct(u[:-1], norm="ortho")
        u += 0.5 * sf.idct(out, type=3)
        u[::2] = sf.fft(u, n=3).real
        return np.sum(u ** 2) + np.sum(out * np.sin(u))

    check_grads(prog, draw((6,), "float64"))


def test_plain_calls_are_scipys_own():
    # after importing mutagrad, plain calls are declined by its backend: SciPy's values, bit for bit
    x = draw((4, 8), "float64")
    z = draw((4, 8), "complex128")
    calls = [(sf.fft, z), (sf.rfftn, x), (sf.dct, x), (sf.idstn, x), (sf.hfft, z), (sf.fht, x)]
    for fn, a in calls:
        args = (a, 0.1, 0.5) if fn is sf.fht else (a,)
        got = fn(*args)
        with sf.set_backend("scipy", only=True):  # (SciPy's backend alone)
            want = fn(*args)
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)
    y = z.copy()
    assert sf.fft(y, overwrite_x=True) is not None and not np.array_equal(y, z)  # (plain: SciPy's own)
    rows = draw((3, 5), "float64").tolist()  # (a nested list: declined without a differentiation running)
    np.testing.assert_array_equal(sf.fft2(rows), sf.fft2(np.array(rows)))


def test_a_backend_the_program_sets_first_is_named():
    # (the regress15 tester: `with set_backend("scipy")` was described as only=True / skip_backend)
    f = lambda u: np.sum(np.abs(sf.fft(u)) ** 2)
    with sf.set_backend("scipy"), pytest.raises(mg.TracerEscapeError,
                                                match=r"set_backend\(...\) \(a `with` block.*try_last=True"):
        mg.grad(f)(np.ones(4))
    u = np.array([0.5, -1.0, 2.0, 0.25])
    np.testing.assert_allclose(mg.grad(f)(u), 2 * 4 * u, rtol=1e-14)  # outside: Parseval, by hand


# -- errors ---------------------------------------------------------------------------------


def _raises(fn, x, cls=mg.DifferentiationError):
    with pytest.raises(cls) as info:
        mg.grad(fn)(x)
    return str(info.value)


def test_traced_hankel_parameter_is_refused():
    x = draw((6,), "float64")
    msg = _raises(lambda m: np.sum(sf.fht(x, 0.1, m)), 0.5, mg.NoRuleError)
    assert "scipy.fft.fht" in msg and "mu is a traced value" in msg and "test_scipy_fft.py" in msg
    assert "mg.stop_gradient(mu)" in msg
    msg = _raises(lambda d: np.sum(sf.ifht(x * d, d, 0.5)), 0.1, mg.NoRuleError)
    assert "scipy.fft.ifht" in msg and "dln" in msg


def test_bad_arguments_raise_scipys_own_errors():
    x = draw((6,), "float64")
    with pytest.raises(ValueError, match="Invalid norm value"):
        mg.grad(lambda a: np.sum(sf.dct(a, norm="bad")))(x)
    with pytest.raises(ValueError):
        mg.grad(lambda a: np.sum(sf.dct(a, type=5)))(x)
    with pytest.raises(NotImplementedError, match="plan"):
        mg.grad(lambda a: np.sum(np.real(sf.fft(a, plan=object()))))(x)
    with pytest.raises(TypeError):
        mg.grad(lambda a: np.sum(np.real(sf.fft(a, nn=3))))(x)
    with pytest.raises(ValueError, match="axes must be unique"):
        mg.grad(lambda a: np.sum(np.real(sf.fftn(a.reshape(2, 3), axes=(0, 0)))))(x)


def test_scipy_fftpack_stays_refused():
    fp = pytest.importorskip("scipy.fftpack")
    msg = _raises(lambda a: np.sum(fp.fft(a).real), draw((6,), "float64"), mg.TracerEscapeError)
    assert "scipy.fftpack function fft" in msg
    msg = _raises(lambda a: np.sum(fp.dct(a)), draw((6,), "float64"), mg.TracerEscapeError)
    assert "scipy.fftpack function dct" in msg and "scipy.fft.dct" in msg
