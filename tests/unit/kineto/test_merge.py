"""The merged multi-rank trace: every event once, flows intact, Perfetto's conventions, read-back."""

from __future__ import annotations

import gzip
import json
import warnings
from collections import Counter

import pandas as pd
import pytest

from analysis.errors import ConfigError
from analysis.kineto.loader import load_trace
from analysis.kineto.merge import FLOW_ID_STRIDE, PID_STRIDE, merge_traces, read_merged_trace
from analysis.metrics.gpu_time.temporal_breakdown import temporal_breakdown_rank
from analysis.testing import health_traces as ht
from analysis.testing.synthetic import SynthConfig, write_traces


@pytest.fixture(scope="module")
def job(tmp_path_factory):
    d = tmp_path_factory.mktemp("merge")
    write_traces(SynthConfig(ranks=3, steps=3, kernels_per_step=10, ns_resolution=True), d / "in")
    trace = load_trace(d / "in", use_cache=False, progress=False, max_workers=1)
    return d, trace, {r: rt.meta.source for r, rt in trace.items()}


def _doc(path):
    return json.loads(gzip.decompress(path.read_bytes()))


def _source_events(source):
    return json.loads(gzip.decompress(open(source, "rb").read()))["traceEvents"]


def _key(e):
    """An event without the fields the merge rewrites (pid, flow id), as a hashable key."""
    return json.dumps({k: v for k, v in e.items() if k not in ("pid", "id")}, sort_keys=True)


def test_every_event_preserved_once(job, tmp_path):
    _, trace, sources = job
    merge_traces(sources, tmp_path / "m.json.gz")
    merged = _doc(tmp_path / "m.json.gz")["traceEvents"]
    merged_keys = Counter(_key(e) for e in merged if e["name"] not in ("process_name",
                                                                          "process_sort_index"))
    source_keys = Counter(
        _key(e) for r in sources for e in _source_events(sources[r])
        if e.get("name") not in ("process_name", "process_sort_index", "process_labels")
    )
    assert merged_keys == source_keys


def test_flows_stay_paired_within_their_rank(job, tmp_path):
    _, _, sources = job
    merge_traces(sources, tmp_path / "m.json.gz")
    flows = [e for e in _doc(tmp_path / "m.json.gz")["traceEvents"] if e["ph"] in ("s", "f")]
    by_id: dict[int, list] = {}
    for e in flows:
        by_id.setdefault(e["id"], []).append(e)
    assert len(by_id) == sum(
        len([e for e in _source_events(s) if e.get("ph") == "s"]) for s in sources.values()
    )
    for flow_id, pair in by_id.items():
        assert sorted(e["ph"] for e in pair) == ["f", "s"]
        rank = flow_id // FLOW_ID_STRIDE - 1
        assert {e["pid"] // PID_STRIDE for e in pair} == {rank}


def test_perfetto_conventions(job, tmp_path):
    _, _, sources = job
    merge_traces(sources, tmp_path / "m.json.gz")
    doc = _doc(tmp_path / "m.json.gz")
    assert doc["displayTimeUnit"] == "ms"
    events = doc["traceEvents"]
    pids = {e["pid"] for e in events}
    assert all(isinstance(p, int) for p in pids)
    names = {e["pid"]: e["args"]["name"] for e in events if e["name"] == "process_name"}
    assert set(names) == pids  # every process is named
    assert {e["pid"] for e in events if e["name"] == "process_sort_index"} == pids
    for pid, name in names.items():
        assert name.startswith(f"rank {pid // PID_STRIDE} · ")
    assert {"rank 0 · CPU", "rank 0 · GPU 0", "rank 2 · GPU 2"} <= set(names.values())


def test_reads_back_with_identical_analyses(job, tmp_path):
    _, trace, sources = job
    merge_traces(sources, tmp_path / "m.json.gz")
    back = read_merged_trace((tmp_path / "m.json.gz").read_bytes())
    assert back.rank_list() == trace.rank_list()
    for r in trace:
        for table in ("events", "flows", "collectives"):
            pd.testing.assert_frame_equal(
                getattr(back[r], table).reset_index(drop=True),
                getattr(trace[r], table).reset_index(drop=True),
            )
        assert back[r].meta.distributed_info == trace[r].meta.distributed_info
        pd.testing.assert_frame_equal(temporal_breakdown_rank(back[r]),
                                      temporal_breakdown_rank(trace[r]))


def test_filters(job, tmp_path):
    _, trace, sources = job
    merge_traces(sources, tmp_path / "r.json.gz", ranks=[2])
    assert {e["pid"] // PID_STRIDE for e in _doc(tmp_path / "r.json.gz")["traceEvents"]} == {2}

    merge_traces(sources, tmp_path / "s.json.gz", steps=[11])
    back = read_merged_trace((tmp_path / "s.json.gz").read_bytes())
    for r in trace:
        steps = back[r].profiler_steps()
        assert steps["step"].tolist() == [11]
        # every GPU event kept was launched by a kept runtime call, and all of them are kept
        ev = back[r].events
        gpu = ev[ev["stream"] >= 0]
        cpu_corr = set(ev.loc[ev["cat"] == "cuda_runtime", "correlation"])
        assert len(gpu) > 0 and set(gpu["correlation"]) <= cpu_corr
        assert len(back[r].flows) == 2 * len(gpu)

    merge_traces(sources, tmp_path / "g.json.gz", gpu_only=True)
    doc = _doc(tmp_path / "g.json.gz")
    names = {e["args"]["name"] for e in doc["traceEvents"] if e["name"] == "process_name"}
    assert names == {f"rank {r} · GPU {r}" for r in trace}
    assert not [e for e in doc["traceEvents"] if e["ph"] in ("s", "f")]


def test_align_on_first_collective(tmp_path):
    ht.write_job(ht.faulty_job("clock_skew"), tmp_path / "in")  # rank 1 is 5000 µs ahead
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trace = load_trace(tmp_path / "in", use_cache=False, progress=False, max_workers=1)
    sources = {r: rt.meta.source for r, rt in trace.items()}
    done = merge_traces(sources, tmp_path / "a.json.gz", align="first_collective")
    assert [d.shift_ns for d in done] == [0, -5_000_000]
    back = read_merged_trace((tmp_path / "a.json.gz").read_bytes())
    starts = [rt.events.loc[rt.events["name"] == ht.ALLREDUCE, "ts"].min() for rt in back.values()]
    assert starts[0] == starts[1]


def test_bad_options(job, tmp_path):
    _, _, sources = job
    with pytest.raises(ConfigError, match=r"ranks \[9\]"):
        merge_traces(sources, tmp_path / "x.json.gz", ranks=[9])
    with pytest.raises(ConfigError, match="align"):
        merge_traces(sources, tmp_path / "x.json.gz", align="start")
    # steps=3, "3", ["3"] and [] were a TypeError or "matched no ProfilerStep"; gpu_only="yes" passed
    for steps in (3, "3", ["3"], []):
        with pytest.raises(ConfigError, match="steps must be"):
            merge_traces(sources, tmp_path / "x.json.gz", steps=steps)
    with pytest.raises(ConfigError, match="gpu_only"):
        merge_traces(sources, tmp_path / "x.json.gz", gpu_only="yes")


def test_a_rank_named_twice_is_merged_once(job, tmp_path):
    """``--ranks 0,0`` wrote rank 0 once but said "2 ranks" and counted its events twice."""
    _, _, sources = job
    done = merge_traces(sources, tmp_path / "x.json.gz", ranks=[0, 0])
    assert [d.rank for d in done] == [0]


def test_cpu_side_triton_launches_are_not_gpu_events(tmp_path):
    """torch.compile records its Triton launches as ``cpu_op`` events carrying ``"stream": 0``:
    they were GPU events to the merge, so --gpu-only kept the whole CPU process (200,519 events
    instead of 8,073 on a real MI300X SD3.5 trace), --steps dropped them and the CPU process was
    named after a GPU."""
    doc = ht.healthy_job(ranks=1)[0]
    cpu_pid = next(e["pid"] for e in doc["traceEvents"] if e.get("cat") == "cuda_runtime")
    step = next(e for e in doc["traceEvents"] if str(e.get("name", "")).startswith("ProfilerStep#"))
    doc["traceEvents"].append({"ph": "X", "cat": "cpu_op", "name": "triton_poi_fused_add_0",
                               "pid": cpu_pid, "tid": step["tid"], "ts": step["ts"] + 1,
                               "dur": 2, "args": {"stream": 0, "grid": [1, 1, 1]}})
    ht.write_job({0: doc}, tmp_path / "in")
    sources = {0: str(tmp_path / "in" / "rank-0.pt.trace.json")}
    merge_traces(sources, tmp_path / "gpu.json.gz", gpu_only=True)
    kept = _doc(tmp_path / "gpu.json.gz")["traceEvents"]
    assert not any(e.get("name") == "triton_poi_fused_add_0" for e in kept)
    assert {e.get("cat") for e in kept if e.get("ph") == "X"} <= {
        "kernel", "gpu_memcpy", "gpu_memset", "cuda_sync", "gpu_user_annotation"}
    step_no = int(step["name"].split("#")[1])
    merge_traces(sources, tmp_path / "step.json.gz", steps=[step_no])
    in_step = _doc(tmp_path / "step.json.gz")["traceEvents"]
    assert any(e.get("name") == "triton_poi_fused_add_0" for e in in_step)
    names = {e["pid"]: e["args"]["name"] for e in in_step if e.get("name") == "process_name"}
    assert all("GPU" not in n for pid, n in names.items() if pid % PID_STRIDE == cpu_pid % PID_STRIDE)


def test_a_merged_file_opened_as_a_trace_says_so(job, tmp_path):
    """Opened directly, a merged trace is one rank holding every rank's events: said at load."""
    _, _, sources = job
    merge_traces(sources, tmp_path / "all.json.gz")
    with pytest.warns(UserWarning, match="a merged trace of 3 ranks"):
        load_trace(str(tmp_path / "all.json.gz"), use_cache=False, progress=False)


def test_facade_export(tmp_path):
    from analysis.api import TraceAnalysis

    ht.write_job(ht.healthy_job(ranks=2), tmp_path / "in")
    ta = TraceAnalysis(tmp_path / "in", use_cache=False, progress=False)
    out = ta.export_merged_trace(tmp_path / "all.json.gz", ranks=[1], gpu_only=True)
    names = [e["args"]["name"] for e in _doc(tmp_path / "all.json.gz")["traceEvents"]
             if e["name"] == "process_name"]
    assert out == str(tmp_path / "all.json.gz") and names == ["rank 1 · GPU 0"]


def test_step_filter_ignores_the_gpu_side_copy_of_a_step(tmp_path):
    job = ht.healthy_job(ranks=1)
    # Kineto's GPU-side copy of ProfilerStep#2 runs late, over step 3's CPU events
    job[0]["traceEvents"].append({"ph": "X", "cat": "gpu_user_annotation", "name": "ProfilerStep#2",
                                  "pid": ht.GPU_PID, "tid": 7, "ts": ht.T0_US + 1500, "dur": 900})
    ht.write_job(job, tmp_path / "in")
    merge_traces({0: str(tmp_path / "in" / "rank-0.pt.trace.json")}, tmp_path / "s.json.gz",
                 steps=[2])
    back = read_merged_trace((tmp_path / "s.json.gz").read_bytes())[0]
    assert back.profiler_steps()["step"].tolist() == [2]
    launches = back.events[back.events["cat"] == "cuda_runtime"]
    assert len(launches) == 3  # step 2's three launches only


def test_an_output_not_named_gz_is_plain_json(job, tmp_path):
    """Gzip bytes were written whatever the name: ``all.json`` failed ``json.load``."""
    _, _, sources = job
    merge_traces(sources, tmp_path / "all.json", ranks=[0])
    plain = (tmp_path / "all.json").read_bytes()
    assert plain[:1] == b"{" and len(json.loads(plain)["traceEvents"]) > 0
    merge_traces(sources, tmp_path / "all.json.gz", ranks=[0])
    assert json.loads(gzip.decompress((tmp_path / "all.json.gz").read_bytes())) == json.loads(plain)
    assert list(read_merged_trace(plain).ranks) == [0]


def test_flow_ids_of_high_ranks_stay_exact_as_doubles(job, tmp_path):
    """Flow ids are offset by the rank's position among those merged, not by its number: ranks
    9500 and 9501 of a large job (their number times 10**12 passed 2**53, which JSON readers round)
    keep exact ids, and read back with their own numbers and the same analyses."""
    _, trace, sources = job
    high = {9500: sources[0], 9501: sources[1]}
    merge_traces(high, tmp_path / "m.json.gz")
    flows = [e for e in _doc(tmp_path / "m.json.gz")["traceEvents"] if e["ph"] in ("s", "f")]
    assert flows and max(e["id"] for e in flows) < 2**53
    back = read_merged_trace((tmp_path / "m.json.gz").read_bytes())
    assert sorted(back.ranks) == [9500, 9501]
    for new, old in ((9500, 0), (9501, 1)):
        ours = temporal_breakdown_rank(back.ranks[new])
        theirs = temporal_breakdown_rank(trace.ranks[old])
        assert ours.drop(columns="rank").equals(theirs.drop(columns="rank"))


def test_another_profilers_file_is_refused_by_name(tmp_path):
    """An XPlane, nsys or rocprofv3 file (read by report, summary and compare) was refused as
    'not a Kineto trace document (JSON is malformed ...)': it is a format the merge cannot
    write, said so."""
    from analysis.errors import FormatNotSupportedError
    from analysis.testing.foreign import XEvent, XLine, xplane, xspace_bytes

    path = tmp_path / "run.xplane.pb"
    path.write_bytes(xspace_bytes([xplane("/device:GPU:0", [
        XLine(1, "Stream #1(Kernel)", timestamp_ns=0, events=[XEvent("k", 10, 5)])])]))
    with pytest.raises(FormatNotSupportedError, match=r"merge is not available for XPlane "
                                                      r"profiles \(.*run\.xplane\.pb\)"):
        merge_traces({0: str(path)}, tmp_path / "m.json.gz")
