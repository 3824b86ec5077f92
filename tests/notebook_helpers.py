"""Running the notebooks under notebooks/ against sample_traces/, once per test session."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import jupytext
import nbformat
import pytest
from nbclient import NotebookClient

PLOTLY_MIME = "application/vnd.plotly.v1+json"
WIDGET_MIME = "application/vnd.jupyter.widget-view+json"


def set_parameters(nb, values: dict) -> None:
    """Replace the assignments of the cell tagged ``parameters`` (as papermill would inject them)."""
    cell = next(c for c in nb.cells if "parameters" in c.metadata.get("tags", []))
    lines = cell.source.splitlines()
    for name, value in values.items():
        matches = [i for i, line in enumerate(lines) if line.split("=")[0].strip() == name]
        if matches:
            lines[matches[0]] = f"{name} = {value!r}"
    cell.source = "\n".join(lines)


def browser() -> str | None:
    found = shutil.which("chromium") or os.environ.get("BROWSER_PATH")
    if not found and os.environ.get("CI"):
        pytest.fail("no chromium in CI: the Makefile's set-up must install it")
    return found


_EXECUTED: dict[str, tuple] = {}


def execute(path: Path, sample_traces_dir: Path, tmp_path_factory) -> tuple:
    """(executed notebook, its working directory), once per notebook per session."""
    if path.stem not in _EXECUTED:
        nb = jupytext.read(path)
        assert any("parameters" in c.metadata.get("tags", []) for c in nb.cells), "no parameters cell"
        work = tmp_path_factory.mktemp(f"nb-{path.stem}")
        # As a user runs them: from a folder beside sample_traces/, with the notebook's own
        # parameters (TRACE_DIR = "../sample_traces", REPORT_DIR = "report"), so that the outputs
        # (and the JupyterLab screenshot) show what a user sees. SVG export needs a browser.
        beside = work.parent / "sample_traces"
        if not beside.exists():
            beside.symlink_to(sample_traces_dir, target_is_directory=True)
        # The walkthrough's report as a page only: its SVG export (21 figures through kaleido,
        # about 10 s of CPU) is the write_report that tests/unit/reports/test_report.py and the
        # README's `report` command export in full; compare_runs exports its report's figures as
        # SVG from inside its kernel (test_notebooks.py checks they are written).
        if not browser() or path.stem == "walkthrough":
            set_parameters(nb, {"REPORT_FORMATS": ("html",)})
        # The walkthrough starts from an empty cache, which makes its first load slow enough
        # (> 1 s) to show the progress bar, as on a user's first open; the other notebooks use
        # the run's cache (tests/conftest.py), as a user's notebooks share theirs
        env = {"TRACE_ANALYSIS_CACHE": str(work / "cache")} if path.stem == "walkthrough" else {}
        # the kernel's temporary files go to a folder of the test's own, to check that the
        # notebook leaves none behind when its kernel stops (execute() stops it)
        scratch = work / "tmp"
        scratch.mkdir()
        env["TMPDIR"] = str(scratch)
        old = {k: os.environ.get(k) for k in env}
        os.environ.update(env)
        try:
            NotebookClient(nb, kernel_name="python3", timeout=300,
                           resources={"metadata": {"path": str(work)}}).execute()  # raises on error
        finally:
            for k, v in old.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
        left = sorted(p.name for p in scratch.iterdir())
        assert not left, f"{path.name} left temporary files behind: {left}"
        nbformat.write(nb, work / f"{path.stem}.ipynb")
        _EXECUTED[path.stem] = (nb, work)
    return _EXECUTED[path.stem]


def outputs(nb) -> list[tuple[int, dict]]:
    return [(i, o) for i, c in enumerate(nb.cells) if c.cell_type == "code"
            for o in c.get("outputs", [])]
