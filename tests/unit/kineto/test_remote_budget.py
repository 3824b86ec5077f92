"""The remote time budget ($TRACE_ANALYSIS_REMOTE_TIMEOUT) bounds the whole remote phase:
connecting (credentials), file information and listing together, not each step on its own."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import time

import fsspec
import pytest
from fsspec.asyn import AsyncFileSystem
from paths import REPO_ROOT

from analysis.errors import UnreachableError
from analysis.kineto.sources import find_trace_files


class _SlowStore(AsyncFileSystem):
    """Connecting takes ``connect_s`` (as google.auth looking for credentials does), each file
    information request ``info_s``."""

    protocol = "slowstore"
    connect_s = 0.0
    info_s = 0.0
    cachable = False

    def __init__(self, **kwargs):
        time.sleep(type(self).connect_s)
        super().__init__(asynchronous=False, **kwargs)

    async def _info(self, path, **kwargs):
        await asyncio.sleep(type(self).info_s)
        return {"name": path, "size": 10, "type": "file"}


@pytest.fixture
def slow_store(monkeypatch):
    fsspec.register_implementation("slowstore", _SlowStore, clobber=True)
    monkeypatch.setenv("TRACE_ANALYSIS_REMOTE_TIMEOUT", "1")
    monkeypatch.setattr(_SlowStore, "connect_s", 0.0)
    monkeypatch.setattr(_SlowStore, "info_s", 0.0)
    return _SlowStore


def test_a_store_within_the_budget_answers(slow_store):
    slow_store.connect_s = slow_store.info_s = 0.2
    [found] = find_trace_files("slowstore://bucket/rank-0.json")
    assert found.size == 10


@pytest.mark.parametrize("connect_s, info_s", [(5.0, 0.0), (0.7, 0.7)])
def test_connecting_and_file_information_share_one_budget(slow_store, connect_s, info_s):
    # (0.7, 0.7): each step is under the 1 s budget, both together are not
    slow_store.connect_s, slow_store.info_s = connect_s, info_s
    start = time.monotonic()
    with pytest.raises(UnreachableError, match=r"slowstore://bucket/x: no answer within 1 s"):
        find_trace_files("slowstore://bucket/x")
    assert time.monotonic() - start < connect_s + info_s  # it gave up at the budget


def test_cli_against_a_store_that_never_answers_fails_at_the_budget(tmp_path):
    # a GCS endpoint that accepts connections and never answers (gcsfs reaches it through
    # STORAGE_EMULATOR_HOST, as it reaches the emulator in the other tests)
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(16)
        env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "TRACE_ANALYSIS_REMOTE_TIMEOUT": "2",
               "STORAGE_EMULATOR_HOST": f"http://127.0.0.1:{server.getsockname()[1]}",
               "TRACE_ANALYSIS_CACHE": str(tmp_path / "cache")}
        start = time.monotonic()
        proc = subprocess.run([sys.executable, "-m", "analysis", "summary", "gs://no-bucket/x"],
                              capture_output=True, text=True, env=env, timeout=60)
        wall = time.monotonic() - start
    assert proc.returncode == 1
    assert "error: gs://no-bucket/x: no answer within 2 s" in proc.stderr
    assert wall < 2 + 5  # the budget, plus the interpreter's start-up; never a multiple of it


def test_a_missing_bucket_fails_fast_with_not_found(gcs_emulator, tmp_path):
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "TRACE_ANALYSIS_REMOTE_TIMEOUT": "5",
           "TRACE_ANALYSIS_CACHE": str(tmp_path / "cache")}
    proc = subprocess.run([sys.executable, "-m", "analysis", "summary", "gs://nonexistent-bucket/x"],
                          capture_output=True, text=True, env=env, timeout=60)
    assert proc.returncode == 1
    assert "error: gs://nonexistent-bucket/x: no such file, directory, bucket or object" in proc.stderr
    assert "no answer within" not in proc.stderr


class _NoJvmStore(AsyncFileSystem):
    """A filesystem that cannot start, as pyarrow's HDFS without a JVM: an ``OSError`` listing
    every path it tried (12 kB of text)."""

    protocol = "nojvm"
    cachable = False

    def __init__(self, **kwargs):
        raise OSError("Unable to load libjvm " + " ".join(
            f"dlopen(/usr/lib/jvm/java-{v}/libjvm.so) failed: no such file" for v in range(200)))


def test_a_filesystem_that_cannot_start_is_our_error_in_a_line():
    """hdfs:// without a JVM gave pyarrow's OSError as a foreign exception (the CLI's
    last-resort handler): the project's TraceLoadError naming the URL, its text shortened."""
    from analysis.errors import TraceLoadError

    fsspec.register_implementation("nojvm", _NoJvmStore, clobber=True)
    with pytest.raises(TraceLoadError, match=r"nojvm://host/t: cannot open this URL with fsspec: "
                                             r"Unable to load libjvm") as info:
        find_trace_files("nojvm://host/t")
    assert len(str(info.value)) < 400
