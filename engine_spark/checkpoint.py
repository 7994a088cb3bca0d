"""The engine checkpoint: the state one transaction hands to the next.

The state is every input's watermark, the last output watermark, for inputs declared as
temporal tables their latest row per primary key and, for a stateful query, its streaming
state (``StreamState``: Spark's streaming checkpoint in portable form, plus the last emitted
row per key of a changelog). Without temporal tables or streaming state it is one
deterministic JSON document (sorted keys, inputs sorted by DatasetID, fixed timestamp format);
with them, a tar holding that document (``checkpoint.json``), one Parquet file per temporal
table and the streaming state's files under ``stream/``, written with fixed metadata (mtime 0,
mode 644, no owner) in name order.

Format versions: 1 has no streaming state; 2 adds ``stream`` (written only when there is
streaming state, so stateless checkpoints keep their version-1 bytes) run by Spark Structured
Streaming; 3 adds the ``runner`` of the streaming state (``Runner``): ``window-recompute``
(the records of open windows, ``stateful/window.py``) or ``join-recompute`` (the records
within an interval join's bound, ``stateful/interval_join.py``) or ``top-n-recompute`` (the
rows in a top N, ``stateful/top_n.py``) or ``as-of-join`` (waiting stream rows and versions,
``stateful/as_of_join/state.py``), under ``stream/retained/``. All are read.

A checkpoint written by the reference Spark engine (a tar of ``<dataset id>.watermark`` files
holding ISO instants) is read too, so a dataset can switch engines without losing watermarks.
"""

from __future__ import annotations

import io
import json
import re
import tarfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any, TypeVar

from common.odf.errors import DecodeError
from common.odf.identity import DatasetID
from engine_spark.errors import InputDataError
from engine_spark.exchange import write_bytes

CHECKPOINT_FORMAT = "odf-py/engine-spark/checkpoint"
CHECKPOINT_VERSION = 1
STREAM_CHECKPOINT_VERSION = 2
RUNNER_CHECKPOINT_VERSION = 3
_READABLE_VERSIONS = (CHECKPOINT_VERSION, STREAM_CHECKPOINT_VERSION, RUNNER_CHECKPOINT_VERSION)


class Runner(StrEnum):
    """How a stateful query's state is run (``stateful/registry.py`` picks it); the value is
    the checkpoint's ``runner`` field."""

    SPARK_STREAMING = "spark-streaming"
    """Spark Structured Streaming (``stateful/structured_streaming/``): ``files`` are Spark's
    checkpoint."""
    WINDOW_RECOMPUTE = "window-recompute"
    """A window aggregation recomputed from retained records (``stateful/window.py``):
    ``files`` are the records of open windows, one Parquet file per input
    (``<input directory>.parquet``)."""
    JOIN_RECOMPUTE = "join-recompute"
    """An inner interval join recomputed from kept records (``stateful/interval_join.py``):
    ``files`` are each side's records still within the join's bound, as for
    ``WINDOW_RECOMPUTE``."""
    TOPN_RECOMPUTE = "top-n-recompute"
    """A top-N per key recomputed from the rows in the top N (``stateful/top_n.py``):
    ``files`` holds those rows (as they enter the window function), ``emitted`` the
    changelog's last rows."""
    RANKED_ROWS = "ranked-rows"
    """The latest row per key or a top N (``stateful/shapes/ranked_rows.py``): as
    ``TOPN_RECOMPUTE``."""
    RUNNING_AGGREGATE = "running-aggregate"
    """Running aggregates per key (``stateful/shapes/running_aggregate.py``): ``files`` are
    the rows waiting for the watermark (``waiting.parquet``) and the aggregates per key of
    those emitted (``carried.parquet``)."""
    DISTINCT_ROWS = "distinct-rows"
    """SELECT DISTINCT gated by the watermark (``stateful/shapes/distinct_rows.py``): ``files``
    are the distinct rows waiting for it (``waiting.parquet``)."""
    ASOF_JOIN = "as-of-join"
    """An event-time as-of join (``stateful/as_of_join/``): ``files`` are the stream's rows
    waiting for the versioned input's watermark and the versions they can still need, one
    Parquet file per input."""


class Mode(StrEnum):
    """How a stateful query's output is written; the value is the checkpoint's ``mode``."""

    APPEND = "append"
    """Rows are final once written (windows, interval joins, as-of joins)."""
    CHANGELOG = "changelog"
    """Rows are revised by retractions and corrections keyed by ``keys`` (aggregates
    without an event-time group, top-N)."""


_E = TypeVar("_E", bound=StrEnum)
_REFERENCE_SUFFIX = ".watermark"
_JSON_ENTRY = "checkpoint.json"
_TEMPORAL_DIR = "temporal"
_STREAM_DIR = "stream"
_SPARK_DIR = f"{_STREAM_DIR}/spark/"
_RUNNER_DIRS = {
    runner: _SPARK_DIR if runner is Runner.SPARK_STREAMING else f"{_STREAM_DIR}/retained/"
    for runner in Runner
}
_SNAPSHOT_FILE = f"{_STREAM_DIR}/emitted.parquet"
_FRACTION = re.compile(r"\.(\d+)")


@dataclass(frozen=True, slots=True, kw_only=True)
class TemporalState:
    """The latest row per primary key of one temporal table, as Parquet bytes."""

    primary_key: tuple[str, ...]
    parquet: bytes


@dataclass(frozen=True, slots=True, kw_only=True)
class StreamState:
    """A stateful query's state between transactions (see ``stateful/registry.py``)."""

    query: str
    """Fingerprint of the transform the state belongs to (a changed query starts afresh)."""
    spark_version: str
    """``major.minor`` of the Spark that wrote ``files``: state stores are tied to it."""
    mode: Mode
    """``append`` (windows, interval joins) or ``changelog`` (unbounded aggregates)."""
    transactions: int
    """Transactions run so far (names each transaction's input files uniquely)."""
    files: Mapping[str, bytes]
    """The runner's state files by relative path: Spark's checkpoint directory (input paths
    made portable), or the retained records of a window aggregation."""
    keys: tuple[str, ...] = ()
    """A changelog's key columns."""
    emitted: bytes | None = None
    """A changelog's last emitted row per key, as Parquet."""
    runner: Runner = Runner.SPARK_STREAMING
    """How the state is run (``Runner``)."""
    window: WindowSpec | None = None
    """``WINDOW_RECOMPUTE``: the aggregation's window, as found in the query's plan."""
    join: JoinSpec | None = None
    """``JOIN_RECOMPUTE``: the join's sides and bounds, as found in the query's plan."""
    off_millisecond: datetime | None = None
    """``SPARK_STREAMING``: the latest key off a whole millisecond that Spark may still hold
    below the watermark (``watermark.off_millisecond_key``)."""

    @property
    def files_size(self) -> int:
        """The bytes of ``files`` (for the logs)."""
        return sum(len(c) for c in self.files.values())


@dataclass(frozen=True, slots=True, kw_only=True)
class JoinSpec:
    """A recomputed interval join's inputs (query aliases) and bounds (microseconds)."""

    left: str
    right: str
    left_lag_us: int
    right_lag_us: int


@dataclass(frozen=True, slots=True, kw_only=True)
class WindowSpec:
    """A recomputed window aggregation's window column, width, output watermark lag, and the
    grid its windows start on (slide and offset; no slide in checkpoints written before the
    grid was kept), in microseconds."""

    column: str
    width_us: int
    lag_us: int
    slide_us: int | None = None
    offset_us: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class EngineCheckpoint:
    """Per-input watermarks (by DatasetID), the last output watermark, temporal tables."""

    input_watermarks: Mapping[DatasetID, datetime] = field(default_factory=dict)
    output_watermark: datetime | None = None
    temporal_tables: Mapping[str, TemporalState] = field(default_factory=dict)
    """By temporal table name (the input's query alias)."""
    stream: StreamState | None = None

    def is_empty(self) -> bool:
        return (
            not self.input_watermarks
            and self.output_watermark is None
            and not self.temporal_tables
            and self.stream is None
        )


EMPTY_CHECKPOINT = EngineCheckpoint()


def encode_checkpoint(checkpoint: EngineCheckpoint) -> bytes:
    """Deterministic bytes of ``checkpoint``: JSON, or a tar when it has temporal tables."""
    doc: dict[str, Any] = {
        "format": CHECKPOINT_FORMAT,
        "version": CHECKPOINT_VERSION,
        "inputs": [
            {"datasetId": did, "watermark": format_instant(wm)}
            for did, wm in sorted((k.to_did(), v) for k, v in checkpoint.input_watermarks.items())
        ],
        "outputWatermark": (
            format_instant(checkpoint.output_watermark)
            if checkpoint.output_watermark is not None
            else None
        ),
    }
    if not checkpoint.temporal_tables and checkpoint.stream is None:
        return _json_bytes(doc)
    names = sorted(checkpoint.temporal_tables)
    doc["temporalTables"] = [
        {
            "name": name,
            "primaryKey": list(checkpoint.temporal_tables[name].primary_key),
            "file": f"{_TEMPORAL_DIR}/{i:04d}.parquet",
        }
        for i, name in enumerate(names)
    ]
    files = [
        (entry["file"], checkpoint.temporal_tables[entry["name"]].parquet)
        for entry in doc["temporalTables"]
    ]
    if checkpoint.stream is not None:
        doc["version"] = (
            STREAM_CHECKPOINT_VERSION
            if checkpoint.stream.runner is Runner.SPARK_STREAMING
            else RUNNER_CHECKPOINT_VERSION
        )
        doc["stream"], stream_files = _encode_stream(checkpoint.stream)
        files += stream_files
    return _tar_bytes([(_JSON_ENTRY, _json_bytes(doc)), *files])


def _encode_stream(stream: StreamState) -> tuple[dict[str, Any], list[tuple[str, bytes]]]:
    doc: dict[str, Any] = {
        "query": stream.query,
        "sparkVersion": stream.spark_version,
        "mode": stream.mode.value,
        "transactions": stream.transactions,
        "keys": list(stream.keys),
    }
    if stream.runner is not Runner.SPARK_STREAMING:
        doc["runner"] = stream.runner.value
    if stream.window is not None:
        doc["window"] = {
            "column": stream.window.column,
            "widthMicros": stream.window.width_us,
            "lagMicros": stream.window.lag_us,
        }
        if stream.window.slide_us is not None:
            doc["window"]["slideMicros"] = stream.window.slide_us
            doc["window"]["offsetMicros"] = stream.window.offset_us
    if stream.off_millisecond is not None:
        doc["offMillisecondKey"] = format_instant(stream.off_millisecond)
    if stream.join is not None:
        doc["join"] = {
            "left": stream.join.left,
            "right": stream.join.right,
            "leftLagMicros": stream.join.left_lag_us,
            "rightLagMicros": stream.join.right_lag_us,
        }
    directory = _RUNNER_DIRS[stream.runner]
    files = [(directory + name, stream.files[name]) for name in sorted(stream.files)]
    if stream.emitted is not None:
        doc["emitted"] = _SNAPSHOT_FILE
        files.append((_SNAPSHOT_FILE, stream.emitted))
    return doc, files


def decode_checkpoint(data: bytes, *, path: str = "checkpoint") -> EngineCheckpoint:
    """Our JSON or tar checkpoint, or a reference Spark engine tar; InputDataError otherwise."""
    if data[:1] == b"{":
        return _decode_json(data, path, {})
    if _is_tar(data):
        files = _tar_files(data, path)
        if _JSON_ENTRY in files:
            return _decode_json(files[_JSON_ENTRY], path, files)
        return _decode_reference_files(files, path)
    raise InputDataError("not an engine checkpoint (neither our JSON nor a tar)", path=path)


def read_checkpoint(path: str | None) -> EngineCheckpoint:
    """The checkpoint at ``path``, or the empty state when there is none."""
    if path is None:
        return EMPTY_CHECKPOINT
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise InputDataError(f"cannot read the previous checkpoint: {e.strerror}", path=path) from e
    return decode_checkpoint(data, path=path)


def write_checkpoint(checkpoint: EngineCheckpoint, path: str) -> None:
    write_bytes(encode_checkpoint(checkpoint), path)


def format_instant(value: datetime) -> str:
    """``YYYY-MM-DDTHH:MM:SS.ffffffZ`` in UTC."""
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_instant(text: str, *, path: str) -> datetime:
    """An ISO-8601 instant (``Z`` or offset; up to nanoseconds, truncated to microseconds)."""
    text = _FRACTION.sub(lambda m: "." + m.group(1)[:6].ljust(6, "0"), text.strip(), count=1)
    try:
        value = datetime.fromisoformat(text)
    except ValueError:
        raise InputDataError(f"{text!r} is not an ISO-8601 instant", path=path) from None
    if value.tzinfo is None:
        raise InputDataError(f"instant {text!r} has no time zone", path=path)
    return value.astimezone(UTC)


def _json_bytes(doc: dict[str, Any]) -> bytes:
    return (json.dumps(doc, sort_keys=True, separators=(",", ":")) + "\n").encode()


def _tar_bytes(entries: list[tuple[str, bytes]]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        for name, content in entries:
            info = tarfile.TarInfo(name)
            info.size, info.mtime, info.mode = len(content), 0, 0o644
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            tar.addfile(info, io.BytesIO(content))
    return buf.getvalue()


def _tar_files(data: bytes, path: str) -> dict[str, bytes]:
    files: dict[str, bytes] = {}
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as tar:
            for member in tar.getmembers():
                content = tar.extractfile(member) if member.isfile() else None
                if content is not None:
                    files[member.name.removeprefix("./")] = content.read()
    except tarfile.TarError as e:
        raise InputDataError(f"unreadable checkpoint tar: {e}", path=path) from e
    return files


def _decode_json(data: bytes, path: str, files: Mapping[str, bytes]) -> EngineCheckpoint:
    try:
        doc = json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise InputDataError(f"checkpoint is not valid JSON: {e}", path=path) from e
    if not isinstance(doc, dict) or doc.get("format") != CHECKPOINT_FORMAT:
        raise InputDataError(f"checkpoint format is not {CHECKPOINT_FORMAT!r}", path=path)
    if doc.get("version") not in _READABLE_VERSIONS:
        raise InputDataError(
            f"checkpoint version {doc.get('version')!r} is not supported "
            f"(this engine reads versions {', '.join(map(str, _READABLE_VERSIONS))})",
            path=path,
        )
    watermarks: dict[DatasetID, datetime] = {}
    for i, entry in enumerate(doc.get("inputs") or []):
        where = f"{path}: inputs[{i}]"
        try:
            watermarks[DatasetID.from_did(entry["datasetId"])] = parse_instant(
                entry["watermark"], path=where
            )
        except (KeyError, TypeError) as e:
            raise InputDataError(f"missing or malformed field {e}", path=where) from e
        except DecodeError as e:
            raise InputDataError(e.reason, path=where) from e
    output = doc.get("outputWatermark")
    return EngineCheckpoint(
        input_watermarks=watermarks,
        output_watermark=(
            parse_instant(output, path=f"{path}: outputWatermark") if output else None
        ),
        temporal_tables=_decode_temporal(doc.get("temporalTables") or [], files, path),
        stream=_decode_stream(doc["stream"], files, path) if doc.get("stream") else None,
    )


def _decode_stream(entry: Any, files: Mapping[str, bytes], path: str) -> StreamState:
    where = f"{path}: stream"
    try:
        runner = _decode_enum(Runner, entry.get("runner", Runner.SPARK_STREAMING), "runner", where)
        directory = _RUNNER_DIRS[runner]
        emitted_file = entry.get("emitted")
        if emitted_file is not None and emitted_file not in files:
            raise InputDataError(f"file {emitted_file!r} is missing from the tar", path=where)
        return StreamState(
            query=str(entry["query"]),
            spark_version=str(entry["sparkVersion"]),
            mode=_decode_enum(Mode, entry["mode"], "mode", where),
            transactions=int(entry["transactions"]),
            keys=tuple(str(k) for k in entry.get("keys") or ()),
            files={
                name.removeprefix(directory): content
                for name, content in files.items()
                if name.startswith(directory)
            },
            emitted=files[emitted_file] if emitted_file is not None else None,
            runner=runner,
            window=_decode_window(entry.get("window"), where),
            join=_decode_join(entry.get("join"), where),
            off_millisecond=(
                parse_instant(entry["offMillisecondKey"], path=f"{where}: offMillisecondKey")
                if entry.get("offMillisecondKey")
                else None
            ),
        )
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        raise InputDataError(f"missing or malformed field {e}", path=where) from e


def _decode_enum(kind: type[_E], value: Any, field: str, where: str) -> _E:
    try:
        return kind(str(value))
    except ValueError:
        raise InputDataError(f"unknown streaming {field} {value!r}", path=where) from None


def _decode_window(entry: Any, where: str) -> WindowSpec | None:
    if entry is None:
        return None
    spec = WindowSpec(
        column=str(entry["column"]),
        width_us=int(entry["widthMicros"]),
        lag_us=int(entry["lagMicros"]),
        slide_us=int(entry["slideMicros"]) if "slideMicros" in entry else None,
        offset_us=int(entry.get("offsetMicros", 0)),
    )
    if spec.width_us <= 0:
        raise InputDataError(f"window width {spec.width_us} is not positive", path=where)
    if not 0 <= spec.lag_us <= spec.width_us:
        raise InputDataError(f"window lag {spec.lag_us} is not within the width", path=where)
    if spec.slide_us is not None and not 0 < spec.slide_us <= spec.width_us:
        raise InputDataError(f"window slide {spec.slide_us} is not within the width", path=where)
    return spec


def _decode_join(entry: Any, where: str) -> JoinSpec | None:
    if entry is None:
        return None
    spec = JoinSpec(
        left=str(entry["left"]),
        right=str(entry["right"]),
        left_lag_us=int(entry["leftLagMicros"]),
        right_lag_us=int(entry["rightLagMicros"]),
    )
    if spec.left_lag_us < 0 or spec.right_lag_us < 0 or spec.left == spec.right:
        raise InputDataError("malformed interval join (sides or bounds)", path=where)
    return spec


def _decode_temporal(
    entries: list[Any], files: Mapping[str, bytes], path: str
) -> dict[str, TemporalState]:
    tables: dict[str, TemporalState] = {}
    for i, entry in enumerate(entries):
        where = f"{path}: temporalTables[{i}]"
        try:
            name, key, file = entry["name"], tuple(entry["primaryKey"]), entry["file"]
        except (KeyError, TypeError) as e:
            raise InputDataError(f"missing or malformed field {e}", path=where) from e
        if file not in files:
            raise InputDataError(f"state file {file!r} is missing from the tar", path=where)
        tables[name] = TemporalState(primary_key=key, parquet=files[file])
    return tables


def _is_tar(data: bytes) -> bool:
    return len(data) >= 512 and data[257:262] == b"ustar"


def _decode_reference_files(files: Mapping[str, bytes], path: str) -> EngineCheckpoint:
    watermarks: dict[DatasetID, datetime] = {}
    for member, content in sorted(files.items()):
        name = member.rsplit("/", 1)[-1]
        if not name.endswith(_REFERENCE_SUFFIX):
            continue
        stem = name[: -len(_REFERENCE_SUFFIX)]
        did = stem if stem.startswith("did:odf:") else f"did:odf:{stem}"
        where = f"{path}: {member}"
        try:
            dataset_id = DatasetID.from_did(did)
        except DecodeError as e:
            raise InputDataError(e.reason, path=where) from e
        watermarks[dataset_id] = parse_instant(content.decode(), path=where)
    return EngineCheckpoint(input_watermarks=watermarks)
