"""Containers are buffers (contract 1.2.7): lists, dicts, dataclass and
object attributes holding traced values, generators and iterators."""
import contextlib
import dataclasses
import functools
import itertools
import warnings

import numpy as np
import pytest

import mutagrad as mg
import mutagrad.numpy as mnp
from mutagrad.testing import check_grads


def test_list_buffer_mutated_freely():
    def f(x):
        lst = [x[0], x[1] * 2]
        lst.append(x[2] ** 2)
        lst.insert(0, np.sin(x[1]))
        lst.extend([x[0] * x[2]])
        lst[1] = lst[1] * 3.0
        last = lst.pop()
        lst.pop(0)
        return sum(lst) + last

    check_grads(f, np.array([0.5, 1.5, -0.7]))


def test_dict_buffer():
    def f(x):
        d = {"a": x * 2.0}
        d.update(b=np.exp(x))
        d["a"] = d["a"] + d["b"]
        del d["b"]
        return np.sum(d["a"] * d.get("c", 1.0))

    check_grads(f, np.array([0.1, 0.2]))


@dataclasses.dataclass
class Particle:
    pos: object
    vel: object


def test_buffer_of_structs_updated_in_a_loop():
    def f(x):
        ps = [Particle(x[i], 0.0) for i in range(3)]
        for _ in range(5):
            for p in ps:
                p.vel = p.vel - 0.1 * p.pos
                p.pos = p.pos + 0.1 * p.vel
        return sum(p.pos ** 2 + p.vel for p in ps)

    check_grads(f, np.array([1.0, -0.5, 0.25]))


class Model:
    def __init__(self, w):
        self.w = w

    def step(self, x):
        self.w = self.w * 0.9 + x
        return np.sum(self.w ** 2)


def test_object_attributes():
    def f(x):
        m = Model(np.zeros_like(x))
        total = 0.0
        for _ in range(3):
            total = total + m.step(x)
        return total

    check_grads(f, np.array([0.3, -0.4]))


def test_generators_and_itertools():
    def f(x):
        gen = (x[i] * (i + 1) for i in range(4))
        a = sum(gen)
        b = sum(itertools.islice((np.sin(v) for v in x), 2))
        c = list(itertools.accumulate(x, lambda u, v: u * v))[-1]
        d = functools.reduce(lambda u, v: u + v ** 2, x, 0.0)
        e = sum(map(np.exp, x[:2])) + sum(u * v for u, v in zip(x, x[::-1]))
        chained = sum(itertools.chain([x[0]], [x[1], x[2]]))
        return a + b + c + d + e + chained

    check_grads(f, np.array([0.5, -1.0, 1.5, 0.7]))


def test_buffer_filled_from_a_generator():
    def f(p):
        b = mnp.fromiter((p * k for k in range(3)), dtype=float)
        return np.sum(b ** 2)

    check_grads(f, 1.3)


def test_stack_and_concatenate_of_lists():
    def f(x):
        rows = []
        for i in range(3):
            rows.append(x * (i + 1))
        m = np.stack(rows)
        c = np.concatenate(rows[:2])
        return np.sum(m @ x) + np.sum(c ** 2)

    check_grads(f, np.array([0.2, 0.4]))


def test_one_buffer_rewritten_each_stage_used():
    def f(x):
        b = mnp.zeros(2)
        stages = []
        for k in range(3):
            b[:] = x * (k + 1) + b ** 2
            stages.append(b.copy())
        return sum(np.sum(s * (i + 1)) for i, s in enumerate(stages))

    check_grads(f, np.array([0.1, -0.3]))


def test_list_of_arrays_buffer():
    def f(x):
        bufs = [mnp.zeros(2) for _ in range(3)]
        for i, b in enumerate(bufs):
            b[:] = x * i
            b[0] += x[1] ** 2
        return np.sum(mnp.array(bufs) ** 2)

    check_grads(f, np.array([0.6, -0.2]))


def test_nested_list_to_array():
    def f(x):
        m = mnp.array([[x[0], x[1]], [x[1] * x[0], 1.0]])
        return np.linalg.det(m)

    check_grads(f, np.array([0.6, -0.2]))


# NumPy dispatches on arrays only: a list holding traced scalars reaches a function's rule as a
# list when another argument is traced, and as pieces of a sequence of arrays
LIST_ARGUMENTS = {
    "dot": lambda x: np.dot([x[0], 1.0], x[:2]),
    "matmul": lambda x: np.sum(np.matmul([[x[0], 1.0]], x[:2])),
    "outer": lambda x: np.sum(np.outer([x[0], 2.0], x)),
    "where": lambda x: np.sum(np.where([True, False], [x[0], x[1]], x[2:4])),
    "tensordot": lambda x: np.tensordot([x[0], x[1]], x[:2], 1),
    "einsum": lambda x: np.einsum("i,i->", [x[0], x[1]], x[:2]),
    "kron": lambda x: np.sum(np.kron([x[0], 1.0], x[:2])),
    "convolve": lambda x: np.sum(np.convolve([x[0], 1.0], x) ** 2),
    "average weights": lambda x: np.average(x[:2], weights=[x[2] ** 2, 1.0]),
    "polyval": lambda x: np.polyval([x[0], 1.0, x[1]], x[2:4]).sum(),
    "meshgrid": lambda x: sum(np.sum(m ** 2) for m in np.meshgrid([x[0], 1.0], x[:2])),
    "broadcast_arrays": lambda x: sum(np.sum(m * m) for m in np.broadcast_arrays(x[:2], [[x[0]], [1.0]])),
    "block of scalars": lambda x: np.sum(np.block([[x[0], x[1]], [1.0, x[2]]]) ** 2),
    "stack of scalars": lambda x: np.sum(np.stack([x[0], x[1]]) ** 2),
    "stack, a list piece": lambda x: np.sum(np.stack([[x[0], 1.0], x[:2]]) ** 2),
    "concatenate, zero padding": lambda x: np.sum(np.concatenate([[0.0], x, [0.0]]) ** 2),
    "concatenate, a list piece": lambda x: np.sum(np.concatenate([[x[1], 2.0], x]) ** 3),
    "vstack": lambda x: np.sum(np.vstack([x[:3], [1.0, 2.0, 3.0], [x[0], 0.0, x[1]]]) ** 2),
    "hstack": lambda x: np.sum(np.hstack([[1.0], x, [x[0]]]) ** 2),
    "hstack of scalars": lambda x: np.sum(np.hstack([x[0], x[1], 1.0]) ** 2),
    "hstack 2-D": lambda x: np.sum(np.hstack([x.reshape(2, 3), [[1.0], [x[0]]]]) ** 2),
    "dstack": lambda x: np.sum(np.dstack([x[:3], [1.0, 2.0, x[4]]]) ** 2),
    "column_stack": lambda x: np.sum(np.column_stack([[x[0], 1.0], x[:2]]) ** 2),
    "atleast_1d of several": lambda x: sum(np.sum(a ** 2) for a in np.atleast_1d(x[0], x[1:3], [1.0, 2.0])),
    "atleast_2d of several": lambda x: sum(np.sum(a ** 2) for a in np.atleast_2d(x[0], x[1:3])),
}


@pytest.mark.parametrize("name", list(LIST_ARGUMENTS))
def test_lists_of_traced_scalars_as_arguments(name):
    check_grads(LIST_ARGUMENTS[name], np.array([0.3, -1.2, 2.0, 0.7, 1.1, -0.4]), order=2)


INDEX_TRICKS = {
    "r_": lambda x: np.sum(np.r_[x, 3.0 * x] ** 2),
    "r_ padding": lambda x: np.sum(np.r_[0.0, x, 0.0] ** 3),
    "r_ with a slice": lambda x: np.sum(np.r_[x[:2], 1:3, x[::-1]] ** 2),
    "r_ of a traced scalar": lambda x: np.sum(np.r_[x[0], x] ** 2),
    "r_ directive": lambda x: np.sum(np.r_["0,2", x, x ** 2] ** 2),
    "c_": lambda x: np.sum(np.c_[x, x ** 2] ** 2),
    "c_ 2-D": lambda x: np.sum(np.c_[np.outer(x, x), x] ** 2),
}


@pytest.mark.parametrize("name", list(INDEX_TRICKS))
def test_r_and_c_of_traced_arrays(name):
    check_grads(INDEX_TRICKS[name], np.array([0.3, -1.2, 2.0]), order=2)


def test_r_and_c_of_plain_arrays_unchanged():
    np.testing.assert_array_equal(np.r_[1:4, 0, np.array([5, 6])], [1, 2, 3, 0, 5, 6])
    assert np.r_[1:4, 0].dtype == np.arange(3).dtype
    np.testing.assert_array_equal(np.c_[np.array([1, 2]), np.array([3, 4])], [[1, 3], [2, 4]])
    assert np.r_[np.array([1.5], dtype=np.float32), 2].dtype == np.float32


@pytest.mark.parametrize("f", [
    lambda p: np.dot([1.0, 2.0, 4.0], p),
    lambda p: np.inner([1.0, 2.0, 4.0], p * p),
    lambda p: np.einsum("i,i->", [1.0, 2.0, 4.0], np.sin(p)),
    lambda p: np.sum(np.stack([[1.0, 2.0, 4.0], p]) ** 2),
    lambda p: np.sum(np.concatenate([[0.5, 1.5], p, (2.0,)]) ** 3),
    lambda p: np.sum(np.where([True, False, True], p, [1.0, 2.0, 3.0]) * p),
], ids=["dot", "inner", "einsum", "stack", "concatenate", "where"])
def test_plain_lists_of_numbers_before_traced_arguments(f):
    # a plain list NumPy makes one array of takes one cotangent, whatever comes after it
    check_grads(f, np.array([0.3, -1.2, 2.0]))


def test_containers_passed_as_they_are_get_values_not_traced_leftovers():
    # a list or dict argument that is not differentiated (and holds no float array) is the
    # caller's own: traced values the function put there were left as tracers of the
    # finished differentiation, where a plain call leaves numbers and arrays
    def f(y, log, state):
        log.append(y[0] * 3.0)
        state["v"] = y * 2.0
        state["hist"].append(np.sum(y))
        return np.sum(y ** 2)

    y = np.array([1.0, 2.0])
    plain_log, plain_state = [], {"hist": [0.5]}
    f(y.copy(), plain_log, plain_state)
    for run in (lambda l, s: mg.grad(f)(y.copy(), l, s),
                lambda l, s: mg.value_and_grad(f)(y.copy(), l, s)):
        log, state = [], {"hist": [0.5]}
        run(log, state)
        assert [type(v) for v in log] == [type(v) for v in plain_log] == [np.float64]
        assert type(state["v"]) is np.ndarray and type(state["hist"][1]) is np.float64
        assert log == plain_log and state["hist"] == plain_state["hist"]
        np.testing.assert_array_equal(state["v"], plain_state["v"])
    np.testing.assert_allclose(mg.grad(f)(y.copy(), [], {"hist": []}), 2 * y)  # d/dy sum(y**2)


def test_jacobian_of_a_function_that_adds_or_removes_items_of_its_argument():
    # the Jacobian has the structure of the argument at the call (reverse mode flattened it after the
    # call: an item popped lost its block, silently; one appended raised IndexError)
    def pops(lst):
        lst.pop(0)
        return lst[0] * 2.0

    def appends(lst):
        lst.append(lst[0] * 2.0)
        return lst[0] * lst[1]

    def keys(d):
        d["c"] = d["a"] * 3.0
        v = d.pop("b")
        return d["c"] * v

    a, b = np.array([1.0, 2.0]), np.array([3.0, 4.0])
    cases = [
        (pops, lambda: [a.copy(), b.copy()], [np.zeros((2, 2)), 2.0 * np.eye(2)]),  # closed forms
        (appends, lambda: [a.copy(), b.copy()], [np.diag(b), np.diag(a)]),
        (keys, lambda: {"a": a.copy(), "b": b.copy()}, {"a": np.diag(3.0 * b), "b": np.diag(3.0 * a)}),
    ]
    for f, make, want in cases:
        for mode in ("rev", "fwd"):
            got = mg.jacobian(f, mode=mode)(make())
            assert type(got) is type(want) and len(got) == len(want), (f.__name__, mode)
            for k in (range(len(want)) if type(want) is list else want):
                np.testing.assert_allclose(got[k], want[k], rtol=1e-14, err_msg=f"{f.__name__} {mode} {k}")


def test_dataclass_argument_whose_field_the_function_deletes():
    # `del p.w` inside the function: the caller's object loses the field, as in a plain call (the
    # sync after the call raised AttributeError), and the gradient has the call's structure
    @dataclasses.dataclass
    class P:
        w: np.ndarray
        b: np.ndarray

    def f(p):
        r = np.sum(p.w * p.b)
        del p.w
        return r

    make = lambda: P(np.array([1.0, 2.0]), np.array([3.0, 4.0]))
    plain = make()
    f(plain)
    for d in (mg.grad(f), mg.jacobian(f), mg.jacobian(f, mode="fwd")):
        p = make()
        g = d(p)
        np.testing.assert_allclose(g.w, [3.0, 4.0], rtol=1e-15)  # d/dw sum(w * b) = b, by hand
        np.testing.assert_allclose(g.b, [1.0, 2.0], rtol=1e-15)
        assert not hasattr(p, "w") and not hasattr(plain, "w")
        np.testing.assert_array_equal(p.b, plain.b)


@pytest.mark.parametrize("slots", [False, True])
def test_deleted_field_with_a_class_default_and_a_new_default_factory(slots):
    # `del p.b` of a field with a class default: the caller's instance loses its own b and reads the
    # class's default again, as after a plain call (the sync gave it the class default as its own
    # attribute); a defaultdict whose default_factory the function sets keeps the new one
    from collections import defaultdict

    @dataclasses.dataclass(slots=slots)
    class P:
        w: np.ndarray
        b: float = 1.0

    def f(p):
        r = np.sum(p.w * p.b)
        del p.b
        p.w = p.w * 2.0
        return r

    plain, p = P(np.array([1.0, 2.0]), 3.0), P(np.array([1.0, 2.0]), 3.0)
    f(plain)
    g = mg.grad(f)(p)
    np.testing.assert_allclose(g.w, [3.0, 3.0], rtol=1e-15)  # d/dw sum(w * b) = b, by hand
    for q in (p, plain):
        assert not slots or not hasattr(q, "b")
        assert slots or ("b" not in vars(q) and q.b == 1.0)
    np.testing.assert_array_equal(p.w, plain.w)

    def h(d):
        d.default_factory = float
        d["k"] = d["k"] * 2.0
        return np.sum(d["k"] ** 2)

    d, plain_d = defaultdict(list, k=np.array([1.0, 2.0])), defaultdict(list, k=np.array([1.0, 2.0]))
    h(plain_d)
    np.testing.assert_allclose(mg.grad(h)(d)["k"], [8.0, 16.0], rtol=1e-15)  # d/dk (2k)² = 8k
    assert d.default_factory is float is plain_d.default_factory
    np.testing.assert_array_equal(d["k"], plain_d["k"])


def test_ordered_and_default_dicts_are_pytrees_and_unknown_output_containers_raise():
    # OrderedDict and defaultdict in and out, as JAX takes them (arguments were refused; as outputs of
    # vjp and jvp they were leaves, so their traced values got zero derivatives, silently); an output
    # container mutagrad does not look into raises
    from collections import OrderedDict, defaultdict
    from types import SimpleNamespace

    out, pb = mg.vjp(lambda x: OrderedDict(a=x * 2.0, b=x ** 2), 1.5)
    assert type(out) is OrderedDict and list(out) == ["a", "b"]
    assert pb(OrderedDict(a=1.0, b=1.0)) == (2.0 + 3.0,)  # d/dx (2x + x²) at 1.5, by hand
    _, t = mg.jvp(lambda x: OrderedDict(a=x * 2.0), (1.5,), (1.0,))
    assert type(t) is OrderedDict and t["a"] == 2.0
    d = OrderedDict(a=np.array([1.0, 2.0]), b=np.array([3.0, 4.0]))

    def rebinds(d):
        d["a"] = d["a"] * d["b"]
        return np.sum(d["a"])

    g = mg.grad(rebinds)(d)
    assert type(g) is OrderedDict
    np.testing.assert_allclose(g["a"], [3.0, 4.0], rtol=1e-15)
    np.testing.assert_allclose(g["b"], [1.0, 2.0], rtol=1e-15)
    assert type(d["a"]) is np.ndarray  # the caller's dict holds what a plain call leaves
    np.testing.assert_array_equal(d["a"], [3.0, 8.0])
    dd = defaultdict(list, a=np.array([1.0, 2.0]))
    g = mg.grad(lambda d: np.sum(d["a"] ** 2))(dd)
    assert type(g) is defaultdict and g.default_factory is list
    np.testing.assert_allclose(g["a"], [2.0, 4.0], rtol=1e-15)

    # forward-mode jacobian and hessian run the function once per input element, restoring the
    # arguments in between: an OrderedDict (nested too) is put back, not written into (it gained an
    # Ellipsis key, and the calls raised)
    for make in (lambda: OrderedDict(a=np.array([1.0, 2.0])), lambda: defaultdict(list, a=np.array([1.0, 2.0]))):
        d = make()
        np.testing.assert_allclose(mg.jacobian(lambda d: np.sum(d["a"] ** 2), mode="fwd")(d)["a"], [2.0, 4.0])
        np.testing.assert_allclose(mg.hessian(lambda d: np.sum(d["a"] ** 3))(d)["a"]["a"], np.diag([6.0, 12.0]))
        assert list(d) == ["a"]
    n = {"x": OrderedDict(a=np.array([1.0, 2.0]))}
    np.testing.assert_allclose(mg.jacobian(lambda n: np.sum(n["x"]["a"] ** 2), mode="fwd")(n)["x"]["a"], [2.0, 4.0])
    assert list(n["x"]) == ["a"]

    class MyList(list):
        pass

    for f in (lambda x: MyList([x * 3.0]), lambda x: SimpleNamespace(a=x)):
        with pytest.raises(TypeError, match="output leaf 0 is a"):
            mg.vjp(f, np.ones(2))
        with pytest.raises(TypeError, match="output leaf 0 is a"):
            mg.jvp(f, (np.ones(2),), (np.ones(2),))


def test_vjp_intermediate_left_in_a_container_argument_is_guarded():
    # an intermediate the function stores into its dict/list/dataclass argument reaches the caller's
    # container as a plain array: a write into it before the pullback gave a cotangent of other
    # values (0.0027 for 0.0903), silently; now MutationError, and untouched it is the right one
    w0 = np.array([1.3, 0.7, 2.1, 1.9])
    want = np.cos(w0) / (np.sin(w0) + 2.0)  # d/dw log(sin(w) + 2), by hand

    @dataclasses.dataclass
    class P:
        w: np.ndarray
        cache: object = None

    def in_dict(d):
        d["cache"] = np.sin(d["w"]) + 2.0
        return np.log(d["cache"])

    def in_list(lst):
        lst.append(np.sin(lst[0]) + 2.0)
        return np.log(lst[-1])

    def in_object(p):
        p.cache = np.sin(p.w) + 2.0
        return np.log(p.cache)

    cases = [(in_dict, lambda: {"w": w0.copy()}, lambda a: a["cache"], lambda g: g["w"]),
             (in_list, lambda: [w0.copy()], lambda a: a[1], lambda g: g[0]),
             (in_object, lambda: P(w0.copy()), lambda a: a.cache, lambda g: g.w)]
    for f, make, cached, grad_w in cases:
        arg = make()
        _, pb = mg.vjp(f, arg)
        np.testing.assert_allclose(grad_w(pb(np.ones(4))[0]), want, rtol=1e-14)
        cached(arg)[0] = 100.0
        with pytest.raises(mg.MutationError, match="modified after vjp returned"):
            pb(np.ones(4))


def test_a_leftover_in_a_container_argument_is_the_array_it_holds():
    # a traced value a finished differentiation left behind, passed inside a dict or a list (a
    # bare AttributeError when the level released its locks), or as a jvp tangent (warned that a
    # derivative was lost: a tangent is data)
    kept = []

    def f(x):
        y = np.sin(x)
        kept.append(y)
        return np.sum(y)

    x = np.array([0.3, 0.8])
    mg.grad(f)(x)
    left = kept[0]
    want = 2 * np.sin(x)  # d/dz sum(z^2) at z = sin(x), by hand
    d = {"a": left}
    np.testing.assert_allclose(mg.grad(lambda d: np.sum(d["a"] ** 2))(d)["a"], want, rtol=1e-15)
    assert d["a"] is left  # (the caller's dict keeps its own leaf)
    np.testing.assert_allclose(mg.value_and_grad(lambda l: np.sum(l[0] ** 2))([left])[1][0], want, rtol=1e-15)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _, t = mg.jvp(lambda z: z * 2.0, (np.ones(2),), (left,))
    np.testing.assert_array_equal(t, 2.0 * np.sin(x))
    # in a container that is not differentiated (the locks were never released: arrays left read-only)
    other = np.array([3.0, 4.0])
    z = np.array([1.0, 2.0])
    g = mg.grad(lambda z, d: np.sum(z * d["a"] * d["b"]))(z, {"a": left, "b": other})
    np.testing.assert_array_equal(g, np.sin(x) * other)  # d/dz sum(z a b) = a b
    assert z.flags.writeable and other.flags.writeable


@contextlib.contextmanager
def _registered(cls, *fields):
    """``cls`` registered as a pytree of ``fields`` (its constructor's arguments) for the test only."""
    from mutagrad.pytree import _REGISTRY, register_pytree

    register_pytree(cls, lambda p: (tuple(getattr(p, f) for f in fields), None), lambda aux, ch: cls(*ch))
    try:
        yield
    finally:
        _REGISTRY.pop(cls, None)


class _Params:
    def __init__(self, w, b):
        self.w, self.b = w, b


class _CopyingBody:
    def __init__(self, pos, vel):  # (a defensive copy, as many classes make)
        self.pos = pos.copy()
        self.vel = vel.copy()


def test_a_registered_pytree_that_copies_its_leaves_gets_the_functions_writes():
    # (customrules) the rebuilt object wrote into its own copies; the caller's object was paired with its
    # untouched arrays by attribute name, so it kept them after grad and jvp (a plain call moves it)
    def kick(b):
        b.vel += -0.1 * b.pos
        b.pos += 0.1 * b.vel
        return np.sum(b.pos ** 2)

    p0, v0 = np.array([1.0, 2.0]), np.array([0.5, -0.5])
    plain = _CopyingBody(p0, v0)
    kick(plain)
    with _registered(_CopyingBody, "pos", "vel"):
        for run in (lambda b: mg.grad(kick)(b), lambda b: mg.jvp(kick, (b,), (_CopyingBody(np.ones(2), np.zeros(2)),)),
                    lambda b: mg.vjp(kick, b)[1](1.0)):
            b = _CopyingBody(p0, v0)
            run(b)
            np.testing.assert_array_equal(b.pos, plain.pos)
            np.testing.assert_array_equal(b.vel, plain.vel)
            assert type(b.pos) is np.ndarray and b.pos.flags.writeable
        g = mg.grad(kick)(_CopyingBody(p0, v0))
        want = [(kick(_CopyingBody(p0 + 1e-6 * e, v0)) - kick(_CopyingBody(p0 - 1e-6 * e, v0))) / 2e-6 for e in np.eye(2)]
        np.testing.assert_allclose(g.pos, want, rtol=1e-7)


def test_a_registered_pytree_objects_rebound_attributes_reach_the_caller():
    # p.b = p.b * 2 rebinds an attribute of the object the function was given: the caller's object
    # kept its old attributes after grad, jvp and hessian (the function saw a rebuilt one)
    def g(p):
        p.b = p.b * 2
        p.w = p.w * 3.0
        return np.sum(p.w ** 2) + p.b

    with _registered(_Params, "w", "b"):
        plain = _Params(np.array([1.0, 2.0]), 2.0)
        g(plain)
        for run in (mg.grad(g), lambda p: mg.jvp(g, (p,), (_Params(np.ones(2), 1.0),)),
                    lambda p: mg.value_and_grad(g)(p)):
            p = _Params(np.array([1.0, 2.0]), 2.0)
            run(p)
            assert p.b == plain.b and type(p.b) is type(plain.b) and np.array_equal(p.w, plain.w)
        g_ = mg.grad(g)(_Params(np.array([1.0, 2.0]), 2.0))
        np.testing.assert_allclose(g_.w, 18 * np.array([1.0, 2.0]))  # d/dw of sum((3w)^2), by hand
        assert g_.b == 2.0


class _Slotted:
    __slots__ = ("a", "b")

    def __init__(self, a, b):
        self.a, self.b = a, b


def test_a_registered_pytree_object_with_slots_gets_its_rebound_attributes():
    def h(p):
        p.b = p.b * 2
        return np.sum(p.a * p.b)

    with _registered(_Slotted, "a", "b"):
        for run in (mg.grad(h), lambda p: mg.jvp(h, (p,), (_Slotted(np.ones(2), np.ones(2)),))):
            p = _Slotted(np.array([1.0, 2.0]), np.array([3.0, -1.0]))
            run(p)
            assert np.array_equal(p.b, [6.0, -2.0])  # (what a plain call leaves)


class _Tagged:
    __slots__ = ("a", "b", "tag")

    def __init__(self, a, b):
        self.a, self.b = a, b


def test_a_registered_pytree_objects_attributes_outside_its_flattening_are_left_alone():
    # the rebuilt object has only the flattened attributes: the sync deleted the caller's others
    with _registered(_Tagged, "a", "b"):
        p = _Tagged(np.array([1.0, 2.0]), 3.0)
        p.tag = "run-1"
        g = mg.grad(lambda p: np.sum(p.a * p.b))(p)
        assert p.tag == "run-1" and p.b == 3.0
        np.testing.assert_allclose(g.a, [3.0, 3.0])  # by hand
