"""Spark's streaming checkpoint packed into the ODF checkpoint: portable, clock-free, safe."""

from __future__ import annotations

import dataclasses
import io
import json
import tarfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from engine_spark.checkpoint import (
    EngineCheckpoint,
    Mode,
    Runner,
    StreamState,
    WindowSpec,
    decode_checkpoint,
    encode_checkpoint,
)
from engine_spark.errors import InputDataError
from engine_spark.stateful.structured_streaming import state as stream_state


def spark_checkpoint(directory: Path, inputs: Path) -> None:
    (directory / "offsets").mkdir(parents=True)
    (directory / "sources" / "0").mkdir(parents=True)
    (directory / "offsets" / "3").write_text(
        'v1\n{"batchWatermarkMs":5,"batchTimestampMs":1795590086380,"conf":{}}\n{"logOffset":3}\n'
    )
    (directory / "offsets" / ".3.crc").write_bytes(b"crc")
    (directory / "sources" / "0" / "3").write_text(
        f'v1\n{{"path":"{inputs.as_uri()}/abc/tx-000000000003.parquet",'
        '"timestamp":1795590084012,"batchId":3}\n'
    )


def test_packed_files_name_no_directory_and_no_clock(tmp_path: Path) -> None:
    first, inputs = tmp_path / "ck", tmp_path / "in"
    inputs.mkdir()
    spark_checkpoint(first, inputs)
    packed = stream_state.pack(first, inputs)
    assert sorted(packed) == ["offsets/3", "sources/0/3"]
    blob = b"".join(packed.values())
    assert str(tmp_path).encode() not in blob
    assert b'"batchTimestampMs":0' in blob and b'"timestamp":0' in blob
    assert stream_state.INPUT_PLACEHOLDER.encode() + b"abc/tx-" in blob

    elsewhere, other_inputs = tmp_path / "x" / "ck", tmp_path / "x" / "in"
    stream_state.unpack(packed, elsewhere, other_inputs)
    source = (elsewhere / "sources" / "0" / "3").read_text()
    assert f"{other_inputs.as_uri()}/abc/tx-000000000003.parquet" in source
    assert (elsewhere / "metadata").read_text().strip() == stream_state.QUERY_ID


@pytest.mark.parametrize("name", ["../x", "/etc/passwd", "state/../../x", "other/file", ""])
def test_unpack_refuses_names_outside_the_checkpoint(tmp_path: Path, name: str) -> None:
    with pytest.raises(InputDataError, match="not a streaming checkpoint file"):
        stream_state.unpack({name: b"x"}, tmp_path / "ck", tmp_path / "in")


def state_of(
    mode: Mode, *, files: dict[str, bytes] | None = None, transactions: int = 1, **more: Any
) -> StreamState:
    """A query ``q``'s state on Spark 4.3 (``more``: the other fields)."""
    return StreamState(
        query="q",
        spark_version="4.3",
        mode=mode,
        transactions=transactions,
        files=files or {},
        **more,
    )


def round_trip(state: StreamState) -> bytes:
    """``state`` in a checkpoint, checked to read back equal and to write back the same bytes."""
    data = encode_checkpoint(EngineCheckpoint(stream=state))
    assert decode_checkpoint(data).stream == state
    assert encode_checkpoint(decode_checkpoint(data)) == data
    return data


def test_streaming_state_round_trips_through_a_version_2_checkpoint() -> None:
    state = state_of(
        Mode.CHANGELOG,
        files={"offsets/6": b"o", "state/0/0/7.delta": b"d"},
        transactions=7,
        keys=("k",),
        emitted=b"PAR1",
    )
    assert b'"version":2' in round_trip(state)


@pytest.mark.parametrize(
    "window",
    [
        WindowSpec(column="window", width_us=60_000_000, lag_us=0),
        WindowSpec(
            column="w", width_us=60_000_000, lag_us=60_000_000, slide_us=30_000_000, offset_us=7
        ),
    ],
)
def test_retained_window_records_round_trip_through_a_version_3_checkpoint(
    window: WindowSpec,
) -> None:
    state = state_of(
        Mode.APPEND,
        files={"abc.parquet": b"PAR1"},
        transactions=3,
        runner=Runner.WINDOW_RECOMPUTE,
        window=window,
    )
    data = round_trip(state)
    assert b'"version":3' in data and b"stream/retained/abc.parquet" in data


def test_an_off_millisecond_key_round_trips_and_is_absent_without_one() -> None:
    held = datetime(2024, 1, 1, 2, 0, 0, 500, tzinfo=UTC)
    state = state_of(Mode.APPEND)
    data = encode_checkpoint(EngineCheckpoint(stream=state))
    assert b"offMillisecondKey" not in data
    held_state = dataclasses.replace(state, off_millisecond=held)
    data = encode_checkpoint(EngineCheckpoint(stream=held_state))
    assert decode_checkpoint(data).stream == held_state


@pytest.mark.parametrize("runner", list(Runner))
@pytest.mark.parametrize("mode", list(Mode))
def test_runner_and_mode_are_written_as_their_names_and_read_back_as_enums(
    runner: Runner, mode: Mode
) -> None:
    """The enums keep the checkpoint's bytes: the same strings as before they were enums."""
    state = state_of(mode, runner=runner)
    data = encode_checkpoint(EngineCheckpoint(stream=state))
    doc = json.loads(_tar_entries(data)["checkpoint.json"])["stream"]
    assert doc["mode"] == {Mode.APPEND: "append", Mode.CHANGELOG: "changelog"}[mode]
    assert doc.get("runner", "spark-streaming") == runner.value
    if runner is Runner.SPARK_STREAMING:
        assert "runner" not in doc  # a version-2 checkpoint, as before runners
    decoded = decode_checkpoint(data).stream
    assert decoded is not None and decoded.runner is runner and decoded.mode is mode


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("runner", "flink", "unknown streaming runner"),
        ("mode", "retract", "unknown streaming mode"),
        ("window", {"column": "w", "widthMicros": 0, "lagMicros": 0}, "not positive"),
        ("window", {"column": "w", "widthMicros": 5, "lagMicros": 6}, "not within"),
        ("window", {"column": "w", "widthMicros": 5, "lagMicros": 0, "slideMicros": 0}, "slide"),
    ],
)
def test_a_bad_streaming_runner_is_refused(field: str, value: object, message: str) -> None:
    state = state_of(Mode.APPEND, runner=Runner.WINDOW_RECOMPUTE)
    files = _tar_entries(encode_checkpoint(EngineCheckpoint(stream=state)))
    doc = json.loads(files["checkpoint.json"])
    doc["stream"][field] = value
    files["checkpoint.json"] = json.dumps(doc).encode()
    with pytest.raises(InputDataError, match=message):
        decode_checkpoint(_tar(files))


def _tar_entries(data: bytes) -> dict[str, bytes]:
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        return {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}  # type: ignore[union-attr]


def _tar(files: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        for name, content in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(content)
            tar.addfile(info, io.BytesIO(content))
    return buf.getvalue()


def test_the_next_batch_watermark_is_raised_in_the_latest_commit_only(tmp_path: Path) -> None:
    commits = tmp_path / "commits"
    commits.mkdir()
    (commits / "9").write_text('v1\n{"nextBatchWatermarkMs":5}')
    (commits / "10").write_text('v1\n{"nextBatchWatermarkMs":7}')
    stream_state.advance_next_watermark(tmp_path, 20)
    assert (commits / "10").read_text() == 'v1\n{"nextBatchWatermarkMs":20}'
    assert (commits / "9").read_text() == 'v1\n{"nextBatchWatermarkMs":5}'
    stream_state.advance_next_watermark(tmp_path, 3)  # never lowered
    assert (commits / "10").read_text() == 'v1\n{"nextBatchWatermarkMs":20}'


def test_the_last_batch_watermark_is_lowered_in_the_latest_offsets_only(tmp_path: Path) -> None:
    """What a restarted query's next batch drops late records by (``streaming.py``)."""
    offsets = tmp_path / "offsets"
    offsets.mkdir()
    for batch, ms in ((3, 5), (4, 9)):
        metadata = f'{{"batchWatermarkMs":{ms},"conf":{{}}}}'
        (offsets / str(batch)).write_text(f'v1\n{metadata}\n{{"logOffset":{batch}}}\n')
    stream_state.lower_last_watermark(tmp_path, 8)
    assert (offsets / "4").read_text() == (
        'v1\n{"batchWatermarkMs":8,"conf":{}}\n{"logOffset":4}\n'
    )
    assert (offsets / "3").read_text().startswith('v1\n{"batchWatermarkMs":5,')
    stream_state.lower_last_watermark(tmp_path, 20)  # never raised
    assert '"batchWatermarkMs":8' in (offsets / "4").read_text()


def test_unpack_refuses_a_source_log_naming_files_elsewhere(tmp_path: Path) -> None:
    log = b'v1\n{"path":"file:///etc/passwd","timestamp":0,"batchId":0}\n'
    with pytest.raises(InputDataError, match="outside the engine's input directory"):
        stream_state.unpack({"sources/0/0": log}, tmp_path / "ck", tmp_path / "in")
    escaping = (
        b'v1\n{"path":"' + stream_state.INPUT_PLACEHOLDER.encode() + b'x/../../etc/passwd"}\n'
    )
    with pytest.raises(InputDataError, match="outside the engine's input directory"):
        stream_state.unpack({"sources/0/0": escaping}, tmp_path / "ck", tmp_path / "in")
