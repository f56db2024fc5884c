"""Type checks in user code see what a plain call shows them.

isinstance(x, np.ndarray) for a traced array, isinstance(x[0], np.float64)
and float for a traced float64 element, isinstance(s, float) for a Python
float argument, np.isscalar: user code that branches on them takes the
plain call's path. Oracles: the plain call's value and final arguments, and
central differences.
"""
import numbers
import warnings

import numpy as np
import pytest

import mutagrad as mg

W = np.array([1.0, 2.0, 3.0])


def _normalize(v):
    if isinstance(v, np.ndarray):  # a defensive copy for arrays
        v = v.copy()
    v /= np.sum(v)
    return v


def defensive_copy(x):
    return np.sum(_normalize(x) * W) + np.sum(x ** 2)


def scalar_branch(x):
    scale = 2.0 if isinstance(x[0], float) and np.isscalar(x[1]) else 1.0
    return scale * np.sum(x * x)


def python_float_param(x, dt=0.1):
    if isinstance(dt, float):  # a scalar step: the same for every element
        dt = np.full_like(x, dt)
    return np.sum(x * dt) * (2.0 if isinstance(dt, np.ndarray) else 1.0)


@pytest.mark.parametrize("fn", [defensive_copy, scalar_branch, python_float_param])
def test_type_checks_take_the_plain_path(fn):
    x0 = np.array([0.6, 1.3, 2.2])
    xp = x0.copy()
    want = fn(xp)
    xm = x0.copy()
    val, g = mg.value_and_grad(fn)(xm)
    assert val == want
    np.testing.assert_array_equal(xm, xp)  # the argument ends as the plain call leaves it
    h = 1e-6
    ref = [(fn(x0 + h * e) - fn(x0 - h * e)) / (2 * h) for e in np.eye(3)]
    np.testing.assert_allclose(g, ref, rtol=1e-7)
    np.testing.assert_allclose([mg.jvp(fn, (x0.copy(),), (e,))[1] for e in np.eye(3)], ref, rtol=1e-7)


def test_python_float_argument_is_a_float():
    seen = []

    def f(x, s):
        seen.append((isinstance(s, float), isinstance(s, numbers.Real), isinstance(x, np.ndarray),
                     isinstance(x[0], np.floating), round(x[0] * s, 2) == round(0.6 * 0.5, 2)))
        return np.sum(x) * s

    g = mg.grad(f, argnums=1)(np.array([0.6, 1.3]), 0.5)
    assert seen == [(True, True, True, True, True)]
    assert type(g) is float and abs(g - 1.9) < 1e-12


def test_round_of_a_traced_scalar():
    with pytest.raises(mg.TracerEscapeError, match="int"):
        mg.grad(lambda x: round(x[0]) * x[1])(np.array([2.567, 1.26]))
    g = mg.grad(lambda x: np.sum(x) * round(x[1], 1))(np.array([2.567, 1.26]))  # a constant factor
    np.testing.assert_allclose(g, [1.3, 1.3])


class _Sim:
    def __init__(self):
        self.u = np.array([0.6, 1.3, 2.2, -1.1])

    def energy(self, u):  # called with u = self.u: a write through u changes self.u unseen
        u *= 2.0
        return np.sum(self.u ** 2)

    def energy_arg_only(self, u):  # never names self.u: writing the argument is fine
        u *= 2.0
        return np.sum(u ** 2)


def test_argument_aliasing_an_attribute_of_the_method_object():
    sim = _Sim()
    with pytest.raises(mg.AliasingError, match=r"self\.u"):
        mg.grad(sim.energy)(sim.u)
    sim = _Sim()
    u0 = sim.u.copy()
    g = mg.grad(sim.energy_arg_only)(sim.u)
    np.testing.assert_allclose(g, 8 * u0, rtol=1e-12)  # d/du sum((2u)^2), by hand and by FD below
    h = 1e-6
    plain = lambda u: np.sum((2 * u) ** 2)
    np.testing.assert_allclose(g, [(plain(u0 + h * e) - plain(u0 - h * e)) / (2 * h) for e in np.eye(4)], rtol=1e-7)


_A = np.array([1.0, 3.0, 2.0, 6.0, 4.0, 5.0])
_B = np.array([[1.0, -2.0, 4.0], [0.5, 3.0, -1.0]])


@pytest.mark.parametrize("call", [
    lambda a, b: np.percentile(a, 50), lambda a, b: np.quantile(a, 0.3),
    lambda a, b: np.nanpercentile(a, 50), lambda a, b: np.nanquantile(a, 0.25, method="lower"),
    lambda a, b: np.percentile(a, 50, keepdims=True), lambda a, b: np.quantile(b, [0.5, 0.7], axis=1),
    lambda a, b: np.linalg.norm(b, 1), lambda a, b: np.linalg.norm(b, -1), lambda a, b: np.linalg.norm(b, np.inf),
    lambda a, b: np.linalg.norm(b, -np.inf), lambda a, b: np.linalg.matrix_norm(b, ord=np.inf),
    lambda a, b: np.linalg.norm(b, 1, keepdims=True), lambda a, b: np.linalg.norm(b[None], 1, axis=(1, 2)),
], ids=["percentile", "quantile", "nanpercentile", "nanquantile-lower", "keepdims", "q-list",
        "norm-1", "norm--1", "norm-inf", "norm--inf", "matrix_norm", "norm-keepdims", "norm-stack"])
def test_quantiles_and_matrix_norms_return_numpys_types(call):
    # NumPy returns a NumPy scalar for a full reduction (a 0-d array came back), so user code
    # branching on np.isscalar or the type takes the plain call's path
    plain = call(_A, _B)
    traced = mg.vjp(lambda a, b: call(a, b), _A, _B)[0]
    assert type(traced) is type(plain) and np.shape(traced) == np.shape(plain)
    np.testing.assert_array_equal(traced, plain)
    forward = mg.jvp(lambda a, b: call(a, b), (_A, _B), (np.ones(6), np.ones((2, 3))))[0]
    assert type(forward) is type(plain)


class _OptsOut:
    """An operand that opts out of NumPy's ufuncs: NumPy's operators let its own reflected
    operators answer."""

    __array_ufunc__ = None

    def __radd__(self, other):
        return other * 3.0

    def __rmul__(self, other):
        return other + 1.0


def test_an_operand_with_array_ufunc_none_gets_its_reflected_operator():
    # x + AU() raised TypeError under grad; NumPy's ndarray returns NotImplemented for it
    def f(x):
        return np.sum(x + _OptsOut()) + np.sum(x * _OptsOut())

    x = np.array([1.0, 2.0])
    assert mg.value_and_grad(f)(x)[0] == f(x) == 14.0
    np.testing.assert_allclose(mg.grad(f)(x), [4.0, 4.0])  # closed form: d/dx (3x + x + 1)


def test_attributes_and_membership_as_on_plain_arrays():
    # code that asks an array what it has takes the plain call's path: NumPy 2 has no ndarray.ptp
    # (a traced array had it); `v in A` of a 2-D array is (A == v).any() (a traced one iterated
    # rows and raised)
    seen = []

    def f(x):
        m = x.reshape(2, 2)
        s = np.sum(x ** 2)
        seen.append((hasattr(x, "ptp"), 2.0 in m, 7.0 in m, 2.0 in x))
        return 2 * s if hasattr(x, "ptp") else s

    x = np.array([1.0, 2.0, 3.0, 4.0])
    plain = f(x.copy())
    value, g = mg.value_and_grad(f)(x.copy())
    assert value == plain
    np.testing.assert_allclose(g, 2 * x, rtol=1e-15)  # d/dx sum(x²), by hand
    assert seen[0] == seen[1] == (hasattr(np.ndarray, "ptp"), True, False, True)


def _sq_norm(v):  # (the pythonic tester) a "fast path" chosen by the exact type
    if type(v) is np.float64:
        return v * v
    return np.sum(np.abs(v))


def _exact_type_branches(x):
    return _sq_norm(x[0]) + (np.sum(x[1:] ** 2) if type(x) == np.ndarray else np.sum(x[1:]))


def test_a_test_of_the_exact_type_warns_where_it_is_written():
    # type(x) is the tracer's class: the branch is not the plain call's, and no method of the tracer runs to
    # tell. Each such test in the code the function runs (a helper it names too) is warned of, once
    x = np.array([0.7, 1.3, 0.4])
    with pytest.warns(UserWarning) as record:
        g = mg.grad(_exact_type_branches)(x)
    texts = [str(w.message) for w in record]
    assert any(t.startswith("`type(v) is np.float64` tests the exact type") and "isinstance(v, np.float64)" in t
               for t in texts)
    assert any(t.startswith("`type(x) == np.ndarray` tests the exact type") for t in texts)
    h = 1e-6  # (the warning is about this: another branch than the plain call's, here 1 where it is 1.4)
    fd = [(_exact_type_branches(x + h * e) - _exact_type_branches(x - h * e)) / (2 * h) for e in np.eye(3)]
    assert not np.allclose(g, fd) and np.allclose(fd, [1.4, 2.6, 0.8])
    with warnings.catch_warnings():  # (once: the same function again is quiet; isinstance is quiet)
        warnings.simplefilter("error")
        mg.grad(_exact_type_branches)(x)
        mg.grad(lambda v: np.sum(v ** 2) if isinstance(v, np.ndarray) and type(v) is not list else 0.0)(x)


class _Model:  # (regress100) the test in a method called through an object, and in another module's function
    def energy(self, x):
        if type(x) is np.ndarray:
            return np.sum(x ** 2)
        return np.sum(x)


_MODEL = _Model()


def test_a_test_of_the_exact_type_in_a_method_or_another_module_warns(tmp_path, monkeypatch):
    x = np.array([1.0, 2.0, 3.0])
    with pytest.warns(UserWarning, match=r"`type\(x\) is np.ndarray` tests the exact type"):
        mg.grad(lambda x: _MODEL.energy(x))(x)  # (a global object's method)
    (tmp_path / "typetest_helpers.py").write_text(
        "import numpy as np\n"
        "def sq(x):\n"
        "    return np.sum(x ** 2) if type(x) == np.ndarray else np.sum(x)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    import typetest_helpers

    with pytest.warns(UserWarning, match=r"`type\(x\) == np.ndarray` tests the exact type"):
        mg.grad(lambda x: typetest_helpers.sq(x))(x)  # (a module's function)

    class Local:
        def energy(self, x):
            return np.sum(x ** 2) if type(x) in (np.ndarray, list) else np.sum(x)

    with pytest.warns(UserWarning, match=r"tests the exact type"):  # (an object given as an argument)
        mg.grad(lambda x, m: m.energy(x))(x, Local())


class _Tanh:  # (regress102) a layer's method reached through a model's list of layers, and a test of the name
    def __call__(self, h):
        if type(h).__name__ == "ndarray":
            return np.tanh(h)
        return h


class _Sequential:
    def __init__(self, layers):
        self.layers = layers

    def __call__(self, x):
        for layer in self.layers:
            x = layer(x)
        return np.sum(x)


def test_a_test_of_the_exact_type_in_a_layer_of_a_model_warns():
    x = np.array([0.5, 1.5])
    model = _Sequential([_Tanh(), _Tanh()])
    with pytest.warns(UserWarning, match=r"`type\(h\).__name__ == 'ndarray'` tests the exact type"):
        g = mg.grad(model)(x)
    exact = (1 - np.tanh(np.tanh(x)) ** 2) * (1 - np.tanh(x) ** 2)  # (by hand: the plain call's branch)
    assert not np.allclose(g, exact)  # (what the warning is about: the other branch's derivative, 1)


def _type_kept_in_a_name(x):
    kind = type(x)  # (the exact type kept, then tested: the same other branch)
    unrelated = type(x[0])
    if unrelated is list:  # (a test against a type that is no NumPy type: quiet)
        return 0.0
    return np.sum(x ** 2) if kind is np.ndarray else np.sum(x)


def test_a_type_kept_in_a_name_then_tested_warns():
    x = np.array([0.5, 1.5])
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        g = mg.grad(_type_kept_in_a_name)(x)
    texts = [str(w.message) for w in record]
    assert len(texts) == 1 and texts[0].startswith("`kind is np.ndarray` tests the exact type")
    assert not np.allclose(g, 2 * x)  # (2x by hand, the plain call's branch: the warning is about this)


def _issubclass_of_the_type(x):
    return np.sum(x ** 2) if issubclass(type(x), np.ndarray) else np.sum(x)


def _type_name_kept(x):
    kind = type(x).__name__
    return np.sum(x ** 2) if kind == "ndarray" else np.sum(x)


_BY_TYPE = {np.ndarray: lambda v: np.sum(v ** 2)}


def _dispatch_on_the_type(x):
    return _BY_TYPE.get(type(x), np.sum)(x)


@pytest.mark.parametrize("fn, test", [(_issubclass_of_the_type, "issubclass(type(x), np.ndarray)"),
                                      (_type_name_kept, "kind == 'ndarray'"),
                                      (_dispatch_on_the_type, "_BY_TYPE.get(type(x), np.sum)")])
def test_issubclass_a_kept_type_name_and_a_table_keyed_by_the_type_warn(fn, test):
    # (regress106) each takes the other branch than a plain call, and warned of nothing
    x = np.array([0.7, 1.3, 0.4])
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        g = mg.grad(fn)(x)
    assert any(str(w.message).startswith(f"`{test}` tests the exact type") for w in record), [
        str(w.message) for w in record]
    assert not np.allclose(g, 2 * x)  # (2x by hand: the plain call's branch; the warning is about this)
