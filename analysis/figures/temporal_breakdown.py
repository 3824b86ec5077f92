"""Figure of the temporal breakdown: how each rank's GPU span splits into idle, compute, non-compute."""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go

from analysis.figures.style import (
    MANY_RANKS,
    apply_layout,
    color_for,
    no_data_figure,
    rank_axis,
    sorted_ranks,
)

TITLE = "Temporal breakdown of GPU time"

# (name in the figure, percentage column, time column) in HTA's get_temporal_breakdown frame
_PARTS = (
    ("idle", "idle_time_pctg", "idle_time(us)"),
    ("compute", "compute_time_pctg", "compute_time(us)"),
    ("non-compute", "non_compute_time_pctg", "non_compute_time(us)"),
)


def temporal_breakdown(df: pd.DataFrame) -> go.Figure:
    """Idle / compute / non-compute share of each rank's GPU span (``kernel_time(us)``), in %.

    ``df`` is the frame of ``get_temporal_breakdown()``. Up to ``MANY_RANKS`` ranks: one stacked bar
    per rank. More: one box per part showing its spread over the ranks, each rank a point whose
    hover names it.
    """
    if df is None or df.empty:
        return no_data_figure(TITLE, "No ranks with GPU kernels")
    df = df.sort_values("rank", kind="stable")
    ranks = sorted_ranks(df["rank"])
    y_title = "Share of GPU span (%)"
    if len(ranks) <= MANY_RANKS:
        fig = go.Figure()
        x = df["rank"].astype(int).astype(str)
        for name, pctg, time in _PARTS:
            fig.add_trace(
                go.Bar(
                    name=name,
                    x=x,
                    y=df[pctg],
                    marker_color=color_for(name),
                    customdata=df[[time, "kernel_time(us)"]].to_numpy(),
                    hovertemplate=(
                        f"rank %{{x}}<br>{name}: %{{y:.2f}} %% "
                        "(%{customdata[0]:,.0f} µs of %{customdata[1]:,.0f} µs)<extra></extra>"
                    ),
                )
            )
        fig.update_layout(barmode="stack", xaxis=rank_axis(ranks))
        fig.update_yaxes(range=[0, 100])
        return apply_layout(fig, f"{TITLE} per rank", y_title=y_title, legend_title="Time category")

    fig = go.Figure()
    for name, pctg, time in _PARTS:
        fig.add_trace(
            go.Box(
                name=name,
                y=df[pctg],
                boxpoints="all",
                jitter=0.4,
                pointpos=0,
                marker=dict(color=color_for(name), size=4),
                customdata=df[["rank", time]].to_numpy(),
                hovertemplate=(
                    f"rank %{{customdata[0]}}<br>{name}: %{{y:.2f}} %% "
                    "(%{customdata[1]:,.0f} µs)<extra></extra>"
                ),
            )
        )
    fig.update_yaxes(rangemode="tozero")
    return apply_layout(
        fig,
        f"{TITLE} across {len(ranks)} ranks",
        subtitle="Each point is one rank; hover to see which",
        x_title="Time category",
        y_title=y_title,
        legend_title="Time category",
    )


def draw(result: pd.DataFrame) -> dict[str, go.Figure]:
    """The temporal breakdown's figures by file stem (the registry's entry point)."""
    return {"temporal_breakdown": temporal_breakdown(result)}
