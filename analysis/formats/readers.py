"""A file of another profiler, by format, to its ranks; and the extras its reader fills.

Apart from the package's ``__init__`` so that what only asks whether a rank lacks something
(the registry, through ``analysis.formats.missing``) does not import the readers."""

from __future__ import annotations


def parse_foreign(data: bytes, source: str, source_format: str) -> list:
    """The ranks of one file of ``source_format`` ("nsys", "xplane" or "rocprof")."""
    if source_format == "nsys":
        from analysis.formats.nsys import parse_nsys

        return parse_nsys(data, source)
    if source_format == "xplane":
        from analysis.formats.xplane import parse_xplane

        return parse_xplane(data, source)
    from analysis.formats.rocprof import parse_rocprof

    return parse_rocprof(data, source)


def foreign_extra(rt, kind, data: bytes):
    """The ``kind`` extra table (``analysis.kineto.extras.ExtraKind``) of a rank read from another
    profiler's file ``data``: the reader fills ``memory_ops``; other kinds are empty here."""
    ranks = parse_foreign(data, rt.meta.source, rt.meta.source_format)
    part = int(rt.meta.other.get("part", 0))
    if part < len(ranks) and kind.name in ranks[part].extras:
        return ranks[part].extras[kind.name]
    import numpy as np

    return kind.build(np.empty(0, dtype=np.int64), [])
