"""``odf data``: commands on data files.

``odf data hash FILE`` prints the logical hash (``arrow0-sha3-256``) of the records of a
Parquet file; with ``--physical`` the physical hash (``sha3-256``) of the file's bytes.
"""

from __future__ import annotations

import argparse
from typing import Any

from common.hashing import logical_hash_parquet, physical_hash_file
from coordinator.cli.arguments import command_group


def register(subparsers: Any) -> None:
    commands = command_group(subparsers, "data", "commands on data files")

    hash_parser = commands.add_parser(
        "hash",
        help="print the logical hash of a Parquet file's records",
        description="Print the logical hash (arrow0-sha3-256, multibase base16) of the records "
        "of a Parquet file, or with --physical the SHA3-256 multihash of the file itself.",
    )
    hash_parser.add_argument("file", metavar="FILE", help="a Parquet file")
    hash_parser.add_argument(
        "--physical", action="store_true", help="hash the file's bytes instead of its records"
    )
    hash_parser.set_defaults(handler=run_hash)


def run_hash(args: argparse.Namespace) -> int:
    value = physical_hash_file(args.file) if args.physical else logical_hash_parquet(args.file)
    print(value.to_multibase())
    return 0
