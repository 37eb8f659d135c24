"""Real geography shipped in ``data/``, and synthetic fleets placed on it.

The files come from public sources named in ``data/README.md``: the 48
contiguous US states (libpysal's ``us_income`` example, from the US Census) and
US cities with 15,000+ inhabitants (GeoNames, CC BY 4.0).
"""

from __future__ import annotations

import os
import sys
import sysconfig
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

import geopandas as gpd
import numpy as np
import pandas as pd
from numpy.typing import NDArray

if TYPE_CHECKING:
    from geopandas.array import GeometryArray

from spatialdp._gc import collector_paused
from spatialdp._random import RandomLike, as_generator
from spatialdp._validation import check_flag, check_instance, check_integer, check_probability
from spatialdp.exceptions import InvalidInput
from spatialdp.geo.partition import Partition

__all__ = [
    "data_dir",
    "load_us_cities",
    "load_us_states",
    "synthetic_fleet",
    "us_states_partition",
]

_EARTH_RADIUS_KM = 6371.0088


def data_dir() -> Path:
    """Return the folder of the shipped data files (``SPATIALDP_DATA`` overrides it).

    A source checkout (an editable install) reads the top-level ``data/`` folder, the one
    source of the files; a wheel installs them under ``<prefix>/share/spatialdp/data``.

    Examples
    --------
    >>> (data_dir() / "us48_states.gpkg").is_file()
    True
    """
    env = os.environ.get("SPATIALDP_DATA")
    checkout = _checkout_data()
    if not env and (checkout / "us48_states.gpkg").is_file():
        return checkout  # before asking sysconfig (about 9 ms on a cold first call)
    candidates = [Path(env)] if env else _data_candidates()
    for folder in candidates:
        if (folder / "us48_states.gpkg").is_file():
            return folder
    raise FileNotFoundError(
        f"spatialdp's data files are not in {', '.join(map(str, candidates))}; reinstall "
        "spatialdp (a wheel installs them under <prefix>/share/spatialdp/data; a source "
        "checkout has them in data/) or point SPATIALDP_DATA at a folder holding them"
    )


def _checkout_data() -> Path:
    """Return the ``data/`` folder of a source checkout (it may not exist)."""
    return Path(__file__).resolve().parent.parent / "data"


def _data_candidates() -> list[Path]:
    """Where the data may be: the checkout's ``data/``, then each install scheme's share."""
    checkout = _checkout_data()
    schemes = (sysconfig.get_default_scheme(), sysconfig.get_preferred_scheme("user"))
    shares = [Path(sysconfig.get_path("data", scheme)) / "share" / "spatialdp" / "data"
              for scheme in schemes]
    return list(dict.fromkeys([checkout, *shares]))


#: The version of :func:`us_states_partition` (a content hash); tests check that the
#: fully checked build of the shipped layer gives it.
US_STATES_VERSION = "72dae3aaa42be1d2"
#: Bytes of a GeoPackage geometry header's envelope, by its envelope indicator.
_GPKG_ENVELOPE_BYTES = {0: 0, 1: 32, 2: 48, 3: 48, 4: 64}


@lru_cache(maxsize=1)
def _states() -> gpd.GeoDataFrame:
    path = data_dir() / "us48_states.gpkg"
    frame = _read_plain_gpkg(path)
    return frame if frame is not None else gpd.read_file(path)


def _read_plain_gpkg(path: Path) -> gpd.GeoDataFrame | None:
    """Read a one-layer GeoPackage of text columns with sqlite3, as geopandas would.

    A GeoPackage is an SQLite file whose geometries are WKB behind a short header;
    reading it through GDAL (``geopandas.read_file``) costs a fresh process about
    30-70 ms of CPU, mostly importing pyogrio, against about 2 ms here. Returns
    None (the caller then uses ``geopandas.read_file``) for anything but the plain
    layout the shipped files have: one feature table, an EPSG CRS, text attributes
    without missing values, standard geometry blobs.
    """
    import sqlite3

    try:
        return _read_plain_layer(sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro",
                                                 uri=True))
    except sqlite3.DatabaseError:  # not SQLite, or not a GeoPackage: geopandas says why
        return None


def _read_plain_layer(connection: Any) -> gpd.GeoDataFrame | None:
    """Read the one feature table of an open GeoPackage (see :func:`_read_plain_gpkg`)."""
    from contextlib import closing

    with closing(connection) as con:
        tables = con.execute("SELECT table_name, srs_id FROM gpkg_contents "
                             "WHERE data_type = 'features'").fetchall()
        if len(tables) != 1:
            return None
        table, srs = tables[0]
        crs = con.execute("SELECT organization, organization_coordsys_id FROM "
                          "gpkg_spatial_ref_sys WHERE srs_id = ?", (srs,)).fetchone()
        geom = con.execute("SELECT column_name FROM gpkg_geometry_columns WHERE "
                           "table_name = ?", (table,)).fetchone()
        if crs is None or str(crs[0]).upper() != "EPSG" or geom is None:
            return None
        info = con.execute(f"PRAGMA table_info({_quoted(table)})").fetchall()
        key = [row[1] for row in info if row[5]]
        attrs = [row[1] for row in info if not row[5] and row[1] != geom[0]]
        if len(key) != 1 or any(row[2].upper() != "TEXT" for row in info
                                if row[1] in attrs):
            return None
        names = ", ".join(_quoted(name) for name in [geom[0], *attrs])
        rows = con.execute(f"SELECT {names} FROM {_quoted(table)} "
                           f"ORDER BY {_quoted(key[0])}").fetchall()
    wkb = [_gpkg_wkb(row[0]) for row in rows]
    if any(blob is None for blob in wkb) or any(v is None for row in rows for v in row):
        return None
    import shapely

    columns = {name: [row[i + 1] for row in rows] for i, name in enumerate(attrs)}
    return gpd.GeoDataFrame(columns, geometry=shapely.from_wkb(wkb), crs=f"EPSG:{crs[1]}")


def _quoted(name: str) -> str:
    """Return an SQLite identifier in double quotes (inner quotes doubled)."""
    return '"' + str(name).replace('"', '""') + '"'


def _gpkg_wkb(blob: bytes | None) -> bytes | None:
    """Return the WKB of a standard GeoPackage geometry blob (None for anything else)."""
    if not isinstance(blob, bytes) or len(blob) < 8 or blob[:2] != b"GP":
        return None
    flags = blob[3]
    envelope = _GPKG_ENVELOPE_BYTES.get((flags >> 1) & 7)
    if envelope is None or flags & 0b110000:  # an empty or an extended geometry
        return None
    return blob[8 + envelope:]


def load_us_states() -> gpd.GeoDataFrame:
    """Load the 48 contiguous US states, EPSG:4326.

    Columns: ``state`` (two-letter code), ``state_name``, ``state_fips``,
    ``sub_region`` (census division), ``geometry``.

    Examples
    --------
    >>> states = load_us_states()
    >>> len(states), states.crs.to_epsg()
    (48, 4326)
    """
    return _states().copy()


def load_us_cities() -> gpd.GeoDataFrame:
    """Load the US cities of 15,000+ inhabitants (GeoNames), as points in EPSG:4326.

    Examples
    --------
    >>> cities = load_us_cities()
    >>> int(cities.population.max()) > 8_000_000
    True
    """
    frame = pd.read_csv(data_dir() / "us_cities.csv")
    return gpd.GeoDataFrame(
        frame, geometry=_points(frame.longitude, frame.latitude), crs=4326
    )


def _points(lon: Any, lat: Any, crs: Any = None) -> GeometryArray:
    """Return Points from coordinates, the garbage collector paused while they are made.

    Points hold no references, so they form no cycle; a million of them would
    otherwise run the collector over them some 1,300 times (about 0.3 s: see
    :mod:`spatialdp._gc`).
    """
    with collector_paused():
        return gpd.points_from_xy(lon, lat, crs=crs)


def us_states_partition() -> Partition:
    """Build the shipped national partition: one region per contiguous US state.

    Examples
    --------
    >>> us_states_partition().n_regions
    48
    """
    states = load_us_states()
    known = Partition._from_known_layer(states, "state", name="us48-states",
                                        version=US_STATES_VERSION)
    if known is not None:
        return known
    return Partition.from_geodataframe(states, "state", name="us48-states")


@lru_cache(maxsize=1)
def _fleet_partition() -> Partition:
    """Return the states partition :func:`synthetic_fleet` places devices on by default.

    Kept for the process, so that its lookup index is built once, not on every call.
    """
    return us_states_partition()


def synthetic_fleet(
    n: int,
    *,
    rng: RandomLike = None,
    rural_share: float = 0.15,
    partition: Partition | None = None,
    progress: bool | None = None,
) -> gpd.GeoDataFrame:
    """``n`` devices on a partition's regions, placed by real city population.

    A share ``1 - rural_share`` of the devices sits around cities chosen with
    probability proportional to population, at a distance that grows with the
    city's size (a dense core, a suburban tail); the rest is a rural background
    spread uniformly over the land. Density therefore runs from dense urban to
    remote, as a national fleet's does. Deterministic for a given seed.

    Works on any partition a user brings (states, counties, H3 cells, another
    country): the urban devices go around the shipped US cities that lie in
    the partition's regions (none outside the US: then every device is rural),
    the rural ones uniformly over the partition's bounding box, and devices that
    land in no region (at sea, between regions) are drawn again, in rounds, each
    round placed with one vectorised point-in-polygon pass (the lookup of
    :meth:`Partition.assign`, built once per partition). A partition that holds
    most of the US city population (such as the default 48 states) is filled
    around all cities, as before, and gives the same devices for the same seed.

    Parameters
    ----------
    n : int
        Number of devices.
    rng : numpy.random.Generator, int or None
        Simulation randomness (this is synthetic data, not a release).
    rural_share : float
        Share of devices in the uniform rural background.
    partition : Partition, optional
        The partition that gives each device its ``region_id``; default the 48 states.
    progress : bool, optional
        Show a tqdm progress bar of the devices placed (on stderr); default
        (``None``) for fleets of :data:`PROGRESS_FROM` devices or more, and only
        on a terminal.

    Returns
    -------
    GeoDataFrame
        Columns ``device_id``, ``lon``, ``lat``, ``heading_deg`` (direction of
        travel, degrees clockwise from north), ``region_id``, ``geometry``. Every
        device lies in a region of the partition.

    Raises
    ------
    InvalidInput
        Bad ``n``, ``rural_share``, ``partition`` or ``progress``, or a
        partition whose regions cover so little of their bounding box that the
        devices cannot be placed.

    Examples
    --------
    >>> fleet = synthetic_fleet(1000, rng=7)
    >>> len(fleet), int(fleet.region_id.isna().sum())
    (1000, 0)
    """
    n = check_integer(n, "n", low=1, high=10**9,
                      fix="give a positive whole number of devices, at most 1e9")
    rural_share = check_probability(rural_share, "rural_share")
    if partition is not None:
        check_instance(partition, "partition", Partition, "pass one built with "
                       "Partition.from_geodataframe or from_h3_cover, or None")
    disable = _bar_disabled(n, progress)
    gen = as_generator(rng)
    part = partition if partition is not None else _fleet_partition()
    cities = pd.read_csv(data_dir() / "us_cities.csv")
    inside = _positions(part, cities.longitude.to_numpy(), cities.latitude.to_numpy()) >= 0
    population = cities.population.to_numpy(dtype=float)
    held = float(population[inside].sum() / population.sum())
    local = held < _NATIONAL_SHARE  # a partition of part of the US (or none of it)
    if local:
        cities = cities[inside]
    _check_fillable(part)
    sampler = _Sampler(cities, part, rural_share, local)

    lon = np.empty(n)
    lat = np.empty(n)
    region = np.full(n, -1, dtype=np.int64)
    pending = np.arange(n)
    tqdm = _NoBar if disable is True else _tqdm_class()  # no tqdm import for no bar

    idle = 0
    with tqdm(total=n, desc="placing devices", unit="device", disable=disable,
              leave=False) as bar:
        for _ in range(_MAX_ROUNDS):  # resampling rounds for points outside every region
            before = pending.size
            pending = sampler.round(gen, pending, lon, lat, region)
            bar.update(before - pending.size)
            idle = idle + 1 if pending.size == before else 0
            if pending.size == 0 or idle >= _MAX_IDLE:
                break
    if pending.size:
        raise InvalidInput(
            f"partition={part.key!r} received only {n - pending.size:,} of {n:,} devices: "
            "devices are placed around the US cities inside its regions and uniformly over "
            "its bounding box, and almost none of them land in its regions; pass a "
            "partition whose regions fill a good part of their bounding box (or split it)"
        )
    heading = gen.uniform(0.0, 360.0, n)
    return _fleet_frame(lon, lat, heading, part.region_ids, region)


def _fleet_frame(lon: NDArray[np.float64], lat: NDArray[np.float64],
                 heading: NDArray[np.float64], region_ids: pd.Index,
                 region: NDArray[np.int64]) -> gpd.GeoDataFrame:
    """Return the fleet's GeoDataFrame, holding the arrays it is given (no copies).

    The frame takes ``lon``, ``lat`` and ``heading`` as they are (``copy=False``:
    pandas would otherwise copy each and stack the three into one block, 40 MB of
    new memory for a million devices, which a fresh process pays for page by page),
    the region ids' own str array taken by position (not a million object references
    that pandas would turn into str one by one: 0.05-0.1 s), and Points made with
    their CRS (set afterwards, it costs a copy of the geometry array).
    """
    columns = {
        "device_id": np.arange(lon.size, dtype=np.int64),
        "lon": lon,
        "lat": lat,
        "heading_deg": heading,
        "region_id": region_ids.array.take(region),
    }
    return gpd.GeoDataFrame(pd.DataFrame(columns, copy=False),
                            geometry=_points(lon, lat, crs=4326), copy=False)


#: Fleets of at least this many devices show a progress bar by default.
PROGRESS_FROM = 100_000
#: A partition holding this share of the US city population is filled nationally.
_NATIONAL_SHARE = 0.9
_MAX_ROUNDS = 1000
_MAX_IDLE = 25  # rounds in a row that place nothing: the partition cannot be filled
_MIN_FILL = 1e-5  # share of the bounding box the regions must cover


def _check_fillable(part: Partition) -> None:
    """Refuse at once a partition whose regions are a speck of their bounding box."""
    import shapely

    west, south, east, north = part.regions.total_bounds
    box = max((east - west) * (north - south), 1e-300)
    land = float(np.nansum(shapely.area(np.asarray(part.regions.geometry.values))))
    if land / box < _MIN_FILL:
        raise InvalidInput(
            f"partition={part.key!r} covers {land / box:.1e} of its bounding box "
            f"({west:.4g}, {south:.4g}, {east:.4g}, {north:.4g}): devices drawn over the box "
            "would almost never land in a region; build a fleet per cluster of regions (a "
            "partition of each) and concatenate them"
        )


class _Sampler:
    """One resampling round of :func:`synthetic_fleet`: draw the pending devices again."""

    def __init__(self, cities: pd.DataFrame, part: Partition, rural_share: float,
                 local: bool) -> None:
        self.part = part
        self.weights = cities.population.to_numpy(dtype=float)
        self.lon = cities.longitude.to_numpy()
        self.lat = cities.latitude.to_numpy()
        # Spread (km) grows with the square root of population: 2 km for a small town,
        # about 25 km for a city of ten million.
        self.spread_km = 2.0 + 7.5 * np.sqrt(self.weights / 1e6)
        self.rural_share = rural_share if self.weights.size else 1.0
        self.pick = _WeightedChoice(self.weights / self.weights.sum()
                                    if self.weights.size else self.weights)
        self.local = local
        self.bounds = part.regions.total_bounds
        self.accept = 1.0  # share of last round's rural draws that landed (local mode)

    def round(self, gen: np.random.Generator, pending: NDArray[np.int64],
              lon: NDArray[np.float64], lat: NDArray[np.float64],
              region: NDArray[np.int64]) -> NDArray[np.int64]:
        """Draw every pending device again; return those still outside every region."""
        west, south, east, north = self.bounds
        k = pending.size
        urban = gen.random(k) >= self.rural_share
        u_idx = pending[urban]
        r_idx = pending[~urban]
        if u_idx.size:
            pick = self.pick(gen, u_idx.size)
            dist = gen.exponential(self.spread_km[pick])
            bearing = gen.uniform(0.0, 2 * np.pi, u_idx.size)
            lat[u_idx], lon[u_idx] = self._around(pick, dist, bearing)
            if self.local:
                region[u_idx] = _positions(self.part, lon[u_idx], lat[u_idx])
        if not self.local:
            # Uniform on the sphere within the bounding box (area-true), then rejected
            # outside the land by the assignment below (the national path, unchanged).
            sin_lat = gen.uniform(np.sin(np.radians(south)), np.sin(np.radians(north)),
                                  r_idx.size)
            lat[r_idx] = np.degrees(np.arcsin(sin_lat))
            lon[r_idx] = gen.uniform(west, east, r_idx.size)
            region[pending] = _positions(self.part, lon[pending], lat[pending])
            return pending[region[pending] < 0]
        if r_idx.size:
            # Draw enough candidates that about all rural devices land this round, and
            # keep the first landed ones in draw order (still uniform over the land).
            m = int(min(max(r_idx.size / max(self.accept, 1e-3) * 1.2, 64), 5e6))
            sin_lat = gen.uniform(np.sin(np.radians(south)), np.sin(np.radians(north)), m)
            c_lat = np.degrees(np.arcsin(sin_lat))
            c_lon = gen.uniform(west, east, m)
            c_region = _positions(self.part, c_lon, c_lat)
            landed = np.flatnonzero(c_region >= 0)
            self.accept = max(landed.size / m, 1e-4)
            take = landed[: r_idx.size]
            filled = r_idx[: take.size]
            lat[filled], lon[filled], region[filled] = c_lat[take], c_lon[take], c_region[take]
            region[r_idx[take.size:]] = -1
        return pending[region[pending] < 0]

    def _around(self, pick: NDArray[np.intp], dist: NDArray[np.float64],
                bearing: NDArray[np.float64]) -> tuple[NDArray[np.float64],
                                                       NDArray[np.float64]]:
        """Return (lat, lon) ``dist`` km from the cities ``pick`` along ``bearing``.

        The local flat-earth step ``lat + degrees(dist cos(bearing) / R)``, ``lon +
        degrees(dist sin(bearing) / R) / cos(radians(lat))``, computed in place
        (the same operations on the same values: the same numbers, without a
        dozen temporary arrays). ``bearing`` is overwritten.
        """
        city_lat = self.lat[pick]
        dlat = np.cos(bearing)
        dlat *= dist
        dlat /= _EARTH_RADIUS_KM
        np.degrees(dlat, out=dlat)
        dlat += city_lat
        dlon = np.sin(bearing, out=bearing)
        dlon *= dist
        dlon /= _EARTH_RADIUS_KM
        np.degrees(dlon, out=dlon)
        np.radians(city_lat, out=city_lat)
        dlon /= np.cos(city_lat, out=city_lat)
        dlon += self.lon[pick]
        return dlat, dlon


#: Buckets of :class:`_WeightedChoice`'s table: a power of two, so that a draw's
#: bucket (``u * 2**18``, rounded down) and the buckets' bounds are exact.
_CHOICE_BUCKETS = 1 << 18
#: Draws from which :class:`_WeightedChoice` tabulates (about 3 ms); fewer are searched.
_CHOICE_TABLE_FROM = 1 << 15


class _WeightedChoice:
    """``gen.choice(len(p), size, p=p)``: the same draws and the same answers, faster.

    numpy's ``Generator.choice`` draws ``gen.random(size)`` and returns, for each
    draw ``u``, the number of entries of ``cdf = p.cumsum() / p.cumsum()[-1]`` that
    are ``<= u``: a binary search per draw (about 0.1 s for a million draws among
    the 3,400 cities). Here ``[0, 1)`` is cut into :data:`_CHOICE_BUCKETS` buckets
    ``[b / 2**18, (b + 1) / 2**18)``: in a bucket that no cdf entry falls strictly
    inside, that number is the same for every draw, and a table holds it; only
    the draws in buckets that hold an entry (at most 3,400 of 262,144) are searched.
    """

    def __init__(self, p: NDArray[np.float64]) -> None:
        self.cdf = np.ascontiguousarray(p, dtype=np.float64).cumsum()  # as numpy's choice
        if self.cdf.size:
            self.cdf /= self.cdf[-1]
        self._table: NDArray[np.int64] | None = None

    def __call__(self, gen: np.random.Generator, size: int) -> NDArray[np.int64]:
        """Return ``size`` items drawn with replacement, as ``gen.choice`` would."""
        u = gen.random(size)
        if size < _CHOICE_TABLE_FROM:
            return np.searchsorted(self.cdf, u, side="right").astype(np.int64, copy=False)
        out = self.table()[(u * _CHOICE_BUCKETS).astype(np.int64)]
        ask = np.flatnonzero(out < 0)
        out[ask] = np.searchsorted(self.cdf, u[ask], side="right")
        return out

    def table(self) -> NDArray[np.int64]:
        """Return each bucket's answer, -1 for a bucket with a cdf entry inside (built once).

        An entry ``c`` is ``<= b / 2**18`` when ``ceil(c * 2**18) <= b`` (scaling by a
        power of two is exact), and strictly inside bucket ``b`` when ``c * 2**18`` lies
        between ``b`` and ``b + 1``; counting both takes two bincounts.
        """
        if self._table is None:
            scaled = self.cdf * _CHOICE_BUCKETS
            at_start = np.cumsum(np.bincount(np.ceil(scaled).astype(np.int64),
                                             minlength=_CHOICE_BUCKETS + 1))
            floor = np.floor(scaled)
            inside = np.bincount(floor[floor != scaled].astype(np.int64),
                                 minlength=_CHOICE_BUCKETS + 1)
            self._table = np.where(inside == 0, at_start, -1)[:_CHOICE_BUCKETS]
        return self._table


class _NoBar:
    """A disabled progress bar that needs no tqdm import (about 0.02 s for a cold call)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass

    def __enter__(self) -> _NoBar:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def update(self, n: int) -> None:
        """Ignore progress."""


def _bar_disabled(n: int, progress: bool | None) -> bool | None:
    """Return tqdm's ``disable`` for a fleet of ``n`` devices (True: no tqdm at all).

    ``progress`` True: always a bar; False: never. None: fleets of
    :data:`PROGRESS_FROM` devices or more, on a terminal (None lets tqdm check its
    own stream). Without any terminal on stderr or stdout (the streams tqdm's text
    and notebook bars write to) tqdm would disable that bar anyway: True at once,
    so that no tqdm import is paid (about 0.015 s of a cold first call).
    """
    if progress is not None:
        return not check_flag(progress, "progress")
    if n < PROGRESS_FROM or not (_is_terminal(sys.stderr) or _is_terminal(sys.stdout)):
        return True
    return None


def _is_terminal(stream: Any) -> bool:
    """Whether ``stream`` is a terminal (tqdm's test: no ``isatty`` counts as one)."""
    isatty = getattr(stream, "isatty", None)
    if isatty is None:
        return stream is not None
    try:
        return bool(isatty())
    except (OSError, ValueError):  # a closed stream: tqdm would fail on it, not skip it
        return True


def _tqdm_class() -> Any:
    """Return tqdm's notebook bar where Jupyter widgets are installed, else its text bar.

    ``tqdm.auto`` warns (``IProgress not found``) in a notebook without
    ``ipywidgets``, even when the bar is disabled; the text bar works everywhere.
    """
    from importlib.util import find_spec

    if find_spec("ipywidgets") is not None:
        from tqdm.auto import tqdm
    else:
        from tqdm import tqdm
    return tqdm


def _positions(part: Partition, lon: NDArray[np.float64], lat: NDArray[np.float64]
               ) -> NDArray[np.int64]:
    """Return the region position of each point, -1 outside (no warning: rejection sampling)."""
    return part.assign(lon=lon, lat=lat, warn=False).positions
