"""One memory allocator setting for the whole suite, whichever peers are installed.

glibc's malloc serves requests above its mmap threshold (128 kB at start)
with fresh pages from the kernel and returns them on free, so a NumPy
temporary of 800 kB (a 10^5-element array) costs page faults every time it
is made. The threshold moves up by itself once a large block is freed,
which importing torch or JAX happens to do: measured on the 2-core machine,
the heat primal at n = 10^5 took 30 ms in a process without them and 10 ms
with them. And a gradient that keeps hundreds of MB of intermediates (RK4 at
10^5 keeps 640 MB, as any reverse mode must) handed them back to the kernel
after each call and paid ~160,000 page faults on the next. So the suite
fixes both thresholds at start (``mallopt``): every library, the NumPy primal
included, reuses heap memory between calls, as torch's and JAX's own caching
allocators do for them.
Set ``MUTAGRAD_BENCH_MALLOC=default`` to keep the allocator's defaults.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import os

M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
THRESHOLD = 64 * 2**20  # bytes: arrays up to 8 M float64 elements come from the heap
TRIM = 2**31 - 1  # bytes of free heap kept for reuse instead of returned to the kernel (the largest C int)


def configure() -> str:
    """Apply the setting; return what was done (for the report)."""
    if os.environ.get("MUTAGRAD_BENCH_MALLOC", "") == "default":
        return "malloc: defaults (MUTAGRAD_BENCH_MALLOC=default)"
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name)
        mallopt = libc.mallopt
    except (OSError, AttributeError, TypeError):
        return "malloc: defaults (no glibc mallopt here)"
    ok = mallopt(M_MMAP_THRESHOLD, THRESHOLD) == 1 and mallopt(M_TRIM_THRESHOLD, TRIM) == 1
    if not ok:
        return "malloc: defaults (mallopt refused)"
    return (f"malloc: glibc mmap threshold fixed at {THRESHOLD >> 20} MiB and trim threshold at 2 GiB for every "
            "library, so that temporaries and the arrays a gradient keeps reuse heap memory (as torch's caching "
            "allocator does for torch) whichever peers are imported")
