"""Which plotly renderer shows the figures in a notebook, so that they show wherever it is read.

In a Jupyter kernel plotly picks ``"plotly_mimetype"``: JupyterLab and VS Code draw that, but an
``nbconvert --to html`` export, nbviewer and other plain HTML views of the saved notebook show
nothing. :data:`NOTEBOOK_RENDERER` adds a ``text/html`` form beside the mime bundle: frontends
that know plotly's mime type draw that one, the others the HTML, which needs no network: plotly.js
is embedded (~4.8 MB) in the first figure shown by the process and the later figures use it.
Re-running cells out of order can leave the saved notebook without that first output: run it
from the top before exporting it.

:func:`default_renderer` is what ``analysis.figures.export.show`` uses when the caller names none:
this renderer where plotly left its kernel default, else whatever the user chose
(``plotly.io.renderers.default`` or ``PLOTLY_RENDERER``).
"""

from __future__ import annotations

import sys

import plotly.io as pio
from plotly.io._base_renderers import MimetypeRenderer

HTML_RENDERER = "trace_analysis_html"
NOTEBOOK_RENDERER = f"plotly_mimetype+{HTML_RENDERER}"
# What plotly chooses by itself in a Jupyter kernel (plain, and when it detects VS Code).
_PLOTLY_KERNEL_DEFAULTS = ("plotly_mimetype", "vscode")
_FIGURE_HEIGHT = 525  # px when the figure sets none: plotly's notebook default


class OfflineHtmlRenderer(MimetypeRenderer):
    """``text/html`` of a figure, with plotly.js inlined the first time only (no CDN)."""

    def __init__(self) -> None:
        # a list, shared by the shallow copies plotly makes of a renderer for each figure
        self._sent: list[bool] = [False]

    @property
    def plotlyjs_sent(self) -> bool:
        return self._sent[0]

    def to_mimebundle(self, fig_dict):
        html = pio.to_html(
            fig_dict,
            include_plotlyjs=not self.plotlyjs_sent,
            include_mathjax=False,  # the figures use no LaTeX; "cdn" would need the network
            full_html=False,
            default_width="100%",
            default_height=_FIGURE_HEIGHT,
            validate=False,
        )
        self._sent[0] = True
        return {"text/html": html}


if HTML_RENDERER not in pio.renderers:
    pio.renderers[HTML_RENDERER] = OfflineHtmlRenderer()


def use_in_notebook() -> None:
    """Make :data:`NOTEBOOK_RENDERER` plotly's default, so that figures a notebook displays itself
    (a ``fig`` at the end of a cell, plotly.express) show in exported HTML too."""
    pio.renderers.default = NOTEBOOK_RENDERER


def in_notebook_kernel() -> bool:
    return "ipykernel.zmqshell" in sys.modules


def default_renderer() -> str | None:
    """The renderer ``show`` uses when none is named (see the module docstring)."""
    chosen = pio.renderers.default
    if in_notebook_kernel() and (chosen or "") in _PLOTLY_KERNEL_DEFAULTS:
        return NOTEBOOK_RENDERER
    return chosen
