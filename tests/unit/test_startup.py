"""Start-up laziness: each entry point imports only what its path needs (issue #19).

Each case runs in a fresh interpreter and lists the heavy modules it imported; nothing is timed
here (benchmarks/run.py measures the seconds)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest
from paths import REPO_ROOT

HEAVY = ["plotly", "kaleido", "dask", "distributed", "jinja2", "pyarrow", "pyarrow.compute",
         "pandas", "numpy", "msgspec", "fsspec", "gcsfs", "tqdm", "torch", "hta"]


def imported_after(code: str) -> set[str]:
    probe = f"{code}\nimport json, sys\nprint(json.dumps([m for m in {HEAVY!r} if m in sys.modules]))"
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "PYTHONWARNINGS": "ignore"}
    done = subprocess.run([sys.executable, "-c", probe], env=env, cwd=REPO_ROOT,
                          capture_output=True, text=True, check=True)
    return set(json.loads(done.stdout.strip().splitlines()[-1]))


def cli(args: list[str]) -> str:
    return ("from analysis.cli import main\n"
            f"try:\n    main({args!r}, standalone_mode=False)\nexcept SystemExit:\n    pass")


@pytest.mark.parametrize("args", [["--help"], ["report", "--help"], ["summary", "--help"],
                                  ["cache", "--help"], ["memory", "--help"]])
def test_cli_help_imports_nothing_heavy(args):
    assert imported_after(cli(args)) == set()


def test_the_facade_imports_no_figures_reports_or_clusters():
    # pandas is needed to hold traces; it imports pyarrow.compute itself when pyarrow is installed
    imported = imported_after("from analysis import TraceAnalysis")
    assert "pandas" in imported
    assert not imported & {"plotly", "kaleido", "dask", "distributed", "jinja2", "fsspec", "gcsfs",
                           "tqdm", "torch", "hta"}


def test_the_package_itself_imports_nothing_heavy():
    assert imported_after("import analysis") == set()


def test_a_second_open_of_local_traces_needs_no_fsspec_tqdm_or_plotly(tmp_path):
    traces = shutil.copytree(REPO_ROOT / "sample_traces", tmp_path / "traces")
    open_ = (f"from analysis import TraceAnalysis\n"
             f"TraceAnalysis({str(traces)!r}, cache_dir={str(tmp_path / 'cache')!r})"
             ".get_temporal_breakdown(visualize=False)")
    imported_after(open_)  # the first open parses and fills the cache
    assert not imported_after(open_) & {"plotly", "kaleido", "dask", "jinja2", "fsspec", "gcsfs",
                                        "tqdm"}
