"""Graph replay traces joined with their capture traces: synthetic ground truth and the shared
vLLM / SGLang traces."""

import gzip
import json
from pathlib import Path

import pytest

from analysis.kineto.cuda_graphs import merge_graph_capture, read_capture_events
from analysis.testing.graph_traces import capture_events, replay_events, write_pair

INFERENCE = Path(__file__).resolve().parents[3] / "../shared/traces/tracelens/inference"


_capture = capture_events
_replay = replay_events


def test_kernels_attributed_to_captured_operators_and_unmatched_launch_counted():
    replay = _replay([3, 2])  # the second launch matches no capture (3 launches captured)
    out, stats = merge_graph_capture(replay, [_capture(["aten::mm", "aten::add", "aten::mm"])])
    assert (stats.graph_launches, stats.matched_launches, stats.unmatched_launches) == (2, 1, 1)
    assert (stats.kernels_attributed, stats.kernels_unattributed) == (3, 2)
    assert "2 kernels" in stats.reasons[0]
    ops = {e["args"]["External id"]: e for e in out if e["cat"] == "cpu_op"}
    calls = {e["args"]["correlation"] for e in out if e["cat"] == "cuda_runtime"}
    attributed = {}
    for k in (e for e in out if e["cat"] == "kernel"):
        op = ops.get(k["args"].get("External id"))
        assert k["args"]["correlation"] in calls
        if op:
            attributed[k["name"]] = (op["name"], op["args"]["Input Dims"])
        else:  # unmatched: still under its graph launch
            assert k["args"]["correlation"] == 501
    assert attributed == {
        "k0": ("aten::mm", [[1, 4], [4, 8]]),
        "k1": ("aten::add", [[2, 4], [4, 8]]),
        "k2": ("aten::mm", [[3, 4], [4, 8]]),
    }
    # the synthetic operators lie inside the graph launch they replace
    for op in ops.values():
        assert 1000 <= op["ts"] and op["ts"] + op["dur"] <= 1050


def test_operator_summary_of_a_replay_with_capture_folder(tmp_path):
    from analysis.api import TraceAnalysis

    (tmp_path / "capture_traces").mkdir()
    (tmp_path / "capture_traces" / "cap.json").write_text(
        json.dumps({"traceEvents": _capture(["aten::mm", "aten::add", "aten::mm"])})
    )
    (tmp_path / "replay.json").write_text(json.dumps({"traceEvents": _replay([3, 3])}))
    summary = TraceAnalysis(trace_files=[str(tmp_path / "replay.json")]).get_operator_summary()
    by_name = summary.groupby("name")["gpu_self_us"].sum()
    assert by_name["aten::mm"] == pytest.approx(2 * (1.0 + 3.0))
    assert by_name["aten::add"] == pytest.approx(2 * 2.0)


@pytest.mark.parametrize(
    "folder,replay",
    [
        ("sglang_decode", "sglang_Qwen3-8B_decode.json.gz"),
        ("vllm_decode_full", "graph_execution.json.gz"),
    ],
)
def test_shared_replay_traces_mostly_attributed(folder, replay):
    base = INFERENCE / folder
    if not (base / replay).exists():
        pytest.skip("shared inference traces absent")
    events = json.load(gzip.open(base / replay))["traceEvents"]
    out, stats = merge_graph_capture(events, read_capture_events(base / "capture_traces"))
    assert stats.unmatched_launches == 0
    total = sum(e["dur"] for e in events if e.get("cat") == "kernel")
    ops = {
        e["args"]["External id"]
        for e in out
        if e.get("cat") == "cpu_op" and e["args"].get("graph_replay")
    }
    attributed = sum(
        e["dur"] for e in out if e.get("cat") == "kernel" and e["args"].get("External id") in ops
    )
    assert attributed / total >= 0.9


def test_without_capture_graph_launches_are_a_named_row(tmp_path):
    from analysis.api import TraceAnalysis

    (tmp_path / "replay.json").write_text(json.dumps({"traceEvents": _replay([3, 2])}))
    summary = TraceAnalysis(trace_files=[str(tmp_path / "replay.json")]).get_operator_summary()
    row = summary.set_index("name").loc["CUDA graph (cudaGraphLaunch)"]
    assert row["calls"] == 2
    assert row["gpu_self_us"] == pytest.approx(1 + 2 + 3 + 1 + 2)


@pytest.mark.parametrize(
    "folder,replay",
    [
        ("sglang_decode", "sglang_Qwen3-8B_decode.json.gz"),
        ("vllm_decode_full", "graph_execution.json.gz"),
    ],
)
def test_per_operator_gpu_time_matches_tracelens(folder, replay):
    """TraceLens's ops_summary.csv (direct kernel time per operator name, summed over its parent
    modules) against our operator summary's gpu_self_us, within 1 % per operator; TraceLens's
    rows for kernels without any operator (named after their launch call) are left out."""
    import csv

    from analysis.api import TraceAnalysis

    base = INFERENCE / folder
    if not (base / replay).exists():
        pytest.skip("shared inference traces absent")
    ref: dict[str, float] = {}
    with open(base / "perf_csvs" / "ops_summary.csv") as f:
        for r in csv.DictReader(f):
            ref[r["name"]] = ref.get(r["name"], 0.0) + float(r["total_direct_kernel_time_sum"])
    summary = TraceAnalysis(trace_files=[str(base / replay)]).get_operator_summary(top=None)
    ours = summary.groupby("name")["gpu_self_us"].sum()
    compared = 0
    for name, want in ref.items():
        if name.endswith("LaunchKernel") or want <= 0:
            continue
        assert ours.get(name, 0.0) == pytest.approx(want, rel=0.01), name
        compared += 1
    assert compared >= 5


def test_unmatched_launch_warns_and_health_reports_it(tmp_path):
    from analysis.api import TraceAnalysis

    (tmp_path / "capture_traces").mkdir()
    (tmp_path / "capture_traces" / "cap.json").write_text(
        json.dumps({"traceEvents": _capture(["aten::mm", "aten::add", "aten::mm"])})
    )
    (tmp_path / "replay.json").write_text(json.dumps({"traceEvents": _replay([3, 2])}))
    with pytest.warns(UserWarning, match="1 of 2 graph launches match no capture"):
        analysis = TraceAnalysis(trace_files={0: str(tmp_path / "replay.json")})
    health = analysis.check()
    hit = health[health["check"] == "graph_capture"].iloc[0]
    assert hit["severity"] == "warning" and hit["message"].startswith("1 of 2 graph launches")
    summary = analysis.get_operator_summary().set_index("name")
    assert summary.loc["CUDA graph (cudaGraphLaunch)", "gpu_self_us"] == pytest.approx(1 + 2)


def test_roofline_sees_the_captured_shapes(tmp_path):
    from analysis.api import TraceAnalysis

    (tmp_path / "capture_traces").mkdir()
    (tmp_path / "capture_traces" / "cap.json").write_text(
        json.dumps({"traceEvents": _capture(["aten::mm", "aten::add", "aten::mm"])})
    )
    (tmp_path / "replay.json").write_text(json.dumps({"traceEvents": _replay([3, 3])}))
    ops = TraceAnalysis(trace_files={0: str(tmp_path / "replay.json")}).get_operator_roofline().ops
    mm = ops[ops["name"] == "aten::mm"]
    shapes = dict(zip(mm["input_dims"], mm["kernel_time_us_sum"], strict=True))
    # launch i of the capture carried Input Dims [[i + 1, 4], [4, 8]]; kernel i lasts i + 1 µs,
    # in each of the two replays
    assert shapes == {"[[1,4],[4,8]]": 2.0, "[[3,4],[4,8]]": 6.0}


def test_trace_metadata_counts_graph_launches(tmp_path):
    from analysis.api import TraceAnalysis

    replay = write_pair(tmp_path / "with", ["aten::mm", "aten::add", "aten::mm"], [3, 2, 3])
    with pytest.warns(UserWarning, match="1 of 3 graph launches"):
        meta = TraceAnalysis(trace_files={0: str(replay)}).get_trace_metadata()
    assert meta[["graph_launches", "graph_launches_unmatched"]].iloc[0].tolist() == [3, 1]
    bare = tmp_path / "bare.json"
    bare.write_text(json.dumps({"traceEvents": replay_events([3, 3])}))
    meta = TraceAnalysis(trace_files={0: str(bare)}).get_trace_metadata()
    assert meta[["graph_launches", "graph_launches_unmatched"]].iloc[0].tolist() == [2, 2]


def test_capture_trace_argument(tmp_path):
    """``capture_trace=`` names the capture (a file or a folder) when it is not beside the replay;
    the parsed cache knows which capture it was built with, and the roofline's shapes (read again
    from the file on demand) come through the same capture."""
    from analysis.api import TraceAnalysis
    from analysis.errors import InputFileError

    write_pair(tmp_path / "pair", ["aten::mm", "aten::add"], [2, 2])
    replay_dir = tmp_path / "replay"
    replay_dir.mkdir()
    replay = replay_dir / "replay.json"
    replay.write_text((tmp_path / "pair" / "replay.json").read_text())
    capture = tmp_path / "pair" / "capture_traces" / "capture.json"
    cache = tmp_path / "cache"

    bare = TraceAnalysis(trace_files={0: str(replay)}, cache_dir=cache).get_operator_summary()
    assert list(bare["name"]) == ["CUDA graph (cudaGraphLaunch)"]
    for given in (capture, capture.parent):  # the file, or its folder
        merged = TraceAnalysis(trace_files={0: str(replay)}, cache_dir=cache,
                               capture_trace=given)
        by_name = merged.get_operator_summary().set_index("name")["gpu_self_us"]
        # launch g's kernel k lasts k + 1 µs: aten::mm runs k0, aten::add k1, in both launches
        assert by_name.to_dict() == pytest.approx({"aten::mm": 2 * 1.0, "aten::add": 2 * 2.0})
        assert merged.full_trace[0].meta.capture_trace == str(given)
        ops = merged.get_operator_roofline().ops
        mm = ops[ops["name"] == "aten::mm"]
        # capture launch 0 (aten::mm) carried Input Dims [[1, 4], [4, 8]]
        assert list(mm["input_dims"]) == ["[[1,4],[4,8]]"]
    # the cache entry of the bare replay is not reused for the merged one, nor the reverse
    again = TraceAnalysis(trace_files={0: str(replay)}, cache_dir=cache).get_operator_summary()
    assert list(again["name"]) == ["CUDA graph (cudaGraphLaunch)"]
    with pytest.raises(InputFileError, match="capture_trace"):
        TraceAnalysis(trace_files={0: str(replay)}, capture_trace=tmp_path / "nowhere.json")


@pytest.mark.parametrize("content", [b"SQLite format 3\x00\xb3\x01", b'{"traceEvents": [',
                                     b"\x1f\x8b\x08\x00cut"])
def test_an_unreadable_capture_trace_is_named(tmp_path, content):
    """A capture that is no Kineto JSON (an nsys export, cut JSON, damaged gzip) raised an
    'unexpected UnicodeDecodeError' blamed on the replay trace: our CorruptTraceError now names
    the capture file."""
    from analysis.api import TraceAnalysis
    from analysis.errors import CorruptTraceError

    write_pair(tmp_path / "pair", ["aten::mm"], [1])
    bad = tmp_path / "capture.json"
    bad.write_bytes(content)
    with pytest.raises(CorruptTraceError, match=r"capture\.json: not a readable CUDA graph "
                                                r"capture trace"):
        TraceAnalysis(trace_files={0: str(tmp_path / "pair" / "replay.json")},
                      capture_trace=bad, use_cache=False)


def test_cli_capture_trace_option(tmp_path):
    from click.testing import CliRunner

    from analysis.cli import main

    write_pair(tmp_path / "pair", ["aten::mm", "aten::add"], [2, 2])
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "replay.json").write_text((tmp_path / "pair" / "replay.json").read_text())
    out = CliRunner().invoke(main, ["check", str(tmp_path / "run"), "-q", "--capture-trace",
                                    str(tmp_path / "pair" / "capture_traces"), "--cache-dir",
                                    str(tmp_path / "cache")], catch_exceptions=False)
    # with the capture the health check finds every launch attributed; without, it warns
    assert "2 graph launches attributed to the operators" in " ".join(out.output.split())
    out = CliRunner().invoke(main, ["check", str(tmp_path / "run"), "-q", "--cache-dir",
                                    str(tmp_path / "cache")], catch_exceptions=False)
    assert "WARNING graph_capture (rank 0): 2 graph launches and their kernels have no operator" \
        in " ".join(out.output.split())


@pytest.mark.parametrize(("names", "kept"), [
    (["k0", "k1", "k2", "kX"], ["aten::mm", "aten::add", "aten::mm"]),  # one more at the end
    (["k0", "kX", "k1", "k2"], ["aten::mm", "aten::mm", "aten::addmm"]),  # one more inside
])
def test_a_captured_launch_without_a_replayed_kernel_is_skipped(names, kept):
    """A capture that names its kernels and has one launch more than the replay (xDiT's Flux on
    MI300X: 1,567 captured launches, 1,566 kernels per replay) aligns by names, in order; the
    launch passed over is skipped and said."""
    ops = ["aten::mm", "aten::add", "aten::mm", "aten::addmm"]
    out, stats = merge_graph_capture(_replay([3, 3]), [_capture(ops, kernels=names)])
    assert (stats.matched_launches, stats.unmatched_launches) == (2, 0)
    assert stats.capture_launches_skipped == 2 and "kX" in stats.skipped[0]
    by_id = {e["args"]["External id"]: e["name"] for e in out if e["cat"] == "cpu_op"}
    first = sorted((k for k in out if k["cat"] == "kernel" and k["ts"] < 2000),
                   key=lambda k: k["ts"])
    assert [by_id[k["args"]["External id"]] for k in first] == kept


def test_a_capture_too_different_still_matches_nothing():
    """Two launches more than 3 kernels (over 1 %, more than one), or a kernel whose name the
    capture does not have: no match, as before."""
    ops = ["aten::mm"] * 5
    _, stats = merge_graph_capture(_replay([3]), [_capture(ops, ["k0", "kX", "k1", "kY", "k2"])])
    assert (stats.matched_launches, stats.capture_launches_skipped) == (0, 0)
    _, stats = merge_graph_capture(_replay([3]), [_capture(ops[:4], ["k0", "k1", "kZ", "kX"])])
    assert (stats.matched_launches, stats.capture_launches_skipped) == (0, 0)


def test_the_skipped_launch_is_a_warning_with_the_load(tmp_path):
    from analysis.api import TraceAnalysis

    (tmp_path / "capture_traces").mkdir()
    (tmp_path / "capture_traces" / "cap.json").write_text(json.dumps({"traceEvents": _capture(
        ["aten::mm", "aten::add", "aten::mm", "aten::addmm"], kernels=["k0", "k1", "k2", "kX"])}))
    (tmp_path / "replay.json").write_text(json.dumps({"traceEvents": _replay([3])}))
    with pytest.warns(UserWarning, match=r"1 launch\(es\) of the capture trace .* skipped .*#3 kX"):
        ta = TraceAnalysis(trace_files={0: str(tmp_path / "replay.json")}, use_cache=False,
                           progress=False)
    summary = ta.get_operator_summary().set_index("name")
    assert summary.loc["aten::mm", "gpu_self_us"] == pytest.approx(1 + 3)  # k0 and k2
    assert "CUDA graph (cudaGraphLaunch)" not in summary.index
    health = ta.check()
    hit = health[health["check"] == "graph_capture"].iloc[0]
    assert hit["severity"] == "info" and "1 captured launch(es) with no kernel" in hit["message"]


def test_a_capture_file_with_several_graphs_is_one_capture_per_segment():
    """vLLM's piecewise mode writes every captured graph (each piece, each batch size) into one
    capture trace, each between its own StreamBeginCapture and StreamEndCapture: each graph
    launch matches its own segment. The file read as one capture matched no launch (a real
    vLLM MI300X pair: 25 of 25 graph launches unmatched, 'capture launch counts: [457]')."""
    first = _capture(["aten::mm", "aten::add", "aten::mm"])
    second = [dict(e, ts=e["ts"] + 1000) for e in _capture(["aten::gelu", "aten::mm"])]
    out, stats = merge_graph_capture(_replay([3, 2, 3]), [first + second])
    assert (stats.matched_launches, stats.unmatched_launches) == (3, 0)
    assert stats.kernels_attributed == 8
    ops = {e["args"]["External id"]: e["name"] for e in out if e["cat"] == "cpu_op"}
    by_launch = {}
    for k in (e for e in out if e["cat"] == "kernel"):
        by_launch.setdefault(round(k["ts"], -3), []).append(ops[k["args"]["External id"]])
    assert list(by_launch.values()) == [["aten::mm", "aten::add", "aten::mm"],
                                        ["aten::gelu", "aten::mm"],
                                        ["aten::mm", "aten::add", "aten::mm"]]


def test_a_graphs_memsets_keep_a_launch_call_after_the_merge(tmp_path):
    """A graph replay also runs memsets/memcpys under its one launch; the capture has no kernel
    launch for them. They keep a launch call (the graph launch's last slot, under no operator):
    before, the launch they pointed at was gone and gpu_events='launched' dropped them as 'the
    tail of an iteration the profiler did not capture'."""
    from analysis.api import TraceAnalysis

    ops = ["aten::mm", "aten::add", "aten::mm"]
    replay = _replay([3])
    replay.append(dict(replay[1], cat="gpu_memset", name="Memset (Device)", ts=1150, dur=4.0))
    out, stats = merge_graph_capture(replay, [_capture(ops)])
    assert stats.matched_launches == 1
    calls = {e["args"]["correlation"]: e for e in out if e["cat"] == "cuda_runtime"}
    (copy,) = [e for e in out if e["cat"] == "gpu_memset"]
    call = calls[copy["args"]["correlation"]]
    assert call["name"] == "cudaGraphLaunch" and "External id" not in call["args"]
    assert 1000 <= call["ts"] and call["ts"] + call["dur"] <= 1050  # inside the graph launch
    assert copy["args"]["correlation"] not in {e["args"]["correlation"] for e in out
                                               if e["cat"] == "kernel"}
    # through the loader: nothing left unlaunched
    (tmp_path / "replay.json").write_text(json.dumps({"traceEvents": replay}))
    (tmp_path / "capture_traces").mkdir()
    (tmp_path / "capture_traces" / "cap.json").write_text(
        json.dumps({"traceEvents": _capture(ops)}))
    ta = TraceAnalysis(trace_files=[str(tmp_path / "replay.json")], use_cache=False,
                       progress=False)
    assert int(ta.run("trace_metadata")["unlaunched_gpu_events"].iloc[0]) == 0


def test_a_replay_in_kinetos_2021_categories_merges():
    """Kineto's 2021 schema writes 'Runtime' and 'Kernel' (the parser maps them): the merge,
    which reads the raw events, takes them too (it saw no graph launch before)."""
    legacy = {"cuda_runtime": "Runtime", "kernel": "Kernel"}
    replay = [dict(e, cat=legacy.get(e["cat"], e["cat"])) for e in _replay([3])]
    out, stats = merge_graph_capture(replay, [_capture(["aten::mm", "aten::add", "aten::mm"])])
    assert (stats.graph_launches, stats.matched_launches, stats.kernels_attributed) == (1, 1, 3)
    ops = {e["args"]["External id"]: e["name"] for e in out if e["cat"] == "cpu_op"}
    assert [ops[k["args"]["External id"]] for k in out if k["cat"] == "Kernel"] == [
        "aten::mm", "aten::add", "aten::mm"]
