"""mutagrad.scipy.signal's linear time-invariant systems: tf2ss, ss2tf, zpk2ss, ss2zpk, cont2discrete,
dlsim and lsim.

Every derivative against central differences of SciPy's own function on plain arrays (check_grads:
mutagrad's functions call SciPy's when nothing is traced), reverse against forward mode (the dot-product
identity); the values against SciPy's with every float argument traced; SciPy's errors on traced
arguments, and the refusal of lsim's unequal time steps."""
import re
import warnings

import numpy as np
import pytest

import mutagrad as mg
from mutagrad.testing import check_grads, numerical_grad

ss = pytest.importorskip("scipy.signal")
import mutagrad.scipy.signal as mss
from tests.rules._draws import assert_raises_as_theirs, float_argnums, leaves

RNG = np.random.default_rng(31)
# a damped oscillator with two inputs and two outputs (SciPy's cont2discrete example, widened)
A = np.array([[0.0, 1.0], [-10.0, -3.0]])
B = np.array([[0.0, 1.0], [10.0, 0.5]])
C = np.array([[1.0, 0.0], [0.3, 2.0]])
D = np.array([[0.0, 0.2], [0.1, 0.0]])
B1, C1, D0 = B[:, :1].copy(), C[:1].copy(), np.zeros((1, 1))  # single input and output, strictly proper
NUM, DEN = np.array([0.5, 2.0, 1.0]), np.array([1.0, 3.0, 2.5, 1.2])  # a third-order transfer function
ZR, PR, KR = np.array([-0.5]), np.array([-1.0, -2.0, -4.0]), 3.0  # real zeros and poles (moved one at a time)
# (as many zeros as poles: backward differences put n - m zeros at z = 0, a multiple root for n - m > 1,
# found from rounding errors of size 1e-16 as roots of size 1e-8: neither SciPy's value nor a derivative)
ZB = np.array([-0.5, -3.0, -6.0])
DT = 0.1
SYSD = ss.cont2discrete((A, B, C, D), DT)  # a discrete system for dlsim
U1 = np.sin(0.4 * np.arange(16))
U2 = RNG.standard_normal((16, 2))
T = np.linspace(0.0, 3.0, 16)
UT = np.cos(2 * T)
X0 = np.array([1.0, -0.5])
with warnings.catch_warnings():  # (SciPy's warning of the numerator's leading zero, which it trims)
    warnings.simplefilter("ignore", ss.BadCoefficients)
    TFD, ZPKD = ss.cont2discrete((NUM, DEN), DT), ss.cont2discrete((ZR, PR, KR), DT)  # discrete systems

METHODS = ("zoh", "foh", "impulse", "bilinear", "tustin", "euler", "forward_diff", "backward_diff")


def _c2d(method):
    if method == "impulse":  # (strictly proper only: a plain D = 0, as differences in it would be refused)
        return lambda a, b, c, dt: mss.cont2discrete((a, b, c, D0), dt, method=method)
    return lambda a, b, c, d, dt: mss.cont2discrete((a, b, c, d), dt, method=method)


CASES = [  # (what it covers, function, arguments)
    # cont2discrete: every method on (A, B, C, D), in the matrices and dt; gbt in alpha too
    *[("cont2discrete", _c2d(m), (A, B1, C1, DT) if m == "impulse" else (A, B, C, D, DT)) for m in METHODS],
    ("cont2discrete", lambda a, b, dt, al: mss.cont2discrete((a, b, C, D), dt, method="gbt", alpha=al),
     (A, B, DT, 0.3)),
    # the tf form (tf2ss, discretised, back with ss2tf) and the zpk form (zpk2ss, ss2zpk)
    ("cont2discrete", lambda n, d, dt: mss.cont2discrete((n, d), dt), (NUM, DEN, DT)),
    ("cont2discrete", lambda n, d, dt: mss.cont2discrete((n, d), dt, method="foh"), (NUM, DEN, DT)),
    ("cont2discrete", lambda n, d: mss.cont2discrete((n, d), DT, method="bilinear"), (NUM, DEN)),
    ("cont2discrete", lambda n, d: mss.cont2discrete((n, d), DT, method="impulse"), (NUM, DEN)),
    ("cont2discrete", lambda z, p, k, dt: mss.cont2discrete((z, p, k), dt), (ZR, PR, KR, DT)),
    ("cont2discrete", lambda z, p, k: mss.cont2discrete((z, p, k), DT, method="backward_diff"), (ZB, PR, KR)),
    ("cont2discrete", lambda p, k, dt: mss.cont2discrete(([], p, k), dt, method="foh"), (PR, KR, DT)),
    # the conversions
    ("tf2ss", lambda n, d: mss.tf2ss(n, d), (NUM, DEN)),
    ("tf2ss", lambda n, d: mss.tf2ss(n, d), (np.array([[1.0, 2.0, 3.0], [0.5, 0.0, 1.0]]), DEN * 2.0)),
    ("tf2ss", lambda n, d: mss.tf2ss(n, d), (np.array([2.0]), np.array([4.0]))),
    ("ss2tf", lambda a, b, c, d: mss.ss2tf(a, b, c, d), (A, B, C, D)),
    ("ss2tf", lambda a, b, c, d: mss.ss2tf(a, b, c, d, input=1), (A, B, C, D)),
    ("zpk2ss", lambda z, p, k: mss.zpk2ss(z, p, k), (ZR, PR, KR)),
    ("ss2zpk", lambda a, b, c, d: mss.ss2zpk(a, b, c, d, input=1), (A, B, C1, D[:1])),
    # dlsim: the state-space form in the matrices, input and initial state; tf and zpk forms; t given
    ("dlsim", lambda a, b, c, d, u, x0: mss.dlsim((a, b, c, d, DT), u, x0=x0), (*SYSD[:4], U2, X0)),
    ("dlsim", lambda a, u: mss.dlsim((a, SYSD[1][:, :1], SYSD[2], SYSD[3][:, :1], DT), u)[1:], (SYSD[0], U1)),
    ("dlsim", lambda n, d, u: mss.dlsim((n, d, 0.5), u), (np.array([0.2, 0.1]), np.array([1.0, -0.6, 0.25]), U1)),
    ("dlsim", lambda k, u: mss.dlsim(([0.4], [0.5, -0.3], k, 0.5), u), (1.5, U1)),
    ("dlsim", lambda a, u: mss.dlsim((a, B1 * DT, C1, D0, DT), u, t=np.linspace(0.0, 2.3, 16))[1], (SYSD[0], U1)),
    # lsim: linear interpolation, zero-order hold, no input (from T[0] > 0), tf form, traced times
    ("lsim", lambda a, b, c, d, u, x0: mss.lsim((a, b, c, d), u, T, X0=x0)[1:], (A, B1, C, D[:, :1], UT, X0)),
    ("lsim", lambda a, b, u: mss.lsim((a, b, C, D), u, T, interp=False)[1:], (A, B, np.stack([UT, -UT], 1))),
    ("lsim", lambda a, x0: mss.lsim((a, B1, C1, D0), None, T + 0.2, X0=x0)[1:], (A, X0)),
    ("lsim", lambda n, d, u: mss.lsim((n, d), u, T)[1:], (NUM, DEN, UT)),
    ("lsim", lambda a, dt: mss.lsim((a, B1, C1, D0), UT, dt * np.arange(16.0))[1:], (A, 0.2)),
    ("lsim", lambda a, u: mss.lsim((a, B1, C1, D0), u, T[:1], X0=X0)[1:], (A, UT[:1])),
]


@pytest.mark.parametrize("covers,fn,args", CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_derivatives(covers, fn, args):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ss.BadCoefficients)  # (SciPy's, on a numerator's leading zeros)
        check_grads(fn, *args, modes=("fwd", "rev"))


def test_every_function_has_a_case():
    from mutagrad.rules.scipy import signal_lti

    assert {c[0] for c in CASES} == {name.split(".")[-1] for name in signal_lti.COMPOSITES}
    assert {"cont2discrete", "dlsim", "lsim", "tf2ss", "ss2tf", "zpk2ss", "ss2zpk"} <= set(dir(mss))


VALUES = [  # (function, positional arguments, keywords): traced, against SciPy's call
    *[("cont2discrete", ((A, B1, C, D0), DT), {"method": m}) for m in METHODS],
    ("cont2discrete", ((A, B, C, D), DT), {"method": "gbt", "alpha": 0.3}),
    ("cont2discrete", ((A, B, C, D), DT), {"method": "foh"}),
    ("cont2discrete", ((NUM, DEN), DT), {}),
    ("cont2discrete", ((NUM, DEN), DT), {"method": "foh"}),
    ("cont2discrete", ((NUM, DEN), DT), {"method": "tustin"}),
    ("cont2discrete", ((np.array([1.0, 0.0]), np.array([-1.0 + 2j, -1.0 - 2j, -3.0]), 5.0), DT), {}),
    ("cont2discrete", ((ZR, PR, KR), DT), {"method": "impulse"}),
    ("tf2ss", (NUM, DEN), {}),
    ("tf2ss", (np.array([[1.0, 2.0, 3.0], [0.5, 0.0, 1.0]]), DEN), {}),
    ("tf2ss", (np.array([0.0, 0.0, 3.0]), np.array([0.0, 2.0, 1.0, 4.0])), {}),  # (leading zeros trimmed)
    ("ss2tf", (A, B, C, D), {"input": 1}),
    ("zpk2ss", (np.array([1.0, 0.0]), np.array([-1.0 + 2j, -1.0 - 2j, -3.0]), 5.0), {}),
    ("ss2zpk", (A, B1, C1, D0), {}),
    ("dlsim", (SYSD, U2), {"x0": X0}),
    ("dlsim", (SYSD, U2), {"t": np.linspace(0.0, 3.1, 16)}),
    ("dlsim", (TFD, U1), {}),
    ("dlsim", (ZPKD, U1), {}),
    ("lsim", ((A, B, C, D), np.stack([UT, UT ** 2], 1), T), {"X0": X0}),
    ("lsim", ((A, B, C, D), np.stack([UT, UT ** 2], 1), T + 0.3), {"interp": False}),
    ("lsim", ((A, B1, C1, D0), None, T), {"X0": X0}),
    ("lsim", ((NUM, DEN), UT, T), {}),
    ("lsim", ((ZR, PR, KR), UT, T), {}),
]


@pytest.mark.parametrize("name,args,kw", VALUES, ids=[f"{v[0]}-{i}" for i, v in enumerate(VALUES)])
def test_values_are_scipys(name, args, kw):
    keys = [k for k, v in kw.items() if isinstance(v, np.ndarray)]  # (x0, X0, t: traced too)

    def ours(*a):
        return getattr(mss, name)(*a[:len(args)], **{**kw, **dict(zip(keys, a[len(args):]))})

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ss.BadCoefficients)
        want = getattr(ss, name)(*args, **kw)
        argnums = float_argnums(args) + tuple(range(len(args), len(args) + len(keys)))
        got = mg.vjp(ours, *args, *(kw[k] for k in keys), _argnums=argnums)[0]
        plain = getattr(mss, name)(*args, **kw)  # nothing traced: SciPy's own call
    assert len(leaves(got)) == len(leaves(want))
    for g, w in zip(leaves(got), leaves(want), strict=True):
        g, w = np.asarray(mg.value(g)), np.asarray(w)
        assert g.shape == w.shape and g.dtype == w.dtype, (g.shape, w.shape, g.dtype, w.dtype)
        np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-14 * np.max(np.abs(w), initial=1.0))
    for p, w in zip(leaves(plain), leaves(want), strict=True):
        assert np.array_equal(p, w)


@pytest.mark.parametrize("method", (*METHODS, "gbt"))
def test_cont2discrete_values_are_scipys_bit_for_bit(method):
    # the same operations in SciPy's order: its bits
    d0 = D0 if method == "impulse" else D[:, :1]
    got = mg.vjp(lambda a, b, dt: mss.cont2discrete((a, b, C, d0), dt, method=method, alpha=0.7), A, B1, DT)[0]
    for g, w in zip(got, ss.cont2discrete((A, B1, C, d0), DT, method=method, alpha=0.7), strict=True):
        assert np.array_equal(mg.value(g), w)


def test_simulation_values_are_scipys_bit_for_bit():
    got = mg.vjp(lambda u, x0: mss.dlsim(SYSD, u, x0=x0), U2, X0)[0]
    for g, w in zip(got, ss.dlsim(SYSD, U2, x0=X0), strict=True):
        assert np.array_equal(mg.value(g), w)
    got = mg.vjp(lambda a, u: mss.lsim((a, B1, C, D[:, :1]), u, T, X0=X0), A, UT)[0]
    for g, w in zip(got, ss.lsim((A, B1, C, D[:, :1]), UT, T, X0=X0), strict=True):
        assert np.array_equal(mg.value(g), w)


def test_dt_derivative_of_zoh_is_the_exponential_s():
    # d/dt of e^{A dt} is A e^{A dt}, and of the input map ∫_0^dt e^{As} ds B it is e^{A dt} B: an oracle
    # from the formula, not from differences
    jac = mg.jacobian(lambda dt: mss.cont2discrete((A, B, C, D), dt)[0])(DT)
    ad = ss.cont2discrete((A, B, C, D), DT)[0]
    np.testing.assert_allclose(jac, A @ ad, rtol=1e-12, atol=1e-14)
    jac_b = mg.jacobian(lambda dt: mss.cont2discrete((A, B, C, D), dt)[1])(DT)
    np.testing.assert_allclose(jac_b, ad @ B, rtol=1e-12, atol=1e-14)


def _rc_loss(r, c, sig, measured, power):
    """An RC thermal model: C dT/dt = P - T / R (T the temperature above ambient), discretised with a
    zero-order hold and simulated; the loss the squared misfit to measured temperatures."""
    system = (np.reshape(-1.0 / (r * c), (1, 1)), np.reshape(1.0 / c, (1, 1)), np.ones((1, 1)), np.zeros((1, 1)))
    ad, bd, cd, dd, dt = sig.cont2discrete(system, 60.0, method="zoh")
    _, y, _ = sig.dlsim((ad, bd, cd, dd, dt), power)
    return np.mean((y[:, 0] - measured) ** 2)


def test_rc_thermal_model_fit():
    rng = np.random.default_rng(5)
    power = np.where(np.arange(120) % 40 < 20, 50.0, 0.0)  # a heater on and off, a sample a minute
    r_true, c_true = 0.8, 2000.0  # K/W, J/K
    _, y, _ = ss.dlsim(ss.cont2discrete((np.array([[-1.0 / (r_true * c_true)]]), np.array([[1.0 / c_true]]),
                                         np.array([[1.0]]), np.array([[0.0]])), 60.0), power)
    measured = y[:, 0] + 0.1 * rng.standard_normal(120)
    r0, c0 = 0.6, 2500.0
    v, (gr, gc) = mg.value_and_grad(lambda r, c: _rc_loss(r, c, mss, measured, power), argnums=(0, 1))(r0, c0)
    plain = lambda r, c: _rc_loss(r, c, ss, measured, power)
    np.testing.assert_allclose(v, plain(r0, c0), rtol=1e-12)
    want = numerical_grad(plain, (r0, c0), (0, 1))
    np.testing.assert_allclose([gr, gc], [float(w) for w in want], rtol=1e-6)
    # forward mode: the directional derivative against the gradient
    tangent = (0.3, -40.0)
    _, jv = mg.jvp(lambda r, c: _rc_loss(r, c, mss, measured, power), (r0, c0), tangent)
    np.testing.assert_allclose(jv, gr * tangent[0] + gc * tangent[1], rtol=1e-10)
    # a gradient step on log R, log C lowers the misfit
    step = 1e-2
    assert plain(r0 * np.exp(-step * np.sign(gr * r0)), c0 * np.exp(-step * np.sign(gc * c0))) < plain(r0, c0)


def test_lsim_refuses_unequal_time_steps():
    uneven = np.concatenate([T[:10], T[10:] * 1.05])
    with pytest.raises(ValueError, match="Time steps are not equally spaced"):
        ss.lsim((A, B1, C1, D0), np.ones(16), uneven)  # SciPy's own refusal
    with pytest.raises(mg.DifferentiationError, match=r"scipy\.signal\.lsim at .*test_scipy_signal_lti\.py.*"
                       r"Time steps are not equally spaced.*np\.linspace.*cont2discrete") as e:
        mg.grad(lambda a: np.sum(mss.lsim((a, B1, C1, D0), np.ones(16), uneven)[1]))(A)
    assert isinstance(e.value, ValueError)  # (caught as SciPy's is)


def test_lsim_with_a_traced_zero_input_takes_the_input_path():
    # SciPy drops an all-zero input (and D); traced, the input is kept: the same values, its derivative
    zero = np.zeros(16)
    _, pb = mg.vjp(lambda u: mss.lsim((A, B1, C1, np.array([[0.5]])), u, T, X0=X0)[1], zero)
    want = numerical_grad(lambda u: np.sum(ss.lsim((A, B1, C1, np.array([[0.5]])), u, T, X0=X0)[1]), (zero,), (0,))
    np.testing.assert_allclose(pb(np.ones(16))[0], want[0], rtol=1e-6, atol=1e-9)
    got = mg.vjp(lambda u: mss.lsim((A, B1, C1, np.array([[0.5]])), u, T, X0=X0), zero)[0]
    for g, w in zip(got, ss.lsim((A, B1, C1, np.array([[0.5]])), zero, T, X0=X0), strict=True):
        np.testing.assert_allclose(mg.value(g), w, rtol=1e-12, atol=1e-15)


ERRORS = [  # (function, arguments, keywords): SciPy's error on plain arguments, ours on traced ones
    ("cont2discrete", ((A, B, C, D), DT), {"method": "gbt"}),
    ("cont2discrete", ((A, B, C, D), DT), {"method": "gbt", "alpha": 1.5}),
    ("cont2discrete", ((A, B, C, D), DT), {"method": "rk4"}),
    ("cont2discrete", ((A, B, C, D), DT), {"method": "impulse"}),
    ("cont2discrete", ((A, B, C, D, D), DT), {}),
    ("tf2ss", (DEN, NUM), {}),
    ("ss2tf", (A, B, C, D), {"input": 2}),
    ("ss2tf", (A, B[:1], C, D), {}),
    ("dlsim", ((A, B), U1), {}),
    ("lsim", ((A, B1, C1, D0), UT[:5], T), {}),
    ("lsim", ((A, B1, C1, D0), U2, np.linspace(0, 1, 25)), {}),
    ("lsim", ((A, B1, C1, D0), UT, T - 1.0), {}),
]


@pytest.mark.parametrize("name,args,kw", ERRORS, ids=[f"{e[0]}-{i}" for i, e in enumerate(ERRORS)])
def test_scipys_errors(name, args, kw):
    assert_raises_as_theirs(getattr(ss, name), getattr(mss, name), args, kw)


@pytest.mark.parametrize("name,call", [
    ("cont2discrete", lambda a: ss.cont2discrete((a, B1, C1, D0), DT)[0]),
    ("dlsim", lambda a: ss.dlsim((a, B1, C1, D0, DT), U1)[1])])
def test_scipys_own_functions_on_traced_arrays_name_ours(name, call):
    with pytest.raises(mg.TracerEscapeError) as e:
        mg.grad(lambda a: np.sum(call(a)))(A)
    assert f"mutagrad.scipy.signal.{name} is the same function, differentiated" in str(e.value)


def test_tf2ss_outputs_take_traced_writes():
    # (sysid) B = eye(k - 1, 1) came back plain: `B[:, 0] = B[:, 0] * g` was refused with mnp.zeros advice
    def plain(p):
        A, B, C, D = ss.tf2ss(p[:1], np.r_[1.0, p[2]])
        B[:, 0] = B[:, 0] * p[3]
        return np.sum(ss.ss2tf(A, B, C, D)[0] ** 2)

    def traced(p):
        A, B, C, D = mss.tf2ss(p[:1], np.concatenate([np.ones(1), p[2:3]]))
        B[:, 0] = B[:, 0] * p[3]
        return np.sum(mss.ss2tf(A, B, C, D)[0] ** 2)

    p = np.array([2.0, 0.0, 4.0, 1.5])
    np.testing.assert_allclose(mg.grad(traced)(p), numerical_grad(plain, (p,), (0,))[0], rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("call,fix", [
    (lambda p: ss.step((p[:1], np.r_[1.0, 1.0]), T=np.linspace(0, 1, 5))[1], "np.ones_like(T)"),
    (lambda p: ss.bode((p[:1], np.r_[1.0, 1.0]), w=[1.0])[1], "freqs(b, a, worN=w)"),
    (lambda p: ss.lti(p[:1], np.r_[1.0, 1.0]).num, "pass the system as a tuple")])
def test_responses_and_lti_objects_name_the_rewrite(call, fix):
    with pytest.raises(mg.DifferentiationError, match=re.escape(fix)):
        mg.grad(lambda p: np.sum(call(p)))(np.array([1.2]))
