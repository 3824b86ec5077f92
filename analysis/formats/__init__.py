"""Other profilers' files, read into the same model as Kineto traces (``analysis.kineto.model``).

- ``nsys.py``: Nsight Systems SQLite exports (``nsys export --type sqlite``), with ``sqlite3``;
- ``xplane.py``: JAX/XLA XPlane protobufs (``*.xplane.pb``), with a small wire-format decoder;
- ``rocprof.py``: rocprofv3 JSON (``--output-format json``), with msgspec;
- ``detect.py``: which of these (or a Kineto trace) a file is, from its first bytes;
- ``frame.py``: the columns every reader fills, turned into a ``RankTrace``;
- ``readers.py``: a file's bytes to its ranks, by format (imported only by the loader).

A reader turns one file's bytes into a list of ``RankTrace`` (one file may hold several GPUs and
processes; each reader's docstring gives its rule for ranks). ``meta.source_format`` names the
format; what a format does not carry (PyTorch operators, their shapes, collective args) is listed
in :data:`LACKS`, and analyses that need it raise ``FormatNotSupportedError``.

This layer knows no analysis, figure or report (an import-linter contract).
"""

from __future__ import annotations

from analysis.formats.detect import FORMATS, detect  # noqa: F401  (re-exported)

# What each format's files never carry, in the words of ``Analysis.needs``: "shapes" (recorded
# operator input shapes). Two needs depend on how a file was recorded and are checked on the rank
# itself: "operators" (PyTorch CPU operators, ``cpu_op`` rows: an nsys report has them when
# recorded under ``emit_nvtx()``) and "launches" (launch calls whose correlation id is a GPU
# event's: a rocprofv3 kernel trace has none).
# "kineto_args": the Kineto event args the TensorBoard plugin's views read from the trace file
# (kernel launch args such as ``blocks per SM``, ``[memory]`` events), decoded on demand from JSON.
LACKS: dict[str, frozenset[str]] = {
    "kineto": frozenset(),
    "nsys": frozenset({"shapes", "kineto_args"}),
    "xplane": frozenset({"shapes", "kineto_args"}),
    "rocprof": frozenset({"shapes", "kineto_args"}),
}
# The needs in words, for error messages.
NEEDS: dict[str, str] = {
    "operators": "PyTorch CPU operators (cpu_op events; for nsys, record under emit_nvtx())",
    "shapes": "recorded operator input shapes",
    "launches": "launch calls linked to their GPU events (record the HIP/CUDA API too)",
    "kineto_args": "Kineto's kernel and memory event args (a PyTorch profiler trace)",
}


def lacks(source_format: str, need: str) -> bool:
    """True when files of ``source_format`` do not carry ``need`` (see :data:`LACKS`)."""
    return need in LACKS.get(source_format, frozenset())


def missing(rt, needs) -> list[str]:
    """The ``needs`` (``Analysis.needs``) that rank ``rt`` of another profiler's file lacks, in
    words; always empty for a Kineto trace."""
    source_format = rt.meta.source_format
    if source_format == "kineto":
        return []
    out = [NEEDS[n] for n in needs if lacks(source_format, n)]
    if "operators" in needs and not rt.events["cat"].isin(("cpu_op",)).any():
        out.append(NEEDS["operators"])
    if "launches" in needs and not _has_launches(rt):
        out.append(NEEDS["launches"])
    return out


def _has_launches(rt) -> bool:
    import numpy as np

    from analysis.kineto.events import gpu_mask, runtime_mask

    ev = rt.events
    corr = ev["correlation"].to_numpy()
    runtime = runtime_mask(ev) & (corr >= 0)
    return bool(runtime.any()) and bool(np.isin(corr[gpu_mask(ev)], corr[runtime]).any())
