"""Figures of the TensorBoard plugin's kernel view: the tensor-core share and the top kernels."""

from __future__ import annotations

import plotly.graph_objects as go

from analysis.figures.style import apply_layout, no_data_figure, unique_truncated
from analysis.metrics.tensorboard.kernel_table import KernelTables, tensor_core_share

TC_COLOR, OTHER_COLOR = "#CC79A7", "#999999"


def tensor_core_share_figure(result: KernelTables) -> go.Figure:
    """Per rank, kernel time (ms) in kernels that use tensor cores and in the others, stacked,
    with the share in the bar's label."""
    title = "Kernel time using tensor cores"
    if result is None or result.kernels.empty:
        return no_data_figure(title, "No GPU kernels")
    share = tensor_core_share(result)
    x = [f"rank {int(r)}" for r in share["rank"]]
    total = share["tensor_core_us"] + share["other_us"]
    pct = (100 * share["tensor_core_us"] / total.where(total > 0)).fillna(0)
    fig = go.Figure()
    fig.add_bar(name="uses tensor cores", x=x, y=share["tensor_core_us"] / 1000,
                marker_color=TC_COLOR, text=[f"{p:.1f} %" for p in pct], textposition="inside")
    fig.add_bar(name="no tensor cores", x=x, y=share["other_us"] / 1000, marker_color=OTHER_COLOR)
    fig.update_layout(barmode="stack")
    return apply_layout(fig, title, y_title="kernel time (ms)")


def top_kernels(result: KernelTables, top: int = 20) -> go.Figure:
    """Horizontal bars: the ``top`` kernels by total time (ms) of the first rank shown, coloured
    by tensor-core use."""
    title = f"Top {top} kernels by total time"
    if result is None or result.kernels.empty:
        return no_data_figure(title, "No GPU kernels")
    k = result.kernels[result.kernels["rank"] == result.kernels["rank"].iloc[0]].head(top)[::-1]
    names = unique_truncated(k["name"])
    fig = go.Figure(go.Bar(
        x=k["total_us"] / 1000, y=names, orientation="h",
        marker_color=[TC_COLOR if t else OTHER_COLOR for t in k["tensor_cores_used"]],
        customdata=k[["calls", "mean_us", "mean_blocks_per_sm"]].to_numpy(),
        hovertemplate="%{y}<br>%{x:.3f} ms in %{customdata[0]} calls (mean %{customdata[1]:.1f} µs)"
                      "<br>mean blocks per SM %{customdata[2]:.2f}<extra></extra>"))
    fig.update_layout(showlegend=False, height=max(400, 22 * len(k) + 120))
    return apply_layout(fig, f"{title} (rank {int(k['rank'].iloc[0])}; tensor-core kernels pink)",
                        x_title="total time (ms)")


def draw(result: KernelTables, top: int = 20) -> dict[str, go.Figure]:
    return {"tensor_core_share": tensor_core_share_figure(result),
            "kernel_table": top_kernels(result, top)}
