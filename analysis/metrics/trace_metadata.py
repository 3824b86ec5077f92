"""The headline numbers per rank, assembled from the analyses' results (no metric is computed here)."""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd

METADATA_COLUMNS = ["rank", "file", "gpu", "world_size", "events", "steps", "duration_ms"]


def rank_metadata(rt) -> dict:
    """One rank's source file, GPU, world size, event count, profiler steps and duration (ms)."""
    ev = rt.events
    steps = rt.profiler_steps()
    start = int(ev["ts"].min()) if len(ev) else None
    end = int((ev["ts"] + ev["dur"]).max()) if len(ev) else None
    return {
        "rank": rt.rank,
        "file": rt.meta.source,
        "gpu": ", ".join(sorted(set(rt.meta.gpu_names))) or "-",
        "world_size": rt.meta.world_size,
        "events": len(ev),
        "steps": ", ".join(str(s) for s in steps["step"]) if len(steps) else "-",
        "duration_ms": None if start is None else round((end - start) / 1e6, 3),
    }


def combine_metadata(rows: Mapping[int, dict]) -> pd.DataFrame:
    """Per-rank metadata rows → one table, ranks in the order given."""
    return pd.DataFrame(list(rows.values()), columns=METADATA_COLUMNS)


def headline_table(temporal: pd.DataFrame, overlap: pd.DataFrame, metadata: pd.DataFrame) -> pd.DataFrame:
    """Per rank: GPU idle / compute / non-compute shares (%), comm/comp overlap (%), kernel time (ms)."""
    table = temporal[
        ["rank", "kernel_time(us)", "idle_time_pctg", "compute_time_pctg", "non_compute_time_pctg"]
    ].merge(overlap[["rank", "comp_comm_overlap_pctg"]], on="rank", how="outer")
    table = metadata[["rank", "gpu", "events"]].merge(table, on="rank", how="left")
    table["kernel_time(us)"] = table["kernel_time(us)"] / 1000.0
    return table.rename(
        columns={
            "kernel_time(us)": "kernel_time_ms",
            "idle_time_pctg": "idle_%",
            "compute_time_pctg": "compute_%",
            "non_compute_time_pctg": "non_compute_%",
            "comp_comm_overlap_pctg": "comm_overlap_%",
        }
    ).round(2)


def rank_summary(ta) -> pd.DataFrame:
    """The headline table of a ``TraceAnalysis`` (figures off)."""
    return headline_table(
        ta.get_temporal_breakdown(visualize=False),
        ta.get_comm_comp_overlap(visualize=False),
        ta.get_trace_metadata(),
    )
