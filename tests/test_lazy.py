"""``import spatialdp`` is cheap; every public name still resolves on first use."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

LAZY_PACKAGES = ["spatialdp", "spatialdp.privacy", "spatialdp.federated", "spatialdp.geo"]


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
    for name in module.__all__:
        assert getattr(module, name) is not None, name
    assert set(module.__all__) <= set(dir(module))


def test_submodules_resolve_as_attributes() -> None:
    import spatialdp

    assert spatialdp.privacy.accuracy.half_width is spatialdp.privacy.half_width


def test_unknown_name_is_an_attribute_error() -> None:
    import spatialdp

    with pytest.raises(AttributeError, match="has no attribute 'no_such_name'"):
        _ = spatialdp.no_such_name
