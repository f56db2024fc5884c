"""Every ```python block in docs/*.md runs: the blocks of one page run in
order in one namespace, with line numbers that point into the page.

Blocks fenced as ```text (or any other language) are not run.
"""
import glob
import os
import re

import pytest

DOCS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "docs")
PAGES = sorted(glob.glob(os.path.join(DOCS, "*.md")))
FENCE = re.compile(r"^```(\S*)[^\n]*\n(.*?)^```[ \t]*$", re.S | re.M)


def python_blocks(path):
    """(first line number, source) of each ```python block of a page."""
    with open(path, encoding="utf-8") as fh:
        text = fh.read()
    out = []
    for m in FENCE.finditer(text):
        if m.group(1) == "python":
            first = text.count("\n", 0, m.start(2)) + 1
            out.append((first, m.group(2)))
    return out


def test_pages_exist():
    names = {os.path.basename(p) for p in PAGES}
    assert {"index.md", "mutation.md", "rules.md", "errors.md", "comparison.md", "complex.md"} <= names


@pytest.mark.parametrize("path", PAGES, ids=[os.path.basename(p) for p in PAGES])
def test_page_runs(path, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # pages may write files (a DOT graph, a picture)
    namespace = {"__name__": f"docs_{os.path.basename(path)[:-3]}"}
    for first, src in python_blocks(path):
        # pad so that tracebacks and mutagrad's file:line messages point into the page
        code = compile("\n" * (first - 1) + src, path, "exec")
        exec(code, namespace)


def test_fences_are_closed_and_labelled():
    """An unlabelled or unclosed fence would silently skip code."""
    for path in PAGES:
        with open(path, encoding="utf-8") as fh:
            lines = fh.read().splitlines()
        opened = None
        for n, line in enumerate(lines, 1):
            if line.startswith("```"):
                if opened is None:
                    assert line[3:].strip(), f"{path}:{n}: label the code block (```python or ```text)"
                    opened = n
                else:
                    assert line.strip() == "```", f"{path}:{n}: a fence inside the block opened at line {opened}"
                    opened = None
        assert opened is None, f"{path}:{opened}: code block never closed"
