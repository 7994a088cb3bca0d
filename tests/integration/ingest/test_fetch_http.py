"""Url fetch over a real local HTTP server: ETag, Last-Modified, 304, 404, errors, polling."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from common.odf.events import SetPollingSource
from common.odf.fragments import (
    FetchStepUrl,
    MergeStrategyLedger,
    ReadStepCsv,
    RequestHeader,
)
from coordinator.ingest.errors import SourceNotFoundError, UnreachableError
from coordinator.ingest.fetch import Fetched, UpToDate, fetch
from coordinator.ingest.polling import PollOptions, poll_once
from coordinator.ingest.source_state import ETag, LastModified
from tests.integration.ingest.http_server import Resource, Server, http_server
from tests.unit.ingest.helpers import add_data_events, all_data, new_dataset, rows

BODY = b"city,population\nA,1000\nB,2000\nC,3000\n"  # 37 bytes, as in the reference test
MODIFIED = datetime(2021, 5, 6, 7, 8, 9, tzinfo=UTC)


@pytest.fixture
def server() -> Iterator[Server]:
    with http_server() as s:
        yield s


def test_unreachable_port(tmp_path: Path) -> None:
    with socket.socket() as s:  # bound, never listening: connections are refused
        s.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{s.getsockname()[1]}/data.csv"
        with pytest.raises(UnreachableError) as e:
            fetch(FetchStepUrl(url=url), None, tmp_path)
    assert str(e.value).startswith(url + ": ")
    assert "refused" in str(e.value).lower()
    assert "\n" not in str(e.value)


def test_not_found_and_server_error(tmp_path: Path, server: Server) -> None:
    with pytest.raises(SourceNotFoundError, match="HTTP 404"):
        fetch(FetchStepUrl(url=server.url("/missing.csv")), None, tmp_path)
    server.resources["/broken"] = Resource(b"", status=500)
    with pytest.raises(UnreachableError, match="HTTP 500 Internal Server Error: server trouble"):
        fetch(FetchStepUrl(url=server.url("/broken")), None, tmp_path)


def test_etag_is_kept_and_sent_back(tmp_path: Path, server: Server) -> None:
    server.resources["/data.csv"] = Resource(BODY, etag='"v1"', last_modified=MODIFIED)
    step = FetchStepUrl(url=server.url("/data.csv"))
    result = fetch(step, None, tmp_path)
    assert isinstance(result, Fetched)
    assert result.path.read_bytes() == BODY and len(BODY) == 37
    assert result.source_state == ETag('"v1"')
    assert result.source_event_time == MODIFIED

    assert isinstance(fetch(step, result.source_state, tmp_path), UpToDate)
    assert server.requests[-1]["If-None-Match"] == '"v1"'

    server.resources["/data.csv"] = Resource(BODY + b"D,4\n", etag='"v2"')
    result = fetch(step, result.source_state, tmp_path)
    assert isinstance(result, Fetched)
    assert result.source_state == ETag('"v2"')
    assert result.source_event_time is None


def test_last_modified_without_etag(tmp_path: Path, server: Server) -> None:
    server.resources["/data.csv"] = Resource(BODY, last_modified=MODIFIED)
    step = FetchStepUrl(url=server.url("/data.csv"))
    result = fetch(step, None, tmp_path)
    assert isinstance(result, Fetched)
    assert result.source_state == LastModified(MODIFIED)
    assert isinstance(fetch(step, result.source_state, tmp_path), UpToDate)
    assert server.requests[-1]["If-Modified-Since"] == "Thu, 06 May 2021 07:08:09 GMT"


def test_headers_are_templated(
    tmp_path: Path, server: Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    server.resources["/data.csv"] = Resource(BODY)
    monkeypatch.setenv("ODF_TEST_TOKEN", "s3cret")
    headers = (RequestHeader(name="Authorization", value="Bearer ${{ env.ODF_TEST_TOKEN }}"),)
    result = fetch(FetchStepUrl(url=server.url("/data.csv"), headers=headers), None, tmp_path)
    assert isinstance(result, Fetched) and result.source_state is None
    assert server.requests[-1]["Authorization"] == "Bearer s3cret"


def polling_source(url: str) -> SetPollingSource:
    return SetPollingSource(
        fetch=FetchStepUrl(url=url),
        read=ReadStepCsv(header=True, schema=("city STRING", "population BIGINT")),
        merge=MergeStrategyLedger(primary_key=("city",)),
    )


def test_polling_over_http_does_not_ingest_unchanged_data(tmp_path: Path, server: Server) -> None:
    server.resources["/data.csv"] = Resource(BODY, etag='"v1"', last_modified=MODIFIED)
    ds = new_dataset(tmp_path, polling_source(server.url("/data.csv")))
    first = poll_once(ds)
    assert (first.up_to_date, first.num_records) == (False, 3)
    (event,) = add_data_events(ds)
    assert event.new_source_state is not None and event.new_source_state.value == '"v1"'
    assert event.new_watermark == MODIFIED  # Last-Modified is the event time

    second = poll_once(ds)
    assert second.up_to_date and ds.head() == first.new_head

    server.resources["/data.csv"] = Resource(BODY + b"D,4000\n", etag='"v2"')
    third = poll_once(ds)
    assert third.num_records == 1
    assert rows(all_data(ds), "offset", "city") == [(0, "A"), (1, "B"), (2, "C"), (3, "D")]


def test_polling_a_source_without_state_is_not_fetched_again(
    tmp_path: Path, server: Server
) -> None:
    server.resources["/data.csv"] = Resource(BODY)
    ds = new_dataset(tmp_path, polling_source(server.url("/data.csv")))
    assert poll_once(ds).num_records == 3
    requests = len(server.requests)
    result = poll_once(ds)
    assert result.up_to_date and result.message and "--fetch-uncacheable" in result.message
    assert len(server.requests) == requests
    server.resources["/data.csv"] = Resource(BODY + b"E,5\n")
    assert poll_once(ds, PollOptions(fetch_uncacheable=True)).num_records == 1
