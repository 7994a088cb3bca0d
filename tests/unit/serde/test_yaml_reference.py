"""YAML forms pinned by the reference implementation (kamu-cli's YAML serde tests, ODF 0.35).

The texts below are the reference's expected outputs; reading them must give the expected
objects and writing those objects must give the texts back, byte for byte.
"""

from __future__ import annotations

import base64
from datetime import UTC, datetime
from textwrap import dedent

import pytest

from common.odf.block import MetadataBlock
from common.odf.errors import UnsupportedVersionError, ValidationError
from common.odf.events import ExecuteTransform, SetDataSchema, SetPollingSource, SetTransform
from common.odf.fragments import (
    CompressionFormat,
    DatasetKind,
    DataSlice,
    ExecuteTransformInput,
    FetchStepFilesGlob,
    FetchStepUrl,
    MergeStrategySnapshot,
    OffsetInterval,
    PrepStepDecompress,
    ReadStepCsv,
    ReadStepNdJson,
    SourceCachingForever,
    SourceOrdering,
    SqlQueryStep,
    TemporalTable,
    TransformInput,
    TransformSql,
)
from common.odf.identity import DatasetID
from common.odf.multihash import Multihash
from common.odf.snapshot import DatasetSnapshot
from common.serde.yaml_codec import (
    dump_block_manifest,
    dump_snapshot,
    dump_yaml,
    from_plain,
    load_block_manifest,
    load_object,
    load_snapshot,
    to_plain,
)

NOON_2020 = datetime(2020, 1, 1, 12, tzinfo=UTC)
SHA3 = Multihash.sha3_256

# Arrow IPC Schema flatbuffer of {a: Int64 not null, b: Boolean not null}, as arrow-rs writes it.
ARROW_SCHEMA_AB = (
    "DAAAAAgACAAAAAQACAAAAAQAAAACAAAAQAAAAAQAAADY////GAAAAAwAAAAAAAAGEAAAAAAAAAAEAAQABAAAAAEAAABi"
    "AAAAEAAUABAAAAAPAAQAAAAIABAAAAAYAAAAIAAAAAAAAAIcAAAACAAMAAQACwAIAAAAQAAAAAAAAAEAAAAAAQAAAGEAAAA="
)


def text(s: str) -> str:
    return dedent(s).lstrip("\n")


def test_union_variant_is_written_with_pascal_case_kind_first() -> None:
    value = ReadStepNdJson(encoding="utf-8")
    assert dump_yaml(to_plain(value)) == "kind: NdJson\nencoding: utf-8\n"


@pytest.mark.parametrize("kind", ["NdJson", "ndJson", "ndjson"])
def test_union_kind_is_read_in_pascal_camel_and_lower_case(kind: str) -> None:
    plain = load_object("ReadStep", f"kind: {kind}\nencoding: utf-8\n")
    assert plain == ReadStepNdJson(encoding="utf-8")


@pytest.mark.parametrize("kind", ["nDjson", "NDJSON", "Ndjson"])
def test_union_kind_in_other_case_permutations_is_rejected(kind: str) -> None:
    with pytest.raises(ValidationError, match=f"kind: unknown ReadStep kind '{kind}'"):
        load_object("ReadStep", f"kind: {kind}\nencoding: utf-8\n")


def test_string_enum_is_written_in_pascal_case() -> None:
    assert to_plain(SourceOrdering.BY_EVENT_TIME) == "ByEventTime"


@pytest.mark.parametrize("spelling", ["ByEventTime", "byEventTime", "byeventtime"])
def test_string_enum_is_read_in_pascal_camel_and_lower_case(spelling: str) -> None:
    assert from_plain(SourceOrdering, spelling) is SourceOrdering.BY_EVENT_TIME


def test_string_enum_in_other_case_permutations_is_rejected() -> None:
    with pytest.raises(ValidationError, match="unknown SourceOrdering 'bYeventtime'"):
        from_plain(SourceOrdering, "bYeventtime")


SET_DATA_SCHEMA_BLOCK = text(
    f"""
    kind: MetadataBlock
    version: 2
    content:
      systemTime: 2020-01-01T12:00:00Z
      prevBlockHash: f16209eb949bd8ff0bb1d827f11809aebc6bd0d5955c7f368469a913c70d196620272
      sequenceNumber: 123
      event:
        kind: SetDataSchema
        schema: {ARROW_SCHEMA_AB}
    """
)


def test_set_data_schema_block() -> None:
    block = MetadataBlock(
        system_time=NOON_2020,
        prev_block_hash=SHA3(b"prev"),
        sequence_number=123,
        event=SetDataSchema(schema=base64.b64decode(ARROW_SCHEMA_AB)),
    )
    assert dump_block_manifest(block) == SET_DATA_SCHEMA_BLOCK
    decoded = load_block_manifest(SET_DATA_SCHEMA_BLOCK)
    assert decoded == block
    assert isinstance(decoded.event, SetDataSchema)
    assert len(decoded.event.schema) == 140


EXECUTE_TRANSFORM_BLOCK = text(
    """
    kind: MetadataBlock
    version: 2
    content:
      systemTime: 2020-01-01T12:00:00Z
      prevBlockHash: f16209eb949bd8ff0bb1d827f11809aebc6bd0d5955c7f368469a913c70d196620272
      sequenceNumber: 127
      event:
        kind: ExecuteTransform
        queryInputs:
        - datasetId: did:odf:fed01816ef0a9abe93aba816ef0a9abe93aba90e6065747170300c0d3d30c2cd8d7a4
          prevBlockHash: f162080084bf2fba02475726feb2cab2d8215eab14bc6bdd8bfb2c8151257032ecd8b
          newBlockHash: f1620b039179a8a4ce2c252aa6f2f25798251c19b75fc1508d9d511a191e0487d64a7
          prevOffset: 9
          newOffset: 20
        - datasetId: did:odf:fed01826ef0a9abea3a3a826ef0a9abea3a3a90e6065747270300c1d3b30a2cd9d724
          prevBlockHash: f162080084bf2fba02475726feb2cab2d8215eab14bc6bdd8bfb2c8151257032ecd8b
          newBlockHash: f1620b039179a8a4ce2c252aa6f2f25798251c19b75fc1508d9d511a191e0487d64a7
        prevCheckpoint: f1620894b355f91b194f31c1116dcec200b68d5cfd90a3df19032829fa643bc711fcb
        prevOffset: 9
        newData:
          logicalHash: f162076d3bc41c9f588f7fcd0d5bf4718f8f84b1c41b20882703100b9eb9413807c01
          physicalHash: f1620cceefd7e0545bcf8b6d19f3b5750c8a3ee8350418877bc6fb12e32de28137355
          offsetInterval:
            start: 10
            end: 19
          size: 10
        newWatermark: 2020-01-01T12:00:00Z
    """
)

EXECUTE_TRANSFORM = MetadataBlock(
    system_time=NOON_2020,
    prev_block_hash=SHA3(b"prev"),
    sequence_number=127,
    event=ExecuteTransform(
        query_inputs=(
            ExecuteTransformInput(
                dataset_id=DatasetID.new_seeded(b"input1"),
                prev_block_hash=SHA3(b"a"),
                new_block_hash=SHA3(b"b"),
                prev_offset=9,
                new_offset=20,
            ),
            ExecuteTransformInput(
                dataset_id=DatasetID.new_seeded(b"input2"),
                prev_block_hash=SHA3(b"a"),
                new_block_hash=SHA3(b"b"),
            ),
        ),
        prev_checkpoint=SHA3(b"checkpoint"),
        prev_offset=9,
        new_data=DataSlice(
            logical_hash=SHA3(b"foo"),
            physical_hash=SHA3(b"bar"),
            offset_interval=OffsetInterval(start=10, end=19),
            size=10,
        ),
        new_watermark=NOON_2020,
    ),
)


def test_execute_transform_block() -> None:
    assert dump_block_manifest(EXECUTE_TRANSFORM) == EXECUTE_TRANSFORM_BLOCK
    assert load_block_manifest(EXECUTE_TRANSFORM_BLOCK) == EXECUTE_TRANSFORM


def test_obsolete_block_manifest_version_is_rejected() -> None:
    obsolete = EXECUTE_TRANSFORM_BLOCK.replace("version: 2", "version: 1")
    with pytest.raises(UnsupportedVersionError) as e:
        load_block_manifest(obsolete, source="block.yaml")
    assert str(e.value) == (
        "block.yaml:2: version: MetadataBlock manifest version 1 is not supported (supported: 2, 3)"
    )


SNAPSHOT_ROOT = text(
    """
    kind: DatasetSnapshot
    version: 1
    content:
      name: kamu.test
      kind: Root
      metadata:
      - kind: SetPollingSource
        fetch:
          kind: Url
          url: ftp://kamu.dev/test.zip
          cache:
            kind: Forever
        prepare:
        - kind: Decompress
          format: Zip
          subPath: data_*.csv
        read:
          kind: Csv
          header: true
        preprocess:
          kind: Sql
          engine: spark
          query: SELECT * FROM input
        merge:
          kind: Snapshot
          primaryKey:
          - id
    """
)


def test_root_snapshot() -> None:
    expected = DatasetSnapshot(
        name="kamu.test",
        kind=DatasetKind.ROOT,
        metadata=(
            SetPollingSource(
                fetch=FetchStepUrl(url="ftp://kamu.dev/test.zip", cache=SourceCachingForever()),
                prepare=(PrepStepDecompress(format=CompressionFormat.ZIP, sub_path="data_*.csv"),),
                read=ReadStepCsv(header=True),
                preprocess=TransformSql(engine="spark", query="SELECT * FROM input"),
                merge=MergeStrategySnapshot(primary_key=("id",)),
            ),
        ),
    )
    assert load_snapshot(SNAPSHOT_ROOT) == expected
    assert dump_snapshot(expected) == SNAPSHOT_ROOT


@pytest.mark.parametrize(
    ("name", "inputs"),
    [
        (
            "com.naturalearthdata.admin0",
            ("com.naturalearthdata.10m.admin0", "com.naturalearthdata.50m.admin0"),
        ),
        (
            "a/com.naturalearthdata.admin0",
            ("b/com.naturalearthdata.10m.admin0", "c/com.naturalearthdata.50m.admin0"),
        ),
    ],
    ids=["single-tenant", "multi-tenant"],
)
def test_derivative_snapshot(name: str, inputs: tuple[str, str]) -> None:
    data = text(
        f"""
        kind: DatasetSnapshot
        version: 1
        content:
          name: {name}
          kind: Derivative
          metadata:
          - kind: SetTransform
            inputs:
            - datasetRef: {inputs[0]}
            - datasetRef: {inputs[1]}
            transform:
              kind: Sql
              engine: spark
              query: SOME_SQL
        """
    )
    expected = DatasetSnapshot(
        name=name,
        kind=DatasetKind.DERIVATIVE,
        metadata=(
            SetTransform(
                inputs=tuple(TransformInput(dataset_ref=ref) for ref in inputs),
                transform=TransformSql(engine="spark", query="SOME_SQL"),
            ),
        ),
    )
    assert load_snapshot(data) == expected
    assert dump_snapshot(expected) == data


def test_fetch_step_files_glob() -> None:
    data = "kind: FilesGlob\npath: /opt/x/*.txt\ncache:\n  kind: Forever\norder: ByName\n"
    expected = FetchStepFilesGlob(
        path="/opt/x/*.txt", cache=SourceCachingForever(), order=SourceOrdering.BY_NAME
    )
    assert load_object("FetchStep", data) == expected
    assert dump_yaml(to_plain(expected)) == data


def test_transform_with_queries_and_temporal_tables() -> None:
    data = text(
        """
        kind: Sql
        engine: flink
        queries:
        - alias: bar
          query: SELECT * FROM foo
        temporalTables:
        - name: foo
          primaryKey:
          - id
        """
    )
    expected = TransformSql(
        engine="flink",
        queries=(SqlQueryStep(alias="bar", query="SELECT * FROM foo"),),
        temporal_tables=(TemporalTable(name="foo", primary_key=("id",)),),
    )
    assert load_object("Transform", data) == expected
    assert dump_yaml(to_plain(expected)) == data
