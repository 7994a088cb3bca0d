"""Open Data Fabric datasets from Python: ``odf.connect(path_or_url, token=None)``.

    import odf

    with odf.connect("~/flights") as ws:
        ws.list_datasets()
        ws.read("nyc.flights").to_pandas()
        ws.sql("SELECT carrier, COUNT(*) AS n FROM `nyc.flights` GROUP BY carrier").to_polars()

The same calls work on a workspace in this process (a path), through its daemon (``http://``)
or over Flight SQL (``grpc://``); see docs/python-api.md. ``%load_ext odf.jupyter`` adds the
``%%sql`` and ``%odf`` magics to IPython and Jupyter.
"""

from common.odf.errors import NotFoundError, OdfError, ValidationError
from coordinator.app import DatasetSummary, PullEvent, PullFailed
from odf.connection import Connection, connect, init
from odf.result import Result

__all__ = [
    "Connection",
    "DatasetSummary",
    "NotFoundError",
    "OdfError",
    "PullEvent",
    "PullFailed",
    "Result",
    "ValidationError",
    "connect",
    "init",
]
