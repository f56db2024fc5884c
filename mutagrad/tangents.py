"""Tangent types and the projection of a cotangent onto its primal.

The vocabulary is ChainRulesCore's: ``NoTangent`` for an argument that is not
differentiable (an index, a shape), ``ZeroTangent`` for a derivative that is
structurally zero, ``NotImplementedTangent`` for one a rule cannot compute.
They live inside rules and on the tape; users of ``grad`` get arrays.
"""
from __future__ import annotations

import weakref

import numpy as np

from .errors import NotImplementedTangentError

__all__ = [
    "AbstractZero",
    "ZeroTangent",
    "NoTangent",
    "NotImplementedTangent",
    "not_implemented",
    "Tangent",
    "Thunk",
    "unbroadcast",
    "project",
    "is_zero",
]

_ndarray = np.ndarray


class AbstractZero:
    """A tangent that is known to be zero; costs nothing to add."""

    __slots__ = ()

    def __add__(self, other):
        return other

    __radd__ = __add__

    def __neg__(self):
        return self

    def __mul__(self, other):
        return self

    __rmul__ = __mul__

    # The rest of the linear arithmetic a rule may do with a zero tangent (0 - y, y - 0, 0 / c,
    # A @ 0, 0.T): NumPy's arrays defer to these (__array_ufunc__ = None) instead of making
    # object arrays of it.
    __array_ufunc__ = None

    def __sub__(self, other):
        return -other

    def __rsub__(self, other):
        return other

    def __truediv__(self, other):
        return self

    def __matmul__(self, other):
        return self

    __rmatmul__ = __matmul__

    def __pos__(self):
        return self

    def conj(self):
        return self

    conjugate = conj
    T = property(conj)
    real = property(conj)
    imag = property(conj)

    def __bool__(self):
        return False

    def __eq__(self, other):
        return type(other) is type(self)

    def __hash__(self):
        return hash(type(self))


class ZeroTangent(AbstractZero):
    """A structural zero: the derivative exists and is zero.

    >>> import mutagrad as mg
    >>> mg.ZeroTangent() + 1.0
    1.0
    """

    __slots__ = ()

    def __repr__(self):
        return "ZeroTangent()"


class NoTangent(AbstractZero):
    """The argument is not differentiable (an index, a shape, a flag).

    >>> import mutagrad as mg
    >>> mg.NoTangent()
    NoTangent()
    """

    __slots__ = ()

    def __repr__(self):
        return "NoTangent()"


class NotImplementedTangent:
    """A derivative the rule does not implement. It poisons what it touches.

    Adding it to anything gives it back: it is never summed away or turned
    into zero. Make one with :func:`not_implemented`.

    >>> import mutagrad as mg
    >>> t = mg.not_implemented("derivative of foo w.r.t. its order")
    >>> (t + 1.0) is t
    True
    """

    __slots__ = ("final", "message", "where")

    def __init__(self, message: str = "", where: str | None = None):
        self.message = message
        self.where = where
        # the rules said there is no derivative (a NoTangent where one is asked for): forward mode is
        # not asked to fill it in (grad's _forward_fill), whose rule would ignore that tangent too
        self.final = False

    def _poison(self, *_):
        return self

    def _times(self, other):
        # times a symbolic zero (the tangent of an argument that has none, in an frule), the plain
        # zeros a user's frule gets for one, or a plain tangent that is zero everywhere (a parameter
        # held fixed inside a traced vector, np.concatenate([theta, [c]])): zero; the derivative
        # that is missing is not asked for
        if isinstance(other, AbstractZero):
            return other
        if is_zero(other) or (type(other) in _PLAIN_NUMBERS and not np.any(other)):
            return ZeroTangent()
        return self

    __add__ = __radd__ = __sub__ = __rsub__ = _poison
    __mul__ = __rmul__ = __matmul__ = __rmatmul__ = _times
    __truediv__ = __rtruediv__ = __neg__ = __pos__ = __abs__ = _poison
    __pow__ = __rpow__ = _poison  # (g ** 2 of a poisoned gradient: it, not Python's bare TypeError)
    __mod__ = __rmod__ = __floordiv__ = __rfloordiv__ = __divmod__ = __rdivmod__ = _poison

    def __array_ufunc__(self, ufunc, method, *args, **kwargs):
        if kwargs.get("out") is not None:  # (writing it into an array: its values are unknown)
            self._as_number()
        return self

    def __array_function__(self, func, types, args, kwargs):
        if kwargs.get("out") is not None or func in _READS_VALUES:
            self._as_number()
        return self

    def _as_number(self, *_, **__):
        # a poisoned derivative used as a number (an optimizer comparing it, np.asarray of it, a
        # truth test, a write or a save of it): say what it is where it is used, not as a TypeError
        # deep in the caller's code, nor as a silently true test or an unwritten array
        raise self._error(NotImplementedTangentError)

    def _error(self, cls):
        where = f" (at {self.where})" if self.where else ""
        return cls(
            f"a derivative that is not implemented was used as a number: {self.message}{where}. If that "
            "argument is a constant read from a traced array (a parameter held fixed inside the parameter "
            "vector, full = np.concatenate([theta, [c]])), the whole array's derivative is poisoned: pass "
            "the argument as mg.stop_gradient(full[2]) where the function takes it, or the constant itself "
            "rather than an element of the array; else differentiate only the arguments the rule supports.")

    __float__ = __int__ = __complex__ = __index__ = __bool__ = __round__ = _as_number
    __lt__ = __le__ = __gt__ = __ge__ = __eq__ = __ne__ = _as_number
    __hash__ = object.__hash__  # (identity, as before: __eq__ above would remove it)
    __array__ = __len__ = __iter__ = __getitem__ = __setitem__ = _as_number
    __abs__ = _poison

    def __format__(self, spec):
        if spec:  # (f"{g:.3f}": digits it does not have)
            self._as_number()
        return repr(self)

    def __getattr__(self, name):
        # (g.astype, g.shape: an ndarray's attribute; an AttributeError too, for getattr(g, n, default))
        if name.startswith("__"):
            raise AttributeError(name)
        raise self._error(NotImplementedTangentAttributeError)

    def __repr__(self):
        # (a refusal records its line where its rule may refuse, Primitive.names_line; strict mode
        # raises at the line for every rule)
        extra = f" at {self.where}" if self.where else (
            "; run under mg.config(strict=True) to raise it at the line it comes from" if self.message else "")
        return f"NotImplementedTangent({self.message!r}{extra})"


def no_tangent_for_active(prim, pos, where):
    """What a user's rule returning ``NoTangent()`` for argument ``pos``, a floating-point value that
    carries a derivative, gives it: not a silent zero (NoTangent says "not differentiable", not
    "zero"), a NotImplementedTangent, which poisons what it reaches and raises in strict mode."""
    t = NotImplementedTangent(
        f"the rule of {prim.name} gives no derivative (mg.NoTangent(), a None partial, or an argument deflinear "
        f"does not transpose) for its argument {pos}, a floating-point value whose derivative is asked for; "
        "return its derivative (mg.ZeroTangent() if it is zero)", where)
    t.final = True
    return t


def _reads_values():
    names = ("copyto", "save", "savez", "savez_compressed", "savetxt", "put", "place", "putmask",
             "fill_diagonal", "put_along_axis", "array_equal", "array_equiv", "allclose")
    return frozenset(getattr(np, n) for n in names if hasattr(np, n))


_READS_VALUES = _reads_values()


class NotImplementedTangentAttributeError(NotImplementedTangentError, AttributeError):
    """An ndarray's attribute asked of a NotImplementedTangent (an AttributeError too, for
    ``getattr(g, name, default)``)."""


def not_implemented(message: str = "") -> NotImplementedTangent:
    """Return a :class:`NotImplementedTangent` carrying ``message``.

    >>> import mutagrad as mg
    >>> mg.not_implemented("no derivative w.r.t. the order").message
    'no derivative w.r.t. the order'
    """
    return NotImplementedTangent(message)


class PartlyNotImplemented:
    """A forward rule's tangent of one output whose derivative is known but at some of its elements:
    ``known``, the tangent (an array of the output's shape; any values at the other elements), ``unknown``,
    a boolean mask of those, and ``poison``, the :class:`NotImplementedTangent` they carry. The forward level
    gives the output the known tangent and poisons the unknown elements only, so that a function that reads
    only the others (``Vh[:k]`` of svd(full_matrices=True)) keeps its derivative, as in reverse mode, where
    the pullback sees the cotangent of the elements read. Rules' own: not public."""

    __slots__ = ("known", "poison", "unknown")

    def __init__(self, known, unknown, poison: NotImplementedTangent):
        self.known, self.unknown, self.poison = known, unknown, poison


class Tangent:
    """A structured tangent for a composite primal (dataclass, namedtuple, object).

    ``Tangent(Point, x=1.0, y=2.0)`` is the tangent of a ``Point``; missing
    fields are zero.

    >>> import mutagrad as mg
    >>> t = mg.Tangent(object, w=2.0)
    >>> t.w, t["w"]
    (2.0, 2.0)
    """

    __slots__ = ("primal_type", "fields")

    def __init__(self, primal_type=object, **fields):
        self.primal_type = primal_type
        self.fields = fields

    def __getattr__(self, name):
        try:
            return object.__getattribute__(self, "fields")[name]
        except KeyError:
            return ZeroTangent()

    def __getitem__(self, name):
        return self.fields.get(name, ZeroTangent())

    def __add__(self, other):
        if isinstance(other, AbstractZero):
            return self
        if isinstance(other, Tangent):
            keys = dict.fromkeys(list(self.fields) + list(other.fields))
            return Tangent(self.primal_type, **{k: self[k] + other[k] for k in keys})
        return NotImplemented

    __radd__ = __add__

    def __repr__(self):
        name = getattr(self.primal_type, "__name__", str(self.primal_type))
        inner = ", ".join(f"{k}={v!r}" for k, v in self.fields.items())
        return f"Tangent({name}, {inner})"


class Thunk:
    """A cotangent computed only if the tape needs it (ChainRules' @thunk)."""

    __slots__ = ("fn",)

    def __init__(self, fn):
        self.fn = fn

    def __call__(self):
        return self.fn()


_PLAIN_NUMBERS = frozenset((_ndarray, float, int, np.float64, np.float32, complex, np.complex128))


def is_zero(t) -> bool:
    """Whether ``t`` is a symbolic zero tangent (or the zeros a user's forward rule gets for one)."""
    if type(t) is _ndarray:
        ref = _INSTANTIATED.get(id(t))
        return ref is not None and ref() is t
    return t is None or isinstance(t, AbstractZero)


_INSTANTIATED: dict = {}  # id -> weak reference: the zero arrays made for symbolic zero tangents


def instantiated_zeros(shape, dtype):
    """Read-only zeros standing for a symbolic zero tangent (``is_zero`` knows them)."""
    z = np.zeros(shape, dtype)
    z.flags.writeable = False
    if len(_INSTANTIATED) > 1024:
        for k in [k for k, r in _INSTANTIATED.items() if r() is None]:
            del _INSTANTIATED[k]
    _INSTANTIATED[id(z)] = weakref.ref(z)
    return z


def unbroadcast(g, shape):
    """Sum ``g`` down to ``shape``: the transpose of broadcasting."""
    gshape = np.shape(g)
    if gshape == tuple(shape):
        return g
    nlead = len(gshape) - len(shape)
    if nlead > 0:
        g = np.sum(g, axis=tuple(range(nlead)))
        gshape = gshape[nlead:]
    elif nlead < 0:
        k = -nlead
        if gshape and all(n == 1 for n in shape[:k]):  # (a value NumPy wrote without its leading 1s:
            return np.reshape(unbroadcast(g, tuple(shape[k:])), shape)  # x[:2] = y[:1, None])
        return np.broadcast_to(g, shape)
    axes = tuple(i for i, n in enumerate(shape) if n == 1 and gshape[i] != 1)
    if axes:
        g = np.sum(g, axis=axes, keepdims=True)
    if np.shape(g) != tuple(shape):
        g = np.broadcast_to(g, shape)
    return g


def project(ct, shape, dtype):
    """Project a cotangent onto a primal of ``shape`` and ``dtype``.

    Sums broadcast dimensions away, drops an imaginary part for a real
    primal and casts to the primal's precision.
    """
    if type(ct) is _ndarray and ct.dtype == dtype and ct.shape == shape:  # (the common case first)
        return ct
    if isinstance(ct, (AbstractZero, NotImplementedTangent)) or ct is None:
        return ct
    if isinstance(ct, Thunk):
        ct = ct()
    try:
        sh = ct.shape  # (a traced array's own: np.shape would dispatch)
    except AttributeError:
        sh = np.shape(ct)
    if sh != tuple(shape):
        ct = unbroadcast(ct, shape)
    ctype = getattr(ct, "dtype", None)
    if ctype is None:
        ct = np.asarray(ct) if not hasattr(ct, "_value") else ct
        ctype = ct.dtype
    if ctype != dtype:
        if ctype.kind == "c" and dtype.kind != "c":
            ct = np.real(ct)
        if dtype.kind in "fc":
            ct = ct.astype(dtype) if hasattr(ct, "astype") else np.asarray(ct, dtype)
    return ct
