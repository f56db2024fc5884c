"""Peers, interleaved timing, memory peaks and gradient checks for the suite.

Timing protocol (the machine is shared and small, so single times mean
little): every contestant of one table row is called once to warm up (JAX
compiles, caches fill) and, unless that call alone ate half its budget,
once more to calibrate; a sample then runs it ``number`` times so that a
sample lasts at least ``min_time``. Rounds run
every contestant once, in an order rotated each round; a contestant whose
sample is expensive joins only the first rounds that fit its ``budget``.
We report the median seconds per call and, for ratios, the median over
rounds of the ratio measured inside the round.
"""
from __future__ import annotations

import datetime
import gc
import importlib
import importlib.metadata
import os
import platform
import statistics
import subprocess
import time
import tracemalloc
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

import mutagrad as mg

PEER_MODULES = ("autograd", "torch", "jax")
GRAD_TOL = 1e-8  # relative agreement required between mutagrad and a peer
FD_TOL = 1e-6  # relative agreement required with a central finite difference


@dataclass(frozen=True)
class Mode:
    name: str
    repeats: int  # rounds
    min_time: float  # seconds a sample lasts at least
    budget: float  # seconds of samples one contestant may take in one row
    full: bool


QUICK = Mode("quick", repeats=3, min_time=0.02, budget=2.0, full=False)
FULL = Mode("full", repeats=7, min_time=0.1, budget=12.0, full=True)


# --------------------------------------------------------------------------
# Peers


@dataclass
class Peers:
    """The optional peer libraries that imported, configured for float64 on CPU."""

    modules: dict = field(default_factory=dict)
    missing: dict = field(default_factory=dict)  # name -> reason

    def has(self, name: str) -> bool:
        return name in self.modules

    def __getitem__(self, name: str):
        return self.modules[name]


def load_peers(names=PEER_MODULES, threads=None) -> Peers:
    """Import the peers that are installed; then freeze the heap (see ``settle``)."""
    peers = Peers()
    for name in names:
        try:
            mod = importlib.import_module(name)
        except Exception as e:  # a missing or broken peer is skipped, not fatal
            peers.missing[name] = f"{type(e).__name__}: {e}"
            continue
        if name == "torch":
            mod.set_default_dtype(mod.float64)
            if threads is not None:
                mod.set_num_threads(threads)
        elif name == "jax":
            mod.config.update("jax_enable_x64", True)
            mod.config.update("jax_platforms", "cpu")
        peers.modules[name] = mod
    settle()
    return peers


def settle():
    """Collect garbage, then exempt every live object from the cyclic GC.

    Python's full collections traverse every tracked object. torch and JAX
    bring ~200,000 of them, which made mutagrad's (and autograd's) element
    loops up to 1.6x slower in this process than in one without the peers.
    Freezing them (and what earlier rows left behind) measures each row as
    a fresh process would see it; the row's own objects are still collected.
    """
    gc.collect()
    gc.freeze()


def environment(peers: Peers) -> dict:
    """Versions, machine and load, for the report header."""
    versions = {"python": platform.python_version(), "numpy": np.__version__,
                "mutagrad": mg.__version__ + _git_revision()}
    for name in PEER_MODULES:
        if peers.has(name):
            versions[name] = _version(name, peers[name])
        else:
            versions[name] = "not installed"
    if peers.has("torch"):
        n = peers["torch"].get_num_threads()
        versions["torch"] += f" ({n} thread{'s' if n != 1 else ''})"
    return {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": f"{platform.system()} {platform.machine()}, {_cpu_model()}, os.cpu_count() = {os.cpu_count()}",
        "platform": platform.platform(),
        "versions": versions,
        "load": load_average(),
    }


def load_average() -> str:
    try:
        return "load average %.2f %.2f %.2f" % os.getloadavg()
    except OSError:
        return "load average unknown"


def _git_revision() -> str:
    """The mutagrad checkout's commit, marked when the working tree differs from it."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(mg.__file__)))
    try:
        rev = subprocess.run(["git", "-C", root, "rev-parse", "--short", "HEAD"], capture_output=True,
                             text=True, timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "-C", root, "status", "--porcelain", "--untracked-files=no", "mutagrad"],
                               capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""
    if not rev:
        return ""
    return f" (git {rev}{' + uncommitted changes' if dirty else ''})"


def _version(name, module) -> str:
    v = getattr(module, "__version__", None)
    if v is None:
        try:
            v = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            v = "?"
    return v


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


# --------------------------------------------------------------------------
# Contestants and timing


@dataclass
class Contestant:
    """One library's way to compute a row's quantity.

    ``run()`` returns the result in the library's own type (a tuple for
    several gradients); ``as_numpy`` converts it for the check.
    ``fallback`` is timed instead if ``run`` raises, with the error noted.
    ``check``, if given, computes the gradient compared instead of ``run``'s
    (a shorter instance of the same code, where the timed one underflows).
    """

    run: Callable[[], Any]
    is_grad: bool = True
    fallback: "Contestant | None" = None
    fallback_note: str = ""
    check: Callable[[], Any] | None = None


@dataclass
class Timing:
    median: float  # seconds per call
    ratio: float | None  # median per-round ratio to the row's reference
    samples: list  # seconds per call, one per round joined (the first rounds)
    number: int


def round_ratio(a: Timing, b: Timing) -> float:
    """Median over the rounds both joined of time(a) / time(b) within the round."""
    return statistics.median(x / y for x, y in zip(a.samples, b.samples))


@dataclass
class Row:
    label: str
    timings: dict  # contestant name -> Timing
    notes: list  # strings
    checks: list  # (comparison, relative error, tolerance, ok)

    def ratio(self, name):
        t = self.timings.get(name)
        return None if t is None else t.ratio

    def seconds(self, name):
        t = self.timings.get(name)
        return None if t is None else t.median

    def versus(self, a, b):
        """time(a) / time(b), median of the per-round ratios (None if either was not timed)."""
        if a not in self.timings or b not in self.timings:
            return None
        return round_ratio(self.timings[a], self.timings[b])


def _time_once(fn, number):
    t = time.perf_counter()
    for _ in range(number):
        fn()
    return (time.perf_counter() - t) / number


def interleaved(thunks: dict, ref: str | None, mode: Mode) -> dict:
    """Time every thunk in rotated rounds; returns name -> Timing."""
    if not thunks:
        return {}
    settle()
    plan = {}
    for name, fn in thunks.items():
        warm = _time_once(fn, 1)  # JAX compiles here, caches fill
        t0 = warm if 2 * warm > mode.budget else _time_once(fn, 1)  # an expensive call is not repeated
        number = max(1, int(mode.min_time / max(t0, 1e-9)))
        rounds = max(1, min(mode.repeats, int(mode.budget / max(t0 * number, 1e-9))))
        plan[name] = (fn, number, rounds)
    samples = {name: [] for name in thunks}
    names = list(thunks)
    for r in range(mode.repeats):
        gc.collect()
        k = r % len(names)
        for name in names[k:] + names[:k]:
            fn, number, rounds = plan[name]
            if r < rounds:
                samples[name].append(_time_once(fn, number))
    out = {name: Timing(statistics.median(samples[name]), None, samples[name], plan[name][1]) for name in names}
    if ref in out:
        for t in out.values():
            t.ratio = round_ratio(t, out[ref])
    return out


def as_numpy(g):
    """A library's gradient (or tuple of gradients) as ndarrays."""
    if isinstance(g, (tuple, list)):
        return tuple(as_numpy(x) for x in g)
    if hasattr(g, "detach"):  # torch
        g = g.detach().numpy()
    return np.asarray(g)


def flat(g) -> np.ndarray:
    """Concatenate one gradient or a tuple of gradients into one float vector."""
    if isinstance(g, (tuple, list)):
        return np.concatenate([np.ravel(np.asarray(x, dtype=np.float64)) for x in g])
    return np.ravel(np.asarray(g, dtype=np.float64))


def rel_err(got, want) -> float:
    got, want = flat(got), flat(want)
    scale = max(float(np.max(np.abs(want), initial=0.0)), 1e-300)
    return float(np.max(np.abs(got - want), initial=0.0)) / scale


def fd_check(f, args, argnums, grads, seed=0):
    """Relative error of <grad, d> against a central difference of f along a random d.

    ``f`` is called on fresh plain copies of the arguments (it may mutate them).
    """
    rng = np.random.default_rng(seed)
    nums = (argnums,) if isinstance(argnums, int) else tuple(argnums)
    gs = (grads,) if isinstance(argnums, int) else tuple(grads)
    dirs = {i: rng.standard_normal(np.shape(args[i])) for i in nums}
    predicted = sum(float(np.sum(g * dirs[i])) for i, g in zip(nums, gs))

    def at(h):
        a = [np.array(v, dtype=float) if i in nums else (v.copy() if isinstance(v, np.ndarray) else v)
             for i, v in enumerate(args)]
        for i in nums:
            a[i] = a[i] + h * dirs[i]
        return float(f(*a))

    eps = 1e-6 * max(1.0, max(float(np.max(np.abs(args[i]), initial=0.0)) for i in nums))
    fd = (at(eps) - at(-eps)) / (2 * eps)
    scale = max(abs(fd), sum(float(np.sum(np.abs(g * dirs[i]))) for i, g in zip(nums, gs)), 1e-300)
    return abs(fd - predicted) / scale


def measure_row(label: str, contestants: dict, ref: str | None, mode: Mode, fd=None) -> Row:
    """Check every gradient against mutagrad's, then time all contestants interleaved.

    ``fd()``, if given, returns mutagrad's relative error against finite
    differences. A contestant that raises (after its fallback) or disagrees
    with mutagrad is noted and not timed; if mutagrad fails its own check,
    mutagrad is not timed.
    """
    notes, checks, thunks, results = [], [], {}, {}
    for name, c in contestants.items():
        chosen = c
        try:
            value = c.run()
        except Exception as e:
            if c.fallback is None:
                notes.append(f"{name}: raised {type(e).__name__}: {_short(e)}; not timed")
                continue
            notes.append(f"{name}: {c.fallback_note} raised {type(e).__name__}: {_short(e)}; "
                         f"timed its fallback instead")
            chosen = c.fallback
            value = chosen.run()
        thunks[name] = chosen.run
        if chosen.is_grad:
            results[name] = as_numpy(value if chosen.check is None else chosen.check())
    if fd is not None and "mutagrad" in results:
        err = fd()
        checks.append(("mutagrad vs finite differences", err, FD_TOL, err <= FD_TOL))
        if err > FD_TOL:
            notes.append(f"mutagrad: gradient disagrees with finite differences (rel. err {err:.1e}); not timed")
            del thunks["mutagrad"]
    if "mutagrad" in results:
        for name, value in results.items():
            if name == "mutagrad":
                continue
            err = rel_err(results["mutagrad"], value)
            checks.append((f"mutagrad vs {name}", err, GRAD_TOL, err <= GRAD_TOL))
            if err > GRAD_TOL:
                notes.append(f"{name}: gradient differs from mutagrad's (rel. err {err:.1e}); not timed")
                thunks.pop(name, None)
    return Row(label, interleaved(thunks, ref, mode), notes, checks)


def _short(e, n=140):
    s = " ".join(str(e).split())
    return s if len(s) <= n else s[: n - 1] + "…"


# --------------------------------------------------------------------------
# Memory


def peak_bytes(thunk) -> int:
    """Peak bytes traced by tracemalloc while ``thunk`` runs, above what was live before.

    NumPy reports its array buffers to tracemalloc; torch and JAX allocate
    outside it, so only NumPy-based libraries are measured this way.
    """
    gc.collect()
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        result = thunk()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    del result
    return peak - base


# --------------------------------------------------------------------------
# Per-library helpers shared by the workloads


def torch_grad(torch, f, args, argnums=0):
    """A thunk computing d f / d args[argnums] with torch.autograd.grad.

    The leaves are made once: ``autograd.grad`` does not accumulate into them.
    """
    nums = (argnums,) if isinstance(argnums, int) else tuple(argnums)
    targs = [torch.tensor(a, requires_grad=(i in nums)) if isinstance(a, np.ndarray) else a
             for i, a in enumerate(args)]
    leaves = [targs[i] for i in nums]

    def run():
        g = torch.autograd.grad(f(*targs), leaves)
        return g[0] if isinstance(argnums, int) else g

    return run


def jax_grad(jax, f, args, argnums=0, jit=False):
    """A thunk computing jax.grad (optionally jitted), blocking until the result is ready."""
    gf = jax.grad(f, argnums=argnums)
    if jit:
        gf = jax.jit(gf)
    jargs = [jax.numpy.asarray(a) if isinstance(a, np.ndarray) else a for a in args]

    def run():
        return jax.block_until_ready(gf(*jargs))

    return run


def mutagrad_grad(f, args, argnums=0):
    """A thunk computing mg.grad (the workloads never write into their arguments)."""
    gf = mg.grad(f, argnums=argnums)
    return lambda: gf(*args)


def plain(f, args):
    """A thunk calling f on the plain NumPy arguments (the primal reference)."""
    return lambda: f(*args)


def grad_contestants(peers: Peers, args, argnums, numpy_fn, *, autograd_fn=None, torch_fn=None,
                     torch_fallback=None, torch_fallback_note="", jax_fn=None, jax_jit_fn=None, skip=None):
    """The contestants of one gradient row: the NumPy primal (the reference), then each library.

    ``numpy_fn`` is the plain NumPy code, run as the primal and differentiated
    by mutagrad as is. Each peer gets its own idiomatic version of the code
    (``autograd_fn`` uses ``autograd.numpy``, ``torch_fn`` torch, ``jax_fn``
    and ``jax_jit_fn`` ``jax.numpy``). ``skip`` maps a contestant name to why
    it is not run at this size. Returns ``(contestants, notes)``.
    """
    skip = dict(skip or {})
    notes = [f"{name}: not run here, {why}" for name, why in skip.items()]
    out = {"numpy": Contestant(plain(numpy_fn, args), is_grad=False),
           "mutagrad": Contestant(mutagrad_grad(numpy_fn, args, argnums))}
    if autograd_fn is not None and peers.has("autograd"):
        ag = peers["autograd"].grad(autograd_fn, argnums)
        out["autograd"] = Contestant(lambda: ag(*args))
    if torch_fn is not None and peers.has("torch"):
        fb = None
        if torch_fallback is not None:
            fb = Contestant(torch_grad(peers["torch"], torch_fallback, args, argnums))
        out["torch"] = Contestant(torch_grad(peers["torch"], torch_fn, args, argnums),
                                  fallback=fb, fallback_note=torch_fallback_note)
    if peers.has("jax"):
        for name, fn, jit in (("jax eager", jax_fn, False), ("jax jit", jax_jit_fn, True)):
            if fn is not None:
                out[name] = Contestant(jax_grad(peers["jax"], fn, args, argnums, jit))
    for name in skip:
        out.pop(name, None)
    return out, notes


def timed_row(label, contestants, notes, mode, fd=None) -> Row:
    """``measure_row`` with the NumPy primal as the reference, plus the builder's notes."""
    row = measure_row(label, contestants, "numpy", mode, fd)
    row.notes[:0] = notes
    return row
