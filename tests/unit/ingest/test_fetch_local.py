"""Fetch from local files: FilesGlob (the reference's step table) and Url with file://."""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path

import pytest

from common.odf.fragments import (
    EventTimeSourceFromMetadata,
    EventTimeSourceFromPath,
    EventTimeSourceFromSystemTime,
    FetchStepFilesGlob,
    FetchStepUrl,
    SourceOrdering,
)
from coordinator.ingest.errors import FetchError, ParameterError, SourceNotFoundError
from coordinator.ingest.fetch import Fetched, UpToDate, fetch
from coordinator.ingest.fetch.templating import render
from coordinator.ingest.source_state import ETag, LastModified


def touch(path: Path, content: str = "a,1\n") -> Path:
    path.write_text(content)
    return path


def test_files_glob_steps_of_the_reference_test(tmp_path: Path) -> None:
    step = FetchStepFilesGlob(
        path=str(tmp_path / "data-*.csv"),
        event_time=EventTimeSourceFromPath(
            pattern=r"data-(\d+-\d+-\d+)\.csv", timestamp_format="%Y-%m-%d"
        ),
    )
    with pytest.raises(SourceNotFoundError, match="no file matches"):
        fetch(step, None, tmp_path)

    touch(tmp_path / "data-2020-10-01.csv")
    result = fetch(step, None, tmp_path)
    assert isinstance(result, Fetched)
    assert result.source_state == ETag("data-2020-10-01.csv")
    assert result.source_event_time == datetime(2020, 10, 1, tzinfo=UTC)
    assert result.path == tmp_path / "data-2020-10-01.csv"  # read in place
    assert not result.has_more

    state = result.source_state
    assert isinstance(fetch(step, state, tmp_path), UpToDate)
    os.utime(tmp_path / "data-2020-10-01.csv", (0, 0))
    assert isinstance(fetch(step, state, tmp_path), UpToDate)  # mtime is never compared
    touch(tmp_path / "data-2020-01-01.csv")
    assert isinstance(fetch(step, state, tmp_path), UpToDate)  # name before the last one

    touch(tmp_path / "data-2020-10-05.csv")
    touch(tmp_path / "data-2020-10-10.csv")
    result = fetch(step, state, tmp_path)
    assert isinstance(result, Fetched)
    assert (result.path.name, result.has_more) == ("data-2020-10-05.csv", True)
    assert result.source_event_time == datetime(2020, 10, 5, tzinfo=UTC)
    result = fetch(step, result.source_state, tmp_path)
    assert isinstance(result, Fetched)
    assert (result.path.name, result.has_more) == ("data-2020-10-10.csv", False)
    assert result.source_event_time == datetime(2020, 10, 10, tzinfo=UTC)


def test_files_glob_event_time_kinds_and_dot_files(tmp_path: Path) -> None:
    touch(tmp_path / ".hidden.csv")
    os.utime(tmp_path / ".hidden.csv", (0, 86400))
    (tmp_path / "dir.csv").mkdir()
    unset = FetchStepFilesGlob(path=str(tmp_path / "*.csv"))
    result = fetch(unset, None, tmp_path)
    assert isinstance(result, Fetched)
    assert result.path.name == ".hidden.csv" and result.source_event_time is None
    meta = FetchStepFilesGlob(
        path=str(tmp_path / "*.csv"), event_time=EventTimeSourceFromMetadata()
    )
    result = fetch(meta, None, tmp_path)
    assert isinstance(result, Fetched)
    assert result.source_event_time == datetime(1970, 1, 2, tzinfo=UTC)
    by_time = FetchStepFilesGlob(path=str(tmp_path / "*.csv"), order=SourceOrdering.BY_EVENT_TIME)
    with pytest.raises(FetchError, match="ByEventTime is not supported"):
        fetch(by_time, None, tmp_path)


def test_url_file(tmp_path: Path) -> None:
    source = tmp_path / "data.csv"
    step = FetchStepUrl(url=source.as_uri())
    with pytest.raises(SourceNotFoundError, match="no such file"):
        fetch(step, None, tmp_path)

    touch(source)
    os.utime(source, ns=(0, 1_600_000_000_123_600_000))
    result = fetch(step, None, tmp_path)
    assert isinstance(result, Fetched)
    assert result.path == source
    expected = datetime(2020, 9, 13, 12, 26, 40, 124000, tzinfo=UTC)  # rounded to ms
    assert result.source_state == LastModified(expected)
    assert result.source_event_time == expected

    assert isinstance(fetch(step, result.source_state, tmp_path), UpToDate)
    os.utime(source, (0, 0))
    result = fetch(step, result.source_state, tmp_path)
    assert isinstance(result, Fetched)
    assert result.source_state == LastModified(datetime(1970, 1, 1, tzinfo=UTC))

    system = FetchStepUrl(url=str(source), event_time=EventTimeSourceFromSystemTime())
    result = fetch(system, None, tmp_path)
    assert isinstance(result, Fetched) and result.source_event_time is None


def test_url_templates(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    source = touch(tmp_path / "data.csv")
    step = FetchStepUrl(url=str(tmp_path) + "/${{ env.ODF_TEST_FILE_1 }}")
    monkeypatch.delenv("ODF_TEST_FILE_1", raising=False)
    with pytest.raises(ParameterError, match=r"fetch\.url: environment variable ODF_TEST_FILE_1"):
        fetch(step, None, tmp_path)
    monkeypatch.setenv("ODF_TEST_FILE_1", "data.csv")
    result = fetch(step, None, tmp_path)
    assert isinstance(result, Fetched) and result.path == source
    assert render("${{env.A}}-${{ env.B }}", field="f", env={"A": "1", "B": "2"}) == "1-2"
    with pytest.raises(ParameterError, match="unsupported template expression"):
        render("${{ secrets.X }}", field="f", env={})


def test_url_unsupported_scheme(tmp_path: Path) -> None:
    with pytest.raises(FetchError, match="unsupported URL scheme 'ftp'"):
        fetch(FetchStepUrl(url="ftp://example.com/x.csv"), None, tmp_path)
