"""``mutagrad.numpy.polynomial``: NumPy's ``numpy.polynomial``, differentiated.

The functions of ``numpy.polynomial``'s modules (``polynomial``, ``chebyshev``, ``legendre``,
``hermite``, ``hermite_e``, ``laguerre``, ``polyutils``) and the methods of its series classes
are NumPy's plain-Python code, which converts its arguments with ``np.array`` / ``np.asarray``:
a traced coefficient array would be made a plain one. The mirror runs NumPy's own code (the same
code objects, so NumPy's algorithms and values) in a copy of each module's globals where ``np``
is a namespace whose array creation keeps traced values traced (``mutagrad.numpy``'s ``array``,
``asarray``, ``empty``, ``zeros``...; every other name is NumPy's), and where ``pu`` and the sibling
modules are the mirror's. NumPy's modules are not changed.

Each public function of the mirror calls NumPy's own function when no argument holds a traced
value (plain inputs give NumPy's plain results), and NumPy's code in the mirror's globals
otherwise. The series classes (``Polynomial``, ``Chebyshev``, ``Legendre``, ``Hermite``,
``HermiteE``, ``Laguerre``) are subclasses of NumPy's whose methods run in the mirror's globals,
with the mirror's functions as their ``_add``, ``_val``, ``_fit``... A series object then holds
traced coefficients: ``mnp.polynomial.Legendre(c)(x)``, ``Polynomial.fit(x, y, deg).convert().coef``
are differentiated.

``import mutagrad.numpy`` registers the modules in ``sys.modules`` (``mutagrad.numpy.polynomial``,
``mutagrad.numpy.polynomial.legendre``...), so that ``import mutagrad.numpy.polynomial.legendre as L``
works too.
"""
from __future__ import annotations

import functools
import sys
import types

import numpy as _np
import numpy.polynomial as _npoly
from numpy.polynomial import _polybase as _np_polybase
from numpy.polynomial import chebyshev as _np_chebyshev
from numpy.polynomial import hermite as _np_hermite
from numpy.polynomial import hermite_e as _np_hermite_e
from numpy.polynomial import laguerre as _np_laguerre
from numpy.polynomial import legendre as _np_legendre
from numpy.polynomial import polynomial as _np_polynomial
from numpy.polynomial import polyutils as _np_polyutils

from . import numpy as _mnp
from .core import _SERIES
from .core import Tracer as _Tracer
from .core import active_levels as _active_levels

PACKAGE = "mutagrad.numpy.polynomial"

# NumPy's modules, in the order they are mirrored (polyutils and _polybase first: the others refer to them)
_MODULES = {"polyutils": _np_polyutils, "_polybase": _np_polybase, "polynomial": _np_polynomial,
            "chebyshev": _np_chebyshev, "legendre": _np_legendre, "hermite": _np_hermite,
            "hermite_e": _np_hermite_e, "laguerre": _np_laguerre}
_CLASSES = {module: cls for module, (_, cls) in _SERIES.items()}  # (module -> its series class)


class _NumPy(types.ModuleType):
    """The ``np`` of the mirror's globals: array creation that keeps traced values traced (and makes
    writable traced buffers inside a differentiation), NumPy's own for every other name."""

    def __getattr__(self, name):
        return getattr(_np, name)

    def __dir__(self):
        return sorted(set(dir(_np)) | set(self.__dict__))


_SHIM = _NumPy("mutagrad._polynomial.np")
for _name in ("array", "asarray", "asanyarray", "empty", "zeros", "ones", "full", "empty_like", "zeros_like",
              "ones_like", "full_like", "eye", "identity", "linspace"):
    setattr(_SHIM, _name, getattr(_mnp, _name))


def _holds_tracer(obj):
    """Whether ``obj`` (an argument) holds a traced value: itself, in a list, tuple or dict, in an object
    array, or as a series object's coefficients, domain or window."""
    if isinstance(obj, _Tracer):
        return True
    if isinstance(obj, (list, tuple)):
        return any(_holds_tracer(o) for o in obj)
    if isinstance(obj, dict):
        return any(_holds_tracer(o) for o in obj.values())
    if isinstance(obj, _np_polybase.ABCPolyBase):
        return any(isinstance(getattr(obj, a, None), _Tracer) for a in ("coef", "domain", "window"))
    if type(obj) is _np.ndarray and obj.dtype == object:
        return any(_holds_tracer(o) for o in obj.flat)
    return False


def _dispatching(original, mirrored, module):
    """The mirror's public function: NumPy's ``original`` for plain arguments (NumPy's plain results),
    ``mirrored`` (NumPy's code in the mirror's globals) where an argument holds a traced value."""

    @functools.wraps(original)
    def call(*args, **kwargs):
        if _active_levels() and (_holds_tracer(args) or _holds_tracer(kwargs)):
            return mirrored(*args, **kwargs)
        return original(*args, **kwargs)

    call.__module__ = module
    call._mirrored = mirrored
    return call


def _rebuilt(fn, scope, module):
    """``fn``'s code with the globals ``scope`` (the mirror module's namespace)."""
    new = types.FunctionType(fn.__code__, scope, fn.__name__, fn.__defaults__, fn.__closure__)
    new.__kwdefaults__ = fn.__kwdefaults__
    new.__qualname__ = fn.__qualname__
    new.__doc__ = fn.__doc__
    new.__dict__.update(fn.__dict__)
    new.__module__ = module
    return new


def _python_function(obj):
    """The Python function of a module attribute: itself, or the implementation of a function NumPy
    dispatches (``polyval2d``), else None."""
    if isinstance(obj, types.FunctionType):
        return obj
    impl = getattr(obj, "_implementation", None)
    return impl if isinstance(impl, types.FunctionType) else None


_MIRRORED: dict = {}  # id of NumPy's function -> the mirror's (public ones: the dispatching function)


def _mirror_module(short, original):
    name = f"{PACKAGE}.{short}"
    mod = types.ModuleType(name, original.__doc__)
    scope = mod.__dict__
    for key, val in vars(original).items():
        if key not in ("__name__", "__doc__", "__spec__", "__loader__", "__file__", "__cached__", "__package__",
                       "__builtins__"):
            scope[key] = val
    scope.update(np=_SHIM, __package__=PACKAGE, __spec__=None, __builtins__=__builtins__)
    if short != "polyutils":
        scope["pu"] = sys.modules[f"{PACKAGE}.polyutils"]
    public = set(getattr(original, "__all__", ()))
    for key, val in list(scope.items()):
        fn = _python_function(val)
        if fn is None or not fn.__module__.startswith("numpy.polynomial"):
            continue
        if id(val) in _MIRRORED:  # (legtrim is polyutils.trimcoef)
            scope[key] = _MIRRORED[id(val)]
            continue
        if fn.__module__ != original.__name__:
            continue
        mirrored = _rebuilt(fn, scope, name)
        if fn is _np_polyutils.mapdomain:
            mirrored = _mapdomain(mirrored)
        if key in public or not key.startswith("_"):
            scope[key] = _MIRRORED[id(val)] = _dispatching(val, mirrored, name)
        else:
            scope[key] = mirrored
    sys.modules[name] = mod
    return mod


def _series_class(cls, module):
    """The mirror's subclass of NumPy's series class ``cls``: the methods of ``cls`` and of
    ``ABCPolyBase`` run in the mirror's globals, its function attributes are the mirror's functions."""
    polybase = sys.modules[f"{PACKAGE}._polybase"].__dict__
    scope = module.__dict__
    ns = {"__module__": module.__name__, "__doc__": cls.__doc__, "__qualname__": cls.__qualname__}
    for owner, globs in ((_np_polybase.ABCPolyBase, polybase), (cls, scope)):
        for key, val in vars(owner).items():
            if key in ("__dict__", "__weakref__", "__module__", "__doc__", "__abstractmethods__", "_abc_impl") or (
                    owner is not cls and key in vars(cls)):  # (cls's own: domain, window, _add...)
                continue
            if isinstance(val, (staticmethod, classmethod)):
                fn = val.__func__
                if id(fn) in _MIRRORED:
                    ns[key] = type(val)(_MIRRORED[id(fn)])
                elif isinstance(fn, types.FunctionType):
                    ns[key] = type(val)(_rebuilt(fn, globs, module.__name__))
            elif isinstance(val, property):
                ns[key] = property(*(None if f is None else _rebuilt(f, globs, module.__name__)
                                     for f in (val.fget, val.fset, val.fdel)), val.__doc__)
            elif isinstance(val, types.FunctionType):
                ns[key] = _rebuilt(val, globs, module.__name__)
    ns["_get_coefficients"] = _get_coefficients
    for key in ("__radd__", "__rsub__", "__rmul__", "__rfloordiv__", "__rmod__", "__rdivmod__"):
        ns[key] = _reflected(ns[key], "__" + key[3:])
    return type(cls)(cls.__name__, (cls,), ns)


def _numpy_class(obj):
    """The NumPy series class of a series object (the mirror's classes are subclasses of NumPy's)."""
    for c in type(obj).__mro__:
        if c.__module__.startswith("numpy.polynomial.") and c is not _np_polybase.ABCPolyBase:
            return c
    return type(obj)


def _get_coefficients(self, other):
    """NumPy's ``ABCPolyBase._get_coefficients``, for which a series of the mirror and one of NumPy's of the
    same kind (a Legendre and an mnp.polynomial.Legendre) are of one type."""
    if isinstance(other, _np_polybase.ABCPolyBase):
        if _numpy_class(other) is not _numpy_class(self):
            raise TypeError("Polynomial types differ")
        elif not _np.all(self.domain == other.domain):
            raise TypeError("Domains differ")
        elif not _np.all(self.window == other.window):
            raise TypeError("Windows differ")
        elif self.symbol != other.symbol:
            raise ValueError("Polynomial symbols differ")
        return other.coef
    return other


def _reflected(method, forward):
    """The reflected operator ``method`` of the mirror's series class: for a NumPy series of the same kind on
    the left (Legendre(...) * mnp.polynomial.Legendre(c)), the operation ``forward`` of the same series made
    one of the mirror (NumPy's reflected operators take a scalar or an array only: NumPy's forward operator
    would convert the traced coefficients)."""

    @functools.wraps(method)
    def reflected(self, other):
        if isinstance(other, _np_polybase.ABCPolyBase) and not isinstance(other, type(self)) and (
                _numpy_class(other) is _numpy_class(self)):
            other = type(self)(other.coef, other.domain, other.window, other.symbol)
            return getattr(other, forward)(self)
        return method(self, other)

    return reflected


def _mapdomain(mirrored):
    """polyutils.mapdomain of the mirror: a series object ``x`` (a series' convert() maps the identity
    series) is mapped with its own arithmetic, as NumPy's maps it through a 0-d object array (whose
    arithmetic with traced numbers is not differentiated)."""

    @functools.wraps(mirrored)
    def mapdomain(x, old, new):
        if isinstance(x, _np_polybase.ABCPolyBase):
            off, scl = mirrored.__globals__["mapparms"](old, new)
            return off + scl * x
        return mirrored(x, old, new)

    return mapdomain


def _build():
    package = types.ModuleType(PACKAGE, __doc__)
    package.__path__ = []  # (a package: its submodules are in sys.modules)
    package.__package__ = PACKAGE
    sys.modules[PACKAGE] = package
    for short, original in _MODULES.items():
        mod = _mirror_module(short, original)
        setattr(package, short, mod)
    for short, clsname in _CLASSES.items():
        mod = sys.modules[f"{PACKAGE}.{short}"]
        cls = _series_class(getattr(_MODULES[short], clsname), mod)
        mod.__dict__[clsname] = cls
        setattr(package, clsname, cls)
    package.set_default_printstyle = _npoly.set_default_printstyle
    package.__all__ = list(_npoly.__all__)
    return package


polynomial = _build()
