"""The in-memory model of a set of Kineto traces: one columnar table of events per rank.

This is the contract between the loader and the analyses.

``RankTrace.events`` -- one row per *complete* event (``"ph": "X"`` with a ``cat``), in file order,
except the profiler's own ``cat == "Trace"`` span (kept in ``meta.profiler_span``). Columns:

=============== ========== =================================================================
column          dtype      meaning
=============== ========== =================================================================
``ts``          int64      start, **nanoseconds**, exactly as written (µs × 1000, fractions kept)
``dur``         int64      duration, nanoseconds
``cat``         category   category, normalised to current Kineto names (``Kernel`` → ``kernel``,
                           ``Operator`` → ``cpu_op``, ``Runtime`` → ``cuda_runtime``, ``Memcpy`` →
                           ``gpu_memcpy``, ``Memset`` → ``gpu_memset``)
``name``        category   event name
``pid``         int64      process id; a non-numeric string pid becomes -1
``tid``         int64      thread id (GPU events: the stream as Kineto writes it); non-numeric → -1
``stream``      int64      ``args.stream`` as an int (Intel GPUs: ``args["sycl queue"]``, their
                           queue), -1 when absent or not an integer
``correlation`` int64      ``args.correlation`` (links a runtime call to its GPU event), -1 if absent
``external_id`` int64      ``args["External id"]`` (links a cpu_op to its runtime calls), -1 if absent
``device``      int64      ``args.device`` (GPU index), -1 if absent
=============== ========== =================================================================

Two more int64 columns, for CUDA sync events (``Stream Wait Event``, ``Event Sync``), -1 elsewhere:
``wait_on_stream`` (``args.wait_on_stream``: the stream waited on) and ``wait_on_record``
(``args.wait_on_cuda_event_record_corr_id``: the correlation id of the ``cudaEventRecord`` waited on).

Other per-rank tables (empty DataFrames with the same columns when the trace has none):

- ``flows``: flow events (``ph`` in ``s``/``f``/``t``, e.g. ``cat == "ac2g"``):
  ``id`` int64, ``ph`` category, ``cat`` category, ``ts`` int64 ns, ``pid`` int64, ``tid`` int64.
- ``extras``: optional tables of event args read only when an analysis needs them
  (:mod:`analysis.kineto.extras`), e.g. ``extras["op_shapes"]``.
- ``collectives``: one row per event that describes a collective -- ``record_param_comms`` CPU ops,
  GPU kernels carrying Kineto's collective args, gloo's ``gloo:*`` annotations, and (where no kernel
  carries the args: torch < 2.2) ProcessGroupNCCL's ``nccl:*`` annotations: ``event`` (row
  index into ``events``), ``collective`` (str), ``in_nelems``, ``out_nelems`` (int64, -1 if absent),
  ``dtype`` (str), ``group_size`` (int64), ``pg_name`` (str), ``pg_desc`` (str, from
  ``distributedInfo.pg_config`` by ``pg_name``), ``pg_ranks`` (str, as written), ``seq`` (int64,
  the ``Seq`` number in the process group, -1 if absent). gloo rows have only ``in_nelems`` and ``dtype``, from their first input's shape and type; ``nccl:*`` rows from their largest input's.

GPU events are the rows with ``stream >= 0`` and ``correlation >= 0`` (kernels, memcpy, memset,
and CUDA sync events on a stream), plus the device-level ``Event Sync`` / ``Context Sync`` events.
``analysis.kineto.events`` has the masks; analyses never re-derive them.

All times in the model are integers in nanoseconds; analyses report microseconds (µs) as HTA does.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from analysis import arguments
from analysis.errors import MissingExtraError, UnknownRankError

EVENT_COLUMNS: dict[str, str] = {
    "ts": "int64",
    "dur": "int64",
    "cat": "category",
    "name": "category",
    "pid": "int64",
    "tid": "int64",
    "stream": "int64",
    "correlation": "int64",
    "external_id": "int64",
    "device": "int64",
    "wait_on_stream": "int64",
    "wait_on_record": "int64",
}
FLOW_COLUMNS: dict[str, str] = {
    "id": "int64",
    "ph": "category",
    "cat": "category",
    "ts": "int64",
    "pid": "int64",
    "tid": "int64",
}
COLLECTIVE_COLUMNS: dict[str, str] = {
    "event": "int64",
    "collective": "object",
    "in_nelems": "int64",
    "out_nelems": "int64",
    "dtype": "object",
    "group_size": "int64",
    "pg_name": "object",
    "pg_desc": "object",
    "pg_ranks": "object",
    "seq": "int64",
}

# Kineto's 2021 schema used capitalised categories; map them onto today's names.
LEGACY_CATEGORIES: dict[str, str] = {
    "Kernel": "kernel",
    "Operator": "cpu_op",
    "Runtime": "cuda_runtime",
    "Memcpy": "gpu_memcpy",
    "Memset": "gpu_memset",
    "Trace": "Trace",
    "Python": "python_function",
    "User": "user_annotation",
}


def empty_frame(columns: Mapping[str, str]) -> pd.DataFrame:
    """An empty DataFrame with the given column dtypes."""
    return pd.DataFrame({c: pd.Series(dtype=t) for c, t in columns.items()})


@dataclass
class RankMeta:
    """What a rank's trace says about itself, besides its events."""

    rank: int
    source: str  # the URL or path it was loaded from
    world_size: int | None = None
    backend: str | None = None
    rank_origin: str = "distributedInfo"  # or "file name", "mapping", "default"
    distributed_info: dict[str, Any] = field(default_factory=dict)
    device_properties: list[dict[str, Any]] = field(default_factory=list)
    schema_version: Any = None
    base_time_ns: int | None = None
    # True when some event's ts is not a JSON integer (written with a fraction, or missing): HTA then
    # reads the column as float and rounds every event to whole µs; see analysis.metrics.timebase.
    float_timestamps: bool = False
    # The profiler's own span ("cat": "Trace"), as (ts_ns, dur_ns), if present.
    profiler_span: tuple[int, int] | None = None
    other: dict[str, Any] = field(default_factory=dict)  # remaining top-level keys (small ones)
    # True when this load read the rank from the local cache of parsed traces (not parsed anew):
    # how it was loaded, not what the trace says, so equality ignores it.
    from_cache: bool = field(default=False, compare=False)
    # What the parser dropped, clipped or ignored in this file, one sentence each with the count;
    # the loader turns each into a TraceLoadWarning naming the file (on every load, cached or not).
    anomalies: list[str] = field(default_factory=list)
    # Events whose 'dur' was negative, by name: the parser set their dur to 0 (the health check
    # reports them as errors).
    negative_durations: dict[str, int] = field(default_factory=dict)
    # Kernels, memcpy and memset events without a stream or correlation arg (an edited trace):
    # not GPU work to the analyses; the parser says so in an anomaly, the facade in its errors.
    unseen_gpu_events: int = 0
    # Which profiler wrote the file: "kineto", or "nsys", "xplane", "rocprof" (analysis.formats,
    # which also says what each of those does not carry).
    source_format: str = "kineto"
    # The graph-capture trace(s) merged into this replay trace at load, when given explicitly
    # (``capture_trace=``); None: the ``capture_traces/`` folder beside it, if any
    # (analysis.kineto.cuda_graphs). The on-demand args tables read the trace the same way.
    capture_trace: str | None = None

    @property
    def process_groups(self) -> list[dict[str, Any]]:
        return list(self.distributed_info.get("pg_config") or [])

    @property
    def gpu_names(self) -> list[str]:
        return [str(d.get("name")) for d in self.device_properties if d.get("name")]


@dataclass
class RankTrace:
    """One rank's trace: metadata plus columnar tables (see the module docstring)."""

    meta: RankMeta
    events: pd.DataFrame
    flows: pd.DataFrame = field(default_factory=lambda: empty_frame(FLOW_COLUMNS))
    collectives: pd.DataFrame = field(default_factory=lambda: empty_frame(COLLECTIVE_COLUMNS))
    # Tables of event args decoded only on demand ("op_shapes", ...), keyed by kind name, each
    # indexed by row labels of ``events``: see analysis.kineto.extras. The parser fills
    # "kernel_args" itself (analysis.kineto.kernel_args); the cache entry keeps each table in its
    # extras/ folder, read back when asked for. A window of this rank shares the dict.
    extras: dict[str, pd.DataFrame] = field(default_factory=dict, repr=False)
    # Values derived from the tables above, computed once and shared by the analyses (classified
    # GPU events, masks...). Tables are never modified in place (a window is a new RankTrace,
    # made with dataclasses.replace, which starts with an empty memo), so entries never go stale.
    _memo: dict = field(default_factory=dict, init=False, repr=False, compare=False)
    # The trace cache entry (a directory) these tables were memory-mapped from, if any: an engine
    # may release this rank and read it back from there (analysis.kineto.cache.TraceCache.read).
    cache_entry: str | None = field(default=None, repr=False, compare=False)

    @property
    def rank(self) -> int:
        return self.meta.rank

    def memoised(self, key, compute):
        """``compute()`` the first time ``key`` is asked for on this rank, the same value after."""
        try:
            return self._memo[key]
        except KeyError:
            value = self._memo[key] = compute()
            return value

    def __getstate__(self):  # derived values are cheaper to recompute than to ship (Dask)
        state = dict(self.__dict__)
        state["_memo"] = {}
        return state

    def profiler_steps(self) -> pd.DataFrame:
        """This rank's profiler steps: ``step``, ``ts``, ``dur`` (ns), ``name``, sorted by step
        (the one definition of a step is ``analysis.kineto.steps``)."""
        from analysis.kineto.steps import profiler_steps

        return profiler_steps(self)

    def extra(self, name: str) -> pd.DataFrame:
        """The ``name`` extra table restricted to this rank's rows (a window keeps fewer rows).

        Raises ``MissingExtraError`` when it was not attached (``analysis.kineto.extras``).
        """
        try:
            table = self.extras[name]
        except KeyError:
            raise MissingExtraError(name, self.rank, self.meta.source) from None
        rows = self.events.index
        if not len(table) or (  # the whole trace (rows 0..n-1): every row is there, O(1)
            isinstance(rows, pd.RangeIndex) and rows.step == 1
            and table.index.min() >= rows.start and table.index.max() < rows.stop
        ):
            return table
        if not table.index.isin(rows).all():
            table = table.loc[table.index.isin(rows)]
        return table

    def __repr__(self) -> str:
        return (
            f"RankTrace(rank={self.rank}, events={len(self.events)}, "
            f"source={self.meta.source!r})"
        )


@dataclass
class Trace(Mapping[int, RankTrace]):
    """All loaded ranks, keyed by rank (sorted). Behaves like a read-only ``{rank: RankTrace}``."""

    ranks: dict[int, RankTrace]
    source: str = ""  # what the user asked for (directory, URL, ...)
    skipped: list[Any] = field(default_factory=list)  # (path, reason) of files not loaded

    def __post_init__(self) -> None:
        self.ranks = dict(sorted(self.ranks.items()))

    def __getitem__(self, rank: int) -> RankTrace:
        try:
            return self.ranks[rank]
        except KeyError:
            raise UnknownRankError(rank, self.ranks) from None

    def __iter__(self) -> Iterator[int]:
        return iter(self.ranks)

    def __len__(self) -> int:
        return len(self.ranks)

    def rank_list(self) -> list[int]:
        return list(self.ranks)

    def select(self, ranks=None, default: str = "first") -> list[int]:
        """Normalise a ``ranks`` argument into a list of ranks present in the trace.

        ``None`` → the first rank (HTA's ``[0]``, but rank 0 may be absent) or, with
        ``default="all"``, every rank; ``"all"`` → every rank; an int or an iterable of ints → those,
        each checked (``UnknownRankError`` names the ranks present).
        """
        present = self.rank_list()
        chosen = arguments.ranks(ranks)
        if chosen is None:
            return present[:1] if default == "first" else present
        if chosen == "all":
            return present
        for r in chosen:
            if r not in self.ranks:
                raise UnknownRankError(r, present)
        return chosen

    def __repr__(self) -> str:
        return f"Trace(source={self.source!r}, ranks={self.rank_list()})"
