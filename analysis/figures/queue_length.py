"""Figures of the CUDA queue length: per-stream statistics, and the queue over time."""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from analysis.figures.style import (
    KERNEL_COLORS,
    MAX_VERTICAL_CATEGORIES,
    apply_layout,
    category_label,
    color_for,
    no_data_figure,
)

TITLE = "CUDA queue length"


def _labels(df: pd.DataFrame, horizontal: bool = False) -> list[str]:
    parts = zip(df["rank"], df["stream"], strict=True)
    if horizontal:  # one line each, read across
        return [f"rank {int(r)} · stream {int(s)}" for r, s in parts]
    return [category_label(f"rank {int(r)}", f"stream {int(s)}") for r, s in parts]


def queue_length_streams(df: pd.DataFrame) -> go.Figure:
    """Per (rank, stream): time-weighted mean and maximum queue length, and the share of the
    stream's span during which its queue was empty while it was idle (the GPU waited for the CPU).

    ``df`` is ``queue_length.stream_summary`` (``get_queue_length_stream_summary()``).
    """
    if df is None or df.empty:
        return no_data_figure(TITLE, "No kernel launches on any stream")
    df = df.sort_values(["rank", "stream"], kind="stable")
    # two panels share the width: past half the usual number of categories, bars turn horizontal
    horizontal = len(df) > MAX_VERTICAL_CATEGORIES // 2
    labels = _labels(df, horizontal)

    def xy(values):  # category and value on the axes the orientation gives them
        return {"y": labels, "x": values, "orientation": "h"} if horizontal else {
            "x": labels, "y": values}

    where, value = ("%{y}", "%{x") if horizontal else ("%{x}", "%{y")
    fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.12, shared_yaxes=horizontal,
                        subplot_titles=("Queued operations (time-weighted mean, max)",
                                        "Queue empty while idle (% of span)"))
    fig.add_trace(go.Bar(name="mean", **xy(df["mean_queue_length"]),
                         marker_color=color_for("launch"),
                         hovertemplate=where + "<br>mean queue: " + value + ":.2f}<extra></extra>"),
                  1, 1)
    max_xy = xy(df["max_queue_length"])
    max_xy.pop("orientation", None)
    fig.add_trace(go.Scatter(name="max", **max_xy, mode="markers",
                             marker=dict(symbol="line-ns-open" if horizontal else "line-ew-open",
                                         size=18, color="#222222"),
                             hovertemplate=where + "<br>max queue: " + value + "}<extra></extra>"),
                  1, 1)
    fig.add_trace(go.Bar(name="empty while idle", **xy(df["empty_idle_pctg"]),
                         marker_color=color_for("host_wait"),
                         customdata=df[["empty_idle"]].to_numpy(),
                         hovertemplate=where + "<br>" + value + ":.1f} % (%{customdata[0]:,.0f} µs)"
                                       "<extra></extra>"), 1, 2)
    value_axes = fig.update_xaxes if horizontal else fig.update_yaxes
    value_axes(title_text="Operations (count)", row=1, col=1)
    value_axes(title_text="Share of span (%)", range=[0, 105], row=1, col=2)
    if horizontal:
        fig.update_yaxes(type="category", autorange="reversed")
        fig.update_layout(height=200 + 22 * len(df))
    return apply_layout(fig, f"{TITLE} per stream",
                        subtitle="A high 'empty while idle' share: the stream starved for launches")


def queue_length_time_series(series: Mapping[int, pd.DataFrame]) -> go.Figure:
    """The queue length of every stream over time (a step line per rank and stream, µs)."""
    frames = [df.assign(rank=r) for r, df in series.items() if df is not None and len(df)]
    if not frames:
        return no_data_figure(f"{TITLE} over time", "No kernel launches on any stream")
    fig = go.Figure()
    data = pd.concat(frames)
    origin = data["ts"].min()
    for i, ((rank, stream), df) in enumerate(data.groupby(["rank", "stream"], sort=True)):
        fig.add_trace(go.Scatter(
            name=f"rank {rank} · stream {stream}", x=(df["ts"] - origin) / 1000.0,
            y=df["queue_length"], mode="lines", line=dict(shape="hv", width=1,
                                                            color=KERNEL_COLORS[i % len(KERNEL_COLORS)]),
            hovertemplate="%{x:.3f} ms<br>queue: %{y}<extra>%{fullData.name}</extra>"))
    return apply_layout(fig, f"{TITLE} over time", x_title="Time since the first launch (ms)",
                        y_title="Queued operations", legend_title="Stream")


def draw(result: pd.DataFrame) -> dict[str, go.Figure]:
    """The per-stream figure by file stem (the registry's entry point)."""
    return {"queue_length": queue_length_streams(result)}
