"""ReadStep::EsriShapefile: a ZIP holding a shapefile, read with ``pyshp``.

The archive must hold exactly one ``.shp`` unless ``subPath`` names one (an exact member
name, else a glob that must match exactly one). Each record becomes an object of its DBF
fields (Numeric and Float as doubles, dates as unpadded ``Y-M-D`` as in the reference) plus
``geometry`` as GeoJSON text, then goes through the NdJson reader.
"""

from __future__ import annotations

import fnmatch
import json
import zipfile
from datetime import date, datetime
from pathlib import Path, PurePosixPath
from typing import Any

import pyarrow as pa
import shapefile  # type: ignore[import-untyped]

from common.odf.fragments import ReadStepEsriShapefile
from coordinator.ingest.ddl import parse_read_schema
from coordinator.ingest.errors import ReadError
from coordinator.ingest.readers.json import read_records
from coordinator.ingest.readers.stream import DataStream
from coordinator.tempdirs import owned_temp_dir

_FLOAT_TYPES = ("N", "F", "Y", "B", "O")


def read_shapefile(step: ReadStepEsriShapefile, path: Path, *, name: str) -> DataStream:
    try:
        archive = zipfile.ZipFile(path)
    except zipfile.BadZipFile:
        raise ReadError("a shapefile must be given as a ZIP archive", path=name) from None
    with archive, owned_temp_dir("odf-shp-") as tmp:
        member = _shp_member(archive.namelist(), step.sub_path, name)
        stem = PurePosixPath(member).with_suffix("")
        wanted = {n for n in archive.namelist() if PurePosixPath(n).with_suffix("") == stem}
        for member_name in wanted:
            archive.extract(member_name, tmp)
        schema = parse_read_schema(step.schema) if step.schema else None
        integers = {f.name for f in schema or () if pa.types.is_integer(f.type)}
        records = _records(Path(tmp) / member, name, integers)
    return read_records(records, schema, name=name, describe=lambda n: f"{name}: record {n - 1}")


def _shp_member(names: list[str], sub_path: str | None, name: str) -> str:
    shps = [n for n in names if n.lower().endswith(".shp")]
    if sub_path:
        if sub_path in names:
            return sub_path
        shps = [n for n in shps if fnmatch.fnmatchcase(n, sub_path)]
    if len(shps) != 1:
        what = f"matching {sub_path!r}" if sub_path else "in the archive"
        listed = ", ".join(shps) if shps else "none"
        raise ReadError(f"expected exactly one .shp file {what}, found: {listed}", path=name)
    return shps[0]


def _records(shp: Path, name: str, integers: set[str]) -> list[dict[str, Any]]:
    """The records; Numeric values stay integers only for INT columns of the DDL schema."""
    try:
        reader = shapefile.Reader(str(shp))
    except shapefile.ShapefileException as e:
        raise ReadError(f"invalid shapefile: {e}", path=name) from None
    with reader:
        fields = [(str(f.name), str(f.field_type)) for f in reader.fields[1:]]
        records = []
        for i, item in enumerate(reader.iterShapeRecords()):
            values = list(item.record)
            record = {
                fname: _value(v, "I" if fname in integers else ftype)
                for (fname, ftype), v in zip(fields, values, strict=True)
            }
            try:
                geometry = item.shape.__geo_interface__
            except Exception as e:  # pyshp raises several types for broken shapes
                raise ReadError(f"record {i}: invalid geometry: {e}", path=name) from None
            record["geometry"] = json.dumps(geometry, sort_keys=True, separators=(",", ":"))
            records.append(record)
        return records


def _value(value: Any, field_type: str) -> Any:
    if value is None:
        return None
    if field_type in _FLOAT_TYPES and isinstance(value, int | float):
        return float(value)
    if isinstance(value, datetime):
        return f"{value.year}-{value.month}-{value.day} {value.hour}:{value.minute}:{value.second}"
    if isinstance(value, date):
        return f"{value.year}-{value.month}-{value.day}"
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    return value
