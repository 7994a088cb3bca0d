"""ReadStep::GeoJson and ReadStep::NdGeoJson: features as records.

Each feature becomes its ``properties`` plus a ``geometry`` column holding the geometry as
compact JSON with sorted keys; the feature's ``id`` and ``bbox`` are dropped, as in the
reference. GeoJson needs a ``FeatureCollection``; NdGeoJson has one ``Feature`` per line.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from common.odf.fragments import ReadStepGeoJson, ReadStepNdGeoJson
from coordinator.ingest.ddl import parse_read_schema
from coordinator.ingest.errors import ReadError
from coordinator.ingest.readers import json_depth
from coordinator.ingest.readers.json import load_document, read_records
from coordinator.ingest.readers.stream import DataStream


def read_geojson(step: ReadStepGeoJson, path: Path, *, name: str) -> DataStream:
    document = load_document(path, name)
    kind = document.get("type") if isinstance(document, dict) else None
    if kind != "FeatureCollection":
        raise ReadError(f"expected a FeatureCollection, got type {kind!r}", path=name)
    features = document.get("features")
    if not isinstance(features, list):
        raise ReadError("FeatureCollection has no 'features' array", path=name)
    records = [
        feature_record(feature, f"{name}: features[{i}]") for i, feature in enumerate(features)
    ]
    schema = parse_read_schema(step.schema) if step.schema else None
    return read_records(records, schema, name=name, describe=lambda n: f"{name}: features[{n - 1}]")


def read_ndgeojson(step: ReadStepNdGeoJson, path: Path, *, name: str) -> DataStream:
    records: list[dict[str, Any]] = []
    lines: list[int] = []
    with open(path, encoding="utf-8", errors="replace") as f:
        for number, line in enumerate(f, start=1):
            if not line.strip():
                continue
            feature = json_depth.loads(line, f"{name}:{number}")
            records.append(feature_record(feature, f"{name}:{number}"))
            lines.append(number)
    schema = parse_read_schema(step.schema) if step.schema else None
    return read_records(records, schema, name=name, describe=lambda n: f"{name}:{lines[n - 1]}")


def feature_record(feature: Any, where: str) -> dict[str, Any]:
    """The record of one GeoJSON Feature: its properties plus ``geometry`` as a JSON string."""
    kind = feature.get("type") if isinstance(feature, dict) else None
    if kind != "Feature":
        raise ReadError(f"expected a Feature, got type {kind!r}", path=where)
    properties = feature.get("properties")
    if properties is None:
        properties = {}
    if not isinstance(properties, dict):
        raise ReadError("feature 'properties' is not an object", path=where)
    geometry = feature.get("geometry")
    if not isinstance(geometry, dict):
        raise ReadError("feature 'geometry' is not an object", path=where)
    record = dict(properties)
    record["geometry"] = json.dumps(geometry, sort_keys=True, separators=(",", ":"))
    return record
