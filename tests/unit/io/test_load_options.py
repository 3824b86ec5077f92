"""``LoadOptions`` (analysis/io/options.py): checked once, at the door, and the one value that the
facade, the engine, the loader and the reader of extras share."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

from analysis.api import TraceAnalysis
from analysis.engines import load_engine
from analysis.errors import ConfigError
from analysis.io import LoadOptions
from analysis.testing.health_traces import healthy_job, write_job


@pytest.fixture(scope="module")
def job_dir(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("load-options") / "job"
    write_job(healthy_job(2), out)
    return out


def _quiet(func, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return func(*args, **kwargs)


@pytest.mark.parametrize(
    ("name", "value", "words"),
    [("on_error", "ignore", "on_error must be one of"), ("max_workers", 0, "max_workers .*at least 1"),
     ("max_workers", 2.0, "at least 1"), ("use_cache", "no", "use_cache must be True or False"),
     ("progress", 1, "progress must be True or False"), ("timeout", float("nan"), "timeout .*positive"),
     ("timeout", True, "positive number"), ("storage_options", [1], "storage_options must be a dict"),
     ("cache_dir", 5, "cache_dir must be a path"), ("max_memory", 0, "max_memory .*at least 1"),
     ("max_memory", 1.5, "max_memory")],
)
def test_a_bad_value_is_a_config_error_naming_the_option(name, value, words):
    with pytest.raises(ConfigError, match=words):
        LoadOptions(**{name: value})


def test_the_facade_refuses_a_bad_option_before_reading_anything(tmp_path):
    # the directory does not exist: an option checked after looking would be a TraceNotFoundError
    with pytest.raises(ConfigError, match="use_cache"):
        TraceAnalysis(str(tmp_path / "absent"), use_cache="no")
    with pytest.raises(ConfigError, match="unknown load option"):
        load_engine(str(tmp_path / "absent"), cache=True)
    with pytest.raises(ConfigError, match="options must be an analysis.io.LoadOptions"):
        TraceAnalysis(str(tmp_path / "absent"), options={"use_cache": False})


def test_values_are_normalised_and_replaced(tmp_path):
    given = {"token": "anon"}
    opts = LoadOptions(storage_options=given, cache_dir=tmp_path, timeout=3)
    given["token"] = "changed"
    assert opts.storage_options == {"token": "anon"}  # a copy
    assert opts.cache_dir == str(tmp_path) and opts.timeout == 3.0
    assert LoadOptions.of(opts) is opts  # nothing to replace: the same, already checked, object
    other = LoadOptions.of(opts, use_cache=False)
    assert (other.use_cache, other.cache_dir, opts.use_cache) == (False, str(tmp_path), True)


def test_checked_once_and_the_same_object_reaches_engine_and_loader(job_dir, tmp_path, monkeypatch):
    from analysis.engines import local
    from analysis.io import options as options_module

    checks = []
    original_check = options_module.LoadOptions.__post_init__
    monkeypatch.setattr(options_module.LoadOptions, "__post_init__",
                        lambda self: (checks.append(1), original_check(self))[1])
    seen = []
    original_load = local.load_trace
    monkeypatch.setattr(local, "load_trace",
                        lambda *a, **kw: (seen.append(kw["options"]), original_load(*a, **kw))[1])

    ta = _quiet(TraceAnalysis, str(job_dir), cache_dir=tmp_path / "c", use_cache=False,
                progress=False, max_memory=1 << 30)
    assert len(checks) == 1  # built once in the facade, passed down as it is
    assert seen == [ta.options] and seen[0] is ta.options is ta.engine.options
    assert (ta.use_cache, ta.cache_dir, ta.engine.max_memory) == (False, str(tmp_path / "c"), 1 << 30)
    assert ta.engine.read_extras.options is ta.options  # the extras are read as the ranks were

    shared = LoadOptions(use_cache=False, progress=False)
    checks.clear()
    seen.clear()
    again = _quiet(TraceAnalysis, str(job_dir), options=shared)
    assert checks == [] and seen[0] is shared and again.options is shared
    # a keyword given beside options= replaces that field only
    mixed = _quiet(TraceAnalysis, str(job_dir), options=shared, cache_dir=tmp_path / "d")
    assert (mixed.options.use_cache, mixed.cache_dir) == (False, str(tmp_path / "d"))


def test_the_dask_engine_receives_the_same_object(job_dir, monkeypatch):
    pytest.importorskip("distributed")
    from analysis.engines.dask import DaskEngine

    received = {}

    def fake_load(cls, client, trace_dir, trace_files, **kw):
        received.update(kw, client=client)
        return "engine"

    monkeypatch.setattr(DaskEngine, "load", classmethod(fake_load))
    opts = LoadOptions(timeout=5, use_cache=False)
    client = object()
    assert load_engine(str(job_dir), client=client, options=opts) == "engine"
    assert received["options"] is opts and received["client"] is client
    load_engine(str(job_dir), client=client, on_error="skip", timeout=2)  # keywords: one value
    assert received["options"] == LoadOptions(on_error="skip", timeout=2)


def test_from_engine_takes_the_engines_options_and_reads_extras_with_them(job_dir, tmp_path,
                                                                         monkeypatch):
    """``from_engine`` used to leave ``use_cache`` unset and read extras with the default cache:
    now the facade's options are the engine's, and the engine's cache gets the extras."""
    monkeypatch.setenv("TRACE_ANALYSIS_CACHE", str(tmp_path / "default-cache"))
    cache = tmp_path / "engine-cache"
    engine = _quiet(load_engine, str(job_dir), cache_dir=cache, progress=False)
    ta = _quiet(TraceAnalysis.from_engine, engine)
    assert ta.options is engine.options
    assert (ta.use_cache, ta.cache_dir) == (True, str(cache))
    _quiet(ta.run, "kernel_table")
    assert list(cache.rglob("extras/kernel_args-*.arrow"))  # read and cached where the ranks are
    assert not (tmp_path / "default-cache").exists()

    no_cache = _quiet(load_engine, str(job_dir), cache_dir=tmp_path / "off", use_cache=False)
    assert _quiet(TraceAnalysis.from_engine, no_cache).use_cache is False
