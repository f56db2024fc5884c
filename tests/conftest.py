"""Fixtures shared by the test modules."""
import importlib
import sys

import pytest


@pytest.fixture
def installed_package(tmp_path, monkeypatch):
    """A maker of packages under a site-packages directory on sys.path (as pint or xarray are): ``make(name,
    source)`` writes ``source`` as the package's __init__.py and imports it (removed again after the test)."""
    def make(name, source):
        pkg = tmp_path / "site-packages" / name
        pkg.mkdir(parents=True)
        (pkg / "__init__.py").write_text(source)
        monkeypatch.syspath_prepend(str(tmp_path / "site-packages"))
        module = importlib.import_module(name)
        monkeypatch.setitem(sys.modules, name, module)  # (undone after the test: the module is forgotten)
        return module

    return make
