"""scipy.linalg: solve_triangular, cholesky, cho_factor/cho_solve,
lu_factor/lu_solve, solve_sylvester, solve_continuous_lyapunov/solve_discrete_lyapunov,
solve_continuous_are/solve_discrete_are (implicit differentiation), expm, sqrtm,
inv/solve/det (SciPy's values, np.linalg's formulas), and the others below.

None of these dispatch on traced arrays (SciPy calls ``np.asarray``): the
primitives below are what ``mutagrad.scipy.linalg`` exports under SciPy's
names and signatures. Every rule computes with registered primitives only
(triangular and Sylvester solves included), so every order is available.

A function that reads one triangle of its argument (``cholesky``,
``solve_triangular``, ``assume_a="pos"``) has a derivative with respect to
that triangle only: the other entries get a zero cotangent, as finite
differences of the SciPy function would.

Leading axes are stacks of matrices, as in SciPy 1.17 (see "stacks" below):
every function returns SciPy's values, shapes and containers for them, and
decides ranks and pivots matrix by matrix.

``overwrite_a``, ``overwrite_b`` and ``overwrite_ab`` leave in the arrays what
SciPy's own call leaves there (see "overwrite_a / overwrite_b" below): its
result, differentiated, or intermediate values, which have no derivative.

Cotangent convention as in rules/linalg.py: x̄ = ȳ · conj(∂y/∂x), so
products transpose and conjugate (``ā = -b̄ xᴴ``).
"""
from __future__ import annotations

import functools
import inspect
import operator
import warnings

import numpy as np
import scipy.linalg as sl

from ...core import STATE, ArrayTracer, Tracer, bottom, exported_memory, replicas, write
from ...errors import MutationError, WriteToPlainArrayError, escape_error, user_line
from ...pytree import tree_flatten, tree_map, tree_unflatten
from ...registry import conj_if_complex as _cj
from ...registry import frule, rrule
from ...tangents import (
    AbstractZero,
    NoTangent,
    NotImplementedTangent,
    Thunk,
    ZeroTangent,
    is_zero,
    not_implemented,
    unbroadcast,
)
from ...tape import FOOTPRINTS, read_mask
from .. import linalg as _lin
from .special import scipy_primitive

ZERO = ZeroTangent()


def _mT(a):
    return np.swapaxes(a, -1, -2)


def _mH(a):
    return _cj(_mT(a))


def _zero_if(t, like):
    return np.zeros_like(like) if is_zero(t) else t


def _unb(g, shape):
    """``g`` summed down to ``shape`` (a broadcast argument's cotangent); symbolic ones as they are."""
    return g if is_zero(g) or isinstance(g, NotImplementedTangent) else unbroadcast(g, shape)


# -- stacks ------------------------------------------------------------------------
# SciPy 1.17 batches these functions over leading axes: a matrix argument of more than two
# axes is a stack, broadcast against the others' batch axes; a right-hand side of one axis is
# one vector for every matrix (a stack of solutions), of two or more a matrix (or a stack).
# The rules below work on stacks; a vector for a stack is solved as a column (LAPACK's same
# call: SciPy's values, bit for bit), whose rules need no special case.


def _one_vector_for_a_stack(a, b):
    return np.ndim(b) == 1 and np.ndim(a) > 2


def _no_empty_stack(name, *mats):
    """SciPy's error for a stack of no matrices, under the name of the function called (the
    function computing it may be another SciPy function, whose error would name that one)."""
    try:
        batch = np.broadcast_shapes(*(np.shape(m)[:-2] for m in mats if m is not None))
    except ValueError:
        return  # (SciPy's own error, from the call)
    if batch and 0 in batch:
        raise ValueError(f"`{name}` does not support zero-size batches.")


def _as_column(solve, a, b, **kw):
    """``solve(a, b, **kw)``, a vector ``b`` for a stack ``a`` solved as a column."""
    if _one_vector_for_a_stack(a, b):
        return solve(a, np.expand_dims(b, -1), **kw)[..., 0]
    return solve(a, b, **kw)


# -- overwrite_a / overwrite_b: the side effects of SciPy's own call --------------------------
# SciPy's flags let LAPACK work in the caller's array where its dtype and memory layout allow (a
# Fortran-ordered matrix, a contiguous vector, each function its own rules): the array is left
# unchanged, or holds one of the results (b the solution, a the factor or the inverse: SciPy then
# returns that very array), or intermediate values (solve's and det's LU factors, svd's and qr's
# reflectors). Which one is SciPy's decision, so it is asked, not predicted: with a flag set and a
# traced argument, the call is replayed on plain copies of the arrays it may overwrite, of the
# same dtype, strides, alignment and writeable flag (one more SciPy call), and what the copies
# hold afterwards is written into the arrays (DESIGN 1.2.5): a result as a traced write (its
# derivative exact), other values as a primitive whose derivative is a NotImplementedTangent,
# which costs nothing unless read (forward mode marks the elements written, the array or the view,
# and a read of elements rewritten since is clean). A plain array that would receive traced values
# raises WriteToPlainArrayError; arrays sharing memory (SciPy would read what it overwrote) raise
# MutationError. The results are SciPy's
# own bits (the primitives are SciPy's calls), and where SciPy returns the argument or a view of
# it, so does the call. A stack that SciPy's batch decorator handles matrix by matrix is called so
# here too (an array broadcast over the stack is overwritten by the first matrix and read so by
# the next). Without a traced argument the call is SciPy's own.


@scipy_primitive("the values scipy.linalg leaves in an overwritten array")
def _left_by_scipy(*deps, values, why):
    return values.copy()


@rrule(_left_by_scipy)
def _left_by_scipy_rrule(*deps, values, why):
    def pullback(g):  # (a zero cotangent: the values were not read, or overwritten before they were)
        return tuple(ZERO if _zero_everywhere(g) else not_implemented(why) for _ in deps)

    return values.copy(), pullback


def _zero_everywhere(g) -> bool:
    """Whether cotangent ``g`` is zero, and so are its tangents at the outer forward levels that trace it (a
    Hessian's: forward over reverse); one an outer reverse level traces may have a nonzero derivative there."""
    if not isinstance(g, Tracer):
        return not np.any(g)
    lv = g._level
    if lv.mode != "fwd" or g._storage.poison is not None:
        return False
    t = lv.tangent_of(g)
    return _zero_everywhere(g._value) and (isinstance(t, AbstractZero) or _zero_everywhere(t))


@frule(_left_by_scipy)
def _left_by_scipy_frule(primals, tangents, *, values, why):
    return values.copy(), not_implemented(why)


def _flat_leaves(x):
    return tree_flatten(x)[0]


def _has_tracer(x):
    return any(isinstance(v, Tracer) for v in tree_flatten(x)[0])


def _plain(x):
    return tree_map(bottom, x)  # (bottom leaves a plain value as it is)


def _same_bits(x, y):
    x, y = np.asarray(x), np.asarray(y)
    return (x.shape == y.shape and x.dtype == y.dtype
            and np.ascontiguousarray(x).tobytes() == np.ascontiguousarray(y).tobytes())


def _same_bits_each(x, y):
    """Element by element, whether ``x`` and ``y`` (of one shape and dtype) hold the same bits."""
    x, y = np.ascontiguousarray(x), np.ascontiguousarray(y)
    w = x.dtype.itemsize
    return np.all(x.view(np.uint8).reshape(x.shape + (w,)) == y.view(np.uint8).reshape(y.shape + (w,)), axis=-1)


def _replica(x):
    """A copy of the plain array ``x`` laid out as ``x`` (core.replicas) with its writeable flag,
    which SciPy decides by too."""
    r = replicas(x)[1][0]
    r.flags.writeable = x.flags.writeable
    return r


def _same_memory(y, r):
    """Whether ``y`` is ``r``, or a view of it element for element (solve's x of a vector b)."""
    return y is r or (isinstance(y, np.ndarray) and y.shape == r.shape and y.ctypes.data == r.ctypes.data
                       and all(n <= 1 or s == t for n, s, t in zip(y.shape, y.strides, r.strides)))


def _as_returned(x, y, r):
    """``x`` as SciPy returns its replica ``r`` as ``y``: itself, or a view of all of it (read-only
    where SciPy's is: solve's x of a vector b is a view of np.broadcast_to(b[:, None], ...))."""
    if y is r:
        return x
    return x[...] if y.flags.writeable else np.broadcast_to(x, np.shape(x))


def _writable_twin(x):
    """The writable traced array whose memory the read-only traced ``x`` shows element for element, as
    :func:`_as_returned` gives a result SciPy returns read-only (solve's x of a vector b: SciPy writes into it
    again when it is passed back with overwrite_b=True, LAPACK ignoring the flag); None for other read-only
    arrays (a broadcast, np.diagonal, an argument passed read-only), which mutagrad does not write."""
    if type(x) is not ArrayTracer or x._geom is None:
        return None
    st = x._storage
    whole = st.owner() if st.owner is not None else None
    if whole is None:  # (no traced array of all of it is alive: `c = solve(J, c, overwrite_b=True)` rebinds c)
        root = st.root
        if root is None:
            return None
        whole = ArrayTracer(root, x._level, st, None, False)
    wb, xb = bottom(whole), bottom(x)
    if isinstance(wb, np.ndarray) and wb.flags.writeable and wb.dtype == xb.dtype and _same_memory(xb, wb):
        return whole  # (element for element: a column's stride along its length-1 axis is SciPy's 0)
    return None


def _shares(x, y):
    if not np.may_share_memory(x, y):
        return False
    try:
        return np.shares_memory(x, y, max_work=10000)
    except np.exceptions.TooHardError:
        return True


def _layout_key(p, arguments):
    """What SciPy's decision to work in the array ``p`` depends on: the arrays' shapes, strides,
    dtypes, alignments and flags, and the other arguments' values (options); None where an
    argument is none of those (a callable, an object)."""
    key = [p]
    for k, v in arguments.items():
        if isinstance(v, np.ndarray):
            key.append((k, v.shape, v.strides, v.dtype.str, v.ctypes.data % 64, v.flags.writeable))
        elif v is None or type(v) in (bool, int, float, str):
            key.append((k, v))
        else:
            return None
    return tuple(key)


def _core_ndim(core, v):
    return (2 if np.ndim(v) >= 2 else 1) if core == "1|2" else core


class _Overwrites:
    """The overwrite flags of one function (see above): ``flags`` maps a flag to (the parameter
    of the array it names, the parameters that array's intermediate values depend on);
    ``batch`` is SciPy's batch decorator's (parameter or (parameter, item), core axes) of the
    arrays, or None where SciPy handles stacks itself."""

    def __init__(self, fn, scipy_fn, flags, batch, module="scipy.linalg"):
        self.fn, self.scipy_fn, self.flags, self.batch = fn, scipy_fn, flags, batch
        self.name = f"{module}.{scipy_fn.__name__}"
        self.sig = inspect.signature(fn)
        params = list(self.sig.parameters)
        self.positions = [(f, params.index(f) if self.sig.parameters[f].kind is not
                           inspect.Parameter.KEYWORD_ONLY else None) for f in flags]
        self.untouched = {}  # (_untouched's answers, by the arguments' layouts and options)

    def flagged(self, args, kwargs):
        for f, i in self.positions:
            if kwargs.get(f) or (i is not None and len(args) > i and args[i]):
                return True
        return False

    def __call__(self, args, kwargs, pending=None, shared=()):
        """The call; ``pending`` (a matrix of a stack): a list to leave the writes of intermediate
        values into the arrays not in ``shared`` (those read by no other matrix) to the caller."""
        bound = self.sig.bind(*args, **kwargs)
        if not _has_tracer(list(bound.arguments.values())):
            self._not_into_traced_memory(bound.arguments)
            return self.scipy_fn(*args, **kwargs)  # (plain: SciPy's own call)
        bound.apply_defaults()
        arg = dict(bound.arguments)
        targets = [(f, p, deps) for f, (p, deps) in self.flags.items()
                   if arg[f] and isinstance(arg[p], (Tracer, np.ndarray)) and np.ndim(arg[p])]
        if not targets:
            return self.fn(*args, **kwargs)
        if self.batch is not None and self._stacked(arg):
            return self._matrix_by_matrix(bound)
        self._no_overlap(arg, targets)
        out = self.fn(*args, **kwargs)
        copies = {p: _replica(_plain(arg[p])) for _, p, _ in targets}
        replay = {k: copies.get(k, _plain(v)) for k, v in arg.items()}
        bound.arguments.update(replay)
        with warnings.catch_warnings():  # (the traced call warned as SciPy does, or not at all)
            warnings.simplefilter("ignore")
            want = _flat_leaves(self.scipy_fn(*bound.args, **bound.kwargs))
        got, outdef = tree_flatten(out)
        if len(got) != len(want):  # pragma: no cover  (the same structure: SciPy's)
            raise AssertionError(f"{self.name}: results unlike SciPy's")
        new = list(got)  # (the primitives are SciPy's own calls: the same bits as ``want``)
        writes = []  # (flag, parameter, index of the result it holds or None, value, where it is written)
        for flag, p, deps in targets:
            x, r = arg[p], copies[p]
            same = [i for i, w in enumerate(want) if _same_memory(w, r)]
            # (a result SciPy computed in the array: written with its derivative, even where its bits are
            # the array's own, inv(I); equal bits otherwise say nothing was written only where SciPy's
            # call does not write into the array at all, a layout it copies: asked of a replica)
            unchanged = not same and _same_bits(r, _plain(x))
            if unchanged and self._untouched(args, kwargs, p, targets):
                continue
            if not same and not unchanged:  # (a result's bits where the array's own were: it holds that
                # result; equal to both, it may be either, and is taken as SciPy's intermediate values)
                same = [i for i, w in enumerate(want) if _same_bits(w, r)][:1]
            if same:  # one of the results: its derivative is exact
                writes.append((flag, p, same[0], new[same[0]], Ellipsis))
                continue
            why = (f"{self.name} with {flag}=True left intermediate values (its workspace, not one of its "
                   f"results) in the array `{p}`, and they have no derivative. Pass {flag}=False (or a copy "
                   f"of `{p}`) where the function reads `{p}` afterwards")
            traced = [v for d in deps for v in _flat_leaves(arg[d]) if isinstance(v, Tracer)]
            # (the elements SciPy leaves as they were, in this call and in the probe's: their values and
            # derivatives stay; solve_banded's unused corners of ab, which a loop that refills the bands
            # never writes: forward mode refused its jvp, the cranknicolson tester)
            kept = self._untouched_mask(args, kwargs, p, targets)
            kept = None if kept is None else kept & _same_bits_each(r, _plain(x))
            where = Ellipsis if kept is None or not kept.any() else ~kept
            writes.append((flag, p, None, _left_by_scipy(*traced, values=r, why=why) if traced else r.copy(), where))
        for flag, p, i, v, where in writes:
            # (SciPy's own read-only result of an earlier call is written again, as SciPy writes it: `c = solve(J, c,
            # overwrite_b=True)` in a loop; another read-only array is refused)
            twin = _writable_twin(arg[p]) if isinstance(bottom(arg[p]), np.ndarray) and not (
                bottom(arg[p]).flags.writeable) else arg[p]
            if twin is None:
                raise MutationError(
                    f"{self.name} with {flag}=True at {user_line()} writes into `{p}`, which is read-only: SciPy's "
                    "LAPACK wrappers write into it regardless of the flag, which mutagrad does not do to an "
                    f"array that is not writable. Pass {flag}=False, or a writable array (a copy).")
            arg[p] = twin
            if not isinstance(arg[p], Tracer) and isinstance(v, Tracer):
                raise escape_error(
                    f"{self.name} with {flag}=True writing its {'intermediate values' if i is None else 'result'} "
                    f"into `{p}`, a plain NumPy array", WriteToPlainArrayError,
                    f" SciPy's own call leaves them in `{p}`; they depend on traced values, which a plain array "
                    f"cannot hold. Pass {flag}=False (and use the result), or a traced `{p}` (a copy made "
                    "inside the function: np.array(x) of a traced x).")
            if i is None and pending is not None and p not in shared:
                pending.append((arg[p], v))
                continue
            write(arg[p], where, v if where is Ellipsis else v[where])
            if i is not None and _same_memory(want[i], copies[p]):  # (SciPy returns the array it wrote into)
                new[i] = _as_returned(arg[p], want[i], copies[p])
                want[i] = None
        for i, (g, w) in enumerate(zip(new, want)):
            # a result in a new array of SciPy's layout (LAPACK's Fortran order, where SciPy overwrote its
            # own converted copy of a longdouble b): so laid out, which later sums' order follows
            if (isinstance(g, Tracer) and isinstance(w, np.ndarray) and w.ndim >= 2 and w.flags.f_contiguous
                    and not w.flags.c_contiguous and not bottom(g).flags.f_contiguous):
                new[i] = g.copy(order="F")
        return tree_unflatten(outdef, new)

    def _not_into_traced_memory(self, arg):
        """Refuse a flag naming mg.value of a traced array (or a view of it): read-only, but SciPy's LAPACK
        wrappers write into it regardless, which would change the traced array's values unseen."""
        if not STATE.levels:
            return
        for f, (p, _) in self.flags.items():
            v = arg.get(p)
            if arg.get(f) and isinstance(v, np.ndarray) and not v.flags.writeable and exported_memory(v):
                raise MutationError(
                    f"{self.name} with {f}=True at {user_line()} writes into `{p}`, mg.value(...) of a traced array "
                    "(a read-only view of its memory): SciPy's LAPACK wrappers write into it regardless of the flag, "
                    f"which would change the traced array's values without a record, and its derivative with them. "
                    f"Pass the traced array itself (its overwrite is then differentiated), {f}=False, or a copy "
                    "(np.array(mg.value(x))).")

    def _untouched(self, args, kwargs, p, targets):
        """Whether SciPy's call writes nothing into the array ``p`` (it works on a copy: a layout or
        dtype its routine does not take in place), found on replicas of the arrays, ``p``'s holding
        2 p + 1 (values an overwrite changes: a triangle SciPy sets to zeros, an identity it inverts).
        A probe SciPy refuses answers no: the array's values are then taken as overwritten."""
        kept = self._untouched_mask(args, kwargs, p, targets)
        return kept is not None and bool(kept.all())

    def _untouched_mask(self, args, kwargs, p, targets):
        """The elements of ``p`` SciPy's call leaves as they were, on the probe of :meth:`_untouched`; None
        where SciPy refuses the probe."""
        bound = self.sig.bind(*args, **kwargs)
        bound.apply_defaults()
        bound.arguments.update({k: _plain(v) for k, v in bound.arguments.items()})
        # (SciPy decides by the layouts and the options, not the values: the answer is kept for them)
        key = _layout_key(p, bound.arguments)
        if key is not None and key in self.untouched:
            return self.untouched[key]
        bound.arguments.update({q: _replica(_plain(bound.arguments[q])) for _, q, _ in targets})
        probe = bound.arguments[p]
        if not probe.flags.writeable:
            return np.ones(probe.shape, bool)
        probe[...] = probe * 2 + 1
        before = probe.copy()
        try:
            with warnings.catch_warnings(), np.errstate(all="ignore"):
                warnings.simplefilter("ignore")
                self.scipy_fn(*bound.args, **bound.kwargs)
        except Exception:  # noqa: BLE001 (SciPy's refusal of the probe's values)
            return None
        same = _same_bits_each(probe, before)
        if key is not None and len(self.untouched) < 256:
            self.untouched[key] = same
        return same

    def _no_overlap(self, arg, targets):
        arrays = [(k, _plain(v)) for k, a in arg.items() for v in _flat_leaves(a) if isinstance(v, (Tracer, np.ndarray))]
        for flag, p, _ in targets:
            x = _plain(arg[p])
            for k, y in arrays:
                if k != p and _shares(x, y):
                    raise MutationError(
                        f"{self.name} with {flag}=True at {user_line()}: `{p}` shares memory with `{k}`, so "
                        f"SciPy would read values it has overwritten, which cannot be differentiated. Pass "
                        f"{flag}=False, or a copy of `{p}`.")

    def _arrays(self, arg):
        """(parameter, item, core axes, value) of the arrays SciPy's batch decorator loops over."""
        for spec, core in self.batch:
            p, item = spec if isinstance(spec, tuple) else (spec, None)
            v = arg[p] if item is None else arg[p][item]
            if v is not None:
                if not isinstance(v, (Tracer, np.ndarray)):
                    v = np.asarray(v)
                yield p, item, _core_ndim(core, v), v

    def _stacked(self, arg):
        shapes = [np.shape(v)[:np.ndim(v) - c] for _, _, c, v in self._arrays(arg)]
        return any(shapes) and 0 not in np.broadcast_shapes(*shapes)

    def _matrix_by_matrix(self, bound):
        """SciPy's batch decorator's loop: the function of each matrix (and its side effects), in
        order, on the arrays' matrices broadcast against each other; its results stacked. The
        intermediate values left in an array no other matrix reads are written last (forward
        mode marks a whole array whose part has no derivative)."""
        orig = dict(bound.arguments)
        arrays = list(self._arrays(orig))
        batch = np.broadcast_shapes(*(np.shape(v)[:np.ndim(v) - c] for _, _, c, v in arrays))
        shared = {p for p, _, c, v in arrays if np.prod(np.shape(v)[:np.ndim(v) - c], dtype=int) < np.prod(batch)}
        rows, pending = [], []
        for idx in np.ndindex(batch):
            call = dict(orig)
            for p, item, c, v in arrays:
                own = np.shape(v)[:np.ndim(v) - c]
                sub = idx[len(idx) - len(own):]
                v = v[tuple(0 if n == 1 else i for n, i in zip(own, sub))] if own else v
                if item is None:
                    call[p] = v
                else:
                    call[p] = tuple(v if j == item else w for j, w in enumerate(call[p]))
            bound.arguments.update(call)
            res = self(bound.args, bound.kwargs, pending, shared)
            rows.append(res if isinstance(res, tuple) else (res,))
        for x, v in pending:
            write(x, Ellipsis, v)
        cols = [np.reshape(np.stack(col), batch + np.shape(col[0])) for col in zip(*rows)]
        return cols[0] if len(cols) == 1 else cols


def _overwrites(scipy_fn, batch=None, module="scipy.linalg", **flags):
    """The public function it decorates follows SciPy's overwrite ``flags`` (see above); ``module``: the
    name of SciPy's module, for messages."""

    def decorate(fn):
        ow = _Overwrites(fn, scipy_fn, flags, batch, module)

        @functools.wraps(fn)
        def call(*args, **kwargs):
            if ow.flagged(args, kwargs):
                return ow(args, kwargs)
            return fn(*args, **kwargs)

        return call

    return decorate


# -- masks -----------------------------------------------------------------------


def _tri_mask(shape, lower, k=0):
    """The lower (upper) triangle of a (..., n, m) matrix; k > 0 moves away from
    the diagonal (k = 1: the strict triangle). (Read-only: one per size, kept.)"""
    return _tri_mask_of(*shape[-2:], bool(lower), k)


@functools.lru_cache(maxsize=64)
def _tri_mask_of(n, m, lower, k):
    mask = np.tri(n, m, -k, dtype=bool) if lower else ~np.tri(n, m, k - 1, dtype=bool)
    mask.flags.writeable = False
    return mask


def _tri(x, lower, k=0):
    return np.where(_tri_mask(np.shape(x), lower, k), x, 0.0)


def _phi(x, lower):
    """The strict triangle of x and half its diagonal (Murray's Φ)."""
    n, m = np.shape(x)[-2:]
    return np.where(_tri_mask((n, m), lower, 1), x, np.where(np.eye(n, m, dtype=bool), 0.5 * x, 0.0))


def _from_triangle(a, lower, conj=True):
    """The symmetric (Hermitian) matrix LAPACK sees when it reads one triangle of a."""
    t = _phi(a, lower)
    return t + (_mH(t) if conj else _mT(t))


def _outer_or_mm(u, v, vec):
    """u vᴴ for the columns of two right-hand sides (vectors if ``vec``)."""
    if vec:
        return u[..., :, None] * _cj(v)[..., None, :]
    return np.matmul(u, _mH(v))


# -- op(A) x = b: shared by solve_triangular and lu_solve ---------------------------

_TRANS = {0: 0, 1: 1, 2: 2, "N": 0, "T": 1, "C": 2}


def _trans_of(trans, scipy_fn, a=None):
    """``trans`` as 0, 1 or 2, as SciPy's ``scipy_fn`` (solve_triangular, lu_solve) reads it: its names and
    integers; another value is given to SciPy's own call on a 2 x 2 stand-in (of ``a``'s memory order and real
    or complex kind: solve_triangular transposes a C-ordered matrix itself and negates such a ``trans``), whose
    error is raised (lu_solve's for a string, solve_triangular's for an F-ordered matrix) or whose solution
    tells which of the three it took (regress88, regress89)."""
    exact = (0, 1, 2) if scipy_fn is sl.lu_solve else (0, 1, 2, "N", "T", "C")
    if type(trans) in (int, str) and trans in exact:
        return _TRANS[trans]
    cplx = a is not None and np.iscomplexobj(bottom(a))
    low = np.array([[2.0, 0.0], [1.0 + 1.0j if cplx else 1.0, 4.0]])
    if a is not None and np.ndim(bottom(a)) == 2 and bottom(a).flags.f_contiguous:
        low = np.asfortranarray(low)
    rhs = np.array([1.0, 2.0])
    if scipy_fn is sl.lu_solve:
        got = sl.lu_solve(sl.lu_factor(low), rhs, trans=trans)
    else:
        got = sl.solve_triangular(low, rhs, trans=trans, lower=True)
    modes = [np.linalg.solve(m, rhs) for m in (low, low.T, low.conj().T)]
    return next(k for k in (0, 2, 1) if np.allclose(got, modes[k]))


def _columns_of_abar(bbar, x, trans, vec):
    """(F, G), matrices of columns, with Ā = -F Gᴴ for x = op(A)⁻¹ b and b̄ (see :func:`_solve_pullback`): the
    rank-k form lu_solve's and cho_solve's pullbacks take products with, O(n²) per column instead of Ā's."""
    F, G = (bbar, x) if trans == 0 else ((_cj(x), _cj(bbar)) if trans == 1 else (x, bbar))
    return (F[..., None], G[..., None]) if vec else (F, G)


def _op(m, trans):
    return m if trans == 0 else (_mT(m) if trans == 1 else _mH(m))


def _adjoint_solve(solve, g, trans):
    """op(A)⁻ᴴ g, given ``solve(rhs, trans)`` = op_trans(A)⁻¹ rhs."""
    if trans == 1:  # (Aᵀ)⁻ᴴ g = conj(A⁻¹ conj(g))
        return _cj(solve(_cj(g), 0))
    return solve(g, 2 - trans)


def _solve_pullback(solve, g, x, trans, vec):
    """For x = op(A)⁻¹ b: (cotangent of A, cotangent of b)."""
    bbar = _adjoint_solve(solve, g, trans)
    return _op(-_outer_or_mm(bbar, x, vec), trans), bbar


def _check_finite(check, *arrays):
    """SciPy's ``check_finite=True``: every element of the arrays given (the primitives call SciPy
    with check_finite=False, so that ``check_finite=False`` reads only what LAPACK reads: a
    triangle, whose other half may hold anything)."""
    if check:
        for a in arrays:
            if a is not None and not np.isfinite(bottom(a)).all():
                raise ValueError("array must not contain infs or NaNs")


# -- solve_triangular -------------------------------------------------------------


@scipy_primitive("scipy.linalg.solve_triangular")
def _solve_triangular(a, b, *, trans=0, lower=False, unit_diagonal=False):
    return sl.solve_triangular(a, b, trans=trans, lower=lower, unit_diagonal=unit_diagonal, check_finite=False)


@_overwrites(sl.solve_triangular, overwrite_b=("b", ("a", "b")), batch=(("a", 2), ("b", "1|2")))
def solve_triangular(a, b, trans=0, lower=False, unit_diagonal=False, overwrite_b=False, check_finite=True):
    """``scipy.linalg.solve_triangular``: x with op(A) x = b, A the triangle of ``a``.

    >>> import numpy as np, mutagrad as mg
    >>> from mutagrad.scipy.linalg import solve_triangular
    >>> a = np.array([[2.0, 0.0], [1.0, 1.0]])
    >>> mg.grad(lambda b: solve_triangular(a, b, lower=True).sum())(np.ones(2))
    array([0., 1.])
    """
    _check_finite(check_finite, a, b)
    return _as_column(_solve_triangular, a, b, trans=_trans_of(trans, sl.solve_triangular, a), lower=lower,
                      unit_diagonal=unit_diagonal)


def _tri_solver(a, lower, unit_diagonal):
    return lambda rhs, trans: _solve_triangular(a, rhs, trans=trans, lower=lower, unit_diagonal=unit_diagonal)


@rrule(_solve_triangular)
def _solve_triangular_rrule(a, b, *, trans=0, lower=False, unit_diagonal=False):
    x = _solve_triangular(a, b, trans=trans, lower=lower, unit_diagonal=unit_diagonal)

    def pullback(g):
        abar, bbar = _solve_pullback(_tri_solver(a, lower, unit_diagonal), g, x, trans, np.ndim(b) == 1)
        return unbroadcast(_tri(abar, lower, int(unit_diagonal)), np.shape(a)), unbroadcast(bbar, np.shape(b))

    return x, pullback


@frule(_solve_triangular)
def _solve_triangular_frule(primals, tangents, *, trans=0, lower=False, unit_diagonal=False):
    (a, b), (ta, tb) = primals, tangents
    x = _solve_triangular(a, b, trans=trans, lower=lower, unit_diagonal=unit_diagonal)
    rhs = _zero_if(tb, x)
    if not is_zero(ta):
        rhs = rhs - np.matmul(_op(_tri(ta, lower, int(unit_diagonal)), trans), x)
    return x, _solve_triangular(a, rhs, trans=trans, lower=lower, unit_diagonal=unit_diagonal)


# -- solve_banded -----------------------------------------------------------------
# A[i, j] = ab[u + i - j, j] inside the band. x = A⁻¹ b; ẋ = A⁻¹ (ḃ - Ȧ x);
# b̄ = A⁻ᴴ x̄ (a banded solve with the conjugate transpose's band), āb[r, j] = -b̄[j + r - u] x[j]ᴴ.
# A stack of bands is (..., l + u + 1, n): row r of each is ab[..., r, :].


@scipy_primitive("scipy.linalg.solve_banded")
def _solve_banded(ab, b, *, lower=0, upper=0):
    return sl.solve_banded((lower, upper), ab, b, check_finite=False)


@_overwrites(sl.solve_banded, overwrite_ab=("ab", ("ab",)), overwrite_b=("b", ("ab", "b")),
              batch=(("ab", 2), ("b", "1|2")))
def solve_banded(l_and_u, ab, b, overwrite_ab=False, overwrite_b=False, check_finite=True):
    """``scipy.linalg.solve_banded``: x with A x = b, A given by its diagonals ``ab``.

    >>> import numpy as np, mutagrad as mg
    >>> from mutagrad.scipy.linalg import solve_banded
    >>> ab = np.array([[0.0, 1.0], [2.0, 2.0], [1.0, 0.0]])  # A = [[2, 1], [1, 2]]
    >>> mg.grad(lambda b: solve_banded((1, 1), ab, b).sum())(np.ones(2))
    array([0.33333333, 0.33333333])
    """
    lower, upper = (int(v) for v in l_and_u)
    _check_finite(check_finite, ab, b)
    return _as_column(_solve_banded, ab, b, lower=lower, upper=upper)


def _band_shift(row, k):
    """``row`` moved by ``k`` places (out[j] = row[j + k]), zeros where it has none."""
    n = np.shape(row)[-1]
    if k == 0:
        return row
    z = np.zeros_like(row[..., : min(abs(k), n)])
    if k > 0:
        return np.concatenate([row[..., k:], z], axis=-1) if k < n else np.zeros_like(row)
    return np.concatenate([z, row[..., : n + k]], axis=-1) if -k < n else np.zeros_like(row)


def _band_adjoint(ab, lower, upper):
    """The band of Aᴴ (lower and upper bandwidths swapped): row l + k is row u - k moved by k."""
    rows = [_band_shift(ab[..., upper - k, :], k) for k in range(-lower, upper + 1)]
    return _cj(np.stack(rows, axis=-2))


def _band_times(ab, x, lower, upper):
    """A x for the band ``ab`` of A (x a vector, or a matrix of columns; stacks of either)."""
    vec = np.ndim(x) == 1
    y = 0.0
    for r in range(lower + upper + 1):
        s = r - upper  # A[j + s, j] = ab[r, j]: y[i] += ab[r, i - s] x[i - s]
        d = ab[..., r, :] * x if vec else ab[..., r, :, None] * x
        y = y + (_band_shift(d, -s) if vec else _mT(_band_shift(_mT(d), -s)))
    return y


def _band_of_outer(bbar, x, lower, upper):
    """The band of -b̄ xᴴ (Ā of a solve, on the band only): row r is -b̄[j + r - u] x[j]ᴴ,
    summed over the columns of b."""
    vec = np.ndim(x) == 1
    rows = []
    for r in range(lower + upper + 1):
        s = r - upper
        shifted = _band_shift(bbar, s) if vec else _mT(_band_shift(_mT(bbar), s))
        prod = shifted * _cj(x)
        rows.append(-(prod if vec else np.sum(prod, axis=-1)))
    return np.stack(rows, axis=-2)


@rrule(_solve_banded)
def _solve_banded_rrule(ab, b, *, lower=0, upper=0):
    x = _solve_banded(ab, b, lower=lower, upper=upper)

    def pullback(g):
        bbar = _solve_banded(_band_adjoint(ab, lower, upper), g, lower=upper, upper=lower)
        return _unb(_band_of_outer(bbar, x, lower, upper), np.shape(ab)), _unb(bbar, np.shape(b))

    return x, pullback


@frule(_solve_banded)
def _solve_banded_frule(primals, tangents, *, lower=0, upper=0):
    (ab, b), (tab, tb) = primals, tangents
    x = _solve_banded(ab, b, lower=lower, upper=upper)
    rhs = _zero_if(tb, x)
    if not is_zero(tab):
        rhs = rhs - _band_times(tab, x, lower, upper)
    return x, _solve_banded(ab, rhs, lower=lower, upper=upper)


# -- solveh_banded: a Hermitian positive definite band, one triangle stored ----------------
# upper form (lower=False): ab[p - d, j] = A[j - d, j]; lower form: ab[d, j] = A[j + d, j]
# (d = 0..p); the other triangle is the conjugate, and the diagonal's imaginary part is not
# read. Through the general band of A (bandwidths p, p): x̄ → b̄ = A⁻¹ x̄ (A = Aᴴ), Ā = -b̄ xᴴ
# folded onto the stored triangle (an entry's cotangent gets its mirror's conjugate).


@scipy_primitive("scipy.linalg.solveh_banded")
def _solveh_banded(ab, b, *, lower=False):
    return sl.solveh_banded(ab, b, lower=lower, check_finite=False)


@_overwrites(sl.solveh_banded, overwrite_ab=("ab", ("ab",)), overwrite_b=("b", ("ab", "b")),
              batch=(("ab", 2), ("b", "1|2")))
def solveh_banded(ab, b, overwrite_ab=False, overwrite_b=False, lower=False, check_finite=True):
    """``scipy.linalg.solveh_banded``: x with A x = b, A Hermitian positive definite
    given by one triangle of its band (``lower``), differentiable w.r.t. ``ab`` and ``b``
    (the stored band only; the diagonal's imaginary part, which SciPy does not read, has
    none).

    >>> import numpy as np, mutagrad as mg
    >>> from mutagrad.scipy.linalg import solveh_banded
    >>> ab = np.array([[0.0, 1.0], [2.0, 2.0]])  # A = [[2, 1], [1, 2]], upper form
    >>> mg.grad(lambda b: solveh_banded(ab, b).sum())(np.ones(2))
    array([0.33333333, 0.33333333])
    """
    if np.ndim(ab) < 2:  # (SciPy's LAPACK call reads a 1-D ab as a column: a 1 x 1 system, the other b kept)
        raise ValueError(f"mutagrad.scipy.linalg.solveh_banded: ab must be 2-D, its rows the band's diagonals, not of "
                         f"shape {np.shape(ab)} (SciPy solves a 1 x 1 system from a 1-D ab and leaves the rest of b "
                         "as it is); for a diagonal matrix d, write ab = d[None, :]")
    _check_finite(check_finite, ab, b)
    return _as_column(_solveh_banded, ab, b, lower=bool(lower))


def _general_band(ab, lower):
    """The (p, p) general band (solve_banded's form) of the Hermitian band ``ab``."""
    p = np.shape(ab)[-2] - 1
    row = lambda d: ab[..., d, :]
    if lower:
        diag = _re_if_complex(row(0))
        upper = [_cj(_band_shift(row(d), -d)) for d in range(p, 0, -1)]
        return np.stack(upper + [diag] + [row(d) for d in range(1, p + 1)], axis=-2), p
    diag = _re_if_complex(row(p))
    below = [_cj(_band_shift(row(p - d), d)) for d in range(1, p + 1)]
    return np.stack([row(r) for r in range(p)] + [diag] + below, axis=-2), p


def _re_if_complex(x):
    return np.real(x).astype(bottom(x).dtype) if np.iscomplexobj(bottom(x)) else x


def _fold_general_band(g, p, lower):
    """The cotangent of the stored band from ``g``, that of the general band (the transpose
    of :func:`_general_band`)."""
    rows = [None] * (p + 1)
    row = lambda r: g[..., r, :]
    if lower:
        rows[0] = _re_if_complex(row(p))
        for d in range(1, p + 1):
            rows[d] = row(p + d) + _cj(_band_shift(row(p - d), d))
    else:
        rows[p] = _re_if_complex(row(p))
        for d in range(1, p + 1):
            rows[p - d] = row(p - d) + _cj(_band_shift(row(p + d), -d))
    return np.stack(rows, axis=-2)


@rrule(_solveh_banded)
def _solveh_banded_rrule(ab, b, *, lower=False):
    x = _solveh_banded(ab, b, lower=lower)

    def pullback(g):
        bbar = _solveh_banded(ab, g, lower=lower)
        p = np.shape(ab)[-2] - 1
        return _unb(_fold_general_band(_band_of_outer(bbar, x, p, p), p, lower), np.shape(ab)), _unb(bbar, np.shape(b))

    return x, pullback


@frule(_solveh_banded)
def _solveh_banded_frule(primals, tangents, *, lower=False):
    (ab, b), (tab, tb) = primals, tangents
    x = _solveh_banded(ab, b, lower=lower)
    rhs = _zero_if(tb, x)
    if not is_zero(tab):
        gab, p = _general_band(tab, lower)
        rhs = rhs - _band_times(gab, x, p, p)
    return x, _solveh_banded(ab, rhs, lower=lower)


# -- Cholesky ---------------------------------------------------------------------
# A = L Lᴴ with A read from one triangle of a. Tangent: L̇ = L Φ(L⁻¹ Ȧ L⁻ᴴ);
# cotangent: P = L⁻ᴴ Φ(Lᴴ L̄) L⁻¹, folded onto the triangle read.


def _chol_tangent(L, adot):
    y = _solve_triangular(L, adot, lower=True)
    m = _mH(_solve_triangular(L, _mH(y), lower=True))
    return np.matmul(L, _phi(m, True))


def _chol_cotangent(L, Lbar, lower_read):
    w = _phi(np.matmul(_mH(L), Lbar), True)
    v = _solve_triangular(L, w, lower=True, trans=2)
    p = _mH(_solve_triangular(L, _mH(v), lower=True, trans=2))
    return _phi(p + _mH(p), lower_read)


@scipy_primitive("scipy.linalg.cholesky")
def _cholesky(a, *, lower=False):
    return sl.cholesky(a, lower=lower, check_finite=False)


@_overwrites(sl.cholesky, overwrite_a=("a", ("a",)), batch=(("a", 2),))
def cholesky(a, lower=False, overwrite_a=False, check_finite=True):
    """``scipy.linalg.cholesky``: U with A = Uᴴ U (L with A = L Lᴴ if ``lower``),
    A read from the upper (lower) triangle of ``a``.

    >>> import numpy as np, mutagrad as mg
    >>> from mutagrad.scipy.linalg import cholesky
    >>> mg.grad(lambda a: cholesky(a)[0, 0])(np.array([[4.0, 1.0], [1.0, 2.0]]))
    array([[0.25, 0.  ],
           [0.  , 0.  ]])
    """
    _check_finite(check_finite, a)
    return _cholesky(a, lower=lower)


@rrule(_cholesky)
def _cholesky_rrule(a, *, lower=False):
    y = _cholesky(a, lower=lower)
    L = y if lower else _mH(y)

    def pullback(g):
        return (_chol_cotangent(L, g if lower else _mH(g), lower),)

    return y, pullback


@frule(_cholesky)
def _cholesky_frule(primals, tangents, *, lower=False):
    (a,), (t,) = primals, tangents
    y = _cholesky(a, lower=lower)
    L = y if lower else _mH(y)
    ldot = _chol_tangent(L, _from_triangle(t, lower))
    return y, ldot if lower else _mH(ldot)


@scipy_primitive("scipy.linalg.cho_factor")
def _cho_factor(a, *, lower=False):
    # SciPy's c: the factor in the triangle read, a's own entries in the other
    return _matrices_in_f(np.where(_tri_mask(np.shape(a), lower), sl.cholesky(a, lower=lower, check_finite=False), a)), lower


def _matrices_in_f(c):
    """``c`` laid out as SciPy's cho_factor lays out its result, each matrix in Fortran order (sums
    over it add in SciPy's order: their last bits)."""
    return np.swapaxes(np.swapaxes(c, -1, -2).copy(order="C"), -1, -2)


@_overwrites(sl.cho_factor, overwrite_a=("a", ("a",)), batch=(("a", 2),))
def cho_factor(a, lower=False, overwrite_a=False, check_finite=True):
    """``scipy.linalg.cho_factor``: ``(c, lower)`` for :func:`cho_solve` (of a stack, as
    SciPy: the list ``[c, lower]`` with ``lower`` a boolean per matrix).

    >>> import numpy as np, mutagrad as mg
    >>> from mutagrad.scipy.linalg import cho_factor, cho_solve
    >>> a = np.array([[4.0, 1.0], [1.0, 2.0]])
    >>> mg.grad(lambda b: cho_solve(cho_factor(a), b)[0])(np.ones(2))
    array([ 0.28571429, -0.14285714])
    """
    _no_empty_stack("cho_factor", a)
    _check_finite(check_finite, a)
    c, low = _cho_factor(a, lower=lower)
    batch = np.shape(a)[:-2]
    return [c, np.full(batch, low)] if batch else (c, low)


@rrule(_cho_factor)
def _cho_factor_rrule(a, *, lower=False):
    y, pb = _cholesky_rrule(a, lower=lower)
    keep = _tri_mask(np.shape(a), lower)

    def pullback(g):
        gc = g[0]
        if is_zero(gc):
            return (ZERO,)
        (abar,) = pb(np.where(keep, gc, 0.0))
        return (abar + np.where(keep, 0.0, gc),)

    return (_matrices_in_f(np.where(keep, y, a)), lower), pullback


@frule(_cho_factor)
def _cho_factor_frule(primals, tangents, *, lower=False):
    (a,), (t,) = primals, tangents
    y, ydot = _cholesky_frule((a,), (t,), lower=lower)
    keep = _tri_mask(np.shape(a), lower)
    return (_matrices_in_f(np.where(keep, y, a)), lower), (np.where(keep, ydot, t), ZERO)


@scipy_primitive("scipy.linalg.cho_solve")
def _cho_solve(c, b, *, lower=False):
    return sl.cho_solve((c, lower), b, check_finite=False)


@_overwrites(sl.cho_solve, overwrite_b=("b", ("c_and_lower", "b")), batch=((("c_and_lower", 0), 2), ("b", "1|2")))
def cho_solve(c_and_lower, b, overwrite_b=False, check_finite=True):
    """``scipy.linalg.cho_solve``: x with A x = b from ``cho_factor``'s ``(c, lower)``;
    differentiable w.r.t. ``b`` and the factor's triangle of ``c``."""
    c, lower = c_and_lower
    # (LAPACK's integer argument: SciPy reads an array's first entry, as cho_factor of a stack gives)
    lower = bool(np.ravel(lower)[0]) if np.ndim(lower) else bool(lower)
    _check_finite(check_finite, c, b)
    return _as_column(_cho_solve, c, b, lower=lower)


def _cho_lower(c, lower):
    """L with A = L Lᴴ, from the factor's triangle of c."""
    return _tri(c, True) if lower else _mH(_tri(c, False))


@rrule(_cho_solve)
def _cho_solve_rrule(c, b, *, lower=False):
    x = _cho_solve(c, b, lower=lower)

    def pullback(g):
        bbar = _cho_solve(c, g, lower=lower)  # A is Hermitian
        L = _cho_lower(c, lower)
        if _few_columns(x, c):  # (Ā = -B̄ Xᴴ: (Ā + Āᴴ) L by products with the columns, O(n²) each: lu_solve's)
            F, G = _columns_of_abar(bbar, x, 0, np.ndim(b) == 1)
            lbar = -(np.matmul(F, _mH(np.matmul(_mH(L), G))) + np.matmul(G, _mH(np.matmul(_mH(L), F))))
        else:
            abar = -_outer_or_mm(bbar, x, np.ndim(b) == 1)
            lbar = np.matmul(abar + _mH(abar), L)  # A = L Lᴴ
        cbar = _tri(lbar, True) if lower else _tri(_mH(lbar), False)
        return unbroadcast(cbar, np.shape(c)), unbroadcast(bbar, np.shape(b))

    return x, pullback


@frule(_cho_solve)
def _cho_solve_frule(primals, tangents, *, lower=False):
    (c, b), (tc, tb) = primals, tangents
    x = _cho_solve(c, b, lower=lower)
    if is_zero(tc) and is_zero(tb):
        return x, ZERO
    rhs = _zero_if(tb, x)
    if not is_zero(tc):
        L, dL = _cho_lower(c, lower), _cho_lower(tc, lower)
        if _few_columns(x, c):  # ((L̇ Lᴴ + L L̇ᴴ) x by products with x's columns: see lu_solve's)
            col = x[..., None] if np.ndim(x) == 1 else x
            ax = np.matmul(dL, np.matmul(_mH(L), col)) + np.matmul(L, np.matmul(_mH(dL), col))
            rhs = rhs - (ax[..., 0] if np.ndim(x) == 1 else ax)
        else:
            adot = np.matmul(dL, _mH(L))
            rhs = rhs - np.matmul(adot + _mH(adot), x)
    return x, _cho_solve(c, rhs, lower=lower)


# -- LU ---------------------------------------------------------------------------
# A = P L U, lu = (L - I) + U, piv LAPACK's row interchanges (an integer array:
# not differentiable). Tangent of the factors: F = L⁻¹ Pᵀ Ȧ U⁻¹,
# L̇ = L tril(F, -1), U̇ = triu(F) U.


def _row_order(piv, m=None):
    """perm with A[perm] = L U: Pᵀ x = x[perm], P x = x[argsort(perm)] (``m`` rows: as many
    as pivots unless given); of a stack's pivots (..., k), a row order per matrix (..., m)."""
    piv = np.asarray(bottom(piv))
    k = np.shape(piv)[-1]
    if piv.ndim == 1:  # (one matrix: the interchanges on a list, a few microseconds for a hundred rows)
        order = list(range(k if m is None else m))
        for i, j in enumerate(piv.tolist()):
            order[i], order[j] = order[j], order[i]
        return np.array(order)
    perm = np.array(np.broadcast_to(np.arange(k if m is None else m), np.shape(piv)[:-1] + (k if m is None else m,)))
    for i in range(k):  # (LAPACK's interchanges in order: row i with row piv[i], every matrix at once)
        j = piv[..., i:i + 1]
        here = perm[..., i:i + 1].copy()
        perm[..., i:i + 1] = np.take_along_axis(perm, j, axis=-1)
        np.put_along_axis(perm, j, here, axis=-1)
    return perm


def _rows(x, order):
    """x[..., order, :]: the rows of each matrix in ``order`` (one per matrix of a stack, broadcast
    against x's leading axes)."""
    if np.ndim(order) == 1:
        return x[..., order, :]
    idx = order[..., :, None]
    nd = max(np.ndim(x), idx.ndim)
    if np.ndim(x) < nd:
        x = np.reshape(x, (1,) * (nd - np.ndim(x)) + np.shape(x))
    return np.take_along_axis(x, idx.reshape((1,) * (nd - idx.ndim) + idx.shape), axis=-2)


def _unpermute(x, piv):  # P x (the rows of x: as many as x has, pivots or more)
    return _rows(x, np.argsort(_row_order(piv, np.shape(x)[-2]), axis=-1))


def _lu_parts(lu):
    """(L, U) from lu_factor's ``lu`` of an m x n matrix: L m x k with a unit diagonal,
    U k x n (k = min(m, n))."""
    m, n = np.shape(lu)[-2:]
    k = min(m, n)
    return _tri(lu[..., :, :k], True, 1) + np.eye(m, k, dtype=bottom(lu).dtype), _tri(lu[..., :k, :], False)


def _unit_lower_solve(lu, x, trans=0):  # L⁻¹ x from the unit lower triangle of lu
    return _solve_triangular(lu, x, lower=True, unit_diagonal=True, trans=trans)


def _upper_solve(lu, x, trans=0):  # U⁻¹ x
    return _solve_triangular(lu, x, lower=False, trans=trans)


@scipy_primitive("scipy.linalg.lu_factor")
def _lu_factor(a):
    return sl.lu_factor(a)


@_overwrites(sl.lu_factor, overwrite_a=("a", ("a",)), batch=(("a", 2),))
def lu_factor(a, overwrite_a=False, check_finite=True):
    """``scipy.linalg.lu_factor``: ``(lu, piv)``, differentiable w.r.t. ``a`` (square and
    rectangular matrices; of a stack, SciPy's list ``[lu, piv]``); ``piv`` is an integer array.

    >>> import numpy as np, mutagrad as mg
    >>> from mutagrad.scipy.linalg import lu_factor, lu_solve
    >>> a = np.array([[1.0, 2.0], [3.0, 4.0]])
    >>> mg.grad(lambda a: lu_solve(lu_factor(a), np.ones(2))[0])(a)  # -(A⁻ᵀ e₀) xᵀ
    array([[-2.,  2.],
           [ 1., -1.]])
    """
    lu, piv = _lu_factor(a)
    return [lu, piv] if np.ndim(a) > 2 else (lu, piv)


# A rectangular P A = L U: a tall one's L = [L₁; L₂] (A₁ = L₁ U square, A₂ = L₂ U, so
# dL₂ = (dA₂ - L₂ dU) U⁻¹), a wide one's U = [U₁ U₂] (A₁ = L U₁, A₂ = L U₂, so
# dU₂ = L⁻¹ (dA₂ - dL U₂)); the square part as above. Adjoints: a tall one's Ā₂ = L̄₂ U⁻ᴴ and
# Ū ← Ū - L₂ᴴ Ā₂; a wide one's Ā₂ = L⁻ᴴ Ū₂ and L̄ ← L̄ - Ā₂ U₂ᴴ.


def _lu_square_jvp(lu, t):
    """The tangent of square ``lu`` (packed: dL below the diagonal, dU on and above) from the
    tangent ``t`` of the permuted matrix: F = L⁻¹ t U⁻¹, dL = L tril(F), dU = triu(F) U."""
    L, U = _lu_parts(lu)
    f = _unit_lower_solve(lu, t)  # L⁻¹ Pᵀ Ȧ
    f = _mT(_upper_solve(lu, _mT(f), trans=1))  # ... U⁻¹
    return np.matmul(L, _tri(f, True, 1)) + np.matmul(_tri(f, False), U)


def _lu_square_vjp(lu, g):
    """The cotangent of the permuted matrix from packed cotangent ``g`` of square ``lu``."""
    L, U = _lu_parts(lu)
    m = _tri(np.matmul(_mH(L), _tri(g, True, 1)), True, 1) + _tri(np.matmul(_tri(g, False), _mH(U)), False)
    y = _unit_lower_solve(lu, m, trans=2)  # L⁻ᴴ m
    return _mH(_upper_solve(lu, _mH(y)))  # L⁻ᴴ m U⁻ᴴ


def _lu_jvp(lu, piv, t):
    m, n = np.shape(lu)[-2:]
    tp = _rows(t, _row_order(piv, m))  # Pᵀ Ȧ
    if m == n:
        return _lu_square_jvp(lu, tp)
    if m > n:
        lu1 = lu[..., :n, :]
        top = _lu_square_jvp(lu1, tp[..., :n, :])
        rest = tp[..., n:, :] - np.matmul(lu[..., n:, :], _tri(top, False))  # dA₂ - L₂ dU
        return np.concatenate([top, _mT(_upper_solve(lu1, _mT(rest), trans=1))], axis=-2)  # ... U⁻¹
    lu1 = lu[..., :, :m]
    top = _lu_square_jvp(lu1, tp[..., :, :m])
    rest = tp[..., :, m:] - np.matmul(_tri(top, True, 1), lu[..., :, m:])  # dA₂ - dL U₂
    return np.concatenate([top, _unit_lower_solve(lu1, rest)], axis=-1)


def _lu_vjp(lu, piv, g):
    m, n = np.shape(lu)[-2:]
    if m == n:
        ga = _lu_square_vjp(lu, g)
    elif m > n:
        lu1 = lu[..., :n, :]
        g2 = _mH(_upper_solve(lu1, _mH(g[..., n:, :])))  # Ā₂ = L̄₂ U⁻ᴴ
        g1 = g[..., :n, :] - _tri(np.matmul(_mH(lu[..., n:, :]), g2), False)  # Ū - L₂ᴴ Ā₂
        ga = np.concatenate([_lu_square_vjp(lu1, g1), g2], axis=-2)
    else:
        lu1 = lu[..., :, :m]
        g2 = _unit_lower_solve(lu1, g[..., :, m:], trans=2)  # Ā₂ = L⁻ᴴ Ū₂
        g1 = g[..., :, :m] - _tri(np.matmul(g2, _mH(lu[..., :, m:])), True, 1)  # L̄ - Ā₂ U₂ᴴ
        ga = np.concatenate([_lu_square_vjp(lu1, g1), g2], axis=-1)
    return _unpermute(ga, piv)


@rrule(_lu_factor)
def _lu_factor_rrule(a):
    lu, piv = _lu_factor(a)

    def pullback(g):
        gl = g[0]
        if is_zero(gl):
            return (ZERO,)
        return (_lu_vjp(lu, piv, gl),)

    return (lu, piv), pullback


@frule(_lu_factor)
def _lu_factor_frule(primals, tangents):
    (a,), (t,) = primals, tangents
    lu, piv = _lu_factor(a)
    return (lu, piv), (_lu_jvp(lu, piv, t), ZERO)


@_overwrites(sl.lu, overwrite_a=("a", ("a",)))
def lu(a, permute_l=False, overwrite_a=False, check_finite=True, p_indices=False):
    """``scipy.linalg.lu``: ``(P, L, U)`` with A = P L U (``(P L, U)`` with
    ``permute_l``; P as row indices, A = L[p] @ U, with ``p_indices``), from
    :func:`lu_factor` (square or rectangular matrices; leading axes are batches): SciPy's
    values, differentiable w.r.t. ``a``.

    >>> import numpy as np, mutagrad as mg
    >>> from mutagrad.scipy.linalg import lu
    >>> mg.grad(lambda a: lu(a)[2][1, 1])(np.array([[2.0, 1.0], [1.0, 3.0]]))  # U₁₁ = d - b c / a
    array([[ 0.25, -0.5 ],
           [-0.5 ,  1.  ]])
    """
    if not isinstance(a, Tracer) or np.size(a) == 0:  # (plain, or no entries: SciPy's own call)
        return sl.lu(bottom(a) if isinstance(a, Tracer) else a, permute_l=permute_l, overwrite_a=overwrite_a,
                     check_finite=check_finite, p_indices=p_indices)
    if np.ndim(a) < 2:
        raise ValueError("The input array must be at least two-dimensional.")
    factors, piv = _lu_factor(a)
    low, up = _lu_parts(factors)
    p = np.argsort(_row_order(piv, np.shape(factors)[-2]), axis=-1).astype(np.int32)  # A = (L U)[p] (SciPy's: int32)
    if permute_l:
        return _rows(low, p), up
    if p_indices:
        return p, low, up
    real = np.empty(0, bottom(a).dtype).real.dtype
    return np.eye(np.shape(p)[-1], dtype=real)[p], low, up


@scipy_primitive("scipy.linalg.lu_solve")
def _lu_solve(lu, piv, b, *, trans=0):
    return sl.lu_solve((lu, piv), b, trans=trans)


@_overwrites(sl.lu_solve, overwrite_b=("b", ("lu_and_piv", "b")),
              batch=((("lu_and_piv", 0), 2), (("lu_and_piv", 1), 1), ("b", "1|2")))
def lu_solve(lu_and_piv, b, trans=0, overwrite_b=False, check_finite=True):
    """``scipy.linalg.lu_solve``: x with op(A) x = b from ``lu_factor``'s
    ``(lu, piv)``; differentiable w.r.t. ``b`` and ``lu``."""
    lu, piv = lu_and_piv
    trans = _trans_of(trans, sl.lu_solve)
    if _one_vector_for_a_stack(lu, b) or (np.ndim(b) == 1 and np.ndim(piv) > 1):
        return _lu_solve(lu, piv, np.expand_dims(b, -1), trans=trans)[..., 0]
    return _lu_solve(lu, piv, b, trans=trans)


def _lu_matrix_tangent(lu, piv, tlu):
    """Ȧ = P (L̇ U + L U̇) for the factors' tangent ``tlu``."""
    L, U = _lu_parts(lu)
    return _unpermute(np.matmul(_tri(tlu, True, 1), U) + np.matmul(L, _tri(tlu, False)), piv)


def _few_columns(x, lu) -> bool:
    """Whether right-hand sides ``x`` (columns of a matrix, or a vector) are few enough against lu's n that
    products with them (n² per column) beat forming an n x n matrix from them (n³)."""
    return np.ndim(x) == 1 or 2 * np.shape(x)[-1] <= np.shape(lu)[-1]


def _lu_tangent_times(lu, piv, tlu, x, trans):
    """op(Ȧ) x for Ȧ = P (L̇ U + L U̇), by products with x's columns (O(n²) each, not Ȧ's O(n³): an LU
    reused over a hundred time steps cost 240x its solves, the cranknicolson tester)."""
    L, U = _lu_parts(lu)
    dL, dU = _tri(tlu, True, 1), _tri(tlu, False)
    col = x[..., None] if np.ndim(x) == 1 else x
    if trans == 0:
        r = _unpermute(np.matmul(dL, np.matmul(U, col)) + np.matmul(L, np.matmul(dU, col)), piv)
    else:
        t = _mT if trans == 1 else _mH
        z = _rows(col, _row_order(piv, np.shape(col)[-2]))  # Pᵀ x
        r = np.matmul(t(U), np.matmul(t(dL), z)) + np.matmul(t(dU), np.matmul(t(L), z))
    return r[..., 0] if np.ndim(x) == 1 else r


@rrule(_lu_solve)
def _lu_solve_rrule(lu, piv, b, *, trans=0):
    x = _lu_solve(lu, piv, b, trans=trans)

    def pullback(g):
        solve = lambda rhs, tr: _lu_solve(lu, piv, rhs, trans=tr)  # noqa: E731
        if _few_columns(x, lu):
            # (Ā = -F Gᴴ, of rank the columns': the factors' cotangent by products with them, O(n²) per column,
            # not Ā's O(n³) products: an LU reused over a hundred steps cost 240x its solves, cranknicolson)
            bbar = _adjoint_solve(solve, g, trans)
            F, G = _columns_of_abar(bbar, x, trans, np.ndim(b) == 1)
            pf = -_rows(F, _row_order(piv, np.shape(F)[-2]))  # -Pᵀ F
            ug = np.matmul(_tri(lu, False), G)  # U G
            lpf = np.matmul(_mH(_tri(lu, True, 1)), pf) + pf  # Lᴴ (-Pᵀ F), L's diagonal 1
            lubar = np.where(_tri_mask(np.shape(lu), True, 1), np.matmul(pf, _mH(ug)), np.matmul(lpf, _mH(G)))
            return unbroadcast(lubar, np.shape(lu)), NoTangent(), unbroadcast(bbar, np.shape(b))
        abar, bbar = _solve_pullback(solve, g, x, trans, np.ndim(b) == 1)
        n = np.shape(lu)[-1]  # (Ā of the matrices of lu and piv: a broadcast b's summed away)
        abar = unbroadcast(abar, np.broadcast_shapes(np.shape(lu)[:-2], np.shape(piv)[:-1]) + (n, n))
        L, U = _lu_parts(lu)
        pa = _rows(abar, _row_order(piv))  # Pᵀ Ā
        lubar = _tri(np.matmul(pa, _mH(U)), True, 1) + _tri(np.matmul(_mH(L), pa), False)
        return unbroadcast(lubar, np.shape(lu)), NoTangent(), unbroadcast(bbar, np.shape(b))

    return x, pullback


@frule(_lu_solve)
def _lu_solve_frule(primals, tangents, *, trans=0):
    (lu, piv, b), (tlu, _, tb) = primals, tangents
    x = _lu_solve(lu, piv, b, trans=trans)
    if is_zero(tlu) and is_zero(tb):
        return x, ZERO
    rhs = _zero_if(tb, x)
    if not is_zero(tlu):
        rhs = rhs - (_lu_tangent_times(lu, piv, tlu, x, trans) if _few_columns(x, lu)
                     else np.matmul(_op(_lu_matrix_tangent(lu, piv, tlu), trans), x))
    return x, _lu_solve(lu, piv, rhs, trans=trans)


# -- Sylvester equation, expm, sqrtm -------------------------------------------------


@scipy_primitive("scipy.linalg.solve_sylvester")
def _solve_sylvester(a, b, q):
    return sl.solve_sylvester(a, b, q)


def solve_sylvester(a, b, q):
    """``scipy.linalg.solve_sylvester``: X with A X + X B = Q, differentiable
    w.r.t. all three.

    >>> import numpy as np, mutagrad as mg
    >>> from mutagrad.scipy.linalg import solve_sylvester
    >>> mg.grad(lambda q: solve_sylvester(np.eye(2), np.eye(2), q).sum())(np.ones((2, 2)))
    array([[0.5, 0.5],
           [0.5, 0.5]])
    """
    _refuse_real_schur_sylvester(a, b, q)
    return _solve_sylvester(a, b, q)


def _refuse_real_schur_sylvester(a, b, q):
    """SciPy solves A X + X B = Q with the real Schur forms of a real A and Bᴴ, and hands them
    to the complex LAPACK solver (ztrsyl) when any of the three is complex, which takes their
    2 x 2 blocks (complex eigenvalues) for a triangle: its X does not solve the equation
    (residuals of 0.3 to 500 on random 4 x 4 matrices), and has no derivative that would.
    Refused for traced arguments, as for the Lyapunov solvers (_refuse_real_schur_of_complex)."""
    if not _has_tracer((a, b, q)):
        return
    mats = [np.asarray(bottom(m)) for m in (a, b, q)]
    if not any(np.iscomplexobj(m) for m in mats):
        return
    blocked = [name for name, m in (("`a`", mats[0]), ("`b`", mats[1])) if not np.iscomplexobj(m) and _schur_blocks(m)]
    if not blocked:
        return
    from ...errors import UnsupportedInputError

    raise UnsupportedInputError(
        f"scipy.linalg.solve_sylvester with a real {' and '.join(blocked)} of complex eigenvalues and a complex "
        f"argument at {user_line()}: SciPy solves it with the real Schur form, which its complex solver takes for "
        "a triangular one, so the X it returns does not solve the equation, and mutagrad has no derivative of "
        "it. Pass the real matrices as complex ones (a.astype(complex)): SciPy then solves the equation, and "
        "mutagrad differentiates it.")


@rrule(_solve_sylvester)
def _solve_sylvester_rrule(a, b, q):
    x = _solve_sylvester(a, b, q)

    def pullback(g):
        qbar = _solve_sylvester(_mH(a), _mH(b), g)  # (stacks broadcast: each cotangent summed to its argument)
        return (Thunk(lambda: _unb(-np.matmul(qbar, _mH(x)), np.shape(a))),
                Thunk(lambda: _unb(-np.matmul(_mH(x), qbar), np.shape(b))), _unb(qbar, np.shape(q)))

    return x, pullback


@frule(_solve_sylvester)
def _solve_sylvester_frule(primals, tangents):
    (a, b, q), (ta, tb, tq) = primals, tangents
    x = _solve_sylvester(a, b, q)
    if is_zero(ta) and is_zero(tb) and is_zero(tq):
        return x, ZERO
    rhs = _zero_if(tq, x)
    if not is_zero(ta):
        rhs = rhs - np.matmul(ta, x)
    if not is_zero(tb):
        rhs = rhs - np.matmul(x, tb)
    return x, _solve_sylvester(a, b, rhs)


@scipy_primitive("scipy.linalg.expm")
def _expm(a):
    return sl.expm(a)


def expm(A):
    """``scipy.linalg.expm``: the matrix exponential.

    >>> import numpy as np, mutagrad as mg
    >>> from mutagrad.scipy.linalg import expm
    >>> float(mg.grad(lambda t: expm(t * np.eye(2))[0, 0])(0.0))
    1.0
    """
    return _expm(A)


def _frechet(f, a, e):
    """L(A, E), the derivative of the primary matrix function ``f`` (a primitive) at A in
    direction E, from f([[A, E], [0, A]]) = [[f(A), L(A, E)], [0, f(A)]] (every order: ``f``
    differentiates itself)."""
    n = np.shape(a)[-1]
    top = np.concatenate([a, e], axis=-1)
    bottom_row = np.concatenate([np.zeros_like(e), a], axis=-1)
    return f(np.concatenate([top, bottom_row], axis=-2))[..., :n, n:]


def _def_matrix_function(f):
    """Both rules of the primary matrix function ``f`` by its Fréchet derivative L(A, E) (the
    reverse rule by its symmetry under the trace, below). Where f(A) is real for a real A, so is
    L(A, E) for a real E: SciPy's f of the block matrix may come back complex (logm of a rotation
    near π, Im ~ 1e-10), whose imaginary part is rounding."""

    def real_like(y, a, e, d):
        if (np.iscomplexobj(bottom(d)) and not np.iscomplexobj(bottom(y)) and not np.iscomplexobj(bottom(a))
                and not np.iscomplexobj(bottom(e))):
            return np.real(d)
        return d

    def rule(a):
        y = f(a)
        # Re tr(ḡᵀ L(A, E)) = Re tr(L(A, gᴴ)ᵀ... : the Fréchet derivative is symmetric under tr(X L(A, E)) =
        # tr(L(A, X) E) (its divided differences are), so Ā = L(A, gᴴ)ᴴ. (L(Aᴴ, ḡ) equals it only where
        # f(z̄) = conj f(z): not on logm's branch cut, a real matrix with a negative eigenvalue)
        return y, lambda g: (real_like(y, a, g, _mH(_frechet(f, a, _mH(g)))),)

    def forward(primals, tangents):
        y = f(primals[0])
        return y, real_like(y, primals[0], tangents[0], _frechet(f, primals[0], tangents[0]))

    rrule(f)(rule)
    frule(f)(forward)


_def_matrix_function(_expm)


@scipy_primitive("scipy.linalg.logm")
def _logm(a):
    return sl.logm(a)


def logm(A, disp=True):
    """``scipy.linalg.logm``: the principal matrix logarithm.

    Derivative: the Fréchet derivative L(A, E), the top-right block of
    logm([[A, E], [0, A]]) (the same method as expm's), so repeated eigenvalues
    (the Hencky strain at F = I, a rotation's log) need no divided differences
    of an eigendecomposition; every order is available.

    >>> import numpy as np, mutagrad as mg
    >>> from mutagrad.scipy.linalg import logm
    >>> float(mg.grad(lambda t: logm(t * np.eye(2))[0, 0])(2.0))
    0.5
    """
    if not disp:
        raise NotImplementedError("mutagrad.scipy.linalg.logm: disp=False (SciPy's error estimate) is not "
                                  "supported; call it with disp=True.")
    return _logm(A)


_def_matrix_function(_logm)


@scipy_primitive("scipy.linalg.sqrtm")
def _sqrtm(a):
    return sl.sqrtm(a)


def sqrtm(A, disp=True, blocksize=64):
    """``scipy.linalg.sqrtm``: the principal matrix square root X (X X = A).

    Derivative: X Ẋ + Ẋ X = Ȧ, solved with :func:`solve_sylvester` (itself
    differentiable, so every order is available).

    >>> import numpy as np, mutagrad as mg
    >>> from mutagrad.scipy.linalg import sqrtm
    >>> float(mg.grad(lambda t: sqrtm(t * np.eye(2))[0, 0])(4.0))
    0.25
    """
    return _sqrtm(A)


@rrule(_sqrtm)
def _sqrtm_rrule(a):
    x = _sqrtm(a)
    return x, lambda g: (_solve_sylvester(_mH(x), _mH(x), g),)


@frule(_sqrtm)
def _sqrtm_frule(primals, tangents):
    (a,), (t,) = primals, tangents
    x = _sqrtm(a)
    return x, _solve_sylvester(x, x, t)


# -- the polar decomposition: implicit differentiation -----------------------------------------
# side="right", a = u p with a (m, n) tall or square of full rank, u's columns orthonormal, p Hermitian
# positive definite; side="left", a = p u, is the right one of aᴴ (uᴴ, p). With M = uᴴ ȧ and Ω = uᴴ u̇
# (skew-Hermitian), uᴴ ȧ = Ω p + ṗ, so Ω solves the Lyapunov equation p Ω + Ω p = M - Mᴴ, which
# has one solution where p is positive definite: repeated singular values included (a rotation, a
# rest pose: the ARAP tester), where the vectors of an SVD have none. u̇ = u Ω + (ȧ - u M) p⁻¹ (the
# part of ȧ outside u's columns: 0 for a square a), ṗ = M - Ω p (Hermitian; made so to rounding).
# Transposed (inner products Re tr(Xᴴ Y)): G = uᴴ ū - p̄ p (p̄ its Hermitian part), Y = lyap(p, G),
# R = Y - Yᴴ - uᴴ ū p⁻¹ + p̄, ā = u R + ū p⁻¹. Solved by solve_sylvester and np.linalg.solve, both
# differentiated: every order where p is definite.


@scipy_primitive("scipy.linalg.polar")
def _polar(a, *, side="right"):
    return sl.polar(a, side)


def polar(a, side="right"):
    """``scipy.linalg.polar``: a = u p (side="right") or p u (side="left"), u with orthonormal columns
    (rows), p Hermitian positive semidefinite.

    Derivative: of a matrix of full rank, by the Lyapunov equation its tangent solves, also at
    repeated singular values (a tall matrix's p on the left, which is singular, as u p uᴴ of the
    right one's, a wide one's on the right as uᴴ p u); of a rank-deficient matrix, whose u is not
    unique, a NotImplementedTangent.

    >>> import numpy as np, mutagrad as mg, mutagrad.numpy as mnp
    >>> from mutagrad.scipy.linalg import polar
    >>> rot = lambda t: mnp.array([[np.cos(t), -np.sin(t)], [np.sin(t), np.cos(t)]])
    >>> float(mg.grad(lambda t: polar(2.0 * rot(t))[0][1, 0])(0.3))  # u is the rotation: d sin(t) / dt
    0.955336489125606
    """
    if side not in ("right", "left"):
        raise ValueError("`side` must be either 'right' or 'left'")
    shape = np.shape(bottom(a))
    if isinstance(a, Tracer) and len(shape) == 2 and (shape[0] > shape[1] if side == "left" else shape[0] < shape[1]):
        # (the other side's p is singular there, but u is the same: p from it, u p uᴴ or uᴴ p u: regress86)
        u, p = _polar(a, side="right" if side == "left" else "left")
        return (u, np.matmul(np.matmul(u, p), _mH(u))) if side == "left" else (u, np.matmul(np.matmul(_mH(u), p), u))
    return _polar(a, side=side)


def _polar_refusal(p):
    """The NotImplementedTangent of a polar decomposition whose ``p`` is not definite (of a rank-deficient matrix),
    or None; p's eigenvalues are the matrix's singular values."""
    pb = np.asarray(bottom(p))
    s = np.linalg.eigvalsh(pb) if pb.size else np.ones(1)
    if s[0] <= max(pb.shape) * np.finfo(pb.dtype if pb.dtype.kind in "fc" else float).eps * s[-1] or s[-1] == 0:
        return not_implemented("scipy.linalg.polar of a rank-deficient matrix: its u is not unique (any rotation "
                               "of the null space's columns will do), so it has no derivative there")
    return None


def _polar_parts(y, side):
    """(u_b, p) from polar's result ``y``: the right polar decomposition b = u_b p of b = a (side="right") or aᴴ
    (side="left")."""
    u, p = y
    return (u, p) if side == "right" else (_mH(u), p)


def _times_p_inv(x, p):
    return _mH(np.linalg.solve(p, _mH(x)))  # x p⁻¹ (p Hermitian)


@rrule(_polar)
def _polar_rrule(a, *, side="right"):
    y = _polar(a, side=side)
    bad = _polar_refusal(y[1])

    def pullback(g):
        gu, gp = g
        if bad is not None:
            return (ZERO if is_zero(gu) and is_zero(gp) else bad,)
        u, p = _polar_parts(y, side)
        ub = ZERO if is_zero(gu) else (gu if side == "right" else _mH(gu))
        pb = ZERO if is_zero(gp) else (gp + _mH(gp)) / 2
        uh_ub = ZERO if is_zero(ub) else np.matmul(_mH(u), ub)
        G = (uh_ub if not is_zero(uh_ub) else 0.0) - (np.matmul(pb, p) if not is_zero(pb) else 0.0)
        Y = _solve_sylvester(p, p, G + np.zeros_like(p))
        R = Y - _mH(Y)
        if not is_zero(uh_ub):
            R = R - _times_p_inv(uh_ub, p)
        if not is_zero(pb):
            R = R + pb
        gb = np.matmul(u, R) + (0.0 if is_zero(ub) else _times_p_inv(ub, p))
        return (gb if side == "right" else _mH(gb),)

    return y, pullback


@frule(_polar)
def _polar_frule(primals, tangents, *, side="right"):
    (a,), (t,) = primals, tangents
    y = _polar(a, side=side)
    bad = _polar_refusal(y[1])
    if bad is not None:
        return y, bad
    u, p = _polar_parts(y, side)
    tb = t if side == "right" else _mH(t)
    M = np.matmul(_mH(u), tb)
    omega = _solve_sylvester(p, p, M - _mH(M))
    du = np.matmul(u, omega) + _times_p_inv(tb - np.matmul(u, M), p)
    dp = M - np.matmul(omega, p)
    dp = (dp + _mH(dp)) / 2
    return y, ((du if side == "right" else _mH(du)), dp)


# -- Lyapunov and Riccati equations: implicit differentiation -------------------------------
# Each solution X is defined by an equation in X and the inputs. Differentiated, it is linear
# in Ẋ: the tangent solves an equation of the same kind (Lyapunov, Stein) whose right-hand side
# collects the inputs' tangents, and the cotangent solves its adjoint (the matrices conjugate-
# transposed), from whose solution Y every input's cotangent is a product. Those equations are
# solved by the Lyapunov primitives below (SciPy's solvers, differentiable in turn: every order),
# the gains by np.linalg.solve. Inner products are Re tr(Uᴴ V) (the convention above).
#
# continuous Lyapunov, A X + X Aᴴ = Q:
#   Ẋ = clyap(A, Q̇ - Ȧ X - X Ȧᴴ);        Y = clyap(Aᴴ, X̄): Q̄ = Y, Ā = -(Y Xᴴ + Yᴴ X)
# discrete Lyapunov (Stein), A X Aᴴ - X + Q = 0:
#   Ẋ = dlyap(A, Q̇ + Ȧ X Aᴴ + A X Ȧᴴ);     Y = dlyap(Aᴴ, X̄): Q̄ = Y, Ā = Y A Xᴴ + Yᴴ A X
#
# Riccati equations, with the gain K and the closed loop A_c = A - B K (stable at the stabilizing
# solution SciPy returns, so the equations below have one solution):
# continuous, Aᴴ X E + Eᴴ X A - (Eᴴ X B + S) R⁻¹ (Bᴴ X E + Sᴴ) + Q = 0, K = R⁻¹ (Bᴴ X E + Sᴴ):
#   A_cᴴ Ẋ E + Eᴴ Ẋ A_c = -(W + Wᴴ + Kᴴ Ṙ K + Q̇),  W = Eᴴ X (Ȧ - Ḃ K) + Ėᴴ X A_c - Ṡ K;
#   A_c Y Eᴴ + E Y A_cᴴ = X̄:  Q̄ = -Y, R̄ = -K Y Kᴴ, Ā = -2 X E Y, B̄ = 2 X E Y Kᴴ,
#   Ē = -2 X A_c Y, S̄ = 2 Y Kᴴ
# discrete, Aᴴ X A - Eᴴ X E - (Aᴴ X B + S) (R + Bᴴ X B)⁻¹ (Bᴴ X A + Sᴴ) + Q = 0,
# K = (R + Bᴴ X B)⁻¹ (Bᴴ X A + Sᴴ):
#   Eᴴ Ẋ E - A_cᴴ Ẋ A_c = W + Wᴴ + Kᴴ Ṙ K + Q̇,  W = A_cᴴ X (Ȧ - Ḃ K) - Eᴴ X Ė - Ṡ K;
#   E Y Eᴴ - A_c Y A_cᴴ = X̄:  Q̄ = Y, R̄ = K Y Kᴴ, Ā = 2 X A_c Y, B̄ = -2 X A_c Y Kᴴ,
#   Ē = -2 X E Y, S̄ = -2 Y Kᴴ
# (E: multiplied by E⁻ᴴ and E⁻¹, the generalized equations are Lyapunov and Stein equations of
# A_c E⁻¹.) SciPy requires Q and R Hermitian (it raises beyond rounding) and returns (X + Xᴴ)/2:
# the derivative is that of the function of their Hermitian parts, which SciPy's is where it is
# defined. Ẋ is Hermitian, X̄ enters by its Hermitian part (so Y is Hermitian, as the
# cotangents above assume), and Q̄ and R̄ are Hermitian. X is Hermitian exactly (SciPy's
# symmetrization), and its tangent is made so.


def _herm(x):
    return (x + _mH(x)) / 2


def _tangent_sum(*terms):
    """The sum of ``f(t)`` over the (tangent t, f) pairs whose tangent is not zero (None if all are)."""
    out = None
    for t, f in terms:
        if not is_zero(t):
            out = f(t) if out is None else out + f(t)
    return out


def _lists_as_arrays(*xs):
    """A list holding traced numbers as an array (one positional argument of a primitive, whose
    rules give it one cotangent)."""
    from ...numpy import asarray

    return tuple(asarray(x) if isinstance(x, (list, tuple)) and _has_tracer(x) else x for x in xs)


def _at_least_2d(*xs):  # (as SciPy takes them: a number is a 1 x 1 matrix)
    return tuple(x if x is None or np.ndim(x) >= 2 else np.atleast_2d(x) for x in _lists_as_arrays(*xs))


def _schur_blocks(m) -> bool:
    """Whether the real Schur form of a real matrix ``m`` (of any matrix of a stack) has a 2 x 2
    block: complex eigenvalues, which SciPy's complex triangular solver takes for a triangle."""
    return any(np.any(np.diagonal(sl.schur(one, output="real")[0], -1) != 0)
               for one in np.reshape(m, (-1,) + np.shape(m)[-2:]))


def _refuse_real_schur_of_complex(name, a, q, method=None):
    """SciPy solves a Lyapunov equation of a real ``a`` and a complex ``q`` with a's real Schur
    form (solve_discrete_lyapunov: for method "bilinear", SciPy's choice from 10 x 10 on), whose
    2 x 2 blocks (complex eigenvalues) the complex LAPACK solver (ztrsyl) takes for a triangle:
    its X does not solve the equation, and has no derivative that would. Refused for traced
    arguments (a real ``a`` of real eigenvalues is solved right, and differentiated)."""
    if not _has_tracer((a, q)) or np.iscomplexobj(bottom(a)) or not np.iscomplexobj(bottom(q)):
        return
    if name == "solve_discrete_lyapunov":
        if method is None:
            method = "direct" if np.shape(a)[-1] < 10 else "bilinear"
        if not isinstance(method, str) or method.lower() != "bilinear":
            return  # (direct: a linear system of a's Kronecker product; another method: SciPy's error)
    m, what = np.asarray(bottom(a)), "`a`"
    if name == "solve_discrete_lyapunov":  # (bilinear: SciPy's continuous equation of B = (Aᴴ - I)(Aᴴ + I)⁻¹)
        eye = np.eye(m.shape[-1])
        m = _mT(np.matmul(_mT(m) - eye, np.linalg.inv(_mT(m) + eye)))
        what = "(Aᴴ - I)(Aᴴ + I)⁻¹ (method='bilinear', SciPy's choice from 10 x 10 on)"
    if not _schur_blocks(m):
        return
    from ...errors import UnsupportedInputError

    raise UnsupportedInputError(
        f"scipy.linalg.{name} of a real `a` with complex eigenvalues and a complex `q` at {user_line()}: "
        f"SciPy solves it with the real Schur form of {what}, which its complex solver takes for a "
        "triangular one, so the X it returns does not solve the equation, and mutagrad has no derivative "
        "of it. Pass a complex `a` (a.astype(complex)): SciPy then solves the equation, and mutagrad "
        "differentiates it" + ("; or method='direct'." if name == "solve_discrete_lyapunov" else "."))


@scipy_primitive("scipy.linalg.solve_continuous_lyapunov")
def _solve_continuous_lyapunov(a, q):
    return sl.solve_continuous_lyapunov(a, q)


def solve_continuous_lyapunov(a, q):
    """``scipy.linalg.solve_continuous_lyapunov``: X with A X + X Aᴴ = Q, differentiable
    w.r.t. both (Ẋ solves the same equation with Q̇ - Ȧ X - X Ȧᴴ). A real ``a`` with complex
    eigenvalues and a complex ``q``, which SciPy does not solve right, is refused (NoRuleError):
    pass a complex ``a``.

    >>> import numpy as np, mutagrad as mg
    >>> from mutagrad.scipy.linalg import solve_continuous_lyapunov
    >>> float(mg.grad(lambda t: solve_continuous_lyapunov(-t * np.eye(2), np.eye(2))[0, 0])(1.0))  # x = -1/(2t)
    0.5
    """
    a, q = _at_least_2d(a, q)
    _refuse_real_schur_of_complex("solve_continuous_lyapunov", a, q)
    return _solve_continuous_lyapunov(a, q)


solve_lyapunov = solve_continuous_lyapunov  # (SciPy's other name of it)


@rrule(_solve_continuous_lyapunov)
def _solve_continuous_lyapunov_rrule(a, q):
    x = _solve_continuous_lyapunov(a, q)

    def pullback(g):
        y = _solve_continuous_lyapunov(_mH(a), g)
        return (Thunk(lambda: _unb(-(np.matmul(y, _mH(x)) + np.matmul(_mH(y), x)), np.shape(a))),
                _unb(y, np.shape(q)))

    return x, pullback


@frule(_solve_continuous_lyapunov)
def _solve_continuous_lyapunov_frule(primals, tangents):
    (a, q), (ta, tq) = primals, tangents
    x = _solve_continuous_lyapunov(a, q)
    rhs = _tangent_sum((tq, lambda t: t), (ta, lambda t: -(np.matmul(t, x) + np.matmul(x, _mH(t)))))
    return x, ZERO if rhs is None else _solve_continuous_lyapunov(a, rhs)


@scipy_primitive("scipy.linalg.solve_discrete_lyapunov")
def _solve_discrete_lyapunov(a, q, *, method=None):
    return sl.solve_discrete_lyapunov(a, q, method=method)


def solve_discrete_lyapunov(a, q, method=None):
    """``scipy.linalg.solve_discrete_lyapunov``: X with A X Aᴴ - X + Q = 0, differentiable
    w.r.t. both (Ẋ solves the same equation with Q̇ + Ȧ X Aᴴ + A X Ȧᴴ), with SciPy's
    ``method`` for every solve. As in :func:`solve_continuous_lyapunov`, a real ``a`` with
    complex eigenvalues and a complex ``q`` are refused for method "bilinear" (SciPy's from
    10 x 10 on).

    >>> import numpy as np, mutagrad as mg
    >>> from mutagrad.scipy.linalg import solve_discrete_lyapunov
    >>> float(mg.grad(lambda t: solve_discrete_lyapunov(t * np.eye(2), np.eye(2))[0, 0])(0.5))  # 1/(1-t²)
    1.7777777777777777
    """
    a, q = _lists_as_arrays(a, q)
    _refuse_real_schur_of_complex("solve_discrete_lyapunov", a, q, method)
    return _solve_discrete_lyapunov(a, q, method=method)


@rrule(_solve_discrete_lyapunov)
def _solve_discrete_lyapunov_rrule(a, q, *, method=None):
    x = _solve_discrete_lyapunov(a, q, method=method)

    def pullback(g):
        y = _solve_discrete_lyapunov(_mH(a), g, method=method)
        return (Thunk(lambda: _unb(np.matmul(y, np.matmul(a, _mH(x))) + np.matmul(_mH(y), np.matmul(a, x)),
                                   np.shape(a))),
                _unb(y, np.shape(q)))

    return x, pullback


@frule(_solve_discrete_lyapunov)
def _solve_discrete_lyapunov_frule(primals, tangents, *, method=None):
    (a, q), (ta, tq) = primals, tangents
    x = _solve_discrete_lyapunov(a, q, method=method)

    def from_a(t):
        tx = np.matmul(t, np.matmul(x, _mH(a)))
        return tx + np.matmul(a, np.matmul(x, _mH(t)))

    rhs = _tangent_sum((tq, lambda t: t), (ta, from_a))
    return x, ZERO if rhs is None else _solve_discrete_lyapunov(a, rhs, method=method)


def _are_gain(x, a, b, r, e, s, discrete):
    """The gain K and the closed loop A_c = A - B K of a Riccati solution X (see above)."""
    bh = _mH(b)
    if discrete:
        n, lhs = np.matmul(bh, np.matmul(x, a)), r + np.matmul(bh, np.matmul(x, b))
    else:
        n, lhs = np.matmul(bh, x if e is None else np.matmul(x, e)), r
    if s is not None:
        n = n + _mH(s)
    k = np.linalg.solve(lhs, n)
    return k, a - np.matmul(b, k)


def _riccati_tangent(k, ac, e, tangents, w_of_a, w_of_e, discrete):
    """Ẋ: the Lyapunov (continuous) or Stein (discrete) equation above, W = w_of_a(Ȧ - Ḃ K) +
    w_of_e(Ė) - Ṡ K."""
    ta, tb, tq, tr, te, ts = tangents
    w = _tangent_sum((ta, w_of_a), (tb, lambda t: -w_of_a(np.matmul(t, k))), (te, w_of_e),
                     (ts, lambda t: -np.matmul(t, k)))
    c = _tangent_sum((tq, lambda t: t), (tr, lambda t: np.matmul(_mH(k), np.matmul(t, k))))
    if w is not None:
        c = w + _mH(w) if c is None else c + w + _mH(w)
    if c is None:
        return ZERO
    if e is None:
        m = _mH(ac)
    else:  # (times E⁻ᴴ on the left and E⁻¹ on the right)
        ei = np.linalg.inv(e)
        m, c = _mH(np.matmul(ac, ei)), np.matmul(_mH(ei), np.matmul(c, ei))
    if discrete:  # Ẋ - m Ẋ mᴴ = C
        return _herm(_solve_discrete_lyapunov(m, c))
    return _herm(_solve_continuous_lyapunov(m, -c))  # m Ẋ + Ẋ mᴴ = -C


def _riccati_adjoint(g, ac, e, discrete):
    """Y of the adjoint equation above, for the cotangent ``g`` of X (its Hermitian part)."""
    g = _herm(g)
    if e is not None:  # (times E⁻¹ on the left and E⁻ᴴ on the right)
        ei = np.linalg.inv(e)
        ac, g = np.matmul(ei, ac), np.matmul(ei, np.matmul(g, _mH(ei)))
    return (_solve_discrete_lyapunov if discrete else _solve_continuous_lyapunov)(ac, g)


def _riccati_cotangents(x, y, k, ac, args, discrete):
    """(Ā, B̄, Q̄, R̄, Ē, S̄) from Y (see above). The discrete equation's, with sign = 1 and
    P = X A_c Y, P' = X E Y: Ā = 2 P, B̄ = -2 P Kᴴ, Q̄ = Y, R̄ = K Y Kᴴ, Ē = -2 P',
    S̄ = -2 Y Kᴴ; the continuous one's the same with sign = -1 (all but Ē) and P, P' exchanged."""
    a, b, q, r, e, s = args
    sign = 1 if discrete else -1
    xe = x if e is None else np.matmul(x, e)
    xac = np.matmul(x, ac)
    p, p_e = (xac, xe) if discrete else (xe, xac)
    kh = _mH(k)
    return (Thunk(lambda: _unb(2 * sign * np.matmul(p, y), np.shape(a))),
            Thunk(lambda: _unb(-2 * sign * np.matmul(p, np.matmul(y, kh)), np.shape(b))),
            _unb(sign * y, np.shape(q)),
            Thunk(lambda: _unb(sign * np.matmul(k, np.matmul(y, kh)), np.shape(r))),
            NoTangent() if e is None else Thunk(lambda: _unb(-2 * np.matmul(p_e, y), np.shape(e))),
            NoTangent() if s is None else Thunk(lambda: _unb(-2 * sign * np.matmul(y, kh), np.shape(s))))


def _refuse_balanced_e(name, args, e, balanced):
    """With ``e`` and ``balanced=True``, SciPy 1.17 balances the pencil (a diagonal scaling D of
    its rows and columns) but then multiplies the balanced stable basis by the unbalanced E: where
    D does not commute with E, the X it returns does not solve the equation (of random 3 x 3
    problems, a quarter raise LinAlgError and one in 25 return such an X, residuals up to 1e5).
    Its derivative would not be the equation's: refused for traced arguments where SciPy's X
    does not solve the equation (its residual beyond 1e-8 of the terms' size); allowed where it does."""
    if e is None or not balanced or not _has_tracer(args):
        return
    from ...errors import UnsupportedInputError

    plain = [None if v is None else np.asarray(bottom(v)) for v in args]
    with np.errstate(all="ignore"):
        x = getattr(sl, name)(*plain, balanced=True)  # (SciPy's LinAlgError: raised as in a plain call)
        if _solves_are(x, *plain, discrete=name == "solve_discrete_are"):
            return
    raise UnsupportedInputError(
        f"scipy.linalg.{name} with `e` and balanced=True of traced matrices at {user_line()}: SciPy balances "
        "the matrix pencil but corrects its stable basis with the unbalanced E, and for these matrices the X "
        "it returns does not solve the equation, so mutagrad has no derivative of it. Pass balanced=False: "
        "SciPy then solves the generalized equation, and mutagrad differentiates it w.r.t. every matrix, e "
        "included.")


def _solves_are(x, a, b, q, r, e, s, discrete):
    """Whether ``x`` solves the (generalized) continuous or discrete algebraic Riccati equation,
    its residual within 1e-8 of the size of its terms."""
    h = lambda m: np.conj(np.swapaxes(m, -1, -2))
    s = np.zeros(np.shape(b), np.result_type(b)) if s is None else s
    if discrete:
        t1, t2 = h(a) @ x @ a, h(e) @ x @ e
        g = h(a) @ x @ b + s
        t3 = g @ np.linalg.solve(r + h(b) @ x @ b, h(g))
        res = t1 - t2 - t3 + q
    else:
        t1 = h(a) @ x @ e
        t2 = h(t1)
        g = h(e) @ x @ b + s
        t3 = g @ np.linalg.solve(r, h(g))
        res = t1 + t2 - t3 + q
    scale = sum(np.linalg.norm(t) for t in (t1, t2, t3, q))
    return bool(np.all(np.isfinite(res)) and np.linalg.norm(res) <= 1e-8 * max(scale, np.finfo(float).tiny))


@scipy_primitive("scipy.linalg.solve_continuous_are")
def _solve_continuous_are(a, b, q, r, e, s, *, balanced=True):
    return sl.solve_continuous_are(a, b, q, r, e, s, balanced)


def solve_continuous_are(a, b, q, r, e=None, s=None, balanced=True):
    """``scipy.linalg.solve_continuous_are``: the stabilizing X of
    Aᴴ X E + Eᴴ X A - (Eᴴ X B + S) R⁻¹ (Bᴴ X E + Sᴴ) + Q = 0 (E = I and S = 0 when omitted),
    differentiable w.r.t. every matrix: Ẋ solves a Lyapunov equation of the closed loop
    A - B K, K = R⁻¹ (Bᴴ X E + Sᴴ). Q and R are Hermitian (SciPy checks): their cotangents are
    too. ``balanced`` is SciPy's; with ``e`` and ``balanced=True``, SciPy's balancing can return
    an X that does not solve the equation: refused where it does not (UnsupportedInputError; fix:
    ``balanced=False``).

    >>> import numpy as np, mutagrad as mg
    >>> from mutagrad.scipy.linalg import solve_continuous_are
    >>> # x = a + sqrt(a² + q) for b = r = 1: dx/dq = 1 / (2 sqrt(a² + q)) = 1/10 at a = 3, q = 16
    >>> float(mg.grad(lambda q: solve_continuous_are(3.0, 1.0, q, 1.0)[0, 0])(16.0))
    0.1
    """
    args = _at_least_2d(a, b, q, r, e, s)
    _refuse_balanced_e("solve_continuous_are", args, e, balanced)
    return _solve_continuous_are(*args, balanced=balanced)


def _riccati_rrule(solve, discrete):
    """The reverse rule of a Riccati solver (``discrete``: DARE's, else CARE's): Y solves the
    adjoint of the closed loop's Lyapunov (Stein) equation, the cotangents follow from it."""

    def rule(a, b, q, r, e, s, *, balanced=True):
        x = solve(a, b, q, r, e, s, balanced=balanced)
        k, ac = _are_gain(x, a, b, r, e, s, discrete=discrete)

        def pullback(g):
            y = _riccati_adjoint(g, ac, e, discrete=discrete)
            return _riccati_cotangents(x, y, k, ac, (a, b, q, r, e, s), discrete=discrete)

        return x, pullback

    return rule


def _riccati_frule(solve, discrete):
    """The forward rule of a Riccati solver: Ẋ solves the closed loop's Lyapunov (Stein) equation
    with W + Wᴴ + Kᴴ Ṙ K + Q̇, W = Eᴴ X (Ȧ - Ḃ K) + Ėᴴ X A_c - Ṡ K (CARE) or
    A_cᴴ X (Ȧ - Ḃ K) - Eᴴ X Ė - Ṡ K (DARE)."""

    def rule(primals, tangents, *, balanced=True):
        a, b, q, r, e, s = primals
        x = solve(a, b, q, r, e, s, balanced=balanced)
        if all(is_zero(t) for t in tangents):
            return x, ZERO
        k, ac = _are_gain(x, a, b, r, e, s, discrete=discrete)
        ehx = x if e is None else np.matmul(_mH(e), x)
        if discrete:
            achx = np.matmul(_mH(ac), x)
            of_a, of_e = (lambda t: np.matmul(achx, t)), (lambda t: -np.matmul(ehx, t))
        else:
            xac = np.matmul(x, ac)
            of_a, of_e = (lambda t: np.matmul(ehx, t)), (lambda t: np.matmul(_mH(t), xac))
        return x, _riccati_tangent(k, ac, e, tangents, of_a, of_e, discrete=discrete)

    return rule


rrule(_solve_continuous_are)(_riccati_rrule(_solve_continuous_are, discrete=False))
frule(_solve_continuous_are)(_riccati_frule(_solve_continuous_are, discrete=False))


@scipy_primitive("scipy.linalg.solve_discrete_are")
def _solve_discrete_are(a, b, q, r, e, s, *, balanced=True):
    return sl.solve_discrete_are(a, b, q, r, e, s, balanced)


def solve_discrete_are(a, b, q, r, e=None, s=None, balanced=True):
    """``scipy.linalg.solve_discrete_are``: the stabilizing X of
    Aᴴ X A - Eᴴ X E - (Aᴴ X B + S) (R + Bᴴ X B)⁻¹ (Bᴴ X A + Sᴴ) + Q = 0 (E = I and S = 0 when
    omitted), differentiable w.r.t. every matrix: Ẋ solves a Stein equation of the closed loop
    A - B K, K = (R + Bᴴ X B)⁻¹ (Bᴴ X A + Sᴴ). Q and R are Hermitian (SciPy checks): their
    cotangents are too. ``balanced`` is SciPy's; with ``e`` and ``balanced=True``, refused where
    SciPy's X does not solve the equation, as for :func:`solve_continuous_are`.

    >>> import numpy as np, mutagrad as mg
    >>> from mutagrad.scipy.linalg import solve_discrete_are
    >>> # a = 0: x = q, whatever b and r
    >>> float(mg.grad(lambda q: solve_discrete_are(0.0, 1.0, q, 1.0)[0, 0])(2.0))
    1.0
    """
    args = _at_least_2d(a, b, q, r, e, s)
    _refuse_balanced_e("solve_discrete_are", args, e, balanced)
    return _solve_discrete_are(*args, balanced=balanced)


rrule(_solve_discrete_are)(_riccati_rrule(_solve_discrete_are, discrete=True))
frule(_solve_discrete_are)(_riccati_frule(_solve_discrete_are, discrete=True))


# -- svd, qr, null_space, orth: SciPy's factors, NumPy's rules -------------------------
# SciPy's svd and qr compute what np.linalg.svd and np.linalg.qr (mode "complete" for SciPy's
# "full", "reduced" for "economic") compute, through its own LAPACK: the primitives below return
# SciPy's values and take the derivatives of rules/linalg.py from them (the one extra singular
# vector or column of Q included; several are not unique: NotImplementedTangent there).


@scipy_primitive("scipy.linalg.svd")
def _svd(a, *, full_matrices=True, compute_uv=True, lapack_driver="gesdd"):
    return sl.svd(a, full_matrices=full_matrices, compute_uv=compute_uv, lapack_driver=lapack_driver)


def _scipy_svd_impl(lapack_driver):  # (the primitive itself: an outer level's traced matrix at higher order)
    return lambda a, full_matrices, compute_uv: _svd(a, full_matrices=full_matrices, compute_uv=compute_uv,
                                                     lapack_driver=lapack_driver)


rrule(_svd)(lambda a, full_matrices=True, compute_uv=True, lapack_driver="gesdd": _lin._svd_rrule(
    a, full_matrices, compute_uv, _impl=_scipy_svd_impl(lapack_driver)))
frule(_svd)(lambda primals, tangents, full_matrices=True, compute_uv=True, lapack_driver="gesdd": _lin._svd_frule(
    primals, tangents, full_matrices, compute_uv, _impl=_scipy_svd_impl(lapack_driver)))


@_overwrites(sl.svd, overwrite_a=("a", ("a",)), batch=(("a", 2),))
def svd(a, full_matrices=True, compute_uv=True, overwrite_a=False, check_finite=True, lapack_driver="gesdd"):
    """``scipy.linalg.svd``: SciPy's factors (either LAPACK driver), differentiable
    w.r.t. ``a`` with the rules of ``np.linalg.svd``: distinct singular values for the
    vectors, and of the extra vectors of ``full_matrices=True`` the single one of a real
    matrix of full rank with one more row or column.

    >>> import numpy as np, mutagrad as mg
    >>> from mutagrad.scipy.linalg import svd
    >>> float(mg.grad(lambda t: svd(t * np.diag([2.0, 1.0]), compute_uv=False)[0])(3.0))  # s₀ = 2t
    2.0
    """
    if lapack_driver not in ("gesdd", "gesvd"):
        raise ValueError(f'lapack_driver must be "gesdd" or "gesvd", not "{lapack_driver}"')
    return _svd(a, full_matrices=bool(full_matrices), compute_uv=bool(compute_uv), lapack_driver=lapack_driver)


def svdvals(a, overwrite_a=False, check_finite=True):
    """``scipy.linalg.svdvals``: SciPy's own definition, ``svd(a, compute_uv=False)``, differentiable
    w.r.t. ``a`` (the singular values' derivative, np.linalg.svd's).

    >>> import numpy as np, mutagrad as mg
    >>> from mutagrad.scipy.linalg import svdvals
    >>> float(mg.grad(lambda t: svdvals(t * np.diag([2.0, 1.0]))[1])(3.0))  # s₁ = t
    1.0
    """
    return svd(a, compute_uv=False, overwrite_a=overwrite_a, check_finite=check_finite)


_QR_MODES = {"full": "complete", "economic": "reduced"}  # SciPy's mode -> NumPy's


@scipy_primitive("scipy.linalg.qr")
def _qr(a, *, mode="full"):
    return tuple(sl.qr(a, mode=mode))


def _scipy_qr_impl(a, np_mode):
    return _qr(a, mode="full" if np_mode == "complete" else "economic")


rrule(_qr)(lambda a, mode="full": _lin._qr_rrule(a, _QR_MODES[mode], _impl=_scipy_qr_impl))
frule(_qr)(lambda primals, tangents, mode="full": _lin._qr_frule(primals, tangents, _QR_MODES[mode],
                                                                 _impl=_scipy_qr_impl))


@_overwrites(sl.qr, overwrite_a=("a", ("a",)), batch=(("a", 2),))
def qr(a, overwrite_a=False, lwork=None, mode="full", pivoting=False, check_finite=True):
    """``scipy.linalg.qr``: SciPy's factors for ``mode`` "full", "economic" and "r" (R
    alone, in a 1-tuple), differentiable w.r.t. ``a`` with the rules of ``np.linalg.qr``
    ("full" is its "complete": of the extra columns of Q, the single one of a real tall
    matrix of full rank with one more row). ``mode="raw"`` and ``pivoting=True``
    (a column permutation chosen from the values) have no rule.

    >>> import numpy as np, mutagrad as mg
    >>> from mutagrad.scipy.linalg import qr
    >>> float(mg.grad(lambda t: qr(t * np.array([[3.0, 1.0], [4.0, 2.0]]))[1][0, 0])(2.0))  # R₀₀ = -5t
    -5.0
    """
    if mode not in ("full", "economic", "r", "raw"):
        raise ValueError("Mode argument should be one of ['full', 'r', 'economic', 'raw']")
    if not isinstance(a, Tracer):  # (plain: SciPy's own call, every mode)
        return sl.qr(a, overwrite_a=overwrite_a, lwork=lwork, mode=mode, pivoting=pivoting, check_finite=check_finite)
    stack = np.ndim(a) > 2  # (SciPy returns a list of a stack's factors, and its R alone for mode "r")
    if mode == "raw" or pivoting:
        from ...errors import NoRuleError, user_line

        what = "mode='raw' (Householder reflectors)" if mode == "raw" else "pivoting=True"
        raise NoRuleError(
            f"scipy.linalg.qr with {what} at {user_line()} has no derivative rule in mutagrad. Use mode='full' "
            "or 'economic' without pivoting (np.linalg.qr is differentiated too)"
            + (", on the permuted matrix: P = scipy.linalg.qr(mg.value(a), mode='r', pivoting=True)[1]; "
               "qr(a[:, P])." if pivoting else "."))
    if mode == "r":  # (the economic R, with the zero rows of a tall matrix's full one: SciPy's values)
        r = _qr(a, mode="economic")[1]
        m, n = np.shape(a)[-2:]
        if m > n:
            r = np.concatenate([r, np.zeros(np.shape(r)[:-2] + (m - n, n), dtype=bottom(r).dtype)], axis=-2)
        return r if stack else (r,)
    q, r = _qr(a, mode=mode)
    return [q, r] if stack else (q, r)


# -- null_space, orth: bases of the null space and of the range ---------------------------
# SciPy keeps the singular values of each matrix above rcond · max(s) (the matrices of a stack
# must keep as many: bases of different widths do not stack, SciPy's error); orth returns the
# first r columns of U, null_space the rows of Vh beyond r, conjugate-transposed. The rank is
# taken as constant near A (it is piecewise so), and decided matrix by matrix.
# orth: the first r singular triplets (s_r above the rest) are smooth in A, with the derivative
# of a reduced SVD of r columns (rules/linalg.py's, whose terms (I - U Uᴴ) dA V S⁻¹ stand for
# every vector beyond r): none of those vectors is needed. null_space: the one null vector N of
# a real (n - 1) x n matrix of full rank (unique up to its sign, which LAPACK's Householder
# vectors fix smoothly) has dN = -A⁺ dA N, A⁺ = V S⁻¹ Uᴴ of the first r triplets, and
# Ā = -(U S⁻¹ Vh N̄) Nᵀ. The null vector of a square or tall matrix of rank n - 1 belongs to a
# zero singular value, whose sign LAPACK picks from rounding (it flipped under half of 200
# perturbations of 1e-7 of a 3 x 3 matrix of rank 2): the same formula is the derivative of the
# vector continued smoothly through the zero, every sign-free function's (v / v.sum(), v vᵀ; see
# docs/errors.md). Several null vectors, or a complex one, are not unique: refused.


def _ranks(s, rcond, m, n):
    """SciPy's rank of each matrix of a stack, from its singular values ``s`` (..., k)."""
    if rcond is None:
        rcond = np.finfo(s.dtype).eps * max(m, n)
    tol = np.amax(s, axis=-1, keepdims=True, initial=0.0) * rcond
    return np.sum(s > tol, axis=-1, dtype=int)


def _top_svd(name, repeated):
    """A primitive for the first singular triplets (U, s, Vh) of SciPy's reduced SVD: ``rank`` of
    them, or as many as SciPy's ``rcond`` keeps (orth's); differentiable in both modes, at every
    order, while those singular values are distinct. ``repeated``: the message where they are not."""

    @scipy_primitive(name)
    def top(a, *, rank=None, rcond=None, lapack_driver="gesdd"):
        u, s, vh = sl.svd(a, full_matrices=False, lapack_driver=lapack_driver)
        if rank is None:
            r = np.ravel(_ranks(s, rcond, *np.shape(a)[-2:]))
            if np.any(r != r[0]):  # (SciPy stacks each matrix's basis: its error)
                raise ValueError("all input arrays must have the same shape")
            rank = int(r[0])
        return u[..., :, :rank], s[..., :rank], vh[..., :rank, :]

    def explained(t, S):
        """A refusal at repeated values says what the user's function can do instead."""
        return not_implemented(repeated) if isinstance(t, NotImplementedTangent) and _lin._repeated(S) else t

    @rrule(top)
    def _rrule(a, *, rank=None, rcond=None, lapack_driver="gesdd"):
        y = top(a, rank=rank, rcond=rcond, lapack_driver=lapack_driver)

        def pullback(g):
            if _lin._all_zero(*g) or np.shape(y[1])[-1] == 0:
                return (ZERO,)
            return (explained(_lin._svd_vjp(*y, *g), y[1]),)

        return y, pullback

    @frule(top)
    def _frule(primals, tangents, *, rank=None, rcond=None, lapack_driver="gesdd"):
        (a,), (t,) = primals, tangents
        y = top(a, rank=rank, rcond=rcond, lapack_driver=lapack_driver)
        if np.shape(y[1])[-1] == 0:
            return y, (ZERO, ZERO, ZERO)
        dU, dS, dVh = _lin._svd_jvp(*y, t)
        return y, (explained(dU, y[1]), dS, explained(dVh, y[1]))

    return top


_orth_svd = _top_svd("scipy.linalg.orth", (
    "scipy.linalg.orth of a matrix with repeated nonzero singular values (up to rounding): the columns it "
    "returns for them are not unique (any rotation among them will do), so they have no derivative. A "
    "function of the projector Q Qᴴ onto the range has one: write Q Qᴴ as A @ np.linalg.pinv(A, rtol=None) "
    "(rtol=None: orth's default cutoff)"))
_null_svd = _top_svd("scipy.linalg.null_space", (
    "scipy.linalg.null_space: its derivative of higher order is taken through the singular vectors of the "
    "nonzero singular values of the matrix, which repeat here (up to rounding), so they are not unique. A "
    "function of the projector N Nᴴ onto the null space can be written np.eye(n) - np.linalg.pinv(A, "
    "rtol=None) @ A (n = A.shape[-1]; first order at a matrix of lower rank)"))


@scipy_primitive("scipy.linalg.null_space")
def _null_space(a, *, rcond=None, check_finite=True, lapack_driver="gesdd"):
    return sl.null_space(a, rcond, check_finite=check_finite, lapack_driver=lapack_driver)


def _null_space_refused(a, N):
    """Why the basis ``N`` of the null space of ``a`` has no derivative (None: it has one, a
    real null vector (the rank n - 1), or no vector at all). A square or tall matrix's null
    vector belongs to a zero singular value, whose vectors' signs LAPACK picks from rounding
    where a perturbation moves that value through zero: its derivative is the vector's
    continued smoothly, -A⁺ dA N, which every function of it that does not read its sign
    (v / v.sum(), v vᵀ) has (docs/errors.md)."""
    d = np.shape(N)[-1]
    if d == 0 or (d == 1 and not np.iscomplexobj(bottom(N))):
        return None
    if d > 1:
        why = f"the null space has dimension {d}, and any rotation of its basis will do"
    else:
        why = "the null vector of a complex matrix is unique only up to a phase"
    return not_implemented(
        f"scipy.linalg.null_space: {why}, so the basis it returns has no derivative (a real null vector, "
        "of a matrix of rank n - 1, has one). A function of the projector N Nᴴ onto the null "
        "space has one: write N Nᴴ as np.eye(n) - Q @ Q.conj().T with Q = mutagrad.scipy.linalg.orth("
        "A.conj().T), an orthonormal basis of the row space (n = A.shape[-1]), or as "
        "np.eye(n) - np.linalg.pinv(A, rtol=None) @ A")


def _pinv_factors(a, lapack_driver):
    """(U, s, Vh) of the rank part of ``a``, whose null space is one vector: A⁺ = Vhᴴ S⁻¹ Uᴴ."""
    return _null_svd(a, rank=np.shape(a)[-1] - 1, lapack_driver=lapack_driver)


@rrule(_null_space)
def _null_space_rrule(a, *, rcond=None, check_finite=True, lapack_driver="gesdd"):
    N = _null_space(a, rcond=rcond, check_finite=check_finite, lapack_driver=lapack_driver)

    def pullback(g):
        if is_zero(g) or np.shape(N)[-1] == 0 or (not isinstance(g, Tracer) and not np.any(g)):
            return (ZERO,)
        refused = _null_space_refused(a, N)
        if refused is not None:
            return (refused,)
        U, S, Vh = _pinv_factors(a, lapack_driver)
        return (-np.matmul(np.matmul(U, np.matmul(Vh, g) / S[..., :, None]), _mT(N)),)  # -(U S⁻¹ Vh N̄) Nᵀ

    return N, pullback


@frule(_null_space)
def _null_space_frule(primals, tangents, *, rcond=None, check_finite=True, lapack_driver="gesdd"):
    (a,), (t,) = primals, tangents
    N = _null_space(a, rcond=rcond, check_finite=check_finite, lapack_driver=lapack_driver)
    if np.shape(N)[-1] == 0:
        return N, ZERO
    refused = _null_space_refused(a, N)
    if refused is not None:
        return N, refused
    U, S, Vh = _pinv_factors(a, lapack_driver)
    return N, -np.matmul(_mT(Vh), np.matmul(_mT(U), np.matmul(t, N)) / S[..., :, None])  # -A⁺ dA N


@_overwrites(sl.null_space, overwrite_a=("A", ("A",)), batch=(("A", 2),))
def null_space(A, rcond=None, *, overwrite_a=False, check_finite=True, lapack_driver="gesdd"):
    """``scipy.linalg.null_space``: an orthonormal basis of the null space, SciPy's (of each
    matrix of a stack), differentiable where it is unique up to sign: a real null vector (rank
    n - 1; at a square or tall matrix, whose null vector's sign LAPACK picks from rounding, the
    vector continued smoothly: see docs/errors.md). Other bases (two or more vectors, a complex
    matrix's) are refused (``NotImplementedTangent``); the projector N Nᴴ is ``I - Q Qᴴ`` with
    ``Q = orth(A.conj().T)``, which is differentiable.

    >>> import numpy as np, mutagrad as mg
    >>> from mutagrad.scipy.linalg import null_space
    >>> a = lambda t: np.array([[1.0, 0.0]]) + t * np.array([[0.0, 1.0]])  # [1, t]: w = ±(-t, 1) / √(1 + t²)
    >>> round(float(mg.grad(lambda t: null_space(a(t))[0, 0] ** 2)(1.0)), 12)  # d/dt t² / (1 + t²) at 1
    0.5
    """
    return _null_space(A, rcond=rcond, check_finite=check_finite, lapack_driver=lapack_driver)


def orth(A, rcond=None):
    """``scipy.linalg.orth``: an orthonormal basis of the range, SciPy's (of each matrix of a
    stack; matrices of different ranks: SciPy's error), differentiable at distinct nonzero
    singular values, the rank taken as constant near ``A``.

    >>> import numpy as np, mutagrad as mg
    >>> from mutagrad.scipy.linalg import orth
    >>> mg.grad(lambda a: np.sum(orth(a) ** 2))(np.array([[2.0, 0.0], [0.0, 1.0]]))
    array([[0., 0.],
           [0., 0.]])
    """
    if not isinstance(A, Tracer):  # (plain: SciPy's own call)
        return sl.orth(A, rcond)
    _no_empty_stack("orth", A)
    return _orth_svd(A, rcond=rcond)[0]


# -- inv, solve, det: SciPy's values, np.linalg's formulas ----------------------------------
# SciPy 1.17 picks its LAPACK calls by structure: given by assume_a, or found from the values
# (assume_a=None: a symmetric, positive definite, triangular... matrix gets its own solver, each
# matrix of a stack its own), and transposed=True solves with op(A) = Aᵀ. The primitives below
# are SciPy's own calls (its values, dtypes, warnings and errors); their rules are np.linalg's
# formulas (rules/linalg.py), written with the matrix M SciPy reads, S(a) (_structured: for
# "sym", "her" and "pos" the symmetric or Hermitian matrix of one triangle, for the triangular
# and band structures the entries of the band), and the adjoint of S (_read_adjoint), which
# gives the entries SciPy does not read a zero cotangent, as finite differences of SciPy's
# function show. assume_a=None reads every entry: a change of any entry changes the structure
# found, and the solution is that of the changed matrix. A 1x1 matrix (of one entry: a scalar
# too) divides every row of b, whatever the structure. The solves of a derivative are the same
# primitive, with M (forward) or Mᴴ (reverse), so every order is SciPy's; they do not warn again
# (the value warned, for the same matrix).

_STRUCTURES = {
    None: "gen", "general": "gen", "gen": "gen", "diagonal": "diagonal", "tridiagonal": "tridiagonal",
    "banded": "gen", "upper triangular": "upper", "lower triangular": "lower",
    "pos": "her", "positive definite": "her", "her": "her", "hermitian": "her", "sym": "sym", "symmetric": "sym",
}


def _structured(a, assume_a, lower):
    """S(a), the matrix SciPy's solver reads from ``a`` for the structure ``assume_a``
    ("banded" reads every entry: SciPy finds the band from the nonzeros)."""
    s = _STRUCTURES[assume_a]
    if s == "gen":
        return a
    if s in ("her", "sym"):
        return _from_triangle(a, lower, conj=s == "her")
    if s in ("upper", "lower"):
        return _tri(a, s == "lower")
    i, j = np.indices(np.shape(a)[-2:])
    return np.where(np.abs(i - j) <= (0 if s == "diagonal" else 1), a, 0.0)


def _read_adjoint(g, assume_a, lower):
    """The adjoint of ``_structured``: M̄ as ā (S(a) = Φ(a) + Φ(a)ᵀ or Φ(a)ᴴ for one triangle)."""
    s = _STRUCTURES[assume_a]
    if s in ("her", "sym"):
        return _phi(g + (_mH(g) if s == "her" else _mT(g)), lower)
    return _structured(g, assume_a, lower)  # (a mask is its own adjoint)


def _array_like(x):
    """A plain list or tuple as the array SciPy reads it as (the rules conjugate and transpose it)."""
    return np.asarray(x) if isinstance(x, (list, tuple)) and not _has_tracer(x) else x


def _quiet(solve, *args, **kwargs):
    """``solve`` of a derivative, silent: SciPy's LinAlgWarning for its matrix came with the value."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", sl.LinAlgWarning)
        return solve(*args, **kwargs)


@scipy_primitive("scipy.linalg.inv")
def _inv(a, *, assume_a=None, lower=False, check_finite=True):
    return sl.inv(a, check_finite=check_finite, assume_a=assume_a, lower=lower)


def _eye_mask(y):
    return np.eye(np.shape(y)[-1], dtype=bool)


@rrule(_inv)
def _inv_rrule(a, *, assume_a=None, lower=False, check_finite=True):
    y = _inv(a, assume_a=assume_a, lower=lower, check_finite=check_finite)

    def pullback(g):
        if assume_a == "diagonal":  # (SciPy inverts the diagonal and returns the other entries as they are)
            return (np.where(_eye_mask(y), -(_cj(y) * g * _cj(y)), g),)
        yh = _mH(y)
        return (_read_adjoint(-np.matmul(np.matmul(yh, g), yh), assume_a, lower),)  # Ā = -Y⁻ᴴ Ȳ Y⁻ᴴ, read

    return y, pullback


@frule(_inv)
def _inv_frule(primals, tangents, *, assume_a=None, lower=False, check_finite=True):
    (a,), (t,) = primals, tangents
    y = _inv(a, assume_a=assume_a, lower=lower, check_finite=check_finite)
    if assume_a == "diagonal":
        return y, np.where(_eye_mask(y), -(y * t * y), t)
    return y, -np.matmul(np.matmul(y, _structured(t, assume_a, lower)), y)


@_overwrites(sl.inv, overwrite_a=("a", ("a",)))
def inv(a, overwrite_a=False, check_finite=True, *, assume_a=None, lower=False):
    """``scipy.linalg.inv``: SciPy's inverse, differentiated w.r.t. the entries SciPy's
    solver for ``assume_a`` reads (one triangle for "pos", "sym" and "her").

    >>> import numpy as np, mutagrad as mg
    >>> from mutagrad.scipy.linalg import inv
    >>> float(mg.grad(lambda t: inv(t * np.eye(2))[0, 0])(2.0))
    -0.25
    """
    return _inv(_array_like(a), assume_a=assume_a, lower=lower, check_finite=check_finite)


@scipy_primitive("scipy.linalg.solve")
def _solve(a, b, *, lower=False, assume_a=None, transposed=False, check_finite=True):
    return sl.solve(a, b, lower=lower, check_finite=check_finite, assume_a=assume_a, transposed=transposed)


def _divides(a):
    """Whether SciPy's solve divides by ``a`` (of one entry) rather than solving with it."""
    return np.prod(np.shape(a), dtype=int) == 1


def _solve_adjoint(a, g, *, lower, assume_a, transposed):
    """Mᴴ⁻¹ g, M the matrix ``solve(a, ·, ...)`` solves with, without transposed=True for
    complex values (which SciPy refuses)."""
    kw = {"lower": lower, "assume_a": assume_a, "check_finite": False}
    s = _STRUCTURES[assume_a]
    if s == "sym":  # (Mᴴ = conj(M))
        a = _cj(a)
    elif transposed or s == "her":  # (real M = S(a)ᵀ: Mᴴ = S(a); Hermitian M = Mᴴ)
        pass
    elif s in ("upper", "lower"):
        a, kw["assume_a"] = _mH(a), ("upper" if s == "lower" else "lower") + " triangular"
    else:
        a = _mH(a)
    return _quiet(_solve, a, g, **kw)


@rrule(_solve)
def _solve_rrule(a, b, *, lower=False, assume_a=None, transposed=False, check_finite=True):
    kw = {"lower": lower, "assume_a": assume_a, "transposed": transposed}
    x = _solve(a, b, check_finite=check_finite, **kw)
    vec = np.ndim(b) == 1  # (one column)

    def pullback(g):
        gc, xc = (g[..., None], x[..., None]) if vec else (g, x)
        if _divides(a):  # x = b / a
            bbar = gc / _cj(a)
            abar = -bbar * _cj(xc)
        else:  # b̄ = M⁻ᴴ x̄, M̄ = -b̄ xᴴ (as ā)
            bbar = _solve_adjoint(a, gc, **kw)
            mbar = -np.matmul(bbar, _mH(xc))
            abar = _read_adjoint(_mT(mbar) if transposed else mbar, assume_a, lower)
        return _unb(abar, np.shape(a)), _unb(bbar[..., 0] if vec else bbar, np.shape(b))

    return x, pullback


@frule(_solve)
def _solve_frule(primals, tangents, *, lower=False, assume_a=None, transposed=False, check_finite=True):
    (a, b), (ta, tb) = primals, tangents
    kw = {"lower": lower, "assume_a": assume_a, "transposed": transposed}
    x = _solve(a, b, check_finite=check_finite, **kw)
    vec = np.ndim(b) == 1
    rhs = ZERO if is_zero(tb) else tb[..., None] if vec else tb
    if not is_zero(ta):  # ẋ = M⁻¹ (ḃ - Ṁ x)
        xc = x[..., None] if vec else x
        if _divides(a):
            mx = ta * xc
        else:
            m = _structured(ta, assume_a, lower)
            mx = np.matmul(_mT(m) if transposed else m, xc)
        rhs = -mx if is_zero(rhs) else rhs - mx
    if is_zero(rhs):
        return x, ZERO
    dx = rhs / a if _divides(a) else _quiet(_solve, a, rhs, check_finite=False, **kw)
    return x, dx[..., 0] if vec else dx


@_overwrites(sl.solve, overwrite_a=("a", ("a",)), overwrite_b=("b", ("a", "b")))
def solve(a, b, lower=False, overwrite_a=False, overwrite_b=False, check_finite=True, assume_a=None,
          transposed=False):
    """``scipy.linalg.solve``: SciPy's solution (its solver for the structure given or found),
    differentiated w.r.t. the entries that solver reads (one triangle for "pos", "sym" and
    "her"); stacks broadcast, a vector ``b`` one right-hand side for every matrix, as SciPy's.

    >>> import numpy as np, mutagrad as mg
    >>> from mutagrad.scipy.linalg import solve
    >>> mg.grad(lambda b: solve(2 * np.eye(2), b).sum())(np.ones(2))
    array([0.5, 0.5])
    """
    return _solve(_array_like(a), _array_like(b), lower=lower, assume_a=assume_a, transposed=transposed,
                  check_finite=check_finite)


@scipy_primitive("scipy.linalg.det")
def _det(a, *, check_finite=True):
    return sl.det(a, check_finite=check_finite)


@rrule(_det)
def _det_rrule(a, *, check_finite=True):
    y = _det(a, check_finite=check_finite)

    def pullback(g):  # Ā = ḡ adj(A)ᴴ
        return (np.expand_dims(g, (-2, -1)) * _mH(_lin._adjugate(a, y)),)

    return y, pullback


@frule(_det)
def _det_frule(primals, tangents, *, check_finite=True):
    (a,), (t,) = primals, tangents
    y = _det(a, check_finite=check_finite)
    if np.result_type(bottom(a)) == np.float16:  # (NumPy's linalg has no float16: SciPy's det computes in float32)
        a = a.astype(np.float32)
    try:
        ainv = np.linalg.inv(a)
        if np.shape(a)[-1] > 3 and np.any(_lin._ill_conditioned(a, ainv)):
            raise np.linalg.LinAlgError
        return y, y * np.trace(np.matmul(ainv, t), axis1=-2, axis2=-1)
    except np.linalg.LinAlgError:  # singular (to working precision): through the adjugate
        return y, np.trace(_lin._adjugate(a, y) @ t, axis1=-2, axis2=-1)


@_overwrites(sl.det, overwrite_a=("a", ("a",)))
def det(a, overwrite_a=False, check_finite=True):
    """``scipy.linalg.det``: SciPy's determinant (float64 or complex128 for every input),
    differentiated with the adjugate (a singular matrix too).

    >>> import numpy as np, mutagrad as mg
    >>> from mutagrad.scipy.linalg import det
    >>> mg.grad(det)(np.array([[1.0, 2.0], [3.0, 4.0]]))
    array([[ 4., -3.],
           [-2.,  1.]])
    """
    return _det(_array_like(a), check_finite=check_finite)


# -- eigh, eigvalsh: the standard and the generalized Hermitian problem -------------------
# A V = B V Λ with Vᴴ B V = I (B = I for the standard problem). With P = Vᴴ dA V and
# Q = Vᴴ dB V (Hermitian), dV = V C:
#   dλ = Re diag P - λ Re diag Q
#   C = F ∘ (P - Q Λ) - diag(Re diag Q) / 2,   F_ij = 1 / (λ_j - λ_i) off the diagonal
# (Λ C - C Λ = Q Λ - P + dΛ off the diagonal; diag(Cᴴ + Q + C) = 0 from the normalisation),
# plus, for complex V, the phase term that keeps LAPACK's real row real (rules/linalg.py).
# Reverse, G = Vᴴ V̄:
#   Ā = V (diag(λ̄) + F ∘ G) Vᴴ,   B̄ = -V (diag(λ̄ λ) + (F ∘ G) Λ + diag(Re diag G) / 2) Vᴴ,
# each folded onto the triangle LAPACK reads.


def _eigh_real_rows(generalized, lower):
    """The row of SciPy's complex eigenvectors LAPACK keeps real: row 0 (``lower``) or the
    last of the standard problem's; the last of the generalized problem's with ``lower=False``
    (V = U⁻¹ W with B = Uᴴ U, U upper triangular: V's last row is W's, over a real U_nn). With
    ``lower=True`` the real row of W is mixed by L⁻ᴴ, so no row of V is real: None."""
    if not generalized:
        return (0,) if lower else (-1,)
    return None if lower else (-1,)


def _eigh_vectors_tangent(w, V, P, Q, rows, cols=None):
    """dV = V C (see above), with the phase term of complex vectors (rules/linalg.py's); of the
    columns ``cols`` (start, stop) only, where given."""
    return _lin._eigh_dV(w, V, P, rows, "scipy.linalg.eigh", Q, cols)


def _eigh_cotangents(w, V, gw, gV, lower, rows, generalized, read=None):
    """(Ā, B̄) from the cotangents of the values and the vectors (see above; B̄ None for the
    standard problem): rules/linalg.py's, which np.linalg.eigh uses too (``read``: its)."""
    res = _lin._eigh_T(w, V, gw, gV, lower, rows if rows is not None else (), "scipy.linalg.eigh", generalized,
                       read)
    return res if generalized else (res, None)


def _unstable_signs(driver):
    """SciPy's default driver of the standard problem, "evr" (MRRR), picks the vectors' signs
    (phases) in a way that jumps under rounding-level changes of the matrix: 190 of 200
    perturbations of 1e-7 flipped a column of a random 4x4 matrix ("ev", "evd", "evx": none).
    A function of those vectors has no derivative unless it is sign-invariant, which cannot be
    told from a cotangent or a tangent."""
    return not_implemented(
        f"scipy.linalg.eigh with driver={driver!r}: SciPy's default driver for the standard problem, "
        "'evr', chooses the signs (phases) of the eigenvectors in a way that jumps under rounding-level "
        "changes of the matrix, so functions of its vectors have no derivative (unless sign-invariant, "
        "which mutagrad cannot tell). Pass driver='evd' (or 'ev'; with subset_by_index or subset_by_value, "
        "'evx', the one that computes subsets), or use np.linalg.eigh, whose "
        "signs change only at isolated matrices; the eigenvalues alone (eigvals_only=True) are "
        "differentiable with every driver")


def _smooth_vectors(a, lower, driver, V=None):
    """Vectors for the values' derivative (V diag(λ̄) Vᴴ, sign-invariant) whose own derivative
    exists: ``V`` unless its driver is "evr" (see :func:`_unstable_signs`), else "evd"'s."""
    if V is not None and driver not in (None, "evr"):
        return V
    return _eigh(a, lower=lower, driver="evd")[1]


def _herm_tangent(t, lower):
    return t if is_zero(t) else _lin._herm_in(t, lower)


def _columns(y, cols):
    """(values, vectors) ``y`` with the vectors' columns ``cols`` (start, stop) only, where given."""
    return tuple(y) if cols is None else (y[0], y[1][..., :, cols[0]:cols[1]])


# (cols: a subset of the vectors, of every value's pair, whose tangents exist where their own values do not
# repeat, even where others do: a buckling mode beside a geometric stiffness's null space, the truss tester)
@scipy_primitive("scipy.linalg.eigh")
def _eigh(a, *, lower=True, driver=None, cols=None):
    return _columns(sl.eigh(a, lower=lower, driver=driver, check_finite=False), cols)


@scipy_primitive("scipy.linalg.eigh")
def _eigh_gen(a, b, *, lower=True, driver=None, cols=None):
    return _columns(sl.eigh(a, b, lower=lower, driver=driver, check_finite=False), cols)


def _whole_vectors(gV, read, cols, V):
    """The cotangent of the vectors' columns ``cols`` as one of all of them, ``V`` (zero outside), and their
    tape.read_mask as one of all (see :func:`_whole_read`)."""
    if cols is None:
        return gV, read
    lo, hi = cols
    lead, n = np.shape(V)[:-1], np.shape(V)[-1]
    if not is_zero(gV):
        dt = np.result_type(bottom(gV))
        gV = np.concatenate((np.zeros(lead + (lo,), dt), gV, np.zeros(lead + (n - hi,), dt)), axis=-1)
    return gV, _whole_read(read, (lo, hi - 1), n, lead)


@scipy_primitive("scipy.linalg.eigvalsh")
def _eigvalsh(a, *, lower=True, driver=None, subset=None):
    return sl.eigh(a, lower=lower, driver=driver, eigvals_only=True, subset_by_index=subset, check_finite=False)


@scipy_primitive("scipy.linalg.eigvalsh")
def _eigvalsh_gen(a, b, *, lower=True, driver=None, subset=None):
    return sl.eigh(a, b, lower=lower, driver=driver, eigvals_only=True, subset_by_index=subset,
                   check_finite=False)


def _subset(dw, subset):
    """The derivatives of the values ``subset`` = (lo, hi) asks for, of those of all (all for None)."""
    return dw if subset is None else dw[..., subset[0]:subset[1] + 1]


def _whole(g, subset, n):
    """The cotangent of the values ``subset`` asks for as one of all ``n`` (zero outside): a
    value of the subset tied with one outside shares its derivative with it (_lin._tie_mean)."""
    if subset is None or is_zero(g):
        return g
    lo, hi = subset
    lead = np.shape(g)[:-1]
    return np.concatenate((np.zeros(lead + (lo,)), g, np.zeros(lead + (n - 1 - hi,))), axis=-1)


def _whole_read(read, subset, n, lead=()):
    """tape.read_mask of the values ``subset`` asks for as one of all ``n`` (``lead``: a stack's axes): unread
    outside, which no operation can read (not returned); inside, where ``read`` says, or all of it where it
    says nothing (None: all of it, or not known)."""
    if subset is None:
        return read
    lo, hi = subset
    whole = np.zeros((np.shape(read)[:-1] if read is not None else tuple(lead)) + (n,), bool)
    whole[..., lo:hi + 1] = True if read is None else read
    return whole


def _gen_pairs(a, b, lower):
    """The generalized problem's values and vectors for the values' derivative (V diag(λ̄) Vᴴ:
    phase-invariant), by SciPy's default driver. Complex matrices are passed whole and
    read from the upper triangle, whose LAPACK phase convention (a real last row) is
    recognised: the vectors then have a derivative of their own (higher orders of the
    values); with ``lower=True`` no row of them is real."""
    if lower and (np.iscomplexobj(bottom(a)) or np.iscomplexobj(bottom(b))):
        return _eigh_gen(_lin._herm_in(a, True), _lin._herm_in(b, True), lower=False)
    return _eigh_gen(a, b, lower=lower)


def _smooth_pairs(a, lower):
    """Every value and vector of the standard problem, by the driver whose vectors have a
    derivative ("evd", see :func:`_unstable_signs`), for the values' derivative."""
    return _eigh(a, lower=lower, driver="evd")


@rrule(_eigh)
def _eigh_rrule(a, *, lower=True, driver=None, cols=None):
    w, V = _eigh(a, lower=lower, driver=driver)
    y = _columns((w, V), cols)
    reads = _lin._tie_reads(a, w)  # (the calls on one matrix at a tie: see np.linalg.eigh's)

    def pullback(g):
        gw, gV = g
        if _lin._all_zero(gw, gV):
            return (ZERO,)
        # (see np.linalg.eigh's)
        gV, read = _whole_vectors(gV, read_mask(1, kinks=False) if _lin._repeated(w) else None, cols, V)
        if _lin._read_apart(reads, not is_zero(gw), not is_zero(gV) and not _lin._unread(read, _lin._tied_of(w))):
            return (_lin._degenerate(f"scipy.linalg.eigh, {_lin._APART}"),)
        if is_zero(gV):
            tied = _lin._tied_values_pullback(a, lambda: w, gw, lower, "scipy.linalg.eigh", lambda: read_mask(0))
            if tied is not None:
                return (tied,)
            return (_eigh_cotangents(w, _smooth_vectors(a, lower, driver, V), gw, gV, lower, None, False)[0],)
        if driver in (None, "evr"):
            return (_unstable_signs(driver),)
        return (_eigh_cotangents(w, V, gw, gV, lower, _eigh_real_rows(False, lower), False, read)[0],)

    return y, pullback


@rrule(_eigh_gen)
def _eigh_gen_rrule(a, b, *, lower=True, driver=None, cols=None):
    w, V = _eigh_gen(a, b, lower=lower, driver=driver)
    y = _columns((w, V), cols)

    def pullback(g):
        gw, gV = g
        if _lin._all_zero(gw, gV):
            return ZERO, ZERO
        gV, read = _whole_vectors(gV, read_mask(1, kinks=False) if _lin._repeated(w) else None, cols, V)
        tied = None if not is_zero(gV) else _lin._tied_values_pullback_gen(a, b, lambda: w, gw, lower,
                                                                           "scipy.linalg.eigh", lambda: read_mask(0))
        if tied is not None:
            return tied
        abar, bbar = _eigh_cotangents(w, V, gw, gV, lower, _eigh_real_rows(True, lower), True, read)
        return _unb(abar, np.shape(a)), _unb(bbar, np.shape(b))  # (stacks broadcast)

    return y, pullback


# (their pullbacks ask which values and vectors the function read: tape.read_mask)
FOOTPRINTS.update(f._mutagrad_primitive for f in (_eigh, _eigh_gen, _eigvalsh, _eigvalsh_gen))


@rrule(_eigvalsh)
def _eigvalsh_rrule(a, *, lower=True, driver=None, subset=None):
    where = _lin._values_where(a)
    y = _eigvalsh(a, lower=lower, driver=driver, subset=subset)
    reads = _lin._tie_reads(a, y)

    def pullback(g):
        if _lin._read_apart(reads, not is_zero(g), False):
            return (_lin._degenerate(f"scipy.linalg.eigh(eigvals_only=True), {_lin._APART}"),)
        n = np.shape(bottom(a))[-1]
        g = _whole(g, subset, n)
        tied = _lin._tied_values_pullback(a, lambda: _eigvalsh(bottom(a), lower=lower) if subset else y, g, lower,
                                          "scipy.linalg.eigh(eigvals_only=True)",
                                          lambda: _whole_read(read_mask(0), subset, n, np.shape(bottom(a))[:-2]))
        if tied is not None:
            return (tied,)
        with _lin._ValuesPullback("scipy.linalg.eigh(eigvals_only=True)", where):
            w, V = _smooth_pairs(a, lower)
        return (_eigh_cotangents(w, V, g, ZERO, lower, None, False)[0],)

    return y, pullback


@rrule(_eigvalsh_gen)
def _eigvalsh_gen_rrule(a, b, *, lower=True, driver=None, subset=None):
    where = _lin._values_where(a) or _lin._values_where(b)

    def pullback(g):
        n = np.shape(bottom(a))[-1]
        g = _whole(g, subset, n)
        tied = _lin._tied_values_pullback_gen(a, b, lambda: _eigvalsh_gen(bottom(a), bottom(b), lower=lower), g,
                                              lower, "scipy.linalg.eigh(a, b, eigvals_only=True)",
                                              lambda: _whole_read(read_mask(0), subset, n, np.broadcast_shapes(
                                                  np.shape(a)[:-2], np.shape(b)[:-2])))
        if tied is not None:
            return tied
        with _lin._ValuesPullback("scipy.linalg.eigh(a, b, eigvals_only=True)", where):
            w, V = _gen_pairs(a, b, lower)
        abar, bbar = _eigh_cotangents(w, V, g, ZERO, lower, None, True)
        return _unb(abar, np.shape(a)), _unb(bbar, np.shape(b))  # (stacks broadcast)

    return _eigvalsh_gen(a, b, lower=lower, driver=driver, subset=subset), pullback


def _eigh_tangents(w, V, ta, tb, lower):
    """(P, Q, dλ) for the tangents of a and b (b's None for the standard problem)."""
    P = np.matmul(np.matmul(_mH(V), _herm_tangent(ta, lower)), V) if not is_zero(ta) else np.zeros_like(V)
    Q = ZERO if tb is None or is_zero(tb) else np.matmul(np.matmul(_mH(V), _herm_tangent(tb, lower)), V)
    dw = _lin._re(_lin._diag(P))
    if not is_zero(Q):
        dw = dw - w * _lin._re(_lin._diag(Q))
    return P, Q, _lin._tie_mean(w, dw)


@frule(_eigh)
def _eigh_frule(primals, tangents, *, lower=True, driver=None, cols=None):
    (a,), (ta,) = primals, tangents
    w, V = _eigh(a, lower=lower, driver=driver)
    y = _columns((w, V), cols)
    if driver in (None, "evr"):
        return y, (_eigh_tangents(w, _smooth_vectors(a, lower, driver), ta, None, lower)[2], _unstable_signs(driver))
    P, Q, dw = _eigh_tangents(w, V, ta, None, lower)
    return y, (dw, _eigh_vectors_tangent(w, V, P, Q, _eigh_real_rows(False, lower), cols))


@frule(_eigh_gen)
def _eigh_gen_frule(primals, tangents, *, lower=True, driver=None, cols=None):
    (a, b), (ta, tb) = primals, tangents
    w, V = _eigh_gen(a, b, lower=lower, driver=driver)
    P, Q, dw = _eigh_tangents(w, V, ta, tb, lower)
    return _columns((w, V), cols), (dw, _eigh_vectors_tangent(w, V, P, Q, _eigh_real_rows(True, lower), cols))


@frule(_eigvalsh)
def _eigvalsh_frule(primals, tangents, *, lower=True, driver=None, subset=None):
    (a,), (ta,) = primals, tangents
    wf, V = _smooth_pairs(a, lower)
    return _eigvalsh(a, lower=lower, driver=driver, subset=subset), _subset(_eigh_tangents(wf, V, ta, None, lower)[2],
                                                                             subset)


@frule(_eigvalsh_gen)
def _eigvalsh_gen_frule(primals, tangents, *, lower=True, driver=None, subset=None):
    (a, b), (ta, tb) = primals, tangents
    wf, V = _gen_pairs(a, b, lower)
    return (_eigvalsh_gen(a, b, lower=lower, driver=driver, subset=subset),
            _subset(_eigh_tangents(wf, V, ta, tb, lower)[2], subset))


def _eigh_options(a, type, eigvals_only, subset_by_index, subset_by_value):
    """The subset (lo, hi) of the values the rules compute, or None; the options without a
    derivative refused. (The vectors of a subset, and a subset by value, are taken from every pair
    by the caller: ``eigh``.)"""
    if type != 1:
        from ...errors import UnsupportedInputError

        raise UnsupportedInputError(
            f"mutagrad.scipy.linalg.eigh with type={type!r} of traced matrices at {user_line()}: only "
            "type=1 (A v = λ B v) is differentiated; for type 2 (A B v = λ v) or 3 (B A v = λ v), with "
            "B = L Lᴴ (np.linalg.cholesky), solve the standard problem of Lᴴ A L, whose vectors u give "
            "v = L⁻ᴴ u (type 2) or v = L u (type 3)")
    if subset_by_index is None or subset_by_value is not None or not eigvals_only:
        return None
    sel = _index_range(np.shape(a)[-1], subset_by_index)
    return sel.start, sel.stop - 1


def _index_range(n, by_index):
    """The slice of ``n`` ascending values SciPy's ``subset_by_index`` (lo, hi: inclusive) keeps,
    or SciPy's error."""
    lo, hi = (int(operator.index(i)) for i in by_index)
    if not 0 <= lo <= hi < n:
        raise ValueError("Requested eigenvalue indices are not valid. Valid range is [0, "
                         f"{n - 1}] and start <= end, but start={lo}, end={hi} is given")
    return slice(lo, hi + 1)


@_overwrites(sl.eigh, overwrite_a=("a", ("a", "b")), overwrite_b=("b", ("b",)), batch=(("a", 2), ("b", 2)))
def eigh(a, b=None, *, lower=True, eigvals_only=False, overwrite_a=False, overwrite_b=False, type=1,
         check_finite=True, subset_by_index=None, subset_by_value=None, driver=None):
    """``scipy.linalg.eigh``: the standard (``b`` None) or generalized Hermitian
    eigenproblem A v = λ B v, Vᴴ B V = I, each matrix read from the ``lower``
    (upper) triangle; differentiable w.r.t. ``a`` and ``b``. As for
    ``np.linalg.eigh``, the vectors have no derivative at repeated eigenvalues,
    and complex vectors a derivative only of phase-invariant quantities where
    LAPACK's phase convention is not recognised (``b`` given with ``lower=True``).
    Leading axes are stacks (broadcast), whose values and vectors come as SciPy's list.
    The vectors of the standard problem with SciPy's default driver ("evr") have
    signs that jump under rounding-level changes of ``a``: their derivative is
    refused (``NotImplementedTangent``) with that driver; pass ``driver="evd"``.
    Plain matrices get SciPy's own call (every option). On traced ones, ``subset_by_index``
    with ``eigvals_only`` computes the subset; with the vectors, and ``subset_by_value``, the
    subset of every pair (the values to rounding of SciPy's subset call); ``type`` 1 only.

    >>> import numpy as np, mutagrad as mg
    >>> from mutagrad.scipy.linalg import eigh
    >>> b = np.diag([1.0, 4.0])
    >>> mg.grad(lambda t: eigh(t * np.diag([1.0, 2.0]), b, eigvals_only=True)[0])(3.0)  # λ = t / 2, t
    0.5
    """
    if not _has_tracer([a, b]):  # (plain matrices: SciPy's own call, every option)
        return sl.eigh(a, b, lower=lower, eigvals_only=eigvals_only, type=type, check_finite=check_finite,
                       subset_by_index=subset_by_index, subset_by_value=subset_by_value, driver=driver)
    if (subset_by_index is not None or subset_by_value is not None) and driver in ("ev", "evd", "gv", "gvd"):
        raise ValueError(f'"{driver}" cannot compute subsets of eigenvalues')  # (SciPy's error)
    _check_finite(check_finite, a, b)
    subset = _eigh_options(a, type, eigvals_only, subset_by_index, subset_by_value)
    some = subset_by_index is not None or subset_by_value is not None
    # a subset of every pair's vectors (their derivative needs all of them): by index, or by value, whose
    # indices are read off the plain values (the pairs that fall in it)
    sel = cols = None
    if some and not eigvals_only:
        if subset_by_index is not None:
            sel = _index_range(np.shape(bottom(a))[-1], subset_by_index)
        else:
            sel = _subset_indices(sl.eigh(bottom(a), None if b is None else bottom(b), lower=lower, eigvals_only=True,
                                          check_finite=False), None, subset_by_value)
        cols = (sel.start, sel.stop)
    if b is None:
        if subset is not None:
            return _eigvalsh(a, lower=lower, driver=driver, subset=subset)
        if eigvals_only:
            w, v = _eigvalsh(a, lower=lower, driver=driver), None
        else:
            w, v = _eigh(a, lower=lower, driver=driver, cols=cols)
    elif subset is not None:
        return _eigvalsh_gen(a, b, lower=lower, driver=driver, subset=subset)
    elif eigvals_only:
        w, v = _eigvalsh_gen(a, b, lower=lower, driver=driver), None
    else:
        w, v = _eigh_gen(a, b, lower=lower, driver=driver, cols=cols)
    if some:
        if sel is None:
            sel = _subset_indices(bottom(w), subset_by_index, subset_by_value)
        exact = sl.eigh(bottom(a), None if b is None else bottom(b), lower=lower, driver=driver,
                        eigvals_only=v is None, subset_by_index=subset_by_index, subset_by_value=subset_by_value,
                        check_finite=False)
        ws, vs = (exact, None) if v is None else exact  # (SciPy's own subset call: its bits are returned)
        w = w[..., sel] * 1.0  # (a fresh array, whose values become SciPy's below)
        if v is not None:
            # SciPy's subset call picks each vector's sign (phase) its own way: the same columns,
            # turned to SciPy's (a constant factor per column), so that values agree with it
            vb = bottom(v)
            overlap = np.sum(np.conj(vb) * vs, axis=-2)
            size = np.abs(overlap)
            norms = np.sqrt(np.sum(np.abs(vb) ** 2, axis=-2) * np.sum(np.abs(vs) ** 2, axis=-2))
            turn = np.where(size > 0.5 * norms, overlap / np.where(size > 0, size, 1.0), 1.0)
            v = v * (turn.real if not np.iscomplexobj(turn) else turn)[..., None, :]
            if np.shape(bottom(v)) == np.shape(vs):
                bottom(v)[...] = vs  # (the same vectors to rounding: SciPy's bits, the derivative of every pair)
        if np.shape(bottom(w)) == np.shape(ws):
            bottom(w)[...] = ws
    if v is None:
        return w
    stack = np.ndim(a) > 2 or np.ndim(b) > 2  # (SciPy returns a stack's values and vectors as a list)
    return [w, v] if stack else (w, v)


def _subset_indices(w, by_index, by_value):
    """The slice of ascending values ``w`` that SciPy's ``subset_by_index`` (lo, hi: inclusive)
    or ``subset_by_value`` (lo, hi]: half-open) keeps."""
    if by_index is not None:
        return _index_range(np.shape(w)[-1], by_index)
    lo, hi = by_value
    if np.ndim(w) > 1:
        raise ValueError("mutagrad.scipy.linalg.eigh: subset_by_value of a stack (each matrix its own "
                         "number of values) is not supported: call it per matrix")
    keep = np.flatnonzero((w > lo) & (w <= hi))
    return slice(int(keep[0]), int(keep[-1]) + 1) if keep.size else slice(0, 0)


@_overwrites(sl.eigvalsh, overwrite_a=("a", ("a", "b")), overwrite_b=("b", ("b",)),
              batch=(("a", 2), ("b", 2)))
def eigvalsh(a, b=None, *, lower=True, overwrite_a=False, overwrite_b=False, type=1, check_finite=True,
             subset_by_index=None, subset_by_value=None, driver=None):
    """``scipy.linalg.eigvalsh``: the eigenvalues of :func:`eigh`."""
    _no_empty_stack("eigvalsh", a, b)
    return eigh(a, b, lower=lower, eigvals_only=True, type=type, subset_by_index=subset_by_index,
                subset_by_value=subset_by_value, driver=driver, check_finite=check_finite)


# -- special matrices: gathers and concatenations of the entries (exact copies, any order) ----

COMPOSITES = tuple(f"scipy.linalg.{name}" for name in (
    "block_diag", "circulant", "companion", "convolution_matrix", "cosm", "coshm", "diagsvd", "eig",
    "eigh_tridiagonal", "eigvals", "eigvalsh_tridiagonal", "fiedler", "fiedler_companion", "hankel", "khatri_rao",
    "leslie", "lu", "norm", "orthogonal_procrustes", "sinhm", "sinm", "solve_circulant", "subspace_angles", "tanhm",
    "tanm", "toeplitz"))


def khatri_rao(a, b):
    """``scipy.linalg.khatri_rao``: the column-wise Kronecker product, c[..., i * m + j, k] = a[..., i, k] *
    b[..., j, k] for a (..., n, k) and b (..., m, k), SciPy's products (CP-ALS's: the tensors tester); leading
    axes are batches, as in SciPy 1.17.

    >>> import numpy as np, mutagrad as mg
    >>> from mutagrad.scipy.linalg import khatri_rao
    >>> mg.grad(lambda a: khatri_rao(a, np.array([[1.0, 2.0], [3.0, 4.0]])).sum())(np.ones((1, 2)))
    array([[4., 6.]])
    """
    # (lists of plain numbers, np.matrix: NumPy arrays, as SciPy makes them; lists of traced ones: mnp.array)
    a = a if isinstance(a, Tracer) else np.asarray(a)
    b = b if isinstance(b, Tracer) else np.asarray(b)
    if np.ndim(a) > 2 or np.ndim(b) > 2:  # (SciPy's batches: its errors)
        batch = np.broadcast_shapes(np.shape(a)[:-2], np.shape(b)[:-2])
        if 0 in batch:
            raise ValueError("`khatri_rao` does not support zero-size batches.")
    if np.ndim(a) < 2 or np.ndim(b) < 2:
        raise ValueError("The both arrays should be 2-dimensional.")
    if np.shape(a)[-1] != np.shape(b)[-1]:
        raise ValueError("The number of columns for both arrays should be equal.")
    c = a[..., :, np.newaxis, :] * b[..., np.newaxis, :, :]
    return np.reshape(c, np.shape(c)[:-3] + (np.shape(a)[-2] * np.shape(b)[-2], np.shape(a)[-1]))


def _vector(x):
    return np.atleast_1d(x)


def toeplitz(c, r=None):
    """``scipy.linalg.toeplitz``: T[..., i, j] = c[..., i - j] below the diagonal and
    r[..., j - i] above it (``r`` defaults to conj(c)); leading axes of ``c`` and ``r``
    are batches, as in SciPy 1.17.

    >>> import numpy as np, mutagrad as mg
    >>> from mutagrad.scipy.linalg import toeplitz
    >>> mg.grad(lambda c: toeplitz(c).sum())(np.array([1.0, 2.0, 3.0]))  # c[0] on the diagonal
    array([3., 4., 2.])
    """
    c = _vector(c)
    r = np.conjugate(c) if r is None else _vector(r)
    batch = np.broadcast_shapes(np.shape(c)[:-1], np.shape(r)[:-1])
    c = np.broadcast_to(c, batch + np.shape(c)[-1:])
    r = np.broadcast_to(r, batch + np.shape(r)[-1:])
    n, m = np.shape(c)[-1], np.shape(r)[-1]
    vals = np.concatenate((c[..., ::-1], r[..., 1:]), axis=-1)
    return vals[..., (n - 1) - np.arange(n)[:, None] + np.arange(m)[None, :]]


def circulant(c):
    """``scipy.linalg.circulant``: C[..., i, j] = c[..., (i - j) mod n]; leading axes of
    ``c`` are batches.

    >>> import numpy as np, mutagrad as mg
    >>> from mutagrad.scipy.linalg import circulant
    >>> mg.grad(lambda c: circulant(c)[0].sum())(np.array([1.0, 2.0, 3.0]))
    array([1., 1., 1.])
    """
    c = _vector(c)
    n = np.shape(c)[-1]
    return c[..., (np.arange(n)[:, None] - np.arange(n)[None, :]) % n]


def hankel(c, r=None):
    """``scipy.linalg.hankel``: H[i, j] = c[i + j] for i + j < len(c), else
    r[i + j - len(c) + 1] (``r`` defaults to zeros); arrays of more than one axis are
    raveled, with SciPy's FutureWarning.

    >>> import numpy as np, mutagrad as mg
    >>> from mutagrad.scipy.linalg import hankel
    >>> mg.grad(lambda c: hankel(c).sum())(np.array([1.0, 2.0, 3.0]))
    array([1., 2., 3.])
    """
    c = c if isinstance(c, np.ndarray) else np.asarray(c)
    r = np.zeros_like(c) if r is None else (r if isinstance(r, np.ndarray) else np.asarray(r))
    if np.ndim(c) > 1 or np.ndim(r) > 1:
        import warnings

        warnings.warn("Beginning in SciPy 1.19, multidimensional input will be treated as a batch, not "
                      "`ravel`ed. To preserve the existing behavior and silence this warning, `ravel` "
                      "arguments before passing them to `hankel`.", FutureWarning, stacklevel=2)
    c, r = np.ravel(c), np.ravel(r)
    vals = np.concatenate((c, r[1:]))
    n, m = np.shape(c)[0], np.shape(r)[0]
    return vals[np.arange(n)[:, None] + np.arange(m)[None, :]]


def block_diag(*arrs):
    """``scipy.linalg.block_diag``: the arrays (at least 2-D; leading axes broadcast as
    batches) on the diagonal of a zero matrix.

    >>> import numpy as np, mutagrad as mg
    >>> from mutagrad.scipy.linalg import block_diag
    >>> mg.grad(lambda a: block_diag(a, 2.0 * a).sum())(np.ones((1, 2)))
    array([[3., 3.]])
    """
    if arrs == ():
        arrs = ([],)
    arrs = [a if isinstance(a, np.ndarray) and np.ndim(a) >= 2 else np.atleast_2d(
        a if isinstance(a, np.ndarray) else np.asarray(a)) for a in arrs]
    batch = np.broadcast_shapes(*(np.shape(a)[:-2] for a in arrs))
    arrs = [np.broadcast_to(a, batch + np.shape(a)[-2:]) for a in arrs]
    dtype = np.result_type(*(bottom(a) for a in arrs))
    widths = [np.shape(a)[-1] for a in arrs]
    total = sum(widths)
    rows, before = [], 0
    for a, w in zip(arrs, widths):
        h = np.shape(a)[-2]
        left = np.zeros(batch + (h, before), dtype)
        right = np.zeros(batch + (h, total - before - w), dtype)
        rows.append(np.concatenate((left, a.astype(dtype, copy=False), right), axis=-1))
        before += w
    return np.concatenate(rows, axis=-2)


# -- shared by the functions below ------------------------------------------------------


def _scipys_when_plain(scipy_fn):
    """The public function it decorates is SciPy's own call when no argument is traced (its values,
    containers and errors, every option)."""

    def decorate(fn):
        @functools.wraps(fn)
        def call(*args, **kwargs):
            if not _has_tracer([list(args), list(kwargs.values())]):
                return scipy_fn(*args, **kwargs)
            return fn(*args, **kwargs)

        return call

    return decorate


def _as_arrays(*xs):
    """The arguments as arrays: a list holding traced numbers as a traced array, another list (or a number)
    as np.asarray makes it, as SciPy does; arrays and None as they are."""
    out = []
    for x in xs:
        if x is not None and not isinstance(x, (Tracer, np.ndarray)):
            (x,) = _lists_as_arrays(x)
            x = x if isinstance(x, Tracer) else np.asarray(x)
        out.append(x)
    return tuple(out)


def _project(g, like):
    """The cotangent ``g`` of the argument ``like``: summed over the axes it was broadcast along, and
    real for a real argument (symbolic ones as they are)."""
    if is_zero(g) or isinstance(g, (NotImplementedTangent, NoTangent)):
        return g
    g = unbroadcast(g, np.shape(like))
    if np.iscomplexobj(bottom(g)) and not np.iscomplexobj(bottom(like)):
        g = np.real(g)
    return g


def _like_output(d, y):
    """The tangent ``d`` of the output ``y`` in its dtype's kind: complex where SciPy returns a complex
    result for real arguments (fractional_matrix_power), real where a complex computation gave rounding."""
    cd, cy = np.iscomplexobj(bottom(d)), np.iscomplexobj(bottom(y))
    if cd and not cy:
        return np.real(d)
    if cy and not cd:
        return d.astype(bottom(y).dtype)
    return d


def _over_batch(name, fn, arrays, cores):
    """SciPy 1.17's batch decorator (scipy._lib._util._apply_over_batch) on traced arrays: ``fn`` of
    the arrays' core parts (``cores``: 1, 2 or "1|2" axes), matrix by matrix of their broadcast leading
    axes, in order, the results stacked (a list of several, as SciPy's); ``fn`` of the arrays themselves
    where none has leading axes."""
    cores = [_core_ndim(c, v) if v is not None else c for c, v in zip(cores, arrays)]
    batches = [np.shape(v)[:np.ndim(v) - c] if v is not None else () for v, c in zip(arrays, cores)]
    if not any(batches):
        return fn(*arrays)
    batch = np.broadcast_shapes(*batches)
    if 0 in batch:
        raise ValueError(f"`{name}` does not support zero-size batches.")
    arrays = [None if v is None else np.broadcast_to(v, batch + np.shape(v)[np.ndim(v) - c:])
              for v, c in zip(arrays, cores)]
    rows = []
    for idx in np.ndindex(batch):
        res = fn(*(None if v is None else v[idx] for v in arrays))
        rows.append(res if isinstance(res, tuple) else (res,))
    cols = [np.reshape(np.stack(col), batch + np.shape(col[0])) for col in zip(*rows)]
    return cols[0] if len(cols) == 1 else cols


def _placed(vals, src):
    """The matrix whose entry (i, j) is ``vals[..., src[i, j]]``: the special matrices below are
    SciPy's assignments into zeros, made on an index matrix ``src`` (slot 0 of ``vals`` holding the
    zero), then one gather of the (traced) values."""
    return vals[..., src]


# -- Toeplitz and circulant systems ------------------------------------------------------
# T (n x m) has T[i, j] = c[i - j] on and below the diagonal and r[j - i] above it: SciPy reads
# r[0] nowhere (the diagonal is c[0]). A cotangent T̄ of its entries folds onto c̄[d] = Σ_{i-j=d} T̄ij
# and r̄[d] = Σ_{j-i=d} T̄ij (d ≥ 1; r̄[0] = 0): sums along the diagonals. Tᴴ is the m x n Toeplitz
# matrix of (conj(c₀, r₁, r₂, ...), conj(c)).
# matmul_toeplitz, y = T x, is linear in (c, r) and in x: x̄ = Tᴴ ȳ (matmul_toeplitz again), T̄ = ȳ xᴴ;
# ẏ = Ṫ x + T ẋ. solve_toeplitz, x = T⁻¹ b (SciPy's Levinson recursion): b̄ = T⁻ᴴ x̄ (solve_toeplitz
# of the adjoint's (c, r)), T̄ = -b̄ xᴴ; ẋ = T⁻¹ (ḃ - Ṫ x), Ṫ x by matmul_toeplitz. The rules call the
# primitives, so every order is SciPy's calls. Leading axes are batches (SciPy 1.17): c's and r's
# broadcast against b's (x's) beyond its core, a vector b one right-hand side for every matrix.


def _toeplitz_pair(c_or_cr):
    """(c, r) of SciPy's ``c_or_cr``: the tuple (c, r), or c with r = conj(c)."""
    if isinstance(c_or_cr, tuple):
        c, r = c_or_cr
        return _as_arrays(c, r)
    (c,) = _as_arrays(c_or_cr)
    return c, np.conjugate(c)


def _toeplitz_adjoint(c, r):
    """(c, r) of Tᴴ (see above)."""
    batch = np.broadcast_shapes(np.shape(c)[:-1], np.shape(r)[:-1])
    first = np.broadcast_to(c[..., :1], batch + (1,))
    rest = np.broadcast_to(r[..., 1:], batch + (np.shape(r)[-1] - 1,))
    return _cj(np.concatenate([first, rest], axis=-1)), _cj(c)


def _diagonal_sums(M):
    """s[..., k] = Σ M[..., i, j] over j - i = k - (n - 1), k = 0 .. n + m - 2, of n x m matrices: the
    rows turned upside down and padded with n zeros, read with one entry fewer per row, so that row i
    starts i places later."""
    n, m = np.shape(M)[-2:]
    lead = np.shape(M)[:-2]
    w = n + m
    padded = np.concatenate([M[..., ::-1, :], np.zeros(lead + (n, n), dtype=bottom(M).dtype)], axis=-1)
    flat = np.reshape(padded, lead + (n * w,))[..., :n * (w - 1)]
    return np.sum(np.reshape(flat, lead + (n, w - 1)), axis=-2)


def _toeplitz_fold(tbar):
    """(c̄, r̄) from the cotangent ``tbar`` of the n x m Toeplitz matrix's entries (see above)."""
    n = np.shape(tbar)[-2]
    s = _diagonal_sums(tbar)
    rbar = np.concatenate([np.zeros(np.shape(s)[:-1] + (1,), dtype=bottom(s).dtype), s[..., n:]], axis=-1)
    return s[..., n - 1::-1], rbar


def _toeplitz_column(x, c, r):
    """Whether a vector ``x`` goes with batches of (c, r): one right-hand side for every matrix, solved as
    a column (SciPy's values: its loop gives each matrix the vector)."""
    return np.ndim(x) == 1 and (np.ndim(c) > 1 or np.ndim(r) > 1)


@scipy_primitive("scipy.linalg.matmul_toeplitz")
def _matmul_toeplitz(c, r, x, *, workers=None):
    return sl.matmul_toeplitz((c, r), x, check_finite=False, workers=workers)


@rrule(_matmul_toeplitz)
def _matmul_toeplitz_rrule(c, r, x, *, workers=None):
    y = _matmul_toeplitz(c, r, x, workers=workers)

    def pullback(g):
        cbar, rbar = _toeplitz_fold(_outer_or_mm(g, x, np.ndim(x) == 1))  # T̄ = ȳ xᴴ
        xbar = _matmul_toeplitz(*_toeplitz_adjoint(c, r), g, workers=workers)
        return _project(cbar, c), _project(rbar, r), _project(xbar, x)

    return y, pullback


def _toeplitz_tangent_times(c, r, tc, tr, x, workers=None):
    """Ṫ x (None where both tangents are zero)."""
    if is_zero(tc) and is_zero(tr):
        return None
    return _matmul_toeplitz(_zero_if(tc, c), _zero_if(tr, r), x, workers=workers)


@frule(_matmul_toeplitz)
def _matmul_toeplitz_frule(primals, tangents, *, workers=None):
    (c, r, x), (tc, tr, tx) = primals, tangents
    y = _matmul_toeplitz(c, r, x, workers=workers)
    dy = _toeplitz_tangent_times(c, r, tc, tr, x, workers)
    if not is_zero(tx):
        tx = _matmul_toeplitz(c, r, tx, workers=workers)
        dy = tx if dy is None else dy + tx
    return y, ZERO if dy is None else dy


@_scipys_when_plain(sl.matmul_toeplitz)
def matmul_toeplitz(c_or_cr, x, check_finite=False, workers=None):
    """``scipy.linalg.matmul_toeplitz``: T x by FFT, T the Toeplitz matrix of ``c_or_cr`` (c, or
    (c, r)); SciPy's values, differentiable w.r.t. c, r (r[0] is not read) and x, in which it is linear.

    >>> import numpy as np, mutagrad as mg
    >>> from mutagrad.scipy.linalg import matmul_toeplitz
    >>> # T = [[1, 3], [2, 1]]: sum(T x) = 3 x₀ + 4 x₁
    >>> mg.grad(lambda x: matmul_toeplitz((np.array([1.0, 2.0]), np.array([1.0, 3.0])), x).sum())(np.ones(2))
    array([3., 4.])
    """
    c, r = _toeplitz_pair(c_or_cr)
    (x,) = _as_arrays(x)
    _check_finite(check_finite, c, r, x)
    if _toeplitz_column(x, c, r):
        return _matmul_toeplitz(c, r, x[..., None], workers=workers)[..., 0]
    return _matmul_toeplitz(c, r, x, workers=workers)


@scipy_primitive("scipy.linalg.solve_toeplitz")
def _solve_toeplitz(c, r, b):
    return sl.solve_toeplitz((c, r), b, check_finite=False)


@rrule(_solve_toeplitz)
def _solve_toeplitz_rrule(c, r, b):
    x = _solve_toeplitz(c, r, b)

    def pullback(g):
        bbar = _solve_toeplitz(*_toeplitz_adjoint(c, r), g)  # T⁻ᴴ x̄
        cbar, rbar = _toeplitz_fold(-_outer_or_mm(bbar, x, np.ndim(b) == 1))  # T̄ = -b̄ xᴴ
        return _project(cbar, c), _project(rbar, r), _project(bbar, b)

    return x, pullback


@frule(_solve_toeplitz)
def _solve_toeplitz_frule(primals, tangents):
    (c, r, b), (tc, tr, tb) = primals, tangents
    x = _solve_toeplitz(c, r, b)
    tx = _toeplitz_tangent_times(c, r, tc, tr, x)
    rhs = tb if tx is None else (-tx if is_zero(tb) else tb - tx)  # ḃ - Ṫ x
    return x, ZERO if is_zero(rhs) else _solve_toeplitz(c, r, rhs)


@_scipys_when_plain(sl.solve_toeplitz)
def solve_toeplitz(c_or_cr, b, check_finite=True):
    """``scipy.linalg.solve_toeplitz``: x with T x = b, T the Toeplitz matrix of ``c_or_cr`` (c, or
    (c, r); r[0] is not read); SciPy's Levinson values, differentiable w.r.t. c, r and b (implicitly:
    the derivatives solve with T and Tᴴ, every order); leading axes are batches.

    >>> import numpy as np, mutagrad as mg
    >>> from mutagrad.scipy.linalg import solve_toeplitz
    >>> # T = [[2, 1], [1, 2]] (c alone: symmetric): x = T⁻¹ b, d sum(x) / db = T⁻ᵀ 1 = [1/3, 1/3]
    >>> mg.grad(lambda b: solve_toeplitz(np.array([2.0, 1.0]), b).sum())(np.ones(2))
    array([0.33333333, 0.33333333])
    """
    c, r = _toeplitz_pair(c_or_cr)
    (b,) = _as_arrays(b)
    _check_finite(check_finite, c, r, b)
    if _toeplitz_column(b, c, r):
        return _solve_toeplitz(c, r, b[..., None])[..., 0]
    return _solve_toeplitz(c, r, b)


def _axis_length(name, a, axis):
    """SciPy's length of ``a`` along ``axis`` (solve_circulant's caxis, baxis), or its error."""
    ax = axis + np.ndim(a) if axis < 0 else axis
    if 0 <= ax < np.ndim(a):
        return np.shape(a)[ax]
    raise ValueError(f"'{name}axis' entry is out of bounds")


@_scipys_when_plain(sl.solve_circulant)
def solve_circulant(c, b, singular="raise", tol=None, caxis=-1, baxis=0, outaxis=0):
    """``scipy.linalg.solve_circulant``: x with C x = b, C the circulant matrix of ``c``, by SciPy's
    formula x = ifft(fft(b) / fft(c)) with np.fft (its values), differentiable w.r.t. c and b.
    ``singular="lstsq"`` zeroes the quotients of the eigenvalues within ``tol`` (decided on the values:
    the derivative is that of the same least-squares solution).

    >>> import numpy as np, mutagrad as mg
    >>> from mutagrad.scipy.linalg import solve_circulant
    >>> # C = 2 I + J (c = [3, 1, 1]): C 1 = 5 · 1, so d sum(x) / db = C⁻ᵀ 1 = 1/5
    >>> mg.grad(lambda b: solve_circulant(np.array([3.0, 1.0, 1.0]), b).sum())(np.ones(3))
    array([0.2, 0.2, 0.2])
    """
    c, b = _as_arrays(c, b)
    c, b = np.atleast_1d(c), np.atleast_1d(b)
    nc, nb = _axis_length("c", c, caxis), _axis_length("b", b, baxis)
    if nc != nb:
        raise ValueError(f"Shapes of c {np.shape(c)} and b {np.shape(b)} are incompatible")
    if np.size(b) == 0:  # (no entries: SciPy's empty array)
        return sl.solve_circulant(bottom(c), bottom(b), singular, tol, caxis, baxis, outaxis)
    fc = np.fft.fft(np.moveaxis(c, caxis, -1), axis=-1)
    abs_fc = np.abs(bottom(fc))
    if tol is None:  # (SciPy's: np.linalg.matrix_rank's tolerance)
        tol = abs_fc.max(axis=-1) * nc * np.finfo(np.float64).eps
        tol = tol.reshape(tol.shape + (1,)) if tol.shape != () else np.atleast_1d(tol)
    near_zeros = abs_fc <= tol
    singular_ = bool(np.any(near_zeros))
    if singular_:
        if singular == "raise":
            raise np.linalg.LinAlgError("near singular circulant matrix.")
        fc = np.where(near_zeros, 1, fc)
    fb = np.fft.fft(np.moveaxis(b, baxis, -1), axis=-1)
    q = fb / fc
    if singular_:
        mask = np.ones(np.shape(b), dtype=bool) & near_zeros
        np.zeros(np.shape(q), bool)[mask] = True  # (SciPy's q[mask] = 0: its IndexError where the shapes differ)
        q = np.where(mask, 0, q)
    x = np.fft.ifft(q, axis=-1)
    if not (np.iscomplexobj(bottom(c)) or np.iscomplexobj(bottom(b))):
        x = np.real(x)
    return x if outaxis == -1 else np.moveaxis(x, -1, outaxis)


# -- expm_frechet: the block identity -------------------------------------------------------
# expm([[A, E], [0, A]]) = [[e^A, L(A, E)], [0, e^A]]: SciPy's pair (e^A, L(A, E)) is two blocks of
# the exponential of M = [[A, E], [0, A]], which is linear in (A, E). Its tangent is the Fréchet
# derivative of expm at M in the direction Ṁ = [[Ȧ, Ė], [0, Ȧ]], L(M, Ṁ), whose blocks are the
# tangents; its cotangent M̄ = L(M, Gᴴ)ᴴ (the Fréchet derivative's symmetry under the trace, as for
# expm above), G = [[ē, L̄], [0, 0]], folded back: Ā = M̄₁₁ + M̄₂₂, Ē = M̄₁₂. Both are SciPy's
# expm_frechet of M (2n x 2n), the same primitive: every order.


def _upper_blocks(a, e):
    """[[a, e], [0, a]] (of stacks, broadcast)."""
    batch = np.broadcast_shapes(np.shape(a)[:-2], np.shape(e)[:-2])
    a = np.broadcast_to(a, batch + np.shape(a)[-2:])
    e = np.broadcast_to(e, batch + np.shape(e)[-2:])
    dtype = np.result_type(bottom(a), bottom(e))
    top = np.concatenate([a, e], axis=-1)
    return np.concatenate([top, np.concatenate([np.zeros(np.shape(e), dtype), a], axis=-1)], axis=-2)


@scipy_primitive("scipy.linalg.expm_frechet")
def _expm_frechet(a, e, *, method=None):
    return tuple(sl.expm_frechet(a, e, method=method, check_finite=False))


@rrule(_expm_frechet)
def _expm_frechet_rrule(a, e, *, method=None):
    y = _expm_frechet(a, e, method=method)

    def pullback(g):
        ge, gl = (_zero_if(t, v) for t, v in zip(g, y))
        n = np.shape(ge)[-1]
        G = _upper_blocks(ge, gl)
        G = np.concatenate([G[..., :n, :], np.zeros_like(G[..., n:, :])], axis=-2)  # (the lower blocks are not returned)
        mbar = _mH(_expm_frechet(_upper_blocks(a, e), _mH(G), method=method)[1])
        return (_project(mbar[..., :n, :n] + mbar[..., n:, n:], a), _project(mbar[..., :n, n:], e))

    return y, pullback


@frule(_expm_frechet)
def _expm_frechet_frule(primals, tangents, *, method=None):
    (a, e), (ta, te) = primals, tangents
    y = _expm_frechet(a, e, method=method)
    if is_zero(ta) and is_zero(te):
        return y, (ZERO, ZERO)
    n = np.shape(y[0])[-1]
    d = _expm_frechet(_upper_blocks(a, e), _upper_blocks(_zero_if(ta, a), _zero_if(te, e)), method=method)[1]
    return y, (_like_output(d[..., :n, :n], y[0]), _like_output(d[..., :n, n:], y[1]))


@_scipys_when_plain(sl.expm_frechet)
def expm_frechet(A, E, method=None, compute_expm=True, check_finite=True):
    """``scipy.linalg.expm_frechet``: (e^A, L(A, E)), the Fréchet derivative of expm at A in the
    direction E (L alone without ``compute_expm``), SciPy's values; differentiable w.r.t. A and E
    through expm([[A, E], [0, A]]) = [[e^A, L(A, E)], [0, e^A]] (every order). Leading axes are
    batches (SciPy's list of the two for a stack).

    >>> import numpy as np, mutagrad as mg
    >>> from mutagrad.scipy.linalg import expm_frechet
    >>> # A = t I: L(A, E) = e^t E, so d L₀₀ / dt = e^t at t = 0 (E = I)
    >>> float(mg.grad(lambda t: expm_frechet(t * np.eye(2), np.eye(2))[1][0, 0])(0.0))
    1.0
    """
    A, E = _as_arrays(A, E)
    _check_finite(check_finite, A, E)
    ea, L = _expm_frechet(A, E, method=method)
    if not compute_expm:
        return L
    return [ea, L] if np.ndim(A) > 2 or np.ndim(E) > 2 else (ea, L)


# -- trigonometric and hyperbolic matrix functions: SciPy's formulas ----------------------------
# SciPy writes them with expm and solve (scipy/linalg/_matfuncs.py); so are they here, with the
# differentiable expm and solve above: the same calls on the same values, so SciPy's values, and
# every order.


def _maybe_real(A, B):
    """SciPy's _maybe_real: a complex B computed from a real A, the real part where its imaginary part
    is within SciPy's tolerance (matrix by matrix of a stack, as SciPy's loop decides)."""
    if np.iscomplexobj(bottom(A)) or not np.iscomplexobj(bottom(B)):
        return B
    b = np.asarray(bottom(B))
    tol = np.finfo(np.float32).eps * 1e3 if b.dtype == np.complex64 else np.finfo(float).eps * 1e6
    close = np.all(np.abs(b.imag) <= tol, axis=(-2, -1))
    if np.all(close):
        return np.real(B)
    return np.where(close[..., None, None], np.real(B), B) if np.any(close) else B


def _matfunc_input(A):
    """``A`` as SciPy's matrix functions take it (_asarray_square, matrix by matrix of a stack)."""
    (A,) = _as_arrays(A)
    if np.ndim(A) < 2 or np.shape(A)[-1] != np.shape(A)[-2]:
        raise ValueError("expected square array_like input")
    return A


@_scipys_when_plain(sl.cosm)
def cosm(A):
    """``scipy.linalg.cosm``: the matrix cosine, SciPy's formula (expm(iA), its real part for a real A).

    >>> import numpy as np, mutagrad as mg
    >>> from mutagrad.scipy.linalg import cosm
    >>> float(mg.grad(lambda t: cosm(t * np.eye(2))[0, 0])(0.0))  # d cos(t) / dt = -sin(0)
    -0.0
    """
    A = _matfunc_input(A)
    if np.iscomplexobj(bottom(A)):
        return 0.5 * (expm(1j * A) + expm(-1j * A))
    return np.real(expm(1j * A))


@_scipys_when_plain(sl.sinm)
def sinm(A):
    """``scipy.linalg.sinm``: the matrix sine, SciPy's formula (expm(iA), its imaginary part for a real A).

    >>> import numpy as np, mutagrad as mg
    >>> from mutagrad.scipy.linalg import sinm
    >>> float(mg.grad(lambda t: sinm(t * np.eye(2))[0, 0])(0.0))  # d sin(t) / dt = cos(0)
    1.0
    """
    A = _matfunc_input(A)
    if np.iscomplexobj(bottom(A)):
        return -0.5j * (expm(1j * A) - expm(-1j * A))
    return np.imag(expm(1j * A))


@_scipys_when_plain(sl.tanm)
def tanm(A):
    """``scipy.linalg.tanm``: the matrix tangent, SciPy's formula solve(cosm(A), sinm(A)).

    >>> import numpy as np, mutagrad as mg
    >>> from mutagrad.scipy.linalg import tanm
    >>> float(mg.grad(lambda t: tanm(t * np.eye(2))[0, 0])(0.0))  # d tan(t) / dt = 1 / cos²(0)
    1.0
    """
    A = _matfunc_input(A)
    return _maybe_real(A, solve(cosm(A), sinm(A)))


@_scipys_when_plain(sl.coshm)
def coshm(A):
    """``scipy.linalg.coshm``: the hyperbolic matrix cosine, SciPy's formula (expm(A) + expm(-A)) / 2.

    >>> import numpy as np, mutagrad as mg
    >>> from mutagrad.scipy.linalg import coshm
    >>> float(mg.grad(lambda t: coshm(t * np.eye(2))[0, 0])(0.0))  # d cosh(t) / dt = sinh(0)
    0.0
    """
    A = _matfunc_input(A)
    return _maybe_real(A, 0.5 * (expm(A) + expm(-A)))


@_scipys_when_plain(sl.sinhm)
def sinhm(A):
    """``scipy.linalg.sinhm``: the hyperbolic matrix sine, SciPy's formula (expm(A) - expm(-A)) / 2.

    >>> import numpy as np, mutagrad as mg
    >>> from mutagrad.scipy.linalg import sinhm
    >>> float(mg.grad(lambda t: sinhm(t * np.eye(2))[0, 0])(0.0))  # d sinh(t) / dt = cosh(0)
    1.0
    """
    A = _matfunc_input(A)
    return _maybe_real(A, 0.5 * (expm(A) - expm(-A)))


@_scipys_when_plain(sl.tanhm)
def tanhm(A):
    """``scipy.linalg.tanhm``: the hyperbolic matrix tangent, SciPy's formula solve(coshm(A), sinhm(A)).

    >>> import numpy as np, mutagrad as mg
    >>> from mutagrad.scipy.linalg import tanhm
    >>> float(mg.grad(lambda t: tanhm(t * np.eye(2))[0, 0])(0.0))  # d tanh(t) / dt = 1 / cosh²(0)
    1.0
    """
    A = _matfunc_input(A)
    return _maybe_real(A, solve(coshm(A), sinhm(A)))


# -- fractional_matrix_power: A^t = expm(t logm(A)) ----------------------------------------------
# SciPy computes A^t by a Schur-Padé algorithm (matrix_power for an integer t); its values agree with
# expm(t logm(A)) to rounding (1e-13 relative of well-conditioned matrices), whose derivative is that
# of A^t: with B = t logm(A), Ḃ = ṫ logm(A) + t L_log(A, Ȧ) and Ẋ = L_exp(B, Ḃ) (the Fréchet
# derivatives above); B̄ = L_exp(B, X̄ᴴ)ᴴ, Ā = t L_log(A, B̄ᴴ)ᴴ, t̄ = Re Σ B̄ ∘ conj(logm(A)). The value is
# SciPy's call; the derivatives are expm's and logm's primitives: every order.


@scipy_primitive("scipy.linalg.fractional_matrix_power")
def _fractional_matrix_power(a, t):
    return sl.fractional_matrix_power(a, t)


@rrule(_fractional_matrix_power)
def _fractional_matrix_power_rrule(a, t):
    y = _fractional_matrix_power(a, t)

    def pullback(g):
        lg = _logm(a)
        bbar = _mH(_frechet(_expm, t * lg, _mH(g)))
        abar = Thunk(lambda: _project(_mH(_frechet(_logm, a, _mH(t * bbar))), a))
        if np.asarray(bottom(t)).dtype.kind in "biu":  # (an integer power: no derivative in it)
            return abar, NoTangent()
        return abar, Thunk(lambda: _project(np.sum(bbar * _cj(lg)), t))

    return y, pullback


@frule(_fractional_matrix_power)
def _fractional_matrix_power_frule(primals, tangents):
    (a, t), (ta, tt) = primals, tangents
    y = _fractional_matrix_power(a, t)
    lg = _logm(a)
    db = _tangent_sum((ta, lambda d: t * _frechet(_logm, a, d)), (tt, lambda d: d * lg))
    if db is None:
        return y, ZERO
    return y, _like_output(_frechet(_expm, t * lg, db), y)


@_scipys_when_plain(sl.fractional_matrix_power)
def fractional_matrix_power(A, t):
    """``scipy.linalg.fractional_matrix_power``: A^t, SciPy's values; differentiable w.r.t. ``A`` and
    ``t`` as expm(t logm(A)), to which SciPy's values agree to rounding (every order). Leading axes of
    ``A`` are batches.

    >>> import numpy as np, mutagrad as mg
    >>> from mutagrad.scipy.linalg import fractional_matrix_power
    >>> # (4 I)^t = 4^t I: d/dt at t = 0.5 is 2 log 4; d/da of a^0.5 at a = 4 is 1/4
    >>> round(float(mg.grad(lambda t: fractional_matrix_power(4.0 * np.eye(2), t)[0, 0].real)(0.5)), 12)
    2.77258872224
    >>> round(float(mg.grad(lambda a: fractional_matrix_power(a * np.eye(2), 0.5)[0, 0].real)(4.0)), 12)
    0.25
    """
    return _fractional_matrix_power(_matfunc_input(A), t)


# -- pinv, pinvh, lstsq: SciPy's values, np.linalg's rules -----------------------------------------
# SciPy's pseudo-inverses keep the singular values (pinvh: the eigenvalues' magnitudes, which are a
# Hermitian matrix's singular values) above atol + rtol · max(s), matrix by matrix; np.linalg.pinv's
# rule (rules/linalg.py: constant rank near A, the truncated pseudo-inverse's derivative where a value
# cut off is not zero) with the same cutoff, rtol = (atol + rtol · max s) / max s, is theirs. lstsq is
# LAPACK's gelsd (gelss, gelsy) with rcond = cond (machine precision by default), np.linalg.lstsq's
# with that rcond. The primitives return SciPy's values; their rules are np.linalg's.


def _relative_cutoff(s, atol, rtol, shape, dtype):
    """(the relative cutoff np.linalg.pinv's rule takes, the rank of each matrix) for SciPy's ``atol``
    and ``rtol`` and the singular values ``s`` (..., k) of the matrices."""
    atol = 0.0 if atol is None else atol
    if rtol is None:
        rtol = max(shape[-2:]) * np.finfo(np.result_type(dtype, np.float32).char.lower()).eps  # (SciPy's)
    smax = np.max(s, axis=-1, initial=0.0)
    val = atol + smax * rtol
    rank = np.sum(s > val[..., None], axis=-1)
    return np.where(smax > 0, val / np.where(smax > 0, smax, 1.0), 1.0), rank


def _pinv_rules(prim, matrix, fold):
    """Both rules of the primitive ``prim(a, *, rel, ...)``, SciPy's pseudo-inverse of ``matrix(a, ...)``,
    by np.linalg.pinv's with the relative cutoff ``rel``; ``fold(g, ...)``: the transpose of ``matrix``."""

    def reverse(a, **kw):
        _, pb = _lin._pinv_rrule(matrix(a, **kw), rtol=kw["rel"])

        def pullback(g):
            (gm,) = pb(g)
            return (gm if is_zero(gm) or isinstance(gm, NotImplementedTangent) else fold(gm, **kw),)

        return prim(a, **kw), pullback

    def forward(primals, tangents, **kw):
        (a,), (t,) = primals, tangents
        y = prim(a, **kw)
        if is_zero(t):
            return y, ZERO
        return y, _lin._pinv_frule((matrix(a, **kw),), (matrix(t, **kw),), rtol=kw["rel"])[1]

    rrule(prim)(reverse)
    frule(prim)(forward)


@scipy_primitive("scipy.linalg.pinv")
def _pinv(a, *, atol=None, rtol=None, rel=None):
    return sl.pinv(a, atol=atol, rtol=rtol, check_finite=False)


_pinv_rules(_pinv, lambda a, **kw: a, lambda g, **kw: g)


def _pinv_cutoff(name, a, atol, rtol, s):
    """SciPy's checks of a pseudo-inverse's arguments, and (relative cutoff, ranks) from the plain
    singular values ``s`` (see _relative_cutoff)."""
    _no_empty_stack(name, a)
    if (atol is not None and atol < 0) or (rtol is not None and rtol < 0):
        raise ValueError("atol and rtol values must be positive.")
    return _relative_cutoff(s(), atol, rtol, np.shape(a), bottom(a).dtype)


def _with_rank(x, rank, a, return_rank):
    if not return_rank:
        return x
    return [x, rank] if np.ndim(a) > 2 else (x, rank)


@_scipys_when_plain(sl.pinv)
def pinv(a, *, atol=None, rtol=None, return_rank=False, check_finite=True):
    """``scipy.linalg.pinv``: the pseudo-inverse (singular values above ``atol + rtol · max(s)`` kept,
    matrix by matrix), SciPy's values; differentiable w.r.t. ``a`` with np.linalg.pinv's rule (constant
    rank). The rank of ``return_rank`` is an integer.

    >>> import numpy as np, mutagrad as mg
    >>> from mutagrad.scipy.linalg import pinv
    >>> float(mg.grad(lambda t: pinv(t * np.eye(2))[0, 0])(2.0))  # d (1/t) / dt
    -0.25
    """
    (a,) = _as_arrays(a)
    _check_finite(check_finite, a)
    rel, rank = _pinv_cutoff("pinv", a, atol, rtol, lambda: sl.svd(bottom(a), compute_uv=False, check_finite=False))
    return _with_rank(_pinv(a, atol=atol, rtol=rtol, rel=rel), rank, a, return_rank)


@scipy_primitive("scipy.linalg.pinvh")
def _pinvh(a, *, lower=True, atol=None, rtol=None, rel=None):
    return sl.pinvh(a, atol=atol, rtol=rtol, lower=lower, check_finite=False)


# (np.linalg.pinv's rules of the Hermitian matrix read from one triangle, the cotangent folded onto it)
_pinv_rules(_pinvh, lambda a, lower=True, **kw: _lin._herm_in(a, lower),
            lambda g, lower=True, **kw: _lin._herm_in_T(g, lower))


@_scipys_when_plain(sl.pinvh)
def pinvh(a, atol=None, rtol=None, lower=True, return_rank=False, check_finite=True):
    """``scipy.linalg.pinvh``: the pseudo-inverse of the Hermitian matrix read from the ``lower``
    (upper) triangle of ``a`` (eigenvalues of magnitude above ``atol + rtol · max|λ|`` kept), SciPy's
    values; differentiable w.r.t. that triangle with np.linalg.pinv's rule (constant rank).

    >>> import numpy as np, mutagrad as mg
    >>> from mutagrad.scipy.linalg import pinvh
    >>> mg.grad(lambda a: pinvh(a)[0, 0])(np.diag([2.0, 0.0]))  # a₀₀⁻¹; the zero eigenvalue cut off
    array([[-0.25,  0.  ],
           [ 0.  ,  0.  ]])
    """
    (a,) = _as_arrays(a)
    _check_finite(check_finite, a)
    rel, rank = _pinv_cutoff("pinvh", a, atol, rtol, lambda: np.abs(sl.eigh(
        bottom(a), lower=lower, eigvals_only=True, driver="ev", check_finite=False)))
    rank = rank if np.ndim(a) > 2 else int(rank)  # (SciPy's: a Python int, a stack's an array)
    return _with_rank(_pinvh(a, lower=lower, atol=atol, rtol=rtol, rel=rel), rank, a, return_rank)


@scipy_primitive("scipy.linalg.lstsq")
def _lstsq(a, b, *, cond=None, lapack_driver=None, rcond=None):
    x, res, rank, s = sl.lstsq(a, b, cond=cond, check_finite=False, lapack_driver=lapack_driver)
    return x, res, rank, np.empty(0) if s is None else s  # (gelsy's None: an empty placeholder)


def _lstsq_residues(d, res):
    """The tangent ``d`` of np.linalg.lstsq's residuals (one per column; a vector b's of shape (1,)) as
    one of SciPy's ``res`` (a vector b's a number); zero where SciPy returns none."""
    return ZERO if is_zero(d) or not np.size(res) else np.reshape(d, np.shape(res))


@rrule(_lstsq)
def _lstsq_rrule(a, b, *, cond=None, lapack_driver=None, rcond=None):
    y = _lstsq(a, b, cond=cond, lapack_driver=lapack_driver, rcond=rcond)
    _, pb = _lin._lstsq_rrule(a, b, rcond)

    def pullback(g):
        gx, gres, _, gs = g
        gres = ZERO if is_zero(gres) or not np.size(y[1]) else np.reshape(gres, (-1,))
        return pb((gx, gres, ZERO, ZERO if lapack_driver == "gelsy" else gs))

    return y, pullback


@frule(_lstsq)
def _lstsq_frule(primals, tangents, *, cond=None, lapack_driver=None, rcond=None):
    y = _lstsq(*primals, cond=cond, lapack_driver=lapack_driver, rcond=rcond)
    dx, dres, _, ds = _lin._lstsq_frule(primals, tangents, rcond)[1]
    return y, (dx, _lstsq_residues(dres, y[1]), ZERO, ZERO if lapack_driver == "gelsy" else ds)


@_overwrites(sl.lstsq, overwrite_a=("a", ("a",)), overwrite_b=("b", ("a", "b")), batch=(("a", 2), ("b", "1|2")))
@_scipys_when_plain(sl.lstsq)
def lstsq(a, b, cond=None, overwrite_a=False, overwrite_b=False, check_finite=True, lapack_driver=None):
    """``scipy.linalg.lstsq``: (x, residues, rank, s), SciPy's values (its drivers; ``s`` None for
    "gelsy"), differentiable w.r.t. ``a`` and ``b`` in x, the residues and ``s`` with np.linalg.lstsq's
    rules, singular values below ``cond`` (machine precision) · max(s) cut off; the rank is an integer.
    Leading axes are batches, solved matrix by matrix as SciPy's.

    >>> import numpy as np, mutagrad as mg
    >>> from mutagrad.scipy.linalg import lstsq
    >>> # the mean of b fits a column of ones: x = sum(b) / 3
    >>> mg.grad(lambda b: lstsq(np.ones((3, 1)), b)[0][0])(np.array([1.0, 2.0, 6.0]))
    array([0.33333333, 0.33333333, 0.33333333])
    """
    a, b = _as_arrays(a, b)
    _check_finite(check_finite, a, b)

    def one(a, b):
        if np.ndim(a) != 2:
            raise ValueError("Input array a should be 2D")
        if np.size(a) == 0:  # (no entries: SciPy's zeros, of no derivative)
            return tuple(sl.lstsq(bottom(a), bottom(b), cond, check_finite=False, lapack_driver=lapack_driver))
        dt = np.result_type(bottom(a), bottom(b), np.float32)
        rcond = np.finfo(dt.char.lower()).eps if cond is None else cond  # (LAPACK's: machine precision)
        x, res, rank, s = _lstsq(a, b, cond=cond, lapack_driver=lapack_driver, rcond=rcond)
        return x, res, rank, None if lapack_driver == "gelsy" else s

    return _over_batch("lstsq", one, (a, b), (2, "1|2"))


@_scipys_when_plain(sl.norm)
def norm(a, ord=None, axis=None, keepdims=False, check_finite=True):
    """``scipy.linalg.norm``: np.linalg.norm (differentiated as mutagrad differentiates it; SciPy's
    BLAS and LAPACK norms agree with it to rounding), with SciPy's ``check_finite``.

    >>> import numpy as np, mutagrad as mg
    >>> from mutagrad.scipy.linalg import norm
    >>> mg.grad(norm)(np.array([3.0, 4.0]))  # x / |x|
    array([0.6, 0.8])
    """
    (a,) = _as_arrays(a)
    _check_finite(check_finite, a)
    return np.linalg.norm(a, ord=ord, axis=axis, keepdims=keepdims)


# -- eig, eigvals: np.linalg's rules, SciPy's conventions -----------------------------------------------
# SciPy's eig is LAPACK's geev, as np.linalg.eig is: the same eigenvectors (unit norm, the largest
# component real), whose rules (rules/linalg.py) differentiate them. SciPy returns the values complex
# (the vectors real where every value is), the left vectors with left=True (right ones of Aᴴ, matched to
# conj(λ)), and the values' pairs (λ, 1) with homogeneous_eigvals=True. np.linalg's results are put in
# SciPy's order and the vectors given SciPy's signs (the two LAPACK builds may differ in either), read
# from SciPy's own call on the values. The generalized problem (b given) has no rule.


def _refuse_generalized_eig(name, b):
    if b is None:
        return
    from ...errors import UnsupportedInputError

    raise UnsupportedInputError(
        f"scipy.linalg.{name}(a, b), the generalized eigenproblem A v = λ B v, of traced matrices at "
        f"{user_line()} has no rule in mutagrad. For an invertible b, its eigenvalues (and right eigenvectors, "
        f"up to their normalisation) are those of solve(b, a): mutagrad.scipy.linalg.{name}("
        "mutagrad.scipy.linalg.solve(b, a)), which is differentiated; for a singular b and an invertible a "
        "(a DSGE model's lead matrix), the inverted pencil: the eigenvalues μ of solve(a, b) are 1/λ, the "
        "infinite λ at μ = 0; for a Hermitian a and a positive definite b, mutagrad.scipy.linalg.eigh(a, b).")


def _square_for_eig(a):
    if np.ndim(a) < 2 or np.shape(a)[-1] != np.shape(a)[-2]:
        raise ValueError("expected square matrix")


def _signs_of(V, want):
    """``V`` with each column's sign turned to that of the same column ``want`` (SciPy's) where they
    point opposite ways (a constant factor: the derivative is that of the column so turned)."""
    overlap = np.real(np.sum(np.conj(np.asarray(bottom(V))) * want, axis=-2))
    return V * np.where(overlap < 0, -1.0, 1.0)[..., None, :]


def _complex_values(w):
    dt = np.result_type(bottom(w), np.complex64)
    return w if bottom(w).dtype == dt else w.astype(dt)


def _homogeneous(w, homogeneous_eigvals):
    """SciPy's values: (λ, 1) pairs for ``homogeneous_eigvals``."""
    if not homogeneous_eigvals:
        return w
    return np.stack([w, np.ones(np.shape(w), bottom(w).dtype)], axis=-2)


@_overwrites(sl.eig, overwrite_a=("a", ("a",)), overwrite_b=("b", ("b",)), batch=(("a", 2), ("b", 2)))
@_scipys_when_plain(sl.eig)
def eig(a, b=None, left=False, right=True, overwrite_a=False, overwrite_b=False, check_finite=True,
        homogeneous_eigvals=False):
    """``scipy.linalg.eig``: the eigenvalues (complex) and the ``left`` and ``right`` eigenvectors of a
    general matrix, in SciPy's order and with its signs; differentiable w.r.t. ``a`` with the rules of
    np.linalg.eig (simple eigenvalues for the vectors). The generalized problem (``b``) has no rule
    (UnsupportedInputError, naming the rewrite through solve(b, a)).

    >>> import numpy as np, mutagrad as mg
    >>> from mutagrad.scipy.linalg import eig
    >>> a = lambda t: np.array([[1.0, 0.0], [0.0, 2.0]]) + t * np.array([[0.0, 0.0], [0.0, 1.0]])
    >>> mg.grad(lambda t: eig(a(t))[0].real.sum())(0.0)  # λ = 1, 2 + t
    1.0
    """
    _refuse_generalized_eig("eig", b)
    (a,) = _as_arrays(a)
    _check_finite(check_finite, a)
    _square_for_eig(a)
    if np.size(a) == 0:  # (no entries: SciPy's empty arrays)
        return sl.eig(bottom(a), left=left, right=right, homogeneous_eigvals=homogeneous_eigvals)
    want = sl.eig(bottom(a), left=True, right=True, check_finite=False)
    w, V = np.linalg.eig(a)
    perm = _lin._one_to_one(want[0], np.asarray(bottom(w)))
    w = _complex_values(np.take_along_axis(w, perm, axis=-1))
    out = [_homogeneous(w, homogeneous_eigvals)]
    if left:
        out.append(_signs_of(_lin._left_vectors(a, w), want[1]))
    if right:
        out.append(_signs_of(np.take_along_axis(V, perm[..., None, :], axis=-1), want[2]))
    if len(out) == 1:
        return out[0]
    return out if np.ndim(a) > 2 else tuple(out)


@_overwrites(sl.eigvals, overwrite_a=("a", ("a",)), batch=(("a", 2), ("b", 2)))
@_scipys_when_plain(sl.eigvals)
def eigvals(a, b=None, overwrite_a=False, check_finite=True, homogeneous_eigvals=False):
    """``scipy.linalg.eigvals``: the eigenvalues (complex) of a general matrix, in SciPy's order;
    differentiable w.r.t. ``a`` with the rule of np.linalg.eigvals (at simple eigenvalues). The
    generalized problem (``b``) has no rule, as for :func:`eig`.

    >>> import numpy as np, mutagrad as mg
    >>> from mutagrad.scipy.linalg import eigvals
    >>> mg.grad(lambda t: eigvals([[0.0, 1.0], [-t, 0.0]])[0].imag ** 2)(4.0)  # λ = ±i√t
    1.0
    """
    _refuse_generalized_eig("eigvals", b)
    (a,) = _as_arrays(a)
    _check_finite(check_finite, a)
    _square_for_eig(a)
    if np.size(a) == 0:
        return sl.eigvals(bottom(a), homogeneous_eigvals=homogeneous_eigvals)
    w = np.linalg.eigvals(a)
    perm = _lin._one_to_one(sl.eigvals(bottom(a), check_finite=False), np.asarray(bottom(w)))
    return _homogeneous(_complex_values(np.take_along_axis(w, perm, axis=-1)), homogeneous_eigvals)


# -- orthogonal_procrustes, subspace_angles: SciPy's code on the differentiable svd and orth -------


@_scipys_when_plain(sl.orthogonal_procrustes)
def orthogonal_procrustes(A, B, check_finite=True):
    """``scipy.linalg.orthogonal_procrustes``: (R, scale), the orthogonal (unitary) R minimising
    ‖A R - B‖ and the sum of the singular values of Aᴴ B, by SciPy's formula R = U Vᴴ of the svd of
    Aᴴ B (its values), differentiable w.r.t. A and B where those singular values are distinct (the
    rules of svd). Leading axes are batches.

    >>> import numpy as np, mutagrad as mg
    >>> from mutagrad.scipy.linalg import orthogonal_procrustes
    >>> # A = I, B = t diag(2, 1): R = I, scale = 3t
    >>> float(mg.grad(lambda t: orthogonal_procrustes(np.eye(2), t * np.diag([2.0, 1.0]))[1])(1.0))
    3.0
    """
    A, B = _as_arrays(A, B)
    _check_finite(check_finite, A, B)

    def one(A, B):
        if np.ndim(A) != 2:
            raise ValueError(f"expected ndim to be 2, but observed {np.ndim(A)}")
        if np.shape(A) != np.shape(B):
            raise ValueError(f"the shapes of A and B differ ({np.shape(A)} vs {np.shape(B)})")
        u, w, vt = svd(np.matmul(_mT(B), np.conjugate(A)).T)
        return np.matmul(u, vt), np.sum(w)

    return _over_batch("orthogonal_procrustes", one, (A, B), (2, 2))


def _subspace_angles(A, B):
    """SciPy's subspace_angles of two matrices (scipy/linalg/_decomp_svd.py), step by step."""
    _check_finite(True, A)
    if np.ndim(A) != 2:
        raise ValueError(f"expected 2D array, got shape {np.shape(A)}")
    QA = orth(A)
    _check_finite(True, B)
    if np.ndim(B) != 2:
        raise ValueError(f"expected 2D array, got shape {np.shape(B)}")
    if np.shape(B)[0] != np.shape(QA)[0]:
        raise ValueError(f"A and B must have the same number of rows, got {np.shape(QA)[0]} and {np.shape(B)[0]}")
    QB = orth(B)
    QA_H_QB = np.dot(np.conjugate(QA.T), QB)
    sigma = svdvals(QA_H_QB)
    if np.shape(QA)[1] >= np.shape(QB)[1]:
        B = QB - np.dot(QA, QA_H_QB)
    else:
        B = QA - np.dot(QB, np.conjugate(QA_H_QB.T))
    mask = np.asarray(bottom(sigma)) ** 2 >= 0.5
    mu_arcsin = np.arcsin(np.clip(svdvals(B), -1.0, 1.0)) if mask.any() else 0.0
    return np.where(mask, mu_arcsin, np.arccos(np.clip(sigma[::-1], -1.0, 1.0)))


@_scipys_when_plain(sl.subspace_angles)
def subspace_angles(A, B):
    """``scipy.linalg.subspace_angles``: the principal angles between the ranges of A and B (largest
    first), SciPy's steps with the differentiable orth and svdvals (its values); differentiable where
    the angles are distinct and inside (0, π/2). Leading axes are batches.

    >>> import numpy as np, mutagrad as mg, mutagrad.numpy as mnp
    >>> from mutagrad.scipy.linalg import subspace_angles
    >>> # the lines along (1, 0) and (cos t, sin t) meet at the angle t
    >>> float(mg.grad(lambda t: subspace_angles(np.array([[1.0], [0.0]]), mnp.array([[np.cos(t)], [np.sin(t)]]))[0])(0.5))
    1.0
    """
    A, B = _as_arrays(A, B)
    return _over_batch("subspace_angles", _subspace_angles, (A, B), (2, 2))


# -- special matrices: SciPy's constructions on the values (exact copies) ---------------------------


@_scipys_when_plain(sl.diagsvd)
def diagsvd(s, M, N):
    """``scipy.linalg.diagsvd``: the M x N matrix with ``s`` on its diagonal (leading axes of ``s``
    are batches).

    >>> import numpy as np, mutagrad as mg
    >>> from mutagrad.scipy.linalg import diagsvd
    >>> mg.grad(lambda s: diagsvd(s, 3, 2).sum())(np.array([1.0, 2.0]))
    array([1., 1.])
    """
    (s,) = _as_arrays(s)

    def one(s):
        part = np.diag(s)
        dt = bottom(part).dtype
        if np.shape(s)[0] == M:
            return np.concatenate([part, np.zeros((M, N - M), dtype=dt)], axis=1)
        if np.shape(s)[0] == N:
            return np.concatenate([part, np.zeros((M - N, N), dtype=dt)], axis=0)
        raise ValueError("Length of s must be M or N.")

    return _over_batch("diagsvd", one, (s,), (1,))


@_scipys_when_plain(sl.companion)
def companion(a):
    """``scipy.linalg.companion``: the companion matrix of the polynomial ``a`` (first row
    -a[1:] / a[0], ones below the diagonal); leading axes are batches.

    >>> import numpy as np, mutagrad as mg
    >>> from mutagrad.scipy.linalg import companion
    >>> mg.grad(lambda a: companion(a)[0, 0])(np.array([2.0, 4.0, 1.0]))  # -a₁ / a₀
    array([ 1. , -0.5,  0. ])
    """
    (a,) = _as_arrays(a)
    a = np.atleast_1d(a)
    n = np.shape(a)[-1]
    if n < 2:
        raise ValueError("The length of `a` along the last axis must be at least 2.")
    if np.any(np.asarray(bottom(a))[..., 0] == 0):
        raise ValueError("The first coefficient(s) of `a` (i.e. elements of `a[..., 0]`) must not be zero.")
    first_row = -a[..., 1:] / (1.0 * a[..., 0:1])
    dt = bottom(first_row).dtype
    src = np.zeros((n - 1, n - 1), dtype=np.intp)  # (slot 0: zero, 1: one, 2 + j: first_row[j])
    src[0, :] = 2 + np.arange(n - 1)
    src[np.arange(1, n - 1), np.arange(0, n - 2)] = 1
    fixed = np.broadcast_to(np.array([0, 1], dtype=dt), np.shape(first_row)[:-1] + (2,))
    return _placed(np.concatenate([fixed, first_row], axis=-1), src)


@_scipys_when_plain(sl.leslie)
def leslie(f, s):
    """``scipy.linalg.leslie``: the Leslie matrix of fecundities ``f`` (first row) and survival
    rates ``s`` (below the diagonal); leading axes are batches.

    >>> import numpy as np, mutagrad as mg
    >>> from mutagrad.scipy.linalg import leslie
    >>> mg.grad(lambda s: leslie(np.array([0.0, 1.0, 2.0]), s).sum())(np.array([0.5, 0.5]))
    array([1., 1.])
    """
    f, s = (np.atleast_1d(v) for v in _as_arrays(f, s))

    def one(f, s):
        if np.shape(f)[-1] != np.shape(s)[-1] + 1:
            raise ValueError("Incorrect lengths for f and s. The length of s along the last axis must be one "
                             "less than the length of f.")
        if np.shape(s)[-1] == 0:
            raise ValueError("The length of s must be at least 1.")
        n = np.shape(f)[-1]
        dt = (np.asarray(bottom(f))[0] + np.asarray(bottom(s))[0]).dtype
        src = np.zeros((n, n), dtype=np.intp)  # (slot 0: zero, 1 + j: f[j], 1 + n + j: s[j])
        src[0] = 1 + np.arange(n)
        src[np.arange(1, n), np.arange(0, n - 1)] = 1 + n + np.arange(n - 1)
        return _placed(np.concatenate([np.zeros(1, dt), f.astype(dt), s.astype(dt)]), src)

    return _over_batch("leslie", one, (f, s), (1, 1))


@_scipys_when_plain(sl.fiedler)
def fiedler(a):
    """``scipy.linalg.fiedler``: F[i, j] = |a[i] - a[j]| (leading axes of ``a`` are batches).

    >>> import numpy as np, mutagrad as mg
    >>> from mutagrad.scipy.linalg import fiedler
    >>> mg.grad(lambda a: fiedler(a)[0, 1])(np.array([1.0, 3.0]))
    array([-1.,  1.])
    """
    (a,) = _as_arrays(a)
    a = np.atleast_1d(a)
    if np.size(a) == 0:
        return np.asarray([], dtype=np.float64)
    if np.size(a) == 1:
        return np.asarray([[0.0]])
    return np.abs(a[..., :, np.newaxis] - a[..., np.newaxis, :])


def _fiedler_companion(a):
    """SciPy's fiedler_companion of one polynomial: its assignments made on slots of an index matrix
    (slot 0: zero, 1: one, k + 1: -a[k] / a[0])."""
    if np.size(a) <= 2:
        if np.size(a) == 2:
            return np.reshape(-(a / a[0])[-1], (1, 1))
        return np.array([], dtype=bottom(a).dtype)
    if np.asarray(bottom(a))[0] == 0.0:
        raise ValueError("Leading coefficient is zero.")
    a = a / a[0]
    n = np.size(a) - 1
    src = np.zeros((n, n), dtype=np.intp)
    src[range(3, n, 2), range(1, n - 2, 2)] = 1
    src[range(2, n, 2), range(1, n - 1, 2)] = 1 + np.arange(3, n + 1, 2)
    src[range(0, n - 2, 2), range(2, n, 2)] = 1
    src[range(0, n - 1, 2), range(1, n, 2)] = 1 + np.arange(2, n + 1, 2)
    src[[0, 1], 0] = [2, 1]
    return _placed(np.concatenate([np.array([0, 1], dtype=bottom(a).dtype), -a[1:]]), src)


@_scipys_when_plain(sl.fiedler_companion)
def fiedler_companion(a):
    """``scipy.linalg.fiedler_companion``: the Fiedler companion matrix of the polynomial ``a``
    (its entries ±a[k] / a[0] and ones); leading axes are batches.

    >>> import numpy as np, mutagrad as mg
    >>> from mutagrad.scipy.linalg import fiedler_companion
    >>> mg.grad(lambda a: fiedler_companion(a)[0, 0])(np.array([2.0, 4.0, 1.0]))  # -a₁ / a₀
    array([ 1. , -0.5,  0. ])
    """
    (a,) = _as_arrays(a)
    a = np.atleast_1d(a)
    if np.ndim(a) > 1:
        return _over_batch("fiedler_companion", _fiedler_companion, (a,), (1,))
    return _fiedler_companion(a)


def _convolution_matrix(a, n, mode):
    """SciPy's convolution_matrix of one vector: a Toeplitz matrix of the zero-padded a."""
    zeros = np.zeros(n - 1, dtype=bottom(a).dtype)
    az, raz = np.concatenate([a, zeros]), np.concatenate([a[::-1], zeros])
    if mode == "full":
        col0, row0 = az, raz[-n:]
    else:
        tb = min(n, np.shape(a)[0]) - 1
        te = tb if mode == "valid" else tb - tb // 2
        tb = tb if mode == "valid" else tb // 2
        col0, row0 = az[tb:np.shape(az)[0] - te], raz[-n - tb:np.shape(raz)[0] - tb]
    return toeplitz(col0, row0)


@_scipys_when_plain(sl.convolution_matrix)
def convolution_matrix(a, n, mode="full"):
    """``scipy.linalg.convolution_matrix``: A with A @ v = np.convolve(a, v, mode) for v of length
    ``n``, a Toeplitz matrix of ``a`` (leading axes are batches).

    >>> import numpy as np, mutagrad as mg
    >>> from mutagrad.scipy.linalg import convolution_matrix
    >>> mg.grad(lambda a: convolution_matrix(a, 2).sum())(np.array([1.0, 2.0]))  # each entry twice
    array([2., 2.])
    """
    if n <= 0:
        raise ValueError("n must be a positive integer.")
    (a,) = _as_arrays(a)
    if np.size(a) == 0:
        raise ValueError("len(a) must be at least 1.")
    if mode not in ("full", "valid", "same"):
        raise ValueError("'mode' argument must be one of ('full', 'valid', 'same')")
    if np.ndim(a) > 1:
        return _over_batch("convolution_matrix", lambda v: _convolution_matrix(v, n, mode), (a,), (1,))
    return _convolution_matrix(a, n, mode)


# -- banded Cholesky: cholesky_banded, cho_solve_banded ----------------------------------------------
# The factor's band cb is in solve_banded's form: U's (upper form) with bandwidths (0, p), L's (lower
# form) with (p, 0), A = Uᴴ U = L Lᴴ; write A = Gᴴ G (G = U, or Lᴴ). cho_solve_banded, x = A⁻¹ b:
# b̄ = A⁻¹ x̄ (A Hermitian: the same solve), Ḡ = G (Ā + Āᴴ) = -(G b̄) xᴴ - (G x) b̄ᴴ on the band
# (L̄ = Ḡᴴ), products of banded matrices with vectors only; ẋ = A⁻¹ (ḃ - Ġᴴ G x - Gᴴ Ġ x).
# cholesky_banded: the dense rule of cholesky above (L̇ = L Φ(L⁻¹ Ȧ L⁻ᴴ), which keeps the band) on the
# dense matrices of the bands, the band of the result taken. The entries of the band's unused corner
# are the input's, passed through (SciPy's LAPACK call leaves them as they were).


def _band_dense(ab, lower, upper):
    """The n x n matrix of the band ``ab`` (solve_banded's form: A[i, j] = ab[u + i - j, j])."""
    n = np.shape(ab)[-1]
    i, j = np.indices((n, n))
    r = upper + i - j
    return np.where((r >= 0) & (r <= lower + upper), ab[..., np.clip(r, 0, lower + upper), j], 0)


def _band_inside(lower, upper, n):
    """The entries of a band (l + u + 1, n) that hold entries of the matrix (not its unused corners)."""
    r, j = np.indices((lower + upper + 1, n))
    i = j + r - upper
    return (i >= 0) & (i < n)


def _dense_band(M, lower, upper):
    """The band (solve_banded's form) of the n x n matrix ``M``, zeros in its unused corners."""
    n = np.shape(M)[-1]
    r, j = np.indices((lower + upper + 1, n))
    i = j + r - upper
    return np.where(_band_inside(lower, upper, n), M[..., np.clip(i, 0, n - 1), j], 0)


def _factor_band(cb, lower):
    """(l, u) of the factor's band ``cb``: L's (p, 0) or U's (0, p)."""
    p = np.shape(cb)[-2] - 1
    return (p, 0) if lower else (0, p)


def _factor_times(cb, v, lower, adjoint=False):
    """G v (Gᴴ v with ``adjoint``) for the factor G of A = Gᴴ G (U, or Lᴴ) of the band ``cb``."""
    lo, up = _factor_band(cb, lower)
    if lower != adjoint:  # (Lᴴ v, Uᴴ v: the adjoint's band)
        return _band_times(_band_adjoint(cb, lo, up), v, up, lo)
    return _band_times(cb, v, lo, up)


@scipy_primitive("scipy.linalg.cho_solve_banded")
def _cho_solve_banded(cb, b, *, lower=False):
    return sl.cho_solve_banded((cb, lower), b, check_finite=False)


@rrule(_cho_solve_banded)
def _cho_solve_banded_rrule(cb, b, *, lower=False):
    x = _cho_solve_banded(cb, b, lower=lower)

    def pullback(g):
        bbar = _cho_solve_banded(cb, g, lower=lower)
        lo, up = _factor_band(cb, lower)
        gb, gx = _factor_times(cb, bbar, lower), _factor_times(cb, x, lower)  # G b̄, G x
        if lower:  # L̄ = Ḡᴴ = -x (G b̄)ᴴ - b̄ (G x)ᴴ
            cbar = _band_of_outer(x, gb, lo, up) + _band_of_outer(bbar, gx, lo, up)
        else:
            cbar = _band_of_outer(gb, x, lo, up) + _band_of_outer(gx, bbar, lo, up)
        return _project(cbar, cb), _project(bbar, b)

    return x, pullback


@frule(_cho_solve_banded)
def _cho_solve_banded_frule(primals, tangents, *, lower=False):
    (cb, b), (tc, tb) = primals, tangents
    x = _cho_solve_banded(cb, b, lower=lower)
    if is_zero(tc) and is_zero(tb):
        return x, ZERO
    rhs = _zero_if(tb, x)
    if not is_zero(tc):  # Ȧ x = Ġᴴ G x + Gᴴ Ġ x
        rhs = rhs - (_factor_times(tc, _factor_times(cb, x, lower), lower, adjoint=True)
                     + _factor_times(cb, _factor_times(tc, x, lower), lower, adjoint=True))
    return x, _cho_solve_banded(cb, rhs, lower=lower)


@_overwrites(sl.cho_solve_banded, overwrite_b=("b", ("cb_and_lower", "b")),
             batch=((("cb_and_lower", 0), 2), ("b", "1|2")))
@_scipys_when_plain(sl.cho_solve_banded)
def cho_solve_banded(cb_and_lower, b, overwrite_b=False, check_finite=True):
    """``scipy.linalg.cho_solve_banded``: x with A x = b from :func:`cholesky_banded`'s ``(cb,
    lower)``; SciPy's values, differentiable w.r.t. the factor's band and ``b`` (every order).

    >>> import numpy as np, mutagrad as mg
    >>> from mutagrad.scipy.linalg import cho_solve_banded
    >>> cb = np.array([[0.0, 0.5], [2.0, 1.0]])  # U = [[2, 0.5], [0, 1]]: A = Uᵀ U = [[4, 1], [1, 1.25]]
    >>> mg.grad(lambda b: cho_solve_banded((cb, False), b).sum())(np.ones(2))  # A⁻¹ 1
    array([0.0625, 0.75  ])
    """
    cb, lower = cb_and_lower
    cb, b = _as_arrays(cb, b)
    _check_finite(check_finite, cb, b)
    return _as_column(_cho_solve_banded, cb, b, lower=bool(lower))


@scipy_primitive("scipy.linalg.cholesky_banded")
def _cholesky_banded(ab, *, lower=False):
    return sl.cholesky_banded(ab, lower=lower, check_finite=False)


def _banded_factor_dense(cb, lower):
    """L (dense) with A = L Lᴴ, from the factor's band ``cb``."""
    F = _band_dense(cb, *_factor_band(cb, lower))
    return F if lower else _mH(F)


@rrule(_cholesky_banded)
def _cholesky_banded_rrule(ab, *, lower=False):
    cb = _cholesky_banded(ab, lower=lower)

    def pullback(g):
        band = _factor_band(cb, lower)
        inside = _band_inside(*band, np.shape(ab)[-1])
        G = _band_dense(np.where(inside, g, 0), *band)  # (the factor's cotangent, dense: L̄, or Ū = L̄ᴴ)
        abar = _chol_cotangent(_banded_factor_dense(cb, lower), G if lower else _mH(G), lower)
        return (np.where(inside, _dense_band(abar, *band), g),)

    return cb, pullback


@frule(_cholesky_banded)
def _cholesky_banded_frule(primals, tangents, *, lower=False):
    (ab,), (t,) = primals, tangents
    cb = _cholesky_banded(ab, lower=lower)
    gab, p = _general_band(t, lower)  # (Ȧ: the Hermitian matrix of the band read, as LAPACK reads it)
    ldot = _chol_tangent(_banded_factor_dense(cb, lower), _band_dense(gab, p, p))
    band = _factor_band(cb, lower)
    return cb, np.where(_band_inside(*band, np.shape(ab)[-1]), _dense_band(ldot if lower else _mH(ldot), *band), t)


@_overwrites(sl.cholesky_banded, overwrite_ab=("ab", ("ab",)), batch=(("ab", 2),))
@_scipys_when_plain(sl.cholesky_banded)
def cholesky_banded(ab, overwrite_ab=False, lower=False, check_finite=True):
    """``scipy.linalg.cholesky_banded``: the band of the Cholesky factor (U with A = Uᴴ U, or L with
    A = L Lᴴ if ``lower``) of the Hermitian positive definite band ``ab`` (one triangle); SciPy's
    values, differentiable w.r.t. the band read (the diagonal's imaginary part, which LAPACK does not
    read, has none), every order; the unused corner of the band passes through.

    >>> import numpy as np, mutagrad as mg
    >>> from mutagrad.scipy.linalg import cholesky_banded
    >>> ab = np.array([[0.0, 1.0], [4.0, 2.0]])  # A = [[4, 1], [1, 2]]: U₀₁ = a₀₁ / √a₀₀
    >>> mg.grad(lambda ab: cholesky_banded(ab)[0, 1])(ab)  # d/da₀₀ = -a₀₁ / (2 a₀₀^1.5) = -1/16
    array([[ 0.    ,  0.5   ],
           [-0.0625,  0.    ]])
    """
    (ab,) = _as_arrays(ab)
    _check_finite(check_finite, ab)
    return _cholesky_banded(ab, lower=bool(lower))


# -- eigh_tridiagonal, eigvalsh_tridiagonal: eigh of the dense tridiagonal matrix ---------------------
# The symmetric tridiagonal T of d and e, dense, and the rules of eigh above (lower=True: d and e are
# the triangle read); the pairs SciPy's call selects (a run of the ascending values: all, by index, or
# by value) taken from all of them, with the eigenvectors of driver "evd" (whose signs are stable) given
# SciPy's signs. The values agree with SciPy's to rounding (LAPACK's tridiagonal solvers).


def _tridiagonal(d, e):
    """The symmetric tridiagonal matrix of ``d`` and ``e`` (leading axes broadcast)."""
    n = np.shape(d)[-1]
    batch = np.broadcast_shapes(np.shape(d)[:-1], np.shape(e)[:-1])
    dt = np.result_type(bottom(d), bottom(e))
    ee = np.concatenate([np.broadcast_to(e, batch + (n - 1,)), np.zeros(batch + (1,), dt)], axis=-1)
    i, j = np.indices((n, n))
    return np.where(i == j, d[..., j], np.where(i == j + 1, ee[..., j], np.where(j == i + 1, ee[..., i], 0)))


def _selected(x, first, k, axis):
    """The ``k`` entries of ``x`` along ``axis`` (-1, or -2's columns: -1 too) from ``first`` on (one
    start per matrix of a stack)."""
    first = np.asarray(first)
    if first.ndim == 0 or np.all(first == first.flat[0]):
        f = int(first.flat[0]) if first.ndim else int(first)
        return x[..., f:f + k]
    idx = first[..., None] + np.arange(k)
    return np.take_along_axis(x, idx if axis == -1 else idx[..., None, :], axis=-1)


@_scipys_when_plain(sl.eigh_tridiagonal)
def eigh_tridiagonal(d, e, eigvals_only=False, select="a", select_range=None, check_finite=True, tol=0.0,
                     lapack_driver="auto"):
    """``scipy.linalg.eigh_tridiagonal``: the eigenvalues (and vectors) of the real symmetric
    tridiagonal matrix of ``d`` and ``e``, SciPy's selection (``select``, ``select_range``) and
    vectors' signs, the values equal to SciPy's to rounding; differentiable w.r.t. ``d`` and ``e`` by
    the rules of eigh of the dense matrix. Leading axes are batches.

    >>> import numpy as np, mutagrad as mg
    >>> from mutagrad.scipy.linalg import eigh_tridiagonal
    >>> # [[0, e], [e, 0]] has eigenvalues ±e
    >>> float(mg.grad(lambda e: eigh_tridiagonal(np.zeros(2), e, eigvals_only=True)[1])(np.array([2.0]))[0])
    1.0
    """
    d, e = _as_arrays(d, e)
    _check_finite(check_finite, d, e)
    want = sl.eigh_tridiagonal(np.asarray(bottom(d)), np.asarray(bottom(e)), eigvals_only=eigvals_only,
                               select=select, select_range=select_range, check_finite=False, tol=tol,
                               lapack_driver=lapack_driver)  # (SciPy's selection, signs and errors)
    ws = np.asarray(want if eigvals_only else want[0])
    k = np.shape(ws)[-1]
    if k == 0:  # (nothing selected)
        return want
    T = _tridiagonal(d, e)
    every = np.linalg.eigvalsh(np.asarray(bottom(T)))
    if select in ("a", "all", 0):
        first = 0
    elif select in ("i", "index", 2):
        first = int(select_range[0])
    else:  # (by value: where SciPy's first value falls among all)
        first = np.argmin(np.abs(every - ws[..., :1]), axis=-1)
    if eigvals_only:
        return _selected(_eigvalsh(T), first, k, -1)
    w, V = _eigh(T, driver="evd")
    out = [_selected(w, first, k, -1), _signs_of(_selected(V, first, k, -2), want[1])]
    return out if np.ndim(T) > 2 else tuple(out)


@_scipys_when_plain(sl.eigvalsh_tridiagonal)
def eigvalsh_tridiagonal(d, e, select="a", select_range=None, check_finite=True, tol=0.0, lapack_driver="auto"):
    """``scipy.linalg.eigvalsh_tridiagonal``: the eigenvalues of :func:`eigh_tridiagonal`.

    >>> import numpy as np, mutagrad as mg
    >>> from mutagrad.scipy.linalg import eigvalsh_tridiagonal
    >>> mg.grad(lambda d: eigvalsh_tridiagonal(d, np.array([0.0]))[1])(np.array([1.0, 3.0]))
    array([0., 1.])
    """
    return eigh_tridiagonal(d, e, eigvals_only=True, select=select, select_range=select_range,
                            check_finite=check_finite, tol=tol, lapack_driver=lapack_driver)


# -- structure queries: answers about the values (yes or no, two integers) ----------------------------


def _values(a):
    """The plain values of ``a`` (a traced array's, a list of traced numbers'), for a query about them."""
    (a,) = _as_arrays(a)
    return np.array(bottom(a)) if isinstance(a, Tracer) else a


def bandwidth(a):
    """``scipy.linalg.bandwidth`` of the values: (lower, upper), integers (no derivative).

    >>> import numpy as np, mutagrad as mg
    >>> from mutagrad.scipy.linalg import bandwidth
    >>> float(mg.grad(lambda a: a.sum() * bandwidth(a)[1])(np.triu(np.ones((3, 3))))[0, 0])  # (0, 2): 2 · sum
    2.0
    """
    return sl.bandwidth(_values(a))


def issymmetric(a, atol=None, rtol=None):
    """``scipy.linalg.issymmetric`` of the values: a boolean (no derivative).

    >>> import numpy as np, mutagrad as mg
    >>> from mutagrad.scipy.linalg import issymmetric
    >>> mg.grad(lambda a: a.sum() if issymmetric(a) else 0.0)(np.eye(2))
    array([[1., 1.],
           [1., 1.]])
    """
    return sl.issymmetric(_values(a), atol=atol, rtol=rtol)


def ishermitian(a, atol=None, rtol=None):
    """``scipy.linalg.ishermitian`` of the values: a boolean (no derivative).

    >>> import numpy as np, mutagrad as mg
    >>> from mutagrad.scipy.linalg import ishermitian
    >>> mg.grad(lambda a: a.sum() if ishermitian(a) else 2.0 * a.sum())(np.array([[1.0, 2.0], [3.0, 1.0]]))
    array([[2., 2.],
           [2., 2.]])
    """
    return sl.ishermitian(_values(a), atol=atol, rtol=rtol)


# -- array_like arguments ----------------------------------------------------------
# SciPy takes nested lists for its matrices (solve([[a, b], [b, c]], rhs)); a list that holds traced
# values becomes one traced array (mutagrad.numpy.array: NumPy's dtype for the nesting) before the
# rules see it, which take arrays, one cotangent each. (The tuples cho_solve and lu_solve take,
# (factor, lower) and (lu, piv), are not matrices and are left as they are.)

_ARRAY_PARAMETERS = frozenset(("a", "b", "A", "ab", "c", "r", "q", "e", "s", "arrs"))


def _nested_tracer(v) -> bool:
    t = type(v)
    if t is list or t is tuple:
        return any(_nested_tracer(i) for i in v)
    return isinstance(v, Tracer)


def _array_likes(fn):
    from ... import numpy as mnp

    params = inspect.signature(fn).parameters
    names = [p for p in params if p in _ARRAY_PARAMETERS]
    varargs = next((p for p in names if params[p].kind is inspect.Parameter.VAR_POSITIONAL), None)
    positions = {p: k for k, p in enumerate(params) if p in names and p != varargs
                 and params[p].kind is not inspect.Parameter.KEYWORD_ONLY}

    def as_array(v):
        t = type(v)
        return mnp.array(v) if (t is list or t is tuple) and _nested_tracer(v) else v

    @functools.wraps(fn)
    def call(*args, **kwargs):
        if varargs is not None:
            args = tuple(as_array(v) for v in args)
        else:
            for p, k in positions.items():
                if k < len(args):
                    v = args[k]
                    if type(v) is list or type(v) is tuple:
                        args = (*args[:k], as_array(v), *args[k + 1:])
        for p in names:
            v = kwargs.get(p)
            if type(v) is list or type(v) is tuple:
                kwargs[p] = as_array(v)
        return fn(*args, **kwargs)

    return call


for _name in ("block_diag", "cho_factor", "cho_solve", "cholesky", "circulant", "det", "eigh", "eigvalsh", "expm",
              "hankel", "inv", "khatri_rao", "logm", "lu", "lu_factor", "lu_solve", "null_space", "orth", "qr", "solve",
              "solve_banded", "solve_continuous_are", "solve_continuous_lyapunov", "solve_discrete_are",
              "solve_discrete_lyapunov", "solve_lyapunov", "solve_sylvester", "solve_triangular", "solveh_banded",
              "sqrtm", "svd", "svdvals", "toeplitz"):
    globals()[_name] = _array_likes(globals()[_name])
del _name
