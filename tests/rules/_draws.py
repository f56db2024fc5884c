"""Seeded random inputs for the rule tables; each table draws from its own stream."""
import numpy as np


class Draws:
    def __init__(self, seed):
        self.rng = np.random.default_rng(seed)

    def R(self, *shape):
        return self.rng.standard_normal(shape)

    def P(self, *shape):  # positive
        return self.rng.uniform(0.5, 2.0, shape)

    def U(self, *shape):  # inside (-0.9, 0.9)
        return self.rng.uniform(-0.9, 0.9, shape)

    def U01(self, *shape):  # inside (0, 1)
        return self.rng.uniform(0.1, 0.9, shape)

    def C(self, *shape):
        return self.rng.standard_normal(shape) + 1j * self.rng.standard_normal(shape)

    def SPD(self, n):  # symmetric positive definite
        a = self.rng.standard_normal((n, n))
        return a @ a.T + n * np.eye(n)


def assert_values_match_numpy(fn, args):
    """``fn``'s outputs under differentiation are NumPy's own, bit for bit and dtype for dtype."""
    import copy

    import mutagrad as mg
    from mutagrad.pytree import tree_flatten

    out, _ = mg.vjp(fn, *args)
    ref = fn(*copy.deepcopy(args))
    for o, r in zip(tree_flatten(out)[0], tree_flatten(ref)[0]):
        assert np.asarray(o).dtype == np.asarray(r).dtype
        np.testing.assert_array_equal(o, r)


def float_argnums(args):
    """The indices of the float arguments (arrays, numbers, tuples of them) of a table's call: the rest
    (orders, window lengths, integer sizes, strings) stays plain."""
    def diff(a):
        if isinstance(a, tuple):
            return all(diff(u) for u in a)
        return isinstance(a, (float, complex)) or (isinstance(a, np.ndarray) and a.dtype.kind in "fc")

    return tuple(i for i, a in enumerate(args) if diff(a))


def leaves(v):
    """The non-sequence items of nested tuples and lists, in order."""
    return [u for w in v for u in leaves(w)] if isinstance(v, (tuple, list)) else [v]


def assert_raises_as_theirs(theirs, ours, args, kw):
    """``ours(*args, **kw)`` with every float argument traced raises what ``theirs(*args, **kw)`` raises (SciPy's
    function and mutagrad's twin): the same type and message."""
    import re
    import warnings

    import pytest

    import mutagrad as mg

    with pytest.raises(Exception) as raised, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs(*args, **kw)
    with pytest.raises(type(raised.value), match=re.escape(str(raised.value))), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        mg.vjp(lambda *a: ours(*a, **kw), *args, _argnums=float_argnums(args))
