"""A small multi-level pipeline for transformation tests, and checks of derivative chains.

``cities`` and ``areas`` are root datasets with CSV push sources; ``big-cities`` derives from
``cities``, ``big-cities-x10`` from ``big-cities`` (a derivative of a derivative) and
``city-density`` joins ``cities`` with the latest ``areas`` (two inputs, ``areas`` a temporal
table). ``ROUNDS`` are the CSV files that arrive over time.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from common.odf.events import ExecuteTransform
from common.odf.fragments import OffsetInterval
from common.odf.multihash import Multihash
from coordinator.dataset import Dataset
from coordinator.dataset.state import last_input_block, last_input_offset
from tests.support.datasets import derivative, root

ROOTS = ("cities", "areas")
DERIVATIVES = ("big-cities", "big-cities-x10", "city-density")


def root_snapshot(name: str, columns: list[str]) -> str:
    return root(name, columns, source="default")


def derivative_snapshot(
    name: str, inputs: list[str], query: str, temporal: dict[str, list[str]] | None = None
) -> str:
    return derivative(name, query, inputs, temporal_tables=temporal)


SNAPSHOTS = {
    "cities": root_snapshot("cities", ["event_time TIMESTAMP", "city STRING", "population BIGINT"]),
    "areas": root_snapshot("areas", ["event_time TIMESTAMP", "city STRING", "area DOUBLE"]),
    "big-cities": derivative_snapshot(
        "big-cities",
        ["cities"],
        "SELECT event_time, city, population FROM cities WHERE population > 1000000",
    ),
    "big-cities-x10": derivative_snapshot(
        "big-cities-x10",
        ["big-cities"],
        "SELECT event_time, city, population * 10 AS population_x10 FROM `big-cities`",
    ),
    "city-density": derivative_snapshot(
        "city-density",
        ["cities", "areas"],
        "SELECT c.event_time, c.city, c.population / a.area AS density"
        " FROM cities AS c JOIN areas AS a ON c.city = a.city",
        {"areas": ["city"]},
    ),
}

ROUNDS: list[dict[str, str]] = [
    {
        "cities": "event_time,city,population\n"
        "2024-01-01T00:00:00Z,Vancouver,675218\n"
        "2024-01-02T00:00:00Z,Kyiv,2952301\n"
        "2024-01-03T00:00:00Z,Tokyo,13960000\n",
        "areas": "event_time,city,area\n"
        "2024-01-01T00:00:00Z,Kyiv,839.0\n"
        "2024-01-02T00:00:00Z,Tokyo,2194.0\n",
    },
    {
        "cities": "event_time,city,population\n"
        "2024-02-01T00:00:00Z,Lagos,15388000\n"
        "2024-02-02T00:00:00Z,Reykjavik,139875\n",
        "areas": "event_time,city,area\n"
        "2024-02-01T00:00:00Z,Lagos,1171.0\n"
        "2024-02-03T00:00:00Z,Reykjavik,273.0\n",
    },
    {
        "cities": "event_time,city,population\n2024-03-01T00:00:00Z,Cairo,10230000\n",
    },
]
"""CSV files per root per round; in round 3 only ``cities`` gets data."""


def write_snapshots(directory: Path) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    for name, text in SNAPSHOTS.items():
        (directory / f"{name}.yaml").write_text(text)
    return directory


def write_round(directory: Path, index: int) -> dict[str, Path]:
    """The CSV files of round ``index`` (0-based)."""
    directory.mkdir(parents=True, exist_ok=True)
    files = {}
    for name, text in ROUNDS[index].items():
        path = directory / f"{name}-{index}.csv"
        path.write_text(text)
        files[name] = path
    return files


# --- reading results ----------------------------------------------------------------------------


def records(ds: Dataset) -> pa.Table:
    """All records of a dataset, in offset order."""
    files = []
    for _, block in ds.iter_blocks():
        data = getattr(block.event, "new_data", None)
        if data is not None:
            files.append((data.offset_interval.start, ds.data_path(data.physical_hash)))
    tables = [pq.read_table(path) for _, path in sorted(files)]
    return pa.concat_tables(tables) if tables else pa.table({})


def execute_transforms(ds: Dataset) -> list[tuple[Multihash, ExecuteTransform]]:
    """The dataset's ExecuteTransform events, oldest first, with their block hashes."""
    found = []
    for h, block in ds.iter_blocks():
        if isinstance(block.event, ExecuteTransform):
            found.append((h, block.event))
    return found[::-1]


def transaction_slices(ds: Dataset) -> list[tuple[OffsetInterval, Multihash] | None]:
    """What each ExecuteTransform wrote, oldest first: its offsets and logical hash (None for
    none)."""
    return [
        (e.new_data.offset_interval, e.new_data.logical_hash) if e.new_data else None
        for _, e in execute_transforms(ds)
    ]


def records_of_first(ds: Dataset, transactions: int) -> pa.Table:
    """The records the first ``transactions`` ExecuteTransforms wrote, in offset order."""
    ends = [s[0].end for s in transaction_slices(ds)[:transactions] if s is not None]
    table = records(ds)
    return table.filter(pc.less_equal(table["offset"], max(ends, default=-1)))


def check_derivative_chain(ds: Dataset, inputs: list[Dataset]) -> None:
    """Every ExecuteTransform continues the previous one: offsets, input blocks and offsets,
    checkpoints and watermarks; the last one reaches the inputs' heads."""
    events = execute_transforms(ds)
    assert events, f"{ds.alias} has no ExecuteTransform"
    last_offset: int | None = None
    last_checkpoint: Multihash | None = None
    last_watermark = None
    progress: dict[str, tuple[Multihash | None, int | None]] = {}
    for _, e in events:
        assert e.prev_offset == last_offset
        assert e.prev_checkpoint == last_checkpoint
        if e.new_data is not None:
            assert e.new_data.offset_interval.start == (
                0 if last_offset is None else last_offset + 1
            )
            last_offset = e.new_data.offset_interval.end
        assert [i.dataset_id for i in e.query_inputs] == [d.id for d in inputs]
        for entry in e.query_inputs:
            key = entry.dataset_id.to_did()
            assert (entry.prev_block_hash, entry.prev_offset) == progress.get(key, (None, None))
            progress[key] = (last_input_block(entry), last_input_offset(entry))
        if e.new_checkpoint is not None:
            last_checkpoint = e.new_checkpoint.physical_hash
        if last_watermark is not None:
            assert e.new_watermark is not None and e.new_watermark >= last_watermark
        last_watermark = e.new_watermark
    for d in inputs:
        state = d.state()
        assert progress[d.id.to_did()] == (state.head, state.last_offset)
