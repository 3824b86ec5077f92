"""Limits on what is read: the most bytes one input may hold, and how long a remote store may take.

Both have a default that fits the machine and an environment variable that overrides it
(:data:`READ_LIMIT_ENV`, :data:`REMOTE_TIMEOUT_ENV`); a bad setting is a ``ConfigError`` naming
the variable. :class:`Deadline` is one time budget shared by the steps of a remote operation.
"""

from __future__ import annotations

import os
import re
import time

from analysis.errors import ConfigError, InputTooLargeError, UnreachableError

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


def size_text(n: int) -> str:
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} bytes"


def too_large(url: str, what: str, limit: int) -> InputTooLargeError:
    return InputTooLargeError(
        url,
        f"{what} is larger than the read limit of {size_text(limit)} (half of the memory "
        f"available, or ${READ_LIMIT_ENV}); raise the limit if the machine can hold it",
    )


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

