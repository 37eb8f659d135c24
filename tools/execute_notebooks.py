"""Execute every notebook in place and store its outputs, so the notebooks ship executed.

Run from the repository root, in an environment with the test extra installed::

    python tools/execute_notebooks.py                 # all of notebooks/*.ipynb
    python tools/execute_notebooks.py notebooks/quick_start.ipynb
    python tools/execute_notebooks.py --installed copy.ipynb   # the installed spatialdp

Each notebook runs top to bottom on a fresh ``python3`` kernel (from a temporary
folder, with this checkout first on ``PYTHONPATH``), with the inline backend a user's
Jupyter draws with, and is written back with its outputs. What would make a diff noisy
is left out: no execution timestamps, no kernel version (``language_info``), PNGs at a
modest resolution. The notebook's metadata records the SHA-256 of its code cells
(:func:`source_digest`); ``tests/test_notebooks.py`` fails when a code cell was edited
without executing the notebook again, or when a stored output is an error.

A notebook that raises is not written (the error is printed, the exit status is 1).
Release noise comes from OS entropy, so the numbers and the figures differ on every run.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sys
import tempfile
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"
#: The backend a Jupyter kernel draws inline with. The kernel inherits the environment:
#: under ``MPLBACKEND=Agg`` (CI, headless shells) figures would not be displayed.
INLINE_BACKEND = "module://matplotlib_inline.backend_inline"
#: Resolution of the stored PNGs (matplotlib's default is 100 dpi), set on the kernel's
#: command line as a user sets it in ``ipython_kernel_config.py``.
FIGURE_DPI = 80
KERNEL_ARGUMENTS = [f"--InlineBackend.rc={{'figure.dpi': {FIGURE_DPI}}}"]
#: Where the notebook metadata keeps what this tool recorded.
KEY = "spatialdp"


def source_digest(notebook: nbformat.NotebookNode) -> str:
    """Return the SHA-256 of the notebook's code cells, in order (outputs not included)."""
    digest = hashlib.sha256()
    for cell in notebook.cells:
        if cell.cell_type == "code":
            digest.update(cell.source.encode("utf-8"))
            digest.update(b"\0")
    return digest.hexdigest()


def kernel_environment(checkout: bool = True) -> dict[str, str]:
    """Return the environment the kernel inherits: inline figures, this checkout first.

    With ``checkout=False`` the kernel imports the installed spatialdp (a wheel's).
    """
    path = os.environ.get("PYTHONPATH", "")
    first = str(ROOT) if checkout else ""
    return {"MPLBACKEND": INLINE_BACKEND,
            "PYTHONPATH": os.pathsep.join(p for p in (first, path) if p)}


def execute(notebook: nbformat.NotebookNode, folder: Path, *,
            checkout: bool = True) -> nbformat.NotebookNode:
    """Execute ``notebook`` (in place) on a fresh kernel working in ``folder``; return it.

    ``checkout=False`` runs it against the installed spatialdp instead of this checkout.
    """
    for cell in notebook.cells:  # what a former run stored must not survive a failed cell
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
            cell.metadata.pop("execution", None)
    client = NotebookClient(notebook, timeout=600, kernel_name="python3",
                            record_timing=False, extra_arguments=KERNEL_ARGUMENTS,
                            resources={"metadata": {"path": str(folder)}})
    environment = kernel_environment(checkout)
    saved = {k: os.environ.get(k) for k in environment}
    os.environ.update(environment)
    try:
        client.execute()
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    return notebook


def clean(notebook: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """Drop what changes from machine to machine and record the code cells' digest."""
    notebook.metadata.pop("language_info", None)
    notebook.metadata.pop("widgets", None)
    for cell in notebook.cells:
        cell.metadata.pop("execution", None)
    notebook.metadata.setdefault(KEY, {})["source_sha256"] = source_digest(notebook)
    return notebook


def run(path: Path, *, checkout: bool = True) -> float:
    """Execute the notebook at ``path`` and write it back with its outputs; return seconds."""
    notebook = nbformat.read(path, as_version=4)
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="spatialdp-notebook-") as folder:
        execute(notebook, Path(folder), checkout=checkout)
    seconds = time.perf_counter() - start
    nbformat.validate(notebook)
    nbformat.write(clean(notebook), path)
    return seconds


def main(argv: list[str] | None = None) -> int:
    """Execute the notebooks named (default: all of ``notebooks/``); return the exit status."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="*", type=Path,
                        default=sorted(NOTEBOOKS.glob("*.ipynb")))
    parser.add_argument("--installed", action="store_true",
                        help="run against the installed spatialdp, not this checkout "
                             "(CI's wheel check runs copies of the notebooks so)")
    args = parser.parse_args(argv)
    status = 0
    total = 0.0
    for path in args.paths:
        try:
            seconds = run(path, checkout=not args.installed)
        except CellExecutionError as error:
            print(f"{path}: FAILED, not written\n{error}", file=sys.stderr)
            status = 1
            continue
        total += seconds
        print(f"{path}: {seconds:.1f} s, {path.stat().st_size / 1024:.0f} KiB", flush=True)
    print(f"total {total:.1f} s")
    return status


if __name__ == "__main__":
    sys.exit(main())
