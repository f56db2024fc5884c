"""The mutation cases other AD systems reject or get wrong, with mutagrad's
gradient printed beside central finite differences of the same plain NumPy
function (docs/comparison.md says what JAX, PyTorch and autograd do with each).

Run:  python examples/seeds.py
The last line is the verdict; the exit code is 1 if any case disagrees.
"""
import sys

import numpy as np

import mutagrad as mg
import mutagrad.numpy as mnp


def overwritten_after_use(x):
    y = np.log(x)
    x.fill(0.0)                 # x is overwritten after log used it
    return np.sum(y + x)


def vector_filled_later(A, v, z):
    Av = A @ v
    v[:] = z                    # the product's vector is filled afterwards
    return np.sum(Av + v)


def element_from_square(x, y):
    x[0] = y**2                 # one element set from a squared parameter
    return np.sum(x * y)


def scalar_into_buffer(p):
    b = mnp.zeros(3)            # a buffer that can hold traced values
    b[:] = p                    # a scalar broadcast into it
    return np.sum(b * np.array([1.0, 2.0, 3.0]))


def filled_from_generator(x):
    b = mnp.fromiter((xi**2 for xi in x), dtype=float)   # a buffer filled from a generator
    x *= 3.0                                              # then the input is scaled in place
    return np.sum(b * x)


CASES = [
    ("y = log(x); x.fill(0); sum(y + x)", overwritten_after_use, (np.array([1.0, 2.0, 3.0]),)),
    ("Av = A @ v; v[:] = z; sum(Av + v)", vector_filled_later,
     (np.array([[1.0, 2.0], [3.0, 4.0]]), np.array([5.0, 6.0]), 7.0)),
    ("x[0] = y**2; sum(x * y)", element_from_square, (np.array([1.0, 2.0, 3.0]), 4.0)),
    ("b = mnp.zeros(3); b[:] = p; sum(b * [1, 2, 3])", scalar_into_buffer, (1.5,)),
    ("b = mnp.fromiter(xi**2 for xi in x); x *= 3; sum(b * x)", filled_from_generator,
     (np.array([0.5, -1.0, 2.0]),)),
]


def fresh(args):
    return [a.copy() if isinstance(a, np.ndarray) else a for a in args]


def finite_difference(f, args, n, eps=1e-6):
    """Central differences w.r.t. args[n], each evaluation on fresh copies (f mutates them)."""
    x = np.asarray(args[n], dtype=float)
    g = np.zeros(x.shape)
    for k in range(x.size):
        h = np.zeros(x.shape)
        h.flat[k] = eps
        plus, minus = fresh(args), fresh(args)
        plus[n], minus[n] = x + h, x - h
        if x.ndim == 0:
            plus[n], minus[n] = float(plus[n]), float(minus[n])
        g.flat[k] = (f(*plus) - f(*minus)) / (2 * eps)
    return g


def main():
    all_ok = True
    for title, f, args in CASES:
        argnums = tuple(range(len(args)))
        grads = mg.grad(f, argnums=argnums)(*fresh(args))
        print(title)
        for n, g in zip(argnums, grads):
            fd = finite_difference(f, args, n)
            ok = np.allclose(g, fd, rtol=1e-6, atol=1e-8)
            all_ok &= ok
            print(f"  d/d{f.__code__.co_varnames[n]:<2s} mutagrad {np.round(g, 6).tolist()!s:<26s}"
                  f" finite differences {np.round(fd, 6).tolist()!s:<26s} {'ok' if ok else 'MISMATCH'}")
    print("all seed gradients agree with finite differences" if all_ok else "MISMATCH in a seed case")
    return 0 if all_ok else 1


if __name__ == "__main__":
    sys.exit(main())
