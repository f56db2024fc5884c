"""mutagrad.numpy.polynomial (mutagrad/_polynomial.py): NumPy's numpy.polynomial code in globals whose array
creation keeps traced values traced. Each case checks the values against NumPy's function (under
differentiation and for plain inputs, where the mirror returns NumPy's plain result), the reverse derivative
against central finite differences of NumPy's function, and forward against reverse (mg.testing.check_grads:
both modes against finite differences, and the dot-product identity)."""

import subprocess
import sys

import numpy as np
import pytest

import mutagrad as mg
import mutagrad.numpy as mnp
from mutagrad.pytree import tree_flatten
from mutagrad.testing import check_grads, numerical_grad

MP = mnp.polynomial
NP = np.polynomial
# module, function prefix, class
FAMILIES = [("polynomial", "poly", "Polynomial"), ("chebyshev", "cheb", "Chebyshev"),
            ("legendre", "leg", "Legendre"), ("hermite", "herm", "Hermite"), ("hermite_e", "herme", "HermiteE"),
            ("laguerre", "lag", "Laguerre")]
IDS = [f[1] for f in FAMILIES]

rng = np.random.default_rng(4901)
C4 = rng.normal(size=4)
C3 = rng.normal(size=3)
C23 = rng.normal(size=(3, 2))
C33 = rng.normal(size=(3, 3))
X5 = rng.uniform(-0.9, 0.9, size=5)
X2 = rng.uniform(-0.9, 0.9, size=(2, 3))
XF = np.sort(rng.uniform(-1.0, 1.0, size=9))  # fit points
YF = rng.normal(size=9)
WF = rng.uniform(0.5, 2.0, size=9)
ROOTS = np.array([-0.6, 0.15, 0.7])


def _fn(module, name):
    return getattr(getattr(MP, module), name), getattr(getattr(NP, module), name)


def _leaves(out):
    return [np.asarray(v) for v in tree_flatten(out)[0]]


def _check(mirror, numpy_f, *args, atol=1e-6, rtol=1e-5):
    """The mirror's values (plain call and under differentiation) against NumPy's, its reverse derivative of
    a random projection against finite differences of NumPy's function, and check_grads (forward, reverse)."""
    ref = numpy_f(*args)
    plain = mirror(*args)
    for p, r in zip(tree_flatten(plain)[0], tree_flatten(ref)[0]):
        assert type(p) is type(r), (type(p), type(r))
        np.testing.assert_array_equal(p, r)
    out, _ = mg.vjp(mirror, *args)
    for o, r in zip(_leaves(out), _leaves(ref)):
        assert o.shape == r.shape and o.dtype == r.dtype, (o.shape, r.shape, o.dtype, r.dtype)
        np.testing.assert_allclose(o, r, rtol=1e-12, atol=1e-13)
    w = [np.random.default_rng(4902).normal(size=r.shape) for r in _leaves(ref)]

    def project(f):
        return lambda *a: sum(np.sum(np.real(v) * wk) for v, wk in zip(tree_flatten(f(*a))[0], w))

    argnums = tuple(range(len(args)))
    fd = numerical_grad(project(numpy_f), args, argnums)
    rev = mg.grad(project(mirror), argnums=argnums)(*args)
    for g, d in zip(rev, fd):
        np.testing.assert_allclose(g, d, atol=atol, rtol=rtol)
    check_grads(mirror, *args, atol=atol, rtol=rtol)


# -- evaluation, Vandermonde matrices, fits: every family


@pytest.mark.parametrize("module, k, cls", FAMILIES, ids=IDS)
def test_val_of_coefficients_and_points(module, k, cls):
    f, g = _fn(module, k + "val")
    _check(lambda c, x: f(x, c), lambda c, x: g(x, c), C4, X5)
    _check(lambda c, x: f(x, c), lambda c, x: g(x, c), C23, X2)  # (tensor=True: every column at every point)
    _check(lambda c, x: f(x, c, tensor=False), lambda c, x: g(x, c, tensor=False), C23, X5[:2])
    _check(lambda c, x: f(x, c), lambda c, x: g(x, c), C4, 0.3)  # (a point given as a number)


@pytest.mark.parametrize("module, k, cls", FAMILIES, ids=IDS)
def test_fit_with_weights(module, k, cls):
    f, g = _fn(module, k + "fit")
    _check(lambda y, x: f(x, y, 3, w=WF), lambda y, x: g(x, y, 3, w=WF), YF, XF)
    _check(lambda y: f(XF, y, [0, 2, 3]), lambda y: g(XF, y, [0, 2, 3]), np.stack([YF, YF[::-1]], axis=1))


@pytest.mark.parametrize("module, k, cls", FAMILIES, ids=IDS)
def test_vander(module, k, cls):
    f, g = _fn(module, k + "vander")
    _check(lambda x: f(x, 3), lambda x: g(x, 3), X5)
    f, g = _fn(module, k + "vander2d")
    _check(lambda x, y: f(x, y, [2, 1]), lambda x, y: g(x, y, [2, 1]), X5, X5[::-1].copy())


@pytest.mark.parametrize("module, k, cls", FAMILIES, ids=IDS)
def test_series_class_evaluation(module, k, cls):
    mine, theirs = getattr(MP, cls), getattr(NP, cls)
    _check(lambda c, x: mine(c)(x), lambda c, x: theirs(c)(x), C4, X5)
    _check(lambda c, x: mine(c, domain=[0.0, 2.0])(x), lambda c, x: theirs(c, domain=[0.0, 2.0])(x), C4, X5 + 1)


@pytest.mark.parametrize("module, k, cls", FAMILIES, ids=IDS)
def test_series_class_fit_convert(module, k, cls):
    mine, theirs = getattr(MP, cls), getattr(NP, cls)
    _check(lambda y: mine.fit(XF, y, 3).convert().coef, lambda y: theirs.fit(XF, y, 3).convert().coef, YF)
    _check(lambda y, x: mine.fit(x, y, 2, w=WF).convert().coef,
           lambda y, x: theirs.fit(x, y, 2, w=WF).convert().coef, YF, XF, atol=1e-5)


# -- the other functions: shared code (polyutils), one family or a few


@pytest.mark.parametrize("module, k", [("legendre", "leg"), ("chebyshev", "cheb"), ("polynomial", "poly")])
def test_val2d_grid2d(module, k):
    f, g = _fn(module, k + "val2d")
    _check(lambda c, x, y: f(x, y, c), lambda c, x, y: g(x, y, c), C33, X5, X5[::-1].copy())
    f, g = _fn(module, k + "grid2d")
    _check(lambda c, x, y: f(x, y, c), lambda c, x, y: g(x, y, c), C33, X5[:3], X5[2:])


@pytest.mark.parametrize("module, k", [("legendre", "leg"), ("chebyshev", "cheb"), ("hermite", "herm"),
                                       ("laguerre", "lag"), ("polynomial", "poly")])
def test_der_and_int(module, k):
    f, g = _fn(module, k + "der")
    _check(lambda c: f(c, 2, scl=1.5), lambda c: g(c, 2, scl=1.5), C4)
    _check(lambda c, s: f(c, 1, scl=s), lambda c, s: g(c, 1, scl=s), C23, 0.7)
    f, g = _fn(module, k + "int")
    _check(lambda c, k0, lb, s: f(c, 2, k=[k0, 0.5], lbnd=lb, scl=s),
           lambda c, k0, lb, s: g(c, 2, k=[k0, 0.5], lbnd=lb, scl=s), C4, 0.3, 0.2, 1.5)
    _check(lambda c: f(c, 1, k=1.0, axis=1), lambda c: g(c, 1, k=1.0, axis=1), C23)


@pytest.mark.parametrize("module, k", [("legendre", "leg"), ("chebyshev", "cheb"), ("hermite_e", "herme"),
                                       ("polynomial", "poly")])
def test_arithmetic(module, k):
    for op in ("add", "sub", "mul"):
        f, g = _fn(module, k + op)
        _check(f, g, C4, C3)
        _check(f, g, C3, C4)
    f, g = _fn(module, k + "mulx")
    _check(f, g, C4)
    f, g = _fn(module, k + "pow")
    _check(lambda c: f(c, 3), lambda c: g(c, 3), C3)
    f, g = _fn(module, k + "div")
    _check(f, g, C4, C3)
    f, g = _fn(module, k + "line")
    _check(f, g, 0.4, 1.7)


@pytest.mark.parametrize("module, k", [("legendre", "leg"), ("chebyshev", "cheb"), ("laguerre", "lag"),
                                       ("polynomial", "poly")])
def test_fromroots_and_roots(module, k):
    f, g = _fn(module, k + "fromroots")
    _check(f, g, ROOTS)
    c = g(ROOTS)  # (simple real roots)
    f, g = _fn(module, k + "roots")
    _check(f, g, c)
    np.testing.assert_allclose(f(c), ROOTS, atol=1e-12)
    f, g = _fn(module, k + "companion")
    _check(f, g, C4)


@pytest.mark.parametrize("module, k", [("legendre", "leg"), ("chebyshev", "cheb"), ("hermite", "herm"),
                                       ("hermite_e", "herme"), ("laguerre", "lag")])
def test_conversions(module, k):
    f, g = _fn(module, k + "2poly")
    _check(f, g, C4)
    f, g = _fn(module, "poly2" + k)
    _check(f, g, C4)


def test_trimcoef_and_trim_slice_by_plain_values():
    c = np.array([1.0, -2.0, 0.5, 1e-3, 1e-4])
    f, g = MP.polyutils.trimcoef, NP.polyutils.trimcoef
    _check(lambda c: f(c, 1e-2), lambda c: g(c, 1e-2), c)
    _check(lambda c: f(c), lambda c: g(c), c)
    f, g = _fn("legendre", "legtrim")
    _check(lambda c: f(c, 1e-2), lambda c: g(c, 1e-2), c)
    assert mg.grad(lambda c: np.sum(f(c, 10.0)))(c).tolist() == [0.0] * 5  # (NumPy's [0.]: c[:1] * 0)


def test_polyutils_domains():
    pu, npu = MP.polyutils, NP.polyutils
    _check(pu.getdomain, npu.getdomain, X5)
    _check(lambda x, a: pu.mapdomain(x, [a, 1.0], [-1.0, 1.0]), lambda x, a: npu.mapdomain(x, [a, 1.0], [-1.0, 1.0]),
           X5, -1.5)
    _check(lambda a: np.stack(pu.mapparms([a, 1.0], [-1.0, 1.0])), lambda a: np.stack(npu.mapparms([a, 1.0],
                                                                                                  [-1.0, 1.0])), -1.5)


# -- series classes: methods and operators


def test_series_methods():
    L, NL = MP.Legendre, NP.Legendre
    _check(lambda c: L(c).deriv().coef, lambda c: NL(c).deriv().coef, C4)
    _check(lambda c: L(c, domain=[0.0, 3.0]).deriv(2).coef, lambda c: NL(c, domain=[0.0, 3.0]).deriv(2).coef, C4)
    _check(lambda c: L(c).integ(k=[0.5], lbnd=0.2).coef, lambda c: NL(c).integ(k=[0.5], lbnd=0.2).coef, C4)
    _check(lambda c: L(c, domain=[0.0, 3.0]).integ(2).coef, lambda c: NL(c, domain=[0.0, 3.0]).integ(2).coef, C4)
    c = NL.fromroots(ROOTS, domain=[-1.0, 1.0]).coef
    _check(lambda c: L(c).roots(), lambda c: NL(c).roots(), c)
    _check(lambda r: L.fromroots(r).coef, lambda r: NL.fromroots(r).coef, ROOTS)
    P, NPo = MP.Polynomial, NP.Polynomial
    _check(lambda c: L(c, domain=[0.0, 2.0]).convert(kind=P).coef,
           lambda c: NL(c, domain=[0.0, 2.0]).convert(kind=NPo).coef, C4)
    _check(lambda c: P.cast(L(c)).coef, lambda c: NPo.cast(NL(c)).coef, C4)
    _check(lambda c: L(c).linspace(6)[1], lambda c: NL(c).linspace(6)[1], C4)
    _check(lambda c: L(c).truncate(2).coef, lambda c: NL(c).truncate(2).coef, C4)


def test_series_arithmetic():
    L, NL = MP.Chebyshev, NP.Chebyshev
    _check(lambda a, b: (L(a) * L(b)).coef, lambda a, b: (NL(a) * NL(b)).coef, C4, C3)
    _check(lambda a, b: (L(a) + L(b) - 2.0 * L(a)).coef, lambda a, b: (NL(a) + NL(b) - 2.0 * NL(a)).coef, C4, C3)
    _check(lambda a, s: (s * L(a) + s).coef, lambda a, s: (s * NL(a) + s).coef, C4, 0.7)
    _check(lambda a: (L(a) ** 3).coef, lambda a: (NL(a) ** 3).coef, C3)
    _check(lambda a, b: [v.coef for v in divmod(L(a), L(b))], lambda a, b: [v.coef for v in divmod(NL(a), NL(b))],
           C4, C3)
    # a NumPy series with the mirror's: either side
    plain = NL([0.5, -1.0, 2.0])
    _check(lambda a: (plain * L(a)).coef, lambda a: (plain * NL(a)).coef, C4)
    _check(lambda a: (L(a) - plain).coef, lambda a: (NL(a) - plain).coef, C4)
    with pytest.raises(TypeError, match="Polynomial types differ"):
        L(C4) + MP.Legendre(C4)


def test_polynomial_fit_convert_coef_with_traced_y():
    # (the UQ tester's line) least squares in the scaled window, converted to power series coefficients
    x = np.linspace(0.0, 4.0, 12)

    def fit(y):
        return MP.Polynomial.fit(x, y, 3).convert().coef

    y = np.sin(x) + 0.1 * np.random.default_rng(4903).normal(size=x.size)
    _check(fit, lambda y: NP.Polynomial.fit(x, y, 3).convert().coef, y)


def test_lists_of_traced_values_and_integer_coefficients():
    f, g = _fn("chebyshev", "chebval")
    _check(lambda x: f(x, [1, -2, 3]), lambda x: g(x, [1, -2, 3]), X5)  # (an integer c: NumPy's astype(double))
    _check(lambda a, x: f([x[0], x[1]], [a, 2.0 * a, 1.0]), lambda a, x: g([x[0], x[1]], [a, 2.0 * a, 1.0]), 0.7, X5)
    f, g = _fn("legendre", "legadd")
    _check(lambda a: f([a, 1.0], (2.0, a, a)), lambda a: g([a, 1.0], (2.0, a, a)), 0.3)


# -- second derivatives


def _fd_hessian(f, x, eps=1e-5):
    g = mg.grad(f)
    return np.stack([(g(x + eps * e) - g(x - eps * e)) / (2 * eps) for e in np.eye(x.size)], axis=1)


def test_hessians():
    def f(x):  # in the points
        return np.sum(MP.legendre.legval(x, C4) ** 3)

    np.testing.assert_allclose(mg.hessian(f)(X5), _fd_hessian(f, X5), atol=1e-6)

    def g(c):  # in the coefficients, through a product, an integral and the class's call
        q = MP.Chebyshev(MP.chebyshev.chebmul(c, c)).integ(lbnd=-1.0)
        return np.sum(np.sin(q(X5)))

    np.testing.assert_allclose(mg.hessian(g)(C3), _fd_hessian(g, C3), atol=1e-6)

    def h(r):  # in the roots
        return np.sum(MP.hermite.hermfromroots(r) ** 2)

    np.testing.assert_allclose(mg.hessian(h)(ROOTS), _fd_hessian(h, ROOTS), atol=1e-6)


# -- plain inputs, names, imports


def test_plain_inputs_give_numpys_plain_results():
    assert type(MP.legendre.legval(X5, C4)) is np.ndarray
    np.testing.assert_array_equal(MP.legendre.legval(X5, C4), NP.legendre.legval(X5, C4))
    p = MP.Legendre(C4)
    assert isinstance(p, NP.Legendre) and type(p.coef) is np.ndarray
    np.testing.assert_array_equal(p(X5), NP.Legendre(C4)(X5))
    np.testing.assert_array_equal(MP.Polynomial.fit(XF, YF, 3).convert().coef,
                                  NP.Polynomial.fit(XF, YF, 3).convert().coef)

    def f(c):  # plain arrays inside a differentiation: NumPy's plain results
        x, w = MP.legendre.leggauss(5)
        assert type(x) is np.ndarray and type(w) is np.ndarray
        return np.sum(w * MP.legendre.legval(x, c))

    np.testing.assert_allclose(mg.grad(f)(C4), [2.0, 0.0, 0.0, 0.0], atol=1e-14)


def test_names_of_the_mirror():
    for module, k, cls in FAMILIES:
        mine, theirs = getattr(MP, module), getattr(NP, module)
        assert set(theirs.__all__) <= set(dir(mine)), module
        assert getattr(MP, cls) is getattr(mine, cls)
        assert issubclass(getattr(MP, cls), getattr(NP, cls))
        assert getattr(mine, k + "val").__module__ == f"mutagrad.numpy.polynomial.{module}"
        assert getattr(mine, k + "val").__name__ == k + "val"
    assert MP.legendre.legtrim is MP.polyutils.trimcoef
    assert sys.modules["mutagrad.numpy.polynomial.legendre"] is MP.legendre
    assert np.polynomial.legendre.legval is not MP.legendre.legval  # (NumPy's own modules are unchanged)
    assert np.polynomial.legendre.np is np


def test_submodule_imports_in_a_fresh_interpreter():
    code = ("import mutagrad.numpy.polynomial.legendre as L\n"
            "from mutagrad.numpy.polynomial import Chebyshev, hermite\n"
            "from mutagrad.numpy.polynomial.polyutils import trimcoef\n"
            "import mutagrad as mg, numpy as np, mutagrad.numpy as mnp\n"
            "assert mnp.polynomial.legendre is L and mnp.polynomial.Chebyshev is Chebyshev\n"
            "print(mg.grad(lambda c: L.legval(0.5, c))(np.ones(3)).tolist())\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[1.0, 0.5, -0.125]"


def test_numpys_refusals_name_the_mirror_first_and_it_runs():
    x = np.array([0.1, 0.5])
    c = np.array([2.1, -3.0, 1.0])
    p = NP.Chebyshev([1.0, 2.0, 0.5], domain=[0.0, 2.0])
    cases = [
        (lambda c: np.sum(NP.legendre.legval(x, c)), c, "mutagrad.numpy.polynomial.legendre.legval",
         "mnp.polynomial.legendre.legval", lambda c: np.sum(MP.legendre.legval(x, c))),
        (lambda c: np.sum(NP.polyutils.trimcoef(c, 0.5)), c, "mutagrad.numpy.polynomial.polyutils.trimcoef",
         "mnp.polynomial.polyutils.trimcoef", lambda c: np.sum(MP.polyutils.trimcoef(c, 0.5))),
        (lambda x: np.sum(p(x)), x, "mutagrad.numpy.polynomial.Chebyshev",
         "mnp.polynomial.Chebyshev(p.coef, p.domain, p.window)(x)",
         lambda x: np.sum(MP.Chebyshev(p.coef, p.domain, p.window)(x))),
        (lambda c: np.sum(NP.Legendre(c).deriv().coef), c, "mutagrad.numpy.polynomial.Legendre",
         "mnp.polynomial.Legendre(c)(x)", lambda c: np.sum(MP.Legendre(c).deriv().coef)),
        (lambda y: np.sum(NP.Legendre.fit(np.linspace(0, 1, 3), y, 1).coef), c, "mnp.polynomial.Polynomial.fit(",
         "or by hand", lambda y: np.sum(MP.Legendre.fit(np.linspace(0, 1, 3), y, 1).coef)),
    ]
    for refused, arg, first, call, mirrored in cases:
        with pytest.raises(mg.TracerEscapeError) as info:
            mg.grad(refused)(arg)
        msg = str(info.value)
        assert first in msg and call in msg.replace("Or by hand", "or by hand"), msg
        assert msg.index(first) < msg.index("Or by hand"), msg  # (the mirror first, NumPy's rewrite after)
        np.testing.assert_allclose(mg.value_and_grad(mirrored)(arg)[0], refused(arg), rtol=1e-13)
        np.testing.assert_allclose(mg.grad(mirrored)(arg), numerical_grad(refused, (arg,), (0,))[0], rtol=1e-6,
                                   atol=1e-8)
