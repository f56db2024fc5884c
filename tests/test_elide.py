"""Temporary elision (mutagrad/elide.py): a large temporary's buffer takes the next
operator's result, as NumPy's own elision does, and only a temporary's.

Every function here runs on arrays above NumPy's elision threshold (256 KiB). The
oracles are the plain NumPy call (values, bit for bit, and what the function returns
besides) and central differences of it (check_grads)."""
import dis

import numpy as np
import pytest

import mutagrad as mg
from mutagrad import elide

N = 40_000  # float64 elements: 320 kB


def _x(seed=0, n=N):
    return np.random.default_rng(seed).uniform(0.5, 1.5, n)


def _same_as_plain(f, x, rtol=1e-7, modes_rtol=1e-10):
    """The traced call returns NumPy's values, bit for bit; the gradient, along two
    random directions, agrees with central differences of the plain call and with
    forward mode (which elides nothing)."""
    plain = f(x.copy())
    value, g = mg.value_and_grad(f)(x.copy())
    np.testing.assert_array_equal(value, plain)
    rng = np.random.default_rng(7)
    for _ in range(2):
        v = rng.standard_normal(x.shape)
        h = 1e-6
        fd = (f(x + h * v) - f(x - h * v)) / (2 * h)
        _, tangent = mg.jvp(f, (x.copy(),), (v,))
        assert np.sum(g * v) == pytest.approx(fd, rel=rtol)
        assert np.sum(g * v) == pytest.approx(tangent, rel=modes_rtol)


def chain(x):
    return np.sum((((x * 2.0) + 1.0) * 3.0 - x) / 1.5 + 0.5)


def two_temporaries(x):
    return np.sum((x * 2.0) + (x * 3.0) * 0.25 + -(x * x) * 0.5)


def named_temporary(x):
    t = x * 2.0  # a name refers to it: the sum must not be computed into it
    u = t + 1.0
    return np.sum(t * u) + np.sum(t)


def read_by_the_next_pullback(x):
    return np.sum((x * 2.0) * (x * 3.0) + (x + 1.0) ** 2 + np.exp(x * 0.5) * 2.0)


def kept_in_a_list(x):
    keep = [x * 2.0]
    r = keep[0] + 1.0
    return np.sum(keep[0] * 5.0) + np.sum(r)


def object_array(x):
    box = np.empty(1, dtype=object)
    box[0] = x * 2.0  # an object array's element: NumPy's loop passes it to * with a borrowed reference
    r = box * 3.0
    s = (box + 0.0) * 4.0  # an element of a temporary object array
    return np.sum(box[0]) * 10.0 + np.sum(r[0]) + np.sum(s[0])


def other_dtype_and_shape(x):
    x32 = x.astype(np.float32)
    a = (x32 * np.float32(2.0)) + x  # a float32 temporary, a float64 result
    b = (x[:40_000, None] * 2.0) + x[None, :3]  # the result is larger than the temporary
    c = (x32 * np.float32(2.0)) + np.float32(1.0)  # float32 throughout: elided
    return np.sum(a) + np.sum(b) + np.sum(c.astype(np.float64)) * 1e-3


def conditional_operand(x):
    flag = x[0] > 0
    return np.sum((x * 2.0 if flag else x * 3.0) + 1.0)


def loop_and_inplace(x):
    u = x.copy()
    for _ in range(3):
        u = (u * 0.5) + x * 0.25
        u += (x * 2.0) * 0.125
    buf = np.empty_like(x)
    buf[:] = (u * 2.0) + 1.0
    return np.sum(buf * buf)


def comprehension(x):
    return sum(np.sum((x * k) + 1.0) for k in (1.0, 2.0))


def view_of_a_temporary(x):
    t = (x * 2.0)[::2] * 3.0
    return np.sum(t + 1.0)


@pytest.mark.parametrize("f", [chain, two_temporaries, named_temporary, read_by_the_next_pullback,
                               kept_in_a_list, object_array, conditional_operand, loop_and_inplace,
                               comprehension, view_of_a_temporary])
def test_values_and_gradients_are_the_plain_calls(f):
    _same_as_plain(f, _x())


def test_a_temporary_of_another_dtype_or_shape():
    # float32 parts: central differences of the plain call only to float32's precision
    _same_as_plain(other_dtype_and_shape, _x(), rtol=1e-3, modes_rtol=1e-6)
    g = mg.grad(other_dtype_and_shape)(_x())
    want = np.full(N, 3.0 + 2.0 * 3 + 2e-3)  # closed form: d/dx of the three sums
    want[:3] += N  # x[None, :3] is added to every row of b
    np.testing.assert_allclose(g, want, rtol=1e-6)


def test_higher_order():
    # the function is sum(6x² + (x+1)² + 2 exp(x/2)): its Hessian is diagonal, 14 + exp(x/2)/2
    x = _x(1)
    v = np.random.default_rng(2).standard_normal(N)
    want = (14.0 + 0.5 * np.exp(0.5 * x)) * v
    hv = mg.jvp(mg.grad(read_by_the_next_pullback), (x,), (v,))[1]  # forward over reverse
    np.testing.assert_allclose(hv, want, rtol=1e-12)
    rr = mg.grad(lambda x: np.sum(mg.grad(read_by_the_next_pullback)(x) * v))(x)  # reverse over reverse
    np.testing.assert_allclose(rr, want, rtol=1e-12)


def test_a_name_bound_to_a_temporary_keeps_its_values():
    seen = {}

    def f(x):
        t = x * 2.0
        u = t + 1.0
        seen["t"] = mg.value(t).copy()
        seen["u"] = mg.value(u).copy()
        w = (t * 3.0) + u  # (t*3.0) is a temporary, t and u are not
        seen["t after"] = mg.value(t).copy()
        return np.sum(w)

    x = _x(3)
    g = mg.grad(f)(x)
    np.testing.assert_array_equal(seen["t"], x * 2.0)
    np.testing.assert_array_equal(seen["u"], x * 2.0 + 1.0)
    np.testing.assert_array_equal(seen["t after"], x * 2.0)
    np.testing.assert_allclose(g, np.full(N, 8.0))  # d/dx (6x + 2x + 1)


def test_this_interpreter_tells_a_temporary_from_a_name():
    # the elision is on (a performance property), and its reference count is measured
    assert elide.TEMP_REFS is not None


def test_the_operands_instructions():
    def f(a, b, c, d):
        return (a * b) + c, c + (a * b), (a * b) + (c * d), -a + b, a + b, (a if b else c) * d

    code = f.__code__
    ops = [i for i in dis.get_instructions(code) if i.opname == "BINARY_OP"]
    by = {i.offset: i for i in dis.get_instructions(code)}
    found = [elide.producers(code, i.offset) for i in ops]
    names = [tuple(None if p is None else by[p].argrepr or by[p].opname for p in pr) for pr in found]
    # (a*b)+c: the left operand is a's product; c+(a*b): the right; (a*b)+(c*d): both;
    # -a + b: the negation; a + b: none; a conditional operand: none (a jump lands there)
    assert ("*", None) in names and (None, "*") in names and ("*", "*") in names
    assert ("UNARY_NEGATIVE", None) in names
    assert names[-1] == (None, None) and names[-2] == (None, None)


def test_an_element_of_an_object_array_is_never_read_after_its_memory_was_taken():
    # NumPy's object loop hands an operator the elements of a temporary object array with a
    # temporary's reference count; the element the last operator returned passes every check,
    # and the loop may use it again (broadcasting): values were silently wrong (18 for 15).
    # Now such a use raises; arrays of two or more elements, and lists, compute as NumPy does.
    def broadcast(x):
        box = np.empty(1, dtype=object)
        box[0] = x
        r = (box * 2.0) + np.array([1.0, 3.0], dtype=object)
        return np.mean(r[0] * r[1])

    x = _x(4)
    assert broadcast(x.copy()) == pytest.approx(np.mean((2 * x + 1) * (2 * x + 3)))
    with pytest.raises(mg.MutationError, match="object array"):
        mg.grad(broadcast)(x.copy())

    def as_list(x):
        parts = [x * 1.0, x * 0.5]
        r = [(p * 2.0) + 1.0 for p in parts]
        return np.mean(r[0] * r[1])

    _same_as_plain(as_list, x)
