"""Chunked decoding of traceEvents: the same RankTrace, to the ns, as decoding the file whole."""

from __future__ import annotations

import gzip
import json
from concurrent.futures import ProcessPoolExecutor

import msgspec
import pandas as pd
import pytest
from conftest import HTA_GPU_TRACE_DIRS

from analysis.errors import CorruptTraceError
from analysis.kineto.chunks import chunk_json, cut_points
from analysis.kineto.columns import BadChunk, decode_chunk
from analysis.kineto.parse import parse_trace_bytes
from analysis.testing.synthetic import SynthConfig, write_traces

WHOLE = 2**62  # a chunk size no file reaches: the whole array is one chunk
SMALL = 2048  # bytes per chunk in these tests: many chunks even in small traces


def assert_same_trace(chunked, whole) -> None:
    pd.testing.assert_frame_equal(chunked.events, whole.events, check_exact=True)
    pd.testing.assert_frame_equal(chunked.flows, whole.flows, check_exact=True)
    pd.testing.assert_frame_equal(chunked.collectives, whole.collectives, check_exact=True)
    assert chunked.meta == whole.meta


class CountingMap:
    """A ``map_chunks`` that records how many chunks went through it."""

    def __init__(self):
        self.chunks = 0

    def __call__(self, fn, pieces):
        for piece in pieces:
            self.chunks += 1
            yield fn(piece)


def parse_both(data: bytes, source: str = "trace.json", chunk_bytes: int = SMALL):
    counting = CountingMap()
    chunked = parse_trace_bytes(data, source, chunk_bytes=chunk_bytes, map_chunks=counting)
    whole = parse_trace_bytes(data, source, chunk_bytes=WHOLE)
    return chunked, whole, counting.chunks


def x_event(i: int, **extra) -> dict:
    return {
        "ph": "X",
        "cat": ["cpu_op", "kernel", "cuda_runtime", "Kernel"][i % 4],
        "name": f"op{i % 7}",
        "pid": 1,
        "tid": 2 + i % 3,
        "ts": 1_700_000_000_000_000 + 10 * i + (0.125 if i % 5 == 0 else 0),
        "dur": 5 + i % 4,
        "args": {"stream": 7 if i % 4 == 1 else -1, "correlation": i, "External id": i // 2},
        **extra,
    }


def document(n: int = 400) -> dict:
    events = [x_event(i) for i in range(n)]
    events.insert(0, {"ph": "X", "cat": "Trace", "name": "span", "pid": "Spans", "tid": 0,
                      "ts": 1_700_000_000_000_000, "dur": 99999})
    events += [{"ph": "s", "cat": "ac2g", "id": i, "pid": 1, "tid": 2, "ts": 1_700_000_000_000_000 + i}
               for i in range(0, n, 9)]
    events += [{"ph": "X", "cat": "cpu_op", "name": "record_param_comms", "pid": 1, "tid": 2,
                "ts": 1_700_000_000_000_500 + i, "dur": 3,
                "args": {"Collective name": f"allreduce{i}", "In msg nelems": i, "Group size": 2}}
               for i in range(0, n, 50)]
    # gloo's annotations (shapes decoded in a second pass) and NCCL kernels with collective args
    events += [{"ph": "X", "cat": "user_annotation", "name": "gloo:all_reduce", "pid": 1, "tid": 9,
                "ts": 1_700_000_000_000_700 + i, "dur": 4,
                "args": {"Input Dims": [[4, i + 1]], "Input type": ["float"]}}
               for i in range(0, n, 40)]
    events += [{"ph": "X", "cat": "kernel", "name": "ncclDevKernel_AllReduce", "pid": 0, "tid": 7,
                "ts": 1_700_000_000_000_900 + i, "dur": 6,
                "args": {"stream": 7, "correlation": 10_000 + i, "In msg nelems": i,
                         "Group size": 2, "Process Group Name": "0", "Seq": i}}
               for i in range(0, n, 30)]
    events.sort(key=lambda e: e["name"] if "name" in e else "")  # categories appear late and early
    dist = {"rank": 3, "pg_config": [{"pg_name": "0", "pg_desc": "default_pg"}]}
    return {"schemaVersion": 1, "distributedInfo": dist, "traceEvents": events}


@pytest.mark.parametrize("indent", [1, 2, 4, "\t"], ids=["indent1", "indent2", "indent4", "tab"])
def test_pretty_printed_json_is_chunked_and_identical(indent):
    data = json.dumps(document(), indent=indent).encode()
    chunked, whole, chunks = parse_both(data)
    assert chunks > 5
    assert_same_trace(chunked, whole)
    assert chunked.meta.float_timestamps and chunked.meta.profiler_span is not None
    comms = chunked.collectives
    assert len(comms) == 8 + 10 + 14 and comms["event"].is_unique
    gloo = comms[chunked.events["name"].iloc[comms["event"]].to_numpy() == "gloo:all_reduce"]
    assert sorted(gloo["in_nelems"]) == [4 * (i + 1) for i in range(0, 400, 40)]
    assert set(gloo["dtype"]) == {"float"}
    assert set(comms.loc[comms["pg_name"] == "0", "pg_desc"]) == {"default_pg"}


def test_compact_one_line_json_is_decoded_whole():
    data = json.dumps(document(), separators=(",", ":")).encode()
    assert cut_points(events_array(data), SMALL) is None
    chunked, whole, chunks = parse_both(data)
    assert chunks == 0
    assert_same_trace(chunked, whole)


def test_kineto_layout_with_crlf_line_ends():
    data = json.dumps(document(), indent=2).replace("\n", "\r\n").encode()
    chunked, whole, chunks = parse_both(data)
    assert chunks > 5
    assert_same_trace(chunked, whole)


def events_array(data: bytes) -> memoryview:
    return memoryview(msgspec.json.decode(data, type=dict[str, msgspec.Raw])["traceEvents"])


def test_a_cut_inside_an_event_falls_back_to_the_whole_decode():
    # each event holds a list of objects written one per line at the events' own indentation,
    # after a comma: some cuts land inside an event, those chunks do not decode on their own,
    # and the file is decoded whole
    lines = []
    for i in range(300):
        event = json.dumps({k: v for k, v in x_event(i).items() if k != "args"})
        inner = ",\n  ".join(json.dumps({"k": k}) for k in range(3))
        lines.append(event[:-1] + f', "args": {{"correlation": {i}, "list": [\n  {inner}]}}}}')
    data = ('{"traceEvents": [\n  ' + ",\n  ".join(lines) + "\n]}").encode()
    array = events_array(data)
    ranges = cut_points(array, SMALL)
    assert ranges is not None
    bad = 0
    for where in ranges:
        try:
            decode_chunk(chunk_json(array, where))
        except BadChunk:
            bad += 1
    assert bad > 0
    chunked, whole, chunks = parse_both(data)
    assert chunks >= 1
    assert_same_trace(chunked, whole)
    assert chunked.events["correlation"].tolist() == list(range(300))


def test_an_error_in_a_later_chunk_names_the_event_in_the_whole_file():
    doc = document()
    doc["traceEvents"][350]["dur"] = "soon"
    doc["traceEvents"][350]["cat"] = "kernel"
    data = json.dumps(doc, indent=2).encode()
    with pytest.raises(CorruptTraceError, match=r"traceEvents\[350\]\.dur: expected a number"):
        parse_trace_bytes(data, "bad.json", chunk_bytes=SMALL)


def test_chunks_decoded_in_worker_processes():
    data = gzip.compress(json.dumps(document(2000), indent=2).encode())
    with ProcessPoolExecutor(2) as pool:
        chunked = parse_trace_bytes(data, "t.json.gz", chunk_bytes=16384, map_chunks=pool.map)
    assert_same_trace(chunked, parse_trace_bytes(data, "t.json.gz", chunk_bytes=WHOLE))


def test_synthetic_trace_layout_is_chunked(tmp_path):
    # the synthesiser writes one event per line at column 0
    path, _ = write_traces(SynthConfig(ranks=2, events_per_rank=5000, ns_resolution=True), tmp_path, gzip=False)
    chunked, whole, chunks = parse_both(path.read_bytes(), str(path), chunk_bytes=64 * 1024)
    assert chunks > 5
    assert_same_trace(chunked, whole)


@pytest.mark.parametrize("folder", HTA_GPU_TRACE_DIRS)
def test_real_traces_chunked_equal_whole(hta_traces_dir, folder):
    for path in sorted((hta_traces_dir / folder).glob("*.gz")):
        data = path.read_bytes()
        chunked, whole, chunks = parse_both(data, str(path), chunk_bytes=256 * 1024)
        text = gzip.decompress(data)
        if len(text) > 1024 * 1024 and text.count(b"\n") > 1000:  # Kineto's layout, not compact
            assert chunks > 2, f"{path} was not chunked"
        assert_same_trace(chunked, whole)
