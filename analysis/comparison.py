"""``compare(base, test)``: what changed between two runs, where, and (down to operators) why.

A :class:`TraceComparison` holds two :class:`~analysis.api.TraceAnalysis` objects and the per-rank
profiles of each (the registry entry ``step_profile``, i.e. ``ta.get_step_profile()``: computed where
the ranks live, this process or the Dask cluster). Every table is a pure function of those profiles
(:mod:`analysis.metrics.compare.trace_diff`); HTA's ``TraceDiff`` outputs come from
:mod:`analysis.metrics.compare.trace_diff_hta`. All times are µs per profiler step unless stated.

Ranks are matched by number (the ranks loaded in both runs); when the two runs share no rank number
and each has exactly one, those two are compared (with a warning).
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable
from functools import cached_property
from typing import Any, Protocol

import pandas as pd

from analysis.errors import ConfigError
from analysis.metrics.compare import trace_diff as _diff
from analysis.metrics.compare import trace_diff_hta as _hta
from analysis.metrics.timebase import Rounding


class Run(Protocol):
    """What a comparison reads of a run: an :class:`analysis.api.TraceAnalysis` (whose ``compare``
    method calls here; this module does not import the facade)."""

    engine: Any
    time_rounding: Rounding

    @property
    def ranks(self) -> list[int]: ...

    def run(self, name: str, ranks: Any = None, **options: Any) -> Any: ...

RankArg = int | Iterable[int] | None


def compare(
    base: Run, test: Run, *, ranks: RankArg = None,
    min_change_pct: float = _diff.DEFAULT_MIN_CHANGE_PCT,
    labels: tuple[str, str] = ("base", "test"),
) -> TraceComparison:
    """Compare two loaded runs (``ranks``: rank numbers present in both; default every shared rank).

    ``min_change_pct``: a kernel or operator whose time per step changes by less than this % of its
    base time is "unchanged" (noise).
    """
    return TraceComparison(base, test, ranks=ranks, min_change_pct=min_change_pct, labels=labels)


def match_ranks(base_ranks: list[int], test_ranks: list[int], ranks: RankArg = None
                ) -> list[tuple[int, int]]:
    """Pairs ``(base_rank, test_rank)`` to compare (see the module docstring)."""
    shared = [r for r in base_ranks if r in set(test_ranks)]
    if ranks is not None:
        chosen = [int(ranks)] if isinstance(ranks, int) else [int(r) for r in ranks]
        missing = [r for r in chosen if r not in shared]
        if missing:
            raise ConfigError(f"ranks {missing} are not loaded in both runs (base has {base_ranks}, "
                              f"test has {test_ranks})")
        return [(r, r) for r in chosen]
    if shared:
        return [(r, r) for r in shared]
    if len(base_ranks) == 1 and len(test_ranks) == 1:
        warnings.warn(f"the runs share no rank number: comparing base rank {base_ranks[0]} with "
                      f"test rank {test_ranks[0]}", stacklevel=3)
        return [(base_ranks[0], test_ranks[0])]
    raise ConfigError(f"the runs share no rank (base has {base_ranks}, test has {test_ranks})")


class TraceComparison:
    """Base vs test: breakdown, kernel and operator deltas per profiler step (see the module doc)."""

    def __init__(self, base: Run, test: Run, *, ranks: RankArg = None,
                 min_change_pct: float = _diff.DEFAULT_MIN_CHANGE_PCT,
                 labels: tuple[str, str] = ("base", "test")) -> None:
        if min_change_pct < 0:
            raise ConfigError(f"min_change_pct must be >= 0, not {min_change_pct!r}")
        self.base, self.test = base, test
        self.labels = labels
        self.min_change_pct = float(min_change_pct)
        self.pairs = match_ranks(base.ranks, test.ranks, ranks)
        self._base_profiles = _profiles(base, [b for b, _ in self.pairs])
        self._test_profiles = _profiles(test, [t for _, t in self.pairs])

    # --------------------------------------------------------------------------------- tables
    def breakdown(self, per_rank: bool = False) -> pd.DataFrame:
        """Step time and its parts (computation, exposed communication, exposed memory, other,
        idle) per profiler step, µs: base, test, ``diff_us``, ``diff_pct``; averaged over the
        compared ranks, or with ``per_rank=True`` one block per (base_rank, test_rank)."""
        per_rank_table, overall = self._breakdowns
        return per_rank_table if per_rank else overall

    @cached_property
    def _breakdowns(self) -> tuple[pd.DataFrame, pd.DataFrame]:
        return _diff.breakdown_deltas(self._base_profiles, self._test_profiles, self.pairs)

    def kernels(self) -> pd.DataFrame:
        """Per kernel type and name: count and time per step, base vs test, largest change first."""
        return _diff.kernel_deltas(self._base_profiles, self._test_profiles, self.min_change_pct)

    def operators(self) -> pd.DataFrame:
        """Per CPU operator: calls and exclusive GPU time per step, base vs test (the level that
        stays comparable across hardware), largest change first."""
        return _diff.operator_deltas(self._base_profiles, self._test_profiles, self.min_change_pct)

    def steps(self) -> pd.DataFrame:
        """Profiler steps analysed per compared rank in each run."""
        return pd.DataFrame(
            [(b, t, self._base_profiles[b].steps, self._test_profiles[t].steps)
             for b, t in self.pairs],
            columns=["base_rank", "test_rank", "base_steps", "test_steps"])

    def tables(self) -> dict[str, pd.DataFrame]:
        """Every table of the comparison, keyed by CSV file stem."""
        return {"breakdown": self.breakdown(), "breakdown_per_rank": self.breakdown(per_rank=True),
                "operators": self.operators(), "kernels": self.kernels(), "steps": self.steps()}

    def figures(self, top: int = 10) -> dict:
        """The comparison's figures (:func:`analysis.figures.trace_diff.draw`), keyed by file stem."""
        from analysis.figures.trace_diff import draw

        return draw(self.tables(), self.labels, top=top)

    @property
    def notes(self) -> list[str]:
        """What the reader must know to read the tables (different GPUs, steps, ranks)."""
        notes = []
        base_gpus = sorted({g for p in self._base_profiles.values() for g in p.gpus})
        test_gpus = sorted({g for p in self._test_profiles.values() for g in p.gpus})
        if base_gpus != test_gpus:
            notes.append(
                f"The runs used different GPUs ({', '.join(base_gpus) or 'unknown'} vs "
                f"{', '.join(test_gpus) or 'unknown'}): kernel names differ between hardware, so "
                "compare at the operator level (operators(), matched by name).")
        for label, profiles in zip(self.labels, (self._base_profiles, self._test_profiles),
                                   strict=True):
            idle = sorted(r for r, p in profiles.items() if not len(p.kernels))
            if idle:
                notes.append(
                    f"{label}: rank(s) {idle} ran no GPU kernel in the window compared (a "
                    "CPU-only trace, or no GPU work in its steps): their step time is all idle, "
                    "and every kernel and operator row of the other run reads as gone or new.")
        if any(p.steps == 0 for p in (*self._base_profiles.values(),
                                      *self._test_profiles.values())):
            notes.append("Some ranks have no ProfilerStep: their whole GPU span counts as one step.")
        if any(b != t for b, t in self.pairs):
            notes.append(f"Rank pairs compared (base, test): {self.pairs}.")
        return notes

    # ------------------------------------------------------------------------- HTA's TraceDiff
    def compare_traces(
        self, control_rank: RankArg = None, test_rank: RankArg = None,
        control_iteration: RankArg = None, test_iteration: RankArg = None,
        device_type: str = "ALL", use_short_name: bool = False,
        labels: tuple[str, str] = ("Control", "Test"),
    ) -> pd.DataFrame:
        """HTA 0.5.0's ``TraceDiff.compare_traces`` frame (same arguments, defaults, index and
        columns; ``device_type`` as ``"CPU"``/``"GPU"``/``"ALL"`` or HTA's ``DeviceType``)."""
        device = getattr(device_type, "name", device_type)
        control = _hta_side(self.base, control_rank, control_iteration, device, "control")
        test = _hta_side(self.test, test_rank, test_iteration, device, "test")
        return _hta.compare_frames(control, test, labels, use_short_name)

    def ops_diff(self, control_rank: RankArg = None, test_rank: RankArg = None,
                 control_iteration: RankArg = None, test_iteration: RankArg = None,
                 device_type: str = "ALL") -> dict[str, list[str]]:
        """HTA 0.5.0's ``TraceDiff.ops_diff``: ``added``, ``deleted``, ``increased``,
        ``decreased``, ``unchanged`` lists of names."""
        return _hta.ops_diff(self.compare_traces(control_rank, test_rank, control_iteration,
                                                 test_iteration, device_type))

    def __repr__(self) -> str:
        return (f"TraceComparison(base={self.base.engine.source!r}, "
                f"test={self.test.engine.source!r}, pairs={self.pairs})")


def _profiles(ta: Run, ranks: list[int]) -> dict[int, _diff.RankProfile]:
    # through the registry (entry "step_profile"): same per-rank task, memoised work and extras
    # as every other analysis of the run
    return ta.run("step_profile", ranks)


def _as_list(value, default: list[int], what: str, present: Iterable[int]) -> list[int]:
    if value is None:
        return default
    chosen = [int(value)] if isinstance(value, int) else [int(v) for v in value]
    present = set(present)
    bad = [v for v in chosen if v not in present]
    if bad:
        raise ConfigError(f"invalid {what} {bad}: the trace has {sorted(present)}")
    return chosen


def _hta_side(ta: Run, rank: RankArg, iteration: RankArg, device: str, label: str
              ) -> list[pd.DataFrame]:
    ranks = _as_list(rank, ta.ranks[:1], f"{label} rank", ta.ranks)
    found = ta.engine.map_ranks(_hta.iterations_rank, ta.ranks, window="full")
    every = set().union(*found.values())
    iterations = _as_list(iteration, None, f"{label} iteration", every) if iteration is not None \
        else _hta.first_iteration(found, label)
    parts = ta.engine.map_ranks(_hta.ops_summary_rank, ranks, window="full",
                                iterations=iterations, device_type=device,
                                rounding=ta.time_rounding)
    return list(parts.values())
