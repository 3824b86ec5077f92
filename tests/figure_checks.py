"""Checks on plotly figures: does each have a title and say the unit of every numeric axis
(:func:`figure_problems`, the contract every registered analysis's figures meet), and do its
titles fit without running into each other (:func:`layout_problems`)?

Plotly does not measure text for us; these checks estimate text extents from character counts and
font sizes (average glyph width ~0.6 em, generous for the sans-serif fonts plotly uses) and
compare them with the room the layout leaves, at the size a notebook shows the figure (plotly's
525 px height when the figure sets none).
"""

from __future__ import annotations

import re

import numpy as np

NOTEBOOK_HEIGHT = 525  # px: plotly's default in notebooks (and analysis.figures.renderer's)
DEFAULT_MARGIN = {"t": 100, "b": 80, "l": 80, "r": 80}  # plotly.js defaults
GLYPH_EM = 0.6
LINE_EM = 1.3


def _lines(text: str | None) -> list[str]:
    plain = re.sub(r"<(?!br)[^>]+>", "", text or "")
    return [line for line in re.split(r"<br\s*/?>", plain, flags=re.I)]


def _text_of(title) -> tuple[str, dict]:
    if isinstance(title, dict):
        return title.get("text") or "", title
    return title or "", {}


def layout_problems(fig: dict) -> list[str]:
    """What does not fit in ``fig`` (a figure as JSON: ``{"data": ..., "layout": ...}``)."""
    layout = fig.get("layout", {})
    template_font = layout.get("template", {}).get("layout", {}).get("font", {}).get("size", 12)
    base = layout.get("font", {}).get("size", template_font)
    margin = {**DEFAULT_MARGIN, **layout.get("margin", {})}
    height = layout.get("height") or NOTEBOOK_HEIGHT
    problems = []

    title, title_opts = _text_of(layout.get("title"))
    if title:
        size = title_opts.get("font", {}).get("size", base * 17 / 12)
        needed = 16 + LINE_EM * size * len(_lines(title))
        sub, sub_opts = _text_of(title_opts.get("subtitle"))
        if sub:
            needed += LINE_EM * sub_opts.get("font", {}).get("size", base) * len(_lines(sub))
        if title_opts.get("y") in (None, "auto") and margin["t"] < needed:
            problems.append(f"title {title!r} needs ~{needed:.0f} px of top margin, has {margin['t']}")

    plot_height = height - margin["t"] - margin["b"]
    for key, axis in layout.items():
        if not key.startswith("yaxis") or not isinstance(axis, dict):
            continue
        text, opts = _text_of(axis.get("title"))
        if not text:
            continue
        size = opts.get("font", {}).get("size", base * 14 / 12)
        lo, hi = axis.get("domain", [0, 1])
        room = plot_height * (hi - lo)
        longest = max(len(line) for line in _lines(text)) * GLYPH_EM * size
        if longest > room:
            problems.append(
                f"{key} title {text!r} is ~{longest:.0f} px long on a {room:.0f} px high axis: "
                "it runs into the figure title or the axis below"
            )
    return problems


# a unit in a title: "(µs)", "(%)", "(GB/s)", "(count)", ..., or one of these words or symbols
UNIT = re.compile(r"\([^()]*\)|%|µs|\bms\b|\b[KMGT]?i?B(/s)?\b|\b[KMGTP]?FLOP/s\b|\bbytes?\b"
                  r"|\bcount\b|\bnumber of\b|\bcalls\b")


def _values_numeric(values) -> bool:
    if values is None:
        return False
    arr = np.asarray(values, dtype=object).ravel()
    arr = arr[[v is not None for v in arr]]
    return len(arr) > 0 and all(isinstance(v, (int, float, np.number)) and not isinstance(v, bool)
                                for v in arr)


def numeric_axes(fig) -> dict[str, str]:
    """``{axis name: its title}`` for every axis that shows numbers: a linear or log axis, or one of
    unset type whose traces give it numbers (categorical axes, e.g. ranks or names, need no unit)."""
    layout = fig.to_dict()["layout"]
    out = {}
    for trace in fig.data:
        if trace.type in ("pie", "table", "sunburst", "treemap", "indicator"):
            continue
        for dim in ("x", "y"):
            ref = getattr(trace, f"{dim}axis", None) or dim
            key = ref.replace(dim, f"{dim}axis", 1)
            axis = layout.get(key, {})
            kind = axis.get("type", "-")
            if kind in ("category", "multicategory", "date") or axis.get("visible") is False:
                continue
            values = getattr(trace, dim, None)
            if trace.type == "heatmap" and kind == "-":
                continue  # a heatmap's axes are its categories; its colour bar carries the unit
            if kind in ("linear", "log") or _values_numeric(values):
                out[key] = (axis.get("title") or {}).get("text") or ""
    return out


def figure_problems(fig) -> list[str]:
    """What ``fig`` lacks: a title; a unit in the title of each numeric axis and heatmap colour bar."""
    problems = []
    if not (fig.layout.title.text or "").strip():
        problems.append("no title")
    for axis, title in numeric_axes(fig).items():
        if not UNIT.search(title):
            problems.append(f"{axis} shows numbers but its title {title!r} has no unit")
    for trace in fig.data:
        if trace.type == "heatmap" and trace.showscale is not False:
            bar = trace.colorbar
            text = (bar.title.text if bar is not None and bar.title else "") or ""
            if not UNIT.search(text):
                problems.append(f"the colour bar {text!r} has no unit")
    return problems
