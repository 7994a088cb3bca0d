"""Logging set-up: quiet by default, structlog imported only when something is logged."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.support.cli import REPO

pytestmark = pytest.mark.process  # starts processes: out of `make test-fast`


def _run(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        cwd=REPO,
        env={"PYTHONPATH": str(REPO)},
    )


def test_calls_below_the_level_import_nothing() -> None:
    done = _run(
        "import sys\n"
        "from common.logs import configure_logging, get_logger\n"
        "configure_logging(0)\n"
        "log = get_logger('x')\n"
        "log.debug('hidden', a=1); log.info('hidden too')\n"
        "print('structlog' in sys.modules)\n"
    )
    assert done.stdout.strip() == "False"
    assert done.stderr == ""


def test_a_warning_is_logged_to_stderr_with_the_configuration() -> None:
    done = _run(
        "from common.logs import configure_logging, get_logger\n"
        "configure_logging(0, json=True)\n"
        "get_logger('x').warning('shown', key='value')\n"
    )
    assert done.stdout == ""
    assert '"event": "shown"' in done.stderr and '"key": "value"' in done.stderr


def test_structlog_imported_by_another_module_gets_the_configuration() -> None:
    done = _run(
        "from common.logs import configure_logging\n"
        "configure_logging(0)\n"
        "import structlog\n"
        "structlog.get_logger('lib').info('hidden')\n"
        "structlog.get_logger('lib').error('shown')\n"
    )
    assert done.stdout == ""
    assert "shown" in done.stderr and "hidden" not in done.stderr


def test_verbose_shows_debug() -> None:
    done = _run(
        "from common.logs import configure_logging, get_logger\n"
        "configure_logging(2)\n"
        "get_logger('x').debug('details')\n"
    )
    assert "details" in done.stderr


def test_a_log_line_loads_neither_rich_nor_attrs_and_rich_still_imports_later() -> None:
    done = _run(
        "import sys\n"
        "from common.logs import configure_logging, get_logger\n"
        "configure_logging(0)\n"
        "log = get_logger('x')\n"
        "try:\n"
        "    raise ValueError('boom')\n"
        "except ValueError:\n"
        "    log.exception('failed')\n"
        "print(sorted(m for m in ('rich', 'attr', 'pygments') if m in sys.modules))\n"
        "import rich.console\n"
        "print(rich.console.Console.__name__)\n"
    )
    assert done.stdout.splitlines() == ["[]", "Console"]
    assert "failed" in done.stderr
    assert "Traceback (most recent call last)" in done.stderr and "ValueError: boom" in done.stderr
