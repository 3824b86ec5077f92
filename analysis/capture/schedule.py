"""What ``torch.profiler`` does at each step under a ``ProfilerConfig``'s schedule, without torch.

``schedule_action`` is ``torch.profiler.schedule``'s step function written out (the tests check
they agree); ``schedule_table`` lays it out per step, including when traces are written, so a user
can see before a long run which steps will be recorded.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from analysis.capture.config import ProfilerConfig

# torch.profiler.ProfilerAction member names
NONE, WARMUP, RECORD, RECORD_AND_SAVE = "NONE", "WARMUP", "RECORD", "RECORD_AND_SAVE"
RECORDING = (RECORD, RECORD_AND_SAVE)

if TYPE_CHECKING:
    import pandas as pd


def schedule_action(config: ProfilerConfig, step: int) -> str:
    """The ``ProfilerAction`` name torch's schedule returns for ``step`` (0-based)."""
    if step < 0:
        raise ValueError(f"step must be >= 0, got {step}")
    if step < config.skip_first:
        return NONE
    position = step - config.skip_first
    if config.skip_first_wait:
        position += config.wait
    length = config.cycle_length
    if config.repeat > 0 and position >= config.repeat * length:
        return NONE
    in_cycle = position % length
    if in_cycle < config.wait:
        return NONE
    if in_cycle < config.wait + config.warmup:
        return WARMUP
    return RECORD if in_cycle < length - 1 else RECORD_AND_SAVE


def _cycle(config: ProfilerConfig, step: int) -> int:
    position = step - config.skip_first + (config.wait if config.skip_first_wait else 0)
    return position // config.cycle_length


def _phase(config: ProfilerConfig, step: int, action: str) -> str:
    if step < config.skip_first:
        return "skipped"
    if action == NONE:
        done = config.repeat > 0 and _cycle(config, step) >= config.repeat
        return "done" if done else "waiting"
    return "warming up" if action == WARMUP else "recording"


def schedule_table(config: ProfilerConfig, steps: int) -> pd.DataFrame:
    """One row per step of a loop of ``steps`` steps that calls ``.step()`` once per step.

    Columns: ``step``; ``action`` (torch's ``ProfilerAction`` name); ``phase`` (``skipped``,
    ``waiting``, ``warming up``, ``recording``, ``done`` once ``repeat`` cycles are over);
    ``cycle`` (0-based, ``<NA>`` outside cycles); ``trace_saved`` (a trace is written when this
    step ends). If the loop ends while the profiler is recording, torch writes one more, partial,
    trace when the profiler stops: a last row ``step == steps`` with phase
    ``recording (partial, at exit)`` shows it; that trace holds the ``ProfilerStep#`` annotations
    of its cycle's steps, including the unfinished ``ProfilerStep#<steps>``.
    """
    import pandas as pd  # here, so that a training process importing profile() does not pay for it

    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 0:
        raise ValueError(f"steps must be a whole number >= 0, got {steps!r}")
    rows = []
    for step in range(steps):
        action = schedule_action(config, step)
        phase = _phase(config, step, action)
        in_cycle = phase in ("waiting", "warming up", "recording")
        rows.append((step, action, phase, _cycle(config, step) if in_cycle else None,
                     action == RECORD_AND_SAVE))
    # After the last .step() the profiler sits at step `steps`; leaving the context stops it, and
    # a RECORD / RECORD_AND_SAVE state there is saved (torch's action map: (RECORD, None)).
    final = schedule_action(config, steps)
    if final in RECORDING:
        rows.append((steps, final, "recording (partial, at exit)", _cycle(config, steps), True))
    table = pd.DataFrame(rows, columns=["step", "action", "phase", "cycle", "trace_saved"])
    return table.astype({"step": "int64", "cycle": "Int64", "trace_saved": "bool"})


def recorded_steps_per_trace(table: pd.DataFrame) -> list[list[int]]:
    """The steps each written trace covers, in write order, from a ``schedule_table``: the
    recording steps since the previous save."""
    traces, current = [], []
    for step, action, saved in table[["step", "action", "trace_saved"]].itertuples(index=False):
        if action in RECORDING:
            current.append(int(step))
        if saved:
            traces.append(current)
            current = []
    return traces
