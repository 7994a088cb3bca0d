"""Data hashes of ODF: physical (SHA3-256 of a file) and logical (arrow-digest of records).

The names are imported when first used (PEP 562): ``physical`` (hashlib only) is then
importable without pyarrow and numpy, which the logical hash needs (CLI start time; a one-shot
``odf pull`` imports those while the engine works).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from common.lazy_exports import lazy_exports

if TYPE_CHECKING:
    from common.hashing.data_file import DataFileDigest, digest_data_file
    from common.hashing.data_types import UnsupportedTypeError
    from common.hashing.logical import logical_hash, logical_hash_parquet
    from common.hashing.physical import PhysicalHasher, physical_hash_bytes, physical_hash_file
    from common.hashing.record_digest import LogicalHasher

_WHERE = {
    "DataFileDigest": "data_file",
    "LogicalHasher": "record_digest",
    "PhysicalHasher": "physical",
    "UnsupportedTypeError": "data_types",
    "digest_data_file": "data_file",
    "logical_hash": "logical",
    "logical_hash_parquet": "logical",
    "physical_hash_bytes": "physical",
    "physical_hash_file": "physical",
}

__all__ = [
    "DataFileDigest",
    "LogicalHasher",
    "PhysicalHasher",
    "UnsupportedTypeError",
    "digest_data_file",
    "logical_hash",
    "logical_hash_parquet",
    "physical_hash_bytes",
    "physical_hash_file",
]

__getattr__ = lazy_exports(__name__, _WHERE, globals())
