"""``trace-analysis check`` (exit status gates CI) and ``trace-analysis merge``."""

from __future__ import annotations

import gzip
import json

import pytest
from click.testing import CliRunner

from analysis.cli import main
from analysis.testing import health_traces as ht


def run(*args: str):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def test_check_exit_status(tmp_path):
    ht.write_job(ht.healthy_job(), tmp_path / "good")
    ht.write_job(ht.faulty_job("negative_duration"), tmp_path / "bad")
    good = run("check", str(tmp_path / "good"), "--no-cache", "-q")
    assert good.exit_code == 0, good.output
    assert "no findings (2 ranks checked)" in good.output
    bad = run("check", str(tmp_path / "bad"), "--no-cache", "-q")
    assert bad.exit_code == 1
    assert "ERROR   negative_duration (rank 0): " in bad.output


def test_check_warnings_do_not_fail_and_csv(tmp_path):
    ht.write_job(ht.faulty_job("missing_flows"), tmp_path / "t")
    result = run("check", str(tmp_path / "t"), "--no-cache", "-q", "--format", "csv")
    assert result.exit_code == 0
    assert result.output.splitlines()[0] == "rank,severity,check,message,evidence"
    assert ",info,missing_flows," in result.output
    quiet = run("check", str(tmp_path / "t"), "--no-cache", "-q", "--min-severity", "warning")
    assert "missing_flows" not in quiet.output


def test_check_prints_what_ta_check_returns(tmp_path):
    from analysis.api import TraceAnalysis

    ht.write_job(ht.faulty_job("negative_duration"), tmp_path / "t")
    printed = run("check", str(tmp_path / "t"), "--no-cache", "-q", "--format", "csv")
    table = TraceAnalysis(trace_dir=str(tmp_path / "t"), use_cache=False, progress=False).check()
    assert printed.output == table.to_csv(index=False)
    assert "negative_duration" in printed.output


def test_merge_writes_one_trace(tmp_path):
    ht.write_job(ht.healthy_job(ranks=3), tmp_path / "t")
    out = tmp_path / "merged.json.gz"
    result = run("merge", str(tmp_path / "t"), str(out), "--no-cache", "--ranks", "0,2",
                 "--steps", "2,3", "--align", "first_collective")
    assert result.exit_code == 0, result.output
    doc = json.loads(gzip.decompress(out.read_bytes()))
    names = sorted(e["args"]["name"] for e in doc["traceEvents"] if e["name"] == "process_name")
    assert names == ["rank 0 · CPU", "rank 0 · GPU 0", "rank 2 · CPU", "rank 2 · GPU 0"]
    steps = sorted({e["name"] for e in doc["traceEvents"] if e["name"].startswith("ProfilerStep")})
    assert steps == ["ProfilerStep#2", "ProfilerStep#3"]
    bad = CliRunner().invoke(main, ["merge", str(tmp_path / "t"), str(out), "--ranks", "x"])
    assert bad.exit_code == 2


def test_merge_of_steps_that_match_nothing_fails_and_writes_nothing(tmp_path):
    ht.write_job(ht.healthy_job(ranks=2), tmp_path / "t")
    out = tmp_path / "merged.json.gz"
    result = run("merge", str(tmp_path / "t"), str(out), "--no-cache", "--steps", "99")
    assert result.exit_code == 1
    assert "--steps 99 matched no ProfilerStep on ranks [0, 1]" in result.stderr
    assert not out.exists() and list(tmp_path.glob("merged*")) == []


def test_gpu_only_merge_of_cpu_only_ranks_fails_and_writes_nothing(tmp_path):
    job = ht.healthy_job(ranks=2)
    for doc in job.values():  # only the CPU side: what a CPU-only run records
        doc["traceEvents"] = [e for e in doc["traceEvents"] if e.get("cat") in ("cpu_op", "user_annotation")]
    ht.write_job(job, tmp_path / "t")
    out = tmp_path / "merged.json.gz"
    result = run("merge", str(tmp_path / "t"), str(out), "--no-cache", "--gpu-only")
    assert result.exit_code == 1, result.output
    assert "--gpu-only: ranks [0, 1] have no GPU events" in result.stderr
    assert list(tmp_path.glob("merged*")) == []


@pytest.mark.parametrize("argv", [
    ["report", "-o", "OUT", "--ranks", "a,b"], ["report", "-o", "OUT", "--analyses", "nope"],
    ["merge", "OUT/m.json.gz", "--ranks", "a,b"], ["merge", "OUT/m.json.gz", "--steps", "x"],
    ["compare", "{traces}", "--ranks", "0,x"],
])
def test_argument_errors_are_usage_errors_before_any_trace_is_read(tmp_path, monkeypatch, argv):
    from analysis.kineto import loader

    def no_loading(*args, **kwargs):
        raise AssertionError("traces were loaded before the arguments were checked")

    monkeypatch.setattr(loader, "load_trace", no_loading)
    traces = tmp_path / "t"
    ht.write_job(ht.healthy_job(), traces)
    words = [w.replace("OUT", str(tmp_path / "out")).replace("{traces}", str(traces)) for w in argv]
    result = CliRunner().invoke(main, [words[0], str(traces), *words[1:]])
    assert result.exit_code == 2, result.output
    assert "Invalid value" in result.output
    assert not (tmp_path / "out").exists()


def test_a_failed_report_leaves_nothing_behind(tmp_path):
    ht.write_job(ht.healthy_job(), tmp_path / "t")
    out = tmp_path / "report"
    result = run("report", str(tmp_path / "t"), "-o", str(out), "--ranks", "9", "-f", "html",
                 "--no-cache")
    assert result.exit_code == 1 and "rank 9" in result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t"]  # no OUT, no temporary folder
    # an existing folder keeps its files when a report into it fails, and gets the new ones
    out.mkdir()
    (out / "mine.txt").write_text("keep")
    assert run("report", str(tmp_path / "t"), "-o", str(out), "--ranks", "9", "-f", "html",
               "--no-cache").exit_code == 1
    assert sorted(p.name for p in out.iterdir()) == ["mine.txt"]
    assert run("report", str(tmp_path / "t"), "-o", str(out), "-f", "html",
               "--no-cache", "-q").exit_code == 0
    assert {"mine.txt", "index.html", "tables"} <= {p.name for p in out.iterdir()}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report", "t"]
