"""Property-based fuzzer for in-place NumPy code (issue 3, item 9(b)).

A seeded generator writes random straight-line NumPy programs as SOURCE TEXT
(so a failure prints a program anyone can rerun): reads (smooth elementwise
math, reductions, products, indexing), views (slices with negative steps,
``.T``, reshape, ``swapaxes``, views of views, ``.real`` of a complex buffer),
every write form of issue 3 item 1, overlapping writes, writes into the
arguments and into ``mnp.zeros`` / ``np.zeros_like`` buffers, and values
captured before they are overwritten. Each program returns a scalar and runs
in plain NumPy.

Every program is checked against oracles that never come from mutagrad:

1. ``mg.grad`` against finite differences (4-point stencil) of the same
   program run on fresh plain copies of the arguments;
2. ``mg.jvp`` with a random tangent against the directional finite difference
   and against ``<grad, v>`` (dot-product identity);
3. the arguments' contents after ``mg.grad`` and after ``mg.jvp`` against a
   plain call (bitwise);
   with ``--nested``, also Hessian-vector products (forward over reverse and reverse
   over reverse) against finite differences of mutagrad's gradient, against each
   other, and a third derivative (forward over forward over reverse) against finite
   differences of the Hessian-vector product: there a DifferentiationError is a
   failure (the first order passed);
4. an explicit ``mg.DifferentiationError`` is recorded as "raised", never a
   failure; any other exception or mismatch is a failure.

Smoothness is built in: only smooth functions on safe domains, masks and
indices are literals, and ``sort``/``max``/``clip`` act on values separated by
literal offsets far larger than the finite-difference steps.

Command line::

    python -m tests.fuzz_programs --count 10000 --seed 0

prints a summary and every distinct failing program, minimised (statements
dropped while the same failure persists); exit code 1 on any failure.
"""
from __future__ import annotations

import argparse
import re
import sys
import time
import traceback
import warnings
from dataclasses import dataclass, field

import numpy as np

import mutagrad as mg
import mutagrad.numpy as mnp

# Statement kinds that trigger known core bugs. The CI test (tests/test_fuzz.py)
# does not generate them; the core developer empties this set as the bugs are
# fixed. The command line generates every kind unless --exclude-known is given.
# A kind is ``base`` or ``base+flag`` (flags: overlap, bcast, plain; see Generator.variant).
KNOWN_CORE_BUGS: frozenset[str] = frozenset()

# Statement kinds NumPy itself refuses before mutagrad is asked: a plain
# array's C method rejects a traced ``out=`` with TypeError ("output must be
# an array"). Not generated: there is no hook to turn this into a
# DifferentiationError, and no value is ever silently wrong.
NUMPY_REFUSES: frozenset[str] = frozenset({"cumsum_out_method+plain"})

ARG_SHAPES = [(3,), (4,), (2, 3), (3, 3), (3, 3), (6,), (3, 2)]
BOUND = 1e3          # every intermediate value stays below this (else the statement is rejected)
SETTLED_RTOL = 1e-5  # agreement asked of two refined finite differences (and of mutagrad with them)
FD_STEP = 1e-3       # 4-point stencil: error ~ h^4 f^(5) + eps |f| / h
RTOL = 1e-6          # |mutagrad - FD| <= RTOL * max(1, max |FD|)
DOT_RTOL = 1e-9      # <w, J v> (forward) vs <J^T w, v> (reverse)

UNARY = [
    "np.sin({0})", "np.cos({0})", "np.tanh({0})", "np.exp(np.tanh({0}))", "({0} / (2 + {0}**2))",
    "np.sqrt(1 + {0}**2)", "np.log1p({0}**2)", "np.arctan({0})", "(0.7 * {0})", "(-{0})",
    "np.square({0})", "({0} ** 2)", "np.expm1(np.sin({0}))", "np.sinh(np.tanh({0}))",
    "np.cbrt(2 + np.tanh({0}))", "np.power(1.5 + np.sin({0}), 1.3)",
]
BINARY = [
    "({0} + {1})", "({0} - {1})", "({0} * {1})", "({0} / (2 + {1}**2))", "np.arctan2({0}, 2 + {1}**2)",
    "np.hypot({0}, 1 + {1}**2)", "np.add({0}, {1})", "np.multiply({0}, {1})", "np.subtract({0}, {1})",
]
UNARY_UFUNCS = ["np.sin", "np.cos", "np.tanh", "np.arctan", "np.negative", "np.square"]
BINARY_UFUNCS = ["np.add", "np.subtract", "np.multiply"]

# Kinds, by family, with their sampling weights.
READ_KINDS = {
    "elementwise": 6, "reduce": 3, "reduce_max": 1, "cumsum": 1, "matmul": 2, "shape_read": 1,
    "index_int_read": 2, "index_bool_read": 1, "sort_read": 1, "join": 1,
}
VIEW_KINDS = {
    "view_slice": 4, "view_T": 2, "view_reshape": 2, "view_expand": 1, "view_real": 1,
}
BUFFER_KINDS = {"buffer": 3, "const": 1}
WRITE_KINDS = {
    "set_basic": 5, "set_int": 3, "set_bool": 2, "set_flat": 2, "copyto": 2, "copyto_where": 2,
    "iadd": 2, "isub": 1, "imul": 2, "idiv": 1, "ipow": 1, "imatmul": 1, "aug_index": 3,
    "ufunc_out": 2, "ufunc_where": 2, "reduce_out": 2, "cumsum_out": 1, "clip_out": 1,
    "matmul_out": 1, "ufunc_at": 2, "reduce_out_method": 1, "cumsum_out_method": 1,
    "ufunc_reduce_out": 1, "sort_inplace": 1, "partition_inplace": 1, "fill_diagonal": 1, "put": 1, "place": 1,
    "putmask": 1, "put_along_axis": 1, "fill": 1, "overlap": 4, "const_write": 1,
}
OTHER_KINDS = {"term": 1}
GENERIC_KINDS = {"term", "elementwise", "buffer"}   # ignored when grouping failures
ALL_KINDS = {**READ_KINDS, **VIEW_KINDS, **BUFFER_KINDS, **WRITE_KINDS, **OTHER_KINDS}

_NAME = re.compile(r"\b[abcvz]\d+\b")


def lit(a):
    """Source literal of a small array (floats rounded for readability)."""
    a = np.asarray(a)
    if a.dtype == bool or a.dtype.kind == "i":
        return f"np.array({a.tolist()!r})"
    return f"np.array({np.round(a, 2).tolist()!r})"


def shape_lit(s):
    return repr(tuple(int(n) for n in s))


@dataclass
class Program:
    """A generated program: its plain arguments and its statements (kind, code)."""

    args: list
    units: list
    seed: tuple = ()

    def source(self):
        params = ", ".join(f"a{i}" for i in range(len(self.args)))
        lines = [f"def f({params}):", "    out = 0.0"]
        for _, code in self.units:
            lines += ["    " + ln for ln in code.splitlines()]
        lines.append("    return out")
        return "\n".join(lines) + "\n"

    def script(self):
        """A standalone reproduction: the program, its arguments and the check."""
        args = ", ".join(f"np.array({a.tolist()!r})" for a in self.args)
        return (
            "import numpy as np\nimport mutagrad as mg\nimport mutagrad.numpy as mnp\n\n"
            + self.source()
            + f"\nargs = [{args}]\n"
            + "# from tests.fuzz_programs import check; print(check(f, args))\n"
        )

    def kinds(self):
        return {k for k, _ in self.units}

    def function(self):
        return compile_source(self.source())


def compile_source(src):
    ns = {"np": np, "mnp": mnp, "mg": mg}  # generated programs never use mg; tests plant bugs with it
    exec(compile(src, "<fuzz program>", "exec"), ns)
    return ns["f"]


class Generator:
    """Builds one program statement by statement, running each on plain
    arrays as it goes: a statement that raises, warns, or leaves a value
    outside (-BOUND, BOUND) is dropped, so every program runs in plain NumPy."""

    def __init__(self, rng, exclude=frozenset()):
        self.rng = rng
        self.exclude = frozenset(exclude) | NUMPY_REFUSES
        nargs = int(rng.integers(1, 4))
        self.args = [
            rng.uniform(-1.5, 1.5, ARG_SHAPES[rng.integers(len(ARG_SHAPES))]) for _ in range(nargs)
        ]
        self.units = []
        self.traced = {f"a{i}": True for i in range(nargs)}
        self.counter = 0
        self._reset()

    # -- running --------------------------------------------------------
    def _reset(self):
        self.ns = {"np": np, "mnp": mnp, "out": 0.0}
        for i, a in enumerate(self.args):
            self.ns[f"a{i}"] = a.copy()
        for _, code in self.units:
            self._exec(code)

    def _exec(self, code):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            with np.errstate(all="raise"):
                exec(code, self.ns)

    def _bounded(self):
        for k in self.names() + ["out"]:
            a = np.asarray(self.ns[k])
            if a.size and not (np.all(np.isfinite(a)) and np.max(np.abs(a)) <= (BOUND * 100 if k == "out" else BOUND)):
                return False
        return True

    def emit(self, kind, code, new=None, traced=None):
        """Run ``code``; keep it as a statement if it runs cleanly."""
        if excluded(kind, self.exclude):
            return False
        try:
            self._exec(code)
            ok = self._bounded()
        except Exception:
            ok = False
        if ok and new is not None and new not in self.ns:
            ok = False
        if not ok:
            if new is not None:
                self.ns.pop(new, None)
            self._reset()
            return False
        self.units.append((kind, code))
        if new is not None:
            self.traced[new] = traced if traced is not None else self.uses_traced(code)
        return True

    def uses_traced(self, code):
        return any(self.traced.get(n, False) for n in _NAME.findall(code))

    def fresh(self, prefix="v"):
        self.counter += 1
        return f"{prefix}{self.counter}"

    def eval(self, code):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            with np.errstate(all="raise"):
                return eval(code, self.ns)

    # -- the pool of live variables -------------------------------------
    def names(self):
        return [k for k in self.ns if _NAME.fullmatch(k)]

    def real_vars(self, target=None, min_ndim=0):
        out = []
        for k in self.names():
            v = self.ns[k]
            if np.iscomplexobj(v) or np.ndim(v) < min_ndim or np.size(v) == 0:
                continue
            if target is not None and not _broadcasts(np.shape(v), target):
                continue
            out.append(k)
        return out

    def dests(self, pred=lambda v: True):
        out = []
        for k in self.names():
            v = self.ns[k]
            if (isinstance(v, np.ndarray) and self.traced.get(k) and v.dtype == np.float64 and v.ndim >= 1
                    and v.size and v.flags.writeable and pred(v)):
                out.append(k)
        return out

    def choice(self, seq):
        return seq[int(self.rng.integers(len(seq)))]

    def array_var(self):
        """A live real array with at least one dimension, or None."""
        cands = self.real_vars(min_ndim=1)
        return self.choice(cands) if cands else None

    def shape(self, name):
        return np.shape(self.ns[name])

    # -- expressions ----------------------------------------------------
    def expr(self, target=None, depth=0):
        """Source of a real expression broadcastable to ``target`` (any shape if None)."""
        rng = self.rng
        cands = self.real_vars(target)
        if target is not None and (not cands or rng.random() < 0.2):
            return self.pick(target)
        if not cands:
            return "0.5"
        e = self.choice(cands)
        r = rng.random()
        if r < 0.45:
            e = self.choice(UNARY).format(e)
        elif r < 0.7 and depth < 2:
            other = self.expr(target if target is not None else self.shape(e), depth + 1)
            e = self.choice(BINARY).format(e, other)
        return e

    def pick(self, target):
        """An expression of exactly shape ``target`` made of elements of a live variable."""
        rng = self.rng
        cands = self.real_vars()
        if not cands or rng.random() < 0.1:
            return lit(rng.uniform(-1, 1, target)) if target != () else repr(round(float(rng.uniform(-1, 1)), 2))
        src = self.choice(cands)
        n = int(np.size(self.ns[src]))
        if target == ():
            if rng.random() < 0.4:
                return f"(0.3 * np.sum({src}))"
            return f"np.ravel({src})[{int(rng.integers(n))}]"
        idx = rng.integers(0, n, int(np.prod(target))).tolist()
        return f"np.ravel({src})[{idx!r}].reshape({shape_lit(target)})"

    def offsets(self, shape):
        """Literal offsets, pairwise >= 3 apart: adding them to values in (-1, 1) fixes every order."""
        n = int(np.prod(shape))
        return lit((self.rng.permutation(n) * 3.0 - 1.5 * (n - 1)).reshape(shape))

    def mask(self, shape):
        m = self.rng.random(shape) < 0.5
        flat = m.reshape(-1)
        flat[self.rng.integers(flat.size)] = True
        return m

    # -- indices --------------------------------------------------------
    def basic_index(self, shape):
        rng = self.rng
        parts = []
        for n in shape:
            r = rng.random()
            if r < 0.2:
                parts.append(str(int(rng.integers(-n, n))))
            elif r < 0.35:
                parts.append(":")
            elif r < 0.55:
                parts.append(self.choice(["::-1", "::-2", f"{n - 1}::-1", "::2"]))
            else:
                a = int(rng.integers(0, n))
                b = int(rng.integers(a + 1, n + 1))
                parts.append(f"{a}:{b}" if rng.random() < 0.7 else f"{b - 1 - n}:{a - n - 1 if a else ''}:-1")
        r = rng.random()
        if r < 0.2:
            k = int(rng.integers(1, len(parts) + 1))
            parts = ["..."] + parts[k:]
        elif r < 0.3:
            parts.insert(int(rng.integers(len(parts) + 1)), "None")
        return ", ".join(parts)

    def int_index(self, shape):
        rng = self.rng
        k = int(rng.integers(2, 6))
        if len(shape) == 1 or rng.random() < 0.4:
            idx = rng.integers(-shape[0], shape[0], k).tolist()
            return f"{idx!r}" if len(shape) == 1 else f"{idx!r}, :"
        r = rng.random()
        if r < 0.4:
            return f":, {rng.integers(0, shape[1], k).tolist()!r}"
        if r < 0.8:
            return f"{rng.integers(0, shape[0], k).tolist()!r}, {rng.integers(0, shape[1], k).tolist()!r}"
        return f"{lit(rng.integers(0, shape[0], (2, 2)))}, {int(rng.integers(shape[1]))}"

    def bool_index(self, shape):
        r = self.rng.random()
        if len(shape) == 1 or r < 0.5:
            return lit(self.mask(shape))
        if r < 0.75:
            return f"{lit(self.mask(shape[:1]))}, :"
        return f"..., {lit(self.mask(shape[1:]))}"

    def region(self, name, idx):
        return np.shape(eval(f"_d[{idx}]", {"np": np, "_d": self.ns[name]}))

    # -- statement builders: reads --------------------------------------
    def new_var(self, kind, rhs, prefix="v", traced=None):
        name = self.fresh(prefix)
        return self.emit(kind, f"{name} = {rhs}", new=name, traced=traced)

    def k_elementwise(self):
        e = self.expr()
        if _NAME.fullmatch(e):
            e = self.choice(UNARY).format(e)
        return self.new_var("elementwise", e)

    def k_reduce(self):
        x = self.array_var()
        if x is None:
            return False
        nd = len(self.shape(x))
        ax = self.choice([None] + list(range(-nd, nd)))
        e = self.choice(["{0}", "np.tanh({0})", "np.cos({0})"]).format(x)
        form = self.choice([
            "np.sum({e}, axis={ax})", "np.mean({e}, axis={ax})", "np.prod({e}, axis={ax})",
            "np.sum({e}, axis={ax}, keepdims=True)", "({e}).sum(axis={ax})", "({e}).mean(axis={ax})",
        ])
        return self.new_var("reduce", form.format(e=e, ax=ax))

    def k_reduce_max(self):
        x = self.array_var()
        if x is None:
            return False
        nd = len(self.shape(x))
        ax = self.choice([None] + list(range(nd)))
        fn = self.choice(["np.max", "np.min", "np.amax"])
        return self.new_var("reduce_max", f"{fn}(np.tanh({x}) + {self.offsets(self.shape(x))}, axis={ax})")

    def k_cumsum(self):
        x = self.array_var()
        if x is None:
            return False
        ax = int(self.rng.integers(len(self.shape(x))))
        form = self.choice(["np.cumsum({0}, axis={1})", "np.cumprod(1 + 0.3 * np.tanh({0}), axis={1})",
                            "({0}).cumsum(axis={1})"])
        return self.new_var("cumsum", form.format(x, ax))

    def matmul_pair(self, square=False):
        """Two operand expressions whose product is defined, or None."""
        cands = [k for k in self.real_vars(min_ndim=1) if np.ndim(self.ns[k]) <= 2]
        pairs = []
        for x in cands:
            for tx in ("", ".T"):
                sx = self.shape(x)[::-1] if tx else self.shape(x)
                if tx and len(sx) < 2:
                    continue
                for y in cands:
                    for ty in ("", ".T"):
                        sy = self.shape(y)[::-1] if ty else self.shape(y)
                        if ty and len(sy) < 2:
                            continue
                        if sx[-1] == sy[0] and (not square or (len(sx) == 2 and len(sy) == 2 and sx[0] == sy[1])):
                            pairs.append((x + tx, y + ty))
        if not pairs:
            return None
        a, b = self.choice(pairs)
        if self.rng.random() < 0.4:
            a = f"np.tanh({a})"
        return a, b

    def k_matmul(self):
        p = self.matmul_pair()
        if p is None:
            return False
        form = self.choice(["({0} @ {1})", "np.dot({0}, {1})", "np.matmul({0}, {1})"])
        return self.new_var("matmul", form.format(*p))

    def k_shape_read(self):
        x = self.array_var()
        if x is None:
            return False
        e = f"np.sin({x})"
        s = self.shape(x)
        form = self.choice(["reshape", "transpose", "flip", "outer", "roll"])
        if form == "roll":
            shift = int(self.rng.integers(-4, 5))
            if self.rng.random() < 0.3:
                return self.new_var("shape_read", f"np.roll({e}, {shift})")
            return self.new_var("shape_read", f"np.roll({e}, {shift}, axis={int(self.rng.integers(len(s)))})")
        if form == "reshape":
            return self.new_var("shape_read", f"np.reshape({e}, {shape_lit(self.choice(_reshapes(s)))})")
        if form == "transpose":
            return self.new_var("shape_read", f"np.transpose({e})")
        if form == "flip":
            return self.new_var("shape_read", f"np.flip({e}, axis={int(self.rng.integers(len(s)))})")
        ones = [k for k in self.real_vars(min_ndim=1) if np.ndim(self.ns[k]) == 1]
        if not ones:
            return False
        return self.new_var("shape_read", f"np.outer({self.choice(ones)}, {self.choice(ones)})")

    def k_index_int_read(self):
        x = self.array_var()
        if x is None:
            return False
        return self.new_var("index_int_read", f"{x}[{self.int_index(self.shape(x))}]")

    def k_index_bool_read(self):
        x = self.array_var()
        if x is None:
            return False
        return self.new_var("index_bool_read", f"{x}[{self.bool_index(self.shape(x))}]")

    def k_sort_read(self):
        x = self.array_var()
        if x is None:
            return False
        ax = int(self.rng.integers(len(self.shape(x))))
        spread = f"np.tanh({x}) + {self.offsets(self.shape(x))}"
        form = self.choice(["np.sort({0}, axis={1})", "np.median({0}, axis={1})",
                            "np.quantile({0}, 0.3, axis={1})"])
        return self.new_var("sort_read", form.format(spread, ax))

    def k_join(self):
        x = self.array_var()
        if x is None:
            return False
        same = [k for k in self.real_vars(min_ndim=1) if self.shape(k) == self.shape(x)]
        y = self.choice(same)
        form = self.choice(["np.concatenate([{0}, {1}])", "np.stack([{0}, {1}])", "np.concatenate([{0}, np.cos({1})], axis=-1)"])
        return self.new_var("join", form.format(x, y))

    # -- views ------------------------------------------------------------
    def view_source(self):
        cands = [k for k in self.names() if isinstance(self.ns[k], np.ndarray) and self.ns[k].ndim >= 1
                 and not np.iscomplexobj(self.ns[k])]
        if not cands:
            return None
        # prefer views (views of views) and writable traced arrays
        views = [k for k in cands if self.ns[k].base is not None]
        if views and self.rng.random() < 0.4:
            return self.choice(views)
        return self.choice(cands)

    def k_view_slice(self):
        x = self.view_source()
        if x is None:
            return False
        return self.new_var("view_slice", f"{x}[{self.basic_index(self.shape(x))}]", traced=self.traced[x])

    def k_view_T(self):
        x = self.view_source()
        if x is None:
            return False
        nd = len(self.shape(x))
        forms = ["{0}.T", "np.transpose({0})"]
        if nd >= 2:
            forms += ["np.swapaxes({0}, 0, 1)", "np.moveaxis({0}, 0, -1)", "{0}.swapaxes(-1, -2)"]
        return self.new_var("view_T", self.choice(forms).format(x), traced=self.traced[x])

    def k_view_reshape(self):
        x = self.view_source()
        if x is None:
            return False
        s = self.shape(x)
        form = self.choice(["{0}.reshape({1})", "np.reshape({0}, {1})", "{0}.ravel()", "np.ravel({0})"])
        return self.new_var("view_reshape", form.format(x, shape_lit(self.choice(_reshapes(s)))),
                            traced=self.traced[x])

    def k_view_expand(self):
        x = self.view_source()
        if x is None:
            return False
        s = self.shape(x)
        forms = ["{0}[None]", "np.expand_dims({0}, -1)", "{0}[:, None]"]
        if 1 in s:
            forms.append("np.squeeze({0})")
        return self.new_var("view_expand", self.choice(forms).format(x), traced=self.traced[x])

    def k_view_real(self):
        """A complex buffer built from real values, and a view of its real or imaginary part."""
        z = [k for k in self.names() if np.iscomplexobj(self.ns[k])]
        if not z or self.rng.random() < 0.3:
            x = self.expr()
            if np.ndim(self.eval(x)) == 0:
                return False
            name = self.fresh("z")
            rhs = self.choice(["{0} * (1 + 0.5j)", "{0} + 1j * np.cos({0})", "({0}).astype(np.complex128)"])
            if not self.emit("view_real", f"{name} = {rhs.format(x)}", new=name):
                return False
            self.term(name)
            z = [name]
        zz = self.choice(z)
        return self.new_var("view_real", self.choice(["{0}.real", "{0}.imag", "np.real({0})"]).format(zz),
                            traced=self.traced[zz])

    # -- buffers ----------------------------------------------------------
    def k_buffer(self):
        rng = self.rng
        cands = self.real_vars(min_ndim=1)
        traced = [k for k in cands if self.traced[k]]
        r = rng.random()
        if r < 0.35 or not traced:
            s = ARG_SHAPES[rng.integers(len(ARG_SHAPES))]
            form = self.choice(["mnp.zeros({0})", "mnp.ones({0})", "mnp.full({0}, 0.5)"])
            return self.new_var("buffer", form.format(shape_lit(s)), prefix="b", traced=True)
        x = self.choice(traced)
        form = self.choice(["np.zeros_like({0})", "np.ones_like({0})", "{0}.copy()", "np.copy({0})",
                            "np.full_like({0}, 0.25)"])
        return self.new_var("buffer", form.format(x), prefix="b", traced=True)

    def k_const(self):
        s = ARG_SHAPES[self.rng.integers(len(ARG_SHAPES))]
        return self.new_var("const", lit(self.rng.uniform(-1, 1, s)), prefix="c", traced=False)

    # -- writes -----------------------------------------------------------
    def dest(self, pred=lambda v: True):
        d = self.dests(pred)
        if not d:
            return None
        views = [k for k in d if self.ns[k].base is not None]
        if views and self.rng.random() < 0.3:
            return self.choice(views)
        return self.choice(d)

    def variant(self, kind, dest, values, region=None, plain=False):
        """``kind`` with the flags that matter for known bugs: ``+overlap`` (a value shares memory
        with the destination), ``+bcast`` (a value is broadcast into ``region``), ``+plain`` (every
        value is an untraced constant while the destination is traced; only if ``plain``)."""
        flags = []
        vals = []
        for code in values:
            try:
                vals.append(self.eval(code))
            except Exception:
                vals.append(None)
        d = self.ns[dest]
        if any(isinstance(v, np.ndarray) and np.may_share_memory(v, d) for v in vals):
            flags.append("overlap")
        if region is not None and any(v is not None and np.shape(v) != tuple(region) for v in vals):
            flags.append("bcast")
        if plain and not any(self.uses_traced(c) for c in values):
            flags.append("plain")
        return "+".join([kind] + flags)

    def k_set(self, kind, index_fn):
        d = self.dest()
        if d is None:
            return False
        idx = index_fn(self.shape(d))
        try:
            reg = self.region(d, idx)
        except Exception:
            return False
        target = reg if self.rng.random() < 0.8 or not reg else reg[1:]
        e = self.expr(target)
        return self.emit(self.variant(kind, d, [e], reg), f"{d}[{idx}] = {e}")

    def k_set_basic(self):
        return self.k_set("set_basic", self.basic_index)

    def k_set_int(self):
        return self.k_set("set_int", self.int_index)

    def k_set_bool(self):
        return self.k_set("set_bool", self.bool_index)

    def k_set_flat(self):
        d = self.dest()
        if d is None:
            return False
        n = int(self.ns[d].size)
        rng = self.rng
        r = rng.random()
        if r < 0.35:
            idx, reg = str(int(rng.integers(n))), ()
        elif r < 0.7:
            idx = rng.integers(0, n, int(rng.integers(2, 5))).tolist()
            idx, reg = repr(idx), (len(idx),)
        else:
            a = int(rng.integers(0, n))
            b = int(rng.integers(a + 1, n + 1))
            idx, reg = f"{a}:{b}", (b - a,)
        e = self.expr(reg) if self.rng.random() < 0.8 else self.choice(self.names())
        return self.emit(self.variant("set_flat", d, [e]), f"{d}.flat[{idx}] = {e}")

    def k_copyto(self):
        d = self.dest()
        if d is None:
            return False
        e = self.expr(self.shape(d))
        return self.emit(self.variant("copyto", d, [e], self.shape(d)), f"np.copyto({d}, {e})")

    def k_copyto_where(self):
        d = self.dest()
        if d is None:
            return False
        s = self.shape(d)
        m = self.mask(s if self.rng.random() < 0.7 else s[-1:])
        e = self.expr(s)
        return self.emit(self.variant("copyto_where", d, [e], s), f"np.copyto({d}, {e}, where={lit(m)})")

    def k_aug(self, kind, op, wrap="{0}"):
        d = self.dest()
        if d is None:
            return False
        return self.emit(kind, f"{d} {op} {wrap.format(self.expr(self.shape(d)))}")

    def k_iadd(self):
        return self.k_aug("iadd", "+=")

    def k_isub(self):
        return self.k_aug("isub", "-=")

    def k_imul(self):
        return self.k_aug("imul", "*=", self.choice(["{0}", "np.cos({0})", "(1 + 0.5 * np.tanh({0}))"]))

    def k_idiv(self):
        return self.k_aug("idiv", "/=", self.choice(["(2 + {0}**2)", "(1.5 + np.cos({0}))"]))

    def k_ipow(self):
        d = self.dest()
        if d is None:
            return False
        r = self.rng.random()
        if r < 0.5:
            return self.emit("ipow", f"{d} **= {self.choice(['2', '3', '2.0'])}")
        if r < 0.75:
            # a positive base, then a traced exponent
            return self.emit("ipow", f"{d}[...] = 1.5 + np.sin({d})\n{d} **= (0.5 + 0.3 * np.tanh({self.expr(self.shape(d))}))")
        idx = self.basic_index(self.shape(d))
        return self.emit("ipow", f"{d}[{idx}] **= 2")

    def k_imatmul(self):
        d = self.dest(lambda v: v.ndim == 2 and v.shape[0] == v.shape[1])
        if d is None:
            return False
        n = self.shape(d)[0]
        sq = [k for k in self.real_vars() if self.shape(k) == (n, n)]
        rhs = self.choice(sq + [f"{d}", f"{d}.T"]) if sq else f"{d}.T"
        if self.rng.random() < 0.6:
            rhs = f"np.tanh({rhs})"
        return self.emit("imatmul", f"{d} @= {rhs}")

    def k_aug_index(self):
        d = self.dest()
        if d is None:
            return False
        s = self.shape(d)
        idx = self.choice([self.basic_index, self.int_index, self.bool_index])(s)
        try:
            reg = self.region(d, idx)
        except Exception:
            return False
        op, wrap = self.choice([("+=", "{0}"), ("-=", "{0}"), ("*=", "np.cos({0})"), ("/=", "(2 + {0}**2)")])
        e = wrap.format(self.expr(reg))
        return self.emit(self.variant("aug_index", d, [e], reg), f"{d}[{idx}] {op} {e}")

    def k_ufunc_out(self):
        d = self.dest()
        if d is None:
            return False
        s = self.shape(d)
        if self.rng.random() < 0.4:
            uf, e = self.choice(UNARY_UFUNCS), self.expr(s)
            return self.emit(self.variant("ufunc_out", d, [e], s, plain=True), f"{uf}({e}, out={d})")
        uf, e1, e2 = self.choice(BINARY_UFUNCS), self.expr(s), self.expr(s)
        form = self.choice(["{0}({1}, {2}, out={3})", "{0}({1}, {2}, {3})", "{0}({1}, {2}, out=({3},))"])
        return self.emit(self.variant("ufunc_out", d, [e1, e2], s, plain=True), form.format(uf, e1, e2, d))

    def k_ufunc_where(self):
        d = self.dest()
        if d is None:
            return False
        s = self.shape(d)
        m = lit(self.mask(s if self.rng.random() < 0.7 else s[-1:]))
        if self.rng.random() < 0.3:
            e = self.expr(s)
            return self.emit(self.variant("ufunc_where", d, [e], s), f"{self.choice(UNARY_UFUNCS)}({e}, out={d}, where={m})")
        uf, e1, e2 = self.choice(BINARY_UFUNCS), self.expr(s), self.expr(s)
        return self.emit(self.variant("ufunc_where", d, [e1, e2], s), f"{uf}({e1}, {e2}, out={d}, where={m})")

    def out_dest(self, shape):
        """A traced writable array of ``shape``, or a new buffer unit making one."""
        d = self.dests(lambda v: v.shape == shape)
        if d and self.rng.random() < 0.8:
            return self.choice(d)
        name = self.fresh("b")
        if not self.emit("buffer", f"{name} = mnp.zeros({shape_lit(shape)})", new=name, traced=True):
            return None
        return name

    def k_reduce_out(self):
        cands = [k for k in self.real_vars(min_ndim=2)] or self.real_vars(min_ndim=1)
        if not cands:
            return False
        x = self.choice(cands)
        s = self.shape(x)
        ax = int(self.rng.integers(len(s)))
        rs = s[:ax] + s[ax + 1:]
        if not rs:
            return False
        d = self.out_dest(rs)
        if d is None:
            return False
        r = self.rng.random()
        kind = "reduce_out"
        if r < 0.2:
            e = f"np.tanh({x}) + {self.offsets(s)}"
            code = self.choice(["np.max({0}, axis={1}, out={2})", "np.min({0}, axis={1}, out={2})",
                                "({0}).max(axis={1}, out={2})"]).format(e, ax, d)
        else:
            e = self.choice(["{0}", "np.sin({0})"]).format(x)
            code = self.choice(["np.sum({0}, axis={1}, out={2})", "np.mean({0}, axis={1}, out={2})",
                                "np.prod({0}, axis={1}, out={2})", "({0}).sum(axis={1}, out={2})",
                                "({0}).mean(axis={1}, out={2})", "({0}).prod(axis={1}, out={2})",
                                "np.add.reduce({0}, axis={1}, out={2})",
                                "np.multiply.reduce({0}, axis={1}, out={2})"]).format(e, ax, d)
        if ".reduce(" in code:
            kind = "ufunc_reduce_out"
        elif ").max(" in code or ").sum(" in code or ").mean(" in code or ").prod(" in code:
            kind = "reduce_out_method"
        return self.emit(self.variant(kind, d, [e], plain=True), code)

    k_reduce_out_method = k_reduce_out  # one builder makes both kinds

    def k_cumsum_out(self):
        d = self.dest()
        if d is None:
            return False
        s = self.shape(d)
        ax = int(self.rng.integers(len(s)))
        form = self.choice(["np.cumsum({0}, axis={1}, out={2})", "np.cumsum({2}, axis={1}, out={2})",
                            "np.cumprod(1 + 0.2 * np.tanh({0}), axis={1}, out={2})",
                            "({0}).cumsum(axis={1}, out={2})", "np.add.accumulate({0}, axis={1}, out={2})"])
        kind = "ufunc_reduce_out" if "accumulate" in form else "cumsum_out_method" if ").cumsum(" in form else "cumsum_out"
        e = self.expr(s)
        if np.shape(self.eval(e)) != s:  # NumPy skips its size check when out overlaps the input
            e = f"({e}) + np.zeros({shape_lit(s)})"
        return self.emit(self.variant(kind, d, [e], plain=True), form.format(e, ax, d))

    k_cumsum_out_method = k_cumsum_out

    def k_ufunc_reduce_out(self):
        return self.k_reduce_out() if self.rng.random() < 0.6 else self.k_cumsum_out()

    def k_clip_out(self):
        d = self.dest()
        if d is None:
            return False
        s = self.shape(d)
        offs = lit(self.rng.choice([-4.0, 0.0, 4.0], s))
        return self.emit("clip_out", f"np.clip(np.tanh({self.expr(s)}) + {offs}, -2.0, 2.0, out={d})")

    def k_matmul_out(self):
        p = self.matmul_pair()
        if p is None:
            return False
        s = np.shape(self.eval(f"np.matmul({p[0]}, {p[1]})"))
        if not s:
            return False
        d = self.out_dest(s)
        if d is None:
            return False
        fn = self.choice(["np.matmul", "np.dot"])
        return self.emit("matmul_out", f"{fn}({p[0]}, {p[1]}, out={d})")

    def k_ufunc_at(self):
        d = self.dest()
        if d is None:
            return False
        s = self.shape(d)
        rng = self.rng
        k = int(rng.integers(2, 6))
        if len(s) == 1 or rng.random() < 0.5:
            idx = rng.integers(-s[0], s[0], k).tolist()
            reg = (k,) + s[1:]
            idx = f"{idx!r}"
        else:
            idx = f"({rng.integers(0, s[0], k).tolist()!r}, {rng.integers(0, s[1], k).tolist()!r})"
            reg = (k,)
        e = self.expr(reg)
        if rng.random() < 0.6:
            code = f"np.{self.choice(['add', 'subtract'])}.at({d}, {idx}, {e})"
        else:
            e = f"1 + 0.5 * np.tanh({e})"
            code = f"np.multiply.at({d}, {idx}, {e})"
        return self.emit(self.variant("ufunc_at", d, [e]), code)

    def k_sort_inplace(self):
        d = self.dest()
        if d is None:
            return False
        s = self.shape(d)
        ax = self.choice(["", "axis=0", "axis=-1"])
        return self.emit("sort_inplace", f"{d}[...] = np.tanh({self.expr(s)}) + {self.offsets(s)}\n{d}.sort({ax})")

    def k_partition_inplace(self):
        d = self.dest()
        if d is None:
            return False
        s = self.shape(d)
        ax = self.choice([-1, 0])
        kth = int(self.rng.integers(0, s[ax]))
        return self.emit("partition_inplace",
                         f"{d}[...] = np.tanh({self.expr(s)}) + {self.offsets(s)}\n{d}.partition({kth}, axis={ax})")

    def k_fill_diagonal(self):
        d = self.dest(lambda v: v.ndim == 2)
        if d is None:
            return False
        n = min(self.shape(d))
        e = self.expr(self.choice([(), (n,)]))
        return self.emit(self.variant("fill_diagonal", d, [e]), f"np.fill_diagonal({d}, {e})")

    def k_put(self):
        d = self.dest()
        if d is None:
            return False
        n = int(self.ns[d].size)
        idx = self.rng.integers(-n, n, int(self.rng.integers(1, 5))).tolist()
        e = self.expr(self.choice([(len(idx),), ()]))
        return self.emit(self.variant("put", d, [e]), f"np.put({d}, {idx!r}, {e})")

    def k_place(self):
        d = self.dest()
        if d is None:
            return False
        m = self.mask(self.shape(d))
        k = int(self.rng.integers(1, int(m.sum()) + 2))
        e = self.expr((k,))
        return self.emit(self.variant("place", d, [e]), f"np.place({d}, {lit(m)}, {e})")

    def k_putmask(self):
        d = self.dest()
        if d is None:
            return False
        s = self.shape(d)
        m = self.mask(s)
        vs = self.choice([s, (int(self.rng.integers(1, 4)),)])
        e = self.expr(vs)
        return self.emit(self.variant("putmask", d, [e]), f"np.putmask({d}, {lit(m)}, {e})")

    def k_put_along_axis(self):
        d = self.dest(lambda v: v.ndim <= 2)
        if d is None:
            return False
        s = self.shape(d)
        ax = int(self.rng.integers(len(s)))
        k = int(self.rng.integers(1, 4))
        ishape = list(s)
        ishape[ax] = k
        idx = self.rng.integers(0, s[ax], ishape)
        vs = self.choice([tuple(ishape), ()])
        e = self.expr(vs)
        return self.emit(self.variant("put_along_axis", d, [e]), f"np.put_along_axis({d}, {lit(idx)}, {e}, axis={ax})")

    def k_fill(self):
        d = self.dest()
        if d is None:
            return False
        return self.emit("fill", f"{d}.fill({self.expr(())})")

    def k_overlap(self):
        d = self.dest()
        if d is None:
            return False
        s = self.shape(d)
        forms = [
            "{0}[1:] = {0}[:-1]", "{0}[:-1] = {0}[1:]", "{0}[1:] += {0}[:-1]", "np.copyto({0}, {0}[::-1])",
            "np.add({0}, {0}[::-1], out={0})", "{0}[::-1] = {0}", "{0}[[0, -1]] = {0}[[-1, 0]]",
            "np.copyto({0}[1:], {0}[:-1])", "np.subtract({0}[1:], {0}[:-1], out={0}[:-1])",
            "np.multiply({0}[::-1], np.tanh({0}), out={0})", "{0}[...] = np.sin({0}[::-1])",
        ]
        if len(s) == 1 and s[0] >= 3:  # other strides: NumPy copies these without a buffer
            h = s[0] // 2
            forms += [f"{{0}}[1:{h + 1}] = {{0}}[::2][:{h}]", f"np.copyto({{0}}[{h}:0:-1], {{0}}[::-2][:{h}])",
                      f"{{0}}[{s[0] - h}:] = {{0}}[::2][:{h}]",
                      f"np.concatenate([{{0}}[{h}:{2 * h}], {{0}}[:{h}]], out={{0}}[:{2 * h}])",
                      f"np.stack([{{0}}[1:{h + 1}], {{0}}[:{h}]], out={{0}}[:{2 * h}].reshape(2, {h}))"]
        v = self.ns[d]
        if len(s) == 1 and s[0] >= 2 and s[0] % 2 == 0 and v.dtype == np.float64 and v.strides[0] == 8:
            # a complex view of the same memory: NumPy's cast copies go element by element
            h = s[0] // 2
            forms += [f"{{0}}.view(np.complex128)[:{h}] = {{0}}[:{h}]", f"{{0}}.view(np.complex128)[:] = {{0}}[{h}:]",
                      f"{{0}}.view(np.complex128)[::-1] = {{0}}[:{h}]", "{0}[::2] = {0}.view(np.complex128).imag",
                      f"np.copyto({{0}}.view(np.complex128), {{0}}[::-2][:{h}])",
                      f"{{0}}.view(np.complex128).real[:] = {{0}}[1:{h + 1}]"]
        if len(s) == 2 and s[0] == s[1]:
            forms += ["{0}[:, -1] = {0}[1]", "{0}[0] = {0}[:, 1]", "np.copyto({0}[:, 0], {0}[-1])",
                      "np.ptp({0}, axis=0, out={0}[1])", "np.ptp({0}, axis=1, out={0}[:, 0])",
                      "np.concatenate([{0}[1:], {0}[:1]], out={0})",
                      "np.copyto({0}[:, -1], {0}[0], where=np.arange(%d) %% 2 == 0)" % s[0]]
            forms += ["{0} += {0}.T", "{0}[...] = {0}.T", "np.add({0}, {0}.T, out={0})", "{0} @= np.tanh({0})",
                      "np.matmul(np.tanh({0}), {0}.T, out={0})", "{0}[1:] = {0}.T[:-1]",
                      "{0} -= 0.5 * {0}.T"]
        return self.emit("overlap", self.choice(forms).format(d))

    def k_const_write(self):
        c = [k for k in self.names() if not self.traced.get(k, True) and isinstance(self.ns[k], np.ndarray)
             and self.ns[k].flags.writeable and self.ns[k].ndim >= 1]
        if not c:
            return False
        x = self.choice(c)
        s = self.shape(x)
        form = self.choice(["{0}[...] = {1}", "{0} *= 1.5", "{0}[::-1] = {0}", "{0}.fill(0.25)",
                            "np.copyto({0}, {1})", "{0}[0] = -{0}[0]"])
        return self.emit("const_write", form.format(x, lit(self.rng.uniform(-1, 1, s))))

    # -- output terms -------------------------------------------------------
    def term(self, name):
        v = self.ns[name]
        s = np.shape(v)
        w = lit(self.rng.uniform(-1, 1, s)) if s else repr(round(float(self.rng.uniform(-1, 1)), 2))
        if np.iscomplexobj(v):
            w2 = lit(self.rng.uniform(-1, 1, s)) if s else "0.5"
            code = f"out = out + np.sum(np.real({name}) * {w}) + np.sum(np.imag({name}) * {w2})"
        else:
            code = f"out = out + np.sum({name} * {w})"
        return self.emit("term", code)

    def k_term(self):
        n = self.names()
        return bool(n) and self.term(self.choice(n))

    # -- the program ----------------------------------------------------------
    def build(self, n_units):
        kinds = [k for k in ALL_KINDS if not excluded(k, self.exclude)]
        p = np.array([ALL_KINDS[k] for k in kinds], dtype=float)
        p /= p.sum()
        tries = 0
        while len(self.units) < n_units and tries < 20 * n_units:
            tries += 1
            kind = kinds[self.rng.choice(len(kinds), p=p)]
            try:
                getattr(self, "k_" + kind)()
            except Exception:  # a builder that cannot fit this pool: try another kind
                self._reset()
        for name in self.names():
            if self.rng.random() < (0.85 if name.startswith("a") else 0.6):
                self.term(name)
        if not any(k == "term" for k, _ in self.units) and self.names():
            self.term(self.names()[0])
        return Program([a.copy() for a in self.args], list(self.units))


def excluded(kind, exclude):
    """Whether a statement of ``kind`` (``base+flag+flag``) is excluded: its base kind, itself,
    or ``base+flag`` for one of its flags is in ``exclude``."""
    base, *flags = kind.split("+")
    return base in exclude or kind in exclude or any(f"{base}+{fl}" in exclude for fl in flags)


def _broadcasts(shape, target):
    try:
        return np.broadcast_shapes(shape, target) == tuple(target)
    except ValueError:
        return False


def _reshapes(s):
    n = int(np.prod(s))
    out = [(n,), (1, n), (n, 1)]
    for a in range(2, n):
        if n % a == 0:
            out.append((a, n // a))
    return [t for t in out if t != tuple(s)] or [(n,)]


def generate(seed, index, exclude=frozenset()):
    """Program number ``index`` of the stream ``seed`` (each is reproducible on its own)."""
    rng = np.random.default_rng([seed, index])
    g = Generator(rng, exclude)
    prog = g.build(int(rng.integers(6, 20)))
    prog.seed = (seed, index)
    return prog


# ------------------------------------------------------------------------------
# Checking


@dataclass
class Outcome:
    status: str                 # "pass", "raised", "fail", "invalid" (plain call fails), "fd-noise"
    category: str = ""          # what failed, e.g. "rev-vs-fd", "fwd-exception:IndexError"
    message: str = ""
    raised: list = field(default_factory=list)   # (mode, DifferentiationError) pairs


def _copies(args):
    return [np.array(a, copy=True) for a in args]


def _call(f, args):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return float(f(*_copies(args)))


def _stencil(f, args, direction, h):
    """4-point central difference of f along ``direction`` (one array per argument)."""
    def at(t):
        return _call(f, [a + t * d for a, d in zip(args, direction)])
    return (8 * (at(h) - at(-h)) - (at(2 * h) - at(-2 * h))) / (12 * h)


def fd_grad(f, args, h=FD_STEP):
    out = []
    for i, a in enumerate(args):
        g = np.zeros(a.shape)
        for k in range(a.size):
            d = [np.zeros(b.shape) for b in args]
            d[i].reshape(-1)[k] = 1.0
            g.reshape(-1)[k] = _stencil(f, args, d, h)
        out.append(g)
    return out


def _state_diff(after, ref):
    for i, (a, r) in enumerate(zip(after, ref)):
        if not np.array_equal(np.asarray(a), r):
            return f"argument a{i} holds {np.asarray(a)!r}, a plain call leaves {r!r}"
    return None


def _same_value(a, b):
    """The primal output may differ from a plain call's by rounding (a rule may compute the
    same value another way); the arguments' contents may not (checked bitwise)."""
    return abs(a - b) <= 1e-13 * max(1.0, abs(b))


def _fmt_exc(e):
    tb = traceback.extract_tb(e.__traceback__)
    where = f" at {tb[-1].filename.split('/')[-1]}:{tb[-1].lineno}" if tb else ""
    return f"{type(e).__name__}: {e}{where}"


def _converges_to(fd_at, got, noise, tol):
    """For an ill-conditioned program FD_STEP is too coarse. Refine the step
    (1e-4 down to 1e-10) and find where finite differences settle: the pair
    of consecutive steps whose estimates agree best. If they agree within
    tolerance and mutagrad agrees with the finer of them within tolerance
    plus their disagreement, the coarse mismatch was FD error. The reference
    is a settled estimate (two steps agreeing), never "any step that happens
    to agree" with mutagrad."""
    def gap(x, y):
        return max(float(np.max(np.abs(np.asarray(p) - q), initial=0.0)) for p, q in zip(x, y))

    ests = [fd_at(h) for h in (1e-4, 1e-5, 1e-6, 1e-7, 1e-8, 1e-9, 1e-10)]
    gaps = [gap(ests[k], ests[k + 1]) for k in range(len(ests) - 1)]
    k = min(range(len(gaps)), key=gaps.__getitem__)
    ref = ests[k + 1]
    # the tolerance scales with the settled derivative (the coarse one it replaces may be far off)
    tol = max(tol, SETTLED_RTOL * max(float(np.max(np.abs(np.asarray(e)), initial=0.0)) for e in ref))
    if gaps[k] > tol:
        return False  # never settles: the mismatch stands
    return gap(got, ref) <= tol + 10 * gaps[k]


def check(f, args, seed=0, nested=False):
    """Check one program ``f`` at ``args``; returns an :class:`Outcome`."""
    if isinstance(f, str):
        f = compile_source(f)
    args = [np.asarray(a, dtype=float) for a in args]
    ref = _copies(args)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out0 = float(f(*ref))
    except Exception as e:
        return Outcome("invalid", "plain", _fmt_exc(e))
    if not np.isfinite(out0):
        return Outcome("invalid", "plain", "non-finite output")
    rng = np.random.default_rng(seed)
    fd = fd_grad(f, args)
    scale = max(1.0, max(float(np.max(np.abs(g))) for g in fd))
    raised = []
    fails = []      # (category, message): every check runs, the first failure names the outcome
    nums = tuple(range(len(args)))

    def noise_of(direction=None):
        """FD recomputed with half the step: a mismatch counts only beyond FD's own disagreement."""
        if direction is None:
            fd2 = fd_grad(f, args, FD_STEP / 2)
            return max(float(np.max(np.abs(a - b))) for a, b in zip(fd, fd2))
        return abs(_stencil(f, args, direction, FD_STEP) - _stencil(f, args, direction, FD_STEP / 2))

    noisy = False
    # reverse mode
    grads = None
    a1 = _copies(args)
    try:
        val, grads = mg.value_and_grad(f, argnums=nums)(*a1)
    except mg.DifferentiationError as e:
        raised.append(("rev", e))
    except Exception as e:
        fails.append((f"rev-exception:{type(e).__name__}", _fmt_exc(e)))
    if grads is not None:
        grads = [np.asarray(g) for g in grads]
        msg = _state_diff(a1, ref)
        if msg:
            fails.append(("rev-state", "reverse mode side effects: " + msg))
        if not _same_value(float(val), out0):
            fails.append(("rev-primal", f"value_and_grad value {float(val)!r} != plain call {out0!r}"))
        err = max(float(np.max(np.abs(g - d), initial=0.0)) for g, d in zip(grads, fd))
        if err > RTOL * scale:
            noise = noise_of()
            if err > RTOL * scale + 10 * noise and not _converges_to(
                    lambda h: fd_grad(f, args, h), grads, noise, RTOL * scale):
                fails.append(("rev-vs-fd", f"reverse mode vs finite differences: max abs error {err:.3g} "
                                           f"(FD noise {noise:.2g})\n got      {grads!r}\n expected {fd!r}"))
            else:
                noisy = True

    # forward mode
    v = [rng.standard_normal(a.shape) for a in args]
    a2 = _copies(args)
    try:
        o, t = mg.jvp(f, a2, v)
    except mg.DifferentiationError as e:
        raised.append(("fwd", e))
    except Exception as e:
        fails.append((f"fwd-exception:{type(e).__name__}", _fmt_exc(e)))
    else:
        msg = _state_diff(a2, ref)
        if msg:
            fails.append(("fwd-state", "forward mode side effects: " + msg))
        if not _same_value(float(o), out0):
            fails.append(("fwd-primal", f"jvp primal {float(o)!r} != plain call {out0!r}"))
        t = float(t)
        fd_dir = sum(float(np.sum(g * d)) for g, d in zip(fd, v))
        vscale = max(1.0, sum(float(np.sum(np.abs(g * d))) for g, d in zip(fd, v)))
        if abs(t - fd_dir) > RTOL * vscale:
            direct = _stencil(f, args, v, FD_STEP)
            err = abs(t - direct)
            if err > RTOL * vscale:
                noise = noise_of(v)
                if err > RTOL * vscale + 10 * noise and not _converges_to(
                        lambda h: [np.asarray(_stencil(f, args, v, h))], [np.asarray(t)], noise, RTOL * vscale):
                    fails.append(("fwd-vs-fd", f"forward mode vs finite differences: <FD grad, v> {fd_dir!r}, "
                                               f"directional FD {direct!r}, jvp {t!r}"))
                else:
                    noisy = True
        if grads is not None:
            gv = sum(float(np.sum(g * d)) for g, d in zip(grads, v))
            gscale = max(1.0, sum(float(np.sum(np.abs(g * d))) for g, d in zip(grads, v)))
            if abs(t - gv) > DOT_RTOL * gscale:
                fails.append(("dot-identity", f"dot-product identity: jvp {t!r} but <grad, v> {gv!r}"))
    if nested and grads is not None and not fails and not raised:
        noisy = _check_nested(f, args, ref, v, nums, fails, raised) or noisy
    if fails:
        return Outcome("fail", fails[0][0], "\n".join(f"[{c}] {m}" for c, m in fails), raised)
    if noisy:
        return Outcome("fd-noise", "", "", raised)
    return Outcome("raised" if raised else "pass", "", "", raised)


def _stencil_of(fn, args, v, h):
    """4-point central difference along ``v`` of ``fn``, whose value is a list of arrays."""
    def at(t):
        return [np.asarray(x, dtype=float) for x in fn(*[a + t * d for a, d in zip(args, v)])]

    p1, m1, p2, m2 = at(h), at(-h), at(2 * h), at(-2 * h)
    return [(8 * (a - b) - (c - d)) / (12 * h) for a, b, c, d in zip(p1, m1, p2, m2)]


def _check_nested(f, args, ref, v, nums, fails, raised):
    """Second order: the Hessian-vector product forward over reverse (``jvp`` of ``grad``) and
    reverse over reverse (``grad`` of ``<grad, v>``) against the directional finite difference of
    mutagrad's gradient on plain arguments (itself checked against finite differences above),
    and against each other; the arguments' contents after each against a plain call. Returns
    whether only finite-difference noise kept a comparison from passing."""
    def grad_of(*a):
        return mg.grad(f, argnums=nums)(*a)

    def stencil(h):
        return _stencil_of(grad_of, args, v, h)

    try:
        fd = stencil(FD_STEP)
    except Exception:  # noqa: BLE001 (the first order passed at args; a step away may leave the smooth domain)
        return False
    scale = max(1.0, max(float(np.max(np.abs(x), initial=0.0)) for x in fd))
    noise = None
    noisy = False
    results = {}
    for mode in ("fwd", "rev"):
        a = _copies(args)
        try:
            if mode == "fwd":
                hv = mg.jvp(grad_of, a, v)[1]
            else:
                hv = mg.grad(lambda *x: sum(np.sum(gi * vi) for gi, vi in zip(grad_of(*x), v)), argnums=nums)(*a)
        except mg.DifferentiationError as e:  # (the first order passed: refusing the second is a finding)
            fails.append((f"nested-{mode}-raised:{type(e).__name__}", _fmt_exc(e)))
            continue
        except Exception as e:  # noqa: BLE001
            fails.append((f"nested-{mode}-exception:{type(e).__name__}", _fmt_exc(e)))
            continue
        hv = [np.asarray(x, dtype=float) for x in hv]
        results[mode] = hv
        msg = _state_diff(a, ref)
        if msg:
            fails.append((f"nested-{mode}-state", f"{mode}-over-rev side effects: " + msg))
        err = max(float(np.max(np.abs(x - d), initial=0.0)) for x, d in zip(hv, fd))
        if err > RTOL * scale:
            if noise is None:
                fd2 = stencil(FD_STEP / 2)
                noise = max(float(np.max(np.abs(x - d), initial=0.0)) for x, d in zip(fd, fd2))
            if err > RTOL * scale + 10 * noise and not _converges_to(stencil, hv, noise, RTOL * scale):
                fails.append((f"nested-{mode}-vs-fd", (f"Hessian-vector product ({mode} over rev) vs finite "
                                                      f"differences of the gradient: max abs error {err:.3g} "
                                                      f"(FD noise {noise:.2g})\n got      {hv!r}\n expected {fd!r}")))
            else:
                noisy = True
    if len(results) == 2:
        err = max(float(np.max(np.abs(x - y), initial=0.0)) for x, y in zip(results["fwd"], results["rev"]))
        if err > 1e-8 * scale:
            fails.append(("nested-fwd-vs-rev", (f"Hessian-vector products disagree: fwd over rev {results['fwd']!r}, "
                                                f"rev over rev {results['rev']!r}")))
    if "fwd" in results and not fails:
        noisy = _check_third(grad_of, args, ref, v, fails, raised) or noisy
    return noisy


def _check_third(grad_of, args, ref, v, fails, raised):
    """Third order: the derivative along ``v`` of the forward-over-reverse Hessian-vector
    product (forward over forward over reverse) against its directional finite difference."""
    def hv_at(*a):
        return mg.jvp(grad_of, list(a), v)[1]

    def stencil(h):
        return _stencil_of(hv_at, args, v, h)

    try:
        fd = stencil(FD_STEP)
    except Exception:  # noqa: BLE001
        return False
    scale = max(1.0, max(float(np.max(np.abs(x), initial=0.0)) for x in fd))
    a = _copies(args)
    try:
        t3 = mg.jvp(hv_at, a, v)[1]
    except mg.DifferentiationError as e:
        fails.append((f"nested-third-raised:{type(e).__name__}", _fmt_exc(e)))
        return False
    except Exception as e:  # noqa: BLE001
        fails.append((f"nested-third-exception:{type(e).__name__}", _fmt_exc(e)))
        return False
    t3 = [np.asarray(x, dtype=float) for x in t3]
    msg = _state_diff(a, ref)
    if msg:
        fails.append(("nested-third-state", "fwd-over-fwd-over-rev side effects: " + msg))
    err = max(float(np.max(np.abs(x - d), initial=0.0)) for x, d in zip(t3, fd))
    if err > 1e3 * RTOL * scale:  # (a finite difference of a second derivative: coarser)
        fd2 = stencil(FD_STEP / 2)
        noise = max(float(np.max(np.abs(x - d), initial=0.0)) for x, d in zip(fd, fd2))
        if err > 1e3 * RTOL * scale + 10 * noise:
            # (a rapidly oscillating composite, cos of a cube: the coarse steps both miss; a finer one decides)
            fine = stencil(FD_STEP / 1000)
            err = min(err, max(float(np.max(np.abs(x - d), initial=0.0)) for x, d in zip(t3, fine)))
        if err > 1e3 * RTOL * scale + 10 * noise:
            fails.append(("nested-third-vs-fd", (f"third derivative along v vs finite differences of the "
                                                 f"Hessian-vector product: max abs error {err:.3g} (FD noise "
                                                 f"{noise:.2g})\n got      {t3!r}\n expected {fd!r}")))
        else:
            return True
    return False


def check_program(prog, nested=False):
    try:
        return check(prog.function(), prog.args, nested=nested)
    except Exception as e:  # a bug in the checker itself must be visible too  # noqa: BLE001
        return Outcome("fail", f"checker:{type(e).__name__}", _fmt_exc(e))


def unit_of(prog, exc):
    """The statement kind at the program line an error names (or '?')."""
    m = re.search(r"<fuzz program>:(\d+)", str(exc))
    if not m:
        for fr in traceback.extract_tb(exc.__traceback__):
            if fr.filename == "<fuzz program>":
                m = re.match(r"(\d+)", str(fr.lineno))
    if not m:
        return "?"
    line = int(m.group(1))
    n = 2
    for kind, code in prog.units:
        n += len(code.splitlines())
        if line <= n:
            return kind
    return "?"


def minimise(prog, outcome, nested=False):
    """Drop statements while the same kind of failure persists."""
    units = list(prog.units)
    changed = True
    while changed:
        changed = False
        for i in reversed(range(len(units))):
            if i >= len(units):
                continue
            cand = Program(prog.args, units[:i] + units[i + 1:], prog.seed)
            o = check_program(cand, nested)
            if o.status == "fail" and o.category == outcome.category:
                units = cand.units
                changed = True
    small = Program(prog.args, units, prog.seed)
    return small, check_program(small, nested)


# ------------------------------------------------------------------------------
# Command line


def run(count, seed, exclude=frozenset(), max_minimise=300, out=sys.stdout, verbose=False, nested=False):
    """Generate and check ``count`` programs; return (summary dict, distinct failures)."""
    counts = {"programs": 0, "passed": 0, "raised": 0, "failures": 0, "invalid": 0, "fd-noise": 0}
    raised_kinds = {}
    distinct = {}   # key -> [minimal program, outcome, count, first seed]
    unminimised = []
    for i in range(count):
        prog = generate(seed, i, exclude)
        o = check_program(prog, nested)
        counts["programs"] += 1
        key = {"pass": "passed", "raised": "raised", "fail": "failures"}.get(o.status, o.status)
        counts[key] += 1
        for mode, e in o.raised:
            k = f"{mode} {type(e).__name__} in {unit_of(prog, e)}"
            raised_kinds[k] = raised_kinds.get(k, 0) + 1
        if o.status == "fail":
            if len(distinct) + len(unminimised) < max_minimise or max_minimise < 0:
                small, so = minimise(prog, o, nested)
                if so.status != "fail":
                    small, so = prog, o
                dk = (so.category, tuple(sorted(small.kinds() - GENERIC_KINDS)))
                if dk in distinct:
                    distinct[dk][2] += 1
                    if len(small.units) < len(distinct[dk][0].units):
                        distinct[dk][:2] = [small, so]
                else:
                    distinct[dk] = [small, so, 1, prog.seed]
            else:
                unminimised.append((prog, o))
        if verbose:
            print(f"{i}: {o.status} {o.category}", file=out)
    return counts, raised_kinds, distinct, unminimised


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--count", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--only", type=int, default=None, help="check only program number ONLY of the stream")
    ap.add_argument("--exclude-known", action="store_true", help="do not generate KNOWN_CORE_BUGS kinds")
    ap.add_argument("--exclude", default="", help="comma-separated statement kinds not to generate")
    ap.add_argument("--max-minimise", type=int, default=300, help="failures to minimise (-1: all)")
    ap.add_argument("--show-raised", action="store_true", help="list the DifferentiationErrors raised")
    ap.add_argument("--verbose", action="store_true")
    ap.add_argument("--nested", action="store_true",
                    help="also check Hessian-vector products (forward over reverse, reverse over reverse)")
    a = ap.parse_args(argv)
    exclude = (KNOWN_CORE_BUGS if a.exclude_known else frozenset()) | {k for k in a.exclude.split(",") if k}
    unknown = {k for k in exclude if k.split("+")[0] not in ALL_KINDS}
    if unknown:
        ap.error(f"unknown kinds {sorted(unknown)}; kinds are {sorted(ALL_KINDS)}")
    t0 = time.time()
    if a.only is not None:
        prog = generate(a.seed, a.only, exclude)
        print(prog.script())
        o = check_program(prog, a.nested)
        print(o.status, o.category, o.message)
        for mode, e in o.raised:
            print(f"raised in {mode}: {type(e).__name__}: {e}")
        return 1 if o.status == "fail" else 0
    counts, raised_kinds, distinct, unminimised = run(a.count, a.seed, exclude, a.max_minimise,
                                                      verbose=a.verbose, nested=a.nested)
    for n, (key, (small, so, k, sd)) in enumerate(sorted(distinct.items(), key=lambda kv: kv[0][0])):
        print(f"=== failure {n + 1}: {so.category} (seen {k}x; first at --seed {sd[0]} --only {sd[1]}; "
              f"kinds {key[1]})")
        print(small.script())
        print(so.message)
        print()
    if unminimised:
        print(f"{len(unminimised)} further failures not minimised: "
              + ", ".join(f"--only {p.seed[1]} ({o.category})" for p, o in unminimised[:50]))
    if a.show_raised:
        print("DifferentiationErrors raised:")
        for k, n in sorted(raised_kinds.items(), key=lambda kv: -kv[1]):
            print(f"  {n:6d}  {k}")
    print(f"programs {counts['programs']}, passed {counts['passed']}, "
          f"raised-DifferentiationError {counts['raised']}, failures {counts['failures']} "
          f"({len(distinct)} distinct minimal), invalid {counts['invalid']}, fd-noise {counts['fd-noise']}; "
          f"seed {a.seed}, {time.time() - t0:.1f}s")
    return 1 if counts["failures"] else 0


if __name__ == "__main__":
    sys.exit(main())
