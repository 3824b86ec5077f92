"""CUDA kernel launch statistics: what each GPU launch cost on the CPU and how long it waited.

Every GPU kernel, memcpy or memset is linked to the CPU runtime call that launched it by their
shared ``correlation`` id. Per launch (one row per matched CPU call and GPU event, µs):

- ``cpu_duration``: duration of the runtime call (``cudaLaunchKernel``, ...);
- ``gpu_duration``: duration of the GPU event;
- ``launch_delay``: ``max(0, gpu start − runtime call end)``, the time the event waited on the
  device after the call returned.

Times are float µs (HTA's columns are integers, whole µs after its rounding).

Classification (:func:`classified_launches`, HTA's three histograms; the CSV of every launch and
the figure read it), one boolean column each, with HTA's cut-offs as defaults (defined here only):

- ``runtime_outlier``: the runtime call took longer than ``runtime_cutoff`` (50 µs);
- ``short_kernel``: not a runtime outlier, and the kernel ran for less time on the GPU than its
  launch call took on the CPU (``gpu_duration < cpu_duration``): launch-bound work;
- ``launch_delay_outlier``: the event waited more than ``launch_delay_cutoff`` (100 µs) between the
  end of its runtime call and its start: a queue of work ahead of it.

Which runtime calls count as launches is preset data (``LAUNCH_API_PRESETS``), chosen with the
kernel pattern preset: ``"hta"`` for ``patterns="hta"`` (any ``KernelPatterns`` with
``hta_quirks``), ``"default"`` otherwise; or pass ``launch_apis=`` (a preset name or a
``LaunchApis``). Columns and row order (CPU calls in file order, then their GPU events in file order)
are HTA 0.5.0's ``get_cuda_kernel_launch_stats``: a ``{rank: DataFrame}`` dict.

The default preset deliberately differs from HTA 0.5.0 in places (kernel selection and
classification, exact ns, ...): docs/deviations.md, “Kernel launch statistics”, lists each with its test.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from analysis.errors import ConfigError, NoGPUEventsError
from analysis.kineto.events import has_gpu_events
from analysis.kineto.model import RankTrace
from analysis.metrics.kernel_types import KernelPatterns, resolve_patterns
from analysis.metrics.timebase import Rounding, event_bounds_ns, ns_to_us

COLUMNS = ["correlation", "cpu_duration", "gpu_duration", "launch_delay"]
CLASS_COLUMNS = ["runtime_outlier", "short_kernel", "launch_delay_outlier"]
# The GPU events a launch can start (HTA's idle-time categories: kernels, copies, sets, MTIA CCP).
LAUNCHED_CATS = ("kernel", "gpu_memcpy", "gpu_memset", "mtia_ccp_events")
# HTA's cut-offs (µs), get_cuda_kernel_launch_stats's defaults: a launch call longer than
# RUNTIME_CUTOFF_US is a runtime outlier, a delay longer than LAUNCH_DELAY_CUTOFF_US a launch-delay
# outlier. The one definition: the figure, the report and the findings read them from here.
RUNTIME_CUTOFF_US = 50
LAUNCH_DELAY_CUTOFF_US = 100


@dataclass(frozen=True)
class LaunchApis:
    """The names of the CPU calls that launch GPU work.

    ``kernel``: kernel launches; ``memory``: asynchronous copies and sets, counted only with
    ``include_memory_events``. ``hta_matching`` reproduces HTA 0.5.0's join (see the module doc).
    """

    name: str
    kernel: tuple[str, ...] = ()
    memory: tuple[str, ...] = ()
    hta_matching: bool = False

    def extend(self, *, kernel=(), memory=(), name: str | None = None) -> LaunchApis:
        """A copy with extra launch call names."""
        def as_tuple(v):
            return (v,) if isinstance(v, str) else tuple(v)

        return replace(
            self,
            name=name or f"{self.name}+custom",
            kernel=self.kernel + as_tuple(kernel),
            memory=self.memory + as_tuple(memory),
        )

    def names(self, include_memory_events: bool) -> tuple[str, ...]:
        return self.kernel + (self.memory if include_memory_events else ())


# hta/analyzers/cuda_kernel_analysis.py, HTA 0.5.0
HTA_LAUNCH_APIS = LaunchApis(
    name="hta",
    kernel=(
        "cudaLaunchKernel",
        "cudaLaunchKernelExC",
        "runFunction - job_prep_and_submit_for_execution",  # MTIA
    ),
    memory=("cudaMemcpyAsync", "cudaMemsetAsync"),
    hta_matching=True,
)

# Names that are a launch only together with the GPU event their correlation id names, never a
# launch "without a kernel": Kineto writes INVALID for a runtime callback its CUPTI table does not
# know, and cuDNN launches convolution kernels through one (warming423/pf's RTX 3080 traces: 48 of
# 1,005 kernels)
PAIRED_ONLY_LAUNCH_NAMES = ("INVALID",)

DEFAULT_LAUNCH_APIS = LaunchApis(
    name="default",
    kernel=HTA_LAUNCH_APIS.kernel
    + (
        "cudaLaunchCooperativeKernel",
        "cudaLaunchCooperativeKernelMultiDevice",
        "cuLaunchKernel",  # driver API: Triton, CUTLASS python, ...
        "cuLaunchKernelEx",
        "cuLaunchCooperativeKernel",
        "cudaGraphLaunch",  # one call, many kernels: a row per kernel
        "cuGraphLaunch",
        "hipLaunchKernel",  # ROCm
        "hipExtLaunchKernel",
        "hipModuleLaunchKernel",
        "hipExtModuleLaunchKernel",
        "hipLaunchCooperativeKernel",
        "hipGraphLaunch",
        # Intel GPUs: the SYCL runtime's launches (Unified Runtime; PI before oneAPI 2024.1), the
        # calls Kineto's XPU plugin draws launch arrows from
        "urEnqueueKernelLaunch",
        "urEnqueueKernelLaunchWithArgsExp",
        "urEnqueueKernelLaunchCustomExp",
        "urEnqueueCooperativeKernelLaunchExp",
        "piEnqueueKernelLaunch",
        "piextEnqueueKernelLaunchCustom",
        "piextEnqueueCooperativeKernelLaunch",
    )
    + PAIRED_ONLY_LAUNCH_NAMES,
    memory=HTA_LAUNCH_APIS.memory
    + (
        "cudaMemcpy2DAsync",
        "cudaMemcpy3DAsync",
        "cudaMemcpyPeerAsync",
        "cuMemcpyAsync",
        "cuMemcpyHtoDAsync_v2",
        "cuMemcpyDtoHAsync_v2",
        "cuMemcpyDtoDAsync_v2",
        "cuMemsetD8Async",
        "cuMemsetD32Async",
        "hipMemcpyAsync",
        "hipMemcpyWithStream",
        "hipMemcpy2DAsync",
        "hipMemsetAsync",
        "hipMemsetD32Async",
        "urEnqueueUSMMemcpy",
        "urEnqueueUSMMemcpy2D",
        "urEnqueueUSMFill",
        "urEnqueueUSMFill2D",
        "piextUSMEnqueueMemcpy",
        "piextUSMEnqueueMemcpy2D",
        "piextUSMEnqueueMemset",
        "piextUSMEnqueueMemset2D",
        "piextUSMEnqueueFill",
        "piextUSMEnqueueFill2D",
    ),
)

LAUNCH_API_PRESETS: dict[str, LaunchApis] = {"hta": HTA_LAUNCH_APIS, "default": DEFAULT_LAUNCH_APIS}


def resolve_launch_apis(
    spec: str | LaunchApis | None, patterns: str | KernelPatterns = "default"
) -> LaunchApis:
    """``launch_apis`` → ``LaunchApis``; ``None`` follows the kernel pattern preset."""
    if spec is None:
        spec = "hta" if resolve_patterns(patterns).hta_quirks else "default"
    if isinstance(spec, LaunchApis):
        return spec
    if isinstance(spec, str) and spec in LAUNCH_API_PRESETS:
        return LAUNCH_API_PRESETS[spec]
    raise ConfigError(
        f"launch_apis must be one of {sorted(LAUNCH_API_PRESETS)} or a LaunchApis, not {spec!r}"
    )


def kernel_launch_stats_rank(
    rt: RankTrace,
    *,
    include_memory_events: bool = True,
    patterns: str | KernelPatterns = "default",
    launch_apis: str | LaunchApis | None = None,
    rounding: Rounding = "exact",
) -> pd.DataFrame:
    """One rank's launches: ``correlation, cpu_duration, gpu_duration, launch_delay`` (µs).

    Raises ``NoGPUEventsError`` when the rank has no GPU events at all.
    """
    apis = resolve_launch_apis(launch_apis, patterns)
    ev = rt.events
    if not has_gpu_events(ev):
        raise NoGPUEventsError([rt.rank], "the kernel launch statistics")
    corr = ev["correlation"].to_numpy()
    stream = ev["stream"].to_numpy()
    is_launch = ev["name"].isin(apis.names(include_memory_events)).to_numpy() & (corr != -1)
    if apis.hta_matching:
        # HTA: any event carrying a launch's correlation id, split by "has a stream"
        linked = np.isin(corr, corr[is_launch])
        cpu = linked & (stream == -1)
        gpu = linked & (stream != -1)
    else:
        launched = ev["cat"].isin(LAUNCHED_CATS).to_numpy()
        cpu = is_launch & ~launched
        gpu = launched & (stream != -1) & np.isin(corr, corr[cpu])
    start, end = event_bounds_ns(
        ev["ts"].to_numpy(), ev["dur"].to_numpy(), rounding,
        float_timestamps=rt.meta.float_timestamps,
    )
    cpu_df = pd.DataFrame({"correlation": corr[cpu], "cpu_start": start[cpu], "cpu_end": end[cpu]})
    gpu_df = pd.DataFrame({"correlation": corr[gpu], "gpu_start": start[gpu], "gpu_end": end[gpu]})
    # inner join keeps the CPU calls' order, each call's GPU events in file order (as HTA's merge)
    j = cpu_df.merge(gpu_df, on="correlation", how="inner")
    delay = np.maximum(j["gpu_start"].to_numpy() - j["cpu_end"].to_numpy(), 0)
    return pd.DataFrame(
        {
            "correlation": j["correlation"].to_numpy(dtype=np.int64),
            "cpu_duration": ns_to_us(j["cpu_end"].to_numpy() - j["cpu_start"].to_numpy()),
            "gpu_duration": ns_to_us(j["gpu_end"].to_numpy() - j["gpu_start"].to_numpy()),
            "launch_delay": ns_to_us(delay),
        }
    )


def combine(frames: Mapping[int, pd.DataFrame]) -> dict[int, pd.DataFrame]:
    """Per-rank frames → HTA's ``{rank: DataFrame}``, ranks in the order given."""
    return {int(r): df[COLUMNS] for r, df in frames.items()}


def classify(
    launches: pd.DataFrame, runtime_cutoff: float = RUNTIME_CUTOFF_US,
    launch_delay_cutoff: float = LAUNCH_DELAY_CUTOFF_US,
) -> pd.DataFrame:
    """``launches`` (rows of :data:`COLUMNS`) with the classification columns of the module doc
    (:data:`CLASS_COLUMNS`, bool) appended; cut-offs in µs."""
    cpu = launches["cpu_duration"].to_numpy()
    runtime_outlier = cpu > runtime_cutoff
    return launches.assign(
        runtime_outlier=runtime_outlier,
        short_kernel=~runtime_outlier & (launches["gpu_duration"].to_numpy() < cpu),
        launch_delay_outlier=launches["launch_delay"].to_numpy() > launch_delay_cutoff,
    )


def classified_launches(
    stats: Mapping[int, pd.DataFrame], runtime_cutoff: float = RUNTIME_CUTOFF_US,
    launch_delay_cutoff: float = LAUNCH_DELAY_CUTOFF_US,
) -> pd.DataFrame:
    """Every rank's launches in one table (``rank`` column, ranks in the order given) with the
    classification columns of the module doc; cut-offs in µs."""
    frames = [df[COLUMNS].assign(rank=int(r)) for r, df in stats.items() if df is not None]
    table = (pd.concat(frames, ignore_index=True) if frames
             else pd.DataFrame({c: pd.Series(dtype="float64") for c in [*COLUMNS, "rank"]}))
    return classify(table, runtime_cutoff, launch_delay_cutoff)


def launch_summary(
    stats: Mapping[int, pd.DataFrame], runtime_cutoff: float = RUNTIME_CUTOFF_US,
    launch_delay_cutoff: float = LAUNCH_DELAY_CUTOFF_US,
) -> pd.DataFrame:
    """Per rank: number of launches, median CPU runtime-call duration, median GPU duration and
    median launch delay (µs), and how many launches are runtime outliers (``runtime_outliers``)
    and launch-delay outliers (``launch_delay_outliers``): the classification of the module doc."""
    rows = []
    for rank, df in stats.items():
        flags = classify(df, runtime_cutoff, launch_delay_cutoff)
        rows.append({
            "rank": rank,
            "launches": len(df),
            "median_cpu_duration_us": df["cpu_duration"].median(),
            "median_gpu_duration_us": df["gpu_duration"].median(),
            "median_launch_delay_us": df["launch_delay"].median(),
            "runtime_outliers": int(flags["runtime_outlier"].sum()),
            "launch_delay_outliers": int(flags["launch_delay_outlier"].sum()),
        })
    return pd.DataFrame(rows)


def all_launches(stats: Mapping[int, pd.DataFrame]) -> pd.DataFrame:
    """Every rank's launches in one table with a ``rank`` column and the classification columns
    (HTA's cut-offs): :func:`classified_launches`."""
    return classified_launches(stats)
