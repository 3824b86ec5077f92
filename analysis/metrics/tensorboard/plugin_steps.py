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


def column_codes(rt: RankTrace, column: str) -> tuple[np.ndarray, list]:
    """:func:`coded` of the rank's events column ``column`` (memoised: every view of the family
    reads the names and categories)."""
    return rt.memoised(("tensorboard_coded", column), lambda: coded(rt.events[column]))


def by_start(rt: RankTrace) -> np.ndarray:
    """The rank's event rows in the plugin's order: by start, file order at equal starts
    (memoised: one stable sort of every event, which the roles, the steps and the kernels read)."""
    return rt.memoised("tensorboard_by_start",
                       lambda: np.argsort(rt.events["ts"].to_numpy(np.int64), kind="stable"))


# The plugin's role of an event is a function of its category, three tests of its name and its
# 2021 raw category alone (communication kernels aside: their external id decides). It is worked
# out once per combination of those that the rules can tell apart, not once per event; bits:
_ROLE_BITS = 0x0F  # the role's position in ROLES; _NO_ROLE: none; _MANY: two or more
_NO_ROLE, _MANY = len(ROLES), len(ROLES) + 1
_STEP, _COMM_OP, _CPU = 0x10, 0x20, 0x40  # a step; a collective operator; one of the CPU events
_LEGACY = ("", "runtime", "python")  # the 2021 raw categories that matter, lower-cased
_NAME_TESTS = 3  # a step's name, a collective's, the DataLoader's: 2**3 kinds of name


def _name_kind(names: list) -> np.ndarray:
    """Per distinct name (and a last entry for a missing one): which of the name tests it
    passes, as bits (1: ``ProfilerStep#``, 2: a collective, 4: the DataLoader's)."""
    return np.array([(v.startswith(STEP_PREFIX)) | (v in COMM_NAMES) << 1
                     | dataloader_name(v) << 2 for v in map(str, names)] + [0], dtype=np.int64)


def _combination_flags(cats: list) -> tuple[np.ndarray, list[np.ndarray]]:
    """Per combination (category, kind of name, legacy kind), the categories with a last
    "missing" entry: the flags above, and each role's own mask (for a trace where an event has
    two roles). The plugin's rules (the module docstring), over combinations instead of events."""
    def of(*values: str) -> np.ndarray:
        return np.array([str(v) in values for v in cats] + [False], dtype=bool)[:, None, None]

    shape = (len(cats) + 1, 1 << _NAME_TESTS, len(_LEGACY))
    kind = np.arange(1 << _NAME_TESTS)[None, :, None]
    step_name, comm_name, loader_name = (kind & 1) != 0, (kind & 2) != 0, (kind & 4) != 0
    legacy = np.arange(len(_LEGACY))[None, None, :]
    legacy_runtime, legacy_python = legacy == 1, legacy == 2
    is_op = of("cpu_op")
    is_annotation = of("user_annotation", "gpu_user_annotation")

    is_step = (is_op | is_annotation) & step_name
    is_loader = is_op & ~is_step & loader_name
    cpu_like = (is_op & ~is_step) | legacy_python
    comm_ops = (cpu_like | is_annotation) & ~is_step & comm_name
    masks = [np.broadcast_to(m, shape) for m in (
        of("kernel"), of("gpu_memcpy"), of("gpu_memset"), comm_ops, legacy_runtime, is_loader,
        cpu_like & ~is_loader & ~comm_ops)]  # in the order of ROLES
    count = sum(m.astype(np.int64) for m in masks)
    role = np.where(count == 0, _NO_ROLE, np.where(count > 1, _MANY, 0))
    for i, m in enumerate(masks):
        role = np.where(m & (count == 1), i, role)
    flags = (role | np.where(is_step, _STEP, 0) | np.where(comm_ops, _COMM_OP, 0)
             | np.where(is_op | legacy_python | is_step, _CPU, 0)).astype(np.int8)
    return flags.reshape(-1), [m.reshape(-1) for m in masks]


def _plugin_view(rt: RankTrace) -> PluginView:
    ev = rt.events
    n = len(ev)
    args = rt.extra(KERNEL_ARGS)
    where = rows_of(ev.index, args.index)
    raw_codes, raw_values = coded(args["raw_cat"])
    legacy = np.array([_LEGACY.index(v) if (v := str(x).lower()) in _LEGACY else 0
                       for x in raw_values] + [0], dtype=np.int64)[raw_codes]  # per args row
    cat_codes, cats = column_codes(rt, "cat")
    name_codes, names = column_codes(rt, "name")
    flags_by, masks_by = _combination_flags(cats)
    # each event's combination, from a table per column (code -1, missing: its last entry)
    small = np.int16 if len(flags_by) < 1 << 15 else np.int64
    combo = ((np.arange(len(cats) + 1) << _NAME_TESTS) * len(_LEGACY)).astype(small)[cat_codes]
    combo += (_name_kind(names) * len(_LEGACY)).astype(small)[name_codes]
    combo[where[legacy > 0]] += legacy[legacy > 0].astype(small)  # 2021 runtime and Python
    legacy_runtime = np.zeros(n, bool)
    legacy_runtime[where[legacy == _LEGACY.index("runtime")]] = True
    flags = flags_by[combo]
    role = (flags & _ROLE_BITS).astype(np.int8)
    is_step = (flags & _STEP) != 0
    comm_ops = (flags & _COMM_OP) != 0
    many = role == _MANY
    kernel = role == ROLES.index("kernel")
    if many.any():  # an event in two roles (none by the rules' definitions): each role apart
        kernel |= many & masks_by[0][combo]
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
    order = by_start(rt)  # the ns order: the order of the µs the plugin holds, ties apart
    if many.any():
        masks = {r: masks_by[i][combo] for i, r in enumerate(ROLES)}
        masks["kernel"] = masks["kernel"] & ~comm_kernel
        masks["communication"] = masks["communication"] | comm_kernel
        roles = {r: merge(ts[m], end[m]) for r, m in masks.items()}
    else:
        role[comm_kernel] = ROLES.index("communication")
        roles = _roles(role, order, ts, end)
    kernel_by_start = order[kernel[order]]

    step_rows = _by_start(np.flatnonzero(is_step), ts)
    if len(step_rows):
        steps = pd.DataFrame({
            "name": [str(int(str(names[c]).split("#")[1])) for c in name_codes[step_rows]],
            "start": ts[step_rows],
            "end": end[step_rows],
        })
    else:  # one step over the CPU events (operators, Python, steps)
        cpu = (flags & _CPU) != 0
        steps = pd.DataFrame({"name": ["0"], "start": [ts[cpu].min() if cpu.any() else 0],
                              "end": [end[cpu].max() if cpu.any() else 0]})
    if legacy_runtime.any():
        device = kernel | np.isin(role, (ROLES.index("memcpy"), ROLES.index("memset")))
        if many.any():
            device |= many & (masks_by[1][combo] | masks_by[2][combo])
        steps = _device_steps(steps, ts, end, ev["correlation"].to_numpy(), legacy_runtime,
                              _by_start(np.flatnonzero(device), ts))
    return PluginView(roles=roles, steps=steps.reset_index(drop=True), kernel_rows=kernel_rows,
                      external_ids=ext, ts=ts, end=end,
                      kernel_by_start=kernel_by_start)


def _roles(role: np.ndarray, order: np.ndarray, ts: np.ndarray,
           end: np.ndarray) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Each role's merged intervals, from each event's role (:data:`_NO_ROLE`: none) and the
    events by start: one stable sort by role of the events in start order lays every role's
    intervals out sorted, one after the other."""
    by_role = order[np.argsort(role[order], kind="stable")]
    bounds = np.concatenate([[0], np.cumsum(np.bincount(role, minlength=len(ROLES)))])
    return {r: merge(ts[rows], end[rows], by_start=True)
            for r, rows in ((r, by_role[bounds[i]:bounds[i + 1]]) for i, r in enumerate(ROLES))}


def rows_of(index: pd.Index, labels: pd.Index) -> np.ndarray:
    """The positions in ``index`` of ``labels`` (row labels of the events, all present: an
    extra table of the rank): the labels themselves where they are positions too (the whole
    trace, a 0..n-1 range index), else looked up."""
    if (isinstance(index, pd.RangeIndex) and index.start == 0 and index.step == 1
            and (not len(labels) or (labels.min() >= 0 and labels.max() < len(index)))):
        return labels.to_numpy(np.int64)
    return index.get_indexer(labels)


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
