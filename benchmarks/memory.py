"""(d) Memory of mutation: the tape against the bytes the primal overwrites.

Peaks are measured with tracemalloc (NumPy reports its buffers to it; torch
and JAX allocate outside it, so only mutagrad, autograd and NumPy are
measured), each in a separate call, never while timing.

Part 1 uses the in-place workloads of (c). Part 2 is issue 3's cost
benchmark: n single-element writes into an M-element array, after a
nonlinear read of the whole array (so every write must save the element it
overwrites). The same function with n = 0 gives the unavoidable arrays (the
copy, its cotangent, the gradient); what grows beyond it, per write, must
not depend on M, and the time per write must not depend on n.
"""
from __future__ import annotations

import numpy as np

from mutagrad.explain import explain

from . import harness, inplace
from .report import Section, Table, Target, micro, milli, nbytes, power10, ratio

ITEM = 8  # float64

# Elements the primal overwrites, per workload of size n (each write counted once per element).
OVERWRITTEN = {
    "heat": lambda n: inplace.STEPS * n,  # new[1:-1], new[0], new[-1]
    "rk4": lambda n: inplace.STEPS * 8 * n,  # k1..k4, tmp three times, u += ...
    "recurrence": lambda n: n,  # out[0], out[i]
}
# Elements any reverse mode must keep that no write overwrites: the operands of the nonlinear
# products (rk4: R*u*(1-u), two operands of n-2 per stage, four stages per step).
KEPT = {"heat": lambda n: 0, "rk4": lambda n: inplace.STEPS * 8 * n, "recurrence": lambda n: 0}

MUTATION_SIZES = {"heat": 10**4, "rk4": 10**4, "recurrence": 10**4}


def saved_bytes(f, args, argnums=0):
    """Bytes the writes of one recorded call saved to rewind them (from mg.explain's tape report)."""
    return explain(f, *args, argnums=argnums, show=False).bytes_saved


def workload_memory(peers, name, n):
    inplace_fn, functional = inplace.WORKLOADS[name][:2]
    (x,) = inplace.inputs(name, n)
    numpy_fn = lambda u: inplace_fn(u, inplace.NUMPY)
    primal = harness.peak_bytes(lambda: numpy_fn(x))
    mg_peak = harness.peak_bytes(harness.mutagrad_grad(numpy_fn, (x,)))
    saved = saved_bytes(numpy_fn, (x,))
    ag_peak = None
    if peers.has("autograd") and not inplace.skips(name, n, harness.FULL).get("autograd"):
        ag = peers["autograd"].grad(lambda u: functional(u, peers["autograd"].numpy))
        ag_peak = harness.peak_bytes(lambda: ag(x))
    over = OVERWRITTEN[name](n) * ITEM
    allowance = 1.2 * over + 2 * primal + KEPT[name](n) * ITEM + n * ITEM
    return [name, power10(n), nbytes(over), nbytes(saved), nbytes(primal), nbytes(mg_peak), nbytes(ag_peak),
            nbytes(allowance), ratio(mg_peak / allowance)], mg_peak <= allowance, saved / over


def scattered_writes(big0, v, idx):
    big = big0.copy()
    s = np.sum(np.sin(big))  # a pullback reads all of big: every write below must save what it overwrites
    for i in range(idx.shape[0]):
        big[idx[i]] = v[i % v.shape[0]]
    return s + np.sum(big * big)


def writes_case(m, n, seed=0):
    rng = np.random.default_rng(seed)
    return rng.standard_normal(m), rng.standard_normal(100), rng.integers(0, m, n)


def scattered(peers, mode, m, ns):
    """Time (interleaved over n) and peak memory of mg.grad for n writes into an m-array."""
    cases = {n: writes_case(m, n) for n in (0,) + tuple(ns)}
    thunks = {n: harness.mutagrad_grad(scattered_writes, cases[n], (0, 1)) for n in cases}
    err = harness.fd_check(scattered_writes, cases[ns[0]], (0, 1), thunks[ns[0]]())
    ok = err <= harness.FD_TOL
    timings = harness.interleaved({f"n={n}": t for n, t in thunks.items()}, "n=0", mode)
    peaks = {n: harness.peak_bytes(t) for n, t in thunks.items()}
    rows = []
    prev_n, prev_t = 0, timings["n=0"].median
    for n in ns:
        t, t0 = timings[f"n={n}"].median, timings["n=0"].median
        extra = peaks[n] - peaks[0]
        # the marginal cost: writes added from the previous n, over the time they added (at small n and
        # large M the writes are a few % of a call and (t - t0) / n is mostly the noise of two big times)
        marginal = (t - prev_t) / (n - prev_n)
        prev_n, prev_t = n, t
        rows.append({"m": m, "n": n, "t": t, "per_write": (t - t0) / n, "marginal": marginal,
                     "peak": peaks[n], "base": peaks[0],
                     "extra_per_write": extra / n, "over": n * ITEM,
                     "saved_per_write": saved_bytes(scattered_writes, cases[n], (0, 1)) / n})
    check = harness.Row(f"writes M = {power10(m)}", {}, [],
                        [("mutagrad vs finite differences", err, harness.FD_TOL, ok)])
    return rows, check


def fancy_writes(big0, v, idx):
    """Integer-array writes as finite-element assembly makes them: ``big[d] += v`` with a
    pair of targets (repeated in every fourth write) and ``np.add.at``."""
    big = big0.copy()
    s = np.sum(np.sin(big))
    for i in range(idx.shape[0]):
        d = idx[i]
        if i % 2:
            np.add.at(big, d, v[i % v.shape[0]])
        else:
            big[d] += v[i % v.shape[0]]
    return s + np.sum(big * big)


def fancy_case(m, n, seed=0):
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, m, (n, 2))
    idx[::4, 1] = idx[::4, 0]  # (a repeated target: np.add.at adds twice, += once)
    return rng.standard_normal(m), rng.standard_normal(100), idx


def fancy(peers, mode, ms, n):
    """Time per integer-array write (against n = 0) for each array size m: flat over m."""
    rows, checks = [], []
    for m in ms:
        cases = {k: fancy_case(m, k) for k in (0, n)}
        thunks = {k: harness.mutagrad_grad(fancy_writes, cases[k], (0, 1)) for k in cases}
        err = harness.fd_check(fancy_writes, fancy_case(min(ms), 20), (0, 1),
                               harness.mutagrad_grad(fancy_writes, fancy_case(min(ms), 20), (0, 1))())
        checks.append(harness.Row(f"integer-array writes M = {power10(m)}", {}, [],
                                  [("mutagrad vs finite differences", err, harness.FD_TOL, err <= harness.FD_TOL)]))
        timings = harness.interleaved({f"n={k}": t for k, t in thunks.items()}, "n=0", mode)
        t, t0 = timings[f"n={n}"].median, timings["n=0"].median
        rows.append({"m": m, "n": n, "t": t, "t0": t0, "per_write": (t - t0) / n})
    return rows, checks


def run(peers, mode) -> Section:
    mut_rows, fits, saved_ratios = [], [], []
    for name, n in MUTATION_SIZES.items():
        row, fit, sv = workload_memory(peers, name, n)
        mut_rows.append(row)
        fits.append(fit)
        saved_ratios.append(sv)
    t1 = Table(["workload", "n", "bytes overwritten", "saved by the writes", "NumPy primal peak",
                "mutagrad gradient peak", "autograd gradient peak", "allowance", "mutagrad / allowance"], mut_rows,
               "Peak memory of one gradient call (tracemalloc). Allowance = 1.2 × bytes overwritten + "
               "2 × primal peak (the primal's arrays and their cotangents) + values any reverse mode keeps "
               "that no write overwrites (RK4: the operands of `R*u*(1-u)`, 2(n-2) per stage) + the gradient:")

    ms = (10**5, 10**6, 10**7) if mode.full else (10**6,)
    ns = (10**3, 10**4, 10**5)
    w_rows, checks = [], []
    for m in ms:
        rows, check = scattered(peers, mode, m, ns)
        w_rows += rows
        checks.append(check)
    t2 = Table(["array size M", "writes n", "gradient time (ms)", "time per write (µs)",
                "marginal time per write (µs)", "peak memory", "peak at n = 0", "saved bytes per write",
                "extra bytes per write", "extra / bytes overwritten"],
               [[power10(r["m"]), power10(r["n"]), milli(r["t"]), _noisy(r["per_write"]), _noisy(r["marginal"]),
                 nbytes(r["peak"]),
                 nbytes(r["base"]), f"{r['saved_per_write']:.0f}", f"{r['extra_per_write']:.0f}",
                 ratio(r["extra_per_write"] * r["n"] / r["over"])] for r in w_rows],
               "n single-element writes `big[idx[i]] = v[i % 100]` into an M-element array inside `mg.grad` "
               "(time per write = (t(n) − t(0)) / n; marginal = (t(n) − t(previous n)) / (n − previous n), the "
               "cost of the writes added, which the linearity target uses for n ≥ 10^4 (below that, at M = 10^7, "
               "the writes are ~3% of a call and within its noise: a difference below 0 is shown as noise); "
               "extra = peak(n) − peak(0)):")
    f_ms = (10**4, 10**6, 10**7) if mode.full else (10**4, 10**6)
    f_rows, f_checks = fancy(peers, mode, f_ms, 1000)
    checks += f_checks
    t3 = Table(["array size M", "writes n", "gradient time (ms)", "at n = 0 (ms)", "time per write (µs)"],
               [[power10(r["m"]), power10(r["n"]), milli(r["t"]), milli(r["t0"]), micro(r["per_write"])]
                for r in f_rows],
               "n integer-array writes into an M-element array inside `mg.grad`, as finite-element assembly "
               "makes them: `big[d] += v[i]` and `np.add.at(big, d, v[i])` in turn, `d` two positions "
               "(repeated in every fourth write), after a nonlinear read of the whole array (time per write "
               "= (t(n) − t(0)) / n):")
    f_per = [r["per_write"] for r in f_rows]
    per_write = [r["marginal"] for r in w_rows if r["n"] > ns[0]]
    extra = [r["extra_per_write"] for r in w_rows if r["n"] == ns[-1]]
    over_ratio = max(r["extra_per_write"] / ITEM for r in w_rows)
    targets = [
        Target("single-element writes: time linear in n", "time per write flat over n and M",
               f"{micro(min(per_write))}–{micro(max(per_write))} µs per added write (n ≥ 10^4)",
               max(per_write) <= 1.5 * min(per_write)),
        Target("single-element writes: memory independent of M", "extra bytes per write flat over M",
               " / ".join(f"{e:.0f}" for e in extra) + f" B per write at n = {power10(ns[-1])}",
               max(extra) <= 1.5 * min(extra)),
        Target("integer-array writes: time independent of M", "time per write flat over M",
               " / ".join(micro(p) for p in f_per) + " µs per write at M = "
               + ", ".join(power10(r["m"]) for r in f_rows), max(f_per) <= 1.5 * min(f_per)),
        Target("mutation memory (writes)", "≤ 1.2× bytes overwritten + unavoidable",
               f"up to {ratio(over_ratio)} the 8 B overwritten per write (tape records included)", over_ratio <= 1.2),
        Target("values saved by writes", "≤ 1.2× bytes overwritten",
               f"{ratio(max(r['saved_per_write'] for r in w_rows) / ITEM)} (single-element writes), "
               + " / ".join(ratio(v) for v in saved_ratios) + " (workloads of (c))",
               max(r["saved_per_write"] for r in w_rows) <= 1.2 * ITEM and max(saved_ratios) <= 1.2),
        Target("mutation memory (workloads of (c))", "peak ≤ allowance", " / ".join(r[-1] for r in mut_rows),
               all(fits)),
    ]
    text = "Peaks measured by tracemalloc, separately from the timed runs."
    return Section("(d) Memory of mutation", text, [t1, t2, t3], checks, targets)


def _noisy(seconds):
    """A time per write, or "noise" where the difference of two calls' times it comes from is below 0."""
    return micro(seconds) if seconds >= 0 else "< 0 (noise)"
