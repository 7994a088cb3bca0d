"""Query evolution through the CLI: ``odf set-transform`` validates, records and migrates.

One engine server runs for the whole module and the workspace reaches it as a remote engine,
so the many short commands (each would otherwise start Spark) share one warm engine. The
story: a derivative reads two roots; invalid queries are refused with the engine's message
and change nothing; a valid one that drops an input and adds a column is recorded with the
MigrateQuery result; the next pull runs the new query; the whole history verifies by replay
(the migration through MigrateQuery again). The tests are the steps of that story, in order.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from common.odf.events import ExecuteTransform, SetDataSchema, SetTransform
from coordinator.dataset import Dataset
from tests.support.cli import odf, ok
from tests.support.datasets import derivative, root
from tests.support.engine_server import engine_server_process
from tests.support.workspace import add, dataset, ingest, new_workspace

pytestmark = pytest.mark.e2e


COLUMNS = ["event_time TIMESTAMP", "name STRING", "population BIGINT"]
PLACES_QUERY = "SELECT event_time, name FROM cities UNION ALL SELECT event_time, name FROM towns"
PLACE_INPUTS = ["cities", "towns"]
PLACES = derivative("places", PLACES_QUERY, PLACE_INPUTS)

NEW_QUERY = "SELECT event_time, name, population FROM cities WHERE population > 100"


def refused(cwd: Path, *args: str) -> str:
    result = odf(cwd, *args)
    assert result.returncode == 1, f"odf {' '.join(args)} succeeded:\n{result.stdout}"
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    return lines[0]


@dataclass
class Story:
    ws: Path

    def dataset(self, name: str) -> Dataset:
        return dataset(self.ws, name)

    def head(self, name: str) -> str:
        return str(self.dataset(name).head())


@pytest.fixture(scope="module")
def story(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Story]:
    base = tmp_path_factory.mktemp("evolution")
    with engine_server_process(
        master="local[1]", data_roots=[base], log_path=base / "engine.log"
    ) as engine:
        ws = new_workspace(base / "ws")
        config = f"engine:\n  provider: remote\n  address: {engine.target}\n"
        (ws / ".odf" / "config.yaml").write_text(config)
        add(ws, *(root(name, COLUMNS, source="default") for name in ("cities", "towns")), PLACES)
        csv = "event_time,name,population\n"
        ingest(ws, "cities", csv + "2024-01-01T00:00:00Z,A,500\n2024-01-02T00:00:00Z,B,50\n")
        ingest(ws, "towns", csv + "2024-01-01T12:00:00Z,t1,20\n")
        ok(ws, "pull", "places")
        yield Story(ws)


def test_invalid_sql_is_refused_with_the_engines_message(story: Story) -> None:
    head = story.head("places")
    line = refused(
        story.ws, "set-transform", "places", "--query", "SELECT event_time, nme FROM cities"
    )
    assert line.startswith("error: query: invalid query:")
    assert "nme" in line and "UNRESOLVED_COLUMN" in line
    assert story.head("places") == head


def test_invalid_sql_is_refused_when_a_dataset_is_added(story: Story) -> None:
    snapshot = derivative("bad", "SELEC FROM cities UNION ALL SELEC FROM towns", PLACE_INPUTS)
    (story.ws / "bad.yaml").write_text(snapshot)
    line = refused(story.ws, "add", "bad.yaml")
    assert "invalid query:" in line and "SELEC" in line
    names = [row.split(",", 1)[0] for row in ok(story.ws, "list", "-o", "csv").splitlines()[1:]]
    assert "bad" not in names


def test_a_query_dropping_a_column_is_refused(story: Story) -> None:
    head = story.head("places")
    line = refused(
        story.ws,
        "set-transform",
        "places",
        "--query",
        "SELECT event_time FROM cities UNION ALL SELECT event_time FROM towns",
    )
    assert "drops column 'name'" in line
    # With other inputs the coordinator checks the schema evolution rules itself.
    line = refused(
        story.ws, "set-transform", "places", "--input", "cities", "--query",
        "SELECT event_time, population FROM cities",
    )  # fmt: skip
    assert line == (
        "error: query: the new query's output breaks the dataset's schema: column 'name' was"
        " removed or renamed; schemas may only add columns"
    )
    assert story.head("places") == head


def test_the_unchanged_query_is_refused(story: Story) -> None:
    query = "SELECT event_time, name FROM cities\nUNION ALL SELECT event_time, name FROM towns"
    line = refused(story.ws, "set-transform", "places", "--query", query)
    assert "nothing to change" in line


def test_a_valid_change_is_recorded_with_the_migration(story: Story) -> None:
    ds = story.dataset("places")
    before = ds.state()
    out = ok(story.ws, "set-transform", "places", "--input", "cities", "--query", NEW_QUERY)
    assert "places: adds column(s) population (written with the next data)" in out
    assert "places: migrated; the engine's new state is recorded in block" in out
    blocks = [b for _, b in ds.iter_blocks()][:2]
    migration, set_transform = blocks[0].event, blocks[1].event
    assert isinstance(set_transform, SetTransform)
    assert [i.alias for i in set_transform.inputs] == ["cities"]
    assert set_transform.transform.queries is not None
    assert set_transform.transform.queries[0].query == NEW_QUERY
    assert isinstance(migration, ExecuteTransform)
    # The switch reads no input blocks; the engine dropped the towns watermark, so the output
    # watermark is now the cities' (2024-01-02) instead of the minimum with towns.
    assert [i.new_block_hash for i in migration.query_inputs] == [None]
    assert migration.prev_checkpoint == before.last_checkpoint
    assert migration.new_checkpoint is not None and migration.new_data is None
    assert before.last_watermark is not None and migration.new_watermark is not None
    assert (before.last_watermark.day, migration.new_watermark.day) == (1, 2)


def test_the_next_pull_runs_the_new_query(story: Story) -> None:
    csv = "event_time,name,population\n2024-01-05T00:00:00Z,C,7000\n2024-01-06T00:00:00Z,D,5\n"
    (story.ws / "c2.csv").write_text(csv)
    ok(story.ws, "ingest", "cities", "c2.csv")
    (story.ws / "t2.csv").write_text("event_time,name,population\n2024-01-07T00:00:00Z,t2,9\n")
    ok(story.ws, "ingest", "towns", "t2.csv")
    ok(story.ws, "pull", "places")
    newest = [b.event for _, b in story.dataset("places").iter_blocks()][:2]
    assert isinstance(newest[0], ExecuteTransform) and isinstance(newest[1], SetDataSchema)
    rows = json.loads(ok(story.ws, "tail", "places", "-n", "10", "-o", "json"))
    assert [(r["name"], r.get("population")) for r in rows] == [
        ("A", None),
        ("B", None),
        ("t1", None),
        ("C", 7000),
    ]


def test_the_evolved_history_verifies_by_replay(story: Story) -> None:
    out = ok(story.ws, "verify", "--recursive", "places")
    rows = [line.split() for line in out.splitlines() if line.startswith("places ")]
    assert [r[3:] for r in rows] == [
        ["ExecuteTransform", "0..2", "ok", "ok"],
        ["ExecuteTransform", "(migration)", "ok", "ok"],
        ["ExecuteTransform", "3..3", "ok", "ok"],
    ]
    assert "towns: ok" in out  # read by the first query: verified with --recursive too
    assert "places: ok (8 blocks, 3 transactions, 3 replayed)" in out


def test_a_dataset_that_never_ran_needs_no_migration(story: Story) -> None:
    add(story.ws, derivative("fresh", PLACES_QUERY, PLACE_INPUTS))
    (story.ws / "fresh.sql").write_text(
        "SELECT event_time, name, 1 AS one FROM cities\nUNION ALL\n"
        "SELECT event_time, name, 2 AS one FROM towns\n"
    )
    out = ok(story.ws, "set-transform", "fresh", "--file", "fresh.sql")
    assert "fresh: no transaction ran yet, nothing to migrate" in out
    fresh = story.dataset("fresh")
    head = fresh.head()
    assert head is not None
    event = fresh.get_block(head).event
    assert isinstance(event, SetTransform) and event.transform.queries is not None
    assert "2 AS one" in event.transform.queries[0].query


def test_a_transform_for_another_engine_is_refused(story: Story) -> None:
    snapshot = derivative("other", PLACES_QUERY, PLACE_INPUTS).replace(
        "engine: spark", "engine: datafusion"
    )
    (story.ws / "other.yaml").write_text(snapshot)
    line = refused(story.ws, "add", "other.yaml")
    assert line.startswith(
        "error: other.yaml: metadata[0].transform.engine: no engine for 'datafusion':"
        " this coordinator runs 'spark' transforms"
    )
    head = story.head("places")
    line = refused(story.ws, "set-transform", "places", "--engine", "flink", "--query", NEW_QUERY)
    assert line.startswith("error: engine: no engine for 'flink'")
    assert story.head("places") == head


def test_a_query_that_cannot_run_can_be_replaced(story: Story) -> None:
    # Added before its input had a schema, the query could not be checked: it is broken.
    add(story.ws, root("villages", COLUMNS, source="default"))
    add(story.ws, derivative("hamlets", "SELECT name FROM villages", ["villages"]))
    ingest(story.ws, "villages", "event_time,name,population\n2024-01-01T00:00:00Z,v,3\n")
    assert "event_time" in refused(story.ws, "pull", "hamlets")
    out = ok(
        story.ws, "set-transform", "hamlets", "--query", "SELECT event_time, name FROM villages"
    )
    assert "hamlets: new query recorded in block" in out
    ok(story.ws, "pull", "hamlets")
    assert story.dataset("hamlets").state().num_records == 1


def test_a_derivative_records_its_schema_before_its_first_record(story: Story) -> None:
    add(story.ws, root("ghosts", COLUMNS, source="default"))
    query = "SELECT event_time, name FROM ghosts WHERE population < 0"
    add(story.ws, derivative("none", query, ["ghosts"]))
    ingest(story.ws, "ghosts", "event_time,name,population\n2024-01-01T00:00:00Z,g,3\n")
    out = ok(story.ws, "pull", "none")
    assert out.startswith("none: no new records from 1 input record,")
    schema = ok(story.ws, "inspect", "schema", "none", "-o", "csv").splitlines()
    assert [line.split(",")[0] for line in schema[1:]] == [
        "offset",
        "op",
        "system_time",
        "event_time",
        "name",
    ]
    assert "none: ok" in ok(story.ws, "verify", "none", "--recursive")


def test_pull_goes_on_past_a_failing_dataset_and_skips_its_dependents(story: Story) -> None:
    add(story.ws, root("k", COLUMNS, source="default"))
    add(
        story.ws,
        derivative("k-bad", "SELECT name FROM k", ["k"]),  # unchecked: k had no schema yet
        derivative("k-good", "SELECT event_time, name FROM k", ["k"]),
    )
    add(story.ws, derivative("k-child", "SELECT event_time FROM `k-bad`", ["k-bad"]))
    ingest(story.ws, "k", "event_time,name,population\n2024-01-01T00:00:00Z,x,1\n")
    names = ("k", "k-bad", "k-good", "k-child")
    child = story.head("k-child")
    result = odf(story.ws, "pull", *names)
    assert result.returncode == 1
    assert "k-good: 1 record (offsets 0..0)" in result.stdout
    errors = result.stderr.splitlines()
    assert errors[0].startswith("error: k-bad: invalid query:") and "event_time" in errors[0]
    assert errors[1] == "error: k-child: skipped: its input 'k-bad' failed"
    assert errors[2] == "error: pull failed: k-bad; skipped (an input failed): k-child"
    assert story.dataset("k-good").state().num_records == 1
    assert story.head("k-child") == child  # skipped: untouched
    stopped = odf(story.ws, "pull", *names, "--fail-fast")
    assert stopped.returncode == 1
    assert len(stopped.stderr.splitlines()) == 1  # the first error, alone


def test_a_watermark_set_by_hand_flows_to_derivatives(story: Story) -> None:
    add(story.ws, root("w", COLUMNS, source="default"))
    add(story.ws, derivative("w-d", "SELECT event_time, name FROM w", ["w"]))
    ingest(story.ws, "w", "event_time,name,population\n2024-01-01T00:00:00Z,x,1\n")
    ok(story.ws, "pull", "w-d")
    out = ok(story.ws, "set-watermark", "w", "2030-01-01T00:00:00Z")
    assert out.startswith("w: watermark 2030-01-01T00:00:00Z (head f1620")
    pulled = ok(story.ws, "pull", "w-d")  # a transaction with a watermark and no records
    assert pulled.startswith("w-d: no new records from 0 input records, watermark 2030-01-01")
    assert refused(story.ws, "set-watermark", "w", "2029-12-31T00:00:00Z") == (
        "error: TIME: 2029-12-31T00:00:00+00:00 is not after the current watermark"
        " 2030-01-01T00:00:00+00:00: watermarks only move forward"
    )
    assert refused(story.ws, "set-watermark", "w-d", "2031-01-01T00:00:00Z").startswith(
        "error: NAME: dataset 'w-d' is not a root dataset"
    )
    assert "w-d: ok" in ok(story.ws, "verify", "w-d", "--recursive")


def test_inspect_lineage_queries_and_transactions(story: Story) -> None:
    tree = ok(story.ws, "inspect", "lineage", "places")
    assert tree.splitlines() == [
        "upstream (inputs):",
        "places (Derivative)",
        "└── cities (Root)",
        "downstream (dependents):",
        "places (Derivative)",
    ]  # the new query dropped towns
    graph = json.loads(ok(story.ws, "inspect", "lineage", "-o", "json"))
    assert {"input": "w", "dataset": "w-d"} in graph["edges"]
    assert {"name": "w-d", "kind": "Derivative"} in graph["nodes"]
    assert '"k" -> "k-good";' in ok(story.ws, "inspect", "lineage", "-o", "dot")
    assert "graph LR" in ok(story.ws, "inspect", "lineage", "k", "-o", "mermaid")
    queries = json.loads(ok(story.ws, "inspect", "query", "places", "-o", "json"))
    assert [q["queries"] for q in queries] == [PLACES_QUERY, NEW_QUERY]
    assert [q["inputs"] for q in queries] == ["cities, towns", "cities"]
    transactions = json.loads(ok(story.ws, "inspect", "transactions", "w-d", "-o", "json"))
    assert [(t["inputs"], t["records"]) for t in transactions] == [
        ("w: 0..0", 1),
        ("w: no new records", 0),
    ]
    assert transactions[1]["watermark"].startswith("2030-01-01T00:00:00")


def test_a_renamed_input_keeps_feeding_its_derivative(story: Story) -> None:
    ok(story.ws, "rename", "w", "w-renamed")
    ingest(story.ws, "w-renamed", "event_time,name,population\n2031-01-01T00:00:00Z,y,2\n")
    assert "w-d: 1 record " in ok(story.ws, "pull", "w-d")
    assert "w-d: ok" in ok(story.ws, "verify", "w-d", "--recursive")


def test_reset_moves_a_head_back_unless_a_dependent_consumed_later_blocks(story: Story) -> None:
    # w-renamed: ..., AddData (2030 watermark), AddData (y); w-d consumed both.
    blocks = json.loads(ok(story.ws, "log", "w-renamed", "-o", "json"))
    target = blocks[1]["hash"]
    line = refused(story.ws, "reset", "w-renamed", target)
    assert line.startswith("error: cannot reset 'w-renamed': w-d (it has consumed w-renamed's")
    assert story.head("w-renamed") == blocks[0]["hash"]
    forced = odf(story.ws, "reset", "w-renamed", target[:16], "--force")
    assert forced.returncode == 0, forced.stderr
    assert forced.stdout == f"w-renamed: head {target} (1 later block removed)\n"
    assert forced.stderr.startswith("warning: w-d (it has consumed")
    assert "FAILED" in odf(story.ws, "verify", "w-d").stdout  # its input is gone
    d_blocks = json.loads(ok(story.ws, "log", "w-d", "-o", "json"))
    ok(story.ws, "reset", "w-d", d_blocks[1]["hash"])
    assert "w-d: up to date" in ok(story.ws, "pull", "w-d")
    assert "w-d: ok" in ok(story.ws, "verify", "w-d", "--recursive")


def test_sql_reads_a_dataset_as_of_an_earlier_block_or_time(story: Story) -> None:
    then = story.head("villages")
    when = json.loads(ok(story.ws, "log", "villages", "-n", "1", "-o", "json"))[0]["block"][
        "systemTime"
    ]
    ingest(story.ws, "villages", "event_time,name,population\n2024-02-01T00:00:00Z,w,4\n")
    count = "SELECT count(*) AS n FROM villages"
    assert ok(story.ws, "sql", "-c", count).splitlines()[1] == "2"
    assert ok(story.ws, "sql", "-c", count, "--as-of", f"villages={then}").splitlines()[1] == "1"
    assert ok(story.ws, "sql", "-c", count, "--as-of", f"villages={when}").splitlines()[1] == "1"
    assert refused(story.ws, "sql", "-c", "SELECT 1 AS x", "--as-of", f"villages={then}") == (
        "error: --as-of: the query does not use dataset 'villages'"
    )


def test_compact_is_refused_while_a_derivative_consumed_the_dataset(story: Story) -> None:
    head = story.head("k")
    line = refused(story.ws, "compact", "k", "--hard")
    assert line == (  # k-bad never ran a transaction: it consumed nothing
        "error: cannot compact 'k': k-good consumed its blocks, whose hashes compaction changes;"
        " reset or delete those first"
    )
    assert story.head("k") == head
