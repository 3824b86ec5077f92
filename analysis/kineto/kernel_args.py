"""The ``kernel_args`` table: kernels' launch configuration and CUPTI's occupancy estimates, read
in the trace's own parse (one decode of the file; :mod:`analysis.kineto.columns` decodes these
args with the others) and kept with the parsed tables in the trace cache.

One row per kernel event (``cat`` ``kernel``/``Kernel``), with or without args, and per runtime /
Python event written under Kineto's 2021 category names (``"Runtime"``, ``"Python"``: tools that
read raw categories, such as the TensorBoard plugin, treat them apart from today's
``cuda_runtime`` / ``python_function``), indexed by the event's row label in
``RankTrace.events``. Columns (:data:`KERNEL_ARG_COLUMNS`): ``raw_cat`` (as written),
``blocks_per_sm``, ``warps_per_sm``, ``occupancy_pct`` (``est. achieved occupancy %``),
``registers_per_thread``, ``shared_memory`` (float64, NaN when absent), ``grid``, ``block``
(categorical text such as ``"[88497, 1, 1]"``, "" when absent), ``external_id_lower`` (the 2021
schema's lower-case ``"external id"`` of GPU and runtime events, -1 when absent).

The analyses read it as the extra kind ``kernel_args`` (:mod:`analysis.kineto.extras`).
"""

from __future__ import annotations

from operator import attrgetter
from typing import Any

import msgspec
import numpy as np
import pandas as pd

from analysis.kineto.ints import int_or_none

NAME = "kernel_args"
# The raw categories whose rows the table has (see the module docstring)
RAW_CATEGORIES = frozenset(("kernel", "Kernel", "Runtime", "Python"))
KERNEL_ARG_COLUMNS = {
    "raw_cat": "category",
    "blocks_per_sm": "float64",
    "warps_per_sm": "float64",
    "occupancy_pct": "float64",
    "grid": "category",
    "block": "category",
    "registers_per_thread": "float64",
    "shared_memory": "float64",
    "external_id_lower": "int64",
}
_PLAIN_NUMBERS = frozenset((int, float))
_PLAIN_OR_NONE = frozenset((int, float, type(None)))
_NULL = msgspec.Raw(b"null")


def number(value: Any, missing: float) -> float:
    """An int/float or numeric string as a float; ``missing`` for anything else."""
    if isinstance(value, bool):
        return missing
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return missing
    return missing


def _numbers(values: list) -> np.ndarray:
    """Args as float64: ints and floats as they are (NaN when absent), numeric strings parsed,
    anything else (bool, lists, text) NaN."""
    if set(map(type, values)) <= _PLAIN_OR_NONE:  # the usual case, converted in C
        return np.array(values, dtype=np.float64)
    return np.array([v if type(v) in _PLAIN_NUMBERS else number(v, np.nan) for v in values],
                    dtype=np.float64)


def _texts(raws: list[msgspec.Raw]) -> list[str]:
    """Raw JSON values as text: a string's value, anything else as Python prints it (lists:
    ``"[88497, 1, 1]"``), "" when absent; each distinct value decoded once."""
    literals = list(map(bytes, raws))
    memo: dict[bytes, str] = {}
    for text in dict.fromkeys(literals):
        if text == b"null":
            memo[text] = ""
            continue
        try:
            value = msgspec.json.decode(text)
        except msgspec.DecodeError:
            value = text.decode("utf-8", "replace")
        memo[text] = value if isinstance(value, str) else str(value)
    return list(map(memo.__getitem__, literals))


def chunk_columns(raw_cats: list[str], rows: list[int], args: list) -> dict:
    """The table's columns for one chunk: ``rows`` (positions among the chunk's kept events),
    their categories as written and their decoded args (``analysis.kineto.columns._Args``)."""
    if not rows:
        return {}

    def field(name: str) -> list:
        return list(map(attrgetter(name), args))

    lower = field("external_id_lower")
    if set(map(type, lower)) <= {type(None)}:  # today's traces: no lower-case "external id"
        lower_ids = np.full(len(lower), -1, dtype=np.int64)
    else:
        ids = [int_or_none(v) for v in lower]
        lower_ids = np.array([-1 if v is None else v for v in ids], dtype=np.int64)
    return {
        "row": np.array(rows, dtype=np.int64),
        "raw_cat": raw_cats,
        "blocks_per_sm": _numbers(field("blocks_per_sm")),
        "warps_per_sm": _numbers(field("warps_per_sm")),
        "occupancy_pct": _numbers(field("occupancy")),
        "grid": _texts(field("grid")),
        "block": _texts(field("block")),
        "registers_per_thread": _numbers(field("registers")),
        "shared_memory": _numbers(field("shared_memory")),
        "external_id_lower": lower_ids,
    }


def table(parts: list[dict], offsets: list[int]) -> pd.DataFrame:
    """The chunks' columns (``offsets``: each chunk's first row label) as the table."""
    present = [(p, o) for p, o in zip(parts, offsets, strict=True) if p]
    columns: dict[str, Any] = {}
    for name in KERNEL_ARG_COLUMNS:
        values = [p[name] for p, _ in present]
        if KERNEL_ARG_COLUMNS[name] == "category":
            columns[name] = pd.Categorical([v for part in values for v in part])
        else:
            columns[name] = np.concatenate(values) if values else np.empty(0)
    rows = (np.concatenate([p["row"] + o for p, o in present]) if present
            else np.empty(0, dtype=np.int64))
    return pd.DataFrame(columns, index=pd.Index(rows, dtype="int64")).astype(KERNEL_ARG_COLUMNS)
