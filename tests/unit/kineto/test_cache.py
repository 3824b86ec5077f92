"""TraceCache: exact round trip, atomic entries, damaged entries, and the loader reading it."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from analysis.errors import CorruptTraceError
from analysis.kineto.cache import (
    PARSER_VERSION,
    PRUNE_GRACE_S,
    CacheWarning,
    TraceCache,
    cache_key,
)
from analysis.kineto.loader import load_trace
from analysis.kineto.parse import parse_trace_bytes

TABLES = ("events", "flows", "collectives")


@pytest.fixture(scope="module")
def rank_trace(hta_traces_dir):
    path = hta_traces_dir / "trace_filter" / "sampled_rank-0.json.gz"
    return parse_trace_bytes(path.read_bytes(), str(path))


@pytest.fixture
def two_ranks(hta_traces_dir, tmp_path) -> Path:
    return Path(shutil.copytree(hta_traces_dir / "trace_filter", tmp_path / "run"))


def _assert_same(a, b) -> None:
    for table in TABLES:
        pd.testing.assert_frame_equal(getattr(a, table), getattr(b, table))
    assert a.meta == b.meta


def test_round_trip_is_exact(rank_trace, tmp_path):
    cache = TraceCache(tmp_path)
    cache.put("e" * 32, rank_trace)
    back = cache.get("e" * 32)
    _assert_same(back, rank_trace)
    assert isinstance(back.events["name"].dtype, pd.CategoricalDtype)
    assert len(back.collectives) > 0  # the object columns were exercised too


def test_missing_key_is_none(tmp_path):
    assert TraceCache(tmp_path).get("0" * 32) is None
    assert TraceCache(tmp_path / "never-created").get("0" * 32) is None


def test_key_depends_on_source_size_version_and_parser():
    base = cache_key("gs://b/r/rank-0.json.gz", 10, "generation=1")
    assert base != cache_key("gs://b/r/rank-1.json.gz", 10, "generation=1")
    assert base != cache_key("gs://b/r/rank-0.json.gz", 11, "generation=1")
    assert base != cache_key("gs://b/r/rank-0.json.gz", 10, "generation=2")
    assert base == cache_key("gs://b/r/rank-0.json.gz", 10, "generation=1")
    assert isinstance(PARSER_VERSION, int)


def test_info_and_clear(rank_trace, tmp_path):
    cache = TraceCache(tmp_path / "c")
    assert cache.info()["entries"] == 0
    cache.put("a" * 32, rank_trace)
    cache.put("b" * 32, rank_trace)
    info = cache.info()
    assert info["entries"] == 2 and info["dir"] == str(tmp_path / "c")
    assert info["bytes"] > 0
    assert cache.clear() == info["bytes"]
    assert cache.info() == {"dir": str(tmp_path / "c"), "entries": 0, "bytes": 0,
                            "unreadable_entries": 0, "unreadable_bytes": 0}


def test_default_dir_follows_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("TRACE_ANALYSIS_CACHE", str(tmp_path / "env-cache"))
    assert TraceCache().dir == tmp_path / "env-cache"
    monkeypatch.delenv("TRACE_ANALYSIS_CACHE")
    assert TraceCache().dir == Path("~/.cache/trace-analysis").expanduser()


def test_half_written_entry_is_never_read(rank_trace, tmp_path):
    cache = TraceCache(tmp_path)
    entry = cache.put("c" * 32, rank_trace)
    (entry / "meta.json").unlink()  # what a crash before the final rename would leave
    assert cache.get("c" * 32) is None
    (tmp_path / ".tmp-leftover").mkdir()
    assert cache.info()["entries"] == 1  # the leftover temp dir is not an entry


def test_damaged_entry_is_ignored_with_a_warning(rank_trace, tmp_path):
    cache = TraceCache(tmp_path)
    entry = cache.put("d" * 32, rank_trace)
    events = entry / "events.arrow"
    events.write_bytes(events.read_bytes()[:100])
    with pytest.warns(CacheWarning, match=str(entry)):
        assert cache.get("d" * 32) is None
    assert not entry.exists()


def test_second_load_reads_only_the_cache(two_ranks, tmp_path):
    cache_dir = tmp_path / "cache"
    first = load_trace(two_ranks, cache_dir=cache_dir, max_workers=2)
    assert TraceCache(cache_dir).info()["entries"] == 2
    # Same size and mtime, unreadable content: only a load served by the cache can succeed.
    path = two_ranks / "sampled_rank-0.json.gz"
    stat = path.stat()
    path.write_bytes(b"\0" * stat.st_size)
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    second = load_trace(two_ranks, cache_dir=cache_dir, max_workers=2)
    for rank in first:
        _assert_same(second[rank], first[rank])
    # what the notebook summary shows as "from the cache"
    assert [second[r].meta.from_cache for r in second] == [True, True]
    assert [first[r].meta.from_cache for r in first] == [False, False]


def test_changed_file_is_parsed_again(two_ranks, tmp_path):
    cache_dir = tmp_path / "cache"
    load_trace(two_ranks, cache_dir=cache_dir, max_workers=1)
    path = two_ranks / "sampled_rank-0.json.gz"
    stat = path.stat()
    path.write_bytes(b"\0" * stat.st_size)  # same size, new mtime
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
    with pytest.raises(CorruptTraceError, match="sampled_rank-0.json.gz"):
        load_trace(two_ranks, cache_dir=cache_dir, max_workers=1)


def test_loader_survives_a_damaged_entry(two_ranks, tmp_path):
    cache_dir = tmp_path / "cache"
    first = load_trace(two_ranks, cache_dir=cache_dir, max_workers=1)
    for meta in cache_dir.glob("*/meta.json"):
        meta.write_text("{broken")
    with pytest.warns(CacheWarning):
        again = load_trace(two_ranks, cache_dir=cache_dir, max_workers=1)
    for rank in first:
        _assert_same(again[rank], first[rank])
    assert TraceCache(cache_dir).info()["entries"] == 2  # rewritten


def test_use_cache_false_writes_nothing(two_ranks, tmp_path):
    load_trace(two_ranks, cache_dir=tmp_path / "cache", use_cache=False, max_workers=1)
    assert TraceCache(tmp_path / "cache").info()["entries"] == 0


def test_repeated_text_is_stored_once_per_value_and_read_back_as_the_same_strings(tmp_path):
    """A collective's ``pg_ranks`` repeats the group's ranks on every row (2.4 kB per row at
    512 ranks): stored dictionary-encoded, read back as the same object column, its rows sharing
    one string per group; a column of mostly distinct text (or with nulls) stays plain text."""
    import pyarrow as pa

    from analysis.kineto.cache import _dtype_record, _read_frame, _write_table

    ranks = str(list(range(512)))
    df = pd.DataFrame({
        "pg_ranks": pd.Series([ranks, "[0, 1]"] * 50, dtype=object),
        "name": pd.Series([f"kernel {i}" for i in range(100)], dtype=object),
        "with_null": pd.Series(["a", None] * 50, dtype=object),
        "seq": range(100),
    })
    path = tmp_path / "collectives.arrow"
    _write_table(df, path)
    with pa.memory_map(str(path), "r") as source:
        schema = pa.ipc.open_file(source).schema
    assert pa.types.is_dictionary(schema.field("pg_ranks").type)
    assert pa.types.is_string(schema.field("name").type)  # 100 distinct values in 100 rows
    assert not pa.types.is_dictionary(schema.field("with_null").type)
    # read back column by column (no nulls), and through Arrow's conversion (a column with nulls)
    plain = df.drop(columns="with_null")
    _write_table(plain, tmp_path / "plain.arrow")
    for back, columns in ((_read_frame(path, _dtype_record(df)), ["pg_ranks", "name", "seq"]),
                          (_read_frame(tmp_path / "plain.arrow", _dtype_record(plain)),
                           list(plain.columns))):
        pd.testing.assert_frame_equal(back[columns], df[columns])
        assert back["pg_ranks"].dtype == object and back["name"].dtype == object
        assert len({id(v) for v in back["pg_ranks"]}) == 2  # one string per group, not per row


def test_tables_read_back_with_their_dtypes_and_numbers_mapped_not_copied(tmp_path, monkeypatch):
    """Columns read straight from the mapped file keep every dtype the record names (numbers,
    booleans, categoricals of text with their categories' dtype, object text, pandas' str) and
    the numbers are read-only views of the file, not heap copies."""
    import analysis.kineto.cache as cache
    from analysis.kineto.cache import _dtype_record, _read_frame, _write_table

    def converted(*_):
        raise AssertionError("read through Arrow's pandas conversion")

    monkeypatch.setattr(cache, "_restore_dtypes", converted)  # the other way's second step

    df = pd.DataFrame({
        "ts": np.arange(1000, dtype=np.int64) * 7,
        "dur": np.linspace(0, 1, 1000),
        "small": np.arange(1000, dtype=np.int32),
        "flag": np.arange(1000) % 3 == 0,
        "cat": pd.Categorical(["kernel", "cpu_op", "cuda_runtime", "kernel"] * 250),
        "name": pd.Series(["a", "b"] * 500, dtype=object),
        "text": pd.array([f"t{i}" for i in range(1000)], dtype="str"),
    })
    _write_table(df, tmp_path / "t.arrow")
    back = _read_frame(tmp_path / "t.arrow", _dtype_record(df))
    pd.testing.assert_frame_equal(back, df, check_exact=True)
    assert str(back["cat"].cat.categories.dtype) == str(df["cat"].cat.categories.dtype)
    assert not back["ts"].to_numpy().flags.writeable  # the mapped file's pages


# ------------------------------------------------------------------------------------------ prune
DAY = 86400.0


def _entry_of_version(cache: TraceCache, key: str, rank_trace, version: int) -> Path:
    """An entry as a parser of ``version`` would have left it."""
    entry = cache.put(key, rank_trace)
    meta = entry / "meta.json"
    meta.write_bytes(meta.read_bytes().replace(
        f'"parser_version":{PARSER_VERSION}'.encode(), f'"parser_version":{version}'.encode()))
    return entry


def _used(entry: Path, at: float) -> None:
    os.utime(entry, (at, at))


def test_prune_removes_what_this_version_cannot_read_and_dead_writers_leftovers(rank_trace,
                                                                                tmp_path):
    cache = TraceCache(tmp_path)
    good = cache.put("a" * 32, rank_trace)
    old = _entry_of_version(cache, "b" * 32, rank_trace, PARSER_VERSION - 1)
    broken = cache.put("c" * 32, rank_trace)
    (broken / "meta.json").unlink()
    dead, busy = tmp_path / ".tmp-dead", tmp_path / ".tmp-busy"  # a crashed and a live writer
    dead.mkdir(), busy.mkdir()
    (dead / "events.arrow").write_bytes(b"x" * 1000)
    now = time.time()
    _used(dead, now - 2 * 3600)
    info = cache.info()
    assert (info["entries"], info["unreadable_entries"]) == (3, 2)

    dry = cache.prune(dry_run=True)
    assert (dry["removed"], dry["unreadable"]) == (2, 2) and old.exists() and dead.exists()
    done = cache.prune()
    assert (done["removed"], done["unreadable"], done["kept"]) == (2, 2, 1)
    assert done["freed"] == dry["freed"] > 1000
    assert good.exists() and not old.exists() and not broken.exists()
    assert not dead.exists() and busy.exists()
    assert cache.get("a" * 32) is not None


def test_prune_by_age_and_by_size_goes_least_recently_used_first(rank_trace, tmp_path):
    cache = TraceCache(tmp_path)
    now = time.time()
    entries = {key: cache.put(key * 32, rank_trace) for key in "abcd"}
    for days, key in ((40, "a"), (20, "b"), (10, "c")):
        _used(entries[key], now - days * DAY)
    _used(entries["d"], now - 60)  # used a minute ago: within the grace period
    size = cache.info()["bytes"] // 4

    done = cache.prune(older_than_s=30 * DAY, now=now)
    assert (done["removed"], done["unused"]) == (1, 1) and not entries["a"].exists()
    # room for one entry: b (oldest) then c go; d stays though over the limit (just used)
    done = cache.prune(max_bytes=size, now=now)
    assert (done["over_size"], done["kept"]) == (2, 1)
    assert not entries["b"].exists() and not entries["c"].exists() and entries["d"].exists()
    # nothing used within the grace period is removed for age either
    assert cache.prune(older_than_s=1, now=now)["removed"] == 0
    assert cache.prune(older_than_s=1, now=now + PRUNE_GRACE_S + 1)["unused"] == 1


def test_opening_or_reading_an_entry_marks_it_used(rank_trace, tmp_path):
    cache = TraceCache(tmp_path)
    entry = cache.put("e" * 32, rank_trace)
    long_ago = time.time() - 10 * DAY
    _used(entry, long_ago)
    assert cache.get("e" * 32) is not None
    assert entry.stat().st_mtime > long_ago + DAY
    _used(entry, long_ago)
    TraceCache.read(entry)
    assert entry.stat().st_mtime > long_ago + DAY
