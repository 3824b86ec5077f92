"""Collectives: every collective of every rank, matched across ranks, with skew, wait and bandwidth.

**Extraction, per rank** (the analysed profiler steps). A rank with GPU events contributes its
communication kernels (the kernel-pattern preset decides what is communication, so DeepEP, RCCL and
NVSHMEM kernels count). Each kernel is described, in this order of preference, by the collective
args Kineto writes on the kernel itself, by the ``record_param_comms`` CPU op that launched it (the
op on the launching thread whose span holds the launch call with the kernel's correlation id), or
by its name alone. A CPU-only rank (gloo) contributes its ``c10d::*`` collective ops: the op's
start is the rank's arrival, and it ends where gloo's matching ``gloo:*`` annotation (the n-th of
that type on the rank) ends, whose input shape gives the size.

**Matching across ranks.** Collectives are matched within a process group (``Process Group Name``;
"" when the trace does not say, i.e. rows without args and gloo ops are taken to be in one group)
and type: by the ``Seq`` number when every row of that group and type has one, else by order (the
n-th all-reduce of the group on each rank). In order mode the ranks must have the same count of
that group and type; when they do not, pairing by order would match wrong collectives, so those
rows are left out with a ``CollectiveMismatchWarning`` naming the counts per rank.

**Per row (collective instance, rank)**, times in µs: ``skew`` = latest start − earliest start of
the instance; ``wait`` = latest start − this rank's start (time spent waiting for the last rank);
skew and wait are NaN (unknown) when only one rank of the instance is loaded;
``transfer`` = this rank's end − latest start (clipped at 0: the part no rank can blame on another);
``algbw_gbps`` = bytes / transfer (GB/s, 10⁹ bytes); ``busbw_gbps`` = algbw × nccl-tests' factor
(all-reduce 2(n−1)/n; all-gather, reduce-scatter, all-to-all (n−1)/n; broadcast, reduce, send/recv
1; n = group size); ``exposed`` = the part of the collective not overlapped by COMPUTATION kernels
of the same rank (all of it for CPU collectives). ``bytes`` = max(in, out) elements × dtype size
(nccl-tests' size convention: an all-gather counts its whole output); NaN when unknown.
``idle_before_us`` = how long the rank's GPU (all streams; for CPU collectives the launching
thread's ``cpu_op`` events) ran nothing between the end of the rank's previous collective (or the
start of the profiler step, whichever is later) and this collective's start; ``step_us`` = the
duration of the rank's profiler step the collective started in (0 outside every step); ``launch_late`` = the
GPU went idle right before the collective and its launch call started after that (the CPU was late). ``is_last`` marks the rank that arrived last (the first such rank on ties).
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Mapping

import numpy as np
import pandas as pd

from analysis.errors import CollectiveMismatchWarning
from analysis.kineto.events import gpu_mask
from analysis.kineto.model import RankTrace
from analysis.metrics.intervals import merge
from analysis.metrics.kernel_types import KernelPatterns, busy_intervals, classified_gpu_events
from analysis.metrics.timebase import Rounding, event_bounds_ns

# Collective types, first match wins; applied to "Collective name" args, c10d op and kernel names.
_TYPE_RULES: tuple[tuple[re.Pattern, str], ...] = tuple(
    (re.compile(p, re.IGNORECASE), t)
    for p, t in (
        (r"all_?reduce", "all_reduce"),
        # custom all-reduce kernels: vLLM / SGLang's cross_device_reduce_{1,2}stage, symmetric
        # memory's one/two-shot and multimem kernels (TraceLens calls them all-reduce too)
        (r"cross_device_reduce|one_shot|two_shot|multimem_(?:one|two)_shot", "all_reduce"),
        (r"all_?gather", "all_gather"),
        (r"reduce_?scatter", "reduce_scatter"),
        (r"all_?to_?all", "all_to_all"),
        (r"broadcast|bcast", "broadcast"),
        (r"send_?recv|sendrecv|\bsend\b|\brecv\b|_send|_recv|^send|^recv", "send_recv"),
        (r"barrier", "barrier"),
        (r"notify", "ep_notify"),  # DeepEP (notify_dispatch is a notify)
        (r"dispatch", "ep_dispatch"),
        (r"combine", "ep_combine"),
        (r"reduce", "reduce"),
    )
)
# nccl-tests' bus-bandwidth factors (doc/PERFORMANCE.md), n = ranks in the group.
BUS_FACTORS = {
    "all_reduce": lambda n: 2 * (n - 1) / n,
    "all_gather": lambda n: (n - 1) / n,
    "reduce_scatter": lambda n: (n - 1) / n,
    "all_to_all": lambda n: (n - 1) / n,
    "broadcast": lambda n: 1.0,
    "reduce": lambda n: 1.0,
    "send_recv": lambda n: 1.0,
}
# Bytes per element of the dtype names Kineto (c10 ScalarType) and gloo (Input type) write.
DTYPE_BYTES = {
    "float": 4, "float32": 4, "half": 2, "float16": 2, "bfloat16": 2, "c10::bfloat16": 2,
    "c10::half": 2, "double": 8, "float64": 8, "int": 4, "int32": 4, "long": 8, "int64": 8,
    "long int": 8, "short": 2, "int16": 2, "char": 1, "int8": 1, "byte": 1, "uint8": 1,
    "unsigned char": 1, "bool": 1, "float8_e4m3fn": 1, "float8_e5m2": 1, "complexfloat": 8,
    "complexdouble": 16,
    # C++ names as record_shapes writes a tensor's type (the nccl:* annotations of torch < 2.2)
    "signed char": 1, "unsigned short": 2, "unsigned int": 4, "unsigned long": 8,
    "long long": 8, "long long int": 8, "c10::float8_e4m3fn": 1, "c10::float8_e5m2": 1,
    "c10::complex<float>": 8, "c10::complex<double>": 16, "c10::complex<c10::half>": 4,
}
_C10D_PREFIX = "c10d::"
_GLOO_PREFIX = "gloo:"
_NCCL_PREFIX = "nccl:"  # ProcessGroupNCCL's annotation of a collective (torch < 2.2: its size)
# the annotation types gloo's work for an op of a type carries (a reduce-scatter runs as an
# all-reduce of the whole input: its size is that input, as nccl-tests counts it)
_GLOO_RUNS_AS = {"reduce_scatter": ("reduce_scatter", "all_reduce")}

RANK_COLUMNS = {
    "rank": "int64", "group": "object", "type": "object", "seq": "int64", "ordinal": "int64",
    "name": "object", "bytes": "float64", "group_size": "int64", "start_ns": "int64",
    "end_ns": "int64", "exposed_ns": "int64", "idle_before_ns": "int64", "launch_late": "bool",
    "step": "int64", "step_dur_ns": "int64",
}
COLUMNS = [
    "collective", "group", "type", "seq", "rank", "step", "step_us", "name", "bytes", "group_size",
    "start_us", "end_us", "duration_us", "skew_us", "wait_us", "transfer_us", "algbw_gbps",
    "busbw_gbps", "exposed_us", "idle_before_us", "launch_late", "is_last",
]


def collective_type(name: str) -> str:
    """The normalised type (``all_reduce``, ``all_gather``, ...) of a collective or kernel name."""
    for pattern, kind in _TYPE_RULES:
        if pattern.search(name):
            return kind
    return "other"


def dtype_bytes(dtype: str) -> float:
    """Bytes per element of a dtype name; NaN when unknown."""
    return float(DTYPE_BYTES.get(str(dtype).strip().lower(), np.nan))


def _empty() -> pd.DataFrame:
    return pd.DataFrame({c: pd.Series(dtype=t) for c, t in RANK_COLUMNS.items()})


def collectives_rank(
    rt: RankTrace,
    *,
    patterns: str | KernelPatterns = "default",
    rounding: Rounding = "exact",
) -> pd.DataFrame:
    """One rank's collectives (``RANK_COLUMNS``, times in ns), in start order."""
    if gpu_mask(rt.events).any():
        gpu = classified_gpu_events(rt, patterns, rounding)
        out, busy = _gpu_collectives(rt, gpu, patterns, rounding)
    else:
        out, busy = _cpu_collectives(rt, rounding)
    if out.empty:
        return _empty()
    out = out.sort_values("start_ns", kind="stable").reset_index(drop=True)
    out["ordinal"] = out.groupby(["group", "type"], sort=False).cumcount()
    out["step"], step_start, out["step_dur_ns"] = _steps_of(rt, out["start_ns"].to_numpy())
    out["idle_before_ns"] = _idle_since_previous(out, step_start, busy)
    out["rank"] = rt.rank
    return out[list(RANK_COLUMNS)].astype(RANK_COLUMNS)


def _steps_of(rt: RankTrace, starts: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The ProfilerStep number each start falls in (-1 outside every step), that step's start
    (the start itself outside every step) and its duration (0 outside every step)."""
    steps = rt.profiler_steps()
    if steps.empty:
        return np.full(len(starts), -1, dtype=np.int64), starts.copy(), np.zeros(len(starts), np.int64)
    ts, end = steps["ts"].to_numpy(), (steps["ts"] + steps["dur"]).to_numpy()
    i = np.clip(np.searchsorted(ts, starts, side="right") - 1, 0, None)
    inside = (ts[i] <= starts) & (starts < end[i])
    return (np.where(inside, steps["step"].to_numpy()[i], -1), np.where(inside, ts[i], starts),
            np.where(inside, end[i] - ts[i], 0))


def _idle_since_previous(out: pd.DataFrame, step_start: np.ndarray, busy: dict) -> np.ndarray:
    """Idle ns of the launcher between max(previous collective's end, step start) and each start
    (``out`` sorted by start; ``busy[out._launcher]`` is the launcher's merged busy intervals)."""
    start, end = out["start_ns"].to_numpy(), out["end_ns"].to_numpy()
    prev_end = np.r_[np.iinfo(np.int64).min, np.maximum.accumulate(end)[:-1]]
    w0 = np.minimum(np.maximum(prev_end, step_start), start)
    idle = start - w0
    launcher = out["_launcher"].to_numpy()
    for key, (s, e) in busy.items():
        rows = launcher == key
        idle[rows] -= _coverage(s, e, w0[rows], start[rows])
    return idle


def _describe(coll: pd.DataFrame, group_size_default: int) -> pd.DataFrame:
    """Collective-table rows → type source name, group, size, seq and bytes."""
    size = dtype_bytes_array(coll["dtype"])
    nelems = np.maximum(coll["in_nelems"].to_numpy(), coll["out_nelems"].to_numpy())
    return pd.DataFrame(
        {
            "collective": coll["collective"].to_numpy(),
            "group": coll["pg_name"].to_numpy(),
            "group_size": np.where(coll["group_size"].to_numpy() > 0, coll["group_size"].to_numpy(),
                                   group_size_default),
            "seq": coll["seq"].to_numpy(),
            "bytes": np.where(nelems >= 0, nelems * size, np.nan),
        },
        index=coll["event"].to_numpy(),
    )


def dtype_bytes_array(dtypes: pd.Series) -> np.ndarray:
    return np.array([dtype_bytes(d) for d in dtypes], dtype=np.float64)


def _gpu_collectives(rt: RankTrace, gpu: pd.DataFrame, patterns, rounding) -> tuple[pd.DataFrame, dict]:
    ev = rt.events
    comm = gpu[gpu["kernel_type"] == "COMMUNICATION"]
    if comm.empty:
        return _empty(), {}
    coll = rt.collectives[rt.collectives["event"].isin(ev.index)]
    world = rt.meta.world_size or -1
    desc = _describe(coll, world)
    own = desc.reindex(comm.index)  # args on the kernel itself
    via_op = _record_param_comms_of(rt, comm.index, coll, desc)
    has_own = own["collective"].fillna("").astype(str).str.len().to_numpy() > 0
    info = own.where(pd.Series(has_own, index=own.index), via_op, axis=0)
    sized = info["bytes"].astype(np.float64).notna().to_numpy()
    if not sized.all():  # torch < 2.2: the size is on ProcessGroupNCCL's nccl:* annotation
        annotated = _nccl_annotation_of(rt, comm.index[~sized], coll, desc)
        info = info.copy()
        info.loc[comm.index[~sized], "bytes"] = annotated["bytes"].to_numpy()
        unlabelled = info["collective"].fillna("").astype(str).str.len().to_numpy() == 0
        fill = unlabelled & ~sized
        info.loc[comm.index[fill], "collective"] = annotated.loc[comm.index[fill], "collective"]
    label = info["collective"].fillna("").astype(str).to_numpy()
    names = comm["name"].astype(str).to_numpy()
    # no args to say what it is: the c10d operator that launched the kernel (NCCL runs an
    # all-to-all as send/recv kernels: ncclKernel_SendRecv inside c10d::alltoall_base_)
    unnamed = label == ""
    if unnamed.any():
        label = label.copy()
        label[unnamed] = _launching_c10d_ops(rt, comm.index[unnamed])
    start, end = comm["start"].to_numpy(), comm["end"].to_numpy()
    late = _gpu_launch_late(rt, gpu, comm)
    busy = {-1: busy_intervals(rt, patterns, rounding)}  # the GPU, all streams
    return pd.DataFrame(
        {
            "group": info["group"].fillna("").astype(str).to_numpy(),
            "type": [collective_type(lab or n) for lab, n in zip(label, names, strict=True)],
            "seq": info["seq"].fillna(-1).to_numpy(dtype=np.int64),
            "name": names,
            "bytes": info["bytes"].to_numpy(dtype=np.float64),
            "group_size": info["group_size"].fillna(world).to_numpy(dtype=np.int64),
            "start_ns": start,
            "end_ns": end,
            "exposed_ns": (end - start) - _coverage(
                *busy_intervals(rt, patterns, rounding, "COMPUTATION"), start, end),
            "launch_late": late,
            "_launcher": -1,
        }
    ), busy


def launch_calls(rt: RankTrace, corr: np.ndarray) -> pd.DataFrame:
    """ts and tid of the call that launched each GPU event (the last non-GPU row with its
    correlation id, HTA's rule); NaN where none."""
    return rt.memoised("launch_calls", lambda: _launch_table(rt.events)).reindex(corr)


def _launch_table(ev: pd.DataFrame) -> pd.DataFrame:
    """``ts`` and ``tid`` of the last non-GPU row of each correlation id, indexed by the id (one
    table per rank, memoised: the collectives and the step breakdown look launches up in it)."""
    calls = ev.loc[~gpu_mask(ev) & (ev["correlation"].to_numpy() >= 0), ["correlation", "ts", "tid"]]
    return calls.drop_duplicates("correlation", keep="last").set_index("correlation")


def _enclosing_ops(rt, kernel_index, ops: pd.Index) -> pd.DataFrame:
    """For each comm kernel whose launch call lies in the span of one of ``ops`` (event labels)
    on the same thread, the innermost such op: columns ``kernel``, ``op`` (labels)."""
    ev = rt.events
    launch = launch_calls(rt, ev.loc[kernel_index, "correlation"].to_numpy())
    launch["kernel"] = kernel_index
    launch = launch.dropna(subset=["ts"]).astype({"ts": "int64", "tid": "int64"})
    op_rows = ev.loc[ops, ["ts", "dur", "tid"]].assign(op=np.asarray(ops))
    found = pd.merge_asof(
        launch.sort_values("ts"), op_rows.sort_values("ts").rename(columns={"ts": "op_ts"}),
        left_on="ts", right_on="op_ts", by="tid", direction="backward",
    )
    found = found[found["op"].notna() & (found["ts"] <= found["op_ts"] + found["dur"])]
    return found[["kernel", "op"]].astype({"op": "int64"})


def _record_param_comms_of(rt, kernel_index, coll: pd.DataFrame, desc: pd.DataFrame):
    """For each comm kernel, the description of the ``record_param_comms`` op whose span holds
    the kernel's launch call on the same thread (the innermost one); NaN rows where none."""
    ev = rt.events
    out = pd.DataFrame(index=kernel_index, columns=desc.columns, dtype=object)
    ops = coll[ev.loc[coll["event"], "name"].astype(str).to_numpy() == "record_param_comms"]
    if ops.empty:
        return out
    found = _enclosing_ops(rt, kernel_index, pd.Index(ops["event"]))
    if not found.empty:
        out.loc[found["kernel"].to_numpy()] = desc.loc[found["op"]].to_numpy()
    return out


def _nccl_annotation_of(rt, kernel_index, coll: pd.DataFrame, desc: pd.DataFrame) -> pd.DataFrame:
    """For each comm kernel, the ``collective`` (the annotation's name without ``nccl:``) and
    ``bytes`` (its largest input's elements × their dtype size, as the parser read them) of the
    innermost ``nccl:*`` annotation whose span holds the kernel's launch call on the same
    thread; "" and NaN where none (the parser keeps these rows only for traces whose kernels
    carry no collective args)."""
    ev = rt.events
    out = pd.DataFrame({"collective": "", "bytes": np.nan}, index=kernel_index)
    names = ev.loc[coll["event"], "name"].astype(str).to_numpy()
    rows = coll[np.char.startswith(names.astype(str), _NCCL_PREFIX)]
    if rows.empty or not len(kernel_index):
        return out
    found = _enclosing_ops(rt, kernel_index, pd.Index(rows["event"]))
    if not found.empty:
        at = found["kernel"].to_numpy()
        out.loc[at, "bytes"] = desc.loc[found["op"], "bytes"].to_numpy(np.float64)
        out.loc[at, "collective"] = (ev.loc[found["op"], "name"].astype(str)
                                     .str[len(_NCCL_PREFIX):].to_numpy())
    return out


def _launching_c10d_ops(rt, kernel_index) -> np.ndarray:
    """Per comm kernel, the name without ``c10d::`` of the innermost ``c10d::*`` operator whose
    span holds the kernel's launch call on the same thread ("" where none)."""
    ev = rt.events
    out = pd.Series("", index=kernel_index, dtype=object)
    is_op = ((ev["cat"] == "cpu_op").to_numpy()
             & ev["name"].astype(str).str.startswith(_C10D_PREFIX).to_numpy())
    if not is_op.any():
        return out.to_numpy()
    found = _enclosing_ops(rt, kernel_index, ev.index[is_op])
    names = ev.loc[found["op"], "name"].astype(str).str[len(_C10D_PREFIX):]
    out.loc[found["kernel"].to_numpy()] = names.to_numpy()
    return out.to_numpy()


def _coverage(s: np.ndarray, e: np.ndarray, t0: np.ndarray, t1: np.ndarray) -> np.ndarray:
    """ns of each [t0, t1) covered by the disjoint sorted intervals [s, e)."""
    if s.size == 0:
        return np.zeros(len(t0), dtype=np.int64)
    length = np.clip(e - s, 0, None)  # HTA's rounding can leave inverted intervals: empty here
    cum = np.r_[0, np.cumsum(length)]  # busy time before interval i

    def busy_until(t):
        i = np.searchsorted(s, t, side="right")  # intervals starting at or before t
        j = np.clip(i - 1, 0, None)
        return np.where(i > 0, cum[j] + np.minimum(np.clip(t - s[j], 0, None), length[j]), 0)

    return busy_until(t1) - busy_until(t0)


def _gpu_launch_late(rt: RankTrace, gpu: pd.DataFrame, comm: pd.DataFrame) -> np.ndarray:
    """Whether the GPU sat idle (no work on any stream) right before each comm kernel and the
    kernel's launch call started after that idle time began."""
    s, e = merge(gpu["start"].to_numpy(), gpu["end"].to_numpy())
    start = comm["start"].to_numpy()
    i = np.searchsorted(s, start, side="right") - 1  # the merged interval holding the kernel
    opens = (i >= 0) & (s[np.clip(i, 0, None)] == start)  # the kernel starts a busy period
    has_prev = opens & (i >= 1)
    prev_end = np.where(has_prev, e[np.clip(i - 1, 0, None)], start)
    launch_ts = launch_calls(rt, comm.index.map(rt.events["correlation"]).to_numpy())["ts"].to_numpy()
    late = has_prev & ~np.isnan(launch_ts) & (np.nan_to_num(launch_ts) >= prev_end)
    return late


def _cpu_collectives(rt: RankTrace, rounding: Rounding) -> tuple[pd.DataFrame, dict]:
    """c10d collective ops of a CPU-only rank, ended by gloo's matching annotation."""
    ev = rt.events
    names = ev["name"].astype(str)
    ops = ev[(ev["cat"] == "cpu_op").to_numpy() & names.str.startswith(_C10D_PREFIX).to_numpy()]
    types = [collective_type(n[len(_C10D_PREFIX):]) for n in ops["name"].astype(str)]
    keep = np.array([t != "other" for t in types], dtype=bool)
    ops, types = ops[keep], [t for t in types if t != "other"]
    if ops.empty:
        return _empty(), {}
    start, end = event_bounds_ns(ops["ts"].to_numpy(), ops["dur"].to_numpy(), rounding,
                                 float_timestamps=rt.meta.float_timestamps)
    end = end.copy()
    world = rt.meta.world_size or -1
    nbytes = np.full(len(ops), np.nan)
    coll = rt.collectives[rt.collectives["event"].isin(ev.index)]
    gloo_rows = coll[ev.loc[coll["event"], "name"].astype(str).str.startswith(_GLOO_PREFIX).to_numpy()]
    gloo_ev = ev.loc[gloo_rows["event"]]
    g_start, g_end = event_bounds_ns(gloo_ev["ts"].to_numpy(), gloo_ev["dur"].to_numpy(), rounding,
                                     float_timestamps=rt.meta.float_timestamps)
    g_types = np.array([collective_type(n[len(_GLOO_PREFIX):]) for n in gloo_ev["name"].astype(str)])
    g_bytes = gloo_rows["in_nelems"].to_numpy() * dtype_bytes_array(gloo_rows["dtype"])
    g_bytes = np.where(gloo_rows["in_nelems"].to_numpy() >= 0, g_bytes, np.nan)
    # Each op's annotation is the first one not yet taken, of a type gloo runs the op as, that
    # starts at or after the op (gloo works through a group's ops in order). gloo runs a
    # reduce-scatter as an all-reduce of the whole input, annotated "gloo:all_reduce".
    queues = {kind: list(np.flatnonzero(g_types == kind)[np.argsort(
        g_start[g_types == kind], kind="stable")]) for kind in set(g_types.tolist())}
    heads = dict.fromkeys(queues, 0)
    for i in np.argsort(start, kind="stable").tolist():
        kind = types[i]
        best = None
        for run_as in _GLOO_RUNS_AS.get(kind, (kind,)):
            queue, h = queues.get(run_as, []), heads.get(run_as, 0)
            while h < len(queue) and g_start[queue[h]] < start[i]:
                h += 1  # an annotation of an op before this one (whose op was not recorded)
            heads[run_as] = h
            if h < len(queue) and (best is None or g_start[queue[h]] < g_start[best[1]]):
                best = (run_as, queue[h])
        if best is None:
            continue  # no annotation: the op keeps its own end and has no size
        heads[best[0]] += 1
        j = best[1]
        end[i] = max(g_end[j], start[i])
        # gloo's all-gather input is one rank's share; nccl-tests counts the whole output
        scale = world if kind == "all_gather" and world > 0 else 1
        nbytes[i] = g_bytes[j] * scale
    tids = ops["tid"].to_numpy()
    busy = _thread_busy(ev, tids, rounding, rt.meta.float_timestamps)
    return pd.DataFrame(
        {
            "group": "", "type": types, "seq": -1, "name": ops["name"].astype(str).to_numpy(),
            "bytes": nbytes, "group_size": world, "start_ns": start, "end_ns": end,
            "exposed_ns": end - start, "launch_late": True, "_launcher": tids,
        }
    ), busy


def _thread_busy(ev, tids, rounding, float_timestamps) -> dict:
    """Per thread id of ``tids``, the merged busy intervals of its ``cpu_op`` events (annotations
    such as ``ProfilerStep#N`` span everything and are not work)."""
    ops = ev[(ev["cat"] == "cpu_op").to_numpy()]
    s_all, e_all = event_bounds_ns(ops["ts"].to_numpy(), ops["dur"].to_numpy(), rounding,
                                   float_timestamps=float_timestamps)
    thread = ops["tid"].to_numpy()
    return {t: merge(s_all[thread == t], e_all[thread == t]) for t in set(tids.tolist())}


def combine(parts: Mapping[int, pd.DataFrame]) -> pd.DataFrame:
    """Per-rank collectives → one row per (collective instance, rank) (``COLUMNS``, µs)."""
    frames = [parts[r] for r in sorted(parts) if len(parts[r])]
    if not frames:
        return pd.DataFrame({c: pd.Series(dtype="float64") for c in COLUMNS})
    df = pd.concat(frames, ignore_index=True)
    df = _matched(df)
    key = df.groupby("_key", sort=False)
    first, latest = key["start_ns"].transform("min"), key["start_ns"].transform("max")
    n = np.where(df["group_size"] > 0, df["group_size"], key["rank"].transform("size"))
    transfer = np.clip(df["end_ns"] - latest, 0, None)
    algbw = np.where(transfer > 0, df["bytes"] / np.where(transfer > 0, transfer, 1), np.nan)  # B/ns
    factor = _bus_factors(df["type"].to_numpy(), n)
    order = df.assign(_first=first).groupby("_key", sort=False)["_first"].first().sort_values(
        kind="stable")
    instance = pd.Series(np.arange(len(order)), index=order.index)
    # rows are in rank order within an instance, so the first latest start is the lowest rank's
    last_row = key["start_ns"].idxmax()
    compared = key["rank"].transform("size") > 1  # skew and wait are unknown with one rank
    out = pd.DataFrame(
        {
            "collective": df["_key"].map(instance).to_numpy(),
            "group": df["group"], "type": df["type"], "seq": df["seq"], "rank": df["rank"],
            "step": df["step"], "step_us": df["step_dur_ns"] / 1e3, "name": df["name"],
            "bytes": df["bytes"],
            "group_size": n.astype(np.int64),
            "start_us": df["start_ns"] / 1e3,
            "end_us": df["end_ns"] / 1e3,
            "duration_us": (df["end_ns"] - df["start_ns"]) / 1e3,
            "skew_us": ((latest - first) / 1e3).where(compared),
            "wait_us": ((latest - df["start_ns"]) / 1e3).where(compared),
            "transfer_us": transfer / 1e3,
            "algbw_gbps": algbw,  # bytes per ns = GB/s
            "busbw_gbps": algbw * factor,
            "exposed_us": df["exposed_ns"] / 1e3,
            "idle_before_us": df["idle_before_ns"] / 1e3,
            "launch_late": df["launch_late"].astype(bool),
            "is_last": df.index.isin(last_row.to_numpy()) & (key["rank"].transform("size") > 1),
        }
    )
    order = np.lexsort((out["rank"].to_numpy(), out["collective"].to_numpy()))
    return out.iloc[order].reset_index(drop=True)[COLUMNS]


def _bus_factors(types: np.ndarray, n: np.ndarray) -> np.ndarray:
    """nccl-tests' bus-bandwidth factor per row (NaN for types without one), once per distinct
    (type, group size)."""
    pairs = pd.DataFrame({"type": types, "n": n})
    distinct = pairs.drop_duplicates()
    distinct = distinct.assign(factor=[
        BUS_FACTORS[t](k) if t in BUS_FACTORS and k > 0 else np.nan
        for t, k in zip(distinct["type"], distinct["n"], strict=True)])
    return pairs.merge(distinct, on=["type", "n"], how="left")["factor"].to_numpy(np.float64)


def _matched(df: pd.DataFrame) -> pd.DataFrame:
    """Rows with an integer ``_key`` naming their collective instance (see the module docstring);
    groups whose counts differ between ranks in order mode are dropped with a warning."""
    by_kind = df.groupby(["group", "type"], sort=False)
    by_seq = by_kind["seq"].transform("min").to_numpy() >= 0  # every row of the kind has a Seq
    keep = np.ones(len(df), dtype=bool)
    ordered = df[~by_seq]
    for (group, kind), rows in ordered.groupby(["group", "type"], sort=False):
        counts = rows.groupby("rank").size()
        if counts.nunique() > 1:
            warnings.warn(
                f"left out the {kind} collectives of process group {group or '(unnamed)'}: the "
                f"ranks hold different numbers of them ({counts.to_dict()}) and the trace has no "
                "sequence numbers, so matching them by order would pair the wrong ones",
                CollectiveMismatchWarning, stacklevel=3,
            )
            keep[df.index.get_indexer(rows.index)] = False
    position = np.where(by_seq, df["seq"].to_numpy(), df["ordinal"].to_numpy())
    keyed = df.assign(_mode=by_seq, _position=position)[keep]
    return keyed.assign(
        _key=keyed.groupby(["group", "type", "_mode", "_position"], sort=False).ngroup()
    )


def summary(collectives: pd.DataFrame) -> pd.DataFrame:
    """Per (type, message-size bucket, group): ``count`` (instances), ``ranks``, ``total_us`` and
    ``exposed_us`` (summed over ranks), ``busbw_median_gbps`` (over rows) and ``skew_p95_us``
    (over instances). The bucket is the power of two at or below the size (``bucket_bytes``; -1
    when the size is unknown)."""
    cols = ["type", "bucket", "bucket_bytes", "group", "count", "ranks", "total_us", "exposed_us",
            "busbw_median_gbps", "skew_p95_us"]
    if collectives.empty:
        return pd.DataFrame({c: pd.Series(dtype="float64") for c in cols})
    b = collectives["bytes"].to_numpy(dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        bucket = np.where(b > 0, 2.0 ** np.floor(np.log2(np.where(b > 0, b, 1))), -1).astype(np.int64)
    df = collectives.assign(bucket_bytes=bucket)
    rows = []
    for (kind, bb, group), g in df.groupby(["type", "bucket_bytes", "group"], sort=True):
        rows.append({
            "type": kind, "bucket": format_bytes(bb) if bb > 0 else "unknown", "bucket_bytes": bb,
            "group": group, "count": g["collective"].nunique(), "ranks": g["rank"].nunique(),
            "total_us": g["duration_us"].sum(), "exposed_us": g["exposed_us"].sum(),
            "busbw_median_gbps": g["busbw_gbps"].median(),
            "skew_p95_us": g.drop_duplicates("collective")["skew_us"].quantile(0.95),
        })
    return pd.DataFrame(rows, columns=cols)


def combine_summary(parts: Mapping[int, pd.DataFrame]) -> pd.DataFrame:
    """Per-rank collectives → ``summary`` of the matched table."""
    return summary(combine(parts))


def format_bytes(n: float) -> str:
    """``1048576`` → ``"1 MiB"`` (binary units)."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:g} {unit}"
        n /= 1024
    return f"{n:g} TiB"
