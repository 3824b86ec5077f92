"""Figures of the operator roofline: the roofline plot and the ops losing most time to their bound."""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from analysis.figures.style import apply_layout, no_data_figure, truncate
from analysis.metrics.roofline.gpu_specs import GpuSpec
from analysis.metrics.roofline.operator_roofline import RooflineResult

TITLE = "Operator roofline"
LOST_TITLE = "Operators furthest from their roofline"
_FAMILY_COLORS = {
    "gemm": "#0072B2",
    "attention": "#E69F00",
    "conv": "#009E73",
    "elementwise": "#CC79A7",
    "softmax": "#D55E00",
    "normalization": "#56B4E9",
    "reduce": "#999999",
}
_ROOF_DASH = {"bf16": "solid", "fp16": "dot", "fp8": "dash", "fp32": "dashdot", "tf32": "longdash"}


def operator_roofline(result: RooflineResult) -> go.Figure:
    """Log-log roofline: achieved TFLOP/s against arithmetic intensity (FLOPs per byte), one dot per
    op group (area ∝ its total kernel time), with the GPU's ceilings (bandwidth slope, flat compute
    peak per precision used, ridge point marked) when its peaks are known."""
    ops = result.ops
    if len(ops):  # innermost groups only: an outer op (linear around mm) would repeat its dot
        ops = ops[ops["innermost"] & (ops["kernel_time_us_sum"] > 0) & (ops["gflops"] > 0)]
    if ops.empty:
        return no_data_figure(TITLE, "No modelled operator with kernel time")
    fig = go.Figure()
    size = 8 + 40 * np.sqrt(ops["kernel_time_us_sum"] / ops["kernel_time_us_sum"].max())
    for family, rows in ops.groupby("family", sort=True):
        fig.add_trace(
            go.Scatter(
                x=rows["flops_per_byte"],
                y=rows["tflops_per_s"],
                mode="markers",
                name=family,
                marker=dict(
                    size=size[rows.index],
                    color=_FAMILY_COLORS.get(family, "#444444"),
                    opacity=0.75,
                    line=dict(width=0.5, color="white"),
                ),
                customdata=np.stack(
                    [
                        rows["name"],
                        rows["input_dims"],
                        rows["count"],
                        rows["kernel_time_us_sum"],
                        rows["pct_of_peak"].fillna(np.nan),
                        rows["bound"].fillna("n/a"),
                    ],
                    axis=-1,
                ),
                hovertemplate=(
                    "%{customdata[0]}<br>%{customdata[1]}<br>%{customdata[2]} calls, "
                    "%{customdata[3]:.1f} µs<br>%{x:.1f} FLOP/B, %{y:.2f} TFLOP/s<br>"
                    "%{customdata[4]:.1f} % of the %{customdata[5]} bound<extra></extra>"
                ),
            )
        )
    subtitle = None
    if result.gpu is not None:
        _add_roofs(fig, result.gpu, ops)
        subtitle = f"Ceilings of {result.gpu.name} (dense peaks); dot area: total kernel time"
    fig.update_xaxes(type="log")
    fig.update_yaxes(type="log")
    return apply_layout(
        fig,
        TITLE,
        subtitle=subtitle,
        x_title="Arithmetic intensity (FLOP/byte)",
        y_title="Achieved TFLOP/s",
        legend_title="op family",
    )


def _add_roofs(fig: go.Figure, gpu: GpuSpec, ops: pd.DataFrame) -> None:
    bw = gpu.memory_tb_s
    lo = min(ops["flops_per_byte"].min(), 0.1) / 2
    for precision in [p for p in _ROOF_DASH if p in set(ops["precision"].dropna())]:
        peak = gpu.peak_tflops(precision)
        if not np.isfinite(peak) or not np.isfinite(bw):
            continue
        ridge = gpu.ridge_flops_per_byte(precision)
        hi = max(ops["flops_per_byte"].max(), ridge) * 4
        fig.add_trace(
            go.Scatter(
                x=[lo, ridge, hi],
                y=[lo * bw, peak, peak],
                mode="lines",
                name=f"{precision} roof",
                line=dict(color="#222222", width=1.5, dash=_ROOF_DASH[precision]),
                hovertemplate=f"{precision}: {peak:g} TFLOP/s, {bw:g} TB/s<extra></extra>",
            )
        )
        fig.add_trace(
            go.Scatter(
                x=[ridge],
                y=[peak],
                mode="markers+text",
                showlegend=False,
                marker=dict(symbol="diamond", size=9, color="#222222"),
                text=[f"ridge {ridge:.0f} FLOP/B"],
                textposition="bottom right",
                hovertemplate=f"ridge point ({precision}): {ridge:.1f} FLOP/byte<extra></extra>",
            )
        )


def time_lost_table(result: RooflineResult, top: int = 15) -> go.Figure:
    """The ``top`` op groups with the most kernel time above their roofline time (µs, summed)."""
    ops = result.ops
    if len(ops):  # innermost groups only, so that nested ops do not repeat the same kernels
        ops = ops[ops["innermost"]].dropna(subset=["time_lost_us"])
    if ops.empty:
        return no_data_figure(LOST_TITLE, "No roofline: unknown GPU peaks or no modelled operator")
    ops = ops.sort_values("time_lost_us", ascending=False).head(top)
    columns = {
        "operator": [truncate(n, 44) for n in ops["name"]],
        "input dims": [truncate(d, 48) for d in ops["input_dims"]],
        "calls": ops["count"],
        "kernel µs": ops["kernel_time_us_sum"].round(1),
        "roofline µs": (ops["roofline_time_us"] * ops["count"]).round(1),
        "lost µs": ops["time_lost_us"].round(1),
        "% of peak": ops["pct_of_peak"].round(1),
        "bound": ops["bound"],
    }
    fig = go.Figure(
        go.Table(
            columnwidth=[3.2, 3.6, 0.8, 1, 1, 1, 1, 1],
            header=dict(values=list(columns), align="left", fill_color="#e8e8e8"),
            cells=dict(values=list(columns.values()), align="left"),
        )
    )
    return apply_layout(
        fig,
        LOST_TITLE,
        subtitle="Kernel time minus the roofline time, summed over calls",
        height=120 + 28 * len(ops),
    )


def draw(result: RooflineResult, top: int = 15) -> dict[str, go.Figure]:
    """Both figures, keyed by file stem (for the report)."""
    return {
        "operator_roofline": operator_roofline(result),
        "operator_time_lost": time_lost_table(result, top=top),
    }
