"""DatasetSnapshot files for ``add``: which files, parsed all at once, created inputs first."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from common.odf.errors import ValidationError
from common.odf.events import SetTransform
from common.odf.snapshot import DatasetSnapshot
from coordinator.transform.graph import inputs_first

SNAPSHOT_SUFFIXES = (".yaml", ".yml")


@dataclass(frozen=True, slots=True)
class SnapshotSource:
    """A snapshot and where it was read from (named in errors)."""

    origin: str
    snapshot: DatasetSnapshot


def snapshot_files(paths: Sequence[Path], *, recursive: bool) -> list[Path]:
    """The snapshot files named by ``paths``; directories only with ``recursive``."""
    files = []
    for path in paths:
        if path.is_dir():
            if not recursive:
                raise ValidationError("is a directory (use --recursive)", path=str(path))
            files += sorted(
                p for p in path.rglob("*") if p.is_file() and p.suffix in SNAPSHOT_SUFFIXES
            )
        elif path.is_file():
            files.append(path)
        else:
            raise ValidationError("no such file", path=str(path))
    return files


def read_snapshots(files: Sequence[Path]) -> list[SnapshotSource]:
    """Parse every file first, so that one bad file adds nothing."""
    return [SnapshotSource(str(f), s) for f in files for s in _file_snapshots(f)]


def _file_snapshots(path: Path) -> list[DatasetSnapshot]:
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as e:
        reason = f"not UTF-8 text ({e.reason} at byte {e.start})"
        raise ValidationError(reason, path=str(path)) from None
    from common.serde.yaml_codec import load_snapshots  # only ``add`` reads snapshots

    snapshots = load_snapshots(text, source=str(path))
    if not snapshots:
        raise ValidationError("no DatasetSnapshot in the file (it is empty)", path=str(path))
    return snapshots


def creation_order(sources: Sequence[SnapshotSource]) -> list[SnapshotSource]:
    """Snapshots ordered so that inputs defined in the same batch are created first."""
    by_name: dict[str, SnapshotSource] = {}
    for s in sources:
        key = s.snapshot.name.lower()
        if key in by_name:
            raise ValidationError(f"dataset {s.snapshot.name!r} is defined twice", path="name")
        by_name[key] = s

    def upstream(s: SnapshotSource) -> Iterable[SnapshotSource]:
        found = (by_name.get(ref.lower()) for ref in _input_refs(s.snapshot))
        return [dep for dep in found if dep is not None]

    def name(s: SnapshotSource) -> str:
        return s.snapshot.name.lower()

    return inputs_first(sources, key=name, upstream=upstream, name=name)


def _input_refs(snapshot: DatasetSnapshot) -> list[str]:
    return [
        i.dataset_ref for e in snapshot.metadata if isinstance(e, SetTransform) for i in e.inputs
    ]
