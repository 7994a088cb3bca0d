"""``odf block``: hash and decode single metadata blocks.

- ``odf block hash FILE``: the block hash (``f1620...``) of a YAML block manifest, i.e. the
  SHA3-256 multihash of its FlatBuffers encoding at the manifest's version.
- ``odf block hash --binary FILE``: the hash of a stored binary block, computed over its bytes
  as they are (after checking that they decode).
- ``odf block decode FILE``: a binary block printed as its YAML manifest, with the version
  the binary manifest has; hashing that YAML gives the binary's hash back whenever the block
  re-encodes to the same bytes (not so for blocks with sub-microsecond timestamps).

``FILE`` may be ``-`` for standard input.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from common.odf.block import MetadataBlock
from common.odf.errors import ValidationError
from common.serde import flatbuffers_codec, yaml_codec
from coordinator.cli.arguments import command_group

STDIN = "-"


def register(subparsers: Any) -> None:
    commands = command_group(
        subparsers, "block", "metadata blocks: hash and decode", description="Metadata blocks."
    )

    hash_parser = commands.add_parser(
        "hash",
        help="print the hash of a block",
        description="Print the block hash (multihash, multibase base16) of a block manifest.",
    )
    hash_parser.add_argument("file", metavar="FILE", help="YAML block manifest, - for stdin")
    hash_parser.add_argument(
        "--binary",
        action="store_true",
        help="FILE is a binary (FlatBuffers) block; its bytes are hashed as they are",
    )
    hash_parser.set_defaults(handler=hash_command)

    decode_parser = commands.add_parser(
        "decode",
        help="print a binary block as YAML",
        description="Print a binary (FlatBuffers) block as its YAML manifest.",
    )
    decode_parser.add_argument("file", metavar="FILE", help="binary block, - for stdin")
    decode_parser.set_defaults(handler=decode_command)


def hash_command(args: argparse.Namespace) -> int:
    source, data = _read(args.file)
    if args.binary:
        _decode_binary(source, data)
        digest = flatbuffers_codec.block_hash(data)
    else:
        text = _text(source, data)
        block, version = yaml_codec.load_block_manifest_versioned(text, source=source)
        manifest = _at_source(
            source, lambda b: flatbuffers_codec.encode_block(b, version=version), block
        )
        digest = flatbuffers_codec.block_hash(manifest)
    print(digest.to_multibase())
    return 0


def decode_command(args: argparse.Namespace) -> int:
    source, data = _read(args.file)
    block = _decode_binary(source, data)
    version, _ = flatbuffers_codec.read_manifest(data)
    sys.stdout.write(yaml_codec.dump_block_manifest(block, version=version))
    return 0


def _read(file: str) -> tuple[str, bytes]:
    """The name to show in messages and the bytes of ``file`` (``-``: standard input)."""
    if file == STDIN:
        return "<stdin>", sys.stdin.buffer.read()
    return file, Path(file).read_bytes()


def _decode_binary(source: str, data: bytes) -> MetadataBlock:
    try:
        block: MetadataBlock = _at_source(source, flatbuffers_codec.decode_block, data)
    except ValidationError as e:
        if data.lstrip().startswith(b"kind:"):
            raise type(e)(f"{e.reason} (this looks like a YAML manifest)", path=e.path) from None
        raise
    return block


def _text(source: str, data: bytes) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise ValidationError(
            "not a UTF-8 text file; for a binary block use --binary", path=source
        ) from None


def _at_source(source: str, convert: Any, value: Any) -> Any:
    """``convert(value)`` with any validation error prefixed by the source name."""
    try:
        return convert(value)
    except ValidationError as e:
        where = f"{source}: {e.path}" if e.path else source
        raise type(e)(e.reason, path=where) from None
