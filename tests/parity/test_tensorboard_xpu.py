"""An Intel GPU (XPU) trace against the TensorBoard plugin (torch-tb-profiler 0.4.3).

Kineto writes an Intel GPU's kernels without a ``stream`` arg (the SYCL queue instead): HTA 0.5.0
then finds no GPU work, but the plugin reads events by category and sees them. Checked on the
``analysis.testing.xpu_traces`` trace (Kineto's XPU writer, event by event) against the plugin's
snapshot ``tests/data/tb_oracle_synthetic/xpu.json`` (``scripts/tb_oracle_snapshot.py --file
xpu=<xpu_trace(0, 1, 3) written as JSON>``).
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import pytest
from parity.tensorboard_oracle import differences, operator_differences
from parity.test_tensorboard_oracle import LIMITS, US

from analysis.testing.xpu_traces import GEMM_US, xpu_trace

SNAPSHOT = Path(__file__).resolve().parents[1] / "data" / "tb_oracle_synthetic" / "xpu.json"


@pytest.fixture(scope="module")
def trace(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("xpu") / "xpu_rank0.json"
    path.write_text(json.dumps(xpu_trace(0, 1, 3)))
    return path


def test_the_views_match_the_plugin(trace):
    snap = json.loads(SNAPSHOT.read_text())
    assert [row[1] for row in snap["overview_steps"]["rows"]] == [GEMM_US] * 3  # it sees kernels
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        diffs = differences(snap, str(trace))
        tables = operator_differences(snap, str(trace))
    over = {k: v for k, v in diffs.items() if not (v <= LIMITS[k] or np.isnan(v))}
    over |= {k: v for k, v in tables.items() if not v <= (US if k.endswith("_us") else 0)}
    assert not over, over
    assert diffs, "nothing was compared"
