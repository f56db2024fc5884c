"""Derivative rules for NumPy (and SciPy when installed), grouped by topic."""
from . import creation, elementwise, indexing, linalg, mutation, reductions, shape  # noqa: F401
