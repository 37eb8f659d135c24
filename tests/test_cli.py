from __future__ import annotations

import subprocess
import sys

from spatialdp.cli import main


def test_info_prints_partition_summary(capsys) -> None:  # type: ignore[no-untyped-def]
    assert main(["info"]) == 0
    out = capsys.readouterr().out
    assert "regions=48" in out and "neighbour pairs 105" in out


def test_console_script_runs() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "spatialdp.cli", "info"], capture_output=True, text=True, check=True
    )
    assert "us48-states" in result.stdout
