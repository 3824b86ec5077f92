"""The trace and its profiler steps: what was loaded and how each step starts.

- ``trace_metadata``: per rank, source, GPU, world size, events, steps, serving iterations, time
  range (the entry);
- ``profiler_steps``: the step table and HTA's ``get_profiler_steps``;
- ``step_start_gap``: how long each step runs on the CPU before its first launch.

Entries: :mod:`analysis.metrics.steps.catalogue`.
"""
