"""HTA 0.5.0 parity (and HTA's documented failures) for temporal_breakdown, through TraceAnalysis."""


from __future__ import annotations

import pandas as pd
import pytest
from hta_oracle import hta_analysis
from trace_helpers import facade, parity_dirs


@pytest.mark.parametrize("trace_dir", parity_dirs(), indirect=True)
def test_hta_parity(trace_dir):
    theirs = hta_analysis(str(trace_dir)).get_temporal_breakdown(visualize=False)
    ours = facade(trace_dir, patterns="hta", rounding="hta").get_temporal_breakdown(visualize=False)
    pd.testing.assert_frame_equal(ours, theirs.reset_index(drop=True), rtol=1e-6)

