"""mutagrad.scipy.signal's frequency responses, filter design, Savitzky-Golay filters and spectral estimates.

Every derivative against central differences of SciPy's own function on plain arrays (check_grads:
mutagrad's functions call SciPy's when nothing is traced), reverse against forward mode (the
dot-product identity), second order against differences of the gradient; the values against SciPy's
(rtol 1e-12) with every argument traced; SciPy's errors on traced arguments."""

import numpy as np
import pytest

import mutagrad as mg
from mutagrad.testing import check_grads, numerical_grad

ss = pytest.importorskip("scipy.signal")
import mutagrad.scipy.signal as mss
from tests.rules._draws import assert_raises_as_theirs, float_argnums, leaves

RNG = np.random.default_rng(23)
B, A = ss.butter(3, 0.3)  # an IIR filter: freqz's polynomial path
FIR = RNG.standard_normal(7)  # one coefficient in a: freqz's FFT path (for an int worN)
FIR3 = RNG.standard_normal((5, 2, 1))  # a stack of FIR filters (the coefficients along the first axis)
W = np.array([0.1, 0.7, 1.9, 3.0])  # frequencies (rad/sample)
SOS = ss.cheby1(4, 1.0, 0.3, output="sos")
Z, P, K = ss.cheby1(4, 1.0, [0.2, 0.5], btype="band", output="zpk")
AZ, AP, AK = ss.cheby1(3, 1.0, 2.0, analog=True, output="zpk")  # an analog filter
AB, AA = ss.zpk2tf(AZ, AP, AK)
# (its real pole, complex: differences in its imaginary part move freqs_zpk's automatic frequencies, which
# count the poles with imag >= 0, and cross lp2bp_zpk's square roots' branch cut: an even order has none)
EP, EK = ss.cheby1(4, 1.0, 2.0, analog=True, output="zpk")[1:]
BG, AG = np.array([0.3, 0.2, 0.15]), A  # (no zero on the unit circle: B's zeros at -1 make its group delay
# near Nyquist rounding)
X = RNG.standard_normal(64)
X2 = RNG.standard_normal((3, 40))
XC = RNG.standard_normal(48) + 1j * RNG.standard_normal(48)
Y = RNG.standard_normal(64)


def _sos(sb, sa):
    """sos from its numerators and denominators (sos[:, 3] = 1: SciPy's requires it)."""
    return np.concatenate([sb, np.ones((np.shape(sb)[0], 1)), sa], axis=1)


SB, SA = SOS[:, :3].copy(), SOS[:, 4:].copy()


def _halves(z, p, k):
    """(zeros with imag > 0, real zeros, poles likewise, k): zpk2sos takes only sets closed under conjugation,
    so its differences move a root and its conjugate together."""
    zc, zr = z[np.imag(z) > 1e-12], np.real(z[np.abs(np.imag(z)) <= 1e-12])
    pc, pr = p[np.imag(p) > 1e-12], np.real(p[np.abs(np.imag(p)) <= 1e-12])
    return zc, zr, pc, pr, float(k)


def _conjugates(zc, zr, pc, pr, k):
    return np.concatenate([zc, np.conj(zc), zr]), np.concatenate([pc, np.conj(pc), pr]), k


def _h(out):
    """freqz's (w, h): the response (complex), w dropped (plain unless worN or fs is traced)."""
    return out[1]


CASES = [  # (what it covers, function, arguments, order)
    # freqz: the polynomial path (an int worN with an IIR filter; frequencies given, traced), the FFT
    # path (rfft of real FIR coefficients, fft of complex ones; whole, include_nyquist), fs, stacks
    ("freqz", lambda b, a: _h(mss.freqz(b, a, worN=16)), (B, A), 2),
    ("freqz", lambda b, a: _h(mss.freqz(b, a, worN=9, whole=True)), (B, A), 1),
    ("freqz", lambda b, a, w: _h(mss.freqz(b, a, worN=w)), (B, A, W), 2),
    ("freqz", lambda b, a, w, fs: mss.freqz(b, a, worN=w, fs=fs), (B, A, W * 10, 50.0), 1),
    ("freqz", lambda b, fs: mss.freqz(b, worN=8, fs=fs), (FIR, 44.0), 1),
    ("freqz", lambda b: _h(mss.freqz(b, worN=16)), (FIR,), 2),
    ("freqz", lambda b: _h(mss.freqz(b, worN=9, whole=True)), (FIR,), 1),
    ("freqz", lambda b: _h(mss.freqz(b, worN=8, whole=True)), (FIR,), 1),
    ("freqz", lambda b: _h(mss.freqz(b, worN=9, include_nyquist=True)), (FIR,), 1),
    ("freqz", lambda b, a: _h(mss.freqz(b, a, worN=12)), (FIR + 0.5j, np.array([2.0])), 1),
    ("freqz", lambda b: _h(mss.freqz(b, worN=3)), (FIR,), 1),  # (n_fft < len(b): the polynomial path)
    ("freqz", lambda b: _h(mss.freqz(b, worN=8)), (FIR3,), 1),
    ("freqz", lambda b, a, w: _h(mss.freqz(b, a[:, :, None], worN=w)), (B, np.stack([A, A * 1.1], 1), W), 1),
    # freqz_sos and its other name
    ("freqz_sos", lambda sb, sa: _h(mss.freqz_sos(_sos(sb, sa), worN=16)), (SB, SA), 2),
    ("freqz_sos", lambda sb, sa, w, fs: mss.freqz_sos(_sos(sb, sa), worN=w, fs=fs), (SB, SA, W * 3, 20.0), 1),
    ("sosfreqz", lambda sb, sa: _h(mss.sosfreqz(_sos(sb, sa), 10, whole=True)), (SB, SA), 1),
    # freqz_zpk: complex zeros and poles, the gain, worN an int or traced, whole, fs
    ("freqz_zpk", lambda z, p, k: _h(mss.freqz_zpk(z, p, k, worN=16)), (Z, P, K), 2),
    ("freqz_zpk", lambda z, p, k, w: _h(mss.freqz_zpk(z, p, k, worN=w, whole=True)), (Z, P, K, W), 1),
    ("freqz_zpk", lambda z, p, k, fs: mss.freqz_zpk(z, p, k, worN=W, fs=fs), (Z, P, K, 9.0), 1),
    ("freqz_zpk", lambda z, p, fs: mss.freqz_zpk(z, p, 2.0, worN=7, fs=fs), (Z, P, 9.0), 1),
    # freqs, freqs_zpk: SciPy's own frequencies (an int worN: plain) or traced ones
    ("freqs", lambda b, a: _h(mss.freqs(b, a, worN=12)), (AB, AA), 2),
    ("freqs", lambda b, a, w: _h(mss.freqs(b, a, worN=w)), (AB, AA, W), 1),
    ("freqs_zpk", lambda p, k: _h(mss.freqs_zpk([], p, k, worN=12)), (EP, EK), 2),
    ("freqs_zpk", lambda z, p, k, w: _h(mss.freqs_zpk(z, p, k, worN=w)), (AZ, AP, AK, W), 1),
    # group_delay
    ("group_delay", lambda b, a: _h(mss.group_delay((b, a), w=16)), (BG, AG), 2),
    ("group_delay", lambda b, a, w, fs: mss.group_delay((b, a), w=w, fs=fs), (BG, AG, W * 5, 30.0), 1),
    ("group_delay", lambda b: _h(mss.group_delay((b, [1.0]), w=9, whole=True)), (np.array([1.0, 0.5, 0.25, -0.1]),), 1),
    ("group_delay", lambda b, a: _h(mss.group_delay((b, a), w=W)), (B + 0.2j, A + [0, 0.1j, 0, 0]), 1),
    # iirnotch, iirpeak: w0, Q, fs
    ("iirnotch", lambda w0, q: mss.iirnotch(w0, q), (0.3, 12.0), 2),
    ("iirnotch", lambda w0, q, fs: mss.iirnotch(w0, q, fs=fs), (60.0, 30.0, 500.0), 1),
    ("iirpeak", lambda w0, q: mss.iirpeak(w0, q), (0.45, 5.0), 2),
    ("iirpeak", lambda w0, q, fs: mss.iirpeak(w0, q, fs=fs), (1000.0, 8.0, 8000.0), 1),
    # the analog-to-digital transforms and the zpk conversions
    ("bilinear", lambda b, a: mss.bilinear(b, a), (AB, AA), 2),
    ("bilinear", lambda b, a, fs: mss.bilinear(b, a, fs=fs), (np.array([0.5, 1.0]), np.array([1.0, 2.0, 3.0]), 4.0), 1),
    ("bilinear", lambda b, a: mss.bilinear(b, a, fs=2.0), (np.array([0.0, 0.0, 1.0]), np.array([1.0, 1.4, 1.0])), 1),
    ("bilinear_zpk", lambda z, p, k, fs: mss.bilinear_zpk(z, p, k, fs), (AZ, AP, AK, 3.0), 2),
    ("lp2lp_zpk", lambda p, k, wo: mss.lp2lp_zpk([], p, k, wo), (AP, AK, 2.5), 2),
    ("lp2hp_zpk", lambda z, p, k, wo: mss.lp2hp_zpk(z, p, k, wo), (np.array([-3.0]), AP, AK, 2.5), 1),
    ("lp2bp_zpk", lambda p, k, wo, bw: mss.lp2bp_zpk([], p, k, wo, bw), (EP, EK, 2.5, 0.7), 2),
    ("lp2bs_zpk", lambda z, p, k, wo, bw: mss.lp2bs_zpk(z, p, k, wo, bw), (np.array([-3.0]), EP, EK, 2.5, 0.7), 1),
    ("zpk2tf", lambda z, p, k: mss.zpk2tf(z, p, k), (Z, P, K), 2),  # (conjugate pairs: real coefficients)
    ("zpk2tf", lambda z, p, k: mss.zpk2tf(z, p, k), (np.array([0.5 + 1j, -0.2]), np.array([0.3, 0.1j]), 2.0), 1),
    ("zpk2tf", lambda z, p: mss.zpk2tf(z, p, np.array([1.0, 2.0])), (RNG.standard_normal((2, 3)), np.array([0.5, -0.4])), 1),
    ("tf2zpk", lambda b, a: mss.tf2zpk(b, a), (np.poly([0.5, -0.25]) * 2.0, np.poly([0.8, -0.5, 0.1])), 2),
    # (distinct zeros: SciPy pairs each pole with the nearest zero, so where zeros coincide (a digital
    # Butterworth filter's at -1) its differences in one of them move it to another section)
    ("zpk2sos", lambda *r: mss.zpk2sos(*_conjugates(*r)), _halves(*ss.cheby2(4, 30.0, 0.3, output="zpk")), 2),
    ("zpk2sos", lambda *r: mss.zpk2sos(*_conjugates(*r), pairing="keep_odd"),
     _halves(-np.linspace(0.6, 1.0, 5), *ss.butter(5, 0.3, output="zpk")[1:]), 1),
    ("zpk2sos", lambda *r: mss.zpk2sos(*_conjugates(*r), pairing="minimal", analog=True), _halves(AZ, AP, AK), 1),
    ("zpk2sos", lambda *r: mss.zpk2sos(*_conjugates(*r)),
     _halves(*ss.cheby2(5, 30.0, [0.2, 0.4], "bandstop", output="zpk")), 1),
    # IIR design: every btype, output, analog, fs; cheby1's rp, cheby2's rs
    ("butter", lambda w: mss.butter(4, w), (0.3,), 2),
    ("butter", lambda w: mss.butter(3, w, "highpass"), (0.3,), 1),
    ("butter", lambda w: mss.butter(2, w, "bandpass"), (np.array([0.2, 0.5]),), 2),
    ("butter", lambda w: mss.butter(3, w, "bandstop"), (np.array([0.2, 0.5]),), 1),
    ("butter", lambda w: mss.butter(3, w, "lowpass", output="zpk"), (0.3,), 1),
    ("butter", lambda w: mss.butter(5, w, "bandpass", output="sos"), (np.array([0.1, 0.4]),), 1),
    ("butter", lambda w: mss.butter(4, w, "highpass", output="sos"), (0.25,), 1),
    ("butter", lambda w, fs: mss.butter(4, w, fs=fs), (100.0, 1000.0), 1),
    ("butter", lambda w: mss.butter(3, w, "bandstop", analog=True), (np.array([1.0, 3.0]),), 1),
    ("butter", lambda w: mss.butter(3, w, analog=True, output="sos"), (2.0,), 1),
    ("cheby1", lambda rp, w: mss.cheby1(4, rp, w), (1.0, 0.3), 2),
    ("cheby1", lambda rp, w: mss.cheby1(3, rp, w, "bandpass", output="sos"), (0.5, np.array([0.2, 0.5])), 1),
    ("cheby2", lambda rs, w: mss.cheby2(4, rs, w, "highpass"), (30.0, 0.3), 1),
    ("cheby2", lambda rs, w: mss.cheby2(3, rs, w, output="zpk"), (40.0, 0.3), 1),
    ("ellip", lambda w: mss.ellip(4, 1.0, 40.0, w), (0.3,), 1),
    ("bessel", lambda w: mss.bessel(4, w, "bandpass", norm="mag"), (np.array([0.2, 0.5]),), 1),
    ("iirfilter", lambda w: mss.iirfilter(3, w, rp=1.0, rs=30.0, btype="bandstop", ftype="ellip"),
     (np.array([0.2, 0.5]),), 1),
    # Savitzky-Golay: the coefficients' delta; the filter's x, delta, cval, each mode, deriv, axis
    ("savgol_coeffs", lambda d: mss.savgol_coeffs(7, 3, deriv=2, delta=d), (0.3,), 2),
    ("savgol_coeffs", lambda d: mss.savgol_coeffs(6, 2, deriv=1, delta=d, pos=1, use="dot"), (2.0,), 1),
    ("savgol_filter", lambda x: mss.savgol_filter(x, 7, 2), (X[:20],), 2),
    ("savgol_filter", lambda x, d: mss.savgol_filter(x, 9, 3, deriv=1, delta=d), (X[:20], 0.5), 2),
    ("savgol_filter", lambda x, d: mss.savgol_filter(x, 8, 4, deriv=2, delta=d, axis=-1), (X2, 0.5), 1),
    ("savgol_filter", lambda x: mss.savgol_filter(x, 5, 2, axis=0), (X2[:, :6].T.copy(),), 1),
    ("savgol_filter", lambda x: mss.savgol_filter(x, 5, 2, mode="mirror"), (X[:20],), 1),
    ("savgol_filter", lambda x, c: mss.savgol_filter(x, 5, 2, mode="constant", cval=c), (X[:20], 0.7), 1),
    ("savgol_filter", lambda x: mss.savgol_filter(x, 5, 1, deriv=1, mode="nearest"), (X[:20],), 1),
    ("savgol_filter", lambda x: mss.savgol_filter(x, 5, 2, mode="wrap", axis=0), (X2.T.copy(),), 1),
    # spectral estimates: detrend, scaling, sides, average, fs, axis, nfft, complex signals
    ("periodogram", lambda x: mss.periodogram(x)[1], (X,), 2),
    ("periodogram", lambda x, fs: mss.periodogram(x, fs, window="hann", scaling="spectrum", detrend="linear"),
     (X[:33], 8.0), 1),
    ("periodogram", lambda x: mss.periodogram(x, nfft=50, return_onesided=False, detrend=False)[1], (X[:40],), 1),
    ("periodogram", lambda x: mss.periodogram(x, nfft=20, axis=0)[1], (X2.T.copy(),), 1),
    ("welch", lambda x: mss.welch(x, nperseg=16)[1], (X,), 2),
    ("welch", lambda x, fs: mss.welch(x, fs, nperseg=15, noverlap=5, nfft=20, detrend="linear"), (X, 100.0), 1),
    ("welch", lambda x: mss.welch(x, nperseg=16, average="median", scaling="spectrum")[1], (X,), 1),
    ("welch", lambda x: mss.welch(x, window="hamming", nperseg=10, axis=-1, detrend=False)[1], (X2,), 1),
    ("welch", lambda x: mss.welch(x, nperseg=12, return_onesided=False)[1], (XC,), 1),
    ("welch", lambda x: mss.welch(x, window=np.hanning(10), detrend=lambda d: d - d[..., :1])[1], (X[:40],), 1),
    ("csd", lambda x, y: mss.csd(x, y, nperseg=16)[1], (X, Y), 2),
    ("csd", lambda x, y: mss.csd(x, y, nperseg=16, average="median", detrend="linear")[1], (X, Y[:50]), 1),
    ("csd", lambda x, y: mss.csd(x, y, nperseg=12)[1], (XC, Y[:48] + 0.5j * X[:48]), 1),
    ("csd", lambda x, y: mss.csd(x, y, nperseg=10, axis=0)[1], (X2.T.copy(), Y[:40, None]), 1),
    ("coherence", lambda x, y: mss.coherence(x, y, nperseg=16)[1], (X, Y + 0.5 * X), 2),
    ("coherence", lambda x, y, fs: mss.coherence(x, y, fs, nperseg=10, axis=-1), (X2, Y[:40], 4.0), 1),
]


@pytest.mark.parametrize("covers,fn,args,order", CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_derivatives(covers, fn, args, order):
    check_grads(fn, *args, modes=("fwd", "rev"), order=order)


def test_every_function_has_a_case():
    from mutagrad.rules.scipy import signal_design

    assert {c[0] for c in CASES} == {name.split(".")[-1] for name in signal_design.COMPOSITES}


VALUES = [  # (function, positional arguments, keywords): traced, against SciPy's call
    ("freqz", (B, A), {"worN": 32}),
    ("freqz", (B, A, 16), {"whole": True, "fs": 10.0}),
    ("freqz", (B, A, W), {}),
    ("freqz", (FIR,), {"worN": 64}),
    ("freqz", (FIR,), {"worN": 33, "whole": True}),
    ("freqz", (FIR,), {"worN": 17, "include_nyquist": True}),
    ("freqz", (FIR + 1j,), {"worN": 16}),
    ("freqz", (FIR3,), {"worN": 8}),
    ("freqz", (FIR, 2.0, W), {}),
    ("freqz_sos", (SOS,), {"worN": 20}),
    ("freqz_sos", (SOS, W), {"fs": 7.0}),
    ("sosfreqz", (SOS, 10), {}),
    ("freqz_zpk", (Z, P, K), {"worN": 20}),
    ("freqz_zpk", (Z, P, K, W), {"whole": True, "fs": 3.0}),
    ("freqs", (AB, AA), {}),
    ("freqs", (AB, AA, W), {}),
    ("freqs_zpk", (AZ, AP, AK), {"worN": 30}),
    ("freqs_zpk", (AZ, AP, AK, W), {}),
    ("group_delay", ((B, A),), {"w": 20}),
    ("group_delay", ((B, A), W), {"fs": 12.0}),
    ("iirnotch", (0.3, 12.0), {}),
    ("iirpeak", (1000.0, 8.0, 8000.0), {}),
    ("bilinear", (AB, AA), {"fs": 3.0}),
    ("bilinear", (np.array([0.0, 0.0, 1.0]), np.array([1.0, 1.4, 1.0])), {}),
    ("bilinear_zpk", (AZ, AP, AK, 3.0), {}),
    ("lp2lp_zpk", (AZ, AP, AK, 2.5), {}),
    ("lp2hp_zpk", (AZ, AP, AK, 2.5), {}),
    ("lp2bp_zpk", (AZ, AP, AK, 2.5, 0.7), {}),
    ("lp2bs_zpk", (np.array([-3.0]), AP, AK, 2.5, 0.7), {}),
    ("zpk2tf", (Z, P, K), {}),
    ("zpk2tf", (np.array([0.5 + 1j, -0.2]), np.array([0.3, 0.1j]), 2.0), {}),
    ("tf2zpk", (np.poly([0.5, -0.25]) * 2.0, np.poly([0.8, -0.5, 0.1])), {}),
    ("zpk2sos", (Z, P, K), {}),
    ("zpk2sos", ss.butter(7, 0.3, output="zpk"), {"pairing": "keep_odd"}),
    ("zpk2sos", ss.ellip(5, 1.0, 40.0, [0.2, 0.5], "bandstop", output="zpk"), {}),
    ("zpk2sos", (AZ, AP, AK), {"pairing": "minimal", "analog": True}),
    ("butter", (6, 0.3), {}),
    ("butter", (4, np.array([0.1, 0.3]), "bandstop"), {"output": "sos"}),
    ("butter", (5, 0.4, "highpass"), {"output": "zpk"}),
    ("butter", (4, 300.0), {"fs": 2000.0, "output": "sos"}),
    ("butter", (3, np.array([1.0, 4.0]), "bandpass"), {"analog": True}),
    ("cheby1", (5, 0.5, np.array([0.2, 0.6]), "bandpass"), {"output": "sos"}),
    ("cheby2", (4, 40.0, 0.3), {}),
    ("ellip", (5, 1, 50, 0.3, "highpass"), {"output": "sos"}),  # (plain ripples)
    ("bessel", (4, 0.3), {"norm": "delay"}),
    ("iirfilter", (4, np.array([0.2, 0.5])), {"rp": 1.0, "ftype": "cheby1", "output": "zpk"}),
    ("savgol_coeffs", (9, 4), {"deriv": 2, "delta": 0.25}),
    ("savgol_filter", (X, 11, 3), {}),
    ("savgol_filter", (X2, 7, 2), {"deriv": 1, "delta": 0.3, "axis": 1}),
    ("savgol_filter", (X2, 3, 1), {"axis": 0, "mode": "nearest"}),
    ("savgol_filter", (X, 9, 3), {"mode": "constant", "cval": 0.5}),
    ("periodogram", (X,), {"fs": 5.0}),
    ("periodogram", (X2,), {"window": "hann", "detrend": "linear", "axis": 0}),
    ("welch", (X,), {"nperseg": 16}),
    ("welch", (X2,), {"nperseg": 11, "noverlap": 3, "nfft": 16, "average": "median"}),
    ("welch", (XC,), {"nperseg": 16, "scaling": "spectrum"}),
    ("welch", (X.astype(np.float32),), {"nperseg": 16}),  # (float32 results, as SciPy's)
    ("csd", (X, Y), {"nperseg": 16, "detrend": "linear"}),
    ("csd", (X2, np.reshape(Y[:60], (3, 20))), {"nperseg": 8, "average": "median"}),
    ("csd", (X2, Y[:40]), {"nperseg": 8}),
    ("coherence", (X, Y + X), {"nperseg": 16}),
]


@pytest.mark.parametrize("name,args,kw", VALUES, ids=[f"{v[0]}-{i}" for i, v in enumerate(VALUES)])
def test_values_are_scipys(name, args, kw):
    want = getattr(ss, name)(*args, **kw)
    got = mg.vjp(lambda *a: getattr(mss, name)(*a, **kw), *args, _argnums=float_argnums(args))[0]
    for g, w in zip(leaves(got), leaves(want), strict=True):
        g, w = np.asarray(mg.value(g)), np.asarray(w)
        assert g.shape == w.shape and g.dtype == w.dtype, (g.shape, w.shape, g.dtype, w.dtype)
        np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-14 * np.max(np.abs(w), initial=1.0))
    plain = getattr(mss, name)(*args, **kw)  # nothing traced: SciPy's own call
    for p, w in zip(leaves(plain), leaves(want), strict=True):
        assert np.array_equal(p, w)


def test_freqz_returns_plain_frequencies_unless_traced():
    w, _ = mg.vjp(lambda b: mss.freqz(b, A, worN=8), B)[0]
    assert type(w) is np.ndarray and np.array_equal(w, ss.freqz(B, A, worN=8)[0])
    _, pb = mg.vjp(lambda fs: mss.freqz(B, A, worN=8, fs=fs), 10.0)
    np.testing.assert_allclose(pb((np.ones(8), np.zeros(8)))[0], np.sum(np.linspace(0, 0.5, 8, endpoint=False)),
                               rtol=1e-12)  # w = fs * k / 16: dw/dfs summed


def test_hessians_against_differences_of_the_gradient():
    # d²/dWn² of a Butterworth filter's response, and of |H|² of an IIR filter in its coefficients: the
    # hessian against central differences of SciPy's gradient (written out: d|H|²/dc by the formula)
    wt = RNG.standard_normal(9)

    def plain_response(w):
        b, a = ss.butter(3, w)
        return np.sum(wt * np.abs(ss.freqz(b, a, worN=9)[1]) ** 2)

    def ours(w):
        b, a = mss.butter(3, w)
        return np.sum(wt * np.abs(mss.freqz(b, a, worN=9)[1]) ** 2)

    h = mg.hessian(ours)(0.35)
    d = 1e-4
    fd2 = (plain_response(0.35 + d) - 2 * plain_response(0.35) + plain_response(0.35 - d)) / d ** 2
    np.testing.assert_allclose(h, fd2, rtol=1e-5)
    hb = mg.hessian(lambda b: np.sum(wt * np.abs(mss.freqz(b, A, worN=9)[1]) ** 2))(B)
    fd = np.stack([(numerical_grad(lambda b: np.sum(wt * np.abs(ss.freqz(b, A, worN=9)[1]) ** 2), (B + e,), (0,))[0]
                    - numerical_grad(lambda b: np.sum(wt * np.abs(ss.freqz(b, A, worN=9)[1]) ** 2), (B - e,), (0,))[0])
                   / 2e-4 for e in np.eye(4) * 1e-4])
    np.testing.assert_allclose(hb, fd, rtol=1e-4, atol=1e-6)


def test_a_notch_placed_by_gradient_descent():
    # a loss of the tester's kind: a notch filter's w0 moved to cancel a tone, the loss the power left
    # (welch) of the filtered signal; the gradient against differences of SciPy's, one step decreasing it
    t = np.arange(400) / 400.0
    x = np.sin(2 * np.pi * 50 * t) + 0.1 * np.random.default_rng(2).standard_normal(400)

    def loss(w0, sig):
        b, a = sig.iirnotch(w0, 5.0, fs=400.0)
        return np.sum(sig.welch(sig.lfilter(b, a, x), fs=400.0, nperseg=64)[1])

    v, g = mg.value_and_grad(lambda w0: loss(w0, mss))(45.0)
    plain = lambda w0: loss(w0, ss)
    np.testing.assert_allclose(v, plain(45.0), rtol=1e-12)
    np.testing.assert_allclose(g, (plain(45.0 + 1e-5) - plain(45.0 - 1e-5)) / 2e-5, rtol=1e-5)
    assert plain(45.0 - 0.5 * np.sign(g)) < plain(45.0)


def test_group_delay_where_it_is_singular():
    # b = [1, -1] has a zero at z = 1, w = 0 exactly: SciPy's group delay there is 0 (with its warning); ours
    # too, with a derivative of zero there (not nan), and SciPy's (differences) at the other frequency
    w, b = np.array([0.0, 0.5]), np.array([1.0, -1.0])
    with pytest.warns(UserWarning, match="singular at frequencies"), np.errstate(divide="ignore", invalid="ignore"):
        want = ss.group_delay((b, [1.0]), w=w)[1]
    with pytest.warns(UserWarning, match="singular at frequencies"):
        (_, gd), pb = mg.vjp(lambda b: mss.group_delay((b, [1.0]), w=w), b)
    np.testing.assert_allclose(gd, want, rtol=1e-12)
    assert np.all(pb((np.zeros(2), np.array([1.0, 0.0])))[0] == 0)
    fd = numerical_grad(lambda b: ss.group_delay((b, [1.0]), w=w[1:])[1][0], (b,), (0,))[0]
    np.testing.assert_allclose(pb((np.zeros(2), np.array([0.0, 1.0])))[0], fd, rtol=1e-6)


def test_ellip_ripples_are_refused():
    with pytest.raises(mg.NoRuleError, match=r"not differentiated in rp or rs.*mg.stop_gradient\(rp\)"):
        mg.grad(lambda rp: mss.ellip(3, rp, 40.0, 0.3)[0][0])(1.0)


ERRORS = [  # (function, arguments, keywords): SciPy's error on plain arguments, ours on traced ones
    ("freqz", (B, A), {"worN": -1}),
    ("freqz", (B, A), {"fs": np.array([1.0, 2.0])}),
    ("freqz_sos", (SOS * [1, 1, 1, 2, 1, 1],), {}),
    ("freqz_sos", (SOS[:, :5],), {}),
    ("iirnotch", (1.5, 10.0), {}),
    ("iirpeak", (np.array([0.3]), 10.0), {}),  # (float() of an array of one)
    ("bilinear", (np.ones((2, 2)), A), {}),
    ("bilinear_zpk", (np.ones(3), np.ones(2), 1.0, 2.0), {}),
    ("butter", (3, 1.2), {}),
    ("butter", (3, np.array([0.5, 0.2]), "bandpass"), {}),
    ("butter", (3, 0.3, "lowish"), {}),
    ("butter", (3, 0.3), {"analog": True, "fs": 10.0}),
    ("savgol_coeffs", (5, 5), {"delta": 0.5}),
    ("savgol_filter", (X[:5], 7, 2), {}),
    ("savgol_filter", (X, 7, 2), {"mode": "reflect"}),
    ("welch", (X,), {"nperseg": 16, "noverlap": 16}),
    ("welch", (X,), {"scaling": "power"}),
    ("welch", (X,), {"average": "max", "nperseg": 16}),
    ("csd", (X, Y[:3]), {"nperseg": 8, "axis": 0, "window": np.ones(9)}),
]


@pytest.mark.parametrize("name,args,kw", ERRORS, ids=[f"{e[0]}-{i}" for i, e in enumerate(ERRORS)])
def test_scipys_errors(name, args, kw):
    assert_raises_as_theirs(getattr(ss, name), getattr(mss, name), args, kw)


@pytest.mark.parametrize("name,call", [
    ("freqz", lambda x: np.abs(ss.freqz(x, worN=8)[1])), ("welch", lambda x: ss.welch(x, nperseg=8)[1]),
    ("savgol_filter", lambda x: ss.savgol_filter(x, 5, 2)), ("butter", lambda x: ss.butter(2, x[0] ** 2 / 10)[0]),
    ("zpk2tf", lambda x: ss.zpk2tf(x[:2], x[2:4], 1.0)[0])])
def test_scipys_own_functions_on_traced_arrays_name_ours(name, call):
    with pytest.raises(mg.TracerEscapeError) as e:
        mg.grad(lambda x: np.sum(call(x)))(np.linspace(0.1, 0.9, 16))
    assert f"mutagrad.scipy.signal.{name} is the same function, differentiated" in str(e.value)


@pytest.mark.parametrize("scaling", ["density", "spectrum"])
def test_a_window_given_as_traced_samples_is_differentiated(scaling):
    # (the spectral2 tester: a learned window was refused, with advice to use the function it called) welch,
    # periodogram, csd and coherence take the window's samples traced; against central differences of SciPy's own
    rng = np.random.default_rng(4983)
    sig, other = rng.standard_normal(96), rng.standard_normal(96)
    w0 = np.hanning(24) + 0.1

    def loss(w, m):
        return (np.sum(np.log(m.welch(sig, window=w, nperseg=24, scaling=scaling)[1]))
                + np.sum(m.periodogram(sig[:24], window=w, scaling=scaling)[1] ** 0.5)
                + np.sum(np.abs(m.csd(sig, other, window=w, nperseg=24, scaling=scaling)[1]))
                + np.sum(m.coherence(sig, other, window=w, nperseg=24)[1]))

    np.testing.assert_allclose(mg.value_and_grad(loss)(w0, mss)[0], loss(w0, ss), rtol=1e-12)
    want = numerical_grad(lambda w: loss(w, ss), (w0,), (0,))[0]
    np.testing.assert_allclose(mg.grad(loss)(w0, mss), want, rtol=1e-6, atol=1e-8)
    d = rng.standard_normal(24)
    np.testing.assert_allclose(mg.jvp(lambda w: loss(w, mss), (w0,), (d,))[1], want @ d, rtol=1e-6)
    # the Hessian in the window (regress109: SciPy made the window it was given read-only, the caller's array, and
    # the forward runs took other steps: MutationError), against reverse over reverse
    w1 = w0[:16].copy()
    f = lambda w: np.sum(mss.welch(sig[:64], window=w, nperseg=16, scaling=scaling)[1] ** 2)
    np.testing.assert_allclose(mg.hessian(f)(w1), mg.jacobian(mg.grad(f), mode="rev")(w1), rtol=1e-10, atol=1e-12)
    assert w1.flags.writeable


def test_a_window_with_a_traced_parameter_names_the_samples_rewrite():
    sig = np.random.default_rng(4984).standard_normal(64)
    # (a traced Kaiser beta in welch's window, refused before, is differentiated: audio; central differences of SciPy's)
    for nperseg in (16, None):
        def psd(b, sp=mss, nperseg=nperseg):
            return np.sum(sp.welch(sig, window=("kaiser", b), nperseg=nperseg)[1])

        want = (psd(4.0 + 1e-6, ss) - psd(4.0 - 1e-6, ss)) / 2e-6
        assert mg.grad(psd)(4.0) == pytest.approx(want, rel=1e-6)
        np.testing.assert_allclose(psd(4.0), psd(4.0, ss), rtol=1e-12)
    M, beta = 16, 4.0  # (the rewrite it names: SciPy's periodic window)
    samples = np.i0(beta * np.sqrt(1 - (2 * np.arange(M) / M - 1) ** 2)) / np.i0(beta)
    np.testing.assert_allclose(samples, ss.get_window(("kaiser", beta), M), atol=1e-15)
    # SciPy's own window function of scipy.signal.windows with a traced parameter (math.floor inside SciPy) names
    # mutagrad's, which is differentiated in it (audio): against central differences of SciPy's
    with pytest.raises(mg.TracerEscapeError, match=r"mutagrad\.scipy\.signal\.windows\.tukey is the same function, "
                       r"differentiated") as info:
        mg.grad(lambda a: np.sum(ss.windows.tukey(32, a) ** 2))(0.4)
    assert "math.floor(x) at" not in str(info.value)
    want = (np.sum(ss.windows.tukey(32, 0.4 + 1e-6) ** 2) - np.sum(ss.windows.tukey(32, 0.4 - 1e-6) ** 2)) / 2e-6
    assert mg.grad(lambda a: np.sum(mss.windows.tukey(32, a) ** 2))(0.4) == pytest.approx(want, rel=1e-6)
