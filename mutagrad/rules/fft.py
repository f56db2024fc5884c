"""np.fft: fft ifft rfft irfft hfft ihfft, their 2-D and n-D forms, fftshift ifftshift.

Four primitives do the work, one per 1-D transform along one axis (``fft``,
``ifft``, ``rfft``, ``irfft``); the others are NumPy's own compositions of
them (``fftn`` is a loop of ``fft`` over the axes, ``hfft`` is ``irfft`` of the
conjugate...), run on traced values.

All are linear, so each rule is the transform's adjoint for the real inner
product (``x̄ = ȳ · conj(∂y/∂x)``, the package's convention):

* the DFT's adjoint is the unnormalized inverse DFT, so ``fft`` with
  ``norm="backward"`` transposes to ``ifft`` with ``norm="forward"`` (and
  ortho to ortho): :data:`_DUAL`;
* the zero-padding or cropping to ``n`` transposes to cropping or
  zero-padding back to the input length (:func:`_fit`);
* ``rfft`` keeps half the spectrum: its adjoint is ``irfft`` (which counts
  every non-edge bin twice) of the cotangent with the non-edge bins halved;
* ``irfft`` reads only the real part of the DC and Nyquist bins: its adjoint
  is ``rfft`` of the cotangent with the non-edge bins doubled, and the edge
  bins come out real.
"""
from __future__ import annotations

import numpy as np

from ..core import FUNCTIONS, bind, bottom, get_primitive, plain_operands
from ..registry import deflinear
from ..core import write_out
from .linalg import call_args

_NORM = {None: "backward", "backward": "backward", "ortho": "ortho", "forward": "forward"}
_DUAL = {"backward": "forward", "ortho": "ortho", "forward": "backward"}


def _takes_out(fn):
    """Whether the installed NumPy's transform ``fn`` writes into its ``out=``: NumPy 2.4's
    hfft, ifft2 and irfft2 pass ``out=None`` on to the transform they call, so they return a
    new array and leave ``out`` as it was (probed, so that a NumPy that fixes it is followed)."""
    a = np.ones((2, 2), float if fn in (np.fft.rfft, np.fft.ihfft, np.fft.rfft2, np.fft.rfftn) else complex)
    out = np.zeros_like(fn(a))
    return fn(a, out=out) is out


_TAKES_OUT = {fn: _takes_out(fn) for fn in (np.fft.fft, np.fft.ifft, np.fft.rfft, np.fft.irfft, np.fft.hfft, np.fft.ihfft,
                                            np.fft.fft2, np.fft.ifft2, np.fft.rfft2, np.fft.irfft2, np.fft.fftn,
                                            np.fft.ifftn, np.fft.rfftn, np.fft.irfftn)}


def _out(fn, d):
    """The ``out=`` NumPy's ``fn`` writes into: the one given, or None where it ignores it."""
    return d["out"] if _TAKES_OUT[fn] else None


def _fit(g, axis, length):
    """Crop or zero-pad ``g`` along ``axis`` to ``length``."""
    cur = np.shape(g)[axis]
    if cur == length:
        return g
    if cur > length:
        return g[(slice(None),) * axis + (slice(0, length),)]
    shape = list(np.shape(g))
    shape[axis] = length - cur
    return np.concatenate([g, np.zeros(shape, dtype=bottom(g).dtype)], axis=axis)


def _edge_weights(n, axis, ndim, inner, dtype=np.float64):
    """Along ``axis``, the weight of each of the n//2 + 1 bins of a real
    transform: 1 at DC (and Nyquist, for even n), ``inner`` elsewhere."""
    w = np.full(n // 2 + 1, float(inner), dtype)
    w[0] = 1.0
    if n % 2 == 0:
        w[-1] = 1.0
    return np.reshape(w, (-1,) + (1,) * (ndim - axis - 1))


def _fft_impl(x, n, axis, norm):
    return np.fft.fft(x, n=n, axis=axis, norm=norm)


def _ifft_impl(x, n, axis, norm):
    return np.fft.ifft(x, n=n, axis=axis, norm=norm)


def _rfft_impl(x, n, axis, norm):
    return np.fft.rfft(x, n=n, axis=axis, norm=norm)


def _irfft_impl(x, n, axis, norm):
    return np.fft.irfft(x, n=n, axis=axis, norm=norm)


def _fft_T(g, x, n, axis, norm):
    return _fit(np.fft.ifft(g, axis=axis, norm=_DUAL[norm]), axis, x.shape[axis])


def _ifft_T(g, x, n, axis, norm):
    return _fit(np.fft.fft(g, axis=axis, norm=_DUAL[norm]), axis, x.shape[axis])


def _rfft_T(g, x, n, axis, norm):
    g = g * _edge_weights(n, axis, np.ndim(g), 0.5)
    return _fit(np.fft.irfft(g, n=n, axis=axis, norm=_DUAL[norm]), axis, x.shape[axis])


def _irfft_T(g, x, n, axis, norm):
    if np.iscomplexobj(bottom(g)):
        g = np.real(g)
    z = np.fft.rfft(g, axis=axis, norm=_DUAL[norm]) * _edge_weights(n, axis, np.ndim(g), 2.0)
    return _fit(z, axis, x.shape[axis])


_PRIMS = {}
for _name, _impl, _T in (("fft", _fft_impl, _fft_T), ("ifft", _ifft_impl, _ifft_T),
                         ("rfft", _rfft_impl, _rfft_T), ("irfft", _irfft_impl, _irfft_T)):
    get_primitive(_impl, f"np.fft.{_name}")
    _PRIMS[_name] = deflinear(_impl, _T)


def _one_d(name):
    """Handler of the 1-D transform ``name``: normalize n, axis and norm, bind."""
    prim = _PRIMS[name]

    def handler(args, kwargs):
        d = call_args(("a", "n", "axis", "norm", "out"), args, kwargs)
        a = d["a"]
        ndim = np.ndim(a)
        axis = -1 if d["axis"] is None else d["axis"]
        if not -ndim <= axis < ndim:
            raise np.exceptions.AxisError(axis, ndim)
        axis %= ndim
        n = d["n"]
        if n is None:
            n = 2 * (np.shape(a)[axis] - 1) if name == "irfft" else np.shape(a)[axis]
        if n < 1:
            raise ValueError(f"Invalid number of FFT data points ({n}) specified.")
        if d["norm"] not in _NORM:
            raise ValueError(f'Invalid norm value {d["norm"]}; should be "backward", "ortho" or "forward".')
        res = bind(prim, (a,), {"n": int(n), "axis": axis, "norm": _NORM[d["norm"]]})
        # (NumPy's loop runs in out's dtype, and casts into it under same_kind)
        own = getattr(np.fft, name)
        return write_out(res, _out(own, d), lambda ob: own(plain_operands(a), d["n"], axis, d["norm"], out=ob))

    return handler


for _name in _PRIMS:
    FUNCTIONS[getattr(np.fft, _name)] = _one_d(_name)


# -- compositions, as NumPy writes them -------------------------------------------------


def _swap(norm):
    return _DUAL[_NORM[norm]]


def _np_hfft(args, kwargs):
    d = call_args(("a", "n", "axis", "norm", "out"), args, kwargs)
    a, axis = d["a"], (-1 if d["axis"] is None else d["axis"])
    n = 2 * (np.shape(a)[axis] - 1) if d["n"] is None else d["n"]
    res = np.fft.irfft(np.conj(a), n, axis, norm=_swap(d["norm"]))
    return write_out(res, _out(np.fft.hfft, d), lambda ob: np.fft.hfft(plain_operands(a), d["n"], axis, d["norm"],
                                                                        out=ob))


def _np_ihfft(args, kwargs):
    d = call_args(("a", "n", "axis", "norm", "out"), args, kwargs)
    a, axis = d["a"], (-1 if d["axis"] is None else d["axis"])
    n = np.shape(a)[axis] if d["n"] is None else d["n"]
    return write_out(np.conj(np.fft.rfft(a, n, axis, norm=_swap(d["norm"]))), _out(np.fft.ihfft, d),
                     lambda ob: np.fft.ihfft(plain_operands(a), d["n"], axis, d["norm"], out=ob))


def _cook(a, s, axes, invreal=False):
    """The sizes and axes of an n-D transform (NumPy's ``_cook_nd_args``)."""
    shape = np.shape(a)
    if s is None:
        axes = list(range(-len(shape), 0)) if axes is None else list(axes)
        s = [shape[ax] for ax in axes]
        if invreal:
            s[-1] = (shape[axes[-1]] - 1) * 2
    else:
        s = list(s)
        axes = list(range(-len(s), 0)) if axes is None else list(axes)
        if len(s) != len(axes):
            raise ValueError("Shape and axes have different lengths.")
        s = [shape[ax] if n == -1 else n for n, ax in zip(s, axes)]
    return s, axes


def _nd(kind, default_axes=None):
    own = getattr(np.fft, kind + ("n" if default_axes is None else "2"))

    def handler(args, kwargs):
        d = call_args(("a", "s", "axes", "norm", "out"), args, kwargs, axes=default_axes)
        a, norm = d["a"], d["norm"]
        given = a
        s, axes = _cook(a, d["s"], d["axes"], invreal=kind == "irfft")
        if kind in ("fft", "ifft"):
            fn = np.fft.fft if kind == "fft" else np.fft.ifft
            for ii in reversed(range(len(axes))):
                a = fn(a, s[ii], axes[ii], norm)
        elif kind == "rfft":
            a = np.fft.rfft(a, s[-1], axes[-1], norm)
            for ii in range(len(axes) - 2, -1, -1):
                a = np.fft.fft(a, s[ii], axes[ii], norm)
        else:
            for ii in range(len(axes) - 1):
                a = np.fft.ifft(a, s[ii], axes[ii], norm)
            a = np.fft.irfft(a, s[-1], axes[-1], norm)
        return write_out(a, _out(own, d), lambda ob: own(plain_operands(given), d["s"], d["axes"], norm, out=ob))

    return handler


FUNCTIONS[np.fft.hfft] = _np_hfft
FUNCTIONS[np.fft.ihfft] = _np_ihfft
for _kind in ("fft", "ifft", "rfft", "irfft"):
    FUNCTIONS[getattr(np.fft, _kind + "n")] = _nd(_kind)
    FUNCTIONS[getattr(np.fft, _kind + "2")] = _nd(_kind, (-2, -1))


# -- shifts: permutations, each the other's transpose -----------------------------------

deflinear(np.fft.fftshift, lambda g, x, axes=None: np.fft.ifftshift(g, axes))
deflinear(np.fft.ifftshift, lambda g, x, axes=None: np.fft.fftshift(g, axes))
