"""parse_trace_bytes: one Kineto trace file's bytes → RankTrace, exact, or a clear error."""

from __future__ import annotations

import decimal
import gzip
import json
from pathlib import Path

import numpy as np
import pytest
from conftest import HTA_GPU_TRACE_DIRS

from analysis.errors import CorruptTraceError, NotATraceError
from analysis.kineto.model import COLLECTIVE_COLUMNS, EVENT_COLUMNS, FLOW_COLUMNS, LEGACY_CATEGORIES
from analysis.kineto.parse import parse_trace_bytes

# Every folder of ../shared/traces/hta whose files are Kineto traces.
KINETO_TRACE_DIRS = HTA_GPU_TRACE_DIRS + [
    "cpu_only",
    "rank_non_gpu",
    "rank_unavailable",
    "distributed_info_unavailable",
    "execution_trace",
]


def kineto_files(root: Path, folder: str) -> list[Path]:
    files = sorted(p for p in (root / folder).glob("*.gz") if not p.name.endswith("_et.json.gz"))
    assert files, f"no traces in {root / folder}"
    return files


def dtypes(frame) -> dict[str, str]:
    return {c: str(t) for c, t in frame.dtypes.items()}


def as_bytes(doc, compress: bool = False) -> bytes:
    data = json.dumps(doc).encode()
    return gzip.compress(data) if compress else data


def trace(events, **top) -> dict:
    return {"schemaVersion": 1, "traceEvents": events, **top}


def x_event(name="op", cat="cpu_op", ts=10, dur=5, **extra) -> dict:
    return {"ph": "X", "cat": cat, "name": name, "pid": 1, "tid": 2, "ts": ts, "dur": dur, **extra}


# --- the independent slow reference: json.loads with exact decimals, a dict per event ------------


def reference_rows(data: bytes) -> tuple[dict, list[dict]]:
    doc = json.loads(gzip.decompress(data), parse_float=decimal.Decimal)
    rows = [
        e
        for e in doc["traceEvents"]
        if e.get("dur") is not None
        and e.get("cat") is not None
        and e.get("ts") is not None
        and e["cat"] != "Trace"
    ]
    return doc, rows


def reference_int(value) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return -1


def us_to_ns(value) -> int:
    return int(decimal.Decimal(value) * 1000)


# the big ones take seconds in the json.loads reference, not in the parser
BIG_TRACE_DIRS = {"df_index_resolver", "negative_queue_length_values_check"}


@pytest.mark.parametrize(
    "folder",
    [
        pytest.param(f, marks=pytest.mark.slow) if f in BIG_TRACE_DIRS else f
        for f in KINETO_TRACE_DIRS
    ],
)
def test_real_traces_match_the_slow_reference(hta_traces_dir, folder):
    for path in kineto_files(hta_traces_dir, folder):
        data = path.read_bytes()
        result = parse_trace_bytes(data, str(path))
        doc, rows = reference_rows(data)
        events = result.events

        assert dtypes(events) == EVENT_COLUMNS
        assert dtypes(result.flows) == FLOW_COLUMNS
        assert dtypes(result.collectives) == COLLECTIVE_COLUMNS
        assert len(events) == len(rows) > 0
        assert events["name"].astype(str).tolist() == [e["name"] for e in rows]
        assert events["cat"].astype(str).tolist() == [
            LEGACY_CATEGORIES.get(e["cat"], e["cat"]) for e in rows
        ]
        args = [e.get("args", {}) for e in rows]
        assert events["stream"].tolist() == [reference_int(a.get("stream", -1)) for a in args]
        assert events["correlation"].tolist() == [a.get("correlation", -1) for a in args]
        assert events["external_id"].tolist() == [a.get("External id", -1) for a in args]
        assert events["ts"].tolist() == [us_to_ns(e["ts"]) for e in rows]
        assert events["dur"].tolist() == [us_to_ns(e["dur"]) for e in rows]

        dist = doc.get("distributedInfo", {})
        assert result.meta.rank == dist.get("rank", -1)
        assert result.meta.world_size == dist.get("world_size")
        assert result.meta.source == str(path)
        flows = [e for e in doc["traceEvents"] if e.get("ph") in ("s", "f", "t")]
        assert len(result.flows) == len(flows)
        described = any(e["cat"] == "kernel" and "Collective name" in e.get("args", {})
                        for e in rows)
        comms = [e for e in rows if e["name"] == "record_param_comms"
                 or (e["cat"] == "kernel" and "Collective name" in e.get("args", {}))
                 or e["name"].startswith("gloo:")
                 # ProcessGroupNCCL's annotations: kept where no kernel says what it runs
                 or (e["name"].startswith("nccl:") and not described)]
        assert len(result.collectives) == len(comms)


def test_nanosecond_fractions_are_kept_exactly(hta_traces_dir):
    path = kineto_files(hta_traces_dir, "ns_resolution_trace")[0]
    result = parse_trace_bytes(path.read_bytes(), str(path))
    assert result.meta.float_timestamps
    # a float64 of an epoch µs value cannot hold these: the ns digits must survive
    assert (result.events["ts"] % 1000 != 0).mean() > 0.5


def test_collectives_of_an_nccl_trace(hta_traces_dir):
    path = kineto_files(hta_traces_dir, "nccl_parser_config")[0]
    result = parse_trace_bytes(path.read_bytes(), str(path))
    comms = result.collectives
    # the CPU-side record_param_comms and the NCCL kernels carrying the same args make rows
    rows = result.events.iloc[comms["event"]]
    ops = (rows["name"] == "record_param_comms").to_numpy()
    assert ops.sum() == 27 and (rows.loc[~ops, "cat"] == "kernel").all()
    assert comms[ops]["collective"].value_counts().to_dict() == {
        "allreduce": 15,
        "broadcast": 6,
        "wait": 6,
    }
    assert comms[~ops]["collective"].value_counts().to_dict() == {"allreduce": 15, "broadcast": 6}
    assert (comms["seq"] == -1).all()  # this NCCL version writes no sequence numbers
    assert set(comms["group_size"]) == {1, 2}
    assert (comms["in_nelems"] >= 0).all()
    assert result.meta.backend == "nccl"
    assert result.meta.process_groups[0]["ranks"] == [0, 1]


def test_execution_trace_and_memory_timeline_are_not_traces(hta_traces_dir):
    et = hta_traces_dir / "execution_trace" / "benchmark_simple_add_et.json.gz"
    with pytest.raises(NotATraceError, match="execution trace") as info:
        parse_trace_bytes(et.read_bytes(), str(et))
    assert str(et) in str(info.value)

    memory = hta_traces_dir / "memory_analysis" / "memory_timeline.raw.gz"
    with pytest.raises(NotATraceError, match="memory timeline") as info:
        parse_trace_bytes(memory.read_bytes(), str(memory))
    assert str(memory) in str(info.value)


# --- bad input ---------------------------------------------------------------------------------


def test_truncated_gzip(hta_traces_dir):
    path = kineto_files(hta_traces_dir, "trace_filter")[0]
    data = path.read_bytes()
    with pytest.raises(CorruptTraceError, match="truncated or corrupt gzip") as info:
        parse_trace_bytes(data[: len(data) // 2], "gs://bucket/rank-0.json.gz")
    assert "gs://bucket/rank-0.json.gz" in str(info.value)


@pytest.mark.parametrize(
    "data, expected, reason",
    [
        (b"\x1f\x8b" + b"this is not deflate data" * 4, CorruptTraceError, "corrupt gzip"),
        (gzip.compress(b"\x00\x07 binary garbage \xff\xfe", mtime=0), CorruptTraceError, "invalid JSON"),
        (b'{"traceEvents": [}', CorruptTraceError, "line 1, column 18"),
        (b'{"traceEvents": [\n{"ph": "X",\n "ts": 1 2}]}', CorruptTraceError, "line 3"),
        (b'{"traceEvents": [{"ph": "X", "ts": 1', CorruptTraceError, "ends early"),
        (b"", CorruptTraceError, "empty"),
        (gzip.compress(b"", mtime=0), CorruptTraceError, "empty"),
        (b'{"traceEvents": [{"name": "\xff\xfe"}]}', CorruptTraceError, "UTF-8"),
        (b'{"traceEvents": [], "distributedInfo": {"a": "\xff"}}', CorruptTraceError, "UTF-8"),
        (b"[1, 2, 3]", NotATraceError, "array"),
        (b'"a string"', NotATraceError, "str"),
        (b'{"nodes": [], "schema": "1.0.1"}', NotATraceError, "execution trace"),
        (b'{"foo": 1}', NotATraceError, "'foo'"),
        (b'{"traceEvents": 5}', CorruptTraceError, r"\$\.traceEvents"),
        (b'{"traceEvents": [1]}', CorruptTraceError, r"\$\.traceEvents\[0\]"),
        (b'{"traceEvents": [{"pid": [1]}]}', CorruptTraceError, r"\$\.traceEvents\[0\]\.pid"),
        (b'{"traceEvents": [{"args": 7}]}', CorruptTraceError, r"traceEvents\[0\]\.args"),
        (
            b'{"traceEvents": [{"cat": "x", "ts": 1, "dur": 1, "args": {"stream": {}}}]}',
            CorruptTraceError,
            r"traceEvents\[0\]\.args\.stream",
        ),
    ],
)
def test_bad_input_names_the_file_and_the_reason(data, expected, reason):
    source = "/data/run 7/rank-3.pt.trace.json"
    with pytest.raises(expected, match=reason) as info:
        parse_trace_bytes(data, source)
    assert info.value.path == source
    assert source in str(info.value)


@pytest.mark.parametrize("field, value", [("ts", "12"), ("dur", [1]), ("ts", True), ("dur", {})])
def test_a_kept_event_with_a_non_numeric_time_is_corrupt(field, value):
    events = [x_event(), x_event(**{field: value})]
    with pytest.raises(CorruptTraceError, match=rf"traceEvents\[1\]\.{field}: expected a number"):
        parse_trace_bytes(as_bytes(trace(events)), "t.json")


def test_times_out_of_range_are_corrupt():
    events = [x_event(ts=10**20)]
    with pytest.raises(CorruptTraceError, match="out of range"):
        parse_trace_bytes(as_bytes(trace(events)), "t.json")


# --- what the parser keeps and how -------------------------------------------------------------


def test_rows_kept_like_hta_in_file_order():
    events = [
        {"ph": "M", "name": "process_name", "pid": 1, "tid": 0, "ts": 0, "args": {"name": "p"}},
        x_event("b", ts=30),
        {"ph": "X", "name": "no cat", "pid": 1, "tid": 1, "ts": 5, "dur": 1},
        x_event("a", ts=20),
        x_event("null dur", dur=None),
        {"ph": "i", "cat": "cpu_instant_event", "name": "instant", "ts": 7, "s": "t"},
        x_event("profiler span", cat="Trace", ts=1, dur=100),
        x_event("no ts", ts=None),
        x_event("c", ts=25, unknown_field={"nested": [1, 2]}),
    ]
    result = parse_trace_bytes(as_bytes(trace(events)), "t.json")
    assert result.events["name"].tolist() == ["b", "a", "c"]
    assert result.events["ts"].tolist() == [30_000, 20_000, 25_000]
    assert result.meta.profiler_span == (1_000, 100_000)


def test_legacy_2021_categories_are_normalised():
    events = [
        x_event("ProfilerStep#1", cat="Trace", ts=0, dur=100),
        x_event("aten::mm", cat="Operator"),
        x_event("cudaLaunchKernel", cat="Runtime", args={"correlation": 7, "External id": 3}),
        x_event("sgemm", cat="Kernel", args={"stream": 7, "correlation": 7, "device": 0}),
        x_event("Memcpy HtoD", cat="Memcpy", args={"stream": 7, "correlation": 8}),
        x_event("Memset", cat="Memset"),
        x_event("fn", cat="Python"),
    ]
    result = parse_trace_bytes(as_bytes(trace(events)), "t.json")
    assert result.events["cat"].astype(str).tolist() == [
        "cpu_op",
        "cuda_runtime",
        "kernel",
        "gpu_memcpy",
        "gpu_memset",
        "python_function",
    ]
    assert result.events["stream"].tolist() == [-1, -1, 7, 7, -1, -1]
    assert result.events["correlation"].tolist() == [-1, 7, 7, 8, -1, -1]
    assert result.events["external_id"].tolist() == [-1, 3, -1, -1, -1, -1]
    assert result.events["device"].tolist() == [-1, -1, 0, -1, -1, -1]


def test_string_pids_tids_and_streams():
    events = [
        x_event(pid="Spans", tid=""),
        x_event(pid="12", tid="34", args={"stream": "7"}),
        x_event(pid=5, tid=6, args={"stream": "not a number", "correlation": "9"}),
        x_event(pid=5.0, tid=None, args={"stream": 3.0, "device": None}),
    ]
    result = parse_trace_bytes(as_bytes(trace(events)), "t.json")
    assert result.events["pid"].tolist() == [-1, 12, 5, 5]
    assert result.events["tid"].tolist() == [-1, 34, 6, -1]
    assert result.events["stream"].tolist() == [-1, 7, -1, 3]
    assert result.events["correlation"].tolist() == [-1, -1, 9, -1]
    assert result.events["device"].tolist() == [-1, -1, -1, -1]


def test_fractional_and_exponent_timestamps_are_exact():
    text = (
        b'{"traceEvents": ['
        b'{"ph": "X", "cat": "kernel", "name": "a", "ts": 1712195495406752.797, "dur": 1.5},'
        b'{"ph": "X", "cat": "kernel", "name": "b", "ts": 1.5e3, "dur": 2E-3},'
        b'{"ph": "X", "cat": "kernel", "name": "c", "ts": -0.001, "dur": 0.0000004},'
        b'{"ph": "X", "cat": "kernel", "name": "d", "ts": 12, "dur": 1.0000000001}'
        b"]}"
    )
    result = parse_trace_bytes(text, "t.json")
    assert result.events["ts"].tolist() == [1712195495406752797, 1_500_000, -1, 12_000]
    assert result.events["dur"].tolist() == [1500, 2, 0, 1000]
    assert result.meta.float_timestamps


def test_float_timestamps_follow_every_event_ts():
    ints = [x_event(ts=10), x_event(ts=20, dur=1.5)]
    assert not parse_trace_bytes(as_bytes(trace(ints)), "t.json").meta.float_timestamps
    # a dropped metadata event with a fractional ts still makes HTA's ts column float
    meta_event = {"ph": "M", "name": "thread_name", "ts": 0.5}
    assert parse_trace_bytes(as_bytes(trace(ints + [meta_event])), "t").meta.float_timestamps
    # and so does an event without ts (NaN)
    no_ts = {"ph": "M", "name": "thread_name"}
    assert parse_trace_bytes(as_bytes(trace(ints + [no_ts])), "t").meta.float_timestamps


@pytest.mark.parametrize(
    "text, rank",
    [
        (b'{"distributedInfo": {"rank":3}, "traceEvents": []}', 3),
        (b'{"distributedInfo": {"rank": 3}, "traceEvents": []}', 3),
        (b'{"distributedInfo": {"rank": "3"}, "traceEvents": []}', 3),
        (
            b'{"traceEvents": [], "distributedInfo":{"backend":"nccl","rank":12,"world_size":16}}',
            12,
        ),
    ],
)
def test_rank_from_distributed_info(text, rank):
    result = parse_trace_bytes(text, "t.json")
    assert result.meta.rank == rank
    assert result.meta.rank_origin == "distributedInfo"


@pytest.mark.parametrize(
    "top", [{}, {"distributedInfo": {"backend": "nccl"}}, {"distributedInfo": [1]}]
)
def test_no_rank_in_the_trace(top):
    result = parse_trace_bytes(as_bytes(trace([x_event()], **top)), "t.json")
    assert result.meta.rank == -1
    assert result.meta.rank_origin == "unknown"
    assert result.meta.world_size is None


def test_metadata_fields():
    pg = [{"pg_name": "0", "pg_desc": "default_pg", "pg_size": 2, "ranks": [0, 1]}]
    dist = {"backend": "nccl", "rank": 1, "world_size": 2, "pg_count": 1, "pg_config": pg}
    doc = trace(
        [x_event()],
        distributedInfo=dist,
        deviceProperties=[{"id": 0, "name": "NVIDIA H100"}],
        baseTimeNanoseconds=1700000000000000000,
        displayTimeUnit="ms",
        traceName="rank1.json",
        huge=["x" * 100] * 1000,
    )
    meta = parse_trace_bytes(as_bytes(doc, compress=True), "t.json.gz").meta
    assert (meta.rank, meta.world_size, meta.backend) == (1, 2, "nccl")
    assert meta.distributed_info == dist
    assert meta.process_groups == pg
    assert meta.gpu_names == ["NVIDIA H100"]
    assert meta.schema_version == 1
    assert meta.base_time_ns == 1700000000000000000
    assert meta.other == {"displayTimeUnit": "ms", "traceName": "rank1.json"}
    assert meta.profiler_span is None


def test_flows_table():
    events = [
        x_event("cudaLaunchKernel", cat="cuda_runtime", ts=10),
        {"ph": "s", "id": 42, "pid": 1, "tid": 2, "ts": 10.5, "cat": "ac2g", "name": "ac2g"},
        {"ph": "f", "id": 42, "pid": 0, "tid": 7, "ts": 12, "cat": "ac2g", "bp": "e"},
        {"ph": "t", "id": "0x2a", "pid": "1", "tid": 2, "ts": 13, "cat": "fwdbwd"},
        {"ph": "s", "id": 43, "pid": 1, "tid": 2},  # no ts: cannot be placed
    ]
    flows = parse_trace_bytes(as_bytes(trace(events)), "t.json").flows
    assert dtypes(flows) == FLOW_COLUMNS
    assert flows["id"].tolist() == [42, 42, -1]
    assert flows["ph"].astype(str).tolist() == ["s", "f", "t"]
    assert flows["cat"].astype(str).tolist() == ["ac2g", "ac2g", "fwdbwd"]
    assert flows["ts"].tolist() == [10_500, 12_000, 13_000]
    assert flows["pid"].tolist() == [1, 0, 1]


def test_collectives_table():
    comm_args = {
        "External id": 5,
        "Collective name": "allreduce",
        "In msg nelems": 1024,
        "Out msg nelems": 1024,
        "dtype": "Float",
        "Group size": 8,
        "Process Group Name": "0",
        "Process Group Description": "default_pg",
        "Process Group Ranks": "[0, 1, 2, 3, 4, 5, 6, 7]",
    }
    events = [
        x_event("aten::add"),
        x_event("record_param_comms", args=comm_args),
        x_event("record_param_comms", args={"Process Group Ranks": [0, 1]}),
    ]
    # the description comes from distributedInfo (decoding it from every event's args costs time)
    info = {"pg_config": [{"pg_name": "0", "pg_desc": "default_pg"}]}
    comms = parse_trace_bytes(as_bytes(trace(events, distributedInfo=info)), "t.json").collectives
    assert dtypes(comms) == COLLECTIVE_COLUMNS
    assert comms.to_dict("records") == [
        {
            "event": 1,
            "collective": "allreduce",
            "in_nelems": 1024,
            "out_nelems": 1024,
            "dtype": "Float",
            "group_size": 8,
            "pg_name": "0",
            "pg_desc": "default_pg",
            "pg_ranks": "[0, 1, 2, 3, 4, 5, 6, 7]",
            "seq": -1,
        },
        {
            "event": 2,
            "collective": "",
            "in_nelems": -1,
            "out_nelems": -1,
            "dtype": "",
            "group_size": -1,
            "pg_name": "",
            "pg_desc": "",
            "pg_ranks": "[0, 1]",  # as written
            "seq": -1,
        },
    ]


def test_collective_rows_of_kernels_and_gloo_annotations():
    kernel_args = {"stream": 20, "correlation": 7, "Collective name": "allgather",
                   "In msg nelems": 4, "Out msg nelems": 16, "dtype": "BFloat16", "Group size": 4,
                   "Process Group Name": "3", "Seq": 11}
    events = [
        x_event("ncclDevKernel_AllGather", cat="kernel", args=kernel_args),
        x_event("ncclDevKernel_AllReduce", cat="kernel", args={"stream": 20, "correlation": 8}),
        x_event("gloo:all_reduce", cat="user_annotation",
                args={"Input Dims": [[64, 2], []], "Input type": ["float", ""]}),
        x_event("gloo:all_gather", cat="user_annotation", args={"Input Dims": "odd"}),
        # PyTorch 1.8 and earlier wrote the shapes as "Input dims"
        x_event("gloo:broadcast", cat="user_annotation",
                args={"Input dims": [[8, 3]], "Input type": ["c10::Half"]}),
    ]
    comms = parse_trace_bytes(as_bytes(trace(events)), "t.json").collectives
    assert dtypes(comms) == COLLECTIVE_COLUMNS
    assert comms["event"].tolist() == [0, 2, 3, 4]  # the kernel without args is not a row
    assert comms.loc[3, ["in_nelems", "dtype"]].tolist() == [24, "c10::Half"]
    assert comms.loc[0, ["collective", "in_nelems", "out_nelems", "dtype", "group_size",
                         "pg_name", "seq"]].tolist() == ["allgather", 4, 16, "BFloat16", 4, "3", 11]
    assert comms.loc[1, ["in_nelems", "dtype"]].tolist() == [128, "float"]
    assert comms.loc[2, ["in_nelems", "dtype"]].tolist() == [-1, ""]  # shape unreadable


def test_empty_event_list_gives_empty_tables_with_the_contract_dtypes():
    result = parse_trace_bytes(b'{"traceEvents": []}', "t.json")
    assert len(result.events) == len(result.flows) == len(result.collectives) == 0
    assert dtypes(result.events) == EVENT_COLUMNS
    assert dtypes(result.flows) == FLOW_COLUMNS
    assert dtypes(result.collectives) == COLLECTIVE_COLUMNS


def test_gzip_is_detected_by_content_and_members_are_joined():
    doc = as_bytes(trace([x_event("a"), x_event("b")]))
    half = len(doc) // 2
    multi = gzip.compress(doc[:half]) + gzip.compress(doc[half:])
    for data in (doc, gzip.compress(doc), multi, gzip.compress(doc) + b"\0" * 8):
        assert parse_trace_bytes(data, "no-extension").events["name"].tolist() == ["a", "b"]
    with pytest.raises(CorruptTraceError, match="after the data"):
        parse_trace_bytes(gzip.compress(doc) + b"junk", "t.gz")


def test_accepts_bytearray_and_a_byte_order_mark():
    doc = b"\xef\xbb\xbf" + as_bytes(trace([x_event()]))
    assert len(parse_trace_bytes(bytearray(doc), "t.json").events) == 1


def test_sync_wait_columns():
    """Stream Wait Event / Event Sync name the stream and the cudaEventRecord they wait on."""
    doc = {"traceEvents": [
        {"ph": "X", "cat": "cuda_sync", "name": "Stream Wait Event", "pid": 0, "tid": 20, "ts": 10,
         "dur": 3, "args": {"stream": 20, "correlation": 5, "wait_on_stream": 7,
                            "wait_on_cuda_event_record_corr_id": 4}},
        {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 1, "dur": 3,
         "args": {"stream": 7, "correlation": 3}},
    ]}  # fmt: skip
    events = parse_trace_bytes(json.dumps(doc).encode(), "wait.json").events
    assert events["wait_on_stream"].tolist() == [7, -1]
    assert events["wait_on_record"].tolist() == [4, -1]


def test_gpu_events_without_stream_or_correlation_are_named(tmp_path):
    """Kernels whose args were stripped to an ``External id`` (TraceLens's GEMM evaluation
    fixtures) are not GPU work to the analyses (HTA's rule): the parse says so, where the rank
    used to read as a CPU-only trace without a word; the health check gives the same reason."""
    from analysis.metrics.health.trace_health import trace_health_rank

    stripped = [x_event("Cijk_gemm", cat="kernel", ts=20 + 5 * i, dur=2,
                        args={"External id": 25 + i}) for i in range(3)]
    result = parse_trace_bytes(as_bytes(trace([x_event("aten::mm", ts=10, dur=40), *stripped])),
                               "edited.json")
    assert result.meta.anomalies == [
        "3 of 3 kernel / memcpy / memset event(s) have no 'stream' or no 'correlation' arg (which "
        "the profiler always writes: was the trace edited?); most GPU analyses do not count "
        "them as GPU work (the TensorBoard views do: the plugin reads kernels by category; with "
        "kernel_patterns='hta' the temporal and kernel breakdowns count those with a stream, as "
        "HTA does)"]
    health = trace_health_rank(result)
    assert "its 3 kernel / memcpy / memset events have no 'stream'" in health.findings[-1][2]
    # and so do the analyses that need GPU events (they said "CPU-only trace")
    from analysis import TraceAnalysis
    from analysis.errors import NoGPUEventsError

    path = tmp_path / "edited.json"
    path.write_bytes(as_bytes(trace([x_event("aten::mm", ts=10, dur=40), *stripped])))
    with pytest.warns(UserWarning, match="3 of 3 kernel"):
        ta = TraceAnalysis(str(path), use_cache=False, progress=False)
    with pytest.raises(NoGPUEventsError, match=r"rank\(s\) \[0\] have no stream or correlation"):
        ta.get_idle_time_breakdown()
    # a kernel as Kineto writes it raises nothing
    whole = x_event("k", cat="kernel", ts=20, dur=2, args={"stream": 7, "correlation": 1})
    assert parse_trace_bytes(as_bytes(trace([whole])), "t.json").meta.anomalies == []


def test_nccl_annotations_carry_the_size_only_where_the_kernels_do_not(hta_traces_dir):
    """torch < 2.2 wrote no collective args on NCCL kernels (HTA's trace_filter, 2023): its
    ``nccl:*`` annotations are collective rows with their largest input's elements and type.
    A trace whose kernels carry the args (nccl_parser_config) keeps none of them, and pays no
    second decode of its events for them."""
    old = kineto_files(hta_traces_dir, "trace_filter")[0]
    rt = parse_trace_bytes(old.read_bytes(), str(old))
    names = rt.events["name"].astype(str).to_numpy()[rt.collectives["event"]]
    nccl = rt.collectives[np.char.startswith(names.astype(str), "nccl:")]
    doc = json.loads(gzip.decompress(old.read_bytes()))
    truth = [(int(np.prod(e["args"]["Input Dims"][0])), e["args"]["Input type"][0])
             for e in doc["traceEvents"] if e.get("name", "").startswith("nccl:")]
    assert list(zip(nccl["in_nelems"], nccl["dtype"], strict=True)) == truth
    new = kineto_files(hta_traces_dir, "nccl_parser_config")[0]
    rt = parse_trace_bytes(new.read_bytes(), str(new))
    names = rt.events["name"].astype(str).to_numpy()[rt.collectives["event"]]
    assert not np.char.startswith(names.astype(str), "nccl:").any()
    assert any(n.startswith("nccl:") for n in rt.events["name"].astype(str).unique())
