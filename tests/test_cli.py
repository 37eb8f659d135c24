from __future__ import annotations

import subprocess
import sys

from spatialdp.cli import main


def test_info_prints_partition_summary(capsys) -> None:  # type: ignore[no-untyped-def]
    assert main(["info"]) == 0
    out = capsys.readouterr().out
    assert "regions=48" in out
    assert "neighbour pairs 105" in out


def test_console_script_runs() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "spatialdp.cli", "info"], capture_output=True, text=True, check=True
    )
    assert "us48-states" in result.stdout


def test_refusal_is_one_line_not_a_traceback(capsys, tmp_path) -> None:  # type: ignore[no-untyped-def]
    assert main(["demo", "--out", str(tmp_path), "--devices", "10"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("spatialdp: InvalidInput: --devices 10 is too small")
    assert "Traceback" not in err
    assert list(tmp_path.iterdir()) == []  # nothing written for a refused run
