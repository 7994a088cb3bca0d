"""YAML and plain forms round-trip every model value; scalar text forms are the reference's."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from common.odf import engine_protocol as ep
from common.odf.block import MetadataBlock
from common.odf.events import SetInfo, SetPollingSource, SetTransform
from common.odf.fragments import (
    DatasetKind,
    DatasetVocabulary,
    EventTimeSourceFromPath,
    FetchStepFilesGlob,
    MergeStrategySnapshot,
    PrepStepPipe,
    ReadStepCsv,
    SourceOrdering,
    TransformInput,
    TransformSql,
)
from common.odf.snapshot import DatasetSnapshot
from common.serde import flatbuffers_codec
from common.serde.yaml_codec import (
    dump_block_manifest,
    dump_snapshot,
    dump_yaml,
    from_plain,
    load_block_manifest,
    load_object,
    load_snapshot,
    load_snapshots,
    to_plain,
)
from common.serde.yaml_scalars import format_timestamp, parse_timestamp
from tests.support import strategies as ost

snapshots = st.builds(
    DatasetSnapshot,
    name=ost.DEFAULT_TEXT,
    kind=st.sampled_from(DatasetKind),
    metadata=st.lists(ost.metadata_events(), max_size=3).map(tuple),
)


@given(ost.metadata_blocks())
def test_block_manifest_round_trip(block: MetadataBlock) -> None:
    text = dump_block_manifest(block)
    assert load_block_manifest(text) == block
    assert dump_block_manifest(load_block_manifest(text)) == text


@given(snapshots)
def test_snapshot_round_trip(snapshot: DatasetSnapshot) -> None:
    assert load_snapshot(dump_snapshot(snapshot)) == snapshot


@given(st.lists(snapshots, min_size=1, max_size=3))
def test_multi_document_snapshots(many: list[DatasetSnapshot]) -> None:
    text = "".join("---\n" + dump_snapshot(s) for s in many)
    assert load_snapshots(text) == many


@pytest.mark.parametrize(
    "cls",
    [ep.TransformRequest, ep.RawQueryRequest, ep.ValidateQueryRequest, ep.MigrateQueryRequest],
)
@settings(max_examples=max(1, settings().max_examples // 4))  # 25 per class by default
@given(data=st.data())
def test_engine_messages_round_trip_through_json_and_yaml(cls: type, data: st.DataObject) -> None:
    message = data.draw(ost.model(cls))
    plain = to_plain(message)
    assert from_plain(cls, json.loads(json.dumps(plain))) == message
    assert load_object(cls, dump_yaml(plain)) == message


@pytest.mark.parametrize(
    "union", ["TransformResponse", "RawQueryResponse", "ValidateQueryResponse"]
)
@given(data=st.data())
def test_union_values_round_trip_by_union_name(union: str, data: st.DataObject) -> None:
    value = data.draw(ost.union_values(union))
    plain = to_plain(value)
    assert isinstance(plain, dict)
    assert next(iter(plain)) == "kind"
    assert from_plain(union, plain) == value


@given(ost.metadata_blocks())
def test_yaml_and_flatbuffers_agree(block: MetadataBlock) -> None:
    manifest = flatbuffers_codec.encode_block(block)
    via_yaml = load_block_manifest(dump_block_manifest(flatbuffers_codec.decode_block(manifest)))
    assert flatbuffers_codec.encode_block(via_yaml) == manifest


HAND_WRITTEN = """\
---
# A root dataset, written the way people write them: comments, indented sequences,
# flow lists, camelCase kinds and a literal block.
kind: DatasetSnapshot
version: 1
content:
  name: example.sensors
  kind: root
  metadata:
    - kind: setPollingSource
      fetch:
        kind: filesGlob
        path: /data/sensors-*.csv
        eventTime:
          kind: fromPath
          pattern: 'sensors-(\\d+)\\.csv'
          timestampFormat: "%Y%m%d"
        order: byName
      prepare:
        - kind: pipe
          command: [gunzip, -c]
      read:
        kind: csv
        header: true
        schema:
          - id BIGINT  # the primary key
          - value DOUBLE
      preprocess:
        kind: sql
        engine: spark
        query: |
          SELECT id, value
          FROM input
      merge:
        kind: snapshot
        primaryKey: [id]
"""


def test_hand_written_snapshot_in_the_reference_style() -> None:
    (snapshot,) = load_snapshots(HAND_WRITTEN, source="sensors.yaml")
    assert snapshot.kind is DatasetKind.ROOT
    (source,) = snapshot.metadata
    assert isinstance(source, SetPollingSource)
    assert source.fetch == FetchStepFilesGlob(
        path="/data/sensors-*.csv",
        event_time=EventTimeSourceFromPath(
            pattern="sensors-(\\d+)\\.csv", timestamp_format="%Y%m%d"
        ),
        order=SourceOrdering.BY_NAME,
    )
    assert source.prepare == (PrepStepPipe(command=("gunzip", "-c")),)
    assert source.read == ReadStepCsv(header=True, schema=("id BIGINT", "value DOUBLE"))
    assert source.preprocess == TransformSql(engine="spark", query="SELECT id, value\nFROM input\n")
    assert source.merge == MergeStrategySnapshot(primary_key=("id",))
    written = dump_snapshot(snapshot)
    assert "  kind: Root\n" in written
    assert "    kind: FromPath\n" in written
    assert load_snapshot(written) == snapshot


def test_plain_form_is_camel_case_in_model_order_without_none() -> None:
    vocab = DatasetVocabulary()
    assert to_plain(vocab) == {
        "offsetColumn": "offset",
        "operationTypeColumn": "op",
        "systemTimeColumn": "system_time",
        "eventTimeColumn": "event_time",
    }
    assert list(to_plain(SetInfo(keywords=("a",)))) == ["kind", "keywords"]


def test_vocabulary_fields_are_required_as_in_the_schema() -> None:
    with pytest.raises(Exception, match="eventTimeColumn: missing required field"):
        from_plain(
            DatasetVocabulary,
            {"offsetColumn": "o", "operationTypeColumn": "op", "systemTimeColumn": "s"},
        )


def test_empty_and_absent_lists_are_different() -> None:
    with_empty = SetInfo(keywords=())
    assert dump_yaml(to_plain(with_empty)) == "kind: SetInfo\nkeywords: []\n"
    assert from_plain("MetadataEvent", to_plain(with_empty)) == with_empty
    assert from_plain("MetadataEvent", {"kind": "SetInfo", "keywords": None}) == SetInfo()


def test_multi_line_strings_are_literal_blocks() -> None:
    snapshot = DatasetSnapshot(
        name="x",
        kind=DatasetKind.DERIVATIVE,
        metadata=(
            SetTransform(
                inputs=(TransformInput(dataset_ref="in", alias="in"),),
                transform=TransformSql(engine="spark", query="SELECT\n  a\nFROM in\n"),
            ),
        ),
    )
    text = dump_snapshot(snapshot)
    assert "      query: |\n        SELECT\n          a\n        FROM in\n" in text
    assert load_snapshot(text) == snapshot


@pytest.mark.parametrize(
    ("value", "written"),
    [
        ("", "''"),
        ("0123", "'0123'"),
        ("123", "'123'"),
        ("1.5", "'1.5'"),
        ("true", "'true'"),
        ("null", "'null'"),
        ("~", "'~'"),
        ("- a", "'- a'"),
        ("a: b", "'a: b'"),
        ("yes", "yes"),
        ("2020-01-01", "2020-01-01"),
        ("tab\there", '"tab\\there"'),
        ("line\rbreak", '"line\\rbreak"'),
        ("é", "é"),
    ],
)
def test_strings_are_quoted_only_when_needed(value: str, written: str) -> None:
    assert dump_yaml({"k": value}) == f"k: {written}\n"
    assert load_object(SetInfo, f"kind: SetInfo\ndescription: {written}\n").description == value


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2020-01-01T12:00:00Z", datetime(2020, 1, 1, 12, tzinfo=UTC)),
        ("2020-01-01t12:00:00z", datetime(2020, 1, 1, 12, tzinfo=UTC)),
        ("2020-01-01 12:00:00Z", datetime(2020, 1, 1, 12, tzinfo=UTC)),
        ("2020-01-01T12:00:00+05:30", datetime(2020, 1, 1, 6, 30, tzinfo=UTC)),
        ("2020-01-01T00:00:00-01:00", datetime(2020, 1, 1, 1, tzinfo=UTC)),
        ("2020-01-01T12:00:00.5Z", datetime(2020, 1, 1, 12, 0, 0, 500_000, tzinfo=UTC)),
        ("2020-01-01T12:00:00.123456789Z", datetime(2020, 1, 1, 12, 0, 0, 123_456, tzinfo=UTC)),
    ],
)
def test_timestamps_are_read_as_rfc3339(text: str, expected: datetime) -> None:
    parsed = parse_timestamp(text)
    assert parsed == expected
    assert parsed.tzinfo is UTC


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (datetime(2020, 1, 1, 12, tzinfo=UTC), "2020-01-01T12:00:00Z"),
        (datetime(2020, 1, 1, 12, 0, 0, 120_000, tzinfo=UTC), "2020-01-01T12:00:00.120Z"),
        (datetime(2020, 1, 1, 12, 0, 0, 1, tzinfo=UTC), "2020-01-01T12:00:00.000001Z"),
        (datetime(1, 1, 1, tzinfo=UTC), "0001-01-01T00:00:00Z"),
        (datetime(2020, 1, 1, 12, tzinfo=timezone(timedelta(hours=2))), "2020-01-01T10:00:00Z"),
    ],
)
def test_timestamps_are_written_in_utc_with_the_shortest_exact_fraction(
    value: datetime, text: str
) -> None:
    assert format_timestamp(value) == text


@given(ost.offset_datetimes())
def test_timestamp_text_round_trip(value: datetime) -> None:
    assert parse_timestamp(format_timestamp(value)) == value


def test_naive_timestamps_are_rejected_on_output() -> None:
    with pytest.raises(Exception, match="has no time zone"):
        to_plain(datetime(2020, 1, 1))


def test_to_plain_of_a_sequence_and_of_plain_scalars() -> None:
    values: list[Any] = [1, "a", None, True, DatasetKind.ROOT]
    assert to_plain(values) == [1, "a", None, True, "Root"]
