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

from ...core import bind, bottom, get_primitive
from ...registry import conj_if_complex as _cj
from ...tangents import NoTangent, Thunk, ZeroTangent, is_zero
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


def _along(v, start, stop, axis):
    """``v[start:stop]`` along ``axis``."""
    idx = [slice(None)] * np.ndim(v)
    idx[axis] = slice(start, stop)
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
    from ...core import Tracer

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
