"""Construction rules (mutagrad/rules/construction.py): tile, repeat, roll,
pad, triangles and diagonals, convolution, interp, the polynomial functions,
meshgrid, block, choose/select/piecewise/compress/extract, resize, rounding,
nan_to_num, unique and the set operations. One line per case, checked in both
modes against finite differences."""

import re
import warnings

import numpy as np
import pytest

import mutagrad as mg
from mutagrad.testing import check_grads
from tests.rules._draws import Draws, assert_values_match_numpy  # noqa: E402

_draws = Draws(2)
R = _draws.R


X = R(3, 4)
V = R(4)
XP = np.array([0.0, 0.5, 1.3, 2.0, 3.1])
FP = R(5)
XS = np.array([-0.5, 0.2, 0.7, 1.9, 2.5, 3.5])  # away from the samples, both sides outside
XN = X.copy()
XN[0, 1] = XN[2, 3] = np.nan  # finite differences cannot step off an infinity: see the closed-form test
XNI = XN.copy()
XNI[1, 2], XNI[2, 0] = np.inf, -np.inf
XU = np.array([3.0, 1.0, 2.0, 1.5, 5.0, 0.5])  # distinct: unique is a permutation here
PAD_MODES = ["constant", "edge", "wrap", "reflect", "symmetric", "linear_ramp", "maximum", "minimum", "mean", "median"]


def _padder(vector, pad_width, iaxis, kwargs):
    vector[:pad_width[0]] = kwargs.get("padder", 10) * vector[pad_width[0]]
    if pad_width[1]:
        vector[-pad_width[1]:] = vector[-pad_width[1] - 1] ** 2


def _modf_out(a):
    frac, whole = np.zeros_like(a), np.zeros_like(a)
    np.modf(a, out=(frac, whole))
    return frac * 2 + whole


CASES = [
    # rearrangements
    ("np.tile", lambda a: np.tile(a, (2, 1, 3)), (X,), 2),
    ("np.tile", lambda a: np.tile(a, 2), (V,), 1),
    ("np.tile", lambda a: np.tile(a, 1) * 2, (V,), 1),
    ("np.repeat", lambda a: np.repeat(a, [1, 0, 2], axis=0), (X,), 2),
    ("np.repeat", lambda a: np.repeat(a, 2), (X,), 1),
    ("np.repeat", lambda a: a.repeat(2, axis=1), (X,), 1),
    ("np.roll", lambda a: np.roll(a, 2), (X,), 2),
    ("np.roll", lambda a: np.roll(a, (1, -1), axis=(0, 1)), (X,), 1),
    ("np.roll", lambda a: np.roll(a, 5, axis=1), (X,), 1),
    ("np.roll", lambda a: np.roll(a, np.array([1, 2, -4]), axis=(0, 1, 0)), (X,), 3),  # (one axis twice)
    ("np.roll", lambda a: np.roll(a.copy(order="F"), -1, axis=0).ravel(order="K"), (X,), 1),  # (NumPy's layout)
    ("np.roll", lambda a: np.roll(a * (1 + 2j), 1, axis=-1), (X,), 1),
    ("np.roll", lambda a: np.roll(a, 7), (V,), 2),
    ("np.resize", lambda a: np.resize(a, (5, 3)), (X,), 1),
    ("np.compress", lambda a: np.compress([True, False, True], a, axis=0), (X,), 1),
    ("np.compress", lambda a: np.compress([False, True], a), (X,), 1),
    ("np.extract", lambda a: np.extract(a > 0, a), (X,), 1),
    ("np.choose", lambda a, b: np.choose(np.array([[0, 1, 0, 1]] * 3), [a, b]), (X, V), 1),
    ("np.choose", lambda a, b: np.choose(np.array([0, 2, 1, 5]), [a, b, 0.5], mode="clip"), (V, R(4)), 1),
    ("np.select", lambda a, b: np.select([a > 0, b > 0], [a * b, b], default=a), (X, V), 2),
    ("np.tril", lambda a: np.tril(a, -1), (X,), 2),
    ("np.tril", lambda a: np.tril(a), (V,), 1),
    ("np.triu", lambda a: np.triu(a, 1), (X,), 2),
    ("np.diag", lambda a: np.diag(a, 1), (V,), 2),
    ("np.diag", lambda a: np.diag(a, -1), (X,), 2),
    ("np.diagflat", lambda a: np.diagflat(a, -2), (X[:2],), 2),
] + [
    ("np.pad", lambda a, m=m: np.pad(a, ((1, 2), (3, 1)), mode=m), (X,), 1) for m in PAD_MODES
] + [
    ("np.pad", lambda a, m=m: np.pad(a, ((7, 5), (9, 2)), mode=m), (X,), 1) for m in PAD_MODES
] + [
    ("np.pad", lambda a: np.pad(a, ((1, 2), (3, 1)), mode="reflect", reflect_type="odd"), (X,), 2),
    ("np.pad", lambda a: np.pad(a, ((7, 5), (9, 11)), mode="reflect", reflect_type="odd"), (X,), 1),
    ("np.pad", lambda a: np.pad(a, ((1, 2), (3, 1)), mode="symmetric", reflect_type="odd"), (X,), 2),
    ("np.pad", lambda a: np.pad(a, ((7, 5), (9, 11)), mode="symmetric", reflect_type="odd"), (X,), 1),
    ("np.pad", lambda a: np.pad(a, 3, mode="reflect", reflect_type="odd"), (X[:1],), 1),
    ("np.pad", lambda a: np.pad(a, 2, mode="empty")[2:-2, 2:-2], (X,), 1),
    ("np.pad", lambda a, c: np.pad(a, 2, constant_values=((c, 1.0), (2.0, c))), (X, 0.7), 2),
    ("np.pad", lambda a: np.pad(a, (2, 3), mode="linear_ramp", end_values=(1.0, -2.0)), (X,), 2),
    ("np.pad", lambda a: np.pad(a, (2, 3), mode="mean", stat_length=((1, 2), (3, 2))), (X,), 2),
    ("np.pad", lambda a: np.pad(a, (2, 3), mode="median", stat_length=2), (X,), 1),
    ("np.pad", lambda a: np.pad(a, {1: (1, 2)}, mode="edge"), (X,), 1),
    ("np.pad", lambda a: np.pad(a, 2, _padder, padder=3.0), (X,), 2),
    ("np.pad", lambda a: np.pad(a, 1, mode="reflect"), (R(2, 3, 2),), 1),
    # convolution
    ("np.convolve", lambda a, b: np.convolve(a, b), (R(6), R(3)), 2),
    ("np.convolve", lambda a, b: np.convolve(a, b, "same"), (R(3), R(5)), 1),
    ("np.convolve", lambda a, b: np.convolve(a, b, "valid"), (R(6), R(3)), 1),
    ("np.convolve", lambda a: np.convolve(a, np.array([1.0, -2.0, 0.5])), (R(5),), 2),
    ("np.convolve", lambda a, b: np.convolve(a, b, "same"), (R(4) + 1j * R(4), R(3) + 1j * R(3)), 1),
    ("np.correlate", lambda a, b: np.correlate(a, b), (R(6), R(3)), 2),
    ("np.correlate", lambda a, b: np.correlate(a, b, "same"), (R(2), R(5)), 1),
    ("np.correlate", lambda a, b: np.correlate(a, b, "full"), (R(3), R(4)), 1),
    ("np.correlate", lambda a, b: np.correlate(a, b, "same"), (R(4) + 1j * R(4), R(3) + 1j * R(3)), 1),
    # interpolation and polynomials
    ("np.interp", lambda t: np.interp(t, XP, FP), (XS,), 1),
    ("np.interp", lambda f: np.interp(XS, XP, f), (FP,), 2),
    ("np.interp", lambda p: np.interp(XS, p, FP), (XP,), 1),
    ("np.interp", lambda t, p, f: np.interp(t, p, f, left=-1.0, right=2.0), (XS, XP, FP), 1),
    ("np.interp", lambda t, f, l: np.interp(t, XP, f, left=l, right=l * 2), (XS, FP, 0.3), 1),
    ("np.interp", lambda f: np.interp(np.array([3.1, 0.0, 1.3]), XP, f), (FP,), 1),
    ("np.interp", lambda t, f: np.interp(t, XP, f, period=2.5), (np.array([-0.3, 0.2, 1.1, 3.7]), FP), 1),
    ("np.interp", lambda f: np.interp(XS, XP, f), (FP + 1j * R(5),), 1),
    ("np.interp", lambda t: np.interp(t, XP, FP), (0.7,), 1),
    ("np.polyval", lambda p, t: np.polyval(p, t), (R(4), R(3)), 2),
    ("np.polyval", lambda p: np.polyval(p, np.array([0.5, 2.0])), (R(4),), 2),
    ("np.polyval", lambda t: np.polyval(np.array([1.0, -2.0, 3.0]), t), (R(3),), 2),
    ("np.meshgrid", lambda a, b: np.meshgrid(a, b), (R(3), R(2)), 1),
    ("np.meshgrid", lambda a, b, c: np.meshgrid(a, b, c, indexing="ij", sparse=True), (R(3), R(2), R(2)), 1),
    ("np.meshgrid", lambda a, b: np.meshgrid(a, b, copy=False)[0] * 2, (R(3), R(2)), 1),
    ("np.block", lambda a, b: np.block([[a, b], [b, a]]), (R(2, 2), R(2, 2)), 1),
    ("np.block", lambda a, b: np.block([a, b, 1.0]), (R(2), R(3)), 1),
    ("np.block", lambda a: np.block([[[a]]]) * 2, (R(2),), 1),
    # rounding and cleaning
    ("np.round", lambda a: np.round(a, 1) * a, (X,), 1),
    ("np.round", lambda a: a.round(2) * a, (X,), 1),
    ("np.around", lambda a: np.around(a) + a, (X,), 1),
    ("np.real_if_close", lambda a: np.real_if_close(a + 0j) * 2, (X,), 1),
    ("np.real_if_close", lambda a: np.abs(np.real_if_close(a * (1 + 0.5j))), (X,), 1),
    ("np.nan_to_num", lambda a: np.nan_to_num(a), (XN,), 2),
    ("np.nan_to_num", lambda a, n: np.nan_to_num(a, nan=n), (XN, 0.5), 2),
    ("np.nan_to_num", lambda a: (np.nan_to_num(a, copy=False), a * 2)[1], (XN,), 1),
    ("np.nan_to_num", lambda a: np.abs(np.nan_to_num(a * (1 + 1j))), (XN,), 1),
    # multi-output ufuncs (appended to rules/elementwise.py)
    ("np.divmod", lambda a, b: np.divmod(a, b), (np.array([5.3, -4.2, 7.7]), np.array([2.0, 1.5, -3.1])), 1),
    ("np.divmod", lambda a, b: divmod(a, b)[1] * a, (np.array([5.3, -4.2, 7.7]), np.array([2.0, 1.5, -3.1])), 2),
    ("np.modf", lambda a: np.modf(a), (np.array([5.3, -4.2, 0.7]),), 2),
    ("np.modf", lambda a: _modf_out(a), (np.array([5.3, -4.2, 0.7]),), 1),
    ("np.frexp", lambda a: np.frexp(a)[0] * a, (np.array([5.3, -4.2, 0.7]),), 2),
    # unique: values are gathers of their first occurrences
    ("np.unique", lambda a: np.unique(a) * np.arange(6.0), (XU,), 1),
    ("np.unique", lambda a: np.unique(a, return_index=True, return_counts=True)[0], (XU,), 1),
    ("np.unique", lambda a: np.unique(a, axis=0), (np.array([[1.0, 2.0], [0.5, 3.0], [1.5, 2.5]]),), 1),
    ("np.unique_values", lambda a: np.unique_values(a), (XU,), 1),
    ("np.unique_all", lambda a: np.unique_all(a).values, (XU,), 1),
    ("np.unique_counts", lambda a: np.unique_counts(a).values, (XU,), 1),
    ("np.unique_inverse", lambda a: np.unique_inverse(a).values, (XU,), 1),
]


# piecewise, polynomials, set operations: their own draws (the cases above keep theirs)
_more = Draws(12)
R2 = _more.R
XP6 = R2(6)
SA = np.array([3.0, 1.0, 2.0, 1.5, 5.0, 0.5])  # distinct
SB = np.array([2.5, 7.0, 0.25, 4.0])  # distinct, none in SA: ties are made inside the cases (a[[1, 4]]),
# so that finite differences move both copies alike and the sets keep their sizes
ROOTS3 = np.array([1.0, 2.5, -0.7])
DIVISOR = np.array([1.3, 0.5, -0.7])  # a leading coefficient away from 0: the quotient is 1 / DIVISOR[0] ** k


def _dup(a, b):
    return np.concatenate([b, a[[1, 4]]])


NEW_CASES = [
    ("np.piecewise", lambda a: np.piecewise(a, [a < 0, a >= 0], [lambda v: v ** 2, np.sin]), (XP6,), 2),
    ("np.piecewise", lambda a: np.piecewise(a, [a < -0.5, a > 0.5], [lambda v: v ** 2, 1.5, lambda v: 3 * v]),
     (XP6,), 1),
    ("np.piecewise", lambda a, c: np.piecewise(a, [a < 0], [c, lambda v, k: v * k], 2.0), (XP6, 0.7), 1),
    ("np.piecewise", lambda a: np.piecewise(a, a > 0, [lambda v: v ** 3, 0.0]), (0.8,), 1),
    ("np.polyadd", np.polyadd, (R2(3), R2(5)), 1),
    ("np.polysub", np.polysub, (R2(4), R2(2)), 1),
    ("np.polymul", np.polymul, (R2(3), R2(4)), 2),
    ("np.polymul", lambda a, b: np.polymul(np.poly1d(a), b).coeffs, (R2(3), R2(4)), 1),  # poly1d trims with trim_zeros
    ("np.polymul", lambda a, b: np.polymul(a * np.array([0.0, 1.0, 1.0]), b), (R2(3), R2(2)), 1),
    ("np.polyder", lambda a: np.polyder(a, 2), (R2(5),), 1),
    ("np.polyder", lambda a: np.polyder(a), (R2(3),), 1),
    ("np.polyint", np.polyint, (R2(4),), 1),
    ("np.polyint", lambda a, k: np.polyint(a, 3, k), (R2(4), R2(3)), 1),
    ("np.polyint", lambda a, k: np.polyint(a, 2, k), (R2(4), 0.4), 1),
    ("np.polydiv", np.polydiv, (R2(6), DIVISOR), 2),
    ("np.polydiv", np.polydiv, (R2(2), DIVISOR), 1),
    ("np.poly", np.poly, (R2(4),), 2),
    ("np.poly", np.poly, (R2(3) + 1j * R2(3),), 1),
    ("np.poly", np.poly, (R2(3, 3),), 1),
    ("np.roots", np.roots, (R2(5),), 2),
    ("np.roots", np.roots, (np.poly(ROOTS3),), 2),
    ("np.roots", lambda p: np.roots(p * np.array([1.0, 1.0, 1.0, 0.0])), (R2(4),), 1),
    ("np.roots", np.roots, (np.array([1.0, -3.0, 0.0]),), 1),
    ("np.roots", lambda a, b: np.roots([a, b, 2.0]), (1.0, -3.0), 2),
    ("np.polyfit", lambda x, y: np.polyfit(x, y, 2), (R2(7), R2(7)), 2),
    ("np.polyfit", lambda x, y: np.polyfit(x, y, 1), (R2(5), R2(5, 2)), 1),
    ("np.polyfit", lambda x, y, w: np.polyfit(x, y, 2, w=w), (R2(7), R2(7), _more.P(7)), 1),
    ("np.polyfit", lambda x, y: np.polyfit(x, y, 2, cov=True), (R2(7), R2(7)), 1),
    ("np.polyfit", lambda x, y, w: np.polyfit(x, y, 1, cov="unscaled", w=w), (R2(7), R2(7, 2), _more.P(7)), 1),
    ("np.polyfit", lambda x, y: np.polyfit(x, y, 2, full=True)[:2], (R2(7), R2(7)), 1),
    ("np.setdiff1d", lambda a, b: np.setdiff1d(np.concatenate([a, a[:2]]), np.concatenate([b, a[:2], a[[3]]])),
     (SA, SB), 1),
    ("np.setdiff1d", lambda a, b: np.setdiff1d(a, np.concatenate([b, a[[3]]]), assume_unique=True), (SA, SB), 1),
    ("np.union1d", lambda a, b: np.union1d(a, _dup(a, b)), (SA, SB), 1),
    ("np.union1d", lambda a, b: np.union1d(a.reshape(2, 3), b), (SA, SB), 1),
    ("np.intersect1d", lambda a, b: np.intersect1d(np.concatenate([a, b[:1]]), _dup(a, b)), (SA, SB), 1),
    ("np.intersect1d", lambda a, b: np.intersect1d(np.concatenate([a, b[:1]]), _dup(a, b), return_indices=True),
     (SA, SB), 1),
    ("np.intersect1d", lambda a, b: np.intersect1d(a, _dup(a, b), assume_unique=True), (SA, SB), 1),
    ("np.setxor1d", lambda a, b: np.setxor1d(a, _dup(a, b)), (SA, SB), 1),
    ("np.setxor1d", lambda a, b: np.setxor1d(a.reshape(2, 3), _dup(a, b), assume_unique=True), (SA, SB), 1),
]
CASES += NEW_CASES


@pytest.mark.parametrize("covers,fn,args,order", CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_rule(covers, fn, args, order):
    check_grads(fn, *args, modes=("fwd", "rev"), order=order)


@pytest.mark.parametrize("fn", [np.convolve, np.correlate])
@pytest.mark.parametrize("mode", ["full", "same", "valid"])
def test_convolution_values_match_numpy(fn, mode):
    # bit for bit, both arguments traced (np.correlate of a shorter first argument swaps them:
    # computed as a convolution with the flipped kernel, its values were off in the last bit)
    for n in range(1, 7):
        for m in range(1, 7):
            for a, v in ((R(n) + 1j * R(n), R(m) + 1j * R(m)), (R(n), R(m))):
                out, _ = mg.vjp(lambda x, w: fn(x, w, mode), a, v)
                np.testing.assert_array_equal(out, fn(a, v, mode))


def test_convolution_of_a_number_and_numpys_mode_and_shape_errors():
    # np.convolve takes a number as an array of one (array(a, ndmin=1)): "object too deep" before (filters);
    # d/dx sum(convolve(x, c)^2) = 2 c^2 x, d/ds sum(convolve(s, x)^2) = 2 s sum(x^2), by hand
    x = np.array([1.0, 2.0, 3.0])
    np.testing.assert_allclose(mg.grad(lambda x: np.sum(np.convolve(x, 0.5) ** 2))(x), 2 * 0.25 * x, rtol=1e-15)
    np.testing.assert_allclose(mg.grad(lambda s: np.sum(np.convolve(s, x) ** 2))(2.0), 4.0 * np.sum(x * x), rtol=1e-15)
    np.testing.assert_array_equal(mg.jvp(lambda x: np.convolve(x, np.float64(0.5)), (x,), (x,))[1], 0.5 * x)
    # NumPy's errors, as a plain call raises them: correlate refuses a number, the modes are the three names
    # (also as np.str_) or 0, 1, 2 (abbreviations gave values NumPy refuses)
    cases = [(np.correlate, (0.5,), {}), (np.correlate, (x[None],), {}), (np.convolve, (x[None],), {})]
    cases += [(np.convolve, ([1.0, 1.0],), {"mode": m}) for m in ("s", "f", "val", "VALID", 3, -1, True, None, 1.0)]
    # (in NumPy's order: the mode before the depth, the lengths; regress39)
    cases += [(fn, rest, {"mode": m}) for fn in (np.convolve, np.correlate) for rest in ((2.0,), (np.zeros((1, 2)),), (np.zeros(0),))
              for m in ("s", 3, True, "same")]
    raised = 0
    for fn, rest, kw in cases:
        try:
            want = fn(x, *rest, **kw)
        except (ValueError, TypeError) as plain:
            raised += 1
            with pytest.raises(type(plain), match=re.escape(str(plain))):
                mg.grad(lambda x, fn=fn, rest=rest, kw=kw: np.sum(fn(x, *rest, **kw)))(x)
        else:
            np.testing.assert_array_equal(mg.vjp(lambda x, fn=fn, rest=rest, kw=kw: fn(x, *rest, **kw), x)[0], want)
    assert raised >= 30
    for m in (np.str_("same"), np.int64(2), 0):
        out, _ = mg.vjp(lambda x, m=m: np.convolve(x, [1.0, 1.0], mode=m), x)
        np.testing.assert_array_equal(out, np.convolve(x, [1.0, 1.0], mode=m))


@pytest.mark.parametrize("mode", PAD_MODES + ["reflect-odd", "symmetric-odd"])
def test_pad_values_match_numpy(mode):
    kw = {"reflect_type": "odd"} if mode.endswith("-odd") else {}
    mode = mode.split("-")[0]
    x = R(2, 3)
    for width in [((0, 1), (2, 0)), ((5, 7), (4, 9)), 3]:
        out, _ = mg.vjp(lambda a: np.pad(a, width, mode=mode, **kw), x)
        np.testing.assert_array_equal(out, np.pad(x, width, mode=mode, **kw))


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_linear_ramp_keeps_the_arrays_type_and_numpys_bits(dtype):
    # NumPy computes the ramps in the type of the end values (np.float64 scalars for one pair,
    # Python floats for a pair per axis) and casts them to the array's (a float32 array stayed float64)
    x = R(4, 3).astype(dtype)
    for ends in [(0.25, 0.5), 3, ((1.0, 2.0), (0.5, -1.0)), (np.float32(0.3), np.float32(2.0))]:
        for width in [2, (1, 3), ((2, 1), (0, 3)), 300]:
            want = np.pad(x, width, mode="linear_ramp", end_values=ends)
            out, _ = mg.vjp(lambda a, w=width, e=ends: np.pad(a, w, mode="linear_ramp", end_values=e), x)
            assert out.dtype == want.dtype
            np.testing.assert_array_equal(out, want)


def test_unique_values_occurring_once_are_their_occurrence():
    # closed form: unique([3, 1, 2, 5]) = [1, 2, 3, 5]
    w = np.array([1.0, 2.0, 3.0, 4.0])
    x = np.array([3.0, 1.0, 2.0, 5.0])
    np.testing.assert_array_equal(mg.grad(lambda a: np.sum(np.unique(a) * w))(x), [3.0, 1.0, 2.0, 4.0])
    np.testing.assert_array_equal(mg.jvp(lambda a: np.unique(a), (x,), (np.arange(4.0),))[1], [1.0, 2.0, 0.0, 3.0])


@pytest.mark.parametrize("axis", [None, 0])
def test_unique_repeated_values_refuse(axis):
    # u[inv] == x for every x, so d/dx sum(w * u[inv]**2) = 2 w x; no convention for a repeated
    # value gives that (its first occurrence gave [0.6, 0, 4 ...] [the newfeat20 tester], the mean
    # 2.3): the derivative is refused, and the fix the message names (bincount) is differentiated
    x = np.array([[1.0, 2.0], [3.0, 4.0], [1.0, 2.0]])
    w = np.array([0.3, -1.2, 2.0])[:, None]

    def f(a):
        u, inv = np.unique(a if axis is not None else a.ravel(), axis=axis, return_inverse=True)
        return np.sum(w * np.reshape(u[inv.ravel()] ** 2, (3, 2)))

    g = mg.grad(f)(x)
    assert isinstance(g, mg.NotImplementedTangent) and "u[inverse] is the array itself" in g.message
    assert isinstance(mg.jvp(f, (x,), (np.ones_like(x),))[1], mg.NotImplementedTangent)

    def means(a):  # group means, the fix: bincount over the (plain) inverse
        _, inv, counts = np.unique(mg.stop_gradient(a).ravel(), return_inverse=True, return_counts=True)
        return np.sum(np.bincount(inv, weights=a.ravel()) / counts * np.arange(1.0, counts.size + 1))

    # (the groups are fixed by the plain values; by hand: group k's weight k + 1 over its count)
    np.testing.assert_allclose(mg.grad(means)(x), [[0.5, 1.0], [3.0, 4.0], [0.5, 1.0]], rtol=1e-15)
    y = x + np.arange(6.0).reshape(3, 2) * 1e-3  # (no repeats: by hand, 2 w y)
    np.testing.assert_allclose(mg.grad(f)(y), 2 * w * y, rtol=1e-14)


def test_round_has_zero_derivative():
    np.testing.assert_array_equal(mg.grad(lambda a: np.sum(np.round(a, 1)))(np.array([0.33, 1.77])), [0.0, 0.0])


def test_nan_to_num_replacements_are_constants():
    # closed form: replaced elements get derivative 0 (or flow to the traced replacement), others 1
    def f(a, n):
        return np.sum(np.nan_to_num(a, nan=n, posinf=2 * n, neginf=-4.0))

    ga, gn = mg.grad(f, argnums=(0, 1))(XNI, 0.5)
    np.testing.assert_array_equal(ga, np.isfinite(XNI).astype(float))
    assert gn == 2 + 2.0  # two NaNs, one +inf (times 2)


def test_nan_to_num_in_place_matches_numpy():
    def f(a):
        np.nan_to_num(a, copy=False)
        return a * 1.0

    out, _ = mg.vjp(f, XNI.copy())
    np.testing.assert_array_equal(out, np.nan_to_num(XNI))


@pytest.mark.parametrize("covers,fn,args,order", NEW_CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(NEW_CASES)])
def test_values_match_numpy(covers, fn, args, order):
    assert_values_match_numpy(fn, args)


def test_roots_zero_coefficients_closed_form():
    # implicit function theorem, p(r) = 0: dr/dp_k = -r^(N-1-k) / p'(r), with every coefficient of p,
    # including the zeros NumPy drops (finite differences cannot step off them: the root count changes)
    # x^2 - 3x (+ 0): roots 3 and 0, p'(x) = 2x - 3
    J = mg.jacobian(np.roots)(np.array([1.0, -3.0, 0.0]))
    np.testing.assert_allclose(J, [[-3.0, -1.0, -1 / 3], [0.0, 0.0, 1 / 3]], atol=1e-14)
    # 0 x^3 + x^2 - 3x + 2: roots 2 and 1; a cubic term moves them by -r^3 / p'(r)
    J = mg.jacobian(np.roots)(np.array([0.0, 1.0, -3.0, 2.0]))
    np.testing.assert_allclose(J, [[-8.0, -4.0, -2.0, -1.0], [1.0, 1.0, 1.0, 1.0]], atol=1e-13)


def test_roots_repeated_root_is_not_implemented():
    p = np.array([1.0, -2.0, 1.0])  # (x - 1)^2: the roots move as sqrt of a change in p
    assert np.array_equal(np.roots(p), [1.0, 1.0])
    g = mg.grad(lambda q: np.sum(np.roots(q)))(p)
    assert isinstance(g, mg.NotImplementedTangent) and "repeated root" in g.message
    _, t = mg.jvp(np.roots, (p,), (np.ones(3),))
    assert isinstance(t, mg.NotImplementedTangent)


def test_set_operation_ties_flow_to_ar1():
    # the convention stated in the rules (NumPy's and JAX's computation): a value present
    # in both arrays is ar1's element
    a, b = np.array([1.0, 2.0, 3.0]), np.array([2.0, 5.0])
    for fn in (np.union1d, np.intersect1d):
        ga, gb = mg.grad(lambda x, y, fn=fn: np.sum(fn(x, y)), argnums=(0, 1))(a, b)
        np.testing.assert_array_equal(ga, [1.0, 1.0, 1.0] if fn is np.union1d else [0.0, 1.0, 0.0])
        np.testing.assert_array_equal(gb, [0.0, 1.0] if fn is np.union1d else [0.0, 0.0])


def test_set_operations_refuse_a_value_repeated_within_one_array():
    # (the newfeat21 tester) a value repeated inside ar1 went to its first occurrence, as np.unique's did:
    # sum(u[searchsorted(u, a)]**2) is sum(a**2) near a = [1, 2, 1] (gradient 2a), mutagrad gave [4, 4, 0]
    a, b = np.array([1.0, 2.0, 1.0]), np.array([5.0])
    for fn in (np.union1d, np.setdiff1d, np.setxor1d, np.intersect1d):
        other = b if fn is not np.intersect1d else np.array([1.0, 2.0])

        def f(x, fn=fn, other=other):
            u = fn(x, other)
            return np.sum(u[np.searchsorted(mg.value(u), mg.value(x))] ** 2)

        g = mg.grad(f)(a)
        assert isinstance(g, mg.NotImplementedTangent) and "set operation" in g.message, fn
        assert isinstance(mg.jvp(f, (a,), (np.array([0.0, 0.0, 1.0]),))[1], mg.NotImplementedTangent)
        # values occurring once keep their derivative (by hand: d/da_1 of u's 2.0 squared is 4)
        h = lambda x, fn=fn, other=other: np.sum(fn(x, other)[mg.value(fn(x, other)) == 2.0] ** 2)
        np.testing.assert_array_equal(mg.grad(h)(a), [0.0, 4.0, 0.0])


def test_intersect1d_indices_match_numpy():
    a, b = np.array([3.0, 1.0, 2.0, 1.0, 5.0]), np.array([2.0, 7.0, 1.0, 2.0])
    for assume_unique in (False, True):
        (v, i, j), _ = mg.vjp(lambda x, u=assume_unique: np.intersect1d(x, b, u, return_indices=True), a)
        for got, ref in zip((v, i, j), np.intersect1d(a, b, assume_unique, return_indices=True)):
            np.testing.assert_array_equal(got, ref)


def test_interp_with_traced_ends_and_plain_samples():
    # NumPy's interp dispatches on x, xp and fp only; traced left=/right= beside plain ones
    # go through mnp.interp (the odefit tester's pre-dose baseline), and np.interp's message says so
    import mutagrad.numpy as mnp

    xp, fp, xq = np.array([0.0, 1.0, 2.0]), np.array([1.0, 3.0, 2.0]), np.array([-0.5, 0.5, 2.5, 2.0])

    def f(lr):
        return np.sum(mnp.interp(xq, xp, fp, left=lr[0], right=lr[1]) ** 2)

    lr = np.array([0.3, -0.7])
    np.testing.assert_allclose(f(lr), np.sum(np.interp(xq, xp, fp, left=0.3, right=-0.7) ** 2))
    check_grads(f, lr)
    check_grads(lambda p: np.sum(mnp.interp(xq, xp, p[:3], left=p[3]) ** 2), np.array([1.0, 3.0, 2.0, 0.4]))
    assert type(mnp.interp(xq, xp, fp)) is np.ndarray  # plain arguments: NumPy's own call
    # a traced period= beside a plain x, and fp as a list holding traced numbers
    def per(p):
        return np.sum(mnp.interp(np.array([1.0, 7.5]), xp, fp, period=p))

    fd = (np.sum(np.interp(np.array([1.0, 7.5]), xp, fp, period=6.0 + 1e-6))
          - np.sum(np.interp(np.array([1.0, 7.5]), xp, fp, period=6.0 - 1e-6))) / 2e-6
    np.testing.assert_allclose(mg.grad(per)(6.0), fd, rtol=1e-7)
    np.testing.assert_allclose(mg.grad(lambda a: np.sum(mnp.interp([0.5], [0.0, 1.0, 2.0], [a, a ** 2, 1.0])))(6.0),
                               (1 + 2 * 6.0) / 2)
    with pytest.raises(mg.TracerEscapeError, match=r"np.interp dispatches on x, xp and fp only.*mnp.interp"):
        mg.grad(lambda lr: np.sum(np.interp(xq, xp, fp, left=lr[0], right=lr[1]) ** 2))(lr)


def test_piecewise_of_a_plain_array_with_traced_functions():
    # NumPy's piecewise dispatches on x only and writes the functions' values into a plain array;
    # mnp.piecewise traces the result (the CFD tester's friction law over a plain velocity field)
    import mutagrad.numpy as mnp

    u = np.array([0.1, 0.5, 0.2, 0.7])

    def fric(cf, pw):
        return np.sum(pw(u, [u > 0.3, u <= 0.3], [lambda v: cf * v * v, lambda v: 0.3 * cf * v]))

    np.testing.assert_allclose(fric(0.5, mnp.piecewise), fric(0.5, np.piecewise), rtol=0, atol=0)
    fd = (fric(0.5 + 1e-6, np.piecewise) - fric(0.5 - 1e-6, np.piecewise)) / 2e-6
    np.testing.assert_allclose(mg.grad(fric)(0.5, mnp.piecewise), fd, rtol=1e-7)
    np.testing.assert_allclose(mg.jvp(lambda c: fric(c, mnp.piecewise), (0.5,), (1.0,))[1], fd, rtol=1e-7)
    assert type(mnp.piecewise(u, [u > 0.3], [1.0, 2.0])) is np.ndarray  # outside differentiation: NumPy's
    with pytest.raises(mg.TracerEscapeError, match=r"mnp.piecewise\(x, condlist, funclist\)"):
        mg.grad(fric)(0.5, np.piecewise)


@pytest.mark.parametrize("x, xp, fp", [
    ([0.5, -3.0, 0.0], [-np.inf, 0.0, 1.0], [1.0, 3.0, -2.0]),  # NaN from the left end: NumPy's from the right
    ([1.0, 2.0, 0.5], [0.0, 1.0, 2.0], [1.0, 3.0, np.inf]),  # samples beside an infinite slope, the last one
    ([-np.inf, np.inf, 0.3], [-np.inf, 0.0, np.inf], [1.0, 2.0, 4.0]),  # x at infinite samples
    ([2.0, 1.5, np.nan], [1.0, 2.0, 2.0], [1.0, 5.0, 3.0]),  # a repeated last sample, a NaN x
    ([0.5, 1.5], [0.0, 1.0, 2.0], [1.0, np.inf, np.inf]),  # inf - inf: fp[j] where fp[j] == fp[j+1]
    ([0.5, 1.0, 1.5], [0.0, 1.0, 2.0], [1 + 1j, np.inf + 2j, 3 - 1j]),  # complex: NumPy's rules part by part
    (0.25, [0.0, 1.0], [2.0, 4.0]),  # a 0-d x: a NumPy scalar
])
def test_interp_values_with_infinite_samples_are_numpys(x, xp, fp):
    # NumPy's loop: a sample's own value at a sample, the formula from the segment's right end
    # where the left one gives NaN, fp[j] where both do and fp[j] == fp[j+1] (it was NaN, the
    # tester's censored grid); its values bit for bit, whichever argument is traced, no warning
    x, xp, fp = (np.array(v) if np.ndim(v) else v for v in (x, xp, fp))
    with np.errstate(all="ignore"):
        want = np.interp(x, xp, fp)
    args = [x, xp, fp]
    for k in range(3):
        if np.ndim(args[k]) == 0:
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            got = mg.jvp(lambda a, k=k: np.interp(*(a if i == k else args[i] for i in range(3))),
                         (args[k],), (np.ones_like(args[k]),))[0]
        assert type(got) is type(want)
        np.testing.assert_array_equal(got, want)


def test_interp_with_one_sample_is_a_traced_array():
    # one sample: the value is constant in x, but the result of a traced x is traced (writable
    # with traced values, as any output of one); its values NumPy's, a NaN x and -0.0 included
    def f(x):
        r = np.interp(x, [1.0], [3.0])
        r[0] = x[0] ** 2
        return np.sum(r)

    x = np.array([0.5, 0.2])
    fd = np.array([(f(x + 1e-6 * e) - f(x - 1e-6 * e)) / 2e-6 for e in np.eye(2)])
    np.testing.assert_allclose(mg.grad(f)(x), fd, rtol=1e-8, atol=1e-9)
    v = np.array([0.5, np.nan, -np.inf, 2.0])
    got = mg.vjp(lambda a: np.interp(a, [1.0], [-0.0]), v)[0]
    np.testing.assert_array_equal(np.signbit(got), np.signbit(np.interp(v, [1.0], [-0.0])))


def test_interp_derivative_beside_an_infinite_sample():
    # x = -3 lies between xp = -inf and 0: NumPy's value fp[1] (the formula from the right end), so
    # its derivative goes to fp[1]; central differences of the plain function
    x, xp = np.array([0.5, -3.0]), np.array([-np.inf, 0.0, 1.0])

    def f(fp):
        return np.sum(np.interp(x, xp, fp) * np.array([1.0, 10.0]))

    fp = np.array([1.0, 3.0, -2.0])
    fd = np.array([(f(fp + 1e-6 * e) - f(fp - 1e-6 * e)) / 2e-6 for e in np.eye(3)])
    np.testing.assert_allclose(fd, [0.0, 10.5, 0.5], atol=1e-8)
    np.testing.assert_allclose(mg.grad(f)(fp), fd, rtol=1e-8, atol=1e-9)
    np.testing.assert_allclose(mg.jacobian(f, mode="fwd")(fp), fd, rtol=1e-8, atol=1e-9)


@pytest.mark.parametrize("fp", [np.array([0.0, 1.0, 4.0, 9.0]), np.array([0.0, 1.0 + 2.0j, 4.0 - 1.0j, 9.0 + 0.5j])])
def test_interp_at_an_end_sample_that_moves_with_x(fp):
    # resampling onto a grid spanning the samples' own range: the grid's ends sit on the first
    # and last samples whatever x is, so the function is smooth there; the derivative in x and
    # in xp must come from the same segment (the last one's in both, at the last sample)
    def f(x):
        r = np.interp(np.linspace(x[0], x[-1], 5), x, fp)
        return np.sum(np.real(r) + 0.3 * np.imag(r))

    x = np.array([0.0, 1.0, 2.0, 3.0])
    fd = np.array([(f(x + 1e-6 * e) - f(x - 1e-6 * e)) / 2e-6 for e in np.eye(4)])
    np.testing.assert_allclose(mg.grad(f)(x), fd, rtol=1e-7, atol=1e-8)
    np.testing.assert_allclose(mg.jacobian(f, mode="fwd")(x), fd, rtol=1e-7, atol=1e-8)

    def g(a):  # equal to fp[-1] for every a > 0
        return np.real(np.interp(a, a * np.array([0.0, 0.5, 1.0]), fp[:3]))

    assert g(1.9) == g(2.1) == g(2.0)
    assert mg.grad(g)(2.0) == 0.0 and mg.jvp(g, (2.0,), (1.0,))[1] == 0.0


def test_mnp_interp_with_complex_samples_and_a_traced_left_only():
    # only left= is traced (x, xp and complex fp plain): mnp.interp's result is still traced
    import mutagrad.numpy as mnp

    fp = np.array([1 + 1j, 2 - 1j])

    def f(p, interp):
        r = interp(np.array([-1.0, 0.5, 3.0]), [0.0, 1.0], fp, left=p * 1j, right=2.0)
        return np.sum(np.abs(r) ** 2)

    fd = (f(0.7 + 1e-6, np.interp) - f(0.7 - 1e-6, np.interp)) / 2e-6
    np.testing.assert_allclose(mg.grad(lambda p: f(p, mnp.interp))(0.7), fd, rtol=1e-7)
    np.testing.assert_allclose(mg.jvp(lambda p: f(p, mnp.interp), (0.7,), (1.0,))[1], fd, rtol=1e-7)


def test_interp_with_unsorted_sample_points_raises():
    # NumPy does not check and returns meaningless values; mutagrad says so instead of computing others
    xp = np.array([1.0, 0.4, 0.0])
    with pytest.raises(ValueError, match=r"np.interp at .*test_construction.py.*not increasing.*argsort"):
        mg.grad(lambda x: np.sum(np.interp(np.array([0.1, 0.5]), x, np.array([1.0, 2.0, 3.0]))))(xp)
    # a deliberate refusal, also with plain sample points and a traced x
    with pytest.raises(mg.DifferentiationError, match="not increasing"):
        mg.grad(lambda x: np.interp(x, np.array([0.0, 2.0, 1.0, 3.0]), np.arange(4.0)))(0.5)
    # with period=, NumPy sorts them itself
    def f(x):
        return np.sum(np.interp(np.array([0.1, 0.5]), x, np.array([1.0, 2.0, 3.0]), period=1.0))

    check_grads(f, np.array([0.7, 0.35, 0.15]))


def test_integral_parts_of_modf_and_divmod_are_constants_plain_code_may_read():
    # int(np.modf(d)[1]) and int(divmod(d, 1.0)[0]) as int(np.floor(d)): piecewise-constant
    # outputs come out as constants; the continuous output keeps its derivative
    sig = np.arange(10.0) ** 2
    parts = [lambda d: np.modf(d)[1], lambda d: divmod(d, 1.0)[0], lambda d: np.divmod(d, 1.0)[0]]
    for part in parts:
        def f(d, part=part):
            k = int(part(d))
            fr = d - k
            return (1 - fr) * sig[k] + fr * sig[k + 1]

        fd = (f(3.25 + 1e-6) - f(3.25 - 1e-6)) / 2e-6
        np.testing.assert_allclose(mg.grad(f)(3.25), fd, rtol=1e-7)
        np.testing.assert_allclose(mg.jvp(f, (3.25,), (1.0,))[1], fd, rtol=1e-7)
    check_grads(lambda x: np.modf(x)[0] * np.modf(x)[1] + np.divmod(x, 0.7)[1] * np.divmod(x, 0.7)[0],
                np.array([1.55, 2.25]), order=2)


@pytest.mark.parametrize("mode", ["wrap", "edge", "reflect", "symmetric"])
@pytest.mark.parametrize("shape, width", [((5,), 2), ((5,), (0, 5)), ((5,), (7, 1)), ((3, 4), ((1, 2), (3, 0))),
                                          ((1,), 3), ((3, 4), 4)])
def test_pad_by_slices_has_numpys_values_and_derivative(mode, shape, width):
    # wrap and edge pads within the array's length are concatenations of slices (their pullback adds
    # slices); wider wraps gather; the values are NumPy's, the derivative vs central differences
    rng = np.random.default_rng(len(shape) + 3 * np.size(width))
    x = rng.standard_normal(shape)
    plain = np.pad(x, width, mode=mode)
    np.testing.assert_array_equal(mg.vjp(lambda x: np.pad(x, width, mode=mode), x)[0], plain)
    w = rng.standard_normal(plain.shape)
    check_grads(lambda x: np.sum(np.pad(x, width, mode=mode) * w), x)


def test_interp_over_a_constant_table_is_one_rule_with_the_segment_slopes():
    # x traced, the table constant (closed over, or an argument not differentiated): NumPy's own call
    # and the slope of the segment right of x (the last one's at xp[-1]), 0 outside, 1 at a NaN x in
    # reverse mode (NumPy returns x itself) and NaN in forward mode (the tangent of a NaN output, along
    # every direction); by hand from the table, and the same as when fp is differentiated too (the general
    # path)
    xp = np.array([0.0, 0.1, 0.5, 2.0])
    fp = np.array([1.0, -2.0, 3.0, 0.5])
    slopes = np.diff(fp) / np.diff(xp)
    x = np.array([-0.5, 0.0, 0.05, 0.1, 0.3, 0.5, 1.9, 2.0, 2.5, np.nan])
    want = np.array([0.0, slopes[0], slopes[0], slopes[1], slopes[1], slopes[2], slopes[2], slopes[2], 0.0, 1.0])
    fwd = np.where(np.isnan(x), np.nan, want)
    for kw in ({}, {"left": -3.0, "right": 7.0}):
        def f(x, kw=kw):
            return np.interp(x, xp, fp, **kw)

        np.testing.assert_array_equal(mg.jacobian(f)(x).diagonal(), want)
        np.testing.assert_array_equal(mg.jacobian(f, mode="fwd")(x).diagonal(), fwd)
        np.testing.assert_array_equal([mg.grad(f)(v) for v in x], want)
        out, _ = mg.vjp(f, x)
        np.testing.assert_array_equal(out, np.interp(x, xp, fp, **kw))
        assert type(mg.vjp(f, 0.3)[0]) is np.float64  # (a NumPy scalar for a scalar x, as NumPy's)
        general = mg.jacobian(lambda x, fq, kw=kw: np.interp(x, xp, fq, **kw), argnums=0)(x, fp)  # (fp traced)
        np.testing.assert_array_equal(np.diagonal(general), want)
        np.testing.assert_array_equal(mg.hessian(lambda x, f=f: np.sum(f(x[:-1]) ** 2))(x).diagonal()[:-1],
                                      2 * want[:-1] ** 2)  # (the second derivative of the segments is 0)
        g = mg.grad(lambda x, t, kw=kw: np.sum(np.interp(x, t[0], t[1], **kw)))(x[:-1], (xp, fp))  # (a constant argument)
        np.testing.assert_array_equal(g, want[:-1])


def test_nan_to_num_of_a_0d_array_is_a_scalar():
    # as NumPy's (a 0-d array before: a write through it, r[()] = 5, worked where NumPy's raises)
    x = np.array(0.7)
    for got in (mg.vjp(np.nan_to_num, x.copy())[0], mg.jvp(np.nan_to_num, (x.copy(),), (np.ones(()),))[0]):
        assert type(got) is np.float64 and got == 0.7
    assert mg.grad(lambda x: np.nan_to_num(x) * 3.0)(x.copy()) == 3.0


def test_diag_of_a_constant_is_a_constant():
    # np.diag of an argument not differentiated was a written buffer (its elements placed by a
    # write), which NumPy's and SciPy's own code may not read: scipy.sparse.linalg.expm(-np.diag(M))
    # was refused where expm(-M2) of a 2-D constant M2 is not
    spl = pytest.importorskip("scipy.sparse.linalg")

    def f(x, m):
        d = np.diag(m, 1)[:2, :2] + np.diag(m[:2])
        return np.sum(spl.expm(-d) @ x) + np.sum(np.diag(m) * 0.0)

    m, x = np.array([1.0, 2.0, 3.0]), np.array([1.0, 1.0])
    # expm of [[-1, -1], [0, -2]] is [[e^-1, e^-2 - e^-1], [0, e^-2]], by hand; d/dx: its column sums
    e = np.array([[np.exp(-1.0), np.exp(-2.0) - np.exp(-1.0)], [0.0, np.exp(-2.0)]])
    np.testing.assert_allclose(mg.grad(f)(x, m), e.sum(axis=0), rtol=1e-12)
    d = mg.grad(lambda m: np.sum(np.diag(m) ** 2))(m)  # a differentiated one: 2m, by hand
    np.testing.assert_allclose(d, 2 * m, rtol=1e-15)


def test_buffers_written_only_with_constants_are_constants_plain_code_may_read():
    # a buffer a rule (or mnp.zeros, np.zeros_like of a constant) makes and fills with constants
    # only is a constant: float() of it, and NumPy's or SciPy's own code reading it, are fine
    # (np.polydiv's quotient, np.histogram's edges, np.pad: were refused as written buffers)
    m = np.array([3.0, 1.0, 2.0, 5.0])

    def f(x, m):
        q = np.polydiv(m, m[:2])[0]
        e = np.histogram(m, bins=3)[1]
        p = np.pad(m.reshape(2, 2), 1, mode="reflect")
        b = np.zeros_like(m)
        b[1:] = m[:-1] * 2.0  # constants written: still a constant
        b += 1.0
        c = float(q.sum()) + float(e[1]) + float(p.sum()) + float(b.sum())
        return np.sum(x) * c

    q = np.polydiv(m, m[:2])[0].sum()
    e = np.histogram(m, bins=3)[1][1]
    p = np.pad(m.reshape(2, 2), 1, mode="reflect").sum()
    c = q + e + p + (2.0 * m[:-1]).sum() + 4.0  # by NumPy, by hand: d/dx_i sum(x) * c = c
    x = np.array([0.5, -1.0])
    np.testing.assert_allclose(mg.grad(f)(x, m), [c, c], rtol=1e-12)
    np.testing.assert_allclose(mg.jvp(lambda x: f(x, m), (x,), (np.array([1.0, 2.0]),))[1], 3 * c, rtol=1e-12)
    # c * sum(x) * x[0]: Hessian c [[2, 1], [1, 0]] (forward over reverse: the runs read it too)
    np.testing.assert_allclose(mg.hessian(lambda x, m: f(x, m) * x[0])(x, m), c * np.array([[2.0, 1.0], [1.0, 0.0]]),
                               rtol=1e-12)


def test_a_constant_buffer_that_received_a_traced_value_is_not_read_as_plain_values():
    def f(x, m):
        b = np.zeros_like(m)
        b[0] = m[0]  # a constant: b may still be read as plain values
        float(b[0])
        b[1] = x[0]  # traced: b now carries a derivative
        return float(b.sum())

    for run in (lambda: mg.grad(f)(np.ones(2), np.ones(2)),
                lambda: mg.jvp(f, (np.ones(2), np.ones(2)), (np.ones(2), np.zeros(2)))):
        with pytest.raises(mg.DifferentiationError, match="float"):
            run()

    def g(x, m):
        m[0] += x[0]  # the argument not differentiated, written with a traced value
        return float(m[0]) * x[1]

    with pytest.raises(mg.DifferentiationError, match="float"):
        mg.grad(g)(np.ones(2), np.ones(2))


def test_roots_split_by_rounding_and_close_roots():
    # (polyfit: p'(r) evaluated on p at a repeated root LAPACK split by rounding was off by its whole size:
    # the sum of the roots of (x - 1)**3, -c1/c0, got the gradient [33820, ...]). Oracle: d(-c1/c0)/dc =
    # [c1/c0**2, -1/c0, 0, ...], by hand. Roots closer than their rounding leaves a derivative each
    # (regress45: the group's mean derivative was a wrong number for one of them, 1 where it is 5e5) are
    # differentiated only through a function whose derivative is the same for each (their sum) in reverse
    # mode; forward mode, another function, or a second derivative is refused
    def total(c):
        return np.sum(np.roots(c)).real

    for c, tol, grouped in ((np.array([1.0, 0.0, -3.0, 2.0]), 1e-7, True),
                            (np.poly([1.0, 1.0 + 1e-6, 3.0]), 1e-8, True), (np.poly([1.0, 1.0 + 1e-4, -2.0]), 1e-10, False)):
        want = np.zeros_like(c)
        want[:2] = [c[1] / c[0] ** 2, -1.0 / c[0]]
        np.testing.assert_allclose(mg.grad(total)(c), want, atol=tol)
        fwd = mg.jacobian(total, mode="fwd")(c)
        if grouped:
            assert isinstance(fwd, mg.NotImplementedTangent) and "use reverse mode" in fwd.message
            for f in (lambda c: np.real(np.prod(np.roots(c))), lambda c: np.sum(np.roots(c).real ** 2),
                      lambda c: np.sum(np.roots(c).real * np.arange(1.0, np.size(c)))):
                g = mg.grad(f)(c)
                assert isinstance(g, mg.NotImplementedTangent) and "only the sum of such a group" in g.message
            assert isinstance(mg.hessian(total)(c), mg.NotImplementedTangent)
        else:
            np.testing.assert_allclose(fwd, want, atol=tol)
    # (regress46) a triple or higher root's group: its sum's rows cancel to 2e-6 of it, (x - 0.1)**5's to
    # nothing: refused; a simple root apart from a cluster is differentiated (dr/dc_k = -2**(5-k) / p'(2))
    for c in (np.array([1.0, -3.0, 3.0, -1.0]), np.poly([0.1] * 5)):
        assert isinstance(mg.grad(total)(c), mg.NotImplementedTangent)
    c = np.poly([1.0, 1.0 + 1e-7, 1.0 + 2e-7, 1.0 + 3e-7, 2.0])
    r = np.roots(c).real
    p2 = np.prod(2.0 - r[np.abs(r - 2.0) > 0.5])
    np.testing.assert_allclose(mg.grad(lambda c: np.max(np.roots(c).real))(c), -2.0 ** np.arange(5, -1, -1) / p2,
                               rtol=1e-6)
    # roots 1e-4 apart, each differentiated: dr/dc_k = -r**(3-k) / p'(r) at r = 1 + 1e-4, by hand
    c = np.poly([1.0, 1.0 + 1e-4, -2.0])
    r = np.sort(np.roots(c).real)[2]
    want = -r ** np.arange(3, -1, -1) / ((r - 1.0) * (r + 2.0))
    np.testing.assert_allclose(mg.grad(lambda c: np.max(np.roots(c).real))(c), want, rtol=1e-6)
    c = np.array([2.0, -1.0, 0.5, 3.0])  # (well apart: the second derivative, d2(-c1/c0) by hand)
    H = np.zeros((4, 4))
    H[0, 0], H[0, 1], H[1, 0] = -2 * c[1] / c[0] ** 3, 1 / c[0] ** 2, 1 / c[0] ** 2
    np.testing.assert_allclose(mg.hessian(total)(c), H, atol=1e-12)


def test_roots_a_simple_root_beside_an_exactly_repeated_one():
    # (polyfit: x**2 (x - 1)(x - 2), roots 2, 1, 0, 0: the largest root's derivative was refused for the
    # double root at 0). Reverse mode differentiates a function of the simple roots alone, as eig's values;
    # dr/dc_k = -r**(4-k) / p'(r) at r = 2, p'(2) = 4 (by hand); forward mode cannot tell, and refuses
    c = np.array([1.0, -3.0, 2.0, 0.0, 0.0])
    f = lambda c: np.max(np.roots(c).real)
    np.testing.assert_allclose(mg.grad(f)(c), [-4.0, -2.0, -1.0, -0.5, -0.25], rtol=1e-13)
    assert isinstance(mg.jacobian(f, mode="fwd")(c), mg.NotImplementedTangent)
    assert isinstance(mg.grad(lambda c: np.sum(np.roots(c).real))(c), mg.NotImplementedTangent)  # (reads 0, 0)


def test_poly1d_with_a_leading_zero_coefficient_is_refused():
    # (regress45: np.poly1d trims a leading zero coefficient; its derivative, x**2 here, was dropped: a
    # silent 0). np.polyval of the coefficients is differentiated: [x**2, x, 1] by hand
    c = np.array([0.0, 1.0, 2.0])
    for mode in ("rev", "fwd"):
        g = mg.jacobian(lambda c: np.poly1d(c)(0.3), mode=mode)(c)
        assert isinstance(g, mg.NotImplementedTangent) and "np.polyval(c, x)" in g.message
    np.testing.assert_allclose(mg.grad(lambda c: np.polyval(c, 0.3))(c), [0.09, 0.3, 1.0], rtol=1e-15)
    # every coefficient 0 (regress46: NumPy's plain [0.] replaced the trim, and its refusal: a silent 0)
    x = np.array([0.3, -1.2, 2.0])
    assert isinstance(mg.grad(lambda c: np.sum(np.poly1d(c)(x)))(np.zeros(3)), mg.NotImplementedTangent)
    assert np.array_equal(mg.vjp(lambda c: np.poly1d(c).coeffs, -np.zeros(3))[0], np.poly1d(-np.zeros(3)).coeffs)
    # a zero constant polynomial drops nothing: its derivative is kept (by hand: d/dc of the constant c is 1); a
    # product whose leading coefficients are 0 drops them, and is refused, not a silent 0 (regress108: np.poly1d
    # (0.0) * q, and scipy's lagrange with a zero datum, got 0 where the derivative is 1)
    assert mg.grad(lambda c: np.poly1d(c)(2.0))(0.0) == 1.0
    assert mg.jvp(lambda c: np.poly1d(c)(2.0), (0.0,), (1.0,))[1] == 1.0
    g = mg.grad(lambda c: (np.poly1d(c) * np.poly1d([1.0, -1.0]))(2.0))(0.0)
    assert isinstance(g, mg.NotImplementedTangent) and "np.polyval(c, x)" in g.message
    assert mg.grad(lambda c: (np.poly1d(c) * np.poly1d([1.0, -1.0]))(2.0))(0.5) == 1.0  # (x - 1 at 2)
    # a trim the values do not depend on (zeros by a constant factor) stays differentiated
    m = np.array([0.0, 1.0, 1.0])
    np.testing.assert_allclose(mg.grad(lambda a: np.sum(np.trim_zeros(a * m) ** 2))(np.array([0.5, 2.0, 3.0])),
                               [0.0, 4.0, 6.0], rtol=1e-15)


def test_traced_fill_values_and_period_over_plain_data():
    # (the numpyedge2 tester) np.nan_to_num(data, nan=c) and np.unwrap(phase, period=p) with plain data dispatch
    # on the data only, so NumPy's own code runs: refused, naming mnp's; mnp.nan_to_num wrote the traced fill
    # into a plain copy, and unwrap dropped the period (refused). Oracles: central differences, reverse vs forward
    import mutagrad.numpy as mnp

    data = np.array([np.nan, 1.0, np.inf, -np.inf, 2.0])
    phase = np.array([0.0, 1.5, 3.1, 4.4, 0.2, 1.9, 3.3])
    cases = [(lambda c: np.sum(mnp.nan_to_num(data, nan=c, posinf=2 * c, neginf=-c) ** 2), 0.7),
             (lambda p: np.sum(mnp.unwrap(phase, period=p) ** 2), 5.0),
             (lambda p: np.sum(np.unwrap(phase * p / 5.0, period=p, discont=0.6 * p) ** 3), 5.0)]
    for f, c in cases:
        fd = (f(c + 1e-6) - f(c - 1e-6)) / 2e-6
        np.testing.assert_allclose(mg.grad(f)(c), fd, rtol=1e-7)
        np.testing.assert_allclose(mg.jvp(f, (c,), (1.0,))[1], mg.grad(f)(c), rtol=1e-12)
    # the values are NumPy's, bit for bit
    v = mg.vjp(lambda p: mnp.unwrap(phase, period=p), 5.0)[0]
    assert np.array_equal(v, np.unwrap(phase, period=5.0))
    with pytest.raises(mg.TracerEscapeError, match="mnp"):
        mg.grad(lambda p: np.sum(np.unwrap(phase, period=p)))(5.0)


def _made_like(x):  # each creation function NumPy takes like= for, like a traced x, then written into
    b = np.empty((2, 3), like=x)
    b[0], b[1] = x, x ** 2
    z = np.zeros(3, like=x)
    z[1:] = 3 * x[:2]
    o = np.ones(3, like=x)
    o *= x
    total = np.sum(b ** 2) + np.sum(z ** 2) + np.sum(o ** 3) + np.sum(np.full(3, x[0], like=x) * x)
    total = total + np.sum(np.array([x[0], 2.0, x[2]], like=x) * x) + np.sum(np.eye(3, like=x) * x)
    total = total + np.sum(np.arange(3.0, like=x) * x) + np.sum(np.identity(3, like=x) @ x)
    return total + np.sum(np.fromiter((v * v for v in x), float, like=x)) + np.sum(np.asarray(x, like=x) ** 3)


def test_creation_with_like_of_a_traced_array_makes_a_traced_one():
    # (the maskedarrays tester) NumPy hands np.empty(shape, like=x) to x's protocol: it was refused as a
    # function without a rule; it makes what mutagrad.numpy's twin makes, a traced array
    x = np.array([0.3, 0.7, 1.1])
    check_grads(_made_like, x, modes=("fwd", "rev"))
    assert _made_like(x) == pytest.approx(mg.value_and_grad(_made_like)(x)[0], rel=1e-15)
