"""Thread limits for the suite, applied before NumPy, torch or JAX is imported.

The benchmark machine is small and shared: with multi-threaded BLAS the
large-array timings were dominated by scheduling noise (the same NumPy
matvec took 0.06 ms or 8 ms depending on the neighbours). So every library
runs with ``MUTAGRAD_BENCH_THREADS`` threads (default 1); variables the
user already set are kept.
"""
from __future__ import annotations

import os
import sys

VARIABLES = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


def limit() -> int:
    n = int(os.environ.get("MUTAGRAD_BENCH_THREADS", "1"))
    for var in VARIABLES:
        os.environ.setdefault(var, str(n))
    if n == 1:
        flags = os.environ.get("XLA_FLAGS", "")
        if "multi_thread_eigen" not in flags:
            os.environ["XLA_FLAGS"] = (flags + " --xla_cpu_multi_thread_eigen=false").strip()
    return n


def describe(n: int) -> str:
    """What the limits are, and whether they could still take effect."""
    env = ", ".join(f"{v}={os.environ.get(v, 'unset')}" for v in VARIABLES)
    late = " (NumPy was imported before the limits were set: BLAS keeps its own default)" \
        if _NUMPY_BEFORE else ""
    return f"threads per library: {n} ({env}; torch.set_num_threads({n}); XLA_FLAGS={os.environ.get('XLA_FLAGS', '')!r}){late}"


_NUMPY_BEFORE = "numpy" in sys.modules
