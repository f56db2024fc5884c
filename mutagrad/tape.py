"""Reverse mode: the rewinding tape.

The tape records, in execution order, one entry per primitive call that
touches an active value:

* ``OpRecord``: ``y = f(x1, x2, ...)`` with a fresh output storage and the
  rule's pullback. Inputs are referenced (storage + view geometry), never
  copied.
* ``GatherRecord``: ``y = x[idx]`` that copies (integer/boolean indices, or a
  scalar element): the pullback scatters straight into ``x``'s adjoint, so an
  element loop costs O(1) per read, not O(size of x).
* ``WriteRecord``: ``x[idx] = v``. It saves only the elements it overwrites,
  and only if an earlier pullback may read them (the storage was
  *captured*).

The reverse pass walks the tape backwards. At a write it first swaps the
saved elements back in (so every earlier pullback sees the values its
operation saw), then moves the adjoint: ``v̄ += sum_to_shape(ā[idx])`` and
``ā[idx] = 0``. Afterwards the writes are swapped forward again, so the
caller's arrays hold exactly what a plain call left in them.

Why "captured" is enough to decide what to save: the flag goes from False
to True when a pullback comes to read the storage, so every write after
that saves, and every write before it needs no restoring (no pullback reads
the older values). A write over the whole storage that saved what it
overwrote sets it back to False: the reverse pass swaps the saved values
back in before any earlier pullback runs, so the values it wrote are read by
no pullback until one captures the storage again.
"""
from __future__ import annotations

import functools
import sys
import weakref

import numpy as np

from .config import strict as _config_strict
from .core import (
    capture,
    read_within,
    element_offsets,
    ZERO_IF_REAL,
    note_equality,
    _any_complex,
    apply_inner,
    has_repeats,
    index_positions,
    foreign_subclass,
    subclass_error,
    STATE,
    scipy_sparse_object,
    ArrayTracer,
    ScalarTracer,
    _SCALAR_OP_TYPES,
    _FLOAT_SCALARS,
    _is_basic,
    _ptr,
    _may_self_overlap,
    ew_rule,
    Geom,
    Level,
    Storage,
    Tracer,
    _FLOAT_KINDS,
    _flatten_args,
    _unflatten_args,
    bottom,
    output_leaves,
    view_of,
    write_readonly,
)
from .core import LOCKED as _LOCKED
from .core import _bits
from .pytree import tree_unflatten
from .registry import (DROP_SIZE, EAGER, LAYOUT_EXACT, EagerPartial, ElementwisePullback, _fp_event, drop_unread,
                       ew_cotangent, fixed_errstate, pins, unpin, view_kept)
from .runs import _NO, MAX_ROWS, RunStorage, ScalarRun, arg_kind, element_position
from .runs import operation as run_operation
from .errors import (
    MutationError,
    NotImplementedTangentError,
    complex_into_real,
    line_text,
    replayed_line,
    replayed_place,
    user_line,
    warn_complex_cast,
)
from .tangents import (
    AbstractZero,
    NoTangent,
    NotImplementedTangent,
    Thunk,
    ZeroTangent,
    is_zero,
    no_tangent_for_active,
    project,
    unbroadcast,
)

SHARED = "shared"  # ReverseLevel.accumulate's answer: the cotangent became a shared adjoint buffer


def release_adj(s) -> bool:
    """Storage ``s`` stops holding its shared adjoint buffer (``Storage.adjshared``): whether
    other storages still hold it, so that ``s`` must not write into it (a copy, or a new sum)."""
    sh = s.adjshared
    s.adjshared = None
    if sh.n > 1:
        sh.n -= 1
        return True
    return False


class _Share:
    """The number of storages whose adjoint is one buffer (or views of it): ``Storage.adjshared``
    of each. The last holder left may write into it; the others copy it first."""

    __slots__ = ("n",)

    def __init__(self):
        self.n = 0

_ndarray = np.ndarray
_getrefcount = sys.getrefcount


class _Dead:
    pass


_GONE = weakref.ref(_Dead())  # a dead reference: the root of a storage whose memory went to another


class _Elided:
    """The value of a tracer whose buffer an operator took for its result (ReverseLevel._elide):
    a stack temporary, which nothing can use again, unless NumPy's object-array loop handed
    the operator an element of an object array (borrowed, with a temporary's reference count
    and history). Any use of it raises, instead of reading the result's values."""

    __slots__ = ()

    def _error(self, *args, **kwargs):
        raise MutationError(
            f"a traced array kept in an object array (dtype=object) was used at {user_line()} after an "
            "operator on that object array took its memory for a result: mutagrad computes a*b + c into the "
            "temporary a*b as NumPy does, and NumPy's loop over an object array passes its elements as "
            "temporaries. Keep traced arrays in a list (or stack them into one array) instead of an object array.")

    __array__ = __getitem__ = __len__ = __iter__ = __float__ = _error

    def __getattr__(self, name):
        if name.startswith("__"):  # (protocol probes: hasattr(obj, "__wrapped__") and the like)
            raise AttributeError(name)
        self._error()


_ELIDED = _Elided()


def _buffer_refs():
    """The reference count ReverseLevel._elide sees of an array held by nothing but its
    tracer (``into._value``), the list of values and its own local: measured, with the
    same structure, on this interpreter."""
    holder = _Dead()
    a = np.empty(1)
    holder.value = a
    vals = [a]
    del a
    buf = vals[0]
    return _getrefcount(buf)


_BUFFER_REFS = _buffer_refs()
RUN_AFTER = 4  # element-level records in a row before a run starts (see ReverseLevel.in_run)


def _flatten_like(res, tree):
    """The leaves of a pullback's cotangents, one per leaf of the arguments
    (``tree`` from core._flatten_args): a list or tuple argument takes a list
    or tuple of cotangents, or one cotangent for the whole (an array for a
    list of plain numbers NumPy made one array of, or NoTangent), which gives
    its leaves no cotangent."""
    leaves: list = []
    for r, node in zip(res, tree):
        _flat_like(r, node, leaves)
    return leaves


class _Whole:
    """The cotangent a pullback returned for a whole list or tuple argument, in place of a
    cotangent per element: it gives the plain numbers there none (NumPy made an array of
    them), and is an error for a traced element (OpRecord.backward)."""

    __slots__ = ("ct",)

    def __init__(self, ct):
        self.ct = ct


def _flat_like(r, node, leaves):
    if node is None:
        leaves.append(r)
    elif type(r) is list or type(r) is tuple:
        if len(r) != len(node[1]):
            from .errors import RuleError

            raise RuleError(
                f"a reverse rule returned {len(r)} cotangents for an argument of {len(node[1])} elements "
                f"(a pullback returns one cotangent per element of a list argument), at {user_line()}")
        for rc, nc in zip(r, node[1]):
            _flat_like(rc, nc, leaves)
    else:
        whole = None if r is None or isinstance(r, AbstractZero) else _Whole(r)
        leaves.extend([whole] * _count_leaves(node))


def _count_leaves(node):
    return 1 if node is None else sum(_count_leaves(c) for c in node[1])


class OpRecord:
    __slots__ = ("pullback", "inputs", "outputs", "prim", "line", "outtree", "intree")

    def __init__(self, pullback, inputs, outputs, prim, line, outtree, intree=None):
        self.pullback = pullback
        self.inputs = inputs  # list of (storage, geom, leafpos)
        self.outputs = outputs  # list of Storage or None (views / non-float outputs)
        self.prim = prim
        self.line = line
        self.outtree = outtree
        self.intree = intree  # the arguments' lists and tuples (core._flatten_args), or None

    def backward(self, level):
        outs = self.outputs
        poison = None
        cts = []
        any_ct = False
        shares = None
        for s in outs:
            if s is None or s.adj is None:
                cts.append(level.ZERO)
            else:
                cts.append(s.adj)
                any_ct = True
            if s is not None:
                if s.poison is not None:  # (a poisoned output may have no numeric cotangent)
                    poison = s.poison
                s.adj = s.adjbuf = None
                if s.adjshared is not None:  # (counted as a holder until its cotangents are read)
                    shares = [s.adjshared] if shares is None else [*shares, s.adjshared]
                    s.adjshared = None
        if self.prim in FOOTPRINTS:  # (its pullback may ask which parts of its outputs were read: read_mask)
            st = STATE
            prev, st.footprint = st.footprint, (level, self)
            try:
                self._backward(level, poison, cts, any_ct)
            finally:
                st.footprint = prev
        else:
            self._backward(level, poison, cts, any_ct)
        if shares is not None:
            for sh in shares:
                sh.n -= 1

    def _backward(self, level, poison, cts, any_ct):
        if poison is not None:
            for s, g, _ in self.inputs:
                level.accumulate(s, g, poison, self)
            return
        if not any_ct:
            return
        if self.outtree is None:
            res = self.pullback(cts[0])
        else:
            res = self.pullback(self.outtree(cts))
        if type(res) is not tuple:
            res = tuple(res) if type(res) is list else (res,)
        leaves = _flatten_args(res)[0] if self.intree is None else _flatten_like(res, self.intree)
        fresh = self.prim.fresh_cts
        adopted = []
        for s, g, pos in self.inputs:
            if pos >= len(leaves):
                from .errors import RuleError

                raise RuleError(
                    f"the reverse rule of {self.prim.name} returned {len(res)} cotangents whose "
                    f"structure does not match its arguments (no cotangent for argument leaf {pos}); "
                    "a pullback returns one cotangent per positional argument, a list for a list argument."
                )
            ct = leaves[pos]
            if ct is None:
                continue
            if type(ct) is _Whole:
                from .errors import RuleError

                raise RuleError(
                    f"the pullback of {self.prim.name}'s reverse rule returned one {type(ct.ct).__name__} as the "
                    "cotangent of a list or tuple argument holding traced values: return a list (or tuple) with "
                    f"one cotangent per element, as the argument has (differentiating the call at {line_text(self.line) or user_line()})")
            if type(ct) is Thunk:
                ct = ct()
            if type(ct) is NoTangent and self.prim.user:
                ct = no_tangent_for_active(self.prim, pos, line_text(self.line) or user_line())
            own = fresh and not any(ct is c for c in cts) and not any(ct is c for c in adopted)
            if own:
                adopted.append(ct)  # the same array returned twice is adopted at most once
            level.accumulate(s, g, ct, self, own)


def _broadcast_to(vals, shape) -> bool:
    """Whether the operands ``vals`` broadcast to ``shape`` exactly: in the common case, operands of that shape
    and numbers, without np.broadcast_shapes."""
    for v in vals:
        s = getattr(v, "shape", ())
        if s != shape and s != ():
            return np.broadcast_shapes(*[np.shape(v) for v in vals]) == shape
    return True


# primitives whose pullbacks ask which parts of their outputs the operations after them read
# (read_mask): np.linalg.eigh's, svd's and mutagrad.scipy.linalg.eigh's, whose vectors of repeated
# values have no derivative
FOOTPRINTS: set = set()


def read_mask(k, products=True, outputs=False, kinks=True):
    """For the pullback running now, of a primitive in FOOTPRINTS: a boolean array over its
    output ``k`` (its storage's whole memory, in its shape), True where a record after it reads
    it (takes it or a view of it as an operand, gathers from it, writes it somewhere): where it
    is False no cotangent reaches the output from the operations after it, not even a zero one
    (a cotangent the caller gives an output of the function, as a plain array, is the caller's
    number; a traced one, an outer differentiation's, counts as a read of all of it). None where
    that is not known (no such pullback running, a record of another kind, a run of element
    operations reading it, an operand that is all of it). ``products``: a product's operand is not read
    where the other factor is exactly 0 (right for a value whose first derivative is right there and
    second is not, |x| ** 2; not for a norm's own value, whose first derivative is wrong too: r * r).
    ``outputs``: an output given the caller's cotangent counts as read even where it is the primitive's own
    (a kink's value returned as it is, np.abs(x) ** 2: regress76). ``kinks``: the exemptions above, of a
    kink's value (a power above 2 where it is 0, ``products``); without them every read counts: the vectors of
    repeated eigenvalues, a basis of the tied space that no value at the tie speaks for, are read by
    (w - 1) * V ** 2 where w - 1 is 0 (its derivative d(w) V ** 2 depends on the basis: regress81)."""
    fp = STATE.footprint
    if fp is None:
        return None
    level, rec = fp
    s = rec.outputs[k] if k < len(rec.outputs) else None
    tape = level.tape
    at = level.at
    if s is None or not (0 <= at < len(tape)) or tape[at] is not rec:
        return None
    return _footprint(level, at + 1, s, 0, products, outputs, kinks)


def _elementwise_output(r):
    """The one output storage of an elementwise operation recorded by the general path (an OpRecord: np.abs of
    a 0-d value), of its operands' shape; else None."""
    outs = r.outputs
    if not r.prim.elementwise or len(outs) != 1 or type(outs[0]) is not Storage:
        return None
    return outs[0] if all(st.shape == outs[0].shape for st, g, _ in r.inputs if g is None) else None


POWERS = frozenset(("np.power", "np.float64.__pow__", "np.float_power"))


def plain_exponent(r):
    """The exponent of power record ``r`` as a real float where it is a plain real number (not traced, 0-d), else
    None (np.square: 2)."""
    if r.prim.name == "np.square":
        return 2.0
    xs = getattr(r, "xs", None)
    if r.prim.name not in POWERS or xs is None or len(xs) != 2:
        return None
    p = xs[1]
    if isinstance(p, Tracer) or np.ndim(p) != 0 or not np.isreal(p):
        return None
    return float(np.real(p))


def _power_above_one(r, s) -> bool:
    """Whether elementwise record ``r`` raises storage ``s`` (its base, alone) to a plain power above 1."""
    p = plain_exponent(r)
    return p is not None and p > 1 and all(pos == 0 for st, _, pos in r.inputs if st is s)


def _kink_reaches(r, pos, sub, shape, products=True):
    """Where elementwise record ``r``'s operand ``pos`` is read, of the elements of its output (of ``shape``)
    that are read (``sub``, or None: all of them): all of those, but for a power above 2 of it, not where it
    is 0 (r ** 3 at r = 0: its first and second derivatives are 0 whatever r's are, a cubic radial basis
    function at a node: regress74), and, with ``products``, for a product, not where the other factor is
    exactly 0 (there its second derivative in that operand is 0, so a kink's wrong one does not reach the
    result: Glen's flux np.abs(ds) ** 2 * ds on a flat surface, the regress71 tester; the term 2 k' f' of
    (k f)'' keeps a kink's wrong first derivative k', so not for a norm's value, r * r: regress75)."""
    xs = getattr(r, "xs", None)
    if xs is None or not xs:
        return sub
    p = plain_exponent(r) if pos == 0 else None
    if p is not None and p > 2:
        other = np.asarray(bottom(xs[0]))
    elif (products and r.prim.name in ("np.multiply", "np.float64.__mul__") and len(xs) == 2
          and (any(q == 1 - pos for _, _, q in r.inputs) or (type(xs[1 - pos]) is np.ndarray and xs[1 - pos].ndim))):
        # (a constant number 0 stands for the kink's own value, 0 * s; a constant array's zeros are weights, K2 *
        # np.abs(psih) ** 2 of a spectral energy whose mean mode is 0: ns2d)
        other = np.asarray(bottom(xs[1 - pos]))
    else:
        return sub
    if other.dtype.kind not in "fc" or not np.all(np.isfinite(other)):
        return sub
    try:
        nonzero = np.broadcast_to(other != 0, shape)
    except ValueError:
        return sub
    return nonzero if sub is None else sub & nonzero


def _unread_target(level, at, r, products, kinks, depth) -> bool:
    """Whether no record after write record ``r`` (at tape position ``at``) reads the part of its destination it
    wrote (a pairwise distance written element by element, r[i, j] = norm(X[i] - X[j]), of which the loop after
    reads r[i, j] for i < j alone: the self-distances' kinks are not read: regress81)."""
    dest = r.dest
    sub = _footprint(level, at + 1, dest, depth + 1, products, kinks=kinks)
    if sub is None or sub.shape != dest.shape:
        return False
    try:
        buf, root = dest.new_mirror(np.zeros)
        root[...] = sub
        return not np.any(np.asarray((root if r.geom is None else view_of(buf, r.geom))[r.idx]) != 0)
    except (IndexError, TypeError, ValueError):
        return False


# (elementwise steps followed from a kink's value to the write that overwrites it: np.exp(-np.sqrt(3) * r / ls)
# before np.fill_diagonal is four; three warned of a Matern kernel's self-distances: the geostats tester)
_ELEMENTWISE_DEPTH = 6


def _footprint(level, start, s, depth, products=True, outputs=False, kinks=True):
    """read_mask's answer for storage ``s`` from the records ``start`` on; a copy gathered from it
    (``V[:, np.argsort(w)]``, the materials tester) reads only the elements whose copies are read
    (the same question for the copy, a few gathers deep); an element a write overwrites before any
    read is not read after it (``np.fill_diagonal(r, np.inf)`` of a distance matrix's zeros: the
    warnnoise2 tester)."""
    tape = level.tape
    if any(o is s for o in level.seeded) or ((depth or outputs) and any(o is s for o in level.outputs_given)):
        return None  # (an output made of the kink's value reads it: its cotangent, the caller's, reaches it)
    buf = root = None
    dead = dead_root = None  # (the elements overwritten before any read: a mirror, once there is one)

    def mark(g):  # (the view ``g`` of the mirror of s's memory, to mark)
        nonlocal buf, root
        if buf is None:
            buf, root = s.new_mirror(np.zeros)
        return root if g is None else view_of(buf, g)

    def put(g, idx):  # (mark the elements ``idx`` of view ``g`` as read, where they are not overwritten)
        if dead is None:
            mark(g)[idx] = 1
            return
        view, gone = mark(g), dead_root if g is None else view_of(dead, g)
        view[idx] = np.where(gone[idx] != 0, view[idx], 1)

    for i in range(start, len(tape)):
        r = tape[i]
        t = type(r)
        marks = ()
        out = r.out if t is EWRecord else _elementwise_output(r) if t is OpRecord else None
        if type(out) is Storage and depth < _ELEMENTWISE_DEPTH and any(st is s for st, _, _ in r.inputs):
            # an elementwise operation reads an element of s where it reads its own output's element
            # (1 / r of a distance matrix whose diagonal np.fill_diagonal then overwrites: the proteinff tester)
            # (past a power above 1 of s, its first derivative is right at 0: a product with a factor 0 there
            # does not carry the kink, |r| ** 2 * y at y = 0: regress76)
            sub = _footprint(level, i + 1, out, depth + 1, products or _power_above_one(r, s), kinks=kinks)
            marks = []
            for st, g, pos in r.inputs:
                if st is s:
                    used = _kink_reaches(r, pos, sub, out.shape, products) if kinks else sub
                    if used is not None and mark(g).shape == used.shape:
                        if used.any():
                            put(g, used)
                    else:
                        marks.append((g, Ellipsis))
        elif t is EWRecord or t is OpRecord:
            marks = [(g, Ellipsis) for st, g, _ in r.inputs if st is s]
        elif t is GatherRecord:
            if r.src is s:
                sub = (_footprint(level, i + 1, r.out, depth + 1, products, kinks=kinks)
                       if depth < 3 and type(r.out) is Storage else None)
                if sub is None or sub.shape != r.out.shape:
                    marks = ((r.geom, r.idx),)
                elif sub.any():  # (the elements of s whose copies are read)
                    view = mark(r.geom)
                    picked = np.zeros(view.shape, dtype=bool)
                    picked.reshape(-1)[np.asarray(np.arange(view.size).reshape(view.shape)[r.idx])[sub]] = True
                    put(r.geom, picked)
        elif t is WriteRecord:
            if r.vsrc is s:  # (its value read first: x[1:] = x[:-1])
                # a whole array written over a whole one (an in-place elementwise step's result, V *= sign) is read
                # where the elements it becomes are read (the eigdegen tester)
                whole = depth < 3 and r.vgeom is None and r.dest is not s and type(r.dest) is Storage
                sub = (_footprint(level, i + 1, r.dest, depth + 1, products, kinks=kinks)
                       if whole and r.full and r.dest.shape == s.shape else None)
                if sub is not None and sub.shape == s.shape:
                    if sub.any():
                        put(None, sub)
                elif whole and not r.full and _unread_target(level, i, r, products, kinks, depth):
                    pass  # (a value written into a part of an array whose part no one reads: r[i, i] = norm(0))
                else:
                    put(r.vgeom, Ellipsis)
            if r.dest is s:
                if dead is None:
                    dead, dead_root = s.new_mirror(np.zeros)
                (dead_root if r.geom is None else view_of(dead, r.geom))[r.idx] = 1
        elif t is ScalarRun:
            if any(st is s for st, _ in r.ext):  # (an element loop's rows: the elements they gather, the views
                # they take as operands; w[1] + w[3] + V[2, 0] read V's column 0 alone: the vibration tester)
                if s.root_geom() is not None:  # (positions are those of a C-contiguous root)
                    return None
                marks = [(g, idx if idx is Ellipsis else np.unravel_index(idx, s.shape)) for g, idx in r.reads(s)]
        else:
            return None
        for g, idx in marks:
            if g is None and idx is Ellipsis and dead is None:
                return None  # (all of it)
            put(g, idx)
    if buf is None:
        return np.zeros(s.shape, dtype=bool)
    return root != 0


def _ties_of(vals):
    """Where the two operands of a maximum or minimum (``vals`` as its fast path got them: values, or its eager
    partials, 2 a win, 1 a tie, 0 a loss) are equal, as the operation saw them, for the kink watches (elementwise.
    _tie_mask): a later write into an operand (y[:] = np.maximum(y, 2 * y)) leaves the record other values there,
    in which the watch read a tie that never was (regress127). False where none ties; None where it cannot be told."""
    if len(vals) != 2:
        return None
    a, b = vals
    if type(a) is EagerPartial or type(b) is EagerPartial:
        ep = next((v for v in (a, b) if type(v) is EagerPartial and v.value is not None), None)
        if ep is None:
            return None
        tie = ep.value == 1
    else:
        try:  # (an equality test raises no floating-point event: no errstate, microseconds a call)
            tie = np.equal(a if type(a) is _ndarray else bottom(a), b if type(b) is _ndarray else bottom(b))
        except (TypeError, ValueError):
            return None
    return tie if tie.any() else False


def _tie_moves(vals, tie):
    """Where, among the ties ``tie`` (:func:`_ties_of`) of a maximum's or minimum's two operands ``vals``, their
    tangents at the forward level that traces them (mg.hessian's outer level, one direction per run) differ, as
    the operation saw them; None where that cannot be told (an operand that is no such tracer, eager partials).
    A later write into an operand changes its tangent there too: the watch read it then, and two copies of one
    element, tied and moving alike, were taken for a kink (regress132, np.minimum(a[:6], a[6:], out=a[6:]) and
    then a.flat[[1, 4, 4]] = a[:3])."""
    if tie is None or tie is False or len(vals) != 2:
        return None
    tangents = []
    for v in vals:
        if not isinstance(v, Tracer) or v._level.mode != "fwd":
            return None
        t = v._level.tangent_of(v)
        tangents.append(np.zeros(np.shape(bottom(v))) if is_zero(t) else np.asarray(bottom(t)))
    try:
        return np.broadcast_to(tangents[0] != tangents[1], tie.shape) & tie
    except ValueError:
        return None


class EWRecord:
    """An elementwise operation with one fresh output, recorded by the fast
    path: the pullback's state (partials, kept arguments, output) lives in
    the record itself. Reads like an :class:`OpRecord`."""

    __slots__ = ("inputs", "out", "prim", "line", "partials", "xs", "y")
    pullback = None
    outtree = None

    def __init__(self, partials, xs, y, inputs, out, prim, line):
        self.inputs = inputs  # list of (storage, geom, leafpos) of the active arguments
        self.out = out
        self.prim = prim
        self.line = line
        self.partials = partials
        self.xs = xs
        self.y = y

    @property
    def outputs(self):
        return (self.out,)

    def backward(self, level):
        s = self.out
        g = s.adj
        if g is None and s.poison is None:
            return
        s.adj = s.adjbuf = None
        inputs = self.inputs
        if s.poison is not None:
            if s.adjshared is not None:
                release_adj(s)
            for st, geom, _ in inputs:
                level.accumulate(st, geom, s.poison, self)
            return
        partials, xs, y = self.partials, self.xs, self.y
        # the dead output adjoint is ours, unless another storage holds it too: the last input
        # may compute its cotangent in it, and one input may adopt it; inputs whose cotangent
        # is g itself and that have no adjoint yet share it (`a + b`: no copy for the second)
        sh = s.adjshared
        if sh is not None:
            s.adjshared = None
            if sh.n <= 1:
                sh = None  # the other holders have let go of it
        mine = sh  # s stays among g's holders until its inputs' cotangents are computed
        donate = sh is None
        holder = None  # the input that adopted g
        if len(inputs) > 1 and inputs[0][1] is None and inputs[-1][1] is not None:
            inputs = inputs[::-1]  # views cannot adopt the donation: let them go first
        last = inputs[-1]
        for inp in inputs:
            st, geom, pos = inp
            d = partials[pos]
            if geom is not None and d == -1 and type(d) is int and g.shape == xs[pos].shape:
                level.accumulate(st, geom, g, self, False, True)  # a view: subtract, no -g
                continue
            if d is None and self.prim.user:  # (a user's defelementwise: None for an argument whose
                # derivative is asked for is no silent zero)
                level.accumulate(st, geom, no_tangent_for_active(self.prim, pos, line_text(self.line) or user_line()),
                                 self)
                continue
            ct = ew_cotangent(g, d, xs, y, pos, donate and inp is last)
            if ct is g:
                took = level.accumulate(st, geom, ct, self, donate, share=True)
                if took is True:
                    donate = False  # adopted as an adjoint buffer: no longer ours
                    holder = st
                elif took is SHARED:
                    donate = False
                    if sh is None:
                        mine = sh = _Share()
                        sh.n = 1
                        if holder is not None:
                            holder.adjshared = sh
                            sh.n = 2
                    st.adjshared = sh
                    sh.n += 1
            else:  # computed just now: nobody else holds it
                level.accumulate(st, geom, ct, self, True)
        if mine is not None:
            mine.n -= 1


class GatherRecord:
    __slots__ = ("src", "geom", "idx", "out", "dups", "line")

    def __init__(self, src, geom, idx, out, dups, line):
        self.src = src
        self.geom = geom
        self.idx = idx
        self.out = out
        self.dups = dups
        self.line = line

    def backward(self, level):
        out = self.out
        g = out.adj
        out.adj = out.adjbuf = None
        src = self.src
        if out.poison is not None:
            if out.adjshared is not None:
                release_adj(out)
            level.accumulate(src, self.geom, out.poison, self)
            return
        if g is None:
            return
        sh = out.adjshared
        if sh is not None:  # (counted as a holder of g until it is scattered)
            out.adjshared = None
            self._scatter(level, src, g)
            sh.n -= 1
        else:
            self._scatter(level, src, g)

    def _scatter(self, level, src, g):
        av = level.adjview(src, self.geom)
        if self.geom is not None and self.geom.overlap:
            _add_overlapping(src, self.geom, g, level, self.idx)
        elif self.dups:
            np.add.at(av, self.idx, g)
        elif type(av) is _ndarray:
            av[self.idx] += g
        else:
            av[self.idx] = av[self.idx] + g


class WriteRecord:
    __slots__ = ("dest", "geom", "idx", "saved", "vsrc", "vgeom", "vshape", "winners", "line", "dv", "full",
                 "block")

    def __init__(self, dest, geom, idx, saved, dv, line):
        self.dest = dest
        self.geom = geom
        self.idx = idx
        self.saved = saved
        # the destination's value at this level (ndarray or outer tracer), where the write saved what it overwrote
        # (swap puts it back); else None: the record does not keep the array alive (`t = x * 1.0; t += 0.5` in a
        # loop kept every step's t)
        self.dv = dv if saved is not None else None
        self.vsrc = None
        self.vgeom = None
        self.vshape = None
        self.winners = None
        self.line = line
        self.full = False  # overwrites the whole storage with a whole value of its shape
        self.block = None  # (first element, count): overwrites one contiguous block with a whole value

    def swap(self):
        """Exchange the saved elements with the current ones (undo or redo)."""
        dv, idx = self.dv, self.idx
        cur = dv[idx]
        cur = cur.copy() if hasattr(cur, "copy") else cur
        try:
            dv[idx] = self.saved
        except ValueError:
            if type(dv) is not _ndarray or dv.flags.writeable:
                raise
            write_readonly(dv, idx, self.saved)  # (the program made it read-only after the write)
        self.saved = cur

    def backward(self, level):
        if self.saved is not None:
            self.swap()
        dest = self.dest
        if dest.adj is None and dest.poison is None:
            return
        vsrc = self.vsrc
        if self.full and vsrc.adj is None and dest.poison is None and type(dest.adj) is _ndarray:
            # every element was overwritten: the value takes the adjoint buffer over, and the
            # destination's earlier contents have a zero adjoint (None: nothing to zero or copy)
            vsrc.adj = vsrc.adjbuf = dest.adj
            dest.adj = dest.adjbuf = None
            if dest.adjshared is not None:  # (the holder changes, their count does not)
                vsrc.adjshared = dest.adjshared
                dest.adjshared = None
            return
        if (self.block is not None and vsrc.adj is None and dest.poison is None and type(dest.adj) is _ndarray
                and dest.adjbuf is dest.adj):
            # a block was overwritten: the value takes that block of the adjoint buffer as its own
            # (a view nobody else holds), the destination gets a new buffer: the rest copied, the
            # block zero. One pass over the block instead of two (copy it out, zero it).
            k, m = self.block
            old = dest.adj
            sh = dest.adjshared
            if sh is not None:
                dest.adjshared = None  # (its place among the holders goes to vsrc)
            of = old.reshape(-1)
            region = of[k:k + m].reshape(vsrc.shape)
            if of.size - m < m and not (of[:k].any() or of[k + m:].any()):
                # the rest is zero (often: a stencil's ends, written after its interior): the
                # destination's earlier contents have a zero adjoint, no buffer
                dest.adj = dest.adjbuf = None
            else:
                new = np.empty_like(old)
                nf = new.reshape(-1)
                nf[:k] = of[:k]
                nf[k + m:] = of[k + m:]
                nf[k:k + m] = 0
                dest.adj = dest.adjbuf = new
            vsrc.adj = vsrc.adjbuf = region
            if sh is not None and sh.n > 1:  # old is other storages' too: so is the block
                vsrc.adjshared = sh
            else:
                level.own_view(region)
            return
        av = level.adjview(dest, self.geom)
        idx = self.idx
        if vsrc is not None:
            if dest.poison is not None:
                level.accumulate(vsrc, self.vgeom, dest.poison, self)
                g = None
            else:
                g = av[idx]
                if self.winners is not None:
                    g = np.where(self.winners, g, 0)
                elif hasattr(g, "copy"):
                    g = g.copy()
        av[idx] = 0
        if vsrc is not None and g is not None:
            level.accumulate(vsrc, self.vgeom, unbroadcast(g, self.vshape), self, True)

    def redo(self):
        if self.saved is not None:
            self.swap()


# id -> array: copies a rule made and keeps to itself, writable (NumPy's np.interp copies read-only
# tables at every call: 1 ms for 10^5 samples) but never written, so that snapshot takes them as they are
PRIVATE: dict = {}


def _view_key(a, key):
    """The snapshot key of plain view ``a``: the array owning its memory and where in it the view
    lies, so that the view made anew at each use (``A.T @ r`` in a loop) finds the copy of the last
    one (its own identity changes each time); ``key`` where the memory is not an array's."""
    root = a.base
    for _ in range(32):
        b = root.base if type(root) is _ndarray else None
        if b is None:
            break
        root = b
    if type(root) is not _ndarray or root.base is not None:
        return key
    return (id(root), a.__array_interface__["data"][0] - root.__array_interface__["data"][0], a.shape, a.strides,
            a.dtype)


def _span(a):
    """(``a`` with its negative strides turned, its data at the lowest address; a 1-D view of all the
    memory ``a`` spans, element by element; the index that turns them), or None where its strides are
    off the element grid."""
    isz = a.itemsize
    if a.size == 0 or any(st % isz for st in a.strides):
        return None
    flip = tuple(slice(None, None, -1) if st < 0 else slice(None) for st in a.strides) + (Ellipsis,)
    lo = a[flip]  # (the Ellipsis: a view of a 0-d array too, not its scalar)
    n = sum((k - 1) * st for k, st in zip(lo.shape, lo.strides)) // isz + 1
    return lo, np.lib.stride_tricks.as_strided(lo, shape=(n,), strides=(isz,)), flip


def _layout_copy(a):
    """(a private read-only copy of plain array ``a`` with ``a``'s own strides, the copy of the memory it
    spans), where that memory holds at most twice ``a``'s elements: an overlapping view (sliding
    windows, a broadcast) then costs its memory, not its elements, and NumPy's loops, which it picks by
    layout, give the same bits on the copy (a compact copy of a broadcast or strided array is laid out
    otherwise: its sums differ in the last bit). None otherwise (a column of a large matrix: a compact
    copy)."""
    got = _span(a)
    if got is None or got[1].size > 2 * a.size:
        return None
    lo, flat, flip = got
    buf = flat.copy()
    buf.flags.writeable = False  # (so that the copy's views are known to be constants: _memory_owner)
    snap = np.lib.stride_tricks.as_strided(buf, shape=lo.shape, strides=lo.strides, writeable=False)[flip]
    return snap, buf


def _memory_owner(a):
    """The array whose memory read-only ``a`` views, if that memory cannot change: it is read-only
    too (down the chain of bases: sliding_window_view's and as_strided's pass through an object
    that holds the array), or bytes; None where it may (a writable array, a bytearray, a
    memoryview of one, an mmap)."""
    o = a
    for _ in range(32):
        b = getattr(o, "base", None)
        if b is None:
            break
        o = b
    if isinstance(o, memoryview):
        o = o.obj
    if issubclass(type(o), _ndarray):  # (type: a tracer says it is an ndarray)
        return o if not o.flags.writeable else None
    return o if type(o) is bytes else None


def _saved_copy(v):
    """A copy of the values a write overwrites, which a pullback may read (``captured``). Not a step of
    the program: an outer forward-mode jacobian's runs do not compare it (RunGroup.note), since memory
    no run set (np.empty's, written row by row) differs from run to run where no operation reads it."""
    if not hasattr(v, "copy"):
        return v
    if not isinstance(v, Tracer):
        return v.copy()
    st = STATE
    st.off_program += 1
    try:
        return v.copy()
    finally:
        st.off_program -= 1


READONLY_SUM_LIMIT = 1 << 20  # (larger read-only constants are not summed, as api.CHECKSUM_LIMIT's arguments: two
# passes over an 8 MB matrix cost half the gradient of A @ x; documented, docs/mutation.md)


class ReverseLevel(Level):
    mode = "rev"
    ZERO = ZeroTangent()
    at = -1  # the record whose backward runs now (read_mask)
    seeded = ()  # the storages of the outputs given traced cotangents (read_mask)
    outputs_given = ()  # the storages of the outputs given any cotangent (read_mask: what an operation reading
    # the kink's value makes)

    def __init__(self, strict=None, record_lines=False):
        super().__init__()
        self.tape: list = []
        if strict is None:
            strict = _config_strict()
        self.strict = strict
        self.record_lines = record_lines or strict
        # one-element operations recorded compactly in runs (see runs.py): not when every
        # record must carry its source line
        self.runs = not self.record_lines
        # the kinds of operation runs record, shared by this level's runs: (kinds, key -> code,
        # key -> how many kinds with baked constants it has; see runs.operation)
        self.run_kinds: tuple = ([], {}, {})
        self.snapshots: dict = {}
        self.exclusive = None  # id -> array: adjoint memory handed over in blocks (see own_view)

    # -- forward pass -------------------------------------------------------

    def _line(self):
        return replayed_line(STATE.replay) if self.record_lines else None

    def _place(self, prim):
        """The line of a record of ``prim``: its text when lines are recorded; else, for a rule
        that may not implement a derivative, the frame's place (text made when one is missing).
        Inside the pullback of an inner level's record, the line of the operation it differentiates
        (STATE.replay: a second derivative's refusal names the user's gammainc, not mg.hessian's line)."""
        if self.record_lines:
            return self._line()
        return replayed_place(STATE.replay) if prim is not None and prim.names_line else None

    def snapshot(self, a):
        """A private copy of an array a pullback will read, which code this level
        cannot see may overwrite: a plain array, or an outer level's traced
        array (a closure, an argument not differentiated here), copied at its
        own level so that outer derivatives flow through the copy. Reused while
        unchanged (for a traced one: never written through mutagrad, same bits)."""
        traced = isinstance(a, Tracer)
        key = id(a)
        if not traced:
            if type(a) is not _ndarray:
                if not issubclass(type(a), _ndarray):  # (a NumPy scalar: immutable)
                    return a
                # (an np.memmap, whose file another process may write: its memory as an ndarray's, copied
                a = a.view(_ndarray)  # as one's and remembered by the memmap's identity)
            if not a.flags.writeable:
                owner = _memory_owner(a)
                # (read-only memory cannot change, unless it is read-only only while a level runs: a
                # caller's array passed as an argument, whose traced writes go through a view of it,
                # as mg.value(x) of the argument shows; a read-only view of writable memory can)
                if owner is not None and _LOCKED.get(id(owner)) is not owner:
                    if a.nbytes <= READONLY_SUM_LIMIT:
                        self._note_read_only(a)
                    return a
            elif PRIVATE.get(key) is a:  # (a rule's own copy, which no code writes)
                return a
        if traced:
            cache = self.snapshots
        else:
            cache = self._plain_snapshots()
            if a.base is not None and a.size > 64:
                key = _view_key(a, key)
        hit = cache.get(key)
        # (a plain array is not kept, nor weakly referenced: that would stop `x += t` giving a plain
        # x nothing else refers to a new traced array; an array at the same address later is
        # served the copy only if it holds the same bits in the same layout)
        if hit is not None and (hit[0] is a if traced else hit[0] is None) and not (traced and _ever_written(a)):
            snap = hit[1]
            b, sb = (bottom(a), bottom(snap)) if traced else (a, snap)
            if sb.shape == b.shape and sb.dtype == b.dtype and (traced or sb.strides == b.strides):
                if hit[2] is not None:  # (a copy of the memory the view spans: compared as that memory)
                    span = _span(b)
                    if span is not None and _same_bits(span[1], hit[2]):
                        return snap
                elif _same_bits(b, sb):
                    return snap
        buf = None
        if traced:
            snap = a.copy(order="K")
        else:
            if a.size <= 64:  # (small: copied afresh, not remembered; writable, as a compiled kernel may ask,
                # where a compact copy has its layout; a broadcast or strided one's laid out as it is, read-only)
                got = None if a.flags.c_contiguous or a.flags.f_contiguous else _layout_copy(a)
                return a.copy(order="K") if got is None else got[0]
            # (a contiguous one's copy has its layout: no copy of the memory it spans to compare with)
            got = None if a.flags.c_contiguous or a.flags.f_contiguous else _layout_copy(a)
            snap, buf = got if got is not None else (a.copy(order="K"), None)
            snap.flags.writeable = False
        cache[key] = (a if traced else None, snap, buf)
        return snap

    def _note_read_only(self, a):
        """Note the bits of a read-only constant a pullback reads, uncopied: its memory may still change
        (through a writable view made before it was made read-only, setflags(write=True), ufunc.at, which
        NumPy lets write into read-only arrays), which the reverse pass would not see; checked when the
        function returns and when vjp's pullback is called (api._check_read_only_constants; the copying tester)."""
        sums = self.__dict__.get("read_only_sums")
        if sums is None:
            sums = self.read_only_sums = {}
        hit = sums.get(id(a))
        if hit is None or hit[0] is not a:
            from .api import _arg_sum

            sums[id(a)] = (a, _arg_sum(a))

    def _plain_snapshots(self):
        """Where the copies of plain arrays are kept: the outermost reverse level's, so that each
        call of a nested differentiation (an mg.grad in a training loop that an outer one
        differentiates) reuses the copy of the data matrix it closes over, which the outer tape
        keeps (a plain array's copy is plain at every level)."""
        for lv in self.outer:
            d = getattr(lv, "snapshots", None)
            if d is not None:
                return d
        return self.snapshots

    def snapshot_sparse(self, a):
        """A private copy of a scipy.sparse matrix a pullback will read (see :meth:`snapshot`),
        reused while its arrays keep their bits. (Other objects of scipy.sparse, a SuperLU
        factorization, which cannot be changed, as they are.)"""
        if not hasattr(a, "format"):
            return a
        key = id(a)
        data = getattr(a, "data", None)
        if type(data) is _ndarray and a.format in ("csr", "csc", "bsr", "coo", "dia"):
            # (by its arrays, which a new object made of them shares: A.T of a closed-over csr matrix is a new
            # csc one each time, `A.T @ r` in a loop, and each kept its own copy: the tomography tester)
            key = ("sparse", type(a), a.shape, data.__array_interface__["data"][0], data.nbytes)  # (its memory:
            # A.T's arrays are new views of A's)
        hit = self.snapshots.get(key)
        if hit is not None and (hit[0] is a or type(key) is tuple) and _same_sparse(a, hit[1]):
            return hit[1]
        snap = a.copy()
        self.snapshots[key] = (a, snap, None)
        return snap

    def _own_params(self, kwargs):
        """A rule's keyword arguments with private copies (:meth:`snapshot`) of the plain
        arrays among them (``np.add.reduceat``'s indices), which its pullback reads and the
        caller may change after the operation. (A linear rule's plain positional arguments,
        ``np.bincount``'s bins, are copied in :meth:`process`.)"""
        for v in kwargs.values():
            t = type(v)
            if t is _ndarray or ((t is tuple or t is list) and any(type(i) is _ndarray for i in v)):
                break
        else:
            return kwargs
        out = {}
        for k, v in kwargs.items():
            t = type(v)
            if t is _ndarray:
                v = self.snapshot(v)
            elif t is tuple or t is list:
                v = t(self.snapshot(i) if type(i) is _ndarray else i for i in v)
            out[k] = v
        return out

    def process_ew(self, prim, leaves, scalar_op=None, dest=None, scalar=False, into=None):
        """The hottest path, :meth:`process` for an elementwise primitive on
        this level's tracers and plain numbers (one level, no keywords).

        With ``dest`` (all of one of this level's arrays), computes
        ``f(*leaves, out=dest)`` in place as NumPy does, recorded as the
        operation into a fresh storage followed by a write of all of ``dest``
        (no copy of the result). ``scalar``: the operation was called on a
        traced scalar, so it may go to a run (see runs.py). Returns None for what it does not handle
        (nothing active; for ``dest``, a cast, a broadcast output, or a
        pullback that reads the output, i.e. ``dest``'s later contents).
        ``into``: one of ``leaves``, a temporary nothing else refers to, whose buffer
        may take the result if no pullback reads it (:meth:`_elide`)."""
        if scalar and self.runs and dest is None and self.in_run():
            out = run_operation(self, prim, leaves, scalar_op)  # recorded by a run
            if out is not None:
                return out
        vals = []
        inputs = []  # (storage, geometry, position) of the active arguments
        i = 0
        viewed = False  # a view among the arguments (see unpin)
        plain = False  # a plain array among them (see _ew_record)
        for x in leaves:
            tx = type(x)
            if tx is ArrayTracer or tx is ScalarTracer:
                st = x._storage
                g = x._geom
                if g is None:
                    vals.append(x._value.item() if st.weak else x._value)  # (weak: a Python number, as in a plain call)
                else:
                    vals.append(x._value)
                    viewed = True
                if st.active:
                    inputs.append((st, g, i))
            else:
                if tx is _ndarray:
                    viewed = viewed or x.base is not None
                    plain = True
                elif tx is not float and foreign_subclass(x):
                    raise subclass_error(x)
                vals.append(x)
            i += 1
        if not inputs:
            return None
        if dest is not None:
            dv = dest._value
            if type(dv) is not _ndarray or type(prim.elementwise[2]) is not np.ufunc or (
                    np.result_type(*vals) != dv.dtype):
                return None
            if not _broadcast_to(vals, dv.shape):
                return None
        eager = None
        if prim.linear:
            need, out_read = (), False
        elif prim.eager is not None and (dest is not None or EAGER.operands_dead) and (
                eager := prim.eager(vals, [i for _, _, i in inputs])) is not None:
            need, out_read = (), False  # (an operand overwritten now: the partials now, kept in place of the operands)
        else:
            reads = prim.reads
            if len(inputs) == 1:
                need, out_read = reads[inputs[0][2]]
            else:
                need, out_read = set(), False
                for _, _, i in inputs:
                    r, ry = reads[i]
                    need.update(r)
                    out_read = out_read or ry
            if dest is not None and out_read:
                return None
            for i in need:  # what a pullback reads: later writes into it must save it
                x = leaves[i]
                tx = type(x)
                if tx is ArrayTracer or tx is ScalarTracer:
                    if not x._storage.captured:  # (the hottest path: no call where it is all captured)
                        capture(x._storage, x, vals[i])
                elif tx is _ndarray:  # a plain array, which the caller may change: its private copy
                    vals[i] = self.snapshot(x)
        if dest is not None:
            return self._ew_into(prim, vals, inputs, need, dest, dv, eager)
        if into is not None:
            y = self._elide(prim, vals, leaves, into, need)
            if y is not None:
                return self._ew_record(prim, leaves, eager or vals, inputs, need, out_read, y, viewed, plain)
        if scalar_op is not None and type(vals[0]) in _SCALAR_OP_TYPES and type(vals[1]) in _SCALAR_OP_TYPES:
            y = scalar_op(vals[0], vals[1])  # (core.ew_value, inlined: the hottest path)
        else:
            y = prim.elementwise[2](*vals)
        return self._ew_record(prim, leaves, eager or vals, inputs, need, out_read, y, viewed, plain)

    def _ew_record(self, prim, leaves, vals, inputs, need, out_read, y, viewed=True, plain=True):
        """Wrap the result ``y`` of an elementwise primitive and record it as
        one EWRecord (keeping only the arguments its partials read; ``viewed``: views may be
        among them; ``plain``: plain arrays may be, which the record lets go of whatever their
        size: holding one would count as a reference to it, and stop ``d -= t * np.round(d / t)``
        on a plain ``d`` nothing else names giving ``d`` a new traced array, see core._promoted_inplace)."""
        tie = _ties_of(vals) if prim.ties and self.index else None  # (see _note_ties)
        moves = None if tie is None else _tie_moves(vals, tie)
        ty = type(y)
        if ty is _ndarray and prim.fresh and y.base is None and y.dtype.kind in _FLOAT_KINDS:
            if self.index:
                y = self.new_memory(y)
            st = Storage(self, y)
            out = ArrayTracer(y, self, st, None, False)
            if y.size > DROP_SIZE or not y.size or plain:  # (the arguments of a nonempty result are no larger)
                drop_unread(vals, need, leaves if plain else None)
        elif ty in _FLOAT_SCALARS and ty is not float and ty is not complex:
            st = Storage(self, y)
            out = ScalarTracer(y, self, st, None, True)
        else:  # a view, a non-float result, or an outer level's tracer
            ins = [k for k in range(len(leaves)) if isinstance(leaves[k], Tracer) and leaves[k]._level is self]
            out, st = self.wrap_output(y, leaves, ins, prim.fresh)
            if st is None:
                return out
            drop_unread(vals, need, leaves if plain else None)
        if viewed:
            unpin(vals, need, None, leaves)
        self.tape.append(EWRecord(prim.elementwise[1], tuple(vals), y if out_read else None, inputs, st, prim,
                                  self._place(prim) if self.record_lines or prim.names_line else None))
        if tie is not None:
            self._note_ties(tie, moves)
        st.active = True
        st.captured = out_read  # the pullback reads its own output (exp, tanh...)
        return out

    def _elide(self, prim, vals, leaves, into, need):
        """NumPy's temporary elision: compute ``prim(*vals)`` into the buffer of
        ``into``, an operand the caller found to be a stack temporary (elide.py),
        if its storage is a plain fresh result nothing reads or shares: no pullback
        reads it, no view, record or export refers to the array, and the result has
        its dtype and shape. Returns that buffer, or None. The temporary's storage
        then no longer knows its memory, as if the array had died."""
        k = 0 if leaves[0] is into else 1
        st = into._storage
        if (k in need or type(st) is not Storage or into._geom is not None or st.captured or st.span is not None
                or st._root is not None
                or st.orig is not None or st.written or st.exported or st.aliased is not None
                or st.poison is not None or st.pristine or st.weak or st.plain_alias is not None):
            return None
        buf = vals[k]
        uf = prim.elementwise[2]
        # references to buf: into._value, vals[k], buf (and getrefcount's argument)
        if (type(buf) is not _ndarray or type(uf) is not np.ufunc or _getrefcount(buf) != _BUFFER_REFS
                or buf.base is not None or not buf.flags.c_contiguous or not buf.flags.writeable):
            return None
        try:
            dt = uf.resolve_dtypes(tuple(v.dtype if isinstance(v, (_ndarray, np.generic)) else type(v)
                                         for v in vals) + (None,))[-1]
        except (TypeError, ValueError):
            return None
        if dt != buf.dtype:
            return None
        if not _broadcast_to(vals, buf.shape):
            return None
        uf(*vals, out=buf)
        st._ref = _GONE
        into._value = _ELIDED  # (a stack temporary dies now; an object array's element must not be read)
        return buf

    def _note_ties(self, tie, moves=None):
        """Keep ``tie`` (:func:`_ties_of`) for the record just appended, a maximum's or minimum's, where the kink
        watches read it (elementwise._tie_mask), and ``moves`` (:func:`_tie_moves`), where they read which ties
        move (elementwise._moving). Only at a nested level: the watches are of a higher derivative, whose inner
        levels' values an outer one traces; an outermost level's records fall back to their operands."""
        key = id(self.tape[-1])
        self.__dict__.setdefault("tie_masks", {})[key] = tie
        if moves is not None:
            self.__dict__.setdefault("tie_moves", {})[key] = moves

    def _ew_into(self, prim, vals, inputs, need, dest, dv, eager=None):
        tie = _ties_of(vals) if prim.ties and self.index else None  # (before the result overwrites an operand)
        moves = None if tie is None else _tie_moves(vals, tie)
        s = self.check_writable(dest)
        if s.pristine:
            s.pristine = False  # (an active result is written)
        saved = _saved_copy(dv) if read_within(s, dv) else None  # before the new values overwrite them
        for i in need:  # (a view of a much larger array that a partial reads: its values now, which
            v = vals[i]  # the operation may overwrite, x *= x[:1]; see registry.unpin)
            if type(v) is _ndarray and v is not dv and pins(v):
                vals[i] = v.copy()
        prim.elementwise[2](*vals, out=dv)
        if eager is not None:
            vals = eager
        drop_unread(vals, need)
        unpin(vals, need, dv)  # (the views no partial reads: their shapes)
        line = self._line()
        st = Storage(self, dv)  # the result, a storage of its own (no tracer ever shows it)
        st.active = True
        self.tape.append(EWRecord(prim.elementwise[1], tuple(vals), None, inputs, st, prim, line))
        if tie is not None:
            self._note_ties(tie, moves)
        rec = WriteRecord(s, None, Ellipsis, saved, dv, line)
        rec.vsrc = st
        rec.vshape = dv.shape
        rec.full = s.root_geom() is None and st.root_geom() is None
        self.tape.append(rec)
        s.active = True
        if saved is not None:
            _overwritten(s)
        return dest

    def process(self, prim, leaves, tree, args, kwargs):
        vals = list(leaves)
        ins = []
        active = False
        plain = False  # a plain array among the arguments
        weak_args = prim.weak_args
        for i in range(len(leaves)):
            x = leaves[i]
            if isinstance(x, Tracer):
                if x._level is self:
                    vals[i] = x._value.item() if weak_args and x._storage.weak and x._geom is None else x._value
                    ins.append(i)
                    if x._storage.active and x._value.size:  # (an array of no elements carries nothing:
                        active = True  # no rule needs to handle a derivative w.r.t. it)
            elif type(x) is _ndarray:
                plain = True
            elif foreign_subclass(x):
                raise subclass_error(x)
            elif issubclass(type(x), _ndarray):  # (an np.memmap: plain memory, which its file or the caller may change)
                plain = True
            elif scipy_sparse_object(x):
                plain = True  # (a constant sparse matrix, which the caller may change: copied below)
        zero = prim.zero
        if zero is ZERO_IF_REAL:  # (np.sign: zero for real inputs, its rules for complex ones)
            zero = not _any_complex(vals)
            note_equality(leaves, "order_at")  # (a sign test: a bisection's np.sign(f(mid)) == np.sign(f(lo)))
        if not active or zero:
            out = apply_inner(prim, vals, tree, kwargs)
            return self.constant_result(self.wrap(out, leaves, ins, None, prim), leaves, ins, zero)
        rrule = prim.rrule
        if rrule is None:
            if prim.frule is None:
                raise prim_missing_rule(prim, "reverse")
            from .derived import reverse_from_forward

            rrule = reverse_from_forward(prim)
        if kwargs:
            kwargs = self._own_params(kwargs)
        out_read = False
        need = ()
        copies = None
        if prim.linear:  # the transpose reads no traced argument, but may read plain ones (indices)
            if plain:
                for i in range(len(leaves)):
                    leaf = leaves[i]
                    if issubclass(type(leaf), _ndarray) and leaf.dtype.kind in "fciub":  # (np.memmap too)
                        vals[i] = self.snapshot(leaf)
                    elif scipy_sparse_object(leaf):
                        vals[i] = self.snapshot_sparse(leaf)
        else:
            reads = prim.reads if tree is None else None  # (positions of arguments: no list among them)
            if reads is None:  # the pullback may read any argument and the output
                need = range(len(vals))
                out_read = True
            elif len(ins) == 1:  # one traced argument: what its partial reads
                need, out_read = reads[ins[0]]
            else:  # only what the partials of the active arguments read
                need = set()
                for i in ins:
                    if leaves[i]._storage.active:
                        r, ry = reads[i]
                        need.update(r)
                        out_read = out_read or ry
            kept = vals[:] if prim in LAYOUT_EXACT else None  # (the values before private copies replace them)
            for i in need:
                leaf = leaves[i]
                if isinstance(leaf, Tracer):
                    if leaf._level is self:
                        capture(leaf._storage, leaf, vals[i])
                        if leaf._storage.outer_view:  # its outer level may write it unseen
                            vals[i] = self.snapshot(leaf._value)
                        elif (leaf._geom is not None and type(vals[i]) is _ndarray and pins(vals[i])
                              and not view_kept(leaf, vals[i])):
                            # a view of a much larger array, which the pullback would keep alive
                            vals[i] = vals[i].copy()
                            copies = (copies or []) + [i]
                    elif not leaf._scalar:  # an outer level's array, which it may write unseen
                        vals[i] = self.snapshot(leaf)
                elif issubclass(type(leaf), _ndarray) and leaf.dtype.kind in "fciub":  # (np.memmap too)
                    vals[i] = self.snapshot(leaf)
            if kept is not None and any(vals[i] is not kept[i] for i in need):
                # a product's value computed from the operands as they are (a copy of a strided view is
                # contiguous, and NumPy's kernels for the two sum in another order: other last bits); its
                # pullback keeps the private copies in their place
                y, pb = rrule(*_unflatten_args(tree, kept), **kwargs)
                swap = {id(kept[i]): vals[i] for i in range(len(vals)) if vals[i] is not kept[i]}
                pb.xs = tuple(swap.get(id(x), x) for x in pb.xs)
                return self._after_rule(prim, leaves, ins, vals, y, pb, need, out_read, tree)
        if tree is None and not kwargs and ew_rule(prim) is not None:
            # what the elementwise rrule does, recorded as one EWRecord
            inputs = [(leaves[i]._storage, leaves[i]._geom, i) for i in ins if leaves[i]._storage.active]
            return self._ew_record(prim, leaves, vals, inputs, need, out_read, prim.elementwise[2](*vals))
        y, pb = rrule(*_unflatten_args(tree, vals), **kwargs)
        if copies is not None and any(np.may_share_memory(o, vals[i]) for o in output_leaves(y)[0]
                                      if type(o) is _ndarray for i in copies):
            # an output that is a view of an argument copied above: of the argument itself
            for i in copies:
                vals[i] = leaves[i]._value
            y, pb = rrule(*_unflatten_args(tree, vals), **kwargs)
        return self._after_rule(prim, leaves, ins, vals, y, pb, need, out_read, tree)

    def _after_rule(self, prim, leaves, ins, vals, y, pb, need, out_read, tree):
        """Record a reverse rule's output ``y`` and pullback ``pb`` (see :meth:`process`)."""
        self.check_rule_output(prim, y)
        elementwise = type(pb) is ElementwisePullback  # (a rule called directly)
        if prim.reads is not None and (elementwise or getattr(type(pb), "trims_operands", False)):  # (matmul's)
            xs = list(pb.xs)
            # let temporaries no pullback reads die now (and an elementwise rule's plain operands, at any size: see
            # _ew_record)
            drop_unread(xs, need, leaves if elementwise and len(xs) == len(leaves) else None)
            unpin(xs, need)
            pb.xs = tuple(xs)
            if elementwise and not out_read:
                pb.y = None
        return self.wrap(y, leaves, ins, pb, prim, out_read, tree)

    def fast_op(self, prim, y, inputs, pullback):
        """Record ``prim``'s fresh result ``y`` (a new array or a NumPy scalar)
        with ``pullback``, for a rule's fast path (see ``Primitive.fast``):
        ``inputs`` are the active arguments' (storage, geometry, position)."""
        if self.index and type(y) is _ndarray:
            y = self.new_memory(y)
        s = Storage(self, y)
        s.active = True
        self.tape.append(OpRecord(pullback, inputs, [s], prim, None, None))
        if type(y) is _ndarray:
            return ArrayTracer(y, self, s, None, False)
        return ScalarTracer(y, self, s, None, True)

    def _record_one(self, pb, leaves, ins, s, prim, out_read, tree=None):
        """Record an operation with one fresh output storage ``s``."""
        inputs = []
        for i in ins:
            t = leaves[i]
            if t._storage.active:
                inputs.append((t._storage, t._geom, i))
        self.tape.append(OpRecord(pb, inputs, [s], prim, self._place(prim), None, tree))
        s.active = True
        s.captured = out_read  # the pullback reads its own output (exp, tanh...)

    def wrap(self, y, leaves, ins, pb, prim, out_read=False, tree=None):
        ty = type(y)
        if ty is _ndarray or ty is np.float64:  # one fresh output: the common case
            o, s = self.wrap_output(y, leaves, ins, prim.fresh)
            if pb is not None and s is not None:
                self._record_one(pb, leaves, ins, s, prim, out_read, tree)
            return o
        ys, ytree = output_leaves(y)
        if ytree is not None:  # several outputs: a tuple, list, dict, dataclass... of them (a pytree)
            outs = []
            fresh = []
            for yl in ys:
                o, s = self.wrap_output(yl, leaves, ins)
                outs.append(o)
                fresh.append(s)
            self.check_shared_outputs(outs, fresh, prim)
            res = tree_unflatten(ytree, outs)
            outtree = functools.partial(tree_unflatten, ytree)  # the cotangents in the outputs' structure
        else:
            o, s = self.wrap_output(y, leaves, ins)
            res, fresh, outtree = o, [s], None
        if pb is None:
            return res
        if any(s is not None for s in fresh):
            inputs = [(leaves[i]._storage, leaves[i]._geom, i) for i in ins if leaves[i]._storage.active]
            self.tape.append(OpRecord(pb, inputs, fresh, prim, self._place(prim), outtree, tree))
            zero = prim.zero_outputs if prim is not None else ()
            for j, s in enumerate(fresh):
                if s is not None:
                    if j in zero:  # (a constant, as a piecewise-constant function's result)
                        s.pristine = True
                        continue
                    s.active = True
                    s.captured = out_read
        return res

    def run(self):
        """The run at the end of the tape (a new one if the tape ends otherwise)."""
        tape = self.tape
        run = tape[-1]
        if type(run) is not ScalarRun or len(run.codes) >= MAX_ROWS:
            run = ScalarRun(self.run_kinds[0])
            tape.append(run)
        return run

    def in_run(self):
        """Whether an element-level operation now goes to a run: the tape ends
        with one, or with ``RUN_AFTER`` element-level records in a row. A few
        element operations among array operations (a boundary condition) keep
        ordinary records, which cost less there than a run of a few rows."""
        tape = self.tape
        if not tape or type(tape[-1]) is ScalarRun:
            return bool(tape)
        if len(tape) < RUN_AFTER:
            return False
        for k in range(-1, -1 - RUN_AFTER, -1):  # the latest first: array code stops at once
            rec = tape[k]
            t = type(rec)
            if t is EWRecord or t is GatherRecord:
                if rec.out.shape != ():
                    return False
            elif t is WriteRecord:
                if rec.vshape is not None and rec.vshape != ():
                    return False
            elif t is ScalarRun:
                return True
            else:
                return False
        return True

    def getitem(self, t, idx):
        if (self.runs and t._storage.active and type(t) is ArrayTracer and len(STATE.levels) == 1
                and self.in_run()):
            pos = element_position(t, idx)
            if pos is not None:  # (one element of a float64 array: a NumPy float64)
                return self.run().gather(self, t, pos, t._value[idx])
        res, out = self.index_value(t, idx)
        if out is None:
            return res
        s = t._storage
        if s.active:
            out.active = True
            self.tape.append(GatherRecord(s, t._geom, owned_index(idx), out, _may_repeat(idx), self._line()))
        return res

    def write(self, dest, idx, value):
        vt = type(value)
        own = issubclass(vt, Tracer) and value._level is self
        vactive = own and value._storage.active
        s = self.check_writable(dest, vactive, idx)
        if s.pristine and own and not value._storage.pristine:
            s.pristine = False  # (no longer known to be a constant)
        dv = dest._value
        vv = value._value if issubclass(vt, Tracer) and value._level is self else value
        if self.index:
            vv = self.check_not_outer_into_plain(dest, vv)
        if complex_into_real(dv, vv):
            warn_complex_cast()
            vv = vv.real
        saved = None
        if s.captured or (s.span is not None and read_within(
                s, dv[idx] if type(dv) is _ndarray and _is_basic(idx) else dv)):
            saved = _saved_copy(dv[idx])
        if not (s.active or vactive or saved is not None):
            dv[idx] = vv  # nothing to record
            return
        if (self.runs and type(dv) is _ndarray and len(STATE.levels) == 1 and self.in_run()
                and arg_kind(value, self) is not _NO):
            pos = element_position(dest, idx)
            if pos is not None:
                dv[idx] = vv
                self.run().write(dest, pos, value, vactive, saved)
                if vactive:
                    s.active = True
                return
        repeats = _may_repeat(idx)  # (of the index given: a mask kept as positions repeats none)
        idx = owned_index(idx)
        rec = WriteRecord(s, dest._geom, idx, saved, dv, self._line())
        if vactive:
            vs = value._storage
            rec.vsrc = vs
            rec.vgeom = value._geom
            rec.vshape = value.shape
            if repeats:
                rec.winners = _winners(dv, idx)
            elif (dest._geom is None and value._geom is None and not self.index and vs is not s
                  and type(vs) is not RunStorage  # (its adjoint lives in its run)
                  and vs.dtype == s.dtype and s.root_geom() is None and vs.root_geom() is None):
                if _whole(idx):
                    rec.full = vs.shape == s.shape
                elif (type(idx) is slice or type(idx) is tuple) and _is_basic(idx):
                    r = dv[idx]
                    if (type(r) is _ndarray and r.shape == vs.shape and r.flags.c_contiguous and r.size
                            and 2 * r.size >= dv.size):
                        # (a block of at least half of it: the new buffer's copy of the rest costs less
                        # than the block's two passes; a smaller one, a history's row, takes the block's)
                        rec.block = ((_ptr(r) - _ptr(dv)) // r.itemsize, r.size)
        dv[idx] = vv
        self.tape.append(rec)
        if vactive:
            s.active = True
        if saved is not None and dest._geom is None and _whole(idx):
            _overwritten(s)

    # -- reverse pass -------------------------------------------------------

    def own_view(self, v):
        """Note that the memory under view ``v`` (an adjoint block handed over) is
        referenced by nothing else, so ``v`` may be adopted as an adjoint buffer."""
        if self.exclusive is None:
            self.exclusive = weakref.WeakValueDictionary()
        self.exclusive[id(v.base)] = v.base

    def _owned_view(self, ct):
        ex = self.exclusive
        return ex is not None and ex.get(id(ct.base)) is ct.base

    def private_adj(self, s):
        """Make the shared adjoint buffer of ``s`` its own before a write into it (see
        ``Storage.adjshared``): a copy, unless the other holders have let go of it."""
        if not release_adj(s):
            return
        buf = s.adjbuf
        new = np.array(buf, copy=True, order="C")
        s.adj = new if s.adj is buf else view_of(new, s.root_geom())
        s.adjbuf = new

    def adjview(self, s, geom):
        """The adjoint of view ``geom`` of ``s`` (all of it for None), to be written into."""
        if s.adj is None:
            s.adjbuf, s.adj = s.new_mirror(self.zeros)
        elif s.adjshared is not None:
            self.private_adj(s)
        if geom is None:
            return s.adj
        return view_of(s.adjbuf, geom)

    def accumulate(self, s, geom, ct, rec, owned=False, sub=False, share=False):
        """Add cotangent ``ct`` to the adjoint of view ``geom`` of storage ``s``.
        ``owned``: the caller made ``ct`` and keeps no reference, so it may
        become the adjoint buffer itself (no copy); returns True if it did.
        ``sub``: subtract it instead (one pass into a view's adjoint, no -ct).
        ``share``: ``ct`` is an adjoint buffer another storage may keep: it may
        become this one's too (no copy); returns SHARED if it did, and the caller
        counts ``s`` among its holders (``Storage.adjshared``)."""
        tc = type(ct)
        # a plain cotangent for a view of the same shape and dtype (buffers are plain at the outermost level)
        into_view = (tc is _ndarray and geom is not None and not self.index and not geom.overlap
                     and ct.shape == geom.shape and ct.dtype == geom.dtype)
        if sub and not into_view:
            ct = -ct
            tc = type(ct)
            owned, sub = True, False
        if (tc is _ndarray or tc is np.float64) and geom is None and not self.index:
            # fast path: a plain cotangent for a whole storage root of the same layout
            adj = s.adj
            if adj is None:
                if type(s) is RunStorage:  # a scalar a run computed: its adjoint lives in the run
                    s.run.receive(s.slot, ct)
                    return
                if s.shape == ct.shape and s.dtype == ct.dtype:
                    rg = s._rootgeom
                    if rg is False:
                        rg = s.root_geom()
                    if rg is None:
                        if tc is np.float64 and type(s._root) is np.float64:
                            s.adj = s.adjbuf = ct  # a NumPy scalar's adjoint: immutable, shared freely
                            return
                        if owned and tc is _ndarray:
                            fl = ct.flags
                            if fl.c_contiguous and fl.writeable and (
                                    ct.base is None or fl.owndata or self._owned_view(ct)):
                                s.adj = s.adjbuf = ct
                                return True
                        if share and tc is _ndarray and ct.flags.c_contiguous:
                            s.adj = s.adjbuf = ct
                            return SHARED
                        s.adj = s.adjbuf = np.array(ct, copy=True, order="C")  # C: views index it by byte offsets
                        return
            elif type(adj) is _ndarray:
                if adj.shape == ct.shape and adj.dtype == ct.dtype:
                    if s.adjshared is not None and release_adj(s):
                        # other storages' too: a new sum, not a copy and an addition
                        s.adj = s.adjbuf = np.add(adj, ct, out=np.empty(adj.shape, adj.dtype))  # (0-d: an array)
                        return
                    if adj.size == 1 and adj.ndim and s.adjbuf is adj:
                        s.adj = s.adjbuf = adj + ct  # one element: a new sum is cheaper than NumPy's out=
                    else:
                        adj += ct
                    return
            elif type(adj) is np.float64 and tc is np.float64:
                s.adj = s.adjbuf = adj + ct
                return
        elif into_view:
            if s.adjshared is not None:
                self.private_adj(s)
            buf = s.adjbuf
            if buf is None:
                item = geom.dtype.itemsize
                if (geom.dtype == s.dtype and s.root_geom() is None and not geom.offset % item
                        and _c_contiguous(geom.shape, geom.strides, item)):
                    # the first contribution, to one block of the storage: copy it in and zero
                    # only the rest (instead of zeroing everything, then adding)
                    buf = np.empty(s.shape, s.dtype)
                    flat = buf.reshape(-1)
                    k = geom.offset // item
                    m = ct.size
                    flat[:k] = 0
                    flat[k + m:] = 0
                    if sub:
                        np.negative(ct.reshape(-1), out=flat[k:k + m])
                    else:
                        flat[k:k + m] = ct.reshape(-1)
                    s.adj = s.adjbuf = buf
                    return
                self.adjview(s, None)
                buf = s.adjbuf
            av = _ndarray(geom.shape, geom.dtype, buffer=buf, offset=geom.offset, strides=geom.strides)
            if sub:
                av -= ct
            else:
                av += ct
            return
        if type(s) is RunStorage:  # (no adjoint of its own: see above)
            s.run.receive(s.slot, ct)
            return
        if (tc is ArrayTracer and geom is None and s.adjshared is None and self.index and ct._geom is None
                and ct.shape == s.shape and ct.dtype == s.dtype and s.shape and s.root_geom() is None):
            # nested: a cotangent traced by the outer levels, for all of a storage laid out as its
            # buffer (not 0-d: a sum of two 0-d arrays is a scalar)
            adj = s.adj
            if adj is None:
                if owned and ct._storage.root_geom() is None:  # (C-contiguous memory of its own)
                    s.adj = s.adjbuf = ct  # (the caller's: no copy)
                    return True
            elif type(adj) is ArrayTracer and adj is s.adjbuf:
                s.adj = s.adjbuf = adj + ct  # (a new sum: one operation of the outer levels, no write)
                return
        if self.index and type(s._root) is ScalarTracer and s.shape == ():
            # nested: a NumPy scalar traced by the outer levels, immutable (no views, no writes):
            # its adjoint is a traced scalar too, taken as it is and summed functionally
            adj = s.adj
            if adj is None:
                if tc is ScalarTracer and ct.dtype == s.dtype:
                    s.adj = s.adjbuf = ct
                    return
            elif type(adj) is ScalarTracer:
                ct = project(ct, (), s.dtype)
                if ct is None or isinstance(ct, AbstractZero):
                    return
                if not isinstance(ct, NotImplementedTangent):
                    r = adj + ct
                    s.adj = s.adjbuf = r if type(r) is ScalarTracer else r[()]
                    return
        if ct is None or isinstance(ct, AbstractZero):
            return
        if isinstance(ct, NotImplementedTangent):
            if self.strict:
                # (a refusal that names its line: the operation the user wrote, where the record is one
                # its rule made, as the vectors of np.linalg.eigvals' reverse pass)
                where = ct.where or (line_text(rec.line) if rec is not None and rec.line else user_line())
                name = ("the function" if ct.where else rec.prim.name if isinstance(rec, (OpRecord, EWRecord))
                        else "an indexing operation")
                raise NotImplementedTangentError(
                    f"the derivative of {name} at {where} is not implemented: {ct.message}. "
                    "Treat that argument as a constant with mg.stop_gradient, or register a rule."
                )
            if s.poison is None:
                if not ct.where:  # (named by the record's line; whether it is final, as it was)
                    ct, final = NotImplementedTangent(ct.message, line_text(rec.line) if rec else None), ct.final
                    ct.final = final
                s.poison = ct
            return
        av = self.adjview(s, geom)
        ct = project(ct, av.shape, av.dtype)
        if isinstance(ct, NotImplementedTangent):
            return self.accumulate(s, geom, ct, rec)
        if geom is not None and geom.overlap:
            _add_overlapping(s, geom, ct, self)
        elif type(av) is _ndarray:  # (nested: the buffers are traced by the outer levels)
            av += ct
        elif isinstance(av, np.generic):  # a NumPy scalar's adjoint (no views): replace it
            s.adj = s.adjbuf = av + ct
        else:
            av[...] = av + ct

    def seed(self, s, geom, ct):
        # (each storage once: a reverse jacobian seeds an output once per pass)
        if not any(o is s for o in self.outputs_given):
            self.outputs_given += (s,)
        if isinstance(ct, Tracer) and not any(o is s for o in self.seeded):  # (a traced cotangent: read, read_mask)
            self.seeded += (s,)
        self.accumulate(s, geom, ct, None)

    def backward(self):
        """Run the reverse pass over the whole tape, then redo the writes."""
        tape = self.tape
        n = len(tape)
        i = n - 1
        st = STATE
        st.off_program += 1
        try:
            # (strong zeros; an underflow in derivative code is nobody's business: no warning or
            # error under the user's np.errstate, and no call of a "log" object's write)
            with _BACKWARD_FP():
                if self.index:  # (nested: an outer level's records made in a pullback name its record's line)
                    prev = st.replay
                    try:
                        while i >= 0:
                            self.at = i
                            rec = tape[i]
                            st.replay = getattr(rec, "line", None)
                            rec.backward(self)
                            i -= 1
                    finally:
                        st.replay = prev
                while i >= 0:
                    self.at = i  # (read_mask)
                    tape[i].backward(self)
                    i -= 1
        finally:
            try:
                for rec in tape[i + 1 :]:
                    if type(rec) is WriteRecord or type(rec) is ScalarRun:
                        rec.redo()
            finally:  # (the replayed writes are the reverse pass's steps too, not the program's)
                st.off_program -= 1


_BACKWARD_FP = fixed_errstate.of(divide="call", over="call", invalid="call", under="ignore", call=_fp_event)


def prim_missing_rule(prim, mode):
    from .errors import ForwardRuleMissingError, NoRuleError

    short = prim.name.split(".")[-1]
    text = (f"{prim.name} has no derivative rule, so {mode} mode cannot differentiate it at {user_line()}. "
            f"Register one with @mg.rrule({short}) or @mg.frule({short}) (either one: the other mode "
            "is derived from it), or apply it to mg.stop_gradient(x) if its result is a constant.")
    return ForwardRuleMissingError(text) if mode == "forward" else NoRuleError(text)


def _ever_written(t) -> bool:
    """Whether any layer of tracer ``t`` was ever written through mutagrad."""
    while isinstance(t, Tracer):
        if t._storage.written:
            return True
        t = t._value
    return False


def owned_index(idx):
    """``idx`` with private copies of its index arrays, for a record that keeps it: the
    reverse pass reads the index again (to rewind and replay a write, to scatter a gather),
    and the caller may change those arrays after the operation (a ``where=`` mask buffer
    refilled each step, an index passed to ``np.put_along_axis``). A boolean mask with few
    true elements is kept as their positions (``x[m]`` is ``x[m.nonzero()]``, in NumPy's
    definition): a mask that selects one element of a large array would keep its size."""
    t = type(idx)
    if t is _ndarray:
        return _compact(idx) if idx.dtype == _BOOL else idx.copy()
    if t is tuple:
        for i in idx:  # (a loop, not any(): most indices are tuples of ints and slices)
            if type(i) is _ndarray:
                out = []
                for j in idx:
                    if type(j) is not _ndarray:
                        out.append(j)
                        continue
                    c = _compact(j) if j.dtype == _BOOL else j.copy()
                    out.extend(c) if type(c) is tuple else out.append(c)
                return tuple(out)
    return idx


_BOOL = np.dtype(bool)


def _compact(mask):
    """A copy of boolean index ``mask``, or the tuple of its true elements' positions where
    that is smaller."""
    if mask.ndim and np.count_nonzero(mask) * 8 * mask.ndim < mask.size:
        return np.nonzero(mask)
    return mask.copy()


def _same_sparse(a, b) -> bool:
    """Whether two scipy.sparse matrices of the compressed, coordinate or diagonal formats
    hold the same arrays, bit for bit (other formats: never)."""
    fmt = a.format
    if type(a) is not type(b) or a.shape != b.shape or a.dtype != b.dtype:
        return False
    if fmt in ("csr", "csc", "bsr"):
        parts = ("data", "indices", "indptr")
    elif fmt == "coo":
        parts = ("data", "row", "col")
    elif fmt == "dia":
        parts = ("data", "offsets")
    else:
        return False
    for p in parts:
        u, v = getattr(a, p), getattr(b, p)
        if u.shape != v.shape or u.dtype != v.dtype or not _same_bits(u, v):
            return False
    return True


def _same_bits(a, b) -> bool:
    """Whether two arrays of one shape hold the same bits: floating-point ones compared as integers of
    their bits (a strided one through a contiguous copy), so that a zero's sign and a NaN's payload
    count, as NumPy's results show them (np.interp returns a sample itself)."""
    if a.dtype.kind in "fc" and a.dtype == b.dtype:
        if a.ndim > 1 and a.flags.f_contiguous and b.flags.f_contiguous and not a.flags.c_contiguous:
            a, b = a.T, b.T  # (a closed-over A.T compared in its own layout: no copy of it per use, the
            # tomography tester's 126 MB matrix in a loop's A.T @ r)
        return bool(np.array_equal(_bits(a), _bits(b)))  # (one element per comparison, not one byte)
    if a.flags.c_contiguous and b.flags.c_contiguous and a.dtype.kind in "fc" and a.dtype.itemsize == b.dtype.itemsize:
        return bool(np.array_equal(a.view(np.uint8), b.view(np.uint8)))
    if a.dtype.kind not in "fcmM" or b.dtype.kind not in "fcmM":  # (strings, objects: no NaN to take equal; an
        return bool(np.array_equal(a, b))  # argument of keys given to a hessian: regress116)
    return bool(np.array_equal(a, b, equal_nan=True))


def _c_contiguous(shape, strides, item) -> bool:
    """Whether a view with these strides is one C-ordered block of memory."""
    want = item
    for n, st in zip(reversed(shape), reversed(strides)):
        if n != 1 and st != want:
            return False
        want *= n
    return True


def _overwritten(s):
    """Storage ``s`` was written all over by a write that saved what it overwrote: every
    pullback recorded so far reads the saved values (the reverse pass swaps them back in
    before it runs them), so the values now in ``s`` are read by no pullback yet, and the
    next write needs to save nothing unless one reads them meanwhile (which captures it
    again). ``was_captured`` keeps the history for the checks made after the call (a plain
    array's memory changed behind the tape, api._check_plain_aliases; vjp's guards)."""
    s.captured = False
    s.span = None
    s.was_captured = True


def _whole(idx) -> bool:
    """Whether ``x[idx]`` is all of x (``x[...]``, ``x[:]``, ``x[:, :]``)."""
    if idx is Ellipsis:
        return True
    if type(idx) is slice:
        return idx.start is None and idx.stop is None and idx.step is None
    if type(idx) is tuple and idx:
        return all(i is Ellipsis or (type(i) is slice and i.start is None and i.stop is None and i.step is None)
                   for i in idx)
    return False


def _may_repeat(idx) -> bool:
    """Whether an index may name one element twice (integer array parts)."""
    if type(idx) is not tuple:
        idx = (idx,)
    n = 0
    for i in idx:
        if isinstance(i, _ndarray) and i.dtype.kind in "iu" and i.size > 1:
            n += 1
    return n > 0


def _winners(dv, idx):
    """For an integer-array write with repeated targets: which of the written
    elements survive (NumPy's own choice, found by replaying the write), or None
    when no target repeats. Costs the size of the write where it can (see
    core.index_positions): the replay writes the elements' numbers into ``dv``
    itself and puts the elements back (a plain ``dv``, numbers its dtype holds
    exactly); else into a scratch array of ``dv``'s size."""
    b = bottom(dv)
    pos = index_positions(b.shape, idx)
    if not has_repeats(pos):
        return None
    ids = np.arange(pos.size, dtype=np.intp).reshape(pos.shape)
    if type(dv) is _ndarray and b.dtype.kind in "fc" and pos.size <= 2 ** (np.finfo(b.dtype).nmant + 1):
        old = b[idx]  # (a copy: the elements of repeated targets are equal, so putting it back is exact)
        b[idx] = ids
        won = b[idx] == ids
        b[idx] = old
    else:
        scratch = np.full(b.shape, -1, dtype=np.intp)
        scratch[idx] = ids
        won = scratch[idx] == ids
    return None if won.all() else won


def _flat_positions(s, geom):
    """The adjoint buffer of ``s`` as a flat array of the view's element type,
    and the position in it of every element of the view ``geom`` (views whose
    elements share memory name a position several times)."""
    item = geom.dtype.itemsize
    if any(st % item for st in geom.strides) or geom.offset % item:
        raise MutationError(
            f"cannot accumulate the derivative of an overlapping view with strides {geom.strides} "
            f"of {geom.dtype} elements (at {user_line()}); copy the view first (x.copy())"
        )
    pos = element_offsets(geom.shape, tuple(st // item for st in geom.strides), geom.offset // item)
    flat = np.reshape(s.adjbuf, -1)
    if bottom(flat).dtype != geom.dtype:
        flat = flat.view(geom.dtype)
    return flat, pos


def _add_by_slices(s, geom, ct) -> bool:
    """``_add_overlapping`` of a whole view as a few in-place additions: the cotangent summed
    over the view's zero-stride axes (np.broadcast_to), the other axes split into an inner
    set whose elements are distinct memory and outer ones looped over (a sliding window of
    width w: w additions of shifted slices, where np.add.at went element by element, 20x
    slower). False (nothing done) when that would take many small additions, for a buffer
    traced by outer levels, or for strides that are not whole elements."""
    buf = s.adjbuf
    item = geom.dtype.itemsize
    if type(buf) is not _ndarray or not buf.flags.c_contiguous or buf.dtype != geom.dtype or (
            geom.offset % item or any(st % item for st in geom.strides)):
        return False
    ct = np.broadcast_to(ct, geom.shape)
    zero = tuple(ax for ax, st in enumerate(geom.strides) if st == 0 and geom.shape[ax] > 1)
    shape, strides = list(geom.shape), list(geom.strides)
    if zero:
        ct = np.sum(ct, axis=zero, keepdims=True)
        for ax in zero:
            shape[ax], strides[ax] = 1, 0
    axes = sorted(range(len(shape)), key=lambda ax: -shape[ax])
    inner = []
    for ax in axes:  # (the largest axes first, kept while their elements stay distinct)
        trial = inner + [ax]
        if not _may_self_overlap(tuple(shape[k] for k in trial), tuple(strides[k] for k in trial), item):
            inner = trial
    outer = [ax for ax in range(len(shape)) if ax not in inner and shape[ax] > 1]
    loops = int(np.prod([shape[ax] for ax in outer], dtype=np.int64)) if outer else 1
    if loops > 64 and loops * 8 > ct.size:  # (many small additions: np.add.at does better)
        return False
    flat = buf.reshape(-1)
    in_shape = tuple(shape[k] for k in inner)
    in_strides = tuple(strides[k] for k in inner)
    ctt = np.transpose(ct, outer + inner).reshape((loops,) + in_shape)  # (size-1 axes are inner: all axes)
    for k, at in enumerate(np.ndindex(*[shape[ax] for ax in outer])):
        off = (geom.offset + sum(i * strides[ax] for i, ax in zip(at, outer))) // item
        view = np.lib.stride_tricks.as_strided(flat[off:], in_shape, in_strides)
        view += ctt[k]
    return True


def _add_overlapping(s, geom, ct, level, idx=None):
    """Accumulate into (the elements ``idx`` of) a view whose elements share
    memory (broadcast_to, sliding windows): every position gets the sum of
    its aliases."""
    if idx is None and _add_by_slices(s, geom, ct):
        return
    item = geom.dtype.itemsize
    parts = (any(st % item for st in geom.strides) or geom.offset % item
             or (np.size(s.adjbuf) * s.dtype.itemsize) % item) and geom.dtype.kind == "c" and (
        (s.dtype.kind == "f" and 2 * s.dtype.itemsize == item) or (s.dtype.kind == "c" and s.dtype.itemsize == item))
    if parts:  # complex elements at odd float positions (a complex view of floats one float in, or of a
        # float view of complex numbers): each element's real and imaginary parts, added at the floats they are
        geom = Geom(geom.offset, geom.shape + (2,), geom.strides + (item // 2,), np.dtype(geom.dtype.char.lower()),
                    True)
    flat, pos = _flat_positions(s, geom)
    if idx is not None and parts:  # (the index selects elements: their two parts stay together)
        idx = (idx if type(idx) is tuple else (idx,)) + (slice(None),)
    sel = pos if idx is None else pos[idx]
    if parts:
        ct = np.broadcast_to(ct, sel.shape[:-1])
        ct = np.stack([np.real(ct), np.imag(ct)], axis=-1)
    np.add.at(flat, sel, np.broadcast_to(ct, sel.shape))
