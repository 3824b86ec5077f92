"""Warnings about the traces themselves are said once, not on every command over the same traces.

A data warning (a guessed rank, GPU events nothing launched, a skipped file) is the same every time
the same traces are opened. The command line prints each one the first time, records a hash of its
text in the cache directory (``warnings-shown.json``), and afterwards only counts it in one closing
line; ``-v`` (or ``TRACE_ANALYSIS_REPEAT_WARNINGS=1``) prints them all again, and
``trace-analysis cache clear`` forgets them. Warnings are only ever hidden on a terminal command,
never in the library.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import warnings
from pathlib import Path

FILE_NAME = "warnings-shown.json"
REPEAT_ENV = "TRACE_ANALYSIS_REPEAT_WARNINGS"
_LIMIT = 5000  # hashes kept (oldest dropped): the file stays a few hundred KB at most


def _store() -> Path:
    from analysis.kineto.cache import default_cache_dir

    return default_cache_dir() / FILE_NAME


def _load(path: Path) -> list[str]:
    try:
        seen = json.loads(path.read_text(encoding="utf-8"))
        return [str(h) for h in seen] if isinstance(seen, list) else []
    except (OSError, ValueError):
        return []


class OncePerTrace:
    """Installed as ``warnings.showwarning`` for one command: passes new warnings on to the
    previous hook (which prints them) and counts the ones an earlier run already printed."""

    def __init__(self, verbose: bool = False):
        self.verbose = verbose or os.environ.get(REPEAT_ENV, "") not in ("", "0")
        self.previous = warnings.showwarning
        self.path: Path | None = None  # read on the first warning: --help imports nothing heavy
        self.seen: list[str] = []
        self.known: set[str] = set()
        self.hidden = 0
        self.new: list[str] = []
        self.quiet = False  # -q: no note about the hidden ones

    def __call__(self, message, category, filename, lineno, file=None, line=None):
        if self.path is None:
            self.path = _store()
            self.seen = _load(self.path)
            self.known = set(self.seen)
        text = str(message)
        key = hashlib.sha1(f"{category.__name__}:{text}".encode()).hexdigest()[:20]
        if key in self.known and not self.verbose:
            self.hidden += 1
            return
        if key not in self.known:
            self.known.add(key)
            self.new.append(key)
        self.previous(message, category, filename, lineno, file, line)

    def close(self) -> None:
        """Record the new warnings, say how many were hidden, and put the previous hook back."""
        warnings.showwarning = self.previous
        if self.hidden and not self.quiet:
            n = f"{self.hidden} warning{'s' if self.hidden > 1 else ''}"
            sys.stderr.write(f"note: {n} about these traces shown on an earlier run "
                             "(-v shows them again)\n")
        if not self.new or self.path is None:
            return
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.path.with_name(f"{FILE_NAME}.{os.getpid()}.part")
            tmp.write_text(json.dumps((self.seen + self.new)[-_LIMIT:]), encoding="utf-8")
            os.replace(tmp, self.path)
        except OSError:
            pass  # a read-only cache: the warnings are simply said again next time


def forget() -> bool:
    """Forget every warning shown (``cache clear``); True when there was something to forget."""
    try:
        _store().unlink()
        return True
    except OSError:
        return False


def install(verbose: bool = False) -> OncePerTrace:
    """Route ``warnings.warn`` through an :class:`OncePerTrace` for the rest of the command."""
    hook = OncePerTrace(verbose)
    warnings.showwarning = hook
    return hook


def quiet() -> None:
    """``-q``: the command's :class:`OncePerTrace` (if one is installed) prints no note."""
    if isinstance(warnings.showwarning, OncePerTrace):
        warnings.showwarning.quiet = True
