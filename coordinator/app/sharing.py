"""Use cases of sharing: repositories, pulling remote datasets, pushing local ones.

Always run in the calling process (the daemon does not take part): a transfer reads and
writes dataset directories with the same atomic commits as any other writer, under the
dataset's writer lock, so a daemon serving the workspace sees a pulled head move like any
other commit.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from urllib.parse import quote

from common.odf.dataset_refs import DatasetName
from common.odf.errors import NotFoundError, OdfError, ValidationError
from common.odf.events import Seed
from common.odf.identity import DatasetID
from coordinator.dataset import AlreadyExistsError, Dataset
from coordinator.dataset.provenance import record_detached, record_trusted, source_commands
from coordinator.dataset.writer_locks import LOCKS_DIR, WriterLocks
from coordinator.sharing.errors import RemoteError
from coordinator.sharing.remote_refs import SMART_SCHEMES, RemoteLocation, looks_remote, resolve
from coordinator.sharing.repos import RepoRegistry, forget_pull, read_remotes, remember
from coordinator.sharing.smart_push_messages import TOKEN_HINT
from coordinator.sharing.transfer import (
    Options,
    Outcome,
    Plan,
    SyncResult,
    open_source,
    sync,
)
from coordinator.sharing.transport_file import FileSource
from coordinator.tempdirs import remove_tree
from coordinator.workspace import Workspace


@dataclass(frozen=True, slots=True)
class Transferred:
    """One dataset pulled or pushed: its local name, the remote, what moved."""

    dataset: str
    remote: RemoteLocation
    result: SyncResult
    cloned: bool = False


class Sharing:
    def __init__(self, workspace: Workspace, writers: WriterLocks | None = None) -> None:
        self.workspace = workspace
        self.repos = RepoRegistry(workspace)
        self.writers = writers or WriterLocks(workspace.odf_dir / LOCKS_DIR)
        """Held on a local dataset while it is updated from its remote."""

    # --- pull ---------------------------------------------------------------------------------

    def cloned(self, ds: Dataset) -> RemoteLocation | None:
        """Where ``ds`` was pulled from, if it was (its pull alias)."""
        return read_remotes(ds.layout).pull

    def pull_remote(self, ref: str, options: Options, *, as_name: str | None = None) -> Transferred:
        """``odf pull URL|REPO/NAME [--as NAME]``: clone, or update the local dataset of that
        name (which must be the same dataset: a foreign chain is refused)."""
        resolved = resolve(ref, self.repos.all())
        name = DatasetName.parse(as_name) if as_name is not None else resolved.default_name
        if name is None:
            raise ValidationError(
                f"{ref!r}: its last segment is not a dataset name; give one with --as NAME"
            )
        return self._pull_location(resolved.location, str(name), options)

    def _pull_location(
        self,
        location: RemoteLocation,
        name: str,
        options: Options,
        expected: DatasetID | None = None,
    ) -> Transferred:
        """Clone ``location`` as ``name`` or update it; ``expected``: the id the dataset must
        have (checked before a clone is adopted, so a wrong one leaves nothing behind)."""
        try:
            existing = self.workspace.open_dataset(name)
        except NotFoundError:
            existing = None
        repo_token = self.repos.token_for(location) if options.trust.token is None else None
        if repo_token is not None:
            options = replace(options, trust=replace(options.trust, token=repo_token))
        source = open_source(location, options)
        try:
            if existing is not None:
                with self.writers.hold([existing], "pull"):
                    result = sync(existing, source, existing.alias, options)
                remember(existing.layout, pull=location)
                return Transferred(existing.alias, location, result)
            with self.workspace.preparing_dataset() as prepared:
                check = partial(self._check_clone, location, expected)
                result = sync(Dataset(prepared, alias=name), source, name, options, check)
                remember(Dataset(prepared).layout, pull=location)
                ds = self.workspace.adopt_dataset(prepared, name)
            return Transferred(ds.alias, location, result, cloned=True)
        finally:
            source.close()

    def _check_clone(
        self, location: RemoteLocation, expected: DatasetID | None, planned: Plan
    ) -> None:
        """Before anything is downloaded: the remote is the dataset ``expected`` (when
        given), and no dataset of the workspace has its id already."""
        first = planned.new_blocks[0].block.event if planned.new_blocks else None
        if not isinstance(first, Seed):
            return  # the chain checks refuse it
        found = first.dataset_id
        if expected is not None and found != expected:
            raise OdfError(
                f"{location} is dataset {found.to_did()}, not the input {expected.to_did()} it"
                " was expected to be: nothing cloned"
            )
        try:
            existing = self.workspace.open_dataset(found.to_did())
        except NotFoundError:
            return
        raise AlreadyExistsError(
            f"dataset {existing.alias!r} is already this dataset ({found.to_did()}): update it"
            f" with `odf pull {existing.alias}`; nothing downloaded"
        )

    def pull_inputs(self, name: str, options: Options) -> Iterator[Transferred]:
        """The inputs the clone ``name`` reads that the workspace lacks, cloned from the
        repository it came from (each at the sibling URL named by the alias its query reads
        it by, and checked to be the dataset the chain names), and their inputs in turn."""
        from coordinator.transform.graph import input_refs

        todo, seen = [name], set()
        while todo:
            ds = self.workspace.open_dataset(todo.pop(0))
            remote = self.cloned(ds)
            if remote is None:
                continue  # not a clone: its inputs are the workspace's own business
            repository = RemoteLocation(remote.url.rsplit("/", 1)[0])
            for did, alias in input_refs(ds):
                if did in seen:
                    continue
                seen.add(did)
                try:
                    self.workspace.open_dataset(did)
                    continue  # already here (under any name)
                except NotFoundError:
                    pass
                try:
                    input_name = str(DatasetName.parse(alias))
                except ValidationError:
                    raise ValidationError(
                        f"input {alias!r} of {ds.alias!r} is not a dataset name: pull it"
                        f" yourself (`odf pull {repository}/NAME`)"
                    ) from None
                done = self._pull_location(
                    repository.child(quote(input_name)),
                    input_name,
                    options,
                    expected=DatasetID.from_did(did),
                )
                yield done
                todo.append(done.dataset)

    def pull_cloned(self, name: str, options: Options) -> Transferred:
        """``odf pull NAME`` of a dataset pulled from a remote: update it from there."""
        ds = self.workspace.open_dataset(name)
        remote = self.cloned(ds)
        if remote is None:
            raise OdfError(f"dataset {ds.alias!r} was not pulled from a remote")
        source = open_source(remote, options)
        try:
            with self.writers.hold([ds], "pull"):
                return Transferred(ds.alias, remote, sync(ds, source, ds.alias, options))
        finally:
            source.close()

    def detach(self, name: str) -> RemoteLocation:
        """``odf detach NAME``: a clone becomes a local dataset (its source and transform may
        run here from now on; commands its polling source runs must be trusted first). Where
        it was cloned from."""
        ds = self.workspace.open_dataset(name)
        remote = self.cloned(ds)
        if remote is None:
            raise ValidationError(f"dataset {ds.alias!r} is not a clone: nothing to detach")
        record_detached(ds.layout, remote.url)
        forget_pull(ds.layout)
        return remote

    def commands_to_trust(self, name: str) -> list[str]:
        """The commands the dataset's polling source would run here (``odf trust``)."""
        ds = self.workspace.open_dataset(name)
        source = ds.state().polling_source
        return source_commands(source) if source is not None else []

    def trust(self, name: str, commands: list[str]) -> None:
        """Trust exactly ``commands``, as shown to the user; refused if the source changed."""
        if commands != self.commands_to_trust(name):
            raise OdfError(f"the polling source of {name!r} changed: review it again")
        record_trusted(self.workspace.open_dataset(name).layout, commands)

    # --- push -----------------------------------------------------------------------------------

    def push(
        self, name: str, options: Options, *, to: str | None = None, token: str | None = None
    ) -> Transferred:
        """``odf push NAME [--to URL|REPO/NAME] [--force]``: the target receives what it lacks;
        its head moves by compare-and-swap. The target is remembered for the next push.
        ``token``: the smart server's token (a push to ``odf+http(s)://`` needs it)."""
        ds = self.workspace.open_dataset(name)
        if to is not None:
            if not looks_remote(to):
                raise ValidationError(f"{to!r}: expected a URL or REPO/NAME", path="--to")
            target = resolve(to, self.repos.all()).location
        else:
            remembered = read_remotes(ds.layout).push
            if remembered is None:
                raise ValidationError(
                    f"dataset {ds.alias!r} has no push target yet: give --to URL|REPO/NAME"
                )
            target = remembered
        if ds.head() is None:
            raise OdfError(f"dataset {ds.alias!r} has no blocks to push")
        if target.scheme in SMART_SCHEMES:
            token = token or self.repos.token_for(target)
            if token is None:
                raise ValidationError(
                    f"{target}: a push to a smart server needs its token: {TOKEN_HINT}"
                )
            from coordinator.sharing.smart_push_client import push_smart  # websockets: when needed

            smart = push_smart(ds, target, token, options)
            remember(ds.layout, push=target)
            return Transferred(ds.alias, target, smart)
        if not target.is_file:
            raise RemoteError(
                f"{target}: pushing is supported to file:// and odf+http(s):// (http is read-only)"
            )
        source = FileSource(RemoteLocation(f"file://{ds.layout.root}"), options.limits)
        result = _push_to_directory(Path(target.file_path()), source, str(target), options)
        if result.outcome is Outcome.RECEIVER_AHEAD:
            raise OdfError(
                f"{target}: its head {result.old_head} is ahead of dataset {ds.alias!r} (head"
                f" {ds.head()}): pull first, or --force to drop its extra blocks"
            )
        remember(ds.layout, push=target)
        return Transferred(ds.alias, target, result)


def _push_to_directory(path: Path, source: FileSource, what: str, options: Options) -> SyncResult:
    """Into an existing dataset directory, or a new one that appears all at once."""
    if path.is_symlink():
        raise RemoteError(f"{what}: is a symbolic link")
    if path.is_dir() and any(path.iterdir()):
        return sync(Dataset(path), source, what, options)
    path.parent.mkdir(parents=True, exist_ok=True)
    prepared = path.parent / f".creating-{os.getpid()}-{secrets.token_hex(6)}"
    prepared.mkdir()
    try:
        result = sync(Dataset(prepared), source, what, options)
        os.rename(prepared, path)  # onto nothing or an empty directory, atomically
    except OSError as e:
        raise RemoteError(f"{what}: {e.strerror or e}") from None
    finally:
        remove_tree(prepared)
    return result
