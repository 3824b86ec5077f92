"""Figures of the GPU idle time breakdown: idle time per cause and stream, and idle interval statistics."""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go

from analysis.figures.style import (
    MANY_RANKS,
    apply_layout,
    category_label,
    color_for,
    no_data_figure,
    plural,
    sorted_ranks,
)
from analysis.metrics.gpu_time.idle_time_breakdown import CATEGORIES

# HTA's idle categories, in the order they stack

TITLE = "GPU idle time by cause"
STATS_TITLE = "Idle intervals between kernels"


def _position_labels(keys: pd.DataFrame, one_rank: bool, two_level: bool = True) -> list:
    """x values for (rank, stream) pairs: the stream alone for one rank, else a two-level axis.

    Boxes drawn from precomputed quartiles do not support plotly's two-level axis, so they get
    one-level ``"rank r<br>stream s"`` labels in two lines (``two_level=False``).
    """
    streams = keys["stream"].astype(str).tolist()
    if one_rank:
        return [f"stream {s}" for s in streams]
    ranks = [f"rank {r}" for r in keys["rank"].astype(int)]
    if not two_level:
        return [category_label(r, f"stream {s}") for r, s in zip(ranks, streams, strict=True)]
    return [ranks, streams]


def _ordered(categories) -> list[str]:
    """HTA's categories first, in their order, then anything else a newer HTA may add."""
    present = list(dict.fromkeys(str(c) for c in categories))
    return [c for c in CATEGORIES if c in present] + [c for c in present if c not in CATEGORIES]


def idle_time_breakdown(df: pd.DataFrame, pctg: bool = True) -> go.Figure:
    """Idle time of each CUDA stream split by cause (host_wait / kernel_wait / other).

    ``df`` is the first frame of ``get_idle_time_breakdown()`` (``rank, stream, idle_category,
    idle_time, idle_time_ratio``). ``pctg=True`` plots each cause's share of the stream's idle time
    (%), ``False`` the idle time itself (µs). Up to ``MANY_RANKS`` ranks: stacked bars per stream
    (grouped by rank). More: one box per cause over all (rank, stream) pairs.
    """
    if df is None or df.empty:
        return no_data_figure(TITLE, "No idle time: no GPU kernels in the selected ranks/streams")
    df = df.copy()
    df["value"] = df["idle_time_ratio"] * 100 if pctg else df["idle_time"]
    y_title = "Share of the stream's idle time (%)" if pctg else "Idle time (µs)"
    ranks = sorted_ranks(df["rank"])
    categories = _ordered(df["idle_category"])
    rank_note = f"rank {ranks[0]}" if len(ranks) == 1 else plural(len(ranks), "rank")

    if len(ranks) <= MANY_RANKS:
        # A full (rank, stream) x category grid, so every trace lists the positions in one order.
        grid = df.pivot_table(
            index=["rank", "stream"],
            columns="idle_category",
            values=["value", "idle_time"],
            aggfunc="sum",
            fill_value=0,
            observed=True,
        ).sort_index()
        keys = grid.index.to_frame(index=False)
        x = _position_labels(keys, one_rank=len(ranks) == 1)
        fig = go.Figure()
        for cat in categories:
            fig.add_trace(
                go.Bar(
                    name=cat,
                    x=x,
                    y=grid[("value", cat)],
                    marker_color=color_for(cat),
                    customdata=grid[("idle_time", cat)].to_numpy(),
                    hovertemplate=(
                        f"{cat}: %{{y:,.2f}}{' %' if pctg else ' µs'}"
                        "<br>idle time: %{customdata:,.0f} µs<extra></extra>"
                    ),
                )
            )
        fig.update_layout(barmode="stack")
        if len(ranks) == 1:
            fig.update_xaxes(type="category")
        if pctg:
            fig.update_yaxes(range=[0, 100])
        return apply_layout(
            fig,
            f"{TITLE}, {rank_note}, per CUDA stream",
            x_title="CUDA stream" if len(ranks) == 1 else "Rank / CUDA stream",
            y_title=y_title,
            legend_title="Idle category",
        )

    fig = _category_boxes(
        df, categories, "value", "idle_time",
        "{cat}: %{{y:,.2f}}" + (" %" if pctg else " µs") + " (%{{customdata[2]:,.0f}} µs)",
    )
    return apply_layout(
        fig,
        f"{TITLE} across {rank_note}",
        subtitle="Each point is one CUDA stream of one rank; hover to see which",
        x_title="Idle category",
        y_title=y_title,
        legend_title="Idle category",
    )


def _stats_frame(stats_df: pd.DataFrame) -> pd.DataFrame:
    """HTA keeps the idle category in the index; accept it there or as a column."""
    if "idle_category" in stats_df.columns:
        return stats_df.reset_index(drop=True)
    out = stats_df.reset_index()
    first = out.columns[0]
    return out.rename(columns={first: "idle_category"})


def idle_interval_stats(stats_df: pd.DataFrame | None, log_y: bool | None = None) -> go.Figure:
    """Distribution of idle intervals (µs) between consecutive kernels, per stream and cause.

    ``log_y``: a log interval axis; ``None`` (default) chooses it when the intervals span more than
    ``LOG_SPREAD`` times (one long stall per step would flatten every other box). Buttons on the
    figure switch between linear and log either way.

    ``stats_df`` is the second frame of ``get_idle_time_breakdown(show_idle_interval_stats=True)``:
    per (rank, stream, idle category) the ``count, mean, std, min, 25%, 50%, 75%, max`` of the gaps.
    Up to ``MANY_RANKS`` ranks each row becomes a box drawn from those quantiles (whiskers at min and
    max). More: one box per cause of the per-stream medians.
    """
    if stats_df is None or stats_df.empty:
        return no_data_figure(
            STATS_TITLE, "No idle interval statistics (no kernels, or stats not asked for)"
        )
    df = _stats_frame(stats_df).sort_values(["rank", "stream"], kind="stable")
    ranks = sorted_ranks(df["rank"])
    categories = _ordered(df["idle_category"])
    y_title = "Idle interval (µs)"
    rank_note = f"rank {ranks[0]}" if len(ranks) == 1 else plural(len(ranks), "rank")

    if len(ranks) <= MANY_RANKS:
        fig = go.Figure()
        for cat in categories:
            part = df[df["idle_category"].astype(str) == cat]
            fig.add_trace(
                go.Box(
                    name=cat,
                    x=_position_labels(part, one_rank=len(ranks) == 1, two_level=False),
                    q1=part["25%"],
                    median=part["50%"],
                    q3=part["75%"],
                    lowerfence=part["min"],
                    upperfence=part["max"],
                    mean=part["mean"],
                    sd=part["std"].fillna(0),
                    boxmean=True,
                    marker_color=color_for(cat),
                    customdata=part[["count"]].to_numpy(),
                    hovertemplate=f"{cat}: %{{customdata[0]:,.0f}} intervals<extra></extra>",
                )
            )
        # every (rank, stream) slot, in order, even where a category has no box
        slots = _position_labels(df.drop_duplicates(["rank", "stream"]), len(ranks) == 1, False)
        fig.update_layout(boxmode="group")
        fig.update_xaxes(type="category", categoryorder="array", categoryarray=slots)
        _log_axis_toggle(fig, df["max"], df["50%"], log_y)
        return apply_layout(
            fig,
            f"{STATS_TITLE}, {rank_note}, per CUDA stream",
            subtitle="Box: quartiles; whiskers: min and max; dashed: mean",
            x_title="CUDA stream" if len(ranks) == 1 else "Rank / CUDA stream",
            y_title=y_title,
            legend_title="Idle category",
        )

    fig = _category_boxes(
        df, categories, "50%", "count",
        "{cat}: median %{{y:,.1f}} µs over %{{customdata[2]:,.0f}} intervals",
    )
    _log_axis_toggle(fig, df["50%"], df["50%"], log_y)
    return apply_layout(
        fig,
        f"{STATS_TITLE} across {rank_note}",
        subtitle="Median idle interval of each CUDA stream of each rank; hover to see which",
        x_title="Idle category",
        y_title=f"Median {y_title[0].lower()}{y_title[1:]}",
        legend_title="Idle category",
    )


# Intervals spanning more than this factor (largest / smallest positive median) get a log axis.
LOG_SPREAD = 100.0


def _log_axis_toggle(fig: go.Figure, highs: pd.Series, typical: pd.Series, log_y: bool | None) -> None:
    """A log or linear y axis (see ``idle_interval_stats``) and the buttons to switch it."""
    if log_y is None:
        positive = typical[typical > 0]
        log_y = bool(len(positive)) and float(highs.max()) > LOG_SPREAD * float(positive.min())
    fig.update_yaxes(type="log" if log_y else "linear")
    fig.update_layout(updatemenus=[dict(
        type="buttons", direction="right", showactive=True, active=1 if log_y else 0,
        x=1.0, xanchor="right", y=1.02, yanchor="bottom", pad=dict(t=0, b=0),
        font=dict(size=11),
        buttons=[
            dict(label="linear", method="relayout", args=[{"yaxis.type": "linear"}]),
            dict(label="log", method="relayout", args=[{"yaxis.type": "log"}]),
        ],
    )])


def _category_boxes(df: pd.DataFrame, categories, y: str, extra: str, hover: str) -> go.Figure:
    """One box per idle category with every (rank, stream) as a point: the many-ranks layout.

    ``hover`` is a format string with ``{cat}``; ``customdata`` is (rank, stream, ``extra``).
    """
    fig = go.Figure()
    for cat in categories:
        part = df[df["idle_category"].astype(str) == cat]
        fig.add_trace(
            go.Box(
                name=cat,
                y=part[y],
                boxpoints="all",
                jitter=0.4,
                pointpos=0,
                marker=dict(color=color_for(cat), size=4),
                customdata=part[["rank", "stream", extra]].to_numpy(),
                hovertemplate="rank %{customdata[0]}, stream %{customdata[1]}<br>"
                + hover.format(cat=cat)
                + "<extra></extra>",
            )
        )
    return fig


def draw(result: tuple[pd.DataFrame, pd.DataFrame | None], visualize_pctg: bool = True) -> dict[str, go.Figure]:
    """The idle time figures by file stem: the breakdown (shares with ``visualize_pctg``, else µs)
    and, when the interval statistics were asked for, their distribution."""
    breakdown, stats = result
    figures = {"idle_time_breakdown": idle_time_breakdown(breakdown, pctg=visualize_pctg)}
    if stats is not None:
        figures["idle_interval_stats"] = idle_interval_stats(stats)
    return figures
