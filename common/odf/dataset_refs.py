"""Names, aliases and references of datasets: the "Aliases and References" grammar of the spec.

::

    DatasetRefAny      = DatasetRefRemote / DatasetRef
    DatasetRef         = DatasetId / DatasetAlias
    DatasetRefRemote   = (RepoName "/")? DatasetId / DatasetAliasRemote / Url
    DatasetAlias       = (AccountName "/")? DatasetName
    DatasetAliasRemote = RepoName "/" (AccountName "/")? DatasetName
    DatasetId          = "did:odf:" Multibase
    DatasetName = AccountName = RepoName = Hostname
    Hostname  = Subdomain ("." Subdomain)*
    Subdomain = [a-zA-Z0-9]+ ("-" [a-zA-Z0-9]+)*
    Url       = Scheme "://" [^\\n]+
    Scheme    = [a-zA-Z0-9]+ ("+" [a-zA-Z0-9]+)*

Names are case-insensitive: ``NY-NewYork`` equals (and hashes like) ``ny-newyork``, but keeps its
spelling for display. Every type validates on construction, so an invalid one cannot exist, and
``parse(str(x)) == x``. Handles (an ID together with an alias, after resolution) display as
their alias, like the reference implementation.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import InitVar, dataclass
from typing import ClassVar, Self, TypeVar
from urllib.parse import urlsplit

from common.odf.errors import ValidationError
from common.odf.identity import DID_ODF_PREFIX, DatasetID
from common.odf.record import positional_record

_SUBDOMAIN = r"[A-Za-z0-9]+(?:-[A-Za-z0-9]+)*"
HOSTNAME_PATTERN = rf"{_SUBDOMAIN}(?:\.{_SUBDOMAIN})*"
URL_PATTERN = r"[A-Za-z0-9]+(?:\+[A-Za-z0-9]+)*://[^\n]+"
_HOSTNAME = re.compile(HOSTNAME_PATTERN)
_URL = re.compile(URL_PATTERN)
_HOSTNAME_CHARS = re.compile(r"[A-Za-z0-9.-]")
_REMOTE_FORMS = "expected 'repo/name' or 'repo/account/name'"


def _invalid(text: str, kind: str, reason: str) -> ValidationError:
    return ValidationError(f"{text!r} is not a valid {kind}: {reason}")


def _hostname_problem(text: str) -> str:
    """Why ``text`` is not a Hostname, in words."""
    if not text:
        return "it is empty"
    for i, ch in enumerate(text):
        if not _HOSTNAME_CHARS.fullmatch(ch):
            return f"{ch!r} at position {i} is not allowed (use letters, digits, '-' and '.')"
    for part in text.split("."):
        if not part:
            return "it has an empty part (a leading, trailing or doubled '.')"
        if part.startswith("-") or part.endswith("-"):
            return f"part {part!r} starts or ends with '-'"
        if "--" in part:
            return f"part {part!r} has two '-' in a row"
    return "it does not match the Hostname grammar"  # pragma: no cover - all cases named above


# -- names ----------------------------------------------------------------------------------


@positional_record
class _Name:
    """A Hostname-shaped, case-insensitive name that keeps its original spelling."""

    value: str
    KIND: ClassVar[str] = "Name"

    def __post_init__(self) -> None:
        if not isinstance(self.value, str) or not _HOSTNAME.fullmatch(self.value):
            text = self.value if isinstance(self.value, str) else repr(self.value)
            raise _invalid(text, self.KIND, _hostname_problem(text))

    @classmethod
    def parse(cls, text: str) -> Self:
        return cls(text)

    @property
    def key(self) -> str:
        """The lowercase form that equality, hashing and ordering use."""
        return self.value.lower()

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Name) and type(other) is type(self) and self.key == other.key

    def __hash__(self) -> int:
        return hash((self.KIND, self.key))

    def __lt__(self, other: _Name) -> bool:
        return self.key < other.key

    def __str__(self) -> str:
        return self.value

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.value!r})"


@positional_record
class DatasetName(_Name):
    """The name of a dataset, e.g. ``ca.bc.gov.covid19`` (recommended: reverse domain)."""

    KIND: ClassVar[str] = "DatasetName"


@positional_record
class AccountName(_Name):
    """The account owning datasets in a multi-tenant workspace or repository."""

    KIND: ClassVar[str] = "AccountName"


@positional_record
class RepoName(_Name):
    """The local name of a known remote repository."""

    KIND: ClassVar[str] = "RepoName"


_N = TypeVar("_N", bound=_Name)


def _parse_part(make: type[_N], text: str, whole: str, kind: str) -> _N:
    try:
        return make(text)
    except ValidationError as e:
        raise _invalid(whole, kind, e.reason) from None


def _parse_id(text: str, kind: str, whole: str | None = None) -> DatasetID:
    try:
        return DatasetID.from_did(text)
    except ValidationError as e:
        reason = e.reason.removeprefix(f"{text!r} is not a valid did:odf identifier: ")
        raise _invalid(whole or text, kind, reason) from None


# -- aliases and handles ----------------------------------------------------------------------


@positional_record
class DatasetAlias:
    """``name`` or ``account/name``: a dataset within one (local) workspace."""

    dataset_name: DatasetName
    account_name: AccountName | None = None

    @classmethod
    def parse(cls, text: str, *, kind: str = "DatasetAlias") -> DatasetAlias:
        """Parse ``name`` or ``account/name``; errors name ``kind`` as what was expected."""
        parts = text.split("/")
        if len(parts) > 2:
            raise _invalid(text, kind, "expected 'name' or 'account/name'")
        name = _parse_part(DatasetName, parts[-1], text, kind)
        account = _parse_part(AccountName, parts[0], text, kind) if len(parts) == 2 else None
        return cls(name, account)

    @property
    def is_multi_tenant(self) -> bool:
        return self.account_name is not None

    def as_remote(self, repo_name: RepoName) -> DatasetAliasRemote:
        return DatasetAliasRemote(repo_name, self.dataset_name, self.account_name)

    def __str__(self) -> str:
        if self.account_name is None:
            return str(self.dataset_name)
        return f"{self.account_name}/{self.dataset_name}"


@positional_record
class DatasetAliasRemote:
    """``repo/name`` or ``repo/account/name``: a dataset in a known remote repository."""

    repo_name: RepoName
    dataset_name: DatasetName
    account_name: AccountName | None = None

    @classmethod
    def parse(cls, text: str, *, kind: str = "DatasetAliasRemote") -> DatasetAliasRemote:
        """Parse ``repo/name`` or ``repo/account/name``."""
        parts = text.split("/")
        if len(parts) not in (2, 3):
            raise _invalid(text, kind, _REMOTE_FORMS)
        repo = _parse_part(RepoName, parts[0], text, kind)
        name = _parse_part(DatasetName, parts[-1], text, kind)
        account = _parse_part(AccountName, parts[1], text, kind) if len(parts) == 3 else None
        return cls(repo, name, account)

    @property
    def local_alias(self) -> DatasetAlias:
        return DatasetAlias(self.dataset_name, self.account_name)

    def __str__(self) -> str:
        return f"{self.repo_name}/{self.local_alias}"


@positional_record
class DatasetHandle:
    """A resolved local dataset: its ID and its alias. Displays as the alias."""

    id: DatasetID
    alias: DatasetAlias

    def __str__(self) -> str:
        return str(self.alias)


@positional_record
class DatasetHandleRemote:
    """A resolved remote dataset: its ID and its remote alias. Displays as the alias."""

    id: DatasetID
    alias: DatasetAliasRemote

    def __str__(self) -> str:
        return str(self.alias)


@positional_record
class DatasetIdRemote:
    """``did:odf:...`` or ``repo/did:odf:...``: a dataset ID, optionally in a named repository."""

    id: DatasetID
    repo_name: RepoName | None = None

    @classmethod
    def parse(cls, text: str, *, kind: str = "DatasetIdRemote") -> DatasetIdRemote:
        """Parse ``did:odf:...`` or ``repo/did:odf:...``."""
        if text.startswith(DID_ODF_PREFIX):
            return cls(_parse_id(text, kind))
        repo, _, did = text.partition("/")
        if not did.startswith(DID_ODF_PREFIX):
            raise _invalid(text, kind, "expected 'did:odf:...' or 'repo/did:odf:...'")
        return cls(_parse_id(did, kind, text), _parse_part(RepoName, repo, text, kind))

    def __str__(self) -> str:
        did = self.id.to_did()
        return did if self.repo_name is None else f"{self.repo_name}/{did}"


@dataclass(frozen=True, slots=True)
class DatasetUrl:
    """A dataset by URL: ``https://...``, ``odf+https://...``, ``file:///...``, ``s3://...``."""

    url: str
    kind: InitVar[str] = "DatasetUrl"

    def __post_init__(self, kind: str) -> None:
        if not _URL.fullmatch(self.url):
            raise _invalid(self.url, kind, "expected a URL 'scheme://...' on one line")
        try:
            urlsplit(self.url)
        except ValueError as e:
            raise _invalid(self.url, kind, str(e)) from None

    @classmethod
    def parse(cls, text: str) -> DatasetUrl:
        return cls(text)

    @property
    def scheme(self) -> str:
        """Lowercase scheme, e.g. ``odf+https``."""
        return self.url.split("://", 1)[0].lower()

    def __str__(self) -> str:
        return self.url


def _is_id_ref(text: str) -> bool:
    """``did:odf:...`` or ``something/did:odf:...``."""
    return text.startswith(DID_ODF_PREFIX) or text.partition("/")[2].startswith(DID_ODF_PREFIX)


# -- references -------------------------------------------------------------------------------


@positional_record
class DatasetRef:
    """A local dataset by ID (``did:odf:...``), alias (``[account/]name``) or resolved handle."""

    target: DatasetID | DatasetAlias | DatasetHandle

    @classmethod
    def parse(cls, text: str, *, kind: str = "DatasetRef") -> DatasetRef:
        """Parse ``did:odf:...``, ``name`` or ``account/name``."""
        if text.startswith(DID_ODF_PREFIX):
            return cls(_parse_id(text, kind))
        return cls(DatasetAlias.parse(text, kind=kind))

    @property
    def id(self) -> DatasetID | None:
        t = self.target
        return t if isinstance(t, DatasetID) else t.id if isinstance(t, DatasetHandle) else None

    @property
    def alias(self) -> DatasetAlias | None:
        t = self.target
        return (
            t if isinstance(t, DatasetAlias) else t.alias if isinstance(t, DatasetHandle) else None
        )

    def __str__(self) -> str:
        t = self.target
        return t.to_did() if isinstance(t, DatasetID) else str(t)


_RemoteTarget = DatasetIdRemote | DatasetAliasRemote | DatasetUrl | DatasetHandleRemote


@positional_record
class DatasetRefRemote:
    """A dataset in a remote repository: ``[repo/]did:odf:...``, ``repo/[account/]name``, a URL."""

    target: _RemoteTarget

    @classmethod
    def parse(cls, text: str, *, kind: str = "DatasetRefRemote") -> DatasetRefRemote:
        """Parse ``[repo/]did:odf:...``, ``repo/[account/]name`` or a URL."""
        if _is_id_ref(text):
            return cls(DatasetIdRemote.parse(text, kind=kind))
        if "://" in text:
            return cls(DatasetUrl(text, kind=kind))
        if text.count("/") not in (1, 2):
            raise _invalid(text, kind, f"{_REMOTE_FORMS}, '[repo/]did:odf:...' or a URL")
        return cls(DatasetAliasRemote.parse(text, kind=kind))

    @property
    def id(self) -> DatasetID | None:
        t = self.target
        return t.id if isinstance(t, DatasetIdRemote | DatasetHandleRemote) else None

    @property
    def alias(self) -> DatasetAliasRemote | None:
        t = self.target
        if isinstance(t, DatasetAliasRemote):
            return t
        return t.alias if isinstance(t, DatasetHandleRemote) else None

    @property
    def repo_name(self) -> RepoName | None:
        t = self.target
        if isinstance(t, DatasetIdRemote):
            return t.repo_name
        alias = self.alias
        return alias.repo_name if alias is not None else None

    @property
    def url(self) -> DatasetUrl | None:
        return self.target if isinstance(self.target, DatasetUrl) else None

    def __str__(self) -> str:
        return str(self.target)


@positional_record
class DatasetAliasAmbiguous:
    """``prefix/name``: an account's dataset in a multi-tenant workspace, or a repository's."""

    prefix: AccountName
    dataset_name: DatasetName

    def as_local(self) -> DatasetAlias:
        return DatasetAlias(self.dataset_name, self.prefix)

    def as_remote(self) -> DatasetAliasRemote:
        return DatasetAliasRemote(RepoName(self.prefix.value), self.dataset_name)

    def __str__(self) -> str:
        return f"{self.prefix}/{self.dataset_name}"


@positional_record
class DatasetRefAny:
    """Any reference, local or remote. ``a/b`` stays ambiguous until ``resolve``."""

    target: DatasetRef | DatasetRefRemote | DatasetAliasAmbiguous

    @classmethod
    def parse(cls, text: str) -> DatasetRefAny:
        kind = "DatasetRefAny"
        if text.startswith(DID_ODF_PREFIX) or ("/" not in text and "://" not in text):
            return cls(DatasetRef.parse(text, kind=kind))
        if _is_id_ref(text) or "://" in text or text.count("/") != 1:
            return cls(DatasetRefRemote.parse(text, kind=kind))
        prefix, name = text.split("/")
        return cls(
            DatasetAliasAmbiguous(
                _parse_part(AccountName, prefix, text, kind),
                _parse_part(DatasetName, name, text, kind),
            )
        )

    def resolve(self, is_repo: Callable[[RepoName], bool]) -> DatasetRef | DatasetRefRemote:
        """Local or remote; ``is_repo`` decides whether an ambiguous prefix names a repository."""
        t = self.target
        if not isinstance(t, DatasetAliasAmbiguous):
            return t
        remote = t.as_remote()
        if is_repo(remote.repo_name):
            return DatasetRefRemote(remote)
        return DatasetRef(t.as_local())

    def __str__(self) -> str:
        return str(self.target)
