"""Derivative transformations through the coordinator's API with a real embedded engine."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from common.hashing import logical_hash
from common.odf.errors import ValidationError
from common.odf.events import AddData, ExecuteTransform, SetDataSchema, SetTransform
from common.serde.arrow_schema import encode_arrow_schema
from common.serde.yaml_codec import load_snapshots
from coordinator.config import ExchangeFormat, TransformConfig
from coordinator.dataset import CommitItem, Dataset
from coordinator.engine import EngineInvalidQueryError, EngineSession
from coordinator.ingest.push import push_ingest
from coordinator.transform.creation import TransformCreation
from coordinator.transform.runner import Transformer, workspace_resolver
from coordinator.workspace import Workspace
from tests.integration.transform.pipeline import (
    SNAPSHOTS,
    check_derivative_chain,
    derivative_snapshot,
    execute_transforms,
    records,
    write_round,
)
from tests.unit.coordinator.events import SCHEMA, add_data_for, write_slice

pytestmark = pytest.mark.grpc

T1 = datetime(2030, 1, 1, tzinfo=UTC)


@pytest.fixture
def ws(tmp_path: Path) -> Workspace:
    return Workspace.init(tmp_path / "ws")


def add(ws: Workspace, engines: EngineSession, *texts: str) -> list[Dataset]:
    creation = TransformCreation(ws, engines)
    return [ws.create_dataset(creation.prepare(s)) for text in texts for s in load_snapshots(text)]


def transformer(
    ws: Workspace,
    engines: EngineSession,
    when: datetime = T1,
    shared_staging: Path | None = None,
    **options: object,
) -> Transformer:
    return Transformer(
        workspace_resolver(ws),
        engines,
        TransformConfig(**options),  # type: ignore[arg-type]
        clock=lambda: when,
        shared_staging=shared_staging,
    )


def test_pipeline_levels_and_two_inputs_over_rounds(
    ws: Workspace, engines: EngineSession, tmp_path: Path
) -> None:
    cities, areas, big, x10, density = add(
        ws,
        engines,
        *(
            SNAPSHOTS[n]
            for n in ("cities", "areas", "big-cities", "big-cities-x10", "city-density")
        ),
    )
    for round_ in range(2):
        for name, path in write_round(tmp_path / "in", round_).items():
            push_ingest(ws.open_dataset(name), path)
        t = transformer(ws, engines, T1 + timedelta(days=round_))
        for ds in (big, x10, density):
            outcome = t.transform(ds)
            assert len(outcome.transactions) == 1 and outcome.status == "up to date"
    assert records(big).column("city").to_pylist() == ["Kyiv", "Tokyo", "Lagos"]
    assert records(big).column("offset").to_pylist() == [0, 1, 2]
    assert records(x10).column("population_x10").to_pylist() == [29523010, 139600000, 153880000]
    assert sorted(records(density).column("city").to_pylist()) == [
        "Kyiv",
        "Lagos",
        "Reykjavik",
        "Tokyo",
    ]
    check_derivative_chain(big, [cities])
    check_derivative_chain(x10, [big])
    check_derivative_chain(density, [cities, areas])
    # Output watermark: the slowest input's (min over inputs).
    _, last = execute_transforms(density)[-1]
    marks = [cities.state().last_watermark, areas.state().last_watermark]
    assert last.new_watermark == min(m for m in marks if m is not None)
    transform = x10.state().transform
    assert transform is not None and transform.transform.version == engines.default_version()
    # Nothing new: no transaction, and no engine needed for planning.
    assert transformer(ws, engines).transform(density).transactions == ()


def test_backlog_in_bounded_transactions_gives_the_records_of_one(
    ws: Workspace, engines: EngineSession, tmp_path: Path
) -> None:
    (cities,) = add(ws, engines, SNAPSHOTS["cities"])
    query = "SELECT event_time, city, population FROM cities"
    one, batched = add(
        ws,
        engines,
        derivative_snapshot("one", ["cities"], query),
        derivative_snapshot("batched", ["cities"], query),
    )
    for i in range(4):
        csv = tmp_path / f"c{i}.csv"
        csv.write_text(
            "event_time,city,population\n"
            + "".join(f"2024-01-0{i + 1}T00:00:{r:02}Z,c{i}-{r},{r}\n" for r in range(10))
        )
        push_ingest(cities, csv)
    assert len(transformer(ws, engines).transform(one).transactions) == 1
    outcome = transformer(ws, engines, max_input_records=15).transform(batched)
    assert [t.input_records for t in outcome.transactions] == [20, 20]
    check_derivative_chain(batched, [cities])
    assert logical_hash(records(batched)) == logical_hash(records(one))


def test_arrow_and_parquet_exchange_give_the_same_records(
    ws: Workspace, engines: EngineSession, tmp_path: Path
) -> None:
    """And through a shared staging directory (``engine.stagingDir``): the exchange files in
    a transaction's area there, the outputs moved back and committed; nothing left behind."""
    (cities,) = add(ws, engines, SNAPSHOTS["cities"])
    query = "SELECT event_time, upper(city) AS city, population FROM cities"
    via_arrow, via_parquet, via_shared = add(
        ws,
        engines,
        derivative_snapshot("via-arrow", ["cities"], query),
        derivative_snapshot("via-parquet", ["cities"], query),
        derivative_snapshot("via-shared", ["cities"], query),
    )
    push_ingest(cities, write_round(tmp_path, 0)["cities"])
    shared = tmp_path / "shared"
    shared.mkdir()
    transformer(ws, engines, exchange=ExchangeFormat.ARROW).transform(via_arrow)
    transformer(ws, engines, exchange=ExchangeFormat.PARQUET).transform(via_parquet)
    transformer(ws, engines, shared_staging=shared).transform(via_shared)
    derivatives = (via_arrow, via_parquet, via_shared)
    (_, a), (_, p), (_, s) = (execute_transforms(d)[-1] for d in derivatives)
    assert a.new_data is not None and p.new_data is not None and s.new_data is not None
    assert a.new_data.logical_hash == p.new_data.logical_hash == s.new_data.logical_hash
    assert a.new_watermark == p.new_watermark == s.new_watermark
    assert list(shared.iterdir()) == []


@pytest.fixture
def manual_root(ws: Workspace, engines: EngineSession) -> Iterator[Dataset]:
    """A root dataset whose blocks the test commits itself (schema changes, watermarks)."""
    (root,) = add(
        ws,
        engines,
        "kind: DatasetSnapshot\nversion: 1\ncontent:\n  name: raw\n  kind: Root\n"
        "  metadata:\n    - kind: SetInfo\n      description: committed by the test\n",
    )
    yield root


def commit_slice(root: Dataset, directory: Path, start: int, count: int, name: str) -> None:
    path = write_slice(directory, start, count, name=name)
    event = add_data_for(path, root.state().last_offset, start, count)
    root.commit(event, data_file=path, expected_head=root.head())


def test_watermark_only_input_block_advances_the_output_watermark(
    ws: Workspace, engines: EngineSession, manual_root: Dataset, tmp_path: Path
) -> None:
    manual_root.commit_events(
        [SetDataSchema(schema=encode_arrow_schema(SCHEMA))], expected_head=manual_root.head()
    )
    commit_slice(manual_root, tmp_path, 0, 3, "s0")
    (derived,) = add(
        ws, engines, derivative_snapshot("derived", ["raw"], "SELECT event_time, city FROM raw")
    )
    t = transformer(ws, engines)
    t.transform(derived)
    later = T1 + timedelta(days=30)
    manual_root.commit(
        AddData(prev_offset=2, new_watermark=later), expected_head=manual_root.head()
    )
    (tx,) = t.transform(derived).transactions
    assert tx.event.new_data is None and tx.event.new_watermark == later
    (entry,) = tx.event.query_inputs
    assert entry.new_block_hash == manual_root.head() and entry.new_offset is None
    assert entry.prev_offset == 2
    check_derivative_chain(derived, [manual_root])


def test_input_schema_change_opens_a_new_transaction(
    ws: Workspace, engines: EngineSession, manual_root: Dataset, tmp_path: Path
) -> None:
    wider = SCHEMA.append(pa.field("area", pa.float64()))
    manual_root.commit(
        SetDataSchema(schema=encode_arrow_schema(SCHEMA)), expected_head=manual_root.head()
    )
    commit_slice(manual_root, tmp_path, 0, 2, "s0")
    table = pq.read_table(write_slice(tmp_path, 2, 2, name="s1"))
    table = table.append_column(pa.field("area", pa.float64()), pa.array([1.5, 2.5]))
    wide_path = tmp_path / "s1-wide"
    pq.write_table(table.cast(wider), wide_path)
    manual_root.commit_events(
        [
            SetDataSchema(schema=encode_arrow_schema(wider)),
            CommitItem(add_data_for(wide_path, 1, 2, 2), data_file=wide_path),
        ],
        expected_head=manual_root.head(),
    )
    (derived,) = add(
        ws,
        engines,
        derivative_snapshot("derived", ["raw"], "SELECT event_time, city, population FROM raw"),
    )
    outcome = transformer(ws, engines).transform(derived)
    assert [t.input_records for t in outcome.transactions] == [2, 2]
    assert records(derived).column("city").to_pylist() == [f"city-{o}" for o in range(4)]
    check_derivative_chain(derived, [manual_root])


def test_invalid_query_leaves_the_dataset_unchanged(
    ws: Workspace, engines: EngineSession, tmp_path: Path
) -> None:
    (cities,) = add(ws, engines, SNAPSHOTS["cities"])
    (bad,) = add(ws, engines, derivative_snapshot("bad", ["cities"], "SELECT nope FROM cities"))
    push_ingest(cities, write_round(tmp_path, 0)["cities"])
    head = bad.head()
    with pytest.raises(EngineInvalidQueryError, match="nope"):
        transformer(ws, engines).transform(bad)
    assert Dataset(bad.layout.root).head() == head
    assert not any(bad.layout.data_dir.glob("*")) if bad.layout.data_dir.exists() else True
    assert not list(bad.layout.staging_root.iterdir())
    assert not any(isinstance(b.event, ExecuteTransform) for _, b in bad.iter_blocks())


def test_add_pins_the_engine_and_validates_the_query_once_inputs_have_a_schema(
    ws: Workspace, engines: EngineSession, tmp_path: Path
) -> None:
    (cities,) = add(ws, engines, SNAPSHOTS["cities"])
    push_ingest(cities, write_round(tmp_path, 0)["cities"])
    creation = TransformCreation(ws, engines)
    (bad,) = load_snapshots(derivative_snapshot("bad", ["cities"], "SELECT nope FROM cities"))
    with pytest.raises(ValidationError) as info:
        creation.prepare(bad)
    assert info.value.path == "metadata[0].transform"
    assert info.value.reason.startswith("invalid query:") and "nope" in info.value.reason
    (good,) = load_snapshots(SNAPSHOTS["big-cities"])
    (event,) = creation.prepare(good).metadata
    assert isinstance(event, SetTransform)
    assert event.transform.version == engines.default_version()
    # A version the snapshot gives is kept as it is, even one this engine cannot run.
    pinned = replace(event, transform=replace(event.transform, version="repo@sha256:" + "0" * 64))
    kept = creation.prepare(replace(good, metadata=(pinned,)))
    assert kept.metadata == (pinned,)
