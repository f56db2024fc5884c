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
r[m - k] (ā = a / a[0]): ``_final_state``. Its value is SciPy's; its derivative is
that expression's.
"""
from __future__ import annotations

import numpy as np

from ...core import bind, get_primitive
from ...registry import conj_if_complex as _cj
from ...tangents import NoTangent, ZeroTangent, is_zero
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


def _final_state(b, a, x, zi, axis):
    """zf from the M - 1 outputs r the filter gives after the signal with no input (see above)."""
    m = max(np.shape(a)[0], np.shape(b)[0]) - 1
    n = np.shape(x)[axis]
    xe = np.concatenate([x, np.zeros_like(x, shape=_with(np.shape(x), axis, m))], axis=axis)
    r = _along(_lf(b, a, xe, zi, axis), n, n + m, axis)
    an = a / a[0]
    rows = [sum(an[k] * _along(r, j - k, j - k + 1, axis) for k in range(min(j + 1, np.shape(a)[0])))
            for j in range(m)]
    return np.concatenate(rows, axis=axis)


def _zf_rrule(b, a, x, zi, *, axis=-1):
    from ...api import vjp

    zf = bind(lfilter_zf_p, (b, a, x, zi), {"axis": axis})
    _, pb = vjp(lambda b, a, x, zi: _final_state(b, a, x, zi, axis), b, a, x, zi)

    def pullback(g):  # (mg.vjp's pullback is g·J, JAX's; a rule's cotangent is ḡ·conj(J))
        if is_zero(g):
            return (ZeroTangent(),) * 4
        return tuple(_cj(c) for c in pb(_cj(g)))

    return zf, pullback


def _zf_frule(primals, tangents, *, axis=-1):
    from ...api import jvp

    tangents = tuple(np.zeros_like(p) if is_zero(t) else t for p, t in zip(primals, tangents))
    zf = bind(lfilter_zf_p, primals, {"axis": axis})
    return zf, jvp(lambda b, a, x, zi: _final_state(b, a, x, zi, axis), primals, tangents)[1]


lfilter_zf_p.rrule, lfilter_zf_p.frule = _zf_rrule, _zf_frule
