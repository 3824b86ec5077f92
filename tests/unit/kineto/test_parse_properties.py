"""Property tests: whatever bytes come in, parse_trace_bytes returns a well-typed RankTrace or
raises a TraceLoadError; no other exception ever escapes."""

from __future__ import annotations

import gzip
import json
from decimal import ROUND_HALF_EVEN, Decimal

import pandas as pd
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from analysis.errors import TraceLoadError
from analysis.kineto.model import COLLECTIVE_COLUMNS, EVENT_COLUMNS, FLOW_COLUMNS, RankTrace
from analysis.kineto.parse import parse_trace_bytes

SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
SOURCE = "gs://bucket/prop/rank.json.gz"

json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=8),
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=8,
)
# values a real trace would plausibly hold, so that many examples get past validation
numbers = st.one_of(
    st.integers(min_value=-(2**53), max_value=2**53),
    st.floats(min_value=-1e16, max_value=1e16, allow_nan=False),
    st.sampled_from(["7", "Spans", "", "-1", "0x10"]),
)
plausible = {
    "ph": st.sampled_from(["X", "s", "f", "t", "M", "i"]),
    "cat": st.sampled_from(["kernel", "cpu_op", "Kernel", "Trace", "ac2g", "cuda_runtime"]),
    "name": st.sampled_from(["record_param_comms", "aten::mm", "ProfilerStep#3", ""]),
    "pid": numbers,
    "tid": numbers,
    "ts": numbers,
    "dur": numbers,
    "id": numbers,
}
arg_keys = [
    "stream",
    "correlation",
    "External id",
    "device",
    "Collective name",
    "In msg nelems",
    "Out msg nelems",
    "dtype",
    "Group size",
    "Process Group Name",
    "Process Group Description",
    "Process Group Ranks",
    "other",
]


def mostly(strategy):
    """Mostly plausible values, sometimes anything JSON can hold."""
    return st.one_of(strategy, strategy, strategy, json_values)


args = st.dictionaries(st.sampled_from(arg_keys), st.one_of(numbers, json_values), max_size=5)
events = st.fixed_dictionaries(
    {},
    optional={
        **{key: mostly(strategy) for key, strategy in plausible.items()},
        "args": mostly(args),
        "unknown": json_values,
    },
)

# an event that a real trace could hold: kept, a flow or metadata, with ts and dur exact or not;
# ts + dur stays within the int64 ns range (later ends are rejected: tests/unit/badinput)
times = st.one_of(
    st.integers(min_value=0, max_value=2**52),
    st.decimals(min_value=0, max_value=4 * 10**15, places=3).map(float),
)
good_events = st.fixed_dictionaries(
    {"ph": plausible["ph"], "cat": plausible["cat"], "name": plausible["name"], "ts": times},
    optional={
        "dur": times,
        "pid": numbers,
        "tid": numbers,
        "id": numbers,
        "args": st.dictionaries(st.sampled_from(arg_keys), numbers, max_size=5),
    },
)


@st.composite
def documents(draw):
    doc = {}
    if draw(st.integers(0, 9)):
        doc["traceEvents"] = draw(
            st.lists(st.one_of(good_events, good_events, events), max_size=12)
        )
    else:
        doc["traceEvents"] = draw(json_values)
    for key in ("distributedInfo", "deviceProperties", "baseTimeNanoseconds", "schemaVersion"):
        if draw(st.booleans()):
            info = st.fixed_dictionaries({"rank": st.one_of(numbers, json_values)})
            doc[key] = draw(st.one_of(info, json_values))
    return doc


def check(data: bytes) -> None:
    try:
        result = parse_trace_bytes(data, SOURCE)
    except TraceLoadError as exc:
        assert exc.path == SOURCE
        event(f"raised {type(exc).__name__}")
        return
    event(f"parsed, events kept: {min(len(result.events), 3)}")
    assert isinstance(result, RankTrace)
    for frame, columns in (
        (result.events, EVENT_COLUMNS),
        (result.flows, FLOW_COLUMNS),
        (result.collectives, COLLECTIVE_COLUMNS),
    ):
        assert {c: str(t) for c, t in frame.dtypes.items()} == columns
    assert len(result.collectives) <= len(result.events)
    assert isinstance(result.meta.rank, int)


@SETTINGS
@given(documents(), st.booleans())
def test_random_event_lists(doc, compress):
    data = json.dumps(doc).encode()
    check(gzip.compress(data) if compress else data)


def exact_ns(value) -> int:
    # json.dumps writes repr(float); that text is what the parser must keep exactly
    return int((Decimal(repr(value)) * 1000).to_integral_value(ROUND_HALF_EVEN))


@SETTINGS
@given(st.lists(good_events, max_size=12))
def test_well_formed_events_always_parse_exactly(events):
    result = parse_trace_bytes(json.dumps({"traceEvents": events}).encode(), SOURCE)
    kept = [e for e in events if "dur" in e and e["cat"] != "Trace"]
    assert result.events["ts"].tolist() == [exact_ns(e["ts"]) for e in kept]
    assert result.events["dur"].tolist() == [exact_ns(e["dur"]) for e in kept]
    assert result.meta.float_timestamps == any(isinstance(e["ts"], float) for e in events)
    assert len(result.flows) == sum(e["ph"] in ("s", "f", "t") for e in events)


@SETTINGS
@given(json_values)
def test_any_json_document(value):
    check(json.dumps(value).encode())


@pytest.fixture(scope="module")
def small_trace(hta_traces_dir) -> bytes:
    return (hta_traces_dir / "triton_example" / "triton_example.json.gz").read_bytes()


@SETTINGS
@given(cut=st.floats(0, 1), compressed=st.booleans())
def test_truncated_real_trace(small_trace, cut, compressed):
    data = small_trace if compressed else gzip.decompress(small_trace)
    check(data[: int(len(data) * cut)])


@SETTINGS
@given(
    flips=st.lists(st.tuples(st.floats(0, 1), st.integers(0, 255)), min_size=1, max_size=4),
    compressed=st.booleans(),
)
def test_corrupted_real_trace(small_trace, flips, compressed):
    data = bytearray(small_trace if compressed else gzip.decompress(small_trace))
    for where, value in flips:
        data[min(int(len(data) * where), len(data) - 1)] = value
    check(bytes(data))


@SETTINGS
@given(
    st.lists(good_events, max_size=40),
    st.sampled_from([None, 0, 1, 2, 4, "\t"]),
    st.integers(min_value=1, max_value=400),
)
def test_chunked_decode_equals_the_whole_decode(events, indent, chunk_bytes):
    data = json.dumps({"traceEvents": events}, indent=indent).encode()
    chunked = parse_trace_bytes(data, SOURCE, chunk_bytes=chunk_bytes)
    whole = parse_trace_bytes(data, SOURCE, chunk_bytes=2**62)
    for a, b in ((chunked.events, whole.events), (chunked.flows, whole.flows),
                 (chunked.collectives, whole.collectives)):
        pd.testing.assert_frame_equal(a, b, check_exact=True)
    assert chunked.meta == whole.meta
