"""Writing figures to files (SVG, PNG, PDF through kaleido; HTML through plotly) and showing them.

Static images need a Chrome or Chromium that kaleido drives. Starting one costs seconds, so
``export_figures`` starts one browser for all the figures it is given (:func:`kaleido_server`), and
reuses one the caller already started (``with kaleido_server():`` around many exports, as a test
session does, or kaleido's own ``kaleido.start_sync_server()``, e.g. in a notebook) without
stopping it.

The browser this module starts keeps kaleido's page between figures. kaleido reloads its page (and
plotly.js with it) after every figure, which is most of a figure's cost: a small SVG takes about
0.07 s on a kept page against 0.21 s with the reload (``benchmarks/export.py``: the sample report's
figures after the first, 4.2 s → 1.5 s, 5.9 → 1.9 s of CPU, Chromium's included). The reload is hygiene, not
correctness: plotly.js draws each figure in an element of its own and purges it, so a figure comes
out the same on a kept page as on a fresh one (tested: PNG bytes equal, SVG elements equal but for
the random ids plotly.js draws each time). The page is still reloaded every :data:`RELOAD_EVERY`
figures, and the browser is closed after a failed figure. A figure that never finishes fails
after kaleido's timeout (90 s), and one the browser never answers after :data:`FIGURE_TIMEOUT_S`
(an ``ExportError``, the browser closed); a browser that will not start is an ``ExportError`` at
once, one that does not answer after :data:`START_TIMEOUT_S`. A caller with work to do before its
export starts the browser first (:func:`browser_starting`, as ``write_report`` does before running
the analyses): Chromium's start, 2–4 s here, then overlaps that work.
:func:`show` with an image renderer (``plotly.io.renderers.default = "svg"``) draws through the
same renderer, kept for the process once started (closed at exit).
"""

from __future__ import annotations

import asyncio
import atexit
import base64
import concurrent.futures
import logging
import os
import threading
import warnings
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

import plotly.graph_objects as go
import plotly.io as pio
from plotly.io._base_renderers import ImageRenderer

from analysis.errors import BrowserNotFoundError, ExportError

IMAGE_FORMATS = ("svg", "png", "pdf", "jpeg", "webp")
FORMATS = (*IMAGE_FORMATS, "html")
# Size of a static image when the figure sets none: wider than plotly's 700 px, so 32 ranks of bars
# and long kernel names fit.
DEFAULT_WIDTH = 1100
DEFAULT_HEIGHT = 550

_INSTALL_HINT = (
    "Static export (svg/png/pdf) drives a Chrome or Chromium browser through kaleido, and none was "
    "found. Install one: on Debian/Ubuntu `apt-get install chromium` (kaleido finds "
    "/usr/bin/chromium by itself), or `plotly_get_chrome` when online; or point BROWSER_PATH at "
    "an existing chrome/chromium executable. HTML export needs no browser."
)


@contextmanager
def quiet_kaleido() -> Iterator[None]:
    """Silence plotly's "The kopts argument is ignored": plotly hands kaleido its per-call options
    even when a running server (which ignores them) renders; the size still applies."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="The kopts argument is ignored")
        yield


def find_browser() -> str:
    """The Chrome/Chromium kaleido will use: ``BROWSER_PATH`` if set, else kaleido's own search.

    Raises ``BrowserNotFoundError`` (with how to install one) when there is none, rather than
    letting kaleido fail later inside its server thread.
    """
    override = os.environ.get("BROWSER_PATH")
    if override:
        if os.path.isfile(override) and os.access(override, os.X_OK):
            return override
        raise BrowserNotFoundError(
            override, f"BROWSER_PATH does not name an executable file. {_INSTALL_HINT}"
        )
    # kaleido's browser search (PATH, typical install places, choreographer's own download)
    from choreographer.browsers.chromium import Chromium

    found = Chromium.find_browser(skip_local=False)
    if not found:
        raise BrowserNotFoundError("chrome/chromium", _INSTALL_HINT)
    return str(found)


# The loggers of kaleido and of choreographer (its browser driver). They log with no handler of
# their own, so where the program configured no logging, Python's last-resort handler prints their
# records on stderr: choreographer logs a whole traceback when the browser's last message arrives
# cut ("JSONError decoding message. Ignoring", seen at a browser's shutdown), although the export
# went through. A NullHandler keeps them off a bare stderr; a program that configured logging
# still gets them through its own handlers.
BROWSER_LOGGERS = ("choreographer", "kaleido")


def quiet_browser_logs() -> None:
    """Give :data:`BROWSER_LOGGERS` a NullHandler (once)."""
    for name in BROWSER_LOGGERS:
        logger = logging.getLogger(name)
        if not any(isinstance(h, logging.NullHandler) for h in logger.handlers):
            logger.addHandler(logging.NullHandler())


# Figures rendered between two reloads of the renderer's page (see the module docstring).
RELOAD_EVERY = 32
# How long closing the renderer's browser may take (kaleido waits for a figure still rendering).
CLOSE_TIMEOUT_S = 30
# How long starting the browser and rendering one figure may take before the export gives up with
# an ExportError (kaleido's own limit for a figure is 90 s; a browser that stops answering, e.g.
# starved on a loaded machine, would otherwise leave the export waiting forever).
START_TIMEOUT_S = 120
FIGURE_TIMEOUT_S = 150


class _Renderer:
    """One Chromium driven by kaleido, on an event loop of its own (a daemon thread, so that it
    works from a notebook whose loop is running), kept open for every export until closed. The
    browser starts as the renderer is made, without waiting: :meth:`ready` waits for it (each
    use does), so a caller may start it before work of its own (:func:`browser_starting`)."""

    def __init__(self) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="analysis-kaleido", daemon=True
        )
        self._thread.start()
        self._opening = asyncio.run_coroutine_threadsafe(self._open(), self._loop)
        self._kaleido = None
        self._failed: ExportError | None = None

    def ready(self) -> _Renderer:
        """The renderer once its browser has started (waiting at most :data:`START_TIMEOUT_S`);
        an ``ExportError`` naming the browser if it could not start (the same one again later)."""
        if self._kaleido is not None:
            return self
        if self._failed is not None:
            raise self._failed
        try:
            self._kaleido = self._opening.result(START_TIMEOUT_S)
        except Exception as e:  # a browser that would not start, or kaleido's page that failed
            self._opening.cancel()
            self._stop_loop()
            if isinstance(e, concurrent.futures.TimeoutError):  # TimeoutError from Python 3.11
                e = TimeoutError(f"the browser did not answer within {START_TIMEOUT_S:g} s")
            self._failed = ExportError(find_browser(), f"kaleido could not start the browser: {e}")
            raise self._failed from e
        except BaseException:
            self._opening.cancel()
            self._stop_loop()
            raise
        return self

    @staticmethod
    async def _open():
        import kaleido

        class KeepPage(kaleido.Kaleido):
            """kaleido's browser, reloading its page every ``RELOAD_EVERY`` figures instead of
            after each (``_return_kaleido_tab`` is where kaleido 1.x reloads; a kaleido without
            it reloads as before)."""

            rendered = 0

            async def _return_kaleido_tab(self, tab) -> None:
                self.rendered += 1
                ready = getattr(self, "tabs_ready", None)  # kaleido 1.x's queue of free tabs
                if self.rendered % RELOAD_EVERY and ready is not None:
                    await ready.put(tab)
                else:  # a kaleido without that queue: its own reload, as after every figure
                    await super()._return_kaleido_tab(tab)

        # mathjax=False: the figures use no LaTeX, and kaleido would fetch MathJax from a CDN.
        browser = KeepPage(n=1, mathjax=False)
        await browser.__aenter__()
        return browser

    def _run(self, coroutine, timeout: float | None = None):
        """Run ``coroutine`` on the renderer's loop and wait for it (an interrupt, e.g. Ctrl-C,
        cancels it there)."""
        future = asyncio.run_coroutine_threadsafe(coroutine, self._loop)
        try:
            return future.result(timeout)
        except concurrent.futures.TimeoutError:  # TimeoutError itself from Python 3.11
            future.cancel()
            raise TimeoutError(f"the browser did not answer within {timeout:g} s") from None
        except BaseException:
            future.cancel()
            raise

    def write(self, fig: go.Figure, path: Path, fmt: str, width: int | None,
              height: int | None, scale: float) -> None:
        opts = {"format": fmt, "width": width, "height": height, "scale": scale}
        self.ready()
        self._run(self._kaleido.write_fig_from_object(
            {"fig": fig, "path": path, "opts": opts}, cancel_on_error=True),
            timeout=FIGURE_TIMEOUT_S)

    def image(self, fig_dict: dict, fmt: str, width: int, height: int, scale: float) -> bytes:
        opts = {"format": fmt, "width": width, "height": height, "scale": scale}
        self.ready()
        return self._run(self._kaleido.calc_fig(fig_dict, opts=opts), timeout=FIGURE_TIMEOUT_S)

    def close(self) -> None:
        """Close the browser (waiting at most :data:`CLOSE_TIMEOUT_S`, for one still starting
        too), then stop the loop."""
        if self._kaleido is None:
            if self._failed is not None:  # it never started: its loop is stopped already
                return
            try:
                self._kaleido = self._opening.result(CLOSE_TIMEOUT_S)
            except BaseException as e:  # a start that fails or hangs: given up, the loop stopped
                self._opening.cancel()
                self._stop_loop()
                if not isinstance(e, Exception):  # an interrupt goes on
                    raise
                return
        try:
            self._run(self._kaleido.__aexit__(None, None, None), timeout=CLOSE_TIMEOUT_S)
        finally:
            self._stop_loop()

    def _stop_loop(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(CLOSE_TIMEOUT_S)  # a loop stuck in the browser's driver is left behind
        if not self._thread.is_alive():
            self._loop.close()


# This module's browser: while a kaleido_server() body runs (``_serving``), or kept for the process
# once show() drew a figure with an image renderer (closed at exit).
_renderer: _Renderer | None = None
_serving = False  # a kaleido_server() body of ours runs: write_image renders through _renderer
_exit_hook = False


_early = False  # _renderer was started by browser_starting() and no kaleido_server() took it yet


def _start_renderer(wait: bool = True) -> _Renderer:
    global _exit_hook
    renderer = _Renderer()
    if not _exit_hook:  # a browser left running when the program ends is closed with it
        atexit.register(_close_renderer)
        _exit_hook = True
    return renderer.ready() if wait else renderer


@contextmanager
def browser_starting(start: bool = True) -> Iterator[None]:
    """Start the static-export browser now, in the background, for a :func:`kaleido_server` body
    later in this block: a report starts it before running its analyses, so that Chromium's
    start (seconds) overlaps them. A browser that no ``kaleido_server()`` took by the end of the
    block is closed. Nothing is started with ``start`` false, without a browser (the later
    ``kaleido_server()`` says what is missing), or with one up already."""
    global _renderer, _early
    started = False
    if start and _renderer is None and not _serving and not _kaleido_server_running():
        try:
            find_browser()
        except BrowserNotFoundError:
            pass
        else:
            quiet_browser_logs()
            _renderer, _early, started = _start_renderer(wait=False), True, True
    try:
        yield
    finally:
        if started and _early:  # never used: not left running for the rest of the process
            _early = False
            _close_renderer()


def _close_renderer() -> None:
    global _renderer
    renderer, _renderer = _renderer, None
    if renderer is not None:
        try:
            renderer.close()
        except Exception:  # the browser may be what failed: the caller's error is the news
            pass


def _through_renderer(draw):
    """``draw(renderer)`` on this module's renderer (started if there is none); after a failure
    the browser is closed (its page may be broken) and the next figure starts another."""
    global _renderer
    if _renderer is None:
        _renderer = _start_renderer()
    try:
        return draw(_renderer)
    except BaseException:
        _close_renderer()
        raise


def _kaleido_server_running() -> bool:
    import kaleido

    running = getattr(kaleido, "_global_server", None)
    return running is not None and running.is_running()


@contextmanager
def kaleido_server() -> Iterator[None]:
    """Run the body with a browser up for static export: this module's renderer, started if none
    runs and closed at the end (one kept by :func:`show` stays); inside an outer
    ``kaleido_server()``, or with kaleido's sync server that the caller started, nothing is
    started or stopped."""
    global _renderer, _serving, _early
    find_browser()
    quiet_browser_logs()
    if _serving or _kaleido_server_running():
        yield
        return
    kept = _renderer is not None and not _early
    if _early:  # one browser_starting() started is this body's, closed at its end
        _early = False
        try:
            _renderer.ready()  # a browser that could not start fails here, as a new one would
        except BaseException:
            _close_renderer()
            raise
    if _renderer is None:
        _renderer = _start_renderer()
    _serving = True
    try:
        yield
    finally:
        _serving = False
        if not kept:
            _close_renderer()


def write_image(fig: go.Figure, path: Path, fmt: str, width: int | None, height: int | None,
                scale: float = 1.0) -> None:
    """Render ``fig`` to ``path`` as ``fmt``. Inside :func:`kaleido_server`, through this module's
    renderer (its page kept between figures; after a failed figure that browser is closed and the
    next figure starts another); else through plotly and kaleido (kaleido's sync server if the
    caller started one, else a browser of its own for this figure)."""
    if not _serving:
        fig.write_image(path, format=fmt, scale=scale, width=width, height=height)
        return
    _through_renderer(lambda r: r.write(fig, path, fmt, width, height, scale))


class KeptPageImageRenderer(ImageRenderer):
    """One of plotly's image renderers (``"svg"``, ``"png"``, ...: its mime type, size and scale)
    drawing through this module's renderer, kept for the process: a figure shows in about 0.1 s
    where plotly would start a browser for each (about 2 s). Sizes as plotly's: the renderer's,
    else the figure's, else its template's, else ``plotly.io.defaults``."""

    def __init__(self, base: ImageRenderer) -> None:
        super().__init__(mime_type=base.mime_type, b64_encode=base.b64_encode, format=base.format,
                         width=base.width, height=base.height, scale=base.scale)

    def to_mimebundle(self, fig_dict):
        layout = fig_dict.get("layout", {})
        template = layout.get("template", {}).get("layout", {})
        width = (self.width or layout.get("width") or template.get("width")
                 or pio.defaults.default_width)
        height = (self.height or layout.get("height") or template.get("height")
                  or pio.defaults.default_height)
        scale = self.scale or pio.defaults.default_scale
        data = _through_renderer(lambda r: r.image(fig_dict, self.format, width, height, scale))
        text = base64.b64encode(data).decode("utf8") if self.b64_encode else data.decode("utf8")
        return {self.mime_type: text}


def _kept_page_renderers(renderer: str) -> str:
    """``renderer`` (plotly's ``"a+b"`` form) with each image renderer replaced by its
    :class:`KeptPageImageRenderer` (registered as ``trace_analysis_<name>``, from the user's
    renderer of that name as it is configured now)."""
    parts = renderer.split("+")
    for i, name in enumerate(parts):
        base = pio.renderers[name] if name in pio.renderers else None
        if isinstance(base, ImageRenderer) and not isinstance(base, KeptPageImageRenderer):
            parts[i] = f"trace_analysis_{name}"
            pio.renderers[parts[i]] = KeptPageImageRenderer(base)
    return "+".join(parts)


def _check_formats(formats: Iterable[str]) -> tuple[str, ...]:
    out = tuple(f.lower().lstrip(".") for f in ([formats] if isinstance(formats, str) else formats))
    unknown = [f for f in out if f not in FORMATS]
    if unknown or not out:
        raise ExportError(
            "formats", f"unsupported format(s) {unknown or '()'}; choose from {FORMATS}"
        )
    return out


def _safe_name(name: str) -> str:
    """A figure key as a file stem: path separators and other awkward characters become ``_``."""
    stem = "".join(c if c.isalnum() or c in "-_." else "_" for c in str(name)).strip("._")
    return stem or "figure"


def export_figures(
    figures: Mapping[str, go.Figure],
    out_dir: str | os.PathLike,
    formats: Iterable[str] = ("svg",),
    *,
    width: int | None = None,
    height: int | None = None,
    scale: float = 1.0,
    include_plotlyjs: bool | str = "directory",
) -> dict[str, list[Path]]:
    """Write each figure as ``out_dir/<name>.<format>``; returns ``{name: [paths written]}``.

    Static formats (svg, png, pdf, jpeg, webp) go through one kaleido server for all figures; their
    size is the figure's own ``layout.width/height``, else ``width``/``height``, else 1100 × 550 px
    (``scale`` multiplies the pixels of raster formats). ``html`` uses ``fig.write_html``:
    ``include_plotlyjs="directory"`` writes ``plotly.min.js`` once beside the files (works offline,
    ~4.8 MB once), ``True`` embeds it in every file, ``"cdn"`` links it from the web.
    """
    formats = _check_formats(formats)
    out = Path(out_dir)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise ExportError(out, f"cannot create the output directory: {e.strerror or e}") from e
    stems = {name: _safe_name(name) for name in figures}
    if len(set(stems.values())) < len(stems):
        raise ExportError(out, f"figure names collide once made file names: {sorted(stems)}")

    written: dict[str, list[Path]] = {name: [] for name in figures}
    if "html" in formats:
        for name, fig in figures.items():
            path = out / f"{stems[name]}.html"
            try:
                fig.write_html(path, include_plotlyjs=include_plotlyjs, full_html=True)
            except OSError as e:
                raise ExportError(path, f"cannot write HTML: {e.strerror or e}") from e
            written[name].append(path)

    static = [f for f in formats if f in IMAGE_FORMATS]
    if static and figures:
        with kaleido_server(), quiet_kaleido():
            for name, fig in figures.items():
                for fmt in static:
                    path = out / f"{stems[name]}.{fmt}"
                    try:
                        write_image(
                            fig,
                            path,
                            fmt,
                            width=fig.layout.width or width or DEFAULT_WIDTH,
                            height=fig.layout.height or height or DEFAULT_HEIGHT,
                            scale=scale,
                        )
                    except Exception as e:  # kaleido/browser failures come in many classes
                        raise ExportError(path, f"kaleido could not render {fmt}: {e}") from e
                    written[name].append(path)
    # Keep the caller's order of formats in each list.
    order = {f: i for i, f in enumerate(formats)}
    return {
        name: sorted(paths, key=lambda p: order[p.suffix[1:]]) for name, paths in written.items()
    }


def show(fig: go.Figure, renderer: str | None = None) -> None:
    """Display ``fig`` in a notebook, with image renderers (``"svg"``, ``"png"``) too.

    Without ``renderer``, a Jupyter kernel gets plotly's mime bundle plus an offline HTML form, so
    that the figure shows in JupyterLab, VS Code and an exported HTML page alike
    (:mod:`analysis.figures.renderer`); a renderer the user chose is kept.
    With ``plotly.io.renderers.default = "svg"`` (static notebooks, GitHub previews), rendering needs
    a browser: this checks for one first (a clear ``BrowserNotFoundError`` instead of kaleido's)
    and draws through this module's renderer, started by the first such figure and kept for the
    process (closed at exit): about 0.1 s a figure after the first, where plotly alone would start
    a browser for every figure (about 2 s each). With kaleido's sync server running (the caller
    started it), plotly draws through that.
    """
    from analysis.figures.renderer import default_renderer

    renderer = renderer or default_renderer()
    name = renderer or ""
    if any(part in IMAGE_FORMATS or part == "jpg" for part in name.split("+")):
        find_browser()
        quiet_browser_logs()
        if not _kaleido_server_running():
            renderer = _kept_page_renderers(name)
    with quiet_kaleido():
        fig.show(renderer=renderer)
