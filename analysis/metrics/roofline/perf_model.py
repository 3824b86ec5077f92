"""FLOPs and bytes moved by one operator call, from the shapes the profiler recorded.

A *performance model* turns one CPU operator call (its name and the ``record_shapes=True`` args
``Input Dims``, ``Input type``, ``Input Strides``, ``Concrete Inputs``) into an :class:`OpCost`:
the floating-point operations it must do and the bytes it must move between the GPU's memory and
its cores at least once (each input read once, each output written once). These are the
definitions TraceLens (AMD-AGI/TraceLens, ``TraceLens/PerfModel``) uses, re-derived per op family:

- :mod:`analysis.metrics.roofline.perf_model_gemm`: ``mm``, ``addmm``, ``bmm``, ``baddbmm``, ``matmul``,
  ``linear``, ``_scaled_mm`` (fp8);
- :mod:`analysis.metrics.roofline.perf_model_attention`: ``scaled_dot_product_attention`` and its flash,
  memory-efficient and cuDNN kernels, forward and backward (causal attention halved);
- :mod:`analysis.metrics.roofline.perf_model_conv`: ``convolution``, ``_convolution``, ``cudnn_convolution``,
  ``conv1d/2d/3d`` (grouped and transposed) and ``convolution_backward``;
- :mod:`analysis.metrics.roofline.perf_model_memory`: elementwise, normalisation and reduction ops, which
  are memory-bound by nature (``memory_bound=True``: their roofline bound is always memory).

An op without a model, or whose args do not fit its model, raises :class:`NoModel` with the reason:
it is reported as "no model", never guessed. Where we deliberately differ from TraceLens
(convolution bias, reduction output size, layer-norm affine flags, causal attention with
``N_Q != N_KV``, stride-0 inputs), ``docs/deviations.md`` says so.

Units: FLOPs and bytes per call (``Data Moved (MB)`` in the tables is bytes / 2**20, as TraceLens).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache

from analysis.metrics.roofline import (
    perf_model_attention,
    perf_model_conv,
    perf_model_gemm,
    perf_model_memory,
)
from analysis.metrics.roofline.op_call import NoModel, OpCall, OpCost


@cache
def _models() -> dict[str, Callable[[OpCall], OpCost]]:
    models: dict[str, Callable[[OpCall], OpCost]] = {}
    for family in (perf_model_gemm, perf_model_attention, perf_model_conv, perf_model_memory):
        models.update(family.MODELS)
    return models


def modelled_ops() -> list[str]:
    """The operator names that have a model."""
    return sorted(_models())


def op_cost(call: OpCall) -> OpCost:
    """The cost of one call; raises :class:`NoModel` (with the reason) when there is none."""
    model = _models().get(call.name)
    if model is None:
        raise NoModel("no model for this operator")
    try:
        return model(call)
    except NoModel:
        raise
    except (IndexError, TypeError, ValueError, ZeroDivisionError) as exc:
        raise NoModel(f"unexpected args for {call.name}: {exc}") from None
