"""Figures of the per-step breakdown: a rank × step heatmap of step time, and the median rank's
step split into its parts."""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go

from analysis.figures.style import apply_layout, color_for, no_data_figure
from analysis.metrics.distributed.step_breakdown import PARTS

_LABELS = {
    "computation_us": ("computation", color_for("COMPUTATION")),
    "exposed_comm_us": ("exposed communication", color_for("COMMUNICATION")),
    "memory_us": ("memory", color_for("MEMORY")),
    "other_us": ("other GPU work", color_for("OTHER")),
    "idle_host_wait_us": ("idle: host wait", color_for("host_wait")),
    "idle_kernel_wait_us": ("idle: kernel wait", color_for("kernel_wait")),
    "idle_other_us": ("idle: other", "#BBBBBB"),
}


def step_time_heatmap(df: pd.DataFrame) -> go.Figure:
    """Step time (ms) per rank (rows) and profiler step (columns)."""
    title = "Step time per rank and profiler step"
    if df.empty:
        return no_data_figure(title, "No profiler steps")
    z = df.pivot_table(index="rank", columns="step", values="step_time_us") / 1e3
    fig = go.Figure(go.Heatmap(
        z=z.to_numpy(), x=[str(s) for s in z.columns], y=z.index, colorscale="Viridis",
        colorbar=dict(title="ms"),
        hovertemplate="rank %{y}, step %{x}<br>%{z:.3f} ms<extra></extra>",
    ))
    fig.update_xaxes(type="category")
    fig.update_yaxes(autorange="reversed")
    return apply_layout(fig, title, x_title="Profiler step", y_title="Rank",
                        height=min(1200, 250 + 8 * len(z.index)))


def median_rank_steps(df: pd.DataFrame) -> go.Figure:
    """Per step, the rank with the median step time (the lower one of an even count), its step
    split into computation, exposed communication, memory, other and idle (µs)."""
    title = "The median rank's step, by part"
    if df.empty:
        return no_data_figure(title, "No profiler steps")
    rows = []
    for _, g in df.groupby("step", sort=True):
        g = g.sort_values(["step_time_us", "rank"], kind="stable")
        rows.append(g.iloc[(len(g) - 1) // 2])
    med = pd.DataFrame(rows)
    x = [f"{int(s)} (rank {int(r)})" for s, r in zip(med["step"], med["rank"], strict=True)]
    fig = go.Figure([
        go.Bar(x=x, y=med[part], name=_LABELS[part][0], marker_color=_LABELS[part][1],
               hovertemplate="%{x}<br>" + _LABELS[part][0] + ": %{y:.1f} µs<extra></extra>")
        for part in PARTS
    ])
    fig.update_layout(barmode="stack")
    return apply_layout(fig, title, x_title="Profiler step (median rank)", y_title="Time (µs)",
                        legend_title="part")


def draw(result: pd.DataFrame) -> dict[str, go.Figure]:
    return {"step_time_heatmap": step_time_heatmap(result),
            "step_breakdown": median_rank_steps(result)}
