"""``TraceAnalysis``: HolisticTraceAnalysis's API over this package's loader, analyses and figures.

The facade holds no algorithm and no per-analysis code: it loads the traces once (through an engine:
this process or a Dask cluster), restricts them to the analysed window, and gets one ``get_*``
method per entry of the analysis registry (``analysis.registry``, catalogue in
``analysis.analyses``), with HTA 0.5.0's names, arguments and returned columns. Each method runs
the analysis's per-rank step on the chosen ranks, combines the results and, with
``visualize=True``, shows its figures. Where the default preset deliberately differs from HTA:
docs/deviations.md.
"""

from __future__ import annotations

import contextlib
import hashlib
import inspect
import os
import warnings
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from analysis import analyses as catalogue
from analysis import registry
from analysis.arguments import load_options as check_load_options
from analysis.engines import Engine, load_engine
from analysis.errors import (
    AnalysisFailedError,
    ConfigError,
    FormatNotSupportedError,
    TraceAnalysisError,
)
from analysis.kineto.model import Trace
from analysis.kineto.window import check_gpu_events
from analysis.metrics.kernel_types import KernelPatterns, resolve_patterns
from analysis.metrics.timebase import Rounding

RankSpec = int | Iterable[int] | str | None
_LOAD_OPTIONS = check_load_options.__kwdefaults__  # the arguments it checks, by name


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
        gpu_events: which GPU events the analyses cover (``analysis.kineto.window``):
            ``"launched"`` (only those whose launching call is in the analysed window: the default,
            and TraceLens's view), ``"all"`` (also those nothing in the trace launched: the tail of
            an iteration the profiler did not capture), or ``"hta"`` (HTA 0.5.0's rule, the
            default with ``kernel_patterns="hta"``). A warning counts what is left out or kept.
        storage_options: passed to fsspec/gcsfs (credentials, project, endpoint...).
        cache_dir, use_cache: the local cache of parsed traces (second opens read only the cache).
        on_error: ``"raise"`` (default) or ``"skip"`` files that fail to load (a warning lists them).
        max_workers, progress: parallel parsing and the progress bar.
        client: a ``dask.distributed.Client``: each rank is then loaded, kept and analysed on
            the cluster's workers and only results come back (``pip install
            'trace-analysis[dask]'``, docs/dask.md); ``cache_dir`` is then a path on the workers.
        timeout: seconds that each wait on the Dask cluster may last (None: no limit).
        max_memory: bytes the ranks held in this process may take at once (default: an eighth of
            the available memory, at most 512 MiB). Ranks beyond it are released and read back from
            the cache when asked again; results stay memoised (``analysis.engines.local``).
    """

    # where collect_failures() puts the (analysis, rank) units that failed; None: raise them
    _failure_sink: list | None = None

    def __init__(
        self,
        trace_dir: str | os.PathLike | None = None,
        trace_files: list[str] | Mapping[int, str] | None = None,
        include_last_profiler_step: bool = False,
        *,
        kernel_patterns: str | KernelPatterns = "default",
        time_rounding: Rounding | None = None,
        gpu_events: str | None = None,
        storage_options: dict[str, Any] | None = None,
        cache_dir: str | os.PathLike | None = None,
        use_cache: bool = True,
        on_error: str = "raise",
        max_workers: int | None = None,
        progress: bool | None = None,
        client: Any = None,
        timeout: float | None = None,
        max_memory: int | None = None,
    ) -> None:
        check_load_options(**{k: v for k, v in locals().items() if k in _LOAD_OPTIONS})
        self.patterns = resolve_patterns(kernel_patterns)
        if time_rounding is None:
            time_rounding = "hta" if self.patterns.name == "hta" else "exact"
        if time_rounding not in ("exact", "hta"):
            raise ConfigError(f"time_rounding must be 'exact' or 'hta', not {time_rounding!r}")
        self.time_rounding: Rounding = time_rounding
        if gpu_events is None:
            gpu_events = "hta" if self.patterns.name == "hta" else "launched"
        self.gpu_events = check_gpu_events(gpu_events)
        self.include_last_profiler_step = include_last_profiler_step
        self.storage_options = dict(storage_options or {})
        self.cache_dir = cache_dir
        self.use_cache = use_cache
        # Where the per-rank work runs: this process (client=None) or the Dask cluster; the
        # engine also cuts the analysed window (complete profiler steps only), as HTA does.
        self.engine: Engine = load_engine(
            None if trace_dir is None else os.fspath(trace_dir),
            trace_files,
            client=client,
            include_last_profiler_step=include_last_profiler_step,
            gpu_events=self.gpu_events,
            storage_options=self.storage_options,
            cache_dir=cache_dir,
            use_cache=use_cache,
            on_error=on_error,
            max_workers=max_workers,
            progress=progress,
            timeout=timeout,
            max_memory=max_memory,
        )
        self._hta = None
        self._warn_unlaunched()

    @classmethod
    def from_trace(
        cls,
        trace: Trace,
        include_last_profiler_step: bool = False,
        *,
        kernel_patterns: str | KernelPatterns = "default",
        time_rounding: Rounding | None = None,
        gpu_events: str | None = None,
    ) -> TraceAnalysis:
        """Analyse a :class:`~analysis.kineto.model.Trace` already in memory (e.g. one built by
        hand or by ``analysis.kineto.loader.load_trace``), with the same options as the constructor."""
        from analysis.engines.local import LocalEngine

        patterns = resolve_patterns(kernel_patterns)
        if gpu_events is None:
            gpu_events = "hta" if patterns.name == "hta" else "launched"
        engine = LocalEngine(trace, include_last_profiler_step, check_gpu_events(gpu_events))
        return cls.from_engine(engine, kernel_patterns=patterns, time_rounding=time_rounding,
                               gpu_events=gpu_events,
                               include_last_profiler_step=include_last_profiler_step)

    @classmethod
    def from_engine(
        cls,
        engine: Engine,
        *,
        kernel_patterns: str | KernelPatterns = "default",
        time_rounding: Rounding | None = None,
        gpu_events: str = "hta",
        include_last_profiler_step: bool = False,
    ) -> TraceAnalysis:
        """The facade over an engine already loaded (``analysis.engines.load_engine``); its window
        was cut when it loaded, so ``gpu_events`` and ``include_last_profiler_step`` only record
        how (pass what it was loaded with)."""
        self = cls.__new__(cls)
        self.patterns = resolve_patterns(kernel_patterns)
        self.time_rounding = time_rounding or ("hta" if self.patterns.name == "hta" else "exact")
        self.gpu_events = check_gpu_events(gpu_events)
        self.include_last_profiler_step = include_last_profiler_step
        self.storage_options, self.cache_dir, self._hta = {}, None, None
        self.engine = engine
        self._warn_unlaunched()
        return self

    def _warn_unlaunched(self) -> None:
        for stats in self.engine.window_stats.values():
            note = stats.note(self.gpu_events)
            if note:
                warnings.warn(note, stacklevel=3)

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

    def _context(self) -> dict[str, Any]:
        """What every per-rank step may take (each gets the keys its signature names), and where
        to read the event args that some analyses need beyond the parsed tables (extras)."""
        source_options = {
            "storage_options": getattr(self, "storage_options", {}),
            "cache_dir": getattr(self, "cache_dir", None),
            "use_cache": getattr(self, "use_cache", True),
        }
        return {"patterns": self.patterns, "rounding": self.time_rounding,
                "source_options": source_options}

    # -------------------------------------------------------------------------------- analyses
    def run(self, name: str, ranks: RankSpec = None, **options: Any) -> Any:
        """The result of the registered analysis ``name`` for ``ranks`` (``None``: the analysis's
        default) with ``options`` (its metric's keyword arguments), without figures."""
        return self.run_many({name: options}, ranks)[name]

    def run_many(
        self, requests: Mapping[str, Mapping[str, Any]], ranks: RankSpec = None, *,
        errors: str = "raise", failures: list | None = None,
    ) -> dict[str, Any]:
        """Several registered analyses at once, ``{name: options}`` → ``{name: result}``.

        All of them run in one per-rank task per window (one round trip on a Dask cluster) and
        share the per-rank work they have in common. ``ranks=None`` gives each analysis its
        default ranks. ``errors="return"`` puts an analysis's ``TraceAnalysisError`` in its
        result slot instead of raising it (the report uses this: one analysis that cannot run
        leaves the others). ``failures``, a list, gets a ``registry.Failure`` for each
        (analysis, rank) that failed while the other ranks ran (the result then comes from
        those), and for each analysis that failed with an ``AnalysisFailedError``: an exception
        that is not the project's own, raised inside the analysis (a bug). An analysis the traces
        cannot give (no GPU events, no shapes) is not a failure: its error is its result.
        Inside ``with ta.collect_failures()`` the failures go to its list when none is given.
        """
        if failures is None:
            failures = self._failure_sink
        derived = {n: o for n, o in requests.items() if catalogue.get(n).derive is not None}
        if derived:
            return self._run_with_derived(requests, derived, ranks, errors, failures)
        specs = {name: catalogue.get(name) for name in requests}
        by_ranks: dict[tuple[int, ...], list[str]] = {}
        for name, spec in specs.items():
            chosen = self.engine.select(ranks, default=spec.default_ranks)
            by_ranks.setdefault(tuple(chosen), []).append(name)
        context = self._context()
        results: dict[str, Any] = {}
        for chosen, names in by_ranks.items():
            batch = [(n, dict(requests[n])) for n in names]
            for window, reqs in catalogue.requests_by_window(batch).items():
                parts = self.engine.map_ranks(
                    catalogue.run_on_rank, chosen, window=window, requests=reqs, context=context
                )
                for name, options in reqs:
                    try:
                        results[name] = registry.combine_parts(
                            specs[name], {r: parts[r][name] for r in parts}, options, context,
                            explain_no_gpu=self._explain_no_gpu if window == "steps" else None,
                            failures=failures,
                        )
                    except TraceAnalysisError as exc:
                        if errors != "return":
                            raise
                        results[name] = exc
                        if failures is not None and isinstance(exc, AnalysisFailedError):
                            failures.append(registry.Failure(name, None, exc))
        return {name: results[name] for name in requests}

    @contextlib.contextmanager
    def collect_failures(self) -> Iterator[list]:
        """Within the block, every analysis run (``get_*`` methods, ``run``, ``run_many``) leaves
        out the ranks it failed on and appends a ``registry.Failure`` for each to the list this
        yields, instead of raising (the other ranks' result is returned; an analysis that failed
        on every rank still raises). ``trace-analysis check`` runs ``ta.check()`` so::

            with ta.collect_failures() as failures:
                findings = ta.check()
        """
        previous, self._failure_sink = self._failure_sink, []
        try:
            yield self._failure_sink
        finally:
            self._failure_sink = previous

    def _run_with_derived(self, requests, derived, ranks, errors: str, failures) -> dict[str, Any]:
        """``run_many`` when some requests read other analyses' results (``Analysis.derive``):
        their requirements join the same batch, then each derived result is computed from them."""
        base = {n: dict(o) for n, o in requests.items() if n not in derived}
        for name in derived:
            for required, options in catalogue.get(name).requires.items():
                base.setdefault(required, dict(options))
        results = self.run_many(base, ranks, errors="return", failures=failures)
        for name, options in derived.items():
            spec = catalogue.get(name)
            inputs = {r: results[r] for r in spec.requires}
            try:
                results[name] = spec.derive(inputs, **options)
            except TraceAnalysisError as exc:
                results[name] = exc
            except Exception as exc:  # noqa: BLE001 - the boundary: a bug becomes the project's error
                results[name] = AnalysisFailedError.wrap(name, None, exc)
                if failures is not None:
                    failures.append(registry.Failure(name, None, results[name]))
        out = {name: results[name] for name in requests}
        if errors != "return":
            for value in out.values():
                if isinstance(value, TraceAnalysisError):
                    raise value
        return out

    def _explain_no_gpu(self, ranks: list[int]) -> str | None:
        """Why ranks have no GPU events in the analysed window although their traces have some."""
        stats = [self.engine.window_stats[r] for r in ranks if r in self.engine.window_stats]
        hidden = [s for s in stats if s.gpu_events and not s.analysed_gpu_events]
        if not hidden:
            return None
        counts = ", ".join(f"rank {s.rank}: {s.gpu_events:,}" for s in hidden)
        return (
            f"the traces have GPU events ({counts}) but none inside the analysed window: no "
            "runtime call kept in the complete profiler steps carries their correlation ids "
            f"(gpu_events={self.gpu_events!r}, include_last_profiler_step="
            f"{self.include_last_profiler_step}); try include_last_profiler_step=True or "
            "gpu_events='all'"
        )

    def _call(self, spec: registry.Analysis, arguments: dict[str, Any]) -> Any:
        """A generated ``get_*`` method's body: split its arguments by role, run, show."""
        roles = {p.name: p.role for p in spec.params}
        options = {k: v for k, v in arguments.items() if roles[k] == "option"}
        figure_options = {k: v for k, v in arguments.items() if roles[k] == "figure"}
        ranks_param = spec.param("ranks")
        ranks = arguments[ranks_param.name] if ranks_param else None
        result = self.run(spec.name, ranks, **options)
        visualize = spec.param("visualize")
        if visualize is not None and arguments[visualize.name]:
            renderer = spec.param("renderer")
            for fig in spec.draw(result, **figure_options, **options).values():
                self._show(fig, arguments[renderer.name] if renderer else None)
        return result

    @staticmethod
    def _show(fig, renderer: str | None = None) -> None:
        from analysis.figures.export import show

        show(fig, renderer)

    def summary(self, ranks: RankSpec = "all") -> Any:
        """The headline numbers per rank: every analysis's headline columns, merged on ``rank``."""
        names = catalogue.headline_names()
        return catalogue.headline_table(self.run_many(dict.fromkeys(names, {}), ranks,
                                                     errors="return"))

    def export_merged_trace(
        self,
        path: str | os.PathLike,
        *,
        ranks: RankSpec = "all",
        steps: Iterable[int] | None = None,
        gpu_only: bool = False,
        align: str | None = None,
    ) -> str:
        """Write every rank (or ``ranks``) into one gzip Chrome-trace JSON for ui.perfetto.dev.

        Processes are renamed ``"rank N · CPU"`` / ``"rank N · GPU d"`` with pids that never
        collide; flows are kept; ``steps`` keeps only those ProfilerSteps, ``gpu_only`` the GPU
        processes; ``align="first_collective"`` shifts each rank's clock so that the first
        collectives end together. See ``analysis.kineto.merge``. Returns the path written.
        """
        from analysis.kineto.merge import merge_traces

        sources = {r: meta.source for r, meta in self.engine.metas.items()}
        merge_traces(sources, path, ranks=self.engine.select(ranks, default="all"), steps=steps,
                     gpu_only=gpu_only, align=align, storage_options=self.storage_options)
        return os.fspath(path)
    def compare(self, other: TraceAnalysis, **options):
        """This run (base) against ``other`` (test): ``analysis.comparison.compare(self, other)``."""
        from analysis.comparison import compare

        return compare(self, other, **options)

    # ------------------------------------------------------------------------------ HTA bridge
    @property
    def hta(self):
        """HolisticTraceAnalysis's own ``TraceAnalysis`` over the same traces, to cross-check a
        number or use one of its analyses this package does not have (CUPTI counters, ...).
        Remote traces are fetched into the cache first. Under pandas 3, where HTA 0.5.0's
        ``critical_path_analysis`` raises, that method is answered by the native
        ``self.critical_path_analysis`` (with a warning); see ``analysis.hta_bridge``.
        """
        if self._hta is None:
            foreign = sorted({m.source_format for m in self.engine.metas.values()} - {"kineto"})
            if foreign:  # HTA reads Kineto JSON only
                raise FormatNotSupportedError("HolisticTraceAnalysis", foreign[0], [
                    "Kineto JSON (HolisticTraceAnalysis reads nothing else)"])
            from analysis.hta_bridge import HTABridge, hta_class

            hta_trace_analysis = hta_class()
            files = {r: self._local_copy(meta.source) for r, meta in self.engine.metas.items()}
            self._hta = HTABridge(hta_trace_analysis(
                trace_files=files,
                trace_dir=str(Path(next(iter(files.values()))).parent),
                include_last_profiler_step=self.include_last_profiler_step,
            ), self)
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
        from analysis.display import overview_text

        return overview_text(self)

    def _repr_html_(self) -> str:
        from analysis.display import overview_html

        return overview_html(self)


def _facade_method(spec: registry.Analysis):
    """``TraceAnalysis.<spec.method>``: HTA's signature from the entry's params, ``_call`` body."""
    params = [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    for p in spec.params:
        kind = inspect.Parameter.KEYWORD_ONLY if p.keyword_only else inspect.Parameter.POSITIONAL_OR_KEYWORD
        params.append(inspect.Parameter(p.name, kind, default=p.default))
    signature = inspect.Signature(params)

    def method(self, *args, **kwargs):
        try:
            bound = signature.bind(self, *args, **kwargs)
        except TypeError as exc:
            raise ConfigError(f"{spec.method}{signature}: {exc}") from None
        bound.apply_defaults()
        arguments = dict(bound.arguments)
        del arguments["self"]
        return self._call(spec, arguments)

    method.__name__ = spec.method
    method.__qualname__ = f"TraceAnalysis.{spec.method}"
    method.__signature__ = signature
    metric = (spec.rank_step or spec.derive).__module__
    method.__doc__ = (
        f"{spec.doc}\n\nThe registered analysis ``{spec.name}``: its definition is the docstring "
        f"of ``{metric}`` (entry in ``{metric.rpartition('.')[0]}.catalogue``)."
    )
    return method


for _spec in catalogue.analyses().values():
    setattr(TraceAnalysis, _spec.method, _facade_method(_spec))
