"""Rules' own fast paths give the general path's numbers.

A scatter (``ufunc.at``) groups its positions by a radix sort of 16-bit keys;
cumprod's derivative at zero factors is taken from each lane's first zero in a
few passes where its products stay normal numbers (the recurrence otherwise);
an einsum's cotangents use a contraction plan found once per subscripts and
shapes; reduceat's segments that tile the axis are a slice and a repeat, not a
gather and a scatter. Each is checked against NumPy (the helpers) or against
central differences of the plain function and the other mode (check_grads).
"""
import numpy as np
import pytest

import mutagrad as mg
from mutagrad.rules import linalg, mutation, reductions
from mutagrad.testing import check_grads

RNG = np.random.default_rng(4701)


@pytest.mark.parametrize("top", [1, 300, 1 << 16, (1 << 16) + 5, 1 << 31, 1 << 40])
def test_stable_order_and_unique_inverse_are_numpys(top):
    keys = RNG.integers(0, top, 5000)
    assert np.array_equal(mutation._stable_order(keys), np.argsort(keys, kind="stable"))
    for size in (top, 10 * top + 100):  # (a mark per element, or a sort)
        uniq, inv = mutation._unique_inverse(keys, size)
        want_u, want_inv = np.unique(keys, return_inverse=True)
        assert np.array_equal(uniq, want_u) and np.array_equal(inv, want_inv)


def test_stable_order_of_negative_and_tiny_keys():
    keys = RNG.integers(-50, 50, 400)
    assert np.array_equal(mutation._stable_order(keys), np.argsort(keys, kind="stable"))
    assert mutation._stable_order(np.array([3])).tolist() == [0]
    assert mutation._stable_order(np.array([], np.intp)).size == 0


IDX = RNG.integers(0, 40, 900)  # (repeated positions, many per position)


def multiply_at(v):
    out = np.ones_like(v, shape=40)
    np.multiply.at(out, IDX, 1.0 + 0.01 * v)
    return np.sum(out ** 2)


def maximum_at(v):
    out = np.full_like(v, -5.0, shape=40)
    np.maximum.at(out, IDX, v)
    return np.sum(out * np.arange(40))


@pytest.mark.parametrize("fn", [multiply_at, maximum_at])
def test_scatters_with_repeated_positions(fn):
    check_grads(fn, RNG.standard_normal(IDX.size), rtol=1e-5)


def _cumprod_case(shape, zeros):
    x = RNG.uniform(0.5, 1.5, shape) * RNG.choice([-1.0, 1.0], shape)
    x.flat[list(zeros)] = 0.0
    return x


# (lanes with zeros first, last, next to each other, once; the fast path needs a zero in every lane)
CUMPROD_CASES = [((7,), None, (0,)), ((7,), None, (6,)), ((8,), None, (2, 3)), ((9,), None, (1, 5, 7)),
                 ((3, 6), 1, (0, 8, 9, 17)), ((4, 5), 0, (0, 1, 2, 13, 18, 19)), ((2, 3, 4), -1, (0, 5, 9, 12, 19, 23))]


@pytest.mark.parametrize("shape,axis,zeros", CUMPROD_CASES)
def test_cumprod_at_zero_factors(shape, axis, zeros):
    x = _cumprod_case(shape, zeros)
    lanes = reductions._along_last(x, axis)
    assert reductions._zero_parts(lanes, np.cumprod(lanes, axis=-1)) is not None  # (the fast path is taken)
    w = RNG.standard_normal(np.cumprod(x, axis=axis).shape)
    check_grads(lambda x: np.sum(w * np.cumprod(x, axis=axis)), x)


def test_cumprod_at_zero_factors_complex():
    x = RNG.standard_normal(6) + 1j * RNG.standard_normal(6)
    x[[1, 4]] = 0
    w = RNG.standard_normal(6)
    check_grads(lambda x: np.sum(np.abs(np.cumprod(x) * w + 1.0) ** 2), x)


def test_cumprod_at_zero_factors_whose_products_underflow():
    # (the factors after the zero underflow: the recurrence, not the fast path)
    x = np.r_[0.0, np.full(5, 1e-80), 2.0]
    assert reductions._zero_parts(x, np.cumprod(x)) is None
    w = np.arange(1.0, 8.0)
    g = mg.grad(lambda x: np.sum(w * np.cumprod(x)))(x)
    # d/dx_0 = sum_k w_k prod_{0 < i <= k} x_i = w_0 + 2e-80 (+ terms below 1e-159); every other 0
    assert g[0] == pytest.approx(1.0 + 2e-80, rel=1e-15) and not np.any(g[1:])


def test_cumprod_with_a_zero_in_one_lane_only():
    x = _cumprod_case((3, 8), ())
    x[1, 4] = 0.0
    assert reductions._zero_parts(x, np.cumprod(x, axis=-1)) is not None  # (the other lanes: all "before")
    check_grads(lambda x: np.sum(np.cumprod(x, axis=1) ** 2), x)


@pytest.mark.parametrize("mode", ["rev", "fwd"])
def test_cumprod_whose_products_underflow_without_a_zero(mode):
    # (regress87: 2000 halves, whose products underflow from the 1075th on: the recurrence took 160x the plain
    # call; in extended range, or by the recurrence where there is none, the same numbers) d/dx_j of
    # sum(w * cumprod(x)) = sum_{k >= j} w_k 2 ** -k, by exact powers of two
    import math

    n = 2000
    x = np.full(n, 0.5)
    w = np.random.default_rng(4705).uniform(1.0, 2.0, n)
    want = np.array([math.fsum(math.ldexp(w[k], -k) for k in range(j, n)) for j in range(0, 900, 37)])
    if mode == "rev":
        got = mg.grad(lambda x: np.sum(w * np.cumprod(x)))(x)[0:900:37]
    else:
        got = np.array([mg.jvp(lambda x: np.sum(w * np.cumprod(x)), (x,), (np.eye(1, n, j)[0],))[1]
                        for j in range(0, 900, 37)])
    np.testing.assert_allclose(got, want, rtol=1e-13)


@pytest.mark.parametrize("bond", [2, 12])
def test_einsum_cotangents_small_and_planned(bond):
    E = RNG.standard_normal((bond, bond))
    A = RNG.standard_normal((bond, 2, bond))
    plan = linalg._einsum_plan("cd,asc,bsd->ab", ((bond, bond), (bond, 2, bond), (bond, 2, bond)))
    assert (plan is False) == (bond ** 4 * 2 <= linalg._NAIVE_EINSUM)
    check_grads(lambda E, A: np.sum(np.einsum("ab,asc,bsd->cd", E, A, A) ** 2), E, A)


STARTS = [np.array([0, 3, 4, 9, 15]), np.array([2, 3, 10]), np.array([0, 5, 5, 2, 12]), np.array([4])]


@pytest.mark.parametrize("starts", STARTS)
@pytest.mark.parametrize("ufunc", [np.add, np.maximum, np.multiply])
def test_reduceat_tiling_and_not(starts, ufunc):
    x = RNG.uniform(0.5, 1.5, (18, 2))
    assert reductions._tiling(starts) == bool(np.all(np.diff(starts) > 0))
    check_grads(lambda x: np.sum(ufunc.reduceat(x, starts, axis=0) ** 2), x)
