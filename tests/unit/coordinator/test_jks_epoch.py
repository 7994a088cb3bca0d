"""images/engine-spark/jks_epoch.py: a Java trust store with every entry dated alike."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

pytestmark = pytest.mark.process  # starts processes: out of `make test-fast`

REPO = Path(__file__).resolve().parents[3]
SCRIPT = REPO / "images" / "engine-spark" / "jks_epoch.py"


def _module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("jks_epoch", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    """A JKS trust store of two certificates, written by keytool at different moments."""
    keytool = shutil.which("keytool")
    if keytool is None:
        pytest.skip("no keytool (JRE) on this machine")
    work = tmp_path_factory.mktemp("jks")
    path = work / "store.jks"
    common = ["-storepass", "changeit", "-noprompt"]

    def run(*args: str) -> None:
        subprocess.run([keytool, *args, *common], check=True, capture_output=True)

    for alias in ("one", "two"):
        key, cert = work / f"{alias}.p12", work / f"{alias}.pem"
        run("-genkeypair", "-alias", alias, "-keyalg", "EC", "-dname", f"CN={alias}",
            "-keystore", str(key), "-storetype", "PKCS12")  # fmt: skip
        run("-exportcert", "-rfc", "-alias", alias, "-keystore", str(key), "-file", str(cert))
        run("-importcert", "-alias", alias, "-file", str(cert), "-keystore", str(path),
            "-storetype", "JKS")  # fmt: skip
    return path.read_bytes()


def test_dates_every_entry_and_keeps_a_valid_store(store: bytes, tmp_path: Path) -> None:
    jks = _module()
    fixed = jks.with_dates(store, 1_700_000_000_000)
    assert fixed != store and len(fixed) == len(store)
    assert jks.with_dates(jks.with_dates(store, 5), 1_700_000_000_000) == fixed
    path = tmp_path / "fixed.jks"
    path.write_bytes(fixed)
    listed = subprocess.run(
        ["keytool", "-list", "-keystore", str(path), "-storepass", "changeit"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "2 entries" in listed and listed.count("Nov 14, 2023") == 2


def test_refuses_what_it_cannot_rewrite(store: bytes, tmp_path: Path) -> None:
    jks = _module()
    with pytest.raises(ValueError, match="keyed digest does not match"):
        jks.with_dates(store, 0, "another")
    with pytest.raises(ValueError, match="not a version 2 Java KeyStore"):
        jks.with_dates(b"\0" * 64, 0)
    path = tmp_path / "broken.jks"
    path.write_bytes(store[:-1])
    result = subprocess.run(
        [sys.executable, str(SCRIPT), str(path)],
        env={"SOURCE_DATE_EPOCH": "0"},
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 1
    assert result.stderr.startswith(f"jks_epoch: {path}: ")
    assert path.read_bytes() == store[:-1]  # unchanged
