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
