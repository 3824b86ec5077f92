"""The TensorBoard plugin's operator view: per operator name (or name and input shapes), its calls
and host and device time.

Over the plugin's call trees (:mod:`.call_tree`; the whole trace; with their ``nn.Module`` nodes
on traces recorded with ``with_modules=True``), for each operator call: ``host_total_us`` = its
duration; ``host_self_us`` = its duration minus its direct children's (operators, steps,
annotations, and modules: a module called inside an operator takes its whole time out of the
operator's self time, Python included) and minus its own runtime calls'; ``device_total_us`` /
``device_self_us`` = the time of the GPU kernels, memcpys and memsets launched by its runtime calls,
including / excluding its children's; ``tc_eligible`` = the name is on the plugin's list of
operators that can use tensor cores, or an operator child of it is; ``tc_self_pct`` /
``tc_total_pct`` = the share of that device time in tensor-core kernels. Summed per group; ``calls``
counts the calls. Grouped by ``name`` or, with ``group_by="name_and_input_shape"``, by name and the
recorded ``Input Dims`` (``record_shapes=True``; ``"[]"`` without), written as Python writes a list,
in an ``input_shape`` column after ``name`` (only then).

The plugin's call-stack view: ``group_by="name_and_stack"`` (or ``"name_and_input_shape_and_stack"``)
groups by name (and input shape) and the operator's ``Call stack`` arg, in a ``call_stack`` column
(innermost frame first, one per line), keeping only calls that have a non-empty stack, as the
plugin does. PyTorch wrote that arg with ``with_stack=True`` until about 1.10; newer traces carry
stacks as ``python_function`` events instead, which the plugin does not read: on a trace without
``Call stack`` args the table is empty, with a warning saying so (:data:`NO_STACKS`).

The plugin links runtime calls only through Kineto's 2021 ``Runtime`` events: on current traces
every device time is 0, as it showed (``docs/deviations.md``). Sorted by device self time, then host
self time, descending.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping

import msgspec
import numpy as np
import pandas as pd

from analysis.errors import ConfigError
from analysis.kineto.model import RankTrace
from analysis.metrics.tensorboard.call_tree import call_tree, child_levels
from analysis.metrics.tensorboard.gpu_summary import uses_tensor_cores
from analysis.metrics.tensorboard.plugin_steps import plugin_view
from analysis.metrics.tensorboard.ranges import plugin_us

GROUPS = ("name", "name_and_input_shape", "name_and_stack", "name_and_input_shape_and_stack")
SHAPES = "op_shapes"
STACKS = "op_stacks"
MODULES = "python_functions"  # the nn.Module nodes of the plugin's trees (with_modules=True)
COLUMNS = ["rank", "name", "input_shape", "call_stack", "calls", "host_self_us", "host_total_us",
           "device_self_us", "device_total_us", "tc_eligible", "tc_self_pct", "tc_total_pct"]
NO_STACKS = (
    "operator table by call stack: the trace has no operator 'Call stack' args (recorded with "
    "with_stack=True by PyTorch up to about 1.10; newer PyTorch writes stacks as python_function "
    "events, which the TensorBoard plugin's stack view does not read), so the table is empty"
)
# Operators that can run on tensor cores: the plugin's list (from autocast's lower-precision ops).
TC_ELIGIBLE_OPS = frozenset((
    "aten::_convolution", "aten::conv1d", "aten::conv2d", "aten::conv3d", "aten::conv_tbc",
    "aten::conv_transpose1d", "aten::conv_transpose2d", "aten::conv_transpose3d",
    "aten::convolution", "aten::cudnn_convolution", "aten::cudnn_convolution_transpose",
    "aten::prelu", "aten::addmm", "aten::addmv", "aten::addr", "aten::matmul", "aten::mm",
    "aten::mv", "aten::linear", "aten::addbmm", "aten::baddbmm", "aten::bmm",
    "aten::chain_matmul", "aten::linalg_multi_dot", "aten::_thnn_fused_lstm_cell",
    "aten::_thnn_fused_gru_cell", "aten::lstm_cell", "aten::gru_cell", "aten::rnn_tanh_cell",
    "aten::rnn_relu_cell", "CudnnConvolutionBackward", "BmmBackward0",
    "aten::cudnn_convolution_transpose_backward", "CudnnConvolutionTransposeBackward",
    "MmBackward", "aten::cudnn_convolution_backward_weight", "aten::addmm_", "AddmvBackward",
    "MvBackward", "aten::cudnn_convolution_transpose_backward_weight",
    "aten::cudnn_convolution_transpose_backward_input", "AddmmBackward",
    "aten::cudnn_convolution_backward_input", "AddbmmBackward", "aten::cudnn_convolution_backward",
))


def extras(options: Mapping[str, object]) -> tuple[str, ...]:
    """The extra kinds a table with these options reads (shapes, stacks only when grouped by)."""
    group_by = str(options.get("group_by", "name"))
    return (("kernel_args", MODULES) + (SHAPES,) * ("input_shape" in group_by)
            + (STACKS,) * group_by.endswith("_stack"))


def runtime_times(rt: RankTrace, nodes: pd.DataFrame) -> np.ndarray:
    """Per node: (runtime call µs, device µs, tensor-core device µs) of the runtime calls the
    plugin gives it (2021 schema only: the first operator with the calls' ``External id``)."""
    out = np.zeros((len(nodes), 3))
    view = plugin_view(rt)
    runtime = view.roles["runtime"]
    if not len(runtime[0]):
        return out
    ev = rt.events
    raw = rt.extra("kernel_args")["raw_cat"].astype(str).str.lower()
    rows = raw.index[(raw == "runtime").to_numpy()]
    calls = ev.loc[rows, ["ts", "dur", "correlation"]]
    calls["external_id"] = view.external_ids[ev.index.get_indexer(rows)]
    device = ev[ev["cat"].isin(("kernel", "gpu_memcpy", "gpu_memset")).to_numpy(bool)]
    dev_us = plugin_us(device["dur"].to_numpy(np.int64))
    tc = (device["cat"] == "kernel").to_numpy(bool) & uses_tensor_cores(device["name"])
    per_corr = pd.DataFrame({"corr": device["correlation"].to_numpy(), "us": dev_us,
                             "tc": np.where(tc, dev_us, 0.0)}).groupby("corr").sum()
    calls = calls.assign(
        us=plugin_us(calls["dur"].to_numpy(np.int64)),
        dev=calls["correlation"].map(per_corr["us"]).fillna(0.0).to_numpy(),
        tc=calls["correlation"].map(per_corr["tc"]).fillna(0.0).to_numpy(),
    ).groupby("external_id")[["us", "dev", "tc"]].sum()
    ext = view.external_ids[ev.index.get_indexer(nodes["row"])]
    first = pd.Series(np.arange(len(nodes)), index=ext)
    first = first[~first.index.duplicated(keep="first") & (first.index >= 0)]
    owner = first.reindex(calls.index).dropna().astype(np.int64)
    out[owner.to_numpy()] = calls.loc[owner.index].to_numpy()
    return out


def _shapes(rt: RankTrace, nodes: pd.DataFrame) -> np.ndarray:
    """Per node: its ``Input Dims`` as Python prints the list (``"[[8, 16], [16, 4]]"``), "[]"."""
    table = rt.extras.get(SHAPES)
    if table is None:
        table = rt.extra(SHAPES)
    dims = table["input_dims"].reindex(nodes["row"]).astype(object).to_numpy()
    memo: dict = {}
    out = []
    for d in dims:
        if not isinstance(d, str) or not d:
            out.append("[]")
            continue
        if d not in memo:
            memo[d] = str(msgspec.json.decode(d))
        out.append(memo[d])
    return np.array(out, dtype=object)


def _stacks(rt: RankTrace, nodes: pd.DataFrame) -> np.ndarray:
    """Per node: its ``Call stack`` arg, "" without one."""
    table = rt.extra(STACKS)
    stacks = table["call_stack"].astype(object).reindex(nodes["row"]).to_numpy()
    return np.where(pd.isna(stacks), "", stacks).astype(object)


def operator_table_rank(rt: RankTrace, group_by: str = "name") -> pd.DataFrame:
    if group_by not in GROUPS:
        raise ConfigError(f"group_by must be one of {GROUPS}, not {group_by!r}")
    by_shape = "input_shape" in group_by
    by_stack = group_by.endswith("_stack")
    nodes = call_tree(rt, modules=True)
    parent = nodes["parent"].to_numpy(np.int64)
    kept = parent >= -1
    dur = (nodes["end"] - nodes["start"]).to_numpy()
    n = len(nodes)
    child_sum = np.bincount(parent[kept & (parent >= 0)], weights=dur[kept & (parent >= 0)],
                            minlength=n) if n else np.zeros(0)
    own = runtime_times(rt, nodes)[nodes["runtimes_of"].to_numpy()]
    self_host = dur - child_sum - own[:, 0]
    device_total, tc_total = own[:, 1].copy(), own[:, 2].copy()
    op_type = nodes["op_type"].to_numpy(bool)
    eligible = nodes["name"].isin(TC_ELIGIBLE_OPS).to_numpy(bool) | (own[:, 2] > 0) & op_type
    for level in child_levels(parent, kept):  # children before their parents
        up = parent[level]
        np.add.at(device_total, up, device_total[level])
        np.add.at(tc_total, up, tc_total[level])
        eligible[up[op_type[up] & eligible[level]]] = True
    ops = kept & nodes["is_op"].to_numpy(bool)
    frame = pd.DataFrame({
        "name": nodes["name"].to_numpy(object)[ops],
        "input_shape": _shapes(rt, nodes)[ops] if by_shape else "",
        "call_stack": _stacks(rt, nodes)[ops] if by_stack else "",
        "host_total_us": dur[ops], "host_self_us": self_host[ops],
        "device_total_us": device_total[ops], "device_self_us": own[ops, 1],
        "tc_self": own[ops, 2], "tc_total": tc_total[ops], "tc_eligible": eligible[ops],
    })
    if by_stack:  # the plugin's stack view: calls with a stack only
        frame = frame[frame["call_stack"] != ""]
    keys = ["name"] + ["input_shape"] * by_shape + ["call_stack"] * by_stack
    g = frame.groupby(keys, sort=False)
    out = g[["host_self_us", "host_total_us", "device_self_us", "device_total_us", "tc_self",
             "tc_total"]].sum()
    out["calls"] = g.size()
    out["tc_eligible"] = g["tc_eligible"].first()  # the plugin keeps its first call's flag
    out = out.reset_index()
    out["tc_self_pct"] = np.where(out["device_self_us"] > 0,
                                  100 * out["tc_self"] / out["device_self_us"].where(out["device_self_us"] > 0, 1), 0.0)
    out["tc_total_pct"] = np.where(out["device_total_us"] > 0,
                                   100 * out["tc_total"] / out["device_total_us"].where(out["device_total_us"] > 0, 1), 0.0)
    out.insert(0, "rank", rt.rank)
    out = out.sort_values(["device_self_us", "host_self_us"], ascending=False, kind="stable")
    columns = [c for c in COLUMNS if (c != "input_shape" or by_shape)
               and (c != "call_stack" or by_stack)]
    return out[columns].reset_index(drop=True)


def combine(parts: Mapping[int, pd.DataFrame], group_by: str = "name") -> pd.DataFrame:
    out = pd.concat(list(parts.values()), ignore_index=True)
    if group_by.endswith("_stack") and out.empty:
        warnings.warn(NO_STACKS, stacklevel=3)
    return out
