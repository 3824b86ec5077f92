"""Building CUDA memory snapshots for tests, with the exact structure torch writes.

``SnapshotBuilder`` is a small caching allocator (first-fit in 2 MiB segments, 512-byte rounding,
split and merge of blocks, ``empty_cache``) that records what ``_record_memory_history`` records:
``alloc``, ``free_requested``, ``free_completed``, ``segment_alloc``, ``segment_free`` and ``oom``
entries with ``addr``, ``size``, ``stream``, ``time_us`` and ``frames`` (innermost first), in a
buffer of at most ``max_entries`` entries. ``snapshot()`` returns the dict of
``torch.cuda.memory._snapshot()``: ``segments`` (with ``blocks``) and ``device_traces``.

It also keeps the truth the replay must recover: allocated (requested) and reserved bytes after
every event of the whole run, including the part that fell out of the bounded buffer.
"""

from __future__ import annotations

from dataclasses import dataclass, field

MiB = 1024 * 1024
SEGMENT_BYTES = 2 * MiB  # the caching allocator's large-segment granularity
ROUND = 512  # kMinBlockSize


class OutOfMemory(Exception):
    pass


def stack(user_file: str, line: int, func: str, *, library: str = "torch/nn/modules/linear.py") -> list[dict]:
    """Frames as torch records them (innermost first): allocator C++, torch Python, user, loop."""
    return [
        {"name": "c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::malloc", "filename": "??", "line": 0},
        {"name": "PyEval_EvalFrameDefault", "filename": "Python/ceval.c", "line": 4200},
        {"name": "forward", "filename": f"/venv/lib/python3.11/site-packages/{library}", "line": 125},
        {"name": func, "filename": f"/home/user/project/{user_file}", "line": line},
        {"name": "main", "filename": "/home/user/project/train.py", "line": 88},
    ]


@dataclass
class _Block:
    address: int
    size: int
    requested: int = 0
    frames: list = field(default_factory=list)
    live: bool = False


@dataclass
class _Segment:
    address: int
    size: int
    frames: list
    blocks: list[_Block]


class SnapshotBuilder:
    def __init__(self, device: int = 0, max_entries: int | None = None, capacity: int | None = None,
                 t0_us: int = 1_700_000_000_000_000, n_devices: int = 1):
        self.device = device
        self.max_entries = max_entries
        self.capacity = capacity  # device memory; a segment beyond it raises an OOM entry
        self.n_devices = n_devices
        self.time_us = t0_us
        self.segments: list[_Segment] = []
        self.events: list[dict] = []
        self.truth: list[tuple[int, int]] = [(0, 0)]  # (allocated, reserved) after each event
        self._next_addr = 0x7F00_0000_0000
        self._live: dict[int, _Block] = {}

    # --- what a program does ---------------------------------------------------------------

    def alloc(self, nbytes: int, frames: list[dict]) -> int:
        rounded = max(ROUND, -(-nbytes // ROUND) * ROUND)
        found = self._first_fit(rounded)
        if found is None:
            seg_bytes = max(SEGMENT_BYTES, -(-rounded // SEGMENT_BYTES) * SEGMENT_BYTES)
            if self.capacity is not None and self.reserved + seg_bytes > self.capacity:
                self._record("oom", None, nbytes, frames, device_free=self.capacity - self.reserved)
                raise OutOfMemory(nbytes)
            seg = _Segment(self._next_addr, seg_bytes, frames, [_Block(self._next_addr, seg_bytes)])
            self._next_addr += seg_bytes + 64 * MiB  # segments are not contiguous
            self.segments.append(seg)
            self._record("segment_alloc", seg.address, seg_bytes, frames)
            found = (seg, 0)
        seg, i = found
        block = seg.blocks[i]
        if block.size > rounded:  # split: the rest stays cached
            seg.blocks.insert(i + 1, _Block(block.address + rounded, block.size - rounded))
            block.size = rounded
        block.live, block.requested, block.frames = True, nbytes, frames
        self._live[block.address] = block
        self._record("alloc", block.address, nbytes, frames)
        return block.address

    def free(self, addr: int) -> None:
        block = self._live[addr]
        self._record("free_requested", addr, block.requested, block.frames)
        del self._live[addr]  # the memory is taken until free_completed
        block.live = False
        self._record("free_completed", addr, block.requested, block.frames)
        block.requested, block.frames = 0, []
        for seg in self.segments:  # merge with free neighbours
            merged: list[_Block] = []
            for b in seg.blocks:
                if merged and not b.live and not merged[-1].live:
                    merged[-1].size += b.size
                else:
                    merged.append(b)
            seg.blocks = merged

    def empty_cache(self) -> None:
        for seg in list(self.segments):
            if not any(b.live for b in seg.blocks):
                self.segments.remove(seg)
                self._record("segment_free", seg.address, seg.size, [])

    def tick(self, us: int) -> None:
        self.time_us += us

    # --- what the replay must find ---------------------------------------------------------

    @property
    def allocated(self) -> int:
        return sum(b.requested for b in self._live.values())

    @property
    def reserved(self) -> int:
        return sum(s.size for s in self.segments)

    @property
    def state(self) -> int:
        """The current state's index in the whole run (events so far)."""
        return len(self.events)

    def window_truth(self) -> list[tuple[int, int]]:
        """(allocated, reserved) for each state of the buffer in ``snapshot()`` (start included)."""
        kept = len(self.buffer())
        return self.truth[len(self.truth) - kept - 1:]

    def buffer(self) -> list[dict]:
        return self.events if self.max_entries is None else self.events[-self.max_entries:]

    def snapshot(self) -> dict:
        traces: list[list[dict]] = [[] for _ in range(self.n_devices)]
        traces[self.device] = [dict(e) for e in self.buffer()]
        return {
            "segments": [self._segment_dict(s) for s in self.segments],
            "device_traces": traces,
            "allocator_settings": {
                "PYTORCH_CUDA_ALLOC_CONF": "", "max_split_size": -1, "garbage_collection_threshold": 0.0,
                "expandable_segments": False, "pinned_num_register_threads": 1,
                "release_lock_on_cudamalloc": False, "pinned_use_host_register": False,
                "roundup_power2_divisions": {},
            },
            "external_annotations": [],
        }

    # --- internals -------------------------------------------------------------------------

    def _first_fit(self, rounded: int):
        for seg in self.segments:
            for i, b in enumerate(seg.blocks):
                if not b.live and b.size >= rounded:
                    return seg, i
        return None

    def _record(self, action: str, addr: int | None, size: int, frames: list, **extra) -> None:
        self.time_us += 1
        entry = {"action": action, "size": size, "stream": 0, "time_us": self.time_us,
                 "frames": frames, **extra}
        if addr is not None:
            entry["addr"] = addr
        self.events.append(entry)
        self.truth.append((self.allocated, self.reserved))

    def _segment_dict(self, seg: _Segment) -> dict:
        blocks = [
            {"address": b.address, "size": b.size, "requested_size": b.requested,
             "state": "active_allocated" if b.live else "inactive", "frames": b.frames}
            for b in seg.blocks
        ]
        return {
            "device": self.device, "address": seg.address, "total_size": seg.size,
            "allocated_size": sum(b.size for b in seg.blocks if b.live),
            "active_size": sum(b.size for b in seg.blocks if b.live),
            "requested_size": sum(b.requested for b in seg.blocks if b.live),
            "stream": 0, "segment_type": "large" if seg.size >= MiB else "small",
            "segment_pool_id": (0, 0), "is_expandable": False, "frames": seg.frames, "blocks": blocks,
        }


def training_run(steps: int = 3, max_entries: int | None = None, leak_bytes: int = 0) -> tuple[SnapshotBuilder, dict]:
    """A model with 4 MiB of parameters and 8 MiB of Adam state, trained for ``steps`` steps.

    Forward: four 3 MiB activations (a ramp); backward: a 4 MiB gradient, then the activations
    freed last-in first-out (the fall); optimizer step; gradients freed. ``leak_bytes`` > 0 keeps
    one such buffer per step alive forever (a leak). Returns the builder and a dict of the states
    of interest: ``steps`` = [(start, peak, end) state of each step].
    """
    b = SnapshotBuilder(max_entries=max_entries)
    b.alloc(4 * MiB, stack("model.py", 10, "__init__"))  # parameters
    b.alloc(4 * MiB, stack("optim.py", 20, "init_state", library="torch/optim/adam.py"))  # exp_avg
    b.alloc(4 * MiB, stack("optim.py", 21, "init_state", library="torch/optim/adam.py"))  # exp_avg_sq
    marks = []
    for _step in range(steps):
        b.tick(1000)
        start = b.state
        acts = [b.alloc(3 * MiB, stack("model.py", 30 + i, "forward")) for i in range(4)]
        grad = b.alloc(4 * MiB, stack("model.py", 50, "backward", library="torch/autograd/graph.py"))
        peak = b.state
        for a in reversed(acts):
            b.free(a)
        if leak_bytes:
            b.alloc(leak_bytes, stack("metrics.py", 7, "log_step", library="torch/_tensor.py"))
        b.free(grad)
        marks.append((start, peak, b.state))
    return b, {"steps": marks}
