"""Figure of the CUDA kernel launch statistics: runtime call vs kernel duration, and launch delays.

HTA draws three histograms per rank (short kernels, runtime outliers, launch delay outliers). Here
one figure holds every rank: on the left each launch as a point (CPU runtime call duration against
GPU kernel duration, both log scale) with the runtime outliers and short kernels coloured; on the
right the launch delay distribution per rank with the delays past the cutoff drawn as points.
Which launch is an outlier or a short kernel is the metric's classification
(``analysis.metrics.gpu_time.kernel_launch_stats.classified_launches``: its columns and cut-offs);
the figure draws those columns.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from analysis.figures.style import (
    apply_layout,
    color_for,
    no_data_figure,
    plural,
    rank_axis,
    sorted_ranks,
)
from analysis.metrics.gpu_time.kernel_launch_stats import (
    LAUNCH_DELAY_CUTOFF_US,
    RUNTIME_CUTOFF_US,
    classified_launches,
)

TITLE = "CUDA kernel launch statistics"

# An SVG with more points than this is slow to draw and no easier to read: past it, the left panel
# shows every flagged launch (up to the cap) and an even sample of the others, and says so.
MAX_POINTS = 5_000
# Per rank, at most this many launch delay outliers are drawn (the largest ones).
MAX_OUTLIERS_PER_RANK = 200
# Log axes cannot show 0 µs (HTA rounds sub-µs kernels to 0): such values are drawn here.
LOG_FLOOR_US = 0.5


def _box_stats(values: pd.Series) -> dict:
    """Tukey box statistics of one rank's launch delays (whiskers at 1.5 IQR, as plotly would)."""
    q1, median, q3 = values.quantile([0.25, 0.5, 0.75])
    iqr = q3 - q1
    inside = values[(values >= q1 - 1.5 * iqr) & (values <= q3 + 1.5 * iqr)]
    return dict(
        q1=q1,
        median=median,
        q3=q3,
        lowerfence=inside.min(),
        upperfence=inside.max(),
        mean=values.mean(),
    )


def _tables(launches) -> Callable[[], Iterable[pd.DataFrame]]:
    """``launches`` as a callable giving the classified tables to read, one at a time."""
    if launches is None or isinstance(launches, pd.DataFrame):
        return lambda: [] if launches is None else [launches]
    return launches


def _kinds(df: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The left panel's three kinds of launch (masks over ``df``'s rows): runtime outliers, short
    kernels, the others."""
    runtime_outlier = df["runtime_outlier"].to_numpy(dtype=bool)
    short = df["short_kernel"].to_numpy(dtype=bool)
    return runtime_outlier, short, ~runtime_outlier & ~short


def _top_delays(df: pd.DataFrame) -> pd.DataFrame:
    """Per rank, the ``MAX_OUTLIERS_PER_RANK`` largest delays of ``df``'s launch delay outliers,
    largest first; equal delays in ``df``'s order (a stable sort: the same rows whether the ranks
    come in one table or one table each)."""
    return (
        df.sort_values("launch_delay", ascending=False, kind="stable")
        .groupby("rank", sort=False)
        .head(MAX_OUTLIERS_PER_RANK)
    )


def kernel_launch_stats(
    launches: pd.DataFrame | Callable[[], Iterable[pd.DataFrame]],
    runtime_cutoff: float = RUNTIME_CUTOFF_US,
    launch_delay_cutoff: float = LAUNCH_DELAY_CUTOFF_US,
) -> go.Figure:
    """Launch cost of every kernel: CPU runtime call duration, GPU duration and launch delay (µs).

    ``launches`` is the metric's classified table (``classified_launches``: per launch ``rank,
    correlation, cpu_duration, gpu_duration, launch_delay`` and the bool columns
    ``runtime_outlier``, ``short_kernel``, ``launch_delay_outlier``, whose definitions are the
    metric's), or a callable giving such tables one at a time (e.g. one per rank; each rank in one
    table), read twice: the whole job's launches are then never held at once, and the figure is
    the one their concatenation draws. ``runtime_cutoff`` and ``launch_delay_cutoff`` (µs) are the
    cut-offs it was classified with, drawn as lines and named in the legend.
    """
    tables = _tables(launches)
    # first pass: counts per kind, extremes, each rank's delay box and its largest delays
    totals = np.zeros(3, dtype=np.int64)
    n_launches = n_delay_outliers = 0
    ranks_seen: set[int] = set()
    boxes: dict[int, dict] = {}
    candidates: list[pd.DataFrame] = []
    hi = max(runtime_cutoff, 1)
    below_floor = False
    for df in tables():
        if df is None or not len(df):
            continue
        n_launches += len(df)
        totals += [int(m.sum()) for m in _kinds(df)]
        delay_outlier = df["launch_delay_outlier"].to_numpy(dtype=bool)
        n_delay_outliers += int(delay_outlier.sum())
        for r, rows in df.groupby("rank", sort=False).indices.items():
            ranks_seen.add(int(r))
            boxes[int(r)] = _box_stats(df["launch_delay"].iloc[rows])
        candidates.append(_top_delays(df[delay_outlier]))
        hi = max(df["cpu_duration"].max(), df["gpu_duration"].max(), hi)
        below_floor |= bool((df[["cpu_duration", "gpu_duration"]] < LOG_FLOOR_US).any(axis=None))
    if not n_launches:
        return no_data_figure(TITLE, "No kernel launches matched to GPU kernels")
    ranks = sorted_ranks(ranks_seen)
    outliers = (candidates[0] if len(candidates) == 1
                else _top_delays(pd.concat(candidates, ignore_index=True)))
    del candidates

    kinds = (
        (f"runtime outlier (> {runtime_cutoff:g} µs)", "runtime outlier"),
        ("short kernel (GPU < CPU time)", "short kernel"),
        ("other launches", "launch"),
    )
    # Left: one point per launch. Runtime outliers are drawn first, all of them if the budget
    # allows; the rest of the budget is shared by the other two kinds in proportion to their size.
    n_outliers = int(totals[0])
    rest = n_launches - n_outliers
    left = max(MAX_POINTS - n_outliers, 0)
    quotas = [MAX_POINTS] + [(left * int(t)) // max(rest, 1) for t in totals[1:]]
    # an even, deterministic sample of each kind over all tables (every k-th row, all when fewer):
    # the positions in the kind's rows of all tables, then each table's share of them
    wanted = [np.arange(t) if t <= q else np.unique(np.linspace(0, t - 1, q).round().astype(int))
              for t, q in zip(totals, quotas, strict=True)]
    sampled = any(len(w) < t for w, t in zip(wanted, totals, strict=True))
    pieces: list[list[pd.DataFrame]] = [[], [], []]
    offsets = [0, 0, 0]
    for df in tables():
        if df is None or not len(df):
            continue
        for k, mask in enumerate(_kinds(df)):
            part = df[mask]
            w = wanted[k]
            local = w[(w >= offsets[k]) & (w < offsets[k] + len(part))] - offsets[k]
            offsets[k] += len(part)
            pieces[k].append(part.iloc[local])

    fig = make_subplots(
        rows=1,
        cols=2,
        column_widths=[0.5, 0.5],
        horizontal_spacing=0.1,
        subplot_titles=("Runtime call vs kernel duration", "Launch delay per rank"),
    )
    for (name, key), parts in zip(kinds, pieces, strict=True):
        shown = parts[0] if len(parts) == 1 else pd.concat(parts)
        fig.add_trace(
            go.Scatter(
                name=name,
                legendgroup=key,
                x=shown["cpu_duration"].clip(lower=LOG_FLOOR_US),
                y=shown["gpu_duration"].clip(lower=LOG_FLOOR_US),
                mode="markers",
                marker=dict(color=color_for(key), size=5, opacity=0.6),
                customdata=shown[
                    ["rank", "correlation", "cpu_duration", "gpu_duration", "launch_delay"]
                ].to_numpy(),
                hovertemplate=(
                    "rank %{customdata[0]}, correlation %{customdata[1]}<br>"
                    "runtime call: %{customdata[2]:,} µs<br>kernel: %{customdata[3]:,} µs<br>"
                    "launch delay: %{customdata[4]:,} µs<extra>" + name + "</extra>"
                ),
            ),
            row=1,
            col=1,
        )
    lo = LOG_FLOOR_US
    hi = float(hi) * 1.5
    fig.add_trace(
        go.Scatter(
            x=[lo, hi],
            y=[lo, hi],
            mode="lines",
            name="GPU time = CPU time",
            line=dict(color="#555555", dash="dot", width=1),
            hoverinfo="skip",
        ),
        row=1,
        col=1,
    )
    fig.add_vline(
        x=runtime_cutoff,
        line=dict(color=color_for("runtime outlier"), dash="dash", width=1),
        row=1,
        col=1,
    )
    fig.update_xaxes(
        type="log", dtick=1, title_text="CUDA runtime call duration (µs)", row=1, col=1
    )
    fig.update_yaxes(type="log", dtick=1, title_text="GPU kernel duration (µs)", row=1, col=1)

    # Right: per-rank box of the launch delays from precomputed quartiles (a box stays one SVG path
    # however many launches it summarises), and the outliers as points.
    names = [str(r) for r in ranks]
    stats = [boxes[r] for r in ranks]
    fig.add_trace(
        go.Box(
            name="launch delay",
            x=names,
            marker_color=color_for("launch"),
            showlegend=True,
            **{
                k: [s[k] for s in stats]
                for k in ("q1", "median", "q3", "lowerfence", "upperfence", "mean")
            },
        ),
        row=1,
        col=2,
    )
    delay_name = f"launch delay outlier (> {launch_delay_cutoff:g} µs)"
    fig.add_trace(
        go.Scatter(
            name=delay_name,
            x=outliers["rank"].astype(str),
            y=outliers["launch_delay"],
            mode="markers",
            marker=dict(color=color_for("launch delay outlier"), size=5, symbol="x"),
            customdata=outliers[["correlation", "cpu_duration", "gpu_duration"]].to_numpy(),
            hovertemplate=(
                "rank %{x}, correlation %{customdata[0]}<br>launch delay: %{y:,} µs<br>"
                "runtime call: %{customdata[1]:,} µs, kernel: %{customdata[2]:,} µs<extra></extra>"
            ),
        ),
        row=1,
        col=2,
    )
    fig.add_hline(
        y=launch_delay_cutoff,
        line=dict(color=color_for("launch delay outlier"), dash="dash", width=1),
        row=1,
        col=2,
    )
    fig.update_xaxes(rank_axis(ranks), row=1, col=2)
    fig.update_yaxes(title_text="Launch delay (µs)", rangemode="tozero", row=1, col=2)

    counts = [
        f"{plural(n_outliers, 'runtime outlier')}",
        f"{plural(int(totals[1]), 'short kernel')}",
        f"{plural(n_delay_outliers, 'launch delay outlier')}",
        f"of {n_launches:,} launches on {plural(len(ranks), 'rank')}",
    ]
    note = ", ".join(counts[:3]) + " " + counts[3]
    if sampled:
        note += f"; left panel shows a sample of {MAX_POINTS:,} points"
    if below_floor:
        note += f"; durations < {LOG_FLOOR_US:g} µs drawn at {LOG_FLOOR_US:g} µs"
    apply_layout(fig, TITLE, subtitle=note, legend_title="Launch", height=520)
    fig.update_layout(
        legend=dict(orientation="h", yanchor="top", y=-0.18, xanchor="left", x=0),
        margin=dict(t=120, b=110),
    )
    return fig


def draw(
    result: Mapping[int, pd.DataFrame], runtime_cutoff: float = RUNTIME_CUTOFF_US,
    launch_delay_cutoff: float = LAUNCH_DELAY_CUTOFF_US,
) -> dict[str, go.Figure]:
    """The launch statistics figure of ``get_cuda_kernel_launch_stats()``'s result by file stem
    (its launches as the metric classifies them with these cut-offs, µs), read one rank at a
    time: the whole job's launches are never held in one table."""
    stats = result or {}

    def launches():
        return (classified_launches({r: df}, runtime_cutoff, launch_delay_cutoff)
                for r, df in stats.items())

    return {
        "kernel_launch_stats": kernel_launch_stats(
            launches, runtime_cutoff=runtime_cutoff, launch_delay_cutoff=launch_delay_cutoff
        )
    }
