"""Derivative rules for NumPy (and SciPy when installed), grouped by topic."""
from . import (  # noqa: F401
    construction,
    creation,
    elementwise,
    fft,
    indexing,
    layout,
    linalg,
    mutation,
    reductions,
    shape,
    sparse,
    statistics,
)

layout.wrap_rules()  # (once the rules it wraps are registered)

try:  # SciPy is optional: its rules load only when it is importable
    import scipy  # noqa: F401
except ImportError:  # pragma: no cover
    pass
else:
    from .scipy import fft as _scipy_fft  # noqa: F401  (registers a scipy.fft backend)
    from .scipy import linalg as _scipy_linalg  # noqa: F401
    from .scipy import ndimage as _scipy_ndimage  # noqa: F401
    from .scipy import signal as _scipy_signal  # noqa: F401
    from .scipy import sparse as _scipy_sparse  # noqa: F401
    from .scipy import special as _scipy_special  # noqa: F401
    from .scipy import stats as _scipy_stats  # noqa: F401
