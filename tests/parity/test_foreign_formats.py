"""Other profilers' files against their own records and TraceLens, on the shared real files.

- nsys (``../shared/traces/nsys``): kernel time per kernel name equals a SQL ``GROUP BY`` over
  ``CUPTI_ACTIVITY_KIND_KERNEL`` exactly (ns); busy and idle time per GPU equal the union of the
  GPU activity intervals computed here from SQL; ``compare`` of the report and a copy with one
  kernel made slower names that kernel.
- XPlane (``../shared/traces/xplane``): per GPU, busy, idle, total and memcpy time equal
  TraceLens's ``gpu_timeline.csv`` to 1e-6 ms (its ``gpu_pid`` is the plane's GPU index + 1).
- rocprofv3 (``../shared/traces/rocprof``): kernel count and time per kernel name equal the file's
  ``kernel_dispatch`` records.
- ``trace-analysis report`` runs on each file.
"""

from __future__ import annotations

import gzip
import json
import shutil
import sqlite3
from collections import Counter, defaultdict

import pandas as pd
import pytest
from click.testing import CliRunner
from paths import REPO_ROOT

from analysis import TraceAnalysis, compare
from analysis.cli import main
from analysis.kineto.events import kernel_like_mask

SHARED = REPO_ROOT.parent / "shared" / "traces"
NSYS = SHARED / "nsys" / "h100_2gpu_1s.sqlite"
XPLANE = SHARED / "xplane" / "jax_conv_minimal.xplane.pb"
TRACELENS_CSV = SHARED / "xplane" / "jax_conv_minimal_perf_report_csvs" / "gpu_timeline.csv"
ROCPROF = SHARED / "rocprof" / "908_results.json.gz"
TOLERANCE_MS = 1e-6


def need(path):
    if not path.exists():
        pytest.skip(f"shared file not available: {path}")


def merged_ns(intervals) -> tuple[int, int]:
    """(busy, span) of ``[(start, end)]`` by a plain sort-and-sweep, independent of the package."""
    intervals = sorted(intervals)
    busy, cur_s, cur_e = 0, None, None
    for s, e in intervals:
        if cur_e is None or s > cur_e:
            if cur_e is not None:
                busy += cur_e - cur_s
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    busy += cur_e - cur_s
    return busy, max(e for _, e in intervals) - intervals[0][0]


# --- nsys ---------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def nsys():
    need(NSYS)
    return TraceAnalysis(trace_dir=str(NSYS), use_cache=False, progress=False)


def _sql(path, query):
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as conn:
        return conn.execute(query).fetchall()


def test_nsys_ranks_are_process_gpu_pairs(nsys):
    pairs = _sql(NSYS, "SELECT DISTINCT (globalPid >> 24) & 16777215, deviceId "
                       "FROM CUPTI_ACTIVITY_KIND_KERNEL ORDER BY 1, 2")
    meta = nsys.get_trace_metadata()
    assert meta["rank_from"].tolist() == [f"nsys: process {p}, GPU {d}" for p, d in pairs]


def test_nsys_kernel_time_per_name_equals_sql_group_by(nsys):
    rows = _sql(NSYS, """
        SELECT (k.globalPid >> 24) & 16777215, k.deviceId, s.value, COUNT(*), SUM(k.end - k.start)
        FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s ON s.id = k.demangledName
        GROUP BY 1, 2, 3""")
    expected = {(f"nsys: process {p}, GPU {d}", n): (c, t) for p, d, n, c, t in rows}
    got = {}
    for rt in nsys.trace.values():
        ev = rt.events[rt.events["cat"] == "kernel"]
        for name, group in ev.groupby(ev["name"].astype(str)):
            got[(rt.meta.rank_origin, name)] = (len(group), int(group["dur"].sum()))
    assert got == expected
    assert sum(c for c, _ in got.values()) == 3442
    # and through the analysis: its per-kernel sums (µs) are the same nanoseconds
    _, per_kernel = nsys.get_gpu_kernel_breakdown(visualize=False, num_kernels=10_000,
                                                  duration_ratio=1.0)
    by_rank = {rt.rank: rt.meta.rank_origin for rt in nsys.trace.values()}
    checked = 0
    for rank, name, sum_us in per_kernel[["rank", "name", "sum (us)"]].itertuples(index=False):
        key = (by_rank[rank], name)
        if key in expected:
            assert sum_us * 1000 == pytest.approx(expected[key][1], rel=1e-12, abs=1e-6)
            checked += 1
    assert checked == len(expected)


def test_nsys_busy_idle_equal_merged_gpu_intervals(nsys):
    temporal = nsys.get_temporal_breakdown(visualize=False).set_index("rank")
    for rt in nsys.trace.values():
        process, device = rt.meta.other["process"], rt.meta.other["gpu"]
        intervals = []
        for table in ("KERNEL", "MEMCPY", "MEMSET"):
            intervals += _sql(NSYS, f"SELECT start, end FROM CUPTI_ACTIVITY_KIND_{table} WHERE "
                                    f"deviceId = {device} AND (globalPid >> 24) & 16777215 = {process}")
        busy, span = merged_ns(intervals)
        row = temporal.loc[rt.rank]
        assert row["kernel_time(us)"] * 1000 == pytest.approx(span, abs=1e-6)
        assert row["idle_time(us)"] * 1000 == pytest.approx(span - busy, abs=1e-6)


def test_nsys_compare_names_the_kernels_that_changed(nsys, tmp_path):
    name = _sql(NSYS, "SELECT s.value FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s "
                      "ON s.id = k.demangledName GROUP BY 1 ORDER BY COUNT(*) DESC LIMIT 1")[0][0]
    after = tmp_path / "after" / NSYS.name
    after.parent.mkdir()
    shutil.copyfile(NSYS, after)
    with sqlite3.connect(after) as conn:  # that kernel 50 % slower
        conn.execute("UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET end = start + (end - start) * 3 / 2 "
                     "WHERE demangledName = (SELECT id FROM StringIds WHERE value = ?)", (name,))
    test = TraceAnalysis(trace_dir=str(after), use_cache=False, progress=False)
    kernels = compare(nsys, test).kernels()
    changed = kernels[kernels["change"] != "unchanged"]
    assert changed["name"].astype(str).tolist() == [name]
    assert changed["change"].tolist() == ["slower"]
    assert changed["diff_time_us"].iloc[0] > 0


# --- XPlane -------------------------------------------------------------------------------------


def test_xplane_equals_tracelens_gpu_timeline():
    need(XPLANE)
    need(TRACELENS_CSV)
    ref = pd.read_csv(TRACELENS_CSV).pivot(index="gpu_pid", columns="type", values="time ms")
    ta = TraceAnalysis(trace_dir=str(XPLANE), use_cache=False, progress=False)
    assert [r + 1 for r in ta.ranks] == sorted(ref.index)  # GPU planes with events: 0 and 7
    temporal = ta.get_temporal_breakdown(visualize=False).set_index("rank")
    for rank in ta.ranks:
        expected = ref.loc[rank + 1]
        row = temporal.loc[rank]
        total_ms = row["kernel_time(us)"] / 1000
        idle_ms = row["idle_time(us)"] / 1000
        assert total_ms == pytest.approx(expected["total_time"], abs=TOLERANCE_MS)
        assert idle_ms == pytest.approx(expected["idle_time"], abs=TOLERANCE_MS)
        assert total_ms - idle_ms == pytest.approx(expected["busy_time"], abs=TOLERANCE_MS)
        # TraceLens's memcpy time: the union of the copies and memsets (names Copy*/Memcpy*/Memset*)
        ev = ta.trace[rank].events
        memory = ev[kernel_like_mask(ev) & ev["cat"].isin(["gpu_memcpy", "gpu_memset"]).to_numpy()]
        if len(memory):
            busy, _ = merged_ns(zip(memory["ts"], memory["ts"] + memory["dur"], strict=True))
        else:
            busy = 0
        assert busy / 1e6 == pytest.approx(expected["total_memcpy_time"], abs=TOLERANCE_MS)
        if expected["total_comm_time"] == 0:  # then our non-compute time is that memcpy time
            assert row["non_compute_time(us)"] / 1000 == pytest.approx(
                expected["total_memcpy_time"], abs=TOLERANCE_MS)


def test_xplane_kernel_launches_are_matched():
    need(XPLANE)
    ta = TraceAnalysis(trace_dir=str(XPLANE), use_cache=False, progress=False)
    stats = ta.get_cuda_kernel_launch_stats(ranks=[7], visualize=False)[7]
    kernels = ta.trace[7].events.query("cat == 'kernel'")
    assert sorted(stats["correlation"]) == sorted(kernels["correlation"])  # all 25 launches
    assert (stats["launch_delay"] >= 0).all()


# --- rocprofv3 ----------------------------------------------------------------------------------


def test_rocprof_kernels_equal_dispatch_records():
    need(ROCPROF)
    doc = json.loads(gzip.decompress(ROCPROF.read_bytes()))["rocprofiler-sdk-tool"][0]
    names = {s["kernel_id"]: s["formatted_kernel_name"] or s["kernel_name"]
             for s in doc["kernel_symbols"]}
    count, time_ns = Counter(), defaultdict(int)
    for d in doc["buffer_records"]["kernel_dispatch"]:
        name = names[d["dispatch_info"]["kernel_id"]]
        count[name] += 1
        time_ns[name] += d["end_timestamp"] - d["start_timestamp"]
    ta = TraceAnalysis(trace_dir=str(ROCPROF), use_cache=False, progress=False)
    ev = ta.trace[0].events
    kernels = ev[ev["cat"] == "kernel"]
    groups = kernels.groupby(kernels["name"].astype(str))["dur"]
    assert groups.size().to_dict() == dict(count)
    assert {k: int(v) for k, v in groups.sum().items()} == dict(time_ns)
    assert len(kernels) == 43_915


# --- the report on each file ----------------------------------------------------------------------


@pytest.mark.parametrize("path", [NSYS, XPLANE, ROCPROF], ids=lambda p: p.parent.name)
def test_report_runs(path, tmp_path):
    """The whole report on each format, its figures drawn into the page. (Their SVG export, a
    headless browser that renders what the page draws, is the report tests' and the README's: ~7 s
    of CPU a report.)"""
    need(path)
    out = tmp_path / "report"
    result = CliRunner().invoke(main, ["report", str(path), "-o", str(out), "--no-cache", "-f",
                                       "html"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert (out / "index.html").is_file()
    assert (out / "index.html").read_text(encoding="utf-8").count('class="plotly-graph-div"') > 0
    assert not any((out / "figures").glob("*.svg"))
    metadata = pd.read_csv(out / "tables" / "trace_metadata.csv")
    assert set(metadata["format"]) == {path.parent.name}
    assert "not available for" in result.output  # the operator analyses say why they are absent
