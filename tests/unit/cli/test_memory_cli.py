"""`trace-analysis memory`: the summary printed, the figures and tables written, errors in one line."""

from __future__ import annotations

import os
import pickle

import pandas as pd
import pytest
from click.testing import CliRunner

from analysis.cli import main
from tests.memory_snapshots import training_run


def test_memory_command_prints_the_peak_and_writes_figures_and_tables(tmp_path):
    builder, _ = training_run(steps=2)
    snap = tmp_path / "snap.pickle"
    snap.write_bytes(pickle.dumps(builder.snapshot()))
    out = tmp_path / "out"
    result = CliRunner().invoke(main, ["memory", str(snap), "-o", str(out), "--format", "html"])
    assert result.exit_code == 0, result.output
    assert "peak allocated: 28.0 MiB at event 15" in result.output
    assert "peak reserved:  32.0 MiB" in result.output
    assert "model.py:50:backward" in result.output
    assert {p.name for p in out.iterdir()} >= {
        "memory_timeline.html", "memory_top_allocations.html", "memory_peak.csv",
        "memory_top_allocations.csv", "memory_timeline.csv", "memory_allocations.csv",
    }
    assert pd.read_csv(out / "memory_peak.csv")["peak_allocated_bytes"].iat[0] == 28 * 2**20


def test_memory_command_refuses_a_malicious_pickle_in_one_line(tmp_path):
    marker = tmp_path / "ran"

    class Evil:
        def __reduce__(self):
            return (os.system, (f"touch {marker}",))

    bad = tmp_path / "evil.pickle"
    bad.write_bytes(pickle.dumps({"segments": [Evil()]}))
    result = CliRunner().invoke(main, ["memory", str(bad)])
    assert result.exit_code == 1
    assert "error:" in result.output and "refused to load" in result.output
    assert not marker.exists()


def test_memory_command_reads_an_export_memory_timeline_file(hta_traces_dir, tmp_path):
    path = hta_traces_dir / "memory_analysis" / "memory_timeline.raw.gz"
    result = CliRunner().invoke(main, ["memory", str(path), "-o", str(tmp_path), "--format", "html"])
    assert result.exit_code == 0, result.output
    assert "peak: 2,940.0 MiB" in result.output
    assert (tmp_path / "memory_categories.html").exists() and (tmp_path / "memory_categories.csv").exists()


def test_the_command_prints_what_the_library_report_says(tmp_path):
    from analysis.reports.memory import memory_report, write_memory_report

    builder, _ = training_run(steps=2)
    snap = tmp_path / "snap.pickle"
    snap.write_bytes(pickle.dumps(builder.snapshot()))
    report = memory_report(str(snap), top=5)
    written = write_memory_report(report, tmp_path / "lib", formats=("html",))
    assert sorted(written.tables) == sorted(report.tables()) and len(written.figures) == 2
    assert pd.read_csv(written.tables["memory_peak"])["peak_allocated_bytes"].iat[0] == 28 * 2**20
    result = CliRunner().invoke(main, ["memory", str(snap), "--top", "5", "-o", str(tmp_path / "cli"),
                                       "--format", "html"])
    assert result.exit_code == 0, result.output
    assert result.output == "\n".join([*report.lines(), written.note().replace("lib", "cli")]) + "\n"


def test_a_table_that_cannot_be_written_is_an_error_naming_it(tmp_path):
    from analysis.errors import ExportError
    from analysis.reports import write_tables

    builder, _ = training_run(steps=2)
    snap = tmp_path / "snap.pickle"
    snap.write_bytes(pickle.dumps(builder.snapshot()))
    out = tmp_path / "out"
    (out / "memory_peak.csv").mkdir(parents=True)  # a folder where the CSV goes
    result = CliRunner().invoke(main, ["memory", str(snap), "-o", str(out), "--format", "html"])
    assert result.exit_code == 1
    assert f"error: {out / 'memory_peak.csv'}: cannot write" in result.output
    assert "Traceback" not in result.output
    # a folder that cannot be made: the error names it
    (tmp_path / "file").write_text("")
    with pytest.raises(ExportError, match="file/tables: cannot create the output directory"):
        write_tables({"t": pd.DataFrame({"a": [1]})}, tmp_path / "file" / "tables")


# --- shapes of real snapshots (a sweep of 57 public snapshot files, 2026-11-28) --------------------

MiB = 2**20


def _segment(device: int, address: int, blocks: list[tuple[int, str]], stream: int = 0) -> dict:
    """A segment as torch writes it: blocks tile it in address order."""
    out, addr = [], address
    for size, state in blocks:
        out.append({"address": addr, "size": size, "requested_size": size, "state": state,
                    "frames": [{"name": "forward", "filename": "/p/model.py", "line": 7}]})
        addr += size
    return {"device": device, "address": address, "total_size": addr - address, "stream": stream,
            "segment_type": "large", "allocated_size": sum(s for s, st in blocks if st == "active_allocated"),
            "active_size": sum(s for s, st in blocks if st.startswith("active")),
            "requested_size": sum(s for s, st in blocks if st.startswith("active")), "blocks": out}


def _run(tmp_path, snapshot: dict, *args: str):
    path = tmp_path / "snap.pickle"
    path.write_bytes(pickle.dumps(snapshot))
    return CliRunner().invoke(main, ["memory", str(path), *args])


def test_the_default_device_is_the_one_holding_the_memory_and_the_others_are_named(tmp_path):
    """torch writes its ``snapshot`` marker on the current device, which may hold nothing: the
    busiest-buffer rule picked that device and printed zeros (the memory was on device 1)."""
    oom = {"action": "oom", "addr": 0, "size": 512 * MiB, "stream": 0, "device_free": 3 * MiB,
           "frames": [], "time_us": 5}
    snap = {
        "segments": [_segment(1, 2**30, [(64 * MiB, "active_allocated"), (32 * MiB, "inactive")]),
                     _segment(2, 2**31, [(8 * MiB, "active_allocated")])],
        "device_traces": [[{"action": "snapshot", "addr": 0, "size": 0, "stream": 0, "frames": [],
                            "time_us": 9}], [], [oom]],
    }
    result = _run(tmp_path, snap)
    assert result.exit_code == 0, result.output
    assert "(device 1, 0 events in the buffer)" in result.output
    assert "at the snapshot: 64.0 MiB allocated, 96.0 MiB reserved" in result.output
    assert ("other devices in the snapshot: 0 (0.0 MiB reserved), 2 (8.0 MiB reserved, 1 "
            "out-of-memory event); --device N reports one") in result.output
    result = _run(tmp_path, snap, "--device", "2")
    assert "out-of-memory events: 1 (first asked for 512.0 MiB)" in result.output


def test_blocks_freed_but_used_by_a_stream_are_named(tmp_path):
    """``active_pending_free`` blocks (record_stream) count as allocated until their
    free_completed; torch.cuda.memory_allocated() dropped them at the free: the summary says how
    much of the allocated figure they are."""
    snap = {"segments": [_segment(0, 2**30, [(100 * MiB, "active_allocated"),
                                             (20 * MiB, "active_pending_free"),
                                             (5 * MiB, "active_pending_free"), (3 * MiB, "inactive")])],
            "device_traces": [[]]}
    result = _run(tmp_path, snap)
    assert "at the snapshot: 125.0 MiB allocated, 128.0 MiB reserved" in result.output
    assert ("of which 25.0 MiB in 2 blocks freed but still used by a stream (record_stream): "
            "torch.cuda.memory_allocated() no longer counts them") in result.output


def test_top_must_be_positive_and_an_empty_peak_prints_no_raw_table(tmp_path):
    snap = {"segments": [_segment(0, 2**30, [(4 * MiB, "inactive")])], "device_traces": [[]]}
    for bad in ("0", "-1"):
        result = _run(tmp_path, snap, "--top", bad)
        assert result.exit_code == 2 and "--top" in result.output
    result = _run(tmp_path, snap)
    assert result.exit_code == 0, result.output
    assert "top allocations at the peak: none (nothing was allocated then)" in result.output
    assert "Empty DataFrame" not in result.output


def test_allocated_by_frame_needs_no_deprecated_pandas_behaviour():
    """Frames outside the ``top`` were coded with ``pd.Categorical`` of values outside its
    categories (a Pandas4Warning on 38 of 56 real snapshots; an error in pandas 4)."""
    import warnings

    from analysis.memory import allocated_by_frame, replay_snapshot
    from tests.memory_snapshots import training_run

    builder, _ = training_run(steps=2)
    replay = replay_snapshot(builder.snapshot())
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        by_frame = allocated_by_frame(replay, top=1)
    assert "other" in by_frame.columns
    assert (by_frame.drop(columns=["state", "time_us"]).sum(axis=1)
            == replay.timeline["allocated_bytes"]).all()


def test_a_memory_file_is_known_by_its_content_not_its_name(hta_traces_dir, tmp_path):
    """torch writes a timeline under any name (``timeline.gz``): it was read as a snapshot and
    refused ("not a memory snapshot (JSON)"); a snapshot named ``.json`` is a snapshot too."""
    import shutil

    timeline = tmp_path / "timeline.gz"
    shutil.copy(hta_traces_dir / "memory_analysis" / "memory_timeline.raw.gz", timeline)
    result = CliRunner().invoke(main, ["memory", str(timeline)])
    assert result.exit_code == 0, result.output
    assert "peak: 2,940.0 MiB" in result.output
    builder, _ = training_run(steps=2)
    snap = tmp_path / "snapshot.json"
    snap.write_bytes(pickle.dumps(builder.snapshot()))
    result = CliRunner().invoke(main, ["memory", str(snap)])
    assert result.exit_code == 0 and "peak allocated: 28.0 MiB" in result.output


def test_an_html_export_says_what_to_export_instead(tmp_path):
    """``export_memory_timeline("x.html")`` writes a page with a PNG of the plot (no data): it
    was "not a readable pickle (KeyError: 60)"."""
    page = tmp_path / "memory.html"
    page.write_text("<html>\n<head><meta charset=\"utf-8\" /><title>GPU Memory Timeline HTML</title>"
                    "</head>\n<body>\n  <img src='data:image/png;base64,iVBORw0KGgo='>\n</body>\n"
                    "</html>")
    result = CliRunner().invoke(main, ["memory", str(page)])
    assert result.exit_code == 1
    assert "HTML page" in result.output and ".raw.json.gz" in result.output
    assert "KeyError" not in result.output
