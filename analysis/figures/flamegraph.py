"""Flame graph of py-spy profiles: a plotly icicle with the outermost frame at the bottom.

Width is the share of samples (inclusive: a frame and everything it called). Readability with long
stacks and many frames: frames narrower than ``min_width`` of all samples are left out (their time
stays in the parent's width), labels are cut to ``label_chars`` characters, labels that would be
smaller than 8 px are hidden, and the hover shows the full ``function (path:line)`` with counts.
The figure is interactive in HTML (click a frame to zoom) and exports to SVG/PNG with kaleido.
"""

from __future__ import annotations

import zlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import plotly.graph_objects as go

# Warm flame-graph colours (as flamegraph.pl's "hot" palette); a module keeps its colour.
_PALETTE = ["#e0542b", "#e8773a", "#f0a04b", "#f5c25d", "#d9402a", "#ec8f41", "#f7d36b", "#c9362d"]
_ROOT_COLOUR = "#b0b0b0"
_LEVEL_PX = 22  # height of one stack level; plotly's default font needs about 18 px


def flamegraph(
    tree,
    *,
    min_width: float = 0.005,
    label_chars: int = 40,
    title: str | None = None,
    width: int = 1200,
) -> go.Figure:
    """Flame graph of a py-spy call tree (``analysis.pyspy.call_tree`` of one or more files).

    ``min_width``: frames with fewer than this fraction of all samples are not drawn (0 draws all).
    ``label_chars``: longer function names are cut with "…" in the label (the hover has them whole).
    Several files get one root each under an "all files" root.
    """
    import pandas as pd
    import plotly.graph_objects as go

    from analysis.figures.style import no_data_figure
    if tree.empty or tree["samples"].sum() == 0:
        return no_data_figure(title or "py-spy flame graph", "No py-spy samples to plot")
    tree = tree.copy()
    roots = tree["parent"] < 0
    root_nodes = set(tree.loc[roots, "node"])
    if roots.sum() > 1:
        top = int(tree["node"].max()) + 1
        tree.loc[roots, "parent"] = top
        tree["depth"] += 1
        all_files = {
            "node": top, "parent": -1, "depth": 0, "file": "", "function": "all files", "path": "",
            "line": -1, "samples": int(tree.loc[roots, "samples"].sum()), "self_samples": 0,
        }
        tree = pd.concat([pd.DataFrame([all_files]), tree], ignore_index=True)
        root_nodes.add(top)
    total = max(int(tree.loc[tree["parent"] < 0, "samples"].sum()), 1)
    # Children never outweigh their parent, so pruning by width keeps every kept node's parent.
    tree = tree[(tree["samples"] >= min_width * total) | (tree["parent"] < 0)]

    function = tree["function"].astype(str)
    labels = function.where(
        function.str.len() <= label_chars, function.str.slice(0, max(label_chars - 1, 1)) + "…"
    )
    location = tree["path"].astype(str).where(tree["line"] < 0, tree["path"] + ":" + tree["line"].astype(str))
    is_root = tree["node"].isin(root_nodes)
    colours = [
        _ROOT_COLOUR if root else _PALETTE[zlib.crc32(path.encode()) % len(_PALETTE)]
        for root, path in zip(is_root, tree["path"].astype(str), strict=True)
    ]
    customdata = pd.DataFrame(
        {
            "function": function,
            "location": location,
            "self": tree["self_samples"],
            "pct": 100.0 * tree["samples"] / total,
            "file": tree["file"],
        }
    ).to_numpy(dtype=object)
    levels = int(tree["depth"].max()) + 1
    fig = go.Figure(
        go.Icicle(
            ids=tree["node"].astype(str),
            parents=tree["parent"].map(lambda p: "" if p < 0 else str(p)),
            labels=labels,
            values=tree["samples"],
            branchvalues="total",
            tiling={"orientation": "v", "flip": "y"},
            marker={"colors": colours, "line": {"width": 0.5, "color": "white"}},
            customdata=customdata,
            hovertemplate=(
                "<b>%{customdata[0]}</b><br>%{customdata[1]}<br>"
                "%{value} samples (%{customdata[3]:.2f} % of all), %{customdata[2]} in itself"
                "<br>%{customdata[4]}<extra></extra>"
            ),
            textinfo="label",
            insidetextfont={"size": 12},
            maxdepth=-1,
            sort=False,
        )
    )
    fig.update_layout(
        title=title or "py-spy flame graph (width = share of samples)",
        width=width,
        height=levels * _LEVEL_PX + 120,
        margin={"l": 10, "r": 10, "t": 50, "b": 10},
        uniformtext={"minsize": 8, "mode": "hide"},
    )
    return fig
