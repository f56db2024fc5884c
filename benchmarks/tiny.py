"""(a) Per-operation overhead: ``y = y*1.0001 + sin(y)`` 1000 times on a 0-d or shape-(1,) array.

Three NumPy operations per iteration (multiply, sin, add); the final sum is
not counted. Forward plus backward time divided by 3000 is the cost per
operation. y converges to pi within a few iterations, where each factor
1.0001 + cos(y) of the derivative is 1e-4, so the derivative of the full loop
underflows to zero; the correctness check runs the same code for 3 iterations.
"""
from __future__ import annotations

import numpy as np

from . import harness
from .report import PEER_COLUMNS, Section, Table, Target, micro, ratio, summary_row

ITERATIONS = 1000
CHECK_ITERATIONS = 3
OPS_PER_ITERATION = 3


def loop(y, n, sin, total):
    for _ in range(n):
        y = y * 1.0001 + sin(y)
    return total(y)


def numpy_fn(n):
    return lambda y: loop(y, n, np.sin, np.sum)


def contestants(peers, y0, n):
    kw = {}
    if peers.has("autograd"):
        anp = peers["autograd"].numpy
        kw["autograd_fn"] = lambda y: loop(y, n, anp.sin, anp.sum)
    if peers.has("torch"):
        torch = peers["torch"]
        kw["torch_fn"] = lambda y: loop(y, n, torch.sin, torch.sum)
    if peers.has("jax"):
        jax = peers["jax"]
        jnp = jax.numpy
        kw["jax_fn"] = lambda y: loop(y, n, jnp.sin, jnp.sum)
        kw["jax_jit_fn"] = lambda y: jnp.sum(jax.lax.fori_loop(0, n, lambda i, y: y * 1.0001 + jnp.sin(y), y))
    return harness.grad_contestants(peers, (y0,), 0, numpy_fn(n), **kw)


def measure(peers, mode, y0, label):
    timed, notes = contestants(peers, y0, ITERATIONS)
    short, _ = contestants(peers, y0, CHECK_ITERATIONS)
    for name, c in timed.items():
        c.check = short[name].run
    fd = lambda: harness.fd_check(numpy_fn(CHECK_ITERATIONS), (y0,), 0, short["mutagrad"].run())
    return harness.timed_row(label, timed, notes, mode, fd)


def run(peers, mode) -> Section:
    n_ops = ITERATIONS * OPS_PER_ITERATION
    rows = [measure(peers, mode, np.array(0.3), "0-d"), measure(peers, mode, np.array([0.3]), "shape (1,)")]
    names = ("mutagrad",) + PEER_COLUMNS
    us = lambda r, name: micro(None if r.seconds(name) is None else r.seconds(name) / n_ops)
    per_op = Table(["array"] + [f"{n} fwd+bwd" if n != "numpy" else "NumPy forward" for n in ("numpy",) + names],
                   [[r.label] + [us(r, n) for n in ("numpy",) + names] for r in rows],
                   "µs per operation (median):")
    vs = Table(
        ["array", "mutagrad / NumPy forward"] + [f"mutagrad / {n}" for n in PEER_COLUMNS],
        [[r.label, ratio(r.ratio("mutagrad"))] + [ratio(r.versus("mutagrad", n)) for n in PEER_COLUMNS]
         for r in rows],
        "Time ratios measured in the same rounds (below 1: mutagrad is faster):")
    worst = max((r.seconds("mutagrad") or float("nan")) / n_ops for r in rows)
    torch_ratios = [r.versus("mutagrad", "torch") for r in rows]
    targets = [
        Target("tiny-op fwd+bwd", "≤ 8 µs/op", f"{micro(worst)} µs/op (worst shape)", bool(worst <= 8e-6)),
        Target("tiny-op vs torch eager", "faster (ratio < 1)",
               " / ".join(ratio(x) for x in torch_ratios),
               None if None in torch_ratios else all(x < 1 for x in torch_ratios)),
    ]
    text = (f"`y = y*1.0001 + np.sin(y)` for {ITERATIONS} iterations, then `sum(y)`; gradient w.r.t. the "
            f"initial `y`. Cost per operation = (forward + backward time) / {n_ops}. mutagrad "
            "differentiates the plain NumPy function as is; torch and JAX eager run the same loop on their "
            "arrays; `jax jit` is `jit(grad(f))` with the loop as `lax.fori_loop` (compiled once, "
            "outside the timing), shown as the compiled floor.")
    summary = [summary_row(f"tiny op, {r.label}", "µs/op, forward+backward", r, us) for r in rows]
    return Section("(a) Per-operation overhead", text, [per_op, vs], rows, targets, summary=summary)
