"""``import spatialdp`` is cheap; every public name still resolves on first use."""

from __future__ import annotations

import importlib
import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest

from spatialdp._lazy import _declared_imports

LAZY_PACKAGES = ["spatialdp", "spatialdp.privacy", "spatialdp.federated", "spatialdp.geo",
                 "spatialdp.sampling", "spatialdp.cards", "spatialdp.flower",
                 "spatialdp.audit"]


def test_import_loads_no_heavy_dependency() -> None:
    code = ("import sys, spatialdp; "
            "print(sorted(m for m in ('pandas', 'geopandas', 'scipy', 'shapely', 'h3', "
            "'matplotlib', 'sqlite3', 'opendp') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.strip()
    assert out == "[]"


@pytest.mark.parametrize("package", LAZY_PACKAGES)
def test_every_public_name_resolves(package: str) -> None:
    module = importlib.import_module(package)
    declared = _declared_imports(Path(module.__file__).read_text(encoding="utf-8"))
    assert set(declared) <= set(module.__all__)
    for name in module.__all__:
        if name in declared:  # the very object of the module that defines it
            source = importlib.import_module(declared[name])
            assert getattr(module, name) is getattr(source, name), name
        else:
            assert hasattr(module, name), name
    assert set(module.__all__) <= set(dir(module))


@pytest.mark.parametrize("package", LAZY_PACKAGES)
def test_no_lazy_name_is_also_a_submodule(package: str) -> None:
    # importing such a submodule would rebind the package attribute to the module
    module = importlib.import_module(package)
    declared = _declared_imports(Path(module.__file__).read_text(encoding="utf-8"))
    submodules = {info.name for info in pkgutil.iter_modules(module.__path__)}
    assert not set(declared) & submodules


def test_submodules_resolve_as_attributes() -> None:
    import spatialdp

    assert spatialdp.privacy.accuracy.half_width is spatialdp.privacy.half_width


def test_unknown_name_is_an_attribute_error() -> None:
    import spatialdp

    with pytest.raises(AttributeError, match="has no attribute 'no_such_name'"):
        _ = spatialdp.no_such_name
