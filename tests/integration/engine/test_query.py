"""ExecuteQuery (our extension): ad-hoc SQL over whole datasets, through the coordinator's
``EngineClient``, the real gRPC server and the shared SparkSession."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.ipc as ipc
import pyarrow.parquet as pq
import pytest

from common.odf import engine_protocol as ep
from common.serde.arrow_schema import encode_arrow_schema
from coordinator.engine import EngineClient, EngineInvalidQueryError
from engine_spark.server import EngineServer
from tests.integration.engine.datasets import sql

pytestmark = [pytest.mark.spark, pytest.mark.grpc]


@pytest.fixture
def engine(engine_server: EngineServer) -> Iterator[EngineClient]:
    with EngineClient(f"127.0.0.1:{engine_server.bound_ports[0]}") as client:
        yield client


@pytest.fixture
def flights(workdir: Path) -> ep.QueryInput:
    """Two slices: a Parquet file and a newer Arrow IPC file with one more column."""
    old, new = workdir / "flights-0", workdir / "flights-1"
    pq.write_table(pa.table({"carrier": ["AA", "UA", "AA"], "delay": [5, 10, 20]}), old)
    table = pa.table({"carrier": ["DL", "UA"], "delay": [1, 2], "gate": ["g1", "g2"]})
    with pa.OSFile(str(new), "wb") as sink, ipc.new_file(sink, table.schema) as writer:
        writer.write_table(table)
    return ep.QueryInput(alias="nyc.flights", data_paths=(str(old), str(new)))


@pytest.fixture
def airlines(workdir: Path) -> ep.QueryInput:
    path = workdir / "airlines-0"
    pq.write_table(
        pa.table({"carrier": ["AA", "DL", "UA"], "name": ["American", "Delta", "United"]}), path
    )
    return ep.QueryInput(alias="nyc.airlines", data_paths=(str(path),))


def _query(
    engine: EngineClient, workdir: Path, inputs: list[ep.QueryInput], *steps: str | tuple[str, str]
) -> pa.Table:
    output = workdir / "out" / "result.arrow"
    request = ep.QueryRequest(
        inputs=tuple(inputs), transform=sql(*steps), output_data_path=str(output)
    )
    response = engine.execute_query(request)
    with pa.memory_map(str(output)) as source:
        table = ipc.open_file(source).read_all()
    assert response == ep.QueryResponseSuccess(num_records=table.num_rows)
    return table


@pytest.fixture
def both(
    engine: EngineClient, workdir: Path, flights: ep.QueryInput, airlines: ep.QueryInput
) -> Callable[..., pa.Table]:
    """Runs query steps over the flights and the airlines."""
    return lambda *steps: _query(engine, workdir, [flights, airlines], *steps)


def test_join_and_aggregate_across_datasets(both: Callable[..., pa.Table]) -> None:
    table = both(
        (
            "totals",
            "SELECT carrier, COUNT(*) AS n, SUM(delay) AS delay FROM `nyc.flights` "
            "GROUP BY carrier",
        ),
        "SELECT a.name, t.n, t.delay FROM totals t JOIN `NYC.Airlines` a ON a.carrier = t.carrier",
    )
    # Aggregations and joins are sorted by value (deterministic output).
    assert table.to_pydict() == {
        "name": ["American", "Delta", "United"],
        "n": [2, 1, 2],
        "delay": [25, 1, 12],
    }


def test_every_record_of_every_file_with_repeated_column_names(
    both: Callable[..., pa.Table],
) -> None:
    table = both(
        "SELECT f.carrier, a.carrier, f.gate FROM `nyc.flights` f "
        "LEFT JOIN `nyc.airlines` a ON a.carrier = f.carrier AND a.carrier <> 'UA'",
    )
    assert table.column_names == ["carrier", "carrier", "gate"]
    rows = sorted(zip(*(c.to_pylist() for c in table.columns), strict=True), key=str)
    assert rows == [
        ("AA", "AA", None),
        ("AA", "AA", None),
        ("DL", "DL", "g1"),
        ("UA", None, "g2"),
        ("UA", None, None),
    ]


def test_dataset_without_data_is_an_empty_view_with_its_schema(
    engine: EngineClient, workdir: Path
) -> None:
    schema = pa.schema([("offset", pa.int64()), ("city", pa.string())])
    empty = ep.QueryInput(alias="cities", data_paths=(), schema=encode_arrow_schema(schema))
    table = _query(engine, workdir, [empty], "SELECT city, COUNT(*) AS n FROM cities GROUP BY city")
    assert table.num_rows == 0
    assert table.column_names == ["city", "n"]


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ("SELECT * FROM `nyc.nope`", "nyc.nope"),
        (
            "SELECT carrier, java_method('java.lang.System', 'getenv', 'HOME') FROM `nyc.flights`",
            "java_method() is not allowed",
        ),
        ("DROP VIEW `nyc.flights`", "only queries"),
    ],
)
def test_query_errors_are_invalid_query(
    engine: EngineClient, workdir: Path, flights: ep.QueryInput, query: str, message: str
) -> None:
    output = workdir / "out" / "result.arrow"
    request = ep.QueryRequest(inputs=(flights,), transform=sql(query), output_data_path=str(output))
    with pytest.raises(EngineInvalidQueryError, match=re.escape(message)):
        engine.execute_query(request)
    assert not output.exists()
