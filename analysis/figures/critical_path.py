"""Figures of the critical path: what bounds each step, and the path drawn over the rank's trace."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from analysis.figures.style import COLORS, MAX_VERTICAL_CATEGORIES, apply_layout, no_data_figure
from analysis.metrics.critical_path.critical_path import BOUND_BY, CriticalPathGraph
from analysis.metrics.critical_path.critical_path_graph import EDGE_TYPES, LAUNCH, SYNC

TITLE = "Critical path: what bounds each step"
# GPU kernel types keep their colours; CPU and overheads take the idle-time ones they resemble
BOUND_COLORS = {
    "cpu_bound": COLORS["non-compute"],
    "cpu_untraced": "#AA4499",
    "data_loading": "#56B4E9",
    "gpu_compute_bound": COLORS["COMPUTATION"],
    "gpu_communication_bound": COLORS["COMMUNICATION"],
    "gpu_kernel_kernel_overhead": COLORS["kernel_wait"],
    "gpu_kernel_launch_overhead": COLORS["host_wait"],
}


def critical_path_shares(df: pd.DataFrame) -> go.Figure:
    """Stacked bars: per rank and step, the share (%) of the critical path per ``bound_by``.

    ``df`` is ``get_critical_path_summary()``'s frame (``rank, instance, path_length_us`` and one
    column per category of ``BOUND_BY``).
    """
    if df is None or df.empty:
        return no_data_figure(TITLE, "No critical path: no annotation instance in the window")
    one_rank = df["rank"].nunique() == 1
    pairs = zip(df["rank"], df["instance"], strict=True)
    x = [inst if one_rank else f"rank {r} · {inst}" for r, inst in pairs]
    # many steps: one bar per row, the labels read horizontally instead of colliding under the axis
    horizontal = len(x) > MAX_VERTICAL_CATEGORIES
    fig = go.Figure()
    for b in BOUND_BY:
        if b not in df or not (df[b] > 0).any():
            continue
        us = df[b] * df["path_length_us"] / 100
        where, share = ("%{y}", "%{x:.1f}") if horizontal else ("%{x}", "%{y:.1f}")
        fig.add_trace(go.Bar(
            name=b, x=df[b] if horizontal else x, y=x if horizontal else df[b],
            orientation="h" if horizontal else "v", marker_color=BOUND_COLORS[b], customdata=us,
            hovertemplate=where + "<br>" + b + ": " + share + " % (%{customdata:,.0f} µs)<extra></extra>",
        ))  # fmt: skip
    fig.update_layout(barmode="stack")
    if horizontal:
        fig.update_xaxes(range=[0, 100], title_text="Share of the critical path (%)")
        fig.update_yaxes(type="category", autorange="reversed")
        fig.update_layout(height=160 + 22 * len(x))
    else:
        fig.update_yaxes(range=[0, 100], title_text="Share of the critical path (%)")
    subtitle = "Path length per step: " + ", ".join(
        "no path" if pd.isna(v) else f"{v / 1000:,.1f} ms" for v in df["path_length_us"].head(8)
    ) + (" …" if len(df) > 8 else "")
    return apply_layout(fig, TITLE, subtitle=subtitle, legend_title="bound by")  # fmt: skip


def draw(result: pd.DataFrame) -> dict[str, go.Figure]:
    """The report's figures: ``{"critical_path": stacked bars per step}``."""
    return {"critical_path": critical_path_shares(result)}


def overlay_trace(graph: CriticalPathGraph, only_critical: bool = False) -> dict[str, Any]:
    """A Chrome/Perfetto trace of the rank's window with the critical path marked (HTA's overlay).

    Every event of the graph's rank (or only those on the path) is written back with
    ``args.critical = 1`` on the path's events, and each path edge that is a launch or a sync
    dependency becomes a flow arrow (``cat`` = HTA's edge type), as in HTA's overlaid trace.
    Times are µs, as in the input trace.
    """
    g = graph.graph
    ev = g.events
    on_path = np.zeros(len(ev), bool)
    on_path[g.node_event[graph.critical_path_nodes]] = True
    rows = np.flatnonzero(on_path) if only_critical else np.arange(len(ev))
    names = ev["name"].astype(str).to_numpy()
    cats = ev["cat"].astype(str).to_numpy()
    cols = {c: ev[c].to_numpy() for c in ("ts", "dur", "pid", "tid", "stream", "correlation")}
    events: list[dict[str, Any]] = []
    for i in rows.tolist():
        args: dict[str, Any] = {}
        if cols["stream"][i] != -1:
            args["stream"] = int(cols["stream"][i])
        if cols["correlation"][i] != -1:
            args["correlation"] = int(cols["correlation"][i])
        if on_path[i]:
            args["critical"] = 1
        events.append({
            "ph": "X", "name": names[i], "cat": cats[i], "pid": int(cols["pid"][i]),
            "tid": int(cols["tid"][i]), "ts": cols["ts"][i] / 1000, "dur": cols["dur"][i] / 1000,
            "args": args,
        })  # fmt: skip
    for flow_id, e in enumerate(graph.path_edges.tolist()):
        if g.edge_type[e] not in (LAUNCH, SYNC):
            continue
        for node, phase in ((g.edge_src[e], "s"), (g.edge_dst[e], "f")):
            i = g.node_event[node]
            events.append({
                "ph": phase, "id": flow_id, "name": "critical_path",
                "cat": EDGE_TYPES[g.edge_type[e]], "pid": int(cols["pid"][i]),
                "tid": int(cols["tid"][i]), "ts": g.node_ts[node] / 1000,
                "args": {"weight": g.edge_weight[e] / 1000, "critical": True},
                **({"bp": "e"} if phase == "f" else {}),
            })  # fmt: skip
    return {"traceEvents": events, "displayTimeUnit": "ms",
            "distributedInfo": {"rank": graph.rank}}  # fmt: skip


def write_overlay_trace(graph: CriticalPathGraph, path, only_critical: bool = False) -> Path:
    """Write ``overlay_trace(graph)`` as (gzipped when ``path`` ends in ``.gz``) JSON; returns path."""
    path = Path(path)
    data = json.dumps(overlay_trace(graph, only_critical)).encode()
    path.write_bytes(gzip.compress(data) if path.suffix == ".gz" else data)
    return path
