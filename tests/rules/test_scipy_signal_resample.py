"""mutagrad.scipy.signal's upfirdn, resample_poly, resample, firwin, firwin2, stft, istft, get_window and the
windows with traced parameters.

Every derivative against central differences of SciPy's own function on plain arrays (check_grads:
mutagrad's functions call SciPy's when nothing is traced), reverse against forward mode (the dot-product
identity), one second order; the values against SciPy's (rtol 1e-12, shapes and dtypes) with the float
arguments traced; plain calls are SciPy's own result; SciPy's errors on traced arguments; the refusals."""
import warnings

import numpy as np
import pytest

import mutagrad as mg
from mutagrad.errors import NoRuleError
from mutagrad.testing import check_grads

ss = pytest.importorskip("scipy.signal")
import mutagrad.scipy.signal as mss
from tests.rules._draws import Draws, assert_raises_as_theirs, float_argnums, leaves

D = Draws(47)
X = D.R(23)
X2 = D.R(3, 11)
H = D.R(5)
WIN8 = D.P(8)
Z = ss.stft(X, nperseg=8)[2]
Z3 = ss.stft(X2, nperseg=6)[2]
MODES = ("constant", "wrap", "edge", "smooth", "symmetric", "reflect", "antisymmetric", "antireflect", "line")


def _stft(**kw):
    return lambda x: mss.stft(x, **kw)[2]


CASES = [  # (what it covers, function, arguments, order)
    # upfirdn: every mode, up and down, h and x, cval, along an axis
    *[("upfirdn", lambda h, x, m=m: mss.upfirdn(h, x, 3, 2, mode=m), (H, X), 1) for m in MODES],
    ("upfirdn", lambda h, x: mss.upfirdn(h, x, 2, 5, mode="antireflect"), (H, X), 1),
    ("upfirdn", lambda h, x, c: mss.upfirdn(h, x, 2, 3, cval=c), (H, X, 0.3), 2),
    ("upfirdn", lambda x: mss.upfirdn([0.5, 1.0, 0.5], x, 2, axis=0, mode="reflect"), (X2.T.copy(),), 1),
    # resample_poly: the default Kaiser filter, every padtype, a window of taps, a traced beta, an axis
    *[("resample_poly", lambda x, p=p: mss.resample_poly(x, 3, 2, padtype=p), (X,), 1)
      for p in ("constant", "mean", "median", "maximum", "line")],
    ("resample_poly", lambda x, w: mss.resample_poly(x, 2, 3, window=w), (X, H), 1),
    ("resample_poly", lambda x, b: mss.resample_poly(x, 2, 3, window=("kaiser", b)), (X, 4.0), 1),
    ("resample_poly", lambda x: mss.resample_poly(x, 2, 3, axis=1, cval=0.5), (X2,), 1),
    # resample: rfft and fft paths, up and down (even and odd lengths), t, windows, an axis
    *[("resample", lambda x, n=n: mss.resample(x, n), (X,), 1) for n in (10, 40, 41)],
    ("resample", lambda x: mss.resample(x, 12), (X + 1j * X[::-1],), 1),
    ("resample", lambda x: mss.resample(x, 30, domain="freq"), (X[:22] + 0j,), 1),
    ("resample", lambda x, t: mss.resample(x, 12, t=t), (X, np.linspace(0.0, 2.0, 23)), 1),
    ("resample", lambda x, w: mss.resample(x, 12, window=w), (X[:22], D.P(22)), 1),
    ("resample", lambda x, b: mss.resample(x, 12, window=("kaiser", b), axis=1), (X2, 3.0), 1),
    # firwin: lowpass, bandpass, highpass with fs, bandstop, width (Kaiser), unscaled
    ("firwin", lambda c: mss.firwin(21, c), (0.3,), 2),
    ("firwin", lambda c: mss.firwin(21, c, pass_zero=False), (np.array([0.2, 0.5]),), 1),
    ("firwin", lambda c, fs: mss.firwin(21, c, pass_zero="highpass", fs=fs), (100.0, 1000.0), 1),
    ("firwin", lambda c: mss.firwin(21, c), (np.array([0.2, 0.5]),), 1),
    ("firwin", lambda c, w: mss.firwin(31, c, width=w), (0.3, 0.1), 1),
    ("firwin", lambda c: mss.firwin(20, c, scale=False, window="hann"), (0.3,), 1),
    # firwin2: frequencies off SciPy's grid, the gains
    ("firwin2", lambda f, g: mss.firwin2(21, np.concatenate([[0.0], f, [1.0]]), g),
     (np.array([0.31, 0.52]), np.array([1.0, 1.0, 0.2, 0.0])), 1),
    ("firwin2", lambda g: mss.firwin2(20, [0.0, 0.3, 0.3, 1.0], np.concatenate([g, [0.0]])), (np.array([1.0, 0.8, 0.1]),), 1),
    # stft: boundaries, padding, overlap, nfft, detrend, sides, scaling, a window of samples, fs, an axis
    ("stft", _stft(nperseg=8), (X,), 1),
    ("stft", _stft(nperseg=8, noverlap=5, nfft=12, boundary="even"), (X,), 1),
    ("stft", _stft(nperseg=7, boundary=None, padded=False, return_onesided=False, scaling="psd"), (X,), 1),
    ("stft", _stft(nperseg=8, detrend="linear", boundary="odd"), (X,), 1),
    ("stft", _stft(nperseg=8, detrend="constant", boundary="constant"), (X + 0.5j * X[::-1],), 1),
    ("stft", lambda x, w, fs: mss.stft(x, fs, window=w, nperseg=8, scaling="psd"), (X2, WIN8, 3.0), 1),
    ("stft", lambda x, b: mss.stft(x, window=("kaiser", b), nperseg=6, axis=0)[2], (X2.T.copy(), 3.0), 1),
    # istft: defaults, overlap, twosided, a window of samples, fs, other axes
    ("istft", lambda z: mss.istft(z, nperseg=8)[1], (Z,), 1),
    ("istft", lambda z: mss.istft(z, nperseg=8, noverlap=6)[1], (ss.stft(X, nperseg=8, noverlap=6)[2],), 1),
    ("istft", lambda z: mss.istft(z, input_onesided=False)[1], (ss.stft(X, nperseg=7, return_onesided=False)[2],), 1),
    ("istft", lambda z, w, fs: mss.istft(z, fs, window=w, scaling="psd"), (Z3, D.P(6), 2.0), 1),
    ("istft", lambda z: mss.istft(z, time_axis=0, freq_axis=2)[1], (np.transpose(Z3, (2, 0, 1)).copy(),), 1),
    # get_window with traced parameters, periodic and symmetric
    ("get_window", lambda b: mss.get_window(("kaiser", b), 9), (4.0,), 2),
    ("get_window", lambda b: mss.get_window(b, 10, fftbins=False), (5.0,), 1),
    ("get_window", lambda s: mss.get_window(("gaussian", s), 10), (2.5,), 1),
    ("get_window", lambda p, s: mss.get_window(("general_gaussian", p, s), 9, fftbins=False), (1.5, 3.0), 1),
    ("get_window", lambda a: mss.get_window(("tukey", a), 12), (0.4,), 1),
    ("get_window", lambda t: mss.get_window(("exponential", None, t), 9), (2.0,), 1),
    ("get_window", lambda a: mss.get_window(("chebwin", a), 9), (60.0,), 1),
    ("get_window", lambda a: mss.get_window(("chebwin", a), 10, fftbins=False), (60.0,), 1),
    ("get_window", lambda a: mss.get_window(("general_hamming", a), 8), (0.6,), 1),
    ("get_window", lambda a: mss.get_window(("general_cosine", a), 9), (np.array([0.5, 0.4, 0.1]),), 1),
    ("get_window", lambda b: mss.get_window(("kaiser_bessel_derived", b), 10, fftbins=False), (3.0,), 1),
    # the windows themselves
    ("windows.kaiser", lambda b: mss.windows.kaiser(8, b, sym=False), (4.0,), 1),
    ("windows.kaiser_bessel_derived", lambda b: mss.windows.kaiser_bessel_derived(8, b), (2.0,), 1),
    ("windows.gaussian", lambda s: mss.windows.gaussian(7, s), (1.5,), 1),
    ("windows.general_gaussian", lambda p, s: mss.windows.general_gaussian(8, p, s), (1.2, 2.0), 1),
    ("windows.tukey", lambda a: mss.windows.tukey(9, a), (0.7,), 1),
    ("windows.exponential", lambda c, t: mss.windows.exponential(9, c, t, sym=False), (3.3, 2.0), 1),
    ("windows.chebwin", lambda a: mss.windows.chebwin(11, a), (50.0,), 1),
    ("windows.general_hamming", lambda a: mss.windows.general_hamming(9, a), (0.6,), 1),
    ("windows.general_cosine", lambda a: mss.windows.general_cosine(8, a, sym=False), (np.array([0.4, 0.5, 0.1]),), 1),
]


@pytest.mark.parametrize("covers,fn,args,order", CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_derivatives(covers, fn, args, order):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # (SciPy's: complex input, NOLA)
        check_grads(fn, *args, modes=("fwd", "rev"), order=order)


def test_every_function_has_a_case():
    from mutagrad.rules.scipy import signal_resample

    assert {c[0] for c in CASES} == {name.split("signal.")[-1] for name in signal_resample.COMPOSITES}
    assert {"upfirdn", "resample_poly", "resample", "firwin", "firwin2", "stft", "istft", "get_window"} <= set(dir(mss))


VALUES = [  # (function, positional arguments, keywords): the float arrays and numbers traced, against SciPy's call
    *[("upfirdn", (H, X, 3, 2), {"mode": m, "cval": 0.7}) for m in MODES],
    ("upfirdn", (H, X, 2, 5), {"mode": "smooth"}),
    ("upfirdn", (H.astype(np.float32), X.astype(np.float32), 2, 3), {}),
    ("upfirdn", (H + 0.5j, X2, 1, 3), {"axis": 0}),
    ("resample_poly", (X, 3, 2), {}),
    ("resample_poly", (X, 4, 6), {"padtype": "minimum"}),
    ("resample_poly", (X.astype(np.float32), 3, 2), {}),
    ("resample_poly", (X2, 5, 3), {"axis": 1, "window": ("kaiser", 6.0)}),
    ("resample_poly", (X, 2, 3), {"window": H}),
    ("resample_poly", (X, 2, 2), {}),
    ("resample", (X, 40), {}),
    ("resample", (X[:22], 11), {"window": "hann"}),
    ("resample", (X2, 7), {"axis": 1, "window": ("kaiser", 2.0)}),
    ("resample", (X + 1j * X[::-1], 31), {}),
    ("resample", (X.astype(np.float32), 31), {}),
    ("firwin", (21, 0.3), {}),
    ("firwin", (21, np.array([0.2, 0.5])), {"pass_zero": "bandpass", "window": ("kaiser", 3.0)}),
    ("firwin", (31, 0.3), {"width": 0.05}),
    ("firwin", (31, 100.0), {"fs": 1000.0, "pass_zero": False}),
    ("firwin2", (21, np.array([0.0, 0.31, 0.52, 1.0]), np.array([1.0, 1.0, 0.2, 0.0])), {}),
    ("firwin2", (21, np.array([0.0, 0.3, 0.3, 1.0]), np.array([0.0, 1.0, 0.5, 0.0])), {"antisymmetric": True}),
    ("stft", (X,), {"nperseg": 8}),
    ("stft", (X2, 4.0), {"window": ("tukey", 0.3), "nperseg": 6, "noverlap": 2, "nfft": 9, "scaling": "psd"}),
    ("stft", (X.astype(np.float32),), {"nperseg": 8, "boundary": "even", "detrend": "linear"}),
    ("stft", (X + 1j * X[::-1],), {"nperseg": 8, "boundary": None}),
    ("istft", (Z,), {}),
    ("istft", (Z3, 2.0), {"window": ("kaiser", 4.0), "scaling": "psd"}),
    ("istft", (Z.astype(np.complex64),), {"nperseg": 8}),
    ("get_window", (("kaiser", 4.0), 9), {}),
    ("get_window", (("chebwin", 40.0), 10), {"fftbins": False}),  # (SciPy's warning below 45 dB)
    ("get_window", (("tukey", 0.0), 10), {}),
    ("get_window", (("tukey", 1.5), 10), {}),
    ("get_window", (("exponential", 2.0, 3.0), 7), {}),
    ("get_window", (("general_gaussian", 1.0, 2.0), 1), {}),
]


@pytest.mark.parametrize("name,args,kw", VALUES, ids=[f"{v[0]}-{i}" for i, v in enumerate(VALUES)])
def test_values_are_scipys(name, args, kw):
    def ours(*a):
        return getattr(mss, name)(*a, **kw)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        want = getattr(ss, name)(*args, **kw)
        got = mg.vjp(ours, *args, _argnums=float_argnums(args))[0]
        plain = ours(*args)  # nothing traced: SciPy's own call
    want, got, plain = (v if isinstance(v, tuple) else (v,) for v in (want, got, plain))
    assert len(leaves(got)) == len(leaves(want))
    for g, w in zip(leaves(got), leaves(want), strict=True):
        g, w = np.asarray(mg.value(g)), np.asarray(w)
        assert g.shape == w.shape and g.dtype == w.dtype, (g.shape, w.shape, g.dtype, w.dtype)
        single = w.dtype in (np.float32, np.complex64)
        np.testing.assert_allclose(g, w, rtol=1e-5 if single else 1e-12,
                                   atol=(1e-6 if single else 1e-14) * np.max(np.abs(w), initial=1.0))
    for p, w in zip(leaves(plain), leaves(want), strict=True):
        assert type(p) is type(w) and np.array_equal(p, w)


def test_traced_window_parameters_of_the_transforms():
    """A window given by a traced parameter reaches stft, istft, resample and firwin."""
    for f in (lambda b: mss.stft(X, window=("kaiser", b), nperseg=8)[2],
              lambda b: mss.istft(Z, window=("gaussian", b))[1],
              lambda b: mss.resample(X, 12, window=("tukey", b)),
              lambda b: mss.firwin(15, 0.4, window=("kaiser", b))):
        check_grads(f, 0.45, modes=("fwd", "rev"))


def test_callable_window_of_resample():
    scale = 0.3
    check_grads(lambda x, s: mss.resample(x, 12, window=lambda f: np.exp(-s * f ** 2)), X, scale)
    # (plain: SciPy's own call, the callable called once)
    calls = []

    def w(f):
        calls.append(1)
        return np.exp(-f ** 2)

    assert np.array_equal(mss.resample(X, 12, window=w), ss.resample(X, 12, window=lambda f: np.exp(-f ** 2)))
    assert len(calls) == 1


ERRORS = [  # SciPy's errors on traced arguments: the same type and message
    ("upfirdn", (H, X), {"mode": "nope"}),
    ("upfirdn", (H, X, 0), {}),
    ("upfirdn", (X2, X), {}),
    ("resample_poly", (X, 0, 2), {}),
    ("resample_poly", (X, 2, 3), {"padtype": "mean", "cval": 1.0}),
    ("resample", (X, 12), {"domain": "space"}),
    ("resample", (X, 12), {"window": np.ones(3)}),
    ("firwin", (21, 1.3), {}),
    ("firwin", (20, 0.3), {"pass_zero": False}),
    ("firwin2", (21, np.array([0.0, 0.5, 0.9]), np.array([1.0, 0.5, 0.0])), {}),
    ("stft", (X,), {"nperseg": 8, "scaling": "bad"}),
    ("stft", (X,), {"nperseg": 8, "noverlap": 8}),
    ("istft", (Z,), {"nperseg": 8, "noverlap": 9}),
    ("get_window", (("kaiser", 2.0), 0), {}),
    ("get_window", (("hann", 2.0), 8), {}),
]


@pytest.mark.parametrize("name,args,kw", ERRORS, ids=[f"{e[0]}-{i}" for i, e in enumerate(ERRORS)])
def test_errors_are_scipys(name, args, kw):
    assert_raises_as_theirs(getattr(ss, name), getattr(mss, name), args, kw)


@pytest.mark.parametrize("fn,name,arg", [
    (lambda x: mss.upfirdn([1.0, 0.5], x, 2, mode="reflect"), "upfirdn", np.array([1.0])),  # (SciPy: SIGFPE)
    (lambda x: mss.upfirdn([1.0, 0.5], x, 2, mode="smooth"), "upfirdn", np.array([1.0])),
    (lambda s: mss.get_window(("taylor", 4, s), 16), "get_window", 30.0),
    (lambda s: mss.get_window(("dpss", s), 16), "get_window", 3.0),
])
def test_refusals_name_the_function(fn, name, arg):
    with pytest.raises(NoRuleError, match=name):
        mg.grad(lambda v: np.sum(fn(v)))(arg)


def test_windows_namespace():
    import mutagrad.scipy.signal.windows as mw

    assert mw is mss.windows and mw.kaiser is mss.windows.kaiser
    assert mw.hann is ss.windows.hann  # (every other name: SciPy's)
    assert np.array_equal(mw.kaiser(8, 3.0), ss.windows.kaiser(8, 3.0))


def test_resample_with_a_callable_window_of_plain_samples():
    # (newrules) a callable window whose samples are plain (SciPy documents callables) raised SciPy's ValueError
    # from get_window on a traced signal; its samples are used in the FFT's order, as SciPy's (central differences)
    x = np.random.default_rng(3).standard_normal(16)
    win = lambda f: np.exp(-(f / 0.3) ** 2)

    def loss(v, m):
        return np.sum(m.resample(v, 12, window=win) ** 2)

    np.testing.assert_allclose(loss(x, mss), loss(x, ss), rtol=1e-12)
    want = [(loss(x + 1e-6 * e, ss) - loss(x - 1e-6 * e, ss)) / 2e-6 for e in np.eye(16)]
    np.testing.assert_allclose(mg.grad(loss)(x, mss), want, rtol=1e-6, atol=1e-9)


def test_upfirdn_and_resample_poly_hold_scipys_bits_under_tracing():
    # (newrules) their traced values were 1 ulp from SciPy's (another summation order), so a function writing the
    # result into its argument left it otherwise than a plain call does after mg.grad
    rng = np.random.default_rng(11)
    x, h = rng.standard_normal(37), rng.standard_normal(7)

    def f(v, m):
        y = m.upfirdn(h, v, 3, 2)
        v[:5] = y[:5]
        return np.sum(m.resample_poly(v, 3, 2) ** 2) + np.sum(y ** 2)

    plain = x.copy()
    f(plain, ss)
    traced = x.copy()
    mg.grad(f)(traced, mss)
    np.testing.assert_array_equal(traced, plain)
    vals = []
    mg.grad(lambda v: vals.append((mss.upfirdn(h, v, 3, 2), mss.resample_poly(v, 3, 2))) or 0.0 * np.sum(v))(x)
    np.testing.assert_array_equal(mg.value(vals[0][0]), ss.upfirdn(h, x, 3, 2))
    np.testing.assert_array_equal(mg.value(vals[0][1]), ss.resample_poly(x, 3, 2))
