"""Finding trace files: a local directory, a ``gs://`` prefix or any fsspec URL, a list, a mapping.

URLs go through fsspec (``fsspec.core.url_to_fs(url, **storage_options)``), so the same code
lists a GCS prefix or ``memory://`` in tests; plain local paths take a few ``os`` calls that give
the same names, sizes and versions without importing fsspec (:mod:`analysis.io.files`). Only file
*names and fingerprints* are gathered here, and what a trace file must start with is checked
(:func:`sniff_trace`); bounded reading is :mod:`analysis.io`'s, parsing
:mod:`analysis.kineto.loader`'s.
"""

from __future__ import annotations

import os
import posixpath
import re
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from analysis.errors import ConfigError, TraceLoadError, TraceLoadWarning, TraceNotFoundError
from analysis.formats.detect import SQLITE_MAGIC
from analysis.io.files import (
    SNIFF_BYTES,
    as_load_error,
    check_regular,
    display_url,
    entry_kind,
    filesystem,
    is_local_fs,
    is_url,
    metadata_call,
    read_input_bytes,
)
from analysis.io.limits import Deadline

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


def _join(base: str, name: str) -> str:
    if is_url(base):
        return base.rstrip("/") + "/" + name
    return os.path.join(base, name)


def _version(info: Mapping[str, Any]) -> str | None:
    for key in _VERSION_KEYS:
        value = info.get(key)
        if value not in (None, ""):
            return f"{key}={value}"
    return None


def _list_directory(url: str, fs, path: str, deadline: Deadline | None = None) -> list[TraceFile]:
    try:
        entries = metadata_call(fs, "ls", url, path, deadline, detail=True)
    except Exception as exc:
        raise as_load_error(url, exc, "list this directory") from exc
    files, broken_links, unread = [], [], []
    listed = {os.path.realpath(e["name"]) for e in entries
              if is_local_fs(fs) and e.get("type") == "file" and not e.get("islink")}
    for info in entries:
        name = posixpath.basename(info["name"].rstrip("/"))
        if not name.endswith(TRACE_SUFFIXES):
            continue
        if info.get("islink") and info.get("type") != "file":
            # a symbolic link (fsspec lists it as "other"): followed, as when it is named alone
            # (folders of links to a job's traces are common on clusters), unless it names a
            # file of this directory, which is read once
            if is_local_fs(fs) and os.path.realpath(info["name"]) in listed:
                continue
            try:
                info = {**metadata_call(fs, "info", url, info["name"], deadline), "name": info["name"]}
            except Exception:  # noqa: BLE001 - a dangling link: said below
                broken_links.append(name)
                continue
        if info.get("type") != "file":
            unread.append(f"{name}: {entry_kind(info, fs, info['name'])}")
            continue
        file_url = display_url(fs, info["name"], _join(url, name))
        files.append(TraceFile(file_url, info.get("size"), _version(info)))
    unread += [f"{name}: a symbolic link to no file" for name in broken_links]
    if files and unread:  # a rank left out: never without a word
        warnings.warn(TraceLoadWarning(
            f"{url}: {len(unread)} entr{'y' if len(unread) == 1 else 'ies'} named like a trace "
            f"but not a regular file, not read: {'; '.join(unread[:5])}"
            + ("..." if len(unread) > 5 else "")), stacklevel=3)
    if not files:
        links = (f"; {len(broken_links)} symbolic link(s) point to no file ({broken_links[0]}...)"
                 if broken_links else "")
        raise TraceNotFoundError(
            url, f"no trace files in this directory (looked for {TRACE_PATTERNS}, top level "
            f"only){links}"
        )
    return sorted(files, key=lambda f: posixpath.basename(f.url))


def _single_file(url: str, storage_options, rank: int | None = None,
                 deadline: Deadline | None = None) -> TraceFile:
    fs, path = filesystem(url, storage_options, deadline)
    try:
        info = metadata_call(fs, "info", url, path, deadline)
    except Exception as exc:
        raise as_load_error(url, exc, "get file information") from exc
    if info.get("type") == "directory":
        raise TraceLoadError(url, "is a directory; pass it as trace_dir, not in trace_files")
    check_regular(url, info, fs, path)
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
            if base is not None and not is_url(p) and not os.path.isabs(p):
                p = _join(base, p)
            found.append(_single_file(p, storage_options, rank, deadline))
        if not isinstance(trace_files, Mapping):
            found.sort(key=lambda f: posixpath.basename(f.url))
        return found

    if base is None:
        raise ConfigError("pass trace_dir (a directory, prefix or file) or trace_files")
    deadline = Deadline()  # connecting, file information and listing share one budget
    fs, path = filesystem(base, storage_options, deadline)
    try:
        info = metadata_call(fs, "info", base, path, deadline)
    except Exception as exc:
        raise as_load_error(base, exc, "get file information") from exc
    if info.get("type") == "directory":
        return _list_directory(base, fs, path, deadline)
    check_regular(base, info, fs, path)
    return [TraceFile(display_url(fs, path, base), info.get("size"), _version(info))]


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
        return None if len(head) < SNIFF_BYTES else "the file starts with 4 KiB of blanks"
    if text[:1] in (b"{", b"["):
        return None
    return (
        f"not a Kineto trace: neither gzip data nor JSON (starts with {text[:16]!r}); "
        "a trace is .json or .json.gz (or an nsys .sqlite, an .xplane.pb, a rocprofv3 .json)"
    )
