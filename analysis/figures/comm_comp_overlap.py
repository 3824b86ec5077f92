"""Figure of the computation-communication overlap per rank."""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go

from analysis.figures.style import (
    MANY_RANKS,
    apply_layout,
    color_for,
    no_data_figure,
    plural,
    rank_axis,
    sorted_ranks,
)

TITLE = "Computation–communication overlap"
_COLOR = color_for("COMPUTATION overlapping COMMUNICATION")
# Two lines: on one, the title is longer than the plot is high and runs into the figure title.
_Y_TITLE = "Communication time<br>overlapped by computation (%)"


def comm_comp_overlap(df: pd.DataFrame) -> go.Figure:
    """Share (%) of each rank's communication kernel time during which a computation kernel runs.

    ``df`` is the frame of ``get_comm_comp_overlap()`` (``rank, comp_comm_overlap_pctg``); NaN means
    the rank ran no communication kernel and is shown as such. Up to ``MANY_RANKS`` ranks: one bar per
    rank. More: one box of all ranks, each rank a point whose hover names it.
    """
    if df is None or df.empty:
        return no_data_figure(TITLE, "No ranks with GPU kernels")
    df = df.sort_values("rank", kind="stable")
    ranks = sorted_ranks(df["rank"])
    no_comm = df["comp_comm_overlap_pctg"].isna()
    subtitle = (
        f"{plural(int(no_comm.sum()), 'rank')} without communication kernels: n/a"
        if no_comm.any()
        else None
    )
    if no_comm.all():
        return no_data_figure(TITLE, "No communication kernels on any rank: overlap is undefined")

    if len(ranks) <= MANY_RANKS:
        value = df["comp_comm_overlap_pctg"]
        fig = go.Figure(
            go.Bar(
                name="overlap",
                x=df["rank"].astype(int).astype(str),
                y=value.fillna(0),
                text=[("n/a" if pd.isna(v) else f"{v:.1f} %") for v in value],
                textposition="outside",
                cliponaxis=False,
                marker_color=_COLOR,
                hovertemplate="rank %{x}<br>overlap: %{text}<extra></extra>",
            )
        )
        fig.update_layout(xaxis=rank_axis(ranks), showlegend=False)
        fig.update_yaxes(range=[0, 105])
        return apply_layout(fig, f"{TITLE} per rank", subtitle=subtitle, y_title=_Y_TITLE)

    has = df[~no_comm]
    fig = go.Figure(
        go.Box(
            name="all ranks",
            y=has["comp_comm_overlap_pctg"],
            boxpoints="all",
            jitter=0.5,
            pointpos=0,
            marker=dict(color=_COLOR, size=4),
            line_color=_COLOR,
            customdata=has[["rank"]].to_numpy(),
            hovertemplate="rank %{customdata[0]}<br>overlap: %{y:.1f} %<extra></extra>",
        )
    )
    fig.update_layout(showlegend=False)
    fig.update_yaxes(range=[0, 105])
    lowest = has.loc[has["comp_comm_overlap_pctg"].idxmin()]
    note = f"lowest: rank {int(lowest['rank'])} at {lowest['comp_comm_overlap_pctg']:.1f} %"
    return apply_layout(
        fig,
        f"{TITLE} across {len(ranks)} ranks",
        subtitle="; ".join(s for s in (note, subtitle) if s),
        y_title=_Y_TITLE,
    )


def draw(result: pd.DataFrame) -> dict[str, go.Figure]:
    """The overlap's figures by file stem (the registry's entry point)."""
    return {"comm_comp_overlap": comm_comp_overlap(result)}
