"""mutagrad.scipy.signal.lfilter against central differences (check_grads: both modes,
second order), SciPy's own values and a filter written as an element loop."""
import numpy as np
import pytest

import mutagrad as mg
from mutagrad.testing import check_grads, numerical_grad

ss = pytest.importorskip("scipy.signal")
import mutagrad.scipy.signal as mss

RNG = np.random.default_rng(0)
B, A = RNG.standard_normal(3), np.array([1.3, 0.2, -0.15])
X, X2 = RNG.standard_normal(8), RNG.standard_normal((6, 4))
ZI = RNG.standard_normal(2)


def _with_state(b, a, x, zi):
    y, zf = mss.lfilter(b, a, x, zi=zi)
    return np.concatenate([np.sin(y), zf ** 2])


CASES = [  # (what it covers, function, arguments, order)
    ("scipy.signal.lfilter", lambda b, a, x: np.sin(mss.lfilter(b, a, x)), (B, A, X), 2),
    ("scipy.signal.lfilter", lambda x: np.cos(mss.lfilter(B, A, x, axis=0)), (X2,), 2),
    ("scipy.signal.lfilter", lambda b, x: np.abs(mss.lfilter(b, [1.0, -0.3j], x)) ** 2, (B + 0.1j, X + 0.2j), 1),
    ("scipy.signal.lfilter (final state zf)", _with_state, (B, A, X, ZI), 2),
    ("scipy.signal.lfilter (final state zf)", _with_state, (B, A, X[:1], ZI), 2),
]


CONV_RNG = np.random.default_rng(7)  # (its own: the draws above stay as they were)


def _draw(shape, cplx):
    a = CONV_RNG.standard_normal(shape)
    return a + 1j * CONV_RNG.standard_normal(shape) if cplx else a


def _smooth(y):
    return np.sum(np.abs(y) ** 2) + np.sum(np.sin(np.real(y)))


SECOND_ORDER = [  # (function, keywords, in1, in2): small cases, order=2
    ("convolve", {"mode": "same", "method": "direct"}, (6,), (4,)),
    ("convolve", {"mode": "valid", "method": "fft"}, (3, 4), (4, 5)),
    ("correlate", {"mode": "same", "method": "auto"}, (3, 4), (2, 2)),
    ("correlate", {"mode": "full", "method": "direct"}, (2, 2, 3), (2, 1, 2)),
    ("fftconvolve", {"mode": "same", "axes": None}, (5,), (6,)),
    ("oaconvolve", {"mode": "valid", "axes": -1}, (2, 7), (1, 3)),
    ("convolve2d", {"mode": "same", "boundary": "symm"}, (3, 4), (2, 3)),
    ("convolve2d", {"mode": "full", "fillvalue": 2.0}, (3, 3), (2, 2)),
    ("correlate2d", {"mode": "same", "boundary": "wrap"}, (2, 3), (4, 4)),
    ("correlate2d", {"mode": "valid"}, (2, 3), (3, 4)),
]


def _smoothed(name, kw):
    return lambda x, y: _smooth(getattr(mss, name)(x, y, **kw))


CASES += [  # the convolutions, tested further below
    (f"scipy.signal.{name}", _smoothed(name, kw), (_draw(s1, i % 2 == 1), _draw(s2, i % 3 == 1)), 2)
    for i, (name, kw, s1, s2) in enumerate(SECOND_ORDER)]


@pytest.mark.parametrize("covers,fn,args,order", CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_rule(covers, fn, args, order):
    check_grads(fn, *args, modes=("fwd", "rev"), order=order)


def test_coefficients_given_as_lists_of_traced_numbers():
    check_grads(lambda p: np.sum(mss.lfilter([1.0, p], [1.0, -p, 0.1 * p], X) ** 2), 0.3, order=2)
    # a signal and a state given as lists holding traced numbers
    check_grads(lambda p: np.sum(mss.lfilter(B, A, [p, 2 * p, 1.0]) ** 2), 0.7, order=2)
    check_grads(lambda p: np.sum(mss.lfilter(B, A, X, zi=[p, 0.5 * p])[0] ** 2), 0.7, order=2)


def test_final_state_of_complex_signals():
    # the final state's reverse derivative with complex values (it took the conjugate cotangent)
    xc, zc = X[:4] + 1j * X[4:], np.array([0.1 + 0.2j, -0.3j])

    def f(b, a, x, zi):
        return np.sum(np.abs(mss.lfilter(b, a, x, zi=zi)[1]) ** 2)

    check_grads(f, B, A, xc, zc, order=2)
    check_grads(f, B + 0.3j, A, X[:4], ZI, order=1)


@pytest.mark.parametrize("b,a", [([1, 2, 1], 1), (RNG.standard_normal(5), [2.0, 0.3]),
                                 (RNG.standard_normal(2), [2.0, 0.3, -0.2, 0.1])])
def test_coefficient_lengths(b, a):
    b, a = np.asarray(b, float), np.asarray(a, float)
    np.testing.assert_array_equal(mg.vjp(lambda x: mss.lfilter(b, a, x), X)[0], ss.lfilter(b, a, X))
    check_grads(lambda b, a, x: np.sum(mss.lfilter(b, a, x) ** 2), b, np.atleast_1d(a), X, order=2)


@pytest.mark.parametrize("b,a", [(RNG.standard_normal(5), [2.0, 0.3]), (RNG.standard_normal(2), [1.5, 0.3, -0.2, 0.1]),
                                 (RNG.standard_normal(3) + 0.2j, [1.2 - 0.4j, 0.3j, 0.1]), ([0.7], [1.1])])
def test_final_state_with_coefficient_lengths(b, a):
    # zf has max(len(a), len(b)) - 1 samples: each coefficient's part in it, both modes, second order
    b, a = np.asarray(b), np.asarray(a)
    m = max(len(a), len(b)) - 1
    zi = RNG.standard_normal(m) + (0.5j * RNG.standard_normal(m) if np.iscomplexobj(a) else 0)

    def f(b, a, x, zi):
        y, zf = mss.lfilter(b, a, x, zi=zi)
        return np.sum(np.abs(zf) ** 2) + np.sum(np.sin(np.real(zf))) + np.sum(np.real(y) ** 2)

    y, zf = mg.vjp(lambda x: mss.lfilter(b, a, x, zi=zi), X)[0]
    y0, zf0 = ss.lfilter(b, a, X, zi=zi)
    assert np.array_equal(y, y0) and np.array_equal(zf, zf0)
    check_grads(f, b, a, X, zi, modes=("fwd", "rev"), order=2)


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_along_an_axis_with_initial_state(axis):
    zshape = list(X2.shape)
    zshape[axis] = 2
    Z = RNG.standard_normal(zshape)

    def f(b, a, x, z):
        y, zf = mss.lfilter(b, a, x, axis=axis, zi=z)
        return np.sum(np.tanh(y)) + np.sum(np.sin(zf))

    (y, zf), (y0, zf0) = mg.vjp(lambda x: mss.lfilter(B, A, x, axis=axis, zi=Z), X2)[0], ss.lfilter(B, A, X2, axis=axis, zi=Z)
    assert np.array_equal(y, y0) and np.array_equal(zf, zf0) and y.strides == y0.strides  # SciPy's values
    check_grads(f, B, A, X2, Z, order=2)


def test_blocks_carrying_the_state_and_an_element_loop():
    def blocks(x):
        z = np.zeros(2)
        out = []
        for k in range(0, 8, 3):
            y, z = mss.lfilter(B, A, x[k:k + 3], zi=z)
            out.append(y)
        return np.sum(np.concatenate(out) ** 2)

    def loop(b, a, x):  # the direct form I recursion, written by hand
        y = np.zeros_like(x)
        for n in range(len(x)):
            acc = sum(b[k] * x[n - k] for k in range(len(b)) if n >= k)
            acc = acc - sum(a[k] * y[n - k] for k in range(1, len(a)) if n >= k)
            y[n] = acc / a[0]
        return np.sum(y ** 2)

    # the blocks carrying the state compute the whole signal's filter: its gradient, against central
    # differences of the plain whole-signal program (SciPy's lfilter on plain arrays)
    whole = numerical_grad(lambda x: np.sum(ss.lfilter(B, A, x) ** 2), (X,), (0,))[0]
    np.testing.assert_allclose(mg.grad(blocks)(X), whole, rtol=1e-7)
    # against central differences of the hand-written recursion (another program, the same function)
    for got, want in zip(mg.grad(lambda b, a, x: np.sum(mss.lfilter(b, a, x) ** 2), argnums=(0, 1, 2))(B, A, X),
                         numerical_grad(loop, (B, A, X), (0, 1, 2))):
        np.testing.assert_allclose(got, want, rtol=1e-6)
    zi0 = ss.lfilter_zi(B, A)  # steady-state initial conditions, as SciPy's docs use them
    check_grads(lambda x: np.sum(mss.lfilter(B, A, x, zi=zi0 * x[0])[0] ** 2), X, order=2)


# -- convolutions -----------------------------------------------------------------------------
# Every derivative against central differences of SciPy's own function on plain arrays (check_grads),
# forward against reverse mode; the values against a plain SciPy call, bit for bit.

def _cases(pairs):
    """The shape pairs, each with one of the four real/complex combinations in turn."""
    return [(_draw(s1, i % 4 in (1, 3)), _draw(s2, i % 4 in (2, 3))) for i, (s1, s2) in enumerate(pairs)]


# odd and even kernels (the 'same' window's centring differs), in2 larger than in1 (in every dimension, or in
# one: 'valid' then raises SciPy's ValueError), 2-D and 3-D
ND_PAIRS = _cases([((7,), (3,)), ((7,), (4,)), ((3,), (6,)), ((4,), (7,)), ((5,), (5,)), ((5, 6), (2, 3)),
                   ((3, 4), (4, 5)), ((4, 3), (2, 5)), ((4, 3, 5), (2, 2, 3)), ((2, 3, 2), (3, 4, 3))])
TWO_D_PAIRS = _cases([((5, 6), (3, 3)), ((4, 5), (2, 4)), ((3, 4), (4, 5)), ((2, 3), (5, 6)), ((4, 4), (1, 2)),
                      ((2, 2), (3, 2)), ((3, 5), (4, 2))])  # (the last: neither larger, 'valid' raises)
BOUNDARIES = [("fill", 0), ("fill", 1.5), ("wrap", 0), ("symm", 0)]
MODES = ("full", "same", "valid")
ND_CALLS = ([(n, {"mode": m, "method": meth}) for n in ("convolve", "correlate") for m in MODES
             for meth in ("direct", "fft", "auto")]
            + [(n, {"mode": m}) for n in ("fftconvolve", "oaconvolve") for m in MODES])
TWO_D_CALLS = [(n, {"mode": m, "boundary": b, "fillvalue": c}) for n in ("convolve2d", "correlate2d") for m in MODES
               for b, c in BOUNDARIES]


def _check_convolution(name, kw, pairs):
    ours, theirs = getattr(mss, name), getattr(ss, name)
    checked = 0
    for a, b in pairs:
        try:
            want = theirs(a, b, **kw)
        except ValueError:  # ('valid' with neither input the larger in every dimension: SciPy's error)
            with pytest.raises(ValueError):
                mg.vjp(lambda a, b: ours(a, b, **kw), a, b)
            continue
        # both traced, then each alone with the other a plain array (closed over)
        for fn, args in ((lambda x, y: ours(x, y, **kw), (a, b)), (lambda x, b=b: ours(x, b, **kw), (a,)),
                         (lambda y, a=a: ours(a, y, **kw), (b,))):
            got = mg.vjp(fn, *args)[0]
            assert got.dtype == want.dtype and np.array_equal(got, want), (name, kw, a.shape, b.shape)
            check_grads(fn, *args)
        checked += 1
    assert checked


@pytest.mark.parametrize("name,kw", ND_CALLS, ids=[f"{n}-{'-'.join(map(str, k.values()))}" for n, k in ND_CALLS])
def test_nd_convolutions(name, kw):
    _check_convolution(name, kw, ND_PAIRS)


@pytest.mark.parametrize("name,kw", TWO_D_CALLS, ids=[f"{n}-{'-'.join(map(str, k.values()))}" for n, k in TWO_D_CALLS])
def test_2d_convolutions_with_every_boundary(name, kw):
    _check_convolution(name, kw, TWO_D_PAIRS)


@pytest.mark.parametrize("name", ["fftconvolve", "oaconvolve"])
@pytest.mark.parametrize("mode", MODES)
def test_fft_convolutions_along_axes_broadcast_along_the_others(name, mode):
    pairs = [(_draw((3, 6), False), _draw((1, 3), True)), (_draw((1, 4), True), _draw((2, 6), False))]
    _check_convolution(name, {"mode": mode, "axes": 1}, pairs)
    _check_convolution(name, {"mode": mode, "axes": [0, -1]}, [(_draw((4, 1, 5), True), _draw((2, 3, 2), False))])


def test_convolutions_of_scalars_and_lists_holding_traced_numbers():
    check_grads(lambda p, q: mss.convolve(p, q) * mss.correlate(p, q), 0.7, 1.3 - 0.2j, order=2)
    check_grads(lambda p: np.sum(mss.convolve([p, 2 * p, 1.0], [1.0, p], mode="same") ** 2), 0.5, order=2)
    check_grads(lambda p: np.sum(mss.convolve2d([[p, 1.0], [0.5, p]], np.eye(2), boundary="wrap") ** 2), 0.5)


def test_a_traced_fillvalue_is_differentiated():
    # (it was refused, naming the padding it stands for): SciPy's values, and the derivative in the
    # fill value, the image and the kernel against central differences of SciPy's own
    for name in ("convolve2d", "correlate2d"):
        for mode in MODES:
            for s1, s2 in (((4, 5), (2, 3)), ((3, 3), (3, 2))):
                a, k = CONV_RNG.standard_normal(s1), CONV_RNG.standard_normal(s2)
                w = CONV_RNG.standard_normal(getattr(ss, name)(a, k, mode=mode).shape)

                def f(c, a, k, name=name, mode=mode, w=w):
                    return np.sum(w * getattr(mss, name)(a, k, mode=mode, fillvalue=c))

                def plain(c, name=name, mode=mode, w=w, a=a, k=k):
                    return np.sum(w * getattr(ss, name)(a, k, mode=mode, fillvalue=c))

                v, g = mg.value_and_grad(f)(1.5, a, k)
                np.testing.assert_allclose(v, plain(1.5), rtol=1e-13)
                np.testing.assert_allclose(g, (plain(1.5 + 1e-6) - plain(1.5 - 1e-6)) / 2e-6, rtol=1e-6, atol=1e-9)
                check_grads(f, 1.5, a, k, order=2)


def test_scipys_own_convolve_on_a_traced_array_points_to_ours():
    x = CONV_RNG.standard_normal(8)
    with pytest.raises(mg.TracerEscapeError) as e:
        mg.grad(lambda x: np.sum(ss.convolve(x, np.ones(3), mode="same") ** 2))(x)
    msg = str(e.value)
    assert "scipy.signal function convolve" in msg and "test_scipy_signal.py" in msg
    assert "mutagrad.scipy.signal.convolve is the same function, differentiated" in msg
    # the function it names: SciPy's value, and its gradient against central differences of SciPy's own
    ours = mg.value_and_grad(lambda x: np.sum(mss.convolve(x, np.ones(3), mode="same") ** 2))(x)
    assert ours[0] == np.sum(ss.convolve(x, np.ones(3), mode="same") ** 2)
    fd = numerical_grad(lambda x: np.sum(ss.convolve(x, np.ones(3), mode="same") ** 2), (x,), (0,))[0]
    np.testing.assert_allclose(ours[1], fd, rtol=1e-7)


def test_a_traced_fillvalue_gets_scipys_checks():
    # a traced fill value of two elements gave a mix of both (SciPy requires a scalar)
    with pytest.raises(ValueError, match="fillvalue"):
        mg.vjp(lambda z: mss.correlate2d(np.ones((2, 3)), np.ones((2, 2)), fillvalue=z), np.array([1.0, 2.0]))
