"""The class-data sharing archive: its key, names and plan (pure), and its rename into place
after a clean exit (a shell process in the JVM's place, a temporary cache directory)."""

from __future__ import annotations

import os
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest

from engine_spark import class_data_sharing as cds
from engine_spark.__main__ import archive_key_options, parse_args
from engine_spark.class_data_sharing import ArchiveInputs, FileStamp, Mode
from engine_spark.session import SessionSettings, session_conf

INPUTS = ArchiveInputs(
    java_home="/usr/lib/jvm/java-17-openjdk-amd64",
    jdk_release='JAVA_VERSION="17.0.15"\n',
    jvm_library=FileStamp("libjvm.so", 22_000_000, 1_700_000_000_000_000_000),
    jars=(FileStamp("spark-core.jar", 15_000_000, 1), FileStamp("scala-library.jar", 6_000, 2)),
    options=("spark.driver.memory=2g", "JAVA_TOOL_OPTIONS="),
)


def test_the_key_changes_with_the_jdk_the_jars_and_the_options() -> None:
    key = cds.archive_key(INPUTS)
    assert len(key) == 32 and int(key, 16) >= 0
    assert cds.archive_key(INPUTS) == key
    # The order a directory lists the jars in is not part of it.
    assert cds.archive_key(replace(INPUTS, jars=INPUTS.jars[::-1])) == key
    jar = INPUTS.jars[0]
    changed = [
        replace(INPUTS, java_home="/opt/jdk-17"),
        replace(INPUTS, jdk_release='JAVA_VERSION="17.0.16"\n'),
        replace(INPUTS, jvm_library=FileStamp("libjvm.so", 22_000_000, 1)),
        replace(INPUTS, jvm_library=None),
        replace(INPUTS, jars=(replace(jar, size=jar.size + 1), INPUTS.jars[1])),
        replace(INPUTS, jars=(replace(jar, mtime_ns=9), INPUTS.jars[1])),
        replace(INPUTS, jars=INPUTS.jars[:1]),
        replace(INPUTS, options=("spark.driver.memory=4g", "JAVA_TOOL_OPTIONS=")),
        replace(INPUTS, options=("spark.driver.memory=2g", "JAVA_TOOL_OPTIONS=-Xss4m")),
    ]
    keys = {cds.archive_key(inputs) for inputs in changed}
    assert key not in keys and len(keys) == len(changed)


def test_the_cache_directory_follows_xdg() -> None:
    home = Path("/home/ann")
    assert cds.cache_directory({}, home) == home / ".cache/odf/cds"
    assert cds.cache_directory({"XDG_CACHE_HOME": "/var/c"}, home) == Path("/var/c/odf/cds")
    # The XDG spec: a relative path is invalid and ignored.
    assert cds.cache_directory({"XDG_CACHE_HOME": "rel"}, home) == home / ".cache/odf/cds"


def test_an_archive_is_used_only_when_complete() -> None:
    key, other = "a" * 32, "b" * 32
    directory = Path("/c")
    name = cds.archive_name(key, 1000)
    assert name == f"{key}-1000.jsa"
    use = cds.plan_for(key, directory, [(name, 1000)], pid=7, token="t")
    assert use == cds.ArchivePlan(Mode.USE, directory / name, directory, key)
    assert use.jvm_options() == (
        f"-XX:SharedArchiveFile={directory / name}",
        "-Xshare:auto",
        "-Xlog:cds=off,cds+dynamic=off",
    )
    # Truncated (its size is not the one in its name), another key's, or still being written:
    # none is taken, and this start writes one under a temporary name.
    for entries in (
        [(name, 999)],
        [(cds.archive_name(other, 1000), 1000)],
        [(cds.temp_name(key, 5, "x"), 1000)],
        [],
    ):
        create = cds.plan_for(key, directory, entries, pid=7, token="t")
        assert create.mode is Mode.CREATE
        assert create.path == directory / f"{key}.7.t.tmp"
        assert create.log_path == directory / f"{key}.7.t-log.tmp"
        assert create.jvm_options() == (
            f"-XX:ArchiveClassesAtExit={create.path}",
            "-Xlog:cds=off,cds+dynamic=off",
            f"-Xlog:cds+dynamic=info:file={create.log_path}",
        )


def test_leftovers_are_found() -> None:
    key = "a" * 32
    names = [
        cds.temp_name(key, 10, "x"),  # its writer still runs
        cds.temp_name(key, 11, "y"),  # killed
        f"{key}.11.y-log.tmp",  # its log
        f"{key}.notapid.z.tmp",  # not ours
        cds.archive_name(key, 5),
        cds.archive_name("b" * 32, 5),
        "README",
    ]
    old = cds.STALE_AFTER_S + 1
    aged = [(name, 0.0) for name in names]
    assert cds.stale_temps(aged, alive=lambda pid: pid == 10, now=old) == names[1:4]
    # A JVM still writing its archive after its engine exited keeps the file fresh.
    fresh = [(name, old - 1) for name in names]
    assert cds.stale_temps(fresh, alive=lambda pid: pid == 10, now=old) == []
    week = cds.UNUSED_DAYS * 86400
    now = 10 * week
    dated = [(name, now - 2 * week) for name in names] + [(cds.archive_name("c" * 32, 5), now)]
    # Other keys' archives unused for a week go; this key's, and one used lately, stay.
    assert cds.superseded(key, dated, now) == [cds.archive_name("b" * 32, 5)]


def test_archive_options_are_not_part_of_the_key() -> None:
    options = "-Xss4m -XX:SharedArchiveFile=/a.jsa -Xshare:auto -Xlog:cds=off,cds+dynamic=off"
    assert cds.strip_archive_options(options) == "-Xss4m"
    settings = SessionSettings(master="local[2]", driver_memory="2g")
    with_archive = replace(settings, jvm_options=("-XX:SharedArchiveFile=/a.jsa",))
    assert archive_key_options(settings) == archive_key_options(with_archive)
    conf = session_conf(with_archive)["spark.driver.extraJavaOptions"]
    assert conf.endswith("-XX:+ExitOnOutOfMemoryError -XX:SharedArchiveFile=/a.jsa")
    assert "spark.driver.memory=2g" in archive_key_options(settings)


def test_the_switch(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(cds.CDS_ENV, raising=False)
    assert parse_args([]).cds == "on"
    assert parse_args(["--cds", "off"]).cds == "off"
    monkeypatch.setenv(cds.CDS_ENV, "off")
    assert parse_args([]).cds == "off"
    monkeypatch.setenv(cds.CDS_ENV, "maybe")
    with pytest.raises(SystemExit):
        parse_args([])


def _jvm(plan: cds.ArchivePlan, *, logged: bool) -> subprocess.Popen[bytes]:
    """A process in the JVM's place: writes the archive (and, if ``logged``, the line the JVM
    logs when it wrote it whole) once its stdin closes."""
    line = f"[info][cds,dynamic] {cds.WRITTEN} 0x1 - 0x2" if logged else "[info] dumping"
    script = f"cat > /dev/null; printf archive > '{plan.path}'; echo '{line}' > '{plan.log_path}'"
    return subprocess.Popen(["sh", "-c", script], stdin=subprocess.PIPE)


@pytest.mark.process  # starts a process: out of `make test-fast`
def test_the_archive_is_renamed_into_place_only_once_written_whole(tmp_path: Path) -> None:
    key = "a" * 32
    plan = cds.plan_for(key, tmp_path, [], pid=1, token="t")
    for logged in (False, True):
        jvm = _jvm(plan, logged=logged)
        assert jvm.stdin is not None
        jvm.stdin.close()  # what the engine's exit does
        jvm.wait()  # a zombie until reaped, as the JVM is until its orphaned parent's reaper
        final = cds.settle(plan, jvm.pid, timeout=10)
        if not logged:  # killed or failed while writing: nothing is used, nothing is left
            assert final is None and list(tmp_path.iterdir()) == []
    assert final == tmp_path / cds.archive_name(key, len("archive"))
    assert [p.name for p in tmp_path.iterdir()] == [final.name]
    assert cds.plan_for(key, tmp_path, [(final.name, 7)], pid=2, token="u").mode is Mode.USE


def test_no_usable_cache_directory_means_no_archive(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    assert cds.prepare({**os.environ, "XDG_CACHE_HOME": str(blocker)}, ()) is None
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "c")}
    plan = cds.prepare(env, ("spark.driver.memory=2g",))
    assert plan is not None and plan.mode is Mode.CREATE
    assert plan.path.parent == tmp_path / "c/odf/cds"
