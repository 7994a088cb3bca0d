"""The fast path of completion (``coordinator.cli.complete``) agrees with the CLI it stands for."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from coordinator.cli import build_parser
from coordinator.cli import complete as c
from coordinator.config import SETTINGS
from coordinator.sharing.repos import REPOS_FILE
from coordinator.workspace import WORKSPACE_DIR, Workspace
from tests.support.datasets import root


def _kind(path: tuple[str, ...], action: argparse.Action) -> str:
    if action.metavar == "KEY":
        return c.KEY
    if action.metavar != "NAME" or path in (("repo", "add"), ("new",)):  # names to be
        return c.OTHER
    return {("pull",): c.PULLABLE, ("repo", "delete"): c.REPO}.get(path, c.DATASET)


def _shapes(parser: argparse.ArgumentParser, path: tuple[str, ...]) -> dict:
    found = {}
    positionals = [a for a in parser._actions if not a.option_strings]
    subparsers = [a for a in positionals if isinstance(a, argparse._SubParsersAction)]
    plain = [a for a in positionals if a not in subparsers]
    if path:
        valued = {
            s
            for a in parser._actions
            if a.option_strings and a.nargs != 0
            for s in a.option_strings
        }
        found[path] = c.Shape(
            tuple(_kind(path, a) for a in plain),
            bool(plain) and plain[-1].nargs in ("+", "*"),
            frozenset(valued),
        )
    for action in subparsers:
        for name, sub in action.choices.items():
            found |= _shapes(sub, (*path, name))
    return found


def test_the_grammar_is_the_parsers() -> None:
    """Every command of the parser, exactly (the grammar may know commands merged later)."""
    shapes = _shapes(build_parser(), ())
    assert shapes == {path: c.GRAMMAR.get(path) for path in shapes}


def test_the_copied_names_are_the_originals() -> None:
    assert tuple(SETTINGS) == c.CONFIG_KEYS
    assert (c.WORKSPACE_DIR, c.REPOS_FILE) == (WORKSPACE_DIR, REPOS_FILE)


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    ws = Workspace.init(tmp_path)
    from common.serde.yaml_codec import load_snapshots

    for name in ("com.example.cities", "Com.Example.Big", "weather"):
        for snapshot in load_snapshots(root(name, ["city STRING"])):
            ws.create_dataset(snapshot)
    (ws.odf_dir / "datasets" / ".creating-x").mkdir()  # a dataset being made is not offered
    (ws.odf_dir / REPOS_FILE).write_text(json.dumps({"repos": {"origin": "file:///r"}}))
    (tmp_path / "sub").mkdir()
    return tmp_path


def test_dataset_names_are_the_workspaces(workspace: Path) -> None:
    ws = Workspace.find(workspace)
    assert c.dataset_names(ws.odf_dir) == [p.name for p in ws.dataset_dirs()]


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("", [*dict.fromkeys(p[0] for p in c.GRAMMAR)]),
        ("new ", None),  # the name of a dataset still to be made
        ("ta", ["tail"]),
        ("tail ", ["Com.Example.Big", "com.example.cities", "weather"]),
        ("tail com.", ["com.example.cities"]),
        ("tail com.example.b", ["Com.Example.Big"]),  # names are case-insensitive
        ("-q tail -n 5 w", ["weather"]),
        ("tail -o json w", ["weather"]),
        ("tail weather ", None),  # no positional left: options
        ("delete weather w", ["weather"]),
        ("ingest weather ", None),  # a file: argcomplete's
        ("pull o", ["origin/"]),
        ("push weather --to ", ["origin/"]),
        ("repo delete ", ["origin"]),
        ("repo ", ["add", "list", "delete"]),
        ("inspect schema c", ["com.example.cities"]),
        ("config get daemon.m", ["daemon.maxParallel"]),
        ("config set daemon.maxParallel ", None),
        ("tail --", None),
        ("tail -n ", None),
        ("nonsense ", None),
        ("--bogus tail ", None),
    ],
)
def test_candidates(workspace: Path, line: str, expected: list[str] | None) -> None:
    words, prefix, _ = c.split_line(line)
    assert c.candidates(words, prefix, workspace / "sub") == expected


def test_outside_a_workspace_no_names(tmp_path: Path) -> None:
    assert c.candidates(["tail"], "", tmp_path) == []


@pytest.mark.parametrize(
    ("text", "split"),
    [
        ("odf tail  x", (["odf", "tail"], "x", "")),
        ("odf tail 'a b", (["odf", "tail"], "a b", "'")),
        ('odf "a b" c\\ d', (["odf", "a b"], "c d", "")),
        ("odf tail ", (["odf", "tail"], "", "")),
        ("odf '' ", (["odf", ""], "", "")),
    ],
)
def test_split_line(text: str, split: tuple[list[str], str, str]) -> None:
    assert c.split_line(text) == split
