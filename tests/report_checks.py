"""What the report of the bundled sample traces holds: its figures (one SVG each when written with
``svg``), shared by the report tests and the README's ``report`` command test."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

# The figures of the sample traces' report, in no particular order.
SAMPLE_REPORT_FIGURES = [
    "temporal_breakdown",
    "idle_time_breakdown",
    "idle_interval_stats",
    "comm_comp_overlap",
    "kernel_launch_stats",
    "kernel_type_breakdown",
    "kernel_breakdown",
    "queue_length",
    "memcpy_summary",
    "gpu_summary",
    "gpu_utilization_timeline",
    "step_time_breakdown",
    "tensor_core_share",
    "kernel_table",
    "operator_table",
    "collective_busbw",
    "collective_skew",
    "collective_wait",
    "step_time_heatmap",
    "step_breakdown",
    "critical_path",
]


def assert_one_svg_per_figure(figures_dir: Path) -> None:
    """``figures_dir`` (a report's ``figures/``) holds one SVG document per figure of the sample
    traces' report, and nothing else."""
    files = sorted(figures_dir.iterdir())
    assert sorted(p.name for p in files) == sorted(f"{n}.svg" for n in SAMPLE_REPORT_FIGURES)
    for path in files:
        assert ET.parse(path).getroot().tag.endswith("svg"), path.name
