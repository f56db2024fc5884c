"""Storages hold large roots weakly. Exercise that path on small arrays by
lowering the threshold: every storage then holds its root weakly."""
import numpy as np
import pytest

import mutagrad as mg
import mutagrad.core as core
from mutagrad.testing import check_grads
from tests import fuzz_programs


@pytest.fixture(autouse=True)
def all_roots_weak(monkeypatch):
    monkeypatch.setattr(core, "WEAK_ROOT_SIZE", -1)


def heat(u0):
    u = u0.copy()
    new = np.empty_like(u)
    for _ in range(5):
        new[1:-1] = u[1:-1] + 0.3 * (u[2:] - 2 * u[1:-1] + u[:-2])
        new[0] = new[1]
        new[-1] = new[-2]
        u, new = new, u
    return np.sum(u * u)


def test_heat_stencil():
    check_grads(heat, np.sin(np.linspace(0.0, 3.0, 12)), order=2)


def test_overwritten_intermediates_and_views():
    def f(x):
        y = np.exp(x)
        z = y[::-1] * x  # y's storage read through a view
        y[1:] = 0.0      # overwrite what exp's pullback reads
        t = np.tanh(z).T
        del z
        return np.sum(t.T * y) + np.sum(np.sin(x.T) @ x)

    check_grads(f, np.arange(6.0).reshape(2, 3) / 5)


def test_vjp_pullback_after_temporaries_died():
    x = np.array([0.3, 0.6, 0.9])
    out, pb = mg.vjp(lambda x: np.cumsum(np.exp(x) * 2.0), x)
    (g,) = pb(np.ones(3))
    np.testing.assert_allclose(g, 2 * np.exp(x) * np.array([3.0, 2.0, 1.0]))


def test_programs():
    counts, _, distinct, _ = fuzz_programs.run(60, 77, out=open("/dev/null", "w"))
    assert counts["failures"] == 0, distinct
