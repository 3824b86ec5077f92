"""rocprofv3 JSON (``rocprofv3 --output-format json``, plain or gzip) → ``RankTrace`` s, with msgspec.

The file is ``{"rocprofiler-sdk-tool": [one object per profiled process]}``; each holds ``agents``
(CPUs and GPUs), ``kernel_symbols`` (``kernel_id`` → names), ``strings.buffer_records`` (per record
``kind``, its name and its ``operations``' names) and ``buffer_records``: ``kernel_dispatch``,
``memory_copy``, ``hip_api``, ... with ``start_timestamp`` / ``end_timestamp`` in ns.

**Ranks.** One rank per (process, GPU agent) that ran a dispatch or a copy, numbered 0, 1, ... in
order of process, then the GPU's index among the GPU agents (``logical_node_type_id``). A
process's HIP API calls go to every rank of that process.

**Rows.** ``kernel_dispatch`` → ``kernel`` rows named by the kernel symbol's
``formatted_kernel_name`` (``kernel_name`` when empty), ``stream`` = the HIP stream
(``stream_id``; the HSA queue when absent), ``correlation`` = ``correlation_id.internal``;
``memory_copy`` → ``gpu_memcpy`` rows named the Kineto way from their operation
(``MEMORY_COPY_DEVICE_TO_HOST`` → ``Memcpy DtoH``) with their ``bytes``, on the destination agent
(the source agent for device-to-host copies); ``hip_api`` → ``cuda_runtime`` rows named by
their operation (``hipLaunchKernel``), on their thread, with their correlation id.
"""

from __future__ import annotations

import msgspec

from analysis.errors import CorruptTraceError, NotATraceError
from analysis.formats.frame import rank_trace
from analysis.io import gunzip_bounded
from analysis.kineto.model import RankMeta, RankTrace

_COPY_NAMES = {
    "MEMORY_COPY_HOST_TO_DEVICE": "Memcpy HtoD (Host -> Device)",
    "MEMORY_COPY_DEVICE_TO_HOST": "Memcpy DtoH (Device -> Host)",
    "MEMORY_COPY_DEVICE_TO_DEVICE": "Memcpy DtoD (Device -> Device)",
    "MEMORY_COPY_HOST_TO_HOST": "Memcpy HtoH (Host -> Host)",
}
_GPU_AGENT = 2  # agents[].type: 1 CPU, 2 GPU


class _Handle(msgspec.Struct, gc=False, frozen=True):
    handle: int = -1


class _Correlation(msgspec.Struct, gc=False, frozen=True):
    internal: int = -1


class _DispatchInfo(msgspec.Struct, gc=False):
    agent_id: _Handle = _Handle()
    queue_id: _Handle = _Handle()
    kernel_id: int = -1


class _Record(msgspec.Struct, gc=False):
    """A buffer record of any kind; fields absent from a kind keep their defaults."""

    start_timestamp: int
    end_timestamp: int
    kind: int = -1
    operation: int = -1
    thread_id: int = -1
    correlation_id: _Correlation = _Correlation()
    dispatch_info: _DispatchInfo | None = None
    stream_id: _Handle | None = None
    dst_agent_id: _Handle | None = None
    src_agent_id: _Handle | None = None
    bytes: int = -1


class _BufferRecords(msgspec.Struct, gc=False, frozen=True):
    kernel_dispatch: list[_Record] = []
    memory_copy: list[_Record] = []
    hip_api: list[_Record] = []


class _Symbol(msgspec.Struct, gc=False):
    kernel_id: int = -1
    kernel_name: str = ""
    formatted_kernel_name: str = ""


class _Agent(msgspec.Struct, gc=False):
    id: _Handle
    type: int = 0
    name: str = ""
    logical_node_type_id: int = -1


class _KindNames(msgspec.Struct, gc=False):
    kind: str = ""
    operations: list[str] = []


class _Strings(msgspec.Struct, gc=False, frozen=True):
    buffer_records: list[_KindNames] = []


class _Metadata(msgspec.Struct, gc=False, frozen=True):
    pid: int = -1


class _Process(msgspec.Struct, gc=False):
    metadata: _Metadata = _Metadata()
    agents: list[_Agent] = []
    # a list indexed by kernel id; some writers use an object keyed by the id instead
    kernel_symbols: list[_Symbol] | dict[str, _Symbol] = []
    strings: _Strings = _Strings()
    buffer_records: _BufferRecords = _BufferRecords()


class _File(msgspec.Struct, gc=False):
    processes: list[_Process] = msgspec.field(name="rocprofiler-sdk-tool")


_DECODER = msgspec.json.Decoder(_File)
_KEYS = ("ts", "dur", "cat", "name", "pid", "tid", "stream", "correlation", "device", "bytes")


def parse_rocprof(data: bytes, source: str) -> list[RankTrace]:
    """The ranks of one rocprofv3 JSON file (see the module docstring)."""
    text = gunzip_bounded(data, source, error=CorruptTraceError)
    try:
        decoded = _DECODER.decode(text)
    except msgspec.ValidationError as exc:
        raise CorruptTraceError(source, f"unexpected rocprofv3 JSON structure: {exc}") from None
    except (msgspec.DecodeError, UnicodeDecodeError) as exc:
        raise CorruptTraceError(source, f"invalid JSON: {exc}") from None
    ranks: list[RankTrace] = []
    for index, process in enumerate(decoded.processes):
        pid = process.metadata.pid if process.metadata.pid >= 0 else index
        gpu_rows = _gpu_rows(process, pid)
        api_rows = _api_rows(process, pid)
        # dispatches on an agent the file does not list as a GPU, copies between CPU agents
        elsewhere = gpu_rows.pop(-1, None)
        unread = ([] if elsewhere is None else [
            f"{len(elsewhere['ts'])} kernel dispatch(es) or memory copies of process {pid} ran "
            "on no GPU agent of the file (host-to-host copies; dispatches on an unlisted "
            "agent): not read"])
        devices = sorted(set(gpu_rows))
        for device in devices:
            rows = gpu_rows[device]
            columns = {k: rows[k] + api_rows[k] for k in _KEYS}
            name = next((a.name for a in process.agents
                         if a.type == _GPU_AGENT and a.logical_node_type_id == device), "")
            meta = RankMeta(
                rank=len(ranks), source=source,
                rank_origin=f"rocprof: process {pid}, GPU {device}",
                device_properties=[{"id": device, "name": name}],
                source_format="rocprof",
                other={"part": len(ranks), "process": pid, "gpu": device},
            )
            meta.anomalies.extend(unread)
            ranks.append(rank_trace(meta, columns))
    if not ranks:
        raise NotATraceError(source, "a rocprofv3 file without kernel dispatches or memory copies")
    for rt in ranks:
        rt.meta.world_size = len(ranks)
        rt.meta.other["parts"] = len(ranks)
    return ranks


def _operation(process: _Process, record: _Record) -> str:
    kinds = process.strings.buffer_records
    if 0 <= record.kind < len(kinds) and 0 <= record.operation < len(kinds[record.kind].operations):
        return kinds[record.kind].operations[record.operation]
    return f"operation {record.operation}"


def _gpu_rows(process: _Process, pid: int) -> dict[int, dict]:
    gpus = [a for a in process.agents if a.type == _GPU_AGENT]
    # the GPU's index (older files lack logical_node_type_id: then the order of the GPU agents)
    gpu_index = {a.id.handle: a.logical_node_type_id if a.logical_node_type_id >= 0 else i
                 for i, a in enumerate(gpus)}
    symbols = process.kernel_symbols
    if isinstance(symbols, dict):
        symbols = [msgspec.structs.replace(s, kernel_id=int(k)) if k.isdigit() and s.kernel_id < 0
                   else s for k, s in symbols.items()]
    names = {s.kernel_id: s.formatted_kernel_name or s.kernel_name for s in symbols}
    out: dict[int, dict] = {}

    def add(device, values):
        rows = out.setdefault(device, {k: [] for k in _KEYS})
        for key, value in zip(_KEYS, values, strict=True):
            rows[key].append(value)

    for r in process.buffer_records.kernel_dispatch:
        info = r.dispatch_info or _DispatchInfo()
        device = gpu_index.get(info.agent_id.handle, -1)
        stream = r.stream_id.handle if r.stream_id is not None else info.queue_id.handle
        add(device, (r.start_timestamp, r.end_timestamp - r.start_timestamp, "kernel",
                     names.get(info.kernel_id, f"kernel {info.kernel_id}"), device, stream, stream,
                     r.correlation_id.internal, device, -1))
    for r in process.buffer_records.memory_copy:
        operation = _operation(process, r)
        agents = ((r.src_agent_id, r.dst_agent_id) if operation == "MEMORY_COPY_DEVICE_TO_HOST"
                  else (r.dst_agent_id, r.src_agent_id))  # the other one where it is no GPU
        device = next((gpu_index[a.handle] for a in agents
                       if a is not None and a.handle in gpu_index), -1)
        stream = r.stream_id.handle if r.stream_id is not None else 0
        add(device, (r.start_timestamp, r.end_timestamp - r.start_timestamp, "gpu_memcpy",
                     _COPY_NAMES.get(operation, "Memcpy Unknown"), device, stream, stream,
                     r.correlation_id.internal, device, r.bytes))
    return out


def _api_rows(process: _Process, pid: int) -> dict:
    rows = {k: [] for k in _KEYS}
    for r in process.buffer_records.hip_api:
        values = (r.start_timestamp, r.end_timestamp - r.start_timestamp, "cuda_runtime",
                  _operation(process, r), pid, r.thread_id, -1, r.correlation_id.internal, -1, -1)
        for key, value in zip(_KEYS, values, strict=True):
            rows[key].append(value)
    return rows
