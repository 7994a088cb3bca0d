"""The JSON depth scan in chunks: the same answer wherever the chunks split the text."""

from __future__ import annotations

import random

import pytest

from common.serde import json_depth
from common.serde.json_depth import first_too_deep


def reference(data: bytes, limit: int, lines: bool) -> int | None:
    """The scan byte by byte: a quote after an odd run of backslashes does not count."""
    depth, in_string, backslashes = 0, False, 0
    for i, c in enumerate(data):
        escaped, backslashes = backslashes % 2 == 1, backslashes + 1 if c == ord("\\") else 0
        if lines and c == ord("\n"):
            depth, in_string = 0, False
        elif c == ord('"') and not escaped:
            in_string = not in_string
        elif not in_string and c in b"[{":
            depth += 1
            if depth > limit:
                return i
        elif not in_string and c in b"]}":
            depth -= 1
    return None


@pytest.mark.parametrize("chunk", [1, 2, 3, 7, 64])
@pytest.mark.parametrize("lines", [True, False])
def test_every_split_gives_the_answer_of_a_byte_by_byte_scan(
    chunk: int, lines: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(json_depth, "_CHUNK", chunk)
    rng = random.Random(chunk * 2 + lines)
    alphabet = b'[[[{{]}"\\\\\\\n a'
    for _ in range(300):
        data = bytes(rng.choices(alphabet, k=rng.randrange(1, 120)))
        assert first_too_deep(data, 3, lines=lines) == reference(data, 3, lines), data


def test_a_large_text_is_scanned_in_bounded_chunks() -> None:
    record = b'{"a": [1, {"b": "x\\"]]]y"}]}\n'
    data = record * ((8 << 20) // len(record)) + b"[" * 600
    assert first_too_deep(data, lines=False) == len(data) - 600 + 512
    assert first_too_deep(data, lines=True) == len(data) - 600 + 512
