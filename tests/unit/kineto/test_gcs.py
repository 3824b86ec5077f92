"""Loading traces from gs:// against a real local GCS server (gcp-storage-emulator)."""

from __future__ import annotations

import uuid
from pathlib import Path

import msgspec
import pandas as pd
import pytest

from analysis.errors import TraceNotFoundError
from analysis.kineto.cache import TraceCache
from analysis.kineto.loader import load_trace

TABLES = ("events", "flows", "collectives")


@pytest.fixture
def gcs(gcs_emulator):
    import gcsfs

    return gcsfs.GCSFileSystem(endpoint_url=gcs_emulator, token="anon")


@pytest.fixture
def options(gcs_emulator) -> dict:
    return {"endpoint_url": gcs_emulator, "token": "anon"}


@pytest.fixture
def bucket_with_traces(gcs, hta_traces_dir) -> tuple[str, Path]:
    """A fresh bucket holding trace_filter's two ranks under ``run/``: (gs:// URL, local dir)."""
    local = hta_traces_dir / "trace_filter"
    bucket = f"traces-{uuid.uuid4().hex[:8]}"
    gcs.mkdir(bucket)
    for f in sorted(local.iterdir()):
        gcs.put_file(str(f), f"{bucket}/run/{f.name}")
    return f"gs://{bucket}/run", local


def _assert_same_model(remote, local) -> None:
    assert remote.rank_list() == local.rank_list()
    for rank in local:
        for table in TABLES:
            pd.testing.assert_frame_equal(getattr(remote[rank], table), getattr(local[rank], table))
        r_meta, l_meta = remote[rank].meta, local[rank].meta
        assert r_meta.source.startswith("gs://")
        assert Path(r_meta.source).name == Path(l_meta.source).name
        r_meta.source = l_meta.source
        assert r_meta == l_meta


def test_gs_prefix_loads_the_same_model_as_local_files(bucket_with_traces, options):
    url, local_dir = bucket_with_traces
    remote = load_trace(url, storage_options=options, use_cache=False, max_workers=2)
    local = load_trace(local_dir, use_cache=False, max_workers=1)
    assert remote[0].meta.source == f"{url}/sampled_rank-0.json.gz"
    _assert_same_model(remote, local)


def test_missing_bucket_names_the_url(gcs, options):
    url = f"gs://no-such-bucket-{uuid.uuid4().hex[:8]}/run"
    with pytest.raises(TraceNotFoundError, match=url):
        load_trace(url, storage_options=options, use_cache=False)


def test_missing_prefix_names_the_url(bucket_with_traces, options):
    url = bucket_with_traces[0] + "-missing"
    with pytest.raises(TraceNotFoundError, match=url):
        load_trace(url, storage_options=options, use_cache=False)


@pytest.mark.parametrize("workers", [1, 2])
def test_storage_options_reach_the_workers(bucket_with_traces, options, monkeypatch, workers):
    # Without the emulator in the environment, only storage_options can point gcsfs at it.
    monkeypatch.delenv("STORAGE_EMULATOR_HOST")
    url, _ = bucket_with_traces
    trace = load_trace(url, storage_options=options, use_cache=False, max_workers=workers)
    assert trace.rank_list() == [0, 1]


def _mark_cache_entries(cache_dir: Path) -> int:
    """Tag every cached RankMeta so that a load served from the cache is recognisable."""
    marked = 0
    for meta_path in cache_dir.glob("*/meta.json"):
        record = msgspec.json.decode(meta_path.read_bytes())
        record["meta"]["other"]["from_cache"] = True
        meta_path.write_bytes(msgspec.json.encode(record))
        marked += 1
    return marked


def test_gs_cache_is_read_and_keyed_by_generation(bucket_with_traces, options, gcs, tmp_path):
    url, local_dir = bucket_with_traces
    cache_dir = tmp_path / "cache"
    first = load_trace(url, storage_options=options, cache_dir=cache_dir, max_workers=2)
    assert "from_cache" not in first[0].meta.other
    assert _mark_cache_entries(cache_dir) == 2

    second = load_trace(url, storage_options=options, cache_dir=cache_dir, max_workers=2)
    assert all(second[r].meta.other.get("from_cache") for r in second)
    for rank in first:
        pd.testing.assert_frame_equal(second[rank].events, first[rank].events)

    # Same bytes uploaded again: a new generation, so a new entry and a fresh parse.
    name = "sampled_rank-0.json.gz"
    gcs.put_file(str(local_dir / name), url.removeprefix("gs://") + "/" + name)
    third = load_trace(url, storage_options=options, cache_dir=cache_dir, max_workers=2)
    assert "from_cache" not in third[0].meta.other
    assert third[1].meta.other.get("from_cache")
    assert TraceCache(cache_dir).info()["entries"] == 3


def test_every_real_gpu_trace_and_the_samples_load_identically_from_gs(
    gcs, options, hta_traces_dir, sample_traces_dir
):
    from conftest import HTA_GPU_TRACE_DIRS

    bucket = f"all-{uuid.uuid4().hex[:8]}"
    gcs.mkdir(bucket)
    dirs = {name: hta_traces_dir / name for name in HTA_GPU_TRACE_DIRS}
    dirs["sample_traces"] = sample_traces_dir
    for name, local in dirs.items():
        for f in sorted(local.iterdir()):
            if f.is_file() and f.name.endswith((".json", ".gz")):
                gcs.put_file(str(f), f"{bucket}/{name}/{f.name}")
    for name, local in dirs.items():
        remote = load_trace(f"gs://{bucket}/{name}", storage_options=options, use_cache=False,
                            max_workers=1, progress=False)
        # the local side through the default cache, the run's (tests/conftest.py): the parity
        # tests parse the same files (a cached rank equals its parse: tests/unit/kineto/test_cache.py)
        _assert_same_model(remote, load_trace(local, max_workers=1, progress=False))
