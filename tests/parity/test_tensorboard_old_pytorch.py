"""Traces of PyTorch 1.8 and earlier against the TensorBoard plugin (torch-tb-profiler 0.4.3).

Two things those traces do differently, both found on the plugin's own sample traces (ResNet-50 on
a V100, recorded in January 2021: ``pytorch/kineto``'s ``tb_plugin/samples``, not kept here):

- the operators' recorded shapes are ``Input dims``, not ``Input Dims`` (the plugin reads either);
- ``torch.autograd.profiler.profile`` writes no ``ProfilerStep#N``: the plugin's one step over the
  CPU events is then moved to the device side as its ProfilerSteps are (it ends where the last GPU
  event launched in it ends).

Checked on the synthetic ``analysis.testing.tensorboard_traces`` trace written that way
(``legacy=True, steps=False, shapes=True, dims_key="Input dims"``), against the plugin's snapshot
``tests/data/tb_oracle_synthetic/autograd_1_8.json`` (``scripts/tb_oracle_snapshot.py --file``)
and against the answers the trace's docstring derives by hand.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from parity.tensorboard_oracle import differences, operator_differences
from parity.test_tensorboard_oracle import LIMITS, US

from analysis import TraceAnalysis
from analysis.testing import tensorboard_traces

SNAPSHOT = Path(__file__).resolve().parents[1] / "data" / "tb_oracle_synthetic" / "autograd_1_8.json"
OPTIONS = {"legacy": True, "steps": False, "shapes": True, "dims_key": "Input dims"}


@pytest.fixture(scope="module")
def trace_dir(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("autograd-1-8")
    tensorboard_traces.write(folder / "rank0.json", **OPTIONS)
    return folder


def test_the_views_match_the_plugin(trace_dir):
    snap = json.loads(SNAPSHOT.read_text())
    assert [r[0] for r in snap["overview_steps"]["rows"]] == ["0"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        diffs = differences(snap, str(trace_dir / "rank0.json"))
        tables = operator_differences(snap, str(trace_dir / "rank0.json"))
    over = {k: v for k, v in diffs.items() if not (v <= LIMITS[k] or np.isnan(v))}
    over |= {k: v for k, v in tables.items() if not v <= (US if k.endswith("_us") else 0)}
    assert not over, over
    assert snap["op_by_name_input"]["n_rows"] == 3  # the shapes were read: one row per operator


def test_the_one_step_ends_with_its_last_gpu_event(trace_dir):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ta = TraceAnalysis(str(trace_dir), use_cache=False, progress=False)
    step = ta.get_step_time_breakdown(visualize=False)
    assert step["step"].tolist() == [0]
    assert step["total_us"].tolist() == [2720 - 1000]  # not 1300: the CPU events' span
    assert step["kernel_us"].tolist() == [900]
    summary = ta.get_gpu_summary(visualize=False)
    assert summary["gpu_utilization_pct"].iloc[0] == pytest.approx(100 * 900 / 1720)


def test_input_dims_of_pytorch_1_8_are_the_shapes(trace_dir):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ta = TraceAnalysis(str(trace_dir), use_cache=False, progress=False)
    ops = ta.get_operator_table(group_by="name_and_input_shape", visualize=False)
    shapes = dict(zip(ops["name"], ops["input_shape"], strict=True))
    assert shapes == {"aten::mm": "[[8, 16], [16, 4]]", "aten::add": "[[8, 4], [8, 4]]",
                      "aten::empty": "[[4]]"}
    # the package's own operator summary reads the same shapes
    summary = ta.get_operator_summary(group_by="name_and_input_shape")
    assert dict(zip(summary["name"], summary["input_dims"], strict=True)) == {
        "aten::mm": "[[8,16],[16,4]]", "aten::add": "[[8,4],[8,4]]"}


def test_memory_events_of_pytorch_1_9_give_operator_memory_and_say_what_is_missing(tmp_path):
    """PyTorch 1.9 and earlier wrote each ``[memory]`` event's device and bytes only: the plugin
    (snapshot ``memory_1_9.json``) shows no curve, no peaks and no allocation/free pairs, and the
    same operator memory as from today's events; so do we, and the tables that stay empty say
    why."""
    snap = json.loads((SNAPSHOT.parent / "memory_1_9.json").read_text())
    assert snap["memory_peaks"] == [] and snap["memory_curve"]["n_rows"] == {}
    (tmp_path / "old").mkdir()
    (tmp_path / "new").mkdir()
    old = tensorboard_traces.write(tmp_path / "old" / "rank0.json", legacy=True, old_memory=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        diffs = differences(snap, str(old))
    over = {k: v for k, v in diffs.items() if not (v <= LIMITS[k] or np.isnan(v))}
    assert not over, over
    assert diffs["operator_memory_rows"] == 0 and diffs["memory_event_rows"] == 0

    ta = TraceAnalysis(str(old.parent), use_cache=False, progress=False)
    for method, arg, table in (("get_memory_timeline", "'Total Allocated'", "no memory curve"),
                               ("get_memory_peaks", "'Total Allocated'", "no memory peaks"),
                               ("get_memory_events", "'Addr'", "no allocation is paired")):
        with pytest.warns(UserWarning, match=rf"rank\(s\) \[0\]: .*{arg}.*PyTorch 1\.9.*{table}"):
            assert getattr(ta, method)().empty, method
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nothing to say: the bytes are all operator memory needs
        old_ops = ta.get_operator_memory()
    current = tensorboard_traces.write(tmp_path / "new" / "rank0.json", legacy=True)
    new_ops = TraceAnalysis(str(current.parent), use_cache=False,
                            progress=False).get_operator_memory()
    assert len(old_ops) == 4
    pd.testing.assert_frame_equal(old_ops, new_ops)
