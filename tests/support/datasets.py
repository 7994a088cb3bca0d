"""Dataset snapshots for tests: the YAML a user would write, built from the parts that matter.

``root`` and ``derivative`` return the text of a ``DatasetSnapshot`` file (what ``odf add``
reads); a test names the schema, the merge strategy or the query, and the boilerplate around
them is written once, here. ``events`` adds more metadata events (``SetInfo``, ``SetVocab``...)
as plain mappings, in the spec's YAML spelling.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, TypedDict, Unpack

import yaml


class SourceOptions(TypedDict, total=False):
    """How a push source reads and merges (``push_source``'s keywords, passed on by ``root``)."""

    read: str
    merge: str
    primary_key: Sequence[str]


def root(
    name: str,
    schema: Sequence[str],
    *,
    source: str = "main",
    event_time: str | None = None,
    events: Sequence[Mapping[str, Any]] = (),
    **options: Unpack[SourceOptions],
) -> str:
    """A root dataset with one push source (``read``: Csv with a header row, NdJson, ...)."""
    return snapshot(
        name,
        "Root",
        [
            push_source(source, schema, **options),
            *([{"kind": "SetVocab", "eventTimeColumn": event_time}] if event_time else []),
            *events,
        ],
    )


DAY_FILE = r"day-(\d{4}-\d{2}-\d{2})\.csv"
"""An ``event_time_pattern`` for ``polled``: the date in a ``day-YYYY-MM-DD.csv`` file's name."""


def polled(
    name: str,
    glob: str,
    schema: Sequence[str],
    *,
    merge: str = "Append",
    primary_key: Sequence[str] = (),
    header: bool = True,
    event_time_pattern: str | None = None,
) -> str:
    """A root dataset polling the CSV files that match ``glob`` (``header``: with a header row);
    ``event_time_pattern``: a regex whose group 1 in a file's path is its event time."""
    fetch: dict[str, Any] = {"kind": "FilesGlob", "path": glob}
    if event_time_pattern is not None:
        fetch["eventTime"] = {"kind": "FromPath", "pattern": event_time_pattern}
    reader: dict[str, Any] = {"kind": "Csv"}
    if header:
        reader["header"] = True
    reader["schema"] = list(schema)
    source = {
        "kind": "SetPollingSource",
        "fetch": fetch,
        "read": reader,
        "merge": _merge(merge, primary_key),
    }
    return snapshot(name, "Root", [source])


def push_source(
    name: str,
    schema: Sequence[str],
    *,
    read: str = "Csv",
    merge: str = "Append",
    primary_key: Sequence[str] = (),
) -> dict[str, Any]:
    """An ``AddPushSource`` event (for a root with several sources, through ``events``)."""
    reader: dict[str, Any] = {"kind": read}
    if read == "Csv":
        reader["header"] = True
    reader["schema"] = list(schema)
    return {
        "kind": "AddPushSource",
        "sourceName": name,
        "read": reader,
        "merge": _merge(merge, primary_key),
    }


def _merge(kind: str, primary_key: Sequence[str]) -> dict[str, Any]:
    strategy: dict[str, Any] = {"kind": kind}
    if primary_key:
        strategy["primaryKey"] = list(primary_key)
    return strategy


def derivative(
    name: str,
    query: str,
    inputs: Sequence[str],
    *,
    version: str | None = None,
    events: Sequence[Mapping[str, Any]] = (),
    temporal_tables: Mapping[str, Sequence[str]] | None = None,
) -> str:
    """A derivative dataset: one Spark SQL ``query`` over ``inputs`` (dataset references);
    ``temporal_tables``: input alias -> primary key."""
    transform: dict[str, Any] = {"kind": "Sql", "engine": "spark"}
    if version is not None:
        transform["version"] = version
    transform["query"] = query
    if temporal_tables:
        transform["temporalTables"] = [
            {"name": name, "primaryKey": list(key)} for name, key in temporal_tables.items()
        ]
    set_transform = {
        "kind": "SetTransform",
        "inputs": [{"datasetRef": ref} for ref in inputs],
        "transform": transform,
    }
    return snapshot(name, "Derivative", [set_transform, *events])


def snapshot(name: str, kind: str, metadata: Sequence[Mapping[str, Any]]) -> str:
    """The YAML text of a ``DatasetSnapshot`` with these metadata events."""
    document = {
        "kind": "DatasetSnapshot",
        "version": 1,
        "content": {"name": name, "kind": kind, "metadata": [dict(e) for e in metadata]},
    }
    return yaml.safe_dump(document, sort_keys=False, allow_unicode=True, width=1_000_000)
