"""Two differentiations in two threads that meet through shared state (a cache, a dict).

In a plain run the shared value is a number like any other; to a differentiation that did
not make it, it is a constant. Each expected derivative is written by hand (the shared value
as a constant) and checked against central differences of the plain function.
"""
import pickle
import threading

import numpy as np
import pytest

import mutagrad as mg


def _central(f, x, h=1e-6):
    return np.array([(f(x + h * e) - f(x - h * e)) / (2 * h) for e in np.eye(x.size)])


def _two_threads(first, second):
    """Run ``first()`` in a thread until it has started, then ``second()`` here, the two
    interleaved by the events the functions wait on; returns (first's result or exception, second's)."""
    out = {}

    def run(key, fn, done):
        try:
            out[key] = fn()
        except Exception as e:  # noqa: BLE001  (reported to the test)
            out[key] = e
        finally:
            done.set()

    t = threading.Thread(target=run, args=("first", first, FIRST_DONE))
    t.start()
    STARTED.wait(10)
    run("second", second, DONE)
    t.join(10)
    assert not t.is_alive()
    return out["first"], out["second"]


# DONE: the second has finished; FIRST_DONE: the first has
STARTED, READY, DONE, FIRST_DONE = threading.Event(), threading.Event(), threading.Event(), threading.Event()
X = np.array([0.3, 0.6, 0.9])
Z = np.array([1.0, 2.0, 3.0])
W = Z ** 2  # the shared value, as the second differentiation makes it


@pytest.fixture(autouse=True)
def _events():
    for e in (STARTED, READY, DONE, FIRST_DONE):
        e.clear()
    yield


def _older(use, mode="rev"):
    """The older differentiation (first thread) computes ``use(x, w)`` with the younger one's
    traced ``w``; returns (older's result, younger's gradient)."""
    shared = {}

    def loss_a(x):
        STARTED.set()
        READY.wait(10)
        return use(x, shared["w"])

    def loss_b(z):
        shared["w"] = z ** 2
        READY.set()
        FIRST_DONE.wait(10)
        return np.sum(z)

    if mode == "rev":
        first = lambda: mg.value_and_grad(loss_a)(X.copy())
    else:
        first = lambda: mg.jvp(loss_a, (X.copy(),), (np.array([1.0, 0.0, 0.0]),))
    return _two_threads(first, lambda: mg.grad(loss_b)(Z.copy()))


@pytest.mark.parametrize("mode", ["rev", "fwd"])
def test_a_value_another_threads_younger_differentiation_left_in_shared_state_is_a_constant(mode):
    # (it was recorded on the other thread's tape: this one got a Tracer as its value and a zero
    # derivative, silently)
    a, b = _older(lambda x, w: np.sum(w * x) + w[1] * x[0] ** 2, mode)
    f = lambda x: np.sum(W * x) + W[1] * x[0] ** 2
    want = W + np.array([2 * W[1] * X[0], 0.0, 0.0])  # by hand, w constant
    np.testing.assert_allclose(_central(f, X), want, rtol=1e-8)
    assert not isinstance(a, Exception), a
    if mode == "rev":
        assert type(a[0]) is np.float64 and a[0] == f(X)
        np.testing.assert_allclose(a[1], want, rtol=1e-15)
    else:
        assert a[0] == f(X) and a[1] == pytest.approx(want[0], rel=1e-15)
    np.testing.assert_array_equal(b, np.ones(3))  # (the other differentiation untouched)


def test_another_threads_younger_value_converted_or_returned_is_its_value():
    a, _ = _older(lambda x, w: np.sum(x) * float(w[2]))
    assert not isinstance(a, Exception), a
    assert a[0] == np.sum(X) * 9.0
    np.testing.assert_allclose(a[1], np.full(3, 9.0), rtol=1e-15)  # by hand: d/dx sum(x) * 9

    for e in (STARTED, READY, DONE, FIRST_DONE):
        e.clear()
    shared = {}

    def loss_b(z):
        shared["w"] = z ** 2
        READY.set()
        FIRST_DONE.wait(10)
        return np.sum(z)

    def out_a(x):
        STARTED.set()
        READY.wait(10)
        return x * 2.0, shared["w"]

    first = lambda: mg.jacobian(out_a)(X.copy())
    a, b = _two_threads(first, lambda: mg.grad(loss_b)(Z.copy()))
    assert not isinstance(a, Exception), a
    np.testing.assert_array_equal(a[0], 2.0 * np.eye(3))
    assert type(a[1]) is np.ndarray
    np.testing.assert_array_equal(a[1], np.zeros((3, 3)))  # (a constant output: its Jacobian is zero)
    np.testing.assert_array_equal(b, np.ones(3))


def test_a_write_into_another_threads_traced_array_is_refused():
    def write(x, w):
        w[0] = 5.0
        return np.sum(x)

    a, b = _older(write)
    assert isinstance(a, mg.MutationError) and "another thread" in str(a), a
    np.testing.assert_array_equal(b, np.ones(3))


def test_an_older_differentiations_value_used_by_a_younger_one_raises_there_only():
    # (the younger one's thread may be a worker of the older one's: nesting across threads is
    # refused; the error was also raised again by the older differentiation, with a false note)
    shared = {}

    def loss_a(x):
        shared["y"] = np.sin(x)
        STARTED.set()
        DONE.wait(10)
        return np.sum(x ** 2)

    def loss_b(z):
        return np.sum(shared["y"] * z)

    a, b = _two_threads(lambda: mg.grad(loss_a)(X.copy()), lambda: mg.grad(loss_b)(np.ones(3)))
    assert isinstance(b, mg.TracerEscapeError) and "another thread" in str(b), b
    assert "np.sum(shared[\"y\"] * z)" in str(b)  # (the line of the use, not the call of grad)
    np.testing.assert_allclose(a, 2 * X, rtol=1e-15)  # by hand


def test_a_buffer_made_in_a_worker_names_its_fix():
    import concurrent.futures as cf

    def f(x):
        def work(i):
            b = np.zeros(2)
            b[:] = x[2 * i:2 * i + 2]
            return np.sum(b ** 2)
        with cf.ThreadPoolExecutor(2) as ex:
            return sum(ex.map(work, range(2)))

    with pytest.raises(mg.WriteToPlainArrayError, match=r"plain array `b`.*np.zeros_like\(x, shape=...\)"):
        mg.grad(f)(np.arange(4.0))

    def g(x):  # the fix
        def work(i):
            b = np.zeros_like(x, shape=2)
            b[:] = x[2 * i:2 * i + 2]
            return np.sum(b ** 2)
        with cf.ThreadPoolExecutor(2) as ex:
            return sum(ex.map(work, range(2)))

    np.testing.assert_allclose(mg.grad(g)(np.arange(4.0)), 2 * np.arange(4.0), rtol=1e-15)


def test_a_write_into_an_argument_another_threads_differentiation_holds_names_that():
    x = np.array([0.1, 0.2, 0.3])

    def slow_read(x):
        STARTED.set()
        DONE.wait(10)
        return np.sum(x ** 2)

    def step(x):
        x[:] = 2 * np.exp(x)
        return np.sum(x)

    a, b = _two_threads(lambda: mg.grad(slow_read)(x), lambda: mg.grad(step)(x))
    assert isinstance(b, mg.MutationError) and "another thread" in str(b) and "plain call raises" not in str(b), b
    np.testing.assert_allclose(a, 2 * np.array([0.1, 0.2, 0.3]), rtol=1e-15)


def test_pickling_a_traced_array_in_a_thread_with_no_user_code_names_the_waiting_line():
    # (a process pool's feeder thread: "<unknown location>" and advice on buffers before)
    import concurrent.futures as cf

    def f(x):
        with cf.ThreadPoolExecutor(1) as ex:
            fut = ex.submit(pickle.dumps, x)  # (no frame of the user's in that thread)
            fut.result(10)  # the line named
        return np.sum(x)

    with pytest.raises(mg.TracerEscapeError, match=r"another process.*test_threads_shared.py:\d+: `fut") as info:
        mg.grad(f)(X.copy())
    assert "mnp.zeros" not in str(info.value)


@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")  # (the thread's end, as meant)
def test_an_error_a_worker_thread_ended_with_is_noted_as_such():
    # (claims2: the note said the differentiated code caught it, in threading's own try)
    def f(x):
        def work():
            b = np.zeros(2)
            b[:] = x
        th = threading.Thread(target=work)
        th.start()
        th.join()
        return np.sum(x)

    with pytest.raises(mg.WriteToPlainArrayError) as info:
        mg.grad(f)(np.ones(2))
    notes = " ".join(getattr(info.value, "__notes__", ()))
    assert "in a worker thread, which ended with it" in notes and "caught it" not in notes


def _holding(x, go):
    """A gradient in another thread that holds ``x`` (its argument) until ``go`` is set; returns the thread."""
    def slow(v):
        STARTED.set()
        go.wait(10)
        return np.sum(v ** 2)

    t = threading.Thread(target=lambda: mg.grad(slow)(x))
    t.start()
    assert STARTED.wait(10)
    return t


def test_a_forward_jacobian_leaves_a_shared_argument_writable_when_another_thread_released_it_meanwhile():
    # (threads tester) the first run saw X read-only (another thread's gradient held it) and took it as given
    # read-only: put back read-only before the next runs, and so for good
    X = np.array([[1.0, 2.0], [3.0, 4.0], [0.5, -1.0]])
    X0 = X.copy()
    w = np.array([0.3, -0.2])
    go = threading.Event()
    t = _holding(X, go)

    def loss(w, X):
        if not go.is_set():  # (the first run: the other thread ends while this one runs)
            go.set()
            t.join(10)
        return np.sum(np.sin(X @ w))

    J = mg.jacobian(loss, mode="fwd")(w, X)
    assert X.flags.writeable and np.array_equal(X, X0)
    plain = lambda w: np.sum(np.sin(X0 @ w))
    np.testing.assert_allclose(J, _central(plain, w), rtol=1e-8)


def test_a_hessians_runs_take_the_same_steps_whether_another_thread_holds_the_argument_or_not():
    # (threads tester) the first run met w read-only (another thread's gradient held it), the next ones
    # writable: the view an inner level takes of a writable argument was a step of the program, so the runs
    # "took other steps" (a MutationError on a function of w alone)
    w = np.array([0.5, -1.5, 2.0])
    go = threading.Event()
    t = _holding(w, go)

    def f(v):
        if not go.is_set():
            go.set()
            t.join(10)
        return np.sum(v ** 3)

    H = mg.hessian(f)(w)
    np.testing.assert_allclose(H, np.diag(6 * w), rtol=1e-15)  # (d²/dv² of sum v³, by hand)
    assert w.flags.writeable


def test_a_forward_jacobian_does_not_rewind_numpys_global_generator_under_another_threads_draws():
    # (threads tester) the generator was put back before each run, though the function draws nothing from
    # it: another thread's np.random.random() repeated its numbers
    drawn, draw, go = [], threading.Event(), threading.Event()

    def drawer():
        while not go.is_set():
            if draw.wait(0.01):
                drawn.append(np.random.random())
                draw.clear()

    t = threading.Thread(target=drawer)
    t.start()
    try:
        np.random.seed(7)
        state = np.random.get_state()

        def f(v):
            if not drawn:  # (the first run: the other thread draws one number meanwhile)
                draw.set()
                while not drawn:
                    threading.Event().wait(0.001)
            return np.sum(np.sin(v) * v)

        v = np.array([0.4, 1.1])
        J = mg.jacobian(f, mode="fwd")(v)
        expected = np.random.RandomState()
        expected.set_state(state)
        expected.random()  # (the other thread's one draw, which stays drawn)
        assert np.random.random() == expected.random()
        np.testing.assert_allclose(J, _central(lambda v: np.sum(np.sin(v) * v), v), rtol=1e-8)
    finally:
        go.set()
        t.join(10)


def test_a_forward_jacobian_of_a_function_drawing_from_numpys_global_generator_puts_it_back_with_threads_alive():
    # each run draws what one plain call draws, as without threads: the function names np.random.normal
    go = threading.Event()
    t = threading.Thread(target=go.wait, args=(10,))
    t.start()
    try:
        np.random.seed(3)
        z = np.random.normal(size=3)  # (what a plain call draws from this state)
        np.random.seed(3)
        J = mg.jacobian(lambda x: x * np.random.normal(size=3), mode="fwd")(np.ones(3))
        np.testing.assert_array_equal(J, np.diag(z))
    finally:
        go.set()
        t.join(10)


def test_draws_from_numpys_global_generator_by_another_thread_between_runs_are_named():
    # (regress115) the runs put the generator back, another thread drew from it meanwhile: the message blamed
    # state the function changes itself
    drawn, draw, go = [], threading.Event(), threading.Event()

    def drawer():
        while not go.is_set():
            if draw.wait(0.01):
                np.random.random()
                drawn.append(1)
                draw.clear()

    t = threading.Thread(target=drawer)
    t.start()
    try:
        runs = []

        def f(v):
            runs.append(1)
            if len(runs) == 2:  # (the second run: the other thread draws once, after the generator was put back)
                draw.set()
                while not drawn:
                    threading.Event().wait(0.001)
            return v * np.random.normal(size=2)

        with pytest.raises(mg.MutationError, match="Other threads are running.*np.random.default_rng"):
            mg.jacobian(f, mode="fwd")(np.array([0.4, 1.1]))
    finally:
        go.set()
        t.join(10)


def test_one_vjp_pullback_called_from_several_threads_at_once():
    # (regress122) the rows of a Jacobian from one pullback in a thread pool: its reverse pass runs in the tape's
    # own buffers, and concurrent calls gave wrong cotangents silently or raised from inside mutagrad; they take
    # turns now. The oracle: central differences of J^T c
    def f(x):
        y = x.copy()
        for i in range(300):
            y[i % 5] += 0.01 * np.sin(y[(i + 1) % 5])
        return y

    x = np.linspace(0.1, 0.5, 5)
    _, pb = mg.vjp(f, x)
    want = {k: np.array([np.sum((k + 1.0) * (f(x + 1e-6 * e) - f(x - 1e-6 * e))) / 2e-6 for e in np.eye(5)])
            for k in range(3)}
    got, errors = {}, []

    def worker(k):
        try:
            got[k] = [pb(np.full(5, k + 1.0))[0] for _ in range(15)]
        except Exception as e:  # noqa: BLE001 (reported below)
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    for k, rows in got.items():
        for g in rows:
            np.testing.assert_allclose(g, want[k], rtol=1e-7)
