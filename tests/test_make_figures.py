"""``tools/make_figures.py`` draws every figure the docs show (it is run by hand, not here)."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def declared() -> dict[str, tuple[str, ...]]:
    spec = importlib.util.spec_from_file_location("make_figures",
                                                  ROOT / "tools" / "make_figures.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert set(module.FIGURES) == set(module.GROUPS)
    return dict(module.FIGURES)


def test_every_figure_in_docs_figures_has_a_group() -> None:
    names = [n for group in declared().values() for n in group]
    assert len(names) == len(set(names))
    assert set(names) == {p.name for p in (ROOT / "docs" / "figures").glob("*.png")}


def test_every_figure_a_page_shows_is_drawn() -> None:
    pages = [ROOT / "README.md", *(ROOT / "docs").glob("*.md")]
    shown = {m for page in pages for m in re.findall(r"figures/(\w+\.png)", page.read_text())}
    assert shown
    assert shown <= {n for group in declared().values() for n in group}
