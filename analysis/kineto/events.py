"""Which rows of a rank's event table are what: GPU events, kernels, memory operations, runtime calls.

Every analysis selects events through these masks, so "what counts as a GPU event" is defined once.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd

# Device-level synchronisation events sit on stream -1 but run on the GPU (as HTA 0.5.0 treats them).
DEVICE_SYNC_NAMES = ("Event Sync", "Context Sync")

KERNEL_CATS = ("kernel",)
MEMCPY_CATS = ("gpu_memcpy",)
MEMSET_CATS = ("gpu_memset",)
SYNC_CATS = ("cuda_sync",)
# CPU-side calls that launch or wait on GPU work: CUDA's (and ROCm's, which Kineto writes as CUDA's)
# runtime and driver APIs, and Intel GPUs' SYCL runtime (Unified Runtime: ``urEnqueueKernelLaunch``).
# Not ``xpu_driver``: its Level Zero calls are made inside the runtime's, for the same launches.
RUNTIME_CATS = ("cuda_runtime", "cuda_driver", "xpu_runtime")
# The categories that keep a stream busy: kernels, copies, sets and MTIA's CCP events (HTA's list).
BUSY_CATS = ("kernel", "gpu_memcpy", "gpu_memset", "mtia_ccp_events")


def gpu_mask(events: pd.DataFrame) -> np.ndarray:
    """Rows that ran on a GPU: on a stream with a correlation id, or a device-level sync event."""
    on_stream = (events["stream"].to_numpy() >= 0) & (events["correlation"].to_numpy() >= 0)
    return on_stream | events["name"].isin(DEVICE_SYNC_NAMES).to_numpy()


def cat_mask(events: pd.DataFrame, cats) -> np.ndarray:
    """Rows whose (normalised) category is one of ``cats``."""
    return events["cat"].isin(cats).to_numpy()


def kernel_like_mask(events: pd.DataFrame) -> np.ndarray:
    """GPU kernels, memcpy and memset: the events that keep a stream busy (no sync events)."""
    return gpu_mask(events) & cat_mask(events, KERNEL_CATS + MEMCPY_CATS + MEMSET_CATS)


def runtime_mask(events: pd.DataFrame) -> np.ndarray:
    """CPU-side CUDA runtime / driver calls (``cudaLaunchKernel``, ``cudaMemcpyAsync``, ...)."""
    return cat_mask(events, RUNTIME_CATS)


def name_mask(events: pd.DataFrame, test: Callable[[pd.Series], pd.Series]) -> np.ndarray:
    """Rows whose name (as ``str``) passes ``test``, a vectorised check on a Series of strings
    (``lambda s: s.str.endswith("GraphLaunch")``), run once per distinct name: converting a whole
    categorical column to strings costs ~0.1 s per 0.25 M events. A missing name never passes."""
    names = events["name"]
    if not isinstance(names.dtype, pd.CategoricalDtype):
        return np.asarray(test(names.astype(str)), dtype=bool)
    distinct = pd.Series(names.cat.categories, dtype=object).astype(str)
    passes = np.append(np.asarray(test(distinct), dtype=bool), False)  # code -1: missing
    return passes[names.cat.codes.to_numpy()]


def has_gpu_events(events: pd.DataFrame) -> bool:
    """Does any row run on a GPU (:func:`gpu_mask`); the names are read only when no row is on
    a stream."""
    on_stream = (events["stream"].to_numpy() >= 0) & (events["correlation"].to_numpy() >= 0)
    return bool(on_stream.any() or events["name"].isin(DEVICE_SYNC_NAMES).any())


def rank_has_gpu_events(rt) -> bool:
    """:func:`has_gpu_events` of a rank's events, memoised on the rank (the registry's
    ``needs_gpu`` gate and the analyses that decide for themselves ask the same question)."""
    return rt.memoised("has_gpu_events", lambda: has_gpu_events(rt.events))
