"""How a ``TraceAnalysis`` and its tables show in a notebook: a rich summary and readable tables.

- :func:`overview` gathers what a user wants to see first about the loaded traces (ranks, GPUs,
  world size, profiler steps analysed and dropped, time range, events per rank, source, cache,
  kernel-pattern preset, and the errors and warnings of the trace health check ``ta.check()``),
  from the registered analyses ``trace_metadata``, ``profiler_step_table`` and ``trace_health`` run
  in one batch (one engine round trip); :func:`overview_html` and :func:`overview_text` render
  it. The facade's
  ``_repr_html_`` and ``__repr__`` delegate here. Names that come from the trace (file names, GPU
  names) are escaped: the HTML is a Jinja2 template with autoescape.
- :func:`table` formats an analysis result for reading (a pandas ``Styler``): µs with thousands
  separators, absolute epoch µs as whole numbers, percentages with one decimal, and the per-rank
  key columns as the index. The DataFrames the analyses return are unchanged (HTA's columns).

Times: the trace's own clock (epoch ns in torch ≥ 1.13 traces, shown as UTC); the time range is the
whole loaded trace (not just the analysed steps) over every rank.
"""

from __future__ import annotations

import datetime as _dt
import weakref
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from analysis.kineto.window import uses_iterations
from analysis.metrics.steps.trace_metadata import ITERATION_COLUMNS

# Timestamps above this (ns) read as a date: 2001-09-09. Older clocks (a trace starting at 0) do not.
_EPOCH_NS_FLOOR = 10**18
_HTML_ROWS = 64  # per-rank rows shown before "... n more" in the HTML table
_SEVERITY_COLOURS = {"error": "#B00020", "warning": "#B35900", "info": "#1F5FA8"}


@dataclass
class Overview:
    """What the summary of a ``TraceAnalysis`` shows (see the module docstring)."""

    source: str
    ranks: list[int]
    world_size: list[int]  # distinct world sizes written in the traces
    backends: list[str]
    gpus: dict[str, int]  # GPU name -> ranks that report it
    steps_analysed: list[int]
    steps_dropped: list[int]
    first_ns: int | None
    last_ns: int | None
    from_cache: int  # ranks read from the cache of parsed traces
    kernel_patterns: str
    time_rounding: str
    per_rank: list[dict[str, Any]]
    skipped: list[tuple[str, str]] = field(default_factory=list)
    findings: list[tuple[str, str, str]] = field(default_factory=list)  # severity, title, detail
    findings_error: str | None = None  # why the findings could not be made
    formats: list[str] = field(default_factory=list)  # profilers that wrote the files (kineto...)
    # the analysed window is cut at serving iterations (window="iterations", or "auto" without
    # profiler steps): per rank, (iterations, steady-state ones, first and last steady index),
    # trace_metadata's columns
    iterations: dict[int, tuple[int, int, int | None, int | None]] | None = None

    @property
    def duration_ms(self) -> float | None:
        if self.first_ns is None or self.last_ns is None:
            return None
        return (self.last_ns - self.first_ns) / 1e6


def overview(ta) -> Overview:
    """The summary of a ``TraceAnalysis`` (cached per object: the traces do not change)."""
    cached = _OVERVIEWS.get(ta)
    if cached is None:
        cached = _overview(ta)
        _OVERVIEWS[ta] = cached
    return cached


_OVERVIEWS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


# What the overview reads: registered analyses over the whole trace, run in one batch (one engine
# round trip); the analysed steps come from the window the engine cut when it loaded.
OVERVIEW_ANALYSES = ("trace_metadata", "profiler_step_table", "trace_health")


def _overview(ta) -> Overview:
    engine = ta.engine
    ranks = list(engine.ranks)
    results = ta.run_many(dict.fromkeys(OVERVIEW_ANALYSES, {}), "all", errors="return")
    for name in ("trace_metadata", "profiler_step_table"):
        if isinstance(results[name], Exception):
            raise results[name]
    meta = results["trace_metadata"].set_index("rank")
    step_table = results["profiler_step_table"]
    steps = {r: sorted({int(s) for s in step_table.loc[step_table["rank"] == r, "step"]})
             for r in ranks}
    metas = engine.metas
    analysed = sorted({s for r in ranks for s in engine.window_stats[r].steps})
    all_steps = sorted({s for r in ranks for s in steps[r]})
    gpus: dict[str, int] = {}
    for r in ranks:
        for name in sorted(set(metas[r].gpu_names)):
            gpus[name] = gpus.get(name, 0) + 1
    firsts = [_ns(v) for v in meta["start(us)"] if pd.notna(v)]
    lasts = [_ns(v) for v in meta["end(us)"] if pd.notna(v)]
    per_rank = [
        {
            "rank": r,
            "file": _file_name(metas[r].source),
            "gpu": ", ".join(sorted(set(metas[r].gpu_names))) or "-",
            "events": int(meta.at[r, "events"]),
            "steps": _ranges(steps[r]),
            "duration_ms": None if pd.isna(meta.at[r, "duration_ms"])
            else float(meta.at[r, "duration_ms"]),
            "cache": "yes" if getattr(metas[r], "from_cache", False) else "no",
        }
        for r in ranks
    ]
    return Overview(
        source=str(engine.source),
        ranks=ranks,
        world_size=sorted({m.world_size for m in metas.values() if m.world_size is not None}),
        backends=sorted({m.backend for m in metas.values() if m.backend}),
        formats=sorted({m.source_format for m in metas.values()}),
        gpus=gpus,
        steps_analysed=analysed,
        steps_dropped=[s for s in all_steps if s not in set(analysed)],
        first_ns=min(firsts) if firsts else None,
        last_ns=max(lasts) if lasts else None,
        from_cache=sum(bool(getattr(metas[r], "from_cache", False)) for r in ranks),
        kernel_patterns=str(getattr(ta.patterns, "name", ta.patterns)),
        time_rounding=str(ta.time_rounding),
        per_rank=per_rank,
        skipped=[(str(p), str(reason)) for p, reason in (engine.skipped or [])],
        iterations=({r: tuple(None if pd.isna(v) else int(v) for v in meta.loc[r, ITERATION_COLUMNS])
                     for r in ranks if meta.at[r, "iterations"]}
                    if uses_iterations(getattr(ta, "window", "auto"), len(all_steps)) else None),
        **_findings(results["trace_health"]),
    )


def _ns(us: float) -> int:
    """Absolute µs (the metadata's ``start(us)``/``end(us)``) → int ns; whole µs and the fraction
    apart, as epoch ns (~1.7e18) are past float64's exact integers."""
    whole = int(us)
    return whole * 1000 + int(round((float(us) - whole) * 1000))


def _findings(table) -> dict[str, Any]:
    """The trace health check (``ta.check()``'s table, or the error it raised): its errors and
    warnings as (severity, check, message) rows; an error says why there are none. The analyses'
    findings (``ta.findings()``) run every analysis, too much for showing the object: the summary
    points to them instead."""
    if isinstance(table, Exception):
        return {"findings_error": f"{type(table).__name__}: {table}"}
    table = table[table["severity"].isin(["error", "warning"])]
    return {"findings": [(str(r.severity), str(r.check), str(r.message))
                         for r in table.itertuples()]}


# ------------------------------------------------------------------------------------- helpers
def _file_name(source: str) -> str:
    return str(source).rstrip("/").rsplit("/", 1)[-1]


def _ranges(values: list[int]) -> str:
    """[0, 1, 2, 3, 7] -> "0–3, 7" (en dash)."""
    if not values:
        return "-"
    out, start, prev = [], values[0], values[0]
    for v in [*values[1:], None]:
        if v is not None and v == prev + 1:
            prev = v
            continue
        out.append(str(start) if start == prev else f"{start}–{prev}")
        if v is not None:
            start = prev = v
    return ", ".join(out)


def steps_analysed(analysed: list[int], dropped: list[int]) -> str:
    """Step numbers and how many of the recorded steps they are: ``[6], []`` → ``"#6 (1 of 1)"``,
    ``[10, 11, 12, 13], [14]`` → ``"#10–13 (4 of 5)"`` (a number, never "1 profiler steps")."""
    if not analysed:
        return "none" + (f" (0 of {len(dropped)})" if dropped else "")
    return f"#{_ranges(analysed)} ({len(analysed)} of {len(analysed) + len(dropped)})"


def _iteration_rows(ov: Overview) -> list[tuple[str, str]]:
    """The analysed window when it is cut at serving iterations: the steady-state iterations
    (``first–last``, the window spans them) of each distinct per-rank layout."""
    layouts: dict[str, list[int]] = {}
    for rank, (n, steady, first, last) in sorted((ov.iterations or {}).items()):
        span = "none" if first is None else (f"#{first}–{last}" if first != last else f"#{first}")
        left = n - steady
        text = f"{span} of {n}" + (f" ({left} warm-up left out)" if left else "")
        layouts.setdefault(text, []).append(rank)
    value = "; ".join(text if len(layouts) == 1 else f"rank {_ranges(ranks)}: {text}"
                      for text, ranks in layouts.items())
    return [("Serving iterations analysed",
             value + " (no ProfilerStep: the window is the steady-state iterations; "
             "ta.get_inference_iterations())")]


def _when(ns: int | None) -> str:
    if ns is None:
        return "-"
    if ns >= _EPOCH_NS_FLOOR:
        t = _dt.datetime.fromtimestamp(ns / 1e9, tz=_dt.timezone.utc)
        return t.strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + " UTC"
    return f"{ns / 1000:,.3f} µs"


def _rows(ov: Overview) -> list[tuple[str, str]]:
    """The summary as (label, value) pairs, shared by the HTML and the text form."""
    gpus = ", ".join(f"{n} × {name}" for name, n in ov.gpus.items()) or "none reported"
    duration = "-" if ov.duration_ms is None else f"{ov.duration_ms:,.3f} ms"
    cache = (
        f"{ov.from_cache} of {len(ov.ranks)} ranks read from the cache of parsed traces"
        if ov.from_cache else "parsed now (not from the cache)"
    )
    rows = [
        ("Source", ov.source + ("" if ov.formats in ([], ["kineto"])
                                else f" ({', '.join(ov.formats)}: docs/formats.md)")),
        ("Ranks", f"{len(ov.ranks)}{_of_world(ov)} ({_ranges(ov.ranks)})"),
        ("World size", ", ".join(map(str, ov.world_size)) or "not recorded"),
        ("GPUs", gpus),
        ("Backend", ", ".join(ov.backends) or "-"),
        *(_iteration_rows(ov) if ov.iterations else [
            ("Profiler steps analysed", steps_analysed(ov.steps_analysed, ov.steps_dropped)),
            ("Profiler steps dropped", _ranges(ov.steps_dropped)
             + (" (incomplete last step; include_last_profiler_step=True keeps it)"
                if ov.steps_dropped else ""))]),
        ("Time range", f"{_when(ov.first_ns)} → {_when(ov.last_ns)} ({duration})"),
        ("Events", f"{sum(r['events'] for r in ov.per_rank):,} "
                   f"({_events_spread(ov)} per rank)"),
        ("Loaded", cache),
        ("Kernel patterns", f"{ov.kernel_patterns} (time rounding: {ov.time_rounding})"),
    ]
    if ov.skipped:
        rows.append(("Skipped files", "; ".join(f"{p}: {why}" for p, why in ov.skipped)))
    if ov.findings_error:
        rows.append(("Trace health", f"not available ({ov.findings_error})"))
    elif not ov.findings:
        rows.append(("Trace health", "no error or warning (ta.check()); what the analyses find "
                                     "wrong: ta.findings()"))
    else:
        counts = ", ".join(
            f"{n} {sev}{'s' if n > 1 else ''}" for sev, n in _severity_counts(ov).items()
        )
        rows.append(("Trace health", f"{counts} (details: ta.check(); what the analyses find "
                                     "wrong: ta.findings())"))
    return rows


def _severity_counts(ov: Overview) -> dict[str, int]:
    counts: dict[str, int] = {}
    for severity, _, _ in ov.findings:
        counts[severity] = counts.get(severity, 0) + 1
    return counts


def _of_world(ov: Overview) -> str:
    """' of 128 in the job' when the traces are only some of the job's ranks, else ''."""
    if len(ov.world_size) == 1 and ov.world_size[0] > len(ov.ranks):
        return f" of {ov.world_size[0]} in the job"
    return ""


def _events_spread(ov: Overview) -> str:
    counts = [r["events"] for r in ov.per_rank]
    if not counts:
        return "0"
    lo, hi = min(counts), max(counts)
    return f"{lo:,}" if lo == hi else f"{lo:,}–{hi:,}"


# ----------------------------------------------------------------------------------- renderers
_TEMPLATE = """\
<div class="trace-analysis-summary" style="font-size: var(--jp-content-font-size1, 13px)">
<strong>TraceAnalysis</strong>
<table style="border-collapse: collapse; margin: 4px 0">
{% for label, value in rows %}<tr>
<th style="text-align: left; padding: 1px 12px 1px 0; font-weight: 600">{{ label }}</th>
<td style="text-align: left; padding: 1px 0">{{ value }}</td></tr>
{% endfor %}</table>
{% if findings %}<ol style="margin: 2px 0 6px 0; padding-left: 22px">
{% for severity, title, detail in findings %}<li><strong style="color: {{ colours.get(severity, '#444') }}">{{ severity }}</strong> <strong>{{ title }}</strong>: {{ detail }}</li>
{% endfor %}</ol>{% endif %}
<details{{ " open" if per_rank | length <= 16 else "" }}><summary>Per rank ({{ per_rank | length }})</summary>
<table style="border-collapse: collapse">
<tr>{% for c in columns %}<th style="text-align: left; padding: 1px 10px 1px 0">{{ c }}</th>{% endfor %}</tr>
{% for r in per_rank[:limit] %}<tr>{% for c in columns %}<td style="text-align: {{ 'left' if c in ('file', 'gpu', 'steps', 'cache') else 'right' }}; padding: 1px 10px 1px 0">{{ r[c] }}</td>{% endfor %}</tr>
{% endfor %}{% if per_rank | length > limit %}<tr><td colspan="{{ columns | length }}">… {{ per_rank | length - limit }} more ranks: ta.get_trace_metadata()</td></tr>{% endif %}
</table></details>
</div>
"""


def _environment():
    import jinja2

    return jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined)


def _short(ta, exc: Exception) -> str:
    """What ``repr`` falls back to when the summary cannot be made (a repr must not raise)."""
    return (
        f"TraceAnalysis(source={str(ta.engine.source)!r}, ranks={list(ta.engine.ranks)}) "
        f"(summary unavailable: {type(exc).__name__}: {exc})"
    )


def overview_html(ta) -> str:
    """The summary as an HTML fragment (a notebook's rich display)."""
    try:
        ov = overview(ta)
    except Exception as exc:  # noqa: BLE001 - shown, not swallowed: the fallback names it
        import html

        return f"<pre>{html.escape(_short(ta, exc))}</pre>"
    per_rank = [
        {**r, "events": f"{r['events']:,}",
         "duration_ms": "-" if r["duration_ms"] is None else f"{r['duration_ms']:,.3f}"}
        for r in ov.per_rank
    ]
    columns = ["rank", "file", "gpu", "events", "steps", "duration_ms", "cache"]
    return _environment().from_string(_TEMPLATE).render(
        rows=_rows(ov), per_rank=per_rank, columns=columns, limit=_HTML_ROWS,
        findings=ov.findings, colours=_SEVERITY_COLOURS,
    )


def overview_text(ta) -> str:
    """The summary as aligned plain text (``repr``)."""
    try:
        ov = overview(ta)
    except Exception as exc:  # noqa: BLE001 - shown, not swallowed: the fallback names it
        return _short(ta, exc)
    rows = _rows(ov)
    width = max(len(label) for label, _ in rows)
    lines = [f"  {label:<{width}}  {value}" for label, value in rows]
    lines += [f"    - {severity}: {title}" for severity, title, _ in ov.findings]
    return "TraceAnalysis\n" + "\n".join(lines)


# -------------------------------------------------------------------------------------- tables
# Columns that identify a row rather than measure something: the index of the displayed table.
KEY_COLUMNS = ("rank", "stream", "step", "kernel_type", "idle_category")


def table(df: pd.DataFrame, *, index: list[str] | None = None, precision: int = 1):
    """A readable display of an analysis table (a pandas ``Styler``; the data are not changed).

    The key columns present (``rank``, ``stream``, ``step``, ``kernel_type``, ``idle_category``,
    or ``index``) become the index, shown grouped; µs columns get thousands separators and
    ``precision`` decimals, absolute epoch µs (above 1e12) none; ``*_pctg``, ``*_%`` and ``(%)``
    columns one decimal; ratios three.
    """
    keys = list(index) if index is not None else [c for c in KEY_COLUMNS if c in df.columns]
    shown = df.set_index(keys) if keys and len(df) else df
    formats: dict[str, Any] = {}
    for col in shown.columns:
        series = shown[col]
        if not pd.api.types.is_float_dtype(series):
            if pd.api.types.is_integer_dtype(series):
                formats[col] = "{:,}"
            continue
        name = str(col)
        if name.endswith(("pctg", "_%")) or "(%)" in name:  # not describe()'s "25%" quantiles
            formats[col] = "{:.1f}"
        elif name.endswith("ratio"):
            formats[col] = "{:.3f}"
        elif series.abs().max(skipna=True) > 1e12:  # absolute epoch µs: decimals only add noise
            formats[col] = "{:,.0f}"
        else:
            formats[col] = f"{{:,.{precision}f}}"
    return shown.style.format(formats, na_rep="–")
