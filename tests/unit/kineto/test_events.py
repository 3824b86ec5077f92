"""``name_mask``: a string test on event names, run once per distinct name, gives the rows that
converting the whole column to strings would."""

import numpy as np
import pandas as pd
import pytest

from analysis.kineto.events import name_mask

NAMES = ["cudaGraphLaunch", "aten::mm", None, "DataLoader#next", "cudaGraphLaunch", "hipGraphLaunch"]


@pytest.mark.parametrize("dtype", ["category", object])
@pytest.mark.parametrize("test", [
    lambda s: s.str.endswith("GraphLaunch"),
    lambda s: s.str.contains("DataLoader", regex=False),
    lambda s: s.str.startswith("aten"),
])
def test_name_mask_matches_the_whole_column_converted(dtype, test):
    events = pd.DataFrame({"name": pd.Series(NAMES, dtype=dtype)})
    expected = test(events["name"].astype(str)).to_numpy(dtype=bool)
    got = name_mask(events, test)
    assert got.dtype == bool
    np.testing.assert_array_equal(got, expected)
    assert got.any() and not got.all()


def test_name_mask_of_no_events_and_of_missing_names_only():
    test = lambda s: s.str.endswith("x")  # noqa: E731
    assert name_mask(pd.DataFrame({"name": pd.Series([], dtype="category")}), test).shape == (0,)
    missing = pd.DataFrame({"name": pd.Series([None, None], dtype="category")})
    np.testing.assert_array_equal(name_mask(missing, test), [False, False])
