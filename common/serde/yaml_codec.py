"""YAML manifests of ODF objects, in the reference implementation's exact form.

A manifest wraps its content with a kind and a version::

    kind: MetadataBlock          kind: DatasetSnapshot
    version: 2                   version: 1
    content: {...}               content: {...}

``content`` is the object's plain form (``common.serde.yaml_plain``: camelCase keys, unions
tagged with ``kind``). Reading accepts the JSON-compatible subset of YAML only
(``common.serde.yaml_document``); every problem is a ``ValidationError`` that names the source,
the line and the field path, e.g. ``dataset.yaml:14: metadata[2].read.separator: expected a
string, got integer 1``.
"""

from __future__ import annotations

from typing import Any, TypeVar

from common.odf.block import BLOCK_VERSION_WRITE, BLOCK_VERSIONS_READ, MetadataBlock
from common.odf.errors import UnsupportedVersionError, ValidationError
from common.odf.snapshot import DatasetSnapshot
from common.serde import yaml_document
from common.serde.yaml_plain import from_plain, to_plain
from common.serde.yaml_scalars import describe, type_error

__all__ = [
    "dump_block_manifest",
    "dump_snapshot",
    "dump_yaml",
    "from_plain",
    "load_block_manifest",
    "load_block_manifest_versioned",
    "load_object",
    "load_snapshot",
    "load_snapshots",
    "to_plain",
]

T = TypeVar("T")

BLOCK_KIND = "MetadataBlock"
SNAPSHOT_KIND = "DatasetSnapshot"
SNAPSHOT_VERSION = 1
_MANIFEST_KEYS = ("kind", "version", "content")


def load_block_manifest(text: str, *, source: str = "<string>") -> MetadataBlock:
    """A MetadataBlock from its YAML manifest (``kind: MetadataBlock``, version 2 or 3)."""
    return load_block_manifest_versioned(text, source=source)[0]


def load_block_manifest_versioned(
    text: str, *, source: str = "<string>"
) -> tuple[MetadataBlock, int]:
    """A MetadataBlock and the version its YAML manifest declares."""
    document = yaml_document.load_one(text, source)
    version = _check_manifest(document, BLOCK_KIND, BLOCK_VERSIONS_READ)
    return _content(document, MetadataBlock), version


def dump_block_manifest(block: MetadataBlock, *, version: int = BLOCK_VERSION_WRITE) -> str:
    """The YAML manifest of a block, byte for byte as the reference writes it."""
    return dump_yaml({"kind": BLOCK_KIND, "version": version, "content": to_plain(block)})


def load_snapshot(text: str, *, source: str = "<string>") -> DatasetSnapshot:
    """A DatasetSnapshot from a YAML manifest holding exactly one document."""
    document = yaml_document.load_one(text, source)
    _check_manifest(document, SNAPSHOT_KIND, (SNAPSHOT_VERSION,))
    return _content(document, DatasetSnapshot)


def load_snapshots(text: str, *, source: str = "<string>") -> list[DatasetSnapshot]:
    """Every DatasetSnapshot of a multi-document YAML stream (``---`` separated)."""
    snapshots = []
    for document in yaml_document.load_all(text, source):
        _check_manifest(document, SNAPSHOT_KIND, (SNAPSHOT_VERSION,))
        snapshots.append(_content(document, DatasetSnapshot))
    return snapshots


def dump_snapshot(snapshot: DatasetSnapshot) -> str:
    """The YAML manifest of a snapshot (``kind: DatasetSnapshot``, ``version: 1``)."""
    return dump_yaml(
        {"kind": SNAPSHOT_KIND, "version": SNAPSHOT_VERSION, "content": to_plain(snapshot)}
    )


def load_object(target: Any, text: str, *, source: str = "<string>") -> Any:
    """A model object (``target``: class, union type or union name) from a bare YAML document.

    For YAML with no manifest wrapper, such as engine requests and responses.
    """
    document = yaml_document.load_one(text, source)
    try:
        return from_plain(target, document.value)
    except ValidationError as e:
        raise document.locate(e) from None


def dump_yaml(value: Any) -> str:
    """A plain value (see ``to_plain``) as YAML text in the reference's style."""
    return yaml_document.dump(value)


def _check_manifest(document: yaml_document.Document, kind: str, versions: tuple[int, ...]) -> int:
    """Validate the manifest wrapper (kind, then version, then content); returns its version."""
    try:
        value = _manifest_mapping(document.value, kind)
        if value["kind"] != kind:
            raise ValidationError(
                f"expected manifest kind {kind!r}, got {describe(value['kind'])}", path="kind"
            )
        version = _manifest_version(value["version"], kind, versions)
        if "content" not in value:
            raise ValidationError(f"missing required field of the {kind} manifest", path="content")
        return version
    except ValidationError as e:
        raise document.locate(e) from None


def _manifest_mapping(value: Any, kind: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise type_error(f"a {kind} manifest (a mapping with kind, version, content)", value)
    for key in value:
        if key not in _MANIFEST_KEYS:
            raise ValidationError(
                "unknown manifest field, expected kind, version, content", path=key
            )
    for key in ("kind", "version"):
        if key not in value:
            raise ValidationError(f"missing required field of the {kind} manifest", path=key)
    return value


def _manifest_version(version: Any, kind: str, versions: tuple[int, ...]) -> int:
    if isinstance(version, bool) or not isinstance(version, int):
        raise type_error("an integer", version).at("version")
    if version not in versions:
        supported = ", ".join(str(v) for v in versions)
        raise UnsupportedVersionError(
            f"{kind} manifest version {version} is not supported (supported: {supported})",
            path="version",
        )
    return version


def _content(document: yaml_document.Document, target: type[T]) -> T:
    try:
        return from_plain(target, document.value["content"])
    except ValidationError as e:
        raise document.locate(e, within="content") from None
