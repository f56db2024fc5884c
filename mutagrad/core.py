"""The traced array type, differentiation levels, storages and the dispatcher.

A :class:`Tracer` wraps a value (an ndarray, or a tracer of an outer level)
and belongs to one :class:`Level` (one ``grad`` or ``jvp`` in progress). Every
NumPy entry point reaches :func:`bind`, which finds the innermost level among
the arguments and lets it process the call with the primitive's rule.

A :class:`Storage` is one buffer at one level: a fresh array and all its
views share it. Derivative buffers (adjoints in reverse mode, tangents in
forward mode) are kept per storage and mirror its memory layout byte for
byte, so the derivative of a view is the same view of the storage's
derivative buffer: views need no rule and alias exactly as NumPy's do.

Invariant that keeps nesting correct: an array created while levels
``L1 < ... < Lk`` are active is wrapped at all of them (inactive where it
does not depend on that level's input). A write into it of a value traced at
any of those levels is then recorded by that level.
"""
from __future__ import annotations

import ast
import builtins
import cmath
import collections
import copy
import dataclasses
import dis
import fractions
import functools
import gc
import inspect
import itertools
import linecache
import math
import numbers
import operator
import os
import sys
import threading
import types
import warnings
import weakref

import numpy as np

from .elide import ELIDE_BYTES, note_result, temporary
from .errors import (
    _CALL_OPS,
    TEST_HINT,
    MutationError,
    NoRuleError,
    TracerEscapeError,
    WriteToPlainArrayError,
    _frame_is_internal,
    _installed_package,
    _statement_at,
    at_a_store,
    at_an_operator,
    call_at,
    compared_in_a_test,
    escape_error,
    in_a_test,
    index_valued_call,
    method_calls,
    note_escape,
    parse,
    plain_augassign_target,
    plain_call_target,
    plain_write_target,
    predicate_call,
    printing_statement,
    storing_into_subscript,
    user_frame,
    user_line,
    user_place,
)
from .tangents import ZeroTangent

try:
    from numpy.lib.array_utils import byte_bounds as _byte_bounds
except ImportError:  # NumPy < 2
    _byte_bounds = np.byte_bounds

__all__ = ["Tracer", "Level", "Storage", "bind", "Primitive", "REGISTRY", "FUNCTIONS"]

_ndarray = np.ndarray
_getframe = sys._getframe
_get_ident = threading.get_ident
_getrefcount = sys.getrefcount
_getweakrefcount = weakref.getweakrefcount
_np_power = np.power  # (a global, not an attribute lookup, on the ufunc hot path)
_FLOAT_KINDS = frozenset("fc")


class _State(threading.local):
    def __init__(self):
        self.levels: list = []
        self.ceiling = 0  # how many levels the running code can see
        self.lent = None  # a worker's: the thread whose levels it runs an operation in (run_lent)
        # steps running that are not the program's (RunGroup.note does not compare them): reverse passes, the
        # tape's copies of overwritten values, a careful pass's seeding
        self.off_program = 0
        # (the level, the record whose pullback runs now): see tape.read_mask
        self.footprint = None
        # the line of the operation a nested reverse pass differentiates now (a record's line: user_place's
        # pair or text), which the outer levels' records made in its pullback name (Level._place)
        self.replay = None
        # a list that collects the levels this thread starts (api.hessian's reverse-over-reverse attempt,
        # whose leftovers its forward runs must refuse as a run group's), or None
        self.started = None


STATE = _State()
# id(storage) -> (storage, argument name): the outer levels' traced arrays that running inner
# differentiations hold as arguments, read-only to the program through the arrays themselves
# (Level.lock_traced)
LOCKED_TRACED: dict = {}
# id(array) -> array: the arrays that running levels locked (Level.lock, Level.lock_traced),
# whichever levels the running code sees
LOCKED: dict = {}
# id(storage) -> (storage, what the caller passed: its ndarray or an outer level's traced array, the array at the
# end of that ndarray's chain of bases (None for a traced one)): arguments of running differentiations into which
# a value with a derivative has been written (Level.check_writable); the program's traced operations must not
# read that memory as a plain constant after it (_check_argument_read)
WRITTEN_ARGS: dict = {}
# id(index) -> (index, its function's name): what np.argmax / np.argmin returned for a differentiated array whose
# extreme is tied (rules/shape.py); a gather of a traced array at that very index warns (note_tied_pick)
TIED_PICKS: dict = {}
# id(array) -> [the running levels holding it locked, in any thread; the array; the writable view
# the first one made]: it becomes writable again when the last of them ends
_LOCK_REFS: dict = {}


def _release(a, v):
    """One level holding the caller's array ``a`` locked (``v``: its writable view) has ended."""
    refs = _LOCK_REFS.get(id(a))
    if refs is not None and refs[1] is a:
        refs[0] -= 1
        if refs[0] > 0:
            return  # (a level in another thread still holds it)
        del _LOCK_REFS[id(a)]
    LOCKED.pop(id(a), None)
    if not v.flags.writeable:
        return  # the function made its argument read-only: as a plain call leaves it
    try:
        # (a base read-only because an outer level locked it: a rule calling mg.grad on
        # the writable view of it that it got; one the program made read-only stays so)
        set_writeable(a)
    except ValueError:
        pass
_level_ids = itertools.count(1)


def active_levels():
    """The levels visible to the code running now, outermost first."""
    st = STATE
    return st.levels[: st.ceiling]


# --------------------------------------------------------------------------
# Primitives and the registries


_OWN_UNNAMED = frozenset(("abs", "a reduction's value", "a sum of spectral projectors"))  # mutagrad's primitives named otherwise


class Primitive:
    """A function whose derivative is given by rules rather than by tracing.

    ``linear``: the pullback does not read the primal inputs (so an input
    need not be kept or restored for it). ``zero``: the derivative is zero
    everywhere it exists (floor, sign): outputs are never active.
    """

    __slots__ = ("fn", "_name", "impl", "rrule", "frule", "linear", "zero", "reads", "fresh", "fresh_cts", "moves",
                 "pointwise", "elementwise", "fast", "weak_args", "zero_outputs", "names_line", "user", "eager",
                 "lists_as_arrays", "ties", "__weakref__")

    def __init__(self, fn, name=None, impl=None):
        self.fn = fn
        self.name = name or getattr(fn, "__name__", repr(fn))
        self.impl = impl if impl is not None else fn
        self.rrule = None
        self.frule = None
        self.linear = False
        self.zero = False
        # positions of outputs whose derivative is zero wherever it exists (divmod's quotient,
        # modf's integral part): constants, as a ``zero`` function's outputs are
        self.zero_outputs = ()
        # reads[i] = (argument positions, reads the output?) that the cotangent of
        # argument i needs; None: anything. Decides what must be kept for the pullback.
        self.reads = None
        self.fresh = False  # its results never alias its arguments (elementwise functions)
        # its result holds its first argument's values moved (a transpose, a reshape, a flip): a forward-mode
        # jacobian's runs compare the operands' shapes, not their values, which only the operations that
        # compute with them read (np.empty's uninitialized memory, other on each run, through buf.T); or a
        # function of the operands' values giving the position of the one moved, or None (np.einsum's views)
        self.moves = False
        # each output element reads the operands' elements at its own place only (broadcast): np.where, astype,
        # as an elementwise function's: a forward level poisons an output where an operand is (ForwardLevel.process)
        self.pointwise = False
        # its pullback returns newly made cotangents that it keeps no reference to (or views
        # of them), so the tape may adopt them as adjoint buffers without copying
        self.fresh_cts = False
        # (rrule, partials, function, frule) for functions defined by defelementwise: the levels' fast paths
        self.elementwise = None
        # eager(vals, positions): for an elementwise function whose partials are piecewise constant (np.maximum's
        # 0, 1/2, 1; np.abs's sign), what its record keeps in place of the operands when the program does not
        # read them again (np.maximum(h, 0, out=h), np.abs(x, out=x); np.clip's, registry.operands_dead), which
        # a write would otherwise save: the partials at the active positions computed now (registry.
        # EagerPartial); None (the attribute, or its answer for these operands): the operands are kept (a
        # reference to an array that lives on anyway costs nothing, a partial per call would)
        self.eager = None
        # np.maximum, np.minimum, np.fmax, np.fmin: its records note where the operands tie (tape._ties_of)
        self.ties = False
        # its function converts its positional arguments with np.asarray (SciPy's functions under mutagrad's own
        # primitives): a list or tuple holding traced values is made a traced array before the call, as that
        # conversion makes it (a user's primitive gets the list, with a cotangent per element)
        self.lists_as_arrays = False
        # its rules get a weak traced scalar as the Python number it stands for, whose dtype yields
        # to the arrays it meets (elementwise functions, np.where, user primitives, which get what
        # a plain call passes); the other built-in rules get its NumPy scalar, as np.asarray makes it
        self.weak_args = False
        # fast(level, leaves, dest): the operation recorded directly by a reverse-mode level that is
        # the only one and records no lines (common cases of matmul), or None to take the
        # general path. Set by rules; the reverse rule must give the same numbers.
        self.fast = None
        # a user's primitive (mg.primitive, or a rule registered for a function of the user's): its
        # rules get the checks mutagrad's own are tested for (a NoTangent for an argument that
        # carries a derivative, a write into a plain argument)
        f = fn if fn is not None else impl
        self.user = not isinstance(f, np.ufunc) and not (getattr(f, "__module__", None) or "").startswith(
            ("mutagrad", "numpy", "scipy", "builtins"))

    @property
    def name(self):
        return self._name

    @name.setter
    def name(self, n):
        self._name = n
        # the reverse level records the user's line of each use (a frame walk, ~3 µs), so that a
        # NotImplementedTangent its rule returns names it: the rules that may return one
        # (np.linalg's, scipy.linalg's, np.roots's; scipy.special's set it) and every primitive
        # a user registers (decided by the name, set again when a primitive is renamed)
        self.names_line = (n.startswith(("np.linalg.", "scipy.linalg.")) or n == "np.roots"
                           or not (n.startswith(("np.", "scipy.", "ndarray.", "mutagrad.")) or n in _OWN_UNNAMED))

    def __repr__(self):
        return f"Primitive({self.name})"


REGISTRY: dict = {}  # numpy callable / user primitive -> Primitive
FUNCTIONS: dict = {}  # __array_function__ targets -> handler(args, kwargs)


def qualname(fn) -> str:
    mod = getattr(fn, "__module__", None) or ""
    name = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or repr(fn)
    if isinstance(fn, np.ufunc):
        if getattr(np, fn.__name__, None) is fn:
            return f"np.{fn.__name__}"
        umath = getattr(getattr(np, "_core", None), "umath", None)
        if umath is not None and getattr(umath, fn.__name__, None) is fn:
            return f"np._core.umath.{fn.__name__}"  # NumPy's internal ufuncs (the one behind ndarray.clip)
        if fn.__name__.endswith(" (vectorized)"):
            return f"np.frompyfunc({fn.__name__[:-13]})"
        for where in ("scipy.special", "scipy.special._ufuncs"):
            if getattr(sys.modules.get(where), fn.__name__, None) is fn:
                return f"scipy.special.{fn.__name__}"
        return f"the ufunc {fn.__name__}"
    if mod.startswith("numpy"):
        mod = "np" + mod[5:]
        mod = mod.replace("np.linalg._linalg", "np.linalg").replace("np._core.multiarray", "np")
        mod = mod.replace("np._core.fromnumeric", "np").replace("np._core.numeric", "np")
        parts = mod.split(".")
        if len(parts) > 1 and parts[1].startswith("_"):
            mod = "np"
        if parts[:2] == ["np", "lib"]:
            mod = "np"
            for sub in ("stride_tricks",):
                if getattr(getattr(np.lib, sub, None), name, None) is fn:
                    mod = f"np.lib.{sub}"
            if getattr(getattr(np, "emath", None), name, None) is fn:
                mod = "np.emath"  # (numpy.lib.scimath: np.emath.sqrt is not np.sqrt)
    return f"{mod}.{name}" if mod else name


# Primitive.zero for a function whose derivative is zero on real inputs only (np.sign: a complex
# sign, z / |z|, has one): its rules run for complex ones
ZERO_IF_REAL = "real"


def _any_complex(vals) -> bool:
    return any(np.iscomplexobj(bottom(v)) for v in vals if isinstance(v, (Tracer, _ndarray, np.generic, complex)))


def get_primitive(fn, name=None) -> Primitive:
    p = REGISTRY.get(fn)
    if p is None:
        p = REGISTRY[fn] = Primitive(fn, name or qualname(fn))
        if hasattr(fn, "_implementation") and fn not in FUNCTIONS:
            FUNCTIONS[fn] = lambda args, kwargs, _p=p: bind(_p, args, kwargs)
    return p


# --------------------------------------------------------------------------
# Storages and geometry


def _carries_no_derivative(t):
    """Whether traced ``t`` has no derivative at any of its levels now: no recorded dependence
    on a differentiated input (reverse), no tangent and no poison (forward)."""
    while isinstance(t, Tracer):
        s = t._storage
        if (s.active if t._level.mode == "rev" else (s.tangent is not None or s.poison is not None)):
            return False
        t = t._value
    return True


def bottom(x):
    """The plain ndarray under every level of tracing."""
    while isinstance(x, Tracer):
        x = x._value
    return x


def weak(x) -> bool:
    """Whether traced ``x`` is a weak scalar (see Storage.weak)."""
    while True:
        v = x._value
        if not isinstance(v, Tracer):
            return x._storage.weak and x._geom is None  # (the scalar itself, not a view of its storage)
        x = v


def mark_weak(x):
    """Make traced scalar ``x`` weak: what Python arithmetic on Python numbers gives."""
    while isinstance(x._value, Tracer):
        x = x._value
    x._storage.weak = True


def plain_operand(x):
    """What a plain call would pass for ``x``: the plain value of a traced one (a
    Python number for a weak scalar), anything else as it is."""
    if isinstance(x, Tracer):
        return bottom(x).item() if x._scalar and weak(x) else bottom(x)
    return x


def plain_operands(tree):
    """:func:`plain_operand` of every leaf of ``tree`` (lists, tuples, dicts of arguments)."""
    from .pytree import tree_map

    return tree_map(plain_operand, tree)


def promotion_operand(x):
    """``x`` as NumPy's type promotion (np.result_type) sees it in a plain call:
    Python numbers and weak traced scalars as Python numbers, else the plain value."""
    if isinstance(x, Tracer):
        return plain_operand(x)
    return x if type(x) in (int, float, complex) else np.asarray(x)


def strong_operand(x):
    """``x`` as ``np.asarray`` makes it: a Python number or a weak traced scalar as a
    strong NumPy value (for functions that convert their arguments to arrays first,
    such as np.dot and ufunc.outer, where a Python float does not yield to the arrays)."""
    t = type(x)
    if t is float or t is int or t is complex:
        return np.asarray(x)[()]
    if isinstance(x, Tracer) and x._scalar and weak(x):
        return x.astype(x.dtype)  # a strong copy
    return x


def _weak_operand(x) -> bool:
    t = type(x)
    if t is float or t is int or t is complex or t is bool:
        return True
    return isinstance(x, Tracer) and x._scalar and weak(x)


def _py(x):
    """A weak traced scalar's (or a Python number's) value as the Python number it stands for."""
    return bottom(x).item() if isinstance(x, Tracer) else x


def _python_order(sym, a, b):
    """Python's TypeError for an order comparison of two Python numbers (a weak traced scalar
    stands for one) of which one is complex: NumPy's complex scalars compare, Python's do not."""
    if _weak_operand(b):
        pa, pb = _py(a), _py(b)
        if type(pa) is complex or type(pb) is complex:
            raise TypeError(f"'{sym}' not supported between instances of '{type(pa).__name__}' and "
                            f"'{type(pb).__name__}'")


def _weak_result(r, operands):
    """Mark ``r`` (a tracer or a tuple of them) weak if every operand of the Python
    operator that made it is a Python number or a weak traced scalar, as in a plain call."""
    for x in operands:
        if not _weak_operand(x):
            return r
    for y in (r if type(r) is tuple else (r,)):
        if isinstance(y, Tracer) and y._scalar:
            mark_weak(y)
    return r


def _slow_ptr(a) -> int:
    return a.__array_interface__["data"][0]


def _find_data_field():
    """The byte offset of the data pointer in NumPy's array object, checked on
    a few arrays (it follows the object header in PyArrayObject_fields), or
    None: then the slow public route is used."""
    import ctypes
    import sys

    if sys.implementation.name != "cpython":  # id() is an object's address only in CPython
        return None
    probes = [np.zeros(3), np.arange(10.0)[3:], np.ones((4, 5))[1:, ::2]]
    for off in (16, 24, 32):
        try:
            if all(ctypes.c_void_p.from_address(id(a) + off).value == _slow_ptr(a) for a in probes):
                return off
        except (ValueError, OSError):  # pragma: no cover
            return None
    return None  # pragma: no cover


_DATA_FIELD = _find_data_field()
if _DATA_FIELD is not None:
    import ctypes as _ctypes

    _read_ptr = _ctypes.c_void_p.from_address

    def _ptr(a) -> int:
        """The address of an array's first element (the data pointer, read
        directly: the public route builds a dict and costs ten times more)."""
        if type(a) is not _ndarray:  # a subclass may lay its object out differently; scalars have no pointer
            return _slow_ptr(a)
        return _read_ptr(id(a) + _DATA_FIELD).value or 0
else:  # pragma: no cover
    _ptr = _slow_ptr


def _bounds_of(b):
    """Like NumPy's byte_bounds, quicker for contiguous arrays."""
    if b.flags.c_contiguous or b.flags.f_contiguous:
        lo = _ptr(b)
        return lo, lo + b.nbytes
    return _byte_bounds(b)


def note_equality(args, attr="equality_at"):
    """Note, on the levels of the differentiated values among ``args`` (tracers carrying a derivative),
    the user's line of an equality test of them (a == b, np.array_equal): see Level.equality_at; with
    ``attr="order_at"``, of an order comparison (a < b, an if on one: Level.order_at). Not a rule's own
    comparison (huber's |r| <= d in its partials: a third derivative of huber, 0, warned of a bisection)."""
    for x in args:
        while isinstance(x, Tracer):
            lv = x._level
            if getattr(lv, attr) is None:
                if _carries_derivative(x):
                    if compared_by_mutagrad(sys._getframe(1)):
                        return
                    setattr(lv, attr, user_place())
                    lv.orders = 1
            elif attr == "order_at":
                lv.orders += 1  # (the comparisons after the first, a rule's too, counted: a bisection makes many)
            x = x._value


SEARCH_CAP = 4096  # comparisons kept per instruction (note_search); a bisection makes tens
SEARCH_SIZE = 4096  # the largest array whose comparisons are kept (np.where(f > 0, mid, lo), one root per element)


def note_search(x, c, frame):
    """Note, on the level of differentiated ``x`` (a number, or an array of at most SEARCH_SIZE elements), a
    comparison for order of it with the plain number ``c`` (Python's x > c, c < x) at the instruction
    ``frame`` is at: x - c (a float, or an array) and c, kept per instruction and shape (at most SEARCH_CAP,
    and 2 ** 20 elements; a list whose first item is the place, for line_text), from which api._warn_search
    tells a bisection on plain brackets converging on a point the output may depend on."""
    tc = type(c)
    if tc is not float and tc is not int and tc is not np.float64:
        if isinstance(c, (np.generic, _ndarray)) and not isinstance(c, Tracer) and c.dtype.kind in "fiu":
            # (np.float32(0), np.int64(0), np.array(0.0); a plain array of targets, one per element, F(mid) > u:
            # regress134)
            c = float(c) if c.ndim == 0 else c
        else:  # (a traced other, a complex, a bool: no such search)
            return
    if not _carries_derivative(x):
        return
    b = bottom(x)
    tb = type(b)
    if tb is _ndarray:
        if b.dtype.kind != "f" or not 0 < b.size <= SEARCH_SIZE:  # (a complex raises where NumPy's does)
            return
        if type(c) is _ndarray and c.shape != b.shape:
            return
        key = (frame.f_code, frame.f_lasti, b.shape)
        cap = min(SEARCH_CAP, (1 << 20) // b.size)
    elif type(c) is _ndarray:
        return
    elif tb is np.float64 or tb is np.float32 or tb is float:
        key = (frame.f_code, frame.f_lasti)
        cap = SEARCH_CAP
    else:
        return
    lv = x._level
    s = lv.searches
    if s is None:
        s = lv.searches = {}
    seq = s.get(key)
    if seq is None:
        seq = s[key] = [(frame.f_code, frame.f_lineno)]
    if len(seq) <= cap:
        seq.append((np.subtract(b, c, dtype=np.float64) if tb is _ndarray else float(b) - c, c))


def note_plain_read(x):
    """Note, on the open levels tracing ``x`` (a traced value without derivative there: np.round(x, 8) of an
    argument), where the program read its plain numbers (x.tobytes(), x.tolist()): an output with no derivative
    then may be a cached value keyed on them (`cache[np.round(x, 8).tobytes()]`: regress111; api._warn_cached)."""
    while isinstance(x, Tracer):
        lv = x._level
        if lv.value_at is None and not lv.closed and not compared_by_mutagrad(sys._getframe(1)):
            lv.value_at = user_place()
        x = x._value


_DISPATCH_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep
_DISPATCH_FILES = frozenset(_DISPATCH_DIR + name for name in (
    "core.py", "tape.py", "forward.py", "runs.py", "registry.py", os.path.join("rules", "elementwise.py")))
_RULE_RUNNERS = frozenset(_DISPATCH_DIR + name for name in ("tape.py", "forward.py", "runs.py", "derived.py"))


_RULE_FRAMES = frozenset(("_partial", "_frule_events_apart"))  # (registry's partials, forward's frule runner)


def compared_by_mutagrad(frame) -> bool:
    """Whether the comparison whose dispatch runs in ``frame`` was made by a rule (a partial, a pullback, a
    forward rule), not by the user's code: past the dispatch (core, tape, forward, elementwise), the
    comparing code is mutagrad's, and a level running a rule (tape, forward, runs, derived) is between it and
    the user's frame. (np.array_equal's handler, mutagrad's too, compares for the user: no level runs it.)"""
    f = frame
    while f is not None and f.f_code.co_filename in _DISPATCH_FILES:
        if f.f_code.co_name in _RULE_FRAMES:  # (an elementwise rule's partial, whose code sits in the dispatch
            return True  # files: np.abs's sign under jvp of jvp, regress120)
        f = f.f_back
    while f is not None and f.f_code.co_filename.startswith(_DISPATCH_DIR):
        if f.f_code.co_filename in _RULE_RUNNERS:
            return True
        f = f.f_back
    return False


def note_cache_key(args, equal):
    """Note (Level.cache_key_at) the user's line where a differentiated array compared equal, all of it
    (``equal``: the comparison's plain result), to a plain array of its shape: the key of a cache filled
    by an earlier plain call (scipy.optimize's MemoizeJac: ``np.all(x == self.x)``), whose kept value
    has no derivative, also where the output carries another one (the warnnoise2 tester)."""
    if len(args) < 2 or not bool(np.all(equal)):
        return
    for x, y in ((args[0], args[1]), (args[1], args[0])):
        if not isinstance(x, Tracer) or np.shape(x) != np.shape(y):
            continue
        if type(y) is _ndarray and y.size > 1:
            note_equality((x,), "cache_key_at")
        elif (not isinstance(y, Tracer) and isinstance(y, (float, np.floating, _ndarray)) and np.ndim(y) == 0
              and _kept_operand(sys._getframe(1), y)):
            # (one number: `if B == self.B and C == self.C: return self.F`, a cache filled by a plain call
            # first: the vehicle tester; a number compared with a constant, `if x == 0:`, is a special case)
            note_equality((x,), "cache_key_at")


def _kept_operand(frame, y) -> bool:
    """Whether the comparison ``a == b`` (or ``np.isclose(a, b)``) the user's frame is at reads the plain finite
    number ``y`` from where a value is kept between calls: an attribute (``self.B``, not a module's constant:
    ``np.inf``), an item (``memo["B"]``, ``self.p[0]``), or a name that is not the function's own local (a
    global, a closed-over ``nonlocal``): looked up, nothing run."""
    if not np.isfinite(y):  # (`if act[i] == np.inf:`, a placeholder's test: the cardiac tester)
        return False
    user = user_frame(frame)
    for n in _compared_operands(user):
        v = _kept_value(n, user)
        if v is y or (isinstance(v, (float, np.floating)) and v == y) or (
                type(v) in (tuple, list) and len(v) <= 64 and any(k is y for k in v)):
            return True  # (a tuple key, `(a, b) == self.key`: its items compared one by one, regress102)
    return False


def _compared_operands(user):
    """The operands of the comparison the user's frame is at (``a == b``, ``a < b``), or of the call it is at
    (``np.isclose(a, b)``, Python's ``max(a, 0.0)``, ``abs(a)``): AST nodes; () where there is none."""
    node = call_at(user, ast.Compare)
    if node is not None:
        return (node.left, *node.comparators)
    node = call_at(user)
    if node is not None:
        return node.args
    return _compared_in_bytecode(user) if user is not None else ()


_LEAF_LOADS = {"LOAD_FAST": "name", "LOAD_NAME": "name", "LOAD_GLOBAL": "name", "LOAD_DEREF": "name",
               "LOAD_CLASSDEREF": "name", "LOAD_CONST": "const"}


def _compared_in_bytecode(user):
    """The two operands of the comparison (``COMPARE_OP``) ``user`` is at, rebuilt as AST nodes from its bytecode
    where they are names, attributes and constant-key items (code run by exec or ``python -c`` has no source to
    parse: a cache's ``if self._nu != nu:`` there was taken for a guard, the spectral tester); () otherwise."""
    try:
        ins = [i for i in dis.get_instructions(user.f_code) if i.offset <= user.f_lasti]
    except Exception:  # noqa: BLE001 (code dis cannot read)
        return ()
    if not ins or ins[-1].opname != "COMPARE_OP" or ins[-1].offset != user.f_lasti:
        return ()

    def operand(j):  # the expression whose value instruction j leaves on the stack: (node, its first instruction)
        if j < 0:
            return None, j
        i = ins[j]
        kind = _LEAF_LOADS.get(i.opname)
        if kind == "name" and isinstance(i.argval, str):
            return ast.Name(id=i.argval, ctx=ast.Load()), j
        if kind == "const":
            return ast.Constant(value=i.argval), j
        if i.opname == "LOAD_ATTR" and isinstance(i.argval, str):
            value, k = operand(j - 1)
            return (None, k) if value is None else (ast.Attribute(value=value, attr=i.argval, ctx=ast.Load()), k)
        if i.opname == "BINARY_SUBSCR":
            key, k = operand(j - 1)
            value, k = operand(k - 1) if key is not None else (None, k)
            return (None, k) if value is None else (ast.Subscript(value=value, slice=key, ctx=ast.Load()), k)
        return None, j

    right, k = operand(len(ins) - 2)
    left, _ = operand(k - 1) if right is not None else (None, k)
    return (left, right) if left is not None else ()


def _kept_value(n, user):
    """The value the operand ``n`` reads where it reads one kept between calls, looked up (:func:`_looked_up`):
    an attribute (``self.B``, not a module's constant: ``np.inf``), an item (``memo["B"]``, ``self.p[0]``),
    or a name that is not the function's own local (a global, a closed-over ``nonlocal``); else _UNRESOLVED."""
    if type(n) not in (ast.Attribute, ast.Subscript, ast.Name) or (
            type(n) is ast.Name and n.id in user.f_code.co_varnames) or (
            type(n) is ast.Attribute and isinstance(_looked_up(n.value, user), types.ModuleType)):
        return _UNRESOLVED
    return _looked_up(n, user)


def note_tolerance_key(inputs):
    """An order comparison of a traced number that is exactly 0 with a positive one, where the comparison takes
    a difference with a value kept between calls: a cache's key with a tolerance (`np.max(np.abs(x - self.x))
    < 1e-12`, `abs(s - self.s) <= 1e-14 * abs(s)`), hit where an earlier plain call filled it (regress102):
    noted as note_cache_key notes an equality."""
    for x, c in ((inputs[0], inputs[1]), (inputs[1], inputs[0])):
        if isinstance(x, Tracer):
            xb = bottom(x)
            if x._scalar:
                if xb != 0 or np.size(c) != 1:  # (the common case, first: an element loop's comparisons)
                    return
            elif np.size(c) != 1 or xb.dtype.kind != "f" or xb.size == 0 or np.any(xb):
                return  # (an array all 0: (np.abs(k - self.k) > 0).any(), np.all(np.abs(k - self.k) <= tol): fem2)
            cb = np.asarray(bottom(c))
            # (a bound of 0 too, np.max(np.abs(k - self.k)) > 0 (fem2): the difference with a kept value decides)
            if np.asarray(xb).dtype.kind == "f" and cb.dtype.kind in "fiu" and cb >= 0 and carries_any_derivative(x) and (
                    _kept_difference(sys._getframe(1))):
                note_equality((x,), "cache_key_at")
            return


def _kept_difference(frame) -> bool:
    """Whether the comparison the user's frame is at takes a difference (a - b) with a plain value kept where
    :func:`_kept_operand` looks (an attribute, an item, a name not the function's own)."""
    user = user_frame(frame)
    node = call_at(user, ast.Compare)
    if node is None:
        return False
    for sub in ast.walk(node):
        if type(sub) is ast.BinOp and type(sub.op) is ast.Sub:
            for n in (sub.left, sub.right):
                v = _kept_value(n, user)
                if isinstance(v, (float, np.floating, _ndarray)) and not isinstance(v, Tracer):
                    return True
    return False


def _looked_up(node, frame):
    """The value of a name, an attribute of one (its instance's or class's own, no property run) or an item
    of a dict or list at a constant key, in the user's ``frame``; _UNRESOLVED otherwise."""
    if type(node) is ast.Name:
        return frame.f_locals[node.id] if node.id in frame.f_locals else frame.f_globals.get(node.id, _UNRESOLVED)
    if type(node) is ast.Attribute:
        obj = _looked_up(node.value, frame)
        d = getattr(obj, "__dict__", None)
        if isinstance(d, dict) and node.attr in d:
            return d[node.attr]
        for klass in type(obj).__mro__:
            if node.attr in vars(klass):
                v = vars(klass)[node.attr]
                return v if isinstance(v, (numbers.Number, _ndarray)) else _UNRESOLVED
        return _UNRESOLVED
    if type(node) is ast.Subscript and type(node.slice) is ast.Constant:
        obj = _looked_up(node.value, frame)
        try:
            return obj[node.slice.value] if type(obj) in (dict, list, tuple, _ndarray) else _UNRESOLVED
        except (KeyError, IndexError, TypeError):
            return _UNRESOLVED
    return _UNRESOLVED


def capture(st, x, v):
    """Note that a pullback reads ``v``, the value of tracer ``x`` of storage ``st`` (later writes
    into it must save what they overwrite): all of ``st`` (``captured``), or for a view, the memory
    it spans (``span``, one interval: the rows of a history buffer read one by one, ``S[t + 1] = f(S[t])``,
    leave the rows after them free, whose writes then save nothing)."""
    if st.captured:
        return
    if x._geom is None or type(v) is not _ndarray:
        st.captured = True
        return
    lo, hi = _bounds_of(v)
    sp = st.span
    st.span = (lo, hi) if sp is None else (min(lo, sp[0]), max(hi, sp[1]))


def read_within(st, region) -> bool:
    """Whether a pullback may read the memory of storage ``st`` under ``region`` (a plain array: the
    values a write overwrites; anything else: somewhere in ``st``), see :func:`capture`."""
    if st.captured:
        return True
    sp = st.span
    if sp is None:
        return False
    if type(region) is not _ndarray:
        return True
    lo, hi = _bounds_of(region)
    return lo < sp[1] and sp[0] < hi and lo < hi


class Geom:
    """Where a view sits in its storage: byte offset, shape, strides, dtype."""

    __slots__ = ("offset", "shape", "strides", "dtype", "overlap")

    def __init__(self, offset, shape, strides, dtype, overlap=None):
        self.offset = offset
        self.shape = shape
        self.strides = strides
        self.dtype = dtype
        self.overlap = _may_self_overlap(shape, strides, dtype.itemsize) if overlap is None else overlap

    def __repr__(self):
        return f"Geom({self.offset}, {self.shape}, {self.strides}, {self.dtype})"


def set_writeable(view):
    """``view.flags.writeable = True`` for memory a tracer holds: NumPy asks the array that owns
    it, which is read-only while the function runs where that is a caller's array a running
    differentiation locked (Level.lock, lock_traced): unlocked for the moment, as in a plain
    call the array is writable."""
    try:
        view.flags.writeable = True
        return
    except ValueError:
        chain = []
        b = view.base
        while isinstance(b, _ndarray):
            chain.append(b)
            b = b.base
        lifted = [b for b in reversed(chain) if not b.flags.writeable and LOCKED.get(id(b)) is b]
        if not lifted:
            raise
        try:
            for b in lifted:  # (the owner first: NumPy lets a view be writable only then)
                b.flags.writeable = True
            view.flags.writeable = True
        finally:
            for b in lifted:
                b.flags.writeable = False


class _ArgumentFlags:
    """The flags of a traced array: those of the memory its tracer holds, except OWNDATA of an
    argument, which is the caller's array's (``if not x.flags.owndata: x = x.copy()`` takes the
    branch a plain call takes); WRITEABLE set to True as ``x.setflags(write=True)`` does."""

    __slots__ = ("_flags", "_owndata", "_tracer")

    def __init__(self, flags, owndata, tracer):
        object.__setattr__(self, "_flags", flags)
        object.__setattr__(self, "_owndata", owndata)
        object.__setattr__(self, "_tracer", tracer)

    def __getattr__(self, name):
        if name == "owndata":
            return self._owndata
        return getattr(self._flags, name)

    def __setattr__(self, name, value):
        if name == "writeable" and value:
            self._tracer.setflags(write=True)
            return
        setattr(self._flags, name, value)

    def __getitem__(self, key):
        if key in ("OWNDATA", "O"):
            return self._owndata
        return self._flags[key]

    def __setitem__(self, key, value):
        if key in ("WRITEABLE", "W") and value:
            self._tracer.setflags(write=True)
            return
        self._flags[key] = value

    def __repr__(self):
        return repr(self._flags).replace(f"OWNDATA : {not self._owndata}", f"OWNDATA : {self._owndata}")


def write_readonly(arr, idx, value):
    """``arr[idx] = value`` into memory the program made read-only after writing into it
    (``x.flags.writeable = False``): the reverse pass rewinds and redoes the program's writes.
    The read-only flags of ``arr`` and of its bases are lifted for the write and put back."""
    chain = []
    b = arr
    while isinstance(b, _ndarray):
        chain.append(b)
        b = b.base
    lifted = []
    try:
        for b in reversed(chain):  # the memory's owner first: NumPy lets a view be writable only then
            if not b.flags.writeable:
                b.flags.writeable = True
                lifted.append(b)
        arr[idx] = value
    finally:
        for b in reversed(lifted):
            b.flags.writeable = False


def _relockable(a) -> bool:
    """Whether NumPy lets ``a`` be made writable again once made read-only: its memory is a
    NumPy array's own, or a writable buffer's (bytearray, ctypes); not memory with no base
    object, or a base without a writable buffer."""
    b = a
    while isinstance(b.base, np.ndarray):
        b = b.base
    if b.flags.owndata:
        return True
    if b.base is None:
        return False
    try:
        return not memoryview(b.base).readonly
    except TypeError:
        return False


def _may_self_overlap(shape, strides, itemsize) -> bool:
    if 0 in shape:  # no elements: nothing overlaps (NumPy's writes into it are no-ops)
        return False
    dims = sorted((abs(s), n) for n, s in zip(shape, strides) if n > 1)
    extent = itemsize
    for s, n in dims:
        if s < extent:
            return True
        extent = s * (n - 1) + extent
    return False


WEAK_ROOT_SIZE = 256  # plain roots with more elements are held weakly by their storage


class Storage:
    """One buffer at one level; a fresh array and all its views share it.

    A large plain root is held weakly: the tape needs only its shape, dtype
    and layout (to make derivative buffers), and pullbacks hold the values
    they read themselves, so temporaries nobody reads die during the forward
    pass instead of living as long as the tape."""

    __slots__ = (
        "level", "_root", "_ref", "shape", "dtype", "active", "captured", "adj", "adjbuf", "tangent",
        "tangentbuf", "_bounds", "_rootgeom", "__dict__",
    )
    # Rarely set, so class-level defaults (an instance gets a dict only when one is set):
    aliased = None  # name of another differentiated argument sharing memory
    exported = False  # its memory was handed out as a plain array by mg.value
    # the user's line where np.asarray(x) handed its memory out as a plain read-only view (a
    # constant's, as NumPy's asarray returns the array itself): traced values written into it
    # later would show in that view without their derivative, so such a write raises
    handed_out = None
    handed_out_refs = ()  # weak references to the plain arrays np.asarray handed out (see __array__)
    poison = None  # a NotImplementedTangent that every derivative through here carries
    name = None  # "argument 0", ... for messages
    written = False  # ever written through mutagrad
    written_active = False  # an argument into which a value with a derivative was written (WRITTEN_ARGS)
    # in a forward-mode jacobian's run, the step of the run that made the storage (the arguments: their order):
    # steps note their traced operands' (RunGroup: a run reading another array of the same values computes
    # another function)
    birth = None
    # an argument that is the memory of a plain array the function names (api._mark_plain_aliases):
    # that name, and the argument's values at the call
    plain_alias = None
    # the name of a primitive whose output, in a plain call, is this storage's memory or that of
    # its argument (a copy inside a differentiation): a write into either raises
    prim_alias = None
    plain_views = ()  # (path, plain array, its values at the call) of each sharing its memory; plain_alias: the first's
    # a leftover of it used by a later differentiation has been warned about: that differentiation's (its
    # outermost level's id, unique; None: none yet)
    leftover_warned = None
    # the search for such names stopped at its budget (a large object graph): a write warns once
    alias_unchecked = False
    # (the caller's array, its bits at the call, api._arg_sum's): an argument mutagrad never writes must
    # hold them still when the function returns, else plain code changed it unseen (api._check_plain_aliases)
    call_sum = None
    # a constant argument whose elements share memory (as_strided with a zero stride, a broadcast
    # result of np.broadcast_arrays): its derivative buffer, one element per element, cannot hold
    # the derivative of a write into that memory, so reverse mode refuses one (api._caller_array)
    overlapping_arg = False
    # a view, lifted to an inner level, of an outer level's array that exists outside
    # the inner differentiation (see _lift_views): outer code can change it unseen
    outer_view = False
    # a constant that plain code may read: a non-differentiated argument, a buffer a level made
    # (lift: mnp.zeros, a rule's), or computed only from such, into which nothing but such
    # constants and plain values was written (Level.write, _ew_into: else it is False from then
    # on). Anything else converted to plain values raises.
    pristine = False
    # a scalar that is a Python float or complex in a plain call (an argument, or Python
    # arithmetic on such): NumPy's "weak" scalar, whose dtype yields to the arrays it meets
    # (NEP 50). Set only on the outermost tracer of a value, whose value is plain; the
    # levels pass it to NumPy as a Python number (see plain_operand, weak, mark_weak).
    weak = False
    # the traced array of the whole storage that its views report as their ``base`` (a
    # weak reference, set when a view is made from it): ``y[1:].base is y``, as in NumPy
    owner = None
    # an argument: the caller's array, read-only while the function runs, whose writable
    # view is the root (Level.lock)
    orig = None
    # captured before a write over the whole storage set `captured` back (tape._overwritten)
    was_captured = False
    # bytes of copies made of views of it for pullbacks (registry.view_kept)
    copied = 0
    # (low, high) addresses of the memory of it that pullbacks read through views, where they read
    # no more (not ``captured``): a write elsewhere need not save what it overwrites (see capture)
    span = None
    # reverse pass: the adjoint buffer (or the block of one that ``adj`` is) may be other
    # storages' too (the cotangent of ``a + b`` given to both operands as is): then this is
    # the count of its holders (tape._Share). It is read freely; before a write into it, a
    # holder that is not the last one left makes a copy of its own (ReverseLevel.private_adj)
    adjshared = None

    def __init__(self, level, root, active=False):
        self.level = level
        self._bounds = None
        g = level.run_group
        if g is not None and not STATE.off_program:  # (a reverse pass's: other in number where its rules take
            k = g.at()  # other paths, RunGroup.note)
            if k:  # (the step that made it: the paths that apply a step make other temporaries, regress97)
                self.birth = k
            else:  # (the arguments, before any step: in their order)
                self.birth = (0, g.births)
                g.births += 1
        tr = type(root)
        if tr is _ndarray:
            self.shape = root.shape
            self.dtype = root.dtype
            if root.size > WEAK_ROOT_SIZE:
                self._root = None
                self._ref = weakref.ref(root)
                if root.flags.c_contiguous:
                    self._rootgeom = None
                else:  # needs the memory address: take it now
                    self._bounds = _bounds_of(root)
                    self._rootgeom = self.geom_of(root)
            else:
                self._root = root
                self._rootgeom = None if root.flags.c_contiguous else False
        elif tr in _NP_FLOAT_SCALARS:  # a NumPy scalar: no memory geometry
            self.shape = ()
            self.dtype = root.dtype
            self._root = root
            self._rootgeom = None
        else:  # an outer level's tracer
            b = bottom(root)
            self.shape = b.shape
            self.dtype = b.dtype
            if type(root) is ArrayTracer and b.size > WEAK_ROOT_SIZE:
                # held weakly too (nested: a Hessian's inner tape keeps its storages, and the outer values'
                # tangents or records with them): its layout now, which the adjoint buffers follow
                self._root = None
                self._ref = weakref.ref(root)
                if b.flags.c_contiguous:
                    self._rootgeom = None
                else:
                    self._bounds = _bounds_of(b)
                    self._rootgeom = self.geom_of(b)
            else:
                self._root = root
                self._rootgeom = False
        self.active = active
        self.captured = False
        self.adj = None  # reverse: adjoint of the root view (during the reverse pass)
        self.adjbuf = None
        self.tangent = None  # forward: tangent of the root view
        self.tangentbuf = None

    @property
    def root(self):
        """The root value, or None once nothing but the tape refers to it."""
        r = self._root
        return r if r is not None else self._ref()

    @property
    def bounds(self):
        if self._bounds is None:
            self._bounds = _bounds_of(bottom(self.root))
        return self._bounds

    def contains(self, b) -> bool:
        if self.shape == () and type(bottom(self.root)) is not _ndarray:
            return False  # a NumPy scalar: no array shares its memory
        lo, hi = _bounds_of(b)
        slo, shi = self.bounds
        return slo <= lo and hi <= shi and hi > lo or (b.nbytes == 0 and slo <= lo <= shi)

    def geom_of(self, b, overlap=None) -> Geom:
        bounds = self._bounds
        if bounds is None:
            bounds = self.bounds
        return Geom(_ptr(b) - bounds[0], b.shape, b.strides, b.dtype, overlap)

    def nbytes(self) -> int:
        """The bytes of its buffer."""
        n = self.dtype.itemsize
        for k in self.shape:
            n *= k
        return n

    def root_geom(self):
        """Geometry of the root inside the mirror buffer, or None if it is the buffer."""
        if self._rootgeom is False:
            b = bottom(self.root)
            if b.flags.c_contiguous:
                self._rootgeom = None
            else:
                self._rootgeom = self.geom_of(b)
        return self._rootgeom

    def new_mirror(self, zeros):
        """A zero buffer laid out like this storage's memory: (buffer, root view)."""
        g = self.root_geom()
        if g is None:
            buf = zeros(self.shape, self.dtype)
            return buf, buf
        lo, hi = self.bounds
        n = -(-(hi - lo) // self.dtype.itemsize)
        buf = zeros((n,), self.dtype)
        return buf, view_of(buf, g)

    def __repr__(self):
        return f"<Storage {self.name or hex(id(self))} L{self.level.id} active={self.active}>"


def view_of(buf, geom):
    """The view ``geom`` of a mirror buffer (an ndarray or a tracer)."""
    if geom is None:
        return buf
    if type(buf) is _ndarray:
        return _ndarray(geom.shape, geom.dtype, buffer=buf, offset=geom.offset, strides=geom.strides)
    return TRACERS[buf._scalar](view_of(buf._value, geom), buf._level, buf._storage, geom, buf._scalar)


# --------------------------------------------------------------------------
# Levels


class Level:
    """One differentiation in progress (a ``grad`` or ``jvp`` call)."""

    mode = "?"
    run_group = None  # a RunGroup: one of the runs of a forward-mode jacobian (see live)
    arg_storages = ()  # the storages of the caller's arrays its tracers hold (api._caller_array)
    written_args = ()  # those of its arguments (the caller's arrays, outer traced arrays) in WRITTEN_ARGS
    last_result = None  # the last large result of a traced operator (elide.note_result)

    thread = None  # the thread running it (threading.get_ident)
    outer = ()  # the levels outside it, when it started (run_lent)
    # where the function first compared a differentiated value for equality (np.equal, ==, np.array_equal):
    # an output with no derivative then may be a cached value (api._warn_cached)
    equality_at = None
    # where it first compared a differentiated value for order (<, >, np.greater...): an output with no
    # derivative then may be a point chosen by comparisons from plain values, a bisection's (api._warn_cached)
    order_at = None
    orders = 0  # how many comparisons for order it made from the first one noted on (a bisection makes many)
    searches = None  # {(code, instruction): [place, (x - c, c)...]}: Python's x > c of a differentiated x (note_search)
    nested_run = False  # whether a differentiation ran inside it (an mg.grad in the function: api._warn_cached)
    cache_key_at = None  # (where a differentiated array compared equal to a plain one: note_cache_key)
    # where it took the plain value of a differentiated one (mg.value(x)): an output with no derivative then may
    # be a cached value keyed on it (`cache[mg.value(p).tobytes()]`: the sensitivity tester; api._warn_cached)
    value_at = None
    every = False  # vjp and jvp, which take no argnums: a value is passed in as a primal (a zero tangent: a constant)

    def __init__(self):
        self.id = next(_level_ids)
        self.index = None
        self.closed = False
        self._saved_ceiling = 0
        self._hidden = None

    def __enter__(self):
        st = STATE
        self._saved_ceiling = c = st.ceiling
        levels = list(st.levels)
        try:
            if c < len(st.levels):
                # entered by code that sees only the levels below the ceiling: a rule of the level
                # processing a primitive (an mg.grad inside an rrule), which gets that level's values.
                # The levels it cannot see are not outer levels of this one: set aside until it ends
                self._hidden = st.levels[c:]
                del st.levels[c:]
            self.index = len(st.levels)
            self.outer = tuple(st.levels)  # (a worker thread's operation on this level's values runs in them)
            for o in self.outer:
                o.nested_run = True
            st.levels.append(self)
            st.ceiling = len(st.levels)
            self.thread = _get_ident()
            if st.started is not None:
                st.started.append(self)
            return self  # (inside the try: an interrupt on this line too puts the levels back)
        except BaseException:
            # (an interrupt part-way, Ctrl-C: `with` calls no __exit__ when __enter__ raises, so the
            # thread's levels are put back as they were; a level left behind would make every later
            # differentiation in this thread an inner one of a level that has ended)
            st.levels[:] = levels
            st.ceiling = c
            self._hidden = None
            raise

    def __exit__(self, *exc):
        st = STATE
        st.levels.pop()
        if self._hidden is not None:
            st.levels.extend(self._hidden)
            self._hidden = None
        st.ceiling = self._saved_ceiling
        self.closed = True
        self.arg_storages = ()  # (storages refer to their level: no cycle left for the collector)
        for ws in self.written_args:
            WRITTEN_ARGS.pop(id(ws), None)
        self.written_args = ()
        if not st.levels:
            TIED_PICKS.clear()
            ZERO_KINKS.clear()
        if exc and exc[0] is not None:  # (raised: the arguments' checks after the call will not run, and the
            self.plain_aliases = ()  # tape, whose records refer to storages that refer to this level, is dead)
            if getattr(self, "tape", None):
                self.tape = []
        if (self.locked or self.joined) and not self.hold_locks:
            self.unlock()
        return False

    # The caller's arrays passed as arguments are read-only to plain code while the
    # function runs: the tracers hold writable views of them, and a write through any
    # other reference to the same array object (an attribute, a dict or list entry, a
    # global), which the derivative would not see, raises (see api._call).
    hold_locks = False  # the caller's arrays stay locked after the level ends, until unlock (grad's reverse pass)
    locked = None  # id(array) -> (array, writable view, argument name[, view tracer: lock_traced]), or None
    locked_views = ()  # (plain view, its argument's storage, name) of those locked as views of an argument (api)
    joined = ()  # arrays a level running in another thread locked, which this one holds too (lock)
    outer_locked = None  # (argument name, an outer level's argument name): an array that one locked

    def _lock_entry(self, a):
        """(this level's table of locked arrays, its entry for ``a`` or None)."""
        locked = self.locked
        if locked is None:
            locked = self.locked = {}
            return locked, None
        hit = locked.get(id(a))
        return locked, (hit if hit is not None and hit[0] is a else None)

    def lock(self, a, name):
        """The view of the caller's array ``a`` for a tracer of this level to hold; ``a``
        itself read-only until the level ends (unless it is read-only already)."""
        locked, hit = self._lock_entry(a)
        if hit is not None:
            return hit[1]  # (the same array passed twice)
        if not a.flags.writeable or not _relockable(a):
            # (read-only already; or memory NumPy could not make writable again afterwards, as
            # the Fortran memory SciPy's MINPACK and LSODA pass: no lock for it)
            mine = False
            for lv in STATE.levels:
                hit = lv.locked.get(id(a)) if lv.locked and lv is not self else None
                if hit is not None and hit[0] is a:  # read-only because an outer level locked it
                    self.outer_locked = (name, hit[2])
                    mine = True
            refs = _LOCK_REFS.get(id(a))
            if not mine and refs is not None and refs[1] is a:
                # locked by a differentiation running in another thread: it stays locked until
                # this one ends too (its end made it writable while this one still ran)
                refs[0] += 1
                self.joined = [*self.joined, a]
            return a if type(a) is _ndarray else a.view(_ndarray)
        v = a.view(_ndarray)  # (an np.memmap's views and results are memmaps: the tracer holds its memory
        # as a plain ndarray, whose views the rules know)
        locked[id(a)] = (a, v, name)  # (noted before the flag is set: an interrupt between the two, Ctrl-C,
        LOCKED[id(a)] = a  # leaves the array to unlock, never read-only for good)
        _LOCK_REFS[id(a)] = [1, a, v]
        a.flags.writeable = False
        return v

    def lock_traced(self, x, name):
        """The view of an outer level's traced array ``x`` (an argument of this inner
        differentiation) for a tracer of this level to hold; ``x`` itself read-only until
        this level ends, as the caller's arrays are (``lock``): the program may hold ``x``
        elsewhere too (a list entry, an attribute), and a write through that reference would
        change values this level read without its knowing."""
        if type(x) is not ArrayTracer:
            return x  # (scalars are immutable)
        b = bottom(x)
        if type(b) is not _ndarray or not b.flags.writeable or not _relockable(b):
            return x
        locked, hit = self._lock_entry(b)
        if hit is not None:
            return hit[3] if len(hit) > 3 else x  # (the same array passed twice)
        st = STATE
        saved = st.ceiling
        st.ceiling = self.index  # (a view at x's levels only: the same storages, an array of its own)
        st.off_program += 1  # (not a step of the program: a forward jacobian's run takes it or not as another
        try:  # thread's differentiation holds the array read-only or not, RunGroup.note; the threads tester)
            v = x[...]
        finally:
            st.ceiling = saved
            st.off_program -= 1
        b.flags.writeable = False
        locked[id(b)] = (b, bottom(v), name, v)
        LOCKED[id(b)] = b
        LOCKED_TRACED[id(x._storage)] = (x._storage, name)
        return v

    def unlock(self):
        """Release the arrays this level locked. An interrupt part-way (Ctrl-C) leaves the arrays not yet
        released noted: they are released all the same, then the interrupt is raised."""
        pending = None
        for _ in range(4):
            try:
                self._unlock()
                break
            except KeyboardInterrupt as e:
                pending = pending or e
        if pending is not None:
            raise pending

    def _unlock(self):
        # (each array released before its entry is dropped: an interrupt part-way leaves the rest noted)
        locked = self.locked or {}
        for key in list(locked):
            a, v, _, *traced = locked[key]
            if traced:
                LOCKED_TRACED.pop(id(traced[0]._storage), None)
            _release(a, v)
            del locked[key]
        self.locked = None
        while self.joined:  # (likewise one by one: a retry releases none twice)
            a = self.joined[0]
            refs = _LOCK_REFS.get(id(a))
            if refs is not None and refs[1] is a:
                _release(a, refs[2])
            self.joined = self.joined[1:]

    def __repr__(self):
        return f"<{type(self).__name__} {self.id}>"

    # -- buffers and wrapping -------------------------------------------------

    def outer_levels(self):
        """The levels outside this one (in the thread that created it)."""
        return STATE.levels[: self.index]

    def zeros(self, shape, dtype):
        """A zero derivative buffer. Inside outer differentiations it is traced
        by them (constant, writable), so derivatives they trace can flow into it."""
        z = np.zeros(shape, dtype)
        return lift(z, STATE.levels[: self.index]) if self.index else z

    def check_writable(self, dest, active=True, idx=None):
        """What both modes refuse before a write into ``dest`` (and mark it written); ``active``:
        the written values carry a derivative; ``idx``: the index written (None: all of it)."""
        s = dest._storage
        s.written = True
        if active and not s.written_active and s.level is self:
            _note_written_argument(self, s)
        if active and s.overlapping_arg and self.mode == "rev":
            raise MutationError(
                f"writing a traced value into {s.name} at {user_line()}: its elements share memory (an "
                "as_strided view with a zero or overlapping stride, a broadcast result of np.broadcast_arrays), "
                "so one write changes several of them, whose derivatives cannot be told apart. Write into "
                "the array it views, or pass a copy (x.copy()).")
        if LOCKED_TRACED and id(s) in LOCKED_TRACED and not bottom(dest).flags.writeable:
            hit = LOCKED_TRACED[id(s)]
            if hit[0] is s:
                from .errors import AliasingError

                raise AliasingError(
                    f"writing at {user_line()} into a traced array that was passed to an inner "
                    f"differentiation (its {hit[1]}) still running, through another reference to it (a list "
                    "or dict entry, an attribute, a variable of the outer function): the inner "
                    "differentiation would not see the write and would differentiate values that are "
                    "gone. Write through the inner function's own argument, or pass it a copy "
                    "(mg.grad(h)(x.copy())) if the other reference should keep its own values."
                )
        if active and s.handed_out is not None:
            if _shown_by_handed_out(s, dest, idx):
                gc.collect()  # (one held only by a reference cycle that is gone: the cyclic GC is paused)
                if _shown_by_handed_out(s, dest, idx):
                    raise handed_out_error(s)
            if not any(r() is not None for r in s.handed_out_refs):
                s.handed_out = None  # (the plain arrays handed out are gone: SciPy's temporary in K @ u)
                s.handed_out_refs = ()
        if s.prim_alias is not None:
            raise MutationError(
                f"writing into {s.name or 'an array'} at {user_line()}: the primitive {s.prim_alias} returned "
                "(a view of) its argument, so in a plain call its output and that argument share memory, "
                "and a write into either may change both; inside a differentiation the output is a copy, so "
                "that the primitive's rules give its derivative, and the two would differ. Copy the output "
                f"(y = np.copy({s.prim_alias.rsplit('.', 1)[-1]}(x)), or np.copy of the element of a tuple "
                "output) before writing into it or into the argument.")
        if s.aliased is not None:
            from .errors import AliasingError

            raise AliasingError(
                f"writing into {s.name} at {user_line()}, which shares memory with {s.aliased}: "
                "arguments of a differentiated function that share memory may be read, not "
                "written (a write into one changes the other). Pass separate copies (x.copy()) "
                "if the function writes into them."
            )
        if s.plain_alias is not None:
            path = _plain_view_written(s, dest, idx)
            if path is not None:
                from .errors import AliasingError

                raise AliasingError(
                    f"writing into {s.name} at {user_line()}, which shares its memory with the plain array "
                    f"`{path}` that the function (or a helper it calls) reaches by name (a global or closure "
                    f"variable, or an attribute or item of an object it names): a plain NumPy read of `{path}` "
                    "would not carry the derivative of what is written. Read and write the array through the "
                    "argument only, or pass a copy."
                )
        elif s.alias_unchecked:
            s.alias_unchecked = False
            from .api import ALIAS_SEARCH_BUDGET, ALIAS_SEARCH_DEPTH
            from .errors import warn_at

            warn_at(user_frame(sys._getframe(1)),
                    f"writing into {s.name} at {user_line()}: the function reaches more objects than mutagrad "
                    f"searches for other references to its arguments ({ALIAS_SEARCH_BUDGET} objects, "
                    f"{ALIAS_SEARCH_DEPTH} steps (attributes, items) from the names the code uses; lists, tuples "
                    "and dicts of 1024 objects), so it could not check that no plain array it reads or writes is this argument's "
                    "memory (such a read would not carry the derivative of the write; such a write would not be "
                    "seen). Pass the argument as a copy if the function may reach it through an object.")
        if dest._geom is not None and dest._geom.overlap:
            if not bottom(dest).flags.writeable:
                raise ValueError("assignment destination is read-only")
            raise MutationError(
                f"writing through a self-overlapping view (the overlapping frames of "
                f"sliding_window_view(..., writeable=True), a broadcast result of np.broadcast_arrays, which NumPy "
                f"deprecates writing through, np.lib.stride_tricks.as_strided or similar) at {user_line()} cannot "
                "be differentiated: several elements of the view are the same memory, and the result depends on "
                "the order NumPy writes them in. Work on a copy (frames = sliding_window_view(y, n)[::hop].copy(); "
                "frames *= window, then add the frames back where overlap-add is meant), or write into the base "
                "array (x[0] = v for the broadcast row x[0])."
            )
        return s

    def check_rule_output(self, prim, y):
        """A rule gets this level's values, never its tracers: an output traced by this
        level comes from a traced value the rule closed over, whose derivative its
        pullback (or tangent) cannot pass on."""
        for v in output_leaves(y)[0]:
            if isinstance(v, Tracer) and v._level is self:
                from .errors import RuleError

                raise RuleError(
                    f"the rule of {prim.name} computed its output from a traced value it closes over (a "
                    f"variable of the enclosing differentiated code), at {user_line()}: the derivative through "
                    "that value would be lost. Pass the value to the primitive as an argument, and give its "
                    "cotangent in the pullback.")

    def check_not_outer_into_plain(self, dest, vv):
        """An inner level's write of a value an outer level traces into memory that is plain
        to the outer levels: an array passed to this differentiation, or a view made inside it of
        memory plain to them (new memory is theirs too: new_memory). The outer levels never see it, which
        plain code may change after the call, or jacobian(mode="fwd") between its passes: the
        value would be kept without its derivative, as in any plain array. A value that carries no
        derivative at the outer levels (made from plain values only there: np.empty_like(u) filled
        from u) loses nothing: its plain value is returned, to be written; else ``vv``."""
        if self.index and type(dest._value) is _ndarray and isinstance(vv, Tracer):
            if _carries_no_derivative(vv):
                return bottom(vv)
            s = dest._storage
            what = (f"{s.name}, a plain NumPy array passed to this inner one" if s.orig is not None else
                    "a view the inner function made of memory plain to it")
            raise WriteToPlainArrayError(
                f"writing a value traced by an outer differentiation into an array at {user_line()}: that array "
                f"is plain to the outer differentiation ({what}), so it would keep the value after the inner "
                "call without its derivative. Give the inner call an array the outer differentiation traces: "
                "for a plain argument x of the inner call, pass mnp.array(x) made in the outer function (import "
                "mutagrad.numpy as mnp; its values, traced as a constant there); for a buffer, make it in the "
                "outer function with np.zeros_like(p) or mnp.zeros(...). (The second derivative of f in one "
                "argument is also mg.hessian(f, argnums=...), which needs neither.)")
        return vv

    def constant_result(self, res, leaves, ins, zero=False):
        """``res`` computed with no derivative: pristine if all its traced inputs were, or if it
        is a piecewise-constant function's (``zero``: np.floor, np.sign...), whose derivative is
        zero wherever it exists, so that plain code may read it (int(np.ceil(T / h)))."""
        if zero or ins and all(leaves[i]._storage.pristine for i in ins):
            _pristine(res)
        return res

    def unwrap_args(self, leaves, weak_args=True):
        """Replace this level's tracers by their values; return (vals, positions)."""
        vals = list(leaves)
        ins = []
        for i, x in enumerate(leaves):
            if isinstance(x, Tracer):
                if x._level is self:
                    vals[i] = x._value.item() if weak_args and x._storage.weak and x._geom is None else x._value
                    ins.append(i)
            elif type(x) is not _ndarray and foreign_subclass(x):
                raise subclass_error(x)
        return vals, ins

    def new_memory(self, y):
        """An inner level's new array ``y`` whose values are plain to the outer levels (computed from plain
        arguments, or from their copies: ``u = u0.copy()``, ``x - x.mean()``, ``q[idx]``), as a constant of
        the outer levels too, so that values they trace may be written into it, as into the copies of an
        argument passed as ``mnp.array(u0)`` (a Hessian-vector product ``mg.jvp(lambda k: mg.grad(step)(k,
        u0), ...)`` of a solver starting from ``u = u0.copy()``: the thomas and transformer testers; it was
        refused as memory plain to them). Not an argument's memory or a view of it, which a write would
        change under the outer levels (check_not_outer_into_plain)."""
        return lift(y, STATE.levels[:self.index])

    def index_value(self, t, idx):
        """``t[idx]`` at this level: (result, fresh storage or None). A view of
        t's storage for a basic index, else a new storage (the caller records
        how its derivative depends on t)."""
        v = t._value[idx]
        b = bottom(v)
        s = t._storage
        if type(b) is _ndarray:
            if b.dtype.kind not in _FLOAT_KINDS:
                return v, None
            if b.base is not None:
                if _is_basic(idx):
                    return _basic_view(t, v, b, self), None
                if s.contains(b):
                    return ArrayTracer(v, self, s, s.geom_of(b), False), None
            if self.index and type(v) is _ndarray:
                v = self.new_memory(v)
            out = Storage(self, v)
            if s.pristine:  # (set only when true: setting it makes an instance dict)
                out.pristine = True
            return ArrayTracer(v, self, out, None, False), out
        if not isinstance(v, Tracer):
            v = _np_scalar(v)
        out = Storage(self, v)
        if s.pristine:
            out.pristine = True
        return ScalarTracer(v, self, out, None, True), out

    @staticmethod
    def check_shared_outputs(outs, fresh, prim):
        """Refuse outputs of one operation, each given its own new storage, that share memory (a rule's
        ``return y, y[::-1]``, the same array under two keys): each would get its own derivative, and a
        write through one would change the other's value and not its derivative (the customrules tester:
        a gradient silently wrong)."""
        new = [(j, bottom(o)) for j, (o, s) in enumerate(zip(outs, fresh)) if s is not None]
        if len(new) < 2:
            return
        for a in range(len(new)):
            ja, ba = new[a]
            if type(ba) is not _ndarray:
                continue
            for jb, bb in new[a + 1:]:
                if type(bb) is _ndarray and np.may_share_memory(ba, bb) and _shares_bounded(ba, bb):
                    from .errors import RuleError

                    name = prim.name if prim is not None else "an operation"
                    raise RuleError(
                        f"{name} returned outputs {ja} and {jb} that share memory (one a view of the other, or "
                        "one array returned twice), at " + user_line() + ": mutagrad gives each output its own "
                        "derivative, so a write through one would change the other's value but not its "
                        "derivative. Return copies (np.copy(...)), or return the array once and take the view "
                        "outside the primitive.")

    def wrap_output(self, y, leaves, ins, fresh=False):
        """Wrap one output leaf: a view of an input's storage, a fresh storage,
        or (for non-float outputs) the plain value. Returns (out, fresh_storage).
        ``fresh``: the function never returns its inputs or views of them (ufuncs)."""
        tb = type(y)
        if tb in _FLOAT_SCALARS:  # the common fresh results first
            if tb is float or tb is complex:
                # a Python number (Python arithmetic on weak scalars; np.real(3.5) is 3.5): weak,
                # as it is in a plain call
                s = Storage(self, _np_scalar(y))
                s.weak = True
                return ScalarTracer(s._root, self, s, None, True), s
            s = Storage(self, y)
            return ScalarTracer(y, self, s, None, True), s
        if fresh and tb is _ndarray and y.base is None and y.dtype.kind in _FLOAT_KINDS:
            if self.index:
                y = self.new_memory(y)
            s = Storage(self, y)
            return ArrayTracer(y, self, s, None, False), s
        b = y if tb is _ndarray else bottom(y)
        tb = type(b)
        if tb is _ndarray:
            if b.dtype.kind not in _FLOAT_KINDS:
                return y, None
            if b.base is not None or _is_one_of(b, leaves):
                for i in ins:
                    t = leaves[i]
                    if t._storage.contains(b):
                        if t._geom is None:
                            _note_owner(t, t._storage)
                        return ArrayTracer(y, self, t._storage, t._storage.geom_of(b), False), None
                for x in leaves:
                    if type(x) is _ndarray and np.may_share_memory(x, b):
                        y = b = b.copy()
                        break
                else:
                    if y is b and b.base is not None and _may_self_overlap(b.shape, b.strides, b.itemsize):
                        # a broadcast of memory no input owns (e.g. of a NumPy scalar): its
                        # elements must be separate for their derivatives; keep it read-only
                        ro = not b.flags.writeable
                        y = b = b.copy()
                        b.flags.writeable = not ro
            if self.index and type(y) is _ndarray and _sole_memory(y):  # (np.roll's reshaped result too)
                y = self.new_memory(y)
            s = Storage(self, y)
            return ArrayTracer(y, self, s, None, False), s
        if tb is float or tb is complex or (isinstance(b, np.generic) and b.dtype.kind in _FLOAT_KINDS):
            if not isinstance(y, Tracer):
                y = _np_scalar(y)
            s = Storage(self, y)
            return ScalarTracer(y, self, s, None, True), s
        if foreign_subclass(b):  # (np.matrix, a masked array: a subclass operand made the result one)
            raise subclass_error(b)
        return y, None


def foreign_subclass(x) -> bool:
    """An ndarray subclass with semantics of its own (np.matrix, a masked array,
    units), which rules written for numpy.ndarray would drop; not np.memmap,
    whose memory is an ndarray's and whose results are ndarrays."""
    return isinstance(x, _ndarray) and type(x) is not _ndarray and not isinstance(x, (np.memmap, Tracer))


def _dropped_subclass(x) -> bool:
    """A plain argument of a NumPy function mutagrad computes whose meaning its rules would drop: a masked
    array's mask (where an element is masked), np.matrix's products (another subclass handing NumPy's functions
    on to ndarray's, as astropy's Quantity does, is its plain values, a constant)."""
    if isinstance(x, np.ma.MaskedArray):
        return bool(np.any(np.ma.getmaskarray(x)))  # (nothing masked: its data, whatever the function does)
    return isinstance(x, np.matrix)


def subclass_error(x):
    """An ndarray subclass meeting a traced value: its own semantics (np.matrix's
    ``*`` is a matrix product and its results stay 2-D) are not a traced array's."""
    return NoRuleError(f"a {type(x).__module__}.{type(x).__name__} (an ndarray subclass) was used with a traced value "
                       f"at {user_line()}: mutagrad differentiates plain ndarrays, and the subclass's own semantics "
                       + subclass_advice(x))


def subclass_advice(x):
    """What of subclass ``x``'s semantics (an instance or the class) the rules would not follow, and the rewrite."""
    t = x if isinstance(x, type) else type(x)
    if issubclass(t, np.matrix):
        return ("(np.matrix's `*` is a matrix product and its results stay 2-D) would not be followed. Convert it "
                "with np.asarray(...) and write matrix products with `@`. (scipy.sparse's *_matrix classes give "
                "np.matrix results, x - A included: use the *_array classes, csr_array, or A.toarray().)")
    if issubclass(t, np.ma.MaskedArray):
        return ("(its mask: masked elements left out of results) would not be followed, and np.asarray(...) would "
                "drop the mask, changing the values. Compute with the mask on plain arrays instead, which is "
                "differentiated: d = x.data, m = np.ma.getmaskarray(x); np.sum(d * y, where=~m) (np.mean, np.std, "
                "np.var too; np.max and np.min with initial=), np.where(m, fill, d * y) for .filled(fill), "
                "(d * y)[~m] for .compressed(); where the function ignores the mask in a plain call (np.interp, "
                "np.convolve: they read the data), pass np.ma.getdata(x).")
    return ("(its own operators, attributes and result type) would not be followed. Convert it to a plain array "
            "(np.asarray(...), or its plain values: a units library's .magnitude) and apply its meaning yourself.")


def _np_scalar(v):
    """A traced scalar's value: a NumPy scalar (its arithmetic is NumPy's, and
    it costs a tenth of a 0-d array's)."""
    if isinstance(v, np.generic):
        return v
    return np.asarray(v)[()]


_NP_FLOAT_SCALARS = frozenset((np.float64, np.float32, np.float16, np.complex128, np.complex64, np.longdouble,
                               np.clongdouble))
_FLOAT_SCALARS = frozenset((float, complex, np.float64, np.float32, np.float16, np.complex128, np.complex64,
                            np.longdouble, np.clongdouble))


def _is_one_of(b, leaves):
    for x in leaves:
        if x is b or (isinstance(x, Tracer) and bottom(x) is b):
            return True
    return False


def _pristine(out):
    """Mark the fresh outputs of an operation on pristine constants pristine."""
    for o in (out if isinstance(out, (tuple, list)) else (out,)):
        if isinstance(o, Tracer) and o._geom is None:
            o._storage.pristine = True
    return out


def lift(y, levels):
    """Wrap ``y`` at every level in ``levels`` above its own innermost one."""
    if not levels:
        return y
    if isinstance(y, Tracer):
        top = y._level.index
        scalar = y._scalar
    else:
        b = y
        if type(b) is _ndarray:
            if b.dtype.kind not in _FLOAT_KINDS:
                return y
            scalar = False
        elif isinstance(b, (float, complex, np.floating, np.complexfloating)):
            y = _np_scalar(y)
            scalar = True
        else:
            return y
        top = -1
    for lv in levels:
        if lv.index > top:
            st = Storage(lv, y)
            st.pristine = True  # (a constant at lv: until a value that is not one is written into it)
            y = TRACERS[scalar](y, lv, st, None, scalar)
    return y


def _lift_tree(out, levels, sources=None):
    """Lift an operation's outputs to ``levels``; ``sources``: the storages of
    its traced arguments, so that an output that is a view of one of them
    (memory that exists outside the inner levels) is marked (see _lift_views)."""
    t = type(out)
    if isinstance(out, Tracer) or t is _ndarray:
        y = lift(out, levels)
        if sources and isinstance(out, Tracer) and out._storage in sources:
            _lift_views(y, out)
        return y
    if t is tuple or t is list:
        return t(_lift_tree(o, levels, sources) for o in out)
    if isinstance(out, tuple) and hasattr(t, "_fields"):
        return t(*(_lift_tree(o, levels, sources) for o in out))
    return out


def _lift_views(y, inner):
    """Mark the storages that lift made around ``inner`` (a view, at an outer
    level, of an array from outside the inner levels): the outer level can
    still write that memory unseen by them, and they cannot make an inner
    level's derivative reach it. So their pullbacks keep copies of what they
    read (ReverseLevel.process), and writing a value that carries an inner
    derivative into them raises (write)."""
    while y is not inner and isinstance(y, Tracer):
        y._storage.outer_view = True
        y = y._value


def _sources(leaves):
    return {x._storage for x in leaves if isinstance(x, Tracer) and not x._scalar}


# --------------------------------------------------------------------------
# Dispatch


def output_leaves(y):
    """A rule's output as (its leaves, their pytree), or ``([y], None)`` for one output:
    several outputs are a container of them (tuple, list, dict, namedtuple, dataclass)."""
    t = type(y)
    if t is _ndarray or t in _NP_FLOAT_SCALARS:
        return [y], None
    from .pytree import tree_flatten

    leaves, tree = tree_flatten(y)
    if len(leaves) == 1 and leaves[0] is y:
        return leaves, None
    return leaves, tree


def _flatten_args(args):
    """Leaves of positional arguments (tuples and lists are containers)."""
    for a in args:
        t = type(a)
        if t is list or t is tuple:
            break
    else:
        return list(args), None
    leaves: list = []
    tree = [_flat(a, leaves) for a in args]
    return leaves, tree


def _flat(a, leaves):
    t = type(a)
    if t is list or t is tuple:
        return (t, [_flat(c, leaves) for c in a])
    leaves.append(a)
    return None


def _unflatten_args(tree, vals):
    if tree is None:
        return vals
    it = iter(vals)
    return [_unflat(n, it) for n in tree]


def _unflat(n, it):
    if n is None:
        return next(it)
    t, ch = n
    return t(_unflat(c, it) for c in ch)


def top_level(leaves):
    """The innermost level among ``leaves``' tracers (None if none), or False
    when one of them is a leftover of a differentiation that has returned."""
    top = None
    me = None
    for x in leaves:
        if isinstance(x, Tracer):
            lv = x._level
            if lv.closed:
                return False
            if lv.thread != (me or (me := _get_ident())) and elsewhere(lv, x):
                return False  # (another thread's independent differentiation's: a constant here, see live)
            if top is None or lv.id > top.id:
                top = lv
        elif WRITTEN_ARGS and type(x) is _ndarray:
            _check_argument_read(x)
    if WRITTEN_ARGS and top is not None:  # (an outer level's traced array read by an inner level's operation)
        for x in leaves:
            if isinstance(x, Tracer) and x._level is not top:
                _check_argument_read(x)
    return top


def elsewhere(lv, x):
    """Whether ``x``, a value of running level ``lv`` that another thread runs, is a constant to
    this thread, which runs a differentiation of its own that started before ``lv`` did: the two
    are independent (``lv`` cannot be an outer level of this one), so its value is what this one
    sees, as a plain run would (core.live). False where this thread runs no differentiation (a
    worker applying NumPy operations to a value of the one that started it: recorded there);
    raises (Tracer._check_thread) where this thread's started after ``lv``'s: a worker's
    differentiation nesting in the one that started the worker would lose the derivative through it."""
    st = STATE
    levels = st.levels
    if not levels or st.lent == lv.thread:
        return False
    if lv.id > levels[0].id:
        return True
    x._check_thread()
    return False


def _plain_view_written(s, dest, idx=None):
    """The path of a plain array holding the memory that a write into ``dest`` (the argument
    of storage ``s``, or a view of it; at ``idx`` if given) changes, or None (``views["left"]``
    is x[:4], the write x[4:] *= 2 or x[4:] = ...)."""
    b = bottom(dest)
    if idx is not None and type(b) is _ndarray and _is_basic(idx):
        try:
            b = b[idx]  # (the region written: a view)
        except IndexError:  # (NumPy's own error comes with the write)
            pass
    for path, v, _ in s.plain_views:
        if type(b) is not _ndarray or (np.may_share_memory(b, v) and _shares_bounded(b, v)):
            return path
    return None


def _shares_bounded(a, b) -> bool:
    try:
        return bool(np.shares_memory(a, b, max_work=10_000))
    except np.exceptions.TooHardError:  # (NumPy cannot tell cheaply: as if they do)
        return True


def live(x, writing=False, argument=False, output=False):
    """A leftover traced value (one a differentiation that has returned left in
    a global, a closure, an object or a list) is the value it had: what a plain
    call would have left there. Tracers of live levels are returned as they are.
    Except a leftover of an earlier run of the same forward-mode jacobian: its
    value is the same, its derivative would be lost (see RunGroup). ``output``: the
    differentiated function returns it (its warning says so)."""
    if isinstance(x, Tracer) and not x._level.closed and x._level.thread != _get_ident() and elsewhere(x._level, x):
        if writing:
            raise x._elsewhere_write()
        b = bottom(x)  # (a copy: that differentiation may go on to write into it)
        return b.copy() if type(b) is _ndarray else b
    left = carrier = None
    while isinstance(x, Tracer) and x._level.closed:
        lv = x._level
        g = lv.run_group
        if g is not None and g.running:
            raise g.leftover_error()
        s = x._storage
        if (s.captured or s.was_captured or s.span is not None) and getattr(lv, "tape", None):
            _note_leftover_read(lv, s)
        if carrier is None and (s.active or s.tangent is not None):  # (`tangent`: a forward-mode one's; at any
            carrier = s  # closed level: an inner grad's constant of the outer one's traced value, c * k in a
        x = x._value  # cache an inner call fills, carried the outer derivative: the regress62 tester)
        left = left or s
    if left is not None:
        if LOCKED:
            _check_leftover_alias(x, writing)
        if (carrier is not None and not (argument or writing) and STATE.levels  # (once per differentiation)
                and carrier.leftover_warned != STATE.levels[0].id
                and not isinstance(x, Tracer)):  # (an inner leftover of an outer tracer keeps
            _warn_leftover_used(carrier, output)  # its derivative)
    return x


def _warn_leftover_used(s, output=False):
    """A value that carried a derivative in a finished differentiation (a cache filled by an
    earlier call, a global it set), used by a running one: a constant to it, so a derivative it
    has with respect to this one's inputs (the same parameters, a cached matrix of them) is
    lost. JAX and PyTorch raise there; mutagrad reads the value, as a plain call would, and
    warns once per value and differentiation (in every one that reads it: an optimiser's later steps got the
    zero silently after the first, the cosmology tester)."""
    from .errors import warn_at

    s.leftover_warned = STATE.levels[0].id
    frame = user_frame(sys._getframe(2))
    if output:
        warn_at(frame, "the differentiated function returned a value computed in an earlier differentiation "
                       "(a memoized result, from a cache, a global, an object), which carried its derivative there: "
                       "to the running differentiation it is a constant, so its derivative is zero. Compute the "
                       "value again in every call (a cache keyed on the input returns its stale value when the "
                       "input is equal), or return mg.stop_gradient(value) where a constant is meant.", every=True)
        return
    warn_at(frame, f"a value computed in an earlier differentiation, which carried its derivative there (left "
                   f"in a cache, a global, an object), is used at "
                   f"{user_line(frame) if frame is not None else 'this line'} by a running differentiation: to "
                   "it the value is a constant, so a derivative it has with respect to this differentiation's "
                   "inputs is lost (a cached matrix of the parameters: 0). Compute it again in the function, or "
                   "store mg.stop_gradient(value) where it is meant as a constant.", every=True)


def _check_leftover_alias(v, writing):
    """A leftover whose memory is an argument's of a running differentiation (``state["x"]
    = x`` in an earlier call, the same array passed again) is plain NumPy to it: reading it
    after the function wrote into the argument would take the new values as constants,
    and a write through it would change the argument behind the tape."""
    b = bottom(v)
    if type(b) is not _ndarray:
        return
    for lv in STATE.levels:
        for st in lv.arg_storages:
            a = st.orig
            if (writing or st.written) and np.may_share_memory(a, b) and _shares_bounded(a, b):
                from .errors import AliasingError

                if writing:
                    done, lost, fix = "writing into", "the derivative would not see this write", "write into"
                else:
                    done, lost, fix = "reading", "the derivative of what the function wrote there would be lost", "read"
                raise AliasingError(
                    f"{done} a value left by an earlier differentiation at {user_line()}, which is the memory "
                    f"of {st.name} of this one{'' if writing else ', written since the call'}: to mutagrad that "
                    f"value is a plain array, so {lost}. Keep a copy (x.copy()) where the earlier call stored "
                    f"it, or {fix} the argument itself."
                )


def _note_written_argument(lv, s):
    """Note argument storage ``s`` of level ``lv`` in WRITTEN_ARGS: a value with a derivative was written into it."""
    s.written_active = True
    arg = s.orig if s.orig is not None else s.__dict__.get("outer_arg")
    if arg is None:  # (not an argument: a buffer the function made)
        return
    WRITTEN_ARGS[id(s)] = (s, arg, None if isinstance(arg, Tracer) else _base_array(arg))
    lv.written_args = [*lv.written_args, s]


def _check_argument_read(p):
    """A plain array ``p`` that a traced operation of the program reads (a constant to it), or an outer
    level's traced array read by an inner one, is memory of an argument the function has written a value
    with a derivative into: the caller's array itself or a view of it, reached through a reference the
    alias search does not follow (a ContextVar, a function returning it, ``globals()[name]``; a view made
    before the call; the whole array of which the argument is the interior). Its values are the written
    ones, their derivative would be lost: raise (the oop and regress92 testers). Reads before such a write
    are the values at the call, constants as any other reference to the caller's array is; ``mg.value(x)``'s
    views are not the caller's array's (see value). Only the program's own operations: a rule's (all levels
    not visible) reads what it was given, or what SciPy wrote into an argument it was asked to."""
    levels = STATE.levels
    if STATE.ceiling != len(levels):
        return
    traced = isinstance(p, Tracer)
    if traced:
        b = bottom(p)
        r = unknown = None
    else:
        b, r = p, _base_array(p)
        # (memory whose owner is no array: as_strided's, np.frombuffer's, ctypes'; mg.value's excepted)
        unknown = r.base is not None and type(r.base) is not _Shown
    for s, arg, root in list(WRITTEN_ARGS.values()):
        if s.level not in levels:
            continue
        if traced:
            if root is not None or p._level.id >= s.level.id:
                continue
            a = bottom(arg)
        else:
            if root is None or not (root is r or unknown):
                continue
            a = arg
        if np.may_share_memory(a, b) and _shares_bounded(a, b):
            from .errors import AliasingError

            raise AliasingError(
                f"reading at {user_line()} the memory of {s.name}"
                + (", the outer differentiation's traced array" if traced else ", the caller's array")
                + " (reached through another reference to it: a global, a context variable, a cache, an object's "
                "store, a view made before the call), after the function wrote into it: to mutagrad that reference "
                "is a constant, so the derivative of what the function wrote there would be lost. Read the argument "
                "itself (the traced array the function was given), or pass the object that holds the array and "
                "read it from there only.")


ZERO_KINKS: dict = {}  # id(a traced value) -> its _ZeroKink: see note_zero_kink

_ZERO_KINK_TEXT = (
    "the comparison's branch (np.where(z > 0, ...), z * (z > 0), a mask, an if, Python's max(z, 0)) gets a one-sided "
    "derivative there and |z| gets 0, so where the two add up to a smooth function, a stable softplus np.where(z > 0, "
    "z, 0) + np.log1p(np.exp(-np.abs(z))) or log-sigmoid, the derivative is wrong (0 for the softplus's 0.5). Write "
    "np.logaddexp(0, z) for the softplus, or np.maximum(z, 0) for the branch, which splits the tie evenly as |z|'s 0 "
    "needs (docs/errors.md: kinks). An element whose derivative cannot reach the result, the zero diagonal of pairwise "
    "differences theta[:, None] - theta[None, :], is no matter.")


class _ZeroKink:
    """A traced value's elements where a comparison with 0 tied (``ties``, at the line ``tie_at``) and where |.| was
    taken at 0 (``zeros``, ``zero_at``); ``warned``: once."""
    __slots__ = ("tie_at", "ties", "value", "warned", "zero_at", "zeros")

    def __init__(self, value):
        self.value, self.ties, self.zeros, self.tie_at, self.zero_at, self.warned = value, None, None, None, None, False


def note_zero_kink(x, mask, abs_taken):
    """Note that a comparison of traced ``x`` with 0 tied (``abs_taken`` False), or that |x| was taken, at the
    elements ``mask`` of ``x``. Where both meet at an element whose derivative reaches the result, the
    comparison's branch gets a one-sided derivative there and |x| gets 0, which add up wrong where the sum is
    smooth (the stable softplus np.where(z > 0, z, 0) + np.log1p(np.exp(-np.abs(z))) at z = 0 gets 0 for 0.5:
    the ranking tester's Bradley-Terry likelihood at its all-zero start): a KinkWarning, here where a forward
    level's tangent there is not 0 (or, the comparison after |x|, at a reverse level: |x| went unwatched), in
    the pullback of a watch on |x| (abs_watched) where its cotangent there is not 0 (the zero diagonal of a matrix of
    pairwise differences theta_i - theta_j, weighted 0, stays quiet). Returns x's _ZeroKink, kept per outermost
    differentiation for the last 1024 values. A number is noted under its statement too: an element read again
    for each use, `max(z[i], 0.0) + np.log1p(np.exp(-abs(z[i])))`, is a new traced number each time (ml2)."""
    place = user_place()
    # (key, the traced value it stands for: None for a statement's or an element's key; the value noted, its mask)
    keys = [(id(x), x, x, mask)]
    src = _copied_from(x)
    if src is not None:  # (a copy's comparison is its source's: h = z.copy(); h[h < 0] = 0 beside np.abs(z))
        keys.append((id(src), src, x, mask))
    if x._scalar and place is not None:
        keys.append((("statement",) + place, None, x, mask))
        element = _element_read(x, sys._getframe(1))
        if element is not None:
            key, a, idx = element
            keys.append((key, None, x, mask))
            # (and as that element of its array: r[i] = max(z[i], 0.0) in a loop, then np.abs(z) of the whole,
            # a stable softplus at z = 0 whose derivative came out wrong without a warning: mltrain)
            one = np.zeros(np.shape(bottom(a)), bool)
            one[idx] = bool(np.all(mask))
            keys.append((id(a), a, a, one))
    found, warned = None, False
    for key, value, y, m in keys:
        e = ZERO_KINKS.get(key)
        if e is None or (value is not None and e.value is not value):
            if len(ZERO_KINKS) >= 1024:  # (the oldest go: a comparison and the |x| after it are near each other)
                for k in list(itertools.islice(ZERO_KINKS, 256)):
                    del ZERO_KINKS[k]
            e = ZERO_KINKS[key] = _ZeroKink(value)
        if e.ties is not None and np.shape(e.ties) != np.shape(m) or (
                e.zeros is not None and np.shape(e.zeros) != np.shape(m)):
            continue  # (another value's entry of another shape under this key)
        was = e.warned
        e.warned = e.warned or warned  # (one warning for one event)
        _note_kink_in(e, y, m, abs_taken, place)
        warned = warned or (e.warned and not was)
        if y is x and (found is None or (found.ties is None and e.ties is not None)):  # (x's own, of its shape)
            found = e
    return found


COPIES: dict = {}  # id(a traced copy) -> (weak references to it and to what it copied): see note_copy


def note_copy(src, res):
    """Note that traced ``res`` is a copy of traced ``src`` (np.copy, x.copy()), for note_zero_kink: a comparison of
    the copy with 0 is one of its source (relu written h = z.copy(); h[h < 0] = 0 beside np.abs(z) in a stable
    softplus, whose derivative at z = 0 came out wrong without a warning: mlscratch). Weak references, the last 1024."""
    if isinstance(res, Tracer) and isinstance(src, Tracer) and res is not src and not res._scalar:
        if len(COPIES) >= 1024:
            for k in list(itertools.islice(COPIES, 256)):
                del COPIES[k]
        COPIES[id(res)] = (weakref.ref(res), weakref.ref(src))
    return res


def _copied_from(x):
    """The traced value ``x`` is a copy of (note_copy), of its shape, where it is alive; else None."""
    c = COPIES.get(id(x))
    if c is None or c[0]() is not x:
        return None
    src = c[1]()
    return src if src is not None and np.shape(bottom(src)) == np.shape(bottom(x)) else None


def _element_read(x, frame):
    """(("element", its array's storage and view, the index), the array, the index) where the traced number ``x``
    of a comparison or an abs is the user's ``a[i]`` read (one subscript, of a traced array's name, at a name or constant index), that
    element read again in another statement (`m = max(z[i], 0.0)`, then `abs(z[i])`: regress105); else None.
    Looked up, nothing run."""
    user = user_frame(frame)
    subs = [n for n in _compared_operands(user) if type(n) is ast.Subscript and type(n.value) is ast.Name]
    if len(subs) != 1:
        return None
    n = subs[0]
    a = user.f_locals.get(n.value.id)
    parts = n.slice.elts if type(n.slice) is ast.Tuple else (n.slice,)
    idx = []
    for p in parts:
        v = p.value if type(p) is ast.Constant else user.f_locals.get(p.id) if type(p) is ast.Name else None
        if type(v) is not int and not isinstance(v, np.integer):
            return None
        idx.append(int(v))
    if not isinstance(a, Tracer) or a._scalar or len(idx) != np.ndim(a):
        return None
    try:
        if bottom(a)[tuple(idx)] != bottom(x):
            return None
    except IndexError:
        return None
    g = a._geom
    return ("element", id(a._storage), None if g is None else (g.offset, g.shape, g.strides), tuple(idx)), a, tuple(idx)


def _note_kink_in(e, x, mask, abs_taken, place):
    """note_zero_kink's record of one event in the _ZeroKink ``e``, and its warning where the two meet."""
    if abs_taken:
        e.zeros = mask if e.zeros is None else e.zeros | mask
        e.zero_at = e.zero_at or place
    else:
        e.ties = mask if e.ties is None else e.ties | mask
        e.tie_at = e.tie_at or place
    if not e.warned and e.ties is not None and e.zeros is not None:
        both = e.ties & e.zeros
        if both.any() and (_forward_tangent_at(x, both) or not abs_taken and not _only_forward(x)):
            e.warned = True
            from .errors import KinkWarning, line_text, warn_at

            warn_at(user_frame(sys._getframe(1)), (
                f"{'|z|' if abs_taken else 'a comparison of z with 0'} at z = 0 where "
                f"{'a comparison of the same z with 0 ties' if abs_taken else 'np.abs(z) of the same z was taken'} "
                f"({line_text(e.tie_at if abs_taken else e.zero_at)}): " + _ZERO_KINK_TEXT), KinkWarning)


def _forward_tangent_at(x, mask) -> bool:
    """Whether a forward level tracing ``x`` has a tangent of it that is not 0 at ``mask``."""
    from .tangents import is_zero

    t = x
    while isinstance(t, Tracer):
        lv = t._level
        if getattr(lv, "mode", None) == "fwd":
            tan = lv.tangent_of(t)
            if not is_zero(tan) and np.any(np.broadcast_to(np.asarray(bottom(tan)), mask.shape)[mask] != 0):
                return True
        t = t._value
    return False


class _KinkWatch:
    """What the pullback of the watch on |z| checks (abs_watched): z's _ZeroKink, its zeros, the line."""
    __slots__ = ("entry", "mask", "site")

    def __init__(self, entry, mask, site):
        self.entry, self.mask, self.site = entry, mask, site

    def check(self, g):
        e = self.entry
        if e.warned or e.ties is None or isinstance(g, ZeroTangent):
            return
        both = e.ties & self.mask
        if both.any() and np.any(np.broadcast_to(np.asarray(bottom(g)), both.shape)[both] != 0):
            e.warned = True
            from .errors import KinkWarning, line_text, warn_at

            warn_at(self.site, f"|z| at z = 0 where a comparison of the same z with 0 ties ({line_text(e.tie_at)}): "
                    + _ZERO_KINK_TEXT, KinkWarning)


def abs_watched(x, ufunc=np.absolute):
    """np.abs (``ufunc``: or np.fabs) of traced ``x`` where it has zeros and carries a derivative: note them
    (note_zero_kink), and return |x| through a watch (rules/linalg's _norm_kink_p, with a check) where a reverse
    level traces x and a comparison of it with 0 tied there; None otherwise (np.abs as usual)."""
    b = bottom(x)
    if (b != 0 if x._scalar else np.all(b)):  # (the common case first: an element loop's abs)
        return None
    if np.iscomplexobj(b) or not carries_any_derivative(x) or compared_by_mutagrad(sys._getframe(1)):
        return None
    from .errors import user_site

    mask = np.asarray(b) == 0
    e = note_zero_kink(x, mask, True)
    # (on the values alone, not on whether it warned: a forward jacobian's runs must take the same steps)
    if e is None or e.ties is None or not (e.ties & mask).any() or _only_forward(x):
        return None  # (a watch only where a comparison with 0 tied first: |x| alone is as it was)
    # (the norms' watch, an identity whose pullback runs the check)
    from .rules.linalg import _norm_kink_p

    return bind(_norm_kink_p, (ufunc_dispatch(ufunc, "__call__", (x,), {}),),
                {"check": _KinkWatch(e, mask, user_site()).check})


def _only_forward(x) -> bool:
    return all(getattr(t._level, "mode", None) == "fwd" for t in _tracer_chain(x))


def _tracer_chain(x):
    while isinstance(x, Tracer):
        yield x
        x = x._value


def note_tied_pick(idx):
    """A gather of a traced array at an index np.argmax / np.argmin picked among tied extremes (TIED_PICKS; idx
    itself, or an item of an index tuple): the gathered value gets all of the tied elements' derivative, where
    np.max and np.min split it, so x[np.argmax(x)] - np.max(x), identically 0, had a nonzero derivative silently
    (the assignment tester). Warned here, where the index picks a differentiated value, not at the argmax: an
    accuracy metric (np.argmax(logits, 1) == labels) or a pivot search reads the index only (regress96). Not a
    reverse pass's gather (a write's pullback takes its cotangent at the index the write had, which an outer
    level traces under mg.hessian: it warned there, naming the mg.hessian line: regress135)."""
    if STATE.off_program:
        return
    for i in (idx if type(idx) is tuple or type(idx) is list else (idx,)):  # (x[[k]], x[k, j]: items too)
        hit = TIED_PICKS.get(id(i))
        b = i
        while (hit is None or hit[0] is not b) and type(b) is _ndarray and b.base is not None:  # (a view of it:
            b = b.base  # idx[:, None] for np.take_along_axis)
            hit = TIED_PICKS.get(id(b))
        if hit is not None and hit[0] is b:
            from .errors import KinkWarning, warn_at

            frame = user_frame(sys._getframe(2))
            warn_at(frame, (
                f"a value gathered at {user_line(frame) if frame is not None else 'this line'} at the index "
                f"np.{hit[1]} picked among tied elements of a differentiated array: it gets all of their "
                "derivative, a one-sided choice, where np.max and np.min split a tie evenly, so the two mixed "
                "(x[np.argmax(x)] - np.max(x), identically 0) give a nonzero derivative. Take the value with "
                "np.max / np.min, or gather at the index throughout (docs/errors.md: kinks)."), KinkWarning)
            return


def _note_leftover_read(lv, s):
    """A leftover whose memory a pullback still to be called (an mg.vjp's) reads is used by
    plain code, which may write into it or into views of it: the pullback compares the
    memory with this fingerprint and raises if it changed."""
    prints = lv.__dict__.setdefault("leftover_prints", {})
    if id(s) not in prints:
        from .api import _fingerprint

        prints[id(s)] = (s, _fingerprint(s))


class RunGroup:
    """The runs of the function that a forward-mode jacobian (and so hessian) makes, one
    per input direction. A run that reads a traced value an earlier run left behind (a
    memoized intermediate, a cache in a global or closure) reads it as a constant: same
    values, so the runs' outputs agree, but the derivative through it is lost for every
    direction but the first, while reverse mode, which runs once, keeps it."""

    __slots__ = ("births", "free", "name", "pos", "recording", "running", "trail")

    def __init__(self, name="jacobian(mode='fwd')"):
        self.name = name  # (the call the messages name: hessian's too)
        self.running = True
        self.trail = []  # what the first run did: the operations and the plain indices they took
        self.pos = 0
        self.births = 0  # (the storages the run made before its first step: Storage.birth)
        self.recording = True
        self.free = False  # a run whose steps are not compared: a careful second run (api._careful_jvp)

    def start_run(self, first, free=False):
        self.pos = 0
        self.births = 0
        self.recording = first
        self.free = free

    def note(self, entry):
        """One step of a run: recorded by the first, compared by the others. A run whose
        steps differ (a permutation drawn from a generator the function does not reseed,
        a branch on state it changes) computes another function than the first, though
        its output may have the same values (a shuffle of equal elements)."""
        if STATE.off_program or self.free:
            # a reverse pass's steps follow its tape, which the forward pass's steps fixed; its rules
            # take other paths where the tangents raise floating-point events (0 * inf) in one run only.
            # A careful run's arithmetic (strong zeros) takes other steps than the run it repeats
            return
        if self.recording:
            for v in entry:
                for u in v if type(v) is tuple else (v,):  # (a sparse matrix's: a tuple of them)
                    if type(u) is _StepValue:
                        u.flat = None  # (the trail keeps no operand alive)
            self.trail.append(entry)
            return
        k = self.pos
        self.pos = k + 1
        if k >= len(self.trail) or not _same_step(self.trail[k], entry):
            first = self.trail[k] if k < len(self.trail) else None
            if type(first) is tuple and len(first) == len(entry) and first[:2] == entry[:2]:
                # the same operation on the same traced operands, of other values
                raise MutationError(other_values_message("an operation of this run took operands of other values than run 1",
                                                         self.name))
            raise self.diverged_error()

    def at(self) -> int:
        """How many steps the running run has noted (Storage.birth: a storage made now is born at this step)."""
        return len(self.trail) if self.recording else self.pos

    def noted_alike(self, alike, *args) -> bool:
        """Whether a step needs no record for :meth:`note`: a run whose steps are not noted, or a later run's
        step that ``alike(first run's step, *args)`` finds the same, counted as :meth:`note` counts it (a
        cheap comparison, instead of a record of every operand of every step of every run). False: note it."""
        if STATE.off_program or self.free:
            return True
        if self.recording:
            return False
        k = self.pos
        if k < len(self.trail) and alike(self.trail[k], *args):
            self.pos = k + 1
            return True
        return False

    def finish_run(self):
        if self.free:
            self.free = False
            return
        if not self.recording and self.pos != len(self.trail):
            raise self.diverged_error()

    def diverged_error(self):
        return MutationError(
            f"{self.name} at {user_line()} {_PER_ELEMENT}, and this run "
            "took other steps than the first (other indices, another branch, another order, operands with other "
            "values): it drew from a "
            "random generator the runs do not rewind (one in a container of more than 1024 objects, or in an "
            "object a call returns: the arguments' generators, those the function reaches by name and "
            "NumPy's global one are put back before each run), read state an earlier run changed (a counter, "
            "a cache the first run filled), or ran its steps in an order that changes from run to run (a loop "
            "over a set of objects, worker threads), so its column may be the derivative of another "
            "function. Seed the generator inside the function (np.random.default_rng(seed)), fill caches "
            f"before differentiating, or {_once_advice(self.name)}, which runs the function once." + _threads_note()
        )

    def leftover_error(self):
        return MutationError(
            f"{self.name} at {user_line()} {_PER_ELEMENT}, and this run "
            "reads a value an earlier run computed and kept (a memoized intermediate, a cache in a global, "
            "a closure or an object): its derivative would be lost here. Compute it in every call (clear the "
            f"cache when the function starts), or {_once_advice(self.name)}, which runs the function once.")


# (what the three refusals of a forward jacobian's run say first)
_PER_ELEMENT = ("runs the function once per input element (forward mode pushes one direction per run; hessian of an "
                "array output or of complex arguments is forward over reverse, so it does too)")


def _once_advice(name):
    """How to differentiate in one run instead of ``name``'s one run per input element."""
    if name.startswith("hessian"):
        return "use mg.jacobian(mg.jacobian(f), mode='rev') (reverse over reverse)"
    return "use mode='rev'"


def other_values_message(what, name="jacobian(mode='fwd')"):
    """The message of a forward-mode jacobian's run that computed with other values than the
    first (``what``: where it showed; ``name``: the call, hessian's too)."""
    return (
        f"{name} at {user_line()} {_PER_ELEMENT}, and {what}: the function reads "
        "state that it changes itself outside its arguments (a global or closure array, a counter, an object's "
        "attribute, a random generator held where the runs do not rewind it, in a container of more than 1024 "
        "objects or an object a call returns: the arguments' arrays and generators, and the generators the "
        "function reaches by name, are put back before each run), so each column would be the derivative of "
        "another function; or it computes a constant in an order that changes from run to run (a sum over a "
        "set of objects: its last bits); or it computes with memory that no run sets (np.empty's uninitialized "
        "values, mnp.empty's and np.empty_like's too, other on each run, even where they are overwritten later: "
        "np.empty(n) + 0 * p; make the array with np.zeros, mnp.zeros or np.zeros_like). Pass that state as an argument, or set it inside the function (seed "
        "the generator there; sum in a fixed order); or use mg.jacobian(f, mode='rev') (for a Hessian, "
        "mg.jacobian(mg.grad(f), mode='rev')), which runs the function once." + _threads_note())


def _threads_note():
    """With other threads running: a generator the runs put back (NumPy's global one, np.random.normal) may be
    drawn from by them meanwhile, so a run draws other numbers (regress115)."""
    if threading.active_count() == 1:
        return ""
    return (f" Other threads are running ({threading.active_count() - 1}): if one of them draws from the same "
            "random generator meanwhile (NumPy's global one: np.random.normal in either), each run draws other "
            "numbers; give the function its own generator, np.random.default_rng(seed) made inside it or passed "
            "in.")


def index_step(idx):
    """A comparable record of an index (RunGroup.note): its integers, slices and the
    contents of its arrays."""
    parts = idx if type(idx) is tuple else (idx,)
    out = []
    for i in parts:
        if isinstance(i, _ndarray):
            out.append((i.dtype.str, i.shape, i.tobytes()))
        elif type(i) is slice:
            out.append(("slice", i.start, i.stop, i.step))
        elif isinstance(i, Tracer):
            out.append(("traced", bottom(i).tobytes()))
        else:
            out.append(i)
    return tuple(out)


def operand_step(v):
    """A comparable record of an operation's operand (RunGroup.note): the value of a number or
    array, traced or not (``_StepValue``); None for other objects."""
    traced = isinstance(v, Tracer)
    b = bottom(v) if traced else v
    t = type(b)
    if t is _ndarray or isinstance(b, np.generic):
        # (an object array's bits are addresses; a plain operand's bits are the same in every run
        # unless the function changed it, a traced one's may differ in the last bit)
        return ("O", b.shape) if b.dtype.kind == "O" else _StepValue(b, exact=not traced)
    if t is float:
        return _StepValue(np.float64(b))
    if t is complex:
        return _StepValue(np.complex128(b))
    if t is int or t is bool:
        return b
    if scipy_sparse_object(b) and hasattr(b, "tocoo"):
        # a sparse matrix the function changes: its entries in canonical order (SciPy's own methods
        # sort a matrix's indices in place, A.sum(): the same matrix, other arrays)
        c = b.tocoo(copy=True)
        c.sum_duplicates()
        return (t.__name__, c.shape, _StepValue(c.data, True), _StepValue(c.row, True), _StepValue(c.col, True))
    return None


class _StepValue:
    """An operand's value as a run saw it, equal to another run's within rounding, as the runs'
    outputs must be (NumPy's last bits may depend on an array's alignment; a sum's on the order of
    a set's items). A large array is kept as a sample of 256 of its elements and a weighted sum of
    all (``_checksum``): of their bits for an ``exact`` one (a plain operand, the same bits in
    every run unless the function changed it; integers and booleans), else of their values.
    ``flat``, the array itself, only until the run's step is compared (RunGroup.note)."""

    __slots__ = ("data", "dtype", "exact", "flat", "shape", "total")

    def __init__(self, b, exact=False):
        self.dtype = b.dtype
        self.shape = b.shape
        # (a long double's padding bytes are no part of its value: compared by value)
        self.exact = exact = (exact and b.dtype.char not in "gG") or b.dtype.kind not in "fc"
        self.total = self.flat = None
        if b.size > 256:
            flat = np.ravel(b, order="K")  # (a view for a transposed array: its memory's order)
            self.total = _checksum(_bits(flat) if exact else flat)
            if not exact:
                self.flat = flat
            b = flat[:: -(-flat.size // 256)]
        self.data = b.tobytes()

    def __eq__(self, other):
        if type(other) is not _StepValue or self.dtype != other.dtype or self.shape != other.shape:
            return False
        if self.data == other.data and self.total == other.total:
            return True
        if self.dtype.kind not in "fc":
            return False
        values = lambda v: np.frombuffer(v, self.dtype)
        if not _within_rounding(values(self.data), values(other.data), self.exact or other.exact):
            return False
        if self.total is None:  # (a small operand: within rounding, plain too, a sum over a set's order)
            return True
        if self.exact or other.exact:
            return False
        (c1, e1), (c2, e2) = self.total, other.total
        if e1 != e2:  # (where the non-finite elements are)
            return False
        flat = self.flat if self.flat is not None else other.flat
        if flat is None:
            return False
        with np.errstate(all="ignore"):  # within rounding of the weighted sum of the magnitudes
            scale = _checksum(np.abs(flat))[0]
        return bool(abs(c1 - c2) <= 1e-12 * abs(scale))

    __hash__ = None


def _bits(flat):
    """A contiguous array's elements as signed integers of their bits (a float's, a complex's parts)."""
    flat = np.ascontiguousarray(flat)
    size = flat.dtype.itemsize // (2 if flat.dtype.kind == "c" else 1)
    return flat.view({8: np.int64, 4: np.int32, 2: np.int16}.get(size, np.uint8))


_WEIGHTS = 1.0 + (np.arange(8192) * 0.6180339887498949) % 1.0  # (weights in [1, 2), all different)
_IWEIGHTS = (np.arange(8192, dtype=np.int64) * 2654435761) % 2147483647 + 1  # (integers: exact, modulo 2^64)


def _checksum(flat):
    """(a weighted sum of a large array's elements, the weights repeating every 8192 elements and
    those blocks weighted too, so that a change of any element shows, a swap of two too; for a
    float array with non-finite elements, the finite ones' sum and an exact one of where the
    others are and what they are, else None)."""
    kind = flat.dtype.kind
    with np.errstate(all="ignore"):
        if kind not in "fc":  # integers and booleans: exactly, in int64 arithmetic (modulo 2^64)
            ints = flat.view(np.int64) if flat.dtype == np.uint64 else flat.astype(np.int64, copy=False)
            return _weighted(ints, _IWEIGHTS), None
        c = _weighted(flat, _WEIGHTS)
        odd = None
        if not cmath.isfinite(c):
            fin = np.isfinite(flat)
            codes = np.where(fin, 0, np.where(np.isnan(flat), 1, np.where(flat.real > 0, 2, 3))).astype(np.int64)
            c = _weighted(np.where(fin, flat, 0), _WEIGHTS)
            odd = _weighted(codes, _IWEIGHTS)
    return (complex(c) if kind == "c" else float(c)), odd


def _weighted(flat, weights):
    n, w = flat.size, weights.size
    k = n // w
    c = np.dot(flat[k * w:], weights[: n - k * w])
    if k:
        c = c + np.dot(np.dot(flat[: k * w].reshape(k, w), weights), np.resize(weights[::-1], k))
    return c.item() if flat.dtype.kind in "iub" else c


def _within_rounding(a, b, each=False) -> bool:
    """``b`` equals ``a`` within rounding, NaN where ``a`` has NaN (see api._same_value); ``each``:
    every element within rounding of itself (a plain operand: its tiny elements beside large ones
    are values of their own, not rounding of the large ones)."""
    with np.errstate(all="ignore"):
        scale = 0.0 if each else float(np.max(np.abs(a), initial=0.0, where=np.isfinite(a)))  # (an inf: anything)
        return bool(np.allclose(a, b, rtol=1e-10, atol=1e-10 * max(scale, 1e-300), equal_nan=True))


def _same_step(a, b) -> bool:
    try:
        return bool(a == b)
    except (TypeError, ValueError):  # (an index NumPy compares elementwise: its repr tells)
        return repr(a) == repr(b)


def bind(prim, args, kwargs=None):
    """Apply ``prim`` to ``args``, dispatching to the innermost level present."""
    if kwargs is None:
        kwargs = {}
    leaves, tree = _flatten_args(args)
    top = top_level(leaves)
    if top is False:  # leftovers among the arguments: their values
        return bind(prim, tuple(_unflatten_args(tree, [live(x) for x in leaves])), kwargs)
    if top is None:
        return prim.impl(*args, **kwargs)
    st = STATE
    if not st.levels and top.thread != _get_ident():  # (a worker thread's operation)
        return run_lent(top, bind, prim, args, kwargs)
    for v in kwargs.values():
        if isinstance(v, Tracer):
            raise TypeError(f"{prim.name}: keyword arguments cannot be traced values ({user_line()})")
    out = _process_at(top, prim, leaves, tree, args, kwargs)
    saved = st.ceiling
    if saved - 1 > top.index:
        out = _lift_tree(out, st.levels[top.index + 1 : saved], _sources(leaves))
    return out


def _process_at(lv, prim, leaves, tree, args, kwargs):
    """``lv.process(...)``, run by code that sees only the levels outside ``lv`` (its rules get
    their values, which may be those levels' traced values)."""
    st = STATE
    saved = st.ceiling
    st.ceiling = lv.index
    try:
        return lv.process(prim, leaves, tree, args, kwargs)
    finally:
        st.ceiling = saved


def apply_inner(prim, leaves, tree, kwargs):
    """``prim`` applied to one level's unwrapped arguments, where that level has no derivative
    to carry: the plain function, or, where an outer level's traced values are among them
    (the level's own were), ``prim`` bound again for those levels (a ``@primitive``'s
    function is plain Python, which would turn them into plain arrays)."""
    args = _unflatten_args(tree, leaves)
    for x in leaves:
        if isinstance(x, Tracer):
            return bind(prim, tuple(args), kwargs)
    return prim.impl(*args, **kwargs)


def run_lent(lv, fn, *args):
    """``fn(*args)`` in a worker thread (one running no differentiation of its own) that applies an
    operation to values of level ``lv``, which the thread that started it runs: in ``lv``'s levels
    (it and the levels outside it), as that thread would run it, so that a nested differentiation's
    operations reach its outer levels (the worker's own list of levels is empty)."""
    st = STATE
    st.levels = [*lv.outer, lv]
    st.ceiling = len(st.levels)
    st.lent = lv.thread
    try:
        return fn(*args)
    finally:
        st.levels = []
        st.ceiling = 0
        st.lent = None


def bind_with(level_method_name, x, *rest):
    """Dispatch a core operation (getitem/write) on tracer ``x`` to its level."""
    lv = x._level
    if lv.closed:  # a leftover (see live); writes unwrap theirs in write()
        return live(x)[rest[0]]
    st = STATE
    if not st.levels and lv.thread != _get_ident():  # (a worker thread's operation)
        return run_lent(lv, bind_with, level_method_name, x, *rest)
    if lv.index == 0 and st.ceiling == 1 and st.levels[0] is lv:
        # the outermost level (this thread's): its values are plain, nothing to lift
        return getattr(lv, level_method_name)(x, *rest)
    if lv.thread != _get_ident() and elsewhere(lv, x):  # (another thread's independent differentiation's)
        if level_method_name != "getitem":
            raise x._elsewhere_write()
        return live(x)[rest[0]]
    saved = st.ceiling
    st.ceiling = lv.index
    try:
        out = getattr(lv, level_method_name)(x, *rest)
    finally:
        st.ceiling = saved
    if saved - 1 > lv.index and out is not None:
        out = _lift_tree(out, st.levels[lv.index + 1 : saved], _sources((x,)))
    return out


def _no_rule(fn, kind="function"):
    name = qualname(fn)
    if name.startswith("np.frompyfunc("):  # (a Python function's ufunc: its calls are the derivative's)
        return NoRuleError(
            f"{name} was applied to a traced value at {user_line()}: a ufunc of np.frompyfunc calls its "
            "Python function on object elements, which mutagrad does not trace. Use "
            "mutagrad.numpy.vectorize(f, otypes=[float]) (NumPy's np.vectorize, differentiated: it traces "
            "each call; import mutagrad.numpy as mnp), or apply the ufunc to mg.value(x) (a read-only "
            "plain view of the values) if its result is a constant.")
    return NoRuleError(
        f"{name} was applied to a traced value at {user_line()}, but mutagrad has no "
        f"derivative rule for this {kind}. It is never treated as a constant. If the result "
        "should be a constant, apply it to mg.value(x) (a read-only plain view of the values, which "
        f"carries no derivative); otherwise register a rule with @mg.rrule({name.split('.')[-1]}) (and "
        "@mg.frule for forward mode)."
    )


UFUNC_HANDLERS: dict = {}  # (ufunc, method) -> handler(ufunc, inputs, kwargs)


def _arrayify(inputs):
    """Lists and tuples among ufunc operands become arrays (traced if they
    hold traced values), so that every operand is one leaf; a range becomes
    NumPy's array of it (rules' partials test operands' values)."""
    for x in inputs:
        if type(x) is list or type(x) is tuple or type(x) is range:
            break
    else:
        return inputs
    from .numpy import array

    return tuple(array(x) if type(x) is list or type(x) is tuple else np.asarray(x) if type(x) is range else x
                 for x in inputs)


def _plain_inplace_operand(inputs, kwargs):
    """(the plain array, its reference count seen from here) when a ufunc is called as
    ``f(p, t, out=(p,))`` on a plain ndarray ``p``, as NumPy calls it for ``p += t`` (``p @= t``
    adds NumPy's axes=); else None."""
    out = kwargs.get("out")
    if type(out) is not tuple or len(out) != 1 or (len(kwargs) == 2 and "axes" not in kwargs):
        return None
    p = out[0]
    if type(p) is not _ndarray or inputs[0] is not p:
        return None
    return p, _getrefcount(p)


def _sole_memory(p) -> bool:
    """Whether plain array ``p``'s memory is its own: it owns it, or it is a view of an array that owns it
    and that nothing but ``p`` refers to (a temporary inside NumPy's code: np.linspace's, the arange of
    ``np.arange(6.).reshape(2, 3)``, np.roll's), so no other array sees a write into it."""
    b = p.base
    if b is None:
        return p.flags.owndata
    # (references to b: p's, this frame's name and getrefcount's argument)
    return (type(b) is _ndarray and b.base is None and b.flags.owndata and not _getweakrefcount(b)
            and _getrefcount(b) == 3)


def _promoted_inplace(ufunc, inputs, p, frame):
    """``p op= t`` with ``p`` a plain array that only the assignment's target names (made
    from plain values: ``x = x0.copy(); x += t``): the statement rebinds the target to
    what the operator returns, so it may return a new traced array ``p op t`` in p's dtype
    and leave p as it was (no one else can see it). None where that is not the case:
    the caller's frame is not at an in-place operator, p is a view, is read-only, holds no
    floats, or the result would need another shape or an unsafe cast (NumPy's errors then)."""
    code = frame.f_code.co_code
    at = frame.f_lasti
    if (code[at] != _BINARY_OP_CODE or code[at + 1] not in _INPLACE_ARGS or not _sole_memory(p)
            or not p.flags.writeable or p.dtype.kind not in "fc"
            or _getweakrefcount(p) or not (p.flags.c_contiguous or p.flags.f_contiguous)):
        return None
    # the target a name, which the statement rebinds itself (an attribute or an item may be read
    # from one object and stored into another: a class attribute, a proxy, a ChainMap)
    stmt = _statement_at(frame)
    if stmt is not None and (type(stmt) is not ast.AugAssign or type(stmt.target) is not ast.Name):
        return None
    # (the instruction that stores the result tells the target where no source can be read, exec'd code: the
    # raking tester's `lam -= step` worked from a file only; and whether the name is stored where it was read)
    if not _stores_into_its_name(frame, p):
        return None
    axes = _INPLACE_AXES.get(ufunc)
    with np.errstate(all="ignore"):  # NumPy's own errors (shapes, casting), as in a plain call
        ufunc(p.copy(), *[bottom(x) for x in inputs[1:]], out=(np.empty_like(p),),
              **({} if axes is None else {"axes": axes}))
    res = call_ufunc(ufunc, inputs, {})
    if np.shape(res) != p.shape:
        return None
    dt = bottom(res).dtype
    if dt != p.dtype:
        if not np.can_cast(dt, p.dtype, "same_kind"):
            return None
        res = res.astype(p.dtype)
    if not p.flags.c_contiguous and p.ndim > 1:  # (the array's layout: a Fortran-ordered one stays so)
        res = numpy_layout(res, p.strides)
    _note_promotion(frame)
    return res


def _note_promotion(frame):
    """Keep where an in-place operator gave a name a new traced array (per code object, in this differentiation):
    a plain buffer made from the plain array before (tmp = np.empty_like(P) before `P += q * I`) stays plain, and
    the error of a write into it names that line (the garch tester's Kalman filter blamed `tmp` alone)."""
    st = STATE
    if not st.levels:
        return
    promoted = st.__dict__.setdefault("promoted", {})
    if len(promoted) > 64:
        promoted.clear()
    name = _STORES_AFTER.get(frame.f_code, {}).get(frame.f_lasti, (None, None))[1]
    if isinstance(name, str):
        promoted.setdefault(frame.f_code, (st.levels[0].id, name, frame.f_lineno))


def _promotion_note(frame) -> str:
    """The note of :func:`_note_promotion` for an error at the user's ``frame``, or ''."""
    promoted = STATE.__dict__.get("promoted")
    got = promoted.get(frame.f_code) if promoted and frame is not None else None
    if got is None or not STATE.levels or got[0] != STATE.levels[0].id:
        return ""
    _, name, line = got
    return (f" Note: `{name}` was made from plain values, and its in-place operator at line {line} gave it a new "
            f"traced array (nothing else referred to it); arrays made from the plain `{name}` before that "
            f"(np.empty_like({name}), {name}.copy()) stay plain. Make `{name}` traced where it is made "
            "(mnp.eye, mnp.zeros, np.zeros_like of a traced value), or pass it in as an argument.")


_INPLACE_AXES = {np.matmul: [(-2, -1), (-2, -1), (-2, -1)]}  # (what ndarray.__imatmul__ passes)


def _stores_into_its_name(frame, p) -> bool:
    """Whether the instruction after the in-place operator the frame is at stores into a name (`x -= t`), not
    an attribute or an item (`a.x -= t`, `a[i] -= t`, whose objects may differ), and into the namespace that
    holds ``p`` under that name: a name read from the globals and stored into other locals (exec(code, env,
    loc), a class body) would leave the array it read unchanged, where NumPy changes it (regress118)."""
    code = frame.f_code
    stores = _STORES_AFTER.get(code)
    if stores is None:  # (each code object's instructions read once: an in-place operator in a loop asks each time)
        if len(_STORES_AFTER) > 512:
            _STORES_AFTER.clear()
        ins = list(dis.get_instructions(code))
        stores = _STORES_AFTER[code] = {a.offset: (b.opname, b.argval) for a, b in itertools.pairwise(ins)}
    opname, name = stores.get(frame.f_lasti, (None, None))
    if opname == "STORE_NAME":
        return frame.f_locals.get(name) is p
    if opname == "STORE_GLOBAL":
        return frame.f_globals.get(name) is p
    return opname in ("STORE_FAST", "STORE_DEREF")  # (read from the same slot or cell)


_STORES_AFTER: dict = {}  # code -> {offset: (the next instruction's name, its argument)}


_BINARY_OP_CODE = dis.opmap.get("BINARY_OP", -1)
_INPLACE_ARGS = frozenset(i for i, (name, _) in enumerate(getattr(dis, "_nb_ops", ())) if "INPLACE" in name)


class _InplaceProbe:
    """Measures the reference count :func:`_plain_inplace_operand` sees for the target of
    ``x += probe``, x named once; None (no promotion) if a second name does not change it."""
    __array_priority__ = 1000.0

    def __init__(self, seen):
        self.seen = seen

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        p = _plain_inplace_operand(inputs, kwargs)
        self.seen.append(None if p is None else p[1])
        return inputs[0]


def _calibrate_inplace():
    """{False: the count for ``x op= t``, True: for ``x @= t`` (NumPy passes axes=)}; a
    missing entry (no promotion) where a second name does not change the count."""
    once, twice, mat_once, mat_twice = [], [], [], []

    def named_once():
        x = np.zeros((2, 2))
        x += _InplaceProbe(once)
        x = np.zeros((2, 2))
        x @= _InplaceProbe(mat_once)

    def named_twice():
        x = np.zeros((2, 2))
        y = x
        x += _InplaceProbe(twice)
        x = np.zeros((2, 2))
        z = x
        x @= _InplaceProbe(mat_twice)
        return y, z

    named_once()
    named_twice()
    refs = {}
    for key, a, b in ((False, once, twice), (True, mat_once, mat_twice)):
        if a and b and a[0] is not None and b[0] is not None and b[0] > a[0]:
            refs[key] = a[0]
    return refs


_INPLACE_REFS = [{}]


def ufunc_dispatch(ufunc, method, inputs, kwargs):
    if not STATE.levels:
        lv = _lender(inputs, kwargs)
        if lv is not None:
            return run_lent(lv, ufunc_dispatch, ufunc, method, inputs, kwargs)
    what = qualname(ufunc) if method == "__call__" else f"{qualname(ufunc)}.{method}"
    _no_object_inputs(what, inputs)
    if method == "__call__" or method == "outer":
        inputs = _foreign_operands(what, inputs)
        if inputs is None:  # (a duck array among them: NumPy asks its __array_ufunc__ next, with the tracer)
            return NotImplemented
    elif method == "at" and any(_duck(v) for v in inputs[2:]):  # (np.add.at(y, i, duck): the duck's)
        return NotImplemented
    out = kwargs.get("out")
    if out is not None and any(_duck(o) for o in (out if type(out) is tuple else (out,))):
        return NotImplemented  # (out= a duck array: its own __array_ufunc__ fills it)
    if method == "__call__":
        inputs = _arrayify(inputs)
    h = UFUNC_HANDLERS.get((ufunc, method)) or UFUNC_HANDLERS.get((None, method))
    if h is None:
        plain = _leftovers_only(inputs, kwargs)
        if plain is not None:
            return getattr(ufunc, method)(*plain[0], **plain[1])
        raise _no_rule(ufunc, f"ufunc method .{method}" if method != "__call__" else "ufunc")
    return h(ufunc, inputs, kwargs)


def _leftovers_only(args, kwargs):
    """(args, kwargs) with every leftover traced value (see live) replaced by its value,
    or None when a traced value of a running differentiation is among them."""
    leaves, tree = _flatten_args(tuple(args) + tuple(kwargs.values()))
    if top_level(leaves) is not False:
        return None
    vals = [live(x) for x in leaves]
    if any(isinstance(v, Tracer) for v in vals):
        return None
    vals = _unflatten_args(tree, vals)
    n = len(args)
    return tuple(vals[:n]), dict(zip(kwargs, vals[n:]))


def _lender(args, kwargs):
    """In a worker thread (one running no differentiation of its own): the innermost level among the
    traced values of a call's arguments if another thread runs it (its handler then runs in that
    level's levels, run_lent: a handler's buffers, mnp.zeros, are traced there), else None."""
    top = top_level(_flatten_args((args, tuple(kwargs.values())))[0])
    return top if top and top.thread != _get_ident() else None


def function_dispatch(func, args, kwargs):
    if not STATE.levels:
        lv = _lender(args, kwargs)
        if lv is not None:
            return run_lent(lv, function_dispatch, func, args, kwargs)
    h = FUNCTIONS.get(func)
    if h is None:
        twin = _like_twins().get(func)
        if twin is not None:  # np.empty(shape, like=x): NumPy hands a creation function to like='s protocol
            return twin(*args, **kwargs)
        plain = _leftovers_only(args, kwargs)
        if plain is not None:  # (np.save(f, y) of a value a returned differentiation left behind)
            return func(*plain[0], **plain[1])
        raise _no_rule(func)
    seq = False
    for a in args:
        if _object_like(a):
            raise _object_operand(qualname(func), a)
        ta = type(a)
        if ta is list or ta is tuple:
            obj = _object_item(a)  # (a sequence of arrays: np.concatenate, np.stack, np.block, choices)
            if obj is not None:
                raise _object_operand(qualname(func), obj)
            seq = True
        elif ta is not _ndarray and ta is not ArrayTracer and ta is not ScalarTracer and _dropped_subclass(a):
            raise subclass_error(a)  # (a masked array's mask, np.matrix's products: the rules would drop them)
    for a in kwargs.values():
        ta = type(a)
        if ta is list or ta is tuple:
            seq = True
        elif ta is not _ndarray and ta is not ArrayTracer and ta is not ScalarTracer and _dropped_subclass(a):
            raise subclass_error(a)  # (np.average(x, weights=masked))
    if not seq:  # (the common case: arrays and numbers only)
        return h(args, kwargs)
    if func is not np.block:  # (np.block's nesting is its structure)
        if func in _SEQUENCE_OF_ARRAYS and args and (type(args[0]) is list or type(args[0]) is tuple):
            # its first argument is a sequence of pieces: the pieces are converted, not the sequence
            args = (type(args[0])(_numbers_as_arrays(p) for p in args[0]),) + args[1:]
        else:
            args = tuple(_numbers_as_arrays(a) for a in args)
        kwargs = {k: _numbers_as_arrays(v) for k, v in kwargs.items()}
    return h(args, kwargs)


# functions whose first argument is a sequence of arrays
_SEQUENCE_OF_ARRAYS = frozenset(
    getattr(np, n) for n in ("concatenate", "stack", "vstack", "hstack", "dstack", "column_stack", "row_stack")
    if hasattr(np, n))


def _numbers_as_arrays(obj):
    """A (nested) list or tuple of numbers holding traced ones, as one traced
    array (what NumPy would make of it, had it looked inside: NumPy dispatches
    on arrays only, so ``np.dot([x[0], 1.0], y)`` reaches us with the list).
    Lists of arrays (``np.concatenate([[0.0], x])``) keep their structure,
    with such lists inside them converted."""
    if type(obj) is not list and type(obj) is not tuple:
        return obj
    kind = _number_leaves(obj)
    if kind is True:
        from .numpy import array as marray

        return marray(obj)
    if kind is None:  # no traced value inside: as it was
        return obj
    return type(obj)(_numbers_as_arrays(o) for o in obj)


def _number_leaves(obj):
    """True: every leaf a number or a traced scalar, one of them traced; None:
    nothing traced; False: something else (an array, a string...)."""
    traced = False
    for o in obj:
        t = type(o)
        if t is list or t is tuple:
            k = _number_leaves(o)
            if k is False:
                return False
            traced = traced or k is True
        elif isinstance(o, Tracer):
            if o.ndim:
                return False
            traced = True
        elif not isinstance(o, (int, float, complex, np.number, np.bool_)):
            return False
    return True if traced else None


# --------------------------------------------------------------------------
# The traced array


_EMPTY = {}
_PLAIN_SCALARS = frozenset((float, int, complex, np.float64, np.float32, np.int64, np.complex128, np.complex64, np.float16,
                            np.longdouble, np.clongdouble))


def ew_rule(prim):
    """``prim.elementwise`` (rule, partials, function, frule) if the tape may record
    ``prim`` as an elementwise operation: defined by defelementwise and its
    reverse rule not replaced since; else None."""
    ew = prim.elementwise
    if ew is not None and prim.rrule is ew[0] and not prim.zero:
        return ew
    return None


def _plain_operand_ok(lv, nested, self, p) -> bool:
    """Whether plain array ``p`` (exactly an ndarray) may be an operand of :func:`_fast_call`: of a
    numeric dtype, with an array ``self`` (not a scalar's element runs), at a single level: a reverse
    one's ``process_ew`` keeps the private copy a pullback reads (ReverseLevel.snapshot), as the
    general path does (``x * A`` of a constant A); a forward one's reads it at once."""
    if WRITTEN_ARGS:
        _check_argument_read(p)
    return not nested and not self._scalar and p.dtype.kind in "fciub"


def _fast_call(ufunc, self, a, b, scalar_op=None, dest=None, into=None):
    """The hot path of ``a op b`` (and ``np.f(a, b)``): operands that are Python
    scalars or tracers of the innermost level the running code sees, no keywords.
    Goes straight to the level, skipping the general dispatcher (and, for an
    elementwise function at the outermost level, whose values are plain, to the
    level's ``process_ew``); returns None when the call is not of that kind.

    ``dest``: ``np.f(a, b, out=dest)`` with ``dest`` all of an array of that
    level (``self``), computed in place by a reverse-mode level, or None.
    ``into``: ``a`` or ``b``, a temporary whose buffer may take the result (elide.py)."""
    lv = self._level
    st = STATE
    nested = len(st.levels) != 1
    if lv.closed or (st.ceiling != lv.index + 1 if nested else st.levels[0] is not lv):
        return None  # (not the innermost level the running code sees; or another thread's)
    if not (type(a) in _PLAIN_SCALARS or (isinstance(a, Tracer) and a._level is lv)) and not (
            type(a) is _ndarray and _plain_operand_ok(lv, nested, self, a)):
        return None
    if b is not _NOARG and not (type(b) in _PLAIN_SCALARS or (isinstance(b, Tracer) and b._level is lv)) and not (
            type(b) is _ndarray and _plain_operand_ok(lv, nested, self, b)):
        return None
    prim = REGISTRY.get(ufunc)
    if prim is None:
        return None
    leaves = [a, b] if b is not _NOARG else [a]
    ew = prim.elementwise
    r = None
    if nested:  # nested differentiations: the general rule, at this level
        if dest is not None or into is not None:
            return None
        if lv.index == 0 and lv.mode == "fwd" and ew is not None and prim.frule is ew[3] and not prim.zero:
            r = lv.process_ew(prim, leaves)  # (the outermost level: plain values)
    elif lv.mode == "rev":
        if ew is not None and prim.rrule is ew[0] and not prim.zero:  # (ew_rule, inlined)
            # plain values only: no dispatch inside, no ceiling needed
            r = lv.process_ew(prim, leaves, scalar_op, dest, self._scalar, into)
            if r is not None or dest is not None:
                return r
        elif prim.fast is not None and not lv.record_lines:
            r = prim.fast(lv, leaves, dest)
            if r is not None or dest is not None:
                return r
        elif dest is not None:
            return None
    elif dest is not None:  # (forward mode: in place at the outermost level)
        return lv.ew_into(prim, leaves, dest) if ew is not None and prim.frule is ew[3] and not prim.zero else None
    elif ew is not None and prim.frule is ew[3] and not prim.zero:
        r = lv.process_ew(prim, leaves)
    if r is None:
        r = _process_at(lv, prim, leaves, None, None, _EMPTY)
        if nested and prim in NESTED_WATCH:  # (np.sqrt of a sum of squares: rules/elementwise._root_watch)
            r = NESTED_WATCH[prim](leaves, r)
    if scalar_op is not None and type(r) is ScalarTracer:
        # NumPy scalars' own arithmetic (complex128's differs from the ufunc loop in the last bit)
        va = plain_operand(a) if isinstance(a, Tracer) and a._level is lv else a
        vb = plain_operand(b) if isinstance(b, Tracer) and b._level is lv else b
        if type(va) in _SCALAR_OP_TYPES and type(vb) in _SCALAR_OP_TYPES:
            y = scalar_op(va, vb)  # (Python numbers, weak ones: Python's arithmetic, as in a plain call)
            if type(y) is float or type(y) is complex:
                y = _np_scalar(y)
            t = r
            while type(t._value) is ScalarTracer:  # (nested: the outermost level's tracer holds the value)
                t = t._value
            if type(y) is type(t._value):  # (r is fresh, at every level: its storage's root is its value)
                t._value = t._storage._root = y
    return r


NESTED_WATCH: dict = {}  # primitive -> f(operands, result): a result to watch under a higher derivative


def ew_call(prim, leaves, dest=None):
    """``prim(*leaves)`` for an elementwise primitive of any number of operands (np.clip's three), by the
    level's ``process_ew`` where a single reverse-mode level runs and the operands are its tracers, plain numbers
    or plain numeric arrays (as :func:`_fast_call` takes two), else None. ``dest``: computed into ``dest``,
    all of one of that level's arrays, or None if the level does not take it there."""
    st = STATE
    if len(st.levels) != 1:
        return None
    lv = st.levels[0]
    if lv.closed or lv.mode != "rev" or prim.elementwise is None or prim.rrule is not prim.elementwise[0] or (
            prim.zero):
        return None
    for x in leaves:
        tx = type(x)
        if not (tx in _PLAIN_SCALARS or ((tx is ArrayTracer or tx is ScalarTracer) and x._level is lv) or (
                tx is _ndarray and x.dtype.kind in "fiub")):
            return None
    return lv.process_ew(prim, list(leaves), None, dest)


# NumPy's random methods whose draws are integers: a float parameter (probabilities, rates)
# moves them by jumps only, so the draws have derivative zero w.r.t. it, as np.searchsorted's
# result has w.r.t. its arguments. (choice's population ``a`` is converted without a dtype:
# a traced one is not a parameter and is refused.)
_RANDOM_INTEGER_DRAWS = frozenset(("choice", "multinomial", "binomial", "negative_binomial", "poisson",
                                   "geometric", "zipf", "logseries"))


# integer draws whose bounds NumPy converts as they are (dtype None), then casts to integers
_RANDOM_INTEGER_BOUNDS = frozenset(("integers", "randint", "random_integers"))


def _integer_draw(frame, dtype) -> bool:
    """Whether the conversion (to ``dtype``) asked by ``frame`` is NumPy's random generator
    converting a float parameter of a method in ``_RANDOM_INTEGER_DRAWS`` (or, with no dtype, a
    bound of one in ``_RANDOM_INTEGER_BOUNDS``)."""
    if dtype is None:
        names = _RANDOM_INTEGER_BOUNDS
    elif np.dtype(dtype) == _F64:
        names = _RANDOM_INTEGER_DRAWS
    else:
        return False
    call = call_at(frame)
    return (call is not None and type(call.func) is ast.Attribute and call.func.attr in names
            and _random_method(call, frame))


def _random_method(call, frame) -> bool:
    """Whether ``call``, executed by ``frame``, is ``<g>.method(...)`` with ``<g>`` a
    ``Generator``, a ``RandomState`` or the ``np.random`` module (its legacy functions):
    a name or attribute chain, or a call of their constructors (not called again)."""
    g = call.func.value
    if type(g) is ast.Call:  # np.random.default_rng(0).choice(...): the constructor, not called again
        return _named(g.func, frame) in _GENERATOR_MAKERS
    g = _named(g, frame)
    return isinstance(g, (np.random.Generator, np.random.RandomState)) or g is np.random


_GENERATOR_MAKERS = (np.random.default_rng, np.random.Generator, np.random.RandomState)
_GENERATOR_METHODS = frozenset(n for n in dir(np.random.Generator) if not n.startswith("_"))
# samplers whose traced location or scale a transform of a draw with fixed parameters gives,
# differentiated (the same numbers: NumPy's C code computes loc + scale * the standard draw)
_RANDOM_TRANSFORMS = {
    "multivariate_normal": ("A traced mean: mean + {rng}.multivariate_normal(np.zeros(np.shape(mean)), cov, size) "
                            "draws the same numbers and is differentiated. A traced cov: mean + "
                            "{rng}.standard_normal(s + (len(mean),)) @ np.linalg.cholesky(cov).T, s the size as a "
                            "tuple (() for None, (size,) for a number), draws the numbers of "
                            "multivariate_normal(..., method='cholesky') (the default, 'svd', draws others of the same "
                            "distribution) and is differentiated."),
    "gamma": "A traced scale: scale * {rng}.standard_gamma(shape, size) draws the same numbers and is differentiated.",
    **{k: (f"A traced loc or scale: loc + scale * {{rng}}.{k}(0.0, 1.0, size) draws the same numbers and is "
           "differentiated.") for k in ("laplace", "logistic", "gumbel")},
    "rayleigh": "A traced scale: scale * {rng}.rayleigh(1.0, size) draws the same numbers and is differentiated.",
}


def _named(node, frame):
    """The object a name or attribute chain (``rng``, ``self.rng``, ``np.random``) stands for in
    ``frame``, items of lists, tuples and dicts included (``rngs[i]``, ``state["rng"]``: an integer or
    string key, a constant or a name), or None for any other expression (which is not evaluated again)."""
    steps = []
    while True:
        if type(node) is ast.Attribute:
            steps.append((True, node.attr))
        elif type(node) is ast.Subscript:
            key = node.slice
            if type(key) is ast.Constant:
                k = key.value
            elif type(key) is ast.Name:
                k = frame.f_locals.get(key.id, frame.f_globals.get(key.id))
            elif (type(key) is ast.UnaryOp and type(key.op) is ast.USub and type(key.operand) is ast.Constant
                  and type(key.operand.value) is int):
                k = -key.operand.value  # (rngs[-1])
            else:
                return None
            if isinstance(k, np.integer):
                k = int(k)
            if type(k) not in (int, str):
                return None
            steps.append((False, k))
        else:
            break
        node = node.value
    if type(node) is not ast.Name:
        return None
    scope = frame.f_locals
    g = scope[node.id] if node.id in scope else frame.f_globals.get(node.id, frame.f_builtins.get(node.id))
    for attr, step in reversed(steps):
        if attr:
            g = getattr(g, step, None)
        elif type(g) in (list, tuple, dict):  # (no code of the program's runs: built-in containers only)
            try:
                g = g[step]
            except (IndexError, KeyError):
                return None
        else:
            return None
    return g


_MATH_TO_NUMPY = {"asin": "arcsin", "acos": "arccos", "atan": "arctan", "atan2": "arctan2", "asinh": "arcsinh",
                  "acosh": "arccosh", "atanh": "arctanh", "pow": "power", "fsum": "sum", "prod": "prod"}
_MATH_TO_SPECIAL = {"erf": "erf", "erfc": "erfc", "gamma": "gamma", "lgamma": "gammaln"}
_CMATH_TO_NUMPY = {"phase": "np.angle(z)", "polar": "(np.abs(z), np.angle(z))", "rect": "r * np.exp(1j * phi)",
                   "asin": "np.arcsin(z)", "acos": "np.arccos(z)", "atan": "np.arctan(z)", "asinh": "np.arcsinh(z)",
                   "acosh": "np.arccosh(z)", "atanh": "np.arctanh(z)", "log": "np.log(z) (np.log(z) / np.log(base))",
                   "isclose": "np.isclose(a, b)"}


_ROOT_FINDERS = frozenset(("brentq", "brenth", "ridder", "bisect", "toms748", "root_scalar", "fsolve", "root", "newton",
                           "newton_krylov", "anderson", "broyden1", "broyden2", "fixed_point"))
_CONVOLUTIONS = frozenset(("convolve", "convolve2d", "fftconvolve", "oaconvolve", "correlate", "correlate2d",
                           "gaussian_filter", "gaussian_filter1d", "uniform_filter", "uniform_filter1d",
                           "median_filter", "convolve1d", "correlate1d", "sobel", "laplace"))
_NDIMAGE_FILTERS = frozenset(("correlate1d", "convolve1d", "correlate", "convolve", "uniform_filter1d",
                              "uniform_filter", "gaussian_filter1d", "gaussian_filter", "sobel", "prewitt", "laplace",
                              "gaussian_laplace", "gaussian_gradient_magnitude"))  # (mutagrad.scipy.ndimage's)
_RANK_FILTERS = frozenset(("median_filter", "maximum_filter", "minimum_filter", "percentile_filter", "rank_filter"))
# mutagrad.scipy.ndimage's interpolations and Fourier filters: what else they are differentiated in
_NDIMAGE_DIFFERENTIATED = {"map_coordinates": "the coordinates and cval (spline orders 0 to 5, every mode)",
                           "shift": "the shift and cval (spline orders 0 to 5, every mode)",
                           "zoom": "cval, not the zoom factors (spline orders 0 to 5, every mode)",
                           "fourier_shift": "the shift", "fourier_gaussian": "sigma", "fourier_uniform": "the size",
                           "fourier_ellipsoid": "the size",
                           "affine_transform": "the matrix, the offset and cval (spline orders 0 to 5, every mode)",
                           "rotate": "the angle and cval (spline orders 0 to 5, every mode)",
                           "spline_filter1d": "", "spline_filter": ""}
_INTERPOLATIONS = frozenset(("zoom", "map_coordinates", "shift", "rotate", "affine_transform",
                             "geometric_transform", "spline_filter"))
_OPTIMIZERS = frozenset(("minimize", "minimize_scalar", "fmin", "fmin_bfgs", "fmin_cg", "fmin_l_bfgs_b", "fmin_powell",
                         "fmin_tnc", "basinhopping", "differential_evolution", "dual_annealing", "shgo", "brute"))
_QUADRATURES = frozenset(("quad", "quad_vec", "dblquad", "tplquad", "nquad", "fixed_quad", "quadrature",
                          "romberg"))
# SciPy functions whose results are indices, labels or an assignment: constant under a small change of the values
_INDEX_RESULTS = frozenset(("linear_sum_assignment", "find_peaks", "find_peaks_cwt", "argrelextrema", "argrelmax",
                            "argrelmin", "label", "find_objects", "connected_components", "fcluster", "fclusterdata",
                            "leaves_list", "maximum_bipartite_matching", "min_weight_full_bipartite_matching",
                            "reverse_cuthill_mckee", "breadth_first_order", "depth_first_order"))


_SIGNAL_REWRITES = {
    "sosfilt": "Use mutagrad.scipy.signal.sosfilt(sos, x, axis=, zi=) (the same arguments, SciPy's values to "
               "rounding), differentiated in sos, x and zi.",
    "filtfilt": "Use mutagrad.scipy.signal.filtfilt(b, a, x, axis=, padtype=, padlen=, method=, irlen=) (the same "
                "arguments, SciPy's values to rounding), differentiated in b, a and x.",
    "sosfiltfilt": "Use mutagrad.scipy.signal.sosfiltfilt(sos, x, axis=, padtype=, padlen=) (the same arguments, "
                   "SciPy's values to rounding), differentiated in sos and x.",
    "stft": "Frame the signal (np.lib.stride_tricks.sliding_window_view(x, n)[::hop]), multiply by the "
            "window and take np.fft.rfft along the last axis: differentiated.",
    "hilbert": "Use mutagrad.scipy.signal.hilbert(x, N=, axis=) (the same arguments, SciPy's values), "
               "differentiated.",
    "resample": "Resample in Fourier space, as SciPy does (1-D, no window): X = np.fft.rfft(x); Y = X[:m // 2 + 1] "
                "(downsampling) or X padded with zeros to m // 2 + 1 bins (upsampling); the Nyquist bin of an "
                "even length counts twice (Y[m // 2] *= 2 when downsampling to an even m, Y[n // 2] *= 0.5 when "
                "upsampling from an even n); np.fft.irfft(Y, m) * (m / n): SciPy's values to rounding, "
                "differentiated.",
    "sepfir2d": "sepfir2d(x, hrow, hcol) is a separable convolution with symmetric boundaries (odd kernel "
                "lengths): mutagrad.scipy.signal.convolve2d(np.pad(x, ((len(hcol) // 2,) * 2, (len(hrow) // 2,) * 2), "
                "mode='symmetric'), np.outer(hcol, hrow), mode='valid'), SciPy's values to rounding, differentiated.",
    "detrend": "Linear detrending is the residual of a least-squares line: A = np.vander(np.arange(n), 2); "
               "x - A @ np.linalg.lstsq(A, x)[0] (type='constant': x - np.mean(x)), SciPy's values to "
               "rounding, differentiated.",
    "lfilter_zi": "Use mutagrad.scipy.signal.lfilter_zi(b, a) (SciPy's linear system, solved with np.linalg.solve: "
                  "its values to rounding), differentiated in b and a.",
    "sosfilt_zi": "Use mutagrad.scipy.signal.sosfilt_zi(sos) (SciPy's formula: its values to rounding), "
                  "differentiated in sos.",
    "lfiltic": "With a and b divided by a[0]: zi[m] = sum over k of b[m + 1 + k] * x[k] - a[m + 1 + k] * y[k] "
               "(the past inputs x and outputs y, most recent first, indices below len(a)), differentiated.",
}
_SIGNAL_REWRITES.update({  # (the responses and LTI objects: the sysid tester)
    name: ("A step or impulse response is a simulation: mutagrad.scipy.signal.lsim(system, U, T) with U = "
           "np.ones_like(T) (step) of a (num, den), (z, p, k) or (A, B, C, D) tuple (an impulse: the state-space "
           "system's response to X0 = B[:, 0] with no input, lsim((A, B, C, D), None, T, X0=B[:, 0])), or for a "
           "discrete one mutagrad.scipy.signal.dlsim with a tuple (..., dt): differentiated.")
    for name in ("step", "step2", "impulse", "impulse2", "dstep", "dimpulse")})
_SIGNAL_REWRITES.update({
    name: ("A frequency response is mutagrad.scipy.signal.freqs(b, a, worN=w) (continuous) or freqz(b, a, worN=w) "
           "(discrete), with magnitude 20 * np.log10(np.abs(h)) and phase np.unwrap(np.angle(h)): differentiated.")
    for name in ("bode", "dbode", "freqresp", "dfreqresp")})
_SIGNAL_REWRITES.update({
    name: ("SciPy's LTI classes hold their coefficients as plain arrays: pass the system as a tuple, (num, den), "
           "(z, p, k) or (A, B, C, D) (with dt last for a discrete one), to mutagrad.scipy.signal's cont2discrete, "
           "lsim, dlsim, tf2ss, ss2tf...: differentiated.")
    for name in ("lti", "dlti", "TransferFunction", "StateSpace", "ZerosPolesGain")})
_SIGNAL_REWRITES["spectrogram"] = (
    _SIGNAL_REWRITES["stft"] + " Average |X|**2 over the frames for a power spectrum (SciPy's values also "
    "subtract each frame's mean first, detrend='constant', divide by fs * np.sum(win ** 2), and double the "
    "one-sided bins other than 0 and Nyquist); mutagrad.scipy.signal.welch and periodogram are differentiated.")


_METRICS = {  # (a distance of two vectors u, v, in NumPy operations: scipy.spatial.distance's formulas)
    "euclidean": "np.linalg.norm(u - v)", "sqeuclidean": "np.sum((u - v) ** 2)",
    "cityblock": "np.sum(np.abs(u - v))", "chebyshev": "np.max(np.abs(u - v))",
    "minkowski": "np.sum(np.abs(u - v) ** p) ** (1 / p)",
    "cosine": "1 - u @ v / (np.linalg.norm(u) * np.linalg.norm(v))",
    "correlation": "1 - uc @ vc / (np.linalg.norm(uc) * np.linalg.norm(vc)) with uc = u - np.mean(u), "
                   "vc = v - np.mean(v)",
    "braycurtis": "np.sum(np.abs(u - v)) / np.sum(np.abs(u + v))",
    "canberra": "np.sum(np.abs(u - v) / (np.abs(u) + np.abs(v)))",
    "seuclidean": "np.sqrt(np.sum((u - v) ** 2 / V))", "mahalanobis": "np.sqrt((u - v) @ VI @ (u - v))",
}
_PAIRS = ("the pairs u = A[:, None, :], v = B[None, :, :] reduced along axis=-1: sqeuclidean np.sum((u - v) ** 2, "
          "axis=-1) and euclidean its np.sqrt (whose derivative is infinite at a zero distance: add a small "
          "constant inside, or write a kernel of the squared distance), cityblock np.sum(np.abs(u - v), axis=-1), "
          "chebyshev np.max(np.abs(u - v), axis=-1), minkowski np.sum(np.abs(u - v) ** p, axis=-1) ** (1 / p), "
          "cosine 1 - np.sum(u * v, axis=-1) / (np.linalg.norm(u, axis=-1) * np.linalg.norm(v, axis=-1))")
_DISTANCES = {
    "cdist": f"cdist(A, B, metric) is the metric of {_PAIRS}",
    "pdist": f"pdist(X, metric) is the upper triangle D[np.triu_indices(n, 1)] of the metric of {_PAIRS} (A = B = X)",
    "squareform": "squareform(d) of a condensed vector is a matrix filled by D = np.zeros_like(d, shape=(n, n)); "
                  "D[np.triu_indices(n, 1)] = d; D = D + D.T",
    "directed_hausdorff": (f"directed_hausdorff(A, B)[0] is np.max(np.min(D, axis=1)) of the Euclidean distances D "
                           f"of {_PAIRS} (its derivative is one-sided where two distances tie)"),
}
for _d in ("distance_matrix", "minkowski_distance", "minkowski_distance_p"):
    _DISTANCES[_d] = _DISTANCES["cdist"].replace("cdist(A, B, metric)", f"{_d}(A, B, p)")
for _d, _f in _METRICS.items():
    _DISTANCES[_d] = f"{_d}(u, v) of two vectors is {_f}"
_ROTATION = ("A Rotation holds plain numbers: write the rotation matrix of the traced parameters with NumPy operations, "
             "which are differentiated: from a quaternion q = (x, y, z, w) (SciPy's scalar-last order), q = q / "
             "np.linalg.norm(q) and R = np.stack([1 - 2 * (y*y + z*z), 2 * (x*y - z*w), 2 * (x*z + y*w), "
             "2 * (x*y + z*w), 1 - 2 * (x*x + z*z), 2 * (y*z - x*w), 2 * (x*z - y*w), 2 * (y*z + x*w), "
             "1 - 2 * (x*x + y*y)]).reshape(3, 3); from a rotation vector r, mutagrad.scipy.linalg.expm(K) of its "
             "skew matrix K = [[0, -r2, r1], [r2, 0, -r0], [-r1, r0, 0]] (np.stack of the entries); from Euler "
             "angles, the product of the axes' matrices; r.apply(X) is X @ R.T; align_vectors(a, b) is the Kabsch "
             "rotation of mutagrad.scipy.linalg.orthogonal_procrustes (or np.linalg.svd of b.T @ a).")
_SPATIAL_REWRITES = {
    **dict.fromkeys(("from_quat", "from_rotvec", "from_euler", "from_matrix", "from_mrp", "from_davenport",
                     "as_matrix", "as_quat", "as_rotvec", "as_euler", "apply", "align_vectors", "magnitude",
                     "Rotation"), _ROTATION),
    "procrustes": ("procrustes(A, B) standardizes both (centred, divided by their Frobenius norms) and rotates B "
                   "onto A by the orthogonal Procrustes rotation: mutagrad.scipy.linalg.orthogonal_procrustes, or "
                   "u, s, vt = np.linalg.svd(B.T @ A); R = u @ vt, both differentiated (away from repeated "
                   "singular values); the disparity is np.sum((A - B @ R * np.sum(s)) ** 2) of the standardized "
                   "A and B."),
    "geometric_slerp": ("The spherical interpolation of unit vectors p0, p1 at t is (np.sin((1 - t) * w) * p0 + "
                        "np.sin(t * w) * p1) / np.sin(w) with w = np.arccos(np.clip(p0 @ p1, -1, 1)), "
                        "differentiated (for w away from 0)."),
}
_SPATIAL_INDICES = {
    "KDTree": ("A k-d tree's neighbours are indices, piecewise constant in the points: build the tree on the plain "
               "values, tree = {name}(mg.value(x)), and compute the distances of the pairs it finds from the traced "
               "x, which are differentiated (i, j = tree.query_pairs(r, output_type='ndarray').T; "
               "np.linalg.norm(x[i] - x[j], axis=1); for d, k = tree.query(y, n): np.linalg.norm(y[:, None] - "
               "x[k], axis=-1))."),
    "Delaunay": ("A {name}'s simplices (vertices, regions) are indices, piecewise constant in the points: compute it "
                 "on mg.value(x) and the geometry from the traced x at those indices, which is differentiated (a "
                 "triangle's area from a, b, c = x[s[:, 0]], x[s[:, 1]], x[s[:, 2]]: 0.5 * np.abs((b - a)[:, 0] * "
                 "(c - a)[:, 1] - (b - a)[:, 1] * (c - a)[:, 0]); a 2-D hull's area by the shoelace formula over "
                 "p = x[hull.vertices]: 0.5 * np.abs(np.sum(p[:, 0] * np.roll(p[:, 1], -1) - np.roll(p[:, 0], -1) "
                 "* p[:, 1])))."),
}
for _n in ("cKDTree",):
    _SPATIAL_INDICES[_n] = _SPATIAL_INDICES["KDTree"]
for _n in ("ConvexHull", "Voronoi", "HalfspaceIntersection", "SphericalVoronoi"):
    _SPATIAL_INDICES[_n] = _SPATIAL_INDICES["Delaunay"]
for _n in ("query", "query_ball_point", "query_pairs", "query_ball_tree", "count_neighbors",
           "sparse_distance_matrix"):  # (a tree's methods given traced points)
    _SPATIAL_INDICES[_n] = _SPATIAL_INDICES["KDTree"].replace("{name}", "KDTree")
_RANKS = ("{} of the ranks is piecewise constant in the data (its derivative is zero wherever it has one): "
          "call it on mg.stop_gradient(x) for its value; a differentiable surrogate (a soft rank, Pearson's "
          "np.corrcoef of the values) is another function.")
def _scipy_distribution(name) -> bool:
    """Whether scipy.stats' ``name`` is a distribution (norm, halfcauchy), not a statistic (tmean)."""
    import scipy.stats

    return isinstance(getattr(scipy.stats, name, None), (scipy.stats.rv_continuous, scipy.stats.rv_discrete))


_STATS_REWRITES = {
    "tmean": "tmean(x, (lo, hi)) is np.mean(x[(x >= lo) & (x <= hi)]) (inclusive=(False, False): > and <), "
             "differentiated.",
    "theilslopes": "The Theil-Sen slope is np.median of the pairwise slopes: i, j = np.triu_indices(n, 1); "
                   "np.median((y[j] - y[i]) / (x[j] - x[i])) (pairs with x[j] != x[i]), differentiated; its "
                   "intercept (SciPy's method='separate') np.median(y) - slope * np.median(x).",
    "siegelslopes": "The repeated-medians slope is np.median over i of np.median over j != i of (y[j] - y[i]) / "
                    "(x[j] - x[i]): S = (y[None] - y[:, None]) / (x[None] - x[:, None] + np.eye(n)), "
                    "np.median(np.nanmedian(np.where(np.eye(n) == 1, np.nan, S), axis=1)), differentiated.",
    "entropy": "scipy.stats.entropy(pk) is np.sum(entr(p)) of p = pk / np.sum(pk) (along axis=0 as SciPy's; "
               "entr and rel_entr from mutagrad.scipy.special, differentiated); with qk, np.sum(rel_entr(p, q)) of "
               "the normalized q too; base=b divides by np.log(b).",
    "iqr": "The interquartile range is np.percentile(x, 75) - np.percentile(x, 25) (axis= as SciPy's), "
           "SciPy's value, differentiated.",
    "scoreatpercentile": "scoreatpercentile(x, p) is np.percentile(x, p), differentiated.",
    "trim_mean": "With k = int(proportiontocut * n): np.mean(np.sort(x)[k:n - k]) (along an axis: "
                 "np.sort(x, axis) sliced there), SciPy's value, differentiated.",
    "trimboth": "trimboth(x, p) keeps the elements of np.sort(x)[k:n - k] with k = int(p * n) (SciPy leaves them "
                "partitioned, not sorted), differentiated.",
    "median_abs_deviation": "The median absolute deviation is np.median(np.abs(x - np.median(x))) (times "
                            "scale=), differentiated.",
    "winsorize": "winsorize(x, limits=p) of a 1-D x is np.clip(x, s[k], s[n - 1 - k]) with s = np.sort(x) and "
                 "k = int(p * n) (limits=(lo, hi): k = int(lo * n) below, int(hi * n) above), SciPy's values (as a "
                 "plain, not masked, array), differentiated.",
    "trimmed_mean": "mstats.trimmed_mean(x, limits=(lo, hi)) of a 1-D x is np.mean(np.sort(x)[a:n - b]) with a = "
                    "int(lo * n), b = int(hi * n) (SciPy's default limits=(0.1, 0.1), inclusive: its rounding), "
                    "differentiated.",
    "variation": "The coefficient of variation is np.std(x) / np.mean(x), differentiated.",
    "sem": "The standard error of the mean is np.std(x, ddof=1) / np.sqrt(n), differentiated.",
    "zscore": "The z-score is (x - np.mean(x)) / np.std(x) (ddof=0), differentiated.",
    "skew": "The (biased) skewness is np.mean((x - m) ** 3) / np.std(x) ** 3 with m = np.mean(x), differentiated.",
    "kurtosis": "The (biased, Fisher) kurtosis is np.mean((x - m) ** 4) / np.var(x) ** 2 - 3 with m = "
                "np.mean(x), differentiated.",
    "rankdata": _RANKS.format("rankdata"),
    "spearmanr": _RANKS.format("spearmanr"),
    "kendalltau": _RANKS.format("kendalltau"),
}
_EIGH_FUNCTION = ("of a symmetric (Hermitian) matrix: w, V = np.linalg.eigh(a); (V * {f}) @ V.conj().T, "
                  "differentiated where the eigenvalues are distinct (repeated ones: docs/errors.md)")
_LINALG_REWRITES = {
    "funm": "A matrix function " + _EIGH_FUNCTION.format(f="func(w)") + ".",
    "signm": "The matrix sign " + _EIGH_FUNCTION.format(f="np.sign(w)") + ".",
    **dict.fromkeys(("qz", "ordqz", "schur", "rsf2csf"), (
        "A (generalized) Schur form's basis of a subspace (Blanchard-Kahn, Klein: the stable eigenvalues) is "
        "differentiated through its eigenvectors instead: the pencil's eigenpairs w, V = np.linalg.eig("
        "np.linalg.solve(B, A)) (or of the inverted pencil, np.linalg.solve(A, B), whose eigenvalues are 1/λ, "
        "where B is singular), the stable ones selected on the plain values, their span V[:, stable]; or solve "
        "the policy matrix directly by a fixed-point iteration or cyclic reduction on traced values "
        "(P = -np.linalg.solve(A @ P + B, C) until it converges), which is differentiated. mg.stop_gradient "
        "would make the policy's derivative zero.")),
    "rq": ("RQ of a square a is QR of its flipped transpose: p = np.flipud(np.eye(n)); q, r = "
           "np.linalg.qr((p @ a).T); R = p @ r.T @ p; Q = p @ q.T (R @ Q == a; SciPy's factors are these up to the "
           "signs of R's columns and Q's rows, as LAPACK leaves them: d = np.sign(np.diag(R)); R * d, d[:, None] * Q "
           "makes R's diagonal positive), differentiated."),
}
_INTEGRATE_REWRITES = {
    "trapezoid": "Use np.trapezoid(y, x, dx=, axis=) instead (the same rule and arguments), differentiated.",
    "trapz": "Use np.trapezoid(y, x, dx=, axis=) instead (the same rule and arguments), differentiated.",
    "cumulative_trapezoid": ("The cumulative trapezoid rule is np.cumsum((y[1:] + y[:-1]) / 2 * np.diff(x)) (dx * "
                             "... for a spacing dx; initial=0: np.concatenate([[0.0], ...])), differentiated."),
    "cumtrapz": ("The cumulative trapezoid rule is np.cumsum((y[1:] + y[:-1]) / 2 * np.diff(x)) (dx * ... for a "
                 "spacing dx), differentiated."),
    "simpson": ("Simpson's rule on an odd number of equally spaced points is dx / 3 * (y[0] + 4 * np.sum(y[1:-1:2]) "
                "+ 2 * np.sum(y[2:-1:2]) + y[-1]) (SciPy's rule, its value to rounding), differentiated; on unequally "
                "spaced x (an odd number of points), with h0, h1 = np.diff(x)[0::2], np.diff(x)[1::2]: np.sum((h0 + "
                "h1) / 6 * ((2 - h1 / h0) * y[:-2:2] + (h0 + h1) ** 2 / (h0 * h1) * y[1:-1:2] + (2 - h0 / h1) * "
                "y[2::2])) (SciPy's too; for an even number of points SciPy corrects the last interval); or "
                "np.trapezoid(y, x)."),
    "romb": ("Romberg's table on 2**k + 1 equally spaced points is built from np.trapezoid of the subsampled "
             "y[::2**j] with Richardson's weights (R[j, m] = R[j, m-1] + (R[j, m-1] - R[j-1, m-1]) / (4**m - 1)), "
             "differentiated."),
}
_ITERATIVE_SOLVERS = frozenset(("lsqr", "lsmr"))  # (the Krylov solvers of square systems are differentiated)
_ODE_SOLVERS = frozenset(("solve_ivp", "odeint", "ode", "RK45", "RK23", "DOP853", "Radau", "BDF", "LSODA"))


_PIECEWISE_CUBICS = frozenset(("CubicSpline", "PPoly", "PchipInterpolator", "Akima1DInterpolator",
                               "CubicHermiteSpline"))
_SPLINE_COEFFICIENTS = (
    " For a piecewise-cubic spline SciPy already made from plain data (CubicSpline, PPoly), evaluate its own "
    "coefficients: k = np.clip(np.searchsorted(s.x, t) - 1, 0, len(s.x) - 2); d = t - s.x[k]; ((s.c[0, k] * d + "
    "s.c[1, k]) * d + s.c[2, k]) * d + s.c[3, k] (SciPy's values to rounding, differentiated in t).")


def _scipy_fft_has(short):
    fft = sys.modules.get("scipy.fft")
    return fft is not None and short in getattr(fft, "__all__", ())


def _composite_module(rules, short):
    """The SciPy module (``scipy.spatial.distance``) whose function ``short`` mutagrad.scipy's rules module
    ``rules`` (rules/scipy/spatial.py: its COMPOSITES) writes, or None."""
    import importlib

    names = importlib.import_module(f"mutagrad.rules.scipy.{rules}").COMPOSITES
    return next((c.rsplit(".", 1)[0] for c in names if c.rsplit(".", 1)[1] == short), None)


def _scipy_rewrite(sub, name):
    """The NumPy (or mutagrad.scipy) rewrite of a SciPy function without a rule, or ""."""
    sub = sub or ""  # (None: a private module's function, scipy._lib's)
    short = name.rsplit(".", 1)[-1]
    if sub == "signal" and short in _SIGNAL_REWRITES:
        return " " + _SIGNAL_REWRITES[short]
    if sub == "signal" and (name.startswith("windows.") or short == "get_window"):
        return (" SciPy computes its windows on plain numbers: write the window's formula with NumPy operations of "
                "the traced parameter, which are differentiated (a Tukey window of M samples and taper alpha: "
                "n = np.arange(M); w = np.ones(M); edge = n < alpha * (M - 1) / 2, w = np.where(edge, 0.5 * (1 + "
                "np.cos(np.pi * (2 * n / (alpha * (M - 1)) - 1))), w) and its mirror image at the end), and pass "
                "the samples as the window (mutagrad.scipy.signal's welch, periodogram, csd and coherence take "
                "traced samples); or mg.stop_gradient of the parameter.")
    if sub == "fftpack" and short in ("rfft", "irfft"):
        return (f" scipy.fftpack.{short} packs its real spectrum in its own order (r0, r1, i1, r2, i2...); "
                f"scipy.fft.{short}(...) (complex bins) computes the same transform and is differentiated: "
                "rewrite with it (the packed form of scipy.fft.rfft's y: p = np.stack([y.real, y.imag], axis=-1)"
                ".ravel(); np.concatenate([p[:1], p[2:n + 1]]) for n points).")
    if sub == "fftpack" and _scipy_fft_has(short):
        return (f" scipy.fftpack is SciPy's legacy module: scipy.fft.{short}(...) computes the same transform "
                "(the same arguments) and is differentiated.")
    if sub == "fftpack":
        return (" scipy.fftpack is SciPy's legacy module, with no derivative rules: write the operation with "
                "scipy.fft's or np.fft's transforms, which are differentiated.")
    if sub.startswith("sparse") and short == "laplacian":
        return (" SciPy's Laplacian of a dense traced weight matrix W is np.diag(W.sum(axis=0)) - W (the in-degree; "
                "use_out_degree=True: axis=1), differentiated; normed=True: with Wz = W less its diagonal, d = "
                "Wz.sum(axis=0) and s = np.sqrt(np.where(d > 0, d, 1.0)), np.diag(d > 0) - Wz / np.outer(s, s).")
    if sub.startswith("sparse") and short == "expm_multiply":  # (start=, stop=, num=: its interval algorithm)
        return (" Without start=, stop= and num=, expm_multiply(A, b) of a sparse constant A is differentiated in "
                "b (SciPy's own code, products of A with b): pass a dense A as scipy.sparse.csr_array(A) (its "
                "products with a plain ndarray A convert b), or compute mutagrad.scipy.linalg.expm(A) @ b; for "
                "several times, call it once per time: np.stack([expm_multiply(t * A, b) for t in "
                "np.linspace(start, stop, num)]).")
    if sub.startswith("sparse") and short == "validate_graph":  # (a compiled csgraph routine's check)
        return (" scipy.sparse.csgraph's graph routines run on plain values. A path's length (shortest_path, "
                "dijkstra...) is a sum of the weights along a path chosen by comparisons: find the paths on "
                "mg.value(W) (return_predecessors=True) and sum the traced W along them, which is "
                "differentiated, or relax the distances on the traced weights with np.minimum.at (Bellman-Ford) "
                "or a soft minimum (np.logaddexp); a result that is piecewise constant in the weights "
                "(connected_components, a tree's edges) has derivative 0: call the routine on mg.value(W).")
    if sub == "integrate" and short in _INTEGRATE_REWRITES:
        return " " + _INTEGRATE_REWRITES[short]
    if sub == "special" and short in ("comb", "perm"):  # (popgen tester: comb(N, k) of a traced N)
        return (" scipy.special.binom(n, k), a ufunc, is comb(n, k) with exact=False, differentiated in n and k."
                if short == "comb" else
                " perm(n, k) with exact=False is scipy.special.poch(n - k + 1, k), a ufunc, differentiated.")
    if sub == "fft":
        return (f" scipy.fft.{short} is differentiated through SciPy's dispatch (uarray), by a backend mutagrad "
                "registers, which SciPy asks before its own global one; a backend the program chose comes first "
                "and computes on plain values: one set with scipy.fft.set_backend(...) (a `with` block, SciPy's "
                "\"scipy\" too), one made global with scipy.fft.set_global_backend(...) without try_last=True, "
                "or SciPy's alone (set_backend(..., only=True)). Call it outside that block (set_global_backend(\"scipy\", "
                "try_last=True) restores SciPy's default)" + (f", or use np.fft.{short}(...)." if hasattr(np.fft, short)
                                                            else "."))
    if short in _DISTANCES:
        where = _composite_module("spatial", short)
        if where is not None:  # (mutagrad.scipy.spatial: the same call, differentiated)
            return (f" Call mutagrad.{where}.{short} (the same names and arguments: import mutagrad.{where} as ...), "
                    f"which is differentiated; or write it with NumPy operations: {_DISTANCES[short]}.")
        return f" Write the distances with NumPy operations, which are differentiated: {_DISTANCES[short]}."
    if sub.startswith("spatial") and short in _SPATIAL_REWRITES:
        return " " + _SPATIAL_REWRITES[short]
    if sub == "interpolate" and short in ("LinearNDInterpolator", "griddata"):
        return (" Interpolate on the triangulation with NumPy operations, differentiated in the values (and the "
                "points): on the plain query points xi, s = tri.find_simplex(xi) and the barycentric coordinates "
                "T = tri.transform[s]; b = np.einsum('nij,nj->ni', T[:, :2], xi - T[:, 2]); bary = "
                "np.c_[b, 1 - b.sum(axis=1)]; then np.sum(values[tri.simplices[s]] * bary, axis=1) (tri = "
                "scipy.spatial.Delaunay(points) on plain points).")
    if sub == "spatial" and (short in _SPATIAL_INDICES or name.split(".", 1)[0] in _SPATIAL_INDICES):
        cls = short if short in _SPATIAL_INDICES else name.split(".", 1)[0]
        return " " + _SPATIAL_INDICES[cls].format(name=cls)
    if short in _ODE_SOLVERS:
        return (" Integrate with explicit steps written in NumPy, which are differentiated: a fixed-step "
                "RK4 loop (k1 = f(t, y); k2 = f(t + h/2, y + h/2 * k1); ...; y = y + h/6 * (k1 + 2*k2 + "
                "2*k3 + k4)) into a preallocated array (ys = mnp.zeros((n, y0.size)), import mutagrad.numpy as mnp: "
                "a traced buffer even where y0 is a plain constant; ys[i] = y); for adaptive steps, choose them "
                "on plain values (a run with mg.value(p)) and take the same steps traced.")
    if sub == "interpolate":
        return (" mutagrad.scipy.interpolate differentiates the interpolating splines (CubicSpline, "
                "PchipInterpolator, Akima1DInterpolator, make_interp_spline and BSpline, interp1d, "
                "RegularGridInterpolator and interpn): an interpolating spline is make_interp_spline(x, y, k) "
                "there. Else evaluate the interpolant with NumPy operations, which are differentiated: "
                "np.interp(t, xp, fp) for a linear one (in t, xp and fp)." + _SPLINE_COEFFICIENTS)
    if sub == "stats" and name.startswith("Covariance."):
        return (" A scipy.stats.Covariance keeps plain arrays, except those from_cholesky(L) and from_precision(P) "
                "make of traced ones, which mutagrad.scipy.stats.multivariate_normal differentiates. Otherwise "
                "pass it the covariance matrix itself (cov=...), which is differentiated: cov=d for "
                "from_diagonal(d) (a vector is the diagonal), cov=(V * w) @ V.T for from_eigendecomposition((w, V)).")
    if sub == "stats" and "." in name and short in _DISTRIBUTION_SUMMARIES:  # (norm(...).entropy, norm.mean)
        dist, meth = name.rsplit(".", 1)
        dist = dist.removesuffix("(...)")
        return (f" Write the {meth} of {dist} from its parameters with NumPy operations (its closed form), "
                "which are differentiated; mutagrad.scipy.stats differentiates the densities and distribution "
                "functions (docs/coverage.md).")
    if sub == "stats" and short in _STATS_REWRITES and "(...)" not in name:
        return " " + _STATS_REWRITES[short]
    if sub == "linalg" and short in _LINALG_REWRITES:
        return " " + _LINALG_REWRITES[short]
    if sub == "sparse.linalg" and name.startswith("LinearOperator."):
        return (" Call the product the operator wraps on the traced vector yourself (the matvec function given "
                "to LinearOperator, or A @ x for the matrix it was made from), which is differentiated where it "
                "is written with NumPy operations.")
    if sub == "sparse.linalg" and short in ("eigsh", "eigs", "svds", "lobpcg"):
        return (" For eigenpairs of a matrix that depends on traced values, form it dense and use "
                "np.linalg.eigh(A) (the k smallest: w, V = np.linalg.eigh(A); w[:k], V[:, :k]), np.linalg.eig, "
                "or np.linalg.svd for svds: differentiated where the eigenvalues "
                "(singular values) are distinct; a constant sparse matrix's eigenpairs need no derivative "
                "(mg.stop_gradient).")
    if sub == "sparse.linalg" and short == "LinearOperator":  # (its dtype found by a product with zeros)
        return (" Without dtype=, SciPy finds a LinearOperator's dtype by applying its matvec to a zero vector, "
                "as plain numbers: a matvec that computes with traced values (a preconditioner of a traced "
                "matrix) is refused there. Give it dtype=float (or the traced values' dtype): "
                "mutagrad.scipy.sparse.linalg's Krylov solvers take a preconditioner that computes with traced "
                "values (its values: a preconditioner shapes the iteration, not the solution); an operator A "
                "that does must be a traced dense matrix.")
    if sub == "sparse.linalg" and short in _ITERATIVE_SOLVERS:
        return (f" mutagrad.scipy.sparse.linalg differentiates the Krylov solvers of square systems (cg, gmres, "
                f"bicgstab, minres...), not {short}: for the least-squares solution solve the normal equations, "
                "mutagrad.scipy.sparse.linalg.cg(A.T @ A, A.T @ b) (add damp**2 * I for damp=), or use "
                "np.linalg.lstsq(A, b) for a dense A, which are differentiated; for a square A, "
                "mutagrad.scipy.sparse.linalg.gmres(A, b) or spsolve(A, b).")
    if sub == "stats" and "." not in name and not _scipy_distribution(short):
        return (f" scipy.stats.{short} converts its arguments to plain arrays: write the statistic with NumPy "
                "operations (np.sort, np.median, np.mean of a masked selection...), which are differentiated.")
    if sub == "stats":
        return (" Write the log-density of a distribution not listed with NumPy operations and "
                "mutagrad.scipy.special (gammaln, betaln, xlogy), which are differentiated: a half-Cauchy is "
                "mutagrad.scipy.stats.cauchy.logpdf(x, 0, s) + np.log(2) for x >= 0, an inverse gamma "
                "a log(b) - gammaln(a) - (a + 1) log(x) - b / x.")
    if sub == "ndimage" and short in _NDIMAGE_DIFFERENTIATED:
        return (" Use mutagrad.scipy.ndimage in place of scipy.ndimage (import mutagrad.scipy.ndimage): "
                f"mutagrad.scipy.ndimage.{short} is the same function (the same arguments, SciPy's values), "
                f"differentiated in the input{' and ' if _NDIMAGE_DIFFERENTIATED[short] else ''}"
                f"{_NDIMAGE_DIFFERENTIATED[short]}.")
    if short in _INTERPOLATIONS:
        return (" mutagrad.scipy.ndimage.map_coordinates(im, coords, order=...) (import mutagrad.scipy.ndimage) "
                "interpolates at any coordinates you compute, differentiated in both; or interpolate with NumPy "
                "operations, which are differentiated with respect to the image and the coordinates: linear "
                "interpolation at y is i = np.floor(y).astype(int), w = y - i, "
                "im[i] * (1 - w) + im[i + 1] * w along each axis (bilinear in 2-D: the four neighbours "
                "im[i, j], im[i + 1, j], ... by fancy indexing, i and j clipped to the image, or wrapped with "
                "np.mod(i, n) for a periodic mode='grid-wrap' or 'wrap').")
    if sub == "ndimage" and short in _NDIMAGE_FILTERS:
        return (f" Use mutagrad.scipy.ndimage in place of scipy.ndimage (import mutagrad.scipy.ndimage): "
                f"mutagrad.scipy.ndimage.{short} is the same function (the same arguments, SciPy's values), "
                "differentiated in the input, the weights or sigma, and cval.")
    if sub == "ndimage" and short in _RANK_FILTERS:
        # (SciPy's median of an even count is the upper middle value, and its percentile a rank, int(n * q / 100):
        # not np.median's and np.percentile's interpolations)
        pick = {"median_filter": "size ** x.ndim // 2", "maximum_filter": "-1", "minimum_filter": "0",
                "percentile_filter": "min(int(size ** x.ndim * q / 100), size ** x.ndim - 1)",
                "rank_filter": "rank"}[short]
        note = {"median_filter": " (for an even count SciPy takes the upper of the two middle values, not their "
                                 "mean as np.median does)",
                "percentile_filter": " (SciPy's rank for q percent, not np.percentile's interpolation)"}.get(short, "")
        return (f" Use mutagrad.scipy.ndimage.{short} (import mutagrad.scipy.ndimage: the same function and "
                "arguments, SciPy's values), which is differentiated in the input and cval (each output the "
                "element its window selects, a tie shared evenly); or write it with NumPy operations:"
                f" a {short} with a scalar size (SciPy's default mode='reflect' and origin=0) picks one value of "
                "each sorted window of the padded array, which is differentiated: w = "
                "np.lib.stride_tricks.sliding_window_view(np.pad(x, (size // 2, (size - 1) // 2), mode='symmetric'), "
                "(size,) * x.ndim) (SciPy's mode 'reflect' is np.pad's 'symmetric'; an even size pads one less "
                f"after), s = np.sort(w.reshape(x.shape + (-1,)), axis=-1), then s[..., {pick}]{note}.")
    if sub == "ndimage" and _composite_module("ndimage_rank", short) is not None:  # (the rank filters' others)
        return (f" Use mutagrad.scipy.ndimage.{short} (import mutagrad.scipy.ndimage: the same function and "
                "arguments, SciPy's values), which is differentiated in the input, cval and a structure (each "
                "output the element its window selects, a tie shared evenly).")
    if sub == "signal" and short in ("medfilt", "medfilt2d"):
        return (f" {short} is the median over the windows of the zero-padded array, which is differentiated: "
                "np.median(np.lib.stride_tricks.sliding_window_view(np.pad(x, k // 2), (k,) * x.ndim), "
                "axis=tuple(range(x.ndim, 2 * x.ndim))) for an odd scalar kernel_size k (np.pad pads zeros, as "
                f"{short} does).")
    if sub == "ndimage" and short in ("generic_laplace", "generic_gradient_magnitude", "generic_filter",
                                      "generic_filter1d"):
        return (f" SciPy's {short} calls the function it is given on plain arrays. mutagrad.scipy.ndimage's "
                "laplace, gaussian_laplace and gaussian_gradient_magnitude are differentiated; a filter of "
                "your own: a function of np.lib.stride_tricks.sliding_window_view(np.pad(x, ...), shape) "
                "(its windows), or of shifted slices, which is differentiated.")
    if short in _CONVOLUTIONS:
        return (" Write the filter with NumPy operations on the traced values, which are differentiated: "
                "np.convolve / np.correlate in 1-D, sums of shifted slices or of "
                "np.lib.stride_tricks.sliding_window_view(x, shape) times the kernel, or a product in "
                "Fourier space (np.fft.rfft2 / np.fft.irfft2); or, for a kernel of odd size, "
                "mutagrad.scipy.signal.correlate(x, k, mode='same') (convolve likewise, also fftconvolve), "
                "which is mode='constant', and in 2-D mutagrad.scipy.signal.correlate2d(x, k, mode='same', "
                "boundary='wrap' or 'symm'), which is mode='wrap' or 'reflect': differentiated.")
    return ""


def _scipy_hint(sub, name):
    """The fix for a SciPy function mutagrad has no rule for, called on a traced value."""
    short = name.rsplit(".", 1)[-1]
    rewrite = _scipy_rewrite(sub, name)
    if rewrite:
        return rewrite
    if short in _ROOT_FINDERS:
        return (f" A root's derivative follows from the equation it solves: find the root on plain values "
                f"(pass mg.value(p) for the traced parameters to {short}), then take one Newton step on the "
                "traced ones, s = s - g(s, p) / dg_ds(s, p) (dg_ds by hand or with mg.grad): at the root it has "
                "the root's first derivative exactly, not its second; two steps have the first three (k steps, "
                "those up to order 2^k - 1: take two for a Hessian); or write Newton's iteration with NumPy "
                "operations, which is differentiated (a bisection's root is a fixed mix of its starting "
                "brackets: its derivative is theirs, not the root's, so end one with that Newton step); or make "
                "the solve a @mg.primitive with an "
                "implicit-function rrule (docs/rules.md).")
    if short in _OPTIMIZERS:
        return (f" The optimal value E*(p) = min_y E(y, p) has the derivative of E w.r.t. p at the minimizer (the "
                f"envelope theorem): run {short} on plain values (mg.value(p) for the traced parameters inside the "
                "objective), then return E(res.x, p) evaluated with the traced p, whose derivative is exact (the first "
                "one; the minimizer res.x itself moves with p by the implicit function theorem: a @mg.primitive "
                "with an implicit-function rrule, docs/rules.md, or its iterations written with NumPy "
                "operations, which are differentiated).")
    if short in _INDEX_RESULTS:
        return (f" {short} returns indices (an assignment, labels, positions), which do not change under a small "
                f"change of the values, so they carry no derivative: pass mg.value(x) to {short} and index the "
                "traced values with what it returns (C[r, c].sum() after linear_sum_assignment(mg.value(C))), "
                "which has the derivative at that choice, as with np.argsort's indices.")
    if short in _QUADRATURES:
        return (" Integrate with fixed nodes on the traced integrand instead: x, w = "
                "np.polynomial.legendre.leggauss(n) (plain nodes, mapped to [a, b]) and np.sum(w * f(x)), or "
                "np.trapezoid(f(x), x) on a grid; their derivative is that of the rule, exact for it.")
    if sub in ("ndimage", "signal", "linalg", "special", "stats", "sparse", "sparse.linalg"):
        return (f" mutagrad.scipy.{sub} (docs/coverage.md lists what it differentiates) has no rule for "
                f"{short}: write the computation with NumPy operations on the traced values, which are "
                "differentiated.")
    return (f" mutagrad has no derivative rules for scipy{'.' + sub if sub else ''}: write the computation "
            "with NumPy operations on the traced values (a filter as a loop over the elements, an ODE solver "
            "as explicit steps, an optimizer's iterations), which are differentiated.")


def _converting_call_error(call, user, conversion):
    """The error for a function the user's line calls (named, an attribute or an item: math.sqrt, F["sin"])
    that converts a traced value with ``conversion`` ("float", "complex"), naming the twin to call instead;
    None where the call is that conversion itself, or none is named."""
    if call is None or type(call.func) not in (ast.Name, ast.Attribute, ast.Subscript):
        return None
    name = ast.unparse(call.func)
    if name == conversion:
        return None
    if name.endswith("interp") and name != "mnp.interp":
        extra = (" np.interp dispatches on x, xp and fp only: with a traced left= or right= and plain "
                 "x, xp, fp, use mnp.interp(...) (import mutagrad.numpy as mnp), which is differentiated.")
    else:
        fn = _named(call.func, user)
        extra = _math_hint(fn, name)
        mod = getattr(fn, "__module__", None) or ""
        if not extra and mod.startswith("scipy."):
            extra = _scipy_hint(mod.split(".")[1], getattr(fn, "__name__", name))
    return escape_error(f"{name}(...) of a traced value (it converts it with {conversion}(x))", TracerEscapeError,
                        extra, specific=bool(extra))  # (the twin to call first)


def _math_hint(fn, name):
    """The fix for a function of the math (or cmath) module called on a traced value: its NumPy twin."""
    mod = getattr(fn, "__module__", None)
    if mod == "cmath" or (mod != "math" and name.startswith("cmath.")):
        short = getattr(fn, "__name__", name.rsplit(".", 1)[-1])
        twin = _CMATH_TO_NUMPY.get(short, f"np.{short}(z)" if hasattr(np, short) else None)
        if twin is None:
            return (f" The cmath module's functions take plain numbers only: write {name} with NumPy's functions, "
                    "which take traced values.")
        return (f" The cmath module's functions take plain numbers only: use {twin} instead of {name}(...), which "
                "takes traced values (of a real x, give NumPy a complex value, x + 0j, where cmath's result "
                "is complex: np.sqrt(-1.0) is nan).")
    if mod != "math" and not name.startswith("math."):
        return ""
    short = getattr(fn, "__name__", name.rsplit(".", 1)[-1])
    if short in _MATH_TO_SPECIAL:
        twin = f"mutagrad.scipy.special.{_MATH_TO_SPECIAL[short]}"
    elif hasattr(np, _MATH_TO_NUMPY.get(short, short)):
        twin = f"np.{_MATH_TO_NUMPY.get(short, short)}"
    else:
        return (f" The math module's functions take plain numbers only: write {name} with NumPy's functions, "
                "which take traced values.")
    return (f" The math module's functions take plain numbers only: use {twin}(...) instead of {name}(...), "
            "which takes traced values (a 0-d result where math gives a float).")


# NumPy's random methods whose draw is a differentiable transform of a standard variate,
# loc + scale * z as NumPy's own C code computes it (Generator and RandomState alike)
_RANDOM_REPARAMETERIZED = {
    "normal": "loc + scale * {rng}.standard_normal(size)",
    "lognormal": "np.exp(mean + sigma * {rng}.standard_normal(size)) (NumPy's np.exp may differ from the "
                 "generator's exp in the last bit)",
    "uniform": "low + (high - low) * {rng}.random(size)",
    "exponential": "scale * {rng}.standard_exponential(size)",
}
_NOARG = object()
_F64 = np.dtype(np.float64)
PYTHON_COMPLEX_ABS = [None, None]  # the primitives of abs() of a Python complex and of a NumPy complex
# scalar (rules.elementwise): both compute hypot, whose last bit differs from np.absolute's


SCALAR_OPS = {}  # ufunc -> primitive for NumPy scalars' own arithmetic (filled by rules)


def _is_scalar(x):
    return type(x) in _PLAIN_SCALARS or isinstance(x, np.generic) or (isinstance(x, Tracer) and x._scalar)


# Operators whose NumPy-scalar arithmetic gives the ufunc's bits (IEEE operations), at a
# tenth of the ufunc's cost on scalars; the fast path uses them for two float64 scalars.
_SCALAR_ARITHMETIC = {np.add: operator.add, np.subtract: operator.sub, np.multiply: operator.mul,
                      np.true_divide: operator.truediv}
# Python's operators that raise ZeroDivisionError where NumPy's give inf or nan (with a warning)
_ZERO_DIVIDING = {np.true_divide: operator.truediv, np.remainder: operator.mod, np.floor_divide: operator.floordiv}


def _python_zero_division(op, a, b):
    """Python's ZeroDivisionError for ``op(a, b)`` of Python numbers (a weak traced scalar stands for
    one) by zero, raised before NumPy computes (and warns about) its inf or nan: a plain call raises
    it, and a program catching it takes another path."""
    if _weak_operand(a) and _weak_operand(b):
        pb = _py(b)
        if pb == 0:
            op(_py(a), pb)
_F64_TYPES = frozenset((float, np.float64, complex, np.complex128))  # (NumPy scalars' own arithmetic: float64 and complex128)
# operands the fast path computes with the scalars' own operator, as a plain call does: NumPy
# scalars of every float and complex type (complex64 products differ from the ufunc loop's in
# the last bit), with a Python int too, as Python does for Python numbers (3 / z of a Python
# complex is Python's division, whose last bit differs from NumPy's)
_SCALAR_OP_TYPES = _F64_TYPES | {int, np.float32, np.float16, np.complex64, np.longdouble, np.clongdouble}


def ew_value(prim, vals, scalar_op=None):
    """An elementwise primitive's value on plain arguments; ``scalar_op``: its
    operator from ``_SCALAR_ARITHMETIC``, used when both are float64 scalars."""
    if scalar_op is not None and type(vals[0]) in _SCALAR_OP_TYPES and type(vals[1]) in _SCALAR_OP_TYPES:
        return scalar_op(vals[0], vals[1])  # what NumPy scalars' own operator computes
    return prim.elementwise[2](*vals)


def _pow_shortcuts():
    """``array ** e`` is not always ``np.power``: for some Python-number
    exponents NumPy calls ``np.square``, ``np.sqrt`` or ``np.reciprocal``
    instead, whose bits can differ (complex arrays; sqrt of longdouble). Which
    ones is read off NumPy itself: (dtype char, type of e, e) -> ufunc."""
    rng = np.random.default_rng(0)
    found = {}
    for dt in (np.float16, np.float32, np.float64, np.longdouble, np.complex64, np.complex128, np.clongdouble):
        probe = rng.uniform(0.1, 3.0, 256).astype(dt)
        if np.dtype(dt).kind == "c":
            probe = probe + 1j * rng.uniform(0.1, 3.0, 256).astype(dt)
        for e in (2, 2.0, -1, -1.0, 0.5):
            r = probe ** e
            if np.array_equal(r, np.power(probe, e)):
                continue
            for uf in (np.square, np.reciprocal, np.sqrt):
                if np.array_equal(r, uf(probe)):
                    found[(np.dtype(dt).char, type(e), e)] = uf
    return found


_POW_SHORTCUTS = _pow_shortcuts()


def _pow_shortcut(self, other):
    """The ufunc NumPy's ``array ** other`` calls instead of np.power, if any."""
    t = type(other)
    if t is int or t is float:
        return _POW_SHORTCUTS.get((bottom(self).dtype.char, t, other))
    return None


def _binop(ufunc):
    sop = _SCALAR_ARITHMETIC.get(ufunc)
    zd = _ZERO_DIVIDING.get(ufunc)
    pow_ = ufunc is np.power

    def scalar(self, a, b):
        """``a op b`` with traced scalar ``self`` one of them: NumPy scalars' own arithmetic,
        and Python's weak result where both are Python numbers or weak scalars."""
        if ufunc in SCALAR_OPS and _is_scalar(b if a is self else a):
            # NumPy scalars compute `a ** b` with their own C arithmetic, not the ufunc (an elementwise
            # primitive: the fast path, and a run's compact record in an element loop)
            prim = SCALAR_OPS[ufunc]
            r = _fast_call(prim.fn, self, a, b)
            if r is None:
                r = bind(prim, (a, b))
        else:
            if zd is not None:
                _python_zero_division(zd, a, b)
            r = _fast_call(ufunc, self, a, b, sop)
            if r is None:
                other = b if a is self else a
                if _defers(other):  # (__array_ufunc__ = None: its reflected operator)
                    return NotImplemented
                if ufunc is np.multiply and type(other) in (list, tuple):  # (a sequence's repetition, as
                    raise TypeError(  # NumPy scalars see it: [1] * s raises in a plain call)
                        f"can't multiply sequence by non-int of type 'numpy.{bottom(self).dtype.name}'")
                r = call_ufunc(ufunc, (a, b), {})
        if type(a) is complex and b is self and bottom(self).dtype == _F64:
            # Python's complex operator takes a np.float64 (a float subclass) itself: `z * s`
            # of a Python complex z is a Python complex, weak, in a plain call
            return _weak_result(r, ())
        return _weak_result(r, (a, b)) if weak(self) else r

    def op(self, other, mod=None):
        if mod is not None:  # pow(x, y, m): NumPy's values have no modular power either
            raise TypeError(f"unsupported operand type(s) for ** or pow(): "
                            f"'numpy.{bottom(self).dtype.name if self._scalar else 'ndarray'}', "
                            f"'{type(other).__name__}', '{type(mod).__name__}'")
        if self._scalar:
            return scalar(self, self, other)
        if pow_:
            uf = _pow_shortcut(self, other)
            if uf is not None:
                return call_ufunc(uf, (self,), {})
        # (no local for self._value: ReverseLevel._elide counts the references to the buffer)
        if (type(self._value) is _ndarray and self._value.nbytes >= ELIDE_BYTES) or (
                type(other) is ArrayTracer and _large(other)):
            # (elide.temporary is called from here: the depth at which elide counted references)
            lv = self._level
            f = _getframe(1)
            into = None
            if lv.mode == "rev":
                if temporary(self, f, f.f_code, 0, lv):
                    into = self
                elif type(other) is ArrayTracer and other._level is lv and temporary(other, f, f.f_code, 1, lv):
                    into = other
            return _large_call(ufunc, self, self, other, other, sop, into, f, lv)
        r = _fast_call(ufunc, self, self, other, sop)
        if r is None:
            if _defers(other):
                return _deferred(ufunc, self, other, False)
            return call_ufunc(ufunc, (self, other), {})
        return r

    def rop(self, other):
        if self._scalar:
            return scalar(self, other, self)
        if type(self._value) is _ndarray and self._value.nbytes >= ELIDE_BYTES:
            lv = self._level
            f = _getframe(1)
            into = self if lv.mode == "rev" and temporary(self, f, f.f_code, 1, lv) else None
            return _large_call(ufunc, self, other, self, other, sop, into, f, lv)
        r = _fast_call(ufunc, self, other, self, sop)
        if r is None:
            if _defers(other):
                return _deferred(ufunc, self, other, True)
            return call_ufunc(ufunc, (other, self), {})
        return r

    def iop(self, other):
        if self._scalar:  # NumPy scalars have no in-place operators: `s *= c` is `s = s * c`
            return op(self, other)
        if _duck(other):  # `y += duck`: NumPy's protocol asks the duck, and the name is bound to what it
            return ufunc(self, other, out=(self,))  # returns (a new wrapper, or y itself)
        uf = _pow_shortcut(self, other) if pow_ else None
        if uf is None and type(self) is ArrayTracer and self._geom is None and _plain_inplace(self, other) and (
                _fast_call(ufunc, self, self, other, None, self) is not None):
            return self  # (the common `u += v`: ufunc_call's checks all pass, and its _into takes it)
        call_ufunc(uf or ufunc, (self,) if uf else (self, other), {"out": (self,)})
        return self

    return op, rop, iop


def _plain_inplace(self, other) -> bool:
    """Whether ``self op= other`` is the common in-place call that NumPy accepts as it is: ``other`` a
    real Python number for a floating-point ``self``, or a tracer of ``self``'s dtype and shape (or
    0-d), no error state that raises (see rules/elementwise.ufunc_call's checks)."""
    t = type(other)
    if t is float or t is int:
        if self._value.dtype.kind not in "fc":
            return False
    elif t is ArrayTracer or t is ScalarTracer:
        v = other._value
        if v.dtype != self._value.dtype or (v.shape != self._value.shape and v.shape != ()):
            return False
    else:
        return False
    return not RAISES_FP[0]()


RAISES_FP = [lambda: True]  # rules/elementwise._raises_fp: whether a floating-point event raises here


def _defers(other) -> bool:
    """An operand an ndarray's operator returns NotImplemented for, so that Python asks its
    own reflected operator (``other.__radd__``): one that opts out of NumPy's ufuncs
    (``__array_ufunc__ = None``), or, as NumPy's legacy rule has it, an object without
    ``__array_ufunc__`` that claims a higher ``__array_priority__`` (scipy.sparse matrices)."""
    au = getattr(type(other), "__array_ufunc__", False)
    if au is None:
        return True
    return au is False and not isinstance(other, (_ndarray, np.generic, numbers.Number, list, tuple)) and (
        getattr(other, "__array_priority__", 0.0) > 0.0)


SPARSE_PRODUCT = [None]  # (is_sparse, is_matrix_product_operator, sparse_matmul) from rules/sparse.py


def _deferred(ufunc, self, other, reflected):
    """``self op other`` (``other op self`` if ``reflected``) for an ``other`` that an ndarray's
    operator defers to (:func:`_defers`): the product of a constant scipy.sparse matrix
    (``@``, and ``*`` of the spmatrix classes, a matrix product there; rules/sparse.py), else
    NotImplemented, so that Python asks ``other``'s own operator."""
    sp = SPARSE_PRODUCT[0]
    if sp is not None and (ufunc is np.matmul or ufunc is np.multiply) and sp[0](other) and (
            ufunc is np.matmul or sp[1](other)):
        return sp[2](other, self, not reflected)
    return NotImplemented


def _large_call(ufunc, self, a, b, other, sop, into, frame, lv):
    """``a op b`` on large arrays (one of them ``self``, the other ``other``): computed
    into the temporary ``into`` where it is one (elide.py), its result remembered for
    the next operator."""
    r = _fast_call(ufunc, self, a, b, sop, into=into)
    if r is None:
        if _defers(other):
            return _deferred(ufunc, self, other, b is self)
        r = call_ufunc(ufunc, (a, b), {})
    _note_result(r, frame, lv)
    return r


def _large(t) -> bool:
    """Whether ``t``'s value is an array NumPy would elide as a temporary (elide.py)."""
    v = t._value
    return type(v) is _ndarray and v.nbytes >= ELIDE_BYTES


def _note_result(r, frame, lv):
    """Remember a large traced result of an operator, which the next operator may elide."""
    if type(r) is ArrayTracer and r._level is lv and _large(r):
        note_result(r, frame, lv)


def call_ufunc(ufunc, inputs, kwargs):
    what = qualname(ufunc)
    _no_object_inputs(what, inputs)
    operands = _foreign_operands(what, inputs)
    if operands is None:  # a duck array (NDArrayOperatorsMixin): NumPy's protocol, which asks it with the
        return ufunc(*inputs, **kwargs)  # tracer (ours returns NotImplemented first), as ndarray's operators do
    if len(STATE.levels) > 1 and REGISTRY.get(ufunc) in NESTED_WATCH:  # (s **= 0.5: watched as np.sqrt(s))
        return UFUNC_HANDLERS[(ufunc, "__call__")](ufunc, _arrayify(operands), kwargs)
    return UFUNC_HANDLERS[(None, "__call__")](ufunc, _arrayify(operands), kwargs)


def scipy_sparse_object(x) -> bool:
    """Whether ``x`` is an object of scipy.sparse (a matrix, a factorization), by its type's
    module (SciPy is not imported for it)."""
    t = type(x)
    return t not in _PLAIN_SCALARS and t.__module__.startswith("scipy.sparse")


def _object_like(x) -> bool:
    """A plain operand NumPy computes with as Python objects: an object array, or a
    scipy.sparse matrix (one object to NumPy's functions)."""
    t = type(x)
    if t is ArrayTracer or t is ScalarTracer:  # (the common operand)
        return False
    return (t is _ndarray and x.dtype.kind == "O") or scipy_sparse_object(x)


def _object_item(seq, depth=0):
    """An object-like operand (:func:`_object_like`) in (nested) list or tuple ``seq``, or None."""
    for i in seq:
        if _object_like(i):
            return i
        ti = type(i)
        if (ti is list or ti is tuple) and depth < 4:
            obj = _object_item(i, depth + 1)
            if obj is not None:
                return obj
    return None


def _no_object_inputs(what, inputs):
    """A ufunc's inputs: an object array among them raises (:func:`_object_operand`)."""
    for x in inputs:
        if type(x) is _ndarray and x.dtype.kind == "O":
            raise _object_operand(what, x)


_KNOWN_OPERANDS = frozenset((list, tuple, range))


def _foreign_operands(what, inputs):
    """A ufunc's operands, each of a type that is no array, NumPy scalar, number or sequence
    (a user's object) made what NumPy makes of it: the array its ``__array__`` returns, a traced
    one included (``x + Field(x)``, a class wrapping a traced array), else ``np.asarray`` of it (a
    namedtuple's, a list subclass's or a deque's items as a list's; a number NumPy takes as one, a
    bool, an int subclass, as it is); one NumPy would compute with as a Python object (a 0-d object
    array: a scipy.sparse matrix, an object whose ``__rmul__`` NumPy calls per element) raises
    (:func:`_object_operand`), as its results carry no derivative. A ``fractions.Fraction`` with
    traced scalars only is the float64 it converts to, as a NumPy scalar and a Fraction compute
    (``s * Fraction(1, 3)``: float(s) * float(Fraction), a float64 for a float32 s too). None
    where an operand has an ``__array_ufunc__`` of its own (a duck array, NDArrayOperatorsMixin):
    NumPy's protocol is then to ask it, with the traced operand (:func:`ufunc_dispatch`)."""
    out = None
    for k, x in enumerate(inputs):
        t = type(x)
        if t is ArrayTracer or t is ScalarTracer or t in _PLAIN_SCALARS or t in _KNOWN_OPERANDS or issubclass(
                t, (_ndarray, np.generic, Tracer)) or x is None:
            continue
        if scipy_sparse_object(x):
            raise _object_operand(what, x)
        if _duck(x):  # (a duck array: NumPy asks it, with the tracer)
            return None
        a = None
        if issubclass(t, _SEQUENCE_OPERANDS):
            from .numpy import array

            a = array(list(x))
        elif getattr(t, "__array__", None) is not None:
            try:
                a = x.__array__()
            except TypeError:  # (an __array__ of another signature: NumPy's own call below)
                a = None
            if not isinstance(a, (Tracer, _ndarray)):
                a = None
        if a is None:
            a = np.asarray(x)  # (NumPy's own errors, as a plain call gives them)
            if isinstance(x, numbers.Number) and a.dtype.kind != "O":
                continue  # (a bool, an int or float subclass, an IntEnum: a number to NumPy, as it is)
        if type(a) is _ndarray and a.dtype.kind == "O":
            if type(x) is fractions.Fraction and not any(isinstance(v, (ArrayTracer, _ndarray)) for v in inputs):
                a = np.float64(float(x))  # (a NumPy scalar and a Fraction compute with float(Fraction))
            else:
                raise _object_operand(what, x)
        if out is None:
            out = list(inputs)
        out[k] = a
    return inputs if out is None else tuple(out)


_SEQUENCE_OPERANDS = (list, tuple, collections.UserList, collections.deque)


def _duck(x) -> bool:
    """A duck array: an object with an ``__array_ufunc__`` of its own (not an array, a NumPy scalar
    or a tracer), which NumPy's protocol asks to compute a ufunc among whose operands or outputs it is."""
    t = type(x)
    return getattr(t, "__array_ufunc__", None) is not None and not issubclass(t, (_ndarray, np.generic, Tracer))


_NDARRAY_AF = _ndarray.__array_function__


def _foreign_function(func, types, args, kwargs):
    """A NumPy function among whose arguments is an object of a type with an ``__array_function__`` of
    its own (a wrapper: pint's Quantity, a user's NEP 18 class): that implementation computes, as
    NumPy's protocol has it, on the traced arguments (it unwraps its objects and calls ``func``
    again, which reaches us with traced arrays and plain ones only). Asked here whatever the
    arguments' order (NumPy may have asked the wrapper first, with mutagrad's type among ``types``,
    which a NEP 18 check of the types it knows refuses), with the traced arrays' type shown as
    np.ndarray, the class they claim (``isinstance(x, np.ndarray)``): a rule run on the wrapper would
    compute with its plain contents, and the result, taken as plain, carried no derivative. Where
    every wrapper declines, so does this (NumPy's TypeError, as a plain call raises it; errors.error_note)."""
    leaves = _flatten_args(tuple(args) + tuple(kwargs.values()))[0]
    shown = tuple(dict.fromkeys(_ndarray if issubclass(t, Tracer) else t for t in types))
    for t in types:
        if issubclass(t, (_ndarray, Tracer)) or t.__array_function__ is _NDARRAY_AF:
            continue
        obj = next((a for a in leaves if type(a) is t), None)
        if obj is None:  # (deeper than lists and tuples: NumPy found it there)
            continue
        r = t.__array_function__(obj, func, shown, args, kwargs)
        if r is not NotImplemented:
            return r
    return NotImplemented


def _object_operand(what, x):
    """The error for a plain operand NumPy would compute with as Python objects (an object
    array, a scipy.sparse matrix among NumPy's functions): the results are objects, which
    carry no derivative."""
    from .errors import TracedTypeError

    solver = _calling_scipy(sys._getframe(1))
    if solver is not None and solver[1] == "sparse.linalg" and solver[0] in _ITERATIVE_SOLVERS:
        # (lsmr's np.result_type(A, b) of a traced b: the solver's own message, not its internals': cgls)
        return TracedTypeError(f"scipy.sparse.linalg.{solver[0]} of a traced array at {user_line()}:"
                               + _scipy_rewrite("sparse.linalg", solver[0]))
    if scipy_sparse_object(x):
        return TracedTypeError(
            f"{what} of a traced array and a scipy.sparse matrix at {user_line()}: NumPy's functions "
            "treat the matrix as one Python object (an object array), whose results carry no derivative. "
            "Use the matrix's own product, A @ x, x @ A or A.dot(x), which is differentiated.")
    if type(x) is _ndarray:
        if any(isinstance(i, Tracer) for i in x.flat[:64]):  # (an object array holding traced arrays: its items)
            return TracedTypeError(
                f"{what} of an array of dtype object holding traced values at {user_line()}: NumPy computes with "
                "its items as Python objects, whose results carry no derivative. Pass its items as a list, "
                "list(a) (np.concatenate(list(a)), np.stack(list(a))), which is differentiated.")
        return TracedTypeError(
            f"{what} of a traced array and an array of dtype object at {user_line()}: NumPy computes with its "
            "items as Python objects, whose results carry no derivative. Convert it to numbers first "
            "(a.astype(float)).")
    name = type(x).__qualname__
    if isinstance(x, numbers.Number):
        return TracedTypeError(
            f"{what} of a traced value and a {name} number at {user_line()}: NumPy takes a {name} as a Python "
            "object (with an array: an array of dtype object), whose results carry no derivative (a plain call "
            f"computes objects, or refuses the types). Convert it to a float first: float(d).")
    return TracedTypeError(
        f"{what} of a traced array and a {name} object at {user_line()}: NumPy takes the {name} as one Python "
        "object (an array of dtype object) and computes with it by its Python operators, element by element; "
        f"those results carry no derivative. Convert the {name} to numbers first (np.asarray of its values), "
        "or give its class an __array__ method returning them.")


def _no_setattr(name):
    def setter(self, value):
        raise MutationError(
            f"setting .{name} of a traced array in place at {user_line()} cannot be "
            f"differentiated. Use x = x.reshape(...) / x.astype(...) / x.view(...) to get a new array."
        )

    return setter


def _raw_memory_attribute(name, x, cls=None):
    from .errors import TracedAttributeError

    cls = cls or TracedAttributeError
    if x._level.closed:
        return _leftover_memory(name, cls)
    return cls(
        f"x.{name} (the raw memory of a traced array) at {user_line()}: raw memory carries no derivative. For "
        f"the values as a read-only plain array use mg.value(x) (mg.value(x).{name} is its memory; "
        "np.array(mg.value(x)) a writable copy); NumPy's functions and operators take the traced array itself.")


def _leftover_memory(name, cls):
    """The error for the raw memory of a value a finished differentiation left (core.live): the
    array it holds is np.asarray(y), whose memory that is."""
    return cls(f"y.{name} at {user_line()} of a value left from a finished differentiation (a leftover, "
               "docs/errors.md): it is no ndarray itself, and its memory is the array np.asarray(y) gives; "
               f"use np.asarray(y).{name}.")


_NO_VALUES = np.empty(0)


@functools.cache
def _like_twins():
    """NumPy's creation functions that take ``like=`` -> their mutagrad.numpy twins, which make a traced array
    (NumPy calls like='s __array_function__ with the function, its other arguments, and no like=)."""
    from . import numpy as mnp

    names = ("empty", "zeros", "ones", "full", "array", "asarray", "asanyarray", "ascontiguousarray",
             "asfortranarray", "require", "arange", "identity", "eye", "fromiter")
    return {getattr(np, n): getattr(mnp, n) for n in names}


class Tracer:
    """A value being differentiated. Behaves like ``numpy.ndarray`` (or, for
    a NumPy scalar, like the scalar: no ``len``, no iteration).

    Scalars are instances of :class:`ScalarTracer` and arrays of
    :class:`ArrayTracer` (``TRACERS[scalar](...)`` makes one), each with
    the indexing, ``len`` and iteration of what it stands for.
    """

    __slots__ = ("_value", "_level", "_storage", "_geom", "_scalar", "__weakref__")
    __array_priority__ = 1000.0

    def __init__(self, value, level=None, storage=None, geom=None, scalar=False):
        if level is None:  # type(x)(v) of a traced x: the user's call of the class, as np.float64(v)
            _called_as_its_type(self, value)
        self._value = value
        self._level = level
        self._storage = storage
        self._geom = geom
        self._scalar = scalar

    # -- NumPy protocols ----------------------------------------------------

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        if kwargs and len(inputs) == 2 and method == "__call__" and len(kwargs) <= 2:
            p = _plain_inplace_operand(inputs, kwargs)
            if p is not None and p[1] == _INPLACE_REFS[0].get(ufunc is np.matmul):
                r = _promoted_inplace(ufunc, inputs, p[0], sys._getframe(1))
                if r is not None:
                    return r
        if method == "__call__" and not kwargs and 0 < len(inputs) <= 2:
            if ufunc is np.absolute or ufunc is np.fabs:  # (|z| at 0 beside a comparison's tie: note_zero_kink)
                r = abs_watched(self, ufunc)
                if r is not None:
                    return r
            if self._scalar and len(inputs) == 2 and inputs[1] is self and isinstance(inputs[0], np.generic) and (
                    ufunc in _SCALAR_REFLECTED) and at_an_operator(sys._getframe(1), _SCALAR_REFLECTED[ufunc][0]):
                # `c ** s`, `c * s` of a NumPy scalar c: NumPy's scalar operator hands a traced s to
                # the ufunc, whose last bit can differ from the scalar arithmetic it does on two
                # NumPy scalars (complex products, powers): compute what a plain call computes
                return _SCALAR_REFLECTED[ufunc][1](self, inputs[0])
            r = _fast_call(ufunc, self, inputs[0], inputs[1] if len(inputs) == 2 else _NOARG)
            if r is not None:
                return r
        return ufunc_dispatch(ufunc, method, inputs, kwargs)

    def __array_function__(self, func, types, args, kwargs):
        if len(types) > 1:
            for t in types:
                if not issubclass(t, (_ndarray, Tracer)) and t.__array_function__ is not _NDARRAY_AF:
                    # (an ndarray subclass, astropy's Quantity too, hands the call to ndarray's in the
                    # end: kept to the subclass handling, subclass_error)
                    return _foreign_function(func, types, args, kwargs)
        return function_dispatch(func, args, kwargs)

    def __array__(self, dtype=None, copy=None):
        if self._level.closed:  # a leftover: the array it is (writable, as NumPy's asarray gives it)
            v = live(self)
            return np.array(v, dtype=dtype, copy=True) if copy else np.asarray(v, dtype=dtype)
        if self._may_convert():  # (print(np.asarray(x)) too)
            # a pristine constant (a non-differentiated argument, or computed from
            # such only, never written): its value, as a read-only copy. Anything
            # else raises: a conversion may also be NumPy's own code that expects
            # to write in place (ndarray.mean(out=...)) and would be silently lost
            b = bottom(self)
            _no_overwrite_by_scipy(sys._getframe(1))
            if _numpys_as_strided(sys._getframe(1).f_code):
                from .errors import note_strided_view

                note_strided_view()  # (a write through the view it makes is named as such)
            if (copy is not True and type(b) is _ndarray and (dtype is None or np.dtype(dtype) == b.dtype)
                    and self._plain_constant()):
                # np.asarray(p) of a constant: its memory, as NumPy's asarray returns p itself
                # (a copy showed old values once p was updated in place), read-only
                line = user_line()
                holder = _HandedOut(b, line)
                v = np.asarray(holder)  # (the base of the views NumPy makes of it: v, see _HandedOut)
                v.flags.writeable = False
                t = self
                ref = weakref.ref(holder)
                while isinstance(t, Tracer):
                    st = t._storage
                    if st.handed_out is None:
                        st.handed_out = line
                        st.handed_out_refs = [ref]
                    else:
                        st.handed_out_refs.append(ref)
                    t = t._value
                return v
            v = np.array(b, dtype=dtype)  # (an ndarray, also for a NumPy scalar)
            if copy is not True:  # (np.array(x) asks for a copy of its own, writable as NumPy's is)
                v.flags.writeable = False
            else:  # (a plain copy the program may fill with traced values later: named if it does)
                _note_plain_copy(v, sys._getframe(1))
            return v
        self._check_thread("np.asarray(x) (the array protocol)", sys._getframe(1))
        if _integer_draw(sys._getframe(1), dtype):
            # a parameter of a draw whose results are integers (rng.choice(n, p=w), rng.binomial,
            # rng.poisson, rng.integers' bounds...): they are piecewise constant in it, derivative
            # zero, as np.searchsorted's
            return np.array(bottom(self), dtype=dtype)
        if index_valued_call(sys._getframe(1)):  # np.argmax([abs(r[k]) for r in rows]): no derivative to lose
            return np.array(bottom(self), dtype=dtype)
        caller = sys._getframe(1)
        if caller.f_code.co_name == "_matmul_dispatch" and caller.f_locals.get("other") is self and (
                caller.f_globals.get("__name__", "").startswith("scipy.sparse")):
            # SciPy's sign for an operand that is no array: a 0-d object array. It returns
            # NotImplemented, and Python asks the tracer's reflected operator (rules/sparse.py)
            return np.empty((), dtype=object)
        err = _scipy_escape(caller)
        if err is not None:
            raise err
        reducing = _reducing_an_object_array(caller)
        if reducing is not None:
            raise escape_error(
                f"np.{reducing} of an object array holding traced values (NumPy's mean converts their sum with "
                "np.float64(...), which takes the plain value)", TracerEscapeError,
                " Make the object array one traced array first: np.stack(a.tolist()) (or mnp.array(a.tolist()), "
                f"import mutagrad.numpy as mnp), then take np.{reducing} of it; for a mean, a.sum() / a.size is "
                "differentiated on the object array itself.", specific=True)
        if _numpys_as_strided(sys._getframe(1).f_code):
            raise NoRuleError(
                f"np.lib.stride_tricks.as_strided was applied to a traced array at {user_line()}: it "
                "builds an array from raw memory, which has no derivative rule. Use the views that "
                "are differentiated instead (their derivatives alias as the values do): "
                "np.lib.stride_tricks.sliding_window_view, np.broadcast_to, reshape, slicing, or "
                "mnp.as_strided(x, shape, strides) (import mutagrad.numpy as mnp), the same function "
                "for traced arrays."
            )
        if dtype is not None and np.dtype(dtype).kind in "biu" and self.dtype.kind in "fc":
            raise escape_error(
                f"converting a traced floating-point value to a plain {np.dtype(dtype)} array (np.asarray "
                f"with an integer dtype, or writing into an integer array)", WriteToPlainArrayError,
                integer=dtype)
        vec = _calling_vectorize(sys._getframe(1))
        if vec is not None:
            raise _vectorize_error(vec, sys._getframe(1))
        target = plain_write_target(sys._getframe(1))
        if target is not None:
            fields = _structured_target(target, user_frame(sys._getframe(1)))
            if fields is not None:
                raise _structured_error(target, fields)
            if _object_target(target, user_frame(sys._getframe(1))):
                raise escape_error(
                    f"writing traced values into the object array `{target}` by a slice, a mask or a list (NumPy "
                    "converts them with np.asarray first)", WriteToPlainArrayError,
                    " An element write stores the traced value itself (a[i] = v, for i, v in enumerate(values)); "
                    "better, hold them in a traced array, mnp.zeros(n) (import mutagrad.numpy as mnp) filled by "
                    "any write, or np.stack(values), on which NumPy's functions are differentiated.", specific=True)
            raise escape_error(f"writing a traced array into the plain NumPy array `{target}`", WriteToPlainArrayError,
                               _plain_copy_hint(target))
        frame = user_frame(sys._getframe(1))
        call = call_at(frame)
        it = getattr(call.func, "attr", getattr(call.func, "id", None)) if call is not None else None
        kind = it if it in _NUMPY_SCALAR_TYPES else None
        if kind is None and call is not None and type(call.func) is ast.Attribute:
            named = _named(call.func, frame)  # (P.dtype.type(x): a NumPy scalar type by another name)
            if isinstance(named, type) and issubclass(named, np.inexact) and named.__name__ in _NUMPY_SCALAR_TYPES:
                kind = named.__name__
        if kind is not None:
            spelled = ast.unparse(call.func)
            said = f"np.{kind}(x)" if spelled in (kind, f"np.{kind}", f"numpy.{kind}") else f"{spelled}(x), np.{kind}(x)"
            raise escape_error(f"{said} of a traced value (a plain NumPy scalar)", TracerEscapeError,
                               f" To change only the dtype, use x.astype(np.{kind}), which is differentiated.")
        if it == "concatenate" and _named(call.func, frame) is np.concatenate:
            # np.concatenate([theta, [c]]): NumPy dispatches on arrays only, and converts the list [c]
            raise escape_error(
                f"np.{it} of traced values inside a nested list or tuple (NumPy converts such a piece with "
                "np.asarray; it dispatches on arrays only)", TracerEscapeError,
                f" Make each piece an array first: np.{it}([theta, np.reshape(c, (1,))]) for a traced scalar "
                f"c, or mnp.{it}(...) (import mutagrad.numpy as mnp), which takes nested lists of traced "
                "values; np.append(theta, c) works too.", specific=True)
        callee = (_named(call.func, frame) if it in ("reduce", "accumulate", "reduceat", "outer", "at")
                  and isinstance(call.func, (ast.Name, ast.Attribute)) else None)
        if isinstance(getattr(callee, "__self__", None), np.ufunc):  # a ufunc's method
            listed = f"{qualname(callee.__self__)}.{callee.__name__}"
        else:  # np.maximum([a - b, c], 0.0), np.where(m, [a, b], 0.0): NumPy's C code converts the list
            # (NumPy's Python functions, np.mean([...]), np.piecewise, get their own messages below)
            fn = (_named(call.func, frame) if call is not None and isinstance(call.func, (ast.Name, ast.Attribute))
                  else None)
            if not isinstance(fn, np.ufunc) and not (call is not None and any(
                    type(a) in (ast.List, ast.Tuple) or (type(a) in (ast.Name, ast.Attribute) and isinstance(
                        _named(a, frame), (list, tuple))) for a in call.args)):
                # (a ufunc converts no traced operand of its own: what it converts is a sequence, whatever
                # expression made it, np.square(g(a, x)) of a function returning a tuple: the opticalflow tester)
                fn = None
            listed = ((f"np.{fn.__name__}" if getattr(np, fn.__name__, None) is fn else ast.unparse(call.func))
                      if (isinstance(fn, np.ufunc) or (
                callable(fn) and (getattr(fn, "__module__", None) or "").startswith("numpy")
                and getattr(np, getattr(fn, "__name__", ""), None) is fn)) and fn.__name__ not in _CONVERTERS
                and _calling_numpy_python(sys._getframe(1)) is None else None)
        if listed in ("np.nditer", "np.nested_iters"):  # (iterators over operands: np.stack would be another loop)
            raise escape_error(f"{listed} over traced arrays (it iterates plain memory)", TracerEscapeError,
                               " Loop over the indices instead: for i in np.ndindex(shape): a[i], b[i] (shape = "
                               "np.broadcast_shapes(a.shape, b.shape); np.broadcast_arrays(a, b) for operands of "
                               "other shapes), which is differentiated.", specific=True)
        if listed is not None:
            raise escape_error(
                f"{listed} of traced values inside a list or tuple (NumPy converts the sequence with np.asarray; "
                "it dispatches on arrays only)", TracerEscapeError,
                f" Make them one traced array first: {listed}(np.stack(values), ...) (or mnp.array(values), import "
                "mutagrad.numpy as mnp; nested lists and numbers too), which is differentiated.", specific=True)
        binop = call_at(frame, ast.BinOp) if call is None else None
        seq = None if binop is None else next((s for s in (binop.left, binop.right) if _a_sequence(s, frame)), None)
        if seq is not None:  # P * [a, b], w @ [x[0], x[1]]: the plain array's operator converts the list
            seq = ast.unparse(seq)
            raise escape_error(
                f"a list or tuple of traced values, {seq}, as an operand of the operator in `{ast.unparse(binop)}` "
                "(NumPy converts the sequence with np.asarray)", TracerEscapeError,
                f" Make it one traced array first: np.stack({seq}) (or mnp.array({seq}), import mutagrad.numpy "
                "as mnp; nested lists and numbers too), which is differentiated.", specific=True)
        if it in ("permutation", "permuted"):
            fix = (" Permute the positions instead, which is differentiated and draws the same order from the "
                   "generator: np.take(x, rng.permutation(x.shape[axis]), axis) (x[rng.permutation(len(x))] "
                   "for axis 0)." if it == "permutation" else
                   " Permute the positions instead, which is differentiated and draws the same orders from the "
                   "generator: np.take_along_axis(x, rng.permuted(i, axis=axis), axis), i the positions along "
                   "the axis broadcast to x's shape (np.indices(x.shape)[axis]).")
            raise escape_error(f"rng.{it}(x) of a traced array (the generator converts it to a plain array)",
                               TracerEscapeError, fix, specific=True)
        if it in _RANDOM_REPARAMETERIZED and isinstance(call.func, ast.Attribute):
            rng = ast.unparse(call.func.value)
            raise escape_error(
                f"{rng}.{it}(...) with a traced parameter (the generator converts its parameters to plain "
                "arrays)", TracerEscapeError,
                " Draw the standard variate and transform it, which is differentiated and gives the same "
                "numbers: " + _RANDOM_REPARAMETERIZED[it].format(rng=rng) + " (size: the draws' shape, the "
                "parameters' broadcast shape where the call gives no size=).", specific=True)
        if it == "choice" and _random_method(call, frame):
            raise escape_error(
                f"{ast.unparse(call.func.value)}.choice(x, ...) of a traced population x (the generator "
                "converts it to a plain array)", TracerEscapeError,
                " Draw the positions and gather them, which is differentiated and draws the same elements: "
                "np.take(x, rng.choice(x.shape[axis], size, ...), axis) (x[rng.choice(len(x), size, ...)] "
                "for axis 0), with the same replace=, p= and shuffle=.", specific=True)
        if (it in _GENERATOR_METHODS and isinstance(call.func, ast.Attribute) and type(call.func.value) is ast.Call
                and not _random_method(call, frame)):
            rng = ast.unparse(call.func.value)
            raise escape_error(
                f"{rng}.{it}(...) with a traced argument", TracerEscapeError,
                f" If {rng} is a NumPy random generator, name it first (rng = {rng}; rng.{it}(...)): mutagrad "
                "tells a generator's integer draws (which take traced parameters, derivative zero) and "
                "the other methods apart by the name, without calling the expression again.")
        if it is not None and isinstance(call.func, ast.Attribute) and _random_method(call, frame):
            rng = ast.unparse(call.func.value)
            raise escape_error(
                f"{rng}.{it}(...) with a traced parameter (the generator converts its parameters to plain "
                "arrays)", TracerEscapeError,
                ("" if it not in _RANDOM_TRANSFORMS else " " + _RANDOM_TRANSFORMS[it].format(rng=rng))
                + " Integer draws (choice with p=, binomial, poisson, multinomial...) take traced parameters "
                "(derivative zero); the other samplers' draws have no derivative w.r.t. their parameters. "
                "If the draws need no derivative w.r.t. the parameter, pass mg.stop_gradient(param).",
                specific=it in _RANDOM_TRANSFORMS)  # (the transform first, not the buffer advice: the enkf tester)
        if it == "arange" and isinstance(call.func, (ast.Attribute, ast.Name)):
            raise escape_error(
                "np.arange with a traced start, stop or step (it converts them to plain numbers)", TracerEscapeError,
                " Make the count from plain values and scale a plain range, which is differentiated in start "
                "and step: start + step * np.arange(n), n = int(np.ceil((mg.value(stop) - mg.value(start)) / "
                "mg.value(step))) (NumPy's values up to rounding); np.linspace(start, stop, num) takes traced "
                "ends.")
        if it in ("nditer", "ndenumerate"):
            raise escape_error(f"np.{it} over a traced array (it iterates plain memory)", TracerEscapeError,
                               _NDINDEX_HINT, specific=True)
        if (call is not None and isinstance(call.func, (ast.Name, ast.Attribute))
                and _named(call.func, frame) is np.broadcast):  # (by any name: from numpy import broadcast as B)
            raise escape_error("np.broadcast of traced arrays (it converts them to plain arrays)", TracerEscapeError,
                               " For its shape, np.broadcast_shapes(a.shape, b.shape) (ndim and size from it); for "
                               "the broadcast arrays, np.broadcast_arrays(a, b), which is differentiated.",
                               specific=True)
        if call is not None and type(call.func) is ast.Attribute and hasattr(np.ndarray, call.func.attr):
            # a method of a plain array given a traced argument (a.dot(b), idx.choose(x)): the method
            # converts it; the receiver is looked up only when it is a name or an attribute chain
            recv = _named(call.func.value, frame) if type(call.func.value) in (ast.Name, ast.Attribute) else None
            m = call.func.attr
            if (isinstance(recv, np.ndarray) and not isinstance(recv, Tracer)) or (recv is None and (m == "dot" or (
                    hasattr(np, m) and type(call.func.value) in (ast.Subscript, ast.Call)))):
                a = ast.unparse(call.func.value)
                a = a if type(call.func.value) in (ast.Name, ast.Attribute, ast.Subscript, ast.Call) else f"({a})"
                fix = {"dot": f" Write np.dot({a}, b) or {a} @ b, which are differentiated.",
                       "choose": f" Write np.choose({a}, choices), which is differentiated."}.get(
                    m, f" Write np.{m}({a}, ...), which is differentiated." if hasattr(np, m) else
                    " Make the array traced first (pass it as an argument), or write the operation with NumPy "
                    "functions of the traced value.")
                raise escape_error(f"a plain array's method {a}.{m}(...) with a traced argument (the method "
                                   "converts it to a plain array)", TracerEscapeError, fix)
        lib = _calling_numpy_python(sys._getframe(1))
        if getattr(sys._getframe(1).f_code, "co_qualname", "") == "poly1d.__array__" and (
                lib is None or not lib[0].startswith(("np.poly", "np.roots"))):  # (np.sum(p), np.asarray(p))
            raise escape_error(
                "a np.poly1d holding traced coefficients, converted to a plain array (np.asarray(p), np.sum(p): "
                "NumPy converts the poly1d)", TracerEscapeError,
                " Use its coefficients, which are traced: np.sum(p.coeffs), np.asarray(p) -> p.coeffs, "
                "np.polydiv(p.coeffs, q.coeffs) for p / q; calling it, p(x), and its arithmetic are "
                "differentiated.", specific=True)
        if lib is not None and lib[0] == "np.fill_diagonal":
            # (NumPy dispatches it on the array only: a plain one has the traced value converted)
            target = plain_call_target(user_frame(sys._getframe(1)))
            raise escape_error("np.fill_diagonal writing a traced value into a plain NumPy array" + (
                "" if target is None else f" `{target}`"), WriteToPlainArrayError, _plain_copy_hint(target))
        if lib is not None and lib[1]:
            fix = (f" Traced values inside a list or tuple: make them one traced array first: "
                   f"{lib[0]}(mnp.array(values)) (import mutagrad.numpy as mnp; nested lists too), or "
                   f"np.stack(values) of a flat list, which are differentiated.")
            short = lib[0].removeprefix("np.")
            if "." not in short and getattr(np, short, None) in FUNCTIONS:
                fix = (f" NumPy dispatches {lib[0]} on some of its arguments only: with a plain array there and "
                       "a traced value in another argument (constant_values=, weights=...) or in a function it "
                       f"calls (a closure over a traced parameter), use mnp.{short}(...) (import mutagrad.numpy "
                       f"as mnp), which looks at every argument, or pass the plain array to the differentiated "
                       "function as an argument (it then arrives traced)." + fix)
            if lib[0] == "np.piecewise":
                fix = (" A plain x whose functions return traced values (closures over a traced parameter): "
                       "use mnp.piecewise(x, condlist, funclist) (import mutagrad.numpy as mnp), whose result "
                       "is traced." + fix)
            if lib[0] in ("np.polyval", "np.polyder", "np.polyint", "np.polyadd", "np.polysub", "np.polymul",
                          "np.polydiv", "np.roots"):
                fix = (f" A np.poly1d p of traced coefficients: pass its coefficients, {lib[0]}(p.coeffs, ...), "
                       "or call it, p(x), which are differentiated." + fix)
            raise escape_error(
                f"{lib[0]} of traced values that NumPy's dispatch does not see (inside a list or tuple, or in an "
                "argument it does not dispatch on), so that its own code converts them with np.asarray",
                TracerEscapeError, fix, specific=True)  # (the fix names the call to make instead)
        if lib is not None:
            lib = lib[0]
            extra = (" mutagrad has no rule for it: write the computation with NumPy operations on the traced "
                     "values, which are differentiated.")
            if lib in ("np.full", "np.full_like"):
                extra = (" Use mnp.full(shape, x) (import mutagrad.numpy as mnp), which is differentiated "
                         "(mnp.full_like(a, x) for np.full_like), or x * np.ones(shape).")
            if lib in ("np.ndenumerate", "np.nditer"):
                extra = _NDINDEX_HINT
            if lib == "np.require":
                raise escape_error(f"{lib}(x) of a traced array x (it returns a plain ndarray)", TracerEscapeError,
                                   _CONVERTERS["require"], specific=True)
            if lib == "np.asarray_chkfinite":
                raise escape_error(f"{lib}(x) of a traced array x (it returns a plain ndarray)", TracerEscapeError,
                                   " x is an array already (a traced one): leave the conversion out, and test its "
                                   "values (if not np.all(np.isfinite(x)): raise ValueError(...)), which works on "
                                   "traced arrays.", specific=True)
            if lib == "np.ma.getdata":  # (code that takes masked or plain input: the maskedarrays tester)
                raise escape_error(
                    f"{lib}(x) of a traced array x (its plain-Python code converts it with np.asarray)",
                    TracerEscapeError,
                    " A traced array has no mask: its data is x itself. Take it as it is where x is not a masked "
                    "array: d = x.data if isinstance(x, np.ma.MaskedArray) else x.", specific=True)
            if lib.startswith("np.ma."):
                raise escape_error(
                    f"{lib} (a masked array holds plain data: NumPy's plain-Python code converts traced values "
                    "with np.asarray)", TracerEscapeError,
                    " Compute with the mask instead, which is differentiated: np.mean(x, where=~mask) (np.sum, "
                    "np.std, np.var too; np.max and np.min with initial=), np.where(mask, fill, x) for "
                    ".filled(fill), x[~mask] for .compressed().", specific=True)
            if lib.startswith("np.assert_"):  # (numpy.testing's: named np.testing's)
                raise escape_error(
                    f"np.testing.{lib[3:]} of a traced value (numpy.testing's plain-Python code converts it)",
                    TracerEscapeError, " It only compares values: compare mg.value of each traced argument, a read-only "
                    f"plain view (np.testing.{lib[3:]}(mg.value(y), ...)), or assert np.allclose(y, ref) / "
                    "np.array_equal(y, ref), which take traced values.", specific=True)
            if lib == "np.kaiser":
                extra = (" Use mnp.kaiser(M, beta) (import mutagrad.numpy as mnp): NumPy's formula, "
                         "differentiated in beta.")
            if lib.startswith("np.polynomial."):
                extra = _polynomial_fix(lib)  # (a differentiated mirror: no "no rule" first)
            raise escape_error(f"{lib} (NumPy's plain-Python code, which converts its arguments with np.asarray)",
                               TracerEscapeError, extra, specific=lib.startswith("np.polynomial."))
        converter = (_named(call.func, frame)
                     if call is not None and call.args and isinstance(call.func, (ast.Name, ast.Attribute)) else None)
        conv = getattr(converter, "__name__", None)
        pkg = None if frame is None else _installed_package(frame)
        if pkg is not None:  # (xarray's, pandas' own np.asarray: the advice on the conversion is not the user's)
            from .errors import _line_text, outside_installed_packages

            what = f"{pkg} converting a traced array to a plain one in its own code"
            err = escape_error(
                what, TracerEscapeError,
                f" {pkg}'s results would hold plain values, with no derivative. Compute the part to differentiate "
                f"with NumPy (or mutagrad.scipy) on the traced array itself, and give {pkg} only values that are "
                "constants." + _PACKAGE_HINTS.get(pkg, ""), specific=True)
            users = outside_installed_packages(frame)
            head = f"{what} at {user_line(frame)}: "
            if users is not None and str(err).startswith(head):
                # (named at the user's line, the one to change; the package's own line in parentheses)
                err.args = ((f"{what} (in {pkg} at {_line_text(frame.f_code.co_filename, frame.f_lineno)}) at "
                             f"{user_line(users)}: {str(err)[len(head):]}"),)
            raise err
        if conv in _CONVERTERS and converter is getattr(np, conv):
            it = conv  # (np.asarray by another name: conv = np.asarray; conv(rec))
            arg = call.args[0]
            held = _named(arg, frame) if type(arg) in (ast.Name, ast.Attribute) else None
            if type(arg) in (ast.List, ast.Tuple, ast.ListComp, ast.GeneratorExp) or isinstance(held, (list, tuple)):
                # np.asarray(rec) of a list of recorded traced arrays
                seq = ast.unparse(arg) if type(arg) in (ast.Name, ast.Attribute) else "[...]"
                raise escape_error(f"np.{it}({seq}) of a list of traced values (it makes a plain ndarray)",
                                   TracerEscapeError, f" Stack them instead: np.stack({seq}) (arrays of one shape) "
                                   f"or mnp.array({seq}) (import mutagrad.numpy as mnp; nested lists and numbers "
                                   "too), which are differentiated.", specific=True)
            if type(arg) is ast.Call and it in ("array", "asarray", "asanyarray") and _users_function(
                    _named(arg.func, frame) if isinstance(arg.func, (ast.Name, ast.Attribute)) else None):
                # np.array(cs(z)): what the call returned, one traced array or a tuple of them (kepler: the
                # message named x.copy(), which a tuple does not have)
                src = ast.unparse(arg)
                raise escape_error(
                    f"np.{it}({src}) of a traced array or of a list or tuple of traced values (it makes a plain "
                    "ndarray)", TracerEscapeError,
                    f" Use mnp.array({src}) (import mutagrad.numpy as mnp), which takes plain and traced values, "
                    f"arrays and lists or tuples of them, differentiated; or np.stack({src}) for a tuple of arrays "
                    f"of one shape{', or the array itself for one array' if it != 'array' else ''}.",
                    specific=True)
            # np.asarray(H @ x): a conversion of one traced array (named x unless it is a name already)
            name = ast.unparse(arg) if type(arg) in (ast.Name, ast.Attribute) else "x"
            fix = _CONVERTERS[it]
            if name != "x":
                fix = (fix.replace(" x ", f" `{name}` ").replace("(x)", f"({name})")
                       .replace("x.astype", f"{name}.astype").replace("x.copy", f"{name}.copy"))
            raise escape_error(f"np.{it}({name}) of a traced array (it returns a plain ndarray)", TracerEscapeError,
                               fix, specific=True, subject=name)
        mod = (getattr(converter, "__module__", None) or "") if callable(converter) else ""
        if mod == "scipy" or mod.startswith("scipy."):  # (a compiled SciPy function, scipy.signal.sepfir2d: no
            parts = mod.split(".")  # frame of its own, so _scipy_escape did not see it)
            sub = parts[1] if len(parts) > 1 and not parts[1].startswith("_") else None
            name = getattr(converter, "__name__", "?")
            raise escape_error(f"scipy{'.' + sub if sub else ''} function {name} (compiled code that converts its "
                               "arguments to plain arrays)", TracerEscapeError, _scipy_hint(sub, name), specific=True)
        if it == "__array__" and type(call.func) is ast.Attribute:  # x.__array__(), called by the program itself
            from .errors import TracedTypeError

            raise escape_error(
                f"{ast.unparse(call.func)}() (a conversion to a plain array)", TracedTypeError,
                " A traced array is an array already: use it as it is (np.* functions, operators and methods "
                "take it), or mg.value(x) for a read-only plain view of its values, which carries no "
                "derivative.", specific=True)
        if call is None and _calling_at(frame):  # (no source to read: the instruction tells a call from a write)
            raise escape_error(
                "a call converting a traced array to a plain one (np.asarray, np.array, np.ascontiguousarray... "
                "or compiled code that converts its arguments; the source of this line cannot be read, so the "
                "call is not named)", TracerEscapeError,
                " The array it converts is traced already: leave the conversion out (.astype(dtype) for another "
                "dtype, .copy(order='C' or 'F') for a layout); in code that also runs on plain values, call "
                "mnp.asarray (or mnp.ascontiguousarray, mnp.asfortranarray, mnp.require; import mutagrad.numpy as "
                "mnp), which keep a traced array traced.", specific=True,
                subject="...")
        raise escape_error(
            "np.asarray / np.array (or np.asanyarray, np.ascontiguousarray, np.asfortranarray, "
            "np.require, or writing into a plain NumPy array)", WriteToPlainArrayError,
            " To change only the layout or dtype of a traced array, use x.copy(order='C' or 'F') "
            "or x.astype(dtype), which are differentiated.")

    def _check_thread(self, what=None, frame=None):
        """Raise if this value belongs to a differentiation another thread is running: a
        differentiation started in this thread cannot nest in it (its derivative buffers are
        not traced by that one), and plain code here cannot take its value. ``what``: the
        conversion asked for (float(x)...), None for a differentiation or an operation; ``frame``:
        the conversion's caller, where it may be a write into a plain array."""
        lv = self._level
        if not lv.closed and lv.thread is not None and lv.thread != _get_ident() and STATE.lent != lv.thread:
            from . import errors

            errors.owned_by(lv.thread)  # (that differentiation raises it if the worker catches it)
            target = None if frame is None or STATE.levels else plain_write_target(frame)
            if target is not None:
                raise errors.escape_error(
                    f"writing a value traced by a differentiation that another thread is running into the plain "
                    f"array `{target}`, in this thread", errors.WriteToPlainArrayError,
                    " A worker thread runs no differentiation of its own, so the buffers it makes (np.zeros, and "
                    "mnp.zeros too, which makes traced buffers in the thread that runs the differentiation) are "
                    f"plain arrays, which cannot hold derivatives. Make `{target}` from a traced value "
                    "(np.zeros_like(x, shape=...), which is traced wherever it runs), or make it in the "
                    "differentiated function before starting the workers.", specific=True,
                    where=errors.differentiated_function())
            if what is not None and not STATE.levels:  # (this thread runs no differentiation of its own)
                raise errors.escape_error(
                    f"{what} of a value traced by a differentiation that another thread is running, in this "
                    "thread", errors.TracerEscapeError,
                    " A worker thread may apply NumPy operations to traced values, not turn them into plain "
                    "numbers: an array made of traced values is np.stack(values) or mnp.array(values) (nested "
                    "lists and numbers too; import mutagrad.numpy as mnp), which are differentiated, in a worker "
                    "too; otherwise convert in the differentiated function itself (where the same conversion is "
                    "refused for the same reason), or, if the worker only needs the number and no derivative "
                    "through it, pass it mg.stop_gradient(x).", specific=True, where=errors.differentiated_function())
            raise errors.escape_error(
                "a value traced by a differentiation that another thread is running (and started before this "
                "thread's), used in this thread's differentiation", errors.TracerEscapeError,
                " Differentiations nest within one thread: call the inner mg.grad (jvp, vjp...) in the function "
                "the outer one differentiates, not in a worker thread it starts (plain NumPy operations on "
                "traced values in a worker are fine). If the derivative through the value is not needed (two "
                "independent differentiations sharing a cache), keep a plain copy where it is made "
                "(np.array(mg.value(v))) and use that here.", specific=True,
                where=errors.differentiated_function())

    def _elsewhere_write(self):
        """The error for a write into a value of another thread's independent differentiation (see
        elsewhere): this one sees it as a constant, which that one would go on to read."""
        from .errors import MutationError

        return MutationError(
            f"writing at {user_line()} into an array traced by a differentiation that another thread is running "
            "(it was left where this thread's differentiation reaches it: a shared cache, a global): this "
            "thread's differentiation takes that thread's values as constants, and the write would change "
            "what that one computes from. Write into a copy (np.array(mg.value(a))), or keep the array out of "
            "shared state.")

    def _may_convert(self):
        """A conversion to plain values (float(x), np.asarray(x), x.item()...) is allowed: of a
        pristine constant, or in a statement that only prints or logs (its caller's caller)."""
        if self._plain_constant():
            note_plain_read(self)  # (float(np.round(t, 8)), a cache's key: see note_plain_read)
            return True
        return printing_statement(sys._getframe(2))

    def _plain_constant(self):
        t = live(self)
        while isinstance(t, Tracer):
            s = t._storage
            if not s.pristine:
                return False
            if s.active if t._level.mode == "rev" else (s.tangent is not None or s.poison is not None):
                return False
            t = t._value
        return True

    def _not_one(self):
        """Whether the value is an array of one or more dimensions, which float(x), int(x) and
        complex(x) refuse in a plain call too (NumPy's TypeError, "only 0-dimensional arrays can be
        converted to Python scalars": no derivative lost, and a program may catch it as it does there)."""
        b = bottom(self)
        return type(b) is _ndarray and b.ndim > 0

    # A pristine constant may be read as plain values: nothing is lost.
    # Anything that carries (or may come to carry) a derivative raises.

    def __float__(self):
        if self._may_convert() or predicate_call(sys._getframe(1)) or index_valued_call(sys._getframe(1)) or (
                self._not_one()):
            # (index_valued_call: NumPy filling a list's array for np.argmax...; not one element:
            # NumPy's TypeError, as a plain call raises it)
            return float(bottom(self))
        frame = sys._getframe(1)
        if _integer_draw(frame, _F64):  # a scalar parameter of an integer draw (rng.poisson(lam))
            return float(bottom(self))
        if compared_in_a_test(frame, float):
            return float(bottom(self))  # (`if float(err) < tol: break`: into the test alone, which has no derivative)
        self._check_thread("float(x)")
        if storing_into_subscript(frame):  # NumPy converting for the write itself
            target = plain_write_target(frame)
            raise escape_error("writing a traced value into the plain NumPy array" + (
                "" if target is None else f" `{target}`"), WriteToPlainArrayError, _plain_copy_hint(target))
        stats = _calling_statistics(frame)
        if stats is not None:  # (statistics.fmean's math.fsum)
            raise _statistics_error(stats, "to plain numbers")
        vec = _calling_vectorize(frame)
        if vec is not None:  # (otypes=[float]: NumPy converts the function's traced results, and replaces
            raise note_escape(_vectorize_error(vec, frame))  # the error with its ValueError)
        call = call_at(user_frame(frame))  # (the call running: another lambda of the statement may .fill)
        if (call is None and "fill" in method_calls(frame)) or (
                call is not None and type(call.func) is ast.Attribute and call.func.attr == "fill"):
            raise escape_error("filling a plain NumPy array with a traced value (a.fill(x))", WriteToPlainArrayError,
                               _plain_copy_hint(plain_call_target(user_frame(frame))))
        err = _converting_call_error(call, user_frame(frame), "float")
        if err is not None:  # (a plain-number function: math.sqrt, F["sin"])
            if (frame.f_globals.get("__name__") or "") == "scipy.optimize._zeros_py":
                # SciPy's root finders' C code (brentq's) goes on after a failed conversion with
                # the error set, which makes later Python code fail at random: give it NaN, and
                # raise when the function returns (or what SciPy raises is replaced by this)
                from .errors import defer_escape

                defer_escape(err)
                return float("nan")
            raise err
        if at_an_operator(frame, "%"):  # ("loss %.3f" % x, kept: a printing statement converts above)
            from .errors import print_hint

            raise escape_error("formatting a traced value as text (%-formatting)", TracerEscapeError,
                               print_hint(frame), specific=True)  # (the buffer advice does not apply)
        raise escape_error("float(x) (or math.*)", TracerEscapeError,
                           TEST_HINT if in_a_test(user_frame(frame)) else _CONVERSION_HINT)

    def __int__(self):
        if self._not_one():
            if storing_into_subscript():
                raise ValueError("setting an array element with a sequence.")  # (NumPy's, for a plain array)
            return int(bottom(self))  # (NumPy's TypeError)
        if self._may_convert() or compared_in_a_test(sys._getframe(1), int):  # (`if int(n) > k:`, see __float__)
            return int(bottom(self))
        self._check_thread("int(x)")
        if storing_into_subscript():
            raise escape_error("writing a traced value into an integer array (NumPy converts it with int(x))",
                               integer=True)
        raise escape_error("int(x)", TracerEscapeError,  # (an integer: the buffer advice does not apply)
                           TEST_HINT if in_a_test(user_frame(sys._getframe(1))) else _CONVERSION_HINT, specific=True)

    def __complex__(self):
        if (self._may_convert() or index_valued_call(sys._getframe(1)) or predicate_call(sys._getframe(1))
                or self._not_one()):  # (cmath.isclose(z, w), cmath.isnan(z): a yes or no)
            return complex(bottom(self))
        self._check_thread("complex(x)")
        frame = sys._getframe(1)
        if storing_into_subscript(frame):  # NumPy converting for a write into a plain complex array
            target = plain_write_target(frame)
            raise escape_error("writing a traced value into the plain NumPy array" + (
                "" if target is None else f" `{target}`"), WriteToPlainArrayError, _plain_copy_hint(target))
        user = user_frame(frame)
        err = _converting_call_error(call_at(user), user, "complex")
        if err is not None:  # (a plain-number function: cmath.exp)
            raise err
        raise escape_error("complex(x)", TracerEscapeError,
                           " Build the complex value from the traced parts instead: a + 1j * b for complex(a, b), "
                           "x + 0j (or x.astype(complex)) for complex(x), which are differentiated.", specific=True)

    def __index__(self):
        from .errors import TracedTypeError

        call = call_at(user_frame(sys._getframe(1)))
        it = getattr(call.func, "id", None) if call is not None else None
        if it in ("bytes", "bytearray"):
            raise TracedTypeError(
                f"{it}(x) of a traced array at {user_line()}: its raw memory carries no derivative. For the "
                f"bytes of its value use mg.value(x).tobytes().")
        err = TracedTypeError(f"a traced floating-point value cannot be used as an index (or a count) at "
                              f"{user_line()}: convert it with int(...) of a constant, or index with integers.")
        err.plain_too = True  # (a NumPy float raises TypeError there too: operator.index(w) in a try is plain code's)
        raise err

    def item(self, *args):
        if self._may_convert() or (not args and np.size(bottom(self)) != 1):  # (not one element: NumPy's ValueError)
            return bottom(self).item(*args)
        if compared_in_a_test(sys._getframe(1), "item"):  # (`if err.item() < tol:`: into the test alone, see __float__)
            return bottom(self).item(*args)
        self._check_thread("x.item()")
        raise escape_error("x.item()", TracerEscapeError, TEST_HINT if in_a_test(user_frame(sys._getframe(1))) else "")

    def tolist(self):
        if self._may_convert():  # (which notes the plain read: note_plain_read)
            return bottom(self).tolist()
        self._check_thread("x.tolist()")
        raise escape_error("x.tolist() of a traced array (a list of plain numbers)", TracerEscapeError,
                           " Unpack or index the traced array itself, which keeps the derivative: a, b = x, or "
                           "x[0], x[1] (list(x) for a list of traced elements); mg.value(x).tolist() where plain "
                           "numbers are meant.", specific=True)

    def tobytes(self, *a, **k):
        if self._plain_constant():
            note_plain_read(self)
            return bottom(self).tobytes(*a, **k)
        raise escape_error("x.tobytes()")

    def tofile(self, *a, **k):
        """The values, written to a file on disk as np.save writes them (a file in memory, to be read
        back as constants, raises; see rules.construction._saves_values)."""
        from .rules.construction import _in_memory, _refuse_derivatives_in_memory

        target = a[0] if a else k.get("fid")
        if _in_memory(target):
            self._check_thread("x.tofile()")
            _refuse_derivatives_in_memory(np.ndarray.tofile, [self])
        return bottom(self).tofile(*a, **k)

    def dump(self, *a, **k):
        raise escape_error("x.dump() (pickling a traced array)")

    def dumps(self, *a, **k):
        raise escape_error("x.dumps() (pickling a traced array)")

    @property
    def data(self):
        raise _raw_memory_attribute("data", self, TracerEscapeError)

    @property
    def ctypes(self):
        raise _raw_memory_attribute("ctypes", self, TracerEscapeError)

    @property
    def __array_interface__(self):
        raise _raw_memory_attribute("__array_interface__", self)

    @property
    def __array_struct__(self):
        raise _raw_memory_attribute("__array_struct__", self)

    def __dlpack__(self, *args, **kwargs):
        if self._level.closed:  # a leftover: the array it holds (torch.as_tensor(y), np.from_dlpack(y))
            return np.asarray(live(self)).__dlpack__(*args, **kwargs)
        raise escape_error("x.__dlpack__() (DLPack, asked by np.from_dlpack or another library's array "
                           "constructor: the raw memory of a traced array)", TracerEscapeError,
                           " For the values as a read-only plain array use mg.value(x); to keep the derivative, "
                           "use the traced array itself.", specific=True)

    def __dlpack_device__(self):
        return (1, 0)  # (DLPack's CPU)

    def __array_namespace__(self, *, api_version=None):
        """The array API namespace of array API code (``xp = x.__array_namespace__()``): mutagrad.numpy, NumPy's
        names whose creation functions (xp.asarray, xp.zeros, xp.empty...) make traced arrays, as NumPy's own
        functions take them (NumPy's namespace refused xp.asarray(x) and made plain buffers: numpy2api)."""
        _ndarray.__array_namespace__(_NO_VALUES, api_version=api_version)  # (NumPy's check of the version)
        from . import numpy as mnp

        return mnp

    @property
    def device(self):
        return "cpu"

    def to_device(self, device, /, *, stream=None):
        if device != "cpu":
            raise ValueError(f"unsupported device {device!r}: traced arrays live on the CPU")
        return self

    def byteswap(self, inplace=False):
        raise MutationError(
            f"x.byteswap() on a traced array at {user_line()} reinterprets its bytes, which has no "
            "derivative. If a constant is meant, apply it to mg.value(x) (a plain, read-only view)."
        )

    def getfield(self, dtype, offset=0):
        raise MutationError(
            f"x.getfield() on a traced array at {user_line()} reinterprets its bytes, which has no "
            "derivative. Use x.view(dtype) for a same-size reinterpretation, or mg.value(x).getfield(...)."
        )

    def setfield(self, val, dtype, offset=0):
        raise MutationError(
            f"x.setfield() on a traced array at {user_line()} writes bytes of another type into it, which "
            "has no derivative. Write values with x[...] = val instead."
        )

    def __reduce_ex__(self, protocol):
        # a leftover (or a pristine constant) pickles as its plain value: nothing is lost
        if self._plain_constant():
            return bottom(self).__reduce_ex__(protocol)
        lv = self._level
        if lv.thread != _get_ident() and user_frame(sys._getframe(1)) is None:
            # (a process pool's feeder thread sending it to a worker process: the line is where
            # the thread running the differentiation waits, at the pool's call)
            f = sys._current_frames().get(lv.thread)
            raise escape_error(
                "pickling a traced array to send it to another process (a process pool's task)", TracerEscapeError,
                " Another process computes with plain values, and its results come back without a derivative. "
                "Use threads (concurrent.futures.ThreadPoolExecutor, multiprocessing.pool.ThreadPool), whose "
                "workers may apply NumPy operations to traced values; or, where the derivative through the "
                "values is not needed, send plain copies (np.array(mg.value(x))).", specific=True,
                where=None if f is None else user_line(f))
        raise escape_error("pickling a traced array")

    def __reduce__(self):
        return self.__reduce_ex__(2)

    def __bool__(self):
        b = bottom(self)
        res = bool(b)
        if not res and _TRUTH_TIE[0] is not None:  # (`if not k:` at k = 0: a guard as `if k == 0:`,
            _TRUTH_TIE[0](self)  # rules.elementwise; a larger array's truth is NumPy's error, raised above)
        return res

    def __repr__(self):
        if self._level.closed:  # a leftover: the value it had (see live)
            return f"Tracer({bottom(self)!r}, left by a finished differentiation)"
        if self._may_convert():  # (a statement that only prints or logs: NumPy's text, as a plain call's)
            return repr(bottom(self))
        lv = self._level
        carries = (f"active={self._storage.active}" if lv.mode == "rev" else
                   f"tangent={self._storage.tangent is not None or self._storage.poison is not None}")
        return f"Tracer({bottom(self)!r}, level={lv.id}, {carries})"

    def __str__(self):
        if self._level.closed:  # a leftover is the value it holds (see live): its text, as a plain call's
            return str(live(self))  # (csv.writer, str.join, "%s" write it)
        if self._may_convert():  # print(y), logging's "%s": NumPy's text, as a plain call prints it
            return str(bottom(self))
        return self.__repr__()

    def __format__(self, spec):
        # Digits of a traced value would be a plain number the derivative does not reach
        # (float(f"{x:.17g}")), as float(x) and "%g" % x are: a constant may show its digits,
        # and so may a statement that only prints or logs them; anything else shows what
        # str() shows, or raises for a numeric format.
        if self._may_convert():  # (f"{y}" in a print(...) too: NumPy's text)
            return format(bottom(self), spec)
        if not spec:
            return str(self)
        from .errors import print_hint

        raise escape_error(f"formatting a traced value as text (format spec {spec!r})", TracerEscapeError,
                           print_hint(sys._getframe(1)), specific=True)  # (the buffer advice does not apply)

    def __copy__(self):
        return np.copy(self)

    def __deepcopy__(self, memo):
        return np.copy(self)

    __hash__ = None

    # -- attributes -----------------------------------------------------------

    shape = property(lambda self: self._value.shape, _no_setattr("shape"))
    dtype = property(lambda self: self._value.dtype, _no_setattr("dtype"))
    strides = property(lambda self: self._value.strides, _no_setattr("strides"))
    ndim = property(lambda self: self._value.ndim)
    size = property(lambda self: self._value.size)
    itemsize = property(lambda self: self._value.itemsize)
    nbytes = property(lambda self: self._value.nbytes)
    @property
    def flags(self):
        f = bottom(self).flags
        s = self._storage
        owndata = f.owndata
        if self._geom is None:  # an argument's own array: the caller's array's OWNDATA (the tracer holds a
            if s.orig is not None:  # view of it); inside a nested differentiation, the outer argument's
                owndata = s.orig.flags.owndata
            elif "outer_arg" in s.__dict__:
                owndata = s.outer_arg.flags.owndata
        return _ArgumentFlags(f, owndata, self)

    @property
    def T(self):
        return np.transpose(self)

    @property
    def mT(self):
        return np.swapaxes(self, -1, -2)

    @property
    def real(self):
        r = np.real(self)
        return _weak_result(r, ()) if self._scalar and weak(self) else r  # (z.real of a Python complex)

    @real.setter
    def real(self, v):
        np.real(self)[...] = v

    @property
    def imag(self):
        r = np.imag(self)
        return _weak_result(r, ()) if self._scalar and weak(self) else r

    @imag.setter
    def imag(self, v):
        if self.dtype.kind != "c":
            raise TypeError("array does not have imaginary part to set")
        np.imag(self)[...] = v

    @property
    def flat(self):
        from .rules.indexing import FlatIter

        return FlatIter(self)

    @flat.setter
    def flat(self, v):
        from .rules.indexing import FlatIter, flat_positions

        # NumPy converts the value with its F-contiguity required when self is F-contiguous
        # (a copy, read before any write, unless the value already is), then goes element by element
        vb = bottom(v)
        sequential = not bottom(self).flags.f_contiguous or (isinstance(vb, _ndarray) and vb.flags.f_contiguous)
        FlatIter(self).assign(flat_positions(self, ...), v, sequential)

    @property
    def base(self):
        """None for an array that owns its memory, as in NumPy; for a view, the
        traced array of the whole memory it was made from (``y[1:].base is y``,
        ``x.T.base is x``), or, once that one is gone, a traced array of that memory."""
        s = self._storage
        if self._geom is None and "outer_arg" in s.__dict__:  # (an argument of a nested differentiation)
            return s.outer_arg.base
        if self._scalar or bottom(self).base is None or (self._geom is None and s.orig is not None and s.orig.base is None):
            return None
        if s.orig is not None and getattr(s.orig, "base", None) is not None:
            # an argument that is a view of a caller's array (buf[1:]): NumPy's base is that array, which
            # is not traced (its elements outside the argument are not arguments): not None, not readable
            return _CallerBase()
        root = s.root
        if root is None or type(root) in _NP_FLOAT_SCALARS:
            return None
        o = s.owner
        o = o() if o is not None else None
        if o is not None and o._value is root and o._geom is None:
            return o  # the array the view was made from (or from a view of): `y[1:].base is y`
        return ArrayTracer(root, self._level, s, None, False)

    # -- operators ------------------------------------------------------------

    __add__, __radd__, __iadd__ = _binop(np.add)
    __sub__, __rsub__, __isub__ = _binop(np.subtract)
    __mul__, __rmul__, __imul__ = _binop(np.multiply)
    __truediv__, __rtruediv__, __itruediv__ = _binop(np.true_divide)
    __floordiv__, __rfloordiv__, __ifloordiv__ = _binop(np.floor_divide)
    __mod__, __rmod__, __imod__ = _binop(np.remainder)
    __pow__, __rpow__, __ipow__ = _binop(np.power)
    __matmul__, __rmatmul__, _imatmul = _binop(np.matmul)

    def __imatmul__(self, other):
        if self._scalar:
            return np.matmul(self, other)
        if np.ndim(other) == 1:  # (NumPy's own check and message)
            raise ValueError("inplace matrix multiplication requires the first operand to have at least one and "
                             "the second at least two dimensions.")
        # as NumPy's a @= b: matmul with out=a, computed in a buffer of a's layout (an F-ordered
        # complex a rounds otherwise than a C-ordered result)
        np.matmul(self, other, out=self)
        return self

    def __divmod__(self, other):
        if self._scalar:
            _python_zero_division(divmod, self, other)
        r = np.divmod(self, other)
        return _weak_result(r, (self, other)) if self._scalar and weak(self) else r

    def __rdivmod__(self, other):
        if self._scalar:
            _python_zero_division(divmod, other, self)
        r = np.divmod(other, self)
        return _weak_result(r, (other, self)) if self._scalar and weak(self) else r

    def __neg__(self):
        r = _fast_call(np.negative, self, self, _NOARG)
        if r is None:
            r = call_ufunc(np.negative, (self,), {})
        if self._scalar:
            return _weak_result(r, ()) if weak(self) else r
        if _large(self):
            _note_result(r, _getframe(1), self._level)
        return r

    def __pos__(self):
        r = call_ufunc(np.positive, (self,), {})
        return _weak_result(r, ()) if self._scalar and weak(self) else r

    def __abs__(self):
        if self._scalar and weak(self):
            if bottom(self).dtype.kind == "c":  # Python's abs of a complex (its bits differ from NumPy's)
                return _weak_result(bind(PYTHON_COMPLEX_ABS[0], (self,)), ())
            return _weak_result(call_ufunc(np.absolute, (self,), {}), ())
        if self._scalar and self.dtype.kind == "c":  # (a NumPy complex scalar's own abs, as above)
            return bind(PYTHON_COMPLEX_ABS[1], (self,))
        r = abs_watched(self)  # (|z| at 0 beside a comparison's tie: note_zero_kink)
        if r is not None:
            return r
        r = _fast_call(np.absolute, self, self, _NOARG)
        return call_ufunc(np.absolute, (self,), {}) if r is None else r

    def __lt__(self, o):
        if self._scalar and weak(self):
            _python_order("<", self, o)
        note_search(self, o, _getframe(1))
        return np.less(self, o)

    def __le__(self, o):
        if self._scalar and weak(self):
            _python_order("<=", self, o)
        note_search(self, o, _getframe(1))
        return np.less_equal(self, o)

    def __gt__(self, o):
        if self._scalar and weak(self):
            _python_order(">", self, o)
        note_search(self, o, _getframe(1))
        return np.greater(self, o)

    def __ge__(self, o):
        if self._scalar and weak(self):
            _python_order(">=", self, o)
        note_search(self, o, _getframe(1))
        return np.greater_equal(self, o)

    def __eq__(self, o):
        return np.equal(self, o)

    def __ne__(self, o):
        return np.not_equal(self, o)

    # -- methods (each is the NumPy function of the same name) ---------------

    def sum(self, *a, **k):
        return np.sum(self, *a, **k)

    def mean(self, *a, **k):
        return np.mean(self, *a, **k)

    def prod(self, *a, **k):
        return np.prod(self, *a, **k)

    def max(self, *a, **k):
        return np.max(self, *a, **k)

    def min(self, *a, **k):
        return np.min(self, *a, **k)

    def var(self, *a, **k):
        return np.var(self, *a, **k)

    def std(self, *a, **k):
        return np.std(self, *a, **k)

    def cumsum(self, *a, **k):
        return np.cumsum(self, *a, **k)

    def cumprod(self, *a, **k):
        return np.cumprod(self, *a, **k)

    def reshape(self, *shape, **k):
        if len(shape) == 1 and isinstance(shape[0], (tuple, list, _ndarray)):  # (a shape given as one array too)
            shape = shape[0]
        return np.reshape(self, shape, **k)

    def ravel(self, order="C"):
        return np.ravel(self, order)

    def flatten(self, order="C"):
        return np.copy(np.ravel(self, order))

    def copy(self, order="C"):
        return np.copy(self, order=order)

    def astype(self, dtype, order="K", casting="unsafe", subok=True, copy=True):
        from .rules.shape import astype

        res = astype(self, dtype, copy=copy, casting=casting)
        if res is self:  # (copy=False, nothing to change) unless the order asks for another layout
            if layout_satisfies(bottom(self), order):
                return res
            res = astype(self, dtype, copy=True, casting=casting)
        return in_order(res, order, self)

    def view(self, dtype=None, type=None):
        from .rules.shape import view

        if isinstance(dtype, builtins.type) and issubclass(dtype, _ndarray):  # x.view(np.ndarray), as NumPy
            dtype, type = None, dtype
        if type is not None and type is not _ndarray:
            raise NoRuleError(
                f"x.view({type.__module__}.{type.__name__}) at {user_line()}: mutagrad differentiates plain "
                "ndarrays, and the subclass's own semantics " + subclass_advice(type))
        return view(self, dtype)

    def dot(self, b, out=None):
        return np.dot(self, b, out=out)

    def transpose(self, *axes):
        if len(axes) == 1 and (axes[0] is None or isinstance(axes[0], (tuple, list, np.ndarray))):
            axes = axes[0]
        return np.transpose(self, None if axes is None or len(axes) == 0 else axes)

    def swapaxes(self, a, b):
        return np.swapaxes(self, a, b)

    def squeeze(self, axis=None):
        return np.squeeze(self, axis)

    def conj(self):
        if not self._scalar and self.dtype.kind != "c":
            return self  # (NumPy's ndarray.conj of a real array is the array itself, not a copy)
        r = np.conjugate(self)
        return _weak_result(r, ()) if self._scalar and weak(self) else r

    conjugate = conj

    def clip(self, min=None, max=None, out=None, **k):  # ndarray.clip's names
        return np.clip(self, min, max, out=out, **k)

    def round(self, decimals=0, out=None):
        return np.round(self, decimals, out=out)

    def diagonal(self, offset=0, axis1=0, axis2=1):
        return np.diagonal(self, offset, axis1, axis2)

    def trace(self, *a, **k):
        return np.trace(self, *a, **k)

    def repeat(self, *a, **k):
        return np.repeat(self, *a, **k)

    def take(self, *a, **k):
        return np.take(self, *a, **k)

    def argmax(self, *a, **k):
        return np.argmax(self, *a, **k)  # (np.argmax's handler: its warning at a tie, rules/shape.py)

    def argmin(self, *a, **k):
        return np.argmin(self, *a, **k)

    def argsort(self, *a, **k):
        return np.argsort(bottom(self), *a, **k)

    def nonzero(self):
        return np.nonzero(bottom(self))

    def all(self, *a, **k):
        return np.all(bottom(self), *a, **k)

    def any(self, *a, **k):
        return np.any(bottom(self), *a, **k)

    def searchsorted(self, v, *a, **k):
        return np.searchsorted(bottom(self), bottom(v), *a, **k)

    def fill(self, value):
        if type(value) is not float and not isinstance(value, ScalarTracer):  # (NumPy's checks of the value:
            tv = type(value)  # a sequence, a Python complex into a real array)
            if isinstance(value, Tracer):  # (its shape decides; a float stand-in casts without a warning)
                np.empty((), self.dtype).fill(np.zeros(np.shape(bottom(value))))
            elif np.iscomplexobj(value) and tv is not complex:
                with warnings.catch_warnings():  # (NumPy's ComplexWarning: the write warns)
                    warnings.simplefilter("ignore")
                    np.empty((), self.dtype).fill(value)
            else:
                np.empty((), self.dtype).fill([0.0] if tv is list or tv is tuple else value)
        if type(value) is ArrayTracer:
            value = np.copy(value)  # (NumPy converts the value once, before it fills: one it overwrites too)
        write(self, Ellipsis, value)

    def sort(self, axis=-1, kind=None, order=None, *, stable=None):
        from .rules.mutation import sort_inplace

        np.empty(0, self.dtype).sort(kind=kind, order=order, stable=stable)  # (NumPy's checks of them)
        sort_inplace(self, axis, kind, stable)

    def partition(self, kth, axis=-1, kind="introselect", order=None):
        if axis is None:
            raise TypeError("ndarray.partition: axis=None is not allowed for an in-place partition")
        write(self, Ellipsis, np.partition(self, kth, axis=axis, kind=kind, order=order))

    def argpartition(self, *a, **k):
        return np.argpartition(bottom(self), *a, **k)

    def choose(self, choices, out=None, mode="raise"):
        return np.choose(self, choices, out=out, mode=mode)

    def compress(self, condition, axis=None, out=None):
        return np.compress(condition, self, axis=axis, out=out)

    def put(self, ind, v, mode="raise"):
        np.put(self, ind, v, mode=mode)

    def resize(self, *a, **k):
        raise MutationError(
            f"x.resize() on a traced array at {user_line()} changes its memory in place and "
            "cannot be differentiated. Make a new array: x = np.pad(x.ravel(), (0, n - x.size)).reshape(shape) "
            "is what x.resize(shape) leaves (n elements, zero-filled; np.resize repeats the values instead)."
        )

    def setflags(self, write=None, align=None, uic=None):
        # as x.flags.writeable = ... does: the array's own flags (NumPy refuses write=True where
        # the memory belongs to a read-only array: for a view, the array it views, which the
        # program may have made read-only); the reverse pass rewinds writes into arrays that are
        # read-only when it runs
        b = bottom(self)
        if write and type(b) is _ndarray:
            if self._geom is not None:
                # NumPy asks the array that owns the memory: the traced array this is a view of, where
                # that owns its memory (not a caller's view of another array, whose owner decides)
                root = bottom(self._storage.root)
                orig = self._storage.orig
                if (type(root) is _ndarray and not root.flags.writeable and LOCKED.get(id(root)) is not root
                        and (orig is None or orig.base is None)):
                    raise ValueError("cannot set WRITEABLE flag to True of this array")  # (NumPy's)
            orig = self._storage.orig
            root = bottom(self._storage.root)
            if (self._storage.active and orig is not None and type(root) is _ndarray and not root.flags.writeable
                    and not np.may_share_memory(root, orig)):
                # a differentiated argument whose elements share memory, held as a private read-only copy
                # (api._caller_array): NumPy would let a broadcast be made writable (deprecated), and a
                # write then change the caller's memory, which the copy cannot do
                raise MutationError(
                    f"making {self._storage.name} writable at {user_line()}: its elements share memory (a "
                    "broadcast, np.broadcast_to), so a write would change several of them, whose derivatives "
                    "cannot be told apart. Write into a copy (x = x.copy()), or into the array it broadcasts.")
            set_writeable(b)
            write = None
        b.setflags(write=write, align=align, uic=uic)


# the ufuncs whose NumPy-scalar operator (`c * s` of a NumPy scalar c) a plain call computes with
# the scalars' own arithmetic: its symbol and the traced scalar's reflected operator
_SCALAR_REFLECTED = {np.add: ("+", Tracer.__radd__), np.subtract: ("-", Tracer.__rsub__),
                     np.multiply: ("*", Tracer.__rmul__), np.true_divide: ("/", Tracer.__rtruediv__),
                     np.power: ("**", Tracer.__rpow__)}


class ArrayTracer(Tracer):
    """A traced array: indexing, ``len`` and iteration as ``numpy.ndarray``."""

    __slots__ = ()

    # isinstance(x, np.ndarray) is True, as in a plain call (type(x) stays ArrayTracer): user
    # code that checks types takes the path it takes on plain arrays. Except for scipy.sparse's
    # product, whose fast path for ndarrays (`other.__class__ is np.ndarray`) would hand the
    # tracer to C code: its general path asks np.asanyarray, answered in __array__
    __class__ = property(lambda self: ArrayTracer if _getframe(1).f_code.co_name == "_matmul_dispatch" else _ndarray)

    def __getitem__(self, idx):
        lv = self._level
        ti = type(idx)
        if TIED_PICKS:
            note_tied_pick(idx)
        if (ti is slice or ti is tuple and _is_basic(idx)) and lv.index == 0 and STATE.ceiling == 1 and not lv.closed:
            # the outermost level and a basic index: a view of this storage, nothing to record (a
            # forward-mode jacobian's run notes the index: runs that take other views compute another function)
            v = self._value[idx]
            if type(v) is _ndarray:
                if lv.run_group is not None:
                    lv.run_group.note(("getitem", index_step(idx), self._storage.birth))  # (as ForwardLevel's)
                return _basic_view(self, v, v, lv)
        if ti is int and self.ndim > 1:
            f = sys._getframe(1)
            if f.f_code.co_code[f.f_lasti] in _CALL_OPS and _shuffling(f):  # (C code indexing: at a call)
                # NumPy's shuffle of an object that is not an ndarray swaps rows in C,
                # x[i], x[j] = x[j], x[i]: with rows that are views, a row would be duplicated;
                # with copies the swap is NumPy's own, and so is the permutation (the same draws)
                return np.copy(bind_with("getitem", self, idx))
        return bind_with("getitem", self, _check_index(idx))  # (a recorded gather copies its index)

    def __setitem__(self, idx, value):
        if type(value) is ArrayTracer and value._storage is self._storage and _is_basic(idx):
            # `x[i:j] += v` ends with Python's x[i:j] = <that same view>: a copy of memory onto
            # itself, which changes nothing (neither values nor derivatives): no record
            b, vb = bottom(self)[idx], bottom(value)
            if (type(b) is _ndarray and b.flags.writeable and b.shape == vb.shape and b.strides == vb.strides
                    and b.dtype == vb.dtype and _ptr(b) == _ptr(vb)):
                return
            if type(idx) is int and self.ndim > 1 and not at_a_store(sys._getframe(1)):
                raise _swap_from_c()
        write(self, _check_index(idx), value)  # (a recorded write copies its index)

    def __len__(self):
        return len(self._value)

    def __iter__(self):
        if self.ndim == 0:  # (raised by iter() itself, as NumPy's: np.iterable(x) is False)
            raise TypeError("iteration over a 0-d array")
        return (self[i] for i in range(len(self._value)))

    def __contains__(self, value):
        return bool((self == value).any())  # (ndarray's `value in x`; Python's fallback iterates rows)


def _shuffling(frame) -> bool:
    """Whether C code called by ``rng.shuffle(x)`` / ``np.random.shuffle(x)`` on the
    user's line ``frame``, at a call instruction, is indexing."""
    call = call_at(user_frame(frame))
    return call is not None and getattr(call.func, "attr", getattr(call.func, "id", None)) == "shuffle"


def _swap_from_c():
    """A row written into its own array by a C function (errors.at_a_store is false):
    NumPy's shuffle of an object that is not an ndarray swaps rows with
    ``x[i], x[j] = x[j], x[i]``, which duplicates rows that are views. NumPy warns
    (errors.ensure_shuffle_filter makes that an error), but a function that ignores
    warnings itself would get duplicated rows: this check does not depend on the filters."""
    from .errors import shuffle_error

    return shuffle_error(user_line())


class ScalarTracer(Tracer):
    """A traced NumPy scalar: immutable; indexed as a NumPy scalar is
    (``s[()]`` is s, ``s[None]`` and ``s[...]`` new arrays); no length, not
    iterable."""

    __slots__ = ()

    def __copy__(self):  # (immutable, as a NumPy scalar, whose copies are scalars: not a 0-d array)
        return copy.copy(live(self)) if self._level.closed else self

    def __deepcopy__(self, memo):
        return copy.deepcopy(live(self), memo) if self._level.closed else self

    def __hash__(self):
        # the number it stands for is hashable, but a lookup by value (a dict key, a set, a
        # functools.lru_cache argument) would return what another call computed, a constant
        if self._level.closed:  # (a leftover is the value it had: hashed as that value)
            return hash(bottom(live(self)))
        from .errors import TracedTypeError

        raise TracedTypeError(
            f"a traced scalar is used as a dict key, a set member or an argument of a cached function "
            f"(functools.lru_cache) at {user_line()}: a lookup by its value would return a result computed "
            "in another call, without this call's derivative. Call the function itself inside "
            "differentiation (f.__wrapped__ for an lru_cache function), or pass a plain number "
            "(float(mg.value(x))) where no derivative is wanted.")

    def __round__(self, ndigits=None):
        # as a NumPy scalar (a Python float, for a weak one): round(s) is an int (an escape),
        # round(s, n) np.round (derivative zero almost everywhere)
        if np.iscomplexobj(bottom(self)):  # (as Python's and NumPy's complex numbers: no rounding)
            raise TypeError(f"type {'complex' if weak(self) else type(bottom(self)).__name__} doesn't define "
                            "__round__ method")
        if ndigits is None:  # (Python's rounding, half to even: not int()'s truncation)
            if self._may_convert():
                b = bottom(self)
                return round(b.item() if isinstance(b, np.ndarray) else b)
            raise escape_error("round(x)", TracerEscapeError, _CONVERSION_HINT, specific=True)
        if weak(self):  # a Python float: Python's rounding (round(2.55, 1) is 2.5, NumPy's 2.6),
            return round(float(bottom(self)), ndigits)  # a constant (its derivative is zero)
        return np.round(self, ndigits)

    # Python float methods (np.float64 and a Python float argument have them)
    def is_integer(self):
        # a yes/no answer about the value, as a comparison: nothing to lose
        return bottom(self).is_integer()

    def _integral(self, name):
        if self.dtype.kind == "c":
            raise TypeError(f"must be real number, not {self.dtype.type.__name__}")
        if self._plain_constant():  # (no print exception: math.floor is not among the printing calls)
            return getattr(math, name)(bottom(self))
        err = _scipy_escape(sys._getframe(2))  # (SciPy's own math.floor of a traced argument: scipy.signal's
        if err is not None:  # windows.tukey(M, alpha), the spectral2 tester: named by the SciPy function)
            raise err
        raise escape_error(f"math.{name}(x)", TracerEscapeError,  # (an integer: the buffer advice does not apply)
                           f" Use np.{name}(x), a traced value whose derivative is zero (as math.{name}'s, "
                           f"between the jumps); for an index (a grid cell, j = math.{name}(x / dx)), "
                           f"int(np.{name}(x)), a plain int, while the rest of the code keeps x's derivative "
                           f"(a weight x / dx - j).", specific=True)

    def __trunc__(self):
        return self._integral("trunc")

    def __floor__(self):
        return self._integral("floor")

    def __ceil__(self):
        return self._integral("ceil")

    def as_integer_ratio(self):
        m = bottom(self).as_integer_ratio  # (AttributeError where the NumPy scalar has none)
        if self._may_convert():
            return m()
        stats = _calling_statistics(sys._getframe(1))
        if stats is not None:  # (the statistics module's exact fractions: statistics.mean(x))
            raise _statistics_error(stats, "to exact fractions")
        raise escape_error("x.as_integer_ratio()")

    def hex(self):
        m = bottom(self).hex
        if self._may_convert():
            return m()
        raise escape_error("x.hex()")

    @property
    def __class__(self):
        # isinstance(s, np.float64) (and float, for a float64 or a Python float) is True, as in
        # a plain call; a Python float argument (weak) is a float
        b = bottom(self)
        if type(b) is _ndarray:
            b = b[()]
        return type(b.item()) if weak(self) else type(b)

    def __getitem__(self, idx):
        if type(idx) is tuple and not idx:
            return self
        return np.copy(self)[_check_index(idx)]  # NumPy indexes a new 0-d array too

    # No __len__, and __iter__ None (not iterable, though indexable): as for a NumPy scalar,
    # hasattr(s, "__len__") is False and s is no collections.abc.Iterable or Sized, so duck-typed
    # code (`sum(v) if isinstance(v, Iterable) else v`) takes the path a plain call takes
    __iter__ = None

    # A NumPy scalar's fill and put act on a temporary array: the scalar keeps its value.
    def fill(self, value):
        np.empty((), self.dtype).fill(bottom(value) if isinstance(value, Tracer) else value)

    def put(self, ind, v, mode="raise"):
        np.put(np.empty((), self.dtype), ind, np.zeros(np.shape(v), self.dtype), mode=mode)


TRACERS = (ArrayTracer, ScalarTracer)  # indexed by the scalar flag


def _basic_view(t, v, b, level):
    """``v = t[idx]`` for a basic index (``b``: its plain array): a view of t's
    storage, which overlaps itself only if t does (no containment or overlap test)."""
    s = t._storage
    g = t._geom
    if g is None:
        _note_owner(t, s)
    over = g.overlap if g is not None else s.root_geom() is not None and s._rootgeom.overlap
    if over:  # (a part of a self-overlapping view, a row of sliding windows, may not overlap itself)
        over = None  # (geom_of tests it)
    return ArrayTracer(v, level, s, s.geom_of(b, over), False)


def _note_owner(t, s):
    """``t``, the traced array of all of storage ``s``, is what views of it report as their base."""
    o = s.owner
    if o is None or o() is None:
        s.owner = weakref.ref(t)


def _is_basic(idx) -> bool:
    """Whether ``x[idx]`` is basic indexing (a view of x, never a copy)."""
    t = type(idx)
    if t is slice or t is int or idx is Ellipsis or idx is None:
        return True
    if t is tuple:
        for i in idx:
            ti = type(i)
            if not (ti is slice or ti is int or i is Ellipsis or i is None):
                return False
        return True
    return False


def _check_index(idx):
    """Reject traced indices and turn lists into index arrays (a record that keeps an
    index copies its arrays: tape.owned_index)."""
    if _is_basic(idx):
        return idx
    if type(idx) is tuple:
        return tuple(_check_index_part(i) for i in idx)
    return _check_index_part(idx)


def _check_index_part(i):
    t = type(i)
    if isinstance(i, Tracer):
        if i.dtype.kind in "fc":
            raise IndexError(
                f"only integers, slices, ellipsis, None and integer or boolean arrays are valid "
                f"indices; got a traced floating-point array at {user_line()}"
            )
        i = bottom(i)
    if t is list:
        arr = index_array(i)
        if arr.dtype == object:
            raise IndexError(f"unsupported index {i!r}")
        return arr
    return i


def index_array(i):
    """A list used as an index, as NumPy reads it: an integer or boolean array, and an
    empty list an empty integer array (np.asarray would make it float64)."""
    arr = np.asarray(i)
    if arr.size == 0 and arr.dtype.kind == "f":
        arr = arr.astype(np.intp)
    return arr


def index_positions(shape, idx):
    """The flat (C-order) positions in an array of ``shape`` of the elements ``a[idx]``
    selects, in the shape of ``a[idx]``. Integer arrays (and integers) indexing the leading
    axes, the other axes whole, cost the size of the selection; any other index costs the
    size of the array (an arange indexed by it). NumPy's IndexError for an index out of
    bounds."""
    parts = idx if type(idx) is tuple else (idx,)
    k = len(parts)
    if 0 < k <= len(shape) and all(
            (isinstance(i, _ndarray) and i.dtype.kind in "iu") or (type(i) is int or isinstance(i, np.integer))
            for i in parts) and any(isinstance(i, _ndarray) for i in parts):
        lead = tuple(int(n) for n in shape[:k])
        arrays = [np.asarray(i) for i in parts]
        empty = not all(a.size for a in arrays)  # (then NumPy checks the bounds of integers only)
        fixed = []
        for ax, (a, n) in enumerate(zip(arrays, lead)):
            if not empty or not a.ndim:
                if a.size <= _FEW:  # (Python's min and max of a short list cost less than NumPy's reductions)
                    vals = a.ravel().tolist()
                    lo, hi = min(vals), max(vals)
                else:
                    lo, hi = a.min(), a.max()
                if lo < -n or hi >= n:
                    bad = a[(a < -n) | (a >= n)].flat[0]
                    raise IndexError(f"index {bad} is out of bounds for axis {ax} with size {n}")
                if lo < 0:
                    a = a % n
            fixed.append(a)
        # C-order positions, the parts broadcast as NumPy broadcasts them
        lin = np.array(fixed[-1], dtype=np.intp)  # (a new array: the positions are the caller's)
        step = 1
        for a, n in zip(fixed[-2::-1], lead[-1:0:-1]):
            step *= n
            try:
                lin = lin + np.asarray(a, dtype=np.intp) * step
            except ValueError:
                raise IndexError("shape mismatch: indexing arrays could not be broadcast together with shapes "
                                 + " ".join(str(np.shape(p)) for p in parts)) from None
        rest = tuple(int(n) for n in shape[k:])
        if not rest:
            return lin
        m = int(np.prod(rest, dtype=np.int64))
        return (lin.reshape(lin.shape + (1,) * len(rest)) * m
                + np.arange(m, dtype=np.intp).reshape(rest))
    n = int(np.prod(shape, dtype=np.int64))
    return np.arange(n, dtype=np.intp).reshape(shape)[idx]


def has_repeats(pos) -> bool:
    """Whether the positions ``pos`` (index_positions') name an element twice."""
    if pos.size <= _FEW:
        vals = pos.ravel().tolist()
        return len(set(vals)) < len(vals)
    flat = pos.ravel()
    top = int(flat.max())
    if top < 8 * flat.size:  # (nonnegative positions in a range of their count: a mark per position, no sort)
        mark = np.zeros(top + 1, np.bool_)
        mark[flat] = True
        return int(np.count_nonzero(mark)) < flat.size
    flat = np.sort(flat)
    return flat.size > 1 and bool(np.any(flat[1:] == flat[:-1]))


_FEW = 64  # index arrays of at most this many elements are checked with Python's list operations


def _a_sequence(node, frame) -> bool:
    """Whether the expression ``node`` of the user's ``frame`` makes a list or tuple: a display or
    comprehension, a name or attribute holding one, or their repetition or concatenation
    (``(a,) * 2``, ``[a] + [b]``)."""
    if type(node) in (ast.List, ast.Tuple, ast.ListComp):
        return True
    if type(node) in (ast.Name, ast.Attribute):
        return isinstance(_named(node, frame), (list, tuple))
    return type(node) is ast.BinOp and type(node.op) in (ast.Mult, ast.Add) and (
        _a_sequence(node.left, frame) or _a_sequence(node.right, frame))


def _called_as_its_type(t, value):
    """``type(x)(value)``, ``x`` traced: what the NumPy type ``x`` stands for would make of ``value``
    (a plain NumPy value) is refused, as that type is not the traced one's."""
    what = f"numpy.{bottom(value).dtype.name}" if isinstance(value, Tracer) else "a NumPy scalar or array"
    if isinstance(value, Tracer):
        raise escape_error(f"type(x)(x) of a traced value (in a plain call, {what}(x): a plain NumPy value)",
                           TracerEscapeError, " To change only the dtype, use x.astype(x.dtype) (or another "
                           "dtype), which is differentiated.", specific=True)
    raise TypeError(f"type(x)(...) of a traced value x is mutagrad's traced type, which cannot be called to make "
                    f"{what} (at {user_line()}): use x.dtype.type(...) or np.asarray(..., x.dtype) for a plain "
                    "constant, or x.astype(...) of a traced value.")


_NUMPY_SCALAR_TYPES = frozenset(("float64", "float32", "float16", "double", "single", "half", "longdouble",
                                 "complex128", "complex64", "cdouble", "csingle", "clongdouble"))


_UNRESOLVED = object()


def _numpys_as_strided(code) -> bool:
    """Whether ``code`` is NumPy's np.lib.stride_tricks.as_strided (converting its argument)."""
    return code.co_name == "as_strided" and "stride_tricks" in code.co_filename


class _CallerBase:
    """``x.base`` of an argument that is a view of a caller's array (NumPy's base is that array):
    not None (``x.base is None`` tests work), but the array itself is not traced (its elements
    outside the argument are no arguments, its elements inside are plain there), so any use of it
    raises."""

    __slots__ = ()

    def _refuse(self, *args, **kwargs):
        from .errors import TracerEscapeError, escape_error

        raise escape_error(
            "x.base of an argument that is a view of another array of the caller's (NumPy's base is that array, "
            "which is not traced)", TracerEscapeError,
            " Pass the whole array as the argument and make the view inside the function (f(buf) with x = buf[1:] "
            "there), or pass what the function reads of it as another argument.", specific=True)

    def __getattr__(self, name):
        self._refuse()

    def __repr__(self):
        return "<the caller's array this argument views (not traced)>"

    __array__ = __getitem__ = __setitem__ = __len__ = __iter__ = __float__ = __int__ = __bool__ = _refuse
    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = __truediv__ = __rtruediv__ = _refuse
    __pow__ = __matmul__ = __rmatmul__ = __neg__ = __eq__ = __lt__ = __gt__ = __le__ = __ge__ = _refuse
    __hash__ = object.__hash__
    __array_ufunc__ = __array_function__ = _refuse


def _polynomial_fix(lib, mirror=True):
    """The rewrite for a numpy.polynomial function ``lib`` (its dotted name: a function of a series module or
    of polyutils, a series class's constructor or method) given traced values: first the same function or
    class of mutagrad.numpy.polynomial (NumPy's code, differentiated), then (``mirror`` False: only) a
    rewrite with NumPy's functions; each rewrite is differentiated and gives NumPy's value
    (tests/test_errors.py runs them)."""
    if mirror:  # (mutagrad.numpy.polynomial: the same names, mutagrad/_polynomial.py)
        from .numpy import polynomial as mirrored

        path = lib.split(".")[2:]
        rewrite = _polynomial_fix(lib, False)
        rewrite = " Or by hand:" + rewrite if rewrite else ""
        cls = next((p for p in path[:2] if p[:1].isupper()), None)
        if cls is None and len(path) == 2 and hasattr(getattr(mirrored, path[0], None), path[1]):
            name = ".".join(path)
            return (f" Use mutagrad.numpy.polynomial.{name} (import mutagrad.numpy as mnp: mnp.polynomial.{name}), "
                    "the same function, differentiated." + rewrite)
        if cls is not None and hasattr(mirrored, cls):
            method = path[2] if len(path) > 2 else "__init__"
            use = (f"for a series p of NumPy's, mnp.polynomial.{cls}(p.coef, p.domain, p.window)"
                   + ("(x)" if method == "__call__" else ""))
            if method == "__init__":
                use = f"mnp.polynomial.{cls}(c)(x), mnp.polynomial.{cls}.fit(x, y, deg)"
            elif method in ("fit", "fromroots", "interpolate", "basis", "identity", "cast"):  # (classmethods)
                use = (f"mnp.polynomial.{cls}.{method}(...)" if hasattr(getattr(mirrored, cls), method)
                       else f"mnp.polynomial.{cls}")
            return (f" Use mutagrad.numpy.polynomial.{cls} (import mutagrad.numpy as mnp: {use}), the same class "
                    "(a subclass of NumPy's), whose objects hold traced coefficients and whose methods and "
                    "operators are differentiated." + rewrite)
        if cls is not None:  # (ABCPolyBase's classmethods: fit, fromroots, cast...)
            return (" Call it on the class of the same name of mutagrad.numpy.polynomial (import mutagrad.numpy as "
                    "mnp: mnp.polynomial.Polynomial.fit(x, y, deg), mnp.polynomial.Legendre.fromroots(r)...), the "
                    "same classes (subclasses of NumPy's), whose methods are differentiated." + rewrite)
        return rewrite
    parts = lib.split(".")
    name = parts[-1]
    module = parts[2] if len(parts) >= 4 else ""
    mod = f"np.polynomial.{module}"
    k, kind = _SERIES.get(module, (None, None))
    vanders = ", ".join(f"np.polynomial.{m}.{p}vander for {c}" for m, (p, c) in _SERIES.items())
    tpts = "t = np.cos(np.pi * (np.arange(d + 1) + 0.5) / (d + 1))"  # (d + 1 distinct points in (-1, 1))
    if len(parts) >= 4 and parts[3][:1].isupper():  # a series class (Legendre, or ABCPolyBase for classmethods)
        kind = parts[3]
        method = parts[4] if len(parts) > 4 else "__init__"
        known = {c: (m, p) for m, (p, c) in _SERIES.items()}
        m, k = known.get(kind, (None, None))
        mod = f"np.polynomial.{m}"
        if method == "__call__" and k is not None:  # p(x) of a plain p at traced points
            return (f" A series object's call converts its argument: evaluate its coefficients in the default window "
                    f"with the module's function, which takes a traced x: "
                    f"{mod}.{k}val(x, p.convert().coef) for p = {kind}(...).")
        if method == "fit":
            return (" Cls.fit(x, y, deg, w=w) with traced values y (x and w plain) fits at x mapped to the class's "
                    "window: with xm = np.polynomial.polyutils.mapdomain(x, (x.min(), x.max()), Cls.window) and V "
                    f"= vander(xm, deg), the Vandermonde function of the class's module ({vanders}), its coefficients "
                    "are np.linalg.lstsq(w[:, None] * V, w * y)[0] (without w=: np.linalg.lstsq(V, y)[0]), which is "
                    "differentiated; keep them in an array (a series object holds plain coefficients), and "
                    "evaluate them at points mapped likewise.")
        if method == "fromroots":
            return (" A series object holds plain coefficients: keep the traced ones in an array. The polynomial "
                    "with roots r has the power-series coefficients np.poly(r)[::-1] (Polynomial.fromroots(r).coef), "
                    "and in another class's basis np.linalg.solve(vander(t, d), np.prod(np.subtract.outer(t, r), "
                    f"axis=-1)) for d = len(r) at d + 1 plain distinct points, {tpts}, with the Vandermonde function "
                    f"of the class's module ({vanders}), which are differentiated.")
        if k is None:
            return (" A series object holds plain coefficients, and its methods convert traced values: keep traced "
                    "coefficients c in an array and compute with the functions of the class's module (np.polynomial."
                    "legendre for Legendre: legval, legder, legadd...), which the error for each names a rewrite "
                    "for.")
        values = f"np.tensordot(c, {mod}.{k}val(x, np.eye(len(c))), axes=(0, 0))"
        if method == "__init__":
            return (f" A {kind} holds plain coefficients (NumPy converts them): keep the traced coefficients c in an "
                    f"array and compute with the functions of {mod}, which are differentiated: {kind}(c)(x) is "
                    f"{values} (with domain=d, of off + scl * x in place of x, for off, scl = "
                    f"np.polynomial.polyutils.mapparms(d, {kind}.window)), {kind}(c).deriv().coef is "
                    f"{mod}.{k}der(np.eye(len(c))) @ c (scaled by scl with a domain).")
        return (f" A {kind} holds plain coefficients, and its methods and operators convert traced values: keep the "
                f"traced coefficients c in an array and compute with the functions of {mod} (p + c: p.coef and c "
                "padded with zeros to one length, np.pad, and added; s * p: s * p.coef; values at points x: "
                f"{values}), which are differentiated.")
    base = name[len(k):] if k is not None and name.startswith(k) else name
    linear = ("np.column_stack([np.pad(v, (0, {n} - len(v))) for v in map({f}, np.eye(len(c)))]) (its columns: "
              "the call on the identity's rows, padded with zeros to one length)")
    if k is not None and base == "val":
        return (f" {name}(x, c) converts traced coefficients c, and points x given as a list or tuple of traced "
                "values (a traced array x is differentiated): make such a list one array first, np.stack(values); "
                f"for traced c (x plain or traced), {name}(x, c) is np.tensordot(c, {mod}.{k}val(x, "
                "np.eye(len(c))), axes=(0, 0)) (an n-D c too, as with tensor=True), or "
                f"{mod}.{k}vander(x, len(c) - 1) @ c for a 1-D c at plain points x, which are differentiated.")
    if k is not None and base in ("val2d", "val3d", "grid2d", "grid3d"):
        dims = int(base[-2])
        args = ", ".join("xyz"[:dims])
        basis = ", ".join(f"V{a} = {mod}.{k}val({a}, np.eye(C.shape[{n}]))" for n, a in enumerate("xyz"[:dims]))
        if base.startswith("grid"):
            spec = "ip,ij,jq->pq', Vx, C, Vy" if dims == 2 else "ip,ijk,jq,kr->pqr', Vx, C, Vy, Vz"
        else:
            spec = "i...,ij,j...->...', Vx, C, Vy" if dims == 2 else "i...,ijk,j...,k...->...', Vx, C, Vy, Vz"
        return (f" {name}({args}, C) converts traced points and traced coefficients C alike: with the basis values "
                f"{basis} (a val function with plain identity coefficients takes traced points; np.stack a list of "
                f"them first), {name}({args}, C) is np.einsum('{spec})"
                + (" for 1-D points" if base.startswith("grid") else "") + ", which is differentiated.")
    if k is not None and base in ("vander2d", "vander3d"):
        dims = int(base[-2])
        degs = ", ".join(f"d{a}" for a in "xyz"[:dims])
        basis = ", ".join(f"V{a} = {mod}.{k}val({a}, np.eye(d{a} + 1))" for a in "xyz"[:dims])
        spec = "ip,jp->pij', Vx, Vy" if dims == 2 else "ip,jp,kp->pijk', Vx, Vy, Vz"
        return (f" {name}({', '.join('xyz'[:dims])}, [{degs}]) is np.einsum('{spec}).reshape(len(x), -1) for 1-D "
                f"points, with {basis} (a val function with plain identity coefficients takes traced points), "
                "which is differentiated.")
    if name.endswith("vander"):
        val = name[:-len("vander")] + "val"
        return (f" The basis at traced points: {mod}.{val}(x, np.eye(deg + 1)).T is {name}(x, deg), and {val} "
                "takes a traced x.")
    if name == "polyvalfromroots":
        return (" The product over the roots: np.prod(x - r) for a number x (np.prod(np.subtract.outer(x, r), "
                "axis=-1) for an array), which is differentiated.")
    if k is not None and base == "fit":
        return (f" A least-squares fit with traced values y (x and w plain): with V = {mod}.{k}vander(x, deg), "
                f"{name}(x, y, deg) is np.linalg.lstsq(V, y)[0] and {name}(x, y, deg, w=w) is "
                "np.linalg.lstsq(w[:, None] * V, w * y)[0], which are differentiated.")
    if k is not None and base == "der":
        return (f" {name} is linear in the coefficients: {mod}.{name}(np.eye(len(c))) @ c, with the plain matrix "
                "of the same call on the identity (the same m=, scl=, axis=0 arguments).")
    if k is not None and base == "int":  # (k= and lbnd= add a constant: affine, not linear)
        return (f" {name} is affine in the coefficients: b = {mod}.{name}(np.zeros(len(c)), ...) and M = "
                f"{mod}.{name}(np.eye(len(c)), ...) (the same m=, k=, lbnd=, scl= arguments, plain), then "
                "(M - b[:, None]) @ c + b (b is 0 without k= and lbnd=).")
    if k is not None and base == "mul":
        return (f" The product of two series: at plain points x, ({mod}.{k}vander(x, len(c1) - 1) @ c1) * "
                f"({mod}.{k}vander(x, len(c2) - 1) @ c2); its coefficients, np.linalg.solve({mod}.{k}vander(t, d), "
                f"({mod}.{k}vander(t, len(c1) - 1) @ c1) * ({mod}.{k}vander(t, len(c2) - 1) @ c2)) for d = len(c1) "
                f"+ len(c2) - 2 at d + 1 plain distinct points, {tpts}; for power series coefficients, "
                "np.polymul(c1[::-1], c2[::-1])[::-1] (np.polymul takes the highest power first), which are "
                "differentiated.")
    if k is not None and base in ("add", "sub"):
        op = "+" if base == "add" else "-"
        return (f" {name}(c1, c2) is c1 {op} c2 once both have one length: pad the shorter with zeros, "
                f"c1 {op} np.pad(c2, (0, len(c1) - len(c2))) where c2 is the shorter (np.pad(c1, (0, len(c2) - "
                f"len(c1))) {op} c2 where c1 is), which is differentiated.")
    if k is not None and (base == "mulx" or base.endswith("2poly") or base.startswith("poly2")):
        n = "len(c) + 1" if base == "mulx" else "len(c)"
        return (f" {name} is linear in the coefficients: M @ c with the plain matrix M = "
                + linear.format(n=n, f=f"{mod}.{name}") + ", which is differentiated.")
    if k is not None and base == "pow":
        return (f" {name}(c, n) is a power of the series: at points x, np.tensordot(c, {mod}.{k}val(x, "
                f"np.eye(len(c))), axes=(0, 0)) ** n; its coefficients, np.linalg.solve({mod}.{k}vander(t, d), "
                f"({mod}.{k}vander(t, len(c) - 1) @ c) ** n) for d = n * (len(c) - 1) at d + 1 plain distinct "
                f"points, {tpts}, which are differentiated.")
    if k is not None and base == "line":
        return (f" {name}(off, scl) is off * np.array([1.0, 0.0]) + scl * {mod}.{k}line(0, 1), which is "
                "differentiated.")
    if k is not None and base == "fromroots":
        power = (" its coefficients in powers of x are np.poly(r)[::-1] (np.poly gives the highest power first);"
                 if k == "poly" else
                 f" its coefficients, np.linalg.solve({mod}.{k}vander(t, d), np.prod(np.subtract.outer(t, r), "
                 f"axis=-1)) for d = len(r) at d + 1 plain distinct points, {tpts};")
        return (f" {name}(r) is the polynomial with the roots r:{power} its values at points x, "
                "np.prod(np.subtract.outer(x, r), axis=-1), which are differentiated.")
    if k is not None and base == "roots":
        if k == "poly":
            return " The roots of c (lowest degree first): np.sort(np.roots(c[::-1])), which is differentiated."
        return (" The roots of the same polynomial in powers of x: p = M @ c with the plain matrix M = "
                + linear.format(n="len(c)", f=f"{mod}.{k}2poly")
                + f", then np.sort(np.roots(p[::-1])) ({name} sorts them), which is differentiated.")
    if k is not None and base == "companion":
        return (f" {name}(c) is affine in q = c[:-1] / c[-1]: K0 + np.tensordot(c[:-1] / c[-1], D, axes=1) with the "
                f"plain K0 = {mod}.{name}(np.eye(len(c))[-1]) and D = np.stack([{mod}.{name}(np.r_[e, 1.0]) - K0 "
                "for e in np.eye(len(c) - 1)]), which is differentiated.")
    if k is not None and base == "div":
        return (" For power series, np.polydiv(c1[::-1], c2[::-1]) gives the quotient and the remainder, the highest "
                "power first (reverse both), which is differentiated" + ("." if k == "poly" else
                f"; in another basis, convert to power series first and back after, with the plain matrices M @ c "
                f"of {mod}.{k}2poly and {mod}.poly2{k}: M = " + linear.format(n="len(c)", f=f"{mod}.{k}2poly") + "."))
    if name in ("trimcoef", "trimseq"):
        which = ("within tol (legtrim, chebtrim... are np.polynomial.polyutils.trimcoef)" if name == "trimcoef"
                 else "that are zero")
        return (f" {name} drops the trailing coefficients {which}: slice with a plain count instead, c[:n] for n = "
                f"len(np.polynomial.polyutils.{name}(mg.value(c){', tol' if name == 'trimcoef' else ''})), which "
                "is differentiated" + (" (NumPy gives [0.] when every coefficient is within tol)."
                                       if name == "trimcoef" else "."))
    if name in ("mapdomain", "mapparms"):
        return (" Map with arithmetic, which is differentiated: scl = (new[1] - new[0]) / (old[1] - old[0]) and off "
                "= new[0] - scl * old[0] (mapparms(old, new) is off, scl), and mapdomain(x, old, new) is "
                "off + scl * x.")
    if name == "getdomain":
        return " The domain of real points x: np.stack([np.min(x), np.max(x)]), which is differentiated."
    if k is not None:
        return (f" The series' values at points x are differentiated: np.tensordot(c, {mod}.{k}val(x, "
                "np.eye(len(c))), axes=(0, 0)) for traced coefficients c.")
    return ""


# numpy.polynomial's series modules: their functions' prefix and their series class
_SERIES = {"polynomial": ("poly", "Polynomial"), "chebyshev": ("cheb", "Chebyshev"), "legendre": ("leg", "Legendre"),
           "hermite": ("herm", "Hermite"), "hermite_e": ("herme", "HermiteE"), "laguerre": ("lag", "Laguerre")}


def _vectorized_function_name(vec, fname, frame):
    """How the user's code can call the Python function of ``np.vectorize`` object ``vec``: its
    own name where that names it, ``name.pyfunc`` where a name holds ``vec`` (@np.vectorize, a
    lambda), else ``<name>.pyfunc``."""
    if frame is not None:
        if fname.isidentifier() and _resolve_name(fname, frame) is vec.pyfunc:
            return fname
        for scope in (frame.f_locals, frame.f_globals):
            for k, v in scope.items():
                if v is vec:
                    return f"{k}.pyfunc"
    return f"{fname}.pyfunc" if fname.isidentifier() else "<the vectorized object>.pyfunc"


# float(x) / int(x) for a test or a loop bound: no conversion needed
_CONVERSION_HINT = (" A comparison needs no conversion: `if err < tol:`, `while np.max(r) > eps:` work on the "
                    "traced value (control flow on values is allowed); for an integer, int(np.trunc(x)) (what "
                    "int(x) gives), int(np.floor(x)) or int(np.round(x)) works (a piecewise-constant value "
                    "converts).")


def _resolve_name(expr, frame):
    """The object a dotted name (``F``, ``self.flux``) of the user's frame refers to, or
    _UNRESOLVED (for a message: plain lookups only, nothing evaluated)."""
    parts = expr.split(".")
    if not all(p.isidentifier() for p in parts):
        return _UNRESOLVED
    scope = frame.f_locals
    obj = scope[parts[0]] if parts[0] in scope else frame.f_globals.get(parts[0], _UNRESOLVED)
    for p in parts[1:]:
        if obj is _UNRESOLVED:
            break
        d = getattr(obj, "__dict__", None)
        obj = d.get(p, _UNRESOLVED) if isinstance(d, dict) else _UNRESOLVED
    return obj


def _alias_of(obj, frame):
    """``(name, view)``: the attribute of a local object (``self.flux``), an item of a list or
    dict held in one (``self.bufs[1]``), or the global that holds ``obj`` or an array ``obj``
    is a view of (``view`` True), or None."""
    def same(val):
        if val is obj:
            return False
        if type(val) is np.ndarray and type(obj) is np.ndarray and np.may_share_memory(val, obj):
            return True
        return None

    def items(val):
        if type(val) in (list, tuple):
            return [(f"[{i}]", v) for i, v in enumerate(val)]
        if type(val) is dict:
            return [(f"[{k!r}]", v) for k, v in val.items()]
        return []

    for k, v in frame.f_locals.items():
        d = getattr(v, "__dict__", None)
        if isinstance(d, dict) and not isinstance(v, type(sys)):
            for attr, val in d.items():
                for suffix, item in [("", val)] + items(val):
                    view = same(item)
                    if view is not None:
                        return f"{k}.{attr}{suffix}", view
    for k, v in frame.f_globals.items():
        if not k.startswith("__"):
            for suffix, item in [("", v)] + items(v):
                view = same(item)
                if view is not None:
                    return f"{k}{suffix}", view
    return None


def _leftover_hint(target, frame):
    """Where the array written into is one an earlier differentiation left (``self.work`` made
    on a first call): that, and the fix; else ""."""
    array = target.split("[", 1)[0].strip()
    obj = _resolve_name(array, frame)
    if not (isinstance(obj, Tracer) and obj._level.closed):
        return ""
    from .errors import SpecificHint

    # (the cause alone: the buffer advice, mnp.zeros, is what made it: the rnea tester's cached workspace)
    return SpecificHint(
        f" `{array}` holds an array an earlier differentiation made (on an earlier call, inside the function, "
        "with mnp.zeros or of traced values) and left behind: once that differentiation ended it holds plain "
        "values, which a later one cannot write traced values into. Make the buffer inside the function on "
        "every call, or pass it as an argument.")


def _local_base(name, frame):
    """The local variable of ``frame`` holding the plain array that the local ``name`` is a
    view of (the largest such), or None."""
    obj = frame.f_locals.get(name)
    if type(obj) is not _ndarray or obj.base is None:
        return None
    best = None
    for k, v in frame.f_locals.items():
        if (k != name and type(v) is _ndarray and v.size > obj.size and np.may_share_memory(v, obj)
                and (best is None or v.size > best[1].size)):
            best = (k, v)
    return None if best is None else best[0]


_PLAIN_COPIES: dict = {}  # id(array) -> (a weak reference to it, the user's frame's (file, line)): plain copies
# np.array made of traced constants (they cannot hold traced values: a later write into one is named so)


def _note_plain_copy(v, frame):
    f = user_frame(frame)
    if f is None:
        return
    if len(_PLAIN_COPIES) > 256:
        for k in [k for k, (ref, _) in _PLAIN_COPIES.items() if ref() is None]:
            del _PLAIN_COPIES[k]
        if len(_PLAIN_COPIES) > 256:
            _PLAIN_COPIES.clear()
    _PLAIN_COPIES[id(v)] = (weakref.ref(v), (f.f_code.co_filename, f.f_lineno))


_NUMPY_CONVERSIONS = {getattr(np, n): n for n in ("array", "asarray", "asanyarray", "ascontiguousarray",
                                                   "asfortranarray", "require")}


def _made_by_conversion(name, frame):
    """(the function, its line) where the user's function last assigned its local ``name`` the result of a
    NumPy conversion (np.asfortranarray(...), np.require(...)) before the running line; None if it did not
    (or assigned it something else since), or its source cannot be read."""
    from .errors import _file_tree, _index_of

    code = frame.f_code
    tree = _file_tree(code.co_filename)
    if tree is None:
        return None
    lines = _index_of(tree)[2]
    made = None
    for line in range(code.co_firstlineno, frame.f_lineno):
        for node in lines.get(line, ()):
            if (type(node) is ast.Assign and node.lineno == line
                    and any(type(t) is ast.Name and t.id == name for t in node.targets)):
                fn = _named(node.value.func, frame) if type(node.value) is ast.Call else None
                made = (_NUMPY_CONVERSIONS[fn], line) if fn in _NUMPY_CONVERSIONS else None
    return made


def _plain_copy_of_constant(obj, array):
    """The hint for a write into ``obj`` (named ``array``), a plain copy np.array made of a traced
    constant, or a view of one; "" otherwise."""
    view = False
    while isinstance(obj, _ndarray):
        hit = _PLAIN_COPIES.get(id(obj))
        if hit is not None and hit[0]() is obj:
            from .errors import SpecificHint, _line_text

            src = _converted_argument(*hit[1])
            return SpecificHint(
                f" `{array}` is {'a view of ' if view else ''}a plain copy of a traced constant (an argument not "
                f"differentiated, or a value computed from such), made at {_line_text(*hit[1])}: np.array returns "
                "a plain ndarray (so do np.asfortranarray and np.require), which cannot hold traced values. Copy "
                f"it with {src}.copy() or np.copy({src}) (mnp.array({src}): import mutagrad.numpy as mnp), which "
                "stay traced.")
        obj, view = obj.base, True
    return ""


def _converted_argument(filename, lineno):
    """The text of the first argument of the np.array(...) call on that line ("x" if it cannot be read)."""
    try:
        tree = parse(linecache.getline(filename, lineno).strip())
    except SyntaxError:
        return "x"
    for node in ast.walk(tree):
        if type(node) is ast.Call and node.args and getattr(node.func, "attr", getattr(node.func, "id", None)) in (
                "array", "asfortranarray", "require"):
            return ast.unparse(node.args[0])
    return "x"


def _argument_named(obj):
    """The name of the argument of a running differentiation whose caller's array ``obj`` is, or None."""
    if not isinstance(obj, np.ndarray):
        return None
    for lv in reversed(STATE.levels):
        hit = lv.locked.get(id(obj)) if lv.locked else None
        if hit is not None and hit[0] is obj:
            return hit[2]
    return None


def _made_outside_hint(target, frame):
    """Where the array written into is a global or closed-over name of the user's function:
    made outside the differentiation, so plain even if mnp made it; or an array an earlier
    differentiation left."""
    if target is None or frame is None:
        return ""
    array = target.split("[", 1)[0].strip()
    for view in (".flat", ".real", ".imag", ".T", ".mT"):  # (`A.flat[::p + 1] += lam` writes into A: the glm
        if array.endswith(view):  # tester's message said `A.flat = np.empty_like(u)`, an attribute's fix)
            array = array[: -len(view)]
            target = array
            break
    name = array.split(".", 1)[0].strip()
    code = frame.f_code
    left = _leftover_hint(target, frame)
    if left:
        return left
    obj = _resolve_name(array, frame)
    copied = _plain_copy_of_constant(obj, array) if _PLAIN_COPIES else ""
    if copied:
        return copied
    if "." not in array and type(obj) is _ndarray and name in code.co_varnames:
        made = _made_by_conversion(name, frame)
        if made is not None:  # (K = np.asfortranarray(A.T @ A): NumPy's copy, made where mutagrad sees nothing)
            from .errors import SpecificHint

            return SpecificHint(
                f" `{name}` is made at line {made[1]} by np.{made[0]}(...), which NumPy computes through the "
                "array protocol: of a traced constant (an argument not differentiated, or a value computed from "
                "such) it returns a plain ndarray, which cannot hold traced values. Use "
                f"mnp.{made[0]}(...) (import mutagrad.numpy as mnp), which stays traced.")
        # `for buf in bufs: np.tanh(buf, out=buf)`: an element of a list made outside the function
        for k in code.co_freevars + code.co_names:
            held = frame.f_locals.get(k, frame.f_globals.get(k)) if k in code.co_freevars else frame.f_globals.get(k)
            items = held.values() if type(held) is dict else held if type(held) in (list, tuple) else ()
            if any(v is obj for v in items):
                return (f" `{array}` is an element of `{k}`, which was made outside the differentiated function "
                        "(a global or a closed-over name): there, mnp.zeros/mnp.empty make a plain ndarray too. "
                        "Make the buffers inside the function, or " + _as_an_argument(f"`{k}`") + ".")
    if "." not in array and isinstance(obj, np.ndarray) and name in code.co_varnames:
        # `F = self.flux; F[0] = ...`, `F = self.flux[1:]`; a helper's argument, by its callers
        found, f, at = None, frame, frame
        for _ in range(4):
            if f is None:
                break
            found, at = _alias_of(obj, f), f
            if found is not None:
                break
            f = f.f_back
            while f is not None and _frame_is_internal(f):
                f = f.f_back
        if found is not None and found[0] != array:
            alias, view = found
            outside = _made_outside_hint(alias.split("[", 1)[0] if "." in alias else alias, at)
            if outside:
                return f" `{array}` is {'a view of ' if view else ''}`{alias}`." + outside
    if "." in array and name.isidentifier():  # an attribute (self.du): perhaps made in __init__
        owner = _resolve_name(array.rsplit(".", 1)[0], frame)
        plain_obj = (owner is not None and hasattr(owner, "__dict__") and not dataclasses.is_dataclass(owner)
                     and not isinstance(owner, (types.ModuleType, type)))
        from .errors import SpecificHint

        # (the whole fix: the generic advice's mnp.empty, followed in __init__, makes a plain array again:
        # the pythonic tester's scratch buffer)
        return SpecificHint(
            f" `{array}` holds plain values: it was made outside the differentiated function (in __init__ run "
            "before it, at module level: mnp.zeros/mnp.empty make a plain ndarray there too), from plain values "
            "alone (np.zeros(n), even inside the function), or as a copy of an array the function reads from "
            "outside (`self.x = x0.copy()` of a global or closed-over x0). Make the buffer inside the "
            f"differentiated function, where the traced values are ({array} = np.empty_like(u) of a traced u, "
            f"mnp.zeros(...), mnp.array(x0); import mutagrad.numpy as mnp), or leave out= out ({array} = "
            "np.matmul(A, u)); or pass the arrays in: the array fields of a @dataclass argument arrive traced"
            + (", the attributes of a plain class's instance do not, even when it is an argument"
               if plain_obj else "") + "; or " + _as_an_argument() + ".")
    if not name.isidentifier() or name in code.co_varnames or name in code.co_cellvars:
        return ""
    if name not in code.co_freevars and name not in frame.f_globals:
        return ""
    arg = _argument_named(obj)
    if arg is not None:  # (np.add.at(F, ...) of a global F passed as argument f: "pass it as an argument" was
        from .errors import SpecificHint  # no fix: the mdsim tester)

        return SpecificHint(
            f" `{name}` (a global or a closed-over name) is the caller's array passed as {arg} of the differentiated "
            f"function: the function sees that argument traced, under the parameter that receives it, while `{name}` "
            "still names the caller's plain array. Write through that parameter instead, which is differentiated "
            "(the caller's array holds after the call what a plain call leaves).")
    return (f" `{name}` was made outside the differentiated function (a global or a closed-over name): "
            "there, mnp.zeros/mnp.empty make a plain ndarray too. Make the buffer inside the function, or "
            + _as_an_argument() + ".")


_OUTER_ARRAY = "an array the function closes over, reads as a global or takes as a default value"


def _as_an_argument(what="it", copy=False):
    """How to make an array traced by passing it in, for the differentiation running now: an
    argument not differentiated arrives traced (grad, jacobian, hessian); vjp and jvp
    differentiate every primal, so there it is a primal with a zero tangent. ``copy``: name
    mnp.array(x0) as the other way (vjp and jvp's text names it always)."""
    lv = STATE.levels[-1] if STATE.levels else None
    if lv is not None and lv.every:
        return (f"pass {what} as a primal of jvp with a zero tangent (of vjp, one whose cotangent you do not "
                "use): it then arrives traced, as do its copies, and holds after the call what a plain call "
                "leaves; or copy it with mnp.array(x0) (import mutagrad.numpy as mnp)")
    return (f"pass {what} as an argument (an argument you do not differentiate arrives traced, as do its copies, "
            "and holds after the call what a plain call leaves)"
            + ("; or copy it with mnp.array(x0) (import mutagrad.numpy as mnp)" if copy else ""))


def _structured_target(target, frame):
    """The structured dtype of the plain array the user's ``target`` expression writes into
    (``rec["u"]``, by the name before its subscript; ``v = rec["v"]; v[:] = ...``, a field's view), or None."""
    if frame is None:
        return None
    obj = _resolve_name(target.split("[", 1)[0].strip(), frame)
    return _structured_base(obj) if type(obj) is np.ndarray else None


def _structured_base(a):
    """The structured dtype of plain array ``a`` or of the array it views (a field's view), or None."""
    for _ in range(8):
        if not isinstance(a, np.ndarray):
            return None
        if a.dtype.names is not None:
            return a.dtype
        a = a.base
    return None


def _structured_error(target, fields):
    from .errors import WriteToPlainArrayError, escape_error

    return escape_error(
        f"writing a traced array into the field of the plain structured array `{target}` (dtype {fields})",
        WriteToPlainArrayError,
        " mutagrad traces arrays of floating-point or complex numbers, so a structured array's fields cannot "
        "hold derivatives (not even one mnp.zeros makes, nor an argument's): make one buffer per field instead "
        "(u = mnp.zeros(shape); v = mnp.zeros(shape), import mutagrad.numpy as mnp, or np.zeros_like(x) of a "
        "traced x), or pass the fields as separate arguments.", specific=True)


def _object_target(target, frame) -> bool:
    """Whether the user's ``target`` expression writes into a plain array of dtype object (by the name before
    its subscript)."""
    obj = _resolve_name(target.split("[", 1)[0].strip(), frame) if frame is not None else None
    return type(obj) is np.ndarray and obj.dtype == object


def _plain_copy_hint(target=None):
    """The fix for a traced value written into the plain array ``target`` (its name, or None), with the SciPy
    call that runs the code where it does (:func:`_scipy_callback_note`)."""
    caller = sys._getframe(1)
    advice = _plain_copy_advice(target, caller)
    note = _scipy_callback_note(caller) + _promotion_note(user_frame(caller))
    return type(advice)(advice + note) if note else advice  # (a SpecificHint stays one)


def _plain_copy_advice(target, caller):
    outside = _made_outside_hint(target, user_frame(caller))
    if outside:
        return outside
    if target is not None and "[" in target:
        # `b[[0, 1]][0] = v`: the target is itself indexed, a copy when the index is fancy
        return (f" If `{target}` is a fancy-indexed copy (an integer-array or mask index), the write "
                "changes nothing in the array it was taken from, as in NumPy: index the array itself "
                "in one subscript.")
    name = "the array" if target is None else f"`{target}`"
    return (f" If {name} is a copy of {_OUTER_ARRAY} (`{target or 'b'} = outer.copy()`, def f(theta, z0=Z0)), "
            + _as_an_argument("that array") + ".")


def _no_overwrite_by_scipy(frame):
    """A SciPy function called with ``overwrite_a=True`` (or another overwrite_ flag) on a traced
    constant: it gets a read-only array, which SciPy copies instead of overwriting, so the program
    would read the array's old values where a plain call reads the factors SciPy left in it.
    mutagrad.scipy's functions follow SciPy's overwrites."""
    flags = []  # (read off SciPy's own frames: a flag passed by position, by a variable, **kw or a partial)
    f = frame
    while f is not None:
        if (f.f_globals.get("__name__") or "").startswith("scipy."):
            flags += [k for k, v in f.f_locals.items() if k.startswith("overwrite_") and type(v) in (bool, int) and v]
        elif flags or not _frame_is_internal(f):
            break
        f = f.f_back
    lib = _calling_scipy(frame) if flags else None  # (its name: only for the message)
    if lib is not None:
        name, sub, _ = lib
        raise escape_error(
            f"scipy.{sub}.{name}(..., {flags[0]}=True) on a traced array (SciPy would overwrite it in place, "
            "which mutagrad cannot see: it gets a read-only array, copies it, and the program would read "
            "the old values after the call)", TracerEscapeError,
            f" Use mutagrad.scipy.{sub}.{name} (import mutagrad.scipy.{sub}), which overwrites as SciPy "
            f"does and is differentiated, or drop {flags[0]}=True.", specific=True)


def _shown_by_handed_out(s, dest, idx) -> bool:
    """Whether a plain array np.asarray handed out of storage ``s`` (still alive) shows the
    elements ``dest[idx]`` (all of ``dest`` for an index that is not basic)."""
    region = bottom(dest)
    if idx is not None and _is_basic(idx):
        t = idx if type(idx) is tuple else (idx,)
        region = region[t if any(i is Ellipsis for i in t) else t + (Ellipsis,)]  # (a view, 0-d for an element)
    for r in s.handed_out_refs:
        h = r()
        if h is not None and (not isinstance(region, _ndarray) or np.may_share_memory(h.array, region)):
            return True
    return False


class _HandedOut:
    """The memory of a constant handed out as a plain array (np.asarray(c)), as the base of that
    array. An object that is no array stops NumPy's collapse of a view's base chain at the array
    handed out: every view NumPy makes of it (np.asarray(c)[1:], .T, .reshape) has it as its base
    (a plain view of the memory would have the memory's owner), so a weak reference to this
    object tells whether any plain array that shows the memory is still alive."""

    __slots__ = ("__array_interface__", "__weakref__", "array", "line")

    def __init__(self, b, line=None):
        self.array = b  # (keeps the memory alive)
        self.__array_interface__ = b.__array_interface__
        self.line = line  # (where it was handed out)


def _handed_out_at(a):
    """The line where the memory of the plain array ``a`` was handed out by a traced array
    (np.asarray of a constant: a _HandedOut among its bases), or None."""
    for _ in range(8):
        a = getattr(a, "base", None)
        if a is None:
            return None
        if type(a) is _HandedOut:
            return a.line
    return None


def handed_out_error(s):
    return MutationError(
        f"a traced value written at {user_line()} into an array whose memory np.asarray (or np.array(..., "
        f"copy=False)) handed out as a plain array at {s.handed_out}: that plain array would show the new "
        "values without their derivative. Make the plain array a copy (np.array(p)), or write into a copy "
        "of this array.")


def layout_satisfies(b, order) -> bool:
    """Whether the plain array ``b`` is laid out as ``order`` asks of an array that is not copied:
    'C' or 'F' contiguous, 'A' either, 'K' (or None) any layout."""
    if order == "C":
        return b.flags.c_contiguous
    if order == "F":
        return b.flags.f_contiguous
    if order == "A":
        return b.flags.c_contiguous or b.flags.f_contiguous
    return True


def in_order(res, order, like=None):
    """``res``, a new array, laid out as NumPy lays out a copy made with ``order`` of an array
    laid out as ``like`` (None: a new array from a list, as np.array makes it): 'C', 'F', 'A' (F for a
    Fortran- and not C-contiguous ``like``, else C), 'K' (``like``'s order of axes)."""
    b = bottom(res)
    if not isinstance(res, Tracer) or np.ndim(b) < 2:
        return res
    lb = bottom(like) if like is not None else None
    if order in (None, "K") and isinstance(lb, _ndarray) and lb.shape == b.shape:
        return numpy_layout(res, np.empty_like(lb, dtype=b.dtype).strides)
    if order == "A" and isinstance(lb, _ndarray):
        order = "F" if lb.flags.fnc else "C"
    return numpy_layout(res, np.empty(b.shape, b.dtype, order="F" if order == "F" else "C").strides)


def numpy_layout(res, strides):
    """``res``, a new array a rule computed (C-ordered, or in a gather's order), in the
    memory layout of NumPy's own result, whose ``strides`` are given (an accumulation or a
    sort of a transposed array keeps its layout). The layout is seen: ``t.reshape(-1)`` is
    a view of a C-ordered t and a copy of another, and a write through it reaches t or not."""
    b = bottom(res)
    if not isinstance(res, Tracer) or np.ndim(b) < 2 or b.strides == tuple(strides):
        return res
    order = sorted(range(b.ndim), key=lambda k: -abs(strides[k]))  # (outermost first, as NumPy lays it out)
    back = [order.index(k) for k in range(b.ndim)]
    return np.transpose(np.transpose(res, order).copy(order="C"), back)


def _overlaps_an_item(seq, memory, depth=0) -> bool:
    """Whether an array in (nested) list or tuple ``seq`` may share memory with plain array ``memory``."""
    for v in seq:
        tv = type(v)
        if tv is list or tv is tuple:
            if depth < 32 and _overlaps_an_item(v, memory, depth + 1):
                return True
        elif tv is ArrayTracer or tv is _ndarray:
            b = bottom(v)
            if type(b) is _ndarray and np.may_share_memory(b, memory):
                return True
    return False


def _sequence_shape(seq):
    """The shape NumPy finds for (nested) list or tuple ``seq`` of arrays and numbers (on the
    stand-ins mnp.array finds its dtype with), or None if its items do not have one shape."""
    from .numpy import _stand_ins

    try:
        return np.shape(_stand_ins(seq))
    except ValueError:  # (ragged)
        return None


def _view_at(dest, idx):
    """``dest[idx]`` for a basic index, as a view even where it names one element (a 0-d view)."""
    parts = idx if type(idx) is tuple else (idx,)
    return dest[parts if Ellipsis in parts else parts + (Ellipsis,)]


def _write_in_order(region, seq):
    """``region[...] = seq``, a (nested) list or tuple of region's shape, as NumPy assigns it:
    item after item, each array read when it is assigned, so that an item that is a view of
    the destination shows what earlier items wrote (``A[:] = [A[1], A[0]]`` makes both rows
    A[1]'s). NumPy does so where the sequence has the destination's shape (else it converts
    the sequence first, then broadcasts), for a basic index (else it converts first)."""
    for k, v in enumerate(seq):
        tv = type(v)
        if tv is list or tv is tuple:
            _write_in_order(region[k, ...], v)
        else:
            write(region, (k, Ellipsis), v)


def _scalar_out():
    """out=h[1]: a NumPy scalar, which NumPy refuses as an out= and cannot change (of a plain buffer too, where
    mnp.zeros would not help: the climate and regress68 testers)."""
    raise TypeError(f"return arrays must be of ArrayType: the out= at {user_line()} is a NumPy scalar (an element "
                    "h[k] of an array), which cannot be written into, as in NumPy; pass the element as a 0-d view, "
                    "out=h[k, ...], or write the result, h[k] = ...")


def write(dest, idx, value):
    """``dest[idx] = value`` with every level that needs to see it."""
    vt = type(value)
    if issubclass(vt, Tracer) and value._level.closed:
        value = live(value)
        vt = type(value)
    if isinstance(dest, Tracer) and dest._level.closed:
        dest = live(dest, True)  # (a pullback still to be called that reads it: see _note_leftover_read)
    if type(dest) is ScalarTracer:
        _scalar_out()
    if not isinstance(dest, Tracer):
        if isinstance(dest, np.generic):
            _scalar_out()
        if issubclass(vt, Tracer):
            if not value._plain_constant():
                value._check_thread()
                uframe = user_frame(sys._getframe(1))
                shown = _handed_out_at(dest)
                if shown is not None:  # (a plain view of a traced buffer's memory: as_strided(b, ...))
                    raise escape_error(
                        f"writing a traced value into a plain array that shows the memory of a traced array "
                        f"(handed out as a plain array at {shown}: np.asarray, NumPy's as_strided)",
                        WriteToPlainArrayError, " A write through it is not recorded. Make the view with "
                        "mnp.as_strided(...) (import mutagrad.numpy as mnp), which is differentiated, or write "
                        "through the traced array itself.", specific=True)
                aug = plain_augassign_target(uframe)
                if aug is not None:
                    t, op = aug
                    code = uframe.f_code
                    outside = _made_outside_hint(t, uframe)
                    if outside:  # (self.fb made in __init__, a global buffer, a leftover: no copy to blame)
                        raise escape_error(f"the in-place operation `{t} {op}= ...` on the array `{t}`",
                                           WriteToPlainArrayError, outside)
                    made = (f" Make it traced where it is made: if it is a copy of {_OUTER_ARRAY} (`x = x0.copy()`, "
                            "def f(theta, x0=X0)), " + _as_an_argument("that array", copy=True) + ".")
                    if t in code.co_varnames[:code.co_argcount + code.co_kwonlyargcount]:
                        # a helper updating its caller's array (`def step(W, g): W -= lr * g`)
                        hint = (f" `{t}` is an argument of {code.co_name}, and the array it was given was made "
                                "from plain values only, so it cannot hold a derivative; rebinding it here "
                                f"(`{t} = {t} {op} ...`) would leave the caller's array unchanged." + made)
                    elif (base := _local_base(t, uframe)) is not None:
                        # `V = state[:, 0]; V += ...` with state = np.zeros(...): rebinding V would leave
                        # state unchanged, which is not what the code means
                        hint = (f" `{t}` is a view of `{base}`, which was made from plain values only, so it "
                                f"cannot hold a derivative. Make `{base}` with mnp.zeros(...) or mnp.empty(...) "
                                "(import mutagrad.numpy as mnp), or np.zeros_like(x) of a traced x, where it is "
                                "made: then it and its views hold traced values (rebinding "
                                f"`{t} = {t} {op} ...` would leave `{base}` unchanged).")
                    else:
                        hint = (f" `{t}` was made from plain values only, so it cannot hold a derivative. An "
                                "in-place operator on such an array gives a variable a new traced array only where "
                                "nothing else refers to the array (no other name, view, container or weak "
                                "reference, which would not see the new one) and its memory is contiguous (not "
                                "a strided view: np.fft.fft(x).real, a[::-1]); else, or for an attribute or an "
                                f"item, write `{t} = {t} {op} (...)`, which makes a new array, where that is "
                                "meant (the other references keep the old values)." + made)
                    raise escape_error(f"the in-place operation `{t} {op}= ...` on the plain NumPy array `{t}`",
                                       WriteToPlainArrayError, hint, specific=hint.startswith(f" `{t}` is a view"))
                lib = _calling_numpy_python(sys._getframe(1))
                if lib is not None and lib[0] in ("np.full", "np.full_like"):  # (np.copyto of its fill value)
                    raise escape_error(
                        f"{lib[0]} with a traced fill value (NumPy copies it into a plain array)",
                        WriteToPlainArrayError, f" Use mnp.{lib[0][3:]}(...) (import mutagrad.numpy as mnp), which "
                        "is differentiated, or x * np.ones(shape).")
                frame = user_frame(sys._getframe(1))
                target = plain_write_target(frame)
                if target is None:  # (out=, np.copyto, a.fill, ufunc.at: the array the call writes into)
                    target = plain_call_target(frame)
                d = bottom(dest)
                if getattr(d, "dtype", None) is not None and d.dtype.kind in "biu" and bottom(value).dtype.kind in "fc":
                    raise escape_error("writing a traced value into the plain integer array" + (
                        "" if target is None else f" `{target}`"), WriteToPlainArrayError, integer=d.dtype)
                held = _resolve_name(target, frame) if target is not None and frame is not None else None
                if type(held) in (list, tuple, dict):  # Fs[j % 2] += ...: an item of a container
                    kind = type(held).__name__
                    raise escape_error(
                        f"writing a traced value into a plain NumPy array, an item of the {kind} `{target}`",
                        WriteToPlainArrayError, f" The {kind}'s arrays are plain (made with np.zeros(...), or copies "
                        "of plain arrays: a.copy() of a global or closed-over array): make them with mnp.zeros(...) "
                        "(import mutagrad.numpy as mnp) or np.zeros_like(x) of a traced x, or pass the plain arrays "
                        "they copy as arguments not differentiated (traced constants, whose copies can hold traced "
                        "values), so that they hold traced values.", specific=True)
                f = scipy_caller(sys._getframe(1))
                if f is not None:
                    err = _scipy_escape(f)  # (SciPy's own code writes it: scipy.optimize.fixed_point's np.full_like)
                    if err is not None:
                        raise err
                fields = _structured_base(d)
                if fields is not None:  # (parts['v'] -= k * parts['x'] of a structured argument: regress123)
                    raise _structured_error(target or "x", fields)
                raise escape_error("writing a traced value into a plain NumPy array" + (
                    "" if target is None else f" `{target}`"), WriteToPlainArrayError,
                    _plain_copy_hint(target))
            value = bottom(value)  # a pristine constant may be read as plain values (as float(x))
        dest[idx] = value
        return
    if WRITTEN_ARGS and (vt is _ndarray or (issubclass(vt, Tracer) and value._level is not dest._level)):
        _check_argument_read(value)
    if vt is complex or vt is list or vt is tuple or vt is ScalarTracer:
        refuse_python_complex(dest, value)
    while issubclass(vt, Tracer) and value._level.id > dest._level.id:
        if not _carries_derivative(value):  # an inner level's constant: its outer value is written
            value = value._value
            vt = type(value)
            continue
        raise MutationError(
            f"a value traced by an inner differentiation is written at {user_line()} into an "
            "array created outside it; the inner derivative would leak out. Create the buffer "
            "inside the inner function (mnp.zeros / np.zeros_like), or copy it there first; " + _KEEP_AUX)
    if vt is list or vt is tuple:
        shape = _sequence_shape(value) if _is_basic(idx) else None  # (a mask, an index array: NumPy's errors)
        if shape is not None and len(shape) > 1:
            region = np.shape(bottom(dest)[idx])
            if len(shape) > len(region):  # (NumPy's error: a nested list deeper than the elements written)
                np.empty(region, bottom(dest).dtype)[...] = np.zeros(shape).tolist()
        if _is_basic(idx) and _overlaps_an_item(value, bottom(dest)):
            region = _view_at(dest, idx)
            if type(region) is ArrayTracer and shape == region.shape:
                _write_in_order(region, value)
                return
        from .numpy import array as _mnp_array

        value = _mnp_array(value)
    if dest._storage.outer_view and isinstance(value, Tracer) and value._level is dest._level and (
            _carries_derivative(value)):
        raise MutationError(
            f"a value traced by an inner differentiation is written at {user_line()} into a view of "
            "an array created outside it; the inner derivative would leak out (and the outer "
            "array, read elsewhere, would not carry it). Create the buffer inside the inner "
            "function (mnp.zeros / np.zeros_like), or copy the outer array there first; " + _KEEP_AUX)
    g = dest._geom
    if g is not None and g.overlap and _is_basic(idx):
        # a write through a self-overlapping view (sliding windows) into elements that are distinct
        # memory: through the view of those elements (a 0-d view for an element)
        if not bottom(dest).flags.writeable:
            raise ValueError("assignment destination is read-only")  # (NumPy's: np.broadcast_to's view)
        sub = _view_at(dest, idx)
        if type(sub) is ArrayTracer and sub._geom is not None and not sub._geom.overlap:
            write(sub, Ellipsis, value)
            return
    if type(idx) is tuple and _ndarray in map(type, idx) and any(
            type(i) is _ndarray and i.dtype == bool for i in idx):  # (the map: cheap for element writes)
        if len(idx) == 1:
            idx = idx[0]  # (x[(mask,)] is x[mask])
        else:
            _check_mask(dest, idx)  # (a mask beside other indices: NumPy's checks, also where it selects nothing)
    if type(idx) is _ndarray and idx.dtype == bool:
        _check_mask(dest, idx)
        db = bottom(dest)
        full = idx.ndim == db.ndim
        if full and isinstance(value, Tracer) and value.ndim > 1:
            raise TypeError("NumPy boolean array indexing assignment requires a 0 or 1-dimensional input, input has "
                            f"{value.ndim} dimensions")
        if full and type(value) is ArrayTracer and value.size == 1 and _meets_in_part(dest, value):
            # (NumPy reads a one-element value again at every element of a boolean-mask write)
            one_value_in_order(dest, np.flatnonzero(idx), value.reshape(()))
            return
        if full and isinstance(value, Tracer) and value.size > 1 and np.may_share_memory(db, bottom(value)):
            pos = np.flatnonzero(idx)
            if value.size != pos.size:
                raise ValueError(f"NumPy boolean array indexing assignment cannot assign {value.size} input "
                                 f"values to the {pos.size} output values where the mask is true")
            src = mask_copy_sources(db, idx, bottom(value))
            if src is not None:  # what NumPy leaves: a gather of the value's elements as they were
                bind_with("write", dest, idx, np.reshape(value, -1)[src])
                return
            how = _mask_write_mode(db, idx, bottom(value))  # (a layout element numbers cannot mirror)
            if how == "copy":
                bind_with("write", dest, idx, np.copy(value))
            elif how == "runs":
                flat = np.reshape(value, -1)
                for a, b in _mask_runs(pos):
                    write(dest, np.unravel_index(pos[a:b], db.shape), np.copy(flat[a:b]))
            elif how == "elements":
                write_in_order(dest, pos, value)
            else:
                raise MutationError(
                    f"a boolean-mask write at {user_line()} of a value that shares memory with the array in a "
                    "layout whose copy order mutagrad cannot tell (NumPy's result is neither a copy of the value, "
                    "nor run by run, nor element by element): write a copy of the value (x[m] = v.copy()).")
            return
    if type(value) is ArrayTracer and value.ndim == 0 and _view_index(idx) and _reread_scalar(dest, value):
        sub = dest if idx is Ellipsis else dest[idx]
        if sub.ndim:
            scalar_in_memory_order(sub, value)
            return
    if isinstance(value, Tracer) and value.ndim:
        order = copy_order(bottom(dest), idx, bottom(value))
        if order is not None:  # NumPy's unbuffered copy reads elements it has overwritten
            copy_in_order(dest[idx], value, order)
            return
    bind_with("write", dest, idx, value)


def scalar_in_memory_order(dest, value, mask=None):
    """``dest[...] = value`` (``dest[mask] = value``) as NumPy assigns a 0-d source of dest's dtype
    that shares part of dest's memory: it reads the source's memory itself at every element
    (a raw scalar, no buffer), in dest's memory order (its iteration sorts the axes by stride and
    walks negative strides backwards), so each element gets the source as the earlier ones left it."""
    db = bottom(dest)
    offsets = element_offsets(db.shape, db.strides, _ptr(db)).ravel()
    order = np.argsort(offsets, kind="stable")
    if mask is not None:
        order = order[np.ravel(np.broadcast_to(mask, db.shape))[order]]
    one_value_in_order(dest, order, value, offsets)


def one_value_in_order(dest, order, value, offsets=None):
    """``dest.flat[k] = value`` for ``k`` in ``order``, each element reading the size-one ``value``
    as the elements before left it: element by element only where an element's bytes meet the
    value's (``offsets``: the elements' addresses, dest's own by default), the runs between them
    in one write each (the value is the same for every element of a run)."""
    db = bottom(dest)
    if offsets is None:
        offsets = element_offsets(db.shape, db.strides, _ptr(db)).ravel()
    vb = bottom(value)
    lo = _ptr(vb)
    hit = (offsets[order] < lo + vb.itemsize) & (offsets[order] + db.itemsize > lo)
    start = 0
    for j in list(np.flatnonzero(hit)) + [len(order)]:
        if j > start:  # (a run that does not touch the value: it reads one value)
            write(dest, np.unravel_index(order[start:j], db.shape), value)
        if j < len(order):
            write(dest, tuple(int(i) for i in np.unravel_index(int(order[j]), db.shape)), value)
        start = j + 1


def _meets_in_part(dest, value) -> bool:
    """Whether the one-element ``value`` shares part of an element of ``dest`` (not a whole one
    of its dtype: another itemsize, or an offset off dest's grid)."""
    vb, db = bottom(value), bottom(dest)
    if type(vb) is not _ndarray or not np.may_share_memory(db, vb):
        return False
    item = db.itemsize
    return bool(vb.itemsize != item or (_ptr(vb) - _ptr(db)) % item or any(st % item for st in db.strides))


def _mask_runs(pos):
    """The runs (start, stop) of consecutive flat positions ``pos`` (a mask's True elements)."""
    cut = np.flatnonzero(np.diff(pos) != 1) + 1
    edges = np.concatenate(([0], cut, [len(pos)]))
    return [(int(a), int(b)) for a, b in itertools.pairwise(edges)]


def replicas(*arrays):
    """Copies of the plain ``arrays`` in one new buffer, laid out as they are in memory: their
    strides, their offsets from one another (what they share, they share), their addresses
    modulo 64 and their values, all of which NumPy (and SciPy's LAPACK wrappers) decide by.
    Returns (the buffer's bytes, the copies)."""
    if any(a.size == 0 for a in arrays):
        return np.empty(0, np.uint8), [a.copy() for a in arrays]
    bounds = [_byte_bounds(a) for a in arrays]
    lo, hi = min(b[0] for b in bounds), max(b[1] for b in bounds)
    buf = np.empty(hi - lo + 64, np.uint8)
    start = (lo - buf.ctypes.data) % 64
    region = buf[start:start + hi - lo]
    copies = [np.ndarray(a.shape, a.dtype, buffer=region, offset=_ptr(a) - lo, strides=a.strides) for a in arrays]
    for c, a in zip(copies, arrays):
        c[...] = a
    return region, copies


def _mask_write_mode(db, mask, vb):
    """How NumPy's ``db[mask] = vb`` reads a ``vb`` sharing memory with ``db``: "copy" (the value
    copied first), "runs" (each run of consecutive True elements moved as a block, reading the value
    as the runs before left it), "elements" (one element at a time), or None (none of those), asked of
    NumPy on replicas of the memory the two arrays span, in the same layout (offsets, strides,
    alignment), filled with other bytes."""
    region, (d, v) = replicas(db, vb)
    fill = np.arange(region.size, dtype=np.uint8) * 37 + 11  # (distinct neighbouring bytes)
    pos = np.flatnonzero(mask)
    vf = v.reshape(-1) if v.ndim else v.reshape(1)

    def result(step):
        region[...] = fill
        with np.errstate(all="ignore"):
            step()
        return region.copy()

    want = result(lambda: d.__setitem__(mask, v))
    ways = {
        "copy": lambda: d.__setitem__(mask, v.copy()),
        "runs": lambda: [d.__setitem__(np.unravel_index(pos[a:b], d.shape), vf[a:b].copy())
                         for a, b in _mask_runs(pos)],
        "elements": lambda: [d.__setitem__(np.unravel_index(p, d.shape), vf[k]) for k, p in enumerate(pos)],
    }
    for how, step in ways.items():
        if np.array_equal(result(step), want):
            return how
    return None


def _check_mask(dest, idx):
    """NumPy's IndexError for a boolean index that does not fit dest's leading axes (checked also
    where it selects nothing, which writes nothing): NumPy's own indexing of a stand-in."""
    np.broadcast_to(np.empty((), bool), np.shape(bottom(dest)))[idx]


def element_offsets(shape, strides, start=0):
    """The offset of every element of an array of ``shape`` and ``strides`` (in bytes, or in
    the unit the strides are given in), from ``start``: an array of ``shape``."""
    off = np.full(shape, start, dtype=np.intp)
    for ax, (n, st) in enumerate(zip(shape, strides)):
        sh = [1] * len(shape)
        sh[ax] = n
        off = off + (np.arange(n, dtype=np.intp) * st).reshape(sh)
    return off


def _reread_scalar(dest, value, raw=True) -> bool:
    """Whether NumPy's copy of the 0-d ``value`` into ``dest`` reads it again at every step: a view
    of ``dest``'s memory of its dtype (no cast: the copy does not buffer it), which a step may change."""
    vb = bottom(value)
    if type(vb) is not _ndarray or vb.dtype != bottom(dest).dtype or not _meets_in_part(dest, value):
        return False  # (a whole element of dest's grid: every step writes the same value, so a read again reads it)
    # NumPy's assignment of a raw scalar (``raw``: x[...] = v, np.copyto) copies it first where its
    # address is not aligned for the integer copies of its itemsize (a complex64 at an odd float32 is
    # read once); its element loops (x.flat, np.place) read it where it is
    p, align = _ptr(vb), _UINT_ALIGN.get(vb.itemsize, 0)
    return not raw or bool(align and not p % align and not p % vb.dtype.alignment)


_UINT_ALIGN = {1: 1, 2: 2, 4: 4, 8: 8, 16: 8}  # (npy_uint_alignment: 16-byte items go as two uint64)


def refuse_python_complex(dest, value):
    """NumPy's TypeError for a Python complex (traced too), alone or in a (nested) list or tuple,
    written into a real or integer array: NumPy converts it with float() (int()), which refuses it."""
    c = _python_complex_in(value)
    if c is not None and np.result_type(bottom(dest)).kind != "c":
        np.empty((), np.result_type(bottom(dest)))[()] = c  # (raises NumPy's own TypeError)


def _python_complex_in(v):
    tv = type(v)
    if tv is complex:
        return v
    if tv is ScalarTracer:  # (a traced Python complex: a weak complex scalar)
        b = bottom(v)
        return b.item() if b.dtype.kind == "c" and weak(v) else None
    if tv is list or tv is tuple:
        for i in v:
            c = _python_complex_in(i)
            if c is not None:
                return c
    return None


def _vectorize_error(vec, frame):
    """The error for np.vectorize (``vec``) converting a traced value: its arguments, or the results of a
    function closing over traced values (with otypes=, NumPy converts them with float)."""
    fname = getattr(vec.pyfunc, '__name__', 'f')
    f = _vectorized_function_name(vec, fname, user_frame(frame))
    try:
        nargs = sum(p.default is inspect.Parameter.empty and p.kind in (
            inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
            for p in inspect.signature(vec.pyfunc).parameters.values())
    except (TypeError, ValueError):
        nargs = 1
    call, loop = ((f"{f}(x)", f"mnp.array([{f}(v) for v in x])") if nargs <= 1 else
                  (f"{f}(x, y, ...)", f"mnp.array([{f}(*vs) for vs in zip(x, y, ...)])"))
    return NoRuleError(
        f"np.vectorize({fname}) was given traced values at {user_line()}: it calls the Python function on "
        "plain elements and converts its arguments and results (values the function closes over among them) "
        "to plain arrays, so the derivative would be lost. Use mnp.vectorize instead (import mutagrad.numpy as mnp): "
        f"mnp.vectorize({fname}, ...) with the same arguments, or @mnp.vectorize for @np.vectorize; it "
        "calls the function as NumPy does, on traced elements, and is differentiated. If the function "
        f"is written with NumPy operations, calling it on the traced arrays themselves ({call}) is "
        f"faster (a loop over the elements, {loop}, works too).")


def _calling_vectorize(frame):
    """The np.vectorize object whose call converts a traced argument on the stack at
    ``frame`` (NumPy's own frames only), or None."""
    f = frame
    for _ in range(6):
        if f is None or not (f.f_globals.get("__name__", "") or "").startswith("numpy"):
            return None
        me = f.f_locals.get("self")
        if isinstance(me, np.vectorize):
            return me
        f = f.f_back
    return None


_NDINDEX_HINT = (" Loop over the indices instead (for i in np.ndindex(x.shape): v = x[i], or x[i] = ...), "
                 "which is differentiated.")


def _reducing_an_object_array(frame):
    """The NumPy function (its name: "mean", "median", "var"...) the user called whose mean (numpy/_core/
    _methods.py) of an object array runs at ``frame`` or above it (it converts the sum of the elements, a
    traced scalar, with its dtype's type: the structured tester's a.mean() of an object array filled with
    traced values), or None."""
    f, found = frame, False
    while f is not None and (f.f_globals.get("__name__", "") or "").startswith("numpy"):
        if not found and f.f_globals.get("__name__") == "numpy._core._methods" and f.f_code.co_name in (
                "_mean", "_var", "_std"):
            arr = f.f_locals.get("arr", f.f_locals.get("a"))
            if not (isinstance(arr, np.ndarray) and arr.dtype == object):
                return None
            found = True
        name = f.f_code.co_name.lstrip("_")  # (the outermost NumPy frame: the function called, a.mean's _mean)
        f = f.f_back
    return name if found else None


def _calling_numpy_python(frame):
    """(name, dispatched) of the outermost NumPy function written in Python on the stack
    above ``frame``, if the user called it directly (the next frame out is the user's): a
    function mutagrad does not handle (np.polynomial, np.poly1d's arithmetic) converting
    its traced arguments, or (dispatched) one NumPy dispatches to mutagrad, which did not
    see the traced values (np.mean of a list of them)."""
    top = None
    f = frame
    while f is not None:
        mod = f.f_globals.get("__name__", "") or ""
        if mod == "numpy" or mod.startswith("numpy."):
            top = f
        elif top is not None:
            break
        f = f.f_back
    if top is None or f is None or _frame_is_internal(f):
        return None
    mod = top.f_globals.get("__name__", "")
    qual = top.f_code.co_qualname
    if "<" in qual:
        # (np.ma.sum, np.ma.mean...: np.ma's _frommethod wrapper, named by the method it calls)
        meth = top.f_locals.get("methodname") if mod.startswith("numpy.ma") else None
        return (f"np.ma.{meth}", False) if type(meth) is str else None
    fn = top.f_globals.get(qual)
    if fn is not None and hasattr(fn, "_implementation") and getattr(fn, "__name__", None) == qual:
        return qualname(fn), True
    this = top.f_locals.get("self")
    if this is not None and "." in qual:  # a method: named by the object's class (Chebyshev, not its base)
        mod, qual = type(this).__module__, type(this).__name__ + "." + qual.rpartition(".")[2]
    qual = qual.removesuffix(".__init__")
    if mod.startswith("numpy.polynomial"):
        return "np." + mod[len("numpy."):] + "." + qual, False
    for sub in ("ma", "linalg", "fft", "random"):  # (public subpackages: np.ma.masked_invalid)
        if mod == f"numpy.{sub}" or mod.startswith(f"numpy.{sub}."):
            return f"np.{sub}.{qual}", False
    return "np." + qual, False  # (np.poly1d.__truediv__, ...: NumPy's public names)


def _calling_at(frame) -> bool:
    """Whether the user's ``frame`` is at a call instruction (not a store: a write into an array)."""
    if frame is None:
        return False
    for ins in dis.get_instructions(frame.f_code):
        if ins.offset == frame.f_lasti:
            return ins.opname.startswith("CALL")
    return False


# what works with an installed package that converts traced arrays (see Tracer.__array__)
_PACKAGE_HINTS = {
    "xarray": (" xarray keeps a duck array it is given as it is: a DataArray of a pint Quantity, "
               "xr.DataArray(x * ureg.dimensionless, dims=...), holds the traced array and is differentiated "
               "(pint's Quantity asks mutagrad first: docs/design.md)."),
    "pandas": " pandas stores plain NumPy arrays only: keep the traced values in arrays (np.* on them).",
}
_AS_IT_IS = (" x is an array already (a traced one): leave the conversion out{fix}; in code that also runs on "
             "plain values, write mnp.{name}(x) (import mutagrad.numpy as mnp), which keeps a traced array traced{how}, "
             "stacks a list of traced values and converts anything else as np.{name} does.")


def _users_function(fn) -> bool:
    """Whether ``fn`` is a Python function of the user's (not NumPy's, SciPy's or mutagrad's), which may return
    a tuple as well as an array."""
    while True:  # (a bound method's function, a functools.partial's)
        inner = getattr(fn, "__func__", None) if type(fn) is types.MethodType else (
            fn.func if type(fn) is functools.partial else None)
        if inner is None:
            break
        fn = inner
    return type(fn) is types.FunctionType and not (fn.__module__ or "").startswith(("numpy", "scipy", "mutagrad"))


# NumPy's converters of one array, and the fix for each when it is given a traced array
_CONVERTERS = {
    "asarray": _AS_IT_IS.format(fix=" (x.astype(dtype) for another dtype)", name="asarray", how=" (as it is)"),
    "asanyarray": _AS_IT_IS.format(fix=" (x.astype(dtype) for another dtype)", name="asanyarray", how=" (as it is)"),
    "array": (" For a copy, write x.copy() (x.astype(dtype) for another dtype), or mnp.array(x) (import "
              "mutagrad.numpy as mnp), which takes plain and traced values and lists of them."),
    "ascontiguousarray": _AS_IT_IS.format(fix=" (x.copy(order='C') for a C-ordered copy)", name="ascontiguousarray",
                                          how=" (a C-ordered copy where it is not one)"),
    "asfortranarray": _AS_IT_IS.format(fix=" (x.copy(order='F') for a Fortran-ordered copy)", name="asfortranarray",
                                       how=" (a Fortran-ordered copy where it is not one)"),
    "require": _AS_IT_IS.format(fix=" (x.copy(order='C' or 'F') or x.astype(dtype) for what the requirements ask)",
                                name="require", how=" (a copy where the requirements ask for one)"),
}


# a distribution's methods that mutagrad.scipy.stats hands to SciPy's (no rule): summaries of its parameters
_DISTRIBUTION_SUMMARIES = ("entropy", "mean", "var", "std", "median", "moment", "stats", "interval", "expect",
                           "support")

_STATISTICS_TWINS = {"mean": "np.mean(x)", "fmean": "np.mean(x)", "median": "np.median(x)", "variance":
                     "np.var(x, ddof=1)", "pvariance": "np.var(x)", "stdev": "np.std(x, ddof=1)", "pstdev":
                     "np.std(x)", "geometric_mean": "np.exp(np.mean(np.log(x)))",
                     "harmonic_mean": "len(x) / np.sum(1 / x)"}


def _calling_statistics(frame):
    """The name of the statistics-module function the user called, if ``frame`` runs inside it."""
    name = None
    while frame is not None and (frame.f_globals.get("__name__") or "") == "statistics":
        name = frame.f_code.co_name
        frame = frame.f_back
    return None if name is None or name.startswith("_") else name


def _statistics_error(name, into):
    """The error for statistics.<name>(...) of traced values, which converts them ``into`` plain
    values: NumPy's twin is the fix."""
    twin = _STATISTICS_TWINS.get(name)
    return escape_error(
        f"statistics.{name}(...) of traced values (it converts them {into})", TracerEscapeError,
        f" Use NumPy's {twin} instead, which takes traced values." if twin else
        " Write it with NumPy's functions (np.mean, np.var...), which take traced values.", specific=True)


_TRUTH_TIE = [None]  # (rules.elementwise's check of a differentiated number that is 0, tested for its truth)


def library_caller(frame) -> bool:
    """Whether the first frame from ``frame`` out that is not mutagrad's is NumPy's or SciPy's code (np.isclose's
    own x == y), not the user's."""
    while frame is not None and (frame.f_globals.get("__name__") or "").startswith("mutagrad"):
        frame = frame.f_back
    return frame is not None and (frame.f_globals.get("__name__") or "").startswith(("numpy", "scipy"))


def scipy_caller(frame):
    """The first frame from ``frame`` out that is not mutagrad's or NumPy's, if it is SciPy's code; else None."""
    while frame is not None and (frame.f_globals.get("__name__") or "").startswith(("mutagrad", "numpy")):
        frame = frame.f_back
    return frame if frame is not None and (frame.f_globals.get("__name__") or "").startswith("scipy") else None


def _scipy_escape(caller):
    """The error for a traced value converted to plain values inside a SciPy function the user
    called (``caller``: the converting code's frame), naming it and its fix; None elsewhere."""
    if not _scipy_inside(caller):
        return None
    scipy_fn = _calling_scipy(caller)
    if scipy_fn is not None and not (caller.f_globals.get("__name__") or "").startswith(
            ("scipy", "numpy", "mutagrad")) and plain_write_target(caller) is not None:
        scipy_fn = None  # (the user's own write, in a callback SciPy calls: `buf[...] = x` in brentq's f)
    if scipy_fn is not None:
        name, sub, ours = scipy_fn
        if ours == "passthrough":
            extra = (f" mutagrad.scipy.{sub}.{name} is SciPy's own function, passed through without a "
                     f"derivative rule; docs/coverage.md lists what mutagrad.scipy.{sub} differentiates."
                     + _scipy_rewrite(sub, name))
        elif ours:
            extra = (f" Use mutagrad.scipy.{sub} in place of scipy.{sub} (import mutagrad.scipy.{sub}): "
                     + (f"mutagrad.scipy.{sub}.{name} is the same function, differentiated (docs/coverage.md "
                        "lists the others)." if ours == "twin" else
                        "the same names, differentiated where docs/coverage.md lists them."))
            if sub == "interpolate" and name in _PIECEWISE_CUBICS:  # (one SciPy already made: its coefficients)
                extra += _SPLINE_COEFFICIENTS
        elif sub == "sparse" and _scipy_rewrite(sub, name):  # (csgraph's routines)
            extra = _scipy_rewrite(sub, name)
        elif sub == "sparse" and name in ("__mul__", "__rmul__", "multiply") and _scipy_scalar_operand(caller):
            extra = (" SciPy scales a sparse matrix by a number in a new sparse matrix, which holds plain numbers "
                     "only. Scale the products instead, which are differentiated: (I - c * L) @ v is "
                     "v - c * (L @ v); or make the matrix dense, c * L.toarray().")
        elif sub == "sparse" and name in ("__add__", "__radd__", "_add_dense", "__mul__", "__rmul__", "multiply"):
            extra = (" SciPy adds (or multiplies elementwise) a sparse matrix and a dense array in a plain copy "
                     "of the array. Make the matrix dense, A.toarray() (v + A.toarray(), v * A.toarray()), which "
                     "is differentiated; so is the sparse matrix's own product A @ v.")
        elif sub == "sparse":
            extra = (" A scipy.sparse matrix holds plain numbers, so it cannot be built from traced values: "
                     "build it from plain ones (a constant), whose products with traced arrays (A @ x, "
                     "x @ A, A.dot(x)) and solves (mutagrad.scipy.sparse.linalg.spsolve, splu, factorized, cg, gmres...) "
                     "are differentiated; for a matrix that depends on traced values, use a dense array "
                     "(np.zeros_like(x, shape=...) filled by index writes, np.add.at).")
        else:
            extra = _scipy_hint(sub, name) + _metric_called(caller, name)
        what = f"scipy{'.' + sub if sub else ''} function {name} (plain Python that converts its arguments " \
               "with np.asarray)"
        if name == "validate_graph":  # (named by the user's call, where its source tells)
            ucall = call_at(user_frame(caller))
            what = ("the scipy.sparse.csgraph routine" + (f" {ast.unparse(ucall.func)}" if ucall is not None
                                                           else "") + " (its argument check, validate_graph, "
                    "converts its arguments with np.asarray)")
        return escape_error(what, TracerEscapeError, extra, specific=True)  # (a conversion: nothing is written)
    return None


def _metric_called(frame, name) -> str:
    """For cdist / pdist: the formula of the metric the call names (its frame's ``metric``), or ""."""
    if name not in ("cdist", "pdist"):
        return ""
    f = frame
    while f is not None and f.f_code.co_name != name:
        f = f.f_back
    metric = f.f_locals.get("metric") if f is not None else None
    formula = _METRICS.get(metric) if type(metric) is str else None
    return f" The metric {metric!r} of two vectors u, v is {formula}." if formula else ""


def _scipy_inside(frame) -> bool:
    """Whether a SciPy function's frame is on the stack from ``frame`` out inside the differentiation, before
    mutagrad.api's: a SciPy function outside it that calls mg.value_and_grad of the user's objective
    (scipy.optimize.minimize, solve_ivp's right-hand side) leaves the conversion the user's (the sph tester)."""
    while frame is not None:
        mod = frame.f_globals.get("__name__") or ""
        if mod.startswith("scipy"):
            return True
        if mod == "mutagrad.api":
            return False
        frame = frame.f_back
    return False


def _scipy_callback_note(frame) -> str:
    """Where the failing code is a callback a SciPy function without derivative rules calls (solve_ivp's
    right-hand side, brentq's function) inside the differentiation: that the SciPy call is the next thing to
    change, with its fix (the clothsim tester followed the write's fix only to be refused at solve_ivp); else ''."""
    fn = _calling_scipy(frame) if _scipy_inside(frame) else None
    if fn is None or fn[2]:
        return ""
    name, sub, _ = fn
    return (f" Next: this code is a function that scipy{'.' + sub if sub else ''}.{name} calls on plain arrays; where "
            f"its result depends on traced values, {name}, which returns plain numbers, would drop their derivative "
            "even with the write fixed (refused there, the next error)." + _scipy_hint(sub, name))


def _scipy_scalar_operand(frame) -> bool:
    """Whether SciPy's frames on the stack from ``frame`` hold a traced number (0-d): a sparse matrix
    scaled by it (``c * A``)."""
    f = frame
    while f is not None and ((f.f_globals.get("__name__") or "") + ".").startswith("scipy."):
        if any(isinstance(v, Tracer) and v.ndim == 0 for v in f.f_locals.values()):
            return True
        f = f.f_back
    return False


def _calling_scipy(frame):
    """(name, subpackage, whether mutagrad.scipy has that subpackage) of the
    outermost SciPy function on the stack above ``frame`` (the one the user
    called), if the conversion happens inside SciPy."""
    frames = []  # the SciPy frames, innermost first
    f = frame
    while f is not None:
        mod = f.f_globals.get("__name__", "") or ""
        if mod == "scipy" or mod.startswith("scipy."):
            frames.append((f, mod.split(".")))
        elif frames and mod != "functools":  # (functools: a cached_property between SciPy's frames)
            break
        f = f.f_back
    if not frames:
        return None
    # the outermost frame of a public subpackage (SciPy wraps some functions in decorators
    # of its private scipy._lib, whose frames are outermost)
    public = [(f, parts) for f, parts in frames if len(parts) > 1 and not parts[1].startswith("_")]
    top, parts = public[-1] if public else frames[-1]
    name = top.f_code.co_name
    qual = top.f_code.co_qualname
    wrapped_self = None  # (the object of a method a public wrapper runs)
    method = top.f_locals.get("method") if name.startswith("__") else None
    if method is not None and hasattr(method, "__name__"):  # a uarray backend (scipy.fft): the function it serves
        name = method.__name__
    elif public and name == "__init__" and "<" not in qual:  # a class made: named by the class
        obj = top.f_locals.get("self")  # (the class made, not the base class whose __init__ runs)
        name = type(obj).__name__ if obj is not None else qual.removesuffix(".__init__")
    elif name == "wrapped" and isinstance(getattr(top.f_locals.get("self"), "name", None), str):
        name = top.f_locals["self"].name  # (scipy.special's array-API wrapper, SCIPY_ARRAY_API=1: its ufunc's name)
    elif not public or "wrapper" in name or name.startswith("__"):
        # a decorator's frame (a private one, or a public wrapper such as scipy.stats'
        # axis_nan_policy_wrapper): the function it wraps, from its locals (SciPy's array-API wrappers'
        # `func` first, before their `delegator`, gaussian_filter_signature: SCIPY_ARRAY_API=1, regress114;
        # axis_nan_policy's `hypotest_fun_in`, before the hypotest_fun_out it makes for weights=)
        for _, v in sorted(top.f_locals.items(), key=lambda kv: kv[0] not in ("func", "hypotest_fun_in")):
            mod = getattr(v, "__module__", None) or ""
            if type(v) is _FunctionType and mod.startswith("scipy.") and v.__code__ is not top.f_code:
                name = v.__name__
                if "." in v.__qualname__ and "<" not in v.__qualname__ and top.f_code.co_argcount:
                    # (a method it wraps, norm.fit, with its object the wrapper's first argument: named by it)
                    qual, wrapped_self = v.__qualname__, next(iter(top.f_locals.values()), None)
                if not public:
                    parts = mod.split(".")
                break
        else:
            obj = top.f_locals.get("self")
            if name == "__call__" and obj is not None:  # (an object called: a spline, an interpolator)
                name = type(obj).__name__
    sub = parts[1] if len(parts) > 1 and not parts[1].startswith("_") else None
    if sub == "sparse" and len(parts) > 2 and parts[2] == "linalg":
        sub = "sparse.linalg"
    ours = sub in ("special", "linalg", "stats", "sparse.linalg", "signal", "interpolate")  # the mutagrad.scipy modules
    if ours:
        import importlib

        try:
            theirs_mod = importlib.import_module(f"scipy.{sub}")
            mine_mod = importlib.import_module(f"mutagrad.scipy.{sub}")
        except ImportError:  # pragma: no cover
            return name, sub, ours
        key = name
        obj = top.f_locals.get("self", wrapped_self)
        method = "." in qual and "<" not in qual  # (a method: not the module's function of its name, entropy)
        # (the object made or called: its class's __init__, an instance's __call__, named by its type above)
        made = name in ("__init__", "__call__") or (obj is not None and name == type(obj).__name__)
        if obj is not None and (method or name not in vars(theirs_mod)):
            # a method of a SciPy object (a distribution's logpmf, gaussian_kde's __init__):
            # named by the object's public name in the module
            public = [(attr, getattr(theirs_mod, attr, None)) for attr in dir(theirs_mod) if not attr.startswith("_")]
            # a frozen distribution (norm(0, s).entropy()): by its distribution's (a new instance of the
            # public one's class)
            dist = getattr(obj, "dist", None) if hasattr(obj, "dist") else getattr(obj, "_dist", None)
            frozen = [a for a, v in public if dist is not None and not isinstance(dist, type) and type(v) is type(dist)]
            # the object's own public class, else the public class it derives from (a LinearOperator
            # made from a matvec function is a private subclass's)
            called = [a for a, v in public if v is obj]  # (a public object called: a distribution frozen)
            named = (called or [a for a, v in public if isinstance(v, type) and type(obj) is v]
                     or [a for a, v in public if isinstance(v, type) and isinstance(obj, v)])
            if frozen:
                key = frozen[0]
                name = f"{key}(...)" if made else f"{key}(...).{name}"
            elif named:
                key = named[0]
                name = (f"{key}(...)" if called else key) if made else f"{key}.{name}"
        elif method and isinstance(getattr(theirs_mod, qual.split(".")[0], None), type):
            key = qual.split(".")[0]  # a class's own method, a classmethod: Covariance.from_diagonal
            name = f"{key}.{name}"
        mine = getattr(mine_mod, key, None)
        if getattr(theirs_mod, key, None) is None:
            ours = "passthrough"  # (a function of a SciPy submodule, scipy.stats.mstats.winsorize: mutagrad's is SciPy's)
            for attr in dir(theirs_mod):  # (named by its public submodule: mstats.winsorize)
                v = getattr(theirs_mod, attr, None)
                if (not attr.startswith("_") and isinstance(v, types.ModuleType)
                        and getattr(getattr(v, key, None), "__code__", None) is top.f_code):
                    name = f"{attr}.{name}"
                    mine_fn = getattr(getattr(mine_mod, attr, None), key, None)
                    if mine_fn is not None and mine_fn is not getattr(v, key):
                        ours = "twin"  # (mutagrad.scipy.signal.windows.tukey: differentiated in its parameter)
                    break
        elif mine is not None and mine is getattr(theirs_mod, key, None):
            ours = "passthrough"  # mutagrad.scipy re-exports it as it is: no advice to switch
        elif "." in name.replace("(...)", "") and name.rsplit(".", 1)[1] not in getattr(
                mine, "METHODS", _own_names(mine) if isinstance(mine, type) else (name.rsplit(".", 1)[1],)):
            # a method mutagrad's distribution hands to SciPy's (rvs, fit, entropy...), or one a subclass of
            # SciPy's (mutagrad.scipy.interpolate's BSpline) inherits from it (construct_fast: splinefit)
            ours = "passthrough"
        elif mine is not None:
            ours = "twin"  # mutagrad.scipy's own function of that name, differentiated
    return name, sub, ours


def _own_names(cls):
    """The attributes mutagrad's class ``cls`` (a subclass of SciPy's) defines itself, not inherited from SciPy."""
    return frozenset(k for c in cls.__mro__ if (c.__module__ or "").startswith("mutagrad") for k in vars(c))


_FunctionType = types.FunctionType


def _carries_derivative(t) -> bool:
    """Whether tracer ``t`` may carry its level's derivative."""
    st = t._storage
    if t._level.mode == "rev":
        return bool(st.active)
    return st.tangent is not None or st.poison is not None


def carries_any_derivative(x) -> bool:
    """Whether ``x`` carries a derivative at any of the levels that trace it (a traced constant, a
    non-differentiated argument's value, carries none)."""
    while isinstance(x, Tracer):
        if _carries_derivative(x):
            return True
        x = x._value
    return False


def _view_index(idx) -> bool:
    """Whether ``x[idx]`` is a view of x (basic indexing, NumPy integers included)."""
    parts = idx if type(idx) is tuple else (idx,)
    for i in parts:
        if not (type(i) is slice or i is Ellipsis or i is None or isinstance(i, (int, np.integer))):
            return False
    return not isinstance(idx, (bool, np.bool_))


def copy_order(db, idx, vb, mask=None):
    """How NumPy copies ``vb`` into ``db[idx]`` (``x[idx] = v``, ``np.copyto``),
    if its result is not that of copying a buffered ``vb``: the destination's
    indices in the order NumPy writes them; None when the copy equals a
    buffered one. ``mask``: the ``where=`` of ``np.copyto``.

    NumPy buffers an overlapping source when the destination has more than one
    dimension or the strides run opposite ways; for a 1-D destination it walks
    both arrays together, by ascending destination address, backwards when the
    source starts below the destination and reaches into it. With equal strides
    that is what a buffered copy gives; with different ones an element may be
    read after an earlier step overwrote it (``a[:, 2] = a[1]``)."""
    if type(vb) is not _ndarray or vb.ndim == 0 or not np.may_share_memory(db, vb) or not _view_index(idx):
        return None
    d = db[idx]
    if type(d) is not _ndarray or d.ndim != 1 or d.shape[0] < 2:
        return None
    if d.strides[0] * vb.strides[-1] < 0 or not np.may_share_memory(d, vb):
        return None  # buffered by NumPy, or disjoint
    n = d.shape[0]
    v = vb
    while v.ndim > 1 and v.shape[0] == 1:  # NumPy drops leading unit dimensions of the source
        v = v[0]
    ds = d.strides[0]
    dp, sp = _ptr(d), _ptr(v)
    if v.ndim == 1 and (v.shape[0] == 1 or (v.shape[0] == n and v.strides[0] == 0)) and ds and (
            v.itemsize != d.itemsize or (sp - dp) % ds):
        ss = 0  # one element broadcast over memory it shares in part (a complex view at an odd float):
        # a step may change part of the element the next steps read
    elif v.ndim != 1 or v.shape[0] != n:
        return None  # one element broadcast (each step rewrites what it reads), or NumPy raises
    else:
        ss = v.strides[0]
        if ss == ds or ss == 0 or ds == 0:
            return None
    view = np.arange(n)  # the view index that step k handles
    if ds < 0:  # NumPy walks by ascending destination address
        dp, sp, ds, ss = dp + (n - 1) * ds, sp + (n - 1) * ss, -ds, -ss
        view = view[::-1]
    steps = np.arange(n)
    backward = sp < dp and sp + n * ss > dp
    live = None if mask is None else np.asarray(mask, dtype=bool)[view]
    # (by the bytes each step reads and writes: views of another dtype, or of the same one at an
    # offset that is no multiple of the itemsize, overlap in part)
    late = _late_reads(sp + steps * ss - dp, steps, v.itemsize, ds, d.itemsize, backward, live)
    if not late.any():
        return None
    order = view[::-1] if backward else view
    if mask is not None:
        order = order[np.asarray(mask, dtype=bool)[order]]
    return [int(i) for i in order]


def _late_reads(off, steps, ssize, ds, dsize, backward, live):
    """Of a copy's ``steps`` (step k reads the ``ssize`` bytes at ``off[k]`` from the destination's
    start and writes the destination's element k, ``dsize`` bytes at ``k * ds``), those whose read
    meets bytes an earlier step wrote (earlier: lower k, higher when ``backward``); ``live``: the
    steps that copy (a where= mask), or None."""
    n = steps.size
    late = np.zeros(n, dtype=bool)
    first, last = off, off + ssize - 1
    for c in range(ssize // ds + 2):  # (the destination elements the read's bytes may fall in)
        m = first // ds + c
        lo, hi = np.maximum(first, m * ds), np.minimum(last, m * ds + dsize - 1)
        hit = (m >= 0) & (m < n) & (lo <= hi)
        if live is not None:
            hit &= live[np.clip(m, 0, n - 1)] & live
        late |= hit & ((m > steps) if backward else (m < steps))
    return late


_ID_TYPES = {1: np.int8, 2: np.int16, 4: np.int32, 8: np.int64, 16: np.complex128}  # (complex: ids in the real part)


def _slot_grid(db, vb):
    """(lo, db's address, vb's address, slots): the memory both span as slots of the item size from
    byte ``lo``, every element of each on one; None where they do not fit one grid (another item size,
    a stride or an offset that is no multiple of it)."""
    isz = db.itemsize
    if vb.itemsize != isz:
        return None
    (dlo, dhi), (vlo, vhi) = _byte_bounds(db), _byte_bounds(vb)
    lo, hi = min(dlo, vlo), max(dhi, vhi)
    dp, vp = _ptr(db), _ptr(vb)
    if (dp - lo) % isz or (vp - lo) % isz or any(st % isz for st in db.strides + vb.strides) or (hi - lo) % isz:
        return None
    return lo, dp, vp, (hi - lo) // isz


def mask_copy_sources(db, mask, vb):
    """For ``db[mask] = vb`` with ``vb`` overlapping ``db``: the position in
    ``vb.ravel()`` of the element whose value (as it was before the write) each
    selected element of ``db`` holds after NumPy's assignment, found by making
    NumPy do the same assignment on element numbers laid out in memory exactly
    as ``db`` and ``vb`` are (NumPy buffers the value or walks it element by
    element depending on the layouts). None if the layouts cannot be mirrored."""
    isz = db.itemsize
    idt = _ID_TYPES.get(isz)
    grid = None if idt is None or vb.ndim > 1 else _slot_grid(db, vb)
    if grid is None:
        return None
    lo, dp, vp, n = grid
    if n >= (2 ** 53 if idt is np.complex128 else np.iinfo(idt).max):
        return None
    ids = np.arange(n, dtype=idt)
    strided = np.lib.stride_tricks.as_strided
    pd = strided(ids[(dp - lo) // isz:], db.shape, db.strides, writeable=True)
    pv = strided(ids[(vp - lo) // isz:], vb.shape, vb.strides, writeable=True)
    before = pv.copy()
    pd[mask] = pv
    where = np.full(n, -1, np.int64)
    where[before.real.astype(np.int64)] = np.arange(before.size)
    src = where[pd[mask].real.astype(np.int64)]
    return None if (src < 0).any() else src


def copy_in_order(dest, value, order):
    """``dest[i] = value[i]`` (1-D ``dest``; ``value`` without its leading unit
    dimensions) for ``i`` in ``order``, each element read when it is written."""
    while value.ndim > 1 and value.shape[0] == 1:
        value = value[0]
    one = value.shape[0] == 1  # (one element broadcast: read again at every step)
    for i in order:
        write(dest, i, value[0] if one else value[i])


def in_order_sources(db, flatpos, vb):
    """For ``db.flat[flatpos[k]] = vb.flat[k % vb.size]`` one element at a time (``vb`` overlapping
    ``db``): (the flat positions written, each one's last write, and the element of ``vb.ravel()``
    whose value, as it was before the writes, each holds then), found by running the element loop on
    memory slot numbers (plain Python, a fraction of a microsecond a step) rather than on traced
    values (13 us a step). None if the layouts do not fit one slot grid."""
    isz = db.itemsize
    grid = _slot_grid(db, vb) if vb.size else None
    if grid is None:
        return None
    lo, dp, vp, _ = grid

    def slots(a, p, flat):  # (each element's slot, in units of the item size from lo)
        idx = np.unravel_index(flat, a.shape) if a.ndim else ()
        off = sum(i * (st // isz) for i, st in zip(idx, a.strides)) if a.ndim else 0
        return (p - lo) // isz + np.asarray(off, dtype=np.int64)
    pos = np.asarray(flatpos, dtype=np.int64).ravel()
    dslot = slots(db, dp, pos).tolist()
    vslot = np.broadcast_to(slots(vb, vp, np.arange(vb.size)), (vb.size,)).tolist()
    mem = {}  # slot -> the slot whose original value it holds (absent: its own)
    last = {}  # slot -> the step that wrote it last
    nv = len(vslot)
    for k, d in enumerate(dslot):
        s = vslot[k % nv]
        mem[d] = mem.get(s, s)
        last[d] = k
    home = {s: e for e, s in enumerate(vslot)}
    ks = np.fromiter(last.values(), dtype=np.int64, count=len(last))
    src = [home.get(mem[dslot[k]], -1) for k in ks.tolist()]
    if min(src) < 0:  # (a value from a slot outside vb: not a flat assignment's)
        return None
    return pos[ks], np.asarray(src, dtype=np.int64)


def write_in_order(dest, flatpos, value):
    """``dest.flat[flatpos[k]] = value.flat[k % value.size]`` one element at a
    time, each value element read only when it is written: NumPy's order for
    flat and boolean-mask assignment, which matters when ``value`` overlaps
    ``dest``. Done as one gather of the value's elements as they were and one
    write, where the slots can be followed (:func:`in_order_sources`)."""
    plan = in_order_sources(bottom(dest), flatpos, bottom(value))
    if plan is not None:
        written, src = plan
        write(dest, tuple(np.unravel_index(written, dest.shape)), np.reshape(value, (-1,))[src])
        return
    shape, vshape = dest.shape, value.shape
    n = int(np.prod(vshape, dtype=np.int64))
    for k in range(len(flatpos)):
        write(dest, tuple(int(i) for i in np.unravel_index(flatpos[k], shape)),
              value[np.unravel_index(k % n, vshape)])


def where_mask(where):
    """A ``where=`` argument as the boolean array NumPy makes of it: lists and numbers are
    converted, an array of another dtype is NumPy's TypeError (it casts where= under the
    'safe' rule: a float or integer mask is refused, not taken as nonzero)."""
    b = bottom(where)
    if type(b) is _ndarray and b.dtype != bool:
        raise TypeError(f"Cannot cast array data from {b.dtype!r} to dtype('bool') according to the rule 'safe'")
    return np.asarray(b, dtype=bool)


_KEEP_AUX = ("to keep a value the inner function computes (a loss history), return it as an auxiliary output "
             "(has_aux=True of mg.grad, mg.value_and_grad, mg.vjp or mg.jvp, the function returning (value, aux)) "
             "and store it after the inner call.")


def write_out(res, out, numpy=None):
    """NumPy's ``out=`` convention: with ``out``, write ``res`` into it and
    return ``out``; without, return ``res``.

    ``numpy(plain_out)``: NumPy's own call into ``out`` on the plain values, made where
    out's dtype is not ``res``'s. NumPy casts by each function's own rule there (its
    ufuncs' same_kind: a complex result into a float out, a float one into an integer
    out; np.take's out cast to the input's dtype under 'safe'), and computes in out's
    dtype where it computes into out (np.round's scaling, np.trace's sum, an FFT's
    loop): its error is raised, and out keeps its bits (the derivative is ``res``'s,
    as a recorded write)."""
    if out is None:
        return res
    if numpy is not None:
        ob = bottom(out)
        if type(ob) is _ndarray and getattr(bottom(res), "dtype", None) != ob.dtype:
            if isinstance(out, Tracer) and not ob.flags.writeable:
                write(out, Ellipsis, res)  # (mutagrad's error first: a locked argument's AliasingError)
            old = ob.copy()
            try:
                with np.errstate(all="ignore"), warnings.catch_warnings():  # (the traced computation has
                    warnings.simplefilter("ignore")                           # warned as the plain call does)
                    numpy(ob)
                exact = ob.copy()
            finally:
                ob[...] = old
            write(out, Ellipsis, res)  # (a plain out: mutagrad's refusal of a traced value, as without numpy=)
            ob[...] = exact
            return out
    write(out, Ellipsis, res)
    return out


def write_reduced(res, out, name, numpy=None):
    """:func:`write_out` for a reduction (``np.sum``, ``ufunc.reduce``, ``np.median``...),
    whose ``out=`` NumPy takes of the result's shape only, where an elementwise call's
    ``out=`` may add dimensions the result broadcasts to: NumPy's errors otherwise
    (``name``: the ufunc NumPy's message names, ``add`` for a sum)."""
    if out is not None:
        check_reduced_out(res, out, name)
    return write_out(res, out, numpy)


def check_reduced_out(res, out, name):
    """NumPy's errors for a reduction's ``out=`` of another shape than its result ``res``."""
    so, sr = np.shape(out), np.shape(res)
    if len(so) != len(sr):
        raise ValueError(f"output parameter for reduction operation {name} has the wrong number of dimensions: "
                         f"Found {len(so)} but expected {len(sr)}")
    if so != sr:
        raise ValueError(f"non-broadcastable output operand with shape {so} doesn't match the broadcast shape {sr}")


def write_replayed(out, idx, res, replay):
    """``out[idx] = res`` for a NumPy call that writes into ``out`` itself
    (``out=``), leaving in ``out`` the very bits NumPy's own call leaves:
    ``replay(plain_out)`` performs that call on the plain values (before
    anything is overwritten); the recorded write carries the derivative."""
    if not isinstance(out, Tracer):
        write(out, idx, res)
        return
    with_replayed_bits(out, replay, lambda: write(out, idx, res))


def with_replayed_bits(out, replay, writes):
    """Run ``writes()`` (traced writes into ``out``, carrying the derivative),
    then leave in ``out`` the bits of ``replay(plain_out)``, NumPy's own call
    on the values ``out`` held before."""
    ob = bottom(out)
    if not ob.flags.writeable:
        writes()  # (read-only: what a traced write into it raises, e.g. a locked argument's AliasingError)
    old = ob.copy()
    with np.errstate(all="ignore"), warnings.catch_warnings():  # (the traced computation has raised or
        warnings.simplefilter("ignore")                           # warned as the plain call does)
        replay(ob)
    exact = ob.copy()
    ob[...] = old
    writes()
    ob[...] = exact


def _refuse_in_a_rule(x, name):
    """``mg.value(x)`` / ``mg.stop_gradient(x)`` of a value a running differentiation traces, in a
    user's rule (or pullback): a higher derivative differentiates the rule again, and the value's
    derivative would be dropped there, silently (second derivatives of zero)."""
    from .errors import _rule_wrapper

    frame = user_frame(sys._getframe(2))
    wrapper = _rule_wrapper(frame) if frame is not None else None
    if wrapper is None:
        return
    entry = wrapper.f_locals.get("_entry")
    if entry is not None:
        t = x
        while isinstance(t, Tracer):  # (every level the value carries: a rule's own level wraps the outer ones')
            if any(t._level is lv for lv in entry):
                break
            t = t._value
        else:
            return  # (only differentiations the rule started itself: mg.grad(helper) of its own values)
    raise escape_error(f"{name}(x) of a value traced by a differentiation of the rule")


# what mg.stop_gradient and mg.value return as it is inside a differentiation: values of these exact types
# hold no array (a subclass may: an attribute), nor do NumPy's own scalars, dtypes and random generators
_HOLDS_NO_ARRAY = frozenset((type(None), bool, int, float, complex, str, bytes, range, type(Ellipsis)))
_NUMPYS_OWN = (np.generic, np.dtype, np.random.Generator, np.random.RandomState, np.random.BitGenerator,
               np.random.SeedSequence)


def _holds_no_array(obj) -> bool:
    t = type(obj)
    if t in _HOLDS_NO_ARRAY:
        return True
    if not _own_type(t):
        return False  # (a subclass of the program's: it may hold anything)
    if isinstance(obj, np.void):
        return not obj.dtype.hasobject and _plain_dtype(obj.dtype)
    if isinstance(obj, np.dtype):
        return _plain_dtype(obj)
    return isinstance(obj, _NUMPYS_OWN)


def _plain_dtype(dt) -> bool:
    """Whether a dtype holds nothing but its description: no metadata (a dict of anything), no field
    title or StringDType na_object other than a plain number or string, in its fields and subarray too."""
    if dt.metadata:  # (an empty dict holds nothing)
        return False
    na = getattr(dt, "na_object", None)
    if na is not None and not _plain_item(na):
        return False
    for f in (dt.fields or {}).values():
        if not _plain_dtype(f[0]) or (len(f) > 2 and f[2] is not None and not _plain_item(f[2])):
            return False
    return dt.subdtype is None or _plain_dtype(dt.subdtype[0])


def _plain_item(v) -> bool:
    """A number or a string, Python's or NumPy's own (np.str_, np.float64)."""
    t = type(v)
    return t in _HOLDS_NO_ARRAY or (isinstance(v, np.generic) and not isinstance(v, np.void) and _own_type(t))


def _opaque(obj, api):
    """``obj``, an object mutagrad does not look into (not an array or a container of its pytrees),
    for mg.stop_gradient / mg.value: itself in a plain call; inside a differentiation, refused,
    unless it is of a kind that holds no array (as JAX's stop_gradient refuses what is not an array
    or a pytree): a traced value it holds (an attribute, a closure, anything it reaches) would keep
    its derivative, and a copy would not be the object a plain call returns."""
    if not STATE.levels or _holds_no_array(obj):
        return obj
    raise TypeError(
        f"{api} of a {type(obj).__name__} at {user_line()}: mutagrad does not look into this object, so it "
        f"cannot make the values it holds constants (a traced value in it would keep its derivative). Apply "
        f"{api} to the arrays it holds (a pint Quantity's .magnitude, an xarray DataArray's .data, an "
        "attribute) and build the object from the results; or register the class with "
        "mutagrad.pytree.register_pytree, which it then maps over; an object that holds no traced value "
        f"needs no {api}.")


def _plain_array(a, fn, api):
    """For a plain ndarray given to mg.stop_gradient / mg.value (``api``; ``fn``, the function itself): an
    array of objects, a new one of ``fn`` of each item (None for another array); inside a differentiation,
    first the refusals of an array that may carry a traced value otherwise: a dtype holding objects (its
    metadata), a subclass's attributes."""
    mapped = _map_objects(a, fn, api) if a.dtype.hasobject else None
    if mapped is None:
        if not _plain_dtype(a.dtype):
            _opaque(a, api)
        _subclass_attributes(a, api)
    return mapped


def _subclass_attributes(a, api):
    """Inside a differentiation, refuse an ndarray subclass whose copy or view may carry a traced value
    (__array_finalize__ passes its attributes on): one of the program's (its attributes and slots may hold
    anything), or one of NumPy's (a masked array, a memmap, a recarray) whose attributes hold anything but
    plain values (numbers, strings, NumPy's and Python's own types, plain arrays, a memmap's file, and
    dicts, lists and tuples of those, as a MaskedArray's _optinfo)."""
    if type(a) is _ndarray or not STATE.levels:
        return
    todo, seen = [a], set()
    while todo:
        v = todo.pop()
        if id(v) in seen:
            continue
        seen.add(id(v))
        t = type(v)
        if t is dict:
            todo.extend(v.values())
        elif t is list or t is tuple:
            todo.extend(v)
        elif isinstance(v, _ndarray) and not isinstance(v, Tracer):
            if v.dtype.hasobject or not _plain_dtype(v.dtype) or not _own_type(t):
                _opaque(a, api)
            if t is not _ndarray:
                try:
                    todo.extend(object.__getattribute__(v, "__dict__").values())
                except AttributeError:  # (NumPy's own subclass without attributes)
                    pass
        elif not (_holds_no_array(v) or t is _MMAP or (isinstance(v, type) and _own_type(v))):
            _opaque(a, api)


try:
    from mmap import mmap as _MMAP
except ImportError:  # pragma: no cover
    _MMAP = None


def _own_type(cls) -> bool:
    """Whether ``cls`` is one of NumPy's or Python's own classes (found by its name in its module: a class
    that only claims such a __module__ is not)."""
    mod = getattr(cls, "__module__", None)
    if not (isinstance(mod, str) and (mod in ("builtins", "numpy") or mod.startswith("numpy."))):
        return False
    home = sys.modules.get(mod)
    return home is not None and getattr(home, getattr(cls, "__name__", ""), None) is cls


def _map_objects(a, fn, api):
    """For an array of objects ``a`` (of NumPy's own type, dtype object): a new one holding ``fn`` of
    each item (an array holding itself: the new one holds itself), in a plain call as inside a
    differentiation, so that both give the same result. Another array with objects in it (a masked
    array, a structured dtype with an object field): refused inside a differentiation, as an object;
    outside one, None (the caller's plain copy or view, as before)."""
    if type(a) is not _ndarray or a.dtype != object:
        if STATE.levels and not (type(a) is _ndarray and a.dtype.kind == "T" and _plain_dtype(a.dtype)):
            _opaque(a, api)  # (NumPy's own array of StringDType holds strings only)
        return None
    memo = _MAPPING.__dict__.setdefault("memo", {})
    if id(a) in memo:
        return memo[id(a)]
    out = memo[id(a)] = np.empty(a.shape, dtype=object)
    try:
        for i, item in enumerate(a.flat):
            out.flat[i] = fn(item)
    except RecursionError:  # (a list holding itself among the items: the plain copy, as before)
        if STATE.levels:
            raise
        return None
    finally:
        del memo[id(a)]
    return out


_MAPPING = threading.local()  # .memo: id -> the new array, for the arrays of objects being mapped


# the arrays whose memory mg.value has shown of a traced array, by id: code that ignores the read-only flag
# (SciPy's LAPACK wrappers with overwrite_b=True) would change traced values unseen (see exported_memory)
_VALUE_OWNERS: weakref.WeakValueDictionary = weakref.WeakValueDictionary()


class _Shown:
    """The base of mg.value's view of a traced array's memory: not the array that owns it (for
    an argument, the caller's), so that the view and views of it are told from that array and
    its views (a plain read of the argument's memory through another reference after a write
    raises, _check_argument_read; a read of mg.value's is a constant, as asked)."""
    __slots__ = ("__array_interface__", "array")


def _shown_view(b):
    """A view of ndarray ``b`` whose base is a _Shown, not ``b`` or what ``b`` views."""
    h = _Shown()
    h.array = b
    try:
        h.__array_interface__ = b.__array_interface__
        v = np.asarray(h)
    except (TypeError, ValueError):  # (a dtype the interface does not carry: StringDType, objects)
        return b.view()
    return v if v.dtype == b.dtype and v.dtype.metadata == b.dtype.metadata else b.view()


def _base_array(a):
    """The array at the end of ``a``'s chain of bases that are arrays (``a`` itself if it has none)."""
    while type(a.base) is _ndarray:
        a = a.base
    return a


def exported_memory(a) -> bool:
    """Whether the plain array ``a`` shows memory of a traced array: mg.value of one, or a view of that."""
    o = _base_array(a)
    return _VALUE_OWNERS.get(id(o)) is o


def value(x):
    """The plain value of ``x`` as a read-only ndarray view (no derivative); of a container, of
    each leaf. An object mutagrad does not look into (a pint Quantity, a user's class) is refused
    inside a differentiation (TypeError), unless it holds no array (a number, a string, NumPy's
    random generators); outside one it is returned as it is.

    >>> import numpy as np, mutagrad as mg
    >>> v = mg.value(np.arange(3.0))
    >>> v.flags.writeable
    False
    """
    if isinstance(x, _ndarray) and not isinstance(x, Tracer):
        mapped = _plain_array(x, value, "mg.value")
        if mapped is not None:
            return mapped
    if not isinstance(x, (Tracer, _ndarray)):
        from .pytree import _is_container, tree_map

        if _is_container(x):  # (a list, dict, registered class...: the value of each leaf)
            return tree_map(value, x)
        return _opaque(x, "mg.value")
    if isinstance(x, Tracer) and not x._level.closed:
        _refuse_in_a_rule(x, "mg.value")
        note_equality((x,), "value_at")
    b = bottom(x)
    if isinstance(b, _ndarray):
        t = x
        while isinstance(t, Tracer):
            t._storage.exported = True  # (vjp's pullback checks it has not changed)
            t = t._value
        if isinstance(x, Tracer):
            v = _shown_view(b)
            _VALUE_OWNERS[id(v)] = v
        elif STATE.levels:  # (a plain array, a constant as asked: even the memory of an argument, see above)
            v = _shown_view(b)
        else:
            v = b.view()
        v.flags.writeable = False
        return v
    if isinstance(x, Tracer) and x._scalar and weak(x):
        return b.item()  # a Python float stands for itself
    return b


def stop_gradient(x):
    """Treat ``x`` as a constant: a copy of its value with no derivative.

    The result is a new array (NumPy scalars and Python numbers are returned
    as they are): inside differentiation a writable traced array that does
    not depend on anything, outside it a plain copy, so that writing into it
    never changes ``x``, in a plain call or a differentiated one alike.
    It is a constant to every differentiation running, the outer ones of a
    nested call too (as ``jax.lax.stop_gradient``). Containers are mapped
    over; an object mutagrad does not look into (a pint Quantity, an xarray
    DataArray, a user's class) is refused inside a differentiation (TypeError,
    as JAX's refuses what is not an array or a pytree), unless it holds no
    array (a number, a string, NumPy's random generators): apply it to the
    arrays the object holds.

    >>> import numpy as np, mutagrad as mg
    >>> f = lambda x: np.sum(x * mg.stop_gradient(x))
    >>> mg.grad(f)(np.array([1.0, 2.0]))
    array([1., 2.])
    """
    from .pytree import tree_map

    def leaf(v):
        if not isinstance(v, Tracer):
            if isinstance(v, _ndarray):
                mapped = _plain_array(v, stop_gradient, "mg.stop_gradient")
                return v.copy() if mapped is None else mapped
            return _opaque(v, "mg.stop_gradient")
        if not v._level.closed:
            _refuse_in_a_rule(v, "mg.stop_gradient")
        b = bottom(v)
        if isinstance(b, _ndarray):
            c = b.copy()
        else:
            c = b
        levels = active_levels()
        for lv in levels:
            if lv.run_group is not None:  # (a step of a forward-mode jacobian's run: runs that hold x
                lv.run_group.note(("stop_gradient",))  # fixed in some runs only compute another function)
        return lift(_np_scalar(c) if v._scalar else c, levels)  # (a constant at every level)

    return tree_map(leaf, x)


ZERO = ZeroTangent()
_INPLACE_REFS[0] = _calibrate_inplace()
