"""Participation across rounds: who took part how often this epoch, saved to disk safely.

A :class:`ParticipationState` holds, for every client of the fleet, its stratum
and how many rounds it joined in the current epoch (``uint16``: 2 MB for 10^6
clients), plus the epoch's merges, rounds and coverage history. It is saved as
one ``.npz`` file with a JSON header: the format version, the strata version,
the epoch's charge, and a SHA-256 digest of everything else. On load, a file of
another format or strata version is refused, and a truncated or edited file is
detected (the digest guards against accidents and naive edits; an adversary who
can rewrite the file can recompute it, so keep the file where clients cannot).
"""

from __future__ import annotations

import hashlib
import json
import os
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from spatialdp._atomic import write_atomically
from spatialdp._validation import check_count, fail
from spatialdp.exceptions import PartitionMismatch, StateFileError
from spatialdp.geo.partition import MAX_PARTITION_CELLS
from spatialdp.sampling.merges import Merge
from spatialdp.sampling.policy import ParticipationPolicy

__all__ = ["STATE_FORMAT", "ParticipationState", "StateFileError"]

#: Version of the file layout; a file of another layout is refused.
STATE_FORMAT = 1




@dataclass
class ParticipationState:
    """Per-client participation in the current epoch, and the epoch's record.

    Build one with :meth:`StratifiedSampler.new_state`, which charges the epoch;
    load one with :meth:`load`.

    Attributes
    ----------
    strata_version : str
    policy : ParticipationPolicy
    epoch : int
    client_stratum : numpy.ndarray of int32
        Stratum position of each client (client index = position in this array).
    used : numpy.ndarray of uint16
        Rounds each client joined this epoch.
    entropy : int
        The secret the round seeds are derived from (with epoch and round id).
    groups : numpy.ndarray of int64
        Merge group (smallest member position) of each stratum this epoch.
    merges : list of Merge
    rounds : list of int
        Round ids selected this epoch, in order.
    history : list of dict
        One summary per round (score, wanted, filled, blind strata...).
    selected : numpy.ndarray of int64
        Clients selected per stratum this epoch (for coverage).
    charge : dict
        What the epoch's per-client epsilon was charged to (target metadata).
    """

    strata_version: str
    policy: ParticipationPolicy
    epoch: int
    client_stratum: NDArray[np.int32]
    used: NDArray[np.uint16]
    entropy: int
    groups: NDArray[np.int64]
    merges: list[Merge] = field(default_factory=list)
    rounds: list[int] = field(default_factory=list)
    history: list[dict[str, Any]] = field(default_factory=list)
    selected: NDArray[np.int64] = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    charge: dict[str, Any] = field(default_factory=dict)

    @property
    def n_clients(self) -> int:
        """Clients in the fleet."""
        return int(self.client_stratum.size)

    def eligible_per_stratum(self, n_strata: int) -> NDArray[np.int64]:
        """Return the clients still under the cap, per stratum."""
        n_strata = check_count(n_strata, "n_strata", high=MAX_PARTITION_CELLS)
        if self.client_stratum.size and n_strata <= int(self.client_stratum.max()):
            raise fail("n_strata", n_strata, f"is at most the largest stratum position of the "
                       f"clients ({int(self.client_stratum.max())})", "pass Strata.n_strata")
        ok = self.used < self.policy.participation_cap
        counts: NDArray[np.int64] = np.bincount(self.client_stratum[ok], minlength=n_strata)
        return counts

    # ------------------------------------------------------------------ files
    def _meta(self) -> dict[str, Any]:
        return {
            "format": STATE_FORMAT, "strata_version": self.strata_version,
            "policy": {"participation_cap": self.policy.participation_cap,
                       "epsilon_per_round": self.policy.epsilon_per_round,
                       "rounds_per_epoch": self.policy.rounds_per_epoch},
            "epoch": self.epoch, "entropy": str(self.entropy),
            "merges": [m.to_dict() for m in self.merges], "rounds": self.rounds,
            "history": self.history, "charge": self.charge,
        }

    def _arrays(self) -> dict[str, NDArray[Any]]:
        return {"client_stratum": self.client_stratum, "used": self.used,
                "groups": self.groups, "selected": self.selected}

    @staticmethod
    def _digest(meta_bytes: bytes, arrays: dict[str, NDArray[Any]]) -> str:
        digest = hashlib.sha256(meta_bytes)
        for name in sorted(arrays):
            arr = np.ascontiguousarray(arrays[name])
            digest.update(f"|{name}|{arr.dtype.str}|{arr.shape}|".encode())
            digest.update(arr.tobytes())
        return digest.hexdigest()

    def save(self, path: str | os.PathLike[str]) -> Path:
        """Write the state to ``path`` (``.npz``) atomically, with its digest.

        Returns
        -------
        pathlib.Path
        """
        if not isinstance(path, (str, os.PathLike)) or not str(path).strip():
            raise fail("path", path, "is not a file path", "pass e.g. 'participation.npz'")
        target = Path(path)
        if target.is_dir():
            raise fail("path", path, "is a folder", "name the state file, e.g. "
                       "folder / 'participation.npz'")
        if not target.parent.is_dir():
            raise fail("path", path, "is in a folder that does not exist", "create it first")
        meta_bytes = json.dumps(self._meta(), sort_keys=True).encode()
        arrays = self._arrays()
        digest = self._digest(meta_bytes, arrays).encode()
        members: dict[str, Any] = {"meta": np.frombuffer(meta_bytes, dtype=np.uint8),
                                   "digest": np.frombuffer(digest, dtype=np.uint8), **arrays}

        def write(tmp: str) -> None:
            with open(tmp, "wb") as handle:  # a handle: np.savez would append ".npz"
                np.savez(handle, **members)

        return write_atomically(target, write)

    @classmethod
    def load(cls, path: str | os.PathLike[str], *, strata_version: str) -> ParticipationState:
        """Load a state saved by :meth:`save`, checking format, digest and strata version.

        Parameters
        ----------
        path : str or path-like
        strata_version : str
            The version of the strata the caller samples on (``Strata.version``).

        Raises
        ------
        StateFileError
            A missing, truncated, edited or foreign file, or another file format.
        PartitionMismatch
            A state made on another strata version.
        """
        if not isinstance(strata_version, str):
            raise fail("strata_version", strata_version, "is not a version string",
                       "pass Strata.version")
        if not isinstance(path, (str, os.PathLike)) or not Path(path).is_file():
            raise StateFileError(f"path={path!r} is not a participation state file; pass the "
                                 "path written by ParticipationState.save")
        names = ("meta", "digest", "client_stratum", "used", "groups", "selected")
        try:
            with open(path, "rb") as handle, np.load(handle, allow_pickle=False) as data:
                loaded = {name: data[name] for name in names}
        except (zipfile.BadZipFile, OSError, ValueError, EOFError, KeyError, TypeError,
                AttributeError) as err:
            raise StateFileError(
                f"{os.fspath(path)!r} is truncated or not a participation state file "
                f"({type(err).__name__}); restore it from a backup (the digest cannot be "
                "checked)") from None
        meta_bytes = loaded.pop("meta").tobytes()
        stored = loaded.pop("digest").tobytes().decode("ascii", "replace")
        if cls._digest(meta_bytes, loaded) != stored:
            raise StateFileError(
                f"{os.fspath(path)!r} was edited or damaged: its SHA-256 digest does not match "
                "its contents; restore it from a backup, never from a hand-edited copy")
        meta = json.loads(meta_bytes)
        if meta.get("format") != STATE_FORMAT:
            raise StateFileError(f"{os.fspath(path)!r} has state format {meta.get('format')!r}, "
                                 f"this spatialdp reads format {STATE_FORMAT}; migrate it")
        if meta["strata_version"] != strata_version:
            raise PartitionMismatch(
                f"{os.fspath(path)!r} was made on strata version {meta['strata_version']!r}, "
                f"but the sampler's strata are {strata_version!r}; participation of two "
                "stratifications cannot be mixed: start a new epoch on the new strata")
        return cls(
            strata_version=meta["strata_version"], policy=ParticipationPolicy(**meta["policy"]),
            epoch=int(meta["epoch"]), client_stratum=loaded["client_stratum"],
            used=loaded["used"], entropy=int(meta["entropy"]), groups=loaded["groups"],
            merges=[Merge(tuple(m["members"]), tuple(m["into"]), m["reason"], m["round_index"])
                    for m in meta["merges"]],
            rounds=[int(r) for r in meta["rounds"]], history=meta["history"],
            selected=loaded["selected"], charge=meta["charge"])
