"""Bad YAML manifests: each problem is one ValidationError naming the file, line and field."""

from __future__ import annotations

import re
from collections.abc import Callable
from textwrap import dedent

import pytest

from common.odf.block import MetadataBlock
from common.odf.errors import DecodeError, UnsupportedVersionError, ValidationError
from common.odf.events import SetPollingSource
from common.odf.fragments import FetchStepUrl, ReadStepCsv
from common.serde.yaml_codec import (
    from_plain,
    load_block_manifest,
    load_object,
    load_snapshot,
    load_snapshots,
    to_plain,
)

SNAPSHOT = dedent(
    """\
    kind: DatasetSnapshot
    version: 1
    content:
      name: demo
      kind: Root
      metadata:
        - kind: SetInfo
          description: demo
        - kind: SetVocab
          eventTimeColumn: date
        - kind: SetPollingSource
          fetch:
            kind: Url
            url: https://example.org/data.csv
          read:
            kind: Csv
            separator: ","
            header: true
          merge:
            kind: Ledger
            primaryKey: [id]
    """
)
"""A valid snapshot; each negative test changes one line of it."""

BLOCK = dedent(
    """\
    kind: MetadataBlock
    version: 2
    content:
      systemTime: 2020-01-01T12:00:00Z
      prevBlockHash: f16209eb949bd8ff0bb1d827f11809aebc6bd0d5955c7f368469a913c70d196620272
      sequenceNumber: 1
      event:
        kind: Seed
        datasetId: did:odf:fed01816ef0a9abe93aba816ef0a9abe93aba90e6065747170300c0d3d30c2cd8d7a4
        datasetKind: Root
    """
)


def change(text: str, old: str, new: str) -> str:
    assert text.count(old) == 1, old
    return text.replace(old, new)


def expect_error(
    load: Callable[..., object], text: str, message: str, error_type: type = ValidationError
) -> None:
    with pytest.raises(ValidationError) as e:
        load(text, source="dataset.yaml")
    assert type(e.value) is error_type
    assert str(e.value) == message


def test_valid_inputs_load() -> None:
    source = load_snapshot(SNAPSHOT).metadata[2]
    assert isinstance(source, SetPollingSource)
    assert source.read == ReadStepCsv(separator=",", header=True)
    assert load_block_manifest(BLOCK).sequence_number == 1


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        (
            'separator: ","',
            "separator: 1",
            "dataset.yaml:17: metadata[2].read.separator: expected a string, got integer 1",
        ),
        (
            "header: true",
            "header: yes",
            "dataset.yaml:18: metadata[2].read.header: expected a boolean, got string 'yes'",
        ),
        (
            "primaryKey: [id]",
            "primaryKey: id",
            "dataset.yaml:21: metadata[2].merge.primaryKey: expected a list, got string 'id'",
        ),
        (
            "  name: demo",
            "  name: [demo]",
            "dataset.yaml:4: name: expected a string, got a list",
        ),
        (
            "    - kind: SetInfo",
            "    - 7\n    - kind: SetInfo",
            "dataset.yaml:7: metadata[0]: expected a MetadataEvent mapping with 'kind', "
            "got integer 7",
        ),
    ],
    ids=["string", "boolean", "list", "name", "union"],
)
def test_wrong_type(old: str, new: str, message: str) -> None:
    expect_error(load_snapshot, change(SNAPSHOT, old, new), message)


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        (
            "header: true",
            "headers: true",
            "dataset.yaml:18: metadata[2].read.headers: unknown field of ReadStepCsv, expected one "
            "of: schema, separator, encoding, quote, escape, header, inferSchema, nullValue, "
            "dateFormat, timestampFormat",
        ),
        (
            "url: https://example.org/data.csv",
            "url: null",
            "dataset.yaml:14: metadata[2].fetch.url: required field of FetchStepUrl is null",
        ),
        (
            "kind: Root",
            "kind: Leaf",
            "dataset.yaml:5: kind: unknown DatasetKind 'Leaf', expected one of: Root, Derivative",
        ),
        (
            "kind: Url",
            "kind: Http",
            "dataset.yaml:13: metadata[2].fetch.kind: unknown FetchStep kind 'Http', "
            "expected one of: Url, FilesGlob, Container, Mqtt",
        ),
        (
            "kind: Ledger",
            "kindd: Ledger",
            "dataset.yaml:20: metadata[2].merge.kind: missing required field, the MergeStrategy "
            "kind: one of Append, Ledger, Snapshot",
        ),
        (
            "kind: SetVocab",
            "kind: [SetVocab]",
            "dataset.yaml:9: metadata[1].kind: expected a MetadataEvent kind string, got a list",
        ),
        (
            "kind: Url",
            "kind: EthereumLogs",
            "dataset.yaml:13: metadata[2].fetch.kind: FetchStep kind 'EthereumLogs' is not "
            "supported: it is an extension of the reference coordinator, not part of ODF 0.35 "
            "(sources here are Url, FilesGlob, Container, Mqtt)",
        ),
    ],
    ids=[
        "unknown-field",
        "null-required-field",
        "bad-enum-value",
        "bad-union-kind",
        "missing-union-kind",
        "union-kind-not-a-string",
        "kind-outside-the-spec",
    ],
)
def test_a_changed_line_is_refused(old: str, new: str, message: str) -> None:
    expect_error(load_snapshot, change(SNAPSHOT, old, new), message)


def test_unknown_field_of_an_empty_variant() -> None:
    bad = change(BLOCK, "kind: Seed", "kind: DisablePollingSource\n    foo: 1")
    bad = bad.split("    datasetId")[0]
    expect_error(
        load_block_manifest,
        bad,
        "dataset.yaml:9: event.foo: unknown field, DisablePollingSource has no fields",
    )


def test_unknown_manifest_field() -> None:
    expect_error(
        load_snapshot,
        SNAPSHOT + "extra: 1\n",
        "dataset.yaml:22: extra: unknown manifest field, expected kind, version, content",
    )


def test_missing_field() -> None:
    bad = re.sub(r"\n +url: .*", "", SNAPSHOT)
    expect_error(
        load_snapshot,
        bad,
        "dataset.yaml:13: metadata[2].fetch.url: missing required field of FetchStepUrl",
    )


def test_missing_manifest_content() -> None:
    expect_error(
        load_snapshot,
        "kind: DatasetSnapshot\nversion: 1\n",
        "dataset.yaml:1: content: missing required field of the DatasetSnapshot manifest",
    )


def test_wrong_manifest_kind() -> None:
    expect_error(
        load_block_manifest,
        SNAPSHOT,
        "dataset.yaml:1: kind: expected manifest kind 'MetadataBlock', "
        "got string 'DatasetSnapshot'",
    )


def test_unsupported_snapshot_version() -> None:
    expect_error(
        load_snapshot,
        change(SNAPSHOT, "version: 1", "version: 2"),
        "dataset.yaml:2: version: DatasetSnapshot manifest version 2 is not supported "
        "(supported: 1)",
        UnsupportedVersionError,
    )


@pytest.mark.parametrize(
    ("hash_text", "reason"),
    [
        ("xyz", "invalid multihash 'xyz': invalid multibase string 'xyz'"),
        ("f16zz", "invalid multihash 'f16zz': invalid base16 multibase string 'f16zz'"),
        ("f1620abcd", "invalid multihash 'f1620abcd': multihash digest length is 2 bytes"),
    ],
)
def test_bad_multibase(hash_text: str, reason: str) -> None:
    bad = re.sub(r"prevBlockHash: \S+", f"prevBlockHash: {hash_text}", BLOCK)
    with pytest.raises(DecodeError) as e:
        load_block_manifest(bad, source="dataset.yaml")
    assert str(e.value).startswith(f"dataset.yaml:5: prevBlockHash: {reason}")


@pytest.mark.parametrize("did", ["did:odf:xyz", "did:key:fed01", "did:odf:fed01abcd"])
def test_bad_did(did: str) -> None:
    bad = re.sub(r"datasetId: \S+", f"datasetId: {did}", BLOCK)
    with pytest.raises(DecodeError) as e:
        load_block_manifest(bad, source="dataset.yaml")
    assert str(e.value).startswith(f"dataset.yaml:9: event.datasetId: '{did}' is not a")
    assert "did:odf" in str(e.value)


@pytest.mark.parametrize(
    ("timestamp", "reason"),
    [
        ("2020-01-01", "invalid timestamp '2020-01-01', expected RFC 3339"),
        ("2020-01-01T12:00:00", "invalid timestamp '2020-01-01T12:00:00', expected RFC 3339"),
        ("2020-02-30T12:00:00Z", "invalid timestamp '2020-02-30T12:00:00Z': day is out of range"),
        ("2020-01-01T23:59:60Z", "leap seconds are not supported"),
        ("1", "expected an RFC 3339 timestamp string, got integer 1"),
    ],
)
def test_bad_timestamp(timestamp: str, reason: str) -> None:
    bad = change(BLOCK, "systemTime: 2020-01-01T12:00:00Z", f"systemTime: {timestamp}")
    with pytest.raises(ValidationError) as e:
        load_block_manifest(bad, source="dataset.yaml")
    assert str(e.value).startswith("dataset.yaml:4: systemTime: ")
    assert reason in str(e.value)


def test_integer_out_of_range() -> None:
    expect_error(
        load_block_manifest,
        change(BLOCK, "sequenceNumber: 1", "sequenceNumber: 18446744073709551616"),
        "dataset.yaml:6: sequenceNumber: integer 18446744073709551616 is out of range for uint64",
    )


def test_bad_base64() -> None:
    with pytest.raises(DecodeError, match=r"^event\.schema: invalid base64"):
        from_plain(
            MetadataBlock,
            {
                "systemTime": "2020-01-01T12:00:00Z",
                "sequenceNumber": 0,
                "event": {"kind": "SetDataSchema", "schema": "not base64!"},
            },
        )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "kind: DatasetSnapshot\nversion: 1\ncontent:\n  name: [a\n",
            "dataset.yaml:5:1: invalid YAML: expected ',' or ']', but got '<stream end>'",
        ),
        (
            "kind: DatasetSnapshot\n  version: 1\n",
            "dataset.yaml:2:10: invalid YAML: mapping values are not allowed here",
        ),
        (
            "kind: DatasetSnapshot\nkind: DatasetSnapshot\n",
            "dataset.yaml:2:1: kind: duplicate key",
        ),
        (
            "kind: DatasetSnapshot\n1: x\n",
            "dataset.yaml:2:1: mapping keys must be strings, got 1",
        ),
        (
            "kind: &k DatasetSnapshot\nversion: *k\n",
            "dataset.yaml:2:10: invalid YAML: aliases are not supported",
        ),
        (
            "kind: !!binary aGVsbG8=\n",
            "dataset.yaml:1:7: kind: unsupported YAML scalar tag:yaml.org,2002:binary 'aGVsbG8='",
        ),
        ("", "dataset.yaml: expected one YAML document, found no document"),
        (
            "kind: DatasetSnapshot\n---\nkind: DatasetSnapshot\n",
            "dataset.yaml: expected one YAML document, found 2 documents",
        ),
    ],
    ids=["unclosed", "indent", "duplicate", "int-key", "alias", "tag", "empty", "two-docs"],
)
def test_yaml_syntax_and_subset_errors(text: str, message: str) -> None:
    expect_error(load_snapshot, text, message)


DEEP = 100_000
"""Past Python's recursion limit (composing raised a RecursionError)."""


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("a: " + "[" * DEEP + "]" * DEEP, "1:67"),
        ("a: " + "[" * DEEP, "1:67"),  # refused before the parser reaches the end
        ("a:\n" + "".join("  " * i + "- \n" for i in range(1, 70)) + "x", "65:129"),
        ("a:\n  - " + "- " * DEEP + "x", "2:129"),
        ('{"a": ' + '{"b": ' * DEEP + "1" + "}" * DEEP + "}", "1:385"),
    ],
    ids=["flow", "flow-unclosed", "block", "compact-block", "json"],
)
def test_nesting_deeper_than_the_limit_is_refused_where_it_passes_it(
    text: str, message: str
) -> None:
    expect_error(
        load_snapshot,
        text,
        f"dataset.yaml:{message}: invalid YAML: nested deeper than 64 sequences and mappings",
    )


def test_multi_document_error_names_the_line_in_the_whole_file() -> None:
    second = change(SNAPSHOT, "header: true", "header: 1")
    with pytest.raises(ValidationError) as e:
        load_snapshots(SNAPSHOT + "---\n" + second, source="all.yaml")
    assert str(e.value) == (
        "all.yaml:40: metadata[2].read.header: expected a boolean, got integer 1"
    )


def test_object_without_manifest() -> None:
    with pytest.raises(ValidationError) as e:
        load_object(FetchStepUrl, "kind: Url\nurl: 5\n", source="fetch.yaml")
    assert str(e.value) == "fetch.yaml:2: url: expected a string, got integer 5"


def test_from_plain_nests_paths_under_the_given_prefix() -> None:
    with pytest.raises(ValidationError) as e:
        from_plain("FetchStep", {"kind": "Url"}, path="sources[3].fetch")
    assert str(e.value) == "sources[3].fetch.url: missing required field of FetchStepUrl"


def test_to_plain_rejects_values_of_the_wrong_type() -> None:
    with pytest.raises(ValidationError, match=r"^url: expected a string, got integer 5$"):
        to_plain(FetchStepUrl(url=5))  # type: ignore[arg-type]
