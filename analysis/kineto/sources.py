"""Finding trace files: a local directory, a ``gs://`` prefix or any fsspec URL, a list, a mapping.

URLs go through fsspec (``fsspec.core.url_to_fs(url, **storage_options)``), so the same code
lists a GCS prefix or ``memory://`` in tests; plain local paths take a few ``os`` calls that give
the same names, sizes and versions without importing fsspec. Only file *names and
fingerprints* are gathered here; reading and parsing happen in :mod:`analysis.kineto.loader`.
"""

from __future__ import annotations

import errno
import os
import posixpath
import re
import stat
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from analysis.errors import ConfigError, TraceLoadError, TraceNotFoundError, TracePermissionError

# Like HTA: Kineto writes *.pt.trace.json(.gz); HTA reads every *.json and *.gz and lets the
# content decide (non-traces are skipped by the loader with a warning).
TRACE_SUFFIXES = (".json", ".gz")
TRACE_PATTERNS = "*.json, *.json.gz, *.pt.trace.json, *.pt.trace.json.gz, *.gz"

# "rank-3", "rank_3", "rank3", "RANK-3"; not "frank3".
_RANK_IN_NAME = re.compile(r"(?<![a-z])rank[-_]?(\d+)", re.IGNORECASE)

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
    """The rank written in a file name (``rank-3``, ``rank_3``, ``rank3``), or None."""
    match = _RANK_IN_NAME.search(posixpath.basename(url.rstrip("/")))
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


def _is_permission_error(exc: BaseException) -> bool:
    if isinstance(exc, PermissionError):
        return True
    if isinstance(exc, OSError) and exc.errno in (errno.EACCES, errno.EPERM):
        return True
    # gcsfs: 403 → OSError("Forbidden: ..."), 401 → HttpError with code 401.
    if isinstance(exc, OSError) and str(exc).startswith("Forbidden"):
        return True
    return getattr(exc, "code", None) in (401, 403)


def as_load_error(url: str, exc: BaseException, action: str) -> TraceLoadError:
    """The project's error for an exception fsspec raised trying to ``action`` (e.g. "read") ``url``."""
    if isinstance(exc, TraceLoadError):
        return exc
    if isinstance(exc, FileNotFoundError):
        return TraceNotFoundError(url, "no such file, directory, bucket or object")
    if _is_permission_error(exc):
        return TracePermissionError(url, f"permission denied: cannot {action} ({exc})")
    return TraceLoadError(url, f"cannot {action}: {type(exc).__name__}: {exc}")


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


def _filesystem(url: str, storage_options: Mapping[str, Any] | None):
    if os.sep == "/" and ":" not in url and not storage_options:
        return _LocalFiles(), _LocalFiles.name(url)
    from fsspec.core import url_to_fs  # only for URLs: its import is a tenth of a second

    try:
        return url_to_fs(url, **dict(storage_options or {}))
    except (ValueError, ImportError) as exc:  # unknown protocol, missing gcsfs/s3fs, bad options
        raise TraceLoadError(url, f"cannot open this URL with fsspec: {exc}") from exc


def display_url(fs, path: str, given: str) -> str:
    """Local files are reported as plain absolute paths, remote ones as the URL the user gave."""
    if isinstance(fs, _LocalFiles):
        return path
    from fsspec.implementations.local import LocalFileSystem

    if isinstance(fs, LocalFileSystem):
        return path
    return given


def _list_directory(url: str, fs, path: str) -> list[TraceFile]:
    try:
        entries = fs.ls(path, detail=True)
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


def _single_file(url: str, storage_options, rank: int | None = None) -> TraceFile:
    fs, path = _filesystem(url, storage_options)
    try:
        info = fs.info(path)
    except Exception as exc:
        raise as_load_error(url, exc, "get file information") from exc
    if info.get("type") == "directory":
        raise TraceLoadError(url, "is a directory; pass it as trace_dir, not in trace_files")
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
        for rank, p in items:
            if base is not None and not _is_url(p) and not os.path.isabs(p):
                p = _join(base, p)
            found.append(_single_file(p, storage_options, rank))
        if not isinstance(trace_files, Mapping):
            found.sort(key=lambda f: posixpath.basename(f.url))
        return found

    if base is None:
        raise ConfigError("pass trace_dir (a directory, prefix or file) or trace_files")
    fs, path = _filesystem(base, storage_options)
    try:
        info = fs.info(path)
    except Exception as exc:
        raise as_load_error(base, exc, "get file information") from exc
    if info.get("type") == "directory":
        return _list_directory(base, fs, path)
    return [TraceFile(display_url(fs, path, base), info.get("size"), _version(info))]


def read_trace_bytes(url: str, storage_options: Mapping[str, Any] | None = None) -> bytes:
    """The raw bytes of one trace file (gzip or not), with fsspec errors turned into ours."""
    fs, path = _filesystem(url, storage_options)
    try:
        return fs.cat_file(path)
    except Exception as exc:
        raise as_load_error(url, exc, "read this file") from exc
