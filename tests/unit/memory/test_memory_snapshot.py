"""CUDA memory snapshots: safe loading, and the replay of the event buffer checked against the
allocator's own bookkeeping (tests/memory_snapshots.py builds snapshots as torch writes them)."""

from __future__ import annotations

import gzip
import os
import pickle

import fsspec
import numpy as np
import pytest

from analysis.errors import CorruptInputError, WrongFileKindError
from analysis.figures.memory import snapshot_timeline_figure, top_allocations_table
from analysis.memory import (
    UnsafePickleError,
    allocated_by_frame,
    allocations_at_peak,
    load_snapshot,
    memory_peak,
    oom_events,
    replay_snapshot,
    segment_fragmentation,
)
from analysis.memory.frames import NO_STACK, top_user_frame
from tests.memory_snapshots import MiB, OutOfMemory, SnapshotBuilder, stack, training_run


def _check_against_truth(builder: SnapshotBuilder):
    replay = replay_snapshot(builder.snapshot())
    truth = np.array(builder.window_truth())
    assert len(replay.timeline) == len(truth)
    np.testing.assert_array_equal(replay.timeline["allocated_bytes"], truth[:, 0])
    np.testing.assert_array_equal(replay.timeline["reserved_bytes"], truth[:, 1])
    return replay


# --- loading ------------------------------------------------------------------------------------


class _RunsCode:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def test_malicious_pickle_is_refused_and_nothing_runs(tmp_path):
    marker = tmp_path / "pwned"
    path = tmp_path / "evil.pickle"
    path.write_bytes(pickle.dumps({"segments": [], "device_traces": [[_RunsCode(marker)]]}))
    with pytest.raises(UnsafePickleError, match=r"evil\.pickle.*import (posix|os)\.system"):
        load_snapshot(str(path))
    assert not marker.exists()


@pytest.mark.parametrize("protocol", [0, 2, 5])
def test_every_pickle_protocol_refuses_imports(tmp_path, protocol):
    path = tmp_path / "obj.pickle"
    path.write_bytes(pickle.dumps({"segments": [], "device_traces": [], "x": {1, 2}.__class__}, protocol))
    with pytest.raises(UnsafePickleError):
        load_snapshot(str(path))


def test_snapshot_loads_plain_gzipped_and_from_a_url(tmp_path):
    builder, _ = training_run(2)
    snap = builder.snapshot()
    plain = tmp_path / "snap.pickle"
    plain.write_bytes(pickle.dumps(snap))
    zipped = tmp_path / "snap.pickle.gz"
    zipped.write_bytes(gzip.compress(pickle.dumps(snap)))
    with fsspec.open("memory://bucket/snap.pickle", "wb") as f:
        f.write(pickle.dumps(snap))
    for where in (str(plain), str(zipped), "memory://bucket/snap.pickle"):
        assert load_snapshot(where) == snap


def test_not_a_snapshot_and_damaged_files_say_so(tmp_path):
    cases = {
        "list.pickle": (pickle.dumps([1, 2, 3]), WrongFileKindError, "not a memory snapshot"),
        "trace.json": (b'{"traceEvents": []}', WrongFileKindError, "JSON"),
        "cut.pickle": (pickle.dumps({"segments": [], "device_traces": []})[:-5], CorruptInputError, "pickle"),
        "cut.gz": (gzip.compress(pickle.dumps({"segments": []}))[:-9], CorruptInputError, "gzip"),
        "bad.pickle": (pickle.dumps({"segments": [{"address": 1}], "device_traces": []}),
                       CorruptInputError, r"segments\[0\] has no .total_size."),
    }
    for name, (data, error, words) in cases.items():
        path = tmp_path / name
        path.write_bytes(data)
        with pytest.raises(error, match=words) as info:
            load_snapshot(str(path))
        assert name in str(info.value)


def test_a_forged_memo_index_is_read_without_the_c_unpicklers_array_and_text_is_no_alarm(
        tmp_path, monkeypatch):
    """A LONG_BINPUT of 10**9 would make the C unpickler allocate a 16 GB memo: such a pickle goes
    to the pure-Python one. Text that merely holds an ``r`` and four bytes (every real snapshot's
    ``address``) is walked opcode by opcode and read by the C unpickler."""
    from analysis.memory import snapshot as snapshot_module

    used = []
    for kind in (snapshot_module.SafeUnpickler, snapshot_module._SafeMemoUnpickler):
        monkeypatch.setattr(snapshot_module, kind.__name__, type(kind.__name__, (kind,), {
            "load": lambda self, kind=kind: used.append(kind.__name__) or kind.load(self)}))
    forged = b"\x80\x02}r\x00\xca\x9a\x3b."  # EMPTY_DICT, LONG_BINPUT 1_000_000_000, STOP
    assert snapshot_module._forged_memo_index(forged)
    assert snapshot_module._forged_memo_index(b"(dp123456789\n.")  # protocol 0's PUT
    assert snapshot_module._forged_memo_index(b"\x80\x04r\xff\xff\xff\xff")  # damaged: no STOP
    path = tmp_path / "forged.pickle"
    path.write_bytes(forged)
    with pytest.raises(WrongFileKindError):
        load_snapshot(str(path))
    assert used == ["_SafeMemoUnpickler"]

    builder, _ = training_run(2)
    snap = builder.snapshot()
    snap["segments"][0]["frames_note"] = "r\xff\xff\xff\x7f address raddress"
    for protocol in (0, 2, 4, 5):
        data = pickle.dumps(snap, protocol)
        assert not snapshot_module._forged_memo_index(data), protocol
        used.clear()
        path.write_bytes(data)
        assert load_snapshot(str(path)) == snap
        assert used == ["SafeUnpickler"], protocol


# --- frames -------------------------------------------------------------------------------------


def test_top_user_frame_skips_allocator_torch_and_interpreter_frames():
    assert top_user_frame(stack("model.py", 42, "forward")) == "model.py:42:forward"
    torch_only = [{"name": "f", "filename": "/x/site-packages/torch/nn/functional.py", "line": 3}]
    assert top_user_frame(torch_only) == "functional.py:3:f"
    assert top_user_frame([{"name": "c10::malloc", "filename": "??", "line": 0}]) == "c10::malloc"
    assert top_user_frame([]) == NO_STACK


# C++-only stack of an allocation in autograd's backward thread, innermost first (a real snapshot's)
CPP_ONLY = [
    {"name": "torch::unwind::unwind()", "filename": "??", "line": 0},
    {"name": "torch::cuda::(anonymous namespace)::gather_with_cpp()", "filename": "memory_snapshot.cpp", "line": 0},
    {"name": "c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::malloc(signed char, "
             "unsigned long, CUstream_st*)", "filename": "CUDACachingAllocator.cpp", "line": 0},
    {"name": "at::detail::empty_cuda(c10::ArrayRef<long>, c10::TensorOptions const&)", "filename": "??", "line": 0},
    {"name": "at::(anonymous namespace)::wrapper_CUDA_bmm(at::Tensor const&, at::Tensor const&)",
     "filename": "RegisterCUDA.cpp", "line": 0},
    {"name": "at::_ops::bmm::redispatch(c10::DispatchKeySet, at::Tensor const&, at::Tensor const&)",
     "filename": "??", "line": 0},
    {"name": "torch::autograd::Engine::thread_main(std::shared_ptr<torch::autograd::GraphTask> const&)",
     "filename": "??", "line": 0},
]


def test_a_cpp_only_stack_is_named_by_its_aten_operator_not_the_allocator():
    """Every stack starts in the caching allocator's malloc: on real snapshots all allocations of
    the backward thread fell into one group named after it (13 GB of a peak, one label)."""
    assert top_user_frame(CPP_ONLY) == "at::_ops::bmm::redispatch"
    no_op = [f for f in CPP_ONLY if "_ops" not in f["name"]]
    assert top_user_frame(no_op) == "at::(anonymous namespace)::wrapper_CUDA_bmm (RegisterCUDA.cpp)"
    allocator_only = CPP_ONLY[:3]  # nothing but the allocator: its malloc, arguments dropped
    assert top_user_frame(allocator_only) == (
        "c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::malloc "
        "(CUDACachingAllocator.cpp)")


def test_windows_paths_name_the_users_frame():
    """A real snapshot recorded on Windows: torch's and einops' frames under ``...\\Lib\\site-packages``
    were taken for the user's, and labels kept the whole path."""
    frames = [
        {"name": "einsum", "filename": "D:\\proj\\.venv\\Lib\\site-packages\\torch\\functional.py", "line": 373},
        {"name": "reshape", "filename": "D:\\proj\\.venv\\Lib\\site-packages\\einops\\_backends.py", "line": 96},
        {"name": "forward", "filename": "D:\\proj\\model.py", "line": 39},
    ]
    assert top_user_frame(frames) == "model.py:39:forward"
    assert top_user_frame(frames[:1]) == "functional.py:373:einsum"


# --- replay -------------------------------------------------------------------------------------


def test_training_ramp_and_fall_peak_and_top_allocations():
    builder, marks = training_run(steps=3)
    replay = _check_against_truth(builder)
    peak = memory_peak(replay).iloc[0]
    # 12 MiB of parameters and optimizer state + 4 × 3 MiB activations + a 4 MiB gradient.
    assert peak["peak_allocated_bytes"] == 28 * MiB
    assert peak["peak_allocated_state"] == marks["steps"][0][1]  # the first step reaches it first
    assert peak["peak_reserved_bytes"] == 16 * 2 * MiB  # every allocation got its own 2 MiB-multiple segment
    assert peak["allocated_at_snapshot_bytes"] == 12 * MiB
    top = allocations_at_peak(replay, top=None)
    assert top["bytes"].sum() == 28 * MiB
    assert dict(zip(top["frame"], top["bytes"], strict=True)) == {
        "model.py:10:__init__": 4 * MiB, "optim.py:20:init_state": 4 * MiB,
        "optim.py:21:init_state": 4 * MiB, "model.py:50:backward": 4 * MiB,
        **{f"model.py:{30 + i}:forward": 3 * MiB for i in range(4)},
    }
    assert top["share_pct"].sum() == pytest.approx(100)
    # The activations ramp up one by one in the forward pass and fall back in the backward pass.
    start, at_peak, end = marks["steps"][1]
    allocated = replay.timeline["allocated_bytes"].to_numpy()
    assert allocated[start] == 12 * MiB and allocated[at_peak] == 28 * MiB and allocated[end] == 12 * MiB
    ramp = allocated[start : at_peak + 1]
    assert (np.diff(ramp) >= 0).all() and (np.diff(allocated[at_peak : end + 1]) <= 0).all()


def test_allocated_by_frame_stacks_to_the_total_with_the_static_floor_first():
    builder, _ = training_run(steps=2)
    replay = replay_snapshot(builder.snapshot())
    by_frame = allocated_by_frame(replay, top=5)
    groups = [c for c in by_frame.columns if c not in ("state", "time_us")]
    assert groups[0] == "model.py:10:__init__" and groups[-1] == "other"
    np.testing.assert_array_equal(by_frame[groups].sum(axis=1), replay.timeline["allocated_bytes"])


def test_a_leak_grows_allocated_memory_step_after_step():
    leak = 1_000_000
    builder, marks = training_run(steps=4, leak_bytes=leak)
    replay = _check_against_truth(builder)
    allocated = replay.timeline["allocated_bytes"].to_numpy()
    ends = [allocated[end] for _, _, end in marks["steps"]]
    assert ends == [12 * MiB + leak * (i + 1) for i in range(4)]
    at_end = allocations_at_peak(replay, top=None, state=len(allocated) - 1)
    leaked = at_end[at_end["frame"] == "metrics.py:7:log_step"].iloc[0]
    assert (leaked["allocations"], leaked["bytes"]) == (4, 4 * leak)


def test_fragmentation_reserved_minus_allocated_and_free_blocks():
    b = SnapshotBuilder()
    blocks = [b.alloc(256 * 1024, stack("data.py", 5, "load")) for _ in range(8)]  # one 2 MiB segment
    for addr in blocks[::2]:
        b.free(addr)
    replay = _check_against_truth(b)
    last = replay.timeline.iloc[-1]
    assert (last["reserved_bytes"], last["allocated_bytes"]) == (2 * MiB, 4 * 256 * 1024)
    assert last["fragmentation_bytes"] == 2 * MiB - 4 * 256 * 1024
    seg = segment_fragmentation(b.snapshot()).iloc[0]
    # Four 256 KiB holes, the last merged with the untouched tail of the segment (no tail here).
    assert (seg["free_bytes"], seg["largest_free_bytes"], seg["free_blocks"]) == (MiB, 256 * 1024, 4)
    assert seg["fragmentation"] == pytest.approx(0.75)


def test_wrapped_buffer_starts_mid_run_and_is_replayed_from_the_segments():
    builder, marks = training_run(steps=5, max_entries=30, leak_bytes=4096)
    snap = builder.snapshot()
    assert len(snap["device_traces"][0]) == 30 < len(builder.events)
    replay = _check_against_truth(builder)
    first = replay.timeline.iloc[0]
    assert first["allocated_bytes"] > 12 * MiB  # the buffer begins after parameters and leaks
    # Allocations from before the buffer: the static floor (no alloc event) and those freed inside it.
    before = replay.allocations[~replay.allocations["recorded"]]
    assert {"model.py:10:__init__", "optim.py:20:init_state"} <= set(before["frame"])
    assert (before["start_state"] == 0).all()
    assert before["size"].sum() == first["allocated_bytes"]


def test_oom_events_are_reported_with_the_state_at_that_moment():
    b = SnapshotBuilder(capacity=8 * MiB)
    b.alloc(3 * MiB, stack("model.py", 1, "a"))
    with pytest.raises(OutOfMemory):
        b.alloc(6 * MiB, stack("model.py", 2, "too_big"))
    snap = b.snapshot()
    replay = _check_against_truth(b)
    ooms = oom_events(snap, replay)
    assert len(ooms) == 1
    row = ooms.iloc[0]
    assert (row["requested_bytes"], row["device_free_bytes"]) == (6 * MiB, 4 * MiB)
    assert (row["allocated_bytes"], row["reserved_bytes"], row["frame"]) == (3 * MiB, 4 * MiB, "model.py:2:too_big")


def test_replay_of_100k_events_matches_a_plain_running_sum():
    """A long wrapped buffer in one 1 GiB segment; addresses are reused as a caching allocator does."""
    rng = np.random.default_rng(0)
    base, frames = 0x7F00_0000_0000, stack("loop.py", 3, "step")
    free_slots, live, events, truth = list(range(20_000)), {}, [], [0]

    def record(action, slot, size, change):
        events.append({"action": action, "addr": base + slot * 65536, "size": size, "stream": 0,
                       "time_us": len(events), "frames": frames})
        truth.append(truth[-1] + change)

    for coin, size in zip(rng.random(70_000), rng.integers(1, 128, 70_000) * 512, strict=True):
        if live and coin < 0.48:
            slot = next(iter(live))  # the oldest live allocation
            size = live.pop(slot)
            record("free_requested", slot, size, 0)
            record("free_completed", slot, size, -size)
            free_slots.append(slot)
        else:
            slot = free_slots.pop()
            live[slot] = int(size)
            record("alloc", slot, int(size), int(size))
    blocks = [{"address": base + slot * 65536, "size": size, "requested_size": size,
               "state": "active_allocated", "frames": frames} for slot, size in live.items()]
    snap = {"segments": [{"device": 0, "address": base, "total_size": 2**30, "stream": 0,
                          "segment_type": "large", "blocks": blocks}],
            "device_traces": [events[-100_000:]]}
    replay = replay_snapshot(snap)
    assert replay.n_events == 100_000
    expected = np.array(truth[-100_001:])
    np.testing.assert_array_equal(replay.timeline["allocated_bytes"], expected)
    assert (replay.timeline["reserved_bytes"] == 2**30).all()
    assert allocations_at_peak(replay, top=None)["bytes"].sum() == expected.max()


def test_snapshot_figures_mark_the_peak_and_list_the_top_allocations():
    builder, _ = training_run(steps=2)
    replay = replay_snapshot(builder.snapshot())
    top = allocations_at_peak(replay, top=5)
    fig = snapshot_timeline_figure(allocated_by_frame(replay, top=5), replay.timeline, memory_peak(replay), top)
    stacked = [t for t in fig.data if t.stackgroup == "allocated"]
    assert len(stacked) == 6 and fig.data[-1].name == "reserved"
    peak_at = sum(t.y[16] for t in stacked)  # state 16 is the first peak (event 15)
    assert peak_at == pytest.approx(28.0)
    texts = [a.text for a in fig.layout.annotations]
    assert any("peak 28.0 MiB" in t for t in texts)
    assert sum("4.0 MiB" in t for t in texts) == 3  # the three largest groups are labelled
    table = top_allocations_table(top)
    assert list(table.data[0].cells.values[0]) == list(top["frame"])


def test_gzipped_snapshot_loads_from_gs_on_a_real_gcs_server(gcs_emulator):
    import uuid

    import gcsfs

    builder, _ = training_run(steps=2)
    snapshot = builder.snapshot()
    fs = gcsfs.GCSFileSystem(endpoint_url=gcs_emulator, token="anon")
    bucket = f"mem-{uuid.uuid4().hex[:8]}"
    fs.mkdir(bucket)
    fs.pipe(f"{bucket}/run/snapshot.pickle.gz", gzip.compress(pickle.dumps(snapshot)))
    loaded = load_snapshot(
        f"gs://{bucket}/run/snapshot.pickle.gz",
        storage_options={"endpoint_url": gcs_emulator, "token": "anon"},
    )
    assert loaded == snapshot
