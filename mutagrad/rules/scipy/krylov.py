"""scipy.sparse.linalg's Krylov solvers: cg, bicg, bicgstab, cgs, gmres, lgmres, minres, qmr,
gcrotmk, tfqmr. The value is SciPy's own call; the derivative is that of the exact solution
x = A⁻¹ b (implicit differentiation, as jax.scipy.sparse.linalg.cg):

    ẋ = A⁻¹ (ḃ - Ȧ x),        b̄ = A⁻ᴴ x̄,   Ā = -b̄ xᴴ

(cotangent convention of rules/linalg.py; minres solves (A - σI) x = b: σ̄ = xᴴ b̄, and σ̇ x joins
the right-hand side). Each derivative is one more solve by the same solver, bound again (so every
order is available: a Hessian, a jvp of a gradient): the tangent's with A, the cotangent's with Aᴴ,
which for cg and minres (A Hermitian) is A itself, and otherwise a dense array's conjugate
transpose, a sparse matrix's, or a LinearOperator's adjoint (its rmatvec); a preconditioner M is
transposed the same way (qmr's M1, M2 become M2ᴴ, M1ᴴ). After a breakdown (info < 0: the
Lanczos-type solvers meet one on some right-hand sides, a unit cotangent e₀ among them) a
derivative solve is done again by gmres, which has none. SciPy's tfqmr applies M on the wrong side
(1.17: with an M that does not commute with A it returns, with info 0, a point that does not solve
A x = b): its derivative solves run without M.

The derivative solves run to a tighter tolerance than the call: rtol = min(rtol, max(1e-12,
10 eps)) relative to their own right-hand side (the cotangent, or ḃ - Ȧ x), atol = 0. The
user's rtol bounds the error of the value, but a gradient fed to an optimizer or a finite-
difference check is used to more digits than that (through a solve to rtol its error is about
rtol times the condition number of A), and an absolute atol chosen for b has no meaning on a
cotangent's scale; 1e-12 leaves a few digits to the conditioning of A while a Krylov solver in
double precision still reaches it. They keep the call's maxiter and solver keywords (restart,
inner_m, m, k, shift...), not its x0, callback, show, or the state lgmres's outer_v and gcrotmk's
CU keep for A (updated in place, and not Aᴴ's).

x0 (and M, and the tolerances) have derivative zero: the exact solution does not depend on them,
only the iterate does (a traced x0 is used by its value). If the call does not converge (info !=
0), the returned iterate is not the exact solution and the derivative is not its derivative: a
UserWarning says so, naming the solver and the fix (as for a derivative solve that does not).

The matrix is a plain dense array (a constant), a traced dense array (differentiated), a
scipy.sparse matrix or a LinearOperator (constants: a sparse matrix holding traced values is
refused, as by the direct sparse solvers; a LinearOperator's matvec is called on plain vectors).
The callback is the call's only, and gets SciPy's plain arrays. scipy.sparse.linalg is imported at
the first call.
"""
from __future__ import annotations

import functools

import numpy as np

from ...core import STATE, Tracer, bind, bottom, get_primitive
from ...errors import (
    DifferentiationError,
    NoRuleError,
    TracerEscapeError,
    line_text,
    user_line,
    user_site,
    warn_at,
)
from ...registry import conj_if_complex as _cj
from ...tangents import NoTangent, Thunk, ZeroTangent, is_zero
from ..sparse import _adjoint as _sparse_adjoint
from .sparse import _constant_matrix, _dense, _ssl

ZERO = ZeroTangent()

# name -> A required Hermitian (the adjoint solve is a solve with A itself, M itself)
SOLVERS = {"cg": True, "bicg": False, "bicgstab": False, "cgs": False, "gmres": False, "lgmres": False,
           "minres": True, "qmr": False, "gcrotmk": False, "tfqmr": False}
_UNPRECONDITIONED = ("tfqmr",)  # (its derivative solves run without M: above)
# the call's keywords that the derivative solves do not take: its starting point and monitors, and
# the subspaces lgmres and gcrotmk recycle for A (lists SciPy updates in place)
_PRIMAL_ONLY = ("x0", "callback", "callback_type", "show", "outer_v", "CU")
_PRECONDITIONERS = ("M", "M1", "M2")


def _impl(name):
    def solve(a, b, *shift, **kw):
        x, info = getattr(_ssl(), name)(a, b, **({"shift": shift[0]} if shift else {}), **kw)
        if isinstance(b, np.ndarray) and np.may_share_memory(x, b):  # (a zero b is returned as it is)
            x = x.copy()
        return x, info

    solve.__name__ = solve.__qualname__ = f"_{name}"
    return solve


def _solve(name, a, b, shift, kw):
    """SciPy's ``name`` bound as a primitive: (x, info)."""
    return bind(PRIMITIVES[name], (a, b) + shift, kw)


# -- the adjoint of an operator ---------------------------------------------------------

@functools.cache
def _adjoint_class():
    """A LinearOperator's adjoint (made at the first use: scipy.sparse.linalg is imported then), whose missing
    rmatvec raises mutagrad's error, naming the operator, the user's line and the fix, when a solver applies it."""

    class Adjoint(_ssl().LinearOperator):
        def __init__(self, op, role, name, site):
            self.op, self.role, self.solver, self.site = op, role, name, site
            super().__init__(op.dtype, (op.shape[1], op.shape[0]))
            if self.dtype is None:
                self._init_dtype()

        def _matvec(self, v):
            try:
                return self.op.rmatvec(v)
            except NotImplementedError as e:
                if isinstance(e, DifferentiationError):
                    raise
                where = line_text((self.site.f_code, self.site.f_lineno)) if self.site else "<unknown location>"
                raise NoRuleError(
                    f"the derivative of scipy.sparse.linalg.{self.solver} at {where} solves with the adjoint of "
                    f"{self.role}, a LinearOperator that has no rmatvec (its adjoint's product): give it one, "
                    "LinearOperator(shape, matvec=f, rmatvec=fh) with fh(v) = Aᴴ v, or pass the matrix itself "
                    "(dense or scipy.sparse), whose conjugate transpose mutagrad takes; forward mode (mg.jvp, "
                    "jacobian(mode='fwd')) needs no adjoint.") from e

        def _rmatvec(self, v):
            return self.op.matvec(v)

    return Adjoint


def _is_dense(a):
    return isinstance(a, (Tracer, np.ndarray))


def _adjoint(op, role, name, site=None):
    """Aᴴ of a dense (traced or plain) or sparse matrix or a LinearOperator (``role`` and ``name``, ``site``:
    for the error of an operator without rmatvec)."""
    if op is None:
        return None
    if isinstance(op, Tracer):  # (a traced dense A: its adjoint is traced too, for the next order)
        return _cj(np.swapaxes(op, -1, -2))
    if isinstance(op, np.ndarray):
        return op.conj().T
    import scipy.sparse as sp

    if sp.issparse(op):
        return _sparse_adjoint(op)
    if not isinstance(op, _ssl().LinearOperator):  # (an object with shape and matvec, as SciPy takes)
        op = _ssl().aslinearoperator(op)
    return _adjoint_class()(op, role, name, site)


# -- the derivative solves -------------------------------------------------------------------


def _tight(rtol, *ops):
    """The derivative solves' rtol: 1e-12, or a few roundings where the operands are single precision."""
    dt = np.result_type(np.float32, *(d for d in (getattr(o, "dtype", None) for o in ops) if d is not None))
    return min(rtol, max(1e-12, 10 * float(np.finfo(dt if dt.kind in "fc" else np.float64).eps)))


def _derivative_kw(name, a, rhs, kw, adjoint, site):
    """The keywords of a derivative solve (the tangent's, or with ``adjoint`` the cotangent's)."""
    d = {k: v for k, v in kw.items() if k not in _PRIMAL_ONLY and not (
        name in _UNPRECONDITIONED and k in _PRECONDITIONERS)}
    d["rtol"] = _tight(kw.get("rtol", 1e-5), a, rhs)
    if name != "minres":  # (minres has no atol)
        d["atol"] = 0.0
    if adjoint and not SOLVERS[name]:
        if d.get("M") is not None:
            d["M"] = _preconditioner_adjoint(d["M"])
        if d.get("M1") is not None or d.get("M2") is not None:  # (M1 A M2 well conditioned: so is M2ᴴ Aᴴ M1ᴴ)
            m1, m2 = _preconditioner_adjoint(d.get("M2")), _preconditioner_adjoint(d.get("M1"))
            d["M1"], d["M2"] = (m1, m2) if (m1 is None) == (m2 is None) else (None, None)
    return d


def _preconditioner_adjoint(m):
    """Mᴴ of a preconditioner, or None (no preconditioner) for a LinearOperator without rmatvec (an incomplete
    factorization's solve, the krylovuse tester): a preconditioner shapes the iteration, not the solution, so
    the adjoint solve goes on without it (and warns if it then does not converge)."""
    if m is None:
        return None
    if not isinstance(m, (Tracer, np.ndarray)) and isinstance(m, _ssl().LinearOperator):
        try:
            m.rmatvec(np.zeros(m.shape[0], dtype=m.dtype or np.float64))
        except NotImplementedError:
            return None
    return _adjoint(m, "the preconditioner", "", None)


def _derivative_solve(name, a, rhs, shift, kw, adjoint, site):
    """A⁻¹ rhs (or with ``adjoint`` A⁻ᴴ rhs) by solver ``name``, bound again (every order). After a
    breakdown (info < 0: the Lanczos-type solvers' on some right-hand sides, a unit cotangent e₀ among
    them) it is solved again by gmres, which has none: the derivative is that of the exact solution,
    whichever solver finds it."""
    dkw = _derivative_kw(name, a, rhs, kw, adjoint, site)
    op = _adjoint(a, "A", name, site) if adjoint and not SOLVERS[name] else a
    if adjoint:  # ((A - σI)ᴴ = Aᴴ - σ̄I)
        shift = tuple(np.conj(s) if np.iscomplexobj(bottom(s)) else s for s in shift)
    y, info = _solve(name, op, rhs, shift, dkw)
    info, by = int(bottom(info)), name
    if info < 0 and not SOLVERS[name] and name != "gmres":
        dkw = {"rtol": dkw["rtol"], "atol": 0.0, "M": dkw.get("M")}
        y, info = _solve("gmres", op, rhs, (), dkw)
        info, by = int(bottom(info)), f"{name}, then (after its breakdown, info={info}) gmres,"
    if info != 0:
        which = "adjoint (Aᴴ y = x̄)" if adjoint else "tangent (A ẋ = ḃ - Ȧ x)"
        warn_at(site, (
            f"scipy.sparse.linalg.{name}: the {which} solve of its derivative by {by} did not converge to "
            f"rtol={dkw['rtol']:g} ({_why(info, dkw)}), so the derivative is only as accurate as its last "
            "iterate. Raise maxiter (the derivative solves take the call's), or give a better preconditioner "
            "M."), UserWarning)
    return y


def _why(info, kw):
    if info > 0:
        return f"info={info}: maxiter={kw.get('maxiter')} reached" if kw.get("maxiter") is not None else (
            f"info={info}: SciPy's default maxiter reached")
    return f"info={info}: a breakdown or an illegal input"


def _mv(a, v):
    """A v for a dense A (traced or not)."""
    return np.matmul(a, v)


def _rules(name):
    p = PRIMITIVES[name]

    def rrule(a, b, *shift, **kw):
        x, info = _solve(name, a, b, shift, kw)  # (a, b may be an outer level's traced arrays: every order)
        site = user_site()

        def pullback(g):
            gx = g[0]
            if is_zero(gx):
                return (NoTangent() if not _is_dense(a) else ZERO, ZERO) + (ZERO,) * len(shift)
            gb = _derivative_solve(name, a, gx, shift, kw, True, site)  # b̄ = A⁻ᴴ x̄
            ga = Thunk(lambda: -np.multiply.outer(gb, _cj(x))) if _is_dense(a) else NoTangent()
            gs = tuple(Thunk(lambda: np.sum(_cj(x) * gb)) for _ in shift)  # σ̄ = xᴴ b̄
            return (ga, np.reshape(gb, np.shape(b))) + gs

        return (x, info), pullback

    def frule(primals, tangents, **kw):
        a, b, *shift = primals
        ta, tb, *ts = tangents
        shift = tuple(shift)
        x, info = _solve(name, a, b, shift, kw)
        rhs = ZERO if is_zero(tb) else np.reshape(tb, (-1,))
        if _is_dense(a) and not is_zero(ta):
            rhs = -_mv(ta, x) if is_zero(rhs) else rhs - _mv(ta, x)
        for t in ts:  # ((A - σI) x = b: σ̇ x joins the right-hand side)
            if not is_zero(t):
                rhs = t * x if is_zero(rhs) else rhs + t * x
        if is_zero(rhs):
            return (x, info), (ZERO, ZERO)
        return (x, info), (_derivative_solve(name, a, rhs, shift, kw, False, user_site()), ZERO)

    p.rrule, p.frule = rrule, frule


PRIMITIVES = {name: get_primitive(_impl(name), f"scipy.sparse.linalg.{name}") for name in SOLVERS}
for _name in SOLVERS:
    _rules(_name)


# -- the public functions ------------------------------------------------------------


_DENSE_FIX = ("assemble it dense (np.zeros_like(x, shape=(n, n)) filled by index writes, np.add.at(K, (rows, cols), "
              "vals)) and pass that traced array to the solver, which is differentiated in both (or solve with "
              "np.linalg.solve(K, b))")


def _krylov(name, A, b, x0, kw):
    """``scipy.sparse.linalg.<name>(A, b, x0, **kw)``: SciPy's (x, info), differentiated as the exact
    solution in ``b`` and a dense ``A`` (and minres's ``shift``)."""
    what = f"scipy.sparse.linalg.{name}"
    if not isinstance(A, Tracer):
        _constant_matrix(A, what, fix=_DENSE_FIX)
        if isinstance(A, _ssl().LinearOperator) and getattr(A, "A", None) is not None:
            _constant_matrix(A.A, what, fix=_DENSE_FIX)  # (aslinearoperator(K): the matrix it holds)
    shift = (kw.pop("shift"),) if name == "minres" else ()
    # (x0, M and the tolerances shape the iteration, not the exact solution: their values; a preconditioner
    # written as a LinearOperator over traced values, a Jacobi preconditioner of a traced matrix, too)
    kw = {k: _values_of(v) if k in _PRECONDITIONERS else bottom(v) for k, v in kw.items()}
    if x0 is not None:
        kw["x0"] = bottom(x0)
    b = _dense(b)
    try:
        x, info = _solve(name, A, b, shift, kw)
    except TracerEscapeError as e:
        if not isinstance(A, _ssl().LinearOperator):
            raise
        raise TracerEscapeError(
            f"{what} at {user_line()}: the LinearOperator A computes with traced values (its matvec closes over "
            "them), and SciPy takes its products as plain arrays, which would drop their derivative. mutagrad "
            "differentiates the Krylov solvers in b and in a traced dense matrix: assemble A as one (A = k * "
            "L.toarray() + c * np.eye(n), or np.stack of the operator's columns A @ e_j) and pass that; a "
            "LinearOperator over plain values is a constant.") from e
    info = int(bottom(info))
    differentiated = any(isinstance(v, Tracer) for v in (A, b) + shift)
    if info != 0 and differentiated:
        warn_at(user_site(), (
            f"{what} did not converge at {user_line()} ({_why(info, kw)}): mutagrad differentiates the exact "
            "solution x = A⁻¹ b, and the iterate returned is not it, so the derivative is not that of the "
            "value returned. Raise maxiter (or give a preconditioner M, or use another solver after a "
            "breakdown) until info is 0."), UserWarning)
    elif differentiated and not _solves(A, bottom(b), bottom(x), tuple(bottom(v) for v in shift), kw):
        warn_at(user_site(), (
            f"{what} returned info=0 at {user_line()}, but its x leaves a residual |b - A x| above the "
            "tolerance it was given (SciPy's stopping test measures another residual: tfqmr with a "
            "preconditioner M does): mutagrad differentiates the exact solution x = A⁻¹ b, which x is not, so "
            "the derivative is not that of the value returned. Use another solver (gmres, bicgstab) or no M."),
            UserWarning)
    return x, info


def _values_of(m):
    """A preconditioner's values: a LinearOperator whose products are plain arrays (those of ``m``, whose
    matvec may compute with traced values), or the plain value of an array."""
    if m is None or isinstance(m, (Tracer, np.ndarray)) or not isinstance(m, _ssl().LinearOperator):
        return bottom(m)
    ssl = _ssl()

    def plain(f):
        def product(v):
            st = STATE
            st.off_program += 1  # (its traced steps are no steps of the program: a forward jacobian's runs
            try:  # apply it to other vectors in their derivative solves, regress107)
                return np.asarray(bottom(f(v)))
            finally:
                st.off_program -= 1

        return product

    try:  # (the product itself, not LinearOperator.rmatvec, which converts what a traced closure returns)
        plain(m._rmatvec)(np.zeros(m.shape[0], dtype=m.dtype or np.float64))
        rmatvec = plain(m._rmatvec)
    except NotImplementedError:
        rmatvec = None
    return ssl.LinearOperator(m.shape, matvec=plain(m._matvec), rmatvec=rmatvec, dtype=m.dtype)


def _solves(a, b, x, shift, kw) -> bool:
    """Whether x solves (A - σI) x = b to the call's tolerance, max(rtol |b|, atol), within rounding: one more
    product with A (plain values)."""
    a = bottom(a)
    ax = a @ x if isinstance(a, np.ndarray) else (a.matvec(x) if hasattr(a, "matvec") else a @ x)
    r = np.reshape(b, -1) - np.reshape(ax, -1) + (shift[0] * np.reshape(x, -1) if shift else 0.0)
    nb, nax = np.linalg.norm(np.reshape(b, -1)), np.linalg.norm(np.reshape(ax, -1))
    eps = np.finfo(np.result_type(r.dtype, np.float32)).eps
    bound = 10 * max(kw.get("rtol", 1e-5) * nb, kw.get("atol", 0.0) or 0.0) + 1e3 * eps * (nb + nax)
    return bool(np.linalg.norm(r) <= bound)


def cg(A, b, x0=None, *, rtol=1e-05, atol=0.0, maxiter=None, M=None, callback=None):
    """``scipy.sparse.linalg.cg`` (A Hermitian positive definite): SciPy's ``(x, info)``, x differentiated as
    the exact solution A⁻¹ b in ``b`` and a dense ``A`` (mutagrad.rules.scipy.krylov: tolerances, x0, M,
    non-convergence).

    >>> import numpy as np, mutagrad as mg
    >>> from mutagrad.scipy.sparse.linalg import cg
    >>> A = np.array([[2.0, 0.0], [0.0, 4.0]])
    >>> np.round(mg.grad(lambda b: cg(A, b)[0].sum())(np.ones(2)), 10)  # A⁻¹ 1
    array([0.5 , 0.25])
    """
    return _krylov("cg", A, b, x0, {"rtol": rtol, "atol": atol, "maxiter": maxiter, "M": M, "callback": callback})


def bicg(A, b, x0=None, *, rtol=1e-05, atol=0.0, maxiter=None, M=None, callback=None):
    """``scipy.sparse.linalg.bicg``: SciPy's ``(x, info)``, x differentiated as the exact solution A⁻¹ b in
    ``b`` and a dense ``A``.

    >>> import numpy as np, mutagrad as mg
    >>> from mutagrad.scipy.sparse.linalg import bicg
    >>> A = np.array([[2.0, 1.0], [0.0, 4.0]])
    >>> np.round(mg.grad(lambda b: bicg(A, b)[0].sum())(np.ones(2)), 10)  # A⁻ᵀ 1
    array([0.5  , 0.125])
    """
    return _krylov("bicg", A, b, x0, {"rtol": rtol, "atol": atol, "maxiter": maxiter, "M": M, "callback": callback})


def bicgstab(A, b, x0=None, *, rtol=1e-05, atol=0.0, maxiter=None, M=None, callback=None):
    """``scipy.sparse.linalg.bicgstab``: SciPy's ``(x, info)``, x differentiated as the exact solution A⁻¹ b
    in ``b`` and a dense ``A``.

    >>> import numpy as np, mutagrad as mg
    >>> from mutagrad.scipy.sparse.linalg import bicgstab
    >>> A = np.array([[2.0, 1.0], [0.0, 4.0]])
    >>> x, dx = mg.jvp(lambda b: bicgstab(A, b)[0], (np.zeros(2),), (np.array([3.0, 4.0]),))
    >>> np.round(dx, 10)  # A⁻¹ ḃ
    array([1., 1.])
    """
    return _krylov("bicgstab", A, b, x0, {"rtol": rtol, "atol": atol, "maxiter": maxiter, "M": M,
                                         "callback": callback})


def cgs(A, b, x0=None, *, rtol=1e-05, atol=0.0, maxiter=None, M=None, callback=None):
    """``scipy.sparse.linalg.cgs``: SciPy's ``(x, info)``, x differentiated as the exact solution A⁻¹ b in
    ``b`` and a dense ``A`` (a scipy.sparse A is a constant).

    >>> import numpy as np, scipy.sparse as sp, mutagrad as mg
    >>> from mutagrad.scipy.sparse.linalg import cgs
    >>> A = sp.csr_array(np.array([[4.0, 1.0], [0.0, 2.0]]))
    >>> np.round(mg.grad(lambda b: cgs(A, b)[0][0])(np.ones(2)), 10)  # A⁻ᵀ e₀
    array([ 0.25 , -0.125])
    """
    return _krylov("cgs", A, b, x0, {"rtol": rtol, "atol": atol, "maxiter": maxiter, "M": M, "callback": callback})


def gmres(A, b, x0=None, *, rtol=1e-05, atol=0.0, restart=None, maxiter=None, M=None, callback=None,
          callback_type=None):
    """``scipy.sparse.linalg.gmres``: SciPy's ``(x, info)``, x differentiated as the exact solution A⁻¹ b in
    ``b`` and a dense ``A`` (Ā = -b̄ xᴴ).

    >>> import numpy as np, mutagrad as mg
    >>> from mutagrad.scipy.sparse.linalg import gmres
    >>> b = np.array([3.0, 4.0])
    >>> np.round(mg.grad(lambda A: gmres(A, b)[0].sum())(np.array([[2.0, 1.0], [0.0, 4.0]])), 10)
    array([[-0.5  , -0.5  ],
           [-0.125, -0.125]])
    """
    return _krylov("gmres", A, b, x0, {"rtol": rtol, "atol": atol, "restart": restart, "maxiter": maxiter, "M": M,
                                      "callback": callback, "callback_type": callback_type})


def lgmres(A, b, x0=None, *, rtol=1e-05, atol=0.0, maxiter=1000, M=None, callback=None, inner_m=30, outer_k=3,
           outer_v=None, store_outer_Av=True, prepend_outer_v=False):
    """``scipy.sparse.linalg.lgmres``: SciPy's ``(x, info)``, x differentiated as the exact solution A⁻¹ b in
    ``b`` and a dense ``A`` (a LinearOperator is a constant, whose adjoint solve uses its rmatvec).

    >>> import numpy as np, mutagrad as mg
    >>> from mutagrad.scipy.sparse.linalg import lgmres, aslinearoperator
    >>> A = aslinearoperator(np.array([[2.0, 1.0], [0.0, 4.0]]))
    >>> np.round(mg.grad(lambda b: lgmres(A, b)[0].sum())(np.ones(2)), 10)  # A⁻ᵀ 1
    array([0.5  , 0.125])
    """
    return _krylov("lgmres", A, b, x0, {"rtol": rtol, "atol": atol, "maxiter": maxiter, "M": M, "callback": callback,
                                       "inner_m": inner_m, "outer_k": outer_k, "outer_v": outer_v,
                                       "store_outer_Av": store_outer_Av, "prepend_outer_v": prepend_outer_v})


def minres(A, b, x0=None, *, rtol=1e-05, shift=0.0, maxiter=None, M=None, callback=None, show=False, check=False):
    """``scipy.sparse.linalg.minres`` ((A - shift I) x = b, A Hermitian): SciPy's ``(x, info)``, x
    differentiated as the exact solution in ``b``, a dense ``A`` and ``shift``.

    >>> import numpy as np, mutagrad as mg
    >>> from mutagrad.scipy.sparse.linalg import minres
    >>> A = np.array([[3.0, 0.0], [0.0, 5.0]])
    >>> round(float(mg.grad(lambda s: minres(A, np.ones(2), shift=s)[0].sum())(1.0)), 10)  # 1/2² + 1/4²
    0.3125
    """
    return _krylov("minres", A, b, x0, {"rtol": rtol, "shift": shift, "maxiter": maxiter, "M": M,
                                       "callback": callback, "show": show, "check": check})


def qmr(A, b, x0=None, *, rtol=1e-05, atol=0.0, maxiter=None, M1=None, M2=None, callback=None):
    """``scipy.sparse.linalg.qmr``: SciPy's ``(x, info)``, x differentiated as the exact solution A⁻¹ b in
    ``b`` and a dense ``A`` (the adjoint solve is preconditioned by M2ᴴ on the left and M1ᴴ on the right).

    >>> import numpy as np, mutagrad as mg
    >>> from mutagrad.scipy.sparse.linalg import qmr
    >>> A = np.array([[2.0, 1.0], [0.0, 4.0]])
    >>> np.round(mg.grad(lambda b: qmr(A, b)[0][0])(np.ones(2)), 10)  # A⁻ᵀ e₀
    array([ 0.5  , -0.125])
    """
    return _krylov("qmr", A, b, x0, {"rtol": rtol, "atol": atol, "maxiter": maxiter, "M1": M1, "M2": M2,
                                    "callback": callback})


def gcrotmk(A, b, x0=None, *, rtol=1e-05, atol=0.0, maxiter=1000, M=None, callback=None, m=20, k=None, CU=None,
            discard_C=False, truncate='oldest'):
    """``scipy.sparse.linalg.gcrotmk``: SciPy's ``(x, info)``, x differentiated as the exact solution A⁻¹ b in
    ``b`` and a dense ``A`` (ẋ = -A⁻¹ Ȧ x).

    >>> import numpy as np, mutagrad as mg
    >>> from mutagrad.scipy.sparse.linalg import gcrotmk
    >>> A, b = np.array([[2.0, 0.0], [0.0, 4.0]]), np.array([2.0, 4.0])
    >>> x, dx = mg.jvp(lambda A: gcrotmk(A, b)[0], (A,), (np.ones((2, 2)),))
    >>> np.round(dx, 10)
    array([-1. , -0.5])
    """
    return _krylov("gcrotmk", A, b, x0, {"rtol": rtol, "atol": atol, "maxiter": maxiter, "M": M,
                                        "callback": callback, "m": m, "k": k, "CU": CU, "discard_C": discard_C,
                                        "truncate": truncate})


def tfqmr(A, b, x0=None, *, rtol=1e-05, atol=0.0, maxiter=None, M=None, callback=None, show=False):
    """``scipy.sparse.linalg.tfqmr``: SciPy's ``(x, info)``, x differentiated as the exact solution A⁻¹ b in
    ``b`` and a dense ``A`` (x0 shapes the iteration only: its derivative is zero). SciPy's tfqmr applies
    ``M`` on the wrong side (1.17: with an M that does not commute with A, info is 0 at a point that does
    not solve A x = b); the derivative, the exact solution's, is solved without M.

    >>> import numpy as np, mutagrad as mg
    >>> from mutagrad.scipy.sparse.linalg import tfqmr
    >>> A = np.array([[2.0, 1.0], [0.0, 4.0]])
    >>> np.round(mg.grad(lambda b: tfqmr(A, b, x0=b)[0].sum())(np.ones(2)), 10)  # A⁻ᵀ 1, x0 aside
    array([0.5  , 0.125])
    """
    return _krylov("tfqmr", A, b, x0, {"rtol": rtol, "atol": atol, "maxiter": maxiter, "M": M, "callback": callback,
                                      "show": show})
