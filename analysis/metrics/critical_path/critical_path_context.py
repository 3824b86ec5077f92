"""What the critical-path graph needs from a whole rank: links between CPU calls and GPU events,
which calls launch or block, queue lengths, and the ``cudaEventRecord`` / ``cudaStreamWaitEvent``
matches. Computed once per rank for all of its windows (HTA computes queue lengths and event-record
matches on the whole trace too, not on the window). All times in ns.

- **Correlation** (HTA's ``index_correlation``): a CPU call and the GPU events with its correlation
  id; when several match, HTA keeps the last one (so only one kernel of a ``cudaGraphLaunch``).
- **Launch calls**: HTA's list, or (default) also the ``kernel_launch_stats`` default preset
  (driver API, cooperative, graph and ROCm launches).
- **Queue length** per stream (HTA's ``TraceCounters``): +1 at a launch call per GPU event it
  launched, -1 when a GPU event starts. A GPU event gets a launch-delay edge when the queue was
  empty just before its launch and it is the first its call ran on the stream (HTA: and nothing else
  was queued by the time it started).
- **Event records**: a ``cudaEventRecord`` records the last GPU event launched before it on its
  stream; ``cudaStreamWaitEvent`` makes the first GPU event launched after it (same thread, waiting
  stream) wait for it.
- **Inferred stream waits** (default only, traces without ``Stream Wait Event`` GPU events, i.e.
  Kineto before it recorded them): a GPU event held back on the GPU (its stream free and its
  launch call returned more than ``STREAM_WAIT_TOLERANCE_NS`` before it started) that started
  within that tolerance of the end of the last GPU event to end on another stream of its GPU, with
  a ``cudaStreamWaitEvent`` called in the trace between the two launches, waited for that event:
  the compute stream's wait on a collective (PyTorch's ``work.wait()``), or a communication stream's
  wait for the compute that produced its buffer.
- **Inferred waits** (default only): a blocking call with no CUDA sync event (ROCm traces have none;
  a synchronous memcpy) waited for the GPU events it launched itself, or else for each stream's last
  GPU event that ended while it ran.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from analysis.kineto.events import DEVICE_SYNC_NAMES, RUNTIME_CATS, gpu_mask
from analysis.kineto.model import RankTrace
from analysis.metrics.gpu_time.kernel_launch_stats import DEFAULT_LAUNCH_APIS
from analysis.metrics.timebase import Rounding, event_bounds_ns

# hta/common/trace_symbol_table.py get_runtime_launch_events_query, HTA 0.5.0
HTA_LAUNCH_CALLS = (
    "cudaLaunchKernel", "cudaLaunchKernelExC", "cuLaunchKernel", "cudaMemcpyAsync",
    "cudaMemsetAsync", "runFunction - job_prep_and_submit_for_execution", "hipLaunchKernel",
    "hipExtModuleLaunchKernel", "hipMemcpyAsync", "hipMemsetAsync", "hipMemcpyWithStream",
)  # fmt: skip
DEFAULT_LAUNCH_CALLS = tuple(
    dict.fromkeys(HTA_LAUNCH_CALLS + DEFAULT_LAUNCH_APIS.kernel + DEFAULT_LAUNCH_APIS.memory)
)
# CPGraph.BLOCKING_SYNC_CALLS, HTA 0.5.0
HTA_BLOCKING_CALLS = (
    "cudaDeviceSynchronize", "cudaStreamSynchronize", "cudaEventQuery", "cudaEventSynchronize",
    "cudaMemcpy", "cudaMemcpyAsync",
)  # fmt: skip
DEFAULT_BLOCKING_CALLS = HTA_BLOCKING_CALLS + (
    "cuCtxSynchronize", "cuStreamSynchronize", "cuEventSynchronize", "cuMemcpy",
    "hipDeviceSynchronize", "hipStreamSynchronize", "hipEventQuery", "hipEventSynchronize",
    "hipMemcpy", "hipMemcpyAsync", "hipMemcpyWithStream",
    "urQueueFinish", "urEventWait",  # Intel GPUs: torch.xpu.synchronize(), an event's wait
)  # fmt: skip
CPU_NODE_CATS = ("cpu_op", *RUNTIME_CATS)
# a kernel held back by a collective starts this soon after it ends (1-7 µs on the V100 and A100
# NCCL traces of HTA's test data)
STREAM_WAIT_TOLERANCE_NS = 20_000

def _last_by_key(keys: np.ndarray, values: np.ndarray) -> pd.Series:
    """{key: the last value (in order) with that key}."""
    s = pd.Series(values, index=keys)
    return s[~s.index.duplicated(keep="last")]


@dataclass
class RankContext:
    """What the graph needs from a whole rank, computed once for all of its windows (HTA also
    computes queue lengths and event-record matches on the whole trace, not the window)."""

    ev: pd.DataFrame
    hta_compat: bool
    start: np.ndarray  # ns
    end: np.ndarray
    stream: np.ndarray
    corr: np.ndarray
    is_cpu_node_cat: np.ndarray
    is_swe: np.ndarray  # "Stream Wait Event"
    sync_kind: np.ndarray  # per row: 0, or 1..4 = Stream Wait Event, Event Sync, Stream/Context Sync
    on_device_sync: np.ndarray  # stream != -1 or a device-level sync name
    blocking: np.ndarray
    gpu_to_cpu: np.ndarray
    cpu_to_gpu: np.ndarray
    launcher: np.ndarray  # per GPU event: the launch call linked by a launch edge, -1 if none
    launch_ok: np.ndarray  # per GPU event: launched onto an idle stream (see _launch_info)
    record_src: dict[int, int]
    wait_dest: dict[int, int]
    wait_record: np.ndarray
    # default analysis: blocking calls without a CUDA sync event (ROCm, cudaMemcpy) -> the GPU
    # events they waited for (see _inferred_waits)
    inferred_waits: dict[int, list[int]] = field(default_factory=dict)
    # default analysis, traces without Stream Wait Event GPU events: {GPU event: the communication
    # kernel on another stream it waited for} (see _inferred_stream_waits)
    inferred_stream_waits: dict[int, int] = field(default_factory=dict)
    # default analysis: per GPU event, the GPU event before it on its stream (the whole trace)
    prev_on_stream: np.ndarray | None = None


_SYNC_KINDS = {"Stream Wait Event": 1, "Event Sync": 2, "Stream Sync": 3, "Context Sync": 4}


def name_mask(names: pd.Series, wanted) -> np.ndarray:
    """``names.isin(wanted)`` through the categories (names are categorical in the model)."""
    if isinstance(names.dtype, pd.CategoricalDtype):
        cats = np.asarray(names.cat.categories.astype(str))
        hit = np.append(np.isin(cats, list(wanted)), False)
        return hit[names.cat.codes.to_numpy()]
    return names.astype(str).isin(list(wanted)).to_numpy()


def rank_context(rt: RankTrace, *, hta_compat: bool, rounding: Rounding = "exact") -> RankContext:
    """The rank-wide arrays behind every window's graph."""
    ev = rt.events
    n = len(ev)
    start, end = event_bounds_ns(
        ev["ts"].to_numpy(), ev["dur"].to_numpy(), rounding,
        float_timestamps=rt.meta.float_timestamps,
    )  # fmt: skip
    stream = ev["stream"].to_numpy()
    corr = ev["correlation"].to_numpy()
    names = ev["name"]
    pos = np.arange(n)
    # correlation: CPU call <-> GPU event (HTA's index_correlation; the last match wins)
    is_gpu = gpu_mask(ev) if n else np.zeros(0, bool)
    has_corr = corr != -1
    cpu_c, gpu_c = pos[~is_gpu & has_corr], pos[is_gpu & has_corr]
    gpu_to_cpu = np.full(n, -1)
    cpu_to_gpu = np.full(n, -1)
    if len(cpu_c) and len(gpu_c):
        m = _last_by_key(corr[cpu_c], cpu_c)
        gpu_to_cpu[gpu_c] = m.reindex(corr[gpu_c]).fillna(-1).to_numpy(np.int64)
        m = _last_by_key(corr[gpu_c], gpu_c)
        cpu_to_gpu[cpu_c] = m.reindex(corr[cpu_c]).fillna(-1).to_numpy(np.int64)
    sync_kind = np.zeros(n, np.int8)
    for kind_name, code in _SYNC_KINDS.items():
        sync_kind[name_mask(names, [kind_name])] = code
    sync_kind[~name_mask(ev["cat"], ["cuda_sync"])] = 0
    launch_calls = HTA_LAUNCH_CALLS if hta_compat else DEFAULT_LAUNCH_CALLS
    is_launch = ~is_gpu & name_mask(names, launch_calls) & (cpu_to_gpu >= 0)
    ctx = RankContext(
        ev=ev, hta_compat=hta_compat, start=start, end=end, stream=stream, corr=corr,
        is_cpu_node_cat=name_mask(ev["cat"], CPU_NODE_CATS),
        is_swe=name_mask(names, ["Stream Wait Event"]), sync_kind=sync_kind,
        on_device_sync=(stream != -1) | name_mask(names, DEVICE_SYNC_NAMES),
        blocking=name_mask(names, HTA_BLOCKING_CALLS if hta_compat else DEFAULT_BLOCKING_CALLS),
        gpu_to_cpu=gpu_to_cpu, cpu_to_gpu=cpu_to_gpu, launcher=np.full(n, -1),
        launch_ok=np.zeros(n, bool), record_src={}, wait_dest={},
        wait_record=ev["wait_on_record"].to_numpy() if "wait_on_record" in ev else np.full(n, -1),
    )  # fmt: skip
    if n:
        _launch_info(ctx, is_launch, names)
    if n and not hta_compat:
        _inferred_waits(ctx)
        if not ctx.is_swe.any():
            ctx.inferred_stream_waits = _inferred_stream_waits(ctx)
        ctx.prev_on_stream = _previous_on_stream(ctx)
    return ctx


def _previous_on_stream(ctx: RankContext) -> np.ndarray:
    """Per row: the GPU event (not a sync event) that started last before it on its GPU and
    stream, -1 for none or for rows not on a stream."""
    out = np.full(len(ctx.ev), -1)
    work = np.flatnonzero((ctx.stream != -1) & (ctx.corr != -1)
                          & ~name_mask(ctx.ev["cat"], ["cuda_sync"]))  # fmt: skip
    if len(work) < 2:
        return out
    gpu = ctx.ev["pid"].to_numpy()
    w = work[np.lexsort((ctx.start[work], ctx.stream[work], gpu[work]))]
    same = (gpu[w][1:] == gpu[w][:-1]) & (ctx.stream[w][1:] == ctx.stream[w][:-1])
    out[w[1:][same]] = w[:-1][same]
    return out


def _inferred_stream_waits(ctx: RankContext) -> dict[int, int]:
    """{GPU event: the GPU event on another stream it waited for} for a trace that does not record
    stream waits on the GPU (see the module docstring): the event was held back (its stream free
    and its launch call returned) by more than ``STREAM_WAIT_TOLERANCE_NS``, and started within that
    tolerance of the other event's end, which is the last GPU end before it on its GPU; and a
    ``cudaStreamWaitEvent`` was called between the other event's launch and its own."""
    ev, start, end, stream = ctx.ev, ctx.start, ctx.end, ctx.stream
    is_sync_event = name_mask(ev["cat"], ["cuda_sync"])
    work = np.flatnonzero((stream != -1) & (ctx.corr != -1) & ~is_sync_event)
    rt = ctx.gpu_to_cpu[work]
    work, rt = work[rt >= 0], rt[rt >= 0]  # launched by a call in the trace
    if len(work) == 0:
        return {}
    gpu = ev["pid"].to_numpy()
    # per GPU event: when it could have started (its stream free, its launch call returned)
    order = np.lexsort((start[work], stream[work], gpu[work]))
    w, r = work[order], rt[order]
    first = np.append(True, (gpu[w][1:] != gpu[w][:-1]) | (stream[w][1:] != stream[w][:-1]))
    lane = np.cumsum(first)
    busy_until = pd.Series(end[w]).groupby(lane).cummax().to_numpy()
    prev_end = np.where(first, np.iinfo(np.int64).min, np.roll(busy_until, 1))
    ready = np.maximum(prev_end, end[r])
    held = np.flatnonzero(start[w] - ready > STREAM_WAIT_TOLERANCE_NS)
    if len(held) == 0:
        return {}
    # the GPU event that ended last, on the same GPU, by each held event's start
    by_end = w[np.lexsort((end[w], gpu[w]))]
    out: dict[int, int] = {}
    for i in held.tolist():
        k = int(w[i])
        lo = int(np.searchsorted(gpu[by_end], gpu[k], side="left"))
        hi = int(np.searchsorted(gpu[by_end], gpu[k], side="right"))
        j = lo + int(np.searchsorted(end[by_end[lo:hi]], start[k], side="right")) - 1
        if j < lo:
            continue
        src = int(by_end[j])
        if stream[src] == stream[k] or end[src] <= ready[i]:
            continue
        if start[k] - end[src] <= STREAM_WAIT_TOLERANCE_NS:
            out[k] = src
    if not out:
        return out
    # a cudaStreamWaitEvent of the process between the kernel's launch and the waiting launch
    swe = np.flatnonzero(name_mask(ev["name"], ["cudaStreamWaitEvent", "hipStreamWaitEvent"]))
    swe_ts = np.sort(start[swe])
    keep = {}
    for k, src in out.items():
        a, b = start[ctx.gpu_to_cpu[src]], start[ctx.gpu_to_cpu[k]]
        if np.searchsorted(swe_ts, b, side="right") > np.searchsorted(swe_ts, a, side="left"):
            keep[k] = src
    return keep


def _inferred_waits(ctx: RankContext) -> None:
    """Blocking calls that have no CUDA sync event (ROCm traces have none; a synchronous memcpy
    neither): the call waited for the GPU events it launched itself, or else for the last GPU
    event of each stream that ended while it ran. Those get a sync edge into the call's end; a
    blocking call that waited for nothing is not blocking (its time is the CPU's)."""
    ev, start, end, stream = ctx.ev, ctx.start, ctx.end, ctx.stream
    is_sync_event = name_mask(ev["cat"], ["cuda_sync"]) | (ctx.sync_kind > 0)
    partner = ctx.cpu_to_gpu
    has_sync = (partner >= 0) & is_sync_event[np.maximum(partner, 0)]
    calls = np.flatnonzero(ctx.blocking & (stream == -1) & ~has_sync)
    work = np.flatnonzero((stream != -1) & ~is_sync_event & (ctx.corr != -1))
    by_stream = {s: work[stream[work] == s] for s in np.unique(stream[work]).tolist()}
    by_stream = {s: w[np.argsort(end[w], kind="stable")] for s, w in by_stream.items()}
    corr = ctx.corr
    for c in calls.tolist():
        c0, c1 = start[c], end[c]
        if partner[c] >= 0:  # it ran GPU work itself (a synchronous memcpy)
            own = work[(corr[work] == corr[c])]
            src = [g for g in own.tolist() if c0 < end[g] <= c1]
        else:
            src = []
            for w in by_stream.values():
                j = int(np.searchsorted(end[w], c1, side="right")) - 1
                if j >= 0 and end[w[j]] > c0:
                    src.append(int(w[j]))
        if src:
            ctx.inferred_waits[c] = src
        else:
            ctx.blocking[c] = False

def _launch_pairs(ev, is_launch, corr, stream):
    """(runtime position, GPU position) for each GPU event on a stream launched by a launch call."""
    r = np.flatnonzero(is_launch)
    g = np.flatnonzero(stream != -1)
    left = pd.DataFrame({"r": r, "corr": corr[r]})
    right = pd.DataFrame({"g": g, "corr": corr[g]})
    pairs = left.merge(right, on="corr", how="inner", sort=False)
    return pairs["r"].to_numpy(), pairs["g"].to_numpy()


def _launch_info(ctx: RankContext, is_launch: np.ndarray, names: pd.Series) -> None:
    """Fill ``ctx`` with the launch links, idle-stream launches and event-record matches.

    Queue length per stream (HTA's ``TraceCounters``): +1 at each launch call per GPU event it
    launched, -1 when a GPU event starts. A launch edge needs an empty queue just before the launch
    and the GPU event to be the first its call ran on that stream (HTA: and nothing else queued by
    the time it starts).
    """
    ev, start, stream, corr = ctx.ev, ctx.start, ctx.stream, ctx.corr
    pid = ev["pid"].to_numpy()
    tid = ev["tid"].to_numpy()
    pr, pg = _launch_pairs(ev, is_launch, corr, stream)
    if ctx.hta_compat:  # the graph links a launch call to one GPU event only (index_correlation)
        single = ctx.cpu_to_gpu[pr] == pg
        gr_r, gr_g = pr[single], pg[single]
    else:
        gr_r, gr_g = pr, pg
    # queue length per stream: +1 at each launch (per GPU event launched), -1 at each GPU start
    g_rows = np.unique(pg)  # each launched GPU event once, in file order
    q = pd.DataFrame({
        "stream": np.concatenate([stream[pg], stream[g_rows]]),
        "ts": np.concatenate([start[pr], start[g_rows]]),
        "kind": np.concatenate([np.zeros(len(pg), np.int8), np.ones(len(g_rows), np.int8)]),
        "delta": np.concatenate([np.ones(len(pg), np.int64), -np.ones(len(g_rows), np.int64)]),
        "r": np.concatenate([pr, np.full(len(g_rows), -1)]),
        "g": np.concatenate([pg, g_rows]),
    })  # fmt: skip
    if ctx.hta_compat:
        # HTA sorts launches then GPU events by time with an unstable quicksort: ties (a launch
        # at the very time a kernel starts) fall as that sort leaves them
        q = q.iloc[np.argsort(q["ts"].to_numpy(), kind="quicksort")]
        q = q.iloc[np.argsort(q["stream"].to_numpy(), kind="stable")]
    else:  # at equal times, launches first
        q = q.sort_values(["stream", "ts", "kind"], kind="stable")
    q["queue"] = q.groupby("stream", sort=False)["delta"].cumsum()
    inc, dec = q[q["kind"] == 0], q[q["kind"] == 1]
    # per (runtime, stream): queue before its first launch on the stream, and its GPU events there
    per_rs = inc.groupby(["r", "stream"], sort=False).agg(first_q=("queue", "first"),
                                                         n_own=("queue", "size"))  # fmt: skip
    q_gpu = _last_by_key(dec["g"].to_numpy(), dec["queue"].to_numpy())
    launch_ok = ctx.launch_ok
    if len(gr_g):
        rs = pd.MultiIndex.from_arrays([gr_r, stream[gr_g]])
        info = per_rs.reindex(rs)
        q_before = info["first_q"].to_numpy() - 1
        n_own = info["n_own"].to_numpy()
        first_own = (
            pd.DataFrame({"r": pr, "s": stream[pg], "ts": start[pg], "g": pg})
            .sort_values("ts", kind="stable").drop_duplicates(["r", "s"])["g"].to_numpy()
        )  # fmt: skip
        is_first = np.isin(gr_g, first_own)
        qg = q_gpu.reindex(gr_g).to_numpy()
        launch_ok[gr_g] = (q_before == 0) & is_first
        if ctx.hta_compat:  # HTA also wants nothing else queued by the time the kernel starts
            launch_ok[gr_g] &= qg == n_own - 1
    ctx.launcher[gr_g] = gr_r

    # cudaEventRecord -> the GPU event it records (the last launched before it on its stream)
    ctx.record_src = _event_record_sources(ev, names, corr, start, stream, pid, gr_r, gr_g)
    # cudaStreamWaitEvent -> the first GPU event launched after it on the waiting stream
    ctx.wait_dest = _stream_wait_destinations(ctx.is_swe, start, stream, pid, tid, ctx.gpu_to_cpu, gr_r, gr_g)

def _event_record_sources(ev, names, corr, start, stream, pid, gr_r, gr_g) -> dict[int, int]:
    """{correlation of a cudaEventRecord: position of the GPU event it records}."""
    if "wait_on_stream" not in ev or "wait_on_record" not in ev:
        return {}  # a hand-built table without the sync-wait columns
    waits = ev.loc[ev["wait_on_stream"].to_numpy() > -1]
    rec = np.flatnonzero(name_mask(names, ["cudaEventRecord"]))
    if waits.empty or len(rec) == 0 or len(gr_g) == 0:
        return {}
    rec_stream = (
        pd.DataFrame({"c": waits["wait_on_record"].to_numpy(), "stream": waits["wait_on_stream"].to_numpy(),
                      "gpu": waits["pid"].to_numpy()})
        .drop_duplicates("c").set_index("c")
    )  # fmt: skip
    recs = pd.DataFrame({"c": corr[rec], "ts": start[rec]}).join(rec_stream, on="c").dropna()
    if recs.empty:
        return {}
    launches = pd.DataFrame({"ts": start[gr_r], "gpu": pid[gr_g], "stream": stream[gr_g],
                             "g": gr_g, "gts": start[gr_g]})  # fmt: skip
    launches = launches.sort_values(["ts", "gts"], kind="stable").drop_duplicates(
        ["ts", "gpu", "stream"], keep="last"
    )
    recs = recs.astype({"gpu": np.int64, "stream": np.int64}).sort_values("ts", kind="stable")
    m = pd.merge_asof(recs, launches, on="ts", by=["gpu", "stream"], direction="backward")
    m = m.dropna(subset=["g"])
    return dict(zip(m["c"].astype(np.int64).tolist(), m["g"].astype(np.int64).tolist(), strict=False))


def _stream_wait_destinations(is_swe, start, stream, pid, tid, gpu_to_cpu, gr_r, gr_g) -> dict:
    """{position of a Stream Wait Event: the first GPU event launched after its cudaStreamWaitEvent
    from the same thread onto the waiting stream}."""
    waits = np.flatnonzero(is_swe & (gpu_to_cpu >= 0))
    if len(waits) == 0 or len(gr_g) == 0:
        return {}
    w_rt = gpu_to_cpu[waits]
    wdf = pd.DataFrame({"w": waits, "ts": start[w_rt], "pid": pid[w_rt], "tid": tid[w_rt],
                        "stream": stream[waits]}).sort_values("ts", kind="stable")  # fmt: skip
    launches = pd.DataFrame({"ts": start[gr_r], "pid": pid[gr_r], "tid": tid[gr_r],
                             "stream": stream[gr_g], "g": gr_g, "gts": start[gr_g]})  # fmt: skip
    launches = launches.sort_values(["ts", "gts"], kind="stable").drop_duplicates(
        ["ts", "pid", "tid", "stream"], keep="first"
    )
    m = pd.merge_asof(wdf, launches, on="ts", by=["pid", "tid", "stream"], direction="forward")
    m = m.dropna(subset=["g"])
    return dict(zip(m["w"].tolist(), m["g"].astype(np.int64).tolist(), strict=False))
