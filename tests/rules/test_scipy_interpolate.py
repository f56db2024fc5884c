"""mutagrad.scipy.interpolate against SciPy: its values (to rounding) under differentiation,
central differences of the same function run with SciPy's own classes on plain arrays and
forward against reverse mode (check_grads), Hessians against second differences of the plain
function, one-sided differences at PCHIP's ties."""
import copy

import numpy as np
import pytest

import mutagrad as mg
import mutagrad.numpy as mnp
from mutagrad.testing import check_grads, numerical_grad
from tests._oracles import fd_hessian

si = pytest.importorskip("scipy.interpolate")
import scipy.sparse.linalg as ssl

import mutagrad.scipy.interpolate as msi

RNG = np.random.default_rng(7)
X = np.linspace(0.0, 5.0, 8) + RNG.uniform(-0.2, 0.2, 8)  # knots
Y = RNG.standard_normal(8)
Y3 = RNG.standard_normal((3, 8, 2))  # along axis 1
T = np.r_[RNG.uniform(0.1, 4.9, 6), -0.6, 5.7]  # inside, then below and above
P = RNG.standard_normal(7)  # a periodic y: P followed by P[0]


def _per(p):
    return np.concatenate([p, p[:1]])


def _traced_value(fn, *args):
    """fn's value with its arguments traced (reverse mode)."""
    return mg.vjp(fn, *args)[0]


def _agrees(fn, *args):
    """fn traced gives what it gives on plain arrays (SciPy's own calls), to rounding (each run on
    fresh copies: fn may write into its arguments)."""
    copies = [copy.deepcopy(args) for _ in range(2)]
    np.testing.assert_allclose(_traced_value(fn, *copies[0]), fn(*copies[1]), rtol=1e-12, atol=1e-13)


def _spline(cls, **kw):
    return lambda x, y, t: getattr(msi, cls)(x, y, **kw)(t)


CASES = [  # (what it covers, function, arguments, order): check_grads, both modes
    # CubicSpline: every bc_type, in the knots, the data and the points (extrapolated at the ends)
    ("scipy.interpolate.CubicSpline", _spline("CubicSpline"), (X, Y, T), 2),
    ("scipy.interpolate.CubicSpline", _spline("CubicSpline", bc_type="natural"), (X, Y, T), 1),
    ("scipy.interpolate.CubicSpline", _spline("CubicSpline", bc_type="clamped"), (X, Y, T), 1),
    ("scipy.interpolate.CubicSpline", lambda x, p, t: msi.CubicSpline(x, _per(p), bc_type="periodic")(t), (X, P, T), 2),
    ("scipy.interpolate.CubicSpline",  # traced boundary values
     lambda y, a, b: msi.CubicSpline(X, y, bc_type=((1, a), (2, b)))(T), (Y, 0.3, -0.7), 1),
    ("scipy.interpolate.CubicSpline",  # y of 3 dimensions along axis 1, a boundary value per column
     lambda y, t, d: msi.CubicSpline(X, y, axis=1, bc_type=("not-a-knot", (1, d)))(t), (Y3, T[:3], np.ones((3, 2))), 1),
    ("scipy.interpolate.CubicSpline", _spline("CubicSpline"), (X[:2], Y[:2], T), 1),  # n = 2: a line
    ("scipy.interpolate.CubicSpline", _spline("CubicSpline"), (X[:3], Y[:3], T), 1),  # n = 3: a parabola
    ("scipy.interpolate.CubicSpline", lambda x, p, t: msi.CubicSpline(x, _per(p), bc_type="periodic")(t),
     (X[:3], P[:2], T), 1),  # n = 3, periodic
    ("scipy.interpolate.CubicSpline", lambda x, p, t: msi.CubicSpline(x, _per(p), bc_type="periodic")(t),
     (X[:4], P[:3], T + 11.0), 1),  # periodic extrapolation
    # derivatives, antiderivatives and integrals of the piecewise polynomial
    ("scipy.interpolate.CubicSpline", lambda x, y, t: msi.CubicSpline(x, y)(t, nu=2), (X, Y, T), 1),
    ("scipy.interpolate.CubicSpline", lambda x, y, t: msi.CubicSpline(x, y).derivative(3)(t), (X, Y, T), 1),
    ("scipy.interpolate.CubicSpline", lambda x, y, t: msi.CubicSpline(x, y).antiderivative(2)(t), (X, Y, T), 1),
    ("scipy.interpolate.CubicSpline", lambda x, y, a, b: msi.CubicSpline(x, y).integrate(a, b), (X, Y, 0.7, 5.4), 2),
    ("scipy.interpolate.CubicSpline", lambda x, y, a, b: msi.CubicSpline(x, y).integrate(b, a, extrapolate=False),
     (X, Y, 0.7, 3.9), 1),
    ("scipy.interpolate.CubicSpline", lambda x, p, a, b: msi.CubicSpline(x, _per(p), bc_type="periodic").integrate(a, b),
     (X, P, 0.7, 13.1), 1),
    ("scipy.interpolate.CubicSpline", lambda y: msi.CubicSpline(X, y, axis=1).integrate(0.5, 4.0), (Y3,), 1),
    # the shape-preserving interpolators, generic data (no ties)
    ("scipy.interpolate.PchipInterpolator", _spline("PchipInterpolator"), (X, Y, T), 2),
    ("scipy.interpolate.PchipInterpolator", lambda y, t: msi.PchipInterpolator(X, y, axis=1)(t, nu=1), (Y3, T), 1),
    ("scipy.interpolate.PchipInterpolator", _spline("PchipInterpolator"), (X[:2], Y[:2], T), 1),
    ("scipy.interpolate.pchip_interpolate", lambda x, y, t: msi.pchip_interpolate(x, y, t, der=[0, 1]), (X, Y, T), 1),
    ("scipy.interpolate.Akima1DInterpolator", _spline("Akima1DInterpolator", extrapolate=True), (X, Y, T), 2),
    ("scipy.interpolate.Akima1DInterpolator", _spline("Akima1DInterpolator", method="makima", extrapolate=True),
     (X, Y, T), 1),
    ("scipy.interpolate.Akima1DInterpolator", lambda y, t: msi.Akima1DInterpolator(X, y, axis=1)(t), (Y3, T[:6]), 1),
    ("scipy.interpolate.CubicHermiteSpline", lambda x, y, d, t: msi.CubicHermiteSpline(x, y, d)(t),
     (X, Y, Y[::-1] * 0.3, T), 1),
    ("scipy.interpolate.PPoly", lambda c, x, t: msi.PPoly(c, x)(t, nu=1), (RNG.standard_normal((4, 7)), X, T), 1),
    ("scipy.interpolate.PPoly", lambda c, t: msi.PPoly(c, X[::-1])(t), (RNG.standard_normal((3, 7)), T), 1),  # descending
    # B-splines
    ("scipy.interpolate.make_interp_spline", lambda x, y, t: msi.make_interp_spline(x, y)(t), (X, Y, T), 2),
    ("scipy.interpolate.make_interp_spline", lambda x, y, t: msi.make_interp_spline(x, y, k=2)(t), (X, Y, T), 1),
    ("scipy.interpolate.make_interp_spline", lambda x, y, t: msi.make_interp_spline(x, y, k=5)(t, nu=2), (X, Y, T), 1),
    ("scipy.interpolate.make_interp_spline", lambda x, y, t: msi.make_interp_spline(x, y, k=1)(t), (X, Y, T), 1),
    ("scipy.interpolate.make_interp_spline", lambda y, t: msi.make_interp_spline(X, y, k=0)(t), (Y, T[:6]), 1),
    ("scipy.interpolate.make_interp_spline",
     lambda y, a, b: msi.make_interp_spline(X, y, bc_type=([(1, a)], [(2, b)]))(T), (Y, 0.4, -1.2), 1),
    ("scipy.interpolate.make_interp_spline", lambda y: msi.make_interp_spline(X, y, bc_type="natural", axis=1)(T),
     (Y3,), 1),
    ("scipy.interpolate.make_interp_spline",
     lambda x, p, t: msi.make_interp_spline(x, _per(p), k=3, bc_type="periodic")(t), (X, P, T + 3.0), 1),
    ("scipy.interpolate.make_interp_spline",
     lambda x, p, t: msi.make_interp_spline(x, _per(p), k=4, bc_type="periodic")(t), (X, P, T), 1),
    ("scipy.interpolate.BSpline", lambda t, c, x: msi.BSpline(t, c, 3)(x),  # in the knots too (distinct ones)
     (np.linspace(-1.5, 6.5, 14) + RNG.uniform(-0.1, 0.1, 14), RNG.standard_normal(10), T[:6]), 2),
    ("scipy.interpolate.BSpline", lambda x, y, a, b: msi.make_interp_spline(x, y).integrate(a, b), (X, Y, 0.5, 4.5), 1),
    ("scipy.interpolate.BSpline", lambda y, a, b: msi.make_interp_spline(X, y).integrate(a, b, extrapolate=False),
     (Y, -0.5, 4.5), 1),
    ("scipy.interpolate.BSpline", lambda x, y, t: msi.make_interp_spline(x, y).derivative(2)(t), (X, Y, T), 1),
    ("scipy.interpolate.BSpline", lambda x, y, t: msi.make_interp_spline(x, y).antiderivative()(t), (X, Y, T), 1),
    ("scipy.interpolate.BSpline",
     lambda x, p, a, b: msi.make_interp_spline(x, _per(p), bc_type="periodic").integrate(a, b), (X, P, 0.3, 12.0), 1),
    # interp1d: every kind, fill values (traced too), extrapolation, x unsorted
    ("scipy.interpolate.interp1d", lambda x, y, t: msi.interp1d(x, y)(t), (X, Y, T[:6]), 2),
    ("scipy.interpolate.interp1d", lambda y, t, lo, hi: msi.interp1d(X, y, bounds_error=False, fill_value=(lo, hi))(t),
     (Y, T, -2.0, 3.0), 1),
    ("scipy.interpolate.interp1d", lambda y, t, f: msi.interp1d(X, y, axis=1, bounds_error=False, fill_value=f)(t),
     (Y3, T, np.full((3, 2), 0.5)), 1),
]
for _kind in ("linear", "slinear", "quadratic", "cubic", "nearest", "nearest-up", "previous", "next", "zero"):
    CASES.append(("scipy.interpolate.interp1d",
                  lambda x, y, t, _k=_kind: np.nan_to_num(msi.interp1d(x, y, kind=_k, fill_value="extrapolate")(t))
                  if _k != "zero" else msi.interp1d(x, y, kind=_k)(t[:6]),  # ('previous' is NaN below, 'next' above)
                  (X[::-1], Y3[0].T, T), 1))  # (x descending: sorted from its plain values)
CASES += [
    # regular grids
    ("scipy.interpolate.RegularGridInterpolator", "grid:linear", None, 2),
    ("scipy.interpolate.RegularGridInterpolator", "grid:nearest", None, 1),
    ("scipy.interpolate.RegularGridInterpolator", "grid:slinear", None, 1),
    ("scipy.interpolate.RegularGridInterpolator", "grid:cubic", None, 1),
    ("scipy.interpolate.RegularGridInterpolator", "grid:cubic_legacy", None, 1),
    ("scipy.interpolate.RegularGridInterpolator", "grid:pchip", None, 1),
    ("scipy.interpolate.interpn", "interpn", None, 1),
]

GRID = (np.linspace(0.0, 3.0, 6) + RNG.uniform(-0.1, 0.1, 6), (np.linspace(0.0, 2.0, 5) + RNG.uniform(-0.1, 0.1, 5))[::-1])
V = RNG.standard_normal((6, 5, 2))
XI = np.r_[np.c_[RNG.uniform(0.3, 2.7, 4), RNG.uniform(0.3, 1.7, 4)], [[-0.3, 0.5], [1.0, 2.3]]]


def _grid_case(name):
    if name == "interpn":
        return (lambda g0, v, xi: msi.interpn((g0, GRID[1]), v, xi, bounds_error=False, fill_value=None)), (GRID[0], V, XI)
    method = name.split(":")[1]
    kw = {"solver": ssl.spsolve} if method == "cubic" else {}  # (SciPy's default solve is iterative, to atol 1e-6)
    if method in ("linear", "nearest"):  # (outside: a traced fill value)
        return (lambda v, xi, f: msi.RegularGridInterpolator(GRID, v, method=method, bounds_error=False,
                                                             fill_value=f)(xi)), (V, XI, 0.25)
    return (lambda v, xi: msi.RegularGridInterpolator(GRID, v, method=method, **kw)(xi)), (V[..., 0], XI[:4])


def _case(fn, args):
    return _grid_case(fn) if isinstance(fn, str) else (fn, args)


@pytest.mark.parametrize("covers,fn,args,order", CASES, ids=[f"{c[0].split('.')[-1]}-{i}" for i, c in enumerate(CASES)])
def test_rule(covers, fn, args, order):
    fn, args = _case(fn, args)
    _agrees(fn, *args)  # SciPy's values
    check_grads(fn, *args, modes=("fwd", "rev"), order=order)


def test_objects_are_scipys():
    s = msi.CubicSpline(X, Y)
    assert isinstance(s, si.CubicSpline) and type(s.c) is np.ndarray
    np.testing.assert_array_equal(s(T), si.CubicSpline(X, Y)(T))  # its own call: SciPy's bits
    assert isinstance(msi.make_interp_spline(X, Y), si.BSpline)
    assert isinstance(msi.interp1d(X, Y), si.interp1d)
    assert msi.UnivariateSpline is si.UnivariateSpline  # (every other name is SciPy's)
    assert "CubicSpline" in dir(msi) and "splrep" in dir(msi)
    assert type(msi.CubicSpline(X, Y).derivative()) is msi.CubicSpline


def test_spline_of_plain_data_at_traced_points():
    s, ref = msi.CubicSpline(X, Y), si.CubicSpline(X, Y)
    t = T[:6]
    h = 1e-6
    np.testing.assert_allclose(mg.grad(lambda t: np.sum(s(t)))(t), (ref(t + h) - ref(t - h)) / (2 * h), rtol=1e-6)
    np.testing.assert_allclose(mg.jacobian(lambda t: s(t), mode="fwd")(t), np.diag(ref(t, 1)), rtol=1e-12, atol=1e-13)
    b = msi.make_interp_spline(X, Y)
    np.testing.assert_allclose(mg.jacobian(lambda t: b(t))(t), np.diag(si.make_interp_spline(X, Y)(t, 1)), rtol=1e-12)


def test_complex_data():
    yc = Y + 1j * Y[::-1]
    _agrees(lambda y, t: msi.CubicSpline(X, y)(t), yc, T)
    check_grads(lambda y: np.abs(msi.CubicSpline(X, y, bc_type="natural")(T)) ** 2, yc)


def test_jacobians_forward_equal_reverse():
    for f in (lambda y: msi.CubicSpline(X, y, bc_type="not-a-knot")(T),
              lambda x: msi.PchipInterpolator(x, Y)(T),
              lambda y: msi.interp1d(X, y, kind="cubic")(T[:6])):
        arg = X if f.__code__.co_varnames[0] == "x" else Y
        np.testing.assert_allclose(mg.jacobian(f, mode="fwd")(arg), mg.jacobian(f)(arg), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("name,kw", [("CubicSpline", {}), ("CubicSpline", {"bc_type": "clamped"}),
                                     ("make_interp_spline", {}), ("PchipInterpolator", {})])
def test_hessian_against_second_differences(name, kw):
    n = len(X)

    def f(w, mod):  # in the knots, the data and the points at once
        x, y, t = w[:n], w[n:2 * n], w[2 * n:]
        return np.sum(np.sin(getattr(mod, name)(x, y, **kw)(t)))

    w = np.concatenate([X, Y, T[:3]])
    np.testing.assert_allclose(mg.hessian(lambda w: f(w, msi))(w), fd_hessian(lambda w: f(w, si), w),
                               rtol=2e-4, atol=2e-4)


def test_in_place_data_and_preallocated_output():
    def f(y, t):
        y[2] = 2.0 * y[1]  # the data written in place before the spline is made
        y *= 1.5
        out = mnp.zeros((2, len(T)))  # written into a traced buffer
        out[0] = msi.CubicSpline(X, y)(t)
        out[1, :] = msi.interp1d(X, y, kind="quadratic", fill_value="extrapolate")(t)
        return out

    _agrees(f, Y.copy(), T)
    check_grads(f, Y, T, order=2)


def _pchip_sum(y, t, mod):
    return np.sum(mod.PchipInterpolator(X, y)(t) ** 2)


def test_pchip_at_a_flat_segment_takes_the_slope_zero_branch():
    # y[2] == y[3]: a secant slope of exactly 0, so SciPy sets the slopes at x[2] and x[3] to 0. The
    # derivative is that branch's: the one-sided derivative in directions that keep a sign change
    # (y[2] - y[3] of the sign opposite to its neighbours' slopes), not the other side's.
    y = np.array([0.0, 1.0, 2.0, 2.0, 3.0, 1.0, 0.5, 0.0])
    t = np.linspace(0.3, 4.7, 9)
    _agrees(lambda y: msi.PchipInterpolator(X, y)(t), y)
    g = mg.grad(lambda y: _pchip_sum(y, t, msi))(y)
    np.testing.assert_allclose(g, mg.jacobian(lambda y: msi.PchipInterpolator(X, y)(t), mode="fwd")(y).T
                               @ (2 * si.PchipInterpolator(X, y)(t)), rtol=1e-10)
    direction = RNG.standard_normal(8)
    direction[2], direction[3] = 1.0, -1.0  # y[2] > y[3] after the step: the slope there opposes its neighbours'
    h = 1e-7
    one_sided = (_pchip_sum(y + h * direction, t, si) - _pchip_sum(y, t, si)) / h
    assert abs(g @ direction - one_sided) < 1e-5 * (1 + abs(one_sided))
    other = direction.copy()
    other[2], other[3] = -1.0, 1.0  # the other side: the harmonic mean's branch, another derivative
    assert abs(g @ other - (_pchip_sum(y + h * other, t, si) - _pchip_sum(y, t, si)) / h) > 1e-3


def test_akima_with_equal_slopes_matches_scipy():
    y = np.array([0.0, 1.0, 2.0, 3.0, 3.0, 3.0, 1.0, 0.0])  # equal neighbouring slopes: weights 0 and the fallback
    for method in ("akima", "makima"):
        _agrees(lambda y, t, m=method: msi.Akima1DInterpolator(X, y, method=m)(t), y, T[:6])
        g = mg.grad(lambda y, m=method: np.sum(msi.Akima1DInterpolator(X, y, method=m)(T[:6])))(y)
        assert np.all(np.isfinite(g))


def test_extrapolate_false_and_nan_points():
    t = np.r_[T, np.nan]
    for f in (lambda y, t: msi.CubicSpline(X, y, extrapolate=False)(t),
              lambda y, t: msi.make_interp_spline(X, y)(t, extrapolate=False),
              lambda y, t: msi.interp1d(X, y, bounds_error=False)(t)):
        out = _traced_value(f, Y, t)
        np.testing.assert_array_equal(np.isnan(out), np.isnan(f(Y, t)))
        g = mg.grad(lambda y, f=f: np.nansum(f(y, t)))(Y)  # no NaN leaks from the points outside
        assert np.all(np.isfinite(g))
        check_grads(lambda y, f=f: np.nan_to_num(f(y, t)), Y)


def test_errors_are_scipys():
    with pytest.raises(ValueError, match="strictly increasing"):
        mg.grad(lambda y: np.sum(msi.CubicSpline(X[::-1], y)(T)))(Y)
    with pytest.raises(ValueError, match="below the interpolation range"):
        mg.grad(lambda y: np.sum(msi.interp1d(X, y)(T)))(Y)
    with pytest.raises(ValueError, match="out of bounds in dimension 0"):
        mg.grad(lambda v: np.sum(msi.RegularGridInterpolator(GRID, v)(XI)))(V)
    with pytest.raises(ValueError, match="Order of derivative cannot be negative"):
        mg.grad(lambda y: np.sum(msi.CubicSpline(X, y)(T, nu=-1)))(Y)


def test_roots_of_a_traced_spline_name_the_fix():
    np.testing.assert_array_equal(msi.CubicSpline(X, Y).roots(), si.CubicSpline(X, Y).roots())
    with pytest.raises(mg.TracerEscapeError, match="Newton step"):
        mg.grad(lambda y: np.sum(msi.CubicSpline(X, y).roots()))(Y)


def test_grid_values_and_nu():
    for method in ("linear", "nearest", "slinear", "cubic", "slinear_legacy", "pchip"):
        kw = {"solver": ssl.spsolve} if method == "cubic" else {}
        _agrees(lambda v, xi, m=method, kw=kw: msi.RegularGridInterpolator(GRID, v, method=m, bounds_error=False,
                                                                          fill_value=None, **kw)(xi), V, XI)
    f = lambda v, xi: msi.RegularGridInterpolator(GRID, v, method="cubic", solver=ssl.spsolve)(xi, nu=(1, 1))
    _agrees(f, V, XI[:4])
    check_grads(f, V[..., 0], XI[:4])
    # a length-one axis, as SciPy takes it (index -1: the single value)
    g1 = (GRID[0], np.array([0.5]))
    check_grads(lambda v, x0: msi.interpn(g1, v, np.stack([x0, np.full(4, 0.5)], axis=1)), V[:, :1, 0], XI[:4, 0])


@pytest.mark.parametrize("kind", ["slinear", "quadratic", "cubic", "zero", "linear"])
def test_interp1d_of_plain_data_at_traced_points(kind):
    # (regress108) the spline kinds built on plain data hold SciPy's own BSpline, which refused traced points;
    # against central differences of SciPy's own interp1d
    xs = np.array([0.0, 0.4, 1.1, 1.5, 2.2, 3.0, 3.4])
    ys = np.sin(xs) + 0.3 * xs
    t = np.array([0.1, 0.7, 1.7, 2.9])
    f = msi.interp1d(xs, ys, kind=kind)
    plain = si.interp1d(xs, ys, kind=kind)
    want = numerical_grad(lambda t: np.sum(plain(t) ** 2), (t,), (0,))[0]
    np.testing.assert_allclose(mg.grad(lambda t: np.sum(f(t) ** 2))(t), want, rtol=1e-6, atol=1e-9)
    np.testing.assert_array_equal(mg.vjp(f, t)[0], plain(t))


def test_a_classmethod_inherited_from_scipy_is_named_as_scipys_own():
    # (splinefit) BSpline.construct_fast of traced coefficients was told to use the function it called
    t = np.r_[[0.0] * 4, 1.0, [2.0] * 4]
    with pytest.raises(mg.TracerEscapeError, match=r"BSpline\.construct_fast is SciPy's own function, passed "
                                                   r"through without a derivative rule"):
        mg.grad(lambda c: np.sum(msi.BSpline.construct_fast(t, c, 3)(np.array([0.5, 1.5]))))(np.ones(5))
    # the class itself is differentiated in its coefficients (by hand: B-splines sum to 1 inside the knots)
    np.testing.assert_allclose(mg.grad(lambda c: np.sum(msi.BSpline(t, c, 3)(np.array([0.5, 1.5]))))(np.ones(5)).sum(),
                               2.0)


def test_regular_grid_spline_values_are_scipys_own_solvers():
    # (regress108, splinefit) 'cubic' on a regular grid: SciPy solves iteratively (gcrotmk, atol 1e-6), and the
    # traced value was the exact spline's, not SciPy's; now SciPy's own value, bit for bit, with or without a
    # solver given, while the derivative is the exact spline's (against central differences with spsolve)
    ssl = pytest.importorskip("scipy.sparse.linalg")
    rng = np.random.default_rng(4985)
    grid = (np.linspace(0.0, 1.0, 7), np.linspace(0.0, 2.0, 8))
    v = rng.standard_normal((7, 8))
    xi = np.array([[0.31, 0.77], [0.62, 1.45]])
    for kw in ({}, {"solver": ssl.spsolve}, {"solver_args": {"atol": 1e-3}}):
        f = lambda v, kw=kw: msi.RegularGridInterpolator(grid, v, method="cubic", **kw)(xi)
        np.testing.assert_array_equal(mg.vjp(f, v)[0], si.RegularGridInterpolator(grid, v, method="cubic", **kw)(xi))
    exact = lambda v: np.sum(si.RegularGridInterpolator(grid, v, method="cubic", solver=ssl.spsolve)(xi))
    np.testing.assert_allclose(mg.grad(lambda v: np.sum(msi.RegularGridInterpolator(grid, v, method="cubic")(xi)))(v),
                               numerical_grad(exact, (v,), (0,))[0], rtol=1e-6, atol=1e-9)
