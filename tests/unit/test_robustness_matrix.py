"""Every registered analysis, ``findings()``, ``check()``, and the CLI's ``report`` and ``summary``
× every trace the tests can reach: a result or the project's own error, never a foreign exception.

The traces: the trace folders and files of ``../shared/traces`` (when present: Kineto, Nsight
Systems SQLite, XPlane), the generated edge-case jobs of ``analysis.testing.edge_traces``
(CPU-only gloo, kernels outside the steps, one event, one timestamp, unlaunched GPU events,
negative timestamps, a CPU-only rank among eight) and the faulty jobs of
``analysis.testing.health_traces``. The bundled ``sample_traces`` are not repeated here: the
contract test runs every analysis on them and holds them to the same rule
(tests/unit/test_contract.py), the CLI tests and the README's commands run ``summary``,
``report`` and ``check`` on them, and the findings snapshots cover ``findings()``. New
analyses join from the registry. An analysis that raises something else than a
``TraceAnalysisError`` is caught at the (analysis, rank) boundary as ``AnalysisFailedError``:
here, that fails the test with the original traceback.

Each trace is loaded once (a module fixture, its cache in a tmp dir) with the options the CLI's
``summary`` and ``report`` open it with (their defaults are the API's); the analyses run in one
batch per trace; the CLI's commands then run on that same loaded job (its memoised per-rank results:
what they add is their own runs, rendering and exit codes), and the report is written as HTML only.
"""

from __future__ import annotations

import importlib
import warnings
from pathlib import Path

import pytest
from catalogue_checks import assert_no_bug
from click.testing import CliRunner
from conftest import SHARED_TRACES

from analysis import analyses as catalogue
from analysis import registry
from analysis.api import TraceAnalysis
from analysis.cli import main
from analysis.cli import options as cli_options
from analysis.errors import TraceAnalysisError
from analysis.testing.edge_traces import EDGE_JOBS
from analysis.testing.health_traces import faulty_job, write_job

# ../shared/traces: folders of Kineto traces, and single trace files (relative to SHARED_TRACES)
SHARED_DIRS = [
    "hta/amd_trace", "hta/cpu_only", "hta/cupti_profiler", "hta/distributed_info_unavailable",
    "hta/execution_trace", "hta/memory_analysis", "hta/mtia_inference_trace",
    "hta/nccl_parser_config", "hta/ns_resolution_trace", "hta/rank_non_gpu",
    "hta/rank_unavailable", "hta/trace_filter", "hta/triton_example", "hta/critical_path/alexnet",
    "hta/critical_path/cuda_event_sync", "hta/critical_path/cuda_event_sync_multi_stream",
    "hta/critical_path/simple_add", "hta/trace_compare/base",
    "tracelens/inference/sglang_decode",
]
SHARED_FILES = [
    "tracelens/h100/Falconsai_nsfw_image_detection__1016002.json.gz",
    "tracelens/h100/gaunernst_bert-small-uncased__1016001.json.gz",
    "tracelens/mi300/Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz",
    "nsys/h100_2gpu_1s.sqlite", "xplane/jax_conv_minimal.xplane.pb",  # other profilers' files
]
# big real traces (tens of MB) cost seconds each to parse: covered by their own tests
# the trace-health faults whose shape an analysis could trip on (the others differ in args only)
HEALTH_FAULTS = ["negative_duration", "kernels_without_launch", "launches_without_kernels",
                 "no_gpu_events"]
GENERATED = [f"edge/{name}" for name in EDGE_JOBS] + [f"health/{check}" for check in HEALTH_FAULTS]
TRACES = [*[f"shared/{p}" for p in SHARED_DIRS + SHARED_FILES], *GENERATED]


def _path(trace_id: str, tmp: Path) -> Path:
    kind, _, name = trace_id.partition("/")
    if kind == "shared":
        path = SHARED_TRACES / name
        if not path.exists():
            pytest.skip(f"{path} is not available (no ../shared beside the checkout)")
        return path
    job = EDGE_JOBS[name]() if kind == "edge" else faulty_job(name)
    write_job(job, tmp / name)
    return tmp / name


@pytest.fixture(scope="module", params=TRACES)
def loaded(request, tmp_path_factory):
    """``(path, cache dir, TraceAnalysis or the project's error that loading raised)``."""
    tmp = tmp_path_factory.mktemp("matrix")
    path = _path(request.param, tmp)
    cache = tmp / "cache"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            ta = TraceAnalysis(trace_dir=str(path), cache_dir=str(cache), progress=False)
        except TraceAnalysisError as exc:
            ta = exc
    return path, cache, ta


def test_every_analysis_gives_a_result_or_our_error(loaded):
    _, _, ta = loaded
    if isinstance(ta, TraceAnalysisError):
        return  # loading said why, in the project's words: nothing to analyse
    failures: list[registry.Failure] = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        results = ta.run_many({name: {} for name in catalogue.analyses()}, "all", errors="return",
                              failures=failures)
    assert set(results) == set(catalogue.analyses())
    for name, result in results.items():
        assert_no_bug(result, name)
    for failure in failures:
        assert_no_bug(failure.error, f"{failure.analysis} on rank {failure.rank}")


def test_findings_and_check(loaded):
    _, _, ta = loaded
    if isinstance(ta, TraceAnalysisError):
        return
    for call in (ta.findings, ta.check):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                result = call()
            except TraceAnalysisError as exc:
                result = exc
        assert_no_bug(result, call.__name__)


def _reuse_the_loaded_job(monkeypatch, command: str, path: Path, cache: Path, ta) -> list:
    """The command's ``open_analysis`` gives the fixture's job when asked with the options the
    fixture opened it with (the command's defaults, ``-q``, the cache dir), else opens as usual."""
    module = importlib.import_module(f"analysis.cli.{command}")
    real = cli_options.open_analysis
    same = dict(kernel_patterns="default", no_cache=False, cache_dir=str(cache), on_error="raise",
                include_last_step=False, quiet=True, gpu_events=None, window=None,
                capture_trace=None)

    reused: list = []

    def opening(traces: str, **options):
        if traces != str(path) or options != same:
            return real(traces, **options)
        reused.append(traces)
        if isinstance(ta, TraceAnalysisError):
            raise ta
        return ta

    monkeypatch.setattr(module, "open_analysis", opening)
    return reused


@pytest.mark.parametrize("command", ["summary", "report"])
def test_cli_exits_0_once_loaded(loaded, command, tmp_path, monkeypatch):
    path, cache, ta = loaded
    reused = _reuse_the_loaded_job(monkeypatch, command, path, cache, ta)
    extra = ["-o", str(tmp_path / "out"), "-f", "html"] if command == "report" else []
    result = CliRunner().invoke(main, [command, str(path), "-q", "--cache-dir", str(cache), *extra])
    assert reused == [str(path)], "the command opened the job with other options than the fixture"
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    if isinstance(ta, TraceAnalysisError):  # loading failed: one line, the project's error
        assert result.exit_code == 1 and result.stderr.startswith("error: "), result.output
        return
    assert result.exit_code == 0, result.output
    assert "a bug, please report it" not in result.output, result.output
    if command == "report":
        assert (tmp_path / "out" / "index.html").is_file()
