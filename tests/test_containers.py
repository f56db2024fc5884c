"""Containers are buffers (contract 1.2.7): lists, dicts, dataclass and
object attributes holding traced values, generators and iterators."""
import dataclasses
import functools
import itertools

import numpy as np

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
