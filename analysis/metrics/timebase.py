"""Event start/end times in the model's integer nanoseconds, exact or rounded the way HTA rounds.

The model keeps timestamps exactly as written (µs with up to three decimals → integer ns).
HolisticTraceAnalysis 0.5.0 reads them with ``json.loads`` as float64 µs and, when the ``ts``
column is float, rounds every event to whole µs: ``ts = ceil(ts)``, ``end = floor(ts + dur)``
(its workaround for pytorch/pytorch#122425). Absolute epoch µs (~1.7e15) have a float64 spacing of
0.25 µs, so the float is not the written value; ``hta_bounds_ns`` reproduces the float arithmetic
bit for bit so that the ``"hta"`` preset matches HTA exactly.
"""

from __future__ import annotations

from typing import Literal

import numpy as np

Rounding = Literal["exact", "hta"]


def _float_us(ts_ns: np.ndarray) -> np.ndarray:
    """float64 nearest to ``ts_ns / 1000`` (what ``float("<µs text>")`` returns), round-half-even."""
    ts_ns = np.asarray(ts_ns, dtype=np.int64)
    # Below 2**53 ns the integer is exact in float64 and IEEE division rounds correctly.
    direct = ts_ns / 1000.0
    us_int = np.floor_divide(ts_ns, 1000)
    frac = ts_ns - us_int * 1000
    base = us_int.astype(np.float64)  # exact: |µs| < 2**53
    ulp = np.maximum(np.spacing(np.abs(base)), 2.0**-30)
    # number of float spacings in the fraction, rounded half to even like strtod
    steps = np.round(frac / (1000.0 * ulp))
    return np.where(np.abs(ts_ns) < 2**53, direct, base + steps * ulp)


def hta_bounds_ns(ts_ns: np.ndarray, dur_ns: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(start, end) in ns after HTA's rounding: ceil(float ts) and floor(float ts + float dur)."""
    ts_f = _float_us(np.asarray(ts_ns, dtype=np.int64))
    dur_f = np.asarray(dur_ns, dtype=np.int64) / 1000.0
    start = np.ceil(ts_f).astype(np.int64) * 1000
    end = np.floor(ts_f + dur_f).astype(np.int64) * 1000
    return start, end


def event_bounds_ns(
    ts_ns, dur_ns, rounding: Rounding = "exact", float_timestamps: bool = True
) -> tuple[np.ndarray, np.ndarray]:
    """(start, end) of events in integer ns.

    ``rounding="exact"``: as written. ``rounding="hta"``: HTA 0.5.0's whole-µs rounding, applied
    only when the file's timestamps are floats (``RankMeta.float_timestamps``), as HTA does.
    """
    ts = np.asarray(ts_ns, dtype=np.int64)
    dur = np.asarray(dur_ns, dtype=np.int64)
    if rounding == "hta" and float_timestamps:
        return hta_bounds_ns(ts, dur)
    if rounding not in ("exact", "hta"):
        raise ValueError(f"rounding must be 'exact' or 'hta', not {rounding!r}")
    return ts, ts + dur


def ns_to_us(values):
    """ns → µs (float); analyses report µs as HTA does."""
    return np.asarray(values) / 1000.0
