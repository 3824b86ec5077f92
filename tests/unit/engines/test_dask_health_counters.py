"""Trace health, queue length and memory copies on a Dask LocalCluster equal the local results."""

from __future__ import annotations

import warnings

import pandas as pd
import pytest

distributed = pytest.importorskip("distributed")

from analysis.api import TraceAnalysis  # noqa: E402
from analysis.testing import health_traces as ht  # noqa: E402

METHODS = ("check", "get_queue_length_stream_summary", "get_memcpy_summary",
           "get_queue_length_summary", "get_memory_bw_summary")


@pytest.mark.parametrize("fault", ["clock_skew", "gpu_stops_early"])
def test_same_on_dask(dask_client, tmp_path, fault):
    client = dask_client  # the session's cluster (tests/conftest.py)
    ht.write_job(ht.faulty_job(fault, ranks=3), tmp_path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        local = TraceAnalysis(tmp_path, use_cache=False, progress=False)
        remote = TraceAnalysis(tmp_path, client=client, use_cache=False, timeout=120)
        for method in METHODS:
            a, b = getattr(local, method)(), getattr(remote, method)()
            pd.testing.assert_frame_equal(a, b, check_exact=True)
        assert fault in set(remote.check()["check"])
