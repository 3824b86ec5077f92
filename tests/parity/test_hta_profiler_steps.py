"""HTA 0.5.0 parity of the profiler step list, through TraceAnalysis (both presets)."""

from __future__ import annotations

import pytest
from hta_oracle import hta_analysis
from trace_helpers import facade, parity_dirs


@pytest.mark.parametrize("trace_dir", parity_dirs(), indirect=True)
def test_hta_parity(trace_dir):
    theirs = hta_analysis(str(trace_dir)).get_profiler_steps()
    assert facade(trace_dir, patterns="hta").get_profiler_steps() == [int(s) for s in theirs]
    assert facade(trace_dir).get_profiler_steps() == [int(s) for s in theirs]

