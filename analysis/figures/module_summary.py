"""Figure of the TensorBoard plugin's module view: the nn.Module hierarchy as an icicle."""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go

from analysis.figures.style import apply_layout, no_data_figure


def module_icicle(df: pd.DataFrame) -> go.Figure:
    """Icicle of the first rank's module hierarchy (``get_module_summary()``): each module's width
    is its host total time (µs), children under their parent; the hover gives calls, operators and
    self time."""
    title = "Module hierarchy by host time"
    if df is None or df.empty:
        return no_data_figure(title, "No nn.Module events (record with with_modules=True)")
    rank = int(df["rank"].iloc[0])
    d = df[df["rank"] == rank]
    parents = [" / ".join(p.split(" / ")[:-1]) for p in d["path"]]
    fig = go.Figure(go.Icicle(
        ids=d["path"], labels=d["module"], parents=parents, values=d["host_total_us"],
        branchvalues="total",
        customdata=d[["occurrences", "operators", "host_self_us"]].to_numpy(),
        hovertemplate="%{label}<br>host %{value:.1f} µs (self %{customdata[2]:.1f} µs)<br>"
                      "%{customdata[0]} calls, %{customdata[1]} operators<extra></extra>",
        tiling=dict(orientation="v"),
    ))
    fig.update_layout(height=600)
    return apply_layout(fig, f"{title} (rank {rank})")


def draw(result: pd.DataFrame) -> dict[str, go.Figure]:
    return {"module_summary": module_icicle(result)}
