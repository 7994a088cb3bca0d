"""Shell completion as bash runs it: ``eval "$(odf completion bash)"``, then a TAB.

bash calls the completion function with ``COMP_WORDS``, ``COMP_CWORD``, ``COMP_LINE`` and
``COMP_POINT`` set; the function runs ``odf`` under argcomplete's protocol and fills
``COMPREPLY``. Dataset names, repository aliases and config keys come from the fast path
(``coordinator.cli.complete``), which imports neither the command modules nor pyarrow nor an
engine; options still come from argcomplete over the whole parser.
"""

from __future__ import annotations

import json
import os
import resource
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.cli import REPO, ok
from tests.support.datasets import root

pytestmark = pytest.mark.e2e


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    ok(ws, "init")
    for i, name in enumerate(("com.example.cities", "com.example.weather", "nyc.taxi")):
        (ws / f"{i}.yaml").write_text(root(name, ["city STRING", "population BIGINT"]))
    ok(ws, "add", "0.yaml", "1.yaml", "2.yaml")
    ok(ws, "repo", "add", "origin", (tmp_path / "remote").as_uri())
    (ws / "deeper").mkdir()
    return ws


def tab(cwd: Path, line: str) -> list[str]:
    """What bash offers when TAB is pressed at the end of ``line`` (``COMPREPLY``)."""
    bin_dir = cwd.parent / "bin"
    bin_dir.mkdir(exist_ok=True)
    odf = bin_dir / "odf"
    odf.write_text(f'#!/bin/sh\nexec {shlex.quote(sys.executable)} -m coordinator "$@"\n')
    odf.chmod(0o755)
    words = line.split() + ([""] if line.endswith(" ") else [])
    script = (
        'eval "$(odf completion bash)"\n'
        f"COMP_WORDS=({' '.join(shlex.quote(w) for w in words)})\n"
        f"COMP_CWORD={len(words) - 1}\n"
        f"COMP_LINE={shlex.quote(line)}\n"
        f"COMP_POINT={len(line)}\n"
        f"_python_argcomplete odf {shlex.quote(words[-1])} {shlex.quote(words[-2])}\n"
        "printf '%s\\n' \"${COMPREPLY[@]}\"\n"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO), "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    result = subprocess.run(
        ["bash", "--norc", "--noprofile", "-c", script],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return [w.rstrip() for w in result.stdout.splitlines() if w.strip()]


def test_dataset_names_aliases_and_keys_complete_in_bash(workspace: Path) -> None:
    here = workspace / "deeper"  # the workspace is found by walking up, as every command does
    assert tab(here, "odf ta") == ["tail"]
    assert tab(here, "odf tail ") == ["com.example.cities", "com.example.weather", "nyc.taxi"]
    assert tab(here, "odf tail com.example.w") == ["com.example.weather"]
    assert tab(here, "odf -q log -n 3 ny") == ["nyc.taxi"]
    assert tab(here, "odf inspect schema com.example.c") == ["com.example.cities"]
    assert tab(here, "odf delete nyc.taxi com.") == ["com.example.cities", "com.example.weather"]
    assert tab(here, "odf pull or") == ["origin/"]
    assert tab(here, "odf push nyc.taxi --to ") == ["origin/"]
    assert tab(here, "odf repo delete ") == ["origin"]
    assert tab(here, "odf config get daemon.max") == ["daemon.maxParallel"]
    assert tab(here, "odf config set engine.p") == ["engine.provider"]
    assert tab(here, "odf inspect ") == ["schema", "lineage", "query", "transactions", "info"]
    # What the fast path leaves to argcomplete still completes.
    assert "--num-records" in tab(here, "odf tail --n")
    assert tab(here, "odf tail -o j") == ["json"]


def _tab_process(cwd: Path, line: str, answer: Path) -> tuple[list[str], set[str], float]:
    """One TAB as a process: its answer, the modules it imported and its CPU time."""
    code = (
        "import atexit, json, sys\n"
        "atexit.register(lambda: print(json.dumps(sorted(sys.modules)), file=sys.stderr))\n"
        "from coordinator.cli import main\n"
        "sys.exit(main())\n"
    )
    env = {
        "PYTHONPATH": str(REPO),
        "PATH": "/usr/bin:/bin",
        "_ARGCOMPLETE": "1",
        "_ARGCOMPLETE_SHELL": "bash",
        "_ARGCOMPLETE_STDOUT_FILENAME": str(answer),
        "COMP_LINE": line,
        "COMP_POINT": str(len(line)),
    }
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=cwd, env=env, capture_output=True, text=True, check=True
    )
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    modules = set(json.loads(result.stderr.strip().splitlines()[-1]))
    return answer.read_text().split("\v"), modules, cpu


def test_a_tab_imports_no_command_module_pyarrow_or_engine(workspace: Path) -> None:
    answer = workspace.parent / "answer"
    for line in ("odf tail com.example.c", "odf pull ", "odf config get daemon.m", "odf t"):
        found, modules, _ = _tab_process(workspace, line, answer)
        assert found and all(found), (line, found)
        heavy = {
            m
            for m in modules
            if m.split(".")[0] in ("pyarrow", "grpc", "yaml", "rich", "argcomplete", "engine_spark")
            or m.startswith(("coordinator.app", "coordinator.engine", "coordinator.dataset"))
            or (m.startswith("coordinator.cli.") and m != "coordinator.cli.complete")
        }
        assert heavy == set(), (line, sorted(heavy))


def test_a_tab_costs_under_150_ms(workspace: Path) -> None:
    """CPU time (what a TAB costs, nearly independent of the shared machine's load), median
    of 5, with ``python -c pass`` in the same run for scale (bench/bench_complete.py times
    the wall clock as well)."""
    answer = workspace.parent / "answer"
    tabs, passes = [], []
    for _ in range(5):
        tabs.append(_tab_process(workspace, "odf tail com.example.c", answer)[2])
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        subprocess.run([sys.executable, "-c", "pass"], check=True)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        passes.append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
    tab_cpu, pass_cpu = sorted(tabs)[2], sorted(passes)[2]
    print(f"TAB {tab_cpu * 1000:.1f} ms CPU, python -c pass {pass_cpu * 1000:.1f} ms")
    assert tab_cpu < 0.150, (tab_cpu, pass_cpu)
