"""Command line and Spark configuration of the engine (no JVM)."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine_spark.__main__ import parse_args, parse_ports
from engine_spark.session import SessionSettings, session_conf


def test_defaults_listen_on_the_spec_and_the_reference_ports(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in ("ODF_ENGINE_PORTS", "SPARK_MASTER", "ODF_ENGINE_UNIX_SOCKET"):
        monkeypatch.delenv(name, raising=False)
    args = parse_args([])
    assert parse_ports(args.ports) == (5544, 2884)
    assert args.master == "local[*]"
    assert args.unix_socket is None


def test_environment_and_flags(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SPARK_MASTER", "spark://spark:7077")
    monkeypatch.setenv("ODF_ENGINE_PORTS", "2884")
    args = parse_args(["--unix-socket", "/run/e.sock"])
    assert (args.master, parse_ports(args.ports), args.unix_socket) == (
        "spark://spark:7077",
        (2884,),
        "/run/e.sock",
    )
    assert parse_ports("") == ()
    with pytest.raises(SystemExit, match="70000"):
        parse_ports("70000")


def test_session_conf_is_utc_ansi_and_quiet() -> None:
    conf = session_conf(SessionSettings(master="local[2]", driver_memory="1g"))
    assert conf["spark.sql.session.timeZone"] == "UTC"
    assert conf["spark.sql.ansi.enabled"] == "true"
    assert conf["spark.ui.enabled"] == "false"
    assert conf["spark.sql.runSQLOnFiles"] == "false"
    assert conf["spark.driver.memory"] == "1g"
    assert conf["spark.driver.bindAddress"] == "127.0.0.1"
    cluster = session_conf(SessionSettings(master="spark://spark:7077"))
    assert "spark.driver.bindAddress" not in cluster
    assert cluster["spark.master"] == "spark://spark:7077"


@pytest.mark.parametrize(
    ("attribute", "variable", "default", "from_variable", "from_flag", "refused"),
    [
        ("warm_up", "ODF_ENGINE_WARM_UP", "on", "off", "on", "sometimes"),
        ("output_writer", "ODF_ENGINE_OUTPUT_WRITER", "stream", "collect", "spark", "python"),
        ("arrow_inputs", "ODF_ENGINE_ARROW_INPUTS", "staged", "in-place", "staged", "mapped"),
    ],
)
def test_a_choice_is_its_flag_else_its_variable_else_the_default(
    monkeypatch: pytest.MonkeyPatch,
    attribute: str,
    variable: str,
    default: str,
    from_variable: str,
    from_flag: str,
    refused: str,
) -> None:
    flag = "--" + attribute.replace("_", "-")
    monkeypatch.delenv(variable, raising=False)
    assert getattr(parse_args([]), attribute) == default
    monkeypatch.setenv(variable, from_variable)
    assert getattr(parse_args([]), attribute) == from_variable
    assert getattr(parse_args([flag, from_flag]), attribute) == from_flag
    monkeypatch.setenv(variable, refused)
    with pytest.raises(SystemExit):
        parse_args([])


def test_no_warm_up_turns_it_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ODF_ENGINE_WARM_UP", raising=False)
    assert parse_args(["--warm-up", "off"]).warm_up == "off"
    assert parse_args(["--no-warm-up"]).warm_up == "off"


def test_shared_staging_must_be_a_directory(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("ODF_ENGINE_SHARED_STAGING", raising=False)
    assert parse_args([]).shared_staging is None
    assert parse_args(["--shared-staging", str(tmp_path)]).shared_staging == str(tmp_path)
    monkeypatch.setenv("ODF_ENGINE_SHARED_STAGING", str(tmp_path / "missing"))
    with pytest.raises(SystemExit):
        parse_args([])
    assert f"--shared-staging {tmp_path / 'missing'}: not a directory" in capsys.readouterr().err


def test_quick_jit_is_for_one_shot_queries_only(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from dataclasses import replace

    from coordinator.engine.embedded import EmbeddedEngineProvider
    from coordinator.engine.provider import EngineMounts

    monkeypatch.delenv("ODF_ENGINE_JIT", raising=False)
    provider = EmbeddedEngineProvider()
    mounts = EngineMounts.of([], [])
    assert parse_args(provider.command(tmp_path, mounts)[3:]).jit == "full"
    quick = replace(provider, quick_jit=True).command(tmp_path, mounts)
    assert parse_args(quick[3:]).jit == "quick"
    monkeypatch.setenv("ODF_ENGINE_JIT", "full")  # the environment overrides the provider
    assert parse_args(replace(provider, quick_jit=True).command(tmp_path, mounts)[3:]).jit == "full"
    monkeypatch.setenv("ODF_ENGINE_JIT", "fast")
    with pytest.raises(SystemExit):
        parse_args([])
