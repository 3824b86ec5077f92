"""``LoadOptions``: how traces are read -- one value, checked once, passed facade → engine → loader.

``TraceAnalysis`` (or whoever loads) builds one :class:`LoadOptions` from its keywords; the engine
(:mod:`analysis.engines`) keeps it as ``engine.options`` and hands the same object to the loader
(:func:`analysis.kineto.loader.load_trace`) or to its Dask tasks, and reads the event args that
some analyses need later (extras, :mod:`analysis.kineto.extras`) with it too. A bad value is a
``ConfigError`` naming the option, raised when the value is built and never again downstream.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from typing import Any

from analysis import arguments
from analysis.errors import ConfigError


@dataclass(frozen=True)
class LoadOptions:
    """How to read a set of traces (every field has a default).

    Attributes:
        storage_options: passed to fsspec/gcsfs for URLs (credentials, project, endpoint...),
            in worker processes and on Dask workers too.
        cache_dir: the cache of parsed traces (default ``$TRACE_ANALYSIS_CACHE`` or
            ``~/.cache/trace-analysis``; with a Dask client, a path on the workers).
        use_cache: read and write that cache (second opens read only the cache).
        on_error: ``"raise"`` (default) or ``"skip"`` files that fail to load (a warning lists
            them, ``Trace.skipped`` keeps them).
        max_workers: processes that parse files in this machine (default: one per CPU).
        progress: the progress bar: None only for loads over a second, True always, False never.
        timeout: seconds each wait on a Dask cluster may last (None: no limit).
        max_memory: bytes the ranks held in this process may take at once (local engine;
            default :func:`analysis.engines.local.default_max_memory`).
        capture_trace: the graph-capture trace (a file, or a folder of capture traces) merged
            into every CUDA/HIP graph replay trace read (default: the ``capture_traces/`` folder
            beside each; :mod:`analysis.kineto.cuda_graphs`); with a Dask client, a path on the
            workers.
    """

    storage_options: dict[str, Any] = field(default_factory=dict, hash=False)
    cache_dir: str | None = None
    use_cache: bool = True
    on_error: str = "raise"
    max_workers: int | None = None
    progress: bool | None = None
    timeout: float | None = None
    max_memory: int | None = None
    capture_trace: str | None = None

    def __post_init__(self) -> None:
        checked = {
            "storage_options": arguments.mapping("storage_options", self.storage_options),
            "cache_dir": _path("cache_dir", self.cache_dir),
            "use_cache": arguments.flag("use_cache", self.use_cache),
            "on_error": arguments.on_error_choice(self.on_error),
            "max_workers": arguments.positive_int("max_workers", self.max_workers),
            "progress": arguments.optional_flag("progress", self.progress),
            "timeout": arguments.positive_number("timeout", self.timeout),
            "max_memory": arguments.positive_int("max_memory", self.max_memory),
            "capture_trace": _path("capture_trace", self.capture_trace),
        }
        for name, value in checked.items():  # normalised: a dict, a str path, plain numbers
            object.__setattr__(self, name, value)

    @classmethod
    def of(cls, options: LoadOptions | None = None, **fields: Any) -> LoadOptions:
        """``options`` (None: the defaults) with ``fields`` replacing some of its values; the same
        object when there is nothing to replace (so what is passed down is checked only once).
        An unknown field name, or ``options`` of another type, is a ``ConfigError``."""
        unknown = sorted(set(fields) - FIELDS)
        if unknown:
            raise ConfigError(
                f"unknown load option(s) {', '.join(unknown)}; choose from {', '.join(sorted(FIELDS))}"
            )
        if options is None:
            return cls(**fields)
        if not isinstance(options, LoadOptions):
            raise ConfigError(
                f"options must be an analysis.io.LoadOptions, not {type(options).__name__}"
            )
        return dataclasses.replace(options, **fields) if fields else options


def _path(name: str, value: Any) -> str | None:
    arguments.optional_path(name, value)
    return None if value is None else os.fspath(value)


FIELDS = frozenset(f.name for f in dataclasses.fields(LoadOptions))
