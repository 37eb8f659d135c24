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


def _chromium(page: Path, *args: str) -> subprocess.CompletedProcess[str]:
    assert CHROMIUM is not None
    return subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu",
                           "--window-size=1200,800", "--virtual-time-budget=4000", *args,
                           page.as_uri()], check=True, capture_output=True, text=True,
                          timeout=120)


def test_folium_map_in_chromium_has_the_png_classes_and_colours(tmp_path: Path) -> None:
    """Issue 23: the folium map as Chromium draws it (its SVG paths, read from the DOM,
    and its pixels) gives every region the colour the PNG gives it (read back as pixels at
    the region's representative point), for the default classes and for a ramp whose
    out-of-range regions are marked."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.image as mpimg
    import matplotlib.pyplot as plt
    from matplotlib.colors import to_rgb

    from spatialdp.viz import plot_uncertainty_choropleth
    from spatialdp.viz._explore import region_class_name
    from tests.test_honest_classes import DPI, png_colours, structured_report

    report = structured_report()
    for options in ({}, {"scheme": None, "vmax": 1.0}):
        _, ax = plt.subplots(figsize=(10, 6.5), dpi=DPI)
        plot_uncertainty_choropleth(report, ax=ax, **options)
        pixels = png_colours(ax, report, tmp_path / "map.png")
        plt.close(ax.figure)
        page = tmp_path / "map.html"
        page.write_text(_offline(explore_report(report, tiles=None, **options)
                                 .get_root().render()))
        dom = _chromium(page, "--dump-dom").stdout
        paths = {m.group(1): m.group(0) for m in re.finditer(
            r'<path class="(spatialdp-region-[^ "]+)[^"]*"[^>]*>', dom)}
        drawn = 0
        for rid, suppressed in zip(report.index, report.suppressed, strict=True):
            path = paths[region_class_name(rid)]
            fill = re.search(r'fill="(#[0-9a-f]{6})"', path)
            opacity = re.search(r'fill-opacity="([0-9.]+)"', path)
            assert fill is not None
            assert opacity is not None
            if suppressed:
                continue
            shown = np.asarray(to_rgb(fill.group(1))) * float(opacity.group(1)) + (
                1 - float(opacity.group(1)))
            assert np.abs(shown - pixels[rid]).max() <= 3 / 255, (rid, shown, pixels[rid])
            marked = 'stroke-dasharray="6 3"' in path
            assert marked == (options.get("vmax") is not None and report.value[rid] > 1.0)
            drawn += 1
        assert drawn == int((~report.suppressed).sum())
        # The screenshot shows each opaque class colour as the PNG does.
        shot = tmp_path / "map_screen.png"
        _chromium(page, f"--screenshot={shot}")
        image = np.round(mpimg.imread(shot)[..., :3] * 255).astype(int)
        for rid in report.index[(report.reliability == "high").to_numpy()]:
            colour = np.round(pixels[rid] * 255).astype(int)
            assert (np.abs(image - colour).max(axis=-1) <= 3).sum() > 20, rid
