"""Figures of the GPU kernel breakdown: time per kernel type, and the top kernels per type and rank."""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from analysis.figures.style import (
    KERNEL_COLORS,
    MANY_RANKS,
    apply_layout,
    color_for,
    no_data_figure,
    overlap_label,
    plural,
    rank_axis,
    sorted_ranks,
    unique_truncated,
)

TYPE_TITLE = "GPU kernel time by kernel type, all ranks"
KERNEL_TITLE = "Top GPU kernels by type"
OTHERS = "others"  # HTA's name for the kernels folded together past num_kernels
_ROW_HEIGHT = 380


def kernel_type_breakdown(kernel_type_df: pd.DataFrame) -> go.Figure:
    """Share (%) of the GPU kernel time of all ranks spent in each kernel type.

    ``kernel_type_df`` is the first frame of ``get_gpu_kernel_breakdown()`` (``kernel_type, sum,
    percentage``, sum in µs); overlapping types (``"COMPUTATION overlapping COMMUNICATION"``) are the
    time both ran at once. A donut, coloured with the shared palette.
    """
    if kernel_type_df is None or kernel_type_df.empty or not (kernel_type_df["sum"] > 0).any():
        return no_data_figure(TYPE_TITLE, "No GPU kernel time")
    df = kernel_type_df[kernel_type_df["sum"] > 0].sort_values("sum", ascending=False)
    types = df["kernel_type"].astype(str)
    fig = go.Figure(
        go.Pie(
            labels=[overlap_label(t) for t in types],
            values=df["sum"],
            hole=0.4,
            sort=False,
            direction="clockwise",
            marker=dict(colors=[color_for(t) for t in types], line=dict(color="white", width=1)),
            textinfo="percent",
            customdata=types,
            hovertemplate="%{customdata}<br>%{value:,.0f} µs (%{percent})<extra></extra>",
        )
    )
    return apply_layout(
        fig,
        TYPE_TITLE,
        legend_title="Kernel type",
        subtitle="Share of summed kernel time; ∩ = both types running at once",
    )


def _top_names(part: pd.DataFrame, top: int) -> list[str]:
    """The ``top`` kernel names of one type by time summed over ranks (HTA's "others" excluded)."""
    totals = part.groupby("name", observed=True)["sum (us)"].sum().sort_values(ascending=False)
    return [n for n in totals.index if n != OTHERS][:top]


def _fold(part: pd.DataFrame, keep: list[str]) -> pd.DataFrame:
    """Rows of one type with every kernel outside ``keep`` summed into ``others`` per rank."""
    name = part["name"].where(part["name"].isin(keep), OTHERS)
    agg = (
        part.assign(name=name)
        .groupby(["name", "rank"], observed=True)
        .agg(
            **{
                "sum (us)": ("sum (us)", "sum"),
                "mean (us)": ("mean (us)", "mean"),
                "min (us)": ("min (us)", "min"),
                "max (us)": ("max (us)", "max"),
            }
        )
        .reset_index()
    )
    return agg


def kernel_breakdown(kernel_metrics_df: pd.DataFrame, top: int = 10) -> go.Figure:
    """Total time (µs) of the ``top`` kernels of each kernel type on each rank.

    ``kernel_metrics_df`` is the second frame of ``get_gpu_kernel_breakdown()`` (``name, sum (us),
    max (us), min (us), stddev, mean (us), kernel_type, rank``). Kernels past ``top`` (by time over
    all ranks) are summed into ``others``. One panel per kernel type: for one rank horizontal bars,
    up to ``MANY_RANKS`` ranks stacked bars per rank, more a kernel × rank heatmap. Names are cut in
    labels; the hover has them whole.
    """
    if kernel_metrics_df is None or kernel_metrics_df.empty:
        return no_data_figure(KERNEL_TITLE, "No GPU kernels")
    df = kernel_metrics_df.copy()
    df["name"] = df["name"].astype(str)
    df["rank"] = df["rank"].astype(int)
    types = [t for t in ("COMPUTATION", "COMMUNICATION", "MEMORY") if t in set(df["kernel_type"])]
    types += sorted(set(df["kernel_type"].astype(str)) - set(types))
    ranks = sorted_ranks(df["rank"])
    mode = "one" if len(ranks) == 1 else ("stack" if len(ranks) <= MANY_RANKS else "heatmap")

    panels = []
    for ktype in types:
        part = df[df["kernel_type"] == ktype]
        keep = _top_names(part, top)
        folded = _fold(part, keep)
        names = keep + ([OTHERS] if (folded["name"] == OTHERS).any() else [])
        panels.append((ktype, folded, names))
    # Panels listing kernels (one rank, heatmaps) get height by their kernel count; bar panels share.
    sizes = [max(len(names), 3) if mode != "stack" else 1 for _, _, names in panels]
    height = _ROW_HEIGHT * len(types) if mode == "stack" else 28 * sum(sizes) + 120 * len(types)
    fig = make_subplots(
        # ~110 px between panels: room for an x axis title and the next panel's title
        rows=len(types),
        cols=1,
        vertical_spacing=min(110 / height, 0.9 / max(len(types) - 1, 1)),
        subplot_titles=[f"{t.capitalize()} kernels" for t in types],
        row_heights=[n / sum(sizes) for n in sizes],
    )
    for row, (_, folded, names) in enumerate(panels, start=1):
        labels = dict(zip(names, unique_truncated(names), strict=True))
        if mode == "heatmap":
            _add_heatmap(fig, folded, names, labels, ranks, row)
            continue
        for i, name in enumerate(names):
            rows = folded[folded["name"] == name].sort_values("rank")
            color = color_for(OTHERS) if name == OTHERS else KERNEL_COLORS[i % len(KERNEL_COLORS)]
            custom = rows[["mean (us)", "min (us)", "max (us)"]].to_numpy()
            hover = (
                f"{name}<br>rank %{{customdata[3]}}: %{{customdata[4]:,.0f}} µs in total"
                "<br>mean %{customdata[0]:,.1f} µs, min %{customdata[1]:,.0f}, max %{customdata[2]:,.0f}"
                "<extra></extra>"
            )
            custom = [
                [*c, r, s] for c, r, s in zip(custom, rows["rank"], rows["sum (us)"], strict=True)
            ]
            if mode == "one":
                bar = go.Bar(y=[labels[name]], x=rows["sum (us)"], orientation="h")
            else:
                bar = go.Bar(x=rows["rank"].astype(str), y=rows["sum (us)"])
            bar.update(
                name=labels[name],
                legend=_legend_id(row),
                marker_color=color,
                customdata=custom,
                hovertemplate=hover,
                showlegend=mode == "stack",
            )
            fig.add_trace(bar, row=row, col=1)
        if mode == "one":
            fig.update_yaxes(
                type="category",
                categoryorder="array",
                categoryarray=[labels[n] for n in reversed(names)],
                automargin=True,
                row=row,
                col=1,
            )
            fig.update_xaxes(title_text="Total kernel time (µs)", row=row, col=1)
        else:
            fig.update_xaxes(rank_axis(ranks), row=row, col=1)
            fig.update_yaxes(title_text="Total time (µs)", row=row, col=1)

    fig.update_layout(barmode="stack")
    where = f"rank {ranks[0]}" if len(ranks) == 1 else f"{plural(len(ranks), 'rank')}"
    sub = f"Top {top} kernels per type by total time; the rest summed as “others”"
    apply_layout(fig, f"{KERNEL_TITLE}, {where}", subtitle=sub, height=height + 140)
    fig.update_layout(margin=dict(t=130))
    if mode == "stack":
        # One legend beside each panel, so a kernel's colour is looked up next to its bars.
        for row, ktype in enumerate(types, start=1):
            top_of_panel = fig.layout["yaxis" if row == 1 else f"yaxis{row}"].domain[1]
            fig.update_layout(
                {
                    _legend_id(row): dict(
                        title_text=f"{ktype.capitalize()} kernels",
                        y=top_of_panel,
                        yanchor="top",
                        x=1.02,
                        xanchor="left",
                        font=dict(size=10),
                        traceorder="reversed",
                    )
                }
            )
    return fig


def _legend_id(row: int) -> str:
    return "legend" if row == 1 else f"legend{row}"


def _add_heatmap(fig, folded, names, labels, ranks, row) -> None:
    """One kernel × rank heatmap of total time, with its own colour bar beside its panel."""
    grid = folded.pivot_table(index="name", columns="rank", values="sum (us)", aggfunc="sum")
    grid = grid.reindex(index=list(reversed(names)), columns=ranks)
    # The colour bar sits beside its own panel: panels share nothing, their totals differ by orders.
    yaxis = fig.layout["yaxis" if row == 1 else f"yaxis{row}"]
    lo, hi = yaxis.domain
    fig.add_trace(
        go.Heatmap(
            z=grid.to_numpy(),
            x=[str(r) for r in ranks],
            y=[labels[n] for n in grid.index],
            customdata=[[n] * len(ranks) for n in grid.index],
            colorscale="Viridis",
            colorbar=dict(
                title=dict(text="Total (µs)"), y=(lo + hi) / 2, len=(hi - lo), thickness=12
            ),
            hovertemplate="%{customdata}<br>rank %{x}: %{z:,.0f} µs<extra></extra>",
            hoverongaps=False,
        ),
        row=row,
        col=1,
    )
    fig.update_xaxes(rank_axis(ranks), row=row, col=1)
    fig.update_yaxes(type="category", automargin=True, title_text="Kernel", row=row, col=1)


def draw(result: tuple[pd.DataFrame, pd.DataFrame]) -> dict[str, go.Figure]:
    """The kernel breakdown's figures by file stem: time per kernel type, and the top kernels."""
    kernel_type_df, kernel_metrics_df = result
    return {
        "kernel_type_breakdown": kernel_type_breakdown(kernel_type_df),
        "kernel_breakdown": kernel_breakdown(kernel_metrics_df),
    }
