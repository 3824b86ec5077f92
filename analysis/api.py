"""``TraceAnalysis``: HolisticTraceAnalysis's API over this package's loader, analyses and figures.

The facade holds no algorithm: it loads the traces once, restricts them to the analysed profiler
steps, and for each ``get_*`` method calls the pure analysis function and, with ``visualize=True``,
shows the matching figure from ``analysis.figures``. Method names, arguments and returned columns are
HTA 0.5.0's; see the README for the places where the default preset deliberately differs.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from analysis import arguments
from analysis.engines import Engine, load_engine
from analysis.errors import ConfigError, TraceAnalysisError
from analysis.kineto.model import Trace
from analysis.metrics import comm_comp_overlap as _overlap
from analysis.metrics import idle_time_breakdown as _idle
from analysis.metrics import kernel_breakdown as _kernels
from analysis.metrics import kernel_launch_stats as _launch
from analysis.metrics import operator_summary as _operators
from analysis.metrics import profiler_steps as _steps
from analysis.metrics import temporal_breakdown as _temporal
from analysis.metrics.kernel_types import KernelPatterns, resolve_patterns
from analysis.metrics.timebase import Rounding

RankSpec = int | Iterable[int] | str | None
_LOAD_OPTIONS = arguments.load_options.__kwdefaults__


class TraceAnalysis:
    """Load a set of per-rank Kineto traces and analyse them (HTA-compatible API).

    Args:
        trace_dir: a local directory, a single file, or a ``gs://bucket/prefix`` (any fsspec URL).
        trace_files: a list of files, or HTA's ``{rank: path}`` mapping (relative paths are taken
            from ``trace_dir``).
        include_last_profiler_step: analyse the last ``ProfilerStep`` too (HTA drops it by default,
            as it is usually cut short when the profiler stops).
        kernel_patterns: ``"default"`` (recognises NCCL/RCCL/HCCL, DeepEP, NVSHMEM and custom
            all-reduce kernels; sync events are not computation), ``"hta"`` (HTA 0.5.0's exact
            numbers), or a ``KernelPatterns`` of your own.
        time_rounding: ``"exact"`` keeps nanosecond timestamps; ``"hta"`` rounds ns-resolution traces
            to whole µs like HTA. Defaults to ``"hta"`` with the HTA patterns, else ``"exact"``.
        storage_options: passed to fsspec/gcsfs (credentials, project, endpoint...).
        cache_dir, use_cache: the local cache of parsed traces (second opens read only the cache).
        on_error: ``"raise"`` (default) or ``"skip"`` files that fail to load (a warning lists them).
        max_workers, progress: parallel parsing and the progress bar.
        client: a ``dask.distributed.Client``: each rank is then loaded, kept and analysed on
            the cluster's workers and only results come back (``pip install
            'trace-analysis[dask]'``, docs/dask.md); ``cache_dir`` is then a path on the workers.
        timeout: seconds that each wait on the Dask cluster may last (None: no limit).
    """

    def __init__(
        self,
        trace_dir: str | os.PathLike | None = None,
        trace_files: list[str] | Mapping[int, str] | None = None,
        include_last_profiler_step: bool = False,
        *,
        kernel_patterns: str | KernelPatterns = "default",
        time_rounding: Rounding | None = None,
        storage_options: dict[str, Any] | None = None,
        cache_dir: str | os.PathLike | None = None,
        use_cache: bool = True,
        on_error: str = "raise",
        max_workers: int | None = None,
        progress: bool | None = None,
        client: Any = None,
        timeout: float | None = None,
    ) -> None:
        arguments.load_options(**{k: v for k, v in locals().items() if k in _LOAD_OPTIONS})
        self.patterns = resolve_patterns(kernel_patterns)
        if time_rounding is None:
            time_rounding = "hta" if self.patterns.name == "hta" else "exact"
        if time_rounding not in ("exact", "hta"):
            raise ConfigError(f"time_rounding must be 'exact' or 'hta', not {time_rounding!r}")
        self.time_rounding: Rounding = time_rounding
        self.include_last_profiler_step = include_last_profiler_step
        self.storage_options = dict(storage_options or {})
        self.cache_dir = cache_dir
        # Where the per-rank work runs: this process (client=None) or the Dask cluster; the
        # engine also cuts the analysed window (complete profiler steps only), as HTA does.
        self.engine: Engine = load_engine(
            None if trace_dir is None else os.fspath(trace_dir),
            trace_files,
            client=client,
            include_last_profiler_step=include_last_profiler_step,
            storage_options=self.storage_options,
            cache_dir=cache_dir,
            use_cache=use_cache,
            on_error=on_error,
            max_workers=max_workers,
            progress=progress,
            timeout=timeout,
        )
        self._hta = None

    # ----------------------------------------------------------------------------------- helpers
    @property
    def ranks(self) -> list[int]:
        return self.engine.ranks

    @property
    def full_trace(self) -> Trace:
        """Every loaded rank, whole, in this process (not with a Dask client: see ``trace``)."""
        return self._local_trace("full_trace")

    @property
    def trace(self) -> Trace:
        """The analysed window (complete profiler steps) of every rank, in this process."""
        return self._local_trace("trace")

    def _local_trace(self, name: str) -> Trace:
        if not hasattr(self.engine, name):
            window = "full" if name == "full_trace" else "steps"
            raise TraceAnalysisError(
                "the traces live on the Dask cluster, not in this process; bring the ranks you "
                f"need here with ta.engine.fetch_trace(ranks, window={window!r})"
            )
        return getattr(self.engine, name)

    def _select(self, ranks: RankSpec, default: str = "first") -> list[int]:
        return self.engine.select(ranks, default=default)

    def _analysis_kwargs(self) -> dict[str, Any]:
        return {"patterns": self.patterns, "rounding": self.time_rounding}

    @staticmethod
    def _show(fig, renderer: str | None = None) -> None:
        from analysis.figures.export import show

        show(fig, renderer)

    # --------------------------------------------------------------------------------- analyses
    def get_temporal_breakdown(self, visualize: bool = True, *, ranks: RankSpec = "all") -> pd.DataFrame:
        """Per rank: idle, compute and non-compute GPU time (µs) and their shares of kernel time."""
        frames = self.engine.map_ranks(
            _temporal.temporal_breakdown_rank, self._select(ranks, "all"), **self._analysis_kwargs()
        )
        df = _temporal.combine(frames)
        if visualize:
            from analysis.figures import temporal_breakdown as fig

            self._show(fig(df))
        return df

    def get_idle_time_breakdown(
        self,
        ranks: RankSpec = None,
        streams: list[int] | None = None,
        visualize: bool = True,
        visualize_pctg: bool = True,
        show_idle_interval_stats: bool = False,
        consecutive_kernel_delay: int = 30,
    ) -> tuple[pd.DataFrame, pd.DataFrame | None]:
        """Per rank and stream: GPU idle time split into host wait, kernel wait and other (µs)."""
        frames = self.engine.map_ranks(
            _idle.idle_time_breakdown_rank,
            self._select(ranks),
            streams=None if streams is None else list(streams),
            show_idle_interval_stats=show_idle_interval_stats,
            consecutive_kernel_delay=consecutive_kernel_delay,
            **self._analysis_kwargs(),
        )
        result = _idle.combine(
            frames, show_idle_interval_stats=show_idle_interval_stats, patterns=self.patterns
        )
        if visualize:
            from analysis import figures

            self._show(figures.idle_time_breakdown(result[0], pctg=visualize_pctg))
            if show_idle_interval_stats and result[1] is not None:
                self._show(figures.idle_interval_stats(result[1]))
        return result

    def get_comm_comp_overlap(self, visualize: bool = True, *, ranks: RankSpec = "all") -> pd.DataFrame:
        """Per rank: % of communication kernel time that overlaps computation kernels."""
        frames = self.engine.map_ranks(
            _overlap.comm_comp_overlap_rank, self._select(ranks, "all"), **self._analysis_kwargs()
        )
        df = _overlap.combine(frames)
        if visualize:
            from analysis.figures import comm_comp_overlap as fig

            self._show(fig(df))
        return df

    def get_cuda_kernel_launch_stats(
        self,
        ranks: RankSpec = None,
        runtime_cutoff: int = 50,
        launch_delay_cutoff: int = 100,
        include_memory_events: bool = True,
        visualize: bool = True,
    ) -> dict[int, pd.DataFrame]:
        """Per rank: each launch's CPU duration, GPU duration and launch delay (µs)."""
        frames = self.engine.map_ranks(
            _launch.kernel_launch_stats_rank,
            self._select(ranks),
            include_memory_events=include_memory_events,
            **self._analysis_kwargs(),
        )
        stats = _launch.combine(frames)
        if visualize:
            from analysis.figures import kernel_launch_stats as fig

            self._show(
                fig(stats, runtime_cutoff=runtime_cutoff, launch_delay_cutoff=launch_delay_cutoff)
            )
        return stats

    def get_gpu_kernel_breakdown(
        self,
        visualize: bool = True,
        duration_ratio: float = 0.8,
        num_kernels: int = 10,
        include_memory_kernels: bool = True,
        image_renderer: str | None = None,
        *,
        ranks: RankSpec = "all",
    ) -> tuple[pd.DataFrame, pd.DataFrame]:
        """Time per kernel type (with overlaps) and the top kernels per type and rank.

        ``image_renderer`` is a plotly renderer name for the figures (HTA's argument).
        """
        frames = self.engine.map_ranks(
            _kernels.kernel_breakdown_rank,
            self._select(ranks, "all"),
            duration_ratio=duration_ratio,
            num_kernels=num_kernels,
            include_memory_kernels=include_memory_kernels,
            **self._analysis_kwargs(),
        )
        result = _kernels.combine(frames)
        if visualize:
            from analysis import figures

            self._show(figures.kernel_type_breakdown(result[0]), image_renderer)
            self._show(figures.kernel_breakdown(result[1]), image_renderer)
        return result

    def get_profiler_steps(self) -> list[int]:
        """The profiler step numbers in the analysed window, all ranks (HTA's return value)."""
        frames = self.engine.map_ranks(_steps.profiler_steps_rank, self.ranks)
        return _steps.step_ids(_steps.combine(frames))

    def get_profiler_step_table(self, ranks: RankSpec = "all") -> pd.DataFrame:
        """Per rank and step: start, end and duration (µs) of each ``ProfilerStep#N``."""
        frames = self.engine.map_ranks(
            _steps.profiler_steps_rank, self._select(ranks, default="all"), window="full"
        )
        return _steps.combine(frames)

    def get_trace_metadata(self, ranks: RankSpec = "all") -> pd.DataFrame:
        """Per rank: source file, GPU, world size, events, profiler steps and time range."""
        from analysis.metrics.trace_metadata import combine_metadata, rank_metadata

        frames = self.engine.map_ranks(rank_metadata, self._select(ranks, "all"), window="full")
        return combine_metadata(frames)

    def get_operator_summary(self, ranks: RankSpec = None, top: int = 20) -> pd.DataFrame:
        """Per CPU operator: calls, total/self CPU time and the GPU time it launched (µs)."""
        frames = self.engine.map_ranks(_operators.operator_summary, self._select(ranks), top=top)
        return _operators.combine(frames)

    # ------------------------------------------------------------------------------ HTA bridge
    @property
    def hta(self):
        """HolisticTraceAnalysis's own ``TraceAnalysis`` over the same traces, for its other analyses
        (critical path, trace diff, queue length, ...). Remote traces are fetched into the cache first.
        """
        if self._hta is None:
            try:
                from hta.trace_analysis import TraceAnalysis as HTATraceAnalysis
            except ImportError as exc:
                raise TraceAnalysisError(
                    "HolisticTraceAnalysis is not installed: pip install 'trace-analysis[hta]' "
                    "(or pip install holistictraceanalysis==0.5.0)"
                ) from exc
            files = {r: self._local_copy(meta.source) for r, meta in self.engine.metas.items()}
            self._hta = HTATraceAnalysis(
                trace_files=files,
                trace_dir=str(Path(next(iter(files.values()))).parent),
                include_last_profiler_step=self.include_last_profiler_step,
            )
        return self._hta

    def _local_copy(self, source: str) -> str:
        """A local path for ``source``: itself when local, else a cached download."""
        import fsspec

        fs, path = fsspec.core.url_to_fs(source, **self.storage_options)
        if "file" in fs.protocol or fs.protocol == "file":
            return os.path.abspath(path)
        from analysis.kineto.cache import TraceCache

        root = TraceCache(self.cache_dir).dir / "hta-files"
        name = Path(path).name
        digest = hashlib.sha256(source.encode()).hexdigest()[:16]
        target = root / digest / name
        if not target.exists():
            target.parent.mkdir(parents=True, exist_ok=True)
            tmp = target.with_suffix(target.suffix + ".part")
            fs.get_file(path, str(tmp))
            os.replace(tmp, target)
        return str(target)

    def __repr__(self) -> str:
        return f"TraceAnalysis(source={self.engine.source!r}, ranks={self.ranks})"
