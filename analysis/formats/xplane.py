"""JAX/XLA XPlane profiles (``*.xplane.pb``, a protobuf ``XSpace``) → ``RankTrace`` s.

Decoded straight from the protobuf wire format (``analysis.formats.protobuf``) with the field
numbers of the public ``xplane.proto`` (openxla/xla ``xla/tsl/profiler/protobuf/xplane.proto``):
``XSpace.planes`` 1; ``XPlane`` id 1, name 2, lines 3, event_metadata 4, stat_metadata 5, stats 6;
``XLine`` id 1, name 2, timestamp_ns 3, events 4; ``XEvent`` metadata_id 1, offset_ps 2,
duration_ps 3, stats 4; ``XStat`` metadata_id 1, then one of double 2, uint64 3, int64 4, str 5,
bytes 6, ref 7; ``XEventMetadata`` / ``XStatMetadata`` id 1, name 2.

**Ranks.** One rank per GPU plane (``/device:GPU:N``) that holds at least one event; its rank is
N (so a profile whose GPUs 0 and 7 ran something has ranks 0 and 7). The host plane
(``/host:CPU``) is one process: a launch or copy call (a host event with a ``correlation_id``)
goes to the rank whose GPU event carries its id (to every rank when none does), every other host
row to every rank. Without any GPU event, the host plane alone is rank 0. Other device planes
(``/device:TPU:N``, custom devices) are not read: a plane of them that holds events is named in a
warning (``meta.anomalies``).

**Rows.** Times: ``timestamp_ns`` of the line + ``offset_ps`` / 1000 (ns; XPlane's picoseconds
are rounded half up to whole ns, which they are in practice). GPU plane: each ``Stream #...``
line is a stream (``stream`` = ``tid`` = the line id, ``pid`` = ``device`` = N); the lines the
profiler derives from them (TensorFlow's ``TensorFlow Ops``, ``TensorFlow Name Scope`` and
``Steps``, XLA's ``XLA Ops`` / ``XLA Modules``: :data:`DERIVED_LINES`) repeat the streams' time
under op and scope names and are not read (a plane without ``Stream #`` lines has every line but
those read as streams); an event named ``Copy*`` /
``Memcpy*`` or carrying ``memcpy_details`` is a ``gpu_memcpy`` (named the Kineto way,
``Memcpy DtoD (Device -> Device)``, its ``bytes`` from ``memcpy_details``' ``size:``), ``Memset*``
a ``gpu_memset``, anything else a ``kernel``; ``correlation_id`` stats link them to the host's
launch calls. A GPU event without a correlation id gets a fresh one (the model's GPU events need
one) that no launch call has. Host plane: each line is a thread (``tid`` = line id, ``pid`` =
:data:`HOST_PID`); events with a ``correlation_id`` stat are ``cuda_runtime`` launch/copy calls
(a kernel's launch, which XLA names after the kernel, is named ``cuLaunchKernel`` /
``hipModuleLaunchKernel`` by the GPUs' vendor),
``$file.py:line function`` frames ``python_function``, the rest (XLA and runtime ranges)
``user_annotation``.
"""

from __future__ import annotations

import re
import struct

from analysis.errors import CorruptTraceError, NotATraceError
from analysis.formats.frame import rank_trace
from analysis.formats.protobuf import WireError, fields, signed64
from analysis.io import gunzip_bounded
from analysis.kineto.model import RankMeta, RankTrace

HOST_PID = 1_000_000  # no OS pid in an XSpace; far from the GPU planes' pid (= device index)
_GPU_PLANE = re.compile(r"^/device:GPU:(\d+)\b")
_HOST_PLANE = "/host:CPU"
_COPY_DIRECTIONS = {
    "copydevicetodevice": "Memcpy DtoD (Device -> Device)",
    "copyhosttodevice": "Memcpy HtoD (Host -> Device)",
    "copydevicetohost": "Memcpy DtoH (Device -> Host)",
    "memcpyd2d": "Memcpy DtoD (Device -> Device)",
    "memcpyh2d": "Memcpy HtoD (Host -> Device)",
    "memcpyd2h": "Memcpy DtoH (Device -> Host)",
    "memcpyp2p": "Memcpy PtoP (Device -> Device)",
}
_SIZE = re.compile(r"\bsize:(\d+)")
_DEVICE_PLANE = re.compile(r"^/device:(?!GPU:)")
_STREAM_LINE = "Stream #"
# lines that xprof / TensorFlow derive from a device's streams (tsl's xplane_schema line names)
DERIVED_LINES = frozenset({
    "Steps", "TensorFlow Ops", "TensorFlow Name Scope", "XLA Modules", "XLA Ops",
    "Async XLA Ops", "XLA TraceMe", "Launch Stats", "Source code", "Framework Ops",
    "Framework Name Scope", "Overlay", "_counters_",
})
_FRESH_CORRELATION = 1 << 48  # above any correlation id a profiler hands out


def parse_xplane(data: bytes, source: str) -> list[RankTrace]:
    """The ranks of one XSpace (see the module docstring). Raises ``CorruptTraceError`` for bytes
    that are not a valid protobuf, ``NotATraceError`` for one without planes. A gzip file
    (``.xplane.pb.gz``) is read decompressed."""
    data = gunzip_bounded(data, source, error=CorruptTraceError)
    try:
        planes = [_plane(v) for number, wire, v in fields(memoryview(data))
                  if number == 1 and wire == 2]
    except (WireError, UnicodeDecodeError) as exc:
        raise CorruptTraceError(source, f"not a valid XPlane protobuf (XSpace): {exc}") from None
    if not planes:
        raise NotATraceError(source, "a protobuf without XPlane planes: not a JAX/XLA profile")
    host = next((p for p in planes if p["name"] == _HOST_PLANE), None)
    host_rows = _host_rows(host) if host else _empty()
    for plane in planes:
        if _GPU_PLANE.match(plane["name"]):
            plane["lines"] = _stream_lines(plane["lines"])
    gpus = sorted(
        (int(m.group(1)), p) for p in planes if (m := _GPU_PLANE.match(p["name"])) and p["lines"]
        and any(line["events"] for line in p["lines"])
    )
    unread = [f"{p['name']} ({sum(len(line['events']) for line in p['lines']):,} events)"
              for p in planes if _DEVICE_PLANE.match(p["name"])
              and any(line["events"] for line in p["lines"])]
    anomalies = [f"device planes other than GPUs are not read: {', '.join(unread)}; their "
                 "activity is not in the analyses"] if unread else []
    if not gpus:
        meta = RankMeta(rank=0, source=source, rank_origin="xplane: host plane only",
                        source_format="xplane", other={"part": 0, "parts": 1})
        meta.anomalies.extend(anomalies)
        return [rank_trace(meta, host_rows)]
    # the world is every GPU plane of the profile, idle ones included (ranks are plane indices)
    world = max(len([p for p in planes if _GPU_PLANE.match(p["name"])]), gpus[-1][0] + 1)
    fresh = _FRESH_CORRELATION
    gpu_rows = []
    for index, plane in gpus:
        rows, fresh = _gpu_rows(plane, index, fresh)
        gpu_rows.append(rows)
    _name_launch_calls(host_rows, gpu_rows, gpus)
    host_of = _host_rows_per_rank(host_rows, gpu_rows)
    ranks = []
    for part, ((index, plane), rows) in enumerate(zip(gpus, gpu_rows, strict=True)):
        mine = host_of[part]
        columns = {k: list(rows[k]) + [host_rows[k][i] for i in mine] for k in rows}
        meta = RankMeta(
            rank=index, source=source, world_size=world,
            rank_origin=f"xplane: plane {plane['name']}",
            device_properties=[{"id": index, **plane["properties"]}],
            source_format="xplane",
            other={"part": part, "parts": len(gpus)},
        )
        meta.anomalies.extend(anomalies)
        ranks.append(rank_trace(meta, columns))
    return ranks


def _stream_lines(lines: list[dict]) -> list[dict]:
    """A GPU plane's stream lines (see the module docstring)."""
    streams = [line for line in lines if line["name"].startswith(_STREAM_LINE)]
    return streams or [line for line in lines if line["name"] not in DERIVED_LINES]


def _host_rows_per_rank(host_rows: dict, gpu_rows: list[dict]) -> list[list[int]]:
    """For each GPU (in ``gpu_rows``' order), the host rows that go to its rank: launch and copy
    calls whose correlation id is one of its GPU events', the calls no GPU event answers and
    every other host row."""
    owner = {}
    for part, rows in enumerate(gpu_rows):
        for correlation in rows["correlation"]:
            owner.setdefault(correlation, part)
    everyone, per_part = [], [[] for _ in gpu_rows]
    for i, (cat, correlation) in enumerate(zip(host_rows["cat"], host_rows["correlation"],
                                               strict=True)):
        part = owner.get(correlation) if cat == "cuda_runtime" else None
        (everyone if part is None else per_part[part]).append(i)
    return [sorted(everyone + mine) for mine in per_part]


# --- decoding ---------------------------------------------------------------------------------


def _text(value) -> str:
    return bytes(value).decode("utf-8")


def _map_entry(entry) -> tuple[int, object]:
    key, value = 0, b""
    for number, _, v in fields(entry):
        if number == 1:
            key = v
        elif number == 2:
            value = v
    return key, value


def _metadata_name(message) -> tuple[int, str]:
    ident, name = 0, ""
    for number, _, v in fields(message):
        if number == 1:
            ident = v
        elif number == 2:
            name = _text(v)
    return ident, name


def _stat(message, stat_names: dict[int, str]) -> tuple[str, object]:
    key, value = "", None
    for number, _, v in fields(message):
        if number == 1:
            key = stat_names.get(v, str(v))
        elif number == 2:
            value = struct.unpack("<d", v.to_bytes(8, "little"))[0]
        elif number == 3:
            value = v
        elif number == 4:
            value = signed64(v)
        elif number == 5:
            value = _text(v)
        elif number == 6:
            value = bytes(v)
        elif number == 7:
            value = stat_names.get(v, "")  # a reference to a string in stat_metadata
    return key, value


def _plane(buf) -> dict:
    name, lines, event_names, stat_names, stats = "", [], {}, {}, []
    for number, _, v in fields(buf):
        if number == 2:
            name = _text(v)
        elif number == 3:
            lines.append(v)
        elif number == 4:
            _, meta = _map_entry(v)
            ident, text = _metadata_name(meta)
            event_names[ident] = text
        elif number == 5:
            _, meta = _map_entry(v)
            ident, text = _metadata_name(meta)
            stat_names[ident] = text
        elif number == 6:
            stats.append(v)
    properties = dict(_stat(s, stat_names) for s in stats)
    return {
        "name": name,
        "lines": [_line(line, event_names, stat_names) for line in lines],
        "properties": {k: v for k, v in properties.items() if isinstance(v, (int, str))},
    }


def _line(buf, event_names: dict[int, str], stat_names: dict[int, str]) -> dict:
    ident, name, base_ns, events = 0, "", 0, []
    for number, _, v in fields(buf):
        if number == 1:
            ident = v & ((1 << 63) - 1)  # ids are uint64 hashes on host lines; keep them int64
        elif number == 2:
            name = _text(v)
        elif number == 3:
            base_ns = signed64(v)
        elif number == 4:
            events.append(v)
    decoded = []
    for event in events:
        meta_id, offset_ps, duration_ps, stats = 0, 0, 0, {}
        for number, _, v in fields(event):
            if number == 1:
                meta_id = v
            elif number == 2:
                offset_ps = signed64(v)
            elif number == 3:
                duration_ps = signed64(v)
            elif number == 4:
                key, value = _stat(v, stat_names)
                stats[key] = value
        decoded.append((
            base_ns + (offset_ps + 500) // 1000,
            max((duration_ps + 500) // 1000, 0),
            event_names.get(meta_id, ""),
            stats,
        ))
    return {"id": ident, "name": name, "events": decoded}


# --- rows -------------------------------------------------------------------------------------

_KEYS = ("ts", "dur", "cat", "name", "pid", "tid", "stream", "correlation", "device", "bytes")


def _empty() -> dict:
    return {k: [] for k in _KEYS}


def _correlation(stats: dict) -> int:
    value = stats.get("correlation_id")
    return value if isinstance(value, int) and value >= 0 else -1


def _memory_kind(name: str, stats: dict) -> tuple[str, str] | None:
    low = name.lower()
    if low.startswith("memset"):
        return "gpu_memset", "Memset (Device)"
    if "memcpy_details" in stats or low.startswith(("copy", "memcpy")):
        return "gpu_memcpy", _COPY_DIRECTIONS.get(low, f"Memcpy Unknown ({name})")
    return None


def _nbytes(stats: dict) -> int:
    details = stats.get("memcpy_details")
    found = _SIZE.search(details) if isinstance(details, str) else None
    return int(found.group(1)) if found else -1


def _gpu_rows(plane: dict, device: int, fresh: int) -> tuple[dict, int]:
    rows = _empty()
    for line in plane["lines"]:
        for ts, dur, name, stats in line["events"]:
            memory = _memory_kind(name, stats)
            correlation = _correlation(stats)
            if correlation < 0:
                correlation, fresh = fresh, fresh + 1
            for key, value in zip(_KEYS, (
                ts, dur, memory[0] if memory else "kernel", memory[1] if memory else name,
                device, line["id"], line["id"], correlation, device,
                _nbytes(stats) if memory else -1,
            ), strict=True):
                rows[key].append(value)
    return rows, fresh


def _name_launch_calls(host_rows: dict, gpu_rows: list[dict], gpus: list) -> None:
    """XLA's host plane names a kernel's launch call after the kernel; the call is the driver's
    (``cuLaunchKernel`` on NVIDIA, ``hipModuleLaunchKernel`` on AMD, by the planes'
    ``device_vendor``), which is what the launch statistics look for."""
    kernels = {c for rows in gpu_rows
               for c, cat in zip(rows["correlation"], rows["cat"], strict=True) if cat == "kernel"}
    vendors = {str(p["properties"].get("device_vendor", "")).lower() for _, p in gpus}
    api = "hipModuleLaunchKernel" if any("amd" in v for v in vendors) else "cuLaunchKernel"
    names = host_rows["name"]
    for i, (cat, corr) in enumerate(zip(host_rows["cat"], host_rows["correlation"], strict=True)):
        if cat == "cuda_runtime" and corr in kernels and not names[i].startswith(("cu", "hip")):
            names[i] = api


def _host_rows(plane: dict) -> dict:
    rows = _empty()
    for line in plane["lines"]:
        for ts, dur, name, stats in line["events"]:
            correlation = _correlation(stats)
            cat = ("cuda_runtime" if correlation >= 0
                   else "python_function" if name.startswith("$") else "user_annotation")
            for key, value in zip(_KEYS, (
                ts, dur, cat, name, HOST_PID, line["id"], -1, correlation, -1, -1,
            ), strict=True):
                rows[key].append(value)
    return rows
