"""``engine.stagingDir``: its validation, and the exchange area it gives a transaction."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from common.odf.errors import ValidationError
from coordinator.config import parse_config, setting
from coordinator.engine.embedded import EmbeddedEngineProvider
from coordinator.engine.factory import provider_from_config
from coordinator.tempdirs import SharedStagingError, check_shared_dir
from coordinator.transform.shared_staging import bring_back, exchange_area, stage_file


def staging_dir(value: str) -> Path | None:
    return parse_config(f"engine:\n  stagingDir: {value!r}\n", source="cfg.yaml").engine.staging_dir


def test_a_staging_dir_is_an_absolute_path_or_a_file_uri() -> None:
    assert staging_dir("/shared/odf") == Path("/shared/odf")
    assert staging_dir("file:///mnt/nfs/odf") == Path("/mnt/nfs/odf")
    assert parse_config("").engine.staging_dir is None
    config = parse_config("engine:\n  stagingDir: /shared/odf\n")
    assert setting(config, "engine.stagingDir") == "/shared/odf"
    provider = provider_from_config(config.engine)
    assert isinstance(provider, EmbeddedEngineProvider)
    assert provider.shared_staging == Path("/shared/odf")


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("relative/dir", "engine.stagingDir: expected an absolute directory path"),
        ("", "engine.stagingDir: expected an absolute directory path"),
        ("s3a://bucket/odf", "engine.stagingDir: 's3a://bucket/odf': s3a:// is not supported"),
        ("hdfs://nn:8020/x", "hdfs:// is not supported"),
        ("file://host/odf", "a file URI needs an absolute path and no host"),
        ("/shared/../etc", "no '..' components allowed"),
    ],
)
def test_bad_staging_dirs_are_refused_naming_the_key(value: str, message: str) -> None:
    with pytest.raises(ValidationError, match=r"cfg\.yaml:2: ") as info:
        staging_dir(value)
    assert message in str(info.value)


def test_a_staging_dir_must_be_a_string() -> None:
    with pytest.raises(ValidationError, match=r"engine\.stagingDir: expected a string"):
        parse_config("engine:\n  stagingDir: [a]\n")


def test_the_shared_dir_must_exist_be_a_real_directory_and_writable(tmp_path: Path) -> None:
    with pytest.raises(SharedStagingError, match=r"engine.stagingDir .*missing.*No such file"):
        check_shared_dir(tmp_path / "missing")
    (tmp_path / "file").write_text("x")
    with pytest.raises(SharedStagingError, match="is not a directory"):
        check_shared_dir(tmp_path / "file")
    (tmp_path / "link").symlink_to(tmp_path)
    with pytest.raises(SharedStagingError, match="is a symbolic link"):
        check_shared_dir(tmp_path / "link")
    if os.geteuid() != 0:
        locked = tmp_path / "locked"
        locked.mkdir(mode=0o500)
        with pytest.raises(SharedStagingError, match="is not writable"):
            check_shared_dir(locked)
    check_shared_dir(tmp_path)


def test_the_exchange_area_is_private_to_the_transaction_and_removed(tmp_path: Path) -> None:
    staging, shared = tmp_path / "staging", tmp_path / "shared"
    staging.mkdir()
    shared.mkdir()
    with exchange_area(None, staging) as area:
        assert area == staging
    with exchange_area(shared, staging) as area:
        assert area.parent == shared and area.name.startswith("odf-tx-")
        assert oct(area.stat().st_mode & 0o777) == oct(0o700)
        data = stage_file(_file(tmp_path / "input.parquet", b"PAR1"), area / "in-0.parquet")
        assert data.read_bytes() == b"PAR1"
        assert data.stat().st_ino == (tmp_path / "input.parquet").stat().st_ino  # a link
        (area / "out").mkdir()
        _file(area / "out" / "data", b"output")
        bring_back(area / "out" / "data", staging / "out" / "data")
        bring_back(area / "out" / "checkpoint", staging / "out" / "checkpoint")  # none written
    assert list(shared.iterdir()) == []
    assert (staging / "out" / "data").read_bytes() == b"output"
    assert not (staging / "out" / "checkpoint").exists()
    with pytest.raises(SharedStagingError), exchange_area(tmp_path / "missing", staging):
        pass


def _file(path: Path, content: bytes) -> Path:
    path.write_bytes(content)
    return path
