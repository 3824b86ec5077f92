"""Trace health: problems in the traces themselves that make the other numbers wrong or doubtful.

- ``trace_health``: the per-rank step and ``combine`` (the entry);
- ``trace_health_checks``: the individual checks it runs.

Entries: :mod:`analysis.metrics.health.catalogue`.
"""
