"""The tape holds nothing after grad returns; tapes are per thread; memory
for mutation is proportional to what is overwritten."""
import concurrent.futures
import gc
import threading
import tracemalloc
import warnings
import weakref

import numpy as np
import pytest

import mutagrad as mg
import mutagrad.numpy as mnp
from mutagrad.testing import check_grads


def test_nothing_survives_a_gradient_call():
    refs = []

    def f(x):
        y = np.exp(x) * 2.0
        refs.append(weakref.ref(y))
        z = mnp.zeros(1000)
        z[:] = y
        refs.append(weakref.ref(z))
        return np.sum(z)

    mg.grad(f)(np.ones(1000))
    gc.collect()
    assert all(r() is None for r in refs)


def test_repeated_calls_do_not_grow_memory():
    def f(x):
        b = mnp.zeros(2000)
        for i in range(20):
            b[i] = x[i] ** 2
        return np.sum(np.sin(b) * x)

    g = mg.grad(f)
    x = np.linspace(0.1, 1.0, 2000)
    for _ in range(3):
        g(x)
    gc.collect()
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    for _ in range(30):
        g(x)
    gc.collect()
    grown = tracemalloc.get_traced_memory()[0] - base
    tracemalloc.stop()
    assert grown < 100_000, grown


def _gradient_within(f, x, limit):
    """The gradient of ``f(x, 60)`` (60 steps), which must peak below ``limit`` bytes."""
    tracemalloc.start()
    g = mg.grad(lambda x: f(x, 60))(x.copy())
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < limit, peak
    return g


def test_a_view_of_each_steps_temporary_does_not_keep_the_temporaries():
    """An elementwise operation keeps its small arguments for its partials: a view of a large
    temporary kept as it is would keep the temporary alive with the tape (memory n steps x the
    array). Here 1-element views (unread by `+`) and 100-element ones (read by sin and `*`)."""
    n = 100_000

    def f(x, steps):
        u = x
        acc = x[:1] * 0.0
        acc2 = x[:100] * 0.0
        for _ in range(steps):
            u = u + 0.01  # a fresh n-element array each step
            acc = acc + u[0:1]
            acc2 = acc2 + np.sin(u[:100]) * u[100:200]
        return np.sum(acc) + np.sum(acc2) + np.sum(u)

    x = np.linspace(0.0, 1.0, n)
    g = _gradient_within(f, x, 12 * n * 8)  # (60 steps kept: 60 n * 8 bytes)
    # d/dx: 1 (u's sum) + steps (acc) on x[0]; on x[:100] sum_k cos(x + 0.01 k) * (x[100:200] + 0.01 k),
    # on x[100:200] sum_k sin(x[:100] + 0.01 k): by hand
    k = 0.01 * np.arange(1, 61)[:, None]
    want = np.ones(n)
    want[0] += 60
    want[:100] += np.sum(np.cos(x[:100] + k) * (x[100:200] + k), axis=0)
    want[100:200] += np.sum(np.sin(x[:100] + k), axis=0)
    np.testing.assert_allclose(g, want, rtol=1e-10)


def test_views_read_by_rules_do_not_keep_each_steps_temporary():
    """The same through other rules' pullbacks, which keep what they read: max, norm, matmul of a
    constant matrix and of two traced operands, prod."""
    n = 100_000
    W = np.array([[0.5, -1.0, 2.0], [1.5, 0.25, -0.75]])

    def f(x, steps):
        u = x
        acc = 0.0
        v = x[10:13] * 1.0
        for _ in range(steps):
            u = u * 1.0001
            acc = acc + np.max(u[:50]) + np.linalg.norm(u[50:100]) + np.sum(W @ u[200:203])
            acc = acc + np.sum(np.outer(u[300:303], v) @ u[400:403]) + np.prod(u[500:504])
        return acc + np.sum(u * u)

    rng = np.random.default_rng(0)
    x = rng.uniform(0.5, 1.5, n)
    g = _gradient_within(f, x, 12 * n * 8)  # (60 steps kept: 60 n * 8 bytes)
    d = rng.standard_normal(n)  # a central difference along a random direction
    fd = (f(x + 1e-6 * d, 60) - f(x - 1e-6 * d, 60)) / 2e-6
    np.testing.assert_allclose(g @ d, fd, rtol=1e-6)


def test_in_place_operations_and_scalar_results_on_views_do_not_keep_temporaries():
    """The in-place forms (acc += u[:3]), out= into another array, and a 0-d view's scalar result
    kept each step's temporary too."""
    n = 100_000

    def f(x, steps):
        u = x
        acc = mnp.zeros(3)
        t = mnp.zeros(3)
        s = 0.0
        for _ in range(steps):
            u = u * 1.0001
            acc += u[:3]
            acc *= u[3:6]
            np.sin(u[6:9], out=t)
            s = s + u[10, ...] * u[11]
            acc += t
        return np.sum(acc) + s + np.sum(u)

    rng = np.random.default_rng(1)
    x = rng.uniform(0.5, 1.0, n)
    g = _gradient_within(f, x, 12 * n * 8)
    d = rng.standard_normal(n)  # a central difference along a random direction
    fd = (f(x + 1e-6 * d, 60) - f(x - 1e-6 * d, 60)) / 2e-6
    np.testing.assert_allclose(g @ d, fd, rtol=1e-6)


def test_an_in_place_operation_on_an_argument_that_views_a_large_array():
    # the destination holds the result after the operation: kept as it is (the reverse pass puts
    # its old values back for the partial), not copied (the copy had the new values: gradient 1.5, not 2)
    big = np.linspace(0.5, 1.5, 100_000)

    def f(v):
        v *= v[::-1].copy()
        v *= 2.0
        return np.sum(v ** 2)

    # sum((2 v_i v_{4-i})^2) = 4 sum v_i^2 v_{4-i}^2: d/dv_i = 16 v_i v_{4-i}^2, 16 v_2^3 at the middle, by hand
    v = big[:5]
    want = 16 * v * v[::-1] ** 2
    want[2] = 16 * v[2] ** 3
    np.testing.assert_allclose(mg.grad(f)(big.copy()[:5]), want, rtol=1e-13)


@pytest.mark.parametrize("op", ["imul", "multiply_out", "arctan2_out"])
def test_an_in_place_operation_reading_a_view_of_its_large_destination(op):
    # x *= x[:1]: every element times the OLD x[0]; the view is copied (it views a much larger
    # array) before the operation overwrites it, not after (x[0]'s partial read x0^2: [x1, x0^2])
    def f(x):
        if op == "imul":
            x *= x[:1]
        elif op == "multiply_out":
            np.multiply(x, x[:1], out=x)
        else:
            np.arctan2(x, x[:1], out=x)
        return x[1] + 0.5 * x[2]

    x = np.linspace(1.5, 2.5, 20_000)
    g = mg.grad(f)(x.copy())
    x0, x1, x2 = x[:3]
    if op == "arctan2_out":  # d/dx atan2(a, b) = (b da - a db) / (a^2 + b^2), by hand
        want = [(-x1 / (x1 ** 2 + x0 ** 2)) - 0.5 * x2 / (x2 ** 2 + x0 ** 2), x0 / (x1 ** 2 + x0 ** 2),
                0.5 * x0 / (x2 ** 2 + x0 ** 2)]
    else:  # x1 x0 + 0.5 x2 x0, by hand
        want = [x1 + 0.5 * x2, x0, 0.5 * x0]
    np.testing.assert_allclose(g[:3], want, rtol=1e-13)
    assert not np.any(g[3:])


def test_single_element_writes_save_elements_not_arrays():
    """1000 writes of one element into a 10^5-element array keep O(1000) elements,
    not 1000 arrays (contract 1.2.6)."""
    n = 100_000

    def f(x, y):
        for i in range(1000):
            x[i * 7] = y * x[i * 7 + 1]
        return np.sum(x * x)

    x = np.linspace(0.0, 1.0, n)
    tracemalloc.start()
    mg.grad(f, argnums=(0, 1))(x.copy(), 1.5)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    # the unavoidable arrays: a few of size n (gradient, adjoint, x*x); nothing per write beyond O(1)
    assert peak < 12 * n * 8, peak


def test_threads_differentiate_independently():
    results = {}
    errors = []

    def work(k):
        try:
            def f(x):
                buf = mnp.zeros(3)
                for _ in range(200):
                    buf[:] = buf * 0.5 + x * k
                return np.sum(buf ** 2)

            x = np.array([1.0, 2.0, 3.0])
            results[k] = mg.grad(f)(x)
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(k,)) for k in (1.0, 2.0, 3.0, 4.0)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    for k, g in results.items():
        # buf -> 2*k*x (geometric series limit after 200 steps), loss = sum(buf^2)
        s = sum(0.5 ** j for j in range(200))
        np.testing.assert_allclose(g, 2 * (k * s) ** 2 * np.array([1.0, 2.0, 3.0]), rtol=1e-12)


def test_a_differentiation_started_in_a_worker_over_an_outer_threads_value_is_named():
    # an inner mg.grad in a worker thread over a value the outer mg.grad (main thread) traces: its
    # derivative buffers are not the outer level's, so the outer derivative cannot flow through it.
    # It raised a write into a plain array named after a dict; now the thread is named, and the fix
    # (the inner grad in the outer one's thread) gives the finite-difference derivative
    def inner(p):
        return mg.grad(lambda y: np.sum(np.sin(y * p)))(np.array([0.5, 1.0]))

    def in_worker(p):
        box = {}

        def work():
            try:
                box["g"] = inner(p)
            except Exception as e:  # noqa: BLE001  (reported in the main thread)
                box["e"] = e

        t = threading.Thread(target=work)
        t.start()
        t.join()
        if "e" in box:
            raise box["e"]
        return np.sum(box["g"])

    with pytest.raises(mg.TracerEscapeError, match=r"another thread is running.*nest within one thread"):
        mg.grad(in_worker)(0.7)

    # a differentiation the executor's thread runs over the outer value: the message names the line
    # of the use there (it said "<unknown location>": the newfeat20 tester; then the function
    # differentiated there, raised in its reverse pass)
    def pooled(a):
        def inner2(b):
            return np.sum(np.sin(a * b))

        with concurrent.futures.ThreadPoolExecutor(1) as ex:
            return np.sum(ex.submit(mg.grad(inner2), np.array([1.0, 2.0])).result())

    with pytest.raises(mg.TracerEscapeError, match=r"another thread is running.*test_hygiene.py:\d+: `return np.sum\(np.sin\(a \* b\)\)`"):
        mg.grad(pooled)(np.array([0.5, 1.5]))
    fd = (np.sum(inner(0.7 + 1e-6)) - np.sum(inner(0.7 - 1e-6))) / 2e-6
    np.testing.assert_allclose(mg.grad(lambda p: np.sum(inner(p)))(0.7), fd, rtol=1e-7)
    # plain operations on the outer value in a worker are fine
    def plain_worker(x):
        box = {}
        t = threading.Thread(target=lambda: box.update(s=np.sum(np.sin(x * 2.0) ** 2)))
        t.start()
        t.join()
        return box["s"]

    x = np.array([0.3, -0.4])
    np.testing.assert_allclose(mg.grad(plain_worker)(x), 4 * np.sin(2 * x) * np.cos(2 * x), rtol=1e-14)


def _peak(fn, *args):
    gc.collect()
    tracemalloc.start()
    fn(*args)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return peak


def test_boolean_mask_writes_of_few_elements_keep_their_positions_not_the_mask():
    """A mask write that changes one element of an M-element array kept the M-byte mask per
    write (contract item 6: memory proportional to what is overwritten)."""
    m, pos = 100_000, np.arange(100_000)

    def f(x, n):
        b = x.copy()
        for i in range(n):
            b[pos == (i * 37) % m] = b[(i * 37) % m] * 0.5
        return np.sum(b * b)

    x = np.linspace(0.5, 1.5, m)
    extra = _peak(mg.grad(f), x, 100) - _peak(mg.grad(f), x, 0)
    assert extra < 100 * 5_000, extra  # (the tape's records; the 100 masks: 10 MB)
    g = mg.grad(f)(x, 3)  # the same gradient as before: halved where written, squared
    want = 2 * x
    for i in range(3):
        want[(i * 37) % m] *= 0.25
    np.testing.assert_allclose(g, want)


def test_powers_of_traced_scalars_in_an_element_loop_keep_compact_records():
    """`x[i] ** 2` (NumPy scalars' own power) took the general path: about 2.5 kB of tape per
    operation, where `x[i] * x[i]` and np.power(x[i], 2) keep under 50 B (the slow tester)."""
    def f(x, n):
        s = 0.0
        for i in range(n):
            s = s + x[i] ** 2 + 0.5 ** x[i] + x[i] ** x[i]
        return s

    x = np.linspace(0.5, 1.5, 2000)
    extra = _peak(mg.grad(f), x, 2000) - _peak(mg.grad(f), x, 500)
    assert extra < 1500 * 300, extra  # (three powers and three sums per step)
    x = x[:20]
    want = 2 * x + np.log(0.5) * 0.5 ** x + x ** x * (np.log(x) + 1)  # by hand
    np.testing.assert_allclose(mg.grad(f)(x, 20), want, rtol=1e-13)
    np.testing.assert_allclose(mg.jvp(lambda x: f(x, 20), (x,), (np.ones(20),))[1], np.sum(want), rtol=1e-13)
    second = 2 + np.log(0.5) ** 2 * 0.5 ** x + x ** x * ((np.log(x) + 1) ** 2 + 1 / x)
    np.testing.assert_allclose(mg.hessian(lambda x: f(x, 20))(x), np.diag(second), rtol=1e-12, atol=1e-13)


def test_a_constant_matrix_product_keeps_the_matrix_not_each_vector():
    """y @ A with a constant A: y's cotangent reads A only, so the vectors it multiplies
    need not be kept (they were, one per step)."""
    a = np.random.default_rng(0).standard_normal((300, 300)) / 20

    def f(x, n, a):
        y = x
        for _ in range(n):
            y = (0.5 * y + 0.1) @ a  # (the linear steps keep nothing: only the product could)
        return np.sum(y)

    x = np.full((100, 300), 0.2)
    for prod in (lambda y, a: np.dot(y, a), lambda y, a: np.einsum("ij,jk->ik", y, a)):
        g = lambda x, n, a, prod=prod: np.sum(_linear_steps(x, n, a, prod))
        assert _peak(mg.grad(g), x, 40, a) - _peak(mg.grad(g), x, 10, a) < 5 * x.nbytes
    ro = a.copy()
    ro.flags.writeable = False
    for mat in (a, ro):  # a constant argument (traced), a read-only plain array
        grow = _peak(mg.grad(f), x, 40, mat) - _peak(mg.grad(f), x, 10, mat)
        assert grow < 5 * x.nbytes, grow  # (one vector per step: 30 of them)


def _linear_steps(y, n, a, prod):
    for _ in range(n):
        y = prod(0.5 * y + 0.1, a)
    return y


def test_maximum_and_clip_keep_their_inputs_not_their_outputs():
    # the partials of np.maximum / np.minimum recompute which argument won from the plain
    # inputs: a chain y = op(y) * 1.01 keeps one array per maximum (its input), two per clip
    # (its input and the intermediate maximum), where it kept one more each (the output)
    n = 100_000

    def f(x, k, op):
        y = x
        for _ in range(k):
            y = op(y) * 1.01  # (a product by a constant keeps nothing)
        return np.sum(y)

    def kept(op):
        peaks = []
        for k in (10, 40):
            tracemalloc.start()
            g = mg.grad(f)(np.full(n, 0.3), k, op)
            peaks.append(tracemalloc.get_traced_memory()[1])
            tracemalloc.stop()
            np.testing.assert_allclose(g, 1.01 ** k)  # inside the bounds: the derivative of 1.01**k * x
        return (peaks[1] - peaks[0]) / 30 / (8 * n)

    assert kept(lambda y: np.maximum(y, 0.2)) < 1.2
    assert kept(lambda y: np.clip(y, -1.0, 1.0)) < 2.2


def test_max_over_an_axis_keeps_the_positions_of_the_maxima_not_its_argument():
    # value function iteration: V = max over the choice axis of an (nz, na, na) array each step;
    # the pullback kept the whole array (5 MB per step in the econdp tester), where the positions
    # of the maxima (one index per element of V) weigh the cotangent as well
    nz, na = 4, 120
    pi = np.full((nz, nz), 1.0 / nz)
    a = np.linspace(0.1, 10, na)
    c = np.exp(np.linspace(-0.5, 0.5, nz))[:, None, None] + 1.04 * a[None, :, None] - a[None, None, :]
    u = np.where(c > 0, np.log(np.maximum(c, 1e-10)), -1e10)

    def vfi(beta, k, reduce=np.max):
        V = np.zeros((nz, na))
        for _ in range(k):
            V = reduce(u + beta * (pi @ V)[:, None, :], axis=2)
        return np.sum(V)

    for reduce in (np.max, lambda x, axis: -np.min(-x, axis=axis)):
        peaks = []
        for k in (10, 40):
            tracemalloc.start()
            g = mg.grad(vfi)(0.9, k, reduce)
            peaks.append(tracemalloc.get_traced_memory()[1])
            tracemalloc.stop()
            h = 1e-6
            np.testing.assert_allclose(g, (vfi(0.9 + h, k) - vfi(0.9 - h, k)) / (2 * h), rtol=1e-4)  # (|V| ~ 5e3)
        per_step = (peaks[1] - peaks[0]) / 30
        assert per_step < 0.2 * u.nbytes, per_step  # (one choice array per step before: u.nbytes)


@pytest.mark.parametrize("axis", [None, 0, 1, -1, (0, 2)])
@pytest.mark.parametrize("keepdims", [False, True])
def test_max_and_min_derivatives_from_what_they_keep(axis, keepdims):
    # against central differences (values 0.05 apart: no tie within the steps), and ties sharing
    # the derivative evenly (by hand)
    x = np.random.default_rng(2).permutation(60).reshape(3, 4, 5) * 0.05 - 1.5
    for fn in (np.max, np.min, np.amax, lambda x, axis, keepdims: np.maximum.reduce(x, axis=axis, keepdims=keepdims)):
        check_grads(lambda x, fn=fn: np.sum(np.sin(fn(x, axis=axis, keepdims=keepdims)) * 1.3), x, order=2)
    t = np.array([[[1.0, 3.0, 3.0], [2.0, 2.0, 0.0]]])
    g = mg.grad(lambda t: np.sum(np.max(t, axis=axis, keepdims=keepdims) * 2.0))(t)
    if axis in (-1,):
        np.testing.assert_array_equal(g, [[[0, 1, 1], [1, 1, 0]]])
    if axis is None:
        np.testing.assert_array_equal(g, [[[0, 1, 1], [0, 0, 0]]])
    np.testing.assert_array_equal(mg.grad(lambda v: np.max(v))(np.array([1.0, np.nan, 2.0])), [0, 1, 0])


def test_floating_point_state_of_a_differentiation_is_its_threads_own():
    # while one thread runs the reverse pass of a NaN output (IEEE's products there: 0 * inf =
    # nan) or a forward-mode derivative (whose floating-point events are not the user's), another
    # thread's differentiation keeps its strong zeros and its own np.errstate (both were
    # process-wide counters: NaN gradients and a FloatingPointError lost in the other thread)
    inside, go_on = threading.Event(), threading.Event()

    @mg.primitive
    def hold(x):
        return x * 1.0

    @mg.rrule(hold)
    def _(x):
        def pullback(g):
            inside.set()
            go_on.wait(30)
            return (g,)
        return hold(x), pullback

    errors = []

    def nan_output():
        try:
            mg.grad(lambda y: np.sum(hold(y)) + np.nan)(np.ones(3))
        except Exception as e:  # noqa: BLE001 (reported below)  # pragma: no cover
            errors.append(e)

    t = threading.Thread(target=nan_output)
    t.start()
    try:
        assert inside.wait(30)
        c = np.array([0.0, 1.0])
        g = lambda x: np.sum(np.sqrt(x) * c)  # d/dx0 = 0 * inf: a strong zero (docs/errors.md)
        x = np.array([0.0, 1.0])
        np.testing.assert_array_equal(mg.grad(g)(x), [0.0, 0.5])
        assert mg.jvp(g, (x,), (np.array([1.0, 0.0]),))[1] == 0.0
    finally:
        go_on.set()
        t.join()
    assert not errors, errors


def test_a_forward_derivative_in_another_thread_keeps_this_threads_errstate():
    from mutagrad.registry import defelementwise

    inside, go_on = threading.Event(), threading.Event()

    @mg.primitive
    def hold(x):
        return x * 1.0

    def slope(x, y):  # (computed inside a forward rule's derivative: its events are not the user's)
        inside.set()
        go_on.wait(30)
        return np.ones_like(x)

    defelementwise(hold, slope)

    t = threading.Thread(target=lambda: mg.jvp(hold, (np.ones(2),), (np.ones(2),)))
    t.start()

    def f(x):
        try:
            return np.sum(np.log(x - 1.0))  # log(0): FloatingPointError under the caller's errstate
        except FloatingPointError:
            return np.sum(x ** 2)  # the plain call's branch

    try:
        assert inside.wait(30)
        x = np.array([1.0, 2.0])
        with np.errstate(divide="raise"):
            assert f(x.copy()) == 5.0
            assert mg.jvp(f, (x,), (np.ones(2),)) == (5.0, 6.0)  # d/dt sum((x + t)**2) = 2 * (1 + 2)
    finally:
        go_on.set()
        t.join()


def test_an_interrupt_while_grad_frees_its_tape_leaves_the_arguments_writable():
    # a KeyboardInterrupt landing in grad's clean-up, where the tape is freed: the caller's arrays
    # are unlocked first (they stayed read-only for good, held in core.LOCKED)
    import inspect
    import sys

    from mutagrad import api, core

    src, start = inspect.getsourcelines(api.value_and_grad)
    line = start + next(i for i, text in enumerate(src) if "level.tape = []" in text)

    def trace(frame, event, arg):
        if frame.f_code.co_filename != api.__file__:
            return None

        def local(fr, ev, a):
            if ev == "line" and fr.f_lineno == line:
                sys.settrace(None)
                raise KeyboardInterrupt
            return local
        return local

    x = np.linspace(0.1, 1.0, 5)
    sys.settrace(trace)
    try:
        with pytest.raises(KeyboardInterrupt):
            mg.grad(lambda x: np.sum(np.sin(x)))(x)
    finally:
        sys.settrace(None)
    assert x.flags.writeable and id(x) not in core.LOCKED
    x[0] = 2.0  # a plain write, as after a plain call


@pytest.mark.parametrize("api", ["grad", "vjp", "jvp", "hessian", "jacobian"])
def test_every_entry_point_holds_full_collections_off_while_it_runs(api):
    # (a function defined between vjp and its decorator took the decorator: vjp ran with full
    # collections on, which walk every record of a long tape again)
    seen = []

    def f(x):
        seen.append(gc.get_threshold()[2])
        return np.sum(x ** 2)

    x = np.ones(2)
    {"grad": lambda: mg.grad(f)(x), "vjp": lambda: mg.vjp(f, x), "jvp": lambda: mg.jvp(f, (x,), (x,)),
     "hessian": lambda: mg.hessian(f)(x), "jacobian": lambda: mg.jacobian(f)(x)}[api]()
    assert seen and all(t >= 1 << 30 for t in seen), seen
    assert gc.get_threshold()[2] < 1 << 30


def test_cyclic_garbage_the_function_makes_is_collected_and_the_collector_left_as_the_program_sets_it():
    # (the leaks tester: the collector was off during every call, so objects referring to themselves made
    # in a loop piled up, 204 MB for a plain call's 7; and a gc.disable() in the function was undone)
    class Node:
        def __init__(self):
            self.buf = np.zeros(1250)
            self.me = self

    def f(x):
        for i in range(5000):
            Node().buf[:] = i
        return np.sum(x ** 2)

    thresholds = gc.get_threshold()
    gc.collect()
    tracemalloc.start()
    try:
        np.testing.assert_array_equal(mg.grad(f)(np.ones(3)), [2.0, 2.0, 2.0])  # by hand
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 20e6, peak  # (5000 x 10 kB = 50 MB had the garbage stayed)
    assert gc.get_threshold() == thresholds and gc.isenabled()

    def off(x):
        gc.disable()
        return np.sum(x)

    try:
        mg.grad(off)(np.ones(2))
        assert not gc.isenabled()  # (as a plain call leaves it)
    finally:
        gc.enable()


def test_generated_functions_and_their_constant_tables_are_not_kept():
    # (the leaks tester: the alias search's memo of names kept each code object, and a constant table
    # among its "keys": 640 kB per generated model in a parameter sweep)
    import weakref

    src = "def model(x):\n    c = (" + ",".join(str(float(k)) for k in range(2000)) + ")\n    return np.sum(x * c[1])\n"
    ns = {"np": np}
    exec(src, ns)  # noqa: S102  (a generated model, as a sweep makes one)
    code = weakref.ref(ns["model"].__code__)
    np.testing.assert_array_equal(mg.grad(ns["model"])(np.ones(3)), [1.0, 1.0, 1.0])  # by hand: c[1] = 1.0
    from mutagrad import api

    assert not any(type(k) is tuple and len(k) > 64 for _, names in api._NAMES.values() for k in names[1][1])
    del ns
    gc.collect()
    assert code() is None


def test_a_process_forked_during_a_call_gets_the_collectors_thresholds_back():
    import multiprocessing

    if "fork" not in multiprocessing.get_all_start_methods():
        pytest.skip("no fork")
    thresholds = gc.get_threshold()

    def f(x):
        with multiprocessing.get_context("fork").Pool(1) as pool:
            seen = pool.apply(gc.get_threshold)
        assert seen == thresholds  # (full collections were held off for the child's life)
        return np.sum(x)

    np.testing.assert_array_equal(mg.grad(f)(np.ones(2)), [1.0, 1.0])
    assert gc.get_threshold() == thresholds


def test_an_interrupted_unlock_leaves_the_rest_to_the_next(monkeypatch):
    # (regress19: Ctrl-C in unlock, which dropped its table first, left the arrays not yet released
    # read-only for good)
    from mutagrad import core

    lv = core.Level()
    a, b = np.zeros(2), np.zeros(3)
    lv.lock(a, "a")
    lv.lock(b, "b")
    assert not a.flags.writeable and not b.flags.writeable
    real, calls = core._release, []

    def interrupted(x, v):
        calls.append(x)
        if len(calls) == 1:
            raise KeyboardInterrupt
        real(x, v)

    monkeypatch.setattr(core, "_release", interrupted)
    with pytest.raises(KeyboardInterrupt):
        lv.unlock()  # (the rest released all the same, then the interrupt raised)
    assert a.flags.writeable and b.flags.writeable


def test_dict_keys_a_loop_takes_from_a_tuple_are_searched():
    # (regress19: ints beyond -1024..1023 in a loop's tuple were dropped from the search's keys: a view
    # of the argument at d[5000] in a large dict gave a wrong gradient with a warning)
    x0 = np.array([1.0, 2.0, 3.0])
    d = {i: [np.zeros(2), {"q": np.zeros(1)}] for i in range(2000)}
    d[5000] = x0[:2]
    d[6000] = np.ones(2)

    def f(x):
        x[0] = 5.0 * x[1]
        s = 0.0
        for k in (5000, 6000):
            s = s + (d[k] * x[:2]).sum()
        return s

    with pytest.raises(mg.AliasingError, match=r"d\[5000\]"):
        mg.grad(f)(x0)


def test_warnings_of_exec_d_code_whose_globals_have_no_name_are_shown():
    # (regress20: warn_explicit drops a warning whose module is None: the incomplete alias search's
    # warning never showed for generated code, and the wrong gradient came silently)
    d = {i: [np.zeros(2), {"q": np.zeros(1)}] for i in range(2000)}
    ns = {"d": d, "np": np}
    exec("def f(x):\n    x[0] = 5.0 * x[1]\n    return np.sum(x) + len(d)\n", ns)  # noqa: S102
    with pytest.warns(UserWarning, match="could not check"):
        g = mg.grad(ns["f"])(np.array([1.0, 2.0, 3.0]))
    np.testing.assert_array_equal(g, [0.0, 6.0, 1.0])  # by hand: sum = 5 x1 + x1 + x2


def test_an_interrupted_unlock_releases_no_joined_array_twice(monkeypatch):
    # (arrays another thread's differentiation also holds: released once each, the retry after an interrupt
    # included; twice would make one writable while that differentiation still reads it)
    from mutagrad import core

    a, b = np.zeros(2), np.zeros(3)
    holder = core.Level()
    holder.lock(a, "a")
    holder.lock(b, "b")
    lv = core.Level()
    for x in (a, b):  # (as Level.lock joins an array locked in another thread)
        core._LOCK_REFS[id(x)][0] += 1
    lv.joined = [a, b]
    real, calls = core._release, []

    def interrupted(x, v):
        calls.append(x)
        if len(calls) == 2:  # (during b's release, a's done)
            raise KeyboardInterrupt
        real(x, v)

    monkeypatch.setattr(core, "_release", interrupted)
    with pytest.raises(KeyboardInterrupt):
        lv.unlock()
    monkeypatch.setattr(core, "_release", real)
    assert not a.flags.writeable and not b.flags.writeable  # (the holder still holds both)
    holder.unlock()
    assert a.flags.writeable and b.flags.writeable


def test_a_warning_shown_once_is_not_shown_again_after_a_differentiation():
    # (regress21: putting mutagrad's shuffle filter first again reset every module's record of
    # warnings shown, so a "default" warning showed again after each call)
    def noisy():
        return np.log(np.array([-1.0]))

    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("default")
        noisy()
        noisy()
        mg.grad(lambda x: np.sum(x ** 2))(np.array([1.0, 2.0]))
        noisy()
    assert len(w) == 1, [str(m.message) for m in w]  # (as plain calls: once per location)


def test_an_interrupt_inside_a_level_s_entry_leaves_no_stale_level(monkeypatch):
    # (regress19: Ctrl-C after the level was put on the thread's stack but before __enter__ returned: `with`
    # calls no __exit__ then, and the level left behind made every later call in the thread raise)
    from mutagrad import core

    real = core._get_ident

    def interrupted():
        raise KeyboardInterrupt

    monkeypatch.setattr(core, "_get_ident", interrupted)  # (the last step of __enter__)
    with pytest.raises(KeyboardInterrupt):
        mg.grad(lambda x: np.sum(x * x))(np.ones(2))
    monkeypatch.setattr(core, "_get_ident", real)
    assert core.STATE.levels == [] and core.STATE.ceiling == 0
    x = np.array([1.0, 2.0])
    np.testing.assert_array_equal(mg.grad(lambda x: np.sum(x * x))(x), [2.0, 4.0])  # by hand: 2x
    assert x.flags.writeable


def test_a_view_of_a_closed_over_matrix_is_copied_once_per_call():
    # (metalearn: `A.T @ r` makes a new view of the plain matrix at each step, and each was copied for
    # the pullback and kept by the tape: memory grew as steps x |A|). Oracle: the adjoint by hand, the
    # steps being the linear map w -> M w + c with M = I - 0.1 A^T A.
    rng = np.random.default_rng(0)
    A = rng.standard_normal((300, 300)) / 30.0  # 720 KB, writable, closed over
    b = rng.standard_normal(300)
    steps = 40

    def f(w):
        for _ in range(steps):
            w = w - 0.1 * (A.T @ (A @ w - b))
        return np.sum(w * w)

    w0 = rng.standard_normal(300)
    mg.grad(f)(w0.copy())  # (warm: mutagrad's parse of this file is cached)
    tracemalloc.start()
    g = mg.grad(f)(w0.copy())
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 6 * A.nbytes, peak  # (a copy of A and of its transposed view; 40 copies before)
    M = np.eye(300) - 0.1 * A.T @ A
    w = w0.copy()
    for _ in range(steps):
        w = M @ w + 0.1 * A.T @ b
    want = 2.0 * w
    for _ in range(steps):
        want = M.T @ want
    np.testing.assert_allclose(g, want, rtol=1e-10, atol=1e-12)


def test_each_call_of_a_nested_gradient_reuses_the_copy_of_the_data_it_closes_over():
    # (metalearn: an mg.grad in a training loop that an outer mg.grad differentiates copied the global
    # data matrix at each call, and the outer tape kept every copy). Oracle: central differences of
    # the plain loop with the gradient written by hand.
    rng = np.random.default_rng(1)
    X = rng.standard_normal((300, 300))
    y = rng.standard_normal(300)
    steps = 30

    def loss(w):
        r = X @ w - y
        return 0.5 * np.sum(r * r)

    def train(lr, w0, inner_grad):
        w = w0.copy()
        for _ in range(steps):
            w -= lr * inner_grad(w)
        return np.sum(w ** 2)

    w0 = rng.standard_normal(300) * 0.1
    mg.grad(lambda lr: train(lr, w0, mg.grad(loss)))(1e-5)  # (warm: mutagrad's parse of this file is cached)
    tracemalloc.start()
    g = mg.grad(lambda lr: train(lr, w0, mg.grad(loss)))(1e-5)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 6 * X.nbytes, peak  # (30 copies before)
    by_hand = lambda w: (X @ w - y) @ X
    h = 1e-9
    fd = (train(1e-5 + h, w0, by_hand) - train(1e-5 - h, w0, by_hand)) / (2 * h)
    np.testing.assert_allclose(g, fd, rtol=1e-5)


def test_np_interp_on_one_large_table_keeps_no_copy_per_call():
    # (interp: each call kept a copy of the table's slopes on the tape, 8 bytes per sample per call, and
    # NumPy's interp copied the read-only snapshots it got at every call). Oracle: central differences.
    ys = np.linspace(-5.0, 5.0, 50_001)
    table = np.tanh(ys) + 0.1 * ys ** 3

    def simulate(y, steps):
        for _ in range(steps):
            y = y - 0.01 * np.interp(y, ys, table)
        return y

    mg.grad(lambda y: simulate(y, 2))(2.0)  # (warm: mutagrad's parse of this file is cached)
    tracemalloc.start()
    g = mg.grad(lambda y: simulate(y, 200))(2.0)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 8 * table.nbytes, peak  # (200 copies of the slopes before)
    slopes, y, want = np.diff(table) / np.diff(ys), 2.0, 1.0  # by hand: the product of 1 - 0.01 * slope at y
    for _ in range(200):
        want *= 1.0 - 0.01 * slopes[np.searchsorted(ys, y, side="right") - 1]
        y = y - 0.01 * np.interp(y, ys, table)
    assert g == pytest.approx(want, rel=1e-12)


def test_np_interp_sees_a_table_that_plain_code_changes_between_calls():
    # the remembered table is served only while the caller's arrays hold its bits. Oracle: by hand, the
    # derivative of y - 0.5 * interp(y) is 1 - 0.5 * slope at y, the slope 1 then 3
    ys = np.linspace(0.0, 4.0, 101)
    table = ys.copy()

    def f(y):
        a = y - 0.5 * np.interp(y, ys, table)
        table[:] = 3.0 * ys  # plain code changes the table (a global) between two calls
        b = a - 0.5 * np.interp(a, ys, table)
        return b

    g = mg.grad(f)(2.0)
    table[:] = ys
    assert g == pytest.approx((1 - 0.5 * 1.0) * (1 - 0.5 * 3.0), rel=1e-12)
    table[:] = ys
    v = mg.value_and_grad(f)(2.0)[0]
    table[:] = ys
    assert v == f(2.0)  # the plain call's value, bit for bit


def test_nested_differentiations_leave_no_error_state_handlers_behind():
    # (scipyopt: each nested call left two handlers of NumPy's floating-point events alive, held in a cycle
    # through NumPy's error-state capsule that the garbage collector does not see: memory grew without
    # bound over the Hessians of an optimizer's iterations)
    from mutagrad.registry import UserFPErrors

    f = lambda x: np.sum(np.sin(x) ** 2)
    x = np.full(5, 0.3)

    def alive():
        gc.collect()
        return sum(type(o) is UserFPErrors for o in gc.get_objects())

    for run in (mg.hessian(f), lambda x: mg.jvp(mg.grad(f), (x,), (np.ones(5),))[1],
                mg.grad(lambda x: np.sum(mg.grad(f)(x)))):
        run(x)
        before = alive()
        for _ in range(20):
            run(x)
        assert alive() <= before + 2
    np.testing.assert_allclose(mg.hessian(f)(x), np.diag(2 * np.cos(2 * x)), rtol=1e-12)  # by hand


def test_np_interp_tables_plain_code_changes_are_neither_served_stale_nor_kept():
    # (regress36: a strided table's copy was compared with array_equal, which takes -0.0 for 0.0: a stale
    # table was served, NumPy returning the sample itself; a table changed in place left its remembered
    # copies in tape.PRIVATE for the life of the process). Oracles: the plain call, bit for bit.
    from mutagrad import tape

    data = np.zeros((4, 2))
    data[:, 0] = np.arange(4.0)
    xs, fp = data[:, 0], data[:, 1]

    def f(x):
        a = np.interp(x, xs, fp)
        fp[0] = -0.0  # plain code changes a sample's sign
        b = np.interp(x - 10.0, xs, fp)  # left of the table: fp[0] itself
        fp[0] = 0.0
        return a + np.arctan2(b, -1.0)

    assert mg.value_and_grad(f)(1.5)[0] == f(1.5) == -np.pi
    assert mg.jvp(f, (1.5,), (1.0,))[0] == -np.pi

    xs2 = np.linspace(0.0, 5.0, 1001)
    table = np.sin(xs2)

    def g(y):
        for _ in range(10):
            y = y + 0.1 * np.interp(y, xs2, table)
            table[:] += 0.01  # the table changes between calls
        table[:] -= 0.1
        return y

    mg.grad(g)(1.3)
    gc.collect()
    before = len(tape.PRIVATE)
    for _ in range(3):
        mg.grad(g)(1.3)
    gc.collect()
    assert len(tape.PRIVATE) <= before
