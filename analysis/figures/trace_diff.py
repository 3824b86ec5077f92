"""Figures of a run comparison: the step-time change as a waterfall, the top kernels/operators
that gained or lost time. Tables in, ``go.Figure`` out (see ``analysis.metrics.compare.trace_diff``)."""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd
import plotly.graph_objects as go

from analysis.figures.style import apply_layout, no_data_figure, unique_truncated

_SLOWER, _FASTER, _TOTAL = "#D55E00", "#009E73", "#0072B2"
_LABELS = {
    "computation": "computation",
    "exposed_communication": "exposed comm.",
    "exposed_memory": "exposed memory",
    "other": "other GPU work",
    "idle": "GPU idle",
}


def step_time_waterfall(breakdown: pd.DataFrame, labels: tuple[str, str] = ("base", "test")
                        ) -> go.Figure:
    """Base step time, the change of each part (computation, exposed communication, exposed
    memory, other, idle), and the test step time (µs per profiler step).

    ``breakdown`` is ``TraceComparison.breakdown()``: its parts add up to the step-time change.
    """
    title = "Step time change by category"
    if breakdown is None or breakdown.empty:
        return no_data_figure(title, "No profiler steps to compare")
    b = breakdown.set_index("category")
    base, test = b.at["step_time", "base_us"], b.at["step_time", "test_us"]
    parts = [c for c in _LABELS if c in b.index]
    fig = go.Figure(go.Waterfall(
        x=[f"{labels[0]} step", *(_LABELS[c] for c in parts), f"{labels[1]} step"],
        measure=["absolute", *["relative"] * len(parts), "total"],
        y=[base, *(b.at[c, "diff_us"] for c in parts), test],
        text=[f"{base:,.1f}", *(f"{b.at[c, 'diff_us']:+,.1f}" for c in parts), f"{test:,.1f}"],
        textposition="outside",
        increasing=dict(marker_color=_SLOWER),
        decreasing=dict(marker_color=_FASTER),
        totals=dict(marker_color=_TOTAL),
        connector=dict(line=dict(color="#999999")),
        hovertemplate="%{x}: %{text} µs<extra></extra>",
    ))
    change = test - base
    pct = f" ({100 * change / base:+.1f} %)" if base else ""
    return apply_layout(fig, title, subtitle=f"{change:+,.1f} µs per step{pct}; red: slower",
                        y_title="µs per profiler step")


def top_changes(deltas: pd.DataFrame, key: str = "name", top: int = 10,
                what: str = "kernels", labels: tuple[str, str] = ("base", "test")) -> go.Figure:
    """The ``top`` rows that gained the most time and the ``top`` that lost the most (µs per step),
    from ``TraceComparison.kernels()`` (``key="name"``) or ``operators()`` (``key="operator"``)."""
    title = f"Top {what} by time gained and lost"
    if deltas is None or deltas.empty or not (deltas["diff_time_us"] != 0).any():
        return no_data_figure(title, f"No {what} changed time")
    gained = deltas[deltas["diff_time_us"] > 0].nlargest(top, "diff_time_us")
    lost = deltas[deltas["diff_time_us"] < 0].nsmallest(top, "diff_time_us")
    rows = pd.concat([lost, gained.iloc[::-1]])  # largest loss at the bottom, largest gain on top
    names = unique_truncated(rows[key].tolist())
    fig = go.Figure(go.Bar(
        x=rows["diff_time_us"], y=names, orientation="h",
        marker_color=[_SLOWER if v > 0 else _FASTER for v in rows["diff_time_us"]],
        customdata=rows[[key, "base_time_us", "test_time_us", "change"]].astype(str).to_numpy(),
        hovertemplate=(f"%{{customdata[0]}}<br>{labels[0]}: %{{customdata[1]}} µs, "
                       f"{labels[1]}: %{{customdata[2]}} µs<br>change: %{{x:+,.2f}} µs "
                       "(%{customdata[3]})<extra></extra>"),
    ))
    fig.update_yaxes(type="category", automargin=True)
    return apply_layout(fig, title, subtitle="µs per profiler step; red: slower in "
                        f"{labels[1]}, green: faster", x_title="time change (µs per step)",
                        height=max(400, 28 * len(rows) + 160))


def draw(tables: Mapping[str, pd.DataFrame], labels: tuple[str, str] = ("base", "test"),
         top: int = 10) -> dict[str, go.Figure]:
    """Every comparison figure, keyed by file stem, from ``TraceComparison.tables()``."""
    return {
        "step_time_waterfall": step_time_waterfall(tables["breakdown"], labels),
        "operators_gained_lost": top_changes(tables["operators"], "operator", top, "operators",
                                             labels),
        "kernels_gained_lost": top_changes(tables["kernels"], "name", top, "kernels", labels),
    }
