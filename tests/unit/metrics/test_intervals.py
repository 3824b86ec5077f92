"""Interval maths: merging (exact and HTA's) and the time-line sweep."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from analysis.metrics.intervals import hta_merge, merge, merge_intervals, time_by_state


def test_merge_unions_touching_and_overlapping_and_drops_empty():
    s, e = merge([0, 5, 3, 20, 30, 40], [4, 10, 6, 25, 30, 35])
    assert s.tolist() == [0, 20] and e.tolist() == [10, 25]


def test_hta_merge_keeps_an_inverted_interval_as_its_own_group():
    s, e = hta_merge([10, 0], [9, 5])  # [10, 9) is what HTA's rounding makes of a sub-µs kernel
    assert s.tolist() == [0, 10] and e.tolist() == [5, 9]
    assert merge_intervals([10, 0], [9, 5], "exact")[0].tolist() == [0]


def test_time_by_state_splits_the_time_line_by_who_is_running():
    comm = (np.array([0]), np.array([10]))
    comp = (np.array([5, 20]), np.array([15, 30]))
    assert time_by_state([comm, comp]) == {0: 5, 1: 5, 2: 15, 3: 5}
    assert time_by_state([]) == {}


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 1000), st.integers(0, 200), st.booleans()), max_size=30))
def test_sweep_agrees_with_a_unit_grid(rows):
    a = [(s, s + d) for s, d, in_a in rows if in_a]
    b = [(s, s + d) for s, d, in_a in rows if not in_a]
    sets = [merge([x for x, _ in part], [y for _, y in part]) for part in (a, b)]
    grid = np.zeros((2, 1200), dtype=bool)
    for k, part in enumerate((a, b)):
        for s, e in part:
            grid[k, s:e] = True
    got = time_by_state(sets)
    for state in (1, 2, 3):
        expected = int(((grid[0] * 1 + grid[1] * 2) == state).sum())
        assert got.get(state, 0) == expected
