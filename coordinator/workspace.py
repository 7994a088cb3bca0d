"""The workspace: a ``.odf/`` directory holding datasets, their keys and private state.

Layout::

    .odf/
      version                 format of this directory ("1")
      datasets/<name>/        one dataset each, in the ODF dataset layout
      keys/<dataset id>.pem   private ed25519 key of each dataset created here (0600)
      lock                    flock'd while datasets are created or deleted

Commands find the workspace by walking up from the working directory, like git.
Dataset names are case-insensitive: ``Foo`` and ``foo`` are the same dataset.
"""

from __future__ import annotations

import fcntl
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from common.logs import get_logger
from common.odf.errors import NotFoundError, OdfError, ValidationError
from coordinator.dataset.errors import AlreadyExistsError, DatasetNotFoundError, did_you_mean
from coordinator.tempdirs import remove_tree

if TYPE_CHECKING:
    from common.odf.identity import DatasetID
    from common.odf.snapshot import DatasetSnapshot
    from coordinator.dataset.dataset import Dataset

log = get_logger(__name__)

WORKSPACE_DIR = ".odf"
WORKSPACE_VERSION = "1"
_CREATING = ".creating-"
_DELETING = ".deleting-"
_ABANDONED_AFTER_SECONDS = 3600.0


class Workspace:
    """A directory with an ``.odf/`` workspace in it."""

    def __init__(self, root: Path) -> None:
        self.root = root
        """The directory that contains ``.odf/``."""
        self.odf_dir = root / WORKSPACE_DIR
        self.datasets_dir = self.odf_dir / "datasets"
        self.keys_dir = self.odf_dir / "keys"
        self.scratch_dir = self.odf_dir / "scratch"
        """Short-lived files an engine may see (query results, uploads); never the keys."""

    def __repr__(self) -> str:
        return f"Workspace({str(self.root)!r})"

    # --- finding and creating -------------------------------------------------------------

    @classmethod
    def find(cls, start: Path | None = None) -> Workspace:
        """The workspace containing ``start`` (default: the working directory)."""
        here = (start if start is not None else Path.cwd()).resolve()
        for directory in (here, *here.parents):
            if (directory / WORKSPACE_DIR / "version").is_file():
                return cls(directory)
        raise NotFoundError("not inside an odf workspace (run `odf init`)")

    @classmethod
    def init(cls, path: Path, *, exist_ok: bool = False) -> Workspace:
        """Create a workspace in ``path``; with ``exist_ok``, an existing one is fine."""
        ws = cls(path.resolve())
        if (ws.odf_dir / "version").is_file():
            if exist_ok:
                return ws
            raise AlreadyExistsError(f"{ws.odf_dir} already exists")
        ws.datasets_dir.mkdir(parents=True, exist_ok=True)
        ws.keys_dir.mkdir(mode=0o700, exist_ok=True)
        os.chmod(ws.keys_dir, 0o700)
        (ws.odf_dir / "version").write_text(WORKSPACE_VERSION + "\n")
        return ws

    # --- datasets ---------------------------------------------------------------------------

    def list_datasets(self) -> list[Dataset]:
        """All datasets, sorted by name (case-insensitively)."""
        return [_dataset(p, alias=p.name) for p in self.dataset_dirs()]

    def dataset_dirs(self) -> list[Path]:
        """The directory of each dataset (named as the dataset), sorted by name
        (case-insensitively); without opening any (the model is not even imported)."""
        if not self.datasets_dir.is_dir():
            return []
        entries = [
            p for p in self.datasets_dir.iterdir() if p.is_dir() and not p.name.startswith(".")
        ]
        return sorted(entries, key=lambda p: p.name.lower())

    def open_dataset(self, ref: str) -> Dataset:
        """The dataset named ``ref`` (case-insensitive) or with the ``did:odf`` id ``ref``."""
        path = self.dataset_path(ref)
        return _dataset(path, alias=path.name)

    def dataset_path(self, ref: str) -> Path:
        """The directory of the dataset named ``ref`` (case-insensitive; the directory is
        named as the dataset) or with the ``did:odf`` id ``ref``."""
        from common.odf.dataset_refs import DatasetRef

        parsed = DatasetRef.parse(ref)
        if parsed.id is not None:
            for ds in self.list_datasets():
                if ds.state().id == parsed.id:
                    return ds.layout.root
            raise DatasetNotFoundError(ref)
        if parsed.alias is not None and parsed.alias.account_name is not None:
            raise DatasetNotFoundError(ref)
        path = self._path_of_name(ref)
        if path is None:
            raise DatasetNotFoundError(ref, [p.name for p in self.dataset_dirs()])
        return path

    def create_dataset(
        self, snapshot: DatasetSnapshot, *, system_time: datetime | None = None
    ) -> Dataset:
        """A new dataset from a snapshot: a Seed with a fresh identity, then its events.

        The dataset's private key is stored in ``.odf/keys/`` (readable by its owner only).
        The dataset appears all at once, complete, or not at all.
        """
        name = _dataset_name(snapshot.name)
        if self._path_of_name(name) is not None:
            raise AlreadyExistsError(f"dataset {name!r} already exists")
        from common.odf.events import Seed
        from coordinator.dataset.snapshot_events import check_snapshot_chain, snapshot_events

        events = snapshot_events(snapshot, self._resolve_input)
        from common.odf.keys import generate_dataset_key  # the crypto library, only here

        pem, dataset_id = generate_dataset_key()
        seed = Seed(dataset_id=dataset_id, dataset_kind=snapshot.kind)
        when = system_time if system_time is not None else datetime.now(UTC)
        check_snapshot_chain(seed, events, when)
        self.datasets_dir.mkdir(parents=True, exist_ok=True)
        self.clean_leftovers()
        staging = self.datasets_dir / f"{_CREATING}{os.getpid()}-{os.urandom(6).hex()}"
        key_path = self._key_path(dataset_id)
        try:
            _dataset(staging).commit_events([seed, *events], expected_head=None, system_time=when)
            _write_private(key_path, pem)
            with self._lock():
                if self._path_of_name(name) is not None:
                    raise AlreadyExistsError(f"dataset {name!r} already exists")
                final = self.datasets_dir / name
                os.rename(staging, final)
        except BaseException:
            remove_tree(staging)
            key_path.unlink(missing_ok=True)
            raise
        return _dataset(final, alias=name)

    @contextmanager
    def preparing_dataset(self) -> Iterator[Path]:
        """A fresh hidden directory to build a dataset in (e.g. a clone), then ``adopt``
        it; removed at the end unless adopted. Killed processes' ones are cleaned later."""
        self.datasets_dir.mkdir(parents=True, exist_ok=True)
        self.clean_leftovers()
        staging = self.datasets_dir / f"{_CREATING}{os.getpid()}-{os.urandom(6).hex()}"
        staging.mkdir()
        try:
            yield staging
        finally:
            remove_tree(staging)  # a no-op once adopted (renamed away)

    def adopt_dataset(self, prepared: Path, name: str) -> Dataset:
        """Make the dataset built in ``prepared`` the workspace's dataset ``name``, at once;
        refused when the name or the dataset id is taken."""
        name = _dataset_name(name)
        dataset_id = _dataset(prepared).id
        with self._lock():
            if self._path_of_name(name) is not None:
                raise AlreadyExistsError(f"dataset {name!r} already exists")
            same = [d.alias for d in self.list_datasets() if _has_id(d, dataset_id)]
            if same:
                raise AlreadyExistsError(
                    f"dataset {same[0]!r} already has the id {dataset_id.to_did()}"
                )
            final = self.datasets_dir / name
            os.rename(prepared, final)
        return _dataset(final, alias=name)

    def delete_dataset(self, ref: str) -> None:
        """Delete a dataset and its key; refused while other datasets take it as input."""
        ds = self.open_dataset(ref)
        dataset_id = ds.state().id
        with self._lock():
            dependents = [d.alias for d in self.list_datasets() if _uses(d, dataset_id)]
            if dependents:
                raise OdfError(
                    f"dataset {ds.alias!r} is an input of {', '.join(sorted(dependents))};"
                    " delete those first"
                )
            trash = self.datasets_dir / f"{_DELETING}{os.urandom(6).hex()}"
            os.rename(ds.layout.root, trash)
        remove_tree(trash)
        if dataset_id is not None:
            self._key_path(dataset_id).unlink(missing_ok=True)

    def rename_dataset(self, ref: str, new_name: str) -> Dataset:
        """Give a dataset a new name. Its id, key and chain stay: dependents, which refer to
        their inputs by id (and to the data by their own query aliases), keep working."""
        ds = self.open_dataset(ref)
        name = _dataset_name(new_name)
        with self._lock():
            existing = self._path_of_name(name)
            if existing is not None and existing != ds.layout.root:
                raise AlreadyExistsError(f"dataset {name!r} already exists")
            final = self.datasets_dir / name
            os.rename(ds.layout.root, final)
        return _dataset(final, alias=name)

    def clean_leftovers(self) -> None:
        """Remove half-created and half-deleted dataset directories of dead processes."""
        if not self.datasets_dir.is_dir():
            return
        now = time.time()
        for p in self.datasets_dir.iterdir():
            if p.name.startswith(_DELETING) or (
                p.name.startswith(_CREATING) and now - p.lstat().st_mtime > _ABANDONED_AFTER_SECONDS
            ):
                remove_tree(p)  # a symbolic link is unlinked, never followed

    def key_path(self, dataset: Dataset) -> Path:
        """Where the private key of a dataset created in this workspace is kept."""
        return self._key_path(dataset.id)

    # --- helpers -----------------------------------------------------------------------------

    def _key_path(self, dataset_id: DatasetID) -> Path:
        return self.keys_dir / f"{dataset_id.to_multibase()}.pem"

    def _path_of_name(self, name: str) -> Path | None:
        wanted = name.lower()
        return next((p for p in self.dataset_dirs() if p.name.lower() == wanted), None)

    def _resolve_input(self, ref: str) -> tuple[DatasetID, str]:
        try:
            ds = self.open_dataset(ref)
        except DatasetNotFoundError:
            known = [p.name for p in self.dataset_dirs()]
            raise ValidationError(
                f"input dataset {ref!r} not found in the workspace{did_you_mean(ref, known)}"
            ) from None
        return ds.id, ds.alias

    @contextmanager
    def _lock(self) -> Iterator[None]:
        fd = os.open(self.odf_dir / "lock", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)


def _dataset_name(alias: str) -> str:
    """The dataset name of a snapshot's ``name`` (a single-tenant DatasetAlias)."""
    from common.odf.dataset_refs import DatasetAlias

    try:
        parsed = DatasetAlias.parse(alias)
    except ValidationError as e:
        raise e.at("name") from None
    if parsed.account_name is not None:
        raise ValidationError(
            f"{alias!r}: account names are not supported in a local workspace", path="name"
        )
    return str(parsed.dataset_name)


def _dataset(root: Path, *, alias: str | None = None) -> Dataset:
    from coordinator.dataset.dataset import Dataset  # the FlatBuffers model: only when opened

    return Dataset(root, alias=alias)


def _uses(ds: Dataset, dataset_id: DatasetID | None) -> bool:
    transform = ds.state().transform
    if transform is None or dataset_id is None:
        return False
    return any(i.dataset_ref == dataset_id.to_did() for i in transform.inputs)


def _has_id(ds: Dataset, dataset_id: DatasetID) -> bool:
    try:
        return ds.state().id == dataset_id
    except OdfError:  # a damaged dataset is not this one
        return False


def _write_private(path: Path, data: bytes) -> None:
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
