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
    # one LoadOptions, facade -> Dask engine; the workers read extras with it
    assert remote.options is remote.engine.options and remote.cache_dir == str(cache)
    assert remote.engine.read_extras.options is remote.options
    got = remote.get_operator_roofline(ranks="all", visualize=False)
    pd.testing.assert_frame_equal(got.ops, expected.ops)
    pd.testing.assert_frame_equal(got.steps, expected.steps)
    assert got.ops.loc[got.ops["name"] == "aten::mm", "count"].item() == 4  # both ranks pooled


def test_capture_trace_and_iteration_window_on_a_cluster_equal_local(tmp_path, dask_client):
    """``capture_trace=`` reaches the workers' loads (and their on-demand args tables), and the
    analysed window is cut at the serving iterations there too."""
    from analysis.testing.graph_traces import serving_events, write_pair

    write_pair(tmp_path / "pair", ["aten::mm", "aten::add"], [2, 2])
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "replay.json").write_text((tmp_path / "pair" / "replay.json").read_text())
    capture = tmp_path / "pair" / "capture_traces"
    (tmp_path / "serving").mkdir()
    (tmp_path / "serving" / "serving.json").write_text(json.dumps(
        {"traceEvents": serving_events(["prefill", "decode", "decode", "mixed", "decode"])}))
    cache = tmp_path / "cache"

    def results(**kw):
        graph = TraceAnalysis(str(tmp_path / "run"), cache_dir=cache, capture_trace=capture, **kw)
        serving = TraceAnalysis(str(tmp_path / "serving"), cache_dir=cache, **kw)
        return (graph.get_operator_summary(), graph.get_operator_roofline(visualize=False).ops,
                serving.get_temporal_breakdown(visualize=False))

    expected = results()
    assert set(expected[0]["name"]) == {"aten::mm", "aten::add"}
    got = results(client=dask_client)  # on the session's cluster (tests/conftest.py)
    for a, b in zip(got, expected, strict=True):
        pd.testing.assert_frame_equal(a, b)
