"""Reports: the analyses of a ``TraceAnalysis`` written to a folder someone can attach to a ticket.

``write_report(ta, out_dir)`` writes::

    out_dir/index.html          one self-contained page (plotly.js inline, works offline)
    out_dir/figures/<name>.svg  one file per figure and static format asked for (svg, png, pdf)
    out_dir/tables/<name>.csv   every table, all rows

``content.build_report`` decides what is in it, ``html.render_html`` draws the page, and
``analysis.figures.export.export_figures`` writes the static figures through one kaleido browser.
The ``trace-analysis report`` command and the walkthrough notebook both call ``write_report``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from analysis import arguments
from analysis.arguments import REPORT_FORMATS
from analysis.errors import BrowserNotFoundError, ExportError
from analysis.registry import ChunkedTable
from analysis.reports.content import ReportContent, build_report, build_steps, select_report_ranks
from analysis.reports.staging import moved, staged

__all__ = ["ReportResult", "ReportContent", "build_report", "select_report_ranks", "write_report",
           "write_tables"]



@dataclass
class ReportResult:
    """What ``write_report`` wrote (absolute paths)."""

    out_dir: Path
    index: Path | None
    figures: dict[str, list[Path]] = field(default_factory=dict)
    tables: dict[str, Path] = field(default_factory=dict)
    # sections that could not be computed for these traces: {title: reason}
    unavailable: dict[str, str] = field(default_factory=dict)
    # what sections say about ranks they left out (e.g. a CPU-only rank among GPU ranks)
    notes: list[str] = field(default_factory=list)
    # (analysis, rank) units that could not run (registry.Failure): the "could not run" rows
    failures: list = field(default_factory=list)

    def _repr_html_(self) -> str:  # a notebook shows a link to the page
        from html import escape

        if self.index is None:
            return f"<p>Report written to {escape(str(self.out_dir))}</p>"
        return f'<p>Report: <a href="{escape(self.index.as_uri())}">{escape(str(self.index))}</a></p>'


def write_tables(tables, tables_dir: str | os.PathLike) -> dict[str, Path]:
    """Each ``{stem: DataFrame or registry.ChunkedTable}`` as ``tables_dir/<stem>.csv`` (all rows, the folder made if
    needed); returns the paths. ``ExportError`` names the file or folder that cannot be written."""
    tables_dir = Path(tables_dir)
    try:
        tables_dir.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise ExportError(tables_dir, f"cannot create the output directory: {e.strerror or e}") from e
    written = {}
    for name, df in tables.items():
        path = tables_dir / f"{name}.csv"
        try:
            if isinstance(df, ChunkedTable):  # a chunk at a time: never held whole
                _write_chunks(df, path)
            else:
                df.to_csv(path, index=False)
        except OSError as e:
            raise ExportError(path, f"cannot write: {e.strerror or e}") from e
        written[name] = path
    return written


def _write_chunks(table: ChunkedTable, path: Path) -> None:
    """``table``'s chunks as one CSV: the header, then each chunk's rows (the CSV of their
    concatenation)."""
    import pandas as pd

    with open(path, "w", newline="", encoding="utf-8") as f:
        pd.DataFrame(columns=list(table.columns)).to_csv(f, index=False)
        for chunk in table.chunks():
            chunk[list(table.columns)].to_csv(f, index=False, header=False)


def _write_text(path: Path, text: str) -> None:
    """Write atomically, so a reader never sees half a page."""
    tmp = path.with_name(path.name + ".part")
    try:
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    except OSError as e:
        raise ExportError(path, f"cannot write: {e.strerror or e}") from e


def write_report(
    ta,
    out_dir: str | os.PathLike,
    formats=("svg", "html"),
    ranks="all",
    progress: bool | None = None,
    analyses=None,
) -> ReportResult:
    """Run the analyses of ``ta`` for ``ranks`` and write the report into ``out_dir``.

    ``formats``: ``"html"`` writes ``index.html``; ``"svg"``, ``"png"``, ``"pdf"`` write one file per
    figure under ``figures/``. Tables are always written as CSV under ``tables/``. ``ranks``:
    ``"all"``, an int, a list, or ``"0,2,5"``. ``analyses``: the sections to include (names from
    ``analysis.analyses.section_names()``; default all). ``progress``: a progress bar (None: only on a
    terminal). Static formats need Chrome/Chromium: without one, the page and the tables are still
    written and ``BrowserNotFoundError`` then says how to install a browser. Everything is written
    into a temporary folder beside ``out_dir`` and moved in place at the end: a report that fails
    leaves nothing behind.
    """
    from analysis.kineto.progress import bar_class

    formats = arguments.formats(formats, REPORT_FORMATS) or REPORT_FORMATS[:2]
    static = [f for f in formats if f != "html"]
    out = Path(out_dir).absolute()

    total = build_steps(analyses) + 2 + bool(static)
    # disable=None: tqdm shows the bar only on a terminal
    disable = None if progress is None else not progress
    tqdm, options = bar_class()  # a widget in notebooks, emptied when done; no TqdmWarning
    no_browser = None
    from analysis.figures.export import browser_starting  # plotly: the figures need it anyway

    # Chromium starts while the analyses run (static formats only); written into a folder
    # beside OUT and moved in place at the end: a failure leaves nothing
    with browser_starting(bool(static)), staged(out) as tmp, tqdm(
            total=total, desc="report", unit="step", disable=disable, leave=False,
            **options) as bar:
        content = build_report(ta, ranks=ranks, progress=bar, analyses=analyses)
        result = ReportResult(out_dir=out, index=None,
                              unavailable={s.title: s.error for s in content.sections if s.error},
                              notes=[n for s in content.sections for n in s.notes],
                              failures=content.failures)
        (tmp / "tables").mkdir()
        result.tables = {k: moved(p, tmp, out)
                         for k, p in write_tables(content.tables, tmp / "tables").items()}
        bar.set_postfix_str("tables")
        bar.update(1)

        if "html" in formats:
            import plotly.offline

            from analysis.reports.html import render_html

            _write_text(tmp / "index.html", render_html(content, plotly.offline.get_plotlyjs()))
            result.index = out / "index.html"
        bar.set_postfix_str("html page")
        bar.update(1)

        if static:
            from analysis.figures.export import export_figures

            bar.set_postfix_str(f"{'/'.join(static)} figures")
            try:
                written = export_figures(content.figures, tmp / "figures", formats=static)
                result.figures = {k: [moved(p, tmp, out) for p in v] for k, v in written.items()}
            except BrowserNotFoundError as e:  # the page and the tables are still worth having
                no_browser = e
            bar.update(1)
    if no_browser is not None:
        written = "index.html and the tables" if result.index else "the tables"
        raise BrowserNotFoundError(
            no_browser.path, f"{no_browser.reason} ({written} were written to {out}; only the "
            f"{'/'.join(static)} figures are missing)"
        ) from no_browser
    return result
