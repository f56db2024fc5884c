"""Forward mode: dual arrays.

Each storage of a forward level carries a tangent buffer that mirrors its
memory layout (``None`` while the storage does not depend on the input: a
symbolic zero). A view's tangent is the same view of that buffer, so a
write through any view writes value and tangent together, exactly as
NumPy aliases the values. Simple enough to trust: reverse mode is tested
against it.
"""
from __future__ import annotations

import numpy as np

from .core import (
    _NP_FLOAT_SCALARS,
    STATE,
    ZERO_IF_REAL,
    ArrayTracer,
    Level,
    ScalarTracer,
    Tracer,
    _any_complex,
    _carries_derivative,
    _StepValue,
    _unflatten_args,
    apply_inner,
    bottom,
    foreign_subclass,
    index_step,
    note_equality,
    operand_step,
    output_leaves,
    subclass_error,
    view_of,
)
from .errors import complex_into_real, replayed_line, user_line, warn_complex_cast
from .pytree import tree_flatten_like, tree_map, tree_unflatten
from .registry import FP, ew_tangent, fixed_errstate
from .tangents import (
    AbstractZero,
    NotImplementedTangent,
    PartlyNotImplemented,
    Thunk,
    ZeroTangent,
    project,
)
from .tape import _broadcast_to

_ndarray = np.ndarray
ZERO = ZeroTangent()


class _Events:
    """An np.errstate call handler that counts the floating-point events (one for every
    forward rule: a rule's events are those counted while it ran)."""

    __slots__ = ()

    def __call__(self, kind, flag):
        FP.flag = object()
        FP.events += 1  # (the thread's own count: NumPy calls this in the thread whose operation raised)


_EVENTS = _Events()
_NOTED = fixed_errstate.of(all="call", call=_EVENTS)


def _keyword_step(v):
    """A keyword argument's record for RunGroup.note (as operand_step; a tuple or list item by item, a string
    or None as it is: axes=(1, 0), order="F")."""
    if type(v) is tuple or type(v) is list:
        return tuple(_keyword_step(u) for u in v)
    if v is None or type(v) is str:
        return v
    return operand_step(v)


def _run_step(prim, ins, vals, kwargs=None):
    """What a forward-mode jacobian's run notes of ``prim`` applied to ``vals`` (its operands' values; ``ins``:
    the positions of the traced ones) with ``kwargs`` (RunGroup.note), on every path that applies it."""
    moves = prim.moves
    moved = (0 if moves is True else moves(vals)) if moves else None  # (Primitive.moves)
    return (prim.name, tuple(ins)) + tuple(
        ("moved", np.shape(v)) if i == moved else operand_step(v) for i, v in enumerate(vals)) + (
        tuple((k, _keyword_step(v)) for k, v in kwargs.items()) if kwargs else ())


def _birth(x):
    """Storage.birth of traced ``x`` (None for a plain value)."""
    return x._storage.birth if isinstance(x, Tracer) else None


def _traced_at(leaves, ins=None):
    """The traced operands' (position, Storage.birth) among ``leaves`` (at ``ins``, given): what a jacobian's
    run notes of them, so that a run reading another array of the same values takes another step (regress95)."""
    if ins is None:
        return tuple((i, x._storage.birth) for i, x in enumerate(leaves) if isinstance(x, Tracer))
    return tuple((i, leaves[i]._storage.birth) for i in ins)


def _note_step(group, prim, ins, vals, kwargs=None):
    """``group.note(_run_step(prim, ins, vals, kwargs))``, without the record where a later run's step is
    the first run's (:func:`_alike`)."""
    if kwargs or prim.moves or not group.noted_alike(_alike, prim.name, ins, vals):
        group.note(_run_step(prim, ins, vals, kwargs))


_F8 = np.dtype(np.float64)


def _alike(first, name, ins, vals) -> bool:
    """Whether the first run's step ``first`` is the record :func:`_run_step` makes of operation ``name`` on
    ``vals`` (no keywords), by the common operands' bits: small arrays, NumPy scalars and Python numbers,
    whose records keep their bytes. False where it cannot tell: RunGroup.note compares the record."""
    if type(first) is not tuple or len(first) != len(vals) + 2 or first[0] != name or first[1] != tuple(ins):
        return False
    i = 1
    for v in vals:
        i += 1
        s = first[i]
        t = type(v)
        if t is int:
            if type(s) is not int or s != v:
                return False
        elif type(s) is not _StepValue or s.total is not None:  # (a large array's record: a sample and a sum)
            return False
        elif t is float:
            if s.dtype is not _F8 or s.data != _F8.type(v).tobytes():
                return False
        elif t is _ndarray or issubclass(t, np.generic):  # (an object array's record is no _StepValue; a
            # traced value, whose type pretends to be an array's, is left to the record)
            if s.shape != v.shape or (s.dtype is not v.dtype and s.dtype != v.dtype) or s.data != v.tobytes():
                return False
        else:
            return False
    return True


def _frule_events_apart(prim, frule, primals, tangents, kwargs):
    """``frule(primals, tangents)``, ``prim``'s forward rule, whose primal's floating-point events are the
    function's and whose tangent's are not.

    A forward rule computes both together, under the error state the function set
    (``np.errstate(over="raise")`` around the call): an overflow of the tangent alone would
    raise inside the function and send it down its ``except`` branch. So the rule runs with
    every event only noted; if one happened, the primal alone is computed again, on plain
    values, under the function's error state, which then warns, raises or calls exactly as
    the plain call would."""
    before = FP.events
    with _NOTED():
        y, ydot = frule(primals, tangents, **kwargs)
    if FP.events != before:
        prim.impl(*tree_map(bottom, primals), **{k: tree_map(bottom, v) for k, v in kwargs.items()})
    return y, ydot


class ForwardLevel(Level):
    mode = "fwd"

    def __init__(self, strict=None):
        super().__init__()
        from .config import strict as _strict

        self.strict = _strict() if strict is None else strict
        self.clean_marks = {}  # id(storage) -> (storage, mark buffer, its root view): see _note_clean_write

    def _poisoned(self, tdot, prim_name):
        """A rule's NotImplementedTangent: raise in strict mode, else keep it (it poisons)."""
        if self.strict:
            from .errors import NotImplementedTangentError

            raise NotImplementedTangentError(
                f"the forward derivative of {prim_name} at {tdot.where or replayed_line(STATE.replay)} is not implemented: "
                f"{tdot.message}. Treat that input as a constant with mg.stop_gradient, or register a rule."
            )
        if tdot.where is None:  # (in a nested reverse pass, the line of the operation it differentiates)
            tdot = NotImplementedTangent(tdot.message, replayed_line(STATE.replay))
        return tdot

    # jvp's: (caller's array, its contents before the function's first write into it) for each
    # argument the function writes, so that a careful second run (api._careful_jvp) starts alike
    saved_args = None

    def check_writable(self, dest, active=True, idx=None):
        s = dest._storage
        if self.saved_args is not None and not s.written and type(s.orig) is _ndarray:
            self.saved_args.append((s.orig, np.array(bottom(s.root), copy=True)))
        return super().check_writable(dest, active, idx)

    def tangent_of(self, t):
        s = t._storage
        if s.tangent is None:
            return ZERO
        g = t._geom
        if g is None:
            return s.tangent
        return view_of(s.tangentbuf, g)

    def ensure_tangent(self, s):
        if s.tangent is None:
            s.tangentbuf, s.tangent = s.new_mirror(self.zeros)
        return s

    def set_tangent(self, s, tdot, inputs_tangents=()):
        """Give fresh storage ``s`` the tangent ``tdot`` (a private copy if needed)."""
        if tdot is None or isinstance(tdot, AbstractZero):
            return
        if isinstance(tdot, Thunk):
            tdot = tdot()
        if isinstance(tdot, NotImplementedTangent):
            s.poison = self._poisoned(tdot, "an operation")
            self.ensure_tangent(s)
            return
        if isinstance(tdot, PartlyNotImplemented):  # (the unknown elements poisoned, as _note_poisoned_write's)
            poison = tdot.poison  # (strict mode raises where an unknown element is read, not here)
            if poison.where is None:
                poison = NotImplementedTangent(poison.message, replayed_line(STATE.replay))
            self.set_tangent(s, tdot.known, inputs_tangents)
            self.ensure_tangent(s)
            self._marks(s, clean=True)[2][tdot.unknown] = 0
            s.poison = poison
            return
        tdot = project(tdot, s.shape, s.dtype)
        if type(tdot) is type(s._root) and type(tdot) in _NP_FLOAT_SCALARS and not self.index:
            s.tangent = s.tangentbuf = tdot  # (a NumPy scalar's: immutable, no views or writes)
            return
        if (
            type(tdot) is _ndarray
            and tdot.base is None
            and tdot.flags.c_contiguous
            and s.root_geom() is None
            and all(tdot is not bottom(t) for t in inputs_tangents)
            and not self.index
        ):
            s.tangent = s.tangentbuf = tdot
            return
        self.ensure_tangent(s)  # (nested: the buffer is traced by the outer levels)
        s.tangent[...] = tdot

    def process_ew(self, prim, leaves):
        """:meth:`process` for an elementwise primitive whose forward rule is defelementwise's, on
        this level's tracers (of plain values: the outermost level) and plain numbers, with no
        keywords; None for what it leaves to :meth:`process` (no tangent among the arguments, a
        poisoned one). A jacobian's run notes the step as :meth:`process` would."""
        vals = []
        tans = []
        ins = []
        active = False
        for i, x in enumerate(leaves):
            tx = type(x)
            if tx is ArrayTracer or tx is ScalarTracer:
                s = x._storage
                vals.append(x._value.item() if s.weak and x._geom is None else x._value)
                ins.append(i)
                if s.tangent is not None:
                    if s.poison is not None and self.poison_of(x) is not None:
                        return None
                    g = x._geom
                    tans.append(s.tangent if g is None else view_of(s.tangentbuf, g))
                    active = True
                else:
                    tans.append(ZERO)
            else:
                if tx is not float and tx is not _ndarray and foreign_subclass(x):
                    raise subclass_error(x)
                vals.append(x)
                tans.append(ZERO)
        if not active:
            return None
        if self.run_group is not None:
            _note_step(self.run_group, prim, _traced_at(leaves, ins), vals)
        y, ydot = prim.frule(tuple(vals), tuple(tans))
        if isinstance(ydot, NotImplementedTangent):
            ydot = self._poisoned(ydot, prim.name)
        o, s = self.wrap_output(y, leaves, ins, prim.fresh)
        if s is not None:
            self.set_tangent(s, ydot, [t for t in tans if t is not ZERO])
        return o

    def ew_into(self, prim, leaves, dest):
        """:meth:`process_ew` into ``dest``, all of one of this level's arrays (``u *= c``, ``np.add(u, v,
        out=u)``), at the outermost level: the tangent computed into ``dest``'s tangent buffer (in place for
        ``u *= c``) and the value into ``dest``, as NumPy computes it, instead of new arrays written over both.
        None for what it leaves to the general path (a cast or broadcast output, a poisoned or inactive
        operand, a partial that reads the output)."""
        dv = dest._value
        uf = prim.elementwise[2]
        s = dest._storage
        if self.index or type(dv) is not _ndarray or type(uf) is not np.ufunc or s.poison is not None:
            return None
        vals = []
        tans = []
        for x in leaves:
            tx = type(x)
            if tx is ArrayTracer or tx is ScalarTracer:
                xs = x._storage
                if xs.poison is not None:
                    return None
                vals.append(x._value.item() if xs.weak and x._geom is None else x._value)
                tans.append(ZERO if xs.tangent is None else xs.tangent if x._geom is None
                            else view_of(xs.tangentbuf, x._geom))
            else:
                if tx is not float and tx is not _ndarray and foreign_subclass(x):
                    raise subclass_error(x)
                vals.append(x)
                tans.append(ZERO)
        active = [i for i in range(len(tans)) if tans[i] is not ZERO]
        if not active or any(prim.reads[i][1] for i in active):
            return None
        if np.result_type(*vals) != dv.dtype or not _broadcast_to(vals, dv.shape):
            return None
        if self.run_group is not None:  # (the general path's steps: the operation, then its write into dest)
            g = self.run_group
            _note_step(g, prim, _traced_at(leaves), vals)
            # (the general path's write of the result it made: a storage born at this step, Storage.birth)
            g.note(("write", index_step(Ellipsis), s.birth, g.at()))
        self.check_writable(dest, True, Ellipsis)
        if s.pristine:
            s.pristine = False
        own = s.tangent
        acc = ew_tangent(prim, prim.elementwise[1], vals, tans, None,
                         own if len(active) == 1 and tans[active[0]] is own else None)
        if isinstance(acc, NotImplementedTangent):
            s.poison = self._poisoned(acc, prim.name)
        elif acc is not own:
            if own is None:
                if not isinstance(acc, AbstractZero):
                    self.ensure_tangent(s)
                    s.tangent[...] = acc
            else:
                own[...] = 0 if isinstance(acc, AbstractZero) else acc
        uf(*vals, out=dv)
        return dest

    def process(self, prim, leaves, tree, args, kwargs):
        vals, ins = self.unwrap_args(leaves, prim.weak_args)
        if self.run_group is not None:  # (one of a forward-mode jacobian's runs: its steps)
            # ins: which operands are traced; the operands' values, traced or not, are the same in
            # every run of the same function (a constant read from state the function changes, as
            # `step[0] * x` after `step[0] += 1`, is not: at x = 0 the outputs would still agree)
            # (the array a layout operation moves: by its shape, see Primitive.moves; its axes, order, k by value;
            # keyword arguments too, np.rot90(x, k=state))
            _note_step(self.run_group, prim, _traced_at(leaves, ins), vals, kwargs)
        tans = None
        for i in ins:
            t = leaves[i]
            if t._storage.tangent is not None:
                if tans is None:
                    tans = [ZERO] * len(leaves)
                tans[i] = self.tangent_of(t)
        zero = prim.zero
        if zero is ZERO_IF_REAL:  # (np.sign: zero for real inputs, its rules for complex ones)
            zero = not _any_complex(vals)
            note_equality(leaves, "order_at")  # (a sign test: a bisection's np.sign(f(mid)) == np.sign(f(lo)))
        if tans is None or zero:
            out = apply_inner(prim, vals, tree, kwargs)
            return self.constant_result(self.wrap(out, leaves, ins, None, ()), leaves, ins, zero)
        frule = prim.frule
        if frule is None:
            if prim.rrule is None:
                from .tape import prim_missing_rule

                raise prim_missing_rule(prim, "forward")
            from .derived import forward_from_reverse

            frule = forward_from_reverse(prim)
        primals = tuple(_unflatten_args(tree, vals))
        tangents = tuple(_unflatten_args(tree, tans))
        if tree is not None:  # a list or tuple with no tangent in it has a zero tangent (a list of
            tangents = tuple(_zero_if_constant(t) for t in tangents)  # numbers NumPy makes an array of)
        if getattr(frule, "events_apart", False):  # (elementwise: it keeps them apart itself)
            y, ydot = frule(primals, tangents, **kwargs)
        else:
            y, ydot = _frule_events_apart(prim, frule, primals, tangents, kwargs)
        self.check_rule_output(prim, y)
        poison = None
        unknown = []  # (an elementwise primitive's operands poisoned at some elements only: their masks)
        for i in ins:
            p = leaves[i]._storage.poison
            if p is not None and leaves[i]._storage.tangent is not None and self.poison_of(leaves[i]) is not None:
                m = self._unknown_of(leaves[i]) if (prim.elementwise is not None or prim.pointwise) and (
                    type(y) is _ndarray) else None
                if m is None:
                    poison = p
                else:
                    unknown.append((m, p))
        if isinstance(ydot, NotImplementedTangent):
            poison = self._poisoned(ydot, prim.name)
        if poison is not None:  # every output depends on a derivative nobody can give
            ys, ytree = output_leaves(y)
            ydot = poison if ytree is None else tree_unflatten(ytree, [poison] * len(ys))
        elif unknown:
            # an output element reads its operands' elements at its own place only: it is poisoned where one
            # of those is (the columns of a tied eigenvector's, V * turn or V ** 3: the regress93 tester)
            mask = np.zeros(np.shape(y), bool)
            for m, _ in unknown:
                mask |= np.broadcast_to(m, np.shape(y))
            known = np.zeros(np.shape(y), y.dtype) if isinstance(ydot, AbstractZero) else ydot
            ydot = PartlyNotImplemented(known, mask, unknown[0][1])
        in_t = [x for x in tans if not isinstance(x, AbstractZero)]
        return self.wrap(y, leaves, ins, ydot, in_t, prim)

    def wrap(self, y, leaves, ins, ydot, in_t, prim=None):
        ys, ytree = output_leaves(y)
        if ytree is not None:  # several outputs: a tuple, list, dict, dataclass... of them (a pytree)
            if ydot is None or isinstance(ydot, AbstractZero):
                dls = [ZERO] * len(ys)
            else:
                try:
                    dls = tree_flatten_like(ytree, ydot, "the tangent")
                except ValueError as e:
                    from .errors import RuleError

                    raise RuleError(
                        f"the forward rule of {prim.name if prim is not None else 'an operation'} returned tangents "
                        f"that do not match its outputs ({e}); return one tangent per output, in the outputs' "
                        f"structure (mg.ZeroTangent() for a zero one), at {user_line()}") from None
            outs = []
            fresh = []
            zero = prim.zero_outputs if prim is not None else ()
            for j, (yl, dl) in enumerate(zip(ys, dls)):
                o, s = self.wrap_output(yl, leaves, ins)
                if s is not None:
                    if j in zero:  # (a constant, as a piecewise-constant function's result)
                        s.pristine = True
                    else:
                        self.set_tangent(s, dl, in_t)
                outs.append(o)
                fresh.append(s)
            self.check_shared_outputs(outs, fresh, prim)
            return tree_unflatten(ytree, outs)
        if isinstance(ydot, (tuple, list, dict)):  # (summed into the array it would make: never right)
            from .errors import RuleError

            raise RuleError(
                f"the forward rule of {prim.name if prim is not None else 'an operation'} returned a "
                f"{type(ydot).__name__} as the tangent of its one output: return one tangent, an array (or "
                f"number) of the output's shape, at {user_line()}")
        o, s = self.wrap_output(y, leaves, ins)
        if s is not None and ydot is not None:
            self.set_tangent(s, ydot, in_t)
        return o

    def getitem(self, t, idx):
        if self.run_group is not None:
            self.run_group.note(("getitem", index_step(idx), t._storage.birth))
        res, out = self.index_value(t, idx)
        if out is None:
            return res
        s = t._storage
        if s.poison is not None and self.poison_of(t, idx) is not None:
            self.set_tangent(out, s.poison)
        elif s.tangent is not None:
            td = self.tangent_of(t)[idx]
            if not isinstance(td, Tracer):
                td = np.array(td)  # always a private copy
            self.set_tangent(out, td)
        return res

    def write(self, dest, idx, value):
        if self.run_group is not None:
            self.run_group.note(("write", index_step(idx), dest._storage.birth, _birth(value)))
        own = isinstance(value, Tracer) and value._level is self
        s = self.check_writable(dest, own and _carries_derivative(value), idx)
        if s.pristine and own and not value._storage.pristine:
            s.pristine = False  # (no longer known to be a constant)
        vv = value._value if own else value
        if self.index:
            vv = self.check_not_outer_into_plain(dest, vv)
        vdot = self.tangent_of(value) if own else ZERO
        if complex_into_real(dest._value, vv):
            warn_complex_cast()
            vv = vv.real
        dest._value[idx] = vv
        if own and value._storage.poison is not None and self.poison_of(value) is not None:
            self._note_poisoned_write(s, dest, idx, value._storage.poison, self._unknown_of(value))
        elif s.poison is not None:
            self._note_clean_write(s, dest, idx)
        if s.tangent is None and isinstance(vdot, AbstractZero):
            return
        self.ensure_tangent(s)
        tv = self.tangent_of(dest)
        if isinstance(vdot, AbstractZero):
            tv[idx] = 0
        else:
            vdot = project(vdot, value.shape, value.dtype) if own else vdot
            if value.dtype.kind == "c" and dest.dtype.kind != "c":
                vdot = np.real(vdot)
            tv[idx] = vdot

    def poison_of(self, t, idx=None):
        """The poison of traced ``t`` (``t[idx]``), None where every element it shows has been rewritten
        with values that have a derivative since its storage was poisoned (see :meth:`_note_clean_write`):
        ``ab[1] = 3.0; ab[1] += p`` after a SciPy overwrite of ``ab`` reads only rewritten elements."""
        s = t._storage
        if s.poison is None:
            return None
        unknown = self._unknown_of(t)
        if unknown is None:
            return s.poison
        return s.poison if np.any(unknown if idx is None else unknown[idx]) else None

    def _unknown_of(self, t):
        """Where traced ``t``, whose storage is poisoned, is poisoned (a boolean array of its shape), by its clean
        marks; None where there are none (the whole storage is)."""
        s = t._storage
        entry = self.clean_marks.get(id(s))
        if entry is None or entry[0] is not s:
            return None
        marks = entry[2] if t._geom is None else view_of(entry[1], t._geom)
        marks = np.asarray(marks)
        return (marks.real == 0) | ((marks.imag == 0) if marks.dtype.kind == "c" else False)

    def _marks(self, s, clean):
        """The clean marks of storage ``s`` (see :meth:`_note_clean_write`): (s, the mark buffer, its root view),
        made where there are none with every element clean (``clean``) or poisoned."""
        entry = self.clean_marks.get(id(s))
        if entry is None or entry[0] is not s:
            buf, root = s.new_mirror(np.zeros)
            if clean:
                root[...] = (1 + 1j) if root.dtype.kind == "c" else 1
            entry = self.clean_marks[id(s)] = (s, buf, root)
        return entry

    def _note_poisoned_write(self, s, dest, idx, poison, unknown=None):
        """A write of values that have no derivative (SciPy's workspace) into ``dest[idx]``: the storage is
        poisoned there only, the rest marked clean (a workspace that is a view of a larger buffer, whose other
        elements keep their derivatives); all of it poisoned at once for a write over the whole storage.
        ``unknown``: where a value poisoned at some elements only is (its shape, broadcast over the region:
        ``V *= 2`` of tied eigenvector columns, regress94), whose marks the region takes."""
        entry = self.clean_marks.get(id(s))
        if entry is not None and entry[0] is not s:
            entry = None
        whole = unknown is None and dest._geom is None and (idx is Ellipsis or (type(idx) is tuple and not idx))
        if whole or (s.poison is not None and entry is None):  # (already poisoned all over: stays so)
            s.poison = poison
            self.clean_marks.pop(id(s), None)
            return
        entry = self._marks(s, clean=True)
        target = entry[2] if dest._geom is None else view_of(entry[1], dest._geom)
        if unknown is None:
            target[idx] = 0
        else:
            clean = (1 + 1j) if target.dtype.kind == "c" else 1
            target[idx] = np.where(np.broadcast_to(unknown, np.shape(target[idx])), 0, clean)
        s.poison = poison

    def _note_clean_write(self, s, dest, idx):
        """A write of values that have a derivative into a poisoned storage (one holding, say, the
        scratch values SciPy left with overwrite_a=True): the poison covers the storage's marked elements
        (all of them, or a view's: _note_poisoned_write), so it goes once every element (both parts of a
        complex one) has been rewritten so since; reads of rewritten elements are clean before (poison_of)."""
        entry = self._marks(s, clean=False)
        target = entry[2] if dest._geom is None else view_of(entry[1], dest._geom)
        target[idx] = (1 + 1j) if target.dtype.kind == "c" else 1
        root = entry[2]
        done = np.all(root.real != 0) and (root.dtype.kind != "c" or np.all(root.imag != 0))
        if done:
            s.poison = None
            del self.clean_marks[id(s)]


def _zero_if_constant(t):
    if type(t) is not list and type(t) is not tuple:
        return t
    parts = [_zero_if_constant(c) for c in t]
    if parts and all(isinstance(c, AbstractZero) for c in parts):
        return ZERO
    return type(t)(parts)
