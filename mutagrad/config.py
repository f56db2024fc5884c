"""Global options: ``mg.config(strict=True)``.

Strict mode turns every ``NotImplementedTangent`` that reaches an argument
whose gradient was requested into an error at the rule. It is what the
innermost ``with mg.config(strict=...)`` block says, else what the last
``mg.config(strict=...)`` call said, else the environment variable
``MUTAGRAD_STRICT`` (1 on, 0 or unset off), read each time a differentiation
starts.
"""
from __future__ import annotations

import contextvars
import os
import threading

import numpy as np

__all__ = ["config", "strict"]

_OPTIONS = {"strict": None}  # set by mg.config(...) called as a function: the whole process (None: unset)
_SCOPED = contextvars.ContextVar("mutagrad_options", default=None)  # `with mg.config(...)`: this thread
_lock = threading.Lock()
_TRUE, _FALSE = ("1", "true", "yes", "on"), ("", "0", "false", "no", "off")


def _from_environment() -> bool:
    value = os.environ.get("MUTAGRAD_STRICT")
    if value is None:  # (the common case, first)
        return False
    value = value.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ValueError(f"MUTAGRAD_STRICT={os.environ['MUTAGRAD_STRICT']!r}: set it to 1 (strict mode on) or 0 (off), "
                     "or unset it.")


def strict() -> bool:
    """Whether strict mode is on here: a ``with mg.config(strict=...)`` block's setting, else the
    process's (``mg.config(strict=...)`` called), else the environment's ``MUTAGRAD_STRICT``."""
    scoped = _SCOPED.get()
    if scoped is not None and "strict" in scoped:
        return scoped["strict"]
    if _OPTIONS["strict"] is not None:
        return _OPTIONS["strict"]
    return _from_environment()


class _ConfigType(type):
    def __setattr__(cls, name, value):
        raise AttributeError(f"mg.config.{name} cannot be assigned: call mg.config({name}={value!r}) (the whole "
                             f"process) or use `with mg.config({name}={value!r}):` (a block)")


class config(metaclass=_ConfigType):
    """Set options. Called as a function, for the whole process (as
    ``jax.config.update``); as a context manager, for the code in the block
    only, in this thread (and its asyncio task): other threads keep theirs.
    A setting made here overrides the environment's ``MUTAGRAD_STRICT``.

    >>> import mutagrad as mg
    >>> with mg.config(strict=True):
    ...     pass
    """

    def __init__(self, *, strict: bool | None = None):
        if strict is not None and not isinstance(strict, (bool, np.bool_)):
            raise TypeError(f"mg.config(strict=...) takes True or False, not {strict!r}")
        self._new = {} if strict is None else {"strict": bool(strict)}
        with _lock:
            self._old = dict(_OPTIONS)
            _OPTIONS.update(self._new)
        self._token = None

    def __enter__(self):
        with _lock:  # a block: undo the process-wide setting, scope it to this context instead
            for k in self._new:
                _OPTIONS[k] = self._old[k]
        self._token = _SCOPED.set({**(_SCOPED.get() or {}), **self._new})
        return self

    def __exit__(self, *exc):
        _SCOPED.reset(self._token)
        return False

    @staticmethod
    def get(name):
        """The option's value in effect here (for strict: the block's, the process's or the
        environment's)."""
        if name == "strict":
            return strict()
        scoped = _SCOPED.get()
        if scoped is not None and name in scoped:
            return scoped[name]
        if name not in _OPTIONS:  # (a bare KeyError: apisurface4)
            raise ValueError(f"mg.config has no option {name!r}; its options are {sorted(_OPTIONS)}")
        return _OPTIONS[name]
