"""find_trace_files / read_trace_bytes: plain local paths (no fsspec) equal fsspec's local view."""

from __future__ import annotations

import os

import pytest

from analysis.errors import TraceNotFoundError
from analysis.kineto.sources import find_trace_files, read_trace_bytes


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
