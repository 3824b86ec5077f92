"""HTA 0.5.0 parity (and HTA's documented failures) for kernel_launch_stats, through TraceAnalysis."""


from __future__ import annotations

import pandas as pd
import pytest
from hta_oracle import hta_analysis
from trace_helpers import facade, parity_dirs


@pytest.mark.parametrize("include_memory_events", [True, False])
@pytest.mark.parametrize("trace_dir", parity_dirs(), indirect=True)
def test_hta_parity(trace_dir, include_memory_events):
    hta = hta_analysis(str(trace_dir))
    ranks = hta.t.get_ranks()
    theirs = hta.get_cuda_kernel_launch_stats(
        ranks=ranks, include_memory_events=include_memory_events, visualize=False
    )
    ours = facade(trace_dir, patterns="hta", rounding="hta").get_cuda_kernel_launch_stats(visualize=False, ranks=ranks, include_memory_events=include_memory_events)
    assert list(ours) == list(theirs)
    for rank in theirs:
        pd.testing.assert_frame_equal(
            ours[rank], theirs[rank].reset_index(drop=True), check_dtype=False, rtol=1e-6
        )


def test_default_matches_more_launch_apis_than_hta(hta_traces_dir):
    # Triton launches with the driver API, ROCm with hipLaunchKernel: HTA 0.5.0 finds no launch
    for name, hta_rows, our_rows in (("triton_example", 0, 1), ("amd_trace", 0, 16)):
        trace = hta_traces_dir / name
        assert len(hta_analysis(str(hta_traces_dir / name))
                   .get_cuda_kernel_launch_stats(visualize=False)[0]) == hta_rows
        assert len(facade(trace, patterns="hta").get_cuda_kernel_launch_stats(visualize=False)[0]) == hta_rows
        assert len(facade(trace, rounding="exact").get_cuda_kernel_launch_stats(visualize=False)[0]) == our_rows

