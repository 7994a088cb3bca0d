"""Remote references: URLs checked once, REPO/NAME through repository aliases, clear errors."""

from __future__ import annotations

import pytest

from common.odf.dataset_refs import DatasetName, RepoName
from common.odf.errors import NotFoundError, ValidationError
from coordinator.sharing.remote_refs import (
    RemoteLocation,
    looks_remote,
    parse_location,
    resolve,
)


@pytest.mark.parametrize(
    ("text", "url"),
    [
        ("file:///srv/repo/cities", "file:///srv/repo/cities"),
        ("FILE://localhost/srv/repo/", "file:///srv/repo"),
        ("http://Example.org:8080/odf/cities/", "http://example.org:8080/odf/cities"),
        ("https://example.org/a//b", "https://example.org/a/b"),
        ("odf+http://127.0.0.1:4885/cities", "odf+http://127.0.0.1:4885/cities"),
        ("http://[::1]:80/x", "http://[::1]:80/x"),
    ],
)
def test_locations_are_normalized(text: str, url: str) -> None:
    assert parse_location(text).url == url


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("ftp://host/x", "unsupported scheme 'ftp'"),
        ("s3://bucket/x", "unsupported scheme 's3'"),
        ("file://host/x", "a file:// URL has no host"),
        ("file:///", "needs an absolute path"),
        ("http:///x", "has no host"),
        ("http://h/x?y=1", "a query or fragment is not allowed"),
        ("http://h/x#f", "a query or fragment is not allowed"),
        ("http://user:pw@h/x", "credentials in the URL are not allowed"),
        ("file:///srv/../etc/passwd", "path segment '..' is not allowed"),
        ("http://h/a/%2e%2e/b", "path segment '%2e%2e' is not allowed"),
        ("http://h/a%2fb", "path segment 'a%2fb' is not allowed"),
        ("http://h:99999/x", "out of range"),
        ("not a url", "expected a URL"),
    ],
)
def test_bad_locations_are_refused_with_the_reason(text: str, why: str) -> None:
    with pytest.raises(ValidationError) as e:
        parse_location(text)
    assert why in str(e.value)


def test_a_url_resolves_to_itself_and_names_the_clone_after_its_last_segment() -> None:
    r = resolve("http://h/odf/nyc.flights", {})
    assert r.location.url == "http://h/odf/nyc.flights"
    assert r.default_name == DatasetName("nyc.flights")
    assert resolve("file:///srv/x_y", {}).default_name is None  # not a dataset name: --as


def test_repo_name_resolves_through_the_alias() -> None:
    repos = {RepoName("Hub"): RemoteLocation("http://h/odf")}
    r = resolve("hub/cities", repos)
    assert r.location.url == "http://h/odf/cities"
    assert r.default_name == DatasetName("cities")
    assert resolve("hub/alice/cities", repos).location.url == "http://h/odf/alice/cities"


def test_unknown_repo_and_ids_are_refused() -> None:
    with pytest.raises(NotFoundError, match=r"no repository named 'nope'.*known: hub"):
        resolve("nope/cities", {RepoName("hub"): RemoteLocation("http://h")})
    with pytest.raises(ValidationError, match="needs a repository that looks ids up"):
        resolve("hub/did:odf:fed01" + "0" * 64, {})
    with pytest.raises(ValidationError):
        resolve("hub/a/b/c", {})


def test_what_looks_remote() -> None:
    assert looks_remote("hub/cities")
    assert looks_remote("file:///x")
    assert not looks_remote("cities")


def test_served_paths_are_parsed_strictly() -> None:
    from coordinator.sharing.serving import parse_request_path

    h = "f1620" + "ab" * 32
    assert parse_request_path("/cities/refs/head") is not None
    request = parse_request_path(f"/cities/data/{h}")
    assert request is not None and request.kind == "data" and str(request.dataset) == "cities"
    for bad in [
        "/cities/refs/tail",
        "/cities/refs/head/",
        f"/../data/{h}",
        f"/cities/../data/{h}",
        "/cities/data/..",
        f"/cities/info/{h}",
        f"/cities/data/{h.upper()}",
        "/cities/blocks/f1620ab",
        f"/a/cities/data/{h}",
        f"/cities/data/{h}?x=1",
        "/cities/.coordinator/commit.lock",
    ]:
        assert parse_request_path(bad) is None, bad
