"""Engines: where the per-rank work runs -- in this process, or on a Dask cluster.

Every analysis is written as a per-rank step (``<module>.<name>_rank(rank_trace, **options)``,
which sees one rank) and a ``combine`` step (which sees only the per-rank results). An *engine*
holds the loaded ranks and runs per-rank steps over them; the facade combines what comes back::

    engine = load_engine("gs://bucket/run", client=dask_client)   # or client=None: this process
    frames = engine.map_ranks(temporal_breakdown_rank, engine.ranks, patterns="default")
    table = temporal_breakdown.combine(frames)

- :class:`~analysis.engines.local.LocalEngine` loads with :func:`analysis.kineto.loader.load_trace`
  (a local process pool) and keeps the :class:`~analysis.kineto.model.Trace` in this process.
- :class:`~analysis.engines.dask.DaskEngine` loads each file on a Dask worker, keeps every rank's
  tables there, runs the per-rank steps there and brings back only their results.

Both give identical results, rank numbers, errors and warnings. ``map_ranks(..., window="steps")``
(the default) runs over HTA's analysed window (complete profiler steps and the chosen GPU events, :mod:`analysis.kineto.window`),
``window="full"`` over the whole trace. What the analysed window is cut at (profiler steps or
a serving engine's steady-state iterations) is chosen when loading (``load_engine(window=...)``).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Protocol

from analysis.io import LoadOptions
from analysis.kineto.model import RankMeta
from analysis.kineto.window import Window, WindowStats


class Engine(Protocol):
    """What the facade needs from an engine (see the module docstring)."""

    source: str  # what the user asked for (directory, URL, ...)
    skipped: list[tuple[str, str]]  # (file, reason) of the files not loaded
    metas: dict[int, RankMeta]  # each loaded rank's metadata, on the caller
    window_stats: dict[int, WindowStats]  # what the analysed window did to each rank's GPU events
    options: LoadOptions  # how the ranks were read (and how their extras are read)
    # attaches extras kinds to a rank, read as the engine read the rank: ``read_extras(rt, kinds)``
    # (picklable: the per-rank task takes it to a Dask worker)
    read_extras: Callable[[Any, Iterable[str]], Any]

    @property
    def ranks(self) -> list[int]: ...

    def select(self, ranks=None, default: str = "first") -> list[int]:
        """A ``ranks`` argument (None, "all", int, list) as a list of loaded ranks."""
        ...

    def map_ranks(
        self, func: Callable[..., Any], ranks: Iterable[int], *, window: Window = "steps", **kw
    ) -> dict[int, Any]:
        """``{rank: func(rank_trace, **kw)}`` for ``ranks``, in the order given."""
        ...


def load_engine(
    trace_dir: str | os.PathLike | None = None,
    trace_files: Iterable[str] | Mapping[int, str] | None = None,
    *,
    client: Any = None,
    include_last_profiler_step: bool = False,
    gpu_events: str = "hta",
    window: str = "auto",
    options: LoadOptions | None = None,
    **load_options: Any,
) -> Engine:
    """Load the traces into a :class:`LocalEngine` (``client=None``) or a :class:`DaskEngine`.

    ``client``: a ``dask.distributed.Client``; the traces are then read, parsed and kept on its
    workers (which must be able to read the files: gs:// URLs, or a shared file system).
    ``options``: how to read them (:class:`~analysis.io.LoadOptions`), ``load_options`` its fields
    as keywords (replacing those of ``options``); the engine keeps the one value as
    ``engine.options``. ``timeout`` bounds each wait on the cluster; ``max_workers`` applies to
    the local pool only; ``max_memory`` bounds the ranks the local engine holds at once
    (:mod:`analysis.engines.local`; a Dask cluster's workers manage their own memory).
    """
    opts = LoadOptions.of(options, **load_options)
    window = dict(include_last_profiler_step=include_last_profiler_step, gpu_events=gpu_events,
                  window=window)
    if client is None:
        from analysis.engines.local import LocalEngine

        return LocalEngine.load(trace_dir, trace_files, options=opts, **window)
    from analysis.engines.dask import DaskEngine

    return DaskEngine.load(client, trace_dir, trace_files, options=opts, **window)


__all__ = ["Engine", "LoadOptions", "Window", "load_engine"]
