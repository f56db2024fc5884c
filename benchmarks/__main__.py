"""``python -m benchmarks [--quick] [--only tiny,large,inplace,memory,hvp] [--output PATH]``.

Runs the suite, writes the report (default ``docs/benchmarks.md``) and
prints it. Exit status 1 if a correctness check failed.
"""
from __future__ import annotations

import argparse
import pathlib
import sys
import time

from . import alloc, threads

THREADS = threads.limit()  # before NumPy, torch and JAX are imported
MALLOC = alloc.configure()

from . import harness, hvp, inplace, large, memory, report, tiny  # noqa: E402

SECTIONS = {"tiny": tiny, "large": large, "inplace": inplace, "memory": memory, "hvp": hvp}
DEFAULT_OUTPUT = pathlib.Path(__file__).resolve().parent.parent / "docs" / "benchmarks.md"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="short run (a few minutes): fewer rounds and sizes")
    ap.add_argument("--only", default=",".join(SECTIONS),
                    help="comma-separated sections to run (default: all): " + ", ".join(SECTIONS))
    ap.add_argument("--output", type=pathlib.Path, default=DEFAULT_OUTPUT,
                    help="markdown report to write (default: docs/benchmarks.md); '-' to write none")
    args = ap.parse_args(argv)
    mode = harness.QUICK if args.quick else harness.FULL
    chosen = [s.strip() for s in args.only.split(",") if s.strip()]
    unknown = [s for s in chosen if s not in SECTIONS]
    if unknown:
        ap.error(f"unknown section(s) {unknown}; choose from {list(SECTIONS)}")

    start = time.perf_counter()
    peers = harness.load_peers(threads=THREADS)
    for name, why in peers.missing.items():
        print(f"note: peer {name} not available, skipped ({why})", file=sys.stderr)
    env = harness.environment(peers)
    env["missing"] = peers.missing
    env["threads"] = threads.describe(THREADS)
    env["malloc"] = MALLOC
    sections = []
    for name in chosen:
        t = time.perf_counter()
        print(f"running {name} ...", file=sys.stderr, flush=True)
        sections.append(SECTIONS[name].run(peers, mode))
        print(f"  {name}: {time.perf_counter() - t:.0f} s", file=sys.stderr, flush=True)

    env["load_end"] = harness.load_average()
    command = "python -m benchmarks" + (" --quick" if args.quick else "")
    if chosen != list(SECTIONS):
        command += f" --only {','.join(chosen)}"
    text = report.document(env, mode, sections, command, time.perf_counter() - start)
    if str(args.output) != "-":
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(text)
        print(f"wrote {args.output}", file=sys.stderr)
    print(text)
    failed = [c for s in sections for r in s.rows for c in r.checks if not c[3]]
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
