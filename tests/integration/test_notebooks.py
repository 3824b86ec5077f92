"""Every notebook under notebooks/ runs top to bottom against sample_traces/ as a user would see it:
no cell error, nothing on stderr, no warning, no dead widget, figures whose titles fit; and the
walkthrough, exported with ``jupyter nbconvert --to html``, shows its figures offline in Chromium.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import jupytext
import nbformat
import pytest
from figure_checks import layout_problems
from nbclient import NotebookClient
from paths import REPO_ROOT

NOTEBOOKS = sorted((REPO_ROOT / "notebooks").glob("*.md"))
PLOTLY_MIME = "application/vnd.plotly.v1+json"
WIDGET_MIME = "application/vnd.jupyter.widget-view+json"


def _set_parameters(nb, values: dict) -> None:
    """Replace the assignments of the cell tagged ``parameters`` (as papermill would inject them)."""
    cell = next(c for c in nb.cells if "parameters" in c.metadata.get("tags", []))
    lines = cell.source.splitlines()
    for name, value in values.items():
        matches = [i for i, line in enumerate(lines) if line.split("=")[0].strip() == name]
        if matches:
            lines[matches[0]] = f"{name} = {value!r}"
    cell.source = "\n".join(lines)


def browser() -> str | None:
    found = shutil.which("chromium") or os.environ.get("BROWSER_PATH")
    if not found and os.environ.get("CI"):
        pytest.fail("no chromium in CI: the Makefile's set-up must install it")
    return found


_EXECUTED: dict[str, tuple] = {}


def execute(path: Path, sample_traces_dir: Path, tmp_path_factory) -> tuple:
    """(executed notebook, its working directory), once per notebook per session."""
    if path.stem not in _EXECUTED:
        nb = jupytext.read(path)
        assert any("parameters" in c.metadata.get("tags", []) for c in nb.cells), "no parameters cell"
        work = tmp_path_factory.mktemp(f"nb-{path.stem}")
        _set_parameters(nb, {
            "TRACE_DIR": str(sample_traces_dir),
            "REPORT_DIR": str(work / "report"),
            # SVG export needs a browser; the page alone does not
            "REPORT_FORMATS": ("svg", "html") if browser() else ("html",),
        })
        # keep the parsed-trace cache of this run out of the user's home; a fresh cache also makes
        # the first load slow enough (> 1 s) to show the progress bar
        env = {"TRACE_ANALYSIS_CACHE": str(work / "cache")}
        old = {k: os.environ.get(k) for k in env}
        os.environ.update(env)
        try:
            NotebookClient(nb, kernel_name="python3", timeout=300,
                           resources={"metadata": {"path": str(work)}}).execute()  # raises on error
        finally:
            for k, v in old.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
        nbformat.write(nb, work / f"{path.stem}.ipynb")
        _EXECUTED[path.stem] = (nb, work)
    return _EXECUTED[path.stem]


def outputs(nb) -> list[tuple[int, dict]]:
    return [(i, o) for i, c in enumerate(nb.cells) if c.cell_type == "code"
            for o in c.get("outputs", [])]


def test_notebooks_are_found():
    assert {p.name for p in NOTEBOOKS} >= {"walkthrough.md", "compare_ranks.md"}


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_runs_cleanly_against_sample_traces(path, sample_traces_dir, tmp_path_factory):
    nb, work = execute(path, sample_traces_dir, tmp_path_factory)
    outs = outputs(nb)
    assert not [o for _, o in outs if o.get("output_type") == "error"]
    # no red boxes: nothing on stderr (warnings land there), no warning printed anywhere
    red = [(i, o["text"][:200]) for i, o in outs
           if o.get("output_type") == "stream" and o.get("name") == "stderr"]
    assert not red, f"stderr output in cells {red}"
    shown_text = [(i, o.get("text") or o.get("data", {}).get("text/plain", "")) for i, o in outs]
    warned = [(i, t[:200]) for i, t in shown_text if re.search(r"\w*Warning\b", t)]
    assert not warned, f"a warning in cell output: {warned[:3]}"
    # a closed progress bar leaves no widget behind ("Error displaying widget" on reopening)
    assert not [o for _, o in outs if WIDGET_MIME in o.get("data", {})]

    figures = [(i, o["data"][PLOTLY_MIME]) for i, o in outs if PLOTLY_MIME in o.get("data", {})]
    assert len(figures) >= 4, "the notebook should show its figures"
    problems = [(i, p) for i, fig in figures for p in layout_problems(fig)]
    assert not problems, f"figure titles that collide: {problems}"
    if path.stem == "walkthrough":
        assert (work / "report" / "index.html").exists()
        if browser():
            assert (work / "report" / "figures" / "temporal_breakdown.svg").exists()


def test_walkthrough_starts_with_a_rich_summary(sample_traces_dir, tmp_path_factory):
    nb, _ = execute(REPO_ROOT / "notebooks" / "walkthrough.md", sample_traces_dir, tmp_path_factory)
    first = next(o for _, o in outputs(nb) if o.get("output_type") == "execute_result")
    page = first["data"]["text/html"]
    for text in ("TraceAnalysis", "Profiler steps analysed", "10–13", "8 × NVIDIA H100", "Per rank"):
        assert text in page


def test_exported_html_shows_the_figures_offline(sample_traces_dir, tmp_path_factory):
    nb, work = execute(REPO_ROOT / "notebooks" / "walkthrough.md", sample_traces_dir, tmp_path_factory)
    n_figures = sum(PLOTLY_MIME in o.get("data", {}) for _, o in outputs(nb))
    subprocess.run(
        [sys.executable, "-m", "jupyter", "nbconvert", "--to", "html", "--output", "exported",
         str(work / "walkthrough.ipynb")],
        check=True, capture_output=True, timeout=120,
    )
    page = (work / "exported.html").read_text()
    assert page.count('class="plotly-graph-div"') == n_figures
    assert len(re.findall(r"\* plotly\.js v\d", page)) == 1, "plotly.js embedded exactly once"
    # nothing from the network but what nbconvert's template itself links (require.js, MathJax
    # for LaTeX in Markdown); the figures need neither
    remote = set(re.findall(r'<script[^>]+src="(https?://[^"]+)"', page))
    assert {u for u in remote if "require" not in u and "mathjax" not in u} == set(), remote
    if not browser():
        pytest.skip("no chromium to render the exported page")
    # Rendered offline: every figure div gets plotly's SVG (the page's require.js from a CDN
    # fails here, as it would offline; plotly.js does not need it).
    dom = subprocess.run(
        [browser(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--virtual-time-budget=20000", "--dump-dom", (work / "exported.html").as_uri()],
        check=True, capture_output=True, text=True, timeout=180,
    ).stdout
    drawn = len(re.findall(r'<div[^>]*class="[^"]*js-plotly-plot', dom))
    assert drawn == n_figures, f"{drawn} of {n_figures} figures drawn in the exported page"
