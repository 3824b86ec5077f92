"""The analyses: one module per metric, each a pure function of one rank's trace (``*_rank``) and
a ``combine`` of the per-rank results; plus what they share (kernel patterns, intervals, time base).

No module here reads files, draws figures or knows the facade (``import-linter`` enforces it)."""
