"""The TraceAnalysis facade: HTA's API end to end, rank selection, figures, errors, the HTA bridge."""

from __future__ import annotations

import uuid

import pandas as pd
import plotly.io as pio
import pytest

from analysis import TraceAnalysis
from analysis.errors import ConfigError, TraceNotFoundError, UnknownRankError
from tests.hta_oracle import hta_analysis


@pytest.fixture(scope="module")
def sample_ta(sample_traces_dir):
    return TraceAnalysis(trace_dir=sample_traces_dir, kernel_patterns="hta", progress=False)


@pytest.fixture(scope="module")
def filter_dir(hta_traces_dir):
    return hta_traces_dir / "trace_filter"


def test_every_facade_method_equals_hta_on_a_real_two_rank_trace(filter_dir):
    ours = TraceAnalysis(trace_dir=filter_dir, kernel_patterns="hta", use_cache=False, progress=False)
    hta = hta_analysis(str(filter_dir))
    assert ours.time_rounding == "hta"
    pd.testing.assert_frame_equal(
        ours.get_temporal_breakdown(visualize=False),
        hta.get_temporal_breakdown(visualize=False),
        check_dtype=False,
    )
    pd.testing.assert_frame_equal(
        ours.get_comm_comp_overlap(visualize=False).reset_index(drop=True),
        hta.get_comm_comp_overlap(visualize=False).reset_index(drop=True),
        check_dtype=False,
    )
    ours_idle, ours_stats = ours.get_idle_time_breakdown(
        ranks=[0, 1], visualize=False, show_idle_interval_stats=True
    )
    hta_idle, hta_stats = hta.get_idle_time_breakdown(
        ranks=[0, 1], visualize=False, show_idle_interval_stats=True
    )
    pd.testing.assert_frame_equal(ours_idle, hta_idle, check_dtype=False)
    pd.testing.assert_frame_equal(ours_stats, hta_stats, check_dtype=False)
    ours_launch = ours.get_cuda_kernel_launch_stats(ranks=[0, 1], visualize=False)
    hta_launch = hta.get_cuda_kernel_launch_stats(ranks=[0, 1], visualize=False)
    assert sorted(ours_launch) == sorted(hta_launch)
    for r in hta_launch:
        pd.testing.assert_frame_equal(
            ours_launch[r].reset_index(drop=True), hta_launch[r].reset_index(drop=True),
            check_dtype=False,
        )
    ours_types, ours_kernels = ours.get_gpu_kernel_breakdown(visualize=False)
    hta_types, hta_kernels = hta.get_gpu_kernel_breakdown(visualize=False, include_memory_kernels=True)
    pd.testing.assert_frame_equal(ours_types, hta_types, check_dtype=False)
    pd.testing.assert_frame_equal(ours_kernels, hta_kernels, check_dtype=False)
    assert ours.get_profiler_steps() == hta.get_profiler_steps()


def test_rank_selection(sample_ta):
    assert sample_ta.ranks == list(range(8))
    idle, _ = sample_ta.get_idle_time_breakdown(visualize=False)
    assert set(idle["rank"]) == {0}  # HTA's default: the first rank
    idle, _ = sample_ta.get_idle_time_breakdown(ranks="all", visualize=False)
    assert set(idle["rank"]) == set(range(8))
    assert list(sample_ta.get_cuda_kernel_launch_stats(ranks=3, visualize=False)) == [3]
    with pytest.raises(UnknownRankError, match="rank 42 .*ranks present: \\[0, 1, 2"):
        sample_ta.get_idle_time_breakdown(ranks=[42], visualize=False)
    with pytest.raises(ConfigError, match="'everything'"):
        sample_ta.get_cuda_kernel_launch_stats(ranks="everything", visualize=False)


def test_default_preset_is_exact_and_differs_from_hta_only_where_documented(sample_traces_dir, sample_ta):
    default = TraceAnalysis(trace_dir=sample_traces_dir, progress=False)
    assert default.time_rounding == "exact"
    # integer-µs synthetic traces with nccl kernels: both presets agree on the temporal numbers
    pd.testing.assert_frame_equal(
        default.get_temporal_breakdown(visualize=False),
        sample_ta.get_temporal_breakdown(visualize=False),
        check_dtype=False,
    )


def test_the_hta_preset_object_implies_hta_rounding_like_its_name(sample_traces_dir):
    from analysis.metrics.kernel_types import PRESETS

    ta = TraceAnalysis(trace_dir=sample_traces_dir, kernel_patterns=PRESETS["hta"], progress=False)
    assert ta.time_rounding == "hta"
    ta = TraceAnalysis(trace_dir=sample_traces_dir, kernel_patterns=PRESETS["hta"],
                       time_rounding="exact", progress=False)
    assert ta.time_rounding == "exact"


def test_profiler_steps_and_step_table(sample_ta):
    assert sample_ta.get_profiler_steps() == [10, 11, 12, 13]  # the cut-off last step is dropped
    table = sample_ta.get_profiler_step_table()
    assert set(table["rank"]) == set(range(8)) and 14 in set(table["step"])


def test_visualize_shows_a_figure_and_returns_the_data(sample_ta, monkeypatch):
    shown = []
    monkeypatch.setattr("plotly.graph_objects.Figure.show", lambda fig, *a, **k: shown.append(fig))
    df = sample_ta.get_temporal_breakdown(visualize=True)
    sample_ta.get_idle_time_breakdown(visualize=True, show_idle_interval_stats=True)
    sample_ta.get_comm_comp_overlap()
    sample_ta.get_cuda_kernel_launch_stats()
    sample_ta.get_gpu_kernel_breakdown()
    assert len(df) == 8
    titles = [f.layout.title.text for f in shown]
    assert len(shown) == 7 and all(titles), titles


def test_visualize_with_the_svg_renderer_displays_an_svg(sample_ta, kaleido_session, monkeypatch):
    import types

    import plotly.io._renderers as renderers

    bundles = []
    fake_display = types.SimpleNamespace(display=lambda bundle, raw=False: bundles.append(bundle))
    monkeypatch.setattr(renderers, "ipython_display", fake_display)
    monkeypatch.setattr(pio.renderers, "default", "svg")
    df = sample_ta.get_comm_comp_overlap(visualize=True)
    assert len(df) == 8
    assert len(bundles) == 1 and "<svg" in bundles[0]["image/svg+xml"]
    assert "overlap" in bundles[0]["image/svg+xml"].lower()


def test_constructor_errors(tmp_path):
    with pytest.raises(ConfigError):
        TraceAnalysis()
    with pytest.raises(TraceNotFoundError, match="does-not-exist"):
        TraceAnalysis(trace_dir=tmp_path / "does-not-exist")
    with pytest.raises(ConfigError, match="time_rounding"):
        TraceAnalysis(trace_dir=tmp_path, time_rounding="ceil")
    with pytest.raises(ConfigError):
        TraceAnalysis(trace_dir=tmp_path, kernel_patterns="no-such-preset")


def test_hta_bridge_on_local_traces(filter_dir):
    pytest.importorskip("hta")
    ta = TraceAnalysis(trace_dir=filter_dir, progress=False)
    hta = ta.hta
    assert sorted(hta.t.traces) == ta.ranks
    assert ta.hta is hta  # built once


def test_hta_bridge_fetches_remote_traces(gcs_emulator, filter_dir, tmp_path):
    pytest.importorskip("hta")
    import gcsfs

    fs = gcsfs.GCSFileSystem(endpoint_url=gcs_emulator, token="anon")
    bucket = f"bridge-{uuid.uuid4().hex[:8]}"
    fs.mkdir(bucket)
    for f in sorted(filter_dir.iterdir()):
        fs.put_file(str(f), f"{bucket}/run/{f.name}")
    ta = TraceAnalysis(
        trace_dir=f"gs://{bucket}/run",
        storage_options={"endpoint_url": gcs_emulator, "token": "anon"},
        cache_dir=tmp_path,
        progress=False,
    )
    hta = ta.hta
    assert sorted(hta.t.traces) == [0, 1]
    assert all(str(tmp_path) in p for p in hta.t.trace_files.values())


def test_hta_bridge_critical_path_is_the_native_one_under_pandas_3(filter_dir):
    pytest.importorskip("hta")
    import pandas as pd

    ta = TraceAnalysis(trace_dir=filter_dir, progress=False)
    if int(pd.__version__.split(".")[0]) < 3:
        pytest.skip("HTA's own critical path runs under pandas < 3")
    with pytest.warns(UserWarning, match="fails under pandas 3.*native"):
        graph, ok = ta.hta.critical_path_analysis(0, "ProfilerStep", 0)
    native, native_ok = ta.critical_path_analysis(0, annotation="ProfilerStep", instance_id=0)
    assert ok == native_ok
    pd.testing.assert_frame_equal(graph.get_critical_path_breakdown(),
                                  native.get_critical_path_breakdown())


def test_hta_bridge_reraises_import_errors_other_than_a_missing_hta(filter_dir, monkeypatch):
    pytest.importorskip("hta")
    import builtins

    real_import = builtins.__import__

    def broken(name, *args, **kwargs):
        if name == "hta.trace_analysis":
            raise ModuleNotFoundError("No module named 'jupyterlab'", name="jupyterlab")
        return real_import(name, *args, **kwargs)

    ta = TraceAnalysis(trace_dir=filter_dir, progress=False)
    monkeypatch.setattr(builtins, "__import__", broken)
    with pytest.raises(ModuleNotFoundError, match="jupyterlab"):
        _ = ta.hta


def test_hta_bridge_without_hta_says_how_to_install_it(filter_dir, monkeypatch):
    import sys

    from analysis.errors import TraceAnalysisError

    ta = TraceAnalysis(trace_dir=filter_dir, progress=False)
    monkeypatch.setitem(sys.modules, "hta.trace_analysis", None)  # import now fails
    with pytest.raises(TraceAnalysisError, match=r"pip install 'trace-analysis\[hta\]'"):
        _ = ta.hta


def test_changing_a_result_changes_no_later_result(filter_dir):
    """The engine memoises per-rank parts, which some results hold as they are (a rank's queue
    length series, its step profile): a user's change to a returned frame or dict came back in
    the next call's result. Every call returns new objects now."""
    ta = TraceAnalysis(trace_dir=filter_dir, use_cache=False, progress=False)
    series = ta.run("queue_length_time_series", ranks="all")
    top = series[0]["queue_length"].max()
    series[0]["queue_length"] = -1
    series[0].drop(series[0].index, inplace=True)
    del series[1]
    again = ta.run("queue_length_time_series", ranks="all")
    assert sorted(again) == [0, 1] and again[0]["queue_length"].max() == top
    profile = ta.run("step_profile", ranks="all")
    size = len(profile[0].breakdown)
    profile[0].breakdown.clear()
    assert len(ta.run("step_profile", ranks="all")[0].breakdown) == size > 0


def test_a_rank_left_out_is_listed_once(tmp_path, filter_dir):
    """``findings`` reads other analyses, whose ranks left out were listed again when those
    analyses were then asked for with the same list (one row per analysis and rank now)."""
    import shutil

    job = tmp_path / "job"
    job.mkdir()
    shutil.copy(filter_dir / sorted(p.name for p in filter_dir.iterdir())[0], job)
    cpu_only = next((filter_dir.parent / "cpu_only").iterdir())
    shutil.copy(cpu_only, job / ("cpu-" + cpu_only.name))
    ta = TraceAnalysis(trace_dir=job, use_cache=False, progress=False)
    left_out: list = []
    ta.run_many({"findings": {}}, ranks="all", errors="return", left_out=left_out)
    rows = [(f.analysis, f.rank) for f in left_out]
    assert ("idle_time_breakdown", 34) in rows and len(rows) == len(set(rows))
    ta.run_many({"idle_time_breakdown": {}}, ranks="all", errors="return", left_out=left_out)
    ta.run_many({"findings": {}}, ranks="all", errors="return", left_out=left_out)
    assert [(f.analysis, f.rank) for f in left_out] == rows
