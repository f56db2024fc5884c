"""``mutagrad.scipy.interpolate``: ``scipy.interpolate`` with differentiable

* ``CubicSpline`` (every ``bc_type``), ``PchipInterpolator``, ``pchip_interpolate``,
  ``Akima1DInterpolator`` ('akima', 'makima'), ``CubicHermiteSpline`` and ``PPoly``: in the data
  ``y`` (and ``dydx``, the boundary values), the knots ``x`` and the points where they are evaluated
  (``nu`` derivatives, ``extrapolate``), with ``derivative``, ``antiderivative`` and ``integrate``;

SciPy's own classes (subclasses of them): made from plain data they are SciPy's objects, and a call
with nothing traced is SciPy's own; with traced values, SciPy's formulas written with NumPy
operations, its values to rounding. Every other name is SciPy's own (and raises mutagrad's escape
error on a traced array).

>>> import numpy as np, mutagrad as mg
>>> import mutagrad.scipy.interpolate as msi
>>> s = msi.CubicSpline([0.0, 1.0, 2.0], [0.0, 1.0, 4.0])  # plain data: x**2 (not-a-knot)
>>> float(mg.grad(lambda t: s(t))(1.5))  # d/dt t**2
3.0
"""
import scipy.interpolate as _si

from ..rules.scipy.interpolate import (  # noqa: F401
    Akima1DInterpolator,
    BSpline,
    CubicHermiteSpline,
    CubicSpline,
    PchipInterpolator,
    PPoly,
    RegularGridInterpolator,
    interp1d,
    interpn,
    make_interp_spline,
    pchip_interpolate,
)


def __getattr__(name):
    return getattr(_si, name)


def __dir__():
    return sorted(set(dir(_si)) | set(globals()))
