"""Arrow IPC inputs handed to Spark as staged Parquet files, where executors cannot map them.

Where the executors can map an Arrow IPC input (a local master, or a file under the shared
staging directory: ``Staging.maps``), it is read in place (``arrow_scan.py``) and nothing here
runs but ``spark_values`` and ``stageable``. Elsewhere the input is staged as below.

``createDataFrame(pyarrow.Table)`` streams every record from the Python driver into the JVM
and converts it there row by row: about 10 s for a million records, where Spark's own Parquet
scan of the same records takes about 1 s. So an Arrow IPC input is memory-mapped, brought to
exactly the Arrow types and values ``createDataFrame`` would have sent the JVM
(``spark_values``: PySpark's own conversion), written as one plain Parquet file (no
compression, no dictionaries, no statistics: a few hundred milliseconds per million records)
into the request's staging directory, and scanned by Spark like any Parquet input. The
directory and its files are removed when the request ends.

The Parquet round trip is exact for the Spark types ``stageable`` accepts: booleans,
integers, floats, decimals, strings, binaries, dates, timestamps (microseconds, UTC) and
arrays, structs and maps of them. A table with any other type (nulls, intervals, times, empty
structs, ...) or with column names equal up to case (which Spark's Parquet reader rejects)
goes through ``createDataFrame`` as before. Staged inputs are nullable, as every Parquet
input is in Spark: the Arrow IPC and Parquet exchanges give a query identical inputs.

Staged files are local to the driver: with a cluster master, executors could not read them,
so there staging is off (``Staging.OFF``) and Arrow IPC inputs go through ``createDataFrame``
(slow for large inputs, but correct anywhere), unless the engine has a *shared staging*
directory (``--shared-staging``: mounted at the same path on every node): then the staging
directories are made there and executors scan the staged files themselves.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import ClassVar

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.pandas.types import (
    _check_arrow_table_timestamps_localize,
    from_arrow_schema,
    to_arrow_schema,
)
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    ByteType,
    DataType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    MapType,
    ShortType,
    StringType,
    StructType,
    TimestampType,
)

from engine_spark.schema_mapping import UTC, spark_input_table

STAGED_ROW_GROUP = 128 * 1024
"""Rows per row group of a staged file: lets Spark split a large input between cores."""


class ArrowInputs(StrEnum):
    """How Arrow IPC inputs reach Spark where the executors could map them.

    ``STAGED`` (the default): restaged as Parquet, which Spark scans (column pruning,
    vectorized reads). ``IN_PLACE``: read where they lie by ``mapInArrow`` tasks
    (``arrow_scan.py``): nothing staged, but every column crosses from the Python workers into
    Spark's rows, and the workers start on first use. Measured (``bench/bench_arrow_inputs.py``,
    1M records, loaded machine): in place 3.36 s, staged 2.19 s, Parquet inputs 1.66 s, so
    staging stays the default."""

    STAGED = "staged"
    IN_PLACE = "in-place"


@dataclass(frozen=True, slots=True)
class Staging:
    """Where one request stages its Arrow IPC inputs; ``directory=None``: not staged.
    ``mapped_root``: the executors can map the files under it, so Arrow IPC inputs there are
    read where they lie (``arrow_scan.py``), not staged."""

    directory: Path | None
    mapped_root: Path | None = None

    OFF: ClassVar[Staging]

    def write(self, table: pa.Table) -> str:
        """Write ``table`` as a new plain Parquet file in the staging directory."""
        if self.directory is None:
            raise ValueError("staging is off")
        fd, path = tempfile.mkstemp(prefix="input-", suffix=".parquet", dir=self.directory)
        os.close(fd)
        pq.write_table(
            table,
            path,
            compression="none",
            use_dictionary=False,
            write_statistics=False,
            row_group_size=STAGED_ROW_GROUP,
        )
        return path

    def maps(self, path: str) -> bool:
        """Whether the executors can map the file at ``path`` themselves."""
        return self.mapped_root is not None and under(self.mapped_root, path)


Staging.OFF = Staging(directory=None)


def stages_locally(master: str) -> bool:
    """Whether executors can read the driver's files: only with a ``local`` master."""
    return master.startswith("local")


def under(directory: Path, path: str) -> bool:
    """Whether ``path`` (absolute) lies under ``directory``, links resolved."""
    resolved = os.path.realpath(path)
    root = os.path.realpath(directory)
    return resolved == root or resolved.startswith(root.rstrip("/") + "/")


@contextmanager
def staging_area(
    enabled: bool, parent: Path | None = None, *, arrow_inputs: ArrowInputs = ArrowInputs.STAGED
) -> Iterator[Staging]:
    """A fresh staging directory for one request (in ``parent``, by default the system's
    temporary directory), removed with everything in it on exit.

    With ``ArrowInputs.IN_PLACE``, executors that read files staged there read the inputs
    under ``parent`` (a cluster's shared staging directory), or any file without one (a local
    master) where they lie: those inputs are not staged (``Staging.maps``)."""
    if not enabled:
        yield Staging.OFF
        return
    directory = Path(tempfile.mkdtemp(prefix="odf-engine-staging-", dir=parent))
    try:
        in_place = arrow_inputs is ArrowInputs.IN_PLACE
        yield Staging(directory, mapped_root=(parent or Path("/")) if in_place else None)
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def arrow_frame(session: SparkSession, table: pa.Table, staging: Staging) -> DataFrame:
    """``table`` (an Arrow IPC input) as a DataFrame: staged as Parquet when possible."""
    table = spark_input_table(table)
    if staging.directory is not None:
        # As createDataFrame types it (naive timestamps are TIMESTAMP under the default
        # spark.sql.timestampType), failing on the same unsupported types.
        schema = from_arrow_schema(table.schema, prefer_timestamp_ntz=False)
        if stageable(schema):
            path = staging.write(spark_values(table, schema))
            return session.read.schema(schema).parquet(path)
    return session.createDataFrame(table)


def spark_values(table: pa.Table, schema: StructType) -> pa.Table:
    """The values ``createDataFrame(table)`` sends the JVM, for ``schema`` (the Spark form of
    ``table.schema``).

    PySpark's own conversion: nested nanosecond timestamps floored to microseconds, naive
    timestamps taken as UTC, every column cast to the Arrow form of its Spark type. Top-level
    fields become nullable (Spark reads every Parquet column as nullable anyway).
    """
    target = to_arrow_schema(schema, error_on_duplicated_field_names_in_struct=True, timezone=UTC)
    values = _check_arrow_table_timestamps_localize(table, schema, True, UTC).cast(target)
    nullable = pa.schema([f.with_nullable(True) for f in values.schema])
    return pa.Table.from_arrays(values.columns, schema=nullable)


PLAIN_TYPES = (
    BooleanType,
    ByteType,
    ShortType,
    IntegerType,
    LongType,
    FloatType,
    DoubleType,
    DecimalType,
    StringType,
    BinaryType,
    DateType,
    TimestampType,
)
"""Spark's flat types that a Parquet file written by pyarrow (or by Spark) keeps exactly."""


def stageable(schema: StructType) -> bool:
    """Whether Spark reads a Parquet file of ``schema`` back exactly (see the module doc)."""
    return _type_stageable(schema)


def _type_stageable(t: DataType) -> bool:
    if isinstance(t, StructType):
        names = [f.name.lower() for f in t.fields]
        return (
            bool(names)
            and len(set(names)) == len(names)
            and all(_type_stageable(f.dataType) for f in t.fields)
        )
    if isinstance(t, ArrayType):
        return _type_stageable(t.elementType)
    if isinstance(t, MapType):
        return _type_stageable(t.keyType) and _type_stageable(t.valueType)
    # Exact classes: StringType with a collation, TimestampNTZType etc. are subclasses or
    # siblings that the round trip does not promise to keep.
    return type(t) in PLAIN_TYPES
