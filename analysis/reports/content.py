"""What a report holds: the five analyses' tables and figures for the chosen ranks, in reading order.

``build_report`` runs the analyses of a ``TraceAnalysis`` (the same pure functions its ``get_*``
methods call, over the same profiler-step window and kernel patterns) and draws their figures from
``analysis.figures``. Nothing is written here; ``analysis.reports.html`` renders a ``ReportContent``
and ``analysis.reports.write_report`` writes it to disk. An analysis that cannot run on these traces
(e.g. launch statistics of a CPU-only rank) leaves its section with the reason instead of failing
the whole report.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import pandas as pd
import plotly.graph_objects as go

from analysis import figures
from analysis.errors import ConfigError, TraceAnalysisError
from analysis.metrics.trace_metadata import headline_table

# HTA's defaults for the launch statistics cut-offs (µs) and the top operators listed.
RUNTIME_CUTOFF_US = 50
LAUNCH_DELAY_CUTOFF_US = 100
TOP_OPERATORS = 20


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


@dataclass
class ReportContent:
    """Everything a report shows, independent of the output format."""

    source: str
    ranks: list[int]
    kernel_patterns: str
    metadata: pd.DataFrame
    headline: pd.DataFrame
    steps: pd.DataFrame
    sections: list[Section]

    @property
    def figures(self) -> dict[str, go.Figure]:
        return {name: fig for s in self.sections for name, fig in s.figures.items()}

    @property
    def tables(self) -> dict[str, pd.DataFrame]:
        """Every table by file stem: metadata, headline, steps, then each section's tables."""
        out = {"trace_metadata": self.metadata, "headline": self.headline, "profiler_steps": self.steps}
        for s in self.sections:
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


def launch_summary(
    stats: dict[int, pd.DataFrame],
    runtime_cutoff: float = RUNTIME_CUTOFF_US,
    launch_delay_cutoff: float = LAUNCH_DELAY_CUTOFF_US,
) -> pd.DataFrame:
    """Per rank: number of launches, median CPU runtime-call duration, median GPU duration and
    median launch delay (µs), and how many launches exceed the runtime cutoff (``runtime_outliers``)
    and the launch delay cutoff (``launch_delay_outliers``), both cut-offs in µs as in HTA."""
    rows = [
        {
            "rank": rank,
            "launches": len(df),
            "median_cpu_duration_us": df["cpu_duration"].median(),
            "median_gpu_duration_us": df["gpu_duration"].median(),
            "median_launch_delay_us": df["launch_delay"].median(),
            "runtime_outliers": int((df["cpu_duration"] > runtime_cutoff).sum()),
            "launch_delay_outliers": int((df["launch_delay"] > launch_delay_cutoff).sum()),
        }
        for rank, df in stats.items()
    ]
    return pd.DataFrame(rows)


def _run(section: Section, fill: Callable[[Section], None]) -> Section:
    try:
        fill(section)
    except TraceAnalysisError as exc:
        section.error = str(exc)
        section.figures.clear()
        section.tables.clear()
        section.csv_only.clear()
    return section


def build_report(ta, ranks: str | int | Iterable[int] = "all", progress=None) -> ReportContent:
    """Run the five analyses (plus profiler steps and, when available, the operator summary) for
    ``ranks`` of ``ta`` and draw their figures. ``progress`` (a tqdm bar or None) is advanced once
    per analysis."""
    chosen = select_report_ranks(ta, ranks)

    def tick(label: str) -> None:
        if progress is not None:
            progress.set_postfix_str(label)
            progress.update(1)

    metadata = ta.get_trace_metadata(ranks=chosen)
    steps = ta.get_profiler_step_table(ranks=chosen)
    sections: list[Section] = []

    def temporal(s: Section) -> None:
        df = ta.get_temporal_breakdown(visualize=False, ranks=chosen)
        s.tables["temporal_breakdown"] = df
        s.figures["temporal_breakdown"] = figures.temporal_breakdown(df)

    sections.append(_run(Section(
        "temporal", "Temporal breakdown",
        "Each bar is one rank's GPU time between its first and last kernel, split into compute "
        "(kernels that do math), non-compute (communication and memory kernels only) and idle "
        "(no kernel running). A rank with much more idle time than the others is waiting, either "
        "for its CPU to launch work or for the other ranks.",
    ), temporal))
    tick("temporal breakdown")

    def idle(s: Section) -> None:
        df, stats = ta.get_idle_time_breakdown(
            ranks=chosen, show_idle_interval_stats=True, visualize=False
        )
        s.tables["idle_time_breakdown"] = df
        s.figures["idle_time_breakdown"] = figures.idle_time_breakdown(df, pctg=True)
        if stats is not None:
            s.tables["idle_interval_stats"] = stats.reset_index()
            s.figures["idle_interval_stats"] = figures.idle_interval_stats(stats)

    sections.append(_run(Section(
        "idle", "Idle time breakdown",
        "Per CUDA stream, the idle time between consecutive kernels split by cause: host_wait "
        "(the CPU launched the next kernel only after the previous one had finished: the GPU "
        "starved), kernel_wait (short gaps under 30 µs between back-to-back kernels: launch "
        "overhead) and other (e.g. waiting on another stream or a synchronisation). The interval "
        "statistics show how long the individual gaps are.",
    ), idle))
    tick("idle time")

    def overlap(s: Section) -> None:
        df = ta.get_comm_comp_overlap(visualize=False, ranks=chosen)
        s.tables["comm_comp_overlap"] = df
        s.figures["comm_comp_overlap"] = figures.comm_comp_overlap(df)

    sections.append(_run(Section(
        "overlap", "Communication / computation overlap",
        "The share of each rank's communication kernel time during which computation kernels ran "
        "too. Higher is better: communication hidden behind computation costs no step time. A rank "
        "well below the others exposes its collectives.",
    ), overlap))
    tick("comm/comp overlap")

    def launches(s: Section) -> None:
        stats = ta.get_cuda_kernel_launch_stats(ranks=chosen, visualize=False)
        s.tables["kernel_launch_summary"] = launch_summary(stats)
        frames = [df.assign(rank=r) for r, df in stats.items()]
        s.csv_only["kernel_launch_stats"] = (
            pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
        )
        s.figures["kernel_launch_stats"] = figures.kernel_launch_stats(
            stats, runtime_cutoff=RUNTIME_CUTOFF_US, launch_delay_cutoff=LAUNCH_DELAY_CUTOFF_US
        )

    sections.append(_run(Section(
        "launches", "CUDA kernel launch statistics",
        f"Left: every launch as its CPU runtime-call duration against its GPU kernel duration; "
        f"points below the diagonal are kernels shorter than their own launch call (the CPU "
        f"cannot keep the GPU busy with them), calls over {RUNTIME_CUTOFF_US} µs are runtime outliers. Right: per rank, "
        f"the delay between the end of the launch call and the kernel's start; delays over "
        f"{LAUNCH_DELAY_CUTOFF_US} µs mean a queue of work ahead of the kernel.",
    ), launches))
    tick("kernel launch stats")

    def kernels(s: Section) -> None:
        types, per_kernel = ta.get_gpu_kernel_breakdown(visualize=False, ranks=chosen)
        s.tables["kernel_type_breakdown"] = types
        s.tables["kernel_breakdown"] = per_kernel
        s.figures["kernel_type_breakdown"] = figures.kernel_type_breakdown(types)
        s.figures["kernel_breakdown"] = figures.kernel_breakdown(per_kernel)

    sections.append(_run(Section(
        "kernels", "GPU kernel breakdown",
        "The pie splits all GPU time by kernel type, with the time during which types overlap "
        "shown separately. The bars list the kernels that account for most of each type's time, "
        "per rank: the first candidates for optimisation.",
    ), kernels))
    tick("kernel breakdown")

    def operators(s: Section) -> None:
        s.tables["operator_summary"] = ta.get_operator_summary(ranks=chosen, top=TOP_OPERATORS)

    sections.append(_run(Section(
        "operators", "CPU operators",
        f"The {TOP_OPERATORS} CPU operators with the most GPU time launched, per rank: calls, total "
        "and self CPU time, and the GPU time of the kernels they launched (µs).",
    ), operators))
    tick("operators")

    temporal_df = sections[0].tables.get("temporal_breakdown")
    overlap_df = sections[2].tables.get("comm_comp_overlap")
    headline = (
        headline_table(temporal_df, overlap_df, metadata)
        if temporal_df is not None and overlap_df is not None
        else metadata[["rank", "gpu", "events"]]
    )
    return ReportContent(
        source=str(ta.engine.source),
        ranks=chosen,
        kernel_patterns=ta.patterns.name if hasattr(ta.patterns, "name") else str(ta.patterns),
        metadata=metadata,
        headline=headline,
        steps=steps,
        sections=sections,
    )


# Progress bar length of build_report: one tick per analysis above.
BUILD_STEPS = 6
