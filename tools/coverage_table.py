"""Generate docs/coverage.md from mutagrad's rule registries.

    python tools/coverage_table.py          # rewrite docs/coverage.md
    python tools/coverage_table.py --check  # exit 1 if it is stale (CI)

Never edit docs/coverage.md by hand.
"""
from __future__ import annotations

import argparse
import pathlib
import sys

import numpy as np

import mutagrad  # noqa: F401  (fills the registries)
from mutagrad.core import FUNCTIONS, REGISTRY, UFUNC_HANDLERS, qualname
from mutagrad.registry import NOT_DIFFERENTIABLE

ROOT = pathlib.Path(__file__).resolve().parent.parent
TARGET = ROOT / "docs" / "coverage.md"


def _public(name: str) -> bool:
    return name.startswith(("np.", "ndarray.", "scipy.", "mutagrad."))


def collect():
    """name -> (reverse, forward, how)"""
    rows = {}
    for prim in REGISTRY.values():
        if not _public(prim.name):
            continue
        if prim.name in NOT_DIFFERENTIABLE:
            rows[prim.name] = (False, False, "no derivative: its derivative is a NotImplementedTangent, never a zero")
            continue
        how = ("rule (zero derivative for real inputs)" if prim.zero == "real" else "zero derivative" if prim.zero
               else ("linear rule" if prim.linear else "rule"))
        missing = _parameters_without_derivative().get(prim.name)
        if isinstance(missing, tuple):  # (positions, not the leading ones: gdtr's b)
            ordinals = ("first", "second", "third", "fourth")
            how += (f"; the derivative w.r.t. its {' and '.join(ordinals[i] for i in missing)} argument"
                    f"{'s' if len(missing) > 1 else ''} (a shape parameter) is a NotImplementedTangent")
        elif missing:
            how += ("; the derivative w.r.t. its first argument (the parameter)" if missing == 1 else
                    f"; the derivative w.r.t. its first {missing} arguments (the parameters)")
            how += " is a NotImplementedTangent"
        second = _second_derivative_missing().get(prim.name)
        if second:
            how += f"; its second derivative w.r.t. {second} is a NotImplementedTangent"
        rows[prim.name] = (prim.rrule is not None, prim.frule is not None, how)
    for fn, handler in FUNCTIONS.items():
        name = qualname(fn)
        if not _public(name) or name in rows:
            continue
        prim = REGISTRY.get(fn)
        if prim is not None:
            rows[name] = (prim.rrule is not None, prim.frule is not None, "rule")
            continue
        mod = getattr(handler, "__module__", "") or ""
        if getattr(handler, "__name__", "") == "handler" and "shape" in mod and fn in _plain_functions():
            rows[name] = (False, False, "no derivative: text of the digits (raises outside print/log, "
                          "as float(x) does)" if fn in (np.array2string, np.array_repr, np.array_str)
                          else "no derivative: returns indices, shapes or flags")
        else:
            rows[name] = (True, True, "composite of differentiable operations")
    for (uf, method), handler in UFUNC_HANDLERS.items():
        if uf is None:
            if method != "__call__":  # (the methods every ufunc has: np.multiply.at, np.subtract.outer...)
                rows[f"np.<ufunc>.{method}"] = (True, True, "any ufunc listed here with a derivative: composite of "
                                                "its calls" + (", gathers and writes (unbuffered, in index order)"
                                                               if method == "at" else ""))
            continue
        name = qualname(uf) + ("" if method == "__call__" else f".{method}")
        if name in rows:
            continue
        if method == "__call__":
            floating = any(t[-1] in "efdgFDG" for t in uf.types)  # (np._core.umath.clip: np.clip's rule)
            rows[name] = ((True, True, "composite of differentiable operations") if floating
                          else (False, False, "no derivative: boolean or integer result"))
        elif not any(t[-1] in "efdgFDG" for t in uf.types):  # (logical_or.reduce, greater.outer...)
            how = "no derivative: boolean result (NumPy's values; a traced out= takes them as constants)"
            rows[name] = (False, False, how)
        elif getattr(handler, "coverage_how", None):
            rows[name] = (True, True, handler.coverage_how)
        elif getattr(handler, "folds_checked", False):
            rows[name] = (True, True, "composite: the left fold (NoRuleError on a CPU where NumPy computes another)")
        else:
            rows[name] = (True, True, "composite of differentiable operations")
    for name, public in _BEHIND.items():
        if name in rows:
            r, f, how = rows[name]
            rows[name] = (r, f, f"{how} (the ufunc `{public}` calls)")
    rows.update(_stats_rows())
    rows.update(_scipy_linalg_rows())
    rows.update(_scipy_ndimage_rows())
    rows.update(_scipy_signal_rows())
    rows.update(_scipy_interpolate_rows())
    rows.update(_scipy_spatial_rows())
    return dict(sorted(rows.items()))


# ufuncs SciPy's plain-Python functions call, by the function users know
_BEHIND = {"scipy.special._lambertw": "scipy.special.lambertw", "scipy.special._zeta": "scipy.special.zeta(x, q)",
           "scipy.special._riemann_zeta": "scipy.special.zeta(x)"}


def _stats_rows():
    """A row per method of each mutagrad.scipy.stats distribution: compositions of the
    functions above, with the shape parameters whose derivative is not implemented."""
    try:
        from mutagrad.rules.scipy import stats
    except ImportError:  # no SciPy
        return {}
    rows = {}
    for dist in stats.DISTRIBUTIONS:
        for method in dist.METHODS:
            how = "composite of differentiable operations"
            if method in dist.SHAPE_SECOND_DERIVATIVE_NOT_IMPLEMENTED:
                shapes = getattr(dist, "SHAPES_NOT_DIFFERENTIATED", dist.shapes)
                how += f"; the second derivative w.r.t. {', '.join(shapes)} is a NotImplementedTangent"
            rows[f"scipy.stats.{dist.name}.{method}"] = (True, True, how)
    return rows


def _scipy_linalg_rows():
    """The functions of mutagrad.scipy.linalg written with the differentiable operations above."""
    try:
        from mutagrad.rules.scipy import linalg
    except ImportError:  # no SciPy
        return {}
    return {name: (True, True, "composite of differentiable operations") for name in linalg.COMPOSITES}


def _scipy_ndimage_rows():
    """The filters of mutagrad.scipy.ndimage written, as SciPy writes them, with its correlate1d,
    correlate and uniform_filter1d."""
    try:
        from mutagrad.rules.scipy import ndimage, ndimage_rank
    except ImportError:  # no SciPy
        return {}
    return {name: (True, True, "composite of differentiable operations")
            for name in (*ndimage.COMPOSITES, *ndimage_rank.COMPOSITES)}


def _scipy_signal_rows():
    """The filters, designs and linear systems of mutagrad.scipy.signal written, as SciPy writes them, with
    its lfilter, np.linalg.solve / lstsq, scipy.linalg.expm and scipy.fft."""
    try:
        from mutagrad.rules.scipy import signal, signal_design, signal_lti, signal_resample
    except ImportError:  # no SciPy
        return {}
    return {name: (True, True, "composite of differentiable operations")
            for name in (*signal.COMPOSITES, *signal_design.COMPOSITES, *signal_lti.COMPOSITES,
                         *signal_resample.COMPOSITES)}


def _scipy_interpolate_rows():
    """The interpolators of mutagrad.scipy.interpolate (subclasses of SciPy's classes), written as
    SciPy writes them with NumPy operations, np.linalg.solve and solve_banded."""
    try:
        from mutagrad.rules.scipy import interpolate
    except ImportError:  # no SciPy
        return {}
    return {name: (True, True, "composite of differentiable operations") for name in interpolate.COMPOSITES}


def _scipy_spatial_rows():
    """The distances of mutagrad.scipy.spatial (pdist, cdist, squareform, the pair functions), written with
    NumPy operations."""
    try:
        from mutagrad.rules.scipy import spatial
    except ImportError:  # no SciPy
        return {}
    return {name: (True, True, "composite of differentiable operations") for name in spatial.COMPOSITES}


def _parameters_without_derivative():
    try:
        from mutagrad.rules.scipy import special
    except ImportError:  # no SciPy
        return {}
    return special.PARAMETER_DERIVATIVE_NOT_IMPLEMENTED


def _second_derivative_missing():
    try:
        from mutagrad.rules.scipy import special
    except ImportError:  # no SciPy
        return {}
    return special.SECOND_DERIVATIVE_NOT_IMPLEMENTED


def _plain_functions():
    from mutagrad.rules import shape

    return set(getattr(shape, "PLAIN_FUNCTIONS", ()))


def render() -> str:
    rows = collect()
    both = sum(1 for r, f, how in rows.values() if r and f)
    lines = [
        "# Coverage",
        "",
        "Generated by `python tools/coverage_table.py` from the rule registries; CI fails when it is stale.",
        "",
        f"{len(rows)} functions; {both} differentiable in both reverse and forward mode.",
        "",
        ("`scipy.special` ufuncs are differentiated on traced arrays directly, and so are the `scipy.fft` "
         "functions, called as written (through SciPy's own dispatch: mutagrad registers a uarray backend that "
         "SciPy asks first). The other `scipy.*` rows are "
         "SciPy's plain-Python functions: they are differentiated when called through `mutagrad.scipy.special`, "
         "`mutagrad.scipy.linalg`, `mutagrad.scipy.stats`, `mutagrad.scipy.signal`, `mutagrad.scipy.ndimage`, "
         "`mutagrad.scipy.interpolate` (its classes: subclasses of SciPy's), `mutagrad.scipy.spatial` (with "
         "`.spatial.distance`) or `mutagrad.scipy.sparse.linalg` "
         "(the same names); "
         "SciPy's own raise `TracerEscapeError`, naming the module to use. The `scipy.stats.<distribution>.<method>` "
         "rows are the distributions of `mutagrad.scipy.stats`, written with the differentiable functions above "
         "(their values agree with SciPy's to a few units in the last place, not bit for bit). "
         "A `scipy.sparse` matrix is a constant (it holds plain numbers): its products with traced arrays and "
         "the sparse solves are differentiated with respect to the traced operand. `numpy.polynomial` has no "
         "rows: its functions and series classes are NumPy's plain-Python code. They are differentiated (in "
         "coefficients and points alike) when called through `mutagrad.numpy.polynomial` (`mnp.polynomial` "
         "after `import mutagrad.numpy as mnp`; the same names: `mnp.polynomial.legendre.legval(x, c)`, "
         "`mnp.polynomial.Legendre(c)(x)`, "
         "`mnp.polynomial.Polynomial.fit(x, y, deg)`; `import mutagrad.numpy.polynomial.legendre as L` works "
         "too), which runs NumPy's own code with array creation that keeps traced values traced, so its values "
         "are NumPy's to rounding and plain inputs give NumPy's plain results; its series classes are subclasses "
         "of NumPy's. Degrees (`deg`, `*gauss(deg)`, `*pts`) are plain integers, and `*roots` (eigenvalues of "
         "the companion matrix) are differentiated at simple roots. NumPy's own take a "
         "traced x in the `*val` functions but convert traced coefficients (and `*vander`'s x, a series "
         "object's argument) with np.asarray; those calls raise `TracerEscapeError` naming the mirror's "
         "function first, then a rewrite with NumPy's functions (`chebvander(x, len(c) - 1) @ c` for "
         "`chebval(x, c)`, `chebval(x, p.convert().coef)` for `p(x)`)."),
        "",
        "| function | reverse | forward | how |",
        "|---|:---:|:---:|---|",
    ]
    for name, (r, f, how) in rows.items():
        lines.append(f"| `{name}` | {'yes' if r else '-'} | {'yes' if f else '-'} | {how} |")
    return "\n".join(lines) + "\n"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--check", action="store_true", help="fail if docs/coverage.md is stale")
    args = ap.parse_args(argv)
    text = render()
    if args.check:
        if not TARGET.exists() or TARGET.read_text() != text:
            print("docs/coverage.md is stale: run python tools/coverage_table.py", file=sys.stderr)
            return 1
        return 0
    TARGET.parent.mkdir(exist_ok=True)
    TARGET.write_text(text)
    print(f"wrote {TARGET.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
