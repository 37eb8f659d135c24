"""Shared helpers of the subcommands: reading tables and layers, the release target."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from spatialdp._validation import fail


def read_table(path: str | os.PathLike[str], what: str) -> pd.DataFrame:
    """Read a Parquet, CSV or vector file into a (Geo)DataFrame; one-line refusals."""
    file = Path(path)
    if not file.is_file():
        raise fail(what, os.fspath(path), "does not exist",
                   "pass a Parquet, CSV, GeoPackage or GeoJSON file")
    suffix = file.suffix.lower()
    try:
        if suffix in (".parquet", ".pq", ".geoparquet"):
            try:
                import geopandas as gpd

                return gpd.read_parquet(file)
            except (ValueError, ImportError):
                return pd.read_parquet(file)
        if suffix in (".csv", ".txt"):
            return pd.read_csv(file)
        import geopandas as gpd

        return gpd.read_file(file)
    except Exception as err:
        first = (str(err).splitlines() or [type(err).__name__])[0]
        raise fail(what, os.fspath(path), f"cannot be read ({first})",
                   "pass a Parquet, CSV, GeoPackage or GeoJSON file") from None


def lon_lat(frame: Any, what: str) -> tuple[Any, Any]:
    """Return longitude and latitude columns (``lon``/``lat`` or point geometry, EPSG:4326)."""
    import geopandas as gpd

    if {"lon", "lat"} <= set(frame.columns):
        return frame["lon"].to_numpy(dtype=float), frame["lat"].to_numpy(dtype=float)
    if isinstance(frame, gpd.GeoDataFrame) and frame.geometry is not None:
        from spatialdp.geo.lonlat import to_lonlat

        # No CRS: taken as lon/lat; any other CRS: the API's reprojection, with its warning.
        points = frame.geometry if frame.crs is None else to_lonlat(frame.geometry, what)
        if not (points.geom_type == "Point").all():
            raise fail(what, f"{len(frame)} rows", "holds geometries that are not points",
                       "pass points, or lon/lat columns")
        return points.x.to_numpy(), points.y.to_numpy()
    raise fail(what, sorted(map(str, frame.columns))[:12], "has no lon/lat columns and no "
               "point geometry", "add lon and lat columns (degrees, EPSG:4326)")


@dataclass
class CliTarget:
    """The target a subcommand's release is charged to, and afterwards where it went."""

    target: Any
    line: str = ""


@contextmanager
def release_target(args: Any, *, who: str, why: str) -> Iterator[CliTarget]:
    """Yield the target named by ``--ledger`` or ``--unaccounted`` (one of them is given).

    A new ledger gets ``--epoch-budget`` (default 10); an existing one keeps
    its own. ``--epoch``, ``--epoch-budget`` and ``--why`` are refused with
    ``--unaccounted``. After the block, ``line`` says where the release was
    charged and what the regional line has left.
    """
    from spatialdp._validation import check_count
    from spatialdp.privacy.ledger import PrivacyLedger
    from spatialdp.privacy.target import ReleaseTarget, Unaccounted

    if args.unaccounted is not None:
        given = [flag for flag, value in (("--epoch", args.epoch),
                                          ("--epoch-budget", args.epoch_budget),
                                          ("--why", args.why)) if value is not None]
        if given:
            raise fail(given[0], getattr(args, given[0][2:].replace("-", "_")),
                       "is a ledger setting, but --unaccounted releases without a ledger",
                       "drop it, or charge a ledger with --ledger")
        yield CliTarget(Unaccounted(args.unaccounted),
                        f"not charged to any ledger: {args.unaccounted}")
        return
    budget = args.epoch_budget
    if budget is None and not Path(args.ledger).exists():
        budget = 10.0  # a new ledger's default; an existing one keeps its own
    with PrivacyLedger(args.ledger, epoch_budget=budget) as ledger:
        epoch = (max(ledger.epochs(), default=0) if args.epoch is None
                 else check_count(args.epoch, "--epoch"))
        charged = CliTarget(ReleaseTarget(ledger, epoch, who=who, why=args.why or why))
        yield charged
        left = ledger.remaining(epoch, "evaluation.regional")
    charged.line = (f"charged to {args.ledger}, epoch {epoch}, evaluation.regional "
                    f"({left:g} left)")


def check_out_folder(path: str | os.PathLike[str], flag: str = "--out") -> Path:
    """Refuse, creating nothing, an output folder that cannot be created or written.

    Checked before a release is charged, so that a release is never lost to
    an unwritable folder.
    """
    out = Path(path)
    if out.exists() and not out.is_dir():
        raise fail(flag, os.fspath(path), "is a file, not a folder", "pass a folder path")
    existing = next(p for p in (out, *out.absolute().parents) if p.exists())
    if not existing.is_dir() or not os.access(existing, os.W_OK | os.X_OK):
        raise fail(flag, os.fspath(path), f"cannot be written ({os.fspath(existing)} is not "
                   "a writable folder)", "pass a writable folder")
    return out
