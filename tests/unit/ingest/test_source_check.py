"""``odf add``'s checks of a root's sources, on the events alone (no data, no files)."""

from __future__ import annotations

import pytest

from common.odf.errors import ValidationError
from common.odf.events import AddPushSource, MetadataEvent, SetVocab
from common.odf.fragments import (
    MergeStrategy,
    MergeStrategyAppend,
    MergeStrategySnapshot,
    ReadStepCsv,
    ReadStepNdJson,
    TransformSql,
)
from coordinator.ingest.source_check import check_sources


def source(
    schema: tuple[str, ...] | None,
    merge: MergeStrategy | None = None,
    *,
    preprocess: TransformSql | None = None,
) -> AddPushSource:
    return AddPushSource(
        source_name="main",
        read=ReadStepCsv(header=True, schema=schema),
        preprocess=preprocess,
        merge=merge or MergeStrategyAppend(),
    )


def refusal(events: list[MetadataEvent]) -> str:
    with pytest.raises(ValidationError) as e:
        check_sources(events)
    return str(e.value)


def test_sources_that_can_work_pass() -> None:
    check_sources([source(("city STRING", "n BIGINT"))])  # event_time: filled at ingest
    check_sources([source(None, MergeStrategySnapshot(primary_key=("anything",)))])  # inferred
    query = TransformSql(engine="spark", query="SELECT a AS id FROM input")
    merge = MergeStrategySnapshot(primary_key=("id",))
    check_sources([source(("a STRING",), merge, preprocess=query)])  # the query decides
    keyed = MergeStrategySnapshot(primary_key=("event_time", "city"), compare_columns=("n",))
    check_sources([source(("city STRING", "n BIGINT"), keyed)])
    ndjson = AddPushSource(
        source_name="b", read=ReadStepNdJson(schema=("d DATE",)), merge=MergeStrategyAppend()
    )
    check_sources([ndjson, SetVocab(event_time_column="d")])


def test_every_refusal_names_the_event_and_field() -> None:
    merge = MergeStrategySnapshot(primary_key=("city",), compare_columns=("n", "m"))
    assert refusal([SetVocab(), source(("city STRING", "n INT"), merge)]) == (
        "metadata[1].merge.compareColumns[1]: column 'm' is not in the schema"
        " (columns: city, n, event_time)"
    )
    assert refusal([source(("a INT", "A INT"))]) == (
        "metadata[0].read.schema: duplicate column 'a' in 'a INT, A INT'"
    )
    assert refusal([source(("a INT", "b DECIMAL(80)"))]).startswith(
        "metadata[0].read.schema[1]: DECIMAL precision must be 1..76, got 80"
    )
    vocab = SetVocab(operation_type_column="kind")
    assert refusal([source(("kind STRING",)), vocab]) == (
        "metadata[0].read.schema: column 'kind' is a system column: the ingest writes it"
    )
    escaping = AddPushSource(
        source_name="main",
        read=ReadStepCsv(header=True, escape="|"),
        merge=MergeStrategyAppend(),
    )
    assert refusal([escaping]) == (
        "metadata[0].read.escape: escape '|' is not supported: quotes are escaped by doubling"
    )
