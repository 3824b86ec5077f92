"""GPU memory reports from the files of torch's memory tools, as memray's reporters: a function
reads the file and returns the report (its numbers, figures and tables), another writes it.

- :func:`memory_report`: a CUDA memory snapshot (``torch.cuda.memory._dump_snapshot`` pickle) →
  :class:`SnapshotReport` (the peak, what held it, out-of-memory events, segments), or a memory
  timeline file (``export_memory_timeline``: ``.json``, ``.json.gz``, ``.raw.gz``) →
  :class:`TimelineReport` (bytes per category over time, the peak);
- :func:`write_memory_report`: its figures (``export_figures``) and tables (CSV) into a folder;
  a file that cannot be written raises ``ExportError`` naming it.

``trace-analysis memory`` parses its arguments and calls these two. The numbers come from
:mod:`analysis.memory`, the figures from :mod:`analysis.figures.memory`.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from analysis.errors import ConfigError

# What export_memory_timeline writes (the reports tell the files apart by content, not by these).
TIMELINE_SUFFIXES = (".json", ".json.gz", ".raw.gz")
MIB = 2**20


@dataclass
class SnapshotReport:
    """A memory snapshot's report: one device's replay and what it says (bytes, µs)."""

    source: str
    snapshot: Mapping[str, Any]  # the snapshot as loaded (analysis.memory.load_snapshot)
    replay: Any  # analysis.memory.MemoryReplay: device, timeline, allocations
    top: int  # allocation groups listed
    peak: pd.DataFrame  # one row: analysis.memory.memory_peak
    at_peak: pd.DataFrame  # the top allocation groups alive at the peak
    ooms: pd.DataFrame  # out-of-memory events
    devices: pd.DataFrame | None = None  # analysis.memory.device_overview: every device's totals
    pending: tuple[int, int] = (0, 0)  # analysis.memory.pending_free at the snapshot

    @property
    def device(self) -> int:
        return self.replay.device

    def lines(self) -> list[str]:
        """The summary as text lines (what the command prints)."""
        row = self.peak.iloc[0]
        events = int(row["events"])
        out = [
            f"{self.source} (device {self.device}, {events:,} event{'s' * (events != 1)} in the "
            "buffer)",
            f"peak allocated: {row['peak_allocated_mib']:,.1f} MiB at {_when(row, 'allocated')}",
            f"peak reserved:  {row['peak_reserved_mib']:,.1f} MiB at {_when(row, 'reserved')}",
            f"at the snapshot: {row['allocated_at_snapshot_bytes'] / MIB:,.1f} MiB allocated, "
            f"{row['reserved_at_snapshot_bytes'] / MIB:,.1f} MiB reserved",
        ]
        blocks, pending = self.pending
        if blocks:
            out.append(
                f"  of which {pending / MIB:,.1f} MiB in {blocks} block{'s' * (blocks != 1)} freed "
                "but still used by a stream (record_stream): torch.cuda.memory_allocated() no "
                "longer counts them")
        if len(self.ooms):
            out.append(f"out-of-memory events: {len(self.ooms)} (first asked for "
                       f"{self.ooms['requested_bytes'].iat[0] / MIB:,.1f} MiB)")
        others = self.devices[self.devices["device"] != self.device] if self.devices is not None \
            else pd.DataFrame()
        if len(others):
            said = [f"{int(r.device)} ({r.reserved_bytes / MIB:,.1f} MiB reserved"
                    + (f", {int(r.ooms)} out-of-memory event{'s' * (r.ooms != 1)}" if r.ooms else "")
                    + ")" for r in others.itertuples(index=False)]
            out.append(f"other devices in the snapshot: {', '.join(said)}; --device N reports one")
        if self.at_peak.empty:
            out.append("top allocations at the peak: none (nothing was allocated then)")
            return out
        out.append("top allocations at the peak:")
        top = self.at_peak[["frame", "allocations", "mib", "share_pct"]].round(2)
        out.append(top.to_string(index=False))
        return out

    def figures(self) -> dict[str, Any]:
        from analysis.figures.memory import snapshot_timeline_figure, top_allocations_table
        from analysis.memory import allocated_by_frame

        by_frame = allocated_by_frame(self.replay, top=self.top)
        return {
            "memory_timeline": snapshot_timeline_figure(by_frame, self.replay.timeline, self.peak,
                                                        self.at_peak),
            "memory_top_allocations": top_allocations_table(self.at_peak),
        }

    def tables(self) -> dict[str, pd.DataFrame]:
        """Every table by file stem; ``memory_segments``: the reserved segments and their
        fragmentation."""
        from analysis.memory import segment_fragmentation

        return {
            "memory_peak": self.peak, "memory_top_allocations": self.at_peak,
            "memory_timeline": self.replay.timeline, "memory_allocations": self.replay.allocations,
            "memory_ooms": self.ooms,
            "memory_segments": segment_fragmentation(self.snapshot, self.device),
        }


@dataclass
class TimelineReport:
    """An ``export_memory_timeline`` file's report: bytes per category over time, and the peak."""

    source: str
    timeline: pd.DataFrame
    peak: pd.DataFrame  # analysis.memory.memory_timeline_peak (empty for an empty timeline)

    def lines(self) -> list[str]:
        out = [f"{self.source}: {len(self.timeline):,} moments"]
        if len(self.peak):
            p = self.peak.iloc[0]
            cats = ", ".join(f"{c} {p[c] / MIB:,.1f}" for c in self.peak.columns[1:-1] if p[c])
            out.append(f"peak: {p['total_bytes'] / MIB:,.1f} MiB at time_ns {int(p['time_ns'])} "
                       f"({cats} MiB)")
        return out

    def figures(self) -> dict[str, Any]:
        from analysis.figures.memory import memory_timeline_figure

        return {"memory_categories": memory_timeline_figure(self.timeline)}

    def tables(self) -> dict[str, pd.DataFrame]:
        return {"memory_categories": self.timeline}


def snapshot_report(path: str, *, device: int | None = None, top: int = 10,
                    storage_options: Mapping[str, Any] | None = None,
                    snapshot: Mapping[str, Any] | None = None) -> SnapshotReport:
    """The report of the snapshot at ``path`` (local or ``gs://``, gzip ok; ``snapshot``: already
    loaded) for ``device`` (None: the one holding the most reserved memory), with the ``top``
    allocation groups (≥ 1)."""
    from analysis.memory import (
        allocations_at_peak,
        device_overview,
        load_snapshot,
        memory_peak,
        oom_events,
        pending_free,
        replay_snapshot,
    )

    if top < 1:
        raise ConfigError(f"top must be at least 1 (allocation groups to list), not {top}")
    data = load_snapshot(path, storage_options) if snapshot is None else snapshot
    replay = replay_snapshot(data, device=device, source=path)
    return SnapshotReport(
        source=path, snapshot=data, replay=replay, top=top, peak=memory_peak(replay),
        at_peak=allocations_at_peak(replay, top=top), ooms=oom_events(data, replay),
        devices=device_overview(data), pending=pending_free(data, replay.device),
    )


def timeline_report(path: str, *, storage_options: Mapping[str, Any] | None = None,
                    timeline: pd.DataFrame | None = None) -> TimelineReport:
    """The report of the ``export_memory_timeline`` file at ``path`` (``timeline``: already read)."""
    from analysis.memory import load_memory_timeline, memory_timeline_peak

    if timeline is None:
        timeline = load_memory_timeline(path, storage_options)
    return TimelineReport(source=path, timeline=timeline, peak=memory_timeline_peak(timeline))


def memory_report(path: str, *, device: int | None = None, top: int = 10,
                  storage_options: Mapping[str, Any] | None = None,
                  ) -> SnapshotReport | TimelineReport:
    """The report of ``path``: an ``export_memory_timeline`` file or a snapshot pickle, told
    apart by content, whatever the file's name (``device`` and ``top`` apply to snapshots
    only); an HTML export raises ``WrongFileKindError`` saying what to export instead."""
    from analysis.memory import load_memory_file

    if top < 1:
        raise ConfigError(f"top must be at least 1 (allocation groups to list), not {top}")
    kind, value = load_memory_file(path, storage_options)
    if kind == "timeline":
        return timeline_report(path, timeline=value)
    return snapshot_report(path, device=device, top=top, snapshot=value)


@dataclass
class WrittenReport:
    """What :func:`write_memory_report` wrote: ``{stem: [paths]}`` of figures, ``{stem: path}`` of
    tables."""

    out_dir: Path
    figures: dict[str, list[Path]] = field(default_factory=dict)
    tables: dict[str, Path] = field(default_factory=dict)

    def note(self) -> str:
        """One line saying what was written where."""
        if len(self.figures) == 1 and len(self.tables) == 1:
            return f"wrote the figure and the table to {self.out_dir}"
        return f"wrote {len(self.figures)} figures and {len(self.tables)} tables to {self.out_dir}"


def write_memory_report(report: SnapshotReport | TimelineReport, out_dir: str | os.PathLike,
                        formats: Iterable[str] = ("svg", "html")) -> WrittenReport:
    """Write ``report``'s figures (each as ``out_dir/<stem>.<format>``) and tables (each as
    ``out_dir/<stem>.csv``); ``ExportError`` names a file or folder that cannot be written."""
    from analysis.figures.export import export_figures
    from analysis.reports import write_tables

    out = Path(out_dir)
    figures = export_figures(report.figures(), out, formats=formats)
    return WrittenReport(out, figures, write_tables(report.tables(), out))


def _when(row, what: str) -> str:
    event = int(row[f"peak_{what}_event"])
    where = "the start of the buffer" if event < 0 else f"event {event}"
    t = row[f"peak_{what}_time_us"]
    return where if t != t else f"{where} (time_us {t:,.0f})"  # NaN: the snapshot has no times


__all__ = ["TIMELINE_SUFFIXES", "SnapshotReport", "TimelineReport", "WrittenReport",
           "memory_report", "snapshot_report", "timeline_report", "write_memory_report"]
