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
