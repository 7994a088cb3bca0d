"""Data hashes of ODF: physical (SHA3-256 of a file) and logical (arrow-digest of records)."""

from common.hashing.data_file import DataFileDigest, digest_data_file
from common.hashing.data_types import UnsupportedTypeError
from common.hashing.logical import logical_hash, logical_hash_parquet
from common.hashing.physical import PhysicalHasher, physical_hash_bytes, physical_hash_file
from common.hashing.record_digest import LogicalHasher

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
