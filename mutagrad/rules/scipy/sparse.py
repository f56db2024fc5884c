"""scipy.sparse.linalg: ``spsolve``, ``splu`` (its ``solve``) and ``factorized``
with a constant sparse matrix and a traced right-hand side.

x = A⁻¹ b is linear in b: ẋ = A⁻¹ ḃ, b̄ = A⁻ᴴ x̄ (cotangent convention of
rules/linalg.py), a second sparse solve with the factors already made
(``splu``, ``factorized``) or with Aᴴ (``spsolve``). The matrix is a plain
value: sparse matrices hold no traced numbers (a derivative with respect to
the matrix would need one), so it is constant. Every value is SciPy's own.
scipy.sparse.linalg is imported at the first call (it takes a while to import).
"""
from __future__ import annotations

import numpy as np

from ...core import Tracer, bind, get_primitive
from ...tangents import NoTangent, ZeroTangent, is_zero
from ..sparse import _adjoint


def _ssl():
    import scipy.sparse.linalg as ssl

    return ssl


def _dense(b):
    """An operand given as a (nested) list or tuple that may hold traced numbers (a right-hand
    side, a signal, coefficients), as one array."""
    if isinstance(b, (list, tuple)):
        from ...numpy import array

        return array(b)
    return b


def _constant_matrix(a, what, fix=None):
    """Refuse a traced matrix, or a sparse one holding traced values, naming ``fix`` (how to solve with a
    matrix that depends on traced values) or, by default, the dense solve np.linalg.solve."""
    held = next((getattr(a, k, None) for k in ("data", "indices", "indptr", "row", "col", "offsets")
                 if isinstance(getattr(a, k, None), Tracer)), None) if not isinstance(a, Tracer) else None
    if held is not None:  # (K.data = traced values, the pattern kept: SciPy's C code then refuses them)
        from ...errors import TracedTypeError, user_line

        raise TracedTypeError(
            f"{what} of a scipy.sparse matrix holding traced values at {user_line()} (its .data, or another of "
            "its arrays, was set to a traced array): a sparse matrix holds plain numbers, and mutagrad "
            "differentiates the sparse solvers with respect to the right-hand side only. For a matrix that "
            "depends on traced values, " + (fix or (
                "assemble it dense (np.zeros_like(x, shape=(n, n)) filled by index writes, np.add.at(K, (rows, "
                "cols), vals)) and solve with np.linalg.solve(K, b), which is differentiated in both")) + ".")
    if isinstance(a, Tracer):
        from ...errors import TracedTypeError, user_line

        raise TracedTypeError(
            f"{what} with a traced matrix at {user_line()}: mutagrad differentiates the sparse solvers with "
            "respect to the right-hand side only (a scipy.sparse matrix holds plain numbers). For a matrix that "
            "depends on traced values, solve it dense: np.linalg.solve(A, b) (or mutagrad.scipy.linalg's "
            "lu_factor / cho_factor), which is differentiated in both.")


# -- spsolve ---------------------------------------------------------------------


def _spsolve(a, b, *, permc_spec=None, use_umfpack=True):
    return _ssl().spsolve(a, b, permc_spec=permc_spec, use_umfpack=use_umfpack)


spsolve_p = get_primitive(_spsolve, "scipy.sparse.linalg.spsolve")
spsolve_p.linear = True


def spsolve(A, b, permc_spec=None, use_umfpack=True):
    """``scipy.sparse.linalg.spsolve``: x with A x = b, differentiated in ``b`` (A constant).

    >>> import numpy as np, scipy.sparse as sp, mutagrad as mg
    >>> from mutagrad.scipy.sparse.linalg import spsolve
    >>> A = sp.csc_array(np.array([[2.0, 0.0], [1.0, 1.0]]))
    >>> mg.grad(lambda b: spsolve(A, b).sum())(np.ones(2))
    array([0., 1.])
    """
    _constant_matrix(A, "scipy.sparse.linalg.spsolve")
    return bind(spsolve_p, (A, _dense(b)), {"permc_spec": permc_spec, "use_umfpack": use_umfpack})


def _spsolve_rrule(a, b, **kw):
    x = bind(spsolve_p, (a, b), kw)  # (b may be an outer level's traced array: every order)

    def pullback(g):
        if is_zero(g):
            return NoTangent(), ZeroTangent()
        return NoTangent(), np.reshape(bind(spsolve_p, (_adjoint(a), g), kw), np.shape(b))

    return x, pullback


def _spsolve_frule(primals, tangents, **kw):
    (a, b), (_, t) = primals, tangents
    return bind(spsolve_p, (a, b), kw), (ZeroTangent() if is_zero(t) else bind(spsolve_p, (a, t), kw))


spsolve_p.rrule, spsolve_p.frule = _spsolve_rrule, _spsolve_frule


# -- spsolve_triangular ------------------------------------------------------------


def _spsolve_tri(a, b, *, lower=True, overwrite_A=False, unit_diagonal=False):
    # (overwrite_b is the public function's: mutagrad.scipy.sparse.linalg replays SciPy's call for it)
    return _ssl().spsolve_triangular(a, b, lower=lower, overwrite_A=overwrite_A, unit_diagonal=unit_diagonal)


spsolve_tri_p = get_primitive(_spsolve_tri, "scipy.sparse.linalg.spsolve_triangular")
spsolve_tri_p.linear = True


def spsolve_triangular(A, b, lower=True, overwrite_A=False, overwrite_b=False, unit_diagonal=False):
    """``scipy.sparse.linalg.spsolve_triangular``: x with A x = b for a triangular ``A``, differentiated
    in ``b`` (A constant). ``overwrite_b`` is followed by mutagrad.scipy.sparse.linalg's wrapper."""
    _constant_matrix(A, "scipy.sparse.linalg.spsolve_triangular")
    return bind(spsolve_tri_p, (A, _dense(b)), {"lower": lower, "overwrite_A": overwrite_A,
                                                "unit_diagonal": unit_diagonal})


def _tri_transposed(a, g, lower, unit_diagonal):
    """Aᴴ⁻¹ g: the triangle of Aᴴ is the other one (the unit diagonal stays one). (In CSC or CSR, which
    SciPy takes as they are: of another format it converts, and warns, as the forward call warned.)"""
    at = _adjoint(a)
    if getattr(at, "format", "csc") not in ("csc", "csr"):
        at = at.tocsc()
    return bind(spsolve_tri_p, (at, g), {"lower": not lower, "unit_diagonal": unit_diagonal})


def _spsolve_tri_rrule(a, b, *, lower=True, overwrite_A=False, unit_diagonal=False):
    x = bind(spsolve_tri_p, (a, b), {"lower": lower, "overwrite_A": overwrite_A, "unit_diagonal": unit_diagonal})

    def pullback(g):
        if is_zero(g):
            return NoTangent(), ZeroTangent()
        return NoTangent(), np.reshape(_tri_transposed(a, g, lower, unit_diagonal), np.shape(b))

    return x, pullback


def _spsolve_tri_frule(primals, tangents, *, lower=True, overwrite_A=False, unit_diagonal=False):
    (a, b), (_, t) = primals, tangents
    kw = {"lower": lower, "overwrite_A": overwrite_A, "unit_diagonal": unit_diagonal}
    return bind(spsolve_tri_p, (a, b), kw), (ZeroTangent() if is_zero(t) else bind(spsolve_tri_p, (a, t), kw))


spsolve_tri_p.rrule, spsolve_tri_p.frule = _spsolve_tri_rrule, _spsolve_tri_frule


# -- splu / factorized: solves with the factors of A -------------------------------------


def _lu_solve(lu, b, *, trans="N"):
    return lu.solve(b, trans=trans)


lu_solve_p = get_primitive(_lu_solve, "scipy.sparse.linalg.SuperLU.solve")
lu_solve_p.linear = True


def _solve(lu, b, trans):
    return bind(lu_solve_p, (lu, b), {"trans": trans})


def _lu_solve_rrule(lu, b, *, trans="N"):
    x = _solve(lu, b, trans)  # (b may be an outer level's traced array: every order)

    def pullback(g):
        if is_zero(g):
            return NoTangent(), ZeroTangent()
        if trans == "N":  # b̄ = A⁻ᴴ ḡ
            bbar = _solve(lu, g, "H")
        elif trans == "H":  # x = A⁻ᴴ b: b̄ = A⁻¹ ḡ
            bbar = _solve(lu, g, "N")
        else:  # x = A⁻ᵀ b: b̄ = conj(A⁻¹) ḡ = conj(A⁻¹ conj(ḡ))
            bbar = np.conj(_solve(lu, np.conj(g), "N")) if np.iscomplexobj(g) or lu.U.dtype.kind == "c" else (
                _solve(lu, g, "N"))
        return NoTangent(), np.reshape(bbar, np.shape(b))

    return x, pullback


def _lu_solve_frule(primals, tangents, *, trans="N"):
    (lu, b), (_, t) = primals, tangents
    return _solve(lu, b, trans), (ZeroTangent() if is_zero(t) else _solve(lu, t, trans))


lu_solve_p.rrule, lu_solve_p.frule = _lu_solve_rrule, _lu_solve_frule


class SuperLU:
    """``scipy.sparse.linalg.SuperLU`` whose ``solve`` is differentiated in the right-hand
    side; every other attribute (``L``, ``U``, ``perm_r``, ``perm_c``, ``shape``, ``nnz``) is
    the factorization's own."""

    __slots__ = ("_lu",)

    def __init__(self, lu):
        self._lu = lu

    def solve(self, rhs, trans="N"):
        if trans not in ("N", "T", "H"):
            return self._lu.solve(np.zeros(self._lu.shape[0]), trans=trans)  # (SciPy's own error)
        return _solve(self._lu, _dense(rhs), trans)

    def __getattr__(self, name):
        return getattr(self._lu, name)

    def __repr__(self):
        return f"mutagrad SuperLU({self._lu!r})"


def splu(A, permc_spec=None, diag_pivot_thresh=None, relax=None, panel_size=None, options=None):
    """``scipy.sparse.linalg.splu``: the factorization of a constant sparse A, whose ``solve``
    is differentiated in the right-hand side.

    >>> import numpy as np, scipy.sparse as sp, mutagrad as mg
    >>> from mutagrad.scipy.sparse.linalg import splu
    >>> lu = splu(sp.csc_array(np.array([[2.0, 0.0], [1.0, 1.0]])))
    >>> mg.grad(lambda b: lu.solve(b).sum())(np.ones(2))
    array([0., 1.])
    """
    _constant_matrix(A, "scipy.sparse.linalg.splu")
    return SuperLU(_ssl().splu(A, permc_spec=permc_spec, diag_pivot_thresh=diag_pivot_thresh, relax=relax,
                               panel_size=panel_size, options=options or {}))


def spilu(A, drop_tol=None, fill_factor=None, drop_rule=None, permc_spec=None, diag_pivot_thresh=None, relax=None,
          panel_size=None, options=None):
    """``scipy.sparse.linalg.spilu``: the incomplete factorization of a constant sparse A (a preconditioner),
    whose ``solve``, a linear map with fixed factors, is differentiated in the right-hand side, as
    :func:`splu`'s (the sparsesolve tester: a hand-written ILU-preconditioned CG).

    >>> import numpy as np, scipy.sparse as sp, mutagrad as mg
    >>> from mutagrad.scipy.sparse.linalg import spilu
    >>> ilu = spilu(sp.csc_array(np.array([[2.0, 0.0], [1.0, 1.0]])))
    >>> mg.grad(lambda r: ilu.solve(r).sum())(np.ones(2))
    array([0., 1.])
    """
    _constant_matrix(A, "scipy.sparse.linalg.spilu")
    return SuperLU(_ssl().spilu(A, drop_tol=drop_tol, fill_factor=fill_factor, drop_rule=drop_rule,
                                permc_spec=permc_spec, diag_pivot_thresh=diag_pivot_thresh, relax=relax,
                                panel_size=panel_size, options=options))


def factorized(A):
    """``scipy.sparse.linalg.factorized``: a function solving A x = b for a constant sparse A,
    differentiated in b, with SciPy's SuperLU factors (where SciPy would solve with UMFPACK,
    scikit-umfpack being installed, the factors are SuperLU's all the same: its values may
    then differ from a plain call's in the last bits)."""
    _constant_matrix(A, "scipy.sparse.linalg.factorized")
    ssl = _ssl()
    lu = getattr(ssl.factorized(A), "__self__", None)
    if type(lu).__name__ != "SuperLU":
        import scipy.sparse as sp

        lu = ssl.splu(sp.csc_matrix(A))
    return SuperLU(lu).solve


from . import krylov as _krylov  # noqa: F401  (the Krylov solvers, registered with the other sparse solves)
