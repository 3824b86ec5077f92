"""What a report holds: every registered analysis's tables and figures for the chosen ranks.

``build_report`` asks the ``TraceAnalysis`` for every report section and context table of the
analysis registry (``analysis.analyses``, in catalogue order) in one batch -- one per-rank task per
window, the same analysed window and kernel patterns as its ``get_*`` methods -- and draws each
section's figures with the analysis's figure module. Nothing is written here; ``analysis.reports.html``
renders a ``ReportContent`` and ``analysis.reports.write_report`` writes it to disk. An analysis that
cannot run on these traces (e.g. launch statistics of CPU-only ranks) leaves its section with the
reason instead of failing the whole report; ranks left out of a section (no GPU events) come
back from ``run_many(left_out=)`` as data (``Section.left_out``, ``ReportContent.left_out``) and are
named in the section's note.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import pandas as pd
import plotly.graph_objects as go

from analysis import registry
from analysis.analyses import CATALOGUE
from analysis.errors import AnalysisFailedError, ConfigError, TraceAnalysisError


@dataclass
class Section:
    """One analysis in the report: its figures and tables, or why it could not run."""

    key: str
    title: str
    how_to_read: str
    figures: dict[str, go.Figure] = field(default_factory=dict)
    tables: dict[str, pd.DataFrame] = field(default_factory=dict)
    # tables written as CSV only (too long for the page), e.g. one row per kernel launch
    csv_only: dict[str, pd.DataFrame] = field(default_factory=dict)
    error: str | None = None
    notes: list[str] = field(default_factory=list)  # e.g. ranks left out, and why
    left_out: list[int] = field(default_factory=list)  # ranks with nothing it reads (no GPU events)
    open_tables: bool = False  # show the tables unfolded (the lead sections' findings)


@dataclass
class ReportContent:
    """Everything a report shows, independent of the output format.

    ``lead``: sections shown first (health, findings); ``key_numbers``: ``(label, value)`` cards;
    ``headline``: the key numbers per rank; ``context``: the trace metadata and profiler steps;
    ``sections``: one per analysis, in catalogue order.
    """

    source: str
    ranks: list[int]
    kernel_patterns: str
    headline: pd.DataFrame | None
    key_numbers: list[tuple[str, str]]
    context: list[Section]
    lead: list[Section]
    sections: list[Section]
    # the run at a glance, for the page's first line: ranks, GPUs, world size, steps, time
    identity: list[str] = field(default_factory=list)
    # every (analysis, rank) that could not run (registry.Failure), also shown in its section
    failures: list = field(default_factory=list)
    # every (analysis, rank) left out because the rank has nothing it reads (registry.Failure
    # rows, a NoGPUEventsError each): not failures, the sections' notes
    left_out: list = field(default_factory=list)

    @property
    def figures(self) -> dict[str, go.Figure]:
        return {name: fig for s in self.lead + self.sections for name, fig in s.figures.items()}

    @property
    def tables(self) -> dict[str, pd.DataFrame]:
        """Every table by file stem: headline, context tables, then each section's tables."""
        out = {} if self.headline is None else {"headline": self.headline}
        for s in self.context + self.lead + self.sections:
            out.update(s.tables)
            out.update(s.csv_only)
        return out


def select_report_ranks(ta, ranks: str | int | Iterable[int] = "all") -> list[int]:
    """``"all"``, one rank, a list of ranks, or a string like ``"0,3,5"`` → ranks present in ``ta``."""
    if isinstance(ranks, str) and ranks.strip().lower() != "all":
        try:
            ranks = sorted({int(part) for part in ranks.split(",") if part.strip()})
        except ValueError:
            raise ConfigError(f"ranks must be 'all' or comma-separated integers, not {ranks!r}") from None
        if not ranks:
            raise ConfigError("no ranks selected")
    elif isinstance(ranks, str):
        ranks = "all"
    return ta.engine.select(ranks, default="all")


def _always() -> list[str]:
    """The analyses every report has: its context tables and its lead section."""
    return [n for n, s in CATALOGUE.specs.items() if s.placement in ("context", "lead")]


def report_requests(analyses: Iterable[str] | None = None) -> dict[str, dict[str, Any]]:
    """``{analysis: options}`` a report runs (in one ``run_many``): its sections (``analyses``:
    section names, default all), the context and lead analyses every report has, and the
    profiler steps."""
    catalogue = CATALOGUE.specs
    names = CATALOGUE.section_names() if analyses is None else CATALOGUE.sections(analyses)
    requests = {n: dict(catalogue[n].report_options) for n in _always() + names}
    # the steps the analyses read (the last one is left out by default, as HTA does): the page
    # says so beside the steps the trace holds
    requests.setdefault("profiler_steps", {})
    return requests


def build_report(
    ta, ranks: str | int | Iterable[int] = "all", progress=None, analyses: Iterable[str] | None = None
) -> ReportContent:
    """Run the report's analyses (``analyses``: section names, default all of them, see
    ``analysis.analyses.section_names``) and its context tables for ``ranks`` of ``ta``, and draw
    their figures. ``progress`` (a tqdm bar or None) is advanced once per section."""
    chosen = select_report_ranks(ta, ranks)
    catalogue = CATALOGUE.specs
    names = CATALOGUE.section_names() if analyses is None else CATALOGUE.sections(analyses)
    always = _always()
    requests = report_requests(names)
    failures: list[registry.Failure] = []
    left_out: list[registry.Failure] = []
    # the report says what matters as data (left-out ranks, failures); the analyses' other
    # warnings stay off the console while it runs, as before
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        results = ta.run_many(requests, chosen, errors="return", failures=failures,
                              left_out=left_out)
    notes = registry.left_out_notes(left_out)
    left_out_ranks = registry.left_out_ranks(left_out)

    def section(name: str) -> Section:
        spec = catalogue[name]
        out = Section(name, spec.title, spec.how_to_read, open_tables=spec.placement == "lead")
        result = results[name]
        if not isinstance(result, TraceAnalysisError):
            try:
                out.tables.update(spec.report_tables(result))
                if spec.csv_only:
                    out.csv_only.update(spec.csv_only(result))
                figure_options = {p.name: p.default for p in spec.params if p.role == "figure"}
                out.figures.update(spec.draw(result, **figure_options, **spec.report_options))
            except Exception as exc:  # noqa: BLE001 - one section's bug leaves the others
                error = exc if isinstance(exc, TraceAnalysisError) else (
                    AnalysisFailedError.wrap(name, None, exc))
                failures.append(registry.Failure(name, None, error))
                out.tables, out.csv_only, out.figures, result = {}, {}, {}, error
        if isinstance(result, TraceAnalysisError):
            out.error = str(result)
        else:
            out.left_out = left_out_ranks.get(name, [])
            out.notes = [notes[name]] if name in notes else []
        mine = [f for f in failures if f.analysis == name]
        if mine:  # the section's "could not run" table (analysis, rank, message)
            out.tables[f"{name}_could_not_run"] = registry.failures_table(mine)
        return out

    context, lead, sections = [], [], []
    for name in always:
        (context if catalogue[name].placement == "context" else lead).append(section(name))
    for name in names:
        sections.append(section(name))
        if progress is not None:
            progress.set_postfix_str(catalogue[name].title or name)
            progress.update(1)

    key_numbers = [("ranks", str(len(chosen)))]
    for name, spec in catalogue.items():
        result = results.get(name)
        if spec.key_numbers is not None and not (result is None or isinstance(result, Exception)):
            key_numbers += _guarded(name, failures, spec.key_numbers, result) or []
    headline = _guarded("headline", failures, CATALOGUE.headline_table, results)
    analysed = results.get("profiler_steps")
    analysed = analysed if isinstance(analysed, list) else None
    first_line = _guarded("identity", failures, identity, chosen, results.get("trace_metadata"),
                          results.get("profiler_step_table"), analysed) or []
    table = results.get("profiler_step_table")
    if analysed is not None and isinstance(table, pd.DataFrame) and len(table):
        recorded = table["step"].nunique()
        if len(analysed) != recorded:
            key_numbers = [(k, f"{v} ({len(analysed)} analysed)" if k == "profiler steps" else v)
                           for k, v in key_numbers]
    for failure in failures:
        registry.log_failure(failure)
    return ReportContent(
        identity=first_line,
        source=str(ta.engine.source),
        ranks=chosen,
        kernel_patterns=getattr(ta.patterns, "name", str(ta.patterns)),
        headline=headline,
        key_numbers=key_numbers,
        context=context,
        lead=lead,
        sections=sections,
        failures=failures,
        left_out=left_out,
    )


def _guarded(name: str, failures: list, func, *args):
    """``func(*args)``, or None with a row in ``failures`` when it raises (a bug, or an error)."""
    try:
        return func(*args)
    except Exception as exc:  # noqa: BLE001 - the key numbers of one analysis leave the rest
        error = exc if isinstance(exc, TraceAnalysisError) else AnalysisFailedError.wrap(name, None, exc)
        failures.append(registry.Failure(name, None, error))
        return None


def identity(ranks: list[int], metadata, steps, analysed: list[int] | None = None) -> list[str]:
    """The run in a few words: ``["8 ranks (0–7)", "NVIDIA H100 80GB HBM3", "world size 8",
    "profiler steps 10–14 (10–13 analysed)", "started 2024-11-19 07:06:40 UTC"]`` (parts without
    data left out; ``analysed``: the steps the analyses read, said where they differ)."""
    from analysis.reports.health import number_runs

    out = [f"{len(ranks)} rank{'s' if len(ranks) != 1 else ''} ({number_runs(ranks)})"]
    if isinstance(metadata, pd.DataFrame) and len(metadata):
        gpus = sorted({str(g) for g in metadata.get("gpu", []) if g and str(g) not in ("-", "None")})
        if gpus:
            out.append(", ".join(gpus))
        sizes = sorted({int(w) for w in metadata.get("world_size", []) if pd.notna(w)})
        if sizes:
            out.append("world size " + ", ".join(map(str, sizes)))
    if isinstance(steps, pd.DataFrame) and len(steps):
        ids = sorted({int(s) for s in steps["step"]})
        text = f"profiler steps {ids[0]}–{ids[-1]}" if len(ids) > 1 else f"profiler step {ids[0]}"
        if analysed is not None and sorted(analysed) != ids:
            text += (" (none analysed)" if not analysed else
                     f" ({number_runs(analysed)} analysed)")
        out.append(text)
        first = steps["start(us)"].min() if "start(us)" in steps else None
        if first is not None and first >= 1e14:  # epoch µs (a clock from 0 is no date)
            import datetime as dt

            when = dt.datetime.fromtimestamp(first / 1e6, tz=dt.timezone.utc)
            out.append(when.strftime("started %Y-%m-%d %H:%M:%S UTC"))
    return out


def build_steps(analyses: Iterable[str] | None = None) -> int:
    """Progress bar length of ``build_report``: one tick per section."""
    return len(CATALOGUE.section_names() if analyses is None else list(analyses))
