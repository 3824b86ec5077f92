"""The trace synthesiser: deterministic, realistic Kineto files, and ground truth that HTA 0.5.0 agrees with."""

from __future__ import annotations

import gzip
import json
import re

import pytest

from analysis.errors import ConfigError
from analysis.testing.synthetic import (
    CATEGORIES,
    COMM_STREAM,
    COMPUTE_STREAM,
    SynthConfig,
    generate,
    main,
    write_traces,
)

SMALL = SynthConfig(ranks=2, steps=3, seed=0, kernels_per_step=40, slow_rank=1)


@pytest.fixture(scope="module")
def small_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("synth")
    write_traces(SMALL, out)
    return out


@pytest.fixture(scope="module")
def small_job():
    return generate(SMALL)


def _hta(trace_dir, include_last_step):
    from hta_oracle import hta_analysis  # HTA 0.5.0's stored answers (HTA_LIVE=1: live)

    return hta_analysis(str(trace_dir), include_last_step)


@pytest.fixture(scope="module", params=[False, True], ids=["hta_window", "all_steps"])
def hta_run(request, small_dir):
    return request.param, _hta(small_dir, request.param)


def _load(path):
    with gzip.open(path, "rb") as f:
        return f.read()


# ---------------------------------------------------------------- determinism and file structure


def test_same_seed_same_bytes_and_other_seed_differs(tmp_path, small_dir):
    again = write_traces(SMALL, tmp_path / "again")
    assert [p.name for p in again] == ["rank-0.pt.trace.json.gz", "rank-1.pt.trace.json.gz"]
    for p in again:
        assert p.read_bytes() == (small_dir / p.name).read_bytes()
    other = write_traces(SynthConfig(ranks=2, steps=3, seed=1, kernels_per_step=40), tmp_path / "other")
    assert other[0].read_bytes() != (small_dir / other[0].name).read_bytes()


def test_some_ranks_written_as_in_the_whole_job(tmp_path, small_dir):
    """``ranks=``: only those files, each byte-identical to the whole job's (the benchmark's
    64-of-512-rank dataset writes the first 64 ranks of a 512-rank job)."""
    some = write_traces(SMALL, tmp_path, ranks=[1])
    assert [p.name for p in some] == ["rank-1.pt.trace.json.gz"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rank-1.pt.trace.json.gz"]
    assert some[0].read_bytes() == (small_dir / "rank-1.pt.trace.json.gz").read_bytes()


def test_written_file_equals_in_memory_document(small_dir, small_job):
    for rank in (0, 1):
        assert json.loads(_load(small_dir / f"rank-{rank}.pt.trace.json.gz")) == small_job.traces[rank]


def test_header_is_torch_profiler_shaped_with_spaced_rank(small_dir):
    text = _load(small_dir / "rank-1.pt.trace.json.gz").decode()
    assert re.search(r'"rank":\s+(\d+)', text).group(1) == "1"  # what HTA's rank detection reads
    doc = json.loads(text)
    assert list(doc)[:4] == ["schemaVersion", "deviceProperties", "distributedInfo", "traceEvents"]
    info = doc["distributedInfo"]
    assert (info["backend"], info["rank"], info["world_size"], info["pg_count"]) == ("nccl", 1, 2, 1)
    assert info["pg_config"][0]["ranks"] == [0, 1]
    assert doc["displayTimeUnit"] == "ms" and isinstance(doc["baseTimeNanoseconds"], int)


def test_events_have_kineto_categories_flows_and_collective_args(small_job):
    events = small_job.traces[0]["traceEvents"]
    cats = {e.get("cat") for e in events if e["ph"] == "X"}
    assert {"cpu_op", "user_annotation", "cuda_runtime", "kernel", "gpu_memcpy", "gpu_memset"} <= cats
    runtime = {e["name"] for e in events if e.get("cat") == "cuda_runtime"}
    assert runtime == {"cudaLaunchKernel", "cudaMemcpyAsync", "cudaMemsetAsync", "cudaStreamSynchronize"}
    gpu = [e for e in events if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
    starts = {e["id"]: e for e in events if e["ph"] == "s"}
    finishes = {e["id"]: e for e in events if e["ph"] == "f"}
    for g in gpu:  # one ac2g flow per launch, id = correlation, finishing on the GPU event
        corr = g["args"]["correlation"]
        assert finishes[corr]["ts"] == g["ts"] and finishes[corr]["tid"] == g["args"]["stream"]
        assert corr in starts
    assert {g["args"]["stream"] for g in gpu} == {COMPUTE_STREAM, COMM_STREAM}
    comms = [e for e in events if e.get("name") == "record_param_comms"]
    assert comms and all(
        {"Collective name", "In msg nelems", "Out msg nelems", "dtype", "Group size",
         "Process Group Name", "Process Group Ranks"} <= set(e["args"]) for e in comms
    )
    nccl = [g for g in gpu if g["name"].startswith("ncclDevKernel_AllReduce")]
    assert len(nccl) == len(comms) and all(g["args"]["stream"] == COMM_STREAM for g in nccl)
    assert {e["name"] for e in events if e["ph"] == "M"} >= {"process_name", "thread_name"}
    assert all(isinstance(e["ts"], int) for e in events if "ts" in e)


def test_last_profiler_step_is_partial(small_job):
    steps = small_job.truth(0, include_last_step=True).steps
    assert [s[0] for s in steps] == [10, 11, 12, 13]
    assert steps[-1][2] < min(d for _, _, d in steps[:-1])
    assert small_job.truth[0].steps == steps[:-1]  # HTA's default window drops it


def test_ns_resolution_writes_three_decimals_exactly(tmp_path):
    cfg = SynthConfig(ranks=1, steps=2, kernels_per_step=10, slow_rank=None, ns_resolution=True)
    text = _load(write_traces(cfg, tmp_path)[0]).decode()
    stamps = re.findall(r'"ts":([0-9.]+)', text)
    assert stamps and all(re.fullmatch(r"\d{16}\.\d{3}", s) for s in stamps)
    assert any(not s.endswith("000") for s in stamps)
    # the ground truth is exact in ns: its kernel_time is the written text's difference
    doc = json.loads(text, parse_float=lambda f: int(f.replace(".", "")))  # µs with 3 decimals → ns
    spans = [(e["ts"], e["ts"] + e["dur"]) for e in doc["traceEvents"]
             if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
    truth = generate(cfg).truth(0, include_last_step=True)
    assert truth.kernel_time * 1000 == max(e for _, e in spans) - min(s for s, _ in spans)


def test_events_per_rank_scales_the_trace():
    job = generate(SynthConfig(ranks=1, steps=4, slow_rank=None, events_per_rank=40_000))
    assert 30_000 < len(job.traces[0]["traceEvents"]) < 50_000


def test_invalid_config_raises_config_error():
    with pytest.raises(ConfigError, match="slow_rank=5"):
        SynthConfig(ranks=2, slow_rank=5)
    with pytest.raises(ConfigError, match="events_per_rank"):
        SynthConfig(events_per_rank=10)


def test_cli_writes_traces_and_summarises(tmp_path, capsys):
    main([str(tmp_path), "--ranks", "2", "--steps", "2", "--kernels-per-step", "12"])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rank-0.pt.trace.json.gz", "rank-1.pt.trace.json.gz"]
    out = capsys.readouterr().out
    assert out.count("\n") == 1 and "wrote 2 traces" in out


# ---------------------------------------------------------------- ground truth, self-consistency


@pytest.mark.parametrize("include_last_step", [False, True])
def test_temporal_truth_adds_up(small_job, include_last_step):
    for rank in (0, 1):
        t = small_job.truth(rank, include_last_step)
        assert t.idle + t.compute + t.non_compute == t.kernel_time
        assert t.busy + t.idle == t.kernel_time
        assert 0 < t.compute < t.busy and t.non_compute > 0
        assert 0 < t.comm_comp_overlap_pctg < 100
        assert sum(t.kernel_type_sums.values()) == sum(s[1] for s in t.kernel_stats.values())


def test_idle_gaps_cover_all_categories_with_clear_margins(small_job):
    for rank in (0, 1):
        t = small_job.truth[rank]
        assert {g.category for g in t.idle_gaps} == set(CATEGORIES)
        for g in t.idle_gaps:
            assert abs(g.runtime_ts - g.prev_end) >= 10  # never near HTA's host-wait boundary
            if g.category == "host_wait":
                assert g.runtime_ts > g.prev_end
            else:
                assert g.gap <= 20 if g.category == "kernel_wait" else g.gap >= 40
        totals = t.idle_by_category()
        assert sum(n for _, n in totals.values()) == len(t.idle_gaps)


def test_slow_rank_is_slower(small_job):
    fast, slow = small_job.truth[0], small_job.truth[1]
    assert slow.compute > 1.3 * fast.compute
    assert min(d for _, _, d in slow.steps) > max(d for _, _, d in fast.steps)


def test_launch_truth_is_per_gpu_event(small_job):
    t = small_job.truth(0, include_last_step=True)
    n_gpu = sum(1 for e in small_job.traces[0]["traceEvents"]
                if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset"))
    assert len(t.launches) == n_gpu == len({c for c, *_ in t.launches})
    assert all(delay >= 0 and cpu > 0 and gpu > 0 for _, cpu, gpu, delay in t.launches)


# ---------------------------------------------------------------- cross-check against HTA 0.5.0


def test_hta_loads_the_ranks(hta_run):
    _, ta = hta_run
    assert ta.t.get_ranks() == [0, 1]


def test_hta_temporal_breakdown_equals_truth(hta_run, small_job):
    include_last, ta = hta_run
    df = ta.get_temporal_breakdown(visualize=False).set_index("rank")
    for rank in (0, 1):
        t = small_job.truth(rank, include_last)
        row = df.loc[rank]
        assert (row["idle_time(us)"], row["compute_time(us)"], row["non_compute_time(us)"],
                row["kernel_time(us)"]) == (t.idle, t.compute, t.non_compute, t.kernel_time)


def test_hta_comm_comp_overlap_equals_truth(hta_run, small_job):
    include_last, ta = hta_run
    df = ta.get_comm_comp_overlap(visualize=False).set_index("rank")
    for rank in (0, 1):
        assert df.loc[rank, "comp_comm_overlap_pctg"] == round(small_job.truth(rank, include_last).comm_comp_overlap_pctg, 2)


def test_hta_idle_time_breakdown_equals_truth(hta_run, small_job):
    include_last, ta = hta_run
    df, _ = ta.get_idle_time_breakdown(ranks=[0, 1], visualize=False)
    got = {(r.rank, r.stream, r.idle_category): r.idle_time for r in df.itertuples()}
    want = {(rank, s, c): round(total, 2)
            for rank in (0, 1)
            for (s, c), (total, n) in small_job.truth(rank, include_last).idle_by_category().items()
            if n or c == "other"}  # HTA lists "other" for every stream (its first event's empty gap)
    assert got == want


def test_hta_launch_stats_equal_truth(hta_run, small_job):
    include_last, ta = hta_run
    stats = ta.get_cuda_kernel_launch_stats(ranks=[0, 1], visualize=False)
    for rank in (0, 1):
        df = stats[rank]
        got = sorted(zip(df["correlation"], df["cpu_duration"], df["gpu_duration"], df["launch_delay"], strict=True))
        assert got == sorted(small_job.truth(rank, include_last).launches)


def test_hta_kernel_breakdown_equals_truth(hta_run, small_job):
    include_last, ta = hta_run
    # num_kernels above the number of names: HTA's collapse of the kept rows does not apply
    _, by_name = ta.get_gpu_kernel_breakdown(visualize=False, duration_ratio=1.0, num_kernels=100)
    got = {(r["rank"], r["name"]): (r["sum (us)"], r["max (us)"], r["min (us)"], r["mean (us)"], r["stddev"])
           for r in by_name.to_dict("records")}
    want = {(rank, name): (s_, mx, mn, mean, std)
            for rank in (0, 1)
            for name, (_, s_, mx, mn, mean, std) in small_job.truth(rank, include_last).kernel_stats.items()}
    assert got.keys() == want.keys()
    for key, values in want.items():
        assert got[key] == pytest.approx(values, rel=1e-12), key
    for rank in (0, 1):
        per_type = by_name[by_name["rank"] == rank].groupby("kernel_type")["sum (us)"].sum().to_dict()
        assert per_type == small_job.truth(rank, include_last).kernel_type_sums


def test_bundled_sample_traces_are_eight_ranks_with_slow_rank_1(sample_traces_dir):
    files = sorted(sample_traces_dir.glob("rank-*.pt.trace.json.gz"))
    assert [f.name for f in files] == [f"rank-{r}.pt.trace.json.gz" for r in range(8)]
    step_durations = {}
    for rank, path in enumerate(files):
        doc = json.loads(_load(path))
        assert (doc["distributedInfo"]["rank"], doc["distributedInfo"]["world_size"]) == (rank, 8)
        steps = [e["dur"] for e in doc["traceEvents"] if e.get("name", "").startswith("ProfilerStep#")]
        step_durations[rank] = sum(steps[:-1])  # the last step is partial
    assert max(step_durations, key=step_durations.get) == 1
