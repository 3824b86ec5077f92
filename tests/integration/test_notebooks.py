"""Every notebook under notebooks/ runs top to bottom against sample_traces/ as a user would see it:
no cell error, nothing on stderr, no warning, no dead widget, figures whose titles fit; and the
walkthrough, exported with ``jupyter nbconvert --to html``, shows its figures offline in Chromium.
"""

from __future__ import annotations

import re
import subprocess
import sys

import pytest
from figure_checks import layout_problems
from nbclient import NotebookClient
from notebook_helpers import PLOTLY_MIME, WIDGET_MIME, browser, execute, outputs
from paths import REPO_ROOT

NOTEBOOKS = sorted((REPO_ROOT / "notebooks").glob("*.md"))


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
    if path.stem == "compare_runs":  # SVG export from inside a kernel (kaleido in its own loop)
        assert (work / "compare_report" / "index.html").exists()
        if browser():
            assert len(list((work / "compare_report" / "figures").glob("*.svg"))) >= 3


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


@pytest.mark.parametrize("kind", ["kineto_rank_3", "nsys"])
@pytest.mark.parametrize("notebook", ["walkthrough", "compare_ranks", "distributed", "compare_runs"])
def test_notebook_runs_on_a_users_own_traces(notebook, kind, tmp_path):
    """TRACE_DIR is the one thing a user changes: pointed at other traces than the samples, each
    notebook still runs top to bottom, each section saying what a trace cannot show. Before (on
    public traces: a vLLM one, rank 0 only, no profiler step; an nsys export; a TensorFlow XPlane
    profile), the walkthrough stopped at the step-time cell (``ranks=[0, 1]``) and, for nsys /
    XPlane, at the roofline (its error was not caught); compare_ranks at its straggler
    (``idxmax`` of no steps); distributed at its worst straggler (one rank: no collective matched
    across ranks, or no row at all); compare_runs at HTA's TraceDiff, which needs profiler steps,
    and at ``ops_diff`` of steps 10–12 that such runs do not have."""
    import gzip
    import json

    import jupytext
    from notebook_helpers import set_parameters

    from analysis.testing import tensorboard_traces
    from analysis.testing.foreign import NsysGpuOp, NsysReport, write_nsys_sqlite

    traces = tmp_path / "traces"
    traces.mkdir()
    if kind == "nsys":
        write_nsys_sqlite(traces / "run.sqlite", NsysReport(gpu=[
            NsysGpuOp(1000 * i, 500, device=0, stream=7, correlation=i, pid=1, name="gemm")
            for i in range(20)]))
    else:  # one rank, not rank 0, with [memory] events
        path = tensorboard_traces.write(traces / "rank3.json.gz")
        doc = json.loads(gzip.decompress(path.read_bytes()))
        doc["distributedInfo"] |= {"rank": 3, "world_size": 4}
        path.write_bytes(gzip.compress(json.dumps(doc).encode()))
    nb = jupytext.read(REPO_ROOT / "notebooks" / f"{notebook}.md")
    set_parameters(nb, {"TRACE_DIR": str(traces), "BASE_DIR": str(traces),  # compare_runs: a
                        "TEST_DIR": str(traces), "REPORT_FORMATS": ("html",)})  # run with itself
    NotebookClient(nb, kernel_name="python3", timeout=300,
                   resources={"metadata": {"path": str(tmp_path)}}).execute()  # raises on error
    assert not [o for _, o in outputs(nb) if o.get("output_type") == "error"]
    if notebook == "walkthrough":
        assert (tmp_path / "report" / "index.html").exists()
