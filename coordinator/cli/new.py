"""``odf new NAME [--template T]``: a DatasetSnapshot file to start from, commented, that
``odf add`` accepts as it is (the placeholders are valid values to edit)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from common.odf.dataset_refs import DatasetName
from common.odf.errors import ValidationError

_HEADER = """\
# A DatasetSnapshot (ODF 0.35): edit it, then `odf add {file}`.
# The events are applied in order; see `odf add --help` and the ODF metadata reference.
kind: DatasetSnapshot
version: 1
content:
  name: {name}
"""

_READ_TAIL = """\
        # Columns as `name TYPE` (Spark DDL types: STRING, BIGINT, DOUBLE, BOOLEAN, DATE,
        # TIMESTAMP, DECIMAL(p,s), ...); a CSV header must name them (in any order).
        schema:
          - "event_time TIMESTAMP"
          - "city STRING"
          - "population BIGINT"
      merge:
        # Append keeps every record; Ledger and Snapshot deduplicate by primaryKey.
        kind: Append
    - kind: SetVocab
      # The column holding each record's event time (default: event_time).
      eventTimeColumn: event_time
    - kind: SetInfo
      description: "What this dataset holds, where it comes from."
      keywords: [example]
"""

_CSV = """\
      read:
        kind: Csv
        header: true
"""

TEMPLATES: dict[str, tuple[str, str]] = {
    "push-csv": (
        "a root fed by `odf ingest NAME FILE` (CSV with a header row)",
        """\
  kind: Root
  metadata:
    - kind: AddPushSource
      sourceName: main
"""
        + _CSV
        + _READ_TAIL,
    ),
    "push-ndjson": (
        "a root fed by `odf ingest NAME FILE` (newline-delimited JSON)",
        """\
  kind: Root
  metadata:
    - kind: AddPushSource
      sourceName: main
      read:
        kind: NdJson
"""
        + _READ_TAIL,
    ),
    "files": (
        "a root polling local files (`odf pull NAME` ingests the new ones)",
        """\
  kind: Root
  metadata:
    - kind: SetPollingSource
      fetch:
        kind: FilesGlob
        # Files matching the pattern, taken in name order, each once.
        path: data/*.csv
"""
        + _CSV
        + _READ_TAIL,
    ),
    "url": (
        "a root polling a URL (`odf pull NAME` fetches it again when it changed)",
        """\
  kind: Root
  metadata:
    - kind: SetPollingSource
      fetch:
        kind: Url
        url: https://example.org/data.csv
"""
        + _CSV
        + _READ_TAIL,
    ),
    "derivative": (
        "a derivative: an SQL query over other datasets (`odf pull NAME` runs it)",
        """\
  kind: Derivative
  metadata:
    - kind: SetTransform
      inputs:
        # Each input by its name in the workspace; the query reads it by this name.
        - datasetRef: source
      transform:
        kind: Sql
        engine: spark
        query: |
          SELECT event_time, city, population
          FROM source
          WHERE population > 0
    - kind: SetInfo
      description: "What this dataset derives, from what."
      keywords: [example]
""",
    ),
}


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "new",
        help="write a DatasetSnapshot file to start from",
        description="templates: "
        + "; ".join(f"{name}: {what}" for name, (what, _) in TEMPLATES.items()),
    )
    p.add_argument("name", metavar="NAME", help="the dataset's name")
    p.add_argument(
        "-t", "--template", choices=list(TEMPLATES), default="push-csv", help="default: push-csv"
    )
    p.add_argument("--output", metavar="FILE", help="where to write (default NAME.yaml; - stdout)")
    p.add_argument("--force", action="store_true", help="replace an existing file")
    p.set_defaults(handler=cmd_new)


def snapshot_text(name: str, template: str, file: str) -> str:
    """The template's text for dataset ``name`` (itself a valid snapshot)."""
    _, body = TEMPLATES[template]
    return _HEADER.format(name=name, file=file) + body


def cmd_new(args: argparse.Namespace) -> int:
    name = str(DatasetName.parse(args.name))
    target = args.output or f"{name}.yaml"
    text = snapshot_text(name, args.template, target if target != "-" else f"{name}.yaml")
    if target == "-":
        sys.stdout.write(text)
        return 0
    path = Path(target)
    if path.exists() and not args.force:
        raise ValidationError(f"{path} exists: give --force to replace it", path="--output")
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.partial")
    partial.write_text(text, encoding="utf-8")
    partial.replace(path)
    print(f"wrote {path} ({args.template}); edit it, then `odf add {path}`")
    return 0
