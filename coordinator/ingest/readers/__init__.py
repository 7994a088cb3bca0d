"""Readers: a ReadStep and a local file to a stream of Arrow record batches.

``read_data`` dispatches on the step; ``MEDIA_TYPES`` and ``read_step_for_format`` implement
the push ingest ``--input-format`` override the way the reference does it: the source's own
step when the format matches, otherwise a default step of that format keeping only ``schema``.
"""

from __future__ import annotations

from collections.abc import Callable
from importlib import import_module
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

READERS: dict[type, tuple[str, str]] = {
    ReadStepJson: ("json", "read_json"),
    ReadStepNdJson: ("json", "read_ndjson"),
    ReadStepGeoJson: ("geojson", "read_geojson"),
    ReadStepNdGeoJson: ("geojson", "read_ndgeojson"),
    ReadStepParquet: ("parquet", "read_parquet"),
    ReadStepEsriShapefile: ("shapefile", "read_shapefile"),
}
"""Each read step's reader but Csv's (which takes an option more): a module of this package
and its function ``(step, path, *, name)``, imported when a file of that format is read (the
shapefile and Parquet readers alone cost more start-up time than a small CSV ingest takes)."""


def read_data(
    step: ReadStep, path: Path, *, name: str | None = None, csv_columns_by_position: bool = False
) -> DataStream:
    """The records of the file at ``path`` read as ``step`` says; ``name`` names it in errors.
    ``csv_columns_by_position``: a Csv header is skipped, not matched to the schema by name."""
    shown = name or str(path)
    if isinstance(step, TEXT_STEPS):
        check_utf8_file(path, name=shown)
    if isinstance(step, ReadStepCsv):
        from coordinator.ingest.readers.csv import read_csv

        return read_csv(step, path, name=shown, columns_by_position=csv_columns_by_position)
    module, function = READERS[type(step)]
    reader: Callable[..., DataStream] = getattr(import_module(f"{__name__}.{module}"), function)
    return reader(step, path, name=shown)


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
