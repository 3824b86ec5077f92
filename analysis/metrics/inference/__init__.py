"""Serving-engine (vLLM, SGLang) traces: the engine's iterations, found without ProfilerSteps,
their phase (prefill / decode / mixed) and where each iteration's time goes on the GPU."""
