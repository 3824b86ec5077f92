"""Distributed training: collectives across ranks, who makes the others wait, each step per rank.

- ``collectives``: every collective instance matched across ranks (the entry);
- ``stragglers``: the ranks that arrive last, the wait they cost, and why (built on collectives);
- ``step_breakdown``: each profiler step's time per rank, split by cause.

Entries: :mod:`analysis.metrics.distributed.catalogue`.
"""
