"""Figures of the operator roofline: built from a real result, and empty input says why."""

from __future__ import annotations

import pandas as pd
from roofline_traces import hand_made_rank

from analysis.figures.operator_roofline import draw, operator_roofline, time_lost_table
from analysis.metrics.roofline import operator_roofline as roofline
from analysis.metrics.roofline.gpu_specs import lookup


def _result(gpu="NVIDIA H100 80GB HBM3"):
    return roofline.combine({0: roofline.operator_roofline_rank(hand_made_rank(gpu))})


def test_roofline_has_one_dot_per_innermost_group_and_the_ceilings():
    result = _result()
    fig = operator_roofline(result)
    dots = [t for t in fig.data if t.mode == "markers"]
    names = sorted(n for t in dots for n in t.customdata[:, 0])
    assert names == ["aten::addmm", "aten::mm"]  # aten::linear holds addmm: not drawn twice
    roofs = {t.name for t in fig.data if t.mode == "lines"}
    assert roofs == {"bf16 roof", "fp32 roof"}
    bf16 = next(t for t in fig.data if t.name == "bf16 roof")
    h100 = lookup("H100")
    assert bf16.x[1] == h100.ridge_flops_per_byte("bf16") and bf16.y[1] == 989.0
    assert fig.layout.xaxis.type == "log" and fig.layout.yaxis.type == "log"


def test_time_lost_table_sorted_by_lost_time():
    result = _result()
    table = time_lost_table(result).data[0]
    ops = result.ops[result.ops["innermost"]].sort_values("time_lost_us", ascending=False)
    assert list(table.cells.values[0]) == list(ops["name"])
    assert set(draw(result)) == {"operator_roofline", "operator_time_lost"}


def test_unknown_gpu_and_empty_results_give_explaining_figures():
    result = _result("Mystery GPU")
    fig = operator_roofline(result)
    assert not [t for t in fig.data if t.mode == "lines"]  # no ceilings without peaks
    assert "No roofline" in time_lost_table(result).layout.annotations[0].text
    empty = result._replace(ops=pd.DataFrame({c: [] for c in roofline.OP_COLUMNS}))
    assert "No modelled operator" in operator_roofline(empty).layout.annotations[0].text
