"""Differentiate a parametric integral computed by Gauss-Legendre quadrature.

    I(theta, b) = integral from 0 to b of log(1 + theta x^2) dx

The integrand writes its values into a preallocated buffer (``out[:] = ...``),
as vectorised quadrature codes do to avoid allocating per call. mutagrad
differentiates through the buffer, through the nodes mapped onto [0, b]
(they depend on b), and through the weighted sum. The analytic derivatives:

    dI/dtheta = b / theta - arctan(b sqrt(theta)) / theta^(3/2)
    dI/db     = log(1 + theta b^2)                    (Leibniz's rule)

Run:  python examples/quadrature.py
The last line is the verdict (analytic derivatives and central finite
differences against mutagrad); the exit code is 1 on a mismatch.
"""
import sys

import numpy as np

import mutagrad as mg
import mutagrad.numpy as mnp

NODES, WEIGHTS = np.polynomial.legendre.leggauss(24)   # on [-1, 1]; constants


def integrand(out, x, theta):
    """Write log(1 + theta x^2) into ``out`` (no allocation for the result)."""
    out[:] = np.log1p(theta * x**2)


def integral(theta, b):
    """Gauss-Legendre rule on [0, b]."""
    x = 0.5 * b * (NODES + 1.0)         # nodes mapped onto [0, b]
    values = mnp.empty(NODES.size)      # preallocated; mnp buffers can hold traced values
    integrand(values, x, theta)
    return 0.5 * b * np.sum(WEIGHTS * values)


def exact(theta, b):
    return b * np.log1p(theta * b**2) - 2 * b + 2 * np.arctan(b * np.sqrt(theta)) / np.sqrt(theta)


def exact_derivatives(theta, b):
    d_theta = b / theta - np.arctan(b * np.sqrt(theta)) / theta**1.5
    d_b = np.log1p(theta * b**2)
    return d_theta, d_b


def main():
    theta, b = 2.0, 1.5
    value, (g_theta, g_b) = mg.value_and_grad(integral, argnums=(0, 1))(theta, b)
    e_theta, e_b = exact_derivatives(theta, b)
    eps = 1e-6
    fd_theta = (integral(theta + eps, b) - integral(theta - eps, b)) / (2 * eps)
    fd_b = (integral(theta, b + eps) - integral(theta, b - eps)) / (2 * eps)

    print(f"I(theta={theta}, b={b}) = {value:.12f}   (closed form {exact(theta, b):.12f})")
    print(f"  dI/dtheta: mutagrad {g_theta:.12f}  analytic {e_theta:.12f}  finite differences {fd_theta:.9f}")
    print(f"  dI/db:     mutagrad {g_b:.12f}  analytic {e_b:.12f}  finite differences {fd_b:.9f}")
    ok = (np.allclose([g_theta, g_b], [e_theta, e_b], rtol=1e-10, atol=0)
          and np.allclose([g_theta, g_b], [fd_theta, fd_b], rtol=1e-6, atol=0))
    print("derivatives of the quadrature agree with the analytic derivatives and finite differences"
          if ok else "MISMATCH between mutagrad, the analytic derivatives and finite differences")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
