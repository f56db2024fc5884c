"""(e) Second order: Hessian-vector products ``H v`` of the large-array function of (b) and the heat stencil of (c).

Each library computes ``H v`` its idiomatic way: mutagrad forward over
reverse, ``mg.jvp(mg.grad(f), (x,), (v,))[1]``; torch double backward
(``create_graph=True``, then the gradient of ``g @ v``); JAX
``jax.jvp(jax.grad(f), (x,), (v,))[1]``, eager and under ``jit``; autograd
reverse over reverse, the gradient of ``dot(grad(f)(x), v)``. Each library
runs the code it runs in (b) and (c). Every row also times each library's own
gradient in the same rounds, so ``HVP / gradient`` is what the second order
costs in that library, beside ``HVP / NumPy primal``.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

import mutagrad as mg

from . import harness, inplace, large
from .report import (
    PEER_COLUMNS,
    Section,
    Table,
    milli,
    power10,
    ratio,
    summary_row,
)

LARGE_N = {"quick": 200, "full": large.N}
HEAT_SIZES = {"quick": (10**3,), "full": (10**3, 10**4)}
GRADIENT = " gradient"  # suffix of a library's gradient among a row's timings


# --------------------------------------------------------------------------
# Hand-written gradients: the finite differences of the guard differentiate these, not mutagrad


def heat_adjoint(u0):
    """The gradient of ``inplace.heat_inplace`` by hand: the stencil is linear, so its
    transpose is applied to ``2 u`` step by step (the boundary copies first, as they ran last)."""
    c = inplace.C
    u, new = u0.copy(), np.empty_like(u0)
    for _ in range(inplace.STEPS):
        new[1:-1] = u[1:-1] + c * (u[2:] - 2 * u[1:-1] + u[:-2])
        new[0] = new[1]
        new[-1] = new[-2]
        u, new = new, u
    ubar = 2 * u
    for _ in range(inplace.STEPS):
        ubar[-2] += ubar[-1]  # new[-1] = new[-2]
        ubar[1] += ubar[0]  # new[0] = new[1]
        inner = ubar[1:-1]
        prev = np.zeros_like(ubar)
        prev[1:-1] += (1 - 2 * c) * inner
        prev[2:] += c * inner
        prev[:-2] += c * inner
        ubar = prev
    return ubar


def fd_hvp(grad, args, argnum, v):
    """Central difference of ``grad(*args)`` along v in argument ``argnum`` (step as in ``harness.fd_check``)."""
    x = args[argnum]
    eps = 1e-6 * max(1.0, float(np.max(np.abs(x), initial=0.0)))
    at = lambda h: grad(*_with(args, argnum, x + h * v))
    return (at(eps) - at(-eps)) / (2 * eps)


def _with(args, i, value):
    return args[:i] + (value,) + args[i + 1:]


# --------------------------------------------------------------------------
# One library's HVP and gradient


@dataclass
class Library:
    """Thunks computing one library's ``H v`` and its gradient, on the same code.

    ``fallback`` is used instead if ``hvp`` or ``grad`` raises, with the error noted.
    """

    hvp: Callable[[], Any]
    grad: Callable[[], Any]
    fallback: Library | None = None
    fallback_note: str = ""


def mutagrad_library(f, args, argnum, v):
    """Forward over reverse. The other arguments (A, b) go to the gradient as arguments, as in (b),
    so that no call copies the matrix (a plain array the function closes over would be)."""
    gf = mg.grad(f, argnums=argnum)
    at = lambda x: gf(*_with(args, argnum, x))
    return Library(lambda: mg.jvp(at, (args[argnum],), (v,))[1], lambda: gf(*args))


def torch_library(torch, f, args, argnum, v):
    """Double backward: the gradient with ``create_graph=True``, then the gradient of ``g @ v``."""
    targs = tuple(torch.tensor(a, requires_grad=(i == argnum)) for i, a in enumerate(args))
    x, tv = targs[argnum], torch.tensor(v)

    def hvp():
        g = torch.autograd.grad(f(*targs), x, create_graph=True)[0]
        return torch.autograd.grad(g @ tv, x)[0]

    return Library(hvp, harness.torch_grad(torch, f, args, argnum))


def jax_library(jax, f, args, argnum, v, jit):
    """Forward over reverse; under ``jit`` the whole product is compiled (once, outside the timing)."""
    gf = jax.grad(f, argnums=argnum)

    def hvp_fn(v, *a):
        return jax.jvp(lambda x: gf(*_with(a, argnum, x)), (a[argnum],), (v,))[1]

    if jit:
        hvp_fn = jax.jit(hvp_fn)
    jargs = tuple(jax.numpy.asarray(a) for a in args)
    jv = jax.numpy.asarray(v)
    return Library(lambda: jax.block_until_ready(hvp_fn(jv, *jargs)), harness.jax_grad(jax, f, args, argnum, jit))


def autograd_library(autograd, f, args, argnum, v):
    """Reverse over reverse: the gradient of ``dot(grad(f)(x), v)``."""
    gf = autograd.grad(f, argnum)
    hv = autograd.grad(lambda *a: autograd.numpy.dot(gf(*a), v), argnum)
    return Library(lambda: hv(*args), lambda: gf(*args))


# --------------------------------------------------------------------------
# A row: check, then time every library's HVP and gradient and the NumPy primal interleaved


def _attempt(lib):
    """``((hvp, gradient), None)`` as ndarrays, or ``(None, the exception)`` if either raised."""
    try:
        return (harness.as_numpy(lib.hvp()), harness.as_numpy(lib.grad())), None
    except Exception as e:  # noqa: BLE001 (a library that fails is noted and not timed, as in harness.measure_row)
        return None, e


def measure(label, libraries, numpy_fn, hand_grad, args, argnum, v, mode, notes) -> harness.Row:
    """The correctness guard, then one interleaved timing of everything (reference: the NumPy primal).

    mutagrad's ``H v`` must match a central difference of the hand-written
    gradient along v (≤ FD_TOL), and its gradient the hand-written one; each
    peer's ``H v`` and gradient must match mutagrad's (≤ GRAD_TOL). A library
    that raises (after its fallback) or disagrees is noted and not timed.
    """
    notes, checks, thunks, results = list(notes), [], {"numpy": harness.plain(numpy_fn, args)}, {}
    for name, lib in libraries.items():
        value, e = _attempt(lib)
        if e is not None and lib.fallback is not None:
            notes.append(f"{name}: {lib.fallback_note} raised {type(e).__name__}: {harness._short(e)}; "
                         f"timed its fallback instead")
            lib = lib.fallback
            value, e = _attempt(lib)
        if e is not None:
            notes.append(f"{name}: raised {type(e).__name__}: {harness._short(e)}; not timed")
            continue
        results[name] = value
        thunks[name], thunks[name + GRADIENT] = lib.hvp, lib.grad

    def drop(name, why):
        notes.append(f"{name}: {why}; not timed")
        thunks.pop(name, None)
        thunks.pop(name + GRADIENT, None)
        results.pop(name, None)

    fd = fd_hvp(hand_grad, args, argnum, v)
    if "mutagrad" in results:
        hvp, grad = results["mutagrad"]
        err_fd = harness.rel_err(hvp, fd)
        err_g = harness.rel_err(grad, hand_grad(*args))
        checks.append(("mutagrad HVP vs central difference of the hand-written gradient", err_fd,
                       harness.FD_TOL, err_fd <= harness.FD_TOL))
        checks.append(("mutagrad gradient vs hand-written gradient", err_g, harness.GRAD_TOL,
                       err_g <= harness.GRAD_TOL))
        if err_fd > harness.FD_TOL:
            drop("mutagrad", f"HVP disagrees with finite differences (rel. err {err_fd:.1e})")
        elif err_g > harness.GRAD_TOL:
            drop("mutagrad", f"gradient differs from the hand-written one (rel. err {err_g:.1e})")
    # peers are compared with mutagrad's results; without them, with the finite difference and the hand-written gradient
    if "mutagrad" in results:
        ref, tol = results["mutagrad"], harness.GRAD_TOL
        ref_names = ("mutagrad HVP", "mutagrad gradient")
    else:
        ref, tol = (fd, hand_grad(*args)), harness.FD_TOL
        ref_names = ("central difference of the hand-written gradient", "hand-written gradient")
    for name in [n for n in results if n != "mutagrad"]:
        failed = []
        for what, ref_name, want, got in zip(("HVP", "gradient"), ref_names, ref, results[name]):
            err = harness.rel_err(want, got)
            checks.append((f"{ref_name} vs {name}", err, tol, err <= tol))
            if err > tol:
                failed.append(f"{what} differs from the {ref_name} (rel. err {err:.1e})")
        if failed:
            drop(name, ", ".join(failed))
    return harness.Row(label, harness.interleaved(thunks, "numpy", mode), notes, checks)


def libraries(peers, args, argnum, v, *, autograd_fn, torch_fn, torch_fallback, jax_fn, jax_jit_fn, numpy_fn):
    """Every available library's HVP and gradient of its own version of the code (as in (b) and (c))."""
    out = {"mutagrad": mutagrad_library(numpy_fn, args, argnum, v)}
    if peers.has("autograd"):
        out["autograd"] = autograd_library(peers["autograd"], autograd_fn, args, argnum, v)
    if peers.has("torch"):
        torch = peers["torch"]
        lib = torch_library(torch, torch_fn, args, argnum, v)
        if torch_fallback is not None:
            lib.fallback = torch_library(torch, torch_fallback, args, argnum, v)
            lib.fallback_note = "the in-place code"
        out["torch"] = lib
    if peers.has("jax"):
        out["jax eager"] = jax_library(peers["jax"], jax_fn, args, argnum, v, jit=False)
        out["jax jit"] = jax_library(peers["jax"], jax_jit_fn, args, argnum, v, jit=True)
    return out


def direction(n, seed=1):
    return np.random.default_rng(seed).standard_normal(n)


# --------------------------------------------------------------------------
# The two workloads


def large_inputs(n, seed=0):
    """The inputs of (b) at size n (A scaled by 1/sqrt(n) as there)."""
    rng = np.random.default_rng(seed)
    return rng.standard_normal((n, n)) / np.sqrt(n), rng.standard_normal(n), rng.standard_normal(n)


def measure_large(peers, mode, n):
    args = large_inputs(n)
    kw = {"autograd_fn": None, "torch_fn": None, "torch_fallback": None, "jax_fn": None, "jax_jit_fn": None}
    if peers.has("autograd"):
        anp = peers["autograd"].numpy
        kw["autograd_fn"] = lambda A, x, b: large.objective(A, x, b, anp.tanh, anp.sin, anp.sum)
    if peers.has("torch"):
        torch = peers["torch"]
        kw["torch_fn"] = lambda A, x, b: large.objective(A, x, b, torch.tanh, torch.sin, torch.sum)
    if peers.has("jax"):
        jnp = peers["jax"].numpy
        kw["jax_fn"] = kw["jax_jit_fn"] = lambda A, x, b: large.objective(A, x, b, jnp.tanh, jnp.sin, jnp.sum)
    v = direction(n)
    libs = libraries(peers, args, 1, v, numpy_fn=large.numpy_fn, **kw)
    hand_grad = lambda A, x, b: large.adjoint(A, x, b, False)
    return measure(f"large array, n = {n}", libs, large.numpy_fn, hand_grad, args, 1, v, mode, [])


def skips(n, mode):
    """Libraries too slow to run at this size, with why (said in the row's notes).

    The times quoted were measured on the 2-core machine this suite was written on.
    """
    if not mode.full:
        return {"jax eager": "JAX eager's HVP of the `.at[]` loop takes 10-17 s per call at n = 10^3 and 10^4 "
                             "(op-by-op dispatch of the forward-over-reverse trace); measured in the full run only"}
    return {}


def measure_heat(peers, mode, n):
    (x,) = inplace.inputs("heat", n)
    args = (x,)
    kw = {"autograd_fn": None, "torch_fn": None, "torch_fallback": None, "jax_fn": None, "jax_jit_fn": None}
    if peers.has("autograd"):
        kw["autograd_fn"] = lambda u: inplace.heat_functional(u, peers["autograd"].numpy)
    if peers.has("torch"):
        tns = inplace.torch_namespace(peers["torch"])
        kw["torch_fn"] = lambda u: inplace.heat_inplace(u, tns)
        kw["torch_fallback"] = lambda u: inplace.heat_functional(u, tns)
    if peers.has("jax"):
        jax = peers["jax"]
        kw["jax_fn"] = lambda u: inplace.heat_jax(u, jax.numpy, inplace.python_loop)
        kw["jax_jit_fn"] = lambda u: inplace.heat_jax(u, jax.numpy, jax.lax.fori_loop)
    numpy_fn = lambda u: inplace.heat_inplace(u, inplace.NUMPY)
    v = direction(n)
    libs = libraries(peers, args, 0, v, numpy_fn=numpy_fn, **kw)
    skip = skips(n, mode)
    for name in skip:
        libs.pop(name, None)
    notes = [f"{name}: not run here, {why}" for name, why in skip.items()]
    return measure(f"heat, n = {power10(n)}", libs, numpy_fn, heat_adjoint, args, 0, v, mode, notes)


# --------------------------------------------------------------------------
# Section


def run(peers, mode) -> Section:
    rows = [measure_large(peers, mode, LARGE_N[mode.name])]
    rows += [measure_heat(peers, mode, n) for n in HEAT_SIZES[mode.name]]
    names = ("mutagrad",) + PEER_COLUMNS
    per_gradient = lambda r, n: ratio(r.versus(n, n + GRADIENT))
    per_primal = lambda r, n: ratio(r.ratio(n))
    tables = [
        Table(["workload", "NumPy primal (ms)"] + list(names),
              [[r.label, milli(r.seconds("numpy"))] + [per_primal(r, n) for n in names] for r in rows],
              "HVP time / NumPy primal time (median of per-round ratios):"),
        Table(["workload"] + list(names), [[r.label] + [per_gradient(r, n) for n in names] for r in rows],
              "HVP time / the same library's gradient time, same rounds (what the second order costs in "
              "each library):"),
        Table(["workload"] + [f"mutagrad / {p}" for p in PEER_COLUMNS],
              [[r.label] + [ratio(r.versus("mutagrad", p)) for p in PEER_COLUMNS] for r in rows],
              "mutagrad HVP time / peer HVP time, same rounds (below 1: mutagrad is faster):"),
    ]
    text = (
        "Hessian-vector products `H v` (v a fixed random vector), w.r.t. x, of the function of (b), "
        f"`sum(tanh(A @ x + b)**2 + 0.1*sin(x))` at n = {LARGE_N[mode.name]}, and w.r.t. the initial state, of "
        f"the heat stencil of (c) ({inplace.STEPS} steps, in place), each library on the code it runs there. "
        "mutagrad's HVP is forward over reverse, `mg.jvp(mg.grad(f), (x,), (v,))[1]`, on the unchanged NumPy "
        "code; JAX's is the same composition, `jax.jvp(jax.grad(f), (x,), (v,))[1]`, eager and with the whole "
        "product under `jit`; torch's is double backward (`create_graph=True`, then the gradient of `g @ v`) "
        "and autograd's the gradient of `dot(grad(f)(x), v)`, both reverse over reverse. Each row also times "
        "every library's gradient and the NumPy primal in the same rounds. *HVP / NumPy primal* is the cost "
        "of one product against running the function once; *HVP / gradient* is what the second order costs "
        "over the first in the same library (a small constant in theory, as an HVP is a gradient computation "
        "carrying a tangent); *mutagrad / peer* compares the products directly. The guard compares mutagrad's "
        "HVP with a central difference, along v, of a hand-written gradient (the heat stencil is linear, so "
        "its Hessian is constant), and every peer's HVP and gradient with mutagrad's. Issue 6 sets no target "
        "for second order.")
    summary = []
    for r in (rows[0], rows[-1]):
        summary.append(summary_row(f"HVP, {r.label}", "HVP / NumPy primal", r, per_primal))
        summary.append(summary_row(f"HVP, {r.label}", "HVP / own gradient", r, per_gradient))
    return Section("(e) Hessian-vector products", text, tables, rows, [], summary=summary)
