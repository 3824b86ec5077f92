"""The catalogue: every family's registry entries, in report order (see ``analysis.registry``).

Each family of ``analysis/metrics/`` declares its analyses in its ``catalogue.py`` (``ENTRIES``);
this module registers them all. Adding an analysis is a metric module and an entry in its
family's ``catalogue.py`` (plus a figure module; ``docs/contributing.md``); a new family adds its
``ENTRIES`` to :data:`FAMILIES`. Facade methods, report sections, ``summary`` columns,
``--analyses`` choices and engine runs all come from these entries.

Whoever needs every analysis imports this module (the registry never does): :data:`CATALOGUE`,
and :func:`analyses`, :func:`get`, :func:`run_on_rank` and the other lookups below.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from analysis.metrics.compare import catalogue as compare
from analysis.metrics.critical_path import catalogue as critical_path
from analysis.metrics.distributed import catalogue as distributed
from analysis.metrics.findings import catalogue as findings
from analysis.metrics.gpu_time import catalogue as gpu_time
from analysis.metrics.health import catalogue as health
from analysis.metrics.inference import catalogue as inference
from analysis.metrics.operators import catalogue as operators
from analysis.metrics.roofline import catalogue as roofline
from analysis.metrics.steps import catalogue as steps
from analysis.metrics.tensorboard import catalogue as tensorboard
from analysis.registry import Analysis, Catalogue

FAMILIES = (steps, compare, health, findings, gpu_time, operators, tensorboard, roofline,
            distributed, critical_path, inference)

# The report's order (and the order of ``trace-analysis analyses``): context tables, lead
# sections, sections; API-only entries next to their kin. An entry not named here follows these,
# in FAMILIES order.
REPORT_ORDER = (
    "trace_metadata", "profiler_step_table", "profiler_steps", "step_profile", "step_start_gaps",
    "trace_health", "findings",
    "temporal_breakdown", "idle_time_breakdown", "comm_comp_overlap", "cuda_kernel_launch_stats",
    "gpu_kernel_breakdown", "operator_summary",
    "gpu_summary", "gpu_utilization_timeline", "step_time_breakdown", "kernel_table",
    "operator_table", "module_summary", "memory_timeline", "memory_peaks", "operator_memory", "memory_events",
    "memory_view",
    "operator_roofline", "inference_iterations",
    "queue_length_stream_summary", "queue_length_summary", "queue_length_time_series",
    "memcpy_summary", "memory_bw_summary", "memory_bw_time_series",
    "collectives", "collective_summary", "stragglers", "step_breakdown",
    "critical_path_summary", "critical_path_analysis",
)


def _in_report_order(entries: list[Analysis]) -> list[Analysis]:
    place = {name: i for i, name in enumerate(REPORT_ORDER)}
    return sorted(entries, key=lambda spec: place.get(spec.name, len(place)))  # stable


CATALOGUE = Catalogue(_in_report_order([spec for family in FAMILIES for spec in family.ENTRIES]))


def analyses() -> dict[str, Analysis]:
    """Every registered analysis, in catalogue order (the report's order)."""
    return CATALOGUE.specs


get = CATALOGUE.get
headline_names = CATALOGUE.headline_names
headline_table = CATALOGUE.headline_table
section_names = CATALOGUE.section_names
requests_by_window = CATALOGUE.requests_by_window


def run_on_rank(rt, requests: list[tuple[str, dict[str, Any]]], context: dict[str, Any],
                read_extras: Callable[..., Any] | None = None) -> dict:
    """The per-rank task of the engines: ``requests`` ``(name, options)`` on rank ``rt``
    (:func:`analysis.registry.run_on_rank`); the extras an analysis declares are attached by
    ``read_extras(rt, kinds)``, the reader of the engine that loaded the rank (``engine.read_extras``;
    None: :class:`analysis.kineto.extras.ExtrasReader` with the default load options).
    Module-level, so importable on workers."""
    return CATALOGUE.run_on_rank(rt, requests, context, read_extras or _read_extras)


def _persisted(name: str) -> bool:
    """Whether the per-rank part of ``name`` may be kept in the trace cache
    (``Analysis.persist``): read by the local engine (``run_on_rank.persisted``)."""
    spec = CATALOGUE.get(name)
    return spec.persist and spec.rank_step is not None


run_on_rank.persisted = _persisted


def _extra_kinds(requests: list[tuple[str, dict[str, Any]]]) -> list[str]:
    """The extra kinds the analyses of ``requests`` read on a Kineto rank, each once: what the
    local engine may decode for many ranks at once before running them
    (``run_on_rank.extra_kinds``)."""
    kinds: dict[str, None] = {}
    for name, options in requests:
        kinds.update(dict.fromkeys(CATALOGUE.get(name).extra_kinds(options)))
    return list(kinds)


run_on_rank.extra_kinds = _extra_kinds


def _read_extras(rt, kinds) -> None:
    from analysis.kineto.extras import ExtrasReader  # reads files: imported only when needed

    ExtrasReader()(rt, kinds)
