"""Figures of memory copies: achieved bandwidth per direction, and Kineto's bandwidth over time."""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd
import plotly.graph_objects as go

from analysis.figures.style import (
    apply_layout,
    needs_log_axis,
    no_data_figure,
    series_color,
)

TITLE = "Memory copies"


def _kind(row) -> str:
    if row["kind"] != "Memcpy":
        return f"{row['kind']} ({row['src']})" if row["src"] else str(row["kind"])
    return f"{row['direction']} ({row['src']} → {row['dst']})" if row["src"] else row["direction"]


def memcpy_summary(df: pd.DataFrame) -> go.Figure:
    """Achieved bandwidth (GB/s, bytes / time) per rank and copy kind; hover: bytes, time, count.

    ``df`` is ``memory_bandwidth.copy_summary`` (``get_memcpy_summary()``).
    """
    if df is None or df.empty:
        return no_data_figure(TITLE, "No memcpy or memset on any rank")
    df = df.assign(label=[_kind(r) for _, r in df.iterrows()])
    # one copy kind can run at 0.001 GB/s beside another at 100: a log axis keeps both visible
    log = needs_log_axis(df["achieved_gbps"])
    fig = go.Figure()
    for i, (label, part) in enumerate(df.groupby("label", sort=True)):
        fig.add_trace(go.Bar(
            name=label, x=part["rank"].astype(int).astype(str), y=part["achieved_gbps"],
            marker_color=series_color(i),
            text=[f"{v:.3g}" for v in part["achieved_gbps"]] if log else None,
            textposition="outside" if log else None,
            customdata=part[["bytes", "time", "count"]].to_numpy(),
            hovertemplate=("rank %{x}<br>%{y:.2f} GB/s<br>%{customdata[0]:,} bytes in "
                           "%{customdata[1]:,.1f} µs (%{customdata[2]} ops)<extra>%{fullData.name}"
                           "</extra>")))
    fig.update_layout(barmode="group", xaxis=dict(type="category", title_text="Rank"))
    if log:
        fig.update_yaxes(type="log")
    y_title = "GB/s (bytes / copy time)" + (", log scale" if log else "")
    return apply_layout(fig, f"{TITLE}: achieved bandwidth", y_title=y_title,
                        legend_title="Copy", subtitle="Pageable host memory copies are slower "
                        "than pinned ones and block the CPU")


def memory_bw_time_series(series: Mapping[int, pd.DataFrame]) -> go.Figure:
    """Kineto's memory bandwidth (GB/s) of the copies in flight, per rank and copy kind."""
    frames = [df.assign(rank=r) for r, df in series.items() if df is not None and len(df)]
    if not frames:
        return no_data_figure(f"{TITLE} over time", "No memcpy or memset on any rank")
    data = pd.concat(frames)
    origin = data["ts"].min()
    fig = go.Figure()
    for i, ((rank, name), df) in enumerate(data.groupby(["rank", "name"], sort=True)):
        fig.add_trace(go.Scatter(
            name=f"rank {rank} · {name}", x=(df["ts"] - origin) / 1000.0, y=df["memory_bw_gbps"],
            mode="lines", line=dict(shape="hv", width=1, color=series_color(i))))
    return apply_layout(fig, f"{TITLE}: bandwidth over time", x_title="Time (ms)",
                        y_title="GB/s", legend_title="Copy")


def draw(result: pd.DataFrame) -> dict[str, go.Figure]:
    """The copy summary's figure by file stem (the registry's entry point)."""
    return {"memcpy_summary": memcpy_summary(result)}
