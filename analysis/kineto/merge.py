"""One Chrome-trace JSON (gzip) holding every rank, for Perfetto (ui.perfetto.dev) or chrome://tracing.

``merge_traces({rank: url}, out_path)`` reads each rank's Kineto trace as written (every event, every
field; timestamps kept exact as decimals) and writes one document:

- each rank's processes get new integer pids, ``rank * PID_STRIDE + i`` (Kineto's GPU pids are device
  indices and its CPU pids OS pids, so ranks collide; its ``"Spans"`` pid is a string), named
  ``"rank N · CPU"`` / ``"rank N · GPU d"`` by ``process_name`` metadata events, ordered by rank with
  ``process_sort_index``; threads keep their ids (they are scoped by pid);
- flow events (``ac2g`` CPU→GPU arrows) keep their pairs: ids become ``id + (rank + 1) *
  FLOW_ID_STRIDE`` so that equal correlation ids of different ranks do not join;
- ``align="first_collective"`` shifts each rank's clock so that its first communication kernel ends
  when the first rank's does (collectives end together; host clocks drift); ``None`` keeps clocks;
- filters keep a 64-rank job openable: ``ranks``, ``steps`` (ProfilerStep numbers: the CPU events
  starting inside those steps, the GPU events and flows they launched, and metadata), ``gpu_only``
  (GPU processes only; flows, whose CPU end is gone, dropped).

``displayTimeUnit`` and metadata events follow the JSON trace format Perfetto imports. The top-level
``mergedRanks`` records, per rank, the source, the pid map, the flow-id offset, the clock shift and
the rank's own top-level keys (``distributedInfo``...), so ``split_merged_trace`` gives each rank's
document back and ``read_merged_trace`` parses them into a ``Trace`` (same analyses as the sources).
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

import msgspec
from isal import igzip

from analysis.errors import ConfigError, CorruptTraceError, ExportError
from analysis.kineto.model import RankMeta, RankTrace, Trace
from analysis.kineto.parse import parse_trace_bytes
from analysis.kineto.sources import read_trace_bytes

PID_STRIDE = 1000  # pids per rank in the merged trace
FLOW_ID_STRIDE = 10**12  # flow ids per rank (Kineto's are correlation ids, far below this)
_GPU_CATS = frozenset(("kernel", "Kernel", "gpu_memcpy", "Memcpy", "gpu_memset", "Memset",
                       "cuda_sync", "gpu_user_annotation", "mtia_ccp_events"))
_FLOW_PHASES = frozenset(("s", "t", "f"))
_PROCESS_META = frozenset(("process_name", "process_sort_index", "process_labels"))
_STEP = re.compile(r"ProfilerStep\s*#\s*(\d+)")
# the default kernel patterns' communication kernels, for clock alignment
_COMM = re.compile(r"^nccl|ncclKernel|^rccl|^hccl|cross_device_reduce|(?i:nvshmem)")
_DECODER = msgspec.json.Decoder(float_hook=Decimal)  # exact timestamps
_ENCODER = msgspec.json.Encoder(decimal_format="number")


@dataclass
class MergedRank:
    """What the merge did to one rank (also written under ``mergedRanks``)."""

    rank: int
    source: str
    pids: dict[int, Any] = field(default_factory=dict)  # new pid → original pid
    flow_id_offset: int = 0
    shift_ns: int = 0
    events: int = 0  # events written (metadata included)


def _is_gpu_event(e: dict) -> bool:
    args = e.get("args")
    return e.get("cat") in _GPU_CATS or (isinstance(args, dict) and "stream" in args
                                          and e.get("cat") not in ("cuda_runtime", "cuda_driver"))


def _ns(value) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int | float | Decimal):
        return None
    return int(Decimal(value) * 1000)


def _first_collective_end_ns(events: list[dict]) -> int | None:
    ends = [
        _ns(e["ts"]) + _ns(e.get("dur", 0))
        for e in events
        if e.get("ph") == "X" and _is_gpu_event(e) and _COMM.search(str(e.get("name", "")))
        and _ns(e.get("ts")) is not None and _ns(e.get("dur", 0)) is not None
    ]
    return min(ends) if ends else None


def _step_filter(events: list[dict], steps: set[int], rank: int) -> list[dict]:
    """CPU events starting inside the chosen steps, the GPU events and flows they launched."""
    spans = [
        (_ns(e["ts"]), _ns(e["ts"]) + _ns(e.get("dur", 0)))
        for e in events
        if e.get("ph") == "X" and (m := _STEP.match(str(e.get("name", "")))) and
        int(m.group(1)) in steps and _ns(e.get("ts")) is not None
    ]
    if not spans:
        warnings.warn(f"rank {rank}: none of the profiler steps {sorted(steps)} is in the trace; "
                      "only its metadata is written", stacklevel=4)
    lo, hi = (min(s for s, _ in spans), max(e for _, e in spans)) if spans else (1, 0)

    def in_window(e) -> bool:
        ts = _ns(e.get("ts"))
        return ts is not None and lo <= ts < hi

    correlations = {
        (e.get("args") or {}).get("correlation")
        for e in events
        if e.get("ph") == "X" and not _is_gpu_event(e) and in_window(e)
    } - {None}

    def keep(e) -> bool:
        ph = e.get("ph")
        if ph == "M":
            return True
        if ph in _FLOW_PHASES:
            return e.get("id") in correlations
        if _is_gpu_event(e):
            return (e.get("args") or {}).get("correlation") in correlations
        return in_window(e)

    return [e for e in events if keep(e)]


def _rank_events(doc: dict, rank: int, info: MergedRank, *, steps, gpu_only) -> list[dict]:
    events = [e for e in doc.get("traceEvents") or [] if isinstance(e, dict)]
    if steps is not None:
        events = _step_filter(events, set(steps), rank)
    gpu_pids = {e.get("pid") for e in events if _is_gpu_event(e)}
    if gpu_only:
        events = [e for e in events if e.get("pid") in gpu_pids and e.get("ph") not in _FLOW_PHASES]
    old_pids = list(dict.fromkeys(e.get("pid") for e in events))
    if len(old_pids) >= PID_STRIDE:
        raise ConfigError(f"rank {rank} has {len(old_pids)} processes; at most {PID_STRIDE - 1}")
    new_pid = {old: rank * PID_STRIDE + i for i, old in enumerate(old_pids)}
    info.pids = {v: k for k, v in new_pid.items()}
    shift = Decimal(info.shift_ns) / 1000
    out = []
    names = {}
    for e in events:
        if e.get("ph") == "M" and e.get("name") in _PROCESS_META:
            if e.get("name") == "process_name":
                names[e.get("pid")] = (e.get("args") or {}).get("name")
            continue
        e = dict(e)
        e["pid"] = new_pid[e.get("pid")]
        if shift and isinstance(e.get("ts"), int | Decimal) and not isinstance(e.get("ts"), bool):
            e["ts"] = e["ts"] + shift
        if e.get("ph") in _FLOW_PHASES and isinstance(e.get("id"), int):
            e["id"] = e["id"] + info.flow_id_offset
        out.append(e)
    cpu_pids = [p for p in old_pids if p not in gpu_pids and isinstance(p, int)]
    for old, pid in new_pid.items():
        if old in gpu_pids:
            label = f"GPU {old}"
        elif isinstance(old, int):
            label = "CPU" if len(cpu_pids) == 1 else f"CPU (pid {old})"
        else:
            label = str(old) or "unnamed"
        args = {"name": f"rank {rank} · {label}"}
        if names.get(old):
            args["original_name"] = names[old]
        out.append({"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": args})
        out.append({"ph": "M", "name": "process_sort_index", "pid": pid, "tid": 0,
                    "args": {"sort_index": pid}})
    info.events = len(out)
    return out


def merge_traces(
    sources: Mapping[int, str],
    out_path,
    *,
    ranks: Iterable[int] | None = None,
    steps: Iterable[int] | None = None,
    gpu_only: bool = False,
    align: str | None = None,
    storage_options: Mapping[str, Any] | None = None,
) -> list[MergedRank]:
    """Write the merged trace of ``sources`` (``{rank: path or URL}``) to ``out_path`` (gzip JSON).

    Returns what was done per rank. Raises ``ConfigError`` for bad options, ``CorruptTraceError``
    for a source that is not a trace document, ``ExportError`` when the output cannot be written.
    """
    if align not in (None, "first_collective"):
        raise ConfigError(f"align must be None or 'first_collective', not {align!r}")
    chosen = sorted(sources) if ranks is None else [int(r) for r in ranks]
    missing = [r for r in chosen if r not in sources]
    if missing:
        raise ConfigError(f"ranks {missing} are not in the trace; ranks present: {sorted(sources)}")
    docs = {}
    for r in chosen:
        data = read_trace_bytes(sources[r], storage_options)
        doc = _DECODER.decode(igzip.decompress(data) if data[:2] == b"\x1f\x8b" else data)
        if not isinstance(doc, dict) or not isinstance(doc.get("traceEvents"), list):
            raise CorruptTraceError(sources[r], "not a Kineto trace document (no traceEvents list)")
        docs[r] = doc
    infos = {r: MergedRank(rank=r, source=str(sources[r]), flow_id_offset=(r + 1) * FLOW_ID_STRIDE)
             for r in chosen}
    if align == "first_collective" and chosen:
        ends = {r: _first_collective_end_ns(d["traceEvents"]) for r, d in docs.items()}
        ref = next((ends[r] for r in chosen if ends[r] is not None), None)
        for r in chosen:
            if ends[r] is None or ref is None:
                warnings.warn(f"rank {r}: no communication kernel to align on; clock kept",
                              stacklevel=2)
            else:
                infos[r].shift_ns = ref - ends[r]
    _write(out_path, docs, infos, steps=steps, gpu_only=gpu_only)
    return [infos[r] for r in chosen]


def _write(out_path, docs, infos, *, steps, gpu_only) -> None:
    import fsspec  # the kineto layer's I/O dependency; imported only when writing

    merged_meta = {}
    try:
        with fsspec.open(str(out_path), "wb") as raw, igzip.open(raw, "wb") as out:
            out.write(b'{"displayTimeUnit":"ms","traceEvents":[')
            first = True
            for r, doc in docs.items():
                events = _rank_events(doc, r, infos[r], steps=steps, gpu_only=gpu_only)
                if events:
                    body = _ENCODER.encode(events)[1:-1]
                    out.write(body if first else b"," + body)
                    first = False
                top = {k: v for k, v in doc.items() if k != "traceEvents"}
                merged_meta[str(r)] = {
                    "source": infos[r].source, "pids": {str(k): v for k, v in infos[r].pids.items()},
                    "flow_id_offset": infos[r].flow_id_offset, "shift_ns": infos[r].shift_ns,
                    "top": top,
                }
            out.write(b'],"mergedRanks":' + _ENCODER.encode(merged_meta) + b"}")
    except OSError as exc:
        raise ExportError(out_path, f"cannot write the merged trace ({exc})") from None


def split_merged_trace(data: bytes, source: str = "merged trace") -> dict[int, dict]:
    """Each rank's document back from a merged trace: original pids, flow ids and top-level keys
    (timestamps stay shifted if the merge aligned clocks; process-name metadata is the merge's)."""
    if data[:2] == b"\x1f\x8b":
        data = igzip.decompress(data)
    doc = _DECODER.decode(data)
    merged = doc.get("mergedRanks") if isinstance(doc, dict) else None
    if not isinstance(merged, dict):
        raise CorruptTraceError(source, "not a merged trace (no mergedRanks)")
    owner = {}
    for r, m in merged.items():
        for new, old in m["pids"].items():
            owner[int(new)] = (int(r), old)
    docs = {int(r): {**m["top"], "traceEvents": []} for r, m in merged.items()}
    for e in doc["traceEvents"]:
        rank, old = owner[e["pid"]]
        e = dict(e, pid=old)
        if e.get("ph") in _FLOW_PHASES and isinstance(e.get("id"), int):
            e["id"] -= merged[str(rank)]["flow_id_offset"]
        docs[rank]["traceEvents"].append(e)
    return docs


def read_merged_trace(data: bytes, source: str = "merged trace") -> Trace:
    """A merged trace parsed back into one ``RankTrace`` per rank."""
    ranks: dict[int, RankTrace] = {}
    for r, doc in split_merged_trace(data, source).items():
        rt = parse_trace_bytes(_ENCODER.encode(doc), f"{source}#rank{r}")
        rt.meta = RankMeta(**{**rt.meta.__dict__, "rank": r})
        ranks[r] = rt
    return Trace(ranks, source=source)
