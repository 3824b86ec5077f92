"""Figure of the straggler table: the ranks that cost the job most waiting time."""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go

from analysis.figures.style import apply_layout, color_for, no_data_figure

TOP = 32  # ranks shown: the table is sorted by the wait they cause


def stragglers(df: pd.DataFrame) -> go.Figure:
    """Wait caused per step (µs) by the ``TOP`` ranks that caused most."""
    title = "Stragglers: time the other ranks waited for each rank, per step"
    if df.empty or not (df["wait_caused_us"] > 0).any():
        return no_data_figure(title, "No rank made another wait (or no collectives)")
    top = df[df["wait_caused_us"] > 0].head(TOP)
    x = top["rank"].astype(int).astype(str)
    fig = go.Figure(go.Bar(
        x=x, y=top["wait_caused_per_step_us"], marker_color=color_for("host_wait"),
        customdata=top[["times_last", "mean_lateness_us", "why",
                        "wait_caused_pct_of_step"]].to_numpy(),
        hovertemplate=("rank %{x}: others waited %{y:.1f} µs per step (%{customdata[3]:.1f} % of "
                       "the median step)<br>last %{customdata[0]} times, mean lateness "
                       "%{customdata[1]:.1f} µs<br>%{customdata[2]}<extra></extra>"),
    ))
    fig.update_xaxes(type="category", categoryorder="array", categoryarray=list(x))
    return apply_layout(fig, title, x_title="Rank (most costly first)",
                        y_title="Wait caused per step (µs)")


def draw(result: pd.DataFrame) -> dict[str, go.Figure]:
    return {"stragglers": stragglers(result)}
