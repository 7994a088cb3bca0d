"""A new user's first hour, through the CLI (no engine): global flags anywhere, suggestions
for mistyped commands and datasets, ``odf new`` templates that ``odf add`` takes, a
dataset's description, license and attachments shown by ``odf inspect info``, ``odf log -o
csv``."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest

from tests.support.cli import odf, ok
from tests.support.workspace import new_workspace

pytestmark = pytest.mark.e2e

DOCUMENTED = """\
kind: DatasetSnapshot
version: 1
content:
  name: weather
  kind: Root
  metadata:
    - kind: AddPushSource
      sourceName: main
      read: {kind: NdJson, schema: ["event_time TIMESTAMP", "temp DOUBLE"]}
      merge: {kind: Append}
    - kind: SetInfo
      description: "Hourly readings\\u001b[2J"
      keywords: [weather, sensors]
    - kind: SetLicense
      shortName: CC-BY-4.0
      name: Creative Commons Attribution 4.0
      spdxId: CC-BY-4.0
      websiteUrl: https://creativecommons.org/licenses/by/4.0/
    - kind: SetAttachments
      attachments:
        kind: Embedded
        items:
          - path: README.md
            content: "# Readings\\n\\nOne row per **hour**.\\n"
"""


@pytest.fixture(scope="module")
def ws(tmp_path_factory: pytest.TempPathFactory) -> Path:
    ws = new_workspace(tmp_path_factory.mktemp("first-hour") / "ws")
    (ws / "weather.yaml").write_text(DOCUMENTED)
    ok(ws, "add", "weather.yaml")
    return ws


def test_global_flags_work_after_the_command(ws: Path) -> None:
    assert ok(ws, "list", "-q") == ok(ws, "-q", "list")
    assert "weather" in ok(ws, "log", "weather", "--debug", "-o", "csv")


def test_mistyped_commands_and_datasets_get_suggestions(ws: Path) -> None:
    result = odf(ws, "lgo", "weather")
    assert result.returncode == 2
    assert result.stderr.strip() == (
        "odf: error: unknown command 'lgo'; did you mean 'log'? (see odf --help)"
    )
    result = odf(ws, "log", "wether")
    assert result.returncode == 1
    assert result.stderr.strip() == (
        "error: dataset 'wether' not found in the workspace; did you mean 'weather'?"
    )


def test_inspect_info_shows_what_a_dataset_is_escaped(ws: Path) -> None:
    text = ok(ws, "inspect", "info", "weather")
    lines = text.splitlines()
    assert lines[0] == "name: weather"
    assert lines[1].startswith("id: did:odf:") and lines[2] == "kind: Root"
    assert lines[3] == "description: Hourly readings\\x1b[2J"  # escaped, never run
    assert lines[4] == "keywords: weather, sensors"
    assert lines[5] == (
        "license: CC-BY-4.0 (Creative Commons Attribution 4.0, SPDX CC-BY-4.0,"
        " https://creativecommons.org/licenses/by/4.0/)"
    )
    assert "--- README.md (34 bytes)" in text and "One row per **hour**." in text
    document = json.loads(ok(ws, "inspect", "info", "weather", "-o", "json"))
    assert document["keywords"] == ["weather", "sensors"]
    assert document["attachments"][0]["path"] == "README.md"


def test_log_as_csv(ws: Path) -> None:
    rows = list(csv.DictReader(io.StringIO(ok(ws, "log", "weather", "-o", "csv"))))
    assert [r["event"] for r in rows] == [
        "SetAttachments",
        "SetLicense",
        "SetInfo",
        "AddPushSource",
        "Seed",
    ]
    assert all(r["system_time"].endswith("Z") for r in rows)


@pytest.mark.parametrize("template", ["push-csv", "push-ndjson", "files", "url"])
def test_new_writes_a_template_that_add_takes(ws: Path, template: str) -> None:
    name = f"from-{template}"
    assert ok(ws, "new", name, "--template", template) == (
        f"wrote {name}.yaml ({template}); edit it, then `odf add {name}.yaml`\n"
    )
    assert ok(ws, "add", f"{name}.yaml").startswith(f"added {name} (did:odf:")
    again = odf(ws, "new", name, "--template", template)
    assert again.returncode == 1 and "exists: give --force" in again.stderr
    assert ok(ws, "new", name, "-t", template, "--output", "-").startswith("# A DatasetSnapshot")


def test_a_dead_address_is_said_in_words_with_its_url_once(ws: Path) -> None:
    result = odf(ws, "pull", "http://127.0.0.1:1/x")
    assert result.returncode == 1
    assert result.stderr.strip() == (
        "error: http://127.0.0.1:1/x/refs/head: cannot connect to 127.0.0.1:1: connection refused"
    )
