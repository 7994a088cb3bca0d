"""``odf daemon logs``: the daemon's JSON-lines log (``.odf/run/daemon.log``) read back, each
entry rendered on one line (its text escaped: the log quotes what clients sent)."""

from __future__ import annotations

import json
import time
from collections import deque
from collections.abc import Iterator
from pathlib import Path

from coordinator.cli.terminal_text import visible

_FIRST = ("timestamp", "level", "event")


def last_entries(path: Path, n: int) -> list[str]:
    """The last ``n`` lines of the log (and of its rotated predecessor when it has fewer)."""
    lines: deque[str] = deque(maxlen=n)
    if n == 0:
        return []
    for part in (path.with_name(path.name + ".1"), path):
        try:
            with open(part, encoding="utf-8", errors="replace") as f:
                lines.extend(f)
        except FileNotFoundError:
            continue
    return list(lines)


def follow_log(path: Path, poll: float = 0.25) -> Iterator[str]:
    """New lines as they are written, from the end of the log as it is now; follows a
    rotation (the file replaced by a new one)."""
    f = open(path, encoding="utf-8", errors="replace")  # noqa: SIM115 - reopened on rotation
    try:
        f.seek(0, 2)
        partial = ""
        while True:
            line = f.readline()
            if line:
                partial += line
                if partial.endswith("\n"):
                    yield partial
                    partial = ""
                continue
            try:
                rotated = path.stat().st_ino != _inode(f)
            except FileNotFoundError:
                rotated = False
            if rotated:
                f.close()
                f = open(path, encoding="utf-8", errors="replace")  # noqa: SIM115
                continue
            time.sleep(poll)
    finally:
        f.close()


def _inode(f: object) -> int:
    import os

    return os.fstat(f.fileno()).st_ino  # type: ignore[attr-defined]


def render_entry(line: str) -> str:
    """``2026-11-28T09:41:13Z info  scheduler.pulled dataset=x commits=1``."""
    try:
        entry = json.loads(line)
    except ValueError:
        return visible(line.rstrip("\n"))
    if not isinstance(entry, dict):
        return visible(line.rstrip("\n"))
    stamp = str(entry.get("timestamp", ""))
    stamp = stamp[:19] + "Z" if len(stamp) >= 19 else stamp
    level = str(entry.get("level", ""))
    rest = " ".join(f"{visible(str(k))}={_value(v)}" for k, v in entry.items() if k not in _FIRST)
    return f"{stamp} {level:<7} {visible(str(entry.get('event', '')))}" + (
        f" {rest}" if rest else ""
    )


def _value(value: object) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    text = visible(text)
    return json.dumps(text) if (" " in text or not text) else text
