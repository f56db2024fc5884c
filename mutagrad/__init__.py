"""mutagrad: automatic differentiation of imperative NumPy code, in-place
updates included. Exact derivatives in reverse and forward mode, or a clear
error; never a silently wrong number.

>>> import numpy as np, mutagrad as mg
>>> def f(x):
...     y = np.log(x)
...     x.fill(0.0)
...     return np.sum(y + x)
>>> mg.grad(f)(np.array([1.0, 2.0, 3.0]))
array([1.        , 0.5       , 0.33333333])
"""
from . import rules as _rules  # noqa: F401  (fills the registries)
from . import testing
from .api import grad, hessian, jacobian, jvp, value_and_grad, vjp
from .config import config
from .explain import explain
from .core import stop_gradient, value
from .errors import (
    AliasingError,
    DifferentiationError,
    EscapedTracerError,
    ForwardRuleMissingError,
    KinkWarning,
    MutationError,
    NoRuleError,
    NotImplementedTangentError,
    RuleError,
    TracerEscapeError,
    WriteToPlainArrayError,
)
from .registry import frule, primitive, rrule
from .tangents import NotImplementedTangent, NoTangent, Tangent, ZeroTangent, not_implemented

__version__ = "0.1.0"

__all__ = [
    "grad", "value_and_grad", "vjp", "jvp", "jacobian", "hessian",
    "stop_gradient", "value", "primitive", "rrule", "frule",
    "ZeroTangent", "NoTangent", "NotImplementedTangent", "not_implemented", "Tangent",
    "testing", "config", "explain",
    "DifferentiationError", "TracerEscapeError", "WriteToPlainArrayError", "NoRuleError",
    "NotImplementedTangentError", "MutationError", "AliasingError", "EscapedTracerError",
    "ForwardRuleMissingError", "RuleError", "KinkWarning",
]

# the filter that silences NumPy's shuffle warning for traced arrays, first among the filters at import
# (put there by the first differentiation instead, the change of the filter list made Python forget
# which warnings it had shown, and a plain call's warning came again)
from .errors import ensure_shuffle_filter as _ensure_shuffle_filter

_ensure_shuffle_filter()
