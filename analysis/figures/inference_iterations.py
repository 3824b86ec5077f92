"""Figures of a serving engine's iterations: the iterations over time, coloured by phase, and
where each phase's time goes (GPU busy, idle inside the iterations, idle between them)."""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go

from analysis.figures.style import SERIES_COLORS, apply_layout, color_for, no_data_figure
from analysis.metrics.inference.iterations import phase_summary

TIMELINE_TITLE = "Serving iterations over time"
PHASES_TITLE = "Where each phase's time goes (steady-state iterations)"
PHASE_COLORS = {"prefill": SERIES_COLORS[1], "decode": SERIES_COLORS[0],
                "mixed": SERIES_COLORS[2], "unknown": SERIES_COLORS[3], "idle": SERIES_COLORS[6]}
# (label, column of the phase summary, µs: per-phase totals, busy a mean per iteration)
_PARTS = (("GPU busy", "gpu_busy_us_mean"), ("idle inside iterations", "idle_inside_us"),
          ("idle between iterations", "idle_before_us"))


def iterations_timeline(iterations: pd.DataFrame) -> go.Figure:
    """One bar per iteration at its GPU start (ms from the first iteration's), as wide as its GPU
    span and as high as its GPU busy time (ms), coloured by phase; warm-up iterations faded.
    One row of bars per rank when there are several."""
    if iterations is None or iterations.empty:
        return no_data_figure(TIMELINE_TITLE, "No serving iterations in the trace")
    df = iterations[iterations["kernels"] > 0]
    if df.empty:
        return no_data_figure(TIMELINE_TITLE, "The iterations launched no GPU work")
    t0 = float(df["gpu_start_us"].min())
    fig = go.Figure()
    for phase, part in df.groupby("phase", sort=True):
        fig.add_trace(go.Bar(
            name=str(phase),
            x=(part["gpu_start_us"] - t0) / 1000 + (part["gpu_end_us"] - part["gpu_start_us"]) / 2000,
            width=(part["gpu_end_us"] - part["gpu_start_us"]) / 1000,
            y=part["gpu_busy_us"] / 1000,
            marker_color=PHASE_COLORS.get(str(phase), color_for("other")),
            marker_opacity=[1.0 if s else 0.35 for s in part["steady"].astype(bool)],
            customdata=part[["rank", "iteration", "tokens", "batch_size", "idle_inside_us",
                             "idle_before_us", "top_operators"]].to_numpy(),
            hovertemplate=(
                "rank %{customdata[0]} iteration %{customdata[1]}<br>GPU busy %{y:.3f} ms, "
                "span %{width:.3f} ms<br>tokens %{customdata[2]}, batch %{customdata[3]}<br>"
                "idle inside %{customdata[4]:,.1f} µs, before %{customdata[5]:,.1f} µs<br>"
                "%{customdata[6]}<extra>%{fullData.name}</extra>"
            ),
        ))
    fig.update_layout(bargap=0)
    return apply_layout(fig, TIMELINE_TITLE,
                        subtitle="bar width: the iteration's GPU span; faded: warm-up",
                        x_title="GPU time from the first iteration (ms)",
                        y_title="GPU busy (ms)", legend_title="Phase")


def phase_times(phases: pd.DataFrame) -> go.Figure:
    """Per rank and phase (steady-state iterations): GPU busy, idle inside and idle between
    iterations, summed (ms), stacked."""
    if phases is None or phases.empty:
        return no_data_figure(PHASES_TITLE, "No steady-state serving iterations")
    x = [f"rank {r} · {p}" if phases["rank"].nunique() > 1 else str(p)
         for r, p in zip(phases["rank"], phases["phase"], strict=True)]
    fig = go.Figure()
    colors = {"GPU busy": color_for("compute"), "idle inside iterations": color_for("kernel_wait"),
              "idle between iterations": color_for("idle")}
    for label, column in _PARTS:
        values = phases[column].fillna(0.0)
        if column == "gpu_busy_us_mean":  # a mean per iteration: times their number
            values = values * phases["iterations"]
        fig.add_trace(go.Bar(name=label, x=x, y=values / 1000, marker_color=colors[label],
                             hovertemplate=f"%{{x}}<br>{label}: %{{y:.3f}} ms<extra></extra>"))
    fig.update_layout(barmode="stack")
    return apply_layout(fig, PHASES_TITLE, x_title="Phase", y_title="Time (ms)",
                        legend_title="Time")


def draw(result: pd.DataFrame) -> dict[str, go.Figure]:
    """The iteration figures by file stem (the registry's entry point); none for a trace without
    serving iterations (a training trace)."""
    if result is None or not len(result):
        return {}
    return {"inference_iterations_timeline": iterations_timeline(result),
            "inference_phases": phase_times(phase_summary(result))}
