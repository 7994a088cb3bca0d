"""Polling ingest on real datasets and files: the reference's polling tests and the pull loop."""

from __future__ import annotations

import gzip
import os
from pathlib import Path

from common.odf.events import AddPushSource, SetPollingSource, SetVocab
from common.odf.fragments import (
    CompressionFormat,
    EventTimeSourceFromPath,
    EventTimeSourceFromSystemTime,
    FetchStepFilesGlob,
    FetchStepUrl,
    MergeStrategyAppend,
    MergeStrategyLedger,
    MergeStrategySnapshot,
    PrepStepDecompress,
    ReadStepCsv,
)
from coordinator.ingest.polling import poll_once, pull_root
from coordinator.ingest.system_columns import Op
from tests.unit.ingest.helpers import add_data_events, all_data, new_dataset, rows, utc


def test_polling_ledger_rounds(tmp_path: Path) -> None:
    """The reference's ``test_ingest_polling_ledger``, round by round."""
    source_file = tmp_path / "data.csv"
    source = SetPollingSource(
        fetch=FetchStepUrl(url=source_file.as_uri(), event_time=EventTimeSourceFromSystemTime()),
        read=ReadStepCsv(
            header=True, schema=("date TIMESTAMP", "city STRING", "population BIGINT")
        ),
        merge=MergeStrategyLedger(primary_key=("date", "city")),
    )
    ds = new_dataset(tmp_path, source, SetVocab(event_time_column="date"))

    def poll(content: str, mtime: int) -> None:
        source_file.write_text(content)
        os.utime(source_file, (mtime, mtime))
        poll_once(ds)

    poll("date,city,population\n2020-01-01,A,1000\n2020-01-01,B,2000\n2020-01-01,C,3000\n", 1)
    assert rows(all_data(ds), "offset", "op", "date", "city") == [
        (0, Op.APPEND, utc(2020, 1, 1), "A"),
        (1, Op.APPEND, utc(2020, 1, 1), "B"),
        (2, Op.APPEND, utc(2020, 1, 1), "C"),
    ]
    assert add_data_events(ds)[-1].new_watermark == utc(2020, 1, 1)

    poll("date,city,population\n2020-01-01,B,2000\n2020-01-01,C,3000\n2021-01-01,C,4000\n", 2)
    assert rows(all_data(ds))[3:][0][3:] == (utc(2021, 1, 1), "C", 4000)
    assert add_data_events(ds)[-1].new_watermark == utc(2021, 1, 1)

    poll("date,city,population\n2020-01-01,D,4000\n", 3)
    assert rows(all_data(ds), "offset", "date", "city")[4] == (4, utc(2020, 1, 1), "D")
    assert add_data_events(ds)[-1].new_watermark == utc(2021, 1, 1)  # late data: not lowered

    for content, mtime in (("date,city,population\n2020-01-01,D,4000\n", 4), ("", 5)):
        poll(content, mtime)
        last = add_data_events(ds)[-1]
        assert last.new_data is None
        assert last.new_watermark == utc(2021, 1, 1)
        assert last.new_source_state is not None
        assert last.new_source_state.kind == "odf/last-modified"
    assert len(add_data_events(ds)) == 5
    assert all_data(ds).num_rows == 5

    head = ds.head()
    assert poll_once(ds).up_to_date and ds.head() == head  # same mtime: not read again


def test_files_glob_snapshots_one_commit_per_file(tmp_path: Path) -> None:
    inbox = tmp_path / "in"
    inbox.mkdir()
    (inbox / "pop-2020-01-01.csv.gz").write_bytes(gzip.compress(b"A,1\nB,2\nC,3\n"))
    (inbox / "pop-2020-02-01.csv.gz").write_bytes(gzip.compress(b"A,1\nB,20\n"))
    (inbox / "pop-2020-03-01.csv.gz").write_bytes(gzip.compress(b"A,1\nB,20\n"))
    source = SetPollingSource(
        fetch=FetchStepFilesGlob(
            path=str(inbox / "pop-*.csv.gz"),
            event_time=EventTimeSourceFromPath(pattern=r"pop-(\d{4}-\d{2}-\d{2})"),
        ),
        prepare=(PrepStepDecompress(format=CompressionFormat.GZIP),),
        read=ReadStepCsv(schema=("city STRING", "population BIGINT")),
        merge=MergeStrategySnapshot(primary_key=("city",)),
    )
    ds = new_dataset(tmp_path, source)
    results = list(pull_root(ds))
    assert [(r.num_records, r.has_more) for r in results] == [(3, True), (3, True), (0, False)]
    events = add_data_events(ds)
    assert [e.new_source_state.value for e in events if e.new_source_state] == [
        "pop-2020-01-01.csv.gz",
        "pop-2020-02-01.csv.gz",
        "pop-2020-03-01.csv.gz",
    ]
    assert events[-1].new_data is None
    t1, t2 = utc(2020, 1, 1), utc(2020, 2, 1)
    assert rows(all_data(ds), "op", "event_time", "city", "population")[3:] == [
        (Op.CORRECT_FROM, t1, "B", 2),
        (Op.CORRECT_TO, t2, "B", 20),
        (Op.RETRACT, t1, "C", 3),
    ]
    assert events[-1].new_watermark == t2
    assert [r.up_to_date for r in pull_root(ds)] == [True]


def test_no_polling_source_is_up_to_date(tmp_path: Path) -> None:
    push = AddPushSource(
        source_name="src", read=ReadStepCsv(schema=("a INT",)), merge=MergeStrategyAppend()
    )
    ds = new_dataset(tmp_path, push)
    result = poll_once(ds)
    assert result.up_to_date and result.message == "no polling source defined"
