"""scipy.signal's linear time-invariant systems: the conversions ``tf2ss``, ``ss2tf``, ``zpk2ss``,
``ss2zpk``, the discretisation ``cont2discrete`` and the simulations ``dlsim`` and ``lsim``, written as
SciPy 1.17 writes them with NumPy operations on traced values, so their derivatives follow and their
values are SciPy's to rounding (its own call when nothing is traced).

* ``tf2ss``: the controller canonical form (SciPy's ``normalize`` first); ``ss2tf``: the characteristic
  polynomials ``np.poly(A)`` and ``np.poly(A - B C_k)`` (eigenvalues: simple ones for a derivative);
  ``zpk2ss`` and ``ss2zpk`` through ``zpk2tf`` and ``tf2zpk``.
* ``cont2discrete``: every method ('gbt', 'bilinear'/'tustin', 'euler'/'forward_diff', 'backward_diff',
  'zoh', 'foh', 'impulse') and every system form (a tf or zpk system goes through ``tf2ss``/``zpk2ss``
  and back, as SciPy's does), differentiated in the matrices (coefficients, zeros, poles, gain), in
  ``dt`` and in ``alpha`` (a zpk system's result comes from ``np.roots``, as SciPy's: a repeated zero, the
  bilinear transform's at -1, has no derivative there). The generalised bilinear transform solves with ``scipy.linalg.solve``; the
  holds take the matrix exponential of SciPy's augmented matrix (``scipy.linalg.expm``, differentiated).
* ``dlsim`` and ``lsim``: SciPy's recursion x[i+1] = A x[i] + B u[i] (``lsim``: the matrices of the
  exponential of its augmented matrix, computed once, with a zero- or first-order hold of the input),
  the states and outputs (C x + D u) collected step by step and stacked.
  Differentiated in the system, the input, the initial state, ``dt`` (through ``tout``) and ``lsim``'s
  times ``T``, of which SciPy reads ``T[0]`` and the step ``T[1] - T[0]``.
"""
from __future__ import annotations

import numpy as np

from ... import numpy as mnp
from ...core import Tracer, bottom
from .linalg import expm, solve
from .signal import _ss, _traced
from .signal_design import _as, _dtype, _normalize, tf2zpk, zpk2tf
from .sparse import _dense

COMPOSITES = tuple(f"scipy.signal.{name}" for name in (
    "tf2ss", "ss2tf", "zpk2ss", "ss2zpk", "cont2discrete", "dlsim", "lsim"))


def _array(v):
    """An operand as an array: traced (a list holding traced numbers too) or plain."""
    v = _dense(v)
    return v if isinstance(v, Tracer) else np.asarray(v)


# -- conversions --------------------------------------------------------------------------

def tf2ss(num, den):
    """``scipy.signal.tf2ss``: the controller canonical form of num / den, differentiated in the
    coefficients.

    >>> import numpy as np, mutagrad as mg
    >>> from mutagrad.scipy.signal import tf2ss
    >>> float(mg.grad(lambda p: tf2ss([1.0], [1.0, p])[0][0, 0])(2.0))  # A = [[-p]]
    -1.0
    """
    if not _traced(num, den):
        return _ss().tf2ss(num, den)
    num, den = _normalize(_dense(num), _dense(den))
    if np.ndim(num) == 1:
        num = num[None, :]
    rows, m = np.shape(num)
    k = np.shape(den)[0]
    if m > k:
        raise ValueError("Improper transfer function. `num` is longer than `den`.")
    if m == 0 or k == 0:  # (the null system)
        return tuple(np.array([], float) for _ in range(4))
    num = np.hstack((np.zeros((rows, k - m), dtype=_dtype(num)), num))
    d = num[:, 0][:, None]
    # (the constant matrices traced too, mnp's: the caller may write traced values into them, `B[:, 0] *= g`,
    # as into SciPy's new arrays: the sysid tester)
    if k == 1:
        return mnp.zeros((1, 1)), mnp.zeros((1, 1)), mnp.zeros((rows, 1)), d
    a = np.concatenate((-den[None, 1:], np.eye(k - 2, k - 1)))
    c = num[:, 1:] - np.outer(num[:, 0], den[1:])
    return a, mnp.eye(k - 1, 1), c, d


def _abcd(a=None, b=None, c=None, d=None):
    """SciPy's abcd_normalize: the four matrices 2-d, the missing (or empty) ones zeros of the shapes
    the others give, SciPy's errors for shapes that do not fit."""
    if a is None and b is None and c is None:
        raise ValueError("Dimension n is undefined for parameters A = B = C = None!")
    if b is None and d is None:
        raise ValueError("Dimension p is undefined for parameters B = D = None!")
    if c is None and d is None:
        raise ValueError("Dimension q is undefined for parameters C = D = None!")
    a, b, c, d = (np.atleast_2d(_array(m)) if m is not None else np.zeros((0, 0)) for m in (a, b, c, d))
    n = np.shape(a)[0] or np.shape(b)[0] or np.shape(c)[1] or 0
    p = np.shape(b)[1] or np.shape(d)[1] or 0
    q = np.shape(c)[0] or np.shape(d)[0] or 0
    a, b, c, d = (mnp.zeros(shape) if np.size(m) == 0 else m
                  for m, shape in ((a, (n, n)), (b, (n, p)), (c, (q, n)), (d, (q, p))))
    for name, m, shape in (("A", a, (n, n)), ("B", b, (n, p)), ("C", c, (q, n)), ("D", d, (q, p))):
        if np.shape(m) != shape:
            raise ValueError(f"Parameter {name} has shape {np.shape(m)} but should be ({shape[0]}, {shape[1]})!")
    return a, b, c, d


def ss2tf(A, B, C, D, input=0):
    """``scipy.signal.ss2tf``: the transfer function C (sI - A)⁻¹ B + D from the characteristic
    polynomials of A and of A - B C_k (eigenvalues: differentiable where they are simple).

    >>> import numpy as np, mutagrad as mg
    >>> from mutagrad.scipy.signal import ss2tf
    >>> float(mg.grad(lambda p: ss2tf([[-p]], [[1.0]], [[1.0]], [[0.0]])[1][1])(2.0))  # den = [1, p]
    1.0
    """
    if not _traced(A, B, C, D):
        return _ss().ss2tf(A, B, C, D, input=input)
    A, B, C, D = _abcd(A, B, C, D)
    nout, nin = np.shape(D)
    if input >= nin:
        raise ValueError("System does not have the input specified.")
    B, D = B[:, input:input + 1], D[:, input:input + 1]
    try:
        den = np.poly(A)
    except ValueError:  # (no states)
        den = 1
    if np.size(B) == 0 and np.size(C) == 0:
        num = np.ravel(D)
        if np.size(D) == 0 and np.size(A) == 0:
            den = []
        return num, den
    # (SciPy writes the rows into an array of this dtype: a complex row loses its imaginary part)
    dtype = (bottom(A)[:, 0] + bottom(B)[:, 0] + bottom(C)[0, :] + bottom(D) + 0.0).dtype
    rows = [np.poly(A - np.dot(B, np.atleast_2d(C[k, :]))) + (D[k] - 1) * den for k in range(nout)]
    return _as(np.stack(rows), dtype), den


def zpk2ss(z, p, k):
    """``scipy.signal.zpk2ss``: ``tf2ss(*zpk2tf(z, p, k))``.

    >>> import numpy as np, mutagrad as mg
    >>> from mutagrad.scipy.signal import zpk2ss
    >>> float(mg.grad(lambda p: zpk2ss([], [p], 1.0)[0][0, 0])(-2.0))  # A = [[p]]
    1.0
    """
    if not _traced(z, p, k):
        return _ss().zpk2ss(z, p, k)
    return tf2ss(*zpk2tf(z, p, k))


def ss2zpk(A, B, C, D, input=0):
    """``scipy.signal.ss2zpk``: ``tf2zpk(*ss2tf(A, B, C, D, input))``.

    >>> import numpy as np, mutagrad as mg
    >>> from mutagrad.scipy.signal import ss2zpk
    >>> float(mg.grad(lambda p: ss2zpk([[p]], [[1.0]], [[1.0]], [[1.0]])[1][0].real)(-2.0))  # the pole p
    1.0
    """
    if not _traced(A, B, C, D):
        return _ss().ss2zpk(A, B, C, D, input=input)
    return tf2zpk(*ss2tf(A, B, C, D, input=input))


# -- discretisation -----------------------------------------------------------------------

def _first_order_hold(adt, bdt):
    """[[A dt, B dt, 0], [0, 0, I], [0, 0, 0]]: the exponential of this (n + 2m square) matrix holds
    the state's map and the input's, an input interpolated linearly over the step (SciPy's for 'foh'
    and lsim's interp=True)."""
    n, m = np.shape(bdt)
    return np.block([[adt, bdt, np.zeros((n, m))],
                     [np.zeros((m, n + m)), np.eye(m)],
                     [np.zeros((m, n + 2 * m))]])


_GBT_ALPHA = {"bilinear": 0.5, "tustin": 0.5, "euler": 0.0, "forward_diff": 0.0, "backward_diff": 1.0}


def cont2discrete(system, dt, method="zoh", alpha=None):
    """``scipy.signal.cont2discrete``: every method and system form (a tf or zpk system converted to
    state space and back, as SciPy does), differentiated in the system, ``dt`` and ``alpha``.

    'zoh', 'foh' and 'impulse' take the matrix exponential of SciPy's augmented matrices
    (``scipy.linalg.expm``, differentiated); 'gbt' and its special cases solve with
    ``scipy.linalg.solve``. Returns the discrete system in the form given, then ``dt``.

    >>> import numpy as np, mutagrad as mg
    >>> from mutagrad.scipy.signal import cont2discrete
    >>> f = lambda dt: cont2discrete(([[-1.0]], [[1.0]], [[1.0]], [[0.0]]), dt)[0][0, 0]  # e^-dt
    >>> float(mg.grad(f)(0.0))
    -1.0
    """
    if not _traced(system, dt, alpha) or callable(getattr(system, "to_discrete", None)):  # (an lti: SciPy's)
        return _ss().cont2discrete(system, dt, method=method, alpha=alpha)
    if len(system) == 2:
        sysd = cont2discrete(tf2ss(*system), dt, method=method, alpha=alpha)
        return ss2tf(*sysd[:4]) + (dt,)
    if len(system) == 3:
        sysd = cont2discrete(zpk2ss(*system), dt, method=method, alpha=alpha)
        return ss2zpk(*sysd[:4]) + (dt,)
    if len(system) != 4:
        raise ValueError("First argument must either be a tuple of 2 (tf), 3 (zpk), or 4 (ss) arrays.")
    a, b, c, d = (_array(m) for m in system)
    if method == "gbt":
        if alpha is None:
            raise ValueError("Alpha parameter must be specified for the generalized bilinear transform (gbt) method")
        if bottom(alpha) < 0 or bottom(alpha) > 1:
            raise ValueError("Alpha parameter must be within the interval [0,1] for the gbt method")
    elif method in _GBT_ALPHA:
        method, alpha = "gbt", _GBT_ALPHA[method]
    n, m = np.shape(a)[0], np.shape(b)[1]
    if method == "gbt":
        ima = np.eye(n) - alpha * dt * a
        ad = solve(ima, np.eye(n) + (1.0 - alpha) * dt * a)
        bd = solve(ima, dt * b)
        cd = solve(np.transpose(ima), np.transpose(c)).T
        dd = d + alpha * np.dot(c, bd)
    elif method == "zoh":
        ms = expm(dt * np.vstack((np.hstack((a, b)), np.zeros((m, n + m)))))[:n, :]
        ad, bd, cd, dd = ms[:, :np.shape(a)[1]], ms[:, np.shape(a)[1]:], c, d
    elif method == "foh":
        ms = expm(_first_order_hold(a * dt, b * dt))
        ms11, ms12, ms13 = ms[:n, :n], ms[:n, n:n + m], ms[:n, n + m:]
        ad, bd, cd, dd = ms11, ms12 - ms13 + ms11 @ ms13, c, d + c @ ms13
    elif method == "impulse":
        if not np.allclose(bottom(d), 0):
            raise ValueError("Impulse method is only applicable to strictly proper systems")
        ad = expm(a * dt)
        bd, cd, dd = ad @ b * dt, c, c @ b * dt
    else:
        raise ValueError(f"Unknown transformation method '{method}'")
    return ad, bd, cd, dd, dt


# -- simulation ---------------------------------------------------------------------------

def _state_space(system, kind):
    """(A, B, C, D, whether it was given in state space) of a tuple system (without its dt), as SciPy's
    lti / dlti classes convert it."""
    if len(system) == 4:
        return (*_abcd(*system), True)
    if len(system) == 2:
        return (*_abcd(*tf2ss(*_normalize(_dense(system[0]), _dense(system[1])))), False)
    if len(system) == 3:
        z, p, k = system
        return (*_abcd(*zpk2ss(np.atleast_1d(_dense(z)), np.atleast_1d(_dense(p)), k)), False)
    raise ValueError(f"`system` needs to be an instance of `{kind}` or have 2, 3 or 4 arguments.")


def dlsim(system, u, t=None, x0=None):
    """``scipy.signal.dlsim``: the discrete system's recursion x[i+1] = A x[i] + B u[i], y[i] = C x[i] +
    D u[i], differentiated in the system (``(A, B, C, D, dt)``, ``(num, den, dt)`` or ``(z, p, k, dt)``),
    the input ``u`` and the initial state ``x0``. Returns ``(tout, yout, xout)`` for a state-space
    system, ``(tout, yout)`` otherwise, as SciPy does; with ``t``, the input is interpolated linearly
    at the steps (``make_interp_spline(t, u, k=1)``, differentiated).

    >>> import numpy as np, mutagrad as mg
    >>> from mutagrad.scipy.signal import dlsim
    >>> f = lambda a: dlsim(([[a]], [[1.0]], [[1.0]], [[0.0]], 1.0), np.ones(3))[1][-1, 0]  # 1 + a
    >>> float(mg.grad(f)(0.5))
    1.0
    """
    if not _traced(system, u, t, x0):
        return _ss().dlsim(system, u, t=t, x0=x0)
    if isinstance(system, _ss().lti):
        raise AttributeError("dlsim can only be used with discrete-time dlti systems.")  # noqa: TRY004 (SciPy's)
    if isinstance(system, _ss().dlti):
        dt, is_ss = system.dt, isinstance(system, _ss().StateSpace)
        system = system._as_ss()
        a, b, c, d = system.A, system.B, system.C, system.D
    else:
        *parts, dt = system
        a, b, c, d, is_ss = _state_space(parts, "dlti")
    u = np.atleast_1d(_dense(u))
    if np.ndim(u) == 1:
        u = u[:, None]
    if t is None:
        out_samples = np.shape(u)[0]
        stoptime = (out_samples - 1) * dt
    else:
        t = _dense(t)
        stoptime = t[-1]
        out_samples = int(np.floor(bottom(stoptime) / bottom(dt))) + 1
    tout = np.linspace(0.0, stoptime, num=out_samples)
    if t is None:
        u_dt = u
    else:
        from .interpolate import make_interp_spline

        u_dt = make_interp_spline(t, u, k=1)(tout)
    # (SciPy writes the states into a float64 array, so every step reads float64 values)
    x = np.zeros(np.shape(a)[1]) if x0 is None else np.broadcast_to(_as(_dense(x0), np.float64), (np.shape(a)[0],))
    states, outputs = [], []
    for i in range(out_samples):
        if i:
            x = _as(np.dot(a, x) + np.dot(b, u_dt[i - 1, :]), np.float64)
        states.append(x)
        outputs.append(_as(np.dot(c, x) + np.dot(d, u_dt[i, :]), np.float64))
    if not out_samples:
        xout, yout = np.zeros((0, np.shape(a)[0])), np.zeros((0, np.shape(c)[0]))
    else:
        xout, yout = np.stack(states), np.stack(outputs)
    return (tout, yout, xout) if is_ss else (tout, yout)


def lsim(system, U, T, X0=None, interp=True):
    """``scipy.signal.lsim``: the continuous system's response at the equally spaced times ``T``, by
    SciPy's recursion with the exponential of its augmented matrix (computed once; the input held
    between the samples, ``interp=False``, or interpolated linearly), differentiated in the system, the
    input ``U``, the initial state ``X0`` and the times (SciPy reads ``T[0]`` and the step ``T[1] - T[0]``).

    Times that are not equally spaced, which SciPy refuses, raise mutagrad's ``UnsupportedInputError``
    (a ValueError too). A traced ``U`` takes SciPy's path for an input, even where it is all zeros.

    >>> import numpy as np, mutagrad as mg
    >>> from mutagrad.scipy.signal import lsim
    >>> f = lambda a: lsim(([[a]], [[0.0]], [[1.0]], [[0.0]]), None, [0.0, 1.0], X0=[1.0])[1][-1]  # e^a
    >>> round(float(mg.grad(f)(0.0)), 12)
    1.0
    """
    if not _traced(system, U, T, X0):
        return _ss().lsim(system, U, T, X0=X0, interp=interp)
    if isinstance(system, _ss().lti):
        system = system._as_ss()
        a, b, c, d = (np.asarray(m) for m in (system.A, system.B, system.C, system.D))
    elif isinstance(system, _ss().dlti):
        raise AttributeError("lsim can only be used with continuous-time systems.")  # noqa: TRY004 (SciPy's)
    else:
        a, b, c, d, _ = _state_space(system, "lti")
    T = np.atleast_1d(_dense(T))
    if np.ndim(T) != 1:
        raise ValueError("T must be a rank-1 array.")
    n_states, n_inputs, n_steps = np.shape(a)[0], np.shape(b)[1], np.shape(T)[0]
    state_dtype = _dtype(a)
    x = np.zeros(n_states, state_dtype) if X0 is None else _as(np.broadcast_to(_dense(X0), (n_states,)), state_dtype)
    t0 = bottom(T[0])
    if t0 > 0:  # (from 0 to T[0] with no input)
        x = _as(np.dot(x, expm(np.transpose(a) * T[0])), state_dtype)
    elif t0 < 0:
        raise ValueError("Initial time must be nonnegative")
    if _traced(U):
        U = _dense(U)
        no_input = False
    else:
        no_input = U is None or (isinstance(U, int | float) and U == 0.0) or not np.any(U)
    if n_steps == 1:
        yout = np.squeeze(x[None, :] @ np.transpose(c))
        if not no_input:
            yout = yout + np.squeeze(U @ np.transpose(d))
        return T, yout, np.squeeze(x[None, :])
    dt = T[1] - T[0]
    if not np.allclose(np.diff(bottom(T)), bottom(dt)):
        _refuse_uneven(T)

    def run(step):
        states = [x]
        for i in range(1, n_steps):
            states.append(_as(step(i, states[-1]), state_dtype))
        return np.stack(states)

    if no_input:
        e = expm(np.transpose(a) * dt)
        xout = run(lambda i, xi: xi @ e)
        return T, np.squeeze(xout @ np.transpose(c)), np.squeeze(xout)
    U = np.atleast_1d(U)
    if np.ndim(U) == 1:
        U = U[:, None]
    if np.shape(U)[0] != n_steps:
        raise ValueError("U must have the same number of rows as elements in T.")
    if np.shape(U)[1] != n_inputs:
        raise ValueError("System does not define that many inputs.")
    if not interp:
        m = np.vstack([np.hstack([a * dt, b * dt]), np.zeros((n_inputs, n_states + n_inputs))])
        e = expm(np.transpose(m))
        ad, bd = e[:n_states, :n_states], e[n_states:, :n_states]
        xout = run(lambda i, xi: xi @ ad + U[i - 1] @ bd)
    else:
        e = expm(np.transpose(_first_order_hold(a * dt, b * dt)))
        ad, bd1 = e[:n_states, :n_states], e[n_states + n_inputs:, :n_states]
        bd0 = e[n_states:n_states + n_inputs, :n_states] - bd1
        xout = run(lambda i, xi: xi @ ad + U[i - 1] @ bd0 + U[i] @ bd1)
    return T, np.squeeze(xout @ np.transpose(c)) + np.squeeze(U @ np.transpose(d)), np.squeeze(xout)


def _refuse_uneven(T):
    from ...errors import UnsupportedInputError, user_line

    steps = np.diff(np.asarray(bottom(T)))
    raise UnsupportedInputError(
        f"scipy.signal.lsim at {user_line()}: Time steps are not equally spaced (from {steps.min():g} to "
        f"{steps.max():g}). SciPy's lsim refuses such times: it discretises the system once, for one step. "
        "Simulate on equally spaced times (np.linspace) and interpolate the output, or discretise each step "
        "yourself with mutagrad.scipy.signal.cont2discrete and run the recursion.")
