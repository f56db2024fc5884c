"""User-written array wrappers (NEP 18 classes, units, labeled arrays) among traced arrays.

Expected derivatives are written by hand and checked against central differences of the
plain function.
"""

import numpy as np
import pytest

import mutagrad as mg


def _central(f, x, h=1e-6):
    return np.array([(f(x + h * e) - f(x - h * e)) / (2 * h) for e in np.eye(x.size)])


def _unwrap(a, cls):
    if isinstance(a, cls):
        return a.m
    if isinstance(a, (list, tuple)):
        return type(a)(_unwrap(v, cls) for v in a)
    return a


class Lax:
    """A wrapper whose __array_function__ unwraps itself and calls NumPy again, whatever the types."""

    def __init__(self, m):
        self.m = m

    def __getitem__(self, i):
        return type(self)(self.m[i])

    def __array_function__(self, func, types, args, kwargs):
        r = func(*_unwrap(args, Lax), **{k: _unwrap(v, Lax) for k, v in kwargs.items()})
        return Lax(r) if isinstance(r, np.ndarray) or hasattr(r, "shape") else r


class Checked(Lax):
    """NEP 18's recommended check: only the types it knows (its own and np.ndarray)."""

    def __array_function__(self, func, types, args, kwargs):
        if not all(issubclass(t, (Checked, np.ndarray)) for t in types):
            return NotImplemented
        r = func(*_unwrap(args, Checked), **{k: _unwrap(v, Checked) for k, v in kwargs.items()})
        return Checked(r) if hasattr(r, "shape") else r


A = np.array([[1.0, 2.0], [3.0, 4.0]])
X = np.array([0.5, -1.5])

# (function of (wrapped A, x) returning a wrapper or an array, the same on plain arrays, gradient of
# sum(result ** 2) by hand)
CASES = {
    "concatenate": (lambda M, x: np.concatenate([x, M[0]]), lambda x: np.concatenate([x, A[0]]), lambda x: 2 * x),
    "stack": (lambda M, x: np.stack([x, M[1]]), lambda x: np.stack([x, A[1]]), lambda x: 2 * x),
    "where": (lambda M, x: np.where(np.array([True, False]), x, M[0]),
              lambda x: np.where(np.array([True, False]), x, A[0]), lambda x: np.array([2 * x[0], 0.0])),
    "dot(M, x)": (lambda M, x: np.dot(M, x), lambda x: A @ x, lambda x: 2 * A.T @ (A @ x)),
    "dot(x, M)": (lambda M, x: np.dot(x, M), lambda x: x @ A, lambda x: 2 * A @ (A.T @ x)),
    "tensordot": (lambda M, x: np.tensordot(x, M, 1), lambda x: x @ A, lambda x: 2 * A @ (A.T @ x)),
    "einsum": (lambda M, x: np.einsum("ij,j->i", M, x), lambda x: A @ x, lambda x: 2 * A.T @ (A @ x)),
    "solve": (lambda M, x: np.linalg.solve(M, x), lambda x: np.linalg.solve(A, x),
              lambda x: 2 * np.linalg.solve(A.T, np.linalg.solve(A, x))),
}


@pytest.mark.parametrize("cls", [Lax, Checked])
@pytest.mark.parametrize("name", list(CASES))
def test_a_wrapper_with_its_own_array_function_computes_on_the_traced_array(cls, name):
    # (the rule ran on the wrapper's plain contents: the right value, a zero derivative, silently;
    # the Checked class declined mutagrad's type, and NumPy's dispatch fell to an elementwise product)
    op, plain, grad = CASES[name]

    def f(x):
        r = op(cls(A), x)
        return np.sum((r.m if isinstance(r, cls) else r) ** 2)

    g_plain = lambda x: np.sum(plain(x) ** 2)
    np.testing.assert_allclose(_central(g_plain, X), grad(X), rtol=1e-7, atol=1e-8)
    v, g = mg.value_and_grad(f)(X.copy())
    assert v == f(X.copy())
    np.testing.assert_allclose(g, grad(X), rtol=1e-14, atol=1e-15)
    t = np.array([0.3, -0.7])
    _, tv = mg.jvp(f, (X.copy(),), (t,))
    np.testing.assert_allclose(tv, grad(X) @ t, rtol=1e-13)


def test_a_wrapper_that_declines_a_traced_array_gets_numpys_error_with_a_note():
    from numpy.lib import mixins

    class Strict(mixins.NDArrayOperatorsMixin):  # (checks each operand's exact type)
        def __init__(self, m):
            self.m = m

        def __array_ufunc__(self, ufunc, method, *inputs, **kw):
            if any(type(i) not in (Strict, np.ndarray, float, int) for i in inputs):
                return NotImplemented
            return Strict(getattr(ufunc, method)(*[i.m if type(i) is Strict else i for i in inputs], **kw))

    f = lambda x: np.sum((Strict(np.ones(2)) + x).m)
    assert f(np.ones(2)) == 4.0  # (a plain call works)
    with pytest.raises(TypeError, match="returned NotImplemented") as info:
        mg.grad(f)(np.ones(2))
    assert any("isinstance" in n and "ArrayTracer" in n for n in info.value.__notes__)


def test_a_masked_array_argument_is_refused_with_the_mask_rewrite():
    m = np.ma.array([1.0, 2.0, 3.0, 4.0], mask=[0, 1, 0, 0])
    with pytest.raises(TypeError, match=r"MaskedArray.*np.asarray\(...\) would drop the mask.*where=~m") as info:
        mg.grad(lambda x, m: np.sum(x * m))(np.ones(4), m)
    assert "Pass np.asarray(x)" not in str(info.value)  # (that advice changed the gradient: [1, 2, 3, 4])


def test_an_error_in_an_installed_packages_code_names_the_users_call_too(installed_package):
    wrapperlib = installed_package("wrapperlib", (
        "import numpy as np\n"
        "def labeled(x):\n"
        "    return np.asarray(x)  # the library converts\n"))

    def f(x):
        d = wrapperlib.labeled(x * 2.0)
        return np.sum(d)

    # (named at the user's line, the one to change, after the package's own)
    with pytest.raises(mg.DifferentiationError, match=r"\(in wrapperlib at \S+wrapperlib/__init__.py:3: `return "
                       r"np.asarray\(x\).*`\) at \S+test_wrappers.py:\d+: `d = wrapperlib.labeled\(x \* 2.0\)`: "):
        mg.grad(f)(X.copy())


class Passing(np.ndarray):
    """An ndarray subclass whose __array_function__ hands the call on to ndarray's (astropy's Quantity does)."""

    def __array_function__(self, func, types, args, kwargs):
        return super().__array_function__(func, types, args, kwargs)


def test_a_subclass_handing_on_to_ndarray_is_a_constant_as_before():
    # (the regress14 tester: it was taken for a wrapper and asked to compute with the traced array,
    # which NumPy's own code then converted: refused)
    c = np.array([1.0, 2.0, 3.0]).view(Passing)
    x = np.array([0.5, -1.2, 2.0])
    f = lambda x: np.interp(1.5, c, x * x)  # (halfway between x0^2 and x1^2)
    g = lambda x: np.average(x * x, weights=c)
    for fn, want in ((f, [x[0], x[1], 0.0]), (g, 2 * x * np.array([1.0, 2.0, 3.0]) / 6)):  # by hand
        np.testing.assert_allclose(_central(lambda v, fn=fn: float(fn(v)), x), want, rtol=1e-7, atol=1e-9)
        np.testing.assert_allclose(mg.grad(fn)(x.copy()), want, rtol=1e-15, atol=1e-16)


def test_a_wrapper_declining_every_call_gets_numpys_error_as_a_plain_call():
    class Declines:
        def __array_function__(self, func, types, args, kwargs):
            return NotImplemented

    f = lambda x: np.sum(np.concatenate([Declines(), x]))
    with pytest.raises(TypeError, match="no implementation found"):
        f(np.ones(2))
    with pytest.raises(TypeError, match="no implementation found") as info:
        mg.grad(f)(np.ones(2))
    assert not isinstance(info.value, mg.DifferentiationError)  # (a plain call raises it too)


def test_a_view_as_a_users_subclass_names_that_subclass_not_np_matrix():
    with pytest.raises(mg.NoRuleError, match=r"x.view\(.*Passing\).*its own operators") as info:
        mg.grad(lambda x: np.sum(x.view(Passing)))(np.ones(2))
    assert "np.matrix" not in str(info.value)
