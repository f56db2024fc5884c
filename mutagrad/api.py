"""The transformations: grad, value_and_grad, vjp, jvp, jacobian, hessian."""
from __future__ import annotations

import collections
import collections.abc
import dataclasses
import dis
import functools
import gc
import hashlib
import itertools
import math
import numbers
import operator
import os
import random
import re
import sys
import threading
import types
import weakref
from typing import Callable, Sequence

import numpy as np

from .core import (
    STATE,
    TRACERS,
    ArrayTracer,
    RunGroup,
    ScalarTracer,
    Storage,
    Tracer,
    _LOCK_REFS,
    _bounds_of,
    _carries_derivative,
    _get_ident,
    _may_self_overlap,
    _relockable,
    _shares_bounded,
    _within_rounding,
    active_levels,
    bottom,
    elsewhere,
    foreign_subclass,
    lift,
    live,
    mark_weak,
    other_values_message,
    set_writeable,
    subclass_advice,
    weak,
    write,
)
from .errors import (
    _INTERNAL_PACKAGES,
    ATTEMPT,
    warnings_once,
    DifferentiationError,
    MutationError,
    NoRuleError,
    NotImplementedTangentError,
    caught_by_the_program,
    ensure_shuffle_filter,
    error_note,
    forget_escape,
    in_api,
    line_text,
    readonly_error,
    replaced_error,
    take_deferred,
    unwatch_errors,
    user_frame,
    user_line,
    warn_at,
    warn_type_tests,
    watch_errors,
)
from .forward import ForwardLevel
from .pytree import (
    _PLAIN_LEAVES,
    leaf_paths,
    tree_flatten,
    tree_flatten_like,
    tree_unflatten,
)
from .pytree import _REGISTRY as _PYTREE_CLASSES
from .registry import FP, user_fp_state
from .runs import ScalarRun
from .tangents import AbstractZero, NotImplementedTangent, project
from .tape import (
    EWRecord,
    GatherRecord,
    OpRecord,
    ReverseLevel,
    WriteRecord,
    _same_bits,
    release_adj,
)

__all__ = ["grad", "value_and_grad", "vjp", "jvp", "jacobian", "hessian"]

_ndarray = np.ndarray


# --------------------------------------------------------------------------
# Arguments in, results out


class _Leaf:
    """How to give a derivative back in the form of its argument."""

    __slots__ = ("kind", "shape", "dtype", "storage", "orig")

    def __init__(self, kind, shape, dtype, storage, orig):
        self.kind = kind  # "float", "complex", "npscalar", "array", "tracer"
        self.shape = shape
        self.dtype = dtype
        self.storage = storage
        self.orig = orig


def _check_subclass(x, where):
    """ndarray subclasses other than np.memmap (whose memory is an ndarray's)
    carry semantics of their own (a mask, matrix products, units) that the
    rules, written for numpy.ndarray, would silently drop."""
    if foreign_subclass(x):
        if isinstance(x, (np.matrix, np.ma.MaskedArray)):
            raise TypeError(f"{where}: mutagrad differentiates numpy.ndarray, got the subclass {type(x).__module__}."
                            f"{type(x).__qualname__}, whose own semantics " + subclass_advice(x))
        raise TypeError(
            f"{where}: mutagrad differentiates numpy.ndarray, got the subclass {type(x).__module__}."
            f"{type(x).__qualname__}, whose own behaviour (matrix products, units...) the "
            "derivative rules would not keep. Pass np.asarray(x) (or x.view(np.ndarray)) if plain "
            "array semantics are what the function means."
        )


def _check_leaf_at(leaf, name, tree, leaves, k, every=False):
    """_check_leaf of leaf ``k`` of the argument ``tree`` (``leaves``, its leaves, ``name``, the
    argument's name); its message names the leaf by index and by path (``argument 0 leaf 1
    (argument 0['n'])``), found only then. Returns how other messages name it."""
    where = name if len(leaves) <= 1 else f"{name} leaf {k}"
    try:
        _check_leaf(leaf, where, every)
    except TypeError:
        paths = leaf_paths(tree) if len(leaves) > 1 else ()
        if len(paths) != len(leaves):
            raise
        _check_leaf(leaf, f"{where} ({name}{paths[k]})", every)
        raise
    return where


def _check_leaf(x, where, every=False):
    """``every``: vjp and jvp, which take no argnums (the fix is a closure)."""
    try:
        _check_leaf_kind(x, where)
    except TypeError as e:
        if " leaf " not in where and not every:
            raise
        msg = re.sub(r",? or leave it out of argnums\.$", ".", str(e))
        msg += "" if msg.endswith(".") else "."
        if " leaf " not in where:
            raise TypeError(msg + " vjp and jvp differentiate every primal: pass the others through a "
                            "closure (lambda x: f(x, n)), or give jvp an integer or boolean primal's tangent as "
                            "None.") from None
        # (a leaf inside a differentiated container cannot be left out by itself)
        raise TypeError(msg + (
            " vjp and jvp differentiate every leaf of every primal: keep integers, strings and other non-float "
            "values out of the primals, by a closure that builds the container (lambda x: f(Graph(src, dst, "
            "x))), or use mg.grad / mg.jacobian with argnums on a function of separate arguments." if every else
            " Every leaf of a differentiated argument is differentiated: keep integers, strings and other "
            "non-float values in an argument that is not in argnums.")) from None


def _check_leaf_kind(x, where):
    _check_subclass(x, where)
    if isinstance(x, Tracer):
        if x.dtype.kind not in "fc":
            raise TypeError(f"{where}: differentiation needs float or complex inputs, got dtype "
                            f"{x.dtype} (at {user_line()})")
        return
    if isinstance(x, (bool, np.bool_)) or (isinstance(x, _ndarray) and x.dtype.kind == "b"):
        raise TypeError(
            f"{where}: differentiation needs float or complex inputs, got a boolean {x!r} at {user_line()}. "
            "Pass floats (e.g. 1.0, x.astype(float)) or leave it out of argnums."
        )
    if isinstance(x, (int, np.integer)) or (isinstance(x, _ndarray) and x.dtype.kind in "iu"):
        raise TypeError(
            f"{where}: differentiation needs float or complex inputs, got an integer "
            f"{'array' if isinstance(x, _ndarray) else 'value'} {x!r} at {user_line()}. Pass floats "
            "(e.g. 2.0 instead of 2, or x.astype(float)) or leave it out of argnums."
        )
    if isinstance(x, (float, complex, np.floating, np.complexfloating)):
        return
    if isinstance(x, _ndarray):
        if x.dtype.kind not in "fc":
            raise TypeError(f"{where}: differentiation needs float or complex arrays, got dtype "
                            f"{x.dtype} (at {user_line()})")
        return
    raise TypeError(f"{where}: cannot differentiate with respect to a value of type {type(x).__name__} "
                    f"(at {user_line()}): only float or complex arrays and numbers (or containers of them) "
                    "have derivatives (not a random generator, an object, a callback): pass it as an argument "
                    "that is not differentiated, or leave it out of argnums"
                    + ("; for an object holding arrays (a model's parameters), register its class as a container "
                       "with mutagrad.pytree.register_pytree, or pass its arrays (a dict of them)."
                       if hasattr(x, "__dict__") and not callable(x) else "."))


def _wrap_leaf(level, x, name):
    """A traced argument at ``level`` wrapping the caller's own array."""
    outer = level.outer_levels()
    if isinstance(x, Tracer):
        val = lift(level.lock_traced(x, name), outer)
        kind = "tracer"
        scalar = x._scalar
    elif isinstance(x, _ndarray):
        # a plain array is plain to the outer levels too (they never see its memory, which
        # plain code may change after the call, or jacobian(mode="fwd") between its passes):
        # a value they differentiate written into it raises, as at the outermost level
        val, s = _caller_array(level, x, name, active=True)
        return ArrayTracer(val, level, s, None, False), _Leaf("array", x.shape, x.dtype, s, x)
    else:
        if type(x) is float:
            kind = "float"
        elif type(x) is complex:
            kind = "complex"
        else:
            kind = "npscalar"
        val = lift(np.asarray(x)[()], outer)  # (a NumPy scalar, as traced scalars are: np.real of it is a scalar)
        scalar = True
    s = Storage(level, val, active=True)
    s.name = name
    if kind == "tracer":
        s.outer_arg = x  # (the array the function is given: its owndata and base are the argument's)
    t = TRACERS[scalar](val, level, s, None, scalar)
    if kind == "float" or kind == "complex":
        mark_weak(t)  # a Python number: NumPy's weak scalar (a float32 array times it stays float32)
    b = bottom(val)
    return t, _Leaf(kind, b.shape, b.dtype, s, x)


def _mark_aliasing(wrapped):
    """Arguments that share memory may be read, not written (writes raise)."""
    arrays = []
    for t, info in wrapped:
        b = t._value
        if type(b) is not _ndarray:
            b = bottom(b)
        if type(b) is _ndarray:
            arrays.append((b, info.storage))
    n = len(arrays)
    if n < 2:
        return
    if n <= 16:  # a few arrays: every pair, by NumPy's bounds test
        pairs = [(i, j) for i in range(n) for j in range(i) if _may_share(arrays[i][0], arrays[j][0])]
    else:  # many (a pytree of arrays): the pairs whose address ranges overlap, by a sweep
        spans = sorted(_bounds_of(b) + (k,) for k, (b, _) in enumerate(arrays))
        pairs, open_ = [], []  # open_: (end, index) of the spans that may reach the current one
        for lo, hi, k in spans:
            open_ = [(e, j) for e, j in open_ if e > lo]
            pairs.extend((max(j, k), min(j, k)) for _, j in open_)
            open_.append((hi, k))
        pairs.sort()
    for i, j in pairs:
        (bi, si), (bj, sj) = arrays[i], arrays[j]
        if np.shares_memory(bi, bj):
            si.aliased = si.aliased or sj.name
            sj.aliased = sj.aliased or si.name


_may_share = np.may_share_memory


_GLOBAL_OPS = frozenset(("LOAD_GLOBAL", "LOAD_NAME", "STORE_GLOBAL", "STORE_NAME", "DELETE_GLOBAL", "DELETE_NAME"))
_ATTR_OPS = frozenset(("LOAD_ATTR", "LOAD_METHOD", "STORE_ATTR", "DELETE_ATTR", "LOAD_SUPER_ATTR", "IMPORT_FROM"))


def _code_names(code, glob, attrs, keys):
    """The global names ``code`` and the functions defined in it refer to (into ``glob``),
    the attributes and methods they name (into ``attrs``): ``self.q`` names no global ``q``,
    and their constants that may be keys of a dictionary (into ``keys``: ``state["u"]``)."""
    getter = None  # (in a call of operator.attrgetter / methodcaller the code makes: its constant names)
    for ins in dis.get_instructions(code):
        if ins.opname in _GLOBAL_OPS:
            glob.add(ins.argval)
        elif ins.opname in _ATTR_OPS:
            attrs.add(ins.argval)
        if ins.opname != "LOAD_CONST" and ins.opname.startswith("LOAD") and ins.argval in _GETTER_NAMES:
            getter = []
        elif getter is None:
            continue
        elif ins.opname in ("PRECALL", "CALL"):  # attrgetter("grid.u"): grid and u
            attrs.update(part for name in getter for part in name.split("."))
            getter = None
        elif ins.opname == "LOAD_CONST":
            if type(ins.argval) is str:
                getter.append(ins.argval)
        elif ins.opname not in ("PUSH_NULL", "KW_NAMES", "CACHE", "EXTENDED_ARG"):
            attrs.add(_VARIABLE_GETTER)  # (attrgetter(name) of a variable: any attribute, as getattr)
            getter = None
    for c in code.co_consts:
        tc = type(c)
        if tc is type(code):
            _code_names(c, glob, attrs, keys)
        elif tc is str or tc is int or tc is bytes:
            keys.add(c)
        elif tc is tuple:  # a key (a, b), or the keys a loop goes through: for k in ("u", "v"), (5000, 6000)
            if len(c) <= 64:
                keys.add(c)
                keys.update(k for k in c if type(k) is str or type(k) is int)
            else:  # (a table of constants: 20 000 coefficients were kept per generated model; its strings only)
                keys.update(k for k in c if type(k) is str)


_NAMES: dict = {}  # id(code object) -> (a weak reference to it, the global names it and its nested functions use)


def _plain_arrays_of(fun, npos=0, kwnames=(), roots=()):
    """The plain arrays ``fun`` refers to by name: its closure's cells, its
    default arguments and the globals its code names, and those of the Python
    functions it names that way (helpers it calls, to a depth of 4 and at most
    64 functions), and the arrays those names' objects hold where the code can
    reach them (see _Holdings), through the attributes any of those functions
    names (``energy(s)``, whose code reads ``sim.u``). ``npos`` positional and the
    ``kwnames`` keyword arguments are passed to ``fun``: their defaults are unused;
    ``roots``: (name, value) of the arguments that are no arrays (an object, a
    callback), searched too. Returns (the (path, array) pairs, whether the search
    stopped at its budget)."""
    found, budget = _search(fun, npos, kwnames, roots)
    return found, budget.left <= 0 or budget.truncated


def _search(fun, npos, kwnames, roots):
    """The alias search from ``fun``: (the (path, array) pairs found, its _Budget, which also holds
    the random generators met). A search that met only functions, modules, values that hold nothing
    (numbers, strings, ufuncs) and plain arrays named by them (a global ``A``, a closure's ``b``:
    what it found) is remembered with what it read (_Probes), and answered again while every one of
    those reads gives the same object (the arrays found among them)."""
    kwkey = tuple(kwnames)  # (the names: kwnames may be the call's dictionary of keyword arguments)
    if not roots:
        hit = _SEARCHES.get(id(fun))
        if hit is not None and hit[0]() is fun and hit[1] == npos and hit[2] == kwkey and hit[3].unchanged(fun):
            found = [(path, ref()) for path, ref in hit[4]]
            if all(a is not None for _, a in found):
                return found, _Budget()
    probes = None if roots else _Probes(fun)
    names = _names_of_helpers(fun, probes)
    rounds = 0
    for _ in range(3):  # (the helpers found on objects may name attributes the first round skipped)
        found: list = []
        budget = _Budget()
        budget.names = names
        budget.probes = probes
        _arrays_named_by(fun, found, set(), 0, npos, kwnames, budget, roots)
        rounds += 1
        attrs, keys, reflective = names
        grown = (tuple(set(attrs) | budget.walked_attrs), tuple(set(keys) | budget.walked_keys),
                 reflective or budget.walked_reflective)
        if len(grown[0]) == len(attrs) and len(grown[1]) == len(keys) and grown[2] == reflective:
            break
        names = grown
    if (budget.probes is not None and probes.valid and rounds == 1 and budget.left > 0
            and not budget.generators and type(fun) is _FunctionType):
        if len(_SEARCHES) > 1024:
            _SEARCHES.clear()
        probes.root = probes.seen = None  # (what the entry keeps: its reads only)
        _SEARCHES[id(fun)] = (weakref.ref(fun), npos, kwkey, probes, [(path, weakref.ref(a)) for path, a in found])
    return found, budget


_SEARCHES: dict = {}  # id(function) -> (a weak reference to it, npos, kwnames, _Probes, the (path, weak reference
# to the array) pairs found): searches that met only what _Probes tells unchanged


_READ_KINDS = range(7)  # (_Probes's kinds of read, in the order of their names)
_ATTR, _GLOBAL, _CELL, _KWDEFAULT, _DEFAULT, _NDEFAULTS, _MODULE_ATTR = _READ_KINDS


class _Probes:
    """What an alias search read, to tell whether a search again would read the same objects:
    ``(kind, owner, key, value, weak)`` with owner a weak reference to a function or module
    (None: the function searched from, passed to :meth:`unchanged`), so that an entry keeps
    alive none of what the search walked: a function's attribute (code, module), default, keyword
    default, closure cell or global, a module's attribute or name. What was read is held weakly
    too where it can be (``weak``). ``valid``: the search read only what this can tell unchanged."""

    __slots__ = ("reads", "root", "seen", "valid")

    ATTR, GLOBAL, CELL, KWDEFAULT, DEFAULT, NDEFAULTS, MODULE_ATTR = _READ_KINDS

    def __init__(self, root):
        self.reads = []
        self.root = root
        self.seen = set()  # (kind, id(owner), key) read already
        self.valid = True

    def _owner(self, o):
        if o is self.root:
            return None
        try:
            return weakref.ref(o)
        except TypeError:  # (not weakly referable: not remembered)
            self.valid = False
            return None

    def read(self, kind, o, key, v):
        k = (kind, id(o), key)
        if k in self.seen:
            return
        self.seen.add(k)
        owner = self._owner(o)
        try:  # (held weakly where it can be: an entry keeps alive nothing it read, a dead function's
            self.reads.append((kind, owner, key, weakref.ref(v), True))  # default array included)
        except TypeError:  # (numbers, strings, None, code: held as they are)
            self.reads.append((kind, owner, key, v, False))

    def function(self, f, code):
        """The reads of ``f`` that decide what it names: its code, module, defaults, keyword
        defaults (of every keyword-only parameter) and closure cells."""
        self.read(self.ATTR, f, "__code__", code)
        self.read(self.ATTR, f, "__module__", getattr(f, "__module__", None))
        defaults = getattr(f, "__defaults__", None) or ()
        self.read(self.NDEFAULTS, f, None, len(defaults))
        for k, v in enumerate(defaults):
            self.read(self.DEFAULT, f, k, v)
        kwdefaults = getattr(f, "__kwdefaults__", None) or {}
        for name in code.co_varnames[code.co_argcount:code.co_argcount + code.co_kwonlyargcount]:
            self.read(self.KWDEFAULT, f, name, kwdefaults.get(name, _ABSENT))
        for k, cell in enumerate(getattr(f, "__closure__", None) or ()):
            try:
                self.read(self.CELL, f, k, cell.cell_contents)
            except ValueError:  # (an empty cell)
                self.read(self.CELL, f, k, _ABSENT)

    def globals_of(self, f, names):
        g = getattr(f, "__globals__", None)
        if type(g) is not dict:  # (a dict subclass from exec: its lookups may run code)
            self.valid = False
            return
        for name in names:
            self.read(self.GLOBAL, f, name, g.get(name, _ABSENT))

    def unchanged(self, root) -> bool:
        for kind, owner, key, v, held_weakly in self.reads:
            if owner is None:
                o = root
            else:
                o = owner()
                if o is None:
                    return False
            if kind == _ATTR:
                cur = getattr(o, key, _ABSENT)
            elif kind == _GLOBAL:
                cur = o.__globals__.get(key, _ABSENT)
            elif kind == _CELL:
                try:
                    cur = o.__closure__[key].cell_contents
                except ValueError:
                    cur = _ABSENT
            elif kind == _KWDEFAULT:
                cur = (o.__kwdefaults__ or {}).get(key, _ABSENT)
            elif kind == _DEFAULT:
                d = o.__defaults__ or ()
                cur = d[key] if key < len(d) else _ABSENT
            elif kind == _NDEFAULTS:
                cur = len(o.__defaults__ or ())
                if cur != v:
                    return False
                continue
            else:  # _MODULE_ATTR
                cur = vars(o).get(key, _ABSENT)
            if held_weakly:
                v = v()
                if v is None:
                    return False
            if cur is not v:
                return False
        return True


def _names_of_helpers(fun, probes=None):
    """(attributes, keys, whether any attribute may be read by name) of ``fun`` and of the
    Python functions it names (globals, closure cells, defaults), theirs in turn, to 64
    functions: an object one of them reaches may be handed to another, which reads its
    attributes."""
    attrs, keys, reflective = set(), set(), False
    todo, seen = [fun], set()
    while todo and len(seen) < 64:
        f = todo.pop()
        code = getattr(f, "__code__", None)
        if code is None or id(f) in seen:
            continue
        seen.add(id(f))
        glob, (a, k) = _names_of(code)
        attrs.update(a)
        keys.update(k)
        reflective = reflective or _reflective(glob, a)
        for _, v in _named_values(f, code, glob, probes=probes):
            if type(v) is _FunctionType:
                if not _internal(v):
                    todo.append(v)
                elif probes is not None:  # (NumPy's, by its module: read, as the walk's other reads)
                    probes.read(probes.ATTR, v, "__module__", v.__module__)
            elif _getter_names(v, attrs, keys) == "any":  # (operator.attrgetter("q"), a C callable: its names)
                reflective = True
    return tuple(attrs), tuple(keys), reflective


_GETTERS = (operator.attrgetter, operator.itemgetter, operator.methodcaller)


def _getter_names(v, attrs, keys) -> bool:
    """Add to ``attrs`` and ``keys`` the names a C callable ``v`` reads: an operator.attrgetter's attributes
    (``"grid.u"``: both), an itemgetter's keys, a methodcaller's method, a functools.partial(getattr, obj,
    "q")'s; whether ``v`` is one of them, "any" for a partial(getattr, obj) given the name when called."""
    tv = type(v)
    if tv is functools.partial:
        if v.func is not getattr:
            return False
        if len(v.args) >= 2 and type(v.args[1]) is str:
            attrs.add(v.args[1])
            return True
        return "any"
    if tv not in _GETTERS:
        return False
    fn, got = v.__reduce__()[:2]
    if tv is operator.itemgetter:
        keys.update(k for k in got if type(k) is str or type(k) is int)
    elif tv is operator.methodcaller:  # (with keyword arguments, a partial of the class holds the name)
        name = fn.args[0] if type(fn) is functools.partial and fn.args else got[0] if got else None
        if type(name) is str:
            attrs.add(name)
    else:
        attrs.update(part for name in got if type(name) is str for part in name.split("."))
    return True


_VARIABLE_GETTER = "<an attrgetter or methodcaller of a variable>"  # (a name no attribute has)
_GETTER_NAMES = ("attrgetter", "methodcaller")


def _reflective(glob, attrs) -> bool:
    """Whether code naming ``glob`` and ``attrs`` may read any attribute by name (getattr, vars,
    ``__dict__``, an attrgetter of a variable's name)."""
    return "getattr" in glob or "vars" in glob or "__dict__" in attrs or _VARIABLE_GETTER in attrs


def _internal(f) -> bool:
    """Whether function ``f`` is NumPy's, SciPy's, mutagrad's or the logging module's own (not searched
    for the user's arrays: its code reaches only its own objects; logging's, every logger and handler,
    cost a log.debug line 20 ms per call)."""
    return (getattr(f, "__module__", None) or "").partition(".")[0] in _UNWALKED


_UNWALKED = _INTERNAL_PACKAGES | {"logging"}


def _named_values(fun, code, glob, npos=0, kwnames=(), probes=None):
    """(name, value) of what ``fun``'s code refers to by name: its closure's cells, its default
    arguments (those of the ``npos`` positional and ``kwnames`` keyword arguments passed are
    unused) and the globals it names. ``probes``: a _Probes, which records the reads."""
    if probes is not None:
        probes.function(fun, code)
        probes.globals_of(fun, glob)
    named = []
    for name, cell in zip(code.co_freevars, getattr(fun, "__closure__", None) or ()):
        try:
            named.append((name, cell.cell_contents))
        except ValueError:  # (an empty cell)
            continue
    defaults = getattr(fun, "__defaults__", None)
    if defaults:
        first = code.co_argcount - len(defaults)
        named.extend((name, v) for k, (name, v) in enumerate(zip(code.co_varnames[first:code.co_argcount], defaults))
                     if first + k >= npos and name not in kwnames)
    kwdefaults = getattr(fun, "__kwdefaults__", None)
    if kwdefaults:
        named.extend((name, v) for name, v in kwdefaults.items() if name not in kwnames)
    g = getattr(fun, "__globals__", None)
    if g:
        named.extend((name, g[name]) for name in glob if name in g)
    return named


class _Budget:
    """The objects one search may still visit (arrays, containers, objects: 10000 in all), and
    the names of the functions it starts from (_names_of_helpers)."""

    __slots__ = ("class_names", "generators", "left", "names", "probes", "truncated", "walked_attrs",
                 "walked_keys", "walked_reflective")

    def __init__(self):
        self.probes = None  # (a _Probes while the search met only what it can tell unchanged)
        self.left = ALIAS_SEARCH_BUDGET
        self.truncated = False  # (a long container or a deep object was not searched through)
        self.names = ((), (), False)
        self.generators = {}  # id -> the random generators met (a forward-mode jacobian rewinds them)
        self.walked_attrs = set()  # the attributes the functions walked name (a next round reads them too)
        self.walked_keys = set()  # the keys the getters walked read (as walked_attrs)
        self.class_names = {}  # a class -> the names its classes' dictionaries hold (this search's visits)
        self.walked_reflective = False


ALIAS_SEARCH_BUDGET = 10_000
ALIAS_SEARCH_DEPTH = 12  # steps from a name the code uses: attributes, items, entries


def _arrays_named_by(fun, found, seen, depth, npos, kwnames, budget, roots=()):
    code = getattr(fun, "__code__", None)
    if code is None:
        budget.probes = None  # (objects: not remembered)
    if code is None and id(fun) not in seen:
        # a functools.partial (its function, with its arguments searched), a callable object (its
        # __call__, bound: what the object holds)
        if type(fun) is functools.partial:
            seen.add(id(fun))
            roots = list(roots) + [(("partial", ".args[{}]", k), a) for k, a in enumerate(fun.args)] + [
                (("partial", ".keywords[{!r}]", k), a) for k, a in fun.keywords.items()]
            _arrays_named_by(fun.func, found, seen, depth, npos + len(fun.args), tuple(kwnames) + tuple(fun.keywords),
                             budget, roots)
            return
        call = _class_attr(type(fun), "__call__")
        if type(call) is _FunctionType:
            seen.add(id(fun))
            _arrays_named_by(_MethodType(call, fun), found, seen, depth, npos, kwnames, budget, roots)
        return
    if code is None or id(fun) in seen or len(seen) >= 64:
        return
    seen.add(id(fun))
    helpers = []
    glob, (attrs, keys) = _names_of(code)
    shared_attrs, shared_keys, shared_reflective = budget.names
    reflective = _reflective(glob, attrs)
    budget.walked_attrs.update(attrs)
    budget.walked_reflective = budget.walked_reflective or reflective
    walk = _Holdings((set(attrs).union(shared_attrs), set(keys).union(shared_keys)),
                     shared_reflective or reflective, found, helpers, budget)
    if type(fun) is _MethodType:  # a bound method: what its object holds where its code can reach
        walk.visit("self", fun.__self__, 0)
    if _internal(fun) or _mutagrad_code(code):
        budget.probes = None  # (a wrapper's closure holds its settings: not remembered)
        # mutagrad's own wrapper (grad's, jacobian's, check_grads'): the user's functions its closure
        # holds are walked, not the arguments it keeps to pass them, nor the module's functions
        # its code names (mutagrad's own, dozens of them, and nothing of the user's)
        named = [(name, v) for name, v in _named_values(fun, code, (), npos, kwnames)
                 if type(v) is _FunctionType or type(v) is _MethodType or type(v) is functools.partial
                 or (_class_attr(type(v), "__call__") is not None and not issubclass(type(v), (type, _NOT_HOLDERS)))]
    else:
        named = _named_values(fun, code, glob, npos, kwnames, budget.probes)
    named.extend(roots)
    for _, v in named:  # (a generator named directly is found whatever the budget the walk spends elsewhere)
        g = _generator_of(v)
        if g is not None:
            budget.generators[id(g)] = g
    for name, v in named:
        walk.visit(name, v, 0)
    for h in helpers:
        hc = getattr(h, "__code__", None)
        if hc is not None and _mutagrad_code(hc):  # (a wrapper of mutagrad's: a step that does not count)
            _arrays_named_by(h, found, seen, depth, 0, (), budget)
        elif depth < 4 and not _internal(h):  # (not NumPy's...)
            _arrays_named_by(h, found, seen, depth + 1, 0, (), budget)
        elif depth < 4 and budget.probes is not None:  # (NumPy's, by its module: read, as the walk's others)
            budget.probes.read(budget.probes.ATTR, h, "__module__", getattr(h, "__module__", None))


_MUTAGRAD_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep


def _mutagrad_code(code) -> bool:
    """Whether a code object is mutagrad's own (a wrapper that functools.wraps gave the user
    function's module and name: grad's, value_and_grad's)."""
    return code.co_filename.startswith(_MUTAGRAD_DIR)


_FunctionType, _MethodType, _BuiltinMethod = types.FunctionType, types.MethodType, types.BuiltinMethodType
_NOT_HOLDERS = (types.BuiltinFunctionType, np.ufunc, np.generic, str, bytes, int, float, complex, bool, range)
_SEQUENCES = (list, tuple, collections.deque)
_PLAIN_KEYS = (str, int, float, bytes, bool, tuple, frozenset, type(None), complex)  # (dict keys that hold no array)


def _long_container(items):
    """What the items of a container too long to search one by one (more than 256) may hold, asked of
    their types at C speed (up to 10^5 of them): "nothing" (numbers, strings, None, and records of
    them: tuples or lists), "arrays" (also plain arrays, as items or as fields of records, which the
    caller then searches, each one), or None (anything else: not searched)."""
    if len(items) > 100_000:
        return None
    try:
        kinds = set(map(type, items))
        rows = kinds & _ROWS  # (records as tuples or lists of numbers: (x, y) points, table rows)
        if rows:
            kinds = (kinds - rows) | set(map(type, itertools.chain.from_iterable(i for i in items if type(i) in rows)))
    except RuntimeError:  # (a deque another thread changes meanwhile)
        return None
    held = "nothing"
    for t in kinds:
        if issubclass(t, _ndarray):
            held = "arrays"
        elif not (issubclass(t, _NOT_HOLDERS) or t is type(None)):
            return None
    return held


def _arrays_of_records(items, name):
    """The (path, array) of every plain array among ``items`` (a long container's values, with
    their keys or positions: pairs) and among the fields of its records (tuples and lists)."""
    for k, item in items:
        if issubclass(type(item), _ndarray):  # (an np.memmap too; by type: a tracer says it is an ndarray)
            if not item.dtype.hasobject:
                yield (name, "[{!r}]", k), item
        elif type(item) in _ROWS:
            for j, field in enumerate(item):
                if issubclass(type(field), _ndarray) and not field.dtype.hasobject:
                    yield ((name, "[{!r}]", k), "[{}]", j), field


_ROWS = frozenset((tuple, list))


class _Holdings:
    """The arrays a named object holds where the code can reach them (``sim.u``,
    ``world.grid.u``, ``state["u"]``, ``views[2]``, ``model.layers[0].W``), to a
    depth of ALIAS_SEARCH_DEPTH steps (deeper: incomplete) and the budget's objects, and the functions it may call as
    helpers (``sim.step(x)``, callbacks in a list, a functools.partial): attributes
    the code names (every one of an instance's dictionary when the code calls
    ``getattr``), of an instance (its dictionary, ``__slots__``, namedtuple fields,
    its class's attributes; the functions behind its properties are helpers, for the
    attributes they name), of a class or a module; every entry of a dictionary of at
    most 256 (of a larger one, those under keys that are constants of the code); every
    item of a list, tuple or deque of at most 256. No user code runs: only the stored
    values are read, and types are taken with type(): isinstance would ask a proxy's
    __getattribute__ for __class__."""

    __slots__ = ("attrs", "budget", "found", "helpers", "keys", "order", "reflective", "seen")

    def __init__(self, names, reflective, found, helpers, budget):
        self.attrs, self.keys = names
        self.order = {a: k for k, a in enumerate(self.attrs)}
        self.reflective = reflective
        self.found, self.helpers, self.budget = found, helpers, budget
        self.seen = set()  # (per function: another one names other attributes of the same objects)

    def held(self, cls):
        """The names the dictionaries of ``cls``'s classes hold (remembered for this search)."""
        cache = self.budget.class_names
        held = cache.get(cls)
        if held is None:
            held = set()
            for k in getattr(cls, "__mro__", ()):
                held.update(k.__dict__)
            cache[cls] = held
        return held

    def named(self, cls, instance_attrs=None):
        """The attributes the code names that ``cls`` (the classes of its MRO) or ``instance_attrs`` hold,
        in the code's order: the others read as absent (a search met 10^4 objects against hundreds of
        names, a pandas DataFrame's helpers')."""
        held = self.held(cls)
        order = self.order
        present = [a for a in held if a in order] if len(held) < len(order) else [a for a in order if a in held]
        if instance_attrs:
            present.extend(a for a in instance_attrs if a in order and a not in held)
        present.sort(key=order.__getitem__)
        return present

    def visit_long(self, name, values, items, depth, fmt):
        """A list, tuple or dict of more than 256 ``values`` (``items``: them with their keys): its
        arrays, each one, where the rest holds nothing; where it holds objects (a list of 300
        particles, each with a view of the positions), each item as a short one's, while the budget
        lasts (True: walked so), up to 1024 of them; else the search is incomplete."""
        held = _long_container(values)
        b = self.budget
        if held is None:
            if len(values) > min(b.left, 1024):
                b.truncated = True
                return False
            try:
                for k, item in list(items):
                    self.visit((name, fmt, k), item, depth)
            except RuntimeError:  # (a deque another thread changes meanwhile)
                b.truncated = True
            return True
        if held == "arrays":
            if _ROWS.isdisjoint(map(type, values)):  # (arrays and numbers only: one comprehension, 10^4 of them a call)
                got = [((name, "[{!r}]", k), item) for k, item in items
                       if issubclass(type(item), _ndarray) and not item.dtype.hasobject]  # (an np.memmap too)
            else:
                got = list(_arrays_of_records(items, name))
            if b.left > 0:
                self.found.extend(got[:b.left])
                b.left = max(b.left - len(got), 0)

    def visit(self, name, v, depth):
        b = self.budget
        if b.left <= 0:
            return
        b.left -= 1
        tv = type(v)
        if b.probes is not None and not (v is None or tv is _FunctionType or issubclass(tv, types.ModuleType) or (
                issubclass(tv, _NOT_HOLDERS) and (tv is not _BuiltinMethod
                                                  or type(v.__self__) in _MODULE_OR_NONE))
                or (tv is _ndarray and not v.dtype.hasobject)):  # (a plain array, read by name: found, as it is)
            b.probes = None  # (what may hold arrays, generators or other functions: not remembered)
        if tv is _ndarray and v.dtype.hasobject:  # an object array: its items, as a list's
            if id(v) in self.seen:
                return
            if v.size <= 256 and depth < ALIAS_SEARCH_DEPTH:
                self.seen.add(id(v))
                for k, item in enumerate(v.ravel(order="K")):
                    self.visit((name, ".flat[{}]", k), item, depth + 1)
            elif _long_container(v.ravel(order="K").tolist()) != "nothing":  # (too long, or too deep)
                b.truncated = True
            return
        if tv is _ndarray or (tv is ArrayTracer and not v._level.closed):  # (an outer level's array, in a
            # nested differentiation; a leftover of a finished one is checked where it is used: core.live)
            self.found.append((name, v))
            return
        if tv is ArrayTracer or tv is ScalarTracer:  # (a leftover: no memory of this call's, nothing held)
            return
        if issubclass(tv, _ndarray) and not v.dtype.hasobject:  # (an np.memmap, a view of one: memory too)
            self.found.append((name, v))
            return
        g = _generator_of(v)  # (a forward-mode jacobian rewinds it)
        if g is not None:
            b.generators[id(g)] = g
            return
        if tv is _BuiltinMethod:
            return
        if tv is memoryview or tv is bytearray:  # (memory an argument may view: as the array it is)
            try:
                found_array = np.frombuffer(v, dtype=np.uint8) if tv is bytearray else np.asarray(v)
            except (TypeError, ValueError):
                return
            self.found.append((name, found_array))
            return
        if tv is _FunctionType or tv is _MethodType:  # a callback, a helper held by an object
            self.helpers.append(v)
            return
        if tv is staticmethod:  # (a class attribute: the callable it holds)
            v = v.__func__
            tv = type(v)
        if tv in _GETTERS:  # (a getter held by an object, in a dict: the names it reads, which the next round reads)
            _getter_names(v, b.walked_attrs, b.walked_keys)
            return
        if tv is functools.partial and _getter_names(v, b.walked_attrs, b.walked_keys) == "any":
            b.walked_reflective = True  # (partial(getattr, obj, "u"): "u"; its object is walked below)
        if issubclass(tv, _NOT_HOLDERS) or id(v) in self.seen:
            return
        if depth >= ALIAS_SEARCH_DEPTH:  # (what it holds further on is not searched: a plain view of an
            b.truncated = True  # argument there would go unseen, so the search is incomplete)
            return
        self.seen.add(id(v))
        depth += 1
        held = _iterated(v, tv)
        if held is not None:  # an iterator, a suspended generator, a weak reference: what it goes through
            for label, item in held:
                self.visit((name, "<{}>", label), item, depth)
            return
        if tv in _SEQUENCES:
            if len(v) > 256:  # (a long one: its arrays where the rest holds nothing, its objects while they fit)
                self.visit_long(name, v, enumerate(v), depth, "[{}]")
                return
            found = self.found
            try:
                for k, item in enumerate(v):
                    if type(item) is _ndarray and not item.dtype.hasobject:  # (the common item: inline)
                        if b.left <= 0:
                            return
                        b.left -= 1
                        found.append(((name, "[{}]", k), item))
                    else:
                        self.visit((name, "[{}]", k), item, depth)
            except RuntimeError:  # (a deque another thread changes meanwhile: a Barrier's, a queue's)
                return
            return
        if tv is set or tv is frozenset or tv is weakref.WeakSet:  # (particles, observers kept in a set: their
            # views of an argument went unseen, and a gradient silently wrong: the regress123 tester)
            if len(v) > 100_000:  # (a vocabulary's set of names: not searched, as before sets were)
                return
            try:
                items = list(v)
            except RuntimeError:  # (changed by another thread meanwhile)
                b.truncated = True
                return
            if len(items) > 256:
                if _long_container(items) != "nothing":  # (names, numbers: nothing held)
                    self.visit_long(name, items, enumerate(items), depth, "<item {}>")
                return
            if all(type(item) in _PLAIN_KEYS for item in items):  # (names, numbers: the common set, nothing held)
                return
            for k, item in enumerate(items):
                self.visit((name, "<item {}>", k), item, depth)
            return
        if issubclass(tv, dict):
            for k, key in enumerate(list(dict.keys(v))[:256]):  # (objects as keys: the set's case)
                if not isinstance(key, _PLAIN_KEYS):
                    self.visit((name, "<key {}>", k), key, depth)
            if len(v) <= 256:
                entries = list(dict.items(v))
            elif self.visit_long(name, dict.values(v), dict.items(v), depth, "[{!r}]"):
                entries = []
            else:
                entries = []
                for key in self.keys:
                    try:
                        item = dict.get(v, key, _ABSENT)
                    except TypeError:  # (a key of an unhashable tuple)
                        continue
                    if item is not _ABSENT:
                        entries.append((key, item))
            for key, item in entries:
                self.visit((name, "[{!r}]", key), item, depth)
            return
        if tv is functools.partial:
            self.visit((name, ".func", None), v.func, depth)
            for k, item in enumerate(v.args):
                self.visit((name, ".args[{}]", k), item, depth)
            for key, item in v.keywords.items():
                self.visit((name, ".keywords[{!r}]", key), item, depth)
            return
        if issubclass(tv, _SEQUENCES) and _class_attr(tv, "_fields") is None:  # (a subclass; a namedtuple's
            return  # fields are attributes, below)
        if issubclass(tv, types.ModuleType):
            probes = b.probes
            if probes is not None:
                probes.read(probes.ATTR, v, "__name__", getattr(v, "__name__", None))
            if (getattr(v, "__name__", "") or "").partition(".")[0] in _INTERNAL_PACKAGES:
                if v is np.random or (v is np and "random" in self.attrs):  # (np.random.normal: NumPy's global
                    b.generators[id(np.random.mtrand._rand)] = np.random.mtrand._rand  # generator, drawn from)
                return
            attrs = vars(v)
            for attr in self.attrs:
                a = attrs.get(attr)
                if probes is not None:
                    probes.read(probes.MODULE_ATTR, v, attr, attrs.get(attr, _ABSENT))
                if a is not None:  # (a function of a module, physics.rhs(u): a helper)
                    self.visit((name, ".{}", attr), a, depth)
            return
        if issubclass(tv, type):
            for attr in self.named(v):
                a = _class_attr(v, attr)
                called = _called_functions(a, attr, v)
                if called is not None:  # (Sim.energy_of(s): a helper)
                    self.helpers.extend(called)
                elif a is not None:
                    self.visit((name, ".{}", attr), a, depth)
            return
        try:  # (the instance dictionary itself: no __getattribute__ or __getattr__ of the user's runs)
            attrs = object.__getattribute__(v, "__dict__")
        except Exception:  # noqa: BLE001 (none, or a descriptor that refuses)
            attrs = v.__dict__ if isinstance(v, threading.local) else None  # (its thread's: regress123)
        if type(attrs) is not dict:
            attrs = None
        if self.reflective and attrs is not None and len(attrs) <= 256:  # getattr(self, name): any of them
            for attr, a in list(attrs.items()):
                if attr not in self.attrs:
                    self.visit((name, ".{}", attr), a, depth)
        if (getattr(tv, "__module__", None) or "").partition(".")[0] not in _INTERNAL_PACKAGES:
            held = self.held(tv)
            for op in _CALLED_BY_SYNTAX:  # (monitor(u), op @ u, store["u"]: methods no name calls)
                d = _class_attr(tv, op) if op in held else None
                if type(d) is _FunctionType:
                    self.helpers.append(_MethodType(d, v))
        for attr in self.named(tv, attrs):
            a = attrs.get(attr) if attrs is not None else None
            if a is None:
                d = _class_attr(tv, attr)
                called = _called_functions(d, attr, tv, v)
                if called is not None:  # a method (``sim.step(x)``), a property's getter...
                    self.helpers.extend(called)
                    continue
                td = type(d)
                if td in _STORED_ATTRS:  # a slot, a namedtuple field: the stored value
                    try:
                        a = d.__get__(v, tv)
                    except AttributeError:  # (an empty slot)
                        continue
                else:
                    a = d  # a class attribute
            if a is not None:
                self.visit((name, ".{}", attr), a, depth)


_ABSENT = object()
_MODULE_OR_NONE = (types.ModuleType, type(None))
_ITERATOR_MODULES = frozenset(("itertools", "_collections"))  # (their every type: iterators and their parts)
_HEAPTYPE = 1 << 9  # (Py_TPFLAGS_HEAPTYPE: a class made by a class statement, not compiled)
_DICT_VIEWS = (type({}.keys()), type({}.values()), type({}.items()))


def _iterated(v, tv):
    """(label, object) of what an iterator made before the call goes through (``rows = iter(X)``,
    ``X.flat``, ``zip(X, Y)``, ``itertools.tee``, ``np.nditer(X)``, ``(r * 2 for r in X)``, a weak
    reference or a weak dictionary holding X): the objects a compiled iterator refers to, as the
    garbage collector reads them (no code of the program's runs); a suspended generator's local
    variables; None for other objects (a Python iterator class of the program's is an object like
    any other, its ``__next__`` a helper that syntax calls)."""
    if tv is types.GeneratorType:
        frame = v.gi_frame
        return [] if frame is None else [(f"local {k!r}", item) for k, item in frame.f_locals.items()]
    if tv is np.flatiter:
        return [("base", v.base)]
    if tv is np.nditer:
        try:
            return [("operands", v.operands)]
        except ValueError:  # (a closed one)
            return []
    if issubclass(tv, weakref.ReferenceType):
        return [("referent", v())]
    if tv in _DICT_VIEWS or tv is types.MappingProxyType:  # (views of a dict: the dict, searched as one)
        return [("mapping", r) for r in gc.get_referents(v)]
    mod = tv.__module__ or ""
    if mod in _ITERATOR_MODULES or (hasattr(tv, "__next__") and (
            not tv.__flags__ & _HEAPTYPE or mod.partition(".")[0] in _INTERNAL_PACKAGES)):
        return [("iterating", r) for r in gc.get_referents(v) if not isinstance(r, type)]
    return None


# methods of a user's class that syntax calls, not a name: the alias search walks them as helpers
_CALLED_BY_SYNTAX = ("__call__", "__getitem__", "__getattr__", "__matmul__", "__rmatmul__", "__mul__", "__rmul__",
                     "__add__", "__radd__", "__sub__", "__rsub__", "__truediv__", "__rtruediv__", "__iter__",
                     "__array__", "__next__")


def _called_functions(d, attr, cls, instance=None):
    """The Python functions that class attribute ``d`` (``attr`` of ``cls``) runs when the code
    uses it, as helpers: a method (bound to ``instance``, with those it overrides, which super()
    calls; through the class itself, the function), a staticmethod's function, a classmethod's
    bound to the class, a property's getter (whose code names the attribute it returns); None
    where ``d`` is none of these."""
    td = type(d)
    if td is _FunctionType:
        return [d] if instance is None else [_MethodType(f, instance) for f in _methods_named(cls, attr)]
    if td is staticmethod or td is classmethod:
        f = d.__func__
        if type(f) is not _FunctionType:
            return None if td is staticmethod and type(f) in _GETTERS else []  # (a getter: visited, its names)
        return [f if td is staticmethod else _MethodType(f, cls)]
    if td is property and instance is not None:
        return [_MethodType(d.fget, instance)] if type(d.fget) is _FunctionType else []
    get = getattr(td, "__get__", None)
    if type(get) is _FunctionType and instance is not None:
        # a descriptor of the program's (a validated attribute keeping values in a weak dictionary of
        # its own): its __get__, bound to the descriptor, whose code names what it reads (the oop tester)
        return [_MethodType(get, d)]
    return None


def _methods_named(cls, attr):
    """The functions named ``attr`` in the classes of ``cls``'s MRO (a method and those it overrides,
    which super() calls), the nearest first."""
    out = []
    for k in getattr(cls, "__mro__", ()):
        f = k.__dict__.get(attr)
        if type(f) is _FunctionType:
            out.append(f)
    return out


def _class_attr(cls, attr):
    """``attr`` as stored in the dictionary of ``cls`` or of a class it derives from (no descriptor run)."""
    for k in getattr(cls, "__mro__", ()):
        d = k.__dict__
        if attr in d:
            return d[attr]
    return None


class _Slotted:
    __slots__ = ("a",)


# descriptors whose __get__ reads a stored value without running Python code: __slots__
# members and namedtuple fields
_STORED_ATTRS = (type(_Slotted.a), type(collections.namedtuple("_T", "a").a))


def _names_of(code):
    hit = _NAMES.get(id(code))  # (by id: a code object's hash reads all of it)
    if hit is not None and hit[0]() is code:
        return hit[1]
    if len(_NAMES) > 4096:
        _NAMES.clear()
    glob, attrs, keys = set(), set(), set()
    _code_names(code, glob, attrs, keys)
    names = (tuple(glob), (tuple(attrs), tuple(keys)))
    # (a weak reference: functions made per call, exec'd models with large constants, are not kept)
    _NAMES[id(code)] = (weakref.ref(code), names)
    return names


def _mark_plain_aliases(fun, wrapped, npos=0, kwnames=(), args=(), kwargs=None, level=None):
    """An argument that is also (memory of) a plain array the function reads
    by name: mutagrad sees only what goes through the argument. A write through
    the argument into that memory raises (a plain read of the name would not carry
    its derivative), and a plain write through the name, which the tape would not
    see, is caught before the reverse pass (:func:`_check_plain_aliases`). ``args``,
    ``kwargs``: the call's, whose objects and callbacks are searched too (``f(x, sim)``
    reading ``sim.u``)."""
    plain, incomplete = _plain_arrays_of(fun, npos, kwnames, _object_arguments(fun, args, kwargs))
    flagged = []
    if not plain and not incomplete:
        return _summed(wrapped, flagged)
    # an array that owns its memory (no base) shares it with no other array but its views: only
    # those, and arrays that do not own theirs, need NumPy's bounds test (a search may find 10^4)
    found = [(name, v if type(v) is _ndarray else bottom(v)) for name, v in plain]
    for _t, info in wrapped:
        a = bottom(info.orig)  # (an outer level's traced array, inside a nested differentiation)
        if not isinstance(a, _ndarray):
            continue
        if type(a) is not _ndarray:  # (an np.memmap: its memory, as a plain array's)
            a = a.view(_ndarray)
        st = info.storage
        owner = _memory_owner(a)
        hits = [(_path(name), b, b.copy()) for name, b in found
                if (b.base is not None or owner is None or b is owner) and np.may_share_memory(a, b)
                and _shares_bounded(a, b)]
        if hits:
            # (path, plain array, its values at the call: a plain write through it is found when the
            # function returns; a traced write into memory none of them holds is an ordinary one)
            st.plain_alias = hits[0][0]
            st.plain_views = hits
            flagged.append(info)
            if st.active and level is not None:
                # a differentiated argument's: read-only while the function runs, as the argument is, so
                # that a write through it fails at the write (one undone before the function returns, a
                # write-and-restore, would change what the reads in between saw, unseen)
                for path, b, _ in hits:
                    if b is not a and b.flags.writeable and _relockable(b):
                        name = f"`{path}`, a plain array sharing memory with {st.name}"
                        level.lock(b, name)
                        level.locked_views = [*level.locked_views, (b, st, name)]
        elif incomplete:  # (whatever its size: the search could not check it)
            st.alias_unchecked = True
            if not a.dtype.hasobject:
                st.call_sum = (a, _arg_sum(a))
            flagged.append(info)
    return _summed(wrapped, flagged)


def _summed(wrapped, flagged):
    """The floating-point arguments' bits at the call (_arg_sum; of up to CHECKSUM_LIMIT bytes), for those
    the alias search found no plain array of: plain code may still write into one through a reference no
    search sees (a view an lru_cache getter returns, one a type the search does not look into holds), and
    an argument mutagrad never wrote must hold them still when the function returns (_check_plain_aliases).
    ``flagged``: the infos checked otherwise (found views) or already summed (an incomplete search), to
    which they are added."""
    checked = {id(info) for info in flagged}
    for _t, info in wrapped:
        st = info.storage
        a = bottom(info.orig)
        if (id(info) in checked or type(a) is not _ndarray or a.dtype.kind not in "fc"
                or a.nbytes > CHECKSUM_LIMIT):
            continue
        st.call_sum = (a, _arg_sum(a))
        flagged.append(info)
    return flagged


def _same_sum(a, before):
    """Whether argument ``a`` still has the bits ``before`` (_arg_sum's) records."""
    if type(before) is bytes:
        return a.tobytes(order="A") == before
    return bool(np.array_equal(_arg_sum(a), before))


_SUM_WEIGHTS = 1.0 + (np.arange(8192) * 0.6180339887498949) % 1.0  # (weights in [1, 2), all different)
# arguments of more bytes are not summed: two passes over an 8 MB matrix cost half again the gradient of
# A @ x w.r.t. x (the function reads A once); the alias search covers them, as it covered all before
CHECKSUM_LIMIT = 1 << 20


def _arg_sum(a):
    """A small argument's bytes (64 KiB at most: compared bit for bit, cheaper than summing), else checksums
    of ``a``'s bits: its memory as 32-bit integers (bytes, where its size is no multiple of 4), exact in float64, in blocks of
    8192, each block's weighted sum by BLAS (below 2^46, whose rounding, below 1, cannot hide a change of
    1 in a word: a change of any bit shows, a zero's sign and a NaN's payload included; a swap of two
    elements too where their words differ by more than rounding). No floating-point event of NumPy's is
    raised or noted: it runs where the program's error state is in force."""
    if a.nbytes <= 65536:
        return a.tobytes(order="A")
    b = np.ravel(a, order="K").view(np.uint8)
    u = b.view(np.uint32) if b.size % 4 == 0 else b
    w = _SUM_WEIGHTS
    n, m = u.size, w.size
    k = n // m
    sums = np.empty(k + 1)
    # (two blocks at a time as float64, 128 KiB: a float64 copy of the whole argument, up to 2 MiB, is memory
    # the allocator maps afresh and faults in at each call, which cost 1 ms an argument: the groupby tester)
    part = np.empty((2, m))
    for i in range(0, k, 2):
        rows = u[i * m:min(i + 2, k) * m].reshape(-1, m)
        got = part[:len(rows)]
        np.copyto(got, rows)
        np.dot(got, w, out=sums[i:i + len(rows)])
    sums[k] = np.dot(u[k * m:].astype(np.float64), w[:n - k * m])
    return sums


def _path(p) -> str:
    """The text of a path the alias search built lazily: a name, or (parent, format, key)."""
    if type(p) is str:
        return p
    parent, fmt, key = p
    return _path(parent) + fmt.format(key)


def _memory_owner(a):
    """The array whose memory ``a`` views (``a`` itself if it owns it; None when the memory is not
    an array's own: a buffer, an as_strided view's stand-in)."""
    while True:
        b = getattr(a, "base", None)
        if b is None:
            return a if type(a) is _ndarray else None
        a = b


def _searched_argument(v) -> bool:
    """Whether an argument (or a leaf of one) may hold arrays the search follows: not an array, a
    number, a string or None (by its type: isinstance would ask a proxy for __class__)."""
    tv = type(v)
    return not (issubclass(tv, _ndarray) or v is None or issubclass(tv, (Tracer, int, float, complex, str, bytes, np.generic)))


def _object_arguments(fun, args, kwargs):
    """(parameter name, value) of the call's arguments that are neither arrays nor numbers nor
    containers (which are flattened and checked as arguments): objects and callbacks."""
    if not kwargs and all(type(v) in _NOT_OBJECTS for v in args):
        return []  # (the common case: arrays and numbers only)
    code = getattr(fun, "__code__", None)
    params = code.co_varnames[:code.co_argcount] if code is not None else ()
    if type(fun) is _MethodType:
        params = params[1:]
    out = []
    items = [(params[k] if k < len(params) else f"argument {k}", v) for k, v in enumerate(args)]
    items += list((kwargs or {}).items())
    for name, v in items:
        if not _searched_argument(v):
            continue
        leaves = tree_flatten(v)[0]
        if len(leaves) == 1 and leaves[0] is v:  # (not a dataclass or another registered container: those
            out.append((name, v))  # are flattened, their arrays checked as the arguments' leaves)
        else:  # a container's objects and callbacks (a list of callbacks over x)
            out.extend((f"{name} leaf {k}", leaf) for k, leaf in enumerate(leaves) if _searched_argument(leaf))
    return out


def _check_still_locked(level):
    """As the function returns: a differentiated argument's caller's array (or a plain view of it the
    alias search found) that plain code made writable again meanwhile (``X.flags.writeable = True``
    through a global) could have been written, and restored, unseen."""
    locked = level.locked
    if not locked:
        return
    held = [(st.orig, st, st.name) for st in level.arg_storages
            if st.orig is not None and locked.get(id(st.orig), (None,))[0] is st.orig]
    for a, st, name in [*held, *level.locked_views]:
        if a.flags.writeable and (st.active or st.tangent is not None):
            raise MutationError(
                f"{name} was made writable again while the function ran (`.flags.writeable = True` "
                "through another reference to it, a global, an attribute): mutagrad keeps it read-only to "
                "plain code meanwhile, as a plain write through it would change values the derivative of "
                f"{st.name} reads without its knowing (found when the function returned, at {user_line()}). "
                "Write through the argument, or pass a copy of the array.")


def _check_plain_aliases(level):
    """Before the reverse pass: an argument that is a plain array's memory and
    that is differentiated, or that a pullback reads, must not have been
    changed by plain code through that array (a traced read after the change
    would take the new values for the argument's own)."""
    try:
        _check_plain_aliases_of(level)
    finally:  # (checked, or raised: the level lets go of the summed ones, which hold it in a cycle)
        if any(info.storage.call_sum is not None for info in level.plain_aliases):
            for info in level.plain_aliases:
                info.storage.call_sum = None
            level.plain_aliases = [info for info in level.plain_aliases if info.storage.plain_views]


def _warn_unread_aliases(level, infos, nums, name):
    """Warn of a differentiated argument that no cotangent reached while the function reaches the caller's same
    array by another name (``model.params['W']`` of a global model, given ``model.params``): it reads plain values
    there, so its derivative is zero, though a change of that array changes the output (the metalearn tester's
    meta-objective; a write there raises AliasingError)."""
    if not level.plain_aliases:
        return
    differentiated = {id(i.storage) for n in nums for i in infos[n][1]}  # (not the constants passed beside them)
    for info in level.plain_aliases:
        st = info.storage
        if not st.plain_views or id(st) not in differentiated or st.poison is not None or st.written:
            continue
        if st.adj is None:
            warn_at(user_frame(sys._getframe(1)), (
                f"{name}: {st.name} is not read through the argument, but the function can reach the same array "
                f"as `{st.plain_views[0][0]}` (a global, a closed-over or an attribute's name): values read there "
                "are plain numbers, so the derivative comes out zero, though the output may change with that "
                "array. Read it through the argument the function is given (a model that uses the parameters "
                "passed in: model.forward(X, params)), or pass a copy if the zero is meant."), every=True)
            continue
        # Part of the argument read through it, part through a plain view that the function reaches (a model
        # holding views of a flat parameter vector, model.W = theta[:4].reshape(2, 2), and a loss reading
        # theta[4:] as well: the regress124 tester): no derivative reaches the elements the view covers
        a = bottom(info.orig)
        adj = bottom(st.adj)  # (inside an outer differentiation, traced: its values)
        if not (type(a) is _ndarray and type(adj) is _ndarray and adj.size == a.size) or st.adjshared is not None:
            continue
        for path, v, _ in st.plain_views:
            mask = _covered(a, v)
            if mask is not None and mask.any() and not mask.all() and not np.any(np.reshape(adj, a.shape)[mask]):
                warn_at(user_frame(sys._getframe(1)), (
                    f"{name}: no derivative reached the elements of {st.name} that the function can also reach as "
                    f"`{path}` (a plain array sharing their memory: a global, a closed-over or an attribute's name). "
                    "Values read there are plain numbers, so their derivative comes out zero, though the output "
                    "may change with them. Read them through the argument the function is given (slice the "
                    "parameters passed in, as model.forward(X, params) would), or pass a copy if the zero is "
                    "meant."), every=True)
                break


def _covered(a, v):
    """Which elements of array ``a`` share their memory with the array ``v`` (a boolean mask of ``a``'s shape), or
    None where their layouts cannot be related element by element (other item sizes, or a huge span)."""
    item = a.itemsize
    if v.itemsize != item or any(s % item for s in a.strides + v.strides) or not a.size or not v.size:
        return None
    lo_a, hi_a = np.lib.array_utils.byte_bounds(a)
    lo_v, hi_v = np.lib.array_utils.byte_bounds(v)
    lo, hi = min(lo_a, lo_v), max(hi_a, hi_v)
    if (hi - lo) // item > 4 * (a.size + v.size) + 1024:
        return None
    mem = np.zeros((hi - lo) // item, bool)

    def at(x):  # mem's elements at x's memory, in x's layout
        off = (x.__array_interface__["data"][0] - lo) // item
        return np.lib.stride_tricks.as_strided(mem[off:], x.shape, [s // item for s in x.strides])

    at(v)[...] = True
    return at(a).copy()


def _check_read_only_constants(level, when="while it ran"):
    """The read-only constants a pullback reads uncopied (ReverseLevel._note_read_only) must hold the bits they
    held when an operation first read them: when the function returns, and when vjp's pullback is called."""
    for a, before in (level.__dict__.get("read_only_sums") or {}).values():
        if not _same_sum(a, before):
            raise MutationError(
                f"a read-only array of shape {a.shape} that the function reads as a constant (closed over, a "
                f"global, an attribute) changed {when}, after an operation read it: through a writable view "
                "of its memory made before it was made read-only, a.setflags(write=True), or ufunc.at (which "
                "NumPy lets write into read-only arrays). mutagrad does not copy a read-only array, so the "
                f"derivative would use the new values (at {user_line()}). Leave the array "
                "writable (mutagrad then copies what an operation reads), pass it as an argument, or change a "
                "copy of it" + (" after calling the pullback." if when != "while it ran" else "."))


def _check_plain_aliases_of(level):
    _check_read_only_constants(level)
    for info in level.plain_aliases:
        st = info.storage
        if st.captured or st.was_captured or st.span is not None or st.active or st.tangent is not None:  # (forward mode: a tangent)
            summed = st.call_sum
            if summed is not None and not st.written and not _same_sum(*summed):
                where = (
                    "held where mutagrad's search for such references does not reach: it searches "
                    f"{ALIAS_SEARCH_BUDGET} objects, {ALIAS_SEARCH_DEPTH} steps (attributes, items) from the names the "
                    "code uses, and lists, tuples and dicts of 1024 objects" if st.alias_unchecked else
                    "that mutagrad's search for such references does not find: a view that a function call "
                    "returns, an lru_cache getter's, or one held in an object the search does not look into")
                raise MutationError(
                    f"{st.name} changed while the function ran, and not by a write mutagrad saw: plain NumPy "
                    f"code wrote into its memory through another reference to it (a plain view made before the "
                    f"call, {where}). Found when the function returned, differentiated at {user_line()}; the "
                    "derivative reads the argument's values, and which values it read, before or after the "
                    "change, cannot be told. Write through the argument, or pass a copy of the array.")
            for path, v, before in st.plain_views:
                if not _same_bits(v, before):
                    raise MutationError(
                        f"{st.name} shares its memory with the plain array `{path}`, through which plain NumPy "
                        "code changed it while the function ran (mutagrad does not see such a write: "
                        f"found when the function returned, differentiated at {user_line()}); the "
                        "derivative reads the argument's values, and which values it read, before or "
                        "after the change, cannot be told. Write through the argument, or pass a copy "
                        "of the array."
                    )


def _check_not_none(a, n):
    if a is None:  # (None inside a container is an empty subtree; a whole argument None is a mistake)
        raise TypeError(f"argument {n}: cannot differentiate with respect to None")


def _check_argnums(argnums, nargs, kwargs=None):
    for n in argnums:
        if n >= nargs or n < -nargs:
            raise TypeError(f"argnums={n} but the function was called with {nargs} positional arguments"
                            + (": the arguments to differentiate are passed positionally (mg.grad(f)(x), not "
                               "mg.grad(f)(a=x)); keyword arguments are constants" if kwargs else ""))
    if len(argnums) > 1:
        seen = set()
        for n in argnums:
            k = n + nargs if n < 0 else n
            if k in seen:
                raise ValueError(f"argnums={tuple(argnums)} names argument {k} twice; name each argument once")
            seen.add(k)


def _wrap_args(level, args, argnums, fun=None, kwargs=None, every=False):
    """Wrap the arguments for ``level``: ``args[argnums]`` differentiated, the
    other float arrays (and those of ``kwargs``, a dict rewritten in place)
    constant traced arrays; returns (args, infos). ``every``: vjp and jvp, which
    differentiate every primal (a value that cannot be is closed over instead)."""
    _check_argnums(argnums, len(args), kwargs)
    if every:  # (vjp and jvp: the refusals' advice names a primal with a zero tangent, also where such a
        level.every = True  # primal is passed as a constant: jvp's float arrays and numbers)
    # a traced value a finished differentiation left behind (in a global, an attribute) is
    # the array it holds (see core.live)
    args = [live(a, argument=True) if isinstance(a, Tracer) else a for a in args]
    if kwargs:
        kwargs.update({k: live(v, argument=True) for k, v in kwargs.items() if isinstance(v, Tracer)})
    orig_args, orig_kwargs = tuple(args), dict(kwargs) if kwargs else None  # (for the alias search)
    infos = {}
    wrapped = []
    top = level.index == 0
    for n in argnums:
        a = args[n]
        if top and type(a) is _ndarray and a.dtype.kind in "fc":
            # the common case, one float array (what _wrap_leaf does for it at the outermost level)
            where = f"argument {n}"
            v, st = _caller_array(level, a, where, active=True)
            t = ArrayTracer(v, level, st, None, False)
            info = _Leaf("array", a.shape, a.dtype, st, a)
            args[n] = t
            infos[n] = (None, [info])
            wrapped.append((t, info))
            continue
        _check_not_none(a, n)
        leaves, tree = tree_flatten(a)
        new = []
        linfo = []
        for k, leaf in enumerate(leaves):
            if isinstance(leaf, Tracer):
                leaf = live(leaf, argument=True)  # (a leftover in a container: the array it holds)
            where = _check_leaf_at(leaf, f"argument {n}", a, leaves, k, every)
            t, info = _wrap_leaf(level, leaf, where)
            new.append(t)
            linfo.append(info)
            wrapped.append((t, info))
        args[n] = tree_unflatten(tree, new)
        infos[n] = (tree, linfo)
        _pair_containers(level, a, args[n])
    _wrap_constants(level, args, argnums, wrapped)
    if kwargs:
        kwargs.update(_wrap_kwargs(level, kwargs, wrapped))
    _mark_aliasing(wrapped)
    level.plain_aliases = (_mark_plain_aliases(fun, wrapped, len(args), kwargs or (), orig_args, orig_kwargs, level)
                           if fun is not None else ())
    return args, infos


def _caller_array(level, a, name, active=False):
    """(the writable view of the caller's array ``a`` a tracer of ``level`` holds, its
    storage): ``a`` itself is read-only to plain code meanwhile (Level.lock). A differentiated
    ``a`` whose elements share memory is held as a private read-only copy."""
    overlapping = (a.size > 1 and not (a.flags.c_contiguous or a.flags.f_contiguous)
                   and _may_self_overlap(a.shape, a.strides, a.itemsize))
    if active and overlapping:
        # elements sharing memory (np.broadcast_to): their derivatives must be separate, so a
        # differentiated argument is a private copy, read-only as the caller's array is
        if a.flags.writeable:
            raise MutationError(
                f"{name} has elements that share memory (an as_strided view with a zero or overlapping "
                f"stride) and is writable: differentiating with respect to it at {user_line()} has no "
                "meaning element by element. Pass a copy (x.copy()).")
        c = a.view(_ndarray).copy()
        c.flags.writeable = False
        v = c[...]  # (a view of a read-only copy: the function cannot make it writable, as it could NumPy's
        # broadcast, to write into a copy the caller never sees)
    else:
        v = level.lock(a, name)
    st = Storage(level, v, active)
    st.overlapping_arg = overlapping and not active
    st.name = name
    st.orig = a
    if level.arg_storages:
        level.arg_storages.append(st)
    else:
        level.arg_storages = [st]
    return v, st


def _wrap_constants(level, args, argnums, wrapped, names=None):
    """Float arrays among the other arguments become inactive traced arrays:
    the function can then write traced values into them (scratch buffers
    passed in), and a write into them is recorded like any other, so an
    operation that read them never needs a private copy."""
    levels = level.outer_levels() + [level]
    same = {}  # id -> the tracer of a constant array passed more than once: one object, as in the call
    for n in range(len(args)):
        if n in argnums or (n - len(args)) in argnums:
            continue
        a = args[n]
        if type(a) is _ndarray:  # the common case: one plain array
            if a.dtype.kind in "fc":
                if id(a) in same:  # (k(X, X): `X is Y` holds in the function, as in a plain call)
                    args[n] = same[id(a)]
                elif len(levels) == 1:  # (what _wrap_constant does at the outermost level)
                    v, st = _caller_array(level, a, f"argument {n}" if names is None else names[n])
                    st.pristine = True
                    t = args[n] = ArrayTracer(v, level, st, None, False)
                    wrapped.append((t, _Leaf("array", a.shape, a.dtype, st, a)))
                else:
                    args[n] = _wrap_constant(a, f"argument {n}" if names is None else names[n], levels, wrapped)
                same[id(a)] = args[n]
            continue
        if type(a) in _PLAIN_LEAVES:
            continue  # numbers and strings: nothing to wrap
        leaves, tree = tree_flatten(a)
        if not any(_constant_array(v, level) for v in leaves):
            continue
        new = []
        for k, leaf in enumerate(leaves):
            if isinstance(leaf, Tracer) and leaf._level.closed:
                leaf = live(leaf, argument=True)  # (a leftover: the array it holds)
            if _constant_array(leaf, level):
                if id(leaf) in same:
                    leaf = same[id(leaf)]
                else:
                    where = (f"argument {n}" if names is None else names[n]) + (f" leaf {k}" if len(leaves) > 1
                                                                                 else "")
                    _check_subclass(leaf, where)
                    same[id(leaf)] = leaf = _wrap_constant(leaf, where, levels, wrapped)
            new.append(leaf)
        args[n] = tree_unflatten(tree, new)
        _pair_containers(level, a, args[n])


# Containers passed as arguments are rebuilt around the traced leaves. So that the
# caller's lists, dicts and objects end as after a plain call (an item rebound,
# appended or removed), each rebuilt mutable container is paired with the caller's,
# and after the call the caller's gets the items of the rebuilt one: the caller's
# own leaves and containers where the function kept them, plain values for traced ones.


def _is_object(x) -> bool:
    """A dataclass object, or an object of a class registered with register_pytree that keeps its
    attributes in a __dict__ (the function may rebind them: `p.b = p.b * 2`)."""
    return (dataclasses.is_dataclass(x) and not isinstance(x, type)) or (
        type(x) in _PYTREE_CLASSES and (hasattr(x, "__dict__") or _slot_names(type(x))))


def _slot_names(cls) -> tuple:
    """The ``__slots__`` members of a class and its bases (not __dict__ or __weakref__)."""
    names = []
    for c in cls.__mro__:
        slots = c.__dict__.get("__slots__", ())
        for n in ((slots,) if isinstance(slots, str) else slots):
            if n not in ("__dict__", "__weakref__") and n not in names:
                names.append(n)
    return tuple(names)


def _attrs(x) -> dict:
    """A dataclass object's fields and other attributes (slots or not): those it has (the function
    may have deleted one, `del p.w`)."""
    d = dict(getattr(x, "__dict__", {}))
    if not dataclasses.is_dataclass(x):  # (a register_pytree class's object: its slots too)
        for n in _slot_names(type(x)):
            try:
                d[n] = getattr(x, n)
            except AttributeError:  # (unset, or deleted by the function)
                continue
        return d
    for f in dataclasses.fields(x):
        if f.name in d or type(getattr(type(x), f.name, None)) is not types.MemberDescriptorType:
            continue  # (not a slot: a field the instance lacks reads the class's default, not its own)
        try:
            d[f.name] = getattr(x, f.name)
        except AttributeError:
            continue
    return d


def _items(x):
    """(mutable, [(key, child)]) for the containers the caller may find changed
    (lists, dicts, dataclass objects; tuples only hold them), else None."""
    t = type(x)
    if t is list:
        return True, list(enumerate(x))
    if t is dict or t is collections.OrderedDict or t is collections.defaultdict:
        return True, list(x.items())
    if _is_object(x):
        return True, list(_attrs(x).items())
    if isinstance(x, tuple):
        return False, list(enumerate(x))
    return None


def _set_items(obj, items, rebuilt=None):
    """Give the list, dict or dataclass object ``obj`` the ``items`` (a list or a dict); ``rebuilt``: the
    attributes a rebuilt register_pytree object had, the only ones the function can have deleted."""
    if type(obj) is list:
        obj[:] = items
    elif isinstance(obj, dict):
        obj.clear()
        obj.update(items)
    else:
        for k in _attrs(obj) if rebuilt is None else rebuilt:
            if k not in items and hasattr(obj, k):  # (deleted by the function)
                object.__delattr__(obj, k)
        for k, v in items.items():
            object.__setattr__(obj, k, v)


def _holds(ours, orig) -> bool:
    """Whether the leaf ``ours`` of a rebuilt argument is the caller's array ``orig`` or the tracer made of it."""
    b = bottom(ours) if isinstance(ours, Tracer) else ours
    return b is orig or (type(b) is _ndarray and b.base is orig)


def _pair_containers(level, orig, ours):
    pairs = level.__dict__.setdefault("container_pairs", ([], {}))
    _pair(orig, ours, pairs)


def _pair(orig, ours, pairs):
    if orig is ours:
        return
    conts, known = pairs
    got = _items(orig)
    if got is None:
        if type(orig) is _ndarray and not _holds(ours, orig):
            # (a copy the rebuilt object made of the traced leaf it was given, a register_pytree class's
            # __init__ with self.pos = pos.copy(): the function writes into the copy, so the caller's object
            # gets the copy's final values, not its own untouched array: the customrules tester)
            return
        known[id(ours)] = (ours, orig)  # a leaf: the caller's own where the function keeps it
        return
    mutable, kids = got
    if type(ours) is not type(orig) and not (isinstance(ours, tuple) and isinstance(orig, tuple)):
        return
    if mutable:
        # (a register_pytree object is rebuilt from its flattened attributes only: the attributes it had
        # then are the ones the function can rebind or delete; the caller's others are left alone)
        rebuilt = set(_attrs(ours)) if type(orig) in _PYTREE_CLASSES and not dataclasses.is_dataclass(orig) else None
        conts.append((ours, orig, rebuilt))
        known[id(ours)] = (ours, orig)
    theirs = dict(_items(ours)[1])
    for k, o in kids:
        if k in theirs:
            _pair(o, theirs[k], pairs)


def _sync_containers(level):
    """Give the caller's containers the items the function left in the rebuilt ones."""
    pairs = level.__dict__.pop("container_pairs", None)
    if not pairs:
        return
    conts, known = pairs

    def plain(v):
        hit = known.get(id(v))
        if hit is not None and hit[0] is v:
            return hit[1]  # the caller's own leaf or container
        if isinstance(v, Tracer) and v._level is level:
            v._storage.exported = True  # (the caller's container holds its memory: vjp's pullback checks it)
        return _unwrap_level(v, level)

    for ours, orig, rebuilt in conts:
        items = _items(ours)[1]
        _set_items(orig, [plain(v) for _, v in items] if type(orig) is list else {k: plain(v) for k, v in items},
                   rebuilt)
        if type(orig) is collections.defaultdict:
            orig.default_factory = ours.default_factory  # (the function may have set another)


def _call(level, fun, args, kwargs=None):
    """``fun(*args, **kwargs)`` at ``level``, the caller's containers synced after it returns or raises."""
    forget_escape()
    ensure_shuffle_filter()
    warn_type_tests(fun, args)
    seen = watch_errors()
    try:
        out = fun(*args, **(kwargs or {}))
        deferred = take_deferred()
        if deferred is not None:
            raise deferred
        if seen:
            caught = caught_by_the_program(seen)
            if caught is not None:
                raise caught
        _check_still_locked(level)
        if type(out) not in _NOT_OBJECTS and _a_container(out):
            # (an argument's container returned, `return state`, a dict or a dataclass: the sync below puts plain
            # values back into it, and the output needs its traced ones: a new container of the same leaves;
            # regress108/109)
            leaves, tree = tree_flatten(out)
            out = tree_unflatten(tree, leaves)
        return out
    except DifferentiationError:
        raise
    except Exception as e:  # (NumPy's, SciPy's C code's: MINPACK's error replacing mutagrad's)
        clear = replaced_error(e)
        if clear is None:
            clear = readonly_error(e, _all_locked_names(level), level.outer_locked, bool(level.joined))
        if clear is not None:
            if clear.__traceback__ is not None:  # (mutagrad's own error, raised before and replaced by NumPy or a
                # library: shown alone, not after "setting an array element with a sequence", and ending at the
                # user's line, where the replacement came from)
                raise clear.with_traceback(e.__traceback__) from None
            raise clear from e
        note = error_note(e)
        if note is not None and note not in getattr(e, "__notes__", ()):  # (nested: once)
            e.add_note(note)
        if seen:  # (the program caught mutagrad's error, went on along another path, and failed there:
            caught = caught_by_the_program(seen, e)  # its own error stays, as a plain call may raise it too)
            note = None if caught is None else f"mutagrad: before this, {type(caught).__name__}: {caught}"
            if note is not None and not any(n.startswith(note) for n in getattr(e, "__notes__", ())):  # (nested: once)
                e.add_note(note + "\n" + "\n".join(caught.__notes__))
        raise
    finally:
        unwatch_errors(seen)
        forget_escape()
        _sync_containers(level)
        for a in itertools.chain(args, (kwargs or {}).values()):
            ta = type(a)
            if ta in _CONTAINERS or (ta not in _NOT_OBJECTS and _is_object(a)):  # (not the argument list: ours)
                _unwrap_left_in(a, level, 0)


_CONTAINERS = (list, dict, tuple)
# the types of values that are no object or container (a call's arguments: nothing to sync or search)
_NOT_OBJECTS = frozenset((ArrayTracer, ScalarTracer, _ndarray, float, int, complex, bool, str, np.float64, type(None)))


def _unwrap_left_in(x, level, depth):
    """Plain values in place of ``level``'s traced ones in the mutable containers among the
    arguments that were passed as they are (a list the function appends traced values to,
    not differentiated): what the caller finds there is what a plain call leaves, values."""
    got = _items(x) if depth < 6 else None
    if got is None:
        return
    mutable, kids = got
    changed = False
    for k, v in kids:
        if isinstance(v, Tracer):
            if mutable and v._level is level:
                changed = True
        else:
            _unwrap_left_in(v, level, depth + 1)
    if changed:
        new = [(k, _unwrap_level(v, level) if isinstance(v, Tracer) and v._level is level else v) for k, v in kids]
        _set_items(x, [v for _, v in new] if type(x) is list else dict(new))


def _all_locked_names(level):
    """The names of the arrays ``level`` and the levels around it locked (a nested differentiation's
    inner level did not lock the caller's arrays: mg.hessian's outer level did)."""
    names = []
    for lv in (*active_levels(), level):
        if getattr(lv, "locked", None):
            names.extend(n for n in _locked_names(lv) if n not in names)
    return names


def _locked_names(level):
    """The names of the arguments whose caller's arrays ``level`` locked."""
    also = {}  # (the argument's own array by another name; a view sharing its memory is named as locked apart)
    for info in getattr(level, "plain_aliases", ()):
        same = [path for path, b, _ in info.storage.plain_views if b is bottom(info.orig)]
        if same:
            also[info.storage.name] = same[0]
    return [name + (f" (the plain array `{also[name]}`)" if name in also else "") for _, _, name, *_ in level.locked.values()]


def _split_aux(result, has_aux):
    if not has_aux:
        return _no_leftovers(result), None
    if not (isinstance(result, (tuple, list)) and len(result) == 2):  # (a list pair too, as JAX takes it)
        raise TypeError("has_aux=True requires the function to return a pair (output, aux), got "
                        f"{'an array' if isinstance(result, Tracer) else type(result).__name__}"
                        + (f" of {len(result)} items (return (output, (aux1, aux2, ...)))"
                           if isinstance(result, (tuple, list)) else "") + f" (differentiated at {user_line()})")
    return _no_leftovers(result[0]), _no_leftovers(result[1], warn=False)


def _no_leftovers(out, warn=True):
    """The function's output, with the values an earlier differentiation left that it returns as they
    are (a memoized result, returned from a cache) replaced by their values, as a plain call returns
    them; each warned about (core.live): its derivative is lost to this differentiation (a zero
    gradient, silently, had been the result). ``warn``: False for aux, whose values carry none."""
    t = type(out)
    if t is ArrayTracer or t is ScalarTracer:
        return live(out, argument=not warn, output=True) if _left(out) else out
    if t in _PLAIN_LEAVES or t is _ndarray:
        return out
    leaves, tree = tree_flatten(out)
    if not any(_left(x) for x in leaves):
        return out
    return tree_unflatten(tree, [live(x, argument=not warn, output=True) if _left(x) else x for x in leaves])


def _left(x):
    """Whether output leaf ``x`` is a value of a finished differentiation, or of an independent one
    another thread runs (core.elsewhere): a plain value to this one."""
    if not isinstance(x, Tracer):
        return False
    lv = x._level
    return lv.closed or (lv.thread != _get_ident() and elsewhere(lv, x))


def _wrap_kwargs(level, kwargs, wrapped):
    """Float arrays among the keyword arguments (never differentiated) become
    constant traced arrays, as positional ones do (:func:`_wrap_constants`)."""
    if not kwargs:
        return kwargs
    names = list(kwargs)
    vals = [kwargs[k] for k in names]
    _wrap_constants(level, vals, (), wrapped, [f"keyword argument {k!r}" for k in names])
    return dict(zip(names, vals))


def _constant_array(v, level) -> bool:
    """A float array to pass as a constant traced array of ``level``: a plain
    one, or an outer level's (inside an outer differentiation, e.g. the
    arguments jacobian and hessian pass on), so that writes into it are this
    level's writes."""
    if type(v) is ArrayTracer:
        return v._level is not level and v.dtype.kind in "fc"
    if isinstance(v, _ndarray) and not isinstance(v, Tracer):
        return v.dtype.kind in "fc"
    return False


def _wrap_constant(leaf, name, levels, wrapped):
    plain = not isinstance(leaf, Tracer)
    # (a plain array is plain to the outer levels: wrapped by this one only, see _wrap_leaf)
    t = lift(levels[-1].lock(leaf, name), levels[-1:]) if plain else lift(levels[-1].lock_traced(leaf, name), levels)
    t._storage.name = name
    if plain:
        t._storage.orig = leaf
    wrapped.append((t, _Leaf("array", leaf.shape, leaf.dtype, t._storage, leaf)))
    return t


def _finish_leaf(g, info):
    """Turn a derivative buffer into the argument's own form (shape, dtype,
    Python or NumPy scalar, the JAX convention for complex)."""
    if type(g) is _ndarray and info.kind == "array" and g.base is None and g.dtype == info.dtype and (
            g.shape == info.shape and g.dtype.kind == "f"):
        return g  # the storage's own real adjoint buffer: the common case
    if isinstance(g, NotImplementedTangent):
        return g
    if g is None or isinstance(g, AbstractZero):
        g = np.zeros(info.shape, info.dtype)
    else:
        g = project(g, info.shape, info.dtype)
        if isinstance(g, Tracer):
            g = np.copy(g)
        elif not (type(g) is _ndarray and g.base is None and g.dtype == info.dtype and g.shape == info.shape):
            g = np.array(g, dtype=info.dtype, copy=True)
        # else: the storage's own adjoint buffer, which nothing else refers to once the pass is over
    if info.dtype.kind == "c":  # internal df/dx + i df/dy  ->  JAX/autograd convention
        g = np.conjugate(g, out=g) if type(g) is _ndarray else np.conj(g)  # (out=: a 0-d array stays one)
    if isinstance(g, Tracer):  # (an outer differentiation traces it)
        if info.kind == "tracer":  # an outer level's traced argument: the gradient takes its kind
            o = info.orig
            if o._scalar:
                if not g._scalar:
                    g = g[()]
                if weak(o):  # (a Python number at the outer level; np.float32 stays one)
                    mark_weak(g)
            return g
        if info.kind != "array" and not g._scalar:
            g = g[()]  # a traced scalar, as the plain call's number
            if info.kind != "npscalar":
                mark_weak(g)  # a Python number there: weak in NumPy's promotion
        return g
    if info.kind == "float":
        return float(g)
    if info.kind == "complex":
        return complex(g)
    if info.kind == "npscalar":
        return info.dtype.type(g)
    return g


def _normalize_argnums(argnums):
    def index(a):  # (not a bool: argnums=True was taken as 1, apisurface4)
        return isinstance(a, (int, np.integer)) and not isinstance(a, (bool, np.bool_))

    if index(argnums):
        return (int(argnums),), True
    if isinstance(argnums, (tuple, list)) and all(index(a) for a in argnums):
        return tuple(int(a) for a in argnums), False
    raise TypeError(f"argnums must be an int or a tuple of ints, got {argnums!r}")


def _unwrap_level(x, level):
    """Strip ``level`` from every leaf of ``x`` (outputs and aux)."""
    if type(x) is ScalarTracer and x._level is level and type(x._value) is not _ndarray:
        if x._storage.weak and x._geom is None:
            return x._value.item()  # a Python float, as the plain call returns
        return x._value  # the common case: a scalar output

    def leaf(v):
        if isinstance(v, Tracer) and v._level is level:
            val = v._value
            if v._geom is None and v._storage.orig is not None:
                return v._storage.orig  # an argument itself: the caller's array, as a plain call returns it
            if v._scalar and v._storage.weak and v._geom is None:
                return val.item()
            if v._scalar and type(val) is _ndarray:
                return val[()]
            return val
        return v

    leaves, tree = tree_flatten(x)
    return tree_unflatten(tree, [leaf(v) for v in leaves])


def _storages_of(level, infos):
    seen = {}
    for _, linfo in infos.values():
        for info in linfo:
            seen[id(info.storage)] = info.storage
    for rec in level.tape:
        t = type(rec)
        if t is OpRecord or t is EWRecord:
            for s, _, _ in rec.inputs:
                seen[id(s)] = s
            for s in rec.outputs:
                if s is not None:
                    seen[id(s)] = s
        elif t is GatherRecord:
            seen[id(rec.src)] = rec.src
            seen[id(rec.out)] = rec.out
        elif t is WriteRecord:
            seen[id(rec.dest)] = rec.dest
            if rec.vsrc is not None:
                seen[id(rec.vsrc)] = rec.vsrc
        elif t is ScalarRun:
            for s in rec.storages():
                seen[id(s)] = s
    return list(seen.values())


def _collect(level, infos, argnums, single):
    res = []
    for n in argnums:
        tree, linfo = infos[n]
        leaves = []
        for info in linfo:
            s = info.storage
            if s.poison is not None:
                leaves.append(s.poison)
            else:
                a = s.adj
                if s.adjshared is not None and release_adj(s):  # another argument's gradient too
                    a = np.copy(a)
                leaves.append(_finish_leaf(a, info))
        res.append(leaves[0] if tree is None else tree_unflatten(tree, leaves))
    return res[0] if single else tuple(res)


def _check_scalar_output(out, name):
    if type(out) is ScalarTracer and type(out._value) is np.float64:
        return  # the common case: a float64 scalar
    if isinstance(out, (tuple, list, dict)):
        raise TypeError(
            f"{name} requires a scalar output, got a {type(out).__name__}. If the function returns "
            "(value, aux), pass has_aux=True; for several outputs use mg.jacobian or mg.vjp."
        )
    if isinstance(out, NotImplementedTangent):  # (an inner jvp's refusal returned as the output: its reason)
        raise NotImplementedTangentError(
            f"{name} of a derivative that is not implemented (an inner differentiation returned a "
            f"NotImplementedTangent as the function's output): {out.message}")
    if not isinstance(out, (Tracer, _ndarray, np.generic, float, int, complex, bool)):
        raise TypeError(
            f"{name} requires a scalar float output, got {type(out).__name__}"
            + (" (did the function forget to return its value?)" if out is None else "")
        )
    b = bottom(out)
    shape = np.shape(b)
    dt = getattr(b, "dtype", None)
    if shape != ():
        raise TypeError(
            f"{name} requires a scalar output, got an array of shape {shape} (differentiated at {user_line()}). "
            "Use mg.jacobian or mg.vjp for array outputs, or reduce the output (e.g. np.sum)."
        )
    if (dt is not None and dt.kind == "c") or isinstance(b, complex):
        raise TypeError(f"{name} requires a real scalar output, got a complex value; take np.real or np.abs first.")
    _check_not_integer(b, name)


def _check_not_integer(b, name):
    """The refusal of an output (``b``, its plain value) that is a boolean or an integer: no derivative."""
    dt = getattr(b, "dtype", None)
    if (dt is not None and dt.kind in "biu") or isinstance(b, (bool, int)):
        raise TypeError(
            f"{name} requires a floating-point output, got {type(b).__name__ if dt is None else dt} "
            f"({b!r}): a boolean or integer result has no derivative. Return a float (e.g. the "
            "quantity the comparison or count was made from)."
        )


def _check_hessian_output(out):
    """hessian's refusals of outputs that are mistakes, as grad's (an array output is differentiated as
    jacobian's; a string is refused by vjp's check of the outputs): None, an integer."""
    if out is None:
        raise TypeError("hessian requires a float output, got NoneType (did the function forget to return its value?)")
    _check_not_integer(bottom(out), "hessian")


# --------------------------------------------------------------------------
# Reverse mode


def _check_has_aux(has_aux, name):
    if not isinstance(has_aux, (bool, np.bool_)):
        raise TypeError(f"{name}: has_aux must be True or False, got {has_aux!r} (at {user_line()})")


def _check_callable(fun, name):
    """A TypeError now for a ``fun`` that cannot be called (not at the first call, as NumPy's)."""
    if not callable(fun):
        usage = f"mg.{name}(f)(x), not mg.{name}(x)" if name in _TRANSFORMS else f"mg.{name}(f, ...)"
        raise TypeError(f"mg.{name} takes the function to differentiate first, got {type(fun).__name__} "
                        f"{fun!r:.60}: {usage}")


_TRANSFORMS = ("grad", "value_and_grad", "jacobian", "hessian")


_ONE = np.float64(1.0)  # (the seed of a float64 scalar output: a NumPy scalar's adjoint is not copied)


def _owned(tree):
    """Derivatives returned inside an outer differentiation (an inner mg.grad, jvp, vjp, jacobian): a
    fresh plain float array among them (a derivative that is zero, or constant) becomes a traced
    constant of the active levels, as mnp.zeros makes one, so that the program can write traced values
    into it as into any fresh array (a plain call's result is one); otherwise a zero gradient refused
    writes a nonzero one took."""
    levels = active_levels()
    if not levels:
        return tree
    leaves, shape = tree_flatten(tree)
    fresh = [type(v) is _ndarray and v.dtype.kind in "fc" for v in leaves]  # (a Jacobian: a view of its stack)
    if not any(fresh):
        return tree
    return tree_unflatten(shape, [lift(v, levels) if f else v for v, f in zip(leaves, fresh)])


def value_and_grad(fun: Callable, argnums=0, has_aux: bool = False, *, _name="value_and_grad") -> Callable:
    """Return a function computing ``(fun(*args), d fun / d args[argnums])``.

    With ``has_aux=True``, ``fun`` returns ``(value, aux)`` and the result is
    ``((value, aux), grad)``.

    >>> import numpy as np, mutagrad as mg
    >>> mg.value_and_grad(lambda x: np.sum(x ** 2))(np.array([1.0, 2.0]))
    (np.float64(5.0), array([2., 4.]))
    """
    _check_callable(fun, _name)
    _check_has_aux(has_aux, _name)
    nums, single = _normalize_argnums(argnums)

    @functools.wraps(fun)
    @_no_full_collections
    def wrapped(*args, **kwargs):
        level = ReverseLevel()
        level.hold_locks = True  # (the caller's arrays stay read-only to other threads through the reverse pass)
        try:
            with level:
                targs, infos = _wrap_args(level, args, nums, fun, kwargs)
                with user_fp_state():  # (NumPy's warnings at the user's lines)
                    out, aux = _split_aux(_call(level, fun, targs, kwargs), has_aux)
                _check_scalar_output(out, _name)
            _check_plain_aliases(level)
            _warn_cached(level, out, _name, fun)

            def seed():
                if isinstance(out, Tracer) and out._level is level:
                    level.seed(out._storage, out._geom, _ONE if type(out._value) is np.float64 and out._geom is None
                               else np.ones((), out.dtype))

            seed()
            own_nan = isinstance(out, Tracer) and out._level is level and _seeded_nan([(out, 1.0)])
            nan = _backward(level, infos, seed, None, own_nan)
            _warn_unread_aliases(level, infos, nums, _name)
            grads = _collect(level, infos, nums, single)
        finally:
            try:  # (the caller's arrays first: an interrupt while the tape is freed leaves them writable)
                if level.locked or level.joined:
                    level.unlock()
            finally:
                level.tape = []
                level.snapshots.clear()
        val = _unwrap_level(out, level)
        if not STATE.levels and not own_nan and (nan or _poison_in_gradients(infos, nums)):
            grads = _forward_fill(grads, fun, args, kwargs, nums, single, infos, has_aux, val, None, targs)
        grads = _owned(grads)
        if has_aux:
            return (val, _unwrap_level(aux, level)), grads
        return val, grads

    wrapped._mutagrad_derivative = True  # (its output is a derivative: _warn_cached)
    return wrapped


def grad(fun: Callable, argnums=0, has_aux: bool = False, *, _name="grad") -> Callable:
    """Return a function computing the gradient of scalar ``fun`` w.r.t. ``args[argnums]``.

    ``fun`` may write into arrays in place, its arguments included; the
    gradient is taken w.r.t. the values the arguments had at the call. A tuple
    ``argnums`` gives a tuple of gradients. With ``has_aux=True``, ``fun`` returns
    ``(value, aux)`` and the result is ``(gradient, aux)``, as in JAX.

    >>> import numpy as np, mutagrad as mg
    >>> def f(x):
    ...     y = np.log(x)
    ...     x.fill(0.0)          # overwrite the input after using it
    ...     return np.sum(y + x)
    >>> mg.grad(f)(np.array([1.0, 2.0, 4.0]))
    array([1.  , 0.5 , 0.25])
    """
    vg = value_and_grad(fun, argnums, has_aux, _name=_name)

    @functools.wraps(fun)
    def wrapped(*args, **kwargs):
        if has_aux:
            (_, aux), g = vg(*args, **kwargs)
            return g, aux
        return vg(*args, **kwargs)[1]

    wrapped._mutagrad_derivative = True  # (its output is a derivative: _warn_cached)
    if isinstance(argnums, (int, np.integer)) and not has_aux:
        wrapped._mutagrad_grad_of = (fun, int(argnums))  # (jvp of it, a Hessian-vector product: _hvp_filled)
    return wrapped


def _no_full_collections(fn):
    """Run ``fn`` with the cyclic garbage collector's full collections held off. A tape holds many
    small objects that live until the reverse pass; each full collection walks all of them again
    (element loops became superlinear; allowing one every 100 collections of generation 1 still
    cost a quarter more at 10^5 steps). The young generations are still collected, at the
    thresholds the program set: cyclic garbage the function makes and drops soon (objects that
    refer to themselves, made in a loop) is freed as in a plain call (with the collector off
    altogether it piled up: 200 MB for a plain call's 7); cyclic garbage that lived long enough
    to reach the oldest generation waits for the call's end. The collector stays on or off as
    the program sets it (gc.disable() inside the function holds after it, as in a plain call)."""

    @functools.wraps(fn)
    def run(*args, **kwargs):
        _hold_full_collections(1)
        in_api(1)  # (an error made in this thread before the function runs is no worker's)
        try:
            return fn(*args, **kwargs)
        finally:
            in_api(-1)
            _hold_full_collections(-1)

    return run


_GC_HOLD = [0, None]  # (running calls, in every thread; the thresholds before the first)
_GC_LOCK = threading.Lock()
_NO_FULL = 1 << 30  # (generation 2's threshold while calls run: never reached)


def _release_in_child():
    """A process forked while calls ran (a multiprocessing pool started in a differentiated function):
    none runs in the child, whose collector gets the thresholds back."""
    if _GC_HOLD[0]:
        _GC_HOLD[0] = 0
        now = gc.get_threshold()
        if now[2] == _NO_FULL:
            gc.set_threshold(now[0], now[1], _GC_HOLD[1][2])


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_release_in_child)


def _hold_full_collections(step):
    with _GC_LOCK:
        if step > 0:
            if _GC_HOLD[0] == 0:
                t = gc.get_threshold()
                _GC_HOLD[1] = t
                gc.set_threshold(t[0], t[1], _NO_FULL)
            _GC_HOLD[0] += 1
        else:
            _GC_HOLD[0] -= 1
            if _GC_HOLD[0] == 0:
                t = _GC_HOLD[1]
                now = gc.get_threshold()
                if now[2] == _NO_FULL:  # (unless the function set thresholds of its own, kept as a plain call keeps them)
                    gc.set_threshold(now[0], now[1], t[2])


_BISECTION_STEPS = 8  # comparisons for order below which an output without derivative is no bisection's point


def _warn_cached(level, out, name, fun=None):
    """Warn where the output of a differentiated function carries no derivative of its arguments
    and the function compared a differentiated value for equality (``level.equality_at``): the
    pattern of a cache keyed on the arguments (``if np.array_equal(x, last_x): return last_y``, as
    scipy.optimize's MemoizeJac), whose value from an earlier plain call has no derivative, so
    the derivative would come out zero without a word (the hmc and seismic testers); or compared one for
    order (``level.order_at``), 8 times or more, and the output is not all zeros: a point a bisection on plain
    brackets chose (the neuralode tester; a few comparisons pick a step, an elastic return mapping's stress).
    Where the output carries a derivative: if a differentiated array compared equal to a plain array of its
    values (``level.cache_key_at``), a cached term beside another (warnnoise2)."""
    where = level.equality_at or level.value_at
    if where is None and level.order_at is None:
        return
    leaves = tree_flatten(out)[0]
    for leaf in leaves:
        if isinstance(leaf, Tracer) and (leaf._level is not level or _carries_derivative(leaf)):
            if level.searches is not None and not getattr(fun, "_mutagrad_derivative", False):
                _warn_search(level, name)
            if level.cache_key_at is not None:  # (a cached term beside another: the warnnoise2 tester)
                warn_at(user_frame(sys._getframe(1)), (
                    f"{name}: the function compared a differentiated value equal to a plain one kept at "
                    f"{line_text(level.cache_key_at)}: if that returns a value kept from an earlier call (a cache "
                    "keyed on the argument, as scipy.optimize's MemoizeJac), the kept value is a plain number "
                    "without derivative, and its part of the derivative is zero. Compute it inside the "
                    "differentiation (skip or clear the cache there)."), every=True)
            return
    if where is None:  # (the neuralode tester's bisection for an event time: 0 where it is -0.70)
        if level.nested_run:
            return  # (mg.grad(f)'s output, the partials of a piecewise-linear f that comparisons chose: jvp of
            # grad, a Hessian-vector product, is 0 there, as hessian's is, not a bisection's point: peersuite;
            # so is a function that calls mg.grad, lambda x: mg.grad(f)(x, W): regress136; a differentiation
            # ran inside this one's level either way)
        floats = [b for b in map(bottom, leaves) if isinstance(b, (float, complex, np.ndarray, np.generic))
                  and np.result_type(b).kind in "fc"]
        if not any(np.any(np.asarray(b) != 0) for b in floats):
            return  # (a mask, a count: booleans or integers; an inactive hinge or penalty, `g if g > 0 else 0.0`,
            # is 0: their zero derivative is evident, where a point a bisection chose is not 0)
        if level.orders < _BISECTION_STEPS:
            return  # (a few comparisons pick among a few plain values, a step: `if f > 0:` of a return mapping at
            # an elastic point, whose stress is plain; a bisection halves its brackets many times: plasticity)
        warn_at(user_frame(sys._getframe(1)), (
            f"{name}: the function's output carries no derivative of the differentiated arguments, so its "
            f"derivative is zero, and the function compared a differentiated value for order at "
            f"{line_text(level.order_at)}: if the output is a point that comparisons chose from plain values (a "
            "bisection's brackets, a grid search), its derivative is theirs (zero), not the point's: end a "
            "bisection with a Newton step on the traced values, s = s - g(s) / g'(s), or iterate on traced "
            "values (docs/errors.md); if the output is piecewise constant (a count, a step), the zero is right."),
            every=True)
        return
    how = ("compared a differentiated value for equality" if level.equality_at is not None else
           "took the plain value of a differentiated one (mg.value, a cache's key)")
    warn_at(user_frame(sys._getframe(1)), (
        f"{name}: the function's output carries no derivative of the differentiated arguments, so its "
        f"derivative is zero, and the function {how} at "
        f"{line_text(where)}: if that returns a value kept from an earlier call when the arguments compare equal "
        "(a cache, as scipy.optimize's MemoizeJac), the kept value is a plain number without derivative and "
        "the zero is wrong. Compute the output inside the differentiation (skip or clear the cache there); "
        "if the output does not depend on the arguments, the zero is right."), every=True)


_SEARCH_BAND = 10  # comparisons of a descent between a tenth of its largest gap and rounding (a Newton's: 3)
_SEARCH_MIN = 16  # comparisons at one instruction below which it is no search (a bisection makes 17 and more)


def _converged_search(seq):
    """Whether the comparisons ``seq`` (core.note_search's pairs (x - c, c) at one instruction, in order, of
    numbers) hold a bisection's: after a comparison far from the tie (a gap |x - c| of a tenth of the largest
    so far, or more), 10 or more (_SEARCH_BAND) with gaps between a tenth of it and its rounding (10 ** -12 of
    it), then one within a hundred-thousandth of it (and of c, if c is not 0), and those either on both sides
    of the tie (3 or more changes of sign) or, on one side (a root at a bracket's end, or at a midpoint), each
    half the one before (to 2 %, and not exactly: c *= 0.5, an explicit Euler decay at k * dt = 0.5 under a
    positivity test, halves exactly, and so does a bisection of a linear function at a binary fraction, whose
    point cannot be told from it: regress134), 7 in a row, the last within 0.1 % (a nonlinear function's
    bisection converges to halving; a decay at 0.495 stays there: regress137); on both sides, not at one
    ratio other than a half (an overshooting controller's error shrinks by its own 0.45, alternating: a
    bisection's ratios vary, or are a half each, its root at 1/3 of the bracket); and none above 8 times the largest halved at each comparison
    since (a bisection's gap is its slope times the distance to the root, at most half the bracket, which
    halves). Halving a bracket converges so in 17 halvings or more (a test of a product g(lo) * g(mid) too, at
    a quarter a step), whatever the function's slope. A Newton or secant iteration's gaps fall through that
    band in a few comparisons, a tolerance test's (err > tol) stay near tol, a field decaying along an element
    loop or a regula falsi keeps its sign, at a rate of its own, and a smooth field's values along an element
    loop (a limiter's a * b <= 0 near its extrema) come back from their zeros.
    :func:`_converged_searches` is the same test, element by element, of arrays."""
    big = 0.0  # the largest gap of the current descent
    band = changes = halves = 0
    last = None  # the last gap in the band, signed
    ratio, low, high = 0.0, np.inf, 0.0  # the last ratio of a gap to the one before, the least, the largest
    bound = 0.0  # the halving bound of the descent: no gap of a bisection's comes back above it
    for d, c in seq:
        g = abs(d)
        if g >= 0.1 * big:
            big = max(big, g)
            band = changes = halves = 0
            last = None
            ratio, low, high = 0.0, np.inf, 0.0
            bound = 8.0 * big
            continue
        bound *= 0.5
        if g > bound:  # (a smooth field along an element loop comes back from its zeros: advect's minmod)
            band = -(1 << 62)
        if g > 1e-12 * big:
            band += 1
            if last is not None and last != 0:
                if (d > 0) != (last > 0):
                    changes += 1
                ratio = g / abs(last)
                low, high = min(low, ratio), max(high, ratio)
                halves = halves + 1 if 0.49 <= ratio <= 0.51 and ratio != 0.5 else 0
            last = d
        if (g <= 1e-5 * big and (c == 0 or g <= 1e-5 * abs(c)) and band >= _SEARCH_BAND
                and (changes >= 3 and not (high <= 1.1 * low and not 0.49 <= low <= high <= 0.51)
                     or halves >= 7 and abs(ratio - 0.5) <= 1e-3)):
            return True
    return False


def _converged_searches(seq):
    """:func:`_converged_search` of arrays ``seq`` (pairs (x - c, c) of one shape), element by element: whether
    any element's comparisons converged as a bisection's do (``np.where(f(mid) > 0, mid, lo)``, one root per
    element)."""
    shape = np.shape(seq[0][0])
    big = np.zeros(shape)
    band, changes, halves = (np.zeros(shape, np.int64) for _ in range(3))
    last = np.full(shape, np.nan)
    ratio, low, high = np.zeros(shape), np.full(shape, np.inf), np.zeros(shape)
    bound = np.zeros(shape)
    for d, c in seq:
        g = np.abs(d)
        reset = g >= 0.1 * big
        big = np.where(reset, np.maximum(big, g), big)
        band, changes, halves = (np.where(reset, 0, v) for v in (band, changes, halves))
        last = np.where(reset, np.nan, last)
        ratio, low, high = np.where(reset, 0.0, ratio), np.where(reset, np.inf, low), np.where(reset, 0.0, high)
        bound = np.where(reset, 8.0 * big, 0.5 * bound)
        band = np.where(~reset & (g > bound), -(1 << 62), band)
        inband = ~reset & (g > 1e-12 * big)
        seen = inband & ~np.isnan(last) & (last != 0)
        changes = changes + (seen & ((d > 0) != (last > 0)))
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = np.where(seen, g / np.abs(last), ratio)
        low, high = np.where(seen, np.minimum(low, ratio), low), np.where(seen, np.maximum(high, ratio), high)
        half = (ratio >= 0.49) & (ratio <= 0.51) & (ratio != 0.5)
        halves = np.where(seen, np.where(half, halves + 1, 0), halves)
        band = band + inband
        last = np.where(inband, d, last)
        regular = (high <= 1.1 * low) & ~((low >= 0.49) & (high <= 0.51))
        if np.any(~reset & (g <= 1e-5 * big) & ((c == 0) | (g <= 1e-5 * abs(c))) & (band >= _SEARCH_BAND)
                  & ((changes >= 3) & ~regular | (halves >= 7) & (np.abs(ratio - 0.5) <= 1e-3))):
            return True
    return False


def _warn_search(level, name):
    """Warn where the function's comparisons of a differentiated number with a constant at one instruction
    converged as a bisection's do (:func:`_converged_search`), though its output carries a derivative: a point
    bisected on plain brackets is a plain number, and a value computed from it, an event time t + theta * h,
    gets the derivative of the rest alone, silently (the adaptode tester: 2 where it is 0). Searches in
    mutagrad's own code are not the user's."""
    for seq in level.searches.values():
        place = seq[0]
        if len(seq) - 1 < _SEARCH_MIN or place[0].co_filename.startswith(_MUTAGRAD_DIR) or not (
                _converged_search(seq[1:]) if type(seq[1][0]) is float else _converged_searches(seq[1:])):
            continue
        warn_at(user_frame(sys._getframe(2)), (
            f"{name}: the function compared a differentiated number with a constant {len(seq) - 1} times at "
            f"{line_text(place)}, and the comparisons converged on where the two are equal, as a bisection's do: "
            "the point such a search finds is a plain number to mutagrad (its brackets, "
            "halved by comparisons, are), so where the output depends on it (an event time t + theta * h with theta "
            "bisected), its derivative misses the point's motion. Run the search on mg.stop_gradient values and "
            "end it with a Newton step on the traced values, s = s - g(s) / g'(s), which gives the point's "
            "derivative (docs/errors.md); if the output does not depend on that point, or a Newton step on the "
            "traced values already ends the search, the derivative is right."), every=True)
        return


def _one_at_a_time(fn):
    """``fn`` (a vjp pullback, which runs its tape's reverse pass in the tape's own buffers) called by one thread
    at a time: calls from several threads take turns (they gave wrong cotangents, or raised from inside mutagrad:
    the regress122 tester's Jacobian rows in a thread pool)."""
    lock = threading.RLock()

    @functools.wraps(fn)
    def serialized(*args, **kwargs):
        with lock:
            return fn(*args, **kwargs)

    return serialized


@_no_full_collections
def vjp(fun: Callable, *primals, has_aux: bool = False, _argnums=None, _kwargs=None, _name="vjp"):
    """Run ``fun(*primals)`` and return ``(out, pullback)``.

    ``pullback(ct)`` returns a tuple with one cotangent per primal. It can be
    called several times; arrays ``fun`` wrote into keep the values of a
    plain call in between. If the caller changes, before calling it, values
    the pullback reads (in an argument, an output, ``aux`` or an
    ``mg.value`` view), it raises ``MutationError``. The tape lives as long
    as the pullback. A cotangent that is None or ``mg.ZeroTangent()`` is a
    symbolic zero; one of all zeros for an output with no derivative
    (``np.nextafter``'s) contributes nothing either.

    >>> import numpy as np, mutagrad as mg
    >>> out, pb = mg.vjp(lambda x: x * 3.0, np.array([1.0, 2.0]))
    >>> pb(np.array([1.0, 10.0]))
    (array([ 3., 30.]),)
    """
    _check_callable(fun, "vjp")
    _check_has_aux(has_aux, "vjp")
    # (_argnums, internal: differentiate only these; the other float arrays are traced constants;
    # _kwargs, internal: keyword arguments, their float arrays traced constants, as under grad)
    nums = tuple(range(len(primals))) if _argnums is None else tuple(_argnums)
    kwargs = dict(_kwargs) if _kwargs else None
    kept = _values_now(primals)  # (for the NaN fill: the caller may change the arrays before the pullback)
    level = ReverseLevel()
    with level:
        outer = level.outer_levels()
        # (every: the user's vjp, which takes no argnums; jacobian's and hessian's runs take them)
        targs, infos = _wrap_args(level, primals, nums, fun, kwargs, every=_argnums is None)
        with user_fp_state():  # (NumPy's warnings at the user's lines)
            out, aux = _split_aux(_call(level, fun, targs, kwargs), has_aux)
    _check_plain_aliases(level)
    _warn_cached(level, out, _name, fun)
    out_leaves, out_tree = tree_flatten(out)
    _check_outputs(out_leaves, _name, out)
    out_vals = _unwrap_level(out, level)
    storages = _storages_of(level, infos)
    # what the caller can still write into: the arguments, the outputs, aux and mg.value views
    # (an intermediate is reachable only through a tracer, which raises once vjp has returned)
    reach = {id(info.storage) for _, linfo in infos.values() for info in linfo}
    for leaf in out_leaves + (tree_flatten(aux)[0] if has_aux else []):
        if isinstance(leaf, Tracer) and leaf._level is level:
            reach.add(id(leaf._storage))
    guarded = [s for s in storages if (s.captured or s.was_captured or s.span is not None) and (
        id(s) in reach or s.exported)]
    prints = [_fingerprint(s) for s in guarded]

    alias_checked = []  # (the first pullback of a scalar output warns of arguments read by another name)

    @_one_at_a_time
    @_no_full_collections
    def pullback(ct):
        _check_read_only_constants(level, "after vjp returned, before the pullback was called")
        for s, fp in list(getattr(level, "leftover_prints", {}).values()):
            if _fingerprint(s) != fp:
                raise MutationError(
                    f"an intermediate that the function passed to mg.vjp read, and left behind (in a list, a "
                    f"global or an object), was modified after vjp returned (through a view of it, say), before "
                    f"the pullback was called at {user_line()}. The pullback needs the values the function saw: "
                    "write into a copy (a.copy()) instead, or call the pullback first.")
        for s, fp in zip(guarded, prints):
            now = _fingerprint(s)
            if now is not None and now != fp:
                raise MutationError(
                    f"an array that the function passed to mg.vjp read ({s.name or 'an intermediate or output'}) "
                    f"was modified after vjp returned, before the pullback was called at {user_line()}. "
                    "The pullback needs the values the function saw: " + (
                        "pass mg.vjp a copy of the argument (mg.vjp(f, x.copy())), modify a copy of it, or call "
                        "the pullback first." if (s.name or "").startswith("argument") else
                        "copy the outputs (out.copy()) before modifying them, or call the pullback first.")
                )
        ct_leaves = tree_flatten_like(out_tree, ct, "the cotangent passed to the pullback")
        for c in ct_leaves:
            if isinstance(c, Tracer) and not c._level.closed and not any(c._level is o for o in outer):
                raise NoRuleError(
                    f"the pullback of an mg.vjp made outside this differentiation was called with a traced "
                    f"cotangent at {user_line()}: its recorded steps are plain, so its result cannot be "
                    "differentiated. Call mg.vjp inside the differentiated function, so that the "
                    "differentiation traces its steps too.")
        if len(ct_leaves) != len(out_leaves):
            raise ValueError(
                f"the cotangent has {len(ct_leaves)} leaves but the output has {len(out_leaves)}"
            )
        _reset_adjoints(storages)
        seeds = []
        for k, (o, c) in enumerate(zip(out_leaves, ct_leaves)):
            if isinstance(c, AbstractZero) or c is None:
                continue
            kind = _non_numeric(c)
            if kind is not None:
                raise TypeError(f"the pullback's cotangent for output leaf {k} is a {kind}: pass a number or an "
                                "array of numbers of the output's shape")
            if np.shape(c) != np.shape(o):
                raise ValueError(f"cotangent shape {np.shape(c)} does not match output shape {np.shape(o)}"
                                 + (f" (output leaf {k})" if len(out_leaves) > 1 else "")
                                 + f", the pullback called at {user_line()}: pass one of the output's shape")
            if np.iscomplexobj(bottom(c)) and not np.iscomplexobj(bottom(o)):
                raise TypeError("a complex cotangent for a real output: its imaginary part would be dropped. "
                                "Pass np.real(ct), or make the output complex.")
            if isinstance(o, Tracer) and o._level is level:
                dt = bottom(o).dtype  # (a wider cotangent, 1e6 for a float16 output, would round to inf)
                if not isinstance(c, Tracer) and dt.kind in "fc" and not np.can_cast(np.asarray(c).dtype, dt):
                    _tangent_in(c, dt, len(seeds), "the pullback's cotangent", "output")
                seeds.append((o, np.conj(c) if np.iscomplexobj(bottom(c)) else c))

        def seed():
            for o, cc in seeds:
                level.seed(o._storage, o._geom, cc)

        seed()
        own_nan = _seeded_nan(seeds)
        nan = _backward(level, infos, seed, storages, own_nan)
        if (len(seeds) == 1 and np.size(bottom(seeds[0][1])) == 1 and np.all(np.asarray(bottom(seeds[0][1])) != 0)
                and not alias_checked):  # (one scalar output: a gradient's pass, jacobian's or hessian's, as grad's)
            alias_checked.append(True)
            _warn_unread_aliases(level, infos, nums, _name)
        res = _collect(level, infos, nums, False)
        if not STATE.levels and not outer and not own_nan and (nan or _poison_in_gradients(infos, nums)):
            res = _forward_fill(res, fun, primals, kwargs, nums, False, infos, has_aux, out_vals, ct_leaves, targs,
                                unchanged=kept)
        _reset_adjoints(storages)
        return _owned(res)

    # storages refer to their level and the tape to the storages: a reference cycle that
    # the cyclic collector may leave for a long time. Drop the tape when the pullback goes.
    weakref.finalize(pullback, _release_tape, level)
    if has_aux:
        return out_vals, pullback, _unwrap_level(aux, level)
    return out_vals, pullback


_FILL_COPY = 1 << 16  # the most argument elements vjp copies for its pullback's NaN fill


def _values_now(primals):
    """(array, copy) of the arrays among the primals (at most ``_FILL_COPY`` elements in all), for a
    pullback's NaN fill (_forward_fill), which runs the function again on them: the caller may
    have changed them in between (MutationError then). None for larger ones: they are read as
    they are then (docs/index.md)."""
    try:
        leaves = tree_flatten(list(primals))[0]
    except Exception:  # noqa: BLE001 (vjp's own checks name what it cannot take)
        return None
    arrays = [a for a in leaves if type(a) is _ndarray]
    if sum(a.size for a in arrays) > _FILL_COPY:
        return None
    return [(a, a.copy()) for a in arrays]  # (compared bit for bit: -0.0 is a change, a NaN is not)


def _seeded_nan(seeds) -> bool:
    """Whether an output is NaN where its (nonzero) cotangent seeds the reverse pass: ``seeds``,
    (output, cotangent) pairs. A gradient's NaN is then the function's own (a value undefined
    there, ``sin(t) * (r / t)`` at ``r = 0``), as forward mode, JAX and PyTorch say."""
    for o, c in seeds:
        ov = bottom(o)
        if type(ov) is np.float64:  # (a scalar output, grad's: no arrays)
            if math.isnan(ov) and np.asarray(bottom(c)) != 0:
                return True
            continue
        if getattr(ov, "dtype", None) is None or ov.dtype.kind not in "fc":
            continue
        nan = np.isnan(ov)
        if nan.any() and (np.asarray(bottom(c)) != 0)[nan].any():
            return True
    return False


def _backward(level, infos, seed, storages, own_nan=False):
    """The reverse pass; again with NaN strong zeros if a NaN reached a gradient.

    A zero cotangent times a NaN partial (the square of a residual that is NaN
    where np.nansum drops it, np.where over sqrt of a negative) is zero, as
    forward mode and finite differences say, but IEEE's 0 * nan is nan, and NaN
    propagates without a floating-point event. Finding each such product would
    cost a pass per operation; instead a pass whose gradients hold a NaN is run
    again (the tape can be) with every elementwise cotangent taking the strong
    zeros (registry.FP.careful). NaN that the careful pass keeps is the function's. ``own_nan``: the
    output is NaN where the pass is seeded (_seeded_nan): the one pass takes IEEE's products
    (registry.FP.ieee), so that the derivative of the undefined value is NaN along every path to it
    (a strong zero would turn it into 0: sin(t) * (r / t) at t = 0, d/dr); no careful pass.
    Returns whether a gradient holds NaN after the passes (with ``own_nan``: True)."""
    if own_nan:
        FP.ieee += 1
        try:
            level.backward()
        finally:
            FP.ieee -= 1
        return True
    level.backward()
    if not _nan_in_gradients(infos):
        return False
    _reset_adjoints(storages if storages is not None else _storages_of(level, infos))
    st = STATE
    st.off_program += 1  # (the seeding is the careful pass's: not a step of the program, see RunGroup.note)
    FP.careful += 1
    try:
        seed()
        level.backward()
    finally:
        FP.careful -= 1
        st.off_program -= 1
    return _nan_in_gradients(infos)


_NAN_FILL = 64  # the most gradient entries that reverse mode left NaN which forward mode computes again


def _forward_fill(grads, fun, args, kwargs, nums, single, infos, has_aux, value, cts, targs, unchanged=None):
    """``grads`` (what ``_collect`` gave) with the NaN entries the careful pass kept computed
    again by forward mode, which takes the strong zero of each product: ``inf - inf`` in a sum
    of cotangents (sqrt(x - a) at a node where x - a is 0 for every a: the partial inf reaches
    ``a`` twice, with opposite signs) is NaN where the tangent of x - a is 0 and the derivative
    finite. One ``jvp`` per entry, so at most ``_NAN_FILL`` of them, of real arguments (and no
    more than two where those give NaN too: a derivative that is NaN, arctan2's at 0); only
    where the arguments are arrays and numbers the function did not write into (a second run
    starts from the same values), no keyword arguments, and the second run returns the same
    value (not fresh random numbers). ``cts``: the leaves of the output's cotangent (vjp), else
    the output is a scalar (grad); ``targs``: the arguments as the level wrapped them (the
    constant ones too, whose storages tell whether the function wrote into them)."""
    todo = []
    whole = {}  # (n, k) -> entries to compute: a leaf whose derivative reverse mode could not give
    for n in nums:
        for k, info in enumerate(infos[n][1]):
            if info.storage.poison is not None:
                # (a rule's missing derivative reached it: forward mode gives the entries whose
                # direction does not ask for it, a parameter held fixed inside a traced vector;
                # not where the rules said there is none: see NotImplementedTangent.final)
                if np.dtype(info.dtype).kind == "f" and not getattr(info.storage.poison, "final", False):
                    size = int(np.prod(info.shape, dtype=np.int64))
                    whole[(n, k)] = size
                    todo += [(n, k, i) for i in range(size)]
                continue
            a = info.storage.adj
            b = None if a is None or isinstance(a, AbstractZero) else bottom(a)
            if getattr(b, "dtype", None) is None or b.dtype.kind != "f":
                continue
            todo += [(n, k, i) for i in np.flatnonzero(np.isnan(b))]
    # (the arguments run again: float arrays and numbers, as primals, whose writes the storages
    # tell; immutable values of other types, passed through a closure: a flag, a count, None, a name)
    if (not todo or len(todo) > _NAN_FILL or kwargs
            or any(not (_inexact_value(a) or _immutable_value(a)) for a in args)
            or any(isinstance(t, Tracer) and t._storage.written for t in tree_flatten(list(targs))[0])
            or (cts is not None and any(np.iscomplexobj(bottom(c)) for c in cts))):
        return grads
    out_leaves = tree_flatten(value)[0]
    if any(np.iscomplexobj(bottom(o)) for o in out_leaves):
        return grads
    if whole and not all(np.all(np.isfinite(bottom(o))) for o in out_leaves):
        # (a value that is NaN or infinite has no derivative to give in place of the refusal)
        todo = [e for e in todo if (e[0], e[1]) not in whole]
        whole = {}
        if not todo:
            return grads
    if unchanged is not None and not all(a.shape == c.shape and a.tobytes() == c.tobytes() for a, c in unchanged):
        raise MutationError(
            f"an argument passed to mg.vjp was modified after vjp returned, before the pullback was called at "
            f"{user_line()}: this pullback computes NaN entries again by forward mode (docs/errors.md), "
            "running the function again on the arguments, which no longer hold their values at the call. "
            "Pass mg.vjp copies of the arguments (mg.vjp(f, x.copy())), or call the pullback first.")
    # (the generators the function reaches: a run that draws again draws other numbers than the
    # call did, so its entries would be the derivative along other draws; put back after it)
    states = _rerun_states(fun, args, kwargs)
    per = list(grads) if not single else [grads]
    filled = {key: np.zeros(tuple(infos[key[0]][1][key[1]].shape)) for key in whole}
    passed = {j: a for j, a in enumerate(args) if not _inexact_value(a)}

    def call(*primals):
        it = iter(primals)
        return fun(*[passed[j] if j in passed else next(it) for j in range(len(args))])

    # the entries' runs are one RunGroup: the first records its steps, the others are compared with
    # it, operands' values included (a run that draws fresh numbers from a generator the states do
    # not hold computes another function, though its output may agree: sin(x * z) at x = 0), and all
    # run careful (strong zeros: jvp's own second run, _careful_jvp, is not made inside a group)
    # (one group per argument: an argument's runs trace it alone, and take other steps than another's,
    # np.concatenate([theta, [c]]) with a traced c: the customrules tester's argnums=(0, 1))
    groups = {}

    def entry_jvp(n, k, i):
        group = groups.setdefault(n, [None, 0, None])  # (the RunGroup, its runs compared so far, its first entry)
        tree, linfo = infos[n]
        units = [np.zeros(info.shape, info.dtype) for info in linfo]
        units[k].flat[i] = 1.0
        tangents = [None] * len(args)
        tangents[n] = units[0] if tree is None else tree_unflatten(tree, units)
        g = group[0]
        if g is None:
            g = group[0] = RunGroup("a run again")
        first = group[2] is None
        g.start_run(first)
        FP.careful += 1
        try:
            got = jvp(call, [a for j, a in enumerate(args) if j not in passed],
                      [t for j, t in enumerate(tangents) if j not in passed], has_aux, None, g)
            g.finish_run()
        except BaseException:
            if first:
                group[0] = None  # (a first run that failed recorded part of its steps: the next one records)
            raise
        finally:
            FP.careful -= 1
        if first:
            group[2] = (n, k, i)
        else:
            group[1] += 1
        return got

    tried = fixed = 0  # (NaN entries: after two that forward mode gives as NaN too, and none it gave a
    for n, k, i in todo:  # number, the NaNs are the derivative's own, arctan2(0, 0)'s: the rest are left)
        if (n, k) not in whole:
            if tried >= 2 and not fixed:
                continue
            tried += 1
        try:
            got = entry_jvp(n, k, i)
        except MutationError:
            _drew(states)
            return grads  # (a run that took other steps than the first, or with operands of other values)
        except DifferentiationError:
            continue
        if _drew(states):  # (the run drew again: other numbers than the call's; as one call left them)
            return grads
        outs, touts = tree_flatten(got[0])[0], tree_flatten(got[1])[0]
        if len(outs) != len(out_leaves) or not all(
                _same_value(np.asarray(bottom(x)), y) for x, y in zip(out_leaves, outs)):
            return grads  # (another value: not the same function)
        if any(isinstance(t, NotImplementedTangent) for t in touts):
            continue
        if cts is None:
            d = float(np.asarray(touts[0]))
        else:
            d = 0.0
            for c, t in zip(cts, touts):
                if isinstance(c, AbstractZero) or c is None or isinstance(t, AbstractZero):
                    continue
                c, t = np.asarray(c, dtype=float), np.asarray(t, dtype=float)
                with np.errstate(invalid="ignore", over="ignore"):  # (inf * 0 where c = 0: masked; NaN: kept)
                    d += float(np.sum(np.where(c == 0, 0.0, c * t)))  # (strong zeros: c = 0 reads nothing)
        if np.isnan(d):  # (a poisoned leaf with a NaN entry stays poisoned)
            continue
        if (n, k) in whole:  # (replaced once every entry is known)
            filled[(n, k)].flat[i] = d
            whole[(n, k)] -= 1
            continue
        fixed += 1
        j = nums.index(n)
        gl, gtree = tree_flatten(per[j])
        leaf = gl[k]
        if isinstance(leaf, _ndarray):
            leaf = np.array(leaf, copy=True)
            leaf.flat[i] = d
        else:
            leaf = type(leaf)(d)
        gl[k] = leaf
        per[j] = tree_unflatten(gtree, gl)
    for group in list(groups.values()):
        if group[2] is not None and not group[1] and (fixed or not all(whole.values())):
            # (one run only, whose number is used: the first entry's again, compared with it; a run that gave
            # NaN again changes nothing, and needs no second: the econdp tester's pullback ran the function twice)
            try:
                entry_jvp(*group[2])
            except DifferentiationError:  # (other steps; or it failed where the first run did not)
                _drew(states)
                return grads
            if _drew(states):
                return grads
    for (n, k), left in whole.items():
        if left:
            continue  # (an entry forward mode could not give either: the leaf stays poisoned)
        j = nums.index(n)
        gl, gtree = tree_flatten(per[j])
        info = infos[n][1][k]
        gl[k] = _finish_leaf(filled[(n, k)].astype(info.dtype), info)
        per[j] = tree_unflatten(gtree, gl)
    return per[0] if single else tuple(per)


def _inexact_value(a) -> bool:
    """A float or complex array or number (a primal of jvp)."""
    return (type(a) in (float, complex) or isinstance(a, (_ndarray, np.inexact))) and (
        np.issubdtype(np.result_type(a), np.inexact))


def _immutable_value(a) -> bool:
    """A value a second run cannot change (no array: an integer array could be written into)."""
    return a is None or type(a) in (bool, int, str, bytes) or isinstance(a, (np.integer, np.bool_))


def _reset_adjoints(storages):
    for s in storages:
        s.adj = s.adjbuf = None
        s.poison = None
        if s.adjshared is not None:
            s.adjshared = None


def _nan_in_gradients(infos) -> bool:
    for _, linfo in infos.values():
        for info in linfo:
            a = info.storage.adj
            if a is None or isinstance(a, AbstractZero):
                continue
            b = bottom(a)
            if getattr(b, "dtype", None) is not None and b.dtype.kind in "fc" and _has_nan(b):
                return True
    return False


def _poison_in_gradients(infos, nums) -> bool:
    """Whether a rule's missing derivative reached a differentiated real argument of at most
    ``_NAN_FILL`` elements (forward mode may give its gradient: see _forward_fill)."""
    for n in nums:
        for info in infos[n][1]:
            p = info.storage.poison
            if (p is not None and not getattr(p, "final", False) and np.dtype(info.dtype).kind == "f"
                    and int(np.prod(info.shape, dtype=np.int64)) <= _NAN_FILL):
                return True
    return False


def _has_nan(b) -> bool:
    if b.dtype.kind == "f" and b.size:
        return bool(np.isnan(_min_reduce(b, axis=None)))  # (NaN propagates through min: one pass, no boolean array)
    return bool(np.isnan(b).any())


_min_reduce = np.minimum.reduce


def _release_tape(level):
    level.tape = []
    level.snapshots.clear()


def _fingerprint(s):
    r = s.root
    if r is None:  # nothing refers to it any more, so nothing can have changed it
        return None
    b = bottom(r)
    if not isinstance(b, _ndarray):
        return None
    if b.dtype.char in "gG" and _LD_BYTES < _LD_ITEM:  # x87 extended: only 10 of 16 bytes are the number
        data = np.ascontiguousarray(b).view(np.uint8).reshape(-1, _LD_ITEM)[:, :_LD_BYTES].tobytes()
    else:
        data = memoryview(b) if b.flags.c_contiguous else b.tobytes()
    return hashlib.blake2b(data, digest_size=16).digest()


_LD_ITEM = np.dtype(np.longdouble).itemsize
_LD_BYTES = 10 if np.finfo(np.longdouble).nmant == 63 else _LD_ITEM


# --------------------------------------------------------------------------
# Forward mode


def _a_container(p) -> bool:
    """Whether ``p`` is a pytree container (a namedtuple, a dataclass, a registered class), not a leaf."""
    leaves = tree_flatten(p)[0]
    return not (len(leaves) == 1 and leaves[0] is p)


def _constant_by_tangent(p, t) -> bool:
    """Whether jvp may pass primal ``p`` as a constant: a plain float array or number whose tangent
    ``t`` is a symbolic zero or all zeros of its shape; an integer or boolean one (a count, an
    index, a flag) or a non-numeric one (strings, objects, dates) whose tangent is None or a symbolic
    zero (JAX's float0 tangent)."""
    if (t is None or isinstance(t, AbstractZero)) and (_integer_valued(p) or type(p) in (str, bytes) or (
            type(p) is _ndarray and p.dtype.kind in "USOMmV")):
        return True  # (a non-numeric one too, string keys of groups as grad takes them: the groupby tester)
    if t is None and type(p) in (list, tuple) and p and all(_integer_valued(q) for q in tree_flatten(p)[0]):
        return True  # (a list of indices, `mg.jvp(f, (u, [0, 2]), (v, None))`: the ecommerce tester)
    if t is None and (type(p) in (dict, list, tuple) or _a_container(p)):
        # (a container with None for its tangent, a state dict, a namedtuple or dataclass of arrays: every leaf a
        # constant; normflows, regress108)
        return True
    if (t is None or isinstance(t, AbstractZero)) and not isinstance(
            p, (Tracer, _ndarray, np.generic, numbers.Number)):  # (any other object, a random generator, a callback,
        return True  # a model object: passed as it is, as grad passes an argument it does not differentiate: smc)
    if isinstance(p, (float, complex, np.inexact)):
        # (a float number: as grad passes one it does not differentiate, plain; int(f / 100) of a frequency held
        # fixed was refused by jvp, not by grad: the audiosynth tester)
        return t is None or isinstance(t, AbstractZero) or _zero_number(t)
    if type(p) is not _ndarray or p.dtype.kind not in "fc":
        return False
    if t is None or isinstance(t, AbstractZero) or (p.ndim == 0 and _zero_number(t)):
        return True
    return isinstance(t, (_ndarray, np.generic)) and not isinstance(t, Tracer) and t.dtype.kind in "biufc" and (
        np.shape(t) == p.shape and not np.any(t))


def _integer_valued(p) -> bool:
    """An integer or boolean number or array (a count, an index, a flag)."""
    return type(p) in (int, bool) or isinstance(p, (np.integer, np.bool_)) or (
        type(p) is _ndarray and p.dtype.kind in "biu")


def _zero_number(t) -> bool:
    """Whether tangent ``t`` is a plain zero number: a Python or NumPy one, or a 0-d array (of a number primal, or
    given to a 0-d array: either kind, regress91)."""
    if type(t) in (int, float, complex) or (isinstance(t, np.generic) and t.dtype.kind in "biufc"):
        return t == 0
    return type(t) is _ndarray and t.ndim == 0 and t.dtype.kind in "biufc" and t == 0


@_no_full_collections
def jvp(fun: Callable, primals: Sequence, tangents: Sequence, has_aux: bool = False, _argnums=None,
        _run_group=None, _kwargs=None, _name="jvp", _filled=False):
    """Forward mode: return ``(fun(*primals), J @ tangents)``.

    A tangent that is None, ``mg.ZeroTangent()`` or all zeros is a symbolic zero:
    it contributes nothing, even through a derivative that is not implemented or
    infinite there; a float array or number with such a tangent is passed as a constant,
    as ``grad`` passes the arguments it does not differentiate (its values may be
    read as plain numbers), and so is an integer, boolean or non-numeric (string keys) primal
    whose tangent is None (JAX's float0 tangent), or any other object (a random generator, a
    callback), passed as it is, as ``grad`` passes an argument it does not differentiate. With
    ``has_aux=True``, ``fun`` returns ``(output, aux)`` and the result is ``(output, tangent, aux)``,
    as JAX's.

    >>> import numpy as np, mutagrad as mg
    >>> mg.jvp(np.sin, (0.0,), (2.0,))
    (np.float64(0.0), np.float64(2.0))
    """
    grad_of = getattr(fun, "_mutagrad_grad_of", None)
    if (grad_of is not None and not _filled and not has_aux and _argnums is None and _run_group is None
            and _kwargs is None and not FP.careful and not STATE.levels and isinstance(primals, (tuple, list))
            and isinstance(tangents, (tuple, list)) and len(primals) == len(tangents)):
        return _hvp_filled(fun, grad_of, tuple(primals), tuple(tangents), _name)
    _check_callable(fun, "jvp")
    _check_has_aux(has_aux, "jvp")
    for name, v in (("primals", primals), ("tangents", tangents)):
        if not isinstance(v, (tuple, list)):
            raise TypeError(f"jvp: {name} must be a tuple or list with one entry per positional argument of the "
                            f"function, e.g. mg.jvp(f, (x,), (t,)); got {type(v).__name__}")
    primals = tuple(primals)
    tangents = tuple(tangents)
    given = (primals, tangents)
    # (_argnums, internal: the tangents are those of these primals; the others are constants)
    nums = tuple(range(len(primals))) if _argnums is None else tuple(_argnums)
    if len(nums) != len(tangents):
        raise ValueError(f"jvp: {len(nums)} primals but {len(tangents)} tangents")
    if _argnums is None:
        # a float array whose tangent is zero is passed as a constant, as grad passes the
        # arguments it does not differentiate (plain reads of it are allowed): the same numbers
        kept = [(n, t) for n, t in zip(nums, tangents) if not _constant_by_tangent(primals[n], t)]
        if len(kept) < len(nums):
            nums, tangents = tuple(n for n, _ in kept), tuple(t for _, t in kept)
    level = ForwardLevel()
    level.run_group = _run_group  # (internal: one of a forward-mode jacobian's runs, see core.RunGroup)
    if _run_group is None and not FP.careful and not STATE.levels:
        level.saved_args = []  # (the outermost jvp: a careful second run restores what it writes)
    kwargs = dict(_kwargs) if _kwargs else None  # (internal: keyword arguments, as in vjp)
    with level:
        targs, infos = _wrap_args(level, primals, nums, fun, kwargs, every=_argnums is None)  # (as vjp's)
        for i, n in enumerate(nums):
            _, linfo = infos[n]
            tl = tree_flatten_like(infos[n][0], tangents[i], f"jvp: tangent {n}")
            if len(tl) != len(linfo):
                raise ValueError(f"jvp: tangent {n} does not have the structure of primal {n}")
            for info, tv in zip(linfo, tl):
                if tv is None or isinstance(tv, AbstractZero):
                    continue
                if isinstance(tv, Tracer):
                    tv = live(tv, argument=True)  # (a leftover of a finished differentiation: its value, data)
                if np.shape(tv) != info.shape:
                    raise ValueError(f"jvp: tangent shape {np.shape(tv)} does not match primal shape {info.shape} "
                                     f"({info.storage.name}) at {user_line()}: pass a tangent of the primal's shape")
                if isinstance(tv, Tracer):  # a tangent traced by an outer differentiation
                    level.set_tangent(info.storage, tv if tv.dtype == info.dtype else tv.astype(info.dtype))
                    continue
                kind = _non_numeric(tv)
                if kind is not None:
                    raise TypeError(f"jvp: tangent {n} is a {kind}: pass a number or an array of numbers of its "
                                    "primal's shape.")
                if not np.any(tv):  # all zeros: a symbolic zero, as None (a derivative that is not
                    continue  # implemented, or infinite, times a zero tangent contributes nothing)
                if info.dtype.kind == "c":
                    tv = np.asarray(tv)
                elif np.iscomplexobj(tv):
                    raise TypeError(f"jvp: a complex tangent for the real primal {n}: its imaginary part would be "
                                    "dropped. Pass a real tangent, or make the primal complex.")
                level.set_tangent(info.storage, _tangent_in(tv, info.dtype, n))
        held = []  # (the containers among the arguments and their items, as a forward jacobian's runs save them)
        for v in (*primals, *(_kwargs or {}).values()):
            _snapshot_containers(v, held)
        with user_fp_state():  # (strong zeros; the user's modes, see UserFPErrors)
            out, aux = _split_aux(_call(level, fun, targs, kwargs), has_aux)
        # a second run may start alike only where the function changed no container among the arguments, the
        # differentiated ones' (a dict of logits: the seqmodels tester's NaN through a -inf recursion) or the others'
        # (a log list appended to, which a second run appended to again)
        pairs = not _items_kept(held)
        out_leaves, out_tree = tree_flatten(out)
        _check_outputs(out_leaves, _name, out)
        _check_plain_aliases(level)  # (a tangent read after plain code changed the argument unseen)
        if _run_group is None or _run_group.recording:  # (a forward jacobian's first run: once per call)
            _warn_cached(level, out, _name, fun)
        raw = [(level.tangent_of(o) if level.poison_of(o) is None else o._storage.poison)
               if isinstance(o, Tracer) and o._level is level else None for o in out_leaves]
        again = (_run_group is None and not FP.careful and not pairs and _nan_tangent(out_leaves, raw)
                 and not _unsaved_writes(level, targs, kwargs))
    # copies are made outside the level, so that values traced by outer levels stay theirs
    tans = []
    for o, t in zip(out_leaves, raw):
        if isinstance(t, NotImplementedTangent) or isinstance(o, NotImplementedTangent):
            tans.append(t if isinstance(t, NotImplementedTangent) else o)  # (a poisoned output: its tangent too)
            continue
        if t is None or isinstance(t, AbstractZero):
            b = bottom(o)
            if type(b) in (float, complex):  # (a Python number, as a constant primal of jvp returns it: its own
                tans.append(type(b)(0))  # type's zero, a complex one for a complex number: regress91)
                continue
            t = np.zeros(np.shape(b), getattr(b, "dtype", np.float64))
            if (isinstance(o, Tracer) and o._scalar) or (np.ndim(b) == 0 and not isinstance(b, _ndarray)):
                t = t[()]
        else:
            t = np.copy(t) if isinstance(t, Tracer) else np.array(t)
            if type(t) is _ndarray and t.dtype.kind in "fc":
                # the tangent of a NaN output is NaN (its derivative is undefined there), also where a
                # zero partial met an infinite tangent (sin(t) * (r / t) at t = 0 along r: 0 * inf)
                nan = np.isnan(bottom(o))
                if np.any(nan):
                    t[nan & ~np.isnan(t)] = np.nan
            if o._scalar and (type(t) is _ndarray or type(t) is ArrayTracer):
                t = t[()]  # (a traced one too: an outer differentiation's scalar)
        if isinstance(o, Tracer) and o._scalar and weak(o):
            if type(t) is ScalarTracer:
                mark_weak(t)  # traced by an outer differentiation: weak, as a Python float is
            elif isinstance(t, np.generic):
                t = t.item()  # the tangent of a Python float output is a Python float
        tans.append(t)
    tans = _owned(tans)
    if has_aux:
        res = _unwrap_level(out, level), tree_unflatten(out_tree, tans), _unwrap_level(aux, level)
    else:
        res = _unwrap_level(out, level), tree_unflatten(out_tree, tans)
    if again:
        return _careful_jvp(res, fun, given, has_aux, _argnums, _kwargs, level.saved_args)
    return res


def _reruns_agree(run, states) -> bool:
    """Whether two runs of the function again, ``run(group)`` (a jvp of it, a RunGroup's run), take
    the same steps on operands of the same values (a NaN fill's, a careful second run's): the first
    run's derivative entries may be given by a run again only if it computes the same function. A
    run that draws fresh random numbers from a generator the states do not hold (one created
    unseeded inside, one behind a weak reference, one the alias search did not reach) computes with
    others, though its output may have the same value (sin(x * z) at x = 0): the entries would be
    the derivative along other draws. ``states``: the generators reached (_rerun_states); one that
    moved is put back, and the runs do not agree."""
    group = RunGroup("a run again")
    for first in (True, False):
        group.start_run(first)
        try:
            run(group)
            group.finish_run()
        except (MutationError, DifferentiationError):  # (other steps; or this run failed where the first did not)
            _drew(states)
            return False
        if _drew(states):
            return False
    return True


def _items_kept(saved) -> bool:
    """Whether the containers ``_snapshot_containers`` saved still hold the same items (the same objects, under the
    same keys): none was rebound, added or removed since."""
    for obj, before in saved:
        now = _items(obj)[1]
        if len(now) != len(before):
            return False
        if type(before) is list:
            if any(v is not b for (_, v), b in zip(now, before)):
                return False
        elif any(before.get(k, _ABSENT) is not v for k, v in now):
            return False
    return True


def _unsaved_writes(level, targs, kwargs) -> bool:
    """Whether the function wrote into one of its (wrapped) array arguments without its contents
    saved before (ForwardLevel.saved_args), so that a second run cannot start from them."""
    saved = {id(a) for a, _ in level.saved_args or ()}
    for a in tree_flatten((targs, kwargs or {}))[0]:
        if isinstance(a, Tracer) and a._storage.written and id(a._storage.orig) not in saved:
            return True
    return False


def _nan_tangent(out_leaves, raw) -> bool:
    """Whether an output's tangent holds a NaN where its value does not."""
    for o, t in zip(out_leaves, raw):
        if t is None or isinstance(t, (AbstractZero, NotImplementedTangent)):
            continue
        b = np.asarray(bottom(t))  # (a Python float: a weak output's)
        if b.dtype.kind not in "fc" or not _has_nan(b):
            continue
        v = np.asarray(bottom(o))
        if v.dtype.kind not in "fc" or not (np.isnan(b) & ~np.isnan(v)).any():
            continue
        return True
    return False


def _hvp_filled(fun, grad_of, primals, tangents, name):
    """``jvp(mg.grad(f), primals, tangents)``, a Hessian-vector product, with the entries that came out NaN (of the
    product, and of the gradient beside it, which the jvp computes nested, where forward mode does not fill it)
    computed again in forward over forward (:func:`_forward_over_forward`), one run each from the arguments as given.
    A NaN that is the derivative's own stays."""
    f, n = grad_of
    saved = _snapshot_args(primals, range(len(primals))) + _generator_states(fun, primals, {})
    res = jvp(fun, primals, tangents, _name=name, _filled=True)
    g, t = res
    if not (-len(primals) <= n < len(primals)) or type(t) is not _ndarray or t.dtype.kind != "f":
        return res
    n %= len(primals)
    x = primals[n]
    shape = np.shape(x)
    gb = np.asarray(bottom(g))
    if t.shape != shape or gb.shape != shape or not isinstance(x, (_ndarray, float, np.floating)) or not (
            np.isnan(t).any() or np.isnan(gb).any()):
        return res
    # (the gradient itself, computed inside the jvp, is not filled by forward mode either: its NaN entries too)
    dtype = _inexact(_leaf_dtype(x))
    t, gb = t.copy(), gb.astype(t.dtype, copy=True)
    for i in np.flatnonzero(np.isnan(t) | np.isnan(gb)):
        _restore(saved)
        gi, ti = _forward_over_forward(f, primals, n, _basis(shape, dtype, i), tangents)
        gb.reshape(-1)[i] = np.asarray(bottom(gi), dtype=t.dtype)
        t.reshape(-1)[i] = np.asarray(bottom(ti), dtype=t.dtype)
    if np.ndim(t) == 0 and not isinstance(x, _ndarray):
        return gb[()], t[()]
    return gb, t


def _careful_jvp(first, fun, given, has_aux, argnums, kwargs, saved_args=None):
    """``jvp`` again, with every elementwise tangent taking the strong zeros, after a run whose
    tangent held a NaN that its value does not: a zero partial times a NaN tangent (an element
    of a log-space recursion at -inf, whose logaddexp has partial 0 downstream) is zero, as
    reverse mode's careful pass (api._backward) and finite differences say, but IEEE's
    0 * nan is nan. Forward mode has no tape to run again, so the function runs again (not
    when its first run rebound or added an item of a container among its arguments; the arrays
    it wrote into get their contents back first). A second run that returns other values than the first
    (fresh random numbers) is not the same function: the first run's result stands."""
    states = _rerun_states(fun, given[0], kwargs)
    got = []

    def careful_run(group):
        for a, before in saved_args or ():
            np.copyto(a, before)
        FP.careful += 1
        try:
            got.append(jvp(fun, given[0], given[1], has_aux, argnums, group, kwargs))
        finally:
            FP.careful -= 1

    if not _reruns_agree(careful_run, states):
        return first  # (other draws than the first run's: another function; the generators as one call left them)
    res = got[-1]
    a, b = tree_flatten(first[0])[0], tree_flatten(res[0])[0]
    if len(a) != len(b) or not all(_same_value(np.asarray(bottom(x)), y) for x, y in zip(a, b)):
        return first
    return res


def _snapshot_args(args, nums):
    """Copies of the arrays in ``args[nums]``, and of the items of the lists,
    dicts and dataclass objects holding them, so that repeated calls start
    alike. A traced argument (inside an outer differentiation) is copied and
    later restored by traced operations, so the outer levels see the restoring."""
    saved = []
    for n in nums:
        _snapshot_containers(args[n], saved)
        for leaf in tree_flatten(args[n])[0]:
            b = bottom(leaf)
            if isinstance(b, _ndarray):
                if b.flags.writeable or _locked_by_a_level(b):
                    # (read-only while a differentiation holds it, one in another thread too: writable again
                    # when that ends, and a copy to put back only if a run wrote into it; not put back
                    # read-only, which left it so for good: the threads tester's two jacobian(mode='fwd'))
                    saved.append((leaf, np.copy(leaf)))
                else:  # (read-only as given: a run may make it writable and write into it)
                    saved.append((_ReadOnlyArgument(leaf), None))
    return saved


def _locked_by_a_level(b) -> bool:
    refs = _LOCK_REFS.get(id(b))
    return refs is not None and refs[1] is b


class _ReadOnlyArgument:
    """An argument given read-only, put back before each run as it was (its values, read-only),
    when a run made it writable and wrote into it."""

    __slots__ = ("arg", "copy")

    def __init__(self, arg):
        self.arg, self.copy = arg, np.copy(arg)

    def restore(self):
        b = bottom(self.arg)
        if not b.flags.writeable:
            return  # (no run made it writable: nothing written)
        write(self.arg, Ellipsis, self.copy)
        b.flags.writeable = False


def _snapshot_containers(x, saved):
    got = _items(x)
    if got is None:
        return
    mutable, kids = got
    if mutable:
        saved.append((x, [v for _, v in kids] if type(x) is list else dict(kids)))  # (_set_items puts them back)
    for _, k in kids:
        _snapshot_containers(k, saved)


def _restore(saved):
    for obj, copy in saved:
        if type(obj) is list or isinstance(obj, dict) or _is_object(obj):  # (OrderedDict, defaultdict too)
            _set_items(obj, copy)
        elif type(obj) is _GeneratorState or type(obj) is _ReadOnlyArgument:
            obj.restore()
        else:
            b = bottom(obj)
            if (isinstance(b, _ndarray) and (not isinstance(obj, Tracer) or not obj._storage.written)
                    and b.shape == np.shape(copy) and _same_bits(b, np.asarray(bottom(copy)))):
                continue  # (not written by the run: a write of its own values back would be a write into an
                # outer level's argument, which its plain aliases refuse: the econometrics tester's W = X[:, :2])
            if isinstance(b, _ndarray) and not b.flags.writeable:  # (made read-only by the run before)
                set_writeable(b)
            write(obj, Ellipsis, copy)


def _drew(states) -> bool:
    """Whether any of the generators ``states`` (_generator_states) moved since; if so, all are put
    back where they were."""
    if all(g.unmoved() for g, _ in states):
        return False
    for g, _ in states:
        g.restore()
    return True


def _same_state(a, b) -> bool:
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(_same_state(a[k], b[k]) for k in a)
    if isinstance(a, (tuple, list)):
        return isinstance(b, (tuple, list)) and len(a) == len(b) and all(_same_state(x, y) for x, y in zip(a, b))
    if isinstance(a, _ndarray) or isinstance(b, _ndarray):
        return np.array_equal(a, b)
    return a == b


class _GeneratorState:
    """A random generator's state (np.random.Generator, RandomState, a BitGenerator), put back
    before each run of a forward-mode jacobian, as the arrays are: each run draws what one
    plain call draws (else each column would be the derivative along other draws)."""

    __slots__ = ("gen", "state")

    def __init__(self, gen):
        self.gen = gen
        self.state = self._now()

    def _now(self):
        g = self.gen
        if type(g) is np.random.RandomState:
            return g.get_state()
        if isinstance(g, random.Random):
            return g.getstate()
        if type(g) is np.random.SeedSequence:
            return _spawn_state(g)
        bg = _bit_generator(g)
        # (with its seed sequence's count of children: rng.spawn(n) takes the next n, as draws take numbers)
        return bg.state, _spawn_state(getattr(bg, "seed_seq", None))

    def restore(self):
        g = self.gen
        if type(g) is np.random.RandomState:
            g.set_state(self.state)
        elif isinstance(g, random.Random):
            g.setstate(self.state)
        elif type(g) is np.random.SeedSequence:
            _set_spawn_state(g, self.state)
        else:
            bg = _bit_generator(g)
            bg.state = self.state[0]
            _set_spawn_state(getattr(bg, "seed_seq", None), self.state[1])

    def unmoved(self) -> bool:
        return _same_state(self.state, self._now())


def _bit_generator(gen):
    return gen.bit_generator if type(gen) is np.random.Generator else gen


def _spawn_state(seq):
    """A SeedSequence's pickled state (its count of children spawned among it), or None for another
    kind of seed sequence (SeedlessSeedSequence spawns none)."""
    return seq.__reduce__()[2] if type(seq) is np.random.SeedSequence else None


def _set_spawn_state(seq, state):
    if state is not None and seq.n_children_spawned != state[1]:
        seq.__setstate__(state)


def _generator_of(v):
    """The random generator ``v`` is, or whose bound method it is (draw = rng.standard_normal), or None."""
    if _is_generator(v):
        return v
    if type(v) is _BuiltinMethod or type(v) is _MethodType:
        owner = getattr(v, "__self__", None)
        if _is_generator(owner):
            return owner
    return None


def _is_generator(v) -> bool:
    """A random generator whose state can be taken and put back: NumPy's (Generator, RandomState, a
    BitGenerator) and Python's random.Random (not SystemRandom, which has none)."""
    tv = type(v)
    return tv is np.random.Generator or tv is np.random.RandomState or issubclass(tv, np.random.BitGenerator) or (
        tv is np.random.SeedSequence) or (
        issubclass(tv, random.Random) and not issubclass(tv, random.SystemRandom))


def _generator_states(fun, args, kwargs):
    """The states of the random generators a function may draw from: its arguments' (leaves, and
    what objects among them hold), those the alias search reaches from the function (its names,
    those of the functions it calls, the attributes, items and callbacks of the objects they hold:
    ``self.rng``, ``state["rng"]``, a partial's keyword), and NumPy's legacy global one
    (np.random.normal...), each once. With other threads running, NumPy's global one only where the
    search finds it named (np.random.normal): putting it back rewinds their draws too (the threads
    tester: a hessian of a function that draws nothing made another thread's np.random.random()
    repeat); a run that draws from it unseen draws other numbers, and its runs disagree (MutationError)."""
    found = _generators_reached(fun, args, kwargs)
    if threading.active_count() == 1:
        found = {id(np.random.mtrand._rand): np.random.mtrand._rand, **found}
    return [(_GeneratorState(g), None) for g in found.values()]


def _generators_reached(fun, args, kwargs):
    """id -> the random generators among ``fun``'s arguments and those the alias search reaches."""
    _, budget = _search(fun, len(args), tuple(kwargs or ()), _object_arguments(fun, args, kwargs))
    return budget.generators


def _rerun_states(fun, args, kwargs):
    """What a second run of ``fun`` (a NaN fill, a careful run) may draw from: the generators it
    reaches (put back if it drew), and NumPy's and Python's global ones (watched only: another
    thread may draw from them meanwhile)."""
    mine = [(_GeneratorState(g), None) for g in _generators_reached(fun, args, kwargs).values()
            if g is not np.random.mtrand._rand and g is not random._inst]
    return mine + [(_GlobalState(np.random.get_state), None), (_GlobalState(random.getstate), None)]


class _GlobalState:
    """A process-wide generator's state (NumPy's legacy one, Python's random), watched by _drew."""

    __slots__ = ("get", "state")

    def __init__(self, get):
        self.get, self.state = get, get()

    def unmoved(self) -> bool:
        return _same_state(self.state, self.get())

    def restore(self):
        pass  # (another thread may have drawn from it: left where it is)


def jacobian(fun: Callable, argnums=0, mode: str = "rev", has_aux: bool = False, *,
             _name="jacobian(mode='fwd')") -> Callable:
    """Return a function computing the Jacobian of ``fun`` w.r.t. ``args[argnums]``.

    The result has shape ``out.shape + arg.shape`` (pytrees: the output's
    structure with the argument's structure at each leaf; with a tuple
    ``argnums``, a tuple over them at each leaf, ``J[out][arg]`` as in JAX;
    so ``hessian(f, (0, 1))(x, y)[0][1]`` is d²f/dx dy). ``mode="rev"``
    runs ``fun`` once and pulls back one basis vector per output element;
    ``mode="fwd"`` pushes one basis vector per input element, running
    ``fun`` once per element: the arrays among the arguments are restored
    before each run, so they end as after one plain call, and so are the
    random generators among the arguments, those ``fun`` reaches by name
    (its globals and closures, the functions it calls, the attributes and
    items of the objects they hold), and NumPy's global one (with other threads running, where ``fun``
    names ``np.random``); other state that ``fun``
    mutates elsewhere (globals, closures) is mutated by every run,
    and a run that returns other values than the first (state read after
    such a change, fresh random draws), or takes other steps (other indices
    or operations, though its values agree), raises ``MutationError``. With
    ``has_aux=True``, ``fun`` returns ``(output, aux)`` and the result is
    ``(jacobian, aux)`` (aux of the first run), as JAX's.

    >>> import numpy as np, mutagrad as mg
    >>> mg.jacobian(lambda x: x ** 2, mode="fwd")(np.array([1.0, 3.0]))
    array([[2., 0.],
           [0., 6.]])
    """
    _check_callable(fun, "jacobian")
    _check_has_aux(has_aux, "jacobian")
    if mode not in ("rev", "fwd"):
        raise ValueError(f"mode must be 'rev' or 'fwd', got {mode!r}")
    nums, single = _normalize_argnums(argnums)
    if not nums:  # (as JAX's jacfwd/jacrev/hessian, which fail on it too)
        raise ValueError(f"{'hessian' if _name == 'hessian' else 'jacobian'}: argnums=() names no argument to "
                         "differentiate with respect to; pass an index or a tuple of them")

    @functools.wraps(fun)
    def wrapped(*args, **kwargs):
        _check_argnums(nums, len(args), kwargs)
        for n in nums:
            _check_not_none(args[n], n)
            leaves = tree_flatten(args[n])[0]
            for k, leaf in enumerate(leaves):
                _check_leaf_at(leaf, f"argument {n}", args[n], leaves, k)
        dargs = [args[n] for n in nums]
        # the other positional arguments are passed too (their float arrays traced constants,
        # which can take traced writes, as under grad)
        anums = tuple(n + len(args) if n < 0 else n for n in nums)
        # (keyword arguments: their float arrays traced constants, as under grad)
        if mode == "rev":
            res = _jac_rev(fun, args, anums, dargs, single, kwargs, has_aux,
                           "jacobian" if _name.startswith("jacobian") else _name)
        else:  # (every pass starts from the arguments as given, keyword arguments included; a warning of theirs once)
            with warnings_once():
                res = _jac_fwd(fun, args, anums, dargs, single, tuple(args) + tuple(kwargs.values()), kwargs, has_aux,
                               _name)
        return (_owned(res[0]), res[1]) if has_aux else _owned(res)

    wrapped._mutagrad_derivative = True  # (its output is a derivative: _warn_cached)
    return wrapped


def _replace(args, nums, dargs):
    args = list(args)
    for n, d in zip(nums, dargs):
        args[n] = d
    return args


def _leaf_shape(x):
    return np.shape(bottom(x))


def _leaf_dtype(x):
    b = bottom(x)
    dt = getattr(b, "dtype", None)  # (not `or`: a dtype without fields is falsy)
    return dt if dt is not None else np.dtype(np.complex128 if isinstance(b, complex) else np.result_type(type(b)))


def _non_numeric(v):
    """What ``v``, a tangent or cotangent, is if it is no number, numeric array or traced value (a
    string, an array of strings or objects: NumPy's bare errors, or an array of Nones taken as
    zeros, came out), else None."""
    if isinstance(v, (Tracer, float, int, complex)):  # (bool is an int)
        return None
    dt = getattr(v, "dtype", None)
    if dt is not None and isinstance(v, (_ndarray, np.generic)) and dt.kind in "biufc":
        return None
    return type(v).__name__ + ("" if dt is None else f" of dtype {dt}")


def _tangent_in(tv, dtype, n, what="jvp: tangent", of="primal"):
    """The tangent ``tv`` in its primal's dtype (a wider one is rounded to it, as the primal's
    perturbation would be); a tangent that does not fit (1e6 in float16) raises, not inf. (A
    pullback's cotangent in its output's dtype too: ``what``, ``of``.)"""
    with np.errstate(over="ignore", invalid="ignore"):
        t = np.array(tv, dtype=dtype)
    if t.dtype.kind in "fc" and not np.all(np.isfinite(t)) and np.all(np.isfinite(np.asarray(tv))):
        raise ValueError(f"{what} {n} does not fit in its {of}'s dtype {np.dtype(dtype)} (its largest "
                         f"entry, {np.max(np.abs(np.asarray(tv))):.3g}, overflows it). Scale it down "
                         f"(the derivative is linear in it: multiply the result back), or widen the {of}.")
    return t


def _inexact(dt):
    """``dt`` if floating or complex, else float64 (a derivative's dtype)."""
    return dt if np.dtype(dt).kind in "fc" else np.dtype(np.float64)


def _basis(shape, dtype, k):
    e = np.zeros(int(np.prod(shape, dtype=np.int64)), dtype)
    e[k] = 1
    return e.reshape(shape)


def _stack_jac(rows, out_shape, in_shape):
    """rows: list over output elements of arrays of in_shape -> out_shape + in_shape."""
    if isinstance(rows[0], Tracer) if rows else False:
        arr = np.stack(rows)
    else:
        arr = np.array(rows)
    return np.reshape(arr, tuple(out_shape) + tuple(in_shape))


def _holds_tracer(v) -> bool:
    """Whether an item of an object array holds a traced value, in containers and object arrays too."""
    if isinstance(v, Tracer):
        return True
    t = type(v)
    if t is tuple or t is list:
        return any(_holds_tracer(u) for u in v)
    if t is dict:
        return any(_holds_tracer(u) for u in v.values())
    return t is _ndarray and v.dtype == object and any(_holds_tracer(u) for u in v.flat)


def _check_outputs(leaves, api, out=None):
    """The outputs of vjp, jvp and jacobian (which call them, under its name): numbers and arrays in
    the containers mutagrad looks into (an object it does not know, holding traced values, would get
    zero derivatives silently). ``out``: the output itself, whose leaves' paths name them."""
    def named(k):  # (output['name'], not output leaf 2: apisurface4)
        paths = leaf_paths(out) if out is not None else ()
        return f"output{paths[k]}" if len(paths) == len(leaves) and paths[k] else f"output leaf {k}"

    for k, o in enumerate(leaves):
        if type(o) is _ndarray and o.dtype == object and _holds_tracer(o):
            raise TypeError(
                f"{api}: {named(k)} is an array of dtype object holding traced values (mnp.vectorize with "
                "otypes=[object], np.empty(n, dtype=object) filled with them): an object array carries no "
                "derivative. Return a numeric array of them (mnp.array(list(a)), otypes=[float]).")
        if not isinstance(o, (Tracer, _ndarray, np.generic, float, int, complex, bool, NotImplementedTangent)):
            raise TypeError(
                f"{api}: {named(k)} is a {type(o).__name__}, not a number or an array: its derivative "
                "cannot be given. mutagrad looks into tuples, lists, dicts (OrderedDict and defaultdict too), "
                "namedtuples and dataclasses: return the values in one of those (or register the container "
                "with mutagrad.pytree.register_pytree), or return other values as aux (has_aux=True).")


def _jac_rev(f, args, nums, dargs, single, kwargs, has_aux=False, name="jacobian"):
    # (the arguments' structures at the call: the function may add or remove items of a list or
    # dict it is given, and the pullback's cotangents have the call's structure)
    in_trees = [tree_flatten(d) for d in dargs]
    res = vjp(f, *args, has_aux=has_aux, _argnums=nums, _kwargs=kwargs, _name=name)
    out, pb = res[:2]
    if name == "hessian":
        _check_hessian_output(out)
    out_leaves, out_tree = tree_flatten(out)
    # per output leaf: list over its elements of the pulled-back cotangent tuple
    per_out = []
    for oi, o in enumerate(out_leaves):
        if isinstance(o, NotImplementedTangent):  # (the function's output is itself a poisoned derivative)
            per_out.append((None, o))
            continue
        oshape = _leaf_shape(o)
        odt = _leaf_dtype(o)
        n = int(np.prod(oshape, dtype=np.int64))
        rows = []
        for k in range(n):
            cts = [None if isinstance(x, NotImplementedTangent) else np.zeros(_leaf_shape(x), _leaf_dtype(x))
                   for x in out_leaves]
            cts[oi] = _basis(oshape, odt, k)
            row = pb(tree_unflatten(out_tree, cts))
            if odt.kind == "c":  # a complex output: pull back i e_k as well (see _rev_entries)
                cts[oi] = cts[oi] * 1j
                row = tuple(_rev_entries(r, ri) for r, ri in zip(row, pb(tree_unflatten(out_tree, cts))))
            rows.append(row)
        per_out.append((oshape, rows))
    results = []
    # (each row's cotangents flattened once: again per input leaf, the Jacobian of many leaves was quadratic)
    flat = [None if isinstance(rows, NotImplementedTangent) else [[tree_flatten(c)[0] for c in r] for r in rows]
            for _, rows in per_out]
    for ai, (leaves_in, tree_in) in enumerate(in_trees):
        out_struct = []
        for (oshape, rows), frows in zip(per_out, flat):
            if isinstance(rows, NotImplementedTangent):
                out_struct.append(tree_unflatten(tree_in, [rows] * len(leaves_in)))
                continue
            in_leaves_res = []
            for li, xin in enumerate(leaves_in):
                ishape = _leaf_shape(xin)
                elems = [r[ai][li] for r in frows]
                elems = [np.zeros(ishape) if isinstance(e, AbstractZero) else e for e in elems]
                poison = next((e for e in elems if isinstance(e, NotImplementedTangent)), None)
                if poison is not None:  # (the whole block has no derivative, as grad's result)
                    in_leaves_res.append(poison)
                elif not elems:  # (no output elements: the cotangents' dtype, the argument's)
                    in_leaves_res.append(np.zeros(tuple(oshape) + tuple(ishape), _inexact(_leaf_dtype(xin))))
                else:
                    in_leaves_res.append(_stack_jac(elems, oshape, ishape))
            out_struct.append(tree_unflatten(tree_in, in_leaves_res))
        results.append(out_struct)
    jac = _jac_tree(out_tree, results, single)
    return (jac, res[2]) if has_aux else jac


def _jac_tree(out_tree, blocks, single):
    """The Jacobian's structure from ``blocks[arg][output leaf]``: the output's
    structure with, at each leaf, the argument's (a tuple over ``argnums``
    when it is a tuple), as JAX's jacrev/jacfwd nest it: ``J[out][arg]``."""
    if single:
        return tree_unflatten(out_tree, blocks[0])
    return tree_unflatten(out_tree, [tuple(b[oi] for b in blocks) for oi in range(len(blocks[0]))])


# Complex Jacobians. For a real input x and a complex output f, the Jacobian is df/dx. For a
# complex input z = x + iy and a real output it is the gradient's convention, df/dx - i df/dy.
# For a complex output of a complex input it is f'(z), which exists only where f is
# holomorphic (df/dy = i df/dx); anything else is not one complex matrix, so it raises.
# Reverse mode pulls back e_k and i e_k (a pullback is linear in its cotangent, as JAX's vjp):
# for a real input they give Re df/dx and -Im df/dx; for a complex input, with
# r = pullback(e_k) and s = pullback(i e_k), holomorphic means s = i r.
# Forward mode pushes e_k and, for a complex input, i e_k: tx = df/dx and ty = df/dy.


def _not_holomorphic():
    return TypeError(
        "the Jacobian of a complex output with respect to a complex input exists as a complex "
        "matrix only where the function is holomorphic (df/dy = i df/dx), and this one is not "
        "(e.g. abs, conj, real, or the gradient of a real function, which mg.hessian takes). "
        "Differentiate with respect to the real and imaginary parts: pass z.real and z.imag as "
        "separate real arguments and build z = x + 1j * y inside the function."
    )


def _close(a, b):
    """``a`` equals ``b`` entry by entry within rounding: relative to the entry, and to the largest
    entry of the row (or column) for the rounding of entries that are zero or nearly so (a part
    1e-10 of an entry that is not holomorphic was hidden by a 1e10 times larger entry beside it)."""
    a, b = np.asarray(bottom(a)), np.asarray(bottom(b))  # (values only: inside an outer jacobian, tracers)
    mag = np.maximum(np.abs(a), np.abs(b))
    scale = float(np.max(mag, initial=0.0))
    dt = np.result_type(a, b)
    eps = np.finfo(dt).eps if dt.kind in "fc" else 0.0  # (complex64's rounding is 10^9 float64 ulps)
    return bool(np.all(np.abs(a - b) <= max(1e-9, 200 * eps) * mag + max(1e-14, 50 * eps) * scale + 1e-300))


def _rev_entry(r, s, complex_input):
    if not complex_input:  # r = Re df/dx, s = d Re(i f)/dx = -Im df/dx
        return np.real(r) - 1j * np.real(s)
    if not _close(s, 1j * r):  # (a pullback is linear in its cotangent: s = i r where holomorphic)
        raise _not_holomorphic()
    return r


def _fwd_entry(tx, ty):
    if not np.iscomplexobj(tx) and not np.iscomplexobj(ty):  # a real output
        return tx - 1j * ty
    if not _close(ty, 1j * tx):
        raise _not_holomorphic()
    return tx


def _rev_entries(r, s):
    """Combine the pullbacks of e_k (r) and i e_k (s), leaf by leaf, for one argument."""
    rl, tree = tree_flatten(r)
    sl, _ = tree_flatten(s)
    out = []
    for a, b in zip(rl, sl):
        if isinstance(a, NotImplementedTangent) or isinstance(b, NotImplementedTangent):
            out.append(a if isinstance(a, NotImplementedTangent) else b)
            continue
        out.append(_rev_entry(a, b, np.iscomplexobj(a)))  # (a complex argument gets complex cotangents)
    return tree_unflatten(tree, out)


def _jac_fwd(f, args, nums, dargs, single, allargs, kwargs, has_aux=False, name="jacobian(mode='fwd')"):
    group = RunGroup(name)  # a later run must not read what an earlier one kept (see core.RunGroup)
    try:
        return _jac_fwd_runs(f, args, nums, dargs, single, allargs, kwargs, group, has_aux)
    finally:
        group.running = False


def _refuse_iterators(values, name):
    """An iterator among the arguments of a function run several times (a generator, iter(batches)): the first
    run uses it up, and a later one saw it empty (hessian blamed the output's int 0: the regress122 tester)."""
    for k, v in values:
        if isinstance(v, collections.abc.Iterator):
            raise TypeError(
                f"{name} runs the function once per input element, and its argument {k} is an iterator "
                f"({type(v).__name__}), which the first run uses up: pass a list of its items (list(it)) or a "
                "tuple, which every run reads from the start; or use mg.jacobian(mg.grad(f), mode='rev'), which "
                "runs the function once.")


def _jac_fwd_runs(f, args, nums, dargs, single, allargs, kwargs, group, has_aux=False):
    _refuse_iterators([*enumerate(allargs), *(kwargs or {}).items()],
                      "hessian" if group is not None and "hessian" in getattr(group, "name", "") else
                      "jacobian(mode='fwd')")
    saved = _snapshot_args(allargs, range(len(allargs)))  # every argument array starts each pass alike
    saved += _generator_states(f, allargs, kwargs)  # (and every generator it draws from)
    in_trees = [tree_flatten(d) for d in dargs]
    columns = []  # (ai, li, ishape, list of out tangents per input element)
    first = True
    out_tree = None
    out_leaves = None
    first_out = None  # the first run's values, which every later run must return too
    first_aux = None
    runs = 0
    for ai, (leaves_in, tree_in) in enumerate(in_trees):
        for li, xin in enumerate(leaves_in):
            ishape = _leaf_shape(xin)
            idt = _leaf_dtype(xin)
            cols = []
            for k in range(int(np.prod(ishape, dtype=np.int64))):
                if not first:
                    _restore(saved)
                first = False
                pushed = []
                for direction in ((1.0, 1j) if idt.kind == "c" else (1.0,)):  # a complex input: x and y
                    if pushed:
                        _restore(saved)
                    tans = []
                    for aj, (lj, tj) in enumerate(in_trees):
                        tl = [np.zeros(_leaf_shape(x), _leaf_dtype(x)) for x in lj]
                        if aj == ai:
                            tl[li] = _basis(ishape, idt, k) * direction
                        tans.append(tree_unflatten(tj, tl))
                    res, out_leaves, out_tree, tout = _jac_fwd_run(f, args, tans, has_aux, nums, group, kwargs,
                                                                   runs == 0)
                    if not FP.careful and _nan_tangent(out_leaves, tout):
                        # the run again, with strong zeros (see _careful_jvp), from the same arguments
                        first_out, first_aux = _first_run(first_out, first_aux, res, out_leaves, has_aux, runs, group.name)
                        runs += 1
                        _restore(saved)
                        FP.careful += 1
                        try:
                            res, out_leaves, out_tree, tout = _jac_fwd_run(f, args, tans, has_aux, nums, group,
                                                                           kwargs, False, free=True)
                        finally:
                            FP.careful -= 1
                    first_out, first_aux = _first_run(first_out, first_aux, res, out_leaves, has_aux, runs, group.name)
                    runs += 1
                    pushed.append(tout)
                if len(pushed) == 1:
                    cols.append(pushed[0])
                else:
                    cols.append([tx if isinstance(tx, NotImplementedTangent) else ty
                                 if isinstance(ty, NotImplementedTangent) else _fwd_entry(tx, ty)
                                 for tx, ty in zip(*pushed)])
            columns.append((ai, li, ishape, cols))
    if first:  # no input elements at all: no pass ran (out_tree is None for a single leaf too)
        out, first_aux = _split_aux(f(*args, **kwargs), has_aux)
        out_leaves, out_tree = tree_flatten(out)
    results = []
    for ai, (leaves_in, tree_in) in enumerate(in_trees):
        out_struct = []
        for oi, o in enumerate(out_leaves):
            oshape = _leaf_shape(o)
            in_res = []
            for (aj, li, ishape, cols) in columns:
                if aj != ai:
                    continue
                poison = next((c[oi] for c in cols if isinstance(c[oi], NotImplementedTangent)), None)
                if poison is not None:
                    in_res.append(poison)
                elif cols:
                    mat = np.stack([np.reshape(c[oi], (-1,)) for c in cols], axis=-1)
                    if mat.dtype.kind not in "fc":  # (a boolean or integer output: zeros, as reverse mode's)
                        mat = mat.astype(_inexact(mat.dtype))
                    in_res.append(np.reshape(mat, tuple(oshape) + tuple(ishape)))
                else:  # (no input elements: the tangents' dtype, the output's)
                    in_res.append(np.zeros(tuple(oshape) + tuple(ishape), _inexact(_leaf_dtype(o))))
            out_struct.append(tree_unflatten(tree_in, in_res))
        results.append(out_struct)
    jac = _jac_tree(out_tree, results, single)
    return (jac, first_aux) if has_aux else jac


def _jac_fwd_run(f, args, tans, has_aux, nums, group, kwargs, first, free=False):
    """One run of a forward-mode jacobian: (jvp's result, its output leaves and structure, the
    tangents' leaves). ``free``: a careful second run, whose steps are not compared."""
    group.start_run(first, free)
    res = jvp(f, args, tans, has_aux, _argnums=nums, _run_group=group, _kwargs=kwargs, _name="jacobian")
    group.finish_run()
    out_leaves, out_tree = tree_flatten(res[0])
    return res, out_leaves, out_tree, tree_flatten(res[1])[0]


def _first_run(first_out, first_aux, res, out_leaves, has_aux, runs, name):
    """(the first run's output values, its aux): this run's if it is the first, else the first's,
    which this run must have returned too (_check_same_run)."""
    if first_out is None:
        return ([o if isinstance(o, NotImplementedTangent) else np.array(bottom(o)) for o in out_leaves],
                res[2] if has_aux else None)
    _check_same_run(first_out, out_leaves, runs, name)
    return first_out, first_aux


def _check_same_run(first, leaves, runs, name="jacobian(mode='fwd')"):
    """Forward mode pushes one direction per run of the function: the runs must compute the
    same function. A run that returns other values (beyond rounding) than the first read state
    the function changes outside its arguments, or fresh random numbers; its column would be
    the derivative of another function."""
    if len(leaves) != len(first) or not all(_same_value(a, o) for a, o in zip(first, leaves)):
        raise MutationError(other_values_message(f"run {runs + 1} returned other values than run 1", name))


def _same_value(a, o) -> bool:
    """Whether output leaf ``o`` of a run equals ``a`` of the first run, within rounding
    (NumPy's last bits may depend on an array's alignment)."""
    if isinstance(a, NotImplementedTangent) or isinstance(o, NotImplementedTangent):
        return isinstance(a, NotImplementedTangent) and isinstance(o, NotImplementedTangent)
    b = np.asarray(bottom(o))
    return a.shape == b.shape and a.dtype == b.dtype and _within_rounding(a, b)


def hessian(fun: Callable, argnums=0, has_aux: bool = False) -> Callable:
    """Return a function computing the Hessian of ``fun``. For a function whose output is one real
    number, of real arguments, it is reverse over reverse, ``jacobian(grad(fun), mode="rev")``:
    one run of ``fun``, then one reverse pass per argument element. Otherwise (an array or complex
    output, complex arguments) it is forward over reverse, ``jacobian(jacobian(fun, mode="rev"),
    mode="fwd")``, which runs ``fun`` once per argument element (see the latter's note on repeated
    runs); an output found not to be one real number by the first run is put back with the
    arguments, so such a ``fun`` runs once more, and so is a first run that gives a warning of
    mutagrad's (held back: forward over reverse's watches see its directions, and its warnings are
    given), raises a DifferentiationError or leaves a part without derivative. NaN entries of a real
    scalar function's Hessian are computed again in forward over forward (one run each), as a gradient's
    are in forward mode. For a scalar ``fun`` it has shape ``arg.shape + arg.shape``; for an array output,
    ``out.shape + arg.shape + arg.shape`` (pytrees and tuple ``argnums`` nest as JAX's
    ``jax.hessian``: ``H[out][arg_i][arg_j]``), whose items follow ``jacobian``'s rules (an
    integer item gives zeros, a complex output of real arguments a complex Hessian); an output
    that is None or an integer is refused, as by ``grad``. With ``has_aux=True``, ``fun`` returns
    ``(value, aux)`` and the result is ``(hessian, aux)``.

    >>> import numpy as np, mutagrad as mg
    >>> mg.hessian(lambda x: np.sum(x ** 3))(np.array([1.0, 2.0]))
    array([[ 6.,  0.],
           [ 0., 12.]])
    """
    _check_callable(fun, "hessian")
    _check_has_aux(has_aux, "hessian")
    # (with has_aux, the inner Jacobian gives (jacobian, aux): the pair the outer one's has_aux takes)
    fwd = jacobian(jacobian(fun, argnums, mode="rev", has_aux=has_aux, _name="hessian"), argnums, mode="fwd",
                   has_aux=has_aux, _name="hessian")

    @functools.wraps(fun)
    def one_number(*args, **kwargs):  # (fun, where its output is one real number; else forward over reverse)
        res = fun(*args, **kwargs)
        out = _split_aux(res, True)[0] if has_aux else res
        _check_hessian_output(out)
        leaves = tree_flatten(out)[0]
        if (len(leaves) != 1 or isinstance(leaves[0], NotImplementedTangent) or _leaf_dtype(leaves[0]).kind != "f"
                or int(np.prod(_leaf_shape(leaves[0]), dtype=np.int64)) != 1):
            raise _NotOneNumber
        return res

    rev = jacobian(jacobian(one_number, argnums, mode="rev", has_aux=has_aux, _name="hessian"), argnums, mode="rev",
                   has_aux=has_aux, _name="hessian")
    nums, single = _normalize_argnums(argnums)

    @functools.wraps(fun)
    def wrapped(*args, **kwargs):
        with warnings_once():  # (its runs give a warning of theirs once: errors.ONCE)
            return hessian_of(*args, **kwargs)

    def hessian_of(*args, **kwargs):
        # A real function of real arguments: reverse over reverse, one run of ``fun`` and one reverse
        # pass per argument element, which costs less than a forward run per element (each run pays
        # for the function's operations at two levels, a pass only for its records: 3-6 times less
        # for element loops). Where the output is not one real number, m outputs would take m passes
        # per element: its arguments are put back and forward over reverse runs instead.
        if not nums or not _all_real_leaves(args, nums, kwargs):
            return fwd(*args, **kwargs)
        allargs = tuple(args) + tuple(kwargs.values())
        _refuse_iterators([*enumerate(allargs), *kwargs.items()], "hessian")
        saved = _snapshot_args(allargs, range(len(allargs))) + _generator_states(fun, allargs, kwargs)
        st = STATE
        outer, st.started = st.started, []
        started = st.started
        attempting, warned = getattr(ATTEMPT, "on", False), getattr(ATTEMPT, "warned", False)
        ATTEMPT.on, ATTEMPT.warned = True, False  # (a warning there: forward over reverse instead, see errors.ATTEMPT)
        try:
            res = rev(*args, **kwargs)
            if not ATTEMPT.warned and not any(isinstance(v, NotImplementedTangent) for v in tree_flatten(res)[0]):
                return _nan_entries_filled(fun, args, kwargs, nums, single, has_aux, res, saved)
            _restore(saved)  # (a part without derivative: forward over reverse may have it, a workspace's elements
        except (_NotOneNumber, DifferentiationError):  # that no run reads, say; else its reason)
            _restore(saved)
        finally:
            ATTEMPT.on, ATTEMPT.warned = attempting, warned or ATTEMPT.warned
            st.started = outer
            if outer is not None:
                outer.extend(started)
        # The forward runs must not read what the first run kept (a memoized intermediate: a constant to
        # them, whose derivative would be lost), as a forward run must not read what an earlier one kept
        group = RunGroup("hessian")
        for lv in started:
            lv.run_group = group
        ATTEMPT.on = False
        try:
            res = fwd(*args, **kwargs)
        finally:
            ATTEMPT.on = attempting
            group.running = False
        return _nan_entries_filled(fun, args, kwargs, nums, single, has_aux, res, saved)

    wrapped._mutagrad_derivative = True
    return wrapped


class _NotOneNumber(BaseException):  # (not an Exception: a function's `except Exception:` lets it through)
    """Raised where the function hessian's reverse over reverse differentiates returns other than one real number:
    m outputs would take m reverse passes per element, and hessian runs forward over reverse instead."""


def _forward_over_forward(f, primals, n, e, tangents):
    """``(d f / d primals[n] along e, its derivative along tangents)``, in forward over forward: one run of ``f``.
    A reverse pass multiplies the zero cotangent of a branch np.where does not take by its infinite partial (W / theta
    at theta = 0 beside a small-angle series), 0 * inf = NaN; forward mode pushes the tangents through that branch
    and drops them at the np.where (the robotics3 tester's batched Rodrigues). Second derivatives' NaN entries are
    computed again here (:func:`_nan_entries_filled`, :func:`_hvp_filled`), as a gradient's are by forward mode."""
    along = tuple(e if k == n else None for k in range(len(primals)))
    return jvp(lambda *ps: jvp(f, ps, along)[1], primals, tangents)


def _nan_entries_filled(fun, args, kwargs, nums, single, has_aux, res, saved):
    """The Hessian ``res`` of a real scalar function of one array argument with its NaN entries computed again in
    forward over forward (:func:`_forward_over_forward`): an entry whose transposed one is finite takes that one (a
    Hessian is symmetric where it exists); the others one run each, from the arguments as given. Not inside another
    differentiation (its entries are traced)."""
    H, aux = res if has_aux else (res, None)
    n = nums[0]
    x = args[n] if single else None
    shape = np.shape(x)
    if (STATE.levels or not single or type(H) is not _ndarray or H.dtype.kind != "f" or H.shape != shape + shape
            or not isinstance(x, (_ndarray, float, np.floating)) or not np.isnan(H).any()):
        return res
    size = int(np.prod(shape, dtype=np.int64))
    flat = H.reshape(size, size)
    bad = np.isnan(flat)
    lone = bad & ~bad.T
    flat[lone] = flat.T[lone]
    dtype = _inexact(_leaf_dtype(x))
    n %= len(args)
    bound = functools.partial(fun, **kwargs)
    f = (lambda *a: _split_aux(bound(*a), True)[0]) if has_aux else bound
    for i, j in np.argwhere(np.isnan(flat) & np.triu(np.ones_like(bad))):
        _restore(saved)
        ei = _basis(shape, dtype, i)
        v = _forward_over_forward(f, tuple(args), n, _basis(shape, dtype, j),
                                  tuple(ei if k == n else None for k in range(len(args))))[1]
        flat[i, j] = flat[j, i] = np.asarray(bottom(v), dtype=H.dtype)
    H = flat.reshape(H.shape)  # (H itself where the reshape was a view)
    return (H, aux) if has_aux else H


def _all_real_leaves(args, nums, kwargs) -> bool:
    """Whether the arguments ``hessian`` differentiates are all real numbers or arrays (a complex one takes
    forward over reverse, whose entries are checked for holomorphy as jacobian's)."""
    try:
        _check_argnums(nums, len(args), kwargs)
    except (TypeError, ValueError, IndexError):
        return False  # (the forward path raises the error)
    for n in nums:
        for leaf in tree_flatten(args[n])[0]:
            b = bottom(leaf)
            dt = getattr(b, "dtype", None)
            if dt is None:
                if not isinstance(b, (float, int)) or isinstance(b, bool):
                    return False
            elif not isinstance(b, (_ndarray, np.generic)) or dt.kind != "f":
                return False
    return True
