"""The operator table by call stack (``group_by="name_and_stack"`` / ``"name_and_input_shape_and_stack"``)
against the TensorBoard plugin's stack view (torch-tb-profiler 0.4.3).

The plugin reads the operators' ``Call stack`` arg (PyTorch's ``with_stack=True`` before stacks
became ``python_function`` events). No trace under ../shared/traces has a non-empty one (five
carry the arg, all empty: the plugin shows no stack rows, nor do we), so the view is checked on
the synthetic ``analysis.testing.tensorboard_traces`` trace with ``stacks=True`` (today's and
the 2021 schema, whose runtime calls give device times), whose plugin snapshots are in
``tests/data/tb_oracle_synthetic`` (``scripts/tb_oracle_snapshot.py --file``: its docstring).
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest
from conftest import SHARED_TRACES
from parity.tensorboard_oracle import SNAPSHOTS, load_snapshot, rank_trace, stack_differences

from analysis import TraceAnalysis
from analysis.kineto.parse import parse_trace_bytes
from analysis.testing import tensorboard_traces

SYNTHETIC = Path(__file__).resolve().parents[1] / "data" / "tb_oracle_synthetic"
US = 1.0


def within_limits(diffs: dict[str, float]) -> dict[str, float]:
    return {k: v for k, v in diffs.items() if not v <= (US if k.endswith("_us") else 0)}


@pytest.mark.parametrize("legacy", [False, True], ids=["current", "2021"])
def test_the_stack_view_matches_the_plugin(tmp_path, legacy):
    snap = json.loads((SYNTHETIC / f"stacks{'_legacy' if legacy else ''}.json").read_text())
    assert snap["op_stack_by_name"]["n_rows"] == 3 and snap["op_stack_by_name_input"]["n_rows"] == 3
    path = tensorboard_traces.write(tmp_path / "rank0.json", stacks=True, legacy=legacy)
    rt = parse_trace_bytes(path.read_bytes(), str(path))
    diffs = stack_differences(snap, rt)
    assert not within_limits(diffs), diffs


STACK_SNAPS = [(p, load_snapshot(p)) for p in sorted(SNAPSHOTS.glob("*.json"))]
STACK_SNAPS = [(p, s) for p, s in STACK_SNAPS if "op_stack_by_name" in s]


@pytest.mark.parametrize("snap", [pytest.param(s, id=p.stem[:60]) for p, s in STACK_SNAPS])
def test_real_traces_with_empty_stacks_give_no_rows_as_the_plugin(snap):
    path = SHARED_TRACES / snap["file"]
    if not path.is_file():
        pytest.skip(f"real traces not available: {path} does not exist")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        diffs = stack_differences(snap, rank_trace(str(path)))
    assert snap["op_stack_by_name"]["n_rows"] == 0
    assert not within_limits(diffs), diffs


def test_a_trace_without_stacks_gives_an_empty_table_and_says_why(tmp_path):
    tensorboard_traces.write(tmp_path / "rank0.json.gz")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ta = TraceAnalysis(str(tmp_path), use_cache=False, progress=False)
    with pytest.warns(UserWarning, match="no operator 'Call stack' args"):
        table = ta.get_operator_table(group_by="name_and_stack", visualize=False)
    assert table.empty and "call_stack" in table.columns
    plain = ta.get_operator_table(visualize=False)
    assert "call_stack" not in plain.columns and len(plain) == 3
