"""The loading progress bar: no warning and nothing on stderr in a notebook without ipywidgets."""

from __future__ import annotations

import importlib.util
import sys
import types
import warnings

from analysis.kineto import progress


def test_progress_bar_in_a_notebook_without_ipywidgets_is_text_on_stdout(monkeypatch, capsys):
    """tqdm.auto would raise a red TqdmWarning box there; ours falls back to a quiet text bar."""
    monkeypatch.setitem(sys.modules, "ipykernel.zmqshell", types.ModuleType("ipykernel.zmqshell"))
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec",
        lambda name, *a: None if name == "ipywidgets" else real_find_spec(name, *a),
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with progress.progress_bar(3, True) as bar:
            bar.update(3)
    out = capsys.readouterr()
    assert "loading traces" in out.out
    assert out.err == ""

