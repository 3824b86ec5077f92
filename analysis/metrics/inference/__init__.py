"""Serving-engine (vLLM, SGLang) traces: the engine's iterations, found without ProfilerSteps,
their phase (prefill / decode / mixed) and where each iteration's time goes on the GPU.

- ``iterations``: the iterations, their phase and their GPU time (the entry).

Entries: :mod:`analysis.metrics.inference.catalogue`.
"""
