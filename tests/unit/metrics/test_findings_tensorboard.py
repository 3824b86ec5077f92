"""The findings from the TensorBoard plugin's recommendations, on the hand-made trace of
``analysis.testing.tensorboard_traces`` (its numbers are derived there)."""

from __future__ import annotations

import warnings

import pandas as pd
import pytest

from analysis import TraceAnalysis
from analysis.metrics.findings import findings as F
from analysis.testing import tensorboard_traces


def table(tmp_path, **options):
    path = tensorboard_traces.write(tmp_path / "rank0.json.gz", **options)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return TraceAnalysis(str(path), use_cache=False, progress=False).findings()


def one(t, metric):
    rows = t[t["metric"] == metric]
    assert len(rows) == 1, t[["metric", "title"]]
    return rows.iloc[0]


@pytest.fixture(scope="module")
def findings(tmp_path_factory):
    return table(tmp_path_factory.mktemp("tbf"))


def test_dataloader_share_fires_with_the_share(findings):
    f = one(findings, "dataloader_share_pct")
    assert f["value"] == pytest.approx(10.0)  # 200 µs of DataLoader in 2000 µs of steps
    assert f["threshold"] == F.TB_DATALOADER_PCT
    assert "num_workers" in f["suggestion"] and "pin_memory" in f["suggestion"]


def test_tensor_core_eligible_operators_without_tensor_cores(findings):
    f = one(findings, "tc_eligible_no_tc_pct")
    # aten::mm's sgemm kernels: 700 of 900 µs of kernel time; its h16816 kernel uses tensor cores
    assert f["value"] == pytest.approx(77.78)
    assert "aten::mm 0.70 ms" in f["evidence"]
    assert "autocast" in f["suggestion"] and "TF32" in f["suggestion"]


def test_low_gpu_utilization(findings):
    f = one(findings, "gpu_utilization_pct")
    assert f["value"] == pytest.approx(45.0) and f["threshold"] == F.TB_GPU_UTILIZATION_PCT


def test_launch_overhead_silent_with_few_launches(findings):
    assert "launch_time_pct" not in set(findings["metric"])


def test_launch_overhead_fires_with_many_launches(tmp_path):
    """Step 1 (the analysed one; the last step is left out by default) with its 3 launch calls of
    10 µs and 20 more of 40 µs: 830 µs of 1000."""
    f = one(table(tmp_path, launches=20), "launch_time_pct")
    assert f["value"] == pytest.approx(83.0)
    assert "CUDA graph" in f["suggestion"]


def test_blocking_calls_are_not_launch_overhead(tmp_path):
    """Calls over 50 µs wait for the GPU: they are left out."""
    assert "launch_time_pct" not in set(table(tmp_path, launch_us=200)["metric"])


def test_dataloader_rule_silent_without_dataloader_events():
    """No DataLoader time at all: the rule says why instead of reporting a healthy 0 %."""
    steps = pd.DataFrame({"rank": [0], "dataloader_us": [0.0], "total_us": [1000.0]})
    with pytest.raises(F.Silent, match="DataLoader"):
        F.dataloader_share({"step_time_breakdown": steps})


def test_tensor_core_rule_silent_without_an_nvidia_gpu_name():
    meta = pd.DataFrame({"rank": [0], "gpu": ["AMD Instinct MI300X"]})
    with pytest.raises(F.Silent, match="NVIDIA"):
        F.tensor_cores_unused({"trace_metadata": meta, "kernel_table": None})
