"""Hostile SQL through the CLI: ``odf sql``, ``odf add``, ``odf set-transform``, ``odf pull``
and ``odf verify`` refuse it, name the construct, and leave no trace.

A dataset pulled from someone else carries SQL that ``odf pull`` and ``odf verify`` run here.
Every case below is refused by the engine's sandbox with InvalidQuery (exit 1, one line), and
after each one the side effects it tried are checked: a marker file a shell command would
create, a victim directory a write would replace, a secret in the engine's environment.

Derivatives whose transform was never validated stand for datasets written by someone else:
``odf add`` defers validation while an input has no data, and the verify case commits a real
ExecuteTransform (copied from an honest twin) after a hostile SetTransform, as a forged
dataset would. One engine server (``provider: remote``) serves the whole module.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from common.odf.events import ExecuteTransform, SetDataSchema
from coordinator.dataset.commit import CommitItem
from coordinator.workspace import Workspace
from tests.support.cli import fails, odf, ok
from tests.support.datasets import derivative, root
from tests.support.engine_server import engine_server_process
from tests.support.workspace import add, ingest

pytestmark = pytest.mark.e2e

SECRET_VAR = "ODF_SANDBOX_TEST_SECRET"
SECRET = "s3cr3t-4f1d9c"

SRC = root("src", ["event_time TIMESTAMP", "city STRING", "population BIGINT"])

BENIGN = "SELECT event_time, city, population FROM src"


def over_src(name: str, query: str) -> str:
    """A derivative of ``src``."""
    return derivative(name, query, ["src"])


@dataclass(frozen=True)
class Traps:
    """What a hostile query would leave behind if it ran."""

    marker: Path
    victim: Path

    def assert_untouched(self) -> None:
        assert not self.marker.exists(), "a shell command of a query ran"
        assert (self.victim / "keep.txt").read_text() == "precious"
        assert sorted(p.name for p in self.victim.iterdir()) == ["keep.txt"]


@dataclass(frozen=True)
class Setup:
    ws: Path
    traps: Traps


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Setup]:
    base = tmp_path_factory.mktemp("sandbox")
    traps = Traps(marker=base / "pwned", victim=base / "victim")
    traps.victim.mkdir()
    (traps.victim / "keep.txt").write_text("precious")
    ws = base / "ws"
    ws.mkdir()
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(SECRET_VAR, SECRET)
        with engine_server_process(data_roots=[ws]) as server:
            ok(ws, "init")
            (ws / ".odf" / "config.yaml").write_text(
                f"engine:\n  provider: remote\n  address: {server.target}\n"
            )
            add(ws, SRC)
            # Added before src has data: their queries are not validated (they stand for
            # datasets written elsewhere).
            for name, query in [
                ("good", BENIGN),
                ("evil-pull", hostile_transform_query(traps)),
                ("evil-verify", hostile_transform_query(traps)),
            ]:
                add(ws, over_src(name, query))
            ingest(
                ws,
                "src",
                "event_time,city,population\n2024-01-01T00:00:00Z,A,500\n"
                "2024-01-02T00:00:00Z,B,5000\n",
            )
            ok(ws, "pull", "good")
            forge_history(Workspace(ws), honest="good", forged="evil-verify")
            yield Setup(ws, traps)


def hostile_transform_query(traps: Traps) -> str:
    return (
        f"SELECT event_time, city, population FROM src "
        f"WHERE city IN (SELECT TRANSFORM(city) USING 'touch {traps.marker}' AS (c) FROM src)"
    )


def forge_history(ws: Workspace, *, honest: str, forged: str) -> None:
    """Commit the honest dataset's transactions (schema, ExecuteTransform and their files)
    onto the forged one."""
    good, evil = ws.open_dataset(honest), ws.open_dataset(forged)
    items = []
    with evil.staging_dir() as staging:
        for _, block in reversed(list(good.iter_blocks())):
            event = block.event
            if isinstance(event, SetDataSchema):
                items.append(CommitItem(event))
            if not isinstance(event, ExecuteTransform):
                continue
            data = checkpoint = None
            if event.new_data is not None:
                data = staging / "data"
                shutil.copyfile(good.data_path(event.new_data.physical_hash), data)
            if event.new_checkpoint is not None:
                checkpoint = staging / "checkpoint"
                shutil.copyfile(
                    good.checkpoint_path(event.new_checkpoint.physical_hash), checkpoint
                )
            items.append(CommitItem(event, data, checkpoint))
        assert items, "the honest dataset has no transaction to copy"
        evil.commit_events(items, expected_head=evil.head())


def head(ws: Path, name: str) -> str:
    return str(Workspace(ws).open_dataset(name).head())


# --- odf sql (interactive: clock functions allowed, nothing else widened) ----------------

MARKER = "{marker}"
VICTIM = "{victim}"

HOSTILE_SQL = [
    pytest.param(
        f"SELECT TRANSFORM(city) USING 'touch {MARKER}' AS (x) FROM src",
        "TRANSFORM",
        id="script-transform",
    ),
    pytest.param(
        f"select/**/transform ( city )\n  using\t'touch {MARKER}' as (x) from `src`",
        "TRANSFORM",
        id="script-transform-spelling",
    ),
    pytest.param(
        f"WITH t AS (SELECT TRANSFORM(city) USING 'touch {MARKER}' AS (x) FROM src) "
        "SELECT * FROM t",
        "TRANSFORM",
        id="script-transform-in-cte",
    ),
    pytest.param(
        f"SELECT city FROM src UNION ALL SELECT TRANSFORM(city) USING 'touch {MARKER}' AS (x) "
        "FROM src",
        "TRANSFORM",
        id="script-transform-in-union",
    ),
    pytest.param(
        f"EXECUTE IMMEDIATE 'INSERT OVERWRITE DIRECTORY ''{VICTIM}'' USING csv SELECT 1'",
        "EXECUTE IMMEDIATE",
        id="execute-immediate-overwrite-directory",
    ),
    pytest.param(
        f"INSERT OVERWRITE DIRECTORY '{VICTIM}' USING csv SELECT * FROM src",
        "INSERT",
        id="insert-overwrite-directory",
    ),
    pytest.param(
        "EXECUTE IMMEDIATE 'CREATE TEMPORARY VIEW p USING text OPTIONS (path ''/etc/passwd'')'",
        "EXECUTE IMMEDIATE",
        id="execute-immediate-file-view",
    ),
    pytest.param(
        "CREATE TEMPORARY VIEW p USING text OPTIONS (path '/etc/passwd')",
        "CREATE",
        id="create-file-view",
    ),
    pytest.param("SET spark.sql.ansi.enabled = false", "SET", id="set"),
    pytest.param(
        "CREATE GLOBAL TEMPORARY VIEW g AS SELECT * FROM src", "CREATE", id="global-temp-view"
    ),
    pytest.param("SELECT * FROM global_temp.g", "global_temp", id="global-temp-read"),
    pytest.param("SELECT * FROM text.`/etc/passwd`", "/etc/passwd", id="sql-on-files"),
    pytest.param(
        f"SELECT reflect('java.lang.System', 'getenv', '{SECRET_VAR}') AS s FROM src",
        "reflect",
        id="reflect-getenv",
    ),
    pytest.param(
        "SELECT `JAVA_METHOD`('java.lang.System', 'getProperty', 'user.home') AS s",
        "java_method",
        id="java-method-backticks",
    ),
    pytest.param(
        "SELECT * FROM src WHERE city IN (SELECT current_user())",
        "current_user",
        id="current-user-in-subquery",
    ),
    pytest.param("SELECT input_file_name() AS f FROM src", "input_file_name", id="input-file-name"),
    pytest.param(
        "CREATE FUNCTION f AS 'org.example.Evil' USING JAR '/tmp/evil.jar'",
        "CREATE",
        id="create-function",
    ),
    pytest.param("ADD JAR '/tmp/evil.jar'", "JAR", id="add-jar"),
    pytest.param(
        "SELECT * FROM src WHERE population < (SELECT COUNT(*) FROM src TABLESAMPLE (BUCKET 1 "
        f"OUT OF 2) WHERE city IN (SELECT TRANSFORM(city) USING 'touch {MARKER}' AS (c) FROM src))",
        "TRANSFORM",
        id="script-transform-deep-in-scalar-subquery",
    ),
]


@pytest.mark.parametrize(("query", "construct"), HOSTILE_SQL)
def test_sql_refuses_and_leaves_no_trace(setup: Setup, query: str, construct: str) -> None:
    sql = query.replace(MARKER, str(setup.traps.marker)).replace(VICTIM, str(setup.traps.victim))
    error = fails(setup.ws, "sql", "--command", sql)
    assert "not allowed" in error
    assert construct.lower() in error.lower()
    assert SECRET not in error
    setup.traps.assert_untouched()


def test_sql_variable_substitution_is_off(setup: Setup) -> None:
    """``${env:...}`` is plain text: the engine's environment never reaches a result."""
    out = ok(
        setup.ws,
        "sql",
        "--command",
        f"SELECT '${{env:{SECRET_VAR}}}' AS s, '${{system:user.home}}' AS h",
        "-o",
        "csv",
    )
    assert SECRET not in out
    assert f"${{env:{SECRET_VAR}}}" in out
    assert "${system:user.home}" in out


def test_sql_state_does_not_survive_a_request(setup: Setup) -> None:
    """Nothing a query names persists: a later query cannot see an earlier step's view."""
    ok(setup.ws, "sql", "--command", "SELECT COUNT(*) AS n FROM src")
    error = fails(setup.ws, "sql", "--command", "SELECT * FROM g")
    assert "g" in error


def test_sql_allows_clock_functions_interactively(setup: Setup) -> None:
    out = ok(
        setup.ws,
        "sql",
        "--command",
        "SELECT current_date() >= DATE '2024-01-01' AS ok",
        "-o",
        "csv",
    )
    assert out.splitlines()[-1].strip().lower() == "true"


# --- derivatives: odf add, odf set-transform, odf pull, odf verify ------------------------

HOSTILE_TRANSFORMS = [
    pytest.param(
        f"SELECT TRANSFORM(city) USING 'touch {MARKER}' AS (city) FROM src",
        "TRANSFORM",
        id="script-transform",
    ),
    pytest.param(
        "SELECT event_time, city, population FROM src WHERE event_time < TIMESTAMP 'now'",
        "now",
        id="timestamp-now-literal",
    ),
    pytest.param(
        "SELECT event_time, city, population FROM src WHERE event_time < CAST('now' AS TIMESTAMP)",
        "now",
        id="cast-now",
    ),
    pytest.param(
        "SELECT event_time, city, population FROM src WHERE DATE(event_time) < DATE 'today'",
        "today",
        id="date-today-literal",
    ),
    pytest.param(
        "SELECT event_time, city, population FROM src TABLESAMPLE (50 PERCENT)",
        "TABLESAMPLE",
        id="tablesample",
    ),
    pytest.param(
        "SELECT event_time, city, population * rand() AS population FROM src",
        "rand",
        id="rand",
    ),
    pytest.param(
        "SELECT event_time, city, population FROM src WHERE event_time < current_timestamp()",
        "current_timestamp",
        id="current-timestamp",
    ),
    pytest.param("SELECT event_time, uuid() AS city, population FROM src", "uuid", id="uuid"),
]


@pytest.mark.parametrize(("query", "construct"), HOSTILE_TRANSFORMS)
def test_add_refuses_hostile_transform(setup: Setup, query: str, construct: str) -> None:
    """``odf add`` validates against the inputs' schemas: refused before anything is created."""
    sql = query.replace(MARKER, str(setup.traps.marker))
    snapshot = setup.ws / "hostile.yaml"
    snapshot.write_text(over_src("hostile", sql))
    error = fails(setup.ws, "add", str(snapshot))
    assert "not allowed" in error
    assert construct.lower() in error.lower()
    assert "hostile" not in ok(setup.ws, "list", "-o", "csv")
    setup.traps.assert_untouched()


def test_set_transform_refuses_hostile_query(setup: Setup) -> None:
    before = head(setup.ws, "good")
    error = fails(
        setup.ws,
        "set-transform",
        "good",
        "--query",
        f"SELECT TRANSFORM(city) USING 'touch {setup.traps.marker}' AS (city) FROM src",
    )
    assert "TRANSFORM" in error
    assert head(setup.ws, "good") == before
    setup.traps.assert_untouched()


def test_pull_refuses_a_hostile_transform_it_did_not_validate(setup: Setup) -> None:
    before = head(setup.ws, "evil-pull")
    result = odf(setup.ws, "pull", "evil-pull")
    assert result.returncode == 1, result
    assert "TRANSFORM" in result.stderr
    assert "not allowed" in result.stderr
    assert head(setup.ws, "evil-pull") == before
    setup.traps.assert_untouched()


def test_verify_refuses_to_replay_a_hostile_transform(setup: Setup) -> None:
    result = odf(setup.ws, "verify", "evil-verify")
    assert result.returncode != 0, result
    assert "TRANSFORM" in result.stdout + result.stderr
    setup.traps.assert_untouched()
    # The honest twin replays and verifies.
    ok(setup.ws, "verify", "good")
