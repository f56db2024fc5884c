"""Independent oracles the tests share: finite differences of plain functions."""
import numpy as np


def fd_hessian(f, x, h=1e-4):
    """Second central differences of plain ``f`` at the vector ``x``."""
    n = np.size(x)
    H = np.empty((n, n))
    E = np.eye(n) * h
    for i in range(n):
        for j in range(n):
            H[i, j] = (f(x + E[i] + E[j]) - f(x + E[i] - E[j]) - f(x - E[i] + E[j]) + f(x - E[i] - E[j])) / (4 * h * h)
    return H

