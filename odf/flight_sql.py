"""A workspace's daemon over Arrow Flight SQL (``grpc://``, ``grpc+tls://``), through ADBC.

Datasets are the server's tables; queries are Spark SQL run by the daemon's engines and
stream back as Arrow record batches. The ADBC driver's errors become the CLI's
(``DaemonCallError`` and its subclasses) with the server's first line.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import pyarrow as pa

from common.odf.errors import OdfError
from coordinator.daemon.errors import DaemonCallError, DaemonInvalidError, DaemonNotFoundError

if TYPE_CHECKING:
    from collections.abc import Callable

    from coordinator.app import DatasetSummary

QUERY_TIMEOUT_S = 600.0
"""How long a query may run before the client gives up (and cancels it)."""
FETCH_TIMEOUT_S = 300.0
"""How long the client waits for the next record batch."""
MAX_MESSAGE_BYTES = 64 << 20
"""The largest gRPC message (one record batch) accepted from the server."""
T = TypeVar("T")


class FlightSql:
    """One ADBC connection to a Flight SQL server."""

    def __init__(self, url: str, token: str, *, tls_root_cert: Path | None = None) -> None:
        try:
            import adbc_driver_flightsql.dbapi as flight_sql
            from adbc_driver_flightsql import DatabaseOptions
        except ImportError:
            raise OdfError(
                "Flight SQL needs the ADBC driver: pip install adbc-driver-flightsql"
            ) from None
        options = {
            DatabaseOptions.AUTHORIZATION_HEADER.value: f"Bearer {token}",
            DatabaseOptions.TIMEOUT_QUERY.value: str(QUERY_TIMEOUT_S),
            DatabaseOptions.TIMEOUT_FETCH.value: str(FETCH_TIMEOUT_S),
            DatabaseOptions.WITH_MAX_MSG_SIZE.value: str(MAX_MESSAGE_BYTES),
        }
        if tls_root_cert is not None:
            options[DatabaseOptions.TLS_ROOT_CERTS.value] = tls_root_cert.read_text()
        self.url = url
        self.connection = self._call(
            lambda: flight_sql.connect(url, db_kwargs=options, autocommit=True)
        )

    def close(self) -> None:
        self.connection.close()

    def list_datasets(self) -> list[DatasetSummary]:
        from coordinator.app import DatasetSummary

        objects = self._call(lambda: self.connection.adbc_get_objects(depth="tables").read_all())
        names: list[str] = []
        for catalog in objects.to_pylist():
            for schema in catalog.get("catalog_db_schemas") or []:
                names.extend(t["table_name"] for t in schema.get("db_schema_tables") or [])
        return [DatasetSummary(name=n) for n in sorted(set(names), key=str.lower)]

    def summary(self, name: str) -> DatasetSummary:
        found = [d for d in self.list_datasets() if d.name.lower() == name.lower()]
        if not found:
            raise DaemonNotFoundError(f"dataset {name!r} not found at {self.url}")
        return found[0]

    def schema(self, name: str) -> pa.Schema:
        schema = self._call(lambda: self.connection.adbc_get_table_schema(name))
        assert isinstance(schema, pa.Schema)
        return schema

    def read(self, name: str, *, as_of: str | None = None) -> pa.RecordBatchReader:
        table = name if as_of is None else f"{name}@{as_of}"  # the server's AS OF table
        return self.query(f"SELECT * FROM `{table}`")

    def query(self, sql: str, *, limit: int | None = None) -> pa.RecordBatchReader:
        """The result as a stream (at most ``limit`` rows): batches are read from the server
        as the caller reads them."""
        cursor = self.connection.cursor()
        try:
            self._call(lambda: cursor.execute(sql))
            reader = self._call(cursor.fetch_record_batch)
        except BaseException:
            cursor.close()
            raise
        return pa.RecordBatchReader.from_batches(
            reader.schema, self._batches(cursor, reader, limit)
        )

    def _batches(
        self, cursor: Any, reader: pa.RecordBatchReader, limit: int | None
    ) -> Iterator[pa.RecordBatch]:
        left = limit
        try:
            while left is None or left > 0:
                try:
                    batch = self._call(reader.read_next_batch)
                except StopIteration:
                    return
                if left is not None:
                    batch = batch.slice(0, left)
                    left -= batch.num_rows
                yield batch
        finally:
            cursor.close()

    def _call(self, call: Callable[[], T]) -> T:
        from adbc_driver_manager import AdbcStatusCode, Error

        try:
            return call()
        except Error as e:
            message = (str(e).strip().splitlines() or [type(e).__name__])[0]
            if e.status_code is AdbcStatusCode.NOT_FOUND:
                raise DaemonNotFoundError(message) from None
            if e.status_code is AdbcStatusCode.INVALID_ARGUMENT:
                raise DaemonInvalidError(message) from None
            raise DaemonCallError(f"{self.url}: {message}") from None
        except pa.ArrowException as e:
            raise DaemonCallError(f"{self.url}: {str(e).strip().splitlines()[0]}") from None
