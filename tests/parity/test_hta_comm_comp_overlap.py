"""HTA 0.5.0 parity (and HTA's documented failures) for comm_comp_overlap, through TraceAnalysis."""


from __future__ import annotations

import pandas as pd
import pytest
from conftest import HTA_GPU_TRACE_DIRS
from hta_oracle import hta_analysis
from trace_helpers import facade


@pytest.mark.parametrize("trace_dir", [*HTA_GPU_TRACE_DIRS, "sample"], indirect=True)
def test_hta_parity(trace_dir):
    theirs = hta_analysis(str(trace_dir)).get_comm_comp_overlap(visualize=False)
    ours = facade(trace_dir, patterns="hta", rounding="hta").get_comm_comp_overlap(visualize=False)
    pd.testing.assert_frame_equal(ours, theirs.reset_index(drop=True), rtol=1e-6)

