"""The demo's progress bars: drawn on a terminal, silent otherwise or with --quiet."""

from __future__ import annotations

import io

from spatialdp.demo.progress import Progress


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_bars_are_drawn_on_a_terminal_only() -> None:
    for stream, quiet, drawn in ((_Terminal(), False, True), (_Terminal(), True, False),
                                 (io.StringIO(), False, False)):
        progress = Progress(quiet=quiet, stream=stream)
        with progress.step("epoch 0: rounds", total=4, unit="round") as tick:
            tick(1)
            tick(2)
        text = stream.getvalue()
        assert progress.enabled is drawn
        assert ("epoch 0: rounds" in text) is drawn
        if drawn:
            assert "0/4" in text
            assert "4/4" in text  # completed when the step ends, whatever was ticked
        assert progress.seconds["epoch 0: rounds"] >= 0.0
