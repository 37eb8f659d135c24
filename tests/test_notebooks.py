"""The analyst notebooks run top to bottom on a fresh kernel."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

NOTEBOOKS = sorted((Path(__file__).resolve().parent.parent / "notebooks").glob("*.ipynb"))


#: The backend a Jupyter kernel draws inline with (what a user's notebook uses). The kernel
#: inherits the environment: under ``MPLBACKEND=Agg`` (CI, headless shells) figures would not
#: be displayed, so the figure counts below would fail.
INLINE_BACKEND = "module://matplotlib_inline.backend_inline"

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_executes(path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MPLBACKEND", INLINE_BACKEND)
    notebook = nbformat.read(path, as_version=4)
    NotebookClient(notebook, timeout=600, kernel_name="python3",
                   resources={"metadata": {"path": str(tmp_path)}}).execute()
    errors = [o for cell in notebook.cells for o in cell.get("outputs", [])
              if o.get("output_type") == "error"]
    assert not errors
    images = [o for cell in notebook.cells for o in cell.get("outputs", [])
              if "image/png" in o.get("data", {})]
    # each notebook states how many figures it draws (metadata.spatialdp.expected_figures)
    assert len(images) == notebook.metadata["spatialdp"]["expected_figures"]


def test_there_is_a_notebook() -> None:
    assert NOTEBOOKS
