"""The notebook renderer: plotly's mime bundle plus offline HTML, plotly.js embedded once."""

from __future__ import annotations

import sys
import types

import plotly.graph_objects as go
import plotly.io as pio
import pytest

from analysis.figures import renderer


def _bundle(fig: go.Figure) -> dict:
    return pio.renderers._build_mime_bundle(fig.to_dict(), renderer.NOTEBOOK_RENDERER)


def test_bundle_has_both_forms_and_plotlyjs_only_once(monkeypatch):
    monkeypatch.setattr(pio.renderers[renderer.HTML_RENDERER], "_sent", [False])
    first = _bundle(go.Figure(go.Bar(y=[1, 2])))
    second = _bundle(go.Figure(go.Bar(y=[3, 4])))
    for bundle in (first, second):
        assert set(bundle) == {"application/vnd.plotly.v1+json", "text/html"}
        assert 'class="plotly-graph-div"' in bundle["text/html"]
        assert "cdn.plot.ly/plotly" not in bundle["text/html"]  # no CDN, works offline
        assert "mathjax.js" not in bundle["text/html"].lower()  # no MathJax from a CDN
    assert "* plotly.js v" in first["text/html"]  # the library, inlined
    assert "* plotly.js v" not in second["text/html"]  # the later figures use it
    assert len(second["text/html"]) < 100_000 < len(first["text/html"])


@pytest.mark.parametrize(
    ("kernel", "chosen", "expected"),
    [
        (True, "plotly_mimetype", renderer.NOTEBOOK_RENDERER),  # plotly's kernel default
        (True, "vscode", renderer.NOTEBOOK_RENDERER),
        (True, "svg", "svg"),  # the user's choice stays
        (False, "browser", "browser"),  # not in a notebook
    ],
)
def test_default_renderer(monkeypatch, kernel, chosen, expected):
    if kernel:
        monkeypatch.setitem(sys.modules, "ipykernel.zmqshell", types.ModuleType("ipykernel.zmqshell"))
    else:
        monkeypatch.delitem(sys.modules, "ipykernel.zmqshell", raising=False)
    monkeypatch.setattr(pio.renderers, "default", chosen)
    assert renderer.default_renderer() == expected


def test_use_in_notebook_sets_plotlys_default(monkeypatch):
    monkeypatch.setattr(pio.renderers, "default", "plotly_mimetype")
    renderer.use_in_notebook()
    assert pio.renderers.default == renderer.NOTEBOOK_RENDERER
