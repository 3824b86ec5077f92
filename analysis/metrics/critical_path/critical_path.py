"""Critical path of a rank's step: the longest chain of dependent CPU and GPU work, and what bounds it.

The graph (``analysis.metrics.critical_path.critical_path_graph``) links every CPU operator, runtime call and GPU
kernel of a window by the order they had to happen in; an edge's weight is the time it covers (µs).
The critical path is the graph's longest path: its length is the time the window could not have been
shorter by speeding up anything off the path. Each path edge is attributed to an event and
classified (``bound_by``) as HTA 0.5.0 does:

- ``cpu_bound``: time inside a CPU operator or runtime call;
- ``cpu_untraced`` (default analysis only): the CPU was busy in code the profiler did not record
  (Python, data loading outside the recorded operators, the GIL): a dependency edge between two
  operators of a thread, and the step's time before the path's first event and after its last;
- ``data_loading`` (not in HTA; default analysis only): the same, inside a ``DataLoader`` span;
- ``gpu_compute_bound`` / ``gpu_communication_bound``: a GPU kernel (communication by the kernel
  pattern preset), memcpy or memset;
- ``gpu_kernel_kernel_overhead``: the gap between two kernels on a stream;
- ``gpu_kernel_launch_overhead``: the delay from a launch call to its kernel on an idle stream;
- ``""`` (HTA mode): zero-weight dependency and synchronisation edges.

Default analysis: every edge on the path counts the time it spans (HTA counts zero for dependency,
sync and blocking-call edges), so the path covers the whole step: its length is the step's duration
(``step_us``), or, where GPU work launched in the step runs past the step's end, the step plus that
overrun (``past_step_end_us``). A sync edge counts as communication when it waits for a
communication kernel, as ``gpu_kernel_kernel_overhead`` when a stream waits for another stream,
and as ``cpu_bound`` when the CPU's sync call returns after the GPU finished. As every edge counts
the time it spans, many chains cover the step equally; the path is the one among them with the most
recorded work (``critical_path_graph.search_weights``), so it follows the GPU, a collective or
another CPU thread (hand-off edges) where they worked while the first thread idled, stream
waits Kineto did not record are inferred (``critical_path_context``), and a GPU event queued behind
work launched before the step (the previous step's kernels still running) is reached from its
launch call, the wait attributed to that earlier work (queued edges).

``summary()`` is the share (%) of path time per ``bound_by`` (summing to 100). Window: one instance of an annotation
(``ProfilerStep`` by default) on one rank, within the analysed profiler steps; times in µs.
``patterns.hta_quirks`` (``kernel_patterns="hta"``) reproduces HTA 0.5.0's graph exactly; the default
fixes its known failures (see ``docs/deviations.md``).

The longest path (``analysis.metrics.critical_path.longest_path``) follows networkx's order and tie-breaking, so
that the path matches HTA's; a cycle (HTA #113: out-of-order call stacks) is reported (a
``CriticalPathWarning``) and broken deterministically by dropping its edges that run backwards in
time.
"""

from __future__ import annotations

import re
import warnings
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from analysis.errors import ConfigError, NoGPUEventsError
from analysis.kineto.events import has_gpu_events
from analysis.kineto.model import RankTrace
from analysis.metrics.compare.trace_diff_hta import shorten_name  # HTA's short kernel names
from analysis.metrics.critical_path.critical_path_context import RankContext, rank_context
from analysis.metrics.critical_path.critical_path_graph import (
    DEPENDENCY,
    EDGE_TYPES,
    KERNEL_KERNEL,
    LAUNCH,
    SYNC,
    CPGraphArrays,
    build_graph,
    search_weights,
)
from analysis.metrics.critical_path.longest_path import longest_path
from analysis.metrics.kernel_types import KernelPatterns, resolve_patterns
from analysis.metrics.timebase import Rounding

BOUND_BY = (
    "cpu_bound",
    "cpu_untraced",
    "data_loading",
    "gpu_compute_bound",
    "gpu_communication_bound",
    "gpu_kernel_kernel_overhead",
    "gpu_kernel_launch_overhead",
)
BREAKDOWN_COLUMNS = ("event_idx", "duration", "type", "s_name", "cat", "pid", "tid", "stream",
                     "bound_by")  # fmt: skip
SUMMARY_COLUMNS = ("rank", "instance", "path_length_us", "step_us", "past_step_end_us", "path_nodes", "path_events", "path_edges",
                   "nodes", "edges", "cycles_broken") + BOUND_BY  # fmt: skip
_DATA_LOADER = re.compile(r"DataLoader", re.IGNORECASE)


class CriticalPathWarning(UserWarning):
    """Something in the trace was repaired or left out while building the critical path."""


@dataclass
class CriticalPathGraph:
    """One window's critical-path graph and its longest path (HTA's ``CPGraph`` surface)."""

    rank: int
    instance: str  # the annotation instance analysed (e.g. "ProfilerStep#12")
    graph: CPGraphArrays
    critical_path_nodes: list[int]
    path_edges: np.ndarray  # edge indices along the path, in order
    comm_mask: np.ndarray  # per event row: a communication kernel
    data_loading_mask: np.ndarray  # per event row: inside a DataLoader span (default analysis)
    cycles_broken: int = 0
    success: bool = True
    notes: dict[str, int] = field(default_factory=dict)
    reason: str = ""  # why there is no path (``success`` False): e.g. an empty window
    hta: bool = False  # HTA 0.5.0's attribution (weights, no untraced time, no window gaps)
    _breakdown: pd.DataFrame | None = field(default=None, repr=False, compare=False)
    _bounds: pd.DataFrame | None = field(default=None, repr=False, compare=False)

    @property
    def num_nodes(self) -> int:
        return len(self.graph.node_ts)

    @property
    def num_edges(self) -> int:
        return len(self.graph.edge_src)

    @property
    def critical_path_events_set(self) -> set[int]:
        """Event labels (row labels of the rank's event table) of the path's nodes."""
        labels = self.graph.events.index.to_numpy()
        return set(labels[self.graph.node_event[self.critical_path_nodes]].tolist())

    @property
    def path_length_us(self) -> float:
        """Length of the critical path, µs: the sum of its breakdown's durations. HTA mode: the
        path's edge weights as HTA's breakdown gives them (a negative one, e.g. kernels that
        overlap on a stream, counts negative there, though the search took it as 0); default, the
        time the path covers (the step, or more where the GPU runs past its end)."""
        return float(self._bound_durations()["duration"].sum())

    @property
    def step_us(self) -> float:
        """The window's (step's) duration, µs."""
        w0, w1 = self.graph.window
        return (w1 - w0) / 1000.0

    def _path_extent_ns(self) -> tuple[int, int]:
        """(first, last) time of the path's nodes, ns (the window when the path is empty)."""
        if len(self.critical_path_nodes) == 0:
            return self.graph.window
        ts = self.graph.node_ts[self.critical_path_nodes]
        return int(ts[0]), int(ts.max())

    @property
    def past_step_end_us(self) -> float:
        """How far the path (GPU work launched in the step) runs past the step's end, µs."""
        return max(self._path_extent_ns()[1] - self.graph.window[1], 0) / 1000.0

    def edges(self) -> pd.DataFrame:
        """All edges: ``begin``, ``end`` (node ids), ``weight`` (µs), ``type``, ``event_idx``
        (the attributed event's row label; <NA> for dependency, launch and sync edges)."""
        g = self.graph
        on_path = np.zeros(len(g.edge_src), bool)
        on_path[self.path_edges] = True
        return pd.DataFrame({
            "begin": g.edge_src, "end": g.edge_dst, "weight": g.edge_weight / 1000.0,
            "type": np.asarray(EDGE_TYPES, dtype=object)[g.edge_type],
            "event_idx": _labels(g.events, g.edge_event), "on_critical_path": on_path,
        })  # fmt: skip

    def nodes(self) -> pd.DataFrame:
        """All nodes: ``node_id``, ``event_idx``, ``ts`` (µs), ``is_start``, ``on_critical_path``."""
        g = self.graph
        return pd.DataFrame({
            "node_id": np.arange(len(g.node_ts)),
            "event_idx": g.events.index.to_numpy()[g.node_event],
            "ts": g.node_ts / 1000.0,
            "is_start": g.node_is_start,
            "on_critical_path": np.isin(np.arange(len(g.node_ts)), self.critical_path_nodes),
        })  # fmt: skip

    def get_critical_path_breakdown(self) -> pd.DataFrame:
        """One row per edge on the path, in path order, with HTA's columns (``duration`` in µs)."""
        if self._breakdown is None:
            self._breakdown = self._breakdown_table()
        return self._breakdown.copy()

    def _edge_bounds(self) -> tuple[np.ndarray, np.ndarray]:
        """Per path edge, in path order: ``bound_by`` and the duration (ns) the breakdown gives it."""
        g, e = self.graph, self.path_edges
        ev = g.events
        attr = g.edge_event[e]
        has = attr >= 0
        p = np.maximum(attr, 0)
        typ = g.edge_type[e]
        stream = np.where(has, ev["stream"].to_numpy()[p], -1)
        bound = np.full(len(e), "", dtype=object)
        bound[has & (stream < 0)] = "cpu_bound"
        bound[has & (stream < 0) & self.data_loading_mask[p]] = "data_loading"
        bound[has & (stream >= 0)] = "gpu_compute_bound"
        bound[has & (stream >= 0) & self.comm_mask[p]] = "gpu_communication_bound"
        bound[typ == KERNEL_KERNEL] = "gpu_kernel_kernel_overhead"
        bound[typ == LAUNCH] = "gpu_kernel_launch_overhead"
        if self.hta:  # HTA 0.5.0 reports the weights as they are, negative ones too
            duration = g.edge_weight[e].astype(np.float64)
        else:
            # the time each edge adds beyond the furthest point the path has reached (an edge
            # running back in time, e.g. a launch with clock skew, adds nothing and the time is
            # not counted twice): the durations tile [path start, path end]
            ts = g.node_ts[np.asarray(self.critical_path_nodes, dtype=np.int64)]
            reached = np.maximum.accumulate(ts)[:-1] if len(ts) else ts
            duration = np.maximum(g.node_ts[g.edge_dst[e]] - reached, 0)
            bound[(typ == DEPENDENCY) & (duration > 0)] = "cpu_untraced"
            sync = (typ == SYNC) & (duration > 0)
            src_ev = g.node_event[g.edge_src[e]]
            dst_gpu = ev["stream"].to_numpy()[g.node_event[g.edge_dst[e]]] >= 0
            bound[sync] = np.where(dst_gpu[sync], "gpu_kernel_kernel_overhead", "cpu_bound")
            bound[sync & self.comm_mask[src_ev]] = "gpu_communication_bound"
        return bound, duration

    def _window_gaps_ns(self) -> tuple[int, int]:
        """The step's time before the path's first node and after its last (ns, default analysis;
        0 and 0 in HTA mode)."""
        if self.hta:
            return 0, 0
        (w0, w1), (p0, p1) = self.graph.window, self._path_extent_ns()
        return max(p0 - w0, 0), max(w1 - p1, 0)

    def _bound_durations(self) -> pd.DataFrame:
        """The breakdown's ``bound_by`` and ``duration`` (µs) columns alone, rows in the same order
        (window gaps included): what ``summary`` and ``path_length_us`` read, without the events'
        names and attributes of each edge."""
        if self._breakdown is not None:
            return self._breakdown[["bound_by", "duration"]]
        if self._bounds is None:
            bound, duration = self._edge_bounds()
            before, after = self._window_gaps_ns()
            bound = np.concatenate([["cpu_untraced"] * (before > 0), bound,
                                    ["cpu_untraced"] * (after > 0)]).astype(object)
            duration = np.concatenate([[before / 1000.0] * (before > 0), duration / 1000.0,
                                       [after / 1000.0] * (after > 0)])
            self._bounds = pd.DataFrame({"bound_by": bound, "duration": duration})
        return self._bounds

    def _breakdown_table(self) -> pd.DataFrame:
        g, e = self.graph, self.path_edges
        ev = g.events
        attr = g.edge_event[e]
        has = attr >= 0
        p = np.maximum(attr, 0)
        stream = np.where(has, ev["stream"].to_numpy()[p], -1)
        bound, duration = self._edge_bounds()
        rows = ev.iloc[p]
        names = rows["name"].astype(str).to_numpy()
        out = pd.DataFrame({
            "event_idx": _labels(ev, attr),
            "duration": duration / 1000.0,
            "type": np.asarray(EDGE_TYPES, dtype=object)[g.edge_type[e]],
            "s_name": np.where(has, _short_names(names), None),
            "cat": np.where(has, rows["cat"].astype(str).to_numpy(), None),
            "pid": np.where(has, rows["pid"].to_numpy(), -1),
            "tid": np.where(has, rows["tid"].to_numpy(), -1),
            "stream": stream,
            "bound_by": bound,
        })  # fmt: skip
        return out if self.hta else self._with_window_gaps(out)

    def _with_window_gaps(self, bd: pd.DataFrame) -> pd.DataFrame:
        """The step's time before the path's first node and after its last, as ``cpu_untraced``
        rows (``type`` ``critical_path_window_gap``) at the path's ends."""
        before, after = self._window_gaps_ns()
        def gap(ns):
            return pd.DataFrame({
                "event_idx": pd.array([pd.NA], dtype="Int64"), "duration": [ns / 1000.0],
                "type": ["critical_path_window_gap"], "s_name": [None], "cat": [None],
                "pid": [-1], "tid": [-1], "stream": [-1], "bound_by": ["cpu_untraced"],
            })  # fmt: skip
        parts = ([gap(before)] if before > 0 else []) + [bd] + ([gap(after)] if after > 0 else [])
        return pd.concat(parts, ignore_index=True) if len(parts) > 1 else bd

    def summary(self) -> pd.Series:
        """Share of the path's time per ``bound_by`` category, in % (HTA's ``summary()``)."""
        bd = self._bound_durations()
        total = bd["duration"].sum()
        s = bd.groupby("bound_by")["duration"].sum()
        return s / total * 100 if total > 0 else s * np.nan


def _short_names(names: np.ndarray) -> np.ndarray:
    """``shorten_name`` of each name, computed once per distinct name."""
    uniq, inverse = np.unique(names, return_inverse=True)
    return np.asarray([shorten_name(n) for n in uniq], dtype=object)[inverse]


def _labels(events: pd.DataFrame, positions: np.ndarray) -> pd.array:
    """Row labels of the events at ``positions`` (-1 → <NA>), as nullable integers."""
    labels = events.index.to_numpy()[np.maximum(positions, 0)]
    out = pd.array(labels, dtype="Int64")
    out[positions < 0] = pd.NA
    return out




# --- windows ------------------------------------------------------------------------------------


def annotation_windows(
    rt: RankTrace, annotation: str, hta_compat: bool, rounding: Rounding = "exact"
) -> list[tuple[str, int, int]]:
    """``(instance name, start ns, end ns)`` of each instance of ``annotation`` in file order.

    HTA counts every event whose name contains ``annotation`` (CPU and GPU annotations alike); the
    default counts CPU-side events only (not on a stream, not ``gpu_user_annotation``), so
    ``instance_id`` is the N-th step. ``""`` = whole rank.
    """
    from analysis.metrics.timebase import event_bounds_ns

    ev = rt.events
    start, end = event_bounds_ns(ev["ts"].to_numpy(), ev["dur"].to_numpy(), rounding,
                                 float_timestamps=rt.meta.float_timestamps)  # fmt: skip
    if annotation == "":
        if len(ev) == 0:
            return []
        return [("", int(start.min()), int(end.max()))]
    names = ev["name"]
    mask = _name_contains(names, annotation, regex=False)
    if not hta_compat:
        # CPU-side only (as analysis.kineto.steps): Kineto's GPU-timeline copy of a step
        # annotation is not a second instance, even where the trace gives it no stream
        mask &= (ev["stream"].to_numpy() == -1) & ~_name_contains(
            ev["cat"], "^gpu_user_annotation$")
    idx = np.flatnonzero(mask)
    return [(str(names.iat[i]), int(start[i]), int(end[i])) for i in idx]


# --- the analysis -------------------------------------------------------------------------------


def critical_path_graph(
    rt: RankTrace, window: tuple[str, int, int], *, patterns: KernelPatterns,
    context: RankContext, comm: np.ndarray, data_loading: np.ndarray,
) -> CriticalPathGraph:  # fmt: skip
    """The critical path of one window of one rank (``context``: ``rank_context(rt, ...)``)."""
    name, w0, w1 = window
    g = build_graph(context, (w0, w1))
    weights = g.edge_weight if patterns.hta_quirks else search_weights(g)
    path, path_edges, broken = longest_path(len(g.node_ts), g.edge_src, g.edge_dst, weights)
    notes = dict(g.notes)
    if broken:
        notes["cycle_edges_dropped"] = broken
    for what, count in notes.items():
        warnings.warn(
            f"rank {rt.rank}, {name or 'whole trace'}: critical path: {count} × {what.replace('_', ' ')}",
            CriticalPathWarning, stacklevel=3,
        )  # fmt: skip
    return CriticalPathGraph(
        rank=rt.rank, instance=name, graph=g, critical_path_nodes=list(path),
        path_edges=path_edges, comm_mask=comm, data_loading_mask=data_loading,
        cycles_broken=broken, success=len(path) >= 2, notes=notes, hta=patterns.hta_quirks,
        reason="" if len(path) >= 2 else _no_path_reason(len(g.node_ts), len(g.edge_src)),
    )  # fmt: skip


def _no_path_reason(nodes: int, edges: int) -> str:
    if nodes == 0:
        return ("the window holds no CPU operator and no GPU event of the analysis (a CPU-only "
                "or empty step, or kernels outside it): an empty path")
    if edges == 0:
        return f"the graph of the window has {nodes} node(s) and no edge: an empty path"
    return (f"the graph of the window has {nodes} node(s) and {edges} edge(s), none of any "
            "duration: no path longer than one node")


def _name_contains(names: pd.Series, pattern, regex: bool = True) -> np.ndarray:
    """Rows whose name contains ``pattern``, tested once per distinct name (names are categorical)."""
    cat = names if isinstance(names.dtype, pd.CategoricalDtype) else names.astype("category")
    cats = pd.Series(cat.cat.categories.astype(str))
    hit = np.append(cats.str.contains(pattern, regex=regex).to_numpy(bool), False)
    return hit[cat.cat.codes.to_numpy()]


def _in_data_loader(ev: pd.DataFrame, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Per event row: starts inside a ``DataLoader`` span on the same CPU thread."""
    dl = np.flatnonzero(_name_contains(ev["name"], _DATA_LOADER) & (ev["stream"].to_numpy() == -1))
    out = np.zeros(len(ev), bool)
    pid, tid = ev["pid"].to_numpy(), ev["tid"].to_numpy()
    for i in dl:
        out |= (pid == pid[i]) & (tid == tid[i]) & (start >= start[i]) & (start < end[i])
    return out


def critical_path_rank(
    rt: RankTrace, *, annotation: str = "ProfilerStep", instance_id=None,
    patterns: str | KernelPatterns = "default", rounding: Rounding = "exact",
) -> dict[str, CriticalPathGraph]:  # fmt: skip
    """Critical-path graphs of one rank: ``{instance name: graph}``.

    ``instance_id``: ``None`` = every instance (every step), an int = that instance (file order),
    ``(first, last)`` = one window spanning those instances, inclusive (HTA's tuple form).
    """
    pat = resolve_patterns(patterns)
    windows = annotation_windows(rt, annotation, pat.hta_quirks, rounding)
    if not windows:
        raise ConfigError(f"rank {rt.rank}: no event named like {annotation!r} in {rt.meta.source}")
    if instance_id is None:
        chosen = windows
    else:
        lo, hi = instance_id if isinstance(instance_id, tuple) else (instance_id, instance_id)
        sel = windows[lo : hi + 1]
        if not sel:
            raise ConfigError(
                f"rank {rt.rank}: instance {instance_id} of {annotation!r} does not exist "
                f"({len(windows)} instances) in {rt.meta.source}"
            )
        label = sel[0][0] if len(sel) == 1 else f"{sel[0][0]}..{sel[-1][0]}"
        chosen = [(label, min(s for _, s, _ in sel), max(e for _, _, e in sel))]
    hta = pat.hta_quirks
    # the rank-wide arrays (read-only once built): shared by the summary and the analysis of
    # the same window and options (~0.4 s per rank of a 54 MB trace)
    context = rt.memoised(("critical_path_context", hta, rounding),
                          lambda: rank_context(rt, hta_compat=hta, rounding=rounding))
    ev = rt.events
    comm = np.asarray(pat.classify(ev["name"])) == "COMMUNICATION"
    loading = np.zeros(len(ev), bool) if hta else _in_data_loader(ev, context.start, context.end)
    return {
        w[0]: critical_path_graph(rt, w, patterns=pat, context=context, comm=comm,
                                  data_loading=loading)
        for w in chosen
    }  # fmt: skip


def combine(parts: dict[int, dict[str, CriticalPathGraph]]) -> pd.DataFrame:
    """Per rank and instance: path length (µs), node/edge counts and the % per ``bound_by``."""
    rows = []
    for rank, graphs in sorted(parts.items()):
        for inst, g in graphs.items():
            s = g.summary()
            row = {"rank": rank, "instance": inst, "path_length_us": g.path_length_us,
                   "step_us": g.step_us, "past_step_end_us": g.past_step_end_us,
                   "path_nodes": len(g.critical_path_nodes),
                   "path_events": len(g.critical_path_events_set),
                   "path_edges": len(g.path_edges), "nodes": g.num_nodes, "edges": g.num_edges,
                   "cycles_broken": g.cycles_broken}  # fmt: skip
            if g.success:
                row.update({b: float(s.get(b, 0.0)) for b in BOUND_BY})
            else:  # no path (g.reason): its length and shares are unknown, not 0
                row.update({"path_length_us": float("nan")}, **dict.fromkeys(BOUND_BY, float("nan")))
            rows.append(row)
    return pd.DataFrame(rows, columns=SUMMARY_COLUMNS)


def critical_path_summary_rank(
    rt: RankTrace, *, annotation: str = "ProfilerStep",
    patterns: str | KernelPatterns = "default", rounding: Rounding = "exact",
) -> pd.DataFrame:  # fmt: skip
    """One rank's per-step summary rows (``combine``'s columns); a rank without the annotation is
    analysed as one window over the whole analysed trace (instance ``"whole trace"``). A window
    without a path (:attr:`CriticalPathGraph.reason`, said in a ``CriticalPathWarning``) has NaN
    for its path length and shares; a rank whose windows hold no node at all and that has no GPU
    event the analyses count (every kernel without its stream or correlation, say) raises
    ``NoGPUEventsError``, as the other GPU analyses do."""
    pat = resolve_patterns(patterns)
    if not len(rt.events):  # (a rank whose one profiler step is its last, which is left out)
        raise NoGPUEventsError([rt.rank], "critical path", "the analysed window holds no event")
    if not annotation_windows(rt, annotation, pat.hta_quirks, rounding):
        graphs = critical_path_rank(rt, annotation="", patterns=pat, rounding=rounding)
        graphs = {"whole trace": next(iter(graphs.values()))}
    else:
        graphs = critical_path_rank(rt, annotation=annotation, patterns=pat, rounding=rounding)
    if all(g.num_nodes == 0 for g in graphs.values()) and not has_gpu_events(rt.events):
        raise NoGPUEventsError([rt.rank], "critical path")
    for instance, g in graphs.items():
        if not g.success:
            warnings.warn(f"rank {rt.rank}, {instance or 'whole trace'}: no critical path: "
                          f"{g.reason}", CriticalPathWarning, stacklevel=2)
    return combine({rt.rank: graphs})


def combine_summaries(parts: dict[int, pd.DataFrame]) -> pd.DataFrame:
    """The per-rank summary rows, in rank order."""
    frames = [parts[r] for r in sorted(parts)]
    return pd.concat(frames, ignore_index=True) if frames else combine({})


def combine_graphs(parts: dict[int, dict[str, CriticalPathGraph]]):
    """HTA's return value for one rank and instance: ``(graph, success)``; for several instances
    (``instance_id=None``) or ranks: ``({(rank, instance): graph}, all succeeded)``."""
    graphs = {(r, i): g for r in sorted(parts) for i, g in parts[r].items()}
    if len(graphs) == 1:
        (g,) = graphs.values()
        return g, g.success
    return graphs, all(g.success for g in graphs.values())


def headline(summary: pd.DataFrame) -> pd.DataFrame:
    """Per rank: the category that bounds most of the critical path over its steps, and its %
    (``cpu_bound`` here counts the CPU's traced and untraced time together)."""
    rows = []
    for rank, df in summary.groupby("rank", sort=True):
        us = {b: float((df[b] * df["path_length_us"]).sum() / 100) for b in BOUND_BY}
        # the CPU's time is one family: recorded operators and untraced code alike
        us["cpu_bound"] += us.pop("cpu_untraced")
        total = float(df["path_length_us"].sum())
        top = max(us, key=us.get)
        rows.append({"rank": rank, "critical_path_bound_by": top,
                     "critical_path_bound_pct": us[top] / total * 100 if total else float("nan")})
    return pd.DataFrame(rows, columns=["rank", "critical_path_bound_by", "critical_path_bound_pct"])
