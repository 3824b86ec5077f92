"""CUDA/HIP graph replay traces joined with their capture traces.

A serving engine (vLLM, SGLang) captures its model's forward pass as a CUDA/HIP graph once and
then replays it with one ``cudaGraphLaunch`` / ``hipGraphLaunch`` per iteration. In the replay
trace every kernel of the graph is correlated to that one launch, so no operator and no shape
can be seen. The engines can write the capture step as its own profiler trace (the
``capture_traces/`` folder beside the replay trace, with an ``execution_details.json``): there
each kernel launch is still issued by its operator (``aten::mm`` with its ``Input Dims``, ...).

``merge_graph_capture`` joins the two at the level of the raw Kineto events, before the trace is
parsed: for each graph launch of the replay, its kernels (ordered by start time) are matched to
a capture's kernel launches (between ``StreamBeginCapture`` and ``StreamEndCapture``, ordered by
start time) with the same count and, where both carry kernel names, the same names in the same
order; or, when the capture names every kernel, with a few more launches (at most 1 %, at least
one) that the kernels' names match in order, the others skipped with a warning. Each matched
kernel gets a synthetic launch call and belongs to a synthetic operator (the innermost CPU
operator that enclosed the launch at capture, with its arguments; consecutive kernels launched by
the same captured operator call share one, so calls are counted as at capture), nested in the
time of the original graph launch, so that every later analysis (operator summary, roofline,
kernel tables) sees an ordinary operator → launch → kernel chain; the graph's memsets and memcpys
(no captured kernel launch) keep a launch call of their own, under no operator. Launches that no
capture matches keep their kernels under the graph launch and are counted in
``GraphMergeStats.unmatched_launches``.
"""

from __future__ import annotations

import bisect
import gzip
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from analysis.errors import CorruptTraceError, InputFileError

GRAPH_LAUNCH_SUFFIX = "GraphLaunch"  # cudaGraphLaunch, hipGraphLaunch
CAPTURE_FOLDER = "capture_traces"
# Bump when merge_graph_capture's output changes: cache entries of merged traces then miss.
# 3: consecutive kernels of one captured operator call share one synthetic operator and its
# External id (2 was a draft of it, never merged); 4: a capture with a few launches more aligns by
# kernel names (_aligned); 5: one capture per StreamBeginCapture/EndCapture segment, the graph's
# copies keep a launch
MERGE_VERSION = 5
# the categories as written, Kineto's 2021 names too (the merge reads the raw events)
_RUNTIME_CATS = ("cuda_runtime", "cuda_driver", "Runtime")
_KERNEL_CATS = ("kernel", "Kernel")
_COPY_CATS = ("gpu_memset", "gpu_memcpy", "Memset", "Memcpy")
_OP_CATS = ("cpu_op", "Operator")
_SGLANG_PROFILER = "sglang_profiler::"


@dataclass
class GraphMergeStats:
    """What ``merge_graph_capture`` did. Counts are graph launches / kernels of the replay."""

    graph_launches: int = 0
    matched_launches: int = 0
    unmatched_launches: int = 0
    kernels_attributed: int = 0
    kernels_unattributed: int = 0
    reasons: list[str] = field(default_factory=list)
    # captured launches with no kernel in the replay, skipped to align a graph launch's kernels
    # (see _matching_capture); per graph launch, what was skipped
    capture_launches_skipped: int = 0
    skipped: list[str] = field(default_factory=list)


@dataclass
class _Capture:
    source: str
    ops: list[tuple[str, dict]]  # per captured kernel launch: (operator name, its args)
    op_calls: list[int]  # per captured kernel launch: which operator call launched it (-1: none)
    kernel_names: list[str | None]


def find_capture_folder(trace_path: str) -> Path | None:
    """The ``capture_traces/`` folder beside a local replay trace, or None."""
    folder = Path(trace_path).parent / CAPTURE_FOLDER
    return folder if folder.is_dir() else None


def capture_location(url: str, capture: str | os.PathLike | None = None) -> Path | None:
    """The capture trace(s) to merge into the trace at ``url``: ``capture`` when given (a file
    or a folder of capture traces, the ``capture_trace=`` argument; ``InputFileError`` when it
    does not exist), else the ``capture_traces/`` folder beside a local trace, or None."""
    if capture is not None:
        path = Path(os.fspath(capture)).expanduser()
        if not path.exists():
            raise InputFileError(os.fspath(capture), "capture_trace: no such file or folder")
        return path
    if "://" in url and not url.startswith("file://"):
        return None
    return find_capture_folder(url.removeprefix("file://"))


def capture_signature(url: str, capture: str | os.PathLike | None = None) -> str:
    """What identifies the capture traces of a trace (:func:`capture_location`: path, names,
    sizes, mtimes), for cache keys; empty when there are none."""
    location = capture_location(url, capture)
    if location is None:
        return ""
    files = sorted(location.iterdir()) if location.is_dir() else [location]
    parts = [f"merge {MERGE_VERSION}"] + ([str(location.resolve())] if capture is not None else [])
    for p in files:
        st = p.stat()
        parts.append(f"{p.name}:{st.st_size}:{st.st_mtime_ns}")
    return ";".join(parts)


def read_capture_events(path: str | Path) -> list[list[dict]]:
    """The ``traceEvents`` of every capture trace at ``path`` (a file, or a folder of
    ``*.json`` / ``*.json.gz`` traces; ``execution_details.json`` is skipped)."""
    path = Path(path)
    files = (
        sorted(p for p in path.iterdir() if p.name.endswith((".json", ".json.gz")))
        if path.is_dir()
        else [path]
    )
    out = []
    for f in files:
        if f.name == "execution_details.json":
            continue
        try:
            data = f.read_bytes()
            if data[:2] == b"\x1f\x8b":
                data = gzip.decompress(data)
            top = json.loads(data)
        except (OSError, EOFError, ValueError) as exc:  # gzip, UnicodeDecodeError, JSON errors
            raise CorruptTraceError(str(f), "not a readable CUDA graph capture trace (a Kineto "
                                    f"JSON trace): {type(exc).__name__}: {exc}") from None
        if isinstance(top, dict) and isinstance(top.get("traceEvents"), list):
            out.append(top["traceEvents"])
    return out


def _is_launch(ev: dict) -> bool:
    name = ev.get("name", "")
    return ev.get("cat") in _RUNTIME_CATS and "LaunchKernel" in name


def _captures_of(events: list[dict], source: str) -> list[_Capture]:
    """The graph captures of one capture trace: one per ``StreamBeginCapture`` …
    ``StreamEndCapture`` segment, in time order (vLLM's piecewise mode captures each piece of
    the model, and each batch size, as its own graph: one file holds many); the whole trace as
    one capture when it records no such call."""
    runtime = [e for e in events if e.get("cat") in _RUNTIME_CATS and e.get("ph") == "X"]
    begins = sorted(e["ts"] for e in runtime if e.get("name", "").endswith("StreamBeginCapture"))
    ends = sorted(e["ts"] for e in runtime if e.get("name", "").endswith("StreamEndCapture"))
    segments = []
    for lo in begins:  # each begin with the first end after it (captures do not nest)
        at = bisect.bisect_left(ends, lo)
        if at < len(ends) and (not segments or lo >= segments[-1][1]):
            segments.append((lo, ends[at]))
    if not segments:
        segments = [(begins[0] if begins else float("-inf"), ends[-1] if ends else float("inf"))]
    launches = sorted((e for e in runtime if _is_launch(e)), key=lambda e: e["ts"])
    context = _CaptureContext(events)
    out = []
    for lo, hi in segments:
        mine = [e for e in launches if lo <= e["ts"] <= hi]
        if mine:
            out.append(context.capture(mine, source))
    return out


class _CaptureContext:
    """A capture trace's CPU operators per thread and its kernels' names by correlation, read
    once for all its captures."""

    def __init__(self, events: list[dict]) -> None:
        self.ops_by_thread: dict[tuple, list[dict]] = {}
        for e in events:
            if e.get("cat") in _OP_CATS and e.get("ph") == "X":
                self.ops_by_thread.setdefault((e.get("pid"), e.get("tid")), []).append(e)
        self.starts = {}
        for key, ops in self.ops_by_thread.items():
            ops.sort(key=lambda e: e["ts"])
            self.starts[key] = [e["ts"] for e in ops]
        # kernels launched at capture time (rare: capture does not run them) name the launches
        self.names_by_corr = {
            e.get("args", {}).get("correlation"): e.get("name")
            for e in events
            if e.get("cat") in _KERNEL_CATS
        }

    def capture(self, launches: list[dict], source: str) -> _Capture:
        """The capture of ``launches`` (kernel launch calls, by start): per launch, the innermost
        CPU operator enclosing it on its thread and the kernel it names."""
        ops, names, op_calls = [], [], []
        for launch in launches:
            key = (launch.get("pid"), launch.get("tid"))
            ts = launch["ts"]
            best = None
            thread_ops = self.ops_by_thread.get(key, [])
            i = bisect.bisect_right(self.starts.get(key, []), ts)
            # the innermost enclosing operator: the latest-starting one that still covers ts
            for op in reversed(thread_ops[:i]):
                if op["ts"] + op.get("dur", 0) >= ts + launch.get("dur", 0):
                    best = op
                    break
            args = launch.get("args", {})
            names.append(args.get("kernel") or self.names_by_corr.get(args.get("correlation")))
            ops.append((_op_name(best["name"]), dict(best.get("args", {}))) if best
                       else (launch["name"], {}))
            op_calls.append(id(best) if best else -1)
        return _Capture(source=source, ops=ops, kernel_names=names, op_calls=op_calls)


def _op_name(name: str) -> str:
    """SGLang's kernel shape profiler registers ``sglang_profiler::<module>_<fn>_<n>``: the
    trailing registration counter ``_<n>`` is dropped (as TraceLens does), so that the same
    operator has one name across captures."""
    if name.startswith(_SGLANG_PROFILER):
        return re.sub(r"_\d+$", "", name)
    return name


def merge_graph_capture(
    replay_events: list[dict], captures: list[list[dict]], sources: list[str] | None = None
) -> tuple[list[dict], GraphMergeStats]:
    """The replay's events with each graph launch's kernels attributed to captured operators.

    ``captures``: the events of each capture trace. Returns the new event list (the input is not
    modified) and the statistics; see the module docstring for the matching rules.
    """
    sources = sources or [f"capture {i}" for i in range(len(captures))]
    caps = [c for ev, s in zip(captures, sources, strict=True) for c in _captures_of(ev, s)]
    stats = GraphMergeStats()
    launches = [
        e
        for e in replay_events
        if e.get("cat") in _RUNTIME_CATS
        and e.get("name", "").endswith(GRAPH_LAUNCH_SUFFIX)
        and e.get("ph") == "X"
    ]
    kernels_by_corr: dict = {}
    others_by_corr: dict = {}  # the graph's memsets / memcpys: no captured operator launched them
    for e in replay_events:
        if e.get("cat") in _KERNEL_CATS:
            kernels_by_corr.setdefault(e.get("args", {}).get("correlation"), []).append(e)
        elif e.get("cat") in _COPY_CATS:
            others_by_corr.setdefault(e.get("args", {}).get("correlation"), []).append(e)
    replaced: dict[int, list[dict]] = {}  # id(launch event) -> synthetic events
    new_kernel: dict[int, dict] = {}  # id(kernel event) -> rewritten kernel
    next_id = 1 + max(
        [int(e.get("args", {}).get("correlation", 0) or 0) for e in replay_events]
        + [int(e.get("args", {}).get("External id", 0) or 0) for e in replay_events]
        + [0]
    )
    for launch in launches:
        stats.graph_launches += 1
        kernels = sorted(
            kernels_by_corr.get(launch["args"].get("correlation"), []), key=lambda e: e["ts"]
        )
        cap, skipped = _matching_capture(caps, kernels)
        if skipped:
            stats.capture_launches_skipped += len(skipped)
            stats.skipped.append(
                f"{launch['name']} at ts {launch['ts']}: {len(kernels)} kernels against "
                f"{len(kernels) + len(skipped)} captured launches; skipped: "
                + ", ".join(f"#{i} {name}" for i, name in skipped[:3])
            )
        if cap is None:
            stats.unmatched_launches += 1
            stats.kernels_unattributed += len(kernels)
            stats.reasons.append(
                f"{launch['name']} at ts {launch['ts']}: {len(kernels)} kernels, no capture "
                f"with that kernel sequence (capture launch counts: "
                f"{sorted({len(c.ops) for c in caps}) or 'no capture traces'})"
            )
            continue
        stats.matched_launches += 1
        n = len(kernels)
        others = others_by_corr.get(launch["args"].get("correlation"), [])
        width = launch.get("dur", 0) / max(n + bool(others), 1)
        synthetic = []
        op: dict = {}
        for i, (kernel, (op_name, op_args)) in enumerate(zip(kernels, cap.ops, strict=True)):
            corr, ext = next_id, next_id + 1
            next_id += 2
            ts = launch["ts"] + i * width
            same_call = i > 0 and cap.op_calls[i] != -1 and cap.op_calls[i] == cap.op_calls[i - 1]
            if same_call:  # the captured operator's next launch: its synthetic op grows
                op["dur"] = ts + width * 0.9 - op["ts"]
                ext = op["args"]["External id"]  # its launches share its External id
            else:
                op = {
                    "ph": "X",
                    "cat": "cpu_op",
                    "name": op_name,
                    "pid": launch.get("pid"),
                    "tid": launch.get("tid"),
                    "ts": ts,
                    "dur": width * 0.9,
                    "args": {**op_args, "External id": ext, "graph_replay": True},
                }
                synthetic.append(op)
            call = {
                "ph": "X",
                "cat": launch["cat"],
                "name": launch["name"],
                "pid": launch.get("pid"),
                "tid": launch.get("tid"),
                "ts": ts + width * 0.1,
                "dur": width * 0.5,
                "args": {"correlation": corr, "External id": ext},
            }
            synthetic.append(call)
            new_kernel[id(kernel)] = {
                **kernel,
                "args": {**kernel.get("args", {}), "correlation": corr, "External id": ext},
            }
            stats.kernels_attributed += 1
        if others:  # the graph's copies keep a launch (the graph launch's last slot), no operator
            corr = next_id
            next_id += 1
            synthetic.append({
                "ph": "X", "cat": launch["cat"], "name": launch["name"], "pid": launch.get("pid"),
                "tid": launch.get("tid"), "ts": launch["ts"] + n * width + width * 0.1,
                "dur": width * 0.5, "args": {"correlation": corr},
            })
            for e in others:
                new_kernel[id(e)] = {**e, "args": {**e.get("args", {}), "correlation": corr}}
        replaced[id(launch)] = synthetic
    out = []
    for e in replay_events:
        if id(e) in replaced:
            out += replaced[id(e)]
        elif id(e) in new_kernel:
            out.append(new_kernel[id(e)])
        elif e.get("cat") == "ac2g" and any(
            id(k) in new_kernel
            for k in kernels_by_corr.get(e.get("id"), []) + others_by_corr.get(e.get("id"), [])
        ):
            continue  # flows of the replaced graph launches
        else:
            out.append(e)
    return out, stats


# At most this share of a capture's launches (and at least one) may have no kernel in the replay
# for the capture to still match it (see _aligned).
SKIP_SHARE = 0.01


def _matching_capture(caps: list[_Capture], kernels: list[dict]
                      ) -> tuple[_Capture | None, list[tuple[int, str]]]:
    """The capture whose launches are the graph launch's kernels, and the captured launches
    skipped to align them (``(position, kernel name)``). Same count and, where the capture names
    its kernels, the same names in order; else, when every captured launch is named, a capture
    with a few more launches (:data:`SKIP_SHARE`) whose names contain the kernels' in order
    (:func:`_aligned`: a launch the profiler recorded at capture but whose kernel the replay does
    not have, as xDiT's Flux trace on MI300X, whose capture has one GEMM more at its end)."""
    if not kernels:
        return None, []
    for cap in caps:
        if len(cap.ops) == len(kernels) and all(
            n is None or n == k.get("name") for n, k in zip(cap.kernel_names, kernels, strict=True)
        ):
            return cap, []
    for cap in caps:
        extra = len(cap.ops) - len(kernels)
        if 0 < extra <= max(1, int(SKIP_SHARE * len(kernels))) and None not in cap.kernel_names:
            aligned = _aligned(cap, kernels)
            if aligned is not None:
                return aligned
    return None, []


def _aligned(cap: _Capture, kernels: list[dict]) -> tuple[_Capture, list[tuple[int, str]]] | None:
    """``cap`` without the launches that no kernel matches: each kernel, in order, takes the
    next captured launch of its name, the launches passed over are skipped (TraceLens aligns a
    capture with its replay the same way). None when some kernel finds no launch."""
    keep: list[int] = []
    skipped: list[tuple[int, str]] = []
    i = 0
    for k in kernels:
        name = k.get("name")
        while i < len(cap.kernel_names) and cap.kernel_names[i] != name:
            skipped.append((i, str(cap.kernel_names[i])[:80]))
            i += 1
        if i == len(cap.kernel_names):
            return None
        keep.append(i)
        i += 1
    skipped += [(j, str(cap.kernel_names[j])[:80]) for j in range(i, len(cap.kernel_names))]
    sub = _Capture(source=cap.source, ops=[cap.ops[j] for j in keep],
                   kernel_names=[cap.kernel_names[j] for j in keep],
                   op_calls=[cap.op_calls[j] for j in keep])
    return sub, skipped


def merge_trace_bytes(data: bytes, capture: str | Path) -> tuple[bytes, GraphMergeStats]:
    """``merge_graph_capture`` on a whole trace file's bytes (gzip or plain JSON): the merged
    trace as plain JSON bytes, with the statistics under the top-level key ``graphCapture``."""
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    top = json.loads(data)
    paths = Path(capture)
    caps = read_capture_events(paths)
    events, stats = merge_graph_capture(top.get("traceEvents", []), caps)
    top["traceEvents"] = events
    top["graphCapture"] = {
        "graph_launches": stats.graph_launches,
        "matched_launches": stats.matched_launches,
        "unmatched_launches": stats.unmatched_launches,
        "kernels_attributed": stats.kernels_attributed,
        "kernels_unattributed": stats.kernels_unattributed,
        "unmatched": stats.reasons[:20],
        "capture_launches_skipped": stats.capture_launches_skipped,
        "skipped": stats.skipped[:20],
    }
    return json.dumps(top).encode(), stats


def with_graph_capture(
    data: bytes, url: str, capture: str | os.PathLike | None = None
) -> tuple[bytes, list[str]]:
    """A replay trace's bytes merged with its capture traces (:func:`capture_location`:
    ``capture``, else the ``capture_traces/`` folder beside a local trace), and a note when some
    graph launches matched no capture; other traces' bytes unchanged. The loader and the
    on-demand args tables (``analysis.kineto.extras``) both read a trace through it, so that
    their rows agree."""
    folder = capture_location(url, capture)
    if folder is None:
        return data, []
    merged, stats = merge_trace_bytes(data, folder)
    notes = []
    if stats.unmatched_launches:
        notes.append(
            f"{url}: {stats.unmatched_launches} of {stats.graph_launches} graph launches match no "
            f"capture trace in {folder} ({stats.kernels_unattributed} kernels stay under the "
            f"launch); first: {stats.reasons[0]}"
        )
    if stats.capture_launches_skipped:
        notes.append(
            f"{url}: {stats.capture_launches_skipped} launch(es) of the capture trace in {folder} "
            f"have no kernel in the replay and were skipped to match {len(stats.skipped)} graph "
            f"launch(es) (the profiler missed them at replay, or the graph dropped them); "
            f"first: {stats.skipped[0]}"
        )
    return merged, notes
