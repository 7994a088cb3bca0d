"""Repository aliases and the remote each dataset was pulled from or pushed to.

- ``.odf/repos.json``: ``{"repos": {"NAME": "URL"}, "tokens": {"NAME": "TOKEN"}}``, names
  case-insensitive (``odf repo``); a repository's token (``odf repo add --token-file``) is
  sent to it when no ``--token-file``/``ODF_TOKEN`` is given; the file is written with mode
  0600;
- ``<dataset>/info/remotes.json``: ``{"pull": URL, "push": URL}``, the dataset's pull alias
  (where ``odf pull NAME`` updates it from) and push alias (where ``odf push NAME`` goes).
  Kept in the dataset's own directory, so it follows a rename and goes with a delete; the
  transfer protocols never copy ``info/``.

Both are rewritten atomically and read defensively: a damaged file is a clear error naming it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace

from common.odf.dataset_refs import RepoName
from common.odf.errors import NotFoundError, OdfError, ValidationError
from coordinator.dataset import durable
from coordinator.dataset.layout import DatasetLayout
from coordinator.dataset.provenance import REMOTES_FILE, read_object
from coordinator.sharing.remote_refs import RemoteLocation, parse_location
from coordinator.workspace import Workspace

REPOS_FILE = "repos.json"


class RepoRegistry:
    """The workspace's repository aliases."""

    def __init__(self, workspace: Workspace) -> None:
        self.path = workspace.odf_dir / REPOS_FILE

    def all(self) -> dict[RepoName, RemoteLocation]:
        found = {}
        for name, url in self._entries("repos"):
            if not isinstance(url, str):
                raise OdfError(f"{self.path}: repository {str(name)!r} is not NAME: URL")
            try:
                found[name] = parse_location(url, where=f"{self.path}: {name}")
            except ValidationError as e:
                raise OdfError(f"{self.path}: {e}") from None
        return found

    def tokens(self) -> dict[RepoName, str]:
        """The repositories' tokens (``odf repo add --token-file``)."""
        found = {}
        for name, token in self._entries("tokens"):
            if not isinstance(token, str) or not token.isascii() or not token.isprintable():
                raise OdfError(f"{self.path}: the token of {str(name)!r} is not one")
            found[name] = token
        return found

    def _entries(self, key: str) -> list[tuple[RepoName, object]]:
        """The entries of the mapping ``key`` of the file, by repository name."""
        entries = read_object(self.path).get(key, {})
        if not isinstance(entries, dict):
            raise OdfError(f"{self.path}: {key!r} is not a mapping")
        found = []
        for name, value in entries.items():
            try:
                found.append((RepoName.parse(name), value))
            except (ValidationError, TypeError) as e:
                raise OdfError(f"{self.path}: {e}") from None
        return found

    def token_for(self, location: RemoteLocation) -> str | None:
        """The token of the repository ``location`` is in (the longest URL that is it or a
        folder of it), if that repository has one."""
        tokens = self.tokens()
        best: tuple[int, str] | None = None
        for name, repo in self.all().items():
            base = repo.url.rstrip("/")
            inside = location.url == base or location.url.startswith(base + "/")
            if inside and name in tokens and (best is None or len(base) > best[0]):
                best = (len(base), tokens[name])
        return None if best is None else best[1]

    def add(self, name: str, url: str, token: str | None = None) -> tuple[RepoName, RemoteLocation]:
        repo = RepoName.parse(name)
        location = parse_location(url, where="URL")
        repos = self.all()
        if repo in repos:
            raise ValidationError(f"repository {str(repo)!r} already exists ({repos[repo]})")
        repos[repo] = location
        tokens = self.tokens()
        if token is not None:
            tokens[repo] = token
        self._save(repos, tokens)
        return repo, location

    def delete(self, name: str) -> None:
        repo = RepoName.parse(name)
        repos = self.all()
        if repo not in repos:
            raise NotFoundError(f"no repository named {name!r}")
        del repos[repo]
        tokens = self.tokens()
        tokens.pop(repo, None)
        self._save(repos, tokens)

    def _save(self, repos: dict[RepoName, RemoteLocation], tokens: dict[RepoName, str]) -> None:
        doc: dict[str, object] = {
            "repos": {str(k): v.url for k, v in sorted(repos.items(), key=lambda i: i[0])}
        }
        if tokens:
            doc["tokens"] = {str(k): v for k, v in sorted(tokens.items(), key=lambda i: i[0])}
        data = (json.dumps(doc, indent=2) + "\n").encode()
        durable.write_atomic(self.path, data, mode=0o600)
        self.path.chmod(0o600)  # a file written before tokens were kept


@dataclass(frozen=True, slots=True)
class Remotes:
    """A dataset's pull and push aliases."""

    pull: RemoteLocation | None = None
    push: RemoteLocation | None = None


def read_remotes(layout: DatasetLayout) -> Remotes:
    path = layout.info_dir / REMOTES_FILE
    doc = read_object(path)
    found = {}
    for key in ("pull", "push"):
        value = doc.get(key)
        if value is None:
            continue
        if not isinstance(value, str):
            raise OdfError(f"{path}: {key!r} is not a URL")
        try:
            found[key] = parse_location(value, where=f"{path}: {key}")
        except ValidationError as e:
            raise OdfError(str(e)) from None
    return Remotes(pull=found.get("pull"), push=found.get("push"))


def remember(
    layout: DatasetLayout,
    *,
    pull: RemoteLocation | None = None,
    push: RemoteLocation | None = None,
) -> None:
    """Record the dataset's pull and/or push alias (the others are kept)."""
    current = read_remotes(layout)
    if pull is not None:
        current = replace(current, pull=pull)
    if push is not None:
        current = replace(current, push=push)
    _write_remotes(layout, current)


def forget_pull(layout: DatasetLayout) -> None:
    """Drop the dataset's pull alias: it is no longer a clone (``odf detach``)."""
    _write_remotes(layout, replace(read_remotes(layout), pull=None))


def _write_remotes(layout: DatasetLayout, current: Remotes) -> None:
    doc = {
        "pull": current.pull.url if current.pull else None,
        "push": current.push.url if current.push else None,
    }
    layout.info_dir.mkdir(parents=True, exist_ok=True)
    durable.write_atomic(
        layout.info_dir / REMOTES_FILE, (json.dumps(doc, indent=2) + "\n").encode()
    )
