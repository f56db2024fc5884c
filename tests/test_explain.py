"""The tape report: counts, saved bytes, user lines, DOT output."""
import re

import numpy as np
import pytest

import mutagrad as mg
import mutagrad.numpy as mnp
from mutagrad.explain import Report, explain


def seed(x):
    y = np.log(x)                 # LINE: log
    x.fill(0.0)                   # LINE: fill
    return np.sum(y + x)          # LINE: sum


def _line_of(tag):
    """Line number of the line in this file tagged ``# LINE: tag``."""
    with open(__file__) as fh:
        for n, text in enumerate(fh, 1):
            if text.rstrip().endswith(f"# LINE: {tag}"):
                return n
    raise LookupError(tag)


def test_seed_counts_bytes_and_gradient(capsys):
    x = np.array([1.0, 2.0, 4.0])
    r = explain(seed, x)
    assert isinstance(r, Report)
    assert [e.kind for e in r.entries] == ["op", "write", "op", "op"]
    assert [e.name for e in r.entries] == ["np.log", "setitem", "np.add", "np.sum"]
    assert (r.n_ops, r.n_gathers, r.n_writes) == (3, 0, 1)
    # log read x, so the fill saves x's three float64 elements and nothing else is saved
    assert r.entries[1].saved_bytes == 3 * 8
    assert r.bytes_saved == 24
    np.testing.assert_allclose(r.grad, [1.0, 0.5, 0.25])  # d/dx sum(log x) = 1/x
    assert r.value == pytest.approx(np.log(8.0))
    # side effects of a plain call
    np.testing.assert_array_equal(x, [0.0, 0.0, 0.0])
    printed = capsys.readouterr().out
    assert "24 B" in printed and "x.fill(0.0)" in printed
    assert "4 records: 3 operations, 0 copying reads, 1 writes" in printed


def test_lines_point_to_this_file():
    r = explain(seed, np.array([1.0, 2.0]), show=False)
    assert all(e.file == __file__ for e in r.entries)
    assert [e.lineno for e in r.entries] == [_line_of("log"), _line_of("fill"), _line_of("sum"), _line_of("sum")]
    assert r.entries[1].source.startswith("x.fill(0.0)")
    assert r.entries[0].where == f"test_explain.py:{_line_of('log')}"


def loop(x, n):
    out = mnp.zeros(n)
    for i in range(n):
        out[i] = x[0] * i         # LINE: loop write
    x[0] = 5.0                    # LINE: overwrite
    s = np.sin(x)
    x[1] = 7.0                    # LINE: overwrite after sin
    return np.sum(out ** 2) + np.sum(s)


def test_write_saves_only_what_it_overwrites():
    n = 50
    r = explain(loop, np.array([2.0, 3.0]), n, show=False)
    writes = [e for e in r.entries if e.kind == "write"]
    assert len(writes) == n + 2
    # No pullback reads the buffer's or x's old values before sin reads x: those
    # writes save nothing (an element read's pullback needs no values). Once
    # sin has read x, overwriting x[1] saves that one float64 element.
    assert [w.saved_bytes for w in writes] == [0] * (n + 1) + [8]
    assert writes[-1].lineno == _line_of("overwrite after sin")
    assert r.bytes_saved == 8
    assert r.n_gathers == n  # one x[0] element read per iteration
    # x[0] is overwritten before sin reads it; x[1] only reaches sin
    np.testing.assert_allclose(r.grad, [2 * 2.0 * sum(i * i for i in range(n)), np.cos(3.0)])
    rows = {where: (records, w, nb) for where, _, records, w, nb in r.by_line()}
    assert rows[f"test_explain.py:{_line_of('loop write')}"] == (3 * n, n, 0)
    assert rows[f"test_explain.py:{_line_of('overwrite')}"] == (1, 1, 0)
    assert rows[f"test_explain.py:{_line_of('overwrite after sin')}"] == (1, 1, 8)
    text = str(r)  # a long tape prints grouped by source line
    assert "grouped by source line" in text and f"lists all {len(r.entries)} records" in text


def test_argnums_tuple_and_kwargs():
    def f(a, b, scale=1.0):
        a[0] = b * scale
        return np.sum(a * a)

    r = explain(f, np.array([1.0, 2.0]), 3.0, argnums=(0, 1), scale=2.0, show=False)
    ga, gb = r.grad
    np.testing.assert_allclose(ga, [0.0, 4.0])
    assert gb == pytest.approx(2 * 6.0 * 2.0)
    assert r.entries[-1].name == "np.sum"


def test_vector_output_is_recorded_without_gradient():
    def shift(x):
        x[1:] = 2 * x[:-1]  # the pullback of 2 * x needs only 2: nothing to save
        return x

    x = np.arange(4.0)
    r = explain(shift, x, show=False)
    assert r.grad is None
    assert r.n_writes == 1 and r.entries[-1].saved_bytes == 0
    np.testing.assert_array_equal(r.value, [0.0, 0.0, 2.0, 4.0])
    np.testing.assert_array_equal(x, [0.0, 0.0, 2.0, 4.0])

    def square_shift(x):
        x[1:] = x[:-1] ** 2  # the pullback of x ** 2 reads x: the 3 overwritten elements are saved
        return x

    r = explain(square_shift, np.arange(4.0), show=False)
    assert r.n_writes == 1 and r.entries[-1].saved_bytes == 3 * 8


def _dot_graph(text):
    """Nodes and edges of the small DOT subset to_dot writes."""
    assert text.startswith("digraph tape {") and text.rstrip().endswith("}")
    nodes = dict(re.findall(r'^  "([^"]+)" \[(?:shape=ellipse, )?label="((?:[^"\\]|\\.)*)"', text, re.M))
    nodes.update({n: n for n in re.findall(r'^  "([^"]+)" \[shape=ellipse\];', text, re.M)})
    edges = re.findall(r'^  "([^"]+)" -> "([^"]+)" \[label="([^"]*)"\];', text, re.M)
    return nodes, edges


def test_dot_output(tmp_path):
    path = tmp_path / "tape.dot"
    r = explain(seed, np.array([1.0, 2.0]), dot=str(path), show=False)
    text = path.read_text()
    assert text == r.to_dot()
    nodes, edges = _dot_graph(text)
    assert set(nodes) == {"x0", "r0", "r1", "r2", "r3", "output"}
    assert nodes["r0"].startswith("#0 t0 = np.log(x0)")
    assert "saved 16 B" in nodes["r1"] and f"test_explain.py:{_line_of('fill')}" in nodes["r1"]
    # data flow: log reads x; the fill rewrites x; add reads log's output and the rewritten x
    assert ("x0", "r0", "x0") in edges
    assert ("x0", "r1", "x0") in edges
    assert ("r0", "r2", "t0") in edges and ("r1", "r2", "x0") in edges
    assert ("r2", "r3", "t1") in edges and ("r3", "output", "t2") in edges
    assert text.count("->") == len(edges) == 6


def test_explain_takes_a_keyword_buffer_as_grad_does():
    # (customrules) mg.grad(f)(x, out=buf) writes traced values into the keyword buffer; explain refused it
    # (WriteToPlainArrayError): its float arrays are traced constants there too, left as a plain call leaves them
    def f(x, *, out):
        out[:] = np.sin(x)
        return np.sum(out * x)

    x = np.array([0.5, -1.0, 2.0])
    buf = np.zeros(3)
    r = explain(f, x, out=buf, show=False)
    np.testing.assert_allclose(r.grad, np.sin(x) + x * np.cos(x), rtol=1e-14)  # (by hand)
    np.testing.assert_array_equal(buf, np.sin(x))
    np.testing.assert_allclose(r.grad, mg.grad(f)(x, out=np.zeros(3)), rtol=1e-15)
