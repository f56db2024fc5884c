"""Products of a constant ``scipy.sparse`` matrix with traced arrays.

``A @ x``, ``x @ A``, ``A.dot(x)`` and, for the ``spmatrix`` classes, ``A * x``
(a matrix product there) with ``A`` a sparse matrix or array the function does
not differentiate (a plain value: sparse matrices hold no traced values) and
``x`` a traced dense array. The product is linear in ``x``:
ẏ = A ẋ, x̄ = Aᴴ ȳ (cotangent convention of rules/linalg.py), and ``y = x A``
likewise. The value is SciPy's own product, as in a plain call.

Python asks the sparse matrix first in ``A @ x``: SciPy converts ``x`` with
``np.asanyarray``, which the tracer answers from ``__array__`` (core) with a
0-d object array, SciPy's sign that the operand is not an array, so that SciPy
returns ``NotImplemented`` and Python asks ``x.__rmatmul__(A)``, which lands
here. SciPy is not imported by this module: a sparse matrix exists only if the
program imported ``scipy.sparse``.
"""
from __future__ import annotations

import sys

from .. import core
from ..core import bind, get_primitive
from ..tangents import NoTangent, ZeroTangent, is_zero


def is_sparse(x) -> bool:
    """Whether ``x`` is a ``scipy.sparse`` matrix or array (without importing SciPy)."""
    sp = sys.modules.get("scipy.sparse")
    return sp is not None and sp.issparse(x)


def is_matrix_product_operator(x) -> bool:
    """Whether ``*`` of ``x`` is a matrix product: the ``spmatrix`` classes (``csr_matrix``),
    not the ``sparray`` ones (``csr_array``, whose ``*`` is elementwise)."""
    sp = sys.modules.get("scipy.sparse")
    return sp is not None and sp.isspmatrix(x)


def _product(a, x, *, right=False):
    return x @ a if right else a @ x


sparse_matmul_p = get_primitive(_product, "scipy.sparse matrix product (A @ x, x @ A, A.dot(x))")
sparse_matmul_p.linear = True


def sparse_matmul(a, x, right=False):
    """``a @ x`` (``x @ a`` with ``right``) for a constant sparse ``a``, differentiated in ``x``."""
    return bind(sparse_matmul_p, (a, x), {"right": right})


def _adjoint(a):
    """Aᴴ, sparse (a transpose is a view of the same arrays; the conjugate copies complex data only)."""
    t = a.T
    return t.conj() if t.dtype.kind == "c" else t


def _rrule(a, x, *, right=False):
    y = sparse_matmul(a, x, right)  # (x may be an outer level's traced array: every order)

    def pullback(g):
        return NoTangent(), (ZeroTangent() if is_zero(g) else sparse_matmul(_adjoint(a), g, right))

    return y, pullback


def _frule(primals, tangents, *, right=False):
    (a, x), (_, t) = primals, tangents
    return sparse_matmul(a, x, right), (ZeroTangent() if is_zero(t) else sparse_matmul(a, t, right))


sparse_matmul_p.rrule, sparse_matmul_p.frule = _rrule, _frule
core.SPARSE_PRODUCT[0] = (is_sparse, is_matrix_product_operator, sparse_matmul)
