"""Every error mutagrad raises on purpose.

Each message names the operation, the user's source line and the fix. The
user's line is found by walking the stack outwards past mutagrad's and
NumPy's own frames; this happens only when an error is being raised.
"""
from __future__ import annotations

import ast
import builtins
import cmath
import contextlib
import dis
import functools
import inspect
import itertools
import linecache
import math
import numbers
import operator
import os
import re
import sys
import threading
import types
import warnings
import weakref

import numpy as np

__all__ = [
    "DifferentiationError",
    "TracerEscapeError",
    "WriteToPlainArrayError",
    "NoRuleError",
    "NotImplementedTangentError",
    "MutationError",
    "AliasingError",
    "EscapedTracerError",
    "ForwardRuleMissingError",
    "user_line",
]

# the packages whose frames are not the user's (by top-level name: a user's numpy_utils.py is theirs)
# (the peers too: torch.as_tensor(x) is refused at the user's line that called it)
_INTERNAL_PACKAGES = frozenset(("mutagrad", "numpy", "scipy", "functools", "contextlib", "_pytest", "pluggy", "torch",
                                "jax", "jaxlib"))


def _frame_is_internal(frame) -> bool:
    name = frame.f_globals.get("__name__", "") or ""
    if name.startswith("mutagrad.testing") or name == "__main__":
        return False
    top = name.partition(".")[0]
    # (the standard library's frames too: statistics.fmean converting a traced value is the
    # user's call of it, on the user's line)
    return top in _INTERNAL_PACKAGES or name == "importlib._bootstrap" or (
        top in _STDLIB and frame.f_code.co_filename.startswith(_STDLIB_DIR))


_STDLIB = frozenset(getattr(sys, "stdlib_module_names", ())) - {"__main__"}
_STDLIB_DIR = __import__("sysconfig").get_paths()["stdlib"]
_MUTAGRAD_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep


def user_frame(start=None):
    """The innermost frame that belongs to user code (not mutagrad/NumPy)."""
    frame = start if start is not None else sys._getframe(1)
    while frame is not None and _frame_is_internal(frame):
        frame = frame.f_back
    return frame


def user_line(start=None) -> str:
    """``file:line: `source``` of the user's innermost frame, for messages."""
    frame = user_frame(start if start is not None else sys._getframe(1))
    if frame is None:
        return "<unknown location>"
    text = _line_text(frame.f_code.co_filename, frame.f_lineno)
    lib = _installed_package(frame)
    if lib is not None:  # (xarray's, pint's code: the user's call of it is the line to change)
        outer = frame.f_back
        while outer is not None and (_frame_is_internal(outer) or _installed_package(outer) is not None):
            outer = outer.f_back
        if outer is not None:
            text += f" (in {lib}, called from {_line_text(outer.f_code.co_filename, outer.f_lineno)})"
    return text


def _installed_package(frame):
    """The top-level name of the installed package whose code ``frame`` runs, or None: one under
    site-packages, or one in a directory that pip installed into (pip install --target dir: the
    package's .dist-info beside it, on sys.path)."""
    parts = frame.f_code.co_filename.replace("\\", "/").split("/")
    name = frame.f_globals.get("__name__", "") or ""
    for k, p in enumerate(parts[:-1]):
        if p in ("site-packages", "dist-packages"):
            return name.partition(".")[0] or parts[k + 1]
    dotted = name.split(".")
    top = len(parts) - len(dotted) - (parts[-1] == "__init__.py")  # (the top-level package's directory, or module)
    if name and name != "__main__" and 1 <= top < len(parts) and parts[top].removesuffix(".py") == dotted[0] and (
            _pip_installed_into("/".join(parts[:top]) or "/")):
        return dotted[0]
    return None


@functools.lru_cache(maxsize=64)
def _pip_installed_into(directory) -> bool:
    """Whether pip installed packages into ``directory`` (it holds their .dist-info directories)."""
    try:
        return any(entry.endswith(".dist-info") for entry in os.listdir(directory))
    except OSError:
        return False


def outside_installed_packages(frame):
    """The first frame from ``frame`` out that runs neither mutagrad's, NumPy's nor an installed
    package's code (pandas' converting a traced array: the user's call of it), or None."""
    while frame is not None and (_frame_is_internal(frame) or _installed_package(frame) is not None):
        frame = frame.f_back
    return frame


def _line_text(filename, lineno) -> str:
    src = linecache.getline(filename, lineno).strip()
    where = f"{filename}:{lineno}"
    return f"{where}: `{src}`" if src else where


def user_place(start=None):
    """The user's innermost frame's ``(code, line number)``, to name in a message later with
    :func:`line_text` (no source read now)."""
    frame = user_frame(start if start is not None else sys._getframe(1))
    return None if frame is None else (frame.f_code, frame.f_lineno)


def replayed_place(replay, start=None):
    """user_place's pair; in a nested reverse pass (``replay``: the line of the operation it differentiates,
    core.STATE.replay), that line, unless the user's frame is in a rule of the user's that runs there."""
    frame = user_frame(start if start is not None else sys._getframe(1))
    if replay is not None and (frame is None or _rule_wrapper(frame) is None):
        return replay
    return None if frame is None else (frame.f_code, frame.f_lineno)


def replayed_line(replay):
    """:func:`replayed_place` as text (``user_line`` outside a nested reverse pass)."""
    return user_line() if replay is None else (line_text(replayed_place(replay)) or "<unknown location>")


def line_text(line):
    """A recorded line (``user_line``'s text, ``user_place``'s pair, or None) as text, or None."""
    if type(line) is tuple:
        return _line_text(line[0].co_filename, line[1])
    return line


class DifferentiationError(Exception):
    """Base class of every error mutagrad raises on purpose."""

    # NumPy raises an error at the same place in a plain call too (a write into a read-only array):
    # a program may catch it and go on as a plain call does (see caught_by_the_program)
    plain_too = False

    def __init__(self, *args):
        super().__init__(*args)
        if not self.plain_too:
            stack = getattr(_WATCHED, "stack", None)
            if stack:
                for seen in stack:
                    seen.append(self)
            else:  # a worker thread: the differentiation whose traced value it used sees it (owned_by);
                # not knowing which, every one running (not an error of a call this thread makes itself)
                owner, _WATCHED.owner = getattr(_WATCHED, "owner", None), None
                if owner is not None:
                    stacks = [_STACKS.get(owner) or ()]
                elif getattr(_WATCHED, "api", 0):
                    stacks = ()
                else:
                    stacks = list(_STACKS.values())
                for stack in stacks:
                    if stack:
                        self._in_worker = True
                    for seen in stack:
                        seen.append(self)

    _in_worker = False
    _at_user_line = None  # (an escape error made directly under a user's line: escape_error)


# the errors made while differentiated functions run, one list per running call (watch_errors);
# _STACKS: the threads' stacks of them, by thread
_WATCHED = threading.local()
_STACKS: dict = {}


def watch_errors():
    """Start collecting the DifferentiationErrors made in this thread, and in threads that run
    no differentiation of their own (a list, for caught_by_the_program and unwatch_errors)."""
    stack = getattr(_WATCHED, "stack", None)
    if stack is None:
        stack = _WATCHED.stack = []
    seen = []
    stack.append(seen)
    _STACKS[threading.get_ident()] = stack
    if sys.excepthook is not _quiet_hook:
        _HOOKED[0] = sys.excepthook
        sys.excepthook = _quiet_hook
    return seen


_HOOKED = [None]  # the excepthook _quiet_hook stands in front of while differentiations run


def _quiet_hook(kind, value, tb):
    """sys.excepthook while differentiations run. C code that reports an exception from a Python
    callback with PyErr_Print (SciPy's MINPACK: fsolve, leastsq) printed mutagrad's error in full
    before raising its own, which the differentiation then replaces by that same error: it is not
    printed twice. Other exceptions go to the hook that was in place."""
    if isinstance(value, DifferentiationError) and any(
            value in seen for stack in list(_STACKS.values()) for seen in stack):
        return
    (_HOOKED[0] or sys.__excepthook__)(kind, value, tb)


def in_api(step):
    """This thread enters (1) or leaves (-1) a differentiation's entry point (mg.grad's call...)."""
    _WATCHED.api = getattr(_WATCHED, "api", 0) + step


def owned_by(thread):
    """The next error made in this thread (a worker's) is about a value traced by the
    differentiation that ``thread`` (an ident) runs: its call collects it."""
    _WATCHED.owner = thread


def unwatch_errors(seen):
    stack = _WATCHED.stack
    if stack and stack[-1] is seen:
        stack.pop()
    elif seen in stack:
        stack.remove(seen)
    if not stack:
        _STACKS.pop(threading.get_ident(), None)
        if not _STACKS and sys.excepthook is _quiet_hook:
            sys.excepthook, _HOOKED[0] = _HOOKED[0] or sys.__excepthook__, None


def caught_by_the_program(seen, raised=None):
    """Of the errors in ``seen``, one that was raised and caught by the program's own code (an
    ``except Exception:`` that returns a penalty, a fallback value), with a note saying so, or None.
    A plain call does not raise there: the program went on along another path than a plain call
    takes, and its value and derivative would be another function's, silently. (An error caught
    inside NumPy, SciPy, the standard library or mutagrad is theirs to handle.) ``raised``: the
    exception the function raised afterwards, if it did (a KeyError of the value the except
    clause did not set): the caught error, where the paths parted, is the one to report."""
    when = "Raised again when the function returned" if raised is None else (
        f"The function then raised {type(raised).__name__}, which may follow from it")
    for err in seen:
        tb = err.__traceback__
        if tb is None or err.plain_too:
            continue
        frame = tb.tb_frame  # (a traceback starts at the frame whose except clause caught it)
        if err._at_user_line is not None and frame.f_code.co_filename.startswith(_MUTAGRAD_DIR):
            # a write into a plain array that NumPy's C code (`b[0] = x`, `b.flat[0] = x`) asked
            # mutagrad to convert at the user's line: NumPy raised its own ValueError there instead,
            # and as the function returned, the program caught it
            err.add_note(
                f"(NumPy replaced this error with its own ValueError at {err._at_user_line}, and the "
                "differentiated code caught that and went on: a plain call takes no such path there, so the "
                f"value and derivative would be another function's. {when}; "
                "catch narrower exceptions, or fix what the message above says.)")
            return err
        if _frame_is_internal(frame) and not (
                err._in_worker and (frame.f_globals.get("__name__") or "").startswith(
                    ("threading", "concurrent", "multiprocessing", "asyncio"))):
            continue  # (a worker thread's error that its thread or future kept is the program's too)
        if _frame_is_internal(frame):  # (that thread ended with it, or its future holds it)
            err.add_note(
                f"(mutagrad raised this error in a worker thread, which ended with it there "
                f"({_line_text(frame.f_code.co_filename, tb.tb_lineno)}); a plain call's worker goes on, so the "
                f"differentiation raises it here. {when}; fix what the message above says.)")
            return err
        err.add_note(
            f"(mutagrad raised this error, and the differentiated code caught it (its try around "
            f"{_line_text(frame.f_code.co_filename, tb.tb_lineno)}) and went on: a plain call takes no such "
            f"path there, so the value and derivative would be another function's. {when}; "
            "catch narrower exceptions, or fix what the message above says.)")
        return err
    return None


class TracerEscapeError(DifferentiationError):
    """A traced value was turned into a plain number or array."""


class WriteToPlainArrayError(TracerEscapeError):
    """A traced value was written into a plain (untraced) NumPy array."""


class TracedTypeError(TracerEscapeError, TypeError):
    """A traced value used where Python needs a plain one (a dict key, an index, the receiver
    of a method called through its class): a TypeError too, as Python's protocols expect."""


class TracedAttributeError(TracerEscapeError, AttributeError):
    """The raw memory of a traced array asked for by attribute (``x.__array_interface__``,
    ``x.__array_struct__``): an AttributeError too, so that NumPy's conversions, which look
    for these first, and ``hasattr`` find none and go on (not an error the program's path
    depends on: never raised again when the function returns)."""

    plain_too = True


class NoRuleError(DifferentiationError, NotImplementedError):
    """An operation was applied to a traced value and has no derivative rule."""


class NotImplementedTangentError(DifferentiationError):
    """A rule reported that a needed derivative is not implemented (strict mode)."""


class MutationError(DifferentiationError):
    """An in-place operation that cannot be differentiated."""


class AliasingError(MutationError):
    """A write into an argument that shares memory with another argument, or
    with a plain array the differentiated function names."""


class EscapedTracerError(DifferentiationError):
    """Kept for compatibility; no longer raised: a traced value used after the
    differentiation that made it ended is the value it had (core.live)."""


class ForwardRuleMissingError(NoRuleError):
    """A primitive has a reverse rule but no forward rule."""


class RuleError(DifferentiationError):
    """A derivative rule registered with mg.rrule / mg.frule returned something
    malformed (no pullback, a None or misshapen cotangent, a None tangent)."""


# The last escape error built, with the user frame and line it names. NumPy
# replaces an error raised while it converts one element (``plain.flat[0] =
# traced`` gives "ValueError: Error setting single item of array."); the
# transformations put ours back when the exception leaves that same line.
_last_escape = None


# .on: a hessian's reverse-over-reverse attempt runs in this thread; .warned: a warning of mutagrad's own (not NumPy's
# floating-point ones) came up in it, and was held back: hessian then puts the arguments back and runs forward over
# reverse, whose watches see the directions it pushes (a tie whose values move alike along each one is no kink), and
# whose warnings are given. (Not an exception raised through the function: a bare `except:` in it took one, and the
# function went on along another branch, silently: the regress126 tester.)
ATTEMPT = threading.local()

# .seen: the warnings (message, category, file, line) given so far in one call of mg.hessian or of a forward-mode
# mg.jacobian, whose runs (one per argument element) give the same warning at the same line once each: given once per
# call (18 copies of one KinkWarning under simplefilter("always"): the mlscratch and plasticity testers)
ONCE = threading.local()


@contextlib.contextmanager
def warnings_once():
    """Within it, :func:`warn_at` gives each warning once (the outermost such call's set serves nested ones)."""
    if getattr(ONCE, "seen", None) is not None:
        yield
        return
    ONCE.seen = set()
    try:
        yield
    finally:
        ONCE.seen = None


def warn_at(frame, message, category=UserWarning, every=False):
    """Issue a warning at the user's ``frame`` (its file, line and module: a filter on them, and
    the line shown, are those of the user's code, not mutagrad's); where there is none, at the
    caller's caller. ``every``: at each call, not once per line under Python's default filter (a
    derivative that is zero for a reason the warning names: after the first, an optimiser's later
    steps got it silently, the cosmology tester); filters that ignore or raise act as ever."""
    if getattr(ATTEMPT, "on", False) and not issubclass(category, RuntimeWarning):
        ATTEMPT.warned = True
        return
    seen = getattr(ONCE, "seen", None)
    if seen is not None:
        key = (message, category) if frame is None else (message, category, frame.f_code.co_filename, frame.f_lineno)
        if key in seen:
            return
        seen.add(key)
    if frame is None:
        warnings.warn(message, category, stacklevel=3)
        return
    g = frame.f_globals
    # (module: as warnings.warn names it, "<string>" for code whose globals have no __name__, exec'd code:
    # warn_explicit drops a warning whose module is None, silently)
    warnings.warn_explicit(message, category, frame.f_code.co_filename, frame.f_lineno,
                           module=g.get("__name__") or "<string>",
                           registry={} if every else g.setdefault("__warningregistry__", {}))


class KinkWarning(UserWarning):
    """A derivative taken exactly at a kink where mutagrad's convention may not be the function's
    derivative: a higher derivative through a norm-like function at its zero, or a branch chosen by
    comparing two equal differentiated values."""


class _Site:
    """What :func:`warn_at` reads of a frame (its globals, file and line), kept without the frame and its locals."""
    __slots__ = ("f_code", "f_globals", "f_lineno")

    def __init__(self, frame):
        self.f_globals, self.f_code, self.f_lineno = frame.f_globals, frame.f_code, frame.f_lineno


def user_site(start=None):
    """The user's innermost frame (:func:`user_frame`) as a :class:`_Site`, for a warning given later, or None."""
    frame = user_frame(start if start is not None else sys._getframe(1))
    return None if frame is None else _Site(frame)


def kink_warning(what: str, branch: bool = False, site=None, equality: bool = False) -> None:
    """Warn that a higher derivative goes through ``what`` (a complex |z|, a norm) exactly at its kink (0),
    where it differentiates the first derivative's convention (0), not the function: right for a
    function with a real kink there (it has no second derivative), wrong for a composite that is
    smooth there (|x|**2). Called by a partial evaluated on values an outer level traces. ``branch``:
    ``what`` is a comparison of two equal differentiated values, which picks a branch (see below). ``site``:
    the user's line (:func:`user_site`), for a warning given in a pullback, after the line has run."""
    frame = site if site is not None else user_frame(sys._getframe(1))
    if equality:
        warn_at(frame, (
            f"{what}: the branch it picks holds at this point alone, and its derivative is that branch's (the "
            "guard's constant: 0), where the expression it guards may have a limit with another derivative "
            "((exp(k) - 1) / k at k = 0 has derivative 1/2, not 0; sin(x) / x has 0, right by chance). Where the "
            "expression is smooth through the point, divide by np.maximum(x, eps) or write its series near the "
            "point (np.where(abs(k) < 1e-4, 1 + k / 2 + k ** 2 / 6, (np.exp(k) - 1) / k)), or step off the point "
            "(docs/errors.md: kinks). If the test only counts or reports (np.sum(x == 0)), this is no matter."),
            KinkWarning)
        return
    if branch:
        warn_at(frame, (
            f"{what}: the branch it picks (Python's max(a, b) or min, np.where(a > b, ...), an if) gets all of "
            "the derivative there, a one-sided one. It is right where both branches have the same derivative "
            "there (a loop that stops exactly at its bound, `while t < b` after `h = min(h, b - t)`), wrong where "
            "the branches meet smoothly with different ones: the stable log-add max(a, b) + "
            "np.log1p(np.exp(-abs(a - b))) at a == b gets (1, 0) where it is (0.5, 0.5). Write np.logaddexp(a, b), "
            "or np.maximum / np.minimum, which split a tie evenly (docs/errors.md: kinks); a true kink there (a "
            "hinge, a max that is the function) has no derivative at the tie and this one is a subgradient."),
            KinkWarning)
        return
    warn_at(frame, (
        f"a higher derivative (mg.hessian, or a derivative of mg.grad/mg.jvp) goes through {what} exactly at its "
        "kink, where mutagrad differentiates the first derivative's convention (0 there; inf or NaN where it "
        "meets a factor that is 0 only up to rounding, sin(3 * pi)): where the value "
        "reaches the result, or an np.where (np.triu) guard replaces it (a guard's constant has no curvature), a "
        "composite that is smooth there gets a "
        "wrong second derivative (the Hessian of np.abs(z) ** 2 of a complex z, np.linalg.norm(x) ** 2 or "
        "np.hypot(x, y) ** 2 at 0 comes out 0; the stable softplus np.maximum(z, 0) + np.log1p(np.exp(-np.abs(z))) "
        "gets 0 for 0.25): write it without the kink (np.sum(x * x), (z * np.conj(z)).real, np.logaddexp(0, z) "
        "for the softplus), or step off the point. A function with a true kink there (a norm) has no "
        "second derivative at that point (docs/errors.md: a second derivative through a kink)." + (
            " The zero self-distances of a pairwise distance matrix, left out by np.where(np.eye(n, dtype=bool), "
            "c, r) or np.triu(r, 1), warn too although they are zero for every x: leave them out with a boolean "
            "index, r[~np.eye(n, dtype=bool)], or overwrite them first, np.fill_diagonal(r, c), and nothing is "
            "said." if any(w in what for w in ("norm", "hypot", "sum of squares")) else "")), KinkWarning)


_COMPLEX_SCALARS = (complex, np.complex128, np.complex64, np.clongdouble)


def complex_into_real(dest, value) -> bool:
    """Whether writing ``value`` into array ``dest`` casts complex numbers to a real dtype (NumPy's
    ComplexWarning: the imaginary part is dropped)."""
    tv = type(value)
    if tv in _COMPLEX_SCALARS or (tv is np.ndarray and value.dtype.kind == "c"):
        return dest.dtype.kind not in "cO"
    return False


def warn_complex_cast():
    """NumPy's ComplexWarning, at the user's line (as a plain call shows it), for a cast that
    mutagrad then makes by taking the real part (so NumPy's own does not warn again)."""
    warn_at(user_frame(sys._getframe(1)), "Casting complex values to real discards the imaginary part",
            np.exceptions.ComplexWarning)


def differentiated_function(start=None):
    """``file:line`` of the function the innermost differentiation on this thread's stack runs
    (mutagrad's wrapper's ``fun``), named, for a message raised where no user frame is (a reverse
    pass run by a worker thread); else None."""
    f = start if start is not None else sys._getframe(1)
    while f is not None:
        if f.f_code.co_filename.startswith(_MUTAGRAD_DIR) and "fun" in f.f_code.co_freevars + f.f_code.co_varnames:
            fn = f.f_locals.get("fun")
            code = getattr(fn, "__code__", None)
            if code is not None:
                return (f"{code.co_filename}:{code.co_firstlineno} (in the derivative of "
                        f"{getattr(fn, '__qualname__', code.co_name)}, computed in this thread)")
        f = f.f_back
    return None


def user_line_outside_rules(start=None) -> str:
    """``user_line`` of the user's code that called into mutagrad, past a rule of the user's it
    runs inside (a primitive called in its own reverse rule: the call that is differentiated)."""
    frame = user_frame(start if start is not None else sys._getframe(1))
    checked = _rule_wrapper(frame)
    if checked is not None:
        frame = user_frame(checked) or frame
    return user_line(frame) if frame is not None else "<unknown location>"


def _rule_wrapper(frame):
    """The frame of mutagrad's wrapper (registry's checked rule or pullback) that runs the user's
    rule ``frame`` is in, a few calls deep; else None."""
    f, depth = frame, 0
    while f is not None and depth < 8:
        if f.f_globals.get("__name__") == "mutagrad.registry" and f.f_code.co_name in ("checked", "pullback"):
            return f
        f, depth = f.f_back, depth + 1
    return None


def _users_rule(frame):
    """"reverse" or "forward" where the user's ``frame`` runs inside a rule (or pullback) the user
    registered; else None."""
    f = _rule_wrapper(frame)
    if f is None:
        return None
    return "forward" if "frule" in f.f_code.co_qualname else "reverse"


class SpecificHint(str):
    """An ``extra`` for :func:`escape_error` that is the whole fix (the generic advice on buffers does not apply)."""


def escape_error(what: str, cls=TracerEscapeError, extra: str = "", integer=None,
                 specific=False, where=None, subject="x") -> DifferentiationError:
    """The error for a traced value turned into plain values by ``what``; ``integer``: the
    integer (or boolean) dtype it is converted to, by a write into an array of that dtype;
    ``specific``: ``extra`` is the fix (a function to call or write instead), and the advice
    on buffers does not apply; ``where``: the place to name where no user frame is on the stack;
    ``subject``: the value's name in the user's code, where the fix names it."""
    global _last_escape
    specific = specific or isinstance(extra, SpecificHint)
    frame = user_frame(sys._getframe(1))
    line = user_line(frame) if frame is not None else where or "<unknown location>"
    rule = _users_rule(frame)
    if rule is not None:
        # (a conversion in a rule that a higher derivative differentiates: stop_gradient or value there
        # would drop that derivative silently)
        specific = True
        # (a differentiated counterpart the fix names, mutagrad.scipy.linalg.lu_solve, stays: regress80)
        extra = (str(extra) if extra and "mutagrad." in str(extra) else "") + (
                 f" This line is in a {rule} rule, which a higher derivative differentiates again: compute "
                 "with np.* functions, operators and methods on its arguments (never np.asarray, float, "
                 ".item() or mg.stop_gradient / mg.value of them, which would drop that derivative); or, for "
                 "forward over reverse (mg.jvp of mg.grad, mg.hessian of an array output), register the forward "
                 "rule too (@mg.frule), which the forward level then uses.") + (
                 " A buffer the rule makes from a plain array (np.zeros_like(b) of a constant b, np.zeros(n)) is "
                 "plain and cannot hold the traced values: make it from the cotangent or tangent "
                 "(np.zeros_like(g)), or with mnp.zeros_like(b) (import mutagrad.numpy as mnp)."
                 if "plain NumPy array" in what or cls.__name__ == "WriteToPlainArrayError" else "")
    if specific:
        body = (f"this would turn a traced value into a plain number or array and silently drop its "
                f"derivative.{extra}" + ("" if rule is not None else
                                         f" (For a value meant as a constant: mg.stop_gradient({subject}).)"))
    elif integer is not None:
        kind = f"np.{np.dtype(integer)}" if integer is not True else "int"
        body = (f"the array's dtype is {'integer' if integer is True else np.dtype(integer)}, so NumPy would "
                "truncate the traced floating-point values, silently dropping their derivative. If the "
                f"truncation is meant, convert explicitly: x.astype({kind}) (differentiated: its derivative is "
                "zero) or mg.stop_gradient(x); if the array should carry the derivative, give it a "
                "floating-point dtype (mnp.zeros(...), or np.zeros_like(x) of a traced x; import "
                "mutagrad.numpy as mnp)." + extra)
    else:
        body = ("this would turn a traced value into a plain number or array and silently drop its "
                "derivative. If the value is an intended constant, use mg.stop_gradient(x) (or mg.value(x) for "
                "a read-only plain view). If you are filling a buffer, create it with mnp.zeros(...)/"
                "mnp.empty(...) (mnp.ones, mnp.eye, mnp.full...), or np.zeros_like(x) of a traced x, instead of "
                "np.zeros(...), so that it can "
                "hold traced values (np.zeros_like of a plain array, such as one the function closes over, is "
                "plain too: mnp.zeros_like(a) is not); build an array from traced values with mnp.array([...]) or np.stack (import "
                "mutagrad.numpy as mnp)." + extra)
    err = cls(f"{what} at {line}: {body}")
    _last_escape = (err, frame, None if frame is None else frame.f_lineno)
    if frame is not None and issubclass(cls, TracerEscapeError):
        f = sys._getframe(1)
        while f is not None and f is not frame and (f.f_code.co_filename.startswith(_MUTAGRAD_DIR) or (
                f.f_globals.get("__name__") or "").startswith("numpy.")):
            f = f.f_back
        if f is frame:  # (only NumPy's code between the user's line and mutagrad's: see caught_by_the_program)
            err._at_user_line = user_line(frame)
    return err


def _statement_at(frame):
    """The AST of the simple statement the user's ``frame`` is executing (a line of a
    one-line ``for`` or of ``a; b``, or all lines of one that spans several), from the
    source of its file and the position of its current instruction; None when the
    source cannot be read."""
    if frame is None or _frame_is_internal(frame):  # (converted by NumPy's or SciPy's Python code)
        return None
    code = frame.f_code
    line, _, col, _ = _position(frame) or (None, None, None, None)
    if line is None:
        line, col = frame.f_lineno, None
    tree = _file_tree(code.co_filename)
    if tree is None:
        src = linecache.getline(code.co_filename, line).strip()  # (a file that no longer parses: this line)
        try:
            tree, line, col = parse(src), 1, None
        except (SyntaxError, ValueError):
            return None
    best = None
    for node in _index_of(tree)[2].get(line, ()):
        if not isinstance(node, ast.stmt) or isinstance(node, _COMPOUND):
            continue
        if not node.lineno <= line <= (node.end_lineno or node.lineno):
            continue
        if col is not None and node.lineno == line == node.end_lineno and not (
                node.col_offset <= col < (node.end_col_offset or col + 1)):
            continue  # (another statement of the same line)
        if best is None or node.lineno >= best.lineno:
            best = node
    return best


_TREES: dict = {}  # file name -> (linecache's lines, its source, its AST): a loop that prints parses its file once
_PARSE_LOCK = threading.Lock()


def parse(source):
    """``ast.parse(source)``, one thread at a time: CPython 3.11's conversion of the tree to Python objects keeps
    its recursion depth per interpreter, and two threads parsing at once (worker threads' errors, each naming
    its line) raised SystemError "AST constructor recursion depth mismatch" (test_threads_shared, in CI)."""
    with _PARSE_LOCK:
        return ast.parse(source)


def _file_tree(filename):
    """The AST of the file (cached while its source is unchanged), or None; indexed (_INDEXES)."""
    lines = linecache.getlines(filename)
    hit = _TREES.get(filename)
    if hit is not None and hit[0] is lines:  # (linecache's own list, while it holds the file: unchanged)
        return hit[2]
    source = "".join(lines)
    if hit is not None and hit[1] == source:
        _TREES[filename] = (lines, source, hit[2])
        return hit[2]
    try:
        tree = parse(source)
    except (SyntaxError, ValueError):
        return None
    if len(_TREES) > 64:
        _TREES.clear()
        _INDEXES.clear()
    _TREES[filename] = (lines, source, tree)
    _INDEXES[id(tree)] = _index(tree)
    return tree


def _index(tree):
    """(tree, {(node type, lineno, end_lineno, col_offset, end_col_offset): the first such node of
    ast.walk's}, {line: the simple statements spanning it, in ast.walk's order}): a file's nodes by
    position, found in one walk (a lookup per conversion, a loop's, instead of a walk of the file)."""
    at, lines = {}, {}
    for node in ast.walk(tree):
        lineno = getattr(node, "lineno", None)
        if lineno is None:
            continue
        at.setdefault((type(node), lineno, node.end_lineno, node.col_offset, node.end_col_offset), node)
        if isinstance(node, ast.stmt) and not isinstance(node, _COMPOUND):
            for line in range(lineno, (node.end_lineno or lineno) + 1):
                lines.setdefault(line, []).append(node)
    return tree, at, lines


_INDEXES: dict = {}  # id(a cached file's AST) -> _index of it (made with the tree: _file_tree)


def _index_of(tree):
    """The index of a cached file's tree (_file_tree), else of ``tree`` made now (one line's, parsed
    where the file no longer parses)."""
    index = _INDEXES.get(id(tree))
    return index if index is not None and index[0] is tree else _index(tree)


def storing_into_subscript(start=None) -> bool:
    """Whether the user's innermost frame is executing ``a[i] = v`` (NumPy converting v for
    a plain array ``a``: ``int(v)`` for an integer array)."""
    frame = user_frame(start if start is not None else sys._getframe(1))
    if frame is None:
        return False
    code = frame.f_code.co_code
    return 0 <= frame.f_lasti < len(code) and dis.opname[code[frame.f_lasti]] == "STORE_SUBSCR"


def _position(frame):
    """(line, end line, column, end column) of ``frame``'s current instruction, or None."""
    try:
        return next(itertools.islice(frame.f_code.co_positions(), frame.f_lasti // 2, None))
    except (AttributeError, StopIteration, ValueError):
        return None


def compared_in_a_test(frame, convert) -> bool:
    """Whether the call the user's ``frame`` is executing is the conversion ``convert`` (``float`` or ``int``,
    called by that name, or "item", a method ``.item()``) of the traced value, whose number goes into the
    condition of an ``if``, ``while``, ``assert`` or conditional expression and nowhere else: an operand of a
    comparison (``if float(err) < tol: break``), also through the builtins ``abs``, ``min``, ``max`` and
    ``round`` or ``math.fabs`` (``if abs(float(r)) < tol``), or an argument of ``math.isclose``, ``math.isnan``,
    ``math.isinf`` or ``math.isfinite`` that is the test itself (under ``not``, ``and``, ``or``): a test, which
    the traced value takes as it is. Those names must be Python's own where the frame runs, and a name compared
    with the number must not be an object of a class of the program (whose comparison could keep the number);
    another call there, a C method converting inside (``vals.extend(map(float, x)) is None``), keeps the
    numbers: no."""
    call = call_at(frame)
    if call is None:
        return False
    fn = call.func
    if convert == "item":
        if type(fn) is not ast.Attribute or fn.attr != "item":
            return False
    elif type(fn) is not ast.Name or _resolved(frame, fn) is not convert:
        return False
    tree = _file_tree(frame.f_code.co_filename)

    def tests(call):
        ways = _tests_of(tree, call)
        return [ways] if ways else _tests_of_name(tree, call)

    places = _per_node(_COMPARED, tree, call, tests)
    # (the static answer: for each place the number is read, each way it reaches a test there, the wrappers it
    # passes and the other operands; every place must have one)
    return bool(places) and all(any(
        all(_resolved(frame, w) is want for w, want in wrappers) and all(_plain_operand(frame, o) for o in others)
        for wrappers, others in ways) for ways in places)


def _tests_of_name(tree, call):
    """The ways, for each read of the name that ``call``'s result is assigned to (``err = float(np.max(r))``),
    in which the read reaches a test alone or is printed (:func:`_printed`): a list per read (see
    :func:`_tests_of`), or [] where one read goes elsewhere (``h *= (tol / err) ** 0.2``: a derivative the
    conversion would lose), the name is not a local of a function, or the function reads its names
    dynamically (the chromatography tester: ``while err > tol:`` after it)."""
    stmt = next((n for n in ast.walk(tree) if type(n) in (ast.Assign, ast.AnnAssign) and n.value is call), None)
    targets = [] if stmt is None else stmt.targets if type(stmt) is ast.Assign else [stmt.target]
    if len(targets) != 1 or type(targets[0]) is not ast.Name:
        return []
    name = targets[0].id
    scope = None
    for n in ast.walk(tree):  # (the innermost function holding the call)
        if type(n) in (ast.FunctionDef, ast.AsyncFunctionDef) and n.lineno <= call.lineno <= n.end_lineno and (
                scope is None or n.lineno >= scope.lineno):
            scope = n
    if scope is None:
        return []
    found = []
    for n in ast.walk(scope):
        if type(n) in (ast.Global, ast.Nonlocal) and name in n.names:
            return []
        if (type(n) is ast.Name and n.id in _DYNAMIC_READS) or (type(n) is ast.Attribute and n.attr in _DYNAMIC_READS):
            return []  # (eval("err"), locals()["err"], sys._getframe().f_locals: reads no search sees; regress106)
        if type(n) is ast.Name and n.id == name and type(n.ctx) is ast.Load:
            ways = _tests_of(scope, n) or _printed(scope, n)
            if not ways:
                return []
            found.append(ways)
    return found


_DYNAMIC_READS = frozenset(("eval", "exec", "locals", "vars", "globals", "_getframe", "f_locals", "currentframe"))


def _printed(scope, node):
    """[a way] where ``node`` is read only to be printed: an argument of ``print`` (to the screen: no ``file=``),
    alone or as a field of an f-string that is one (an f-string kept, or written to a file, can be read back
    as a number: regress106)."""
    for n in ast.walk(scope):
        if type(n) is ast.Call and type(n.func) is ast.Name and n.func.id == "print" and all(
                k.arg in ("sep", "end", "flush") for k in n.keywords) and any(
                a is node or (type(a) is ast.JoinedStr and any(
                    type(v) is ast.FormattedValue and v.value is node for v in a.values)) for a in n.args):
            return [([(n.func, builtins.print)], [])]
    return []


def in_a_test(frame) -> bool:
    """Whether the call the user's ``frame`` is executing lies in the condition of an ``if``, ``while``,
    ``assert``, conditional expression or comprehension (for a message: see :func:`compared_in_a_test`)."""
    call = call_at(frame)
    tree = _file_tree(frame.f_code.co_filename) if call is not None else None
    return tree is not None and any(any(sub is call for sub in ast.walk(t)) for t in _tests_around(tree, call))


def _tests_around(tree, call):
    """The conditions of ``tree`` (an ``if``'s, ``while``'s, ``assert``'s, conditional expression's,
    comprehension's ``if`` or a ``case``'s guard) whose lines hold ``call``'s first line."""
    return [t for node in ast.walk(tree) for t in (node.ifs if type(node) is ast.comprehension
                                                   else [node.guard] if type(node) is ast.match_case
                                                   else [getattr(node, "test", None)])
            if isinstance(t, ast.expr) and t.lineno <= call.lineno <= (t.end_lineno or t.lineno)]


TEST_HINT = SpecificHint(
    " The number goes into this test other than as an operand of a comparison with a number, an array or a "
    "constant: compare the traced value itself (`if abs(r) < tol:`, `if np.isclose(x, c):`, `if x[0] * s > 1:` "
    "work on traced values: control flow on values is allowed), or convert it as such an operand "
    "(`if abs(float(r)) < tol:`, through abs, min, max, round or math.fabs, or `math.isclose(float(a), b)` as "
    "the test).")


_COMPARED: dict = {}  # (id of a file's AST, id of a call in it) -> (the call, _tests_of's answer)
# calls whose result is a plain number made of their arguments' (the conversion's number passes through them to a
# comparison), and predicates whose result is the test's
_PASSING = {"abs": builtins.abs, "min": builtins.min, "max": builtins.max, "round": builtins.round,
            "math.fabs": math.fabs}
_TEST_PREDICATES = {"math.isclose": math.isclose, "math.isnan": math.isnan, "math.isinf": math.isinf,
                    "math.isfinite": math.isfinite}


def _tests_of(tree, call):
    """The ways ``call``'s result reaches a test of ``tree`` alone (see :func:`compared_in_a_test`): a list of
    (the wrapping calls' func nodes with the functions they must name, the other operands of its comparison)."""
    ways = []
    for test in _tests_around(tree, call):
        for sub in ast.walk(test):
            if isinstance(sub, ast.Compare):
                operands = [sub.left, *sub.comparators]
                for k, op in enumerate(operands):
                    way = _passes(op, call)
                    if way is not None:
                        ways.append((way[0], way[1] + operands[:k] + operands[k + 1:]))
        tops = [test]
        while tops:  # (the test itself, under not / and / or)
            t = tops.pop()
            if isinstance(t, ast.BoolOp):
                tops.extend(t.values)
            elif isinstance(t, ast.UnaryOp) and isinstance(t.op, ast.Not):
                tops.append(t.operand)
            elif isinstance(t, ast.Call) and (name := ast.unparse(t.func)) in _TEST_PREDICATES and (
                    not t.keywords or name == "math.isclose"):  # (isclose's rel_tol=, abs_tol=)
                for k, a in enumerate(t.args):
                    way = _passes(a, call)
                    if way is not None:
                        ways.append(([(t.func, _TEST_PREDICATES[name])] + way[0], way[1] + t.args[:k] + t.args[k + 1:]))
    return ways


def _passes(node, call):
    """(the wrapping calls of _PASSING (func node, the function it must name), their other arguments) through
    which ``node`` is made of ``call``'s result, or None where it is not."""
    if node is call:
        return [], []
    if isinstance(node, ast.Call) and (name := ast.unparse(node.func)) in _PASSING and (
            not node.keywords or name == "round"):  # (round's ndigits=)
        for k, a in enumerate(node.args):
            inner = _passes(a, call)
            if inner is not None:
                return [(node.func, _PASSING[name])] + inner[0], inner[1] + node.args[:k] + node.args[k + 1:]
    return None


def _resolved(frame, node):
    """What the name (or ``module.name``) ``node`` refers to in ``frame``, without running any code of the
    program (None if it cannot be told)."""
    if type(node) is ast.Name:
        return frame.f_locals.get(node.id, frame.f_globals.get(node.id, frame.f_builtins.get(node.id)))
    if type(node) is ast.Attribute and type(node.value) is ast.Name:
        base = _resolved(frame, node.value)
        if isinstance(base, types.ModuleType):
            return base.__dict__.get(node.attr)
    return None


_PLAIN_TYPES = (numbers.Number, np.generic, np.ndarray, str, bytes, type(None))


def _plain_operand(frame, node) -> bool:
    """Whether an operand compared with the converted number cannot keep it: a constant, or a name whose value is
    a number, an array, a string or None (an object of the program's class may define a comparison that stores
    its operand); other expressions are taken as they come."""
    return type(node) is not ast.Name or isinstance(_resolved(frame, node), _PLAIN_TYPES)


def call_at(frame, kind=ast.Call):
    """The ``ast.Call`` (``kind``: an ``ast.BinOp``...) the user's ``frame`` is executing (found from
    the position of its current instruction, in any statement, a ``for`` or ``with`` header too), or None."""
    if frame is None or _frame_is_internal(frame):
        return None
    pos = _position(frame)
    if pos is None or None in pos:
        return None
    tree = _file_tree(frame.f_code.co_filename)
    if tree is None:
        return None
    return _index_of(tree)[1].get((kind, *pos))


def loop_control_test(frame) -> bool:
    """Whether the comparison the user's ``frame`` is at is a loop's control: the test of a ``while``, or of an
    ``if`` whose body only breaks or continues (a Newton loop's ``if xn == x: break`` at convergence, a pair skip
    ``if x[i] == x[j]: continue``), not a guard that picks a value. False where the source cannot be read."""
    node = call_at(frame, ast.Compare)
    if node is None:
        return False
    tree = _file_tree(frame.f_code.co_filename)

    def controls(node):
        for n in ast.walk(tree):
            if type(n) in (ast.While, ast.If) and any(m is node for m in ast.walk(n.test)):
                return type(n) is ast.While or all(type(b) in (ast.Break, ast.Continue, ast.Pass) for b in n.body)
        return False

    return _per_node(_LOOP_TESTS, tree, node, controls)


_LOOP_TESTS: dict = {}  # (id(tree), id(compare)) -> (compare, whether it is a loop's control)


def _per_node(cache, tree, node, compute):
    """``compute(node)`` for an AST ``node`` of a file's ``tree``, remembered in ``cache`` by their ids (the node
    kept beside its answer, so that an id reused by another tree's node is told apart; at most 1024 kept)."""
    key = (id(tree), id(node))
    hit = cache.get(key)
    if hit is None or hit[0] is not node:
        if len(cache) > 1024:
            cache.clear()
        hit = cache[key] = (node, compute(node))
    return hit[1]


_COMPOUND = (ast.For, ast.AsyncFor, ast.While, ast.If, ast.With, ast.AsyncWith, ast.Try, ast.FunctionDef,
             ast.AsyncFunctionDef, ast.ClassDef, ast.Match) + ((ast.TryStar,) if hasattr(ast, "TryStar") else ())


def plain_write_target(start=None):
    """The text of the array written by the statement ``start`` (the frame that asked
    for the conversion) is executing, if ``start`` is the user's and the statement is an
    assignment into a subscript (``g[i] = x``, ``g[1:] += x``, ``g.flat[0] = x``, also
    within tuple targets): NumPy converts the value there, and an escape error is then
    about that write. None otherwise (or when the source cannot be read)."""
    frame = start if start is not None else sys._getframe(1)
    stmt = _statement_at(frame)
    if stmt is None or _at_a_call(frame):  # (a call on the right-hand side converts: np.array([...]))
        return None
    targets = list(stmt.targets) if type(stmt) is ast.Assign else [stmt.target] if type(stmt) in (
        ast.AugAssign, ast.AnnAssign) else []  # (a copy: the tree is cached)
    found = set()
    pos = _position(frame)
    while targets:
        t = targets.pop()
        if type(t) in (ast.Tuple, ast.List):
            targets.extend(t.elts)
        elif type(t) is ast.Starred:
            targets.append(t.value)
        elif type(t) is ast.Subscript:
            if pos == (t.lineno, t.end_lineno, t.col_offset, t.end_col_offset):  # (the one the instruction
                return ast.unparse(t.value)  # stores into, of several: `w[:], z[:] = ...`)
            found.add(ast.unparse(t.value))
    return found.pop() if len(found) == 1 else None


_WRITING_CALLS = {"copyto", "at", "put", "place", "putmask", "fill_diagonal", "put_along_axis"}


def plain_call_target(frame):
    """The text of the array a NumPy call the user's ``frame`` is executing writes into: its
    ``out=`` argument, the receiver of ``a.fill(v)``/``a.sort()``, the first argument of
    np.copyto, ufunc.at, np.put...; None otherwise."""
    call = call_at(frame)
    if call is None:
        return None
    for kw in call.keywords:
        if kw.arg == "out":
            return ast.unparse(kw.value)
    func = call.func
    name = func.attr if type(func) is ast.Attribute else func.id if type(func) is ast.Name else None
    if name in ("fill", "sort") and type(func) is ast.Attribute:
        return ast.unparse(func.value)
    if name in _WRITING_CALLS and call.args:
        return ast.unparse(call.args[0])
    return None


# What a frame is executing, from its current instruction: C code it called (NumPy's shuffle,
# a scalar's operator) calls back into mutagrad with no Python frame of its own.
_CALL_OPS = frozenset(code for name, code in dis.opmap.items() if name.startswith("CALL") or name == "PRECALL")
_STORE_OPS = frozenset(dis.opmap[name] for name in ("STORE_SUBSCR", "STORE_SLICE") if name in dis.opmap)
_BINARY_OP = dis.opmap.get("BINARY_OP")
_OPERATOR_ARGS = {}  # the operator's symbol -> the BINARY_OP arguments of it and of its in-place form
for _i, (_name, _symbol) in enumerate(getattr(dis, "_nb_ops", ())):
    _OPERATOR_ARGS.setdefault(_symbol.rstrip("=") if _name.startswith("NB_INPLACE") else _symbol, set()).add(_i)


def _at_a_call(frame) -> bool:
    """Whether ``frame`` is at a call instruction (not at the store or the augmented
    operator of an assignment)."""
    return frame.f_code.co_code[frame.f_lasti] in _CALL_OPS


def at_a_store(frame) -> bool:
    """Whether ``frame`` is at a subscript store (``x[i] = v``), not in a C function it
    called that writes (np.random.shuffle)."""
    return frame.f_code.co_code[frame.f_lasti] in _STORE_OPS


def at_an_operator(frame, symbol) -> bool:
    """Whether ``frame`` is at the binary operator ``symbol`` (``"**"``: ``**`` or ``**=``), or
    calling it as a function: ``operator.mul(a, b)``, ``a.__mul__(b)``."""
    code, i = frame.f_code.co_code, frame.f_lasti
    if code[i] == _BINARY_OP:
        return code[i + 1] in _OPERATOR_ARGS.get(symbol, ())
    names = _OPERATOR_NAMES.get(symbol)
    if names is None or code[i] not in _CALL_OPS:
        return False
    node = call_at(frame)
    if node is None:
        return False
    if type(node.func) is ast.Attribute and node.func.attr in names[1]:  # (a.__mul__(b): the scalar's own)
        return True
    obj = _called(node, frame)
    return obj is not None and any(obj is getattr(operator, n, None) for n in names[0])


# the operator module's functions for an operator, and the methods of its dunder forms
_OPERATOR_NAMES = {sym: (names + tuple(f"__{n}__" for n in names), tuple(f"__{n}__" for n in names[:1]))
                   for sym, names in (("+", ("add", "iadd")), ("-", ("sub", "isub")), ("*", ("mul", "imul")),
                                      ("/", ("truediv", "itruediv")), ("**", ("pow", "ipow")))}


_AUG_OPS = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "//", ast.Mod: "%",
            ast.Pow: "**", ast.MatMult: "@", ast.BitAnd: "&", ast.BitOr: "|", ast.BitXor: "^",
            ast.LShift: "<<", ast.RShift: ">>"}


def plain_augassign_target(start=None):
    """(target, operator) when the statement the user's frame ``start`` executes is an
    augmented assignment to a whole array, ``K /= s`` (not ``K[i] /= s``); else None."""
    stmt = _statement_at(start if start is not None else sys._getframe(1))
    if type(stmt) is not ast.AugAssign or type(stmt.target) not in (ast.Name, ast.Attribute):
        return None
    return ast.unparse(stmt.target), _AUG_OPS.get(type(stmt.op), "?")


def method_calls(frame):
    """The names of the methods the statement the user's ``frame`` executes calls (``a.dot(b)``: dot)."""
    stmt = _statement_at(frame)
    if stmt is None:
        return set()
    return {n.func.attr for n in ast.walk(stmt) if type(n) is ast.Call and type(n.func) is ast.Attribute}


# A statement that only prints or logs: print(...) or <logger>.info(...) and the like, whose
# arguments call only functions that keep nothing: formatting, number conversions and pure
# NumPy functions, with no out= (nor a positional out: at most the positional arguments given
# here, counting a method's object as the first). A traced value converted to digits there
# goes to the output and nowhere else, so its derivative cannot be lost.
_PRINT_CALLS = frozenset(("print",))
_LOG_METHODS = frozenset(("debug", "info", "warning", "warn", "error", "critical", "exception", "log"))
_ANY = 99
_SAFE_CALLS = {
    **dict.fromkeys(("format", "float", "int", "complex", "str", "repr", "len", "item", "tolist", "value",
                     "norm", "array2string", "array_str", "array_repr", "asarray", "array", "shape", "ndim",
                     "size", "isclose", "allclose", "float64", "float32", "copy", "reshape", "ravel",
                     "flatten", "join", "dumps", "is_integer", "upper", "lower", "strip", "ljust", "rjust",
                     "center"), _ANY),
    "type": 1, "isinstance": 2, "sorted": 1,
    **dict.fromkeys(("cumsum", "cumprod", "argsort", "diff"), 2),
    "getLogger": 1,  # logging.getLogger(name).info(...)
    # reductions: np.sum(a, axis, dtype, out), a.sum(axis, dtype, out)
    **dict.fromkeys(("sum", "mean", "std", "var", "max", "min", "amax", "amin", "median", "ptp", "any", "all",
                     "argmax", "argmin", "round", "around"), 2),
    # ufuncs: np.sqrt(a, out)
    **dict.fromkeys(("abs", "sqrt", "exp", "log", "log10", "absolute", "isnan", "isinf", "isfinite", "real", "imag",
                     "conj", "sign"), 1),
}
_MODULES = frozenset(("np", "numpy", "math", "mg", "mutagrad", "json", "logging"))


def printing_statement(frame) -> bool:
    """Whether the user's ``frame`` is executing a statement that only prints or logs (see
    above), or is the logging module formatting a record's message (lazy %-arguments). A frame of
    an installed package's code (pint formatting a Quantity's magnitude) counts as the user's frame
    that called it: a printing statement calls no function but the formatting of its values."""
    if frame is not None and frame.f_globals.get("__name__") == "logging" and frame.f_code.co_name == "getMessage":
        return True
    if frame is not None and _installed_package(frame) is not None:
        while frame is not None and (_installed_package(frame) is not None or _frame_is_internal(frame)):
            frame = frame.f_back
    stmt = _statement_at(frame)
    if type(stmt) is not ast.Expr:
        return False
    return _printing_expr(stmt.value, frame)


def _calls_nothing(expr) -> bool:
    """Whether evaluating ``expr`` calls nothing and binds nothing (a test: ``verbose``, ``it % 10 == 0``)."""
    return not any(type(n) in (ast.Call, ast.NamedExpr, ast.Lambda, ast.Yield, ast.YieldFrom, ast.Await)
                   for n in ast.walk(expr))


def _printing_expr(expr, frame) -> bool:
    """Whether the expression statement ``expr`` only prints or logs: a print(...) or logger call, a
    conditional expression of such calls and constants, ``print(...) if verbose else None``, whose test
    calls nothing (the convnet tester), or ``verbose and print(...)`` (regress69)."""
    if type(expr) is ast.IfExp:
        return _calls_nothing(expr.test) and all(type(b) is ast.Constant or _printing_expr(b, frame)
                                                 for b in (expr.body, expr.orelse))
    if type(expr) is ast.BoolOp:  # (verbose and print(...): the tests call nothing, the rest prints)
        return all(_calls_nothing(v) or _printing_expr(v, frame) for v in expr.values) and any(
            not _calls_nothing(v) for v in expr.values)
    if type(expr) is not ast.Call:
        return False
    call = expr
    fn = call.func
    if type(fn) is ast.Name:  # print(...): the builtin (a function of the program's named print may keep values)
        if fn.id not in _PRINT_CALLS or _named(fn.id, frame) is not builtins.print:
            return False
        for k in call.keywords:  # (file=: the standard streams only, a StringIO would keep the digits)
            if k.arg == "file":
                if not any(_static(k.value, frame) is getattr(sys, s, None)
                           for s in ("stdout", "stderr", "__stdout__", "__stderr__")):
                    return False
            elif k.arg not in ("sep", "end", "flush") or not (_constant(k.value) or _a_value(k.value, frame)):
                return False
    elif type(fn) is not ast.Attribute or fn.attr not in _LOG_METHODS or not _a_logger(fn.value, frame):
        return False  # (np.log(..., out=buf), a method of the program's named log, may keep values)
    for node in ast.walk(call):
        if type(node) in (ast.NamedExpr, ast.Lambda, ast.Yield, ast.YieldFrom, ast.Await):
            return False
        if type(node) is ast.Call and node is not call:
            f = node.func
            root = f
            while type(root) is ast.Attribute:
                root = root.value
            name = f.id if type(f) is ast.Name else f.attr if type(f) is ast.Attribute else None
            limit = _SAFE_CALLS.get(name)
            if limit is None or any(k.arg == "out" or not (_constant(k.value) or _a_value(k.value, frame))
                                    for k in node.keywords) or any(type(a) is ast.Starred for a in node.args):
                return False  # (a keyword's callable or formatter, key=kept.append, may keep the value)
            module = type(root) is ast.Name and root.id in _MODULES
            method = type(f) is ast.Attribute and not module
            if method and not _a_value(f.value, frame):
                return False  # (a method of the program's own object named format, join... may keep it)
            if len(node.args) + method > limit:
                return False
    return True


def _constant(node) -> bool:
    """Whether a keyword's value is a constant (``precision=3``, ``sep=", "``, ``axis=-1``)."""
    if type(node) is ast.UnaryOp:
        node = node.operand
    if type(node) is ast.Tuple:
        return all(_constant(e) for e in node.elts)
    return type(node) is ast.Constant


_VALUE_TYPES = (str, bytes, int, float, complex, np.ndarray, np.generic, list, tuple)


def _a_value(node, frame) -> bool:
    """Whether the object whose method a printing statement calls is a value (a string, a number,
    an array, a traced value, or what an expression computes), not an object of the program's,
    whose method named format or copy could keep what it is given."""
    if type(node) in (ast.Constant, ast.JoinedStr, ast.Call, ast.BinOp, ast.UnaryOp):
        return True  # (a call's own checks are the walk's: only the calls above are allowed)
    if type(node) is ast.Subscript:
        return _a_value(node.value, frame)
    obj = _static(node, frame)
    return isinstance(obj, _VALUE_TYPES) or type(obj).__name__ in ("ArrayTracer", "ScalarTracer")


_UNKNOWN = object()


def _named(name, frame):
    """What ``name`` is in ``frame`` (a local, a global or a builtin), or _UNKNOWN."""
    for scope in (frame.f_locals, frame.f_globals, vars(builtins)):
        if name in scope:
            return scope[name]
    return _UNKNOWN


def _static(node, frame):
    """The object an expression of names and attributes stands for, read without running the
    program's code (an object's own attributes and modules' only: no property is called), or
    _UNKNOWN."""
    if type(node) is ast.Name:
        return _named(node.id, frame)
    if type(node) is ast.Attribute:
        base = _static(node.value, frame)
        if base is _UNKNOWN:
            return _UNKNOWN
        if type(base) is type(sys):
            return getattr(base, node.attr, _UNKNOWN)
        try:
            v = inspect.getattr_static(base, node.attr)  # (an instance's own, a class's, a slot's descriptor)
        except AttributeError:
            return _UNKNOWN
        if type(v) is types.MemberDescriptorType:  # (a slot: read in C)
            try:
                return v.__get__(base, type(base))
            except AttributeError:
                return _UNKNOWN
        if not hasattr(type(v), "__get__"):  # (plain data; a property would run the program's code)
            return v
    return _UNKNOWN


def _a_logger(node, frame) -> bool:
    """Whether the object whose method a statement calls (``node``) is one that only writes what it
    is given: a logger of the logging module (or loguru's), the logging or warnings module, or
    ``logging.getLogger(...)`` itself."""
    if type(node) is ast.Call:  # logging.getLogger(name): a logger of the logging module's own class
        import logging

        if _called(node, frame) is not logging.getLogger or node.keywords or len(node.args) > 1:
            return False
        if node.args:
            name = node.args[0]
            name = name.value if type(name) is ast.Constant else _static(name, frame)
            if not (name is None or type(name) is str):
                return False
            return type(logging.getLogger(name)).__module__ == "logging"  # (not one of setLoggerClass's)
        return type(logging.getLogger()).__module__ == "logging"
    obj = _static(node, frame)
    if obj is _UNKNOWN:
        return False
    if type(obj) is type(sys):
        return obj.__name__ in ("logging", "warnings")
    mod = type(obj).__module__ or ""
    return mod == "logging" or mod.startswith("loguru")


_PREDICATES = (math.isnan, math.isinf, math.isfinite, cmath.isnan, cmath.isinf, cmath.isfinite)


def _called(node, frame):
    """The function the call ``node`` names, looked up in ``frame`` without running code
    (``_static``), or None."""
    obj = _static(node.func, frame)
    return None if obj is _UNKNOWN else obj


def predicate_call(frame) -> bool:
    """Whether the user's ``frame`` is calling ``math.isnan``, ``math.isinf``, ``math.isfinite`` or
    ``math.isclose`` (which convert their arguments with float(); cmath's with complex()) on the value being
    converted: a yes/no answer about the value, no derivative to lose, as bool(x) and
    comparisons are. Found from the position of the current instruction in the file's
    AST; the called name is looked up in the frame, never evaluated."""
    node = call_at(frame)
    if node is None or len(node.args) not in (1, 2):
        return False
    obj = _called(node, frame)
    if obj is math.isclose or obj is cmath.isclose:  # (isclose(a, b, rel_tol=...): yes or no too)
        return len(node.args) == 2
    return len(node.args) == 1 and any(obj is p for p in _PREDICATES)


# NumPy functions whose results are indices, counts or booleans: converting a list of traced values
# for them loses no derivative (np.argmax([abs(r[k]) for r in rows]): a pivot search)
_INDEX_VALUED = frozenset(id(f) for f in (
    np.argmax, np.argmin, np.argsort, np.argpartition, np.argwhere, np.nonzero, np.flatnonzero, np.count_nonzero,
    np.searchsorted, np.digitize, np.lexsort, np.isnan, np.isinf, np.isfinite, np.isposinf, np.isneginf, np.signbit,
    np.any, np.all, np.isclose, np.allclose, np.array_equal, np.array_equiv))


def index_valued_call(frame) -> bool:
    """Whether the user's code (the first user frame from ``frame``) is calling one of NumPy's
    functions whose results are indices, counts or booleans (``_INDEX_VALUED``): NumPy converting
    a list of traced values for it loses no derivative. The called name is looked up in the frame,
    never evaluated."""
    frame = user_frame(frame)
    node = call_at(frame)
    if node is None:
        return False
    obj = _called(node, frame)
    return id(obj) in _INDEX_VALUED or (getattr(obj, "__name__", None) in _SCIPY_INDEX_VALUED and (
        getattr(obj, "__module__", None) or "").startswith("scipy.linalg"))


_SCIPY_INDEX_VALUED = frozenset(("issymmetric", "ishermitian", "bandwidth"))  # (scipy.linalg's: yes/no, two ints)


def print_hint(frame) -> str:
    """PRINT_HINT, or, where the source of the user's line cannot be read (exec'd code, python -c),
    why a print there is refused too."""
    user = user_frame(frame)
    if user is not None and not linecache.getlines(user.f_code.co_filename):
        return (" The source of this line cannot be read (code given to exec, python -c), so a statement that "
                "only prints cannot be told from one that keeps the digits: format mg.value(x) (a plain "
                "read-only view of its value), or run the code from a file.")
    stmt = _statement_at(user) if user is not None else None
    if stmt is not None and any(type(n) is ast.Call and type(n.func) is ast.Name and n.func.id == "print"
                                and any(k.arg == "file" for k in n.keywords) for n in ast.walk(stmt)):
        # (regress70: the advice to print in the print call, which it already is, to a log file)
        return (" A print(..., file=...) to anything but sys.stdout or sys.stderr (a log file, a buffer) keeps the "
                "digits, which a program may read back without their derivative: format mg.value(x) (a plain "
                "read-only view of its value) there.")
    return PRINT_HINT


PRINT_HINT = (" To print or log it, do it in the print(...) or logger call itself, or format mg.value(x) "
              "(a plain read-only view of its value).")

_DEFERRED = [None]  # an escape error C code would have mangled: raised when the function returns


def defer_escape(err):
    if _DEFERRED[0] is None:
        _DEFERRED[0] = err


def take_deferred():
    err, _DEFERRED[0] = _DEFERRED[0], None
    return err


def note_escape(err):
    """Note ``err``, about to be raised for a conversion at the user's line, as escape_error notes its
    errors: NumPy's C code may replace it with its own (a ValueError), and replaced_error gives it back."""
    global _last_escape
    frame = user_frame(sys._getframe(1))
    _last_escape = (err, frame, None if frame is None else frame.f_lineno)
    return err


def forget_escape():
    global _last_escape
    _last_escape = None
    _DEFERRED[0] = None
    _READONLY_VIEW_MADE[0] = False
    _STRIDED_VIEW_MADE[0] = False


def _user_entry(exc):
    """The traceback entry of the user's code that ``exc`` passed through last (C and Cython
    frames come after it), or None."""
    tb, user = exc.__traceback__, None
    while tb is not None:
        if not _frame_is_internal(tb.tb_frame):
            user = tb
        tb = tb.tb_next
    return user


def _where(exc) -> str:
    """The user's line ``exc`` passed through last: the line of the traceback entry, not the
    frame's current one (an ``except`` clause that did not match it, or a ``finally`` block,
    runs after the raise)."""
    user = _user_entry(exc)
    if user is None:
        return "<unknown location>"
    filename = user.tb_frame.f_code.co_filename
    src = linecache.getline(filename, user.tb_lineno).strip()
    where = f"{filename}:{user.tb_lineno}"
    return f"{where}: `{src}`" if src else where


_READONLY_VIEW_MADE = [False]  # an integer view of a traced array was handed out (rules.shape.view)
_STRIDED_VIEW_MADE = [False]  # NumPy's as_strided was handed a traced constant's read-only memory


def note_strided_view():
    _STRIDED_VIEW_MADE[0] = True


def note_readonly_view(v):
    _READONLY_VIEW_MADE[0] = True


def _traced_out(exc):
    """``(method, out)`` of the call on the user's line that ``exc`` left whose ``out=`` argument
    is a traced array or a view of one (``rng.random(out=b[1])``: ('random', 'b[1]'); both None
    where only the call's bytecode tells, without the line's source); else None."""
    from .core import Tracer

    hit = _user_entry(exc)
    if hit is None:
        return None
    frame = hit.tb_frame
    source = linecache.getline(frame.f_code.co_filename, hit.tb_lineno).strip()
    if not source:  # (python -c, stdin, exec of a string): the call's bytecode names the argument
        name = _out_name_in_bytecode(frame.f_code, hit.tb_lasti)
        v = None if name is None else frame.f_locals.get(name, frame.f_globals.get(name))
        return (None, None) if isinstance(v, Tracer) else None
    try:
        tree = parse(source)
    except SyntaxError:  # (a statement over several lines)
        return None
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        method = node.func.attr if isinstance(node.func, ast.Attribute) else None
        params = _generator_parameters(method)
        starred = next((i for i, a in enumerate(node.args) if isinstance(a, ast.Starred)), len(node.args))
        # (positional arguments named by the signature up to a *args, whose items' places are unknown: from
        # there on they are kept as written)
        named = [(params[i] if i < len(params) and i < starred else None, a) for i, a in enumerate(node.args)] + [
            (k.arg, k.value) for k in node.keywords if k.arg is not None]
        for arg, value in named:
            if arg != "out":
                continue
            # (a name, or a view of one: buf[1], self.buf, buf.T, buf.reshape(2, 2), bufs[0])
            if _reaches_tracer(value, frame):
                rng = ast.unparse(node.func.value) if isinstance(node.func, ast.Attribute) else "rng"
                # (the call's other arguments, by name where the method's signature gives one; not size=,
                # which the advice gives as the buffer's shape)
                positional = [ast.unparse(a) for k, a in named[:len(node.args)] if k is None]
                others = positional + [f"{k}={ast.unparse(a)}" for k, a in named
                                       if k is not None and k not in ("out", "size")] + [
                    f"**{ast.unparse(k.value)}" for k in node.keywords if k.arg is None]
                return method, ast.unparse(value), rng, others, _buffer_order(value, frame)
    return None


def _buffer_order(node, frame):
    """"C" or "F" for the buffer of ``out=`` (``node``, an expression of the user's ``frame``) where it is
    one contiguous block in that order, read off the traced array's value through the expression's
    names, ``.T`` and constant subscripts (nothing is called); None otherwise (unknown)."""
    from .core import bottom

    b = bottom(_item_at(node, frame))
    if not isinstance(b, np.ndarray):
        return None
    return "C" if b.flags.c_contiguous else "F" if b.flags.f_contiguous else None


def _reaches_tracer(node, frame) -> bool:
    """Whether the expression, or one it is a view of or a method of (``bufs[0]`` of ``bufs[0].T``,
    ``buf`` of ``buf.reshape(2, 2)``), reads a traced array (as _item_at reads it: a list's or a dict's
    item), or an object whose attributes hold one (``self``)."""
    from .core import Tracer

    while True:
        item = _item_at(node, frame)
        if isinstance(item, Tracer) or _holds_tracer(item):
            return True
        if isinstance(node, (ast.Attribute, ast.Subscript)):
            node = node.value
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            node = node.func.value
        else:
            return False


def _item_at(node, frame):
    """What an expression of names, ``.T``, instance attributes and constant subscripts (of arrays, lists,
    tuples, dicts of constant keys) gives, read without calling anything of the program's; None otherwise."""
    from .core import Tracer, bottom

    if isinstance(node, ast.Name):
        return frame.f_locals.get(node.id, frame.f_globals.get(node.id))
    if isinstance(node, ast.Attribute):
        owner = _item_at(node.value, frame)
        if owner is None:
            return None
        if node.attr == "T" and isinstance(owner, (np.ndarray, Tracer)):
            b = bottom(owner)
            return b.T if isinstance(b, np.ndarray) else None
        try:
            d = object.__getattribute__(owner, "__dict__")  # (an instance attribute only: no property is run)
        except Exception:  # noqa: BLE001 (no __dict__, or one the class makes raise)
            return None
        return d.get(node.attr) if isinstance(d, dict) else None
    if isinstance(node, ast.Subscript):
        owner = _item_at(node.value, frame)
        key = node.slice.value if isinstance(node.slice, ast.Constant) and type(owner) is dict else (
            _constant_index(node.slice))
        if owner is None or (key is None and not (isinstance(node.slice, ast.Constant) and node.slice.value is None)):
            return None
        if isinstance(owner, (Tracer, np.ndarray)):
            owner = bottom(owner)
        elif type(owner) not in (list, tuple, dict):
            return None
        try:
            return owner[key]
        except (IndexError, KeyError, TypeError, ValueError):
            return None
    return None


def _constant_index(node):
    """A subscript of constants (ints, slices of ints, ``...``, None, tuples of them), or None."""
    if isinstance(node, ast.Constant) and (type(node.value) is int or node.value is Ellipsis or node.value is None):
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) and isinstance(node.operand, ast.Constant) and (
            type(node.operand.value) is int):
        return -node.operand.value
    if isinstance(node, ast.Slice):
        parts = [None if p is None else _constant_index(p) for p in (node.lower, node.upper, node.step)]
        if any(p is None and q is not None for p, q in zip(parts, (node.lower, node.upper, node.step))):
            return None
        return slice(*parts)
    if isinstance(node, ast.Tuple):
        items = [_constant_index(e) for e in node.elts]
        return None if any(i is None and not (isinstance(e, ast.Constant) and e.value is None)
                           for i, e in zip(items, node.elts)) else tuple(items)
    return None


def _generator_parameters(method):
    """The parameters of NumPy's ``Generator.<method>`` after self, in order, or () where unknown."""
    fn = getattr(np.random.Generator, method, None) if method else None
    try:
        return list(inspect.signature(fn).parameters)[1:] if fn is not None else ()
    except (TypeError, ValueError):
        return ()


def _holds_tracer(obj) -> bool:
    """Whether an object's attributes hold a traced array (``self.buf``), one level deep."""
    from .core import Tracer

    if isinstance(obj, Tracer) or (getattr(type(obj), "__module__", None) or "").startswith("numpy"):
        return False
    try:
        d = object.__getattribute__(obj, "__dict__")
    except Exception:  # noqa: BLE001 (no __dict__, or one the class makes raise)
        return False
    return isinstance(d, dict) and any(isinstance(v, Tracer) for v in d.values())


_NAME_LOADS = frozenset(("LOAD_FAST", "LOAD_NAME", "LOAD_GLOBAL", "LOAD_DEREF", "LOAD_CLASSDEREF"))


def _out_name_in_bytecode(code, lasti):
    """The name of the variable passed as ``out=`` to the call at instruction ``lasti`` of
    ``code``, when the keyword arguments are plain names; else None."""
    ins = [i for i in dis.get_instructions(code) if i.offset <= lasti]
    kw = next((k for k in range(len(ins) - 1, -1, -1) if ins[k].opname == "KW_NAMES"), None)
    if kw is None or "CALL" not in "".join(i.opname for i in ins[kw:]):
        return None
    names = code.co_consts[ins[kw].arg] if isinstance(ins[kw].arg, int) else ins[kw].argval
    if not isinstance(names, tuple) or "out" not in names:
        return None
    back = len(names) - names.index("out")  # the keyword values are loaded last, in order
    load = ins[kw - back] if kw - back >= 0 else None
    if load is None or any(i.opname not in _NAME_LOADS for i in ins[kw - len(names):kw]):
        return None
    return load.argval


def _last_entry(exc):
    """The innermost traceback entry of ``exc`` (where it was raised in Python), or None."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    return tb


def _raised_in_library(exc) -> bool:
    """Whether ``exc`` was raised in NumPy's or SciPy's Python code."""
    tb = _last_entry(exc)
    mod = "" if tb is None else tb.tb_frame.f_globals.get("__name__", "") or ""
    return mod.partition(".")[0] in ("numpy", "scipy")


def _line_reads_tracer(tb) -> bool:
    """Whether the line of traceback entry ``tb`` reads a name holding a traced value (in a
    container one level deep, or an object's attribute); True where its names cannot be told."""
    from .core import Tracer

    frame = tb.tb_frame
    try:
        ins = list(dis.get_instructions(frame.f_code))
        at = next((i for i in ins if i.offset == tb.tb_lasti), None)  # (the failing call: its lines)
        lo = hi = tb.tb_lineno
        if at is not None and at.positions is not None and at.positions.lineno is not None:
            lo, hi = at.positions.lineno, at.positions.end_lineno or at.positions.lineno
        loads = [i.argval for i in ins if i.opname in _NAME_LOADS and i.positions is not None
                 and i.positions.lineno is not None and lo <= i.positions.lineno <= hi]
    except Exception:  # noqa: BLE001 (code dis cannot read: as before, the frame's values decide)
        return True
    if not loads:
        return True
    scopes = (frame.f_locals, frame.f_globals)
    for name in loads:
        for scope in scopes:
            if name in scope:
                v = scope[name]
                items = v.values() if type(v) is dict else v if type(v) in (tuple, list) else (v,)
                if any(isinstance(x, Tracer) for x in items) or _holds_tracer(v):
                    return True
                break
    return False


def _in_mutagrad(tb) -> bool:
    """Whether the traceback entry ``tb`` is in mutagrad's own code."""
    return tb is not None and (tb.tb_frame.f_globals.get("__name__", "") or "").partition(".")[0] == "mutagrad"


def _innermost_holds_tracer(exc) -> bool:
    """Whether the innermost Python frame ``exc`` left holds a traced value (in a
    local variable, or one level into a dict, tuple or list of them)."""
    tb = _last_entry(exc)
    return tb is not None and _frame_holds_tracer(tb.tb_frame)


def _frame_holds_tracer(frame, attributes=False) -> bool:
    from .core import Tracer

    for v in frame.f_locals.values():
        items = v.values() if type(v) is dict else v if type(v) in (tuple, list) else (v,)
        if any(isinstance(x, Tracer) for x in items) or (attributes and _holds_tracer(v)):
            return True
    return False


def _raised_by_c_at_the_users_line(exc) -> bool:
    """Whether ``exc`` was raised by C code the user's line called (no Python frame after the
    user's), whose frame holds a traced value."""
    user = _user_entry(exc)
    return user is not None and user.tb_next is None and _frame_holds_tracer(user.tb_frame)


def _library_holds_tracer(exc) -> bool:
    """Whether a library frame ``exc`` passed through after the user's last line holds a traced
    value (also as an attribute of a local object, ``self.values``)."""
    user = _user_entry(exc)
    tb = user.tb_next if user is not None else exc.__traceback__
    while tb is not None:
        if _frame_holds_tracer(tb.tb_frame, attributes=True):
            return True
        tb = tb.tb_next
    return False


def _raised_at(exc, frame):
    """The innermost traceback entry of ``exc`` if its frame is ``frame``: the
    exception came from C code called on that frame's line; else None."""
    tb = exc.__traceback__
    if tb is None:
        return None
    while tb.tb_next is not None:
        tb = tb.tb_next
    return tb if tb.tb_frame is frame else None


def _raised_below(exc, frame):
    """The traceback entry of ``exc`` in ``frame`` if every entry after it is library code
    (NumPy's, SciPy's: MINPACK's error after it printed mutagrad's); else None."""
    tb, hit = exc.__traceback__, None
    while tb is not None:
        if tb.tb_frame is frame:
            hit = tb
        elif hit is not None and not _frame_is_internal(tb.tb_frame):
            hit = None
        tb = tb.tb_next
    return hit


# NumPy's Generator.shuffle / np.random.shuffle take an object that is not an
# ndarray for a Python sequence and swap ``x[i], x[j] = x[j], x[i]``, warning that
# rows that are views come out duplicated. A traced array gives that swap copies of
# its rows (core._shuffling), so the shuffle is NumPy's own and the warning is
# silenced; where the swap cannot be recognised (no source for the user's line),
# a row written into its own array from C raises (core._swap_from_c).
_SHUFFLE_WARNING = r"you are shuffling a '(ArrayTracer|ScalarTracer)' object"
_shuffle_filter = [None]


def ensure_shuffle_filter():
    """Put the filter that silences NumPy's shuffle warning for traced arrays first
    (again, if the user's own filters were put before it since)."""
    filters = warnings.filters
    if not filters or filters[0] is not _shuffle_filter[0]:
        # (put in place as warnings.filterwarnings does, but without its reset of every module's
        # record of warnings shown: a warning shown once under "default" showed again after each call)
        entry = _shuffle_filter[0] or ("ignore", re.compile(_SHUFFLE_WARNING, re.IGNORECASE), UserWarning, None, 0)
        while entry in filters:
            filters.remove(entry)
        filters.insert(0, entry)
        _shuffle_filter[0] = entry


class UnsupportedInputError(NoRuleError, ValueError):
    """Inputs for which NumPy's result is meaningless and mutagrad has no rule (np.interp of
    sample points that are not increasing); a ValueError too, as a bad argument."""


class LockedArrayWriteError(AliasingError, ValueError):
    """A plain write into a caller's array passed as an argument (read-only to plain code
    during the call); a ValueError too, as NumPy's read-only error it replaces."""


class ReadOnlyWriteError(MutationError, ValueError):
    """A write of the function's into a read-only array: an argument read-only when passed, or a
    read-only view (np.diagonal, np.broadcast_to...); a ValueError too, as NumPy's read-only error."""

    plain_too = True


_UNBOUND = re.compile(r"descriptor '(\w+)' (?:for|requires a) 'numpy\.(\w+)' (?:objects doesn't apply to a|object but "
                      r"received a) '(?:Array|Scalar)Tracer'")
_READONLY_MESSAGES = ("is read-only", "underlying array is read-only", "base is read-only")


def _raised_at_a_store(tb) -> bool:
    """Whether traceback entry ``tb`` is a subscript store (``b[0] = x[:2]``): a sequence of the wrong
    size into an element is NumPy's error in a plain call too (a traced scalar there goes through
    float() and is named by mutagrad)."""
    return tb is not None and tb.tb_frame.f_code.co_code[tb.tb_lasti] in _STORE_OPS


def _plain_conversion_error(exc) -> bool:
    """Whether ``exc`` is NumPy's own TypeError for float()/int() of an array of one or more
    dimensions, which a traced array raises as a plain one does (a sequence into one element:
    NumPy's ValueError then is a plain call's too)."""
    return type(exc) is TypeError and str(exc) == "only 0-dimensional arrays can be converted to Python scalars"


def readonly_error(exc: BaseException, names, outer_locked=None, joined=False):
    """The clear error for NumPy's read-only ValueError ``exc`` leaving the user's
    function, or None. Raised by mutagrad's own write (through a read-only view:
    np.diagonal, np.broadcast_to...): the same ValueError, naming the user's line.
    Raised by a plain write of the user's while ``names`` (the caller's arrays passed
    as arguments, read-only to plain code during the call: see core.Level.lock) are
    locked: AliasingError, a ValueError too. ``outer_locked``: (name, outer name), an argument of
    this differentiation that an outer one locked: its caller's array, reached another way. ``joined``:
    an argument of this differentiation is read-only because one another thread runs locked it."""
    if type(exc) is not ValueError or not (str(exc).endswith(_READONLY_MESSAGES) or (
            names and str(exc) == "cannot set WRITEABLE flag to True of this array")):
        # (x.flags.writeable = True of a plain view of a locked array: NumPy asks the array it views)
        return None
    tb, ours = exc.__traceback__, False
    while tb is not None:  # raised past the user's last line by mutagrad's code, or by NumPy's
        if not _frame_is_internal(tb.tb_frame):
            ours = False
        elif (tb.tb_frame.f_globals.get("__name__", "") or "").startswith("mutagrad"):
            ours = True
        tb = tb.tb_next
    if ours and outer_locked is not None:
        return LockedArrayWriteError(
            f"a write at {_where(exc)} into {outer_locked[0]}, a read-only array ({exc}): it is the caller's "
            f"array of an outer differentiation's {outer_locked[1]}, passed to this inner one through another "
            "reference (a global, an attribute), and read-only while the outer one runs: the write would "
            "change values the outer derivative reads without its knowing (a plain call can write it). Pass "
            "the outer function's argument itself to the inner differentiation (mg.grad(h)(x)), or a copy "
            "(mg.grad(h)(X.copy())) if the array should keep its values.")
    if ours and joined:
        return LockedArrayWriteError(
            f"a write at {_where(exc)} into a read-only array ({exc}): an argument that a differentiation "
            "running in another thread was given too, and holds read-only until it ends (its derivative reads "
            "the values; a plain call can write it). Let that differentiation finish first (future.result()), "
            "or pass this one a copy (x.copy()) and copy the result back.")
    if ours:
        return ReadOnlyWriteError(
            f"{exc}: a write at {_where(exc)} into a read-only array: an argument that was read-only when "
            "passed (a plain call raises the same; pass a writable copy, x.copy()), or a read-only view "
            "(np.diagonal, np.broadcast_to, sliding_window_view, mg.value and .imag of a real array give "
            "read-only views, as in NumPy; NumPy's ufunc.at writes into them anyway, mutagrad does not; a write "
            "through a broadcast result of np.broadcast_arrays, which NumPy still makes with a DeprecationWarning, "
            "is refused with a MutationError): write into the "
            "array it views (x[idx] = ..., np.fill_diagonal), or into a copy of the view.")
    if _STRIDED_VIEW_MADE[0]:
        return MutationError(
            f"a write at {_where(exc)} into a read-only array ({exc}), after NumPy's "
            "np.lib.stride_tricks.as_strided was given a traced array: it views that array's values as a "
            "plain read-only array, and a write through it would not be recorded. Write through the traced "
            "array itself (a diagonal: np.fill_diagonal(a, v) or a[np.diag_indices(n)] = v), or make the "
            "view with mnp.as_strided (import mutagrad.numpy as mnp), which is differentiated (writes "
            "through a view whose elements do not overlap).")
    if not names:
        return None
    return LockedArrayWriteError(
        f"a plain NumPy write at {_where(exc)} went to a read-only array ({exc}). While mutagrad "
        f"differentiates, the arrays passed to the function ({', '.join(names)}) are read-only except "
        "through the argument the function received: a write into one of them through another "
        "reference (an attribute, a dict or list entry, a global) would change values the derivative "
        "reads without its knowing. Write through the argument itself, or pass a copy "
        "(mg.grad(f)(x.copy())) if the other reference should keep its own values. If the array is "
        "not one of those: np.asarray(x) of a traced constant and mg.value(x) are read-only views "
        "(np.array(x) is a writable copy; mnp.asarray(x), import mutagrad.numpy as mnp, is x itself, as "
        "NumPy's asarray of an array, whose writes are recorded), and an array read-only in your program "
        "raises the same ValueError in a plain call.")


def shuffle_error(where):
    return NoRuleError(
        f"shuffling a traced array in place (rng.shuffle / np.random.shuffle) at {where}: NumPy "
        "shuffles an object that is not an ndarray by swapping its rows from C, which duplicates "
        "rows that are views; mutagrad gives the swap copies where it recognises the call on the "
        "line (rng.shuffle(x) along axis 0, with the line's source available). Shuffle through an index instead: "
        "x[...] = x[rng.permutation(len(x))], or along an axis, "
        "x[...] = np.take(x, rng.permutation(x.shape[axis]), axis=axis) (the same permutation "
        "as rng.shuffle draws).")


# Python's own protocol errors, which a NumPy scalar (array) raises in a plain call as well (iter(s), len(s))
_PROTOCOL_ERROR = re.compile(r"is not iterable|has no len\(\)|not reversible|is not subscriptable|is not callable"
                             r"|cannot be interpreted as an integer"
                             r"|returned NotImplemented from __array_ufunc__"  # (a duck array's refusal: NumPy's)
                             r"|no implementation found for '")  # (a wrapper's __array_function__ refusal: NumPy's)


_DUNDER_OPERATORS = {"__mul__": "x * y", "__add__": "x + y", "__sub__": "x - y", "__truediv__": "x / y",
                     "__matmul__": "x @ y", "__pow__": "x ** y", "__neg__": "-x", "__getitem__": "x[i]",
                     "__setitem__": "x[i] = v", "__iadd__": "x += y", "__imul__": "x *= y", "__isub__": "x -= y",
                     "__itruediv__": "x /= y", "__floordiv__": "x // y", "__mod__": "x % y", "__abs__": "abs(x)",
                     "__lt__": "x < y", "__le__": "x <= y", "__gt__": "x > y", "__ge__": "x >= y", "__eq__": "x == y",
                     "__ne__": "x != y", "__len__": "len(x)"}


def error_note(exc: BaseException):
    """A note for an error of NumPy's that a traced value may have caused without mutagrad seeing
    it (the error stays NumPy's: a plain call may raise it too), or None."""
    if type(exc) is ValueError and str(exc) == "object __array__ method not producing an array":
        # np.sum(obj) of a user's class whose __array__ returns the traced array it wraps
        return (f"mutagrad: if that __array__ method (at {_where(exc)}: np.asarray, np.sum... of an object) returns "
                "a traced array (an object wrapping one), NumPy refuses it: a traced array is no ndarray. Pass the "
                "traced array itself (obj.data), or give the class NumPy's protocols forwarding to it "
                "(numpy.lib.mixins.NDArrayOperatorsMixin with __array_ufunc__, __array_function__); NumPy's "
                "operators and ufuncs with such an object among traced arrays (x + obj) take its traced array.")
    if type(exc) is TypeError and "ArrayTracer" in str(exc) and (
            "returned NotImplemented from __array_ufunc__" in str(exc) or "no implementation found for" in str(exc)):
        # a user's array class whose protocol method declined the traced array (a plain call may work)
        return (f"mutagrad: at {_where(exc)}, a class's __array_ufunc__ or __array_function__ declined a traced array. "
                "If a plain call works, its check refuses the traced array's type, mutagrad's ArrayTracer, which "
                "is no np.ndarray subclass (isinstance(x, np.ndarray) is True, type(x) is np.ndarray is not): "
                "test with isinstance there, or unwrap the object first (pass its array) so that NumPy computes "
                "with the traced array directly.")
    return None


def _array_api_mix_error(exc):
    """SciPy's array-API dispatch (SCIPY_ARRAY_API=1) refusing a traced array beside plain NumPy arrays: a
    traced array's namespace is mutagrad.numpy (__array_namespace__), another than NumPy's (regress114)."""
    from .core import _calling_scipy

    tb = exc.__traceback__
    while tb.tb_next is not None:
        tb = tb.tb_next
    got = _calling_scipy(tb.tb_frame)
    name = f"scipy.{got[1]}.{got[0]}" if got is not None and got[1] else "a SciPy function"
    twin = ""
    if got is not None and got[2]:
        twin = f"use mutagrad.scipy.{got[1]}.{got[0]} if docs/coverage.md lists it, or "
    return TracedTypeError(
        f"{name} at {_where(exc)} refused a traced array beside plain NumPy arrays (SciPy's \"{exc}\"): with "
        "SCIPY_ARRAY_API=1, SciPy dispatches on the arrays' namespaces, and a traced array's is mutagrad.numpy "
        f"(for array API code), not NumPy. To differentiate it, {twin}write the computation with NumPy "
        "operations on the traced values (which are differentiated), or run without SCIPY_ARRAY_API=1.")


def replaced_error(exc: BaseException):
    """The clear error to raise instead of ``exc``, an exception leaving the
    user's function, or None: the escape error NumPy replaced by its own
    (``exc`` left the line where the escape error was raised), or NumPy's
    shuffle of a traced array. Forgets the last escape error."""
    global _last_escape
    last, _last_escape = _last_escape, None
    if type(exc) is SystemError and isinstance(exc.__context__, DifferentiationError):
        # C code that called back into Python (SciPy's brentq converting the callback's traced
        # result) and went on with mutagrad's error set: that error is the one to see
        return exc.__context__
    if isinstance(exc.__context__, DifferentiationError) and type(exc) in (ValueError, TypeError) and (
            _raised_in_library(exc)):
        # library code that caught mutagrad's error and raised its own (scipy.sparse's constructors:
        # "unrecognized csr_array constructor input"): mutagrad's is the one to see
        return exc.__context__
    if type(exc) is TypeError and str(exc).startswith("Multiple namespaces for array inputs") and (
            _raised_in_library(exc)):
        return _array_api_mix_error(exc)
    if isinstance(exc, DifferentiationError) or exc.__context__ is not None:
        return None
    if isinstance(exc, UserWarning) and "shuffling a '" in str(exc) or (
            type(exc) is NotImplementedError and "only supported on ndarray objects" in str(exc)):
        return shuffle_error(_where(exc))
    m = _UNBOUND.match(str(exc)) if type(exc) is TypeError else None
    if m is not None:  # np.ndarray.sum(x): CPython's check of the method's class, before any hook
        name = m.group(1)
        fix = f"x.{name}(...)"
        if name == "__array__":  # (a conversion to a plain array, which x.__array__() is too)
            return TracedTypeError(
                f"np.{m.group(2)}.__array__(x) (a conversion to a plain array) at {_where(exc)}: a traced array "
                "is an array already; use it as it is (np.* functions, operators and methods take it), or "
                "mg.value(x) for a read-only plain view of its values, which carries no derivative.")
        if name.startswith("__") and name.endswith("__"):
            op = _DUNDER_OPERATORS.get(name)
            fix = f"the operator ({op})" if op else f"x.{name}(...)"
        elif hasattr(np, name):
            fix += f", or np.{name}(x, ...)"
        return TracedTypeError(
            f"np.{m.group(2)}.{name}(x) (a method called through the class) at {_where(exc)} does not "
            f"accept a traced array, which is not an instance of the C class. Call it on the array: {fix} "
            f"(a lambda, lambda a: a.{name}(...), where a function is passed: map, sorted's key).")
    if type(exc) is TypeError and "bytes-like object is required, not '" in str(exc) and (
            "Tracer'" in str(exc)):  # memoryview(x), np.frombuffer(x), struct, hashlib...
        return TracerEscapeError(
            f"the raw memory of a traced array was asked for (the buffer protocol: memoryview, "
            f"np.frombuffer, bytes-like use) at {_where(exc)}: raw bytes carry no derivative. For the "
            "values as a read-only plain array use mg.value(x) (np.array(mg.value(x)) for a writable "
            "copy); to view the values as another floating-point dtype (complex as pairs of floats), "
            "x.view(dtype) is differentiated.")
    if type(exc) is TypeError and re.search(r"must be (?:a )?numpy\.ndarray, not (?:Array|Scalar)Tracer", str(exc)):
        # C code that accepts only NumPy's own arrays (scipy.sparse.linalg's SuperLU.solve, Cython
        # typed arguments): it never asks for the values, it refuses the traced array's type
        return TracedTypeError(
            f"a function implemented in C at {_where(exc)} accepts only plain NumPy arrays ({exc}): it "
            "cannot be differentiated through. Use NumPy's (or mutagrad.scipy's) functions, which are "
            "differentiated (for a sparse factorization, mutagrad.scipy.sparse.linalg.splu(A).solve or "
            "factorized(A)), or pass mg.value(x), a read-only plain view of the values, if its result is a "
            "constant.")
    if type(exc) is TypeError and str(exc) == "No matching signature found" and _library_holds_tracer(exc):
        # a Cython fused-type function (scipy.interpolate's RegularGridInterpolator, interpn) given
        # a traced array: no signature matches its type
        tb = _last_entry(exc)
        lib = (tb.tb_frame.f_globals.get("__name__", "") or "") if tb is not None else ""
        return TracedTypeError(
            f"a function implemented in Cython ({lib or 'a library'}) was given a traced array at "
            f"{_where(exc)} ({exc}): it accepts only plain NumPy arrays, so it cannot be differentiated "
            "through. Write the computation with NumPy operations on the traced values, which are "
            "differentiated (an interpolation on a grid: the cell index from np.floor of the plain "
            "coordinates, the weights from their fractional parts, and a weighted sum of the traced "
            "values gathered at the cell's corners), or pass mg.value(x), a read-only plain view of the "
            "values, if its result is a constant.")
    if type(exc) is TypeError and str(exc) in ("'out' must be an array", "output must be an array") and (
            _raised_by_c_at_the_users_line(exc)):
        # a method of a plain array given a traced out= (M.dot(a, out=buf), M.take(i, out=buf)):
        # its C code accepts only NumPy's own arrays as out
        return TracedTypeError(
            f"a method of a plain array was given a traced array as out= at {_where(exc)} (NumPy: {exc}): "
            "its C code writes only into plain NumPy arrays. Call the NumPy function instead, which "
            "is differentiated and takes a traced out=: np.dot(M, a, out=buf) for M.dot(a, out=buf) "
            "(likewise np.take, np.cumsum, np.cumprod, np.round, np.choose, np.compress, np.trace, "
            "np.clip), or assign the result: buf[...] = M.dot(a).")
    out = _traced_out(exc) if type(exc) is ValueError and str(exc).startswith("Supplied output array must be") else None
    if out is not None:
        # NumPy's random Generator filling out= (rng.standard_normal(out=buf)): its C code writes
        # only into NumPy's own arrays, and a traced array (or a view of one) is not one
        if out[0] is None:  # (no source to read the call from)
            fix = ("the same method with size=buf.shape and its other arguments, in place of out=buf: "
                   "buf[...] = rng.standard_normal(size=buf.shape, dtype=...)")
        else:
            method, buf, rng, others, order = out
            # (out= fills the buffer in memory order: a Fortran-ordered one takes the draws through its .T)
            def draws(into):
                return f"{into}[...] = {rng}.{method}({', '.join([*others, f'size={into}.shape'])})"

            fix = draws(f"{buf}.T" if order == "F" else buf)
            if order is None:  # (its layout not read off the expression: out= fills it in memory order)
                fix = f"{fix} if the buffer is C-contiguous, or {draws(f'({buf}).T')} if it is in Fortran order"
        return TracedTypeError(
            f"a NumPy random generator was asked to fill a traced array with out= at {_where(exc)}: its C code "
            "writes only into plain NumPy arrays, and a write into a traced array must be recorded. Assign the "
            f"draws instead, {fix} (the same numbers: out= fills the buffer in the order size= returns them, "
            "with the same dtype= and method=).")
    if last is not None:
        tb = _raised_at(exc, last[1]) or _raised_below(exc, last[1])
        if tb is not None and tb.tb_lineno == last[2]:
            return last[0]  # NumPy's (SciPy's) replacement of the escape error raised on that line
    if type(exc) is TypeError and str(exc) == "'ScalarTracer' object does not support item assignment":
        # (D[i, j][...] = v: D[i, j] is a scalar, a NumPy float64 in a plain call, which raises too)
        err = TracedTypeError(
            f"item assignment into a traced scalar at {_where(exc)}: an element read as a[i, j] is a scalar, as "
            "NumPy's is ('numpy.float64' object does not support item assignment, in a plain call too). Write "
            "into the array itself: a[i, j] = v.")
        err.plain_too = True
        return err
    if type(exc) is TypeError and ((re.search(r"\b(?:Scalar|Array)Tracer\b", str(exc)) and not _PROTOCOL_ERROR.search(
            str(exc))) or (
            str(exc).endswith("is not JSON serializable") and _library_holds_tracer(exc)) or (
            str(exc) == "object supporting the buffer API required" and _raised_by_c_at_the_users_line(exc)
            and _line_reads_tracer(_user_entry(exc)))):
        # C code that checks its argument's type and refuses a traced value without asking it anything
        # (decimal.Decimal(s), datetime.timedelta(seconds=s), float.hex(s), hashlib.sha1(x); json.dumps(s),
        # whose encoder names the type np.float64)
        return TracedTypeError(
            f"a traced value was refused by its type at {_where(exc)} ({exc}): code implemented in C takes "
            "plain Python or NumPy numbers there, and would take the value without its derivative. Compute "
            "with NumPy operations on the traced value, which are differentiated, or pass mg.value(x) where "
            "its plain value is meant and no derivative through it.")
    if type(exc) is ValueError and str(exc) == "assignment destination is read-only" and _READONLY_VIEW_MADE[0]:
        return MutationError(
            f"a write into a read-only array at {_where(exc)}. Inside differentiation, x.view(<integer "
            "dtype>) of a constant traced array is a read-only view of its bits: a write through it would "
            "change x unseen. Write the values through x itself (x[i] = ...).")
    if type(exc) is ValueError and str(exc).startswith("setting an array element with a sequence") and (
            not _plain_conversion_error(exc.__context__)) and not _raised_at_a_store(_last_entry(exc)) and (
            _innermost_holds_tracer(exc)) and not _in_mutagrad(_last_entry(exc)) and _line_reads_tracer(
            _last_entry(exc)):
        # (not mutagrad's own write of a plain value, nor a line of plain values in a function that holds
        # traced ones: NumPy's error about the value is the one to see)
        return TracerEscapeError(
            f"a traced value was passed to NumPy at {_where(exc)} in an argument that NumPy converts "
            "itself, without asking mutagrad (a keyword such as initial= of a reduction of a plain array): "
            "its derivative would be lost. Combine it with the result by a traced operation instead "
            "(np.sum(a, initial=s) is s + np.sum(a); np.max(a, initial=s) is np.maximum(np.max(a), s)).")
    return None


# -- `type(x) is np.float64`: a test that sees the tracer's class -------------------------------------------
#
# A tracer's __class__ is the plain value's (isinstance takes the plain call's branch), but type(x) is the
# tracer's own class, and no method of it runs for `type(x) is np.ndarray`: the test takes the other branch
# than a plain call, silently (the pythonic tester). Before a differentiated function runs, its code, the
# functions nested in it and the module-level functions it names (transitively) are searched once for such
# tests against NumPy's array and scalar types or Python's float and complex, and each is warned of.

# code -> (its file, the Compare nodes testing type(...) in it, the global names it loads); the functions
# searched (weakly: neither keeps a program's function or code alive)
_TYPE_TESTS = weakref.WeakKeyDictionary()
_TYPE_CHECKED = weakref.WeakSet()
_TYPE_OPS = (ast.Is, ast.IsNot, ast.Eq, ast.NotEq, ast.In, ast.NotIn)


def _type_tests(code):
    hit = _TYPE_TESTS.get(code)
    if hit is not None and hit[0] == code.co_filename:  # (equal code of another file compares equal)
        return hit[1:]
    names, attrs, uses_type, codes = set(), set(), False, [code]
    while codes:
        c = codes.pop()
        for ins in dis.get_instructions(c):
            if ins.opname in ("LOAD_GLOBAL", "LOAD_NAME"):
                names.add(ins.argval)
                uses_type = uses_type or ins.argval == "type"
            elif ins.opname in ("LOAD_ATTR", "LOAD_METHOD"):
                attrs.add(ins.argval)
        codes.extend(k for k in c.co_consts if type(k) is type(code))
    tests = []
    tree = _file_tree(code.co_filename) if uses_type else None
    if tree is not None:
        last = max((line for _, _, line in code.co_lines() if line is not None), default=code.co_firstlineno)
        inside = [node for node in ast.walk(tree) if code.co_firstlineno <= getattr(node, "lineno", 0) <= last]
        # (t = type(x) ... t is np.ndarray: a name bound to a type(...) call in the function stands for it, and
        # one bound to its name, kind = type(x).__name__, for that)
        kept = {t.id for node in inside if type(node) is ast.Assign and _type_call(node.value, ())
                for t in node.targets if type(t) is ast.Name}
        named = {t.id for node in inside if type(node) is ast.Assign and _type_name(node.value, kept, ())
                 for t in node.targets if type(t) is ast.Name}
        for node in inside:
            if type(node) is ast.Compare and all(type(op) in _TYPE_OPS for op in node.ops):
                operands = (node.left, *node.comparators)
                if any(_type_call(n, kept) or _type_name(n, kept, named) for n in operands):
                    tests.append((node, operands))
            elif type(node) is ast.Call and type(node.func) is ast.Name and node.func.id == "issubclass" and len(
                    node.args) == 2 and _type_call(node.args[0], kept):  # (issubclass(type(x), np.ndarray))
                tests.append((node, node.args[1:]))
            elif type(node) is ast.Subscript and type(node.value) is ast.Name and _type_call(node.slice, kept):
                tests.append((node, (node.value,)))  # (HANDLERS[type(x)]: a table keyed by the exact type)
            elif type(node) is ast.Call and type(node.func) is ast.Attribute and node.func.attr == "get" and type(
                    node.func.value) is ast.Name and node.args and _type_call(node.args[0], kept):
                tests.append((node, (node.func.value,)))  # (HANDLERS.get(type(x), default))
    _TYPE_TESTS[code] = (code.co_filename, tuple(tests), frozenset(names), frozenset(attrs))
    return tuple(tests), frozenset(names), frozenset(attrs)


def _type_call(n, kept) -> bool:
    """``n`` is ``type(x)``, or a name in ``kept`` (bound to one)."""
    return (type(n) is ast.Call and type(n.func) is ast.Name and n.func.id == "type" and len(n.args) == 1) or (
        type(n) is ast.Name and n.id in kept)


def _type_name(n, kept, named) -> bool:
    """``n`` is ``type(x).__name__`` (``__qualname__``, ``__module__``; of a name in ``kept``), or a name in
    ``named`` (bound to one)."""
    return (type(n) is ast.Attribute and n.attr in ("__name__", "__qualname__", "__module__")
            and _type_call(n.value, kept)) or (type(n) is ast.Name and n.id in named)


_NAMES_OF_PLAIN_TYPES = {"ndarray": np.ndarray, "numpy": np.ndarray, "float": float, "complex": complex,
                         **{t.__name__: t for t in (np.float64, np.float32, np.float16, np.complex128, np.complex64,
                                                    np.longdouble, np.clongdouble)}}


def _plain_types_named(node, glob):
    """The NumPy array or scalar types, float or complex, that ``node`` (a name, ``np.float64``, a tuple of
    them) names in the module ``glob``: looked up, nothing run."""
    if type(node) in (ast.Tuple, ast.List, ast.Set):
        return [t for n in node.elts for t in _plain_types_named(n, glob)]
    if type(node) is ast.Constant and type(node.value) is str:  # (type(x).__name__ == "ndarray")
        t = _NAMES_OF_PLAIN_TYPES.get(node.value.rpartition(".")[2])
        return [] if t is None else [t]
    if type(node) is ast.Name:
        v = glob.get(node.id, builtins.__dict__.get(node.id))
        if type(v) is dict:  # (a table keyed by types: HANDLERS[type(x)], type(x) in HANDLERS)
            return [k for k in v if isinstance(k, type) and (issubclass(k, (np.ndarray, np.generic))
                                                             or k in (float, complex))]
    elif type(node) is ast.Attribute and type(node.value) is ast.Name:
        mod = glob.get(node.value.id)
        v = vars(mod).get(node.attr) if isinstance(mod, types.ModuleType) else None
    else:
        return []
    return [v] if isinstance(v, type) and (issubclass(v, (np.ndarray, np.generic)) or v in (float, complex)) else []


def warn_type_tests(fun, args=()) -> None:
    """Warn of each test of ``type(...)`` against np.ndarray, a NumPy scalar type, float or complex in the code
    ``fun`` runs (see above), once per function: its own, the functions it names (module-level, a module's
    attribute, closed over) and the methods of the classes and objects it names or is given in ``args``."""
    f = fun
    while type(f) is functools.partial:
        f = f.func
    todo = []
    if type(f) is types.MethodType:
        todo.append(f.__func__)
        _functions_of(f.__self__, (), todo)
    else:
        _functions_of(f, (), todo)  # (a function, or a callable object: its class's methods, its attributes')
    for a in args:
        _functions_of(a, (), todo)
    seen = set()
    while todo:
        f = todo.pop()
        code = getattr(f, "__code__", None)
        if type(code) is not types.CodeType or code in seen or len(seen) > 64:
            continue
        if f in _TYPE_CHECKED:
            continue
        seen.add(code)
        _TYPE_CHECKED.add(f)
        glob = getattr(f, "__globals__", {})
        if (glob.get("__name__") or "").partition(".")[0] in _INTERNAL_PACKAGES:
            continue
        tests, names, attrs = _type_tests(code)
        for node, operands in tests:
            named = [t for n in operands for t in _plain_types_named(n, glob)]
            if named:
                what = f"np.{named[0].__name__}" if named[0].__module__ == "numpy" else named[0].__name__
                warnings.warn_explicit(
                    f"`{ast.unparse(node)}` tests the exact type of a value: under differentiation a traced "
                    f"value's type is mutagrad's tracer class, not {what}, so the test takes another branch than a "
                    f"plain call takes and the derivative would be another function's. Test isinstance(v, {what}) "
                    "instead, which sees the plain call's class (np.ndarray, the NumPy scalar type, float), or "
                    "np.ndim(v) == 0 for a number; where telling a differentiation from a plain call is the point "
                    "(a cache skipped while differentiating), the other branch is meant.", UserWarning,
                    code.co_filename, node.lineno, module=glob.get("__name__") or "<string>",
                    registry=glob.setdefault("__warningregistry__", {}))
        for n in names:
            _functions_of(glob.get(n), attrs, todo)
        for cell in getattr(f, "__closure__", None) or ():
            try:
                v = cell.cell_contents
            except ValueError:
                continue
            _functions_of(v, attrs, todo)


_NOT_THE_PROGRAMS = _INTERNAL_PACKAGES | _STDLIB | {"builtins"}


def _functions_of(v, attrs, todo, depth=0):
    """Into ``todo``: ``v`` if it is a Python function, else the functions a program's module ``v`` holds under
    the names in ``attrs``, or the methods (properties' getters too) of a program's class ``v`` or of the
    class of a program's object ``v``, and, two levels deep, of what a short list, tuple or dict ``v`` or such
    an object's attributes hold (a model's layers: the regress102 tester)."""
    tv = type(v)
    if tv is types.FunctionType:
        todo.append(v)
        return
    if tv is types.ModuleType:
        if (getattr(v, "__name__", "") or "").partition(".")[0] not in _NOT_THE_PROGRAMS:
            todo.extend(f for f in (vars(v).get(a) for a in attrs) if type(f) is types.FunctionType)
        return
    if tv in (list, tuple, dict):
        if depth < 2 and len(v) <= 64:
            for item in (v.values() if tv is dict else v):
                _functions_of(item, attrs, todo, depth + 1)
        return
    cls = v if issubclass(tv, type) else tv  # (type() only: a proxy's __class__ or __getattr__ runs no code)
    mine = False
    for k in getattr(cls, "__mro__", ()):
        if (getattr(k, "__module__", "") or "").partition(".")[0] in _NOT_THE_PROGRAMS:
            continue
        mine = True
        for d in list(vars(k).values()):
            f = d.fget if type(d) is property else getattr(d, "__func__", d)
            if type(f) is types.FunctionType:
                todo.append(f)
    try:
        own = object.__getattribute__(v, "__dict__") if mine and cls is tv else None
    except AttributeError:
        own = None
    if type(own) is dict and depth < 2 and len(own) <= 64:
        for item in list(own.values()):
            _functions_of(item, attrs, todo, depth + 1)
