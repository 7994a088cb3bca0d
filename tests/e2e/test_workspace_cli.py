"""``odf init/add/list/delete/log/tail/inspect schema`` run as a real process."""

from __future__ import annotations

import csv
import io
import json
import os
import pty
import subprocess
import sys
from functools import partial
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml

from common.odf.events import MetadataEvent
from common.serde.flatbuffers_codec import block_hash, encode_block
from common.serde.yaml_codec import load_block_manifest, load_snapshots
from coordinator.dataset import CommitItem
from coordinator.workspace import Workspace
from tests.support.cli import REPO, odf, ok
from tests.support.cli import fails as fails_with
from tests.support.datasets import derivative, root
from tests.unit.coordinator.events import add_data_for, set_schema, write_slice

pytestmark = pytest.mark.e2e


def cities(name: str = "com.example.cities") -> str:
    return root(
        name,
        ["city STRING", "population BIGINT"],
        merge="Ledger",
        primary_key=["city"],
        source="default",
        events=[{"kind": "SetInfo", "description": "Cities of the world"}],
    )


def big_cities(name: str = "com.example.big-cities", source: str = "com.example.cities") -> str:
    return derivative(
        name,
        "SELECT * FROM `com.example.cities` WHERE population > 1000000",
        [source],
        version="sha256:0123abcd",
    )


ROOT_SNAPSHOT = cities()
DERIVED_SNAPSHOT = big_cities()
fails = partial(fails_with, only_line=True)


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    assert "initialized" in ok(tmp_path, "init")
    manifests = tmp_path / "manifests" / "nested"
    manifests.mkdir(parents=True)
    # Alphabetically the derivative comes first: add must create its input first anyway.
    (manifests / "a-big-cities.yaml").write_text(DERIVED_SNAPSHOT)
    (manifests / "b-cities.yaml").write_text(ROOT_SNAPSHOT)
    out = ok(tmp_path, "add", "--recursive", "manifests")
    assert out.index("com.example.cities (did:odf:") < out.index("com.example.big-cities")
    return tmp_path


def test_list_in_every_format(workspace: Path) -> None:
    sub = workspace / "manifests"
    rows = json.loads(ok(sub, "list", "-o", "json"))  # found by walking up
    assert [(r["name"], r["kind"], r["blocks"], r["records"]) for r in rows] == [
        ("com.example.big-cities", "Derivative", 2, 0),
        ("com.example.cities", "Root", 3, 0),
    ]
    assert all(r["head"].startswith("f1620") for r in rows)
    assert yaml.safe_load(ok(workspace, "list", "-o", "yaml")) == rows
    parsed = list(csv.DictReader(io.StringIO(ok(workspace, "ls", "-o", "csv"))))
    assert [r["name"] for r in parsed] == ["com.example.big-cities", "com.example.cities"]
    table = ok(workspace, "list")
    assert table.splitlines()[0].split()[:3] == ["name", "kind", "head"]
    assert "com.example.cities" in table


def test_list_shows_a_broken_dataset_and_the_others(workspace: Path) -> None:
    datasets = workspace / ".odf" / "datasets"
    (datasets / "com.example.cities" / "refs" / "head").write_text("garbage")
    block = sorted((datasets / "com.example.big-cities" / "blocks").iterdir())[0]
    block.write_bytes(b"not a block")
    healthy = Workspace(workspace).create_dataset(load_snapshots(cities("com.example.healthy"))[0])
    for fmt in ("json", "yaml", "csv", "table"):
        result = odf(workspace, "list", "-o", fmt)
        assert result.returncode == 1, result
        assert result.stderr == (
            "error: 2 broken datasets: com.example.big-cities, com.example.cities\n"
        )
        if fmt == "json":
            rows = {r["name"]: r for r in json.loads(result.stdout)}
            assert rows["com.example.cities"]["error"].startswith("refs/head: not a multihash")
            assert rows["com.example.cities"]["head"] is None
            assert "content does not match its hash" in rows["com.example.big-cities"]["error"]
            assert rows["com.example.healthy"]["error"] is None
            assert rows["com.example.healthy"]["head"] == str(healthy.head())
        elif fmt == "yaml":
            assert len(yaml.safe_load(result.stdout)) == 3
        elif fmt == "csv":
            parsed = list(csv.DictReader(io.StringIO(result.stdout)))
            assert [bool(r["error"]) for r in parsed] == [True, True, False]
        else:
            lines = result.stdout.splitlines()
            assert lines[0].split()[-1] == "error" and len(lines) == 4
            assert lines[3].split()[:2] == ["com.example.healthy", "Root"]


def test_log_shows_blocks_and_round_trips_as_manifests(workspace: Path) -> None:
    table = ok(workspace, "log", "com.example.big-cities")
    assert "SetTransform" in table and "version=sha256:0123abcd" in table
    assert "Seed" in table
    docs = ok(workspace, "log", "com.example.cities", "-o", "yaml").split("--- # ")[1:]
    assert len(docs) == 3
    for doc in docs:
        hash_text, manifest = doc.split("\n", 1)
        block = load_block_manifest(manifest)
        assert str(block_hash(encode_block(block))) == hash_text
    entries = json.loads(ok(workspace, "log", "COM.EXAMPLE.CITIES", "-o", "json", "-n", "1"))
    assert len(entries) == 1
    assert entries[0]["block"]["event"] == {
        "kind": "SetInfo",
        "description": "Cities of the world",
    }


def test_tail_and_schema_after_data_is_committed(workspace: Path) -> None:
    fails_before = fails(workspace, "inspect", "schema", "com.example.cities")
    assert "has no schema yet" in fails_before
    ds = Workspace(workspace).open_dataset("com.example.cities")
    prev = None
    for start, count in ((0, 4), (4, 3)):
        with ds.staging_dir() as staging:
            path = write_slice(staging, start, count)
            items: list[CommitItem | MetadataEvent] = [] if prev is not None else [set_schema()]
            items.append(CommitItem(add_data_for(path, prev, start, count), data_file=path))
            ds.commit_events(items, expected_head=ds.head())
        prev = start + count - 1
    records = json.loads(ok(workspace, "tail", "com.example.cities", "-n", "5", "-o", "json"))
    assert [r["offset"] for r in records] == [2, 3, 4, 5, 6]
    assert records[-1]["city"] == "city-6"
    assert records[0]["event_time"] == "2024-01-01T12:02:00Z"
    rows = list(
        csv.DictReader(io.StringIO(ok(workspace, "tail", "com.example.cities", "-o", "csv")))
    )
    assert len(rows) == 7 and rows[0]["population"] == "1000"
    schema = json.loads(ok(workspace, "inspect", "schema", "com.example.cities", "-o", "json"))
    assert schema[0] == {"name": "offset", "type": "int64", "nullable": True}
    assert [c["name"] for c in schema][-2:] == ["city", "population"]
    assert "timestamp[ms, tz=UTC]" in ok(workspace, "inspect", "schema", "com.example.cities")
    listed = json.loads(ok(workspace, "list", "-o", "json"))
    assert [r["records"] for r in listed] == [0, 7]


def test_bad_snapshot_names_file_and_field_and_adds_nothing(workspace: Path) -> None:
    before = ok(workspace, "list", "-o", "json")
    bad = workspace / "bad.yaml"
    bad.write_text(cities("other").replace("kind: Root", "kind: Rooot"))
    line = fails(workspace, "add", "bad.yaml")
    assert "bad.yaml" in line and "kind" in line
    bad.write_text("kind: DatasetSnapshot\nversion: 1\ncontent: [unclosed\n")
    assert "bad.yaml" in fails(workspace, "add", "bad.yaml")
    good = workspace / "good.yaml"
    good.write_text(cities("com.example.new"))
    # One bad file among good ones: nothing is added.
    assert "bad.yaml" in fails(workspace, "add", "good.yaml", "bad.yaml")
    assert "already exists" in fails(workspace, "add", "manifests/nested/b-cities.yaml")
    (workspace / "missing.yaml").write_text(big_cities("com.example.other", source="nope"))
    line = fails(workspace, "add", "missing.yaml")
    assert "inputs[0].datasetRef" in line and "'nope'" in line
    assert "is a directory" in fails(workspace, "add", "manifests")
    assert ok(workspace, "list", "-o", "json") == before


@pytest.mark.parametrize(
    ("snapshot", "message"),
    [
        (
            root("s", ["event_time TIMESTAMP", "a STRNG"]),
            "metadata[0].read.schema[1]: unsupported type STRNG for column 'a'",
        ),
        (
            root("s", ["city STRING", "n BIGINT"], merge="Ledger", primary_key=["id"]),
            "metadata[0].merge.primaryKey[0]: column 'id' is not in the schema"
            " (columns: city, n, event_time)",
        ),
        (
            root("s", ["time TIMESTAMP", "temp DOUBLE"], event_time="ts"),
            "metadata[0].read.schema: the event-time column 'ts' (SetVocab.eventTimeColumn)"
            " is not in the schema (columns: time, temp)",
        ),
        (
            root("s", ["ts STRING", "temp DOUBLE"], event_time="ts"),
            "metadata[0].read.schema: the event-time column 'ts' must be a DATE or TIMESTAMP,"
            " got string",
        ),
        (
            root("s", ["offset BIGINT", "temp DOUBLE"]),
            "metadata[0].read.schema: column 'offset' is a system column: the ingest writes it",
        ),
    ],
)
def test_add_refuses_sources_that_cannot_work_naming_file_and_field(
    tmp_path: Path, snapshot: str, message: str
) -> None:
    ok(tmp_path, "init")
    (tmp_path / "s.yaml").write_text(snapshot)
    assert fails(tmp_path, "add", "s.yaml") == f"error: s.yaml: {message}"
    assert ok(tmp_path, "list", "-o", "json") == "[]\n"


def test_add_of_several_files_checks_all_then_adds_all_or_none(tmp_path: Path) -> None:
    ok(tmp_path, "init")
    (tmp_path / "a.yaml").write_text(cities("a"))
    (tmp_path / "b.yaml").write_text(root("b", ["event_time TIMESTAMP", "a STRNG"]))
    (tmp_path / "c.yaml").write_text(big_cities("c", source="a"))  # an input of the batch
    line = fails(tmp_path, "add", "a.yaml", "b.yaml", "c.yaml")
    assert (
        line == "error: b.yaml: metadata[0].read.schema[1]: unsupported type STRNG for column 'a'"
    )
    assert ok(tmp_path, "list", "-o", "json") == "[]\n"
    (tmp_path / "d.yaml").write_text(big_cities("d", source="nope"))
    line = fails(tmp_path, "add", "c.yaml", "a.yaml", "d.yaml")
    assert line.startswith("error: d.yaml: metadata[0].inputs[0].datasetRef: input dataset 'nope'")
    assert ok(tmp_path, "list", "-o", "json") == "[]\n"
    (tmp_path / "long.yaml").write_text(cities("x" * 300))  # a name no directory can have
    line = fails(tmp_path, "add", "a.yaml", "long.yaml")
    assert line == (
        "error: long.yaml: name: 300 bytes long: a dataset's directory name holds at most 255 here"
    )
    (tmp_path / "b.yaml").write_text(root("b", ["event_time TIMESTAMP", "a STRING"]))
    out = ok(tmp_path, "add", "c.yaml", "b.yaml", "a.yaml")
    added = [line.split()[1] for line in out.splitlines()]
    assert sorted(added) == ["a", "b", "c"] and added.index("a") < added.index("c")
    refused = fails(tmp_path, "config", "set", "daemon.schedules", "{a: 10m, nope: 1h}")
    assert refused == "error: daemon.schedules: dataset 'nope' not found in the workspace"
    ok(tmp_path, "config", "set", "daemon.schedules", "{A: 10m, c: 1h}")


def test_unknown_dataset_and_no_workspace(
    workspace: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    for command in (
        ["log", "nope"],
        ["tail", "nope"],
        ["inspect", "schema", "nope"],
        ["delete", "nope"],
    ):
        assert fails(workspace, *command) == "error: dataset 'nope' not found in the workspace"
    elsewhere = tmp_path_factory.mktemp("elsewhere")
    assert fails(elsewhere, "list") == "error: not inside an odf workspace (run `odf init`)"


def test_delete(workspace: Path) -> None:
    assert "is an input of com.example.big-cities" in fails(
        workspace, "delete", "com.example.cities"
    )
    ok(workspace, "delete", "com.example.big-cities")
    ok(workspace, "rm", "com.example.cities")
    assert json.loads(ok(workspace, "list", "-o", "json")) == []
    assert not list((workspace / ".odf" / "keys").iterdir())


def test_version_names_the_package_the_spec_and_the_engine(tmp_path: Path) -> None:
    result = odf(tmp_path, "--version")  # no workspace needed
    assert result.returncode == 0, result.stderr
    package, spec, engine = result.stdout.splitlines()
    assert package.startswith("odf ") and spec == "ODF spec 0.35.0"
    assert engine.startswith("embedded engine odf-engine-spark/") and "pyspark/" in engine


def test_delete_recursive_lists_dependents_and_needs_a_confirmation(workspace: Path) -> None:
    (workspace / "more.yaml").write_text(
        big_cities("com.example.huge-cities", "com.example.big-cities")
    )
    ok(workspace, "add", "more.yaml")
    refused = odf(workspace, "delete", "com.example.cities")
    assert refused.returncode == 1 and "is an input of com.example.big-cities" in refused.stderr
    unconfirmed = odf(workspace, "delete", "--recursive", "com.example.cities", stdin="")
    assert unconfirmed.returncode == 1
    assert unconfirmed.stderr == (
        "error: --recursive: would delete com.example.huge-cities, com.example.big-cities,"
        " com.example.cities; confirm with --yes\n"
    )
    assert len(ok(workspace, "list", "-o", "csv").splitlines()) == 4  # nothing deleted
    out = ok(workspace, "delete", "-r", "-y", "com.example.cities")
    assert out.splitlines() == [
        "deleted com.example.huge-cities",
        "deleted com.example.big-cities",
        "deleted com.example.cities",
    ]
    assert ok(workspace, "list", "-o", "csv").splitlines()[1:] == []  # the header alone


def test_rename_keeps_identity_and_dependents(workspace: Path) -> None:
    before = ok(workspace, "log", "com.example.cities", "-o", "json")
    assert ok(workspace, "rename", "com.example.cities", "cities") == (
        "renamed com.example.cities to cities\n"
    )
    assert ok(workspace, "log", "cities", "-o", "json") == before  # same blocks, same id
    lineage = ok(workspace, "inspect", "lineage", "cities")
    assert "└── com.example.big-cities (Derivative)" in lineage  # still its dependent
    taken = odf(workspace, "rename", "cities", "com.example.big-cities")
    assert taken.stderr == "error: dataset 'com.example.big-cities' already exists\n"
    bad = odf(workspace, "rename", "cities", "no spaces")
    assert bad.returncode == 1 and bad.stderr.startswith("error: name: ")


def test_export_writes_records_in_offset_order_and_overwrites_only_with_force(
    workspace: Path, tmp_path: Path
) -> None:
    (workspace / "c.csv").write_text("city,population\nA,1\nB,2\nC,3\n")
    ok(workspace, "ingest", "com.example.cities", "c.csv")
    (workspace / "d.csv").write_text("city,population\nD,4\n")
    ok(workspace, "ingest", "com.example.cities", "d.csv")
    out = tmp_path / "cities.csv"
    said = ok(workspace, "export", "com.example.cities", "--format", "csv", "--output", str(out))
    assert said == f"exported 4 records of com.example.cities to {out} (1 file)\n"
    rows = list(csv.DictReader(io.StringIO(out.read_text())))
    assert [(r["offset"], r["city"]) for r in rows] == [
        ("0", "A"),
        ("1", "B"),
        ("2", "C"),
        ("3", "D"),
    ]
    parts = tmp_path / "parts"
    ok(workspace, "export", "com.example.cities", "--format", "ndjson", "--output", str(parts),
       "--partition-size", "3")  # fmt: skip
    assert sorted(p.name for p in parts.iterdir()) == ["part-00000.ndjson", "part-00001.ndjson"]
    first = [json.loads(line) for line in (parts / "part-00000.ndjson").read_text().splitlines()]
    assert [r["city"] for r in first] == ["A", "B", "C"]
    parquet = tmp_path / "cities.parquet"
    ok(workspace, "export", "com.example.cities", "--output", str(parquet))
    assert pq.read_table(parquet).column("population").to_pylist() == [1, 2, 3, 4]
    again = odf(workspace, "export", "com.example.cities", "--output", str(parquet))
    assert again.returncode == 1
    assert again.stderr == f"error: {parquet}: already exists (use --force to replace it)\n"
    ok(workspace, "export", "com.example.cities", "--output", str(parquet), "--format", "csv",
       "--force")  # fmt: skip
    assert out.read_text() == parquet.read_text()  # replaced: CSV now
    ok(workspace, "export", "com.example.cities", "--format", "csv", "--output", str(parts),
       "--partition-size", "2", "--force")  # fmt: skip
    assert sorted(p.name for p in parts.iterdir()) == ["part-00000.csv", "part-00001.csv"]
    assert (
        sorted(p.name for p in tmp_path.iterdir() if "partial" in p.name or ".old" in p.name) == []
    )


def test_export_creates_parents_streams_to_stdout_and_leaves_nothing_on_failure(
    workspace: Path, tmp_path: Path
) -> None:
    (workspace / "c.csv").write_text("city,population\nA,1\nB,2\n")
    ok(workspace, "ingest", "com.example.cities", "c.csv")
    nested = tmp_path / "new" / "deeper" / "cities.ndjson"
    ok(workspace, "export", "com.example.cities", "--format", "ndjson", "--output", str(nested))
    assert [json.loads(line)["city"] for line in nested.read_text().splitlines()] == ["A", "B"]
    streamed = {}
    for fmt in ("csv", "ndjson", "parquet"):
        result = subprocess.run(
            [sys.executable, "-m", "coordinator", "export", "com.example.cities", "--format", fmt,
             "--output", "-"],
            cwd=workspace, capture_output=True, check=False,
            env={**os.environ, "PYTHONPATH": str(REPO)},
        )  # fmt: skip
        assert result.returncode == 0, result.stderr
        assert result.stderr == b"exported 2 records of com.example.cities to stdout\n"
        streamed[fmt] = result.stdout
    assert streamed["csv"] == (
        ok(workspace, "export", "com.example.cities", "--format", "csv", "--output", "-").encode()
    )
    assert [r["city"] for r in csv.DictReader(io.StringIO(streamed["csv"].decode()))] == ["A", "B"]
    assert [json.loads(x)["population"] for x in streamed["ndjson"].splitlines()] == [1, 2]
    table = pq.read_table(pa.BufferReader(streamed["parquet"]))
    assert table.column("city").to_pylist() == ["A", "B"]
    assert not (workspace / "-").exists()
    # a reader that stops early (| head): a quiet end, exit code 0
    rows = "".join(f"C{i},{i}\n" for i in range(5000))
    (workspace / "many.csv").write_text("city,population\n" + rows)
    ok(workspace, "ingest", "com.example.cities", "many.csv")
    piped = subprocess.run(
        ["bash", "-c", f"{sys.executable} -m coordinator export com.example.cities --format"
         " ndjson --output - | head -c 10; exit ${PIPESTATUS[0]}"],
        cwd=workspace, capture_output=True, text=True, check=False,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )  # fmt: skip
    assert (piped.returncode, piped.stdout, piped.stderr) == (0, '{"offset":', "")
    refused = fails(workspace, "export", "com.example.cities", "--output", "-",
                    "--partition-size", "1")  # fmt: skip
    assert refused == "error: --partition-size: cannot be used with --output - (one stream)"
    # --force never replaces a directory that is not an earlier partitioned export
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep")
    refused = fails(workspace, "export", "com.example.cities", "--output", str(tmp_path / "mine"),
                    "--partition-size", "1", "--force")  # fmt: skip
    assert "is a directory holding 'notes.txt', not an earlier partitioned export" in refused
    assert (tmp_path / "mine" / "notes.txt").read_text() == "keep"
    # A data file that cannot be read: one line, and neither the file nor its parents appear.
    data = next((workspace / ".odf" / "datasets" / "com.example.cities" / "data").iterdir())
    data.write_bytes(data.read_bytes()[:20])
    target = tmp_path / "absent" / "dir" / "cities.csv"
    refused = fails(workspace, "export", "com.example.cities", "--format", "csv",
                    "--output", str(target))  # fmt: skip
    assert refused.startswith(f"error: {data}: a data file of 'com.example.cities' cannot be read")
    assert not (tmp_path / "absent").exists()


def test_config_list_get_set_unset_with_validation(workspace: Path) -> None:
    listed = dict(
        line.split(",", 1) for line in ok(workspace, "config", "list", "-o", "csv").splitlines()[1:]
    )
    assert listed["engine.provider"] == "embedded" and listed["daemon.maxParallel"] == "2"
    ok(workspace, "config", "set", "daemon.maxParallel", "4")
    ok(workspace, "config", "set", "daemon.schedules", "{com.example.cities: 10m}")
    assert ok(workspace, "config", "get", "daemon.maxParallel") == "4\n"
    assert ok(workspace, "config", "get", "daemon.schedules") == "com.example.cities=every 600s\n"
    before = (workspace / ".odf" / "config.yaml").read_text()
    bad = odf(workspace, "config", "set", "daemon.maxParallel", "zero")
    assert bad.stderr == "error: daemon.maxParallel: expected an integer, got string 'zero'\n"
    assert (workspace / ".odf" / "config.yaml").read_text() == before  # unchanged
    ok(workspace, "config", "unset", "daemon.maxParallel")
    assert ok(workspace, "config", "get", "daemon.maxParallel") == "2\n"


def test_completion_code_and_completions(workspace: Path) -> None:
    for shell in ("bash", "zsh", "fish"):
        assert "_ARGCOMPLETE" in ok(workspace, "completion", shell)
    env = {
        "_ARGCOMPLETE": "1",
        "_ARGCOMPLETE_IFS": "\n",
        "COMP_LINE": "odf config get daemon.m",
        "COMP_POINT": "23",
    }
    # As the shell code runs it: completions on fd 8, debug output on fd 9.
    result = subprocess.run(
        ["bash", "-c", f"{sys.executable} -m coordinator 8>&1 9>/dev/null"],
        cwd=workspace,
        env={**os.environ, "PYTHONPATH": str(REPO), **env},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    completions = result.stdout
    assert result.returncode == 0, result.stderr
    assert completions.split() == ["daemon.maxParallel"]


def run_with_terminal_stderr(cwd: Path, *args: str) -> tuple[int, str, str]:
    """``odf ARGS`` with stderr on a pseudo-terminal (so progress may show), stdout a pipe."""
    main, tty = pty.openpty()
    try:
        process = subprocess.Popen(
            [sys.executable, "-m", "coordinator", *args],
            cwd=cwd,
            env={**os.environ, "PYTHONPATH": str(REPO), "COLUMNS": "100", "TERM": "xterm"},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=tty,
            text=True,
        )
        os.close(tty)
        tty = -1
        chunks = []
        while True:
            try:
                data = os.read(main, 4096)
            except OSError:  # the terminal closed: the process is gone
                break
            if not data:
                break
            chunks.append(data)
        out = process.stdout.read() if process.stdout else ""
        code = process.wait(60)
    finally:
        os.close(main)
        if tty >= 0:
            os.close(tty)
    return code, out, b"".join(chunks).decode(errors="replace")


def test_progress_shows_on_a_terminal_and_never_in_machine_readable_output(
    workspace: Path,
) -> None:
    (workspace / "c.csv").write_text("city,population\nA,1\n")
    ok(workspace, "ingest", "com.example.cities", "c.csv")
    code, out, err = run_with_terminal_stderr(workspace, "verify", "com.example.cities")
    assert code == 0 and "com.example.cities: ok" in out
    assert "verify com.example.cities" in err  # the progress line, on the terminal
    code, out, err = run_with_terminal_stderr(
        workspace, "verify", "com.example.cities", "-o", "json"
    )
    assert code == 0 and json.loads(out)[0]["ok"] is True  # stdout is the document alone
    assert "verify com.example.cities" not in err
    code, out, err = run_with_terminal_stderr(workspace, "--quiet", "verify", "com.example.cities")
    assert code == 0 and "verify com.example.cities" not in err


def test_compact_merges_data_files_and_keeps_every_record(workspace: Path, tmp_path: Path) -> None:
    name = "com.example.cities"
    for i in range(3):
        (workspace / f"{i}.csv").write_text(f"city,population\nc{i},{i}\nd{i},{i + 10}\n")
        ok(workspace, "ingest", name, f"{i}.csv")
    ok(workspace, "set-watermark", name, "2031-01-01T00:00:00Z")
    (workspace / "3.csv").write_text("city,population\ne,3\n")
    ok(workspace, "ingest", name, "3.csv")
    before = tmp_path / "before.csv"
    ok(workspace, "export", name, "--format", "csv", "--output", str(before))
    blocks = len(json.loads(ok(workspace, "log", name, "-o", "json")))
    refused = odf(workspace, "compact", name)
    assert refused.returncode == 1 and "confirm with --hard" in refused.stderr
    assert len(json.loads(ok(workspace, "log", name, "-o", "json"))) == blocks  # unchanged
    out = ok(workspace, "compact", name, "--hard")
    assert out.startswith(f"{name}: 4 data files in {blocks} blocks -> 1 in {blocks - 4} (head")
    after = tmp_path / "after.csv"
    ok(workspace, "export", name, "--format", "csv", "--output", str(after))
    assert after.read_bytes() == before.read_bytes()  # the same records, offsets and times
    assert "ok" in ok(workspace, "verify", name)
    listed = ok(workspace, "list", "-o", "json")
    watermark = next(d for d in json.loads(listed) if d["name"] == name)["watermark"]
    assert watermark.startswith("2031-01-01")
    derived = odf(workspace, "compact", "com.example.big-cities", "--hard")
    assert derived.returncode == 1 and "is not a root dataset" in derived.stderr
