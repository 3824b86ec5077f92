"""One Chrome-trace JSON (gzip) holding every rank, for Perfetto (ui.perfetto.dev) or chrome://tracing.

``merge_traces({rank: url}, out_path)`` reads each rank's Kineto trace as written (every event, every
field; timestamps kept exact as decimals) and writes one document:

- each rank's processes get new integer pids, ``rank * PID_STRIDE + i`` (Kineto's GPU pids are device
  indices and its CPU pids OS pids, so ranks collide; its ``"Spans"`` pid is a string), named
  ``"rank N · CPU"`` / ``"rank N · GPU d"`` by ``process_name`` metadata events, ordered by rank with
  ``process_sort_index``; threads keep their ids (they are scoped by pid);
- flow events (``ac2g`` CPU→GPU arrows) keep their pairs: ids become ``id + (i + 1) *
  FLOW_ID_STRIDE``, ``i`` the rank's position among the ranks merged, so that equal correlation
  ids of different ranks do not join and stay below 2**53 (JSON readers hold numbers as doubles)
  for any selection of up to 9,006 ranks, whatever their numbers;
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
from contextlib import nullcontext
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

import msgspec
from isal import igzip

from analysis.errors import (
    ConfigError,
    CorruptTraceError,
    EmptySelectionError,
    ExportError,
    FormatNotSupportedError,
)
from analysis.io import gunzip_bounded
from analysis.kineto.model import RankMeta, RankTrace, Trace
from analysis.kineto.parse import parse_trace_bytes
from analysis.kineto.sources import read_trace_bytes
from analysis.kineto.steps import STEP_PATTERN

PID_STRIDE = 1000  # pids per rank in the merged trace
FLOW_ID_STRIDE = 10**12  # flow ids per rank (Kineto's are correlation ids, far below this)
_GPU_CATS = frozenset(("kernel", "Kernel", "gpu_memcpy", "Memcpy", "gpu_memset", "Memset",
                       "cuda_sync", "gpu_user_annotation", "mtia_ccp_events"))
_RUNTIME_CATS = frozenset(("cuda_runtime", "cuda_driver", "xpu_runtime", "Runtime"))
# events of these categories run on the CPU, whatever args they carry
_CPU_CATS = _RUNTIME_CATS | frozenset(("cpu_op", "Operator", "user_annotation", "python_function",
                                       "Python", "cpu_instant_event", "xpu_driver"))
_FLOW_PHASES = frozenset(("s", "t", "f"))
_PROCESS_META = frozenset(("process_name", "process_sort_index", "process_labels"))
_STEP = re.compile(STEP_PATTERN)
# the default kernel patterns' communication kernels, for clock alignment
_COMM = re.compile(r"^nccl|ncclKernel|^rccl|^hccl|cross_device_reduce|(?i:nvshmem)")
_ENCODER = msgspec.json.Encoder(decimal_format="number")


class _Args(msgspec.Struct, gc=False):
    stream: Any = None
    correlation: Any = None


class _Fields(msgspec.Struct, gc=False):
    """The fields the merge looks at; every event is also kept whole as raw JSON values."""

    ph: Any = None
    name: Any = None
    cat: Any = None
    pid: Any = None
    ts: Any = None  # float µs: for choosing events only, never written back
    dur: Any = None
    id: Any = None
    args: _Args | None = None


_TOP = msgspec.json.Decoder(dict[str, msgspec.Raw])
_FIELDS = msgspec.json.Decoder(list[_Fields])
_RAW_EVENTS = msgspec.json.Decoder(list[dict[str, msgspec.Raw]])
_NO_ARGS = _Args()


@dataclass
class MergedRank:
    """What the merge did to one rank (also written under ``mergedRanks``)."""

    rank: int
    source: str
    pids: dict[int, Any] = field(default_factory=dict)  # new pid → original pid
    flow_id_offset: int = 0
    shift_ns: int = 0
    events: int = 0  # events written (metadata included)
    in_steps: int = 0  # events (not metadata) in the steps asked for, before --gpu-only
    timed: int = 0  # events (not metadata) written


@dataclass
class _RankDoc:
    top: dict[str, Any]  # the rank's top-level keys but traceEvents, decoded
    fields: list[_Fields]
    raw: list[dict[str, msgspec.Raw]]  # the same events, every value as written


def _decode(data: bytes, source: str) -> _RankDoc:
    from analysis.formats import detect

    kind = detect(data[:4096])
    if kind != "kineto":  # an nsys export, an XPlane, a rocprofv3 file: read, but not merged
        raise FormatNotSupportedError(
            "merge", kind, ["Kineto JSON events to write (the merge copies each file's own "
                            "events; report, summary and compare read this file)"], source)
    data = gunzip_bounded(data, source, error=CorruptTraceError)  # the read limit applies here too
    try:
        top = _TOP.decode(data)
        events = top.pop("traceEvents")
        fields, raw = _FIELDS.decode(events), _RAW_EVENTS.decode(events)
        rest = {k: msgspec.json.decode(v) for k, v in top.items()}
    except (msgspec.DecodeError, KeyError, UnicodeDecodeError, RecursionError) as exc:
        raise CorruptTraceError(source, f"not a Kineto trace document ({exc})") from None
    return _RankDoc(rest, fields, raw)


def _is_gpu(f: _Fields) -> bool:
    """A GPU event: of a GPU category, or with a stream and a category that is no CPU-side one
    (torch.compile's Triton launch ops are ``cpu_op`` events with ``"stream": 0``: CPU work)."""
    args = f.args or _NO_ARGS
    return f.cat in _GPU_CATS or (args.stream is not None and f.cat not in _CPU_CATS)


def _exact_ns(raw: msgspec.Raw | None) -> int:
    return int(Decimal(bytes(raw).decode()) * 1000) if raw is not None else 0


def _first_collective_end_ns(doc: _RankDoc) -> int | None:
    ends = [
        _exact_ns(r.get("ts")) + _exact_ns(r.get("dur"))
        for f, r in zip(doc.fields, doc.raw, strict=True)
        if f.ph == "X" and _is_gpu(f) and isinstance(f.name, str) and _COMM.search(f.name)
        and isinstance(f.ts, int | float)
    ]
    return min(ends) if ends else None


def _step_keep(doc: _RankDoc, steps: set[int], rank: int) -> list[bool]:
    """CPU events starting inside the chosen steps, the GPU events and flows they launched."""
    spans = [
        (f.ts, f.ts + (f.dur or 0))
        for f in doc.fields
        if f.ph == "X" and isinstance(f.name, str) and (m := _STEP.match(f.name))
        and int(m.group(1)) in steps and isinstance(f.ts, int | float)
        and not _is_gpu(f)  # the GPU-side copy of a step annotation is not a step
    ]
    if not spans:
        warnings.warn(f"rank {rank}: none of the profiler steps {sorted(steps)} is in the trace; "
                      "only its metadata is written", stacklevel=4)
    lo, hi = (min(s for s, _ in spans), max(e for _, e in spans)) if spans else (1, 0)

    def in_window(f: _Fields) -> bool:
        return isinstance(f.ts, int | float) and lo <= f.ts < hi

    correlations = {
        (f.args or _NO_ARGS).correlation
        for f in doc.fields
        if f.ph == "X" and not _is_gpu(f) and in_window(f)
    } - {None}

    def keep(f: _Fields) -> bool:
        if f.ph == "M":
            return True
        if f.ph in _FLOW_PHASES:
            return f.id in correlations
        if _is_gpu(f):
            return (f.args or _NO_ARGS).correlation in correlations
        return in_window(f)

    return [keep(f) for f in doc.fields]


_PLAIN = (int, str, float, type(None))


def _hashable(value):
    return value if value.__class__ in _PLAIN else repr(value)


def _rank_events(doc: _RankDoc, rank: int, info: MergedRank, *, steps, gpu_only) -> list[dict]:
    fields, raws = doc.fields, doc.raw
    if steps is not None:
        keep = _step_keep(doc, set(steps), rank)
        fields = [f for f, k in zip(fields, keep, strict=True) if k]
        raws = [r for r, k in zip(raws, keep, strict=True) if k]
    info.in_steps = sum(f.ph != "M" for f in fields)
    pids = [_hashable(f.pid) for f in fields]
    gpu_pids = {p for f, p in zip(fields, pids, strict=True) if _is_gpu(f)}
    if gpu_only:
        keep = [p in gpu_pids and f.ph not in _FLOW_PHASES for f, p in zip(fields, pids, strict=True)]
        fields = [f for f, k in zip(fields, keep, strict=True) if k]
        raws = [r for r, k in zip(raws, keep, strict=True) if k]
        pids = [p for p, k in zip(pids, keep, strict=True) if k]
    old_pids = list(dict.fromkeys(pids))
    if len(old_pids) >= PID_STRIDE:
        raise ConfigError(f"rank {rank} has {len(old_pids)} processes; at most {PID_STRIDE - 1}")
    new_pid = {old: rank * PID_STRIDE + i for i, old in enumerate(old_pids)}
    new_raw = {old: msgspec.Raw(str(pid).encode()) for old, pid in new_pid.items()}
    info.pids = dict(zip(new_pid.values(), new_pid.keys(), strict=True))
    shift = Decimal(info.shift_ns) / 1000
    offset = info.flow_id_offset
    out, names = [], {}
    # the decoded dicts are this function's own: rewritten in place
    for f, raw, pid in zip(fields, raws, pids, strict=True):
        ph = f.ph
        if ph == "M" and f.name in _PROCESS_META:
            if f.name == "process_name" and "args" in raw:
                args = msgspec.json.decode(raw["args"])
                names[pid] = args.get("name") if isinstance(args, dict) else None
            continue
        raw["pid"] = new_raw[pid]
        if shift and f.ts.__class__ in (int, float):
            raw["ts"] = msgspec.Raw(_ENCODER.encode(Decimal(bytes(raw["ts"]).decode()) + shift))
        if ph in _FLOW_PHASES and f.id.__class__ is int:
            raw["id"] = msgspec.Raw(str(f.id + offset).encode())
        out.append(raw)
    cpu_pids = [p for p in old_pids if p not in gpu_pids and isinstance(p, int)]
    for old, pid in new_pid.items():
        if old in gpu_pids:
            label = f"GPU {old}"
        elif isinstance(old, int):
            label = "CPU" if len(cpu_pids) == 1 else f"CPU (pid {old})"
        else:
            label = str(old) if old not in (None, "") else "unnamed"
        args = {"name": f"rank {rank} · {label}"}
        if names.get(old):
            args["original_name"] = names[old]
        out.append({"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": args})
        out.append({"ph": "M", "name": "process_sort_index", "pid": pid, "tid": 0,
                    "args": {"sort_index": pid}})
    info.events = len(out)
    info.timed = sum(f.ph != "M" for f in fields)
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
    """Write the merged trace of ``sources`` (``{rank: path or URL}``) to ``out_path`` (gzip JSON when
    its name ends in ``.gz``, plain JSON otherwise).

    Returns what was done per rank. Raises ``ConfigError`` for bad options, ``EmptySelectionError``
    when the ranks, steps and ``gpu_only`` select no event (nothing is written then),
    ``CorruptTraceError`` for a source that is not a trace document, ``ExportError`` when the output
    cannot be written. The file is written under a temporary name and moved in place when complete.
    """
    if align not in (None, "first_collective"):
        raise ConfigError(f"align must be None or 'first_collective', not {align!r}")
    if not isinstance(gpu_only, bool):
        raise ConfigError(f"gpu_only must be True or False, not {gpu_only!r}")
    if steps is not None:
        if isinstance(steps, int | str) or not isinstance(steps, Iterable):
            raise ConfigError(f"steps must be a list of ProfilerStep numbers (steps=[3]), not {steps!r}")
        steps = list(steps)
        if not steps or not all(isinstance(s, int) and not isinstance(s, bool) for s in steps):
            raise ConfigError(f"steps must be a non-empty list of ProfilerStep numbers, not {steps!r}")
    chosen = sorted(sources) if ranks is None else list(dict.fromkeys(int(r) for r in ranks))
    missing = [r for r in chosen if r not in sources]
    if missing:
        raise ConfigError(f"ranks {missing} are not in the trace; ranks present: {sorted(sources)}")
    infos = {r: MergedRank(rank=r, source=str(sources[r]), flow_id_offset=(i + 1) * FLOW_ID_STRIDE)
             for i, r in enumerate(chosen)}
    if align == "first_collective" and chosen:
        # one pass to find the first collectives (ranks are read again, one at a time, to write)
        ends = {r: _first_collective_end_ns(_decode(read_trace_bytes(sources[r], storage_options),
                                                    sources[r])) for r in chosen}
        ref = next((ends[r] for r in chosen if ends[r] is not None), None)
        for r in chosen:
            if ends[r] is None or ref is None:
                warnings.warn(f"rank {r}: no communication kernel to align on; clock kept",
                              stacklevel=2)
            else:
                infos[r].shift_ns = ref - ends[r]
    _write(out_path, sources, infos, steps=steps, gpu_only=gpu_only,
           storage_options=storage_options)
    return [infos[r] for r in chosen]


def _empty_selection(infos: Mapping[int, MergedRank], steps, gpu_only: bool) -> str:
    """Why the selection holds no event, in the options' words."""
    ranks = sorted(infos)
    if steps is not None and not any(i.in_steps for i in infos.values()):
        return (f"--steps {','.join(map(str, sorted(steps)))} matched no ProfilerStep on ranks "
                f"{ranks}")
    if gpu_only:
        return f"--gpu-only: ranks {ranks} have no GPU events (CPU-only traces)"
    return f"ranks {ranks} hold no events"


def _write(out_path, sources, infos, *, steps, gpu_only, storage_options) -> None:
    import fsspec  # the kineto layer's I/O dependency; imported only when writing

    fs, path = fsspec.core.url_to_fs(str(out_path))
    part = f"{path}.part"
    try:
        # per-rank warnings ("step 99 is not in rank 3") only matter when something is written
        with warnings.catch_warnings(record=True) as said:
            warnings.simplefilter("always")
            _write_merged(fs, part, sources, infos, steps=steps, gpu_only=gpu_only,
                          storage_options=storage_options,
                          gzip=str(out_path).endswith(".gz"))
        if not any(i.timed for i in infos.values()):
            raise EmptySelectionError(f"nothing to merge: {_empty_selection(infos, steps, gpu_only)}; "
                                      f"{out_path} not written")
        for w in said:
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
        fs.mv(part, path)
    except OSError as exc:
        raise ExportError(out_path, f"cannot write the merged trace ({exc})") from None
    finally:
        try:
            if fs.exists(part):
                fs.rm(part)
        except OSError:
            pass


def _write_merged(fs, part, sources, infos, *, steps, gpu_only, storage_options,
                  gzip: bool = True) -> None:
    """The merged document into ``part``: gzipped when the output's name ends in ``.gz``, plain
    JSON otherwise (gzip bytes under a ``.json`` name fooled ``json.load``)."""
    merged_meta = {}
    with fs.open(part, "wb") as raw, (igzip.open(raw, "wb") if gzip else nullcontext(raw)) as out:
        out.write(b'{"displayTimeUnit":"ms","traceEvents":[')
        first = True
        for r, info in infos.items():
            doc = _decode(read_trace_bytes(sources[r], storage_options), sources[r])
            events = _rank_events(doc, r, info, steps=steps, gpu_only=gpu_only)
            if events:
                body = _ENCODER.encode(events)[1:-1]
                out.write(body if first else b"," + body)
                first = False
            merged_meta[str(r)] = {
                "source": info.source, "pids": {str(k): v for k, v in info.pids.items()},
                "flow_id_offset": info.flow_id_offset, "shift_ns": info.shift_ns,
                "top": doc.top,
            }
        out.write(b'],"mergedRanks":' + _ENCODER.encode(merged_meta) + b"}")


def split_merged_trace(data: bytes, source: str = "merged trace") -> dict[int, bytes]:
    """Each rank's document (JSON bytes) back from a merged trace: original pids, flow ids and
    top-level keys (timestamps stay shifted if the merge aligned clocks; process-name metadata
    is the merge's)."""
    doc = _decode(data, source)
    merged = doc.top.get("mergedRanks")
    if not isinstance(merged, dict):
        raise CorruptTraceError(source, "not a merged trace (no mergedRanks)")
    owner = {}
    for r, m in merged.items():
        for new, old in m["pids"].items():
            owner[int(new)] = (int(r), msgspec.Raw(_ENCODER.encode(old)))
    events: dict[int, list] = {int(r): [] for r in merged}
    for f, raw in zip(doc.fields, doc.raw, strict=True):
        if f.pid not in owner:
            raise CorruptTraceError(source, f"event {f.name!r} has pid {f.pid!r}, which no rank owns")
        rank, old = owner[f.pid]
        raw = dict(raw)
        raw["pid"] = old
        if f.ph in _FLOW_PHASES and isinstance(f.id, int):
            raw["id"] = msgspec.Raw(str(f.id - merged[str(rank)]["flow_id_offset"]).encode())
        events[rank].append(raw)
    return {
        int(r): _ENCODER.encode({**m["top"], "traceEvents": events[int(r)]})
        for r, m in merged.items()
    }


def read_merged_trace(data: bytes, source: str = "merged trace") -> Trace:
    """A merged trace parsed back into one ``RankTrace`` per rank."""
    ranks: dict[int, RankTrace] = {}
    for r, text in split_merged_trace(data, source).items():
        rt = parse_trace_bytes(text, f"{source}#rank{r}")
        rt.meta = RankMeta(**{**rt.meta.__dict__, "rank": r})
        ranks[r] = rt
    return Trace(ranks, source=source)
