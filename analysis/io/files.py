"""Reading input files, local or through fsspec, bounded: the one way in for every file read.

Trace files (:mod:`analysis.kineto`), memory snapshots (:mod:`analysis.memory`) and py-spy profiles
(:mod:`analysis.pyspy`) are all read here: only regular files, at most :func:`read_limit` bytes
(decompressed text included: :func:`gunzip_bounded`), sniffed before being read whole, remote
metadata calls bounded in time (:class:`~analysis.io.limits.Deadline`), and every failure raised as
the project's own error naming the file (:func:`as_load_error`). Plain local paths take a few
``os`` calls with fsspec ``LocalFileSystem``'s names, sizes and mtimes, without importing fsspec.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import stat
import threading
from collections.abc import Mapping
from typing import Any

from analysis.errors import (
    CorruptInputError,
    CorruptTraceError,
    InputFileError,
    InputNotFoundError,
    InputPermissionError,
    InputTooLargeError,
    NotARegularFileError,
    TraceAnalysisError,
    TraceLoadError,
    TraceNotFoundError,
    TracePermissionError,
    UnreachableError,
)
from analysis.io.limits import Deadline, read_limit, size_text, too_large


def is_url(path: str) -> bool:
    return "://" in path or "::" in path


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


def metadata_call(fs, method: str, url: str, path: str, deadline: Deadline | None = None,
                   **kwargs):
    """``fs.<method>(path)``, bounded in time for remote (async) filesystems, quietly."""
    if is_local_fs(fs) or not getattr(fs, "async_impl", False):
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
                     "mtime": st.st_mtime, "islink": entry.is_symlink()}
                )
        return infos

    def cat_file(self, path: str) -> bytes:
        with open(path, "rb") as f:
            return f.read()


def filesystem(url: str, storage_options: Mapping[str, Any] | None,
                deadline: Deadline | None = None):
    """The fsspec filesystem and path of ``url`` (ours for plain local paths). Creating a remote
    one may look for credentials (seconds, on a machine without them): bounded by ``deadline``."""
    if os.sep == "/" and ":" not in url and not storage_options:
        return _LocalFiles(), _LocalFiles.name(url)
    from fsspec.core import url_to_fs  # only for URLs: its import is a tenth of a second

    try:
        if not is_url(url) or url.startswith("file:"):
            return url_to_fs(url, **dict(storage_options or {}))
        return _within(deadline or Deadline(), url, " (connecting: looking for credentials)",
                       url_to_fs, url, **dict(storage_options or {}))
    except TraceAnalysisError:
        raise
    except (ValueError, ImportError, OSError) as exc:
        # an unknown protocol, missing gcsfs/s3fs, bad options; a filesystem that cannot start
        # (hdfs:// without a JVM: pyarrow's OSError 'Unable to load libjvm')
        text = " ".join(str(exc).split())
        if len(text) > 240:  # pyarrow lists every path it tried for libjvm: ~12 kB
            text = text[:240] + " …"
        raise TraceLoadError(url, f"cannot open this URL with fsspec: {text}") from exc


def is_local_fs(fs) -> bool:
    """A local file system: ours (plain paths) or fsspec's (``file://`` URLs), without importing
    fsspec for the question."""
    return isinstance(fs, _LocalFiles) or type(fs).__module__ == "fsspec.implementations.local"


def display_url(fs, path: str, given: str) -> str:
    """Local files are reported as plain absolute paths, remote ones as the URL the user gave."""
    return path if is_local_fs(fs) else given


def entry_kind(info: Mapping[str, Any], fs=None, path: str = "") -> str:
    """What a listed entry that is no regular file is, for a message: "a FIFO (named pipe)", "a
    directory"... (the local file's mode where it can be read, else fsspec's type)."""
    if is_local_fs(fs):
        with contextlib.suppress(OSError):
            return f"a {file_kind(os.stat(path).st_mode)}"
    return f"a {info.get('type') or 'special file'}"


def check_regular(url: str, info: Mapping[str, Any], fs=None, path: str = "") -> None:
    if info.get("type") in ("file", None):
        return
    raise NotARegularFileError(url, f"not a regular file but {entry_kind(info, fs, path)}; only "
                               "regular files are read")


def file_kind(mode: int) -> str:
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
            url, f"not a regular file but a {file_kind(info.st_mode)}; only regular files are read"
        )
    with os.fdopen(fd, "rb") as f:  # buffered: its read(n) loops until n bytes or the end
        size = info.st_size
        if size > limit:
            raise too_large(url, f"the file ({size_text(size)})", limit)
        try:
            head = f.read(SNIFF_BYTES)
            _sniffed(url, head, sniff, trace)
            # +1: a file that grew past the limit since fstat is caught too
            rest = f.read(min(size, limit) + 1 - len(head)) if len(head) == SNIFF_BYTES else b""
        except OSError as exc:
            raise as_load_error(url, exc, "read this file", trace) from exc
    data = head + rest if rest else head
    if len(data) > limit:
        raise too_large(url, "the file", limit)
    return data


# Enough to recognise the format: gzip magic, a BOM and leading blanks, a pickle's protocol opcode.
SNIFF_BYTES = 4096


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
    fs, path = filesystem(url, storage_options)
    if is_local_fs(fs):
        return _read_local(url, path, cap, sniff, trace)
    try:
        info = metadata_call(fs, "info", url, path)
        check_regular(url, info)
        size = info.get("size")
        if size is not None and size > cap:
            raise too_large(url, f"the object ({size_text(int(size))})", cap)
        with _quiet_remote():
            head = fs.cat_file(path, start=0, end=SNIFF_BYTES)
            _sniffed(url, head, sniff, trace)
            data = fs.cat_file(path) if len(head) == SNIFF_BYTES else head
    except Exception as exc:
        raise as_load_error(url, exc, "read this file", trace) from exc
    if len(data) > cap:
        raise too_large(url, "the object", cap)
    return data



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

