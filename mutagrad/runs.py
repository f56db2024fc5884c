"""Compact recording of element-level code: runs of one-element operations.

A loop such as ``out[i] = a * out[i - 1] + x[i]`` performs, per element,
two element reads, two scalar operations and one element write. Recorded
as tape records, that is five Python objects plus their argument lists and
the output storages, about two kilobytes per element step. A
:class:`ScalarRun` records consecutive operations of that kind as rows of
four flat arrays instead (a one-byte code, 4-byte references, one-byte
distances to recent rows, float64 values): about 20 bytes per element step,
and the storages of intermediate scalars die as soon as the program drops
them.

What a run records (everything else ends it, as any other record appended
to the tape does):

* an element read ``x[i, j]`` (integer indices naming one element) of a
  float64 array stored C-contiguously: the element's position (the arrays a
  run reads and writes share one space of positions, each array's after the
  previous one's, so one reference names both the array and the element);
* an elementwise operation whose traced arguments are float64 NumPy scalars
  or 0-d float64 arrays and whose other arguments are Python floats or ints or
  float64 scalars, with a float64 scalar result: the operation's kind, where
  its active arguments come from (how many rows back, in a byte each, when
  all are rows of the run at most 255 back; else a reference each), and the
  argument values its partials read, except the constant numbers of the code
  (``0.9`` in ``0.9 * s``), which are part of the kind (up to ``BAKED``
  values per operation, then kept per row);
* an element write ``x[i, j] = v`` of such a scalar or a number into such an
  array: the element's position, where ``v`` comes from (nothing when it is
  the row just before), and the overwritten value if a pullback may read it
  (see :mod:`mutagrad.tape`).

A scalar produced by a run is a :class:`RunStorage` that knows its row. The
run holds no reference to it: its derivative lives in the run's
adjoints, and a later record that uses the scalar adds its cotangent there
(``ReverseLevel.accumulate`` sends it to :meth:`ScalarRun.receive`).

Runs are used by a single reverse-mode differentiation without recorded
source lines (``mg.explain`` and strict mode record one record per
operation, with its line).
"""
from __future__ import annotations

from array import array
from bisect import bisect_right

import numpy as np

from .core import ArrayTracer, ScalarTracer, Storage, ew_value, write_readonly
from .registry import ew_cotangent
from .tangents import AbstractZero, NotImplementedTangent, project

_ndarray = np.ndarray
_float64 = np.float64
_F64 = np.dtype(np.float64)
# Row codes; an operation's code is _EW + its kind. A write whose value is the row just before
# it (v = x[j]; y[i] = v, or y[i] = a * b) has a code of its own and no reference to the value.
_GATHER, _WRITE, _WRITE_SAVED, _WRITE_PREV, _WRITE_SAVED_PREV, _EW = range(6)
_SAVED = frozenset((_WRITE_SAVED, _WRITE_SAVED_PREV))
_CONST = -(1 << 31)  # a written value that is a constant
# References are 4-byte integers: rows (at most MAX_ROWS per run), storages outside the run
# (-1 - index, at most three per row) and element positions up to REF_MAX; a position beyond
# that widens the run's references to 8 bytes.
REF_MAX = (1 << 31) - 1
MAX_ROWS = 1 << 29  # rows of one run (the level starts a new run after that many)
_INTS = frozenset((int, np.int64, np.int32, np.intp))
_BIG = 1 << 53  # integers beyond this are not exact as float64
_NO = object()  # arg_kind: not something a run records


class RunStorage(Storage):
    """The storage of a float64 scalar computed by a run: row ``slot`` of ``run``."""

    __slots__ = ("run", "slot")

    def __init__(self, level, y, run, slot):
        # Storage.__init__ for a NumPy scalar, inlined (the element loop's hot path)
        self.level = level
        self._bounds = None
        self.shape = ()
        self.dtype = _F64
        self._root = y
        self._rootgeom = None
        self.active = True
        self.captured = False
        self.adj = None
        self.adjbuf = None
        self.tangent = None
        self.tangentbuf = None
        self.run = run
        self.slot = slot


class _Kind:
    """An elementwise primitive with a given set of active arguments, types
    of constant arguments, where the references to the active arguments are
    kept, and possibly the values of constant numbers: what a row of that
    kind stores."""

    __slots__ = ("prim", "partials", "active", "need", "out_read", "types", "callable", "near", "xs")

    def __init__(self, prim, active, types, near, consts=()):
        self.prim = prim
        self.partials = prim.elementwise[1]
        self.active = active  # positions of the active arguments (one reference each)
        # True: the active arguments are rows at most 255 back, referred to by one byte each
        # (ScalarRun.near); False: by a reference each (ScalarRun.refs)
        self.near = near
        need, out_read = set(), False
        if not prim.linear:
            for i in active:
                r, ry = prim.reads[i]
                need.update(r)
                out_read = out_read or ry
        xs = [None] * len(types)  # the arguments the partials read, baked constants in place
        for i, c in consts:  # numbers of the code (``0.9 * s``): part of the kind, not of each row
            xs[i] = c
            need.discard(i)
        self.xs = xs
        self.need = tuple(sorted(need))  # positions whose values each row keeps
        self.out_read = out_read  # the partials read the output too
        self.types = types  # the type to rebuild each argument value with
        self.callable = any(callable(self.partials[i]) for i in active)


def element_position(t, idx):
    """The position, in the flat adjoint buffer of ``t``'s storage, of the one
    element ``t[idx]`` names (integer indices, as many as ``t`` has
    dimensions), or None if ``t[idx]`` is not such an element or the storage
    is not a C-contiguous float64 root."""
    ti = type(idx)
    if ti in _INTS:
        idx = (idx,)
    elif ti is not tuple:
        return None
    dv = t._value
    shape = dv.shape
    if len(idx) != len(shape):
        return None
    s = t._storage
    if s.dtype != _F64:
        return None
    geom = t._geom
    if geom is None:
        if s.root_geom() is not None:
            return None
        off, strides = 0, dv.strides
    else:
        if geom.overlap or geom.dtype != _F64 or s.root_geom() is not None:
            return None
        off, strides = geom.offset, geom.strides
    for i, n, st in zip(idx, shape, strides):
        if type(i) not in _INTS:
            return None
        i = int(i)
        if i < 0:
            i += n
        off += i * st
    return off >> 3


def arg_kind(x, level):
    """How a run records an argument or a written value ``x``: ``None`` for an
    active traced float64 scalar (or 0-d array) of ``level``, the type to
    rebuild the value with for a constant a run takes (a Python float or an int
    exact as float64, a float64 scalar, an inactive traced one), else ``_NO``."""
    tx = type(x)
    if tx is ScalarTracer or tx is ArrayTracer:
        if x._level is not level:
            return _NO
        v = x._value
        if type(v) is not _float64 and (tx is ScalarTracer or v.shape != () or v.dtype != _F64):
            return _NO
        return None if x._storage.active else _float64
    if tx is float or tx is _float64:
        return tx
    if tx is int and -_BIG <= x <= _BIG:
        return int
    return _NO


def operation(level, prim, leaves, scalar_op):
    """``prim(*leaves)`` computed and recorded in the level's run (the caller
    decided there is one, or may be), if it is an operation runs record (see
    the module docstring); else None, with nothing computed or recorded."""
    if prim.user:  # (a user's defelementwise: recorded as a record, whose backward checks its partials)
        return None
    key = [prim]
    vals = []
    act = []
    cvals = None  # the values of the constant numbers, in order
    for x in leaves:
        tx = type(x)
        if tx is ScalarTracer and x._level is level and x._storage.active and type(x._value) is _float64:
            act.append(x)  # (the common cases of arg_kind first)
            vals.append(x._value)
            key.append(None)
            continue
        if tx is float:
            vals.append(x)
            key.append(float)
            if x == x and x != 0:
                if cvals is None:
                    cvals = [x]
                else:
                    cvals.append(x)
            continue
        kx = arg_kind(x, level)
        if kx is None:
            act.append(x)
            vals.append(x._value)
        elif kx is _NO:
            return None
        else:
            vals.append(x._value if kx is _float64 and type(x) is not _float64 else x)
            if (kx is float or kx is int) and x == x and x != 0:  # (not -0.0: equal to 0.0 as a key)
                if cvals is None:
                    cvals = [x]
                else:
                    cvals.append(x)
        key.append(kx)
    if not act:
        return None
    if prim.name == "np.float64.__pow__" and any(x._storage.weak for x in act):
        # (a power of a weak scalar, a Python float's: 0.0 ** -1.0 raises, (-2.0) ** 0.5 is complex: the
        # general path, which computes it on Python numbers as a plain call does. A weak scalar's division
        # by zero raised already: core._python_zero_division)
        return None
    y = ew_value(prim, vals, scalar_op)
    if type(y) is not _float64:
        return None
    run = level.run()
    k = len(run.codes)
    srcs = []
    near = True
    for x in act:  # (ScalarRun._ref, inlined)
        st = x._storage
        if type(st) is RunStorage and st.run is run:
            r = st.slot
            if k - r > 0xFF:
                near = False
        else:
            r = -1 - run._ext(st, x._geom)
            near = False
        srcs.append(r)
    key.append(near)
    kinds, ids, baked = level.run_kinds
    c = None
    if cvals is not None and not prim.linear:
        # a kind per value of the constant numbers (0.9 in ``0.9 * s``), up to BAKED per kind,
        # so that the rows need not keep them
        ck = tuple(key + cvals)
        c = ids.get(ck)
        if c is None:
            c = _baked_kind(kinds, ids, baked, prim, tuple(key), ck, leaves)
    if c is None:
        key = tuple(key)
        c = ids.get(key)
        if c is None:
            if len(kinds) + _EW > 0xFFFF:
                return None
            c = ids[key] = _new_kind(kinds, prim, key, ())
    kind = kinds[c - _EW]
    if c > 0xFF and run.codes.typecode == "B":
        run.codes = array("H", run.codes)  # codes of 2 bytes from now on (more than 250 kinds)
    if near:
        rn = run.near
        for r in srcs:
            rn.append(k - r)
    else:
        run.refs.extend(srcs)
    if kind.need:
        rv = run.vals
        for i in kind.need:
            rv.append(vals[i])
    if kind.out_read:
        run.vals.append(y)
    run.codes.append(c)
    return ScalarTracer(y, level, RunStorage(level, y, run, k), None, True)


def _baked_kind(kinds, ids, baked, prim, key, ck, leaves):
    """The code of a new kind for ``ck`` (``key`` and the values of its constant
    numbers), or None if ``key`` has BAKED of them already."""
    nb = baked.get(key, 0)
    if nb >= BAKED or len(kinds) + _EW > 0xFFFF:
        return None
    baked[key] = nb + 1
    types = key[1:-1]
    consts = [(i, leaves[i]) for i in range(len(types))
              if (types[i] is float or types[i] is int) and leaves[i] == leaves[i] and leaves[i] != 0]
    c = ids[ck] = _new_kind(kinds, prim, key, consts)
    return c


BAKED = 8  # kinds with constant values baked in, per kind of operation (beyond: kept per row)


def _new_kind(kinds, prim, key, consts):
    """Add the kind of ``key`` (prim, the arguments' kinds, near) to ``kinds``; its code."""
    types = key[1:-1]
    kinds.append(_Kind(prim, tuple(i for i in range(len(types)) if types[i] is None),
                       tuple(_float64 if t is None else t for t in types), key[-1], consts))
    return len(kinds) - 1 + _EW


class ScalarRun:
    """Consecutive one-element operations, recorded as rows (see the module
    docstring). Reads like a tape record: ``backward(level)``, ``redo()``."""

    __slots__ = ("codes", "refs", "near", "vals", "ext", "_ext_ids", "_starts", "_start_ext", "_vbase", "_vend",
                 "kinds", "roots", "adj", "poison", "_redo", "_flats")
    line = None  # (read like a record's: runs are not used where lines are recorded)

    def __init__(self, kinds):
        # one per row (see the codes above): 1 byte, 2 once the level has more than 250 kinds
        self.codes = array("B" if len(kinds) + _EW <= 0xFF else "H")
        self.refs = array("i")  # per row, in order: see gather / write / operation (8 bytes: see _wide)
        self.near = array("B")  # per operation row of a near kind: how many rows back each argument is
        self.vals = array("d")  # per row, in order: the values its pullback reads
        self.ext = []  # (storage, geometry) outside the run that rows read or write
        self._ext_ids = {}
        # The arrays that rows read or write elements of share one space of positions: an array's
        # elements start where the previous array's end, so a read or write keeps one position
        # (ext index and position within the array found by bisection in _starts)
        self._starts = []  # where each array's positions start (increasing)
        self._start_ext = []  # its ext index
        self._vbase = {}  # id(storage) -> where its positions start
        self._vend = 0
        self.kinds = kinds  # the level's list of _Kind (a row's code is _EW + its index)
        self.roots = None  # ext index -> flat root array, for writes that save what they overwrite
        # the adjoints of the rows a cotangent reached and the reverse pass has not yet (a dict:
        # in element loops few are pending at a time, so it stays small where a list has a slot per row)
        self.adj = None
        self.poison = None  # row -> NotImplementedTangent
        self._redo = None
        self._flats = None

    def __len__(self):
        return len(self.codes)

    # -- forward pass -------------------------------------------------------

    def _ext(self, s, geom=None):
        if geom is None:
            j = self._ext_ids.get(id(s))
            if j is not None:
                return j
            self._ext_ids[id(s)] = len(self.ext)
        self.ext.append((s, geom))
        return len(self.ext) - 1

    def _ref(self, x):
        s = x._storage
        if type(s) is RunStorage and s.run is self:
            return s.slot
        return -1 - self._ext(s, x._geom)

    def _wide(self):
        """References of 8 bytes from now on (an element position beyond REF_MAX)."""
        if self.refs.typecode != "q":
            self.refs = array("q", self.refs)

    def _position(self, s, pos):
        """Position ``pos`` of storage ``s`` in the run's space of element positions."""
        base = self._vbase.get(id(s))
        if base is None:
            base = self._vbase[id(s)] = self._vend
            self._starts.append(base)
            self._start_ext.append(self._ext(s))
            n = 1
            for d in s.shape:
                n *= d
            self._vend = base + n
        pos += base
        if pos > REF_MAX:
            self._wide()
        return pos

    def _locate(self, vpos):
        """(ext index, position in that storage) of a position of the run's space."""
        i = bisect_right(self._starts, vpos) - 1
        return self._start_ext[i], vpos - self._starts[i]

    def gather(self, level, t, pos, v):
        """``t[idx]``, the element at flat position ``pos`` of ``t``'s storage, value ``v``."""
        k = len(self.codes)
        self.codes.append(_GATHER)
        vpos = self._position(t._storage, pos)  # (first: it may widen self.refs)
        self.refs.append(vpos)
        return ScalarTracer(v, level, RunStorage(level, v, self, k), None, True)

    def write(self, dest, pos, value, vactive, saved):
        """``dest[idx] = value`` at flat position ``pos``; ``saved``: the
        overwritten element, if a pullback may read it, else None."""
        s = dest._storage
        vpos = self._position(s, pos)
        src = self._ref(value) if vactive else _CONST
        prev = src == len(self.codes) - 1  # the value is the row just before
        if saved is None:
            self.codes.append(_WRITE_PREV if prev else _WRITE)
        else:
            self.codes.append(_WRITE_SAVED_PREV if prev else _WRITE_SAVED)
            j = self._ext(s)
            if self.roots is None:
                self.roots = {}
            if j not in self.roots:
                self.roots[j] = s.root.reshape(-1)
            self.vals.append(saved)
        refs = self.refs
        refs.append(vpos)
        if not prev:
            refs.append(src)

    # -- reverse pass -------------------------------------------------------

    def receive(self, slot, ct):
        """Add cotangent ``ct`` (any kind: a number, a 0-d array, a zero, a
        NotImplementedTangent) to row ``slot``'s adjoint."""
        if ct is None or isinstance(ct, AbstractZero):
            return
        if isinstance(ct, NotImplementedTangent):
            if self.poison is None:
                self.poison = {}
            self.poison.setdefault(slot, ct)
            return
        if type(ct) is not _float64 and type(ct) is not float:
            ct = project(ct, (), _F64)
            if type(ct) is _ndarray:
                ct = ct[()]
        adj = self.adj
        if adj is None:
            adj = self.adj = {}
        a = adj.get(slot)
        adj[slot] = ct if a is None else a + ct

    def _flat(self, j, level):
        """The flat adjoint buffer of external storage ``j`` (made if needed)."""
        s = self.ext[j][0]
        buf = s.adjbuf
        if buf is None or s.adjshared is not None:  # (written into below: a shared one is copied first)
            level.adjview(s, None)
            buf = s.adjbuf
        hit = self._flats.get(j)
        if hit is not None and hit[0] is buf:
            return hit[1]
        f = buf.reshape(-1)
        self._flats[j] = (buf, f)
        return f

    def _send(self, ref, ct, level):
        """Add cotangent ``ct`` to what reference ``ref`` names: a row of this
        run, or a storage outside it."""
        if ref < 0:
            s, geom = self.ext[-1 - ref]
            level.accumulate(s, geom, ct, self, True)
        elif type(ct) is _float64 or type(ct) is float:
            adj = self.adj
            a = adj.get(ref)
            adj[ref] = ct if a is None else a + ct
        else:
            self.receive(ref, ct)

    def backward(self, level):
        codes, refs, near, vals, kinds, ext = self.codes, self.refs, self.near, self.vals, self.kinds, self.ext
        starts, start_ext = self._starts, self._start_ext
        adj = self.adj
        if adj is None:
            adj = self.adj = {}
        self._flats = {}
        r, n, v = len(refs), len(near), len(vals)
        k = len(codes)
        try:
            for k in range(len(codes) - 1, -1, -1):
                c = codes[k]
                if c >= _EW:
                    kind = kinds[c - _EW]
                    act = kind.active
                    kn = kind.near
                    if kn:
                        n -= len(act)
                    else:
                        r -= len(act)
                    v -= len(kind.need) + kind.out_read
                    g = adj.pop(k, None)
                    if self.poison is not None and k in self.poison:
                        for q in range(len(act)):
                            self._send(k - near[n + q] if kn else refs[r + q], self.poison[k], level)
                        continue
                    if g is None:
                        continue
                    partials = kind.partials
                    if kind.callable:
                        types = kind.types
                        xs = list(kind.xs)
                        q = v
                        for i in kind.need:
                            xs[i] = types[i](vals[q])
                            q += 1
                        y = _float64(vals[q]) if kind.out_read else None
                    for q in range(len(act)):
                        d = partials[act[q]]
                        if type(d) is int:
                            ct = g if d == 1 else -g
                        elif d is None:  # not differentiable in that argument
                            continue
                        else:
                            ct = ew_cotangent(g, d, xs, y, act[q])
                        self._send(k - near[n + q] if kn else refs[r + q], ct, level)
                elif c == _GATHER:
                    r -= 1
                    g = adj.pop(k, None)
                    vpos = refs[r]
                    i = bisect_right(starts, vpos) - 1  # (_locate, inlined)
                    if self.poison is not None and k in self.poison:
                        level.accumulate(ext[start_ext[i]][0], None, self.poison[k], self)
                    elif g is not None:
                        self._flat(start_ext[i], level)[vpos - starts[i]] += g
                else:
                    if c >= _WRITE_PREV:
                        r -= 1
                        src = k - 1
                    else:
                        r -= 2
                        src = refs[r + 1]
                    vpos = refs[r]
                    i = bisect_right(starts, vpos) - 1  # (_locate, inlined)
                    j, pos = start_ext[i], vpos - starts[i]
                    if c in _SAVED:
                        v -= 1
                        fv = self.roots[j]
                        cur = fv[pos]  # swap: the saved value back in, the current one kept for redo
                        try:
                            fv[pos] = vals[v]
                        except ValueError:  # (the program made it read-only after the write)
                            write_readonly(fv, pos, vals[v])
                        vals[v] = cur
                    s = ext[j][0]
                    if s.adj is None and s.poison is None:
                        continue
                    f = self._flat(j, level)
                    g = f[pos] if s.poison is None else s.poison
                    f[pos] = 0.0
                    if src != _CONST:
                        self._send(src, g, level)
        except BaseException:
            self._redo = k  # rows k and later have swapped
            self.redo()
            raise
        else:
            self._redo = 0
        finally:
            # (the pending adjoints and the poison are of this pass only: a pullback
            # called again starts afresh)
            self._flats = self.adj = self.poison = None

    def redo(self):
        """Swap forward again, in program order, what the reverse pass swapped
        back (the rows from ``self._redo`` on), so the arrays hold what the
        program left in them and each row its saved value again."""
        low, self._redo = self._redo, None
        if low is None or self.roots is None:
            return
        codes, refs, vals, kinds, roots = self.codes, self.refs, self.vals, self.kinds, self.roots
        r = v = 0
        for k in range(len(codes)):
            c = codes[k]
            if c >= _EW:
                kind = kinds[c - _EW]
                if not kind.near:
                    r += len(kind.active)
                v += len(kind.need) + kind.out_read
            elif c == _GATHER:
                r += 1
            else:
                if c in _SAVED:
                    if k >= low:
                        j, pos = self._locate(refs[r])
                        fv = roots[j]
                        cur = fv[pos]
                        try:
                            fv[pos] = vals[v]
                        except ValueError:  # (the program made it read-only after the write)
                            write_readonly(fv, pos, vals[v])
                        vals[v] = cur
                    v += 1
                r += 1 if c >= _WRITE_PREV else 2

    def storages(self):
        """The storages outside the run that its rows read or write."""
        return [s for s, _ in self.ext]

    def reads(self, s):
        """What the rows read of storage ``s`` (outside the run), as (geometry, index) pairs: a gathered element
        (None, its position in s's flat root), an operand or a written value that is a view of s (its geometry,
        Ellipsis). A write into s reads nothing of it."""
        codes, refs, kinds, ext = self.codes, self.refs, self.kinds, self.ext
        out = []

        def operand(ref):
            if ref < 0 and ref != _CONST:
                t, g = ext[-1 - ref]
                if t is s:
                    out.append((g, Ellipsis))

        r = 0
        for k in range(len(codes)):
            c = codes[k]
            if c >= _EW:
                kind = kinds[c - _EW]
                if not kind.near:  # (a near kind's arguments are rows of the run itself)
                    for q in range(len(kind.active)):
                        operand(refs[r + q])
                    r += len(kind.active)
            elif c == _GATHER:
                j, pos = self._locate(refs[r])
                if ext[j][0] is s:
                    out.append((None, pos))
                r += 1
            elif c >= _WRITE_PREV:
                r += 1
            else:
                operand(refs[r + 1])
                r += 2
        return out
