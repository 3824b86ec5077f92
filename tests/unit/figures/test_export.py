"""Exporting figures: SVG/PNG through one kaleido server and a real Chromium, HTML through plotly,
and clear errors when no browser is there or a format is unknown."""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go
import plotly.io as pio
import pytest

from analysis.errors import TraceAnalysisError
from analysis.figures import comm_comp_overlap
from analysis.figures.export import (
    BrowserNotFoundError,
    ExportError,
    export_figures,
    find_browser,
    show,
)
from analysis.figures.style import apply_layout


def small_figure(title="Overlap of ranks 3, 5, 17"):
    df = pd.DataFrame({"rank": [3, 5, 17], "comp_comm_overlap_pctg": [12.5, 80.0, 47.25]})
    return apply_layout(comm_comp_overlap(df), title)


def test_svg_and_png_in_one_call(kaleido_session, tmp_path):
    from analysis.figures import export

    written = export_figures(
        {"overlap": small_figure(), "bars/by rank": go.Figure(go.Bar(x=["a"], y=[1]))},
        tmp_path / "figs",
        formats=("png", "svg"),
    )
    png, svg = written["overlap"]
    assert (png.name, svg.name) == ("overlap.png", "overlap.svg")  # the caller's order of formats
    assert png.read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
    text = svg.read_text(encoding="utf-8")
    assert "Overlap of ranks 3, 5, 17" in text and ">17<" in text and "80.0 %" in text
    assert [p.name for p in written["bars/by rank"]] == ["bars_by_rank.png", "bars_by_rank.svg"]
    # the browser the session started is still up for the next export
    assert export._renderer is not None and export._serving


def _svg_tree(path):
    """An SVG's elements as (tag, attributes, text), the random ids plotly.js draws each time
    (``defs-3f9a1c``, ``trace0f3b64``, colorbar ``cb1a2b3c``, gradient ``g3f9a1c-cb1a2b3c``) made
    one: two renders of one figure compare equal exactly when they draw the same thing."""
    import re
    import xml.etree.ElementTree as ET

    text = path.read_text(encoding="utf-8")
    uid = re.search(r"defs-([0-9a-f]{6})", text).group(1)
    text = re.sub(r"(trace|cb)[0-9a-f]{6}", r"\1X", text.replace(uid, "UID"))
    return [(e.tag, dict(e.attrib), e.text) for e in ET.fromstring(text).iter()]


def test_the_kept_page_draws_what_a_reloaded_one_draws(kaleido_session, tmp_path, monkeypatch):
    """kaleido reloads its page after every figure; the renderer keeps it (the reload is most of a
    figure's cost). Figures with a legend, a colorbar (heatmap) and many traces, rendered one after
    another on the kept page, equal the same figures each on a freshly reloaded page (the
    reload-every-figure is kaleido's own behaviour, RELOAD_EVERY = 1), PNG byte for byte."""
    from analysis.figures import export

    figures = {
        "overlap": small_figure(),
        "heatmap": go.Figure(go.Heatmap(z=[[1, 2, 3], [4, 5, 6]], colorbar={"title": "µs"})),
        "lines": go.Figure([go.Scatter(x=[0, 1, 2], y=[i, i * 2, i * 3], name=f"rank {i}")
                            for i in range(6)]),
    }
    from kaleido._kaleido_tab import _KaleidoTab

    reloads = []
    reload = _KaleidoTab.reload

    async def counted(tab):
        reloads.append(tab)
        await reload(tab)

    monkeypatch.setattr(_KaleidoTab, "reload", counted)
    kept = export_figures(figures, tmp_path / "kept", formats=("svg", "png"))
    # six figures on a kept page: one reload at most (the session's 32nd figure may fall here);
    # six would mean kaleido reloads somewhere else now, and the speed-up is gone
    assert len(reloads) <= 1, "kaleido reloaded its page after each figure"
    monkeypatch.setattr(export, "RELOAD_EVERY", 1)
    reloaded = export_figures(figures, tmp_path / "reloaded", formats=("svg", "png"))
    assert len(reloads) >= 6  # the comparison is with a page reloaded after each figure
    for name in figures:
        (svg_a, png_a), (svg_b, png_b) = kept[name], reloaded[name]
        assert _svg_tree(svg_a) == _svg_tree(svg_b), name
        assert png_a.read_bytes() == png_b.read_bytes(), name


def test_a_failed_figure_closes_the_browser_and_the_next_starts_another(kaleido_session,
                                                                         tmp_path):
    from analysis.figures import export

    before = export._renderer
    with pytest.raises(ValueError, match="bmp"):  # kaleido's: a format it does not know
        export.write_image(small_figure(), tmp_path / "bad.bmp", "bmp", 300, 200)
    assert export._renderer is None and before is not None  # closed: the page may be broken
    written = export_figures({"next": small_figure()}, tmp_path, formats="svg")
    assert "Overlap of ranks" in written["next"][0].read_text(encoding="utf-8")
    assert export._renderer is not None and export._renderer is not before


def test_a_browser_that_will_not_start_is_a_clear_error(tmp_path, monkeypatch):
    """A Chromium that dies at start: our ExportError naming it, at once (kaleido's sync server,
    used before, left the export waiting forever on its task queue)."""
    from analysis.figures import export

    monkeypatch.setattr(export, "_serving", False)  # not the session's browser: a new one
    monkeypatch.setattr(export, "_renderer", None)
    fake = tmp_path / "chromium"
    fake.write_text("#!/bin/sh\nexit 1\n")
    fake.chmod(0o755)
    monkeypatch.setenv("BROWSER_PATH", str(fake))
    with pytest.raises(ExportError, match="could not start the browser") as err:
        export_figures({"a": small_figure()}, tmp_path / "out", formats="svg")
    assert err.value.path == str(fake)
    assert export._renderer is None and not export._serving


def test_a_figure_the_browser_never_finishes_is_an_error_not_a_hang(kaleido_session, tmp_path,
                                                                    monkeypatch):
    """A ``report`` on a loaded machine once waited 400 s without a word: nothing bounded the wait
    for the browser (kaleido's 90 s limit covers a figure it is drawing, not a browser that stops
    answering). A render that never finishes is now an ExportError after FIGURE_TIMEOUT_S, the
    browser closed, and the next export starts another."""
    import asyncio

    from analysis.figures import export

    export_figures({"warm": small_figure()}, tmp_path / "warm", formats="svg")  # browser up
    before = export._renderer

    async def never(*args, **kwargs):
        await asyncio.sleep(3600)

    monkeypatch.setattr(before._kaleido, "write_fig_from_object", never)
    monkeypatch.setattr(export, "FIGURE_TIMEOUT_S", 1)
    with pytest.raises(ExportError, match="did not answer within 1 s"):
        export_figures({"stuck": small_figure()}, tmp_path / "stuck", formats="svg")
    assert export._renderer is None  # closed
    monkeypatch.undo()
    written = export_figures({"next": small_figure()}, tmp_path / "next", formats="svg")
    assert "Overlap of ranks" in written["next"][0].read_text(encoding="utf-8")
    assert export._renderer is not None and export._renderer is not before


def test_html_works_offline_with_one_shared_plotly_js(tmp_path):
    written = export_figures(
        {"a": small_figure("Figure A"), "b": small_figure("Figure B")}, tmp_path, formats="html"
    )
    (a,) = written["a"]
    html = a.read_text(encoding="utf-8")
    assert a.name == "a.html" and "Figure A" in html
    assert 'src="plotly.min.js"' in html
    assert (tmp_path / "plotly.min.js").stat().st_size > 1_000_000
    assert "Figure B" in written["b"][0].read_text(encoding="utf-8")


def test_unknown_format_is_a_clear_error(tmp_path):
    with pytest.raises(ExportError, match=r"unsupported format.*'gif'"):
        export_figures({"a": small_figure()}, tmp_path, formats=("svg", "gif"))
    assert not list(tmp_path.iterdir())


def test_missing_browser_says_how_to_install_one(tmp_path, monkeypatch):
    monkeypatch.setenv("BROWSER_PATH", str(tmp_path / "no-such-chromium"))
    with pytest.raises(BrowserNotFoundError) as info:
        export_figures({"a": small_figure()}, tmp_path / "out", formats=("svg",))
    message = str(info.value)
    assert "no-such-chromium" in message and "apt-get install chromium" in message
    assert "BROWSER_PATH" in message
    assert isinstance(info.value, TraceAnalysisError)
    assert not list((tmp_path / "out").iterdir())
    # HTML needs no browser
    assert export_figures({"a": small_figure()}, tmp_path / "out", formats=("html",))["a"]


def test_find_browser_honours_browser_path(tmp_path, monkeypatch):
    try:
        real = find_browser()
    except BrowserNotFoundError as e:
        pytest.skip(str(e))
    monkeypatch.setenv("BROWSER_PATH", real)
    assert find_browser() == real


def test_show_with_the_svg_renderer(kaleido_session, capsys, monkeypatch):
    monkeypatch.setattr(pio.renderers, "default", "svg")
    show(small_figure("Shown as SVG"))
    out = capsys.readouterr().out
    assert "image/svg+xml" in out and "Shown as SVG" in out


def test_show_draws_image_renderers_through_one_kept_browser(monkeypatch):
    """plotly's image renderers start a browser for every figure (about 2 s each): show() draws
    them through the module's renderer instead, started by the first figure and kept for the next
    (closed at exit). The user's renderer settings hold (a PNG width), and a combined renderer
    still gives one output carrying every mime type."""
    import base64
    import struct
    import types

    import plotly.io._renderers as renderers

    from analysis.figures import export

    monkeypatch.setattr(export, "_serving", False)  # not the session's browser: a kept one
    monkeypatch.setattr(export, "_renderer", None)
    bundles = []
    monkeypatch.setattr(renderers, "ipython_display", types.SimpleNamespace(
        display=lambda bundle, raw=False: bundles.append(bundle)))
    monkeypatch.setattr(pio.renderers["png"], "width", 321)
    try:
        show(small_figure("First figure"), renderer="svg")
        kept = export._renderer
        assert kept is not None
        show(small_figure("Second figure"), renderer="json+png")
        assert export._renderer is kept  # the same browser drew the second figure
    finally:
        export._close_renderer()
    svg, both = bundles
    assert "First figure" in svg["image/svg+xml"]
    assert set(both) == {"application/json", "image/png"}
    png = base64.b64decode(both["image/png"])
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and struct.unpack(">I", png[16:20])[0] == 321


def test_show_without_browser_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setenv("BROWSER_PATH", str(tmp_path / "nothing"))
    with pytest.raises(BrowserNotFoundError):
        show(small_figure(), renderer="png")


def test_the_browser_driver_prints_nothing_on_a_bare_stderr(kaleido_session):
    """choreographer (kaleido's browser driver) logs a whole traceback when Chromium's last
    message arrives cut, the export having gone through (seen once, under a `trace-analysis
    memory` command's one-line messages). With no logging configured Python's last-resort handler
    printed it; kaleido_server gives kaleido's and choreographer's loggers a NullHandler."""
    import logging
    import subprocess
    import sys

    from analysis.figures.export import BROWSER_LOGGERS, kaleido_server

    code = "\n".join([
        "import logging",
        "from analysis.figures import export",
        "pipe = logging.getLogger('choreographer.channels.pipe')",
        "pipe.error('before')",
        "export.quiet_browser_logs()",
        "try:",
        "    raise ValueError('cut message')",
        "except ValueError:",
        "    pipe.exception('JSONError decoding message. Ignoring')",
        "logging.getLogger('kaleido').error('after')",
    ])
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True, timeout=60)
    assert proc.stderr == "before\n"
    with kaleido_server():  # a running server (the session's): its loggers are quiet too
        for name in BROWSER_LOGGERS:
            assert any(isinstance(h, logging.NullHandler) for h in logging.getLogger(name).handlers)


def _need_browser():
    try:
        find_browser()
    except BrowserNotFoundError as e:
        import os

        if os.environ.get("CI"):
            raise
        pytest.skip(str(e))


def test_a_browser_started_early_draws_the_export_and_is_closed_after_it(tmp_path, monkeypatch):
    """A report starts Chromium before running its analyses (browser_starting): the export
    inside the block draws with that browser, and it is closed when the export is done."""
    from analysis.figures import export

    _need_browser()
    monkeypatch.setattr(export, "_serving", False)  # not the session's browser: a new one
    monkeypatch.setattr(export, "_renderer", None)
    with export.browser_starting():
        early = export._renderer
        assert early is not None and export._early  # started, not waited for
        written = export_figures({"a": small_figure()}, tmp_path, formats="svg")
        assert export._renderer is None  # the export's server took it and closed it
    assert "Overlap of ranks" in written["a"][0].read_text(encoding="utf-8")
    assert early._kaleido is not None and not export._early
    assert not early._thread.is_alive()  # its loop stopped with the browser


def test_a_browser_started_early_and_never_used_is_closed(monkeypatch):
    from analysis.figures import export

    _need_browser()
    monkeypatch.setattr(export, "_serving", False)
    monkeypatch.setattr(export, "_renderer", None)
    with export.browser_starting():
        early = export._renderer
    assert export._renderer is None and not export._early
    assert not early._thread.is_alive()
    with export.browser_starting(start=False):  # nothing to start
        assert export._renderer is None


def test_a_browser_started_early_that_will_not_start_is_the_same_clear_error(tmp_path,
                                                                            monkeypatch):
    from analysis.figures import export

    monkeypatch.setattr(export, "_serving", False)
    monkeypatch.setattr(export, "_renderer", None)
    fake = tmp_path / "chromium"
    fake.write_text("#!/bin/sh\nexit 1\n")
    fake.chmod(0o755)
    monkeypatch.setenv("BROWSER_PATH", str(fake))
    with export.browser_starting():
        with pytest.raises(ExportError, match="could not start the browser") as err:
            export_figures({"a": small_figure()}, tmp_path / "out", formats="svg")
    assert err.value.path == str(fake)
    assert export._renderer is None and not export._serving and not export._early
    monkeypatch.setenv("BROWSER_PATH", str(tmp_path / "nothing"))
    with export.browser_starting():  # no browser at all: nothing started, nothing raised here
        assert export._renderer is None


def test_a_session_browser_is_not_started_again(kaleido_session):
    from analysis.figures import export

    before = export._renderer
    with export.browser_starting():  # the session's server runs: nothing is started
        assert export._renderer is before and not export._early
    assert export._renderer is before
