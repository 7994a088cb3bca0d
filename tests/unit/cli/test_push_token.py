"""``odf push``'s token for a smart server: ``--token-file`` first, else ``ODF_TOKEN``; a file
that is not a token is a clear error naming it."""

from __future__ import annotations

from pathlib import Path

import pytest

from common.odf.errors import ValidationError
from coordinator.cli.sharing import TOKEN_ENV, push_token


def test_the_file_wins_over_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(TOKEN_ENV, "from-env")
    (tmp_path / "t").write_text("from-file\n")
    assert push_token(str(tmp_path / "t")) == "from-file"
    assert push_token(None) == "from-env"
    monkeypatch.setenv(TOKEN_ENV, "  ")
    assert push_token(None) is None
    monkeypatch.delenv(TOKEN_ENV)
    assert push_token(None) is None


@pytest.mark.parametrize(
    ("content", "why"),
    [
        (b"", "empty"),
        (b"\n \n", "empty"),
        (b"x" * 5000, "larger than a token"),
        (b"two words", "not a token"),
        (b"\x00\x01binary", "not a token"),
        ("t\u00e9".encode(), "not a token"),
    ],
)
def test_a_file_that_is_not_a_token_is_refused(tmp_path: Path, content: bytes, why: str) -> None:
    (tmp_path / "t").write_bytes(content)
    with pytest.raises(ValidationError, match=why):
        push_token(str(tmp_path / "t"))


def test_a_missing_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(ValidationError, match="nope"):
        push_token(str(tmp_path / "nope"))
