"""The package's import graph: no cycles, no upward imports, no borrowed private names.

Walks every module of :mod:`spatialdp` with :mod:`ast` (imports inside functions
and ``TYPE_CHECKING`` blocks count: a cycle there is still a cycle in the
design) and checks three rules:

1. the module graph has no cycle;
2. a subpackage imports only from the layers below it (``LAYERS``);
3. a private module or private name of a subpackage is imported only inside
   that subpackage.  Private modules at the top level (``spatialdp._validation``
   and the like) are the package's shared base layer and open to all.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1] / "spatialdp"

#: Subpackages from the bottom up; each may import only those before it.  The
#: top-level modules (``spatialdp.exceptions``, ``spatialdp._validation``, ...)
#: form the base and import no subpackage; the top-level ``__init__`` is the
#: facade over all of them.
LAYERS: tuple[str, ...] = (
    "privacy", "geo", "datasets", "viz", "federated", "smooth", "queries", "regression",
    "sampling", "cards", "audit", "flower", "demo", "cli",
)


def _modules() -> dict[str, Path]:
    found = {}
    for path in ROOT.rglob("*.py"):
        parts = path.relative_to(ROOT.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[name] = path
    return found


MODULES = _modules()


def _imports(name: str, path: Path) -> list[tuple[str, str | None, int]]:
    """Return ``(module, imported name or None, line)`` for each spatialdp import."""
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [(alias.name, None, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = ".".join(package[:len(package) - node.level + 1]
                                + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                found.append((sub, None, node.lineno) if sub in MODULES
                             else (base, alias.name, node.lineno))
    return [(_owning_module(m), attr, line) for m, attr, line in found
            if m.split(".")[0] == "spatialdp"]


def _private_attributes(name: str, path: Path) -> list[tuple[str, str, int]]:
    """Return ``(module, attribute, line)`` for each ``module._private`` read in a module.

    ``from spatialdp.geo import h3cells`` then ``h3cells._parents(...)`` borrows a
    private name as surely as importing it does.
    """
    tree = ast.parse(path.read_text(encoding="utf-8"))
    bound = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for alias in node.names:
                full = f"{node.module}.{alias.name}"
                if full in MODULES:
                    bound[alias.asname or alias.name] = full
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name in MODULES and alias.asname:
                    bound[alias.asname] = alias.name
    return [(bound[node.value.id], node.attr, node.lineno) for node in ast.walk(tree)
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
            and node.value.id in bound and node.attr.startswith("_")
            and not node.attr.startswith("__")]


def _owning_module(dotted: str) -> str:
    while dotted not in MODULES and "." in dotted:
        dotted = dotted.rsplit(".", 1)[0]
    return dotted


def _subpackage(module: str) -> str | None:
    """Return the subpackage a module belongs to (None for the top-level base)."""
    parts = module.split(".")
    if len(parts) == 1:
        return None
    in_package = len(parts) > 2 or MODULES[module].name == "__init__.py"
    return parts[1] if in_package or parts[1] in LAYERS else None


def _layer(subpackage: str) -> int:
    return LAYERS.index(subpackage) if subpackage in LAYERS else len(LAYERS)


EDGES = {name: _imports(name, path) for name, path in MODULES.items()}


def _cycles() -> list[list[str]]:
    graph = defaultdict(set)
    for source, targets in EDGES.items():
        graph[source] |= {t for t, _, _ in targets if t != source}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles = []

    def visit(v: str) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for module in sorted(MODULES):
        if module not in index:
            visit(module)
    return cycles


def test_the_walk_sees_the_package():
    assert len(MODULES) > 50
    regional = EDGES["spatialdp.federated.regional"]
    assert any(t == "spatialdp.privacy.pipeline" for t, _, _ in regional)
    packages = {p.name for p in ROOT.iterdir() if (p / "__init__.py").exists()}
    assert set(LAYERS) == packages | {"datasets"}  # datasets.py is a layer of its own


def test_there_are_no_import_cycles():
    assert _cycles() == []


def test_no_import_runs_up_the_layers():
    upward = []
    for source, targets in EDGES.items():
        if source == "spatialdp":
            continue  # the facade re-exports the public names of every layer
        here = _subpackage(source)
        for target, _, line in targets:
            there = _subpackage(target)
            if there is None or there == here:
                continue
            if here is None or _layer(there) > _layer(here):
                upward.append(f"{source}:{line} imports {target}")
    assert upward == []


def test_no_private_name_crosses_a_subpackage():
    borrowed = []
    for source, targets in EDGES.items():
        for target, attr, line in targets:
            there = _subpackage(target)
            if there is None or there == _subpackage(source):
                continue
            private_module = any(p.startswith("_") for p in target.split(".")[2:])
            private_name = attr is not None and attr.startswith("_") and not attr.startswith("__")
            if private_module or private_name:
                borrowed.append(f"{source}:{line} imports {attr or ''} from {target}")
        for target, attr, line in _private_attributes(source, MODULES[source]):
            if _subpackage(target) not in (None, _subpackage(source)):
                borrowed.append(f"{source}:{line} reads {target}.{attr}")
    assert borrowed == []


@pytest.mark.parametrize("rule", [_cycles])
def test_a_planted_cycle_is_found(rule, monkeypatch):
    a, b = "spatialdp.privacy.budget", "spatialdp.privacy.noise"
    monkeypatch.setitem(EDGES, a, [*EDGES[a], (b, None, 0)])
    monkeypatch.setitem(EDGES, b, [*EDGES[b], (a, None, 0)])
    assert any(a in c and b in c for c in rule())
