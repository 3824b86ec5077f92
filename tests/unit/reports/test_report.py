"""The HTML/SVG/CSV report: what it contains, that it works offline, renders, and escapes trace text.

The sample traces' report is written here as its page and tables; its figures as SVG (one file per
figure, through kaleido's browser) are the README's ``report`` command's
(tests/integration/test_readme_commands.py), which writes the same report with the same
``write_report``: one SVG export of those 21 figures per run instead of two (~10 s of CPU)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pandas as pd
import pytest
from report_checks import SAMPLE_REPORT_FIGURES as FIGURES
from trace_helpers import load

from analysis.api import TraceAnalysis
from analysis.errors import BrowserNotFoundError, ConfigError, UnknownRankError
from analysis.reports import write_report
from analysis.testing.synthetic import SynthConfig, write_traces

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
EVIL_KERNEL = "<script>alert(1)</script>"
EVIL_GPU = "<img src=x onerror=alert(2)>"
# a kernel of the synthetic traces renamed to EVIL_KERNEL
RENAMED_KERNEL = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas"


@pytest.fixture(scope="module")
def sample_ta(sample_traces_dir) -> TraceAnalysis:
    return load(sample_traces_dir)  # through the run's shared cache (trace_helpers)


@pytest.fixture(scope="module")
def report(sample_ta, tmp_path_factory):
    """The one report of sample_traces/ (page + CSVs) that most tests read."""
    return write_report(sample_ta, tmp_path_factory.mktemp("report"), formats=("html",),
                        progress=False)


@pytest.fixture(scope="module")
def page(report) -> str:
    return report.index.read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def evil_report(tmp_path_factory):
    """A 2-rank trace whose kernel, GPU and file names carry HTML, reported as a page only."""
    src = tmp_path_factory.mktemp("evil")
    for path in write_traces(SynthConfig(ranks=2, kernels_per_step=10), src, gzip=False):
        text = path.read_text().replace(RENAMED_KERNEL, EVIL_KERNEL)
        text = text.replace("NVIDIA H100 80GB HBM3", EVIL_GPU)
        path.unlink()
        (src / f"<b>{path.name}").write_text(text)
    ta = TraceAnalysis(src, use_cache=False, progress=False)
    return write_report(ta, tmp_path_factory.mktemp("evil-report"), formats=("html",), progress=False)


class _Scripts(HTMLParser):
    """Collects every <script> element of a page and every tag name used."""

    def __init__(self):
        super().__init__()
        self.scripts: list[str] = []
        self.tags: set[str] = set()
        self._in_script = False

    def handle_starttag(self, tag, attrs):
        self.tags.add(tag)
        if tag == "script":
            self._in_script = True
            self.scripts.append("")

    def handle_endtag(self, tag):
        if tag == "script":
            self._in_script = False

    def handle_data(self, data):
        if self._in_script:
            self.scripts[-1] += data


def _scripts(html: str) -> _Scripts:
    parser = _Scripts()
    parser.feed(html)
    return parser


def _chromium(*args: str, timeout: int = 120) -> subprocess.CompletedProcess:
    if CHROMIUM is None:
        if os.environ.get("CI"):
            pytest.fail("no chromium in CI: the Makefile's set-up must install it")
        pytest.skip("chromium is not installed")
    cmd = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
           "--hide-scrollbars", "--virtual-time-budget=10000", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=True)


@pytest.fixture(scope="module")
def rendered(report, tmp_path_factory) -> tuple[str, Path]:
    """The report page as headless Chromium renders it in a 1400 × 4000 window: (its DOM, a
    screenshot of the window), from one browser run (a start costs seconds)."""
    shot = tmp_path_factory.mktemp("rendered") / "shot.png"
    dom = _chromium("--dump-dom", f"--screenshot={shot}", "--window-size=1400,4000",
                    report.index.as_uri()).stdout
    return dom, shot


# ------------------------------------------------------------------------------------ contents
def test_report_writes_the_page_and_every_table(report):
    assert report.index.name == "index.html" and report.index.stat().st_size > 0
    assert report.figures == {} and not (report.out_dir / "figures").exists()  # html only
    for name in ["trace_metadata", "headline", "profiler_steps", "temporal_breakdown",
                 "idle_time_breakdown", "idle_interval_stats", "comm_comp_overlap",
                 "kernel_launch_summary", "kernel_launch_stats", "kernel_type_breakdown",
                 "kernel_breakdown", "findings", "collective_summary", "stragglers",
                 "collectives", "step_breakdown"]:
        assert report.tables[name] == report.out_dir / "tables" / f"{name}.csv"
        assert len(pd.read_csv(report.tables[name])) > 0, name
    # the sample traces were recorded without record_shapes=True: no operator roofline; and
    # without profile_memory=True: no memory view. Each section says how to record it.
    assert list(report.unavailable) == ["Modules (TensorBoard)", "Memory view (TensorBoard)",
                                        "How close to the hardware"]
    assert "with_modules=True" in report.unavailable["Modules (TensorBoard)"]
    assert "record_shapes=True" in report.unavailable["How close to the hardware"]
    assert "profile_memory=True" in report.unavailable["Memory view (TensorBoard)"]


def test_report_tables_hold_the_facades_numbers(report, sample_ta):
    temporal = pd.read_csv(report.tables["temporal_breakdown"])
    expected = sample_ta.get_temporal_breakdown(visualize=False)
    pd.testing.assert_frame_equal(temporal, expected.reset_index(drop=True), check_dtype=False)
    overlap = pd.read_csv(report.tables["comm_comp_overlap"])
    assert overlap["comp_comm_overlap_pctg"].tolist() == pytest.approx(
        sample_ta.get_comm_comp_overlap(visualize=False)["comp_comm_overlap_pctg"].tolist())
    launches = pd.read_csv(report.tables["kernel_launch_stats"])
    stats = sample_ta.get_cuda_kernel_launch_stats(ranks="all", visualize=False)
    assert launches.groupby("rank").size().to_dict() == {r: len(df) for r, df in stats.items()}
    summary = pd.read_csv(report.tables["kernel_launch_summary"])
    assert summary["launch_delay_outliers"].tolist() == [
        int((stats[r]["launch_delay"] > 100).sum()) for r in sorted(stats)]


def test_page_shows_metadata_steps_and_key_numbers(page, sample_ta):
    assert "NVIDIA H100 80GB HBM3" in page
    assert "10, 11, 12, 13" in page  # the steps of each rank
    assert "8 ranks (0–7)" in page  # the identity line
    headline = sample_ta.get_temporal_breakdown(visualize=False)
    for value in headline["idle_time_pctg"]:
        assert f"{value:,.2f}" in page
    for fig in FIGURES:
        assert f'id="fig-{fig}"' in page


def test_first_screen_is_identity_findings_cards_then_figures_and_health_after(page):
    body = page[page.index("<body>"):]
    order = [body.index(marker) for marker in (
        'class="meta"', 'id="findings"', 'class="cards"', 'id="fig-temporal_breakdown"',
        'id="trace_health"', 'id="key-numbers"')]
    assert order == sorted(order)
    assert "world size 8" in body and "profiler steps 10–14" in body
    # the analyses leave the last step out (HTA's default): the page says which ones they read
    assert "profiler steps 10–14 (10–13 analysed)" in body
    assert '<div class="value">5 (4 analysed)</div><div class="label">profiler steps' in body


def test_health_is_grouped_across_ranks_with_info_folded(page, sample_ta):
    health = page[page.index('id="trace_health"'):page.index('id="key-numbers"')]
    per_rank = sample_ta.check()
    assert (per_rank["check"] == "truncated_last_step").sum() == 8  # eight rows in the table...
    assert health.count("truncated_last_step") == 1  # ...one on the page
    assert "ranks 0–7" in health
    # info rows sit in a folded <details> (no "open"), the warnings before it are shown
    folded = health[health.index("<details>"):]
    assert "truncated_last_step" in folded and "clock_skew" not in folded


def test_tables_align_text_left_numbers_right_and_show_time_and_dashes(page):
    steps = page[page.index("profiler_steps.csv") - 20000:]
    assert "start (UTC)" in page and "2024-11-19 07:06:40.001" in page
    assert "1,732,000,000,001,729" not in page
    assert ">None<" not in page and ">nan<" not in page
    assert '<td class="num">15,197</td>' in page  # events
    assert '<td class="txt nw">NVIDIA H100 80GB HBM3</td>' in page
    assert "position: sticky" in page and steps


def test_page_is_self_contained_with_plotly_js_inlined_once(page):
    import plotly.offline

    parsed = _scripts(page)
    assert "link" not in parsed.tags and "iframe" not in parsed.tags
    assert not re.search(r"<script[^>]*\ssrc=", page)
    outside_scripts = re.sub(r"<script\b.*?</script>", "", page, flags=re.S)
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", outside_scripts)
    bundle = plotly.offline.get_plotlyjs()
    assert page.count(bundle[:2000]) == 1
    assert sum(bundle[:2000] in s for s in parsed.scripts) == 1


def test_ranks_select_the_reported_ranks(sample_ta, tmp_path):
    result = write_report(sample_ta, tmp_path, formats=("html",), ranks="1,3", progress=False)
    for name in ("temporal_breakdown", "comm_comp_overlap", "headline", "trace_metadata",
                 "kernel_launch_summary", "profiler_steps"):
        assert sorted(pd.read_csv(result.tables[name])["rank"].unique()) == [1, 3], name
    assert set(pd.read_csv(result.tables["idle_time_breakdown"])["rank"]) == {1, 3}
    assert result.figures == {}  # html only: no static files


@pytest.mark.parametrize("ranks, error", [("9", UnknownRankError), ("0,x", ConfigError)])
def test_bad_ranks_raise_the_projects_errors(sample_ta, tmp_path, ranks, error):
    with pytest.raises(error):
        write_report(sample_ta, tmp_path, formats=("html",), ranks=ranks, progress=False)


def test_unknown_format_is_a_config_error(sample_ta, tmp_path):
    with pytest.raises(ConfigError, match="unknown format.*xml"):
        write_report(sample_ta, tmp_path, formats=("svg", "xml"), progress=False)


def test_without_a_browser_the_page_and_tables_are_written_and_the_error_says_how_to_install(
    sample_ta, tmp_path, monkeypatch
):
    monkeypatch.setenv("BROWSER_PATH", str(tmp_path / "no-such-chromium"))
    with pytest.raises(BrowserNotFoundError, match="apt-get install chromium") as info:
        write_report(sample_ta, tmp_path / "out", formats=("html", "svg"), progress=False)
    assert "index.html and the tables were written" in str(info.value)
    assert (tmp_path / "out" / "index.html").stat().st_size > 0
    assert (tmp_path / "out" / "tables" / "headline.csv").exists()
    assert not list((tmp_path / "out").glob("figures/*.svg"))


# ------------------------------------------------------------------------------------- escaping
def test_trace_strings_are_escaped_in_the_page(evil_report):
    html = evil_report.index.read_text(encoding="utf-8")
    parsed = _scripts(html)
    # only plotly.js and one script per figure: none came from the trace
    assert len(parsed.scripts) == 1 + html.count('class="plotly-graph-div"')
    assert not any(s.strip().startswith("alert") for s in parsed.scripts)
    assert all("</script" not in s for s in parsed.scripts)
    assert "img" not in parsed.tags and "b" not in parsed.tags
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html  # the kernel table, as text
    assert "&lt;img src=x onerror=alert(2)&gt;" in html  # the GPU name
    assert "&lt;b&gt;rank-0.pt.trace.json" in html  # the file name
    # inside the figure data the name is a JSON string with <, >, / escaped
    assert "\\u003cscript\\u003ealert(1)" in html


def test_trace_strings_stay_text_in_the_rendered_dom(evil_report):
    dom = _chromium("--dump-dom", evil_report.index.as_uri()).stdout
    assert "main-svg" in dom  # the figures did render
    assert EVIL_KERNEL not in dom and "<img" not in dom
    assert len(re.findall(r"<script\b", dom)) == 1 + dom.count('class="plotly-graph-div')


# ------------------------------------------------------------------------------------ rendering
def test_page_renders_its_figures_in_headless_chromium(rendered):
    dom, shot = rendered
    parts = re.split(r'id="fig-([a-z_]+)"', dom)
    rendered_figures = {parts[i]: parts[i + 1] for i in range(1, len(parts), 2)}
    assert sorted(rendered_figures) == sorted(FIGURES)
    for fig, block in rendered_figures.items():
        # plotly marked the div as plotted and drew its SVG layers into it
        assert block.startswith(' class="plotly-graph-div js-plotly-plot"'), fig
        assert block.count('class="main-svg"') >= 2, fig

    from PIL import Image, ImageStat

    image = Image.open(shot).convert("L")
    assert image.size == (1400, 4000)
    # a blank page is one flat colour; a rendered one has text, bars and axes
    assert ImageStat.Stat(image).stddev[0] > 20
    # and the figures' region (below the tables) is not blank either
    assert ImageStat.Stat(image.crop((0, 1200, 1400, 4000))).stddev[0] > 20


def test_result_links_to_the_page_in_a_notebook(report):
    html = report._repr_html_()
    assert report.index.as_uri() in html


def test_report_json_in_figures_is_valid(page):
    # each figure's data is valid JSON that plotly can read back (no broken escaping)
    import plotly.io as pio

    match = re.search(r'Plotly\.newPlot\(\s*"fig-temporal_breakdown",\s*(\[.*?\]),\s*(\{.*?\}),\s*\{"displaylogo"',
                      page, flags=re.S)
    assert match, "figure call not found"
    fig = pio.from_json(json.dumps({"data": json.loads(match.group(1)), "layout": json.loads(match.group(2))}))
    assert len(fig.data) > 0


def test_first_screen_opens_with_the_findings(rendered):
    dom, shot = rendered
    findings, cards = dom.index('<section id="findings">'), dom.index('class="cards"')
    assert findings < cards < dom.index('<section id="temporal_breakdown">')
    assert "Rank 1 is slower than the others" in dom[findings:cards]
    from PIL import Image, ImageStat

    # the first screen of a 1400 × 900 window: text, not blank
    image = Image.open(shot).convert("L").crop((0, 0, 1400, 900))
    assert ImageStat.Stat(image.crop((0, 100, 1400, 600))).stddev[0] > 20
