"""Figure of the TensorBoard plugin's GPU summary: four percentages per rank and GPU."""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go

from analysis.figures.style import apply_layout, no_data_figure

TITLE = "GPU summary"
METRICS = {
    "gpu_utilization_pct": ("GPU utilization", "#0072B2"),
    "sm_efficiency_pct": ("Est. SM efficiency", "#009E73"),
    "achieved_occupancy_pct": ("Est. achieved occupancy", "#E69F00"),
    "tensor_core_pct": ("Kernel time using tensor cores", "#CC79A7"),
}


def gpu_summary(df: pd.DataFrame) -> go.Figure:
    """Grouped bars: per rank and GPU (``get_gpu_summary()``), each of the four percentages;
    a metric the trace cannot give (no ``blocks per SM`` / occupancy args) is shown as n/a."""
    if df is None or df.empty:
        return no_data_figure(TITLE, "No GPU kernels")
    labels = [f"rank {int(r)} · GPU {int(g)}" for r, g in zip(df["rank"], df["gpu"], strict=True)]
    fig = go.Figure()
    for col, (name, color) in METRICS.items():
        values = df[col]
        fig.add_bar(name=name, x=labels, y=values.fillna(0), marker_color=color,
                    text=["n/a" if pd.isna(v) else f"{v:.1f}" for v in values],
                    textposition="outside", cliponaxis=False,
                    hovertemplate=f"%{{x}}<br>{name}: %{{text}} %<extra></extra>")
    fig.update_layout(barmode="group")
    fig.update_yaxes(range=[0, 110])
    return apply_layout(fig, f"{TITLE} (TensorBoard plugin's definitions)", y_title="%")


def draw(result: pd.DataFrame) -> dict[str, go.Figure]:
    return {"gpu_summary": gpu_summary(result)}
