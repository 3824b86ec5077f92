"""Memory bandwidth and the copy summary on a hand-built trace with a known answer."""

from __future__ import annotations

import pandas as pd
import pytest
from trace_helpers import rank_trace

from analysis.kineto.extras import MEMORY_OP_COLUMNS
from analysis.metrics.gpu_time import memory_bandwidth as mb

US = 1000


def _trace():
    rt = rank_trace(
        [
            ("Memcpy HtoD (Pinned -> Device)", "gpu_memcpy", 0, 10 * US, 7, 1),
            ("Memcpy HtoD (Pageable -> Device)", "gpu_memcpy", 5 * US, 10 * US, 8, 2),
            ("Memset (Device)", "gpu_memset", 20 * US, 10 * US, 7, 3),
            ("Memcpy DtoH (Device -> Pinned)", "gpu_memcpy", 40 * US, 0, 7, 4),  # zero length
            ("gemm", "kernel", 0, 50 * US, 9, 5),
        ]
    )
    rt.extras["memory_ops"] = _ops([0, 1, 2, 3], [100_000, 200_000, 50_000, 8],
                                   [10.0, 20.0, 5.0, 1.0])
    return rt


def _ops(rows, nbytes, bandwidth) -> pd.DataFrame:
    """The ``memory_ops`` extra of hand-made rows (index: event row labels)."""
    return pd.DataFrame({"bytes": nbytes, "bandwidth_gbps": bandwidth},
                        index=pd.Index(rows, dtype="int64")).astype(MEMORY_OP_COLUMNS)


def test_series_is_the_running_sum_per_kind():
    with pytest.warns(UserWarning, match="1 memory operations of zero"):
        part = mb.memory_bandwidth_rank(_trace())
    s = part.series
    htod = s[s["name"] == "Memcpy HtoD"]
    assert htod["ts"].tolist() == [0, 5, 10, 15]
    assert htod["memory_bw_gbps"].tolist() == [10, 30, 20, 0]
    memset = s[s["name"] == "Memset"]
    assert memset["memory_bw_gbps"].tolist() == [5, 0]
    assert "Memcpy DtoH" not in set(s["name"])  # zero-length copy left out (warned)


def test_hta_preset_stretches_zero_length_to_one_us():
    part = mb.memory_bandwidth_rank(_trace(), patterns="hta")
    dtoh = part.series[part.series["name"] == "Memcpy DtoH"]
    assert dtoh["ts"].tolist() == [40, 41]
    assert dtoh["memory_bw_gbps"].tolist() == [1, 0]


def test_summary_counts_positive_change_points():
    with pytest.warns(UserWarning):
        part = mb.memory_bandwidth_rank(_trace())
    summary = mb.combine({0: part})
    assert summary.loc[(0, "Memcpy HtoD"), ("memory_bw_gbps", "count")] == 3
    assert summary.loc[(0, "Memcpy HtoD"), ("memory_bw_gbps", "max")] == 30


def test_copy_summary_per_direction_and_host_memory():
    with pytest.warns(UserWarning):
        copies = mb.copy_summary({0: mb.memory_bandwidth_rank(_trace())})
    by = copies.set_index(["kind", "direction", "src"])
    pinned = by.loc[("Memcpy", "HtoD", "Pinned")]
    assert (pinned["count"], pinned["bytes"], pinned["time"]) == (1, 100_000, 10)
    assert pinned["achieved_gbps"] == pytest.approx(100_000 / 10_000)  # bytes per ns
    pageable = by.loc[("Memcpy", "HtoD", "Pageable")]
    assert pageable["achieved_gbps"] == pytest.approx(200_000 / 10_000)
    memset = by.loc[("Memset", "", "Device")]
    assert (memset["bytes"], memset["busy"]) == (50_000, 10)
    # the zero-length copy is counted with its bytes, but has no time to divide by
    dtoh = by.loc[("Memcpy", "DtoH", "Device")]
    assert dtoh["count"] == 1 and pd.isna(dtoh["achieved_gbps"])


@pytest.mark.parametrize(
    "name, kind",
    [("Memcpy HtoD (Pinned -> Device)", "Memcpy HtoD"), ("Memset (Device)", "Memset"),
     ("dma_copy", "Memcpy Unknown"), ("Memcpy PtoP (Device -> Device)", "Memcpy PtoP")],
)
def test_memory_kind(name, kind):
    assert mb.memory_kind(name) == kind


def test_back_to_back_copies_return_to_exactly_zero():
    """Deviation: at equal times an end sorts before the next start, and the running sum is
    compensated, so the bandwidth of an idle copy engine reads exactly 0 GB/s (HTA's plain
    running sum leaves 2.8e-17 GB/s "bandwidths" that its summary counts as positive)."""
    rt = rank_trace(
        [
            ("Memcpy DtoD (Device -> Device)", "gpu_memcpy", 0, 10 * US, 7, 1),
            ("Memcpy DtoD (Device -> Device)", "gpu_memcpy", 5 * US, 10 * US, 8, 2),
            ("Memcpy DtoD (Device -> Device)", "gpu_memcpy", 15 * US, 10 * US, 7, 3),
        ]
    )
    rt.extras["memory_ops"] = _ops([0, 1, 2], [1, 1, 1], [0.1, 0.2, 0.3])
    series = mb.memory_bandwidth_rank(rt).series["memory_bw_gbps"].to_numpy()
    # 0.1, 0.3, 0.2, then at 15 µs the second copy's end (-> 0) before the third's start (0.3)
    assert series.tolist() == pytest.approx([0.1, 0.3, 0.2, 0.0, 0.3, 0.0])
    assert series[3] == 0.0 and series[5] == 0.0
    hta = mb.memory_bandwidth_rank(rt, patterns="hta").series["memory_bw_gbps"].to_numpy()
    assert hta[3] != 0.0  # the float residue HTA keeps
    summary = mb.combine({0: mb.memory_bandwidth_rank(rt)})
    assert summary.loc[(0, "Memcpy DtoD"), ("memory_bw_gbps", "count")] == 4
