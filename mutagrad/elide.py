"""Temporary elision for the operators of traced arrays.

NumPy computes ``a*b + c`` into the buffer of the temporary ``a*b`` when
nothing else refers to it (arrays of 256 KiB and more): a chain of
operations then reuses one buffer that stays in cache, where a new array per
operation streams through memory (1.4x the time of a large RK4 step). NumPy
decides from the operand's reference count, and rules out borrowed
references (an element of an object array that NumPy's object loop hands to
an operator has the count of a temporary) with a C backtrace.

A traced array's operator decides the same from Python, with three facts
that together say "this operand is the value the expression just computed,
and only the interpreter's stack holds it":

* the calling frame is at a binary operator whose operand (right or left)
  was pushed by the instruction that computed it, a binary operator or a
  negation, with nothing but loads, calls and operators in between (the
  bytecode, read once per code object: :func:`producers`);
* the last large result a traced operator returned, called from this frame
  at that instruction, is this very tracer (``Level.last_result``, a weak
  reference);
* its reference count is that of a stack temporary, measured at import on a
  probe with the same call structure (:data:`TEMP_REFS`).

The level then also requires that no pullback reads the operand, that its
memory is its own (no view, no record, no export refers to the array: its
count again) and that the result has its dtype and shape (``tape.process_ew``).
"""
from __future__ import annotations

import dis
import sys
import weakref

ELIDE_BYTES = 256 * 1024  # NumPy's threshold (NPY_MIN_ELIDE_BYTES)

_getrefcount = sys.getrefcount
_BINARY_OP = dis.opmap.get("BINARY_OP")
_UNARY_NEGATIVE = dis.opmap.get("UNARY_NEGATIVE")
_INPLACE = frozenset(i for i, (name, _) in enumerate(getattr(dis, "_nb_ops", ())) if "INPLACE" in name)
# what may stand between an operand's instruction and its operator: instructions that
# only push values computed from others (no jumps, no stack shuffles, no stores)
_PLAIN_OPS = ("LOAD_", "BINARY_OP", "BINARY_SUBSCR", "BINARY_SLICE", "UNARY_", "CALL", "PRECALL",
              "PUSH_NULL", "KW_NAMES", "BUILD_TUPLE", "BUILD_LIST", "BUILD_SLICE", "COMPARE_OP", "NOP")

_CODES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # code -> {offset: producers}


def _produces_a_temporary(ins) -> bool:
    """An instruction whose one pushed value is new: a binary operator (not an
    in-place one, which stores its result) or a negation."""
    if ins.opcode == _BINARY_OP:
        return ins.arg not in _INPLACE
    return ins.opcode == _UNARY_NEGATIVE


def _analyse(instructions, at):
    """(left, right): the offsets of the instructions that pushed the operands of the
    binary operator ``instructions[at]`` if each is a temporary-making one, else None."""
    ins = instructions[at]
    if ins.opcode != _BINARY_OP or ins.arg in _INPLACE or at < 2:
        return None, None
    right = instructions[at - 1]
    # the right operand's instructions: walking back from it, the smallest span that
    # pushes one value net; the left operand's instruction is just before it
    depth = 0
    j = at - 1
    while j >= 1:
        i = instructions[j]
        if not i.opname.startswith(_PLAIN_OPS) or i.is_jump_target:
            return None, None
        try:
            depth += dis.stack_effect(i.opcode, i.arg if i.opcode >= dis.HAVE_ARGUMENT else None, jump=False)
        except ValueError:
            return None, None
        if depth == 1:
            break
        j -= 1
    else:
        return None, None
    left = instructions[j - 1]
    if ins.is_jump_target or left.is_jump_target:
        return None, None
    return (left.offset if _produces_a_temporary(left) else None,
            right.offset if _produces_a_temporary(right) else None)


def producers(code, offset):
    """``_analyse`` of the instruction at ``offset`` of ``code``, cached."""
    try:
        table = _CODES[code]
    except KeyError:
        table = _CODES[code] = {}
    except TypeError:  # (not weakly referable)
        return None, None
    r = table.get(offset)
    if r is None:
        instructions = list(dis.get_instructions(code))
        at = next((k for k, i in enumerate(instructions) if i.offset == offset), None)
        r = table[offset] = (None, None) if at is None else _analyse(instructions, at)
    return r


def _count(x):
    """The reference count of an operator's operand, seen from here (called as
    ``_count(self)`` from the operator's method: the same depth as in :func:`temporary`)."""
    return _getrefcount(x)


class _Probe:
    __slots__ = ("__weakref__",)

    def __mul__(self, other):
        return _count(self), _count(other)

    def __rmul__(self, other):
        return _count(self)


def _calibrate():
    """The count of a stack temporary's reference, as :func:`temporary` sees it, or None
    (elision off) if this interpreter does not tell it apart from a named value."""
    def temp_left():
        return _Probe() * 2

    def temp_right():
        return 2 * _Probe()

    def temp_other():
        return _Probe() * _Probe()

    def named():
        p = _Probe()
        return p * 2, 2 * p, p * p

    counts = {temp_left()[0], temp_right(), temp_other()[1]}
    if len(counts) != 1:
        return None
    n = counts.pop()
    a, b, c = named()
    if min(a[0], b, c[0], c[1]) <= n:
        return None
    return n  # (``temporary(a, ...)`` called as ``temporary(self, ...)``: the same depth)


TEMP_REFS = _calibrate()


def temporary(a, frame, code, side, lv):
    """Whether traced operand ``a`` (at ``side`` 0 = left, 1 = right of the binary
    operator ``frame`` is at) is a stack temporary: see the module's docstring."""
    if TEMP_REFS is None or _getrefcount(a) != TEMP_REFS:
        return False
    last = lv.last_result
    if last is None or last[0] is not code or last[1] != id(frame) or last[3]() is not a:
        return False
    return producers(code, frame.f_lasti)[side] == last[2]


def note_result(r, frame, lv):
    """Remember ``r``, a large result of a traced operator called from ``frame``."""
    lv.last_result = (frame.f_code, id(frame), frame.f_lasti, weakref.ref(r))
