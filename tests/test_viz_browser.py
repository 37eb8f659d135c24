"""The folium map in a real browser: headless Chromium renders it, and we look at the pixels.

Needs ``chromium`` on the PATH and Leaflet on disk (Debian's ``libjs-leaflet``), since
the test runs offline and folium loads Leaflet from a CDN; skipped otherwise.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from spatialdp.viz import explore_report
from tests.test_viz import make_report

LEAFLET = Path("/usr/share/javascript/leaflet")
JQUERY = Path("/usr/share/javascript/jquery/jquery.min.js")
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")

pytestmark = [
    pytest.mark.skipif(CHROMIUM is None, reason="no chromium on the PATH (apt install chromium)"),
    pytest.mark.skipif(not (LEAFLET / "leaflet.js").exists(),
                       reason="Leaflet is not on disk for an offline render "
                              "(apt install libjs-leaflet)"),
]


def _offline(html: str) -> str:
    """Point folium's CDN Leaflet (and jQuery) at the local copies."""
    html = re.sub(r"https://cdn\.jsdelivr\.net/npm/leaflet@[^/]+/dist/leaflet\.js",
                  (LEAFLET / "leaflet.js").as_uri(), html)
    html = re.sub(r"https://cdn\.jsdelivr\.net/npm/leaflet@[^/]+/dist/leaflet\.css",
                  (LEAFLET / "leaflet.css").as_uri(), html)
    if JQUERY.exists():
        html = re.sub(r"https://code\.jquery\.com/jquery-[0-9.]+\.min\.js", JQUERY.as_uri(),
                      html)
    return html


def test_folium_map_renders_with_its_reliability_key(tmp_path: Path) -> None:
    import matplotlib.image as mpimg

    m = explore_report(make_report(), tiles=None)
    page = tmp_path / "map.html"
    page.write_text(_offline(m.get_root().render()))
    shot = tmp_path / "map.png"
    assert CHROMIUM is not None
    subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu",
                    f"--screenshot={shot}", "--window-size=1200,800",
                    "--virtual-time-budget=4000", page.as_uri()],
                   check=True, capture_output=True, timeout=120)
    image = mpimg.imread(shot)[..., :3]
    assert image.shape[:2] == (800, 1200)
    # The states are drawn: many pixels of viridis' purple-blue-green body.
    r, g, b = image[..., 0], image[..., 1], image[..., 2]
    coloured = (np.abs(r - g) + np.abs(g - b) + np.abs(r - b)) > 0.25
    assert coloured.mean() > 0.05
    # The fixed key sits at the bottom left: a white box with dark text.
    corner = image[620:790, 10:340]
    assert (corner.mean(axis=-1) > 0.95).mean() > 0.5
    assert (corner.mean(axis=-1) < 0.4).mean() > 0.01
    assert "Opacity = reliability" in page.read_text()
