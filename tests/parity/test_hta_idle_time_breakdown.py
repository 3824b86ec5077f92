"""HTA 0.5.0 parity (and HTA's documented failures) for idle_time_breakdown, through TraceAnalysis."""


from __future__ import annotations

import pandas as pd
import pytest
from hta_oracle import hta_analysis
from trace_helpers import facade, parity_dirs

from analysis.errors import NoGPUEventsError


@pytest.mark.parametrize("trace_dir", parity_dirs(), indirect=True)
def test_hta_parity(trace_dir):
    hta = hta_analysis(str(trace_dir))
    ranks = hta.t.get_ranks()
    theirs, their_stats = hta.get_idle_time_breakdown(
        ranks=ranks, visualize=False, show_idle_interval_stats=True
    )
    ours, our_stats = facade(trace_dir, patterns="hta", rounding="hta").get_idle_time_breakdown(visualize=False, ranks=ranks, show_idle_interval_stats=True)
    # same rows in the same order, same (repeating, per-rank) index, values as HTA rounds them
    pd.testing.assert_frame_equal(ours, theirs, check_dtype=False, check_index_type=False, rtol=1e-6)
    pd.testing.assert_frame_equal(
        our_stats, their_stats, check_dtype=False, check_index_type=False, rtol=1e-6
    )


def test_hta_parity_streams_and_delay(hta_traces_dir):
    trace_dir = hta_traces_dir / "trace_filter"
    theirs, _ = hta_analysis(str(trace_dir)).get_idle_time_breakdown(
        ranks=[1, 0], streams=[7, 25], visualize=False, consecutive_kernel_delay=5
    )
    ours, stats = facade(trace_dir, patterns="hta", rounding="hta").get_idle_time_breakdown(visualize=False, ranks=[1, 0], streams=[7, 25], consecutive_kernel_delay=5)
    assert stats is None
    assert list(ours["stream"].unique()) == [7, 25]
    pd.testing.assert_frame_equal(ours, theirs, check_dtype=False, check_index_type=False)


def test_hta_fails_unclearly_without_gpu_events(hta_traces_dir):
    hta = hta_analysis(str(hta_traces_dir / "cpu_only"))
    with pytest.raises(Exception) as info:
        hta.get_idle_time_breakdown(ranks=hta.t.get_ranks(), visualize=False)
    assert not isinstance(info.value, NoGPUEventsError)


def test_default_rank_is_first_present(hta_traces_dir):
    # df_index_resolver holds rank 1 only: HTA's default ranks=[0] raises a bare ValueError
    df, _ = facade(hta_traces_dir / "df_index_resolver").get_idle_time_breakdown(visualize=False)
    assert set(df["rank"]) == {1}
    with pytest.raises(ValueError):
        hta_analysis(str(hta_traces_dir / "df_index_resolver")).get_idle_time_breakdown(
            visualize=False
        )

