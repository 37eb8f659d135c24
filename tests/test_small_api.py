"""Small API behaviours an analyst expects: a report is a mapping, plots take GeoPandas'
outline keywords, summaries never print "None", the CLI has --version and survives ``| head``."""

from __future__ import annotations

import subprocess
import sys

import matplotlib
import numpy as np
import pytest

matplotlib.use("Agg")

from spatialdp import __version__
from spatialdp.cli import main
from spatialdp.datasets import us_states_partition
from spatialdp.exceptions import InvalidInput
from tests._loss_report import simulated_loss_report


@pytest.fixture(scope="module")
def report():
    return simulated_loss_report(us_states_partition(), loss=1.0)


def test_a_report_is_a_mapping_of_metric_frames(report) -> None:
    assert "loss" in report
    assert "ratio" not in report
    assert 0 not in report  # a wrong key type is simply absent, as in a dict
    assert len(report) == 1
    assert list(report) == ["loss"]
    assert {name: len(report[name]) for name in report} == {"loss": 48}


def test_a_summary_without_a_round_names_none(report) -> None:
    assert report.round_index is None
    assert "None" not in report.summary()


def test_plot_takes_geopandas_outline_keywords(report) -> None:
    import matplotlib.pyplot as plt

    ax = report.plot("loss", edgecolor="black", linewidth=1.5)
    drawn = [c for c in ax.collections if str(c.get_gid()).startswith("reliability:")]
    assert drawn
    for collection in drawn:
        assert np.allclose(collection.get_edgecolor()[:, :3], 0.0)
        assert np.allclose(collection.get_linewidth(), 1.5)
    plt.close(ax.figure)
    with pytest.raises(InvalidInput, match="edgecolor='nonsense' is not a matplotlib colour"):
        report.plot("loss", edgecolor="nonsense")
    with pytest.raises(InvalidInput, match="linewidth"):
        report.plot("loss", linewidth=-1)


def test_the_cli_says_its_version(capsys) -> None:
    with pytest.raises(SystemExit) as stop:
        main(["--version"])
    assert stop.value.code == 0
    assert capsys.readouterr().out.strip() == f"spatialdp {__version__}"


def test_the_cli_survives_a_reader_that_leaves() -> None:
    """`spatialdp info | head -1`: no traceback, no 'Exception ignored' on stderr."""
    # The child writes only after the reader has gone, so every run meets the closed pipe.
    code = ("import sys, time; from spatialdp.cli import main; time.sleep(1.0); "
            "sys.exit(main(['info']))")
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    assert proc.stdout is not None
    proc.stdout.close()  # the reader leaves before the first line
    _, err = proc.communicate(timeout=120)  # reads and closes stderr
    assert b"Traceback" not in err
    assert b"Exception ignored" not in err
    assert b"Broken pipe" not in err
    assert proc.returncode == 1
