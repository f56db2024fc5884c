"""Nested differentiation: level tags keep perturbations apart; grad of
grad, jvp of grad and grad of jvp work, on mutating functions too."""
import numpy as np
import pytest

import mutagrad as mg
import mutagrad.numpy as mnp
from mutagrad.testing import check_grads, numerical_grad


def test_no_perturbation_confusion():
    assert mg.grad(lambda x: x * mg.grad(lambda y: x + y)(1.0))(2.0) == 1.0
    # the classic Siskind-Pearlmutter example with forward mode inside reverse
    inner = lambda x: mg.jvp(lambda y: x * y, (1.0,), (1.0,))[1]  # noqa: E731  d/dy (x*y) = x
    assert mg.grad(lambda x: x * inner(x))(3.0) == 6.0


def test_grad_of_grad():
    f = lambda x: np.sin(x) * x ** 2  # noqa: E731
    d2 = mg.grad(mg.grad(f))(0.7)
    x = 0.7
    expected = -np.sin(x) * x ** 2 + 4 * x * np.cos(x) + 2 * np.sin(x)
    assert abs(d2 - expected) < 1e-12


def mutating(x):
    buf = mnp.zeros(x.shape)
    buf[:] = x
    buf[1:] = buf[:-1] * x[1:]
    y = np.exp(buf)
    buf.fill(0.0)
    x[0] = 3.0 * x[0] ** 2
    return np.sum(y * x) + np.sum(buf)


X = np.array([0.2, -0.4, 0.6])


@pytest.mark.parametrize("order_modes", [("fwd",), ("rev",), ("fwd", "rev")])
def test_second_order_on_mutating_function(order_modes):
    check_grads(mutating, X, modes=order_modes, order=2)


def test_hessian_matches_finite_differences_of_gradient():
    H = mg.hessian(mutating)(X.copy())
    g = mg.grad(mutating)
    fd = np.stack([numerical_grad(lambda x: g(x)[k], (X,), (0,))[0] for k in range(3)])
    np.testing.assert_allclose(H, fd, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(H, H.T, rtol=1e-10, atol=1e-12)


def test_rev_over_rev_hessian_agrees_with_fwd_over_rev():
    H = mg.hessian(mutating)(X.copy())
    Hr = mg.jacobian(mg.grad(mutating))(X.copy())
    np.testing.assert_allclose(Hr, H, rtol=1e-10, atol=1e-12)


def test_grad_of_jvp():
    def directional(x):
        return mg.jvp(mutating, (x,), (np.array([1.0, 0.5, -1.0]),))[1]

    g = mg.grad(directional)(X.copy())
    H = mg.hessian(mutating)(X.copy())
    np.testing.assert_allclose(g, H @ np.array([1.0, 0.5, -1.0]), rtol=1e-10)


def test_outer_value_written_into_inner_buffer():
    def outer(x):
        def inner(y):
            b = mnp.zeros(2)
            b[0] = x * y
            b[1] = x ** 2
            return np.sum(b * y)

        return mg.grad(inner)(2.0)  # d/dy = 2xy + x^2

    assert abs(mg.grad(outer)(1.5) - (2 * 2.0 + 2 * 1.5)) < 1e-12


def test_inner_value_written_into_outer_buffer_raises():
    def outer(x):
        buf = mnp.zeros(1)

        def inner(y):
            buf[0] = y * x
            return y * 2.0

        return mg.grad(inner)(1.0) + buf[0]

    with pytest.raises(mg.MutationError, match="inner differentiation"):
        mg.grad(outer)(1.0)


def test_third_order():
    f = lambda x: np.exp(2 * x)  # noqa: E731
    assert abs(mg.grad(mg.grad(mg.grad(f)))(0.3) - 8 * np.exp(0.6)) < 1e-10


def test_hessian_of_a_mutating_function_inside_grad():
    """Forward-mode jacobians restore the arguments between passes; inside an
    outer differentiation that restoring must be traced too (it was not, and
    the outer gradient was silently wrong)."""
    def f(x):
        y = np.sum(x ** 3) + x[0] ** 2 * x[1] + x[0] * x[2] ** 2
        x[0] = x[1] * 5.0  # the argument is overwritten: later passes must start from its value
        return y + np.sum(np.sin(x))

    W = np.arange(1.0, 10.0).reshape(3, 3)

    def outer(x):
        return np.sum(mg.hessian(f)(x) * W)

    x = np.array([0.3, -0.5, 0.8])
    g = mg.grad(outer)(x.copy())
    eps = 1e-5
    fd = np.array([(outer(x + eps * e) - outer(x - eps * e)) / (2 * eps) for e in np.eye(3)])
    np.testing.assert_allclose(g, fd, rtol=1e-6, atol=1e-6)


def test_grad_through_jvp_with_respect_to_a_complex_tangent():
    # the tangent is traced by the outer grad; the primal is complex (was a WriteToPlainArrayError)
    z = np.array([1 + 2j, 0.5 - 1j])

    def h(v):
        return np.sum(np.real(mg.jvp(np.sin, (z,), (v,))[1]))

    v = np.array([1 + 0j, 0.5 + 0.5j])
    np.testing.assert_allclose(mg.grad(h)(v), np.cos(z), rtol=1e-14)  # d Re(cos(z) v) / dv, as JAX
    check_grads(h, v)
