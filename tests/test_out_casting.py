"""``out=`` of the NumPy functions mutagrad implements follows NumPy's casting rules and precision.

Each NumPy function casts into its ``out=`` by its own rule (a ufunc step's same_kind, np.take's
cast of out to the input's dtype under 'safe', np.dot's exact dtype), and computes in out's dtype
where it computes into out (np.round's scaling, np.trace's sum, an FFT's loop). The oracle is
the plain call: its exception (type and message), or its bits in the out buffer and the value
returned; derivatives are checked against central differences.
"""
import re

import numpy as np
import pytest

import mutagrad as mg
import mutagrad.numpy as mnp
from mutagrad.errors import WriteToPlainArrayError

_rng = np.random.default_rng(7)
X16 = _rng.standard_normal(8).astype(np.float16)
X32 = _rng.standard_normal(8).astype(np.float32)
X64 = _rng.standard_normal(8)
A16 = _rng.standard_normal((3, 3)).astype(np.float16)
A32 = _rng.standard_normal((3, 3)).astype(np.float32)


def _plain(fn, x, shape, dtype):
    out = np.zeros(shape, dtype)
    res = fn(x.copy(), out)
    return res, out


def _traced(fn, x, shape, dtype):
    """``fn(x, out)`` inside mg.grad with a buffer made by mnp.zeros: what it returns, out's
    values, and whether it returned out itself."""
    seen = {}

    def f(xx):
        out = mnp.zeros(shape, dtype)
        res = fn(xx, out)
        seen.update(res=np.asarray(mg.value(res)), out=np.asarray(mg.value(out)), same=res is out)
        return np.sum(np.real(res)).astype(np.float64)

    mg.grad(f)(x.copy())
    return seen


def _same_bits(a, b):
    a, b = np.atleast_1d(np.asarray(a)), np.atleast_1d(np.asarray(b))  # (0-d: no byte view)
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


# -- NumPy computes in out's dtype: its bits -------------------------------------------------------

BITS = [  # (grad: the derivative checked too, against central differences)
    ("trace-f16-into-f32", lambda x, o: np.trace(x, out=o), A16, (), np.float32, False),
    ("trace-f32-into-c128", lambda x, o: np.trace(x, out=o), A32, (), np.complex128, True),
    ("round1-f16-into-f32", lambda x, o: np.round(x, 1, out=o), X16, (8,), np.float32, False),
    ("round1-f64-into-c128", lambda x, o: np.round(x, 1, out=o), X64, (8,), np.complex128, True),
    ("around2-f32-into-f64", lambda x, o: np.around(x, 2, out=o), X32, (8,), np.float64, False),
    ("method-round-f32-into-f64", lambda x, o: x.round(3, out=o), X32, (8,), np.float64, False),
    ("fft-f32-into-c128", lambda x, o: np.fft.fft(x, out=o), X32, (8,), np.complex128, True),
    ("fft-f16-into-c128", lambda x, o: np.fft.fft(x, out=o), X16, (8,), np.complex128, False),
    ("ifft-f32-into-c128", lambda x, o: np.fft.ifft(x, out=o), X32, (8,), np.complex128, True),
    ("rfft-f32-into-c128", lambda x, o: np.fft.rfft(x, out=o), X32, (5,), np.complex128, True),
    ("ihfft-f16-into-c128", lambda x, o: np.fft.ihfft(x, out=o), X16, (5,), np.complex128, False),
    ("fft2-f32-into-c128", lambda x, o: np.fft.fft2(x, out=o), A32, (3, 3), np.complex128, True),
]


@pytest.mark.parametrize("fn, x, shape, dtype, grad", [c[1:] for c in BITS], ids=[c[0] for c in BITS])
def test_numpys_bits_in_a_wider_out(fn, x, shape, dtype, grad):
    want, want_out = _plain(fn, x, shape, dtype)
    got = _traced(fn, x, shape, dtype)
    assert got["same"]
    assert _same_bits(got["out"], want_out)
    assert _same_bits(got["res"], want)
    if grad:
        def f(xx):
            out = mnp.zeros(shape, dtype)
            fn(xx, out)
            return out * 1.5

        mg.testing.check_grads(f, x.copy())


# -- what NumPy refuses: its exception ---------------------------------------------------------------

REFUSED = [
    ("fft-into-f64", lambda x, o: np.fft.fft(x, out=o), X64, (8,), np.float64),
    ("fft-into-i64", lambda x, o: np.fft.fft(x, out=o), X64, (8,), np.int64),
    ("rfft-f32-into-f32", lambda x, o: np.fft.rfft(x, out=o), X32, (5,), np.float32),
    ("ihfft-into-f64", lambda x, o: np.fft.ihfft(x, out=o), X64, (5,), np.float64),
    ("fftn-into-f64", lambda x, o: np.fft.fftn(x, out=o), A32, (3, 3), np.float64),
    ("round-into-i64", lambda x, o: np.round(x, out=o), X64, (8,), np.int64),
    ("around2-into-i64", lambda x, o: np.around(x, 2, out=o), X64, (8,), np.int64),
    ("method-round-into-i64", lambda x, o: x.round(out=o), X64, (8,), np.int64),
    ("round-complex-into-f64", lambda x, o: np.round(x * (1 + 2j), out=o), X64, (8,), np.float64),
    ("fix-into-i64", lambda x, o: np.fix(x, out=o), X64, (8,), np.int64),
    ("clip-complex-into-f64", lambda x, o: np.clip(x * (1 + 2j), -1, 1, out=o), X64, (8,), np.float64),
    ("take-into-c128", lambda x, o: np.take(x, [0, 2], out=o), X64, (2,), np.complex128),
    ("take-f16-into-f32", lambda x, o: np.take(x, [0, 2], out=o), X16, (2,), np.float32),
    ("compress-into-c128", lambda x, o: np.compress([1, 0, 1], x, out=o), X64, (2,), np.complex128),
    ("std-into-i64", lambda x, o: np.std(x, out=o), X64, (), np.int64),
    ("ptp-into-i64", lambda x, o: np.ptp(x, out=o), X64, (), np.int64),
    ("nanmean-into-i64", lambda x, o: np.nanmean(x, out=o), X64, (), np.int64),
    ("nanvar-into-i64", lambda x, o: np.nanvar(x, out=o), X64, (), np.int64),
    ("nanstd-into-i64", lambda x, o: np.nanstd(x, out=o), X64, (), np.int64),
    ("outer-into-i64", lambda x, o: np.outer(x, x, out=o), X64, (8, 8), np.int64),
    ("concatenate-into-i64", lambda x, o: np.concatenate([x, x], out=o), X64, (16,), np.int64),
    ("multi_dot-f32-into-f64", lambda x, o: np.linalg.multi_dot([x, x, x], out=o), A32, (3, 3), np.float64),
    ("multi_dot-into-i64", lambda x, o: np.linalg.multi_dot([x, x], out=o), A32, (3, 3), np.int64),
    ("einsum-into-i64", lambda x, o: np.einsum("ij,jk->ik", x, x, out=o), A32, (3, 3), np.int64),
]


@pytest.mark.parametrize("fn, x, shape, dtype", [c[1:] for c in REFUSED], ids=[c[0] for c in REFUSED])
def test_what_numpy_refuses_raises_numpys_error(fn, x, shape, dtype):
    with pytest.raises(Exception) as want:
        _plain(fn, x, shape, dtype)
    with pytest.raises(type(want.value), match=re.escape(str(want.value))) as got:
        _traced(fn, x, shape, dtype)
    assert type(got.value) is type(want.value)


# -- reductions: NumPy casts unsafely; a traced float into an integer buffer is refused alike -----------


def test_var_into_an_integer_out_is_refused_as_sum_is():
    np.var(X64, out=np.zeros((), np.int64))  # (NumPy accepts it, as np.sum's: casting='unsafe')
    with pytest.raises(WriteToPlainArrayError, match="NumPy would truncate") as sums:
        _traced(lambda x, o: np.sum(x, out=o), X64, (), np.int64)
    with pytest.raises(WriteToPlainArrayError, match="NumPy would truncate") as got:
        _traced(lambda x, o: np.var(x, out=o), X64, (), np.int64)
    assert str(got.value).split(" at ")[0] == str(sums.value).split(" at ")[0]


# -- np.average: NumPy's dtype with integer and boolean weights -----------------------------------------

AVERAGE = [(xdt, wdt) for xdt in (np.float16, np.float32) for wdt in (np.int8, np.int16, np.uint8, np.bool_)]


@pytest.mark.parametrize("xdt, wdt", AVERAGE, ids=[f"{np.dtype(a).name}-{np.dtype(b).name}" for a, b in AVERAGE])
@pytest.mark.parametrize("axis", [None, 1])
def test_average_with_integer_weights_has_numpys_dtype(xdt, wdt, axis):
    x = _rng.standard_normal((3, 4)).astype(xdt)
    w = _rng.integers(1, 4, (3, 4)).astype(wdt)
    want = np.average(x, axis=axis, weights=w)
    seen = {}

    def f(xx):
        r = np.average(xx, axis=axis, weights=w)
        seen["r"] = mg.value(r)
        return np.sum(r).astype(np.float64)

    mg.grad(f)(x)
    assert type(seen["r"]) is type(want)
    assert _same_bits(seen["r"], want)


def test_average_with_integer_weights_derivative():
    w = np.array([[1, 2, 3], [3, 1, 2], [2, 2, 1]], np.int8)
    mg.testing.check_grads(lambda x: np.average(x, axis=1, weights=w), A32.copy())


# -- transforms whose out= the installed NumPy ignores ----------------------------------------------------

IGNORED = [
    ("hfft", lambda x, o: np.fft.hfft(x, out=o), X64, (14,), np.float64),
    ("ifft2", lambda x, o: np.fft.ifft2(x, out=o), A32, (3, 3), np.complex128),
    ("irfft2", lambda x, o: np.fft.irfft2(x, out=o), A32, (3, 4), np.float64),
]


@pytest.mark.parametrize("fn, x, shape, dtype", [c[1:] for c in IGNORED], ids=[c[0] for c in IGNORED])
def test_an_out_numpy_ignores_is_left_alone(fn, x, shape, dtype):
    want, want_out = _plain(fn, x, shape, dtype)
    got = _traced(fn, x, shape, dtype)
    assert got["same"] is (want is want_out)
    assert _same_bits(got["out"], want_out)
    assert _same_bits(got["res"], want)


def test_a_numpy_whose_hfft_writes_into_out_is_followed(monkeypatch):
    from mutagrad.rules import fft

    assert fft._takes_out(lambda a, out=None: np.fft.irfft(np.conj(a), out=out))  # (the probe of a fixed hfft)
    monkeypatch.setitem(fft._TAKES_OUT, np.fft.hfft, True)
    got = _traced(lambda x, o: np.fft.hfft(x, out=o), X64, (14,), np.float64)
    assert got["same"]
    assert _same_bits(got["out"], np.fft.irfft(np.conj(X64), 14, norm="forward"))


@pytest.mark.parametrize("name", ["cumulative_sum", "cumulative_prod"])
@pytest.mark.parametrize("xdt,odt", [(np.float16, np.float32), (np.float32, np.float64), (np.float32, np.complex128),
                                     (np.float64, np.complex128)])
@pytest.mark.parametrize("include_initial", [False, True])
def test_cumulative_functions_accumulate_in_a_wider_out(name, xdt, odt, include_initial):
    # (regress35: NumPy's cumulative_sum/cumulative_prod accumulate in a wider out's dtype, as cumsum does;
    # mutagrad accumulated in the input's and cast: the last bits, and the signs of zero imaginary parts)
    # Oracle: NumPy's own call, bit for bit.
    fn = getattr(np, name)
    x = np.array([2.1409192, -2.4556565, 0.5180984, -0.4677071, 1.3, -0.7], xdt)
    n = x.size + include_initial
    plain = np.zeros(n, odt)
    fn(x, out=plain, include_initial=include_initial)
    seen = {}

    def f(v):
        o = mnp.zeros(n, dtype=odt)
        r = fn(v, out=o, include_initial=include_initial)
        seen["o"], seen["r"] = np.array(mg.value(o)), r is o
        return np.sum(np.abs(o))

    mg.grad(f)(x.copy())
    assert seen["r"] and np.array_equal(seen["o"].view(np.uint8), plain.view(np.uint8))
