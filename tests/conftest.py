"""Shared test fixtures: where the bundled sample traces and the real HTA test traces live."""

from __future__ import annotations

import functools
import gc
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import pytest

# gcsfs reads this when it is imported; without it every call against the emulator hangs 60 s
# (see ../shared/guide/FACTS.md). Set before any test module can import gcsfs.
os.environ.setdefault("GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT", "false")
# The command line says a warning about the same traces once per cache; tests that look for a
# warning must see it every time (tests/unit/cli/test_terminal.py tests the once-only rule).
os.environ.setdefault("TRACE_ANALYSIS_REPEAT_WARNINGS", "1")
# jsonschema (imported by nbformat, jupytext, nbclient) checks the "iri" format with
# rfc3987_syntax when it is installed, which compiles 38 Earley grammars as it is imported (about
# 0.9 s of CPU per process, in every xdist worker); no test validates an IRI. A None entry makes
# the import fail, and jsonschema goes on without that format checker.
sys.modules.setdefault("rfc3987_syntax", None)  # type: ignore[assignment]

REPO_ROOT = Path(__file__).resolve().parents[1]
SAMPLE_TRACES = REPO_ROOT / "sample_traces"
# ../shared beside the checkout; SHARED_TRACES overrides it (e.g. for a git worktree elsewhere)
SHARED_TRACES = Path(os.environ.get("SHARED_TRACES", REPO_ROOT.parent / "shared" / "traces"))
HTA_TRACES = SHARED_TRACES / "hta"

# The real-GPU trace folders of ../shared/traces/hta that HTA 0.5.0 can analyse.
HTA_GPU_TRACE_DIRS = [
    "trace_filter",
    "df_index_resolver",
    "negative_queue_length_values_check",
    "nccl_parser_config",
    "ns_resolution_trace",
    "critical_path/alexnet",
    "amd_trace",
    "triton_example",
    "mtia_inference_trace",
]
# HTA_PARITY_DIRS (folders under $SHARED_TRACES/hta, separated by ":") replaces the list: with
# HTA_LIVE=1, the parity suite then runs HTA live on traces of one's own (docs/contributing.md)
if os.environ.get("HTA_PARITY_DIRS"):
    HTA_GPU_TRACE_DIRS = [d for d in os.environ["HTA_PARITY_DIRS"].split(":") if d]


# How ``make test`` spreads the suite over pytest-xdist workers (``-n <cores> --dist loadscope
# --no-loadscope-reorder``, with the scheduler below): each test module is one unit of work, so
# that a module's fixtures are made once (a worker switching modules tears module fixtures down);
# modules that share an expensive per-process resource are one unit, so that the resource is made
# once, not once per worker: the session Dask cluster (``dask_client``), and the walkthrough,
# executed once per process (``notebook_helpers.execute``) and served by JupyterLab.
NOTEBOOK_MODULES = {"test_notebooks.py", "test_jupyterlab.py"}
# Units handed out first (the longest, about 25-70 s each on 2 cores), so that no long unit starts
# last while the other workers have nothing left; the others follow in collection order. Order
# only changes how long the suite takes, never what it checks.
LONG_UNITS = [
    "notebooks", "dask", "tests/unit/test_robustness_matrix.py",
    "tests/integration/test_readme_commands.py", "tests/unit/cli/test_cli.py",
    "tests/unit/reports/test_report.py", "tests/unit/kineto/test_gcs.py",
    "tests/unit/metrics/test_collectives_gloo.py",
]


@functools.cache
def xdist_unit(module: str) -> str:
    """The unit of work of the test module at ``module`` (a node id's path, from the root)."""
    path = REPO_ROOT / module
    if path.name in NOTEBOOK_MODULES:
        return "notebooks"
    if path.suffix == ".py" and "dask_client" in path.read_text(encoding="utf-8"):
        return "dask"
    return module


# The run's parsed-trace cache: ``TRACE_ANALYSIS_CACHE`` (the package's default cache directory)
# points at one temporary directory for the whole run, shared by the xdist workers. Tests that
# open traces without a cache directory of their own use it, so no test reads or writes the user's
# ~/.cache/trace-analysis and a run never starts warm from an earlier one; and tests that check
# analyses (not parsing) load real traces through it (``trace_helpers.load``), so each file is
# parsed once per run, not once per test module, worker and set of load options (the parity,
# consistency and findings tests parsed the same files about 150 times over, 30 s of CPU). Writes
# are atomic (``analysis.kineto.cache``: an entry is renamed into place, and a second writer of
# the same key keeps the first's). Made by the controlling process before the workers start (they
# inherit its environment) and removed when the run ends.
CACHE_ENV = "TRACE_ANALYSIS_CACHE"


def pytest_configure(config):
    if not hasattr(config, "workerinput"):
        config._run_cache = tempfile.mkdtemp(prefix="analysis-tests-cache-")
        config._user_cache = os.environ.get(CACHE_ENV)
        os.environ[CACHE_ENV] = config._run_cache


def pytest_unconfigure(config):
    made = getattr(config, "_run_cache", None)
    if made is not None:
        shutil.rmtree(made, ignore_errors=True)
        if config._user_cache is None:
            os.environ.pop(CACHE_ENV, None)
        else:
            os.environ[CACHE_ENV] = config._user_cache


def pytest_collection_finish(session):
    """The test process's garbage collector: what is alive once the tests are collected (modules,
    pandas, plotly, the package) is moved out of the collector's generations (``gc.freeze``), and
    the youngest generation is collected every 5,000 allocations instead of 700. The suite's
    processes create millions of short-lived containers (DataFrames, plotly objects): with
    Python's defaults the collector took about 6 % of their CPU, 2 % so (measured on
    test_robustness_matrix.py and test_cli.py: 69.6 s -> 66.1 s). Memory is still freed at once
    where nothing cycles (tests/unit/engines/test_local.py checks that with the collector off)."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(5000, *gc.get_threshold()[1:])


def pytest_collection_modifyitems(config, items):
    first = {name: i for i, name in enumerate(LONG_UNITS)}
    # stable: each module's tests stay together, in their order
    items.sort(key=lambda item: first.get(xdist_unit(item.nodeid.split("::")[0]), len(first)))


def pytest_xdist_make_scheduler(config, log):
    """``--dist loadscope`` with :func:`xdist_unit` as the scope of each test."""
    if config.getvalue("dist") != "loadscope":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class ModuleUnits(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return xdist_unit(nodeid.split("::")[0])

    return ModuleUnits(config, log)


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return REPO_ROOT


@pytest.fixture(scope="session")
def sample_traces_dir() -> Path:
    if not any(SAMPLE_TRACES.glob("*.json.gz")):
        pytest.skip("sample_traces/ has no traces (run `python -m analysis.testing.synthetic sample_traces`)")
    return SAMPLE_TRACES


@pytest.fixture(scope="session")
def hta_traces_dir() -> Path:
    """../shared/traces/hta beside the checkout; absent in a user's fresh clone."""
    if not HTA_TRACES.is_dir():
        pytest.skip(f"real GPU traces not available: {HTA_TRACES} does not exist")
    return HTA_TRACES


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def gcs_emulator() -> str:
    """A real local GCS server (gcp-storage-emulator, in memory) for the session: its endpoint URL.

    STORAGE_EMULATOR_HOST points at it while the session runs; tests should still pass
    ``endpoint_url``/``token="anon"`` to gcsfs explicitly where they can.
    """
    exe = Path(sys.executable).with_name("gcp-storage-emulator")
    if not exe.exists():
        pytest.skip("gcp-storage-emulator is not installed (pip install gcp-storage-emulator)")
    port = _free_port()
    endpoint = f"http://127.0.0.1:{port}"
    proc = subprocess.Popen(
        [str(exe), "start", "--host", "127.0.0.1", "--port", str(port), "--in-memory", "-q"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    previous = os.environ.get("STORAGE_EMULATOR_HOST")
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                urllib.request.urlopen(f"{endpoint}/storage/v1/b", timeout=1).close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"gcp-storage-emulator did not start on {endpoint}")
                time.sleep(0.1)
        os.environ["STORAGE_EMULATOR_HOST"] = endpoint
        yield endpoint
    finally:
        if previous is None:
            os.environ.pop("STORAGE_EMULATOR_HOST", None)
        else:
            os.environ["STORAGE_EMULATOR_HOST"] = previous
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture(scope="session")
def kaleido_session():
    """One browser for static export (``analysis.figures.export``'s renderer: one Chromium, its
    kaleido page kept between figures) for the whole test session; export calls reuse it.

    Without a browser the tests that render skip locally, but fail in CI (CI=true), where the
    Makefile's set-up must have installed Chromium.
    """
    from analysis.figures.export import BrowserNotFoundError, kaleido_server

    try:
        with kaleido_server():
            yield
    except BrowserNotFoundError as e:
        if os.environ.get("CI"):
            raise
        pytest.skip(str(e))


@pytest.hookimpl(trylast=True)
def pytest_runtest_teardown(item, nextitem):
    """The session's Dask cluster (``dask_client``) is closed once the tests that share it are
    done, not at the end of the session: idle, its four processes take about 9 % of a core
    (heartbeats), for the minutes the rest of the suite runs. Those tests are one unit of work
    (``xdist_unit``: one worker runs them one after another, and without xdist they are sorted
    together), so the cluster goes when the next test is not of that unit; a later test that asks
    for it again would start a new one (pytest computes a finished fixture again)."""
    if xdist_unit(item.nodeid.split("::")[0]) != "dask":
        return
    if nextitem is not None and xdist_unit(nextitem.nodeid.split("::")[0]) == "dask":
        return
    try:  # pytest's fixture machinery (8 and 9); if it changes, the cluster closes at the end
        fixturedefs = item.session._fixturemanager.getfixturedefs("dask_client", item) or ()
        request = item._request
    except AttributeError:
        return
    for fixturedef in fixturedefs:
        fixturedef.finish(request)


@pytest.fixture(scope="session")
def dask_client():
    """One Dask ``LocalCluster`` for the whole session (two worker processes, one thread each) and
    its client: starting a cluster costs seconds, so every Dask test shares this one. Tests that
    kill workers start their own (``tests/unit/engines/test_dask.py``), so that a dead or restarting
    worker never reaches a later test."""
    distributed = pytest.importorskip("distributed")
    cluster = distributed.LocalCluster(n_workers=2, processes=True, threads_per_worker=1,
                                       host="127.0.0.1", dashboard_address=None)
    with distributed.Client(cluster) as client:
        yield client
    cluster.close()


@pytest.fixture(scope="session")
def sample_on_dask(dask_client, sample_traces_dir, tmp_path_factory):
    """``(TraceAnalysis, results)``: the sample traces loaded on the session's cluster (its workers
    parse them, into a cache of their own) and every analysis of the catalogue run there in one
    batch (errors as results). tests/unit/engines/test_dask.py compares them with the local engine
    one call at a time, tests/unit/test_contract.py with the local batch: one batch on the
    cluster for both (about 6 s of the workers' CPU). Closed with the cluster."""
    import warnings

    from catalogue_checks import every_analysis

    from analysis import TraceAnalysis

    cache = tmp_path_factory.mktemp("sample-on-dask-cache")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ta = TraceAnalysis(sample_traces_dir, client=dask_client, cache_dir=str(cache),
                           timeout=120, progress=False)
        results = ta.run_many(every_analysis(), "all", errors="return")
    yield ta, results
    ta.engine.close()


@pytest.fixture
def trace_dir(request):
    """Indirect parametrisation target: a folder name of ../shared/traces/hta, or "sample" (the
    bundled sample traces, which need no ../shared)."""
    if request.param == "sample":
        return request.getfixturevalue("sample_traces_dir")
    return request.getfixturevalue("hta_traces_dir") / request.param
