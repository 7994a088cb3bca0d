"""Readers: a ReadStep and a local file to a stream of Arrow record batches.

``read_data`` dispatches on the step; ``MEDIA_TYPES`` and ``read_step_for_format`` implement
the push ingest ``--input-format`` override the way the reference does it: the source's own
step when the format matches, otherwise a default step of that format keeping only ``schema``.
"""

from __future__ import annotations

from pathlib import Path

from common.odf.fragments import (
    ReadStep,
    ReadStepCsv,
    ReadStepEsriShapefile,
    ReadStepGeoJson,
    ReadStepJson,
    ReadStepNdGeoJson,
    ReadStepNdJson,
    ReadStepParquet,
)
from coordinator.ingest.errors import UnsupportedOptionError
from coordinator.ingest.readers.stream import DataStream
from coordinator.ingest.readers.utf8 import check_utf8_file

__all__ = ["FORMATS", "MEDIA_TYPES", "DataStream", "read_data", "read_step_for_format"]

MEDIA_TYPES: dict[type, str] = {
    ReadStepCsv: "text/csv",
    ReadStepJson: "application/json",
    ReadStepNdJson: "application/x-ndjson",
    ReadStepGeoJson: "application/geo+json",
    ReadStepNdGeoJson: "application/x-ndgeojson",
    ReadStepParquet: "application/vnd.apache.parquet",
    ReadStepEsriShapefile: "application/vnd.esri.shapefile",
}

FORMATS: dict[str, type] = {
    "csv": ReadStepCsv,
    "json": ReadStepJson,
    "ndjson": ReadStepNdJson,
    "geojson": ReadStepGeoJson,
    "ndgeojson": ReadStepNdGeoJson,
    "parquet": ReadStepParquet,
    "esrishapefile": ReadStepEsriShapefile,
}
"""``--input-format`` names to read step kinds."""

TEXT_STEPS = (ReadStepCsv, ReadStepJson, ReadStepNdJson, ReadStepGeoJson, ReadStepNdGeoJson)
"""Formats read as UTF-8 text: the file is checked to be valid UTF-8 before it is parsed."""


def read_data(
    step: ReadStep, path: Path, *, name: str | None = None, csv_columns_by_position: bool = False
) -> DataStream:
    """The records of the file at ``path`` read as ``step`` says; ``name`` names it in errors.
    ``csv_columns_by_position``: a Csv header is skipped, not matched to the schema by name."""
    shown = name or str(path)
    if isinstance(step, TEXT_STEPS):
        check_utf8_file(path, name=shown)
    # Each format's reader is imported when a file of it is read (the shapefile and Parquet
    # readers alone cost more start-up time than a small CSV ingest takes).
    match step:
        case ReadStepCsv():
            from coordinator.ingest.readers.csv import read_csv

            return read_csv(step, path, name=shown, columns_by_position=csv_columns_by_position)
        case ReadStepNdJson():
            from coordinator.ingest.readers.json import read_ndjson

            return read_ndjson(step, path, name=shown)
        case ReadStepJson():
            from coordinator.ingest.readers.json import read_json

            return read_json(step, path, name=shown)
        case ReadStepGeoJson():
            from coordinator.ingest.readers.geojson import read_geojson

            return read_geojson(step, path, name=shown)
        case ReadStepNdGeoJson():
            from coordinator.ingest.readers.geojson import read_ndgeojson

            return read_ndgeojson(step, path, name=shown)
        case ReadStepParquet():
            from coordinator.ingest.readers.parquet import read_parquet

            return read_parquet(step, path, name=shown)
        case ReadStepEsriShapefile():
            from coordinator.ingest.readers.shapefile import read_shapefile

            return read_shapefile(step, path, name=shown)


def read_step_for_format(source_step: ReadStep, input_format: str | None) -> ReadStep:
    """The read step to use when the caller says the data is in ``input_format``."""
    if input_format is None:
        return source_step
    kind = FORMATS.get(input_format.lower())
    if kind is None:
        raise UnsupportedOptionError(
            f"unknown input format {input_format!r} (expected one of {', '.join(FORMATS)})",
            path="--input-format",
        )
    if isinstance(source_step, kind):
        return source_step
    step: ReadStep = kind(schema=source_step.schema)
    return step
