"""Checking derivatives against independent oracles.

* :func:`check_grads` compares mutagrad with central finite differences of
  the same function run on fresh plain-NumPy copies of the arguments (the
  function may write into them), checks forward against reverse mode by the
  dot-product identity ``<ȳ, J ẋ> == <Jᵀ ȳ, ẋ>``, and checks that the
  arguments hold after differentiation exactly what a plain call leaves.
* :func:`check_rule` does the same for one registered primitive.
"""
from __future__ import annotations

import copy

import numpy as np

from .pytree import tree_flatten, tree_unflatten
from .tangents import NotImplementedTangent

__all__ = ["check_grads", "check_rule", "numerical_grad"]


def _fresh(args):
    """Deep copies, so every evaluation starts from the same inputs. Each argument is
    copied on its own: the same array passed twice becomes two arrays, as mg.grad treats
    them (one partial derivative each), so finite differences move one at a time."""
    return tuple(copy.deepcopy(a) for a in args)


def _is_diff(x):
    if isinstance(x, (bool, np.bool_)):
        return False
    if isinstance(x, (float, complex, np.floating, np.complexfloating)):
        return True
    if isinstance(x, np.ndarray):
        return x.dtype.kind in "fc"
    leaves, _ = tree_flatten(x)
    if not leaves or (len(leaves) == 1 and leaves[0] is x):
        return False  # a leaf that is not a float or an array of floats
    return all(_is_diff(v) for v in leaves)


def _random_like(x, rng):
    leaves, tree = tree_flatten(x)
    out = []
    for v in leaves:
        a = np.asarray(v)
        if a.dtype.kind == "c":
            r = rng.standard_normal(a.shape) + 1j * rng.standard_normal(a.shape)
        elif a.dtype.kind == "f":
            r = rng.standard_normal(a.shape)
        else:
            r = np.zeros(a.shape)
        out.append(r.astype(a.dtype) if a.dtype.kind in "fc" else r)
    return tree_unflatten(tree, out)


def _inner(w, y):
    """sum(real(w * y)) over the leaves: a real scalar of the output. (A
    cotangent pairs bilinearly with its output, as in JAX: vjp(f)(w) is the
    gradient of this.)"""
    wl, _ = tree_flatten(w)
    yl, _ = tree_flatten(y)
    total = 0.0
    for a, b in zip(wl, yl):
        if isinstance(b, (int, np.integer)) or (hasattr(b, "dtype") and b.dtype.kind not in "fc"):
            continue
        total = total + np.sum(np.real(a * b))
    return total


def _magnitude(w, y):
    """sum(|w * y|) over the float leaves: the size of ``_inner(w, y)``'s terms."""
    total = 0.0
    for a, b in zip(tree_flatten(w)[0], tree_flatten(y)[0]):
        b = np.asarray(b)
        if b.dtype.kind in "fc":
            total += float(np.sum(np.abs(np.asarray(a) * b)))
    return total


def _pair(a, b):
    """Re(sum(a * b)) over the leaves: how a cotangent (or a gradient in the
    d/dx - i d/dy convention) pairs with a tangent."""
    from .tangents import NotImplementedTangent

    al, _ = tree_flatten(a)
    bl, _ = tree_flatten(b)
    missing = [x for x in al + bl if isinstance(x, NotImplementedTangent)]
    if missing:  # (a failed check, as every other mismatch here)
        raise AssertionError(f"got NotImplementedTangent({missing[0].message!r})")
    return float(sum(np.sum(np.real(np.asarray(x) * np.asarray(y))) for x, y in zip(al, bl)))


def _leaves_of(args, argnums):
    return [tree_flatten(args[n]) for n in argnums]


def _perturb(args, argnums, n, leaf_i, flat_k, delta):
    """Fresh copies of args with leaf ``leaf_i`` of ``args[argnums[n]]`` moved by delta at flat_k
    (flat_k None: delta is a whole array direction)."""
    new = list(_fresh(args))
    leaves, tree = tree_flatten(new[argnums[n]])
    v = leaves[leaf_i]
    if isinstance(v, np.ndarray):
        d = delta if v.dtype.kind == "c" else np.real(delta)
        if flat_k is None:
            v += np.asarray(d).astype(v.dtype)
        else:
            v[np.unravel_index(flat_k, v.shape)] += d
    else:
        t = type(v)
        if flat_k is None:
            d = np.asarray(delta).reshape(()).item()
        else:
            d = delta
        leaves[leaf_i] = t(v + d) if not isinstance(v, float) or not isinstance(d, complex) else v + d
    new[argnums[n]] = tree_unflatten(tree, leaves)
    return new


def numerical_grad(s, args, argnums, eps=1e-6):
    """Central differences of scalar ``s`` w.r.t. every element of ``args[argnums]``,
    in the JAX convention for complex inputs (d/dx - i d/dy)."""
    res = []
    for n, (leaves, tree) in enumerate(_leaves_of(args, argnums)):
        gl = []
        for li, v in enumerate(leaves):
            a = np.asarray(v)
            g = np.zeros(a.shape, dtype=np.complex128 if a.dtype.kind == "c" else np.float64)
            flat = g.reshape(-1)
            for k in range(a.size):
                h = eps * max(1.0, abs(a.reshape(-1)[k]))
                fp = float(s(*_perturb(args, argnums, n, li, k, h)))
                fm = float(s(*_perturb(args, argnums, n, li, k, -h)))
                d = (fp - fm) / (2 * h)
                if a.dtype.kind == "c":
                    fpi = float(s(*_perturb(args, argnums, n, li, k, 1j * h)))
                    fmi = float(s(*_perturb(args, argnums, n, li, k, -1j * h)))
                    d = d - 1j * (fpi - fmi) / (2 * h)
                flat[k] = d
            gl.append(g)
        res.append(tree_unflatten(tree, gl))
    return res


def _assert_close(actual, expected, atol, rtol, what):
    al, _ = tree_flatten(actual)
    el, _ = tree_flatten(expected)
    if len(al) != len(el):
        raise AssertionError(f"{what}: structure differs ({len(al)} vs {len(el)} leaves)")
    for a, e in zip(al, el):
        from .tangents import NotImplementedTangent

        if isinstance(a, NotImplementedTangent):
            raise AssertionError(f"{what}: got NotImplementedTangent({a.message!r})")
        a = np.asarray(a)
        e = np.asarray(e)
        if a.shape != e.shape:
            raise AssertionError(f"{what}: shape {a.shape} != expected {e.shape}")
        if not np.allclose(a, e, atol=atol, rtol=rtol, equal_nan=True):
            err = np.max(np.abs(a - e)) if a.size else 0
            raise AssertionError(f"{what}: max abs error {err:.3g}\n got      {a!r}\n expected {e!r}")


def _assert_same_state(after, ref, what):
    al, _ = tree_flatten(after)
    rl, _ = tree_flatten(ref)
    for k, (a, r) in enumerate(zip(al, rl)):
        if isinstance(r, np.ndarray):
            if not np.array_equal(np.asarray(a), r, equal_nan=True):
                raise AssertionError(
                    f"{what}: argument leaf {k} holds {np.asarray(a)!r} after differentiation, "
                    f"but a plain call leaves {r!r}"
                )


def check_grads(f, *args, modes=("fwd", "rev"), order=1, argnums=None, atol=1e-6, rtol=1e-5,
                eps=None, seed=0, final_state=True):
    """Check mutagrad's derivatives of ``f`` at ``args`` against finite differences.

    ``f`` may return any pytree of arrays; it is reduced to a scalar by a
    fixed random projection. With ``final_state`` (the default), the final
    contents of the differentiated array arguments count as outputs too, so a
    function that only writes into its arguments is checked as well (the
    mutation-aware dot-product test). Raises ``AssertionError`` on any mismatch.
    The finite-difference step ``eps`` (relative) defaults to 1e-6 in double precision and to
    the cube root of the machine epsilon for lower precisions (float32: 5e-3), whose
    rounding also widens the tolerances.

    >>> import numpy as np, mutagrad as mg
    >>> def f(x):
    ...     x[0] = x[1] ** 2      # writes into its argument
    ...     return np.sin(x)
    >>> mg.testing.check_grads(f, np.array([1.0, 2.0, 3.0]))
    """
    from .api import _check_callable

    _check_callable(f, "testing.check_grads")
    from .api import grad, jvp, vjp

    if isinstance(modes, str):
        modes = (modes,)
    if not isinstance(modes, (tuple, list)) or not modes or any(m not in ("fwd", "rev") for m in modes):
        raise ValueError(f"check_grads: modes={modes!r}; give 'fwd', 'rev' or both (a check of no mode passes "
                         "without checking anything)")
    if isinstance(order, bool) or not isinstance(order, (int, np.integer)) or order < 1:
        raise ValueError(f"check_grads: order={order!r}; give a positive integer (1: first derivatives)")
    for name, v in (("atol", atol), ("rtol", rtol)):
        if not (isinstance(v, (int, float, np.floating)) and v >= 0):
            raise ValueError(f"check_grads: {name}={v!r}; give a tolerance >= 0")
    if eps is not None and not (isinstance(eps, (int, float, np.floating)) and 1e-12 <= eps <= 0.1):
        raise ValueError(f"check_grads: eps={eps!r}; give a relative step between 1e-12 and 0.1 (a smaller one is "
                         "lost to rounding, and the tolerance it implies would pass any derivative)")
    if not isinstance(final_state, (bool, np.bool_)):
        raise TypeError(f"check_grads: final_state={final_state!r}; give True or False")
    if argnums is not None and not isinstance(argnums, (int, np.integer)) and not (
            isinstance(argnums, (tuple, list)) and argnums and all(isinstance(n, (int, np.integer)) for n in argnums)):
        raise ValueError(f"check_grads: argnums={argnums!r}; give an argument's index or a nonempty tuple of them "
                         "(none would check nothing)")
    if argnums is None:
        argnums = tuple(i for i, a in enumerate(args) if _is_diff(a))
        if not argnums:
            raise TypeError("check_grads: none of the arguments is a float or complex number or array, so there "
                            f"is nothing to check (got {', '.join(type(a).__name__ for a in args) or 'none'}). "
                            "Pass floats (2.0, not 2).")
    elif isinstance(argnums, int):
        argnums = (argnums,)
    for n in argnums:
        if not -len(args) <= n < len(args):
            raise TypeError(f"check_grads: argnums={n}, but {len(args)} positional arguments were given")
    argnums = tuple(n % len(args) for n in argnums)
    if final_state:
        user_f = f
        probe = _fresh(args)
        user_f(*probe)
        # the differentiated array arguments whose final contents are finite (FD needs that)
        nums = tuple(n for n in argnums if isinstance(probe[n], np.ndarray) and np.all(np.isfinite(probe[n])))

        def f(*a):
            out = user_f(*a)
            return out, [a[n] * 1.0 for n in nums]  # the arguments after the call, as the caller sees them

    rng = np.random.default_rng(seed)
    ref_args = _fresh(args)
    ref_out = f(*ref_args)
    w = _random_like(ref_out, rng)

    def s(*a):
        return _inner(w, f(*a))

    # the coarsest precision among the differentiated arguments and the outputs: its rounding
    # decides the step and bounds how well finite differences (and the modes) can agree
    prec = _precision([x for n in argnums for x in tree_flatten(args[n])[0]] + tree_flatten(ref_out)[0])
    low = prec > np.finfo(np.float64).eps
    if eps is None:
        eps = float(np.cbrt(prec)) if low else 1e-6
    if low:
        rtol = max(rtol, 10 * float(prec) ** (2 / 3))
    fd = numerical_grad(s, args, argnums, eps)
    # central differences lose about |w|.|f| * machine epsilon / eps to rounding: a badly scaled
    # function (values ~1e18) needs that much slack, which is nothing for ordinary ones
    atol = atol + 8 * prec * _magnitude(w, ref_out) / eps
    grads = None
    if "rev" in modes:
        a1 = _fresh(args)
        grads = grad(s, argnums=argnums)(*a1)
        for n, g_n, fd_n in zip(argnums, grads, fd):  # (argument by argument: the message names it)
            _assert_close(g_n, fd_n, atol, rtol, f"reverse mode vs finite differences (argument {n})")
        _assert_same_state(a1, ref_args, "reverse mode side effects")
        # vjp of the array-valued function itself
        a2 = _fresh(args)  # (the other float arguments traced constants, as under grad: buffers)
        out, pb = vjp(f, *a2, _argnums=argnums)
        _assert_close(out, ref_out, 1e-12, 1e-12, "vjp primal output")
        cts = pb(w)
        for n, c_n, fd_n in zip(argnums, cts, fd):
            _assert_close(c_n, fd_n, atol, rtol, f"vjp vs finite differences (argument {n})")
        # linear in the cotangent: a pullback that branches on it (its sign, a zero one) agrees with finite
        # differences at w and not at -w or w + w2 (the regress80 tester)
        w2 = _random_like(ref_out, np.random.default_rng(seed + 1))
        _assert_linear(pb, w, w2, cts, prec, "the pullback (vjp) is not linear in the cotangent")
    if "fwd" in modes:
        v = [_random_like(args[n], rng) for n in argnums]
        a3 = _fresh(args)
        out, tout = jvp(f, a3, v, _argnums=argnums)
        _assert_same_state(a3, ref_args, "forward mode side effects")
        _assert_close(out, ref_out, 1e-12, 1e-12, "jvp primal output")
        lhs = _pair(w, tout)
        rhs = _pair(tree_flatten(fd)[0], tree_flatten(v)[0])
        if not np.isclose(lhs, rhs, atol=atol * 10, rtol=rtol * 10):
            raise AssertionError(f"forward mode vs finite differences: <w, J v> = {lhs!r}, expected {rhs!r}")
        v2 = [_random_like(args[n], np.random.default_rng(seed + 2)) for n in argnums]
        _assert_linear(lambda t: jvp(f, _fresh(args), t, _argnums=argnums)[1], v, v2, tout, prec,
                       "the tangent map (jvp) is not linear in the tangent")
        if grads is not None:
            gl = list(grads) if isinstance(grads, tuple) else [grads]
            rr = _pair(tree_flatten(gl)[0], tree_flatten(v)[0])
            if not np.isclose(lhs, rr, atol=1e-9, rtol=max(1e-8, 100 * prec)):
                raise AssertionError(f"dot-product identity: <w, J v> = {lhs!r} (fwd) but <J^T w, v> = {rr!r} (rev)")
    if order >= 2:
        _check_second_order(s, args, argnums, modes, atol, rtol, eps, rng)


def _assert_linear(m, u, u2, mu, prec, what):
    """That the map ``m`` (a pullback, a tangent map), whose value at ``u`` is ``mu``, gives -mu at -u,
    m(u) + m(u2) at u + u2, zeros at 0 and 1000 mu at 1000 u."""
    def comb(a, b, fa, fb):
        la, tree = tree_flatten(a)
        return tree_unflatten(tree, [fa * np.asarray(x) + fb * np.asarray(y) for x, y in zip(la, tree_flatten(b)[0])])

    m2 = m(u2)
    scale = 1.0 + max((float(np.max(np.abs(np.asarray(x)))) for x in tree_flatten([mu, m2])[0]
                       if np.size(x) and not isinstance(x, NotImplementedTangent)), default=0.0)
    rtol = max(1e-8, 100 * prec)
    tol = rtol * scale  # (the rounding of the largest values)
    _assert_close(m(comb(u, u, -1.0, 0.0)), comb(mu, mu, -1.0, 0.0), tol, rtol, what + " (at -u it is not -m(u))")
    _assert_close(m(comb(u, u2, 1.0, 1.0)), comb(mu, m2, 1.0, 1.0), tol, rtol,
                  what + " (at u + u2 it is not m(u) + m(u2))")
    _assert_close(m(comb(u, u, 0.0, 0.0)), comb(mu, mu, 0.0, 0.0), tol, rtol, what + " (at 0 it is not 0)")
    # (and at a large multiple: a cotangent clipped or capped inside the rule agrees at small ones: regress83)
    _assert_close(m(comb(u, u, 1e3, 0.0)), comb(mu, mu, 1e3, 0.0), 1e3 * tol, rtol,
                  what + " (at 1000 u it is not 1000 m(u))")


def _precision(leaves):
    """The machine epsilon of the coarsest floating-point dtype among ``leaves``."""
    eps = np.finfo(np.float64).eps
    for x in leaves:
        dt = getattr(x, "dtype", None)
        if dt is not None and dt.kind in "fc":
            eps = max(eps, np.finfo(dt).eps)
    return float(eps)


def _check_second_order(s, args, argnums, modes, atol, rtol, eps, rng):
    """Hessian-vector products against finite differences of the gradient."""
    from .api import grad, jvp

    v = [_random_like(args[n], rng) for n in argnums]
    g = grad(s, argnums=argnums)

    def gflat(*a):
        return [np.asarray(x) for x in tree_flatten(list(g(*a)))[0]]

    h = max(eps, 1e-4)
    plus = list(_fresh(args))
    minus = list(_fresh(args))
    for k, n in enumerate(argnums):
        plus[n] = _shift(plus[n], v[k], h)
        minus[n] = _shift(minus[n], v[k], -h)
    fd_hv = [(p - m) / (2 * h) for p, m in zip(gflat(*plus), gflat(*minus))]
    tol = max(atol, 1e-5) * 100
    if "fwd" in modes:
        a = _fresh(args)

        def grads_list(*b):
            return list(g(*b))

        _, hv = jvp(grads_list, a, v, _argnums=argnums)  # (the others traced constants: buffers)
        hv = [np.asarray(x) for x in tree_flatten(hv)[0]]
        _assert_close(hv, fd_hv, tol, rtol * 100, "forward-over-reverse Hessian-vector product vs finite differences")
    is_complex = any(np.iscomplexobj(np.asarray(x)) for n in argnums for x in tree_flatten(args[n])[0])
    if "rev" in modes and not is_complex:  # H v = grad <v, grad s> needs a symmetric (real) Hessian
        a = _fresh(args)

        def gv(*b):
            gg = g(*b)
            return _inner(v, list(gg)) if len(argnums) > 1 else _inner(v[0], gg)

        hv2 = grad(gv, argnums=argnums)(*a)
        hv2 = [np.asarray(x) for x in tree_flatten(list(hv2))[0]]
        _assert_close(hv2, fd_hv, tol, rtol * 100, "reverse-over-reverse Hessian-vector product vs finite differences")


def _shift(x, v, h):
    leaves, tree = tree_flatten(x)
    vl, _ = tree_flatten(v)
    out = []
    for a, d in zip(leaves, vl):
        if isinstance(a, np.ndarray):
            out.append(a + h * np.asarray(d, a.dtype))
        else:
            out.append(type(a)(a + h * d))
    return tree_unflatten(tree, out)


def check_rule(fn, *args, modes=("fwd", "rev"), order=1, argnums=None, **kwargs):
    """Check the registered rules of ``fn`` at ``args`` against finite
    differences and against each other (keyword arguments are passed to
    ``fn`` and not differentiated; ``argnums``: the positional arguments to
    differentiate, by default every floating-point one).

    >>> import numpy as np, mutagrad as mg
    >>> mg.testing.check_rule(np.sin, np.array([0.1, 0.2]))
    """
    return check_grads(lambda *a: fn(*a, **kwargs), *args, modes=modes, order=order, argnums=argnums)
