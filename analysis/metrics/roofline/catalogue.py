"""The registry entries of this family (what it answers: the package docstring), in report
order. The top-level catalogue (:mod:`analysis.analyses`) registers them; the machinery is
:mod:`analysis.registry`.
"""

from __future__ import annotations

from analysis.metrics.roofline import operator_roofline
from analysis.registry import VISUALIZE, Analysis, Param, ranks_param

ENTRIES = (
    Analysis(
        name="operator_roofline",
        method="get_operator_roofline",
        doc="Per operator group (name and recorded shapes, dtypes, strides, concrete inputs): "
            "FLOPs and bytes per call, kernel time (µs), achieved TFLOP/s and TB/s, roofline bound "
            "and % of peak; MFU per step; the share of GPU time the models explain. Needs traces "
            "recorded with ``record_shapes=True``. ``gpu``: a GPU name, a ``GpuSpec`` or a dict of "
            "peaks overriding the detected GPU's. Returns ``RooflineResult(ops, steps, coverage, "
            "unmodelled, gpu)``.",
        rank_step=operator_roofline.operator_roofline_rank,
        needs=("operators", "shapes"),
        combine=operator_roofline.combine,
        params=(
            ranks_param(None),
            Param("gpu", None, type="str | GpuSpec | Mapping[str, float] | None",
                  description="The GPU whose peaks are the roofline: a GPU name, a ``GpuSpec``, "
                              "or a dict of numbers (``{'bf16': 800.0, 'memory_tb_s': 3.0}``, "
                              "TFLOP/s and TB/s) replacing the detected GPU's; None: the GPU the "
                              "trace names."),
            VISUALIZE,
            Param("top", 15, role="figure", type="int",
                  description="The number of operators in the figure of time lost against the "
                              "roofline."),
        ),
        returns="RooflineResult",
        columns=tuple(operator_roofline.OP_COLUMNS),
        figures="analysis.figures.operator_roofline",
        default_ranks="first",
        needs_gpu=True,
        extras=("op_shapes",),
        title="How close to the hardware",
        how_to_read=(
            "Each dot is one operator with one set of input shapes (the innermost modelled "
            "operator, so that each kernel counts once), placed by its arithmetic intensity (FLOPs "
            "per byte moved, from its shapes) and the TFLOP/s its kernels achieved; its area is "
            "its total kernel time. The lines are the GPU's ceilings: memory bandwidth on the left "
            "of the ridge point, the dense peak of each precision on the right. A dot far below "
            "its ceiling has room to gain; the table lists the operators that lose most time "
            "against their roofline. MFU divides the FLOPs of the modelled operators of a step by "
            "the step time and the GPU's peak."
        ),
        tables=lambda r: {
            "operator_roofline": r.ops,
            "operator_mfu": r.steps,
            "operator_model_coverage": r.coverage,
            "operator_unmodelled": r.unmodelled,
        },
        key_numbers=operator_roofline.key_numbers,
    ),
)
