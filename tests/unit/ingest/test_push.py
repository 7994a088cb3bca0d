"""Push ingest on real datasets: source choice, format override, event time, bad input."""

from __future__ import annotations

from pathlib import Path

import pytest

from common.odf.errors import OdfError
from common.odf.events import AddPushSource, SetPollingSource, SetVocab
from common.odf.fragments import (
    FetchStepUrl,
    MergeStrategyAppend,
    MergeStrategyLedger,
    MergeStrategySnapshot,
    ReadStepCsv,
    ReadStepNdJson,
    SqlQueryStep,
    TransformSql,
)
from coordinator.dataset import ConflictError, Dataset, commit
from coordinator.ingest.context import CONFLICT_ATTEMPTS
from coordinator.ingest.errors import PreprocessError, ReadError, SourceNotFoundError
from coordinator.ingest.push import push_ingest
from tests.unit.ingest.helpers import add_data_events, all_data, new_dataset, rows, utc

SCHEMA = ("date TIMESTAMP", "city STRING", "population BIGINT")


def csv_source(name: str = "src", **kwargs: object) -> AddPushSource:
    return AddPushSource(
        source_name=name,
        read=ReadStepCsv(header=True, schema=SCHEMA),
        merge=MergeStrategyAppend(),
        **kwargs,  # type: ignore[arg-type]
    )


def write(tmp_path: Path, name: str, content: str) -> Path:
    path = tmp_path / name
    path.write_text(content)
    return path


def test_choosing_the_push_source(tmp_path: Path) -> None:
    data = write(tmp_path, "a.csv", "date,city,population\n2020-01-01,A,1\n")
    one = new_dataset(tmp_path, csv_source("only"), name="one")
    assert push_ingest(one, data).num_records == 1
    with pytest.raises(SourceNotFoundError, match="no push source 'other' \\(sources: only\\)"):
        push_ingest(one, data, source_name="other")

    two = new_dataset(tmp_path, csv_source("a"), csv_source("b"), name="two")
    with pytest.raises(SourceNotFoundError, match="several push sources \\(a, b\\): choose one"):
        push_ingest(two, data)
    assert push_ingest(two, data, source_name="b").num_records == 1

    none = new_dataset(tmp_path, name="none")
    with pytest.raises(SourceNotFoundError, match="has no push source"):
        push_ingest(none, data)

    polling = SetPollingSource(
        fetch=FetchStepUrl(url="file:///nowhere.csv"),
        read=ReadStepCsv(schema=SCHEMA),
        merge=MergeStrategyAppend(),
    )
    polled = new_dataset(tmp_path, polling, name="polled")
    with pytest.raises(SourceNotFoundError, match=r"has a polling source.*odf pull polled"):
        push_ingest(polled, data, source_name="x")


def test_input_format_override_with_a_ledger_source(tmp_path: Path) -> None:
    """The reference's test: an NdJson/Ledger source fed a headerless CSV."""
    source = AddPushSource(
        source_name="src",
        read=ReadStepNdJson(schema=SCHEMA),
        merge=MergeStrategyLedger(primary_key=("date", "city")),
    )
    ds = new_dataset(tmp_path, source, SetVocab(event_time_column="date"))
    data = write(tmp_path, "a.csv", "2020-01-01,A,1000\n2020-01-01,B,2000\n2020-01-01,C,3000\n")
    push_ingest(ds, data, input_format="csv")
    assert rows(all_data(ds), "offset", "date", "city") == [
        (0, utc(2020, 1, 1), "A"),
        (1, utc(2020, 1, 1), "B"),
        (2, utc(2020, 1, 1), "C"),
    ]
    assert push_ingest(ds, data, input_format="csv").up_to_date


def test_event_time_option_with_a_snapshot_source(tmp_path: Path) -> None:
    source = AddPushSource(
        source_name="src",
        read=ReadStepCsv(schema=("city STRING", "population BIGINT")),
        merge=MergeStrategySnapshot(primary_key=("city",)),
    )
    ds = new_dataset(tmp_path, source)
    data = write(tmp_path, "a.csv", "A,1000\nB,2000\nC,3000\n")
    push_ingest(ds, data, event_time=utc(2050, 1, 1))
    assert {r["event_time"] for r in all_data(ds).to_pylist()} == {utc(2050, 1, 1)}
    assert add_data_events(ds)[-1].new_source_state is None


def test_each_file_is_one_commit_and_empty_files_change_nothing(tmp_path: Path) -> None:
    ds = new_dataset(tmp_path, csv_source())
    empty = write(tmp_path, "empty.csv", "")
    head = ds.head()
    assert push_ingest(ds, empty).up_to_date and ds.head() == head
    for i in range(3):
        push_ingest(
            ds, write(tmp_path, f"{i}.csv", f"date,city,population\n2020-01-0{i + 1},C{i},{i}\n")
        )
    assert [e.new_data.offset_interval.start for e in add_data_events(ds) if e.new_data] == [
        0,
        1,
        2,
    ]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (
            "date,city,population\n2020-01-01,A,1\n2020-01-02,B\n",
            "bad.csv:3: expected 3 fields, got 2",
        ),
        (
            "date,city,population\n2020-01-01,A,many\n",
            "bad.csv:2: column 'population': invalid int64 value 'many'",
        ),
        (
            "date,city,population\n,A,1\n",
            "bad.csv:2: column 'date': empty value in a NOT NULL column",
        ),
        (
            "date,city,population\nlater,A,1\n",
            "bad.csv:2: column 'date': invalid TIMESTAMP 'later'",
        ),
    ],
)
def test_bad_input_leaves_the_dataset_unchanged(tmp_path: Path, content: str, message: str) -> None:
    source = AddPushSource(
        source_name="src",
        read=ReadStepCsv(
            header=True, schema=("date TIMESTAMP NOT NULL", "city STRING", "population BIGINT")
        ),
        merge=MergeStrategyAppend(),
    )
    ds = new_dataset(tmp_path, source, SetVocab(event_time_column="date"))
    push_ingest(ds, write(tmp_path, "good.csv", "date,city,population\n2020-01-01,Z,0\n"))
    head, files = ds.head(), sorted((ds.layout.root / "data").iterdir())
    with pytest.raises(ReadError) as e:
        push_ingest(ds, write(tmp_path, "bad.csv", content), name="bad.csv")
    assert str(e.value).startswith(message) and "\n" not in str(e.value)
    assert ds.head() == head
    assert sorted((ds.layout.root / "data").iterdir()) == files
    assert not any((ds.layout.private_dir / "staging").glob("*/*"))


def test_missing_event_time_in_json_where_required(tmp_path: Path) -> None:
    source = AddPushSource(
        source_name="src",
        read=ReadStepNdJson(schema=("event_time TIMESTAMP NOT NULL", "v INT")),
        merge=MergeStrategyAppend(),
    )
    ds = new_dataset(tmp_path, source)
    data = write(tmp_path, "a.ndjson", '{"event_time": "2020-01-01", "v": 1}\n{"v": 2}\n')
    with pytest.raises(ReadError, match=r"^a\.ndjson:2: field 'event_time': missing or null value"):
        push_ingest(ds, data, name="a.ndjson")
    assert add_data_events(ds) == []


def test_preprocess_without_an_engine_is_a_clear_error(tmp_path: Path) -> None:
    transform = TransformSql(engine="spark", queries=(SqlQueryStep(query="select * from input"),))
    ds = new_dataset(tmp_path, csv_source(preprocess=transform))
    data = write(tmp_path, "a.csv", "date,city,population\n2020-01-01,A,1\n")
    with pytest.raises(PreprocessError, match=r"preprocess query for engine 'spark'.*no engine"):
        push_ingest(ds, data)
    assert add_data_events(ds) == []


def test_derivative_datasets_take_no_pushed_data(tmp_path: Path) -> None:
    from common.odf.fragments import DatasetKind
    from common.odf.snapshot import DatasetSnapshot
    from coordinator.workspace import Workspace

    ws = Workspace.init(tmp_path / "ws", exist_ok=True)
    ds = ws.create_dataset(DatasetSnapshot(name="d", kind=DatasetKind.DERIVATIVE, metadata=()))
    with pytest.raises(OdfError, match="not a root dataset"):
        push_ingest(ds, write(tmp_path, "a.csv", "x\n"))


class _CommitsOnce:
    """A progress listener that pushes another file the first time records are read: a real
    commit by another writer between this ingest's read of the head and its commit."""

    def __init__(self, ds: Dataset, other: Path) -> None:
        self.ds, self.other, self.done = ds, other, False

    def task(self, description: str, *, total: int | None = None, unit: str = "B") -> _CommitsOnce:
        return self

    def advance(self, amount: int) -> None:
        if not self.done:
            self.done = True
            push_ingest(self.ds, self.other)

    def close(self) -> None:
        pass


def test_a_concurrent_commit_makes_the_ingest_start_over(tmp_path: Path) -> None:
    ds = new_dataset(tmp_path, csv_source())
    mine = write(tmp_path, "mine.csv", "date,city,population\n2020-01-01,M,1\n2020-01-02,N,2\n")
    other = write(tmp_path, "other.csv", "date,city,population\n2020-01-01,O,3\n")
    result = push_ingest(ds, mine, progress=_CommitsOnce(ds, other))
    assert result.num_records == 2
    assert rows(all_data(ds), "offset", "city") == [(0, "O"), (1, "M"), (2, "N")]
    assert len(add_data_events(ds)) == 2


def test_an_ingest_that_keeps_losing_reports_the_conflict(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another writer commits each time the ingest is about to take the commit lock: after
    CONFLICT_ATTEMPTS tries the ingest gives up with the conflict, and none of its data is in."""
    ds = new_dataset(tmp_path, csv_source())
    mine = write(tmp_path, "mine.csv", "date,city,population\n2020-01-01,M,1\n")
    other = write(tmp_path, "other.csv", "date,city,population\n2020-01-01,O,3\n")
    rival = Dataset(ds.layout.root)
    attempts = 0

    def hook(step: str) -> None:
        nonlocal attempts
        if step == "locking":
            attempts += 1
            monkeypatch.setattr(commit, "step_hook", None)  # the rival's own commit
            push_ingest(rival, other)
            monkeypatch.setattr(commit, "step_hook", hook)

    monkeypatch.setattr(commit, "step_hook", hook)
    with pytest.raises(ConflictError, match="modified concurrently"):
        push_ingest(ds, mine)
    assert attempts == CONFLICT_ATTEMPTS
    assert rows(all_data(ds), "city") == [("O",)] * CONFLICT_ATTEMPTS


def test_explicit_system_time(tmp_path: Path) -> None:
    from coordinator.dataset import AppendValidationError

    ds = new_dataset(tmp_path, csv_source())
    data = write(tmp_path, "a.csv", "date,city,population\n2020-01-01,A,1\n")
    push_ingest(ds, data, system_time=utc(2030, 1, 1))
    assert {r["system_time"] for r in all_data(ds).to_pylist()} == {utc(2030, 1, 1)}
    head = ds.head()
    with pytest.raises(AppendValidationError, match="before the head"):
        push_ingest(ds, data, system_time=utc(2029, 1, 1))
    assert ds.head() == head
