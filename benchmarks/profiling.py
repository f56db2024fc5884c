"""Where mutagrad's time goes: cProfile of one workload's gradient.

``python -m benchmarks.profiling [--workload tiny|tiny1|recurrence|heat|rk4] [--n N] [--top 25] [--repeat 5]``

Prints the top entries sorted by cumulative time and by own time
(``tottime``). cProfile adds its own per-call cost, which inflates many
small calls: compare entries with each other, not with the timed suite.
"""
from __future__ import annotations

import argparse
import cProfile
import io
import pstats

import numpy as np

import mutagrad as mg

from . import inplace, tiny


def workload(name: str, n: int | None):
    """(function, arguments) of the named workload, differentiated w.r.t. the first argument."""
    if name in ("tiny", "tiny1"):
        y0 = np.array(0.3) if name == "tiny" else np.array([0.3])
        return tiny.numpy_fn(n or tiny.ITERATIONS), (y0,)
    code = inplace.WORKLOADS[name][0]
    return (lambda x: code(x, inplace.NUMPY)), inplace.inputs(name, n or 10**3)


def profile(name: str, n: int | None, top: int, repeat: int) -> str:
    f, args = workload(name, n)
    g = mg.grad(f)
    g(*args)  # warm up
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(repeat):
        g(*args)
    prof.disable()
    out = io.StringIO()
    stats = pstats.Stats(prof, stream=out).strip_dirs()
    for key in ("cumulative", "tottime"):
        out.write(f"\n=== {name}: top {top} by {key} ({repeat} gradient calls) ===\n")
        stats.sort_stats(key).print_stats(top)
    return out.getvalue()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.profiling", description=__doc__.split("\n\n")[0])
    ap.add_argument("--workload", default="tiny", choices=["tiny", "tiny1", *inplace.WORKLOADS],
                    help="tiny: the 0-d loop of (a); tiny1: shape (1,); or an in-place workload of (c)")
    ap.add_argument("--n", type=int, default=None, help="iterations (tiny) or size (others)")
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args(argv)
    print(profile(args.workload, args.n, args.top, args.repeat))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
