"""Runs: element-level code recorded as rows of flat arrays (mutagrad/runs.py).

Every program here is checked against central finite differences and forward
mode (check_grads, second order too), and the element loops are also checked
to be recorded by runs (otherwise they would test the ordinary records).
"""
import numpy as np
import pytest

import mutagrad as mg
import mutagrad.numpy as mnp
from mutagrad import tape as tape_mod
from mutagrad.runs import ScalarRun
from mutagrad.core import REGISTRY
from mutagrad.registry import defelementwise
from mutagrad.testing import check_grads, numerical_grad

RNG = np.random.default_rng(11)
X = RNG.uniform(0.5, 1.5, 7)
M = RNG.uniform(0.5, 1.5, (3, 4))


def recurrence(x):
    out = np.zeros_like(x)
    out[0] = x[0]
    for i in range(1, x.shape[0]):
        out[i] = 0.9 * out[i - 1] + np.sin(x[i]) * x[i - 1]
    return np.sum(out * out)


def overwrite_after_read(x):
    # element reads and writes of the argument itself: the overwritten values are read later
    s = x[0] * x[1]
    for i in range(x.shape[0] - 1):
        x[i] = x[i + 1] ** 2 - x[i] * s
    return np.sum(np.cos(x)) + s


def read_whole_then_write_elements(x):
    y = np.sin(x) * x  # these pullbacks read x as it is now: the element writes save what they overwrite
    for i in range(x.shape[0]):
        x[i] = x[i] * 2.0 + y[i]
    return np.sum(y * np.cos(x))


def negative_and_numpy_indices(x):
    acc = x[-1] * 2.0
    for i in np.arange(1, x.shape[0]):
        acc = acc * 0.5 + x[-i] / (1.0 + x[i])
        x[-i] = acc
    return acc + np.sum(x)


def two_d_elements_and_views(m):
    row = m[1]  # a view: its elements are found through the view
    col = m[:, 2]
    t = 0.0
    for j in range(m.shape[1]):
        t = t + row[j] * m[0, j] - np.exp(-m[2, j])
        m[2, j] = t
    for i in range(m.shape[0]):
        col[i] = col[i] * t
    return np.sum(m * m) + t


def mixed_with_array_operations(x):
    s = x[0] * x[1]  # a run
    y = x * s  # an array operation ends it, and reads its scalar
    s2 = s * y[2] + 1.0  # a new run: s comes from the old one
    y[3] = s2
    z = np.tanh(y) * s
    return np.sum(z) + s2 ** 3


def constants_of_every_kind(x):
    a = x[0]
    b = a * 2 + np.float64(0.5) - 3  # int, NumPy and Python constants
    c = np.power(b, 2) + np.maximum(a, 0.75) + np.arctan2(a, b)
    d = 1 - c / 7 + abs(-a)
    return d * x[1]


def written_constant_then_read(x):
    out = np.zeros_like(x)
    for i in range(x.shape[0]):
        out[i] = x[i] * x[i]
        out[i] = 2.0  # a constant overwrites it: no derivative reaches x[i] from out
        out[i] = out[i] * x[i]
    return np.sum(out)


def zero_d_arguments(x, c):
    y = x * c  # 0-d arrays: their operations give NumPy scalars
    for _ in range(3):
        y = y * x + np.sin(y)
    return y


def scalar_argument(s):
    acc = s
    for _ in range(6):  # a run from the first operation on: the tape starts empty
        acc = acc * s + np.sin(acc) / 3.0
    return acc


def constants_of_the_code(x):
    """Numbers of the code are baked into the kind of a row (up to runs.BAKED values per
    kind, then kept per row): many values, ints, -0.0, nan-free, as exponents too."""
    s = x[0] * 1.0
    for k in range(14):
        s = 0.9 * s + x[1] * (k + 1) - np.sin(s) * (1.0 + k / 8.0)  # a new value each step after 8
        s = s ** 2 * 0.25 + s * -0.0 + (s ** 1.5 if k % 3 else 3 * s)  # -0.0 is never baked (== 0.0)
        s = np.power(s, 0.5) / 2 + 0.3 * x[2]
    return s


def references_far_back(x):
    """A row refers to its arguments by distance up to 255 rows back (one byte); farther
    ones, and values of other runs or records, by a reference."""
    first = x[0] * x[1]
    s = x[2] * 1.0
    for _ in range(100):  # 3 rows per step: `first` ends up 300 rows back
        s = s * 0.5 + np.sin(first) * 0.01 + x[3]
    return s * first


def several_arrays_one_space_of_positions(x):
    """Element reads and writes of arrays of different sizes, whose positions share one
    space; some writes save what they overwrite (a whole-array read before them)."""
    a = np.zeros_like(x)
    b = np.ones((2, 3)) * x[1]
    c = x[:3] * 2.0
    for i in range(x.shape[0]):
        a[i] = b[i % 2, i % 3] * x[i] + c[i % 3]
        b[(i + 1) % 2, i % 3] = a[i] * 0.5
        c[i % 3] = c[(i + 1) % 3] + a[i]
    t = np.sum(np.sin(b)) + np.sum(c * c)  # reads all of b and c: later writes save
    for i in range(3):
        b[1, i] = c[i] * x[i]
        c[i] = np.cos(b[0, i])
    return np.sum(a * a) + np.sum(b) + np.sum(c) + t


PROGRAMS = [recurrence, overwrite_after_read, read_whole_then_write_elements, negative_and_numpy_indices, mixed_with_array_operations,
            constants_of_every_kind, written_constant_then_read, constants_of_the_code, references_far_back,
            several_arrays_one_space_of_positions]


@pytest.mark.parametrize("f", PROGRAMS, ids=lambda f: f.__name__)
def test_element_programs(f):
    check_grads(f, X.copy(), order=2)


def test_two_d_elements_and_views():
    check_grads(two_d_elements_and_views, M.copy(), order=2)


@pytest.mark.parametrize("s", [0.7, np.float64(0.7)], ids=["float", "float64"])
def test_scalar_argument(s):
    check_grads(scalar_argument, s, order=2)


def test_non_differentiable_argument_of_a_run_operation():
    # a ufunc rule with a partial None (an argument without a derivative), met in a run
    prim = REGISTRY.get(np.nextafter)  # (np.nextafter's own rules, no derivative: restored after)
    before = None if prim is None else {k: getattr(prim, k) for k in type(prim).__slots__
                                        if k != "__weakref__" and hasattr(prim, k)}
    defelementwise(np.nextafter, 1, None)
    try:
        def f(x):
            s = x[0]
            for i in range(6):
                s = np.nextafter(s * x[1], x[2]) + x[i % 3]
            return s

        x = np.array([0.5, 1.3, 0.2])
        g = mg.grad(f)(x)
        fd = numerical_grad(f, (x,), (0,))[0]
        np.testing.assert_allclose(g, fd, rtol=1e-5, atol=1e-7)
        assert g[2] != 0.0  # (x[2] also enters as an addend)
    finally:
        if before is None:
            del REGISTRY[np.nextafter]
        else:
            for k, v in before.items():
                setattr(prim, k, v)


def test_zero_d_arguments():
    check_grads(zero_d_arguments, np.array(0.7), np.array(1.3), order=2)


def _count_runs(f, *args, runs=False):
    """Rows recorded by runs in ``mg.grad(f)(*args)`` (with ``runs``: the runs)."""
    seen = []
    orig = tape_mod.ReverseLevel.backward

    def spy(level):
        seen.append(sum(1 if runs else len(r) for r in level.tape if type(r) is ScalarRun))
        return orig(level)

    tape_mod.ReverseLevel.backward = spy
    try:
        mg.grad(f)(*args)
    finally:
        tape_mod.ReverseLevel.backward = orig
    return seen[0]


def test_element_loops_are_recorded_by_runs():
    n = X.shape[0]
    # per element: reads out[i-1], x[i], x[i-1]; sin, two products, a sum; one write. The
    # first RUN_AFTER element operations are ordinary records (a run starts after them)
    assert _count_runs(recurrence, X.copy()) == 2 + 8 * (n - 1) - tape_mod.RUN_AFTER
    assert _count_runs(two_d_elements_and_views, M.copy()) > 20


def test_recurrence_closed_form():
    # out[i] = a*out[i-1] + x[i]: d sum(out)/dx[j] = sum_{i>=j} a^(i-j)
    a, n = 0.7, 6

    def f(x):
        out = mnp.zeros(n)
        out[0] = x[0]
        for i in range(1, n):
            out[i] = a * out[i - 1] + x[i]
        return np.sum(out)

    expected = [sum(a ** (i - j) for i in range(j, n)) for j in range(n)]
    np.testing.assert_allclose(mg.grad(f)(np.ones(n)), expected, rtol=1e-14)


def test_pullback_called_twice_and_arguments_restored():
    x = X.copy()
    out, pb = mg.vjp(overwrite_after_read, x)
    after = x.copy()
    g1 = pb(np.float64(1.0))[0]
    g2 = pb(np.float64(2.0))[0]
    np.testing.assert_allclose(g2, 2 * g1, rtol=1e-13)
    np.testing.assert_array_equal(x, after)  # the reverse passes rewound and redid the writes
    fd = numerical_grad(lambda x: overwrite_after_read(x.copy()), (X.copy(),), (0,))[0]
    np.testing.assert_allclose(g1, fd, rtol=1e-6, atol=1e-8)


def test_jacobian_of_an_element_loop():
    def f(x):
        out = mnp.zeros(x.shape[0])
        for i in range(x.shape[0]):
            out[i] = x[i] * x[i - 1]
        return out

    x = X[:4].copy()
    jr = mg.jacobian(f, mode="rev")(x)
    jf = mg.jacobian(f, mode="fwd")(x)
    n = x.shape[0]
    expected = np.zeros((n, n))
    for i in range(n):
        expected[i, i] += x[i - 1]
        expected[i, (i - 1) % n] += x[i]
    np.testing.assert_allclose(jr, expected, rtol=1e-14)
    np.testing.assert_allclose(jf, expected, rtol=1e-14)


def test_hessian_through_runs():
    def f(x):
        s = 0.0
        for i in range(x.shape[0]):
            s = s + x[i] * x[i - 1] * x[i - 2]
        return s

    x = X[:5].copy()
    n = x.shape[0]
    expected = np.zeros((n, n))
    for i in range(n):
        a, b, c = i, (i - 1) % n, (i - 2) % n
        for p, q, r in ((a, b, c), (b, a, c), (c, a, b)):
            expected[p, q] += x[r]
            expected[p, r] += x[q]
    np.testing.assert_allclose(mg.hessian(f)(x), expected, rtol=1e-13)
    np.testing.assert_allclose(mg.grad(lambda x: mg.grad(f)(x)[1])(x), expected[1], rtol=1e-13)


def test_few_element_operations_among_array_operations_keep_records():
    def boundary(u):
        new = u * 1.0
        for _ in range(3):
            new[0] = new[1]  # a boundary condition between array operations
            new[-1] = new[-2]
            new = new * 0.5 + np.roll(new, 1)
        return np.sum(new * new)

    assert _count_runs(boundary, X.copy()) == 0
    check_grads(boundary, X.copy(), order=2)


def test_run_scalar_used_by_a_later_write_of_a_whole_0d_array():
    # a run's scalar written over a whole 0-d array: its cotangent goes back to the run
    def f(x):
        s = x[0] * 3.0
        for _ in range(3):
            s = s * x[1] + x[2]  # enough element operations for a run
        y = x * 1.0  # ends the run
        b = mnp.zeros(())
        b[...] = s
        return np.sum(y) + b * x[1]

    check_grads(f, X[:3].copy(), order=2)


@pytest.mark.parametrize("f", PROGRAMS + [two_d_elements_and_views], ids=lambda f: f.__name__)
def test_wide_references_and_runs_split_by_size(f, monkeypatch):
    # positions beyond 4-byte references (here: beyond 3) widen a run's references to 8 bytes,
    # and a run that is full is followed by a new one whose rows refer to the old one's scalars
    from mutagrad import runs

    widened = []
    wide = runs.ScalarRun._wide

    def spy(self):
        widened.append(self.refs.typecode)
        wide(self)

    monkeypatch.setattr(runs, "REF_MAX", 3)
    monkeypatch.setattr(runs.ScalarRun, "_wide", spy)
    monkeypatch.setattr(tape_mod, "MAX_ROWS", 5)
    x = M.copy() if f is two_d_elements_and_views else X.copy()
    check_grads(f, x, order=2)
    if f in (recurrence, read_whole_then_write_elements, two_d_elements_and_views):
        assert "i" in widened  # (these read or write elements beyond position 3 in a run)
        assert _count_runs(f, x.copy(), runs=True) > 2  # the rows are in more than two runs


def test_references_are_four_bytes():
    run = ScalarRun([])
    assert run.refs.itemsize == 4
    run.refs.extend([5, -(1 << 31), (1 << 31) - 1])
    run._wide()
    assert run.refs.itemsize == 8 and list(run.refs) == [5, -(1 << 31), (1 << 31) - 1]
    run.refs.append(1 << 40)  # a position of an array of more than 2**31 elements


def _rows(f, x):
    """The runs a reverse pass of f records (their rows as recorded)."""
    runs = []
    orig = tape_mod.ReverseLevel.backward

    def spy(level):
        runs.extend(r for r in level.tape if type(r) is ScalarRun)
        return orig(level)

    tape_mod.ReverseLevel.backward = spy
    try:
        mg.grad(f)(x)
    finally:
        tape_mod.ReverseLevel.backward = orig
    return runs


def test_codes_are_one_byte_and_reads_and_writes_keep_one_position():
    def f(x):
        out = np.zeros_like(x)
        for i in range(x.shape[0]):
            out[i] = x[(i * 3) % x.shape[0]]  # the value is the row just before the write
        return np.sum(out * out)

    x = X.copy()
    check_grads(f, x, order=2)
    (run,) = _rows(f, x.copy())  # (the first element operations are ordinary records)
    pairs = len(run.codes) // 2
    assert pairs >= 3 and run.codes.itemsize == 1
    assert len(set(run.codes[0::2])) == len(set(run.codes[1::2])) == 1  # read, write, read, write...
    # one position each, in the run's space of positions of the arrays it reads and writes
    assert len(run.refs) == 2 * pairs


@pytest.mark.parametrize("pad", [250, 300])
def test_codes_widen_past_one_byte(pad, monkeypatch):
    # a level with more kinds of operation than one byte holds: a run made then has 2-byte
    # codes (300), and a run that meets such a kind widens its codes (250: the first new kind
    # fits in a byte, the next ones do not)
    init = tape_mod.ReverseLevel.__init__

    def padded(self, *a, **k):
        init(self, *a, **k)
        self.run_kinds[0].extend([None] * pad)  # kinds no row uses

    monkeypatch.setattr(tape_mod.ReverseLevel, "__init__", padded)
    check_grads(recurrence, X.copy(), order=2)
    runs = _rows(recurrence, X.copy())
    assert runs and all(r.codes.itemsize == 2 for r in runs)


def test_rows_keep_no_baked_constants_and_near_references_in_a_byte():
    from mutagrad.runs import _WRITE_PREV

    (run,) = _rows(recurrence, X.copy())
    # a step of recurrence: three reads, sin, two products (one by 0.9, baked into its kind), a
    # sum, a write of the row before it. Each read and write keeps one position; the operations
    # refer to rows just before them by one byte each (the first step's sum refers to a value
    # outside the run); the values kept are what sin and x[i-1] * sin(x[i]) read
    steps = list(run.codes).count(_WRITE_PREV)  # (the run starts within the first step)
    assert steps >= 3 and 8 * steps - 8 < len(run.codes) <= 8 * steps
    assert len(run.refs) <= 4 * steps + 1
    assert len(run.near) >= 6 * steps - 6
    assert len(run.vals) == 3 * steps and 0.9 not in list(run.vals)


def _element_program(seed, steps=40):
    """Source of a random element-level program: scalar operations on elements of a few
    arrays (the argument among them) with constant numbers that repeat or vary, element
    writes, and whole-array reads that make later writes save what they overwrite."""
    rng = np.random.default_rng(seed)
    consts = ["0.9", "2", "1.5", "-0.0", "3", "{k} / 7.0", "0.25"]
    exprs = ["{c} * {u} + np.sin({v})", "{u} * {v} - {c}", "{u} ** 2 * {c}", "np.tanh({u}) / (1.5 + {v} ** 2)",
             "np.cos({u} * {c}) + {v}", "{c} - {u} * 0.5", "np.arctan2({u}, 2 + {v} ** 2) * {c}"]
    lines = ["def f(x):", "    a = x[:4] * 1.0", "    b = np.zeros((2, 3)) + x[4]", "    s0 = x[0] * 1.0",
             "    s1 = x[1] * 1.0", "    t = 0.0"]

    def elem():
        return str(rng.choice(["a[%d]" % rng.integers(4), "b[%d, %d]" % (rng.integers(2), rng.integers(3)),
                               "x[%d]" % rng.integers(6), "s0", "s1"]))

    for k in range(steps):
        e = str(rng.choice(exprs)).format(c=str(rng.choice(consts)).format(k=k), u=elem(), v=elem())
        r = rng.random()
        if r < 0.4:
            lines.append(f"    s{rng.integers(2)} = np.tanh({e})")
        elif r < 0.9:
            target = str(rng.choice(["a[%d]" % rng.integers(4), "b[%d, %d]" % (rng.integers(2), rng.integers(3)),
                                     "x[%d]" % rng.integers(6)]))
            lines.append(f"    {target} = np.sin({e})")
        else:
            lines.append(f"    t = t + np.sum(np.sin({rng.choice(['a', 'b', 'x'])}))")
    lines.append("    return t + s0 * s1 + np.sum(a * a) + np.sum(b) + np.sum(x ** 2)")
    return "\n".join(lines)


@pytest.mark.parametrize("seed", range(24))
def test_random_element_programs(seed):
    src = _element_program(seed)
    ns = {"np": np}
    exec(compile(src, f"<element program {seed}>", "exec"), ns)
    x = RNG.uniform(-1, 1, 6) if seed % 2 else X[:6].copy()
    assert _count_runs(ns["f"], x.copy(), runs=True) >= 1, src  # recorded by runs
    check_grads(ns["f"], x, order=2 if seed < 6 else 1)


# -- one-element arrays


def tiny_loop(y):
    for _ in range(8):
        y = y * 1.0001 + np.sin(y)
    return np.sum(y)

def written_in_place(y):
    for k in range(6):
        y = y * 0.9 + np.cos(y) * 0.5
    z = y * 2.0
    y[0] = y[0] * 3.0   # an element write into a run's array, then read
    for _ in range(5):
        z = z * 0.5 + y * 0.1
    y += z              # an in-place ufunc over it
    w = np.exp(y * 0.1) * z
    y[...] = w * 0.5    # a whole write
    return np.sum(y * w) + np.sum(z)

def views_of_run_arrays(y):
    for _ in range(6):
        y = np.tanh(y) * 1.5 + y * 0.25
    a = y.reshape(())
    b = y[0:1]
    c = np.broadcast_to(y.reshape(-1), (3,))
    d = y[None] * 2.0
    s = y[0]
    for _ in range(5):
        y = y * s + np.sin(y)
    return np.sum(c * np.arange(1.0, 4.0)) + np.sum(a * b) + np.sum(d) + np.sum(y)

def view_of_an_argument(x):
    v = x[2:3]          # a one-element view of a larger array
    u = x[0:1]
    for _ in range(6):
        v = v * u + np.sin(v) * x[1:2]
    x[3:4] = v          # written back into the argument
    return np.sum(x * x)

def with_a_constant(y, c):
    for _ in range(6):
        y = y * c + np.sin(c * y)
    return np.sum(y)

def matrix_one_by_one(y):
    for _ in range(6):
        y = (y @ y) * 0.5 + np.sin(y)
    return np.sum(y)


ONE_ELEMENT_PROGRAMS = [tiny_loop, written_in_place, views_of_run_arrays, view_of_an_argument, matrix_one_by_one]


@pytest.mark.parametrize("f", ONE_ELEMENT_PROGRAMS, ids=lambda f: f.__name__)
@pytest.mark.parametrize("shape", [(1,), (1, 1)])
def test_one_element_arrays_in_element_loops(f, shape):
    # shape-(1,) state (scipy.integrate's habit) in element-level loops, written in place and
    # viewed: ordinary records (runs take scalars only), checked as the programs above
    if f is view_of_an_argument:
        if shape != (1,):
            pytest.skip("one shape")
        x = np.array([0.3, 0.7, 0.2, 0.9])
    else:
        x = np.full(shape, 0.3)
    check_grads(lambda a: f(a.copy()), x.copy(), order=2)
    plain, traced = x.copy(), x.copy()
    assert mg.value_and_grad(f)(traced)[0] == f(plain)
    np.testing.assert_array_equal(traced, plain)


def test_one_element_constant_and_pullback_called_twice():
    check_grads(lambda y: with_a_constant(y, np.array([0.8])), np.array([0.3]), order=2)
    g = mg.grad(with_a_constant, argnums=(0, 1))(np.array([0.3]), np.array([0.8]))
    fd = numerical_grad(with_a_constant, (np.array([0.3]), np.array([0.8])), (0, 1))
    for a, b in zip(g, fd):
        np.testing.assert_allclose(a, b, rtol=1e-6)
    _, pb = mg.vjp(written_in_place, np.array([0.3]))
    g1 = pb(np.float64(1.0))[0]
    g2 = pb(np.float64(2.0))[0]
    np.testing.assert_allclose(g2, 2 * g1, rtol=1e-13)
    fd = numerical_grad(lambda a: written_in_place(a.copy()), (np.array([0.3]),), (0,))[0]
    np.testing.assert_allclose(g1, fd, rtol=1e-6)
