"""The example notebook (examples/notebook/odf-demo.ipynb) run top to bottom in a real IPython
kernel (nbclient + ipykernel), as a reader would run it: every cell must run clean.

The notebook makes its own workspace from the files next to it, pushes DataFrames, pulls a
derivative (one Spark engine, kept warm for what follows), reads as of an earlier block, and
queries through ``import odf`` and the ``%%sql``/``%odf`` magics, asserting the results.
"""

from __future__ import annotations

import os

import nbformat
import pytest
from nbclient import NotebookClient

from tests.support.cli import REPO

pytestmark = [pytest.mark.e2e, pytest.mark.spark]

NOTEBOOK = REPO / "examples" / "notebook" / "odf-demo.ipynb"
CELL_TIMEOUT_S = 600


def test_the_example_notebook_runs_clean(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    client = NotebookClient(
        notebook,
        timeout=CELL_TIMEOUT_S,
        kernel_name="python3",
        resources={"metadata": {"path": str(NOTEBOOK.parent)}},
    )
    client.execute()  # raises CellExecutionError, naming the cell, when one fails
    outputs = [o for cell in notebook.cells if cell.cell_type == "code" for o in cell.outputs]
    errors = [o for o in outputs if o.get("output_type") == "error"]
    assert not errors
    stderr = "".join(o.get("text", "") for o in outputs if o.get("name") == "stderr")
    assert "Traceback" not in stderr and "Warning" not in stderr, stderr
    shown = "".join(str(o.get("data", {}).get("text/plain", "")) for o in outputs)
    assert "demo.trips.busy" in shown  # %odf list
    assert "Amsterdam" in shown  # the polars result and the %%sql DataFrame
