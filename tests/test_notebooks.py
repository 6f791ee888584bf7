"""The notebooks run top to bottom, offline, so they never rot."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

NOTEBOOKS = sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("*.ipynb"))
#: What each notebook must print, so a notebook that runs but shows nothing useful fails.
EXPECTED = {
    "01_graph_tour.ipynb": ("exact_match", "prompt_injection", "out_of_domain"),
    "02_evaluation_results.ipynb": ("decision_accuracy", "hybrid+rerank / bm25", "dense"),
    "03_threshold_tuning.ipynb": ("penalty 5: current", "proposed", "answered"),
}

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_executes(path: Path) -> None:
    notebook = nbformat.read(path, as_version=4)
    NotebookClient(
        notebook,
        timeout=300,
        kernel_name="python3",
        resources={"metadata": {"path": str(path.parent)}},
    ).execute()
    outputs = [
        o for cell in notebook.cells if cell.cell_type == "code" for o in cell.get("outputs", [])
    ]
    assert not [o for o in outputs if o.output_type == "error"]
    assert any("image/png" in o.get("data", {}) for o in outputs), "no picture was rendered"
    text = "".join(o.get("text", "") for o in outputs if o.output_type == "stream")
    missing = [word for word in EXPECTED[path.name] if word not in text]
    assert not missing, f"{path.name} did not print {missing}"
