"""Arguments checked at the door (analysis/arguments.py)."""

from __future__ import annotations

import numpy as np
import pytest

from analysis import arguments
from analysis.errors import ConfigError


@pytest.mark.parametrize(
    ("given", "expected"),
    [(None, None), ("all", "all"), (3, [3]), (np.int64(2), [2]), ([0, 2], [0, 2]), ((1,), [1]),
     (range(2), [0, 1]), (np.array([4, 5]), [4, 5])],
)
def test_ranks_accepted(given, expected):
    assert arguments.ranks(given) == expected


@pytest.mark.parametrize("bad", [3.5, True, False, ["a"], [True], "first", "0", {0: 1}, b"0", [1.0]])
def test_ranks_refused(bad):
    with pytest.raises(ConfigError, match="ranks must"):
        arguments.ranks(bad)


@pytest.mark.parametrize(
    ("trace_dir", "trace_files", "words"),
    [(5, None, "trace_dir must be a path"), ("", None, "empty string"),
     (None, None, "give trace_dir"), (None, {"a": "x"}, "got key str 'a'"),
     (None, {True: "x"}, "got key bool True"), (None, {0: 5}, r"trace_files\[0\] must be a path"),
     (None, [5], "must hold paths"), (None, 3.0, "trace_files must be a path")],
)
def test_trace_source_refused(trace_dir, trace_files, words):
    with pytest.raises(ConfigError, match=words):
        arguments.trace_source(trace_dir, trace_files)


def test_trace_source_accepted(tmp_path):
    arguments.trace_source(tmp_path, None)
    arguments.trace_source(None, {0: "a.json", np.int64(1): tmp_path})
    arguments.trace_source("gs://b/p", ["a.json", tmp_path])


def test_formats():
    assert arguments.formats("SVG,png") == ("svg", "png")
    assert arguments.formats(["html", "svg", "html"]) == ("html", "svg")
    with pytest.raises(ConfigError, match="unknown format"):
        arguments.formats("jpg")
    with pytest.raises(ConfigError):
        arguments.formats(5)
