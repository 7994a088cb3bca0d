"""The pure parts of the Spark Connect client (``engine_spark/connect.py``): its address, the
reachability check that keeps the engine from retrying for minutes, the refusals' wording."""

from __future__ import annotations

import socket
from pathlib import Path

import pyarrow as pa
import pyarrow.ipc as ipc
import pytest

from engine_spark.connect import UNSUPPORTED, check_parquet, refuse
from engine_spark.errors import InvalidQueryError
from engine_spark.masters import check_reachable, connect_address


@pytest.mark.parametrize(
    ("url", "address"),
    [
        ("sc://connect.example.org:15003", ("connect.example.org", 15003)),
        ("sc://h", ("h", 15002)),
        ("sc://[::1]:15/;token=x;use_ssl=true", ("::1", 15)),
    ],
)
def test_connect_address(url: str, address: tuple[str, int]) -> None:
    assert connect_address(url) == address


@pytest.mark.parametrize("url", ["sc://h:99999", "sc://h:port", "http://h:15002", "sc://:1"])
def test_bad_connect_urls_are_refused_naming_them(url: str) -> None:
    with pytest.raises(ValueError, match=f"^{url}: "):
        connect_address(url)


def test_an_unreachable_server_is_refused_at_once() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # bound, not listening: connections are refused
        with pytest.raises(ValueError, match=rf"sc://127.0.0.1:{port}: cannot reach the Spark"):
            check_reachable(f"sc://127.0.0.1:{port}", timeout=2.0)


def test_refusals_say_what_is_not_supported(tmp_path: Path) -> None:
    error = refuse("temporal tables")
    assert isinstance(error, InvalidQueryError)
    assert str(error) == f"{UNSUPPORTED}: temporal tables"
    arrow = tmp_path / "slice.arrow"
    with ipc.new_file(str(arrow), pa.schema([("a", pa.int64())])) as writer:
        writer.write_table(pa.table({"a": [1]}))
    with pytest.raises(
        InvalidQueryError,
        match=r"not supported over Spark Connect: input file .*slice.arrow is not Parquet",
    ):
        check_parquet([str(arrow)])
