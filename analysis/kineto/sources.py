"""Finding trace files: a local directory, a ``gs://`` prefix or any fsspec URL, a list, a mapping.

URLs go through fsspec (``fsspec.core.url_to_fs(url, **storage_options)``), so the same code
lists a GCS prefix or ``memory://`` in tests; plain local paths take a few ``os`` calls that give
the same names, sizes and versions without importing fsspec. Only file *names and
fingerprints* are gathered here; reading and parsing happen in :mod:`analysis.kineto.loader`.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import posixpath
import re
import stat
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from analysis.errors import (
    ConfigError,
    CorruptInputError,
    CorruptTraceError,
    InputFileError,
    InputNotFoundError,
    InputPermissionError,
    InputTooLargeError,
    NotARegularFileError,
    TraceLoadError,
    TraceNotFoundError,
    TracePermissionError,
    UnreachableError,
)
from analysis.formats.detect import SQLITE_MAGIC

# Like HTA: Kineto writes *.pt.trace.json(.gz); HTA reads every *.json and *.gz and lets the
# content decide (non-traces are skipped by the loader with a warning). Other profilers' files
# (analysis.formats): Nsight Systems SQLite exports and XPlane protobufs (rocprofv3 writes JSON).
TRACE_SUFFIXES = (".json", ".gz", ".sqlite", ".xplane.pb")
TRACE_PATTERNS = (
    "*.json, *.json.gz, *.pt.trace.json, *.pt.trace.json.gz, *.gz, *.sqlite, *.xplane.pb"
)

# Ranks in file names, tried in order (the rule is documented in README.md, "How ranks are read"):
# "rank-3", "rank_3", "rank3", "RANK-3" anywhere (not "frank3"); then a name that starts with
# "worker3" (torch's tensorboard_trace_handler(worker_name=f"worker{rank}") writes
# "worker3.1623212756351.pt.trace.json.gz").
_RANK_IN_NAME = re.compile(r"(?<![a-z])rank[-_]?(\d+)", re.IGNORECASE)
_WORKER_PREFIX = re.compile(r"^worker[-_]?(\d+)(?=[._-])", re.IGNORECASE)

# Keys of fsspec's info() that change whenever an object's content changes, best first:
# GCS generation, S3/HTTP ETag, MD5, then modification times.
_VERSION_KEYS = ("generation", "etag", "ETag", "md5Hash", "md5", "mtime", "LastModified",
                 "updated", "last_modified", "created")


@dataclass(frozen=True)
class TraceFile:
    """One trace file to load.

    ``url``: what is opened and reported (an absolute local path, or a URL such as ``gs://b/p/f``).
    ``size`` and ``version`` fingerprint its content for the cache; ``version`` is None when the
    filesystem reports nothing that changes with the content (such files are never cached).
    ``rank``: the rank given by an explicit ``{rank: path}`` mapping, else None.
    """

    url: str
    size: int | None
    version: str | None
    rank: int | None = None


def rank_from_file_name(url: str) -> int | None:
    """The rank written in a file name, or None: ``rank-3``, ``rank_3``, ``rank3`` anywhere in
    it, else a leading ``worker3.`` / ``worker_3_`` (``worker3.1623212756351.pt.trace.json.gz``)."""
    name = posixpath.basename(url.rstrip("/"))
    match = _RANK_IN_NAME.search(name) or _WORKER_PREFIX.match(name)
    return int(match.group(1)) if match else None


def _is_url(path: str) -> bool:
    return "://" in path or "::" in path


def _join(base: str, name: str) -> str:
    if _is_url(base):
        return base.rstrip("/") + "/" + name
    return os.path.join(base, name)


def _version(info: Mapping[str, Any]) -> str | None:
    for key in _VERSION_KEYS:
        value = info.get(key)
        if value not in (None, ""):
            return f"{key}={value}"
    return None


# --- limits on what is read ---------------------------------------------------------------------

# Environment variables that override the defaults below (bytes may carry a K/M/G/T suffix).
READ_LIMIT_ENV = "TRACE_ANALYSIS_READ_LIMIT"
REMOTE_TIMEOUT_ENV = "TRACE_ANALYSIS_REMOTE_TIMEOUT"
# A file, or the text its gzip data expands to, may use at most this share of the memory available
# when reading starts: parsing needs several times the text's size again (FACTS: 175 MB of JSON
# peak at ~400-1000 MB), so a larger input would end in a MemoryError or the OOM killer anyway.
READ_LIMIT_SHARE = 0.5
# Without /proc/meminfo or sysconf (macOS, Windows): a fixed 8 GiB.
READ_LIMIT_FALLBACK = 8 * 2**30
# Seconds that a remote store's metadata request (info, ls) may take, retries included; gcsfs
# alone retries an unreachable endpoint with exponential back-off for about 50 s.
REMOTE_TIMEOUT_S = 15.0
_SIZE_SUFFIX = {"": 1, "K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}


def _parse_bytes(text: str, name: str) -> int:
    match = re.fullmatch(r"\s*(\d+)\s*([KMGT]?)i?B?\s*", text, re.IGNORECASE)
    if not match or int(match.group(1)) <= 0:
        raise ConfigError(f"{name} must be a positive number of bytes such as 2G, not {text!r}")
    return int(match.group(1)) * _SIZE_SUFFIX[match.group(2).upper()]


def available_memory() -> int | None:
    """Bytes of memory available to new allocations (Linux MemAvailable), or None if unknown."""
    try:
        with open("/proc/meminfo", "rb") as f:
            for line in f:
                if line.startswith(b"MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def read_limit(limit: int | str | None = None) -> int:
    """The most bytes one input file (or its decompressed text) may hold.

    ``limit`` (bytes, or a string such as ``"4G"``), else ``$TRACE_ANALYSIS_READ_LIMIT``, else
    :data:`READ_LIMIT_SHARE` of the memory available now.
    """
    if limit is None:
        limit = os.environ.get(READ_LIMIT_ENV)
    if isinstance(limit, str):
        return _parse_bytes(limit, READ_LIMIT_ENV)
    if limit is not None:
        if isinstance(limit, bool) or not isinstance(limit, int) or limit <= 0:
            raise ConfigError(f"the read limit must be a positive number of bytes, not {limit!r}")
        return limit
    free = available_memory()
    return int(free * READ_LIMIT_SHARE) if free else READ_LIMIT_FALLBACK


def remote_timeout() -> float:
    """Seconds a remote store may take to answer, in all: connecting (credentials), file
    information and listing (``$TRACE_ANALYSIS_REMOTE_TIMEOUT`` overrides)."""
    text = os.environ.get(REMOTE_TIMEOUT_ENV)
    if text is None:
        return REMOTE_TIMEOUT_S
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value > 0:
        raise ConfigError(f"{REMOTE_TIMEOUT_ENV} must be a positive number of seconds, not {text!r}")
    return value


def _size_text(n: int) -> str:
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} bytes"


def too_large(url: str, what: str, limit: int) -> InputTooLargeError:
    return InputTooLargeError(
        url,
        f"{what} is larger than the read limit of {_size_text(limit)} (half of the memory "
        f"available, or ${READ_LIMIT_ENV}); raise the limit if the machine can hold it",
    )


class _QuietLibraries(logging.Filter):
    """Drops gcsfs's retry tracebacks: the error we raise says it all."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno >= logging.CRITICAL


@contextlib.contextmanager
def _quiet_remote():
    logger = logging.getLogger("gcsfs")
    quiet = _QuietLibraries()
    logger.addFilter(quiet)
    try:
        yield
    finally:
        logger.removeFilter(quiet)


class Deadline:
    """The one time budget of a remote operation (connecting, credentials, listing, file info):
    ``$TRACE_ANALYSIS_REMOTE_TIMEOUT`` seconds from its creation, shared by every step, so that
    a store that never answers fails after the budget, not after the budget times the steps."""

    def __init__(self, budget: float | None = None):
        self.budget = remote_timeout() if budget is None else budget
        self.end = time.monotonic() + self.budget

    def left(self) -> float:
        return max(0.05, self.end - time.monotonic())

    def expired(self, url: str, what: str = "") -> UnreachableError:
        return UnreachableError(
            url, f"no answer within {self.budget:g} s{what} (unreachable endpoint, network or "
            f"credentials?); ${REMOTE_TIMEOUT_ENV} sets this budget")


def _within(deadline: Deadline, url: str, what: str, func, *args, **kwargs):
    """``func(*args, **kwargs)`` in a daemon thread, waited for until the deadline (a library that
    looks for credentials, e.g. google.auth probing a metadata server, cannot be interrupted: it
    is left to finish in the background while the command fails on time)."""
    box: dict[str, Any] = {}

    def run():
        try:
            box["value"] = func(*args, **kwargs)
        except BaseException as exc:  # noqa: BLE001 - handed back to the caller below
            box["error"] = exc

    worker = threading.Thread(target=run, daemon=True, name="trace-analysis-connect")
    worker.start()
    worker.join(deadline.left())
    if worker.is_alive():
        raise deadline.expired(url, what)
    if "error" in box:
        raise box["error"]
    return box["value"]


def _metadata_call(fs, method: str, url: str, path: str, deadline: Deadline | None = None,
                   **kwargs):
    """``fs.<method>(path)``, bounded in time for remote (async) filesystems, quietly."""
    if _is_local(fs) or not getattr(fs, "async_impl", False):
        return getattr(fs, method)(path, **kwargs)
    import asyncio

    from fsspec.asyn import sync

    deadline = deadline or Deadline()
    budget = deadline.left()

    async def bounded():
        # wait_for cancels the request on time-out, so gcsfs's retries stop there too (fsspec's
        # own sync(timeout=) would leave them running, to log their tracebacks later)
        return await asyncio.wait_for(getattr(fs, "_" + method)(path, **kwargs), budget)

    with _quiet_remote():
        try:
            return sync(fs.loop, bounded)
        except Exception as exc:
            if _is_timeout(exc):
                raise deadline.expired(url) from None
            raise


def _is_timeout(exc: BaseException) -> bool:
    import asyncio

    from fsspec.exceptions import FSTimeoutError

    return isinstance(exc, FSTimeoutError | asyncio.TimeoutError | TimeoutError)


def _is_connection_error(exc: BaseException) -> bool:
    names = {c.__name__ for c in type(exc).__mro__}
    return isinstance(exc, ConnectionError) or "ClientConnectionError" in names


def _is_permission_error(exc: BaseException) -> bool:
    if isinstance(exc, PermissionError):
        return True
    if isinstance(exc, OSError) and exc.errno in (errno.EACCES, errno.EPERM):
        return True
    # gcsfs: 403 → OSError("Forbidden: ..."), 401 → HttpError with code 401.
    if isinstance(exc, OSError) and str(exc).startswith("Forbidden"):
        return True
    return getattr(exc, "code", None) in (401, 403)


def as_load_error(url: str, exc: BaseException, action: str, trace: bool = True) -> InputFileError:
    """The project's error for an exception fsspec raised trying to ``action`` (e.g. "read") ``url``.

    ``trace=False`` gives the neutral input-file classes (for snapshots and py-spy files).
    """
    if isinstance(exc, InputFileError):
        return exc
    if isinstance(exc, FileNotFoundError):
        cls = TraceNotFoundError if trace else InputNotFoundError
        return cls(url, "no such file, directory, bucket or object")
    if _is_permission_error(exc):
        cls = TracePermissionError if trace else InputPermissionError
        return cls(url, f"permission denied: cannot {action} ({exc})")
    if _is_connection_error(exc):
        return UnreachableError(url, f"cannot connect to the store: {exc}")
    if isinstance(exc, MemoryError):
        return InputTooLargeError(url, f"ran out of memory trying to {action}")
    cls = TraceLoadError if trace else InputFileError
    return cls(url, f"cannot {action}: {type(exc).__name__}: {exc}")


class _LocalFiles:
    """Plain local paths without fsspec (whose import costs ~0.1-0.2 s of every start-up):
    the few calls used here, with fsspec ``LocalFileSystem``'s names, types, sizes and mtimes, so
    that file names and cache keys are the same either way."""

    @staticmethod
    def name(path: str) -> str:
        # fsspec's make_path_posix + _strip_protocol on POSIX: absolute, no trailing slash
        if path.startswith("~"):
            path = os.path.expanduser(path)
        elif not path.startswith("/"):
            path = path[2:] if path.startswith("./") else ("" if path == "." else path)
            path = f"{os.getcwd()}/{path}"
        return path.rstrip("/") or "/"

    def info(self, path: str) -> dict[str, Any]:
        st = os.stat(path, follow_symlinks=False)
        if stat.S_ISLNK(st.st_mode):
            st = os.stat(path)
        kind = "directory" if stat.S_ISDIR(st.st_mode) else "file" if stat.S_ISREG(st.st_mode) else "other"
        return {"name": self.name(path), "size": st.st_size, "type": kind, "mtime": st.st_mtime}

    def ls(self, path: str, detail: bool = True) -> list[dict[str, Any]]:
        # as fsspec lists: entries typed without following links (a link is "other")
        infos = []
        with os.scandir(path) as entries:
            for entry in entries:
                try:
                    st = entry.stat(follow_symlinks=False)
                    kind = (
                        "directory"
                        if entry.is_dir(follow_symlinks=False)
                        else "file" if entry.is_file(follow_symlinks=False) else "other"
                    )
                except FileNotFoundError:  # removed meanwhile
                    continue
                infos.append(
                    {"name": self.name(entry.path), "size": st.st_size, "type": kind,
                     "mtime": st.st_mtime}
                )
        return infos

    def cat_file(self, path: str) -> bytes:
        with open(path, "rb") as f:
            return f.read()


def _filesystem(url: str, storage_options: Mapping[str, Any] | None,
                deadline: Deadline | None = None):
    """The fsspec filesystem and path of ``url`` (ours for plain local paths). Creating a remote
    one may look for credentials (seconds, on a machine without them): bounded by ``deadline``."""
    if os.sep == "/" and ":" not in url and not storage_options:
        return _LocalFiles(), _LocalFiles.name(url)
    from fsspec.core import url_to_fs  # only for URLs: its import is a tenth of a second

    try:
        if not _is_url(url) or url.startswith("file:"):
            return url_to_fs(url, **dict(storage_options or {}))
        return _within(deadline or Deadline(), url, " (connecting: looking for credentials)",
                       url_to_fs, url, **dict(storage_options or {}))
    except (ValueError, ImportError) as exc:  # unknown protocol, missing gcsfs/s3fs, bad options
        raise TraceLoadError(url, f"cannot open this URL with fsspec: {exc}") from exc


def _is_local(fs) -> bool:
    """A local file system: ours (plain paths) or fsspec's (``file://`` URLs), without importing
    fsspec for the question."""
    return isinstance(fs, _LocalFiles) or type(fs).__module__ == "fsspec.implementations.local"


def display_url(fs, path: str, given: str) -> str:
    """Local files are reported as plain absolute paths, remote ones as the URL the user gave."""
    return path if _is_local(fs) else given


def _list_directory(url: str, fs, path: str, deadline: Deadline | None = None) -> list[TraceFile]:
    try:
        entries = _metadata_call(fs, "ls", url, path, deadline, detail=True)
    except Exception as exc:
        raise as_load_error(url, exc, "list this directory") from exc
    files = []
    for info in entries:
        name = posixpath.basename(info["name"].rstrip("/"))
        if info.get("type") != "file" or not name.endswith(TRACE_SUFFIXES):
            continue
        file_url = display_url(fs, info["name"], _join(url, name))
        files.append(TraceFile(file_url, info.get("size"), _version(info)))
    if not files:
        raise TraceNotFoundError(
            url, f"no trace files in this directory (looked for {TRACE_PATTERNS}, top level only)"
        )
    return sorted(files, key=lambda f: posixpath.basename(f.url))


def _single_file(url: str, storage_options, rank: int | None = None,
                 deadline: Deadline | None = None) -> TraceFile:
    fs, path = _filesystem(url, storage_options, deadline)
    try:
        info = _metadata_call(fs, "info", url, path, deadline)
    except Exception as exc:
        raise as_load_error(url, exc, "get file information") from exc
    if info.get("type") == "directory":
        raise TraceLoadError(url, "is a directory; pass it as trace_dir, not in trace_files")
    _check_regular(url, info, fs, path)
    return TraceFile(display_url(fs, path, url), info.get("size"), _version(info), rank)


def find_trace_files(
    trace_dir: str | os.PathLike | None = None,
    trace_files: Sequence[str | os.PathLike] | Mapping[int, str | os.PathLike] | None = None,
    storage_options: Mapping[str, Any] | None = None,
) -> list[TraceFile]:
    """The trace files to load, sorted by name (or in rank order for a ``{rank: path}`` mapping).

    ``trace_dir``: a directory or prefix (top level only, names ending in :data:`TRACE_SUFFIXES`),
    or a single file. ``trace_files``: paths or URLs (relative ones are joined to ``trace_dir``), or
    HTA's ``{rank: path}`` mapping. Raises :class:`TraceNotFoundError` for a missing path, bucket
    or prefix, or a directory without trace files; :class:`TracePermissionError` when listing is
    denied.
    """
    base = os.fspath(trace_dir) if trace_dir is not None else None
    if trace_files is not None:
        if isinstance(trace_files, Mapping):
            items = [(int(rank), os.fspath(p)) for rank, p in sorted(trace_files.items())]
        elif isinstance(trace_files, (str, os.PathLike)):
            items = [(None, os.fspath(trace_files))]
        else:
            items = [(None, os.fspath(p)) for p in trace_files]
        if not items:
            raise TraceNotFoundError(str(base or "trace_files"), "trace_files is empty")
        found = []
        deadline = Deadline()  # one budget for every file's information
        for rank, p in items:
            if base is not None and not _is_url(p) and not os.path.isabs(p):
                p = _join(base, p)
            found.append(_single_file(p, storage_options, rank, deadline))
        if not isinstance(trace_files, Mapping):
            found.sort(key=lambda f: posixpath.basename(f.url))
        return found

    if base is None:
        raise ConfigError("pass trace_dir (a directory, prefix or file) or trace_files")
    deadline = Deadline()  # connecting, file information and listing share one budget
    fs, path = _filesystem(base, storage_options, deadline)
    try:
        info = _metadata_call(fs, "info", base, path, deadline)
    except Exception as exc:
        raise as_load_error(base, exc, "get file information") from exc
    if info.get("type") == "directory":
        return _list_directory(base, fs, path, deadline)
    _check_regular(base, info, fs, path)
    return [TraceFile(display_url(fs, path, base), info.get("size"), _version(info))]


def _check_regular(url: str, info: Mapping[str, Any], fs=None, path: str = "") -> None:
    if info.get("type") in ("file", None):
        return
    kind = f"a {info.get('type')}"
    if _is_local(fs):
        with contextlib.suppress(OSError):
            kind = f"a {_file_kind(os.stat(path).st_mode)}"
    raise NotARegularFileError(url, f"not a regular file but {kind}; only regular files are read")


def _file_kind(mode: int) -> str:
    for test, name in ((stat.S_ISDIR, "directory"), (stat.S_ISFIFO, "FIFO (named pipe)"),
                       (stat.S_ISCHR, "character device"), (stat.S_ISBLK, "block device"),
                       (stat.S_ISSOCK, "socket")):
        if test(mode):
            return name
    return "special file"


def _read_local(url: str, path: str, limit: int, sniff, trace: bool) -> bytes:
    try:
        # O_NONBLOCK: opening a FIFO must not wait for a writer; regular files ignore the flag.
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise as_load_error(url, exc, "read this file", trace) from exc
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        raise NotARegularFileError(
            url, f"not a regular file but a {_file_kind(info.st_mode)}; only regular files are read"
        )
    with os.fdopen(fd, "rb") as f:  # buffered: its read(n) loops until n bytes or the end
        size = info.st_size
        if size > limit:
            raise too_large(url, f"the file ({_size_text(size)})", limit)
        try:
            head = f.read(_SNIFF_BYTES)
            _sniffed(url, head, sniff, trace)
            # +1: a file that grew past the limit since fstat is caught too
            rest = f.read(min(size, limit) + 1 - len(head)) if len(head) == _SNIFF_BYTES else b""
        except OSError as exc:
            raise as_load_error(url, exc, "read this file", trace) from exc
    data = head + rest if rest else head
    if len(data) > limit:
        raise too_large(url, "the file", limit)
    return data


# Enough to recognise the format: gzip magic, a BOM and leading blanks, a pickle's protocol opcode.
_SNIFF_BYTES = 4096


def _sniffed(url: str, head: bytes, sniff, trace: bool) -> None:
    reason = "the file is empty (0 bytes)" if not head else sniff(head) if sniff else None
    if reason:
        raise (CorruptTraceError if trace else CorruptInputError)(url, reason)


def read_input_bytes(
    url: str,
    storage_options: Mapping[str, Any] | None = None,
    *,
    limit: int | str | None = None,
    sniff=None,
    trace: bool = True,
) -> bytes:
    """The raw bytes of one input file (gzip or not), bounded and checked before reading it all.

    Only regular files are read (a FIFO or ``/dev/zero`` raises ``NotARegularFileError`` without
    blocking). A file over :func:`read_limit` raises ``InputTooLargeError`` before it is read.
    ``sniff(first_bytes)`` returns a reason when the start of the file already shows it is not
    what is expected (``CorruptInputError``), so that a 2 GB file of zeros is never read whole.
    fsspec errors become ours (trace classes, or with ``trace=False`` the neutral ones).
    """
    cap = read_limit(limit)
    fs, path = _filesystem(url, storage_options)
    if _is_local(fs):
        return _read_local(url, path, cap, sniff, trace)
    try:
        info = _metadata_call(fs, "info", url, path)
        _check_regular(url, info)
        size = info.get("size")
        if size is not None and size > cap:
            raise too_large(url, f"the object ({_size_text(int(size))})", cap)
        with _quiet_remote():
            head = fs.cat_file(path, start=0, end=_SNIFF_BYTES)
            _sniffed(url, head, sniff, trace)
            data = fs.cat_file(path) if len(head) == _SNIFF_BYTES else head
    except Exception as exc:
        raise as_load_error(url, exc, "read this file", trace) from exc
    if len(data) > cap:
        raise too_large(url, "the object", cap)
    return data


def read_trace_bytes(url: str, storage_options: Mapping[str, Any] | None = None, **limits) -> bytes:
    """The raw bytes of one trace file (see :func:`read_input_bytes`)."""
    return read_input_bytes(url, storage_options, sniff=sniff_trace, **limits)


def sniff_trace(head: bytes) -> str | None:
    """Why the first bytes of a file cannot start a Kineto trace (gzip or JSON object) or another
    profiler's file that ``analysis.formats`` reads, or None."""
    if head.startswith((b"\x1f\x8b", SQLITE_MAGIC)) or head[:1] == b"\x0a":  # gzip, nsys, XPlane
        return None
    text = head.removeprefix(b"\xef\xbb\xbf").lstrip(b" \t\r\n")
    if not text:
        return None if len(head) < _SNIFF_BYTES else "the file starts with 4 KiB of blanks"
    if text[:1] in (b"{", b"["):
        return None
    return (
        f"not a Kineto trace: neither gzip data nor JSON (starts with {text[:16]!r}); "
        "a trace is .json or .json.gz (or an nsys .sqlite, an .xplane.pb, a rocprofv3 .json)"
    )


def gunzip_bounded(data: bytes, url: str, limit: int | str | None = None,
                   error=CorruptInputError) -> bytes:
    """``data`` decompressed when it starts with the gzip magic, else as it is; decompression is
    streamed and stops with ``InputTooLargeError`` once the text passes :func:`read_limit`.

    Concatenated gzip members are read in turn; zero padding after the last one is ignored (as
    gzip(1) does); anything else is damage (``error``, CorruptInputError by default).
    """
    if not data.startswith(b"\x1f\x8b"):
        return data
    from isal import isal_zlib

    cap = read_limit(limit)
    parts: list[bytes] = []
    total = 0
    rest = data
    chunk = 256 * 2**20  # output per call; each call copies the unconsumed input, so not too small
    while rest.startswith(b"\x1f\x8b"):
        member = isal_zlib.decompressobj(wbits=31)
        pending = rest
        try:
            while True:
                out = member.decompress(pending, min(chunk, cap + 1 - total))
                parts.append(out)
                total += len(out)
                if total > cap:
                    raise too_large(url, "the decompressed gzip data", cap)
                pending = member.unconsumed_tail
                if member.eof or not (pending or out):
                    break
        except isal_zlib.error as exc:
            raise error(url, f"truncated or corrupt gzip data ({exc})") from None
        if not member.eof:
            raise error(url, "truncated or corrupt gzip data (the compressed stream ends early)")
        rest = member.unused_data
    if rest.strip(b"\0"):
        raise error(
            url, f"truncated or corrupt gzip data ({len(rest)} unexpected bytes after the data)"
        )
    text = b"".join(parts)
    if not text:
        raise error(url, "the gzip data decompresses to an empty file")
    return text
