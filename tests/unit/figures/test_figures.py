"""The figures of the five core analyses: built from frames shaped like HTA 0.5.0's, for 1, 8, 160
ranks and ranks that do not start at 0; then every one rendered to SVG by kaleido and a real Chromium."""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import plotly.io as pio
import pytest
from figure_checks import figure_problems

from analysis import analyses as catalogue
from analysis import figures
from analysis.figures import style
from analysis.figures.export import export_figures
from analysis.figures.kernel_launch_stats import MAX_POINTS
from analysis.figures.style import COLORS, MANY_RANKS, truncate
from analysis.metrics.gpu_time.kernel_launch_stats import classified_launches

RANK_SETS = {"1": [0], "8": list(range(8)), "160": list(range(160)), "odd": [3, 5, 17]}
LONG_NAME = (
    "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, "
    "at::detail::Array<char*, 1> >(int, at::native::FillFunctor<float>, at::detail::Array<char*, 1>)"
)


# --- frames shaped like HTA 0.5.0's results -------------------------------------------------------


def temporal_df(ranks, seed=0):
    rng = np.random.default_rng(seed)
    n = len(ranks)
    idle, comp = rng.uniform(5, 40, n), rng.uniform(30, 60, n)
    non = 100 - idle - comp
    span = rng.uniform(1e5, 1e6, n)
    return pd.DataFrame({
        "rank": ranks, "idle_time(us)": idle * span / 100, "compute_time(us)": comp * span / 100,
        "non_compute_time(us)": non * span / 100, "kernel_time(us)": span,
        "idle_time_pctg": idle.round(2), "compute_time_pctg": comp.round(2),
        "non_compute_time_pctg": non.round(2),
    })  # fmt: skip


def idle_df(ranks, streams=(7, 20), seed=0):
    rng = np.random.default_rng(seed)
    rows = []
    for r in ranks:
        for s in streams:
            t = rng.uniform(1, 1e4, 3)
            for cat, v in zip(("host_wait", "kernel_wait", "other"), t, strict=True):
                rows.append((r, s, cat, v, v / t.sum()))
    cols = ["rank", "stream", "idle_category", "idle_time", "idle_time_ratio"]
    return pd.DataFrame(rows, columns=cols).round(2)


def stats_df(ranks, streams=(7, 20), seed=0):
    """Like HTA's: the idle category is the index, then rank, stream and describe()'s columns."""
    rng = np.random.default_rng(seed)
    rows = []
    for r in ranks:
        for s in streams:
            for cat in ("host_wait", "kernel_wait", "other"):
                q = np.sort(rng.exponential(50, 5))
                rows.append((cat, r, s, 40.0, q.mean(), q.std(), *q))
    cols = [
        "idle_category",
        "rank",
        "stream",
        "count",
        "mean",
        "std",
        "min",
        "25%",
        "50%",
        "75%",
        "max",
    ]
    return pd.DataFrame(rows, columns=cols).set_index("idle_category").round(2)


def overlap_df(ranks, seed=0):
    v = np.random.default_rng(seed).uniform(1, 100, len(ranks)).round(2)
    if len(ranks) > 1:
        v[0] = np.nan  # a rank without communication kernels
    return pd.DataFrame({"rank": ranks, "comp_comm_overlap_pctg": v})


def launch_stats(ranks, n=300, seed=0):
    rng = np.random.default_rng(seed)
    return {
        r: pd.DataFrame(
            {
                "correlation": np.arange(n),
                "cpu_duration": rng.lognormal(2, 0.8, n).round(),
                "gpu_duration": rng.lognormal(2.5, 1.5, n).round(),
                "launch_delay": rng.exponential(25, n).round(),
            }
        )  # fmt: skip
        for r in ranks
    }


def kernel_type_df():
    types = ["COMPUTATION", "COMMUNICATION", "COMPUTATION overlapping COMMUNICATION", "MEMORY"]
    df = pd.DataFrame({"kernel_type": types, "sum": [5_000_000, 2_000_000, 1_000_000, 300_000]})
    df["percentage"] = (100 * df["sum"] / df["sum"].sum()).round(1)
    return df


def kernel_metrics_df(ranks, n_compute=14, seed=0):
    rng = np.random.default_rng(seed)
    names = {
        "COMPUTATION": [LONG_NAME.replace("<char*, 1>", f"<char*, {i}>") for i in range(n_compute)],
        "COMMUNICATION": ["ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)"],
        "MEMORY": ["Memcpy HtoD (Pageable -> Device)", "Memset (Device)"],
    }
    rows = []
    for r in ranks:
        for ktype, ns in names.items():
            for name in ns:
                s = float(rng.uniform(1e3, 1e5))
                rows.append((name, s, s / 10, s / 100, 5.0, s / 50, ktype, r))
    cols = [
        "name",
        "sum (us)",
        "max (us)",
        "min (us)",
        "stddev",
        "mean (us)",
        "kernel_type",
        "rank",
    ]
    return pd.DataFrame(rows, columns=cols)


def results(ranks) -> dict[str, object]:
    """HTA-shaped results of the five core analyses, by registry name."""
    return {
        "temporal_breakdown": temporal_df(ranks),
        "idle_time_breakdown": (idle_df(ranks), stats_df(ranks)),
        "comm_comp_overlap": overlap_df(ranks),
        "cuda_kernel_launch_stats": launch_stats(ranks),
        "gpu_kernel_breakdown": (kernel_type_df(), kernel_metrics_df(ranks)),
    }


def all_figures(ranks) -> dict[str, go.Figure]:
    """Every figure of those analyses by file stem, drawn through the registry
    (``Analysis.draw``, as the facade and the report draw them); the idle breakdown also in µs."""
    drawn = {stem: fig for name, result in results(ranks).items()
             for stem, fig in catalogue.get(name).draw(result).items()}
    idle = catalogue.get("idle_time_breakdown").draw(results(ranks)["idle_time_breakdown"],
                                                    visualize_pctg=False)
    drawn["idle_time_breakdown_us"] = idle["idle_time_breakdown"]
    return drawn


def test_all_figures_draws_every_figure_of_the_five_analyses():
    assert set(all_figures([0])) == {
        "temporal_breakdown", "idle_time_breakdown", "idle_time_breakdown_us",
        "idle_interval_stats", "comm_comp_overlap", "kernel_launch_stats",
        "kernel_type_breakdown", "kernel_breakdown"}


def axis_titles(fig: go.Figure) -> list[str]:
    """Each line of each axis title (SVG writes the lines of a ``<br>`` title apart)."""
    layout = fig.to_dict()["layout"]
    return [
        line
        for k, v in layout.items()
        if k.startswith(("xaxis", "yaxis")) and isinstance(v, dict)
        for line in (v.get("title", {}).get("text") or "").split("<br>")
    ]


# --- structure ------------------------------------------------------------------------------------


def test_the_template_is_plotly_white_for_the_trace_types_drawn():
    """The lean template looks like plotly_white: the same layout, and the same defaults for every
    trace type the figures draw (the contract test checks each figure draws only those)."""
    ours, white = pio.templates[style.TEMPLATE], pio.templates["plotly_white"]
    assert ours.layout.to_plotly_json() == white.layout.to_plotly_json()
    for kind in style.TRACE_TYPES:
        assert [t.to_plotly_json() for t in ours.data[kind]] == [t.to_plotly_json() for t in white.data[kind]]
    assert set(ours.to_plotly_json()["data"]) < set(white.to_plotly_json()["data"])
    fig = style.apply_layout(go.Figure(go.Bar(x=[1], y=[2])), "t")
    assert fig.layout.template.layout.to_plotly_json() == white.layout.to_plotly_json()


def test_set_template_gives_the_same_figure_as_validating_it():
    """``set_template`` skips plotly's second validation of the registered template: the figure's
    JSON equals ``update_layout(template=...)``'s, and editing one figure's template leaves the
    registered one and other figures alone."""
    def drawn():
        return go.Figure([go.Bar(x=[1, 2], y=[3, 4]), go.Scatter(x=[1], y=[2]), go.Heatmap(z=[[1]])])

    validated = drawn().update_layout(template=style.TEMPLATE)
    fig = style.set_template(drawn())
    assert fig.to_plotly_json() == validated.to_plotly_json()
    fig.update_layout(title_text="t", template_layout_font_size=99)
    assert fig.layout.template.layout.font.size == 99
    assert pio.templates[style.TEMPLATE].layout.font.size is None
    assert style.set_template(drawn()).layout.template.layout.font.size is None
    with pytest.raises(ValueError):  # the figure validates again after it
        fig.update_layout(no_such_property=1)


@pytest.mark.parametrize("label", RANK_SETS)
def test_every_figure_builds_with_title_and_units(label):
    ranks = RANK_SETS[label]
    for key, fig in all_figures(ranks).items():
        assert isinstance(fig, go.Figure), key
        assert fig.layout.title.text, key
        titles = " ".join(axis_titles(fig))
        titles += " ".join(t.colorbar.title.text or "" for t in fig.data if t.type == "heatmap")
        if key != "kernel_type_breakdown":  # a pie has no axes
            assert "µs" in titles or "%" in titles, (key, titles)
        assert not fig.layout.annotations or "No " not in fig.layout.annotations[0].text, key
        assert figure_problems(fig) == [], key  # the contract test's check (tests/unit/test_contract.py)


@pytest.mark.parametrize("label", ["1", "8", "odd"])
def test_temporal_bars_per_rank_on_a_categorical_axis(label):
    ranks = RANK_SETS[label]
    fig = figures.temporal_breakdown(temporal_df(ranks))
    assert [t.name for t in fig.data] == ["idle", "compute", "non-compute"]
    assert all(t.type == "bar" for t in fig.data)
    assert list(fig.data[0].x) == [str(r) for r in ranks]
    assert fig.layout.xaxis.type == "category"
    assert list(fig.layout.xaxis.categoryarray) == [str(r) for r in ranks]
    assert [t.marker.color for t in fig.data] == [
        COLORS[n] for n in ("idle", "compute", "non-compute")
    ]
    assert fig.layout.barmode == "stack"
    assert "%" in fig.layout.yaxis.title.text


def test_temporal_many_ranks_becomes_a_distribution_with_rank_in_hover():
    fig = figures.temporal_breakdown(temporal_df(RANK_SETS["160"]))
    assert all(t.type == "box" for t in fig.data)
    assert len(fig.data[0].y) == 160
    assert sorted(fig.data[0].customdata[:, 0]) == list(range(160))
    assert "160 ranks" in fig.layout.title.text


def test_many_ranks_threshold():
    assert figures.temporal_breakdown(temporal_df(list(range(MANY_RANKS)))).data[0].type == "bar"
    assert (
        figures.temporal_breakdown(temporal_df(list(range(MANY_RANKS + 1)))).data[0].type == "box"
    )


def test_idle_breakdown_pctg_and_absolute():
    df = idle_df([0])
    pct = figures.idle_time_breakdown(df, pctg=True)
    us = figures.idle_time_breakdown(df, pctg=False)
    assert [t.name for t in pct.data] == ["host_wait", "kernel_wait", "other"]
    assert "%" in pct.layout.yaxis.title.text and "µs" in us.layout.yaxis.title.text
    host = df[df["idle_category"] == "host_wait"]
    np.testing.assert_allclose(pct.data[0].y, host["idle_time_ratio"] * 100)
    np.testing.assert_allclose(us.data[0].y, host["idle_time"])
    assert list(pct.data[0].x) == ["stream 7", "stream 20"]
    assert "rank 0" in pct.layout.title.text


def test_idle_breakdown_odd_ranks_on_a_rank_stream_axis():
    fig = figures.idle_time_breakdown(idle_df(RANK_SETS["odd"]))
    level0, level1 = fig.data[0].x
    assert list(dict.fromkeys(level0)) == ["rank 3", "rank 5", "rank 17"]
    assert list(level1) == ["7", "20"] * 3


def test_idle_breakdown_missing_category_keeps_positions_aligned():
    df = idle_df([0, 1])
    df = df[~((df["rank"] == 1) & (df["idle_category"] == "host_wait"))]
    fig = figures.idle_time_breakdown(df, pctg=False)
    host = fig.data[0]
    assert len(host.x[0]) == 4 and list(host.y)[2:] == [0, 0]


@pytest.mark.parametrize("as_column", [False, True])
def test_idle_interval_stats_boxes_from_quartiles(as_column):
    stats = stats_df([0])
    if as_column:
        stats = stats.reset_index()
    fig = figures.idle_interval_stats(stats)
    assert [t.name for t in fig.data] == ["host_wait", "kernel_wait", "other"]
    host = stats_df([0]).loc["host_wait"]
    np.testing.assert_allclose(fig.data[0].q1, host["25%"])
    np.testing.assert_allclose(fig.data[0].upperfence, host["max"])
    assert fig.layout.yaxis.title.text == "Idle interval (µs)"


def test_idle_interval_stats_odd_ranks_and_many():
    fig = figures.idle_interval_stats(stats_df(RANK_SETS["odd"]))
    assert "rank 17<br>stream 20" in fig.layout.xaxis.categoryarray
    many = figures.idle_interval_stats(stats_df(RANK_SETS["160"]))
    assert all(t.type == "box" and len(t.y) == 320 for t in many.data)


def test_overlap_marks_ranks_without_communication():
    fig = figures.comm_comp_overlap(overlap_df([3, 5, 17]))
    assert list(fig.data[0].x) == ["3", "5", "17"]
    assert fig.data[0].text[0] == "n/a" and fig.data[0].text[1].endswith("%")
    assert "1 rank without communication" in fig.layout.title.subtitle.text
    many = figures.comm_comp_overlap(overlap_df(RANK_SETS["160"]))
    assert many.data[0].type == "box" and len(many.data[0].y) == 159
    assert "lowest: rank" in many.layout.title.subtitle.text
    all_nan = overlap_df([0, 1]).assign(comp_comm_overlap_pctg=np.nan)
    assert "No communication" in figures.comm_comp_overlap(all_nan).layout.annotations[0].text


def test_launch_stats_flags_past_the_cutoffs():
    stats = launch_stats([3, 5])
    df = pd.concat(stats.values())
    fig = figures.kernel_launch_stats(classified_launches(stats, 20, 60), runtime_cutoff=20,
                                      launch_delay_cutoff=60)
    by_name = {t.name: t for t in fig.data}
    runtime = by_name["runtime outlier (> 20 µs)"]
    assert len(runtime.x) == (df["cpu_duration"] > 20).sum()
    delays = by_name["launch delay outlier (> 60 µs)"]
    assert len(delays.y) == (df["launch_delay"] > 60).sum() and min(delays.y) > 60
    assert set(delays.x) <= {"3", "5"}
    box = by_name["launch delay"]
    assert list(box.x) == ["3", "5"]
    np.testing.assert_allclose(box.median[0], stats[3]["launch_delay"].median())
    assert f"{(df['cpu_duration'] > 20).sum()} runtime outliers" in fig.layout.title.subtitle.text
    assert {"CUDA runtime call duration (µs)", "Launch delay (µs)"} <= set(axis_titles(fig))


def test_launch_stats_samples_large_inputs_keeping_outliers():
    stats = launch_stats(RANK_SETS["160"], n=200)  # 32 000 launches
    fig = figures.kernel_launch_stats(classified_launches(stats, 50), runtime_cutoff=50)
    points = sum(
        len(t.x)
        for t in fig.data
        if t.type == "scatter" and t.mode == "markers" and "delay" not in t.name
    )
    assert points <= MAX_POINTS
    n_outliers = sum((f["cpu_duration"] > 50).sum() for f in stats.values())
    assert len(fig.data[0].x) == n_outliers  # flagged launches are never sampled away
    assert "sample" in fig.layout.title.subtitle.text


def test_launch_stats_drawn_a_rank_at_a_time_is_the_figure_of_the_whole_table():
    # draw() reads one rank's launches at a time (the report's memory stays bounded): the figure
    # must be the one the concatenated table gives, sample, boxes and top delays included
    import importlib

    module = importlib.import_module("analysis.figures.kernel_launch_stats")
    stats = launch_stats(range(40), n=400, seed=3)  # 16 000 launches: sampled
    for r in (5, 17):  # more delay outliers than MAX_OUTLIERS_PER_RANK, with ties
        stats[r]["launch_delay"] = 1000.0 + (np.arange(400) % 7)
    whole = figures.kernel_launch_stats(classified_launches(stats, 20, 60), runtime_cutoff=20,
                                        launch_delay_cutoff=60)
    by_rank = module.draw(stats, runtime_cutoff=20, launch_delay_cutoff=60)["kernel_launch_stats"]
    assert "sample" in whole.layout.title.subtitle.text
    assert by_rank.to_json() == whole.to_json()
    delays = {t.name: t for t in by_rank.data}["launch delay outlier (> 60 µs)"]
    assert list(delays.x).count("5") == module.MAX_OUTLIERS_PER_RANK
    # equal delays keep the trace's order (the first correlations of each delay)
    fives = [c for x, c in zip(delays.x, delays.customdata[:, 0], strict=True) if x == "5"]
    assert fives[:3] == [6, 13, 20]


def test_kernel_type_breakdown_uses_the_shared_palette():
    fig = figures.kernel_type_breakdown(kernel_type_df())
    pie = fig.data[0]
    assert list(pie.labels)[:3] == ["COMPUTATION", "COMMUNICATION", "COMPUTATION ∩ COMMUNICATION"]
    assert list(pie.marker.colors) == [COLORS[t] for t in kernel_type_df()["kernel_type"]]
    # one colour per meaning across figures: computation kernels are the temporal "compute" blue
    assert COLORS["COMPUTATION"] == COLORS["compute"]


def test_kernel_breakdown_one_rank_horizontal_bars_with_full_names_in_hover():
    fig = figures.kernel_breakdown(kernel_metrics_df([0]), top=5)
    compute = [t for t in fig.data if t.xaxis == "x"]
    assert all(t.orientation == "h" for t in compute)
    assert len(compute) == 6 and compute[-1].name == "others"  # top 5 + the rest folded
    for t in compute[:-1]:  # label cut to 48 characters, the whole name first in the hover
        full = t.hovertemplate.split("<br>rank")[0]
        assert len(full) > 48 and len(t.name) == 48 and truncate(full) == t.name
    assert "Total kernel time (µs)" in axis_titles(fig)


def test_kernel_breakdown_stacks_per_rank_then_heatmap():
    df = kernel_metrics_df(RANK_SETS["odd"])
    fig = figures.kernel_breakdown(df)
    assert fig.layout.barmode == "stack"
    assert list(fig.layout.xaxis.categoryarray) == ["3", "5", "17"]
    others = next(t for t in fig.data if t.name == "others")
    assert others.marker.color == COLORS["others"]
    # the folded "others" per rank is the time of the compute kernels past the top 10
    top = df[df.kernel_type == "COMPUTATION"].groupby("name")["sum (us)"].sum().nlargest(10).index
    rest = (
        df[(df.kernel_type == "COMPUTATION") & ~df.name.isin(top)].groupby("rank")["sum (us)"].sum()
    )
    np.testing.assert_allclose(others.y, rest.loc[[3, 5, 17]])
    assert {fig.layout.legend2.title.text, fig.layout.legend3.title.text} == {
        "Communication kernels",
        "Memory kernels",
    }

    many = figures.kernel_breakdown(kernel_metrics_df(RANK_SETS["160"]))
    heat = [t for t in many.data if t.type == "heatmap"]
    assert len(heat) == 3 and np.asarray(heat[0].z).shape == (11, 160)


def test_truncate_keeps_both_ends():
    short = truncate(LONG_NAME)
    assert len(short) == 48 and short.startswith("void at::native") and short.endswith("char*, 1>)")


@pytest.mark.parametrize(
    "make",
    [
        lambda: figures.temporal_breakdown(temporal_df([])),
        lambda: figures.idle_time_breakdown(idle_df([])),
        lambda: figures.idle_interval_stats(None),
        lambda: figures.idle_interval_stats(stats_df([])),
        lambda: figures.comm_comp_overlap(overlap_df([])),
        lambda: figures.kernel_launch_stats(classified_launches({})),
        lambda: figures.kernel_launch_stats(classified_launches({0: launch_stats([0])[0].iloc[:0]})),
        lambda: figures.kernel_type_breakdown(kernel_type_df().iloc[:0]),
        lambda: figures.kernel_breakdown(kernel_metrics_df([])),
    ],
)
def test_empty_input_gives_a_figure_that_says_so(make):
    fig = make()
    assert fig.layout.title.text
    assert fig.layout.annotations[0].text.startswith("No ")


# --- rendered by kaleido and Chromium -------------------------------------------------------------


def test_every_figure_renders_to_svg_with_its_labels(kaleido_session, tmp_path):
    # every figure in each of its layouts: bars (odd ranks), distributions/heatmaps (160 ranks),
    # horizontal bars (one rank), and the no-data figure
    figs = {
        f"{key}_{label}": fig
        for label in ("odd", "160")
        for key, fig in all_figures(RANK_SETS[label]).items()
    }
    figs["kernels_1"] = figures.kernel_breakdown(kernel_metrics_df([0]))
    figs["empty"] = figures.comm_comp_overlap(overlap_df([]))
    written = export_figures(figs, tmp_path, formats=("svg",))
    assert set(written) == set(figs)
    for name, fig in figs.items():
        (path,) = written[name]
        svg = path.read_text(encoding="utf-8")
        assert svg.startswith("<svg"), name
        assert fig.layout.title.text in svg, name
        for title in axis_titles(fig):
            assert title in svg, (name, title)
    odd = written["temporal_breakdown_odd"][0].read_text(encoding="utf-8")
    for text in (">3<", ">5<", ">17<", ">idle<", ">non-compute<", "Share of GPU span (%)"):
        assert text in odd
    assert "COMPUTATION ∩ COMMUNICATION" in written["kernel_type_breakdown_odd"][0].read_text(
        encoding="utf-8"
    )
    kernels = written["kernel_breakdown_odd"][0].read_text(encoding="utf-8")
    label = next(t.name for t in figs["kernel_breakdown_odd"].data if t.name.startswith("void"))
    assert label.replace("<", "&#60;").replace(">", "&#62;") in kernels  # SVG escapes < and >
    assert "No ranks with GPU kernels" in written["empty"][0].read_text(encoding="utf-8")


# --- layout: titles that fit, long tails ----------------------------------------------------------


@pytest.mark.parametrize("label", RANK_SETS)
def test_titles_fit_at_notebook_size(label):
    """No axis title longer than its axis is high (it would run into the figure title)."""
    from figure_checks import layout_problems

    for key, fig in all_figures(RANK_SETS[label]).items():
        assert layout_problems(fig.to_plotly_json()) == [], key


def test_layout_check_catches_a_long_axis_title():
    from figure_checks import layout_problems

    fig = figures.comm_comp_overlap(overlap_df([0, 1]))
    fig.update_yaxes(title_text="Communication time overlapped by computation (%)")  # one line
    assert layout_problems(fig.to_plotly_json())


def test_idle_intervals_get_a_log_axis_when_one_gap_flattens_the_rest():
    stats = stats_df([0, 1])  # gaps of ~50 µs
    assert figures.idle_interval_stats(stats).layout.yaxis.type == "linear"
    stats.loc[(stats["rank"] == 1) & (stats["stream"] == 20), "max"] = 60_000.0  # one 60 ms stall
    fig = figures.idle_interval_stats(stats)
    assert fig.layout.yaxis.type == "log"
    (menu,) = fig.layout.updatemenus  # and buttons to switch back
    assert [b.label for b in menu.buttons] == ["linear", "log"] and menu.active == 1
    assert figures.idle_interval_stats(stats, log_y=False).layout.yaxis.type == "linear"
    many = stats_df(range(40))
    many.loc[many["rank"] == 3, "50%"] = 60_000.0  # the many-ranks layout plots medians
    assert figures.idle_interval_stats(many).layout.yaxis.type == "log"
