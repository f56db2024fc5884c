"""The rule a primitive lacks, derived from the one it has.

A primitive registered with only ``@mg.frule`` is differentiated in reverse mode, and one
with only ``@mg.rrule`` in forward mode (so ``jvp`` and ``hessian``), as JAX differentiates a
``custom_jvp`` function in reverse mode:

- **reverse from forward**: the tangent map ``t -> frule(x, t)[1]`` is linear in ``t``, so
  its transpose applied to the cotangent ``ȳ`` is the cotangent of ``x``; it is computed by
  mutagrad's own reverse mode on the tangent map (at a generic ``t``: see _generic_like), which
  the rule writes with NumPy operations;
- **forward from reverse**: the pullback ``ȳ -> pullback(ȳ)`` is linear in ``ȳ`` and is the
  transpose of the tangent map, so the reverse mode of the pullback (at a generic ``ȳ``) applied to
  the tangent ``t`` is ``ẏ`` (the "double vjp").

Both are exact: the derived rule is the transpose of a linear map that the given rule
computes, by the same differentiation mutagrad applies to any NumPy code. The cost is one
extra reverse-mode pass over the given rule per use. A rule whose tangent or cotangent
computation mutagrad cannot differentiate (plain Python converting its arguments) raises the
missing rule's error (``NoRuleError``, ``ForwardRuleMissingError``), which names the failure.
"""
from __future__ import annotations

import threading

import numpy as np

from .core import STATE, Tracer, _flatten_args, apply_inner, bottom, output_leaves
from .pytree import (
    tree_flatten,
    tree_flatten_like,
    tree_leaves,
    tree_map,
    tree_unflatten,
)
from .tangents import (
    AbstractZero,
    NoTangent,
    NotImplementedTangent,
    Thunk,
    ZeroTangent,
    is_zero,
    no_tangent_for_active,
)

ZERO = ZeroTangent()


def _leaf_differentiable(a) -> bool:
    if isinstance(a, Tracer):
        return bottom(a).dtype.kind in "fc"
    if isinstance(a, (np.ndarray, np.generic)):
        return a.dtype.kind in "fc"
    return type(a) in (float, complex)


def _differentiable(a) -> bool:
    """Whether argument ``a`` has a tangent: a floating-point or complex array or number, or a
    list, tuple or dict of them (a pytree whose leaves all are)."""
    if _leaf_differentiable(a):
        return True
    if type(a) in (list, tuple, dict):
        leaves = tree_leaves(a)
        return bool(leaves) and all(_leaf_differentiable(v) for v in leaves)
    return False


def _zero_leaf(a):
    b = bottom(a) if isinstance(a, Tracer) else a
    if type(b) in (float, complex):
        return np.zeros((), type(b))
    return np.zeros(np.shape(b), b.dtype)


def _zeros_like(a):
    """A plain zero of ``a``'s structure, shapes and types."""
    return tree_map(_zero_leaf, a) if type(a) in (list, tuple, dict) else _zero_leaf(a)


def _generic_leaf(a, rng):
    z = _zero_leaf(a)
    if z.dtype.kind == "c":
        return (rng.standard_normal(z.shape) + 1j * rng.standard_normal(z.shape)).astype(z.dtype)
    return rng.standard_normal(z.shape).astype(z.dtype)


def _generic_like(a):
    """A plain value of ``a``'s structure, shapes and types, with generic values (normal draws of a fixed
    seed): the point the linear maps are taken at. Their value there does not matter, but the rule's control
    flow may depend on it: an adjoint iterated until its update is small stops at once for a cotangent of
    zeros, as does a pullback that returns early for one (the fixedpoint tester: the derived forward mode of
    an implicit-function rule came out wrong, silently); at a generic point it runs as for a cotangent."""
    rng = np.random.default_rng(0)
    if type(a) in (list, tuple, dict):
        return tree_map(lambda v: _generic_leaf(v, rng), a)
    return _generic_leaf(a, rng)


def _dense(c, like):
    """A derived rule's cotangent or tangent as arrays in ``like``'s structure (a symbolic zero:
    zeros)."""
    if isinstance(c, Thunk):
        c = c()
    if c is None or isinstance(c, AbstractZero):
        return _zeros_like(like)
    if type(like) in (list, tuple, dict) and not isinstance(c, NotImplementedTangent):
        like_leaves, tree = tree_flatten(like)
        leaves = tree_flatten_like(tree, c, "a rule's cotangent or tangent")
        return tree_unflatten(tree, [_dense(v, w) for v, w in zip(leaves, like_leaves)])
    return c


_DERIVING = threading.local()  # .prims: the primitives whose missing rule is being derived
_MAX_NESTED = 8


def _entered(prim, missing):
    """Enter the derivation of ``prim``'s ``missing`` rule; a rule that applies ``prim`` itself
    to a tangent (a cotangent) would need that derivation again, without end: it raises."""
    prims = getattr(_DERIVING, "prims", None)
    if prims is None:
        prims = _DERIVING.prims = []
    # (a derivation inside one of the same primitive is legitimate once per level of nested
    # differentiation, a third derivative say; without end it is the rule applying itself)
    if sum(p is prim for p in prims) >= _MAX_NESTED:
        from .errors import ForwardRuleMissingError, NoRuleError

        short = prim.name.split(".")[-1]
        given = "forward" if missing == "rrule" else "reverse"
        cls = NoRuleError if missing == "rrule" else ForwardRuleMissingError
        err = cls(f"the {given} rule of {prim.name} applies {prim.name} itself to a "
                  f"{'tangent' if missing == 'rrule' else 'cotangent'}, so its missing rule cannot be derived "
                  f"from it (that would need the missing rule itself). Register one with @mg.{missing}({short}).")
        err.derived_of = prim
        raise err
    prims.append(prim)


def _left(prim):
    _DERIVING.prims.remove(prim)


class _Unimplemented(Exception):
    def __init__(self, tangent):
        super().__init__(tangent)
        self.tangent = tangent


def _failed(e, prim, missing):
    """The error for a derived rule whose given rule mutagrad could not differentiate: the
    missing rule's error, naming what failed, with ``e`` as its cause."""
    from .errors import DifferentiationError, ForwardRuleMissingError, NoRuleError

    if getattr(e, "derived_of", None) is prim:  # (from a nested derivation of the same rule: as it is)
        return e
    if not isinstance(e, DifferentiationError):  # (the rule's own error: as it is, with a note)
        if hasattr(e, "add_note"):
            e.add_note(f"(while differentiating a rule of {prim.name} to derive its missing @mg.{missing})")
        return e
    short = prim.name.split(".")[-1]
    if missing == "rrule":
        err = NoRuleError(
            f"{prim.name} has a forward rule but no reverse rule; reverse mode transposes the forward "
            f"rule's tangent computation, which mutagrad could not differentiate: {e} Register a reverse "
            f"rule with @mg.rrule({short}).")
    else:
        err = ForwardRuleMissingError(
            f"{prim.name} has a reverse rule but no forward rule; forward mode transposes the pullback, "
            f"which mutagrad could not differentiate: {e} Register a forward rule with @mg.frule({short}).")
    err.derived_of = prim
    return err


def reverse_from_forward(prim):
    """A reverse rule for ``prim`` from its forward rule, by transposing the tangent map."""
    frule = prim.frule

    def rule(*args, **kwargs):
        zeros = tuple(ZERO for _ in args)
        leaves, tree = _flatten_args(args)
        y = apply_inner(prim, leaves, tree, kwargs)  # (the primal, as a plain call computes it)
        diff = [i for i, a in enumerate(args) if _differentiable(a)]

        def pullback(g):
            out = [ZERO] * len(args)
            for i in diff:  # (one argument at a time: a NotImplementedTangent is that argument's only)
                def tangent_map(t, i=i):
                    full = list(zeros)
                    full[i] = t
                    try:
                        ydot = frule(args, tuple(full), **kwargs)[1]
                    except TypeError:  # (a rule that cannot take the symbolic zeros: np.sum(ZeroTangent())
                        full = [_zeros_like(a) if j != i and _differentiable(a) else full[j]  # gets arrays)
                                for j, a in enumerate(args)]
                        ydot = frule(args, tuple(full), **kwargs)[1]
                    ys, ytree = output_leaves(y)
                    if isinstance(ydot, AbstractZero):
                        tl = [ZERO] * len(ys)
                    else:
                        tl = [ydot] if ytree is None else tree_flatten_like(ytree, ydot, "the tangent")
                    for d in tl:
                        if isinstance(d, NotImplementedTangent):
                            raise _Unimplemented(d)
                    # (an integer output, a count say: no tangent, a zero of its own the cotangent skips)
                    tl = [_dense(d, v) if _leaf_differentiable(v) else np.zeros(()) for d, v in zip(tl, ys)]
                    return tl[0] if ytree is None else tree_unflatten(ytree, tl)

                _entered(prim, "rrule")
                try:
                    _, pb = _vjp(tangent_map, [_generic_like(args[i])])
                    out[i] = _internal(pb, g)[0]
                except _Unimplemented as u:  # (the forward rule's own NotImplementedTangent: it poisons)
                    out[i] = u.tangent
                except Exception as e:
                    raise _failed(e, prim, "rrule") from e
                finally:
                    _left(prim)
            return tuple(out)

        return y, pullback

    return rule


def forward_from_reverse(prim):
    """A forward rule for ``prim`` from its reverse rule, by transposing the pullback."""
    rrule = prim.rrule

    def forward(primals, tangents, **kwargs):
        processing = STATE.ceiling  # (the index of the forward level that calls this rule)
        y, pb = rrule(*primals, **kwargs)
        active = [i for i, t in enumerate(tangents) if not is_zero(t) and _differentiable(primals[i])]
        if not active:
            return y, ZERO
        for i in active:
            if isinstance(tangents[i], NotImplementedTangent):
                return y, tangents[i]
        ys, ytree = output_leaves(y)
        floats = [k for k, v in enumerate(ys) if _leaf_differentiable(v)]  # (an integer output: no tangent)

        def cotangent_map(*gs):
            full = [ZERO] * len(ys)
            for k, g in zip(floats, gs):
                full[k] = g
            cts = list(pb(tree_unflatten(ytree, full) if ytree is not None else full[0]))
            for i in active:
                if isinstance(cts[i], NotImplementedTangent):
                    if isinstance(cts[i] * tangents[i], AbstractZero):  # (along a tangent of plain zeros, a
                        cts[i] = ZERO  # parameter held fixed in a traced vector: not asked for, as in
                        continue  # registry's elementwise rules)
                    raise _Unimplemented(cts[i])
                if type(cts[i]) is NoTangent and prim.user:  # (final: "no derivative", whatever the tangent)
                    raise _Unimplemented(no_tangent_for_active(prim, i, None))
            return tuple(_dense(cts[i], primals[i]) for i in active)

        if not floats:
            return y, ZERO
        _entered(prim, "frule")
        try:
            _, pb2 = _vjp(cotangent_map, [_generic_like(ys[k]) for k in floats])
            ydots = [_below(v, processing)
                     for v in _internal(pb2, tuple(_dense(tangents[i], primals[i]) for i in active))]
        except _Unimplemented as u:  # (the reverse rule's own NotImplementedTangent: it poisons)
            return y, u.tangent
        except Exception as e:
            raise _failed(e, prim, "frule") from e
        finally:
            _left(prim)
        full = [ZERO] * len(ys)
        for k, v in zip(floats, ydots):
            full[k] = v
        return y, (tree_unflatten(ytree, full) if ytree is not None else full[0])

    return forward


def _conj(v):
    b = bottom(v) if isinstance(v, Tracer) else v
    return np.conj(v) if np.iscomplexobj(b) else v


def _internal(public_pullback, g):
    """A rule's pullback (``x̄ = ȳ conj(dy/dx)``, PyTorch's convention, see docs/complex.md) from
    ``mg.vjp``'s (JAX's, ``ȳ dy/dx``): the same map between conjugates."""
    return tuple(tree_map(_conj, c) for c in public_pullback(tree_map(_conj, g)))


def _below(v, index):
    """``v`` without the wrappers of the level at ``index`` (the forward level calling the rule)
    and of later ones: the reverse pass over the pullback sees that level and gives its results
    as its constants, but nothing in it depends on the level's traced values (the rule gets
    their values and tangents)."""
    while isinstance(v, Tracer) and v._level.index is not None and v._level.index >= index:
        v = v._value
    return v


def _vjp(fun, at):
    from .api import vjp

    return vjp(fun, *at)
