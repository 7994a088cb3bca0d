"""``odf sql``'s interactive shell in a pseudo-terminal, its piped mode, and ``import odf``
through a daemon (by the workspace's path and by its ``http://`` address), all against one
real ``odf serve`` and its one warm engine.

The workspace: a push root ``demo.things`` (pushed through the API) and its derivative
``demo.derived`` (pulled through the API).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pexpect
import pyarrow as pa
import pytest

import odf
from coordinator.daemon.client import DaemonClient
from coordinator.daemon.errors import DaemonCallError
from tests.support.cli import REPO
from tests.support.daemon import Served, serving
from tests.support.datasets import derivative, root
from tests.support.workspace import add, new_workspace

pytestmark = pytest.mark.e2e

THINGS = root("demo.things", ["event_time TIMESTAMP", "id BIGINT", "name STRING"])
DERIVED = derivative(
    "demo.derived", "SELECT event_time, id, upper(name) AS name FROM `demo.things`", ["demo.things"]
)
PAGED = "PAGED-BY-THE-TEST"
TIMEOUT_S = 120


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    ws = new_workspace(tmp_path_factory.mktemp("shell") / "ws")
    add(ws, THINGS, DERIVED)
    day = pd.Timestamp("2024-05-06T00:00:00Z")
    with odf.connect(ws, use_daemon=False) as in_process:  # pushing needs no engine
        in_process.push(
            "demo.things",
            pd.DataFrame({"event_time": [day] * 3, "id": [1, 2, 3], "name": ["a", "b", "c"]}),
        )
    with serving(ws) as daemon:
        yield daemon


def shell(ws: Path) -> pexpect.spawn:
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO),
        "PROMPT_TOOLKIT_NO_CPR": "1",  # the test answers no cursor-position requests
        "TERM": "xterm",
        "PAGER": f"sh -c 'echo {PAGED}; cat'",
    }
    child = pexpect.spawn(
        sys.executable,
        ["-m", "coordinator", "sql"],
        cwd=ws,
        env=env,
        encoding="utf-8",
        dimensions=(40, 100),
        timeout=TIMEOUT_S,
    )
    child.logfile_read = open(ws / "shell.log", "a")  # noqa: SIM115 (closed with the child)
    child.expect("odf>")
    return child


def test_the_api_through_the_daemon(served: Served) -> None:
    ws = served.ws
    with odf.connect(ws) as by_path:
        assert isinstance(by_path._calls, DaemonClient)  # the daemon serves it
        events: list[odf.PullEvent] = []
        progress: list[tuple[str, int, int | None]] = []
        by_path.pull(
            ["demo.derived"],
            on_event=events.append,
            on_progress=lambda *p: progress.append(p),
        )
        # PullStarted, then the transaction, or "up to date" when the daemon ran it first
        assert type(events[0]).__name__ == "PullStarted"
        assert {e.dataset for e in events} == {"demo.derived"}
        assert not any(isinstance(e, odf.PullFailed) for e in events)
        read = by_path.read("demo.derived").to_pandas()
        assert read["name"].tolist() == ["A", "B", "C"]
        replayed: list[str] = []
        reports = by_path.verify(["demo.derived"], on_replay=lambda name, _: replayed.append(name))
        assert [r.ok for r in reports] == [True] and replayed == ["demo.derived"]

    url = f"http://{served.address}"
    with odf.connect(url, token=served.token) as remote:
        assert [d.name for d in remote.list_datasets()] == ["demo.derived", "demo.things"]
        assert remote.schema("demo.derived").names[-2:] == ["id", "name"]
        result = remote.sql("SELECT id, name FROM `demo.derived` ORDER BY id DESC", limit=2)
        assert result.to_arrow().to_pylist() == [{"id": 3, "name": "C"}, {"id": 2, "name": "B"}]
        assert result.total == 3
        assert sorted(remote.read("demo.derived").to_polars()["id"].to_list()) == [1, 2, 3]
    with odf.connect(url, token="wrong") as refused, pytest.raises(DaemonCallError):
        refused.list_datasets()


def test_the_api_over_flight_sql(served: Served) -> None:
    url = f"grpc://{served.info['flightSqlAddress']}"
    with odf.connect(url, token=served.token) as flight:
        assert [d.name for d in flight.list_datasets()] == ["demo.derived", "demo.things"]
        assert flight.schema("demo.things").names[-2:] == ["id", "name"]
        reader = flight.sql("SELECT id FROM `demo.things` ORDER BY id").to_reader()
        assert isinstance(reader, pa.RecordBatchReader)  # streamed from the server
        assert reader.read_all().column("id").to_pylist() == [1, 2, 3]
        assert flight.sql("SELECT id FROM `demo.things`", limit=2).to_pandas().shape == (2, 1)
        first = next(h for h, _ in reversed(flight_log(served)))
        assert len(flight.read("demo.things", as_of=first).to_arrow()) == 0
        assert len(flight.read("demo.things").to_polars()) == 3
        with pytest.raises(odf.OdfError, match="push is not available over Flight SQL"):
            flight.push("demo.things", pa.table({"id": [4]}))
        with pytest.raises(odf.NotFoundError):
            flight.dataset("nope")
        with pytest.raises(DaemonCallError, match="nope"):
            flight.sql("SELECT nope FROM `demo.things`").to_arrow()
    with pytest.raises(DaemonCallError):
        odf.connect(url, token="wrong").list_datasets()


def flight_log(served: Served) -> list[tuple[str, object]]:
    """The blocks of demo.things, newest first (hashes as text)."""
    with odf.connect(served.ws, use_daemon=False) as local:
        return [(str(h), b) for h, b in local.log("demo.things")]


def test_statements_from_a_pipe(served: Served) -> None:
    script = "SELECT 1 AS one;\nSELECT id FROM `demo.things`\n ORDER BY id;"
    done = subprocess.run(
        [sys.executable, "-m", "coordinator", "sql", "-o", "csv"],
        cwd=served.ws,
        input=script,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        timeout=TIMEOUT_S,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "one\n1\nid\n1\n2\n3\n"
    failed = subprocess.run(
        [sys.executable, "-m", "coordinator", "sql"],
        cwd=served.ws,
        input="SELECT 1; SELECT nope FROM `demo.things`; SELECT 3;",
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        timeout=TIMEOUT_S,
    )
    assert failed.returncode == 1
    assert failed.stderr.startswith("error: ") and "nope" in failed.stderr
    assert "3" not in failed.stdout.splitlines()[-1:]


def test_the_shell_in_a_terminal(served: Served) -> None:
    ws = served.ws
    child = shell(ws)
    child.send("\\d\r")
    child.expect("demo.derived")
    child.expect("odf>")
    child.send("\\d demo.things\r")
    child.expect("event_time")
    child.expect("odf>")
    child.send("SELECT id, name\r")  # no ';' yet: a second line
    child.expect(r"\.\.\.>")
    child.send("FROM `demo.derived` ORDER BY id;\r")
    child.expect(r"\(3 rows, \d+\.\d\d s\)")
    child.expect("odf>")
    child.send("SELECT COUNT(*) AS n FROM `demo.th\t")  # completes the backticked name
    child.expect("ings`")  # the rest of the name, inserted
    child.send(";\r")
    child.expect(r"\(1 row, ")
    child.expect("odf>")
    child.send("SELECT nope FROM `demo.things`;\r")
    child.expect("error: ")
    child.expect("odf>")
    child.send(f"SELECT '{'w' * 150}' AS wide;\r")  # wider than the terminal: paged
    child.expect(PAGED)
    child.expect("odf>")

    child.send("SELECT COUNT(*) FROM range(3000000000) a CROSS JOIN range(1000000) b;\r")
    time.sleep(3)
    child.sendintr()  # the call is cancelled; the shell goes on
    child.expect("cancelled")
    child.expect("odf>")
    child.send("\\d demo.things\r")
    child.expect("event_time")
    child.expect("odf>")
    child.sendeof()
    child.expect(pexpect.EOF)
    assert child.wait() == 0

    history = (ws / ".odf" / "sql_history").read_text()
    assert "+SELECT id, name\n+FROM `demo.derived` ORDER BY id;" in history
    again = shell(ws)  # the history is there in the next session
    again.send("\x1b[A\r")  # up arrow: the last entry
    again.expect("event_time")
    again.expect("odf>")
    again.send("\\q\r")
    again.expect(pexpect.EOF)
