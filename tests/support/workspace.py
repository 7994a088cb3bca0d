"""A workspace driven through the CLI, as a user would: init, add snapshots, ingest files.

Every step is a real ``odf`` process (``tests.support.cli``); ``dataset`` opens a dataset of
the workspace in this process to look at what the commands wrote.
"""

from __future__ import annotations

from pathlib import Path

import yaml

from coordinator.dataset import Dataset
from coordinator.workspace import Workspace
from tests.support.cli import ok


def new_workspace(path: Path) -> Path:
    """``odf init`` in ``path`` (created); returns it."""
    path.mkdir(parents=True, exist_ok=True)
    ok(path, "init")
    return path


def add(ws: Path, *snapshots: str) -> None:
    """Write each snapshot to ``<name>.yaml`` in ``ws`` and ``odf add`` them in one call."""
    files = []
    for text in snapshots:
        name = yaml.safe_load(text)["content"]["name"]
        (ws / f"{name}.yaml").write_text(text)
        files.append(f"{name}.yaml")
    ok(ws, "add", *files)


def ingest(ws: Path, name: str, text: str, *, file: str | None = None, source: str = "") -> None:
    """Write ``text`` to ``file`` (default ``<name>.csv``) in ``ws`` and ``odf ingest`` it."""
    file = file or f"{name}.csv"
    (ws / file).write_text(text)
    ok(ws, "ingest", name, file, *(["--source-name", source] if source else []))


def dataset(ws: Path, name: str) -> Dataset:
    """The dataset ``name`` of the workspace at ``ws``, opened in this process."""
    return Workspace(ws).open_dataset(name)
