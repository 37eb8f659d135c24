"""The analyst notebooks run top to bottom on a fresh kernel, and ship executed.

``tools/execute_notebooks.py`` executes them in place and stores their outputs with the
digest of their code cells. The quick tests below check the stored notebooks (executed,
no error, not stale: a code cell edited without executing again fails); the slow ones
execute every notebook again and compare which cells produce output (never the pixels:
release noise comes from OS entropy).
"""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path
from types import ModuleType
from typing import Any

import nbformat
import pytest

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
IDS = [p.name for p in NOTEBOOKS]


def _tool() -> ModuleType:
    spec = importlib.util.spec_from_file_location("execute_notebooks",
                                                  ROOT / "tools" / "execute_notebooks.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


TOOL = _tool()


def code_cells(notebook: nbformat.NotebookNode) -> list[Any]:
    return [cell for cell in notebook.cells if cell.cell_type == "code"]


def images(cell: Any) -> int:
    return sum("image/png" in o.get("data", {}) for o in cell.get("outputs", []))


def speaks(cell: Any) -> tuple[list[str], int]:
    """The kinds of output a cell shows (streams by name, stderr left out), and its figures."""
    kinds = {o.name if o.output_type == "stream" else o.output_type for o in cell.outputs}
    return sorted(kinds - {"stderr"}), images(cell)


def errors(notebook: nbformat.NotebookNode) -> list[Any]:
    return [o for cell in code_cells(notebook) for o in cell.outputs
            if o.get("output_type") == "error"]


@pytest.fixture(params=NOTEBOOKS, ids=IDS)
def stored(request: pytest.FixtureRequest) -> nbformat.NotebookNode:
    return nbformat.read(request.param, as_version=4)


def test_there_is_a_notebook() -> None:
    assert NOTEBOOKS


def test_stored_notebook_is_executed_from_its_current_source(
        stored: nbformat.NotebookNode) -> None:
    # editing a code cell without running tools/execute_notebooks.py again fails here
    recorded = stored.metadata.get("spatialdp", {}).get("source_sha256")
    assert recorded == TOOL.source_digest(stored), (
        "the stored outputs are stale: run python tools/execute_notebooks.py")
    counts = [cell.execution_count for cell in code_cells(stored)]
    assert counts == list(range(1, len(counts) + 1))  # one run, top to bottom


def test_stored_outputs_hold_no_error_and_every_figure(stored: nbformat.NotebookNode) -> None:
    assert not errors(stored)
    assert sum(images(c) for c in code_cells(stored)) == \
        stored.metadata["spatialdp"]["expected_figures"]


def test_stored_notebook_carries_no_volatile_metadata(stored: nbformat.NotebookNode) -> None:
    assert "language_info" not in stored.metadata
    assert not [c for c in stored.cells if "execution" in c.metadata]


def test_digest_changes_with_any_code_cell_and_ignores_outputs() -> None:
    notebook = nbformat.read(NOTEBOOKS[0], as_version=4)
    before = TOOL.source_digest(notebook)
    cell = code_cells(notebook)[-1]
    cell.outputs = []
    assert TOOL.source_digest(notebook) == before
    cell.source += "\n"
    assert TOOL.source_digest(notebook) != before


#: What fails after a wheel install: a path into the source tree next to the package.
SOURCE_TREE = re.compile(r"benchmarks[/.]|spatialdp\.__file__|\.\./")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_notebook_needs_no_source_tree(path: Path) -> None:
    # modulated_regression.ipynb loaded benchmarks/reproduce_modulated.py through a path
    # relative to spatialdp.__file__: after a wheel install there is no such file
    notebook = nbformat.read(path, as_version=4)
    assert not [c.source for c in code_cells(notebook) if SOURCE_TREE.search(c.source)]


#: Appended to a notebook (in memory) to read where its figure ``fig`` draws each point,
#: in axes coordinates (0..1), one list per axes.
POINTS = """
import json as _json
_where = []
for _ax in fig.axes:
    _to_axes = _ax.transData + _ax.transAxes.inverted()
    _where.append([[float(v) for v in _to_axes.transform(xy)]
                   for _c in _ax.containers for xy in _c.lines[0].get_xydata()])
print(_json.dumps(_where))
"""
#: Notebooks whose figure ``fig`` must show every estimator at its own place.
DISTINCT_POINTS = {"modulated_regression.ipynb"}


def hidden_points(axes: list[list[list[float]]], within: float = 0.02) -> list[Any]:
    """Pairs of points drawn within ``within`` of each other (axes fraction) on one axes."""
    return [(p, q) for points in axes for i, p in enumerate(points) for q in points[i + 1:]
            if abs(p[0] - q[0]) < within and abs(p[1] - q[1]) < within]


def test_hidden_points_finds_a_point_drawn_over_another() -> None:
    assert hidden_points([[[0.5, 0.5], [0.505, 0.51], [0.9, 0.5]]]) == \
        [([0.5, 0.5], [0.505, 0.51])]
    assert not hidden_points([[[0.5, 0.5]], [[0.5, 0.5]]])  # different axes


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_notebook_executes_as_stored(path: Path, tmp_path: Path) -> None:
    stored = nbformat.read(path, as_version=4)
    fresh = nbformat.read(path, as_version=4)
    check = path.name in DISTINCT_POINTS
    if check:
        fresh.cells.append(nbformat.v4.new_code_cell(POINTS))
    TOOL.execute(fresh, tmp_path)
    assert not errors(fresh)
    if check:
        where = json.loads(fresh.cells.pop().outputs[0]["text"])
        # three estimators near the mean's score were drawn as lines on top of one another
        assert not hidden_points(where)
    assert sum(images(c) for c in code_cells(fresh)) == \
        fresh.metadata["spatialdp"]["expected_figures"]
    # the stored outputs are those of the current code: each cell shows the same kinds of
    # output (stderr aside: a warning may depend on the noise drawn) and as many figures
    assert [speaks(c) for c in code_cells(fresh)] == [speaks(c) for c in code_cells(stored)]
