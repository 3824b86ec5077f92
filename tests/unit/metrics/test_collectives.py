"""Collectives, stragglers and the per-step breakdown against exact ground truth (the collective
synthesiser), plus the real GPU traces (args on the kernel, kernels only, no communication)."""

from __future__ import annotations

import gzip
import json
import warnings

import numpy as np
import pandas as pd
import pytest
from trace_helpers import load_dir

from analysis.errors import CollectiveMismatchWarning
from analysis.kineto.model import Trace
from analysis.kineto.parse import parse_trace_bytes
from analysis.kineto.window import profiler_step_window
from analysis.metrics.distributed import collectives as C
from analysis.metrics.distributed import step_breakdown as B
from analysis.metrics.distributed import stragglers as S
from analysis.testing.collectives import CollectiveJobConfig, generate_collective_job


def load_job(job, tmp_path) -> Trace:
    ranks = {}
    for path in job.write(tmp_path):
        rt = parse_trace_bytes(path.read_bytes(), str(path))
        ranks[rt.rank] = rt
    return profiler_step_window(Trace(ranks, source=str(tmp_path)))


def run(metric, trace: Trace, **kw):
    rank_step = C.collectives_rank if metric is not B else B.step_breakdown_rank
    return metric.combine({r: rank_step(trace[r], **kw) for r in trace})


def assert_frame_equals_truth(got: pd.DataFrame, truth: list[dict]) -> None:
    expected = pd.DataFrame(truth)
    got = got[list(expected.columns)].reset_index(drop=True)
    assert len(got) == len(expected)
    for column in expected.columns:
        a, b = got[column].to_numpy(), expected[column].to_numpy()
        if a.dtype.kind == "f" or b.dtype.kind == "f":
            np.testing.assert_allclose(a.astype(float), b.astype(float), rtol=1e-12, atol=1e-9,
                                       equal_nan=True, err_msg=column)
        else:
            assert a.tolist() == b.tolist(), column


CONFIGS = {
    "args on kernel, Seq": CollectiveJobConfig(),
    "args on record_param_comms, by order": CollectiveJobConfig(describe="record_param_comms",
                                                                 with_seq=False),
    "no args (kernels only)": CollectiveJobConfig(describe="none"),
    # torch < 2.2: no collective args, the size on ProcessGroupNCCL's nccl:* annotation (the
    # 2023 DLRM traces of facebookresearch/param: every bytes and bandwidth NaN before)
    "nccl:* annotations with shapes (torch < 2.2)": CollectiveJobConfig(describe="nccl_annotation"),
    "DeepEP kernels": CollectiveJobConfig(deepep=True),
    "straggler busy computing, 6 ranks": CollectiveJobConfig(ranks=6, straggler=5, cause="compute"),
}


@pytest.mark.parametrize("config", CONFIGS.values(), ids=CONFIGS.keys())
def test_every_column_matches_the_truth(config, tmp_path):
    job = generate_collective_job(config)
    trace = load_job(job, tmp_path)
    got = run(C, trace)
    expected_columns = {"collective", "type", "rank", "bytes", "group_size", "start_us", "end_us",
                        "skew_us", "wait_us", "transfer_us", "algbw_gbps", "busbw_gbps",
                        "exposed_us"}
    assert expected_columns <= set(got.columns)
    assert_frame_equals_truth(got, job.collectives)
    assert_frame_equals_truth(S.stragglers(got), job.stragglers)
    assert_frame_equals_truth(run(B, trace), job.steps)


def test_the_straggler_and_why(tmp_path):
    host = S.stragglers(run(C, load_job(generate_collective_job(CollectiveJobConfig()), tmp_path / "h")))
    assert host.loc[0, "rank"] == 2
    assert host.loc[0, "why"].startswith("host_wait")
    busy = S.stragglers(run(C, load_job(generate_collective_job(
        CollectiveJobConfig(cause="compute")), tmp_path / "c")))
    assert busy.loc[0, "rank"] == 2
    assert busy.loc[0, "why"].startswith("busy")


def test_mismatched_counts_are_reported_not_paired(tmp_path):
    job = generate_collective_job(CollectiveJobConfig(with_seq=False))
    trace = load_job(job, tmp_path)
    parts = {r: C.collectives_rank(trace[r]) for r in trace}
    # rank 3 lost one all-reduce (e.g. the profiler dropped it): pairing by order would be wrong
    p3 = parts[3]
    parts[3] = p3.drop(p3.index[p3["type"] == "all_reduce"][0])
    with pytest.warns(CollectiveMismatchWarning, match=r"all_reduce.*process group 0.*3: 2"):
        got = C.combine(parts)
    assert "all_reduce" not in set(got["type"])
    assert {"all_gather", "all_to_all"} <= set(got["type"])


def test_sequence_numbers_match_despite_missing_rows(tmp_path):
    job = generate_collective_job(CollectiveJobConfig())
    trace = load_job(job, tmp_path)
    parts = {r: C.collectives_rank(trace[r]) for r in trace}
    p3 = parts[3]
    parts[3] = p3.drop(p3.index[p3["type"] == "all_reduce"][0])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = C.combine(parts)
    full = run(C, trace)
    # the instance rank 3 lost has three ranks; every other row is unchanged
    assert len(got) == len(full) - 1
    first = got[got["type"] == "all_reduce"].groupby("collective")["rank"].size()
    assert sorted(first.tolist())[0] == 3


def test_summary_buckets_and_percentiles(tmp_path):
    got = run(C, load_job(generate_collective_job(CollectiveJobConfig()), tmp_path))
    summary = C.summary(got)
    row = summary[summary["type"] == "all_reduce"].iloc[0]
    assert (row["bucket"], row["bucket_bytes"], row["group"]) == ("4 MiB", 4 << 20, "0")
    assert row["count"] == 3 and row["ranks"] == 4
    ar = got[got["type"] == "all_reduce"]
    assert row["total_us"] == pytest.approx(ar["duration_us"].sum())
    assert row["busbw_median_gbps"] == pytest.approx(ar["busbw_gbps"].median())
    skews = ar.drop_duplicates("collective")["skew_us"]  # 409, 9, 409 (two delayed)
    assert row["skew_p95_us"] == pytest.approx(np.percentile(skews, 95))
    pairs = summary[summary["type"] == "all_gather"]
    assert sorted(pairs["group"]) == ["1", "2"]


def test_collective_types_and_dtypes():
    assert C.collective_type("ncclDevKernel_AllReduce_Sum_f32_RING_LL") == "all_reduce"
    # custom all-reduce kernels (vLLM / SGLang, symmetric memory) were "reduce": 1,449 rows of
    # two real vLLM TP4 traces, with a bus-bandwidth factor of 1 instead of 2(n-1)/n
    for name in ("void vllm::cross_device_reduce_1stage<__nv_bfloat16, 4>(vllm::RankData*)",
                 "cross_device_reduce_2stage", "one_shot_all_reduce", "multimem_one_shot_reduce"):
        assert C.collective_type(name) == "all_reduce", name
    assert C.collective_type("ncclDevKernel_Reduce_Sum_f32_RING_LL") == "reduce"
    assert C.collective_type("_allgather_base") == "all_gather"
    assert C.collective_type("reduce_scatter_tensor_coalesced") == "reduce_scatter"
    assert C.collective_type("ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t") == "send_recv"
    assert C.collective_type("ncclDevKernel_Broadcast_RING_LL") == "broadcast"
    assert C.collective_type("ncclKernel_Reduce_RING_LL_Sum_float") == "reduce"
    assert C.collective_type("c10d::alltoall_base_"[6:]) == "all_to_all"
    assert C.dtype_bytes("BFloat16") == 2 and C.dtype_bytes("unsigned char") == 1
    assert np.isnan(C.dtype_bytes("mystery"))


# --- real traces -------------------------------------------------------------------------------


def test_nccl_args_on_kernels_of_a_real_trace(hta_traces_dir):
    trace = profiler_step_window(load_dir(hta_traces_dir / "nccl_parser_config"))
    got = run(C, trace)
    rt = trace[0]
    kernels = rt.events[rt.events["name"].astype(str).str.startswith("nccl")
                        & (rt.events["cat"] == "kernel")]
    assert len(got) == len(kernels) == 14
    assert set(got["type"]) == {"all_reduce", "broadcast"}
    assert (got["group"] == "0").all() and (got["group_size"] == 2).all()
    # the first kernel's own args: In msg nelems 53120 floats
    first = rt.collectives.set_index("event").loc[kernels.index[0]]
    assert got.loc[0, "bytes"] == first["in_nelems"] * 4
    np.testing.assert_allclose(got["duration_us"], kernels["dur"].to_numpy() / 1e3)
    # one rank loaded: skew and wait are unknown (NaN, not 0), the transfer is the whole kernel
    assert got["skew_us"].isna().all() and got["wait_us"].isna().all()
    assert (got["transfer_us"] == got["duration_us"]).all()
    table = S.stragglers(got)  # nothing to compare with: unknown, not zero
    assert table[["times_last", "wait_caused_us", "mean_lateness_us"]].isna().all().all()
    assert C.summary(got)["skew_p95_us"].isna().all()
    np.testing.assert_allclose(got["algbw_gbps"], got["bytes"] / (got["duration_us"] * 1e3))


def test_kernels_only_on_two_real_ranks(hta_traces_dir):
    trace = profiler_step_window(load_dir(hta_traces_dir / "trace_filter"))
    got = run(C, trace)
    # every kernel is ncclKernel_SendRecv and the 2023 record_param_comms ops carry no args: the
    # type is that of the c10d operator that launched the kernel (it was send_recv for all)
    assert set(got["name"].str.split("_RING").str[0]) == {"ncclKernel_SendRecv"}
    assert got.groupby("type").size().to_dict() == {"all_gather": 2, "all_reduce": 4, "all_to_all": 4}
    # the size is on ProcessGroupNCCL's nccl:* annotation around the launch (all NaN before):
    # an independent reading of the files, kernel by kernel, in start order
    expected = []
    for rank in (0, 1):
        doc = json.loads(gzip.decompress((hta_traces_dir / "trace_filter" /
                                          f"sampled_rank-{rank}.json.gz").read_bytes()))
        ev = doc["traceEvents"]
        first = min(e["ts"] for e in ev if e.get("name") == "ProfilerStep#551")
        end = max(e["ts"] + e["dur"] for e in ev if e.get("name") == "ProfilerStep#551")
        annotations = [e for e in ev if e.get("name", "").startswith("nccl:")]
        launches = {e["args"]["correlation"]: e for e in ev
                    if e.get("cat") == "cuda_runtime" and "correlation" in e.get("args", {})}
        size = {"float": 4, "long": 8, "int": 4, "unsigned char": 1, "signed char": 1}
        for k in sorted((e for e in ev if e.get("cat") == "kernel"
                         and e["name"].startswith("ncclKernel")), key=lambda e: e["ts"]):
            call = launches[k["args"]["correlation"]]
            if not first <= call["ts"] < end:
                continue
            (a,) = [a for a in annotations if a["tid"] == call["tid"]
                    and a["ts"] <= call["ts"] <= a["ts"] + a["dur"]]
            expected.append((rank, float(np.prod(a["args"]["Input Dims"][0]))
                             * size[a["args"]["Input type"][0]]))
    mine = sorted(zip(got["rank"], got["start_us"], got["bytes"], strict=True))
    assert [(r, b) for r, _, b in mine] == expected
    assert all(sorted(g) == [0, 1] for _, g in got.groupby("collective")["rank"])
    for _, inst in got.groupby("collective"):
        starts = inst.set_index("rank")["start_us"]
        # start_us is an absolute epoch µs in float64 (0.25 µs spacing); skew is exact in ns
        assert inst["skew_us"].iloc[0] == pytest.approx(starts.max() - starts.min(), abs=0.5)
    table = S.stragglers(got)
    # each rank's wait is cut at the end of its own kernel: never more than the kernels ran
    waits = got[~got["is_last"]]
    assert 0 < table["wait_caused_us"].sum() <= np.minimum(waits["wait_us"],
                                                           waits["duration_us"]).sum() + 1e-6


@pytest.mark.parametrize("folder", ["critical_path/alexnet", "triton_example", "cpu_only"])
def test_no_communication_gives_empty_tables(hta_traces_dir, folder):
    trace = profiler_step_window(load_dir(hta_traces_dir / folder))
    got = run(C, trace)
    assert got.empty and list(got.columns) == C.COLUMNS
    assert S.stragglers(got).empty
    assert C.summary(got).empty


def test_lateness_inherited_by_an_overlapping_collective_is_not_busy_time():
    """DDP's second bucket starts while the first is still running: it has no idle time of its
    own and inherits the first one's lateness. Counted, that inherited lateness read as "busy"
    and outweighed the real cause (a real 4-rank gloo job whose rank 2 sleeps before backward:
    host 10.5 ms vs busy 22.4 ms). Per step here: rank 1 idles 10 ms on its CPU, then launches
    bucket A 10 ms late; bucket B starts 1 ms later, while A runs, 10 ms late too."""
    rows = []
    for step in range(3):
        t0 = step * 100_000.0
        for name, at, dur in (("A", 0.0, 5_000.0), ("B", 1_000.0, 5_000.0)):
            for rank, late in ((0, 0.0), (1, 10_000.0)):
                rows.append({
                    "collective": step * 2 + (name == "B"), "rank": rank, "step": step,
                    "step_us": 100_000.0, "start_us": t0 + at + late, "duration_us": dur + (
                        10_000.0 if rank == 0 else 0.0),
                    "skew_us": late, "wait_us": 10_000.0 - late, "is_last": rank == 1,
                    "idle_before_us": 10_000.0 if (rank == 1 and name == "A") else 0.0,
                    "launch_late": True,
                })
    table = S.stragglers(pd.DataFrame(rows)).set_index("rank")
    assert table.loc[1, "times_last"] == 6
    assert table.loc[1, "late_host_us"] == pytest.approx(10_000.0)
    assert table.loc[1, "late_busy_us"] == pytest.approx(0.0)
    assert table.loc[1, "why"].startswith("host_wait")
