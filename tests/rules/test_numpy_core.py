"""Every registered rule, one line per case, checked in both modes against
finite differences (and forward against reverse by the dot-product
identity). The sweep at the end fails when a registered rule has no case."""
import copy
import warnings

import numpy as np
import pytest

import mutagrad as mg
from mutagrad.testing import check_grads
from tests.rules._draws import Draws, assert_values_match_numpy  # noqa: E402

_draws = Draws(0)
R, P, U, C, SPD = _draws.R, _draws.P, _draws.U, _draws.C, _draws.SPD


W23 = R(2, 3)

# (covers, function, args, order)
CASES = [
    # arithmetic
    ("np.add", lambda a, b: a + b, (R(3), R(2, 3)), 2),
    ("np.subtract", lambda a, b: a - b, (R(3), R(3)), 2),
    ("np.negative", lambda a: -a, (R(3),), 2),
    ("np.positive", lambda a: +a, (R(3),), 1),
    ("np.multiply", lambda a, b: a * b, (R(2, 3), R(3)), 2),
    ("np.divide", lambda a, b: a / b, (R(3), P(3)), 2),
    ("np.reciprocal", np.reciprocal, (P(3),), 2),
    ("np.square", np.square, (R(3),), 2),
    ("np.sqrt", np.sqrt, (P(3),), 2),
    ("np.cbrt", np.cbrt, (P(3),), 2),
    ("np.power", lambda a, b: a ** b, (P(3), R(3)), 2),
    ("np.power", lambda a: a ** 3, (R(3),), 2),
    ("np.float_power", np.float_power, (P(3), R(3)), 1),
    ("np.float64.__pow__", lambda a, b: np.sum(a) ** np.sum(b) + 1.5 ** np.sum(b) + np.sum(a) ** 3, (P(2), R(2)), 2),
    ("np.absolute", np.abs, (R(4) + np.sign(R(4)),), 1),
    ("np.fabs", np.fabs, (np.array([-1.5, 2.0, -0.3]),), 1),
    ("np.sign", lambda a: np.sign(a) * a, (R(3),), 1),
    ("np.sign", lambda z: np.sign(z) * z ** 2, (C(3),), 2),  # complex: z/|z|, not piecewise constant
    ("np.floor", lambda a: np.floor(a) + a, (np.array([0.3, 1.7, -2.2]),), 1),
    ("np.ceil", lambda a: np.ceil(a) * a, (np.array([0.3, 1.7, -2.2]),), 1),
    ("np.trunc", lambda a: np.trunc(a) * a, (np.array([0.3, 1.7, -2.2]),), 1),
    ("np.rint", lambda a: np.rint(a) * a, (np.array([0.3, 1.7, -2.2]),), 1),
    ("np.floor_divide", lambda a, b: (a // b) * a, (np.array([3.3, 5.1]), np.array([2.0, 2.0])), 1),
    ("np.spacing", lambda a: np.spacing(a) + a, (P(2),), 1),
    ("np.fmod", np.fmod, (np.array([5.3, -4.2]), np.array([2.0, 1.5])), 1),
    ("np.remainder", np.remainder, (np.array([5.3, -4.2]), np.array([2.0, 1.5])), 1),
    ("np.copysign", np.copysign, (np.array([1.3, -2.0]), np.array([-1.0, 3.0])), 1),
    ("np.heaviside", lambda a: np.heaviside(a, 0.5) * a, (np.array([-1.0, 2.0]),), 1),
    ("np.ldexp", lambda a: np.ldexp(a, np.array([1, 3])), (R(2),), 1),
    # exponentials and logarithms
    ("np.exp", np.exp, (R(3),), 2),
    ("np.exp2", np.exp2, (R(3),), 2),
    ("np.expm1", np.expm1, (R(3),), 2),
    ("np.log", np.log, (P(3),), 2),
    ("np.log2", np.log2, (P(3),), 2),
    ("np.log10", np.log10, (P(3),), 2),
    ("np.log1p", np.log1p, (P(3),), 2),
    ("np.logaddexp", np.logaddexp, (R(3), R(3)), 2),
    ("np.logaddexp", np.logaddexp, (np.array([0.3, -2.0, 5.0]), np.array([0.3, 1.0, -4.0])), 2),  # a tie
    ("np.logaddexp2", np.logaddexp2, (R(3), R(3)), 2),
    # trigonometric
    ("np.sin", np.sin, (R(3),), 2),
    ("np.cos", np.cos, (R(3),), 2),
    ("np.tan", np.tan, (U(3),), 2),
    ("np.arcsin", np.arcsin, (U(3),), 2),
    ("np.arccos", np.arccos, (U(3),), 2),
    ("np.arctan", np.arctan, (R(3),), 2),
    ("np.arctan2", np.arctan2, (R(3), R(3)), 2),
    ("np.hypot", np.hypot, (R(3), R(3)), 2),
    ("np.sinh", np.sinh, (R(3),), 2),
    ("np.cosh", np.cosh, (R(3),), 2),
    ("np.tanh", np.tanh, (R(3),), 2),
    ("np.arcsinh", np.arcsinh, (R(3),), 2),
    ("np.arccosh", np.arccosh, (P(3) + 1.0,), 2),
    ("np.arccosh", np.arccosh, (np.array([-2 + 0.1j, 1.5 - 0.3j, -0.5 + 2j, 3 + 1j]),), 2),  # Re z < 0 too
    ("np.arctanh", np.arctanh, (U(3),), 2),
    ("np.deg2rad", np.deg2rad, (R(3),), 1),
    ("np.rad2deg", np.rad2deg, (R(3),), 1),
    ("np.radians", np.radians, (R(3),), 1),
    ("np.degrees", np.degrees, (R(3),), 1),
    ("np.sinc", np.sinc, (R(3),), 2),
    # selection
    ("np.maximum", np.maximum, (R(4), R(4)), 1),
    ("np.minimum", np.minimum, (R(4), R(4)), 1),
    ("np.fmax", np.fmax, (R(4), R(4)), 1),
    ("np.fmin", np.fmin, (R(4), R(4)), 1),
    ("np.where", lambda a, b: np.where(a > 0, a * b, b), (R(5), R(5)), 2),
    ("np.clip", lambda a: np.clip(a, -0.5, 0.5), (np.array([-1.0, -0.2, 0.3, 0.9]),), 1),
    # complex parts
    ("np.conjugate", lambda z: np.abs(np.conj(z) * z), (C(3),), 1),
    ("np.real", lambda z: np.real(z) ** 2, (C(3),), 1),
    ("np.imag", lambda z: np.imag(z) ** 2, (C(3),), 1),
    # reductions
    ("np.sum", lambda a: np.sum(a, axis=1), (R(3, 4),), 2),
    ("np.sum", lambda a: a.sum(axis=(0, 2), keepdims=True), (R(2, 3, 4),), 1),
    ("np.mean", lambda a: np.mean(a, axis=0), (R(3, 4),), 2),
    ("np.prod", lambda a: np.prod(a, axis=1), (R(3, 4),), 2),
    ("np.prod", lambda a: np.prod(a), (np.array([2.0, 0.0, 3.0, 1.5]),), 2),
    ("np.max", lambda a: np.max(a, axis=0), (R(3, 4),), 1),
    ("np.min", lambda a: a.min(), (R(3, 4),), 1),
    ("np.amax", lambda a: np.amax(a, axis=1, keepdims=True), (R(3, 4),), 1),
    ("np.amin", lambda a: np.amin(a, axis=1), (R(3, 4),), 1),
    ("np.var", lambda a: np.var(a, axis=1), (R(3, 4),), 2),
    ("np.var", lambda a: np.var(a, ddof=1), (R(5),), 1),
    ("np.std", lambda a: np.std(a, axis=0), (R(3, 4),), 2),
    ("np.std", lambda a: np.std(a, axis=0) + a, (R(1, 4),), 2),  # one element: the constant 0 (not nan)
    ("np.std", lambda a: np.std(a, axis=1, where=np.array([[True, False, True], [False, True, False]])) * a[:, 0],
     (R(2, 3),), 2),
    ("np.ptp", lambda a: np.ptp(a, axis=1), (R(3, 4),), 1),
    ("np.cumsum", lambda a: np.cumsum(a, axis=1), (R(3, 4),), 2),
    ("np.cumsum", lambda a: np.cumsum(a), (R(3, 2),), 1),
    ("np.cumprod", lambda a: np.cumprod(a, axis=1), (R(2, 4),), 2),
    ("np.cumprod", lambda a: np.cumprod(a), (np.array([2.0, 0.0, 3.0, -1.0]),), 2),
    ("np.average", lambda a: np.average(a, axis=0, weights=np.array([1.0, 2.0, 3.0])), (R(3, 2),), 1),
    ("np.trace", np.trace, (R(3, 3),), 1),
    ("np.linalg.norm", lambda a: np.linalg.norm(a), (R(3, 2),), 2),
    ("np.linalg.norm", lambda a: np.linalg.norm(a, axis=0), (R(3, 2),), 1),
    # shape
    ("np.reshape", lambda a: np.reshape(a, (6,)) * 2, (R(2, 3),), 1),
    ("np.reshape", lambda a: a.T.reshape(6) * 2, (R(2, 3),), 1),
    ("np.ravel", lambda a: np.ravel(a.T) * 2, (R(2, 3),), 1),
    ("np.transpose", lambda a: np.transpose(a, (2, 0, 1)) * 1.0, (R(2, 3, 4),), 1),
    ("np.swapaxes", lambda a: np.swapaxes(a, 0, 1) @ a, (R(2, 3),), 1),
    ("np.moveaxis", lambda a: np.moveaxis(a, 0, -1) * 2, (R(2, 3, 4),), 1),
    ("np.expand_dims", lambda a: np.expand_dims(a, 1) * a, (R(3),), 1),
    ("np.squeeze", lambda a: np.squeeze(a) * 2, (R(3, 1),), 1),
    ("np.broadcast_to", lambda a: np.broadcast_to(a, (2, 3)) * W23, (R(3),), 1),
    ("np.flip", lambda a: np.flip(a, 0) * np.arange(3.0), (R(3),), 1),
    ("np.fliplr", lambda a: np.fliplr(a) * a, (R(2, 2),), 1),
    ("np.flipud", lambda a: np.flipud(a) * a, (R(2, 2),), 1),
    ("np.rot90", lambda a: np.rot90(a) * a, (R(2, 2),), 1),
    ("np.atleast_1d", lambda a: np.atleast_1d(a) * 2, (1.5,), 1),
    ("np.atleast_2d", lambda a: np.atleast_2d(a) * 2, (R(3),), 1),
    ("np.atleast_3d", lambda a: np.atleast_3d(a) * 2, (R(3),), 1),
    ("np.copy", lambda a: np.copy(a) * a, (R(3),), 1),
    ("np.diagonal", lambda a: np.diagonal(a) * 2, (R(3, 3),), 1),
    ("np.concatenate", lambda a, b: np.concatenate([a, b, a]), (R(2), R(3)), 1),
    ("np.concatenate", lambda a, b: np.concatenate((a, b), axis=1), (R(2, 2), R(2, 3)), 1),
    ("np.stack", lambda a, b: np.stack([a, b], axis=1), (R(3), R(3)), 1),
    ("np.hstack", lambda a, b: np.hstack([a, b]), (R(2), R(3)), 1),
    ("np.vstack", lambda a, b: np.vstack([a, b]), (R(2), R(2)), 1),
    ("np.dstack", lambda a, b: np.dstack([a, b]), (R(2), R(2)), 1),
    ("np.column_stack", lambda a, b: np.column_stack([a, b]), (R(2), R(2)), 1),
    ("np.append", lambda a, b: np.append(a, b), (R(2), R(2)), 1),
    ("np.split", lambda a: np.split(a, 2)[1] * 3, (R(4),), 1),
    ("np.array_split", lambda a: np.array_split(a, 2)[0] * 3, (R(5),), 1),
    ("np.hsplit", lambda a: np.hsplit(a, 2)[0] * 3, (R(2, 4),), 1),
    ("np.vsplit", lambda a: np.vsplit(a, 2)[1] * 3, (R(4, 2),), 1),
    ("np.dsplit", lambda a: np.dsplit(a, 2)[1] * 3, (R(2, 2, 4),), 1),
    ("ndarray.astype", lambda a: np.abs(a.astype(np.complex128) * (1 + 2j)), (R(3),), 1),
    ("ndarray.view", lambda a: a.view() * 2.0, (R(3),), 1),
    ("np.lib.stride_tricks.sliding_window_view",
     lambda a: np.lib.stride_tricks.sliding_window_view(a, 3) * np.arange(6.0).reshape(2, 3), (R(4),), 1),
    ("np.broadcast_arrays", lambda a, b: np.broadcast_arrays(a, b)[0] * np.broadcast_arrays(a, b)[1], (R(3), R(2, 1)), 1),
    ("np.linspace", lambda a, b: np.linspace(a, b, 5) ** 2, (0.3, 1.7), 2),
    ("np.linspace", lambda a, b: np.linspace(a, b, 4, axis=-1, endpoint=False) ** 2, (R(2), R(3, 1)), 1),
    ("np.delete", lambda a: np.delete(a, [0, 2]) * 2, (R(4),), 1),
    ("np.delete", lambda a: np.delete(a, 1, axis=1) * 2, (R(2, 3),), 1),
    ("np.vander", lambda a: np.vander(a, 3), (R(3),), 2),
    ("np.angle", lambda z: np.angle(z) * 2, (C(3),), 2),
    ("np.angle", lambda x: np.angle(x, deg=True) + x, (np.array([0.5, -1.5]),), 1),
    ("np.rollaxis", lambda a: np.rollaxis(a, 2) * 2, (R(2, 3, 4),), 1),
    ("np.fix", lambda a: np.fix(a) * a, (np.array([0.3, -1.7, 2.2]),), 1),
    ("np.unwrap", lambda a: np.unwrap(a) ** 2, (np.array([0.1, 3.0, 6.5, 0.2]),), 2),
    ("np.bincount", lambda w: np.bincount(np.array([0, 2, 2, 1]), weights=w) * np.arange(1.0, 4.0), (R(4),), 1),
    ("np.bincount", lambda w: np.bincount(np.array([4, 0, 4, 4, 1]), w, minlength=7) ** 2, (R(5),), 2),
    ("np.vecdot", np.vecdot, (R(2, 3), R(3)), 2),
    ("np.vecdot", np.vecdot, (C(3), C(3)), 1),
    # products and linear algebra
    ("np.matmul", lambda a, b: a @ b, (R(2, 3), R(3, 4)), 2),
    ("np.matmul", lambda a, b: a @ b, (R(3), R(3, 2)), 1),
    ("np.matmul", lambda a, b: np.matmul(a, b), (R(2, 2, 3), R(3)), 1),
    ("np.tensordot", lambda a, b: np.tensordot(a, b, axes=([0, 2], [1, 0])), (R(2, 3, 4), R(4, 2, 5)), 1),
    ("np.tensordot", lambda a, b: np.tensordot(a, b, 1), (R(2, 3), R(3, 2)), 1),
    ("np.dot", np.dot, (R(2, 3), R(3)), 2),
    ("np.dot", np.dot, (R(2, 3, 2), R(4, 2, 3)), 1),
    ("np.inner", np.inner, (R(2, 3), R(4, 3)), 1),
    ("np.vdot", np.vdot, (R(2, 2), R(2, 2)), 1),
    ("np.outer", np.outer, (R(3), R(2)), 1),
    ("np.einsum", lambda a, b: np.einsum("ij,jk->ik", a, b), (R(2, 3), R(3, 2)), 2),
    ("np.einsum", lambda a: np.einsum("ii->", a), (R(3, 3),), 1),
    ("np.einsum", lambda a: np.einsum("ii->i", a), (R(3, 3),), 1),
    ("np.einsum", lambda a, b: np.einsum("...ij,...j", a, b), (R(2, 2, 3), R(3)), 1),
    ("np.einsum", lambda a, b: np.einsum("ij,k->ik", a, b), (R(2, 3), R(2)), 1),
    ("np.einsum", lambda a, b: np.einsum(a, [0, 1], b, [1, 2], [0, 2]), (R(2, 3), R(3, 2)), 1),
    ("np.linalg.inv", np.linalg.inv, (SPD(3),), 2),
    ("np.linalg.solve", np.linalg.solve, (SPD(3), R(3)), 2),
    ("np.linalg.solve", np.linalg.solve, (SPD(3), R(3, 2)), 1),
    ("np.linalg.det", np.linalg.det, (R(3, 3),), 2),
    # singular matrices: the gradient is the adjugate's transpose (inv would raise)
    ("np.linalg.det", np.linalg.det, (np.array([[1.0, 2.0], [2.0, 4.0]]),), 2),
    ("np.linalg.det", np.linalg.det, (np.ones((3, 3)),), 2),  # rank 1: second order too (cofactors)
    ("np.linalg.det", np.linalg.det, (np.array([[1.0, 2.0, 0.0, 1.0], [2.0, 4.0, 0.0, 2.0], [0.5, 1.0, 3.0, 1.0],
                                                [1.0, 0.0, 1.0, 0.0]]),), 1),  # singular 4x4: the SVD route
    ("np.linalg.det", lambda a: np.linalg.det(np.stack([a, a + np.eye(3)])),
     (np.array([[1.0, 2.0, 0.5], [0.0, 0.0, 0.0], [0.3, -1.0, 2.0]]),), 1),
    ("np.linalg.slogdet", lambda a: np.linalg.slogdet(a)[1], (SPD(3),), 2),
    # complex: the sign exp(i arg det) moves with the matrix (its cotangent used to be dropped)
    ("np.linalg.slogdet", lambda z: np.linalg.slogdet(z)[0] * (1 + 2j) + np.linalg.slogdet(z)[1], (C(3, 3),), 2),
    # indexing and selection
    ("np.take", lambda a: np.take(a, [2, 0, 2]), (R(3),), 1),
    ("np.take_along_axis", lambda a: np.take_along_axis(a, np.array([[1, 0], [0, 0]]), 1), (R(2, 2),), 1),
    ("np.sort", lambda a: np.sort(a) * np.arange(4.0), (np.array([0.3, -1.0, 2.0, 0.1]),), 1),
    ("np.partition", lambda a: np.partition(a, [0, 3], axis=1) * np.arange(5.0),
     (np.array([[0.3, -1.0, 2.0, 0.1, 1.4], [1.1, -0.2, 0.5, -2.0, 0.7]]),), 2),
    # creation
    ("np.zeros_like", lambda a: np.zeros_like(a) + a, (R(3),), 1),
    ("np.ones_like", lambda a: np.ones_like(a) * a, (R(3),), 1),
    ("np.empty_like", lambda a: _filled(np.empty_like(a), a), (R(3),), 1),
    ("np.full_like", lambda a: np.full_like(a, 2.0) * a, (R(3),), 1),
]


# names that only newer NumPy versions have
if hasattr(np, "cumulative_sum"):  # NumPy >= 2.1
    CASES += [
        ("np.matrix_transpose", lambda a: np.matrix_transpose(a) @ a, (R(2, 3),), 1),
        ("np.cumulative_sum", lambda a: np.cumulative_sum(a, axis=1, include_initial=True), (R(2, 3),), 1),
        ("np.cumulative_prod", lambda a: np.cumulative_prod(a), (R(4),), 2),
    ]
if isinstance(getattr(np, "matvec", None), np.ufunc):  # NumPy >= 2.2
    CASES += [
        ("np.matvec", np.matvec, (R(2, 3), R(3)), 2),
        ("np.vecmat", np.vecmat, (R(2), R(2, 3)), 2),
    ]


# functions added with their own draws (so the cases above keep theirs)
_more = Draws(5)
X34 = _more.R(3, 4)
M1 = np.array([0.0, 0.0, 1.0, 1.0, 0.0, 1.0, 0.0])  # the zeros trim_zeros finds (a * M1 keeps them under FD)
M2 = np.array([[0.0, 0.0, 0.0, 0.0, 0.0], [0.0, 1.0, 0.0, 1.0, 0.0], [0.0, 0.0, 1.0, 0.0, 0.0]])
I0X = np.array([-9.5, -3.0, -0.2, 0.7, 7.9, 8.1, 12.0])  # both of np.i0's expansions (|x| <= 8 and above)

NEW_CASES = [
    # insert: a gather from arr and values (int, slice and list positions; axis None or given)
    ("np.insert", lambda a, v: np.insert(a, 2, v), (_more.R(4), 0.7), 2),
    ("np.insert", lambda a, v: np.insert(a, [1, 3, 1], v), (_more.R(4), _more.R(3)), 1),
    ("np.insert", lambda a, v: np.insert(a, slice(0, 3), v, axis=1), (X34, _more.R(3)), 1),
    ("np.insert", lambda a, v: np.insert(a, 2, v, axis=0), (X34, _more.R(4)), 1),
    ("np.insert", lambda a, v: np.insert(a, -1, v, axis=1), (X34, _more.R(3, 1)), 1),
    ("np.insert", lambda a, v: np.insert(a, [0, 4], v, axis=1), (X34, _more.R(3, 1)), 1),
    ("np.insert", lambda a, v: np.insert(a, 3, v), (X34, _more.R(2)), 1),
    ("np.insert", lambda a: np.insert(a, 1, [2.0, 3.0]), (_more.R(3),), 1),
    ("np.insert", lambda v: np.insert(np.arange(4.0), [0, 2], v), (_more.R(2),), 1),
    ("np.insert", lambda a, v: np.insert(a, 1, [v, 2.0, v]), (_more.R(3), 0.4), 1),
    ("np.unstack", lambda a: np.unstack(a, axis=1)[2] * 2, (X34,), 1),
    ("np.unstack", lambda a: np.unstack(a), (X34,), 1),
    ("np.astype", lambda a: np.abs(np.astype(a, np.complex128) * (1 + 2j)), (_more.R(3),), 1),
    ("np.astype", lambda a: np.astype(a, np.float64, copy=False) * a, (_more.R(3),), 1),
    ("np.trim_zeros", lambda a: np.trim_zeros(a * M1), (_more.R(7),), 1),
    ("np.trim_zeros", lambda a: np.trim_zeros(a * M1, "f"), (_more.R(7),), 1),
    ("np.trim_zeros", lambda a: np.trim_zeros(a * M1, trim="b"), (_more.R(7),), 1),
    ("np.trim_zeros", lambda a: np.trim_zeros(a * M2), (_more.R(3, 5),), 1),
    ("np.trim_zeros", lambda a: np.trim_zeros(a * M2, "b", axis=1), (_more.R(3, 5),), 1),
    ("np.trim_zeros", lambda a: np.trim_zeros(a * M2, axis=-2), (_more.R(3, 5),), 1),
    ("np.apply_along_axis", lambda a: np.apply_along_axis(lambda r: r[::-1] * r, 1, a), (X34,), 2),
    ("np.apply_along_axis", lambda a: np.apply_along_axis(np.sum, 0, a), (X34,), 1),
    ("np.apply_along_axis", lambda a: np.apply_along_axis(np.diag, -1, a), (X34,), 1),
    ("np.apply_along_axis", lambda a, s: np.apply_along_axis(lambda r, k: np.cumsum(r) * k, 1, a, s),
     (_more.R(2, 3, 2), 1.5), 1),
    ("np.apply_over_axes", lambda a: np.apply_over_axes(np.sum, a, [0, 2]), (_more.R(2, 3, 2),), 1),
    ("np.apply_over_axes", lambda a: np.apply_over_axes(lambda v, ax: np.cumsum(v, ax) ** 2, a, -1), (X34,), 2),
    ("np.i0", np.i0, (I0X,), 2),
    ("np.i0", lambda a: np.i0(a) * a, (0.0,), 2),
    ("np.vander", lambda a: np.vander(a, 4, increasing=True), (_more.R(3),), 2),  # NumPy's running product
    ("np.sort_complex", lambda a: np.sort_complex(a), (_more.R(5),), 1),
    ("np.sort_complex", lambda z: np.sort_complex(z), (_more.C(5),), 1),
    ("np.logspace", lambda a, b: np.logspace(a, b, 5), (0.3, 1.2), 2),
    ("np.logspace", lambda a, b: np.logspace(a, b, 4, base=2.0, endpoint=False, axis=-1), (_more.R(2), _more.R(3, 1)), 1),
    ("np.logspace", lambda a, b, c: np.logspace(a, b, 4, base=c, axis=-1), (0.5, 1.5, np.array([2.0, 3.0])), 2),
    ("np.geomspace", lambda a, b: np.geomspace(a, b, 5), (0.3, 7.0), 2),
    ("np.geomspace", lambda a, b: np.geomspace(a, b, 4, endpoint=False), (-2.0, -30.0), 1),
    ("np.geomspace", lambda a, b: np.geomspace(a, b, 4, axis=-1), (np.array([1.0, -2.0]), np.array([8.0, -0.5])), 1),
    ("np.geomspace", lambda a, b: np.geomspace(a, b, 5), (1.0 + 1.0j, -3.0 + 0.5j), 1),
    # np.emath: real where the real function is defined, complex (as NumPy) where an element is not
    ("np.emath.sqrt", np.emath.sqrt, (_more.P(3),), 2),
    ("np.emath.sqrt", np.emath.sqrt, (np.array([0.7, -1.3, 2.1]),), 2),
    ("np.emath.log", np.emath.log, (np.array([0.7, -1.3, 2.1]),), 2),
    ("np.emath.log2", np.emath.log2, (_more.P(3),), 1),
    ("np.emath.log10", np.emath.log10, (np.array([-0.7, 1.3]),), 1),
    ("np.emath.logn", np.emath.logn, (np.array([2.0, 3.0]), np.array([-0.7, 1.3])), 2),
    ("np.emath.power", np.emath.power, (np.array([0.7, -1.3, 2.1]), 2.5), 2),
    ("np.emath.power", lambda a: np.emath.power(a, 3), (np.array([-0.7, 1.3]),), 1),
    ("np.emath.arccos", np.emath.arccos, (np.array([0.3, -1.7, 2.5]),), 2),
    ("np.emath.arcsin", np.emath.arcsin, (np.array([0.3, -0.6]),), 2),
    ("np.emath.arctanh", np.emath.arctanh, (np.array([0.3, -1.7, 2.5]),), 1),
    ("np.emath.sqrt", np.emath.sqrt, (_more.C(3),), 1),
    ("np.emath.sqrt", lambda a: np.emath.sqrt(a[0]), (np.array([-2.0, 1.0]),), 1),
]
CASES += NEW_CASES

# registered, with no derivative: the derivative of what they reach is a NotImplementedTangent
NOT_DIFFERENTIABLE_CASES = [
    ("np.nextafter", lambda a, b: np.nextafter(a, b) * 2.0, (_more.R(3), _more.R(3))),
]


def _filled(buf, a):
    buf[...] = a * a
    return buf


def _mut(fn):
    def f(a, b):
        fn(a, b)
        return a * 1.0
    return f


MUTATION_CASES = [
    ("np.copyto", _mut(lambda a, b: np.copyto(a, b, where=np.array([True, False, True]))), (R(3), R(3))),
    ("np.copyto", _mut(lambda a, b: np.copyto(a, b[:1])), (R(3), R(3))),
    ("np.put", _mut(lambda a, b: np.put(a, [0, 2], b[:2])), (R(3), R(3))),
    ("np.place", _mut(lambda a, b: np.place(a, np.array([True, False, True]), b[1:])), (R(3), R(3))),
    ("np.putmask", _mut(lambda a, b: np.putmask(a, np.array([True, False, True]), b)), (R(3), R(3))),
    ("np.fill_diagonal", lambda a, b: (np.fill_diagonal(a, b[0]), a * 1.0)[1], (R(2, 2), R(3))),
    ("np.put_along_axis", lambda a, b: (np.put_along_axis(a, np.array([[1], [0]]), b[:2, None], 1), a * 1.0)[1], (R(2, 2), R(3))),
    ("np.add.at", _mut(lambda a, b: np.add.at(a, [2, 0, 2], b)), (R(3), R(3))),  # (repeats: NumPy's sums)
    ("np.add.at", _mut(lambda a, b: np.subtract.at(a, [1, 1, 1], b ** 2)), (R(3), R(3))),
    ("np.maximum.at", _mut(lambda a, b: np.maximum.at(a, [2, 0, 2], b)), (R(3), R(3))),  # (repeats: a fold)
    ("np.maximum.at", _mut(lambda a, b: np.fmin.at(a, [1, 1, 1], b ** 2)), (R(3), R(3))),
    ("np.power.at", _mut(lambda a, b: np.hypot.at(a, [2, 0, 2], b)), (R(3), R(3))),  # (repeats: a smooth fold)
    ("np.power.at", _mut(lambda a, b: np.arctan2.at(a, [1, 1, 1], b ** 2 + 1.0)), (R(3), R(3))),
]

PLAIN = {  # functions of metadata only, computed on plain values: checked for not dropping anything
    "np.shape", "np.ndim", "np.size", "np.result_type", "np.can_cast", "np.iscomplexobj", "np.isrealobj",
    "np.min_scalar_type", "np.may_share_memory", "np.shares_memory", "np.array_equal", "np.array_equiv",
    "np.allclose", "np.isclose", "np.argmax", "np.argmin", "np.argsort", "np.argwhere", "np.nonzero",
    "np.flatnonzero", "np.searchsorted", "np.count_nonzero", "np.isreal", "np.iscomplex", "np.all", "np.any",
    "np.isneginf", "np.isposinf", "np.lexsort", "np.argpartition", "np.digitize", "np.nanargmax",
    "np.nanargmin", "np.isin", "np.diag_indices_from",
    "np.tril_indices_from", "np.triu_indices_from", "np.common_type", "np.einsum_path",
}


@pytest.mark.parametrize("covers,fn,args,order", CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_rule(covers, fn, args, order):
    check_grads(fn, *args, modes=("fwd", "rev"), order=order)


@pytest.mark.parametrize("covers,fn,args", MUTATION_CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(MUTATION_CASES)])
def test_mutating_rule(covers, fn, args):
    check_grads(fn, *args, modes=("fwd", "rev"))


TEXT = {"np.array2string", "np.array_repr", "np.array_str"}  # the digits as text


@pytest.mark.parametrize("name", sorted(TEXT))
def test_text_of_traced_values_only_for_constants_and_printing(name, capsys):
    fn = eval(name, {"np": np})
    x = np.array([0.5, -1.0, 2.0])

    def kept(a):
        return np.sum(a) * len(fn(a * 2.0))

    with pytest.raises(mg.TracerEscapeError, match=name):
        mg.grad(kept)(x)

    def shown(a, c):  # (a statement that prints names the function: an arbitrary call could keep it)
        if name == "np.array2string":
            print(np.array2string(a * 2.0))
        elif name == "np.array_repr":
            print(np.array_repr(a * 2.0))
        else:
            print(np.array_str(a * 2.0))
        return np.sum(a) * len(fn(c))

    g = mg.grad(shown)(x, x.copy())
    np.testing.assert_array_equal(g, np.full(3, len(fn(x))))
    assert fn(x * 2.0) in capsys.readouterr().out


SAVED = {"np.save", "np.savez", "np.savez_compressed", "np.savetxt"}  # the values written to a file


@pytest.mark.parametrize("name", sorted(SAVED))
def test_saving_traced_values_writes_the_plain_calls_file(name, tmp_path):
    fn = eval(name, {"np": np})
    x = np.array([0.5, -1.0, 2.0])

    def f(a, path):
        y = np.sin(a) * 3.0
        fn(path, y) if name in ("np.save", "np.savetxt") else fn(path, y=y, k=2)
        return np.sum(y * a)

    f(x, tmp_path / "plain")
    g = mg.grad(f)(x, tmp_path / "traced")
    suffix = {"np.save": ".npy", "np.savetxt": ""}.get(name, ".npz")
    a, b = (tmp_path / ("plain" + suffix)), (tmp_path / ("traced" + suffix))
    if name == "np.savetxt":
        assert a.read_text() == b.read_text()
    elif name == "np.save":
        np.testing.assert_array_equal(np.load(a), np.load(b))
    else:
        np.testing.assert_array_equal(np.load(a)["y"], np.load(b)["y"])
    np.testing.assert_allclose(g, 3.0 * (np.cos(x) * x + np.sin(x)), rtol=1e-14)  # by hand


@pytest.mark.parametrize("name", sorted(PLAIN))
def test_plain_functions_return_plain_values(name):
    x = mg.value(np.array([0.5, -1.0, 2.0]))

    def f(a):
        fn = eval(name, {"np": np})
        special = {"np.argpartition": (a, 1), "np.can_cast": (a, np.float32), "np.digitize": (a, np.array([0.0, 1.0])),
                   "np.searchsorted": (np.sort(a), a), "np.lexsort": ((a, a),), "np.diag_indices_from": (np.outer(a, a),),
                   "np.tril_indices_from": (np.outer(a, a),), "np.triu_indices_from": (np.outer(a, a), 1),
                   "np.einsum_path": ("i,i->", a, a)}
        try:
            r = fn(*special.get(name, (a,)))
        except TypeError:
            r = fn(a, a)
        # nothing traced comes back: these results are indices, shapes or flags
        for leaf in (r if isinstance(r, tuple) else (r,)):
            assert not isinstance(leaf, mg.core.Tracer)
        return np.sum(a)

    g = mg.grad(f)(np.array(x))
    np.testing.assert_array_equal(g, np.ones(3))


@pytest.mark.parametrize("covers,fn,args,order", NEW_CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(NEW_CASES)])
def test_values_match_numpy(covers, fn, args, order):
    assert_values_match_numpy(fn, args)


@pytest.mark.parametrize("covers,fn,args", NOT_DIFFERENTIABLE_CASES)
def test_no_derivative_is_not_implemented(covers, fn, args):
    name = covers.split(".")[-1]
    out, pullback = mg.vjp(fn, *args)
    np.testing.assert_array_equal(out, fn(*copy.deepcopy(args)))
    for g in pullback(np.ones_like(out)):
        assert isinstance(g, mg.NotImplementedTangent) and name in g.message
    _, tangent = mg.jvp(fn, args, tuple(np.ones_like(a) for a in args))
    assert isinstance(tangent, mg.NotImplementedTangent) and name in tangent.message
    with mg.config(strict=True), pytest.raises(mg.NotImplementedTangentError, match=name):
        mg.grad(lambda *a: np.sum(fn(*a)))(*args)


def test_i0_without_scipy(monkeypatch):
    # the NumPy-only I1: the derivative of np.i0's own expansions, against SciPy's i1 and finite differences
    sp = pytest.importorskip("scipy.special")
    from mutagrad.rules import elementwise

    x = np.concatenate([I0X, [0.0, 8.0, 30.0, -300.0]])
    np.testing.assert_allclose(elementwise.i1_numpy(x), sp.i1(x), rtol=4e-15, atol=0)
    monkeypatch.setattr(elementwise, "_scipy_i1", None)
    check_grads(np.i0, I0X, order=2)
    assert mg.grad(mg.grad(np.i0))(0.0) == pytest.approx(0.5, abs=1e-13)  # closed form: I0''(0) = 1/2


def test_integer_results_are_plain():
    x = X34.copy()

    def f(a):
        i = np.insert(np.arange(3), 1, a[0, 0])  # an integer array: NumPy casts the value
        j = np.apply_along_axis(np.argmax, 1, a)
        assert not isinstance(i, mg.core.Tracer) and not isinstance(j, mg.core.Tracer)
        np.testing.assert_array_equal(i, np.insert(np.arange(3), 1, x[0, 0]))
        np.testing.assert_array_equal(j, np.argmax(x, axis=1))
        return np.sum(a)

    np.testing.assert_array_equal(mg.grad(f)(x), np.ones_like(x))


def test_trim_zeros_of_zeros_is_empty():
    out, pullback = mg.vjp(lambda a: np.trim_zeros(a * 0.0), np.ones(3))
    assert out.shape == (0,)
    np.testing.assert_array_equal(pullback(out)[0], np.zeros(3))


def test_derivatives_at_zero_closed_forms():
    # x**p at x = 0: d(x**0)/dx = 0 (not 0 * inf), higher derivatives of x**n finite
    assert mg.grad(lambda x: x ** 0.0)(0.0) == 0.0
    assert mg.grad(mg.grad(lambda x: x ** 1.0))(0.0) == 0.0
    assert mg.grad(mg.grad(mg.grad(lambda x: x ** 2)))(0.0) == 0.0
    np.testing.assert_array_equal(mg.hessian(lambda x: np.sum(x ** 3))(np.zeros(2)), np.zeros((2, 2)))
    np.testing.assert_array_equal(
        mg.grad(lambda x: np.sum(np.power(x, np.array([0.0, 1.0, 2.0]))))(np.zeros(3)), [0.0, 1.0, 0.0])
    # a traced exponent keeps the mixed derivative d2(x**p)/dx dp = 1/x at p = 0
    h = mg.hessian(lambda v: v[0] ** v[1])(np.array([1.5, 0.0]))
    np.testing.assert_allclose(h, [[0.0, 1 / 1.5], [1 / 1.5, np.log(1.5) ** 2]], rtol=1e-14, atol=1e-15)
    # sinc is smooth through 0: sinc''(0) = -pi**2/3, and near 0 no digits are lost
    np.testing.assert_allclose(mg.hessian(np.sinc)(0.0), -np.pi ** 2 / 3, rtol=1e-14)
    np.testing.assert_allclose(mg.grad(mg.grad(np.sinc))(1e-7), -np.pi ** 2 / 3, rtol=1e-12)
    u = np.pi * 0.05
    np.testing.assert_allclose(mg.grad(np.sinc)(0.05), np.pi * (u * np.cos(u) - np.sin(u)) / u ** 2, rtol=1e-13)


def test_logaddexp_weights_exact_for_large_arguments():
    # d logaddexp(a, b)/da = 1/(1 + exp(b - a)): 1/2 for equal arguments, however large
    for big in (1e12, 1e15, 1e16):
        ga, gb = mg.grad(np.logaddexp, (0, 1))(np.float64(big), np.float64(big))
        assert ga == gb == 0.5
        assert mg.grad(np.logaddexp2, (0, 1))(np.float64(big), np.float64(big)) == (0.5, 0.5)
    assert mg.grad(np.logaddexp, (0, 1))(np.float64(np.inf), np.float64(1.0)) == (1.0, 0.0)


def test_det_hessian_at_zero_closed_form():
    # det [[a, b], [c, d]] = ad - bc: its Hessian pairs a with d (+1) and b with c (-1), at any point
    h = mg.hessian(np.linalg.det)(np.zeros((2, 2))).reshape(4, 4)
    expected = np.zeros((4, 4))
    expected[0, 3] = expected[3, 0] = 1.0
    expected[1, 2] = expected[2, 1] = -1.0
    np.testing.assert_array_equal(h, expected)


def test_arctan2_partials_for_tiny_and_huge_arguments():
    # d arctan2(a, b)/da = b / (a^2 + b^2): 5e199 at (1e-200, 1e-200), not inf from an underflowed square
    ga, gb = mg.grad(np.arctan2, (0, 1))(np.float64(1e-200), np.float64(1e-200))
    np.testing.assert_allclose([ga, gb], [5e199, -5e199], rtol=1e-14)
    ga, gb = mg.grad(np.arctan2, (0, 1))(np.float64(1e200), np.float64(1e200))
    np.testing.assert_allclose([ga, gb], [5e-201, -5e-201], rtol=1e-14)
    # at an infinite argument they are the limit 0 (they fall as 1/h), not inf/inf = NaN; np.angle
    # of an infinite complex number in both modes
    for a, b in ((1.0, np.inf), (np.inf, np.inf), (-np.inf, 2.0)):
        assert mg.grad(np.arctan2, (0, 1))(np.float64(a), np.float64(b)) == (0.0, 0.0)
    z = np.array([complex(np.inf, 0.0), complex(-np.inf, 1.0), complex(2.0, np.inf)])
    for d in (1.0, 1j):
        np.testing.assert_array_equal(mg.jvp(np.angle, (z,), (np.full(3, d),))[1], 0.0)
    np.testing.assert_array_equal(mg.grad(lambda v: np.sum(np.angle(v)))(z), 0.0)


@pytest.mark.parametrize("reduce", [
    lambda s: np.sum(s, axis=0), lambda s: np.max(s, axis=-1), lambda s: np.min(s, axis=0),
    lambda s: np.prod(s, axis=0), lambda s: np.ptp(s, axis=0) + s, lambda s: np.sum(np.cumsum(s, axis=0)),
    lambda s: np.sum(np.cumprod(s, axis=-1)), lambda s: np.add.reduce(s, axis=0),
])
def test_ufunc_reductions_take_axis_0_of_a_scalar(reduce):
    # NumPy reduces a 0-d array or a NumPy scalar along axis 0 or -1 (as a whole)
    f = lambda x: reduce(x[0] * x[1]) * x[1]  # noqa: E731
    x = np.array([0.7, -1.3])
    check_grads(f, x)  # central differences, both modes


@pytest.mark.parametrize("fn", [np.mean, np.std, np.var, np.median])
def test_other_reductions_reject_axis_0_of_a_scalar(fn):
    x = np.array([0.7, -1.3])
    with pytest.raises(np.exceptions.AxisError):
        fn(x[0] * 1.0, axis=0)
    with pytest.raises(np.exceptions.AxisError):
        mg.grad(lambda x: fn(x[0] * 1.0, axis=0))(x)


def test_fill_and_put_of_a_traced_scalar_leave_it_unchanged():
    # a NumPy scalar is immutable: its fill and put act on a temporary copy
    def f(x, put):
        s = x[0] * x[1]
        if put:
            np.put(s, 0, 3.0)
            s.put(0, x[1])
        else:
            s.fill(x[1])
        return s + x[1]

    x = np.array([0.7, -1.3])
    for put in (False, True):
        assert f(x.copy(), put) == 0.7 * -1.3 - 1.3
        assert np.allclose(mg.grad(f)(x, put), [-1.3, 0.7 + 1.0])
    with pytest.raises(IndexError):
        mg.grad(lambda x: np.put(x[0] * 1.0, 3, 1.0) or x[0])(x)


@pytest.mark.skipif(not isinstance(getattr(np, "vecmat", None), np.ufunc), reason="NumPy >= 2.2")
@pytest.mark.parametrize("fn, shapes", [(np.vecmat, ((3,), (3, 2))), (np.vecmat, ((2, 3), (2, 3, 2))),
                                        (np.matvec, ((2, 3), (3,))), (np.vecdot, ((3,), (3,)))])
def test_complex_vector_matrix_ufuncs(fn, shapes):
    # vecmat and vecdot conjugate the vector: the reverse rule had missed it for vecmat
    d = Draws(6)
    args = tuple(d.C(*s) for s in shapes)
    check_grads(fn, *args, order=1)


def test_emath_values_in_single_precision_are_numpys():
    # NumPy makes float32 operands complex64 (float16 complex128) where an element is off the domain
    for dt in (np.float16, np.float32):
        for fn in (np.emath.sqrt, np.emath.log, np.emath.arccos, lambda a: np.emath.power(a, 2.5)):
            assert_values_match_numpy(fn, (np.array([0.7, -1.3, 2.1], dt),))
            assert_values_match_numpy(fn, (np.array([0.7, 0.3], dt),))


@pytest.mark.parametrize("fn", [np.arcsin, np.arccos])
def test_complex_arcsin_arccos_along_their_branch_cuts(fn):
    # real x beyond +1 and -1 with a +0 imaginary part: NumPy's values follow one side of the cut,
    # and the derivative along the cut is that side's (central differences stay on the cut);
    # 1/sqrt(1 - x*x) had the other sign beyond +1
    z = np.array([2.5, 1.7, -2.5, -1.3, 0.4]) + 0j
    h = 1e-7
    fd = (fn(z + h) - fn(z - h)) / (2 * h)
    _, t = mg.jvp(fn, (z,), (np.ones(5) + 0j,))
    np.testing.assert_allclose(t, fd, rtol=1e-6)
    w = np.array([0.3 + 0.7j, -1.1 + 0.2j, 0.5 - 0.4j, 0.9 + 0.1j, -0.2 - 0.6j])

    def loss(v):
        return np.real(np.sum(w * fn(v)))

    g = mg.grad(loss)(z)
    fd = [(loss(z + h * e) - loss(z - h * e)) / (2 * h) for e in np.eye(5)]
    np.testing.assert_allclose(np.real(g), fd, rtol=1e-6)  # (the real part: d loss / d Re z)


def _shifted(z, h, imaginary=False):
    """z + h (z + ih) with the other component's bits kept: z + h would turn a -0.0 imaginary
    part into +0.0, the other side of a branch cut."""
    out = z.copy()
    if imaginary:
        out.imag += h
    else:
        out.real += h
    return out


_CUTS = {  # each function's branch cut, both signed zeros, near and far from the branch point
    np.arcsin: ([2.5, 1.0 + 1e-9, -1.7, -1.0 - 1e-9, 1e300], False),
    np.arccos: ([2.5, 1.0 + 1e-9, -1.7, -1.0 - 1e-9, -1e300], False),
    np.arccosh: ([-2.0, -3.0, 0.4, -1.0 - 1e-9, 1.0 - 1e-9, -1e300], False),
    np.arcsinh: ([2.0, -3.0, 1.0 + 1e-9, -1.0 - 1e-9, 1e300], True),
    np.arctanh: ([2.0, -3.0, 1.0 + 1e-9], False),
    np.arctan: ([2.0, -3.0, -1.0 - 1e-9], True),
}


@pytest.mark.parametrize("fn", list(_CUTS), ids=lambda f: f.__name__)
@pytest.mark.parametrize("zero", [0.0, -0.0], ids=["+0", "-0"])
def test_complex_inverse_functions_on_their_branch_cuts(fn, zero):
    # on a cut NumPy's value is on the side the signed zero names, and so is the derivative:
    # central differences along the cut, which keep the zero's sign, are the oracle (the
    # derivatives through sqrt(x*x - 1) and 1/sqrt(x*x + 1) had the other side's sign)
    along, imaginary = _CUTS[fn]
    along = np.array(along)
    z = np.empty(along.size, complex)
    z.real, z.imag = (zero, along) if imaginary else (along, zero)
    h = 1e-4 * np.minimum(np.abs(np.abs(along) - 1.0), np.abs(along))  # (inside the cut's piece)
    zp, zm = _shifted(z, h, imaginary), _shifted(z, -h, imaginary)
    fd = (fn(zp) - fn(zm)) / (zp - zm)  # (the steps as rounded: next to 1 they are not h)
    direction = (1j if imaginary else 1.0) * np.ones(z.size)
    _, t = mg.jvp(fn, (z,), (direction,))
    np.testing.assert_allclose(t / direction, fd, rtol=1e-6)
    w = np.array([0.3 + 0.7j, -1.1 + 0.2j, 0.5 - 0.4j, 0.9 + 0.1j, -0.2 - 0.6j, 0.7 + 0.0j])[:z.size]
    (g,) = mg.vjp(fn, z)[1](w)  # reverse mode: the cotangent times the derivative (JAX's convention)
    np.testing.assert_allclose(g, w * fd, rtol=1e-6)
    # second derivative along the cut, forward over reverse
    second = mg.jvp(lambda v: mg.jvp(fn, (v,), (direction,))[1], (z,), (direction,))[1]
    hp, hm = np.abs(zp - z), np.abs(z - zm)
    fd2 = ((fn(zp) - fn(z)) / hp - (fn(z) - fn(zm)) / hm) / ((hp + hm) / 2) / direction**2
    keep = np.abs(along) < 1e6  # (far out the second difference is all rounding)
    np.testing.assert_allclose((second / direction**2)[keep], fd2[keep], rtol=2e-4)


def _exact_derivative(name, z):
    """The derivative in 50 digits, from its closed form with principal roots (right off the cuts)."""
    import mpmath

    with mpmath.workdps(50):
        z = mpmath.mpc(z.real, z.imag)
        d = {"arcsin": lambda: 1 / mpmath.sqrt(1 - z * z), "arccos": lambda: -1 / mpmath.sqrt(1 - z * z),
             "arcsinh": lambda: 1 / mpmath.sqrt(1 + z * z),
             "arccosh": lambda: 1 / (mpmath.sqrt(z - 1) * mpmath.sqrt(z + 1))}[name]()
        return complex(d)


@pytest.mark.parametrize("fn,points", [
    (np.arcsin, [1 + 1e-300j, 1 - 1e-40j, -1 + 1e-30j, -1 - 1e-200j, 1 + 1e-12 + 1e-20j, 0.3 + 0.2j]),
    (np.arccos, [1 + 1e-300j, -1 + 1e-300j, -1 - 1e-40j, 1 - 1e-12 - 1e-24j]),
    (np.arcsinh, [1e-300 + 1j, -1e-40 - 1j, 1e-20 + (1 + 1e-12) * 1j, 1e-14 - 1j]),
    (np.arccosh, [1 + 1e-300j, -1 + 1e-40j, -1 - 1e-30j, 1 + 1e-12 - 1e-20j]),
], ids=lambda v: getattr(v, "__name__", ""))
def test_complex_inverse_functions_next_to_their_branch_points(fn, points):
    # the derivative grows as 1/sqrt(distance) next to a branch point; from the function's value
    # (1/cos(arcsin z)) it was 1.6e16 at 1 + 1e-300j, the rounding of cos(pi/2). NumPy's own
    # values there are not accurate enough for differences: the oracle is the closed form in
    # 50 digits
    for z in points:
        exact = _exact_derivative(fn.__name__, z)
        _, t = mg.jvp(fn, (np.array(z),), (np.array(1.0 + 0j),))
        (g,) = mg.vjp(fn, np.array(z))[1](np.array(1.0 + 0j))
        np.testing.assert_allclose(t, exact, rtol=1e-12, err_msg=repr(z))
        np.testing.assert_allclose(g, exact, rtol=1e-12, err_msg=repr(z))


@pytest.mark.parametrize("fn", [np.arcsinh, np.arctan, np.arctanh, np.arccos, np.arcsin, np.arccosh])
def test_complex_inverse_function_derivatives_far_out_are_finite(fn):
    # x*x overflows beyond 1e154: the derivatives there are tiny, not NaN (inf/inf) or 0
    z = np.array([6e299 + 8e299j, -3e200 + 4e200j, 1e160 - 1e160j])
    h = 1e-6 * np.abs(z)
    fd = (fn(z + h) - fn(z - h)) / (2 * h)
    if fn in (np.arctan, np.arctanh):  # (the value is a constant there to the last digit)
        fd = (-1.0 if fn is np.arctanh else 1.0) / z / z
    _, t = mg.jvp(fn, (z,), (np.ones(3) + 0j,))
    (g,) = mg.vjp(fn, z)[1](np.ones(3) + 0j)
    np.testing.assert_allclose(t, fd, rtol=1e-6)
    np.testing.assert_allclose(g, fd, rtol=1e-6)
    with np.errstate(invalid="ignore"):  # at infinity the limit, 0 (JAX's), not inf * 0
        z = np.array([complex(np.inf, 0.0), complex(-np.inf, 2.0), complex(1.0, np.inf),
                      complex(np.inf, np.inf), complex(-np.inf, -np.inf)])
        np.testing.assert_array_equal(mg.jvp(fn, (z,), (np.ones(5) + 0j,))[1], 0.0)


def test_real_inverse_function_derivatives_next_to_one_and_far_out():
    # (1 - x)(1 + x) rather than 1 - x*x next to 1; hypot(x, 1) rather than sqrt(x*x + 1)
    x = np.array([1 - 1e-10, -1 + 1e-12, 0.3])
    for fn in (np.arcsin, np.arccos, np.arctanh):
        xp, xm = x + 1e-4 * np.minimum(1 - np.abs(x), 1), x - 1e-4 * np.minimum(1 - np.abs(x), 1)
        fd = (fn(xp) - fn(xm)) / (xp - xm)
        np.testing.assert_allclose(mg.jvp(fn, (x,), (np.ones(3),))[1], fd, rtol=1e-6)
    x = np.array([1e200, -3e300, 2.0])
    np.testing.assert_allclose(mg.grad(lambda v: np.sum(np.arcsinh(v)))(x), 1 / np.abs(x) * [1, 1, 0]
                               + [0, 0, 1 / np.sqrt(5)], rtol=1e-12)


def test_clip_keywords_are_numpys():
    # where= writes only the selected elements of out; dtype= selects the loop (both were ignored)
    m = np.array([True, False, True])

    def f(x):
        o = np.ones_like(x)
        np.clip(x, -0.5, None, out=o, where=m)
        return o * np.array([1.0, 2.0, 3.0])

    x = np.array([0.3, -0.9, 0.7])
    np.testing.assert_array_equal(mg.vjp(f, x)[0], f(x))
    check_grads(f, x)
    x32 = np.array([0.1, 0.7, 1.3], np.float32)
    for call in (lambda a: np.clip(a, 0.15, None, dtype=np.float64), lambda a: np.clip(a, 0.2, 1.0, dtype=np.float64),
                 lambda a: a.clip(0.2, 1.0)):
        want, got = call(x32), mg.vjp(call, x32)[0]
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)
    with pytest.raises(mg.NoRuleError, match="where= and no out="):
        mg.grad(lambda a: np.sum(np.clip(a, 0.0, 1.0, where=m)))(x)


@pytest.mark.parametrize("call", [
    lambda a: np.maximum.reduce(a, axis=1, dtype=np.float32),
    lambda a: np.minimum.reduce(a, axis=None, dtype=np.complex128),
    lambda a: np.prod(a + 0.5j, dtype=np.float64),
    lambda a: np.cumprod(a * (1 + 0.25j), dtype=np.float64),
    lambda a: np.multiply.reduce(a - 0.3j, axis=0, dtype=np.float64),
    lambda a: np.sum(a * 1j + a, dtype=np.float64),
], ids=["max-f32", "min-c128", "prod", "cumprod", "multiply.reduce", "sum"])
def test_reduction_dtype_casts_the_elements_first(call):
    # NumPy casts each element to dtype= before the loop: a complex input with a real dtype
    # loses its imaginary parts (the gradient was the complex product's)
    x = np.array([[1.2, 0.8, 1.1], [0.9, 1.3, 0.7]])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", np.exceptions.ComplexWarning)
        want, got = call(x), mg.vjp(call, x)[0]
        assert np.result_type(got) == np.result_type(want)
        np.testing.assert_array_equal(got, want)
        if np.result_type(want) != np.float32:
            check_grads(call, x)


@pytest.mark.parametrize("op", [
    lambda x: np.maximum.accumulate(x, axis=0), lambda x: np.minimum.accumulate(x, axis=1),
    lambda x: np.logaddexp.accumulate(x, axis=0), lambda x: np.hypot.accumulate(x, axis=1),
    lambda x: np.sort(x, axis=0), lambda x: np.fmax.accumulate(x, axis=0),
], ids=["maximum", "minimum", "logaddexp", "hypot", "sort", "fmax"])
@pytest.mark.parametrize("layout", ["C", "T"])
def test_result_layout_is_numpys(op, layout):
    # NumPy's result keeps the input's layout (order 'K'): t.reshape(-1) is a view of a
    # C-ordered t and a copy of another, so a write through it reaches t or not
    w = np.arange(1.0, 7.0).reshape(3, 2)

    def f(a):
        t = op(a.T if layout == "T" else a.reshape(3, 2))
        v = t.reshape(-1)
        v *= 3.0
        return np.sum(t * w)

    a = np.array([[0.3, -0.9, 0.7], [0.2, 0.5, -0.1]]) + np.array([[0.0], [0.05]])
    assert mg.value_and_grad(f)(a.copy())[0] == f(a.copy())
    check_grads(f, a)
    t_plain = op(a.T if layout == "T" else a.reshape(3, 2))
    t_ours = mg.vjp(lambda a: op(a.T if layout == "T" else a.reshape(3, 2)), a)[0]
    assert t_ours.strides == t_plain.strides


def test_out_with_where_of_another_dtype_overlapping_an_input():
    # NumPy passes out's masked elements through the loop's dtype when out overlaps an input (a
    # complex out loses their imaginary parts): refused; without the overlap, NumPy's numbers
    m = np.array([True, False, True])

    def overlapping(z):
        np.divide(z.imag, 2.0, out=z, where=m)
        return np.abs(z) ** 2

    with pytest.raises(mg.NoRuleError, match="out shares memory with an input"):
        mg.vjp(overlapping, np.array([1 + 1j, 2 + 2j, 3 + 3j]))

    def apart(x, z):
        np.divide(x, 2.0, out=z, where=m)
        return np.abs(z) ** 2

    x, z = np.array([1.0, 2.0, 3.0]), np.array([1 + 1j, 2 + 2j, 3 + 3j])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", np.exceptions.ComplexWarning)  # (NumPy's own, for out's cast)
        np.testing.assert_array_equal(mg.vjp(apart, x, z.copy())[0], apart(x, z.copy()))
        check_grads(apart, x, z.copy())

    # a float32 out in a float64 loop: its masked elements come back unchanged (float64 holds them)
    def narrower(x, c):
        np.add(x, c, out=x, where=m)
        return np.sum(np.sin(x))

    x32, c = np.array([0.1, 0.2, 0.3], np.float32), np.array([1.0, 2.0, 3.0])
    plain, ours = x32.copy(), x32.copy()
    val, g = mg.value_and_grad(narrower)(ours, c)
    assert val == narrower(plain, c)
    np.testing.assert_array_equal(ours, plain)
    # d/dx sum(sin(x + m c)) = cos(x + m c) at float32's x + c, by hand
    np.testing.assert_allclose(g, np.cos(np.where(m, (x32 + c).astype(np.float32), x32)), rtol=1e-6)


@pytest.mark.parametrize("ufunc", [np.hypot, np.logaddexp, np.logaddexp2])
def test_fold_over_several_axes_visits_numpys_order(ufunc):
    # NumPy's fold over several axes walks them by decreasing stride: a transposed array's
    # result differs in the last bit from a C-order walk
    rng = np.random.default_rng(0)
    for shape in ((3, 4), (2, 3, 4)):
        a = rng.standard_normal(shape)
        for v in (a, a.T, a[..., ::-1], np.swapaxes(a, 0, -1)):
            for axis in (None, (0, 1), (-1, 0)):
                want = ufunc.reduce(v, axis=axis)
                assert np.array_equal(mg.vjp(lambda x, axis=axis: ufunc.reduce(x, axis=axis), v)[0], want)
    check_grads(lambda x: ufunc.reduce(x.T, axis=None), rng.standard_normal((2, 3, 4)))


@pytest.mark.parametrize("ufunc", [np.subtract, np.maximum, np.logaddexp, np.hypot])
def test_accumulate_into_a_wider_out_computes_in_its_dtype(ufunc):
    x = np.linspace(0.1, 1.3, 6).astype(np.float32)

    def f(x):
        o = np.zeros_like(x, dtype=np.float64)  # (NumPy's loop: the wider of the input's and out's dtypes)
        ufunc.accumulate(x, out=o)
        return o

    np.testing.assert_array_equal(mg.vjp(f, x)[0], f(x))


def test_out_with_where_overlapping_an_input_cast_by_dtype():
    # dtype=float32 casts the inputs (copies): the overlap is the given input's with out
    m = np.array([True, False, True])

    def f(b):
        np.fmin(b[1:] * 1.0, b[1:], out=b[:-1], where=m, dtype=np.float32)
        return b

    with pytest.raises(mg.NoRuleError, match="out shares memory with an input"):
        mg.vjp(f, np.linspace(0.1, 0.9, 4))


@pytest.mark.parametrize("op", [lambda x: np.logaddexp.accumulate(x, axis=0), lambda x: np.maximum.accumulate(x, axis=1),
                                lambda x: np.sort(x, axis=0)], ids=["fold", "select", "sort"])
def test_result_layout_of_a_broadcast_input_is_numpys(op):
    # NumPy's accumulation of a broadcast array is C-ordered (empty_like of it is not): its layout
    # decides whether t.reshape(-1) is a view, and so where a write through it goes
    def f(a):
        t = op(np.broadcast_to(a, (2,) + a.shape))
        v = t.reshape(-1)
        v *= 3.0
        return t * 1.0

    a = np.random.default_rng(0).standard_normal((3, 4))
    np.testing.assert_array_equal(mg.vjp(f, a)[0], f(a))
    check_grads(f, a)


def test_accumulate_with_dtype_of_a_broadcast_input_has_numpys_layout():
    # the layout is that of NumPy's result for the input as given (a broadcast array cast by
    # dtype=), not of the cast copy: a sum over it then adds in NumPy's order (one ulp otherwise)
    def f(a):
        t = np.subtract.accumulate(np.broadcast_to(np.log2(a[None]), (2, 1) + a.shape), axis=2, dtype=np.complex128)
        return np.sum(np.sin(0.5 * np.real(t)) + np.cos(0.7 * np.imag(t))), t

    a = np.array([0.7, 1.3, 2.9])
    (v, t), (vm, tm) = f(a), mg.vjp(f, a)[0]
    assert v == vm and tm.strides == t.strides


@pytest.mark.parametrize("ufunc", [np.add, np.multiply, np.maximum])
def test_reduceat_into_a_wider_out_computes_in_its_dtype(ufunc):
    # NumPy's loop is the wider of the input's and out's dtypes (float32 segments summed in float64)
    x = np.array([0.6518491, 1.3953152, 1.5417148, 1.0615326, 1.2782121], np.float32)

    def f(x):
        o = np.zeros_like(x, dtype=np.float64, shape=(2,))
        ufunc.reduceat(x, [0, 3], out=o)
        return o

    np.testing.assert_array_equal(mg.vjp(f, x)[0], f(x))


@pytest.mark.parametrize("ufunc", [np.hypot, np.logaddexp, np.subtract])
def test_folded_reduce_into_a_wider_out_computes_in_its_dtype(ufunc):
    x = np.linspace(0.1, 1.3, 6).astype(np.float32).reshape(2, 3)

    def f(x):
        o = np.zeros_like(x, dtype=np.float64, shape=(3,))
        ufunc.reduce(x, axis=0, out=o)
        return o

    np.testing.assert_array_equal(mg.vjp(f, x)[0], f(x))


@pytest.mark.parametrize("ufunc", [np.logaddexp, np.hypot, np.arctan2])
@pytest.mark.parametrize("shape", [(0,), (0, 2)])
def test_empty_accumulate_in_a_dtype_without_a_loop_raises_numpys_error(ufunc, shape):
    # no step of the fold runs on an empty array: NumPy's loop resolution still refuses the dtype
    f = lambda x: ufunc.accumulate(x, dtype=np.complex128)
    with pytest.raises(TypeError) as plain:
        f(np.zeros(shape))
    with pytest.raises(TypeError) as traced:
        mg.vjp(f, np.zeros(shape))
    assert str(traced.value) == str(plain.value)


@pytest.mark.parametrize("x, axis", [
    (np.array([0.5, 0.0, 2.0, 3.0, 0.0, 1.5]), None),  # zeros: the recurrence
    (np.array([[1.0, 0.0, 2.0], [0.0, 0.0, 3.0], [0.4, 1.2, 0.9]]), 1),
    (np.array([[1.0, 0.0, 2.0], [0.0, 0.0, 3.0], [0.4, 1.2, 0.9]]), 0),
    (np.array([[0.7, 1.3], [1.1, 0.6], [0.9, 1.4]]), -2),  # no zeros: suffix sums divided by x
    # (the recurrence by doubling, slow2: lengths around powers of two, complex factors, one element)
    (np.array([0.5, -1.2, 0.0, 2.0, 0.7, 0.0, 1.3, 0.9, -0.4]), None),
    (np.array([0.5 + 0.2j, 0.0, -1.1 + 0.3j, 0.8j, 1.2]), None),
    (np.array([[0.0], [1.5]]), 1),
])
def test_cumprod_with_and_without_zeros(x, axis):
    w = np.random.default_rng(5).standard_normal(x.size).reshape(np.cumprod(x, axis=axis).shape)
    check_grads(lambda x: np.sum(np.cumprod(x, axis=axis) * w), x, order=2)


def test_cumprod_derivative_where_the_products_underflow():
    # y = [1e-200, 0 (underflow), 0, 0]: dividing y by x would lose x_1 * x_2 * ... = 1e-200 * 1e200;
    # by hand, dy_k/dx_j = prod_{i <= k, i != j} x_i summed over k with g = 1
    x = np.array([1e-200, 1e-200, 1e200, 2.0])
    _, pullback = mg.vjp(np.cumprod, x)
    (g,) = pullback(np.ones(4))
    # (d/dx_2: 3e-400, zero in float64; d/dx_3 = x0 x1 x2 = 1e-200, a product of an underflowed y_3 / x_3)
    np.testing.assert_allclose(g, [1.0 + 1e-200 + 1.0 + 2.0, 1e-200 + 1.0 + 2.0, 0.0, 1e-200], rtol=1e-14)
    _, t = mg.jvp(np.cumprod, (x,), (np.array([0.0, 1.0, 0.0, 0.0]),))  # d y / d x_1
    np.testing.assert_allclose(t, [0.0, 1e-200, 1.0, 2.0], rtol=1e-14)


def test_cumprod_derivative_where_the_factors_span_more_than_the_exponent_range():
    # x spans 600 orders of magnitude: the recurrence's partial sums overflowed (inf) in reverse
    # mode and y's underflowed (0) in forward mode; by hand, dS/dx_j = sum_{k >= j} prod_{i <= k, i != j} x_i
    if np.finfo(np.longdouble).maxexp <= np.finfo(np.float64).maxexp:
        pytest.skip("no extended-range long double on this platform")
    x = np.array([1e-300, 1e-300, 1e300, 1e300, 3.0, 2.0])
    want = [1e301, 1e301, 1e-299, 1e-299, 3.0, 3.0]  # (1e-300 + 1 + 1e300 + 3e300 + 6e300; ...)
    np.testing.assert_allclose(mg.grad(lambda x: np.sum(np.cumprod(x)))(x), want, rtol=1e-14)
    np.testing.assert_allclose(mg.jacobian(lambda x: np.sum(np.cumprod(x)), mode="fwd")(x), want, rtol=1e-14)


def test_cumprod_derivative_is_linear_in_memory():
    # (the derivative once formed an n x n matrix: 5000 x 5000 here)
    import tracemalloc

    x = 1.0 + 1e-4 * np.sin(np.arange(5000.0))
    x[2500] = 0.0  # (the recurrence too)
    tracemalloc.start()
    try:
        g = mg.grad(lambda s: np.sum(np.cumprod(x * s)))(1.0)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 20e6, peak
    h = 1e-6
    fd = (np.sum(np.cumprod(x * (1 + h))) - np.sum(np.cumprod(x * (1 - h)))) / (2 * h)
    np.testing.assert_allclose(g, fd, rtol=1e-6)


@pytest.mark.parametrize("ufunc", [np.add, np.subtract, np.multiply, np.divide, np.power, np.arctan2, np.hypot,
                                   np.maximum, np.fmin, np.logaddexp, np.copysign])
def test_ufunc_outer_of_any_binary_ufunc(ufunc):
    # (docs/coverage.md's np.<ufunc>.outer row: every binary ufunc with a derivative, both modes)
    a, b = P(3), np.array([0.4, 1.7, -0.8, 1.1])
    check_grads(lambda a, b: ufunc.outer(a, b), a, b, order=2)
    check_grads(lambda a, b: ufunc.outer(a.reshape(1, 3), b), a, b)  # (the result's shape is a.shape + b.shape)
    assert_values_match_numpy(lambda a, b: ufunc.outer(a, b), (a, b))


def test_clip_between_equal_bounds_gives_x_no_derivative():
    # clip(x, c, c) is c whatever x is: at x == c both one-sided derivatives in x are 0 (the maximum
    # then minimum composition gave a quarter); the bounds share it, half each, by central differences
    def f(x, lo, hi):
        return np.sum(np.clip(x, lo, hi) * np.array([1.0, 2.0, 3.0]))

    x, lo, hi = np.array([0.5, 1.0, 0.3]), np.array([0.5, 1.0, -1.0]), np.array([0.5, 2.0, 2.0])
    gx, glo, ghi = mg.grad(f, argnums=(0, 1, 2))(x, lo, hi)
    np.testing.assert_array_equal(gx, [0.0, 1.0, 3.0])  # (x[1] == lo < hi: half of 2, the subgradient)
    np.testing.assert_array_equal(glo, [0.5, 1.0, 0.0])
    np.testing.assert_array_equal(ghi, [0.5, 0.0, 0.0])
    h = 1e-7  # central differences in x at the equal bounds: 0 from both sides
    assert f(x + [h, 0, 0], lo, hi) - f(x - [h, 0, 0], lo, hi) == 0.0
    # moving both bounds together moves the value one for one
    np.testing.assert_allclose((f(x, lo + [h, 0, 0], hi + [h, 0, 0]) - f(x, lo - [h, 0, 0], hi - [h, 0, 0])) / (2 * h),
                               glo[0] + ghi[0], rtol=1e-7)
    t = mg.jvp(lambda x: f(x, 0.5, 0.5), (np.array([0.5, 0.2, 0.9]),), (np.ones(3),))[1]
    assert t == 0.0
    assert mg.vjp(lambda x: np.clip(x, 0.5, 0.5), np.float32([0.5, 1.0]))[0].dtype == np.float32


def test_clip_with_both_bounds_is_one_operation():
    # np.clip(x, lo, hi) was np.maximum then np.minimum (two passes, two records); it is NumPy's clip ufunc, one
    # record, whose partials are the composition's: by hand at ties (half at each pick) and with lo > hi (NumPy
    # gives hi), central differences elsewhere, forward against reverse, and second order
    from mutagrad import tape as tape_mod

    x = np.array([0.5, 1.0, 2.0, -3.0, 0.7, 0.2, 0.9, 1.5])
    lo = np.array([0.5, 0.0, 0.0, 0.0, 1.0, 0.3, 0.9, 1.5])
    hi = np.array([2.0, 1.0, 1.0, 1.0, 0.5, 0.1, 0.4, 1.0])
    w = np.arange(1.0, 9.0)

    def f(x, lo, hi):
        return np.sum(np.clip(x, lo, hi) * w)

    gx, glo, ghi = mg.grad(f, argnums=(0, 1, 2))(x, lo, hi)
    # x == lo < hi; x == hi; inside; below; lo > hi (NumPy: hi); lo > hi, x below hi; lo > hi at x == lo;
    # lo > hi at x == lo
    np.testing.assert_array_equal(gx, w * [0.5, 0.5, 0, 0, 0, 0, 0, 0])
    np.testing.assert_array_equal(glo, w * [0.5, 0, 0, 1, 0, 0, 0, 0])
    np.testing.assert_array_equal(ghi, w * [0, 0.5, 1, 0, 1, 1, 1, 1])
    rng = np.random.default_rng(3)
    x, lo, hi = rng.standard_normal(20), rng.uniform(-1, 0, 20), rng.uniform(0, 1, 20)
    w = rng.standard_normal(20)
    for k, g in enumerate(mg.grad(f, argnums=(0, 1, 2))(x, lo, hi)):
        h = 1e-7
        for i in range(20):
            a, b = [x.copy(), lo.copy(), hi.copy()], [x.copy(), lo.copy(), hi.copy()]
            a[k][i] += h
            b[k][i] -= h
            np.testing.assert_allclose(g[i], (f(*a) - f(*b)) / (2 * h), atol=1e-6)
    check_grads(lambda x, c: np.clip(x, -c, 0.5 * c) ** 3, x, np.array(0.8), order=2)  # (a traced 0-d bound)
    check_grads(lambda x, hi: np.clip(x[:, None], -0.5, hi[None, :]), x[:5], hi[:4])  # (broadcast)
    check_grads(lambda x: np.float32(1.5) * np.clip(x, -0.5, 0.5), x.astype(np.float32))

    def steps(x, lo):
        for _ in range(5):
            np.clip(x, lo, 0.6, out=x)
            x *= 1.3
        return np.sum(x ** 2)

    check_grads(steps, x, lo, order=2, final_state=False)
    records = []
    orig = tape_mod.ReverseLevel.backward

    def spy(level):
        records.extend(r for r in level.tape if getattr(getattr(r, "prim", None), "name", "") in
                       ("np.clip", "np.maximum", "np.minimum"))
        return orig(level)

    tape_mod.ReverseLevel.backward = spy
    try:
        mg.grad(steps)(x.copy(), lo)
        mg.grad(lambda x: np.sum(np.clip(x * 2.0, -0.5, 0.5)))(x)
    finally:
        tape_mod.ReverseLevel.backward = orig
    assert [r.prim.name for r in records] == ["np.clip"] * 6


def test_matrix_gufuncs_with_axes_axis_and_keepdims():
    # np.vecdot(axis=, keepdims=), np.matmul/matvec/vecmat(axes=): the core axes moved, differentiated
    # (a plain TypeError refused them): NumPy's values, the derivative against central differences
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((2, 3, 4)), rng.standard_normal((2, 3, 4))
    cases = [(np.vecdot, (a, b), {"axis": 1}), (np.vecdot, (a, b), {"axis": 0, "keepdims": True}),
             (np.vecdot, (a, b), {"axes": [(0,), (0,), ()]}), (np.vecdot, (a, b), {"axes": [(2,), (2,)]}),
             (np.matmul, (a, b.transpose(0, 2, 1)), {"axes": [(1, 2), (1, 2), (1, 2)]}),
             (np.matmul, (a.transpose(1, 2, 0), b.transpose(2, 1, 0)), {"axes": [(0, 1), (0, 1), (0, 1)]}),
             (np.matmul, (a, b.transpose(0, 2, 1)), {"axes": [(-2, -1), (-2, -1), (0, 1)]})]
    if hasattr(np, "matvec"):
        cases += [(np.matvec, (a, b[:, 0, :]), {"axes": [(1, 2), (1,), (1,)]}),
                  (np.vecmat, (b[:, :, 0], a), {"axes": [(1,), (1, 2), (1,)]})]
    for uf, args, kw in cases:
        want = uf(*args, **kw)
        got = mg.vjp(lambda x, y, uf=uf, kw=kw: uf(x, y, **kw), *args)[0]
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-13)
        w = rng.standard_normal(want.shape)
        check_grads(lambda x, y, uf=uf, kw=kw, w=w: np.sum(w * uf(x, y, **kw)), *[x.copy() for x in args])


def test_matrix_gufunc_axes_errors_and_dtype_are_numpys():
    # NumPy's errors for axes it refuses (a value came back), and dtype= with axis= (refused)
    rng = np.random.default_rng(1)
    x, b = rng.standard_normal((2, 3)), rng.standard_normal((2, 3))
    with pytest.raises(np.exceptions.AxisError):
        mg.vjp(lambda x: np.vecdot(x, b, axes=[(1,), (1,), (0,)]), x)
    with pytest.raises(TypeError, match="keepdims"):
        mg.vjp(lambda a: np.matmul(a, a.transpose(0, 2, 1), axes=[(1, 2), (1, 2), (1, 2)], keepdims=True),
               rng.standard_normal((2, 3, 4)))
    got = mg.vjp(lambda x: np.vecdot(x, b, axis=1, dtype=np.float32), x)[0]
    want = np.vecdot(x, b, axis=1, dtype=np.float32)
    assert got.dtype == want.dtype
    np.testing.assert_allclose(got, want, rtol=1e-6)


def test_tanh_and_expm1_derivatives_in_their_tails():
    # 1 - tanh(x)**2 is 0 beyond |x| = 19 and expm1(x) + 1 loses digits below x = -20 (0 below -37):
    # the derivatives are sech(x)**2 and exp(x) to the last bit in the tails (the peersuite tester);
    # closed forms in exact arithmetic: sech(x)**2 = 4 e^(-2|x|) / (1 + e^(-2|x|))**2
    for x in (-100.0, -40.0, -20.0, -5.0, 0.3, 19.5, 30.0, 300.0):
        e = np.exp(-2 * abs(x))
        want = 4 * e / (1 + e) ** 2
        np.testing.assert_allclose(mg.grad(np.tanh)(x), want, rtol=1e-14)
        np.testing.assert_allclose(mg.jvp(np.tanh, (x,), (1.0,))[1], want, rtol=1e-14)
        np.testing.assert_allclose(mg.grad(np.expm1)(x), np.exp(x), rtol=1e-15)
        np.testing.assert_allclose(mg.jvp(np.expm1, (x,), (1.0,))[1], np.exp(x), rtol=1e-15)
    # the second derivative of tanh, -2 tanh sech**2, there too, also where cosh(x)**3 overflows (|x| > 180:
    # it was 0; the regress58 tester), and the third at 0, -2 (no kink of |x| in the tail's formula)
    for x in (25.0, 200.0, -350.0):
        np.testing.assert_allclose(mg.hessian(np.tanh)(x), -2 * np.tanh(x) * 4 * np.exp(-2 * abs(x)), rtol=1e-12)
    np.testing.assert_allclose(mg.jvp(lambda x: mg.hessian(np.tanh)(x), (0.0,), (1.0,))[1], -2.0, rtol=1e-14)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert mg.grad(lambda v: np.sum(np.tanh(v)))(np.array([800.0, -900.0]))[0] == 0.0
    check_grads(lambda v: np.sum(np.tanh(v) * np.expm1(v)), np.array([-3.0, 0.2, 2.5]), order=2)
    # complex: 1 / cosh(z)**2 was NaN beyond |Re z| = 355, where cosh overflows and tanh is ±1 + 0j (the eis
    # tester's Warburg element at high frequency); closed form sech(z)**2 = 4 e^(-2z) / (1 + e^(-2z))**2 (Re z > 0)
    for z in (25.0 + 3.0j, -30.0 - 2.0j, 400.0 + 400.0j, -400.0 + 3.0j, 21.0 - 0.5j):
        s = 1.0 if z.real > 0 else -1.0
        e = np.exp(-2 * s * z)
        want = 4 * e / (1 + e) ** 2
        got = mg.jvp(np.tanh, (z,), (1.0 + 0.0j,))[1]
        np.testing.assert_allclose(got, want, rtol=1e-14, atol=1e-300)
        f = lambda t, z=z: np.real(np.tanh(t * z))
        np.testing.assert_allclose(mg.grad(f)(1.0), np.real(want * z), rtol=1e-13, atol=1e-300)


def test_clip_with_bounds_given_as_lists():
    # (the spectroscopy tester) np.clip(p, [..], [..]) with both bounds lists raised NumPy's TypeError from
    # np.result_type inside mutagrad; oracle: central differences, forward against reverse
    p0 = np.array([0.3, 0.1, 0.5])
    for f in (lambda p: np.sum(np.clip(p, [0.5, -0.2, 0.01], [2.0, 0.2, 1.0]) ** 3 * np.arange(1.0, 4.0)),
              lambda p: np.sum(p.clip((0.5, -0.2, 0.01), (2.0, 0.2, 1.0)) ** 3),
              lambda p: np.sum(np.clip(p, [0, -1, 0], [1, 1, 1]) * p)):
        g = mg.grad(f)(p0)
        fd = np.array([(f(p0 + 1e-6 * e) - f(p0 - 1e-6 * e)) / 2e-6 for e in np.eye(3)])
        np.testing.assert_allclose(g, fd, rtol=1e-7, atol=1e-9)
        np.testing.assert_allclose(mg.jvp(f, (p0,), (np.ones(3),))[1], g.sum(), rtol=1e-12)
