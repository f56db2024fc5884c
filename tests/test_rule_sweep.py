"""Fails when a registered rule has no table-driven test case.

Every module ``tests/rules/test_*.py`` defines ``CASES`` (and may define
``MUTATION_CASES``, ``NOT_DIFFERENTIABLE_CASES``, ``PLAIN``, ``TEXT`` and ``SAVED``): tuples whose
first element names the function they cover, as ``mutagrad.core.qualname``
spells it.
"""
import importlib
import pkgutil

import mutagrad  # noqa: F401  (fills the registries)
from mutagrad.core import FUNCTIONS, REGISTRY, qualname

import tests.rules as rule_tests


def _covered():
    names = set()
    for info in pkgutil.iter_modules(rule_tests.__path__):
        if not info.name.startswith("test_"):
            continue
        mod = importlib.import_module(f"tests.rules.{info.name}")
        for table in ("CASES", "MUTATION_CASES", "NOT_DIFFERENTIABLE_CASES"):
            names |= {c[0] for c in getattr(mod, table, [])}
        names |= set(getattr(mod, "PLAIN", ())) | set(getattr(mod, "TEXT", ())) | set(getattr(mod, "SAVED", ()))
    return names


def registered_names():
    names = {p.name for p in REGISTRY.values() if p.name.startswith(("np.", "ndarray.", "scipy."))}
    names |= {qualname(f) for f in FUNCTIONS}
    return names


def test_every_registered_rule_has_a_case():
    missing = sorted(registered_names() - _covered())
    assert not missing, f"registered rules without a test case: {missing}"
