"""Every in-place form × (destination traced / value traced / both) ×
(the array itself / a view of it), each checked with check_grads against
central finite differences of the same program on plain arrays, forward
against reverse, and the arguments' final contents against a plain call.

Each program first captures the destination's values (``c = np.sin(d)``),
then writes, then uses both: the derivative must see what each operation
saw (contract 1.2.4)."""
import warnings

import numpy as np
import pytest

import mutagrad as mg
import mutagrad.numpy as mnp
from mutagrad.testing import check_grads, numerical_grad
from tests._oracles import fd_hessian

MASK6 = np.array([True, False, True, True, False, False])

# forms on a 1-D destination of length >= 5 and a value of shape (3,)
FORMS_1D = {
    "setitem slice": lambda d, v: d.__setitem__(slice(1, 4), v),
    "setitem int": lambda d, v: d.__setitem__(2, v[0]),
    "setitem int array": lambda d, v: d.__setitem__(np.array([0, 3, 1]), v),
    "setitem repeated ints (last wins)": lambda d, v: d.__setitem__([0, 2, 0], v),
    "setitem bool mask": lambda d, v: d.__setitem__(MASK6[: len(d)], v[: MASK6[: len(d)].sum()]),
    "setitem broadcast scalar": lambda d, v: d.__setitem__(slice(None, None, 2), v[1]),
    "setitem ellipsis": lambda d, v: d.__setitem__(Ellipsis, v[2] * 2),
    "setitem None": lambda d, v: d.__setitem__((None, slice(0, 3)), v[None, :]),
    "setitem negative step": lambda d, v: d.__setitem__(slice(None, -4, -1), v),
    "setitem negative index": lambda d, v: d.__setitem__(-1, v[2]),
    "flat": lambda d, v: d.flat.__setitem__([1, 3], v[:2]),
    "fill": lambda d, v: d.fill(v[1]),
    "copyto": lambda d, v: np.copyto(d[:3], v),
    "copyto where": lambda d, v: np.copyto(d[:3], v, where=np.array([True, False, True])),
    "iadd": lambda d, v: d[:3].__iadd__(v),
    "isub": lambda d, v: d[1:4].__isub__(v),
    "imul": lambda d, v: d[:3].__imul__(v),
    "itruediv": lambda d, v: d[:3].__itruediv__(v + 2.0),
    "ipow": lambda d, v: _ipow(d, v),
    "ufunc out": lambda d, v: np.multiply(d[:3], v, out=d[2:5]),
    "ufunc where": lambda d, v: np.add(d[:3], v, out=d[:3], where=np.array([False, True, True])),
    "ufunc out unary": lambda d, v: np.sin(v, out=d[1:4]),
    "sum out": lambda d, v: np.sum(np.outer(v, v), axis=0, out=d[:3]),
    "mean out": lambda d, v: np.mean(np.outer(v, v), axis=1, out=d[1:4]),
    "prod out": lambda d, v: np.prod(np.outer(v, v), axis=1, out=d[:3]),
    "max out": lambda d, v: np.max(np.outer(v, v + 1), axis=0, out=d[:3]),
    "min out": lambda d, v: np.min(np.outer(v, v + 1), axis=1, out=d[:3]),
    "cumsum out": lambda d, v: np.cumsum(v, out=d[:3]),
    "clip out": lambda d, v: np.clip(v, 0.4, 0.8, out=d[:3]),
    "dot out": lambda d, v: np.dot(np.outer(v, v), v, out=d[:3]),
    "matmul out": lambda d, v: np.matmul(np.outer(v, v), v, out=d[:3]),
    "add.at": lambda d, v: np.add.at(d, [0, 2, 0], v),
    "multiply.at": lambda d, v: np.multiply.at(d, [1, 1, 3], v),
    "subtract.at": lambda d, v: np.subtract.at(d, np.array([4, 0, 4]), v),
    "sort": lambda d, v: (d.__setitem__(slice(0, 3), v * np.array([1.0, -1.0, 3.0])), d.sort()),
    "put": lambda d, v: np.put(d, [4, 0, 2], v),
    "place": lambda d, v: np.place(d, MASK6[: len(d)], v),
    "putmask": lambda d, v: np.putmask(d, MASK6[: len(d)], np.concatenate([v, v])),
    "put_along_axis": lambda d, v: np.put_along_axis(d, np.array([3, 0]), v[:2], 0),
}


def _ipow(d, v):
    w = d[:3]
    w **= v


# forms on a (3, 3) destination with a (3, 3) value
FORMS_2D = {
    "imatmul": lambda d, v: d.__imatmul__(v),
    "fill_diagonal": lambda d, v: np.fill_diagonal(d, v[0, 1]),
    "setitem row": lambda d, v: d.__setitem__(1, v[0]),
    "setitem column broadcast": lambda d, v: d.__setitem__((slice(None), 2), v[:, :1].ravel()),
    "setitem advanced 2-D": lambda d, v: d.__setitem__((np.array([0, 2]), np.array([1, 1])), v[0, :2]),
    "setitem mixed": lambda d, v: d.__setitem__((np.array([0, 2, 0]), slice(1, None)), v[:, :2]),
    "matmul out": lambda d, v: np.matmul(v, v, out=d),
    "iadd transposed": lambda d, v: d.__iadd__(v.T),
    "einsum out": lambda d, v: np.einsum("ij,jk->ik", v, v, out=d),
}

VIEWS_1D = {
    "array": lambda d: d,
    "slice view": lambda d: d[1:],
    "reversed view": lambda d: d[::-1],
    "reshape view": lambda d: d.reshape(2, 3).reshape(6)[:],
}

VIEWS_2D = {
    "array": lambda d: d,
    "transpose view": lambda d: d.T,
    "view of view": lambda d: d.reshape(9).reshape(3, 3)[:, :],
}

ROLES = ("both traced", "destination traced", "value traced")


def _program(form, view, role, shape):
    def prog(x, y):
        if role == "value traced":
            d = mnp.zeros(shape) + np.arange(1.0, 1.0 + np.prod(shape)).reshape(shape) * 0.25
        else:
            d = x  # write into the differentiated argument itself
        v = (y * y + 0.5) if role != "destination traced" else np.linspace(0.3, 0.9, y.size).reshape(y.shape)
        c = np.sin(d) * 1.0  # captured before the write
        form(view(d), v)
        return [d * 1.0, c, np.sum(v)]

    return prog


CASES = []
for fname, form in FORMS_1D.items():
    for vname, view in VIEWS_1D.items():
        for role in ROLES:
            CASES.append(pytest.param(form, view, role, (6,), (3,), id=f"{fname}-{vname}-{role}"))
for fname, form in FORMS_2D.items():
    for vname, view in VIEWS_2D.items():
        for role in ROLES:
            CASES.append(pytest.param(form, view, role, (3, 3), (3, 3), id=f"{fname}-{vname}-{role}"))


@pytest.mark.parametrize("form,view,role,dshape,vshape", CASES)
def test_write_form(form, view, role, dshape, vshape):
    rng = np.random.default_rng(abs(hash((role, dshape))) % 2**32)
    x = rng.uniform(0.5, 1.5, dshape)
    y = rng.uniform(0.5, 1.5, vshape)
    prog = _program(form, view, role, dshape)
    try:
        prog(x.copy(), y.copy())
    except Exception as e:  # NumPy refuses this combination: so must we
        with pytest.raises(type(e)):
            mg.grad(lambda x, y: np.sum(prog(x, y)[0]), argnums=(0, 1))(x.copy(), y.copy())
        return
    check_grads(prog, x, y, modes=("fwd", "rev"))


# -- overlapping reads and writes follow NumPy ------------------------------

OVERLAPS = {
    "x[1:] = x[:-1]": lambda x: x.__setitem__(slice(1, None), x[:-1]),
    "x[:-1] = x[1:]": lambda x: x.__setitem__(slice(None, -1), x[1:]),
    "copyto(x, x[::-1])": lambda x: np.copyto(x, x[::-1]),
    "add(x, x[::-1], out=x)": lambda x: np.add(x, x[::-1], out=x),
    "x += x[::-1]": lambda x: x.__iadd__(x[::-1]),
    "x *= x": lambda x: x.__imul__(x),
    "x[::2] = x[1::2] * x[::2]": lambda x: x.__setitem__(slice(None, None, 2), x[1::2] * x[::2]),
}


@pytest.mark.parametrize("name", list(OVERLAPS))
def test_overlapping_writes(name):
    op = OVERLAPS[name]

    def f(x):
        c = np.exp(x)
        op(x)
        return x * c

    check_grads(f, np.array([0.3, 0.9, -0.4, 1.2]))


def test_square_matrix_plus_its_transpose_in_place():
    def f(x):
        x += x.T
        return x * np.arange(1.0, 10.0).reshape(3, 3)

    check_grads(f, np.arange(9.0).reshape(3, 3) / 7)


# -- the seed cases of the core issue, against finite differences -----------

def test_overwritten_after_use():
    def f(x):
        y = np.log(x)
        x.fill(0)
        return np.sum(y + x)

    x = np.array([1.0, 2.0, 3.0])
    g = mg.grad(f)(x.copy())
    np.testing.assert_allclose(g, [1.0, 0.5, 1.0 / 3.0])
    check_grads(f, x)


def test_matvec_then_vector_filled():
    def f(x, y, z):
        xy = x @ y
        y[:] = z
        return np.sum(xy + y)

    x = np.array([[1.0, 2.0], [3.0, 4.0]])
    y = np.array([5.0, 6.0])
    gx, gy, gz = mg.grad(f, argnums=(0, 1, 2))(x.copy(), y.copy(), 7.0)
    np.testing.assert_allclose(gx, [[5.0, 6.0], [5.0, 6.0]])
    np.testing.assert_allclose(gy, [4.0, 6.0])
    assert gz == 2.0
    check_grads(f, x, y, 7.0)


def test_element_from_squared_parameter():
    def f(x, y):
        x[0] = y ** 2
        return np.sum(x * y)

    gx, gy = mg.grad(f, argnums=(0, 1))(np.array([1.0, 2.0, 3.0]), 4.0)
    np.testing.assert_allclose(gx, [0.0, 4.0, 4.0])
    assert gy == 53.0
    check_grads(f, np.array([1.0, 2.0, 3.0]), 4.0)


def test_scalar_broadcast_into_buffer():
    def f(p):
        b = mnp.zeros(3)
        b[:] = p
        return np.sum(b.copy())

    assert mg.grad(f)(1.0) == 3.0


def test_plain_constant_captured_then_overwritten():
    """A plain (untraced) array used by an operation and overwritten later."""
    c = np.array([1.0, 2.0, 3.0])

    def f(x):
        y = x * c
        z = np.sin(x) @ c
        c[:] = -5.0  # plain NumPy write we cannot see
        return np.sum(y) + z + np.sum(c * x)

    x = np.array([0.1, 0.2, 0.3])
    c_orig = c.copy()
    g = mg.grad(f)(x)
    np.testing.assert_allclose(g, c_orig + np.cos(x) * c_orig - 5.0)


W4 = np.array([1.0, 10.0, 100.0, 1000.0])


def _mask_then_changed(form):
    def f(x):
        m = np.array([True, False, True, False])
        i = np.array([[1], [0]])
        b = x * 1.0
        if form == "copyto where":
            np.copyto(b, x ** 3, where=m)
        elif form == "ufunc out where":
            np.exp(x, out=b, where=m)
        elif form == "ufunc where, fresh out":
            b = np.multiply(x, x, out=np.zeros_like(x), where=m)
        elif form == "put_along_axis":
            b = b.reshape(2, 2)
            np.put_along_axis(b, i, 7.0 * x[:2, None], axis=1)
        elif form == "boolean read":
            b = np.concatenate([(x ** 3)[m], x[:2]])
        elif form == "fancy read and write":
            b[i.ravel()] = (x ** 2)[i.ravel() + 2]
        m[:] = [False, True, False, True]  # plain writes into the mask and index after their use
        i[:] = [[0], [1]]
        return np.sum(np.ravel(b) ** 2 * W4)
    return f


@pytest.mark.parametrize("form", ["copyto where", "ufunc out where", "ufunc where, fresh out", "put_along_axis",
                                  "boolean read", "fancy read and write"])
def test_mask_or_index_changed_after_the_write(form):
    # the recorded write kept the caller's mask / index array: reverse mode rewound the write
    # through the changed one (a wrong gradient, or an internal broadcasting error)
    check_grads(_mask_then_changed(form), np.array([1.0, 2.0, 3.0, 4.0]))


def test_mask_buffer_refilled_each_step():
    def f(x):
        u = x * 0.2
        mask = np.empty(4, dtype=bool)
        for _ in range(3):
            np.less(u, 0.5, out=mask)
            np.multiply(u, 1.5 + u, out=u, where=mask)
        return np.sum(u * W4)

    x = np.array([1.0, 2.0, 3.0, 4.0])
    fd = [(f(x + 1e-6 * e) - f(x - 1e-6 * e)) / 2e-6 for e in np.eye(4)]
    np.testing.assert_allclose(mg.grad(f)(x.copy()), fd, rtol=1e-7)
    check_grads(f, x)


def test_each_stage_of_a_rewritten_buffer_contributes():
    def f(p):
        b = mnp.zeros(2)
        total = 0.0
        for k in range(4):
            b[:] = p * (k + 1) + b  # stage k reads stage k-1
            total = total + np.sum(b ** 2)
        return total

    check_grads(f, np.array([0.3, -0.2]))


def test_views_alias_values_and_derivatives():
    def f(x):
        v = x[1:3]
        t = x.T if x.ndim > 1 else x
        v *= 2.0        # write through a view changes the base
        x[0] = v[0] ** 2  # write to the base is seen by the view
        return [v * 1.0, t * 1.0, x * 1.0]

    check_grads(f, np.array([0.5, 1.5, -0.7, 2.0]))


def test_complex_real_and_imag_views():
    def f(z):
        w = z * 1.0
        w.real[:] = np.abs(z) ** 2
        w.imag = w.real * 2
        return np.abs(w * z) ** 2

    check_grads(f, np.array([1.0 + 0.5j, -0.3 + 2.0j]))


def test_read_only_views_refuse_writes():
    def f(x):
        b = np.broadcast_to(x, (2, 3))
        b[0, 0] = 1.0
        return np.sum(b)

    with pytest.raises(ValueError, match="read-only"):
        mg.grad(f)(np.array([1.0, 2.0, 3.0]))

    def g(x):
        d = np.diagonal(x)
        d[0] = 1.0
        return np.sum(d)

    with pytest.raises(ValueError, match="read-only"):
        mg.grad(g)(np.eye(2))


@pytest.mark.parametrize("keywords", [{"stable": True}, {"kind": "stable"}, {"kind": "heapsort", "axis": 0}])
def test_in_place_sort_takes_numpys_keywords(keywords):
    def f(x):
        x.sort(**keywords)
        return np.sum(np.arange(1.0, 5.0) * x ** 2)

    x = np.array([0.3, -1.2, 2.0, 0.7])
    check_grads(f, x)
    y = x.copy()
    mg.grad(f)(y)
    np.testing.assert_array_equal(y, np.sort(x))  # (the argument sorted, as by a plain call)


def test_in_place_sort_refuses_what_numpy_refuses():
    for keywords in ({"kind": "stable", "stable": True}, {"order": "a"}):
        with pytest.raises(ValueError) as plain:
            np.array([0.3, 1.0]).sort(**keywords)
        with pytest.raises(ValueError) as traced:
            mg.grad(lambda x, kw=keywords: (x.sort(**kw), np.sum(x))[1])(np.array([0.3, 1.0]))
        assert str(traced.value) == str(plain.value)


def test_side_effects_are_those_of_a_plain_call():
    def f(x, buf):
        buf[:2] = x[:2] ** 2
        x[1:] = x[:-1] * 3.0
        x.sort()
        return np.sum(x[:3] * buf)

    x0 = np.array([0.3, -1.2, 0.8, 2.0])
    b0 = np.array([1.0, 2.0, 3.0])
    xa, ba = x0.copy(), b0.copy()
    f(xa, ba)
    xb, bb = x0.copy(), b0.copy()
    mg.grad(f, argnums=(0, 1))(xb, bb)
    np.testing.assert_array_equal(xa, xb)
    np.testing.assert_array_equal(ba, bb)
    xc, bc = x0.copy(), b0.copy()
    mg.jvp(f, (xc, bc), (np.ones(4), np.ones(3)))
    np.testing.assert_array_equal(xa, xc)
    np.testing.assert_array_equal(ba, bc)


@pytest.mark.parametrize("fn", [np.exp, np.tanh, np.sqrt, lambda v: v ** 3, np.cumprod,
                                np.abs, lambda v: np.abs(v + 2j * v[::-1]),  # complex abs: z/|z|
                                lambda v: np.real(np.sign(v + 1j * v ** 2))])  # a view of sign's output
def test_output_overwritten_after_a_later_use(fn):
    """A pullback that reads its own output must see it as it was."""
    def f(x):
        y = fn(x)
        s = np.sum(y * np.array([1.0, 2.0, 3.0]))
        y[0] = 5.0
        y[1:] *= 3.0
        return s + np.sum(y)

    check_grads(f, np.array([0.3, 0.6, 0.9]))


def test_user_rule_reading_its_output_sees_it_as_it_was():
    """A rule registered for a built-in function may read what the built-in rule did not
    (here the output): the tape must keep it as it was, as for any other rule."""
    from mutagrad.core import get_primitive

    p = get_primitive(np.sinh)
    saved = p.rrule, p.reads
    try:
        @mg.rrule(np.sinh)
        def _(x):
            y = np.sinh(x)
            return y, lambda g: (g * np.sqrt(1.0 + y * y),)  # cosh(x), from the output

        def f(x):
            y = np.sinh(x)
            y *= 3.0
            return np.sum(y)

        x = np.array([0.3, -1.2, 2.0])
        fd = [(f(x + 1e-6 * e) - f(x - 1e-6 * e)) / 2e-6 for e in np.eye(3)]
        np.testing.assert_allclose(mg.grad(f)(x), fd, rtol=1e-7)
    finally:
        p.rrule, p.reads = saved


def test_adjoint_buffer_layout_after_a_broadcast_cotangent():
    """Regression: the first cotangent of a storage was a broadcast (stride-0)
    view; copying it kept a Fortran layout and views then indexed it wrongly."""
    def f(m):
        buf = mnp.zeros((2, 3))
        av = buf[0:1]
        av[...] = av + 2 * m
        return np.sum(buf, axis=0)

    check_grads(f, np.array([0.5, -1.0, 2.0]))


def test_var_with_a_given_mean():
    def f(x, mu):
        return np.var(x, axis=1, mean=mu)

    check_grads(f, np.array([[0.5, -1.0, 2.0], [0.1, 0.4, 0.3]]), np.array([[0.3], [0.2]]))


# -- regressions found by the fuzzer -----------------------------------------


def test_boolean_read_of_a_broadcast_view_reaches_every_alias():
    m = np.array([[True, False, True], [True, True, False]])
    w = np.array([1.0, 3.0, 4.0, 5.0])
    check_grads(lambda x: np.sum(np.broadcast_to(x, (2, 3))[m] * w), np.array([1.0, 2.0, 3.0]))
    check_grads(lambda x: np.broadcast_to(x, (2, 3))[[0, 1, 1], [0, 0, 2]] * 2.0, np.array([1.0, 2.0, 3.0]))


@pytest.mark.parametrize("stmt", [
    "np.add.at(a, [2, 1, 2], a[2:3])",
    "a.flat[[1, 2]] = a[:2]",
    "v = a.reshape(2, 2).T; v.flat[1:3] = v",
    "np.place(a, np.array([False, True, True, True]), a)",
    "np.place(a[::-1], np.array([True, True, False, True]), a)",
    "a[:3] = np.tanh(np.arange(9.0).reshape(3, 3).T) @ a[:3]",
    "np.fill_diagonal(a.reshape(2, 2), a.reshape(2, 2)[0, ::-1])",
    "np.put(a, [1, -1], a[:2])",
    "np.putmask(a, np.array([False, True, True, True]), a)",
    "a **= 3",
    "np.sin(a[::-1], out=a[::-1])",
    "np.exp(a, out=a, where=np.array([True, False, True, False]))",
    # x.flat = v: NumPy makes v F-contiguous first when x is (a copy, read before any write),
    # else goes element by element; x.flat[i] = v copies v only to convert its dtype
    "a.flat = a[::-1]",
    "a.flat = a[::2]",
    "a.flat = a[1:3]",
    "a.reshape(2, 2).flat = a.reshape(2, 2).T",
    "a.reshape(2, 2).T.flat = a.reshape(2, 2)[:, 1]",
    "a.reshape(2, 2).T.flat = a[2:]",
    "a.flat[:] = a[::-1]",
    "a.view(np.complex128).flat[[1, 0]] = a[2:]",
    "a.view(np.complex128).flat[[1, 0]] = a[2:].view(np.complex128)",
])
def test_overlapping_in_place_forms_leave_numpys_bits(stmt):
    def f(a):
        exec(stmt, {"np": np, "a": a})
        return a * np.arange(1.0, 5.0)

    check_grads(f, np.array([0.3, 0.7, 1.1, 1.3]))


# A 1-D destination and a source that overlaps it with other strides: NumPy copies
# element by element without a buffer (by ascending destination address, backwards
# when the source starts below the destination and reaches into it), so a later
# element may read what an earlier step wrote. Found by the fuzzer (seed 71).
UNBUFFERED = [
    "x.reshape(3, 3)[:, 2] = x.reshape(3, 3)[1]",
    "x.reshape(3, 3)[:, 2] = x.reshape(3, 3)[1:2, :]",
    "x[1:5] = x[:8:2]",
    "x[1:5][...] = x[:8:2]",
    "x[np.int64(1):5] = x[:8:2].reshape(1, 4)",
    "x[5:1:-1] = x[::-2][:4]",
    "x.reshape(3, 3)[1, :] = x.reshape(3, 3)[:, 1]",
    "np.copyto(x[1:5], x[:8:2])",
    "np.copyto(x[1:5], x[:8:2], where=np.array([True, False, True, True]))",
    "np.copyto(x[1:5], x[:8:2], where=np.array([True, True, False, True]))",
    # functions that write their result into out= in steps, each reading the arrays as they are then
    "np.concatenate([x[3:6], x[0:3]], out=x[0:6])",
    "np.concatenate([x[::3], x[1::3]], out=x[:6])",
    "np.concatenate([x[::3], x[1::3].reshape(1, 3)], axis=None, out=x[2:8])",
    "np.concatenate([x.reshape(3, 3)[:, :1], x.reshape(3, 3)[:, 2:]], axis=1, out=x.reshape(3, 3)[:, :2])",
    "np.stack([x[3:6], x[0:3]], out=x[:6].reshape(2, 3))",
    "np.stack([x[3:6], x[0:3]], axis=1, out=x[:6].reshape(3, 2))",
    "np.ptp(x.reshape(3, 3), axis=0, out=x[1:4])",
    "np.ptp(x.reshape(3, 3), axis=1, out=x[::4][:3])",
    # buffered by NumPy, or unbuffered with the same result
    "x[3:6] = x[::3]",
    "x[::-1][:3] = x[::3]",
    "x[::-3] = x[::-1][:3]",
    "x[4:8] = x[:8:2]",
]


def _check_statement(stmt, seed):
    """``stmt`` (on a 9-element x) between a capture of x and uses of both."""
    w = np.linspace(-1.0, 1.0, 9)

    def f(x):
        c = np.sin(x)
        exec(stmt, {"np": np, "x": x})
        return np.sum(x * w) + np.sum(x ** 3 * c)

    check_grads(f, np.random.default_rng(seed).standard_normal(9), order=2)


@pytest.mark.parametrize("stmt", UNBUFFERED)
def test_unbuffered_overlapping_copies_follow_numpy(stmt):
    _check_statement(stmt, 3)


def test_unbuffered_overlapping_copy_closed_form():
    # NumPy: a[0, 2] = a[1, 0]; a[1, 2] = a[1, 1]; a[2, 2] = a[1, 2], which now holds a[1, 1]
    w = np.arange(1.0, 10.0).reshape(3, 3)

    def f(x):
        a = x.reshape(3, 3)
        a[:, 2] = a[1]
        return np.sum(a * w)

    x = np.arange(9.0)
    plain = x.copy().reshape(3, 3)
    plain[:, 2] = plain[1]
    np.testing.assert_array_equal(plain[:, 2], [3.0, 4.0, 4.0])  # NumPy's own result
    expected = w.copy()
    expected[:, 2] = 0.0
    expected[1, 0] += w[0, 2]
    expected[1, 1] += w[1, 2] + w[2, 2]
    np.testing.assert_allclose(mg.grad(f)(x.copy()), expected.ravel(), rtol=1e-15)


def test_plain_arrays_reduced_into_traced_buffers():
    c = np.arange(6.0).reshape(2, 3)

    def f(x):
        b = mnp.zeros(3)
        c.sum(axis=0, out=b)
        b2 = mnp.zeros(3)
        np.add.reduce(x, axis=0, out=b2)
        b3 = mnp.zeros(3)
        x[1].clip(0.5, 1.5, out=b3)
        return np.sum(b * x[0]) + np.sum(b2 * b3)

    check_grads(f, np.array([[0.3, 0.8, 1.2], [0.4, 1.1, 2.0]]))


@pytest.mark.parametrize("stmt", [
    "x.partition(4)",
    "x[:8:2].partition(2)",
    "x.reshape(3, 3).partition(1, axis=0)",
    "x.reshape(3, 3).partition([0, 2])",
    "x.put([0, 0], [x[1], x[2]])",
    "np.place(x, x > 0, [x[0], x[1]])",
    "np.putmask(x, x > 0, (x[0], 2.0))",
    "np.fill_diagonal(x.reshape(3, 3), [x[0], 2.0, x[8]])",
])
def test_in_place_partition_and_values_given_as_lists(stmt):
    _check_statement(stmt, 5)


@pytest.mark.parametrize("op", [np.add, np.subtract, np.maximum, np.minimum, np.fmax, np.fmin])
def test_ufunc_at_with_many_repeats(op):
    # more than four occurrences of a position: one write of NumPy's own loop on the gathered
    # values (its bits), the sums' or the fold's derivative
    rng = np.random.default_rng(8)
    idx = rng.integers(0, 4, 40)
    v = rng.standard_normal(40)

    def f(a, v):
        view = a.reshape(2, 4)[:, ::2]  # a view that is not contiguous
        c = np.sin(a)
        op.at(view, (idx % 2, idx // 2), v * np.abs(v))
        return np.sum(a ** 3 * c)

    check_grads(f, rng.standard_normal(8), v, order=2)
    a = rng.standard_normal(8)
    plain = a.copy()
    op.at(plain.reshape(2, 4)[:, ::2], (idx % 2, idx // 2), v)
    out, _ = mg.vjp(lambda a, v: (op.at(a.reshape(2, 4)[:, ::2], (idx % 2, idx // 2), v), a * 1.0)[1], a.copy(), v)
    np.testing.assert_array_equal(out, plain)


@pytest.mark.parametrize("op", [np.add, np.subtract, np.maximum, np.fmin])
@pytest.mark.parametrize("inner", ["hessian", "jvp_of_grad", "grad"])
def test_ufunc_at_and_repeated_gathers_under_nested_differentiation(op, inner):
    # the rules of ufunc.at with repeats get plain values at their level and an outer level's
    # traced ones (a zero tangent meeting a traced one; values written from outside): the
    # derivatives of derivatives vs central differences of mutagrad's own (plain) inner ones
    idx = np.array([0, 1, 1, 2, 0])

    def energy(u, p):
        a = u * p[1]
        op.at(a, idx, p[0] * np.arange(1.0, 6.0) - u[idx] ** 2)
        return p[0] * np.sum(a ** 3) + np.sum(np.sin(u[idx]) * p[1])

    def outer(p):
        u = p[:3] * 1.0
        if inner == "hessian":
            d = mg.hessian(energy)(u, p[3:])
        elif inner == "jvp_of_grad":
            d = mg.jvp(lambda u: mg.grad(energy)(u, p[3:]), (u,), (np.array([1.0, -2.0, 0.5]),))[1]
        else:
            d = mg.grad(energy, argnums=(0, 1))(u, p[3:])
        return d

    check_grads(outer, np.array([0.7, 1.3, -0.4, 0.9, 1.1]), atol=1e-5, final_state=False)


def test_maximum_at_ties_split_as_the_sequence_of_maximums():
    # np.maximum's tie rule (half to each) applied step by step, by hand: a = b0 = b1:
    # c1 = max(a, b0) gives a, b0 a half each; c2 = max(c1, b1) halves c1's share, b1 gets a half
    def f(a, b):
        a = a * 1.0
        np.maximum.at(a, [0, 0, 1], b)
        return a[0] + 3.0 * a[1]

    a, b = np.array([1.0, 5.0]), np.array([1.0, 1.0, 7.0])
    ga, gb = mg.grad(f, argnums=(0, 1))(a, b)
    np.testing.assert_array_equal(ga, [0.25, 0.0])
    np.testing.assert_array_equal(gb, [0.25, 0.5, 3.0])
    _, t = mg.jvp(f, (a, b), (np.array([1.0, 10.0]), np.array([100.0, 1000.0, 1e4])))
    assert t == 0.25 + 25.0 + 500.0 + 3e4


@pytest.mark.parametrize("ufunc", [np.maximum, np.minimum, np.fmax, np.fmin])
def test_picking_ufunc_at_with_many_ties_follows_the_sequence_of_steps(ufunc):
    # long runs of ties at one position (a Bellman-Ford hub: 19157 candidates, 3000x a plain call when each
    # occurrence was a round of its own; graphalgo): the weights now come from scans over each position's
    # values. The oracle: the sequence of steps in plain Python, each step's partials by np.maximum's rule
    # (the winner 1, a tie a half each; maximum's NaN wins, fmax's loses), the later steps' shares multiplied
    rng = np.random.default_rng(7)
    nv, nb = 4, 600
    a = rng.integers(0, 3, nv).astype(float)
    b = rng.integers(0, 3, nb).astype(float)
    b[[5, 77]] = np.nan
    idx = np.r_[np.arange(nv), rng.integers(0, 2, nb - nv)]  # (two positions take most of the values)
    keep = ufunc in (np.fmax, np.fmin)

    def step(c, x):  # (the partials of ufunc(c, x) w.r.t. c and x)
        if np.isnan(c) or np.isnan(x):
            if keep:
                return (0.0, 1.0) if np.isnan(c) and not np.isnan(x) else (1.0, 0.0)
            return (1.0, 0.0) if np.isnan(c) else (0.0, 1.0)
        if c == x:
            return 0.5, 0.5
        return (1.0, 0.0) if ufunc(c, x) == c else (0.0, 1.0)

    wa, wb = np.zeros(nv), np.zeros(nb)
    for p in range(nv):
        c, start, shares = a[p], 1.0, {}
        for k in np.flatnonzero(idx == p):
            dc, dx = step(c, b[k])
            start, shares = start * dc, {j: w * dc for j, w in shares.items()}
            shares[k] = dx
            c = ufunc(c, b[k])
        wa[p] = start
        for j, w in shares.items():
            wb[j] = w

    def f(a, b):
        a = a * 1.0
        ufunc.at(a, idx, b)
        return np.sum(a * np.array([1.0, 2.0, 3.0, 4.0]))

    with np.errstate(invalid="ignore"):  # (NumPy's warning of a NaN compared, as in a plain call)
        ga, gb = mg.grad(f, argnums=(0, 1))(a, b)
    np.testing.assert_array_equal(ga, wa * np.array([1.0, 2.0, 3.0, 4.0]))
    np.testing.assert_array_equal(gb, wb * np.array([1.0, 2.0, 3.0, 4.0])[idx])


def test_multiply_at_with_repeated_positions_in_one_pass():
    # products over many edges into few nodes (graphalgo: 1000x a plain call): one pass, NumPy's bits; zeros
    # among the values and the starts. By hand: d/dv_i of a * prod_j v_j is a * prod_{j != i} v_j
    idx = np.array([0, 0, 1, 1, 1, 2])
    w = np.array([1.0, 2.0, 3.0])

    def f(a, v):
        np.multiply.at(a, idx, v)
        return np.sum(a * w)

    for a0, v in ((np.array([2.0, 0.0, 1.5]), np.array([0.0, 3.0, 2.0, -1.0, 0.5, 0.0])),
                  (np.array([2.0, -1.0, 1.5]), np.array([0.5, 3.0, 2.0, -1.0, 0.5, 4.0]))):
        plain = a0.copy()
        want = f(plain, v)
        a = a0.copy()
        value, (ga, gv) = mg.value_and_grad(f, argnums=(0, 1))(a, v)
        assert value == want and np.array_equal(a, plain)
        prods = [np.prod(v[idx == p]) for p in range(3)]
        np.testing.assert_array_equal(ga, w * prods)
        np.testing.assert_allclose(gv, [w[idx[i]] * a0[idx[i]] * np.prod(np.delete(v, i)[np.delete(idx, i) == idx[i]])
                                        for i in range(6)], rtol=1e-15)
    check_grads(lambda a, v: f(a * 1.0, v), np.array([2.0, -1.0, 1.5]), np.array([0.5, 3.0, 2.0, -1.0, 0.5, 4.0]),
                modes=("rev", "fwd"), order=2)
    # the product in a's dtype, as NumPy's steps (an int64 product wrapped, a float32 one rounded), and the
    # rounds where the values' product alone overflows (regress42); by hand, d/da of a * prod(b) is prod(b)
    for b, a0, want in ((np.full(20, 10), 1.5, 1e20), (np.full(8, 1e5, np.float32), 1e-30, 1e40),
                        (np.array([1.1, 1.3, 1.7], np.float32), 1.0,
                         float(np.float32(1.1)) * float(np.float32(1.3)) * float(np.float32(1.7))),
                        (np.array([1e200, 1e200, 1e-200]), 1e-200, 1e200)):
        def one(a, b=b):
            np.multiply.at(a, np.zeros(b.size, int), b)
            return a[0]

        np.testing.assert_allclose(mg.grad(one)(np.array([a0])), [want], rtol=1e-15)

    # the values' product alone underflows (1e-600) where each step's need not: d/db_i of a b0 b1 b2 is
    # a times the other two, 1e-200 (regress43: 0 by the one pass)
    def under(b):
        a = np.zeros_like(b, shape=1) + 1e200
        np.multiply.at(a, [0, 0, 0], b)
        return a[0] * 1e250

    np.testing.assert_allclose(mg.grad(under)(np.full(3, 1e-200)), np.full(3, 1e50), rtol=1e-14)


def test_divide_at_with_repeated_positions_in_one_pass():
    # (slow2: one traced round per occurrence, each scanning every hit: 2500x a plain call at a hub). One
    # pass, NumPy's bits; by hand d/da of a / prod v is 1 / prod v, d/dv_i is -(a / prod v) / v_i; a zero
    # divisor falls back to the rounds (NumPy's inf)
    idx = np.array([0, 0, 1, 1, 1, 2])
    w = np.array([1.0, 2.0, 3.0])

    def f(a, v):
        np.divide.at(a, idx, v)
        return np.sum(a * w)

    a0, v = np.array([2.0, -1.0, 1.5]), np.array([0.5, 3.0, 2.0, -1.0, 0.5, 4.0])
    plain = a0.copy()
    want = f(plain, v)
    a = a0.copy()
    value, (ga, gv) = mg.value_and_grad(f, argnums=(0, 1))(a, v)
    assert value == want and np.array_equal(a, plain)
    prods = np.array([np.prod(v[idx == p]) for p in range(3)])
    np.testing.assert_allclose(ga, w / prods, rtol=1e-15)
    np.testing.assert_allclose(gv, -(w * a0 / prods)[idx] / v, rtol=1e-14)
    check_grads(lambda a, v: f(a * 1.0, v), a0, v, modes=("rev", "fwd"), order=2)
    with np.errstate(divide="ignore"):
        zero = v.copy()
        zero[5] = 0.0
        a = a0.copy()
        assert mg.value_and_grad(f)(a, zero)[0] == f(a0.copy(), zero) == np.inf


_FOLD_PARTIALS = {  # (d/dc, d/dv) of c = ufunc(c, v), by hand
    np.power: (lambda c, v: v * c ** (v - 1), lambda c, v: c ** v * np.log(c)),
    np.float_power: (lambda c, v: v * c ** (v - 1), lambda c, v: c ** v * np.log(c)),
    np.hypot: (lambda c, v: c / np.hypot(c, v), lambda c, v: v / np.hypot(c, v)),
    np.arctan2: (lambda c, v: v / (c * c + v * v), lambda c, v: -c / (c * c + v * v)),
    np.fmod: (lambda c, v: 1.0, lambda c, v: -np.trunc(c / v)),
    np.remainder: (lambda c, v: 1.0, lambda c, v: -np.floor(c / v)),
}


@pytest.mark.parametrize("ufunc", list(_FOLD_PARTIALS))
def test_smooth_ufunc_at_with_a_position_hit_often(ufunc):
    # (one traced gather, ufunc and write per round: 50-100 us a hit at a hub) one rule: NumPy's values, the
    # derivative from the one-step partials at the values NumPy's loop meets. By hand: each position's fold
    # stepped through in Python, its cotangent carried back through the partials above
    rng = np.random.default_rng(5)
    n = 300
    idx = rng.integers(0, 3, n)
    idx[:5] = 1  # (position 1 five times first)
    w = np.array([1.0, -2.0, 3.0, 0.5])
    if ufunc in (np.power, np.float_power):
        a0, v = rng.uniform(0.9, 1.1, 4), rng.uniform(0.97, 1.03, n)
    elif ufunc in (np.fmod, np.remainder):
        a0, v = np.array([1e4, -9e3, 8e3, 7.0]), rng.uniform(3.0, 5.0, n)
    else:
        a0, v = rng.uniform(0.5, 1.5, 4), rng.uniform(-0.2, 0.2, n)

    def f(a, v):
        ufunc.at(a, idx, v)
        return np.sum(a * w)

    plain = a0.copy()
    want = f(plain, v)
    a = a0.copy()
    value, (ga, gv) = mg.value_and_grad(f, argnums=(0, 1))(a, v)
    assert value == want and np.array_equal(a, plain)  # (NumPy's bits)
    dc, dv = _FOLD_PARTIALS[ufunc]
    ga_hand, gv_hand = np.zeros(4), np.zeros(n)
    for p in range(4):
        hits = np.flatnonzero(idx == p)
        met = [a0[p]]
        for i in hits:
            met.append(ufunc(met[-1], v[i]))
        g = w[p]
        for k in range(len(hits) - 1, -1, -1):
            gv_hand[hits[k]] = g * dv(met[k], v[hits[k]])
            g = g * dc(met[k], v[hits[k]])
        ga_hand[p] = g
    np.testing.assert_allclose(ga, ga_hand, rtol=1e-10)
    np.testing.assert_allclose(gv, gv_hand, rtol=1e-10, atol=1e-12)
    # forward mode beside reverse, and central differences of the plain call; second order (the rounds)
    t = rng.normal(size=n)
    np.testing.assert_allclose(mg.jvp(lambda v: f(np.zeros_like(v, shape=4) + a0, v), (v,), (t,))[1], gv_hand @ t, rtol=1e-9)
    short = np.flatnonzero(idx < 2)[:12]  # (a short fold: central differences of a long one lose digits)
    idx_s = idx[short]

    def g2(a, v):
        ufunc.at(a, idx_s, v)
        return np.sum(a * w)

    check_grads(lambda a, v: g2(a * 1.0, v), a0, v[short], modes=("rev", "fwd"), order=2)


@pytest.mark.parametrize("ufunc", [np.logaddexp, np.logaddexp2])
def test_logaddexp_at_with_repeated_positions_in_one_pass(ufunc):
    # a soft minimum over many edges into few nodes (graphalgo: 700x a plain call, one traced round per
    # occurrence): one pass, NumPy's bits. By hand: d/dv_i of log_b(b^d + sum_i b^v_i) at its value r is
    # b^(v_i - r), d/dd is b^(d - r); the argument written in place holds NumPy's values
    rng = np.random.default_rng(3)
    idx = rng.integers(0, 3, 400)
    d0, v = rng.normal(size=4), rng.normal(size=400)
    d0[3] = -np.inf  # (a position no value reaches keeps its -inf)
    base = np.e if ufunc is np.logaddexp else 2.0

    def f(d, v):
        ufunc.at(d, idx, v)
        return np.sum(d[:3] * np.array([1.0, 2.0, 3.0]))

    plain = d0.copy()
    want = f(plain, v)
    d = d0.copy()
    value, (gd, gv) = mg.value_and_grad(f, argnums=(0, 1))(d, v)
    assert value == want and np.array_equal(d, plain)
    w = np.array([1.0, 2.0, 3.0, 0.0])
    np.testing.assert_allclose(gv, w[idx] * base ** (v - plain[idx]), rtol=1e-12)
    np.testing.assert_allclose(gd[:3], w[:3] * base ** (d0[:3] - plain[:3]), rtol=1e-12)
    check_grads(lambda v: f(np.zeros_like(v, shape=4) + d0, v), v, modes=("rev", "fwd"), order=1)
    # a narrower a than b: NumPy computes each step in the wider dtype and rounds it to a's: the rounds, its bits
    # (the one pass on b cast to a's dtype was a last bit off; regress41)
    for adt, vv in ((np.float32, v), (np.float16, v), (np.float32, np.arange(400) % 3)):
        a0 = d0[:3].astype(adt)
        plain = a0.copy()
        ufunc.at(plain, idx, vv)
        a = a0.copy()
        mg.grad(lambda a, vv=vv: np.sum(ufunc.at(a, idx, vv) or a))(a)
        assert np.array_equal(a, plain)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_fmax_at_with_nans_and_a_python_float(dtype):
    # a NaN loses to a number in np.fmax; a Python float is a float64 operand of ufunc.at
    def f(x, b):
        a = x.astype(dtype) * 2.0
        np.fmax.at(a, [0, 0, 2, 2, 1], b)
        np.fmax.at(a, [1, 1], 0.1)
        return np.sum(a * np.array([1.0, 2.0, 3.0]))

    x = np.array([np.nan, -1.0, 0.2])
    b = np.array([0.3, np.nan, np.nan, 0.05, -3.0])
    plain = x.astype(dtype) * 2.0
    np.fmax.at(plain, [0, 0, 2, 2, 1], b)
    np.fmax.at(plain, [1, 1], 0.1)
    gx, gb = mg.grad(f, argnums=(0, 1))(x, b)
    # by hand: a[0] is b[0] (NaN loses), a[2] stays 2*x[2] = 0.4, a[1] is the Python float 0.1
    np.testing.assert_array_equal(gx, [0.0, 0.0, 6.0])
    np.testing.assert_array_equal(gb, [1.0, 0.0, 0.0, 0.0, 0.0])
    np.testing.assert_array_equal(mg.value_and_grad(f)(x, b)[0], np.sum(plain * np.array([1.0, 2.0, 3.0])))
    _, t = mg.jvp(f, (x, b), (np.ones(3), np.ones(5)))
    assert t == gx.sum() + gb.sum()


def test_base_is_none_for_owned_memory_and_set_for_views():
    seen = []

    def f(x):
        y = x * 1.0
        seen.append((y.base is None, y[1:].base is not None, y[1:].T.base is not None,
                     np.sum(y).base is None, y[[0, 1]].base is None))
        return np.sum(y)

    mg.grad(f)(np.ones(3))
    plain = np.ones(3)
    assert seen == [(plain.base is None, plain[1:].base is not None, plain[1:].T.base is not None,
                     True, plain[[0, 1]].base is None)]


def test_copy_if_view_idiom():
    def own(v):
        if v.base is not None:  # a view: work on a copy
            v = v.copy()
        v /= np.sum(v)
        return v

    def f(x):
        y = x * 1.0
        a = own(y[:2])
        return np.sum(a[0] * y)

    check_grads(f, np.array([0.5, 1.5, 2.0]))


def test_setflags_write_false_as_numpy():
    def f(x, fail):
        y = x * 2.0
        y.setflags(write=False)
        if fail:
            y[0] = 1.0
        return np.sum(y * y)

    check_grads(lambda x: f(x, False), np.array([1.0, 2.0]))
    with pytest.raises(ValueError, match="read-only"):
        mg.grad(f)(np.array([1.0, 2.0]), True)


_LAYOUTS = {  # views of a (4, 3, 4) array, made inside the function (check_grads copies its arguments)
    "C": lambda b: b[:2], "F": lambda b: b[:2].copy(order="F"), "column": lambda b: b[:, 1, 0],
    "transposed": lambda b: b.transpose(1, 0, 2), "strided": lambda b: b[::2, :, ::-1],
    "reversed": lambda b: b[::-1, 1], "mixed": lambda b: b.transpose(2, 0, 1)[:, ::2],
    "broadcast": lambda b: np.broadcast_to(b[:, None, 1, :3], (4, 2, 3)).transpose(2, 0, 1),
    "0-d": lambda b: b[1, 1, 1],
}


@pytest.mark.parametrize("order", ["K", "A", "C", "F"])
@pytest.mark.parametrize("name", list(_LAYOUTS))
def test_ravel_and_flatten_in_every_order_of_every_layout(name, order):
    # NumPy reads "K" in memory order and "A" as F for F-contiguous arrays: the transposes follow
    view = _LAYOUTS[name]
    b = np.arange(1.0, 49.0).reshape(4, 3, 4) / 7.0
    x0 = view(b)
    w = np.cos(np.arange(x0.size) * 0.7)
    wt = np.cos(np.arange(x0.size) * 0.3).reshape(np.shape(x0)[::-1])
    for f in (lambda b: np.sum(w * np.ravel(view(b), order=order) ** 2),
              lambda b: np.sum(w * view(b).ravel(order) ** 3),
              lambda b: np.sum(w * view(b).flatten(order) * np.sin(view(b).ravel(order))),
              lambda b: np.sum(wt * np.reshape(view(b), np.shape(x0)[::-1], order=order if order != "K" else "A"))):
        check_grads(f, b)


def test_ravel_k_of_a_permuted_contiguous_array_is_a_view_as_in_numpy():
    def f(x):
        y = x * 1.0
        v = y.transpose(1, 0, 2)
        r = v.ravel(order="K")  # a view in memory order
        r[1:5] = 0.0
        return np.sum(y * y) + np.sum(r)

    check_grads(f, np.arange(1.0, 25.0).reshape(2, 3, 4) / 5.0)


def test_norm_of_a_column():
    check_grads(lambda q: np.linalg.norm(q[:, 1]) + np.linalg.norm(q[::2].T), np.arange(1.0, 13.0).reshape(4, 3))


_MASK = np.array([1.0, 0.0, 1.0, 0.0])


@pytest.mark.parametrize("f", [
    lambda x: np.sum(_overwrite(np.sqrt(x * x * _MASK)) ** 2 * np.arange(4.0)),
    lambda x: np.sum(_overwrite(np.log(x * _MASK)) * x),
    lambda x: np.sum(_overwrite(np.arcsin(0.3 * x * _MASK + (1 - _MASK))) * x),
    lambda x: np.sum(np.where(_MASK > 0, np.sqrt(x * x * _MASK), 0.0) * x),
    lambda x: np.sum(np.where(_MASK > 0, 1.0 / (x * _MASK), 0.0)),
    lambda x: _distances(x),
    lambda x: np.sum(np.sqrt(x * x * _MASK)),
    lambda x: np.sum(np.sqrt((x * _MASK) ** 3)),
], ids=["sqrt(0) overwritten", "log(0) overwritten", "arcsin(1) overwritten", "where sqrt(0)",
        "where 1/0", "distance matrix", "sqrt of a constant 0", "sqrt(x**3) at 0"])
def test_a_zero_cotangent_times_an_infinite_partial_is_zero(f):
    # elements whose value never reaches the output contribute nothing, even where their
    # partial is infinite or undefined: forward mode and finite differences say so (IEEE 0*inf = nan)
    with np.errstate(divide="ignore", invalid="ignore"):
        check_grads(f, np.array([0.7, 1.3, 2.1, 0.4]))


def _overwrite(y):
    y[_MASK == 0] = 2.0
    return y


def _distances(x):
    dx = x[:, None] - x[None, :]
    d = np.sqrt(dx ** 2)
    d[d == 0] = -1.0  # the diagonal: sqrt(0), overwritten
    return np.sum(d ** 2 * np.arange(16.0).reshape(4, 4))


@pytest.mark.parametrize("order", ["K", "A", "C", "F"])
@pytest.mark.parametrize("name", list(_LAYOUTS))
def test_ravel_values_and_layout_are_numpys(name, order):
    view = _LAYOUTS[name]
    b = np.arange(1.0, 49.0).reshape(4, 3, 4) / 7.0
    plain = np.ravel(view(b), order=order)
    seen = []
    mg.grad(lambda b: seen.append(np.array(mg.value(np.ravel(view(b), order=order)), copy=None)) or np.sum(b))(b)
    got = seen[0]
    assert got.tobytes() == plain.tobytes() and got.flags.c_contiguous == plain.flags.c_contiguous


def test_norm_of_a_strided_column_has_numpys_bits():
    # NumPy's norm ravels (a contiguous copy) before its dot: BLAS sums a strided vector differently
    q = np.random.RandomState(35).rand(6, 4)
    for j in range(4):
        seen = []
        mg.grad(lambda q, j=j, seen=seen: seen.append(mg.value(np.linalg.norm(q[:, j]))) or np.sum(q))(q)
        assert seen[0] == np.linalg.norm(q[:, j])


def test_forward_mode_zero_tangent_times_an_infinite_partial_is_zero():
    # sqrt at 0 along a direction that leaves that element alone: the element does not move
    x = np.array([0.0, 1.0, 4.0])
    v = np.array([0.0, 1.0, 1.0])
    _, t = mg.jvp(lambda x: np.sum(np.sqrt(x)), (x,), (v,))
    assert t == 0.5 / 1.0 + 0.5 / 2.0
    J = mg.jacobian(lambda x: np.log(x[1:]) * np.sqrt(x[0] + x[1:] - x[1:]), mode="fwd")(np.array([0.0, 1.0, 2.0]))
    assert np.isfinite(J[:, 1:]).all()


def test_forward_mode_keeps_the_users_floating_point_settings():
    import warnings

    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        mg.jvp(lambda x: np.log(x), (np.array([0.0, 1.0]),), (np.ones(2),))
    # the user's log(0), once, with NumPy's text and at the user's line (a filter on either holds)
    assert [str(w.message) for w in seen] == ["divide by zero encountered in log"]
    assert seen[0].filename == __file__
    with np.errstate(divide="raise"), pytest.raises(FloatingPointError):
        mg.jvp(lambda x: np.log(x), (np.array([0.0, 1.0]),), (np.ones(2),))
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("error")
        mg.jvp(lambda x: np.log(x), (np.array([0.0, 1.0]),), (np.ones(2),))


def _complex_of(x):
    return x * np.exp(1j * x)


def _zeros_written(x, write):
    a = np.zeros_like(x)
    write(a, _complex_of(x))
    return a


_COMPLEX_INTO_REAL = {  # NumPy casts, dropping the imaginary part, with a ComplexWarning at the user's line
    "slice": lambda x: _zeros_written(x, lambda a, z: a.__setitem__(slice(None), z)),
    "element": lambda x: _zeros_written(x, lambda a, z: a.__setitem__(0, z[1])),
    "astype": lambda x: _complex_of(x).astype(float),
    "copyto": lambda x: _zeros_written(x, lambda a, z: np.copyto(a, z, casting="unsafe")),
    "out=": lambda x: _zeros_written(x, lambda a, z: np.multiply(z, 2.0, out=a, casting="unsafe")),
    "fill": lambda x: _zeros_written(x, lambda a, z: a.fill(z[0])),
    "put": lambda x: _zeros_written(x, lambda a, z: np.put(a, [1, 0], z)),
}


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # (NumPy's, for its own writes in the oracle)
def test_write_through_a_broadcast_arrays_result_writes_into_the_array():
    # NumPy writes through it (with a DeprecationWarning): one element of the view is one element
    # of `a`; it was refused as a read-only view, and a program catching that ValueError went on
    # along another path than a plain call (np.meshgrid(copy=False) likewise)
    def f(a):
        b1, b2 = np.broadcast_arrays(a[:, :1], a)
        b1[0, 0] = 5.0
        return np.sum(b1 * b2)

    def g(x):
        X, _ = np.meshgrid(x, x, copy=False)
        X[0, 0] = 5.0
        return np.sum(x ** 2)

    for fn, a in ((f, np.arange(6.0).reshape(2, 3)), (g, np.array([1.0, 2.0, 3.0]))):
        plain, ours = a.copy(), a.copy()
        val, grad = mg.value_and_grad(fn)(ours)
        assert val == fn(plain)
        np.testing.assert_array_equal(ours, plain)
        np.testing.assert_allclose(grad, _fd_grad(fn, a), rtol=1e-6, atol=1e-8)

    def plain_view(x):  # (a plain array's view is writable too: the plain call writes into it)
        a, b = np.broadcast_arrays(x[:, None], np.zeros((1, 2)))
        try:
            b[0, 0] = 1.0
            k = 2.0
        except ValueError:
            k = 1.0
        return np.sum(a) * k

    x = np.array([0.7, -0.3])
    val, g = mg.value_and_grad(plain_view)(x)
    assert val == plain_view(x)
    np.testing.assert_array_equal(g, [4.0, 4.0])  # d/dx 2 * 2 sum(x), by hand

    def overlapping(a):  # a row of b1 is a[0, 0] three times: refused (not a read-only ValueError)
        b1, _ = np.broadcast_arrays(a[:, :1], a)
        b1[0] = 5.0
        return np.sum(b1)

    with pytest.raises(mg.MutationError, match="self-overlapping view"):
        mg.grad(overlapping)(np.arange(6.0).reshape(2, 3))


def test_write_into_a_plain_structured_buffer_names_one_buffer_per_field():
    def f(x):
        rec = np.zeros(3, dtype=[("u", float), ("v", float)])
        rec["u"] = x[:3]
        return np.sum(rec["u"] ** 2)

    with pytest.raises(mg.WriteToPlainArrayError, match=r"structured array `rec`.*one buffer per field") as e:
        mg.grad(f)(np.ones(4))
    assert "mnp.zeros(...)" not in str(e.value)  # (the general advice: mnp.zeros cannot make it either)

    def g(x):  # the fix it names
        u = np.zeros_like(x[:3])
        u[...] = x[:3]
        return np.sum(u ** 2)

    check_grads(g, np.array([0.5, -1.0, 2.0, 3.0]))
    # (regress123) a structured argument's field written in place, and a field's view written: the same refusal,
    # not the buffer advice (it is an argument already)
    parts = np.zeros(3, dtype=[("x", "f8"), ("v", "f8")])
    parts["x"] = [1.0, 2.0, 3.0]

    def in_place(k, parts):
        parts["v"] -= k * parts["x"]
        return np.sum(parts["v"] ** 2)

    def through_view(k, parts):
        v = parts["v"]
        v[:] = k * parts["x"]
        return np.sum(v ** 2)

    for f, name in ((in_place, "parts"), (through_view, "v")):
        with pytest.raises(mg.WriteToPlainArrayError, match=rf"structured array `{name}`.*one buffer per field"):
            mg.grad(f)(1.5, parts.copy())


@pytest.mark.parametrize("case", sorted(_COMPLEX_INTO_REAL))
def test_complex_written_into_a_real_array_warns_at_the_users_line_and_keeps_the_real_part(case):
    import warnings

    def f(x):
        return np.sum(_COMPLEX_INTO_REAL[case](x) ** 2 + np.sin(x))

    x = np.array([0.3, 0.7])
    for plain, call in ((True, lambda: f(x)), (False, lambda: mg.grad(f)(x)),
                        (False, lambda: mg.jvp(f, (x,), (np.ones(2),)))):
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            call()
        assert [w.category for w in seen] == [np.exceptions.ComplexWarning]
        if not plain:  # (NumPy's np.put warns at its own line; mutagrad at the user's)
            assert seen[0].filename == __file__
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", np.exceptions.ComplexWarning)
        check_grads(f, x)


_MASK_WRITES = {  # x[mask] = (a view of x): NumPy buffers some layouts and walks others element by element
    "forward shift": lambda x: x.__setitem__(x < 0.5, x[: int(np.sum(x < 0.5))]),
    "from the start": lambda x: x.__setitem__(np.arange(x.size) > 0, x[:-1]),
    "backward shift": lambda x: x.__setitem__(np.arange(x.size) < x.size - 1, x[1:]),
    "reversed": lambda x: x.__setitem__(np.arange(x.size) > 0, x[:-1][::-1]),
    "strided": lambda x: x.__setitem__(np.arange(x.size) % 2 == 1, x[: x.size // 2]),
    "2-d rows": lambda x: x.reshape(2, -1).__setitem__(np.eye(2, x.size // 2, 1, dtype=bool),
                                                      x.reshape(2, -1)[0, :2]),
}


@pytest.mark.parametrize("name", list(_MASK_WRITES))
def test_boolean_mask_write_from_an_overlapping_view_is_numpys(name):
    def f(x):
        y = x * 1.0
        _MASK_WRITES[name](y)
        return np.sum(y * y * np.arange(1.0, 1.0 + y.size)), y

    x = np.array([0.333, -0.764, -0.807, 0.9, 0.2, -0.1])
    plain_value, plain_y = f(x.copy())
    seen = []
    def keep(x):
        r = f(x)
        seen.append(np.array(mg.value(r[1])))
        return r

    (value, _), _ = mg.value_and_grad(keep, has_aux=True)(x.copy())
    assert value == plain_value and seen[0].tobytes() == plain_y.tobytes()
    check_grads(lambda x: f(x)[0], x)


@pytest.mark.parametrize("f", [
    lambda x, y: (np.cumsum(x.reshape(1, 4), axis=1, out=y.reshape(1, 4)), np.sum(y * np.arange(4.0)))[1],
    lambda x, y: (np.sum(x.reshape(2, 2), axis=1, out=y[:2]), np.sum(y * y))[1],
    lambda x, y: (np.prod(x.reshape(2, 2), axis=-1, out=y[:2]), np.sum(y))[1],
    lambda x, y: (np.mean(x.reshape(2, 2), axis=0, out=y[1:3]), np.sum(y ** 3))[1],
    lambda x, y: (np.cumprod(x, out=y), np.sum(y))[1],
], ids=["cumsum", "sum", "prod", "mean", "cumprod"])
@pytest.mark.parametrize("xdt,ydt", [(np.float32, np.float64), (np.float64, np.float32)])
def test_reductions_into_another_float_out_compute_in_the_wider_dtype(f, xdt, ydt):
    # NumPy adds a float32 input in the float64 of out=, and a float64 input in float64 before
    # rounding into a float32 out=: the value and what out holds are its bits
    rng = np.random.default_rng(3)
    for _ in range(20):
        x = rng.standard_normal(4).astype(xdt)
        y_plain = np.zeros(4, ydt)
        plain = f(x.copy(), y_plain)
        y = np.zeros(4, ydt)
        value, _ = mg.value_and_grad(f)(x.copy(), y)
        assert value == plain and y.tobytes() == y_plain.tobytes()


def test_prod_into_a_complex_out_keeps_numpys_signed_zeros():
    x = np.array([0.3, 0.35, -0.3, 0.35])

    def f(x, z):
        np.prod(x.reshape(2, 2), axis=-1, out=z)
        return np.sum(z.real)

    z_plain, z = np.zeros(2, complex), np.zeros(2, complex)
    f(x.copy(), z_plain)
    mg.grad(f)(x.copy(), z)
    assert z.tobytes() == z_plain.tobytes()


@pytest.mark.parametrize("axis", [0, 1])
def test_cumsum_into_a_larger_out_writes_what_numpy_writes(axis):
    # NumPy broadcasts the result over out's other dimensions and writes only the result's
    # length along the axis (it does not check that out is that long)
    def f(x):
        y = np.zeros_like(x, shape=(3, 3))
        np.cumsum(x[:, None] if axis == 1 else x[None, :], axis=axis, out=y)
        return np.sum(y * np.arange(1.0, 10.0).reshape(3, 3))

    check_grads(f, np.array([1.0, 2.0, 3.0]))


def _flat_0d(x):
    a = np.tensordot(x, x, axes=1)  # a 0-d array
    a.flat[[0]] = np.sin(x[:1])
    return a * 1.0


def _put_0d(x):
    a = np.tensordot(x, x, axes=1)
    np.put(a, [0, 0], x[1:3])  # the last value stays
    return a * 1.0


def _place_0d(x):
    a = np.tensordot(x, x, axes=1)
    np.place(a, np.array(True), x[:1])
    return a * 1.0


def _putmask_0d(x):
    a = np.tensordot(x, x, axes=1)
    np.putmask(a, np.array(True), 0.3 * np.mean(x))
    return a * 1.0


@pytest.mark.parametrize("f", [_flat_0d, _put_0d, _place_0d, _putmask_0d], ids=["flat", "put", "place", "putmask"])
def test_flat_writes_into_a_0d_array(f):
    check_grads(f, np.array([0.7, -0.4, 1.1]))


def test_boolean_mask_write_from_an_overlapping_view_of_a_complex_array():
    # complex128 elements (16 bytes) are mirrored too; NumPy buffers this one
    mask = np.array([[False, True, True], [False, True, True], [False, False, True]])

    def f(x, y):
        y = y * x[0]
        y[mask] = y.ravel(order="K")[:5]
        return np.sum(np.sin(y).real), y

    x = np.array([1.3])
    y0 = np.arange(9.0).reshape(3, 3) * (0.1 + 0.2j)
    plain_value, plain_y = f(x, y0.copy())
    seen = []

    def keep(x, y):
        r = f(x, y)
        seen.append(np.array(mg.value(r[1])))
        return r

    (value, _), _ = mg.value_and_grad(keep, has_aux=True)(x, y0.copy())
    assert value == plain_value and seen[0].tobytes() == plain_y.tobytes()
    check_grads(lambda x: f(x, y0.copy())[0], x)


# A complex product or quotient is not correctly rounded: NumPy's in-place loop (out= an
# input) and its loop into another array may differ in the last bit, so an in-place
# operation on a view leaves the in-place loop's bits (found by a random-program tester).
def _imul(x):
    x[:1] *= x[1:2]


def _idiv(x):
    x[:2] /= x[2:]


def _iadd_product(x):
    x[1:] += x[:-1] * x[1:]


def _iscale(x):
    x[::2] *= 1.5 - 0.5j


@pytest.mark.parametrize("stmt", [
    _imul, _idiv, _iadd_product, _iscale,
    lambda x: np.multiply(x[:2], x[2:], out=x[:2]),
    lambda x: np.square(x[1:3], out=x[1:3]),
])
def test_complex_in_place_operations_on_views_leave_numpys_bits(stmt):
    def f(x):
        stmt(x)
        return np.sum(x.real * x.imag)

    rng = np.random.default_rng(7)
    for _ in range(20):  # (the last-bit difference shows for about half of random inputs)
        x0 = rng.uniform(-1.5, 1.5, 4) + 1j * rng.uniform(-1.5, 1.5, 4)
        plain = x0.copy()
        f(plain)
        for run in (lambda x: mg.grad(f)(x), lambda x: mg.jvp(f, (x,), (np.ones(4, complex),))):
            x = x0.copy()
            run(x)
            assert x.tobytes() == plain.tobytes(), stmt
    check_grads(f, x0)


def test_a_write_through_a_read_only_view_names_the_line():
    def f(x):
        d = np.diagonal(x)  # read-only, as in NumPy (whose np.add.at writes into it anyway)
        np.add.at(d, [0, 1, 0], d[2])
        return np.sum(x * x)

    # (a MutationError, not NumPy's read-only ValueError: NumPy's ufunc.at raises none there)
    with pytest.raises(mg.MutationError, match=r"read-only.*np.add.at\(d, \[0, 1, 0\], d\[2\]\).*into a copy"):
        mg.grad(f)(np.arange(9.0).reshape(3, 3))


def _place_from_read_only_overlap(x):
    v = x[2:6]
    v.flags.writeable = False  # NumPy copies values that are not writable before it places them
    np.place(x, x > 3.0, v)


def _place_from_window(x):
    np.place(x, x > 3.0, np.lib.stride_tricks.sliding_window_view(x, 3)[1])


@pytest.mark.parametrize("stmt", [_place_from_read_only_overlap, _place_from_window])
def test_place_copies_values_that_are_not_writable(stmt):
    def f(x):
        stmt(x)
        return x * np.arange(1.0, 7.0)

    check_grads(f, np.array([0.5, 3.5, 1.5, 4.5, 5.5, 2.5]))


@pytest.mark.parametrize("call, message", [
    (lambda b: np.place(b, np.zeros(4, bool), [1.0]), "WRITEBACKIFCOPY base is read-only"),
    (lambda b: np.putmask(b, np.zeros(4, bool), 1.0), "putmask: output array is read-only"),
    (lambda b: np.put(b, [], []), "put: output array is read-only"),
])
def test_writes_into_read_only_views_raise_even_when_empty(call, message):
    def f(x):
        call(np.broadcast_to(x[0], (4,)))  # a read-only view, as in NumPy
        return np.sum(x)

    with pytest.raises(ValueError, match=message):
        mg.grad(f)(np.arange(1.0, 5.0))


def test_flat_item_refuses_an_array_as_numpy_2_does():
    def f(x):
        x.flat[5] = x[2:3]
        return np.sum(x)

    with pytest.raises(ValueError, match="Error setting single item of array"):
        mg.grad(f)(np.arange(8.0))
    check_grads(lambda x: (x.flat.__setitem__(5, x[2] * 3.0), x * 2.0)[1], np.arange(1.0, 9.0))


def _elem_imul_const(x):
    x[2] *= (0.3 - 0.4j) if x.dtype.kind == "c" else 0.3


def _elem_imul_elem(x):
    x[-1] *= x[0]


def _elem_idiv_2d(x):
    x.reshape(2, 2)[1, 0] /= x[1]


# x[i] *= c reads x[i] as a NumPy scalar, which has no in-place operator: Python computes
# x[i] * c with the scalar's own arithmetic (not the ufunc loop's bits for complex) and stores it
@pytest.mark.parametrize("stmt", [_elem_imul_const, _elem_imul_elem, _elem_idiv_2d])
@pytest.mark.parametrize("dtype", [np.complex128, np.complex64, np.float64])
def test_in_place_operators_on_elements_leave_numpys_bits(stmt, dtype):
    def f(x):
        stmt(x)
        return np.sum(np.abs(x) ** 2)

    rng = np.random.default_rng(9)
    for _ in range(20):
        x0 = (rng.uniform(-1.5, 1.5, 4) + (1j * rng.uniform(-1.5, 1.5, 4) if dtype != np.float64 else 0)).astype(dtype)
        plain = x0.copy()
        value = f(plain)
        x = x0.copy()
        got, _ = mg.value_and_grad(f)(x)
        assert x.tobytes() == plain.tobytes() and got == value
        x = x0.copy()
        mg.jvp(f, (x,), (np.ones(4, dtype),))
        assert x.tobytes() == plain.tobytes()
    check_grads(f, x0.astype(np.complex128 if dtype != np.float64 else np.float64))


@pytest.mark.parametrize("whole", ["x[:] = v", "x[...] = v", "x *= v", "np.copyto(x, v)", "x.fill(v0)"])
def test_writes_after_a_saved_whole_overwrite(whole):
    # a write over the whole array saves what it overwrote; the partial writes that follow save
    # nothing until a pullback reads the array again. Pullbacks recorded before the whole write,
    # between the writes and after them must each see the values their operation saw.
    w = np.array([0.3, -1.1, 0.7, 2.0])

    def f(x, a):
        y = np.sin(x) * x            # reads x
        x[0] = a[3] * 2.0            # partial writes: each saves (y's pullback reads x)
        x[1] = a[2] * x[2]
        y = y + np.tanh(x)           # reads x again
        xv = x[1:3]                  # a view made before the writes
        v = a * np.cos(x)
        v0 = a[0] * 1.5
        if whole == "x[:] = v":
            x[:] = v
        elif whole == "x[...] = v":
            x[...] = v
        elif whole == "x *= v":
            x *= v
        elif whole == "np.copyto(x, v)":
            np.copyto(x, v)
        else:
            x.fill(v0)
        x[1:] -= x[:-1] * 0.5        # partial writes no pullback needs to undo
        xv += a[1:3]
        z = np.exp(x) * w            # reads x again
        x[::2] *= a[::2]             # saved: z's pullback reads x
        return np.sum(y * w) + np.sum(z) + np.sum(x * x) + np.sum(xv * a[:2])

    x = np.array([0.2, 0.5, -0.4, 0.9])
    a = np.array([1.3, -0.6, 0.8, 0.4])
    check_grads(f, x, a, argnums=(0, 1), order=2)


def test_in_place_ufuncs_over_a_whole_array_then_partial_writes():
    # np.exp(u, out=u) and u *= x write all of u (saved when captured, which un-captures it);
    # the partial writes after them save nothing, and every pullback still sees its values
    def f(x):
        u = x * 1.0
        w = np.sin(u)          # captures u
        np.exp(u, out=u)
        u[0] = 5.0
        u[1:] *= 2.0
        return np.sum(u * w)

    def g(x):
        u = x * 1.0
        w = u * u
        u *= x                 # its partials read the old u and x
        u[1] = x[0]
        np.tanh(u, out=u)      # its partial reads its output
        u[2] = 1.0
        return np.sum(u) + np.sum(w)

    for fn in (f, g):
        check_grads(fn, np.array([0.3, -0.2, 0.5]), order=2)


# -- writes outside the memory that pullbacks read through views --------------------------


def _history(T=12, n=40, overwrite=None):
    """A history buffer filled row by row, each row from the one before (its pullback reads it);
    ``overwrite``: a statement run on S and w after the loop, over memory read or not."""
    Z = np.random.default_rng(3).standard_normal((T, n)) * 0.3

    def f(p):
        S = mnp.empty((T + 1, n))
        S[0] = p[0]
        for t in range(T):
            S[t + 1] = S[t] * np.exp(p[1] * Z[t]) / (1.0 + 0.05 * S[t] ** 2)
        w = p[2] * 1.0
        if overwrite is not None:
            exec(overwrite, {"np": np}, {"S": S, "w": w})  # noqa: S102 (the statement under test)
        return np.sum(S[1:] ** 2) / n + np.sum(S[::3, 1::4] * w)

    return f


def test_rows_written_after_the_rows_read_save_nothing():
    # S[t + 1] = f(S[t]): each pullback reads row t, which no later write touches; the writes of the
    # rows after it saved the values they overwrote (np.empty's) all the same, one row per step
    from mutagrad.explain import explain

    f = _history()
    p = np.array([0.8, 0.6, 1.3])
    assert explain(f, p, show=False).bytes_saved == 0
    check_grads(f, p, order=2)


@pytest.mark.parametrize("overwrite", [
    "S[3] = 0.5 * S[4]",                      # a row read before: saved, put back for its pullback
    "S[2:5] *= 2.0",                          # rows read, in place
    "S[:, 7] = S[:, 8] * w",                  # a column: crosses every row read
    "S[::-1][4] = 1.5",                       # through a reversed view
    "S[1:][::2, ::3] += 0.25",                # a strided view of a view
    "np.copyto(S[5], S[6] ** 2)",
    "np.multiply(S[2], w, out=S[2])",
    "S[S > 1.0] = 0.0",                       # a mask over all of it
    "S[[0, 4, 4], [1, 2, 2]] = w",            # integer arrays
    "S.fill(0.5)",
])
def test_writes_into_rows_pullbacks_read_are_undone_for_them(overwrite):
    # the same program with writes over memory the pullbacks read: each must see its operation's values
    f = _history(overwrite=overwrite)
    p = np.array([0.8, 0.6, 1.3])
    check_grads(f, p, order=2)
    _, pb = mg.vjp(f, p)
    np.testing.assert_allclose(pb(1.0)[0], pb(1.0)[0], rtol=0, atol=0)  # (a pullback called twice)
    np.testing.assert_allclose(pb(1.0)[0], numerical_grad(f, (p,), (0,))[0], rtol=1e-6)


@pytest.mark.parametrize("overwrite", [None, "S[3] = 0.5 * S[4]; S[30:33] *= w", "S[:, 7] = S[:, 8] * w"])
def test_rows_of_a_large_history_kept_as_views(overwrite):
    # rows of 3.2 kB of a 131 kB buffer: copied for the pullbacks until the copies add up to the
    # buffer, kept as views of it after that (each row is read twice per step: from step 20 on)
    f = _history(T=40, n=400, overwrite=overwrite)
    p = np.array([0.3, 0.3, 1.3])
    g = mg.grad(f)(p)
    np.testing.assert_allclose(g, numerical_grad(f, (p,), (0,))[0], rtol=1e-6)
    v = np.array([0.3, -0.7, 0.2])
    np.testing.assert_allclose(mg.jvp(f, (p,), (v,))[1], g @ v, rtol=1e-10)


def test_matrix_rows_read_by_products_then_overwritten():
    # H[t + 1] = tanh(W @ H[t]) keeps H[t] for W's cotangent (as a view once its copies add up to H);
    # rows overwritten afterwards come back for the pullbacks
    def f(W):
        H = mnp.zeros((30, 16))
        H[0] = 1.0
        for t in range(29):
            H[t + 1] = np.tanh(W @ H[t])
        H[5] = 0.0
        H[10:12] *= 3.0
        return np.sum(H ** 2)

    W = np.random.default_rng(4).standard_normal((16, 16)) * 0.3
    g = mg.grad(f)(W)
    np.testing.assert_allclose(g, numerical_grad(f, (W,), (0,))[0], rtol=1e-6, atol=1e-6)  # (|g| up to 60)
    v = np.random.default_rng(5).standard_normal(W.shape)
    np.testing.assert_allclose(mg.jvp(f, (W,), (v,))[1], np.sum(g * v), rtol=1e-10)


# -- results without a derivative written into a traced out= buffer --------------------

_X_INF = np.array([-np.inf, 0.0, np.inf, 1.5])
_MASK = np.array([True, False, True, False])


def _central(f, y, h=1e-6):
    return np.array([(f(y + h * e) - f(y - h * e)) / (2 * h) for e in np.eye(y.size)])


@pytest.mark.parametrize("call", [
    lambda y: np.less(_X_INF, 1.0, out=y, where=_MASK),
    lambda y: np.isnan(_X_INF, out=y, where=_MASK),
    lambda y: np.equal(_X_INF, _X_INF, out=y, where=_MASK),
    lambda y: np.logical_not(_X_INF, out=y, where=_MASK),
    lambda y: np.signbit(_X_INF, out=y, where=_MASK),
], ids=["less", "isnan", "equal", "logical_not", "signbit"])
def test_a_boolean_ufunc_with_where_leaves_the_rest_of_out(call):
    # the elements where= leaves out keep the buffer's values and their derivative
    # (they held NumPy's uninitialised memory, and a zero derivative)
    plain = _written_like_numpy(call)
    assert plain[1] == 5.0 and plain[3] == -1.0


def _written_like_numpy(call):
    """``call(y)`` writes into y: the traced call leaves y as the plain call does, and the
    gradient of a function reading y afterwards is the plain program's central differences."""
    w = np.array([1.0, 2.0, 3.0, 4.0])

    def f(y):
        call(y)
        return np.sum(y * w) + np.sum(y * y)

    y0 = np.array([2.0, 5.0, 7.0, -1.0])
    plain = y0.copy()
    call(plain)
    traced = y0.copy()
    value, g = mg.value_and_grad(f)(traced)
    np.testing.assert_array_equal(traced, plain)  # the argument ends as the plain call leaves it
    assert value == f(y0.copy())
    np.testing.assert_allclose(g, _central(f, y0), atol=1e-6)
    check_grads(f, y0)
    return plain


@pytest.mark.parametrize("call", [
    lambda y: np.isposinf(_X_INF, y),
    lambda y: np.isneginf(_X_INF, out=y),
    lambda y: np.any(_X_INF.reshape(2, 2), axis=0, out=y[:2]),
    lambda y: np.all(_X_INF.reshape(2, 2) != 0, axis=1, out=y[2:]),
], ids=["isposinf", "isneginf", "any", "all"])
def test_a_function_of_plain_values_writes_its_out_buffer(call):
    # np.isposinf(x, y), np.any(..., out=y): y's memory took the result unseen, so the
    # derivative went through as if y had not been overwritten
    _written_like_numpy(call)


def test_broadcast_arrays_of_one_shape_are_the_arrays_themselves():
    # NumPy returns the arguments themselves (writeable) when no broadcasting is needed;
    # a write through them was refused as a write into a read-only array
    def f(a, b):
        ya, yb = np.broadcast_arrays(a, b)
        ya *= 2.0  # doubles a
        c, _ = np.broadcast_arrays(b, np.ones((3, 2)))  # (b[...]: a view of b, not b)
        return np.sum(ya) + np.sum(yb * 3.0) + np.sum(a * b) + np.sum(c)

    a, b = np.array([1.0, 2.0]), np.array([3.0, 4.0])
    check_grads(f, a, b)
    v, g = mg.value_and_grad(f, argnums=(0, 1))(a.copy(), b.copy())
    assert v == f(a.copy(), b.copy())
    np.testing.assert_allclose(g[0], 2.0 + 2.0 * b)  # closed form: d/da of 2a + 2a*b
    np.testing.assert_allclose(g[1], 3.0 + 2.0 * a + 3.0)


@pytest.mark.parametrize("make", [lambda x: np.real(x), lambda x: np.split(x, 5)[2], lambda x: x[:, :, ::-1].T],
                         ids=["real", "split", "reversed-transposed"])
def test_a_write_into_an_empty_view_is_a_no_op(make):
    # NumPy gives empty views strides that look self-overlapping (0 or repeated); a write into
    # one changes nothing, as in NumPy (it was refused as a self-overlapping view)
    def f(x, y):
        v = make(x)
        v *= 2.0
        v[...] = 3.0
        return np.sum(v) + np.sum(x) + np.sum(y * y)

    x, y = np.zeros((5, 0, 5)), np.array([1.0, 2.0])
    v, g = mg.value_and_grad(f, argnums=(0, 1))(x.copy(), y.copy())
    assert v == f(x.copy(), y.copy()) == 5.0
    assert g[0].shape == (5, 0, 5)
    np.testing.assert_array_equal(g[1], 2.0 * y)


def _fd_grad(f, x, h=1e-6):
    return np.reshape([(f(x + h * e) - f(x - h * e)) / (2 * h) for e in np.eye(x.size).reshape((x.size,) + x.shape)],
                      x.shape)


def _stmt_function(body, ret):
    """A function ``f(y)`` running the statement(s) ``body``, then returning ``ret``."""
    ns = {"np": np}
    exec(f"def f(y):\n    {body}\n    return {ret}\n", ns)  # noqa: S102 (the write forms, one test each)
    return ns["f"]


def _as_numpy_and_differences(f, y0, atol=1e-8):
    """``f``'s value and its argument's final contents are a plain call's, bit for bit; its
    gradient is central differences'; its jvp along ``arange`` is the gradient's product."""
    plain = y0.copy()
    want = f(plain)
    y = y0.copy()
    val, g = mg.value_and_grad(f)(y)
    assert val == want and np.array_equal(y, plain)
    np.testing.assert_allclose(g, _fd_grad(f, y0.copy()), rtol=1e-7, atol=atol)
    t = np.arange(float(y0.size))
    np.testing.assert_allclose(mg.jvp(f, (y0.copy(),), (t,))[1], g @ t, rtol=1e-12)


def test_as_strided_of_traced_arrays_through_mutagrad_numpy():
    rng = np.random.default_rng(0)
    x, w = rng.standard_normal((6, 6)), rng.standard_normal((2, 3))

    def conv(a, ast):  # im2col: overlapping windows, read
        s0, s1 = a.strides
        win = ast(a, shape=(5, 4, 2, 3), strides=(s0, s1, s0, s1), writeable=False)
        return np.sum(np.tanh(np.tensordot(win, w, axes=([2, 3], [0, 1]))))

    def plain(a):
        return conv(a, np.lib.stride_tricks.as_strided)

    def traced(a):
        return conv(a, mnp.as_strided)

    assert traced(x) == plain(x)
    np.testing.assert_allclose(mg.grad(traced)(x), _fd_grad(plain, x), rtol=1e-6, atol=1e-9)
    check_grads(traced, x, modes=("fwd", "rev"), order=2)
    with pytest.raises(mg.NoRuleError, match=r"mnp\.as_strided"):  # NumPy's own: the advice names it
        mg.grad(plain)(x)

    def write(v, ast):  # a view that does not overlap itself, written through
        a = v * 1.0
        s = ast(a, (3,), (2 * a.itemsize,))
        s *= v[1::2]
        return np.sum(a ** 2)

    v = np.array([0.3, -1.2, 0.8, 2.0, -0.5, 1.1])
    np.testing.assert_allclose(mg.grad(lambda a: write(a, mnp.as_strided))(v),
                               _fd_grad(lambda a: write(a, np.lib.stride_tricks.as_strided), v), rtol=1e-7)
    with pytest.raises(mg.NoRuleError, match="reaches memory outside the array"):
        mg.grad(lambda a: np.sum(mnp.as_strided(a, (10,), (a.itemsize,))))(np.ones(4))
    with pytest.raises(mg.MutationError, match="self-overlapping"):  # elements that are the same memory
        mg.grad(lambda a: np.sum(_write_first(mnp.as_strided(a * 1.0, (3, 2), (a.itemsize, a.itemsize)))))(np.ones(4))
    assert type(mnp.as_strided(np.arange(4.0), (2,), (16,))) is np.ndarray  # plain outside differentiation


def _write_first(w):
    w[0:2] = 5.0  # (rows 0 and 1 share an element; one element alone, w[0, 1], is distinct memory)
    return w


@pytest.mark.parametrize("idx", [
    np.array([0, 3, -1]), (np.array([[0], [2]]), np.array([1, -2, 4])), (np.array([1, 1]), 2), (2, np.array([0, 4, 4])),
    (np.array([0, 1]), np.array([1, 2]), np.array([0, -1])), np.array([[1, 2], [3, 0]]), (np.int64(1), np.array([0])),
    np.ix_(np.array([0, 2]), np.array([1, 3])), np.array([], dtype=int), (slice(None), np.array([0, 1])),
    np.array([True, False, True, False]), (Ellipsis, 0), np.array([1, 2], dtype=np.uint8),
    (np.array([[7]]), np.array([], dtype=int)),  # (an empty selection: NumPy checks no array's bounds)
])
def test_index_positions_are_numpys(idx):
    # the flat positions of a[idx] without an arange of a's size where the index allows
    from mutagrad.core import index_positions

    shape = (4, 5, 3)
    want = np.arange(60).reshape(shape)[idx]
    got = index_positions(shape, idx)
    assert got.shape == want.shape
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("idx", [np.array([4]), (np.array([0]), np.array([-6])), np.array([-5]),
                                 (4, np.array([], dtype=int)), (np.array(-5), np.array([], dtype=int))])
def test_index_positions_out_of_bounds_is_numpys_error(idx):
    from mutagrad.core import index_positions

    with pytest.raises(IndexError) as ours:
        index_positions((4, 5, 3), idx)
    with pytest.raises(IndexError) as numpys:
        np.zeros((4, 5, 3))[idx]
    assert str(ours.value) == str(numpys.value)


def test_index_positions_of_arrays_that_do_not_broadcast_is_an_index_error():
    from mutagrad.core import index_positions

    idx = (np.array([0, 1]), np.array([0, 1, 2]))
    with pytest.raises(IndexError, match="shape mismatch"):
        index_positions((4, 5, 3), idx)
    with pytest.raises(IndexError, match="shape mismatch"):
        np.zeros((4, 5, 3))[idx]


def test_repeated_fancy_writes_into_a_large_array_keep_numpys_winner():
    # the winners of repeated targets are replayed in the destination itself (no scratch of its
    # size): the last occurrence wins, as in NumPy, and values and derivatives are exact
    M = 100_000
    weights = np.linspace(0.5, 1.5, 6)

    def f(x):
        b = np.zeros_like(x, shape=(M,))
        for i in range(5):
            d = np.array([i, i + 1, i, M - 1 - i])  # i twice: its second value wins
            b[d] = np.stack([x[i], 2 * x[i + 1], 3 * x[i], x[i] ** 2])
            b[d[:2]] += x[i]
        return np.sum(b[:6] * weights) + np.sum(b[-6:] ** 2)

    check_grads(f, np.linspace(1.0, 2.0, 6))
    b = np.zeros(M)
    b[np.array([0, 1, 0])] = [1.0, 2.0, 3.0]
    assert b[0] == 3.0  # (NumPy's choice the replay reproduces)


@pytest.mark.parametrize("call", [
    lambda x: np.subtract.accumulate(x[0], out=x),  # out (2, 2) for a result (2,), overlapping the input
    lambda x: np.divide.accumulate(x[0], out=x),
    lambda x: np.cumsum(x.reshape(4)[1:2], out=x.reshape(4)[::-1]),  # (1,) into (4,), overlapping
    lambda x: np.add.accumulate(x[0], out=x),
    lambda x: np.maximum.accumulate(x[0], out=x),
], ids=["subtract", "divide", "cumsum-1", "add", "maximum"])
def test_accumulate_into_an_out_of_another_shape_is_refused(call):
    # NumPy copies an out that overlaps the input and then fills only part of it: a quirk no
    # rule follows (mutagrad broadcast the result over all of out: a wrong value and gradient)
    def f(x):
        call(x)
        return np.sum(x * np.array([[1.0, 2.0], [3.0, 4.0]]))

    with pytest.raises(mg.NoRuleError, match="out= of shape"):
        mg.grad(f)(np.array([[1.0, 2.0], [3.0, 5.0]]))


@pytest.mark.parametrize("call", [
    lambda r, o: np.subtract.accumulate(r, out=o), lambda r, o: np.cumsum(r, out=o),
    lambda r, o: np.maximum.accumulate(r, out=o),
], ids=["subtract", "cumsum", "maximum"])
def test_accumulate_into_a_wrong_size_out_raises_numpys_error(call):
    def f(r, o):
        call(r, o)
        return np.sum(o)

    with pytest.raises(ValueError) as numpys:
        f(np.array([0.7, -1.3]), np.zeros(3))
    with pytest.raises(ValueError) as ours:
        mg.grad(f)(np.array([0.7, -1.3]), np.zeros(3))
    assert str(ours.value) == str(numpys.value)


@pytest.mark.parametrize("order", ["C", "F"])
def test_inplace_matmul_has_numpys_bits(order):
    # a @= b is matmul with out=a: computed in a buffer of a's layout (an F-ordered complex a
    # rounded otherwise when computed into a C-ordered result, then copied)
    rng = np.random.default_rng(0)
    m = rng.standard_normal((2, 2)) + 1j * rng.standard_normal((2, 2))
    x = np.array(rng.standard_normal((4, 2)) + 1j * rng.standard_normal((4, 2)), order=order)

    def f(x):
        x @= m
        return np.sum(np.abs(x) ** 2)

    a, b = x.copy(order="K"), x.copy(order="K")
    assert f(a) == mg.value_and_grad(f)(b)[0]
    np.testing.assert_array_equal(a, b)
    check_grads(f, x.copy(order="K"))


@pytest.mark.parametrize("other", [np.ones(2), np.ones((2, 3)), 2.0], ids=["1-d", "shape", "0-d"])
def test_inplace_matmul_errors_are_numpys(other):
    def f(x):
        x @= other
        return np.sum(x)

    with pytest.raises(ValueError) as numpys:
        f(np.ones((3, 2)))
    with pytest.raises(ValueError) as ours:
        mg.grad(f)(np.ones((3, 2)))
    assert str(ours.value) == str(numpys.value)


_T3 = np.array([[0.9, -0.3, 0.2], [0.1, 0.8, -0.4], [0.3, 0.2, 0.7]])
_C3 = _T3 + 1j * _T3[::-1]


def _products_into():
    """Programs (p, m) -> scalar that write products into an out= (``m``: an argument they write into too):
    an out that is an operand, a view of one, or overlaps one; F-ordered, strided, complex, batched; and
    outs the product is cast or broadcast into."""

    def imatmul(p, m):
        m *= p[0]
        t = _T3 * p[1] + p[2]
        m @= t
        m @= t
        return np.sum(np.sin(m))

    def out_is_second(p, m):
        t = np.cos(_T3 * p[1])
        np.matmul(m * p[0], t, out=t)
        np.matmul(t, t, out=t)
        np.matmul(t, m, out=m)
        return np.sum(t * m) + p[2] * np.sum(m ** 2)

    def row_from_itself(p, m):
        m *= p
        np.matmul(m[0], m, out=m[1])  # (out overlaps the second operand: NumPy reads a copy of it)
        np.matmul(m, m[2], out=m[0])
        return np.sum(m ** 3)

    def strided(p, m):  # m: (6, 3), out every other row
        m[::2] *= p
        np.matmul(m[::2], _T3 * p[2], out=m[::2])
        return np.sum(np.tanh(m))

    def batched(p, m):  # m: (2, 3, 3)
        m *= p[0]
        m @= _T3 * p[1]
        np.matmul(m, m[::-1], out=m)
        return np.sum(m * m) * p[2]

    def complex_out(p, m):  # m complex
        m *= p[0] + 1j * p[1]
        m @= _C3 * p[2]
        return np.sum(np.abs(m) ** 2)

    def vector(p, m):  # m: (3,)
        m *= p
        np.matmul(_T3 * p[0], m, out=m)
        np.matmul(m, _T3 * p[1], out=m)
        return np.sum(np.exp(m))

    def cast_and_broadcast(p, m):  # (NumPy's cast into a float32 out; a product broadcast into a larger out)
        o32 = np.zeros((3, 3), np.float32) + p[0]
        np.matmul(m * p[1], _T3, out=o32)
        big = np.zeros((2, 3, 3)) + p[2]
        np.matmul(m * p[1], _T3 * p[0], out=big)
        return np.sum(o32.astype(np.float64) * big)

    def dot(p, m):
        v = np.sin(p)
        np.dot(m * p[0], v, out=v)  # (an out that is the second operand)
        np.dot(m, _T3 * p[1], out=m)
        return np.sum(v ** 2) + np.sum(m * p[2])

    def einsum(p, m):
        m *= p[0]
        np.einsum("ij,jk->ik", m, _T3 * p[1], out=m)
        np.einsum("ij->ji", m, out=m)  # (a transpose into itself: NumPy reads a copy)
        t = np.cos(m)
        np.einsum("ij,kj,kl->il", t, m, t * p[2], out=t, optimize=True)
        return np.sum(t * m)

    m33 = np.array([[0.5, -0.2, 0.3], [0.4, 0.6, -0.1], [-0.3, 0.2, 0.8]])
    return {
        "M @= T": (imatmul, m33),
        "M @= T, M Fortran-ordered": (imatmul, np.asfortranarray(m33)),
        "out= the second operand": (out_is_second, m33),
        "out= a row, reading its own array": (row_from_itself, m33),
        "out= a strided view": (strided, np.linspace(-0.5, 0.7, 18).reshape(6, 3)),
        "batched": (batched, np.stack([m33, m33.T])),
        "complex": (complex_out, m33 + 0.5j * m33.T),
        "vector": (vector, np.array([0.3, -0.6, 0.9])),
        "cast and broadcast outs": (cast_and_broadcast, m33),
        "np.dot": (dot, m33),
        "np.einsum": (einsum, m33),
    }


_PRODUCTS_INTO = _products_into()


@pytest.mark.parametrize("name", list(_PRODUCTS_INTO))
def test_products_into_out_are_numpys_and_differentiated(name):
    # M @= T, np.matmul/np.dot/np.einsum(..., out=): NumPy's own call computes the product into out (its bits:
    # its kernel on out's layout, an overlapping operand read from a copy), and the derivative is that of the
    # operands as they were. The values and the argument's final contents are a plain call's, bit for bit;
    # the derivatives are central differences of the plain program (first and second order)
    f, m0 = _PRODUCTS_INTO[name]
    p = np.array([0.8, 1.1, -0.3])
    d = np.array([0.3, -0.7, 0.5])
    m_plain = m0.copy(order="K")
    plain = f(p.copy(), m_plain)
    m = m0.copy(order="K")
    value, g = mg.value_and_grad(f)(p.copy(), m)
    assert value == plain
    np.testing.assert_array_equal(m, m_plain)
    m = m0.copy(order="K")
    y, t = mg.jvp(f, (p.copy(), m), (d, np.zeros_like(m)))
    assert y == plain
    np.testing.assert_array_equal(m, m_plain)
    h = 1e-6
    fd = np.array([(f(p + e, m0.copy(order="K")) - f(p - e, m0.copy(order="K"))) / (2 * h)
                   for e in np.eye(3) * h])
    np.testing.assert_allclose(g, fd, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(t, fd @ d, rtol=1e-6, atol=1e-8)
    H = mg.hessian(f)(p.copy(), m0.copy(order="K"))
    np.testing.assert_allclose(H, fd_hessian(lambda q: f(q, m0.copy(order="K")), p), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(mg.jacobian(mg.grad(f), mode="rev")(p.copy(), m0.copy(order="K")), H, rtol=1e-12,
                               atol=1e-12)


def test_product_into_out_keeps_out_where_numpy_refuses():
    # NumPy's own errors for an out it refuses (a wrong shape, an F-ordered np.dot out, an integer out), and the
    # out's contents left as they were, under grad and jvp as in a plain call
    calls = [
        lambda p, m: np.matmul(m * p[0], _T3, out=m[:, :2]),
        lambda p, m: np.dot(m * p[0], _T3, out=np.asfortranarray(m)),
        lambda p, m: np.einsum("ij,jk->ik", m * p[0], _T3[:2], out=m),
        lambda p, m: np.matmul(m * p[0], _T3, out=np.zeros_like(m, dtype=np.int64)),
    ]
    for call in calls:
        def f(p, m, call=call):
            try:
                call(p, m)
            except (ValueError, TypeError) as e:
                return np.sum(m * p), f"{type(e).__name__}: {e}"
            return np.sum(m * p), None

        m0 = _T3.copy()
        m = m0.copy()
        plain = f(np.ones(3), m)
        assert plain[1] is not None
        for run in (lambda m: mg.grad(f, has_aux=True)(np.ones(3), m),
                    lambda m: mg.jvp(f, (np.ones(3), m), (np.ones(3), np.zeros_like(m)), has_aux=True)):
            m = m0.copy()
            res = run(m)
            assert res[-1] == plain[1]
            np.testing.assert_array_equal(m, m0)


def _windows(x):
    import mutagrad.numpy as mnp

    return mnp.as_strided(x, shape=(4, 2), strides=(x.strides[0], x.strides[0]))  # overlapping pairs


@pytest.mark.parametrize("write", [
    lambda w, x: w.__setitem__((1, 0), x[4] ** 2),  # one element
    lambda w, x: w.__setitem__(1, np.sin(x[3:5])),  # one window: distinct memory
    lambda w, x: w[2].__imul__(x[0]),  # augmented, through the row's own view
    lambda w, x: np.negative(w[0], out=w[3]),
    lambda w, x: w.__setitem__((slice(None, None, 2), 0), x[:2] * 3.0),  # rows 0 and 2, column 0
], ids=["element", "row", "imul-row", "out-row", "strided-column"])
def test_write_through_distinct_elements_of_an_overlapping_view(write):
    # the elements written are distinct memory, though the view's elements are not: recorded as a
    # write through a view of them (it was refused as a self-overlapping write)
    def f(x):
        write(_windows(x), x)
        return np.sum(x ** 2 * np.arange(1.0, 6.0))

    check_grads(f, np.array([0.3, -1.2, 0.8, 2.0, 0.5]), order=2)


def test_write_through_overlapping_elements_is_still_refused():
    def f(x):
        w = _windows(x)
        w[1:3] = 1.0  # rows 1 and 2 share x[2]
        return np.sum(x)

    with pytest.raises(mg.MutationError, match="self-overlapping"):
        mg.grad(f)(np.array([0.3, -1.2, 0.8, 2.0, 0.5]))


@pytest.mark.parametrize("case", ["b-overlaps-a", "float32", "unary", "tuple-index", "slice"])
def test_ufunc_at_without_repeats_is_numpys(case):
    # every position once: a gather, the ufunc and a write, with NumPy's bits (b read first)
    def f(x):
        a = x * 1.0 if case != "float32" else (x * 1.0).astype(np.float32)
        if case == "b-overlaps-a":
            np.multiply.at(a, np.array([3, 0, 5]), a[:3])
        elif case == "float32":
            np.add.at(a, np.array([1, 4]), 0.1)
        elif case == "unary":
            np.negative.at(a, [0, 2])
        elif case == "tuple-index":
            a2 = a.reshape(2, 3)
            np.subtract.at(a2, (np.array([0, 1]), np.array([2, 0])), x[1:3] ** 2)
        else:
            np.add.at(a, slice(1, 4), x[:3])
        return a

    x = np.linspace(0.3, 1.8, 6)
    a, b = f(x), mg.vjp(f, x)[0]
    assert a.dtype == b.dtype
    np.testing.assert_array_equal(a, b)
    if case != "float32":  # (central differences of float32 arithmetic are noise)
        check_grads(f, x, order=2)


_AT_IDX = np.array([3, 0, 3, 5, 3, 0, 1, 3, 3, 5, 3])  # position 3 six times: rounding in NumPy's order


def _at_repeats(case, x):
    a = x * 1.0
    if case == "add":
        np.add.at(a, _AT_IDX, x[: _AT_IDX.size] * 1e3)
    elif case == "subtract":
        np.subtract.at(a, _AT_IDX, np.sin(x[: _AT_IDX.size]))
    elif case == "rows":  # values of fewer dimensions than the indexed shape (NumPy broadcasts them)
        a2 = a[:12].reshape(3, 4)
        np.add.at(a2, [0, 2, -3, -1, 0], x[:4] ** 2)
    elif case == "tuple-index":
        a2 = a[:12].reshape(3, 4)
        np.subtract.at(a2, (np.array([1, 1, 2, 1]), np.array([0, 0, 3, 0])), x[4:8] * x[:4])
    elif case == "slice-index":
        a2 = a[:12].reshape(3, 4)
        np.add.at(a2, (slice(None), [3, 0, 3]), x[:3] ** 2)
    elif case == "b-overlaps-a":  # NumPy reads the values before the loop
        np.add.at(a, _AT_IDX[:5], a[2:7])
    elif case == "scalar":
        np.add.at(a, _AT_IDX, 0.1)
        np.subtract.at(a, _AT_IDX[:4], np.arange(4))  # integer values
    elif case == "large":  # few positions of a large array (a sort, not a mark per element)
        big = np.repeat(a, 30)
        np.add.at(big, [7, 300, 7, 7, 359], x[:5])
        a = big[::30] + big[7]
    elif case == "float32":
        a = a.astype(np.float32)
        np.add.at(a, _AT_IDX, x[: _AT_IDX.size] ** 2)  # float64 values into float32 elements
    elif case == "complex":
        a = a * (1 - 0.5j)
        np.add.at(a, _AT_IDX, x[: _AT_IDX.size] ** 2)  # real values into complex elements
        np.subtract.at(a, _AT_IDX[:3], (1 + 2j) * x[:3])
        return np.abs(a) ** 2
    return a


@pytest.mark.parametrize("case", ["add", "subtract", "rows", "tuple-index", "slice-index", "b-overlaps-a",
                                  "scalar", "large", "float32", "complex"])
def test_add_and_subtract_at_with_repeats(case):
    # repeated positions: NumPy's own sums in index order (the same bits), one linear rule
    x = np.linspace(0.3, 1.8, 12)
    a, b = _at_repeats(case, x.copy()), mg.vjp(lambda v: _at_repeats(case, v), x.copy())[0]
    assert a.dtype == b.dtype
    np.testing.assert_array_equal(a, b)
    if case != "float32":  # (central differences of float32 arithmetic are noise)
        check_grads(lambda v: _at_repeats(case, v), x, order=2)
    else:
        g = mg.grad(lambda v: np.sum(_at_repeats(case, v).astype(np.float64)))(x)
        assert g.dtype == np.float64
        np.testing.assert_allclose(g, 1 + np.bincount(np.arange(11), minlength=12) * 2 * x, rtol=1e-6)


@pytest.mark.parametrize("ufunc", [np.add, np.maximum])
def test_ufunc_at_values_broadcast_over_an_index_matrix(ufunc):
    # overlap-add of a window: values (16,) broadcast over a (6, 16) index array into a 1-D array.
    # NumPy 2.4's own loop reads past the values' memory there (a plain call gives garbage), so the
    # oracle is the same program with the values broadcast explicitly, which NumPy sums right
    idx = np.arange(16)[None, :] + 8 * np.arange(6)[:, None]

    def f(win, explicit=False):
        w = np.zeros_like(win, shape=(56,)) - 1.0
        vals = win ** 2
        if explicit:
            vals = np.broadcast_to(vals, idx.shape).copy()
        ufunc.at(w, idx, vals)
        return np.sum(w ** 2 * np.arange(56.0))

    win = np.hanning(18)[1:-1] + np.linspace(0.0, 0.1, 16)
    value, grad = mg.value_and_grad(f)(win)
    assert value == f(win, explicit=True)
    np.testing.assert_allclose(grad, numerical_grad(lambda v: f(v, explicit=True), (win,), (0,))[0], rtol=1e-6, atol=1e-6)
    t = np.cos(np.arange(16.0))
    np.testing.assert_allclose(mg.jvp(f, (win,), (t,))[1], grad @ t, rtol=1e-12)


def test_add_at_values_into_the_argument_itself():
    # the argument holds what a plain call leaves; the derivative is w.r.t. its values at the call
    def f(a, b):
        np.add.at(a, [1, 1, 0, 1], b)
        return np.sum(a ** 3)

    a0, b0 = np.array([0.5, -1.0, 2.0]), np.array([0.3, 0.2, -0.7, 0.9])
    plain = a0.copy()
    f(plain, b0)
    arg = a0.copy()
    mg.grad(f, argnums=(0, 1))(arg, b0)
    np.testing.assert_array_equal(arg, plain)
    check_grads(f, a0, b0, order=2)


def test_failed_repeated_target_write_leaves_the_array_as_numpy_does():
    # the winners of repeated targets are replayed in the destination and put back: a write that
    # then fails (NumPy's broadcast error, caught by the function) leaves the array unchanged
    def f(x):
        b = x * 1.0
        try:
            b[np.array([0, 1, 0])] = x[:2]  # 2 values for 3 targets: NumPy raises
        except ValueError:
            pass
        return b

    x = np.array([0.5, 1.5, 2.5])
    np.testing.assert_array_equal(mg.vjp(f, x)[0], f(x))
    check_grads(f, x)


@pytest.mark.parametrize("fn", [np.cumulative_sum, np.cumulative_prod])
@pytest.mark.parametrize("out_of", ["short", "2-d"])
def test_cumulative_into_a_wrong_size_out_raises_numpys_error(fn, out_of):
    def f(x):  # (a fresh out, not overlapping the input: NumPy raises)
        o = np.zeros_like(x)[:3] if out_of == "short" else np.zeros_like(x)[None, :]
        fn(x[:1] if out_of == "short" else x, out=o)
        return np.sum(o)

    x = np.arange(1.0, 7.0)
    with pytest.raises(ValueError) as numpys:
        f(x.copy())
    with pytest.raises(ValueError) as ours:
        mg.grad(f)(x.copy())
    assert str(ours.value) == str(numpys.value)


@pytest.mark.parametrize("ufunc", [np.add, np.multiply, np.subtract, np.maximum, np.hypot])
def test_accumulate_with_axis_none_is_numpys(ufunc):
    # one axis (None: the only one of a 1-d array); several raise NumPy's error
    x = np.linspace(0.5, 2.0, 6)
    f = lambda x: ufunc.accumulate(x, axis=None)
    np.testing.assert_array_equal(mg.vjp(f, x)[0], f(x))
    check_grads(f, x)
    for bad in (lambda y: ufunc.accumulate(y.reshape(2, 3), axis=None),
                lambda y: ufunc.accumulate(y.reshape(2, 3), axis=(0, 1))):
        with pytest.raises(ValueError, match="accumulate does not allow multiple axes"):
            mg.grad(lambda y, bad=bad: np.sum(bad(y)))(x)


def test_inplace_matmul_into_a_plain_array_names_the_write():
    def f(b):
        a = np.eye(3)
        a @= b  # (a variable nothing else refers to: it gets the new traced product)
        return np.sum(a * a)

    b0 = np.arange(9.0).reshape(3, 3) / 9
    check_grads(f, b0, order=2)

    def shared(b):
        a = np.eye(3)
        seen = a
        a @= b  # (NumPy passes axes= for the in-place product: the write into a plain array is the error)
        return np.sum(seen)

    with pytest.raises(mg.WriteToPlainArrayError, match="a @= "):
        mg.grad(shared)(b0)


def test_ufunc_at_of_a_python_float_into_float32_is_numpys():
    # ufunc.at converts its value with np.asarray: a Python float is a float64 operand (the sum is
    # rounded to float32 once), not a weak scalar (a float32 addition): NumPy's bits
    c0 = np.random.default_rng(3).uniform(-1, 1, (4, 5)).astype(np.float32)

    def f(c):
        np.add.at(c, (slice(None), [3, 0, 2]), 0.8856746451243238)
        np.multiply.at(c, [1, 1], 1.1)  # (repeated: the rounds)
        return c

    np.testing.assert_array_equal(mg.vjp(f, c0.copy())[0], f(c0.copy()))


def test_np_put_of_one_element_in_an_element_loop():
    # one position and one value: the element write itself (the same values and derivative as
    # the general path: negative positions, 2-d arrays, wrap/clip modes, NumPy's errors)
    def f(x):
        b = np.outer(x, x)
        for i in range(6):
            np.put(b, [(i * 5) % 9 - 7], x[i % 3] * b.flat[i])
            np.put(b, i + 7, np.sin(x[(i + 1) % 3]), mode="wrap")
            np.put(b, [-20], 2.0, mode="clip")
        return b

    x = np.array([0.3, -0.7, 1.1])
    np.testing.assert_array_equal(mg.vjp(f, x)[0], f(x))
    check_grads(lambda x: np.sum(f(x) ** 2), x, order=2)
    with pytest.raises(IndexError, match="index 9 is out of bounds for axis 0 with size 9"):
        mg.grad(lambda x: np.sum(np.put(np.outer(x, x), [9], x[0]) or x))(x)


@pytest.mark.parametrize("layout", ["C", "strided", "F"])
def test_put_with_a_bad_index_leaves_what_numpy_leaves(layout):
    # np.put(mode="raise") writes the values before the bad index into a C-contiguous array, and
    # nothing into another (it writes into a C-ordered copy it drops): caught inside the function
    def f(x):
        try:
            np.put(x, [0, 1, 9], [5.0, x.flat[2] * 2.0, 1.0])
        except IndexError:
            pass
        return np.sum(x * x)

    make = {"C": lambda: np.array([1.0, 2.0, 3.0, 4.0]),
            "strided": lambda: np.array([1.0, 0.0, 2.0, 0.0, 3.0, 0.0, 4.0])[::2],
            "F": lambda: np.asfortranarray([[1.0, 2.0], [3.0, 4.0]])}[layout]
    def at(d):  # f at make() + d, in make()'s layout (the layout decides what is written)
        x = make()
        x[...] += d
        return f(x)

    shape = make().shape
    fd = np.reshape([(at(1e-6 * e) - at(-1e-6 * e)) / 2e-6 for e in np.eye(np.prod(shape)).reshape((-1,) + shape)],
                    shape)
    plain = make()
    want = f(plain)
    x = make()
    val, g = mg.value_and_grad(f)(x)
    assert val == want
    np.testing.assert_array_equal(x, plain)
    np.testing.assert_allclose(g, fd, rtol=1e-7, atol=1e-9)
    _, t = mg.jvp(f, (make(),), (np.ones(shape),))
    np.testing.assert_allclose(t, fd.sum(), rtol=1e-7)


def test_conj_method_of_a_real_array_is_the_array_itself():
    # NumPy's ndarray.conj() of a real array returns the array itself (not a copy): a write through
    # it is a write into the array (the spectral tester's generic real-or-complex helper)
    def f(u):
        w = u * 1.0
        v = w.conj()
        v *= 3.0
        c = (w * 1j).conjugate()  # (a complex array's conjugate is a new array)
        c *= 2.0
        return np.sum(w ** 2) + np.sum(np.abs(c))

    u = np.array([1.0, 2.0, 3.0])
    assert f(u.copy()) == 126.0 + 2 * 3 * 6.0
    val, g = mg.value_and_grad(f)(u.copy())
    assert val == f(u.copy())
    np.testing.assert_allclose(g, _fd_grad(f, u), rtol=1e-7)
    np.testing.assert_allclose(mg.jvp(f, (u,), (np.ones(3),))[1], _fd_grad(f, u).sum(), rtol=1e-7)


@pytest.mark.parametrize("idx, b", [(np.array([], dtype=int), np.arange(3.0)), (np.array([1, 2]), np.arange(3.0)),
                                    ((np.array([[1], [2]]),), np.ones((2, 3)))])
def test_ufunc_at_values_that_do_not_broadcast_are_numpys_error(idx, b):
    # np.add.at's values must broadcast to the indexed shape, an empty one too (it ran under mutagrad)
    def f(x):
        np.add.at(x, idx, b)
        return np.sum(x)

    with pytest.raises(ValueError, match="not broadcastable to correct shape"):
        f(np.ones(5))
    with pytest.raises(ValueError, match="not broadcastable to correct shape"):
        mg.grad(f)(np.ones(5))


@pytest.mark.parametrize("write", [
    lambda y: np.put(y, [0, 1], []),
    lambda y: np.put(y, [7], [], mode="raise"),  # (no values: NumPy checks no index either)
    lambda y: np.putmask(y, y > 0, []),
    lambda y: y.put([2], []),
], ids=["put", "put-out-of-range", "putmask", "method"])
def test_put_and_putmask_of_no_values_write_nothing(write):
    # NumPy writes nothing; mutagrad raised from its own code (an empty selection, a modulo by 0)
    def f(x):
        y = x * 2.0
        write(y)
        return np.sum(y * x)

    x = np.array([0.3, -1.2, 0.8])
    y = x * 2.0
    write(y)
    np.testing.assert_array_equal(y, x * 2.0)
    check_grads(f, x)


@pytest.mark.parametrize("run", [
    lambda f, x: mg.value_and_grad(f)(x),
    lambda f, x: mg.jvp(f, (x,), (np.array([0.0, 1.0]),)),
    lambda f, x: (mg.vjp(f, x)[0],),
], ids=["grad", "jvp", "vjp"])
def test_warning_filters_by_message_or_module_see_numpys_warning_as_in_a_plain_call(run):
    # NumPy's warning was issued again from mutagrad's files (and without "in log" in forward
    # mode): a filter turning it into an error by message or module no longer fired, and the
    # function took the other branch (value -inf where the plain call gives -6.2141)
    import warnings

    def loglik(x, **filt):
        with warnings.catch_warnings():
            warnings.filterwarnings("error", **filt)
            try:
                return np.sum(np.log(x))
            except RuntimeWarning:
                return np.sum(np.log(x + 1e-3))

    x = np.array([0.0, 2.0])
    for filt in ({"message": "divide by zero encountered in log"}, {"module": __name__}):
        want = loglik(x.copy(), **filt)
        got = run(lambda x, filt=filt: loglik(x, **filt), x.copy())
        assert np.isclose(want, -6.21410822338054) and np.isclose(got[0], want)


@pytest.mark.parametrize("spelled", ["H[j]", "H[j, :]", "H[j:j + 1]", "H[:, j]"])
def test_a_history_of_rows_written_by_any_spelling(spelled):
    # (a row of a large history, H[j, :] = u * 1.0, took a reverse-pass path made for writes of most of
    # an array, which copied the whole adjoint buffer per write: quadratic in the rows; both paths here)
    def f(u0):
        u = u0 * 1.0
        H = np.zeros_like(u, shape=(6, 6))
        for j in range(4):
            u = np.sin(u) + 0.1 * j
            if spelled == "H[j]":
                H[j] = u * 1.0
            elif spelled == "H[j, :]":
                H[j, :] = u * 1.0
            elif spelled == "H[j:j + 1]":
                H[j:j + 1] = (u * 1.0)[None]
            else:
                H[:, j] = u * 1.0
        H[1, :] = H[2, :] * H[3, :]  # (a row overwritten after it was read)
        return np.sum(H ** 2 * np.arange(1.0, 7.0))

    check_grads(f, np.linspace(0.2, 1.1, 6), order=2)


_W2 = np.array([[1.0, 2.0], [3.0, 4.0]])
_SEQUENCE_WRITES = {  # (what NumPy leaves in A = [[1, 2], [3, 4]]: item after item, views read as they are then)
    "rows": lambda A: A.__setitem__(slice(None), [A[1], A[0]]),  # [[3, 4], [3, 4]]
    "elements": lambda A: A.__setitem__(slice(None), [[A[1, 1, ...], A[1, 0, ...]], [A[0, 1, ...], A[0, 0, ...]]]),
    "reversed_row": lambda A: A.__setitem__(slice(None), [A[1, ::-1], A[0]]),
    "reversed_destination": lambda A: A.__setitem__(slice(None, None, -1), [A[0], A[1]]),
    "one_row": lambda A: A.__setitem__(0, [A[1, 0, ...], A[0, 0, ...]]),
    "columns": lambda A: A.__setitem__(slice(None), [A[:, 1], A[:, 0]]),
    "nested_and_row": lambda A: A.__setitem__(slice(None), [[A[1, 1, ...], 5.0], A[0]]),
    "tuple": lambda A: A.__setitem__(Ellipsis, (A[1] * 2.0, A[0])),
    "transposed": lambda A: A.T.__setitem__(slice(None), [A.T[1], A.T[0]]),
    # NumPy converts first: a sequence it broadcasts, a fancy index
    "broadcast": lambda A: A.__setitem__(slice(None), [[A[1, 1, ...]], [A[0, 0, ...]]]),
    "fancy": lambda A: A.__setitem__([0, 1], [A[1], A[0]]),
}


@pytest.mark.parametrize("name", list(_SEQUENCE_WRITES))
def test_sequence_written_item_after_item_as_numpy_does(name):
    # `A[:] = [A[1], A[0]]`: NumPy assigns the list's items in order, so the second reads the
    # row the first wrote; converting the list first gave another value, gradient and contents
    op = _SEQUENCE_WRITES[name]

    def f(A):
        op(A)
        return np.sum(A * _W2) + np.sum(np.sin(A))

    A0 = np.array([[1.0, 2.0], [3.0, 4.0]])
    plain = A0.copy()
    want = f(plain)
    traced = A0.copy()
    value, g = mg.value_and_grad(f)(traced)
    assert value == want
    np.testing.assert_array_equal(traced, plain)  # the argument ends as after the plain call
    fd = numerical_grad(lambda a: f(a.copy()), (A0.copy(),), (0,))[0]
    np.testing.assert_allclose(g, fd, rtol=1e-6, atol=1e-8)
    check_grads(lambda a: f(a.copy()), A0.copy(), order=2)


def test_copyto_of_memory_onto_itself_is_numpys_no_op():
    # NumPy skips a copy whose source is the destination's memory, layout and dtype, before it
    # checks that the destination is writable: np.copyto(d, d) of a read-only view passes
    def f(x):
        d = x[1:]
        d.flags.writeable = False
        np.copyto(d, d)
        np.copyto(d, x[1:], where=np.array([True, False]))
        w = x[:2]
        np.copyto(w, w)
        return np.sum(x * x * np.array([1.0, 2.0, 3.0]))

    x = np.array([1.0, 2.0, 3.0])
    plain = x.copy()
    want = f(plain)
    traced = x.copy()
    value, g = mg.value_and_grad(f)(traced)
    assert value == want
    np.testing.assert_array_equal(traced, plain)
    np.testing.assert_allclose(g, 2 * x * np.array([1.0, 2.0, 3.0]), rtol=1e-15)  # by hand
    check_grads(lambda a: f(a.copy()), x.copy(), order=2)


def test_value_of_an_argument_used_as_a_constant_then_the_argument_written():
    # mg.value(x) of an argument is a read-only view of the caller's array, which is read-only only
    # while the function runs (locked): the pullback that reads it must keep the values it had, not
    # see the argument's later in-place writes (reverse mode read them: [2, 4] for [1, 2])
    def f(x):
        y = x @ mg.value(x)
        x *= 2.0
        return y

    def g(x):
        y = np.exp(x) * mg.value(x)
        x += 1.0
        return np.sum(y)

    x = np.array([1.0, 2.0])
    np.testing.assert_allclose(mg.grad(f)(x.copy()), x, rtol=1e-15)  # d/dx (x · c) = c, by hand
    np.testing.assert_allclose(mg.grad(g)(x.copy()), np.exp(x) * x, rtol=1e-15)
    np.testing.assert_allclose(mg.hessian(lambda x: f(x) ** 2)(x.copy()), 2 * np.outer(x, x), rtol=1e-15)
    for fn in (f, g):
        jv = [mg.jvp(fn, (x.copy(),), (e,))[1] for e in np.eye(2)]
        np.testing.assert_allclose(mg.grad(fn)(x.copy()), jv, rtol=1e-15)


@pytest.mark.parametrize("fn", [lambda a: np.pad(a, 1), lambda a: np.take(a, [0, 1], axis=1),
                                lambda a: np.gradient(a)[0], lambda a: np.insert(a, 1, 5.0, axis=0),
                                lambda a: np.repeat(a, 2, axis=0), lambda a: np.select([a > 0], [a], 0.0)],
                         ids=["pad", "take", "gradient", "insert", "repeat", "select"])
def test_results_have_numpys_memory_layout(fn):
    # the layout is seen (r.reshape(-1) is a view of a C-ordered r only, ravel(order='K') follows
    # memory): these rules' results had another one than NumPy's own
    x = np.array([[0.3, -0.7, 1.1], [0.52, 0.91, -0.33]])
    for a in (np.arange(24.0).reshape(2, 3, 4).transpose(2, 0, 1) * 0.1, np.asfortranarray(x), x, x.T):
        want = fn(a.copy(order="K"))
        for got in (mg.vjp(fn, a.copy(order="K"))[0], mg.jvp(fn, (a.copy(order="K"),), (np.ones_like(a),))[0]):
            assert got.strides == want.strides
            np.testing.assert_array_equal(got, want)


def test_a_write_through_a_view_that_numpys_layout_makes():
    # np.repeat's result is C-ordered, so reshape(-1) is a view and the write reaches it: the value
    # was 3.6 (the write lost) and the gradient that of another function
    def f(x):
        r = np.repeat(x, 2, axis=-1)
        v = r.reshape(-1)
        v[0] = 100.0
        return np.sum(r * r)

    x = np.array([[0.3, -0.7, 1.1], [0.52, 0.91, -0.33]])
    assert mg.value_and_grad(f)(x.copy())[0] == f(x.copy())
    want = 4 * x  # d/dx Σ 2x² over the repeats, by hand; x[0, 0] overwritten in its first repeat
    want[0, 0] = 2 * x[0, 0]
    np.testing.assert_allclose(mg.grad(f)(x.copy()), want, rtol=1e-14)
    check_grads(lambda a: f(a.copy()), x.copy(), order=2)
    X = mg.vjp(lambda a: np.meshgrid(a, a[:2])[0].ravel(order="K"), np.array([1.0, 2.0, 3.0]))[0]
    np.testing.assert_array_equal(X, [1.0, 2.0, 3.0, 1.0, 2.0, 3.0])


def test_median_keeps_its_arguments_layout():
    # np.median partitions a copy in the argument's layout: its result keeps the other axes' order
    # in memory (a Fortran-ordered argument's median along axis 0 is Fortran-ordered)
    x = np.arange(24.0).reshape(2, 3, 4) * 0.37 % 1.3
    for a in (x, x.transpose(2, 0, 1), np.asfortranarray(x)):
        for kw in ({"axis": 0}, {"axis": 1, "keepdims": True}, {"axis": (0, 2), "keepdims": True}):
            want = np.median(a.copy(order="K"), **kw)
            big = [d for d in range(want.ndim) if want.shape[d] > 1]  # (a size-1 axis' stride is any)
            for got in (mg.vjp(lambda v, kw=kw: np.median(v, **kw), a.copy(order="K"))[0],
                        mg.jvp(lambda v, kw=kw: np.median(v, **kw), (a.copy(order="K"),), (np.ones_like(a),))[0]):
                assert [got.strides[d] for d in big] == [want.strides[d] for d in big]
                np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("fn", [
    lambda a: np.unwrap(a), lambda a: np.delete(a, 0, axis=1), lambda a: np.tile(a[:1], (2, 1)),
    lambda a: np.choose(a > 0, [a, 2 * a]), lambda a: np.partition(a, 1, axis=-1), lambda a: np.vander(a[0], 3),
    lambda a: np.nanquantile(a, [0.2, 0.7], axis=0), lambda a: np.linalg.matrix_power(a[:, :3], 0) * 2.0,
    lambda a: a.astype(np.float64, order="F"), lambda a: mnp.array(a, order="F"), lambda a: mnp.array([a, a]),
    lambda a: mnp.asarray(a, order="F"), lambda a: mnp.asarray(a, order="C")],
    ids=["unwrap", "delete", "tile", "choose", "partition", "vander", "nanquantile", "matrix_power", "astype_F",
         "array_F", "array_list", "asarray_F", "asarray_C"])
def test_more_results_have_numpys_layout_and_views(fn):
    # (the layout tester) a write through r.reshape(-1) reaches r where NumPy's r is C-contiguous, and
    # mnp.asarray(x, order=...) copies where NumPy copies (it returned x, whose write reached the caller)
    def f(a):
        r = fn(a)
        v = r.reshape(-1)
        v[0] = 100.0
        return np.sum(r * np.arange(1.0, r.size + 1).reshape(r.shape)) + np.sum(a)

    x = np.array([[0.3, -0.7, 1.1, 0.2], [0.52, 0.91, -0.33, 0.4], [1.0, 2.0, 3.0, 4.0]])
    for a in (x, np.asfortranarray(x)):
        plain, traced = a.copy(order="K"), a.copy(order="K")
        assert mg.value_and_grad(f)(traced)[0] == pytest.approx(f(plain), rel=1e-14)
        np.testing.assert_array_equal(traced, plain)
        check_grads(lambda z: f(z.copy(order="K")), a.copy(order="K"))


_C6 = np.arange(1.0, 7.0).reshape(2, 3)
_ORDER_CASES = [
    ("exp_F", lambda a: np.exp(a * 0.1, order="F"), _C6), ("multiply_C", lambda a: np.multiply(a, 2.0, order="C"), _C6.T),
    ("add_F_dtype", lambda a: np.add(a, 1.0, order="F", dtype=np.float64), _C6),
    ("matmul_F", lambda a: np.matmul(a, a.T, order="F"), _C6),
    ("einsum_F", lambda a: np.einsum("ij,ij->ij", a, a, order="F"), _C6),
    ("einsum_A", lambda a: np.einsum("ij,kj->ik", a, a, order="A"), np.asfortranarray(_C6)),
    ("clip_F", lambda a: np.clip(a, 1, 3, order="F"), _C6), ("exp_A", lambda a: np.exp(a * 0.1, order="A"), _C6.T),
    ("asarray_strided_C", lambda a: mnp.asarray(a, order="C"), np.arange(1.0, 11.0)[::2]),
    ("astype_strided_C_nocopy", lambda a: a.astype(float, order="C", copy=False), np.arange(1.0, 11.0)[::2]),
    ("array_F_copy_None", lambda a: mnp.array(a, order="F", copy=None), _C6),
    ("array_C_copy_None", lambda a: mnp.array(a[:, ::-1], order="C", copy=None), _C6),
]


@pytest.mark.parametrize("func, a", [c[1:] for c in _ORDER_CASES], ids=[c[0] for c in _ORDER_CASES])
def test_order_keywords_lay_out_and_copy_as_numpy(func, a):
    # (the second layout tester) order= was dropped by ufuncs, matmul, einsum and clip; asarray,
    # astype and array copied, or not, otherwise than NumPy where the order asked for another layout
    def f(x):
        r = func(x)
        v = r.reshape(-1)
        v[0] = 100.0
        return np.sum(r * np.arange(1.0, r.size + 1).reshape(r.shape)) + np.sum(x)

    plain, traced = a.copy(order="K"), a.copy(order="K")
    assert mg.value_and_grad(f)(traced)[0] == pytest.approx(f(plain), rel=1e-13)
    np.testing.assert_array_equal(traced, plain)
    check_grads(lambda z: f(z.copy(order="K")), a.copy(order="K"))


def test_array_copy_false_refuses_as_numpy():
    for fn in (lambda a: mnp.asarray(a, order="F", copy=False), lambda a: mnp.array(a, order="F", copy=False)):
        with pytest.raises(ValueError, match="Unable to avoid copy"):
            mg.grad(lambda a, fn=fn: np.sum(fn(a)))(_C6.copy())


@pytest.mark.parametrize("func", [
    lambda s: mnp.asarray(s), lambda s: mnp.array(s, copy=None), lambda s: mnp.asarray(s, dtype=np.float64),
    lambda s: np.real_if_close(s * (1 + 0j))])
def test_array_of_a_scalar_is_a_new_0d_array(func):
    # NumPy's asarray/array/real_if_close of a scalar give a new 0-d array (asarray returned the
    # traced scalar itself; a write `r[...] = ...` then failed where NumPy's succeeds)
    def f(x):
        s = x[1] * x[0]  # a traced NumPy scalar
        r = func(s)
        assert np.ndim(r) == 0 and type(mg.value(r)) is np.ndarray
        r[...] = r * x[2]
        return np.sum(r * r) + s

    x = np.array([1.5, 2.0, 0.5])
    plain = func(np.float64(3.0))
    assert type(plain) is np.ndarray and plain.shape == ()
    assert mg.value_and_grad(f)(x.copy())[0] == pytest.approx(f(x.copy()), rel=1e-14)
    check_grads(f, x)


def test_array_of_a_scalar_copy_false_refuses_as_numpy():
    for fn in (lambda s: mnp.asarray(s, copy=False), lambda s: mnp.array(s, copy=False)):
        with pytest.raises(ValueError, match="Unable to avoid copy"):
            mg.grad(lambda a, fn=fn: np.sum(fn(a[0] * 2.0)))(np.ones(2))


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_power_at_leaves_numpys_bits(dtype):
    # np.power.at runs NumPy's one-element loop (libm's pow), whose last bit differs from the vector
    # loop's for exponents given as an array (2.0, 0.5); the derivative is the rounds' own
    rng = np.random.default_rng(3)
    x0 = rng.uniform(0.5, 1.5, 200).astype(dtype)
    e = rng.choice([2.0, 0.5, 3.0], 60).astype(dtype)
    idx = rng.choice(200, 60, replace=False)
    idx[-1] = idx[0]  # (one position twice: the rounds' path too)

    def f(x):
        np.power.at(x, idx, e)
        return np.sum(x * x)

    plain = x0.copy()
    want = f(plain)
    x = x0.copy()
    val, g = mg.value_and_grad(f)(x)
    np.testing.assert_array_equal(x.view(np.uint8), plain.view(np.uint8))
    assert val == want
    if dtype == np.float64:
        np.testing.assert_allclose(g, _fd_grad(f, x0.copy()), rtol=1e-6, atol=1e-8)


def test_a_0d_traced_array_is_not_iterable():
    # iter() of it raises as NumPy's does (the generator raised only when first advanced, so
    # np.iterable(x) was True and a program took the vector branch: 3 for 2 here)
    def f(x):
        return np.sum(x * (2.0 if np.iterable(x) else 3.0))

    x = np.array(1.5)
    assert mg.value_and_grad(f)(x) == (f(x), 3.0)  # d/dx 3x = 3, by hand
    assert mg.jvp(f, (x,), (np.array(1.0),)) == (4.5, 3.0)
    assert mg.grad(lambda v: np.sum(v * (2.0 if np.iterable(v) else 3.0)))(np.ones(2)).tolist() == [2.0, 2.0]


@pytest.mark.parametrize("how", ["y[0] = v", "y[:] = v", "y.fill(v)", "y[[0]] = v", "y[y > -1] = v",
                                 "np.put(y, [0], v)", "np.put(y, [0, 1], v)", "np.fill_diagonal(y.reshape(1, 3), v)",
                                 "y.flat[[0, 1]] = v", "np.copyto(y, v)", "np.place(y, y > 0, v)"])
@pytest.mark.parametrize("v", [2 + 3j, [2 + 3j], [1.0, 2 + 0j]], ids=["complex", "list", "mixed-list"])
def test_a_python_complex_written_into_a_real_buffer_raises_as_numpy(how, v):
    # (a ComplexWarning and the real part written, where NumPy raises float()'s TypeError)
    def f(x):
        y = x * 1.0
        exec(how, {"np": np, "y": y, "v": v})  # noqa: S102 (the write forms, one test)
        return np.sum(y * x)

    x = np.array([0.5, 1.5, 2.5])
    try:
        f(x.copy())
    except (TypeError, ValueError) as e:
        plain = type(e)
    else:
        pytest.skip("NumPy accepts this write")  # (a list of the wrong length: NumPy's own shape rules)
    with pytest.raises((TypeError, ValueError)) as info:
        mg.grad(f)(x.copy())
    assert not isinstance(info.value, mg.DifferentiationError)
    if plain is TypeError:
        assert "complex" in str(info.value)


def test_an_array_written_into_one_element_gets_numpys_error():
    # (the message said a traced value was passed to a NumPy keyword such as initial=)
    def f(x):
        y = x * 1.0
        y[0] = np.array([2.0])
        return np.sum(y)

    with pytest.raises(ValueError, match="setting an array element with a sequence") as info:
        mg.grad(f)(np.ones(3))
    assert not isinstance(info.value, mg.DifferentiationError)


@pytest.mark.parametrize("ufunc", [np.add, np.subtract, np.multiply, np.maximum])
def test_ufunc_at_takes_a_list_of_traced_values(ufunc):
    # (TracerEscapeError: np.put, np.place, __setitem__ took such lists, ufunc.at did not)
    def f(x):
        y = x * 0.5
        ufunc.at(y, [0, 1, 0], [x[2], x[1], x[0] * x[1]])
        return np.sum(np.sin(y) * y)

    x = np.array([1.0, 2.0, 3.3])
    val, g = mg.value_and_grad(f)(x.copy())
    assert val == f(x.copy())
    np.testing.assert_allclose(g, numerical_grad(f, (x.copy(),), (0,))[0], rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(mg.jvp(f, (x.copy(),), (np.ones(3),))[1], np.sum(g), rtol=1e-12)


@pytest.mark.parametrize("stmt", ["c[:2] = y[:2]", "c[::2] = y[:2]", "c[:] = y[1:4]", "np.copyto(c[:2], y[:2])",
                                  "c[::-1] = y[2::-1]", "c[1:] = y[:2]", "c[:2] = y[1:3] * 1.0"])
def test_an_overlapping_copy_of_floats_into_a_complex_view_is_differentiated_in_numpys_order(stmt):
    # NumPy casts element by element: a later element reads floats an earlier one overwrote
    # (c[:2] = y[:2] leaves y = [y0, 0, 0, 0, ...]); reverse mode took the copy as buffered
    f = _stmt_function(f"c = y.view(np.complex128)\n    {stmt}", "np.sum(y * np.arange(1.0, 7.0))")
    _as_numpy_and_differences(f, np.array([1.0, 0.5, -0.3, 0.8, 0.7, -1.1]))

def test_values_with_leading_unit_dimensions_are_written_as_numpy_drops_them():
    # (x[:2] = y[:1, None] and np.copyto(x[:2], 2 * x[None, 2:4]): a bare ValueError from the
    # reverse pass's unbroadcast, and from np.broadcast_to in np.copyto's rule)
    def f(x, y):
        x[[0, 2]] = y[:1, None]
        x[1:3] = x[1:3] + y[None, None, 1:]  # (a value of shape (1, 1, 2) into 2 elements: NumPy's setitem takes it)
        return np.sum(x ** 2)

    def g(x):
        np.copyto(x[:2], x[2:4][None, :] * 2.0)
        np.copyto(x[2:], x[None, :2], where=np.array([True, False]))
        return np.sum(x ** 3)

    x, y = np.array([1.0, 2.0, 3.0]), np.array([0.5, -1.5])
    assert mg.value_and_grad(f)(x.copy(), y.copy())[0] == f(x.copy(), y.copy())
    (gx, gy) = mg.grad(f, argnums=(0, 1))(x.copy(), y.copy())
    # by hand: x -> [y0, x1 + y1, y0 + y1], value y0^2 + (x1 + y1)^2 + (y0 + y1)^2
    np.testing.assert_allclose(gx, [0.0, 2 * (2.0 - 1.5), 0.0])
    np.testing.assert_allclose(gy, [2 * 0.5 + 2 * (0.5 - 1.5), 2 * (2.0 - 1.5) + 2 * (0.5 - 1.5)])
    x4 = np.array([1.0, 2.0, 3.0, 4.0])
    plain = x4.copy()
    want = g(plain)
    got = x4.copy()
    val, grad = mg.value_and_grad(g)(got)
    assert val == want and np.array_equal(got, plain)
    np.testing.assert_allclose(grad, _fd_grad(g, x4.copy()), rtol=1e-7)

    def h(x):  # (a where= mask gets no such allowance from NumPy)
        np.copyto(x[2:], x[:2], where=np.array([[True, False]]))
        return np.sum(x)

    with pytest.raises(ValueError, match="could not broadcast where mask"):
        h(x4.copy())
    with pytest.raises(ValueError, match="could not broadcast where mask"):
        mg.grad(h)(x4.copy())


@pytest.mark.parametrize("ufunc", [np.multiply, np.add, np.divide, np.power, np.subtract])
def test_ufunc_at_on_a_0d_complex_view(ufunc):
    # (NumPy's "multiple indices are not supported for 0d arrays" from mutagrad's rounds)
    def f(y):
        s = np.squeeze(y.view(np.complex128))
        ufunc.at(s, (), y[1] * 0.5 + 0.3j)
        return np.sum(y ** 2)

    y = np.array([1.0, 2.0])
    val, g = mg.value_and_grad(f)(y.copy())
    assert val == f(y.copy())
    np.testing.assert_allclose(g, _fd_grad(f, y.copy()), rtol=1e-7, atol=1e-9)


def test_ufunc_at_into_a_read_only_view_is_refused_even_where_the_program_catches_value_errors():
    # NumPy's ufunc.at writes into read-only views anyway; mutagrad's refusal was NumPy's read-only
    # ValueError, which `except ValueError` caught: another value and gradient than a plain call's
    def f(y):
        v = np.broadcast_to(y, (2,) + y.shape)
        try:
            np.add.at(v, ([1], [0]), 0.5)
        except ValueError:
            pass
        return np.sum(y * y)

    plain = np.array([1.0, 2.0])
    assert f(plain) == 6.25 and plain[0] == 1.5  # (what NumPy does)
    with pytest.raises(mg.MutationError, match=r"np\.add\.at into a read-only array"):
        mg.value_and_grad(f)(np.array([1.0, 2.0]))


def test_ufunc_at_casts_a_python_complex_in_a_list_of_traced_values_as_numpy():
    # (NumPy converts ufunc.at's values to an array: the complex entry is cast with a ComplexWarning;
    # mutagrad raised float()'s TypeError)
    def f(x):
        y = x * 1.0
        np.add.at(y, [0, 2], [x[1], 0.5 + 2j])
        return np.sum(y * x)

    x = np.array([0.5, 1.5, 2.5])
    with pytest.warns(np.exceptions.ComplexWarning):
        want = f(x.copy())
    with pytest.warns(np.exceptions.ComplexWarning):
        val, g = mg.value_and_grad(f)(x.copy())
    assert val == want
    np.testing.assert_allclose(g, [2.5, 3.5, 5.5])  # by hand: y = [x0 + x1, x1, x2 + 0.5]


@pytest.mark.parametrize("stmt", ["y = np.zeros(4); y[0] = [1.0, 2.0]", "y = x * 1.0; y[:] = [[2.0]]",
                                  "y = x * 1.0; y.fill([2.0])", "y = x * 1.0; y[:] = [1.0, [2.0, 3.0], 4, 5]",
                                  "y = mnp.zeros(4, np.int64); y[0] = np.array([2.0, 1.0])"])
def test_a_plain_value_numpy_cannot_write_gets_numpys_error(stmt):
    # (nothing traced in the value: TracerEscapeError named a traced value passed to NumPy; nested lists
    # deeper than the elements and fill with a list were accepted)
    def f(x):
        ns = {"np": np, "mnp": mnp, "x": x}
        exec(stmt, ns)  # noqa: S102 (the write forms, one test)
        return np.sum(ns["y"] * x)

    with pytest.raises(ValueError, match="setting an array element with a sequence") as info:
        mg.grad(f)(np.array([0.5, 1.5, 2.5, 0.7]))
    assert not isinstance(info.value, mg.DifferentiationError)


def test_a_write_through_as_strided_of_a_traced_buffer_names_as_strided():
    from numpy.lib.stride_tricks import as_strided

    def f(x):
        b = mnp.zeros(4)
        v = as_strided(b, shape=(2,), strides=(16,))
        v += x[:2]
        return np.sum(b * x)

    with pytest.raises(mg.WriteToPlainArrayError, match=r"as_strided.*mnp\.as_strided"):
        mg.grad(f)(np.ones(4))


def test_second_order_of_a_caught_write_into_a_read_only_broadcast_view():
    # (NumPy raises its read-only ValueError and the program goes on; nested differentiation raised
    # AliasingError about an inner differentiation's argument instead)
    def f(x):
        v = np.broadcast_to(x, (2, 2))
        try:
            v[0, 0] = 1.0
        except ValueError:
            pass
        return np.sum(x ** 3)

    x = np.array([1.0, 2.0])
    # (an error NumPy raises in a plain call too may be caught: the program goes on as a plain call does)
    np.testing.assert_array_equal(mg.grad(f)(x.copy()), 3 * x ** 2)  # by hand: d/dx sum(x^3)
    want = np.diag(6 * x)  # by hand: d2/dx2 sum(x^3)
    np.testing.assert_allclose(mg.hessian(f)(x.copy()), want)
    np.testing.assert_allclose(mg.jacobian(mg.grad(f), mode="rev")(x.copy()), want)
    np.testing.assert_allclose(mg.grad(lambda x: mg.jvp(f, (x,), (np.ones(2),))[1])(x.copy()), 6 * x)

    def g(x):  # uncaught: NumPy's read-only error in every mode
        np.broadcast_to(x, (2, 2))[0, 0] = 1.0
        return np.sum(x)

    for run in (mg.grad(g), mg.hessian(g)):
        with pytest.raises(ValueError, match="read-only"):
            run(x.copy())


@pytest.mark.parametrize("stmt", [
    "np.copyto(y[3:9].view(np.complex128), y[2:12].view(np.complex128)[::2], where=np.array([True, True, True]))",
    "y[3:9].view(np.complex128)[:] = y[2:12].view(np.complex128)[::2]",
    "y[1:5].view(np.complex128)[:] = y[2:6:2]"])
def test_copies_between_views_overlapping_in_part_follow_numpys_order(stmt):
    # complex views one float apart overlap in half elements: NumPy's element-by-element copy reads
    # what an earlier step wrote (the overlap was looked for at whole elements only: wrong values
    # with where=, a wrong reverse-mode gradient without)
    f = _stmt_function(stmt, "np.sum(y * np.arange(1.0, 13.0)) + np.sum(np.sin(y[::2]) * y[1::2])")
    _as_numpy_and_differences(f, np.arange(1.0, 13.0) * 0.3)

@pytest.mark.parametrize("stmt", ["x[1:3] -= x[3:5].reshape(1, 2)", "np.add(x[:2], x[None, 2:4], out=x[:2])",
                                  "x[[0, 2]] += x[None, None, 3:5]", "x *= x.reshape(1, 5)"])
def test_an_in_place_update_broadcast_beyond_its_output_gets_numpys_error(stmt):
    # (NumPy: "non-broadcastable output operand"; mutagrad wrote the values, dropping the unit dimensions)
    def f(x):
        exec(stmt, {"np": np, "x": x})  # noqa: S102 (the update forms, one test)
        return np.sum(x * x)

    with pytest.raises(ValueError, match="non-broadcastable output operand"):
        f(np.arange(5.0))
    for run in (mg.grad(f), lambda x: mg.jvp(f, (x,), (np.ones(5),))):
        x = np.arange(5.0)
        with pytest.raises(ValueError, match="non-broadcastable output operand"):
            run(x)
        assert np.array_equal(x, np.arange(5.0))


def test_a_nested_list_through_a_2d_mask_gets_numpys_type_error():
    def f(x):
        b = x * np.ones((2, 3))
        b[np.array([[True, False, True], [False, True, False]])] = [[x[0], x[1], x[2]]]
        return np.sum(b)

    with pytest.raises(TypeError, match="0 or 1-dimensional input"):
        mg.grad(f)(np.array([1.0, 2.0, 3.0]))


@pytest.mark.filterwarnings("ignore::numpy.exceptions.ComplexWarning")  # (the unsafe cast's, as NumPy's)
@pytest.mark.parametrize("stmt", ["y[2:8].view(np.complex128)[:] = y[1:3].view(np.complex128)",
                                  "np.copyto(y[0:5:2], y[5:7].view(np.complex128), casting='unsafe')",
                                  "y[0] = np.sum(np.abs(np.broadcast_to(y[5:7].view(np.complex128), (3,))))"])
def test_one_complex_element_at_an_odd_float_broadcast_over_memory_it_shares(stmt):
    # (a one-element source broadcast over a destination it overlaps in part: later steps read what
    # the first wrote, reverse mode took it as buffered; the cotangent of a broadcast complex view at
    # an odd float offset was refused)
    f = _stmt_function(stmt, "np.sum(y * np.arange(1.0, 9.0)) + np.sum(np.sin(y) * y)")
    _as_numpy_and_differences(f, np.array([0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8]))

@pytest.mark.parametrize("stmt", ["np.copyto(d, c[0:1])", "np.copyto(d[::-1], c[0:1])", "d[:] = np.broadcast_to(c[0:1], (4,))",
                                  "np.copyto(d, z[1:2], where=np.array([True, False, True, False]))"])
def test_copyto_of_one_element_over_a_complex_view_it_shares_in_part(stmt):
    # (np.copyto broadcast its source first: NumPy copies a source with opposite strides before the
    # copy, and reads a broadcast one again at every step; wrong values and gradients)
    f = _stmt_function(f"z = y.copy()\n    d = z[:8].view(complex)\n    c = z[1:9].view(complex)\n    {stmt}",
                 "np.sum(z * z * np.arange(1.0, 10.0))")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", np.exceptions.ComplexWarning)
        _as_numpy_and_differences(f, np.arange(1.0, 10.0), atol=1e-6)

@pytest.mark.parametrize("stmt", [
    "y[1:7].view(np.complex128)[...] = y[2:4].view(np.complex128)[0, ...]",
    "np.copyto(y[1:7].view(np.complex128), y[2:4].view(np.complex128)[0, ...])",
    "np.copyto(y[1:7].view(np.complex128), y[2:4].view(np.complex128)[0, ...], where=np.array([True, True, True]))",
    "np.copyto(y[1:7].view(np.complex128), y[2:4].view(np.complex128)[0, ...], where=np.array([True, False, True]))",
    "np.copyto(y[0:8].view(np.complex128), y[3:5].view(np.complex128)[::-1], where=np.array([True, False, True, True]))",
    "np.copyto(y[0:8].view(np.complex128), y[3:5].view(np.complex128), where=np.array([True, False, True, True]))",
    "np.copyto(y[1:7].view(np.complex128), y[2:3].reshape(()), where=np.array([True, False, True]))",
    "y[1:7].view(np.complex128)[...] = y[2:3].reshape(())",
    "y[1:7].view(np.complex128)[np.array([True, True, True])] = y[2:4].view(np.complex128)[0, ...]",
    "y[1:7].view(np.complex128)[np.array([True, False, True])] = y[2:4].view(np.complex128)[0, ...]",
    "y[1:7].view(np.complex128).fill(y[2:4].view(np.complex128)[0, ...])",
    "np.place(y[1:7].view(np.complex128), np.array([True, True, True]), y[2:4].view(np.complex128)[0, ...])",
])
def test_a_0d_or_reversed_complex_view_copied_over_memory_it_shares_in_part(stmt):
    # NumPy reads a 0-d source of the destination's dtype again at every step (it buffers one it
    # casts), and copies a source whose strides run opposite to the destination's first: reverse mode
    # took the 0-d one as read once (its gradient), and copyto's where= path read it once (values) and
    # broadcast a reversed one before looking at its strides (values)
    f = _stmt_function(stmt, "np.sum(y * np.arange(1.0, 9.0)) + np.sum(np.sin(y) * y)")
    _as_numpy_and_differences(f, np.arange(8.0) + 0.5)


@pytest.mark.parametrize("index", ["[..., [1, 0]]", "[..., [0]]", "[:, [0, 2]]", "[..., 1:]", "[[0, 2], ...]"])
def test_an_index_of_a_broadcast_complex_view_at_an_odd_float(index):
    # (the cotangent's positions carry the real and imaginary parts on a last axis, which `...` took
    # for the index's: parts swapped, or a bare IndexError)
    shape = "(3, 2)" if index.startswith("[...") else "(3, 3)"
    f = _stmt_function(f"v = np.broadcast_to(y[1:3].view(np.complex128), {shape}){index}",
                       "np.sum(np.real(v) * 1.5 + 5 * np.imag(v) ** 2) + np.sum(y * y)")
    _as_numpy_and_differences(f, np.array([0.1, 0.2, 0.3, 0.4, 0.5, 0.6]))


@pytest.mark.parametrize("ufunc,given", [(np.divmod, 0), (np.modf, 1), (np.frexp, 1)])
def test_an_output_left_to_numpy_has_the_shape_the_given_one_broadcasts_to(ufunc, given):
    # (np.divmod(x, c, out=(a, None)): the other output had the inputs' shape, not a's)
    def run(x, zeros):
        out = [None, None]
        out[given] = zeros((2, 3))
        args = (x * 7, 1.3) if ufunc is np.divmod else (x * 3,)
        return ufunc(*args, out=tuple(out))[1 - given]

    x = np.array([0.3, 0.58, 0.86])
    want = run(x.copy(), np.zeros)
    got = mg.vjp(lambda x: run(x, mnp.zeros), x.copy())[0]
    assert got.shape == want.shape == (2, 3) and np.array_equal(got, want)
    if want.dtype.kind == "f":
        g = mg.grad(lambda x: np.sum(run(x, mnp.zeros)))(x.copy())
        np.testing.assert_allclose(g, _fd_grad(lambda x: np.sum(run(x, np.zeros)), x.copy()), rtol=1e-6, atol=1e-8)


def test_copyto_reads_a_0d_source_once_takes_a_python_complex_and_where_none():
    # (with where=, a 0-d view the copy overwrote was read again; a Python complex under
    # casting="unsafe" was refused as a complex written into a real array; where=None wrote everything,
    # where NumPy's False mask writes nothing)
    def f(x):
        np.copyto(x.view(complex), x[1, ...], where=np.array([True, True]))
        return np.sum(x * np.arange(1.0, 5.0))

    _as_numpy_and_differences(f, np.array([1.0, 2.0, 3.0, 4.0]))

    def g(x):
        np.copyto(x, 1 + 2j, casting="unsafe")
        return np.sum(x)

    with pytest.warns(np.exceptions.ComplexWarning):
        assert mg.value_and_grad(g)(np.ones(3))[0] == 3.0

    def h(z, x):  # a differentiated Python complex too: its real part written, d/dz 3 Re z = 3
        b = x * 1.0
        np.copyto(b, z, casting="unsafe")
        return np.sum(b)

    with pytest.warns(np.exceptions.ComplexWarning):
        assert mg.value_and_grad(h)(1.5 + 2j, np.ones(3)) == (4.5, 3.0)

    def k(x):  # a traced Python complex is weak too: casting="safe" into complex64 (it was refused)
        d = mnp.zeros(3, np.complex64)
        np.copyto(d, complex(1.0, 2.0) * x[0], casting="safe")
        return np.sum(np.real(d))

    x = np.array([0.3, 1.7, -0.4])
    assert mg.value_and_grad(k)(x.copy())[0] == k(x.copy())
    np.testing.assert_array_equal(mg.grad(k)(x.copy()), [3.0, 0.0, 0.0])  # d/dx0 of 3 Re((1 + 2j) x0)
    x = np.arange(4.0)
    assert mg.value_and_grad(lambda x: (np.copyto(x, 5.0, where=None), np.sum(x))[1])(x)[0] == 6.0
    assert np.array_equal(x, np.arange(4.0))  # (NumPy: nothing written)


@pytest.mark.parametrize("call", [
    lambda y, b, w: np.copyto(b, 2.0, where=w), lambda y, b, w: np.negative(y, out=b, where=w),
    lambda y, b, w: b.__setitem__(0, np.sum(y, where=w)), lambda y, b, w: b.__setitem__(0, np.max(y, where=w, initial=0)),
    lambda y, b, w: b.__setitem__(0, np.mean(y, where=w)), lambda y, b, w: b.__setitem__(0, np.nansum(y, where=w)),
    lambda y, b, w: b.__setitem__(0, np.subtract.reduce(y, where=w, initial=0.0)),
], ids=["copyto", "negative(out=)", "sum", "max", "mean", "nansum", "subtract.reduce"])
def test_a_where_mask_of_another_dtype_than_bool_is_numpys_type_error(call):
    # NumPy casts where= under the 'safe' rule: a float or integer mask is refused, not taken as
    # nonzero (mutagrad wrote where it was nonzero); lists and Python numbers are converted
    def f(y, w):
        b = y * 1.0
        call(y, b, w)
        return np.sum(b)

    y = np.array([1.0, 2.0, 3.0])
    for w in (np.array([1.0, 0.0, 1.0]), np.array([1, 0, 1])):
        with pytest.raises(TypeError, match=r"Cannot cast array data from dtype\('(float|int)64'\) to dtype\('bool'\)"):
            f(y.copy(), w)
        with pytest.raises(TypeError, match="to dtype\\('bool'\\) according to the rule 'safe'"):
            mg.grad(f)(y.copy(), w)
        with pytest.raises(TypeError, match="to dtype\\('bool'\\) according to the rule 'safe'"):
            mg.jvp(lambda y, w=w: f(y, w), (y.copy(),), (np.ones(3),))
    for w in ([True, False, True], 1):
        want = f(y.copy(), w)
        assert mg.value_and_grad(f)(y.copy(), w)[0] == want
        check_grads(lambda y, w=w: f(y, w), y.copy(), order=1)


@pytest.mark.parametrize("where", [None, np.array([True, False, True])], ids=["all", "where"])
def test_a_broadcast_complex_view_at_an_odd_float_of_a_complex_argument(where):
    # the buffer is a float view of a complex argument: the cotangent of a complex view one float in
    # was refused in reverse mode (MutationError naming the grad line); the gradient is d/dRe - i d/dIm
    # (mutagrad's convention for a real function of a complex argument), by central differences
    def f(z):
        y = z.view(np.float64)
        src = np.broadcast_to(y[1:3].view(np.complex128), (3,))
        if where is None:
            y[3:9].view(np.complex128)[...] = src * 1.0
        else:
            np.copyto(y[3:9].view(np.complex128), y[1:3].view(np.complex128), where=where)
        return np.sum(np.abs(z) ** 2) + np.sum(np.abs(src) ** 2)

    z0 = np.array([1 + 2j, 3 + 4j, 5 + 6j, 7 + 8j, 9 + 10j])
    plain = z0.copy()
    want = f(plain)
    z = z0.copy()
    val, g = mg.value_and_grad(f)(z)
    assert val == want and np.array_equal(z, plain)
    h, fd = 1e-6, []
    for k in range(5):
        e = np.zeros(5, complex)
        e[k] = 1
        fd.append((f(z0 + h * e) - f(z0 - h * e)) / (2 * h) - 1j * (f(z0 + 1j * h * e) - f(z0 - 1j * h * e)) / (2 * h))
    np.testing.assert_allclose(g, fd, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("stmt", [
    "d = y[0:6].view(np.complex128)\n    np.copyto(d, d[..., 1], where=np.array([True, True, True]))",
    "d = y[1:7].view(np.complex128)\n    np.copyto(d, y[0:6].view(np.complex128)[..., 0], where=np.array([False, True, False]))",
])
def test_the_cotangent_of_a_complex_view_of_a_float_buffer_of_odd_length(stmt):
    # (its floats cannot all be seen as complex numbers: the reverse pass's flat view of the buffer
    # was a bare ValueError)
    f = _stmt_function(stmt, "np.sum(y * np.arange(1.0, 8.0))")
    _as_numpy_and_differences(f, np.arange(1.0, 8.0))


_DESTS_2D = {"Z": lambda z: z, "Z.T": lambda z: z.T, "Z[:, ::-1]": lambda z: z[:, ::-1],
             "Z[::-1, ::-1]": lambda z: z[::-1, ::-1], "Z[1:, ::-2]": lambda z: z[1:, ::-2]}
_SCALAR_WRITES = {
    "ellipsis": lambda d, v: d.__setitem__(Ellipsis, v), "copyto": lambda d, v: np.copyto(d, v),
    "copyto-where": lambda d, v: np.copyto(d, v, where=np.arange(d.size).reshape(d.shape) % 3 != 1),
    "flat": lambda d, v: d.flat.__setitem__(slice(None), v),
    "place": lambda d, v: np.place(d, np.arange(d.size).reshape(d.shape) % 3 != 1, v),
}


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("op", list(_SCALAR_WRITES))
@pytest.mark.parametrize("dest", list(_DESTS_2D))
def test_a_0d_complex_view_at_an_odd_float_written_over_a_2d_or_reversed_view(dest, op, dtype):
    # NumPy reads the raw scalar at every element, in the destination's memory order, where its
    # address suits its integer copies (a complex128 at an odd float64; a complex64 at an odd
    # float32 is copied first), and its element loops (x.flat, np.place) read it always: reverse
    # mode took it as read once for 2-D and reversed destinations, np.copyto(where=) wrote that
    cdt = np.complex128 if dtype == np.float64 else np.complex64
    w = np.linspace(-1.0, 2.0, 24)

    def f(x):
        y = x.astype(dtype)
        _SCALAR_WRITES[op](_DESTS_2D[dest](y.view(cdt).reshape(3, 4)), y[9:11].view(cdt).reshape(()))
        return np.sum(y.astype(np.float64) * w), y

    x0 = np.random.default_rng(3).standard_normal(24)
    (vm, ym), g = mg.value_and_grad(f, has_aux=True)(x0.copy())
    vp, yp = f(x0.copy())
    assert vm == vp and np.array_equal(np.asarray(ym), yp)
    if dtype == np.float64:
        np.testing.assert_allclose(g, _fd_grad(lambda x: f(x)[0], x0.copy()), rtol=1e-6, atol=1e-7)
        np.testing.assert_allclose(mg.jvp(lambda x: f(x)[0], (x0.copy(),), (w,))[1], g @ w, rtol=1e-12)


@pytest.mark.parametrize("stmt", [
    "y.view(np.complex128)[np.array([True, True, False, True])] = y[1:2].reshape(())",
    "y[0:4].view(np.complex128)[np.array([True, True])] = y[1:3].view(np.complex128)",
])
def test_a_boolean_mask_write_of_one_element_it_shares_in_part(stmt):
    # NumPy reads a one-element value again at every element of a boolean-mask write, cast or not,
    # 0-d or (1,): reverse mode took it as read once (values and jvp were NumPy's)
    f = _stmt_function(stmt, "np.sum(y * np.arange(1.0, 9.0))")
    _as_numpy_and_differences(f, np.array([0.5, 6.0, 7.0, 8.0, 1.5, 2.5, 3.5, 4.5]), atol=1e-5)


def test_a_boolean_mask_write_of_a_complex64_element_it_shares_in_part():
    # (a complex64 at an odd float32: read once by x[...] = v, which copies it; again at every
    # element by a boolean-mask write) the gradient is forward mode's columns, which follow NumPy's
    # values; float32 central differences are too coarse here
    def f(x):
        y = x.astype(np.float32)
        y[0:4].view(np.complex64)[np.array([True, True])] = y[1:3].view(np.complex64)[0, ...]
        return y.astype(np.float64)[:4] @ np.array([1.0, 2.0, 3.0, 4.0])

    x = np.array([5.0, 6.0, 7.0, 8.0])
    assert mg.value_and_grad(f)(x.copy())[0] == f(x.copy())
    np.testing.assert_array_equal(mg.grad(f)(x.copy()), [0.0, 1.0, 9.0, 0.0])  # y[:4] = [x1, x2, x2, x2], by hand
    np.testing.assert_array_equal(mg.jacobian(f, mode="fwd")(x.copy()), [0.0, 1.0, 9.0, 0.0])


def test_a_boolean_mask_of_another_shape_is_numpys_index_error_even_selecting_nothing():
    def f(x):
        x.reshape(1, 6)[np.array([False, False])] = 1.0
        return np.sum(x)

    for run in (mg.grad(f), lambda x: mg.jvp(f, (x,), (np.ones(6),))):
        with pytest.raises(IndexError, match="boolean index did not match indexed array along axis 0"):
            run(np.arange(6.0))


@pytest.mark.parametrize("value", ["np.ones((1, 1)) * x[0]", "np.broadcast_to(d[0:1, 0:1], (2, 3))"])
def test_a_boolean_mask_write_of_a_value_of_two_dimensions_is_numpys_type_error(value):
    # (NumPy takes a 0-d or 1-d value only; a (1, 1) one was written, a broadcast one a ValueError)
    ns = {"np": np}
    exec(f"def f(x):\n    d = x.reshape(2, 3) * 1.0\n    d[d > 1.5] = {value}\n    return np.sum(d)\n", ns)  # noqa: S102
    with pytest.raises(TypeError, match="requires a 0 or 1-dimensional input, input has 2 dimensions"):
        ns["f"](np.arange(6.0))
    with pytest.raises(TypeError, match="requires a 0 or 1-dimensional input, input has 2 dimensions"):
        mg.grad(ns["f"])(np.arange(6.0))


@pytest.mark.parametrize("shape,mask", [((6,), (0,)), ((2, 3), (0, 3)), ((2, 3), (2, 0)), ((2, 3), (0, 0))])
def test_an_empty_boolean_mask_numpy_takes_writes_nothing(shape, mask):
    # (NumPy takes a mask with a length-0 axis whatever the array's size there: it was refused)
    def f(x):
        y = x.reshape(shape) * 1.0
        y[np.zeros(mask, dtype=bool)] = 5.0
        return np.sum(y * y)

    x = np.arange(1.0, 7.0)
    assert mg.value_and_grad(f)(x.copy())[0] == f(x.copy()) == 91.0
    np.testing.assert_array_equal(mg.grad(f)(x.copy()), 2 * x)


@pytest.mark.parametrize("stmt", [
    "y.view(np.complex128)[(np.array([True, True, False, True]),)] = y[1, ...]",
    "y[(np.array([True, True, True, False, True, False, True, False]),)] = y[:5]",
    "y[1:-1].view(np.complex128)[np.array([False, True, True])] = y.view(np.complex128)[1:3]",
])
def test_boolean_mask_writes_of_values_sharing_memory_in_other_layouts(stmt):
    # a mask in a tuple, x[(m,)], took the general path (reverse mode: read once), and a value off
    # the destination's element grid was written element by element where NumPy copies it first
    f = _stmt_function(stmt, "np.sum(y * np.arange(1.0, 9.0))")
    _as_numpy_and_differences(f, np.array([0.5, 2.0, 3.0, 4.0, 1.5, 2.5, 3.5, 4.5]))


def test_a_boolean_mask_write_off_the_grid_with_runs_moves_each_run_as_numpy_does():
    # NumPy moves each run of consecutive True elements as one block (neither a copy of the whole
    # value first nor element by element): values and gradients were another function's
    f = _stmt_function("y[1:-1].view(np.complex128)[np.array([True, False, True, True])] = "
                       "y.view(np.complex128)[0:3]", "np.sum(y * np.arange(1.0, 11.0))")
    _as_numpy_and_differences(f, np.arange(1.0, 11.0))


@pytest.mark.parametrize("index", ["[0, np.array([False, False])]", "[np.array([False, False, False]), 0]",
                                   "[:, np.array([False, False])]", "[np.array([False]), ...]"])
def test_a_mask_beside_other_indices_is_checked_as_numpy_does(index):
    ns = {"np": np}
    exec(f"def f(y):\n    y.reshape(2, 3){index} = 5.0\n    return np.sum(y * y)\n", ns)  # noqa: S102
    with pytest.raises(IndexError) as plain:
        ns["f"](np.arange(6.0))
    for run in (mg.grad(ns["f"]), lambda y: mg.jvp(ns["f"], (y,), (np.ones(6),))):
        with pytest.raises(IndexError) as traced:
            run(np.arange(6.0))
        assert str(traced.value) == str(plain.value)


def _complex_written_into_its_own_float_view(x):
    y = x * (1 + 0.5j)
    fr = y.view(np.float64)
    m = np.arange(fr.size) % 3 == 0
    fr[m] = y[: int(m.sum())]  # (the real parts, ComplexWarning; 16-byte values into 8-byte slots)
    return np.sum(np.abs(y) ** 2)


@pytest.mark.filterwarnings("ignore::numpy.exceptions.ComplexWarning")
def test_a_boolean_mask_write_of_another_itemsize_from_its_own_memory():
    # element numbers cannot mirror this layout: NumPy's order is asked of replicas of the memory
    x = np.linspace(0.2, 1.4, 6)
    assert mg.value_and_grad(_complex_written_into_its_own_float_view)(x.copy())[0] == \
        _complex_written_into_its_own_float_view(x.copy())
    check_grads(_complex_written_into_its_own_float_view, x)


@pytest.mark.filterwarnings("ignore::numpy.exceptions.ComplexWarning")
def test_a_boolean_mask_write_in_an_order_mutagrad_cannot_tell_is_refused(monkeypatch):
    # where NumPy's result is neither a copy of the value, nor run by run, nor element by element
    # (none known on NumPy 2.4: the probe stands in for one), the write is refused, not guessed
    from mutagrad import core

    monkeypatch.setattr(core, "_mask_write_mode", lambda db, mask, vb: None)
    with pytest.raises(mg.MutationError, match=r"boolean-mask write at .*test_mutation\.py:\d+.*v\.copy\(\)"):
        mg.grad(_complex_written_into_its_own_float_view)(np.linspace(0.2, 1.4, 6))


OVERLAPPING_IN_ORDER = [  # (slow2: replayed one traced element at a time, 1000x a plain call; one gather now)
    ("flat shift", lambda b: b.flat.__setitem__(slice(1, None), b[:-1]), 16),
    ("flat shift back", lambda b: b.flat.__setitem__(slice(None, -1), b[1:]), 16),
    ("every other", lambda b: b.__setitem__(slice(None, None, 2), b[:b.size // 2]), 16),
    ("place", lambda b: np.place(b, np.arange(b.size) % 2 == 0, b[1:]), 17),
    ("reversed", lambda b: b.flat.__setitem__(slice(None), b[::-1]), 15),
    ("repeated positions", lambda b: b.flat.__setitem__([3, 1, 3, 0, 5], b[2:7]), 9),
    ("cycled values", lambda b: b.flat.__setitem__(slice(0, 12), b[4:7]), 12),
    ("through a transpose", lambda b: b.reshape(4, 4).T.flat.__setitem__(slice(2, 14), b[:12]), 16),
]


@pytest.mark.parametrize("name,op,n", OVERLAPPING_IN_ORDER, ids=[c[0] for c in OVERLAPPING_IN_ORDER])
def test_element_order_writes_of_an_overlapping_value(name, op, n):
    # NumPy's flat assignment and np.place read each value element when it is written: what a plain call
    # leaves, bit for bit; the derivative against central differences, both modes
    x0 = np.random.default_rng(3).standard_normal(n)
    w = np.arange(1.0, n + 1.0)

    def f(x):
        b = x * 1.0
        op(b)
        return np.sum(b * w), b

    (_, b), _ = mg.vjp(f, x0.copy())
    assert np.array_equal(b, f(x0.copy())[1])
    fd = np.array([(f(x0 + 1e-6 * e)[0] - f(x0 - 1e-6 * e)[0]) / 2e-6 for e in np.eye(n)])
    np.testing.assert_allclose(mg.grad(lambda x: f(x)[0])(x0.copy()), fd, atol=1e-7)
    np.testing.assert_allclose(mg.jacobian(lambda x: f(x)[0], mode="fwd")(x0.copy()), fd, atol=1e-7)


def test_flat_assignment_to_no_position_writes_nothing():
    # (regress45: b.flat[3:3] = b[1:5] crashed inside mutagrad, ValueError: min() arg is an empty sequence,
    # and with another array a shape mismatch); NumPy writes nothing. d/dx sum((x * 1)**2) = 2 x, by hand
    for write in (lambda b, x: b.flat.__setitem__(slice(3, 3), b[1:5]),
                  lambda b, x: b.flat.__setitem__(slice(3, 3), x[1:5]),
                  lambda b, x: b.flat.__setitem__([], b[1:5])):
        def f(x, write=write):
            b = x * 1.0
            write(b, x)
            return np.sum(b * b)

        np.testing.assert_array_equal(mg.grad(f)(np.arange(6.0)), 2 * np.arange(6.0))


@pytest.mark.parametrize("idx", [[1, 2], slice(1, 3), [1, 10], np.array([True, False, True])])
def test_flat_assignment_of_an_empty_value_writes_nothing(idx):
    # (regress129: y.flat[[1, 2]] = x[:0] raised ValueError from inside mutagrad, without the user's line); NumPy
    # writes nothing, even at positions out of range. The derivative against central differences of the plain call
    def f(x):
        y = x * 2.0
        y.flat[idx] = x[:0]
        return np.sum(y ** 2)

    x0 = np.array([0.5, 1.5, 2.5])
    fd = np.array([(f(x0 + 1e-6 * e) - f(x0 - 1e-6 * e)) / 2e-6 for e in np.eye(3)])
    np.testing.assert_allclose(mg.grad(f)(x0.copy()), fd, rtol=1e-7)
    np.testing.assert_allclose(mg.jvp(f, (x0.copy(),), (np.ones(3),))[1], fd.sum(), rtol=1e-7)
    with pytest.raises(ValueError, match="single item"):  # (one position: NumPy refuses an empty array)
        mg.grad(lambda x: (x * 1.0).flat.__setitem__(1, x[:0]))(x0.copy())
    for empty in ([], ()):  # (an empty list or tuple too; one of traced values is written)
        def g(x, empty=empty):
            y = x * 2.0
            y.flat[idx] = empty
            y.flat[[0, 1]] = [x[1], x[2] * 3]
            return np.sum(y ** 2)

        fd = np.array([(g(x0 + 1e-6 * e) - g(x0 - 1e-6 * e)) / 2e-6 for e in np.eye(3)])
        np.testing.assert_allclose(mg.grad(g)(x0.copy()), fd, rtol=1e-7)
        np.testing.assert_allclose(mg.jvp(g, (x0.copy(),), (np.ones(3),))[1], fd.sum(), rtol=1e-7)


@pytest.mark.parametrize("ufunc", [np.add, np.subtract, np.maximum, np.power, np.multiply])
def test_ufunc_at_of_complex_values_into_a_real_array_warns_once_at_the_users_line(ufunc):
    # (powergrid: np.add.at's ComplexWarning came from mutagrad's own call of ufunc.at, one per call of it:
    # a filter on the user's module missed it). NumPy warns once, at the line of the call; the derivative
    # is that of the real result, by central differences of the plain call
    def f(r):
        b = np.zeros_like(r) + 1.5
        ufunc.at(b, [0, 0, 1], r * (1 + 0.5j))
        return np.sum(b ** 2)

    r = np.array([1.1, 0.7, 1.3])

    def caught(call):
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            out = call()
        return out, [(x.category, x.filename, x.lineno) for x in w]

    want, plain = caught(lambda: f(r.copy()))
    assert len(plain) == 1 and plain[0][:2] == (np.exceptions.ComplexWarning, __file__)
    g, traced = caught(lambda: mg.grad(f)(r.copy()))
    assert traced == plain
    (value, tangent), traced = caught(lambda: mg.jvp(f, (r.copy(),), (np.ones(3),)))
    assert traced == plain and value == want
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", np.exceptions.ComplexWarning)
        np.testing.assert_allclose(g, _fd_grad(f, r.copy()), rtol=1e-7)
    np.testing.assert_allclose(tangent, np.sum(g), rtol=1e-12)


def test_in_place_picks_keep_their_partials_not_their_operands():
    # (traffic) np.maximum(x, c, out=x) and np.clip(x, lo, hi, out=x) kept x for their partials, so the write
    # saved a copy of it: a step's record now keeps its partial (an int8 code per element), not x; out of place,
    # a broadcast or a NaN, the operands, as before (regress50: a partial per call of a broadcast pick, or float
    # weights at a NaN, grew memory where a reference to a living operand costs nothing). By hand:
    # d/dx of the loop is the product over steps of [x > bound] (a tie half), checked with central differences
    import tracemalloc

    def relu_steps(x):
        for _ in range(6):
            np.maximum(x, 0.1, out=x)
            x -= 0.2
        return np.sum(x * x)

    def clip_steps(x):
        for _ in range(6):
            np.clip(x, -0.3, 0.4, out=x)
            x *= 1.1
        return np.sum(x ** 3)

    rng = np.random.default_rng(4)
    x0 = rng.standard_normal(40)
    for f in (relu_steps, clip_steps):
        np.testing.assert_allclose(mg.grad(f)(x0.copy()), _fd_grad(f, x0.copy()), rtol=1e-6, atol=1e-9)
        t = rng.standard_normal(40)
        np.testing.assert_allclose(mg.jvp(f, (x0.copy(),), (t,))[1], mg.grad(f)(x0.copy()) @ t, rtol=1e-12)
    # ties (half) and a NaN (np.maximum gives it all; the partials then by np.where): by hand
    x = np.array([0.1, 0.5, -1.0, np.nan])
    g = mg.grad(lambda x: np.nansum(np.maximum(x, 0.1, out=x) * np.array([1.0, 2.0, 3.0, 4.0])))(x.copy())
    np.testing.assert_array_equal(g, [0.5, 2.0, 0.0, 0.0])
    big = rng.standard_normal(10 ** 5)
    tracemalloc.start()
    mg.grad(relu_steps)(big.copy())
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 7 * big.nbytes  # (a saved copy per step: 13 arrays of x)
    rng = np.random.default_rng(7)
    a, b = rng.standard_normal(20000), rng.standard_normal(20000)
    b[0] = np.nan
    cases = (lambda a, n: sum(np.sum(np.maximum(a[:300, None] * (1.01 + 0.01 * k), b[None, 1:300])) for k in range(n)),
             lambda a, n: sum(np.nansum(np.fmax(a, b)) * (1.01 + 0.01 * k) for k in range(n)),
             lambda a, n: sum(np.sum(np.maximum(a, t)) for t in np.linspace(-1, 1, n)),
             lambda a, n: sum(np.sum(np.clip(a, -0.5 + 0.01 * k, 0.5)) for k in range(n)))  # (regress51)
    v = rng.standard_normal(20000)
    for f in cases:
        h = 1e-6  # (along a direction: central differences of the plain function)
        np.testing.assert_allclose(mg.grad(f)(a, 4) @ v, (f(a + h * v, 4) - f(a - h * v, 4)) / (2 * h), rtol=1e-6)
        peaks = []
        for n in (4, 40):  # (per call, at most an int8 partial and the records: not a float array of a's size)
            tracemalloc.start()
            mg.grad(f)(a, n)
            peaks.append(tracemalloc.get_traced_memory()[1])
            tracemalloc.stop()
        assert (peaks[1] - peaks[0]) / 36 < 0.25 * a.nbytes, peaks


def test_abs_in_place_keeps_its_sign_not_its_operand():
    # np.abs(x, out=x) saved a copy of x for its partial sign(x): it keeps the sign as int8 (out of place, x itself,
    # which lives on anyway or would be larger than a partial per call). By hand: d/dx sum_k |x - c_k| =
    # sum_k sign(x - c_k), 0 at a zero residual (-0.0 too); a NaN keeps the operand
    import tracemalloc

    def l1(x):
        return sum(np.sum(np.abs(x - c)) for c in (0.5, -1.0, 0.0, 2.0)) + np.sum(np.fabs(x) ** 3)

    x = np.array([0.5, -2.0, -0.0, 3.0, 1.0])
    want = sum(np.sign(x - c) for c in (0.5, -1.0, 0.0, 2.0)) + 3 * x * np.abs(x)
    np.testing.assert_array_equal(mg.grad(l1)(x), want)
    np.testing.assert_allclose(mg.jvp(l1, (x,), (np.ones(5),))[1], np.sum(want), rtol=1e-15)
    np.testing.assert_allclose(mg.hessian(lambda x: np.sum(np.abs(x) ** 3))(x[[1, 3]]), np.diag(6 * np.abs(x[[1, 3]])))
    y = np.array([1.0, np.nan, -2.0])
    np.testing.assert_array_equal(mg.grad(lambda y: np.nansum(np.abs(y) * 2.0))(y), [2.0, 0.0, -2.0])
    big = np.random.default_rng(5).standard_normal(10 ** 5)

    def folds(x):  # in place, np.abs(x, out=x): by hand, each step multiplies the derivative by sign(x) there
        for _ in range(10):
            np.abs(x, out=x)
            x -= 0.5
        return np.sum(x * x)

    x0 = np.random.default_rng(6).standard_normal(30)
    np.testing.assert_allclose(mg.grad(folds)(x0.copy()), _fd_grad(folds, x0.copy()), rtol=1e-6, atol=1e-9)
    tracemalloc.start()
    mg.grad(folds)(big.copy())
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 7 * big.nbytes  # (a saved copy of x per step: 14 arrays of x)


def test_a_write_that_saves_nothing_does_not_keep_its_array():
    # (regress51) `t = x * c; t += 0.5` in a loop: the write's record held t (for a swap it never makes, as it
    # saved nothing), so every step's t lived until the reverse pass; out of place, t died. By hand: d/dx of
    # sum_k sum(c_k x + 0.5) is sum_k c_k
    import tracemalloc

    def f(x, n):
        s = 0.0
        for k in range(n):
            t = x * (1.0 + 0.01 * k)
            t += 0.5
            t[:10] -= 0.25
            s = s + np.sum(t)
        return s

    x = np.random.default_rng(8).standard_normal(20000)
    np.testing.assert_allclose(mg.grad(f)(x, 5), np.full(x.size, sum(1.0 + 0.01 * k for k in range(5))), rtol=1e-13)
    peaks = []
    for n in (4, 40):
        tracemalloc.start()
        mg.grad(f)(x, n)
        peaks.append(tracemalloc.get_traced_memory()[1])
        tracemalloc.stop()
    assert (peaks[1] - peaks[0]) / 36 < 0.25 * x.nbytes, peaks  # (each step's t kept: one x a step)


def test_writing_through_overlapping_sliding_windows_names_them_and_a_copy():
    # (the stft tester) the refusal named broadcast rows only; windowing overlapping frames in place is refused
    # (the result depends on NumPy's write order) with a fix that runs: windowing a copy of the frames
    y0 = np.linspace(0.0, 1.0, 40)
    w = np.hanning(16)

    def in_place(y):
        v = np.lib.stride_tricks.sliding_window_view(y, 16, writeable=True)[::4]
        v *= w
        return np.sum(y)

    with pytest.raises(mg.MutationError, match=r"sliding_window_view.*\.copy\(\)"):
        mg.grad(in_place)(y0.copy())

    def on_a_copy(y):
        frames = np.lib.stride_tricks.sliding_window_view(y, 16)[::4].copy()
        frames *= w
        return np.sum(frames ** 2)

    fd = np.array([(on_a_copy(y0 + 1e-6 * e) - on_a_copy(y0 - 1e-6 * e)) / 2e-6 for e in np.eye(40)])
    np.testing.assert_allclose(mg.grad(on_a_copy)(y0), fd, rtol=1e-6, atol=1e-9)


def _read_only_with_writable_view():
    M = np.array([[1.0, 2.0], [3.0, 4.0]])
    Mw = M[:]  # (made before M is made read-only: it stays writable)
    M.flags.writeable = False
    return M, Mw


@pytest.mark.parametrize("how", ["view", "setflags", "ufunc.at"])
def test_a_read_only_constant_changed_after_an_operation_read_it_is_refused(how):
    # (copying tester) a read-only constant is not copied; a change through a writable view, setflags or
    # ufunc.at after `M @ x` read it made the gradient use the new values: [-180, -260] for [-18, -26]
    M, Mw = _read_only_with_writable_view()

    def f(x):
        y = M @ x
        if how == "view":
            Mw[...] *= 10
        elif how == "setflags":
            M.setflags(write=True)
            M[...] *= 10
            M.setflags(write=False)
        else:
            np.multiply.at(M, ([0, 0, 1, 1], [0, 1, 0, 1]), 10.0)  # (NumPy lets this one write into it)
        return np.sum(y ** 2)

    with pytest.raises(mg.MutationError, match=r"read-only array of shape \(2, 2\).*changed while it ran"):
        mg.grad(f)(np.array([1.0, -1.0]))


def test_an_unchanged_read_only_constant_is_read_uncopied_and_its_derivative_right():
    M, _ = _read_only_with_writable_view()

    def f(x):
        return np.sum((M @ x) ** 2)

    x = np.array([1.0, -1.0])
    np.testing.assert_allclose(mg.grad(f)(x), _central(f, x), rtol=1e-8)
    np.testing.assert_allclose(mg.grad(f)(x), 2 * M.T @ (M @ x), rtol=1e-15)  # (by hand)


def test_a_read_only_constant_changed_between_vjp_and_its_pullback_is_refused():
    # (regress115) the check ran when the function returned; the pullback, called later, read the new weights:
    # [60, -40, 100, 220] for 2 w x = [0.6, -0.8, 3.0, 8.8]
    M, Mw = _read_only_with_writable_view()
    x = np.array([0.3, -0.2])
    y, pullback = mg.vjp(lambda v: np.sum(M @ (v ** 2)), x)
    np.testing.assert_allclose(pullback(1.0)[0], 2 * x * M.sum(axis=0), rtol=1e-15)  # (unchanged: by hand)
    Mw[...] = 100.0
    with pytest.raises(mg.MutationError, match="read-only array of shape \\(2, 2\\).*before the pullback"):
        pullback(1.0)


def test_an_in_place_operator_on_a_plain_local_rebinds_it_in_code_without_source_too():
    # (raking) `lam = np.zeros(k); lam -= step` worked from a file and was refused from exec'd code, whose
    # statement could not be read: the bytecode's store tells a name from an attribute
    ns = {"np": np}
    exec("def f(x):\n    lam = np.zeros(2)\n    lam -= 2.0 * x\n    return np.sum(lam ** 2)\n"
         "def g(x):\n    class O:\n        pass\n    o = O()\n    o.v = np.zeros(2)\n    o.v -= x\n"
         "    return np.sum(o.v ** 2)\n", ns)
    x = np.array([1.0, 2.0])
    np.testing.assert_allclose(mg.grad(ns["f"])(x), _central(ns["f"], x), rtol=1e-8)  # (8 x, by hand)
    with pytest.raises(mg.WriteToPlainArrayError):  # (an attribute may be read from one object, stored into another)
        mg.grad(ns["g"])(x)

    def split(x):  # (regress118: read from the globals, stored into other locals: env's array stays plain zeros)
        env, loc = {"np": np, "x": x, "lam": np.zeros(2)}, {}
        exec("lam -= 2.0 * x", env, loc)
        return np.sum(env["lam"] ** 2)

    with pytest.raises(mg.WriteToPlainArrayError):
        mg.grad(split)(x)

    def one(x):  # (one namespace: read and stored there, rebound)
        env = {"np": np, "x": x, "lam": np.zeros(2)}
        exec("lam -= 2.0 * x", env)
        return np.sum(env["lam"] ** 2)

    np.testing.assert_allclose(mg.grad(one)(x), 8 * x, rtol=1e-15)  # (by hand: d sum(4 x^2) = 8 x)
