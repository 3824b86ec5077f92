"""The bad-input corpus: malformed traces, arguments, memory snapshots and py-spy files, generated
by code, each with its expected outcome.

A case either fails with one of our errors (``error``: the class name; ``words``: a regex its message
must contain; the message must also name the file, unless ``names_file=False``), or succeeds with a
warning (``words`` then matches the warning, which names the file) and exact numbers (``expect``,
compared with what ``run`` returns). ``run(tmp)`` builds its inputs under ``tmp`` and calls the API;
the test runs it in a child process with a timeout, so that a hang fails instead of stalling.

The hand-built trace (``base_events``), in µs from ``T0``: ProfilerStep#1 [0, 1000), #2 [1000, 2000),
#3 [2000, 3000) (the last, not analysed); kernel 1 launched at 100 (10 µs call), runs [200, 300);
kernel 2 launched at 1100, runs [1200, 1500). So: launch delays 90 and 90, GPU durations 100 and
300; temporal breakdown: kernel_time (first start to last end) 1300, busy 400, idle 900.
"""

from __future__ import annotations

import gzip
import json
import os
import pickle
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

T0 = 1_700_000_000_000_000  # µs, an epoch time as torch.profiler writes them
I64_MAX = 2**63 - 1


@dataclass
class Case:
    id: str
    group: str  # "trace", "arguments", "snapshot", "pyspy"
    run: Callable[[Path], Any]
    error: str | None = None  # expected error class name; None: success
    words: str = ""  # regex: in the error message, or in a warning when error is None
    expect: Any = None  # exact result of run() on success
    names_file: bool = True
    env: dict[str, str] = field(default_factory=dict)


# --- inputs ------------------------------------------------------------------------------------


def step(n, ts, dur=1000):
    return {"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{n}", "pid": 1, "tid": 1,
            "ts": T0 + ts, "dur": dur}


def launch(corr, ts, dur=10):
    return {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1,
            "ts": T0 + ts, "dur": dur, "args": {"correlation": corr, "External id": corr}}


def kernel(corr, ts, dur, stream=7):
    return {"ph": "X", "cat": "kernel", "name": f"gemm_{corr}", "pid": 0, "tid": stream,
            "ts": T0 + ts, "dur": dur, "args": {"stream": stream, "correlation": corr, "device": 0}}


def base_events() -> list[dict]:
    return [step(1, 0), step(2, 1000), step(3, 2000),
            launch(1, 100), kernel(1, 200, 100), launch(2, 1100), kernel(2, 1200, 300)]


def trace_doc(events, rank: Any = 0) -> dict:
    doc = {"schemaVersion": 1, "traceEvents": events}
    if rank is not None:
        doc["distributedInfo"] = {"backend": "nccl", "rank": rank, "world_size": 1}
    return doc


def write(tmp: Path, name: str, content: bytes | str | dict) -> str:
    path = tmp / name
    if isinstance(content, dict):
        content = json.dumps(content)
    path.write_bytes(content.encode() if isinstance(content, str) else content)
    return str(path)


def write_trace(tmp: Path, events, name="rank-0.pt.trace.json", rank: Any = 0) -> str:
    return write(tmp, name, trace_doc(events, rank))


def with_kernel2(**changes) -> list[dict]:
    events = base_events()
    k2 = events[-1]
    for key, value in changes.items():
        if value is None:
            k2.pop(key)
        else:
            k2[key] = value
    return events


# --- what the calls return ---------------------------------------------------------------------


def ta(path, **kw):
    from analysis.api import TraceAnalysis

    return TraceAnalysis(trace_dir=path, **({"use_cache": False, "max_workers": 1, "progress": False} | kw))


def launch_and_temporal(path) -> dict:
    a = ta(path)
    stats = a.get_cuda_kernel_launch_stats(visualize=False)[0]
    t = a.get_temporal_breakdown(visualize=False).iloc[0]
    return {"gpu_duration": stats["gpu_duration"].tolist(),
            "launch_delay": stats["launch_delay"].tolist(),
            "kernel_time": float(t["kernel_time(us)"]), "idle_time": float(t["idle_time(us)"])}


def n_events(path) -> int:
    return len(ta(path).full_trace[0].events)


def steps_and_rank(path) -> dict:
    a = ta(path)
    meta = a.get_trace_metadata()
    return {"steps": a.get_profiler_step_table()["step"].tolist(), "rank": a.ranks,
            "metadata_rows": len(meta)}


def call_api(path, **kw):
    return ta(path, **kw).ranks


def select_ranks(tmp: Path, ranks):
    return ta(write_trace(tmp, base_events())).get_temporal_breakdown(visualize=False, ranks=ranks)


# --- memory snapshots --------------------------------------------------------------------------


def segment(address=4096, total=2048, **extra) -> dict:
    seg = {"address": address, "total_size": total, "device": 0, "stream": 0,
           "segment_type": "large",
           "blocks": [{"size": 1024, "state": "active_allocated", "requested_size": 1000},
                      {"size": 1024, "state": "inactive"}]}
    seg.update(extra)
    return seg


def snapshot_file(tmp: Path, snap: Any, name="snap.pickle") -> str:
    return write(tmp, name, pickle.dumps(snap))


def replay_numbers(path) -> dict:
    from analysis.memory import load_snapshot, memory_peak, replay_snapshot

    snap = load_snapshot(path)
    row = memory_peak(replay_snapshot(snap, source=path)).iloc[0]
    return {"peak_allocated": int(row["peak_allocated_bytes"]),
            "peak_reserved": int(row["peak_reserved_bytes"]), "events": int(row["events"])}


class _Evil:
    def __reduce__(self):
        return (os.system, ("echo pwned",))


# --- py-spy ------------------------------------------------------------------------------------


def pyspy(path) -> dict:
    from analysis.pyspy.samples import pyspy_report

    report = pyspy_report(path)
    return {"samples": report["samples"].tolist(), "pct": report["samples_pctg"].round(6).tolist()}


def pyspy_file(tmp: Path, text: str, name="profile.txt") -> str:
    return write(tmp, name, text)


# --- the corpus ------------------------------------------------------------------------------------

def _fifo(tmp: Path, name: str) -> str:
    path = tmp / name
    os.mkfifo(path)
    return str(path)


def _sparse_zeros(tmp: Path, name: str, size: int) -> str:
    path = tmp / name
    with open(path, "wb") as f:
        f.truncate(size)  # a sparse file: no disk used, reads as zeros
    return str(path)


def _nested(depth: int) -> bytes:
    return b'{"traceEvents": [], "x": ' + b"[" * depth + b"]" * depth + b"}"


BASE_NUMBERS = {"gpu_duration": [100.0, 300.0], "launch_delay": [90.0, 90.0],
                "kernel_time": 1300.0, "idle_time": 900.0}

TRACE_CASES = [
    Case("trace-empty-file", "trace", lambda t: ta(write(t, "e.json", b"")),
         "CorruptTraceError", "empty"),
    Case("trace-zeros", "trace", lambda t: ta(write(t, "z.json", b"\0" * 8192)),
         "CorruptTraceError", "neither gzip data nor JSON"),
    # 2 GiB of zeros (sparse): rejected from its first bytes, never read whole
    Case("trace-2GiB-zeros", "trace", lambda t: ta(_sparse_zeros(t, "big.json", 2**31)),
         "CorruptTraceError", "neither gzip data nor JSON"),
    Case("trace-over-read-limit", "trace",
         lambda t: ta(write(t, "big.json", b" " * (2 * 2**20))),
         "InputTooLargeError", r"larger than the read limit of 1\.0 MiB",
         env={"TRACE_ANALYSIS_READ_LIMIT": "1M"}),
    Case("trace-gzip-bomb", "trace",
         lambda t: ta(write(t, "bomb.json.gz",
                            gzip.compress(b'{"traceEvents": [' + b" " * (32 * 2**20) + b"]}", 1))),
         "InputTooLargeError", "decompressed gzip data", env={"TRACE_ANALYSIS_READ_LIMIT": "8M"}),
    Case("trace-bad-read-limit", "trace", lambda t: ta(write_trace(t, base_events())),
         "ConfigError", "TRACE_ANALYSIS_READ_LIMIT", names_file=False,
         env={"TRACE_ANALYSIS_READ_LIMIT": "lots"}),
    Case("trace-fifo", "trace", lambda t: ta(_fifo(t, "pipe.json")), "NotARegularFileError", "FIFO"),
    Case("trace-fifo-in-list", "trace",
         lambda t: _ta_files([_fifo(t, "p.json")]),
         "NotARegularFileError", "FIFO"),
    Case("trace-dev-zero", "trace", lambda t: ta("/dev/zero"), "NotARegularFileError",
         "character device", names_file=False),
    Case("trace-truncated-gzip", "trace",
         lambda t: ta(write(t, "cut.json.gz", gzip.compress(json.dumps(trace_doc(base_events())).encode())[:-20])),
         "CorruptTraceError", "gzip"),
    Case("trace-truncated-json", "trace",
         lambda t: ta(write(t, "cut.json", json.dumps(trace_doc(base_events()))[:-30])),
         "CorruptTraceError", "ends early"),
    Case("trace-not-utf8", "trace",
         lambda t: ta(write(t, "latin.json", b'{"traceEvents": [{"name": "\xe9"}]}')),
         "CorruptTraceError", "UTF-8"),
    Case("trace-nested-too-deeply", "trace", lambda t: ta(write(t, "deep.json", _nested(200_000))),
         "CorruptTraceError", "nested too deeply"),
    Case("trace-top-level-array", "trace", lambda t: ta(write(t, "a.json", b"[1, 2]")),
         "NotATraceError", "top-level array"),
    Case("trace-events-not-a-list", "trace",
         lambda t: ta(write(t, "o.json", b'{"traceEvents": {"a": 1}}')),
         "CorruptTraceError", "unexpected trace structure"),
    Case("trace-ts-string", "trace", lambda t: ta(write_trace(t, with_kernel2(ts="soon"))),
         "CorruptTraceError", r"traceEvents\[6\]\.ts: expected a number"),
    Case("trace-ts-out-of-range", "trace", lambda t: ta(write_trace(t, with_kernel2(ts=1e30))),
         "CorruptTraceError", "out of range"),
    Case("trace-nan-literal", "trace",
         lambda t: ta(write(t, "nan.json", b'{"traceEvents": [{"ts": NaN}]}')),
         "CorruptTraceError", "invalid JSON"),
    Case("trace-missing-path", "trace", lambda t: ta(str(t / "nope")), "TraceNotFoundError",
         "no such file"),
    Case("trace-empty-directory", "trace", lambda t: ta(str(t)), "TraceNotFoundError",
         "no trace files", names_file=False),
    Case("trace-unknown-protocol", "trace", lambda t: ta("nosuch://bucket/x"), "TraceLoadError",
         "cannot open this URL", names_file=False),
    Case("trace-duplicate-rank", "trace",
         lambda t: (write_trace(t, base_events(), "a.json"), write_trace(t, base_events(), "b.json"),
                    ta(str(t))),
         "DuplicateRankError", "rank 0 is claimed by both"),
    Case("trace-two-bad-files", "trace",
         lambda t: (write(t, "a.json", b"{"), write(t, "b.json", b"\0\0"), ta(str(t))),
         "MultipleLoadErrors", r"2 trace files failed to load: .*a\.json.*; .*b\.json"),
    Case("trace-newline-in-name", "trace", lambda t: ta(write(t, "a\nerror: x.json", b"{")),
         "CorruptTraceError", r"a\\nerror: x\.json: invalid JSON"),
    # data anomalies: a warning naming the file, and the numbers that result
    Case("trace-baseline", "trace", lambda t: launch_and_temporal(write_trace(t, base_events())),
         expect=BASE_NUMBERS),
    Case("trace-negative-dur", "trace",
         lambda t: launch_and_temporal(write_trace(t, with_kernel2(dur=-1000))),
         words=r"1 event\(s\) have a negative 'dur' \(lowest -1000 µs\); set to 0",
         expect={"gpu_duration": [100.0, 0.0], "launch_delay": [90.0, 90.0],
                 "kernel_time": 1000.0, "idle_time": 900.0}),
    Case("trace-dur-overflows-int64", "trace",
         lambda t: launch_and_temporal(write_trace(t, with_kernel2(dur=9e15))),
         "CorruptTraceError", r"traceEvents\[6\] ends after 9223372036854775807 ns"),
    # the int64 ns boundary: ending exactly at 2**63 - 1 ns is accepted, 1 ns later is not
    Case("trace-end-at-int64-max-kept", "trace",
         lambda t: n_events(_with_edge_event(t, 9223372036854775, "0.807")),
         expect=8),
    Case("trace-end-past-int64-max-rejected", "trace",
         lambda t: n_events(_with_edge_event(t, 9223372036854775, "0.808")),
         "CorruptTraceError", r"traceEvents\[7\] ends after .*ts 9223372036854775 µs \+ dur 0\.808"),
    Case("trace-kernel-without-ts", "trace",
         lambda t: launch_and_temporal(write_trace(t, with_kernel2(ts=None))),
         words=r"dropped 1 event\(s\) that have a 'dur' but no 'ts' \(1 of them GPU events",
         expect={"gpu_duration": [100.0], "launch_delay": [90.0], "kernel_time": 100.0,
                 "idle_time": 0.0}),
    Case("trace-kernel-without-cat", "trace",
         lambda t: launch_and_temporal(write_trace(t, with_kernel2(cat=None))),
         words=r"dropped 1 event\(s\) that have a 'dur' but no 'cat' \(1 of them GPU events",
         expect={"gpu_duration": [100.0], "launch_delay": [90.0], "kernel_time": 100.0,
                 "idle_time": 0.0}),
    Case("trace-23-digit-step", "trace",
         lambda t: steps_and_rank(write_trace(
             t, base_events() + [{**step(1, 500, 10), "name": "ProfilerStep#" + "9" * 23}])),
         words=r"1 ProfilerStep annotation\(s\) have a step number too large",
         expect={"steps": [1, 2, 3], "rank": [0], "metadata_rows": 1}),
    Case("trace-rank-negative", "trace",
         lambda t: steps_and_rank(write_trace(t, base_events(), "run_rank3.json", rank=-5)),
         words=r"distributedInfo\.rank is -5, not a rank", expect={"steps": [1, 2, 3], "rank": [3],
                                                                  "metadata_rows": 1}),
    Case("trace-rank-1e30", "trace",
         lambda t: steps_and_rank(write_trace(t, base_events(), "t.json", rank=1e30)),
         words=r"distributedInfo\.rank is 1e\+?30, not a rank",
         expect={"steps": [1, 2, 3], "rank": [0], "metadata_rows": 1}),
]


def _with_edge_event(tmp: Path, ts_us: int, dur_literal: str) -> str:
    """The base trace plus a cpu_op at ``ts_us`` whose dur is the JSON literal given (exactly)."""
    edge = {"ph": "X", "cat": "cpu_op", "name": "aten::edge", "pid": 1, "tid": 1, "ts": ts_us,
            "dur": "@DUR@"}
    text = json.dumps(trace_doc(base_events() + [edge])).replace('"@DUR@"', dur_literal)
    return write(tmp, "edge.json", text)


def _ta_files(files, **kw):
    from analysis.api import TraceAnalysis

    return TraceAnalysis(trace_files=files, **({"use_cache": False, "max_workers": 1, "progress": False} | kw))


ARGUMENT_CASES = [
    Case("args-ranks-float", "arguments", lambda t: select_ranks(t, 3.5), "ConfigError",
         "ranks must be an int", names_file=False),
    Case("args-ranks-strings", "arguments", lambda t: select_ranks(t, ["a"]), "ConfigError",
         "ranks must be ints; got str 'a'", names_file=False),
    Case("args-ranks-true", "arguments", lambda t: select_ranks(t, True), "ConfigError",
         "ranks must be an int", names_file=False),
    Case("args-ranks-list-of-bools", "arguments", lambda t: select_ranks(t, [True]),
         "ConfigError", "got bool True", names_file=False),
    Case("args-ranks-word", "arguments", lambda t: select_ranks(t, "first"), "ConfigError",
         "'all'", names_file=False),
    Case("args-ranks-dict", "arguments", lambda t: select_ranks(t, {0: 1}), "ConfigError",
         "ranks must be", names_file=False),
    Case("args-rank-absent", "arguments", lambda t: select_ranks(t, 99), "UnknownRankError",
         r"rank 99 is not in this trace; ranks present: \[0\]", names_file=False),
    Case("args-trace-dir-int", "arguments", lambda t: ta(5), "ConfigError",
         "trace_dir must be a path or URL", names_file=False),
    Case("args-trace-dir-empty", "arguments", lambda t: ta(""), "ConfigError", "empty string",
         names_file=False),
    Case("args-nothing-to-load", "arguments", lambda t: ta(None), "ConfigError",
         "give trace_dir", names_file=False),
    Case("args-trace-files-str-keys", "arguments",
         lambda t: _ta_files({"a": write_trace(t, base_events())}), "ConfigError",
         "ranks as ints from 0; got key str 'a'", names_file=False),
    Case("args-trace-files-negative-key", "arguments",
         lambda t: _ta_files({-1: write_trace(t, base_events())}), "ConfigError",
         "got key int -1", names_file=False),
    Case("args-trace-files-int-items", "arguments", lambda t: _ta_files([5]), "ConfigError",
         "trace_files must hold paths", names_file=False),
    Case("args-trace-files-number", "arguments", lambda t: _ta_files(3.0), "ConfigError",
         "trace_files must be a path", names_file=False),
    Case("args-on-error", "arguments",
         lambda t: ta(write_trace(t, base_events()), on_error="ignore"), "ConfigError",
         "on_error must be one of", names_file=False),
    Case("args-max-workers-zero", "arguments",
         lambda t: ta(write_trace(t, base_events()), max_workers=0), "ConfigError",
         "max_workers must be an int of at least 1", names_file=False),
    Case("args-use-cache-string", "arguments",
         lambda t: _ta_files(write_trace(t, base_events()), use_cache="no"), "ConfigError",
         "use_cache must be True or False", names_file=False),
    Case("args-storage-options-list", "arguments",
         lambda t: ta(write_trace(t, base_events()), storage_options=[1]), "ConfigError",
         "storage_options must be a dict", names_file=False),
    Case("args-timeout-negative", "arguments",
         lambda t: ta(write_trace(t, base_events()), timeout=-1), "ConfigError",
         "timeout must be a positive number", names_file=False),
    Case("args-time-rounding", "arguments",
         lambda t: ta(write_trace(t, base_events()), time_rounding="up"), "ConfigError",
         "time_rounding must be", names_file=False),
    Case("args-patterns", "arguments",
         lambda t: ta(write_trace(t, base_events()), kernel_patterns="nope"), "ConfigError",
         "nope", names_file=False),
]

SNAPSHOT_CASES = [
    Case("snapshot-segments-only", "snapshot",
         lambda t: replay_numbers(snapshot_file(t, {"segments": [segment()]})),
         expect={"peak_allocated": 1000, "peak_reserved": 2048, "events": 0}),
    Case("snapshot-empty-device-trace", "snapshot",
         lambda t: replay_numbers(snapshot_file(t, {"segments": [segment()], "device_traces": [[]]})),
         expect={"peak_allocated": 1000, "peak_reserved": 2048, "events": 0}),
    Case("snapshot-segment-events-only", "snapshot",
         lambda t: replay_numbers(snapshot_file(t, {
             "segments": [segment()],
             "device_traces": [[{"action": "segment_alloc", "addr": 4096, "size": 2048,
                                 "time_us": 5}]]})),
         expect={"peak_allocated": 1000, "peak_reserved": 2048, "events": 1}),
    Case("snapshot-device-string", "snapshot",
         lambda t: replay_numbers(snapshot_file(t, {"segments": [segment(device="cuda:0")]})),
         "CorruptInputError", r"segments\[0\]\.device must be a device index, not 'cuda:0'"),
    Case("snapshot-17th-segment-without-address", "snapshot",
         lambda t: replay_numbers(snapshot_file(t, {"segments": [
             segment(address=10**6 * i) for i in range(17)] + [{"total_size": 1, "blocks": []}]})),
         "CorruptInputError", r"segments\[17\] has no 'address'"),
    Case("snapshot-block-without-size", "snapshot",
         lambda t: replay_numbers(snapshot_file(t, {"segments": [
             segment(blocks=[{"state": "inactive"}])]})),
         "CorruptInputError", r"segments\[0\]\.blocks\[0\] has no 'size'"),
    Case("snapshot-event-without-action", "snapshot",
         lambda t: replay_numbers(snapshot_file(t, {"segments": [segment()],
                                                    "device_traces": [[{"addr": 1}]]})),
         "CorruptInputError", r"device_traces\[0\]\[0\] has no 'action'"),
    Case("snapshot-event-addr-string", "snapshot",
         lambda t: replay_numbers(snapshot_file(t, {"segments": [segment()], "device_traces": [
             [{"action": "alloc", "addr": "0x10", "size": 8}]]})),
         "CorruptInputError", r"device_traces\[0\]\[0\]\.addr must be a 64-bit integer"),
    Case("snapshot-event-size-huge", "snapshot",
         lambda t: replay_numbers(snapshot_file(t, {"segments": [segment()], "device_traces": [
             [{"action": "alloc", "addr": 1, "size": 2**70}]]})),
         "CorruptInputError", r"\.size must be a 64-bit integer"),
    Case("snapshot-time-string", "snapshot",
         lambda t: replay_numbers(snapshot_file(t, {"segments": [segment()], "device_traces": [
             [{"action": "alloc", "addr": 1, "size": 8, "time_us": "noon"}]]})),
         "CorruptInputError", r"time_us is not a number"),
    Case("snapshot-runs-code", "snapshot", lambda t: replay_numbers(snapshot_file(t, _Evil())),
         "UnsafePickleError", r"import (posix|os)\.system"),
    Case("snapshot-is-json", "snapshot",
         lambda t: replay_numbers(write(t, "s.pickle", b'{"segments": []}')),
         "WrongFileKindError", "JSON"),
    Case("snapshot-is-a-list", "snapshot", lambda t: replay_numbers(snapshot_file(t, [1, 2])),
         "WrongFileKindError", "not a memory snapshot"),
    Case("snapshot-truncated", "snapshot",
         lambda t: replay_numbers(write(t, "s.pickle", pickle.dumps({"segments": []})[:-4])),
         "CorruptInputError", "not a readable pickle"),
    Case("snapshot-empty", "snapshot", lambda t: replay_numbers(write(t, "s.pickle", b"")),
         "CorruptInputError", "empty"),
    Case("snapshot-fifo", "snapshot", lambda t: replay_numbers(_fifo(t, "s.pickle")),
         "NotARegularFileError", "FIFO"),
    Case("snapshot-gzip-bomb", "snapshot",
         lambda t: replay_numbers(write(t, "s.pickle.gz", gzip.compress(b"\0" * (16 * 2**20), 1))),
         "InputTooLargeError", "decompressed gzip", env={"TRACE_ANALYSIS_READ_LIMIT": "4M"}),
    Case("snapshot-missing", "snapshot", lambda t: replay_numbers(str(t / "none.pickle")),
         "InputNotFoundError", "no such file"),
]

PYSPY_CASES = [
    Case("pyspy-baseline", "pyspy",
         lambda t: pyspy(pyspy_file(t, "main (a.py:1);f (a.py:2) 3\nmain (a.py:1);g (a.py:5) 1\n")),
         expect={"samples": [3, 1], "pct": [75.0, 25.0]}),
    Case("pyspy-line-number-beyond-int64", "pyspy",
         lambda t: pyspy(pyspy_file(t, f"main (a.py:{'9' * 23}) 3\n")),
         "CorruptInputError", "a frame's line number of 9+ does not fit in 64 bits"),
    Case("pyspy-thread-id-beyond-int64", "pyspy",
         lambda t: pyspy(pyspy_file(t, f"thread ({'9' * 25});main (a.py:1) 3\n")),
         "CorruptInputError", "a tid of 9+ does not fit in 64 bits"),
    Case("pyspy-pid-beyond-int64", "pyspy",
         lambda t: pyspy(pyspy_file(t, f'process {"8" * 20}:"python x.py";main (a.py:1) 3\n')),
         "CorruptInputError", "a pid of 8+ does not fit in 64 bits"),
    Case("pyspy-counts-sum-beyond-int64", "pyspy",
         lambda t: pyspy(pyspy_file(t, "".join(f"f{i} (a.py:{i}) {9 * 10**17}\n" for i in range(11)))),
         "CorruptInputError", "sample counts add up to more than"),
    Case("pyspy-count-19-digits", "pyspy",
         lambda t: pyspy(pyspy_file(t, f"main (a.py:1) {10**19}\n")),
         "CorruptInputError", "line 1: expected"),
    Case("pyspy-empty", "pyspy", lambda t: pyspy(pyspy_file(t, "")), "CorruptInputError", "empty"),
    Case("pyspy-binary", "pyspy", lambda t: pyspy(write(t, "p.txt", b"\xff\xfe\x00abc 1\n")),
         "CorruptInputError", "not text"),
    Case("pyspy-svg", "pyspy", lambda t: pyspy(pyspy_file(t, "<svg version='1.1'>\n")),
         "CorruptInputError", "SVG output"),
    Case("pyspy-missing", "pyspy", lambda t: pyspy(str(t / "none.txt")), "InputNotFoundError",
         "no such file"),
    Case("pyspy-fifo", "pyspy", lambda t: pyspy(_fifo(t, "p.txt")), "NotARegularFileError", "FIFO"),
    Case("pyspy-not-a-path", "pyspy", lambda t: pyspy(5), "ConfigError",
         "py-spy files must be paths", names_file=False),
]

API_CASES = {c.id: c for c in TRACE_CASES + ARGUMENT_CASES + SNAPSHOT_CASES + PYSPY_CASES}
