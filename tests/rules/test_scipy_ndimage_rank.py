"""mutagrad.scipy.ndimage's rank filters (rules/scipy/ndimage_rank.py) against SciPy's own functions:
every value bit for bit (and dtype) against a plain SciPy call; derivatives against central differences
of SciPy's function on plain arrays (at points where no window ties), forward against reverse
(check_grads), second order against differences of the gradient; the tie convention (an even share, as
np.max's) against one-sided differences and np.max of the same windows; the refusals."""
import numpy as np
import pytest

import mutagrad as mg
from mutagrad.core import Tracer
from mutagrad.errors import UnsupportedInputError
from mutagrad.testing import check_grads, numerical_grad
from tests._oracles import fd_hessian

nd = pytest.importorskip("scipy.ndimage")
import mutagrad.scipy.ndimage as mnd

MODES = ("reflect", "constant", "nearest", "mirror", "wrap", "grid-wrap", "grid-constant", "grid-mirror")
RNG = np.random.default_rng(0)
NAMES = ("minimum_filter1d", "maximum_filter1d", "minimum_filter", "maximum_filter", "rank_filter", "median_filter",
         "percentile_filter", "grey_erosion", "grey_dilation")


def _either(name, argnames, **kw):
    """scipy.ndimage.<name> when every argument is plain (the oracle's finite differences), mutagrad's
    when one is traced."""
    ours, theirs = getattr(mnd, name), getattr(nd, name)

    def f(*args):
        fn = ours if any(isinstance(a, Tracer) for a in args) else theirs
        return fn(**dict(zip(argnames, args)), **kw)

    return f


def _value(name, x, **kw):
    """The traced call's value is SciPy's: its bits (the signs of zeros too) and its dtype."""
    want = getattr(nd, name)(x, **kw)
    got = mg.vjp(lambda x: getattr(mnd, name)(x, **kw), x)[0]
    assert got.dtype == want.dtype, (name, kw)
    np.testing.assert_array_equal(got, want, err_msg=f"{name} {kw}")
    assert np.array_equal(np.signbit(got), np.signbit(want))


def _origins(k):
    return list(range(-(k // 2), (k - 1) // 2 + 1))


def test_exported_and_plain_calls_are_scipys():
    for name in NAMES:
        assert getattr(mnd, name) is not getattr(nd, name), name
    x = RNG.standard_normal((5, 6))
    out = np.empty((5, 6))
    assert mnd.maximum_filter(x, 3, output=out) is out  # (SciPy's own call: its result, unchanged)
    np.testing.assert_array_equal(out, nd.maximum_filter(x, 3))
    np.testing.assert_array_equal(mnd.median_filter(x, 3), nd.median_filter(x, 3))


# -- values ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("mode", MODES)
def test_values_are_scipys_every_mode_origin_and_window(mode):
    rng = np.random.default_rng(1)
    for shape in ((7,), (4, 5), (3, 4, 3)):
        for dtype in (np.float64, np.float32):
            x = rng.standard_normal(shape).astype(dtype)
            for k in (1, 2, 3, 4):
                for o in _origins(k):
                    fp = rng.random((k,) * len(shape)) < 0.6
                    fp.flat[0] = True
                    kw = {"mode": mode, "origin": o, "cval": 0.3}
                    _value("maximum_filter", x, size=k, **kw)
                    _value("minimum_filter", x, footprint=fp, **kw)
                    _value("maximum_filter1d", x, size=k, axis=0, **kw)
                    _value("minimum_filter1d", x, size=k, **kw)
                    _value("median_filter", x, footprint=fp, **kw)
                    _value("rank_filter", x, rank=-2 if fp.sum() > 1 else 0, size=k, **kw)
                    _value("percentile_filter", x, percentile=35, footprint=fp, **kw)
                    _value("grey_erosion", x, size=k, **kw)
                    _value("grey_dilation", x, footprint=fp, **kw)
                    if dtype == np.float64:
                        s = rng.standard_normal(fp.shape)
                        _value("grey_dilation", x, structure=s, footprint=fp, **kw)
                        _value("grey_erosion", x, structure=s, **kw)


def test_values_axes_modes_per_axis_output_dtypes_and_arrays():
    x = RNG.standard_normal((4, 5, 3))
    _value("maximum_filter", x, size=(3, 2), axes=(0, 2), mode=["wrap", "constant"], cval=-1.0, origin=(1, 0))
    _value("minimum_filter", x, footprint=[[1, 0, 1], [0, 1, 1]], axes=(1, 2), mode="mirror")
    _value("median_filter", x, size=3, axes=(2,))
    _value("rank_filter", x, rank=2, footprint=np.eye(3), axes=(0, 1), mode="nearest")
    _value("percentile_filter", x, percentile=-20, size=(2, 3), axes=(1, 0))
    _value("grey_dilation", x, size=(2, 3), axes=(0, 1), origin=(0, -1))
    _value("grey_erosion", x, structure=np.arange(4.0).reshape(2, 2) / 7, axes=(2, 0), mode="constant", cval=0.2)
    _value("maximum_filter", x, size=3, output=np.float32)
    _value("median_filter", x, size=2, output=np.float32)  # (N-dimensional: SciPy casts)
    _value("maximum_filter", x, size=(3, 1, 2))  # (an axis of size 1 is not filtered)
    _value("maximum_filter", np.arange(12.0).reshape(3, 4) % 5, size=1)
    _value("maximum_filter", np.array([[-0.0, 0.0], [0.0, -0.0]]), size=2)  # (tied zeros: SciPy's signs)
    _value("minimum_filter", np.float64(2.5), size=1)
    assert mg.grad(lambda x: np.sum(mnd.median_filter(x, 2)))(np.zeros((0, 3))).shape == (0, 3)
    # an output array: a plain one cannot hold the traced result (mutagrad's error, as for the linear
    # filters); a traced one is written, and returned
    for filt in (mnd.maximum_filter, mnd.uniform_filter):
        with pytest.raises(mg.WriteToPlainArrayError):
            mg.grad(lambda x, filt=filt: np.sum(filt(x, 2, output=np.zeros((4, 5, 3)))))(x)

    def into(x):
        o = np.zeros_like(x)
        r = mnd.median_filter(x, 3, output=o)
        assert r is o
        return np.sum(np.sin(o))

    check_grads(into, x)


def test_scipys_1d_fast_path_ranks_the_whole_box_and_is_followed():
    # (SciPy's 1-D rank filter ranks all footprint.size samples, ignoring the footprint's zeros, with the rank of
    # its count: mutagrad's selection is the same, so the value and the derivative are those of SciPy's function)
    x = RNG.standard_normal(12)
    fp = np.array([1, 0, 1, 1], bool)
    _value("rank_filter", x, rank=1, footprint=fp)
    _value("median_filter", x, footprint=fp, mode="wrap")
    f = _either("rank_filter", ("input",), rank=1, footprint=fp)
    check_grads(f, x)
    np.testing.assert_allclose(mg.jacobian(f)(x), _fd_jac(f, x), atol=1e-8)


def _fd_jac(f, x, h=1e-6):
    return np.stack([(f(x + h * e) - f(x - h * e)) / (2 * h) for e in np.eye(x.size)], axis=-1)


# -- derivatives ------------------------------------------------------------------------------------------

X2 = RNG.standard_normal((5, 6))
X3 = RNG.standard_normal((3, 4, 3))
S23 = RNG.standard_normal((2, 3))
CASES = [
    ("minimum_filter1d", ("input", "cval"), (X2, 0.1), {"size": 3, "axis": 0, "mode": "constant", "origin": 1}),
    ("maximum_filter1d", ("input",), (X2,), {"size": 4, "mode": "mirror"}),
    ("minimum_filter", ("input",), (X3,), {"size": (2, 3, 2), "mode": ["wrap", "nearest", "reflect"]}),
    ("maximum_filter", ("input", "cval"), (X2, -0.2), {"footprint": [[1, 0, 1], [0, 1, 1]], "mode": "grid-constant"}),
    ("rank_filter", ("input",), (X3,), {"rank": 3, "size": 2, "mode": "wrap", "origin": -1}),
    ("median_filter", ("input", "cval"), (X2, 0.05), {"size": 3, "mode": "constant"}),
    ("percentile_filter", ("input",), (X2,), {"percentile": 70, "footprint": np.eye(3), "mode": "grid-mirror"}),
    ("grey_erosion", ("input", "structure"), (X2, S23), {"mode": "nearest"}),
    ("grey_dilation", ("input", "structure", "cval"), (X2, S23, 0.4), {"mode": "constant", "origin": (0, 1)}),
    ("grey_dilation", ("input",), (X3,), {"size": (2, 1, 3), "mode": "reflect"}),
]


@pytest.mark.parametrize("name, argnames, args, kw", CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_derivatives_against_scipys_central_differences(name, argnames, args, kw):
    f = _either(name, argnames, **kw)
    want = getattr(nd, name)(**dict(zip(argnames, args)), **kw)
    np.testing.assert_array_equal(mg.vjp(f, *args)[0], want)
    check_grads(f, *args)  # (forward and reverse mode, against central differences of SciPy's function)
    wts = np.random.default_rng(2).standard_normal(want.shape)
    grads = mg.grad(lambda *a: np.sum(wts * f(*a)), argnums=tuple(range(len(args))))(*args)
    for i, g in enumerate(grads):
        fd = numerical_grad(lambda *a: np.sum(wts * f(*a)), args, (i,))[0]
        np.testing.assert_allclose(g, fd, rtol=1e-6, atol=1e-8, err_msg=f"{name} {argnames[i]}")


def test_cval_derivative_in_constant_mode():
    x = RNG.standard_normal((4, 5))
    # a large cval is the maximum of every window reaching the padding: each such output's derivative is 1
    g = mg.grad(lambda c: np.sum(mnd.maximum_filter(x, 3, mode="constant", cval=c)))(5.0)
    assert g == pytest.approx(14.0, rel=1e-14)  # (the 14 outputs on the border of a 4 x 5 image)
    for mode in ("constant", "grid-constant"):
        f = _either("minimum_filter", ("input", "cval"), size=(2, 3), mode=mode, origin=(-1, 1))
        check_grads(f, x, -0.3)
    for mode in ("reflect", "nearest", "wrap"):  # (cval is not read)
        assert mg.grad(lambda c, mode=mode: np.sum(mnd.maximum_filter(x, 3, mode=mode, cval=c)))(5.0) == 0.0


def test_second_order():
    x = RNG.standard_normal((3, 4))
    for name, kw in (("maximum_filter", {"size": 2, "mode": "wrap"}), ("median_filter", {"size": 3}),
                     ("grey_erosion", {"structure": S23, "mode": "constant", "cval": 0.3})):
        def smooth(v, name=name, kw=kw, filt=None):
            y = (filt or getattr(mnd, name))(np.reshape(v, (3, 4)), **kw)
            return np.sum(np.sin(y) * np.cos(0.5 * y) + y ** 3)

        theirs = getattr(nd, name)
        v = x.ravel()
        h = mg.hessian(smooth)(v)
        fd = np.stack([(mg.grad(smooth)(v + 1e-5 * e) - mg.grad(smooth)(v - 1e-5 * e)) / 2e-5 for e in np.eye(12)])
        np.testing.assert_allclose(h, fd, rtol=1e-5, atol=1e-6, err_msg=name)
        np.testing.assert_allclose(h, fd_hessian(lambda v: smooth(v, filt=theirs), v), rtol=1e-4, atol=1e-5)  # noqa: B023  (called within the iteration)
        check_grads(smooth, v, order=2)


# -- ties -------------------------------------------------------------------------------------------------

def test_a_tie_is_shared_evenly_as_np_max_shares_it():
    x = np.array([1.0, 3.0, 3.0, 2.0, 0.5, 0.5, 0.5])
    f = lambda x: mnd.maximum_filter1d(x, 3, mode="constant", cval=-1.0)
    jac = mg.jacobian(f)(x)
    # np.max of the same windows (the padded array's sliding windows): mutagrad's own tie convention
    windows = lambda x: np.lib.stride_tricks.sliding_window_view(
        np.pad(x, 1, constant_values=-1.0), 3)
    np.testing.assert_array_equal(jac, mg.jacobian(lambda x: np.max(windows(x), axis=-1))(x))
    np.testing.assert_array_equal(jac[1], [0, 0.5, 0.5, 0, 0, 0, 0])  # (3, 3 tie in output 1's window)
    np.testing.assert_array_equal(jac[5], [0, 0, 0, 0, 1 / 3, 1 / 3, 1 / 3])
    # against the one-sided differences of SciPy's function: each share lies between the one-sided slopes (a
    # maximum is convex: the slope up is the larger), a tie of two is their mean (the central difference), and
    # the shares of a tie add up to the slope of moving the tied elements together
    h = 1e-7
    plain = lambda x: nd.maximum_filter1d(x, 3, mode="constant", cval=-1.0)
    up = np.stack([(plain(x + h * e) - plain(x)) / h for e in np.eye(7)], axis=-1)
    down = np.stack([(plain(x) - plain(x - h * e)) / h for e in np.eye(7)], axis=-1)
    assert np.all(down - 1e-6 <= jac) and np.all(jac <= up + 1e-6)
    np.testing.assert_allclose(jac[1], (up[1] + down[1]) / 2, atol=1e-6)  # (output 1: 3, 3 tie)
    np.testing.assert_allclose(jac[6], (up[6] + down[6]) / 2, atol=1e-6)  # (output 6: 0.5, 0.5 tie)
    together = np.array([0, 0, 0, 0, 1.0, 1.0, 1.0])
    np.testing.assert_allclose(jac[5] @ together, (plain(x + h * together) - plain(x))[5] / h, rtol=1e-6)


def test_ties_with_cval_repeated_samples_and_ranks():
    x = np.array([[2.0, 1.0, 2.0], [0.0, 2.0, 1.0]])
    # cval ties the maximum: the share of the padded samples goes to cval
    gx, gc = mg.grad(lambda x, c: mnd.maximum_filter(x, 2, mode="constant", cval=c)[0, 0], argnums=(0, 1))(x, 2.0)
    np.testing.assert_array_equal(gx, [[1 / 4, 0, 0], [0, 0, 0]])
    assert gc == 3 / 4
    # 'nearest' repeats the edge sample: it gets one share per copy, as np.max of the padded windows gives it
    v = np.array([3.0, 3.0, 1.0])
    g = mg.grad(lambda v: mnd.maximum_filter1d(v, 3, mode="nearest")[0])(v)
    ref = mg.grad(lambda v: np.max(np.lib.stride_tricks.sliding_window_view(np.pad(v, 1, mode="edge"), 3)[0]))(v)
    np.testing.assert_array_equal(g, ref)
    np.testing.assert_array_equal(g, [2 / 3, 1 / 3, 0])
    # a tied median: the mean of the tied elements', as np.sort's (and np.median's) runs
    m = np.array([1.0, 2.0, 2.0, 5.0, 0.0])
    g = mg.grad(lambda m: mnd.median_filter(m, 3, mode="wrap")[2])(m)
    ref = mg.grad(lambda m: np.sort(m[1:4])[1])(m)
    np.testing.assert_array_equal(g, ref)
    np.testing.assert_array_equal(g, [0, 0.5, 0.5, 0, 0])


# -- refusals and SciPy's errors --------------------------------------------------------------------------

def test_refusals():
    x = RNG.standard_normal(6)
    with pytest.raises(UnsupportedInputError, match="NaN"):
        mg.grad(lambda x: np.sum(mnd.maximum_filter(x, 3)))(np.where(np.arange(6) == 2, np.nan, x))
    # SciPy's 1-D rank filter extends an axis shorter than the window otherwise: refused, not differentiated
    # (with a window of 5 reaching 4 samples before an axis of 3, SciPy's value reads memory outside the line)
    short, refused = np.array([0.3, -1.2, 0.8]), 0
    for mode, size, origin, rank in (("reflect", 5, 2, 1), ("mirror", 4, 1, 1), ("mirror", 5, -1, 2)):
        kw = {"size": size, "origin": origin, "mode": mode}
        lo = size // 2 + origin
        pad = {"reflect": "symmetric", "mirror": "reflect"}[mode]
        windows = np.lib.stride_tricks.sliding_window_view(np.pad(short, (lo, size - 1 - lo), mode=pad), size)
        if np.array_equal(nd.rank_filter(short, rank, **kw), np.sort(windows, axis=-1)[:, rank]):
            _value("rank_filter", short, rank=rank, **kw)
            continue
        refused += 1
        with pytest.raises(UnsupportedInputError, match=f"is not the value of rank {rank} of its window"):
            mg.grad(lambda x: np.sum(mnd.rank_filter(x, rank, **kw)))(short)  # noqa: B023  (called within the iteration)
    assert refused
    # and writes another output dtype as reinterpreted memory
    with pytest.raises(UnsupportedInputError, match="reinterpreted memory"):
        mg.grad(lambda x: np.sum(mnd.median_filter(x, 3, output=np.float64)))(x.astype(np.float32))
    with pytest.raises(UnsupportedInputError, match="float64 input"):
        mg.grad(lambda x: np.sum(mnd.grey_dilation(x, structure=[0.1, 0.2])))(x.astype(np.float32))
    # SciPy's own errors, on traced arguments too
    for call, err in ((lambda x: mnd.maximum_filter(x), RuntimeError),  # (no footprint)
                      (lambda x: mnd.minimum_filter1d(x, 3, origin=2), ValueError),
                      (lambda x: mnd.rank_filter(x, 7, size=3), RuntimeError),
                      (lambda x: mnd.median_filter(x, footprint=np.zeros(3)), (RuntimeError, ValueError)),
                      (lambda x: mnd.maximum_filter(x + 0j, 3), TypeError),
                      (lambda x: mnd.grey_erosion(x), ValueError)):
        with pytest.raises(err):
            mg.grad(lambda x, call=call: np.sum(np.real(call(x))))(x)


def test_a_256_by_256_image_with_a_5_by_5_window():
    import tracemalloc

    im = np.random.default_rng(4).standard_normal((256, 256))

    def nms(im):  # (Harris-style non-maximum suppression)
        peak = mnd.maximum_filter(im, size=5, mode="constant", cval=-np.inf)
        return np.sum(np.where(im == peak, im, 0.0) ** 2) + np.sum(mnd.median_filter(im, 5) ** 2)

    tracemalloc.start()
    g = mg.grad(nms)(im)
    peak_bytes = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak_bytes < 200e6, peak_bytes
    keep = im == nd.maximum_filter(im, size=5, mode="constant", cval=-np.inf)
    med = nd.median_filter(im, 5)
    # d/dim of sum(med ** 2): each output's 2 * med sent to the element it selected
    sel = np.zeros_like(im)
    idx = np.arange(im.size).reshape(im.shape)
    src = np.pad(idx, 2, mode="symmetric")
    win = np.lib.stride_tricks.sliding_window_view(src, (5, 5)).reshape(256, 256, 25)
    vals = im.ravel()[win]
    pick = np.take_along_axis(win, np.argmax(vals == med[..., None], axis=-1)[..., None], -1)[..., 0]
    np.add.at(sel.ravel(), pick.ravel(), 2 * med.ravel())
    np.testing.assert_allclose(g, 2 * im * keep + sel, rtol=1e-12, atol=1e-12)


def test_axes_out_of_order_with_a_footprint_or_per_axis_sizes_are_refused():
    # (newrules) SciPy applies a footprint and per-axis origins in the axes' own order in some filters and in the
    # given order in others; the window read here was the given order's, so a derivative went to another element
    # silently (or an internal IndexError escaped). Refused now; in increasing order (or uniform values) it is the
    # derivative of SciPy's value (central differences of SciPy's)
    x = np.random.default_rng(7).random((5, 6))
    fp = np.array([[1, 0, 0], [0, 0, 1]], bool)
    for name, kw in (("maximum_filter", {"footprint": fp, "origin": (0, -1), "axes": (1, 0)}),
                     ("median_filter", {"size": (2, 3), "origin": (0, 1), "axes": (1, 0)}),
                     ("grey_dilation", {"footprint": fp, "axes": (1, 0)})):
        with pytest.raises(UnsupportedInputError, match=r"axes=\(1, 0\), not in increasing order"):
            mg.grad(lambda z, name=name, kw=kw: np.sum(getattr(mnd, name)(z, **kw) ** 2))(x)
    for kw in ({"size": 3, "axes": (1, 0)}, {"footprint": fp, "origin": (0, -1), "axes": (0, 1)}):
        g = mg.grad(lambda z, kw=kw: np.sum(mnd.maximum_filter(z, **kw) ** 2))(x)
        want = np.array([(np.sum(nd.maximum_filter(x + 1e-6 * e, **kw) ** 2)
                          - np.sum(nd.maximum_filter(x - 1e-6 * e, **kw) ** 2)) / 2e-6
                         for e in np.eye(x.size).reshape(-1, *x.shape)]).reshape(x.shape)
        np.testing.assert_allclose(g, want, rtol=1e-6, atol=1e-8)
