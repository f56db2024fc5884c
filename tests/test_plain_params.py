"""Plain arrays an operation reads (indices, bins, weights, constant operands)
may be changed by the program after the operation: the derivative uses the
values they had then.

Each program overwrites its plain arrays after using them. Oracles: central
differences of the plain program, and forward mode (whose tangents are
computed at the operation itself).
"""
import numpy as np
import pytest

from mutagrad.testing import check_grads


def _reduceat(x):
    idx = np.array([0, 2])
    r = np.add.reduceat(x, idx)
    idx[1] = 1
    return np.sum(r * r)


def _bincount(x):
    idx = np.array([0, 1, 1, 0])
    r = np.bincount(idx, weights=x)
    idx[:] = 0
    return np.sum(r * r)


def _take(x):
    idx = np.array([3, 0, 0])
    r = np.take(x, idx)
    idx[:] = 1
    return np.sum(r * r * x[idx])


def _matmul_plain(x):
    a = np.random.default_rng(1).random((3, 4))
    y = a @ x
    a[:] = 0.0
    return np.sum(y * y) + np.sum(a @ x)


def _interp(x):
    xp = np.array([0.0, 1.0, 2.0, 3.0])
    fp = np.array([0.0, 2.0, 1.0, 5.0])
    r = np.interp(x, xp, fp)
    fp[:] = 10.0
    xp *= 2.0
    return np.sum(r * r)


def _where(x):
    m = np.array([True, False, True, False])
    r = np.where(m, x, 2 * x)
    m[:] = True
    return np.sum(r * r)


def _convolve(x):
    k = np.array([1.0, -2.0, 0.5])
    r = np.convolve(x, k)
    k[:] = 3.0
    return np.sum(r * r)


def _put_along(x):
    i = np.array([2, 0])
    r = np.take_along_axis(x, i, axis=0)
    i[:] = 3
    return np.sum(r ** 3)


@pytest.mark.parametrize("fn", [_reduceat, _bincount, _take, _matmul_plain, _interp, _where, _convolve,
                                _put_along], ids=lambda f: f.__name__.strip("_"))
def test_plain_arrays_changed_after_use(fn):
    x = np.array([0.3, 1.2, 0.7, 2.1])
    check_grads(fn, x)


@pytest.mark.parametrize("fn", [
    lambda x: np.sum(x * x) + np.sum(x[[]]),
    lambda x: (x.__setitem__([], 2.0), np.sum(x * x))[1],
    lambda x: (np.add.at(x, [], 1.0), np.sum(x * x))[1],
    lambda x: np.sum(x * x) + np.sum(np.add.reduceat(x, [])),
], ids=["read", "write", "add.at", "reduceat"])
def test_an_empty_list_is_an_empty_integer_index(fn):
    # NumPy reads [] as an empty integer index (np.asarray([]) is float64, which it refuses)
    check_grads(fn, np.array([1.0, 2.0, 3.0]))


@pytest.mark.parametrize("values", [[2.0, 1.0, 0.5], 2.0], ids=["array", "scalar"])
@pytest.mark.parametrize("how", ["put", "flat"])
def test_put_writes_the_elements_before_an_index_out_of_range(values, how):
    # NumPy writes in index order and raises at the first index out of range; a program that
    # catches the IndexError goes on with the elements written
    def f(x):
        a = x.copy()
        v = x[1] * np.asarray(values)
        try:
            if how == "put":
                np.put(a, [0, 2, 9], v)
            else:
                a.flat[[0, 2, 9]] = v
        except IndexError as e:
            assert "index 9 is out of bounds" in str(e)
        return np.sum(a * a)

    check_grads(f, np.array([1.0, 2.0, 3.0]))
