"""Every notebook under notebooks/ runs top to bottom against sample_traces/ without a cell error."""

from __future__ import annotations

import os
import shutil

import jupytext
import pytest
from nbclient import NotebookClient
from paths import REPO_ROOT

NOTEBOOKS = sorted((REPO_ROOT / "notebooks").glob("*.md"))


def _set_parameters(nb, values: dict) -> None:
    """Replace the assignments of the cell tagged ``parameters`` (as papermill would inject them)."""
    cell = next(c for c in nb.cells if "parameters" in c.metadata.get("tags", []))
    lines = cell.source.splitlines()
    for name, value in values.items():
        matches = [i for i, line in enumerate(lines) if line.split("=")[0].strip() == name]
        if matches:
            lines[matches[0]] = f"{name} = {value!r}"
    cell.source = "\n".join(lines)


def test_notebooks_are_found():
    assert {p.name for p in NOTEBOOKS} >= {"walkthrough.md", "compare_ranks.md"}


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_runs_against_sample_traces(path, sample_traces_dir, tmp_path, monkeypatch):
    nb = jupytext.read(path)
    assert any("parameters" in c.metadata.get("tags", []) for c in nb.cells), "no parameters cell"
    browser = shutil.which("chromium") or os.environ.get("BROWSER_PATH")
    if not browser and os.environ.get("CI"):
        pytest.fail("no chromium in CI: the Makefile's set-up must install it")
    _set_parameters(nb, {
        "TRACE_DIR": str(sample_traces_dir),
        "REPORT_DIR": str(tmp_path / "report"),
        # SVG export needs a browser; the page alone does not
        "REPORT_FORMATS": ("svg", "html") if browser else ("html",),
    })
    # keep the parsed-trace cache of this run out of the user's home
    monkeypatch.setenv("TRACE_ANALYSIS_CACHE", str(tmp_path / "cache"))
    NotebookClient(nb, kernel_name="python3", timeout=300,
                   resources={"metadata": {"path": str(tmp_path)}}).execute()  # raises on a cell error

    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    assert not [o for o in outputs if o.get("output_type") == "error"]
    figures = [o for o in outputs if "application/vnd.plotly.v1+json" in o.get("data", {})]
    assert len(figures) >= 4, "the notebook should show its figures"
    if path.stem == "walkthrough":
        assert (tmp_path / "report" / "index.html").exists()
        if browser:
            assert (tmp_path / "report" / "figures" / "temporal_breakdown.svg").exists()
