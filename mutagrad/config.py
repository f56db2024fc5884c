"""Global options: ``mg.config(strict=True)``.

Strict mode turns every ``NotImplementedTangent`` that reaches an argument
whose gradient was requested into an error at the rule. It is on when
``mg.config(strict=True)`` was called or the environment variable
``MUTAGRAD_STRICT=1`` is set; the variable is read each time a
differentiation starts.
"""
from __future__ import annotations

import os
import threading

__all__ = ["config", "strict"]

_OPTIONS = {"strict": False}
_lock = threading.Lock()


def strict() -> bool:
    if _OPTIONS["strict"]:
        return True
    return os.environ.get("MUTAGRAD_STRICT", "").strip().lower() not in ("", "0", "false", "no")


class config:
    """Set options; also a context manager that restores them on exit.

    >>> import mutagrad as mg
    >>> with mg.config(strict=True):
    ...     pass
    """

    def __init__(self, *, strict: bool | None = None):
        with _lock:
            self._old = dict(_OPTIONS)
            if strict is not None:
                _OPTIONS["strict"] = bool(strict)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        with _lock:
            _OPTIONS.update(self._old)
        return False

    @staticmethod
    def get(name):
        return _OPTIONS[name]
