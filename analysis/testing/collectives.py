"""Synthetic multi-rank traces of collectives with exact ground truth: process groups, known skew,
sizes and durations, and one straggler rank.

``generate_collective_job(CollectiveJobConfig(...))`` returns the per-rank trace dicts and the true
answer of ``analysis.metrics.distributed.collectives`` (one row per collective instance and rank), of
``analysis.metrics.distributed.stragglers`` and of ``analysis.metrics.distributed.step_breakdown``, all derived from the
construction below with plain arithmetic (integer µs), not from the package's analyses.

Per profiler step ``s`` (span ``[T_s, T_s + 9000 + 10 r + delay)`` µs on rank ``r``) and collective
``j`` of ``COLLECTIVES`` (base time ``b = T_s + 1000 + 2000 j``):

- rank ``r`` arrives at ``a = b + 3 r`` (+ ``straggler_delay_us`` on the straggler for the delayed
  collectives); the kernel ends at ``L + transfer_j + r`` where ``L`` is the latest arrival of its
  group, so skew, wait and transfer are known exactly;
- a computation kernel runs ``[a − 100, a)`` before each collective (so the GPU is busy when it
  starts), except on the straggler with ``cause="host"``, whose kernel ends at ``b + 3 r`` and whose
  collective is launched after that idle time (its CPU was late); with ``cause="compute"`` that
  kernel instead runs until the late arrival;
- a computation kernel ``[a + 10, a + 60)`` overlaps each collective: exposed = duration − 50 µs;
- ``describe`` says where the collective's args live: ``"kernel"`` (Kineto's args on the NCCL
  kernel), ``"record_param_comms"`` (only on the launching CPU op), ``"nccl_annotation"`` (as
  torch < 2.2 writes them: no collective args anywhere, but ProcessGroupNCCL's ``nccl:*``
  annotation around the launch with its tensors' ``Input Dims`` / ``Input type``), ``"none"``
  (nowhere); with ``"none"`` and ``"nccl_annotation"`` only the world-group collectives are
  issued, as the groups cannot be told apart; ``deepep=True`` names
  the kernels as DeepEP's instead of NCCL's (implies ``"none"``).

A partial last step (one kernel launched after it starts) ends each trace, as in real traces.
"""

from __future__ import annotations

import gzip
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from analysis.testing.synthetic import BASE_EPOCH_US, COMM_STREAM, COMPUTE_STREAM

STEP_US, STEP_SPAN_US, FIRST_STEP = 10_000, 9_000, 3
JITTER_US = 3  # rank r arrives 3 r µs after the base time
PRE_US, POST_OFFSET_US, POST_US = 100, 10, 50
LAUNCH_BEFORE_US = 5  # a collective's launch call starts this long before its kernel
# (type, nccl kernel name, DeepEP kernel name, Collective name, nelems, dtype, bytes/elem, transfer µs,
#  group: "world" or "pairs")
COLLECTIVES = (
    ("all_reduce", "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
     "void deep_ep::internode::dispatch<8, 2>(int4*)", "allreduce", 1 << 20, "Float", 4, 500,
     "world"),
    ("all_gather", "ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
     "void deep_ep::internode::combine<8>(int4*)", "_allgather_base", 1 << 18, "BFloat16", 2, 200,
     "pairs"),
    ("all_to_all", "ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)",
     "void deep_ep::intranode::notify_dispatch<8>(int*)", "all_to_all", 1 << 19, "Float", 4, 300,
     "world"),
)
BUS = {"all_reduce": lambda n: 2 * (n - 1) / n, "all_gather": lambda n: (n - 1) / n,
       "all_to_all": lambda n: (n - 1) / n}


@dataclass
class CollectiveJobConfig:
    ranks: int = 4  # even: the "pairs" groups are (0, 1), (2, 3), ...
    steps: int = 3
    straggler: int = 2
    straggler_delay_us: int = 400
    delayed: tuple[tuple[int, int], ...] = ((0, 0), (1, 2), (2, 0))  # (step index, collective j)
    cause: Literal["host", "compute"] = "host"
    describe: Literal["kernel", "record_param_comms", "nccl_annotation", "none"] = "kernel"
    with_seq: bool = True
    deepep: bool = False


@dataclass
class CollectiveJob:
    config: CollectiveJobConfig
    traces: dict[int, dict[str, Any]]
    collectives: list[dict[str, Any]] = field(default_factory=list)  # true rows, COLUMNS' names
    stragglers: list[dict[str, Any]] = field(default_factory=list)
    steps: list[dict[str, Any]] = field(default_factory=list)

    def write(self, out_dir) -> list[Path]:
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        paths = []
        for rank, trace in self.traces.items():
            path = out / f"rank-{rank}.pt.trace.json.gz"
            with gzip.open(path, "wt") as f:
                json.dump(trace, f)
            paths.append(path)
        return paths


def _groups(config: CollectiveJobConfig) -> dict[str, tuple[str, list[list[int]]]]:
    world = list(range(config.ranks))
    pairs = [[r, r + 1] for r in range(0, config.ranks - 1, 2)]
    return {"world": ("0", [world]), "pairs": ("pairs", pairs)}


def _group_name(kind: str, members: list[int]) -> str:
    return "0" if kind == "world" else f"{1 + members[0] // 2}"


def generate_collective_job(config: CollectiveJobConfig) -> CollectiveJob:
    """The traces and their ground truth (see the module docstring)."""
    describe = "none" if config.deepep else config.describe
    specs = [c for c in COLLECTIVES if describe in ("kernel", "record_param_comms") or c[8] == "world"]
    named = describe != "none"  # the truth knows the size and type
    grouped = describe in ("kernel", "record_param_comms")  # and the group
    n = config.ranks
    events: dict[int, list[dict]] = {r: [] for r in range(n)}
    corr = {r: 1000 for r in range(n)}
    seq: dict[str, int] = {}
    truth: list[dict] = []
    steps: list[dict] = []

    def us(t: int) -> int:
        return BASE_EPOCH_US + t

    def kernel(r, name, start, end, stream, launch_at, args=None, cpu_op=None, annotation=None):
        corr[r] += 1
        c = corr[r]
        if annotation is not None:  # ProcessGroupNCCL's record_function around the launch
            events[r].append({"ph": "X", "cat": "user_annotation", "name": annotation[0],
                              "pid": 1, "tid": 1, "ts": us(launch_at - 3), "dur": 12,
                              "args": annotation[1]})
        if cpu_op is not None:
            events[r].append({"ph": "X", "cat": "cpu_op", "name": "record_param_comms", "pid": 1,
                              "tid": 1, "ts": us(launch_at - 2), "dur": 10, "args": cpu_op})
        events[r].append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1,
                          "tid": 1, "ts": us(launch_at), "dur": 4, "args": {"correlation": c}})
        events[r].append({"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": stream,
                          "ts": us(start), "dur": end - start,
                          "args": {"stream": stream, "correlation": c, "device": r, **(args or {})}})

    busy: dict[int, list[tuple[int, int]]] = {r: [] for r in range(n)}
    compute: dict[int, list[tuple[int, int]]] = {r: [] for r in range(n)}
    comm: dict[int, list[tuple[int, int, int]]] = {r: [] for r in range(n)}  # (start, end, post)
    step_extra = {(s, r): 0 for s in range(config.steps) for r in range(n)}
    for s in range(config.steps):
        t_s = s * STEP_US
        # idle time is counted from the previous collective's end, or the step start
        prev_end = {r: t_s for r in range(n)}
        for j, (kind, nccl, deepep, cname, nelems, dtype, esize, transfer, gkind) in enumerate(specs):
            b = t_s + 1000 + 2000 * j
            for members in _groups(config)[gkind][1]:
                gname = _group_name(gkind, members)
                late = {r: (config.straggler_delay_us if r == config.straggler
                            and (s, j) in config.delayed else 0) for r in members}
                arrive = {r: b + JITTER_US * r + late[r] for r in members}
                latest = max(arrive.values())
                q = seq.get(gname, 0)
                seq[gname] = q + 1
                for r in members:
                    step_extra[(s, r)] += late[r]
                    a = arrive[r]
                    end = latest + transfer + r
                    host_late = late[r] > 0 and config.cause == "host"
                    pre_end = a - late[r] if host_late else a
                    pre_start = b + JITTER_US * r - PRE_US
                    kernel(r, "sm90_xmma_gemm_bf16bf16_bf16f32", pre_start, pre_end, COMPUTE_STREAM,
                           pre_start - 20)
                    size_args = {"Collective name": cname,
                                 "In msg nelems": nelems // len(members) if kind == "all_gather"
                                 else nelems, "Out msg nelems": nelems, "dtype": dtype,
                                 "Group size": len(members), "Process Group Name": gname,
                                 "Process Group Description": gkind,
                                 "Process Group Ranks": str(members)}
                    if config.with_seq:
                        size_args["Seq"] = q
                    on_kernel = size_args if describe == "kernel" else None
                    on_op = size_args if describe in ("kernel", "record_param_comms") else {}
                    annotation = None
                    if describe == "nccl_annotation":
                        type_name = {"Float": "float", "BFloat16": "c10::BFloat16"}[dtype]
                        dims = ([[nelems], [nelems // len(members)]] if kind == "all_gather"
                                else [[nelems]])
                        annotation = (f"nccl:{_NCCL_ANNOTATION[kind]}",
                                      {"Input Dims": dims, "Input type": [type_name] * len(dims)})
                    kernel(r, deepep if config.deepep else nccl, a, end, COMM_STREAM,
                           a - LAUNCH_BEFORE_US, on_kernel, on_op, annotation)
                    post = (a + POST_OFFSET_US, a + POST_OFFSET_US + POST_US)
                    kernel(r, "void at::native::vectorized_elementwise_kernel<4>", *post,
                           COMPUTE_STREAM, a - 2)
                    busy[r] += [(pre_start, end)] if not host_late else [(pre_start, pre_end),
                                                                        (a, end)]
                    compute[r] += [(pre_start, pre_end), post]
                    comm[r].append((a, end, POST_US))
                    idle_before = pre_start - prev_end[r] + (late[r] if host_late else 0)
                    prev_end[r] = end
                    bytes_ = nelems * esize
                    algbw = bytes_ / ((end - latest) * 1000)
                    truth.append({
                        "_order": (b + JITTER_US * members[0], gname),
                        "group": gname if grouped else "",
                        "type": _true_type(kind, describe, config.deepep), "seq": q if (
                            config.with_seq and grouped) else -1, "rank": r,
                        "step": FIRST_STEP + s, "bytes": float(bytes_) if named
                        else float("nan"), "group_size": len(members) if grouped else n,
                        "start_us": float(us(a)), "end_us": float(us(end)),
                        "duration_us": float(end - a), "skew_us": float(latest - min(arrive.values())),
                        "wait_us": float(latest - a), "transfer_us": float(end - latest),
                        "algbw_gbps": algbw if named else float("nan"),
                        "busbw_gbps": algbw * BUS[kind](len(members)) if named
                        else float("nan"),
                        "exposed_us": float(end - a - POST_US),
                        "idle_before_us": float(idle_before),
                        "launch_late": host_late,
                        "is_last": r == max(members, key=lambda m: (arrive[m], -m)),
                    })
    # ProfilerSteps, a partial last step, and the true step breakdown
    for r in range(n):
        for s in range(config.steps):
            dur = STEP_SPAN_US + 10 * r + step_extra[(s, r)]
            events[r].append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{FIRST_STEP + s}",
                              "pid": 1, "tid": 1, "ts": us(s * STEP_US), "dur": dur, "args": {}})
            steps.append(_true_step(r, s, dur, busy[r], compute[r], comm[r], config.steps))
        t_last = config.steps * STEP_US
        events[r].append({"ph": "X", "cat": "user_annotation", "name":
                          f"ProfilerStep#{FIRST_STEP + config.steps}", "pid": 1, "tid": 1,
                          "ts": us(t_last), "dur": 500, "args": {}})
        kernel(r, "sm90_xmma_gemm_bf16bf16_bf16f32", t_last + 100, t_last + 200, COMPUTE_STREAM,
               t_last + 50)
    _finish_steps(steps)
    traces = {r: _trace(r, n, events[r], config, describe) for r in range(n)}
    truth.sort(key=lambda t: (t["_order"], t["rank"]))
    order = list(dict.fromkeys(t["_order"] for t in truth))
    for t in truth:
        t["collective"] = order.index(t.pop("_order"))
    return CollectiveJob(config, traces, truth, _true_stragglers(truth, n, steps), steps)


def _true_step(r, s, dur, busy, compute, comm, n_steps) -> dict:
    t0, t1 = s * STEP_US, s * STEP_US + dur
    inside = [(a, e) for a, e in busy if t0 <= a and e <= t1]
    comp = sum(e - a for a, e in compute if t0 <= a and e <= t1)
    exposed = sum(e - a - post for a, e, post in comm if t0 <= a and e <= t1)
    union = sum(e - a for a, e in inside)
    idle = dur - union
    # gaps between busy periods are host waits (every period starts with a kernel launched after
    # the previous one ended); the lead gap of the first step and the tail of the last are 'other'
    other = (inside[0][0] - t0 if s == 0 else 0) + (t1 - inside[-1][1] if s == n_steps - 1 else 0)
    return {"rank": r, "step": FIRST_STEP + s, "step_time_us": float(dur),
            "computation_us": float(comp),  # a rank's computation kernels never overlap
            "exposed_comm_us": float(exposed), "memory_us": 0.0, "other_us": 0.0,
            "step_idle_host_wait_us": float(idle - other), "step_idle_kernel_wait_us": 0.0,
            "step_idle_other_us": float(other), "step_idle_us": float(idle)}


# the name ProcessGroupNCCL's annotation gives each type (torch 2.0/2.1)
_NCCL_ANNOTATION = {"all_reduce": "all_reduce", "all_gather": "_all_gather_base",
                    "all_to_all": "all_to_all"}


def _true_type(kind: str, describe: str, deepep: bool) -> str:
    if deepep:
        return {"all_reduce": "ep_dispatch", "all_gather": "ep_combine", "all_to_all": "ep_notify"}[kind]
    if describe == "none" and kind == "all_to_all":
        return "send_recv"  # the kernel's name (SendRecv) is all there is
    return kind


def _finish_steps(steps: list[dict]) -> None:
    by_step: dict[int, list[dict]] = {}
    for row in steps:
        by_step.setdefault(row["step"], []).append(row)
    for rows in by_step.values():
        times = sorted(x["step_time_us"] for x in rows)
        k = len(times)
        median = (times[(k - 1) // 2] + times[k // 2]) / 2
        slow = max(rows, key=lambda x: (x["step_time_us"], -x["rank"]))
        for x in rows:
            x["step_slowest_rank"] = slow["rank"]
            x["step_margin_us"] = slow["step_time_us"] - median
    steps.sort(key=lambda x: (x["step"], x["rank"]))


def _true_stragglers(truth: list[dict], n: int, steps: list[dict]) -> list[dict]:
    out = {r: {"rank": r, "times_last": 0, "instances": 0, "wait_caused_us": 0.0, "_late": [],
               "late_host_us": 0.0, "late_other_us": 0.0, "late_busy_us": 0.0} for r in range(n)}
    by_instance: dict[int, list[dict]] = {}
    for t in truth:
        by_instance.setdefault(t["collective"], []).append(t)
    waits: dict[tuple[int, int], list[tuple[float, float]]] = {}  # (culprit, waiter) -> intervals
    for rows in by_instance.values():
        first = min(t["start_us"] for t in rows)
        for t in rows:
            o = out[t["rank"]]
            o["instances"] += 1
            o["_late"].append(t["start_us"] - first)
            if t["is_last"] and t["skew_us"] > 0:
                o["times_last"] += 1
                for x in rows:  # a rank waits at most as long as its own collective ran
                    if x is not t and x["wait_us"] > 0:
                        waits.setdefault((t["rank"], x["rank"]), []).append(
                            (x["start_us"], x["start_us"] + min(x["wait_us"], x["duration_us"])))
                others = sorted(x["idle_before_us"] for x in rows if x is not t)
                k = len(others)
                median = (others[(k - 1) // 2] + others[k // 2]) / 2
                idle = min(max(t["idle_before_us"] - median, 0.0), t["skew_us"])
                o["late_host_us" if t["launch_late"] else "late_other_us"] += idle
                o["late_busy_us"] += t["skew_us"] - idle
    for (culprit, _), spans in waits.items():  # overlapping waits of one rank count once
        end = float("-inf")
        for a, b in sorted(spans):
            out[culprit]["wait_caused_us"] += max(b - max(a, end), 0.0)
            end = max(end, b)
    analysed = {t["step"] for t in truth}
    times = sorted(x["step_time_us"] for x in steps if x["step"] in analysed)
    k = len(times)
    median_step = (times[(k - 1) // 2] + times[k // 2]) / 2
    rows = []
    for o in out.values():
        late = o.pop("_late")
        o["mean_lateness_us"] = sum(late) / len(late)
        for col in ("late_host_us", "late_other_us", "late_busy_us"):  # per collective it was last
            o[col] /= max(o["times_last"], 1)
        o["wait_caused_per_step_us"] = o["wait_caused_us"] / len(analysed)
        o["wait_caused_pct_of_step"] = o["wait_caused_per_step_us"] / median_step * 100
        rows.append(o)
    return sorted(rows, key=lambda o: (-o["wait_caused_us"], o["rank"]))


def _trace(rank: int, n: int, events: list[dict], config, describe: str) -> dict[str, Any]:
    pg = [{"pg_name": "0", "pg_desc": "default_pg", "pg_size": n, "ranks": list(range(n))}]
    return {
        "schemaVersion": 1,
        "distributedInfo": {"backend": "nccl", "rank": rank, "world_size": n, "pg_count": 1,
                            "pg_config": pg},
        "deviceProperties": [{"id": rank, "name": "NVIDIA H100 80GB HBM3"}],
        "traceEvents": sorted(events, key=lambda e: e["ts"]),
    }
