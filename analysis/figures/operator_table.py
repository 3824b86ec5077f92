"""Figure of the TensorBoard plugin's operator view: the operators with the most host self time."""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go

from analysis.figures.style import apply_layout, no_data_figure, unique_truncated


def operator_table(df: pd.DataFrame, top: int = 20) -> go.Figure:
    """Horizontal bars (ms) of the ``top`` operators by host self time (first rank shown), with
    their device self time beside when the trace links it."""
    title = f"Top {top} operators by host self time"
    if df is None or df.empty:
        return no_data_figure(title, "No CPU operators")
    rank = int(df["rank"].iloc[0])
    d = df[df["rank"] == rank].nlargest(top, "host_self_us")[::-1]
    labels = d["name"] if "input_shape" not in d else d["name"] + " " + d["input_shape"].astype(str)
    if "call_stack" in d:  # the innermost frame tells the calls apart
        labels = labels + " @ " + d["call_stack"].astype(str).str.split("\n").str[0]
    labels = unique_truncated(labels)
    fig = go.Figure()
    fig.add_bar(name="host self", y=labels, x=d["host_self_us"] / 1000, orientation="h",
                marker_color="#0072B2", customdata=d[["calls"]].to_numpy(),
                hovertemplate="%{y}<br>host self %{x:.3f} ms in %{customdata[0]} calls<extra></extra>")
    if (d["device_self_us"] > 0).any():
        fig.add_bar(name="device self", y=labels, x=d["device_self_us"] / 1000, orientation="h",
                    marker_color="#E69F00")
    fig.update_layout(barmode="group", height=max(400, 22 * len(d) + 120))
    return apply_layout(fig, f"{title} (rank {rank})", x_title="ms")


def draw(result: pd.DataFrame, top: int = 20) -> dict[str, go.Figure]:
    return {"operator_table": operator_table(result, top)}
