"""How close the operators come to the hardware: FLOPs and bytes from recorded shapes, against
the GPU's peaks.

- ``operator_roofline``: the analysis (the entry);
- ``perf_model``: an operator call's cost, dispatched to ``perf_model_gemm``,
  ``perf_model_attention``, ``perf_model_conv``, ``perf_model_memory``; ``op_call``: their shared
  vocabulary (``OpCall``, ``OpCost``, ``NoModel``, dtype tables);
- ``gpu_specs``: the GPUs' peak throughput and bandwidth.

Entries: :mod:`analysis.metrics.roofline.catalogue`.
"""
