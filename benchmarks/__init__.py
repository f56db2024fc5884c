"""mutagrad benchmark suite: ``python -m benchmarks`` (``--quick`` for a short run).

Measures mutagrad against HIPS autograd, PyTorch eager (CPU) and JAX (eager
and ``jit``) in one run: every library of a table row is timed in the same
interleaved rounds, each number is a median over rounds, and every ratio is
the median of the per-round ratios, so slow drifts of this shared machine
cancel out. Results go to ``docs/benchmarks.md``.

Modules: ``harness`` (peers, timing, memory, checks), ``tiny`` (per-operation
overhead), ``large`` (one big array function), ``inplace`` (stencil, RK4,
recurrence written in place), ``memory`` (tape memory against the bytes
overwritten), ``hvp`` (Hessian-vector products against each library's own
gradient), ``report`` (the markdown), ``profile`` (cProfile of the
tiny-op loop: ``python -m benchmarks.profile``).
"""
