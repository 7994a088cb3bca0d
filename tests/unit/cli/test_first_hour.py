"""Small things a new user trips over: global flags after the command, suggestions for a
mistyped command or dataset, snapshot templates that ``odf add`` takes as they are."""

from __future__ import annotations

import pytest

from common.serde.yaml_codec import load_snapshot
from coordinator.cli import hoist_global_flags, unknown_command
from coordinator.cli.new import TEMPLATES, snapshot_text
from coordinator.dataset.errors import DatasetNotFoundError


def test_global_flags_move_before_the_command_until_a_double_dash() -> None:
    assert hoist_global_flags(["pull", "x", "-q"]) == ["-q", "pull", "x"]
    assert hoist_global_flags(["-v", "tail", "x", "--debug"]) == ["-v", "--debug", "tail", "x"]
    assert hoist_global_flags(["sql", "-c", "x", "--", "-q"]) == ["sql", "-c", "x", "--", "-q"]


def test_a_mistyped_command_gets_the_closest_ones() -> None:
    assert unknown_command(["pul", "x"]) == (
        "odf: error: unknown command 'pul'; did you mean 'pull'? (see odf --help)"
    )
    assert unknown_command(["-q", "lst"]) == (
        "odf: error: unknown command 'lst'; did you mean 'list' or 'ls'? (see odf --help)"
    )
    assert unknown_command(["xyzzy"]) == "odf: error: unknown command 'xyzzy' (see odf --help)"
    assert unknown_command(["pull", "x"]) is None
    assert unknown_command(["--help"]) is None
    assert "\x1b" not in (unknown_command(["\x1b[31mpull"]) or "")


def test_a_mistyped_dataset_gets_the_closest_names() -> None:
    known = ["weather", "Cities", "population"]
    assert str(DatasetNotFoundError("wether", known)).endswith("; did you mean 'weather'?")
    assert str(DatasetNotFoundError("citys", known)).endswith("; did you mean 'Cities'?")
    assert str(DatasetNotFoundError("zzz", known)) == "dataset 'zzz' not found in the workspace"


@pytest.mark.parametrize("template", list(TEMPLATES))
def test_every_template_is_a_valid_snapshot(template: str) -> None:
    snapshot = load_snapshot(snapshot_text("my-data", template, "my-data.yaml"), source="t")
    assert str(snapshot.name) == "my-data"
    assert snapshot.kind.value == ("Derivative" if template == "derivative" else "Root")
