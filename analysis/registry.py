"""The analysis registry: one declarative entry per analysis, read by everything that runs one.

An analysis is three pieces (``docs/contributing.md`` has the recipe):

1. a metric module ``analysis/metrics/<family>/<name>.py``: a pure per-rank step
   ``<name>_rank(rt, ...)`` and a ``combine(parts, ...)`` of the per-rank results (its docstring
   defines the metric);
2. a figure module ``analysis/figures/<name>.py`` with ``draw(result, ...) -> {stem: Figure}``;
3. one :class:`Analysis` entry in its family's ``analysis/metrics/<family>/catalogue.py``
   (``ENTRIES``), which the top-level catalogue :mod:`analysis.analyses` registers.

From the entries, and nothing else:

- ``TraceAnalysis`` gets its ``get_*`` method, with HTA's name, arguments and defaults;
- the report gets a section (title, how to read it, figures, tables as CSV) and its context tables;
- ``trace-analysis summary`` gets each analysis's headline columns;
- ``trace-analysis report --analyses`` offers every section by name;
- both engines run them (:func:`run_on_rank`): every analysis asked for at once runs in *one*
  per-rank task over the same ``RankTrace`` (one round trip on Dask), and work that several need
  (classified GPU events, busy intervals, profiler steps) is memoised on the rank
  (``RankTrace.memoised``), so it is computed once per rank, not once per analysis.

This module holds the machinery only (the entry type, the :class:`Catalogue` of entries, the
per-rank task, the combine step) and never imports the catalogue: whoever needs every analysis
imports :mod:`analysis.analyses` (``CATALOGUE``, and ``get``, ``analyses``, ``run_on_rank``, ...).
"""

from __future__ import annotations

import importlib
import inspect
import logging
import re
import textwrap
import warnings
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from functools import cache
from typing import Any, Literal

from analysis.errors import (
    AnalysisFailedError,
    ConfigError,
    FormatNotSupportedError,
    NoGPUEventsError,
    TraceAnalysisError,
)
from analysis.formats import missing as missing_needs
from analysis.kineto.events import rank_has_gpu_events

_log = logging.getLogger("analysis")

Role = Literal["option", "ranks", "visualize", "figure", "renderer"]
Placement = Literal["section", "lead", "context", "none"]


@dataclass(frozen=True)
class Param:
    """One argument of an analysis's facade method.

    ``role``: ``"option"`` goes to the metric (per-rank step and combine, each getting the options
    its signature names); ``"ranks"`` selects ranks; ``"visualize"`` shows the figures;
    ``"figure"`` goes to the figure module's ``draw`` only; ``"renderer"`` is a plotly renderer.
    ``type``: the argument's annotation as it is written in source (``"int | None"``,
    ``"Literal['name', 'name_and_input_shape']"``; names from :data:`ANNOTATION_NAMES`): the
    generated method's signature, its docstring, ``analysis/api.pyi`` and ``docs/api.md`` show it.
    ``description``: one or two sentences for the docstring's ``Args:`` (unit and meaning of the
    default included).
    """

    name: str
    default: Any = None
    role: Role = "option"
    keyword_only: bool = False
    type: str = "Any"
    description: str = ""


@dataclass(frozen=True)
class ChunkedTable:
    """A table too long to hold whole (one row per event of every rank): ``chunks()`` gives its
    rows as frames with the same ``columns``, one after another (e.g. one per rank), each time it
    is called. An ``Analysis.csv_only`` may return one; the report writes it as one CSV, a chunk at
    a time (:func:`analysis.reports.write_tables`)."""

    chunks: Callable[[], Iterable[Any]]
    columns: tuple[str, ...]


@dataclass(frozen=True)
class Analysis:
    """Everything the facade, the report, the CLI and the engines need to know about an analysis.

    Attributes:
        name: the metric module's name (``analysis/metrics/<family>/<name>.py``); also the
            CSV/figure stem.
        method: the facade method (HTA's name where HTA has the analysis).
        doc: the facade method's docstring (what it returns, in which unit).
        rank_step: ``(rt, **options) -> part``, pure, importable on Dask workers. It also gets
            ``patterns`` (a ``KernelPatterns``) and ``rounding`` when its signature names them.
        combine: ``(parts: {rank: part}, **options) -> result``, on the caller.
        params: the facade method's arguments, in HTA's order.
        figures: the figure module (``"analysis.figures.<name>"``, imported only when drawing),
            whose ``draw(result, **figure options) -> {stem: Figure}`` gives the figures.
        default_ranks: ``"all"``, or ``"first"`` (HTA's ``ranks=None`` → one rank).
        window: ``"steps"`` (the analysed window: complete profiler steps, chosen GPU events) or
            ``"full"`` (the whole trace).
        needs_gpu: ranks without GPU events are left out with a warning naming them (all of them
            without: ``NoGPUEventsError``); the rank step need not check.
        placement: ``"section"`` (a report section, in catalogue order), ``"lead"`` (a section the
            report opens with, before the key numbers: health, findings), ``"context"`` (a report
            table shown before the sections: metadata, steps) or ``"none"``.
        title, how_to_read: the report section's heading and its "how to read it" text.
        report_options: the options the report runs it with.
        tables: ``result -> {stem: DataFrame}`` for the page and the CSVs (default ``{name: result}``).
        csv_only: ``result -> {stem: DataFrame or ChunkedTable}`` written as CSV only (too long
            for the page).
        headline: ``result -> DataFrame`` with a ``rank`` column: this analysis's columns in
            ``trace-analysis summary`` and the report's table of key numbers per rank.
        key_numbers: ``result -> [(label, value text)]``: cards at the top of the report.
        requires, derive: a *derived* analysis (no rank step) reads other analyses' results:
            ``requires`` is ``{name: options}`` of those it reads, and ``derive(results,
            **options)`` gets ``{name: result, or the TraceAnalysisError that analysis raised}``.
        needs: what the rank step needs beyond GPU events and runtime calls: ``"operators"``
            (PyTorch ``cpu_op`` rows linked to launches), ``"shapes"`` (their recorded shapes),
            ``"launches"`` (launch calls linked to GPU events). On a rank of another profiler's
            file that lacks one (``analysis.formats.missing``) the analysis raises
            ``FormatNotSupportedError``.
        extras: kinds of event args the rank step reads that the parser does not keep
            (:mod:`analysis.kineto.extras`, e.g. ``"op_shapes"``): attached to each rank, read
            from the cache or the trace file once, before the rank step runs; or a function of
            the options giving them (kinds only some options read).
        persist: the per-rank part is a function of the rank's trace alone (its file, and for
            ``window="steps"`` how the window was cut) and of the options and context (a
            DataFrame, or a tuple of DataFrames, texts and Nones; frames without ``attrs``:
            ``analysis.kineto.cache.put_result``): the local engine keeps it in the rank's trace cache
            entry, so a later process reads it instead of computing it again (keyed by the
            options, the rank, its file, the window's options and the package's source;
            :mod:`analysis.engines.local`). Worth it where the rank step costs more than reading
            a few small Arrow files back (about 1 ms).
        returns: the facade method's return annotation as written in source (``"pd.DataFrame"``,
            ``"dict[int, pd.DataFrame]"``, ``"RooflineResult"``; names from
            :data:`ANNOTATION_NAMES`).
        columns: the returned DataFrame's columns (of its first frame, for a tuple or a
            ``{rank: DataFrame}``), taken from the metric module's constants; units are in the
            names (``_us``, ``(us)``, ``_pct``) and in ``doc``. Empty: not a plain table.
        units: the unit of each column whose name does not say it (``{"idle_time": "µs"}``);
            names ending ``_us``/``(us)``, ``_ms``, ``_pct``/``_pctg``, ``_gbps``, ``_bytes`` ...
            say it themselves (:func:`column_unit`).
        aliases: earlier names of this analysis, still accepted wherever a name is (``get``,
            ``TraceAnalysis.run``, ``trace-analysis report --analyses``).
        method_aliases: earlier facade method names, kept on ``TraceAnalysis`` as aliases of
            ``method``.
    """

    name: str
    method: str
    doc: str
    rank_step: Callable[..., Any] | None = None
    combine: Callable[..., Any] | None = None
    params: tuple[Param, ...] = ()
    figures: str | None = None
    default_ranks: Literal["all", "first"] = "all"
    window: Literal["steps", "full"] = "steps"
    needs_gpu: bool = False
    placement: Placement = "section"
    title: str = ""
    how_to_read: str = ""
    report_options: Mapping[str, Any] = field(default_factory=dict)
    tables: Callable[[Any], dict[str, Any]] | None = None
    csv_only: Callable[[Any], dict[str, Any]] | None = None
    headline: Callable[[Any], Any] | None = None
    key_numbers: Callable[[Any], list[tuple[str, str]]] | None = None
    requires: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    derive: Callable[..., Any] | None = None
    extras: tuple[str, ...] | Callable[[Mapping[str, Any]], tuple[str, ...]] = ()
    needs: tuple[str, ...] = ()
    persist: bool = False
    returns: str = "pd.DataFrame"
    columns: tuple[str, ...] = ()
    units: Mapping[str, str] = field(default_factory=dict)
    aliases: tuple[str, ...] = ()
    method_aliases: tuple[str, ...] = ()

    def param(self, role: Role) -> Param | None:
        return next((p for p in self.params if p.role == role), None)

    def extra_kinds(self, options: Mapping[str, Any]) -> tuple[str, ...]:
        """The extra kinds the rank step reads with these options (``extras``)."""
        return tuple(self.extras(options) if callable(self.extras) else self.extras)

    def method_doc(self, alias: str | None = None) -> str:
        """The facade method's docstring: ``doc``, then ``Args:`` (each param's type, default and
        description) and ``Returns:`` (``returns`` and ``columns``), then where the analysis is
        defined. ``alias``: for the docstring of that earlier method name (``method_aliases``)."""
        module = (self.rank_step or self.derive).__module__
        lines = [f"``{alias}`` is the earlier name of ``{self.method}``, kept working: the same "
                 "method.", ""] if alias else []
        lines += [*_wrap(self.doc, 0), ""]
        if self.params:
            lines.append("Args:")
            for p in self.params:
                # "name (type, default value): First" stays on one line, however long the type
                first, _, rest = " ".join(p.description.split()).partition(" ")
                head = f"{p.name} ({p.type}, default {p.default!r}): {first}".replace(" ", "\0")
                lines += [line.replace("\0", " ") for line in _wrap(f"{head} {rest}", 4, 8)]
            lines.append("")
        returned = f"{self.returns}: " + (self.columns_text("``") or "as described above.")
        lines += ["Returns:", *_wrap(returned, 4, 8), ""]
        earlier = (" Earlier names, still accepted: "
                   + ", ".join(f"``{a}``" for a in self.aliases) + ".") if self.aliases else ""
        lines += _wrap(
            f"The registered analysis ``{self.name}`` (its name in ``TraceAnalysis.run``"
            + (", the report and ``trace-analysis report --analyses``"
               if self.placement == "section" else "" if self.placement == "none"
               else " and the report") + f").{earlier} Its definition is the "
            f"docstring of ``{module}`` (entry in ``{module.rpartition('.')[0]}.catalogue``).", 0)
        return "\n".join(lines)

    def columns_text(self, quote: str = "`") -> str:
        """``"columns `a`, `b` (µs)."``: the returned table's columns (of each table of a
        ``{rank: DataFrame}``, of the first of a tuple), with their units; ``""`` without."""
        if not self.columns:
            return ""
        which = ("columns" if self.returns == "pd.DataFrame" else "each DataFrame's columns"
                 if self.returns.startswith("dict[") else "the first DataFrame's columns")
        return f"{which} " + ", ".join(self.column_list(quote)) + "."

    def column_list(self, quote: str = "`") -> list[str]:
        """Each of ``columns`` quoted, with its unit when it has one: ``"`idle_time` (µs)"``."""
        return [f"{quote}{c}{quote}" + (f" ({u})" if (u := column_unit(c, self.units)) else "")
                for c in self.columns]

    def report_tables(self, result) -> dict[str, Any]:
        return self.tables(result) if self.tables else {self.name: result}

    def draw(self, result, **figure_options) -> dict[str, Any]:
        """The analysis's figures for ``result`` (``{}`` when it has none)."""
        if self.figures is None:
            return {}
        module = importlib.import_module(self.figures)
        return module.draw(result, **_accepted(module.draw, figure_options))


def _wrap(text: str, indent: int, subsequent: int | None = None) -> list[str]:
    """``text`` wrapped at 96 columns, the first line indented by ``indent``, the others by
    ``subsequent`` (default: the same)."""
    return textwrap.wrap(" ".join(text.split()), 96, initial_indent=" " * indent,
                         subsequent_indent=" " * (indent if subsequent is None else subsequent),
                         break_on_hyphens=False, break_long_words=False)


# Units said by a column's name (the project's and HTA's conventions), first match wins.
_UNIT_SUFFIXES = (
    (r"(_us|\(us\)|_us_(sum|mean|median|max|min))$", "µs"), (r"_ms$", "ms"),
    (r"(_pct|_pctg|^percentage|_pct_of_\w+)$|^pct_of_", "%"), (r"_gbps$", "GB/s"),
    (r"(^|_)bytes$", "bytes"), (r"_mb$", "MiB"), (r"^gflops$", "GFLOP"),
    (r"^tflops_per_s$", "TFLOP/s"), (r"^tb_per_s$", "TB/s"),
)


def column_unit(column: str, units: Mapping[str, str] | None = None) -> str | None:
    """The unit of ``column``: ``units[column]``, else what its name says (``_us`` → µs), else
    None (a count, a name, a flag)."""
    if units and column in units:
        return units[column]
    return next((unit for pattern, unit in _UNIT_SUFFIXES if re.search(pattern, column)), None)


# The names a ``Param.type`` or ``Analysis.returns`` annotation may use, and where they come from
# (``analysis/api.pyi`` imports them; ``tests/unit/test_api_stub.py`` evaluates every annotation).
ANNOTATION_NAMES = {
    "Any": "typing", "Literal": "typing", "AbstractContextManager": "contextlib",
    "Failure": "analysis.registry",
    "Iterable": "collections.abc", "Mapping": "collections.abc", "Sequence": "collections.abc",
    "pd": "pandas",
    "CriticalPathGraph": "analysis.metrics.critical_path.critical_path",
    "GpuSpec": "analysis.metrics.roofline.gpu_specs",
    "LaunchApis": "analysis.metrics.gpu_time.kernel_launch_stats",
    "RankProfile": "analysis.metrics.compare.trace_diff",
    "RooflineResult": "analysis.metrics.roofline.operator_roofline",
    "KernelTables": "analysis.metrics.tensorboard.kernel_table",
    "MemoryReport": "analysis.metrics.tensorboard.memory_view",
}

RANKS_TYPE = "int | Iterable[int] | Literal['all'] | None"


def ranks_param(default: Literal["all"] | None = "all", *, keyword_only: bool = False,
                name: str = "ranks") -> Param:
    """The ranks argument: ``"all"`` by default, or ``None`` (HTA's: the first rank)."""
    what = "every loaded rank" if default == "all" else "the first loaded rank (HTA's default)"
    return Param(name, default, role="ranks", keyword_only=keyword_only, type=RANKS_TYPE,
                 description="The ranks to analyse: one rank, a list of ranks, ``'all'``, or "
                             f"``None``; the default gives {what}.")


def visualize_param(default: bool = True) -> Param:
    """The visualize argument: show the analysis's figures (plotly) in the notebook."""
    return Param("visualize", default, role="visualize", type="bool",
                 description="Show the analysis's figures (plotly) after computing the result.")


# Parameters many facade methods share.
RANKS_ALL = ranks_param("all", keyword_only=True)
VISUALIZE = visualize_param(True)


class Catalogue:
    """Analyses by name, in report order: the lookup, and what is read across the entries.

    Names, their aliases and facade methods (with theirs) are unique (``ConfigError`` otherwise).
    """

    def __init__(self, entries: Iterable[Analysis]):
        self.specs: dict[str, Analysis] = {}
        self.aliases: dict[str, str] = {}  # an earlier name -> the analysis's name
        methods: set[str] = set()
        for spec in entries:
            names = (spec.name, *spec.aliases)
            for name in names:
                if name in self.specs or name in self.aliases or names.count(name) > 1:
                    raise ConfigError(f"analysis {name!r} is registered twice")
            for method in (spec.method, *spec.method_aliases):
                if method in methods:
                    raise ConfigError(f"facade method {method!r} is registered twice")
                methods.add(method)
            self.specs[spec.name] = spec
            self.aliases.update(dict.fromkeys(spec.aliases, spec.name))
        steps = Counter(spec.rank_step for spec in self.specs.values() if spec.rank_step)
        # rank steps more than one analysis runs (collectives, collective summary and stragglers
        # read one table per rank): computed once per rank and options (run_on_rank)
        self.shared_steps = frozenset(step for step, n in steps.items() if n > 1)

    def get(self, name: str) -> Analysis:
        """The entry named ``name`` (or one of its earlier names, ``Analysis.aliases``)."""
        try:
            return self.specs[self.aliases.get(name, name)]
        except KeyError:
            raise ConfigError(
                f"unknown analysis {name!r}; choose from {sorted(self.specs)}"
            ) from None

    def canonical(self, name: str) -> str:
        """The analysis's name for ``name``, which may be an earlier one (``ConfigError`` if
        neither)."""
        return self.get(name).name

    def headline_names(self) -> list[str]:
        """The analyses that contribute columns to the headline table (``Analysis.headline``)."""
        return [n for n, s in self.specs.items() if s.headline is not None]

    def headline_table(self, results: Mapping[str, Any]):
        """The headline numbers per rank from analyses' ``results`` (name → result, or the error it
        raised, which contributes nothing): every headline part merged on ``rank``, rounded to 2
        decimals; None when no analysis gave one."""
        table = None
        for name in self.headline_names():
            result = results.get(name)
            if result is None or isinstance(result, Exception):
                continue
            part = self.get(name).headline(result)
            table = part if table is None else table.merge(part, on="rank", how="left")
        return None if table is None else table.round(2)

    def section_names(self) -> list[str]:
        """The analyses that are report sections, in report order (what ``--analyses`` accepts)."""
        return [n for n, s in self.specs.items() if s.placement == "section"]

    def sections(self, names: Iterable[str]) -> list[str]:
        """``names`` of report sections (earlier names accepted) as the sections' names, in the
        order given; ``ConfigError`` naming the unknown ones and the choices."""
        names = list(names)
        chosen = [self.aliases.get(n, n) for n in names]
        sections = self.section_names()
        unknown = [n for n, c in zip(names, chosen, strict=True) if c not in sections]
        if unknown:
            raise ConfigError(f"unknown report analyses {unknown}; choose from {sections}")
        return chosen

    def requests_by_window(
        self, requests: Iterable[tuple[str, dict[str, Any]]],
    ) -> dict[str, list[tuple[str, dict[str, Any]]]]:
        """Requests grouped by the window their analysis runs over (one engine call per window)."""
        out: dict[str, list[tuple[str, dict[str, Any]]]] = {}
        for name, options in requests:
            out.setdefault(self.get(name).window, []).append((name, dict(options)))
        return out

    def run_on_rank(self, rt, requests: list[tuple[str, dict[str, Any]]],
                    context: dict[str, Any], attach_extras: Callable[..., None] | None = None,
                    ) -> dict:
        """:func:`run_on_rank` for ``requests`` given by name."""
        return run_on_rank(rt, [(self.get(n), o) for n, o in requests], context, attach_extras,
                           shared_steps=self.shared_steps)


# ------------------------------------------------------------------------------ running them
@cache
def _parameters(func: Callable) -> tuple[frozenset[str], bool]:
    params = inspect.signature(func).parameters.values()
    names = frozenset(p.name for p in params)
    return names, any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params)


def _accepted(func: Callable, options: Mapping[str, Any]) -> dict[str, Any]:
    """The entries of ``options`` that ``func``'s signature takes."""
    names, var_kw = _parameters(func)
    return dict(options) if var_kw else {k: v for k, v in options.items() if k in names}


@dataclass
class RankFailure:
    """An analysis that could not run on one rank: the error, carried back as data."""

    rank: int
    error: TraceAnalysisError
    no_gpu: bool = False


@dataclass(frozen=True)
class Failure:
    """``analysis`` gave no part for ``rank`` (None: not one rank's, e.g. the combine step or a
    figure), because of ``error`` (the project's error; a foreign exception arrives as
    :class:`AnalysisFailedError`, a bug).

    ``run_many(failures=)`` collects the rows of the "could not run" table; ``run_many(left_out=)``
    the ranks left out of a result the other ranks give because they have nothing the analysis
    reads (``error`` a ``NoGPUEventsError``): not failures, notes (:func:`left_out_notes`).
    """

    analysis: str
    rank: int | None
    error: TraceAnalysisError

    @property
    def message(self) -> str:
        return " ".join(str(self.error).splitlines())

    @property
    def is_bug(self) -> bool:
        return isinstance(self.error, AnalysisFailedError)


def add_rows(rows: list[Failure], new: Iterable[Failure]) -> None:
    """Append ``new`` to a ``failures`` / ``left_out`` list, less the rows it already holds (same
    analysis, rank and message): an analysis run again, or read by a derived analysis and asked
    for too, is listed once."""
    seen = {(f.analysis, f.rank, f.message) for f in rows}
    for f in new:
        if (f.analysis, f.rank, f.message) not in seen:
            seen.add((f.analysis, f.rank, f.message))
            rows.append(f)


def failures_table(failures: Iterable[Failure]):
    """The "could not run" table: one row per failure (analysis, rank, one-line message)."""
    import pandas as pd

    rows = [{"analysis": f.analysis, "rank": "all" if f.rank is None else str(f.rank),
             "message": f.message} for f in failures]
    return pd.DataFrame(rows, columns=["analysis", "rank", "message"])


def left_out_notes(left_out: Iterable[Failure]) -> dict[str, str]:
    """``{analysis: "<title>: rank(s) [2, 3] left out: no GPU events (why)"}``, one line per
    analysis of ``left_out`` (rows of ``run_many(left_out=)``), ranks in order."""
    rows: dict[str, list[Failure]] = {}
    for row in left_out:
        rows.setdefault(row.analysis, []).append(row)
    return {name: _left_out_note(group) for name, group in rows.items()}


def left_out_ranks(left_out: Iterable[Failure]) -> dict[str, list[int]]:
    """``{analysis: [ranks left out]}`` from rows of ``run_many(left_out=)``."""
    out: dict[str, set[int]] = {}
    for row in left_out:
        out.setdefault(row.analysis, set()).update(() if row.rank is None else (row.rank,))
    return {name: sorted(ranks) for name, ranks in out.items()}


def _left_out_note(rows: list[Failure]) -> str:
    error = rows[0].error
    ranks = sorted({r.rank for r in rows if r.rank is not None})
    if isinstance(error, NoGPUEventsError):
        what = error.what
        reason = "no GPU events" + (f" ({error.detail})" if error.detail else "")
    else:
        what, reason = rows[0].analysis, " ".join(str(error).splitlines())
    return f"{what}: rank(s) {ranks} left out: {reason}"


def log_failure(failure: Failure) -> None:
    """Log ``failure`` (with the original traceback of a bug) on the ``analysis`` logger at DEBUG
    level: ``trace-analysis --debug`` shows it."""
    text = getattr(failure.error, "traceback_text", "")
    _log.debug("could not run %s (rank %s): %s%s", failure.analysis,
               "all" if failure.rank is None else failure.rank, failure.message,
               ("\n" + text) if text else "")


def run_on_rank(
    rt,
    requests: list[tuple[Analysis, dict[str, Any]]],
    context: dict[str, Any],
    attach_extras: Callable[..., None] | None = None,
    shared_steps: frozenset[Callable] = frozenset(),
) -> dict:
    """The per-rank task: each requested ``(entry, options)``'s rank step on ``rt``.

    ``context`` holds what every step may take (``patterns``, ``rounding``). The extras an
    analysis declares are attached by ``attach_extras(rt, kinds)``: the reader of the engine that
    loaded the rank (``engine.read_extras``, an :class:`analysis.kineto.extras.ExtrasReader` bound
    to the engine's load options; this module reads no file). Returns ``{name: part}``; an
    analysis that cannot run on this rank (no GPU events, or another of the project's errors)
    gives a :class:`RankFailure` instead, so the other analyses of the batch still run.

    A rank step in ``shared_steps`` (one that several analyses run: :attr:`Catalogue.shared_steps`)
    is memoised on the rank by its arguments, so those analyses share one computation of it while
    the rank is held (a failure is not memoised: each analysis raises its own).
    """
    out: dict[str, Any] = {}
    if attach_extras is not None:
        _attach_batch_extras(rt, requests, attach_extras)
    for spec, options in requests:
        name = spec.name
        try:
            missing = missing_needs(rt, spec.needs)
            if missing:
                raise FormatNotSupportedError(
                    spec.title or name, rt.meta.source_format, missing, rt.meta.source
                )
            if spec.needs_gpu and not rank_has_gpu_events(rt):
                raise NoGPUEventsError([rt.rank], spec.title or name)
            kinds = spec.extra_kinds(options)
            if kinds:
                if attach_extras is None:
                    raise ConfigError(f"{name} needs trace extras {kinds}: no reader given")
                attach_extras(rt, kinds)
            kwargs = _accepted(spec.rank_step, {**context, **options})
            key = _step_key(spec.rank_step, kwargs) if spec.rank_step in shared_steps else None
            if key is None:
                out[name] = spec.rank_step(rt, **kwargs)
            else:
                out[name] = rt.memoised(key, lambda s=spec.rank_step, k=kwargs: s(rt, **k))
        except NoGPUEventsError as exc:
            out[name] = RankFailure(rt.rank, exc, no_gpu=True)
        except TraceAnalysisError as exc:
            out[name] = RankFailure(rt.rank, exc)
        except Exception as exc:  # noqa: BLE001 - the (analysis, rank) boundary: a bug, kept as data
            out[name] = RankFailure(rt.rank, AnalysisFailedError.wrap(name, rt.rank, exc))
    return out


def _step_key(step: Callable, kwargs: Mapping[str, Any]) -> tuple | None:
    """The rank memo's key of ``step`` run with ``kwargs``; None when an argument cannot be
    hashed (not memoised)."""
    key = ("rank_step", step, tuple(sorted(kwargs.items())))
    try:
        hash(key)
    except TypeError:
        return None
    return key


def batch_extras(rt, requests: list[tuple[Analysis, dict[str, Any]]]) -> list[str]:
    """The extra kinds the requests that can run on ``rt`` (its format has what they need) read,
    each once, in order."""
    kinds: dict[str, None] = {}
    for spec, options in requests:
        if spec.extras and not missing_needs(rt, spec.needs):
            kinds.update(dict.fromkeys(spec.extra_kinds(options)))
    return list(kinds)


def _attach_batch_extras(rt, requests, attach_extras: Callable[..., None]) -> None:
    """Attach the extras of the whole batch at once: the reader decodes a source file once for
    all the kinds it lacks, not once per analysis. A failure is left to each analysis's own
    attach, which raises it where it belongs (that analysis's :class:`RankFailure`)."""
    try:
        kinds = [k for k in batch_extras(rt, requests) if k not in rt.extras]
        if len(kinds) > 1:
            attach_extras(rt, kinds)
    except Exception:  # noqa: BLE001 - raised again by the analysis that needs the kind
        pass


def combine_parts(
    spec: Analysis,
    parts: Mapping[int, Any],
    options: Mapping[str, Any],
    context: Mapping[str, Any],
    explain_no_gpu: Callable[[list[int]], str | None] | None = None,
    failures: list[Failure] | None = None,
    left_out: list[Failure] | None = None,
) -> Any:
    """Combine one analysis's per-rank parts (rank order kept), or raise why it cannot.

    Ranks without GPU events are left out: with a ``left_out`` list, as its :class:`Failure` rows
    (data the report and the summary read), else with a warning naming them; if no rank is left,
    the ``NoGPUEventsError`` names all of them, with ``explain_no_gpu(ranks)``'s account of why
    when it has one (e.g. "the kernels exist but none falls inside the analysed steps"). Any other
    per-rank failure is raised as it was, unless a ``failures`` list is given: then the failed
    ranks are appended to it as :class:`Failure` rows and left out (raised only when no rank is
    left). A foreign exception of the combine step is raised as :class:`AnalysisFailedError`.
    """
    ok: dict[int, Any] = {}
    no_gpu: list[int] = []
    failed: list[RankFailure] = []
    for rank, part in parts.items():
        if isinstance(part, RankFailure):
            if part.no_gpu:
                no_gpu.append(rank)
            elif failures is None:
                raise part.error
            else:
                failed.append(part)
        else:
            ok[rank] = part
    if failed:
        if not ok and not no_gpu:
            raise _all_failed(spec.name, failed)
        add_rows(failures, (Failure(spec.name, part.rank, part.error) for part in failed))
    what = spec.title or spec.name
    if no_gpu:
        why = explain_no_gpu(no_gpu) if explain_no_gpu else None
        error = NoGPUEventsError(no_gpu, what, detail=why)
        if not ok:
            raise error
        rows = [Failure(spec.name, rank, error) for rank in no_gpu]
        if left_out is None:
            warnings.warn(_left_out_note(rows), stacklevel=3)
        else:
            add_rows(left_out, rows)
    try:
        return spec.combine(ok, **_accepted(spec.combine, {**context, **options}))
    except TraceAnalysisError:
        raise
    except Exception as exc:  # noqa: BLE001 - the boundary: a bug becomes the project's error
        raise AnalysisFailedError.wrap(spec.name, None, exc) from exc


def _all_failed(name: str, failed: list[RankFailure]) -> TraceAnalysisError:
    """One error for an analysis that failed on every rank (the first one's, naming the ranks)."""
    first = failed[0].error
    ranks = [p.rank for p in failed]
    if isinstance(first, AnalysisFailedError):
        return AnalysisFailedError(name, None, first.error_type,
                                   f"{first.message} (ranks {ranks})", first.traceback_text)
    return first
