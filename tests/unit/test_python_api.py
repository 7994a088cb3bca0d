"""``import odf`` without an engine: what is exported is what docs/python-api.md documents, the
package does not shadow the ``odf`` command, ``connect`` refuses what it cannot reach with the
CLI's errors, and a workspace made, pushed to and read through the API in process (pyarrow,
pandas, polars; ``as_of``; streaming) holds what the CLI would have written.
"""

from __future__ import annotations

import re
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pandas as pd
import polars as pl
import pyarrow as pa
import pytest

import odf
from common.odf.errors import NotFoundError, ValidationError
from coordinator.workspace import Workspace
from tests.support.cli import REPO, ok
from tests.support.datasets import root

DOC = REPO / "docs" / "python-api.md"
THINGS = root("demo.things", ["event_time TIMESTAMP", "id BIGINT", "name STRING"])


def test_the_exported_names_are_the_documented_ones() -> None:
    reference = DOC.read_text().split("### Reference", 1)[1].split("\n## ", 1)[0]
    documented = {n for n in re.findall(r"`odf\.(\w+)", reference) if not n.startswith("__")}
    assert documented == set(odf.__all__)
    assert all(hasattr(odf, name) for name in odf.__all__)


@pytest.mark.process
def test_the_package_does_not_shadow_the_odf_command(tmp_path: Path) -> None:
    """The ``odf`` script runs ``coordinator.cli:run`` (``main`` as a process); ``import odf``
    is the API, also from the directory of the script."""
    script = Path(sys.executable).parent / "odf"
    if script.is_file():
        assert "from coordinator.cli import run" in script.read_text()
    code = "import odf; print(odf.connect.__module__)"
    env = {"PYTHONPATH": str(REPO), "PATH": str(script.parent)}
    found = subprocess.run(
        [sys.executable, "-c", code], cwd=script.parent, env=env, capture_output=True, text=True
    )
    assert found.stdout.strip() == "odf.connection", found.stderr
    assert "usage: odf" in ok(tmp_path, "--help")


def test_connect_refuses_what_it_cannot_reach(tmp_path: Path) -> None:
    with pytest.raises(NotFoundError, match=f"no odf workspace at or above {tmp_path}"):
        odf.connect(tmp_path)
    with pytest.raises(ValidationError, match="a token is needed"):
        odf.connect("grpc://127.0.0.1:50050")
    with pytest.raises(ValidationError, match=r"unknown scheme ftp://"):
        odf.connect("ftp://example.org", token="t")
    with pytest.raises(ValidationError, match=r"expected http://HOST:PORT"):
        odf.connect("http://127.0.0.1/odf", token="t")


@pytest.fixture(scope="module")
def ws(tmp_path_factory: pytest.TempPathFactory) -> odf.Connection:
    path = tmp_path_factory.mktemp("api") / "ws"
    (path.parent / "things.yaml").write_text(THINGS)
    connection = odf.init(path)
    assert connection.add([path.parent / "things.yaml"]) == ["demo.things"]
    return connection


def test_push_and_read_back_in_every_form(ws: odf.Connection) -> None:
    day = datetime(2024, 5, 6, tzinfo=UTC)
    first = ws.push(
        "demo.things",
        pd.DataFrame({"event_time": [day, day], "id": [1, 2], "name": ["a", "b"]}),
    )
    assert (first.num_records, first.up_to_date) == (2, False)
    ws.push("demo.things", pl.DataFrame({"event_time": [day], "id": [3], "name": ["c"]}))
    ws.push("demo.things", pa.table({"event_time": [day], "id": [4], "name": ["d"]}))

    table = ws.read("demo.things").to_arrow()
    assert table.column("id").to_pylist() == [1, 2, 3, 4]
    assert table.column("offset").to_pylist() == [0, 1, 2, 3]
    assert table.schema == ws.schema("demo.things")
    assert ws.read("demo.things").to_pandas()["name"].tolist() == ["a", "b", "c", "d"]
    assert ws.read("demo.things").to_polars()["id"].to_list() == [1, 2, 3, 4]

    as_of = ws.read("demo.things", as_of=str(first.new_head)).to_arrow()
    assert as_of.column("id").to_pylist() == [1, 2]
    summary = ws.dataset("demo.things")
    assert (summary.kind, summary.records) == ("Root", 4)
    assert [d.name for d in ws.list_datasets()] == ["demo.things"]
    assert len(ws.log("demo.things", limit=2)) == 2


def test_a_result_streams_once_then_is_kept(ws: odf.Connection) -> None:
    streamed = ws.read("demo.things")
    reader = streamed.to_reader()
    assert isinstance(reader, pa.RecordBatchReader)
    assert sum(b.num_rows for b in reader) == 4
    with pytest.raises(odf.OdfError, match="already streamed"):
        streamed.to_arrow()
    kept = ws.read("demo.things")
    assert len(kept) == 4
    assert kept.to_reader().read_all().num_rows == kept.to_arrow().num_rows == 4


def test_refusals_are_the_cli_errors(ws: odf.Connection) -> None:
    with pytest.raises(NotFoundError, match="nope"):
        ws.read("nope")
    with pytest.raises(ValidationError, match="cannot push a dict"):
        ws.push("demo.things", {"id": [1]})
    with pytest.raises(odf.OdfError, match="has no block at or before 1999"):
        ws.read("demo.things", as_of="1999-01-01T00:00:00Z")
    with pytest.raises(ValidationError, match="one query expected"):
        ws.sql("SELECT 1; SELECT 2")
    before = ws.dataset("demo.things").head
    with pytest.raises(odf.OdfError, match="Table of 1 rows: column 'event_time' is not in"):
        ws.push("demo.things", pa.table({"id": [5], "name": ["e"]}))
    assert ws.dataset("demo.things").head == before  # nothing half-written
    assert Workspace.find(Path(ws.target)).root == Path(ws.target)
