"""mutagrad quick start: the mutation cases other AD systems get wrong,
each gradient printed beside central finite differences of the same plain
NumPy function."""
import numpy as np

import mutagrad as mg
import mutagrad.numpy as mnp


def fd_grad(f, args, argnum, eps=1e-6):
    """Central finite differences on fresh plain copies (f may mutate them)."""
    x = np.asarray(args[argnum], dtype=float)
    g = np.zeros(x.shape)
    for k in range(x.size):
        def at(d):
            a = [np.array(v, dtype=float, copy=True) if isinstance(v, np.ndarray) else v for v in args]
            if isinstance(a[argnum], np.ndarray):
                a[argnum].reshape(-1)[k] += d
            else:
                a[argnum] = a[argnum] + d
            return f(*a)
        g.reshape(-1)[k] = (at(eps) - at(-eps)) / (2 * eps)
    return g if isinstance(args[argnum], np.ndarray) else float(g)


def show(title, f, args, argnums, names="xyz"):
    grads = mg.grad(f, argnums=argnums)(*[a.copy() if isinstance(a, np.ndarray) else a for a in args])
    ok = True
    print(title)
    for n, g in zip(argnums, grads):
        fd = fd_grad(f, args, n)
        ok &= np.allclose(g, fd, rtol=1e-6, atol=1e-8)
        print(f"  d/d{names[n]}: mutagrad {np.round(g, 6).tolist()}   finite differences {np.round(fd, 6).tolist()}")
    print("  ->", "agree" if ok else "DISAGREE")
    return ok


def overwritten_after_use(x):
    y = np.log(x)
    x.fill(0.0)           # overwrite x after log used it
    return np.sum(y + x)


def vector_filled_later(x, y, z):
    xy = x @ y
    y[:] = z              # the vector of the product is filled afterwards
    return np.sum(xy + y)


def element_from_square(x, y):
    x[0] = y ** 2         # one element set from a squared parameter
    return np.sum(x * y)


def scalar_into_buffer(p):
    b = mnp.zeros(3)      # a buffer that can hold traced values
    b[:] = p
    return np.sum(b.copy())


def main():
    ok = True
    ok &= show("y = log(x); x.fill(0); sum(y + x)", overwritten_after_use, [np.array([1.0, 2.0, 3.0])], (0,))
    ok &= show("xy = x @ y; y[:] = z; sum(xy + y)", vector_filled_later,
               [np.array([[1.0, 2.0], [3.0, 4.0]]), np.array([5.0, 6.0]), 7.0], (0, 1, 2))
    ok &= show("x[0] = y**2; sum(x * y)", element_from_square, [np.array([1.0, 2.0, 3.0]), 4.0], (0, 1))
    ok &= show("b = mnp.zeros(3); b[:] = p; sum(b.copy())", scalar_into_buffer, [1.0], (0,), names="p")
    print("all gradients agree with finite differences" if ok else "MISMATCH")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
