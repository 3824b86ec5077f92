"""Figures of the collectives table: bus bandwidth against message size, skew per process group, and
a rank × collective heatmap of the time each rank waited for the last one."""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from analysis.figures.style import KERNEL_COLORS, apply_layout, no_data_figure, series_color

# Above this many collective instances, the heatmap's columns are consecutive instances binned
# together (their waits summed), so that 512 ranks × 10 000 collectives stays a readable picture.
MAX_HEATMAP_COLUMNS = 300


def _instances(df: pd.DataFrame) -> pd.DataFrame:
    """One row per collective instance: type, group, bytes, median busbw and skew."""
    return df.groupby("collective", sort=True).agg(
        type=("type", "first"), group=("group", "first"), bytes=("bytes", "first"),
        busbw_gbps=("busbw_gbps", "median"), skew_us=("skew_us", "first"),
        step=("step", "first"),
    ).reset_index()


def busbw_vs_size(df: pd.DataFrame) -> go.Figure:
    """Bus bandwidth (GB/s, median over the ranks of each instance) against message size (bytes,
    log scale), one colour per collective type."""
    title = "Collective bus bandwidth by message size"
    inst = _instances(df) if not df.empty else df
    if df.empty or inst["busbw_gbps"].notna().sum() == 0:
        return no_data_figure(title, "No collective with a known size (the trace records none)")
    fig = go.Figure()
    for k, (kind, rows) in enumerate(inst.dropna(subset=["busbw_gbps"]).groupby("type")):
        fig.add_trace(go.Scatter(
            x=rows["bytes"], y=rows["busbw_gbps"], mode="markers", name=kind,
            marker=dict(color=KERNEL_COLORS[k % len(KERNEL_COLORS)], size=7, opacity=0.8),
            customdata=rows[["collective", "group", "skew_us"]].to_numpy(),
            hovertemplate=("collective %{customdata[0]} (group %{customdata[1]})<br>"
                           "%{x:.3s}B: %{y:.2f} GB/s<br>skew %{customdata[2]:.1f} µs<extra></extra>"),
        ))
    fig.update_xaxes(type="log")
    return apply_layout(fig, title, x_title="Message size (bytes)", y_title="Bus bandwidth (GB/s)",
                        legend_title="type")


def skew_distribution(df: pd.DataFrame) -> go.Figure:
    """Skew (latest − earliest start, µs) of every collective instance, one box per process group."""
    title = "Collective skew per process group"
    if df.empty:
        return no_data_figure(title, "No collectives")
    inst = _instances(df)
    fig = go.Figure()
    for i, (group, rows) in enumerate(inst.groupby("group", sort=True)):
        fig.add_trace(go.Box(
            y=rows["skew_us"], name=str(group) or "(unnamed)", boxpoints="all", jitter=0.4,
            pointpos=0, marker=dict(size=4, color=series_color(i)), customdata=rows[["collective", "type", "step"]],
            hovertemplate=("collective %{customdata[0]} %{customdata[1]} (step %{customdata[2]})"
                           "<br>skew %{y:.1f} µs<extra></extra>"),
        ))
    fig.update_layout(showlegend=False)
    return apply_layout(fig, title, x_title="Process group", y_title="Skew (µs)")


def wait_heatmap(df: pd.DataFrame) -> go.Figure:
    """Time (µs) each rank waited in each collective for the last rank to arrive: rows are ranks,
    columns collective instances in time order (binned above ``MAX_HEATMAP_COLUMNS``)."""
    title = "Wait for the last rank, per rank and collective"
    if df.empty:
        return no_data_figure(title, "No collectives")
    n = int(df["collective"].max()) + 1
    per_bin = max(1, int(np.ceil(n / MAX_HEATMAP_COLUMNS)))
    binned = df.assign(column=df["collective"] // per_bin)
    z = binned.pivot_table(index="rank", columns="column", values="wait_us", aggfunc="sum")
    x_title = "Collective (in time order)" if per_bin == 1 else (
        f"Collectives, {per_bin} per column (waits summed)")
    fig = go.Figure(go.Heatmap(
        z=z.to_numpy(), x=z.columns * per_bin, y=z.index, colorscale="Viridis",
        colorbar=dict(title="wait (µs)"),
        hovertemplate="rank %{y}<br>collective %{x}<br>wait %{z:.1f} µs<extra></extra>",
    ))
    fig.update_yaxes(autorange="reversed")
    return apply_layout(fig, title, x_title=x_title, y_title="Rank",
                        height=min(1200, 250 + 8 * len(z.index)))


def draw(result: pd.DataFrame) -> dict[str, go.Figure]:
    """The collectives' figures by file stem (the registry's entry point)."""
    return {"collective_busbw": busbw_vs_size(result),
            "collective_skew": skew_distribution(result),
            "collective_wait": wait_heatmap(result)}
