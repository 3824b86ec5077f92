"""The analyses, grouped in packages by what they answer; each metric a pure function of one rank's
trace (``*_rank``) and a ``combine`` of the per-rank results.

- ``gpu_time/``: where the GPU time goes (HTA's temporal, idle, overlap, kernel, launch analyses,
  CUDA queue length, memory bandwidth);
- ``steps/``: trace metadata, profiler steps, how each step starts;
- ``health/``: problems in the traces themselves;
- ``operators/``: CPU operators and the GPU time they launched;
- ``roofline/``: operator FLOPs and bytes against the GPU's peaks;
- ``critical_path/``: the critical path of each step;
- ``distributed/``: collectives, stragglers, the per-step breakdown across ranks;
- ``compare/``: the per-step profile that ``compare(base, test)`` compares;
- ``tensorboard/``: the retired TensorBoard profiler plugin's views (GPU summary, step time,
  kernels, operators, memory), with its definitions;
- ``findings/``: what the other analyses say is wrong, ranked.

Each package's docstring names its entry module; its ``catalogue.py`` holds its registry entries.
Shared by the families (flat here): ``kernel_types`` (kernel classification patterns),
``intervals`` (interval arithmetic), ``timebase`` (time units and rounding).

No module here reads files, draws figures or knows the facade (``import-linter`` enforces it).
"""

# Import paths the documentation shows (docs/dask.md), kept working: module -> its family package.
_DOCUMENTED = {"temporal_breakdown": "analysis.metrics.gpu_time.temporal_breakdown"}


def __getattr__(name):
    if name in _DOCUMENTED:
        import importlib

        return importlib.import_module(_DOCUMENTED[name])
    raise AttributeError(f"module 'analysis.metrics' has no attribute {name!r}")
