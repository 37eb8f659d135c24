"""Lazy package attributes (PEP 562), declared once as ordinary imports.

A package ``__init__`` lists its public names as ``from ... import ...``
statements inside an ``if TYPE_CHECKING:`` block, so type checkers, IDEs and
readers see ordinary imports, and then calls :func:`attach`. At run time that
block is skipped; :func:`attach` reads it from the package's own source and
returns a module ``__getattr__`` that imports a name's module on first access.
``import spatialdp`` therefore costs milliseconds; pandas, GeoPandas, SciPy and
SQLite load when the first name that needs them is used (SPEC 1 of the
Scientific Python project describes the same pattern).

Examples
--------
>>> import spatialdp
>>> spatialdp.Partition.__name__
'Partition'
>>> "regional_report" in dir(spatialdp)
True
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["attach"]


def _declared_imports(source: str) -> dict[str, str]:
    """Map each name imported under ``if TYPE_CHECKING:`` to its module."""
    exports: dict[str, str] = {}
    for node in ast.parse(source).body:
        if not (isinstance(node, ast.If) and isinstance(node.test, ast.Name)
                and node.test.id == "TYPE_CHECKING"):
            continue
        for statement in node.body:
            if isinstance(statement, ast.ImportFrom) and statement.module:
                for alias in statement.names:
                    exports[alias.asname or alias.name] = statement.module
    return exports


def attach(package: str, init_file: str) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """Return ``(__getattr__, __dir__)`` for ``package`` from its ``TYPE_CHECKING`` imports.

    Parameters
    ----------
    package : str
        The package's ``__name__``.
    init_file : str
        The package's ``__file__`` (its ``__init__.py``), whose ``if
        TYPE_CHECKING:`` block declares the lazy names.

    Returns
    -------
    (getattr, dir) : tuple of callables
        Assign them to the package's ``__getattr__`` and ``__dir__``.

    Notes
    -----
    A lazy name must not be the name of one of the package's submodules: importing
    that submodule binds the package attribute to the module, which would then hide
    the name (``tests/test_lazy.py`` checks this).
    """
    exports = _declared_imports(Path(init_file).read_text(encoding="utf-8"))
    def __getattr__(name: str) -> Any:
        module_name = exports.get(name)
        if module_name is not None:
            value = getattr(importlib.import_module(module_name), name)
        elif importlib.util.find_spec(f"{package}.{name}") is not None:
            value = importlib.import_module(f"{package}.{name}")
        else:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        setattr(sys.modules[package], name, value)  # later lookups skip __getattr__
        return value

    def __dir__() -> list[str]:
        return sorted(set(vars(sys.modules[package])) | set(exports))

    return __getattr__, __dir__
