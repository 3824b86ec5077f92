"""Which events the TensorBoard plugin sees as what, and its profiler steps (one definition).

The plugin (``torch-tb-profiler`` 0.4.3) maps each complete event's category, *as written and
lower-cased*, onto its own types; events of other categories do not exist for it:

- ``kernel`` → Kernel (Communication when its ``External id`` is that of a ``nccl:*``/``gloo:*``
  operator or annotation), ``gpu_memcpy``/``memcpy`` → Memcpy, ``gpu_memset``/``memset`` → Memset;
- ``runtime`` → Runtime: Kineto's 2021 name only. Today's ``cuda_runtime`` / ``cuda_driver``
  are not in its map, so on current traces the plugin sees no runtime call at all (its Runtime
  category is 0 and that time falls into CPU Exec or Other);
- ``cpu_op``/``operator`` and (2021) ``python`` events → CPU Exec, except ``ProfilerStep#N``
  (a step), ``enumerate(DataLoader)#*.__next__`` and ``enumerate(DataPipe)#*`` (DataLoader) and
  the collective annotations ``nccl:broadcast|reduce|all_reduce|all_gather|reduce_scatter``
  (and ``gloo:`` ones: Communication);
- ``user_annotation``/``gpu_user_annotation``: only ``ProfilerStep#N`` (a step) and the collective
  annotations; every other annotation is ignored.

Steps: every ``ProfilerStep#N`` event of those categories, CPU or GPU annotation alike (a trace
with Kineto's GPU copy of each step annotation gets two steps per N), in start order; none (a
trace of ``torch.autograd.profiler.profile``) → one step, ``"0"``, spanning the CPU events. On
2021-schema traces (runtime calls visible), each step (that one too) is then moved to its device
side: it starts at the previous step's end (the first, after the last
earlier kernel), ends at the end of the last GPU event its runtime calls launched, and trailing
steps that launched nothing (or the last one when it launched under 80 % of the previous step's
GPU events) are dropped — the plugin's own rule. Times: µs as the plugin holds them
(:func:`.ranges.plugin_us`).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

import numpy as np
import pandas as pd

from analysis.kineto.model import RankTrace
from analysis.metrics.tensorboard.ranges import merge, plugin_us

KERNEL_ARGS = "kernel_args"  # the extra kind with raw categories and launch args
COMM_NAMES = tuple(
    f"{lib}:{op}" for lib in ("nccl", "gloo")
    for op in ("broadcast", "reduce", "all_reduce", "all_gather", "reduce_scatter")
)
STEP_PREFIX = "ProfilerStep#"
ROLES = ("kernel", "memcpy", "memset", "communication", "runtime", "dataloader", "cpu_exec")


@dataclass(frozen=True)
class PluginView:
    """One rank as the plugin sees it: role interval sets (merged, µs), steps, its Kernel rows.

    Computed once per rank (memoised) and shared by every view of the family: the GPU summary,
    the step time breakdown, the kernel table and the utilization timeline of one batch read it.
    """

    roles: dict[str, tuple[np.ndarray, np.ndarray]]
    steps: pd.DataFrame  # name (str), start, end (µs, plugin_us), plugin order
    kernel_rows: np.ndarray  # positions of the plugin's Kernel events (comm kernels included)
    external_ids: np.ndarray  # per event row: the external id the plugin reads (see below)
    ts: np.ndarray  # per event row: start, µs as the plugin holds it (plugin_us)
    end: np.ndarray  # per event row: ts + dur, µs (plugin_us)
    kernel_by_start: np.ndarray  # ``kernel_rows`` by start (row order among equal starts)


def plugin_view(rt: RankTrace) -> PluginView:
    """The plugin's roles and steps of ``rt`` (memoised; needs the ``kernel_args`` extra)."""
    return rt.memoised("tensorboard_plugin_view", lambda: _plugin_view(rt))


def coded(column: pd.Series) -> tuple[np.ndarray, list]:
    """A column as ``(codes, values)``: per row an index into ``values`` (its distinct values),
    -1 where missing; a categorical column's own codes and categories, no copy of the text."""
    if isinstance(column.dtype, pd.CategoricalDtype):
        return column.cat.codes.to_numpy(np.int64), column.cat.categories.tolist()
    codes, uniques = pd.factorize(column.to_numpy(object))
    return codes.astype(np.int64), list(uniques)


def flags_of(column: pd.Series | tuple[np.ndarray, list], predicate) -> np.ndarray:
    """``predicate(value)`` per row of a column (or of its :func:`coded` form), evaluated once per
    distinct value; False where the value is missing."""
    codes, values = coded(column) if isinstance(column, pd.Series) else column
    flags = np.array([bool(predicate(str(v))) for v in values] + [False], dtype=bool)
    return flags[codes]  # code -1 (missing) reads the trailing False


def by_category(column: pd.Series, test) -> np.ndarray:
    """``test(values)`` (a boolean array over distinct values) per row of a categorical column:
    string tests run once per distinct name, not once per event."""
    if isinstance(column.dtype, pd.CategoricalDtype):
        values = pd.Series(column.cat.categories.astype(str))
        flags = np.append(np.asarray(test(values), dtype=bool), False)  # code -1: missing
        return flags[column.cat.codes.to_numpy()]
    return np.asarray(test(column.astype(str)), dtype=bool)


def dataloader_name(name: str) -> bool:
    """Is ``name`` one of the plugin's DataLoader events (``enumerate(DataLoader)#*.__next__``,
    ``enumerate(DataPipe)#*``)."""
    return ((name.startswith("enumerate(DataLoader)#") and name.endswith(".__next__"))
            or name.startswith("enumerate(DataPipe)#"))


def dataloader_names(names: pd.Series) -> np.ndarray:
    """:func:`dataloader_name` per row of a Series of names (vectorised string tests)."""
    return (
        (names.str.startswith("enumerate(DataLoader)#") & names.str.endswith(".__next__"))
        | names.str.startswith("enumerate(DataPipe)#")
    ).to_numpy(bool)


def _plugin_view(rt: RankTrace) -> PluginView:
    ev = rt.events
    n = len(ev)
    args = rt.extra(KERNEL_ARGS)
    where = (args.index.to_numpy(np.int64) if _same_rows(ev.index, args.index)  # labels: positions
             else ev.index.get_indexer(args.index))
    raw_cat = coded(args["raw_cat"])
    is_legacy_runtime = np.zeros(n, bool)
    is_legacy_python = np.zeros(n, bool)
    is_legacy_runtime[where[flags_of(raw_cat, lambda v: v.lower() == "runtime")]] = True
    is_legacy_python[where[flags_of(raw_cat, lambda v: v.lower() == "python")]] = True

    cat = coded(ev["cat"])

    def cat_in(*values: str) -> np.ndarray:
        return flags_of(cat, lambda v: v in values)

    is_op = cat_in("cpu_op")
    is_annotation = cat_in("user_annotation", "gpu_user_annotation")
    names = coded(ev["name"])
    is_step_name = flags_of(names, lambda v: v.startswith(STEP_PREFIX))
    is_comm_name = flags_of(names, lambda v: v in COMM_NAMES)
    is_step = (is_op | is_annotation) & is_step_name
    is_loader = is_op & ~is_step & flags_of(names, dataloader_name)
    cpu_like = (is_op & ~is_step) | is_legacy_python
    comm_ops = (cpu_like | is_annotation) & ~is_step & is_comm_name
    is_cpu_exec = cpu_like & ~is_loader & ~comm_ops
    kernel = cat_in("kernel")
    # the plugin reads "external id" first (Kineto 2021 GPU and runtime events), then "External id"
    ext = ev["external_id"].to_numpy(np.int64).copy()
    lower = args["external_id_lower"].to_numpy(np.int64)
    ext[where[lower >= 0]] = lower[lower >= 0]
    kernel_rows = np.flatnonzero(kernel)
    comm_ids = ext[comm_ops]
    comm_kernel = np.zeros(n, bool)
    if len(comm_ids):
        comm_kernel[kernel_rows[np.isin(ext[kernel_rows], comm_ids)]] = True

    ts = plugin_us(ev["ts"].to_numpy(np.int64))
    end = ts + plugin_us(ev["dur"].to_numpy(np.int64))
    masks = {
        "kernel": kernel & ~comm_kernel,
        "memcpy": cat_in("gpu_memcpy"),
        "memset": cat_in("gpu_memset"),
        "communication": comm_kernel | comm_ops,
        "runtime": is_legacy_runtime,
        "dataloader": is_loader,
        "cpu_exec": is_cpu_exec,
    }
    roles = _roles(masks, ev["ts"].to_numpy(np.int64), ts, end)
    kernel_by_start = kernel_rows[np.argsort(ev["ts"].to_numpy(np.int64)[kernel_rows],
                                             kind="stable")]

    step_rows = _by_start(np.flatnonzero(is_step), ts)
    if len(step_rows):
        codes, values = names
        steps = pd.DataFrame({
            "name": [str(int(str(values[c]).split("#")[1])) for c in codes[step_rows]],
            "start": ts[step_rows],
            "end": end[step_rows],
        })
    else:  # one step over the CPU events (operators, Python, steps)
        cpu = is_op | is_legacy_python | is_step
        steps = pd.DataFrame({"name": ["0"], "start": [ts[cpu].min() if cpu.any() else 0],
                              "end": [end[cpu].max() if cpu.any() else 0]})
    device = kernel | masks["memcpy"] | masks["memset"]
    if is_legacy_runtime.any():
        steps = _device_steps(steps, ts, end, ev["correlation"].to_numpy(), is_legacy_runtime,
                              _by_start(np.flatnonzero(device), ts))
    return PluginView(roles=roles, steps=steps.reset_index(drop=True), kernel_rows=kernel_rows,
                      external_ids=ext, ts=ts, end=end,
                      kernel_by_start=kernel_by_start)


def _roles(masks: dict[str, np.ndarray], ts_ns: np.ndarray, ts: np.ndarray,
           end: np.ndarray) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Each role's merged intervals. The roles are exclusive: one sort of the events that have
    a role by (role, start) (the ns order is the µs order) lays every role's intervals out
    sorted, one after the other."""
    role_of = np.full(len(ts_ns), len(masks), dtype=np.int64)  # no role
    for i, mask in enumerate(masks.values()):
        role_of[mask] = i
    if sum(int(m.sum()) for m in masks.values()) != int((role_of < len(masks)).sum()):
        # an event in two roles (none by the masks' definitions): each role on its own
        return {role: merge(ts[m], end[m]) for role, m in masks.items()}
    some = np.flatnonzero(role_of < len(masks))  # events without a role are not sorted
    role_of, ts_ns = role_of[some], ts_ns[some]
    if not len(some):
        return {role: merge(ts[:0], end[:0]) for role in masks}
    offset = ts_ns - ts_ns.min()
    if int(offset.max()) < 1 << 58:  # (role, start) in one integer: one sort
        order = some[np.argsort((role_of << 58) | offset, kind="stable")]
    else:
        order = some[np.lexsort((ts_ns, role_of))]
    bounds = np.concatenate([[0], np.cumsum(np.bincount(role_of, minlength=len(masks)))])
    out = {}
    for i, role in enumerate(masks):
        rows = order[bounds[i]:bounds[i + 1]]
        out[role] = merge(ts[rows], end[rows], by_start=True)
    return out


def _same_rows(index: pd.Index, labels: pd.Index) -> bool:
    """Are ``labels`` positions of ``index`` too (the whole trace: a 0..n-1 range index)?"""
    return (isinstance(index, pd.RangeIndex) and index.start == 0 and index.step == 1
            and (not len(labels) or (labels.min() >= 0 and labels.max() < len(index))))


def _by_start(rows: np.ndarray, ts: np.ndarray) -> np.ndarray:
    """``rows`` in the plugin's event order: by start, file order at equal starts."""
    return rows[np.argsort(ts[rows], kind="stable")]


def _device_steps(steps, ts, end, corr, runtime, dev_rows) -> pd.DataFrame:
    """The plugin's device-side steps (2021 schema): see the module docstring. ``dev_rows``: the
    GPU events' rows in the plugin's order."""
    by_corr: dict[int, list[int]] = {}
    for r in dev_rows.tolist():
        by_corr.setdefault(int(corr[r]), []).append(r)
    rt_rows = np.flatnonzero(runtime)
    rt_rows = rt_rows[np.argsort(ts[rt_rows], kind="stable")]
    starts, ends = steps["start"].to_numpy(), steps["end"].to_numpy()
    n = len(steps)
    big, small = float(sys.maxsize), float(-sys.maxsize - 1)
    dev_span = [(big, small)] * n
    matched = [0] * n
    seen: set[int] = set()
    i, j, lo, hi = 0, 0, big, small
    while i < n and j < len(rt_rows):
        r = rt_rows[j]
        if ts[r] < starts[i]:
            j += 1
        elif end[r] <= ends[i]:
            for d in by_corr.get(int(corr[r]), ()):
                lo, hi = min(lo, ts[d]), max(hi, end[d])
                seen.add(d)
                matched[i] += 1
            j += 1
        elif ts[r] < ends[i]:
            j += 1
        else:
            dev_span[i] = (lo, hi)
            i, lo, hi = i + 1, big, small
    while i < n:
        dev_span[i] = (lo, hi)
        i, lo, hi = i + 1, big, small
    if not seen:
        return steps
    prev_end = starts[0]
    if dev_span[0][0] != big:
        for d in dev_rows.tolist():
            if d not in seen and end[d] < dev_span[0][0]:
                prev_end = max(prev_end, end[d])
    new_starts, new_ends = [], []
    for k in range(n):
        s = max(prev_end, starts[k])
        e = max(ends[k], s) if dev_span[k][0] == big else max(max(ends[k], dev_span[k][1]), s)
        new_starts.append(s)
        new_ends.append(e)
        prev_end = e
    out = steps.assign(start=new_starts, end=new_ends)
    if n > 1:
        last = max((k for k in range(n) if matched[k] > 0), default=-1)
        if last >= 0:
            keep = last + 1
            if last > 0 and matched[last - 1] * 0.8 > matched[last]:
                keep = last
            out = out.iloc[:keep]
    return out


def concat_parts(parts, columns: list[str]) -> pd.DataFrame:
    """The ranks' tables of a view, joined in rank order (an empty table with ``columns`` when
    no rank has rows)."""
    frames = [p for p in parts.values() if len(p)]
    if not frames:
        return pd.DataFrame({c: pd.Series(dtype="float64") for c in columns})
    return pd.concat(frames, ignore_index=True)[columns]
