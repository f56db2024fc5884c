"""(c) Workloads written in place: a heat-equation stencil, RK4 on an in-place ODE right-hand side,
and an element-by-element recurrence.

Each library gets the code its users would write: NumPy (differentiated by
mutagrad as is) and torch write into preallocated buffers; JAX uses
``.at[].set`` (eager: a Python loop; ``jit``: ``lax.fori_loop``); autograd,
which has no in-place writes, builds new arrays. Where torch's autograd
rejects the in-place code, the row says so and times torch on the
out-of-place version instead.
"""
from __future__ import annotations

import types

import numpy as np

from . import harness
from .report import PEER_COLUMNS, Section, Table, Target, milli, power10, ratio, summary_row

STEPS = 100
C = 0.25  # heat: diffusion number (stable for C <= 1/2)
D, R, DT = 1.0, 1.0, 0.1  # Fisher-KPP u' = D u'' + R u (1 - u), RK4 time step (D*DT = 0.1 is stable)
A = 0.9  # recurrence out[i] = A*out[i-1] + x[i]


# --------------------------------------------------------------------------
# In-place code: NumPy (and mutagrad, which differentiates it unchanged) and torch


def heat_inplace(u0, xp):
    """Explicit heat equation, zero-flux ends, two buffers swapped each step."""
    u = xp.copy(u0)
    new = xp.empty_like(u)
    for _ in range(STEPS):
        new[1:-1] = u[1:-1] + C * (u[2:] - 2 * u[1:-1] + u[:-2])
        new[0] = new[1]
        new[-1] = new[-2]
        u, new = new, u
    return xp.sum(u * u)


def fisher_rhs(du, u):
    """du = D u'' + R u (1 - u), written into du; fixed ends."""
    du[1:-1] = D * (u[2:] - 2 * u[1:-1] + u[:-2]) + R * u[1:-1] * (1 - u[1:-1])
    du[0] = 0.0
    du[-1] = 0.0


def rk4_inplace(u0, xp):
    """Classic RK4 with preallocated stage buffers k1..k4 and tmp, u updated in place."""
    u = xp.copy(u0)
    k1, k2, k3, k4, tmp = (xp.empty_like(u) for _ in range(5))
    for _ in range(STEPS):
        fisher_rhs(k1, u)
        tmp[:] = u + (DT / 2) * k1
        fisher_rhs(k2, tmp)
        tmp[:] = u + (DT / 2) * k2
        fisher_rhs(k3, tmp)
        tmp[:] = u + DT * k3
        fisher_rhs(k4, tmp)
        u += (DT / 6) * (k1 + 2 * k2 + 2 * k3 + k4)
    return xp.sum(u * u)


def recurrence_inplace(x, xp):
    out = xp.zeros_like(x)
    out[0] = x[0]
    for i in range(1, x.shape[0]):
        out[i] = A * out[i - 1] + x[i]
    return xp.sum(out * out)


# --------------------------------------------------------------------------
# Out-of-place code: autograd, and torch where its autograd rejects the in-place code


def heat_functional(u0, xp):
    u = u0
    for _ in range(STEPS):
        inner = u[1:-1] + C * (u[2:] - 2 * u[1:-1] + u[:-2])
        u = xp.concatenate([inner[:1], inner, inner[-1:]])
    return xp.sum(u * u)


def fisher_rhs_functional(u, xp):
    inner = D * (u[2:] - 2 * u[1:-1] + u[:-2]) + R * u[1:-1] * (1 - u[1:-1])
    zero = xp.zeros(1)
    return xp.concatenate([zero, inner, zero])


def rk4_functional(u0, xp):
    u = u0
    for _ in range(STEPS):
        k1 = fisher_rhs_functional(u, xp)
        k2 = fisher_rhs_functional(u + (DT / 2) * k1, xp)
        k3 = fisher_rhs_functional(u + (DT / 2) * k2, xp)
        k4 = fisher_rhs_functional(u + DT * k3, xp)
        u = u + (DT / 6) * (k1 + 2 * k2 + 2 * k3 + k4)
    return xp.sum(u * u)


def recurrence_functional(x, xp):
    vals = [x[0]]
    for i in range(1, x.shape[0]):
        vals.append(A * vals[-1] + x[i])
    out = xp.stack(vals)
    return xp.sum(out * out)


# --------------------------------------------------------------------------
# JAX: .at[] updates; the loop is Python (eager) or lax.fori_loop (jit)


def python_loop(lo, hi, body, init):
    c = init
    for i in range(lo, hi):
        c = body(i, c)
    return c


def heat_jax(u0, jnp, loop):
    def step(_, u):
        new = u.at[1:-1].set(u[1:-1] + C * (u[2:] - 2 * u[1:-1] + u[:-2]))
        return new.at[0].set(new[1]).at[-1].set(new[-2])

    u = loop(0, STEPS, step, u0)
    return jnp.sum(u * u)


def rk4_jax(u0, jnp, loop):
    def rhs(u):
        du = jnp.zeros_like(u).at[1:-1].set(D * (u[2:] - 2 * u[1:-1] + u[:-2]) + R * u[1:-1] * (1 - u[1:-1]))
        return du.at[0].set(0.0).at[-1].set(0.0)

    def step(_, u):
        k1 = rhs(u)
        k2 = rhs(u + (DT / 2) * k1)
        k3 = rhs(u + (DT / 2) * k2)
        k4 = rhs(u + DT * k3)
        return u + (DT / 6) * (k1 + 2 * k2 + 2 * k3 + k4)

    u = loop(0, STEPS, step, u0)
    return jnp.sum(u * u)


def recurrence_jax(x, jnp, loop):
    out = jnp.zeros_like(x).at[0].set(x[0])
    out = loop(1, x.shape[0], lambda i, out: out.at[i].set(A * out[i - 1] + x[i]), out)
    return jnp.sum(out * out)


# --------------------------------------------------------------------------
# Workload table


NUMPY = types.SimpleNamespace(copy=np.copy, empty_like=np.empty_like, zeros_like=np.zeros_like, sum=np.sum)


def torch_namespace(torch):
    return types.SimpleNamespace(copy=torch.clone, empty_like=torch.empty_like, zeros_like=torch.zeros_like,
                                 sum=torch.sum, concatenate=torch.concatenate, zeros=torch.zeros,
                                 stack=torch.stack)


WORKLOADS = {
    # name: (in-place code, out-of-place code, JAX code, sizes in the quick run, sizes in the full run)
    "heat": (heat_inplace, heat_functional, heat_jax, (10**3, 10**4), (10**3, 10**4, 10**5)),
    "rk4": (rk4_inplace, rk4_functional, rk4_jax, (10**3, 10**4), (10**3, 10**4, 10**5)),
    "recurrence": (recurrence_inplace, recurrence_functional, recurrence_jax, (10**3, 10**4),
                   (10**3, 10**4, 10**5)),
}

TITLES = {
    "heat": f"Heat-equation stencil, {STEPS} steps: `new[1:-1] = u[1:-1] + c*(u[2:] - 2*u[1:-1] + u[:-2])`, "
            "boundary writes `new[0] = new[1]`, `new[-1] = new[-2]`, buffer swap; loss `sum(u*u)`; gradient "
            "w.r.t. the initial state.",
    "rk4": f"RK4, {STEPS} steps, on the Fisher–KPP system `du[1:-1] = D*(u[2:] - 2*u[1:-1] + u[:-2]) + "
           "R*u[1:-1]*(1 - u[1:-1])` written into preallocated stage buffers `k1..k4`, `tmp`, and "
           "`u += dt/6*(k1 + 2*k2 + 2*k3 + k4)`; loss `sum(u*u)`; gradient w.r.t. the initial state.",
    "recurrence": "Element loop `out[i] = a*out[i-1] + x[i]` for i < n; loss `sum(out*out)`; gradient w.r.t. "
                  "x. Its time per element should not grow with n.",
}


def skips(name, n, mode):
    """Contestants too slow to run at this size, with why (said in the row's notes).

    The times quoted were measured on the 2-core machine this suite was written on.
    """
    out = {}
    if name == "recurrence":
        if n > 10**3 or not mode.full:
            out["jax eager"] = ("JAX eager recompiles `.at[i]` for every Python-int index, then runs ~3 ms per "
                                "element (n = 10^3 takes ~30 s to warm up); measured at n = 10^3 in the full run only")
        if n > 10**3:
            out["autograd"] = ("autograd's gradient of `x[i]` is a dense n-array, so the loop is O(n^2) "
                               "(0.26 s at n = 10^3, 2.7 s at 3·10^3, 23 s at 10^4)")
        if n > 10**4:
            out["torch"] = "torch takes 17-120 s per call at n = 10^5 (0.4-0.9 s at 10^4): superlinear"
    return out


def inputs(name, n, seed=0):
    rng = np.random.default_rng(seed)
    if name == "rk4":
        return (rng.uniform(0.2, 0.8, n),)
    return (rng.standard_normal(n),)


def measure(peers, mode, name, n):
    inplace, functional, jax_code = WORKLOADS[name][:3]
    args = inputs(name, n)
    kw = {}
    if peers.has("autograd"):
        kw["autograd_fn"] = lambda x: functional(x, peers["autograd"].numpy)
    if peers.has("torch"):
        tns = torch_namespace(peers["torch"])
        kw["torch_fn"] = lambda x: inplace(x, tns)
        kw["torch_fallback"] = lambda x: functional(x, tns)
        kw["torch_fallback_note"] = "the in-place code"
    if peers.has("jax"):
        jax = peers["jax"]
        kw["jax_fn"] = lambda x: jax_code(x, jax.numpy, python_loop)
        kw["jax_jit_fn"] = lambda x: jax_code(x, jax.numpy, jax.lax.fori_loop)
    numpy_fn = lambda x: inplace(x, NUMPY)
    cs, notes = harness.grad_contestants(peers, args, 0, numpy_fn, skip=skips(name, n, mode), **kw)
    fd = lambda: harness.fd_check(numpy_fn, args, 0, cs["mutagrad"].run())
    return harness.timed_row(f"{name} n = {power10(n)}", cs, notes, mode, fd)


def run(peers, mode) -> Section:
    rows, tables = {}, []
    targets = []
    for name, spec in WORKLOADS.items():
        sizes = spec[4] if mode.full else spec[3]
        rows[name] = [(n, measure(peers, mode, name, n)) for n in sizes]
        tables.append(Table(
            ["n", "NumPy primal (ms)", "mutagrad"] + list(PEER_COLUMNS)
            + [f"mutagrad / {p}" for p in PEER_COLUMNS],
            [[power10(n), milli(r.seconds("numpy")), ratio(r.ratio("mutagrad"))]
             + [ratio(r.ratio(p)) for p in PEER_COLUMNS] + [ratio(r.versus("mutagrad", p)) for p in PEER_COLUMNS]
             for n, r in rows[name]],
            f"**{name}** — {TITLES[name]} Columns 3–7: gradient time / NumPy primal time; last four: "
            "mutagrad time / peer time (same rounds)."))
    for name in ("heat", "rk4"):
        n, r = rows[name][-1]
        got = r.ratio("mutagrad")
        targets.append(Target(f"{name} gradient (n = {power10(n)})", "≤ 3× NumPy primal", ratio(got),
                              None if got is None else got <= 3))
        vs = [row.versus("mutagrad", "jax eager") for _, row in rows[name]]
        targets.append(Target(f"{name} vs JAX eager `.at[]`", "faster at every n",
                              " / ".join(ratio(v) for v in vs),
                              None if None in vs else all(v < 1 for v in vs)))
    per_elem = [(n, r.seconds("mutagrad") / n) for n, r in rows["recurrence"] if r.seconds("mutagrad")]
    if len(per_elem) >= 2:
        growth = per_elem[-1][1] / per_elem[0][1]
        targets.append(Target("recurrence linear in n", "time/n flat (growth ≤ 1.5×)",
                              " → ".join(f"{t * 1e6:.3g} µs" for _, t in per_elem) + f" per element ({growth:.2f}×)",
                              growth <= 1.5))
    text = ("Each table row runs every library on the same input; ratios are gradient time over the plain "
            "NumPy primal time of the same in-place code.")
    summary = [summary_row(r.label, "gradient / NumPy primal", r, lambda r, p: ratio(r.ratio(p)))
               for name in WORKLOADS for n, r in rows[name] if n == 10**4]
    return Section("(c) In-place workloads", text, tables, [r for v in rows.values() for _, r in v], targets,
                   summary=summary)
