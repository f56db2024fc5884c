"""scipy.interpolate's interpolators, written as SciPy 1.17 writes them, with NumPy operations on
traced values, so that their derivatives follow (every order, both modes).

Each class is a subclass of SciPy's own. Made from plain data, it *is* SciPy's object (its
constructor ran, its attributes and values are SciPy's), and every call with plain arguments is
SciPy's own; the traced path runs when the data, a boundary value, a fill value or the points
where it is evaluated are traced. No primitive is registered: the coefficients are computed with
NumPy operations, mutagrad's buffers (``mnp.empty``), ``np.linalg.solve`` and
``mutagrad.scipy.linalg.solve_banded``, so the derivatives are those of the formulas SciPy uses.

Conventions (SciPy's; the derivative is that of the branch taken):

* Intervals. A piecewise polynomial (PPoly and the cubic interpolators) finds the interval of
  each point from plain values as SciPy's ``find_interval`` does: ``x[i] <= t < x[i + 1]``, the
  last interval closed (``t == x[-1]`` is in it); out of range, the end polynomials
  (``extrapolate=True``), NaN (``False``) or the point mapped into ``[x[0], x[-1]]``
  (``'periodic'``). At a knot the derivative in ``t`` is that of the interval on its right, the
  last one's at ``x[-1]``. A B-spline takes the last ``l`` in ``[k, n - 1]`` with ``t[l] <= x``.
* Knots. The derivative in the data abscissae ``x`` is that of the coefficients (and of
  ``t - x[i]``) with the interval index held: exact wherever the interpolant is a smooth function
  of them, that is away from evaluation points that sit on a knot.
* Ties. The shape-preserving slopes are piecewise smooth in ``y``: PCHIP's slope is 0 where the
  neighbouring secant slopes differ in sign or one of them is 0 (its derivative there is 0, the one
  of the side where the signs differ), and its end slopes switch between formulas at SciPy's tests;
  Akima's weights are absolute values (np.abs: derivative 0 where two slopes are equal) and the
  slope falls back to the mean of its neighbours where ``f1 + f2`` is below SciPy's cutoff (1e-9
  of the largest).
"""
from __future__ import annotations

import itertools
import math

import numpy as np
import scipy.interpolate as _si

from ...core import Tracer, bottom
from ..reductions import _with_value
from .linalg import _has_tracer, _plain
from .sparse import _dense

COMPOSITES = tuple(f"scipy.interpolate.{name}" for name in (
    "Akima1DInterpolator", "BSpline", "CubicHermiteSpline", "CubicSpline", "PPoly", "PchipInterpolator",
    "RegularGridInterpolator", "interp1d", "interpn", "make_interp_spline", "pchip_interpolate"))


def _traced(*values):
    """Whether any of ``values`` (or of the lists, tuples and dicts among them) is traced."""
    return _has_tracer(values)


def _mnp():
    from ... import numpy as mnp

    return mnp


def _as(v, dtype):
    """``v`` (traced or plain, or a list of them) as an array of ``dtype``."""
    v = _dense(v)
    if isinstance(v, Tracer):
        return v if bottom(v).dtype == dtype else v.astype(dtype)
    return np.asarray(v, dtype=dtype)


def _float_or_complex(v):
    v = _dense(v)
    return _as(v, np.complex128 if np.iscomplexobj(bottom(v)) else np.float64)


def _inexact(v):
    """``v`` as an array of floating-point (or complex) numbers: float64 if it holds integers."""
    v = _dense(v)
    if not isinstance(v, Tracer):
        v = np.asarray(v)
    return v if np.issubdtype(bottom(v).dtype, np.inexact) else _as(v, np.float64)


def _escape(what, fix):
    from ...errors import TracerEscapeError, escape_error

    return escape_error(what, TracerEscapeError, " " + fix, specific=True)


# -- piecewise polynomials in the power basis ------------------------------------------------


def _intervals(x, v, extrapolate):
    """SciPy's find_interval_ascending / _descending for each of the plain points ``v``:
    (index, valid); valid is False for NaN and, without extrapolation, out of range."""
    n = x.shape[0]
    if x[-1] >= x[0]:
        i = np.searchsorted(x, v, side="right") - 1
        inside = (x[0] <= v) & (v <= x[-1])
    else:
        i = n - 1 - np.searchsorted(x[::-1], v, side="left")
        inside = (x[-1] <= v) & (v <= x[0])
    i = np.clip(i, 0, n - 2)
    valid = inside | (bool(extrapolate) & ~np.isnan(v))
    return i, valid


def _poly1(c, s, dx):
    """SciPy's evaluate_poly1: the local polynomials with coefficients ``c`` (highest power first,
    along the first axis) at ``s``, their dx-th derivative (dx > 0) or antiderivative (dx < 0),
    summed from the lowest power up, the prefactors as SciPy forms them."""
    k = c.shape[0]
    res, z = None, None  # (z None: 1.0)
    for _ in range(-dx):
        z = s if z is None else z * s
    for kp in range(k):
        if dx > 0 and kp < dx:
            continue
        pre = 1.0
        for j in (range(kp, kp - dx, -1) if dx > 0 else range(kp, kp - dx)):
            pre = pre * j if dx > 0 else pre / (j + 1)
        term = c[k - kp - 1] if z is None else c[k - kp - 1] * z
        if pre != 1.0:
            term = term * pre
        res = term if res is None else res + term
        if kp < k - 1 and kp >= dx:
            z = s if z is None else z * s
    if res is None:  # (a derivative of higher order than the polynomials)
        return np.zeros_like(c[0]) * (s if np.ndim(s) else 1.0)
    return res


def _column(v, ndim):
    """``v`` (one value per point) as a column against ``ndim - 1`` trailing axes."""
    return np.reshape(v, np.shape(v) + (1,) * (ndim - 1))


def _ppoly_eval(c, x, t, nu, extrapolate):
    """PPoly's evaluation at the 1-d points ``t``: shape (len(t),) + c.shape[2:]."""
    if nu < 0:
        raise ValueError("Order of derivative cannot be negative")
    if extrapolate == "periodic":
        t = x[0] + (t - x[0]) % (x[-1] - x[0])
        extrapolate = False
    xp = np.asarray(bottom(x))
    i, valid = _intervals(xp, np.asarray(bottom(t)), extrapolate)
    every = bool(np.all(valid))
    if not every:  # (a point inside, whose value is then replaced by NaN)
        t = np.where(valid, t, xp[i])
    s = _column(t - x[i], np.ndim(c) - 1)
    out = _poly1(c[:, i], s, nu)
    if not every:
        out = np.where(_column(valid, np.ndim(out)), out, np.nan)
    return out


def _made(cls, c, x, extrapolate, axis):
    """SciPy's construct_fast for traced coefficients or breakpoints."""
    self = object.__new__(cls)
    self._c, self._x, self.axis = c, x, axis
    self.extrapolate = True if extrapolate is None else extrapolate
    self._asarray = np.asarray
    return self


def _finish(out, x_shape, axis):
    """PPoly's and BSpline's reshape of the values, the evaluation axis moved to ``axis``."""
    x_ndim = len(x_shape)
    out = np.reshape(out, x_shape + np.shape(out)[1:])
    if axis != 0:
        order = list(range(np.ndim(out)))
        order = order[x_ndim:x_ndim + axis] + order[:x_ndim] + order[x_ndim + axis:]
        out = np.transpose(out, order)
    return out


def _points(t):
    """Evaluation points: (1-d float64 array, their shape)."""
    t = _as(t, np.float64)
    return np.ravel(t), np.shape(t)


def _integral(c, x, a, b, extrapolate):
    """SciPy's _ppoly.integrate: the sum over the intervals of the local antiderivatives' increments."""
    xp = np.asarray(bottom(x))
    if not bottom(b) >= bottom(a):
        raise ValueError("Integral bounds not in order")
    ascending = xp[-1] >= xp[0]
    if not ascending:
        a, b = b, a
    (si, ei), valid = _intervals(xp, np.array([bottom(a), bottom(b)], dtype=float), extrapolate)
    trail = np.shape(c)[2:]
    if not valid.all():
        return np.full(trail, np.nan, dtype=bottom(c).dtype)
    idx = np.arange(si, ei + 1)
    one = (1,)
    ends = np.concatenate([x[idx[:-1] + 1] - x[idx[:-1]], np.reshape(b - x[ei], one)])
    starts = np.concatenate([np.reshape(a - x[si], one), np.zeros(len(idx) - 1)])
    cc = c[:, idx]
    nd = np.ndim(cc) - 1
    total = np.cumsum(_poly1(cc, _column(ends, nd), -1) - _poly1(cc, _column(starts, nd), -1), axis=0)[-1]
    return total if ascending else -total


def _continued(top, x, nu):
    """SciPy's fix_continuity for an antiderivative of order nu: interval by interval, the nu
    lowest coefficients (zero in the first interval) make its derivatives of order < nu continuous."""
    low0 = np.zeros((nu,) + np.shape(top)[2:], dtype=bottom(top).dtype)
    cols = [np.concatenate([top[:, 0], low0])]
    h = x[1:] - x[:-1]
    for ip in range(1, np.shape(top)[1]):
        prev, low = cols[-1], []
        for d in range(nu - 1, -1, -1):
            res = _poly1(prev, h[ip - 1], d)
            for j in range(2, d + 1):
                res = res / j
            low.append(res)
        cols.append(np.concatenate([top[:, ip], np.stack(low)]))
    return np.stack(cols, axis=1)


def _held(name):
    """A property for an array the object holds under ``name``, traced or plain (a plain one read through the
    object's _asarray, set through np.asarray, as SciPy's own properties do)."""

    def get(self):
        v = getattr(self, name)
        return v if isinstance(v, Tracer) else self._asarray(v)

    def put(self, value):
        setattr(self, name, value if isinstance(value, Tracer) else np.asarray(value))

    return property(get, put)


class _TracedCall:
    """A piecewise polynomial's call at points: SciPy's where nothing is traced (the next class in the method
    order), else ``_traced_evaluate`` of the flat points with NumPy operations, shaped as SciPy shapes the result."""

    def _is_traced(self):
        return any(isinstance(getattr(self, name), Tracer) for name in self._HELD)

    def __call__(self, x, nu=0, extrapolate=None):
        if not (self._is_traced() or _traced(x)):
            return super().__call__(x, nu, extrapolate)
        if extrapolate is None:
            extrapolate = self.extrapolate
        points, shape = _points(x)
        return _finish(self._traced_evaluate(points, nu, extrapolate), shape, self.axis)


class _TracedPPoly(_TracedCall):
    """PPoly's methods for coefficients or breakpoints that may be traced: its own where
    nothing is (the next class in the method order: SciPy's)."""

    _HELD = ("_c", "_x")
    c = _held("_c")
    x = _held("_x")

    def _traced_evaluate(self, t, nu, extrapolate):
        return _ppoly_eval(self._c, self._x, t, nu, extrapolate)

    def derivative(self, nu=1):
        if not self._is_traced():
            return super().derivative(nu)
        if nu < 0:
            return self.antiderivative(-nu)
        c2 = self._c if nu == 0 else self._c[:-nu]
        if np.shape(c2)[0] == 0:  # (the derivative of order 0 is zero)
            c2 = np.zeros((1,) + np.shape(c2)[1:], dtype=bottom(c2).dtype)
        from scipy.special import poch

        factor = poch(np.arange(np.shape(c2)[0], 0, -1), nu)
        c2 = c2 * factor[(slice(None),) + (None,) * (np.ndim(c2) - 1)]
        return _made(type(self), c2, self._x, self.extrapolate, self.axis)

    def antiderivative(self, nu=1):
        if not self._is_traced():
            return super().antiderivative(nu)
        if nu <= 0:
            return self.derivative(-nu)
        from scipy.special import poch

        factor = poch(np.arange(np.shape(self._c)[0], 0, -1), nu)
        c = _continued(self._c / factor[(slice(None),) + (None,) * (np.ndim(self._c) - 1)], self._x, nu)
        extrapolate = False if self.extrapolate == "periodic" else self.extrapolate
        return _made(type(self), c, self._x, extrapolate, self.axis)

    def integrate(self, a, b, extrapolate=None):
        if not (self._is_traced() or _traced(a, b)):
            return super().integrate(a, b, extrapolate)
        if extrapolate is None:
            extrapolate = self.extrapolate
        sign = 1
        if bottom(b) < bottom(a):
            a, b, sign = b, a, -1
        c, x = self._c, self._x
        if extrapolate == "periodic":
            xs, xe = x[0], x[-1]
            period = xe - xs
            interval = b - a
            n_periods, left = np.floor_divide(bottom(interval), bottom(period)), np.remainder(interval, period)
            if n_periods > 0:
                total = _integral(c, x, xs, xe, False) * n_periods
            else:
                total = np.zeros(np.shape(c)[2:], dtype=bottom(c).dtype)
            a = xs + (a - xs) % period
            b = a + left
            if bottom(b) <= bottom(xe):
                total = total + _integral(c, x, a, b, False)
            else:
                total = total + _integral(c, x, a, xe, False)
                total = total + _integral(c, x, xs, xs + left + a - xe, False)
        else:
            total = _integral(c, x, a, b, bool(extrapolate))
        return np.reshape(total * sign, np.shape(c)[2:])

    def solve(self, y=0.0, discontinuity=True, extrapolate=None):
        if not (self._is_traced() or _traced(y)):
            return super().solve(y, discontinuity, extrapolate)
        raise _escape(f"{type(self).__name__}.solve / .roots of a traced piecewise polynomial",
                      "Find the roots on plain values (s.solve(y) of the spline made from mg.value(...) of the data), "
                      "then take one Newton step on the traced spline, r = r - (s(r) - y) / s(r, 1), which has the "
                      "root's first derivative (two steps: the first three).")

    def roots(self, discontinuity=True, extrapolate=None):
        return self.solve(0.0, discontinuity, extrapolate)

    def extend(self, c, x, *args, **kwargs):
        if self._is_traced() or _traced(c, x):
            raise _escape(f"{type(self).__name__}.extend with traced coefficients or breakpoints",
                          "Make a new piecewise polynomial from the concatenated coefficients and breakpoints "
                          "(mutagrad.scipy.interpolate.PPoly(np.concatenate(...), np.concatenate(...))).")
        return super().extend(c, x, *args, **kwargs)


def _set_traced(self, c, x, extrapolate, axis):
    """A PPoly's state, as PPoly.__init__ leaves it, for traced coefficients (c: (k, m, ...))."""
    self._c = c if np.iscomplexobj(bottom(c)) else _as(c, np.float64)
    self._x, self.extrapolate, self.axis, self._asarray = x, extrapolate, axis, np.asarray


class PPoly(_TracedPPoly, _si.PPoly):
    """``scipy.interpolate.PPoly`` (power basis), differentiated in ``c``, ``x`` and the points.

    The polynomial on ``[x[i], x[i + 1])`` is ``sum(c[m, i] * (t - x[i]) ** (k - m))``; calls,
    ``derivative``, ``antiderivative`` and ``integrate`` as SciPy computes them, the intervals
    as SciPy finds them (half open, the last one closed). With nothing traced it is SciPy's own.

    >>> import numpy as np, mutagrad as mg
    >>> from mutagrad.scipy.interpolate import PPoly
    >>> f = lambda c: PPoly(c, [0.0, 1.0, 3.0])(2.0)  # c[0, 1] * (2 - 1) + c[1, 1]
    >>> mg.grad(f)(np.ones((2, 2)))
    array([[0., 1.],
           [0., 1.]])
    """

    def __init__(self, c, x, extrapolate=None, axis=0):
        if not _traced(c, x):
            super().__init__(c, x, extrapolate, axis)
            return
        plain = _si.PPoly(_plain(_dense(c)), _plain(_dense(x)), extrapolate, axis)  # (SciPy's checks)
        c = _dense(c)
        if axis != 0:
            c = np.moveaxis(np.moveaxis(c, axis + 1, 0), axis + 1, 0)
        _set_traced(self, c, _as(x, np.float64), plain.extrapolate, axis)


# -- cubic interpolators -------------------------------------------------------------------


def _prepare_input(x, y, axis, dydx=None):
    """SciPy's prepare_input (its checks ran on the plain values): x, dx, y with the axis first, axis, dydx."""
    x, y = _as(x, np.float64), _dense(y)
    complex_ = np.iscomplexobj(bottom(y)) or (dydx is not None and np.iscomplexobj(bottom(_dense(dydx))))
    dtype = np.complex128 if complex_ else np.float64
    y = _as(y, dtype)
    axis = axis % np.ndim(y)
    dx = np.diff(x)
    y = np.moveaxis(y, axis, 0)
    if dydx is not None:
        dydx = np.moveaxis(_as(dydx, dtype), axis, 0)
    return x, dx, y, axis, dydx


def _hermite(self, x, dx, y, dydx, extrapolate, axis):
    """CubicHermiteSpline's coefficients from the values and slopes (axis first), SciPy's formulas."""
    dxr = np.reshape(dx, (np.shape(dx)[0],) + (1,) * (np.ndim(y) - 1))
    slope = np.diff(y, axis=0) / dxr
    t = (dydx[:-1] + dydx[1:] - 2 * slope) / dxr
    c = np.stack((t / dxr, (slope - dydx[:-1]) / dxr - t, dydx[:-1], y[:-1]))
    _set_traced(self, c, x, True if extrapolate is None else extrapolate, axis)


class CubicHermiteSpline(_TracedPPoly, _si.CubicHermiteSpline):
    """``scipy.interpolate.CubicHermiteSpline``, differentiated in ``x``, ``y``, ``dydx`` and the points.

    >>> import numpy as np, mutagrad as mg
    >>> from mutagrad.scipy.interpolate import CubicHermiteSpline
    >>> s = lambda d: CubicHermiteSpline([0.0, 1.0], [0.0, 0.0], [d, 0.0])(0.5)  # d (1 - t)^2 t at t = 1/2
    >>> float(mg.grad(s)(1.0))
    0.125
    """

    def __init__(self, x, y, dydx, axis=0, extrapolate=None):
        if not _traced(x, y, dydx):
            super().__init__(x, y, dydx, axis, extrapolate)
            return
        plain = _si.CubicHermiteSpline(_plain(_dense(x)), _plain(_dense(y)), _plain(_dense(dydx)), axis, extrapolate)
        x, dx, y, axis, dydx = _prepare_input(x, y, axis, dydx)
        _hermite(self, x, dx, y, dydx, plain.extrapolate, axis)


def _bc_values(bc_type, y, axis):
    """CubicSpline._validate_bc (its checks ran on the plain values): the two conditions, y (complex
    if a derivative value is)."""
    trail = np.shape(y)[1:]
    if isinstance(bc_type, str):
        bc_type = (bc_type, bc_type)
    bc = []
    for side in bc_type:
        if isinstance(side, str):
            bc.append({"clamped": (1, np.zeros(trail)), "natural": (2, np.zeros(trail))}.get(side, side))
        else:
            order, value = side
            value = _dense(value)
            if np.iscomplexobj(bottom(value)):
                y = _as(y, np.complex128)
            bc.append((order, value))
    return bc, y


def _spline_slopes(x, dx, y, bc):
    """CubicSpline's slopes s at the knots, SciPy's systems (its banded solve, differentiated)."""
    from ... import numpy as mnp
    from .linalg import solve_banded

    n = np.shape(x)[0]
    trail, dtype = np.shape(y)[1:], bottom(y).dtype
    dxr = np.reshape(dx, (np.shape(dx)[0],) + (1,) * (np.ndim(y) - 1))
    slope = np.diff(y, axis=0) / dxr
    if n == 2:
        bc = [(1, slope[0]) if side in ("not-a-knot", "periodic") else side for side in bc]
    if n == 3 and bc[0] == "not-a-knot" and bc[1] == "not-a-knot":
        a = mnp.zeros((3, 3))
        a[0, 0] = a[0, 1] = a[2, 1] = a[2, 2] = 1
        a[1, 0] = dx[1]
        a[1, 1] = 2 * (dx[0] + dx[1])
        a[1, 2] = dx[0]
        b = mnp.empty((3,) + trail, dtype=dtype)
        b[0] = 2 * slope[0]
        b[1] = 3 * (dxr[0] * slope[1] + dxr[1] * slope[0])
        b[2] = 2 * slope[1]
        return np.reshape(np.linalg.solve(a, np.reshape(b, (3, -1))), np.shape(b))
    if n == 3 and bc[0] == "periodic":
        t = np.sum(slope / dxr, axis=0) / np.sum(1.0 / dxr, axis=0)
        return np.broadcast_to(t, (n,) + trail)
    a = mnp.zeros((3, n))  # the banded matrix
    b = mnp.empty((n,) + trail, dtype=dtype)
    a[1, 1:-1] = 2 * (dx[:-1] + dx[1:])
    a[0, 2:] = dx[:-1]
    a[-1, :-2] = dx[1:]
    b[1:-1] = 3 * (dxr[1:] * slope[:-1] + dxr[:-1] * slope[1:])
    start, end = bc
    if start == "periodic":  # (n - 1 unknowns; SciPy's condensed system of n - 2 and two solves)
        a = a[:, :-1] * 1.0
        a[1, 0] = 2 * (dx[-1] + dx[0])
        a[0, 1] = dx[-1]
        b = b[:-1] * 1.0
        b[0] = 3 * (dxr[0] * slope[-1] + dxr[-1] * slope[0])
        b[-1] = 3 * (dxr[-1] * slope[-2] + dxr[-2] * slope[-1])
        ac, b1 = a[:, :-1], b[:-1]
        b2 = mnp.zeros(np.shape(b1), dtype=dtype)
        b2[0] = -dx[0]
        b2[-1] = -dx[-3]
        m = np.shape(b1)[0]
        s1 = np.reshape(solve_banded((1, 1), ac, np.reshape(b1, (m, -1))), np.shape(b1))
        s2 = np.reshape(solve_banded((1, 1), ac, np.reshape(b2, (m, -1))), np.shape(b2))
        s_m1 = (b[-1] - dx[-2] * s1[0] - dx[-1] * s1[-1]) / (2 * (dx[-1] + dx[-2]) + dx[-2] * s2[0] + dx[-1] * s2[-1])
        return np.concatenate([s1 + s_m1 * s2, s_m1[None], (s1[0] + s_m1 * s2[0])[None]])
    if start == "not-a-knot":
        a[1, 0] = dx[1]
        a[0, 1] = x[2] - x[0]
        d = x[2] - x[0]
        b[0] = ((dxr[0] + 2 * d) * dxr[1] * slope[0] + dxr[0] ** 2 * slope[1]) / d
    elif start[0] == 1:
        a[1, 0] = 1
        a[0, 1] = 0
        b[0] = start[1]
    elif start[0] == 2:
        a[1, 0] = 2 * dx[0]
        a[0, 1] = dx[0]
        b[0] = -0.5 * start[1] * dx[0] ** 2 + 3 * (y[1] - y[0])
    if end == "not-a-knot":
        a[1, -1] = dx[-2]
        a[-1, -2] = x[-1] - x[-3]
        d = x[-1] - x[-3]
        b[-1] = (dxr[-1] ** 2 * slope[-2] + (2 * d + dxr[-1]) * dxr[-2] * slope[-1]) / d
    elif end[0] == 1:
        a[1, -1] = 1
        a[-1, -2] = 0
        b[-1] = end[1]
    elif end[0] == 2:
        a[1, -1] = 2 * dx[-1]
        a[-1, -2] = dx[-1]
        b[-1] = 0.5 * end[1] * dx[-1] ** 2 + 3 * (y[-1] - y[-2])
    return np.reshape(solve_banded((1, 1), a, np.reshape(b, (n, -1))), np.shape(b))


class CubicSpline(_TracedPPoly, _si.CubicSpline):
    """``scipy.interpolate.CubicSpline``, differentiated in ``x``, ``y``, the boundary values and the points.

    Every ``bc_type`` SciPy takes ('not-a-knot', 'natural', 'clamped', 'periodic', and
    ``((order, value), (order, value))`` with traced values), ``y`` of any shape along ``axis``;
    the slopes from SciPy's (banded) systems, solved with the differentiated
    ``mutagrad.scipy.linalg.solve_banded``. Calls (``nu``, ``extrapolate``), ``derivative``,
    ``antiderivative`` and ``integrate`` as PPoly's; SciPy's values to rounding, SciPy's own object
    and calls with nothing traced. ``roots`` / ``solve`` are SciPy's on plain splines.

    >>> import numpy as np, mutagrad as mg
    >>> from mutagrad.scipy.interpolate import CubicSpline
    >>> x = np.array([0.0, 1.0, 2.0])
    >>> mg.grad(lambda y: CubicSpline(x, y, bc_type="natural")(0.5))(np.zeros(3))  # 13/32, 11/16, -3/32
    array([ 0.40625,  0.6875 , -0.09375])
    """

    def __init__(self, x, y, axis=0, bc_type="not-a-knot", extrapolate=None):
        if not _traced(x, y, bc_type):
            super().__init__(x, y, axis=axis, bc_type=bc_type, extrapolate=extrapolate)
            return
        plain = _si.CubicSpline(_plain(_dense(x)), _plain(_dense(y)), axis, _plain(bc_type), extrapolate)
        x, dx, y, axis, _ = _prepare_input(x, y, axis)
        bc, y = _bc_values(bc_type, y, axis)
        s = np.zeros_like(y) if np.size(bottom(y)) == 0 else _spline_slopes(x, dx, y, bc)
        _hermite(self, x, dx, y, _as(s, bottom(y).dtype), plain.extrapolate, axis)


def _pchip_edge(h0, h1, m0, m1):
    """PchipInterpolator._edge_case: the one-sided three-point slope, shape-preserving."""
    d = ((2 * h0 + h1) * m0 - h0 * m1) / (h0 + h1)
    pd, p0, p1 = bottom(d), bottom(m0), bottom(m1)
    mask = np.sign(pd) != np.sign(p0)
    mask2 = (np.sign(p0) != np.sign(p1)) & (np.abs(pd) > 3.0 * np.abs(p0))
    return np.where(mask, 0.0, np.where(~mask & mask2, 3.0 * m0, d))


def _pchip_slopes(x, y):
    """PchipInterpolator._find_derivatives (x a column against y's trailing axes)."""
    y_shape = np.shape(y)
    if np.ndim(y) == 1:
        x, y = x[:, None], y[:, None]
    hk = x[1:] - x[:-1]
    mk = (y[1:] - y[:-1]) / hk
    if np.shape(y)[0] == 2:  # (two points: the line)
        return np.reshape(np.concatenate([mk, mk]), y_shape)
    pm = bottom(mk)
    smk = np.sign(pm)
    condition = (smk[1:] != smk[:-1]) | (pm[1:] == 0) | (pm[:-1] == 0)
    w1 = 2 * hk[1:] + hk[:-1]
    w2 = hk[1:] + 2 * hk[:-1]
    with np.errstate(divide="ignore", invalid="ignore"):  # (where the condition holds: not taken)
        whmean = (w1 / mk[:-1] + w2 / mk[1:]) / (w1 + w2)
        inner = np.where(condition, 0.0, 1.0 / whmean)
    first = _pchip_edge(hk[0], hk[1], mk[0], mk[1])
    last = _pchip_edge(hk[-1], hk[-2], mk[-1], mk[-2])
    return np.reshape(np.concatenate([first[None], inner, last[None]]), y_shape)


class PchipInterpolator(_TracedPPoly, _si.PchipInterpolator):
    """``scipy.interpolate.PchipInterpolator``, differentiated in ``x``, ``y`` and the points.

    SciPy's slopes (Fritsch-Butland weighted harmonic means, one-sided shape-preserving ends),
    written with np.where on SciPy's tests of the plain values: piecewise smooth in ``y``. Where
    two neighbouring secant slopes differ in sign or one is exactly 0, the slope is 0 and so is its
    derivative (that of the side where the signs differ; from the other side it would not be).

    >>> import numpy as np, mutagrad as mg
    >>> from mutagrad.scipy.interpolate import PchipInterpolator
    >>> x = np.array([0.0, 1.0, 2.0])
    >>> # the slope at 1: 2 m0 m1 / (m0 + m1) of the secant slopes m0 = y1 - y0 = 1, m1 = y2 - y1 = 2
    >>> mg.grad(lambda y: PchipInterpolator(x, y)(1.0, nu=1))(np.array([0.0, 1.0, 3.0]))  # 8/9 (-1, 1, 0) + 2/9 (0, -1, 1)
    array([-0.88888889,  0.66666667,  0.22222222])
    """

    def __init__(self, x, y, axis=0, extrapolate=None):
        if not _traced(x, y):
            super().__init__(x, y, axis, extrapolate)
            return
        plain = _si.PchipInterpolator(_plain(_dense(x)), _plain(_dense(y)), axis, extrapolate)
        x, dx, y, axis, _ = _prepare_input(x, y, axis)
        dk = _pchip_slopes(np.reshape(x, (np.shape(x)[0],) + (1,) * (np.ndim(y) - 1)), y)
        _hermite(self, x, dx, y, dk, plain.extrapolate, axis)


def pchip_interpolate(xi, yi, x, der=0, axis=0):
    """``scipy.interpolate.pchip_interpolate``: ``PchipInterpolator(xi, yi, axis)`` at ``x`` (derivatives ``der``).

    >>> import numpy as np, mutagrad as mg
    >>> from mutagrad.scipy.interpolate import pchip_interpolate
    >>> float(mg.grad(lambda t: pchip_interpolate([0.0, 1.0, 2.0], [0.0, 1.0, 2.0], t))(0.3))  # a line
    1.0
    """
    if not _traced(xi, yi, x):
        return _si.pchip_interpolate(xi, yi, x, der, axis)
    p = PchipInterpolator(xi, yi, axis=axis)
    if der == 0:
        return p(x)
    if np.ndim(der) == 0:
        return p.derivative(der)(x)
    return [p.derivative(nu)(x) for nu in der]


def _akima_slopes(x, dx, y, method):
    """Akima1DInterpolator's slopes (SciPy's arrays, its cutoff on the plain values)."""
    from ... import numpy as mnp

    if np.shape(y)[0] == 2:
        xv = np.reshape(x, (np.shape(x)[0],) + (1,) * (np.ndim(y) - 1))
        mk = (y[1:] - y[:-1]) / (xv[1:] - xv[:-1])
        return np.broadcast_to(mk, np.shape(y)) * 1.0
    m = mnp.empty((np.shape(x)[0] + 3,) + np.shape(y)[1:])
    dxr = dx[(slice(None),) + (None,) * (np.ndim(y) - 1)]
    m[2:-2] = np.diff(y, axis=0) / dxr
    m[1] = 2.0 * m[2] - m[3]
    m[0] = 2.0 * m[1] - m[2]
    m[-2] = 2.0 * m[-3] - m[-4]
    m[-1] = 2.0 * m[-2] - m[-3]
    t = 0.5 * (m[3:] + m[:-3])
    dm = np.abs(np.diff(m, axis=0))
    if method == "makima":
        pm = np.abs(m[1:] + m[:-1])
        f1 = dm[2:] + 0.5 * pm[2:]
        f2 = dm[:-2] + 0.5 * pm[:-2]
    else:
        f1, f2 = dm[2:], dm[:-2]
    f12 = f1 + f2
    p12 = np.asarray(bottom(f12))
    mmax = np.max(p12) if p12.size > 0 else -np.inf
    ind = np.nonzero(p12 > 1.0e-9 * mmax)
    x_ind, y_ind = ind[0], ind[1:]
    t[ind] = m[(x_ind + 1,) + y_ind] + (f2[ind] / f12[ind]) * (m[(x_ind + 2,) + y_ind] - m[(x_ind + 1,) + y_ind])
    return t


class Akima1DInterpolator(_TracedPPoly, _si.Akima1DInterpolator):
    """``scipy.interpolate.Akima1DInterpolator`` ('akima', 'makima'), differentiated in ``x``, ``y`` and the points.

    SciPy's slopes, its weights ``|m[i+1] - m[i]|`` (makima: plus ``|m[i+1] + m[i]| / 2``) with
    np.abs, whose derivative at 0 is 0 (equal neighbouring secant slopes), and its fallback to
    the mean of the neighbouring slopes where ``f1 + f2 <= 1e-9 max(f1 + f2)`` (chosen on the plain
    values). ``extrapolate`` defaults to False, as SciPy's does.

    >>> import numpy as np, mutagrad as mg
    >>> from mutagrad.scipy.interpolate import Akima1DInterpolator
    >>> x = np.arange(5.0)
    >>> float(mg.grad(lambda p: Akima1DInterpolator(x, p * x)(2.5))(1.0))  # a line: p x at 2.5
    2.5
    """

    def __init__(self, x, y, axis=0, *, method="akima", extrapolate=None):
        if not _traced(x, y):
            super().__init__(x, y, axis, method=method, extrapolate=extrapolate)
            return
        plain = _si.Akima1DInterpolator(_plain(_dense(x)), _plain(_dense(y)), axis, method=method,
                                        extrapolate=extrapolate)
        x, dx, y, axis, _ = _prepare_input(x, y, axis)
        _hermite(self, x, dx, y, _akima_slopes(x, dx, y, method), plain.extrapolate, axis)


# -- B-splines ------------------------------------------------------------------------------


def _bspl_intervals(t, k, v, extrapolate):
    """SciPy's _find_interval for each of the plain points ``v``: the last l in [k, n - 1] with
    t[l] <= v (l = k below t[k]); valid is False for NaN and, without extrapolation, outside [t[k], t[n]]."""
    n = t.shape[0] - k - 1
    ell = np.clip(np.searchsorted(t, v, side="right") - 1, k, n - 1)
    valid = ~np.isnan(v) & (bool(extrapolate) | ((t[k] <= v) & (v <= t[n])))
    return ell, valid


def _deboor(t, x, k, ell, nu):
    """SciPy's _deBoor_D at each point: the k + 1 B-splines (their nu-th derivatives) nonzero on
    [t[ell], t[ell + 1]), B_{ell-k}, ..., B_{ell}, as a list of arrays (one value per point)."""
    h = [np.ones(np.shape(ell))]
    for j in range(1, k + 1):
        hh, h = h, [0.0] * (j + 1)
        for n in range(1, j + 1):
            xb, xa = t[ell + n], t[ell + n - j]
            if j <= k - nu:  # (the values)
                w = hh[n - 1] / (xb - xa)
                h[n - 1] = h[n - 1] + w * (xb - x)
                h[n] = w * (x - xa)
            else:  # (the derivative recursions)
                w = j * hh[n - 1] / (xb - xa)
                h[n - 1] = h[n - 1] - w
                h[n] = w
    if nu > k:  # (SciPy: the derivatives of order above k are zero)
        h = [np.zeros(np.shape(ell))] * (k + 1)
    return h


def _bspl_eval(t, c, k, x, nu, extrapolate):
    """BSpline's evaluation at the 1-d points ``x`` (c: (n, ...)): shape (len(x),) + c.shape[1:]."""
    if extrapolate == "periodic":
        n = np.shape(t)[0] - k - 1
        x = t[k] + (x - t[k]) % (t[n] - t[k])
        extrapolate = False
    tp = np.asarray(bottom(t))
    ell, valid = _bspl_intervals(tp, k, np.asarray(bottom(x)), extrapolate)
    every = bool(np.all(valid))
    if not every:
        x = np.where(valid, x, tp[ell])
    h = _deboor(t, x, k, ell, nu)
    out = None
    for a in range(k + 1):
        term = c[ell + a - k] * _column(h[a], np.ndim(c))
        out = term if out is None else out + term
    if not every:
        out = np.where(_column(valid, np.ndim(out)), out, np.nan)
    return out


def _padded(t, c):
    """c padded with zeros to the length of t (FITPACK's convention, as SciPy pads it)."""
    ct = np.shape(t)[0] - np.shape(c)[0]
    if ct > 0:
        c = np.concatenate([c, np.zeros((ct,) + np.shape(c)[1:], dtype=bottom(c).dtype)])
    return c


def _splder(t, c, k, n):
    """SciPy's splder (its check of repeated interior knots on the plain values)."""
    if n < 0:
        return _splantider(t, c, k, -n)
    if n > k:
        raise ValueError(f"Order of derivative (n = {n!r}) must be <= order of spline (k = {k!r})")
    sh = (slice(None),) + (None,) * (np.ndim(c) - 1)
    for _ in range(n):
        dt = t[k + 1:-1] - t[1:-k - 1]
        if np.any(np.asarray(bottom(dt)) == 0):
            raise ValueError(f"The spline has internal repeated knots and is not differentiable {n} times")
        c = (c[1:-1 - k] - c[:-2 - k]) * k / dt[sh]
        c = np.concatenate([c, np.zeros((k,) + np.shape(c)[1:], dtype=bottom(c).dtype)])
        t = t[1:-1]
        k -= 1
    return t, c, k


def _splantider(t, c, k, n):
    """SciPy's splantider."""
    if n < 0:
        return _splder(t, c, k, -n)
    sh = (slice(None),) + (None,) * (np.ndim(c) - 1)
    for _ in range(n):
        dt = t[k + 1:] - t[:-k - 1]
        c = np.cumsum(c[:-k - 1] * dt[sh], axis=0) / (k + 1)
        c = np.concatenate([np.zeros((1,) + np.shape(c)[1:], dtype=bottom(c).dtype), c,
                            np.stack([c[-1]] * (k + 2))])
        t = np.concatenate([t[:1], t, t[-1:]])
        k += 1
    return t, c, k


def _bspline(cls, t, c, k, extrapolate, axis):
    """BSpline.construct_fast, traced or plain."""
    self = object.__new__(cls)
    self._t, self._c, self.k, self.extrapolate, self.axis = t, c, k, extrapolate, axis
    self._asarray = np.asarray
    return self


class BSpline(_TracedCall, _si.BSpline):
    """``scipy.interpolate.BSpline``, differentiated in ``c``, the knots ``t`` and the points.

    Evaluation (``nu``, ``extrapolate`` incl. 'periodic'), ``derivative``, ``antiderivative`` and
    ``integrate`` as SciPy computes them (de Boor's recursion, ``splder``, ``splantider``); the
    interval of a point from the plain knots: the last ``l`` in ``[k, n - 1]`` with ``t[l] <= x``.
    Traced knots are differentiated where the spline is a smooth function of them (a point or an
    integration bound on a knot takes that interval's polynomial). ``integrate`` evaluates the
    antiderivative, where SciPy's 1-d ``extrapolate=False`` case calls FITPACK's splint: equal to
    rounding. SciPy's own object and calls with nothing traced.

    >>> import numpy as np, mutagrad as mg
    >>> from mutagrad.scipy.interpolate import BSpline
    >>> t = np.array([0.0, 0.0, 1.0, 2.0, 2.0])  # linear: hat functions at 0, 1, 2
    >>> mg.grad(lambda c: BSpline(t, c, 1)(0.25))(np.zeros(3))
    array([0.75, 0.25, 0.  ])
    """

    def __init__(self, t, c, k, extrapolate=True, axis=0):
        if not _traced(t, c):
            super().__init__(t, c, k, extrapolate, axis)
            return
        plain = _si.BSpline(_plain(_dense(t)), _plain(_dense(c)), k, extrapolate, axis)  # (SciPy's checks)
        c = _float_or_complex(c)
        if plain.axis != 0:
            c = np.moveaxis(c, plain.axis, 0)
        self._t, self._c, self.k = _as(t, np.float64), c, plain.k
        self.extrapolate, self.axis, self._asarray = plain.extrapolate, plain.axis, np.asarray

    _HELD = ("_c", "_t")
    t = _held("_t")
    c = _held("_c")

    def _traced_evaluate(self, xs, nu, extrapolate):
        return _bspl_eval(self._t, self._c, self.k, xs, nu, extrapolate)

    def derivative(self, nu=1):
        if not self._is_traced():
            return super().derivative(nu)
        t, c, k = _splder(self._t, _padded(self._t, self._c), self.k, nu)
        return _bspline(type(self), t, c, k, self.extrapolate, self.axis)

    def antiderivative(self, nu=1):
        if not self._is_traced():
            return super().antiderivative(nu)
        t, c, k = _splantider(self._t, _padded(self._t, self._c), self.k, nu)
        extrapolate = False if self.extrapolate == "periodic" else self.extrapolate
        return _bspline(type(self), t, c, k, extrapolate, self.axis)

    def integrate(self, a, b, extrapolate=None):
        if not (self._is_traced() or _traced(a, b)):
            return super().integrate(a, b, extrapolate)
        if extrapolate is None:
            extrapolate = self.extrapolate
        sign = 1
        if bottom(b) < bottom(a):
            a, b, sign = b, a, -1
        k, t = self.k, self._t
        n = np.shape(t)[0] - k - 1
        if extrapolate != "periodic" and not extrapolate:  # (the integration interval shrunk to the base one)
            if bottom(a) < bottom(t[k]):
                a = t[k]
            if bottom(b) > bottom(t[n]):
                b = t[n]
        ta, ca, ka = _splantider(t, _padded(t, self._c), k, 1)

        def between(lo, hi, extra):
            out = _bspl_eval(ta, ca, ka, _stack_points(lo, hi), 0, extra)
            return out[1] - out[0]

        if extrapolate == "periodic":
            ts, te = t[k], t[n]
            period = te - ts
            interval = b - a
            n_periods, left = np.floor_divide(bottom(interval), bottom(period)), np.remainder(interval, period)
            total = between(ts, te, False) * n_periods if n_periods > 0 else 0.0 * ca[0]
            a = ts + (a - ts) % period
            b = a + left
            if bottom(b) <= bottom(te):
                total = total + between(a, b, False)
            else:
                total = total + between(a, te, False)
                total = total + between(ts, ts + b - te, False)
        else:
            total = between(a, b, extrapolate)
        return np.reshape(total * sign, np.shape(ca)[1:])

    def _plain_only(self, name):
        raise _escape(f"BSpline.{name} of a spline with traced coefficients or knots",
                      "Call it on a spline made from plain values (mg.value(...) of them).")

    def insert_knot(self, x, m=1):
        if self._is_traced() or _traced(x):
            self._plain_only("insert_knot")
        return super().insert_knot(x, m)


def _stack_points(a, b):
    """[a, b] as a 1-d float64 array (either may be traced)."""
    return np.stack([_as(a, np.float64), _as(b, np.float64)])


def _ours(spl):
    """SciPy's BSpline as this module's (the same arrays: SciPy's values and calls)."""
    return _bspline(BSpline, spl._t, spl._c, spl.k, spl.extrapolate, spl.axis) if type(spl) is _si.BSpline else spl


def _repeat_end(x, k, first):
    """x[0] (or x[-1]) k times."""
    return x[np.full(k, 0 if first else -1)]


def _not_a_knot(x, k):
    """SciPy's _not_a_knot knots from x (traced or plain)."""
    if k % 2 == 1:
        k2, t = (k + 1) // 2, x
    else:
        k2, t = k // 2, (x[1:] + x[:-1]) / 2
    return np.concatenate([_repeat_end(x, k + 1, True), t[k2:-k2], _repeat_end(x, k + 1, False)])


def _periodic_knots(x, k):
    """SciPy's _periodic_knots from x (traced or plain)."""
    n = np.shape(x)[0]
    xc = x
    if k % 2 == 0:
        dx = np.diff(xc)
        xc = np.concatenate([xc[:1], xc[1:-1] - dx[:-1] / 2, xc[-1:]])
    dx = np.diff(xc)
    left, right = [], []
    lo, hi = xc[0], xc[-1]
    for i in range(k):
        lo = lo - dx[-(i % (n - 1)) - 1]
        hi = hi + dx[i % (n - 1)]
        left.append(lo)
        right.append(hi)
    return np.concatenate([np.stack(left[::-1]), xc, np.stack(right)])


def _deriv_spec(deriv, trail):
    """SciPy's _convert_string_aliases and _process_deriv_spec: (orders, values stacked) or ([], None)."""
    if isinstance(deriv, str):
        if deriv == "clamped":
            deriv = [(1, np.zeros(trail))]
        elif deriv == "natural":
            deriv = [(2, np.zeros(trail))]
    if deriv is None:
        return [], None
    ords, vals = zip(*deriv)
    return [int(o) for o in ords], np.stack([_float_or_complex(v) for v in vals])


def _scatter_rows(ab, rows, cols0, vals, k):
    """Rows of a matrix with bandwidths (k, k), k + 1 values each from column cols0[i], into its band."""
    width = np.shape(vals)[1]
    r = np.repeat(rows, width)
    cl = (cols0[:, None] + np.arange(width)).ravel()
    ab[k + r - cl, cl] = np.reshape(vals, (-1,))


def _basis_rows(t, k, x, nu, left=None):
    """The nonzero B-splines (their nu-th derivatives) at the points x: (values (m, k + 1), first column)."""
    if left is None:
        left = _bspl_intervals(np.asarray(bottom(t)), k, np.asarray(bottom(x)), False)[0]
    return np.stack(_deboor(t, x, k, left, nu), axis=1), left - k


def make_interp_spline(x, y, k=3, t=None, bc_type=None, axis=0, check_finite=True):
    """``scipy.interpolate.make_interp_spline``: a differentiable ``BSpline`` through the data.

    Differentiated in ``y``, the boundary derivative values in ``bc_type``, the abscissae ``x``
    (through the knots made from them, or the given ``t``) and, through the spline, the points.
    SciPy's knots, collocation matrix and boundary rows; the banded system solved with the
    differentiated ``mutagrad.scipy.linalg.solve_banded``, the periodic one (SciPy: Woodbury's
    formula) with np.linalg.solve: SciPy's values to rounding. With nothing traced, SciPy's own spline
    (as this module's BSpline, whose calls with plain points are SciPy's).

    >>> import numpy as np, mutagrad as mg
    >>> from mutagrad.scipy.interpolate import make_interp_spline
    >>> x = np.array([0.0, 1.0, 2.0])
    >>> mg.grad(lambda y: make_interp_spline(x, y, k=1)(0.5))(np.zeros(3))
    array([0.5, 0.5, 0. ])
    """
    if not _traced(x, y, t, bc_type):
        return _ours(_si.make_interp_spline(x, y, k, t, bc_type, axis, check_finite))
    plain = _si.make_interp_spline(_plain(_dense(x)), _plain(_dense(y)), k, _plain(_dense(t)) if t is not None else None,
                                   _plain(bc_type), axis, check_finite)  # (SciPy's checks)
    if bc_type is None or bc_type == "not-a-knot" or bc_type == "periodic":
        deriv_l = deriv_r = None
    elif isinstance(bc_type, str):
        deriv_l = deriv_r = bc_type
    else:
        deriv_l, deriv_r = bc_type
    x, y = _as(x, np.float64), _float_or_complex(y)
    axis = plain.axis
    y = np.moveaxis(y, axis, 0)
    if k == 0:
        return _bspline(BSpline, np.concatenate([x, x[-1:]]), y, k, True, axis)
    if k == 1 and t is None:
        return _bspline(BSpline, np.concatenate([x[:1], x, x[-1:]]), y, k, True, axis)
    if t is None:
        if not isinstance(x, Tracer):
            t = plain._t
        elif deriv_l is None and deriv_r is None:
            t = _periodic_knots(x, k) if bc_type == "periodic" else _not_a_knot(x, k)
        else:
            t = np.concatenate([_repeat_end(x, k, True), x, _repeat_end(x, k, False)])
    t = _as(t, np.float64)
    if bc_type == "periodic":
        return _bspline(BSpline, t, _periodic_coefficients(x, y, t, k), k, "periodic", axis)
    trail = np.shape(y)[1:]
    ords_l, vals_l = _deriv_spec(deriv_l, trail)
    ords_r, vals_r = _deriv_spec(deriv_r, trail)
    nleft, nright, n = len(ords_l), len(ords_r), np.shape(x)[0]
    nt = np.shape(t)[0] - k - 1
    if np.size(bottom(y)) == 0:
        return _bspline(BSpline, t, np.zeros((nt,) + trail), k, True, axis)
    build = _mnp() if _traced(x, t) else np
    ab = build.zeros((2 * k + 1, nt))
    vals, cols = _basis_rows(t, k, x, 0)
    _scatter_rows(ab, nleft + np.arange(n), cols, vals, k)
    for ords, at, offset in ((ords_l, x[:1], 0), (ords_r, x[-1:], nt - nright)):
        for row, nu in enumerate(ords):
            vals, cols = _basis_rows(t, k, at, nu)
            _scatter_rows(ab, np.array([offset + row]), cols, vals, k)
    extradim = math.prod(trail)
    parts = [np.reshape(y, (-1, extradim))]
    if nleft:
        parts.insert(0, np.reshape(vals_l, (-1, extradim)))
    if nright:
        parts.append(np.reshape(vals_r, (-1, extradim)))
    rhs = np.concatenate(parts) if len(parts) > 1 else parts[0]
    from .linalg import solve_banded

    c = solve_banded((k, k), ab, rhs)
    return _bspline(BSpline, t, np.reshape(c, (nt,) + trail), k, True, axis)


def _periodic_coefficients(x, y, t, k):
    """SciPy's _make_interp_per_full_matr for every column of y at once: continuity of the k - 1
    derivatives at the ends and interpolation, one dense system of n + k - 1 equations."""
    n = np.shape(x)[0]
    build = _mnp() if _traced(x, t) else np
    matr = build.zeros((n + k - 1, n + k - 1))
    tp = np.asarray(bottom(t))
    for i in range(k - 1):
        bb = _deboor(t, x[:1], k, np.array([k]), i + 1)
        matr[i, :k + 1] += np.concatenate(bb)
        bb = _deboor(t, x[-1:], k, np.array([n + k - 1]), i + 1)
        matr[i, -k:] -= np.concatenate(bb[:-1])
    xp = np.asarray(bottom(x))
    left = np.where(xp == tp[k], k, np.searchsorted(tp, xp) - 1)
    vals, cols = _basis_rows(t, k, x, 0, left)
    rows = np.repeat(np.arange(n) + k - 1, k + 1)
    matr[rows, (cols[:, None] + np.arange(k + 1)).ravel()] = np.reshape(vals, (-1,))
    trail = np.shape(y)[1:]
    yy = np.reshape(y, (n, -1))
    rhs = np.concatenate([np.zeros((k - 1, np.shape(yy)[1]), dtype=bottom(yy).dtype), yy])
    return np.reshape(np.linalg.solve(matr, rhs), (n + k - 1,) + trail)


# -- interp1d -------------------------------------------------------------------------------


def _fill_pair(fill_value, shape):
    """interp1d's fill_value setter (not 'extrapolate'): the values below and above, each broadcast
    to the shape of y without its axis and raveled (SciPy's _check_broadcast_up_to)."""
    shape = shape or (1,)

    def up(v):
        v = _dense(v)
        if np.size(bottom(v)) != 1 and np.shape(v) != shape:
            v = np.ones(shape, bottom(v).dtype) * v
        return np.ravel(v)

    if isinstance(fill_value, tuple) and len(fill_value) == 2:
        return up(fill_value[0]), up(fill_value[1])
    return (up(fill_value),) * 2


class interp1d(_si.interp1d):
    """``scipy.interpolate.interp1d`` (legacy), differentiated in ``y``, ``x``, the fill values and the points.

    Every kind: 'linear' (np.interp where SciPy calls it, else its slopes), 'nearest',
    'nearest-up', 'previous', 'next' (gathers: piecewise constant, derivative in ``y`` only),
    'zero', 'slinear', 'quadratic', 'cubic' and integer orders (``make_interp_spline``'s spline, as
    SciPy makes it); ``fill_value`` a value, a ``(below, above)`` pair (traced too) or
    'extrapolate'; ``bounds_error``, ``assume_sorted`` (the order from the plain ``x``), ``axis``.
    The object is SciPy's, made from the plain values (its checks, sorting, kind and bounds
    logic), holding the traced arrays; a call with nothing traced is SciPy's own.

    >>> import numpy as np, mutagrad as mg
    >>> from mutagrad.scipy.interpolate import interp1d
    >>> x = np.array([0.0, 1.0, 2.0])
    >>> mg.grad(lambda y: interp1d(x, y)(0.25))(np.zeros(3))
    array([0.75, 0.25, 0.  ])
    """

    def __init__(self, x, y, kind="linear", axis=-1, copy=True, bounds_error=None, fill_value=np.nan,
                 assume_sorted=False):
        traced = _traced(x, y, fill_value)
        super().__init__(_plain(_dense(x)), _plain(_dense(y)), kind, axis, copy, bounds_error,
                         _plain(fill_value), assume_sorted)
        self._mg_traced = traced
        if not traced:
            return
        x, y = _dense(x), _dense(y)
        if not assume_sorted:
            ind = np.argsort(np.asarray(bottom(x)), kind="mergesort")
            x, y = x[ind], np.take(y, ind, axis=self.axis)
        y = _inexact(y)
        self.x, self.y = x, y
        self._y = np.reshape(np.moveaxis(y, self.axis, 0), (np.shape(y)[self.axis], -1))
        if self._kind == "spline" and self._call is type(self)._call_spline:
            self._spline = make_interp_spline(self.x, self._y, k=self._spline.k, check_finite=False)
        if self._extrapolate:
            return
        if self._kind in ("previous", "next") and isinstance(fill_value, str) and fill_value == "extrapolate":
            fill_value = (np.nan, np.take(y, -1, self.axis)) if self._kind == "previous" else \
                (np.take(y, 0, self.axis), np.nan)
        self._fill_value_below, self._fill_value_above = _fill_pair(
            fill_value, np.shape(y)[:self.axis] + np.shape(y)[self.axis + 1:])

    def __call__(self, x):
        if not (getattr(self, "_mg_traced", False) or _traced(x)):
            return super().__call__(x)
        x = _inexact(x)
        x_shape = np.shape(x)
        return self._finish_y(self._evaluate_traced(np.ravel(x)), x_shape)

    def _evaluate_traced(self, x_new):
        """SciPy's _evaluate and _call_* with NumPy operations (the indices from the plain values)."""
        xp, tp = np.asarray(bottom(self.x)), np.asarray(bottom(x_new))
        n, call = len(xp), self._call
        if call is _si.interp1d._call_linear_np:
            y_new = np.interp(x_new, self.x, self.y)
        elif call is _si.interp1d._call_linear:
            hi = np.clip(np.searchsorted(xp, tp), 1, n - 1).astype(int)
            lo = hi - 1
            x_lo, x_hi, y_lo, y_hi = self.x[lo], self.x[hi], self._y[lo], self._y[hi]
            slope = (y_hi - y_lo) / (x_hi - x_lo)[:, None]
            y_new = slope * (x_new - x_lo)[:, None] + y_lo
        elif call is _si.interp1d._call_nearest:
            y_new = self._y[np.clip(np.searchsorted(self.x_bds, tp, side=self._side), 0, n - 1).astype(np.intp)]
        elif call is _si.interp1d._call_previousnext:
            idx = np.clip(np.searchsorted(self._x_shift, tp, side=self._side), 1 - self._ind, n - self._ind)
            y_new = self._y[idx.astype(np.intp) + self._ind - 1]
        elif call is _si.interp1d._call_spline:
            spline = self._spline
            if not isinstance(spline, BSpline):  # (SciPy's own, of plain data: called at traced points, regress108)
                spline = BSpline(spline.t, spline.c, spline.k, extrapolate=spline.extrapolate, axis=spline.axis)
            y_new = spline(x_new)
        else:  # (_call_nan_spline: NaN in the data)
            y_new = np.full(np.shape(tp) + np.shape(self._y)[1:], np.nan)
        if not self._extrapolate:
            below, above = tp < xp[0], tp > xp[-1]
            if self.bounds_error and below.any():
                raise ValueError(f"A value ({tp[np.argmax(below)]}) in x_new is below "
                                 f"the interpolation range's minimum value ({xp[0]}).")
            if self.bounds_error and above.any():
                raise ValueError(f"A value ({tp[np.argmax(above)]}) in x_new is above "
                                 f"the interpolation range's maximum value ({xp[-1]}).")
            if np.shape(y_new)[0] > 0 and (below.any() or above.any()):
                y_new = np.where(_column(below, np.ndim(y_new)), self._fill_value_below,
                                 np.where(_column(above, np.ndim(y_new)), self._fill_value_above, y_new))
        return y_new


# -- regular grids --------------------------------------------------------------------------


def _coordinates(xi, ndim):
    """SciPy's _ndim_coords_from_arrays for coordinates that may be traced."""
    if isinstance(xi, tuple) and len(xi) == 1:
        xi = xi[0]
    if isinstance(xi, tuple):
        p = np.broadcast_arrays(*[_as(v, np.float64) for v in xi])
        return np.stack(p, axis=-1)
    xi = _dense(xi)
    if np.ndim(xi) == 1:
        xi = np.reshape(xi, (-1, ndim))
    return xi


class RegularGridInterpolator(_si.RegularGridInterpolator):
    """``scipy.interpolate.RegularGridInterpolator``, differentiated in ``values``, the points ``xi``,
    ``fill_value`` and the grid.

    'linear' (SciPy's weights, its 2-d fast path's order of operations; ``fill_value=None``
    extrapolates the edge cells) and 'nearest' (a gather: derivative in ``values`` only), as SciPy
    computes them; the spline methods with the interpolating spline of ``make_interp_spline``:
    'slinear_legacy', 'cubic_legacy', 'quintic_legacy' and 'pchip' point by point as SciPy does,
    and 'slinear', 'cubic', 'quintic' as the tensor-product interpolating spline, made axis by axis,
    with ``nu``: its values SciPy's own (SciPy solves for the spline iteratively, scipy.sparse.linalg.gcrotmk
    to atol=1e-6 by default, or with the ``solver`` given), its derivatives the exact spline's. Cell indices from the plain values, as
    SciPy finds them. The object is SciPy's, made from the plain values, holding the traced
    arrays; a call with nothing traced is SciPy's own.

    >>> import numpy as np, mutagrad as mg
    >>> from mutagrad.scipy.interpolate import RegularGridInterpolator
    >>> g = (np.array([0.0, 1.0]), np.array([0.0, 1.0]))
    >>> mg.grad(lambda v: RegularGridInterpolator(g, v)([0.25, 0.5])[0])(np.zeros((2, 2)))
    array([[0.375, 0.375],
           [0.125, 0.125]])
    """

    def __init__(self, points, values, method="linear", bounds_error=True, fill_value=np.nan, *, solver=None,
                 solver_args=None):
        traced = _traced(points, values, fill_value)
        super().__init__(_plain(points) if traced else points, _plain(_dense(values)) if traced else values, method,
                         bounds_error, _plain(fill_value), solver=solver, solver_args=solver_args)
        self._mg_traced = traced
        if not traced:
            return
        grid = []
        for i, p in enumerate(points):
            p = _as(p, np.float64)
            grid.append(np.flip(p) if i in self._descending_dimensions else p)
        values = _inexact(values)
        if self._descending_dimensions:
            values = np.flip(values, axis=self._descending_dimensions)
        self._grid, self._values, self.fill_value = tuple(grid), values, _dense(fill_value)

    def __call__(self, xi, method=None, *, nu=None):
        if not (getattr(self, "_mg_traced", False) or _traced(xi)):
            return super().__call__(xi, method, nu=nu)
        method = self.method if method is None else method
        if method not in self._ALL_METHODS:
            raise ValueError(f"Method '{method}' is not defined")
        if nu is not None and method not in self._SPLINE_METHODS_ndbspl:
            raise ValueError(f"Can only compute derivatives for methods {self._SPLINE_METHODS_ndbspl}, "
                             f"got {method =}.")
        if method in self._SPLINE_METHODS and method != self.method:
            self._validate_grid_dimensions(self._grid, method)
        ndim = len(self._grid)
        xi = _as(_coordinates(xi, ndim), np.float64)
        if np.shape(xi)[-1] != ndim:
            raise ValueError(f"The requested sample points xi have dimension {np.shape(xi)[-1]} but this "
                             f"RegularGridInterpolator has dimension {ndim}")
        xi_shape = np.shape(xi)
        xi = np.reshape(xi, (-1, ndim))
        pxi = np.asarray(bottom(xi))
        grids = [np.asarray(bottom(g)) for g in self._grid]
        nans = np.any(np.isnan(pxi), axis=-1)
        if self.bounds_error:
            for i, p in enumerate(pxi.T):
                if not np.logical_and(np.all(grids[i][0] <= p), np.all(p <= grids[i][-1])):
                    raise ValueError(f"One of the requested xi is out of bounds in dimension {i}")
        safe = np.where(nans[:, None], np.array([g[0] for g in grids]), xi) if nans.any() else xi
        if method in ("linear", "nearest"):
            result = self._cells(safe, method)
        elif method in self._SPLINE_METHODS_recursive:
            result = self._recursive(safe, method)
        else:
            result = _ndspline_eval(self._grid, self._values, self._SPLINE_DEGREE_MAP[method], safe, nu)
            # SciPy's values are its solver's (gcrotmk to atol 1e-6 by default, or the one given): its own
            # spline's, made from the plain values, at the plain points; the derivatives the exact spline's
            result = _with_value(result, lambda: self._plain_spline(method)(np.asarray(bottom(safe)), nu=nu))
        trail = np.shape(self._values)[ndim:]
        mask = nans
        if not self.bounds_error and self.fill_value is not None:
            oob = np.zeros(len(pxi), dtype=bool)
            for p, g in zip(pxi.T, grids):
                oob |= (p < g[0]) | (p > g[-1])
            if oob.any():
                result = np.where(_column(oob, np.ndim(result)), self.fill_value, result)
        if mask.any():
            result = np.where(_column(mask, np.ndim(result)), np.nan, result)
        return np.reshape(result, xi_shape[:-1] + trail)

    def _plain_spline(self, method):
        """SciPy's NdBSpline of the plain values for ``method`` (the one __init__ made, with its solver)."""
        if method == self.method and getattr(self, "_spline", None) is not None:
            return self._spline
        plain = _si.RegularGridInterpolator(tuple(np.asarray(bottom(g)) for g in self._grid),
                                            np.asarray(bottom(self._values)), method=method)
        return plain._spline

    def _cells(self, xi, method):
        """find_indices, then _evaluate_linear (or the 2-d fast path's sum) or _evaluate_nearest."""
        indices, distances = [], []
        for d, g in enumerate(self._grid):
            x = xi[:, d]
            gp = np.asarray(bottom(g))
            if gp.shape[0] == 1:  # (SciPy's length-one axes: index -1, distance 0)
                indices.append(np.full(np.shape(x), -1))
                distances.append(np.zeros(np.shape(x)))
                continue
            i = _intervals(gp, np.asarray(bottom(x)), True)[0]
            indices.append(i)
            distances.append((x - g[i]) / (g[i + 1] - g[i]))
        values = self._values
        if method == "nearest":
            return values[tuple(np.where(np.asarray(bottom(d)) <= 0.5, i, i + 1) for i, d in zip(indices, distances))]
        if (len(indices) == 2 and np.ndim(values) == 2 and bottom(values).dtype in (np.float64, np.complex128)
                and all(np.asarray(bottom(g)).shape[0] > 1 for g in self._grid)):  # (SciPy's evaluate_linear_2d)
            (i0, i1), (y0, y1) = indices, distances
            return (values[i0, i1] * (1 - y0) * (1 - y1) + values[i0, i1 + 1] * (1 - y0) * y1
                    + values[i0 + 1, i1] * y0 * (1 - y1) + values[i0 + 1, i1 + 1] * y0 * y1)
        vslice = (slice(None),) + (None,) * (np.ndim(values) - len(indices))
        value = None
        for h in itertools.product(*zip(zip(indices, [1 - d for d in distances]),
                                        zip([i + 1 for i in indices], distances))):
            edge, weights = zip(*h)
            weight = None
            for w in weights:
                weight = w if weight is None else weight * w
            term = values[edge] * weight[vslice]
            value = term if value is None else value + term
        return value

    def _recursive(self, xi, method):
        """SciPy's _evaluate_spline: 1-d interpolation along the last axis for every point, then folded
        point by point along the others (make_interp_spline or PchipInterpolator each time)."""
        n = len(self._grid)
        axes = tuple(range(np.ndim(self._values)))
        values = np.transpose(self._values, axes[:n][::-1] + axes[n:])
        k = self._SPLINE_DEGREE_MAP[method]

        def fit(x, y, pt):
            if method == "pchip":
                return PchipInterpolator(x, y, axis=0)(pt)
            return make_interp_spline(x, y, k=k, axis=0)(pt)

        first = fit(self._grid[n - 1], values, xi[:, n - 1])
        rows = []
        for j in range(np.shape(xi)[0]):
            folded = first[j]
            for i in range(n - 2, -1, -1):
                folded = fit(self._grid[i], folded, xi[j, i])
            rows.append(folded)
        return np.stack(rows)


def _ndspline_eval(grid, values, k, xi, nu):
    """The tensor-product not-a-knot spline of degree k through values on the grid (its coefficients
    solved axis by axis with make_interp_spline) at the points xi, derivatives nu per axis."""
    ndim = len(grid)
    c, knots = values, []
    for d in range(ndim):
        spl = make_interp_spline(grid[d], c, k=k, axis=d)
        knots.append(spl._t)
        c = np.moveaxis(spl._c, 0, d)
    nu = (0,) * ndim if nu is None else tuple(int(v) for v in nu)
    if len(nu) != ndim:
        raise ValueError(f"invalid number of derivative orders {nu = } for ndim = {ndim}.")
    if any(v < 0 for v in nu):
        raise ValueError(f"derivatives must be positive, got {nu = }")
    basis, firsts = [], []
    for d in range(ndim):
        tp = np.asarray(bottom(knots[d]))
        ell, _ = _bspl_intervals(tp, k, np.asarray(bottom(xi[:, d])), True)
        basis.append(_deboor(knots[d], xi[:, d], k, ell, nu[d]))
        firsts.append(ell - k)
    vslice = (slice(None),) + (None,) * (np.ndim(c) - ndim)
    out = None
    for idx in itertools.product(range(k + 1), repeat=ndim):
        factor = None
        for d, a in enumerate(idx):
            factor = basis[d][a] if factor is None else factor * basis[d][a]
        term = c[tuple(f + a for f, a in zip(firsts, idx))] * factor[vslice]
        out = term if out is None else out + term
    return out


def interpn(points, values, xi, method="linear", bounds_error=True, fill_value=np.nan):
    """``scipy.interpolate.interpn``: ``RegularGridInterpolator(points, values, method, ...)(xi)``,
    differentiated as it is ('splinef2d' is SciPy's: plain values only).

    >>> import numpy as np, mutagrad as mg
    >>> from mutagrad.scipy.interpolate import interpn
    >>> g = (np.array([0.0, 1.0, 2.0]),)
    >>> mg.grad(lambda t: interpn(g, np.array([0.0, 1.0, 4.0]), t)[0])(np.array([1.5]))  # the slope 4 - 1
    array([3.])
    """
    if not _traced(points, values, xi, fill_value) or method == "splinef2d":
        return _si.interpn(points, values, xi, method, bounds_error, fill_value)
    plain_grid = _si._rgi._check_points(_plain(points))[0]
    ndim = np.ndim(bottom(_dense(values)))
    if len(points) > ndim:
        raise ValueError(f"There are {len(points)} point arrays, but values has {ndim} dimensions")
    xi = _coordinates(xi, len(plain_grid))
    if np.shape(xi)[-1] != len(plain_grid):
        raise ValueError(f"The requested sample points xi have dimension {np.shape(xi)[-1]}, "
                         f"but this RegularGridInterpolator has dimension {len(plain_grid)}")
    if method not in _si.RegularGridInterpolator._ALL_METHODS:
        raise ValueError(f"unknown {method = }")
    return RegularGridInterpolator(points, values, method=method, bounds_error=bounds_error,
                                   fill_value=fill_value)(xi)
