"""The one look shared by every figure: colours per category, layout defaults, labels, empty figures.

A category keeps its colour in every figure (``compute`` in the temporal breakdown is the same blue
as ``COMPUTATION`` in the kernel-type pie), so a reader who learnt the colours once can read the
next figure at a glance. Colours come from Okabe & Ito's colour-blind-safe palette, with Paul Tol's
for the overlap combinations.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import plotly.graph_objects as go
import plotly.io as pio

# Above this many ranks, one bar (or pie) per rank stops being readable: figures switch to
# distributions (box + points, hover names the rank) or heatmaps.
MANY_RANKS = 32

# Labels longer than this are cut in axes and legends; the full text stays in the hover.
LABEL_WIDTH = 48

_BLUE = "#0072B2"
_ORANGE = "#E69F00"
_GREEN = "#009E73"
_GREY = "#999999"
_VERMILLION = "#D55E00"
_PURPLE = "#CC79A7"

COLORS: dict[str, str] = {
    # temporal breakdown (HTA's names)
    "idle": _VERMILLION,
    "compute": _BLUE,
    "non-compute": _PURPLE,
    # idle time breakdown (HTA's idle categories)
    "host_wait": "#882255",
    "kernel_wait": "#DDAA33",
    "other": _GREY,
    # kernel types (HTA's KernelType names) and their overlaps, as HTA spells them
    "COMPUTATION": _BLUE,
    "COMMUNICATION": _ORANGE,
    "MEMORY": _GREEN,
    "OTHER": _GREY,
    "COMPUTATION overlapping COMMUNICATION": "#44AA99",
    "COMPUTATION overlapping MEMORY": "#332288",
    "COMMUNICATION overlapping MEMORY": "#88CCEE",
    "COMPUTATION overlapping COMMUNICATION overlapping MEMORY": "#222222",
    # kernel launch statistics
    "runtime outlier": _VERMILLION,
    "launch delay outlier": _VERMILLION,
    "short kernel": _PURPLE,
    "launch": _BLUE,
    # the rows HTA folds the long tail of kernels into
    "others": _GREY,
}

# Kernel names are open-ended: they get colours from this list, in order of total time.
KERNEL_COLORS: tuple[str, ...] = (
    "#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#332288",
    "#44AA99", "#882255", "#117733", "#AA4499", "#88CCEE", "#DDCC77", "#661100", "#6699CC",
)  # fmt: skip

# Series that are not a named category (copy kinds, ranks, ...) take these, one each, in order:
# Okabe & Ito's eight without black, then Paul Tol's muted ones. Distinct for 15 series.
SERIES_COLORS: tuple[str, ...] = (
    "#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442",
    "#332288", "#44AA99", "#882255", "#117733", "#AA4499", "#88CCEE", "#DDCC77", "#661100",
)  # fmt: skip

# A bar this many times smaller than the largest of its chart would be invisible on a linear axis:
# the axis turns logarithmic and bars carry their values.
LOG_RANGE = 50

# More categories than this on an x axis, and their labels collide: bars turn horizontal.
MAX_VERTICAL_CATEGORIES = 12

# plotly_white, cut to what these figures can use so that it looks the same: its whole layout and
# the per-trace defaults of the trace types drawn here (a template's defaults for other types never
# apply), so each figure carries a smaller copy. Registered once in plotly.io.templates under
# TEMPLATE, validated then; :func:`set_template` gives it to a figure without validating it again.
TEMPLATE = "trace_analysis"
BASE_TEMPLATE = "plotly_white"
TRACE_TYPES: tuple[str, ...] = ("bar", "box", "heatmap", "icicle", "pie", "scatter", "table", "waterfall")


def _register_template() -> None:
    if TEMPLATE in pio.templates:
        return
    base = pio.templates[BASE_TEMPLATE]
    data = {t: base.data[t] for t in TRACE_TYPES if base.data[t]}
    pio.templates[TEMPLATE] = go.layout.Template(layout=base.layout, data=data)


_register_template()


def category_label(*parts: object) -> str:
    """An axis category in lines (``"rank 0<br>stream 7"``): many categories side by side stay
    readable without rotated labels running into each other."""
    return "<br>".join(str(p) for p in parts)


def series_color(i: int) -> str:
    """The colour of the ``i``-th series of a chart (distinct for up to 15, then repeating)."""
    return SERIES_COLORS[i % len(SERIES_COLORS)]


def needs_log_axis(values: Iterable[float]) -> bool:
    """True when the smallest positive value is under 1/``LOG_RANGE`` of the largest."""
    positive = [float(v) for v in values if v is not None and float(v) > 0]
    return len(positive) > 1 and min(positive) * LOG_RANGE < max(positive)


def color_for(category: str) -> str:
    """The palette colour of a category; grey for anything the palette does not name."""
    return COLORS.get(category, _GREY)


def overlap_label(kernel_type: str) -> str:
    """HTA's ``"A overlapping B"`` kernel-type names, shortened to ``"A ∩ B"`` for legends."""
    return kernel_type.replace(" overlapping ", " ∩ ")


def truncate(label: object, width: int = LABEL_WIDTH) -> str:
    """``label`` as text, at most ``width`` characters: the middle is cut when longer.

    Middle, not end: templated kernels share long prefixes (``void at::native::vectorized_elem...``)
    and differ in their template arguments and signature, which the end keeps.
    """
    text = str(label)
    if len(text) <= width:
        return text
    tail = (width - 1) * 2 // 5
    return text[: width - 1 - tail] + "…" + text[len(text) - tail :]


def unique_truncated(labels: Sequence[object], width: int = LABEL_WIDTH) -> list[str]:
    """Truncated labels that stay distinct (two templated kernels can share their first 48 chars)."""
    out: list[str] = []
    seen: dict[str, int] = {}
    for label in labels:
        short = truncate(label, width)
        if short in seen:
            seen[short] += 1
            short = f"{short} ({seen[short]})"
        else:
            seen[short] = 1
        out.append(short)
    return out


def sorted_ranks(ranks: Iterable[object]) -> list[int]:
    """Distinct ranks in numeric order (they are category values on the axes, not positions)."""
    return sorted({int(r) for r in ranks})


def rank_axis(ranks: Sequence[int]) -> dict:
    """A categorical rank axis: ranks [3, 5, 17] get three evenly spaced, correctly named slots."""
    return dict(
        type="category",
        categoryorder="array",
        categoryarray=[str(r) for r in ranks],
        title_text="Rank",
    )


def set_template(fig: go.Figure) -> go.Figure:
    """Give ``fig`` the package's template (:data:`TEMPLATE`) as its JSON, without validating it
    again: plotly copies and validates a template each time a figure gets one (about 10 ms per
    figure for the whole plotly_white, a quarter of a small trace's report; 5 ms for this one),
    0.5 ms this way. It is how plotly
    itself gives a new figure the default template (``BaseFigure._initialize_layout_template``);
    the figure's JSON is the same as with ``update_layout(template=TEMPLATE)`` (tested)."""
    layout = fig.layout
    layout._validate = False
    try:
        layout.template = pio.templates[TEMPLATE]
    finally:
        layout._validate = fig._validate
    return fig


def apply_layout(
    fig: go.Figure,
    title: str,
    *,
    subtitle: str | None = None,
    x_title: str | None = None,
    y_title: str | None = None,
    legend_title: str | None = None,
    height: int | None = None,
) -> go.Figure:
    """The common layout: template, title (and an optional subtitle), axis and legend titles."""
    title_dict: dict = dict(text=title, x=0.01, xanchor="left")
    if subtitle:
        title_dict["subtitle"] = dict(text=subtitle)
    set_template(fig)
    fig.update_layout(
        title=title_dict,
        legend_title_text=legend_title,
        margin=dict(t=90 if subtitle else 70),
        hoverlabel=dict(
            namelength=-1
        ),  # never cut names in the hover: that is where they are whole
    )
    if height is not None:
        fig.update_layout(height=height)
    if x_title is not None:
        fig.update_xaxes(title_text=x_title)
    if y_title is not None:
        fig.update_yaxes(title_text=y_title)
    return fig


def no_data_figure(title: str, reason: str = "No data to plot") -> go.Figure:
    """An empty figure that says why it is empty (figures never raise on empty input)."""
    fig = go.Figure()
    fig.add_annotation(
        text=reason, x=0.5, y=0.5, xref="paper", yref="paper", showarrow=False, font=dict(size=16)
    )
    fig.update_xaxes(visible=False)
    fig.update_yaxes(visible=False)
    return apply_layout(fig, title)


def plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"
