"""Fit the four Lotka-Volterra parameters to noisy predator-prey counts.

The right-hand side writes into its output, ``f(du, u, p)``, as ODE codes
(DifferentialEquations.jl, SUNDIALS, hand-written Fortran) do, and the
classical Runge-Kutta integrator reuses preallocated stage buffers every
step. mutagrad differentiates the whole simulation with respect to ``p``;
SciPy's L-BFGS-B fits the parameters with that gradient.

Run:  python examples/lotka_volterra_fit.py
The last line is a verdict on the gradient against central finite
differences; the exit code is 1 if they disagree.
"""
import sys

import numpy as np
from scipy.optimize import minimize

import mutagrad as mg
import mutagrad.numpy as mnp
from mutagrad.testing import numerical_grad   # central differences on plain NumPy

DT = 0.1
NSTEPS = 100                    # t in [0, 10]
EVERY = 5                       # observe every 5th step (t = 0.5, 1.0, ...)
U0 = np.array([1.0, 1.0])       # initial prey and predators


def lotka_volterra(du, u, p):
    """In-place right-hand side: du = f(u; alpha, beta, delta, gamma)."""
    alpha, beta, delta, gamma = p
    du[0] = alpha * u[0] - beta * u[0] * u[1]
    du[1] = delta * u[0] * u[1] - gamma * u[1]


def simulate(p, u0=U0, dt=DT, nsteps=NSTEPS, every=EVERY):
    """RK4 with preallocated stage buffers; returns the states every ``every`` steps."""
    u = mnp.array(u0)                   # mnp buffers can hold traced values
    k1, k2, k3, k4, tmp = (mnp.zeros(u.shape) for _ in range(5))
    out = mnp.zeros((nsteps // every, u.size))
    for n in range(nsteps):
        lotka_volterra(k1, u, p)
        tmp[:] = u + 0.5 * dt * k1
        lotka_volterra(k2, tmp, p)
        tmp[:] = u + 0.5 * dt * k2
        lotka_volterra(k3, tmp, p)
        tmp[:] = u + dt * k3
        lotka_volterra(k4, tmp, p)
        u += dt / 6.0 * (k1 + 2.0 * k2 + 2.0 * k3 + k4)
        if (n + 1) % every == 0:
            out[(n + 1) // every - 1] = u
    return out


def loss(p, data):
    return 0.5 * np.sum((simulate(p) - data) ** 2)


def main():
    rng = np.random.default_rng(1)
    p_true = np.array([1.5, 1.0, 1.0, 3.0])         # alpha, beta, delta, gamma
    clean = simulate(p_true)
    data = clean * (1.0 + 0.05 * rng.standard_normal(clean.shape))   # 5% multiplicative noise

    p0 = np.array([1.0, 0.7, 1.3, 2.5])
    value_and_grad = mg.value_and_grad(loss)
    res = minimize(lambda p: value_and_grad(p, data), p0, jac=True, method="L-BFGS-B",
                   bounds=[(0.1, 10.0)] * 4)
    names = ("alpha", "beta", "delta", "gamma")
    print(f"L-BFGS-B: {res.nit} iterations, {res.nfev} evaluations, final loss {res.fun:.4f}")
    for name, t, s, f in zip(names, p_true, p0, res.x):
        print(f"  {name:5s}  true {t:.3f}  start {s:.3f}  fitted {f:.3f}")

    # The verdict: mutagrad's gradient against central finite differences of the
    # same plain-NumPy simulation, at the starting guess, parameter by parameter.
    g = mg.grad(loss)(p0, data)
    (fd,) = numerical_grad(loss, (p0, data), argnums=(0,))
    ok = np.allclose(g, fd, rtol=1e-6, atol=1e-8)
    print("dloss/dp at the start:  " + "  ".join(f"{n} {a:+.6f} (fd {b:+.6f})" for n, a, b in zip(names, g, fd)))
    print("gradient vs central finite differences: " + ("agree" if ok else "MISMATCH"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
