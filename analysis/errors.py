"""The project's own exceptions.

Every failure a user can cause with their input (a missing directory, a truncated gzip, a file that
is not a trace, two files claiming one rank) raises one of these, with the file or URL and the reason
in plain words. Nothing else should escape from the loader.
"""

from __future__ import annotations


class TraceAnalysisError(Exception):
    """Base class of every error this package raises on purpose."""


class InputFileError(TraceAnalysisError):
    """An input file (a trace, a memory snapshot, a py-spy file) could not be read or decoded.

    ``path`` names the file or URL at fault and ``reason`` says why in plain words. Control
    characters in the path are escaped in the message, so a file name cannot forge a second line.
    """

    def __init__(self, path: str, reason: str):
        self.path = str(path)
        self.reason = reason
        super().__init__(f"{printable(self.path)}: {reason}")

    def __reduce__(self):
        # Survive pickling across process pools / Dask workers, whatever the subclass's __init__.
        return (_rebuild_input_error, (type(self), self.path, self.reason, self.__dict__))


def _rebuild_input_error(cls, path, reason, state):
    exc = InputFileError.__new__(cls)
    InputFileError.__init__(exc, path, reason)
    exc.__dict__.update(state)
    return exc


def printable(text: str) -> str:
    """``text`` with control characters (newlines, carriage returns, escapes...) written as
    ``\\n``, ``\\r``, ``\\x1b``: messages stay on one line whatever a file is called."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() or c == " " else repr(c)[1:-1] for c in text)


class InputNotFoundError(InputFileError):
    """The file, directory, bucket or object does not exist."""


class InputPermissionError(InputFileError):
    """The file exists but cannot be read with the credentials at hand."""


class CorruptInputError(InputFileError):
    """The bytes cannot be decoded: truncated or invalid gzip, invalid JSON or pickle, bad structure."""


class WrongFileKindError(InputFileError):
    """A readable file of another kind than the one expected (JSON given as a snapshot, ...)."""


class NotARegularFileError(InputFileError):
    """The path is a FIFO, a device, a socket or a directory; only regular files are read."""


class InputTooLargeError(InputFileError):
    """The file (or what its gzip data expands to) is larger than the configured read limit."""


class UnreachableError(InputFileError):
    """A remote store (``gs://``...) did not answer within the retry budget."""


class TraceLoadError(InputFileError):
    """A trace (or a set of traces) could not be loaded."""


class TraceNotFoundError(TraceLoadError, InputNotFoundError):
    """The path, bucket or object does not exist (or holds no trace files)."""


class TracePermissionError(TraceLoadError, InputPermissionError):
    """The path exists but cannot be read with the credentials at hand."""


class CorruptTraceError(TraceLoadError, CorruptInputError):
    """The bytes cannot be decoded: truncated or invalid gzip, invalid JSON, wrong structure."""


class NotATraceError(TraceLoadError, WrongFileKindError):
    """Valid JSON that is not a Kineto trace (no ``traceEvents``): an execution trace, a memory timeline..."""


class DuplicateRankError(TraceLoadError):
    """Two files claim the same rank."""

    def __init__(self, rank: int, first: str, second: str):
        self.rank = rank
        self.first = first
        self.second = second
        super().__init__(
            second,
            f"rank {rank} is claimed by both {printable(first)} and {printable(second)}; "
            "pass trace_files={rank: path} to map ranks explicitly",
        )


class UnsafePickleError(InputFileError):
    """A pickle asked to import or call code (a class, a function); refused before anything ran."""


class MultipleLoadErrors(TraceLoadError):
    """Several files failed to load with ``on_error="raise"``; ``errors`` holds each one."""

    def __init__(self, errors: list[InputFileError]):
        self.errors = list(errors)
        # one line, whatever the number of files: the CLI prints errors as one line each
        folders = {e.path.rstrip("/").rpartition("/")[0] for e in self.errors}
        super().__init__(
            folders.pop() if len(folders) == 1 else "trace_files",
            f"{len(self.errors)} trace files failed to load: "
            + "; ".join(str(e) for e in self.errors),
        )


class NoGPUEventsError(TraceAnalysisError):
    """An analysis that needs GPU events was asked about ranks that have none."""

    def __init__(self, ranks, what: str = "this analysis", detail: str | None = None):
        self.ranks = list(ranks)
        self.what = what
        self.detail = detail
        reason = detail or "CPU-only trace, or the profiler ran without CUDA activities"
        super().__init__(
            f"{what} needs GPU kernels, but rank(s) {self.ranks} have no GPU events ({reason})"
        )

    def __reduce__(self):  # pickling (process pools, Dask) calls __init__ with these
        return (type(self), (self.ranks, self.what, self.detail))


class FormatNotSupportedError(TraceAnalysisError):
    """An analysis needs what this profiler's files do not carry (``analysis.formats.LACKS``),
    e.g. PyTorch operators in an Nsight Systems report."""

    # how users call each format's files in messages
    FILES = {"nsys": "nsys reports", "xplane": "XPlane profiles", "rocprof": "rocprofv3 files"}

    def __init__(self, what: str, source_format: str, missing, source: str = ""):
        self.what, self.source_format, self.source = what, source_format, source
        self.missing = list(missing)
        files = self.FILES.get(source_format, f"{source_format} files")
        where = f" ({source})" if source else ""
        super().__init__(
            f"{what} is not available for {files}{where}: the file has no "
            + " and no ".join(self.missing)
        )

    def __reduce__(self):
        return (type(self), (self.what, self.source_format, self.missing, self.source))


class NoMemoryEventsError(TraceAnalysisError):
    """A memory snapshot holds nothing for the device asked for."""


class MissingExtraError(TraceAnalysisError, KeyError):
    """An analysis needs event args that were not read for this rank (see analysis.kineto.extras)."""

    def __init__(self, name: str, rank, source: str):
        self.name, self.rank, self.source = name, rank, source
        super().__init__(
            f"rank {rank} ({source}): the {name!r} extra was not read; run the analysis through "
            f"TraceAnalysis, or call analysis.kineto.extras.attach_extras(rank_trace, [{name!r}])"
        )

    def __str__(self) -> str:  # KeyError quotes its message otherwise
        return str(self.args[0])

    def __reduce__(self):  # survives pickling (Dask workers)
        return (type(self), (self.name, self.rank, self.source))


class NotRecordedError(TraceAnalysisError):
    """No rank analysed carries what an analysis reads: the traces were recorded without it."""

    what = ""  # what the traces lack, in words
    how = ""  # how to record it

    def __init__(self, ranks, sources):
        self.ranks, self.sources = list(ranks), list(sources)
        where = self.sources[0] if self.sources else "?"
        if len(self.sources) > 1:
            where += f" and {len(self.sources) - 1} more"
        super().__init__(f"rank(s) {self.ranks} ({where}): {self.what}; record it with {self.how}")

    def __reduce__(self):
        return (type(self), (self.ranks, self.sources))


class NoMemoryProfileError(NotRecordedError):
    """No rank analysed has ``[memory]`` events (the trace was recorded without memory profiling)."""

    what = "the trace has no [memory] events, so there is no memory view"
    how = ("torch.profiler.profile(profile_memory=True) (with record_shapes=True and "
           "with_stack=True to see which operators allocate)")


class NoModulesError(NotRecordedError):
    """No rank has ``nn.Module`` events (recorded without ``with_modules=True``)."""

    what = "the trace has no nn.Module events, so there is no module view"
    how = "torch.profiler.profile(with_modules=True) (or with_stack=True)"


class NoShapesError(TraceAnalysisError):
    """No operator of the ranks analysed has recorded shapes (``record_shapes=False``)."""

    def __init__(self, ranks, sources):
        self.ranks, self.sources = list(ranks), list(sources)
        where = self.sources[0] if self.sources else "?"
        if len(self.sources) > 1:
            where += f" and {len(self.sources) - 1} more"
        super().__init__(
            f"rank(s) {self.ranks} ({where}): no CPU operator has recorded shapes (Input Dims), "
            "so FLOPs and bytes cannot be modelled; record the traces with "
            "torch.profiler.profile(record_shapes=True)"
        )

    def __reduce__(self):
        return (type(self), (self.ranks, self.sources))


class UnknownRankError(TraceAnalysisError, KeyError):
    """A rank was asked for that the trace does not have."""

    def __init__(self, rank, available):
        self.rank = rank
        self.available = sorted(available)
        super().__init__(f"rank {rank} is not in this trace; ranks present: {self.available}")

    def __reduce__(self):
        return (type(self), (self.rank, self.available))

    def __str__(self) -> str:  # KeyError quotes its message otherwise
        return self.args[0]


class ExportError(TraceAnalysisError):
    """A figure or report could not be written; ``path`` is the file (or directory), ``reason`` why."""

    def __init__(self, path, reason: str):
        self.path = str(path)
        self.reason = reason
        super().__init__(f"{self.path}: {reason}")

    def __reduce__(self):
        return (type(self), (self.path, self.reason))


class BrowserNotFoundError(ExportError):
    """No Chrome/Chromium for kaleido to render static images with."""


class TraceLoadWarning(UserWarning):
    """A file was skipped or a rank guessed while loading; the message names the file."""


class ConfigError(TraceAnalysisError, ValueError):
    """A configuration value (a profiler config key, a pattern preset, an option) is invalid."""


class EmptySelectionError(ConfigError):
    """The ranks, steps or filters asked for select no event: nothing is written."""


class CollectiveMismatchWarning(UserWarning):
    """Collectives of one process group and type could not be matched across ranks (their counts
    differ and the trace has no sequence numbers); the message names the group and the counts."""
