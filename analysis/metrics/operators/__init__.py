"""CPU operators: calls, CPU time and the GPU time each launched.

- ``operator_summary``: the per-operator table and ``operator_times`` (the entry; the roofline
  and the comparison build on it).

Entries: :mod:`analysis.metrics.operators.catalogue`.
"""
