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

import copy
import dataclasses
import hashlib
import inspect
import os
import warnings
from collections.abc import Iterable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any

import pandas as pd

from analysis import analyses as catalogue
from analysis import arguments, registry
from analysis.engines import Engine, load_engine
from analysis.errors import (
    AnalysisFailedError,
    ConfigError,
    FormatNotSupportedError,
    TraceAnalysisError,
)
from analysis.io import LoadOptions
from analysis.io.options import FIELDS as _LOAD_FIELDS
from analysis.kineto.model import Trace
from analysis.kineto.window import check_gpu_events, check_window
from analysis.metrics.kernel_types import KernelPatterns, resolve_patterns
from analysis.metrics.timebase import Rounding
from analysis.registry import Failure

RankSpec = int | Iterable[int] | str | None


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
        window: what the analysed window is cut at (``analysis.kineto.window``): ``"steps"``
            (complete profiler steps, HTA's rule; the default with ``kernel_patterns="hta"``: a
            trace without steps is analysed whole, as HTA does), ``"iterations"`` (a serving
            engine's steady-state iterations, warm-up left out: ``analysis.kineto.iterations``), or
            ``"auto"`` (the default otherwise: profiler steps when the traces have any, else
            iterations; a warning says how much GPU work the iterations leave out). Every
            windowed analysis then covers that window.
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
        capture_trace: the graph-capture trace of a CUDA/HIP graph replay trace (a file, or a
            folder of capture traces), merged into every replay trace loaded so that each
            replayed kernel is attributed to its captured operator and shapes
            (``analysis.kineto.cuda_graphs``). Default: the ``capture_traces/`` folder that vLLM
            and SGLang write beside the replay trace, when there is one.
        options: the load options above as one :class:`~analysis.io.LoadOptions` (e.g. shared by
            several analyses); a keyword above given too (not left at its default) replaces its
            field. Checked once here, then passed as it is to the engine and the loader
            (``self.options``, ``self.engine.options``).
    """

    # where collect_failures() puts the (analysis, rank) units that failed; None: raise them
    _failure_sink = None
    # What a TraceAnalysis holds (also the attributes ``analysis/api.pyi`` declares).
    patterns: KernelPatterns
    time_rounding: Rounding
    gpu_events: str
    include_last_profiler_step: bool
    window: str  # what the analysed window is cut at: "auto", "steps" or "iterations"
    engine: Engine  # its LoadOptions are ``options`` (storage_options, cache_dir, use_cache...)

    def __init__(
        self,
        trace_dir: str | os.PathLike | None = None,
        trace_files: list[str] | Mapping[int, str] | None = None,
        include_last_profiler_step: bool = False,
        *,
        kernel_patterns: str | KernelPatterns = "default",
        time_rounding: Rounding | None = None,
        gpu_events: str | None = None,
        window: str | None = None,
        storage_options: dict[str, Any] | None = None,
        cache_dir: str | os.PathLike | None = None,
        use_cache: bool = True,
        on_error: str = "raise",
        max_workers: int | None = None,
        progress: bool | None = None,
        client: Any = None,
        timeout: float | None = None,
        max_memory: int | None = None,
        capture_trace: str | os.PathLike | None = None,
        options: LoadOptions | None = None,
    ) -> None:
        arguments.trace_source(trace_dir, trace_files)
        arguments.flag("include_last_profiler_step", include_last_profiler_step)
        given = {k: v for k, v in locals().items()
                 if k in _LOAD_FIELDS and v is not _INIT_DEFAULTS[k]}
        load_options = LoadOptions.of(options, **given)  # every load option checked, once
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
        self.window = check_window(default_window(self.patterns) if window is None else window)
        # Where the per-rank work runs: this process (client=None) or the Dask cluster; the
        # engine also cuts the analysed window (complete profiler steps only), as HTA does.
        self.engine: Engine = load_engine(
            None if trace_dir is None else os.fspath(trace_dir),
            trace_files,
            client=client,
            include_last_profiler_step=include_last_profiler_step,
            gpu_events=self.gpu_events,
            window=self.window,
            options=load_options,
        )
        self._hta = None
        self._warn_what_the_window_leaves_out()

    @classmethod
    def from_trace(
        cls,
        trace: Trace,
        include_last_profiler_step: bool = False,
        *,
        kernel_patterns: str | KernelPatterns = "default",
        time_rounding: Rounding | None = None,
        gpu_events: str | None = None,
        window: str | None = None,
    ) -> TraceAnalysis:
        """Analyse a :class:`~analysis.kineto.model.Trace` already in memory (e.g. one built by
        hand or by ``analysis.kineto.loader.load_trace``), with the same options as the constructor."""
        from analysis.engines.local import LocalEngine

        patterns = resolve_patterns(kernel_patterns)
        if gpu_events is None:
            gpu_events = "hta" if patterns.name == "hta" else "launched"
        if window is None:
            window = default_window(patterns)
        engine = LocalEngine(trace, include_last_profiler_step, check_gpu_events(gpu_events),
                             window=check_window(window))
        return cls.from_engine(engine, kernel_patterns=patterns, time_rounding=time_rounding,
                               gpu_events=gpu_events,
                               include_last_profiler_step=include_last_profiler_step,
                               window=window)

    @classmethod
    def from_engine(
        cls,
        engine: Engine,
        *,
        kernel_patterns: str | KernelPatterns = "default",
        time_rounding: Rounding | None = None,
        gpu_events: str = "hta",
        include_last_profiler_step: bool = False,
        window: str | None = None,
    ) -> TraceAnalysis:
        """The facade over an engine already loaded (``analysis.engines.load_engine``); its window
        was cut when it loaded, so ``gpu_events``, ``include_last_profiler_step`` and ``window``
        only record how (pass what it was loaded with)."""
        self = cls.__new__(cls)
        self.patterns = resolve_patterns(kernel_patterns)
        self.time_rounding = time_rounding or ("hta" if self.patterns.name == "hta" else "exact")
        self.gpu_events = check_gpu_events(gpu_events)
        self.include_last_profiler_step = include_last_profiler_step
        self.window = check_window(default_window(self.patterns) if window is None else window)
        self._hta = None
        self.engine = engine  # its load options are this facade's (``options``)
        self._warn_what_the_window_leaves_out()
        return self

    def _warn_what_the_window_leaves_out(self) -> None:
        """The load's warnings about GPU work the analysed window leaves out: unlaunched events
        (per rank), and what lies outside the steady-state serving iterations (all ranks)."""
        for stats in self.engine.window_stats.values():
            note = stats.note(self.gpu_events)
            if note:
                warnings.warn(note, stacklevel=3)
        cut = [s for s in self.engine.window_stats.values() if s.outside_iterations]
        if cut:  # the window="auto"/"iterations" rule drops data: say how much
            ranks = sorted(s.rank for s in cut)
            events = sum(s.outside_iterations for s in cut)
            ms = sum(s.outside_iterations_ns for s in cut) / 1e6
            warnings.warn(
                f"rank(s) {ranks}: the analysed window is the steady-state serving iterations "
                f"(window={self.window!r}, no ProfilerStep): {events:,} GPU events ({ms:.2f} ms "
                "of GPU time) outside them are left out (warm-up, and what ran before the first "
                "or after the last steady iteration); window='steps' analyses the whole trace",
                stacklevel=3,
            )

    # ----------------------------------------------------------------------------------- helpers
    @property
    def options(self) -> LoadOptions:
        """How the traces were read: the engine's :class:`~analysis.io.LoadOptions`."""
        return self.engine.options

    @property
    def storage_options(self) -> dict[str, Any]:
        """What fsspec/gcsfs got (``options.storage_options``)."""
        return self.options.storage_options

    @property
    def cache_dir(self) -> str | None:
        """The cache of parsed traces given (``options.cache_dir``; None: the default one)."""
        return self.options.cache_dir

    @property
    def use_cache(self) -> bool:
        """Whether that cache is read and written (``options.use_cache``)."""
        return self.options.use_cache

    @property
    def ranks(self) -> list[int]:
        """The loaded ranks."""
        return self.engine.ranks

    @property
    def full_trace(self) -> Trace:
        """Every loaded rank, whole, in this process (not with a Dask client: see ``trace``)."""
        return self._local_trace("full_trace")

    @property
    def trace(self) -> Trace:
        """The analysed window (complete profiler steps, or a serving engine's steady-state
        iterations: ``window``) of every rank, in this process."""
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
        """What every per-rank step may take (each gets the keys its signature names). The event
        args that some analyses need beyond the parsed tables (extras) are not the facade's
        business: the engine that loaded a rank reads them (``engine.read_extras``)."""
        return {"patterns": self.patterns, "rounding": self.time_rounding}

    # -------------------------------------------------------------------------------- analyses
    def run(self, name: str, ranks: RankSpec = None, **options: Any) -> Any:
        """The result of the registered analysis ``name`` for ``ranks`` (``None``: the analysis's
        default) with ``options`` (its metric's keyword arguments), without figures."""
        return self.run_many({name: options}, ranks)[name]

    def run_many(
        self, requests: Mapping[str, Mapping[str, Any]], ranks: RankSpec = None, *,
        errors: str = "raise", failures: list | None = None, left_out: list | None = None,
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
        ``left_out``, a list, gets a ``registry.Failure`` for each rank left out of a result the
        other ranks give because it has nothing the analysis reads (no GPU events), instead of
        a warning (``registry.left_out_notes`` words them).
        Inside ``with ta.collect_failures()`` the failures go to its list when none is given.

        Each call returns new result objects: changing one (a frame's column, a dict's key)
        changes neither what later calls return nor the parts this object keeps to answer them.
        """
        if failures is None:
            failures = self._failure_sink
        results = self._run_many(requests, ranks, errors, failures, left_out)
        return {name: _detached(value) for name, value in results.items()}

    def _run_many(self, requests, ranks, errors: str, failures, left_out) -> dict[str, Any]:
        names = {n: catalogue.get(n).name for n in requests}  # earlier names accepted
        if any(n != name for n, name in names.items()):
            results = self._run_many({names[n]: o for n, o in requests.items()}, ranks,
                                     errors, failures, left_out)
            return {n: results[names[n]] for n in requests}
        derived = {n: o for n, o in requests.items() if catalogue.get(n).derive is not None}
        if derived:
            return self._run_with_derived(requests, derived, ranks, errors, failures, left_out)
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
                    catalogue.run_on_rank, chosen, window=window, requests=reqs, context=context,
                    read_extras=self.engine.read_extras,
                )
                for name, options in reqs:
                    try:
                        results[name] = registry.combine_parts(
                            specs[name], {r: parts[r][name] for r in parts}, options, context,
                            explain_no_gpu=self._explain_no_gpu if window == "steps" else None,
                            failures=failures, left_out=left_out,
                        )
                    except TraceAnalysisError as exc:
                        if errors != "return":
                            raise
                        results[name] = exc
                        if failures is not None and isinstance(exc, AnalysisFailedError):
                            registry.add_rows(failures, [registry.Failure(name, None, exc)])
        return {name: results[name] for name in requests}

    def collect_failures(self) -> AbstractContextManager[list[Failure]]:
        """Within the block, every analysis run (``get_*`` methods, ``run``, ``run_many``) leaves
        out the ranks it failed on and appends a ``registry.Failure`` for each to the list this
        yields, instead of raising (the other ranks' result is returned; an analysis that failed
        on every rank still raises). ``trace-analysis check`` runs ``ta.check()`` so::

            with ta.collect_failures() as failures:
                findings = ta.check()
        """
        return _collecting_failures(self)

    def _run_with_derived(self, requests, derived, ranks, errors: str, failures,
                          left_out) -> dict[str, Any]:
        """``run_many`` when some requests read other analyses' results (``Analysis.derive``):
        their requirements join the same batch, then each derived result is computed from them."""
        base = {n: dict(o) for n, o in requests.items() if n not in derived}
        for name in derived:
            for required, options in catalogue.get(name).requires.items():
                base.setdefault(required, dict(options))
        results = self._run_many(base, ranks, "return", failures, left_out)
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
                    registry.add_rows(failures, [registry.Failure(name, None, results[name])])
        out = {name: results[name] for name in requests}
        if errors != "return":
            for value in out.values():
                if isinstance(value, TraceAnalysisError):
                    raise value
        return out

    def _explain_no_gpu(self, ranks: list[int]) -> str | None:
        """Why ranks have no GPU events in the analysed window although their traces have some
        (or kernels the analyses cannot count: no stream or correlation args)."""
        metas = getattr(self.engine, "metas", {})
        edited = [r for r in ranks if r in metas and metas[r].unseen_gpu_events]
        if edited:
            return (f"the kernels of rank(s) {edited} have no stream or correlation args, which "
                    "the profiler always writes: the trace was edited after recording")
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
        """The headline numbers per rank: every analysis's headline columns, merged on ``rank``.

        Ranks an analysis left out (no GPU events) come with the table, as data:
        ``table.attrs["left_out"]`` is ``{analysis: [ranks]}``."""
        names = catalogue.headline_names()
        left_out: list[registry.Failure] = []
        table = catalogue.headline_table(self.run_many(dict.fromkeys(names, {}), ranks,
                                                       errors="return", left_out=left_out))
        if table is not None:
            table.attrs["left_out"] = registry.left_out_ranks(left_out)
        return table

    def export_merged_trace(
        self,
        path: str | os.PathLike,
        *,
        ranks: RankSpec = "all",
        steps: Iterable[int] | None = None,
        gpu_only: bool = False,
        align: str | None = None,
    ) -> str:
        """Write every rank (or ``ranks``) into one Chrome-trace JSON for ui.perfetto.dev
        (gzipped when ``path`` ends in ``.gz``).

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


# the constructor's defaults: a load keyword still at its default does not replace ``options``
_INIT_DEFAULTS = TraceAnalysis.__init__.__kwdefaults__


def default_window(patterns: KernelPatterns) -> str:
    """The ``window`` a facade cuts when none is given: ``"steps"`` with HTA's patterns (HTA
    analyses a trace without profiler steps whole), else ``"auto"``."""
    return "steps" if patterns.name == "hta" else "auto"


def _facade_method(spec: registry.Analysis, name: str | None = None):
    """``TraceAnalysis.<spec.method>`` (or the alias ``name``): HTA's signature from the entry's
    params, with their types; the docstring from the entry (``Analysis.method_doc``); ``_call``
    body."""
    name = name or spec.method
    params = [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    for p in spec.params:
        kind = inspect.Parameter.KEYWORD_ONLY if p.keyword_only else inspect.Parameter.POSITIONAL_OR_KEYWORD
        params.append(inspect.Parameter(p.name, kind, default=p.default, annotation=p.type))
    signature = inspect.Signature(params, return_annotation=spec.returns)
    plain = inspect.Signature([p.replace(annotation=p.empty) for p in params])  # for errors

    def method(self, *args, **kwargs):
        try:
            bound = signature.bind(self, *args, **kwargs)
        except TypeError as exc:
            raise ConfigError(f"{name}{plain}: {exc}") from None
        bound.apply_defaults()
        arguments = dict(bound.arguments)
        del arguments["self"]
        return self._call(spec, arguments)

    method.__name__ = name
    method.__qualname__ = f"TraceAnalysis.{name}"
    method.__signature__ = signature
    method.__annotations__ = {p.name: p.type for p in spec.params} | {"return": spec.returns}
    method.__doc__ = spec.method_doc(alias=name if name != spec.method else None)
    return method


for _spec in catalogue.analyses().values():
    for _name in (_spec.method, *_spec.method_aliases):
        setattr(TraceAnalysis, _name, _facade_method(_spec, _name))


@contextmanager
def _collecting_failures(ta: TraceAnalysis) -> Iterator[list[Failure]]:
    """:meth:`TraceAnalysis.collect_failures`: a fresh list as the failure sink in the block."""
    previous, ta._failure_sink = ta._failure_sink, []
    try:
        yield ta._failure_sink
    finally:
        ta._failure_sink = previous


# pandas 3 copies on write: a shallow copy shares the data until one side is changed
_COPY_ON_WRITE = int(pd.__version__.split(".")[0]) >= 3 or bool(
    getattr(pd.options.mode, "copy_on_write", False))


def _detached(value: Any, depth: int = 0) -> Any:
    """``value`` with its frames, and the dicts, lists, tuples and dataclasses holding them, new
    objects (frames copied on write: no data copied until changed); anything else as it is. The
    engine memoises per-rank parts that a result may hold as they are. Long lists and tuples
    (a graph's nodes, say) are copied, not walked: they hold no frames."""
    if isinstance(value, pd.DataFrame | pd.Series):
        return value.copy(deep=not _COPY_ON_WRITE)
    if depth > 4 or isinstance(value, str | bytes | BaseException | type):
        return value
    if isinstance(value, dict):
        out = copy.copy(value)
        if len(out) <= _WALKED_ITEMS:
            for key, item in out.items():
                out[key] = _detached(item, depth + 1)
        return out
    if isinstance(value, list):
        if len(value) > _WALKED_ITEMS:
            return list(value)
        return [_detached(item, depth + 1) for item in value]
    if isinstance(value, tuple):
        if len(value) > _WALKED_ITEMS or (type(value) is not tuple and not hasattr(value, "_make")):
            return value  # long (no frames in it), or a tuple type this cannot rebuild
        items = [_detached(item, depth + 1) for item in value]
        return value._make(items) if hasattr(value, "_make") else tuple(items)
    if dataclasses.is_dataclass(value):
        out = copy.copy(value)
        for f in dataclasses.fields(value):
            object.__setattr__(out, f.name, _detached(getattr(value, f.name), depth + 1))
        return out
    return value


# dicts (of ranks, of analyses) are walked up to this size; longer lists and tuples hold no
# frames in any result
_WALKED_ITEMS = 4096
