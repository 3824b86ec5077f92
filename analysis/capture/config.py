"""``ProfilerConfig``: everything needed to set up ``torch.profiler`` for a training loop, as flat fields.

A config is built in code (``ProfilerConfig(wait=1, warmup=1, active=3, repeat=2, skip_first=10)``)
or from the dict / YAML that training configuration files write, where every value may be a string
(``'True'``, ``'0'``) and the keys are often the historical ones:

- ``should_enable_profiler`` → ``enabled``
- ``profiler_log_dir`` → ``log_dir``
- ``profiler_args`` → a nested mapping of any of the fields below (schedule, activities, flags),
  where the schedule may be nested once more under ``schedule``

Values are coerced and checked once, here; an invalid one raises ``ConfigError`` naming the key as
the user wrote it. This module never imports torch, so configs and schedules can be inspected on a
laptop without it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from analysis.errors import ConfigError

ACTIVITIES = ("cpu", "cuda")

# Keys that configuration files use for the same things (values map onto field names).
KEY_ALIASES = {
    "should_enable_profiler": "enabled",
    "profiler_log_dir": "log_dir",
    "use_gzip": "gzip",
}
# Mappings whose keys are themselves config keys (`profiler_args: {schedule: {wait: 1}}`).
NESTED_KEYS = ("profiler_args", "schedule")

_TRUE = {"true", "1", "yes", "y", "on"}
_FALSE = {"false", "0", "no", "n", "off", ""}


@dataclass(frozen=True)
class ProfilerConfig:
    """How to profile a training loop with ``torch.profiler`` and where the traces go.

    The schedule fields have ``torch.profiler.schedule``'s meaning: the first ``skip_first`` steps
    are ignored, then each cycle waits ``wait`` steps, warms up for ``warmup`` steps and records
    ``active`` steps, ``repeat`` times (0 = until the loop ends). ``skip_first_wait`` drops the
    ``wait`` of the first cycle. One trace per cycle and rank is written to ``log_dir`` (a local
    path or any fsspec URL such as ``gs://bucket/run``). ``activities`` is a tuple of ``"cpu"`` /
    ``"cuda"``; ``None`` means CPU, plus CUDA when available. ``top_operators`` > 0 also writes a
    text table of that many top operators next to each trace. ``storage_options`` go to fsspec
    for the upload.
    """

    enabled: bool = True
    log_dir: str = "traces"
    skip_first: int = 0
    wait: int = 0
    warmup: int = 1
    active: int = 3
    repeat: int = 1
    skip_first_wait: bool = False
    activities: tuple[str, ...] | None = None
    record_shapes: bool = False
    profile_memory: bool = False
    with_stack: bool = False
    with_flops: bool = False
    with_modules: bool = False
    gzip: bool = True
    top_operators: int = 0
    storage_options: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            value = _coerce(f.name, getattr(self, f.name), f.name)
            object.__setattr__(self, f.name, value)

    @classmethod
    def from_dict(cls, values: Mapping[str, Any]) -> ProfilerConfig:
        """A config from a mapping as configuration files write it (aliases, nested
        ``profiler_args``, string values). Unknown keys raise ``ConfigError``."""
        if not isinstance(values, Mapping):
            raise ConfigError(f"profiler config must be a mapping, not {type(values).__name__}")
        kwargs: dict[str, Any] = {}
        _collect(values, kwargs, prefix="")
        return cls(**kwargs)

    @classmethod
    def from_yaml(cls, path: str | Path, section: str | None = None) -> ProfilerConfig:
        """A config from a YAML file (local path or fsspec URL); ``section`` picks a top-level key."""
        import fsspec
        import yaml

        try:
            with fsspec.open(str(path), "r") as f:
                data = yaml.safe_load(f)
        except (OSError, yaml.YAMLError) as e:
            raise ConfigError(f"{path}: cannot read the profiler config: {e}") from e
        if section is not None:
            if not isinstance(data, Mapping) or section not in data:
                raise ConfigError(f"{path}: no section {section!r} in the YAML file")
            data = data[section]
        try:
            return cls.from_dict(data or {})
        except ConfigError as e:
            raise ConfigError(f"{path}: {e}") from None

    @property
    def is_remote(self) -> bool:
        """True when ``log_dir`` is a URL of a non-local filesystem (traces are uploaded)."""
        protocol, _, _ = self.log_dir.partition("://")
        return "://" in self.log_dir and protocol not in ("file", "local")

    @property
    def cycle_length(self) -> int:
        return self.wait + self.warmup + self.active


_FIELDS = {f.name: f for f in dataclasses.fields(ProfilerConfig)}


def _collect(values: Mapping[str, Any], out: dict[str, Any], prefix: str) -> None:
    """Flatten aliases and nested ``profiler_args`` into field names, coercing each value under the
    key the user wrote (so the error names it)."""
    for key, value in values.items():
        label = f"{prefix}{key}"
        if key in NESTED_KEYS:
            if value is None:
                continue
            if not isinstance(value, Mapping):
                raise ConfigError(f"{label}: must be a mapping of profiler options, not {value!r}")
            _collect(value, out, prefix=f"{label}.")
            continue
        name = KEY_ALIASES.get(key, key)
        if name not in _FIELDS:
            known = sorted(set(_FIELDS) | set(KEY_ALIASES) | set(NESTED_KEYS))
            raise ConfigError(f"{label}: unknown profiler config key; known keys: {', '.join(known)}")
        if name in out:
            raise ConfigError(f"{label}: sets {name!r}, which is already set by another key")
        out[name] = _coerce(name, value, label)


def _coerce(name: str, value: Any, label: str) -> Any:
    """The value of field ``name`` in its proper type, or ``ConfigError`` naming ``label``."""
    if name in ("skip_first", "wait", "warmup", "active", "repeat", "top_operators"):
        number = _to_int(value, label)
        minimum = 1 if name == "active" else 0
        if number < minimum:
            raise ConfigError(f"{label}: must be >= {minimum}, got {value!r}")
        return number
    if name == "log_dir":
        if isinstance(value, Path):
            value = str(value)
        if not isinstance(value, str) or not value.strip():
            raise ConfigError(f"{label}: must be a non-empty path or URL, got {value!r}")
        return value.strip()
    if name == "activities":
        return _to_activities(value, label)
    if name == "storage_options":
        if value is None:
            return {}
        if not isinstance(value, Mapping):
            raise ConfigError(f"{label}: must be a mapping of fsspec options, got {value!r}")
        return dict(value)
    return _to_bool(value, label)


def _to_bool(value: Any, label: str) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in _TRUE | _FALSE:
        return value.strip().lower() in _TRUE
    raise ConfigError(f"{label}: expected a boolean (true/false, 1/0), got {value!r}")


def _to_int(value: Any, label: str) -> int:
    if isinstance(value, bool):  # bool is an int subclass, but `wait: true` is a mistake
        raise ConfigError(f"{label}: expected a whole number, got {value!r}")
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str):
        try:
            return int(value.strip())
        except ValueError:
            pass
    raise ConfigError(f"{label}: expected a whole number, got {value!r}")


def _to_activities(value: Any, label: str) -> tuple[str, ...] | None:
    if value is None or (isinstance(value, str) and value.strip().lower() in ("", "auto", "none")):
        return None
    items = value.split(",") if isinstance(value, str) else value
    try:
        # accept torch's enum names as written in configs: "ProfilerActivity.CUDA", "CUDA"
        names = [str(a).strip().lower().rpartition(".")[2] for a in items]
    except TypeError:
        raise ConfigError(f"{label}: expected a list of {ACTIVITIES}, got {value!r}") from None
    bad = [n for n in names if n not in ACTIVITIES]
    if bad or not names:
        raise ConfigError(f"{label}: activities must be among {ACTIVITIES}, got {value!r}")
    return tuple(dict.fromkeys(names))
