"""Products and linear algebra: matmul, dot, einsum, tensordot, inner, vdot,
kron, cross; np.linalg: inv solve det slogdet norm, the factorizations
cholesky eigh eigvalsh svd qr eig eigvals, pinv lstsq, and compositions
(matrix_power multi_dot tensorsolve tensorinv cond vector_norm matrix_norm).

Factorizations whose factors are not unique say so: eigen- and singular
vectors at repeated values (equal up to a relative 1e-10: closer values
would only turn rounding into wrong numbers), and the extra columns of svd(full_matrices=True)
or qr(mode="complete") of a non-square matrix (but one, of a real matrix of full
rank: a null vector, unique up to its sign), get ``not_implemented`` (never
a silent number). Complex eigenvectors of eigh and singular vectors are
defined up to a phase, so only phase-invariant functions of them have a
derivative; eig and qr follow LAPACK's normalization and are exact (eig's
eigenvectors up to the sign LAPACK leaves free: the derivative is that of
the sign the call returned, which some LAPACK builds choose by memory layout).

Cotangents follow the convention of the whole package: for y = f(x),
x̄ = ȳ · conj(∂y/∂x), so products transpose *and* conjugate their other
operand (``ā = ȳ @ conj(b).T``). For real arrays the conjugation is free.
"""
from __future__ import annotations

import contextlib
import functools
import itertools
import weakref

import numpy as np

from ..core import (FUNCTIONS, REGISTRY, STATE, ArrayTracer, Tracer, _carries_derivative, bind, bottom, capture, carries_any_derivative,
                    get_primitive, plain_operand, plain_operands, strong_operand, write_out, write_replayed)
from ..core import write
from ..errors import kink_warning, user_line, user_site
from ..registry import LAYOUT_EXACT, _Meta, pins, refusing_identity, view_kept
from ..registry import conj_if_complex as _cj
from ..tape import FOOTPRINTS, read_mask
from .elementwise import PRODUCT_INTO
from .reductions import _Bits
from ..tangents import (
    NotImplementedTangent,
    NoTangent,
    PartlyNotImplemented,
    Thunk,
    ZeroTangent,
    is_zero,
    not_implemented,
    unbroadcast,
)

ZERO = ZeroTangent()


def _mT(a):
    return np.swapaxes(a, -1, -2)


# -- matmul -------------------------------------------------------------------


def _matmul_vjp(g, a, b, which):
    """Cotangent of ``a @ b`` for operand ``which`` (0 or 1), with NumPy's 1-D rules."""
    if type(a) is np.ndarray and type(b) is np.ndarray and type(g) is np.ndarray and a.ndim == 2 and (
            b.ndim <= 2 and a.dtype.kind == "f" and b.dtype.kind == "f"):
        # the common real matrix @ vector / matrix @ matrix cases, without the general bookkeeping
        if which == 1:
            return a.T @ g
        return np.outer(g, b) if b.ndim == 1 else g @ b.T
    a_nd, b_nd = np.ndim(a), np.ndim(b)
    if a_nd == 1 and b_nd == 1:  # an inner product: g is its 0-d cotangent
        return g * _cj(b) if which == 0 else _cj(a) * g
    a2 = np.reshape(a, (1,) + np.shape(a)) if a_nd == 1 else a
    b2 = np.reshape(b, np.shape(b) + (1,)) if b_nd == 1 else b
    sa, sb = np.shape(a2), np.shape(b2)
    g2 = np.reshape(g, np.broadcast_shapes(sa[:-2], sb[:-2]) + (sa[-2], sb[-1]))
    if which == 0:
        r = np.matmul(g2, _cj(_mT(b2)))
        if a_nd == 1:
            r = np.squeeze(r, -2)
        return unbroadcast(r, np.shape(a))
    r = np.matmul(_cj(_mT(a2)), g2)
    if b_nd == 1:
        r = np.squeeze(r, -1)
    return unbroadcast(r, np.shape(b))


matmul_p = get_primitive(np.matmul)


class _ProductPullback:
    """The pullback of a product of two operands (matmul, dot, tensordot, einsum), holding
    them in ``xs``: the tape drops the one no active operand's cotangent reads
    (``Primitive.reads``; a constant matrix's product keeps the matrix only, not each vector it
    multiplies). ``vjp(g, xs, i)`` is operand ``i``'s cotangent (a dropped operand's is not asked)."""

    __slots__ = ("lead", "vjp", "xs")
    trims_operands = True

    def __init__(self, vjp, xs, lead=()):
        self.vjp, self.xs, self.lead = vjp, xs, lead  # lead: no cotangents for leading arguments

    def __call__(self, g):
        xs = tuple(_stand_in(x) for x in self.xs)
        n = len(self.lead)
        return self.lead + tuple(Thunk(functools.partial(self.vjp, g, xs, i)) for i in range(n, len(xs)))


def _stand_in(x):
    """An operand the tape dropped (its shape and dtype): zeros of no memory, for the shapes
    of the other operand's cotangent."""
    if type(x) is _Meta:
        key = (x.shape, x.dtype)
        z = _STAND_INS.get(key)
        if z is None:  # (read-only zeros of no memory: one per shape and dtype serves every call)
            if len(_STAND_INS) > 256:
                _STAND_INS.clear()
            z = _STAND_INS[key] = np.broadcast_to(np.zeros((), x.dtype), x.shape)
        return z
    return x


_STAND_INS: dict = {}


def _matmul_pullback(a, b):
    return _ProductPullback(lambda g, xs, i: _matmul_vjp(g, xs[0], xs[1], i), (a, b))


def _matmul_rrule(a, b):
    return np.matmul(a, b), _matmul_pullback(a, b)


def _bilinear_tangent(fn, primals, tangents, kw):
    """The tangent of ``fn(a, b, **kw)``, linear in each of ``a``, ``b``."""
    a, b = primals[:2]
    ta, tb = tangents[:2]
    acc = ZERO
    if not is_zero(ta):
        acc = fn(ta, b, **kw)
    if not is_zero(tb):
        t = fn(a, tb, **kw)
        if type(acc) is np.ndarray and type(t) is np.ndarray and acc.shape == t.shape and (
                acc.dtype == np.result_type(acc, t)):
            acc += t  # (acc: fn's new array, which nothing else holds; one temporary less)
        else:
            acc = t if is_zero(acc) else acc + t
    return acc


def _bilinear_frule(fn):
    def frule(primals, tangents, **kw):
        return fn(*primals[:2], **kw), _bilinear_tangent(fn, primals, tangents, kw)

    return frule


matmul_p.rrule, matmul_p.frule = _matmul_rrule, _bilinear_frule(np.matmul)
matmul_p.reads = (((1,), False), ((0,), False))  # a's cotangent reads b, b's reads a (a constant's change is no matter)


def _matmul_fast(level, leaves, dest=None):
    """``a @ b`` of a real matrix and a real vector or matrix, or of two real vectors, both traced,
    recorded directly (``Primitive.fast``): the reverse rule's numbers, less
    of the general path's bookkeeping. (Not into ``dest``: the general path's.)"""
    a, b = leaves
    if dest is not None or type(a) is not ArrayTracer or type(b) is not ArrayTracer:
        return None
    av, bv = a._value, b._value
    if (type(av) is not np.ndarray or type(bv) is not np.ndarray or not 1 <= av.ndim <= 2 or not 1 <= bv.ndim <= 2
            or (av.ndim == 1 and bv.ndim == 2) or av.dtype.kind != "f" or bv.dtype.kind != "f"):
        return None
    sa, sb = a._storage, b._storage
    da, db = sa.active, sb.active
    if not (da or db):
        return None
    y = np.matmul(av, bv)
    inputs = []
    if da:
        inputs.append((sa, a._geom, 0))
        capture(sb, b, bv)  # a's cotangent reads b
    if db:
        inputs.append((sb, b._geom, 1))
        capture(sa, a, av)
    # only what the active operands' cotangents read (a constant matrix's product keeps the matrix)
    # (a view of a much larger array is kept as a copy: the array can die, see registry.pins)
    ka = ((av.copy() if a._geom is not None and pins(av) and not view_kept(a, av) else av) if db
          else _stand_in(_Meta(av.shape, av.dtype)))
    kb = ((bv.copy() if b._geom is not None and pins(bv) and not view_kept(b, bv) else bv) if da
          else _stand_in(_Meta(bv.shape, bv.dtype)))

    def pullback(g):
        return (_matmul_vjp(g, ka, kb, 0) if da else None, _matmul_vjp(g, ka, kb, 1) if db else None)

    return level.fast_op(matmul_p, y, inputs, pullback)


matmul_p.fast = _matmul_fast


# -- a product into out= (M @= T, np.dot(a, b, out=c), np.einsum(..., out=c)) -----------------


def _given_twin(p, pullback, tangent):
    """A twin of product primitive ``p`` (its name, derivatives and reads) whose value NumPy's own call
    into an ``out=`` has computed, passed as ``value=_Bits(y)`` (:func:`product_into`): not computed
    again. ``pullback(*args, **kw)``: ``p``'s pullback; ``tangent(primals, tangents, kw)``: its tangent."""

    def impl(*args, value=None, **kw):
        if any(isinstance(x, Tracer) for x in args):  # (an outer level's traced operands, in a nested
            return bind(twin, args, dict(kw, value=value))  # differentiation's rule: the twin at that level)
        return value.v

    def rrule(*args, value=None, **kw):
        return impl(*args, value=value, **kw), pullback(*args, **kw)

    def frule(primals, tangents, value=None, **kw):
        return impl(*primals, value=value, **kw), tangent(primals, tangents, kw)

    twin = get_primitive(impl, p.name)
    twin.rrule, twin.frule, twin.reads = rrule, frule, p.reads
    return twin


def product_into(prim, args, kwargs, out, shape, dtype, replay):
    """``out[...] = p(*args)`` where NumPy's call ``replay(plain out)`` of product ``p`` writes into traced
    ``out`` (``M @= T``), the product computed once: by that call, whose bits (its kernel on out's layout,
    an operand that overlaps out read from a copy) and floating-point events are the plain call's, its
    value then that of ``prim`` (a twin, :func:`_given_twin`) of the operands as they were, written into
    ``out`` by a recorded write (the derivative). ``shape``, ``dtype``: the product's. (``prim``, so named:
    a floating-point event's message names it, registry._operation_name.) None, with nothing done, where
    ``out`` is not a writable traced array of them: the caller's general path (the rule's product, then
    the replayed call's bits, :func:`write_replayed`)."""
    ob = bottom(out)
    if (not isinstance(out, Tracer) or type(ob) is not np.ndarray or not shape or ob.shape != shape
            or ob.dtype != dtype or not ob.size or not ob.flags.writeable or out._level.closed):
        return None
    y = ob.copy()
    try:
        replay(ob)
    except BaseException:
        ob[...] = y
        raise
    _swap(ob, y)  # (out as it was, for the rules, and the write, which saves what it overwrites; y the product)
    write(out, Ellipsis, bind(prim, args, dict(kwargs, value=_Bits(y))))
    return out


def _swap(a, b):
    """Exchange the contents of arrays ``a`` and ``b`` (of one shape and dtype) by blocks of ``a``'s first
    axis, through a temporary of 64 KiB, not one of their size (a new large array costs page faults)."""
    step = max(1, (1 << 16) // max(1, a.nbytes // len(a)))
    for i in range(0, len(a), step):
        t = a[i:i + step].copy()
        a[i:i + step] = b[i:i + step]
        b[i:i + step] = t


def _matmul_shape(sa, sb):
    """np.matmul's result shape for operands of shapes ``sa``, ``sb`` (None where they do not broadcast)."""
    if not sa or not sb:
        return None
    if len(sa) == 1 or len(sb) == 1:
        return () if len(sa) == len(sb) else sb[:-2] + sb[-1:] if len(sa) == 1 else sa[:-1]
    try:
        return np.broadcast_shapes(sa[:-2], sb[:-2]) + (sa[-2], sb[-1])
    except ValueError:
        return None


matmul_given_p = _given_twin(matmul_p, _matmul_pullback,
                             lambda primals, tangents, kw: _bilinear_tangent(np.matmul, primals, tangents, kw))


def matmul_into(inputs, out):
    """``np.matmul(*inputs, out=out)`` (``M @= T``) by :func:`product_into`, or None (see there)."""
    a, b = inputs
    pa, pb = plain_operand(a), plain_operand(b)
    if type(pa) is not np.ndarray or type(pb) is not np.ndarray:
        return None
    try:
        dt = np.matmul.resolve_dtypes((pa.dtype, pb.dtype, None))[-1]
    except (TypeError, ValueError):
        return None
    return product_into(matmul_given_p, (a, b), {}, out, _matmul_shape(pa.shape, pb.shape), dt,
                        lambda ob: np.matmul(pa, pb, out=ob))


PRODUCT_INTO[np.matmul] = matmul_into


# -- tensordot (dot, inner are expressed through it) -------------------------


def _td_axes(axes, na, nb):
    if isinstance(axes, (int, np.integer)):
        axes = int(axes)
        return list(range(na - axes, na)), list(range(axes))
    a_ax, b_ax = axes
    a_ax = [a_ax] if isinstance(a_ax, (int, np.integer)) else list(a_ax)
    b_ax = [b_ax] if isinstance(b_ax, (int, np.integer)) else list(b_ax)
    return [x % na for x in a_ax], [x % nb for x in b_ax]


def _tensordot_impl(a, b, axes=2):
    return np.tensordot(a, b, axes)


tensordot_p = get_primitive(_tensordot_impl, "np.tensordot")


def _tensordot_vjp(g, a, b, axes, which):
    na, nb = np.ndim(a), np.ndim(b)
    a_ax, b_ax = _td_axes(axes, na, nb)
    a_free = [i for i in range(na) if i not in a_ax]
    b_free = [i for i in range(nb) if i not in b_ax]
    nfa = len(a_free)
    g_a = list(range(nfa))  # axes of g belonging to a's free axes
    g_b = list(range(nfa, nfa + len(b_free)))
    if which == 0:
        # ā[a_free, a_ax] = sum over b_free of g[g_a, g_b] * conj(b)[b_free.., b_ax..]
        r = np.tensordot(g, _cj(b), (g_b, b_free))  # axes: a_free..., b_ax (in b order)
        # r axes: a_free in order, then b's contracted axes in b order -> map to a_ax
        order_b = sorted(range(len(b_ax)), key=lambda k: b_ax[k])
        src = list(range(nfa)) + [nfa + i for i in range(len(b_ax))]
        dst_axes = a_free + [a_ax[k] for k in order_b]
        perm = [0] * na
        for s, d in zip(src, dst_axes):
            perm[d] = s
        return np.transpose(r, perm)
    r = np.tensordot(_cj(a), g, (a_free, g_a))  # axes: a's contracted (in a order), then b_free
    order_a = sorted(range(len(a_ax)), key=lambda k: a_ax[k])
    dst_axes = [b_ax[k] for k in order_a] + b_free
    perm = [0] * nb
    for s, d in enumerate(dst_axes):
        perm[d] = s
    return np.transpose(r, perm)


def _tensordot_rrule(a, b, axes=2):
    y = _tensordot_impl(a, b, axes)
    return y, _ProductPullback(lambda g, xs, i: _tensordot_vjp(g, xs[0], xs[1], axes, i), (a, b))


tensordot_p.rrule = _tensordot_rrule
tensordot_p.reads = (((1,), False), ((0,), False))
tensordot_p.frule = _bilinear_frule(_tensordot_impl)


def _np_tensordot(args, kwargs):
    a = dict(zip(("a", "b", "axes"), args))
    a.update(kwargs)
    return bind(tensordot_p, (a["a"], a["b"]), {"axes": a.get("axes", 2)})


def _dot_axes(na, nb):
    return ([na - 1], [0]) if nb == 1 else ([na - 1], [nb - 2])


dot_p = get_primitive(lambda a, b: np.dot(a, b), "np.dot")


def _dot_pullback(a, b):
    axes = _dot_axes(np.ndim(a), np.ndim(b))
    return _ProductPullback(lambda g, xs, i: _tensordot_vjp(g, xs[0], xs[1], axes, i), (a, b))


def _dot_rrule(a, b):
    return np.dot(a, b), _dot_pullback(a, b)  # (NumPy's own dot: the same bits as a plain call)


dot_p.rrule = _dot_rrule
dot_p.reads = (((1,), False), ((0,), False))
dot_p.frule = _bilinear_frule(lambda a, b: np.dot(a, b))
dot_given_p = _given_twin(dot_p, _dot_pullback,
                          lambda primals, tangents, kw: _bilinear_tangent(np.dot, primals, tangents, kw))


def _dot_into(a, b, out):
    """``np.dot(a, b, out=out)`` of arrays by :func:`product_into`, or None (see there)."""
    pa, pb = plain_operand(a), plain_operand(b)
    if type(pa) is not np.ndarray or type(pb) is not np.ndarray or not pa.ndim or not pb.ndim or (
            pa.dtype.kind not in "biufc" or pb.dtype.kind not in "biufc"):
        return None
    ob = bottom(out)
    if type(ob) is not np.ndarray or not ob.flags.c_contiguous:  # (NumPy's error: the general path's)
        return None
    shape = pa.shape[:-1] + (pb.shape[:-2] + pb.shape[-1:] if pb.ndim > 1 else ())
    return product_into(dot_given_p, (a, b), {}, out, shape, np.result_type(pa.dtype, pb.dtype),
                        lambda o: np.dot(pa, pb, out=o))


def _np_dot(args, kwargs):
    d = dict(zip(("a", "b", "out"), args))
    d.update(kwargs)
    a, b, out = d["a"], d["b"], d.get("out")
    if out is not None:
        r = _dot_into(a, b, out)  # (the product computed once: by NumPy's own call into out)
        if r is not None:
            return r
    if np.ndim(a) == 0 or np.ndim(b) == 0:
        res = np.multiply(strong_operand(a), strong_operand(b))  # (np.dot makes arrays of Python numbers)
    else:
        res = bind(dot_p, (a, b))
    if out is not None:
        ob = bottom(out)
        if not (ob.flags.c_contiguous and ob.shape == np.shape(res) and ob.dtype == np.result_type(bottom(res))):
            raise ValueError("output array is not acceptable (must have the right datatype, number of "
                             "dimensions, and be a C-Array)")
        write_replayed(out, Ellipsis, res, lambda o: np.dot(bottom(a), bottom(b), out=o))
        return out
    return res


def _np_inner(args, kwargs):
    a, b = args[:2]
    na, nb = np.ndim(a), np.ndim(b)
    if na == 0 or nb == 0:
        return np.multiply(strong_operand(a), strong_operand(b))
    if na == 1 and nb == 1:  # a NumPy scalar, as np.inner returns (tensordot's is a 0-d array)
        return np.dot(a, b)
    return bind(tensordot_p, (a, b), {"axes": ([na - 1], [nb - 1])})


def _vdot_rrule(a, b):
    y = np.vdot(a, b)  # NumPy's own kernel on the operands as they are: a plain call's bits

    def vjp(g, xs, i):  # those of np.dot(np.conj(a.reshape(-1)), b.reshape(-1))
        a, b = xs
        c = np.conjugate(np.reshape(a, -1))
        ct = _tensordot_vjp(g, c, np.reshape(b, -1), ([0], [0]), i)
        return np.reshape(np.conjugate(ct), np.shape(a)) if i == 0 else np.reshape(ct, np.shape(b))

    return y, _ProductPullback(vjp, (a, b))


def _vdot_frule(primals, tangents):
    a, b = primals
    ta, tb = tangents
    y = np.vdot(a, b)
    acc = ZERO
    if not is_zero(ta):
        acc = np.vdot(ta, b)
    if not is_zero(tb):
        t = np.vdot(a, tb)
        acc = t if is_zero(acc) else acc + t
    return y, acc


vdot_p = get_primitive(lambda a, b: np.vdot(a, b), "np.vdot")
vdot_p.rrule, vdot_p.frule = _vdot_rrule, _vdot_frule
vdot_p.reads = (((1,), False), ((0,), False))


def _np_vdot(args, kwargs):
    a, b = args[:2]
    if np.size(a) != np.size(b):
        np.vdot(np.zeros(np.shape(a)), np.zeros(np.shape(b)))  # (NumPy's error)
    return bind(vdot_p, (a, b))


FUNCTIONS[np.tensordot] = _np_tensordot
FUNCTIONS[np.dot] = _np_dot
FUNCTIONS[np.inner] = _np_inner
FUNCTIONS[np.vdot] = _np_vdot


# -- einsum --------------------------------------------------------------------

_LETTERS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"


def _parse_einsum(subscripts, shapes):
    """Explicit form: list of input subscripts and the output subscript,
    with '...' replaced by fresh letters."""
    subscripts = subscripts.replace(" ", "")
    if "->" in subscripts:
        ins, out = subscripts.split("->")
    else:
        ins, out = subscripts, None
    ins = ins.split(",")
    used = set(subscripts) - set(".,->")
    free = [c for c in _LETTERS if c not in used]
    ell_n = 0
    for s, shp in zip(ins, shapes):
        if "..." in s:
            ell_n = max(ell_n, len(shp) - (len(s) - 3))
    ell = "".join(free[:ell_n])
    new_ins = []
    for s, shp in zip(ins, shapes):
        if "..." in s:
            k = len(shp) - (len(s) - 3)
            s = s.replace("...", ell[ell_n - k:] if k else "")
        new_ins.append(s)
    if out is None:
        counts = {}
        for s in new_ins:
            for c in s:
                counts[c] = counts.get(c, 0) + 1
        out = ell + "".join(sorted(c for c, n in counts.items() if n == 1 and c not in ell))
    else:
        out = out.replace("...", ell)
    return new_ins, out


def _einsum_impl(subscripts, *operands, optimize=False):
    return np.einsum(subscripts, *operands, optimize=optimize)


einsum_p = get_primitive(_einsum_impl, "np.einsum")


_NAIVE_EINSUM = 1 << 13  # (index spaces up to this size: np.einsum's own loop, not a planned contraction order)


@functools.lru_cache(maxsize=512)
def _einsum_plan(spec, shapes):
    """np.einsum's ``optimize=`` for ``spec`` (explicit letters, no ellipsis) on operands of ``shapes``: False (NumPy's
    one loop over every index) where that index space is small, else the contraction path ``optimize=True`` finds,
    searched once per spec and shapes instead of at each call (a 3-operand einsum of bond dimension 3 spent 60% of
    its pullback in NumPy's path search: 64x the plain call, the tensortrain tester)."""
    sizes = {}
    for letters, shape in zip(spec.split("->")[0].split(","), shapes):
        for c, n in zip(letters, shape):
            sizes[c] = max(sizes.get(c, 1), n)
    if int(np.prod(list(sizes.values()), dtype=np.float64)) <= _NAIVE_EINSUM:
        return False
    blanks = [np.broadcast_to(np.empty(()), shape) for shape in shapes]
    return np.einsum_path(spec, *blanks, optimize="greedy")[0]


def _einsum_operand_ct(g, ins, out, operands, i, sizes):
    """Cotangent of operand i of a (multi)linear einsum."""
    target = ins[i]
    uniq = "".join(dict.fromkeys(target))
    others = [(ins[j], _cj(operands[j])) for j in range(len(ins)) if j != i]
    avail = set(out).union(*[set(s) for s, _ in others]) if others else set(out)
    keep = "".join(c for c in uniq if c in avail)
    spec = ",".join([out] + [s for s, _ in others]) + "->" + keep
    shapes = tuple(tuple(sizes[c] for c in s) for s in [out] + [s for s, _ in others])
    r = np.einsum(spec, g, *[o for _, o in others], optimize=_einsum_plan(spec, shapes))
    # letters of the operand that appear nowhere else were summed: broadcast back
    if keep != uniq:
        shape_u = tuple(sizes[c] for c in uniq)
        r = np.reshape(r, tuple(sizes[c] if c in keep else 1 for c in uniq))
        r = np.broadcast_to(r, shape_u)
    if uniq != target:
        # repeated letters (a diagonal): place onto the diagonal with identity factors
        fresh = [c for c in _LETTERS if c not in set("".join(ins)) | set(out)]
        spec_out = []
        eyes = []
        seen = set()
        for c in target:
            if c in seen:
                d = fresh.pop(0)
                spec_out.append(d)
                eyes.append(c + d)
            else:
                seen.add(c)
                spec_out.append(c)
        spec2 = ",".join([uniq] + eyes) + "->" + "".join(spec_out)
        r = np.einsum(spec2, r, *[np.eye(sizes[e[0]]) for e in eyes])
    return r


def _einsum_vjp(subscripts, shapes):
    """``vjp(g, operands, i)``: operand ``i``'s cotangent of a (multi)linear einsum of operands of ``shapes``."""
    ins, out = _parse_einsum(subscripts, shapes)
    sizes = {}
    for s, shp in zip(ins, shapes):
        for c, n in zip(s, shp):
            if n != 1 or c not in sizes:
                sizes[c] = n
    return lambda g, operands, i: unbroadcast(_einsum_operand_ct(g, ins, out, operands, i, sizes), shapes[i])


def _einsum_pullback(subscripts, *operands, optimize=False):
    vjp = _einsum_vjp(subscripts, [np.shape(o) for o in operands])
    return _ProductPullback(lambda g, xs, i: vjp(g, xs[1:], i - 1), (subscripts, *operands), (NoTangent(),))


def _einsum_rrule(subscripts, *operands, optimize=False):
    return _einsum_impl(subscripts, *operands, optimize=optimize), _einsum_pullback(subscripts, *operands)


def _einsum_frule(primals, tangents, optimize=False):
    return _einsum_impl(*primals, optimize=optimize), _einsum_tangent(primals, tangents, {"optimize": optimize})


def _einsum_tangent(primals, tangents, kw):
    subscripts, *operands = primals
    _, *tans = tangents
    optimize = kw.get("optimize", False)
    acc = ZERO
    for i, t in enumerate(tans):
        if is_zero(t):
            continue
        ops = list(operands)
        ops[i] = t
        term = np.einsum(subscripts, *ops, optimize=optimize)
        acc = term if is_zero(acc) else acc + term
    return acc


einsum_p.rrule, einsum_p.frule = _einsum_rrule, _einsum_frule


def _einsum_moves(vals):
    """Primitive.moves of np.einsum: its operand's position where the subscripts of one operand sum over no
    index (np.einsum("ii->i", A), "ij->ji": NumPy's view of A, whose values a forward-mode jacobian's runs
    need not compare: a workspace's np.empty values, the levmar tester), else None."""
    if len(vals) != 2 or type(vals[0]) is not str:
        return None
    sub = vals[0].replace(" ", "")
    if "," in sub or "->" not in sub:
        return None
    lhs, out = sub.split("->")
    return 1 if set(lhs.replace(".", "")) <= set(out.replace(".", "")) else None


einsum_p.moves = _einsum_moves
LAYOUT_EXACT.update((matmul_p, tensordot_p, dot_p, einsum_p, vdot_p))  # (their values from the operands as they are)
# einsum of two operands: each one's cotangent reads the other (more: every other), so the
# tape keeps only a constant operand of a product with one traced operand
einsum2_p = get_primitive(lambda subscripts, a, b, optimize=False: _einsum_impl(subscripts, a, b, optimize=optimize),
                          "np.einsum")
einsum2_p.rrule, einsum2_p.frule = _einsum_rrule, _einsum_frule
einsum2_p.reads = ((), ((2,), False), ((1,), False))
LAYOUT_EXACT.add(einsum2_p)
einsum_given_p = _given_twin(einsum_p, _einsum_pullback, _einsum_tangent)
einsum2_given_p = _given_twin(einsum2_p, _einsum_pullback, _einsum_tangent)


def _einsum_shape(subscripts, shapes):
    """np.einsum's result shape for operands of ``shapes`` (None where NumPy would refuse them)."""
    try:
        ins, out = _parse_einsum(subscripts, shapes)
        if len(ins) != len(shapes):
            return None
        sizes = {}
        for s, shp in zip(ins, shapes):
            if len(s) != len(shp):
                return None
            for c, n in zip(s, shp):
                if n != 1 or c not in sizes:
                    sizes[c] = n
        return tuple(sizes[c] for c in out)
    except (KeyError, ValueError):
        return None


def _np_einsum(args, kwargs):
    kwargs = dict(kwargs)
    out = kwargs.pop("out", None)
    optimize = kwargs.pop("optimize", False)
    dtype = kwargs.pop("dtype", None)
    given_casting = {"casting": kwargs.pop("casting")} if "casting" in kwargs else {}  # (NumPy's calls: as given,
    casting = given_casting.get("casting", "safe")  # its optimize= paths pass it on to matmul only then)
    order = kwargs.pop("order", "K")  # (rules/layout.py lays the result out as it asks)
    if kwargs:
        raise TypeError(f"np.einsum: unsupported keyword arguments {sorted(kwargs)}")
    if not isinstance(args[0], str):
        # interleaved notation: (op, sublist, op, sublist, ..., [out_sublist])
        ops = list(args)
        operands, subs = ops[0::2], ops[1::2]
        outsub = None
        if len(operands) > len(subs):
            outsub = operands.pop()
        to = lambda sl: "".join("..." if s is Ellipsis else _LETTERS[s] for s in sl)  # noqa: E731
        spec = ",".join(to(s) for s in subs) + ("->" + to(outsub) if outsub is not None else "")
        args = (spec, *operands)
    given = args[1:]
    if dtype is not None and len(given) == 1 and out is None and isinstance(given[0], Tracer):
        # a view (np.einsum("ii->i", a), "ij->ji"): NumPy returns it whatever dtype= says
        pb = plain_operand(given[0])
        if np.shares_memory(np.einsum(args[0], pb, dtype=dtype, casting=casting), pb):
            dtype = None
    if dtype is not None:  # NumPy casts the operands to dtype (under casting) and computes there
        dt = np.dtype(dtype)
        if any(not np.can_cast(np.result_type(bottom(x)), dt, casting=casting) for x in args[1:]):
            # NumPy's own error, or none (with optimize=, its contractions by tensordot cast as they go)
            np.einsum(args[0], *[np.zeros(np.shape(x), np.result_type(bottom(x))) for x in args[1:]], dtype=dtype,
                      optimize=optimize, **given_casting)
        args = (args[0], *(x.astype(dt) if isinstance(x, Tracer) else np.asarray(x, dt) for x in args[1:]))
    # (an out= that overlaps an operand: NumPy's einsum iterates with NPY_ITER_COPY_IF_OVERLAP, so its
    # result is the einsum of the operands' values before the call, as computed here, then written)
    opt = bool(optimize) if optimize is not True else True
    if out is not None and dtype is None:  # (the product computed once: by NumPy's own call into out)
        ops = [plain_operand(x) for x in given]
        if all(type(p) is np.ndarray and p.dtype.kind in "biufc" for p in ops):
            r = product_into(einsum2_given_p if len(ops) == 2 else einsum_given_p, tuple(args), {"optimize": opt},
                             out, _einsum_shape(args[0], [p.shape for p in ops]), np.result_type(*ops),
                             lambda ob: np.einsum(args[0], *ops, out=ob, optimize=optimize, order=order,
                                                  **given_casting))
            if r is not None:
                return r
    res = bind(einsum2_p if len(args) == 3 else einsum_p, tuple(args), {"optimize": opt})
    if out is None:
        if (dtype is not None or order not in ("K", "k")) and not (
                len(given) == 1 and isinstance(res, Tracer) and np.may_share_memory(bottom(res), bottom(given[0]))):
            # (NumPy casts inside its loops, in its own order, and sums in the order= asked, with dtype= on
            # a path of its own: its bits, the derivative the cast operands'; a view of the operand, which
            # NumPy returns whatever order= says, stays one)
            from .reductions import _with_value

            res = _with_value(res, lambda: np.einsum(args[0], *[plain_operand(x) for x in given], optimize=optimize,
                                                     order=order, **given_casting,
                                                     **({} if dtype is None else {"dtype": dtype})))
        return res
    if isinstance(res, Tracer) and np.may_share_memory(bottom(res), bottom(out)):
        # a view of an operand (np.einsum("i->i", x[::2], out=x[1:5])): NumPy's einsum reads an
        # operand that overlaps out= from a copy, where an assignment may read what it overwrote
        res = res.copy()
    # the bits of NumPy's own call into out (its loops there may round otherwise than into a new array)
    plain = [plain_operand(x) for x in given]  # (NumPy's own call: its operands, dtype=, casting=, optimize=)

    def replay(ob):
        np.einsum(args[0], *plain, out=ob, optimize=optimize, order=order, **given_casting,
                  **({} if dtype is None else {"dtype": dtype}))

    if not isinstance(out, Tracer):  # (NumPy's error for out's dtype first, then a traced value's refusal)
        return write_out(res, out, replay)
    write_replayed(out, Ellipsis, res, replay)
    return out


FUNCTIONS[np.einsum] = _np_einsum


# -- np.linalg -----------------------------------------------------------------

inv_p = get_primitive(np.linalg.inv)


def _inv_rrule(a):
    y = np.linalg.inv(a)

    def pullback(g):
        yh = _cj(_mT(y))
        return (-np.matmul(np.matmul(yh, g), yh),)

    return y, pullback


def _inv_frule(primals, tangents):
    (a,), (t,) = primals, tangents
    y = np.linalg.inv(a)
    return y, -np.matmul(np.matmul(y, t), y)


inv_p.rrule, inv_p.frule = _inv_rrule, _inv_frule

solve_p = get_primitive(np.linalg.solve)


def _solve_is_vec(a, b):
    return np.ndim(b) == 1


def _solve_vec(a, r):
    """Solve ``a x = r`` for vectors r (..., m): stacked ones too, which NumPy's solve would
    read as matrices once they have a batch axis."""
    return np.linalg.solve(a, r[..., None])[..., 0]


def _solve_rrule(a, b):
    y = np.linalg.solve(a, b)

    def pullback(g):
        ah = _cj(_mT(a))
        gb = _solve_vec(ah, g) if _solve_is_vec(a, b) else np.linalg.solve(ah, g)
        if _solve_is_vec(a, b):
            ga = -np.multiply.outer(gb, _cj(y)) if np.ndim(a) == 2 else -gb[..., :, None] * _cj(y)[..., None, :]
        else:
            ga = -np.matmul(gb, _cj(_mT(y)))
        return unbroadcast(ga, np.shape(a)), unbroadcast(gb, np.shape(b))

    return y, pullback


def _solve_frule(primals, tangents):
    (a, b), (ta, tb) = primals, tangents
    y = np.linalg.solve(a, b)
    rhs = ZERO
    if not is_zero(tb):
        rhs = tb
    if not is_zero(ta):
        ay = np.matmul(ta, y[..., None])[..., 0] if _solve_is_vec(a, b) else np.matmul(ta, y)
        rhs = -ay if is_zero(rhs) else rhs - ay
    if is_zero(rhs):
        return y, ZERO
    return y, _solve_vec(a, rhs) if _solve_is_vec(a, b) else np.linalg.solve(a, rhs)


solve_p.rrule, solve_p.frule = _solve_rrule, _solve_frule

det_p = get_primitive(np.linalg.det)


def _adjugate(a, y):
    """adj(A) = det(A) A^-1, also where A is singular. Up to 3x3: the cofactors themselves (a
    polynomial: exact to every order, at any rank); larger: det(A) A^-1 where A is well
    conditioned (cond below 1/√ε), else the cofactors up to 5x5 (6x6 complex), and beyond
    through the SVD A = U S Vh: adj(A) = det(U) det(Vh) Vh^H adj(S) U^H, adj(S)_i the product
    of the other singular values."""
    n = np.shape(a)[-1]
    if n == 0:
        return 0 * a  # (det of a 0x0 matrix is 1, a constant)
    if n <= 3:
        return _cofactor_adjugate(a, n)
    if np.result_type(bottom(a)) == np.float16:  # (NumPy's linalg has no float16: SciPy's det computes in float32)
        return _adjugate(a.astype(np.float32), y.astype(np.float32)).astype(np.float16)
    batch = np.shape(a)[:-2]
    try:
        ainv = np.linalg.inv(a)
    except np.linalg.LinAlgError:
        sing = None
    else:
        # ill-conditioned: det(A) A⁻¹ is a product of sizes cond and 1/cond whose derivatives
        # (second order of det) cancel to few digits (none, singular to working precision)
        sing = _ill_conditioned(a, ainv)
        if not np.any(sing):
            return ainv * np.expand_dims(y, (-2, -1))
    if n <= _POLY_ADJUGATE or (n <= _POLY_ADJUGATE + 1 and _is_complex(a)):
        # (the SVD's derivative needs distinct singular values: rank n - 2 has two zeros; and it is
        # not holomorphic: a complex matrix's adjugate is, as a polynomial)
        return _cofactor_adjugate(a, n)
    if batch and (sing is None or not np.all(sing)):  # each matrix of the stack by its own rank
        return np.reshape(np.stack([_adjugate(a[i], y[i]) for i in np.ndindex(*batch)]), np.shape(a))
    u, sv, vh = np.linalg.svd(a)
    ones = np.ones(np.shape(sv)[:-1] + (1,), dtype=bottom(sv).dtype)
    left = np.cumprod(np.concatenate([ones, sv[..., :-1]], axis=-1), axis=-1)  # product of those before
    right = np.flip(np.cumprod(np.concatenate([ones, np.flip(sv, -1)[..., :-1]], axis=-1), axis=-1), -1)
    scale = np.linalg.det(u) * np.linalg.det(vh)
    return np.expand_dims(scale, (-2, -1)) * (_cj(_mT(vh)) * np.expand_dims(left * right, -2)) @ _cj(_mT(u))


def _poly_det(m):
    """det of a small matrix by cofactor expansion along its first row: a polynomial in the
    entries, its derivatives exact at any rank."""
    k = np.shape(m)[-1]
    if k == 1:
        return m[..., 0, 0]
    if k == 2:
        return m[..., 0, 0] * m[..., 1, 1] - m[..., 0, 1] * m[..., 1, 0]
    total = 0
    for j in range(k):
        t = m[..., 0, j] * _poly_det(m[..., 1:, :][..., :, [c for c in range(k) if c != j]])
        total = total + t if j % 2 == 0 else total - t
    return total


_POLY_ADJUGATE = 5  # the largest matrices whose adjugate at a singular one is the cofactors' polynomial


def _cofactor_adjugate(a, n):
    if n == 1:
        return np.ones_like(a)
    rows = []
    for i in range(n):
        row = []
        for j in range(n):  # adj(A)_ij = (-1)^(i+j) det(A without row j and column i)
            keep_r = [r for r in range(n) if r != j]
            keep_c = [c for c in range(n) if c != i]
            m = _poly_det(a[..., keep_r, :][..., :, keep_c])
            row.append(m if (i + j) % 2 == 0 else -m)
        rows.append(np.stack(row, axis=-1))
    return np.stack(rows, axis=-2)


def _det_rrule(a):
    y = np.linalg.det(a)

    def pullback(g):
        # d det = tr(adj(A) dA)  ->  Ā = ḡ adj(A)^H (= ḡ conj(det) A^{-H} where A is invertible)
        return (np.expand_dims(g, (-2, -1)) * _cj(_mT(_adjugate(a, y))),)

    return y, pullback


def _det_frule(primals, tangents):
    (a,), (t,) = primals, tangents
    y = np.linalg.det(a)
    try:
        ainv = np.linalg.inv(a)
        if np.shape(a)[-1] > 3 and np.any(_ill_conditioned(a, ainv)):
            raise np.linalg.LinAlgError
        return y, y * np.trace(np.matmul(ainv, t), axis1=-2, axis2=-1)
    except np.linalg.LinAlgError:  # singular (to working precision): through the adjugate
        return y, np.trace(_adjugate(a, y) @ t, axis1=-2, axis2=-1)


det_p.rrule, det_p.frule = _det_rrule, _det_frule

slogdet_p = get_primitive(np.linalg.slogdet)


def _slogdet_rrule(a):
    res = np.linalg.slogdet(a)
    cplx = np.iscomplexobj(bottom(a))

    def pullback(cts):
        # d log det A = tr(A^-1 dA) = d logabsdet + i d arg: for a complex A the sign
        # s = exp(i arg) moves too (ds = i s Im tr(A^-1 dA)); a real sign is constant
        gsign, glog = cts
        k = ZERO if is_zero(glog) else glog
        if cplx and not is_zero(gsign):
            ks = -1j * np.imag(np.conj(gsign) * res[0])
            k = ks if is_zero(k) else k + ks
        if is_zero(k):
            return (ZERO,)
        try:
            ainv = np.linalg.inv(a)
        except np.linalg.LinAlgError:
            return (_slogdet_singular_T(a, k),)
        if np.any(_numerically_singular(a, ainv)):
            return (_slogdet_singular_T(a, k),)
        return (np.expand_dims(k, (-2, -1)) * _cj(_mT(ainv)),)

    return res, pullback


def _cond_beyond(a, ainv, bound):
    """Per matrix of a stack: whether cond₁(A) = ‖A‖₁‖A⁻¹‖₁ is not below ``bound(n, ε)``."""
    b, bi = np.asarray(bottom(a)), np.asarray(bottom(ainv))
    n = b.shape[-1]
    if n == 0:
        return np.zeros(b.shape[:-2], bool)
    with np.errstate(all="ignore"):
        cond = np.max(np.sum(np.abs(b), axis=-2), axis=-1) * np.max(np.sum(np.abs(bi), axis=-2), axis=-1)
    return ~(cond < bound(n, np.finfo(b.dtype).eps))


def _ill_conditioned(a, ainv):
    """Per matrix of a stack: cond₁(A) beyond 1/√ε, where det(A) A⁻¹'s derivatives (det's second
    order) lose more than half the digits to the cancellation of terms of size cond."""
    return _cond_beyond(a, ainv, lambda n, eps: 1.0 / np.sqrt(eps))


def _numerically_singular(a, ainv):
    """Per matrix of a stack: singular to working precision, cond₁(A) beyond 1 / (n ε).
    log|det A| is then rounding (-inf in exact arithmetic), and its derivatives, A⁻ᵀ and
    beyond, are sums of terms of size cond that cancel to nothing reliable: a composite such
    as sign · exp(logabsdet) got a wrong second derivative there."""
    return _cond_beyond(a, ainv, lambda n, eps: 1.0 / (n * eps))


def _slogdet_singular_T(a, k):
    """The pullback through a stack holding singular matrices: their cotangents must be
    zero (the loss does not use their log|det|); the others' as usual. For one matrix a
    zero cotangent is a computed one, not an unused log|det| (which sends none): in
    ``s * exp(logabsdet)``, exp's derivative at -inf is 0 and log|det|'s is infinite, so
    the derivative (det's) is not 0 * inf = 0."""
    batch = np.shape(a)[:-2]
    if not batch:
        return _slogdet_singular()
    kb = np.broadcast_to(bottom(k), batch)
    out = []
    for idx in np.ndindex(*batch):
        if kb[idx] == 0:
            out.append(0 * a[idx])
            continue
        try:
            ainv = np.linalg.inv(a[idx])
        except np.linalg.LinAlgError:
            return _slogdet_singular()
        if _numerically_singular(a[idx], ainv):
            return _slogdet_singular()
        out.append(k[idx] * _cj(_mT(ainv)))
    return np.reshape(np.stack(out), np.shape(a)) if out else 0 * a


def _slogdet_singular():
    return not_implemented("np.linalg.slogdet of a singular matrix (or one singular to working precision, "
                           "cond(A) beyond 1/(n eps)): log|det A| is -inf there, and it has no derivative "
                           "(det itself has one: np.linalg.det)")


def _slogdet_frule(primals, tangents):
    (a,), (t,) = primals, tangents
    res = np.linalg.slogdet(a)
    try:
        ainv = np.linalg.inv(a)
        if np.any(_numerically_singular(a, ainv)):
            raise np.linalg.LinAlgError
        tr = np.trace(np.matmul(ainv, t), axis1=-2, axis2=-1)
    except np.linalg.LinAlgError:
        bad = _slogdet_singular()
        return res, (bad if np.iscomplexobj(bottom(a)) else ZERO, bad)
    if np.iscomplexobj(bottom(a)):
        return res, (1j * res[0] * np.imag(tr), np.real(tr))
    return res, (ZERO, tr)


slogdet_p.rrule, slogdet_p.frule = _slogdet_rrule, _slogdet_frule


# -- norms -------------------------------------------------------------------------


def _abs2(x):
    return np.real(x * np.conj(x)) if np.iscomplexobj(bottom(x)) else x * x


def _norm_kink(v, what="np.linalg.norm at a zero vector", skip=None, at=None, first_right=False, keep=False):
    """Watch a norm's value, or its sum of squares, ``v`` where it is 0 (its kink) and a higher derivative
    meets it: ``v`` carries a derivative at the innermost level and at one outside it (an inner level's
    constant of an outer traced value does not: regress46). The warning is given where the kink's value
    can reach the result: in reverse mode by the pullback, unless no operation after it reads the zeros
    (the zero self-distances of a pairwise distance matrix left out by a boolean index, ``r[off]``, or a
    gather: the nbody tester); in forward mode at once. (A zero selected away by np.where or np.triu is
    read, and its cotangent 0 tells nothing: the cotangent of norm(x) ** 2 at 0 is 0 too, 2 * norm.)
    ``skip``: where a zero is no kink (the std of one element, a constant). ``at``: where the kinks are, if
    not at the zeros of ``v`` (np.arccos's value at -1 is pi). ``first_right``: the kink's value has its first
    derivative right there (|x| ** 2: only its second is wrong), so a product with a factor 0 there does not
    carry it (tape.read_mask's ``products``). ``keep``: watched even where ``at`` is empty (a forward-mode
    jacobian's runs record the same operations, whichever of them the kink's mask spares)."""
    if not (isinstance(v, Tracer) and _carries_derivative(v) and carries_any_derivative(v._value)):
        return v
    zero = np.asarray(bottom(v)) == 0 if at is None else at
    if skip is not None:
        zero = zero & ~np.asarray(skip)
    if not np.any(zero) and not keep:
        return v
    return bind(_norm_kink_p, (v,), {"site": user_site(), "what": what, "zero": zero, "first_right": first_right})


def _norm_kink_rrule(v, site=None, what="", zero=None, first_right=False, check=None):
    # (``check``: another watch's test of the cotangent, core.abs_watched's of |z| beside a comparison's tie)

    def pullback(g):
        if check is not None:
            check(g)
        elif np.any(zero):
            read = read_mask(0, products=first_right, outputs=True)
            if read is None or np.any(read & zero):
                kink_warning(what, site=site)
        return (g,)

    return np.copy(v), pullback


def _norm_kink_frule(primals, tangents, site=None, what="", zero=None, first_right=False, check=None):
    if check is None and (zero is None or np.any(zero)):
        kink_warning(what, site=site)
    return np.copy(primals[0]), tangents[0]


_norm_kink_p = get_primitive(lambda v, site=None, what="", zero=None, first_right=False, check=None: np.copy(v),
                             "norm_kink")  # (internal: no coverage.md row)
_norm_kink_p.rrule, _norm_kink_p.frule = _norm_kink_rrule, _norm_kink_frule
FOOTPRINTS.add(_norm_kink_p)


def _norm_root(s):
    """np.sqrt of a norm's sum of squares, watched at its zeros (:func:`_norm_kink`; the primitive itself,
    not np.sqrt's call, which would watch it a second time as a norm written out)."""
    return _norm_kink(bind(REGISTRY[np.sqrt], (s,)) if isinstance(s, Tracer) else np.sqrt(s))


def _np_norm(args, kwargs):
    a = dict(zip(("x", "ord", "axis", "keepdims"), args))
    a.update(kwargs)
    x, ord_, axis, keepdims = a["x"], a.get("ord"), a.get("axis"), bool(a.get("keepdims", False))
    nd = np.ndim(x)
    if np.size(bottom(x)) == 0:  # NumPy's value (0 where its maxima start at 0) or error; no derivative
        val = np.linalg.norm(np.asarray(bottom(x)), ord_, axis, keepdims)
        return val + 0.0 * np.sum(np.real(x))
    if axis is None and (ord_ is None or (isinstance(ord_, str) and ord_ in ("f", "fro") and nd == 2)
                         or (ord_ == 2 and nd == 1)):
        # NumPy's own formula (dot products), so that the value has NumPy's bits
        v = np.ravel(x, order="K")
        if np.iscomplexobj(bottom(v)):
            re, im = np.real(v), np.imag(v)
            s = np.dot(re, re) + np.dot(im, im)
        else:
            s = np.dot(v, v)
        # at the zero vector the norm has no derivative: 0 there (a subgradient, what central
        # differences and sqrt(sum(x**2)) give), in both modes, rather than inf * 0
        if bottom(s) == 0:
            res = _norm_kink(s) * 0.0
        else:
            res = np.sqrt(s)
        return np.reshape(res, (1,) * nd) if keepdims else res
    if axis is None:
        axis = tuple(range(nd))
    if isinstance(axis, (int, np.integer)):
        axis = (int(axis),)
    if len(axis) == 1:
        ax = axis[0]
        if ord_ is None or ord_ == 2:
            return _norm_root(np.sum(_abs2(x), axis=ax, keepdims=keepdims))
        if ord_ == np.inf:
            return np.max(np.abs(x), axis=ax, keepdims=keepdims)
        if ord_ == -np.inf:
            return np.min(np.abs(x), axis=ax, keepdims=keepdims)
        if ord_ == 0:  # (NumPy's count, in the real dtype of x: float32 for a float32 x)
            xb = bottom(x)
            dt = xb.real.dtype if xb.dtype.kind in "fc" else np.float64
            return np.sum(xb != 0, axis=ax, keepdims=keepdims).astype(dt)
        if ord_ == 1:
            return np.sum(np.abs(x), axis=ax, keepdims=keepdims)
        if isinstance(ord_, str):
            raise ValueError(f"Invalid norm order '{ord_}' for vectors")
        ret = np.sum(np.abs(x) ** ord_, axis=ax, keepdims=keepdims)
        return ret ** np.reciprocal(ord_, dtype=bottom(ret).dtype)  # (NumPy's: 1/ord in the sum's dtype)
    if len(axis) != 2:
        raise ValueError("Improper number of dimensions to norm.")
    r, c = (axis[0] % nd, axis[1] % nd)
    if ord_ in (None, "fro", "f"):
        return _norm_root(np.sum(_abs2(x), axis=axis, keepdims=keepdims))
    if ord_ in (1, -1):
        s = np.sum(np.abs(x), axis=r, keepdims=True)
        res = np.max(s, axis=c, keepdims=True) if ord_ == 1 else np.min(s, axis=c, keepdims=True)
    elif ord_ in (np.inf, -np.inf):
        s = np.sum(np.abs(x), axis=c, keepdims=True)
        res = np.max(s, axis=r, keepdims=True) if ord_ == np.inf else np.min(s, axis=r, keepdims=True)
    elif ord_ in (2, -2, "nuc"):
        xm = np.moveaxis(x, (r, c), (-2, -1))
        sv = np.linalg.svd(xm, compute_uv=False)
        # (the first or last of the descending values, as np.max and np.min pick them: a gather, which reads
        # no other value, so the repeated zeros of a rank-deficient matrix stay unread for a second derivative)
        res = sv[..., 0] if ord_ == 2 else sv[..., -1] if ord_ == -2 else np.sum(sv, axis=-1)
        if keepdims:
            res = np.expand_dims(np.expand_dims(res, min(r, c)), max(r, c))
        return res
    else:
        raise ValueError("Invalid norm order for matrices.")
    if not keepdims:
        res = np.squeeze(res, axis=(r, c))
        if np.ndim(res) == 0:
            res = res[()]  # NumPy's scalar, as its reductions give
    return res


FUNCTIONS[np.linalg.norm] = _np_norm


# -- helpers for the factorizations ---------------------------------------------
#
# Every rule below is the adjoint, for the real inner product Re tr(Āᴴ dA), of
# its forward rule (PyTorch's convention, used by the whole package). The
# forward rules are written in terms of the factors, so they are differentiable
# again (higher order) wherever the factorization itself is.


def _H(a):
    """Conjugate transpose of the last two axes."""
    return _cj(_mT(a))


def _diag(a):
    return np.diagonal(a, axis1=-2, axis2=-1)


def _diag_embed(v):
    return v[..., :, None] * np.eye(np.shape(v)[-1])


def _is_complex(x):
    return np.iscomplexobj(bottom(x))


def _re(x):
    return np.real(x) if _is_complex(x) else x


def _pair_inv(v, pairs=None):
    """F[..., i, j] = 1 / (v_j - v_i) off the diagonal, 0 on it, and 0 where ``pairs`` (the repeated values'
    pairs, _repeated_pairs's) is True: dropped, with no 1/0 computed."""
    eye = np.eye(np.shape(v)[-1])
    d = v[..., None, :] - v[..., :, None] + eye
    if pairs is None:
        return 1.0 / d - eye
    return np.where(pairs, 0.0, 1.0 / np.where(pairs, 1.0, d) - eye)


SECOND_ORDER_RTOL = 1e-5  # float64 values closer than this: the second derivative through the vectors is refused


def _second_order_rtol(dtype):
    """SECOND_ORDER_RTOL for values of ``dtype``: the second derivative's rounding error grows as
    eps |A| / gap² (measured on eigh, svd and eig matrix functions: 1.8e-8 of the Hessian at a gap
    of 1e-4, 3.4e-4 at 1e-6, 2e-2 at 1e-7 in double; 2e-3 at 1e-3 and 0.3 at 1e-4 in single), so
    1e-5 in double and 5e-3 in single precision keep it below about 1e-5."""
    eps = float(np.finfo(dtype).eps) if np.dtype(dtype).kind in "fc" else _EPS64
    return SECOND_ORDER_RTOL if eps <= _EPS64 else 5e-3


def _near_tie_refusal(v, what, sel=slice(None)):
    """Where an outer differentiation traces the values ``v`` of a rule's vector derivative (a
    second derivative through the vectors) and two of them are nearly repeated, the refusal: the
    vectors' derivative divides by their gap, its own derivative by its square, which amplifies
    rounding into wrong numbers (eigh's Hessian 2.4x off at a relative gap of 1e-8 that the first
    derivative passes to 1.5e-8); else None."""
    if np.shape(v)[-1] < 2 or not _differentiated(v):
        return None
    gap = _near_tie_second(v, sel)
    if gap is None:
        return None
    return not_implemented(
        f"{what}: a second derivative through its vectors at values {gap:.1e} apart (relative to the largest; "
        f"below {_second_order_rtol(np.result_type(bottom(v))):.0e}): the vectors' derivative divides by that "
        "gap and its own derivative by its square, which amplifies rounding into numbers wrong by more than "
        "1e-5 (the first derivative, divided once, is accurate there). Write the function of the matrix with a "
        "rule of its own (mutagrad.scipy.linalg.expm/logm/sqrtm, np.linalg.solve/inv) or of the values only "
        "(np.linalg.eigvalsh, norms), or evaluate it where the values are further apart.")


def _differentiated(v) -> bool:
    """Whether an outer differentiation carries a derivative in ``v`` (a constant traced array, an
    argument not differentiated there, carries none)."""
    t = v
    while isinstance(t, Tracer):
        if _carries_derivative(t):
            return True
        t = t._value
    return False


def _near_tie_second(v, sel=slice(None)):
    """The smallest relative gap between two of the values ``v`` (one of them among ``sel``: a slice, a boolean
    (..., n) mask, or the pairs themselves, a boolean (..., n, n) mask) where it is below the second order's
    threshold (a plain number), else None."""
    b = np.asarray(bottom(v))
    if not np.issubdtype(b.dtype, np.floating) and b.dtype.kind != "c":
        return None
    scale = np.max(np.abs(b), axis=-1, keepdims=True)
    gap = np.where(np.eye(b.shape[-1], dtype=bool), np.inf, np.abs(b[..., None, :] - b[..., :, None]))
    if type(sel) is slice:
        gap = gap[..., :, sel]
    else:
        gap = np.where(sel if np.ndim(sel) == b.ndim + 1 else sel[..., None, :], gap, np.inf)
    if gap.size == 0:
        return None
    rel = np.min(gap / np.where(scale > 0, scale, 1.0)[..., None])
    return float(rel) if rel < _second_order_rtol(b.dtype) else None


REPEATED_RTOL = 1e-10  # float64 values closer than this (relative to the largest) count as repeated
_EPS64 = float(np.finfo(np.float64).eps)


def _repeated_rtol(dtype):
    """REPEATED_RTOL for values of ``dtype``: the vector derivatives' rounding error grows as
    eps |A| / gap, so lower precisions need wider gaps: 1e-10 in double, scaled by
    (eps / eps64)^0.6, 1.8e-5 in single precision (float32, complex64), where relative gaps
    of 7e-6 left 5-9 % of an eigh-based matrix function's derivative to rounding and gaps of
    1.7e-5 and more left 1e-5 to 2.5e-4."""
    eps = float(np.finfo(dtype).eps) if np.dtype(dtype).kind in "fc" else _EPS64
    return REPEATED_RTOL if eps <= _EPS64 else REPEATED_RTOL * (eps / _EPS64) ** 0.6


def _repeated(v):
    """Whether ``v`` (eigen- or singular values) has a repeated entry, up to rounding: the
    vector derivatives divide by the differences, so values 1e-16 apart (a rank-deficient
    matrix's zero singular values, [5.6, 7e-16, 0]) amplify rounding into wrong numbers as surely
    as exactly equal ones make them undefined. A plain decision."""
    return np.shape(bottom(v))[-1] >= 2 and bool(np.any(_repeated_pairs(v)))


class _TieReads:
    """What the reverse passes of the eigen- and singular-value calls at one repeated value in one
    differentiation read: the values, the vectors. V f(w) Vᴴ from two calls, eigvalsh's values and
    eigh's vectors (a Hencky strain at F = I), hides its tied block from the cotangents as one call's
    does (see _zero_hides_a_tie), where neither call sees both; the calls need not be on one matrix:
    eigvalsh(F @ F.T)'s values with eigh(F.T @ F)'s vectors, a permuted matrix's, np.linalg.eigvals'
    (the regress57 tester), so they meet by their tied values (``tied``)."""

    __slots__ = ("values", "vectors", "tied", "__weakref__")

    def __init__(self, tied):
        self.values = self.vectors = False
        self.tied = tied


_TIE_READS: weakref.WeakValueDictionary = weakref.WeakValueDictionary()  # (level, serial) -> _TieReads
_TIE_SERIAL = itertools.count()


def _tie_reads(a, values, squares=False):
    """The _TieReads of the repeated values among ``values`` (eigen- or singular values of matrix ``a``)
    in the running level, which the calls whose repeated values agree with them share (to 1e-8
    relative); None where the values are not repeated. ``squares``: singular values, which meet
    eigenvalues as themselves and as their squares (those of A^T A)."""
    if not _repeated(values):
        return None
    vb = np.asarray(bottom(values))
    tied = vb[np.any(_repeated_pairs(values), axis=-2)].ravel()
    if squares:
        tied = np.concatenate([tied, tied * tied])
    level = id(STATE.levels[-1]) if STATE.levels else 0
    for (lv, _), reads in list(_TIE_READS.items()):
        if lv == level:
            d = np.abs(tied[:, None] - reads.tied[None, :])
            scale = np.maximum(np.abs(tied[:, None]), np.abs(reads.tied[None, :]))
            close = d <= 1e-8 * np.maximum(scale, np.finfo(float).tiny)
            if np.any(close):
                new = tied[~np.any(close, axis=1)]  # (the chain's other values; a loop's calls add none)
                if new.size:
                    reads.tied = np.concatenate([reads.tied, new])
                return reads
    reads = _TIE_READS[(level, next(_TIE_SERIAL))] = _TieReads(tied)
    return reads


def _read_apart(reads, values, vectors):
    """Note what a call's cotangents read (``values``, ``vectors``: not symbolic zeros); whether the matrix's
    values and vectors are now both read, by different calls (a call reading both decides by itself)."""
    if reads is None or (values and vectors):
        return False
    reads.values = reads.values or values
    reads.vectors = reads.vectors or vectors
    return reads.values and reads.vectors


_APART = ("the values of one call and the vectors of another at repeated values (V f(w) Vᵀ with w from "
          "np.linalg.eigvalsh, eigvals or svd(compute_uv=False) and V from np.linalg.eigh or svd, of the same "
          "matrix or of one with the same repeated value, F @ F.T beside F.T @ F: the same function as from one "
          "call, whose tied block no cotangent shows)")


def _zero_values(S):
    """Which singular values ``S`` are zero, up to rounding (as _repeated)."""
    b = np.asarray(bottom(S))
    scale = np.max(b, axis=-1, keepdims=True) if b.size else 0.0
    return b <= _repeated_rtol(b.dtype) * scale


def _zero_kinks(S, m, n, d, values_only=False):
    """The derivatives (tangents or cotangents) ``d`` of the singular values ``S`` of an m x n matrix, 0 at a zero
    value whose vectors are not unique (m != n, whose larger side's null space has two dimensions or more, or
    a repeated zero): there the value is a cone, |t| times the norm of dA's part in the null spaces, with no
    linear derivative, and u_kᴴ dA v_k, through the vectors LAPACK returned, is a subgradient chosen by its
    basis (another basis gave -0.2 or 0.65 for 0.78 at a 5 x 3 matrix of rank 2); 0 is the symmetric one, what
    central differences give, as |x| and a norm at their zero. A single zero of a square matrix keeps its
    derivative, the value continued through zero, where the vectors are read too (``values_only`` False: the
    factorization continued through zero, whose reconstruction U S Vᴴ has the derivative dA); of the values
    alone (compute_uv=False, a nuclear norm, or no cotangent of the vectors) it is 0 too: the sign of that
    continuation is LAPACK's, u and v of a zero value having a sign each (the gradient of norm(H, 'nuc') at a
    3 x 3 matrix of rank 2 differed from central differences by u₃v₃ᵀ, and from that of Hᵀ: the lowrank
    tester). First order only: differentiated again (traced values), refused or watched as before."""
    if is_zero(d) or isinstance(d, Tracer) or isinstance(S, Tracer):
        return d
    z = _zero_values(S)
    if m == n and not values_only:
        z = z & (np.sum(z, axis=-1, keepdims=True) > 1)
    return np.where(z, 0.0, d) if np.any(z) else d


def _has_zero(S):
    """Whether singular values ``S`` include a zero, up to rounding."""
    return bool(np.any(_zero_values(S)))


def _tri(n, lower=True):
    """A float mask of the strict lower (or upper) triangle."""
    m = np.tri(n, k=-1)
    return m if lower else m.T


def _repeated_pairs(v):
    """Boolean (..., n, n): the pairs i != j of values ``v`` repeated up to rounding (see
    :func:`_repeated`)."""
    b = np.asarray(bottom(v))
    n = b.shape[-1]
    scale = np.max(np.abs(b), axis=-1, keepdims=True) if b.ndim > 1 else np.max(np.abs(b), initial=0.0)
    gap = np.abs(b[..., None, :] - b[..., :, None])
    return (gap <= _repeated_rtol(b.dtype) * np.asarray(scale)[..., None]) & ~np.eye(n, dtype=bool)


def _tie_rtol(b):
    """How close (relative to the largest value) values of the float array ``b`` are tied for
    _tie_mean: what LAPACK's rounding leaves between exactly equal ones, 4 max(n, 16) machine
    epsilons (1.4e-14 for a 3 x 3 float64 matrix, 9e-13 for 1000 x 1000). Values further apart
    are resolved: each value's own derivative (its vector's) is right, and a tolerance as wide
    as the vectors' (REPEATED_RTOL) would halve the derivative of a value 1e-10 from zero."""
    eps = np.finfo(b.dtype if b.dtype.kind in "fc" else np.float64).eps
    return 4 * max(b.shape[-1], 16) * eps


def _tie_mean(w, d):
    """The derivatives (tangents or cotangents) ``d`` of the values ``w`` with those of each
    group of equal values (up to LAPACK's rounding, _tie_rtol) replaced by the group's mean. At a
    tie a single value has no derivative (its one-sided slopes differ), and the vector LAPACK
    returns would pick one of them by chance: the mean, Re tr(Vₖᴴ dA Vₖ) / k over the group's
    eigenspace, is basis-invariant and what central differences give. A symmetric function of
    the tied values (their sum, sum(f(w))) sees no change. The averaging matrix is symmetric,
    so tangents and cotangents take the same one."""
    if is_zero(d) or np.shape(bottom(w))[-1] < 2:
        return d
    b = np.asarray(bottom(w))
    order = np.argsort(b, axis=-1)
    sb = np.take_along_axis(b, order, axis=-1)
    scale = np.max(np.abs(b), axis=-1, keepdims=True)
    tied = np.diff(sb, axis=-1) <= _tie_rtol(b) * scale  # (neighbours in sorted order: chains of ties)
    if not tied.any():
        return d
    runs = np.concatenate((np.zeros(sb.shape[:-1] + (1,), int), np.cumsum(~tied, axis=-1)), axis=-1)
    group = np.empty_like(runs)
    np.put_along_axis(group, order, runs, axis=-1)
    same = group[..., :, None] == group[..., None, :]
    M = same / np.sum(same, axis=-1, keepdims=True)
    return np.matmul(M, d[..., None])[..., 0]


def _distinct_part(w, gV, pairs=None):
    """For vectors whose values ``w`` repeat: F = _pair_inv(w) with the repeated pairs (``pairs``,
    default _repeated_pairs(w)) dropped, if the cotangent ``gV`` reads no vector of a repeated
    value (a distinct value's vector has a derivative: its sum over each cluster, P / (λ - λc),
    is basis-invariant); else None (the cotangent needs divided differences the cluster does
    not have)."""
    if pairs is None:
        pairs = _repeated_pairs(w)
    if _reaches(gV, np.any(pairs, axis=-2)[..., None, :]):  # (the columns of repeated values)
        return None
    return _pair_inv(w, pairs)


def _zero_hides_a_tie(tied, gw, *gvs, by_value=False):
    """Whether the vectors of tied values (``tied``: a (..., n) mask; their cotangents
    ``gvs``, zero there in value) may still carry a derivative the cotangents do not show:
    V f(w) Vᴴ with f = 0 at the tie (log w at w = 1, w at w = 0) sends the vectors a zero
    cotangent, and its derivative in the tied block, f'(λ) Pᵀ dA P, is made of 0 / 0 terms
    (the hyperelastic tester: the Hencky stiffness at F = I lost its shear part). Only a
    symbolic zero says the vectors are unused; else a value cotangent ``gw`` that is not a
    symbolic zero refuses (True): the values are read beside the vectors, as in V f(w) Vᴴ, whose
    tied block the cotangents do not show even where gw is 0 there (a pure-shear misfit of a
    Hencky strain at F = I: gw's diagonal is 0, the shear block is not: the newfeat21 tester);
    and a traced cotangent (a zero that may have a derivative) leaves the value and refuses its
    derivative ("second"); False: nothing hidden (the vectors of distinct values alone).
    ``by_value``: only a value cotangent nonzero at ``tied`` refuses (a non-square matrix's zero
    singular value, whose other vectors' derivative a function of the nonzero values and their
    vectors reads with the values: U[:, :r] and s[:r])."""
    if all(is_zero(g) for g in gvs):
        return False
    if _reaches(gw, tied) if by_value else not is_zero(gw):
        return True
    return "second" if _traced(gw, *gvs) else False


def _tied_of(w):
    """Which values ``w`` are repeated (..., n)."""
    return np.any(_repeated_pairs(w), axis=-2)


def _read_at(read, tied) -> bool:
    """Whether an operation is known to read a vector (column) where ``tied`` (..., n) is True, by ``read``
    (tape.read_mask of the vectors, (..., m, n); None: not known)."""
    return read is not None and bool(np.any(np.any(read, axis=-2) & np.asarray(tied)))


def _unread(read, tied) -> bool:
    """Whether no operation read the vectors (columns) where ``tied`` (..., n) is True, by ``read``
    (tape.read_mask of the vectors, (..., m, n); None: not known, so read)."""
    return read is not None and not _read_at(read, tied)


# the identity whose own derivative is not implemented: a pullback's result (its value right) whose
# derivative, at a tie, needs divided differences the traced cotangents do not show
_no_second_p = refusing_identity("a repeated eigenvalue's second derivative")


def _no_second(x, hidden, what):
    """``x`` (a pullback's result) with its derivative refused where ``hidden`` is "second"."""
    if hidden != "second" or not isinstance(x, Tracer):
        return x
    return bind(_no_second_p, (x,), {"why": _degenerate(what).message})


def _herm_in(a, lower):
    """The Hermitian matrix LAPACK reads from ``a``: one triangle, mirrored,
    and the real part of the diagonal (the other triangle is ignored)."""
    n = np.shape(a)[-1]
    off = np.where(_tri(n, lower) != 0, a, 0)  # (not a * mask: a NaN in the other triangle, which
    return off + _H(off) + np.where(np.eye(n) != 0, _re(a), 0)  # LAPACK never reads, would spread)


def _herm_in_T(g, lower):
    """Transpose of :func:`_herm_in`: ``tril(G, -1) + tril(Gᴴ, -1) + Re diag G``."""
    n = np.shape(g)[-1]
    return (g + _H(g)) * _tri(n, lower) + _re(g) * np.eye(n)


def _acc(acc, t):
    """``acc + t`` where either may be a symbolic zero."""
    if is_zero(acc):
        return t
    return acc if is_zero(t) else acc + t


def _all_zero(*ts):
    return all(is_zero(t) for t in ts)


# (the function, the user's line) of a values-only reverse pass running now inside an outer
# differentiation (eigvalsh's, svd(compute_uv=False)'s): its vectors are computed traced, and
# where they have no derivative the refusal is about that function's second derivative
_VALUES_PULLBACK: list = []


class _ValuesPullback:
    """``with _ValuesPullback(name, where):`` around the vectors a values-only pullback computes."""

    __slots__ = ("entry",)

    def __init__(self, name, where):
        self.entry = (name, where)

    def __enter__(self):
        _VALUES_PULLBACK.append(self.entry)

    def __exit__(self, *exc):
        _VALUES_PULLBACK.pop()


def _within(entry):
    """``with _within(entry):`` inside the values-only pullback ``entry`` (an entry of
    _VALUES_PULLBACK taken when the forward ran: a pullback runs after it has exited) again; no
    entry, nothing."""
    return contextlib.nullcontext() if entry is None else _ValuesPullback(*entry)


def _values_where(a):
    """The user's line, for a values-only rule whose argument an outer differentiation traces
    (see _VALUES_PULLBACK); None otherwise (no frame walk in a first-order run)."""
    return user_line() if isinstance(a, Tracer) else None


def _second_order_refusal(name, where):
    return NotImplementedTangent(
        f"{name} at repeated values (up to rounding): its second derivative goes through the vectors "
        "of its reverse pass, which have no derivative there (a second derivative of a smooth function "
        "of the values needs that function's divided differences, which its cotangent does not carry). "
        "Write the quantity without the spectrum where there is such a form (log det: "
        "np.linalg.slogdet(A)[1]; the sum of squares: np.sum(A * A); the sum: np.trace(A); a matrix "
        "function: np.linalg.solve / inv, mutagrad.scipy.linalg.expm), or evaluate it off the tie (exact "
        "ties are special points: a generic perturbation splits them)", where)


def _degenerate(what, forward=False):
    if _VALUES_PULLBACK:  # (the vectors a values-only pullback computes, differentiated by either mode)
        return _second_order_refusal(*_VALUES_PULLBACK[-1])
    if forward == "partial":  # (_eigh_dV, _eig_jvp, a real _svd_jvp: the vectors of distinct values keep theirs)
        mode = ("The function read such a vector (forward mode keeps the tangents of the other vectors, those "
                "of distinct values, so a function reading only those, of any member of a stack, has one). ")
    elif forward:
        # (the reverse passes of eigh, svd and eig take the vectors of the distinct values)
        mode = ("Forward mode computes the tangents of all the vectors, so one without a derivative leaves "
                "none: reverse mode (mg.grad, mg.vjp, mg.jacobian(f, mode=\"rev\")) differentiates a function "
                "that reads only vectors of distinct values (nonzero ones for a non-square matrix's singular "
                "vectors: a truncated SVD keeping those). ")
    else:
        mode = ""
    cot = "its tangent" if forward else "the cotangent"
    return not_implemented(
        f"{what}: the vectors have no derivative at repeated values (for the singular vectors of a "
        f"non-square matrix, also at a zero singular value), nor a usable one at nearly repeated values "
        "(closer than 1e-10 relative to the largest in double precision, 1.7e-5 in single precision, and "
        "for np.linalg.eig closer than the rounding error their condition number allows, as a Jordan block "
        "that rounding split: their derivative divides by the difference, which rounding dominates). "
        f"{mode}A function of them that has one there (one invariant to the choice of basis of each eigenspace, as V f(w) Vᵀ) needs divided differences "
        f"that cannot be formed from {cot}: compute such a quantity without the vectors "
        "(np.linalg.inv, solve, slogdet, eigvalsh alone; a matrix function by mutagrad.scipy.linalg.expm, logm or "
        "sqrtm, which have rules: P = expm(Q * t), a Hencky strain logm(F.T @ F) / 2, the polar factor "
        "U @ Vt as mutagrad.scipy.linalg.polar(F)[0] (a rotation, also at repeated singular values); the density "
        "matrix of a filled degenerate shell, C[:, :k] @ C[:, :k].T with "
        "a gap after value k, as the spectral projector (I - S) / 2, S = A @ inv(sqrtm(A @ A)), A = H - mu I for "
        "a mu = mg.stop_gradient(...) in the gap; a whole group's eigenspace from the other vectors, whose values "
        "are distinct: MUSIC's noise projector En @ En.conj().T as I - Es @ Es.conj().T, Es the signal vectors), "
        "or use only the values. (A second derivative of the values, "
        "np.linalg.eigvalsh's too, goes through the vectors of the reverse pass: at "
        "repeated values it has no general formula from the cotangent either.)"
    )


def call_args(names, args, kwargs, **defaults):
    """Positional and keyword arguments of a NumPy call as one dict (None when absent)."""
    d = dict.fromkeys(names)
    d.update(defaults)
    d.update(zip(names, args))
    d.update(kwargs)
    return d


def _handler(prim, names, nargs=1, **defaults):
    """A FUNCTIONS handler binding ``prim`` to the first ``nargs`` arguments,
    the others normalized into keywords (positional or not, with defaults)."""

    def handler(args, kwargs):
        d = call_args(names, args, kwargs, **defaults)
        return bind(prim, tuple(d.pop(k) for k in names[:nargs]), d)

    return handler


# -- cholesky ------------------------------------------------------------------
# A = L Lᴴ: dL = L Φ(L⁻¹ dA L⁻ᴴ), Φ = strict lower triangle + half the diagonal;
# Ā = L⁻ᴴ Φ(Lᴴ L̄) L⁻¹, then folded onto the triangle LAPACK reads.


def _cholesky_impl(a, upper=False):
    return np.linalg.cholesky(a, upper=upper)


cholesky_p = get_primitive(_cholesky_impl, "np.linalg.cholesky")


def _phi(x):
    n = np.shape(x)[-1]
    return x * (_tri(n) + 0.5 * np.eye(n))


def _cholesky_rrule(a, upper=False):
    y = _cholesky_impl(a, upper)

    def pullback(g):
        L, gL = (_H(y), _H(g)) if upper else (y, g)
        li = np.linalg.inv(L)
        G = np.matmul(np.matmul(_H(li), _phi(np.matmul(_H(L), gL))), li)
        return (_herm_in_T(G, not upper),)

    return y, pullback


def _cholesky_frule(primals, tangents, upper=False):
    (a,), (t,) = primals, tangents
    y = _cholesky_impl(a, upper)
    L = _H(y) if upper else y
    li = np.linalg.inv(L)
    dL = np.matmul(L, _phi(np.matmul(np.matmul(li, _herm_in(t, not upper)), _H(li))))
    return y, (_H(dL) if upper else dL)


cholesky_p.rrule, cholesky_p.frule = _cholesky_rrule, _cholesky_frule
FUNCTIONS[np.linalg.cholesky] = _handler(cholesky_p, ("a",), upper=False)


# -- the phase of complex eigenvectors and singular vectors ----------------------------
# LAPACK fixes it by making one row of the vectors real: row 0 of eigh's V with UPLO="L"
# (its tridiagonal reduction leaves e₀ alone), the last with "U"; for svd, row 0 of V
# (m >= n) or of U (m < n). The derivative of NumPy's own vectors then has, besides the
# phase-free part W, the phase term i c_k v_k that keeps that row real:
# c_k = -Im(W_rk) / V_rk. The row is found on the result (exactly or nearly real in
# every column); without one, a derivative that depends on the phase is not implemented.


def _real_row(V, rows):
    """One-hot (..., n, k) mask of the row among ``rows`` that is real in every column of
    V, per matrix of a stack; None if some matrix has none (or V is real)."""
    b = np.asarray(bottom(V))
    if b.dtype.kind != "c" or b.shape[-2] == 0 or b.shape[-1] == 0:
        return None
    n = b.shape[-2]
    pick = np.full(b.shape[:-2], -1)
    for r in rows:
        row = b[..., r % n, :]
        ok = np.all(np.abs(row.imag) <= 1e-12 * np.abs(row) + 1e-300, axis=-1) & np.all(row.real != 0, axis=-1)
        pick = np.where((pick < 0) & ok, r % n, pick)
    if np.any(pick < 0):
        return None
    return (np.arange(n)[:, None] == pick[..., None, None]).astype(float) * np.ones(b.shape[-1])


def _phase_fix(V, W, E):
    """W plus the phase term that keeps the rows ``E`` of V real (see above)."""
    vr = np.real(np.sum(E * V, axis=-2))
    return W - V * (1j * np.imag(np.sum(E * W, axis=-2)) / vr)[..., None, :]


def _phase_fix_T(V, c, E):
    """The cotangent the phase term adds to W's, for c_k = Im(v_kᴴ ḡ_k) summed over the
    vectors that share the phase (the adjoint of :func:`_phase_fix`)."""
    vr = np.real(np.sum(E * V, axis=-2))
    return E * (-1j * c / vr)[..., None, :]


def _phase_unknown(what):
    return not_implemented(
        f"{what}: the derivative depends on the phase of complex vectors, and LAPACK fixed "
        "it by a convention mutagrad did not recognise here. Differentiate phase-invariant "
        "quantities (|v|², v vᴴ, products of a vector with its conjugate), or fix the phase yourself "
        "(v * conj(v[0]) / abs(v[0]))")


# At a complex matrix whose imaginary part is zero, LAPACK's vectors are real and their sign
# differs from that of its vectors at every nearby complex matrix (the phase jumps in complex
# directions): there, a derivative that depends on the phase does not exist. The pullback
# refuses a cotangent that sees the phase; a function that depends on the sign only (real
# weights of real vectors), or a tangent, cannot be told apart from a phase-invariant one, and
# gets the derivative along the real matrices' branch.


def _real_members(*Vs):
    """The mask (over a stack's matrices; 0-d for one matrix) of the matrices whose complex
    vectors ``Vs`` (each of them) have imaginary part zero, or None if there is none."""
    on = None
    for V in Vs:
        b = np.asarray(bottom(V))
        if b.dtype.kind != "c" or b.size == 0:
            return None
        r = np.all(b.imag == 0, axis=(-2, -1))
        on = r if on is None else on & r
    return on if np.any(on) else None


def _phase_jumps(what, forward=False):
    fix = ("Forward mode cannot tell whether the function depends on the phase, so it refuses every "
           "complex direction there: differentiate phase-invariant quantities (|v|², v vᴴ) in reverse "
           "mode (grad, vjp; for a Hessian, mg.jacobian(mg.grad(f), mode=\"rev\"), reverse over reverse), or push "
           "real directions only" if forward else
           "Differentiate phase-invariant quantities (|v|², v vᴴ), or use a real matrix (real directions)")
    return not_implemented(
        f"{what} of a complex matrix whose imaginary part is zero: LAPACK's vectors there have another "
        "sign than at every nearby complex matrix, so a derivative that depends on their phase does not "
        f"exist in complex directions. {fix}")


def _leaves_reals(X, on):
    """Whether tangent ``X`` (Vᴴ dA V) leaves the real matrices at one of the stack's real
    members ``on`` (:func:`_real_members`): the phase jumps in that direction, and a derivative
    that depends on it does not exist (forward mode cannot tell whether the function does;
    the pullback can, see :func:`_sees_phase`)."""
    return bool(np.any(np.any(np.imag(bottom(X)) != 0, axis=(-2, -1)) & on))


def _phase_cotangent(c, on):
    """``c`` (the phase terms' cotangents, per vector) with those of the stack's real members
    ``on`` zero (a cotangent that does not see their phase: they have no phase term), or None
    when every member is real (no term at all)."""
    if on is None:
        return c
    if np.all(on):
        return None
    return c * ~on[..., None]


def _sees_phase(c, *cts):
    """Whether cotangents ``cts`` see the phase of the vectors: c_k = Im(v_kᴴ ḡ_k) summed over
    the vectors sharing a phase is not zero (relative to the cotangents' size)."""
    scale = max((float(np.max(np.abs(bottom(g)), initial=0.0)) for g in cts if not is_zero(g)), default=0.0)
    return bool(np.any(np.abs(bottom(c)) > 1e-10 * (1.0 + scale)))


# -- eigh, eigvalsh ---------------------------------------------------------------
# A = V diag(w) Vᴴ, X = Vᴴ dA V: dw = Re diag X, dV = V (F ∘ X), F_ij = 1/(w_j - w_i),
# plus, for complex V, the phase term that keeps LAPACK's real row real (see above).
# Ā = V (diag(w̄) + F ∘ (Vᴴ V̄)) Vᴴ, V̄ with the phase term's cotangent added.


def _eigh_rows(UPLO):
    return (0,) if UPLO.upper() == "L" else (-1,)


def _eigh_impl(a, UPLO="L"):
    return np.linalg.eigh(a, UPLO=UPLO)


def _eigvalsh_impl(a, UPLO="L"):
    return np.linalg.eigvalsh(a, UPLO=UPLO)


eigh_p = get_primitive(_eigh_impl, "np.linalg.eigh")
eigvalsh_p = get_primitive(_eigvalsh_impl, "np.linalg.eigvalsh")


def _eigh_T(w, V, gw, gV, lower, rows=None, what="np.linalg.eigh", generalized=False, read=None):
    """Ā (with ``generalized``, (Ā, B̄) of A V = B V Λ, Vᴴ B V = I) from the cotangents of the
    values and the vectors, folded onto the triangle read: Ā = V (diag(w̄) + F ∘ G) Vᴴ,
    B̄ = -V (diag(w̄ w) + (F ∘ G) Λ + diag(Re diag G) / 2) Vᴴ, G = Vᴴ V̄. ``rows``: where
    LAPACK keeps a row of complex vectors real (default: the standard problem's, by
    ``lower``; None: no convention known). ``read``: where the operations after the
    decomposition read the vectors (tape.read_mask: a boolean array of V's shape), or None
    where that is not known."""
    rows = ((0,) if lower else (-1,)) if rows is None else rows
    gw0, gw = gw, _tie_mean(w, gw)
    inner = ZERO if is_zero(gw) else _diag_embed(gw)
    inner_b = ZERO if is_zero(gw) else -_diag_embed(gw * w)
    hidden = False
    if not is_zero(gV):
        F = _pair_inv(w)
        # (F ∘ Vᴴ V̄ meets the pairs of the columns V̄ reaches: its derivative divides by their gaps squared)
        bad = _near_tie_refusal(w, what, np.any(np.asarray(bottom(gV)) != 0, axis=-2))
        if bad is None and _repeated(w):
            F = _distinct_part(w, gV)
            tied = _tied_of(w)
            # (inside eigvalsh's pullback, differentiated: its second derivative at the tie, whose
            # divided differences (f'(λi) - f'(λj)) / (λi - λj) no cotangent shows, refuses; a
            # vector of a repeated value that no operation read has no cotangent at all, not a zero
            # that may hide one: nothing hidden; one that an operation read, with a zero cotangent, may
            # hide one: a factor that vanishes at the point only, v @ (H - H0) @ v at H = H0, whose
            # derivative the basis LAPACK chose decides: regress84; where reads are not known, the cotangents)
            hidden = F is not None and (bool(_VALUES_PULLBACK) or (
                _zero_hides_a_tie(tied, gw0, gV) if read is None else _read_at(read, tied)))
            if F is None or hidden is True:
                bad = _degenerate(what)
        if bad is None and _is_complex(V):
            E = _real_row(V, rows) if rows else None
            c = np.imag(np.sum(_cj(V) * gV, axis=-2))
            on = _real_members(V)
            if E is None:
                if _sees_phase(c, gV):
                    bad = _phase_unknown(what)
            elif on is not None and _sees_phase(bottom(c) * on[..., None], gV):
                bad = _phase_jumps(what)
            else:
                c = _phase_cotangent(c, on)
                if c is not None:
                    gV = gV + _phase_fix_T(V, c, E)
        if bad is not None:
            return (bad, bad) if generalized else bad
        FG = F * np.matmul(_H(V), gV)
        inner = _acc(inner, FG)
        if generalized:
            G_diag = _re(np.sum(_cj(V) * gV, axis=-2))  # Re diag(Vᴴ V̄)
            inner_b = _acc(inner_b, -(FG * w[..., None, :]) - _diag_embed(G_diag) / 2)
    abar = ZERO if is_zero(inner) else _no_second(_herm_in_T(np.matmul(np.matmul(V, inner), _H(V)), lower),
                                                  hidden, what)
    if not generalized:
        return abar
    return abar, (ZERO if is_zero(inner_b) else
                  _no_second(_herm_in_T(np.matmul(np.matmul(V, inner_b), _H(V)), lower), hidden, what))


def _eigh_dV(w, V, X, rows, what="np.linalg.eigh", Q=ZERO, cols=None):
    """The vectors' tangent V C, C = F ∘ (X - Q Λ) - diag(Re diag Q) / 2 (X = Vᴴ Ȧ V; for
    the generalized problem Q = Vᴴ Ḃ V), with the phase term of complex vectors keeping
    LAPACK's real row (``rows``; None: no convention known) real. ``cols`` (start, stop): the
    tangents of those columns only (a subset of the vectors), which exist where their own values
    do not repeat, whatever the others do."""
    sel = slice(None) if cols is None else slice(*cols)
    pairs = _repeated_pairs(w)
    tied = None
    if np.any(pairs[..., :, sel]):
        # the columns of repeated values have no tangent; the others do (their values are apart from every
        # other): those poisoned only, as the pullback, which sees the columns read (a stack with one tied
        # member, the batchedlinalg tester)
        if _VALUES_PULLBACK or _differentiated(w):
            return _degenerate(what, forward=True)
        tied = np.any(pairs[..., :, sel], axis=-2)
    bad = _near_tie_refusal(w, what, sel)
    if bad is not None:
        return bad
    eye = np.eye(np.shape(w)[-1])[:, sel]
    ws = w[..., None, sel]
    F = _pair_inv(w, pairs if np.any(pairs) else None)[..., :, sel]  # (tied pairs: poisoned or unasked columns)
    C = F * (X[..., :, sel] if is_zero(Q) else X[..., :, sel] - Q[..., :, sel] * ws)
    if not is_zero(Q):
        C = C - eye * _re(_diag(Q))[..., None, sel] / 2
    dV = np.matmul(V, C)
    if _is_complex(V):
        Vs = V[..., :, sel]
        E = _real_row(Vs, rows) if rows else None
        if E is None:
            return _phase_unknown(what)
        on = _real_members(V)
        if on is not None and (_leaves_reals(X, on) or (not is_zero(Q) and _leaves_reals(Q, on))):
            return _phase_jumps(what, forward=True)
        dV = _phase_fix(Vs, dV, E)
    if tied is not None:
        return PartlyNotImplemented(dV, np.broadcast_to(tied[..., None, :], np.shape(dV)),
                                    _degenerate(what, forward="partial"))
    return dV


def _eigh_rrule(a, UPLO="L"):
    y = _eigh_impl(a, UPLO)
    within = _VALUES_PULLBACK[-1] if _VALUES_PULLBACK else None  # (the vectors of eigvalsh's pullback)
    reads = None if within is not None else _tie_reads(a, y[0])

    def pullback(cts):
        gw, gV = cts
        if _all_zero(gw, gV):
            return (ZERO,)
        # (which vectors the records after it read: a walk of the rest of the tape, where values tie only; none
        # of the tied values' read, nothing another call's values could hide)
        read = read_mask(1, kinks=False) if _repeated(y[0]) else None
        if _read_apart(reads, not is_zero(gw), not is_zero(gV) and not _unread(read, _tied_of(y[0]))):
            return (_degenerate(f"np.linalg.eigh, {_APART}"),)
        tied = None if not is_zero(gV) else _tied_values_pullback(a, lambda: y[0], gw, UPLO.upper() == "L",
                                                                  "np.linalg.eigh", lambda: read_mask(0))
        if tied is not None:
            return (tied,)
        with _within(within):  # (reverse over reverse: a refusal names eigvalsh's second derivative)
            return (_eigh_T(y[0], y[1], gw, gV, UPLO.upper() == "L", read=read),)

    return y, pullback


def _eigh_X(V, t, UPLO):
    return np.matmul(np.matmul(_H(V), _herm_in(t, UPLO.upper() == "L")), V)


def _eigh_frule(primals, tangents, UPLO="L"):
    (a,), (t,) = primals, tangents
    y = _eigh_impl(a, UPLO)
    w, V = y
    X = _eigh_X(V, t, UPLO)
    return y, (_tie_mean(w, _re(_diag(X))), _eigh_dV(w, V, X, _eigh_rows(UPLO)))


def _eigvalsh_rrule(a, UPLO="L"):
    y = _eigvalsh_impl(a, UPLO)
    where = _values_where(a)
    reads = _tie_reads(a, y)

    def pullback(g):
        if _read_apart(reads, not is_zero(g), False):
            return (_degenerate(f"np.linalg.eigvalsh, {_APART}"),)
        tied = _tied_values_pullback(a, lambda: y, g, UPLO.upper() == "L", "np.linalg.eigvalsh", lambda: read_mask(0))
        if tied is not None:
            return (tied,)
        with _ValuesPullback("np.linalg.eigvalsh", where):
            w, V = np.linalg.eigh(a, UPLO=UPLO)
        return (_eigh_T(w, V, g, ZERO, UPLO.upper() == "L"),)

    return y, pullback


def _eigvalsh_frule(primals, tangents, UPLO="L"):
    (a,), (t,) = primals, tangents
    w, V = np.linalg.eigh(a, UPLO=UPLO)
    return _eigvalsh_impl(a, UPLO), _tie_mean(w, _re(_diag(_eigh_X(V, t, UPLO))))


# -- the values' reverse pass at repeated values, differentiated ------------------------------------
# V diag(g) Vᴴ, the values' pullback, for a cotangent g that no outer level traces and that is equal
# across each group of repeated values, is Σ_C g_C P_C over the groups' projectors: a smooth function
# of the matrix where the values only repeat within groups (a projector P_C is smooth while its group
# stays apart from the others), though the vectors of a group have no derivative there. Its derivative
# is Daleckii-Krein's, V (L ∘ Vᴴ dA V) Vᴴ, L_ij = (g_i - g_j) / (λ_i - λ_j), 0 where g_i = g_j (within a
# group, and wherever g does not change): the Hessian of the largest generalized eigenvalue of a
# buckling problem whose geometric stiffness has a null space (repeated zero values; the truss tester).


def _spectral_sum_impl(c, g):
    _, V = np.linalg.eigh(c)
    return np.matmul(V * g[..., None, :], _H(V))


spectral_sum_p = get_primitive(_spectral_sum_impl, "a sum of spectral projectors")


def _spectral_map(c, g):
    """(Σ g_i v_i v_iᴴ of the Hermitian ``c``, its linear derivative in c, X ↦ V (L ∘ Vᴴ X V) Vᴴ, which is
    self-adjoint, and V)."""
    w, V = np.linalg.eigh(c)  # (traced by the levels outside: a third derivative meets their rules at the tie)
    gb = np.asarray(bottom(g))
    moved = gb[..., :, None] != gb[..., None, :]
    gap = w[..., :, None] - w[..., None, :]
    L = np.where(moved, (g[..., :, None] - g[..., None, :]) / np.where(moved, gap, 1.0), 0.0)

    def d(x):
        return np.matmul(np.matmul(V, L * np.matmul(np.matmul(_H(V), x), V)), _H(V))

    return np.matmul(V * g[..., None, :], _H(V)), d, V


def _spectral_sum_rrule(c, g):
    y, d, V = _spectral_map(c, g)
    # (g's cotangent, Re diag(Vᴴ ȳ V): a traced g is nonzero only at values that do not repeat, see
    # _tied_values_cotangent)
    return y, lambda gy: (d(gy), _re(_diag(np.matmul(np.matmul(_H(V), gy), V))))


def _spectral_sum_frule(primals, tangents):
    (c, g), (t, tg) = primals, tangents
    y, d, V = _spectral_map(c, g)
    dy = ZERO if is_zero(t) else d(t)
    if not is_zero(tg):
        dy = _acc(dy, np.matmul(V * tg[..., None, :], _H(V)))
    return y, dy


spectral_sum_p.rrule, spectral_sum_p.frule = _spectral_sum_rrule, _spectral_sum_frule


def _tied_values_cotangent(a, w, g, what, read=None):
    """Where the values' pullback of the matrix ``a`` (values ``w``: a function giving them, called only
    there; cotangent ``g``) runs inside an outer differentiation at repeated values, and can go through
    spectral_sum_p: g (each group of repeated values either unread by the operations after the call,
    ``read()``: tape.read_mask of the values, so that g is 0 there with no derivative, or read with g equal
    across it and carrying no derivative; and no pair of values it tells apart within the second order's
    rounding threshold: that refuses, as np.linalg.eigh's), or the refusal; else None (the vectors then, as
    at distinct values: a group read with a traced g, whose derivative needs divided differences of the
    function of the values that no cotangent carries, refuses there)."""
    if not isinstance(a, Tracer) or is_zero(g):
        return None
    w = w()
    if not _repeated(w):
        return None
    gb = np.asarray(bottom(g))
    moved = gb[..., :, None] != gb[..., None, :]
    pairs = _repeated_pairs(w)
    if carries_any_derivative(g):
        read = None if read is None else read()
        if read is None or np.any(np.asarray(read) & np.any(pairs, axis=-2)):
            return None
    elif np.any(moved & pairs):
        return None
    if _near_tie_second(w, moved) is not None:  # (a pair the weights tell apart, nearly tied)
        return _near_tie_refusal(w, what, moved) or None
    return g


def _tied_values_pullback(a, w, g, lower, what, read=None):
    """The values' pullback ``herm_in_T(V diag(g) Vᴴ)`` of np.linalg.eigvalsh (scipy.linalg.eigvalsh)
    inside an outer differentiation at repeated values, through spectral_sum_p (see
    :func:`_tied_values_cotangent`), or a refusal; None where that does not apply."""
    gb = _tied_values_cotangent(a, w, g, what, read)
    if gb is None or isinstance(gb, NotImplementedTangent):
        return gb
    return _herm_in_T(bind(spectral_sum_p, (_herm_in(a, lower), gb)), lower)


def _tied_values_pullback_gen(a, b, w, g, lower, what, read=None):
    """As :func:`_tied_values_pullback` (a refusal for both), for the generalized problem A v = λ B v: (Ā, B̄) =
    (V diag(g) Vᴴ, -V diag(g λ) Vᴴ), by B = L Lᴴ, C = L⁻¹ A L⁻ᴴ, V = L⁻ᴴ U: (L⁻ᴴ S L⁻¹, -L⁻ᴴ S C L⁻¹)
    with S = U diag(g) Uᴴ (which commutes with C)."""
    gb = _tied_values_cotangent(a if isinstance(a, Tracer) else b, w, g, what, read)
    if gb is None or isinstance(gb, NotImplementedTangent):
        return gb if gb is None else (gb, gb)
    Linv = np.linalg.inv(np.linalg.cholesky(_herm_in(b, lower)))
    C = np.matmul(np.matmul(Linv, _herm_in(a, lower)), _H(Linv))
    C = (C + _H(C)) / 2  # (Hermitian to rounding: eigh reads one triangle)
    S = bind(spectral_sum_p, (C, gb))
    return (_herm_in_T(np.matmul(np.matmul(_H(Linv), S), Linv), lower),
            _herm_in_T(-np.matmul(np.matmul(_H(Linv), np.matmul(S, C)), Linv), lower))


eigh_p.rrule, eigh_p.frule = _eigh_rrule, _eigh_frule
eigvalsh_p.rrule, eigvalsh_p.frule = _eigvalsh_rrule, _eigvalsh_frule
FUNCTIONS[np.linalg.eigh] = _handler(eigh_p, ("a", "UPLO"), UPLO="L")
FOOTPRINTS.update((eigh_p, eigvalsh_p))  # (their pullbacks ask which values and vectors were read)
FUNCTIONS[np.linalg.eigvalsh] = _handler(eigvalsh_p, ("a", "UPLO"), UPLO="L")


# -- svd ---------------------------------------------------------------------------
# A = U S Vᴴ (k = min(m, n) columns), dP = Uᴴ dA V, F_ij = 1/(s_j² - s_i²):
#   dS = Re diag dP
#   dU = U (F ∘ (dP S + S dPᴴ) + D) + (I - UUᴴ) dA V S⁻¹
#   dV = V (F ∘ (S dP + dPᴴ S) - D) + (I - VVᴴ) dAᴴ U S⁻¹,  D = i Im(diag dP) / 2S
# (D splits the phase of complex singular vectors evenly between U and V; only
# phase-invariant functions of U and V are defined.) The pullback is its adjoint.
# With full_matrices=True and m != n the extra columns span the complement of the
# range (of A's columns for U, of its rows for V). One extra column (|m - n| = 1) of a
# real matrix of full rank is unique up to its sign, a null vector: for w (Vh's last row,
# A w = 0, |w| = 1), dw = -A⁺ dA w = -V S⁻¹ Uᵀ dA w, and for u (U's last column),
# du = -U S⁻¹ Vᵀ dAᵀ u (the derivative of the branch LAPACK's sign picks); the pullbacks
# add -(U S⁻¹ Vᵀ w̄) wᵀ and -u (V S⁻¹ Uᵀ ū)ᵀ. Several extra columns are not unique (any
# rotation among them will do), nor complex ones (a phase): not implemented.


def _one_null_vector(a, S):
    """Whether svd(full_matrices=True) of ``a`` has exactly one extra singular vector, unique
    up to its sign: |m - n| = 1, a real matrix, no zero singular value."""
    m, n = np.shape(a)[-2:]
    return abs(m - n) == 1 and not _is_complex(a) and not _has_zero(S)


def _null_vector_jvp(U, S, Vh, y, t):
    """The tangent of the extra singular vector (see above): U's last column (m > n) or Vh's
    last row (m < n), from tangent ``t`` of A and the full factors ``y``."""
    m, n = np.shape(U)[-2], np.shape(Vh)[-1]
    if m < n:
        w = y[2][..., m, :]
        c = np.matmul(_mT(U), np.matmul(t, w[..., None]))[..., 0] / S
        return -np.matmul(_mT(Vh), c[..., None])[..., 0]
    u = y[0][..., :, n]
    c = np.matmul(Vh, np.matmul(_mT(t), u[..., None]))[..., 0] / S
    return -np.matmul(U, c[..., None])[..., 0]


def _null_vector_vjp(U, S, Vh, y, g):
    """Ā from the cotangent ``g`` of the extra singular vector (the adjoint of
    :func:`_null_vector_jvp`)."""
    m, n = np.shape(U)[-2], np.shape(Vh)[-1]
    if m < n:
        w = y[2][..., m, :]
        p = np.matmul(U, (np.matmul(Vh, g[..., None])[..., 0] / S)[..., None])[..., 0]
        return -(p[..., :, None] * w[..., None, :])
    u = y[0][..., :, n]
    q = np.matmul(_mT(Vh), (np.matmul(_mT(U), g[..., None])[..., 0] / S)[..., None])[..., 0]
    return -(u[..., :, None] * q[..., None, :])


_EXTRA_VECTORS = ("np.linalg.svd(full_matrices=True) of a non-square matrix: the extra singular vectors are not "
                  "unique (more than one of them, a complex matrix, or a matrix of lower rank: any rotation among "
                  "them will do). A function that does not read them is differentiated (or call "
                  "np.linalg.svd(a, full_matrices=False)); a function of the "
                  "projector onto them is: I - V Vᴴ from full_matrices=False (V = Vh.conj().T), or I - U Uᴴ for the "
                  "extra columns of U")


def _extra_unknown(d, extra, axis, message=_EXTRA_VECTORS):
    """The tangent of a full factor whose ``extra`` last columns (``axis`` -1) or rows (-2) have no derivative,
    from ``d``, the tangent of the others: theirs, and the extra ones poisoned only (a function that reads the
    others keeps its derivative, as the pullback's, which sees what is read)."""
    bad = not_implemented(message)
    if isinstance(d, NotImplementedTangent):
        return d
    if is_zero(d):
        return bad  # (no tangent for the known part either: nothing to keep; a zero input tangent is not asked)
    known = d.known if isinstance(d, PartlyNotImplemented) else d
    shape = list(np.shape(known))
    shape[axis] = extra
    return _appended(d, np.zeros(shape, np.result_type(bottom(known))), axis, bad)


def _svd_impl(a, full_matrices=True, compute_uv=True):
    return np.linalg.svd(a, full_matrices=full_matrices, compute_uv=compute_uv)


svd_p = get_primitive(_svd_impl, "np.linalg.svd")


def _svd_factors(a, y, full_matrices, compute_uv):
    """Reduced U, S, Vh of ``a``, taken from the primal result when it has them."""
    if not compute_uv:
        return np.linalg.svd(a, full_matrices=False)
    U, S, Vh = y
    k = np.shape(S)[-1]
    return U[..., :, :k], S, Vh[..., :k, :]


def _svd_jvp(U, S, Vh, dA, need_uv=True, partial=False):
    """(dU, dS, dVh) of the reduced SVD along dA. ``partial``: at a zero value of a real non-square matrix
    (one, not repeated), the vectors of the side whose null space has two dimensions or more are not unique and
    the others are: a PartlyNotImplemented for that side (its zero value's columns or rows), the rest computed
    (the terms through the arbitrary vector cancel), instead of refusing both factors (regress87)."""
    V = _H(Vh)
    dP = np.matmul(np.matmul(_H(U), dA), V)
    dS = _zero_kinks(S, np.shape(U)[-2], np.shape(Vh)[-1], _tie_mean(S, _re(_diag(dP))), not need_uv)
    if not need_uv:
        return dS
    m, k, n = np.shape(U)[-2], np.shape(S)[-1], np.shape(V)[-2]
    zero = pairs = None
    if _repeated(S) or (m != n and _has_zero(S)):
        whole = not partial or _is_complex(dP) or isinstance(S, Tracer)
        bad = _degenerate("np.linalg.svd", forward=True if whole else "partial")
        if whole:
            return bad, dS, bad
        # (the vectors of repeated values, zeros too, have no tangent, the others do: those poisoned only, as
        # eigh's, _eigh_dV; one zero of a non-square matrix: see ``partial``)
        poison, pairs = bad, _repeated_pairs(S)
        zero = _zero_values(S)
    bad = _near_tie_refusal(S, "np.linalg.svd")
    if bad is not None:
        return bad, dS, bad
    F = _pair_inv(S * S, pairs)
    Sr, Sc = S[..., None, :], S[..., :, None]
    dPh = _H(dP)
    dUa = F * (dP * Sr + Sc * dPh)
    dVa = F * (Sc * dP + dPh * Sr)
    if _is_complex(dP):
        D = _diag_embed(1j * np.imag(_diag(dP)) / (2 * S))
        dUa, dVa = dUa + D, dVa - D
    dU = np.matmul(U, dUa)
    dV = np.matmul(V, dVa)
    Sd = Sr if zero is None else np.where(zero, 1.0, S)[..., None, :]  # (the zero's own columns: not kept)
    if m > k:
        dU = dU + (np.matmul(dA, V) - np.matmul(U, dP)) / Sd
    if n > k:
        dV = dV + (np.matmul(_H(dA), U) - np.matmul(V, dPh)) / Sd
    if zero is not None:
        tied = np.any(pairs, axis=-2)
        on_u, on_v = tied | (zero & (m > n)), tied | (zero & (n > m))  # (a lone zero: the larger side's vector)
        dVh = _H(dV)
        if np.any(on_u):
            dU = PartlyNotImplemented(dU, np.broadcast_to(on_u[..., None, :], np.shape(dU)), poison)
        if np.any(on_v):
            dVh = PartlyNotImplemented(dVh, np.broadcast_to(on_v[..., :, None], np.shape(dVh)), poison)
        return dU, dS, dVh
    if _is_complex(dP):  # the phase LAPACK fixes, shared by u_k and v_k
        E, of_v = _svd_real_row(U, V)
        on = _real_members(U, V)
        if E is None or (on is not None and _leaves_reals(dP, on)):
            bad = _phase_unknown("np.linalg.svd") if E is None else _phase_jumps("np.linalg.svd", forward=True)
            return bad, dS, bad
        R, dR = (V, dV) if of_v else (U, dU)
        c = -np.imag(np.sum(E * dR, axis=-2)) / np.real(np.sum(E * R, axis=-2))
        dU = dU + U * (1j * c)[..., None, :]
        dV = dV + V * (1j * c)[..., None, :]
    return dU, dS, _H(dV)


def _svd_unread(read, tied) -> bool:
    """Whether no operation read the singular vectors of the values where ``tied`` (..., k) is True:
    U's columns and Vh's rows, by ``read`` (their tape.read_mask's, either None: not known)."""
    if read is None or read[0] is None or read[1] is None:
        return False
    k = np.shape(tied)[-1]
    return _unread(read[0][..., :, :k], tied) and _unread(np.swapaxes(read[1], -1, -2)[..., :, :k], tied)


def _svd_read_at(read, tied) -> bool:
    """Whether an operation is known to read a singular vector of the values where ``tied`` (..., k) is True."""
    if read is None:
        return False
    k = np.shape(tied)[-1]
    return ((read[0] is not None and _read_at(read[0][..., :, :k], tied))
            or (read[1] is not None and _read_at(np.swapaxes(read[1], -1, -2)[..., :, :k], tied)))


def _svd_real_row(U, V):
    """(mask, whether it is of V) of the row LAPACK made real: row 0 of V (m >= n) or of U."""
    first, second = ((V, True), (U, False)) if np.shape(U)[-2] >= np.shape(V)[-2] else ((U, False), (V, True))
    for R, of_v in (first, second):
        E = _real_row(R, (0,))
        if E is not None:
            return E, of_v
    return None, False


def _svd_vjp(U, S, Vh, gU, gS, gVh, read=None):
    """Ā from the cotangents of U, S and Vh (``read``: where the operations after the decomposition
    read U and Vh, tape.read_mask's, or None)."""
    V = _H(Vh)
    m, k, n = np.shape(U)[-2], np.shape(S)[-1], np.shape(V)[-2]
    gS0, gS = gS, _zero_kinks(S, m, n, _tie_mean(S, gS), _all_zero(gU, gVh))
    hidden = False
    gP = ZERO if is_zero(gS) else _diag_embed(gS)
    if _all_zero(gU, gVh):
        return gP if is_zero(gP) else np.matmul(np.matmul(U, gP), Vh)
    F = None
    if _repeated(S):
        # a distinct value's vectors have a derivative when the cotangent reads no vector of a
        # repeated value (as eigh's, _distinct_part): the pairs of repeated values drop out
        rep = _tied_of(S * S)
        hidden = bool(_VALUES_PULLBACK) or _svd_read_at(read, rep) or (
            not _svd_unread(read, rep) and _zero_hides_a_tie(rep, gS0, gU, gVh))
        if _reaches(gU, rep[..., None, :]) or _reaches(gVh, rep[..., :, None]) or hidden is True:
            return _degenerate("np.linalg.svd")
        F = _distinct_part(S * S, ZERO)
    Sd = S  # the divisors of the terms that divide by a singular value
    zero = _zero_values(S) if m != n else None
    if zero is not None and np.any(zero):
        # a zero singular value of a non-square matrix: its vectors are not unique, but the
        # others' derivative is (the terms through the arbitrary u_k or v_k cancel), when the
        # cotangent does not reach the zero value's own vectors; those terms' numerators are
        # then zero, and so are they
        # (inside a values' pullback, differentiated again: the zero value's vectors read there, U diag(g) Vh with g
        # 0 at the point alone, have no derivative, as a tied one's: norm(x[None], 2) ** 2 at x = 0, regress85)
        hidden = hidden or (bool(_VALUES_PULLBACK) and not _all_zero(gU, gVh)) or _zero_hides_a_tie(
            zero, gS0, gU, gVh, by_value=True)
        if _reaches(gU, zero[..., None, :]) or _reaches(gVh, zero[..., :, None]) or hidden is True:
            return _degenerate("np.linalg.svd")
        Sd = np.where(zero, 1.0, S)
    if F is None:
        bad = _near_tie_refusal(S, "np.linalg.svd")
        if bad is not None:
            return bad
        F = _pair_inv(S * S)
    Sr, Sc = Sd[..., None, :], Sd[..., :, None]
    if _is_complex(U):  # the phase term's cotangent (see _svd_jvp), added to gU's or gVh's
        c = 0.0
        if not is_zero(gU):
            c = c + np.imag(np.sum(_cj(U) * gU, axis=-2))
        if not is_zero(gVh):
            c = c + np.imag(np.sum(Vh * _cj(gVh), axis=-1))
        E, of_v = _svd_real_row(U, V)
        on = _real_members(U, V)
        if E is None:
            if _sees_phase(c, gU, gVh):
                return _phase_unknown("np.linalg.svd")
        elif on is not None and _sees_phase(bottom(c) * on[..., None], gU, gVh):
            return _phase_jumps("np.linalg.svd")
        else:
            c = _phase_cotangent(c, on)
            if c is None:
                pass
            elif of_v:
                gVh = _acc(gVh, _H(_phase_fix_T(V, c, E)))
            else:
                gU = _acc(gU, _phase_fix_T(U, c, E))
    extra = ZERO
    if not is_zero(gU):
        Ju = np.matmul(_H(U), gU)
        gP = gP + (F * (Ju - _H(Ju))) * S[..., None, :]
        if _is_complex(Ju):
            gP = gP + _diag_embed(1j * np.imag(_diag(Ju)) / (2 * Sd))
        if m > k:
            extra = extra + np.matmul((gU - np.matmul(U, Ju)) / Sr, Vh)
    if not is_zero(gVh):
        gV = _H(gVh)
        Jv = np.matmul(Vh, gV)
        gP = gP + S[..., :, None] * (F * (Jv - _H(Jv)))
        if _is_complex(Jv):
            gP = gP - _diag_embed(1j * np.imag(_diag(Jv)) / (2 * Sd))
        if n > k:
            extra = extra + np.matmul(U, _H(gV - np.matmul(V, Jv)) / Sc)
    return _no_second(_acc(extra, np.matmul(np.matmul(U, gP), Vh)), hidden, "np.linalg.svd")


def _reaches(g, mask):
    """Whether cotangent ``g`` is nonzero anywhere ``mask`` (broadcast) is true."""
    if is_zero(g):
        return False
    return bool(np.any((np.asarray(bottom(g)) != 0) & mask))


def _extra_columns(g, k, axis):
    """The part of a cotangent of full U (axis -1) or Vh (axis -2) beyond the first k."""
    if is_zero(g) or np.shape(g)[axis] == k:
        return None, g
    lead = (Ellipsis, slice(None), slice(k, None)) if axis == -1 else (Ellipsis, slice(k, None), slice(None))
    keep = (Ellipsis, slice(None), slice(None, k)) if axis == -1 else (Ellipsis, slice(None, k), slice(None))
    return g[lead], g[keep]


def _svd_rrule(a, full_matrices=True, compute_uv=True, _impl=_svd_impl):
    """(``_impl``: the function computing the factors, another library's SVD.)"""
    y = _impl(a, full_matrices, compute_uv)
    where = None if compute_uv else _values_where(a)
    within = _VALUES_PULLBACK[-1] if _VALUES_PULLBACK and compute_uv else None  # (see _eigh_rrule)
    reads = None if within is not None else _tie_reads(a, y[1] if compute_uv else y, squares=True)

    def pullback(cts):
        # (which vectors the records after it read: a walk of the rest of the tape, where values tie only)
        read = (read_mask(0, kinks=False), read_mask(2, kinks=False)) if compute_uv and _repeated(y[1]) else None
        if compute_uv:
            vectors = not (is_zero(cts[0]) and is_zero(cts[2])) and not _svd_unread(
                read, _tied_of(y[1] * y[1]))  # (as eigh's)
            values = not is_zero(cts[1])
        else:
            values, vectors = not is_zero(cts), False
        if (values or vectors) and _read_apart(reads, values, vectors):
            return (_degenerate(f"np.linalg.svd, {_APART}"),)
        with _within(within):
            return _pullback(cts, read)

    def _pullback(cts, read):
        if not compute_uv or (is_zero(cts[0]) and is_zero(cts[2])):
            values = (cts, lambda: read_mask(0)) if not compute_uv else (cts[1], lambda: read_mask(1))
            what = "np.linalg.svd" + ("" if compute_uv else "(compute_uv=False)")
            tied = _tied_singular_pullback(a, y if not compute_uv else y[1], *values, what)
            if tied is not None:
                return (tied,)
        if not compute_uv:
            with _ValuesPullback("np.linalg.svd(compute_uv=False)", where):
                U, S, Vh = _svd_factors(a, y, full_matrices, compute_uv)
            return (_svd_vjp(U, S, Vh, ZERO, cts, ZERO),)
        U, S, Vh = _svd_factors(a, y, full_matrices, compute_uv)
        gU, gS, gVh = cts
        k = np.shape(S)[-1]
        xu, gU = _extra_columns(gU, k, -1)
        xv, gVh = _extra_columns(gVh, k, -2)
        extra = [x for x in (xu, xv) if x is not None and np.any(bottom(x) != 0)]
        Sn = S  # the singular values the null vector's pullback divides by
        if extra:
            m, n = np.shape(a)[-2:]
            if abs(m - n) != 1 or _is_complex(a):
                return (not_implemented(_EXTRA_VECTORS),)
            low = np.any(_zero_values(S), axis=-1)  # matrices of lower rank, judged one by one in a stack:
            if np.any(low):  # those whose null vector the function reads have no derivative
                if np.any(low & np.any(np.asarray(bottom(extra[0])) != 0, axis=(-2, -1))):
                    return (not_implemented(_EXTRA_VECTORS),)
                Sn = np.where(low[..., None], 1.0, S)  # (the others' cotangent there is zero)
            # (a function of the null vector only: its derivative needs no distinct singular values)
            gU, gVh = (ZERO if not isinstance(g, Tracer) and not is_zero(g) and not np.any(g) else g
                       for g in (gU, gVh))
        ga = _svd_vjp(U, S, Vh, gU, gS, gVh, read)
        if extra and not isinstance(ga, NotImplementedTangent):
            x = extra[0]
            ga = _acc(ga, _null_vector_vjp(U, Sn, Vh, y, x[..., :, 0] if xu is not None else x[..., 0, :]))
        return (ga,)

    return y, pullback


def _tied_singular_pullback(a, S, g, read, what):
    """The singular values' pullback U diag(g) Vᴴ inside an outer differentiation where values repeat or
    are 0, through spectral_sum_p of the Hermitian dilation [[0, A], [Aᴴ, 0]], whose values are ±σ (and
    |m - n| zeros: a zero singular value ties with them) and whose weights ±g give U diag(g) Vᴴ as its
    upper right block (see _tied_values_cotangent: each tied group unread, or read with one constant
    weight, so a zero singular value's weight must be 0); or the refusal; None where that does not apply."""
    if not isinstance(a, Tracer) or is_zero(g):
        return None
    m, n = np.shape(a)[-2:]
    sb = np.asarray(bottom(S))
    mid = np.zeros(sb.shape[:-1] + (m + n - 2 * min(m, n),))
    wh = np.concatenate((-sb, mid, sb[..., ::-1]), axis=-1)
    if not _repeated(wh):
        return None

    def rh():
        r = read()
        return None if r is None else np.concatenate((r, mid != 0, r[..., ::-1]), axis=-1)

    gh = _tied_values_cotangent(a, lambda: wh, np.concatenate((-g, mid, g[..., ::-1]), axis=-1), what, rh)
    if gh is None or isinstance(gh, NotImplementedTangent):
        return gh
    lead = np.shape(a)[:-2]
    dt = np.result_type(bottom(a))
    h = np.concatenate((np.concatenate((np.zeros(lead + (m, m), dt), a), axis=-1),
                        np.concatenate((_H(a), np.zeros(lead + (n, n), dt)), axis=-1)), axis=-2)
    return bind(spectral_sum_p, (h, gh))[..., :m, m:]


def _svd_frule(primals, tangents, full_matrices=True, compute_uv=True, _impl=_svd_impl):
    (a,), (t,) = primals, tangents
    y = _impl(a, full_matrices, compute_uv)
    U, S, Vh = _svd_factors(a, y, full_matrices, compute_uv)
    if not compute_uv:
        return y, _svd_jvp(U, S, Vh, t, need_uv=False)
    dU, dS, dVh = _svd_jvp(U, S, Vh, t, partial=True)
    m, n = np.shape(a)[-2:]
    if full_matrices and m != n:
        if not _one_null_vector(a, S):
            dU, dVh = (_extra_unknown(dU, m - n, -1), dVh) if m > n else (dU, _extra_unknown(dVh, n - m, -2))
        elif m > n and not isinstance(dU, NotImplementedTangent):
            dU = _appended(dU, _null_vector_jvp(U, S, Vh, y, t)[..., :, None], -1)
        elif m < n and not isinstance(dVh, NotImplementedTangent):
            dVh = _appended(dVh, _null_vector_jvp(U, S, Vh, y, t)[..., None, :], -2)
    return y, (dU, dS, dVh)


def _appended(d, extra, axis, poison=None):
    """Tangent ``d`` (an array, or a PartlyNotImplemented of the columns of repeated values: _svd_jvp) with the
    tangent ``extra`` of more columns (``axis`` -1) or rows (-2) appended: known, or with no derivative,
    ``poison`` (_extra_unknown). (The regress93 tester: a repeated value beside the null vector crashed the
    concatenation of its known tangent.)"""
    if poison is None and not isinstance(d, PartlyNotImplemented):
        return np.concatenate((d, extra), axis=axis)
    known, old = (d.known, d.unknown) if isinstance(d, PartlyNotImplemented) else (d, False)
    unknown = np.concatenate((np.broadcast_to(old, np.shape(known)), np.full(np.shape(extra), poison is not None)),
                             axis=axis)
    return PartlyNotImplemented(np.concatenate((known, extra), axis=axis), unknown,
                                d.poison if poison is None else poison)


svd_p.rrule, svd_p.frule = _svd_rrule, _svd_frule
FOOTPRINTS.add(svd_p)


_SVDResult = type(np.linalg.svd(np.eye(1)))


def _svd_hermitian(a, compute_uv):
    """NumPy's hermitian=True path, on traced values: SVD from eigh."""
    if not compute_uv:
        s = np.abs(np.linalg.eigvalsh(a))
        return np.sort(s, axis=-1)[..., ::-1]
    s, u = np.linalg.eigh(a)
    sidx = np.argsort(np.abs(bottom(s)), axis=-1)[..., ::-1]
    sgn = np.take_along_axis(np.sign(bottom(s)), sidx, axis=-1)
    s = np.take_along_axis(np.abs(s), sidx, axis=-1)
    u = np.take_along_axis(u, sidx[..., None, :], axis=-1)
    return _SVDResult(u, s, _H(u * sgn[..., None, :]))


def _np_svd(args, kwargs):
    d = call_args(("a", "full_matrices", "compute_uv", "hermitian"), args, kwargs,
               full_matrices=True, compute_uv=True, hermitian=False)
    if d["hermitian"]:
        return _svd_hermitian(d["a"], d["compute_uv"])
    return bind(svd_p, (d["a"],), {"full_matrices": bool(d["full_matrices"]), "compute_uv": bool(d["compute_uv"])})


FUNCTIONS[np.linalg.svd] = _np_svd
FUNCTIONS[np.linalg.svdvals] = lambda args, kwargs: np.linalg.svd(args[0], compute_uv=False)


# -- qr ------------------------------------------------------------------------------
# A = QR with m >= n (LAPACK's R has a real diagonal, which fixes the gauge):
#   dX = Qᴴ dA R⁻¹, Ω = Qᴴ dQ = L - Lᴴ + i Im diag dX (L = strict lower dX),
#   dR = (dX - Ω) R, dQ = dA R⁻¹ - Q (dX - Ω).
#   Ā = (Q̄ + Q B) R⁻ᴴ with M = R̄ Rᴴ - Qᴴ Q̄, B = triu(M, 1) + triu(M, 1)ᴴ + Re diag M.
# m < n: A = [X Y] with X square: (Q, R₁) = qr(X), R₂ = Qᴴ Y.
# A real square A (m = n): Q Qᵀ = I, so dQ = Q Ω and dR = X - Ω R with X = Qᵀ dA; Ω's strict
# lower part L solves tril(X) = tril(L R) column by column, which reads R's leading block
# R₁ = R[:n-1, :n-1] only (Q's last column is the complement of the others): L = tril([X₁ R₁⁻¹, 0]),
# X₁ = X[:, :n-1]. So a matrix of rank n - 1 (R's last diagonal entry 0, or rounding-small)
# has a derivative, where the general formula's dA R⁻¹ - Q Qᵀ dA R⁻¹ cancels two huge terms.
# Its adjoint: K = tril(G - Gᵀ, -1), G = Qᵀ Q̄ - R̄ Rᵀ; Ā = Q (R̄ + [K₁ R₁⁻ᵀ, 0]).


def _qr_impl(a, mode="reduced"):
    return np.linalg.qr(a, mode=mode)


qr_p = get_primitive(_qr_impl, "np.linalg.qr")


class _RankDeficient(Exception):
    """A QR factorization whose Q has no derivative: R's leading block is singular."""


def _unread_low_rank(R, low, g):
    """``R`` with the matrices ``low`` (of a stack; lower rank, up to rounding) replaced by the
    identity where ``g`` (the cotangent, or the tangent, of each matrix) is zero: their
    derivative is zero and needs no R; raises _RankDeficient where such a matrix is read."""
    if not np.any(low):
        return R
    if not is_zero(g) and np.any(low & np.any(np.asarray(bottom(g)) != 0, axis=(-2, -1))):
        raise _RankDeficient
    return np.where(np.asarray(low)[..., None, None], np.eye(np.shape(R)[-1]), R)


_QR_RANK = ("np.linalg.qr of a matrix of lower rank: the columns of Q beyond the rank are not unique (any "
            "rotation among them will do), so neither Q nor R has a derivative there")


def _square_real(Q, R, dA):
    n = np.shape(R)[-1]
    return n == np.shape(Q)[-2] and not _is_complex(Q) and not _is_complex(dA)


def _lead_solve(R, B, trans=False):
    """[B₁ R₁⁻¹, 0] (``trans``: [B₁ R₁⁻ᵀ, 0]) for B's first n - 1 columns B₁ and R's leading
    block R₁ (see above)."""
    n = np.shape(R)[-1]
    if n == 1:  # (a 1 x 1 matrix: Q = 1, Ω = 0)
        return 0 * B
    d = np.abs(np.asarray(bottom(_diag(R))))
    low = np.any(d[..., : n - 1] <= _rounding_rtol(R) * np.max(d, axis=-1, keepdims=True), axis=-1)
    R = _unread_low_rank(R, low, B)  # (R₁ singular, up to rounding: rank below n - 1)
    R1 = R[..., : n - 1, : n - 1]
    try:
        P = _mT(np.linalg.solve(R1 if trans else _mT(R1), _mT(B[..., : n - 1])))
    except np.linalg.LinAlgError:
        raise _RankDeficient from None
    return np.concatenate([P, np.zeros(np.shape(P)[:-1] + (1,), dtype=bottom(P).dtype)], axis=-1)


def _qr_square_jvp(Q, R, dA):
    X = np.matmul(_mT(Q), dA)
    low = _lead_solve(R, X) * _tri(np.shape(R)[-1])
    omega = low - _mT(low)
    return np.matmul(Q, omega), X - np.matmul(omega, R)


def _qr_square_vjp(Q, R, gQ, gR):
    n = np.shape(R)[-1]
    up = np.triu(np.ones((n, n)))
    gR = ZERO if is_zero(gR) else gR * up  # (R's strict lower part is constant: its cotangent is nobody's)
    G = ZERO if is_zero(gQ) else np.matmul(_mT(Q), gQ)
    if not is_zero(gR):
        G = _acc(G, -np.matmul(gR, _mT(R)))
    if is_zero(G):
        return np.matmul(Q, gR)
    K = (G - _mT(G)) * _tri(n)
    return np.matmul(Q, _acc(gR, _lead_solve(R, K, trans=True)))


def _qr_tall_jvp(Q, R, dA):
    if _square_real(Q, R, dA):
        return _qr_square_jvp(Q, R, dA)
    R = _unread_low_rank(R, ~_full_rank_r(R, _rounding_rtol(R)), dA)  # (lower rank: Q beyond it is not unique)
    try:
        ri = np.linalg.inv(R)
    except np.linalg.LinAlgError:
        raise _RankDeficient from None
    dX = np.matmul(np.matmul(_H(Q), dA), ri)
    low = dX * _tri(np.shape(dX)[-1])
    omega = low - _H(low)
    if _is_complex(dX):
        omega = omega + _diag_embed(1j * np.imag(_diag(dX)))
    dXo = dX - omega
    return np.matmul(dA, ri) - np.matmul(Q, dXo), np.matmul(dXo, R)


def _qr_tall_vjp(Q, R, gQ, gR):
    if _square_real(Q, R, ZERO if is_zero(gQ) else gQ) and (is_zero(gR) or not _is_complex(gR)):
        return _qr_square_vjp(Q, R, gQ, gR)
    low = ~_full_rank_r(R, _rounding_rtol(R))  # (lower rank: the columns of Q beyond it are not unique)
    for g in (gQ, gR):
        R = _unread_low_rank(R, low, g)
    M = ZERO if is_zero(gQ) else -np.matmul(_H(Q), gQ)
    if not is_zero(gR):
        M = M + np.matmul(gR, _H(R))
    up = M * _tri(np.shape(M)[-1], lower=False)
    B = up + _H(up) + _re(M) * np.eye(np.shape(M)[-1])
    lhs = _acc(gQ, np.matmul(Q, B))
    try:
        return _H(np.linalg.solve(R, _H(lhs)))  # lhs R⁻ᴴ
    except np.linalg.LinAlgError:
        raise _RankDeficient from None


def _qr_jvp(Q, R, dA):
    m = np.shape(Q)[-2]
    if np.shape(R)[-1] <= m:
        return _qr_tall_jvp(Q, R, dA)
    dQ, dR1 = _qr_tall_jvp(Q, R[..., :m], dA[..., :m])
    R2 = R[..., m:]  # R₂ = Qᴴ Y and Y = Q R₂
    dR2 = np.matmul(np.matmul(_H(dQ), Q), R2) + np.matmul(_H(Q), dA[..., m:])
    return dQ, np.concatenate([dR1, dR2], axis=-1)


def _qr_vjp(Q, R, gQ, gR):
    m = np.shape(Q)[-2]
    if np.shape(R)[-1] <= m:
        return _qr_tall_vjp(Q, R, gQ, gR)
    R2 = R[..., m:]
    if is_zero(gR):
        gR = np.zeros(np.shape(R), dtype=np.result_type(bottom(Q), bottom(gQ)))
    gR2 = gR[..., m:]
    gQ = _acc(gQ, np.matmul(np.matmul(Q, R2), _H(gR2)))  # Y = Q R₂ feeds R₂ = Qᴴ Y
    gX = _qr_tall_vjp(Q, R[..., :m], gQ, gR[..., :m])
    return np.concatenate([gX, np.matmul(Q, gR2)], axis=-1)


def _qr_reduced(a, y, mode):
    """Reduced Q, R of ``a`` and the cotangent/tangent layout of ``mode``."""
    if mode == "reduced":
        return y
    if mode == "r":
        return np.linalg.qr(a)
    k = min(np.shape(a)[-2:])
    return y[0][..., :k], y[1][..., :k, :]


_QR_EXTRA = ("np.linalg.qr(mode='complete') of a tall matrix: the extra columns of Q are not unique (more than "
             "one of them, a complex matrix, or a matrix of lower rank: any rotation among them will do). A "
             "function that does not read them is differentiated (or use mode='reduced'); a function of the "
             "projector onto them is: I - Q Qᴴ from mode='reduced'")

# One extra column (m = n + 1) of a real matrix of full rank is unique up to its sign, the
# unit null vector q of Aᵀ (Householder's sign): dq = -Q R⁻ᵀ dAᵀ q, and the pullback adds
# -q (R⁻¹ Qᵀ q̄)ᵀ, as svd's (see _null_vector_jvp).


def _full_rank_r(R, rtol=None):
    """Per matrix of a stack: whether R's diagonal has no zero, up to ``rtol`` relative to its
    largest entry (default: as _zero_values)."""
    d = np.abs(np.asarray(bottom(_diag(R))))
    if rtol is None:
        rtol = _repeated_rtol(d.dtype)
    if d.size == 0:
        return np.ones(d.shape[:-1], bool)
    return np.all(d > rtol * np.max(d, axis=-1, keepdims=True), axis=-1)


def _rounding_rtol(R):
    """A diagonal entry of R this small relative to the largest is rounding: the matrix has a
    lower rank to working precision (a hundred times n ε)."""
    return 100 * np.shape(R)[-1] * np.finfo(np.asarray(bottom(R)).dtype).eps


def _one_qr_null_vector(a, R):
    m, n = np.shape(a)[-2:]
    if m != n + 1 or _is_complex(a):
        return False
    return bool(np.all(_full_rank_r(R)))


def _qr_null_vector_jvp(Q, R, y, t):
    q = y[0][..., :, -1]
    c = np.linalg.solve(_mT(R), np.matmul(_mT(t), q[..., None]))
    return -np.matmul(Q, c)[..., 0]


def _qr_null_vector_vjp(Q, R, y, g):
    q = y[0][..., :, -1]
    c = np.linalg.solve(R, np.matmul(_mT(Q), g[..., None]))[..., 0]
    return -(q[..., :, None] * c[..., None, :])


def _qr_rrule(a, mode="reduced", _impl=_qr_impl):
    """(``_impl``: the function computing the factors in NumPy's ``mode``, another library's QR.)"""
    y = _impl(a, mode)
    if mode == "raw":
        return y, lambda cts: (not_implemented("np.linalg.qr(mode='raw') is not differentiable"),)

    def pullback(cts):
        Q, R = _qr_reduced(a, y, mode)
        if mode == "r":
            gQ, gR = ZERO, cts
        else:
            gQ, gR = cts
        k = np.shape(Q)[-1]
        extra = None
        if mode == "complete":
            xq, gQ = _extra_columns(gQ, k, -1)
            Rn = R  # the R the null vector's pullback solves with
            if xq is not None and np.any(bottom(xq) != 0):
                m, n = np.shape(a)[-2:]
                if m != n + 1 or _is_complex(a):
                    return (not_implemented(_QR_EXTRA),)
                try:  # (matrices of lower rank, judged one by one in a stack: those read have no derivative)
                    Rn = _unread_low_rank(R, ~_full_rank_r(R), xq)
                except _RankDeficient:
                    return (not_implemented(_QR_EXTRA),)
                extra = xq[..., :, 0]
            gR = gR if is_zero(gR) else gR[..., :k, :]
        try:
            ga = _qr_vjp(Q, R, gQ, gR)
        except _RankDeficient:
            return (not_implemented(_QR_RANK),)
        if extra is not None and not isinstance(ga, NotImplementedTangent):
            ga = _acc(ga, _qr_null_vector_vjp(Q, Rn, y, extra))
        return (ga,)

    return y, pullback


def _qr_frule(primals, tangents, mode="reduced", _impl=_qr_impl):
    (a,), (t,) = primals, tangents
    y = _impl(a, mode)
    if mode == "raw":
        bad = not_implemented("np.linalg.qr(mode='raw') is not differentiable")
        return y, (bad, bad)
    Q, R = _qr_reduced(a, y, mode)
    try:
        dQ, dR = _qr_jvp(Q, R, t)
    except _RankDeficient:
        dQ = dR = not_implemented(_QR_RANK)
    if mode == "r":
        return y, dR
    m, n = np.shape(a)[-2:]
    if mode == "complete" and m > n:
        if isinstance(dR, NotImplementedTangent):  # (rank deficient: neither factor has one)
            return y, (dR, dR)
        pad = np.zeros(np.shape(dR)[:-2] + (m - n, n), dtype=bottom(dR).dtype)
        if _one_qr_null_vector(a, R) and not isinstance(dQ, NotImplementedTangent):
            dQ = np.concatenate((dQ, _qr_null_vector_jvp(Q, R, y, t)[..., :, None]), axis=-1)
        else:
            dQ = _extra_unknown(dQ, m - n, -1, _QR_EXTRA)
        return y, (dQ, np.concatenate([dR, pad], axis=-2))
    return y, (dQ, dR)


qr_p.rrule, qr_p.frule = _qr_rrule, _qr_frule
FUNCTIONS[np.linalg.qr] = _handler(qr_p, ("a", "mode"), mode="reduced")


# -- pinv, lstsq ------------------------------------------------------------------------
# X = A⁺ (constant rank near A):
#   dX = -X dA X + X Xᴴ dAᴴ (I - A X) + (I - X A) dAᴴ Xᴴ X
#   Ā = -Xᴴ X̄ Xᴴ + (I - A X) X̄ᴴ X Xᴴ + Xᴴ X X̄ᴴ (I - X A)
# with X the truncated pseudo-inverse (the singular values rcond/rtol cuts off dropped).
# That is the derivative of the truncated pseudo-inverse A ↦ A_k⁺ only where the values cut
# off are zero to working precision (beside the smallest value kept): the kept singular
# vectors turn under dA by terms σ_d / (σ_k² - σ_d²) of each value cut off. Where one is
# not, the derivative is that of the singular value function A = U S Vᴴ ↦ V φ(S) Uᴴ,
# φ(σ) = 1/σ kept, 0 cut off: with P = Uᴴ dA V (full SVD of A padded square with zeros),
#   dX = V (G ∘ P + H ∘ Pᴴ) Uᴴ,  Ā = U (G ∘ W + Hᵀ ∘ Wᴴ) Vᴴ,  W = Vᴴ X̄ U,
# G_ij = -1/(σ_i σ_j) both kept, σ_j / (σ_i (σ_i² - σ_j²)) i kept and j cut off (and
# symmetrically), H_ij = 1/(σ_i² - σ_j²) i kept and j cut off (and symmetrically), 0
# elsewhere (two values cut off: nothing, repeated or not).


def _pinv_impl(a, **kw):
    return np.linalg.pinv(a, **kw)


pinv_p = get_primitive(_pinv_impl, "np.linalg.pinv")


def _product3(a, b, c):
    """a @ b @ c in the cheaper order: the projections I - A X of a tall A (m × m) and I - X A of a wide one
    are never formed (a second derivative through lstsq of a 10000 × 4 matrix took 1.6 GB: the lsm tester)."""
    p, q = np.shape(a)[-2:]
    r, t = np.shape(c)[-2:]
    if p * q * r + p * r * t <= q * r * t + p * q * t:
        return np.matmul(np.matmul(a, b), c)
    return np.matmul(a, np.matmul(b, c))


def _full_rank_sides(A, full):
    """(whether I - A X is zero, whether I - X A is zero) for X = A⁺ of A of full rank (``full``: no singular
    value cut off): a wide A's A X and a tall one's X A are the identity. The terms of those projections are
    then left out, not computed: formed in floating point they are rounding times ‖X‖², which grows with the
    square of the condition number (a cubic regression basis of raw prices, cond 7e8, gave a derivative 500
    times too large: the finance2 tester)."""
    if not full:
        return False, False
    m, n = np.shape(A)[-2:]
    return m <= n, m >= n


def _pinv_jvp(A, X, dA, full=False):
    dAh = _H(dA)
    Xh = _H(X)
    left, right = _full_rank_sides(A, full)
    res = -_product3(X, dA, X)
    if not left:
        p = _product3(X, Xh, dAh)  # (X Xᴴ dAᴴ (I - A X))
        res = res + (p - _product3(p, A, X))
    if not right:
        q = _product3(dAh, Xh, X)  # ((I - X A) dAᴴ Xᴴ X)
        res = res + (q - _product3(X, A, q))
    return res


def _minus_projected(p, q, w):
    """(I - p q) w, without p q (n × n of a wide lstsq's A)."""
    return w - np.matmul(p, np.matmul(q, w))


def _pinv_vjp(A, X, g, full=False):
    Xh = _H(X)
    gh = _H(g)
    left, right = _full_rank_sides(A, full)
    res = -_product3(Xh, g, Xh)
    if not left:
        p = _product3(gh, X, Xh)  # ((I - A X) X̄ᴴ X Xᴴ)
        res = res + (p - _product3(A, X, p))
    if not right:
        q = _product3(Xh, X, gh)  # (Xᴴ X X̄ᴴ (I - X A))
        res = res + (q - _product3(q, X, A))
    return res


def _pinv_rcond(a, kw):
    """The relative cutoff np.linalg.pinv applies (its rcond/rtol defaults)."""
    rcond, rtol = kw.get("rcond"), kw.get("rtol", _NOVALUE)
    if rcond is None:
        if rtol is _NOVALUE:
            return 1e-15
        if rtol is None:
            return max(np.shape(a)[-2:]) * np.finfo(np.asarray(bottom(a)).dtype).eps
        return rtol
    return rcond


_NOVALUE = getattr(np, "_NoValue", None)


def _cut_off(a, rcond):
    """(kept, cut): the mask of the singular values of ``a`` (plain) that the relative cutoff
    ``rcond`` keeps where it drops one that is not zero to working precision beside the smallest
    value kept (there the constant-rank derivative is not the truncated pseudo-inverse's), else
    None; and whether it drops any (there the second derivative of the truncated pseudo-inverse
    has the terms of the dropped values' turning, which the constant-rank rule's has not)."""
    b = np.asarray(bottom(a))
    if b.size == 0:
        return None, False
    s = np.linalg.svd(b, compute_uv=False)
    smax = np.max(s, axis=-1, keepdims=True)
    kept = s > np.asarray(bottom(rcond))[..., None] * smax
    if np.all(kept):
        return None, False
    small = np.min(np.where(kept, s, np.inf), axis=-1, keepdims=True)  # the smallest value kept
    eps = np.finfo(b.dtype).eps * max(b.shape[-2:])
    if not np.any(~kept & (s > eps * np.where(np.isfinite(small), small, smax))):
        return None, True
    return kept, True


def _truncated_parts(a, kept):
    """(U, σ, V, G, H) of ``a`` padded to a square matrix with zeros (see above)."""
    m, n = np.shape(a)[-2:]
    N = max(m, n)
    pad = [(0, 0)] * (np.ndim(a) - 2) + [(0, N - m), (0, N - n)]
    ap = np.pad(np.asarray(bottom(a)), pad)
    U, s, Vh = np.linalg.svd(ap)
    k = np.concatenate([kept, np.zeros(kept.shape[:-1] + (N - kept.shape[-1],), bool)], axis=-1)
    si, sj, ki, kj = s[..., :, None], s[..., None, :], k[..., :, None], k[..., None, :]
    with np.errstate(divide="ignore", invalid="ignore"):
        d = si * si - sj * sj
        G = np.where(ki & kj, -1.0 / (si * sj), np.where(ki & ~kj, sj / (si * d), np.where(~ki & kj, si / (sj * -d), 0.0)))
        H = np.where(ki & ~kj, 1.0 / d, np.where(~ki & kj, -1.0 / d, 0.0))
    return U, _H(Vh), G, H, (m, n, N)


def _padded(x, N):
    pad = [(0, 0)] * (np.ndim(x) - 2) + [(0, N - np.shape(x)[-2]), (0, N - np.shape(x)[-1])]
    return np.pad(x, pad)


def _truncated_jvp(a, kept, dA):
    """dX of X = A_k⁺, the singular values of ``kept`` (see above): the SVD and G, H from A's
    plain values, linear in ``dA`` (which may be traced). A traced A gets a NotImplementedTangent
    for its higher orders from the callers."""
    U, V, G, H, (m, n, N) = _truncated_parts(a, kept)
    P = np.matmul(np.matmul(_H(U), _padded(dA, N)), V)
    return np.matmul(np.matmul(V, G * P + H * _H(P)), _H(U))[..., :n, :m]


def _truncated_vjp(a, kept, g):
    U, V, G, H, (m, n, N) = _truncated_parts(a, kept)
    W = np.matmul(np.matmul(_H(V), _padded(g, N)), U)
    return np.matmul(np.matmul(U, G * W + _mT(H) * _H(W)), _H(V))[..., :m, :n]


def _truncation_nested():
    return not_implemented(
        "np.linalg.pinv/lstsq with an rcond/rtol that cuts off a singular value (a rank-deficient or "
        "truncated matrix): the first derivative of the truncated pseudo-inverse is given, a derivative of "
        "higher order is not")


def _traced(*xs):
    return any(isinstance(x, Tracer) for x in xs)


def _pinv_rrule(a, **kw):
    y = _pinv_impl(a, **kw)
    herm = kw.get("hermitian", False)
    A = _herm_in(a, True) if herm else a
    kept, cut = _cut_off(A, _pinv_rcond(a, kw))

    def pullback(g):
        if cut and _traced(A):  # (a constant matrix: the pullback is linear in g, every order)
            gA = _truncation_nested()
        elif kept is not None:
            gA = _truncated_vjp(A, kept, g)
        else:
            gA = _pinv_vjp(A, y, g, not cut)
        return (_herm_in_T(gA, True) if herm and not isinstance(gA, NotImplementedTangent) else gA,)

    return y, pullback


def _pinv_frule(primals, tangents, **kw):
    (a,), (t,) = primals, tangents
    y = _pinv_impl(a, **kw)
    if kw.get("hermitian", False):
        a, t = _herm_in(a, True), _herm_in(t, True)
    kept, cut = _cut_off(a, _pinv_rcond(primals[0], kw))
    if cut and _traced(a):
        return y, _truncation_nested()
    if kept is not None:
        return y, _truncated_jvp(a, kept, t)
    return y, _pinv_jvp(a, y, t, not cut)


pinv_p.rrule, pinv_p.frule = _pinv_rrule, _pinv_frule


def _np_pinv(args, kwargs):
    d = dict(zip(("a", "rcond", "hermitian"), args))
    d.update(kwargs)
    return bind(pinv_p, (d.pop("a"),), d)


FUNCTIONS[np.linalg.pinv] = _np_pinv

# lstsq: x = A⁺ b; r = b - A x.
#   dx = X (db - dA x) + X Xᴴ dAᴴ r + (I - X A) dAᴴ Xᴴ x
#   residuals ‖r‖² (full column rank, m > n, where Aᴴ r = 0): d = 2 Re(rᴴ (db - dA x))
#   singular values: as svd(compute_uv=False); rank: an integer.


def _lstsq_impl(a, b, rcond=None):
    return np.linalg.lstsq(a, b, rcond=rcond)


lstsq_p = get_primitive(_lstsq_impl, "np.linalg.lstsq")


def _col(v, vec):
    return v[..., None] if vec else v


def _uncol(v, vec):
    return v[..., 0] if vec else v


def _lstsq_rcond(a, b, rcond):
    """The relative cutoff of np.linalg.lstsq (LAPACK's gelsd: machine precision if negative)."""
    dt = np.result_type(np.asarray(bottom(a)).dtype, np.asarray(bottom(b)).dtype, np.float64)
    eps = np.finfo(dt).eps
    if rcond is None:
        return eps * max(np.shape(a)[-2:])
    return eps if rcond < 0 else rcond


def _lstsq_rrule(a, b, rcond=None):
    y = _lstsq_impl(a, b, rcond)
    vec = np.ndim(b) == 1
    rc = _lstsq_rcond(a, b, rcond)
    kept, cut = _cut_off(a, rc)

    def pullback(cts):
        gx, gres, _, gs = cts
        x = _col(y[0], vec)
        X = np.linalg.pinv(a, rcond=rc)  # (the values lstsq cuts off, cut off)
        r = _col(b, vec) - np.matmul(a, x)
        ga = gb = ZERO
        if not is_zero(gx):
            gx = _col(gx, vec)
            Xh = _H(X)
            gb = np.matmul(Xh, gx)
            gxh = _H(gx)
            if cut and _traced(a):
                ga = _truncation_nested()
            elif kept is not None:  # x = A_k⁺ b: Ā from X̄ = x̄ bᴴ
                ga = _truncated_vjp(a, kept, np.matmul(gx, _H(_col(b, vec))))
            else:
                left, right = _full_rank_sides(a, not cut)  # (a wide full-rank A's r is 0, a tall one's I - X A)
                ga = np.matmul(-gb, _H(x))
                if not left:
                    ga = ga + np.matmul(r, np.matmul(gxh, np.matmul(X, Xh)))
                if not right:
                    ga = ga + np.matmul(np.matmul(Xh, x), gxh - np.matmul(np.matmul(gxh, X), a))  # (I - X A: not formed)
        if not is_zero(gres) and np.size(y[1]):
            rg = 2 * r * gres
            gb = gb + rg
            ga = _acc(ga, -np.matmul(rg, _H(x)))
        if not is_zero(gs):
            ga = ga if isinstance(ga, NotImplementedTangent) else _acc(
                ga, _svd_vjp(*np.linalg.svd(a, full_matrices=False), ZERO, gs, ZERO))
        return ga, (gb if is_zero(gb) else _uncol(gb, vec))

    return y, pullback


def _lstsq_frule(primals, tangents, rcond=None):
    (a, b), (ta, tb) = primals, tangents
    y = _lstsq_impl(a, b, rcond)
    vec = np.ndim(b) == 1
    x = _col(y[0], vec)
    rc = _lstsq_rcond(a, b, rcond)
    X = np.linalg.pinv(a, rcond=rc)  # (the values lstsq cuts off, cut off)
    r = _col(b, vec) - np.matmul(a, x)
    rhs = ZERO if is_zero(tb) else _col(tb, vec)  # db - dA x
    dx = dres = ds = ZERO
    kept, cut = (None, False) if is_zero(ta) else _cut_off(a, rc)
    if cut and _traced(a):
        return y, (_truncation_nested(), ZERO, ZERO, ZERO)
    if kept is not None:  # x = A_k⁺ b: dx = dX b + X db
        dx = np.matmul(_truncated_jvp(a, kept, ta), _col(b, vec))
        ds = _svd_jvp(*np.linalg.svd(a, full_matrices=False), ta, need_uv=False)
        if not is_zero(tb):
            dx = dx + np.matmul(X, _col(tb, vec))
        return y, (_uncol(dx, vec), dres, ZERO, ds)
    if not is_zero(ta):
        rhs = _acc(rhs, -np.matmul(ta, x))
        tah = _H(ta)
        left, right = _full_rank_sides(a, not cut)  # (a wide full-rank A's r is 0, a tall one's I - X A)
        if not left:
            dx = np.matmul(np.matmul(X, _H(X)), np.matmul(tah, r))
        if not right:
            dx = _acc(dx, _minus_projected(X, a, np.matmul(tah, np.matmul(_H(X), x))))
        ds = _svd_jvp(*np.linalg.svd(a, full_matrices=False), ta, need_uv=False)
    dx = dx + np.matmul(X, rhs)
    if np.size(y[1]):
        dres = 2 * np.sum(_re(_cj(r) * rhs), axis=-2)
    return y, (_uncol(dx, vec), dres, ZERO, ds)


lstsq_p.rrule, lstsq_p.frule = _lstsq_rrule, _lstsq_frule
FUNCTIONS[np.linalg.lstsq] = _handler(lstsq_p, ("a", "b", "rcond"), nargs=2, rcond=None)


# -- eig, eigvals (general matrices) ---------------------------------------------------
# A V = V diag(λ), X = V⁻¹ dA V: dλ = diag X, dV = W + V diag(c), W = V (F ∘ X),
# F_ij = 1/(λ_j - λ_i). c keeps LAPACK's normalization, so the derivative is that of
# NumPy's own eigenvectors: unit 2-norm (Re c_i = -Re(v_iᴴ w_i)) and, for complex
# vectors, the largest component real (Im c_i = -Im(w_ji) / v_ji at that row j).


def _eig_impl(a):
    return np.linalg.eig(a)


def _eigvals_impl(a):
    return np.linalg.eigvals(a)


eig_p = get_primitive(_eig_impl, "np.linalg.eig")
eigvals_p = get_primitive(_eigvals_impl, "np.linalg.eigvals")


def _largest_row(V):
    """One-hot (..., n, n) mask of each column's largest entry (LAPACK makes it real)."""
    b = bottom(V)
    j = np.argmax(np.real(b * np.conj(b)), axis=-2)
    return (np.arange(b.shape[-2])[:, None] == j[..., None, :]).astype(float)


def _eig_gauge(V, W):
    dV = W - V * _re(np.sum(_cj(V) * W, axis=-2))[..., None, :]
    if _is_complex(V):
        E = _largest_row(V)
        vj = np.real(np.sum(E * V, axis=-2))
        dV = dV - V * (1j * np.imag(np.sum(E * W, axis=-2)) / vj)[..., None, :]
    return dV


def _eig_gauge_T(V, gV):
    u = np.sum(_cj(V) * gV, axis=-2)  # diag(Vᴴ V̄)
    gW = gV - V * _re(u)[..., None, :]
    if _is_complex(V):
        E = _largest_row(V)
        vj = np.real(np.sum(E * V, axis=-2))
        gW = gW - E * (1j * np.imag(u) / vj)[..., None, :]
    return gW


_ILL_CONDITIONED = 1e8  # eigenvectors (an eigenvalue: 1 / |u_kᴴ v_k|) this ill-conditioned count as defective


def _defective(V):
    """Whether the eigenvectors V are (numerically) dependent: A is not diagonalizable, and its
    eigenvalues have no derivative (they move like the square root of a perturbation)."""
    vb = np.asarray(bottom(V))
    with np.errstate(all="ignore"):
        c = np.linalg.cond(vb)
    return bool(np.any(~np.isfinite(c) | (c > _ILL_CONDITIONED)))


def _not_diagonalizable(forward=False, vectors=False):
    return not_implemented(
        "np.linalg.eig/eigvals: the matrix is not diagonalizable (a repeated eigenvalue with too few "
        "eigenvectors: a Jordan block), so "
        + ("the derivative of its eigenvectors is not implemented (the vectors of its simple eigenvalues have "
           "one, which the rule cannot form without a full set of eigenvectors: the dominant eigenvector by "
           "power iteration is differentiated; the simple eigenvalues themselves are, in reverse mode)"
           if vectors else
           "that eigenvalue has no derivative (it moves like a root of the perturbation), and forward mode "
           "computes every eigenvalue's tangent: reverse mode (mg.grad, mg.vjp, mg.jacobian(f, mode=\"rev\")) "
           "differentiates a function of the other, simple eigenvalues (a Leslie matrix's growth rate)"
           if forward else
           "the eigenvalues the function reads that are part of it have no derivative (they move like a root "
           "of the perturbation; its simple eigenvalues do have one, and a function of those alone is "
           "differentiated)")
        + ". Or compute the quantity without the spectrum: the trace or the determinant directly, the "
        "dominant eigenvalue by power iteration (differentiated)"
    )


def _left_vectors(a, w, cols=None):
    """Left eigenvectors of ``a`` for its eigenvalues ``w`` (columns u_k, u_kᴴ a = λ_k u_kᴴ): the
    right ones of aᴴ, matched to conj(w). ``cols``: of those eigenvalues only, of a matrix (not a stack),
    taken by column (an outer differentiation reads no other column: _eigvals_T_simple)."""
    wl, U = np.linalg.eig(_H(a))
    perm = _one_to_one(np.conj(np.asarray(bottom(w))), np.asarray(bottom(wl)))
    if cols is not None:
        return U[:, perm[cols]]
    return np.take_along_axis(U, perm[..., None, :], axis=-1)


def _eigvals_T_left(a, w, V, gw):
    """Ā for the values' cotangent ``gw`` of a matrix that is not diagonalizable, from the
    eigenvalues read alone: Σ_k u_k ḡ_k v_kᴴ / conj(u_kᴴ v_k) (V⁻ᴴ diag(ḡ) Vᴴ, column by
    column, with the left eigenvectors u_k), where each read eigenvalue is simple (its
    condition number 1 / |u_kᴴ v_k| below 1e8); else not implemented."""
    U = _left_vectors(a, w)
    s = np.sum(_cj(U) * V, axis=-2)
    read = np.asarray(bottom(gw)) != 0
    if np.any(read & (np.abs(np.asarray(bottom(s))) * _ILL_CONDITIONED < 1)):
        return _not_diagonalizable()
    g = np.where(read, gw, 0)
    Wt = U / _cj(np.where(read, s, 1.0))[..., None, :]
    return np.matmul(Wt * g[..., None, :], _H(V))


def _eigvals_T_simple(a, y, gw):
    """Ā for the cotangent ``gw`` of the eigenvalues ``y`` of the matrix ``a``, which an outer
    differentiation traces, where repeated values are among them and none of those is read:
    Σ_k u_k ḡ_k v_kᴴ / conj(u_kᴴ v_k) over the read (simple) values' columns only, taken from the
    vectors by column, so that the outer derivative goes through those columns' vectors alone, which
    have derivatives (the tied ones have none: the neutronics tester's Hessian of the dominant
    eigenvalue of A⁻¹F beside an n-fold zero one). None where no value repeats, or a repeated one is read."""
    wb, vb = np.linalg.eig(np.asarray(bottom(a)))  # (plain: whether the case is one, before any traced step)
    try:
        pairs = _eig_tied_pairs(wb, _eig_rounding_gaps(wb, vb, np.linalg.inv(vb)))
    except np.linalg.LinAlgError:  # (dependent vectors: not diagonalizable, the general path's refusal)
        return None
    read = np.asarray(bottom(gw)) != 0
    if not np.any(pairs) or np.any(read & np.any(pairs, axis=-2)):
        return None
    cols = np.flatnonzero(read)
    Vs = np.linalg.eig(a)[1][:, _one_to_one(np.asarray(bottom(y)), wb)[cols]]  # (wb: the same call's values)
    U = _left_vectors(a, y, cols)
    s = np.sum(_cj(U) * Vs, axis=0)
    if np.any(np.abs(np.asarray(bottom(s))) * _ILL_CONDITIONED < 1):
        return None
    return np.matmul(U * (gw[cols] / _cj(s)), _H(Vs))


def _eig_rounding_gaps(w, V, vi):
    """(|λ_i - λ_j|, the error LAPACK's rounding leaves in the difference: 10 eps max|λ| (κ_i +
    κ_j), with κ_i = |u_i| |v_i| / |u_iᴴ v_i| the eigenvalue's condition number), (..., n, n), of
    eigenvalues ``w`` with vectors ``V`` and ``vi`` = V⁻¹ (the rule's own)."""
    wb, vb = np.asarray(bottom(w)), np.asarray(bottom(V))
    with np.errstate(all="ignore"):
        kappa = np.linalg.norm(np.asarray(bottom(vi)), axis=-1) * np.linalg.norm(vb, axis=-2)
    eps = float(np.finfo(wb.dtype).eps)
    scale = np.max(np.abs(wb), axis=-1, keepdims=True) if wb.size else 0.0
    tol = 10 * eps * np.asarray(scale)[..., None] * (kappa[..., :, None] + kappa[..., None, :])
    return np.abs(wb[..., None, :] - wb[..., :, None]), tol


def _eig_tied_pairs(w, gaps):
    """Boolean (..., n, n): the pairs of eigenvalues ``w`` whose difference the vector
    derivatives cannot use: repeated up to rounding (_repeated_pairs), or closer than the error
    LAPACK's rounding leaves in them (``gaps``, _eig_rounding_gaps's: a Jordan block that
    rounding split into ±1e-8 has κ ~ 1e8, and its vectors' derivatives, through which second
    derivatives of any eigenvector go, came out 10^7 off)."""
    gap, tol = gaps
    return _repeated_pairs(w) | ((gap <= tol) & ~np.eye(np.shape(gap)[-1], dtype=bool))


def _eig_value_ties(w, gaps):
    """The averaging matrix (..., n, n) of eig's tied eigenvalues ``w`` (as _tie_mean's for
    eigh: at a tie a single eigenvalue has no derivative, and the group's mean, tr(Uₖᴴ dA Vₖ) / k
    over its invariant subspace, is basis-invariant), or None without ties. Tied: apart by
    no more than LAPACK's rounding of equal values, _tie_rtol max|λ|, or the rounding error the
    condition numbers allow (``gaps``: _eig_rounding_gaps's; not _eig_tied_pairs' wider
    tolerance for the vectors: a value 1e-10 from another has its own derivative); groups are
    the chains of tied pairs."""
    gap, tol = gaps
    wb = np.asarray(bottom(w))
    n = wb.shape[-1]
    if n < 2:
        return None
    scale = np.max(np.abs(wb), axis=-1, keepdims=True)[..., None]
    same = gap <= np.maximum(_tie_rtol(wb) * scale, tol)
    if np.count_nonzero(same) == same.size // n:  # (the diagonal alone)
        return None
    same = same | np.eye(n, dtype=bool)
    while True:  # (the chains: the transitive closure)
        grown = np.matmul(same.astype(np.int64), same.astype(np.int64)) > 0
        if np.array_equal(grown, same):
            break
        same = grown
    return same / np.sum(same, axis=-1, keepdims=True)


def _eig_tie_mean(M, d):
    """``d`` (tangents or cotangents of eig's values) with each tied group's replaced by its
    mean (``M``: _eig_value_ties's matrix, symmetric; None: no ties)."""
    if M is None or is_zero(d):
        return d
    return np.matmul(M, d[..., None])[..., 0]


def _eig_jvp(w, V, dA, need_v=True):
    if _defective(V):
        bad = _not_diagonalizable(forward=True)
        return bad if not need_v else (bad, bad)
    vi = np.linalg.inv(V)
    X = np.matmul(np.matmul(vi, dA), V)
    gaps = _eig_rounding_gaps(w, V, vi)
    dw = _eig_tie_mean(_eig_value_ties(w, gaps), _diag(X))
    if not need_v:
        return dw
    pairs = _eig_tied_pairs(w, gaps)
    if np.any(pairs):
        # the columns of tied values have no tangent, the others do (as eigh's, _eigh_dV: the neutronics
        # tester's dominant mode of A⁻¹F beside an n-fold zero eigenvalue)
        if _differentiated(w):
            return dw, _degenerate("np.linalg.eig", forward=True)
        bad = _degenerate("np.linalg.eig", forward="partial")
        dV = _eig_gauge(V, np.matmul(V, _pair_inv(w, pairs) * X))
        return dw, PartlyNotImplemented(dV, np.broadcast_to(np.any(pairs, axis=-2)[..., None, :], np.shape(dV)), bad)
    near = _near_tie_refusal(w, "np.linalg.eig")
    if near is not None:
        return dw, near
    return dw, _eig_gauge(V, np.matmul(V, _pair_inv(w) * X))


def _eig_vjp(w, V, gw, gV, a=None):
    if _defective(V):
        if a is not None and is_zero(gV) and not is_zero(gw):  # (the values alone: their simple ones)
            return _eigvals_T_left(a, w, V, gw)
        return _not_diagonalizable(vectors=not is_zero(gV))
    vi = np.linalg.inv(V)
    gaps = _eig_rounding_gaps(w, V, vi)
    gX = ZERO if is_zero(gw) else _diag_embed(_eig_tie_mean(_eig_value_ties(w, gaps), gw))
    hidden = False
    if not is_zero(gV):
        pairs = _eig_tied_pairs(w, gaps)
        tied = bool(np.any(pairs))
        # (vectors of distinct eigenvalues have their derivative: the tied pairs' terms belong to the
        # tied vectors alone, which the cotangent must not read)
        F = _distinct_part(w, gV, pairs) if tied else _pair_inv(w)
        near = None if tied else _near_tie_refusal(w, "np.linalg.eig")
        if near is not None:
            return near
        hidden = F is not None and tied and _zero_hides_a_tie(np.any(pairs, axis=-2), gw, gV)
        if F is None or hidden is True:
            return _degenerate("np.linalg.eig")
        gX = gX + _cj(F) * np.matmul(_H(V), _eig_gauge_T(V, gV))
    return _no_second(np.matmul(np.matmul(_H(vi), gX), _H(V)), hidden, "np.linalg.eig")


def _eig_rrule(a):
    y = _eig_impl(a)
    within = _VALUES_PULLBACK[-1] if _VALUES_PULLBACK else None  # (the vectors of eigvals' pullback)
    reads = None if within is not None else _tie_reads(a, y[0])

    def pullback(cts):
        gw, gV = cts
        if _all_zero(gw, gV):
            return (ZERO,)
        if _read_apart(reads, not is_zero(gw), not is_zero(gV)):
            return (_degenerate(f"np.linalg.eig, {_APART}"),)
        with _within(within):  # (reverse over reverse: a refusal names eigvals' second derivative)
            if is_zero(gV) and isinstance(a, Tracer) and np.ndim(y[0]) == 1:  # (the values alone, as eigvals')
                abar = _eigvals_T_simple(a, y[0], gw)
                if abar is not None:
                    return (abar,)
            return (_eig_vjp(y[0], y[1], gw, gV, a),)

    return y, pullback


def _eig_frule(primals, tangents):
    (a,), (t,) = primals, tangents
    y = _eig_impl(a)
    return y, _eig_jvp(y[0], y[1], t)


def _eig_matching(a, w):
    """eig(a) with its columns ordered as the eigenvalues ``w`` (from eigvals)."""
    w2, V = np.linalg.eig(a)
    perm = _one_to_one(np.asarray(bottom(w)), np.asarray(bottom(w2)))
    return np.take_along_axis(w2, perm, axis=-1), np.take_along_axis(V, perm[..., None, :], axis=-1)


def _one_to_one(w, w2):
    """For each eigenvalue in ``w`` the position of its match in ``w2``, every position used
    once (the nearest unused one, surest matches first): equal eigenvalues get distinct
    eigenvectors, so a repeated eigenvalue of a diagonalizable matrix keeps V invertible."""
    perm = np.empty(w.shape, dtype=np.intp)
    n = w.shape[-1]
    for idx in np.ndindex(w.shape[:-1]):
        d = np.abs(w[idx][:, None] - w2[idx][None, :])
        used = np.zeros(n, dtype=bool)
        for i in np.argsort(d.min(axis=1), kind="stable"):
            j = int(np.argmin(np.where(used, np.inf, d[i])))
            used[j] = True
            perm[idx + (i,)] = j
    return perm


def _eigvals_rrule(a):
    y = _eigvals_impl(a)
    where = _values_where(a)
    reads = _tie_reads(a, y)

    def pullback(g):
        if _read_apart(reads, not is_zero(g), False):
            return (_degenerate(f"np.linalg.eigvals, {_APART}"),)
        with _ValuesPullback("np.linalg.eigvals", where):  # (a refusal of its second derivative names it)
            if isinstance(a, Tracer) and not is_zero(g) and np.ndim(y) == 1:
                abar = _eigvals_T_simple(a, y, g)
                if abar is not None:
                    return (abar,)
            w, V = _eig_matching(a, y)
        return (_eig_vjp(w, V, g, ZERO, a),)

    return y, pullback


def _eigvals_frule(primals, tangents):
    (a,), (t,) = primals, tangents
    y = _eigvals_impl(a)
    return y, _eig_jvp(*_eig_matching(a, y), t, need_v=False)


eig_p.rrule, eig_p.frule = _eig_rrule, _eig_frule
eigvals_p.rrule, eigvals_p.frule = _eigvals_rrule, _eigvals_frule
FUNCTIONS[np.linalg.eig] = _handler(eig_p, ("a",))
FUNCTIONS[np.linalg.eigvals] = _handler(eigvals_p, ("a",))


# -- composites: matrix_power, multi_dot, tensorsolve, tensorinv, kron, cross ---------
# NumPy's own algorithms, on traced values (same operations, same rounding).


def _np_matrix_power(args, kwargs):
    d = call_args(("a", "n"), args, kwargs)
    a, n = d["a"], int(d["n"])
    if n == 0:
        return np.zeros_like(a) + np.eye(np.shape(a)[-1], dtype=bottom(a).dtype)
    if n < 0:
        a, n = np.linalg.inv(a), -n
    if n <= 3:
        return a if n == 1 else np.matmul(a, a) if n == 2 else np.matmul(np.matmul(a, a), a)
    z = result = None
    while n > 0:
        z = a if z is None else np.matmul(z, z)
        n, bit = divmod(n, 2)
        if bit:
            result = z if result is None else np.matmul(result, z)
    return result


def _chain(arrays, order, i, j):
    if i == j:
        return arrays[i]
    return np.dot(_chain(arrays, order, i, order[i, j]), _chain(arrays, order, order[i, j] + 1, j))


def _np_multi_dot(args, kwargs):
    d = call_args(("arrays",), args, kwargs, out=None)
    arrays = list(d["arrays"])
    n = len(arrays)
    if n < 2:
        raise ValueError("Expecting at least two arrays.")
    given = d["arrays"]

    def replay(ob):  # (NumPy's dot into out: out's dtype must be the result's exactly)
        np.linalg.multi_dot(plain_operands(list(given)), out=ob)

    if n == 2:
        return write_out(np.dot(arrays[0], arrays[1]), d["out"], replay)
    nd_first, nd_last = np.ndim(arrays[0]), np.ndim(arrays[-1])
    if nd_first == 1:
        arrays[0] = np.atleast_2d(arrays[0])
    if nd_last == 1:
        arrays[-1] = np.atleast_2d(arrays[-1]).T
    if n == 3:
        A, B, C = arrays
        (a0, a1b0), (b1c0, c1) = np.shape(A), np.shape(C)
        if a0 * b1c0 * (a1b0 + c1) < a1b0 * c1 * (a0 + b1c0):
            res = np.dot(np.dot(A, B), C)
        else:
            res = np.dot(A, np.dot(B, C))
    else:
        from numpy.linalg._linalg import _multi_dot_matrix_chain_order

        res = _chain(arrays, _multi_dot_matrix_chain_order(arrays), 0, n - 1)
    if nd_first == 1 and nd_last == 1:
        res = res[0, 0]
    elif nd_first == 1 or nd_last == 1:
        res = np.ravel(res)
    return write_out(res, d["out"], replay)


def _np_tensorsolve(args, kwargs):
    d = call_args(("a", "b", "axes"), args, kwargs, axes=None)
    a, b, axes = d["a"], d["b"], d["axes"]
    an = np.ndim(a)
    if axes is not None:
        allaxes = list(range(an))
        for k in axes:
            allaxes.remove(k)
            allaxes.insert(an, k)
        a = np.transpose(a, allaxes)
    oldshape = np.shape(a)[-(an - np.ndim(b)):]
    prod = int(np.prod(oldshape, dtype=np.int64))
    if np.size(a) != prod ** 2:
        raise np.linalg.LinAlgError(
            "Input arrays must satisfy the requirement prod(a.shape[b.ndim:]) == prod(a.shape[:b.ndim])")
    res = np.linalg.solve(np.reshape(a, (prod, prod)), np.ravel(b))
    return np.reshape(res, oldshape)


def _np_tensorinv(args, kwargs):
    d = call_args(("a", "ind"), args, kwargs, ind=2)
    a, ind = d["a"], d["ind"]
    if ind <= 0:
        raise ValueError("Invalid ind argument.")
    shape = np.shape(a)
    prod = int(np.prod(shape[ind:], dtype=np.int64))
    return np.reshape(np.linalg.inv(np.reshape(a, (prod, -1))), shape[ind:] + shape[:ind])


def _np_kron(args, kwargs):
    d = call_args(("a", "b"), args, kwargs)
    a, b = strong_operand(d["a"]), strong_operand(d["b"])  # (np.kron makes arrays of Python numbers)
    ndb = np.ndim(b)
    if np.ndim(a) < ndb:
        a = np.reshape(a, (1,) * (ndb - np.ndim(a)) + np.shape(a))
    nda = np.ndim(a)
    if nda == 0 or ndb == 0:
        return np.multiply(a, b)
    nd = max(nda, ndb)
    as_ = (1,) * max(0, ndb - nda) + np.shape(a)
    bs = (1,) * max(0, nda - ndb) + np.shape(b)
    a_arr = np.expand_dims(np.reshape(a, as_), tuple(range(1, nd * 2, 2)))
    b_arr = np.expand_dims(np.reshape(b, bs), tuple(range(0, nd * 2, 2)))
    return np.reshape(np.multiply(a_arr, b_arr), tuple(p * q for p, q in zip(as_, bs)))


def _cross3_impl(a, b):
    return np.cross(a, b)


cross3_p = get_primitive(_cross3_impl, "np.cross")


def _cross3_rrule(a, b):
    # c = a × b: ā = conj(b) × c̄, b̄ = c̄ × conj(a), summed over broadcast axes
    def pullback(g):
        return (Thunk(lambda: unbroadcast(np.cross(_cj(b), g), np.shape(a))),
                Thunk(lambda: unbroadcast(np.cross(g, _cj(a)), np.shape(b))))

    return _cross3_impl(a, b), pullback


cross3_p.rrule, cross3_p.frule = _cross3_rrule, _bilinear_frule(_cross3_impl)
cross3_p.reads = (((1,), False), ((0,), False))  # a's cotangent reads b, b's reads a


def _np_cross(args, kwargs):
    d = call_args(("a", "b", "axisa", "axisb", "axisc", "axis"), args, kwargs,
               axisa=-1, axisb=-1, axisc=-1, axis=None)
    axisa, axisb, axisc = (d["axis"],) * 3 if d["axis"] is not None else (d["axisa"], d["axisb"], d["axisc"])
    a, b = np.moveaxis(d["a"], axisa, -1), np.moveaxis(d["b"], axisb, -1)
    na, nb = np.shape(a)[-1], np.shape(b)[-1]
    if na not in (2, 3) or nb not in (2, 3):
        raise ValueError("incompatible dimensions for cross product\n(dimension must be 2 or 3)")
    if na == 3 and nb == 3:  # (the common case: one primitive, NumPy's own bits)
        return np.moveaxis(bind(cross3_p, (a, b)), -1, axisc)
    a0, a1, b0, b1 = a[..., 0], a[..., 1], b[..., 0], b[..., 1]
    c2 = a0 * b1 - a1 * b0
    if na == 2 and nb == 2:
        return c2
    if na == 2:
        b2 = b[..., 2]
        c0, c1 = a1 * b2, -(a0 * b2)
    elif nb == 2:
        a2 = a[..., 2]
        c0, c1 = -(a2 * b1), a2 * b0
    else:
        a2, b2 = a[..., 2], b[..., 2]
        c0, c1 = a1 * b2 - a2 * b1, a2 * b0 - a0 * b2
    shape = np.broadcast_shapes(np.shape(c0), np.shape(c1), np.shape(c2))
    return np.moveaxis(np.stack([np.broadcast_to(c, shape) for c in (c0, c1, c2)], axis=-1), -1, axisc)


FUNCTIONS[np.linalg.matrix_power] = _np_matrix_power
FUNCTIONS[np.linalg.multi_dot] = _np_multi_dot
FUNCTIONS[np.linalg.tensorsolve] = _np_tensorsolve
FUNCTIONS[np.linalg.tensorinv] = _np_tensorinv
FUNCTIONS[np.kron] = _np_kron
FUNCTIONS[np.cross] = _np_cross


# -- NumPy 2 array-API spellings and norms built on the rules above --------------------


def _np_vector_norm(args, kwargs):
    d = call_args(("x", "axis", "keepdims", "ord"), args, kwargs, keepdims=False, ord=2)
    x, axis = d["x"], d["axis"]
    shape = list(np.shape(x))
    if axis is None:
        x, ax = np.ravel(x), 0
    elif isinstance(axis, tuple):
        axis = tuple(a % len(shape) for a in axis)
        rest = tuple(i for i in range(len(shape)) if i not in axis)
        x = np.reshape(np.transpose(x, axis + rest),
                       (int(np.prod([shape[i] for i in axis], dtype=int)), *[shape[i] for i in rest]))
        ax = 0
    else:
        ax = axis
    res = np.linalg.norm(x, axis=ax, ord=d["ord"])
    if d["keepdims"]:
        for i in (range(len(shape)) if axis is None else np.atleast_1d(axis)):
            shape[i % len(shape)] = 1
        res = np.reshape(res, tuple(shape))
    return res


def _np_cond(args, kwargs):
    d = call_args(("x", "p"), args, kwargs)
    x, p = d["x"], d["p"]
    xb = np.asarray(bottom(x))
    with np.errstate(all="ignore"):
        want = np.linalg.cond(xb, p)  # (NumPy's checks, and its values where no derivative is: inf, NaN)
    if xb.size == 0:
        return want  # (an empty stack of matrices: NumPy's empty result)
    if p is None or p in (2, -2):
        s = np.linalg.svd(x, compute_uv=False)
        with np.errstate(all="ignore"):
            r = s[..., -1] / s[..., 0] if p == -2 else s[..., 0] / s[..., -1]
        nan = np.isnan(bottom(r)) & ~np.isnan(xb).any(axis=(-2, -1))
        if nan.any():
            r = np.where(nan, np.inf, r)
    else:
        # (as NumPy: the inverse in double precision, the product cast to the input's real precision)
        kind = xb.dtype.kind
        wide = np.complex128 if kind == "c" else np.float64
        single = xb.dtype in (np.float32, np.complex64)
        bad = ~np.isfinite(want)  # a singular matrix (or one with NaN or inf): NumPy's inf or NaN
        if bad.any():  # (those computed on the identity, their values NumPy's below)
            x = np.where(bad[..., None, None], np.eye(xb.shape[-1], dtype=xb.dtype), x)
        xi = x if xb.dtype == wide else x.astype(wide)
        r = np.linalg.norm(x, p, axis=(-2, -1)) * np.linalg.norm(np.linalg.inv(xi), p, axis=(-2, -1))
        if single:
            r = r.astype(np.float32)
        if bad.any():  # NumPy's value there (as np.where of a constant: no derivative flows from it)
            r = np.where(bad, np.asarray(want, dtype=np.result_type(bottom(r))), r)
    if np.ndim(r) == 0 and not isinstance(want, np.ndarray):
        r = r[()]  # (NumPy's scalar: np.where made a 0-d array)
    return r


def _np_matrix_rank(args, kwargs):
    """An integer: computed on the plain values."""
    return np.linalg.matrix_rank(*[bottom(a) for a in args], **{k: bottom(v) for k, v in kwargs.items()})


FUNCTIONS[np.linalg.vector_norm] = _np_vector_norm
FUNCTIONS[np.linalg.matrix_norm] = lambda args, kwargs: np.linalg.norm(
    args[0], axis=(-2, -1), keepdims=kwargs.get("keepdims", False), ord=kwargs.get("ord", "fro"))
FUNCTIONS[np.linalg.cond] = _np_cond
FUNCTIONS[np.linalg.matrix_rank] = _np_matrix_rank
FUNCTIONS[np.linalg.cross] = lambda args, kwargs: np.cross(args[0], args[1], axis=kwargs.get("axis", -1))
FUNCTIONS[np.linalg.outer] = lambda args, kwargs: np.outer(args[0], args[1])


# The array API's np.linalg functions: the NumPy ones with the matrix axes last.
def _kw(kwargs, allowed, name):
    bad = set(kwargs) - set(allowed)
    if bad:
        raise TypeError(f"np.linalg.{name}() got unexpected keyword arguments {sorted(bad)}")
    return kwargs


def _linalg_vecdot(a, b, axis=-1):
    if axis != -1:  # the core dimension of each operand at its own position axis
        a, b = (np.moveaxis(v, axis, -1) for v in (a, b))
    return np.vecdot(a, b)


_ARRAY_API = {
    "vecdot": lambda args, kwargs: _linalg_vecdot(*args, **_kw(kwargs, ("axis",), "vecdot")),
    "matrix_transpose": lambda args, kwargs: np.swapaxes(args[0], -1, -2),
    "tensordot": lambda args, kwargs: np.tensordot(*args, axes=_kw(kwargs, ("axes",), "tensordot").get("axes", 2)),
    "matmul": lambda args, kwargs: np.matmul(*args, **_kw(kwargs, (), "matmul")),
    "trace": lambda args, kwargs: np.trace(args[0], axis1=-2, axis2=-1,
                                           **_kw(kwargs, ("offset", "dtype"), "trace")),
    "diagonal": lambda args, kwargs: np.diagonal(args[0], axis1=-2, axis2=-1, **_kw(kwargs, ("offset",), "diagonal")),
}
for _name, _handler in _ARRAY_API.items():
    if getattr(np.linalg, _name, None) is not None and (_name != "vecdot" or hasattr(np, "vecdot")):
        FUNCTIONS.setdefault(getattr(np.linalg, _name), _handler)


# Their pullbacks compute every cotangent afresh (products, solves): the tape
# may adopt them as adjoint buffers instead of copying (large gradients).
for _p in (matmul_p, tensordot_p, dot_p, einsum_p, einsum2_p, inv_p, solve_p, det_p):
    _p.fresh_cts = True


# -- NumPy 2's vector and matrix-vector ufuncs, through einsum -------------------


def _defgufunc(ufunc, spec):
    """A NumPy 2 gufunc that is an einsum (vecdot and vecmat conjugate their first operand)."""
    p = get_primitive(ufunc)
    conj_first = ufunc is np.vecdot or ufunc is getattr(np, "vecmat", None)  # (both conjugate the vector)

    def rrule(a, b):
        y = ufunc(a, b)
        einsum_vjp = _einsum_vjp(spec, [np.shape(a), np.shape(b)])

        def vjp(g, xs, i):
            a, b = xs
            ct = einsum_vjp(g, (_cj(a) if conj_first else a, b), i)
            return _cj(ct) if conj_first and i == 0 else ct  # (that of a: the conjugate of that of conj(a))

        return y, _ProductPullback(vjp, (a, b))

    p.rrule, p.frule = rrule, _bilinear_frule(ufunc)
    p.reads = (((1,), False), ((0,), False))  # (each one's cotangent reads the other)
    p.fresh = True
    LAYOUT_EXACT.add(p)


if isinstance(getattr(np, "vecdot", None), np.ufunc):
    _defgufunc(np.vecdot, "...i,...i->...")
if isinstance(getattr(np, "matvec", None), np.ufunc):
    _defgufunc(np.matvec, "...ij,...j->...i")
    _defgufunc(np.vecmat, "...i,...ij->...j")
