"""Registering primitives and their rules.

Users and mutagrad's own NumPy rules use the same decorators:

* ``@mg.primitive`` makes a function opaque to tracing;
* ``@mg.rrule(fn)`` registers ``rule(*args, **kw) -> (y, pullback)``;
* ``@mg.frule(fn)`` registers ``rule(primals, tangents, **kw) -> (y, ydot)``.

The helpers below derive both rules from one formula, as JAX's
``defjvp``/``deflinear`` and PyTorch's derivatives table do:

* :func:`defelementwise` from the partial derivatives of an elementwise
  function (holomorphic; cotangents use the conjugate, see docs/complex.md);
* :func:`deflinear` from the function itself and its transpose;
* :func:`defzero` for piecewise-constant functions (derivative zero);
* :func:`defnotimplemented` for functions with no derivative at all, as
  PyTorch's ``not_implemented("why")`` entries.
"""
from __future__ import annotations

import contextlib
import dis
import functools
import inspect
import numbers
import threading
import types
import warnings
import weakref

import numpy as np

from .core import REGISTRY, STATE, ArrayTracer, Primitive, ScalarTracer, Tracer, _flatten_args, bind, bottom, get_primitive
from .tangents import (AbstractZero, NotImplementedTangent, NoTangent, Tangent, Thunk, ZeroTangent, instantiated_zeros,
                       is_zero, no_tangent_for_active, not_implemented, unbroadcast)

__all__ = ["primitive", "rrule", "frule", "defelementwise", "deflinear", "defzero", "defnotimplemented",
           "conj_if_complex"]

ZERO = ZeroTangent()


def _unaliased(out, args, kwargs):
    """``out`` with every array that shares memory with an argument copied: a primitive's rules
    give its derivative, and an output that is an input's memory would be taken for a view of
    it, whose derivative is the input's own (a rule's cotangents were dropped silently). Each
    copy is noted (_ALIAS_COPIES) with the argument it shares memory with: a write into either
    raises (in a plain call, the one array would show it through both)."""
    ins = [a for a in _flatten_args((args, kwargs))[0] if type(a) is np.ndarray]
    if not ins:
        return out

    def fresh(y):
        if type(y) is np.ndarray:
            for a in ins:
                if np.may_share_memory(y, a):
                    c = y.copy()
                    _ALIAS_COPIES[id(c)] = (weakref.ref(c), weakref.ref(a.base if type(a.base) is np.ndarray else a))
                    return c
        return y

    if type(out) is tuple or type(out) is list:
        return type(out)(fresh(y) for y in out)
    return fresh(out)


# id(copy) -> weak references to (the copy of a primitive's output that was its argument's memory, that
# argument's array): read where the primitive returns, which marks both storages (_mark_aliases)
_ALIAS_COPIES: dict = {}


def _mark_aliases(prim, leaves, out):
    """The traced outputs of a primitive call that are copies of its arguments' memory (see
    _unaliased), and the traced arguments they share memory with in a plain call: a write into
    one of them raises (core.Level.check_writable), where plain NumPy would change both."""
    from .core import output_leaves

    outs = output_leaves(out)[0]
    for o in outs:
        if not isinstance(o, Tracer):
            continue
        hit = _ALIAS_COPIES.pop(id(bottom(o)), None)
        if hit is None or hit[0]() is not bottom(o):
            continue
        o._storage.prim_alias = prim.name
        arg = hit[1]()
        for x in leaves:
            if (arg is not None and isinstance(x, Tracer) and type(bottom(x)) is np.ndarray
                    and np.may_share_memory(bottom(x), arg)):
                x._storage.prim_alias = prim.name
    for k in [k for k, (ref, _) in _ALIAS_COPIES.items() if ref() is None]:
        del _ALIAS_COPIES[k]


# NumPy's refusals of a write into a read-only array (an assignment, a ufunc's out=)
_NUMPY_WRITE_REFUSALS = ("assignment destination is read-only", "output array is read-only")


def _primitive_wrote(prim, what):
    from .errors import MutationError, user_line_outside_rules

    return MutationError(
        f"the primitive {prim.name} called at {user_line_outside_rules()} wrote into an array passed to it ({what}): its rules "
        "cannot say how it changed that array, and the function may read it afterwards, so the "
        "derivative would be wrong. Make the workspace inside the primitive (work = np.empty(n)) and "
        "return what the caller needs as an output, or do the write outside the primitive.")


def _check_no_hidden_output(prim, args, kwargs, out):
    """A primitive's body gets plain values (or an outer level's traced ones, at higher order):
    a traced output from plain arguments was computed from a traced value it reached another way
    (a global dict the caller stored it in), whose derivative its rules cannot give."""
    if any(isinstance(a, Tracer) for a in _flatten_args((args, kwargs))[0]):
        return
    from .core import carries_any_derivative, output_leaves

    for v in output_leaves(out)[0]:
        # (a traced constant, which carries no derivative, is none: a gradient the body takes with mg.grad of plain
        # values, inside a reverse pass that transposes a forward rule calling the primitive: regress80)
        if isinstance(v, Tracer) and not v._level.closed and carries_any_derivative(v):
            from .errors import RuleError, user_line_outside_rules

            raise RuleError(
                f"the primitive {prim.name} called at {user_line_outside_rules()} computed its output from a traced value it did not get "
                "as a positional argument (one its body closes over, or reads from a global, a dict entry or an "
                "object): its rules cannot give that value's derivative. Pass the value to the primitive as a "
                "positional argument, and give its cotangent in the pullback.")


def _read_only_arrays(x):
    """``x`` with its writable arrays (in lists and tuples too) as read-only views: a primitive's
    body, run inside a differentiation, must not write into what it was passed."""
    t = type(x)
    if t is np.ndarray:
        if x.flags.writeable:
            x = x.view()
            x.flags.writeable = False
        return x
    if t is list or t is tuple:
        return t(_read_only_arrays(v) for v in x)
    return x


def _writable_arrays(x):
    """``x`` with its read-only arrays (in lists and tuples too) as writable copies."""
    t = type(x)
    if t is np.ndarray:
        return x if x.flags.writeable else np.array(x, copy=True)
    if t is list or t is tuple:
        return t(_writable_arrays(v) for v in x)
    return x


def primitive(fun):
    """Make ``fun`` a primitive: opaque to tracing, differentiated by its rules.

    >>> import numpy as np, mutagrad as mg
    >>> @mg.primitive
    ... def cube(x):
    ...     return x ** 3
    >>> @mg.rrule(cube)
    ... def _(x):
    ...     return cube(x), lambda g: (3 * x ** 2 * g,)
    >>> mg.grad(cube)(2.0)
    12.0
    """
    if not callable(fun):
        raise TypeError(f"mg.primitive takes a function (as a decorator: @mg.primitive), got {type(fun).__name__}")
    def impl(*args, **kwargs):
        if not STATE.levels:
            return fun(*args, **kwargs)
        # inside a differentiation: the arrays passed read-only (a write into one, a workspace
        # say, would be a change its rules cannot describe, to a copy or to a plain array read
        # later as a constant), an output that is an input's memory a copy
        ro_args = _read_only_arrays(args)
        ro_kwargs = {k: _read_only_arrays(v) for k, v in kwargs.items()}
        try:
            out = fun(*ro_args, **ro_kwargs)
        except ValueError as e:
            if not str(e).endswith(_NUMPY_WRITE_REFUSALS):
                if "read-only" not in str(e):
                    raise
                # (compiled code that asks for a writable buffer, a Cython memoryview, whether or not it
                # writes: the call again on the arrays themselves, writable copies of those read-only
                # (a private copy the tape keeps, a strided constant's), whose values must come out unchanged)
                args, kwargs = _writable_arrays(args), {k: _writable_arrays(v) for k, v in kwargs.items()}
                before = [(a, a.copy()) for a in _flatten_args((args, tuple(kwargs.values())))[0]
                          if type(a) is np.ndarray]  # (keyword arguments' arrays too)
                out = fun(*args, **kwargs)
                changed = [(a, old) for a, old in before if not np.array_equal(a, old, equal_nan=a.dtype.kind in "fc")]
                if changed:
                    for a, old in changed:  # (refused: left as they were)
                        a[...] = old
                    raise _primitive_wrote(prim, "its values changed") from None
                return _unaliased(out, args, kwargs)
            raise _primitive_wrote(prim, str(e)) from None
        _check_no_hidden_output(prim, args, kwargs, out)
        return _unaliased(out, ro_args, ro_kwargs)

    functools.update_wrapper(impl, fun)
    prim = Primitive(None, getattr(fun, "__qualname__", getattr(fun, "__name__", "primitive")), impl=impl)
    prim.weak_args = True  # (its body and rules get what a plain call passes: a Python float as one)

    @functools.wraps(fun)
    def wrapper(*args, **kwargs):
        if prim.lists_as_arrays and STATE.levels:
            args = _lists_as_arrays(args)
        ew = prim.elementwise
        if ew is not None and (kwargs or len(args) != len(ew[1])) and STATE.levels:
            args, kwargs = _every_positional(prim, fun, args, kwargs, len(ew[1])), {}
        leaves = _flatten_args(args)[0]
        if kwargs or any(type(a) not in _POSITIONAL_LEAVES for a in args):
            _check_visible_tracers(prim, leaves, args, kwargs)
        # (a user's primitive: its arrays compared after the call; mutagrad's own, SciPy's functions called
        # without overwrite flags, are not (a copy and a comparison of lu_solve's n x n factors at each of a
        # hundred steps cost more than the solves: the cranknicolson tester)
        before = _inputs_before(leaves) if prim.user else ()
        out = bind(prim, args, kwargs)
        if before:
            _check_unchanged(prim, before)
        if _ALIAS_COPIES:
            _mark_aliases(prim, leaves, out)
        return out

    prim.fn = wrapper
    REGISTRY[wrapper] = prim
    wrapper._mutagrad_primitive = prim
    return wrapper


def _lists_as_arrays(args):
    """``args`` with each list or tuple that holds traced values made a traced array (Primitive.lists_as_arrays)."""
    if not any(type(a) is list or type(a) is tuple for a in args):
        return args
    from .numpy import asarray

    return tuple(asarray(a) if (type(a) is list or type(a) is tuple) and any(
        isinstance(v, Tracer) for v in _flatten_args(a)[0]) else a for a in args)


_POSITIONAL_LEAVES = frozenset((ArrayTracer, ScalarTracer, np.ndarray, float, int, complex, bool, list, tuple, str,
                                type(None), np.float64, np.float32, np.complex128, np.int64))


def _check_visible_tracers(prim, leaves, args, kwargs):
    """A primitive's rules see traced values among its positional arguments (arrays, numbers,
    lists and tuples of them). One in a keyword argument, inside a dict, a namedtuple or a
    dataclass, in an object's attributes or in a function's closure would reach its body
    instead, which would then be traced as if it were no primitive: a TypeError naming it."""
    seen = {id(x) for x in leaves if isinstance(x, Tracer)}
    if _hidden_tracer((list(args), dict(kwargs)), seen, set(), 0):
        from .errors import user_line

        raise TypeError(
            f"the primitive {prim.name} at {user_line()} got a traced value in a keyword argument, "
            "inside a dict, namedtuple or dataclass, in an object's attributes or in a function's "
            "closure: its rules take traced values as positional arguments only (arrays and numbers, "
            "or lists and tuples of them), one cotangent each, and its body would be differentiated "
            "instead of its rules. Pass the arrays themselves as positional arguments.")


_OPAQUE = (np.ndarray, np.generic, numbers.Number, str, bytes, type, types.ModuleType, type(None),
           types.BuiltinFunctionType)


def _hidden_tracer(x, seen, visited, depth) -> bool:
    """Whether a traced value that is not one of the positional leaves (ids in ``seen``) is
    reachable from x: through pytrees, object attributes (``__dict__``, ``__slots__``),
    function closures and defaults, ``functools.partial`` and bound methods. Bounded depth,
    each object once."""
    from .pytree import tree_flatten

    if isinstance(x, Tracer):
        return id(x) not in seen and not x._level.closed  # (a leftover is a plain value; see live)
    if isinstance(x, _OPAQUE) or depth > 6 or id(x) in visited:
        return False
    visited.add(id(x))
    leaves = tree_flatten(x)[0]
    if not (len(leaves) == 1 and leaves[0] is x):  # a container: its leaves
        return any(_hidden_tracer(leaf, seen, visited, depth + 1) for leaf in leaves)
    if isinstance(x, types.FunctionType):
        inner = list(x.__defaults__ or ()) + list((x.__kwdefaults__ or {}).values())
        for cell in x.__closure__ or ():
            try:
                inner.append(cell.cell_contents)
            except ValueError:  # a closure variable not assigned yet
                pass
    elif isinstance(x, functools.partial):
        inner = [x.func, *x.args, *x.keywords.values()]
    elif isinstance(x, types.MethodType):
        inner = [x.__self__, x.__func__]
    else:
        inner = list(getattr(x, "__dict__", {}).values()) if isinstance(getattr(x, "__dict__", None), dict) else []
        for cls in type(x).__mro__:
            for name in getattr(cls, "__slots__", ()):
                if isinstance(name, str) and name not in ("__dict__", "__weakref__"):
                    inner.append(getattr(x, name, None))
    return any(_hidden_tracer(v, seen, visited, depth + 1) for v in inner)


def _inputs_before(leaves):
    """(array, copy of its values) for the arrays under the traced positional arguments: a
    primitive that writes into one changes values behind the tape's back, which its rules
    cannot describe (see _check_unchanged)."""
    return [(b, b.copy()) for x in leaves if isinstance(x, Tracer)
            for b in (bottom(x),) if type(b) is np.ndarray and b.flags.writeable]


def _check_unchanged(prim, before):
    for b, old in before:
        if not np.array_equal(b, old, equal_nan=b.dtype.kind in "fc"):
            from .errors import MutationError, user_line

            raise MutationError(
                f"the primitive {prim.name} at {user_line()} wrote into an array passed to it. Its rules "
                "cannot say how it changed that array, so the derivative would be wrong: write into a copy "
                "inside it (x = x.copy()), or do the write outside the primitive.")


def _prim_for(fn) -> Primitive:
    p = getattr(fn, "_mutagrad_primitive", None)
    if p is not None:
        return p
    return get_primitive(fn)


def rrule(fn):
    """Register a reverse rule for ``fn`` (a primitive or a NumPy function).

    The rule takes the primal arguments and returns ``(y, pullback)``;
    ``pullback(ȳ)`` returns one cotangent per positional argument
    (``NoTangent()`` for non-differentiable ones).

    >>> import numpy as np, mutagrad as mg
    >>> @mg.primitive
    ... def logsumexp(x):
    ...     m = np.max(x)
    ...     return m + np.log(np.sum(np.exp(x - m)))
    >>> @mg.rrule(logsumexp)
    ... def _(x):
    ...     y = logsumexp(x)
    ...     return y, lambda dy: (dy * np.exp(x - y),)
    >>> mg.grad(logsumexp)(np.zeros(2))
    array([0.5, 0.5])
    """

    _check_rule_target(fn, "rrule")

    def register(rule):
        p = _prim_for(fn)
        p.rrule = _checked_rrule(rule, p.name)
        p.reads = None  # its pullback may read any argument and the output (see Primitive.reads)
        return rule

    return register


def _check_rule_target(fn, which):
    """A rule can only be registered for what mutagrad dispatches: a primitive, a NumPy
    (or SciPy) callable, a ufunc. A rule for a plain Python function would never be called
    (mutagrad traces through the function's body)."""
    if not callable(fn):
        raise TypeError(f"mg.{which}: expected the function the rule is for, got {type(fn).__name__}")
    if (getattr(fn, "_mutagrad_primitive", None) is not None or fn in REGISTRY or isinstance(fn, np.ufunc)
            or hasattr(fn, "_implementation")
            or (getattr(fn, "__module__", None) or "").split(".")[0] in ("numpy", "scipy", "mutagrad")):
        return
    name = getattr(fn, "__qualname__", repr(fn))
    raise TypeError(
        f"mg.{which}({name}): {name} is a plain Python function, which mutagrad differentiates by tracing "
        f"through its body, so this rule would never be used. Decorate it with @mg.primitive first "
        "(then its body is opaque and the rule gives its derivative).")


def _rule_error(msg):
    from .errors import RuleError, user_line

    return RuleError(f"{msg} (differentiating the call at {user_line()})")


def _is_cotangent(c) -> bool:
    return isinstance(c, (AbstractZero, NotImplementedTangent, Tangent, Thunk))


def _read_only(g):
    """A read-only view of a plain array cotangent (other values as they are)."""
    if type(g) is np.ndarray and g.flags.writeable:
        g = g.view()
        g.flags.writeable = False
    elif isinstance(g, (tuple, list, dict)):
        from .pytree import tree_map

        return tree_map(_read_only, g)
    return g


def _call_itself_failed(e) -> bool:
    """Whether the TypeError ``e`` came from calling a rule with arguments its signature does not take
    (raised where it was called: no frame of the rule's own), not from its body."""
    tb = e.__traceback__
    return tb is not None and tb.tb_next is None


def _checked_rrule(rule, name):
    """A registered reverse rule whose output is checked: ``(y, pullback)``, and
    from the pullback one cotangent per positional argument, of its shape. A user's
    pullback is also checked not to change the arrays its rule was given (mutagrad's own
    rules, tested for it, are not: the copies would cost every call)."""
    own = (getattr(rule, "__module__", None) or "").startswith("mutagrad.")

    @functools.wraps(rule)
    def checked(*args, **kwargs):
        _entry = None if own else tuple(STATE.levels)  # (core._refuse_in_a_rule: the levels running before a user's rule)
        try:
            res = rule(*args, **kwargs)
        except TypeError as e:
            if own or not _call_itself_failed(e):
                raise
            raise _rule_error(
                f"the reverse rule of {name} cannot take the primitive's arguments ({e}): a reverse rule is "
                "def rule(*args, **kwargs) with the primitive's own parameters (every one it is called with), "
                "returning (output, pullback); def rule(primals, tangents) is a forward rule (@mg.frule)") from e
        if not (isinstance(res, tuple) and len(res) == 2 and callable(res[1])):
            raise _rule_error(
                f"the reverse rule of {name} returned {type(res).__name__}; it must return "
                "(output, pullback), pullback a function of the output's cotangent")
        y, pb = res
        if not own and STATE.levels:  # (an output that is an argument's memory: a copy, see _unaliased)
            y = _unaliased(y, args, kwargs)

        def pullback(g):
            _entry = None if own else tuple(STATE.levels)  # (see checked)
            # ȳ read-only (it may be another value's adjoint buffer too), and the arrays the rule
            # was given compared after: pullbacks must not modify their inputs or ȳ
            before = () if own else [(i, a, a.copy()) for i, a in enumerate(args)
                                     if type(a) is np.ndarray and a.flags.writeable]
            try:
                cts = pb(_read_only(g))
            except ValueError as e:
                if "read-only" not in str(e):
                    raise
                raise _rule_error(
                    f"the pullback of {name}'s reverse rule wrote into a read-only array ({e}): the cotangent ȳ a "
                    "pullback receives is read-only, as are the arrays its rule read; compute new arrays "
                    "(g = g * 2, not g *= 2)") from e
            for i, a, old in before:
                if not np.array_equal(a, old, equal_nan=a.dtype.kind in "fc"):
                    a[...] = old
                    raise _rule_error(
                        f"the pullback of {name}'s reverse rule changed its argument {i} (directly, or through a "
                        "function it called that writes into its argument): a pullback must not modify its "
                        "inputs, which are the values the function computed with; work on a copy (x.copy())")
            if not isinstance(cts, (tuple, list)):
                raise _rule_error(
                    f"the pullback of {name}'s reverse rule returned {type(cts).__name__}; it must return a "
                    f"tuple with one cotangent per positional argument ({len(args)})"
                    + (" (did it forget `return`?)" if cts is None else ""))
            if len(cts) != len(args):
                raise _rule_error(
                    f"the pullback of {name}'s reverse rule returned {len(cts)} cotangents for {len(args)} "
                    "positional arguments; return one per argument (mg.NoTangent() for one without a derivative)"
                    + (": one per argument of the call, and this call passed "
                       f"{len(args)} (a parameter left at its default, or passed by keyword, has none)"
                       if len(cts) > len(args) else ""))
            for i, (c, a) in enumerate(zip(cts, args)):
                _check_cotangent(name, c, a, f"argument {i}", own=own)
            return cts

        return y, pullback

    return checked


def _check_cotangent(name, c, a, where, depth=0, own=False):
    """A user's pullback's cotangent ``c`` for the argument ``a`` (``where``): not None, of its shape;
    for a list or tuple argument, a list or tuple of one such cotangent per element."""
    if c is None:
        raise _rule_error(
            f"the pullback of {name}'s reverse rule returned None for {where}: return "
            "mg.ZeroTangent() for a zero derivative, mg.NoTangent() for an argument without one")
    if _is_cotangent(c):
        return
    if isinstance(a, (list, tuple)) and isinstance(c, (list, tuple)) and len(a) == len(c) and depth < 32:
        for j, (cj, aj) in enumerate(zip(c, a)):
            _check_cotangent(name, cj, aj, f"{where}[{j}]", depth + 1, own)
        return
    if not isinstance(a, (np.ndarray, np.generic, float, complex, Tracer)):
        return
    if np.shape(c) != np.shape(a):
        raise _rule_error(
            f"the pullback of {name}'s reverse rule returned a cotangent of shape {np.shape(c)} for "
            f"{where} of shape {np.shape(a)}; a cotangent has its argument's shape (sum a "
            "broadcast dimension away)")
    if own:
        return
    ck, ak = _kind(c), _kind(a)
    if ck == "c" and ak in "fbiu":
        raise _rule_error(
            f"the pullback of {name}'s reverse rule returned a complex cotangent for {where}, which is real: "
            "its imaginary part would be dropped; a real argument's cotangent is real (take np.real if that is "
            "meant)")
    if ck in "biu" and ak in "fc":
        raise _rule_error(
            f"the pullback of {name}'s reverse rule returned a cotangent of integer (or boolean) dtype for "
            f"{where}, a floating-point one: it would be truncated; compute it in floating point")


def _kind(v) -> str:
    """The dtype kind of a value (a Python number's as NumPy takes it)."""
    if isinstance(v, Tracer):
        v = bottom(v)
    dt = getattr(v, "dtype", None)
    if dt is not None:
        return dt.kind
    return {float: "f", complex: "c"}.get(type(v), "O")  # (a Python int, 0 for a zero, is a weak number)


def frule(fn):
    """Register a forward rule for ``fn``: ``rule(primals, tangents) -> (y, ydot)``.

    >>> import numpy as np, mutagrad as mg
    >>> @mg.primitive
    ... def square(x):
    ...     return x * x
    >>> @mg.frule(square)
    ... def _(primals, tangents):
    ...     (x,), (dx,) = primals, tangents
    ...     return square(x), 2 * x * dx
    >>> mg.jvp(square, (3.0,), (1.0,))
    (9.0, 6.0)
    """

    _check_rule_target(fn, "frule")

    def register(rule):
        p = _prim_for(fn)
        p.frule = _checked_frule(rule, p.name)
        return rule

    return register


def _instantiated(t, p):
    """A user's forward rule's tangent ``t`` for primal ``p``: a symbolic zero as read-only zeros of
    ``p``'s shape and dtype where ``p`` is a floating-point or complex array (in lists and tuples
    too), so that the rule's NumPy code (``t[1:]``, ``np.sum(t)``, ``np.concatenate``) works on
    it, as JAX instantiates the zeros a custom_jvp rule gets; ``is_zero`` still tells them."""
    if not isinstance(t, AbstractZero):
        return t
    if type(p) is list or type(p) is tuple:
        return type(p)(_instantiated(t, v) for v in p)
    b = bottom(p) if isinstance(p, Tracer) else p
    if type(b) is np.ndarray and b.dtype.kind in "fc":
        return instantiated_zeros(b.shape, b.dtype)
    return t  # (a number: the symbolic zero's arithmetic is a number's)


def _checked_frule(rule, name):
    """A registered forward rule whose output is checked: ``(y, ydot)``, ydot not None. A user's
    rule gets zeros for the arguments without a tangent (see _instantiated)."""
    own = (getattr(rule, "__module__", None) or "").startswith("mutagrad.")

    @functools.wraps(rule)
    def checked(primals, tangents, **kwargs):
        _entry = None if own else tuple(STATE.levels)  # (see _checked_rrule)
        if own:
            res = rule(primals, tangents, **kwargs)
        else:
            # the tangents read-only (another value's, or the zeros of _instantiated): a rule that
            # updated one in place (t *= 2) changed other values' tangents
            tangents = type(tangents)(_read_only_arrays(_instantiated(t, p)) for t, p in zip(tangents, primals))
            try:
                res = rule(primals, tangents, **kwargs)
            except TypeError as e:
                if not kwargs or "unexpected keyword argument" not in str(e):
                    if _call_itself_failed(e):
                        raise _rule_error(
                            f"the forward rule of {name} cannot be called as rule(primals, tangents) ({e}): a "
                            "forward rule is def rule(primals, tangents, **kwargs), primals and tangents tuples "
                            "of the primitive's positional arguments, returning (output, tangent); a rule "
                            "taking the primitive's own arguments is a reverse rule (@mg.rrule)") from e
                    raise
                raise _rule_error(
                    f"the forward rule of {name} is called with the keyword arguments the primitive was called with "
                    f"({', '.join(kwargs)}), which it does not take ({e}): define it as "
                    "def rule(primals, tangents, **kwargs) (they are not differentiated)") from e
            except ValueError as e:
                if "read-only" not in str(e):
                    raise
                raise _rule_error(
                    f"the forward rule of {name} wrote into a tangent it was given ({e}): the tangents a forward "
                    "rule receives are read-only (another value's tangent, or the zeros standing for an "
                    "argument without one); compute new arrays (t = t * 2, not t *= 2)") from e
            if isinstance(res, tuple) and len(res) == 2 and STATE.levels:
                res = (_unaliased(res[0], primals, kwargs), res[1])  # (see _checked_rrule)
        if not (isinstance(res, tuple) and len(res) == 2):
            raise _rule_error(
                f"the forward rule of {name} returned {type(res).__name__}; it must return (output, tangent)"
                + (" (did it forget `return`?)" if res is None else ""))
        y, ydot = res
        if ydot is None:
            raise _rule_error(
                f"the forward rule of {name} returned None as the tangent: return mg.ZeroTangent() for a "
                "zero derivative")
        if isinstance(ydot, (tuple, list)) and isinstance(y, (np.ndarray, np.generic, float, complex, Tracer)):
            raise _rule_error(
                f"the forward rule of {name} returned a {type(ydot).__name__} of tangents for its one output: "
                "return the output's tangent itself (an array, as the output), not a sequence of it")
        if (not _is_cotangent(ydot) and isinstance(y, (np.ndarray, np.generic, float, complex, Tracer))
                and isinstance(ydot, (np.ndarray, np.generic, float, complex, Tracer))):
            if np.shape(ydot) != np.shape(y):
                raise _rule_error(
                    f"the forward rule of {name} returned a tangent of shape {np.shape(ydot)} for an output of "
                    f"shape {np.shape(y)}; a tangent has its output's shape")
            if np.iscomplexobj(ydot) and not np.iscomplexobj(y):
                raise _rule_error(
                    f"the forward rule of {name} returned a complex tangent for a real output: its imaginary "
                    "part would be dropped; a real output's tangent is real (take np.real if that is meant)")
            if not own and _kind(ydot) in "biu" and _kind(y) in "fc":
                raise _rule_error(
                    f"the forward rule of {name} returned a tangent of integer (or boolean) dtype for a "
                    "floating-point output: it would be truncated; compute it in floating point")
        return res

    return checked


def conj_if_complex(d):
    dt = getattr(d, "dtype", None)
    if dt is not None:
        return np.conj(d) if dt.kind == "c" else d
    if isinstance(d, complex):
        return d.conjugate()
    return d


def _shape(x):
    return np.shape(x)


def _reads_of(d, n):
    """Which of (x_1..x_n, y) the partial ``d(*xs, y)`` reads: the parameters
    its code loads. Anything we cannot see through counts as read."""
    if d is None or not callable(d):
        return frozenset(), False
    code = getattr(d, "__code__", None)
    if code is None or code.co_argcount != n + 1 or code.co_flags & 0x0C:  # *args/**kwargs
        return frozenset(range(n)), True
    params = code.co_varnames[: n + 1]
    used = set(code.co_cellvars)  # captured by an inner function: assume read
    for ins in dis.get_instructions(code):
        if ins.opname.startswith("LOAD_FAST") or ins.opname.startswith("LOAD_DEREF"):
            arg = ins.argval
            used.update(arg if isinstance(arg, tuple) else (arg,))
        elif ins.opname in ("LOAD_NAME", "LOAD_GLOBAL") and ins.argval in ("locals", "vars"):
            return frozenset(range(n)), True
    return frozenset(i for i in range(n) if params[i] in used), params[n] in used


DROP_SIZE = 64  # arrays of at most this many elements are not worth dropping


class _Eager(threading.local):
    def __init__(self):
        # > 0: the program does not read again the operands of the elementwise operations now running (they are
        # overwritten next, np.clip's x with out=x, or are the caller's own temporary, np.clip's intermediate),
        # beside an out= of the operand, which the level sees itself: Primitive.eager's records may drop them
        self.operands_dead = 0


EAGER = _Eager()


@contextlib.contextmanager
def operands_dead(dead=True):
    """While the block runs (where ``dead``), see :class:`_Eager`."""
    if not dead:
        yield
        return
    EAGER.operands_dead += 1
    try:
        yield
    finally:
        EAGER.operands_dead -= 1


class EagerPartial:
    """In a record's operands, in place of an operand: its shape and the partial of the function with
    respect to it, computed when the operation ran (Primitive.eager), which the partial function returns."""

    __slots__ = ("shape", "value")

    def __init__(self, shape, value):
        self.shape = shape
        self.value = value


def drop_unread(xs, needed, plain=None):
    """Replace, in list ``xs``, the arrays no partial reads (positions not in
    ``needed``) by their shape and dtype, so that temporaries die now. Small
    arrays are not worth it, except the operation's plain operands themselves
    (``plain``: its operands), a reference to the caller's array."""
    for i in range(len(xs)):
        x = xs[i]
        t = type(x)
        if (t is np.ndarray or t is ArrayTracer) and (x.size > DROP_SIZE or (plain is not None and x is plain[i])) and (
                i not in needed):  # (ArrayTracer: an outer level's value, nested, with its tangent or record)
            xs[i] = _Meta(x.shape, x.dtype)


# the primitives whose values' last bits depend on their operands' memory layout (NumPy's products:
# strided and contiguous kernels sum in other orders), whose pullbacks hold their operands in ``xs``:
# computed from the operands as they are, their private copies (ReverseLevel.snapshot) for the pullback
LAYOUT_EXACT: set = set()

PIN_BYTES = 1 << 16  # a small argument that views more memory than this is not kept as it is (unpin)


def pins(x) -> bool:
    """Whether array ``x`` views a much larger array, which keeping ``x`` would keep alive."""
    b = x.base
    if b is None:
        return False
    nb = getattr(b, "nbytes", 0)
    return nb > PIN_BYTES and nb > 4 * x.nbytes


def unpin(xs, needed, keep=None, leaves=None):
    """Replace, in list ``xs``, the arrays that view a much larger array: by a copy where a partial
    reads it, else by its shape and dtype. Kept as they are, they would keep the large array alive
    with the tape (a loop adding a 1-element view of each step's temporary, ``acc = acc + u[0:1]``,
    would keep every step's temporary). ``keep``: an array that stays (an in-place operation's
    destination, which holds the result now: the reverse pass puts its old values back in it).
    ``leaves``: the operation's arguments, whose traced views may be kept (:func:`view_kept`)."""
    for i in range(len(xs)):
        x = xs[i]
        if type(x) is np.ndarray and x is not keep and pins(x):
            if i not in needed:
                xs[i] = _Meta(x.shape, x.dtype)
            elif leaves is None or not view_kept(leaves[i], x):
                xs[i] = x.copy()


def view_kept(leaf, x) -> bool:
    """Whether ``x``, the value of ``leaf``, a view of a much larger traced array that a pullback reads
    (:func:`pins`), is kept as it is rather than copied: once the copies of that array's views add up to
    its size (the rows of a history buffer, ``S[t + 1] = S[t] * growth``, read one per step), keeping the
    array alive costs no more memory than copying on, and no time. Kept as a whole operand is: the array
    is ``captured``, so every later write into it saves what it overwrites and the reverse pass puts it
    back before this pullback reads it. Else False, the copy counted."""
    if type(leaf) is not ArrayTracer or leaf._value is not x:
        return False
    st = leaf._storage
    total = st.copied + x.nbytes
    if total >= st.nbytes():
        return st.captured or st.span is not None
    st.copied = total
    return False


def ew_cotangent(g, d, xs, y, i, inplace=False):
    """``ȳ · conj(∂y/∂x_i)`` of an elementwise function, summed to x_i's shape.

    ``d`` is the partial (a function of ``(*xs, y)``, ``1``, ``-1`` or None).
    ``inplace``: ``g`` is a dead adjoint buffer nobody else holds, so the
    product may overwrite it (the same bits as ``g * d``, without a new array;
    not for one element, where NumPy's ``out=`` costs three times a new array).
    """
    if d is None:
        return NoTangent()
    try:
        shape = xs[i].shape
    except AttributeError:  # a Python number
        shape = ()
    if type(d) is int:
        if d == 1:
            ct = g
        elif inplace and type(g) is _ndarray and g.shape == shape and g.size != 1:
            return _negative(g, out=g)
        else:
            ct = -g
    else:
        fp = FP.flag
        dv = _partial(d, xs, y)
        if type(dv) is NotImplementedTangent:  # (a missing derivative: it reaches the input as it is)
            return dv
        if FP.flag is not fp or FP.careful or _silently_nonfinite(dv):  # the partial may be inf
            return _careful_product(g, d, dv, xs, y, shape, conj=True)
        if type(dv) is float:  # (a constant factor: no dtype, not complex)
            dt = None
        else:
            dt = getattr(dv, "dtype", None)
            if dt is not None:
                if dt.kind == "c":
                    dv = _conj(dv)
            elif type(dv) is complex:
                dv = dv.conjugate()
        if type(dv) is float and dv == 1.0 and (type(g) is _ndarray or type(g) is _float64) and g.dtype.kind == "f":
            ct = g  # g * 1.0 is g, bit for bit, for a real g (D * u'' with D = 1.0): no pass
        elif (inplace and type(g) is _ndarray and g.shape == shape and g.size != 1
                and (dt is None or dt == g.dtype or _result_type(g, dv) == g.dtype)
                and (dt is None or dv.shape == () or dv.shape == shape)):
            ct = _multiply(g, dv, out=g)
            if FP.flag is not fp and not FP.ieee:  # 0 * inf in a product computed in place: g is gone, dv tells
                ct[_isnan(ct) & (_isinf(dv) | (dv == 0))] = 0
            return ct
        else:
            ct = g * dv
            if FP.flag is not fp:  # an invalid product: 0 * inf
                return _strong_zero_product(g, dv, shape)
    try:
        same = ct.shape == shape
    except AttributeError:  # a Python number, or a partial's NotImplementedTangent
        if isinstance(ct, NotImplementedTangent):
            return ct
        same = shape == ()
    return ct if same else unbroadcast(ct, shape)


# float16, float32, complex64, and the integer and boolean types (np.int8(3) ** x: NumPy's
# log(int8) is a float16; -y of a uint8 y wraps around)
_LOW_PRECISION = frozenset("efF" + "?bBhHiIlLqQnN")


def _at_loop_precision(xs):
    """``xs`` with the arguments of a lower precision than the function's loop cast to it, as
    NumPy casts them before computing (``x / np.float32(0.7)`` of a float64 x divides by the
    float64 0.7f: its partial 1/c must be computed in float64 too)."""
    from .core import promotion_operand

    loop = np.result_type(*[promotion_operand(x) for x in xs])
    if loop.kind not in "fc":
        return xs
    out = list(xs)
    for i, x in enumerate(xs):
        dt = getattr(x, "dtype", None)
        if dt is None or dt.char not in _LOW_PRECISION:
            continue
        if dt.kind in "biu":  # (an integer or boolean constant: in the loop's real precision)
            out[i] = x.astype(loop if loop.kind == "f" else np.dtype(loop.char.lower()))
        elif dt.itemsize * (2 if dt.kind == "f" else 1) < loop.itemsize * (2 if loop.kind == "f" else 1):
            want = loop if dt.kind == loop.kind else np.dtype(loop.char.lower())  # (a real x stays real)
            out[i] = x.astype(want)
    return tuple(out)


def _partial(d, xs, y):
    """The partial ``d(*xs, y)``, on arguments of the function's loop precision; where its
    Python-number arguments (constants, weak scalars, an outer level's traced ones) made
    Python raise (``1 / 0.0``, ``10.0 ** 400``), computed on NumPy scalars instead, whose
    arithmetic gives inf or nan as the elementwise function itself does."""
    if len(xs) > 1:
        for x in xs:
            tx = type(x)
            if tx is _float64 or tx is float or tx is int:
                continue
            dt = getattr(x, "dtype", None)
            if dt is not None and dt.char in _LOW_PRECISION:
                xs = _at_loop_precision(xs)
                break
    try:
        return d(*xs, y)
    except (ZeroDivisionError, OverflowError):
        # (Python numbers, and an outer level's traced ones at higher order, as NumPy values)
        from .core import strong_operand

        return d(*[strong_operand(x) for x in xs], strong_operand(y))


_ndarray, _negative, _multiply, _conj, _result_type = np.ndarray, np.negative, np.multiply, np.conj, np.result_type
_float64 = np.float64
_isnan, _isinf, _iscomplexobj = np.isnan, np.isinf, np.iscomplexobj

# Strong zeros. An output element whose cotangent is zero (it was overwritten, or np.where
# did not pick it) contributes nothing to its inputs, even where its partial is infinite or
# undefined (sqrt at 0, log at 0, arcsin beyond 1): forward mode and finite differences say
# so, and IEEE's 0 * inf = nan would not. The reverse pass runs with NumPy calling
# ``_fp_event`` on an overflow, a division by zero or an invalid operation (see
# ReverseLevel.backward); each one makes FP.flag a new object, and ew_cotangent takes
# the careful product when its partial or its product raised one. No cost otherwise.
# This state is the thread's own (NumPy calls _fp_event in the thread whose operation raised):
# another thread's differentiation neither sets its flag nor changes its kind of products.


class _FPState(threading.local):
    def __init__(self):
        self.flag = 0  # a new object at each floating-point event (_fp_event)
        # > 0 during a reverse pass run again because a gradient held a NaN (api._backward): every
        # elementwise cotangent takes the strong zeros, NaN partials included
        self.careful = 0
        # > 0 during the reverse pass of an output that is NaN where it is seeded (api._backward): the
        # products are IEEE's, 0 * inf = nan, so the derivative of a value undefined there is NaN along
        # every path to it (sin(t) * (r / t) at r = t = 0: r's cotangent sin(0) = 0 times 1/t = inf)
        self.ieee = 0
        self.in_derivative = 0  # > 0 while forward mode computes a partial or a tangent (UserFPErrors)
        self.events = 0  # floating-point events forward rules have noted (forward._Events)


FP = _FPState()


def _fp_event(kind, flag):
    FP.flag = object()


try:  # NumPy's error state (np.errstate) is a context variable: its value is one object per state
    _errstate_now = np._core._multiarray_umath._extobj_contextvar.get
except AttributeError:  # (another NumPy: no shortcut)
    def _errstate_now():
        return None
# the last two error states found to report every event to the strong zeros (jvp's, a reverse pass's;
# held, so that their identities stay their own)
_REPORTING = [None, None]


class _DerivativeEvents:
    """Around a forward rule's derivative computation: marks it as such (FP.in_derivative, so
    UserFPErrors keeps its events from the user), and, where the function's own np.errstate
    has turned off the reports that jvp set up (invalid="ignore", or its own call=handler),
    reports them to the strong zeros again for that computation, underflow ignored."""

    __slots__ = ("state",)

    def __enter__(self):
        FP.in_derivative += 1
        self.state = None
        ext = _errstate_now()
        if ext is not None and (ext is _REPORTING[0] or ext is _REPORTING[1]):  # (states found to report)
            return
        e = np.geterr()
        call = np.geterrcall()
        if (e["invalid"] != "call" or e["divide"] != "call" or e["over"] != "call"
                or (type(call) is not UserFPErrors and call is not _fp_event)):  # (jvp's or a reverse pass's)
            self.state = np.errstate(divide="call", over="call", invalid="call", under="ignore", call=_fp_event)
            self.state.__enter__()
        else:
            _REPORTING[1], _REPORTING[0] = _REPORTING[0], ext

    def __exit__(self, *exc):
        if self.state is not None:
            self.state.__exit__(*exc)
        FP.in_derivative -= 1


_FP_KEYS = {"divide by zero": "divide", "overflow": "over", "underflow": "under", "invalid value": "invalid"}


def fp_event_as_numpy(mode, call, kind, flag, message, stacklevel):
    """What NumPy does with a floating-point event of ``kind`` under the error mode
    ``mode`` and error call ``call``: warn (at ``stacklevel`` from the caller), raise,
    call, log or print ``message``."""
    if mode == "warn":
        warnings.warn(message, RuntimeWarning, stacklevel=stacklevel)
    elif mode == "raise":
        raise FloatingPointError(message)
    elif mode == "call" and callable(call):
        call(kind, flag)
    elif mode == "log" and call is not None:
        call.write(f"Warning: {message}\n")
    elif mode == "print":
        print(f"Warning: {message}")


def _operation_name(frame):
    """The name NumPy gives the ufunc computing now (``log`` in "divide by zero encountered
    in log"), from the primitive or ufunc a mutagrad frame on the stack holds; "" if none."""
    for _ in range(12):
        if frame is None:
            break
        loc = frame.f_locals
        u = loc.get("ufunc")
        if isinstance(u, np.ufunc):
            return u.__name__
        p = loc.get("prim")
        if isinstance(p, Primitive):
            return (p.name or "").rsplit(".", 1)[-1]
        frame = frame.f_back
    return ""


# _fp_settings(): ``np.geterr()`` with the error call under "call". NumPy's geterr and geterrcall
# each build this dict of its own; one call of it gives both.
try:
    from numpy._core._multiarray_umath import _get_extobj_dict as _fp_settings
    if not {"divide", "over", "under", "invalid", "call"} <= set(_fp_settings()):
        raise ImportError
except ImportError:  # another NumPy: its public functions
    def _fp_settings():
        d = np.geterr()
        d["call"] = np.geterrcall()
        return d


class UserFPErrors:
    """The same as ``_fp_event``, while the user's own code runs too (forward
    mode runs the function): each event is then also handled as the
    ``np.errstate`` in force before differentiation says (warn, raise, call...)."""

    # (the id of NumPy's error state object that makes this the call, user_fp_state's, which holds it
    # while the function runs: not the object, which refers to this handler as its call, a cycle through
    # a PyCapsule that the garbage collector does not see: each nested differentiation's handler leaked)
    extobj_id = None

    def __init__(self, modes=None):
        self.modes = modes = _fp_settings() if modes is None else modes
        self.call = modes["call"]

    def __call__(self, kind, flag):
        FP.flag = object()
        if FP.in_derivative or FP.careful:  # (a careful run again: its events were the first run's, reported)
            return
        key = _FP_KEYS.get(kind, "invalid")
        mode = self.modes.get(key, "ignore")
        if _extobj_contextvar is not None and id(_extobj_contextvar.get()) != self.extobj_id:
            mode = self._set_inside(key, mode)
        if mode == "ignore":
            return
        import sys

        from .errors import user_frame, warn_at

        frame = sys._getframe(1)
        name = _operation_name(frame)
        message = f"{kind} encountered" + (f" in {name}" if name else "")
        user = user_frame(frame)
        if mode == "warn" and user is not None:  # (NumPy's warning, at the user's line: filters by message
            warn_at(user, message, RuntimeWarning)  # or module, and the line shown, are a plain call's)
            return
        fp_event_as_numpy(mode, self.call, kind, flag, message, stacklevel=3)

    def resolved(self, key):
        """(mode, error call) of events of ``key`` as the error state before the differentiation says,
        through the handlers of the differentiations it runs inside (nested: the outer one's)."""
        mode, call = self.modes.get(key, "ignore"), self.call
        for _ in range(64):
            if mode != "call" or type(call) is not UserFPErrors:
                break
            mode, call = call.modes.get(key, "ignore"), call.call
        return mode, call

    def _set_inside(self, key, mode):
        """The mode of events of ``key`` where the function set an error state of its own over this
        handler's (np.errstate(divide="call") inside it, whose call stays this handler): the one it
        set for ``key`` (a "call" then calls the error call installed before, np.seterrcall), or,
        where it set other kinds only, ``mode``, the one in force before the differentiation."""
        cur = _extobj_contextvar.get()
        for _ in range(64):
            if id(cur) == self.extobj_id:
                return mode
            made = _MADE_INSIDE.get(id(cur))
            if made is None or made[0] is not cur:
                return mode  # (a state made otherwise: as before the differentiation)
            if key in made[2]:
                return made[2][key]
            cur = made[1]
        return mode

    def write(self, message):
        """NumPy's "log" mode writes to the error-call object: an errstate that sets "log" for
        one kind of event while this object is the error call (a nested np.errstate)."""
        if FP.in_derivative:
            return
        if self.call is not None and hasattr(self.call, "write"):
            self.call.write(message)


_FP_MODES = ("divide", "over", "under", "invalid")


try:  # NumPy's own state of np.errstate (a context variable), set directly: np.errstate's object costs more
    from numpy._core._multiarray_umath import _make_extobj
    from numpy._core._ufunc_config import _extobj_contextvar
except ImportError:  # another NumPy: np.errstate itself
    _extobj_contextvar = None

# (the user's settings, their handler, NumPy's state calling it): made again when the settings change
_USER_FP = [None]

# The error states a differentiated function makes (np.errstate, np.seterr: NumPy's _make_extobj, which
# mutagrad's makes note of while a function runs): id -> (the state, the state it was made over, the
# modes it set), so that an event under a mode "call" is told apart from one under a "call" of
# user_fp_state's that it inherited (UserFPErrors._set_inside).
_MADE_INSIDE: dict = {}
_NOTING = [0]  # (user_fp_state's running: states are noted)
if _extobj_contextvar is not None:
    from numpy._core import _ufunc_config

    def _make_extobj_noted(*args, **kw):
        extobj = _make_extobj(*args, **kw)
        if _NOTING[0] and not args:
            every = kw.get("all")
            modes = {k: kw.get(k) if kw.get(k) is not None else every for k in _FP_MODES}
            if len(_MADE_INSIDE) > 4096:
                _MADE_INSIDE.clear()
            _MADE_INSIDE[id(extobj)] = (extobj, _extobj_contextvar.get(),
                                        {k: v for k, v in modes.items() if v is not None})
        return extobj

    if getattr(_ufunc_config, "_make_extobj", None) is _make_extobj:
        _ufunc_config._make_extobj = _make_extobj_noted


class fixed_errstate:
    """``np.errstate(**settings)`` of settings fixed once (``fixed_errstate.of(...)``), entered
    through NumPy's context variable without building the errstate again: one object per use
    (its token), the state shared."""

    __slots__ = ("extobj", "token")

    @staticmethod
    def of(**settings):
        """A maker of context managers for ``np.errstate(**settings)`` (the settings' ``call``
        fixed too)."""
        if _extobj_contextvar is None:
            return lambda: np.errstate(**settings)
        extobj = _make_extobj(**settings)

        def make():
            s = fixed_errstate.__new__(fixed_errstate)
            s.extobj = extobj
            return s

        return make

    def __enter__(self):
        self.token = _extobj_contextvar.set(self.extobj)

    def __exit__(self, *exc):
        _extobj_contextvar.reset(self.token)


class user_fp_state:
    """``np.errstate(all="call", call=UserFPErrors())`` while the user's function runs, after
    which the ``np.seterr`` / ``np.seterrcall`` the function made stay in force, as after a
    plain call (the errstate's exit would undo them)."""

    __slots__ = ("handler", "state")

    def __enter__(self):
        _NOTING[0] += 1
        settings = _fp_settings()
        hit = _USER_FP[0]  # (one read: another thread may replace it)
        if hit is not None and hit[0] == settings and hit[0]["call"] is settings["call"]:
            self.handler, extobj = hit[1], hit[2]
        else:
            self.handler = handler = UserFPErrors(settings)
            if _extobj_contextvar is None:
                self.state = np.errstate(all="call", call=handler)
                self.state.__enter__()
                return
            extobj = _make_extobj(all="call", call=handler)
            handler.extobj_id = id(extobj)
            _USER_FP[0] = (settings, handler, extobj)
        self.state = state = fixed_errstate.__new__(fixed_errstate)
        state.extobj = extobj
        state.__enter__()

    def __exit__(self, *exc):
        _NOTING[0] -= 1
        state = self.state
        if type(state) is fixed_errstate and _extobj_contextvar.get() is state.extobj:
            _extobj_contextvar.reset(state.token)  # (the function set no np.seterr of its own: the common case)
            return False
        inner = _fp_settings()
        call = inner["call"]
        state.__exit__(*exc)
        changed = {k: inner[k] for k in _FP_MODES if inner[k] != "call"}
        if changed:
            np.seterr(**changed)
        if call is not self.handler:
            np.seterrcall(call)
        return False


def strong_times(a, b):
    """``a * b`` with the products exactly zero where either factor is zero, also where the
    other is infinite or NaN: a tangent or cotangent times a weight that drops its element
    (max's selection, a softmax weight that is exactly 0). IEEE's 0 * inf = nan otherwise."""
    if isinstance(a, (AbstractZero, NotImplementedTangent)) or isinstance(b, (AbstractZero, NotImplementedTangent)) or (
            np.isfinite(bottom(a)).all() and np.isfinite(bottom(b)).all()):
        return a * b
    return _strong_zero_product(a, b, np.broadcast_shapes(np.shape(a), np.shape(b)))


def reciprocal(partial, denominator, factor=1.0):
    """Mark ``partial`` (a function of ``(*xs, y)``) as ``factor / denominator(*xs, y)``: where
    the reciprocal overflows (a subnormal x in log's 1/x), the cotangent and the tangent are
    computed as quotients, ``g / x * factor``, which stay finite where the true derivative is.
    ``factor`` is a number or a function of ``(*xs, y)`` (the quotient's -y / b: factor -y)."""
    partial.reciprocal_of = (denominator, factor)
    return partial


def _silently_nonfinite(dv) -> bool:
    """A partial computed on Python floats that overflowed: Python gives inf, with no event."""
    return type(dv) is float and dv - dv != 0


def _careful_product(g, d, dv, xs, y, shape, conj):
    """``g * dv`` (``g * conj(dv)`` with ``conj``: a cotangent) where the partial ``d`` may be
    infinite or undefined: exactly zero where ``g`` is; a partial marked ``reciprocal`` is
    divided by instead where it overflowed (``g / x``: the finite ratio where log's 1/x of a subnormal
    x is inf), and, where outer levels trace the product, where it is beyond the square root of the
    largest number: there its own derivative (``y db / b**2`` of a quotient's ``-y / b``) may overflow
    where the quotient's does not (the sinkhorn tester's d2/deps2 of an entropic OT cost was -inf);
    not where the quotient is not finite (its denominator or numerator over- or underflowed: at x = 0,
    0 ** 0.5's g / 0 * 0 is NaN; x ** 1.5's factor 1.5 x ** 1.5 underflows at x = 1e-250)."""
    den = getattr(d, "reciprocal_of", None)
    dvc = _conj(dv) if conj and _iscomplexobj(dv) else dv
    if den is None or FP.ieee:
        return _strong_zero_product(g, dvc, shape)
    db = np.asarray(bottom(dv))
    finite = np.isfinite(db)
    extreme = ~finite
    if db.dtype.kind in "fc" and (is_traced(dv) or is_traced(g)):
        with np.errstate(invalid="ignore"):
            extreme = extreme | (np.abs(db) > _SQRT_MAX[db.dtype.char])
    if not extreme.any():  # (an event of a finite partial: an underflow, or a complex quotient's)
        return _strong_zero_product(g, dvc, shape)
    value, factor = _partial(den[0], xs, y), den[1]
    if conj and _iscomplexobj(value):
        value = _conj(value)
    if callable(factor):  # (a partial numerator / denominator whose numerator is not a constant)
        factor = _partial(factor, xs, y)
        if conj and _iscomplexobj(factor):
            factor = _conj(factor)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore", under="ignore"):
        q = g / value
        if callable(den[1]) or factor != 1.0:
            q = q * factor
        qb = bottom(q)
        use = extreme & np.where(finite, np.isfinite(qb), ~np.isnan(qb))
        if not use.all():
            q = np.where(use, q, g * dvc)
    return _zero_where(q, (bottom(g) == 0) & ~np.isfinite(bottom(q)), shape)


_SQRT_MAX = {c: np.sqrt(np.finfo(c).max) for c in "efdgFDG"}


def _strong_zero_product(g, dv, shape):
    """``g * dv`` with the products where ``g`` is zero exactly zero, summed to ``shape``
    (IEEE's products in an IEEE pass)."""
    with np.errstate(invalid="ignore", over="ignore"):
        ct = g * dv
    if FP.ieee:
        return ct if np.shape(ct) == shape else unbroadcast(ct, shape)
    # only the products 0 * inf and 0 * nan (a zero partial times an infinite cotangent too): elsewhere
    # the product is already right, and where its factors are traced by outer levels (a Hessian), its
    # derivative is theirs (a zero partial whose own derivative is infinite: d(x**1.5) at 0)
    gb, db = bottom(g), bottom(dv)
    return _zero_where(ct, ((gb == 0) & ~np.isfinite(db)) | ((db == 0) & ~np.isfinite(gb)), shape)


def _zero_where(ct, zero, shape):
    """``ct`` with exact zeros where ``zero``, summed to ``shape``."""
    if np.ndim(ct) == 0 and not is_traced(ct):
        if zero:
            ct = np.zeros_like(ct)[()]
    else:
        ct = np.where(zero, np.zeros((), getattr(ct, "dtype", float)), ct)
    return ct if np.shape(ct) == shape else unbroadcast(ct, shape)


class ElementwisePullback:
    """The pullback of an elementwise function: ``ȳ · conj(∂y/∂x_i)`` summed
    to x_i's shape, as lazy cotangents for all arguments (the tape records
    elementwise operations as ``EWRecord``s and calls :func:`ew_cotangent`
    for the active ones only; this is what the rule itself returns)."""

    __slots__ = ("partials", "xs", "y")

    def __init__(self, partials, xs, y):
        self.partials = partials
        self.xs = xs
        self.y = y

    def one(self, g, i):
        return ew_cotangent(g, self.partials[i], self.xs, self.y, i)

    def __call__(self, g):
        return tuple(Thunk(functools.partial(self.one, g, i)) for i in range(len(self.partials)))


def _every_positional(prim, fun, args, kwargs, n):
    """The arguments of a call of an elementwise primitive (defelementwise: one partial per positional
    parameter) as that many positional ones, defaults filled in (``sc(z)`` of ``sc(x, s=2.0)``)."""
    try:
        bound = inspect.signature(fun).bind(*args, **kwargs)
    except TypeError:
        return args  # (the call's own error comes with the call)
    bound.apply_defaults()
    params = list(bound.signature.parameters.values())
    positional = [q.name for q in _positional(params)]
    extra = [q.name for q in params if q.kind is q.KEYWORD_ONLY and q.name in kwargs]
    if len(positional) != n or extra:
        from .errors import user_line

        raise TypeError(
            f"{prim.name} has elementwise rules (defelementwise) for {n} positional argument(s), at {user_line()}: "
            f"call it with those only ({'keyword-only ' + ', '.join(extra) + ' given' if extra else 'not this call'}); "
            "give one partial per positional parameter, None for one with no derivative")
    return tuple(bound.arguments[k] for k in positional)


def _check_partials_count(fn, call, n):
    """defelementwise's partials: one per positional argument the function takes (a ufunc's nin)."""
    if isinstance(call, np.ufunc):
        want = call.nin
    else:
        try:
            params = list(inspect.signature(call).parameters.values())
        except (TypeError, ValueError):  # (a builtin without a signature: not checked)
            return
        if any(q.kind is q.VAR_POSITIONAL for q in params):
            return
        want = len(_positional(params))  # (one for a parameter with a default too: the call may pass it)
    if n != want:
        raise TypeError(f"defelementwise({getattr(fn, '__name__', fn)!r}): {n} partial(s) for a function of {want} "
                        "positional argument(s): give one partial per argument (None for one with no derivative)")


def _positional(params):
    return [q for q in params if q.kind in (q.POSITIONAL_ONLY, q.POSITIONAL_OR_KEYWORD)]


def ew_tangent(p, partials, primals, tangents, y, own=None):
    """The tangent of elementwise primitive ``p``'s output: each nonzero tangent times its partial at
    ``primals`` (and ``y``, the output, which ForwardLevel.ew_into leaves None: its partials do not read it),
    summed; ZERO, or a NotImplementedTangent where a partial is missing along a nonzero tangent. ``own``: the
    only nonzero tangent, a buffer the caller owns, scaled in place and returned where its partial is one
    finite number (``u *= c`` in forward mode)."""
    acc = ZERO
    with _DerivativeEvents():  # (the tangent's floating-point events are not the user's)
        for i in range(len(partials)):
            t = tangents[i]
            d = partials[i]
            if is_zero(t):
                continue
            if d is None:
                if p.user and not isinstance(t, NotImplementedTangent):  # (see tape.EWRecord.backward)
                    return no_tangent_for_active(p, i, None)
                continue
            if not callable(d):
                term = t if d == 1 else -t
            else:
                fp = FP.flag
                dv = _partial(d, primals, y)
                if isinstance(dv, NotImplementedTangent):  # (a partial the rule does not have at these values:
                    # none is asked for along a tangent of zeros, a parameter held fixed in a traced vector)
                    if isinstance(dv * t, AbstractZero):
                        continue
                    return dv
                if t is own and own is not None and FP.flag is fp and (
                        type(dv) is float or getattr(dv, "shape", None) == ()) and np.isfinite(dv):
                    return np.multiply(own, dv, out=own)  # (a finite factor's product is the careful one)
                term = t * dv
                if FP.flag is not fp or FP.careful or _silently_nonfinite(dv):  # an infinite or undefined partial
                    term = _careful_product(t, d, dv, primals, y, np.shape(term), conj=False)
            acc = term if isinstance(acc, AbstractZero) else acc + term
    return acc


def defelementwise(fn, *partials, impl=None):
    """Both rules of an elementwise function from its partial derivatives.

    ``partials[i](*xs, y)`` is ∂y/∂x_i; ``1`` and ``-1`` mean the identity
    and negation, ``None`` a non-differentiable argument.
    """
    for d in partials:
        if not (d is None or callable(d) or (type(d) is int and d in (1, -1))):
            raise TypeError(f"defelementwise({getattr(fn, '__name__', fn)!r}): a partial is a function of "
                            f"(*xs, y), 1, -1 or None, not {d!r}")
    _check_partials_count(fn, impl or fn, len(partials))
    p = _prim_for(fn)
    call = impl or fn
    n = len(partials)
    p.linear = all(d is None or (not callable(d)) for d in partials)
    p.reads = tuple(_reads_of(d, n) for d in partials)
    p.fresh = isinstance(fn, np.ufunc)

    def rule(*xs):
        y = call(*xs)
        return y, ElementwisePullback(partials, xs, y)

    def forward(primals, tangents):
        y = call(*primals)
        return y, ew_tangent(p, partials, primals, tangents, y)

    forward.events_apart = True  # (ForwardLevel.process: the primal's events are the user's)
    p.rrule = rule
    p.frule = forward
    p.elementwise = (rule, partials, call, forward)
    p.weak_args = True  # (a weak scalar takes the arrays' dtype in it, as in a plain call)
    return p


def refusing_identity(name):
    """A primitive ``p(x, why=...)``: ``x``'s value (a copy: the same array would be taken for a view of x,
    recorded by no rule), whose derivative at every order is a NotImplementedTangent saying ``why`` (a
    value whose derivative its rule cannot give, or rounding would dominate), naming the user's line."""
    p = get_primitive(lambda x, why="": np.copy(x), name)
    p.rrule = lambda x, why="": (np.copy(x), lambda g: (not_implemented(why),))
    p.frule = lambda primals, tangents, why="": (np.copy(primals[0]), not_implemented(why))
    p.names_line = True
    return p


def deflinear(fn, transpose, impl=None):
    """Both rules of a function linear in its first argument.

    ``transpose(g, x, *args, **kw)`` maps an output cotangent to the input's
    cotangent; the forward rule applies ``fn`` to the tangent.
    """
    p = _prim_for(fn)
    call = impl or fn
    p.linear = True

    def rule(x, *args, **kw):
        y = call(x, *args, **kw)
        shape = _shape(x)
        dtype = getattr(x, "dtype", None)
        if dtype is None and (type(x) is float or type(x) is complex):  # a weak scalar (core.Storage.weak)
            dtype = np.result_type(x)
        meta = _Meta(shape, dtype)

        def pullback(g):
            return (transpose(g, meta, *args, **kw),) + tuple(NoTangent() for _ in args)

        return y, pullback

    def forward(primals, tangents, **kw):
        x, *args = primals
        t = tangents[0]
        y = call(x, *args, **kw)
        if p.user:  # (its other arguments have no derivative: one asked for is no silent zero)
            for i in range(1, len(tangents)):
                if not is_zero(tangents[i]) and not isinstance(tangents[i], NotImplementedTangent):
                    return y, no_tangent_for_active(p, i, None)
        if is_zero(t):
            return y, ZERO
        return y, call(t, *args, **kw)

    p.rrule = rule
    p.frule = forward
    return p


class _Meta:
    """Shape and dtype of a primal, for transposes that only need those."""

    __slots__ = ("shape", "dtype")

    def __init__(self, shape, dtype):
        self.shape = shape
        self.dtype = dtype

    @property
    def ndim(self):
        return len(self.shape)

    @property
    def size(self):
        return int(np.prod(self.shape, dtype=np.int64))


def defzero(fn, impl=None):
    """A piecewise-constant function: its derivative is zero where it exists."""
    p = _prim_for(fn)
    call = impl or fn
    p.zero = True
    p.linear = True
    p.weak_args = True  # (a weak scalar takes the other operand's dtype, as in a plain call: 1.7 // float32)

    def rule(*xs, **kw):
        y = call(*xs, **kw)
        return y, lambda g: tuple(ZERO for _ in xs)

    def forward(primals, tangents, **kw):
        return call(*primals, **kw), ZERO

    p.rrule = rule
    p.frule = forward
    return p


NOT_DIFFERENTIABLE: dict = {}  # primitive name -> why it has no derivative (listed in docs/coverage.md)


def defnotimplemented(fn, why, impl=None):
    """A function with no derivative: it runs on traced values, and the
    derivative of whatever its result reaches is a ``NotImplementedTangent``
    carrying ``why`` (an error where it ran, in strict mode). Never a zero."""
    p = _prim_for(fn)
    call = impl or fn

    def rule(*xs, **kw):
        # (a cotangent of zeros contributes nothing, as a strong zero does through an infinite
        # partial: the other outputs' derivatives stay; a traced one, at higher order, poisons)
        return call(*xs, **kw), lambda g: tuple(
            ZERO if is_zero(g) or (not isinstance(g, Tracer) and not np.any(g)) else not_implemented(why)
            for _ in xs)

    def forward(primals, tangents, **kw):
        return call(*primals, **kw), not_implemented(why)

    p.rrule = rule
    p.frule = forward
    p.names_line = True  # (the derivative it poisons names the line: see Primitive.names_line)
    NOT_DIFFERENTIABLE[p.name] = why
    return p


def is_traced(x) -> bool:
    return isinstance(x, Tracer)
