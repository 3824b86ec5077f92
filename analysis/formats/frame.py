"""The columns a reader fills → a ``RankTrace`` with exactly the Kineto model's columns and dtypes.

Readers give plain lists/arrays per column (times already in integer nanoseconds); columns they
do not have are -1 (ids) as in a Kineto trace without those args. Rows are sorted by start time
(stable); a negative duration becomes 0, counted in ``meta.anomalies``. ``bytes`` (memcpy/memset sizes, -1 elsewhere) becomes the ``memory_ops`` extra table
(``analysis.kineto.extras``), indexed by row label like the Kineto one.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from analysis.kineto.model import EVENT_COLUMNS, RankMeta, RankTrace

MEMORY_CATS = ("gpu_memcpy", "gpu_memset")


def rank_trace(meta: RankMeta, columns: dict) -> RankTrace:
    """``columns``: ``ts``, ``dur``, ``cat``, ``name`` and any other ``EVENT_COLUMNS`` (plus
    ``bytes``), each a sequence of one length."""
    n = len(columns["ts"])
    ts = np.asarray(columns["ts"], dtype=np.int64)
    order = np.argsort(ts, kind="stable")
    data = {}
    for name, dtype in EVENT_COLUMNS.items():
        values = columns.get(name)
        if dtype == "category":
            values = np.asarray(values if values is not None else [""] * n, dtype=object)[order]
            data[name] = pd.Categorical(values)
        elif values is None:
            data[name] = np.full(n, -1, dtype=np.int64)
        else:
            data[name] = np.asarray(values, dtype=np.int64)[order]
    negative = data["dur"] < 0
    if negative.any():  # as the Kineto parser does: set to 0, counted by name, reported
        names = pd.Series(data["name"][negative]).astype(str).value_counts()
        meta.negative_durations = {str(k): int(v) for k, v in names.items()}
        meta.anomalies.append(
            f"{int(negative.sum())} event(s) have a negative duration (end before start); set to 0")
        data["dur"] = np.where(negative, 0, data["dur"])
    events = pd.DataFrame(data)
    nbytes = np.asarray(columns.get("bytes", np.full(n, -1)), dtype=np.int64)[order]
    memory = events["cat"].isin(MEMORY_CATS).to_numpy()
    rows = np.flatnonzero(memory)
    ops = pd.DataFrame(
        {"bytes": nbytes[rows], "bandwidth_gbps": np.full(len(rows), np.nan)},
        index=pd.Index(rows, dtype="int64"),
    )
    trace = RankTrace(meta=meta, events=events)
    trace.extras["memory_ops"] = ops
    return trace
