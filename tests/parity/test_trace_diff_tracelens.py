"""Operator-level comparison across hardware against TraceLens's H100 vs MI300X comparison CSVs.

The same Qwen1.5-0.5B model traced on an H100 and on an MI300X
(../shared/traces/tracelens/{h100,mi300}) and TraceLens's comparison of its two perf reports
(``compare_h100_mi300_qwen_csvs``). Kernel names differ between the two GPUs; operators match.
"""

from __future__ import annotations

import warnings

import pandas as pd
import pytest
from paths import REPO_ROOT
from trace_helpers import load

from analysis import compare
from analysis.metrics.compare.trace_diff import NO_OPERATOR

TRACELENS = REPO_ROOT.parent / "shared" / "traces" / "tracelens"
QWEN = "Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz"
CSVS = TRACELENS / "compare_h100_mi300_qwen_csvs"

pytestmark = pytest.mark.skipif(not TRACELENS.is_dir(),
                                reason=f"TraceLens traces not available: {TRACELENS} does not exist")


@pytest.fixture(scope="module")
def comparison():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        h100 = load(TRACELENS / "h100" / QWEN)
        mi300 = load(TRACELENS / "mi300" / QWEN)
    return compare(h100, mi300)


@pytest.fixture(scope="module")
def ops(comparison):
    return comparison.operators().set_index("operator")


def test_exclusive_gpu_time_per_operator_equals_tracelens_direct_kernel_time(ops):
    theirs = pd.read_csv(CSVS / "ops_summary.csv").set_index("name")
    for side, col in (("base", "h100"), ("test", "mi300")):
        present = theirs[f"{col}::total_direct_kernel_time_ms"].dropna()
        ours = ops.loc[present.index, f"{side}_time_us"]
        # TraceLens sums float64 µs; ours are exact ns: they agree to a few ns
        assert (ours - present * 1000).abs().max() < 0.01, col
        # TraceLens counts the calls that launched a kernel; we count every call
        counts = theirs[f"{col}::Count"].dropna()
        assert (ops.loc[counts.index, f"{side}_count"] >= counts).all()
        differ = counts.index[ops.loc[counts.index, f"{side}_count"] != counts]
        assert list(differ) == ["aten::arange"]  # called twice, once without a kernel


def test_matched_added_removed_agree_with_tracelens_split(ops):
    """TraceLens splits by name + shapes (35 intersect, 0 only-baseline, 1 only-variant); by name
    the same operators are matched, and its only-variant operator is "added"."""
    intersect = set(pd.read_csv(CSVS / "ops_unique_args_intersect_mi300.csv")["name"])
    only_variant = set(pd.read_csv(CSVS / "ops_unique_args_only_variant_mi300.csv")["name"])
    ops = ops.drop(NO_OPERATOR, errors="ignore")
    change = ops["change"].astype(str)
    both = set(ops.index[(ops["base_count"] > 0) & (ops["test_count"] > 0)])
    assert intersect <= both
    assert only_variant == {"aten::fill_"}
    # TraceLens lists only operators that launched kernels; the MI300X run also calls
    # aten::zeros / zero_ / permute, which launch nothing themselves (added, with 0 µs)
    launched = (ops["base_time_us"] > 0) | (ops["test_time_us"] > 0)
    assert set(change.index[(change == "added") & launched]) == only_variant
    assert set(change.index[(change == "added") & ~launched]) == {
        "aten::zeros", "aten::zero_", "aten::permute"}
    assert set(change.index[change == "removed"]) == set()  # TraceLens: only-baseline is empty


def test_kernels_do_not_match_across_hardware_and_the_notes_say_so(comparison, ops):
    kernels = comparison.kernels()
    matched = kernels[(kernels["base_count"] > 0) & (kernels["test_count"] > 0)]
    assert len(matched) / len(kernels) < 0.3  # 12 of 45 names (PyTorch's own elementwise kernels)
    ops = ops.drop(NO_OPERATOR, errors="ignore")
    with_gpu = ops[(ops["base_time_us"] > 0) | (ops["test_time_us"] > 0)]
    both = with_gpu[(with_gpu["base_count"] > 0) & (with_gpu["test_count"] > 0)]
    assert len(both) == len(with_gpu) - 1  # all but aten::fill_
    assert any("operator level" in n for n in comparison.notes)


def test_gpu_time_without_a_launch_in_the_trace_is_kept_apart(ops):
    """509 H100 kernels (13.7 ms) have no launch call in the trace. The default window leaves them
    out, as TraceLens does (no NO_OPERATOR row); with ``gpu_events="all"`` they are the NO_OPERATOR
    row, so the operators' times add up to all the GPU work."""
    from analysis.kineto.events import kernel_like_mask

    assert NO_OPERATOR not in ops.index
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        h100 = load(TRACELENS / "h100" / QWEN, gpu_events="all")
    every = compare(h100, h100).operators().set_index("operator")
    ev = h100.trace[0].events
    total_us = ev.loc[kernel_like_mask(ev), "dur"].sum() / 1000
    assert every["base_time_us"].sum() == pytest.approx(total_us, abs=1e-6)
    assert every.at[NO_OPERATOR, "base_time_us"] == pytest.approx(13741.827, abs=1e-6)
