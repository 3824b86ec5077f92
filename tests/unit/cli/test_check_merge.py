"""``trace-analysis check`` (exit status gates CI) and ``trace-analysis merge``."""

from __future__ import annotations

import gzip
import json

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
    assert "ERROR   rank 0    negative_duration" in bad.output


def test_check_warnings_do_not_fail_and_csv(tmp_path):
    ht.write_job(ht.faulty_job("missing_flows"), tmp_path / "t")
    result = run("check", str(tmp_path / "t"), "--no-cache", "-q", "--format", "csv")
    assert result.exit_code == 0
    assert result.output.splitlines()[0] == "rank,severity,check,message,evidence"
    assert ",info,missing_flows," in result.output
    quiet = run("check", str(tmp_path / "t"), "--no-cache", "-q", "--min-severity", "warning")
    assert "missing_flows" not in quiet.output


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
