"""The individual checks of ``analysis.metrics.health.trace_health``: small pure functions.

Each per-rank check takes a ``RankTrace`` (whole, all events) and returns a list of findings
``(severity, check, message, evidence)``; the cross-rank checks take ``{rank: RankHealth}``.
Times in messages and evidence are µs unless they say otherwise.
"""

from __future__ import annotations

import re
from collections import Counter

import numpy as np
import pandas as pd

from analysis.kineto.events import kernel_like_mask, name_mask, runtime_mask
from analysis.kineto.model import RankTrace
from analysis.metrics.gpu_time.kernel_launch_stats import (
    DEFAULT_LAUNCH_APIS,
    PAIRED_ONLY_LAUNCH_NAMES,
)

# Share of GPU events (or launches) without a partner above which the links are suspect: a few at
# the window's edges are normal (launched before the profiler started, or still queued at its end).
UNLINKED_WARNING_SHARE = 0.05
# The GPU falls silent this share of the trace's span before the CPU's last launch: dropped events.
SILENT_SHARE = 0.05
SILENT_MIN_LAUNCHES = 10
# A last ProfilerStep shorter than this share of the median step is cut short.
TRUNCATED_STEP_SHARE = 0.5
# Overlaps on one stream shorter than this (ns) are Kineto's ns rounding (pytorch/pytorch#122425).
ROUNDING_OVERLAP_NS = 1000
_RECORD_COUNTS = re.compile(r"([A-Za-z][A-Za-z \-]*?)\s*=\s*(\d+)")
# Kineto drops these on purpose: blocklisted runtime calls, activities outside the capture window
_RECORD_COUNTS_OK = {"Blocklisted runtime", "Out-of-range"}


def names_of(ev: pd.DataFrame, mask: np.ndarray) -> np.ndarray:
    """The names (str) of the rows in ``mask``, without converting the whole column."""
    cat = ev["name"].cat
    categories = np.append(np.asarray(cat.categories, dtype=object).astype(str), "")
    return categories[cat.codes.to_numpy()[mask]]


def _us(ns) -> str:
    return f"{float(ns) / 1000.0:,.1f} µs"


def _top(names, weights=None, n: int = 3) -> str:
    counts = Counter(names) if weights is None else Counter(dict(weights))
    top = ", ".join(f"{name} ×{count}" for name, count in counts.most_common(n))
    more = len(counts) - n
    return top + (f" (+{more} more names)" if more > 0 else "")


def rank_origin(rt: RankTrace) -> list[tuple]:
    origin = rt.meta.rank_origin
    if origin == "default":
        return [("warning", "rank_origin", "the trace does not say its rank (no distributedInfo, "
                 "no rank in the file name); rank 0 was assumed", rt.meta.source)]
    if origin == "file name":
        return [("info", "rank_origin", "rank taken from the file name (no distributedInfo.rank)",
                 rt.meta.source)]
    if origin == "unknown":
        return [("info", "rank_origin", "the trace does not say its rank", rt.meta.source)]
    return []


def kineto_warnings(rt: RankTrace) -> list[tuple]:
    """Kineto's own log lines (top-level ``WARNING``/``ERROR``) and non-zero record counts."""
    out = []
    other = rt.meta.other
    for level in ("WARNING", "ERROR"):
        lines = other.get(level) or []
        lines = [lines] if isinstance(lines, str) else [str(x) for x in lines]
        if lines:
            out.append(("warning", "kineto_warnings",
                        f"the profiler logged {len(lines)} {level} line(s) while recording",
                        " | ".join(line[:160] for line in lines[:3])))
    for line in [str(x) for x in (other.get("INFO") or [])]:
        if "Record counts" not in line:
            continue
        bad = [(k.strip(), int(v)) for k, v in _RECORD_COUNTS.findall(line.split("Record counts")[1])
               if int(v) > 0 and k.strip() not in _RECORD_COUNTS_OK]
        if bad:
            out.append(("warning", "kineto_warnings",
                        "Kineto dropped or could not place some records (out of range, invalid "
                        "correlations, out of order, or CUPTI stopped early)",
                        ", ".join(f"{k} = {v}" for k, v in bad)))
    return out


def negative_duration(rt: RankTrace) -> list[tuple]:
    # The parser sets a negative dur to 0 and counts it in meta.negative_durations, by name.
    counts = Counter(rt.meta.negative_durations)
    bad = rt.events["dur"].to_numpy() < 0  # a model built otherwise (tests, other loaders)
    counts.update(names_of(rt.events, bad).tolist())
    if not counts:
        return []
    return [("error", "negative_duration",
             f"{sum(counts.values())} events end before they start (their dur is read as 0)",
             _top(None, weights=counts))]


def zero_duration(rt: RankTrace) -> list[tuple]:
    ev = rt.events
    zero = kernel_like_mask(ev) & (ev["dur"].to_numpy() == 0)
    if not zero.any():
        return []
    return [("info", "zero_duration", f"{int(zero.sum())} GPU events last 0 ns (HTA counts them "
             "as 1 µs in its memory bandwidth)", _top(names_of(ev, zero)))]


def timestamp_resolution(rt: RankTrace) -> list[tuple]:
    if not rt.meta.float_timestamps:
        return []
    return [("info", "timestamp_resolution", "timestamps carry nanosecond fractions: the exact "
             "preset keeps them, HTA rounds every event to whole µs (start up, end down)",
             f"displayTimeUnit={rt.meta.other.get('displayTimeUnit', 'absent')}")]


def graph_capture(rt: RankTrace) -> list[tuple]:
    """CUDA/HIP graph launches: without the capture traces their kernels have no operator; with
    them (``analysis.kineto.cuda_graphs``), the launches no capture matched."""
    ev = rt.events
    launch = runtime_mask(ev) & name_mask(ev, lambda s: s.str.endswith("GraphLaunch"))
    if not launch.any():
        return []
    merged = rt.meta.other.get("graphCapture")
    if isinstance(merged, dict):
        if not merged.get("unmatched_launches"):
            skipped = merged.get("capture_launches_skipped") or 0
            return [("info", "graph_capture",
                     f"{merged.get('matched_launches')} graph launches attributed to the "
                     "operators of their capture traces"
                     + (f" ({skipped} captured launch(es) with no kernel in the replay skipped)"
                        if skipped else ""),
                     f"{merged.get('kernels_attributed')} kernels"
                     + ("; " + "; ".join(merged.get("skipped", [])[:3]) if skipped else ""))]
        return [("warning", "graph_capture",
                 f"{merged['unmatched_launches']} of {merged.get('graph_launches')} graph "
                 "launches match no capture trace (kernel count or names differ): their "
                 "kernels stay under the launch, as 'CUDA graph (<launch call>)'",
                 "; ".join(merged.get("unmatched", [])[:3]))]
    corr = set(ev["correlation"].to_numpy()[launch].tolist())
    gpu = kernel_like_mask(ev) & ev["correlation"].isin(corr).to_numpy()
    return [("warning", "graph_capture",
             f"{int(launch.sum())} graph launches and their kernels have no operator or shape: "
             "record the graph capture too (vLLM and SGLang write it to a capture_traces/ "
             "folder beside the replay trace when profiling with graph capture tracing on) and "
             "keep that folder beside the trace, where it is read automatically",
             f"{int(gpu.sum())} kernels, {_us(int(ev['dur'].to_numpy()[gpu].sum()))} of GPU time")]


def truncated_last_step(rt: RankTrace) -> list[tuple]:
    steps = rt.profiler_steps()
    if len(steps) < 3:
        return []
    dur = steps["dur"].to_numpy()
    median = float(np.median(dur[:-1]))
    if median <= 0 or dur[-1] >= TRUNCATED_STEP_SHARE * median:
        return []
    return [("info", "truncated_last_step",
             f"the last profiler step ({steps['name'].iloc[-1]}) is cut short; it is left out of "
             "the analyses unless include_last_profiler_step=True",
             f"{_us(dur[-1])} vs a median of {_us(median)}")]


def stream_overlap(rt: RankTrace) -> list[tuple]:
    """Events on one stream (of one device) that start before an earlier one ended."""
    ev = rt.events
    mask = kernel_like_mask(ev)
    frame = pd.DataFrame({"pid": ev["pid"].to_numpy()[mask], "stream": ev["stream"].to_numpy()[mask],
                          "ts": ev["ts"].to_numpy()[mask],
                          "end": (ev["ts"].to_numpy() + ev["dur"].to_numpy())[mask]})
    frame = frame.sort_values(["pid", "stream", "ts"], kind="stable")
    prev_end = frame.groupby(["pid", "stream"], sort=False)["end"].cummax()
    prev_end = prev_end.groupby([frame["pid"], frame["stream"]], sort=False).shift(1)
    overlap = (prev_end - frame["ts"]).fillna(0).to_numpy()
    big = overlap >= ROUNDING_OVERLAP_NS
    small = (overlap > 0) & ~big
    out = []
    if big.any():
        streams = sorted(set(frame["stream"].to_numpy()[big].tolist()))
        out.append(("warning", "stream_overlap", f"{int(big.sum())} GPU events start before the "
                    "previous event on their stream ended (a stream runs one event at a time): "
                    "streams mislabelled or clocks adjusted", f"streams {streams}, up to "
                    f"{_us(overlap.max())}"))
    if small.any():
        out.append(("info", "stream_overlap", f"{int(small.sum())} GPU events overlap the previous "
                    "one on their stream by less than 1 µs (Kineto's ns rounding)",
                    f"up to {int(overlap[small].max())} ns"))
    return out


def correlation_links(rt: RankTrace) -> list[tuple]:
    """GPU events without a launching call, and launch calls without a GPU event."""
    ev = rt.events
    corr = ev["correlation"].to_numpy()
    gpu = kernel_like_mask(ev) & (corr >= 0)
    cpu = runtime_mask(ev) & (corr >= 0)
    launches = cpu & ev["name"].isin(DEFAULT_LAUNCH_APIS.names(True)).to_numpy()
    orphans = gpu & ~np.isin(corr, corr[cpu])
    # correlation ids grow with each call: ids below the first CPU call's were launched before the
    # profiler started (the queue it found), which is normal; the others lost their CPU call
    early = orphans & (corr < corr[cpu].min()) if cpu.any() else np.zeros_like(orphans)
    idle_launches = (launches & ~np.isin(corr, corr[gpu])
                     & ~ev["name"].isin(PAIRED_ONLY_LAUNCH_NAMES).to_numpy())
    # other profilers' files: the analysed window counts every GPU event (analysis.kineto.window)
    kineto = rt.meta.source_format == "kineto"
    fate = ("launch statistics and the analysed window leave them out" if kineto
            else "launch statistics leave them out; the analysed window counts them")
    out = [
        _unlinked(ev, orphans & ~early, gpu, "kernels_without_launch", "GPU events", "have no "
                  f"launching runtime call in the trace (CPU events dropped?): {fate}"),
        ("info", "kernels_without_launch", f"{int(early.sum())} GPU events were launched before "
         "the profiler started (queued work it found); the analysed window "
         + ("leaves them out" if kineto else "counts them"),
         _top(names_of(ev, early))) if early.any() else None,
        _unlinked(ev, idle_launches, launches, "launches_without_kernels", "launch calls", "have "
                  "no GPU event (still queued when the profiler stopped, or GPU events dropped)"),
    ]
    return [f for f in out if f is not None]


def _unlinked(ev, unlinked, among, check: str, what: str, says: str) -> tuple | None:
    """A finding for the ``unlinked`` rows out of ``among``: a warning above the share."""
    if not unlinked.any():
        return None
    share = unlinked.sum() / among.sum()
    return ("warning" if share > UNLINKED_WARNING_SHARE else "info", check,
            f"{int(unlinked.sum())} {what} ({100 * share:.1f} %) {says}", _top(names_of(ev, unlinked)))


def missing_flows(rt: RankTrace) -> list[tuple]:
    """No flow events at all, or launches of GPU work that have no flow arrow (Kineto traces only:
    other profilers' files have no flow events to miss)."""
    if rt.meta.source_format != "kineto":
        return []
    if not len(rt.flows):
        return [("info", "missing_flows", "no flow events (ac2g): trace viewers cannot draw the "
                 "CPU→GPU launch arrows; analyses use correlation ids instead", "")]
    ev = rt.events
    corr = ev["correlation"].to_numpy()
    launches = (runtime_mask(ev) & ev["name"].isin(DEFAULT_LAUNCH_APIS.names(True)).to_numpy()
                & np.isin(corr, corr[kernel_like_mask(ev)]))
    starts = rt.flows.loc[rt.flows["ph"] == "s", "id"].to_numpy()
    without = launches & ~np.isin(corr, starts)
    if not without.any() or without.sum() <= UNLINKED_WARNING_SHARE * launches.sum():
        return []
    return [("info", "missing_flows", f"{int(without.sum())} of {int(launches.sum())} launches "
             "have no flow event: the trace viewer shows no arrow to their GPU work",
             _top(names_of(ev, without)))]


def gpu_stops_early(rt: RankTrace) -> list[tuple]:
    """A stream falls silent while the thread(s) that launch onto it go on launching calls that have
    no GPU event: GPU events were dropped (a full activity buffer)."""
    ev = rt.events
    ts, tid = ev["ts"].to_numpy(), ev["tid"].to_numpy()
    corr = ev["correlation"].to_numpy()
    gpu = kernel_like_mask(ev) & (corr >= 0)
    launches = runtime_mask(ev) & ev["name"].isin(DEFAULT_LAUNCH_APIS.names(True)).to_numpy()
    if not gpu.any() or not launches.any():
        return []
    launched = np.isin(corr, corr[gpu])
    lost = launches & ~launched
    span = int(ts.max() - ts.min()) or 1
    gpu_events = pd.DataFrame({"pid": ev["pid"].to_numpy()[gpu], "stream": ev["stream"].to_numpy()[gpu],
                               "corr": corr[gpu], "end": (ts + ev["dur"].to_numpy())[gpu]})
    launch_tid = pd.Series(tid[launches & launched], index=corr[launches & launched])
    launch_tid = launch_tid[~launch_tid.index.duplicated()]
    silent_streams = []
    for (_, stream), df in gpu_events.groupby(["pid", "stream"], sort=True):
        end = int(df["end"].max())
        threads = launch_tid.reindex(df["corr"].to_numpy()).dropna().unique()
        late = lost & np.isin(tid, threads) & (ts > end)
        if late.sum() < SILENT_MIN_LAUNCHES:
            continue
        silent = int(ts[late].max()) - end
        if silent >= SILENT_SHARE * span:
            silent_streams.append((int(stream), silent, int(late.sum())))
    if not silent_streams:
        return []
    return [("warning", "gpu_stops_early", f"{len(silent_streams)} stream(s) fall silent while "
             "their launching threads go on launching work that never shows up on the GPU: GPU "
             "events were dropped (full activity buffer?); the analyses miss that work",
             "; ".join(f"stream {s}: silent for the last {_us(t)} ({100 * t / span:.0f} % of the "
                       f"span), {n} launches without GPU event" for s, t, n in silent_streams))]


def classification(ev, kinds, gpu, pattern_name: str, comm_like) -> list[tuple]:
    """Communication-looking kernels not classified COMMUNICATION; kernels classified as OTHER."""
    kernels = gpu & ev["cat"].isin(("kernel",)).to_numpy()
    dur = ev["dur"].to_numpy()
    out = []
    # each distinct name once (names are categorical in the model)
    cat = ev["name"].cat
    per_name = np.array([bool(comm_like.search(str(c))) for c in cat.categories] + [False])
    looks = per_name[cat.codes.to_numpy()]
    missed = kernels & looks & (kinds != "COMMUNICATION")
    if missed.any():
        out.append(("warning", "unclassified_communication",
                    f"{int(missed.sum())} kernels look like communication but the '{pattern_name}' "
                    "kernel patterns do not classify them as COMMUNICATION: overlap and the kernel "
                    "breakdown count them as computation (extend the patterns)",
                    f"{_top(names_of(ev, missed))}; {_us(dur[missed].sum())} in all"))
    other = kernels & (kinds == "OTHER")
    if other.any():
        out.append(("info", "unclassified_kernels", f"{int(other.sum())} kernels are classified "
                    f"as OTHER by the '{pattern_name}' patterns", _top(names_of(ev, other))))
    return out


# --- across ranks ------------------------------------------------------------------------------


def world_size(parts) -> list[tuple]:
    sizes = {p.world_size for p in parts.values() if p.world_size is not None}
    out = []
    if len(sizes) > 1:
        out.append(("error", "world_size", "the ranks disagree on the world size: traces from "
                    "different jobs?", ", ".join(f"rank {r}: {p.world_size}"
                                                 for r, p in parts.items())))
    elif sizes:
        size = sizes.pop()
        beyond = [r for r in parts if r >= size]
        if beyond or len(parts) > size:
            out.append(("error", "world_size", f"ranks {beyond or list(parts)} do not fit a world "
                        f"of size {size}", f"{len(parts)} ranks loaded"))
    return out


def steps_mismatch(parts) -> list[tuple]:
    with_steps = {r: p.steps for r, p in parts.items() if p.steps}
    if not with_steps:
        return []
    common = Counter(with_steps.values()).most_common(1)[0][0]
    odd = {r: s for r, s in with_steps.items() if s != common}
    none = [r for r, p in parts.items() if not p.steps]
    out = []
    if odd:
        out.append(("warning", "steps_mismatch", "ranks recorded different profiler steps: "
                    "per-step comparisons across ranks do not line up",
                    "; ".join(f"rank {r}: steps {_span(s)}" for r, s in odd.items())
                    + f"; most ranks: {_span(common)}"))
    if none:
        out.append(("warning", "steps_mismatch", f"ranks {none} have no ProfilerStep while "
                    "others do: they are analysed whole", ""))
    return out


def _span(steps) -> str:
    return f"{steps[0]}–{steps[-1]} ({len(steps)})" if steps else "none"


def clock_skew(parts) -> list[tuple]:
    """A collective kernel that one rank finished before another started violates causality."""
    colls = [p.collectives for p in parts.values()]
    if len(colls) < 2 or not all(colls):
        return []
    ranks = list(parts)
    worst = (0, "", -1, -1, -1)
    for name in set.intersection(*(set(c) for c in colls)):
        counts = {len(c[name][0]) for c in colls}
        if len(counts) != 1:
            continue
        starts = np.stack([c[name][0] for c in colls])
        ends = np.stack([c[name][1] for c in colls])
        gap = starts.max(axis=0) - ends.min(axis=0)  # > 0: someone ended before another started
        k = int(np.argmax(gap))
        if gap[k] > worst[0]:
            worst = (int(gap[k]), name, k, ranks[int(np.argmin(ends[:, k]))],
                     ranks[int(np.argmax(starts[:, k]))])
    if worst[0] <= 0:
        return []
    gap, name, k, early, late = worst
    return [("warning", "clock_skew", f"rank {early} finished collective {name} #{k} "
             f"{_us(gap)} before rank {late} started it: their clocks disagree by at least that "
             "much (cross-rank timelines are shifted)", f"{_us(gap)} on {name[:80]} #{k}")]
