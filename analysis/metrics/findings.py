"""Findings: what the analyses say is wrong, in plain words, each with its number and evidence.

A *rule* is a small pure function over the results of other analyses (``results[name]`` is that
analysis's result, or the ``TraceAnalysisError`` it raised). It returns the findings it makes
(possibly none: the rule ran and found the job healthy on that count), or raises :class:`Silent`
with the reason it could not run (e.g. no shapes recorded, a CPU-only trace): nothing is said
without evidence. Thresholds are named constants here; ``docs/findings.md`` lists every rule.

Each finding: ``severity`` ("error" > "warning" > "info"), ``title``, ``detail`` (the number in a
sentence), ``metric``, ``value``, ``threshold`` (same unit as ``value``), ``evidence`` (which
table or figure, ranks, steps, kernels), ``suggestion`` (what usually fixes it). The table is
sorted by severity, then by how far the value is past its threshold. Rules that could not run are
listed in ``table.attrs["not_run"]`` (``{rule: reason}``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import pandas as pd

from analysis.errors import TraceAnalysisError

COLUMNS = ["severity", "title", "detail", "metric", "value", "threshold", "evidence", "suggestion"]
SEVERITY_ORDER = {"error": 0, "warning": 1, "info": 2}

# --------------------------------------------------------------------------------- thresholds
# GPU idle share of the analysed span (%) above which idle time is worth a finding, and the share
# of that idle time that must be host_wait for the CPU to be the cause. 20 %: below it a training
# job's idle time is usually the step boundary and collectives; 50 %: the largest cause.
IDLE_SHARE_PCT = 20.0
HOST_WAIT_SHARE_PCT = 50.0
# Exposed communication (communication time not overlapped by computation) as a share of the
# GPU span (%): above 10 % a tuned data-parallel job usually still has room.
EXPOSED_COMM_PCT = 10.0
# Host-to-device copies as a share of the GPU span (%), and any pageable copy at all.
HTOD_SHARE_PCT = 5.0
# Step time variation: coefficient of variation of step durations over the steps of a rank (%),
# and the slowest rank's step over the median rank's (%), above which steps are not steady.
STEP_CV_PCT = 10.0
RANK_SPREAD_PCT = 10.0
# Data loading: the median step spends more than this share (%) on the CPU before its first launch.
DATA_LOADING_GAP_PCT = 10.0


@dataclass
class Finding:
    severity: str
    title: str
    detail: str
    metric: str
    value: float
    threshold: float
    evidence: str
    suggestion: str


class Silent(Exception):
    """A rule that cannot run on these traces; the message says why."""


def _need(results: Mapping[str, Any], name: str) -> Any:
    """The result of analysis ``name``, or :class:`Silent` with why it is missing."""
    if name not in results:
        raise Silent(f"needs the {name} analysis")
    value = results[name]
    if isinstance(value, TraceAnalysisError):
        raise Silent(f"{name} could not run: {value}")
    return value


def _ranks(values: pd.Series, ranks: pd.Series, top: int = 5) -> str:
    order = np.argsort(-values.to_numpy(dtype=float), kind="stable")[:top]
    return ", ".join(f"rank {int(ranks.iloc[i])} ({values.iloc[i]:.1f} %)" for i in order)


# ------------------------------------------------------------------------------------- rules
def gpu_idle_host_bound(results: Mapping[str, Any]) -> list[Finding]:
    """GPU idle share high and mostly host_wait: the CPU does not launch work fast enough."""
    temporal = _need(results, "temporal_breakdown")
    idle_df, _ = _need(results, "idle_time_breakdown")
    idle = temporal["idle_time_pctg"].astype(float)
    if not idle.notna().any():
        raise Silent("no rank has GPU events")
    mean_idle = float(idle.mean())
    per_cat = idle_df.groupby("idle_category")["idle_time"].sum()
    total = float(per_cat.sum())
    host = 100.0 * float(per_cat.get("host_wait", 0.0)) / total if total > 0 else 0.0
    if mean_idle <= IDLE_SHARE_PCT or host <= HOST_WAIT_SHARE_PCT:
        return []
    evidence = [f"temporal_breakdown: idle {_ranks(idle, temporal['rank'])}",
                f"idle_time_breakdown: host_wait is {host:.0f} % of the idle time"]
    launches = results.get("kernel_launch_stats")
    if isinstance(launches, Mapping) and launches:
        frame = pd.concat(list(launches.values()), ignore_index=True)
        if len(frame):
            short = 100.0 * float((frame["gpu_duration"] < frame["cpu_duration"]).mean())
            evidence.append(
                f"kernel_launch_stats: median launch call {frame['cpu_duration'].median():.1f} µs "
                f"vs median kernel {frame['gpu_duration'].median():.1f} µs; {short:.0f} % of "
                "kernels run shorter than their own launch call")
    return [Finding(
        "warning", "The GPU waits for the CPU (launch- or CPU-bound)",
        f"The GPU is idle {mean_idle:.1f} % of the analysed time on average, and {host:.0f} % of "
        "that idle time is host_wait: the next kernel was launched only after the previous one "
        "had finished.",
        "gpu_idle_pct", round(mean_idle, 2), IDLE_SHARE_PCT, "; ".join(evidence),
        "Launch less often or earlier: CUDA graphs, torch.compile (fuses small kernels), larger "
        "batches, fewer small kernels; move CPU work (data loading, logging, .item() syncs) off "
        "the training loop's critical path.",
    )]


def exposed_communication(results: Mapping[str, Any]) -> list[Finding]:
    """Communication not hidden behind computation takes a large share of the GPU span."""
    temporal = _need(results, "temporal_breakdown")
    overlap = _need(results, "comm_comp_overlap")
    _, kernels = _need(results, "kernel_breakdown")
    comm = kernels[kernels["kernel_type"] == "COMMUNICATION"].groupby("rank")["sum (us)"].sum()
    if comm.empty or comm.sum() == 0:
        raise Silent("no communication kernels in the analysed window")
    table = temporal[["rank", "kernel_time(us)"]].merge(
        overlap[["rank", "comp_comm_overlap_pctg"]], on="rank").set_index("rank")
    table["comm_us"] = comm.reindex(table.index).fillna(0.0)
    hidden = table["comp_comm_overlap_pctg"].fillna(0.0) / 100.0
    table["exposed_pct"] = 100.0 * table["comm_us"] * (1 - hidden) / table["kernel_time(us)"]
    worst = float(table["exposed_pct"].max())
    if not worst > EXPOSED_COMM_PCT:
        return []
    by_name = (kernels[kernels["kernel_type"] == "COMMUNICATION"].groupby("name")["sum (us)"]
               .sum().nlargest(3))
    names = ", ".join(f"{n} ({t / 1000:.1f} ms, all ranks)" for n, t in by_name.items())
    return [Finding(
        "warning", "Communication is exposed (not overlapped with computation)",
        f"Up to {worst:.1f} % of a rank's GPU span is communication that no computation kernel "
        "overlaps.",
        "exposed_comm_pct", round(worst, 2), EXPOSED_COMM_PCT,
        f"comm_comp_overlap: {_ranks(table['exposed_pct'], table.index.to_series())} exposed; "
        f"kernel_breakdown: top communication kernels {names}",
        "Overlap collectives with compute: tune DDP bucket sizes (bucket_cap_mb), enable FSDP "
        "forward/backward prefetch, reorder so gradients are ready earlier; check the "
        "interconnect if the collectives themselves are slow.",
    )]


def host_to_device_copies(results: Mapping[str, Any]) -> list[Finding]:
    """Host-to-device copies take time on the GPU, or come from pageable memory."""
    temporal = _need(results, "temporal_breakdown")
    _, kernels = _need(results, "kernel_breakdown")
    names = kernels["name"].astype(str)
    htod = kernels[names.str.contains("HtoD", regex=False)]
    if htod.empty:
        return []
    span = float(temporal["kernel_time(us)"].sum())
    share = 100.0 * float(htod["sum (us)"].sum()) / span if span > 0 else 0.0
    pageable = htod[htod["name"].astype(str).str.contains("Pageable", regex=False)]
    out = []
    if not pageable.empty:
        out.append(Finding(
            "warning", "Host-to-device copies from pageable memory",
            f"HtoD copies read pageable host memory on {pageable['rank'].nunique()} rank(s), "
            f"{pageable['sum (us)'].sum() / 1000:.2f} ms of copies in all: a pageable copy is "
            "staged and synchronous, so it cannot overlap with compute.",
            "pageable_htod_ms", round(float(pageable["sum (us)"].sum()) / 1000, 3), 0.0,
            "kernel_breakdown: " + ", ".join(sorted(set(pageable["name"].astype(str)))),
            "Pin host memory (DataLoader(pin_memory=True), tensor.pin_memory()) and copy with "
            "non_blocking=True.",
        ))
    if share > HTOD_SHARE_PCT:
        out.append(Finding(
            "warning", "Host-to-device copies take a large share of GPU time",
            f"HtoD copies are {share:.1f} % of the summed GPU span.",
            "htod_share_pct", round(share, 2), HTOD_SHARE_PCT,
            f"kernel_breakdown: {htod['sum (us)'].sum() / 1000:.2f} ms of HtoD copies",
            "Prefetch the next batch on a side stream, keep data on the GPU between steps, "
            "avoid re-uploading constants every step.",
        ))
    return out


def step_time_variance(results: Mapping[str, Any]) -> list[Finding]:
    """Step durations vary across steps of a rank, or one rank's steps are slower than the rest."""
    steps = _need(results, "profiler_step_table")
    analysed = set(_need(results, "profiler_steps"))
    steps = steps[steps["step"].isin(analysed)]
    if steps["step"].nunique() < 2:
        raise Silent("needs at least two complete profiler steps")
    out = []
    per_rank = steps.groupby("rank")["duration(us)"]
    cv = 100.0 * per_rank.std(ddof=0) / per_rank.mean()
    if float(cv.max()) > STEP_CV_PCT:
        rank = int(cv.idxmax())
        durations = steps[steps["rank"] == rank].set_index("step")["duration(us)"] / 1000
        out.append(Finding(
            "warning", "Step times are not steady",
            f"Rank {rank}'s step durations vary by {cv.max():.1f} % (coefficient of variation): "
            + ", ".join(f"step {s}: {d:.1f} ms" for s, d in durations.items()),
            "step_time_cv_pct", round(float(cv.max()), 2), STEP_CV_PCT,
            "profiler_step_table: duration(us) per rank and step",
            "Look for periodic work (checkpointing, evaluation, logging, garbage collection) or "
            "data loading stalls in the slow steps; compare a slow and a fast step.",
        ))
    if steps["rank"].nunique() > 1:
        mean = per_rank.mean()
        spread = 100.0 * (mean.max() / mean.median() - 1.0)
        if spread > RANK_SPREAD_PCT:
            rank = int(mean.idxmax())
            out.append(Finding(
                "warning", f"Rank {rank} is slower than the others",
                f"Rank {rank}'s mean step takes {mean.max() / 1000:.1f} ms, {spread:.1f} % more "
                f"than the median rank's {mean.median() / 1000:.1f} ms.",
                "rank_step_spread_pct", round(float(spread), 2), RANK_SPREAD_PCT,
                "profiler_step_table: mean duration(us) per rank",
                "Compare that rank's temporal and kernel breakdowns with a typical rank's: more "
                "work (imbalanced data or sharding), a slower or throttled GPU, or a busy host.",
            ))
    return out


def data_loading_stall(results: Mapping[str, Any]) -> list[Finding]:
    """Steps start with a long CPU-only stretch before the first launch: input pipeline stalls."""
    gaps = _need(results, "step_start_gap")
    analysed = set(_need(results, "profiler_steps"))
    gaps = gaps[gaps["step"].isin(analysed)]
    if gaps.empty:
        raise Silent("needs complete profiler steps")
    per_rank = gaps.groupby("rank")["first_launch_pct"].median()
    worst = float(per_rank.max())
    if not worst > DATA_LOADING_GAP_PCT:
        return []
    rank = int(per_rank.idxmax())
    mine = gaps[gaps["rank"] == rank]
    loader = float(mine["dataloader_us"].sum())
    evidence = (f"step_start_gap: rank {rank}, first launch after "
                + ", ".join(f"{g / 1000:.1f} ms (step {s})"
                            for s, g in zip(mine["step"], mine["first_launch_us"], strict=True)))
    if loader > 0:
        evidence += f"; {loader / 1000:.1f} ms in DataLoader events"
    return [Finding(
        "warning", "Steps start with a data loading stall",
        f"On rank {rank} the median step runs {worst:.1f} % of its time on the CPU before it "
        "launches any GPU work.",
        "step_start_gap_pct", round(worst, 2), DATA_LOADING_GAP_PCT, evidence,
        "Load data ahead: DataLoader(num_workers>0, pin_memory=True, prefetch_factor, "
        "persistent_workers=True); move augmentation to the GPU; keep per-step CPU work "
        "(logging, metrics) after the launches.",
    )]


RULES: dict[str, Callable[[Mapping[str, Any]], list[Finding]]] = {
    "gpu_idle_host_bound": gpu_idle_host_bound,
    "exposed_communication": exposed_communication,
    "host_to_device_copies": host_to_device_copies,
    "step_time_variance": step_time_variance,
    "data_loading_stall": data_loading_stall,
}

# What the rules read, with the options they need (the registry runs these first).
REQUIRES: dict[str, dict[str, Any]] = {
    "temporal_breakdown": {},
    "idle_time_breakdown": {},
    "kernel_launch_stats": {},
    "comm_comp_overlap": {},
    "kernel_breakdown": {"num_kernels": 50},
    "profiler_step_table": {},
    "profiler_steps": {},
    "step_start_gap": {},
}


def findings(results: Mapping[str, Any]) -> pd.DataFrame:
    """Run every rule over ``results`` → the findings table (see the module doc)."""
    rows: list[Finding] = []
    not_run: dict[str, str] = {}
    for name, rule in RULES.items():
        try:
            rows += rule(results)
        except Silent as why:
            not_run[name] = str(why)
    table = FindingsTable([asdict(f) for f in rows], columns=COLUMNS)
    if len(table):
        excess = table["value"].astype(float) / table["threshold"].replace(0, np.nan).astype(float)
        table = table.assign(_s=table["severity"].map(SEVERITY_ORDER), _x=-excess.fillna(np.inf))
        table = table.sort_values(["_s", "_x"], kind="stable").drop(columns=["_s", "_x"])
    table = FindingsTable(table.reset_index(drop=True))
    table.attrs["not_run"] = not_run
    return table


_COLOURS = {"error": "#b00020", "warning": "#b35900", "info": "#0b5394"}


class FindingsTable(pd.DataFrame):
    """The findings as a DataFrame that a notebook shows as a ranked list (text escaped)."""

    _metadata = ["attrs"]

    @property
    def _constructor(self):
        return FindingsTable

    def _repr_html_(self) -> str:
        from html import escape

        items = []
        for r in self.itertuples():
            colour = _COLOURS.get(r.severity, "#444")
            items.append(
                f'<li style="margin-bottom:8px"><b style="color:{colour}">{escape(r.severity)}</b> '
                f"<b>{escape(r.title)}</b><br>{escape(r.detail)}<br>"
                f'<small>Evidence: {escape(r.evidence)}<br>Usually fixes it: '
                f"{escape(r.suggestion)}</small></li>"
            )
        if not items:
            items.append("<li>No finding: nothing the rules check for is wrong in these traces.</li>")
        not_run = self.attrs.get("not_run") or {}
        skipped = "".join(f"<li>{escape(k)}: {escape(v)}</li>" for k, v in not_run.items())
        extra = f"<details><summary>Checks that could not run ({len(not_run)})</summary><ul>{skipped}</ul></details>" if not_run else ""
        return f"<div><b>Findings</b><ol>{''.join(items)}</ol>{extra}</div>"


def headline_text(table: pd.DataFrame) -> list[str]:
    """One line per finding (severity, title, number), for terminals."""
    return [f"[{r.severity}] {r.title}: {r.detail}" for r in table.itertuples()]
