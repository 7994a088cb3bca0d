"""Where a dataset's code comes from, and what of it may run on this machine.

The one place that decides "may this dataset's source or transform run here":

- **A clone is a replica.** A dataset pulled from a remote (it has a pull alias in
  ``info/remotes.json``) is never changed by its publisher's code here: its polling source
  (fetch, prepare steps, container) and its transform never run, by whatever path
  (``odf pull -r``, ``--all``, the daemon's scheduler and lineage, a dependent's pull), nor
  are they rewritten (``set-transform``, ``compact``): ``check_may_run`` refuses, naming the
  dataset and its remote. What the user brings is theirs to add: ``odf ingest`` and
  ``set-watermark`` into a clone stay allowed (the push source only reads the user's file;
  that is how one contributes to a dataset and pushes it back). ``odf verify`` still replays
  a clone's transform in the engine's sandbox: that checks it and changes nothing.
- **Code written elsewhere runs only once trusted.** ``odf detach NAME`` turns a clone into a
  local dataset and records where its source was written (``info/trust.json``). Before its
  polling source runs a command here (a ``Pipe`` prepare step, a ``Container`` fetch), the
  user must have trusted exactly those commands (``odf trust NAME`` shows them and records
  them); a source whose commands differ from the trusted ones is refused again.
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from common.odf.errors import OdfError
from common.odf.events import SetPollingSource
from common.odf.fragments import EnvVar, FetchStepContainer, PrepStepPipe
from coordinator.dataset import durable
from coordinator.dataset.layout import DatasetLayout

REMOTES_FILE = "remotes.json"
"""A dataset's pull and push aliases (``coordinator.sharing.repos`` reads and writes them)."""
TRUST_FILE = "trust.json"


class RunRefused(OdfError):
    """A dataset's source or transform may not run here (a clone, or untrusted commands)."""


@dataclass(frozen=True, slots=True)
class Provenance:
    clone_of: str | None = None
    """The remote a clone is pulled from (its pull alias): a replica, nothing of it runs."""
    written_at: str | None = None
    """Where the polling source of a detached clone was written."""
    trusted: tuple[str, ...] | None = None
    """The commands the user trusted (``odf trust``), as ``source_commands`` shows them."""


def provenance(layout: DatasetLayout) -> Provenance:
    remotes = read_object(layout.info_dir / REMOTES_FILE)
    trust = read_object(layout.info_dir / TRUST_FILE)
    clone_of = remotes.get("pull")
    written_at = trust.get("writtenAt")
    trusted = trust.get("trusted")
    return Provenance(
        clone_of if isinstance(clone_of, str) else None,
        written_at if isinstance(written_at, str) else None,
        tuple(str(c) for c in trusted) if isinstance(trusted, list) else None,
    )


def check_may_run(layout: DatasetLayout, alias: str, action: str) -> None:
    """Refuse ``action`` (``running its polling source``, ``running its transform``,
    ``ingesting into it``, ...) when the dataset is a clone."""
    remote = provenance(layout).clone_of
    if remote is not None:
        raise RunRefused(clone_refusal(alias, remote, action))


def clone_refusal(alias: str, remote: str, action: str) -> str:
    return (
        f"dataset {alias!r} is a clone of {remote}: {action} is refused here (its source and"
        f" transform are its publisher's, synced by odf pull {alias}); `odf detach {alias}`"
        " makes it local"
    )


def source_commands(source: SetPollingSource) -> list[str]:
    """The commands a polling source runs on this machine, one line each (empty: none)."""
    lines = []
    fetch = source.fetch
    if isinstance(fetch, FetchStepContainer):
        line = f"container {fetch.image}"
        if fetch.command:
            line += f" command {shlex.join(fetch.command)}"
        if fetch.args:
            line += f" args {shlex.join(fetch.args)}"
        if fetch.env:  # values too: the image's command may act on them
            line += " env " + shlex.join(sorted(_env_entry(e) for e in fetch.env))
        lines.append(line)
    for step in source.prepare or ():
        if isinstance(step, PrepStepPipe):
            lines.append(f"pipe {shlex.join(step.command)}")
    return lines


def _env_entry(env: EnvVar) -> str:
    return env.name if env.value is None else f"{env.name}={env.value}"


def check_source_trusted(layout: DatasetLayout, alias: str, source: SetPollingSource) -> None:
    """Refuse to run the commands of a polling source written elsewhere until trusted."""
    found = provenance(layout)
    if found.written_at is None:
        return
    commands = source_commands(source)
    if not commands or found.trusted == tuple(commands):
        return
    again = " (they changed since they were trusted)" if found.trusted is not None else ""
    raise RunRefused(
        f"dataset {alias!r} has a polling source written at {found.written_at} that runs"
        f" {len(commands)} command(s) here{again}; review them with `odf trust {alias}`"
    )


def record_detached(layout: DatasetLayout, written_at: str) -> None:
    """The clone becomes local: its source, written at ``written_at``, is not trusted yet."""
    _write(layout.info_dir / TRUST_FILE, {"writtenAt": written_at, "trusted": None})


def record_trusted(layout: DatasetLayout, commands: list[str]) -> None:
    """The user trusts exactly ``commands`` (as ``source_commands`` shows them)."""
    found = provenance(layout)
    _write(layout.info_dir / TRUST_FILE, {"writtenAt": found.written_at, "trusted": commands})


def read_object(path: Path) -> dict[str, Any]:
    """A JSON object from ``path`` (empty when there is no file)."""
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except ValueError as e:
        raise OdfError(f"{path}: not valid JSON: {e}") from None
    if not isinstance(doc, dict):
        raise OdfError(f"{path}: not a JSON object")
    return doc


def _write(path: Path, doc: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    durable.write_atomic(path, (json.dumps(doc, indent=2) + "\n").encode())
