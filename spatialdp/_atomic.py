"""Atomic output: files written under a temporary name, folders built aside, then renamed.

One file: :func:`write_atomically` (and :func:`write_text_atomically`) write
through a temporary name in the file's own folder and rename it over the
target, so a reader sees the old file or the new one, never half of one.

A folder:

A run writes its files into a hidden *staging* folder next to the output
folder (``.<name>.staging-<pid>-<random>``, on the same file system, so a
rename is atomic) and publishes them only when every one of them exists:

1. the *markers* (the files that make a folder look complete: the run
   manifest and the model card) of the previous run are removed first, so
   from this moment the folder no longer looks complete;
2. every other file is moved in with :func:`os.replace`, files of the
   previous run that this run does not write are removed;
3. the markers are moved in last, the manifest at the very end.

A run killed at any point (Ctrl-C, SIGKILL, power loss) therefore leaves
either the previous complete run, or a folder without a manifest, which no
reader takes for a finished run; the staging folder it leaves behind is
removed by the next run into the same folder (when its process is gone).
Files named in ``keep`` (the ledger) live in the output folder itself and are
never staged, moved or removed. One run at a time writes into a folder: it
holds an exclusive ``flock`` on ``<out>/.spatialdp.lock``, which the operating
system releases when the process ends, however it ends; the run removes the
file when it ends, so a finished folder holds only its outputs.

Examples
--------
>>> import tempfile
>>> from pathlib import Path
>>> out = Path(tempfile.mkdtemp()) / "run"
>>> with StagedFolder(out, markers=("run.json",)) as stage:
...     _ = (stage.path / "a.txt").write_text("a")
...     _ = (stage.path / "run.json").write_text("{}")
...     published = stage.publish()
>>> sorted(p.name for p in out.iterdir())
['a.txt', 'run.json']
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from types import TracebackType

from spatialdp.exceptions import InvalidInput

__all__ = ["LOCK", "StagedFolder", "fsync_folder", "make_folder", "process_alive",
           "write_atomically", "write_text_atomically"]

_STAGING = ".staging-"
#: The lock file a run holds in the output folder while it runs (never published).
LOCK = ".spatialdp.lock"


def write_atomically(path: str | os.PathLike[str], writer: Callable[[str], object]) -> Path:
    """Write ``path`` through a temporary name in its folder, then rename: never half a file.

    ``writer(tmp)`` creates the file at ``tmp``, which does not exist yet (GPKG
    and Parquet writers refuse an existing empty file) and keeps the target's
    suffix (drivers pick formats by it). The file gets the permissions
    ``open()`` would give it, not ``mkstemp``'s 0600. On any error the
    temporary file is removed and the target is left as it was.

    Examples
    --------
    >>> import tempfile
    >>> target = Path(tempfile.mkdtemp()) / "a.txt"
    >>> write_atomically(target, lambda tmp: Path(tmp).write_text("a")).read_text()
    'a'
    """
    target = Path(path)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.",
                               suffix=target.suffix or ".tmp")
    os.close(fd)
    os.unlink(tmp)
    try:
        writer(tmp)
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return target


def make_folder(folder: Path) -> Path:
    """Create ``folder`` (and its parents) or refuse with the reason and the fix."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise InvalidInput(f"folder={os.fspath(folder)!r} cannot be created "
                           f"({err.strerror}); pass a writable folder") from err
    return folder


def write_text_atomically(path: str | os.PathLike[str], text: str) -> Path:
    """Write ``text`` (UTF-8) to ``path`` with :func:`write_atomically`."""
    return write_atomically(path, lambda tmp: Path(tmp).write_text(text, encoding="utf-8"))


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def process_alive(pid: int) -> bool:
    """Whether a process with this id exists (a stale staging folder's owner)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by someone else
        return True
    except OSError:
        return False
    return True


def fsync_folder(folder: Path) -> None:
    """Flush a folder's entries to disk (renames survive a power loss); best effort."""
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _same_file(fd: int, path: Path) -> bool:
    """Whether ``path`` still names the open file ``fd`` (not removed or replaced)."""
    try:
        named = os.stat(path)
    except OSError:
        return False
    held = os.fstat(fd)
    return (named.st_dev, named.st_ino) == (held.st_dev, held.st_ino)


def _unwritable(path: Path, err: OSError) -> InvalidInput:
    reason = err.strerror or type(err).__name__
    return InvalidInput(f"out={os.fspath(path)!r} cannot be written ({reason}); "
                        "pass a folder you can write to")


class StagedFolder:
    """Stage a run's files beside ``out`` and publish them into it atomically.

    Parameters
    ----------
    out : path
        The output folder (created if missing; its parent must be writable).
    markers : sequence of str
        Files that make the folder look complete, in publication order; the
        last one (the manifest) is published last and removed first.
    keep : sequence of str
        Files of ``out`` that are never staged, moved or removed (the ledger).
    previous : iterable of str, optional
        Files of the previous run to remove when this run does not write them.
    late : sequence of str
        Files moved in after every other file and just before the markers, but
        not removed first (e.g. a run log that must survive an interruption).
    """

    def __init__(self, out: str | os.PathLike[str], *, markers: Sequence[str] = (),
                 keep: Sequence[str] = (), previous: Iterable[str] = (),
                 late: Sequence[str] = ()) -> None:
        self.out = Path(os.path.abspath(out))
        self.markers = tuple(markers)
        self.late = tuple(late)
        self.keep = frozenset(keep)
        self.previous = [p for p in previous if p not in self.keep]
        self.path = self.out  # set on entry
        self._entered = False

    # ----------------------------------------------------------------- set up
    def __enter__(self) -> StagedFolder:
        if self.out.exists() and not self.out.is_dir():
            raise InvalidInput(f"out={os.fspath(self.out)!r} is a file; pass a folder "
                               "(it is created if missing)")
        try:
            self.out.mkdir(parents=True, exist_ok=True)
            probe = tempfile.NamedTemporaryFile(dir=self.out, prefix=".probe-", delete=True)
            probe.close()
        except OSError as err:
            raise _unwritable(self.out, err) from err
        self._lock()
        self.remove_stale()
        try:
            self.path = Path(tempfile.mkdtemp(
                prefix=f".{self.out.name}{_STAGING}{os.getpid()}-", dir=self.out.parent))
        except OSError as err:
            raise _unwritable(self.out.parent, err) from err
        self._entered = True
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self._entered and self.path.exists():
            shutil.rmtree(self.path, ignore_errors=True)
        self._unlock()

    def _lock(self) -> None:
        """Hold an exclusive lock on ``out`` for the run (released by the OS on any exit).

        The lock file is removed when the run ends (:meth:`_unlock`), so the folder
        holds nothing but outputs. A run that opened the file just before its
        holder removed it may lock the removed file: it then sees that the path no
        longer names the file it locked, and locks the new one instead.
        """
        import fcntl

        while True:
            try:
                fd = os.open(self.out / LOCK, os.O_RDWR | os.O_CREAT, 0o644)
            except OSError as err:
                raise _unwritable(self.out, err) from err
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                os.close(fd)
                raise InvalidInput(f"out={os.fspath(self.out)!r} is being written by another "
                                   "run; wait for it to finish or pass another folder") from None
            if _same_file(fd, self.out / LOCK):
                self._lock_fd: int | None = fd
                return
            os.close(fd)  # locked a file its holder had just removed: lock the new one

    def _unlock(self) -> None:
        fd = getattr(self, "_lock_fd", None)
        if fd is not None:
            # Removed while still held, then released: no lock file is left in the folder.
            with contextlib.suppress(OSError):
                (self.out / LOCK).unlink()
            os.close(fd)  # closing the descriptor releases the lock
            self._lock_fd = None

    def stale(self) -> list[Path]:
        """Staging folders of earlier runs into ``out`` whose process is gone."""
        found = []
        for path in self.out.parent.glob(f".{self.out.name}{_STAGING}*"):
            pid_text = path.name[len(f".{self.out.name}{_STAGING}"):].split("-", 1)[0]
            if path.is_dir() and pid_text.isdigit() and not process_alive(int(pid_text)):
                found.append(path)
        return found

    def remove_stale(self) -> list[Path]:
        """Remove the staging folders left by interrupted runs; return them."""
        stale = self.stale()
        for path in stale:
            shutil.rmtree(path, ignore_errors=True)
        return stale

    # ----------------------------------------------------------------- publish
    def staged_files(self) -> list[str]:
        """Every staged file, as a POSIX path relative to the staging folder."""
        files = [p.relative_to(self.path).as_posix() for p in self.path.rglob("*")
                 if p.is_file() or p.is_symlink()]
        return sorted(f for f in files if f not in self.keep)

    def publish(self, *, after_move: Callable[[str], None] | None = None) -> list[Path]:
        """Move the staged files into ``out``, markers last; return the published paths.

        Staged files named in ``keep`` are dropped (never moved over the live copy).
        ``after_move(name)`` is called after each step (``"<retract>"``, then every
        file name), e.g. to interrupt the publication at a chosen point in a test.
        """
        files = self.staged_files()
        for name in self.keep:
            staged = self.path / name
            if staged.is_symlink() or staged.exists():
                staged.unlink()
        ordered = ([f for f in files if f not in self.markers and f not in self.late]
                   + [f for f in self.late if f in files]
                   + [m for m in self.markers if m in files])
        try:
            for name in reversed(self.markers):  # the manifest first: no longer complete
                (self.out / name).unlink(missing_ok=True)
            fsync_folder(self.out)
            if after_move is not None:
                after_move("<retract>")
            for name in self.previous:
                if name not in files and name not in self.markers:
                    (self.out / name).unlink(missing_ok=True)
            for rel in ordered:
                target = self.out / rel
                target.parent.mkdir(parents=True, exist_ok=True)
                os.replace(self.path / rel, target)
                if rel in self.markers:
                    fsync_folder(target.parent)
                if after_move is not None:
                    after_move(rel)
            fsync_folder(self.out)
        except OSError as err:
            raise _unwritable(self.out, err) from err
        shutil.rmtree(self.path, ignore_errors=True)
        return [self.out / rel for rel in ordered]
