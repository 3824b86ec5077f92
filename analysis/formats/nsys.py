"""Nsight Systems SQLite exports (``nsys export --type sqlite``) → ``RankTrace`` s, with ``sqlite3``.

**Ranks.** One rank per (process, GPU) pair that ran GPU work (kernels, memcpy, memset), numbered
0, 1, ... in order of process id, then GPU (``deviceId``). A process's CPU-side rows (CUDA runtime
calls, NVTX ranges) go to every rank of that process. ``meta.rank_origin`` says which pair a rank
is, and ``get_trace_metadata()`` shows it.

**Rows** (times are nanoseconds in the export, kept as they are):

- ``CUPTI_ACTIVITY_KIND_KERNEL`` → ``kernel`` rows named by ``demangledName`` (``StringIds``);
  ``pid`` = ``device`` = ``deviceId``, ``tid`` = ``stream`` = ``streamId``, ``correlationId``;
- ``CUPTI_ACTIVITY_KIND_MEMCPY`` / ``MEMSET`` → ``gpu_memcpy`` / ``gpu_memset`` rows named as
  Kineto names them (``Memcpy HtoD (Pinned -> Device)``, ``Memset (Device)``), with ``bytes``;
- ``CUPTI_ACTIVITY_KIND_RUNTIME`` → ``cuda_runtime`` rows, names without nsys's API version suffix
  (``cudaLaunchKernel_v7000`` → ``cudaLaunchKernel``; a driver function's ``_v2``, part of its
  name as in Kineto's traces, stays: ``cuMemcpyHtoDAsync_v2``), with their ``correlationId``;
- ``NVTX_EVENTS`` push/pop and start/end ranges → rows on their thread: ranges that PyTorch's
  ``torch.autograd.profiler.emit_nvtx()`` writes for its operators (``aten::mm, seq = 12, op_id =
  40``) are ``cpu_op`` rows named by the operator (``aten::mm``), so the operator summary works
  (runtime calls belong to the operators open on their thread); other ranges ``user_annotation``.

Not read: CUDA synchronisation events, OS runtime, CPU samples, GPU metrics.
"""

from __future__ import annotations

import contextlib
import os
import re
import sqlite3
import tempfile

import numpy as np

from analysis.errors import CorruptTraceError, NotATraceError
from analysis.formats.frame import rank_trace
from analysis.kineto.model import RankMeta, RankTrace

# the runtime API version nsys appends (cudaLaunchKernel_v7000, cudaMemcpyAsync_v3020); a driver
# function's own _v2 (cuMemcpyHtoDAsync_v2, the symbol's name, as Kineto writes it too) stays
_VERSION_SUFFIX = re.compile(r"_v\d{4,}$")
# emit_nvtx's range text: the operator name, then ", seq = N", ", op_id = N", ", sizes = [...]"
_PYTORCH_OP = re.compile(r"^(?P<op>[A-Za-z_][\w.]*::[\w.]+)(?:, (?:seq|op_id|sizes|stashed seq)\b.*)?$")
# CUPTI's copyKind values (ENUM_CUDA_MEMCPY_OPER) as Kineto abbreviates them
_COPY_KINDS = {0: "Unknown", 1: "HtoD", 2: "DtoH", 3: "HtoA", 4: "AtoH", 5: "AtoA", 6: "AtoD",
               7: "DtoA", 8: "DtoD", 9: "HtoH", 10: "PtoP", 11: "HtoD", 12: "DtoH", 13: "DtoD"}
_MEM_KINDS = {0: "Pageable", 1: "Pinned", 2: "Device", 3: "Array", 4: "Managed",
              5: "Device Static", 6: "Managed Static", 7: "Unknown"}
_NVTX_RANGES = ("NvtxPushPopRange", "NvtxStartEndRange")
_NVTX_RANGE_IDS = (59, 60)  # their ids when the export has no ENUM_NSYS_EVENT_TYPE table
_PID_MASK = 0xFFFFFF


def _pid(global_id: int) -> int:
    """The OS process id inside an nsys GlobalId (bits 24-47)."""
    return (int(global_id) >> 24) & _PID_MASK


def _tid(global_tid: int) -> int:
    return int(global_tid) & _PID_MASK


def _check_size(data: bytes, source: str) -> None:
    """A truncated file, told by the header's page size (bytes 16-17) and page count (28-31)."""
    if len(data) < 100:
        raise CorruptTraceError(source, f"truncated SQLite database ({len(data)} bytes)")
    page_size = int.from_bytes(data[16:18], "big")
    page_size = 65536 if page_size == 1 else page_size
    expected = page_size * int.from_bytes(data[28:32], "big")
    if len(data) < expected:
        raise CorruptTraceError(
            source, f"truncated SQLite database: its header announces {expected:,} bytes, the "
            f"file has {len(data):,}")


@contextlib.contextmanager
def _connect(data: bytes, source: str):
    _check_size(data, source)
    conn = sqlite3.connect(":memory:")
    path = None
    try:
        if hasattr(conn, "deserialize"):  # Python >= 3.11: no temporary file
            conn.deserialize(data)
        else:  # pragma: no cover - Python 3.10
            fd, path = tempfile.mkstemp(suffix=".sqlite")
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            conn.close()
            conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        yield conn
    except sqlite3.DatabaseError as exc:
        raise CorruptTraceError(
            source, f"unreadable SQLite database ({exc}): truncated, damaged, or an nsys export "
            "schema this reader does not know") from None
    finally:
        conn.close()
        if path:
            os.unlink(path)


def parse_nsys(data: bytes, source: str) -> list[RankTrace]:
    """The ranks of one nsys SQLite export (see the module docstring).

    Raises ``CorruptTraceError`` for a damaged database and ``NotATraceError`` for an SQLite
    file without nsys's CUDA tables.
    """
    with _connect(data, source) as conn:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        gpu_tables = [t for t in ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY",
                                  "CUPTI_ACTIVITY_KIND_MEMSET") if t in tables]
        if "StringIds" not in tables or not gpu_tables:
            raise NotATraceError(
                source, "an SQLite database without nsys's StringIds and CUPTI_ACTIVITY_KIND_* "
                "tables: not an Nsight Systems export (or recorded without CUDA tracing)")
        strings = dict(conn.execute("SELECT id, value FROM StringIds"))
        gpu = _gpu_rows(conn, tables, strings)
        cpu = _cpu_rows(conn, tables, strings)
        gpu_names = _gpu_names(conn, tables)
    pairs = sorted({(int(p), int(d)) for p, d in zip(gpu["process"], gpu["device"], strict=True)})
    if not pairs:
        raise NotATraceError(source, "an nsys export without GPU activity (no kernel, memcpy or "
                             "memset): record with --trace=cuda")
    ranks = []
    for rank, (process, device) in enumerate(pairs):
        g = gpu["process"] == process
        g &= gpu["device"] == device
        c = cpu["process"] == process
        columns = {k: np.concatenate([np.asarray(gpu[k], dtype=object)[g],
                                      np.asarray(cpu[k], dtype=object)[c]])
                   for k in ("ts", "dur", "cat", "name", "pid", "tid", "stream", "correlation",
                             "device", "bytes")}
        meta = RankMeta(
            rank=rank, source=source, world_size=len(pairs),
            rank_origin=f"nsys: process {process}, GPU {device}",
            device_properties=[{"id": device, "name": gpu_names.get(device, "")}],
            source_format="nsys",
            other={"part": rank, "parts": len(pairs), "process": process, "gpu": device},
        )
        ranks.append(rank_trace(meta, columns))
    return ranks


def _query(conn, sql: str) -> list[tuple]:
    return conn.execute(sql).fetchall()


def _gpu_rows(conn, tables: set[str], strings: dict) -> dict:
    rows: dict[str, list] = {k: [] for k in ("ts", "dur", "cat", "name", "pid", "tid", "stream",
                                             "correlation", "device", "bytes", "process")}

    def add(records, cat, names, nbytes):
        for (start, end, device, stream, corr, gpid), name, size in zip(records, names, nbytes,
                                                                       strict=True):
            rows["ts"].append(start)
            rows["dur"].append(end - start)
            rows["cat"].append(cat)
            rows["name"].append(name)
            rows["pid"].append(device)
            rows["tid"].append(stream)
            rows["stream"].append(stream)
            rows["correlation"].append(corr)
            rows["device"].append(device)
            rows["bytes"].append(size)
            rows["process"].append(_pid(gpid))

    base = "start, end, deviceId, streamId, correlationId, globalPid"
    if "CUPTI_ACTIVITY_KIND_KERNEL" in tables:
        records = _query(conn, f"SELECT {base}, demangledName FROM CUPTI_ACTIVITY_KIND_KERNEL")
        add([r[:6] for r in records], "kernel", [strings.get(r[6], "") for r in records],
            [-1] * len(records))
    if "CUPTI_ACTIVITY_KIND_MEMCPY" in tables:
        records = _query(conn, f"SELECT {base}, bytes, copyKind, srcKind, dstKind "
                               "FROM CUPTI_ACTIVITY_KIND_MEMCPY")
        names = [f"Memcpy {_COPY_KINDS.get(k, 'Unknown')} ({_MEM_KINDS.get(s, 'Unknown')} -> "
                 f"{_MEM_KINDS.get(d, 'Unknown')})" for *_, k, s, d in records]
        add([r[:6] for r in records], "gpu_memcpy", names, [r[6] for r in records])
    if "CUPTI_ACTIVITY_KIND_MEMSET" in tables:
        records = _query(conn, f"SELECT {base}, bytes, memKind FROM CUPTI_ACTIVITY_KIND_MEMSET")
        names = [f"Memset ({_MEM_KINDS.get(r[7], 'Unknown')})" for r in records]
        add([r[:6] for r in records], "gpu_memset", names, [r[6] for r in records])
    return {k: np.asarray(v, dtype=object if k in ("cat", "name") else np.int64)
            for k, v in rows.items()}


def _cpu_rows(conn, tables: set[str], strings: dict) -> dict:
    ts, dur, cat, name, tid, corr, process = [], [], [], [], [], [], []
    if "CUPTI_ACTIVITY_KIND_RUNTIME" in tables:
        for start, end, gtid, correlation, name_id in _query(
            conn, "SELECT start, end, globalTid, correlationId, nameId "
                  "FROM CUPTI_ACTIVITY_KIND_RUNTIME"):
            ts.append(start)
            dur.append(end - start)
            cat.append("cuda_runtime")
            name.append(_VERSION_SUFFIX.sub("", strings.get(name_id, "")))
            tid.append(_tid(gtid))
            corr.append(-1 if correlation is None else correlation)
            process.append(_pid(gtid))
    if "NVTX_EVENTS" in tables:
        kinds = _NVTX_RANGE_IDS
        if "ENUM_NSYS_EVENT_TYPE" in tables:
            marks = ",".join("?" * len(_NVTX_RANGES))
            kinds = tuple(r[0] for r in conn.execute(
                f"SELECT id FROM ENUM_NSYS_EVENT_TYPE WHERE name IN ({marks})", _NVTX_RANGES)) or kinds
        marks = ",".join(str(int(k)) for k in kinds)
        for start, end, text, text_id, gtid in _query(
            conn, "SELECT start, end, text, textId, globalTid FROM NVTX_EVENTS "
                  f"WHERE end IS NOT NULL AND eventType IN ({marks})"):
            text = text if text is not None else strings.get(text_id, "")
            op = _PYTORCH_OP.match(text)
            ts.append(start)
            dur.append(max(end - start, 0))
            cat.append("cpu_op" if op else "user_annotation")
            name.append(op.group("op") if op else text)
            tid.append(_tid(gtid or 0))
            corr.append(-1)
            process.append(_pid(gtid or 0))
    n = len(ts)
    return {
        "ts": np.asarray(ts, dtype=np.int64), "dur": np.asarray(dur, dtype=np.int64),
        "cat": np.asarray(cat, dtype=object), "name": np.asarray(name, dtype=object),
        "pid": np.asarray(process, dtype=np.int64), "tid": np.asarray(tid, dtype=np.int64),
        "stream": np.full(n, -1, dtype=np.int64), "correlation": np.asarray(corr, dtype=np.int64),
        "device": np.full(n, -1, dtype=np.int64), "bytes": np.full(n, -1, dtype=np.int64),
        "process": np.asarray(process, dtype=np.int64),
    }


def _gpu_names(conn, tables: set[str]) -> dict[int, str]:
    """GPU names by the ``deviceId`` of the CUPTI tables: ``TARGET_INFO_GPU.id`` (as nsys's own
    reports join them), or ``deviceId`` in exports before that column was renamed."""
    if "TARGET_INFO_GPU" not in tables:
        return {}
    with contextlib.suppress(sqlite3.DatabaseError):
        columns = {row[1] for row in conn.execute("PRAGMA table_info(TARGET_INFO_GPU)")}
        key = "id" if "id" in columns else "deviceId" if "deviceId" in columns else None
        if key is not None and "name" in columns:
            return {int(i): str(n) for i, n in
                    conn.execute(f"SELECT {key}, name FROM TARGET_INFO_GPU")}
    return {}
