"""The critical path of each profiler step: the longest chain of dependent work, and what bound it.

- ``critical_path``: HTA's ``critical_path_analysis`` and the per-step summary (the entry);
- ``critical_path_context``: what the graph is built from (a rank's events, launches, syncs);
- ``critical_path_graph``: the graph's nodes and edges; ``longest_path``: the path through it.

Entries: :mod:`analysis.metrics.critical_path.catalogue`.
"""
