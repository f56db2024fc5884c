"""Hankel functions, jve and yve, spherical Bessel functions (mutagrad.scipy.special), airy, struve and
modstruve (mutagrad/rules/scipy/special.py): both modes against central finite differences, real and
complex arguments, second order."""
import numpy as np
import pytest

import mutagrad as mg
import mutagrad.scipy.special as msp
from mutagrad.testing import check_grads

sp = pytest.importorskip("scipy.special")

rng = np.random.default_rng(4711)  # (its own: the other modules' draws stay as they were)


def P(n):
    return rng.uniform(0.5, 3.0, n)


def C(n):  # off the real axis (jve and yve have a kink in Im z there)
    return rng.uniform(0.5, 2.5, n) + 1j * rng.uniform(0.2, 1.0, n) * rng.choice([-1.0, 1.0], n)


V = np.array([0.0, 0.7, 2.0, -1.3])  # real orders, a negative one
N = np.array([0, 1, 2, 5])  # integer orders of the spherical functions
XS = np.array([-1.3, 0.0, 0.7, 2.5])  # both signs and 0, where j_n and i_n are smooth
XA = np.array([-2.3, -0.4, 0.0, 0.7, 2.5])

# (covers, function, args, order)
CASES = [
    *[(f"scipy.special.{name}", lambda z, name=name: getattr(sp, name)(V, z), (z,), 2)
      for name in ("hankel1", "hankel2", "hankel1e", "hankel2e", "jve", "yve") for z in (P(4), C(4))],
    ("scipy.special.hankel1", lambda z: sp.hankel1(1.5, z), (C(3),), 2),
    ("scipy.special.jve", lambda z: sp.jve(V[:, None], z), (C(2),), 2),  # broadcast over the orders
    ("scipy.special.jve", lambda x: sp.jve(2, x), (np.array([-1.5, 0.0, 2.0]),), 2),
    ("scipy.special.kve", lambda z: sp.kve(V, z), (C(4),), 2),  # (kve = kv e^z: holomorphic, its rule as it was)
    ("scipy.special.ive", lambda z: sp.ive(V, z), (C(4),), 2),  # (ive = iv e^{-|Re z|}, Re z > 0 here)
    *[(f"scipy.special.spherical_{k}n", lambda z, k=k, d=d: getattr(msp, f"spherical_{k}n")(N, z, d), (z,), 2)
      for k in ("j", "i") for d in (False, True) for z in (XS, C(4))],
    *[(f"scipy.special.spherical_{k}n", lambda z, k=k, d=d: getattr(msp, f"spherical_{k}n")(N, z, d), (z,), 2)
      for k in ("y", "k") for d in (False, True) for z in (P(4), C(4))],
    ("scipy.special.spherical_jn", lambda z: msp.spherical_jn(N[:, None], z, derivative=True), (P(3),), 2),
    ("scipy.special.airy", sp.airy, (XA,), 2),
    ("scipy.special.airy", sp.airy, (C(3),), 2),
    ("scipy.special.airy", lambda x: sp.airy(x)[3], (XA,), 2),
    ("scipy.special.struve", lambda x: sp.struve(V, x), (P(4),), 2),
    ("scipy.special.struve", lambda x: sp.struve(np.array([0.0, 1.0, 2.0]), x), (np.array([-1.3, 0.0, 0.6]),), 2),
    ("scipy.special.modstruve", lambda x: sp.modstruve(V, x), (P(4),), 2),
    ("scipy.special.modstruve", lambda x: sp.modstruve(np.array([0.0, 1.0, 2.0]), x), (np.array([-1.3, 0.0, 0.6]),),
     2),
]


@pytest.mark.parametrize("covers,fn,args,order", CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_rule(covers, fn, args, order):
    check_grads(fn, *args, modes=("fwd", "rev"), order=order)


@pytest.mark.parametrize("fn", [sp.jve, sp.yve, sp.ive, sp.hankel1e, sp.hankel2e])
def test_complex_argument_in_every_direction(fn):
    # jve and yve are not holomorphic (e^{-|Im z|}), nor ive (e^{-|Re z|}: refused until the mom tester): jvp along
    # 1, i and a mixed direction, and the gradient of a real function (df/dx - i df/dy), against central
    # differences of SciPy's function
    z = np.array([0.8 + 0.4j, 1.7 - 0.6j, -2.1 + 0.3j, 1.2 - 1.1j])
    h = 1e-6
    for t in (1.0, 1j, 0.6 - 0.8j):
        fd = (fn(V, z + h * t) - fn(V, z - h * t)) / (2 * h)
        np.testing.assert_allclose(mg.jvp(lambda z: fn(V, z), (z,), (np.full(4, t, complex),))[1], fd, atol=1e-8)
    w = np.array([0.3 - 1j, 2.0 + 0.5j, -1 + 1j, 0.4])

    def F(z):
        return np.sum(np.real(np.conj(w) * fn(V, z)))

    e = np.eye(4)
    want = [(F(z + h * k) - F(z - h * k) - 1j * (F(z + 1j * h * k) - F(z - 1j * h * k))) / (2 * h) for k in e]
    np.testing.assert_allclose(mg.grad(F)(z), want, atol=1e-8)


def test_jve_at_its_kink_and_real_arguments():
    # a complex z on the real axis: |Im z|' taken as 0 (as np.abs's at 0), so the derivative is jv's
    x = 1.3
    d = 0.5 * (sp.jv(0, x) - sp.jv(2, x))
    np.testing.assert_allclose(mg.jvp(lambda z: sp.jve(1.0, z), (np.array([x + 0j]),), (np.array([1j]),))[1],
                               [1j * d], atol=1e-15)
    np.testing.assert_allclose(mg.grad(lambda x: sp.jve(1.0, x))(x), d, rtol=1e-14)  # real: jve = jv


def test_spherical_values_and_second_derivatives():
    x = np.array([0.7, 1.5, 2.5, 4.0])
    for k in "jyik":
        np.testing.assert_array_equal(getattr(msp, f"spherical_{k}n")(N, x), getattr(sp, f"spherical_{k}n")(N, x))
        np.testing.assert_array_equal(getattr(msp, f"spherical_{k}n")(N, x, True),
                                      getattr(sp, f"spherical_{k}n")(N, x, True))
    # f'' from the ODEs: -(2/z) f' -+ (1 -+ n(n+1)/z^2) f; and j_0''(0) = -1/3
    for k, s in (("j", -1.0), ("y", -1.0), ("i", 1.0), ("k", 1.0)):
        f = getattr(sp, f"spherical_{k}n")
        ode = -(2 / x) * f(N, x, True) + (s + N * (N + 1) / x ** 2) * f(N, x)
        d2 = mg.jvp(lambda x, k=k: getattr(msp, f"spherical_{k}n")(N, x, True), (x,), (np.ones(4),))[1]
        np.testing.assert_allclose(d2, ode, rtol=1e-12)
    assert mg.jvp(mg.grad(lambda z: msp.spherical_jn(0, z)), (0.0,), (1.0,))[1] == pytest.approx(-1 / 3, rel=1e-14)


def test_order_has_no_derivative():
    assert isinstance(mg.grad(lambda v: sp.hankel1(v, 1.5).real)(0.5), mg.NotImplementedTangent)
    assert isinstance(mg.grad(lambda v: sp.struve(v, 1.5))(0.5), mg.NotImplementedTangent)
    assert isinstance(mg.jvp(lambda v: sp.jve(v, 1.5 + 0.5j), (0.5,), (1.0,))[1], mg.NotImplementedTangent)


def test_scipys_spherical_functions_name_mutagrads():
    with pytest.raises(mg.TracerEscapeError, match="mutagrad.scipy.special"):
        mg.grad(lambda z: sp.spherical_jn(1, z))(1.0)
