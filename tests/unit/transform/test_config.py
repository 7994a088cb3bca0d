"""The workspace configuration ``.odf/config.yaml`` and the engine references it leads to."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from common.odf.errors import ValidationError
from coordinator.config import (
    EngineProviderKind,
    ExchangeFormat,
    WorkspaceConfig,
    load_config,
    parse_config,
    setting,
    with_setting,
)
from coordinator.engine.container import is_pinned_reference, pinned_reference
from coordinator.engine.embedded import EmbeddedEngineProvider
from coordinator.engine.errors import EngineUnavailableError, EngineVersionError
from coordinator.engine.factory import provider_from_config
from coordinator.engine.remote import RemoteEngineProvider, grpc_target
from coordinator.engine.version import (
    build_version,
    embedded_engine_version,
    image_version,
    source_digest,
)

DIGEST = "sha256:" + "ab" * 32


def test_missing_or_empty_file_means_the_embedded_defaults(tmp_path: Path) -> None:
    assert load_config(tmp_path) == WorkspaceConfig()
    (tmp_path / "config.yaml").write_text("# nothing yet\n")
    config = load_config(tmp_path)
    assert config.engine.provider is EngineProviderKind.EMBEDDED
    assert config.transform.exchange is ExchangeFormat.PARQUET


def test_every_key() -> None:
    config = parse_config(
        "engine:\n"
        "  provider: container\n"
        "  image: localhost/odf-engine-spark:1\n"
        "  master: local[1]\n"
        "  driverMemory: 1g\n"
        "  startTimeout: 90\n"
        "transform:\n"
        "  exchange: arrow\n"
        "  maxInputRecords: 5000\n"
        "  split:\n"
        "    minRecords: 100\n"
        "    slices: 4\n"
        "    rehash: 0.05\n"
        "daemon:\n"
        "  address: 127.0.0.1:7000\n"
        "  httpAddress: '[::1]:7001'\n"
    )
    e, t, d = config.engine, config.transform, config.daemon
    assert (d.address, d.http_address) == ("127.0.0.1:7000", "[::1]:7001")
    assert WorkspaceConfig().daemon.address == "127.0.0.1:4884"
    assert (e.provider, e.image, e.master, e.driver_memory, e.start_timeout) == (
        EngineProviderKind.CONTAINER,
        "localhost/odf-engine-spark:1",
        "local[1]",
        "1g",
        90.0,
    )
    assert (t.exchange, t.max_input_records) == (ExchangeFormat.ARROW, 5000)
    assert (t.split.min_records, t.split.slices, t.split.rehash) == (100, 4, 0.05)
    split = WorkspaceConfig().transform.split
    assert (split.min_records, split.slices, split.rehash) == (5_000_000, 0, 1.0)


def test_daemon_schedules_are_intervals_or_cron_lines() -> None:
    d = parse_config(
        "daemon:\n"
        "  maxParallel: 3\n"
        "  engineIdleTimeout: 30\n"
        "  followLineage: false\n"
        "  schedules:\n"
        "    a: 30s\n"
        "    b: 10m\n"
        "    c: 1.5h\n"
        "    d: '*/15 * * * *'\n"
    ).daemon
    assert (d.max_parallel, d.engine_idle_timeout, d.follow_lineage) == (3, 30.0, False)
    assert [(s.dataset, s.interval, s.cron) for s in d.schedules] == [
        ("a", 30.0, None),
        ("b", 600.0, None),
        ("c", 5400.0, None),
        ("d", None, "*/15 * * * *"),
    ]
    assert WorkspaceConfig().daemon.follow_lineage is True
    assert WorkspaceConfig().daemon.warm_up_seconds == 20.0
    assert parse_config("daemon:\n  warmUpSeconds: 0\n").daemon.warm_up_seconds == 0.0


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("engine:\n  provider: docker\n", "cfg.yaml:2: engine.provider: 'docker' is not one of"),
        ("engine:\n  provider: remote\n", "engine.address: is required when provider is remote"),
        ("engine:\n  imagee: x\n", "cfg.yaml:2: engine.imagee: unknown key"),
        ("transform:\n  maxInputRecords: 0\n", "transform.maxInputRecords: must be positive"),
        ("transform:\n  maxInputRecords: 1.5\n", "expected an integer, got number 1.5"),
        ("transform:\n  split:\n    slices: -1\n", "transform.split.slices: expected 0 (the"),
        ("transform:\n  split:\n    rehash: half\n", "transform.split.rehash: expected full or"),
        ("transform:\n  split:\n    rehash: 1.5\n", "expected full or a fraction in (0, 1]"),
        ("transform:\n  split:\n    min: 1\n", "transform.split.min: unknown key"),
        ("engine:\n  startTimeout: soon\n", "engine.startTimeout: expected a number"),
        ("engine: [1]\n", "engine: expected a mapping, got a list"),
        ("engine:\n  provider: [x\n", "cfg.yaml:3:1: invalid YAML"),
        ("daemon:\n  address: 4884\n", "cfg.yaml:2: daemon.address: expected a string"),
        ("daemon:\n  httpAddress: local\n", "daemon.httpAddress: expected host:port, got 'local'"),
        ("daemon:\n  address: h:99999\n", "daemon.address: expected host:port"),
        ("daemon:\n  maxParallel: 0\n", "daemon.maxParallel: must be positive, got 0"),
        ("daemon:\n  warmUpSeconds: -1\n", "daemon.warmUpSeconds: must not be negative"),
        ("daemon:\n  followLineage: yes please\n", "daemon.followLineage: expected true or"),
        ("daemon:\n  schedules: [a]\n", "daemon.schedules: expected a mapping"),
        ("daemon:\n  httpHeaderTimeout: 0\n", "daemon.httpHeaderTimeout: must be positive"),
        ("daemon:\n  httpIdleTimeout: soon\n", "daemon.httpIdleTimeout: expected a number"),
        ("daemon:\n  httpMaxConnections: 2.5\n", "daemon.httpMaxConnections: expected an int"),
        ("daemon:\n  httpMaxConnectionsPerClient: -1\n", "PerClient: must be positive"),
        ("daemon:\n  requireTokenForReads: 1\n", "daemon.requireTokenForReads: expected true"),
        ("writers:\n  waitTimeout: 0\n", "cfg.yaml:2: writers.waitTimeout: must be positive"),
        ("writers:\n  wait: 5\n", "cfg.yaml:2: writers.wait: unknown key"),
        ("verify:\n  executorMinBytes: -1\n", "verify.executorMinBytes: must not be negative"),
        ("verify:\n  executorMinBytes: 1.5\n", "verify.executorMinBytes: expected an integer"),
        (
            "daemon:\n  schedules:\n    x: every day\n",
            "daemon.schedules.x: 'every day' is neither an interval (30s, 10m, 2h, 1d) nor a cron",
        ),
        ("daemon:\n  schedules:\n    x: 0s\n", "daemon.schedules.x: the interval must be positive"),
        ("daemon:\n  schedules:\n    x: 61 * * * *\n", "daemon.schedules.x: '61 * * * *' is"),
    ],
)
def test_errors_name_file_line_and_key(text: str, message: str) -> None:
    with pytest.raises(ValidationError) as info:
        parse_config(text, source="cfg.yaml")
    assert message in str(info.value)


def test_providers_from_config() -> None:
    remote = provider_from_config(
        parse_config("engine:\n  provider: remote\n  address: /run/e.sock\n").engine
    )
    assert isinstance(remote, RemoteEngineProvider)
    assert remote.resolve_version() is None
    assert isinstance(provider_from_config(WorkspaceConfig().engine), EmbeddedEngineProvider)


def test_remote_credentials_are_files_relative_to_the_odf_dir(tmp_path: Path) -> None:
    (tmp_path / "config.yaml").write_text(
        "engine:\n  provider: remote\n  address: h:1\n"
        "  tokenFile: engine.token\n  tlsCa: /etc/ca.pem\n"
    )
    engine = load_config(tmp_path).engine
    assert engine.token_file == tmp_path / "engine.token"
    assert engine.tls_ca == Path("/etc/ca.pem")
    remote = provider_from_config(engine)
    assert isinstance(remote, RemoteEngineProvider)
    with pytest.raises(EngineUnavailableError, match=r"engine.tokenFile .*engine.token: cannot"):
        remote.credentials()
    (tmp_path / "engine.token").write_text("two words\n")
    with pytest.raises(EngineUnavailableError, match="the token must be one word"):
        remote.credentials()
    (tmp_path / "engine.token").write_text(" tok3n \n")
    with pytest.raises(EngineUnavailableError, match=r"engine.tlsCa /etc/ca.pem: cannot read"):
        remote.credentials()
    ca = tmp_path / "ca.pem"
    ca.write_bytes(b"PEM")
    credentials = replace(remote, tls_ca=ca).credentials()
    assert (credentials.token, credentials.tls_ca) == ("tok3n", b"PEM")


def test_an_empty_token_file_key_is_an_error() -> None:
    with pytest.raises(ValidationError, match=r"engine\.tokenFile: expected a file path"):
        parse_config('engine:\n  tokenFile: ""\n')


def test_grpc_targets() -> None:
    assert grpc_target("/run/engine.sock") == "unix:/run/engine.sock"
    assert grpc_target("unix:/x.sock") == "unix:/x.sock"
    assert grpc_target("10.0.0.5:2884") == "10.0.0.5:2884"


def test_tags_resolve_to_the_repository_digest() -> None:
    attrs = {
        "Id": "sha256:" + "cd" * 32,
        "RepoDigests": [f"other/repo@{DIGEST}", f"localhost/odf-engine-spark@{DIGEST}"],
    }
    assert (
        pinned_reference("localhost/odf-engine-spark:latest", attrs)
        == f"localhost/odf-engine-spark@{DIGEST}"
    )
    assert pinned_reference("registry:5000/odf:1", {"RepoDigests": [f"registry:5000/odf@{DIGEST}"]})
    # Locally built Docker images have no repository digest: the image id pins them.
    assert pinned_reference("odf:dev", {"Id": attrs["Id"], "RepoDigests": []}) == attrs["Id"]
    assert pinned_reference(f"x@{DIGEST}", {}) == f"x@{DIGEST}"
    assert is_pinned_reference(f"x@{DIGEST}") and not is_pinned_reference("x:latest")


def test_embedded_version_names_the_build_and_refuses_other_pins(tmp_path: Path) -> None:
    version = build_version()
    assert version.startswith("odf-engine-spark/") and "+src." in version and "pyspark/" in version
    # The image built from these sources, when one is recorded here (docs/scale.md), else this.
    assert embedded_engine_version() in {image_version(), version}
    provider = EmbeddedEngineProvider()
    provider.check_version(None)
    provider.check_version(version)
    provider.check_version(embedded_engine_version())
    with pytest.raises(EngineVersionError, match="pinned to engine"):
        provider.check_version(f"localhost/odf-engine-spark@{DIGEST}")


def test_source_digest_changes_with_any_source_file(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("x = 1\n")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "b.py").write_text("y = 2\n")
    before = source_digest(tmp_path)
    (tmp_path / "sub" / "b.py").write_text("y = 3\n")
    assert source_digest(tmp_path) != before


def test_engine_jvms_exit_when_out_of_heap() -> None:
    from coordinator.engine.provider import jvm_environment

    assert jvm_environment() == {"JAVA_TOOL_OPTIONS": "-XX:+ExitOnOutOfMemoryError"}
    kept = jvm_environment({"JAVA_TOOL_OPTIONS": "-Xss2m"})
    assert kept == {"JAVA_TOOL_OPTIONS": "-Xss2m -XX:+ExitOnOutOfMemoryError"}


def test_one_shot_embedded_engines_skip_the_warm_up_and_the_daemon_pool_keeps_it(
    tmp_path: Path,
) -> None:
    from coordinator.app import Application
    from coordinator.workspace import Workspace

    app = Application(Workspace.init(tmp_path / "ws"))
    assert isinstance(app.provider, EmbeddedEngineProvider)
    assert app.provider.warm_up is False
    pool = app.keep_engines_warm(idle_timeout=60)
    try:
        assert isinstance(pool.provider, EmbeddedEngineProvider)
        assert pool.provider.warm_up is True
    finally:
        pool.close()


def test_an_image_declares_the_engine_image_its_embedded_engine_is(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The coordinator image sets ODF_EMBEDDED_ENGINE_IMAGE to the engine image it is built on:
    its embedded engine then runs transforms the host pinned to that image's digest."""
    ref = "localhost/odf-engine-spark@sha256:" + "ab" * 32
    monkeypatch.setenv("ODF_EMBEDDED_ENGINE_IMAGE", ref)
    image_version.cache_clear()
    embedded_engine_version.cache_clear()
    try:
        assert image_version() == ref
        assert embedded_engine_version() == ref
        EmbeddedEngineProvider().check_version(ref)
        monkeypatch.setenv("ODF_EMBEDDED_ENGINE_IMAGE", "localhost/odf-engine-spark:latest")
        image_version.cache_clear()
        with pytest.raises(EngineUnavailableError, match="ODF_EMBEDDED_ENGINE_IMAGE="):
            image_version()
    finally:
        monkeypatch.delenv("ODF_EMBEDDED_ENGINE_IMAGE")
        image_version.cache_clear()
        embedded_engine_version.cache_clear()


def test_daemon_listener_bounds_default_and_read() -> None:
    default = WorkspaceConfig().daemon
    assert default.require_token_for_reads is False
    assert (default.http_header_timeout, default.http_body_timeout) == (10.0, 60.0)
    assert (default.http_idle_timeout, default.http_max_connections) == (120.0, 128)
    assert default.http_max_connections_per_client == 32
    d = parse_config(
        "daemon:\n  requireTokenForReads: true\n  httpHeaderTimeout: 2.5\n"
        "  httpMaxConnectionsPerClient: 3\n"
    ).daemon
    assert (d.require_token_for_reads, d.http_header_timeout) == (True, 2.5)
    assert d.http_max_connections_per_client == 3


def test_writers_wait_timeout_default_read_and_set() -> None:
    assert parse_config("").writers.wait_timeout == 600.0
    config = parse_config("writers:\n  waitTimeout: 2.5\n")
    assert config.writers.wait_timeout == 2.5
    assert setting(config, "writers.waitTimeout") == "2.5"
    nested = with_setting("", "transform.split.rehash", "0.05", source="config.yaml")
    assert setting(parse_config(nested), "transform.split.rehash") == "0.05"
    assert setting(parse_config(""), "transform.split.rehash") == "full"
    assert with_setting(nested, "transform.split.rehash", None, source="config.yaml") == ""
    text = with_setting("", "writers.waitTimeout", "30", source="config.yaml")
    assert parse_config(text).writers.wait_timeout == 30.0


def test_flight_sql_address_default_read_and_off() -> None:
    default = WorkspaceConfig().daemon
    assert default.flight_sql_address == "127.0.0.1:50050"
    assert (default.flight_sql_max_calls, default.flight_sql_call_timeout) == (8, 600.0)
    assert parse_config("daemon:\n  flightSqlAddress: '[::1]:9'\n").daemon.flight_sql_address == (
        "[::1]:9"
    )
    for off in ("none", "''", "None"):
        config = parse_config(f"daemon:\n  flightSqlAddress: {off}\n")
        assert config.daemon.flight_sql_address is None, off
        assert setting(config, "daemon.flightSqlAddress") == "none"
    with pytest.raises(ValidationError, match=r"daemon\.flightSqlAddress: expected host:port"):
        parse_config("daemon:\n  flightSqlAddress: nowhere\n")


def test_verify_executor_min_bytes_default_read_and_set() -> None:
    assert parse_config("").verify.executor_min_bytes == 1 << 30
    assert setting(parse_config(""), "verify.executorMinBytes") == "1073741824"
    text = with_setting("", "verify.executorMinBytes", "0", source="config.yaml")
    assert parse_config(text).verify.executor_min_bytes == 0
