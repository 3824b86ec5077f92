"""Input, neutral: how files are read (bounded, local or through fsspec), the limits on what is
read, and the options of a load. Kineto traces, memory snapshots and py-spy profiles all read
through here; this package knows no trace format, metric or engine (an import-linter contract).

- :mod:`analysis.io.limits`: the read limit (bytes) and the remote time budget, each with its
  environment variable;
- :mod:`analysis.io.files`: :func:`read_input_bytes` (only regular files, bounded, sniffed first),
  :func:`gunzip_bounded`, and fsspec's errors turned into the project's (:func:`as_load_error`);
- :mod:`analysis.io.options`: :class:`LoadOptions`, checked once and passed facade → engine → loader.
"""

from analysis.io.files import as_load_error, gunzip_bounded, read_input_bytes
from analysis.io.limits import (
    READ_LIMIT_ENV,
    REMOTE_TIMEOUT_ENV,
    Deadline,
    available_memory,
    read_limit,
    remote_timeout,
)
from analysis.io.options import LoadOptions

__all__ = [
    "READ_LIMIT_ENV",
    "REMOTE_TIMEOUT_ENV",
    "Deadline",
    "LoadOptions",
    "as_load_error",
    "available_memory",
    "gunzip_bounded",
    "read_input_bytes",
    "read_limit",
    "remote_timeout",
]
