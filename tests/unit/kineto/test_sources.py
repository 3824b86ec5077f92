"""Finding and sniffing trace files (analysis.kineto.sources); the bounded reader itself is
analysis.io's (tests/unit/io/test_io_reads.py)."""

from __future__ import annotations

import os

import pytest

from analysis.errors import (
    CorruptInputError,
    CorruptTraceError,
    InputTooLargeError,
    NotARegularFileError,
    TraceLoadWarning,
    TraceNotFoundError,
    printable,
)
from analysis.io import read_input_bytes
from analysis.kineto.sources import find_trace_files, read_trace_bytes, sniff_trace


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
    with pytest.warns(TraceLoadWarning, match="sub.json: a directory; dangling.json: a symbolic"):
        plain = find_trace_files(given)
    with pytest.warns(TraceLoadWarning, match="2 entries named like a trace"):
        by_fsspec = find_trace_files(f"file://{trace_dir}")
    assert plain == by_fsspec
    # a link to a file of the same directory is not a second file
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


def test_a_directory_of_links_to_traces_is_read(tmp_path):
    """Folders of symbolic links to a job's traces (common on clusters) read as "no trace files":
    fsspec lists a link as "other". Links are followed as when named alone; a dangling one is
    named when nothing else is found."""
    job = tmp_path / "job"
    job.mkdir()
    (job / "rank-0.json").write_bytes(b"{}" * 3)
    (job / "rank-1.json").write_bytes(b"{}" * 5)
    links = tmp_path / "links"
    links.mkdir()
    for r in (0, 1):
        os.symlink(job / f"rank-{r}.json", links / f"rank-{r}.json")
    plain = find_trace_files(str(links))
    assert plain == find_trace_files(f"file://{links}")
    assert [(os.path.basename(f.url), f.size) for f in plain] == [("rank-0.json", 6), ("rank-1.json", 10)]
    assert all(f.url.startswith(str(links)) for f in plain)  # named by the link, read through it
    dangling = tmp_path / "dangling"
    dangling.mkdir()
    os.symlink(tmp_path / "gone.json", dangling / "rank-0.json")
    for given in (str(dangling), f"file://{dangling}"):
        with pytest.raises(TraceNotFoundError, match="1 symbolic link.*point to no file"):
            find_trace_files(given)


def test_an_entry_named_like_a_trace_that_is_no_file_is_said(tmp_path):
    """A FIFO or a dangling link among a job's traces was dropped without a word (that rank
    just missing from every result): a load warning names each."""
    (tmp_path / "rank-0.json").write_bytes(b"{}")
    os.mkfifo(tmp_path / "rank-1.json")
    os.symlink(tmp_path / "gone.json.gz", tmp_path / "rank-2.json.gz")
    (tmp_path / "rank-3.json").mkdir()
    for given in (str(tmp_path), f"file://{tmp_path}"):
        with pytest.warns(TraceLoadWarning, match=r"3 entries named like a trace but not a "
                          r"regular file, not read: rank-1\.json: a FIFO \(named pipe\); "
                          r"rank-3\.json: a directory; rank-2\.json\.gz: a symbolic link to no "
                          r"file"):
            found = find_trace_files(given)
        assert [os.path.basename(f.url) for f in found] == ["rank-0.json"]
