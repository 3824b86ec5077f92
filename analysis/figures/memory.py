"""GPU memory figures: a snapshot's allocations over time, the top allocations at the peak, and the
``export_memory_timeline`` categories over time.

Each function takes tables computed by ``analysis.memory`` and returns a ``go.Figure``; nothing is
computed here beyond choosing which points to draw (a buffer of 100k events is thinned to a few
thousand moments, keeping each bucket's highest and lowest total, so the peak and the shape stay).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from analysis.figures.style import KERNEL_COLORS, apply_layout, no_data_figure, plural, truncate
from analysis.memory.replay import MiB

GiB = 1024 * MiB
# Points per trace in a stacked area chart: beyond this the HTML gets heavy and nothing shows more.
MAX_POINTS = 4000
_GREY = "#999999"
# torch's own colours for the memory timeline categories (torch.profiler._memory_profiler).
CATEGORY_COLORS = {
    "parameter": "darkgreen",
    "optimizer_state": "goldenrod",
    "input": "black",
    "temporary": "mediumpurple",
    "activation": "red",
    "gradient": "mediumblue",
    "autograd_detail": "royalblue",
    "unknown": "grey",
}


def _sample(total: np.ndarray, max_points: int = MAX_POINTS) -> np.ndarray:
    """Indices to draw: all when few, else per bucket the highest and lowest total (peak kept)."""
    n = len(total)
    if n <= max_points:
        return np.arange(n)
    edges = np.linspace(0, n, max_points // 2 + 1).astype(np.int64)
    keep = [0, n - 1, int(np.argmax(total))]
    for lo, hi in zip(edges[:-1], edges[1:], strict=True):
        if hi > lo:
            keep += [lo + int(np.argmax(total[lo:hi])), lo + int(np.argmin(total[lo:hi]))]
    return np.unique(keep)


def _x_axis(time_us: pd.Series, states: pd.Series, x: str) -> tuple[np.ndarray, str]:
    """Event number (torch's viewer), or ms since the first event when asked and every event has a time."""
    t = time_us.to_numpy(dtype=float)
    if x == "time" and len(t) and np.isfinite(t).all():
        return (t - t[0]) / 1000.0, "Time since the buffer's first event (ms)"
    return states.to_numpy() - 1, "Allocator event (index in the buffer; -1: state at its start)"


def snapshot_timeline_figure(
    by_frame: pd.DataFrame,
    timeline: pd.DataFrame,
    peak: pd.DataFrame,
    top_at_peak: pd.DataFrame,
    *,
    title: str = "GPU memory over time",
    labels: int = 3,
    x: str = "event",
) -> go.Figure:
    """Allocated memory stacked by top user frame over time, reserved memory as a line, the peak marked.

    ``by_frame``: ``analysis.memory.allocated_by_frame``; ``timeline``: ``MemoryReplay.timeline``;
    ``peak``: ``memory_peak``; ``top_at_peak``: ``allocations_at_peak``. The ``labels`` largest
    groups at the peak get a label on their band. ``x="event"`` spaces events evenly as torch's
    viewer does (a forward pass ramps however fast it ran); ``x="time"`` uses the events' times.
    """
    if by_frame.empty or not (timeline["allocated_bytes"].any() or timeline["reserved_bytes"].any()):
        return no_data_figure(title, "The snapshot holds no allocations for this device")
    total = timeline["allocated_bytes"].to_numpy()
    keep = _sample(total)
    x_all, x_title = _x_axis(timeline["time_us"], timeline["state"], x)
    xs = x_all[keep]
    frames = [c for c in by_frame.columns if c not in ("state", "time_us")]
    fig = go.Figure()
    for i, frame in enumerate(frames):
        color = _GREY if frame == "other" else KERNEL_COLORS[i % len(KERNEL_COLORS)]
        fig.add_trace(
            go.Scatter(
                x=xs, y=by_frame[frame].to_numpy()[keep] / MiB, name=truncate(frame), mode="lines",
                stackgroup="allocated", line=dict(width=0.5, color=color, shape="hv"), fillcolor=color,
                hovertemplate=f"{frame}<br>%{{y:.1f}} MiB<extra></extra>",
            )
        )
    fig.add_trace(
        go.Scatter(
            x=xs, y=timeline["reserved_bytes"].to_numpy()[keep] / MiB, name="reserved", mode="lines",
            line=dict(color="black", dash="dash", width=1.5, shape="hv"),
            hovertemplate="reserved %{y:.1f} MiB<extra></extra>",
        )
    )
    row = peak.iloc[0]
    k = int(row["peak_allocated_state"])
    peak_mib = row["peak_allocated_bytes"] / MiB
    fig.add_vline(x=x_all[k], line=dict(color="#D55E00", width=1.5, dash="dot"))
    fig.add_annotation(
        x=x_all[k], y=peak_mib, text=f"<b>peak {peak_mib:,.1f} MiB</b>", showarrow=True,
        arrowhead=2, ax=40, ay=-30, font=dict(color="#D55E00"),
    )
    # Label the largest groups at the peak in the middle of their band.
    bottoms = np.r_[0, np.cumsum([by_frame[f].iat[k] for f in frames])] / MiB
    for frame in top_at_peak["frame"].head(labels):
        if frame not in frames:
            continue
        j = frames.index(frame)
        size = by_frame[frame].iat[k] / MiB
        fig.add_annotation(
            x=x_all[k], y=(bottoms[j] + bottoms[j + 1]) / 2, text=f"{truncate(frame, 32)}: {size:,.1f} MiB",
            showarrow=False, xanchor="right", xshift=-6, font=dict(size=11, color="white"),
            bgcolor="rgba(0,0,0,0.55)",
        )
    subtitle = (
        f"device {int(row['device'])}: peak allocated {peak_mib:,.1f} MiB, peak reserved "
        f"{row['peak_reserved_bytes'] / MiB:,.1f} MiB, {plural(int(row['events']), 'event')}"
    )
    apply_layout(fig, title, subtitle=subtitle, x_title=x_title, y_title="Memory (MiB)",
                 legend_title="Allocated by (top user frame)")
    return fig


def top_allocations_table(top_at_peak: pd.DataFrame, *, title: str = "Top allocations at the peak") -> go.Figure:
    """A table of ``allocations_at_peak``: frame, count, MiB, largest MiB, share of allocated."""
    if top_at_peak.empty:
        return no_data_figure(title, "Nothing was allocated at the peak")
    t = top_at_peak
    fig = go.Figure(
        go.Table(
            columnwidth=[5, 1, 1, 1, 1],
            header=dict(values=["<b>Top user frame</b>", "<b>Allocations</b>", "<b>MiB</b>",
                                "<b>Largest (MiB)</b>", "<b>Share (%)</b>"], align="left"),
            cells=dict(
                values=[t["frame"], t["allocations"], t["mib"].round(2),
                        (t["largest_bytes"] / MiB).round(2), t["share_pct"].round(1)],
                align="left",
            ),
        )
    )
    return apply_layout(fig, title, height=max(300, 120 + 28 * len(t)))


def memory_timeline_figure(timeline: pd.DataFrame, *, title: str = "Memory timeline by category") -> go.Figure:
    """``load_memory_timeline``'s categories stacked over time (ms since the first moment), peak marked."""
    if timeline.empty:
        return no_data_figure(title, "The memory timeline is empty")
    total = timeline["total_bytes"].to_numpy()
    unit, unit_name = (GiB, "GiB") if total.max() >= GiB else (MiB, "MiB")
    keep = _sample(total)
    t_all = (timeline["time_ns"].to_numpy() - timeline["time_ns"].iat[0]) / 1e6
    fig = go.Figure()
    for category, color in CATEGORY_COLORS.items():
        if category not in timeline:
            continue
        fig.add_trace(
            go.Scatter(
                x=t_all[keep], y=timeline[category].to_numpy()[keep] / unit,
                name=category.replace("_", " "), mode="lines", stackgroup="memory",
                line=dict(width=0.5, color=color, shape="hv"), fillcolor=color, opacity=0.7,
                hovertemplate=f"{category}: %{{y:.3f}} {unit_name}<extra></extra>",
            )
        )
    k = int(np.argmax(total))
    fig.add_vline(x=t_all[k], line=dict(color="#D55E00", width=1.5, dash="dot"))
    fig.add_annotation(
        x=t_all[k], y=total[k] / unit, text=f"<b>peak {total[k] / unit:,.2f} {unit_name}</b>",
        showarrow=True, arrowhead=2, ax=40, ay=-30, font=dict(color="#D55E00"),
    )
    return apply_layout(
        fig, title, subtitle=f"{len(timeline):,} moments; peak at {t_all[k]:,.1f} ms",
        x_title="Time since the first moment (ms)", y_title=f"Memory ({unit_name})", legend_title="Category",
    )
