"""(b) One large-array function: ``sum(tanh(A @ x + b)**2 + 0.1*sin(x))``, A 1000x1000 float64.

The gradient time is reported as a multiple of the plain NumPy primal
time, beside a hand-written NumPy adjoint (value and gradient in one
pass), which is what an AD tool should approach on large arrays, and the
fixed cost of one call (the function at n = 10) with warm caches and after
16 MB were streamed through them, as the matvec does.
"""
from __future__ import annotations

import statistics
import time

import numpy as np

from . import harness
from .report import (
    PEER_COLUMNS,
    Section,
    Table,
    Target,
    micro,
    milli,
    ratio,
    summary_row,
)

N = 1000


def objective(A, x, b, tanh, sin, total):
    return total(tanh(A @ x + b) ** 2 + 0.1 * sin(x))


def numpy_fn(A, x, b):
    return objective(A, x, b, np.tanh, np.sin, np.sum)


def adjoint(A, x, b, wrt_all):
    """The hand-written reverse pass: value, then the cotangents of z = A @ x + b and the inputs."""
    t = np.tanh(A @ x + b)
    _value = np.sum(t * t + 0.1 * np.sin(x))  # computed (as mg.grad does); the rows compare gradients only
    zbar = 2.0 * t * (1.0 - t * t)
    xbar = A.T @ zbar + 0.1 * np.cos(x)
    if not wrt_all:
        return xbar
    return np.outer(zbar, x), xbar, zbar


def inputs(seed=0):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((N, N)) / np.sqrt(N), rng.standard_normal(N), rng.standard_normal(N)


def measure(peers, mode, args, argnums, label):
    kw = {}
    if peers.has("autograd"):
        anp = peers["autograd"].numpy
        kw["autograd_fn"] = lambda A, x, b: objective(A, x, b, anp.tanh, anp.sin, anp.sum)
    if peers.has("torch"):
        torch = peers["torch"]
        kw["torch_fn"] = lambda A, x, b: objective(A, x, b, torch.tanh, torch.sin, torch.sum)
    if peers.has("jax"):
        jnp = peers["jax"].numpy
        kw["jax_fn"] = kw["jax_jit_fn"] = lambda A, x, b: objective(A, x, b, jnp.tanh, jnp.sin, jnp.sum)
    cs, notes = harness.grad_contestants(peers, args, argnums, numpy_fn, **kw)
    wrt_all = not isinstance(argnums, int)
    cs["NumPy adjoint"] = harness.Contestant(lambda: adjoint(*args, wrt_all))
    fd = lambda: harness.fd_check(numpy_fn, args, argnums, cs["mutagrad"].run())
    return harness.timed_row(label, cs, notes, mode, fd)


SMALL = 10  # the same function at this size: the cost of a call is its fixed (Python) part
FLUSH_BYTES = 16 * 2**20  # streamed between calls for "cold": more than a core's L2, as A is


def _per_call(fn, flush, calls):
    """Median seconds of one call of ``fn``, each call after ``flush()`` (not timed)."""
    ts = []
    for _ in range(calls):
        flush()
        t = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t)
    return statistics.median(ts)


def cache_effect(peers, mode) -> Table:
    """The fixed cost of one gradient call (the function at n = 10), with the caches warm
    (calls in a row) and after streaming 16 MB through them, as the 1000x1000 matvec does
    twice per gradient: the interpreter's code and objects are then fetched from memory again."""
    args = tuple(a[:SMALL, :SMALL] if a.ndim == 2 else a[:SMALL] for a in inputs())
    cs = {"mutagrad": harness.mutagrad_grad(numpy_fn, args, 1),
          "NumPy adjoint": lambda: adjoint(*args, False)}
    if peers.has("torch"):
        torch = peers["torch"]
        cs["torch"] = harness.torch_grad(
            torch, lambda A, x, b: objective(A, x, b, torch.tanh, torch.sin, torch.sum), args, 1)
    big = np.ones(FLUSH_BYTES // 8)
    calls = 400 if mode.full else 100
    rows = []
    for name, fn in cs.items():
        fn()
        warm, cold = [], []
        for _ in range(mode.repeats):
            warm.append(_per_call(fn, lambda: None, calls))
            cold.append(_per_call(fn, big.sum, calls))
        w, c = statistics.median(warm), statistics.median(cold)
        rows.append([name, micro(w), micro(c), ratio(c / w)])
    return Table(["gradient at n = 10", "µs per call, caches warm", "µs per call after streaming 16 MB",
                  "cold / warm"], rows,
                 f"Fixed cost of one call: the same function at n = {SMALL}, calls in a row (warm) and each "
                 "after a 16 MB array is summed (cold: the matvec streams the 8 MB matrix through the caches "
                 "twice per gradient). Medians of single calls:")


def run(peers, mode) -> Section:
    args = inputs()
    rows = [measure(peers, mode, args, 1, "w.r.t. x"), measure(peers, mode, args, (0, 1, 2), "w.r.t. (A, x, b)")]
    names = ("NumPy adjoint", "mutagrad") + PEER_COLUMNS
    table = Table(
        ["gradient", "NumPy primal (ms)"] + list(names),
        [[r.label, milli(r.seconds("numpy"))] + [ratio(r.ratio(n)) for n in names] for r in rows],
        "Gradient time / NumPy primal time (median of per-round ratios):")
    cold = cache_effect(peers, mode)
    vs = Table(["gradient"] + [f"mutagrad / {n}" for n in ("NumPy adjoint",) + PEER_COLUMNS],
               [[r.label] + [ratio(r.versus("mutagrad", n)) for n in ("NumPy adjoint",) + PEER_COLUMNS]
                for r in rows],
               "mutagrad time / other time, same rounds:")
    got = rows[0].ratio("mutagrad")
    adj = rows[0].ratio("NumPy adjoint")
    vs_adj = rows[0].versus("mutagrad", "NumPy adjoint")
    targets = [Target("large-array gradient (w.r.t. x)", "≤ 1.4× NumPy primal",
                      f"{ratio(got)} (the hand-written NumPy adjoint: {ratio(adj)})",
                      None if got is None else got <= 1.4),
               Target("large-array gradient vs the hand-written NumPy adjoint", "match it (ratio near 1)",
                      ratio(vs_adj), None if vs_adj is None else vs_adj <= 1.2)]
    text = (f"`np.sum(np.tanh(A @ x + b)**2 + 0.1*np.sin(x))`, A {N}×{N}, x and b of length {N}, float64. "
            "Every library runs the same expression on its own arrays (`jax jit` is `jit(grad(f))`). "
            "The NumPy adjoint computes the value and the gradient by hand in one pass.")
    summary = [summary_row(f"large array, {r.label}", "gradient / NumPy primal", r, lambda r, n: ratio(r.ratio(n)))
               for r in rows]
    return Section("(b) Large arrays", text, [table, vs, cold], rows, targets, summary=summary)
