"""Extras on the Dask engine: the workers read the op shapes themselves; results equal the local ones."""

from __future__ import annotations

import gzip
import json

import pandas as pd
import pytest

distributed = pytest.importorskip("distributed")

from roofline_traces import trace_events  # noqa: E402

from analysis import TraceAnalysis  # noqa: E402


def test_operator_roofline_on_a_cluster_equals_local(tmp_path, dask_client):
    for rank in (0, 1):
        trace = {
            "deviceProperties": [{"id": 0, "name": "NVIDIA H100 80GB HBM3"}],
            "distributedInfo": {"rank": rank, "world_size": 2},
            "traceEvents": trace_events(),
        }
        path = tmp_path / f"rank{rank}.pt.trace.json.gz"
        path.write_bytes(gzip.compress(json.dumps(trace).encode()))
    cache = tmp_path / "cache"
    local = TraceAnalysis(str(tmp_path), cache_dir=cache, gpu_events="all")
    expected = local.get_operator_roofline(ranks="all", visualize=False)
    # on the session's cluster (tests/conftest.py)
    remote = TraceAnalysis(str(tmp_path), cache_dir=cache, gpu_events="all", client=dask_client)
    got = remote.get_operator_roofline(ranks="all", visualize=False)
    pd.testing.assert_frame_equal(got.ops, expected.ops)
    pd.testing.assert_frame_equal(got.steps, expected.steps)
    assert got.ops.loc[got.ops["name"] == "aten::mm", "count"].item() == 4  # both ranks pooled
