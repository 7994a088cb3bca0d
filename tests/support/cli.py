"""``odf`` as a real process: the one CLI runner of the end-to-end tests.

Each call runs ``python -m coordinator`` in ``cwd`` with this checkout first on the import
path (so a test exercises the tree it lives in, not an installed copy), captures both
streams as text and never raises on a non-zero exit: ``ok`` is the variant that does.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DEFAULT_TIMEOUT_S = 900.0


def odf(
    cwd: Path,
    *args: str,
    stdin: str | None = None,
    env: dict[str, str] | None = None,
    timeout: float = DEFAULT_TIMEOUT_S,
) -> subprocess.CompletedProcess[str]:
    """Run ``odf ARGS`` in ``cwd``; ``env`` adds to (or overrides) this process's environment."""
    return subprocess.run(
        [sys.executable, "-m", "coordinator", *args],
        cwd=cwd,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        env={**os.environ, "PYTHONPATH": str(REPO), **(env or {})},
    )


def ok(cwd: Path, *args: str, stdin: str | None = None, env: dict[str, str] | None = None) -> str:
    """``odf ARGS`` that must succeed; returns its standard output."""
    result = odf(cwd, *args, stdin=stdin, env=env)
    assert result.returncode == 0, f"odf {' '.join(args)}:\n{result.stdout}\n{result.stderr}"
    return result.stdout


def fails(cwd: Path, *args: str, env: dict[str, str] | None = None, only_line: bool = False) -> str:
    """``odf ARGS`` that must fail with exit code 1 and an ``error:`` line (with
    ``only_line``, nothing else on stderr; a query error may add Spark's hints); returns it."""
    result = odf(cwd, *args, env=env)
    assert result.returncode == 1, f"odf {' '.join(args)} exited {result.returncode}:\n{result}"
    lines = result.stderr.splitlines()
    assert lines and lines[0].startswith("error: "), result.stderr
    assert not only_line or len(lines) == 1, result.stderr
    return lines[0]


def start_odf(cwd: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    """Start ``odf ARGS`` in ``cwd`` without waiting (to signal it); text pipes for both
    streams. The caller waits for it and closes the pipes."""
    return subprocess.Popen(
        [sys.executable, "-m", "coordinator", *args],
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO), **(env or {})},
    )


def imported_by(cwd: Path, *args: str, whole: bool = False, daemon: bool = False) -> set[str]:
    """The top-level packages (``whole``: the modules) ``odf ARGS`` has imported when it
    exits; in process unless ``daemon`` (then through the daemon serving ``cwd``, if any)."""
    name = "m" if whole else "m.split('.')[0]"
    code = (
        "import atexit, json, sys\n"
        f"atexit.register(lambda: print(json.dumps(sorted({{{name} for m in"
        " sys.modules})), file=sys.stderr))\n"
        "from coordinator.cli import main\n"
        f"sys.exit(main({list(args)!r}))\n"
    )
    env = {"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"}
    if not daemon:
        env["ODF_NO_DAEMON"] = "1"
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=cwd, capture_output=True, text=True, check=True, env=env
    )
    return set(json.loads(result.stderr.strip().splitlines()[-1]))


def on_a_terminal(cwd: Path, *args: str, columns: int = 160) -> str:
    """What ``odf ARGS`` writes to a pseudo-terminal (stdout and stderr), ``columns`` wide."""
    import pty

    leader, follower = pty.openpty()
    env = {**os.environ, "PYTHONPATH": str(REPO), "COLUMNS": str(columns), "TERM": "xterm"}
    command = [sys.executable, "-m", "coordinator", *args]
    with subprocess.Popen(
        command, cwd=cwd, stdin=follower, stdout=follower, stderr=follower, env=env
    ) as process:
        os.close(follower)
        chunks = []
        while True:
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # EIO: the terminal's other side is closed
                break
            if not chunk:
                break
            chunks.append(chunk)
        process.wait(timeout=60)
    os.close(leader)
    return b"".join(chunks).decode("utf-8", errors="replace")
