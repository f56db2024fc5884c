"""Products and linear algebra: matmul, dot, einsum, tensordot, inner, vdot,
np.linalg.inv/solve/det/slogdet.

Cotangents follow the convention of the whole package: for y = f(x),
x̄ = ȳ · conj(∂y/∂x), so products transpose *and* conjugate their other
operand (``ā = ȳ @ conj(b).T``). For real arrays the conjugation is free.
"""
from __future__ import annotations

import numpy as np

from ..core import FUNCTIONS, UFUNC_HANDLERS, bind, bottom, get_primitive, write
from ..registry import conj_if_complex as _cj
from ..tangents import NoTangent, ZeroTangent, is_zero, unbroadcast

ZERO = ZeroTangent()


def _mT(a):
    return np.swapaxes(a, -1, -2)


# -- matmul -------------------------------------------------------------------


def _matmul_vjp(g, a, b, which):
    """Cotangent of ``a @ b`` for operand ``which`` (0 or 1), with NumPy's 1-D rules."""
    a_nd, b_nd = np.ndim(a), np.ndim(b)
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


def _matmul_rrule(a, b):
    y = np.matmul(a, b)

    def pullback(g):
        from ..tangents import Thunk

        return (Thunk(lambda: _matmul_vjp(g, a, b, 0)), Thunk(lambda: _matmul_vjp(g, a, b, 1)))

    return y, pullback


def _bilinear_frule(fn):
    def frule(primals, tangents, **kw):
        a, b = primals[:2]
        ta, tb = tangents[:2]
        y = fn(a, b, **kw)
        acc = ZERO
        if not is_zero(ta):
            acc = fn(ta, b, **kw)
        if not is_zero(tb):
            t = fn(a, tb, **kw)
            acc = t if is_zero(acc) else acc + t
        return y, acc

    return frule


matmul_p.rrule, matmul_p.frule = _matmul_rrule, _bilinear_frule(np.matmul)


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

    def pullback(g):
        from ..tangents import Thunk

        return (Thunk(lambda: _tensordot_vjp(g, a, b, axes, 0)), Thunk(lambda: _tensordot_vjp(g, a, b, axes, 1)))

    return y, pullback


tensordot_p.rrule = _tensordot_rrule
tensordot_p.frule = _bilinear_frule(_tensordot_impl)


def _np_tensordot(args, kwargs):
    a = dict(zip(("a", "b", "axes"), args))
    a.update(kwargs)
    return bind(tensordot_p, (a["a"], a["b"]), {"axes": a.get("axes", 2)})


def _np_dot(args, kwargs):
    d = dict(zip(("a", "b", "out"), args))
    d.update(kwargs)
    a, b, out = d["a"], d["b"], d.get("out")
    na, nb = np.ndim(a), np.ndim(b)
    if na == 0 or nb == 0:
        res = np.multiply(a, b)
    elif nb == 1:
        res = bind(tensordot_p, (a, b), {"axes": ([na - 1], [0])})
    else:
        res = bind(tensordot_p, (a, b), {"axes": ([na - 1], [nb - 2])})
    if out is not None:
        write(out, Ellipsis, res)
        return out
    return res


def _np_inner(args, kwargs):
    a, b = args[:2]
    na, nb = np.ndim(a), np.ndim(b)
    if na == 0 or nb == 0:
        return np.multiply(a, b)
    return bind(tensordot_p, (a, b), {"axes": ([na - 1], [nb - 1])})


def _np_vdot(args, kwargs):
    a, b = args[:2]
    return np.sum(np.conj(np.ravel(a)) * np.ravel(b))


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


def _einsum_operand_ct(g, ins, out, operands, i, sizes):
    """Cotangent of operand i of a (multi)linear einsum."""
    target = ins[i]
    uniq = "".join(dict.fromkeys(target))
    others = [(ins[j], _cj(operands[j])) for j in range(len(ins)) if j != i]
    avail = set(out).union(*[set(s) for s, _ in others]) if others else set(out)
    keep = "".join(c for c in uniq if c in avail)
    spec = ",".join([out] + [s for s, _ in others]) + "->" + keep
    r = np.einsum(spec, g, *[o for _, o in others], optimize=True)
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


def _einsum_rrule(subscripts, *operands, optimize=False):
    y = _einsum_impl(subscripts, *operands, optimize=optimize)
    shapes = [np.shape(o) for o in operands]
    ins, out = _parse_einsum(subscripts, shapes)
    sizes = {}
    for s, shp in zip(ins, shapes):
        for c, n in zip(s, shp):
            if n != 1 or c not in sizes:
                sizes[c] = n

    def pullback(g):
        from ..tangents import Thunk

        cts = [Thunk(lambda i=i: unbroadcast(_einsum_operand_ct(g, ins, out, operands, i, sizes), shapes[i]))
               for i in range(len(operands))]
        return (NoTangent(), *cts)

    return y, pullback


def _einsum_frule(primals, tangents, optimize=False):
    subscripts, *operands = primals
    _, *tans = tangents
    y = _einsum_impl(subscripts, *operands, optimize=optimize)
    acc = ZERO
    for i, t in enumerate(tans):
        if is_zero(t):
            continue
        ops = list(operands)
        ops[i] = t
        term = np.einsum(subscripts, *ops, optimize=optimize)
        acc = term if is_zero(acc) else acc + term
    return y, acc


einsum_p.rrule, einsum_p.frule = _einsum_rrule, _einsum_frule


def _np_einsum(args, kwargs):
    kwargs = dict(kwargs)
    out = kwargs.pop("out", None)
    optimize = kwargs.pop("optimize", False)
    for k in ("dtype", "order", "casting"):
        kwargs.pop(k, None)
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
    res = bind(einsum_p, tuple(args), {"optimize": bool(optimize) if optimize is not True else True})
    if out is not None:
        write(out, Ellipsis, res)
        return out
    return res


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


def _solve_rrule(a, b):
    y = np.linalg.solve(a, b)

    def pullback(g):
        ah = _cj(_mT(a))
        gb = np.linalg.solve(ah, g)
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
    return y, np.linalg.solve(a, rhs)


solve_p.rrule, solve_p.frule = _solve_rrule, _solve_frule

det_p = get_primitive(np.linalg.det)


def _det_rrule(a):
    y = np.linalg.det(a)

    def pullback(g):
        # d det = det * tr(A^{-1} dA)  ->  Ā = ḡ conj(det) A^{-H}
        cof = _cj(_mT(np.linalg.inv(a))) * np.expand_dims(_cj(y), (-2, -1))
        return (np.expand_dims(g, (-2, -1)) * cof,)

    return y, pullback


def _det_frule(primals, tangents):
    (a,), (t,) = primals, tangents
    y = np.linalg.det(a)
    return y, y * np.trace(np.linalg.solve(a, t), axis1=-2, axis2=-1)


det_p.rrule, det_p.frule = _det_rrule, _det_frule

slogdet_p = get_primitive(np.linalg.slogdet)


def _slogdet_rrule(a):
    res = np.linalg.slogdet(a)

    def pullback(cts):
        gsign, glog = cts
        if is_zero(glog):
            return (ZERO,)
        ainvh = _cj(_mT(np.linalg.inv(a)))
        return (np.expand_dims(glog, (-2, -1)) * ainvh,)

    return res, pullback


def _slogdet_frule(primals, tangents):
    (a,), (t,) = primals, tangents
    res = np.linalg.slogdet(a)
    dlog = np.real(np.trace(np.linalg.solve(a, t), axis1=-2, axis2=-1))
    if np.iscomplexobj(bottom(a)):
        from ..tangents import not_implemented

        return res, (not_implemented("slogdet sign tangent for complex matrices"), dlog)
    return res, (ZERO, dlog)


slogdet_p.rrule, slogdet_p.frule = _slogdet_rrule, _slogdet_frule


# -- norms -------------------------------------------------------------------------


def _abs2(x):
    return np.real(x * np.conj(x)) if np.iscomplexobj(bottom(x)) else x * x


def _np_norm(args, kwargs):
    a = dict(zip(("x", "ord", "axis", "keepdims"), args))
    a.update(kwargs)
    x, ord_, axis, keepdims = a["x"], a.get("ord"), a.get("axis"), bool(a.get("keepdims", False))
    nd = np.ndim(x)
    if axis is None and ord_ is None:
        res = np.sqrt(np.sum(_abs2(np.ravel(x))))
        return np.reshape(res, (1,) * nd) if keepdims else res
    if axis is None:
        axis = tuple(range(nd))
    if isinstance(axis, (int, np.integer)):
        axis = (int(axis),)
    if len(axis) == 1:
        ax = axis[0]
        if ord_ is None or ord_ == 2:
            return np.sqrt(np.sum(_abs2(x), axis=ax, keepdims=keepdims))
        if ord_ == np.inf:
            return np.max(np.abs(x), axis=ax, keepdims=keepdims)
        if ord_ == -np.inf:
            return np.min(np.abs(x), axis=ax, keepdims=keepdims)
        if ord_ == 0:
            return np.sum(bottom(x) != 0, axis=ax, keepdims=keepdims).astype(float)
        if ord_ == 1:
            return np.sum(np.abs(x), axis=ax, keepdims=keepdims)
        return np.sum(np.abs(x) ** ord_, axis=ax, keepdims=keepdims) ** (1.0 / ord_)
    if len(axis) != 2:
        raise ValueError("Improper number of dimensions to norm.")
    r, c = (axis[0] % nd, axis[1] % nd)
    if ord_ in (None, "fro", "f"):
        return np.sqrt(np.sum(_abs2(x), axis=axis, keepdims=keepdims))
    if ord_ in (1, -1):
        s = np.sum(np.abs(x), axis=r, keepdims=True)
        res = np.max(s, axis=c, keepdims=True) if ord_ == 1 else np.min(s, axis=c, keepdims=True)
    elif ord_ in (np.inf, -np.inf):
        s = np.sum(np.abs(x), axis=c, keepdims=True)
        res = np.max(s, axis=r, keepdims=True) if ord_ == np.inf else np.min(s, axis=r, keepdims=True)
    elif ord_ in (2, -2, "nuc"):
        xm = np.moveaxis(x, (r, c), (-2, -1))
        sv = np.linalg.svd(xm, compute_uv=False)
        res = np.max(sv, axis=-1) if ord_ == 2 else np.min(sv, axis=-1) if ord_ == -2 else np.sum(sv, axis=-1)
        if keepdims:
            res = np.expand_dims(np.expand_dims(res, min(r, c)), max(r, c))
        return res
    else:
        raise ValueError("Invalid norm order for matrices.")
    if not keepdims:
        res = np.squeeze(res, axis=(r, c))
    return res


FUNCTIONS[np.linalg.norm] = _np_norm
