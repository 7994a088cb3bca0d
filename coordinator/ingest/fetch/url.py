"""FetchStep::Url for ``file``, ``http`` and ``https``.

Local files are used in place. Their state is the modification time (rounded to
milliseconds): the same time means unchanged, any other time re-ingests.

HTTP(S) downloads with conditional requests: ``If-None-Match`` with a recorded ETag, else
``If-Modified-Since`` with a recorded Last-Modified; ``304`` means unchanged. The state kept
is the response's ETag, else its Last-Modified. ``404`` is "not found", any other status or a
connection failure is "unreachable". The Last-Modified time is the fallback event time
(``FromMetadata``, the default) whenever the server sends it.
"""

from __future__ import annotations

import email.utils
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath
from urllib.parse import unquote, urlparse
from urllib.request import url2pathname

import requests

from common.logs import get_logger
from common.odf.fragments import FetchStepUrl
from coordinator.ingest.errors import FetchError, SourceNotFoundError, UnreachableError
from coordinator.ingest.event_time import fallback_event_time
from coordinator.ingest.fetch.files_glob import file_mtime
from coordinator.ingest.fetch.result import Fetched, FetchResult, UpToDate
from coordinator.ingest.fetch.templating import render
from coordinator.ingest.progress import NO_PROGRESS, Progress
from coordinator.ingest.source_state import ETag, LastModified, PollingSourceState

log = get_logger(__name__)

CONNECT_TIMEOUT_S = 30.0
READ_TIMEOUT_S = 300.0
MAX_REDIRECTS = 10
CHUNK_BYTES = 1 << 20
FETCHED_FILE = "fetched.bin"


def fetch_url(
    step: FetchStepUrl,
    prev: PollingSourceState | None,
    work_dir: Path,
    *,
    progress: Progress = NO_PROGRESS,
) -> FetchResult:
    url = render(step.url, field="fetch.url")
    headers = {
        h.name: render(h.value, field=f"fetch.headers[{i}].value")
        for i, h in enumerate(step.headers or ())
    }
    scheme = urlparse(url).scheme.lower()
    if scheme in ("", "file"):
        return _fetch_file(step, url, prev)
    if scheme in ("http", "https"):
        return _fetch_http(step, url, headers, prev, work_dir / FETCHED_FILE, progress)
    raise FetchError(f"unsupported URL scheme {scheme!r} in {url!r} (file, http, https)")


def local_path(url: str) -> Path:
    """The local path of a ``file://`` URL, or of a plain path."""
    parsed = urlparse(url)
    if parsed.scheme.lower() != "file":
        return Path(url)
    return Path(url2pathname(unquote(parsed.path)))


def _fetch_file(step: FetchStepUrl, url: str, prev: PollingSourceState | None) -> FetchResult:
    path = local_path(url)
    if not path.is_file():
        raise SourceNotFoundError(f"{path}: no such file")
    modified = file_mtime(path)
    if prev == LastModified(modified):
        return UpToDate()
    event_time = fallback_event_time(step.event_time, name=path.name, modified=modified)
    return Fetched(
        path=path,
        name=str(path),
        source_state=LastModified(modified),
        source_event_time=event_time,
    )


def _fetch_http(
    step: FetchStepUrl,
    url: str,
    headers: dict[str, str],
    prev: PollingSourceState | None,
    target: Path,
    progress: Progress,
) -> FetchResult:
    request_headers = dict(headers)
    if isinstance(prev, ETag):
        request_headers["If-None-Match"] = prev.value
    elif isinstance(prev, LastModified):
        request_headers["If-Modified-Since"] = email.utils.format_datetime(prev.time, usegmt=True)
    with requests.Session() as session:
        session.max_redirects = MAX_REDIRECTS
        try:
            response = session.get(
                url,
                headers=request_headers,
                stream=True,
                timeout=(CONNECT_TIMEOUT_S, READ_TIMEOUT_S),
            )
        except requests.RequestException as e:
            raise UnreachableError(f"{url}: {_reason(e)}") from None
        with response:
            return _handle_response(step, url, response, target, progress)


def _handle_response(
    step: FetchStepUrl, url: str, response: requests.Response, target: Path, progress: Progress
) -> FetchResult:
    if response.status_code == 304:
        return UpToDate()
    if response.status_code == 404:
        raise SourceNotFoundError(f"{url}: HTTP 404 Not Found")
    if response.status_code != 200:
        body = response.text[:200].replace("\n", " ").strip()
        detail = f": {body}" if body else ""
        raise UnreachableError(f"{url}: HTTP {response.status_code} {response.reason}{detail}")
    etag = response.headers.get("ETag")
    last_modified = _parse_http_date(response.headers.get("Last-Modified"), url)
    _download(response, url, target, progress)
    state: PollingSourceState | None = None
    if etag:
        state = ETag(etag)
    elif last_modified is not None:
        state = LastModified(last_modified)
    name = PurePosixPath(unquote(urlparse(url).path)).name
    event_time = fallback_event_time(step.event_time, name=name, modified=last_modified)
    return Fetched(path=target, name=url, source_state=state, source_event_time=event_time)


def _download(response: requests.Response, url: str, target: Path, progress: Progress) -> None:
    length = response.headers.get("Content-Length")
    total = int(length) if length and length.isdigit() else None
    task = progress.task(f"fetch {url}", total=total, unit="B")
    try:
        with open(target, "wb") as out:
            for chunk in response.iter_content(chunk_size=CHUNK_BYTES):
                out.write(chunk)
                task.advance(len(chunk))
    except requests.RequestException as e:
        raise UnreachableError(f"{url}: download interrupted: {_reason(e)}") from None
    finally:
        task.close()


def _parse_http_date(value: str | None, url: str) -> datetime | None:
    """A Last-Modified header as a UTC time; an unparseable one is ignored (with a warning)."""
    if not value:
        return None
    try:
        parsed = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        log.warning("ignoring an unparseable Last-Modified header", url=url, value=value)
        return None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed.astimezone(UTC)


def _reason(error: BaseException) -> str:
    """The innermost cause of a requests error, on one line (e.g. ``Connection refused``)."""
    current: BaseException | None = error
    message = str(error)
    seen = set()
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        text = str(current)
        if text:
            message = text
        nested = getattr(current, "reason", None)
        if isinstance(nested, BaseException):
            current = nested
        elif current.args and isinstance(current.args[0], BaseException):
            current = current.args[0]
        else:
            current = current.__cause__ or current.__context__
    return message.splitlines()[0] if message else type(error).__name__
