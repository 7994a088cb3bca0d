"""Spark's streaming checkpoint directory in and out of the ODF checkpoint, portable.

A streaming query's checkpoint (``metadata``, ``offsets/``, ``commits/``, ``sources/``,
``state/``) is unpacked into a fresh directory before the transaction and packed back after
it. Two things in it would tie it to one machine, and one would make it differ on replay:

* the file source's log (``sources/N/*``) records the absolute URI of every input file it
  read. Files live under the request's input directory, so that prefix is replaced by
  ``INPUT_PLACEHOLDER`` when packing and by the new request's directory when unpacking: the
  checkpoint works wherever the dataset is, or the engine runs;
* wall-clock times (``batchTimestampMs`` in ``offsets/N``, file modification times in the
  source log) are set to 0, and the query id in ``metadata`` is fixed, so the same
  transaction replayed packs the same logs (the state files are deterministic already).

Hadoop's checksum side files (``.*.crc``) are left out: Spark reads the files without them.
Names from a checkpoint are untrusted (a pulled dataset's): anything absolute, with ``..`` or
outside the expected top-level directories is refused, and so is a source log naming a file
anywhere but under the placeholder (Spark would look at it when the query restarts).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from pathlib import Path, PurePosixPath

from engine_spark.errors import InputDataError

INPUT_PLACEHOLDER = "file:///odf-stream-input/"
"""How packed source logs name the request's input directory."""

QUERY_ID = '{"id":"00000000-0000-4000-8000-000000000000"}'
"""The streaming query id written before the first run (Spark keeps a checkpoint's id)."""

_TOP_LEVEL = frozenset({"metadata", "offsets", "commits", "sources", "state"})
_BATCH_TIMESTAMP = re.compile(rb'"batchTimestampMs":\d+')
_FILE_TIMESTAMP = re.compile(rb'"timestamp":\d+')


def unpack(files: Mapping[str, bytes], directory: Path, input_root: Path) -> None:
    """Write a packed checkpoint into ``directory`` (created), inputs under ``input_root``."""
    directory.mkdir(parents=True, exist_ok=True)
    target_prefix = input_root.resolve().as_uri().rstrip("/").encode() + b"/"
    for name, content in files.items():
        relative = _safe_name(name)
        if relative.parts[0] == "sources":
            _check_source_paths(name, content)
            content = content.replace(INPUT_PLACEHOLDER.encode(), target_prefix)
        path = directory.joinpath(*relative.parts)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content)
    if "metadata" not in files:
        (directory / "metadata").write_text(QUERY_ID + "\n")


def fresh(directory: Path) -> None:
    """A checkpoint directory for a query's first run, with the fixed query id."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "metadata").write_text(QUERY_ID + "\n")


def pack(directory: Path, input_root: Path) -> dict[str, bytes]:
    """The checkpoint directory's files by relative path, portable and free of clock times."""
    source_prefix = input_root.resolve().as_uri().rstrip("/").encode() + b"/"
    files: dict[str, bytes] = {}
    for root, dirs, names in os.walk(directory):
        dirs.sort()
        for name in sorted(names):
            if name.startswith(".") and name.endswith(".crc"):
                continue
            path = Path(root) / name
            relative = path.relative_to(directory).as_posix()
            content = path.read_bytes()
            top = relative.split("/", 1)[0]
            if top == "offsets":
                content = _BATCH_TIMESTAMP.sub(b'"batchTimestampMs":0', content)
            elif top == "sources":
                content = _FILE_TIMESTAMP.sub(b'"timestamp":0', content)
                content = content.replace(source_prefix, INPUT_PLACEHOLDER.encode())
            files[relative] = content
    return files


def advance_next_watermark(directory: Path, watermark_ms: int) -> None:
    """Raise the watermark Spark's last commit hands the next micro-batch to ``watermark_ms``
    (``nextBatchWatermarkMs``, what a restarted query evicts state with); never lowers it."""
    commits = directory / "commits"
    batches = [p for p in commits.iterdir() if p.name.isdigit()] if commits.is_dir() else []
    if not batches:
        return
    latest = max(batches, key=lambda p: int(p.name))
    header, _, body = latest.read_text().partition("\n")
    doc = json.loads(body)
    doc["nextBatchWatermarkMs"] = max(int(doc.get("nextBatchWatermarkMs", 0)), watermark_ms)
    latest.write_text(f"{header}\n{json.dumps(doc, separators=(',', ':'))}")


def lower_last_watermark(directory: Path, watermark_ms: int) -> None:
    """Lower the watermark of the last micro-batch in the offset log (``batchWatermarkMs``,
    the one a restarted query's next batch drops late records by) to ``watermark_ms``;
    never raises it."""
    offsets = directory / "offsets"
    batches = [p for p in offsets.iterdir() if p.name.isdigit()] if offsets.is_dir() else []
    if not batches:
        return
    latest = max(batches, key=lambda p: int(p.name))
    version, metadata, rest = latest.read_text().split("\n", 2)
    doc = json.loads(metadata)
    doc["batchWatermarkMs"] = min(int(doc.get("batchWatermarkMs", watermark_ms)), watermark_ms)
    latest.write_text(f"{version}\n{json.dumps(doc, separators=(',', ':'))}\n{rest}")


_SOURCE_PATH = re.compile(rb'"path":"([^"]*)"')


def _check_source_paths(name: str, content: bytes) -> None:
    for match in _SOURCE_PATH.finditer(content):
        path = match.group(1)
        if not path.startswith(INPUT_PLACEHOLDER.encode()) or b"/../" in path:
            raise InputDataError(
                f"checkpoint entry {name!r} names input file {path.decode(errors='replace')!r}"
                f" outside the engine's input directory"
            )


def _safe_name(name: str) -> PurePosixPath:
    path = PurePosixPath(name)
    if (
        not name
        or path.is_absolute()
        or any(part in ("", ".", "..") for part in path.parts)
        or path.parts[0] not in _TOP_LEVEL
        or "\\" in name
        or "\x00" in name
    ):
        raise InputDataError(f"checkpoint entry {name!r} is not a streaming checkpoint file")
    return path
