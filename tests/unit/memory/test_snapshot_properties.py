"""Property tests: whatever a memory snapshot file holds, reading and replaying it gives numbers or
one of our errors (``InputFileError``, ``NoMemoryEventsError``); never a foreign exception or a hang."""

from __future__ import annotations

import copy
import gzip
import pickle

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from memory_snapshots import training_run
from timeouts import fails_after

from analysis.errors import InputFileError, NoMemoryEventsError
from analysis.memory import (
    allocated_by_frame,
    allocations_at_peak,
    memory_peak,
    oom_events,
    parse_snapshot_bytes,
    replay_snapshot,
    segment_fragmentation,
)

SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
SOURCE = "gs://bucket/prop/snapshot.pickle"
OURS = (InputFileError, NoMemoryEventsError)
# seconds one example may take before it counts as a hang (a healthy one takes milliseconds)
HANG_S = 30

values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(min_value=-(2**70), max_value=2**70),
              st.floats(), st.text(max_size=6), st.binary(max_size=6)),
    lambda inner: st.one_of(st.lists(inner, max_size=3),
                            st.dictionaries(st.text(max_size=6), inner, max_size=3),
                            st.tuples(inner, inner)),
    max_leaves=6,
)


def _base() -> dict:
    builder, _ = training_run(steps=2)
    return builder.snapshot()


BASE = _base()


# values that break code which trusts a field's type
nasty = st.sampled_from([None, "x", "cuda:0", ["x"], {}, {"a": 1}, 2**70, -(2**64), -1, 1.5,
                         float("nan"), True, b"\x00", (1, 2), [[]], [{}]])


def _containers(obj):
    """The dicts and lists of the snapshot's structure (segments, blocks, events and their fields;
    not the many frames inside, which would take most of the draws): where mutations hit."""
    if isinstance(obj, dict):
        yield obj
        for k, v in obj.items():
            if k not in ("frames", "allocator_settings"):
                yield from _containers(v)
    elif isinstance(obj, list):
        yield obj
        for v in obj:
            yield from _containers(v)


@st.composite
def mutated_snapshots(draw):
    """The base snapshot with 1-3 fields replaced by odd values, deleted, or lists emptied."""
    snap = copy.deepcopy(BASE)
    for _ in range(draw(st.integers(1, 3))):
        places = list(_containers(snap))
        place = places[draw(st.integers(0, len(places) - 1))]
        if not place:
            continue
        key = draw(st.sampled_from(sorted(place, key=str) if isinstance(place, dict)
                                   else range(len(place))))
        how = draw(st.sampled_from(["nasty", "nasty", "any", "delete"]))
        if how == "delete":
            del place[key]
        else:
            # a copy: the sampled values are shared between examples and may be mutated next
            place[key] = copy.deepcopy(draw(nasty if how == "nasty" else values))
    return snap


def _analyse(data: bytes) -> None:
    with fails_after(HANG_S, "one example"):
        try:
            snap = parse_snapshot_bytes(data, SOURCE)
            replay = replay_snapshot(snap, source=SOURCE)
            memory_peak(replay)
            allocations_at_peak(replay)
            allocated_by_frame(replay)
            oom_events(snap, replay)
            segment_fragmentation(snap)
        except OURS as exc:
            assert SOURCE in str(exc) or isinstance(exc, NoMemoryEventsError)


@SETTINGS
@given(mutated_snapshots(), st.booleans())
def test_mutated_snapshots_give_numbers_or_our_errors(snap, gzipped):
    data = pickle.dumps(snap)
    _analyse(gzip.compress(data, 1) if gzipped else data)


@SETTINGS
@given(st.binary(max_size=300))
def test_random_bytes_give_our_errors(data):
    _analyse(data)


@SETTINGS
@given(st.data())
def test_damaged_pickles_give_our_errors(data):
    good = pickle.dumps(BASE)
    where = data.draw(st.integers(0, len(good) - 1))
    cut = data.draw(st.sampled_from(["truncate", "flip", "insert"]))
    if cut == "truncate":
        damaged = good[:where]
    elif cut == "flip":
        damaged = good[:where] + bytes([good[where] ^ data.draw(st.integers(1, 255))]) + good[where + 1:]
    else:
        damaged = good[:where] + data.draw(st.binary(min_size=1, max_size=8)) + good[where:]
    _analyse(damaged)


@SETTINGS
@given(values)
def test_any_plain_object_gives_our_errors(obj):
    _analyse(pickle.dumps(obj))


def test_the_base_snapshot_replays():
    """The mutations start from a snapshot that replays cleanly (so they test something)."""
    replay = replay_snapshot(parse_snapshot_bytes(pickle.dumps(BASE), SOURCE))
    assert memory_peak(replay)["peak_allocated_bytes"].iat[0] > 0

