"""Where the GPU time goes, per rank and stream: HTA's core analyses and the CUDA counters.

- ``temporal_breakdown``: idle, compute and non-compute GPU time (the entry: start here);
- ``idle_time_breakdown``: GPU idle time by cause (host wait, kernel wait, other);
- ``comm_comp_overlap``: how much communication overlaps computation;
- ``kernel_breakdown``: GPU time per kernel type and the top kernels;
- ``kernel_launch_stats``: each launch's CPU duration, GPU duration and launch delay;
- ``queue_length``: the CUDA launch queue per stream; ``memory_bandwidth``: memcpy/memset
  bandwidth and the copy summary.

Entries: :mod:`analysis.metrics.gpu_time.catalogue`.
"""
