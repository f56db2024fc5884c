"""mutagrad.scipy.ndimage against SciPy's own functions. Every derivative is checked against central
differences of scipy.ndimage's function itself on plain arrays (``_either``: the function under
test calls SciPy's when no argument is traced, mutagrad's when one is), forward mode against
reverse mode (check_grads), second order against differences of the gradient; every value
against a plain SciPy call, bit for bit (and dtype)."""
import math

import numpy as np
import pytest

import mutagrad as mg
from mutagrad.core import Tracer
from mutagrad.errors import UnsupportedInputError
from mutagrad.testing import check_grads, numerical_grad

nd = pytest.importorskip("scipy.ndimage")
import mutagrad.scipy.ndimage as mnd

MODES = ("reflect", "constant", "nearest", "mirror", "wrap", "grid-wrap", "grid-constant", "grid-mirror")
RNG = np.random.default_rng(0)


def _draw(shape, cplx=False, dtype=np.float64):
    a = RNG.standard_normal(shape)
    if cplx:
        a = a + 1j * RNG.standard_normal(shape)
    return a.astype(dtype) if not cplx else a


def _either(name, argnames, **kw):
    """f(*args): scipy.ndimage.<name> when every argument is plain (the oracle finite differences
    run), mutagrad.scipy.ndimage.<name> when one is traced; args are passed as ``argnames``."""
    ours, theirs = getattr(mnd, name), getattr(nd, name)

    def f(*args):
        fn = ours if any(isinstance(a, Tracer) for a in args) else theirs
        return fn(**dict(zip(argnames, args)), **kw)

    return f


def _check_value(name, argnames, args, **kw):
    """The traced call's value is SciPy's: its bits and its dtype."""
    want = getattr(nd, name)(**dict(zip(argnames, args)), **kw)
    got = mg.vjp(_either(name, argnames, **kw), *args)[0]
    assert got.dtype == want.dtype, (name, kw, got.dtype, want.dtype)
    np.testing.assert_array_equal(got, want, err_msg=f"{name} {kw}")


def _check(name, argnames, args, deriv=1, **kw):
    """The traced call's value is SciPy's (bits and dtype); its derivatives in every argument of
    ``args`` against SciPy's by central differences, forward against reverse (deriv=2: second order too)."""
    _check_value(name, argnames, args, **kw)
    f = _either(name, argnames, **kw)
    if deriv == 2:  # (filters are linear in the input: a nonlinearity after makes the Hessian not 0)
        check_grads(lambda *a: np.sin(np.real(f(*a))), *args, order=2)
    else:
        check_grads(f, *args)


def _origins(k):
    """The origins SciPy allows for a kernel of k samples."""
    return list(range(-(k // 2), (k - 1) // 2 + 1))


X2, W4, W23 = _draw((3, 5)), _draw(4), _draw((2, 3))
XF = np.fft.fft2(_draw((3, 5)))  # (a transform: the Fourier filters' input)
CASES = [  # (what it covers, function, arguments, order): one line per function, second order
    ("scipy.ndimage.correlate1d", _either("correlate1d", ("input", "weights", "cval"), mode="constant", origin=1),
     (X2, W4, 0.4), 2),
    ("scipy.ndimage.correlate", _either("correlate", ("input", "weights", "cval"), mode="constant"), (X2, W23, -0.3), 2),
    ("scipy.ndimage.uniform_filter1d", _either("uniform_filter1d", ("input", "cval"), size=4, mode="constant"),
     (X2, 0.7), 2),
    ("scipy.ndimage.convolve1d", _either("convolve1d", ("input", "weights"), axis=0, mode="mirror"), (X2, W4), 2),
    ("scipy.ndimage.convolve", _either("convolve", ("input", "weights"), mode="wrap"), (X2, W23), 2),
    ("scipy.ndimage.uniform_filter", _either("uniform_filter", ("input",), size=(2, 3), mode="nearest"), (X2,), 2),
    ("scipy.ndimage.gaussian_filter1d", _either("gaussian_filter1d", ("input", "sigma"), order=1), (X2, 0.8), 2),
    ("scipy.ndimage.gaussian_filter", _either("gaussian_filter", ("input", "sigma", "cval"), mode="constant"),
     (X2, 1.1, 0.2), 2),
    ("scipy.ndimage.sobel", _either("sobel", ("input",), axis=0), (X2,), 2),
    ("scipy.ndimage.prewitt", _either("prewitt", ("input", "cval"), mode="constant"), (X2, 0.5), 2),
    ("scipy.ndimage.laplace", _either("laplace", ("input",), mode="wrap"), (X2,), 2),
    ("scipy.ndimage.gaussian_laplace", _either("gaussian_laplace", ("input", "sigma")), (X2, 0.9), 2),
    ("scipy.ndimage.gaussian_gradient_magnitude", _either("gaussian_gradient_magnitude", ("input", "sigma")),
     (X2, 0.9), 2),
    ("scipy.ndimage.map_coordinates", _either("map_coordinates", ("input", "coordinates", "cval"), mode="constant"),
     (X2, np.array([[0.3, 1.4, 1.8, -0.6], [0.7, 2.2, 3.6, 1.3]]), 0.4), 2),
    ("scipy.ndimage.shift", _either("shift", ("input", "shift"), mode="nearest"), (X2, np.array([0.3, -0.45])), 2),
    ("scipy.ndimage.zoom", _either("zoom", ("input",), zoom=1.5, order=1, mode="mirror"), (X2,), 2),
    ("scipy.ndimage.affine_transform", _either("affine_transform", ("input", "matrix", "offset", "cval")),
     (X2, np.array([[0.9, 0.35], [-0.25, 1.1]]), np.array([0.37, -0.61]), 0.4), 2),
    ("scipy.ndimage.rotate", _either("rotate", ("input", "angle", "cval"), mode="constant"), (X2, 23.7, 0.4), 2),
    ("scipy.ndimage.spline_filter1d", _either("spline_filter1d", ("input",), axis=0, mode="nearest"), (X2,), 2),
    ("scipy.ndimage.spline_filter", _either("spline_filter", ("input",), order=4, mode="grid-wrap"), (X2,), 2),
    ("scipy.ndimage.fourier_gaussian", _either("fourier_gaussian", ("input", "sigma")), (XF, np.array([0.8, 1.3])), 2),
    ("scipy.ndimage.fourier_uniform", _either("fourier_uniform", ("input", "size"), n=9), (XF, 2.3), 2),
    ("scipy.ndimage.fourier_ellipsoid", _either("fourier_ellipsoid", ("input", "size")), (XF, np.array([1.7, 3.1])), 2),
    ("scipy.ndimage.fourier_shift", _either("fourier_shift", ("input", "shift"), n=8, axis=0), (XF, 0.7), 2),
]


@pytest.mark.parametrize("covers,fn,args,order", CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_rule(covers, fn, args, order):
    f = fn if order == 1 else (lambda *a: np.sin(fn(*a)))
    check_grads(f, *args, modes=("fwd", "rev"), order=order)


# -- the sweep: every mode, axes of 1, 2, 3 and 7 samples, kernels of 1 to 9 (longer than the axis),
# every origin for the values, one per case (in turn the first, the middle and the last) for the derivatives

LENGTHS, KERNELS = (1, 2, 3, 7), range(1, 10)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name", ["correlate1d", "convolve1d", "uniform_filter1d"])
def test_1d_filters_every_mode_length_kernel_and_origin(name, mode):
    for i, (n, k) in enumerate((n, k) for n in LENGTHS for k in KERNELS):
        axis = i % 2  # (along the rows or the columns of a 2-D array)
        x = _draw((n, 2) if axis == 0 else (2, n))
        w, cval = _draw(k), 0.5 - 0.1 * i
        for j, origin in enumerate(_origins(k)):
            ours = j == [0, len(_origins(k)) // 2, len(_origins(k)) - 1][i % 3]  # (derivatives for one origin)
            kw = {"axis": axis, "mode": mode, "origin": origin}
            argnames, args = (("input", "cval"), (x, cval)) if name == "uniform_filter1d" else \
                (("input", "weights", "cval"), (x, w, cval))
            if name == "uniform_filter1d":
                kw["size"] = k
            (_check if ours else _check_value)(name, argnames, args, **kw)


ND_SHAPES = [((7,), [(1,), (3,), (4,), (9,)]), ((1, 3), [(1, 1), (2, 4), (3, 3)]),
             ((2, 2), [(2, 3), (5, 1), (3, 5)]), ((3, 7), [(1, 9), (4, 2), (3, 3)]), ((2, 3), [(9, 2)]),
             ((2, 3, 2), [(2, 2, 3)])]


def _scipy_reads_outside(shape, kshape, origins, mode):
    # (SciPy's N-dimensional 'reflect' offsets: wrong 4n or more samples before an axis of n >= 2)
    return mode in ("reflect", "grid-mirror") and any(2 <= n <= (k // 2 + o) // 4
                                                      for n, k, o in zip(shape, kshape, origins))


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name", ["correlate", "convolve"])
def test_nd_filters_every_mode_and_origin(name, mode):
    for i, (shape, kshapes) in enumerate(ND_SHAPES):
        for j, ks in enumerate(kshapes):
            x, w, cval = _draw(shape), _draw(ks), 0.3 + 0.2 * j
            last = tuple(_origins(k)[-1] for k in ks)
            for origin in (0, tuple(_origins(k)[0] for k in ks), last):
                o = origin if isinstance(origin, tuple) else (0,) * len(ks)
                eff = o if name == "correlate" else tuple(-a - (0 if k & 1 else 1) for a, k in zip(o, ks))
                kw = {"mode": mode, "origin": origin}
                if _scipy_reads_outside(shape, ks, eff, mode):
                    with pytest.raises(UnsupportedInputError, match="reads memory outside the array"):
                        mg.vjp(_either(name, ("input", "weights", "cval"), **kw), x, w, cval)
                    continue
                if origin == last or (origin == 0 and (i + j) % 2 == 0):
                    _check(name, ("input", "weights", "cval"), (x, w, cval), **kw)
                else:
                    _check_value(name, ("input", "weights", "cval"), (x, w, cval), **kw)


def test_scipys_nd_reflect_reads_outside_the_array_and_is_refused():
    # SciPy's N-dimensional correlate in mode 'reflect' reads before the line 2n m samples out (m >= 2):
    # not a function of the input; correlate1d reflects correctly there
    x, w = np.array([10.0, 20.0]), np.eye(9)[0]  # one weight, 8 samples before the axis: e[-8] = x[0]
    assert nd.correlate1d(x, w, mode="reflect", origin=4)[0] == 10.0
    rows = np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])  # along the rows: the previous row's last sample
    np.testing.assert_array_equal(nd.correlate(rows, w[None], mode="reflect", origin=(0, 4))[1:, 0], [2.0, 4.0])
    np.testing.assert_array_equal(nd.correlate1d(rows, w, mode="reflect", origin=4)[:, 0], [1.0, 3.0, 5.0])
    with pytest.raises(UnsupportedInputError, match="reads memory outside the array"):
        mg.grad(lambda x: np.sum(mnd.correlate(x, w, mode="reflect", origin=4)))(x)
    with pytest.raises(UnsupportedInputError, match="reads memory outside the array"):
        mg.grad(lambda w: np.sum(mnd.convolve(x, w, mode="grid-mirror", origin=-4)))(w)
    # one sample short of it: SciPy's values, differentiated
    _check("correlate", ("input", "weights"), (x, np.eye(7)[0]), mode="reflect", origin=3)


SEPARABLE = [  # (function, argument names, arguments, keywords): cval traced where a constant mode reads it
    ("uniform_filter", ("input", "cval"), (_draw((3, 7)), 0.4), {"size": (3, 9), "origin": (1, -4)}),
    ("uniform_filter", ("input", "cval"), (_draw((2, 1, 3)), 0.4), {"size": 2, "axes": (0, 2)}),
    ("gaussian_filter1d", ("input", "sigma", "cval"), (_draw((2, 7)), 0.8, 0.3), {"order": 2}),
    ("gaussian_filter", ("input", "sigma", "cval"), (_draw((3, 7)), 1.3, -0.2), {"order": (0, 1)}),
    ("gaussian_filter", ("input", "sigma", "cval"), (_draw((2, 3)), 2.3, 0.1), {"truncate": 3.0}),  # (15 > the axes)
    ("sobel", ("input", "cval"), (_draw((3, 7)), 0.6), {"axis": 1}),
    ("prewitt", ("input", "cval"), (_draw((2, 1, 3)), 0.6), {"axis": 0}),
    ("laplace", ("input", "cval"), (_draw((3, 7)), -0.5), {}),
    ("gaussian_laplace", ("input", "sigma", "cval"), (_draw((3, 7)), 0.9, 0.25), {}),
    ("gaussian_gradient_magnitude", ("input", "sigma", "cval"), (_draw((3, 7)), 0.9, 0.25), {}),
]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name,argnames,args,kw", SEPARABLE, ids=[f"{c[0]}-{i}" for i, c in enumerate(SEPARABLE)])
def test_separable_filters_every_mode(name, argnames, args, kw, mode):
    _check(name, argnames, args, mode=mode, **kw)


def test_modes_per_axis():
    x = _draw((3, 4))
    for name, argnames, args, kw in [
            ("gaussian_filter", ("input", "sigma", "cval"), (x, 0.9, 0.5), {}),
            ("uniform_filter", ("input", "cval"), (x, 0.5), {"size": 3}),
            ("sobel", ("input", "cval"), (x, 0.5), {}),
            ("prewitt", ("input", "cval"), (x, 0.5), {"axis": 0}),
            ("laplace", ("input", "cval"), (x, 0.5), {}),
            ("gaussian_laplace", ("input", "sigma", "cval"), (x, 0.9, 0.5), {}),
            ("gaussian_gradient_magnitude", ("input", "sigma", "cval"), (x, 0.9, 0.5), {})]:
        for modes in (("constant", "wrap"), ["mirror", "grid-constant"]):
            _check(name, argnames, args, mode=modes, **kw)
    # an axis not filtered takes no mode
    _check("uniform_filter", ("input", "cval"), (x, 0.5), size=2, axes=[1], mode=["constant"])


# -- the Gaussian kernel: traced sigma, order, truncate, radius -----------------------------------

@pytest.mark.parametrize("order", [0, 1, 2, 3])
def test_gaussian_derivative_orders_in_sigma(order):
    x = _draw((2, 9))
    _check("gaussian_filter1d", ("input", "sigma"), (x, 1.2), deriv=2 if order < 2 else 1, order=order)
    _check("gaussian_filter1d", ("sigma",), (0.7,), input=x, order=order, truncate=2.0, mode="wrap")
    _check("gaussian_filter1d", ("sigma",), (1.7,), input=x, order=order, radius=2, mode="nearest")


def test_gaussian_sigma_per_axis():
    x = _draw((3, 5))
    # a traced array of sigmas with per-axis orders and radii
    _check("gaussian_filter", ("input", "sigma"), (x, np.array([0.6, 1.4])), order=[1, 0], radius=[3, 1])

    def listed(s):  # a list holding a traced sigma
        return (mnd if isinstance(s, Tracer) else nd).gaussian_filter(x, [s, 0.8], order=(0, 2), mode="mirror")

    np.testing.assert_array_equal(mg.vjp(listed, 0.9)[0], nd.gaussian_filter(x, [0.9, 0.8], order=(0, 2), mode="mirror"))
    check_grads(lambda s: np.sin(listed(s)), 0.9, order=2)
    # sigma 0 along an axis: that axis is not filtered (SciPy's threshold, 1e-15)
    _check("gaussian_filter", ("input", "sigma"), (x, np.array([0.0, 1.2])))
    _check("gaussian_filter", ("input",), (x,), sigma=0.0)
    _check("gaussian_laplace", ("input", "sigma"), (x, np.array([0.7, 1.2])), axes=None)
    _check("gaussian_laplace", ("input", "sigma"), (x, 0.7), axes=[1], truncate=2.5)
    _check("gaussian_gradient_magnitude", ("input", "sigma"), (x, np.array([0.7, 1.2])), axes=(0,), radius=2)


# -- complex values, float32, output= -----------------------------------------------------------------

@pytest.mark.parametrize("cx,cw,cc", [(True, False, False), (False, True, False), (True, True, True),
                                     (True, False, True)])
def test_complex_inputs_weights_and_cval(cx, cw, cc):
    x, w1, w2 = _draw((3, 5), cx), _draw(3, cw), _draw((2, 2), cw)
    cval = 0.3 - 0.4j if cc else 0.3
    for name, w in (("correlate1d", w1), ("convolve1d", w1), ("correlate", w2), ("convolve", w2)):
        for mode in ("constant", "reflect"):
            _check(name, ("input", "weights", "cval"), (x, w, cval), mode=mode)
    if not cw:
        for name in ("uniform_filter1d", "uniform_filter"):
            _check(name, ("input", "cval"), (x, cval), size=3, mode="constant")
        for name in ("gaussian_filter", "sobel", "laplace"):
            kw = {"sigma": 0.8} if name == "gaussian_filter" else {}
            _check(name, ("input", "cval"), (x, cval), mode="grid-constant", **kw)


def test_float32_values_and_derivatives():
    x, w = _draw((3, 6), dtype=np.float32), _draw(4)
    for name, argnames, args, kw in [
            ("correlate1d", ("input", "weights"), (x, w), {"mode": "mirror"}),
            ("correlate", ("input", "weights"), (x, _draw((2, 3))), {"mode": "nearest"}),
            ("uniform_filter1d", ("input", "cval"), (x, 0.5), {"size": 3, "mode": "constant"}),
            ("uniform_filter", ("input",), (x,), {"size": 3}),
            ("gaussian_filter", ("input", "sigma"), (x, 1.0), {}),
            ("sobel", ("input",), (x,), {}),
            ("gaussian_gradient_magnitude", ("input",), (x,), {"sigma": 1.0})]:
        _check(name, argnames, args, **kw)
    # a float64 input with a float32 output (SciPy's intermediate passes in it)
    _check("gaussian_filter", ("input", "sigma"), (_draw((3, 5)), 0.9), output=np.float32)
    _check("laplace", ("input",), (_draw((3, 5)),), output="float32")


def test_output_arrays_are_written_in_place():
    x = _draw((3, 5))
    for name, extra in (("correlate1d", {"weights": [1.0, -2.0, 0.5]}), ("convolve", {"weights": np.ones((2, 2))}),
                        ("uniform_filter", {"size": 2}), ("gaussian_filter", {"sigma": 0.7}),
                        ("gaussian_gradient_magnitude", {"sigma": 0.7}), ("sobel", {}), ("laplace", {})):
        def f(x, name=name, extra=extra):
            out = np.zeros_like(x)  # (a buffer of the traced x: traced)
            res = getattr(mnd, name)(x, output=out, **extra)
            assert res is out
            return out * x

        check_grads(f, x)
        np.testing.assert_array_equal(mg.vjp(f, x)[0], getattr(nd, name)(x, **extra) * x)

    def in_place(x):  # the output the input itself, as SciPy allows
        mnd.correlate1d(x, [1.0, 3.0], output=x, mode="wrap")
        mnd.uniform_filter(x, 3, output=x)
        mnd.convolve(x, np.ones((2, 3)), output=x, mode="mirror")
        return np.sin(x)

    check_grads(in_place, x, order=2)
    plain = x.copy()
    nd.correlate1d(plain, [1.0, 3.0], output=plain, mode="wrap")
    nd.uniform_filter(plain, 3, output=plain)
    nd.convolve(plain, np.ones((2, 3)), output=plain, mode="mirror")
    np.testing.assert_array_equal(mg.vjp(in_place, x)[0], np.sin(plain))
    # an output array that is an argument not differentiated (a traced constant), an integer image
    img = np.arange(15).reshape(3, 5)
    check_grads(lambda w, out: mnd.correlate(img, w, output=out) * 1.0, _draw((2, 2)), np.zeros((3, 5)), argnums=0)
    _check("correlate", ("weights",), (_draw((2, 2)),), input=img, output=np.float64)


@pytest.mark.parametrize("name, extra", [("laplace", {}), ("gaussian_laplace", {"sigma": 0.8}),
                                         ("gaussian_gradient_magnitude", {"sigma": 0.8})])
@pytest.mark.parametrize("view", [lambda u: u, lambda u: u[::-1]])
def test_output_that_is_the_input_gives_scipys_aliased_result(name, extra, view):
    # SciPy writes the first derivative into the output, then reads the input again for the others:
    # with output= the input (or a reversed view of it) its result is not the out-of-place one, and
    # the traced call gave the out-of-place one, value and derivative (the ndimg tester)
    x = np.arange(12.0).reshape(3, 4) ** 2 / 10

    def f(x, filt):
        u = x * 1.0
        filt(u, output=view(u), **extra)
        return np.sum(u ** 2)

    def plain(x):
        return f(x, getattr(nd, name))

    def traced(x):
        return f(x, getattr(mnd, name))
    np.testing.assert_allclose(mg.vjp(traced, x)[0], plain(x), rtol=1e-14)
    np.testing.assert_allclose(mg.grad(traced)(x), numerical_grad(plain, (x,), (0,))[0], rtol=1e-6, atol=1e-7)
    v = np.cos(x)
    np.testing.assert_allclose(mg.jvp(traced, (x,), (v,))[1], np.sum(numerical_grad(plain, (x,), (0,))[0] * v),
                               rtol=1e-6)


def test_traced_weights_given_as_lists_and_kernel_lengths_beyond_the_axis():
    x = _draw((2, 3))
    check_grads(lambda p: np.sin(mnd.convolve1d(x, [p, 1.0, -p, 2 * p], mode="wrap")), 0.7, order=2)
    check_grads(lambda p: np.sin(mnd.correlate(x, [[p, 1.0], [0.5, p]], mode="nearest")), 0.7, order=2)
    for mode in MODES:  # a 1-sample axis, a kernel of 9 along it: every extended sample is x[0] (or cval)
        _check("correlate1d", ("input", "weights", "cval"), (_draw((3, 1)), _draw(9), 0.2), axis=1, mode=mode)


def test_second_order_hessian_and_reverse_over_reverse():
    x, w = _draw((2, 4)), _draw(3)

    def s(x, w, c):
        y = mnd.correlate1d(x, w, mode="constant", cval=c) + mnd.gaussian_filter(x * w[0], 0.8, mode="mirror")
        return np.sum(np.sin(y)) + np.sum(mnd.uniform_filter1d(x, 3, mode="constant", cval=c) ** 2)

    def plain(v):  # the same function of one flat vector, on SciPy's own filters
        x, w, c = v[:8].reshape(2, 4), v[8:11], v[11]
        y = nd.correlate1d(x, w, mode="constant", cval=c) + nd.gaussian_filter(x * w[0], 0.8, mode="mirror")
        return np.sum(np.sin(y)) + np.sum(nd.uniform_filter1d(x, 3, mode="constant", cval=c) ** 2)

    def flat(v):
        return s(v[:8].reshape(2, 4), v[8:11], v[11])

    v = np.concatenate([x.ravel(), w, [0.4]])
    h_fwd_rev = mg.hessian(flat)(v)
    h_rev_rev = mg.jacobian(mg.grad(flat), mode="rev")(v)
    np.testing.assert_allclose(h_fwd_rev, h_rev_rev, rtol=1e-10, atol=1e-12)
    # against central differences of the gradient, itself checked against central differences of SciPy's
    np.testing.assert_allclose(mg.grad(flat)(v), numerical_grad(plain, (v,), (0,))[0], rtol=1e-6, atol=1e-8)
    h = 1e-5
    fd = np.stack([(mg.grad(flat)(v + h * e) - mg.grad(flat)(v - h * e)) / (2 * h) for e in np.eye(12)])
    np.testing.assert_allclose(h_fwd_rev, fd, rtol=1e-5, atol=1e-6)


# -- plain calls, SciPy's errors, what stays SciPy's ------------------------------------------------

def test_plain_calls_are_scipys_and_other_names_pass_through():
    x = _draw((4, 5))
    np.testing.assert_array_equal(mnd.gaussian_filter(x, 1.2, order=1), nd.gaussian_filter(x, 1.2, order=1))
    assert mnd.generic_filter is nd.generic_filter and mnd.geometric_transform is nd.geometric_transform
    assert "gaussian_filter" in dir(mnd) and "map_coordinates" in dir(mnd)
    import mutagrad.scipy

    assert "ndimage" in mutagrad.scipy.__all__ and mutagrad.scipy.ndimage is mnd


def test_scipys_errors_on_traced_arguments():
    x = _draw((3, 4))
    for call, err in [(lambda x: mnd.correlate1d(x, [1.0, 2.0], origin=1), ValueError),  # (invalid origin)
                      (lambda x: mnd.correlate(x, np.ones((2, 2)), mode="bogus"), RuntimeError),
                      (lambda x: mnd.correlate(x, np.ones((2, 2)), mode=["wrap", "wrap"]), RuntimeError),
                      (lambda x: mnd.gaussian_filter1d(x, 1.0, radius=-1), ValueError),
                      (lambda x: mnd.gaussian_filter(x, [1.0, 2.0, 3.0]), RuntimeError),
                      (lambda x: mnd.uniform_filter1d(x, 0), RuntimeError),
                      (lambda x: mnd.sobel(x, output=np.zeros((2, 2))), RuntimeError),
                      (lambda x: mnd.sobel(x + 1j, output=np.float64), RuntimeError),  # (complex into real)
                      (lambda x: mnd.gaussian_filter(x - 1j, 1.0, output=np.float64), RuntimeError),
                      (lambda x: mnd.correlate1d(x, [1.0, 2.0], mode="constant", cval=1j), TypeError)]:
        with pytest.raises(err):
            mg.grad(lambda x, call=call: np.sum(np.real(call(x))))(x)


def test_scipys_own_filters_on_a_traced_array_point_to_ours():
    x = _draw((5, 6))
    for name, args in (("gaussian_filter", (1.0,)), ("uniform_filter", (3,)), ("prewitt", ()),
                       ("gaussian_gradient_magnitude", (0.8,))):
        def energy(x, module, name=name, args=args):
            return np.sum(getattr(module, name)(x, *args) ** 2)

        with pytest.raises(mg.TracerEscapeError) as e:
            mg.grad(energy)(x, nd)
        assert f"mutagrad.scipy.ndimage.{name} is the same function" in str(e.value)
        # the function it names: SciPy's value, and its gradient against central differences of SciPy's own
        v, g = mg.value_and_grad(energy)(x, mnd)
        assert v == energy(x, nd)
        fd = numerical_grad(lambda x, energy=energy: energy(x, nd), (x,), (0,))[0]
        np.testing.assert_allclose(g, fd, rtol=1e-6, atol=1e-8)
    # the interpolations keep their message; the rank filters name their rewrite over windows, which gives
    # SciPy's values and, off ties, its derivative (the ndimg tester: they said to write a linear filter)
    for fn, text in ((lambda x: nd.shift(x, 0.5, order=1), "mutagrad.scipy.ndimage.shift is the same function"),
                     (lambda x: nd.median_filter(x, 3), r"picks one value of each sorted window.*s\[\.\.\., size "),
                     (lambda x: nd.maximum_filter(x, 3), r"picks one value of each sorted window.*s\[\.\.\., -1\]"),
                     (lambda x: nd.generic_laplace(x, None), "mutagrad.scipy.ndimage's laplace")):
        with pytest.raises(mg.TracerEscapeError, match=text):
            mg.grad(lambda x, fn=fn: np.sum(fn(x)))(x)

    def median(x, size=3):  # the rewrite the message names
        w = np.lib.stride_tricks.sliding_window_view(np.pad(x, size // 2, mode="symmetric"), (size,) * x.ndim)
        return np.median(w, axis=(-2, -1))

    np.testing.assert_array_equal(median(x), nd.median_filter(x, 3))
    np.testing.assert_allclose(mg.grad(lambda x: np.sum(median(x) ** 2))(x),
                               numerical_grad(lambda x: np.sum(nd.median_filter(x, 3) ** 2), (x,), (0,))[0],
                               rtol=1e-6, atol=1e-8)


# -- interpolation: map_coordinates, shift, zoom ------------------------------------------------------
# Values: SciPy's own call (bits and dtype). Derivatives: central differences of SciPy's function, forward
# against reverse; coordinates drawn off the nodes (and off the folds), on both sides of the axis.

def _points(rng, shape, npts, lo=-1.5, hi=2.5):
    """Coordinates (len(shape), npts), uniform over [lo n, hi n] along each axis of n samples."""
    return np.stack([rng.uniform(lo * n - 1, hi * n, npts) for n in shape])


@pytest.mark.parametrize("order", [0, 1, 2, 3, 4, 5])
@pytest.mark.parametrize("mode", MODES)
def test_map_coordinates_every_mode_and_order(mode, order):
    rng = np.random.default_rng(4910 + order)
    shapes = [(6,), (4, 5), (3, 2, 4)] if order in (0, 1, 3) else [(4, 5)]
    for shape in shapes:
        x, c = rng.standard_normal(shape), _points(rng, shape, 6)
        _check("map_coordinates", ("input", "coordinates", "cval"), (x, c, 0.3), order=order, mode=mode)
    # prefilter=False: the input taken as the spline's coefficients
    if order > 1:
        x, c = rng.standard_normal((4, 5)), _points(rng, (4, 5), 5)
        _check("map_coordinates", ("input", "coordinates", "cval"), (x, c, -0.4), order=order, mode=mode,
               prefilter=False)


@pytest.mark.parametrize("mode", MODES)
def test_map_coordinates_axes_of_one_and_two_samples(mode):
    rng = np.random.default_rng(4911)
    for shape in [(1,), (2,), (1, 3), (2, 1)]:
        x, c = rng.standard_normal(shape), _points(rng, shape, 5)
        for order in (1, 3):
            _check("map_coordinates", ("input", "coordinates", "cval"), (x, c, 0.6), order=order, mode=mode)


def test_map_coordinates_complex_float32_and_output():
    rng = np.random.default_rng(4912)
    x, c = rng.standard_normal((4, 5)) + 1j * rng.standard_normal((4, 5)), _points(rng, (4, 5), 6)
    for mode in ("constant", "grid-constant", "reflect"):
        _check("map_coordinates", ("input", "coordinates", "cval"), (x, c, 0.3 - 0.2j), order=3, mode=mode)
    x32 = rng.standard_normal((4, 5)).astype(np.float32)
    _check("map_coordinates", ("input", "coordinates"), (x32, c), order=1, mode="nearest")
    _check("map_coordinates", ("input", "coordinates"), (x32, c), order=3, mode="mirror")
    _check("map_coordinates", ("input", "coordinates"), (rng.standard_normal((4, 5)), c), order=3, output=np.float32)

    def into(x, c):  # an output array, written in place
        out = np.zeros_like(c[0])
        res = mnd.map_coordinates(x, c, output=out, order=1, mode="wrap")
        assert res is out
        return out * c[1]

    x = rng.standard_normal((4, 5))
    check_grads(into, x, c)
    np.testing.assert_array_equal(mg.vjp(into, x, c)[0], nd.map_coordinates(x, c, order=1, mode="wrap") * c[1])


def test_map_coordinates_derivative_on_a_node_is_the_mean_of_both_sides():
    # on a node the pieces on either side meet with other slopes (order 1): the mean of the two, as np.maximum
    # splits a tie (by hand: x[1] - x[0] = 1 on the left of 1.0, x[2] - x[1] = 3 on the right); order 0: 0
    x = np.array([0.0, 1.0, 4.0, 9.0])
    for order, want in ((1, 2.0), (0, 0.0)):
        def at(c, order=order):
            return mnd.map_coordinates(x, c[None], order=order, mode="nearest")[0]

        assert mg.grad(at)(np.array([1.0]))[0] == want
        assert mg.jvp(at, (np.array([1.0]),), (np.array([1.0]),))[1] == want
    # through a fold too: 'mirror' maps -1 + t to 1 - t, whose sides are -(x[1] - x[0]) and -(x[2] - x[1])
    g = mg.grad(lambda c: mnd.map_coordinates(x, c[None], order=1, mode="mirror")[0])(np.array([-1.0]))
    assert g[0] == -2.0
    # where the right is a jump (the last sample in modes 'constant' and 'wrap', next to cval or the first
    # sample) the piece inside alone, x[3] - x[2] (regress107: 'wrap' took the mirrored piece, -(x[3] - x[2]))
    for mode in ("constant", "wrap"):
        g = mg.grad(lambda c, mode=mode: mnd.map_coordinates(x, c[None], order=1, mode=mode)[0])(np.array([3.0]))
        assert g[0] == 5.0


@pytest.mark.parametrize("mode", ["mirror", "reflect", "grid-mirror", "nearest", "grid-wrap", "grid-constant"])
def test_an_integer_shift_or_a_rotation_by_zero_gets_the_mean_of_the_one_sided_derivatives(mode):
    # (the imgaffine and regress107 testers) every sample sits on a node: one side per sample, mixed by a
    # mirroring fold or by the directions the samples move in (a rotation), gave neither one-sided derivative
    # (+1/6 where both sides are -1/3). The mean of both sides' slopes per sample gives the mean of the one-sided
    # derivatives of the total, against one-sided differences of SciPy's own calls
    rng = np.random.default_rng(4982)
    a = rng.standard_normal(6)
    img = rng.standard_normal((5, 6))
    h = 1e-7
    cases = [(lambda s, m=mnd: np.mean(m.shift(a, s, order=1, mode=mode) * np.arange(1.0, 7.0)), s0)
             for s0 in (1.0, 2.0, -1.0)]
    cases.append((lambda t, m=mnd: np.sum(m.rotate(img, t, reshape=False, order=1, mode=mode) * img), 0.0))
    cases.append((lambda t, m=mnd: np.sum(m.rotate(img[:5, :5], t, reshape=False, order=1, mode=mode) ** 2), 90.0))
    for f, s0 in cases:
        left = (f(s0, nd) - f(s0 - h, nd)) / h
        right = (f(s0 + h, nd) - f(s0, nd)) / h
        np.testing.assert_allclose(mg.grad(f)(s0), 0.5 * (left + right), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(mg.jvp(f, (s0,), (1.0,))[1], 0.5 * (left + right), rtol=1e-5, atol=1e-6)


def test_map_coordinates_coordinates_as_a_list_and_semi_lagrangian_advection():
    # one step of u(x - v dt) on a periodic grid (mode 'grid-wrap'), the coordinates a list of traced arrays
    rng = np.random.default_rng(4913)
    u0 = rng.standard_normal((6, 7))
    ii, jj = np.indices(u0.shape, dtype=float)

    def advect(v, module):
        u = u0
        for _ in range(2):
            u = module.map_coordinates(u, [ii - 0.7 * v[0], jj - 0.7 * v[1]], order=3, mode="grid-wrap")
        return np.sum(u * u0)

    v = rng.uniform(-1.0, 1.0, (2, 6, 7))
    np.testing.assert_array_equal(mg.value_and_grad(advect)(v, mnd)[0], advect(v, nd))
    np.testing.assert_allclose(mg.grad(advect)(v, mnd), numerical_grad(lambda v: advect(v, nd), (v,), (0,))[0],
                               rtol=1e-6, atol=1e-8)


def test_map_coordinates_trilinear_sampling_and_a_hessian():
    # NeRF-style: a 3-D grid sampled trilinearly (order=1) at traced points
    rng = np.random.default_rng(4914)
    grid, pts = rng.standard_normal((3, 4, 2)), _points(rng, (3, 4, 2), 5, lo=0.0, hi=0.9)
    _check("map_coordinates", ("input", "coordinates"), (grid, pts), order=1, mode="nearest")

    def flat(v, module):  # a smooth function of (image, points, cval) as one vector: second order, cubic
        g, p, c = v[:12].reshape(3, 4), v[12:20].reshape(2, 4), v[20]
        return np.sum(np.sin(module.map_coordinates(g, p, order=3, mode="grid-constant", cval=c)))

    v = np.concatenate([rng.standard_normal(12), _points(rng, (3, 4), 4).ravel(), [0.4]])
    h_fwd_rev = mg.hessian(lambda v: flat(v, mnd))(v)
    h_rev_rev = mg.jacobian(mg.grad(lambda v: flat(v, mnd)), mode="rev")(v)
    np.testing.assert_allclose(h_fwd_rev, h_rev_rev, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(mg.grad(lambda v: flat(v, mnd))(v), numerical_grad(lambda v: flat(v, nd), (v,), (0,))[0],
                               rtol=1e-6, atol=1e-8)
    h, grad = 1e-5, mg.grad(lambda v: flat(v, mnd))
    for e in rng.standard_normal((3, len(v))):  # (Hessian-vector products against differences of the gradient)
        np.testing.assert_allclose(h_fwd_rev @ e, (grad(v + h * e) - grad(v - h * e)) / (2 * h), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("order", [0, 1, 3])
@pytest.mark.parametrize("mode", MODES)
def test_shift_and_zoom_every_mode(mode, order):
    rng = np.random.default_rng(4915 + order)
    x = rng.standard_normal((4, 5))
    _check("shift", ("input", "shift", "cval"), (x, np.array([0.37, -1.71]), 0.3), order=order, mode=mode)
    _check("shift", ("input", "shift"), (rng.standard_normal(6), 2.29), order=order, mode=mode)
    _check("zoom", ("input", "cval"), (x, 0.3), zoom=(1.6, 0.7), order=order, mode=mode)
    if mode.startswith("grid-"):
        _check("zoom", ("input", "cval"), (x, 0.3), zoom=1.3, order=order, mode=mode, grid_mode=True)


def test_interpolation_plain_calls_and_scipys_errors():
    rng = np.random.default_rng(4916)
    x, c = rng.standard_normal((4, 5)), _points(rng, (4, 5), 3)
    np.testing.assert_array_equal(mnd.map_coordinates(x, c), nd.map_coordinates(x, c))
    np.testing.assert_array_equal(mnd.shift(x, 0.3, order=1), nd.shift(x, 0.3, order=1))
    np.testing.assert_array_equal(mnd.zoom(x, 1.5, mode="mirror"), nd.zoom(x, 1.5, mode="mirror"))
    for call, err in [(lambda x: mnd.map_coordinates(x, c, order=6), RuntimeError),
                      (lambda x: mnd.map_coordinates(x, c[:1]), RuntimeError),  # (one row for two axes)
                      (lambda x: mnd.map_coordinates(x, c + 0j), TypeError),
                      (lambda x: mnd.map_coordinates(x, c, mode="bogus"), RuntimeError),
                      (lambda x: mnd.map_coordinates(x, c, output=np.zeros(2)), RuntimeError),
                      (lambda x: mnd.shift(x, [1.0, 2.0, 3.0]), RuntimeError)]:
        with pytest.raises(err):
            mg.grad(lambda x, call=call: np.sum(call(x)))(x)


# -- affine_transform, rotate: the interpolation at c = m k + o ---------------------------------------------------
# Values: SciPy's own call (bits and dtype). Derivatives: central differences of SciPy's function (its own matrix
# forms and checks), forward against reverse; the matrices and offsets drawn so that no coordinate is on a node.

def _homogeneous(top):
    """The (D + 1, D + 1) matrix of its top D rows (whose bottom row, fixed, finite differences leave alone)."""
    bottom_row = np.zeros((1, top.shape[1]))
    bottom_row[0, -1] = 1.0
    return np.concatenate([top, bottom_row])


def _affine_forms(rng, d=2):
    """(what, argument names, matrix, offset, keywords) for each form of the matrix SciPy takes."""
    m, o = np.eye(d) + rng.uniform(-0.3, 0.3, (d, d)), rng.uniform(-0.9, 0.9, d)
    top = np.concatenate([m, o[:, None]], axis=1)
    return [("matrix", m, o, {}),
            ("diagonal", np.diag(m), o, {}),
            ("a scalar offset, output_shape", m, float(o[0]), {"output_shape": (3, 6)}),
            ("(D, D + 1)", top, None, {}),
            ("(D + 1, D + 1)", top, None, {"homogeneous": True}),
            ("(D, 1), a line", rng.uniform(0.3, 0.6, (d, 1)), o, {"output_shape": (7,)}),
            ("(D, D_out), a 4-D output", rng.uniform(-0.6, 0.6, (d, 4)) + np.eye(d, 4), o,
             {"output_shape": (3, 2, 2, 2)}),
            ("a diagonal, a 3-D output", np.diag(m), o, {"output_shape": (4, 5, 2)})]


def _affine(m, o, homogeneous, **kw):
    """affine_transform(input, matrix, offset, cval) as _either calls it: the homogeneous matrix built of its
    top rows, the offset left out where the matrix holds it."""
    def f(x, m, *rest):
        mod = mnd if any(isinstance(a, Tracer) for a in (x, m, *rest)) else nd
        mm = _homogeneous(m) if homogeneous else m
        if o is None:
            return mod.affine_transform(x, mm, cval=rest[-1], **kw)
        return mod.affine_transform(x, mm, rest[0], cval=rest[1], **kw)

    return f


@pytest.mark.parametrize("mode", MODES)
def test_affine_transform_every_matrix_form_mode_and_order(mode):
    rng = np.random.default_rng(4920 + MODES.index(mode))
    x = rng.standard_normal((4, 5))
    for i, (what, m, o, kw) in enumerate(_affine_forms(rng)):
        homogeneous = kw.pop("homogeneous", False)
        order = (i + MODES.index(mode)) % 6  # (each form in turn at every order, over the modes)
        f = _affine(m, o, homogeneous, order=order, mode=mode, **kw)
        args = (x, m, 0.3) if o is None else (x, m, np.asarray(o, dtype=float), 0.3)
        want = f(*args)
        got = mg.vjp(f, *args)[0]
        assert got.dtype == want.dtype, what
        np.testing.assert_array_equal(got, want, err_msg=f"{what} {mode} {order}")
        # order 0: piecewise constant in the coordinates (the matrix and offset's derivatives are 0)
        check_grads(f, *args, argnums=(0, len(args) - 1) if order == 0 else None)


def test_affine_transform_prefilter_complex_float32_and_lists():
    rng = np.random.default_rng(4921)
    m, o = np.array([[0.9, 0.35], [-0.25, 1.1]]), np.array([0.37, -0.61])
    x = rng.standard_normal((4, 5))
    for order in (2, 5):
        _check("affine_transform", ("input", "matrix", "offset", "cval"), (x, m, o, -0.4), order=order,
               mode="grid-constant", prefilter=False)
    xc = x + 1j * rng.standard_normal((4, 5))
    for mode in ("constant", "grid-constant", "mirror"):
        _check("affine_transform", ("input", "matrix", "offset", "cval"), (xc, m, o, 0.3 - 0.2j), order=3, mode=mode)
    for x32, kw in ((x.astype(np.float32), {"mode": "nearest"}), (x, {"output": np.float32})):
        _check_value("affine_transform", ("input", "matrix", "offset"), (x32, m, o), order=3, **kw)
        # (a smaller step than float32's default 5e-3: the cubic's third derivative jumps at the nodes)
        check_grads(_either("affine_transform", ("input", "matrix", "offset"), order=3, **kw), x32, m, o, eps=1e-3)

    def rotation(t, module):  # the matrix and offset as lists of traced numbers
        return np.sum(module.affine_transform(x, [[np.cos(t), np.sin(t)], [-np.sin(t), np.cos(t)]], [0.3, t])
                      ** 2)

    np.testing.assert_array_equal(mg.value_and_grad(rotation)(0.2, mnd)[0], rotation(0.2, nd))
    np.testing.assert_allclose(mg.grad(rotation)(0.2, mnd), numerical_grad(lambda t: rotation(t, nd), (0.2,), (0,))[0],
                               rtol=1e-6)


def test_affine_transform_diagonal_of_an_output_of_other_rank():
    # a diagonal matrix with an output of higher rank: its other axes repeat the result (SciPy's zoom_shift)
    rng = np.random.default_rng(4922)
    x, m, o = rng.standard_normal((3, 4)), np.array([0.8, 1.2]), np.array([0.21, -0.43])
    _check("affine_transform", ("input", "matrix", "offset"), (x, m, o), output_shape=(4, 3, 2), order=3)
    # of lower rank, SciPy's zoom_shift reads past the output's shape (it may crash): refused
    with pytest.raises(UnsupportedInputError, match="a diagonal matrix .1-D. with an output of rank 1"):
        mg.grad(lambda m: np.sum(mnd.affine_transform(x, m, o, output_shape=(3,))))(m)


def test_affine_transform_rules_read_scipys_coordinates():
    # the coordinates the rules build their stencil at are SciPy's, bit for bit (the matrix's o + k_0 m[:, 0] + ...,
    # the diagonal's (k + o / m) m): map_coordinates there gives affine_transform's bits
    from mutagrad.rules.scipy.ndimage import _affine_coordinates

    rng = np.random.default_rng(4929)
    x = rng.standard_normal((6, 7))
    for _ in range(20):
        m, d, o = rng.uniform(-2.0, 2.0, (2, 2)), rng.uniform(-2.0, 2.0, 2), rng.uniform(-5.0, 5.0, 2)
        for mat, shape in ((m, (5, 8)), (d, (6, 7))):
            np.testing.assert_array_equal(nd.map_coordinates(x, _affine_coordinates(mat, o, shape), mode="mirror"),
                                          nd.affine_transform(x, mat, o, output_shape=shape, mode="mirror"))


@pytest.mark.parametrize("order", [1, 3])
@pytest.mark.parametrize("mode", ["constant", "nearest", "reflect", "mirror", "wrap", "grid-wrap", "grid-constant"])
def test_rotate_reshape_planes_and_angle(mode, order):
    rng = np.random.default_rng(4923 + order)
    x2, x3 = rng.standard_normal((4, 5)), rng.standard_normal((3, 2, 4))
    for reshape in (True, False):
        angle = 23.7 if reshape else -131.2
        _check("rotate", ("input", "angle", "cval"), (x2, angle, 0.3), reshape=reshape, order=order, mode=mode)
        _check("rotate", ("input", "angle", "cval"), (x3, angle, 0.3), axes=(0, 2), reshape=reshape, order=order,
               mode=mode)
    for angle in (0.0, 90.0, -270.0, 45.0, 180.0):  # (cosdg, sindg: the quarter turns exact, the shapes SciPy's)
        for x, axes in ((x2, (1, 0)), (x3, (2, 0)), (x3, (-1, 1))):
            _check_value("rotate", ("input", "angle"), (x, angle), axes=axes, order=order, mode=mode)


def test_rotate_and_affine_transform_output_arrays_written_in_place():
    rng = np.random.default_rng(4924)
    x, m, o = rng.standard_normal((4, 5)), np.array([[0.9, 0.35], [-0.25, 1.1]]), np.array([0.37, -0.61])

    def affine_into(x, m):
        out = np.zeros_like(x, shape=(3, 6))
        res = mnd.affine_transform(x, m, o, output=out, order=3, mode="reflect")
        assert res is out
        return out * m[0, 0]

    check_grads(affine_into, x, m)
    np.testing.assert_array_equal(mg.vjp(affine_into, x, m)[0],
                                  nd.affine_transform(x, m, o, output_shape=(3, 6), mode="reflect") * m[0, 0])

    def rotate_into(x, a):
        out = np.zeros_like(x, dtype=np.float32)
        res = mnd.rotate(x, a, reshape=False, output=out, order=1, mode="nearest")
        assert res is out
        return out

    check_grads(rotate_into, x, 17.0)
    y = mg.vjp(rotate_into, x, 17.0)[0]
    assert y.dtype == np.float32
    np.testing.assert_array_equal(y, nd.rotate(x, 17.0, reshape=False, output=np.float32, order=1, mode="nearest"))


def test_affine_transform_and_rotate_hessians():
    rng = np.random.default_rng(4925)
    x = rng.standard_normal((4, 5))

    def check_hessian(flat, v):  # against central differences of the gradient, itself checked against SciPy's
        f, grad = (lambda v: flat(v, mnd)), mg.grad(lambda v: flat(v, mnd))
        h = mg.hessian(f)(v)
        np.testing.assert_allclose(h, mg.jacobian(grad, mode="rev")(v), rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(grad(v), numerical_grad(lambda v: flat(v, nd), (v,), (0,))[0], rtol=1e-6, atol=1e-8)
        e = 1e-5
        fd = np.stack([(grad(v + e * u) - grad(v - e * u)) / (2 * e) for u in np.eye(len(v))])
        np.testing.assert_allclose(h, fd, rtol=1e-5, atol=1e-6)

    def matrix(v, module):  # the matrix, the offset and cval as one vector
        return np.sum(np.sin(module.affine_transform(x, v[:4].reshape(2, 2), v[4:6], order=3, mode="constant",
                                                     cval=v[6])))

    def diagonal(v, module):
        return np.sum(np.sin(module.affine_transform(x, v[:2], v[2:4], order=3, mode="grid-constant", cval=v[4])))

    check_hessian(matrix, np.array([0.9, 0.35, -0.25, 1.1, 0.37, -0.61, 0.3]))
    check_hessian(diagonal, np.array([0.85, 1.15, 0.37, -0.61, 0.3]))
    x3 = rng.standard_normal((3, 4, 5))

    def angle(v, module):
        return np.sum(np.sin(module.rotate(x3, v[0], axes=(0, 2), order=3, mode="nearest", cval=v[1])))

    check_hessian(angle, np.array([23.7, 0.3]))


def test_affine_transform_and_rotate_plain_calls_and_scipys_errors():
    rng = np.random.default_rng(4926)
    x, m = rng.standard_normal((4, 5)), np.array([[0.9, 0.35], [-0.25, 1.1]])
    np.testing.assert_array_equal(mnd.affine_transform(x, m, 0.3), nd.affine_transform(x, m, 0.3))
    np.testing.assert_array_equal(mnd.rotate(x, 30.0), nd.rotate(x, 30.0))
    np.testing.assert_array_equal(mnd.spline_filter(x, 4), nd.spline_filter(x, 4))
    for call, err, text in [
            (lambda x: mnd.affine_transform(x, m, order=6), RuntimeError, "spline order not supported"),
            (lambda x: mnd.affine_transform(x, np.ones((2, 2, 2))), RuntimeError, "no proper affine matrix"),
            (lambda x: mnd.affine_transform(x, np.ones((3, 3))), ValueError, "bottom row was not equal to .0, 0, 1."),
            (lambda x: mnd.affine_transform(x, np.ones((3, 2))), RuntimeError, "wrong number of rows"),
            (lambda x: mnd.affine_transform(x, np.ones((2, 4))), RuntimeError, "wrong number of columns"),
            (lambda x: mnd.affine_transform(x, m, [1.0, 2.0, 3.0]), RuntimeError, "length equal to input rank"),
            (lambda x: mnd.affine_transform(x, m, [[1.0], [2.0]]), RuntimeError, "no proper offset"),
            (lambda x: mnd.affine_transform(x, m, output_shape=()), RuntimeError, "rank must be > 0"),
            (lambda x: mnd.affine_transform(x, m, mode="bogus"), RuntimeError, "boundary mode"),
            (lambda x: mnd.rotate(x[0], 3.0), ValueError, "at least 2D"),
            (lambda x: mnd.rotate(x, 3.0, axes=(0, 1, 2)), ValueError, "exactly two values"),
            (lambda x: mnd.rotate(x, 3.0, axes=(0.5, 1)), ValueError, "integer values"),
            (lambda x: mnd.rotate(x, 3.0, axes=(0, 2)), ValueError, "invalid rotation plane"),
            (lambda x: mnd.spline_filter1d(x, 6), RuntimeError, "spline order not supported"),
            (lambda x: mnd.spline_filter(x, 1), RuntimeError, "spline order not supported")]:
        with pytest.raises(err, match=text):  # (SciPy's own, on plain arrays)
            call(x)
        with pytest.raises(err, match=text):
            mg.grad(lambda x, call=call: np.sum(call(x)))(x)


# -- spline_filter1d, spline_filter -----------------------------------------------------------------------------
# Linear: the forward mode is SciPy's filter of the tangent, the reverse mode the transpose of the matrix whose
# columns are SciPy's filter of the unit vectors (which is not the filter: not symmetric at the boundary).

@pytest.mark.parametrize("mode", MODES)
def test_spline_filter1d_transpose_is_the_explicit_matrixs(mode):
    for order in range(6):
        for n in (1, 2, 3, 7):
            explicit = np.stack([nd.spline_filter1d(e, order, mode=mode) for e in np.eye(n)], axis=1)

            def f(v, order=order):
                return mnd.spline_filter1d(v, order, mode=mode)

            np.testing.assert_allclose(mg.jacobian(f, mode="rev")(np.zeros(n)), explicit, rtol=1e-13, atol=1e-15)
            np.testing.assert_array_equal(mg.jacobian(f, mode="fwd")(np.zeros(n)), explicit)
            if order == 3 and n == 7 and mode == "mirror":  # (why the transpose is not the filter itself)
                assert not np.allclose(explicit, explicit.T)
    rng = np.random.default_rng(4927 + MODES.index(mode))
    x = rng.standard_normal((3, 4))
    for order in (2, 3, 5):
        _check("spline_filter1d", ("input",), (x,), order=order, axis=0, mode=mode)
        _check("spline_filter", ("input",), (x,), order=order, mode=mode)


def test_spline_filters_complex_dtypes_orders_and_output_arrays():
    rng = np.random.default_rng(4928)
    x = rng.standard_normal((3, 4, 5))
    _check("spline_filter", ("input",), (x,), order=3, mode="mirror")
    _check("spline_filter1d", ("input",), (x,), order=4, axis=1, mode="reflect")
    for order in (0, 1):  # (a copy)
        _check("spline_filter1d", ("input",), (x[0],), order=order)
    xc = x[0] + 1j * rng.standard_normal((4, 5))
    with pytest.warns(UserWarning, match="promoting specified output dtype to complex"):  # (SciPy's, for float64)
        _check("spline_filter", ("input",), (xc,), order=3)
    _check("spline_filter1d", ("input",), (xc,), order=5, output=np.complex64)
    x32 = x[0].astype(np.float32)
    for out in (np.float32, np.float64):  # (float32 between the passes, as SciPy's)
        _check("spline_filter", ("input",), (x32,), order=3, output=out)

    def into(x):
        out = np.zeros_like(x)
        res = mnd.spline_filter(x, 3, output=out, mode="grid-wrap")
        assert res is out
        return out * x

    check_grads(into, x[0])
    np.testing.assert_array_equal(mg.vjp(into, x[0])[0], nd.spline_filter(x[0], 3, mode="grid-wrap") * x[0])


# -- the Fourier filters: fourier_gaussian, fourier_uniform, fourier_ellipsoid, fourier_shift --------------------
# Values: SciPy's own call to rounding (rtol 1e-13; the kernel is NumPy's arithmetic, not SciPy's C) and its dtype.
# Derivatives: central differences of SciPy's function, forward against reverse.

FOURIER = {"fourier_gaussian": "sigma", "fourier_uniform": "size", "fourier_ellipsoid": "size",
           "fourier_shift": "shift"}


def _check_fourier(name, args, deriv=True, argnames=None, **kw):
    """The traced call's value is SciPy's to rounding (and its dtype); derivatives in (input, parameter)."""
    argnames = argnames or ("input", FOURIER[name])
    want = getattr(nd, name)(**dict(zip(argnames, args)), **kw)
    got = mg.vjp(_either(name, argnames, **kw), *args)[0]
    assert got.dtype == want.dtype, (name, kw, got.dtype, want.dtype)
    tol = 1e-13 if want.dtype in (np.float64, np.complex128) else 1e-6
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol * np.max(np.abs(want), initial=0.0),
                               err_msg=f"{name} {kw}")
    if deriv:
        check_grads(_either(name, argnames, **kw), *args)


FOURIER_GRIDS = [((7,), -1, -1), ((6,), 11, 0), ((4, 5), -1, -1), ((4, 6), 10, 1), ((5, 3), 9, 0), ((3, 1), -1, 0),
                 ((1, 4), 7, 0), ((2, 3, 4), -1, -1), ((3, 2, 4), 6, 1)]


@pytest.mark.parametrize("name", list(FOURIER))
def test_fourier_filters_every_grid(name):
    rng = np.random.default_rng(4930)
    for i, (shape, n, axis) in enumerate(FOURIER_GRIDS):
        x = rng.standard_normal(shape) + 1j * rng.standard_normal(shape)
        p = rng.uniform(0.4, 3.5, len(shape)) * (1 if name != "fourier_shift" else rng.choice([-1, 1], len(shape)))
        _check_fourier(name, (x, p), n=n, axis=axis)
        # a scalar parameter, a real input (a real result, complex for fourier_shift)
        _check_fourier(name, (rng.standard_normal(shape), float(p[0])), deriv=i % 3 == 0, n=n, axis=axis)


def test_fourier_parameter_edge_cases():
    rng = np.random.default_rng(4931)
    x2, x3 = np.fft.fft2(rng.standard_normal((6, 7))), np.fft.fftn(rng.standard_normal((4, 5, 3)))
    # fourier_uniform: SciPy keeps only the zero frequency along an axis of size <= 0 (a constant kernel there)
    _check_fourier("fourier_uniform", (x2, np.array([0.0, 2.5])), deriv=False)  # (SciPy's jumps at size 0)
    _check_fourier("fourier_uniform", (x2, np.array([-1.5, 2.5])), n=13)
    # negative sigma and sizes: squared by the Gaussian and the ellipsoid
    _check_fourier("fourier_gaussian", (x2, np.array([-0.7, 1.1])))
    _check_fourier("fourier_ellipsoid", (x2, np.array([-1.5, 2.0])))
    _check_fourier("fourier_ellipsoid", (x2, np.array([0.0, 2.0])))
    # the ellipsoid near r = 0 (its series) and far out (past several zeros of J1 and of the 3-D kernel)
    for size in (0.01, 0.3, 1.0, 9.0):
        _check_fourier("fourier_ellipsoid", (x2, size))
        _check_fourier("fourier_ellipsoid", (x3, np.array([size, 2 * size, 0.5 * size])), deriv=size > 0.1, n=8,
                       axis=1)
    _check_fourier("fourier_ellipsoid", (rng.standard_normal(9) + 0j, 0.05))
    # SciPy's 3-D kernel 3 (sin r - r cos r) / r³ cancels at small r (relative error ~1e-16 / r²): its value is
    # kept (above), its differences are noise; the derivative against differences of the exact kernel, the series
    w = rng.standard_normal(x3.shape)
    k = [np.fft.fftfreq(m) for m in x3.shape]
    k[1] = np.arange(x3.shape[1]) / 8

    def exact(s):
        q = sum(np.reshape((np.pi * si * ki) ** 2, [-1 if d == e else 1 for e in range(3)])
                for d, (si, ki) in enumerate(zip(s, k)))
        phi = sum((-q) ** i * 6 * (i + 1) / math.factorial(2 * i + 3) for i in range(10))
        return np.sum(np.real(x3 * phi) * w)

    for size in (0.003, 0.01, 0.05):
        s = np.array([size, 2 * size, 0.5 * size])
        g = mg.grad(lambda s: np.sum(np.real(mnd.fourier_ellipsoid(x3, s, n=8, axis=1)) * w))(s)
        np.testing.assert_allclose(g, numerical_grad(exact, (s,), (0,))[0], rtol=1e-6)
    # second order in a size that puts most frequencies in the series
    check_grads(lambda s: np.sin(np.real(mnd.fourier_ellipsoid(x3, s))), np.array([0.1, 0.2, 0.15]), order=2)
    check_grads(lambda s: np.sin(np.real(mnd.fourier_ellipsoid(x2, s))), np.array([0.1, 0.2]), order=2)
    # large shifts (a phase of many turns)
    _check_fourier("fourier_shift", (x2, np.array([23.4, -51.7])))


def test_fourier_dtypes_and_output():
    rng = np.random.default_rng(4932)
    x = rng.standard_normal((4, 5))
    for name, param in FOURIER.items():
        p = np.array([0.9, 1.7])
        for inp in (x.astype(np.float32), (x + 1j * x[::-1]).astype(np.complex64)):
            _check_fourier(name, (inp, p), deriv=False)
        # an integer input (a plain constant) with a traced parameter; an output dtype
        _check_fourier(name, (p,), argnames=(param,), input=np.arange(20).reshape(4, 5))
        _check_fourier(name, (x + 0j, p), output=np.complex64)

        def into(x, p, name=name):  # an output array, written in place and returned
            out = np.zeros_like(x)  # (traced: it can hold the traced result)
            res = getattr(mnd, name)(x, p, output=out)
            assert res is out
            return out * p[0]

        check_grads(into, x + 1j, p)
        np.testing.assert_allclose(mg.vjp(into, x + 1j, p)[0], getattr(nd, name)(x + 1j, p) * p[0], rtol=1e-13)
    _check_fourier("fourier_gaussian", (x, 1.2), output=np.float32)


def test_fourier_plain_calls_and_scipys_errors():
    rng = np.random.default_rng(4933)
    x = np.fft.fft2(rng.standard_normal((4, 5)))
    for name in FOURIER:
        assert "fourier" in name and name in dir(mnd)
        np.testing.assert_array_equal(getattr(mnd, name)(x, 1.3, n=7, axis=0), getattr(nd, name)(x, 1.3, n=7, axis=0))
    cases = [(lambda p: mnd.fourier_ellipsoid(np.ones((2, 2, 2, 2)) * p, 1.0), NotImplementedError),
             (lambda p: mnd.fourier_gaussian(x, [p, p, p]), RuntimeError),
             (lambda p: mnd.fourier_gaussian(x, p, axis=2), np.exceptions.AxisError),
             (lambda p: mnd.fourier_uniform(x, p, output=np.zeros((2, 2))), RuntimeError),
             (lambda p: mnd.fourier_uniform(x, p, output=np.int64), RuntimeError),
             (lambda p: mnd.fourier_uniform(x, p, output=np.zeros((4, 5))), RuntimeError),  # (complex into real)
             (lambda p: mnd.fourier_shift(x, p, output=np.float64), RuntimeError),
             (lambda p: mnd.fourier_shift(x, p, output=np.zeros((4, 5), np.float32)), RuntimeError),
             (lambda p: mnd.fourier_gaussian(x.real.astype(np.float16), p), RuntimeError),
             (lambda p: mnd.fourier_shift(x, p, n=0), UnsupportedInputError)]  # (SciPy divides by n = 0)
    for call, err in cases:
        with pytest.raises(err):
            mg.grad(lambda p, call=call: np.sum(np.real(call(p))))(0.8)


def test_fourier_filters_in_a_pipeline_and_a_hessian():
    # fft -> fourier_gaussian -> fourier_shift -> irfft: a smoothed, shifted signal; the Hessian in (sigma, shift)
    rng = np.random.default_rng(4934)
    sig = rng.standard_normal(12)

    def f(p, module):
        spec = np.fft.rfft(sig)
        spec = module.fourier_gaussian(spec, p[0], n=12)
        spec = module.fourier_shift(spec, p[1], n=12)
        return np.sum(np.fft.irfft(spec, 12) ** 2 * np.arange(12))

    p = np.array([0.9, 1.4])
    np.testing.assert_allclose(mg.value_and_grad(f)(p, mnd)[0], f(p, nd), rtol=1e-13)
    np.testing.assert_allclose(mg.grad(f)(p, mnd), numerical_grad(lambda p: f(p, nd), (p,), (0,))[0], rtol=1e-6)
    h = mg.hessian(lambda p: f(p, mnd))(p)
    np.testing.assert_allclose(h, mg.jacobian(mg.grad(lambda p: f(p, mnd)), mode="rev")(p), rtol=1e-10, atol=1e-12)
    e = 1e-5
    fd = np.stack([(mg.grad(f)(p + e * u, mnd) - mg.grad(f)(p - e * u, mnd)) / (2 * e) for u in np.eye(2)])
    np.testing.assert_allclose(h, fd, rtol=1e-5, atol=1e-6)


def test_an_interpolation_into_its_own_input_without_a_prefilter_is_refused():
    # (advect) shift(q, s, output=q, order=1): SciPy reads the input while it writes the output, so its values depend
    # on the order of its writes; mutagrad computed as into a separate output, another value and derivative,
    # silently. Now refused, at order 0 or 1 or without the prefilter; with it (order 3), SciPy reads a filtered
    # copy, and the result is SciPy's, its derivative central differences' of the plain call, the argument as left
    q0 = np.sin(np.arange(12.0)).reshape(3, 4) + 1.5
    I, J = np.meshgrid(np.arange(3.0), np.arange(4.0), indexing="ij")
    calls = {
        "shift": lambda nd, q, s, **kw: nd.shift(q, (s, -0.3), output=q, mode="grid-wrap", **kw),
        "map_coordinates": lambda nd, q, s, **kw: nd.map_coordinates(q, [I - s, J + 0.2], output=q, mode="nearest",
                                                                     **kw),
        "affine_transform": lambda nd, q, s, **kw: nd.affine_transform(q, np.eye(2) * s, output=q, **kw),
        "rotate": lambda nd, q, s, **kw: nd.rotate(q, 10.0 * s, reshape=False, output=q, **kw),
    }
    for name, call in calls.items():
        for kw in ({"order": 1}, {"order": 0}, {"order": 3, "prefilter": False}):
            with pytest.raises(UnsupportedInputError, match=rf"scipy.ndimage.{name} at .*output= shares memory"):
                mg.grad(lambda s, call=call, kw=kw: np.sum(call(mnd, q0.copy(), s, **kw) ** 2))(0.9)

        def f(q, s, ns, call=call):
            call(ns, q, s, order=3)
            return np.sum(q ** 2)

        q = q0.copy()
        g = mg.grad(f, argnums=(0, 1))(q, 0.9, mnd)
        plain = q0.copy()
        f(plain, 0.9, nd)
        np.testing.assert_array_equal(q, plain)
        fd = (f(q0.copy(), 0.9 + 1e-6, nd) - f(q0.copy(), 0.9 - 1e-6, nd)) / 2e-6
        np.testing.assert_allclose(g[1], fd, rtol=1e-5)
        d = np.cos(np.arange(12.0)).reshape(3, 4)  # (and in the field, along a direction)
        fd = (f(q0 + 1e-6 * d, 0.9, nd) - f(q0 - 1e-6 * d, 0.9, nd)) / 2e-6
        np.testing.assert_allclose(np.sum(g[0] * d), fd, rtol=1e-5)
