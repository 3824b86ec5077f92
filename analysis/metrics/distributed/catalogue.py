"""The registry entries of this family (what it answers: the package docstring), in report
order. The top-level catalogue (:mod:`analysis.analyses`) registers them; the machinery is
:mod:`analysis.registry`.
"""

from __future__ import annotations

from analysis.metrics.distributed import collectives, step_breakdown, stragglers
from analysis.registry import RANKS_ALL, VISUALIZE, Analysis, Param

ENTRIES = (
    Analysis(
        name="collectives",
        method="get_collectives",
        doc="One row per (collective instance, rank): type, process group, bytes, start/end (µs), "
            "skew, wait, transfer and exposed time (µs), algorithm and bus bandwidth (GB/s).",
        rank_step=collectives.collectives_rank,
        persist=True,
        combine=collectives.combine,
        params=(VISUALIZE, RANKS_ALL),
        figures="analysis.figures.collectives",
        title="Collectives and stragglers",
        how_to_read=(
            "Every collective is matched across ranks (by process group and sequence number, else "
            "by order). Skew is the latest rank's start minus the earliest's; each rank's wait is "
            "the time it spent waiting for the last rank; transfer is the time after everyone "
            "arrived, and bus bandwidth (nccl-tests' definition) compares across collective types "
            "and group sizes. The heatmap shows which ranks waited in which collectives: a bright "
            "row is a rank that is always early (others are late), a dark column with one dark row "
            "is one straggler. The straggler table ranks the ranks by the wait they cost the "
            "others, and says why they were late when the trace shows it."
        ),
        tables=lambda df: {"collective_summary": collectives.summary(df),
                           "stragglers": stragglers.stragglers(df)},
        csv_only=lambda df: {"collectives": df},
        headline=stragglers.headline,
        columns=tuple(collectives.COLUMNS),
    ),
    Analysis(
        name="collective_summary",
        method="get_collective_summary",
        doc="Per (collective type, message-size bucket, process group): instances, ranks, total "
            "and exposed time (µs), median bus bandwidth (GB/s) and 95th-percentile skew (µs).",
        rank_step=collectives.collectives_rank,
        persist=True,
        combine=collectives.combine_summary,
        params=(RANKS_ALL,),
        placement="none",
        columns=("type", "bucket", "bucket_bytes", "group", "count", "ranks", "total_us",
                 "exposed_us", "busbw_median_gbps", "skew_p95_us"),
    ),
    Analysis(
        name="stragglers",
        method="get_stragglers",
        doc="One row per rank, costliest first: times it arrived last at a collective, the wait it "
            "caused the others (µs, summed over the ranks that waited: as a share of the median "
            "step, ``wait_caused_pct_of_step``, it can pass 100 %), its mean lateness (µs) and "
            "why it was late.",
        rank_step=collectives.collectives_rank,
        persist=True,
        combine=stragglers.combine,
        params=(VISUALIZE, RANKS_ALL),
        figures="analysis.figures.stragglers",
        placement="none",
        columns=tuple(stragglers.COLUMNS),
    ),
    Analysis(
        name="step_breakdown",
        method="get_step_breakdown",
        doc="Per rank and profiler step: step time, the computation, exposed communication, "
            "memory and other GPU work launched in the step (wherever it ran; how far past the "
            "step's end), the GPU's idle time in the step by cause (µs), with each step's slowest "
            "rank and its margin over the median (µs).",
        rank_step=step_breakdown.step_breakdown_rank,
        persist=True,
        combine=step_breakdown.combine,
        params=(VISUALIZE,
                Param("consecutive_kernel_delay", step_breakdown.CONSECUTIVE_KERNEL_DELAY_US,
                      type="float",
                      description="Idle gaps shorter than this (µs) between kernels the host "
                                  "launched in time count as kernel wait, as in "
                                  "``get_idle_time_breakdown``."),
                RANKS_ALL),
        columns=tuple(step_breakdown.COLUMNS),
        figures="analysis.figures.step_breakdown",
        title="Per-step breakdown across ranks",
        how_to_read=(
            "The heatmap shows every rank's step time per profiler step: a bright cell is a slow "
            "step on one rank, a bright column a slow step everywhere. The bars split the median "
            "rank's step into computation, communication not hidden by computation, memory copies "
            "and idle time by cause (host wait: the GPU waited for the CPU). The table names each "
            "step's slowest rank and how much longer it took than the median."
        ),
    ),
)
