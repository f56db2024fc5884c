"""A zero cotangent times a NaN partial is zero (strong zeros for NaN too).

np.nansum / np.nanmean drop NaN elements, np.where drops the branch it does
not pick, a write drops what it overwrites: the derivative through such an
element is zero, as forward mode and finite differences say, even where the
element's own partial is NaN (IEEE's 0 * nan is nan). Oracles: central
differences of the same function and forward mode.
"""
import warnings

import numpy as np
import pytest

import mutagrad as mg
import mutagrad.numpy as mnp
import mutagrad.scipy.special as mss
from mutagrad.testing import check_grads
from tests._oracles import fd_hessian

T = np.array([0.0, 1.0, 2.0, 3.0])
Y = np.array([0.1, np.nan, 2.1, 2.9])


def _dropped_write(x):
    y = np.sqrt(x)
    y[x <= 0] = 0.0
    return np.sum(y)


CASES = {
    "nansum residuals": (lambda p: np.nansum((p[0] * T + p[1] - Y) ** 2), np.array([1.0, 0.1])),
    "nanmean of squares": (lambda x: np.nanmean(x ** 2 * np.array([1.0, np.nan, 2.0])), np.array([1.0, 2.0, 3.0])),
    "where over sqrt": (lambda x: np.sum(np.where(x > 0, np.sqrt(x), 0.0)), np.array([-1.0, 4.0])),
    "where over sin(x)/x": (lambda x: np.sum(np.where(x != 0, np.sin(x) / x, 1.0)), np.array([0.0, 1.2])),
    "where over isnan": (lambda p: np.sum(np.where(np.isnan(Y), 0.0, (p[0] - Y) ** 2)), np.array([0.5, 0.0])),
    "write over sqrt": (_dropped_write, np.array([-1.0, 4.0, 2.0])),
    "nanquantile": (lambda s: np.nanquantile(Y * s, 0.3), 0.7),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_zero_cotangent_times_nan_partial_is_zero(name):
    f, x = CASES[name]
    with np.errstate(all="ignore"):
        g = mg.grad(f)(x)
        xs = np.atleast_1d(np.asarray(x, float))
        h = 1e-6

        def fx(v):
            return f(v if np.ndim(x) else float(v[0]))

        ref = np.array([(fx(xs + h * e) - fx(xs - h * e)) / (2 * h) for e in np.eye(len(xs))])
        fwd = np.array([mg.jvp(f, (x,), (e if np.ndim(x) else 1.0,))[1] for e in np.eye(len(xs))])
        _, pb = mg.vjp(f, x)
        (g_vjp,) = pb(1.0)
    assert np.all(np.isfinite(g))
    np.testing.assert_allclose(np.atleast_1d(g), ref, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(np.atleast_1d(g), fwd, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(np.atleast_1d(g_vjp), np.atleast_1d(g), rtol=0, atol=0)


def test_the_functions_own_nan_stays():
    # sqrt of a negative that reaches the output: the derivative is NaN, as the value is
    with np.errstate(all="ignore"):
        g = mg.grad(lambda x: np.sum(np.sqrt(x)))(np.array([-1.0, 4.0]))
    assert np.isnan(g[0]) and g[1] == 0.25


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_nan_in_a_large_gradient_is_found(dtype):
    # the NaN of one element among 10^4 (0 * the partial of sqrt at a dropped negative) is found,
    # and the careful pass makes it zero; elsewhere the closed form 1 / (2 sqrt x)
    x = np.linspace(-1.0, 4.0, 10_001).astype(dtype)
    with np.errstate(invalid="ignore", divide="ignore"):
        g = mg.grad(_dropped_write)(x)
        want = np.where(x > 0, 0.5 / np.sqrt(x), 0.0)
        np.testing.assert_allclose(g, want, rtol=1e-6)
        g = mg.grad(lambda v: np.sum(np.sqrt(v)))(x[::-1])  # the function's own NaNs (the last elements) stay
    assert np.array_equal(np.isnan(g), x[::-1] < 0)


C_INF = np.array([-np.inf, 1.0, 2.0, 0.5])  # a masked entry: its tangent along s is infinite


def _lse_user_errstate(s):
    # the user's own errstate hides the floating-point events forward mode's strong zeros watch
    with np.errstate(divide="ignore", invalid="ignore"):
        x = C_INF / s
        m = np.max(mg.stop_gradient(x))
        return m + np.log(np.sum(np.exp(x - m)))


INFINITE_TANGENT_DROPPED = {
    "max": lambda s: np.max(C_INF * s),
    "min": lambda s: np.min(-C_INF * s),
    "amax axis": lambda s: np.sum(np.amax((C_INF * s).reshape(2, 2), axis=0)),
    "maximum.reduce": lambda s: np.maximum.reduce(C_INF * s),
    "nanmax": lambda s: np.nanmax(C_INF * s),
    "logaddexp.reduce": lambda s: np.logaddexp.reduce(C_INF / s),
    "logsumexp": lambda s: mss.logsumexp(C_INF / s),
    "logsumexp with b": lambda s: mss.logsumexp(C_INF / s, b=np.array([1.0, 2.0, 0.5, 1.0])),
    "softmax": lambda s: np.sum(mss.softmax(C_INF / s) * np.array([1.0, 2.0, 3.0, 4.0])),
    "log_softmax": lambda s: np.sum(mss.log_softmax(C_INF / s)[1:] * np.array([2.0, 3.0, 4.0])),
    "under the user's np.errstate": _lse_user_errstate,
}


@pytest.mark.parametrize("name", sorted(INFINITE_TANGENT_DROPPED))
def test_an_infinite_tangent_of_an_element_that_does_not_count_is_dropped(name):
    # forward mode gave NaN (0 * inf in the selection or the weights); reverse was right
    f = INFINITE_TANGENT_DROPPED[name]
    s, h = 1.3, 1e-6
    with np.errstate(all="ignore"):
        ref = (f(s + h) - f(s - h)) / (2 * h)
        g = mg.grad(f)(s)
        _, t = mg.jvp(f, (s,), (1.0,))
    assert np.isfinite(ref)
    np.testing.assert_allclose(g, ref, rtol=1e-6)
    np.testing.assert_allclose(t, ref, rtol=1e-6)


class _Log:
    def __init__(self):
        self.messages = []

    def write(self, message):
        self.messages.append(message)


@pytest.mark.parametrize("mode", ["log", "raise", "warn"])
def test_derivative_code_follows_no_user_error_mode(mode):
    # d(1/x) = -1/x**2 underflows where 1/x does not: under np.errstate(all="log") the
    # reverse pass called .write on mutagrad's own handler (AttributeError), and under
    # "raise" it raised FloatingPointError where the plain call returns. The derivative's
    # floating-point events are mutagrad's: the user's mode applies to the user's operations.
    import warnings

    x = np.array([1e300, 2e300, 0.5])  # (the last element's derivative, -4, is not zero)
    log = _Log()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with np.errstate(all=mode, call=log):
            value = np.sum(1 / x)
            g = mg.grad(lambda x: np.sum(1 / x))(x.copy())
            v, t = mg.jvp(lambda x: np.sum(1 / x), (x.copy(),), (np.ones(3),))
    assert v == value and not log.messages and not caught
    e = np.array([0.0, 0.0, 1e-6])  # central differences where they are representable
    fd = (np.sum(1 / (x + e)) - np.sum(1 / (x - e))) / 2e-6
    np.testing.assert_allclose(g[2], fd, rtol=1e-7)
    np.testing.assert_array_equal(g[:2], [0.0, 0.0])  # -1e-600 and -2.5e-601 underflow to -0.0
    np.testing.assert_allclose(t, fd, rtol=1e-7)
    # the user's own events still follow the mode: log(0) in the function, as in a plain call
    with np.errstate(all=mode, call=log):
        if mode == "raise":
            with pytest.raises(FloatingPointError):
                mg.jvp(lambda x: np.sum(np.log(x - x)), (x.copy(),), (np.ones(3),))
        else:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                mg.jvp(lambda x: np.sum(np.log(x - x)), (x.copy(),), (np.ones(3),))
            assert len(log.messages) + len(caught) >= 1


def test_an_out_argument_warns_as_often_as_the_plain_call():
    # the exact-bits replay of exp(b, out=b) warned a second time
    import warnings

    def f(x):
        b = np.empty_like(x)
        np.multiply(x, x, out=b)
        np.exp(b, out=b)
        return np.sum(np.where(np.isinf(b), 0.0, b))

    x = np.array([1e150, 1.0])
    for call in (lambda: f(x.copy()), lambda: mg.grad(f)(x.copy())):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            call()
        assert [str(w.message) for w in caught] == ["overflow encountered in exp"]


@pytest.mark.parametrize("x", [1e-310, np.array([1e-310, 2.0]), np.array([5e-324, 1e-300])])
def test_reciprocal_partials_of_subnormal_values_are_quotients(x):
    # log's partial 1/x overflows at a subnormal x: the cotangent g * (1/x) was inf where the
    # derivative of x log(x), log(x) + 1 (the closed form), is finite; g / x keeps it
    c = np.where(np.abs(x) < 1e-300, 3e-310, 1.0)  # a / c: its partial 1/c overflows too

    def f(x):
        return np.sum(np.log(x) * x) + np.sum(np.log10(x) * x) + np.sum(x / c * c)

    want = np.log(x) + 1.0 + np.log10(x) + 1.0 / np.log(10.0) + 1.0
    g = mg.grad(f)(x)
    np.testing.assert_allclose(g, want, rtol=1e-12)

    def loop(v):  # element by element (runs), Python floats: 1.0 / 1e-310 is inf without an event
        s = 0.0
        for i in range(len(v)):
            s = s + np.log(v[i]) * v[i]
        return s

    v = np.atleast_1d(x).astype(float)
    np.testing.assert_allclose(mg.grad(loop)(v), np.log(v) + 1.0, rtol=1e-12)


def test_reciprocal_and_negative_powers_of_tiny_values_are_quotients():
    # (sinkhorn tester) the scaling form u = a * (K @ v) ** -1 or np.reciprocal(K @ v) of a small
    # epsilon: -y * y and p x ** (p - 1) overflow where the cotangent, a tiny g times them, is finite;
    # a / b (the quotient) was right. Closed form: d/dt c * (c t) ** -1 = -1 / t ** 2, at every scale
    forms = {
        "reciprocal": lambda t, c: c * np.reciprocal(c * t),
        "power": lambda t, c: c * np.power(c * t, -1.0),
        "**": lambda t, c: c * (c * t) ** -1.0,
        "float_power": lambda t, c: c * np.float_power(c * t, -1.0),
        "divide": lambda t, c: c / (c * t),
    }
    for name, form in forms.items():
        for c in (1e-160, 1.0):
            for t in (2.0, np.array([2.0, 0.5])):
                f = lambda t, form=form, c=c: np.sum(form(t, c))
                np.testing.assert_allclose(mg.grad(f)(t), -1.0 / np.square(t), rtol=1e-14, err_msg=name)
                _, dt = mg.jvp(f, (t,), (np.ones_like(t),))
                np.testing.assert_allclose(dt, np.sum(-1.0 / np.square(t)), rtol=1e-14, err_msg=name)
    # at 0 the quotient g / 0 * 0 is NaN: the product (d/dx x ** 0.5 at 0 is inf, x ** 2's is 0)
    z = np.array([0.0, 4.0])
    assert mg.grad(lambda x: np.sum(x ** 2.0))(z).tolist() == [0.0, 8.0]
    assert mg.grad(lambda x: np.sum(x ** 0.5))(z).tolist() == [np.inf, 0.25]


def test_second_derivatives_through_quotients_of_tiny_values():
    # (sinkhorn tester) log(1 / exp(-c / t)) = c / t at a small t: the partial of 1 / e, -y / e, is finite
    # but its own derivative y de / e**2 overflows; the Hessian-vector product (forward over reverse) was inf,
    # forward over forward NaN. Closed form: d2/dt2 c / t = 2 c / t**3
    c, t = 17.5588, 0.05
    f = lambda t: np.log(1.0 / np.exp(-c / t))
    want = 2 * c / t ** 3
    np.testing.assert_allclose(mg.jvp(mg.grad(f), (t,), (1.0,))[1], want, rtol=1e-10)
    np.testing.assert_allclose(mg.hessian(f)(t), want, rtol=1e-10)
    np.testing.assert_allclose(mg.jvp(lambda s: mg.jvp(f, (s,), (1.0,))[1], (t,), (1.0,))[1], want, rtol=1e-10)
    np.testing.assert_allclose(mg.grad(mg.grad(f))(t), want, rtol=1e-10)

    # (regress60) the quotient only where the product's derivative may overflow: x ** 1.5 at 1e-250 beside
    # an exact 0 (whose partial's derivative is inf: the event) has a finite partial 1.5e-125 and a factor
    # 1.5 x ** 1.5 that underflows; the quotient gave 3x the second derivative, and -inf at 1e-160
    for tiny in (1e-250, 1e-200, 1e-160):
        x = np.array([0.0, tiny])
        want = 1.5 * 0.5 * tiny ** -0.5
        h = np.diag(mg.hessian(lambda v: np.sum(v ** 1.5))(x))
        assert h[0] == np.inf
        np.testing.assert_allclose(h[1], want, rtol=1e-12)
        np.testing.assert_allclose(mg.jvp(mg.grad(lambda v: np.sum(v ** 1.5)), (x,), (np.array([0.0, 1.0]),))[1][1],
                                   want, rtol=1e-12)

    # an array version with an entropic term, through np.reciprocal: sum(log(reciprocal(exp(-c / t))) * w)
    cs = np.array([17.0, 12.0, 1.0])
    w = np.array([0.5, 2.0, -1.0])
    g = lambda t: np.sum(np.log(np.reciprocal(np.exp(-cs / t))) * w)
    np.testing.assert_allclose(mg.hessian(g)(t), np.sum(2 * cs * w) / t ** 3, rtol=1e-10)


def test_the_users_own_error_call_inside_the_function():
    # np.errstate(all="call", call=handler) inside the function sends the floating-point events
    # to the user's handler, not to forward mode's strong zeros: 0 * inf gave a NaN tangent
    calls = []

    def w(x):
        with np.errstate(all="call", call=lambda kind, flag: calls.append(kind)):
            x.T[0] = x[:, 1] ** 2  # underflows at this scale
            return np.sum(np.log(x) * x)

    x = np.array([[0.7, 1.3], [0.9, 1.1]]) * 1e-160
    t = np.array([[1.0, 0.5], [-0.3, 0.2]])
    h = 1e-166
    fd = (w(x + h * t) - w(x - h * t)) / (2 * h)
    calls.clear()
    w(x.copy())
    plain_calls = list(calls)
    calls.clear()
    _, tangent = mg.jvp(w, (x.copy(),), (t,))
    assert calls == plain_calls  # the user's handler sees the user's events only
    np.testing.assert_allclose(tangent, fd, rtol=1e-7)
    np.testing.assert_allclose(np.sum(mg.grad(w)(x.copy()) * t), fd, rtol=1e-7)


class _Singular(Exception):
    pass


def test_a_call_mode_set_inside_the_function_calls_the_error_call_installed_before():
    # (nanprop: np.errstate(divide="call") inside the function, with np.seterrcall(handler) made before the
    # call, was handled by the mode in force before it (a warning): the handler's raise never came, and the
    # program's fallback branch was not taken: a wrong value and gradient)
    def handler(kind, flag):
        raise _Singular(kind)

    def f(x):
        with np.errstate(divide="call"):
            try:
                r = np.sum(1.0 / x)
            except _Singular:
                r = np.sum(x ** 2)  # the fallback: by hand, its gradient is 2 x
        return r

    x = np.array([2.0, 0.0])
    old = np.seterrcall(handler)
    try:
        assert f(x.copy()) == 4.0
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # (no warning instead of the call)
            v, g = mg.value_and_grad(f)(x.copy())
            _, t = mg.jvp(f, (x.copy(),), (np.array([1.0, 0.0]),))
        assert v == 4.0 and t == 4.0
        np.testing.assert_array_equal(g, [4.0, 0.0])
        calls = []  # (the events of the function's own operations only, as in a plain call)
        np.seterrcall(lambda kind, flag: calls.append(kind))

        def counted(x):
            with np.errstate(divide="call"):
                return np.sum(np.log(x) * x)

        with warnings.catch_warnings(record=True) as plain_warned:  # (0 * -inf: "invalid", warned as before)
            warnings.simplefilter("always")
            counted(np.array([0.0, 1.0]))
        plain = list(calls)
        calls.clear()
        with warnings.catch_warnings(record=True) as warned:
            warnings.simplefilter("always")
            mg.grad(counted)(np.array([0.0, 1.0]))
        assert calls == plain == ["divide by zero"]
        assert [str(w.message) for w in warned] == [str(w.message) for w in plain_warned] == [
            "invalid value encountered in multiply"]
    finally:
        np.seterrcall(old)


def test_a_careful_run_again_does_not_repeat_the_functions_warnings():
    # (nanprop: grad's NaN fill and jvp's careful run ran the function again, and its RuntimeWarnings came
    # three times where a plain call warns once)
    ms = pytest.importorskip("mutagrad.scipy.special")

    def f(x):
        s = ms.softmax(x - np.inf)  # a NaN row, as SciPy gives it
        return np.nansum(s) + np.sum(x ** 2)

    x = np.array([0.5, 1.0])
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        g = mg.grad(f)(x)
    np.testing.assert_array_equal(g, 2 * x)  # by hand: the NaN row is dropped by nansum
    assert [str(w.message) for w in seen] == ["invalid value encountered in softmax"]


def _exp_out_caught(x):
    a = x.copy()
    try:
        with np.errstate(over="raise"):
            np.exp(a * np.array([1.0, 1000.0]), out=a)
    except FloatingPointError as e:
        assert str(e) == "overflow encountered in exp"
    return a[0] * 3.0


def _log_out_caught(x):
    a = x.copy()
    try:
        with np.errstate(invalid="raise"):
            np.log(a - 1.0, out=a)
    except FloatingPointError as e:
        assert str(e) == "invalid value encountered in log"
    return np.sum(a[:2] ** 2)


def _iadd_caught(x):
    a = x * 1.0
    try:
        with np.errstate(divide="raise"):
            a += np.array([1.0, 2.0, 3.0]) / np.array([1.0, 0.0, 2.0]) * 0.0 + x * 2.0
            a /= np.array([1.0, 0.0, 1.0])
    except FloatingPointError:
        pass
    return a[0] * a[2]


@pytest.mark.parametrize("fn, x", [(_exp_out_caught, np.array([0.5, 2.0])),
                                   (_log_out_caught, np.array([3.0, 1.5, 0.5])),
                                   (_iadd_caught, np.array([0.5, 1.5, 2.0]))],
                         ids=["exp-over", "log-invalid", "inplace-divide"])
def test_an_out_argument_is_written_before_the_error_state_raises(fn, x):
    # NumPy writes all of out, then raises; a program that catches the error goes on with it
    with np.errstate(invalid="ignore", divide="ignore"):
        check_grads(fn, x)


def test_an_error_state_set_outside_jvp_raises_after_the_write():
    # the error state before jvp: jvp runs the function under its own error call, which
    # handles the events as that state says; out= is written before the raise there too
    def f(x):
        a = x.copy()
        try:
            np.exp(a * np.array([1.0, 1000.0]), out=a)
        except FloatingPointError:
            pass
        return a[0] * 3.0

    x = np.array([0.5, 2.0])
    with np.errstate(over="raise"):
        v, t = mg.jvp(f, (x,), (np.array([1.0, 0.0]),))
    assert v == 3 * np.exp(0.5) and t == pytest.approx(3 * np.exp(0.5), rel=1e-14)


@pytest.mark.parametrize("kind", ["iop", "out", "log"])
def test_an_error_state_set_outside_a_nested_differentiation_raises_after_the_write(kind):
    # (regress23: under hessian (and nested grads) the inner level's error call passed the event to the
    # outer one's, which raised before the write: u kept its old values, a wrong Hessian)
    def f(x):
        u = x * 1.0
        try:
            if kind == "iop":
                u /= np.array([0.0, 2.0])  # NumPy leaves u = [inf, x1 / 2], then raises
            elif kind == "out":
                np.divide(u, np.array([0.0, 2.0]), out=u)
            else:
                np.log(u - np.array([1.0, 0.0]), out=u)  # [-inf, log x1]
        except FloatingPointError:
            pass
        return np.sum(np.nan_to_num(u, posinf=5.0, neginf=5.0) * x)

    x = np.array([1.0, 2.0])
    # by hand: f = 5 x0 + x1 * x1 / 2 (iop, out) or 5 x0 + x1 log x1 (log)
    d2 = 1.0 if kind != "log" else 1.0 / x[1]
    with np.errstate(all="raise"):
        np.testing.assert_allclose(mg.hessian(f)(x), [[0.0, 0.0], [0.0, d2]], rtol=1e-14)
        np.testing.assert_allclose(mg.grad(lambda x: mg.grad(f)(x)[1])(x), [0.0, d2], rtol=1e-14)


def test_a_tangent_overflow_does_not_raise_under_the_functions_error_state():
    # the value does not overflow, the tangent does: only the value's events are the user's,
    # so the function does not take its except branch (which a plain call never takes)
    def f(x):
        a = x * 1.0
        a[0] *= 1e308
        try:
            with np.errstate(over="raise"):
                a[1] *= a[0]
        except FloatingPointError:
            a[1] = 0.0
        return a[1] * 1e-300

    x = np.array([0.9, 1.6])
    v, t = mg.jvp(f, (x.copy(),), (np.ones(2),))
    assert v == f(x.copy()) != 0.0
    assert t == np.inf  # 0.9e308 + 1.6e308 overflows; reverse mode has no such intermediate
    np.testing.assert_allclose(mg.grad(f)(x.copy()), [1.6e8, 0.9e8], rtol=1e-12)


def _sum_caught(x):
    with np.errstate(over="raise"):
        try:
            return np.sum(x) * 1.0
        except FloatingPointError:
            return -1.0 * x[0]


def _matmul_caught(x):
    with np.errstate(over="raise"):
        try:
            return x @ np.array([2.0, 3.0])
        except FloatingPointError:
            return -1.0 * x[0]


@pytest.mark.parametrize("fn, want", [(_sum_caught, (2e-10, 2e8)), (_matmul_caught, (5e-10, 5e8))],
                         ids=["sum", "matmul"])
def test_a_tangent_overflow_in_a_non_elementwise_rule_is_not_the_functions(fn, want):
    # a rule that computes value and tangent together (sum, matmul) ran under the function's
    # np.errstate: the tangent's overflow raised, and the function returned its except branch's
    # value (-1e-10) as if the plain call had taken it
    x, v = np.array([1e-10, 1e-10]), np.array([1e308, 1e308])
    assert fn(x.copy()) == want[0]
    val, tan = mg.jvp(fn, (x.copy(),), (v,))
    assert val == want[0] and tan == np.inf  # the true tangent, want[1] * 1e300, overflows in float64
    _, small = mg.jvp(fn, (x.copy(),), (v * 1e-300,))
    assert small == pytest.approx(want[1], rel=1e-14)


def test_a_value_overflow_in_a_non_elementwise_rule_still_raises_in_the_function():
    # the value's own events are the function's: it takes its except branch, as a plain call does
    x = np.array([1e308, 1e308])
    assert _sum_caught(x.copy()) == -1e308
    val, tan = mg.jvp(_sum_caught, (x.copy(),), (np.array([1.0, 0.0]),))
    assert val == -1e308 and tan == -1.0
    with warnings.catch_warnings():  # outside the function: NumPy's warning, once
        warnings.simplefilter("error")
        with pytest.raises(RuntimeWarning, match="overflow"):
            mg.jvp(lambda x: np.sum(x), (x.copy(),), (np.array([1.0, 0.0]),))
    with np.errstate(over="ignore"):
        val, tan = mg.jvp(lambda x: np.sum(x), (x.copy(),), (np.array([1e-300, 0.0]),))
    assert val == np.inf and tan == 1e-300


def test_each_kind_of_event_after_an_out_write_follows_its_own_mode():
    # inside jvp, the error state before it: divide ignored, invalid raises; log of [0, -1]
    # into out= has both events, and the invalid one raises after out is written
    def f(x):
        a = x * 1.0
        try:
            np.log(a, out=a)
        except FloatingPointError as e:
            assert str(e) == "invalid value encountered in log"
            return a[2] * 2.0
        return a[2] * 0.0

    x = np.array([0.0, -1.0, 2.0])
    with np.errstate(divide="ignore", invalid="raise"):
        v, t = mg.jvp(f, (x,), (np.array([0.0, 0.0, 1.0]),))
    assert v == 2 * np.log(2.0) and t == pytest.approx(1.0, rel=1e-15)  # d/dx 2 log x at 2


@pytest.mark.parametrize("fn", [np.power, np.float_power])
def test_a_range_base_of_a_power_is_an_array(fn):
    # d/de 0**e = 0 (for e > 0): a range base (NumPy's float_power example) reached the
    # partial as a range, which `== 0` did not see, and gave 0 * log(0) = nan
    e = np.array([1.5, 2.0, 0.5, 3.0, 1.0, 2.5])

    def f(e):
        return np.sum(fn(range(6), e))

    want = np.arange(6.0) ** e * np.log(np.where(np.arange(6.0) == 0, 1.0, np.arange(6.0)))  # closed form
    np.testing.assert_allclose(mg.grad(f)(e), want, rtol=1e-12)
    check_grads(f, e)
    assert mg.value_and_grad(f)(e)[0] == f(e)


def test_a_gradient_that_is_nan_everywhere_is_not_computed_again_entry_by_entry():
    # arctan2(u, u) at u = 0 has no derivative (NaN in both modes): forward mode gave each of the 64
    # entries NaN again, one run each (150x the gradient); it stops after two
    runs = []

    def f(u0):
        runs.append(1)
        u = u0 * 1.0
        for _ in range(5):
            u[1:-1] += 0.1 * (u[2:] - 2 * u[1:-1] + u[:-2])
        return np.sum(np.arctan2(u, u))

    g = mg.grad(f)(np.zeros(64))
    assert np.isnan(g).all() and len(runs) <= 5, len(runs)  # (the gradient, two jvps that each run twice)
    np.testing.assert_array_equal(mg.grad(f)(np.ones(64)), np.zeros(64))  # (arctan2(u, u) = pi/4: constant)


def test_a_nan_entry_forward_mode_gives_as_nan_too_costs_one_run():
    # (the econdp tester: a pullback ran the function twice more for an entry whose derivative is NaN,
    # the second run only to confirm the first, whose NaN changed nothing); x[0]'s entry by hand
    runs = []

    def f(x):
        runs.append(1)
        return x[0] ** 2 + np.arctan2(x[1] - 1.0, x[1] - 1.0)

    x = np.array([0.5, 1.0])
    for differentiate in (lambda: mg.grad(f)(x), lambda: mg.vjp(f, x)[1](1.0)[0]):
        runs.clear()
        g = differentiate()
        assert g[0] == 1.0 and np.isnan(g[1]) and len(runs) == 2, (g, len(runs))  # (the call, one jvp)


def test_the_exponent_derivative_of_zero_to_the_zero_is_minus_infinity():
    # 0**p jumps from 0**0 = 1 to 0 (p > 0) and inf (p < 0): both one-sided quotients go to -inf
    # (it was 0, the limit for p > 0, where the jump makes it -inf; the specialpoints tester)
    right = (0.0 ** 1e-9 - 1.0) / 1e-9
    assert right < -1e8  # (and -1 / h as h -> 0)
    for fn in (np.power, np.float_power):
        assert mg.grad(lambda v, fn=fn: fn(v[0], v[1]))(np.array([0.0, 0.0]))[1] == -np.inf
        assert mg.jvp(lambda p, fn=fn: fn(0.0, p), (0.0,), (1.0,))[1] == -np.inf
        assert mg.grad(lambda p, fn=fn: fn(0.0, p))(2.0) == 0.0  # (p > 0: the limit, 0)
    # where a selection drops the jump, nothing of it is left
    assert mg.grad(lambda p: np.where(p > 0, np.power(0.0, p), 1.0))(0.0) == 0.0


def test_mixed_second_derivative_of_a_power_at_zero_base():
    # (the hill tester) d2/dx dn x**n at x = 0 is lim x**(n-1) (n log x + 1): -inf for 0 < n <= 1, 0 for
    # n > 1, +inf for n <= 0; the guard that makes d/dn x**n = 0 there had slope 0 in x, and the Hessian
    # was not symmetric; for n < 1 the other order, d/dn (n x**(n-1)), was inf - inf (NaN) (the
    # newfeat20 and regress21 testers)
    f = lambda q: q[0] ** q[1]
    for n, want in ((1.0, -np.inf), (0.7, -np.inf), (0.5, -np.inf), (2.0, 0.0), (3.5, 0.0), (0.0, np.inf),
                    (-0.5, np.inf)):
        for H in (mg.hessian(f)(np.array([0.0, n])), mg.jacobian(mg.grad(f), mode="rev")(np.array([0.0, n]))):
            assert H[1, 0] == want and H[0, 1] == want, (n, H)
        # the limit, by hand: x**(n-1) (n log x + 1) at x -> 0+ grows with the sign of want, or shrinks to 0
        s = [x ** (n - 1) * (n * np.log(x) + 1) for x in (1e-6, 1e-9, 1e-12)]
        if want == 0.0:
            assert abs(s[2]) < abs(s[1]) < abs(s[0]) < 1e-4
        else:
            assert np.sign(s[2]) == np.sign(want) and abs(s[2]) > abs(s[1]) > abs(s[0]) > 1.0
    # d2/dx2 at x = 0: n (n-1) x**(n-2): -inf for 0 < n < 1, 0 at n = 0, +inf for n < 0
    for n, want in ((0.5, -np.inf), (0.0, 0.0), (-0.5, np.inf)):
        assert mg.hessian(f)(np.array([0.0, n]))[0, 0] == want
    # the first derivatives are as before: d/dn at x = 0 is 0 for n > 0
    np.testing.assert_array_equal(mg.grad(f)(np.array([0.0, 2.0])), [0.0, 0.0])


# -- forward mode: a zero partial times a NaN tangent ------------------------------------------
#
# In a log-space recursion (an HMM's or CTC's forward algorithm) an unreachable state is -inf,
# and logaddexp(-inf, -inf) has an undefined (NaN) tangent; the next logaddexp's partial with
# respect to it is exactly 0, so the derivative is finite. Forward mode runs the function again
# with strong zeros when a tangent holds a NaN that the value does not. Oracles: central
# differences of the plain function (first and second order) and reverse mode.

with np.errstate(divide="ignore"):  # left-to-right: -inf entries
    _LOG_A = np.log(np.array([[0.7, 0.3, 0.0], [0.0, 0.6, 0.4], [0.0, 0.0, 1.0]]))


def _hmm_loglik(theta):
    em = np.stack([np.sin(theta * k) + 1.5 for k in (1.0, 2.0, 3.0)])  # 3 states x T emissions
    logem = np.log(em / np.sum(em, axis=0))
    alpha = np.full_like(logem[:, 0], -np.inf)
    alpha[0] = logem[0, 0]
    for t in range(1, len(theta)):
        new = np.full_like(alpha, -np.inf)
        for j in range(3):
            acc = -np.inf
            for i in range(3):
                acc = np.logaddexp(acc, alpha[i] + _LOG_A[i, j])
            new[j] = acc + logem[j, t]
        alpha = new
    return np.logaddexp(np.logaddexp(alpha[0], alpha[1]), alpha[2])


def test_a_zero_partial_times_a_nan_tangent_is_zero_in_forward_mode():
    def f(x):
        u = np.full_like(x, -np.inf) + x
        v = np.logaddexp(u[0], u[1])  # -inf for every x: its tangent is NaN
        return np.logaddexp(v, x[2]) * x[0] ** 0 + np.logaddexp2(v, x[1])

    x = np.array([0.3, -0.2, 0.5])
    with np.errstate(all="ignore"):
        ref = np.array([(f(x + 1e-6 * e) - f(x - 1e-6 * e)) / 2e-6 for e in np.eye(3)])
        t = np.array([0.3, -1.0, 2.0])
        _, jv = mg.jvp(f, (x,), (t,))
        jac = mg.jacobian(f, mode="fwd")(x)
    np.testing.assert_allclose(jv, ref @ t, rtol=1e-8)
    np.testing.assert_allclose(jac, ref, rtol=1e-8, atol=1e-12)
    np.testing.assert_allclose(mg.grad(f)(x), ref, rtol=1e-8, atol=1e-12)


def test_the_hessian_of_a_log_space_forward_algorithm():
    theta = np.array([0.3, -0.4, 0.8, 0.1])
    with np.errstate(all="ignore"):
        g = mg.grad(_hmm_loglik)(theta)
        g_ref = np.array([(_hmm_loglik(theta + 1e-6 * e) - _hmm_loglik(theta - 1e-6 * e)) / 2e-6 for e in np.eye(4)])
        H = mg.hessian(_hmm_loglik)(theta)
        H_rr = mg.jacobian(mg.grad(_hmm_loglik), mode="rev")(theta)
        H_ref = fd_hessian(_hmm_loglik, theta)
        _, hv = mg.jvp(mg.grad(_hmm_loglik), (theta,), (np.ones(4),))
    np.testing.assert_allclose(g, g_ref, rtol=1e-6, atol=1e-9)
    assert np.all(np.isfinite(H))
    np.testing.assert_allclose(H, H_ref, rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(H, H_rr, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(hv, H_ref @ np.ones(4), rtol=1e-4, atol=1e-6)


def test_forward_mode_runs_again_only_for_a_nan_the_value_does_not_have():
    calls = []

    def f(x):
        calls.append(1)
        return np.sqrt(x)  # NaN value and tangent at -1: the function's own

    with np.errstate(all="ignore"):
        y, t = mg.jvp(f, (np.array([-1.0, 4.0]),), (np.ones(2),))
    assert len(calls) == 1
    assert np.isnan(y[0]) and np.isnan(t[0]) and t[1] == 0.25

    def g(x):
        calls.append(1)
        v = np.logaddexp(np.full(1, -np.inf) + x[0], np.full(1, -np.inf) + x[1])
        return np.logaddexp(v, x)

    calls.clear()
    with np.errstate(all="ignore"):
        _, t = mg.jvp(g, (np.array([0.3, 0.5]),), (np.ones(2),))
    assert len(calls) == 3  # twice more, with strong zeros (the two runs compared: _reruns_agree)
    np.testing.assert_allclose(t, np.ones(2))


def test_a_function_that_wrote_into_its_argument_runs_again_from_its_contents():
    # the first run changed the argument: the second starts from the contents it had (saved at
    # the first write), and the argument ends as after one plain call. Oracle: the closed form
    # (d/dx0 of logaddexp(-inf, 2 x0) = 2) and the plain call's argument
    def f(x):
        x[0] = x[0] * 2
        v = np.logaddexp(-np.inf + x[1], -np.inf + x[2])
        return np.logaddexp(v, x[0])

    x = np.array([0.3, 0.1, 0.2])
    plain = x.copy()
    with np.errstate(all="ignore"):
        want = f(plain)
        y, t = mg.jvp(f, (x,), (np.array([1.0, 1.0, 1.0]),))
    assert y == want and t == 2.0
    np.testing.assert_array_equal(x, plain)

    def g(xs):  # a list argument whose items the function did not rebind: run again too (seqmodels), its array
        xs[0][0] = xs[0][0] * 2  # put back first, and left as after one plain call
        return np.logaddexp(np.logaddexp(-np.inf + xs[0][1], -np.inf + xs[0][2]), xs[0][0])

    xs, plain_xs = [np.array([0.3, 0.1, 0.2])], [np.array([0.3, 0.1, 0.2])]
    with np.errstate(all="ignore"):
        g(plain_xs)
        _, t = mg.jvp(g, (xs,), ([np.ones(3)],))
    assert t == 2.0
    np.testing.assert_array_equal(xs[0], plain_xs[0])

    def h(xs):  # a list argument the function appends to: not run again (a second run would append again)
        xs.append(0.0)
        return np.logaddexp(np.logaddexp(-np.inf + xs[0][1], -np.inf + xs[0][2]), 2 * xs[0][0])

    xs = [np.array([0.3, 0.1, 0.2])]
    with np.errstate(all="ignore"):
        _, t = mg.jvp(h, (xs,), ([np.ones(3)],))
    assert np.isnan(t) and len(xs) == 2


def _lse_point(x):
    """logaddexp(x0*x1, logaddexp(-inf, -inf)): x0*x1, through a NaN tangent."""
    return np.logaddexp(np.logaddexp(x[0] - np.inf, x[1] - np.inf), x[0] * x[1])


def test_the_careful_second_run_for_scalar_primals_nested_modes_and_aux():
    # the forward tester's cases: a Python float primal, jvp of jvp, grad of jvp, the aux of a
    # forward-mode jacobian. Oracles: central differences of the plain function and closed forms
    def g(s):
        return np.logaddexp(np.logaddexp(s - np.inf, s - np.inf), s * s)  # s*s

    x = np.array([0.4, 0.9])
    with np.errstate(all="ignore"):
        for s in (0.5, np.float64(0.5), np.array(0.5)):
            np.testing.assert_allclose(mg.jvp(g, (s,), (1.0 if np.ndim(s) == 0 and not isinstance(s, np.ndarray)
                                                     else np.ones_like(s),))[1], 1.0)
            np.testing.assert_allclose(mg.hessian(g)(s), 2.0)
        v = np.array([1.0, 0.0])

        def inner(z):
            return mg.jvp(_lse_point, (z,), (v,))[1]  # d/dx0 (x0 x1) = x1

        y, t = mg.jvp(inner, (x,), (np.array([0.0, 1.0]),))
        np.testing.assert_allclose((y, t), (0.9, 1.0))
        np.testing.assert_allclose(mg.jacobian(inner, mode="fwd")(x), [0.0, 1.0])
        np.testing.assert_allclose(mg.grad(inner)(x), [0.0, 1.0])
        h, aux = mg.hessian(lambda x: (_lse_point(x), x.sum()), has_aux=True)(x)
        np.testing.assert_allclose(h, [[0.0, 1.0], [1.0, 0.0]])
        assert aux == 1.3
        j, aux = mg.jacobian(lambda x: (_lse_point(x), x.sum()), mode="fwd", has_aux=True)(x)
        np.testing.assert_allclose(j, [0.9, 0.4])
        assert aux == 1.3


def test_third_order_through_a_careful_reverse_pass_is_not_a_changed_run():
    # an inner gradient with a NaN takes the careful reverse pass in the first run of a forward-mode
    # jacobian and not in the careful second run: its seeding is not a step of the program
    def f(x):
        return np.sum(np.logaddexp(np.logaddexp(x - np.inf, x - np.inf), np.sin(x)))  # sum(sin x)

    with np.errstate(all="ignore"):
        h = mg.hessian(lambda z: mg.grad(f)(z) @ np.ones(1))(np.array([0.3]))
    np.testing.assert_allclose(h, [[-np.cos(0.3)]])


def test_a_zero_partial_with_an_infinite_derivative_keeps_it_in_every_mode():
    # d²(x**1.5)/dx² = 0.75 / sqrt(x): +inf at 0. The partial 1.5 sqrt(x) is 0 there, and its
    # own derivative infinite: forward over reverse gave 0 (a strong zero of the product's
    # derivative), reverse over reverse inf
    def f(x):
        return np.sum(x ** 1.5)

    x = np.array([0.0, 1.0])
    with np.errstate(all="ignore"):
        h = mg.hessian(f)(x)
        h_rr = mg.jacobian(mg.grad(f), mode="rev")(x)
    np.testing.assert_array_equal(h, h_rr)
    assert h[0, 0] == np.inf and h[1, 1] == 0.75 and h[0, 1] == 0 and h[1, 0] == 0


def test_a_careful_run_inside_a_forward_mode_jacobian_is_not_a_changed_run():
    # an inner forward-mode jacobian runs again carefully in the outer jacobian's first run, and
    # the outer careful run takes strong-zero arithmetic: neither is a step of the program.
    # Oracle: closed forms (g = x1**3 here)
    def g(x):
        return np.logaddexp(np.logaddexp(-np.inf + x[0], -np.inf + x[0]), x[1] ** 3)

    x = np.array([0.5, 1.5])
    with np.errstate(all="ignore"):
        J = mg.jacobian(lambda z: mg.jacobian(g, mode="fwd")(z), mode="fwd")(x)
        H1 = mg.jacobian(lambda z: mg.hessian(g)(z)[1], mode="fwd")(x)
        _, t = mg.jvp(lambda z: mg.jacobian(g, mode="fwd")(z), (x,), (np.ones(2),))
    np.testing.assert_allclose(J, [[0.0, 0.0], [0.0, 6 * 1.5]])
    np.testing.assert_allclose(H1, [[0.0, 0.0], [0.0, 6.0]])
    np.testing.assert_allclose(t, [0.0, 9.0])


def _abel(a):
    # the trapezoid rule on nodes from a traced lower limit: at the first node x - a is exactly 0
    # for every a, so sqrt's partial there is inf and reaches a twice (through x and through -a)
    s = np.linspace(0.0, 1.0, 11)
    x = a + (2.0 - a) * s
    return np.trapezoid(np.sqrt(x - a) * np.exp(-x), x)


def test_reverse_mode_inf_minus_inf_is_computed_by_forward_mode():
    # the sum of the two cotangents is inf - inf = NaN in reverse mode (torch and JAX give NaN);
    # forward mode's tangent of x - a is 0 there and 0 * inf a strong zero: the entries reverse
    # mode leaves NaN are computed again by forward mode, so that both modes agree with
    # central differences
    with np.errstate(all="ignore"):
        fd = (_abel(0.3 + 1e-6) - _abel(0.3 - 1e-6)) / 2e-6
        g = mg.grad(_abel)(0.3)
        (gv,) = mg.vjp(lambda a: np.stack([_abel(a), 2 * _abel(a)]), 0.3)[1](np.array([1.0, 0.5]))
        gx = mg.grad(lambda a: np.sum(np.sqrt(a - a) + a ** 2))(np.array([0.7, 0.2]))
    np.testing.assert_allclose(g, fd, rtol=1e-8)
    np.testing.assert_allclose(gv, 2 * fd, rtol=1e-8)
    np.testing.assert_allclose(gx, [1.4, 0.4], rtol=1e-12)


def test_reverse_mode_nan_is_not_recomputed_where_a_second_run_differs():
    # a function that writes into its argument (a second run would start elsewhere), or whose
    # second run gives another value (fresh random numbers), keeps reverse mode's NaN
    def writes(x):
        y = np.sum(np.sqrt(x - x) + x)
        x[0] = 5.0
        return y

    rng = np.random.default_rng(0)

    def random(a):
        return np.sqrt(a - a) + a * rng.random()

    def writes_constant(a, c):  # (into an argument it does not differentiate)
        y = np.sqrt(a - a) + a * c[0]
        c[0] = 5.0
        return y

    with np.errstate(all="ignore"):
        assert np.isnan(mg.grad(writes)(np.array([0.7, 0.2]))).all()
        assert np.isnan(mg.grad(random)(0.7))
        assert np.isnan(mg.grad(writes_constant)(0.7, np.array([2.0])))
        # with aux: computed again (d/da of sqrt(a - a) + 2a is 2)
        (_, aux), g = mg.value_and_grad(lambda a: (np.sqrt(a - a) + 2.0 * a, "aux"), has_aux=True)(0.7)
    assert aux == "aux" and g == 2.0


def _rotated(r):
    th = np.linalg.norm(r)
    return np.sin(th) * (r / th)  # 0/0 at r = 0: no small-angle branch


def test_an_output_nan_where_the_cotangent_reaches_keeps_the_gradients_nan():
    # the value is undefined at r = 0 (0/0): its derivative too, in both modes (as JAX and PyTorch);
    # the careful pass's strong zeros (sin(0) = 0 times the NaN of r / th, the norm's zero subgradient
    # times a NaN cotangent) made reverse mode 0 there
    r0 = np.zeros(3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        assert np.isnan(_rotated(r0)).all()
        assert np.isnan(mg.jacobian(_rotated)(r0)).all()
        assert np.isnan(mg.jacobian(_rotated, mode="fwd")(r0)).all()
        val, g = mg.value_and_grad(lambda r: np.sum(_rotated(r)))(r0)
        assert np.isnan(val) and np.isnan(g).all()
        _, pb = mg.vjp(_rotated, r0)
        assert np.isnan(pb(np.array([1.0, 0.0, 0.0]))[0]).all()
    # where the value is defined, the same function's derivative is right
    check_grads(_rotated, np.array([0.3, -0.2, 0.5]))


def test_a_nan_output_without_cotangent_leaves_the_careful_pass_to_the_others():
    # an output element NaN that the cotangent does not reach (0 there): the careful pass still runs
    def f(x):
        y = np.where(x > 0, np.sqrt(x), 0.0)
        return np.stack([np.sum(y), np.log(x[0] - 10.0)])  # (the second: NaN)

    x = np.array([-1.0, 4.0])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        out, pb = mg.vjp(f, x)
        assert np.isnan(out[1])
        np.testing.assert_array_equal(pb(np.array([1.0, 0.0]))[0], [0.0, 0.25])


def test_logsumexp_over_an_all_minus_inf_slice_has_finite_second_derivatives():
    # log(1 + exp(logsumexp(-inf + w**2))) is 0 for every w: its Hessian too, as np.logaddexp.reduce's
    def f(w):
        return np.logaddexp(0.0, mss.logsumexp(-np.inf + w * w))

    def g(w):
        return np.logaddexp(0.0, np.logaddexp.reduce(-np.inf + w * w))

    w = np.array([0.3, 0.1])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        for h in (f, g):
            assert h(w) == 0.0
            np.testing.assert_array_equal(mg.grad(h)(w), 0.0)
            np.testing.assert_array_equal(mg.hessian(h)(w), 0.0)
            np.testing.assert_array_equal(mg.jacobian(mg.grad(h))(w), 0.0)


def test_the_derivative_of_a_nan_output_is_nan_along_every_path():
    # (the regress21 and survival testers) sin(t) * (r / t) at t = 0 is NaN; reverse mode gave d/dr = 0
    # (the zero cotangent sin(0) times the infinite partial 1/t, a strong zero) where forward mode, JAX
    # and PyTorch give NaN; at (1, 0) both modes gave 0 for r
    f = lambda v: np.sin(v[1]) * (v[0] / v[1])
    with np.errstate(all="ignore"):
        for v in (np.array([0.0, 0.0]), np.array([1.0, 0.0])):
            assert np.isnan(f(v))
            assert np.all(np.isnan(mg.grad(f)(v)))
            assert np.all(np.isnan(mg.jacobian(f, mode="fwd")(v)))
            assert np.isnan(mg.jvp(f, (v,), (np.array([1.0, 0.0]),))[1])
        # a weighted log-likelihood NaN from a zero weight (0 * inf): its gradient is NaN, not 0
        w, x = np.array([1.0, 0.0, 0.0]), np.array([0.5, -1.0, 2.0])

        def nll(beta):
            eta = x * beta
            return -np.sum(w * (eta - np.logaddexp.accumulate((np.log(w) + eta)[::-1])[::-1]))

        assert np.isnan(nll(0.3)) and np.isnan(mg.grad(nll)(0.3)) and np.isnan(mg.jvp(nll, (0.3,), (1.0,))[1])
        # entries whose paths do not reach the NaN stay finite in reverse mode (as JAX's): d/dx1 of
        # tanh(x1) = 1 - tanh(1)**2, by hand
        g = mg.grad(lambda x: np.sum(np.sinh(x) / np.cosh(x)))(np.array([800.0, 1.0]))
        assert np.isnan(g[0]) and g[1] == pytest.approx(1 - np.tanh(1.0) ** 2, rel=1e-14)
    # a finite output keeps its strong zeros: the masked branch of np.where contributes 0 (by hand:
    # d/dr of where(t != 0, r / t, 1) at t = 0 is 0, at t = 2 it is 1/2)
    h = lambda v: np.sum(np.where(v[1] != 0, v[0] / v[1], 1.0))
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(mg.grad(h)(np.array([1.0, 0.0])), [0.0, 0.0])
        np.testing.assert_array_equal(mg.grad(h)(np.array([1.0, 2.0])), [0.5, -0.25])


def test_a_rule_whose_value_is_nan_gives_no_finite_derivative():
    # (the newfeat21 tester) lambertw at -float(exp(-1)), just below -1/e, is NaN in SciPy: its derivative
    # was -1.812 from the branch-point series; np.maximum(nan, 1) gave the 1 (not returned) the slope
    import scipy.special as sc

    z = -float(np.exp(-1))
    assert np.isnan(sc.lambertw(z))
    assert np.isnan(mg.grad(lambda t: sc.lambertw(t).real)(z))
    assert np.isnan(mg.jvp(lambda t: sc.lambertw(t), (z,), (1.0,))[1])
    # np.maximum returns the NaN: it is the one whose slope it is (fmax returns the number)
    np.testing.assert_array_equal(mg.grad(lambda v: np.maximum(v[0], v[1]))(np.array([np.nan, 1.0])), [1.0, 0.0])
    np.testing.assert_array_equal(mg.grad(lambda v: np.minimum(v[0], v[1]))(np.array([1.0, np.nan])), [0.0, 1.0])
    np.testing.assert_array_equal(mg.grad(lambda v: np.fmax(v[0], v[1]))(np.array([np.nan, 1.0])), [0.0, 1.0])


def test_second_runs_that_would_draw_again_are_not_made():
    # the runs that compute NaN entries again (grad's and vjp's fill, jvp's careful run) drew the
    # next number from a generator the function reaches by name: a finite derivative along another
    # draw, silently (-0.986 for -0.728). Now the entry stays NaN, and the generator ends as after
    # one plain call
    def make(rng):
        def f(x):
            e = rng.standard_normal()
            return np.sum(np.sqrt(x - x[0])) + e * (x[0] - 1.0)

        return f

    x = np.array([1.0, 2.0, 3.0])
    rng = np.random.default_rng(0)
    g = mg.grad(make(rng))(x.copy())
    after = rng.random()
    plain_rng = np.random.default_rng(0)
    make(plain_rng)(x.copy())
    assert after == plain_rng.random()
    assert np.isnan(g[0])
    np.testing.assert_allclose(g[1:], [0.5, 0.5 / np.sqrt(2.0)], rtol=1e-15)  # d/dxi sqrt(xi - x0), by hand
    # a function that draws nothing: the entry is computed again (finite)
    h = mg.grad(lambda x: np.sum(np.sqrt(x - x[0])) + 0.3 * (x[0] - 1.0))(x.copy())
    np.testing.assert_allclose(h, [0.3 - 0.5 - 0.5 / np.sqrt(2.0), 0.5, 0.5 / np.sqrt(2.0)], rtol=1e-14)

    def j(x):  # jvp's careful run (logaddexp(-inf, -inf) has a NaN tangent its value has not)
        e = rng.standard_normal()
        z = np.logaddexp(x[0] - np.inf, x[0] - np.inf)
        return np.logaddexp(z, x[1]) + e * (x[0] - 1.0)

    rng = np.random.default_rng(0)
    _, t = mg.jvp(j, (np.array([1.0, 0.5]),), (np.array([1.0, 0.0]),))
    after = rng.random()
    plain_rng = np.random.default_rng(0)
    plain_rng.standard_normal()
    assert np.isnan(t) and after == plain_rng.random()


def test_second_runs_drawing_from_generators_not_reached_are_not_used():
    # a generator the alias search cannot reach (behind a weak reference, created unseeded inside)
    # draws other numbers in the run again; where the output does not depend on them (sin(x * z) at
    # x = 0) the run's value agreed, and the fill's entry was the derivative along the next draw
    # (-1.303 for 0.346, silently). The runs again are compared step by step now: the entry stays NaN
    import weakref

    class Holder:
        pass

    h = Holder()
    ref = weakref.ref(h)

    def f(x):
        z = ref().rng.standard_normal(3)
        return np.sqrt(x[0] - x[0]) + np.sum(np.sin(x * z))

    def unseeded(x):
        z = np.random.default_rng().standard_normal(3)
        return np.sqrt(x[0] - x[0]) + np.sum(np.sin(x * z))

    x = np.zeros(3)
    h.rng = np.random.default_rng(1)
    z = np.random.default_rng(1).standard_normal(3)
    g = mg.grad(f)(x.copy())
    assert np.isnan(g[0])
    np.testing.assert_allclose(g[1:], z[1:], rtol=1e-15)  # d/dxi sin(xi zi) at 0 = zi, by hand
    g = mg.grad(unseeded)(x.copy())
    assert np.isnan(g[0]) and np.all(np.isfinite(g[1:]))

    def j(x):  # jvp's careful run (logaddexp(-inf, -inf) has a NaN tangent its value has not)
        z = ref().rng.standard_normal(2)
        w = np.logaddexp(x[0] - np.inf, x[0] - np.inf)
        return np.logaddexp(w, 0.0 * x[1]) + np.sum(np.sin(x * z))

    h.rng = np.random.default_rng(1)
    _, t = mg.jvp(j, (np.zeros(2),), (np.array([1.0, 0.0]),))
    assert np.isnan(t)  # (the careful run again drew other numbers: the first run's NaN stands)
    # a function that draws from a seeded generator of its own runs again alike: its entry is filled
    def seeded(x):
        z = np.random.default_rng(1).standard_normal(3)
        return np.sqrt(x[0] - x[0]) + np.sum(np.sin(x * z))

    np.testing.assert_allclose(mg.grad(seeded)(x.copy()), z, rtol=1e-15)


def test_vjp_fill_runs_on_arguments_the_function_cannot_tell_from_the_callers():
    # the fill ran on copies, C-ordered and writable: a Fortran argument read through ravel('A'), or a
    # read-only one a function branches on, gave another derivative (20 for 19; [6, 0] for [3, 0]);
    # it runs on the caller's own arrays now
    w = np.array([1.0, 2.0, 3.0, 4.0])

    def f(X):
        t = X[0, 0] + 0.1 * np.arange(4.0)
        return np.sum(np.sqrt(t - X[0, 0])) + X[0, 0] * (w @ X.ravel(order="A"))

    X = np.asfortranarray([[0.0, 1.0], [2.0, 3.0]])
    g = mg.vjp(f, X)[1](1.0)[0]
    np.testing.assert_allclose(g, mg.grad(f)(X), rtol=1e-15)
    assert g[0, 0] == 19.0  # w @ ravel('A') + X00 * w[0], by hand
    # f = c + X00 (X00 + 2 X10 + 3 X01 + 4 X11) (the sqrt terms do not move with X00): by hand
    np.testing.assert_array_equal(g, [[19.0, 0.0], [0.0, 0.0]])

    def r(x):
        c = 1.0 if not x.flags.writeable else 2.0
        t = x[0] + 0.1 * np.arange(4.0)
        return np.sum(np.sqrt(t - x[0])) + c * x[0] * x[1]

    x = np.array([0.0, 3.0])
    x.flags.writeable = False
    np.testing.assert_allclose(mg.vjp(r, x)[1](1.0)[0], [3.0, 0.0], rtol=1e-15)


def test_second_runs_watch_pythons_random_module():
    # random.gauss inside the function: the fill's second run drew the next number (0.596 for the
    # call's 0.435, silently); NaN now
    import random

    def f(x):
        e = random.gauss(0.0, 1.0)
        return np.sum(np.sqrt(x - x[0])) + e * (x[0] - 1.0)

    random.seed(1)
    g = mg.grad(f)(np.array([1.0, 2.0, 3.0]))
    assert np.isnan(g[0])
    np.testing.assert_allclose(g[1:], [0.5, 0.5 / np.sqrt(2.0)], rtol=1e-15)


def test_the_nan_fill_of_an_overflowing_jacobian_warns_at_no_mutagrad_line():
    # (the fill's dot product of cotangent and tangent, inf * 0 where it masks the zero cotangents,
    # warned "invalid value encountered in multiply" at mutagrad's own line)
    def solve(A0, b0):  # elimination whose row swap through views makes A singular: inf and NaN
        A, b = A0.copy(), b0.copy()
        n = b.size
        for k in range(n - 1):
            p = k + int(np.argmax(np.abs(A[k:, k])))
            if p != k:
                A[k], A[p] = A[p], A[k]
                b[k], b[p] = b[p], b[k]
            for i in range(k + 1, n):
                m = A[i, k] / A[k, k]
                A[i, k:] -= m * A[k, k:]
                b[i] -= m * b[k]
        x = np.empty_like(b)
        for i in range(n - 1, -1, -1):
            x[i] = (b[i] - A[i, i + 1:] @ x[i + 1:]) / A[i, i]
        return x

    rng = np.random.default_rng(12)
    rng.standard_normal((5, 4))
    A0, b0 = rng.standard_normal((5, 5)), rng.standard_normal(5)
    f = lambda A: solve(A, mnp.array(b0))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        rev = mg.jacobian(f, mode="rev")(A0.copy())
        fwd = mg.jacobian(f, mode="fwd")(A0.copy())
    assert not [w for w in caught if "mutagrad" in w.filename]
    assert not np.all(np.isfinite(rev))  # (the case: non-finite entries to fill)
    both = np.isfinite(rev) & np.isfinite(fwd)  # (NaN outputs: a row of zeros in reverse mode where the
    assert both.any()  # overwritten row is never read, NaN in forward mode, which multiplies 0 by NaN)
    np.testing.assert_allclose(rev[both], fwd[both], rtol=1e-12)


KINKS = [  # (what, a function smooth at 0 whose Hessian through the kink comes out 0, its Hessian at 0)
    ("complex |z|", lambda x: np.abs(x[0] + 1j * x[1]) ** 2, 2 * np.eye(2)),
    ("hypot", lambda x: np.hypot(x[0], x[1]) ** 2, 2 * np.eye(2)),
    ("norm", lambda x: np.linalg.norm(x) ** 2, 2 * np.eye(2)),
    ("norm along an axis", lambda x: np.sum(np.linalg.norm(x.reshape(1, 2), axis=1) ** 2), 2 * np.eye(2)),
    # (np.std(x) ** 2 = var(x) = (x0 - x1)**2 / 4 at a constant x: the warnnoise2 tester)
    ("std", lambda x: np.std(x) ** 2, np.array([[0.5, -0.5], [-0.5, 0.5]])),
    ("nanstd", lambda x: np.nanstd(x) ** 2, np.array([[0.5, -0.5], [-0.5, 0.5]])),  # (regress63)
    ("std out=", lambda x: _std_into(x) ** 2, np.array([[0.5, -0.5], [-0.5, 0.5]])),  # (regress64)
    # (a norm written out with np.sqrt: geostat's distance at a repeated site, bundleadj's rotation angle and
    # Huber loss of a residual's norm; a guarded root, np.sqrt(np.where(hit, disc, 0)), is no sum of squares)
    ("sqrt of a sum of squares", lambda x: np.sqrt(np.sum(x ** 2)) ** 2, 2 * np.eye(2)),
    ("sqrt of added squares", lambda x: np.sqrt(x[0] ** 2 + x[1] ** 2) ** 2, 2 * np.eye(2)),
    ("sqrt of w @ w", lambda x: np.sqrt(x @ x) ** 2, 2 * np.eye(2)),
    # (an RMS, an ARD kernel's scaled squares, np.average's weights, a root by ** 0.5: session 44)
    ("sqrt of a mean of squares", lambda x: np.sqrt(np.mean(x ** 2)) ** 2, np.eye(2)),
    ("sqrt of scaled squares", lambda x: np.sqrt(np.sum(x ** 2 / np.array([0.5, 2.0]) ** 2)) ** 2,
     np.diag([8.0, 0.5])),
    ("sqrt of an average of squares", lambda x: np.sqrt(np.average(x ** 2, weights=[0.25, 0.75])) ** 2,
     np.diag([0.5, 1.5])),
    ("sum of squares over n", lambda x: np.sqrt(np.sum(x * x) / 2.0) ** 2, np.eye(2)),
    ("sum of squares ** 0.5", lambda x: (np.sum(x ** 2) ** 0.5) ** 2, 2 * np.eye(2)),
    # (an angle at 0: arccos(1 - r**2 / 2) = 2 arcsin(r / 2), whose square is r**2 + r**4 / 12 + ...: a bending
    # energy at a flat hinge, the clothsim tester; arcsin's and arccosh's the same kink)
    ("arccos at 1", lambda x: np.arccos(1.0 - np.sum(x * x) / 2) ** 2, 2 * np.eye(2)),
    ("clipped arccos at 1", lambda x: np.arccos(np.clip(1.0 - np.sum(x * x) / 2, -1.0, 1.0)) ** 2, 2 * np.eye(2)),
    ("arcsin at 1", lambda x: (np.pi / 2 - np.arcsin(1.0 - np.sum(x * x) / 2)) ** 2, 2 * np.eye(2)),
    ("arccosh at 1", lambda x: np.arccosh(1.0 + np.sum(x * x) / 2) ** 2, 2 * np.eye(2)),
    # (|x| ** 2 is x ** 2: Glen's law |grad s| ** (n - 1), n = 3, on a flat surface: the glaciology tester)
    ("abs squared", lambda x: np.sum(np.abs(x) ** 2), 2 * np.eye(2)),
    ("np.square of abs", lambda x: np.sum(np.square(np.abs(x))), 2 * np.eye(2)),
    ("scaled abs squared", lambda x: np.sum((np.abs(x) / 0.5) ** 2), 8 * np.eye(2)),  # (regress71)
    ("abs times abs", lambda x: np.sum(_abs_times_abs(x)), 2 * np.eye(2)),
]


def _abs_times_abs(x):
    a = np.abs(x)
    return a * a


def _std_into(x):
    buf = mnp.empty(())
    np.std(x, out=buf)
    return buf


@pytest.mark.parametrize("what,f,want", KINKS, ids=[k[0] for k in KINKS])
def test_a_higher_derivative_through_a_kink_at_the_kink_warns(what, f, want):
    # (quantum, and earlier testers: the Hessian of |<a|b>|**2 at orthogonal states, of norm(r)**2 at a zero
    # residual, is 0 silently: the subgradient's derivative; documented, and now warned about)
    at = np.zeros(2)
    np.testing.assert_allclose(fd_hessian(f, at, 1e-4), want, atol=1e-6)  # (the oracle: smooth there)
    with pytest.warns(mg.KinkWarning, match="exactly at its kink"):
        mg.hessian(f)(at)
    with pytest.warns(mg.KinkWarning):
        mg.jacobian(mg.grad(f), mode="rev")(at)
    with warnings.catch_warnings():
        warnings.simplefilter("error", mg.KinkWarning)
        np.testing.assert_allclose(mg.grad(f)(at), [0.0, 0.0], atol=0)  # (first order: right, no warning)
        off = np.array([0.3, -0.4])  # (away from the kink: no warning, and the Hessian is right)
        np.testing.assert_allclose(mg.hessian(f)(off), fd_hessian(f, off, 1e-4), rtol=1e-5, atol=1e-6)
        with pytest.raises(mg.KinkWarning):  # (made an error by the filter the docs name)
            mg.hessian(f)(at)


def test_no_kink_warning_where_the_zero_norms_are_not_read():
    # (nbody tester) the zero self-distances of a pairwise distance matrix, left out by a boolean index
    # or a gather before use, never reach the result: no KinkWarning in the Hessian, which is right
    # (central differences of the plain potential); one read (np.sum of all of r) still warns
    pos = np.array([[0.0, 0.0, 0.0], [1.0, 0.2, 0.0], [0.3, 1.1, 0.4]])
    mass = np.array([1.0, 2.0, 0.5])
    off = ~np.eye(3, dtype=bool)
    iu = np.triu_indices(3, 1)

    def pe_mask(p):
        r = np.linalg.norm(p[:, None] - p[None], axis=-1)
        return -0.5 * np.sum(np.outer(mass, mass)[off] / r[off])

    def pe_pairs(p):
        r = np.linalg.norm(p[:, None] - p[None], axis=-1)
        return -np.sum(np.outer(mass, mass)[iu] / r[iu])

    def pe_filled(p):  # (overwritten before any read: the warnnoise2 tester)
        r = np.linalg.norm(p[:, None] - p[None], axis=-1)
        np.fill_diagonal(r, np.inf)
        return -0.5 * np.sum(np.outer(mass, mass) / r)

    def pe_inverse_filled(p):  # (the zeros read by 1 / r, whose diagonal is overwritten before any read: proteinff)
        r = np.sqrt(np.sum((p[:, None] - p[None]) ** 2, axis=-1))
        with np.errstate(divide="ignore"):
            inv = 1.0 / r
        np.fill_diagonal(inv, 0.0)
        return -0.5 * np.sum(np.outer(mass, mass) * inv)

    want = fd_hessian(lambda x: pe_mask(x.reshape(3, 3)), pos.ravel(), 1e-4).reshape(3, 3, 3, 3)
    for f in (pe_mask, pe_pairs, pe_filled, pe_inverse_filled):
        with warnings.catch_warnings():
            warnings.simplefilter("error", mg.KinkWarning)
            np.testing.assert_allclose(mg.hessian(f)(pos), want, rtol=1e-6, atol=1e-6)

    def pe_where(p):  # (mdsim) np.where's guard reads the zeros (a guard's constant may drop curvature): it
        # warns, naming the two rewrites above, which are quiet; its Hessian is right here all the same
        r = np.linalg.norm(p[:, None] - p[None], axis=-1)
        return -0.5 * np.sum(np.where(~off, 0.0, np.outer(mass, mass) / np.where(off, r, 1.0)))

    with pytest.warns(mg.KinkWarning, match=r"r\[~np.eye\(n, dtype=bool\)\].*np.fill_diagonal\(r, c\)"):
        h = mg.hessian(pe_where)(pos)
    np.testing.assert_allclose(h, want, rtol=1e-6, atol=1e-6)

    def std_overwritten(x):  # (np.std's zero overwritten before any read: regress63; var's Hessian by hand)
        s = np.std(x.reshape(2, 3), axis=1)
        s[0] = 1.0
        return np.sum(s ** 2)

    x = np.array([1.0, 1.0, 1.0, 1.0, 2.0, 4.0])
    with warnings.catch_warnings():
        warnings.simplefilter("error", mg.KinkWarning)
        h = mg.hessian(std_overwritten)(x)
    np.testing.assert_allclose(h[3:, 3:], (np.eye(3) - 1.0 / 3) * 2 / 3, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(h[:3], 0.0, atol=0)

    def read_then_filled(p):  # (read before the overwrite: the kink's convention reaches the result)
        r = np.linalg.norm(p[:, None] - p[None], axis=-1)
        t = np.sum(r ** 2)
        np.fill_diagonal(r, 1.0)
        return t + np.sum(1.0 / r)

    with pytest.warns(mg.KinkWarning, match="np.linalg.norm at a zero vector"):
        mg.hessian(read_then_filled)(pos)

    def read_all(p):  # the zeros read: the kink's convention reaches the result (its Hessian there is 0)
        r = np.linalg.norm(p[:, None] - p[None], axis=-1)
        return np.sum(r ** 2)

    with pytest.warns(mg.KinkWarning, match="np.linalg.norm at a zero vector"):
        mg.hessian(read_all)(pos)


def test_sqrt_of_an_element_of_squares_at_zero_is_no_crash():
    # (regress66) np.sqrt(s[0]) of s = x ** 2: its producer on the tape is a gather, which has no primitive
    # (an AttributeError inside mutagrad). Values: d2/dx0^2 of np.sqrt(x0 ** 2) ** 2 = x0 ** 2 is 2, which the
    # kink's convention gives as 0 at x0 = 0, now with the warning (a gather of squares is followed: session
    # 44, regress67's d[0] * d[0] + d[1] * d[1]); off it, 2 by hand
    f = lambda x: np.sqrt((x ** 2)[0]) ** 2 + x[1] ** 2
    np.testing.assert_allclose(mg.hessian(f)(np.array([0.5, 1.0])), [[2.0, 0.0], [0.0, 2.0]], rtol=1e-12)
    with pytest.warns(mg.KinkWarning, match="np.sqrt of a sum of squares"):
        h = mg.hessian(f)(np.array([0.0, 1.0]))
    assert h[1, 1] == 2.0 and h[0, 1] == 0.0


def test_no_kink_warning_for_a_constant_argument_s_norm():
    # (gp: distances of X passed as an argument not differentiated, a traced constant, warned in the Hessian
    # w.r.t. the lengthscale, which is right: sum over pairs of exp(-r / l), second derivative by hand)
    X = np.array([[0.0, 1.0], [1.0, 0.5], [2.0, -1.0]])

    def f(length, X):
        r = np.linalg.norm(X[:, None, :] - X[None, :, :], axis=-1)
        return np.sum(np.exp(-r / length))

    r = np.linalg.norm(X[:, None, :] - X[None, :, :], axis=-1)
    length = 0.7
    want = np.sum(np.exp(-r / length) * (r * r / length ** 4 - 2 * r / length ** 3))
    with warnings.catch_warnings():
        warnings.simplefilter("error", mg.KinkWarning)
        np.testing.assert_allclose(mg.hessian(f)(np.float64(length), X), want, rtol=1e-13)


def test_no_kink_warning_for_a_norm_an_inner_derivative_holds_constant():
    # (regress46: an inner grad w.r.t. m of norm(z) * m**2, z traced by the outer grad only: the norm is
    # differentiated once, and warned). d/dz of d/dm (|z| m**2) at m = 1.5 is 3 z/|z|: 0 at z = 0 (its kink)
    with warnings.catch_warnings():
        warnings.simplefilter("error", mg.KinkWarning)
        g = mg.grad(lambda z: mg.grad(lambda m: np.linalg.norm(z) * m ** 2)(1.5))(np.zeros(3))
    np.testing.assert_array_equal(g, np.zeros(3))
    z = np.array([0.3, -0.4, 1.2])  # (off the kink: 3 z / |z|, by hand)
    np.testing.assert_allclose(mg.grad(lambda z: mg.grad(lambda m: np.linalg.norm(z) * m ** 2)(1.5))(z),
                               3 * z / np.linalg.norm(z), rtol=1e-14)


def test_no_kink_warning_where_the_zero_is_a_branch_not_taken():
    # (irls, graphics: a Huber loss at a zero residual, a guarded root of the rays that miss, the MAD; their
    # Hessians are right, and the warning made them errors under the filter errors.md names). A real |x| and
    # np.sqrt do not warn; the Hessians against central differences of the plain functions
    def huber(r):
        return np.sum(np.where(r * r <= 1.0, 0.5 * r * r, np.abs(r) - 0.5))

    def rays(b):
        disc = b * b - 1.0
        hit = disc > 0
        return np.sum(np.exp(-np.where(hit, -b - np.sqrt(np.where(hit, disc, 0.0)), 100.0)))

    with warnings.catch_warnings():
        warnings.simplefilter("error", mg.KinkWarning)
        for f, at in ((huber, np.array([0.0, 0.5, 2.0])), (rays, np.array([-2.0, 0.5]))):
            np.testing.assert_allclose(mg.hessian(f)(at), fd_hessian(f, at, 1e-4), atol=1e-6)


@pytest.mark.parametrize("fn", [np.maximum, np.minimum, np.fmax, np.fmin])
@pytest.mark.filterwarnings("ignore:invalid value encountered")  # (the sums of inf and -inf)
def test_picks_share_the_derivative_by_the_documented_rule(fn):
    # (the partials are two comparisons and a sum where no NaN is present, np.where's cascade where one is)
    # the rule by hand: the winner 1, ties (-0.0 and 0.0 too) half each; np.maximum and np.minimum give a NaN
    # argument (the first of two) all of it, np.fmax and np.fmin a number over a NaN
    vals = [-np.inf, -1.0, -0.0, 0.0, 2.0, np.inf, np.nan]
    a = np.repeat(vals, len(vals))
    b = np.tile(vals, len(vals))
    nan_wins = fn in (np.maximum, np.minimum)
    want_a = np.empty(a.size)
    for k, (x, y) in enumerate(zip(a, b)):
        if np.isnan(x) or np.isnan(y):
            want_a[k] = (1.0 if np.isnan(x) else 0.0) if nan_wins else (0.0 if np.isnan(x) else 1.0)
            if not nan_wins and np.isnan(x) and np.isnan(y):
                want_a[k] = 0.0
        else:
            want_a[k] = 0.5 if x == y else float(fn(x, y) == x)
    want_b = np.where(np.isnan(a) & np.isnan(b), 0.0, 1.0 - want_a)  # (two NaNs: b gets nothing)
    for sel in (slice(None), [0], [3, 4]):  # (NaN-free parts take the two comparisons)
        ga, gb = mg.grad(lambda a, b: np.sum(fn(a, b)), argnums=(0, 1))(a[sel], b[sel])
        np.testing.assert_array_equal(ga, want_a[sel])
        np.testing.assert_array_equal(gb, want_b[sel])
    clean = ~(np.isnan(a) | np.isnan(b))
    ga, gb = mg.grad(lambda a, b: np.sum(fn(a, b)), argnums=(0, 1))(a[clean], b[clean])
    np.testing.assert_array_equal(ga, want_a[clean])
    np.testing.assert_array_equal(gb, want_b[clean])
    t = mg.jvp(lambda a: fn(a, b[clean]), (a[clean],), (np.ones(clean.sum()),))[1]
    np.testing.assert_array_equal(t, want_a[clean])
    assert mg.grad(lambda s: fn(s, 2.0))(2.0) == 0.5 and mg.grad(lambda s: fn(3.0, s))(2.0) == float(fn(3.0, 2.0) == 2.0)


def _r_sqrt_out(d):
    s = np.sum(d ** 2, keepdims=True)
    np.sqrt(s, out=s)
    return s[0]


def _r_ipow(d):
    s = np.sum(d ** 2, keepdims=True)
    s **= 0.5
    return s[0]


def _r_loop(d):
    s = 0.0
    for k in range(d.shape[0]):
        s += d[k] ** 2
    return np.sqrt(s)


def _r_square_out(d):
    sq = np.empty_like(d)
    np.square(d, out=sq)
    return np.sqrt(sq.sum())


NORMS_WRITTEN_OUT = [  # (regress67: each the distance |d| at d = 0, none warned)
    ("indexed products", lambda d: np.sqrt(d[0] * d[0] + d[1] * d[1])),
    ("a product of copies", lambda d: np.sqrt(((d + 0.0) * (d + 0.0)).sum())),
    ("a loop", _r_loop),
    ("np.square out=", _r_square_out),
    ("np.sqrt out=", _r_sqrt_out),
    ("**= 0.5", _r_ipow),
    ("two sums", lambda d: np.sqrt(np.sum(d[:1] ** 2) + np.sum(d[1:] ** 2))),
    ("np.float_power", lambda d: np.float_power(np.sum(d ** 2), 0.5)),
    ("a 2-D matmul", lambda d: np.sqrt((d[None, :] @ d[:, None])[0, 0])),
    ("a sum with where=", lambda d: np.sqrt(np.sum(d ** 2, where=np.array([True, True])))),
    ("einsum", lambda d: np.sqrt(np.einsum("i,i->", d, d))),
    ("expanded, clipped at 0", None),  # (of p and q: below)
    # (regress68: through a copy, a concatenation, a buffer written whole or element by element, np.abs)
    ("a copy", lambda d: np.sqrt(np.sum((d ** 2).astype(float).copy()))),
    ("a concatenation", lambda d: np.sqrt(np.sum(np.concatenate([d[:1] ** 2, d[1:] ** 2])))),
    ("a buffer's elements", lambda d: np.sqrt(np.sum(_elementwise_buffer(d)))),
    ("np.put", lambda d: np.sqrt(np.sum(_put_buffer(d)))),
    ("mnp.array", lambda d: np.sqrt(mnp.array([d[0] ** 2, d[1] ** 2]).sum())),
    ("np.abs", lambda d: np.sqrt(np.abs(d @ d))),
    ("in-place steps", lambda d: _in_place_steps(d)),
    ("squares weighted by a matmul", lambda d: np.sqrt((d ** 2) @ np.array([1.0, 1.0]))),  # (regress74)
]


def _in_place_steps(d):
    s = np.sum(d[None, :] ** 2 + np.zeros((2, 1)), axis=-1)  # (the squared distance, twice)
    s += np.array([0.0, 1e-3])  # (in-place steps between the squares and the root: a nugget, regress72)
    s *= 1.0
    return np.sqrt(s)[0]


def _elementwise_buffer(d):
    b = np.zeros_like(d)
    for k in range(d.shape[0]):
        b[k] = d[k] * d[k]
    return b


def _put_buffer(d):
    b = np.zeros_like(d)
    np.put(b, [0, 1], d ** 2)
    return b


@pytest.mark.parametrize("what,r", NORMS_WRITTEN_OUT, ids=[k[0] for k in NORMS_WRITTEN_OUT])
def test_a_norm_written_out_any_way_warns_at_zero_under_a_higher_derivative(what, r):
    f = lambda x: 0.5 * r(x[:2] - x[2:]) ** 2  # (0.5 |p - q|**2: smooth, Hessian [[I, -I], [-I, I]])
    if r is None:  # (scikit-learn's squared distances, exactly 0 at p == q here)
        f = lambda x: 0.5 * np.sqrt(np.maximum(x[:2] @ x[:2] + x[2:] @ x[2:] - 2 * x[:2] @ x[2:], 0.0)) ** 2
    at = np.array([0.3, -0.2, 0.3, -0.2])
    exact = np.block([[np.eye(2), -np.eye(2)], [-np.eye(2), np.eye(2)]])
    np.testing.assert_allclose(fd_hessian(f, at, 1e-4), exact, atol=1e-6)  # (the oracle)
    with pytest.warns(mg.KinkWarning, match="exactly at its kink"):
        h = mg.hessian(f)(at.copy())
    assert not np.allclose(h, exact)  # (the case the warning is about)
    with pytest.warns(mg.KinkWarning):  # (reverse over forward: the inner jvp's values are the outer tape's)
        mg.grad(lambda x: mg.jvp(f, (x,), (np.ones(4),))[1])(at.copy())
    off = np.array([0.3, -0.2, 0.1, 0.4])
    with warnings.catch_warnings():
        warnings.simplefilter("error", mg.KinkWarning)
        np.testing.assert_allclose(mg.hessian(f)(off.copy()), fd_hessian(f, off, 1e-4), rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(mg.grad(f)(at.copy()), 0.0, atol=1e-15)  # (first order: no warning)


_SAFE_ROOTS = {
    "where=": lambda d2: np.sqrt(d2, where=d2 > 0, out=np.zeros_like(d2)),
    "double np.where": lambda d2: np.where(d2 > 0, np.sqrt(np.where(d2 > 0, d2, 1.0)), 0.0),
}


@pytest.mark.parametrize("guard", list(_SAFE_ROOTS))
def test_a_root_guarded_by_where_warns_where_the_guard_leaves_the_kink_out(guard):
    # (regress73) a Matérn 5/2 kernel at a training point through a safe root: the guard's constant has no
    # derivative where |d| has its kink, so the Hessian misses the kernel's curvature, as through np.sqrt's
    # own value there; now the KinkWarning says so, as it does for the unguarded root
    X = np.array([[0.2, 0.1], [0.7, -0.3], [0.4, 0.5]])
    alpha = np.array([0.5, -1.2, 0.8])

    def mean(xs):
        d2 = np.sum((X - xs) ** 2, axis=1)
        r = _SAFE_ROOTS[guard](d2)
        s = np.sqrt(5.0) * r
        return ((1 + s + s * s / 3) * np.exp(-s)) @ alpha

    at = X[1].copy()
    want = fd_hessian(mean, at, 1e-4)
    with pytest.warns(mg.KinkWarning, match="guard"):
        h = mg.hessian(mean)(at.copy())
    assert not np.allclose(h, want, atol=1e-3)  # (the case the warning is about)
    off = X[1] + np.array([0.05, -0.02])
    with warnings.catch_warnings():
        warnings.simplefilter("error", mg.KinkWarning)
        np.testing.assert_allclose(mg.hessian(mean)(off.copy()), fd_hessian(mean, off, 1e-4), rtol=1e-5, atol=1e-6)

        def disc_root(x):  # (a discriminant's guard: its zeros no norm's, no warning)
            disc = x[0] - x[1]
            return np.sum(np.sqrt(disc, where=disc > 0, out=np.zeros_like(disc)) * x[1]) * 1.0

        mg.hessian(disc_root)(np.array([[1.0, 0.5], [1.0, 0.5]]).T.copy())


def _R(x):
    return np.linalg.norm(x[:2] - x[2:])


def _abs_twice(x):
    a = x[:2] - x[2:]
    return np.sum(np.abs(a) * np.abs(a))


def _huber_by_min(x):  # (regress77) the robust-statistics form: min(|r|, d) squared, plus the linear part
    r = x[:2] - x[2:]
    m = np.minimum(np.abs(r), 0.5)
    return np.sum(0.5 * m ** 2 + 0.5 * (np.abs(r) - m))


def _abs_in_a_buffer(x):  # (regress78) np.abs written into a buffer, then squared
    a = np.zeros_like(x[:2])
    a[:] = np.abs(x[:2] - x[2:])
    return np.sum(np.roll(a, 1) ** 2)


def _half_abs_squared(x):
    a = np.abs(x[:2] - x[2:])
    return np.sum(0.5 * a * a)


@pytest.mark.parametrize("f", [lambda x: _R(x) * _R(x), lambda x: np.multiply(_R(x), 2.0 * _R(x)),
                               lambda x: _R(x) * np.sin(_R(x)), _abs_twice, _half_abs_squared,
                               lambda x: np.abs(x[0] - x[2]) ** 2, _huber_by_min,
                               lambda x: np.sum(np.concatenate([np.abs(x[:1] - x[2:3]), np.abs(x[1:2] - x[3:])]) ** 2),
                               _abs_in_a_buffer],
                         ids=["r * r", "r * 2r", "r * sin(r)", "abs(a) * abs(a)", "0.5 * a * a (regress76)",
                              "abs ** 2 as the output (regress76)", "huber by min (regress77)",
                              "concatenated abs squared (regress77)", "abs in a buffer, rolled (regress78)"])
def test_second_derivatives_through_a_kink_at_zero_warn(f):
    # (regress75) the product exemption (a traced factor 0 where the kink is) holds for |x| ** 2, whose first
    # derivative is right there, not for a norm's own value: (r f)'' keeps 2 r' f', with r' wrong; r * r at
    # a coincident point had Hessian 0, without a warning, where it is [[I, -I], [-I, I]] times 2 (or more)
    at = np.array([0.3, -0.2, 0.3, -0.2])
    want = fd_hessian(f, at, 1e-4)
    with pytest.warns(mg.KinkWarning):
        h = mg.hessian(f)(at.copy())
    assert not np.allclose(h, want, atol=1e-3)  # (the case the warning is about)


def _smooth_min_at_a_tie(x):  # (the levelset tester) the stable smooth minimum, smooth at a == b
    a, b, k = x[0] + x[1], x[2] - x[3], 0.1
    return np.minimum(a, b) - k * np.log1p(np.exp(-np.abs(a - b) / k))


@pytest.mark.parametrize("f", [lambda x: np.sum(np.cos(np.abs(x[:2] - x[2:]))),
                               lambda x: np.sum(np.cosh(2.0 * np.abs(x[:2] - x[2:]))),
                               _smooth_min_at_a_tie,
                               lambda x: np.sum((np.abs(x[:2] - x[2:]) + 1.0) ** 2),
                               lambda x: np.sum(np.square(np.abs(x[:2] - x[2:]) + 1.0)),
                               lambda x: np.sum((np.abs(x[:2] - x[2:]) + 1.0) ** 3),
                               lambda x: np.sum(1.0 / (1.0 + np.abs(x[:2] - x[2:]))),
                               lambda x: np.sum(np.exp(-np.abs(x[:2] - x[2:]) / 0.5)),
                               lambda x: np.sum(np.logaddexp(-np.abs(x[:2] - x[2:]), 0.0)),
                               lambda x: np.sum(2.0 ** np.abs(x[:2] - x[2:])),
                               lambda x: np.cos(abs(x[0] - x[2])) * x[1],
                               lambda x: np.exp(-(np.abs(x[:2] - x[2:]) @ np.array([1.25, 0.5]))),
                               lambda x: np.cos(np.einsum("i,i->", np.abs(x[:2] - x[2:]), np.array([1.0, 2.0]))),
                               lambda x: np.cos(np.max(np.abs(x[:2] - x[2:]))),
                               lambda x: np.cos(np.abs(x[0] - x[2]) + np.abs(x[1] - x[3]))],
                         ids=["cos(|d|)", "cosh(2|d|)", "stable smooth min (levelset)", "(|d| + 1) ** 2",
                              "square(|d| + 1)", "(|d| + 1) ** 3", "1 / (1 + |d|)", "exp(-|d| / l)",
                              "logaddexp(-|d|, 0)", "2 ** |d|", "scalar cos(abs(d))", "exp(-|d| @ w) (regress79)",
                              "cos(einsum) (regress79)", "cos(max |d|) (regress79)", "cos(|a| + |b|)"])
def test_a_function_of_abs_that_curves_at_its_zero_warns_under_a_second_derivative(f):
    # g(|d|) at d = 0: through abs's derivative sign(d), 0 there, the Hessian's g''(0) sign(d) ** 2 came out 0 without
    # a warning: wrong for cos(|d|) = cos(d), whose Hessian is -1 (central differences), and for a kink that another
    # cancels (the smooth minimum's), where g'' is there on both sides
    at = np.array([0.3, 0.2, 0.5, 0.0]) if f is _smooth_min_at_a_tie else np.array([0.3, -0.2, 0.3, -0.2])
    want = fd_hessian(f, at, 1e-4)
    with pytest.warns(mg.KinkWarning, match="of np.abs"):
        h = mg.hessian(f)(at.copy())
    assert not np.allclose(h, want, atol=1e-3)  # (the case the warning is about)


def test_no_kink_warning_for_a_function_of_abs_that_is_straight_at_its_zero_or_off_it():
    # sin, tanh, arctan of |d| at 0 are straight there (g'' = 0): |d|'s own convention, no warning; nor a quotient
    # whose numerator is the abs, a curved function of |d| where d is not 0, or the self-distances of a pairwise
    # Laplace kernel exp(-|x_i - x_j|), identically 0 (its Hessian at distinct points against central differences)
    at0 = np.array([0.3, -0.2, 0.3, -0.2])
    with warnings.catch_warnings():
        warnings.simplefilter("error", mg.KinkWarning)
        for g in (np.sin, np.tanh, np.arctan, lambda u: u / 2.0):
            h = mg.hessian(lambda x, g=g: np.sum(g(np.abs(x[:2] - x[2:])) * x[:2]))(at0)
            assert np.all(np.isfinite(h))
        at = np.array([0.3, -0.2, 0.5, -0.7])
        f = lambda x: np.sum(np.cos(np.abs(x[:2] - x[2:])))
        np.testing.assert_allclose(mg.hessian(f)(at), fd_hessian(f, at, 1e-4), atol=1e-6)

        def laplace(x):
            return np.sum(np.exp(-np.abs(x[:, None] - x[None, :])) @ np.arange(3.0))

        x = np.array([0.1, 0.5, 1.2])
        np.testing.assert_allclose(mg.hessian(laplace)(x), fd_hessian(laplace, x, 1e-4), atol=1e-6)
        f = lambda x: np.cos(np.max(np.abs(x[:2] - x[2:])))  # (the maximum is not the abs at its zero)
        at = np.array([0.3, -0.2, 0.3, 0.5])
        np.testing.assert_allclose(mg.hessian(f)(at), fd_hessian(f, at, 1e-4), atol=1e-6)
    with pytest.warns(mg.KinkWarning, match="of np.abs"):  # (two points that coincide: a kink of the kernel)
        mg.hessian(laplace)(np.array([0.1, 0.5, 0.1]))


def test_a_maximum_and_minimum_of_two_tied_values_warn_like_an_abs():
    # (regress85) max(a, b) - min(a, b) is |a - b|: squared, (a - b) ** 2, whose Hessian [[2, -2], [-2, 2]] came out 0
    # at a == b without a warning (the even split, twice); max ** 2 + min ** 2 is a ** 2 + b ** 2 (2 I), which came out
    # [[1, 1], [1, 1]]. Off the tie the Hessian is right (central differences), and no warning
    for f in (lambda x: (np.maximum(x[0], x[2]) - np.minimum(x[0], x[2])) ** 2,
              lambda x: np.maximum(x[0], x[2]) ** 2 + np.fmin(x[0], x[2]) ** 2,
              lambda x: np.maximum(x[0], x[2]) * np.minimum(x[0], x[2]),  # (a * b: regress86)
              lambda x: np.exp(np.maximum(np.maximum(x[0], x[2]), 0.0)),  # (a ReLU of the tied max: regress86)
              lambda x: np.sum(np.cos(np.maximum(x[:2], x[2:]) - np.minimum(x[:2], x[2:])))):
        at = np.array([1.0, 0.5, 1.0, -0.5])
        with pytest.warns(mg.KinkWarning):
            h = mg.hessian(f)(at.copy())
        assert not np.allclose(h, fd_hessian(f, at, 1e-4), atol=1e-3)
        off = np.array([1.0, 0.5, 1.3, -0.5])
        with warnings.catch_warnings():
            warnings.simplefilter("error", mg.KinkWarning)
            np.testing.assert_allclose(mg.hessian(f)(off), fd_hessian(f, off, 1e-4), atol=1e-6)


def test_a_tie_of_two_values_that_move_alike_does_not_warn():
    # (regress86) a max-pool of a flat background: w * 0 + b in each of two cells ties, as a function of (w, b), not at
    # one point alone; mg.hessian's directions move both alike, no kink is crossed, and the Hessian is right (central
    # differences) without a warning
    img = np.array([0.0, 0.7, 0.0, 0.2])  # (cells 0 and 2 of the background tie)

    def f(th):
        h = th[0] * img + th[1]
        p = np.maximum(h[:2], h[2:])
        return np.sum(np.exp(p * th[2]))

    th = np.array([0.4, 0.3, 0.9])
    with warnings.catch_warnings():
        warnings.simplefilter("error", mg.KinkWarning)
        np.testing.assert_allclose(mg.hessian(f)(th), fd_hessian(f, th, 1e-4), atol=1e-6)


def test_a_tie_of_two_copies_moves_alike_as_the_operation_saw_them():
    # (regress132) np.minimum of two copies of one element, min(x0, x0), is smooth; a write into an operand after
    # the minimum (a[0] = 3 * x[1]) changed its tangent there, and the watch, reading the operands' tangents
    # afterwards, took the tie for a kink and warned. By hand: a ends as (3 x1, x1, x0, x3), m = (x0, x1) at
    # x1 < x3, so the Hessian is diag(2 - sin(x0), 20 - sin(x1), 0, 2), with no warning
    def f(x):
        a = np.zeros_like(x)
        a[:] = x
        a[2] = a[0]
        m = np.minimum(a[:2], a[2:])
        a[0] = 3.0 * x[1]
        return np.sum(np.sin(m)) + np.sum(a ** 2)

    x = np.array([0.3, 0.8, 0.5, 0.9])
    with warnings.catch_warnings():
        warnings.simplefilter("error", mg.KinkWarning)
        np.testing.assert_allclose(mg.hessian(f)(x), np.diag([2 - np.sin(0.3), 20 - np.sin(0.8), 0.0, 2.0]),
                                   rtol=1e-12, atol=1e-14)
    with pytest.warns(mg.KinkWarning, match=r"np.minimum\(a, b\)"):  # (a tie of two elements that move apart)
        mg.hessian(lambda x: np.sum(np.sin(np.minimum(x[:2], x[2:]))))(np.array([0.3, 0.8, 0.3, 0.9]))


def test_a_norm_written_element_by_element_warns_only_where_its_element_is_read():
    # (regress81) pairwise distances written one by one into r[i, j], then read for i < j alone: the zero
    # self-distances written on the diagonal are never read (no warning; the Hessian against central differences);
    # read, they warn as the array-level norm's do
    X0 = np.array([[0.3, -0.2], [1.1, 0.4], [-0.5, 0.9]])

    def energy(X, diagonal):
        n = len(X)
        r = np.zeros_like(X, shape=(n, n))
        for i in range(n):
            for j in range(n):
                r[i, j] = np.linalg.norm(X[i] - X[j])
        E = 0.0
        for i in range(n):
            for j in range(i + 1, n):
                E += (r[i, j] - 1.0) ** 2
        return E + (np.sum(np.diag(r) ** 2) if diagonal else 0.0)

    with warnings.catch_warnings():
        warnings.simplefilter("error", mg.KinkWarning)
        f = lambda X: energy(X, False)
        np.testing.assert_allclose(mg.hessian(f)(X0.copy()).reshape(6, 6),
                                   fd_hessian(lambda x: f(x.reshape(3, 2)), X0.ravel(), 1e-4), atol=1e-6)
    with pytest.warns(mg.KinkWarning, match="norm"):
        mg.hessian(lambda X: energy(X, True))(X0.copy())


def test_no_kink_warning_where_np_where_takes_a_constant_at_the_abs_zero():
    # (regress78) np.where(|x| > 0.5, |x|, 0.0) ** 2 is 0 near x = 0 (the constant branch): Hessian 0 there is
    # right, against central differences; the Huber form np.where(|x| < d, |x|, d) ** 2 takes the abs there, and warns
    def cut(x):
        a = np.abs(x)
        return np.sum(np.where(a > 0.5, a, 0.0) ** 2)

    def masked(x):  # (the same function, the abs times a constant mask that is 0 at its zero)
        a = np.abs(x)
        return np.sum((a * (a > 0.5)) ** 2)

    at = np.array([0.0, 1.0, -0.2])
    with warnings.catch_warnings():
        warnings.simplefilter("error", mg.KinkWarning)
        for f in (cut, masked):
            np.testing.assert_allclose(mg.hessian(f)(at), fd_hessian(f, at, 1e-4), atol=1e-6)

    def huber(x):
        a = np.abs(x)
        return np.sum(np.where(a < 0.5, a, 0.5) ** 2)

    with pytest.warns(mg.KinkWarning):
        mg.hessian(huber)(at)


def test_no_kink_warning_for_a_squared_norm_times_a_factor_that_is_zero_there():
    # (regress76) |d| ** 2 * y at d = 0, y = 0: the square's first derivative is right at 0 (0), so the product
    # with a factor 0 carries no kink; its Hessian against central differences, no warning
    def f(x):
        return np.linalg.norm(x[:2] - x[2:4]) ** 2 * x[4] + x[4] ** 2

    at = np.array([0.3, -0.2, 0.3, -0.2, 0.0])
    with warnings.catch_warnings():
        warnings.simplefilter("error", mg.KinkWarning)
        np.testing.assert_allclose(mg.hessian(f)(at), fd_hessian(f, at, 1e-4), atol=1e-6)


def test_no_kink_warning_for_a_power_above_two_of_a_norm_at_zero():
    # (regress74) a cubic radial basis function w @ |x - N_i| ** 3 at a node: r ** 3 has first and second
    # derivatives 0 at r = 0 whatever r's are, so its Hessian is right there (central differences); no warning
    nodes = np.array([[0.0, 0.0], [1.0, 0.5], [0.3, 1.2]])
    w = np.array([0.7, -1.1, 0.4])

    def f(x):
        return (w @ np.linalg.norm(x - nodes, axis=1) ** 3 + w @ np.sqrt(np.sum((x - nodes) ** 2, axis=1)) ** 3.5
                + w @ np.float_power(np.abs(np.linalg.norm(x - nodes, axis=1)), 3)  # (regress75)
                + np.abs(np.sqrt(np.sum((x - nodes[1]) ** 2))) ** 3)  # (np.abs of a 0-d value: the general path)

    def radial_hessian(d, p):  # of |d| ** p by hand: p r^(p-2) (I + (p - 2) u uᵀ), 0 at d = 0 for p > 2
        r = np.linalg.norm(d)
        if r == 0:
            return np.zeros((2, 2))
        u = d / r
        return p * r ** (p - 2) * (np.eye(2) + (p - 2) * np.outer(u, u))

    at = nodes[1].copy()
    exact = sum(wi * (2 * radial_hessian(at - n, 3) + radial_hessian(at - n, 3.5)) for wi, n in zip(w, nodes))
    exact = exact + radial_hessian(at - nodes[1], 3)
    np.testing.assert_allclose(fd_hessian(f, at, 1e-5), exact, atol=1e-3)  # (differences: an error of 4 h at the node)
    with warnings.catch_warnings():
        warnings.simplefilter("error", mg.KinkWarning)
        np.testing.assert_allclose(mg.hessian(f)(at), exact, rtol=1e-12, atol=1e-12)


def test_no_kink_warning_for_a_buffer_s_constant_zeros():
    # a buffer filled in part: its zeros that were never written are constants, and np.sqrt of them no kink of
    # a norm (the written squares are not 0 here); the Hessian against central differences of the plain function
    def f(x):
        r2 = mnp.zeros(3)
        r2[1:] = (x[:2] - x[2:]) ** 2 + 1.0
        return np.sum(np.exp(-np.sqrt(r2)) * np.array([1.0, 2.0, 3.0]))

    at = np.array([0.3, -0.2, 0.3, -0.2])
    with warnings.catch_warnings():
        warnings.simplefilter("error", mg.KinkWarning)
        np.testing.assert_allclose(mg.hessian(f)(at), fd_hessian(f, at, 1e-4), rtol=1e-6, atol=1e-7)


def test_no_kink_warning_where_a_product_s_other_factor_is_zero():
    # (regress71) Glen's flux |ds| ** 2 * ds on a flat surface: the kink's second derivative reaches the result
    # only times ds, 0 there, so the Hessian is right (central differences of the plain function), no warning
    def flux(s):
        ds = np.diff(s)
        return np.sum((np.abs(ds) ** 2 * ds) ** 2 + np.abs(ds) ** 2 * ds)

    at = np.array([1.0, 1.0, 1.0, 1.5])
    with warnings.catch_warnings():
        warnings.simplefilter("error", mg.KinkWarning)
        np.testing.assert_allclose(mg.hessian(flux)(at), fd_hessian(flux, at, 1e-4), atol=1e-6)
    with pytest.warns(mg.KinkWarning):  # (the same kink times a factor that is not 0: warned)
        mg.hessian(lambda s: np.sum(np.abs(np.diff(s)) ** 2 * (1.0 + s[1:])))(at)


@pytest.mark.parametrize("layout", [np.atleast_1d, lambda s: np.reshape(s, -1), lambda s: np.expand_dims(s, 0)])
def test_a_reshaped_sum_of_squares_under_a_root_warns_as_the_root_does(layout):
    # (robotics2) the angle np.sqrt(np.atleast_1d(w @ w)) of a rotation vector: at w = 0 the Hessian of
    # cos(angle) is -I (central second differences of the plain function) and comes out 0, as without the
    # reshape, which warned; the reshape hid the sum of squares, and nothing was said
    def f(w):
        return np.cos(np.sqrt(layout(w @ w)))[0]

    w0 = np.zeros(3)
    want = fd_hessian(f, w0, 1e-4)
    np.testing.assert_allclose(want, -np.eye(3), atol=1e-6)
    with pytest.warns(mg.KinkWarning, match="sum of squares"):
        h = mg.hessian(f)(w0)
    assert not np.allclose(h, want, atol=1e-3)  # (the case the warning is about)


@pytest.mark.parametrize("root", [np.sqrt, lambda s: s ** 0.5, lambda s: np.power(s, 0.5)])
def test_a_root_of_a_sum_of_squares_warns_under_forward_over_forward(root):
    # (regress120) forward over forward keeps no tape to show a sum of squares: np.sqrt(x @ x) ** 2 at 0 had
    # Hessian 0 for 2 I (second differences of the plain function) without the KinkWarning hessian gives; a
    # root's argument that is 0 with a zero tangent (0 to second order) now warns. A root of a value that
    # crosses 0, np.sqrt(x[0] + 1) ** 2 near x[0] = -1, does not
    f = lambda x: root(x @ x) ** 2
    x0 = np.zeros(2)
    np.testing.assert_allclose(fd_hessian(f, x0, 1e-4), 2 * np.eye(2), atol=1e-6)
    with pytest.warns(mg.KinkWarning, match="second order"):
        mg.jacobian(mg.jacobian(f, mode="fwd"), mode="fwd")(x0)
    with pytest.warns(mg.KinkWarning, match="second order"):
        mg.jvp(lambda x: mg.jvp(f, (x,), (np.array([1.0, 0.0]),))[1], (x0,), (np.array([1.0, 0.0]),))
    g = lambda x: root(x[0] + 1.0) ** 2 + x[1]
    with warnings.catch_warnings():
        warnings.simplefilter("error", mg.KinkWarning)
        h = mg.jacobian(mg.jacobian(g, mode="fwd"), mode="fwd")(np.array([-0.5, 0.3]))
    np.testing.assert_allclose(h, fd_hessian(g, np.array([-0.5, 0.3]), 1e-4), atol=1e-6)


def test_self_distances_through_a_scaled_kernel_overwritten_by_fill_diagonal_are_quiet():
    # (geostats) np.exp(-np.sqrt(3) * r / ls) then np.fill_diagonal(K, 1.0): the zero self-distances reach only
    # elements the write replaces, four elementwise steps on (three were followed): the Hessian is right
    # (central differences of the plain function) and warned once per run. Read before the write, it still warns
    X = np.array([[0.0, 0.0], [1.0, 0.5], [0.3, 2.0]])

    def kernel_sum(x, read_diagonal=False):
        x = x.reshape(3, 2)
        r = np.linalg.norm(x[:, None, :] - x[None, :, :], axis=-1)
        K = (1.0 + np.sqrt(3.0) * r / 1.3) * np.exp(-np.sqrt(3.0) * r / 1.3)
        extra = np.sum(np.diagonal(K).copy()) if read_diagonal else 0.0
        np.fill_diagonal(K, 1.0)
        return np.sum(K) + extra

    with warnings.catch_warnings():
        warnings.simplefilter("error", mg.KinkWarning)
        h = mg.hessian(kernel_sum)(X.ravel())
    np.testing.assert_allclose(h, fd_hessian(kernel_sum, X.ravel(), 1e-4), rtol=1e-5, atol=1e-6)
    with pytest.warns(mg.KinkWarning):
        mg.hessian(lambda x: kernel_sum(x, True))(X.ravel())


def _log_space(x):
    a = np.full_like(x, -np.inf, shape=(2,))
    a[0] = x[0]
    b = a + x[1]  # (b[1] = -inf with a tangent: logaddexp(-inf, -inf)'s is 0/0)
    return np.logaddexp(b[0], np.logaddexp(b[1], b[1]))  # (x0 + x1 exactly)


def test_jvp_of_a_log_space_recursion_with_container_arguments_is_finite():
    # (seqmodels) jvp's careful second run (strong zeros) was skipped for every container argument, and the NaN
    # of 0 * nan stood for a dict, a list or a dataclass (3.0 by central differences); it runs where the function
    # rebound no item of them. One that appends to a list argument still runs once (a plain call's state)
    x, v = np.array([0.3, -0.7]), np.array([1.0, 2.0])
    want = (_log_space(x + 1e-6 * v) - _log_space(x - 1e-6 * v)) / 2e-6
    assert mg.jvp(lambda p: _log_space(p["x"]), ({"x": x.copy()},), ({"x": v},))[1] == pytest.approx(want, rel=1e-7)
    assert mg.jvp(lambda p: _log_space(p[0]), ([x.copy()],), ([v],))[1] == pytest.approx(want, rel=1e-7)
    hvp = mg.jvp(mg.grad(lambda p: _log_space(p["x"]) ** 2), ({"x": x.copy()},), ({"x": v},))[1]["x"]
    g = lambda y: mg.grad(lambda z: _log_space(z) ** 2)(y)  # noqa: E731
    np.testing.assert_allclose(hvp, (g(x + 1e-6 * v) - g(x - 1e-6 * v)) / 2e-6, rtol=1e-6)

    def logged(p, log):
        log.append(1)
        return _log_space(p["x"])

    log, plain_log = [], []
    logged({"x": x.copy()}, plain_log)
    mg.jvp(logged, ({"x": x.copy()}, log), ({"x": v}, None))
    assert log == plain_log


def _rodrigues_rows(W):
    """Rotation matrices of the rows of W, with a small-angle branch np.where takes where a row is 0 (W / theta is
    NaN there, in the branch not taken)."""
    theta = np.linalg.norm(W, axis=1)
    def hat(V):
        S = np.zeros_like(V, shape=(len(V), 3, 3))
        S[:, 0, 1], S[:, 0, 2], S[:, 1, 2] = -V[:, 2], V[:, 1], -V[:, 0]
        return S - np.swapaxes(S, 1, 2)
    with np.errstate(invalid="ignore", divide="ignore"):
        K = hat(W / theta[:, None])
    s, c = np.sin(theta)[:, None, None], np.cos(theta)[:, None, None]
    full = np.eye(3) + s * K + (1 - c) * (K @ K)
    small = np.eye(3) + hat(W) + 0.5 * hat(W) @ hat(W)  # (the series to second order: both branches' Hessian at 0)
    return np.where((theta < 1e-8)[:, None, None], small, full)


def test_a_hessian_through_the_branch_np_where_does_not_take_is_finite():
    # (robotics3) a camera with exactly zero rotation: the reverse pass multiplies the untaken branch's zero
    # cotangent by W / theta's infinite partial, NaN, and its Hessian rows came out NaN (the gradient's NaN entries
    # are filled by forward mode; the Hessian's were not). They are computed again in forward over forward, which
    # drops the branch's tangents at the np.where; against second central differences of the plain function
    X, C = np.array([1.0, -2.0, 0.5]), np.array([0.3, -0.7, 0.2])
    loss = lambda w: np.sum((_rodrigues_rows(w.reshape(2, 3)) @ X) ** 2 @ C)
    w = np.array([0.1, -0.2, 0.3, 0.0, 0.0, 0.0])
    want = fd_hessian(loss, w, 1e-4)
    for has_aux in (False, True):
        f = (lambda w: (loss(w), "aux")) if has_aux else loss
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", mg.KinkWarning)  # (the norm's zero: documented)
            got = mg.hessian(f, has_aux=has_aux)(w.copy())
        H = got[0] if has_aux else got
        assert not np.isnan(H).any()
        np.testing.assert_allclose(H, want, atol=1e-5)
    # a Hessian-vector product, jvp of grad, likewise (its gradient too, which the jvp computes nested)
    v = np.array([0.3, -0.2, 0.5, 1.0, 0.4, -0.7])
    g_plain = np.array([(loss(w + 1e-6 * e) - loss(w - 1e-6 * e)) / 2e-6 for e in np.eye(6)])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", mg.KinkWarning)
        g, hv = mg.jvp(mg.grad(loss), (w.copy(),), (v,))
    np.testing.assert_allclose(g, g_plain, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(hv, want @ v, atol=1e-5)



def test_a_maximum_written_back_into_its_operand_is_watched_as_the_operation_saw_it():
    # (regress127) y[:] = np.maximum(y, 2 * y), or np.maximum(y, y[::-1], out=y): the kink watch compared the record's
    # operands after the write had changed y, and read a tie that never was (a KinkWarning at every Hessian-vector
    # product, reverse over reverse; hessian fell back to forward over reverse). The ties are noted as the operation
    # saw them: quiet, and right (against central differences of the plain gradient); a real tie still warns
    v = np.array([0.3, -0.2, 0.5, 0.1])
    x0 = np.array([-1.391, 0.385, -0.144, 1.365])

    def doubled(x):
        y = x.copy()
        y[:] = np.maximum(y, 2.0 * y)
        return np.sum(np.tanh(y))

    def mirrored(x):
        y = x.copy()
        np.maximum(y, y[::-1], out=y)
        return np.sum(np.tanh(y))

    def fd_gradient(f, x, h=1e-6):
        return np.array([(f(x + h * e) - f(x - h * e)) / (2 * h) for e in np.eye(x.size)])

    for f in (doubled, mirrored):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            hv = mg.grad(lambda y, f=f: np.dot(mg.grad(f)(y), v))(x0.copy())
        want = (fd_gradient(f, x0 + 1e-4 * v) - fd_gradient(f, x0 - 1e-4 * v)) / 2e-4
        np.testing.assert_allclose(hv, want, atol=1e-5)

    def folded(x):  # (|x| written in place: at x = 0 a real tie, and the square's Hessian there is the abs's kink)
        y = x.copy()
        y[:] = np.fmax(y, -y)
        return np.sum(y ** 2)

    with pytest.warns(mg.KinkWarning):
        mg.grad(lambda y: np.dot(mg.grad(folded)(y), v))(np.array([0.0, 0.5, -0.3, 1.0]))
