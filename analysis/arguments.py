"""Checking the arguments a user passes, once, at the door: wrong types raise ``ConfigError``.

Python's own errors for a wrong argument (``TypeError: 'float' object is not iterable`` from deep
inside the loader, or worse a silent ``ranks=True`` read as rank 1) say nothing about which
argument was wrong. Every public entry point calls these checks first; each names the argument,
what it accepts and what it got.
"""

from __future__ import annotations

import numbers
import os
from collections.abc import Iterable, Mapping
from typing import Any

from analysis.errors import ConfigError

ON_ERROR_CHOICES = ("raise", "skip")
REPORT_FORMATS = ("html", "svg", "png", "pdf")


def _got(value: Any) -> str:
    text = repr(value)
    text = text if len(text) <= 60 else text[:57] + "..."
    return f"{type(value).__name__} {text}"


def _is_int(value: Any) -> bool:
    """A true integer (Python or numpy), never a bool (``True`` is not rank 1)."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def ranks(value: Any) -> None | str | list[int]:
    """``ranks``: None, ``"all"``, an int, or an iterable of ints → None, ``"all"`` or a list."""
    if value is None:
        return None
    if isinstance(value, str):
        if value != "all":
            raise ConfigError(f"ranks must be an int, a list of ints or 'all', not {_got(value)}")
        return value
    if _is_int(value):
        return [int(value)]
    if isinstance(value, Iterable) and not isinstance(value, bytes | Mapping):
        items = list(value)
        bad = [r for r in items if not _is_int(r)]
        if bad:
            raise ConfigError(
                f"ranks must be ints; got {_got(bad[0])} in {_got(value)}"
            )
        return [int(r) for r in items]
    raise ConfigError(f"ranks must be an int, a list of ints or 'all', not {_got(value)}")


def _is_path(value: Any) -> bool:
    return isinstance(value, str | os.PathLike)


def trace_source(trace_dir: Any, trace_files: Any) -> None:
    """``trace_dir``: a path or URL; ``trace_files``: a path, a list of paths or ``{rank: path}``."""
    if trace_dir is None and trace_files is None:
        raise ConfigError("give trace_dir (a directory or URL) or trace_files")
    if trace_dir is not None and not _is_path(trace_dir):
        raise ConfigError(f"trace_dir must be a path or URL (str), not {_got(trace_dir)}")
    if trace_dir is not None and os.fspath(trace_dir) == "":
        raise ConfigError("trace_dir is an empty string")
    if trace_files is None or _is_path(trace_files):
        return
    if isinstance(trace_files, Mapping):
        for rank, path in trace_files.items():
            if not _is_int(rank) or rank < 0:
                raise ConfigError(
                    "trace_files as a mapping must be {rank: path} with ranks as ints from 0; "
                    f"got key {_got(rank)}"
                )
            if not _is_path(path):
                raise ConfigError(f"trace_files[{rank}] must be a path or URL, not {_got(path)}")
        return
    if isinstance(trace_files, Iterable) and not isinstance(trace_files, bytes):
        for path in trace_files:
            if not _is_path(path):
                raise ConfigError(f"trace_files must hold paths or URLs; got {_got(path)}")
        return
    raise ConfigError(
        f"trace_files must be a path, a list of paths or {{rank: path}}, not {_got(trace_files)}"
    )


def on_error_choice(value: Any) -> str:
    if value not in ON_ERROR_CHOICES:
        raise ConfigError(f"on_error must be one of {ON_ERROR_CHOICES}, not {_got(value)}")
    return value


def flag(name: str, value: Any) -> bool:
    """A True/False option (numpy booleans accepted); 0, 1, "yes" or None are refused."""
    if not isinstance(value, bool) and type(value).__name__ != "bool_":
        raise ConfigError(f"{name} must be True or False, not {_got(value)}")
    return bool(value)


def optional_flag(name: str, value: Any) -> bool | None:
    return None if value is None else flag(name, value)


def positive_int(name: str, value: Any, allow_none: bool = True) -> int | None:
    if value is None and allow_none:
        return None
    if not _is_int(value) or value < 1:
        raise ConfigError(f"{name} must be an int of at least 1, not {_got(value)}")
    return int(value)


def positive_number(name: str, value: Any, allow_none: bool = True) -> float | None:
    if value is None and allow_none:
        return None
    if (
        not isinstance(value, numbers.Real)
        or isinstance(value, bool)
        or not value > 0
        or value != value  # NaN
    ):
        raise ConfigError(f"{name} must be a positive number, not {_got(value)}")
    return float(value)


def mapping(name: str, value: Any) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ConfigError(f"{name} must be a dict, not {_got(value)}")
    return dict(value)


def optional_path(name: str, value: Any) -> None:
    if value is not None and not _is_path(value):
        raise ConfigError(f"{name} must be a path (str), not {_got(value)}")


def formats(value: Any, allowed: Iterable[str] = REPORT_FORMATS) -> tuple[str, ...]:
    """``"svg"``, ``"svg,png"`` or a list of those → a tuple of lower-case formats, each checked."""
    allowed = tuple(allowed)
    parts = [value] if isinstance(value, str) else value
    if not isinstance(parts, Iterable) or any(not isinstance(p, str) for p in parts):
        raise ConfigError(f"formats must be strings among {allowed}, not {_got(value)}")
    out = tuple(dict.fromkeys(f.strip().lower() for p in parts for f in p.split(",") if f.strip()))
    bad = [f for f in out if f not in allowed]
    if bad:
        raise ConfigError(f"unknown format(s) {', '.join(bad)}; use {', '.join(allowed)}")
    return out
