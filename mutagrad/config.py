"""Global options: ``mg.config(strict=True)``.

Strict mode turns every ``NotImplementedTangent`` that reaches an argument
whose gradient was requested into an error at the rule. It is on when
``mg.config(strict=True)`` was called or the environment variable
``MUTAGRAD_STRICT=1`` is set; the variable is read each time a
differentiation starts.
"""
from __future__ import annotations

import contextvars
import os
import threading

__all__ = ["config", "strict"]

_OPTIONS = {"strict": False}  # set by mg.config(...) called as a function: the whole process
_SCOPED = contextvars.ContextVar("mutagrad_options", default=None)  # `with mg.config(...)`: this thread
_lock = threading.Lock()


def strict() -> bool:
    scoped = _SCOPED.get()
    if scoped is not None and "strict" in scoped:
        return scoped["strict"]
    if _OPTIONS["strict"]:
        return True
    return os.environ.get("MUTAGRAD_STRICT", "").strip().lower() not in ("", "0", "false", "no")


class config:
    """Set options. Called as a function, for the whole process (as
    ``jax.config.update``); as a context manager, for the code in the block
    only, in this thread (and its asyncio task): other threads keep theirs.

    >>> import mutagrad as mg
    >>> with mg.config(strict=True):
    ...     pass
    """

    def __init__(self, *, strict: bool | None = None):
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
        scoped = _SCOPED.get()
        if scoped is not None and name in scoped:
            return scoped[name]
        return _OPTIONS[name]
