"""Figure of the memory view: allocated and reserved memory over time per device, profiler steps
shaded, the peak marked."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from analysis.figures.style import apply_layout, no_data_figure
from analysis.metrics.tensorboard.memory_view import MemoryReport

TITLE = "Memory over time"
UNITS = (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10), ("B", 1))
ALLOCATED, RESERVED, STEP_FILL = "#0072B2", "#E69F00", "rgba(153,153,153,0.15)"
# Time columns a panel's curves are drawn in: a curve with more than four points per column is
# drawn from each column's first, last, lowest and highest points (what the eye can tell apart at
# the figure's width; the tables keep every change).
COLUMNS = 1500


def columns_kept(t: np.ndarray, *curves: np.ndarray, columns: int = COLUMNS) -> np.ndarray:
    """Positions of the points to draw of step curves sampled at the sorted times ``t``: all of
    them when there are at most ``4 × columns``; else, of each of ``columns`` equal slices of the
    time span, the first and the last point and, for each curve, the earliest of its lowest and
    of its highest points (so every peak and trough is drawn, in its column)."""
    n = len(t)
    if n <= 4 * columns or t[-1] <= t[0] or (np.diff(t) < 0).any():  # (unsorted: all drawn)
        return np.arange(n)
    col = np.minimum(((t - t[0]) / (t[-1] - t[0]) * columns).astype(np.int64), columns - 1)
    first = np.flatnonzero(np.r_[True, col[1:] != col[:-1]])
    last = np.r_[first[1:], n] - 1
    keep = [first, last]
    position = np.arange(n)
    for y in curves:
        for sign in (1, -1):  # lowest, then highest: the earliest of each in its column
            order = np.lexsort((position, sign * y, col))
            keep.append(order[np.r_[True, col[order][1:] != col[order][:-1]]])
    return np.unique(np.concatenate(keep))


def memory_over_time(result: MemoryReport) -> go.Figure:
    """One panel per rank and device: allocated and reserved (GiB, MiB, KiB or bytes, whichever
    fits the device's largest value) against time (ms from the device's first event), step lines,
    profiler steps shaded, the peak (``result.peaks``) marked. A curve of more than
    ``4 × COLUMNS`` points is drawn from the points :func:`columns_kept` keeps (every column's
    extremes: peaks stay; the title says so); ``result.timeline`` has every change."""
    tl = result.timeline if result is not None else None
    if tl is None or tl.empty:
        return no_data_figure(TITLE, "No [memory] events (record with profile_memory=True)")
    panels = list(tl.groupby(["rank", "device"], sort=True))
    fig = make_subplots(rows=len(panels), cols=1, shared_xaxes=False,
                        vertical_spacing=min(0.3, 0.45 / len(panels)),
                        subplot_titles=[f"rank {int(r)} · {d}" for (r, d), _ in panels])
    shapes: list[dict] = []
    labels: list[dict] = []
    thinned = False
    for i, ((rank, device), g) in enumerate(panels, start=1):
        t0 = g["time_us"].min()
        t = (g["time_us"] - t0) / 1000
        largest = max(g["allocated_bytes"].max(), g["reserved_bytes"].max())
        unit, scale = next((u, f) for u, f in UNITS if largest >= f or f == 1)
        allocated, reserved = g["allocated_bytes"].to_numpy(), g["reserved_bytes"].to_numpy()
        kept = columns_kept(t.to_numpy(), allocated, reserved)
        thinned |= len(kept) < len(t)
        fig.add_scatter(x=t.to_numpy()[kept], y=allocated[kept] / scale, mode="lines",
                        line_shape="hv", line_color=ALLOCATED, name="allocated",
                        showlegend=i == 1, row=i, col=1)
        fig.add_scatter(x=t.to_numpy()[kept], y=reserved[kept] / scale, mode="lines",
                        line_shape="hv", line_color=RESERVED, name="reserved",
                        showlegend=i == 1, row=i, col=1)
        # the steps shaded and labelled: the shapes and labels plotly's add_vrect would make,
        # set once at the end (add_vrect checks every subplot for data at each call: 13 s for the
        # 80 steps of an 8-rank report)
        xref, yref = f"x{i if i > 1 else ''}", f"y{i if i > 1 else ''} domain"
        steps = result.steps[result.steps["rank"] == rank]
        for s in steps.itertuples(index=False):
            x0, x1 = (s[2] - t0) / 1000, (s[3] - t0) / 1000
            shapes.append(dict(type="rect", x0=x0, x1=x1, y0=0, y1=1, xref=xref, yref=yref,
                               fillcolor=STEP_FILL, line_width=0))
            labels.append(dict(text=f"step {int(s[1])}", x=x0, y=1, xref=xref, yref=yref,
                               xanchor="left", yanchor="top", showarrow=False, font_size=10))
        peak = result.peaks[(result.peaks["rank"] == rank) & (result.peaks["device"] == device)]
        if len(peak):
            p = peak.iloc[0]
            x = (p["peak_time_us"] - t0) / 1000
            fig.add_scatter(x=[x], y=[p["peak_allocated_bytes"] / scale],
                            mode="markers+text", marker=dict(color="#D55E00", size=10, symbol="x"),
                            text=[f"peak {p['peak_allocated_bytes'] / scale:.3g} {unit}"],
                            textposition="top left" if x > t.max() / 2 else "top right", name="peak", showlegend=i == 1, row=i, col=1)
        fig.update_yaxes(title_text=unit, row=i, col=1)
        fig.update_xaxes(title_text="ms from the device's first memory event", row=i, col=1)
    fig.update_layout(height=max(420, 320 * len(panels)), shapes=shapes,
                      annotations=[*fig.layout.annotations, *labels])
    note = (f"<br><sup>a curve of over {4 * COLUMNS:,} points is drawn from the first, last, "
            f"lowest and highest of each of {COLUMNS:,} time columns</sup>" if thinned else "")
    return apply_layout(fig, f"{TITLE} (allocated and reserved, per device){note}")


def draw(result: MemoryReport) -> dict[str, go.Figure]:
    return {"memory_view": memory_over_time(result)}
