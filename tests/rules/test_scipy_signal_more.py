"""mutagrad.scipy.signal's filtfilt, sosfilt, sosfiltfilt, hilbert, lfilter_zi and sosfilt_zi.

Every derivative against central differences of SciPy's own function on plain arrays (check_grads:
mutagrad's functions call SciPy's when nothing is traced), reverse against forward mode (the
dot-product identity), second order against differences of the gradient; the values against SciPy's
(rtol 1e-12); SciPy's errors on traced arguments."""
import re
import warnings

import numpy as np
import pytest

import mutagrad as mg
from mutagrad.testing import check_grads, numerical_grad

ss = pytest.importorskip("scipy.signal")
import mutagrad.scipy.signal as mss

RNG = np.random.default_rng(11)
X1 = RNG.standard_normal(24)
X2 = RNG.standard_normal((11, 13))  # (11 samples along axis 0, 13 along axis 1)
XC = X1 + 1j * RNG.standard_normal(24)
B, A = ss.butter(2, 0.3)  # 3 taps: a default padlen of 9
BC, AC = ss.cheby1(3, 1.0, 0.25)  # 4 taps
SOS = ss.butter(3, 0.2, output="sos")  # a first-order section (b2 = 0) and one with a2 = 0: 4 taps, not 5
SOSC = ss.cheby1(4, 1.0, 0.3, output="sos")  # two full sections: 5 taps


def _sos(sb, sa):
    """sos from its numerators and denominators (sos[:, 3] = 1: SciPy's sosfilt requires it)."""
    return np.concatenate([sb, np.ones((np.shape(sb)[0], 1)), sa], axis=1)


def _smooth(y):
    return np.sum(np.abs(y) ** 2) + np.sum(np.sin(np.real(y)))


def _parts(sos):
    return sos[:, :3].copy(), sos[:, 4:].copy()


SB, SA = _parts(SOS)
SBC, SAC = _parts(SOSC)
ZI = RNG.standard_normal((2, 2))  # sosfilt's zi for two sections, a 1-d signal
ZI0 = RNG.standard_normal((2, 2, 13))  # along axis 0 of X2
ZI1 = RNG.standard_normal((2, 11, 2))  # along axis 1


def _sosfilt_zf(sb, sa, x, zi, axis=-1):
    y, zf = mss.sosfilt(_sos(sb, sa), x, axis=axis, zi=zi)
    return np.sin(y), np.cos(zf)


CASES = [  # (what it covers, function, arguments, order)
    # filtfilt: Butterworth and Chebyshev coefficients, each padtype, padlen, axis
    ("filtfilt", lambda b, a, x: np.sin(mss.filtfilt(b, a, x)), (B, A, X1), 2),
    ("filtfilt", lambda b, a, x: np.sin(mss.filtfilt(b, a, x, padtype="even", padlen=5)), (BC, AC, X1), 2),
    ("filtfilt", lambda b, a, x: np.sin(mss.filtfilt(b, a, x, axis=0, padtype="constant")), (B, A, X2), 2),
    ("filtfilt", lambda b, a, x: np.sin(mss.filtfilt(b, a, x, axis=1, padtype="odd", padlen=12)), (BC, AC, X2), 2),
    ("filtfilt", lambda b, a, x: np.sin(mss.filtfilt(b, a, x, axis=-1, padtype=None)), (B, A, X2), 1),
    ("filtfilt", lambda b, a, x: np.sin(mss.filtfilt(b, a, x, padlen=0)), (BC, AC, X1), 1),
    ("filtfilt", lambda b, a, x: np.sin(mss.filtfilt(b, a, x, padlen=23)), (B, A, X1), 1),  # (the longest)
    ("filtfilt", lambda b, a, x: np.sin(mss.filtfilt(b, a, x, padtype="even", padlen=23)), (B, A, X1), 1),
    ("filtfilt", lambda b, a, x: np.sin(mss.filtfilt(b, a, x)), (RNG.standard_normal(5), np.array([2.0, 0.6]), X1), 1),
    ("filtfilt", lambda b, a, x: _smooth(mss.filtfilt(b, a, x)), (B, A, XC), 2),  # complex signal
    ("filtfilt", lambda b, a, x: _smooth(mss.filtfilt(b, a, x, padtype="even")), (B + 0.1j, A - [0, 0.05j, 0], X1), 1),
    # Gustafsson's method: the whole response, and one truncated to irlen samples (along axis 1)
    ("filtfilt", lambda b, a, x: np.sin(mss.filtfilt(b, a, x, method="gust")), (BC, AC, X1), 2),
    ("filtfilt", lambda b, a, x: np.sin(mss.filtfilt(b, a, x, axis=0, method="gust")), (B, A, X2), 1),
    ("filtfilt", lambda b, a, x: np.sin(mss.filtfilt(b, a, x, axis=1, method="gust", irlen=4)), (B, A, X2), 2),
    ("filtfilt", lambda b, a, x: _smooth(mss.filtfilt(b, a, x, method="gust", irlen=6)), (BC, AC, XC), 1),
    ("filtfilt", lambda b, x: np.sin(mss.filtfilt(b, [1.0], x, method="gust")), (B, X1), 2),  # FIR
    # lfilter_zi: lengths, a[0] != 1, complex
    ("lfilter_zi", lambda b, a: np.sin(mss.lfilter_zi(b, a)), (B, A), 2),
    ("lfilter_zi", lambda b, a: np.sin(mss.lfilter_zi(b, a)), (BC, AC), 2),
    ("lfilter_zi", lambda b, a: np.sin(mss.lfilter_zi(b, a)), (RNG.standard_normal(5), np.array([2.0, 0.3])), 2),
    ("lfilter_zi", lambda b, a: np.sin(mss.lfilter_zi(b, a)), (np.array([0.4, -0.3]), np.array([1.5, 0.3, -0.2, 0.1])), 2),
    ("lfilter_zi", lambda b, a: _smooth(mss.lfilter_zi(b, a)), (B + 0.2j, np.array([1.5, 0.3j, -0.2])), 2),
    # (a leading zero of a: SciPy drops it; differentiated in the others)
    ("lfilter_zi", lambda b, a1: np.sin(mss.lfilter_zi(b, np.concatenate([[0.0], a1]))), (BC, AC), 2),
    # sosfilt: the sections' coefficients, the signal, zi (and zf), each axis, complex
    ("sosfilt", lambda sb, sa, x: np.sin(mss.sosfilt(_sos(sb, sa), x)), (SB, SA, X1), 2),
    ("sosfilt", lambda sb, sa, x: np.sin(mss.sosfilt(_sos(sb, sa), x, axis=0)), (SBC, SAC, X2), 1),
    ("sosfilt", _sosfilt_zf, (SB, SA, X1, ZI), 2),
    ("sosfilt", lambda sb, sa, x, z: _sosfilt_zf(sb, sa, x, z, axis=0), (SBC, SAC, X2, ZI0), 2),
    ("sosfilt", lambda sb, sa, x, z: _sosfilt_zf(sb, sa, x, z, axis=1), (SB, SA, X2, ZI1), 1),
    ("sosfilt", lambda sb, sa, x, z: [_smooth(v) for v in mss.sosfilt(_sos(sb, sa), x, zi=z)],
     (SB + 0.1j, SA, XC, ZI + 0.3j), 2),
    # sosfilt_zi: every column of sos (SciPy's formula reads sos[:, 3] too)
    ("sosfilt_zi", lambda s: np.sin(mss.sosfilt_zi(s)), (SOS,), 2),
    ("sosfilt_zi", lambda s: np.sin(mss.sosfilt_zi(s)), (SOSC * [1, 1, 1, 1.5, 1, 1],), 2),
    ("sosfilt_zi", lambda s: _smooth(mss.sosfilt_zi(s)), (SOSC + 0.1j * RNG.standard_normal((2, 6)),), 1),
    # sosfiltfilt: each padtype, padlen, axis
    # (the default padlen counts the sections with b2 = 0 and a2 = 0: SOS's zeros are differentiated below)
    ("sosfiltfilt", lambda sb, sa, x: np.sin(mss.sosfiltfilt(_sos(sb, sa), x)), (SBC, SAC, X1), 2),
    ("sosfiltfilt", lambda sb, sa, x: np.sin(mss.sosfiltfilt(_sos(sb, sa), x, padtype="even", padlen=7)),
     (SB, SA, X1), 2),
    ("sosfiltfilt", lambda sb, sa, x: np.sin(mss.sosfiltfilt(_sos(sb, sa), x, axis=0, padtype="constant", padlen=4)),
     (SB, SA, X2), 1),
    ("sosfiltfilt", lambda sb, sa, x: np.sin(mss.sosfiltfilt(_sos(sb, sa), x, axis=1, padtype=None)), (SBC, SAC, X2), 2),
    ("sosfiltfilt", lambda sb, sa, x: _smooth(mss.sosfiltfilt(_sos(sb, sa), x, padlen=0)), (SB - 0.1j, SA, XC), 1),
    # hilbert: N (shorter, longer, odd, even), axis
    ("hilbert", lambda x: _smooth(mss.hilbert(x)), (X1,), 2),
    ("hilbert", lambda x: _smooth(mss.hilbert(x, 31)), (X1,), 2),
    ("hilbert", lambda x: _smooth(mss.hilbert(x, 9)), (X1,), 1),
    ("hilbert", lambda x: _smooth(mss.hilbert(x, axis=0)), (X2,), 2),
    ("hilbert", lambda x: _smooth(mss.hilbert(x, 16, axis=1)), (X2,), 1),
    ("hilbert", lambda x: np.imag(mss.hilbert(x, 10, axis=-1)), (X2,), 1),
]


@pytest.mark.parametrize("covers,fn,args,order", CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_derivatives(covers, fn, args, order):
    check_grads(fn, *args, modes=("fwd", "rev"), order=order)


def test_every_new_function_has_a_case():
    from mutagrad.rules.scipy import signal

    assert {c[0] for c in CASES} == {name.split(".")[-1] for name in signal.COMPOSITES}


VALUES = [  # (function, positional arguments, keywords): traced, against SciPy's call
    ("filtfilt", (B, A, X1), {}),
    ("filtfilt", (BC, AC, X2), {"axis": 0, "padtype": "even", "padlen": 10}),
    ("filtfilt", (B, A, X2), {"axis": 1, "padtype": "constant"}),
    ("filtfilt", (B, A, X2), {"axis": -2, "padtype": None}),
    ("filtfilt", (B + 0.1j, A, XC), {"padlen": 3}),
    ("filtfilt", (BC, AC, X2), {"axis": 0, "method": "gust"}),
    ("filtfilt", (BC, AC, X2), {"axis": 1, "method": "gust", "irlen": 5}),
    ("filtfilt", (np.array([2.0]), np.array([1.5]), X1), {"method": "gust"}),  # (no state: a gain)
    ("lfilter_zi", (BC, AC), {}),
    ("lfilter_zi", (np.array([1.0, 0.5, 0.25, 0.1]), np.array([0.0, 2.0, 0.3])), {}),
    ("sosfilt", (SOSC, X2), {"axis": 0}),
    ("sosfilt", (SOS, X2), {"axis": 1, "zi": ZI1}),
    ("sosfilt", (SOS, XC), {"zi": ZI}),
    ("sosfilt_zi", (SOSC,), {}),
    ("sosfiltfilt", (SOS, X2), {"axis": 1}),
    ("sosfiltfilt", (SOSC, X1), {"padtype": "even", "padlen": 20}),
    ("hilbert", (X2,), {"N": 12, "axis": 0}),
    ("hilbert", (X1,), {"N": 25}),
]


@pytest.mark.parametrize("name,args,kw", VALUES, ids=[f"{v[0]}-{i}" for i, v in enumerate(VALUES)])
def test_values_are_scipys(name, args, kw):
    want = getattr(ss, name)(*args, **kw)
    got = mg.vjp(lambda *a: getattr(mss, name)(*a, **kw), *args)[0]  # (every argument traced)
    for g, w in zip(got if isinstance(want, tuple) else [got], want if isinstance(want, tuple) else [want]):
        assert g.shape == w.shape and g.dtype == w.dtype, (g.shape, w.shape, g.dtype, w.dtype)
        np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-14 * np.max(np.abs(w), initial=1.0))
    if name == "hilbert":  # (scipy.fft's transforms, SciPy's steps: its bits)
        assert np.array_equal(got, want)
    plain = getattr(mss, name)(*args, **kw)  # nothing traced: SciPy's own call
    for p, w in zip(plain if isinstance(want, tuple) else [plain], want if isinstance(want, tuple) else [want]):
        assert np.array_equal(p, w)


def test_sos_denominator_lead_is_a_normalization():
    # SciPy's sosfilt requires sos[:, 3] == 1 and never reads it (differences of it raise); ours divides
    # each section by it, as lfilter does: the derivative in that column is that of sosfilt(sos / sos[:, 3:4])
    w = RNG.standard_normal(24)

    def ours(s):
        return np.sum(w * np.sin(mss.sosfilt(s, X1, zi=ZI)[0])) + np.sum(np.sin(mss.sosfiltfilt(s, X1, padlen=6)))

    def normalized(s):
        s = s / s[:, 3:4]
        return np.sum(w * np.sin(ss.sosfilt(s, X1, zi=ZI)[0])) + np.sum(np.sin(ss.sosfiltfilt(s, X1, padlen=6)))

    fd = numerical_grad(normalized, (SOS,), (0,))[0]
    assert np.all(fd[:, 3] != 0)
    np.testing.assert_allclose(mg.grad(ours)(SOS), fd, rtol=1e-6, atol=1e-9)
    v = RNG.standard_normal(SOS.shape)
    np.testing.assert_allclose(mg.jvp(ours, (SOS,), (v,))[1], np.sum(fd * v), rtol=1e-6)


def test_sosfiltfilt_padding_counts_the_exact_zeros():
    # SciPy's default padlen, 3 (2 n_sections + 1 - min(#(b2 == 0), #(a2 == 0))), jumps where a zero
    # coefficient moves (SOS: 12 samples, 15 next to it): the derivative is that of the padding taken,
    # SciPy's sosfiltfilt with padlen=12, in every coefficient (the zeros too)
    w = RNG.standard_normal(24)
    fd = numerical_grad(lambda sb, sa: np.sum(w * np.sin(ss.sosfiltfilt(_sos(sb, sa), X1, padlen=12))),
                        (SB, SA), (0, 1))
    assert fd[0][1, 2] != 0 and fd[1][0, 1] != 0  # (at the zeros)
    g = mg.grad(lambda sb, sa: np.sum(w * np.sin(mss.sosfiltfilt(_sos(sb, sa), X1))), argnums=(0, 1))(SB, SA)
    for got, want in zip(g, fd):
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(mg.vjp(lambda s: mss.sosfiltfilt(s, X1), SOS)[0], ss.sosfiltfilt(SOS, X1, padlen=12),
                               rtol=1e-12)


def test_coefficients_given_as_lists_of_traced_numbers():
    check_grads(lambda p: np.sin(mss.filtfilt([p, 0.5 * p], [1.0, -0.5 * p], X1)), 0.6, order=2)
    check_grads(lambda p: np.sin(mss.sosfilt([[p, p, 0.0, 1.0, -p, 0.0]], X1)), 0.4, order=2)
    check_grads(lambda p: np.sin(mss.sosfiltfilt([[p, p, 0.0, 1.0, -p, 0.0], [1.0, 0.0, 0.0, 1.0, 0.2, 0.0]],
                                                 X1)), 0.4, order=2)
    check_grads(lambda p: np.sin(mss.lfilter_zi([1.0, p], [1.0, p * p])), 0.3, order=2)
    check_grads(lambda p: np.sin(mss.sosfilt_zi([[p, 1.0, 0.0, 1.0, -p, 0.0]])), 0.3, order=2)
    check_grads(lambda p: np.abs(mss.hilbert([p, 2 * p, 1.0, 0.0])), 0.7, order=2)


def test_a_smoothing_filter_fitted_through_filtfilt():
    # the tester's use: a zero-phase low-pass with a traced pole and gain, fitted to a target; the
    # gradient against central differences of SciPy's filtfilt, and a step of gradient descent decreasing
    # the loss
    t = np.linspace(0.0, 1.0, 60)
    noisy = np.sin(2 * np.pi * 2 * t) + 0.3 * RNG.standard_normal(60)
    target = np.sin(2 * np.pi * 2 * t)

    def loss(p, filt):
        pole, gain = p[0], p[1]
        b = np.stack([gain * (1 - pole), 0.0 * gain])
        return np.mean((filt(b, np.stack([1.0 + 0.0 * pole, -pole]), noisy) - target) ** 2)

    p = np.array([0.7, 1.0])
    v, g = mg.value_and_grad(lambda p: loss(p, mss.filtfilt))(p)
    plain = lambda p: loss(p, ss.filtfilt)
    np.testing.assert_allclose(v, plain(p), rtol=1e-12)
    np.testing.assert_allclose(g, numerical_grad(plain, (p,), (0,))[0], rtol=1e-6)
    assert plain(p - 0.05 * g / np.linalg.norm(g)) < plain(p)


def test_gust_with_complex_coefficients_warns_as_scipy_does():
    # SciPy writes the response to an initial state into an array of floats (its imaginary part
    # discarded, with a ComplexWarning): the same values, the same warning, and that function's derivative
    # (that response depends on a alone: a complex a has one with an imaginary part)
    b, a = B + 0.2j, A + np.array([0.0, 0.1j, -0.05j])
    with pytest.warns(np.exceptions.ComplexWarning):
        want = ss.filtfilt(b, a, X1, method="gust")
    with pytest.warns(np.exceptions.ComplexWarning):
        got = mg.vjp(lambda b, a: mss.filtfilt(b, a, X1, method="gust"), b, a)[0]
    np.testing.assert_allclose(got, want, rtol=1e-12)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", np.exceptions.ComplexWarning)
        check_grads(lambda b, a: _smooth(mss.filtfilt(b, a, X1, method="gust")), b, a)


def test_gust_of_an_unstable_filter_refuses_its_derivative():
    # Gustafsson's least squares for an unstable filter's growing responses is ill-conditioned: its
    # derivative came out 1e3 times off at a pole 1.5 (condition 3e11), 1e-3 relative at 1.3 (the sigreg
    # tester). filtfilt is linear in x, so its exact gradient along w is SciPy's of each unit vector:
    # where the system is well enough conditioned (poles 0.9, 1.1) the gradient is that to 1e-10
    b = np.array([0.2, 0.3, 0.1, 0.05, 0.02])
    n = 30
    w = np.random.default_rng(5).standard_normal(n)
    x = np.random.default_rng(6).standard_normal(n)
    for pole in (0.9, 1.1):
        a = np.array([1.0, -pole])
        g = mg.grad(lambda x, a=a: np.sum(w * mss.filtfilt(b, a, x, method="gust")))(x)
        exact = np.array([np.sum(w * ss.filtfilt(b, a, e, method="gust")) for e in np.eye(n)])
        np.testing.assert_allclose(g, exact, rtol=1e-10, atol=1e-10 * np.max(np.abs(exact)))
    for pole in (1.3, 1.5):
        a = np.array([1.0, -pole])
        f = lambda x, a=a: np.sum(w * mss.filtfilt(b, a, x, method="gust"))
        value, g = mg.value_and_grad(f)(x)
        assert value == np.sum(w * ss.filtfilt(b, a, x, method="gust"))  # (SciPy's value kept)
        assert isinstance(g, mg.NotImplementedTangent) and "ill-conditioned" in g.message
        assert isinstance(mg.jvp(f, (x,), (w,))[1], mg.NotImplementedTangent)


def test_gust_where_its_least_squares_matrix_is_rank_deficient():
    # An FIR filter with b[0] == a[0]: Gustafsson's matrix loses rank, and SciPy's result jumps with b[0]
    # (its differences in b[0] are ~1e5). In x (linear) every order; in the other coefficients (the rank
    # held) np.linalg.lstsq's first derivative of the truncated solution; a second one is not implemented.
    b = np.array([1.0, 0.5, -0.3])
    np.testing.assert_allclose(mg.vjp(lambda x: mss.filtfilt(b, [1.0], x, method="gust"), X1)[0],
                               ss.filtfilt(b, [1.0], X1, method="gust"), rtol=1e-12)
    check_grads(lambda x: np.sin(mss.filtfilt(b, [1.0], x, method="gust")), X1, order=2)

    def f(b1, x):
        return np.sin(mss.filtfilt(np.concatenate([[1.0], b1]), [1.0], x, method="gust"))

    check_grads(f, b[1:], X1)
    h = mg.hessian(lambda b1: np.sum(f(b1, X1)))(b[1:])
    assert isinstance(h, mg.NotImplementedTangent) and "truncated pseudo-inverse" in h.message


ERRORS = [  # (function, arguments, keywords): SciPy's error on plain arguments, ours on traced ones
    ("filtfilt", (B, A, X1), {"padtype": "reflect"}),
    ("filtfilt", (B, A, X1), {"padlen": 24}),
    ("filtfilt", (BC, AC, X1[:12]), {}),  # (default padlen 12)
    ("filtfilt", (B, A, X1), {"method": "pads"}),
    ("filtfilt", (np.array([1.0]), np.array([2.0]), X1), {}),  # (lfilter_zi of no state)
    ("lfilter_zi", (np.ones((2, 2)), A), {}),
    ("lfilter_zi", (B, np.zeros(0)), {}),  # (zeros(3): SciPy keeps the last zero, and divides by it)
    ("sosfilt", (SOS * [1, 1, 1, 2, 1, 1], X1), {}),
    ("sosfilt", (SOS[:, :5], X1), {}),
    ("sosfilt", (SOS, X2), {"axis": 0, "zi": ZI1}),
    ("sosfilt", (SOS, np.array(1.0)), {}),
    ("sosfilt", (SOS[:0], X1), {}),  # (no sections: SciPy 1.17 raises)
    ("sosfilt_zi", (SOS[:, :5],), {}),
    ("sosfiltfilt", (SOSC, X1[:15]), {}),  # (default padlen 15)
    ("sosfiltfilt", (SOS, X1), {"padtype": "zero"}),
    ("hilbert", (XC,), {}),
    ("hilbert", (X1,), {"N": 0}),
]


@pytest.mark.parametrize("name,args,kw", ERRORS, ids=[f"{e[0]}-{i}" for i, e in enumerate(ERRORS)])
def test_scipys_errors(name, args, kw):
    with pytest.raises(Exception) as theirs:
        getattr(ss, name)(*args, **kw)
    with pytest.raises(type(theirs.value), match=re.escape(str(theirs.value))):
        mg.vjp(lambda *a: getattr(mss, name)(*a, **kw), *args)


@pytest.mark.parametrize("name,call", [
    ("filtfilt", lambda x: ss.filtfilt(B, A, x)), ("sosfilt", lambda x: ss.sosfilt(SOS, x)),
    ("sosfiltfilt", lambda x: ss.sosfiltfilt(SOS, x)), ("hilbert", lambda x: ss.hilbert(x).real),
    ("lfilter_zi", lambda x: ss.lfilter_zi(x[:3], A)), ("sosfilt_zi", lambda x: ss.sosfilt_zi(_sos(x[None, :3], SA[:1])))])
def test_scipys_own_functions_on_traced_arrays_name_ours(name, call):
    with pytest.raises(mg.TracerEscapeError) as e:
        mg.grad(lambda x: np.sum(call(x)))(X1)
    assert f"mutagrad.scipy.signal.{name} is the same function, differentiated" in str(e.value)
