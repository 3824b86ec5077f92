"""Figure of the TensorBoard plugin's step-time categories, stacked per step."""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go

from analysis.figures.style import apply_layout, no_data_figure

TITLE = "Step time breakdown"
CATEGORIES = {
    "kernel_us": ("Kernel", "#0072B2"),
    "memcpy_us": ("Memcpy", "#56B4E9"),
    "memset_us": ("Memset", "#009E73"),
    "communication_us": ("Communication", "#CC79A7"),
    "runtime_us": ("Runtime", "#D55E00"),
    "dataloader_us": ("DataLoader", "#E69F00"),
    "cpu_exec_us": ("CPU Exec", "#F0E442"),
    "other_us": ("Other", "#999999"),
}


def step_time_breakdown(df: pd.DataFrame) -> go.Figure:
    """Stacked bars (ms): one per rank and step of ``get_step_time_breakdown()``, the eight
    categories that partition the step; a step annotated twice (CPU and GPU) shows twice."""
    if df is None or df.empty:
        return no_data_figure(TITLE, "No profiler steps")
    labels = [f"r{int(r)} · step {int(s)}" + (f" ({k})" if k else "")
              for r, s, k in zip(df["rank"], df["step"],
                                 df.groupby(["rank", "step"]).cumcount(), strict=True)]
    fig = go.Figure()
    for col, (name, color) in CATEGORIES.items():
        if col == "communication_us" and not (df[col] > 0).any():
            continue
        fig.add_bar(name=name, x=labels, y=df[col] / 1000, marker_color=color,
                    hovertemplate=f"%{{x}}<br>{name}: %{{y:.3f}} ms<extra></extra>")
    fig.update_layout(barmode="stack")
    return apply_layout(fig, f"{TITLE} per profiler step (TensorBoard plugin's categories)",
                        y_title="ms")


def draw(result: pd.DataFrame) -> dict[str, go.Figure]:
    return {"step_time_breakdown": step_time_breakdown(result)}
