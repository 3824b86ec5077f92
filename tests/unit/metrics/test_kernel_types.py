"""Kernel classification: the HTA preset equals HTA 0.5.0's get_kernel_type; the default's additions."""

from __future__ import annotations

import pickle

import pandas as pd
import pytest

from analysis.errors import ConfigError
from analysis.metrics.intervals import merge_intervals
from analysis.metrics.kernel_types import (
    DEFAULT_PATTERNS,
    HTA_PATTERNS,
    KernelPatterns,
    classify,
    resolve_patterns,
)

NAMES = [
    "ncclKernel_AllReduce_RING_LL_Sum_float", "ncclDevKernel_AllGather_RING_LL", "ncclDevFunc",
    "Memcpy DtoH (Device -> Pinned)", "Memset (Device)", "dma_request", "fooMemcpy", "xMemset",
    "Event Sync", "Context Sync", "Stream Wait Event", "SyncBatchNorm_forward", "gemm_kernel",
    "void deep_ep::internode::dispatch<8>(int*)", "void deep_ep::intranode::notify_dispatch()",
    "void vllm::cross_device_reduce_1stage<float>", "rcclKernel_AllReduce", "hcclAllReduce",
    "nvshmemi_barrier_kernel", "two_shot_all_reduce_kernel", "hipMemcpyWithStream", "",
    # PyTorch symmetric memory on B200 (TraceLens's eager_trace.json.gz; computation to TraceLens)
    "void (anonymous namespace)::multimem_all_reduce_kernel<c10::BFloat16, 16>(c10::BFloat16*, "
    "unsigned long, unsigned int**, unsigned long, unsigned long)",
]


def test_hta_preset_equals_hta():
    utils = pytest.importorskip("hta.utils.utils")
    got = classify(pd.Series(NAMES, dtype="category"), "hta")
    assert list(got) == [utils.get_kernel_type(n) for n in NAMES]


def test_default_preset_additions():
    got = dict(zip(NAMES, classify(NAMES, "default"), strict=True))
    for n in ["ncclDevFunc", "void deep_ep::internode::dispatch<8>(int*)",
              "void deep_ep::intranode::notify_dispatch()",
              "void vllm::cross_device_reduce_1stage<float>", "rcclKernel_AllReduce",
              "hcclAllReduce", "nvshmemi_barrier_kernel", "two_shot_all_reduce_kernel", NAMES[-1]]:
        assert got[n] == "COMMUNICATION", n
    assert got["Stream Wait Event"] == "OTHER"  # HTA: COMPUTATION
    assert got["SyncBatchNorm_forward"] == "COMPUTATION"  # HTA: OTHER (name contains "Sync")
    assert got["fooMemcpy"] == "COMPUTATION"
    assert got["hipMemcpyWithStream"] == "COMPUTATION"  # a CPU call; selection drops it anyway


def test_classify_returns_categorical_with_missing_names_as_other():
    s = pd.Series(pd.Categorical(["gemm", None, "gemm", "Memset (Device)"]))
    got = classify(s)
    assert isinstance(got, pd.Categorical)
    assert list(got) == ["COMPUTATION", "OTHER", "COMPUTATION", "MEMORY"]
    assert list(got.categories) == ["COMMUNICATION", "MEMORY", "COMPUTATION", "OTHER"]


def test_extend_and_pickle():
    mine = DEFAULT_PATTERNS.extend(communication=r"^my_allreduce", not_computation=["^idle_spin"])
    assert mine.kernel_type("my_allreduce_kernel") == "COMMUNICATION"
    assert mine.kernel_type("idle_spin_kernel") == "OTHER"
    assert DEFAULT_PATTERNS.kernel_type("my_allreduce_kernel") == "COMPUTATION"
    back = pickle.loads(pickle.dumps(mine))
    assert back == mine and back.kernel_type("my_allreduce_kernel") == "COMMUNICATION"
    assert HTA_PATTERNS.extend(memory="^copy").hta_quirks


def test_resolve_patterns_and_errors():
    assert resolve_patterns("hta") is HTA_PATTERNS
    assert resolve_patterns(DEFAULT_PATTERNS) is DEFAULT_PATTERNS
    with pytest.raises(ConfigError, match="unknown kernel pattern preset 'nccl'"):
        resolve_patterns("nccl")
    with pytest.raises(ConfigError, match="invalid communication kernel pattern"):
        KernelPatterns(name="bad", communication=["(unclosed"])
    with pytest.raises(ConfigError, match="event_selection"):
        KernelPatterns(name="bad", event_selection="everything")


def test_merge_intervals_hta_keeps_inverted_intervals():
    starts, ends = [11_000, 21_000, 30_000], [10_000, 20_000, 35_000]
    s, e = merge_intervals(starts, ends, "hta")
    assert (e - s).sum() == -2_000 + 5_000
    s, e = merge_intervals(starts, ends, "exact")
    assert (e - s).sum() == 5_000
