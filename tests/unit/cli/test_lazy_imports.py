"""A command imports only what it uses: the command table, and what the quick commands load."""

from __future__ import annotations

import argparse
import importlib
import subprocess
import sys
from pathlib import Path

import pytest

from coordinator.cli import COMMANDS, build_parser, command_modules
from tests.support.cli import REPO, imported_by, ok

pytestmark = pytest.mark.process  # starts processes: out of `make test-fast`

HEAVY = ("pyarrow", "grpc", "docker", "pyspark", "structlog", "numpy", "Crypto")


def test_the_command_table_names_what_each_module_registers() -> None:
    for module_name, commands in COMMANDS.items():
        module = importlib.import_module(f"coordinator.cli.{module_name}")
        parser = argparse.ArgumentParser()
        subparsers = parser.add_subparsers()
        module.register(subparsers)
        assert tuple(subparsers.choices) == commands, module_name


@pytest.mark.parametrize(
    ("argv", "modules"),
    [
        (["list"], ["workspace"]),
        (["-v", "--debug", "log", "x"], ["inspect"]),
        (["ls"], ["workspace"]),
        (["--version"], []),
        ([], list(COMMANDS)),
        (["--help"], list(COMMANDS)),
        (["no-such-command"], list(COMMANDS)),
    ],
)
def test_only_the_commands_module_is_registered(argv: list[str], modules: list[str]) -> None:
    assert [m.__name__.rsplit(".", 1)[1] for m in command_modules(argv)] == modules


def test_full_help_lists_every_command() -> None:
    usage = build_parser(["--help"]).format_help()
    for commands in COMMANDS.values():
        assert all(c in usage for c in commands)


def test_quick_commands_load_no_heavy_library(tmp_path: Path) -> None:
    ok(tmp_path, "init")
    for args in (("--version",), ("list",), ("list", "-o", "json")):
        loaded = imported_by(tmp_path, *args)
        assert not loaded & set(HEAVY), (args, sorted(loaded & set(HEAVY)))


def test_list_and_log_load_neither_the_application_nor_pyarrow(tmp_path: Path) -> None:
    from common.odf.fragments import DatasetKind
    from common.odf.snapshot import DatasetSnapshot
    from coordinator.workspace import Workspace

    Workspace.init(tmp_path).create_dataset(
        DatasetSnapshot(name="a", kind=DatasetKind.ROOT, metadata=())
    )
    app = {"coordinator.app.application", "rich"}
    listed = imported_by(tmp_path, "list", whole=True)
    assert not listed & (app | set(HEAVY) | {"common.odf.events", "yaml"}), sorted(listed)
    logged = imported_by(tmp_path, "log", "a", whole=True)
    assert not logged & (app | set(HEAVY)), sorted(logged)


def test_quiet_ingest_of_a_csv_loads_neither_pandas_grpc_rich_nor_engines(tmp_path: Path) -> None:
    """pyarrow imports pandas on its first conversion of Python objects (0.7-1.5 s)."""
    from common.odf.events import AddPushSource
    from common.odf.fragments import DatasetKind, MergeStrategyAppend, ReadStepCsv
    from common.odf.snapshot import DatasetSnapshot
    from coordinator.workspace import Workspace

    source = AddPushSource(
        source_name="s",
        read=ReadStepCsv(header=True, schema=("event_time TIMESTAMP", "v STRING")),
        merge=MergeStrategyAppend(),
    )
    snapshot = DatasetSnapshot(name="a", kind=DatasetKind.ROOT, metadata=(source,))
    Workspace.init(tmp_path).create_dataset(snapshot)
    (tmp_path / "a.csv").write_text("event_time,v\n2024-01-01T00:00:00Z,x\n2024-01-02,y\n")
    loaded = imported_by(tmp_path, "-q", "ingest", "a", "a.csv", whole=True)
    assert not loaded & {"pandas", "grpc", "rich"}, sorted(loaded)  # -q: no bars, no rich
    engine = sorted(m for m in loaded if m.startswith("coordinator.engine"))
    assert not engine, engine  # no preprocess query: no engine code


def test_the_transaction_code_loads_the_output_readers_only_when_asked() -> None:
    """Hashing and pyarrow (with numpy) load while the engine works (``OUTPUT_MODULES``,
    imported in the background during the engine call), not before it: the Parquet exchange
    writes its schema files without pyarrow."""
    code = (
        "import sys\n"
        "import coordinator.transform.runner, coordinator.app.application\n"
        "from coordinator.transform.transaction import OUTPUT_MODULES\n"
        "early = [m for m in (*OUTPUT_MODULES, 'common.hashing.record_digest', 'pyarrow', 'numpy')"
        " if m in sys.modules]\n"
        "print(early)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"},
    )
    assert done.stdout.strip() == "[]"
