"""Figure of GPU utilization and est. SM efficiency over time, per rank and GPU."""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go

from analysis.figures.style import apply_layout, no_data_figure

TITLE = "GPU utilization and est. SM efficiency over time"


def gpu_utilization_timeline(df: pd.DataFrame) -> go.Figure:
    """Step lines per rank and GPU (``get_gpu_utilization_timeline()``), time in ms from the first
    bucket of each rank: utilization solid, est. SM efficiency dotted."""
    if df is None or df.empty:
        return no_data_figure(TITLE, "No GPU kernels")
    fig = go.Figure()
    for (rank, gpu), g in df.groupby(["rank", "gpu"], sort=True):
        t = (g["start_us"] - g["start_us"].min()) / 1000
        label = f"rank {int(rank)} · GPU {int(gpu)}"
        fig.add_scatter(x=t, y=g["gpu_utilization_pct"], mode="lines", line_shape="hv",
                        name=f"{label}: utilization")
        if g["sm_efficiency_pct"].notna().any():
            fig.add_scatter(x=t, y=g["sm_efficiency_pct"], mode="lines", line_shape="hv",
                            line_dash="dot", name=f"{label}: est. SM efficiency")
    fig.update_yaxes(range=[0, 105])
    return apply_layout(fig, TITLE, x_title="time from trace start (ms)", y_title="%")


def draw(result: pd.DataFrame) -> dict[str, go.Figure]:
    return {"gpu_utilization_timeline": gpu_utilization_timeline(result)}
