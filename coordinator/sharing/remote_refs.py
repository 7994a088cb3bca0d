"""Remote dataset references resolved to the URL of a dataset (pure).

A remote reference is the spec's ``DatasetRefRemote`` (``common.odf.dataset_refs``):

- a URL of a dataset directory: ``file:///path/NAME``, ``http(s)://host/path/NAME``
  (the Simple Transfer Protocol, read-only), ``odf+http(s)://host:port/NAME`` (the Smart
  Transfer Protocol);
- ``REPO/NAME`` or ``REPO/ACCOUNT/NAME``: a dataset in a repository known by its alias
  (``odf repo add``), at ``<repository URL>/[ACCOUNT/]NAME``.

A dataset ID (``did:odf:...``, ``REPO/did:odf:...``) needs a repository that can look IDs
up, which these transports cannot: refused with a clear error. URLs are checked here, once:
a supported scheme, a host for network schemes, an absolute path for ``file://``, no query,
fragment, credentials or ``.``/``..`` segments.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import PurePosixPath
from urllib.parse import unquote, urlsplit

from common.odf.dataset_refs import (
    DatasetAliasRemote,
    DatasetIdRemote,
    DatasetName,
    DatasetRefRemote,
    DatasetUrl,
    RepoName,
)
from common.odf.errors import NotFoundError, ValidationError

FILE = "file"
HTTP_SCHEMES = ("http", "https")
SMART_SCHEMES = ("odf+http", "odf+https")
SCHEMES = (FILE, *HTTP_SCHEMES, *SMART_SCHEMES)


@dataclass(frozen=True, slots=True)
class RemoteLocation:
    """A checked URL of a dataset directory (or of a repository), without a trailing slash."""

    url: str

    @property
    def scheme(self) -> str:
        return self.url.split("://", 1)[0]

    @property
    def is_file(self) -> bool:
        return self.scheme == FILE

    @property
    def writable(self) -> bool:
        """Whether this transport can push: ``file://`` (and the smart protocol)."""
        return self.scheme == FILE or self.scheme in SMART_SCHEMES

    def file_path(self) -> PurePosixPath:
        """The local path of a ``file://`` location."""
        if not self.is_file:
            raise ValueError(f"{self.url} is not a file:// URL")
        return PurePosixPath(unquote(urlsplit(self.url).path))

    def child(self, *segments: str) -> RemoteLocation:
        """The location of ``segments`` (names checked by the caller) under this one."""
        return RemoteLocation("/".join([self.url, *segments]))

    @property
    def last_segment(self) -> str:
        return unquote(self.url.rsplit("/", 1)[-1])

    def __str__(self) -> str:
        return self.url


@dataclass(frozen=True, slots=True)
class ResolvedRemote:
    """Where a remote reference points, and the name a clone gets by default."""

    location: RemoteLocation
    default_name: DatasetName | None
    """``None`` when the URL's last segment is not a valid dataset name (``--as`` needed)."""


def parse_location(text: str, *, where: str = "URL") -> RemoteLocation:
    """Check a dataset or repository URL; ``ValidationError`` naming ``where`` otherwise."""
    url = DatasetUrl.parse(text.strip()).url
    try:
        parts = urlsplit(url)
    except ValueError as e:
        raise ValidationError(f"{text!r}: {e}", path=where) from None
    scheme = parts.scheme.lower()
    if scheme not in SCHEMES:
        raise ValidationError(
            f"{text!r}: unsupported scheme {scheme!r} (supported: {', '.join(SCHEMES)})",
            path=where,
        )
    if parts.query or parts.fragment:
        raise ValidationError(f"{text!r}: a query or fragment is not allowed", path=where)
    if parts.username is not None or parts.password is not None:
        raise ValidationError(f"{text!r}: credentials in the URL are not allowed", path=where)
    segments = [s for s in parts.path.split("/") if s]
    for s in segments:
        decoded = unquote(s)
        if decoded in (".", "..") or "/" in decoded or "\0" in decoded:
            raise ValidationError(f"{text!r}: path segment {s!r} is not allowed", path=where)
    if scheme == FILE:
        if parts.netloc not in ("", "localhost"):
            raise ValidationError(
                f"{text!r}: a file:// URL has no host (file:///absolute/path)", path=where
            )
        if not segments:
            raise ValidationError(f"{text!r}: a file:// URL needs an absolute path", path=where)
        return RemoteLocation(f"file:///{'/'.join(segments)}")
    if not parts.hostname:
        raise ValidationError(f"{text!r}: the URL has no host", path=where)
    try:
        port = parts.port
    except ValueError as e:
        raise ValidationError(f"{text!r}: {e}", path=where) from None
    host = parts.hostname if ":" not in parts.hostname else f"[{parts.hostname}]"
    netloc = host if port is None else f"{host}:{port}"
    path = "".join(f"/{s}" for s in segments)
    return RemoteLocation(f"{scheme}://{netloc}{path}")


def looks_remote(text: str) -> bool:
    """Whether a command argument is a remote reference rather than a local dataset name."""
    return "://" in text or "/" in text


def resolve(text: str, repos: Mapping[RepoName, RemoteLocation]) -> ResolvedRemote:
    """The dataset a remote reference points at; clear errors for anything unsupported."""
    ref = DatasetRefRemote.parse(text.strip())
    target = ref.target
    if isinstance(target, DatasetUrl):
        location = parse_location(target.url)
        return ResolvedRemote(location, _name_or_none(location.last_segment))
    if isinstance(target, DatasetIdRemote):
        raise ValidationError(
            f"{text!r}: a remote dataset by id needs a repository that looks ids up; give its"
            " URL or REPO/NAME instead"
        )
    if isinstance(target, DatasetAliasRemote):
        repo = repos.get(target.repo_name)
        if repo is None:
            known = ", ".join(sorted(str(r) for r in repos)) or "none"
            raise NotFoundError(
                f"{text!r}: no repository named {str(target.repo_name)!r} (known: {known};"
                " add one with `odf repo add NAME URL`)"
            )
        segments = [str(target.dataset_name)]
        if target.account_name is not None:
            segments.insert(0, str(target.account_name))
        return ResolvedRemote(repo.child(*segments), target.dataset_name)
    raise ValidationError(f"{text!r}: not a remote dataset reference")


def _name_or_none(text: str) -> DatasetName | None:
    try:
        return DatasetName.parse(text)
    except ValidationError:
        return None
