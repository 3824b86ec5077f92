"""Layout checks on a plotly figure's JSON: do its titles fit without running into each other?

Plotly does not measure text for us; these checks estimate text extents from character counts and
font sizes (average glyph width ~0.6 em, generous for the sans-serif fonts plotly uses) and
compare them with the room the layout leaves, at the size a notebook shows the figure (plotly's
525 px height when the figure sets none).
"""

from __future__ import annotations

import re

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
