"""Profiler steps: which rows of a rank's trace mark a ``ProfilerStep#N`` -- the one definition.

``torch.profiler`` with a schedule annotates each iteration on the CPU as ``ProfilerStep#N``. A
*profiler step* here is such an annotation:

- its name matches ``ProfilerStep\\s*#\\s*(\\d+)`` at the start (HTA's pattern); a name that starts
  with ``ProfilerStep`` but carries no ``#N`` is not a step (HTA numbers it -1 and leaves it out);
- it is CPU-side: not a GPU event and not of category ``gpu_user_annotation`` (Kineto copies each
  step annotation onto the GPU timeline; the copy is not a second step, and a step boundary only
  for the HTA preset's window, as in HTA 0.5.0: ``analysis.kineto.window``);
- a step annotated twice on a rank keeps its earliest annotation;
- N must fit a signed 64-bit integer; a larger number is not a step (with a warning).

The model (``RankTrace``), the analysed window (``analysis.kineto.window``), the step table
(``analysis.metrics.steps.profiler_steps``) and the trace metadata all read steps from here.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any, Protocol

import numpy as np
import pandas as pd

from analysis.kineto.events import gpu_mask

STEP_PATTERN = r"ProfilerStep\s*#\s*(\d+)"
GPU_ANNOTATION_CATS = ("gpu_user_annotation",)
_INT64_MAX = np.iinfo(np.int64).max


class RankLike(Protocol):
    """What this module reads of a rank (:class:`analysis.kineto.model.RankTrace`, which calls
    here for its own ``profiler_steps()``; this module does not import the model)."""

    events: pd.DataFrame

    def memoised(self, key: Any, compute: Callable[[], Any]) -> Any: ...


def step_names(rt: RankLike) -> list[str]:
    """The distinct event names of ``rt`` that are step names (``ProfilerStep#N``)."""
    names = rt.events["name"]
    cats = names.cat.categories if isinstance(names.dtype, pd.CategoricalDtype) else names.unique()
    is_step = pd.Series(cats, dtype=object).astype(str).str.match(STEP_PATTERN).to_numpy()
    return [str(c) for c, s in zip(cats, is_step, strict=True) if s]


def step_annotation_mask(rt: RankLike) -> np.ndarray:
    """Rows of ``rt.events`` that are CPU-side ``ProfilerStep#N`` annotations (see module doc)."""
    ev = rt.events
    named = ev["name"].isin(step_names(rt)).to_numpy()
    if not named.any():
        return named
    on_cpu = ~gpu_mask(ev) & ~ev["cat"].isin(GPU_ANNOTATION_CATS).to_numpy()
    return named & on_cpu


def profiler_steps(rt: RankLike) -> pd.DataFrame:
    """One row per profiler step of ``rt``: ``step`` (N, int64), ``ts``, ``dur`` (int ns, as
    written), ``name``; sorted by step. Empty when the trace was recorded without a schedule.
    Computed once per rank (shared frame: do not modify it)."""
    return rt.memoised("profiler_steps", lambda: _profiler_steps(rt))


def _profiler_steps(rt: RankLike) -> pd.DataFrame:
    rows = rt.events.loc[step_annotation_mask(rt), ["ts", "dur", "name"]]
    digits = rows["name"].astype(str).str.extract(STEP_PATTERN, expand=False)
    numbers = [int(d) for d in digits]
    fits = np.array([n <= _INT64_MAX for n in numbers], dtype=bool)
    if not fits.all():
        warnings.warn(
            f"{rt.meta.source}: {int((~fits).sum())} ProfilerStep annotation(s) have a step number "
            "too large for a 64-bit integer; they are not treated as profiler steps",
            stacklevel=3,
        )
    rows = rows[fits]
    out = pd.DataFrame(
        {
            "step": np.array([n for n, f in zip(numbers, fits, strict=True) if f], dtype=np.int64),
            "ts": rows["ts"].to_numpy(dtype=np.int64),
            "dur": rows["dur"].to_numpy(dtype=np.int64),
            "name": rows["name"].astype(str).to_numpy(dtype=object),
        }
    )
    out = out.sort_values(["step", "ts"], kind="stable").drop_duplicates("step", keep="first")
    return out.reset_index(drop=True)


def step_numbers(rt: RankLike) -> set[int]:
    """The profiler step numbers of ``rt``."""
    return {int(s) for s in profiler_steps(rt)["step"]}
