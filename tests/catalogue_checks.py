"""Every registered analysis with the options tests run it with, and a deep equality of results:
what the contract test (tests/unit/test_contract.py) and the engine tests share."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest

from analysis import analyses as catalogue
from analysis.errors import AnalysisFailedError, TraceAnalysisError

# Besides the options the report runs each analysis with (``report_options``): every operator,
# not the report's top 20.
OPTIONS = {"operator_summary": {"top": None}}


def every_analysis() -> dict[str, dict]:
    """``{name: options}`` for every analysis of the catalogue (none left out by hand)."""
    return {name: {**spec.report_options, **OPTIONS.get(name, {})}
            for name, spec in catalogue.analyses().items()}


def assert_no_bug(value, what: str) -> None:
    """``value`` (a result, an error returned as a result, or None) is a result or the project's
    own error, never a foreign exception nor an analysis that failed on a rank
    (``AnalysisFailedError``, whose original traceback the failure shows)."""
    if isinstance(value, AnalysisFailedError):
        pytest.fail(f"{what}: {value}\n{value.traceback_text}")
    assert value is None or not isinstance(value, Exception) or isinstance(
        value, TraceAnalysisError), f"{what}: foreign {type(value).__name__}: {value}"


def assert_same(a, b, where: str = "") -> None:
    """Equal values, dtypes, index and order, through frames, arrays, containers, objects and
    exceptions (same type and message)."""
    assert type(a) is type(b), (where, type(a), type(b))
    if isinstance(a, pd.DataFrame):
        pd.testing.assert_frame_equal(a, b, check_exact=True, obj=where or "DataFrame")
    elif isinstance(a, pd.Series):
        pd.testing.assert_series_equal(a, b, check_exact=True, obj=where or "Series")
    elif isinstance(a, np.ndarray):
        np.testing.assert_array_equal(a, b, err_msg=where)
    elif isinstance(a, dict):
        assert list(a) == list(b), where
        for k in a:
            assert_same(a[k], b[k], f"{where}[{k!r}]")
    elif isinstance(a, (tuple, list)):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            assert_same(x, y, f"{where}[{i}]")
    elif isinstance(a, Exception):
        assert str(a) == str(b), where
    elif dataclasses.is_dataclass(a) or hasattr(a, "__dict__"):
        assert_same(vars(a), vars(b), where)
    elif isinstance(a, float) and np.isnan(a):
        assert np.isnan(b), where
    else:
        assert a == b, where
