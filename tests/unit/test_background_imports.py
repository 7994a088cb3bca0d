"""Modules imported in a background thread while the caller waits (``import_in_background``)."""

from __future__ import annotations

import importlib
import sys
import threading
from pathlib import Path

import pytest

from common.background_imports import import_in_background


def _module(directory: Path, name: str, body: str) -> str:
    (directory / f"{name}.py").write_text(body)
    return name


def test_the_modules_load_in_another_thread_and_the_caller_gets_the_same_ones(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.syspath_prepend(str(tmp_path))
    release = threading.Event()
    monkeypatch.setattr(sys, "bg_import_gate", release, raising=False)
    slow = _module(
        tmp_path,
        "bg_import_slow",
        "import sys, threading\n"
        "assert sys.bg_import_gate.wait(10)\n"
        "LOADED_BY = threading.current_thread().name\n",
    )
    thread = import_in_background([slow])
    assert thread is not None
    release.set()  # the caller imports it while the thread may still be loading it: it waits
    module = importlib.import_module(slow)
    thread.join(10)
    assert module.LOADED_BY == "background-imports"
    assert sys.modules[slow] is module
    monkeypatch.delitem(sys.modules, slow)


def test_nothing_starts_when_everything_is_imported() -> None:
    assert import_in_background(["sys", "threading"]) is None


def test_a_failing_import_is_raised_by_the_callers_own_import(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.syspath_prepend(str(tmp_path))
    broken = _module(tmp_path, "bg_import_broken", "raise ImportError('no such thing here')\n")
    after = _module(tmp_path, "bg_import_after_broken", "X = 1\n")
    thread = import_in_background([broken, after])
    assert thread is not None
    thread.join(10)
    assert broken not in sys.modules and after not in sys.modules  # stopped at the failure
    with pytest.raises(ImportError, match="no such thing here"):
        importlib.import_module(broken)
