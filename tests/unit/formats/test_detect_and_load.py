"""Choosing the reader by content, and several other-format files in one load."""

from __future__ import annotations

import gzip
import json

import pytest

from analysis import TraceAnalysis
from analysis.errors import DuplicateRankError
from analysis.formats import detect
from analysis.testing.foreign import (
    NsysGpuOp,
    NsysReport,
    XEvent,
    XLine,
    rocprof_json,
    write_nsys_sqlite,
    xplane,
    xspace_bytes,
)


def test_detect():
    kineto = json.dumps({"traceEvents": []}).encode()
    rocprof = json.dumps(rocprof_json([], {})).encode()
    assert detect(kineto) == "kineto"
    assert detect(gzip.compress(kineto)) == "kineto"
    assert detect(rocprof) == "rocprof"
    assert detect(gzip.compress(rocprof)) == "rocprof"
    assert detect(b"SQLite format 3\x00" + bytes(100)) == "nsys"
    assert detect(xspace_bytes([xplane("/host:CPU", [])])) == "xplane"
    assert detect(b"\x0a\xff\xff\xff\x0f") == "kineto"  # no XPlane after the length
    # an XSpace whose first plane announces more bytes than the file has (a damaged copy, as
    # openxla/xprof's tpu_inference_2.xplane.pb): its reader, not the JSON parser, says so
    damaged = xspace_bytes([xplane("/host:CPU", [])])
    assert detect(damaged[:1] + b"\xff\xff\x7f" + damaged[2:]) == "xplane"


@pytest.fixture
def two_files(tmp_path):
    write_nsys_sqlite(tmp_path / "a.sqlite", NsysReport(gpu=[
        NsysGpuOp(0, 10, device=d, stream=1, correlation=d, pid=1, name="k") for d in (0, 1)]))
    (tmp_path / "b.xplane.pb").write_bytes(xspace_bytes([xplane("/device:GPU:0", [
        XLine(1, "Stream #1", [XEvent("k", 5, 10)])])]))
    return tmp_path


def test_a_folder_of_two_formats_needs_a_mapping_when_ranks_collide(two_files):
    with pytest.raises(DuplicateRankError, match="rank 0"):
        TraceAnalysis(trace_dir=str(two_files), use_cache=False, progress=False)
    ta = TraceAnalysis(trace_files={0: str(two_files / "a.sqlite"),
                                    10: str(two_files / "b.xplane.pb")},
                       use_cache=False, progress=False)
    meta = ta.get_trace_metadata()
    assert meta["rank"].tolist() == [0, 1, 10]
    assert meta["format"].tolist() == ["nsys", "nsys", "xplane"]


def test_the_dask_engine_refuses_a_file_of_several_ranks(two_files):
    pytest.importorskip("distributed")
    from analysis.engines.dask import load_rank
    from analysis.errors import TraceLoadError
    from analysis.io import LoadOptions
    from analysis.kineto.sources import TraceFile

    path = two_files / "a.sqlite"
    with pytest.raises(TraceLoadError, match="holds 2 ranks.*without client="):
        load_rank(TraceFile(str(path), path.stat().st_size, None), LoadOptions(use_cache=False))
