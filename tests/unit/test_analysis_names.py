"""One name per analysis (issue 27): the registry name is the facade method's (``get_<name>``, or
HTA's method name, which the name follows), and the same name selects it in ``ta.run``, the report
and ``trace-analysis report --analyses``. The names used before keep working, as aliases."""

from __future__ import annotations

import warnings

import click
import pandas as pd
import pytest

from analysis import analyses as catalogue
from analysis.api import TraceAnalysis
from analysis.cli.report import _analyses as report_analyses_option
from analysis.errors import ConfigError
from analysis.registry import Analysis, Catalogue
from analysis.reports.content import build_report

# Earlier registry names -> the name now (every one still accepted).
EARLIER_NAMES = {
    "trace_diff": "step_profile",
    "step_start_gap": "step_start_gaps",
    "kernel_launch_stats": "cuda_kernel_launch_stats",
    "kernel_breakdown": "gpu_kernel_breakdown",
    "queue_length": "queue_length_stream_summary",
    "memory_bandwidth": "memcpy_summary",
    "critical_path": "critical_path_summary",
    "critical_path_graph": "critical_path_analysis",
}
# Earlier facade method names -> the method now (both on TraceAnalysis).
EARLIER_METHODS = {"check": "get_trace_health"}
# HTA 0.5.0's method names: kept as they are (the names follow them).
HTA_METHODS = {"get_temporal_breakdown", "get_idle_time_breakdown", "get_comm_comp_overlap",
               "get_cuda_kernel_launch_stats", "get_gpu_kernel_breakdown", "get_profiler_steps",
               "get_queue_length_summary", "get_queue_length_time_series",
               "get_memory_bw_summary", "get_memory_bw_time_series", "critical_path_analysis"}


@pytest.mark.parametrize("spec", list(catalogue.analyses().values()), ids=lambda s: s.name)
def test_each_analysis_has_one_name_its_method_spells(spec):
    assert spec.method in (f"get_{spec.name}", spec.name)
    assert callable(getattr(TraceAnalysis, spec.method))
    for alias in spec.aliases:  # an earlier name resolves to this entry, and names nothing else
        assert catalogue.get(alias) is spec and alias not in catalogue.analyses()


def test_the_earlier_names_and_methods_are_the_documented_aliases():
    aliases = {a: s.name for s in catalogue.analyses().values() for a in s.aliases}
    assert aliases == EARLIER_NAMES
    methods = {a: s.method for s in catalogue.analyses().values() for a in s.method_aliases}
    assert methods == EARLIER_METHODS
    registered = {s.method for s in catalogue.analyses().values()}
    assert HTA_METHODS <= registered


def test_report_sections_and_cli_choices_are_the_names():
    sections = catalogue.section_names()
    assert all(catalogue.get(n).name == n for n in sections)
    assert report_analyses_option(None, None, ",".join(sections)) == sections
    # earlier spellings are accepted and become the names
    assert report_analyses_option(None, None, "kernel_launch_stats, memory_bandwidth,queue_length") \
        == ["cuda_kernel_launch_stats", "memcpy_summary", "queue_length_stream_summary"]
    with pytest.raises(click.BadParameter, match="no_such"):
        report_analyses_option(None, None, "no_such")
    with pytest.raises(ConfigError, match="unknown report analyses"):
        catalogue.CATALOGUE.sections(["trace_diff"])  # a name, but not a section


@pytest.fixture(scope="module")
def sample_ta(sample_traces_dir):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return TraceAnalysis(trace_dir=sample_traces_dir, progress=False)


def _same(a, b):
    if isinstance(a, pd.DataFrame):
        pd.testing.assert_frame_equal(a, b)
    elif isinstance(a, dict):
        assert a.keys() == b.keys()
        for k in a:
            _same(a[k], b[k])
    elif isinstance(a, tuple):
        for x, y in zip(a, b, strict=True):
            _same(x, y)
    else:
        assert a == b


def test_an_earlier_name_runs_the_same_analysis_and_keys_the_result_as_asked(sample_ta):
    asked = {"kernel_launch_stats": {}, "memory_bandwidth": {}, "step_start_gap": {},
             "temporal_breakdown": {}}
    old = sample_ta.run_many(asked, [0, 1])
    assert list(old) == list(asked)
    new = sample_ta.run_many({EARLIER_NAMES.get(n, n): o for n, o in asked.items()}, [0, 1])
    for name in asked:
        _same(old[name], new[EARLIER_NAMES.get(name, name)])
    _same(sample_ta.run("queue_length", [0]), sample_ta.run("queue_length_stream_summary", [0]))


def test_an_earlier_method_name_is_the_same_method(sample_ta):
    for alias, method in EARLIER_METHODS.items():
        old, new = getattr(TraceAnalysis, alias), getattr(TraceAnalysis, method)
        assert str(old.__signature__) == str(new.__signature__)
        assert old.__doc__.startswith(f"``{alias}`` is the earlier name of ``{method}``")
        _same(getattr(sample_ta, alias)(), getattr(sample_ta, method)())


def test_report_sections_are_keyed_by_the_name_even_when_asked_by_an_earlier_one(sample_ta):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        content = build_report(sample_ta, ranks=[0], analyses=["memory_bandwidth"])
    assert [s.key for s in content.sections] == ["memcpy_summary"]


def test_a_catalogue_refuses_an_alias_that_is_another_name():
    a = Analysis(name="a", method="get_a", doc="", aliases=("old_a",))
    with pytest.raises(ConfigError, match="'old_a' is registered twice"):
        Catalogue([a, Analysis(name="old_a", method="get_old_a", doc="")])
    with pytest.raises(ConfigError, match="'b' is registered twice"):
        Catalogue([Analysis(name="b", method="get_b", doc=""), a.__class__(
            name="c", method="get_c", doc="", aliases=("b",))])
    with pytest.raises(ConfigError, match="'get_a' is registered twice"):
        Catalogue([a, Analysis(name="d", method="get_d", doc="", method_aliases=("get_a",))])
    assert Catalogue([a]).get("old_a") is a and Catalogue([a]).canonical("old_a") == "a"


def test_the_analyses_command_lists_each_name_with_its_method_and_earlier_names():
    from click.testing import CliRunner

    from analysis.cli import main

    out = CliRunner().invoke(main, ["analyses"])
    assert out.exit_code == 0, out.output
    lines = {line.split()[0]: line for line in out.output.splitlines()}
    assert list(lines) == list(catalogue.analyses())
    assert "ta.get_memcpy_summary" in lines["memcpy_summary"]
    assert "(earlier: memory_bandwidth)" in lines["memcpy_summary"]
    assert "(earlier: ta.check)" in lines["trace_health"]
