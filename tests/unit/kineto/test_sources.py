"""The bounded reader (analysis.kineto.sources): read limits, streamed gunzip, sniffing."""

from __future__ import annotations

import gzip
import os

import pytest

from analysis.errors import (
    ConfigError,
    CorruptInputError,
    CorruptTraceError,
    InputTooLargeError,
    NotARegularFileError,
    TraceNotFoundError,
    printable,
)
from analysis.kineto.sources import (
    READ_LIMIT_ENV,
    find_trace_files,
    gunzip_bounded,
    read_input_bytes,
    read_limit,
    read_trace_bytes,
    sniff_trace,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [("100", 100), ("2K", 2048), ("3M", 3 * 2**20), ("1G", 2**30), ("2GiB", 2 * 2**30),
     (" 4 gb ", 4 * 2**30)],
)
def test_read_limit_from_the_environment(monkeypatch, text, expected):
    monkeypatch.setenv(READ_LIMIT_ENV, text)
    assert read_limit() == expected


@pytest.mark.parametrize("bad", ["lots", "0", "-5", "1.5G", ""])
def test_bad_read_limit_is_a_config_error(monkeypatch, bad):
    monkeypatch.setenv(READ_LIMIT_ENV, bad)
    with pytest.raises(ConfigError, match=READ_LIMIT_ENV):
        read_limit()


def test_read_limit_argument_wins_and_is_checked(monkeypatch):
    monkeypatch.setenv(READ_LIMIT_ENV, "1K")
    assert read_limit(5000) == 5000
    with pytest.raises(ConfigError):
        read_limit(True)
    monkeypatch.delenv(READ_LIMIT_ENV)
    assert read_limit() > 0  # a share of the available memory


def test_gunzip_limit_boundary():
    text = b"x" * 1000
    data = gzip.compress(text)
    assert gunzip_bounded(data, "f", limit=1000) == text  # exactly at the limit
    with pytest.raises(InputTooLargeError, match="f: the decompressed gzip data is larger"):
        gunzip_bounded(data, "f", limit=999)


def test_gunzip_members_padding_and_damage():
    two = gzip.compress(b"ab") + gzip.compress(b"cd")
    assert gunzip_bounded(two + b"\0" * 7, "f", limit=100) == b"abcd"
    with pytest.raises(CorruptInputError, match="unexpected bytes after the data"):
        gunzip_bounded(two + b"junk", "f", limit=100)
    with pytest.raises(CorruptInputError, match="truncated or corrupt"):
        gunzip_bounded(two[:-6], "f", limit=100)
    with pytest.raises(CorruptTraceError):
        gunzip_bounded(two[:-6], "f", limit=100, error=CorruptTraceError)
    assert gunzip_bounded(b"plain", "f", limit=1) == b"plain"  # not gzip: left as it is


def test_a_bomb_stops_at_the_limit_without_expanding():
    bomb = gzip.compress(b"\0" * (64 * 2**20), 9)  # 64 MiB in ~64 KiB
    with pytest.raises(InputTooLargeError):
        gunzip_bounded(bomb, "bomb.gz", limit=2**20)


@pytest.mark.parametrize(
    ("head", "ok"),
    [(b'{"traceEvents"', True), (b"\xef\xbb\xbf \n {", True), (b"[1]", True),
     (b"\x1f\x8b\x08", True), (b"\0\0\0", False), (b"PK\x03\x04", False), (b"hello", False)],
)
def test_sniff_trace(head, ok):
    assert (sniff_trace(head) is None) == ok


def test_reader_limits_and_file_types(tmp_path):
    path = tmp_path / "t.json"
    path.write_bytes(b"{" + b" " * 99)
    assert len(read_trace_bytes(str(path), limit=100)) == 100
    with pytest.raises(InputTooLargeError, match=r"t\.json: the file \(100 bytes\) is larger"):
        read_trace_bytes(str(path), limit=99)
    (tmp_path / "z.json").write_bytes(b"\0" * 10)
    with pytest.raises(CorruptTraceError, match="neither gzip data nor JSON"):
        read_trace_bytes(str(tmp_path / "z.json"))
    empty = tmp_path / "e"
    empty.write_bytes(b"")
    with pytest.raises(CorruptInputError, match="empty") as err:
        read_input_bytes(str(empty), trace=False)
    assert not isinstance(err.value, CorruptTraceError)  # neutral class for non-traces
    with pytest.raises(NotARegularFileError, match="directory"):
        read_input_bytes(str(tmp_path))


def test_printable_escapes_control_characters():
    assert printable("a\nb\rc\x1b[31m") == "a\\nb\\rc\\x1b[31m"
    assert printable("plain name.json") == "plain name.json"


def test_unreachable_gs_fails_fast_and_quietly(monkeypatch, capfd):
    """An endpoint that refuses connections: our error, and no gcsfs retry traceback on stderr."""
    pytest.importorskip("gcsfs")
    from analysis.errors import UnreachableError
    from analysis.kineto.loader import load_trace

    monkeypatch.setenv("TRACE_ANALYSIS_REMOTE_TIMEOUT", "2")
    options = {"endpoint_url": "http://127.0.0.1:9", "token": "anon"}  # port 9: nothing listens
    with pytest.raises(UnreachableError, match=r"gs://bucket/run: (no answer within 2 s|cannot connect)"):
        load_trace("gs://bucket/run", storage_options=options, use_cache=False, progress=False)
    assert "Traceback" not in capfd.readouterr().err


def test_remote_timeout_setting(monkeypatch):
    from analysis.kineto.sources import REMOTE_TIMEOUT_ENV, remote_timeout

    monkeypatch.setenv(REMOTE_TIMEOUT_ENV, "2.5")
    assert remote_timeout() == 2.5
    for bad in ("0", "-1", "soon", "nan"):
        monkeypatch.setenv(REMOTE_TIMEOUT_ENV, bad)
        with pytest.raises(ConfigError, match=REMOTE_TIMEOUT_ENV):
            remote_timeout()


# --- plain local paths without fsspec (start-up) ---






@pytest.fixture
def trace_dir(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "rank-0.pt.trace.json.gz").write_bytes(b"\x1f\x8b zero")
    (run / "rank-1.json").write_bytes(b"{}" * 10)
    (run / "notes.txt").write_text("not a trace")
    (run / "sub.json").mkdir()  # a directory named like a trace is not a file
    os.symlink(run / "rank-1.json", run / "link.json")
    os.symlink(run / "missing.json", run / "dangling.json")
    return run


@pytest.mark.parametrize("spelling", ["absolute", "relative", "dot-relative", "trailing slash"])
def test_local_paths_give_what_fsspec_gives(trace_dir, monkeypatch, spelling):
    monkeypatch.chdir(trace_dir.parent)
    given = {"absolute": str(trace_dir), "relative": "run", "dot-relative": "./run",
             "trailing slash": str(trace_dir) + "/"}[spelling]
    plain = find_trace_files(given)
    by_fsspec = find_trace_files(f"file://{trace_dir}")
    assert plain == by_fsspec
    # links in a listed directory are not files to fsspec, and so not to us
    assert [os.path.basename(f.url) for f in plain] == ["rank-0.pt.trace.json.gz", "rank-1.json"]
    assert all(f.version.startswith("mtime=") and f.size > 0 for f in plain)


def test_single_files_and_bytes(trace_dir):
    path = str(trace_dir / "rank-1.json")
    assert find_trace_files(trace_files=[path]) == find_trace_files(trace_files=[f"file://{path}"])
    link = str(trace_dir / "link.json")  # a link named on its own is followed, by both
    assert find_trace_files(link) == find_trace_files(f"file://{link}")
    assert read_trace_bytes(path) == read_trace_bytes(f"file://{path}") == b"{}" * 10


def test_missing_local_path_is_not_found(tmp_path):
    with pytest.raises(TraceNotFoundError, match="no such file"):
        find_trace_files(str(tmp_path / "nothing"))
    with pytest.raises(TraceNotFoundError, match="no such file"):
        read_trace_bytes(str(tmp_path / "nothing.json"))
