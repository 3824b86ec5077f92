"""Comparing two runs: the per-step profile of a run, and the tables ``compare(base, test)`` makes.

- ``trace_diff``: the per-rank step profile and the comparison tables (the entry;
  ``analysis.comparison`` is the user-facing side);
- ``trace_diff_hta``: HTA's ``TraceDiff`` outputs.

Entries: :mod:`analysis.metrics.compare.catalogue`.
"""
