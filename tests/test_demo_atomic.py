"""Atomic output folders (spatialdp._atomic): a run killed at ANY point of its publication
leaves either the previous complete run or a folder that does not look complete."""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
from pathlib import Path

import pytest

from spatialdp._atomic import StagedFolder, process_alive
from spatialdp.exceptions import InvalidInput

MARKERS = ("model_card.md", "run.json")


def _build(stage: StagedFolder, tag: str, names: list[str]) -> None:
    for name in names:
        path = stage.path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(tag)
    (stage.path / "model_card.md").write_text(tag)
    (stage.path / "run.json").write_text(json.dumps({"tag": tag, "files": names}))


def _complete(out: Path) -> str | None:
    """The tag of the run the folder holds, if it looks complete (and is consistent)."""
    manifest = out / "run.json"
    if not manifest.exists():
        return None
    data = json.loads(manifest.read_text())
    for name in [*data["files"], "model_card.md"]:
        assert (out / name).read_text() == data["tag"], f"{name} is not from {data['tag']}"
    return str(data["tag"])


def _publish_and_die(out: str, names: list[str], kill_after: int) -> None:
    steps = 0

    def hook(_: str) -> None:
        nonlocal steps
        steps += 1
        if steps > kill_after:
            os.kill(os.getpid(), signal.SIGKILL)

    with StagedFolder(out, markers=MARKERS, keep=("ledger.sqlite",),
                      previous=["old_only.txt"]) as stage:
        _build(stage, "B", names)
        stage.publish(after_move=hook)


def test_publish_moves_everything_markers_last(tmp_path: Path) -> None:
    out = tmp_path / "out"
    order: list[str] = []
    with StagedFolder(out, markers=MARKERS, late=("log.csv",)) as stage:
        staging = stage.path
        assert staging.parent == tmp_path
        assert staging.name.startswith(".out.staging-")
        _build(stage, "A", ["a.png", "log.csv", "reports/r1.csv"])
        stage.publish(after_move=order.append)
    assert order[0] == "<retract>"
    assert order[-3:] == ["log.csv", *MARKERS]
    assert _complete(out) == "A"
    assert not staging.exists()


def test_a_kill_at_every_point_of_publication_never_looks_complete(tmp_path: Path) -> None:
    out = tmp_path / "out"
    names = ["a.png", "b.png", "reports/r1.csv"]
    with StagedFolder(out, markers=MARKERS, keep=("ledger.sqlite",)) as stage:
        _build(stage, "A", [*names, "old_only.txt"])
        stage.publish()
    (out / "ledger.sqlite").write_text("ledger")
    ctx = multiprocessing.get_context("fork")
    steps = 1 + len(names) + len(MARKERS)  # retract, files, markers
    for kill_after in range(steps):
        child = ctx.Process(target=_publish_and_die, args=(str(out), names, kill_after))
        child.start()
        child.join(30)
        assert child.exitcode == -signal.SIGKILL
        # Killed mid-publication: never a mix that looks complete; killed after the last
        # rename (the manifest), the new run is complete.
        assert _complete(out) == (None if kill_after < steps - 1 else "B"), kill_after
        assert (out / "ledger.sqlite").read_text() == "ledger"  # never moved or staged
        # The next run removes the dead run's staging folder and publishes cleanly.
        with StagedFolder(out, markers=MARKERS, keep=("ledger.sqlite",),
                          previous=["old_only.txt"]) as stage:
            assert not list(tmp_path.glob(".out.staging-*"))[1:]  # only our own remains
            _build(stage, "A", [*names, "old_only.txt"])
            stage.publish()
        assert _complete(out) == "A"
    # A run that finishes replaces the old one and removes files it no longer writes.
    _publish_and_die(str(out), names, kill_after=10**6)
    assert _complete(out) == "B"
    assert not (out / "old_only.txt").exists()
    assert (out / "ledger.sqlite").read_text() == "ledger"


def test_an_exception_removes_the_staging_folder_and_publishes_nothing(tmp_path: Path
                                                                      ) -> None:
    out = tmp_path / "out"

    def failing_run() -> None:
        with StagedFolder(out, markers=MARKERS) as stage:
            _build(stage, "A", ["a.png"])
            raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        failing_run()
    assert [p.name for p in out.iterdir()] == []  # the lock file goes with the run
    assert not list(tmp_path.glob(".out.staging-*"))


def test_unwritable_or_file_targets_are_refused(tmp_path: Path) -> None:
    afile = tmp_path / "afile"
    afile.write_text("x")
    with pytest.raises(InvalidInput, match="is a file"), StagedFolder(afile):
        pass
    with pytest.raises(InvalidInput, match="cannot be written"), StagedFolder(afile / "sub"):
        pass
    assert afile.read_text() == "x"


def test_one_run_at_a_time_per_folder(tmp_path: Path) -> None:
    out = tmp_path / "out"
    with StagedFolder(out):
        with pytest.raises(InvalidInput, match="is being written by another run"):
            StagedFolder(out).__enter__()
    with StagedFolder(out):  # released on exit
        pass


def test_stale_staging_of_a_live_process_is_kept(tmp_path: Path) -> None:
    live = tmp_path / f".out.staging-{os.getpid()}-abc"
    dead = tmp_path / ".out.staging-999999999-abc"
    live.mkdir()
    dead.mkdir()
    assert process_alive(os.getpid())
    assert not process_alive(999_999_999)
    with StagedFolder(tmp_path / "out"):
        pass
    assert live.exists()
    assert not dead.exists()
