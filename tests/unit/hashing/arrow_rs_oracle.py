"""The reference's logical hash of a Parquet file, computed by arrow-rs's reader itself.

The ``datafusion`` package reads Parquet with arrow-rs and exports its batches to pyarrow
through the C data interface, buffers as they are (the slots of null rows included). The
literal model of arrow-digest (``reference_model``) over those batches is what kamu computes,
except that DataFusion's scan cuts batches at row groups where kamu's reader spans them
(``common.hashing.reader_plan``). Modules importing this one are skipped without datafusion.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from .reference_model import RecordDigest

datafusion = pytest.importorskip(
    "datafusion", reason="datafusion (the dev extra) reads Parquet with arrow-rs: the oracle"
)

BATCH_ROWS = 10_000


def arrow_rs_batches(path: Path) -> list[pa.RecordBatch]:
    """The file's batches as arrow-rs's reader leaves them (one partition, no view types)."""
    config = datafusion.SessionConfig(
        {
            "datafusion.execution.batch_size": str(BATCH_ROWS),
            "datafusion.execution.target_partitions": "1",
            "datafusion.optimizer.repartition_file_scans": "false",
            "datafusion.execution.parquet.schema_force_view_types": "false",
            "datafusion.execution.parquet.pushdown_filters": "false",
        }
    )
    context = datafusion.SessionContext(config)
    # Data files are named by their hash, without an extension.
    context.register_parquet("t", str(path), file_extension=Path(path).suffix)
    batches: list[pa.RecordBatch] = context.sql("SELECT * FROM t").collect()
    return batches


def reference_hash(path: Path) -> bytes:
    batches = arrow_rs_batches(path)
    schema = pq.read_schema(path).remove_metadata()
    digest = RecordDigest(schema)
    for batch in batches:
        assert batch.schema.remove_metadata() == schema  # same types: same type bytes
        digest.update(batch)
    return digest.digest()
