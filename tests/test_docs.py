"""Every Python block of the README and of ``docs/`` runs, top to bottom, page by page.

A page's blocks share one namespace (a later block may use an earlier one's names) and
run in a fresh folder, as a reader would paste them. A page whose blocks are still
sketches (names the reader is assumed to have) is listed in :data:`SKETCHES` with what
it lacks; :func:`test_every_page_is_run_or_listed` keeps that list honest.
"""

from __future__ import annotations

import re
from pathlib import Path

import matplotlib
import pytest

matplotlib.use("Agg")

ROOT = Path(__file__).resolve().parent.parent
PAGES = sorted([ROOT / "README.md", *(ROOT / "docs").glob("*.md")])
BLOCK = re.compile(r"^```python\n(.*?)^```", re.MULTILINE | re.DOTALL)

#: Pages whose blocks are not runnable as written yet, and the names they assume.
SKETCHES: dict[str, str] = {
    "docs/audit.md": "partition, loss_spec, client_reports, tempfile",
    "docs/flower.md": "a running Flower server; NumPyClient, per_example_loss",
    "docs/model_card.md": "states, loss, ratio, errors, strata, coverage, reports, grid",
    "docs/scale.md": "examples/ and pings/ Parquet folders, loss, states, target",
    "docs/cards.md": "a spatialdp-demo run folder",
}


def blocks(page: Path) -> list[str]:
    return BLOCK.findall(page.read_text())


def relative(page: Path) -> str:
    return page.relative_to(ROOT).as_posix()


RUN = [p for p in PAGES if blocks(p) and relative(p) not in SKETCHES]


@pytest.mark.parametrize("page", RUN, ids=[relative(p) for p in RUN])
def test_page_runs(page: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import matplotlib.pyplot as plt

    monkeypatch.chdir(tmp_path)
    namespace: dict[str, object] = {"__name__": f"docs:{relative(page)}"}
    try:
        for number, code in enumerate(blocks(page), start=1):
            exec(compile(code, f"{relative(page)} block {number}", "exec"), namespace)
    finally:
        plt.close("all")


def test_every_page_is_run_or_listed() -> None:
    with_code = {relative(p) for p in PAGES if blocks(p)}
    assert set(SKETCHES) <= with_code, "a listed page has no Python block any more"
    assert {relative(p) for p in RUN} == with_code - set(SKETCHES)
    assert "README.md" in {relative(p) for p in RUN}  # the README's example always runs
