"""Kernel classification as data: named regex sets that sort GPU events into kernel types.

A GPU event is **COMMUNICATION** if its name matches a communication pattern, else **MEMORY** if it
matches a memory pattern, else **COMPUTATION** unless it matches a ``not_computation`` pattern, else
**OTHER** (the order HolisticTraceAnalysis 0.5.0 uses). Patterns are Python regular expressions
applied with ``re.search`` (anchor them with ``^`` where a prefix is meant).

Two presets:

- ``"hta"`` reproduces HTA 0.5.0 exactly (``hta/utils/utils.py``): communication ``^nccl.*Kernel``;
  memory ``^Memcpy``, ``^Memset``, ``^dma``; everything is computation except names matching
  ``^nccl.*Kernel``, containing ``Memcpy``, starting with ``Memset`` or containing ``Sync``. It also
  selects as "GPU events" every event with a stream (``stream != -1``), as HTA's temporal, overlap
  and kernel breakdowns do, which on ROCm traces includes CPU-side ``hipLaunchKernel`` calls.
- ``"default"`` (more correct, see docs/deviations.md): communication also covers every
  ``nccl*``/``rccl*``/``hccl*`` kernel, ROCm ``hip*`` collectives, DeepEP (``...ep::...::dispatch``,
  ``combine``, ``notify``), NVSHMEM kernels and custom all-reduce kernels (``cross_device_reduce``,
  symmetric-memory one/two-shot all-reduce, ``multimem`` collectives) and oneCCL's SYCL collectives
  on Intel GPUs (``allreduce_large_...``); only the CUDA synchronisation
  events (``Stream Sync``, ``Event Sync``, ``Context Sync``, ``Stream Wait Event``) are "neither",
  rather than any name containing ``Sync``. It selects GPU work as the GPU-mask events that are not
  runtime calls and not synchronisation waits (waiting is not work).

Users extend a preset: ``PRESETS["default"].extend(communication=[r"^my_allreduce"])``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from enum import Enum
from typing import Literal

import numpy as np
import pandas as pd

from analysis.errors import ConfigError
from analysis.kineto.events import DEVICE_SYNC_NAMES, SYNC_CATS, cat_mask, gpu_mask, runtime_mask
from analysis.kineto.model import RankTrace
from analysis.metrics.intervals import merge_intervals
from analysis.metrics.timebase import Rounding, event_bounds_ns


class KernelType(Enum):
    """HTA's kernel types, in HTA's order (the enum values are HTA's)."""

    COMMUNICATION = 0
    MEMORY = 1
    COMPUTATION = 2
    OTHER = 3


KERNEL_TYPE_NAMES: tuple[str, ...] = tuple(k.name for k in KernelType)

EventSelection = Literal["stream", "gpu_work"]


def _compile(kind: str, patterns: tuple[str, ...]) -> re.Pattern | None:
    for p in patterns:
        try:
            re.compile(p)
        except re.error as e:
            raise ConfigError(f"invalid {kind} kernel pattern {p!r}: {e}") from None
    if not patterns:
        return None
    return re.compile("|".join(f"(?:{p})" for p in patterns))


@dataclass(frozen=True)
class KernelPatterns:
    """Named regex sets that classify GPU event names (see the module docstring).

    ``event_selection`` says which events the breakdowns treat as GPU work: ``"stream"`` (every
    event with ``stream != -1``, HTA's choice) or ``"gpu_work"`` (GPU events that are neither
    runtime calls nor synchronisation waits).
    ``hta_quirks`` reproduces HTA 0.5.0's bugs in numbers users compare (the per-kernel
    statistics that collapse to sums when a type has more than ``num_kernels`` kernels).
    """

    name: str
    communication: tuple[str, ...] = ()
    memory: tuple[str, ...] = ()
    not_computation: tuple[str, ...] = ()
    event_selection: EventSelection = "gpu_work"
    hta_quirks: bool = False
    _compiled: tuple = field(default=(), init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        for kind in ("communication", "memory", "not_computation"):
            value = getattr(self, kind)
            if isinstance(value, str):  # a lone string would be split into characters
                value = (value,)
            object.__setattr__(self, kind, tuple(value))
        if self.event_selection not in ("stream", "gpu_work"):
            raise ConfigError(
                f"event_selection must be 'stream' or 'gpu_work', not {self.event_selection!r}"
            )
        compiled = tuple(
            _compile(kind, getattr(self, kind))
            for kind in ("communication", "memory", "not_computation")
        )
        object.__setattr__(self, "_compiled", compiled)

    def __getstate__(self):  # compiled regexes are rebuilt on unpickling (Dask workers)
        return {k: getattr(self, k) for k in ("name", "communication", "memory",
                                              "not_computation", "event_selection", "hta_quirks")}

    def __setstate__(self, state) -> None:
        for k, v in state.items():
            object.__setattr__(self, k, v)
        self.__post_init__()

    def extend(
        self,
        *,
        communication=(),
        memory=(),
        not_computation=(),
        name: str | None = None,
    ) -> KernelPatterns:
        """A copy with extra patterns appended to each set."""
        def as_tuple(v):
            return (v,) if isinstance(v, str) else tuple(v)

        return replace(
            self,
            name=name or f"{self.name}+custom",
            communication=self.communication + as_tuple(communication),
            memory=self.memory + as_tuple(memory),
            not_computation=self.not_computation + as_tuple(not_computation),
        )

    def kernel_type(self, name: str) -> str:
        """The kernel type name (``"COMMUNICATION"``, ...) of one event name."""
        comm, mem, not_comp = self._compiled
        if not isinstance(name, str):
            return KernelType.OTHER.name
        if comm is not None and comm.search(name):
            return KernelType.COMMUNICATION.name
        if mem is not None and mem.search(name):
            return KernelType.MEMORY.name
        if not_comp is None or not not_comp.search(name):
            return KernelType.COMPUTATION.name
        return KernelType.OTHER.name

    def classify(self, names) -> pd.Categorical:
        """Kernel type of each name, as a Categorical over ``KERNEL_TYPE_NAMES``.

        Each distinct name is classified once (names are categorical in the model).
        """
        cat = names.astype("category") if isinstance(names, pd.Series) else pd.Categorical(names)
        cat = cat.cat if isinstance(cat, pd.Series) else cat
        categories = cat.categories
        codes = np.asarray(cat.codes)
        type_index = {t: i for i, t in enumerate(KERNEL_TYPE_NAMES)}
        per_category = np.array(
            [type_index[self.kernel_type(c)] for c in categories]
            + [type_index[KernelType.OTHER.name]],  # code -1 (missing name) → OTHER
            dtype=np.int8,
        )
        return pd.Categorical.from_codes(
            per_category[codes], categories=list(KERNEL_TYPE_NAMES)
        )

    def select(self, events: pd.DataFrame) -> np.ndarray:
        """Mask of the rows of a rank's event table that the breakdowns treat as GPU work."""
        if self.event_selection == "stream":
            return events["stream"].to_numpy() != -1
        waits = cat_mask(events, SYNC_CATS) | events["name"].isin(DEVICE_SYNC_NAMES).to_numpy()
        return gpu_mask(events) & ~runtime_mask(events) & ~waits


HTA_PATTERNS = KernelPatterns(
    name="hta",
    communication=(r"^nccl.*Kernel",),
    memory=(r"^Memcpy", r"^Memset", r"^dma"),
    # HTA: re.match(r"(^nccl.*Kernel)|(.*(Memcpy)|(Memset))|(.*Sync)"); "^.*" keeps match semantics
    not_computation=(r"^nccl.*Kernel", r"^.*Memcpy", r"^Memset", r"^.*Sync"),
    event_selection="stream",
    hta_quirks=True,
)

DEFAULT_PATTERNS = KernelPatterns(
    name="default",
    communication=(
        r"^nccl",  # every NCCL kernel (ncclKernel_*, ncclDevKernel_*), not only "...Kernel"
        r"ncclKernel",
        r"^rccl",  # ROCm
        r"^hccl",  # Ascend
        r"^hip.*(?i:all_?reduce|all_?gather|reduce_?scatter|all_?to_?all|broadcast|send|recv)",
        r"ep::\w+::\w*(?:dispatch|combine|notify)",  # DeepEP internode/intranode kernels
        r"(?i:nvshmem)",
        r"cross_device_reduce",  # vLLM / SGLang custom all-reduce
        r"(?i:custom_?all_?reduce)",
        r"(?:one|two)_shot_all_reduce",  # torch symmetric memory
        r"multimem_(?:all_reduce|all_gather|reduce_scatter|one_shot|two_shot)",
        # oneCCL's SYCL collectives (Intel GPUs, torch's XCCL backend): the kernels are named after
        # the algorithm that submits them, "allreduce_large_read_write_ipc<float, 2, 2>(...)"
        r"^(?:allreduce|allgatherv|reduce_scatter|alltoallv?|broadcast)_(?:large|medium|small)_",
    ),
    memory=(r"^Memcpy", r"^Memset", r"^dma"),
    not_computation=(
        r"^(?:Stream|Event|Context) Sync$",
        r"^Stream Wait Event$",
    ),
    event_selection="gpu_work",
)

PRESETS: dict[str, KernelPatterns] = {"hta": HTA_PATTERNS, "default": DEFAULT_PATTERNS}


def resolve_patterns(spec: str | KernelPatterns = "default") -> KernelPatterns:
    """A preset name (``"hta"``, ``"default"``) or a ``KernelPatterns`` → ``KernelPatterns``."""
    if isinstance(spec, KernelPatterns):
        return spec
    if isinstance(spec, str):
        try:
            return PRESETS[spec]
        except KeyError:
            raise ConfigError(
                f"unknown kernel pattern preset {spec!r}; choose one of {sorted(PRESETS)} "
                "or pass a KernelPatterns"
            ) from None
    raise ConfigError(
        f"kernel_patterns must be a preset name or a KernelPatterns, not {type(spec).__name__}"
    )


def classify(names, patterns: str | KernelPatterns = "default") -> pd.Categorical:
    """Kernel type of each name under ``patterns`` (see ``KernelPatterns.classify``)."""
    return resolve_patterns(patterns).classify(names)


def classified_gpu_events(
    rt: RankTrace, patterns: str | KernelPatterns = "default", rounding: Rounding = "exact"
) -> pd.DataFrame:
    """A rank's GPU work as ``start``, ``end`` (int ns, rounded per ``rounding``), ``name`` (str)
    and ``kernel_type`` (Categorical over ``KERNEL_TYPE_NAMES``), in file order.

    Computed once per rank, patterns and rounding, and shared by every analysis that asks (the
    frame is shared: never modify it in place)."""
    pat = resolve_patterns(patterns)
    return rt.memoised(
        ("classified_gpu_events", pat, rounding), lambda: _classified(rt, pat, rounding)
    )


def _classified(rt: RankTrace, pat: KernelPatterns, rounding: Rounding) -> pd.DataFrame:
    ev = rt.events
    rows = ev.loc[pat.select(ev)]
    start, end = event_bounds_ns(
        rows["ts"].to_numpy(), rows["dur"].to_numpy(), rounding,
        float_timestamps=rt.meta.float_timestamps,
    )
    names = rows["name"]
    return pd.DataFrame(
        {
            "start": start,
            "end": end,
            "name": names.to_numpy(),
            "kernel_type": pat.classify(names),
        },
        index=rows.index,
    )


def busy_intervals(
    rt: RankTrace, patterns: str | KernelPatterns, rounding: Rounding, kernel_type: str | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Merged busy intervals ``(starts, ends)`` (int ns) of a rank's GPU work of ``kernel_type``
    (``None``: all of it), computed once per rank, patterns, rounding and type (shared arrays:
    never modify them in place)."""
    pat = resolve_patterns(patterns)

    def compute():
        gpu = classified_gpu_events(rt, pat, rounding)
        start, end = gpu["start"].to_numpy(), gpu["end"].to_numpy()
        if kernel_type is not None:  # the two columns only (the name column is costly to take)
            chosen = (gpu["kernel_type"] == kernel_type).to_numpy(dtype=bool)
            start, end = start[chosen], end[chosen]
        return merge_intervals(start, end, rounding)

    return rt.memoised(("busy_intervals", pat, rounding, kernel_type), compute)
