"""The tape report: what reverse mode recorded for one call, line by line.

``explain(f, *args)`` runs ``f`` under reverse mode with source lines
recorded and lists every tape entry — an operation (``OpRecord``), a copying
read (``GatherRecord``) or an in-place write (``WriteRecord``) — with the
user's ``file:line``, and for each write the bytes it saved so the reverse
pass can rewind it. It is a debugging and teaching aid: the hot path of
``grad`` records no lines.

>>> import numpy as np, mutagrad as mg
>>> from mutagrad.explain import explain
>>> def f(x):
...     y = np.log(x)
...     x.fill(0.0)                 # log read x: the write saves its 3 elements
...     return np.sum(y + x)
>>> r = explain(f, np.array([1.0, 2.0, 4.0]), show=False)
>>> r.n_ops, r.n_writes, r.bytes_saved
(3, 1, 24)
>>> r.grad
array([1.  , 0.5 , 0.25])
"""
from __future__ import annotations

import os
import sys
from typing import Any, Callable

import numpy as np

from .api import _collect, _normalize_argnums, _unwrap_level, _wrap_args
from .core import Tracer, bottom
from .tape import EWRecord, GatherRecord, OpRecord, ReverseLevel, WriteRecord

__all__ = ["explain", "Report", "Entry"]


class Entry:
    """One tape record, described: ``kind`` is "op", "gather" or "write"."""

    __slots__ = ("index", "kind", "name", "text", "inputs", "outputs", "shape", "dtype",
                 "saved_bytes", "file", "lineno", "source")

    def __init__(self, index, kind, name, text, inputs, outputs, shape, dtype, saved_bytes, line):
        self.index = index
        self.kind = kind
        self.name = name  # primitive name for ops, "getitem" / "setitem" otherwise
        self.text = text  # e.g. "t2 = np.add(t0, x)" or "x[...] = constant"
        self.inputs = inputs  # storage labels read
        self.outputs = outputs  # storage labels produced or written
        self.shape = shape
        self.dtype = dtype
        self.saved_bytes = saved_bytes
        self.file, self.lineno, self.source = _split_line(line)

    @property
    def where(self) -> str:
        if self.file is None:
            return "<unknown>"
        return f"{os.path.basename(self.file)}:{self.lineno}"

    def __repr__(self):
        return f"Entry(#{self.index} {self.kind} {self.text!r} at {self.where})"


def _split_line(line):
    """``"file:12: `src`"`` (errors.user_line) -> (file, 12, "src")."""
    if not line or line == "<unknown location>":
        return None, None, ""
    loc, _, src = line.partition(": `")
    path, _, num = loc.rpartition(":")
    try:
        return path, int(num), src[:-1] if src.endswith("`") else src
    except ValueError:
        return loc, None, src


class Report:
    """What reverse mode recorded: ``entries`` plus totals, the value and the gradient.

    ``str(report)`` is what ``explain`` prints: every record (:meth:`table`)
    for a tape of at most ``max_rows`` records, else the records grouped by
    source line (:meth:`summary`). :meth:`to_dot` gives the data-flow graph
    in Graphviz DOT.
    """

    max_rows = 60

    def __init__(self, name, entries, labels, arg_labels, out_label, value, grad):
        self.name = name
        self.entries: list[Entry] = entries
        self._labels = labels  # storage label -> "shape dtype"
        self._arg_labels = arg_labels
        self._out_label = out_label
        self.value = value
        self.grad = grad

    @property
    def n_ops(self) -> int:
        return sum(e.kind == "op" for e in self.entries)

    @property
    def n_gathers(self) -> int:
        return sum(e.kind == "gather" for e in self.entries)

    @property
    def n_writes(self) -> int:
        return sum(e.kind == "write" for e in self.entries)

    @property
    def bytes_saved(self) -> int:
        return sum(e.saved_bytes for e in self.entries)

    def totals(self) -> str:
        saving = sum(e.saved_bytes > 0 for e in self.entries)
        return (f"{len(self.entries)} records: {self.n_ops} operations, {self.n_gathers} copying reads, "
                f"{self.n_writes} writes ({saving} of them saved what they overwrote); "
                f"{_fmt_bytes(self.bytes_saved)} saved by writes")

    def table(self) -> str:
        """Every record, one per line."""
        rows = [("#", "kind", "record", "shape", "saved", "where", "source")]
        for e in self.entries:
            saved = _fmt_bytes(e.saved_bytes) if e.kind == "write" else ""
            rows.append((str(e.index), e.kind, e.text, str(e.shape), saved, e.where, e.source))
        return _columns(rows, right=(0, 4))

    def by_line(self) -> list[tuple[str, str, int, int, int]]:
        """Per source line, in order of first appearance: (where, source, records, writes, bytes saved)."""
        acc: dict = {}
        for e in self.entries:
            key = (e.where, e.source)
            n, w, nb = acc.get(key, (0, 0, 0))
            acc[key] = (n + 1, w + (e.kind == "write"), nb + e.saved_bytes)
        return [(k[0], k[1], *v) for k, v in acc.items()]

    def summary(self) -> str:
        """The records grouped by source line (for long tapes: loops)."""
        rows = [("where", "records", "writes", "saved", "source")]
        for where, src, n, w, nb in self.by_line():
            rows.append((where, str(n), str(w), _fmt_bytes(nb), src))
        return _columns(rows, right=(1, 2, 3))

    def __str__(self):
        args = ", ".join(f"{a} {self._labels[a]}" for a in self._arg_labels)
        head = f"tape of {self.name}({args}):"
        body = self.table() if len(self.entries) <= self.max_rows else (
            f"(grouped by source line; report.table() lists all {len(self.entries)} records)\n" + self.summary())
        return "\n".join([head, body, self.totals()])

    __repr__ = __str__

    def to_dot(self) -> str:
        """The tape as a Graphviz DOT graph: a node per record, an edge per
        array flowing from the record that last produced or wrote it to the
        record that reads it."""
        out = ["digraph tape {", '  rankdir=TB;', '  node [shape=box, fontname="monospace"];']
        for a in self._arg_labels:
            out.append(f'  "{a}" [shape=ellipse, label="{_esc(a)}\\n{_esc(self._labels.get(a, ""))}"];')
        last = {a: a for a in self._arg_labels}  # storage label -> node that last produced it
        edges = []
        for e in self.entries:
            node = f"r{e.index}"
            parts = [f"#{e.index} {e.text}", e.where]
            if e.saved_bytes:
                parts.append(f"saved {_fmt_bytes(e.saved_bytes)}")
            label = "\\n".join(_esc(p) for p in parts)
            shape = ', style=filled, fillcolor="#fde7c8"' if e.kind == "write" else ""
            out.append(f'  "{node}" [label="{label}"{shape}];')
            for s in e.inputs:
                if s in last:
                    edges.append(f'  "{last[s]}" -> "{node}" [label="{_esc(s)}"];')
            for s in e.outputs:
                last[s] = node
        if self._out_label is not None and self._out_label in last:
            out.append('  "output" [shape=ellipse];')
            edges.append(f'  "{last[self._out_label]}" -> "output" [label="{_esc(self._out_label)}"];')
        out.extend(edges)
        out.append("}")
        return "\n".join(out) + "\n"


def _columns(rows, right=()) -> str:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
    lines = []
    for r in rows:
        cells = [c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths))]
        lines.append(("  " + "  ".join(cells + [r[-1]])).rstrip())
    return "\n".join(lines)


def _esc(s: str) -> str:
    return s.replace("\\", "\\\\").replace('"', '\\"')


def _fmt_bytes(n: int) -> str:
    if n < 10 * 1024:
        return f"{n} B"
    if n < 10 * 1024 * 1024:
        return f"{n / 1024:.1f} KiB"
    return f"{n / 1024 ** 2:.1f} MiB"


def _nbytes(saved) -> int:
    if saved is None:
        return 0
    b = bottom(saved)
    nb = getattr(b, "nbytes", None)
    return int(nb) if nb is not None else int(np.asarray(b).nbytes)


def _fmt_index(idx) -> str:
    parts = idx if type(idx) is tuple else (idx,)
    out = []
    for i in parts:
        if i is Ellipsis:
            out.append("...")
        elif i is None:
            out.append("None")
        elif isinstance(i, slice):
            s = "" if i.start is None else str(i.start)
            s += ":" + ("" if i.stop is None else str(i.stop))
            if i.step is not None:
                s += f":{i.step}"
            out.append(s)
        elif isinstance(i, np.ndarray):
            out.append(f"{i.dtype.name}{list(i.shape)}")
        else:
            out.append(str(i))
    return ", ".join(out)


class _Namer:
    """Short, stable labels for storages: the argument's name or t0, t1, ..."""

    def __init__(self):
        self.names: dict[int, str] = {}
        self.info: dict[str, str] = {}
        self.keep: list = []  # keep storages alive so ids stay unique
        self.count = 0

    def __call__(self, s, geom=None) -> str:
        name = self.names.get(id(s))
        if name is None:
            if s.name:
                name = _arg_label(s.name)
            else:
                name, self.count = f"t{self.count}", self.count + 1
            self.names[id(s)] = name
            self.keep.append(s)
            self.info[name] = f"{s.shape} {s.dtype}"
        return name


def _arg_label(name: str) -> str:
    # "argument 0" -> "x0", "argument 1 leaf 2" -> "x1.2"
    parts = name.split()
    if len(parts) >= 2 and parts[0] == "argument":
        return "x" + parts[1] + ("." + parts[3] if len(parts) >= 4 else "")
    return name


def _describe(rec, k, label):
    t = type(rec)
    if t is OpRecord or t is EWRecord:
        ins = [label(s) for s, _, _ in rec.inputs]
        outs = [label(s) for s in rec.outputs if s is not None]
        lhs = ", ".join(outs) if outs else "_"
        first = next((s for s in rec.outputs if s is not None), None)
        return Entry(k, "op", rec.prim.name, f"{lhs} = {rec.prim.name}({', '.join(ins)})", ins, outs,
                     first.shape if first is not None else (), first.dtype if first is not None else None,
                     0, rec.line)
    if t is GatherRecord:
        src, out = label(rec.src), label(rec.out)
        return Entry(k, "gather", "getitem", f"{out} = {src}[{_fmt_index(rec.idx)}]", [src], [out],
                     rec.out.shape, rec.out.dtype, 0, rec.line)
    if t is WriteRecord:
        dest = label(rec.dest)
        ins = [dest]
        if rec.vsrc is not None:
            val = label(rec.vsrc)
            ins.insert(0, val)
            if rec.vgeom is not None:
                val += "[view]"
        else:
            val = "constant"
        target = dest + ("[view]" if rec.geom is not None else "")
        return Entry(k, "write", "setitem", f"{target}[{_fmt_index(rec.idx)}] = {val}", ins, [dest],
                     rec.dest.shape, rec.dest.dtype, _nbytes(rec.saved), rec.line)
    raise TypeError(f"unknown tape record {rec!r}")


def explain(f: Callable, *args: Any, argnums=0, dot: str | os.PathLike | None = None,
            show: bool = True, **kwargs: Any) -> Report:
    """Run ``f(*args)`` under reverse mode and report what the tape recorded.

    Prints (unless ``show=False``) and returns a :class:`Report`: each
    recorded operation, element read and in-place write with your
    ``file:line``, the bytes each write saved to rewind it, and totals. If
    ``f`` returns a real scalar the reverse pass runs too, and
    ``report.value`` / ``report.grad`` hold what ``mg.value_and_grad`` would
    give. With ``dot="tape.dot"`` the data-flow graph is also written as
    Graphviz DOT (``report.to_dot()`` returns it as a string). Like ``grad``,
    arguments end holding exactly what a plain call leaves in them.

    >>> import numpy as np, mutagrad as mg
    >>> from mutagrad.explain import explain
    >>> r = explain(lambda x: np.sum(np.sin(x)), np.zeros(2), show=False)
    >>> [e.text for e in r.entries]
    ['t0 = np.sin(x0)', 't1 = np.sum(t0)']
    """
    from .api import _check_callable

    _check_callable(f, "explain")
    nums, single = _normalize_argnums(argnums)
    level = ReverseLevel(record_lines=True)
    try:
        with level:
            kwargs = dict(kwargs)  # (its float arrays traced constants, buffers as grad's are: customrules)
            targs, infos = _wrap_args(level, args, nums, f, kwargs)
            out = f(*targs, **kwargs)
        label = _Namer()
        arg_labels = [label(info.storage) for _, linfo in infos.values() for info in linfo]
        entries = [_describe(rec, k, label) for k, rec in enumerate(level.tape)]
        traced_out = isinstance(out, Tracer) and out._level is level
        out_label = label(out._storage) if traced_out else None
        grads = None
        b = bottom(out)
        if np.shape(b) == () and not np.iscomplexobj(b):
            if traced_out:
                level.seed(out._storage, out._geom, np.ones((), out.dtype))
            level.backward()
            grads = _collect(level, infos, nums, single)
        # (for other outputs no reverse pass is needed: the arrays already hold
        # what a plain call leaves in them)
        value = _unwrap_level(out, level)
    finally:
        level.tape = []
        level.snapshots.clear()
    name = getattr(f, "__qualname__", None) or repr(f)
    report = Report(name, entries, label.info, arg_labels, out_label, value, grads)
    if dot is not None:
        with open(dot, "w", encoding="utf-8") as fh:
            fh.write(report.to_dot())
    if show:
        print(report, file=sys.stdout)
    return report
