"""Tiny files of other profilers, written from plain records, so tests know every answer.

- :func:`write_nsys_sqlite`: an SQLite database with the subset of Nsight Systems' export schema
  that ``analysis.formats.nsys`` reads (``StringIds``, ``CUPTI_ACTIVITY_KIND_KERNEL`` / ``MEMCPY`` /
  ``MEMSET`` / ``RUNTIME``, ``NVTX_EVENTS``, ``ENUM_NSYS_EVENT_TYPE``);
- :func:`xspace_bytes`: an XPlane ``XSpace`` protobuf, encoded by a small wire-format encoder;
- :func:`rocprof_json`: a rocprofv3 JSON document.

Times are integer nanoseconds everywhere (XPlane's picoseconds are made from them).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

# --- Nsight Systems ---------------------------------------------------------------------------


def global_pid(pid: int) -> int:
    """nsys's serialised GlobalId of a process (the OS pid in bits 24-47)."""
    return pid << 24


def global_tid(pid: int, tid: int) -> int:
    return (pid << 24) | tid


@dataclass
class NsysGpuOp:
    """A kernel (``bytes`` None), memcpy (``copy_kind`` set) or memset (``mem_kind`` set)."""

    start: int
    end: int
    device: int
    stream: int
    correlation: int
    pid: int
    name: str = ""
    nbytes: int | None = None
    copy_kind: int | None = None  # 1 HtoD, 2 DtoH, 8 DtoD, ...
    src_kind: int = 2
    dst_kind: int = 2
    mem_kind: int | None = None


@dataclass
class NsysCall:
    """A CUDA runtime call (``name`` as nsys writes it, e.g. ``cudaLaunchKernel_v7000``) or, with
    ``nvtx=True``, an NVTX push/pop range."""

    start: int
    end: int
    pid: int
    tid: int
    name: str
    correlation: int | None = None
    nvtx: bool = False


@dataclass
class NsysReport:
    gpu: list[NsysGpuOp] = field(default_factory=list)
    cpu: list[NsysCall] = field(default_factory=list)


def write_nsys_sqlite(path, report: NsysReport) -> None:
    """Write ``report`` as an nsys-like SQLite export at ``path``."""
    conn = sqlite3.connect(path)
    strings: dict[str, int] = {}

    def sid(text: str) -> int:
        return strings.setdefault(text, len(strings) + 1)

    base = ("start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER NOT NULL, "
            "contextId INTEGER, streamId INTEGER NOT NULL, correlationId INTEGER, globalPid INTEGER")
    with conn:
        conn.execute("CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT NOT NULL)")
        conn.execute(f"CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL ({base}, demangledName INTEGER, "
                     "shortName INTEGER, gridX INTEGER, blockX INTEGER)")
        conn.execute(f"CREATE TABLE CUPTI_ACTIVITY_KIND_MEMCPY ({base}, bytes INTEGER, "
                     "copyKind INTEGER, srcKind INTEGER, dstKind INTEGER)")
        conn.execute(f"CREATE TABLE CUPTI_ACTIVITY_KIND_MEMSET ({base}, value INTEGER, "
                     "bytes INTEGER, memKind INTEGER)")
        conn.execute("CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME (start INTEGER, end INTEGER, "
                     "eventClass INTEGER, globalTid INTEGER, correlationId INTEGER, "
                     "nameId INTEGER, returnValue INTEGER)")
        conn.execute("CREATE TABLE NVTX_EVENTS (start INTEGER, end INTEGER, eventType INTEGER, "
                     "text TEXT, globalTid INTEGER, textId INTEGER, domainId INTEGER)")
        conn.execute("CREATE TABLE ENUM_NSYS_EVENT_TYPE (id INTEGER PRIMARY KEY, name TEXT, "
                     "label TEXT)")
        conn.executemany("INSERT INTO ENUM_NSYS_EVENT_TYPE VALUES (?, ?, ?)",
                         [(34, "NvtxMark", "NvtxMark"), (59, "NvtxPushPopRange", "NvtxPushPopRange"),
                          (60, "NvtxStartEndRange", "NvtxStartEndRange")])
        for op in report.gpu:
            common = (op.start, op.end, op.device, 1, op.stream, op.correlation, global_pid(op.pid))
            if op.copy_kind is not None:
                conn.execute("INSERT INTO CUPTI_ACTIVITY_KIND_MEMCPY VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                             (*common, op.nbytes, op.copy_kind, op.src_kind, op.dst_kind))
            elif op.mem_kind is not None:
                conn.execute("INSERT INTO CUPTI_ACTIVITY_KIND_MEMSET VALUES (?,?,?,?,?,?,?,?,?,?)",
                             (*common, 0, op.nbytes, op.mem_kind))
            else:
                conn.execute("INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                             (*common, sid(op.name), sid(op.name[:8]), 1, 128))
        for call in report.cpu:
            if call.nvtx:
                conn.execute("INSERT INTO NVTX_EVENTS VALUES (?,?,?,?,?,?,?)",
                             (call.start, call.end, 59, call.name,
                              global_tid(call.pid, call.tid), None, 0))
            else:
                conn.execute("INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES (?,?,?,?,?,?,?)",
                             (call.start, call.end, 0, global_tid(call.pid, call.tid),
                              call.correlation, sid(call.name), 0))
        conn.executemany("INSERT INTO StringIds VALUES (?, ?)",
                         [(i, s) for s, i in strings.items()])
    conn.close()


# --- XPlane -----------------------------------------------------------------------------------


def _varint(value: int) -> bytes:
    value &= (1 << 64) - 1
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def pb_int(number: int, value: int) -> bytes:
    """A varint field."""
    return _varint(number << 3) + _varint(value)


def pb_bytes(number: int, value: bytes | str) -> bytes:
    """A length-delimited field."""
    data = value.encode() if isinstance(value, str) else value
    return _varint((number << 3) | 2) + _varint(len(data)) + data


@dataclass
class XEvent:
    name: str
    start_ns: int  # absolute
    dur_ns: int
    stats: dict[str, int | str] = field(default_factory=dict)


@dataclass
class XLine:
    id: int
    name: str
    events: list[XEvent]
    timestamp_ns: int = 0


def xplane(name: str, lines: Sequence[XLine], plane_id: int = 0) -> bytes:
    """One ``XPlane`` message (its event and stat metadata built from the names used)."""
    event_ids: dict[str, int] = {}
    stat_ids: dict[str, int] = {}
    body = pb_int(1, plane_id) + pb_bytes(2, name)
    for line in lines:
        encoded = pb_int(1, line.id) + pb_bytes(2, line.name) + pb_int(3, line.timestamp_ns)
        for e in line.events:
            meta = event_ids.setdefault(e.name, len(event_ids) + 1)
            stats = b""
            for key, value in e.stats.items():
                sid = stat_ids.setdefault(key, len(stat_ids) + 1)
                field_ = pb_int(3, value) if isinstance(value, int) else pb_bytes(5, value)
                stats += pb_bytes(4, pb_int(1, sid) + field_)
            offset_ps = (e.start_ns - line.timestamp_ns) * 1000
            encoded += pb_bytes(4, pb_int(1, meta) + pb_int(2, offset_ps)
                                + pb_int(3, e.dur_ns * 1000) + stats)
        body += pb_bytes(3, encoded)
    for text, ident in event_ids.items():
        body += pb_bytes(4, pb_int(1, ident) + pb_bytes(2, pb_int(1, ident) + pb_bytes(2, text)))
    for text, ident in stat_ids.items():
        body += pb_bytes(5, pb_int(1, ident) + pb_bytes(2, pb_int(1, ident) + pb_bytes(2, text)))
    return body


def xspace_bytes(planes: Iterable[bytes]) -> bytes:
    """An ``XSpace`` of encoded planes (see :func:`xplane`)."""
    return b"".join(pb_bytes(1, p) for p in planes) + pb_bytes(4, "test-host")


# --- rocprofv3 --------------------------------------------------------------------------------

_KINDS = ["NONE", "HSA_CORE_API", "HSA_AMD_EXT_API", "HSA_IMAGE_EXT_API", "HSA_FINALIZE_EXT_API",
          "HIP_RUNTIME_API", "HIP_COMPILER_API", "MARKER_CORE_API", "MARKER_CONTROL_API",
          "MARKER_NAME_API", "MEMORY_COPY", "KERNEL_DISPATCH"]
HIP_OPERATIONS = ["hipApiName", "hipLaunchKernel", "hipMemcpyAsync"]
COPY_OPERATIONS = ["MEMORY_COPY_NONE", "MEMORY_COPY_HOST_TO_HOST", "MEMORY_COPY_HOST_TO_DEVICE",
                   "MEMORY_COPY_DEVICE_TO_HOST", "MEMORY_COPY_DEVICE_TO_DEVICE"]


def rocprof_json(
    dispatches: Sequence[tuple[int, int, int, int, int, int]],
    kernels: dict[int, str],
    api: Sequence[tuple[int, int, str, int]] = (),
    copies: Sequence[tuple[int, int, str, int, int]] = (),
    gpus: int = 2,
    pid: int = 4242,
) -> dict:
    """A rocprofv3 JSON document. ``dispatches``: ``(start, end, gpu index, stream, kernel id,
    correlation)``; ``kernels``: kernel id → name; ``api``: ``(start, end, hip operation name,
    correlation)``; ``copies``: ``(start, end, MEMORY_COPY_* operation, gpu index, bytes)``."""
    agents = [{"id": {"handle": 100}, "type": 1, "name": "CPU", "logical_node_type_id": 0}]
    agents += [{"id": {"handle": 200 + g}, "type": 2, "name": "gfx942", "logical_node_type_id": g}
               for g in range(gpus)]
    operations = {5: HIP_OPERATIONS, 10: COPY_OPERATIONS,
                  11: ["KERNEL_DISPATCH_NONE", "KERNEL_DISPATCH_ENQUEUE", "KERNEL_DISPATCH_COMPLETE"]}
    return {"rocprofiler-sdk-tool": [{
        "metadata": {"pid": pid},
        "agents": agents,
        "kernel_symbols": [{"kernel_id": k, "kernel_name": f"{n}.kd", "formatted_kernel_name": n}
                           for k, n in kernels.items()],
        "strings": {"buffer_records": [{"kind": k, "operations": operations.get(i, [])}
                                       for i, k in enumerate(_KINDS)]},
        "buffer_records": {
            "kernel_dispatch": [
                {"kind": 11, "operation": 2, "thread_id": pid,
                 "correlation_id": {"internal": corr, "external": 0},
                 "start_timestamp": s, "end_timestamp": e,
                 "dispatch_info": {"agent_id": {"handle": 200 + g}, "queue_id": {"handle": 1},
                                   "kernel_id": k},
                 "stream_id": {"handle": stream}}
                for s, e, g, stream, k, corr in dispatches],
            "hip_api": [
                {"kind": 5, "operation": HIP_OPERATIONS.index(op), "thread_id": pid + 1,
                 "correlation_id": {"internal": corr, "external": 0},
                 "start_timestamp": s, "end_timestamp": e}
                for s, e, op, corr in api],
            "memory_copy": [
                {"kind": 10, "operation": COPY_OPERATIONS.index(op), "thread_id": pid,
                 "correlation_id": {"internal": 0, "external": 0},
                 "start_timestamp": s, "end_timestamp": e,
                 "dst_agent_id": {"handle": 200 + g}, "src_agent_id": {"handle": 100},
                 "bytes": nbytes}
                for s, e, op, g, nbytes in copies],
        },
    }]}
