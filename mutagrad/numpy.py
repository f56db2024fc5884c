"""``mutagrad.numpy`` (``mnp``): NumPy, plus creation functions that make
traced, writable buffers inside differentiation.

``mnp.zeros(3)`` is a plain ndarray outside differentiation and a traced
array inside it, so ``b = mnp.zeros(3); b[:] = p`` carries p's derivative.
Every other name is NumPy's own (``mnp.sin is np.sin``): traced arrays
dispatch through NumPy's protocols. A function NumPy dispatches on some
arguments only (``np.pad`` on its array, ``np.apply_along_axis`` on ``arr``)
looks at every argument in ``mnp``: ``mnp.pad(plain, 2, constant_values=c)``
with a traced ``c`` is differentiated, where NumPy would convert ``c``.

>>> import mutagrad as mg, mutagrad.numpy as mnp
>>> def f(p):
...     b = mnp.zeros(3)
...     b[:] = p
...     return mnp.sum(b)
>>> mg.grad(f)(1.0)
3.0
"""
from __future__ import annotations

import operator as _operator

import numpy as _np

from .core import Tracer as _Tracer
from .core import active_levels as _active_levels
from .core import bottom as _bottom
from .core import function_dispatch as _function_dispatch
from .core import in_order as _in_order
from .core import layout_satisfies as _layout_satisfies
from .core import lift as _lift
from .core import promotion_operand as _promotion_operand


def _traced(x):
    levels = _active_levels()
    if not levels:
        return x
    if isinstance(x, _np.ndarray) and x.dtype.names is not None:
        from .errors import user_line

        raise TypeError(
            f"a buffer with the structured dtype {x.dtype} at {user_line()}: mutagrad traces arrays of "
            "floating-point or complex numbers, so its fields could not hold derivatives. Make one "
            f"buffer per field instead (u = mnp.zeros(shape); v = mnp.zeros(shape)).")
    return _lift(x, levels)


def zeros(shape, dtype=float, order="C", **kw):
    """Like ``np.zeros``; a traced buffer inside differentiation."""
    return _traced(_np.zeros(shape, dtype, order, **kw))


def ones(shape, dtype=None, order="C", **kw):
    """Like ``np.ones``; a traced buffer inside differentiation."""
    return _traced(_np.ones(shape, dtype, order, **kw))


def empty(shape, dtype=float, order="C", **kw):
    """Like ``np.empty``; a traced buffer inside differentiation."""
    return _traced(_np.empty(shape, dtype, order, **kw))


def full(shape, fill_value, dtype=None, order="C", **kw):
    """Like ``np.full``; ``fill_value`` may be traced."""
    if isinstance(fill_value, _Tracer):
        out = empty(shape, dtype if dtype is not None else fill_value.dtype, order)
        out[...] = fill_value
        return out
    return _traced(_np.full(shape, fill_value, dtype, order, **kw))


def _like(fn, a, dtype, order, subok, shape, *fill, **kw):
    # a traced ``a``: NumPy's function, dispatched (a traced result at a's levels); a plain one: a traced buffer.
    # ``kw``: NumPy's other keywords (device=, which array API code passes: arrayapi2)
    if isinstance(a, _Tracer):
        return fn(a, *fill, dtype=dtype, order=order, subok=subok, shape=shape, **kw)
    return _traced(fn(a, *fill, dtype=dtype, order=order, subok=subok, shape=shape, **kw))


def zeros_like(a, dtype=None, order="K", subok=True, shape=None, **kw):
    """Like ``np.zeros_like``; a traced buffer inside differentiation, also for a plain ``a``."""
    return _like(_np.zeros_like, a, dtype, order, subok, shape, **kw)


def ones_like(a, dtype=None, order="K", subok=True, shape=None, **kw):
    """Like ``np.ones_like``; a traced buffer inside differentiation, also for a plain ``a``."""
    return _like(_np.ones_like, a, dtype, order, subok, shape, **kw)


def empty_like(a, dtype=None, order="K", subok=True, shape=None, **kw):
    """Like ``np.empty_like``; a traced buffer inside differentiation, also for a plain ``a``."""
    return _like(_np.empty_like, a, dtype, order, subok, shape, **kw)


def full_like(a, fill_value, dtype=None, order="K", subok=True, shape=None, **kw):
    """Like ``np.full_like``; a traced buffer inside differentiation, also for a plain ``a``;
    ``fill_value`` may be traced."""
    if isinstance(fill_value, _Tracer):
        if dtype is None:
            dtype = _np.result_type(_bottom(a))
        out = empty_like(a, dtype, order, subok, shape, **kw)
        out[...] = fill_value
        return out
    return _like(_np.full_like, a, dtype, order, subok, shape, fill_value, **kw)


def kaiser(M, beta):
    """Like ``np.kaiser``; ``beta`` may be traced (NumPy's converts it to a plain number).
    NumPy's operations, so NumPy's values."""
    if not isinstance(beta, _Tracer):
        return _np.kaiser(M, beta)
    beta = beta.astype(_np.result_type(_np.float64, beta.dtype))  # (NumPy's np.array([0.0, M, beta]): float64 at least)
    M = _np.float64(M)
    if M == 1:
        return _np.ones(1, beta.dtype)
    n = _np.arange(0, M)
    alpha = (M - 1) / 2.0
    return _np.i0(beta * _np.sqrt(1 - ((n - alpha) / alpha) ** 2.0)) / _np.i0(beta)


def interp(x, xp, fp, left=None, right=None, period=None):
    """Like ``np.interp``; also with a traced ``left`` or ``right`` beside plain ``x``, ``xp``
    and ``fp`` (NumPy dispatches on those three only, and converts the others to numbers)."""
    x, xp, fp = (array(v) if type(v) in (list, tuple) and _has_tracer(v) else v for v in (x, xp, fp))
    if any(isinstance(v, _Tracer) for v in (x, xp, fp, left, right, period)):
        from .core import FUNCTIONS

        return FUNCTIONS[_np.interp]((x, xp, fp, left, right, period), {})
    return _np.interp(x, xp, fp, left, right, period)


def piecewise(x, condlist, funclist, *args, **kw):
    """Like ``np.piecewise``; also with a plain ``x`` whose functions (or values) are traced, as
    closures over a traced parameter (NumPy dispatches on ``x`` only, and writes the functions'
    values into a plain array)."""
    from .core import FUNCTIONS, active_levels

    if not active_levels():
        return _np.piecewise(x, condlist, funclist, *args, **kw)
    return FUNCTIONS[_np.piecewise]((x, condlist, funclist, *args), kw)


def eye(N, M=None, k=0, dtype=float, order="C", **kw):
    return _traced(_np.eye(N, M, k, dtype, order, **kw))


def identity(n, dtype=None, **kw):
    return _traced(_np.identity(n, dtype, **kw))


def arange(*args, **kw):
    return _traced(_np.arange(*args, **kw))


def linspace(start, stop, num=50, endpoint=True, retstep=False, dtype=None, axis=0, **kw):
    """Like ``np.linspace``; ``start`` and ``stop`` may be traced (NumPy's
    algorithm and dtypes, so the values are NumPy's to the last bit)."""
    if not (isinstance(start, _Tracer) or isinstance(stop, _Tracer)):
        return _traced(_np.linspace(start, stop, num, endpoint, retstep, dtype, axis, **kw))
    num = _operator.index(num)
    if num < 0:
        raise ValueError(f"Number of samples, {num}, must be non-negative.")
    div = (num - 1) if endpoint else num
    # NumPy's working dtype: Python numbers (and weak traced scalars) take the other's dtype
    dt = _np.result_type(_promotion_operand(start), _promotion_operand(stop))
    if dt.kind not in "fc":
        dt = _np.result_type(dt, 1.0)
    integer_dtype = dtype is not None and _np.issubdtype(dtype, _np.integer)
    delta = _np.subtract(stop, start, dtype=dt)
    y = _np.arange(0, num, dtype=dt).reshape((-1,) + (1,) * _np.ndim(delta))
    if div > 0:
        step = delta / div
        y = y / div * delta if _np.any(_bottom(step) == 0) else y * step
    else:
        step = _np.nan
        y = y * delta
    y = y + start
    if endpoint and num > 1:
        y[-1, ...] = stop
    if axis != 0:
        y = _np.moveaxis(y, 0, axis)
    if integer_dtype:
        y = _np.floor(y)
    if dtype is not None:
        y = y.astype(dtype, copy=False)
    return (y, step) if retstep else y


def _has_tracer(obj):
    if isinstance(obj, _Tracer):
        return True
    if isinstance(obj, (list, tuple)):
        return any(_has_tracer(o) for o in obj)
    return False


def array(obj, dtype=None, copy=True, order="K", ndmin=0, **kw):
    """Like ``np.array``; nested lists may hold traced values."""
    if isinstance(obj, _Tracer):
        if copy:
            res = _np.copy(obj)
            if dtype is not None:
                res = res.astype(dtype)
            res = _in_order(res, order, obj)  # (a copy: in NumPy's layout for the order asked)
        else:  # None: a copy only where the dtype or the order asks for one (or obj is a scalar);
            # False: none allowed
            res = asarray(obj, dtype=dtype, order=None if order in ("K", "A") else order,
                          copy=False if copy is False else None)
            if copy is False and res is not obj:
                raise ValueError("Unable to avoid copy while creating an array as requested.")
        while _np.ndim(res) < ndmin:
            res = res[None]
        return res
    if isinstance(obj, (list, tuple)) and _has_tracer(obj):
        # NumPy's dtype for the nesting (each item its own dtype: a Python float is float64 here,
        # np.float32 items stay float32), read off np.array on stand-ins of the traced items
        try:
            dt = _np.array(_stand_ins(obj)).dtype if dtype is None else _np.dtype(dtype)
        except ValueError as e:  # (a ragged nesting: NumPy's own error, raised anew so that it is not
            raise ValueError(str(e)) from e  # taken for NumPy converting a traced value)
        res = _stack_nested(obj)
        if res.dtype != dt:
            res = res.astype(dt)
        res = _in_order(res, "F" if order == "F" else "C")  # (a new array from a list: C, unless order='F')
        while _np.ndim(res) < ndmin:
            res = res[None]
        return res
    return _traced(_np.array(obj, dtype=dtype, copy=copy, order=order, ndmin=ndmin, **kw))


def _stand_ins(obj):
    if isinstance(obj, (list, tuple)):
        return [_stand_ins(o) for o in obj]
    if isinstance(obj, _Tracer):
        return _promotion_operand(obj) if obj._scalar else _np.empty(obj.shape, obj.dtype)
    return obj


def _stack_nested(obj):
    if isinstance(obj, (list, tuple)):
        parts = [_stack_nested(o) for o in obj]
        if not parts:
            return _traced(_np.array([]))
        return _np.stack(parts)
    if isinstance(obj, _Tracer):
        return obj
    return _np.asarray(obj)


def asarray(obj, dtype=None, order=None, **kw):
    """Like ``np.asarray``: a traced array is returned as it is."""
    if isinstance(obj, _Tracer):
        copy = kw.get("copy")
        if copy or obj._scalar:  # (a scalar becomes a new 0-d array, as NumPy's)
            if copy is False:
                raise ValueError("Unable to avoid copy while creating an array as requested.")
            return array(obj, dtype=dtype, order="K" if order is None else order)
        res = obj if dtype is None or _np.dtype(dtype) == obj.dtype else obj.astype(dtype)
        if order in ("C", "F") and not _layout_satisfies(_np.asarray(_bottom(res)), order):
            res = _in_order(_np.copy(res), order)  # (a copy where the layout asked for is not the array's)
        if copy is False and res is not obj:
            raise ValueError("Unable to avoid copy while creating an array as requested.")
        return res
    if isinstance(obj, (list, tuple)) and _has_tracer(obj):
        return array(obj, dtype=dtype, order="F" if order == "F" else "K")
    return _np.asarray(obj, dtype=dtype, order=order, **kw)


asanyarray = asarray


def _traced_input(a):
    return isinstance(a, _Tracer) or (isinstance(a, (list, tuple)) and _has_tracer(a))


def _ordered(convert, order):
    """``np.ascontiguousarray`` / ``np.asfortranarray`` (``convert``): the array in ``order``, at least one
    dimension; a traced array stays traced (NumPy's converts it through the array protocol: a plain array,
    or an error)."""

    def f(a, dtype=None, **kw):
        if not _traced_input(a):
            return convert(a, dtype=dtype, **kw)
        res = asarray(a, dtype=dtype, order=order)
        return res.reshape(1) if res.ndim == 0 else res

    f.__name__ = f.__qualname__ = convert.__name__
    f.__doc__ = f"Like ``np.{convert.__name__}`` ({order} order, at least one dimension); a traced array stays traced."
    return f


ascontiguousarray = _ordered(_np.ascontiguousarray, "C")
asfortranarray = _ordered(_np.asfortranarray, "F")


_REQUIREMENTS = {"C": "C", "C_CONTIGUOUS": "C", "CONTIGUOUS": "C", "F": "F", "F_CONTIGUOUS": "F", "FORTRAN": "F",
                 "A": "A", "ALIGNED": "A", "W": "W", "WRITEABLE": "W", "O": "O", "OWNDATA": "O", "E": "E",
                 "ENSUREARRAY": "E"}


def require(a, dtype=None, requirements=None, **kw):
    """Like ``np.require``; a traced array stays traced (a copy where a flag asked for is not its own:
    OWNDATA of a view, WRITEABLE of a read-only one, the order)."""
    if not _traced_input(a):
        return _np.require(a, dtype=dtype, requirements=requirements, **kw)
    if not requirements:
        return asarray(a, dtype=dtype)
    flags = {_REQUIREMENTS[r.upper()] for r in requirements}
    if {"C", "F"} <= flags:
        raise ValueError('Cannot specify both "C" and "F" order')
    order = "C" if "C" in flags else "F" if "F" in flags else None
    res = asarray(a, dtype=dtype, order=order)
    if "O" in flags and res is a and isinstance(a, _Tracer) and not _owns_memory(a):
        return array(res, order=order or "K")
    return res  # (a traced array is writeable through mutagrad, also an argument read-only to plain code)


def _owns_memory(t):
    """Whether traced array ``t`` owns its memory, as NumPy's OWNDATA flag of the array it stands for: not a
    view of another traced array, nor an argument that is a view of the caller's array. (Its value's own
    flag is not that: an argument is a read-only view of the caller's array while the function runs.)"""
    if t._geom is not None:
        return False
    orig = t._storage.orig
    return type(orig) is not _np.ndarray or orig.flags.owndata


def fromiter(iterable, dtype=float, count=-1, **kw):
    """Like ``np.fromiter``; the items may be traced scalars."""
    items = []
    for i, v in enumerate(iterable):
        if count >= 0 and i >= count:
            break
        items.append(v)
    if count >= 0 and len(items) < count:
        raise ValueError(f"iterator too short: Expected {count} but iterator had only {len(items)} items.")
    if any(isinstance(v, _Tracer) for v in items):
        res = _np.stack([v if isinstance(v, _Tracer) else _np.asarray(v, dtype) for v in items])
        return res.astype(dtype) if _np.dtype(dtype) != res.dtype else res
    return _traced(_np.array(items, dtype=dtype))


def as_strided(x, shape=None, strides=None, subok=False, writeable=True):
    """``np.lib.stride_tricks.as_strided``, also of a traced array: a view of its memory,
    differentiated as any view (overlapping elements add their derivatives; writes through
    an overlapping view raise). The view must stay within the array's memory."""
    from .rules.shape import as_strided as _traced_as_strided

    return _traced_as_strided(x, shape, strides, subok=subok, writeable=writeable)


class _Slot:
    """A traced scalar held in an object array (NumPy keeps a scalar item as it is)."""

    __slots__ = ("value",)

    def __init__(self, value):
        self.value = value


def _slotted(obj):
    """``obj`` (a list of numbers) with its traced scalars in slots, or None if it holds a traced array."""
    if isinstance(obj, _Tracer):
        return _Slot(obj) if obj._scalar else None
    if isinstance(obj, (list, tuple)):
        items = [_slotted(o) for o in obj]
        if any(i is None for i, o in zip(items, obj) if isinstance(o, (_Tracer, list, tuple))):
            return None
        return type(obj)(items)
    return obj


def _plain_tree(x):
    """What a plain call's function would have returned for ``x``: traced values as their plain values."""
    if isinstance(x, _Tracer):
        from .core import plain_operand

        return plain_operand(x)
    if type(x) in (list, tuple):
        return type(x)(_plain_tree(v) for v in x)
    return x


def _python_elements(a):
    """The elements of traced array ``a`` as NumPy's object conversion gives them, one by one on
    demand (C order): a Python float or complex (a weak traced scalar, computed in float64 or
    complex128 whatever ``a``'s precision) or, for long doubles, NumPy's own scalars."""
    from .core import mark_weak

    flat = a.reshape(-1)
    dt = flat.dtype
    python = dt.itemsize <= (8 if dt.kind == "f" else 16)
    if python and dt.itemsize < (8 if dt.kind == "f" else 16):
        flat = flat.astype(_np.float64 if dt.kind == "f" else _np.complex128)
    made: dict = {}

    def element(i):
        e = made.get(i)
        if e is None:
            e = made[i] = flat[i]
            if python:
                mark_weak(e)  # (a fresh gather: its own storage)
        return e

    return element


def _first_element(a):
    """``np.asarray(a).flat[0]``, as NumPy's vectorize calls the function first to find otypes."""
    if isinstance(a, _Tracer):
        if a._scalar:
            from .core import weak

            return a.astype(a.dtype) if weak(a) else a  # (np.asarray makes a Python float a float64 array)
        return a[(0,) * a.ndim]
    if isinstance(a, (list, tuple)) and _has_tracer(a):
        return _first_element(array(a))
    return _np.asarray(a).flat[0]


def _traced_result(plain, values, shape_of_part=None):
    """The result NumPy builds from the function's ``values`` (C order) as the array ``plain``
    holds them (NumPy's own conversion of their plain values: its dtype, casts and errors), made
    of the traced values with differentiable operations where any is traced."""
    if plain.dtype.kind not in "fc" or not any(map(_has_tracer, values)):
        return plain
    parts = plain.reshape((len(values),) + plain.shape[plain.ndim - len(shape_of_part or ()):])
    parts = [v if isinstance(v, _Tracer) else asarray(v) if _has_tracer(v) else parts[k]
             for k, v in enumerate(values)]
    if shape_of_part is not None:  # (a signature's output: each value broadcast into its core shape, as
        parts = [_np.broadcast_to(p, shape_of_part) for p in parts]  # NumPy's out[index] = value)
    else:
        parts = [p.reshape(()) if isinstance(p, _Tracer) and p.ndim else p for p in parts]
    res = _np.stack(parts)
    if res.dtype != plain.dtype:  # (each value cast once to the output dtype: NumPy's cast of a Python float)
        res = res.astype(plain.dtype)
    return _in_order(res.reshape(plain.shape), "K", plain)


class vectorize(_np.vectorize):
    """Like ``np.vectorize`` (the same class, arguments and results); also of traced arrays, and of
    functions that close over traced values. NumPy's object conversion would lose the derivative;
    here the function is called, as often and in the order NumPy calls it, on the same elements
    (a float32 array's as Python floats, so computed in float64, then cast to ``otypes`` as NumPy
    casts), and the results are stacked with differentiable operations. Outside differentiation
    it is NumPy's own call.

    >>> import numpy as np, mutagrad as mg, mutagrad.numpy as mnp
    >>> @mnp.vectorize
    ... def relu(a):
    ...     return a if a > 0 else 0.0
    >>> mg.grad(lambda x: mnp.sum(relu(x) ** 2))(np.array([-1.0, 2.0]))
    array([0., 4.])
    """

    # (calls end here, not in NumPy's __call__: with no NumPy frame on the stack while the function
    # runs, an error in it names the user's operation, not np.vectorize)
    def __call__(self, *args, **kwargs):
        if self.pyfunc is _np._NoValue:  # (mnp.vectorize(otypes=...) used as a decorator: the function now)
            self._init_stage_2(*args, **kwargs)
            return self
        excluded = self.excluded
        free = [k for k in range(len(args)) if k not in excluded]
        names = [n for n in kwargs if n not in excluded]
        if not kwargs and len(free) == len(args):
            return self._vectorize_call(func=self.pyfunc, args=args)

        def bound(*vals):  # (the excluded arguments as given, the others element by element)
            pos = list(args)
            for k, v in zip(free, vals):
                pos[k] = v
            return self.pyfunc(*pos, **{**kwargs, **dict(zip(names, vals[len(free):]))})

        return self._vectorize_call(func=bound, args=[args[k] for k in free] + [kwargs[n] for n in names])

    def _vectorize_call(self, func, args):
        if not args or not (_active_levels() or _has_tracer(args)):
            return super()._vectorize_call(func, args)
        if self.signature is not None:
            return self._traced_call_with_signature(func, args)
        return self._traced_call(func, args)

    def _traced_call(self, func, args):
        """NumPy's ``_get_ufunc_and_otypes`` and ``_vectorize_call``, the elements of traced arguments
        handed to ``func`` through indices in object arrays laid out as NumPy's conversions are (so
        NumPy's ufunc visits them in its own order)."""
        import itertools

        args = [array(a) if type(a) in (list, tuple) and _has_tracer(a) and _slotted(a) is None else a
                for a in args]
        nin = len(args)
        cached = []
        if self.otypes is not None:
            otypes = self.otypes
            nout = len(otypes)
        else:
            if any(_np.size(_bottom(a) if isinstance(a, _Tracer) else _np.asarray(_plain_tree(a))) == 0
                   for a in args):
                raise ValueError("cannot call `vectorize` on size 0 inputs unless `otypes` is set")
            outputs = func(*[_first_element(a) for a in args])
            if self.cache:
                cached.append(outputs)
            outputs = outputs if isinstance(outputs, tuple) else (outputs,)
            nout = len(outputs)
            otypes = "".join(_np.asarray(_plain_tree(o)).dtype.char for o in outputs)
        objects, getters = [], []
        for a in args:
            if isinstance(a, _Tracer) and not a._scalar:
                o = _np.asanyarray(_bottom(a), dtype=object)
                o[...] = _np.arange(o.size).reshape(o.shape)  # (each element's index)
                getters.append(_python_elements(a))
            else:
                if isinstance(a, _Tracer):
                    o = _np.empty((), object)
                    o[()] = _Slot(a)  # (NumPy's conversion keeps a NumPy scalar as it is)
                else:
                    o = _np.asanyarray(_slotted(a) if _has_tracer(a) else a, dtype=object)
                getters.append(None)
            objects.append(o)
        results = []

        def call(*items):
            if cached:  # (cache=True: the first call's result stands for the first element's)
                r = cached.pop()
            else:
                r = func(*[g(i) if g is not None else i.value if type(i) is _Slot else i
                           for g, i in zip(getters, items)])
            results.append(r)
            if nout > 1 and isinstance(r, tuple):
                return tuple(_plain_tree(v) for v in r)
            return _plain_tree(r)  # (NumPy's own checks and conversions see what a plain call returns)

        outputs = _np.frompyfunc(call, nin, nout)(*objects, out=...)
        count = itertools.count()
        order = _np.frompyfunc(lambda *_: (next(count),) * nout if nout > 1 else next(count), nin, nout)(
            *objects, out=...)  # (which call made each element: NumPy's order of visits follows the layout)
        if nout == 1:
            outputs, order = (outputs,), (order,)
        order = _np.asarray(order[0]).ravel().tolist()
        if nout > 1:  # (a result that is no tuple of nout values: NumPy leaves the elements unset, NaN,
            # and calls the function no more)
            results = [r if isinstance(r, tuple) and len(r) == nout else (None,) * nout for r in results]
            results += [(None,) * nout] * (len(order) - len(results))
        res = tuple((_traced_result if _np.dtype(t) != object else _objects)(
            _np.asanyarray(out, dtype=t), [results[k] if nout == 1 else results[k][m] for k in order])
            for m, (out, t) in enumerate(zip(outputs, otypes)))
        return res[0] if nout == 1 else res

    def _traced_call_with_signature(self, func, args):
        """NumPy's ``_vectorize_call_with_signature`` on traced arguments: ``func`` gets traced
        core-dimension slices; each output is NumPy's (shapes, dtype, casts, errors), then rebuilt
        from the traced results."""
        from numpy.lib._function_base_impl import (
            _calculate_shapes,
            _create_arrays,
            _parse_input_dimensions,
            _update_dim_sizes,
        )

        input_core_dims, output_core_dims = self._in_and_out_core_dims
        if len(args) != len(input_core_dims):
            raise TypeError(f"wrong number of positional arguments: expected {len(input_core_dims)!r}, "
                            f"got {len(args)!r}")
        args = tuple(asarray(a) if _has_tracer(a) else _np.asanyarray(a) for a in args)
        broadcast_shape, dim_sizes = _parse_input_dimensions(args, input_core_dims)
        input_shapes = _calculate_shapes(broadcast_shape, dim_sizes, input_core_dims)
        args = [_np.broadcast_to(arg, shape, subok=True) for arg, shape in zip(args, input_shapes)]
        outputs = None
        otypes = self.otypes
        nout = len(output_core_dims)
        collected = [[] for _ in range(nout)]
        for index in _np.ndindex(*broadcast_shape):
            results = func(*(arg[index] for arg in args))
            n_results = len(results) if isinstance(results, tuple) else 1
            if nout != n_results:
                raise ValueError(f"wrong number of outputs from pyfunc: expected {nout!r}, got {n_results!r}")
            if nout == 1:
                results = (results,)
            plain = [_plain_tree(r) for r in results]
            if outputs is None:
                for result, core_dims in zip(plain, output_core_dims):
                    _update_dim_sizes(dim_sizes, result, core_dims)
                outputs = _create_arrays(broadcast_shape, dim_sizes, output_core_dims, otypes, plain)
            for output, result, p, c in zip(outputs, results, plain, collected):
                output[index] = p
                c.append(result)
        if outputs is None:
            if otypes is None:
                raise ValueError("cannot call `vectorize` on size 0 inputs unless `otypes` is set")
            if any(dim not in dim_sizes for dims in output_core_dims for dim in dims):
                raise ValueError("cannot call `vectorize` with a signature including new output dimensions on "
                                 "size 0 inputs")
            outputs = _create_arrays(broadcast_shape, dim_sizes, output_core_dims, otypes)
        else:
            for o, c in zip(outputs, collected):
                if o.dtype == object and any(map(_has_tracer, c)):
                    from .errors import NoRuleError, user_line

                    raise NoRuleError(
                        f"mnp.vectorize({getattr(self.pyfunc, '__name__', 'f')}) with a signature and an object "
                        f"output (otypes=[object]) returned traced values at {user_line()}: an object array does "
                        "not carry derivatives. Give a floating-point output type (otypes=[float]).")
            ndim = len(broadcast_shape)
            outputs = tuple(_traced_result(o, c, o.shape[ndim:]) for o, c in zip(outputs, collected))
        return outputs[0] if nout == 1 else outputs


def _objects(plain, values):
    """An object array of ``values`` (C order) as they are, traced ones too (otypes=[object])."""
    if not any(map(_has_tracer, values)):
        return plain
    flat = _np.empty(len(values), dtype=object)
    for k, v in enumerate(values):
        flat[k] = v
    return flat.reshape(plain.shape)


_EVERY_ARGUMENT: dict = {}


# the names of parameters that take one array (NumPy converts a list given there with np.asarray;
# np.concatenate's ``arrays``, np.vstack's ``tup``, np.select's lists take sequences of arrays)
_ARRAY_PARAMETERS = frozenset(("a", "x", "arr", "ary", "array", "m", "b", "y", "x1", "x2", "condition"))


def _array_parameters(fn):
    """``(position, name)`` of ``fn``'s parameters that take one array."""
    import inspect

    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return ()
    kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    return tuple((i, p.name) for i, p in enumerate(params) if p.kind in kinds and p.name in _ARRAY_PARAMETERS)


def _every_argument(fn):
    """``fn`` looking at every argument: NumPy dispatches some functions on a few of them only
    (np.pad on its array, np.apply_along_axis on arr), so a traced ``constant_values=`` beside a
    plain array, or a function closing over traced values, would be converted by NumPy's own
    code; inside differentiation such calls go to mutagrad's rule for ``fn``. A list of traced
    values given for one array (``mnp.max([q0, q1])``) is made one, as :func:`array` makes it."""
    arrays = _array_parameters(fn)

    def call(*args, **kwargs):
        if _active_levels() and (_has_tracer(args) or _has_tracer(tuple(kwargs.values())) or any(
                callable(a) and not isinstance(a, type) for a in (*args, *kwargs.values()))):
            for i, name in arrays:
                if i < len(args):
                    if isinstance(args[i], (list, tuple)) and _has_tracer(args[i]):
                        args = args[:i] + (array(args[i]),) + args[i + 1:]
                elif isinstance(kwargs.get(name), (list, tuple)) and _has_tracer(kwargs[name]):
                    kwargs = {**kwargs, name: array(kwargs[name])}
            # (as NumPy's dispatch to mutagrad: the other lists of numbers holding traced ones as arrays,
            # the pieces of np.concatenate's sequence too)
            return _function_dispatch(fn, args, kwargs)
        return fn(*args, **kwargs)

    call.__name__ = getattr(fn, "__name__", "call")
    call.__qualname__ = call.__name__
    call.__doc__ = getattr(fn, "__doc__", None)
    call.__wrapped__ = fn
    return call


def __getattr__(name):
    fn = getattr(_np, name)
    if callable(fn) and not isinstance(fn, (type, _np.ufunc)):
        from .core import FUNCTIONS

        try:
            ruled = fn in FUNCTIONS
        except TypeError:  # (unhashable)
            ruled = False
        if ruled:
            wrapped = _EVERY_ARGUMENT.get(name)
            if wrapped is None or wrapped.__wrapped__ is not fn:
                wrapped = _EVERY_ARGUMENT[name] = _every_argument(fn)
            return wrapped
    return fn


def __dir__():
    return sorted(set(globals()) | set(dir(_np)))


# numpy.polynomial, differentiated (mnp.polynomial.legendre.legval, mnp.polynomial.Legendre...): NumPy's code in
# the mirror's globals (mutagrad/_polynomial.py), registered in sys.modules as mutagrad.numpy.polynomial.*
from ._polynomial import polynomial  # noqa: F401  (mnp.polynomial)
