"""CI entry of the program fuzzer (issue 3, item 9(b)); see tests/fuzz_programs.py.

Runs CHUNKS x PER_CHUNK random programs (fixed seeds) in both modes against
finite differences and a plain call. Statement kinds listed in
``fuzz_programs.KNOWN_CORE_BUGS`` are not generated here; the full stream is
``python -m tests.fuzz_programs --count 10000 --seed 0``.
"""
import collections

import numpy as np
import pytest

import mutagrad as mg
from tests import fuzz_programs as fz

CHUNKS = 6
PER_CHUNK = 100


def _failures(seed, count, nested=False):
    """Minimised failures among ``count`` programs of stream ``seed`` (at most three)."""
    failures = []
    for i in range(count):
        prog = fz.generate(seed, i, fz.KNOWN_CORE_BUGS)
        o = fz.check_program(prog, nested)
        assert o.status != "invalid", f"generated program does not run in plain NumPy:\n{prog.source()}\n{o.message}"
        if o.status == "fail":
            small, so = fz.minimise(prog, o, nested)
            flag = "--nested " if nested else ""
            failures.append(f"{flag}--seed {seed} --only {i}: {so.category}\n{small.script()}\n{so.message}")
            if len(failures) >= 3:
                break
    return failures


@pytest.mark.parametrize("chunk", range(CHUNKS))
def test_random_programs(chunk):
    failures = _failures(1000 + chunk, PER_CHUNK)
    assert not failures, "\n\n".join(failures)


def test_random_programs_nested():
    # second and third derivatives (Hessian-vector products both ways, a third directional
    # derivative) of random in-place programs against finite differences of the lower order
    failures = _failures(2000, 60, nested=True)
    assert not failures, "\n\n".join(failures)


@mg.primitive
def _cube(x):
    return x ** 3


@mg.rrule(_cube)
def _cube_rrule(x):
    # a pullback that converts its argument: right at first order, refused under an outer level
    return _cube(x), lambda g: (g * 3.0 * np.asarray(x) ** 2,)


def test_nested_checker_counts_a_refused_second_derivative_as_a_failure():
    o = fz.check(lambda a: np.sum(_cube(np.sin(a))), [np.array([0.3, 0.5, 0.9])], nested=True)
    assert o.status == "fail" and o.category.startswith("nested-") and "raised" in o.category, o
    assert fz.check(lambda a: np.sum(_cube(np.sin(a))), [np.array([0.3, 0.5, 0.9])]).status == "pass"


def test_generator_covers_every_kind():
    seen = collections.Counter()
    for i in range(300):
        prog = fz.generate(1000, i, fz.KNOWN_CORE_BUGS)
        seen.update(k.split("+")[0] for k in prog.kinds())
        assert not any(fz.excluded(k, fz.KNOWN_CORE_BUGS) for k in prog.kinds())
    missing = {k for k in fz.ALL_KINDS if not fz.excluded(k, fz.KNOWN_CORE_BUGS)} - set(seen)
    assert not missing, f"kinds never generated: {sorted(missing)}"


def test_generation_is_reproducible():
    a, b = fz.generate(3, 7), fz.generate(3, 7)
    assert a.source() == b.source()
    assert all(np.array_equal(x, y) for x, y in zip(a.args, b.args))


def _planted(x, y):
    """A derivative bug planted in the program itself: stop_gradient hides a dependence
    that finite differences see."""
    y[1:] = x[:2] * 2.0
    x *= mg.stop_gradient(np.sin(x))
    return np.sum(x * y)


def test_checker_catches_a_wrong_derivative():
    o = fz.check(_planted, [np.array([0.3, -0.7, 1.1]), np.array([0.5, 0.2, -0.4])])
    assert o.status == "fail" and o.category == "rev-vs-fd"
    assert "fwd-vs-fd" in o.message


def test_minimiser_keeps_the_failing_statement():
    units = [("elementwise", "v1 = np.cos(a0)"),
             ("set_basic", "a0[1:] = v1[:2]"),
             ("imul", "a0 *= mg.stop_gradient(np.sin(a0))"),
             ("term", "out = out + np.sum(a0 * np.array([0.5, -1.0, 2.0]))"),
             ("term", "out = out + np.sum(v1 * np.array([1.0, 2.0, 3.0]))")]
    prog = fz.Program([np.array([0.3, -0.7, 1.1])], units)
    o = fz.check_program(prog)
    assert o.status == "fail"
    small, so = fz.minimise(prog, o)
    assert so.status == "fail" and so.category == o.category
    assert units[2] in small.units and len(small.units) < len(units)


def test_random_programs_with_elision_at_every_size(monkeypatch):
    # temporary elision (mutagrad/elide.py) runs from 256 KiB; its checks do not depend on the
    # size, so with the threshold at one byte (and every root held weakly, as large ones are)
    # the fuzzer's small programs exercise it on every operator chain they contain: a check that
    # elision leaves mutating programs' values and derivatives alone (the cases built to break
    # it are in test_elide.py)
    from mutagrad import core, tape

    monkeypatch.setattr(core, "ELIDE_BYTES", 1)
    monkeypatch.setattr(core, "WEAK_ROOT_SIZE", 0)
    done = []
    elide = tape.ReverseLevel._elide

    def counted(self, *args):
        r = elide(self, *args)
        done.append(r is not None)
        return r

    monkeypatch.setattr(tape.ReverseLevel, "_elide", counted)
    failures = []
    for i in range(PER_CHUNK):
        prog = fz.generate(2000, i, fz.KNOWN_CORE_BUGS)
        o = fz.check_program(prog)
        if o.status == "fail":
            failures.append(f"--seed 2000 --only {i}: {o.category}\n{prog.script()}\n{o.message}")
            if len(failures) >= 3:
                break
    assert not failures, "\n\n".join(failures)
    assert sum(done) > 50  # it did elide
