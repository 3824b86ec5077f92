"""HolisticTraceAnalysis 0.5.0, the test oracle: one parsed HTA instance per trace directory per run.

HTA parses in its constructor (seconds for the bigger traces), so parity tests share instances.
Each trace file is copied alone into a temporary directory first, because HTA treats every JSON in a
directory as a trace.
"""

from __future__ import annotations

import logging
import shutil
import tempfile
import warnings
from functools import cache
from pathlib import Path

import pytest

_TMP = Path(tempfile.mkdtemp(prefix="hta-oracle-"))


def trace_files_of(trace_dir: Path) -> list[Path]:
    """The Kineto trace files HTA should read in a directory (execution traces left out)."""
    return sorted(
        p
        for p in trace_dir.iterdir()
        if p.is_file() and p.name.endswith((".json", ".json.gz")) and "_et." not in p.name
    )


@cache
def hta_analysis(trace_dir: str, include_last_profiler_step: bool = False):
    """HTA's TraceAnalysis over the trace files of ``trace_dir`` (cached for the session)."""
    hta_ta = pytest.importorskip("hta.trace_analysis")
    logging.getLogger("hta").setLevel(logging.ERROR)
    src = Path(trace_dir)
    dst = _TMP / f"{src.name}-{abs(hash(str(src)))}"
    if not dst.exists():
        dst.mkdir(parents=True)
        for f in trace_files_of(src):
            shutil.copy(f, dst / f.name)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return hta_ta.TraceAnalysis(
            trace_dir=str(dst), include_last_profiler_step=include_last_profiler_step
        )
