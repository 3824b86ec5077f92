"""``TraceAnalysis.hta``: HolisticTraceAnalysis's own ``TraceAnalysis`` over the same traces.

HTA 0.5.0's ``critical_path_analysis`` raises ``ValueError: Cannot specify both 'axis' and
'index'/'columns'`` under pandas 3 (a ``DataFrame.rename`` call pandas 3 rejects); under pandas 3
the bridge answers that one method with this package's native ``critical_path_analysis`` (HTA's
arguments, and a graph with HTA's methods), and says so in a warning. Every other attribute is
HTA's own.
"""

from __future__ import annotations

import warnings

from analysis.errors import TraceAnalysisError

INSTALL = "pip install 'trace-analysis[hta]' (or pip install holistictraceanalysis==0.5.0)"


def pandas_major() -> int:
    import pandas as pd

    return int(pd.__version__.split(".")[0])


def hta_class():
    """HTA's ``TraceAnalysis`` class. "Not installed" only when HTA itself is missing; any other
    import failure inside HTA (a dependency it lacks, a broken install) is raised as it is."""
    try:
        from hta.trace_analysis import TraceAnalysis
    except ModuleNotFoundError as exc:
        if exc.name in ("hta", "hta.trace_analysis"):
            raise TraceAnalysisError(f"HolisticTraceAnalysis is not installed: {INSTALL}") from exc
        raise
    return TraceAnalysis


class HTABridge:
    """HTA's ``TraceAnalysis`` (``bridge.<anything>`` is HTA's), with its critical path routed to
    ``native.critical_path_analysis`` where HTA's cannot run (pandas 3)."""

    def __init__(self, hta, native):
        self._hta = hta
        self._native = native

    def __getattr__(self, name):
        return getattr(self._hta, name)

    def __dir__(self):
        return sorted(set(dir(self._hta)) | {"critical_path_analysis"})

    def critical_path_analysis(self, rank: int, annotation: str, instance_id, *args, **kwargs):
        """HTA's ``critical_path_analysis(rank, annotation, instance_id)``; under pandas 3 (where
        HTA 0.5.0's raises) the native one, which takes the same arguments."""
        if pandas_major() < 3:
            return self._hta.critical_path_analysis(rank, annotation, instance_id, *args, **kwargs)
        warnings.warn(
            "HolisticTraceAnalysis 0.5.0's critical_path_analysis fails under pandas "
            f"{pandas_major()} (it needs pandas < 3); answered by trace-analysis's native "
            "TraceAnalysis.critical_path_analysis (same arguments, HTA-compatible graph)",
            stacklevel=2,
        )
        return self._native.critical_path_analysis(rank, annotation=annotation,
                                                   instance_id=instance_id)
