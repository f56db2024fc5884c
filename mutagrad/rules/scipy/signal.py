"""scipy.signal.lfilter: y with a * y = b * x + a[0] zi (causal convolutions along the
axis, truncated to its length; zi placed at the first samples), the direct form II
transposed filter SciPy computes, differentiated in b, a, x and zi.

Differentiating the relation (L_{c,a} v = lfilter(c, a, v), a linear map of v):
ẏ = L_{b,a} ẋ (with żi) + L_{1,a}(ḃ * x - ȧ * y + ȧ[0] zi), and, transposed,
x̄ = L_{b,a}ᴴ ȳ, with w = L_{1,a}ᴴ ȳ: b̄[k] = Σ w[n] x̄[n-k], ā[k] = -Σ w[n] ȳ[n-k]
(conjugated operands, cotangent convention of rules/linalg.py; ā[0] also reads zi),
z̄i = ā0ᴴ w[:len(zi)]. Lᴴ is the filter run backwards in time: flip ∘ L_{c̄,ā} ∘ flip.
Every rule applies ``lfilter_p`` itself, so every order is available.

The final state zf (returned with ``zi``) is the filter's state after the last
sample: run on, with no input, the filter gives M - 1 more outputs r (M the longer
coefficient length) with ā * r = zf at its first samples, so zf[m] = Σ_k ā[k]
r[m - k] (ā = a / a[0]). Its value is SciPy's; its derivative is that expression's,
through lfilter's own rules on the extended signal (``_zf_rrule``, ``_zf_frule``).
"""
from __future__ import annotations

import numpy as np

from ...core import Tracer, bind, bottom, get_primitive
from ...registry import conj_if_complex as _cj
from ...registry import refusing_identity
from ...tangents import NoTangent, Thunk, ZeroTangent, is_zero
from .linalg import _has_tracer
from .sparse import _dense


def _lfilter(b, a, x, zi, *, axis=-1):
    import scipy.signal as ss

    return ss.lfilter(b, a, x, axis=axis) if zi is None else ss.lfilter(b, a, x, axis=axis, zi=zi)[0]


def _lfilter_zf(b, a, x, zi, *, axis=-1):
    import scipy.signal as ss

    return ss.lfilter(b, a, x, axis=axis, zi=zi)[1]


lfilter_p = get_primitive(_lfilter, "scipy.signal.lfilter")
lfilter_zf_p = get_primitive(_lfilter_zf, "scipy.signal.lfilter (final state zf)")
_ONE = np.ones(1)


def _lf(b, a, x, zi=None, axis=-1):
    return bind(lfilter_p, (b, a, x, zi), {"axis": axis})


def lfilter(b, a, x, axis=-1, zi=None):
    """``scipy.signal.lfilter``, differentiated in ``b``, ``a``, ``x`` and ``zi``.

    >>> import numpy as np, mutagrad as mg
    >>> from mutagrad.scipy.signal import lfilter
    >>> mg.grad(lambda x: lfilter([1.0], [1.0, -0.5], x)[-1])(np.ones(3))  # y[2] = x2 + x1/2 + x0/4
    array([0.25, 0.5 , 1.  ])
    """
    b, a = _coefficients(b), _coefficients(a)
    x = _dense(x)
    zi = None if zi is None else _dense(zi)
    if zi is None:
        return _lf(b, a, x, None, axis)
    return _lf(b, a, x, zi, axis), bind(lfilter_zf_p, (b, a, x, zi), {"axis": axis})


def _coefficients(c):
    """A 1-d array of coefficients, from a list that may hold traced numbers ([1.0, -p]) too."""
    return np.atleast_1d(_dense(c))


def _along(v, start, stop, axis, step=None):
    """``v[start:stop:step]`` along ``axis`` (SciPy's axis_slice)."""
    idx = [slice(None)] * np.ndim(v)
    idx[axis] = slice(start, stop, step)
    return v[tuple(idx)]


def _padded_zi(zi, n, axis):
    """zi followed by zeros along the axis, as long as the signal (n samples: cut if shorter)."""
    m = np.shape(zi)[axis]
    if m >= n:
        return _along(zi, 0, n, axis)
    shape = list(np.shape(zi))
    shape[axis] = n - m
    return np.concatenate([zi, np.zeros_like(zi, shape=tuple(shape))], axis=axis)


def _backwards(c, a, g, axis):
    """L_{c,a}ᴴ g: the filter with conjugated coefficients run backwards in time."""
    return np.flip(_lf(_cj(c), _cj(a), np.flip(g, axis), None, axis), axis)


def _correlations(w, v, k, n, axis):
    """Σ w[j] conj(v[j - i]) over j and every other axis, for i < k (a vector of k)."""
    return [np.sum(_along(w, i, n, axis) * _cj(_along(v, 0, n - i, axis))) if i < n else np.zeros(())
            for i in range(k)]


def _lfilter_frule(primals, tangents, *, axis=-1):
    (b, a, x, zi), (tb, ta, tx, tzi) = primals, tangents
    y = _lf(b, a, x, zi, axis)
    n = np.shape(x)[axis]
    ty = ZeroTangent()
    tzi = ZeroTangent() if zi is None or tzi is None or is_zero(tzi) else tzi
    if not is_zero(tx) or not is_zero(tzi):
        ty = _lf(b, a, np.zeros_like(y) if is_zero(tx) else tx, None if is_zero(tzi) else tzi, axis)
    v = ZeroTangent()
    if not is_zero(tb):
        v = _lf(tb, _ONE, x, None, axis)
    if not is_zero(ta):
        v = -_lf(ta, _ONE, y, None, axis) if is_zero(v) else v - _lf(ta, _ONE, y, None, axis)
        if zi is not None:
            v = v + ta[0] * _padded_zi(zi, n, axis)
    if not is_zero(v):
        t = _lf(_ONE, a, v, None, axis)
        ty = t if is_zero(ty) else ty + t
    return y, ty


def _lfilter_rrule(b, a, x, zi, *, axis=-1):
    y = _lf(b, a, x, zi, axis)

    def pullback(g):
        if is_zero(g):
            return ZeroTangent(), ZeroTangent(), ZeroTangent(), (NoTangent() if zi is None else ZeroTangent())
        n = np.shape(x)[axis]
        xbar = _backwards(b, a, g, axis)
        w = _backwards(_ONE, a, g, axis)
        bbar = np.stack(_correlations(w, x, np.shape(b)[0], n, axis))
        abar = -np.stack(_correlations(w, y, np.shape(a)[0], n, axis))
        zbar = NoTangent()
        if zi is not None:
            m = np.shape(zi)[axis]
            head = _along(w, 0, min(n, m), axis)
            if n < m:
                head = np.concatenate([head, np.zeros_like(head, shape=_with(np.shape(zi), axis, m - n))], axis=axis)
            zbar = _cj(a[0]) * head
            a0 = np.sum(w * _cj(_padded_zi(zi, n, axis)))
            abar = abar + np.eye(1, np.shape(a)[0])[0] * a0
        return bbar, abar, xbar, zbar

    return y, pullback


def _with(shape, axis, k):
    s = list(shape)
    s[axis] = k
    return tuple(s)


lfilter_p.rrule, lfilter_p.frule = _lfilter_rrule, _lfilter_frule


def _extended(x, m, axis):
    """The signal followed by m zeros along the axis (the filter run on with no input)."""
    return np.concatenate([x, np.zeros_like(x, shape=_with(np.shape(x), axis, m))], axis=axis)


def _convolved_head(c, r, m, axis):
    """Σ_k c[k] r[j - k] for j < m (the first m samples of c * r along the axis)."""
    return np.concatenate([sum(c[k] * _along(r, j - k, j - k + 1, axis) for k in range(min(j + 1, np.shape(c)[0])))
                           for j in range(m)], axis=axis)


def _zf_rrule(b, a, x, zi, *, axis=-1):
    zf = bind(lfilter_zf_p, (b, a, x, zi), {"axis": axis})
    m, n = np.shape(zf)[axis], np.shape(x)[axis]

    def pullback(g):
        # zf = ā * r (its first m samples; ā = a / a[0]) with r the last m samples of
        # ye = lfilter(b, a, [x, 0]), so r̄[i] = Σ_k conj(ā[k]) g[i + k], ¯ā[k] = Σ_j g[j] conj(r[j - k]),
        # and ye's pullback (ȳe: zeros, then r̄) gives the rest.
        if is_zero(g) or m == 0:
            return (ZeroTangent(),) * 4
        na = np.shape(a)[0]
        ye, pb = _lfilter_rrule(b, a, _extended(x, m, axis), zi, axis=axis)
        r, an = _along(ye, n, n + m, axis), a / a[0]
        rbar = np.concatenate([sum(_cj(an[k]) * _along(g, i + k, i + k + 1, axis) for k in range(min(na, m - i)))
                               for i in range(m)], axis=axis)
        anbar = np.stack([np.sum(_along(g, k, m, axis) * _cj(_along(r, 0, m - k, axis))) if k < m else np.zeros(())
                          for k in range(na)])
        a0 = _cj(a[0])
        abar = anbar / a0 - np.eye(1, na)[0] * (np.sum(anbar * _cj(a)) / (a0 * a0))
        bbar, abar_e, xbar, zbar = pb(np.concatenate([np.zeros_like(g, shape=_with(np.shape(g), axis, n)), rbar],
                                                     axis=axis))
        return bbar, abar + abar_e, _along(xbar, 0, n, axis), zbar

    return zf, pullback


def _zf_frule(primals, tangents, *, axis=-1):
    (b, a, x, zi), (tb, ta, tx, tzi) = primals, tangents
    zf = bind(lfilter_zf_p, primals, {"axis": axis})
    m, n = np.shape(zf)[axis], np.shape(x)[axis]
    if m == 0:
        return zf, ZeroTangent()
    tx = tx if is_zero(tx) else _extended(tx, m, axis)
    ye, tye = _lfilter_frule((b, a, _extended(x, m, axis), zi), (tb, ta, tx, tzi), axis=axis)
    an = a / a[0]
    tzf = ZeroTangent() if is_zero(tye) else _convolved_head(an, _along(tye, n, n + m, axis), m, axis)
    if not is_zero(ta):  # ā's tangent: (ȧ - ā ȧ[0]) / a[0]
        t = _convolved_head((ta - an * ta[0]) / a[0], _along(ye, n, n + m, axis), m, axis)
        tzf = t if is_zero(tzf) else tzf + t
    return zf, tzf


lfilter_zf_p.rrule, lfilter_zf_p.frule = _zf_rrule, _zf_frule


# -- convolutions ------------------------------------------------------------------------
#
# convolve, correlate, fftconvolve, oaconvolve, convolve2d and correlate2d: each is its own
# primitive whose value is SciPy's call (its bits), and each is, in exact arithmetic, a window
# of one full linear convolution along the convolved axes (broadcast along the others):
#
#     y = P(W(conv(E(in1), K(in2))))
#
# K(v) = v, or rc(v) = conj(flip(v)) for the correlations; E(u) = u, or (convolve2d and
# correlate2d with boundary='wrap', 'symm' or a nonzero fillvalue, outside 'valid' mode) u
# padded by len(in2) - 1 on each side as np.pad pads it, after which the convolution is
# 'valid'; W the window of the output: all of it ('full'), the centred len(in1) ('same': the
# start rounded down, correlate2d's rounded up), the |len(in1) - len(in2)| + 1 samples that
# use no padding ('valid'); P = conj for correlate2d's 'valid' mode with in2 the larger, which
# SciPy computes as the flipped correlation of the swapped inputs without conjugating it
# (every other case: identity). Each is real-linear in each input, so
#
#     ẏ = f(u̇, v) + f(u, v̇)                    (f(u̇, v) with fillvalue 0: E is affine)
#
# and, with F̄ = W^H P^H ȳ (ȳ in the full output's zeros), the adjoint of a convolution being
# a correlation, i.e. a convolution with rc of the other operand:
#
#     ū = E^H conv(F̄, rc(K(v)))     ('valid' without padding; 'full', then folded, with it)
#     v̄ = K^H conv(F̄, rc(E(u)), 'valid')                         (K^H = K: rc is self-adjoint)
#
# each convolution computed by the family's own differentiable function (convolve with the
# call's method, fftconvolve along the same axes, convolve2d), so every order is available.


def _scipy_convolution(name):
    def fn(in1, in2, **kw):
        import scipy.signal as ss

        return getattr(ss, name)(in1, in2, **kw)

    fn.__name__ = fn.__qualname__ = f"_{name}"
    return fn


CONVOLUTIONS = ("convolve", "correlate", "fftconvolve", "oaconvolve", "convolve2d", "correlate2d")
_CONV_P = {name: get_primitive(_scipy_convolution(name), f"scipy.signal.{name}") for name in CONVOLUTIONS}


def _bind_conv(name, in1, in2, kw):
    return bind(_CONV_P[name], (_dense(in1), _dense(in2)), kw)


def convolve(in1, in2, mode="full", method="auto"):
    """``scipy.signal.convolve`` (N-dimensional), differentiated in ``in1`` and ``in2``.

    >>> import numpy as np, mutagrad as mg
    >>> from mutagrad.scipy.signal import convolve
    >>> mg.grad(lambda k: convolve(np.array([1.0, 2.0, 3.0]), k, mode="valid")[0])(np.array([1.0, 1.0]))
    array([2., 1.])
    """
    return _bind_conv("convolve", in1, in2, {"mode": mode, "method": method})


def correlate(in1, in2, mode="full", method="auto"):
    """``scipy.signal.correlate`` (N-dimensional; ``in2`` conjugated), differentiated in both inputs.

    >>> import numpy as np, mutagrad as mg
    >>> from mutagrad.scipy.signal import correlate
    >>> mg.grad(lambda k: correlate(np.array([1.0, 2.0, 3.0]), k, mode="valid")[0])(np.array([1.0, 1.0]))
    array([1., 2.])
    """
    return _bind_conv("correlate", in1, in2, {"mode": mode, "method": method})


def fftconvolve(in1, in2, mode="full", axes=None):
    """``scipy.signal.fftconvolve`` (along ``axes``, broadcast along the others), differentiated in both inputs.

    >>> import numpy as np, mutagrad as mg
    >>> from mutagrad.scipy.signal import fftconvolve
    >>> g = mg.grad(lambda k: fftconvolve(np.array([1.0, 2.0, 3.0]), k, mode="valid")[0])(np.ones(2))
    >>> np.round(g, 12)  # (to rounding: the FFT's)
    array([2., 1.])
    """
    return _bind_conv("fftconvolve", in1, in2, {"mode": mode, "axes": _plain_axes(axes)})


def oaconvolve(in1, in2, mode="full", axes=None):
    """``scipy.signal.oaconvolve`` (overlap-add, along ``axes``), differentiated in both inputs.

    >>> import numpy as np, mutagrad as mg
    >>> from mutagrad.scipy.signal import oaconvolve
    >>> g = mg.grad(lambda k: oaconvolve(np.array([1.0, 2.0, 3.0]), k, mode="valid")[0])(np.ones(2))
    >>> np.round(g, 12)  # (to rounding: the FFT's)
    array([2., 1.])
    """
    return _bind_conv("oaconvolve", in1, in2, {"mode": mode, "axes": _plain_axes(axes)})


def convolve2d(in1, in2, mode="full", boundary="fill", fillvalue=0):
    """``scipy.signal.convolve2d`` (every boundary), differentiated in ``in1`` and ``in2``.

    >>> import numpy as np, mutagrad as mg
    >>> from mutagrad.scipy.signal import convolve2d
    >>> mg.grad(lambda k: np.sum(convolve2d(np.eye(2), k)))(np.ones((1, 2)))  # sum(in1) each
    array([[2., 2.]])
    """
    return _conv2d("convolve2d", in1, in2, mode, boundary, fillvalue)


def correlate2d(in1, in2, mode="full", boundary="fill", fillvalue=0):
    """``scipy.signal.correlate2d`` (every boundary; ``in2`` conjugated), differentiated in both inputs.

    >>> import numpy as np, mutagrad as mg
    >>> from mutagrad.scipy.signal import correlate2d
    >>> mg.grad(lambda k: correlate2d(np.eye(2), k, mode="valid")[0, 0])(np.ones((2, 2)))
    array([[1., 0.],
           [0., 1.]])
    """
    return _conv2d("correlate2d", in1, in2, mode, boundary, fillvalue)


def _plain_axes(axes):
    return axes if axes is None or np.ndim(axes) == 0 else tuple(axes)


def _conv2d(name, in1, in2, mode, boundary, fillvalue):
    """convolve2d / correlate2d; a traced ``fillvalue`` (read by SciPy only with boundary 'fill' outside
    'valid' mode) through the padding it stands for: mode 'full' is the 'valid' call on in1 padded
    with it by len(in2) - 1 on each side, mode 'same' that result's centred window (as SciPy centres
    it, correlate2d's rounded up), differentiated in the fill value too."""
    if isinstance(fillvalue, Tracer):
        # (SciPy's own checks of the fill value: a scalar, castable to the output's type)
        import warnings

        import scipy.signal as ss

        dt = np.result_type(bottom(in1), bottom(in2))
        with warnings.catch_warnings():  # (its warnings are the call's own, below)
            warnings.simplefilter("ignore")
            getattr(ss, name)(np.zeros((1, 1), dt), np.ones((1, 1), dt), mode=mode, boundary=boundary,
                              fillvalue=bottom(fillvalue))
        if mode == "valid" or boundary not in _FILL:
            fillvalue = 0  # (not read)
        else:
            from ...numpy import pad

            s1, s2 = np.shape(in1), np.shape(in2)
            if len(s1) != 2 or len(s2) != 2:  # (SciPy's error)
                return _bind_conv(name, in1, in2, {"mode": mode, "boundary": boundary, "fillvalue": 0})
            full = _bind_conv(name, pad(in1, [(k - 1, k - 1) for k in s2], constant_values=fillvalue), in2,
                              {"mode": "valid", "boundary": "fill", "fillvalue": 0})
            if mode == "full":
                return full
            up = 1 if name == "correlate2d" else 0
            start = [(k - 1 + up) // 2 for k in s2]  # (the full output's extra k - 1, centred)
            return full[start[0]:start[0] + s1[0], start[1]:start[1] + s1[1]]
    return _bind_conv(name, in1, in2, {"mode": mode, "boundary": boundary, "fillvalue": fillvalue})


_WRAPPERS = {"convolve": convolve, "correlate": correlate, "fftconvolve": fftconvolve, "oaconvolve": oaconvolve,
             "convolve2d": convolve2d, "correlate2d": correlate2d}
_FILL = ("fill", "pad")
_NP_PAD = {"wrap": "wrap", "circular": "wrap", "symm": "symmetric", "symmetric": "symmetric"}  # SciPy's names


class _Layout:
    """Where a call's output sits in the full convolution: the plain geometry of the model above."""

    __slots__ = ("axes", "conj_out", "flip_in2", "full", "kw", "name", "pad", "shape", "start")

    def __init__(self, name, kw, s1, s2, out_shape):
        nd = len(s1)
        mode = kw["mode"]
        if name in ("fftconvolve", "oaconvolve"):
            axes = kw.get("axes")
            axes = range(nd) if axes is None else np.atleast_1d(axes).tolist()
            self.axes = tuple(sorted({int(a) % nd for a in axes})) if nd else ()
        else:
            self.axes = tuple(range(nd))
        self.name, self.kw, self.shape = name, kw, tuple(out_shape)
        self.flip_in2 = name in ("correlate", "correlate2d")
        two_d = name in ("convolve2d", "correlate2d")
        boundary = kw.get("boundary", "fill") if two_d else "fill"
        self.pad = None
        if two_d and mode != "valid" and (boundary not in _FILL or kw.get("fillvalue", 0) != 0):
            self.pad = _NP_PAD.get(boundary, "constant")
        swapped = mode == "valid" and nd and not all(s1[a] >= s2[a] for a in self.axes)
        self.conj_out = name == "correlate2d" and swapped
        self.full = tuple(s1[d] + s2[d] - 1 if d in self.axes else max(s1[d], s2[d]) for d in range(nd))
        up = 1 if name == "correlate2d" and mode == "same" else 0
        self.start = tuple((f - o + up) // 2 for f, o in zip(self.full, self.shape))

    def conv(self, a, b, mode, method):
        """The family's differentiable convolution, no boundary: convolve, fftconvolve, convolve2d."""
        if self.name in ("convolve", "correlate"):
            return convolve(a, b, mode, method)
        if self.name in ("fftconvolve", "oaconvolve"):
            return fftconvolve(a, b, mode, self.axes)
        return convolve2d(a, b, mode)

    def correlation(self, g, u, n2):
        """conv(g, rc(u), 'valid'), n2 samples along the axes, from FFTs of g's size, not of
        len(g) + len(u) - 1: the correlation is circular, and where it wraps round it meets
        u's zero padding (N >= len(g) = len(u) + n2 - 1 samples)."""
        from scipy.fft import next_fast_len

        real = not (np.iscomplexobj(bottom(g)) or np.iscomplexobj(bottom(u)))
        n = [next_fast_len(np.shape(g)[a], real) for a in self.axes]
        fwd, inv = (np.fft.rfftn, np.fft.irfftn) if real else (np.fft.fftn, np.fft.ifftn)
        c = inv(fwd(g, n, self.axes) * np.conj(fwd(u, n, self.axes)), n, self.axes)
        return c[tuple(slice(0, n2[d]) if d in self.axes else slice(None) for d in range(np.ndim(c)))]

    def rc(self, x):
        return _cj(np.flip(x, self.axes)) if self.axes else _cj(x)

    def padded(self, u, s2):
        widths = [(k - 1, k - 1) for k in s2]
        if self.pad == "constant":
            return np.pad(u, widths, constant_values=self.kw.get("fillvalue", 0))
        return np.pad(u, widths, mode=self.pad)

    def fold(self, g, n1, s2):
        """E^H for the periodic and symmetric extensions: each padded sample's cotangent added to
        its source, a run of consecutive sources (ascending or, reflected, descending) at a time."""
        for d, (n, k) in enumerate(zip(n1, s2)):
            src = np.pad(np.arange(n), k - 1, mode=self.pad)
            total, j = None, 0
            while j < len(src):
                step = int(src[j + 1] - src[j]) if j + 1 < len(src) else 1
                step = step if step in (1, -1) else 1
                e = j + 1
                while e < len(src) and src[e] - src[e - 1] == step:
                    e += 1
                run = _along(g, j, e, d)
                lo = int(src[j] if step == 1 else src[e - 1])
                if step == -1:
                    run = np.flip(run, d)
                widths = [(0, 0)] * np.ndim(g)
                widths[d] = (lo, n - lo - (e - j))
                piece = np.pad(run, widths) if lo or e - j < n else run
                total = piece if total is None else total + piece
                j = e
            g = total
        return g


def _conv_cotangents(lay, u, v, g):
    """(ū, v̄) of the model above, each a Thunk."""
    s1, s2 = np.shape(u), np.shape(v)
    if lay.conj_out:
        g = _cj(g)
    if lay.shape != lay.full:
        g = np.pad(g, [(s, f - s - o) for s, f, o in zip(lay.start, lay.full, lay.shape)])
    k = lay.rc(v) if lay.flip_in2 else v
    method = "direct" if lay.name in ("convolve2d", "correlate2d") else "fft"
    if lay.name in ("convolve", "correlate"):  # the primal's method (its cost): 'auto' as SciPy chose it
        import scipy.signal as ss

        method = lay.kw["method"]
        if method == "auto" and np.ndim(u):
            method = ss.choose_conv_method(bottom(u), bottom(v), lay.kw["mode"])

    def ubar():
        if lay.pad in ("wrap", "symmetric"):
            c = lay.fold(lay.conv(g, lay.rc(k), "full", method), s1, s2)
        else:
            c = lay.conv(g, lay.rc(k), "valid", method)
        return _projected(c, u)

    def vbar():
        if method == "fft" and np.ndim(u):
            c = lay.correlation(g, u, s2)
        else:
            c = lay.conv(g, lay.rc(u if lay.pad is None else lay.padded(u, s2)), "valid", method)
        return _projected(lay.rc(c) if lay.flip_in2 else c, v)

    return Thunk(ubar), Thunk(vbar)


def _projected(c, x):
    """A cotangent summed to ``x``'s shape (fftconvolve's broadcast axes), real for a real ``x``."""
    from ...tangents import unbroadcast

    c = unbroadcast(c, np.shape(x))
    return c if np.iscomplexobj(bottom(x)) or not np.iscomplexobj(bottom(c)) else np.real(c)


def _conv_rrule(name):
    def rule(in1, in2, **kw):
        y = bind(_CONV_P[name], (in1, in2), kw)

        def pullback(g):
            if is_zero(g) or np.size(y) == 0:
                return ZeroTangent(), ZeroTangent()
            return _conv_cotangents(_Layout(name, kw, np.shape(in1), np.shape(in2), np.shape(y)), in1, in2, g)

        return y, pullback

    return rule


def _conv_frule(name):
    def rule(primals, tangents, **kw):
        (u, v), (tu, tv) = primals, tangents
        f = _WRAPPERS[name]
        y = bind(_CONV_P[name], (u, v), kw)
        ty = ZeroTangent()
        if not is_zero(tu):
            ty = f(tu, v, **(dict(kw, fillvalue=0) if "fillvalue" in kw else kw))  # (E's linear part)
        if not is_zero(tv):
            t = f(u, tv, **kw)
            ty = t if is_zero(ty) else ty + t
        return y, ty

    return rule


for _name, _p in _CONV_P.items():
    _p.rrule, _p.frule = _conv_rrule(_name), _conv_frule(_name)


# -- filters built from lfilter ----------------------------------------------------------
#
# lfilter_zi, filtfilt, sosfilt, sosfilt_zi, sosfiltfilt and hilbert, written as SciPy 1.17
# writes them (its padding, initial conditions, axis handling and checks) with the
# differentiable pieces: the lfilter primitive above (with zi), np.linalg.solve for
# lfilter_zi's linear system, np.linalg.lstsq for Gustafsson's initial states, and scipy.fft
# (differentiated as written) for hilbert. Every order, both modes; derivatives in the signal
# and the coefficients (b, a, sos) and sosfilt's zi. A call with nothing traced is SciPy's own.
#
# A section of ``sos`` is filtered as lfilter(sos[s, :3], sos[s, 3:]) filters it, divided by
# sos[s, 3] (SciPy's sosfilt requires it to be 1 and never reads it): the derivative in that
# column is that of B(z) / A(z) with the whole of A, the one sosfilt_zi's formula has.

COMPOSITES = tuple(f"scipy.signal.{name}" for name in (
    "filtfilt", "hilbert", "lfilter_zi", "sosfilt", "sosfilt_zi", "sosfiltfilt"))


def _ss():
    import scipy.signal as ss

    return ss


def _traced(*values):
    """Whether any of ``values`` (or of the lists, tuples and dicts among them) is traced."""
    return _has_tracer(values)


def _odd_ext(x, n, axis):
    """SciPy's odd_ext: x extended by n samples at each end, reflected through the end samples."""
    if n < 1:
        return x
    left_end, left_ext = _along(x, 0, 1, axis), _along(x, n, 0, axis, -1)
    right_end, right_ext = _along(x, -1, None, axis), _along(x, -2, -(n + 2), axis, -1)
    return np.concatenate((2 * left_end - left_ext, x, 2 * right_end - right_ext), axis=axis)


def _even_ext(x, n, axis):
    """SciPy's even_ext: x extended by n samples at each end, mirrored about the end samples."""
    if n < 1:
        return x
    return np.concatenate((_along(x, n, 0, axis, -1), x, _along(x, -2, -(n + 2), axis, -1)), axis=axis)


def _const_ext(x, n, axis):
    """SciPy's const_ext: x extended by n copies of each end sample."""
    if n < 1:
        return x
    ones = np.ones(_with((1,) * np.ndim(x), axis, n), dtype=bottom(x).dtype)
    return np.concatenate((ones * _along(x, 0, 1, axis), x, ones * _along(x, -1, None, axis)),
                          axis=axis)


_EXTENSIONS = {"odd": _odd_ext, "even": _even_ext, "constant": _const_ext}


def _validate_pad(padtype, padlen, x, axis, ntaps):
    """SciPy's _validate_pad: (edge, the extended signal; edge < its length, as the extensions need)."""
    if padtype not in ("even", "odd", "constant", None):
        raise ValueError(f"Unknown value '{padtype}' given to padtype. "
                         "padtype must be 'even', 'odd', 'constant', or None.")
    if padtype is None:
        padlen = 0
    edge = ntaps * 3 if padlen is None else padlen
    if np.shape(x)[axis] <= edge:
        raise ValueError(f"The length of the input vector x must be greater than padlen, which is {edge}.")
    return edge, (_EXTENSIONS[padtype](x, edge, axis) if padtype is not None and edge > 0 else x)


def _validate_x(x):
    x = _dense(x)
    if np.ndim(x) == 0:
        raise ValueError("x must be at least 1-D")
    return x


def _validate_sos(sos):
    sos = np.atleast_2d(_dense(sos))
    if np.ndim(sos) != 2:
        raise ValueError("sos array must be 2D")
    n_sections, m = np.shape(sos)
    if m != 6:
        raise ValueError("sos array must be shape (n_sections, 6)")
    if not np.all(bottom(sos)[:, 3] == 1):
        raise ValueError("sos[:, 3] should be all ones")
    return sos, n_sections


def _forward_backward(run, zi, ext, edge, axis):
    """filtfilt's two passes over the extended signal, each started from zi times its first
    sample (``run(v, zi)``: the filter along the axis), and the padding cut off again."""
    y = run(ext, zi * _along(ext, None, 1, axis))
    y = run(np.flip(y, axis), zi * _along(y, -1, None, axis))
    y = np.flip(y, axis)
    return _along(y, edge, -edge, axis) if edge > 0 else y


def lfilter_zi(b, a):
    """``scipy.signal.lfilter_zi``: the steady state of the step response, differentiated in ``b`` and ``a``.

    SciPy's linear system (a and b divided by a[0], padded to one length n): (I - companion(a)ᵀ) zi =
    b[1:] - a[1:] b[0], solved with np.linalg.solve; SciPy's values to rounding (its own call when
    nothing is traced). The derivative in a[0] is that of the normalized filter, also where a[0] == 1
    (SciPy divides only when a[0] != 1: the same function).

    >>> import numpy as np, mutagrad as mg
    >>> from mutagrad.scipy.signal import lfilter_zi
    >>> float(mg.grad(lambda p: lfilter_zi([1.0, 0.0], [1.0, -p])[0])(0.5))  # zi = p / (1 - p)
    4.0
    """
    if not _traced(b, a):
        return _ss().lfilter_zi(b, a)
    b, a = _coefficients(b), _coefficients(a)
    if np.ndim(b) != 1:
        raise ValueError("Numerator b must be 1-D.")
    if np.ndim(a) != 1:
        raise ValueError("Denominator a must be 1-D.")
    lead = 0
    while np.shape(a)[0] - lead > 1 and bottom(a)[lead] == 0.0:
        lead += 1
    a = a[lead:]
    if np.size(a) < 1:
        raise ValueError("There must be at least one nonzero `a` coefficient.")
    b, a = b / a[0], a / a[0]
    n = max(np.shape(a)[0], np.shape(b)[0])
    if n < 2:  # (scipy.linalg.companion's error)
        raise ValueError("The length of `a` along the last axis must be at least 2.")
    a, b = (np.concatenate((v, np.zeros(n - np.shape(v)[0], dtype=bottom(v).dtype))) if np.shape(v)[0] < n else v
            for v in (a, b))
    # I - companion(a)ᵀ: 1 on the diagonal, -1 above it, and a[1:] added to the first column
    plain = np.eye(n - 1) - np.eye(n - 1, k=1)
    i_minus_a = np.concatenate((plain[:, :1] + a[1:, None], plain[:, 1:]), axis=1)
    return np.linalg.solve(i_minus_a, b[1:] - a[1:] * b[0])


def filtfilt(b, a, x, axis=-1, padtype="odd", padlen=None, method="pad", irlen=None):
    """``scipy.signal.filtfilt``: the filter run forward and backward, differentiated in ``b``, ``a`` and ``x``.

    As SciPy computes it: with method='pad', the signal extended at both ends (padtype 'odd',
    'even', 'constant' or None, by padlen samples: 3 * max(len(a), len(b)) by default), each pass
    started from lfilter_zi(b, a) times its first sample; with method='gust', Gustafsson's initial
    states (least squares, np.linalg.lstsq; ``irlen``). Every argument, any axis, real or complex;
    SciPy's values to rounding (its own call when nothing is traced). Where Gustafsson's matrix is
    rank-deficient (an FIR filter with b[0] == a[0], for one), SciPy's result jumps with the
    coefficients: their derivative is then np.linalg.lstsq's, the rank held (first order only).

    >>> import numpy as np, mutagrad as mg
    >>> from mutagrad.scipy.signal import filtfilt
    >>> x = np.array([1.0, 2.0, 4.0, 8.0])
    >>> float(mg.grad(lambda p: filtfilt([p, 0.0], [1.0, 0.0], x, padlen=1)[2])(0.5))  # y = p² x: 2 p x[2]
    4.0
    """
    if not _traced(b, a, x):
        return _ss().filtfilt(b, a, x, axis=axis, padtype=padtype, padlen=padlen, method=method, irlen=irlen)
    b, a, x = _coefficients(b), _coefficients(a), _dense(x)
    if method not in ("pad", "gust"):
        raise ValueError("method must be 'pad' or 'gust'.")
    if method == "gust":
        return _filtfilt_gust(b, a, x, axis, irlen)
    edge, ext = _validate_pad(padtype, padlen, x, axis, max(np.shape(a)[0], np.shape(b)[0]))
    zi = lfilter_zi(b, a)
    zi = np.reshape(zi, _with((1,) * np.ndim(x), axis, np.size(zi)))
    return _forward_backward(lambda v, z: _lf(b, a, v, z, axis), zi, ext, edge, axis)


_GUST_COND = 1e5  # (condition numbers of Gustafsson's least-squares system beyond which its derivative is rounding)


# the identity whose derivative is refused: a value (SciPy's) whose derivative rounding would dominate
_ROUNDING_ONLY_P = refusing_identity("an ill-conditioned least-squares system of filtfilt's gust method")


def _filtfilt_gust(b, a, x, axis, irlen):
    """SciPy's _filtfilt_gust (its y): Gustafsson's initial states for the forward-backward filter,
    the least-squares solution of M ic = y_bf - y_fb (scipy.linalg.lstsq's cutoff, eps)."""
    order = max(np.shape(b)[0], np.shape(a)[0]) - 1
    if order == 0:  # (a scalar multiplication)
        return (b[0] / a[0]) ** 2 * x
    x = np.swapaxes(x, axis, -1)
    n = np.shape(x)[-1]
    m = n if irlen is None or n <= 2 * irlen else irlen
    # O: the response to each initial state with no input (column k: the first one's, k samples late)
    h = _lf(b, a, np.zeros(m), np.eye(1, order)[0], -1)
    if np.iscomplexobj(bottom(h)):  # (SciPy writes it into an array of floats: the imaginary part discarded)
        import warnings

        warnings.warn("Casting complex values to real discards the imaginary part", np.exceptions.ComplexWarning,
                      stacklevel=3)
        h = np.real(h)
    obs = np.stack([np.concatenate((np.zeros(min(k, m)), h[:max(m - k, 0)])) for k in range(order)], axis=1)
    obsr = obs[::-1]
    s = _lf(b, a, obsr, None, 0)
    sr = s[::-1]

    def blocks(left, right):  # [left, right], or (truncated response) [[left, 0], [0, right]]
        if m == n:
            return np.concatenate((left, right), axis=1)
        z = np.zeros((m, order))
        return np.concatenate((np.concatenate((left, z), axis=1), np.concatenate((z, right), axis=1)), axis=0)

    big = blocks(sr - obs, obsr - s)
    y_fb = np.flip(_lf(b, a, np.flip(_lf(b, a, x, None, -1), -1), None, -1), -1)
    y_bf = _lf(b, a, np.flip(_lf(b, a, np.flip(x, -1), None, -1), -1), None, -1)
    delta = y_bf - y_fb
    if m != n:
        delta = np.concatenate((delta[..., :m], delta[..., -m:]), axis=-1)
    eps = np.finfo(np.result_type(bottom(big), bottom(delta))).eps
    if np.ndim(delta) == 1:
        ic = np.linalg.lstsq(big, delta, rcond=eps)[0]
    else:
        d2 = np.reshape(delta, (-1, np.shape(delta)[-1])).T
        ic = np.reshape(np.linalg.lstsq(big, d2, rcond=eps)[0].T, np.shape(delta)[:-1] + (2 * order,))
    if isinstance(ic, Tracer):
        sv = np.linalg.svd(np.asarray(bottom(big)), compute_uv=False)
        kept = sv[sv > eps * sv[0]] if sv.size and sv[0] > 0 else sv[:0]  # (lstsq's: the rank it keeps)
        cond = kept[0] / kept[-1] if kept.size else 1.0
        if not cond <= _GUST_COND:  # (an unstable filter's growing responses: the sigreg tester's gradients were
            # 1e3x off at cond 3e11, 1e-3 relative at 8e7; the error grows as cond**2 * eps)
            ic = bind(_ROUNDING_ONLY_P, (ic,), {"why": (
                f"scipy.signal.filtfilt(method='gust'): its least-squares system for the initial states is "
                f"ill-conditioned (condition number {cond:.2g}, an unstable or nearly unstable filter), so "
                "rounding would dominate the derivative of its solution; SciPy's value is kept. Use "
                "method='pad' (the default), a stable filter, or irlen= to shorten the responses")})
    wic = ic @ blocks(sr, obsr).T
    if m == n:
        y = y_fb + wic
    else:
        y = np.concatenate((y_fb[..., :m] + wic[..., :m], y_fb[..., m:n - m], y_fb[..., n - m:] + wic[..., -m:]),
                           axis=-1)
    return np.swapaxes(y, axis, -1)


def _sos_chain(sos, x, axis, zi):
    """The sections in turn, each lfilter(sos[s, :3], sos[s, 3:]) (zi: section s starts from zi[s])."""
    for s in range(np.shape(sos)[0]):
        x = _lf(sos[s, :3], sos[s, 3:], x, None if zi is None else zi[s], axis)
    return x


def sosfilt(sos, x, axis=-1, zi=None):
    """``scipy.signal.sosfilt``: second-order sections, differentiated in ``sos``, ``x`` and ``zi``.

    Each section in turn is lfilter(sos[s, :3], sos[s, 3:], ...) (starting from zi[s] and returning
    its final state in zf[s] when ``zi`` is given); any axis, real or complex. SciPy's values to
    rounding (its own call when nothing is traced; its compiled loop adds in another order). SciPy
    requires sos[:, 3] == 1 and never reads it; the derivative in that column is that of each
    section divided by it, as lfilter divides by a[0] (SciPy's sosfilt of sos / sos[:, 3:4]).

    >>> import numpy as np, mutagrad as mg
    >>> from mutagrad.scipy.signal import sosfilt
    >>> sos = np.array([[1.0, 0.0, 0.0, 1.0, -0.5, 0.0]])
    >>> mg.grad(lambda x: sosfilt(sos, x)[-1])(np.ones(3))
    array([0.25, 0.5 , 1.  ])
    """
    if not _traced(sos, x, zi):
        return _ss().sosfilt(sos, x, axis=axis, zi=zi)
    x = _validate_x(x)
    sos, n_sections = _validate_sos(sos)
    x_zi_shape = (n_sections,) + _with(np.shape(x), axis, 2)
    inputs = [bottom(sos), bottom(x)] + ([] if zi is None else [bottom(_dense(zi))])
    dtype = np.result_type(*inputs)
    if dtype.char not in "fdgFDGO":
        raise NotImplementedError(f"input type '{dtype}' not supported")
    zi = None if zi is None else _dense(zi)
    if zi is not None and np.shape(zi) != x_zi_shape:
        raise ValueError(f"Invalid zi shape. With axis={axis!r}, an input with shape {np.shape(x)!r}, and an sos "
                         f"array with {n_sections} sections, zi must have shape {x_zi_shape!r}, got {np.shape(zi)!r}.")
    if not n_sections:  # (no sections: SciPy 1.17 raises, in its reshape; its error)
        _ss().sosfilt(bottom(sos), bottom(x), axis=axis, zi=None if zi is None else bottom(zi))
        return x.astype(dtype) if zi is None else (x.astype(dtype), zi.astype(dtype))
    if zi is None:
        return _sos_chain(sos, x, axis, None)
    zf = []
    for s in range(n_sections):
        x, z = lfilter(sos[s, :3], sos[s, 3:], x, axis=axis, zi=zi[s])
        zf.append(z)
    return x, np.stack(zf)


def sosfilt_zi(sos):
    """``scipy.signal.sosfilt_zi``: the steady state of each section's step response, differentiated in ``sos``.

    SciPy's formula: zi[s] = lfilter_zi(b_s, a_s) times the gain at DC of the sections before
    (Π sum(b) / sum(a)); SciPy's values to rounding (its own call when nothing is traced).

    >>> import numpy as np, mutagrad as mg
    >>> from mutagrad.scipy.signal import sosfilt_zi
    >>> float(mg.grad(lambda p: sosfilt_zi([[1.0, 0.0, 0.0, 1.0, -p, 0.0]])[0, 0])(0.5))  # p / (1 - p)
    4.0
    """
    if not _traced(sos):
        return _ss().sosfilt_zi(sos)
    sos = _dense(sos)
    if np.ndim(sos) != 2 or np.shape(sos)[1] != 6:
        raise ValueError("sos must be shape (n_sections, 6)")
    zi, scale = [], 1.0
    for s in range(np.shape(sos)[0]):
        b, a = sos[s, :3], sos[s, 3:]
        zi.append(scale * lfilter_zi(b, a))
        scale = scale * (np.sum(b) / np.sum(a))
    return np.stack(zi) if zi else np.zeros((0, 2), bottom(sos).dtype)


def sosfiltfilt(sos, x, axis=-1, padtype="odd", padlen=None):
    """``scipy.signal.sosfiltfilt``: second-order sections forward and backward, differentiated in ``sos`` and ``x``.

    As SciPy computes it: the signal extended at both ends (padtype, padlen: 3 * (2 n_sections + 1 -
    min(#(sos[:, 2] == 0), #(sos[:, 5] == 0))) by default), each pass started from sosfilt_zi(sos)
    times its first sample; any axis, real or complex. SciPy's values to rounding (its own call when
    nothing is traced). The default padlen counts the coefficients that are exactly zero, so it jumps
    where one of them moves: the derivative there is that of the padding taken (give ``padlen`` to fix
    it). sos[:, 3] as in ``sosfilt``.

    >>> import numpy as np, mutagrad as mg
    >>> from mutagrad.scipy.signal import sosfiltfilt
    >>> x = np.array([1.0, 2.0, 4.0, 8.0])
    >>> float(mg.grad(lambda p: sosfiltfilt([[p, 0.0, 0.0, 1.0, 0.0, 0.0]], x, padlen=1)[2])(0.5))  # p² x[2]
    4.0
    """
    if not _traced(sos, x):
        return _ss().sosfiltfilt(sos, x, axis=axis, padtype=padtype, padlen=padlen)
    sos, n_sections = _validate_sos(sos)
    x = _validate_x(x)
    p = bottom(sos)
    ntaps = 2 * n_sections + 1 - min(int(np.sum(p[:, 2] == 0)), int(np.sum(p[:, 5] == 0)))
    edge, ext = _validate_pad(padtype, padlen, x, axis, ntaps)
    zi = np.reshape(sosfilt_zi(sos), (n_sections,) + _with((1,) * np.ndim(x), axis, 2))
    return _forward_backward(lambda v, z: _sos_chain(sos, v, axis, z), zi, ext, edge, axis)


def hilbert(x, N=None, axis=-1):
    """``scipy.signal.hilbert``: the analytic signal, differentiated in ``x``.

    SciPy's steps, written with scipy.fft (differentiated as written, SciPy's own transforms):
    the spectrum of N points, its positive frequencies doubled and negative ones zeroed, and its
    inverse transform; SciPy's values (its own call when nothing is traced).

    >>> import numpy as np, mutagrad as mg
    >>> from mutagrad.scipy.signal import hilbert
    >>> mg.grad(lambda x: hilbert(x).imag[0])(np.zeros(4))  # a row of the (circular) Hilbert transform
    array([ 0. , -0.5,  0. ,  0.5])
    """
    if not _traced(x):
        return _ss().hilbert(x, N, axis)
    import scipy.fft as sp_fft

    x = _dense(x)
    if np.iscomplexobj(bottom(x)):
        raise ValueError("x must be real.")
    if N is None:
        N = np.shape(x)[axis]
    if N <= 0:
        raise ValueError("N must be positive.")
    xf = np.moveaxis(sp_fft.fft(x, N, axis=axis), axis, -1)
    if N % 2 == 0:
        xf[..., 1:N // 2] *= 2.0
        xf[..., N // 2 + 1:N] = 0.0
    else:
        xf[..., 1:(N + 1) // 2] *= 2.0
        xf[..., (N + 1) // 2:N] = 0.0
    return sp_fft.ifft(np.moveaxis(xf, -1, axis), axis=axis)
