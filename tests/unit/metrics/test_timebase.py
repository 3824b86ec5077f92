"""HTA's whole-µs rounding must be reproduced bit for bit from exact nanosecond timestamps."""

import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from analysis.metrics.timebase import _float_us, event_bounds_ns, hta_bounds_ns


def _text(ns: int) -> str:
    sign = "-" if ns < 0 else ""
    ns = abs(ns)
    return f"{sign}{ns // 1000}.{ns % 1000:03d}"


@settings(max_examples=500, deadline=None)
@given(st.integers(min_value=0, max_value=2**62))
def test_float_us_equals_parsing_the_written_text(ns):
    assert _float_us(np.array([ns]))[0] == float(_text(ns))


@settings(max_examples=300, deadline=None)
@given(st.integers(min_value=1_600_000_000_000_000_000, max_value=1_800_000_000_000_000_000),
       st.integers(min_value=0, max_value=10_000_000))
def test_hta_bounds_match_python_float_arithmetic(ts, dur):
    start, end = hta_bounds_ns(np.array([ts]), np.array([dur]))
    ts_f, dur_f = float(_text(ts)), float(_text(dur))
    assert start[0] == math.ceil(ts_f) * 1000
    assert end[0] == math.floor(ts_f + dur_f) * 1000


def test_ties_round_half_to_even():
    # 0.125 µs is half the float spacing (0.25) at epoch µs: strtod rounds to the even neighbour.
    ts = np.array([1712195495519689125, 1712195495519689375])
    assert list(_float_us(ts)) == [float("1712195495519689.125"), float("1712195495519689.375")]


def test_exact_rounding_keeps_ns_and_hta_rounding_only_applies_to_float_traces():
    ts, dur = np.array([1_712_195_495_519_689_047]), np.array([3_500])
    s, e = event_bounds_ns(ts, dur, "exact")
    assert (s[0], e[0]) == (ts[0], ts[0] + 3_500)
    s, e = event_bounds_ns(ts, dur, "hta", float_timestamps=False)
    assert (s[0], e[0]) == (ts[0], ts[0] + 3_500)
    s, e = event_bounds_ns(ts, dur, "hta", float_timestamps=True)
    assert s[0] % 1000 == 0 and e[0] % 1000 == 0
