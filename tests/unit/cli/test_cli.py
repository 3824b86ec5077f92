"""The ``trace-analysis`` command line: report, summary, cache, and its one-line error paths."""

from __future__ import annotations

import gzip
import shutil
import subprocess
import sys

import pandas as pd
import pytest
from click.testing import CliRunner

from analysis.cli import main


def run(*args: str, env: dict | None = None):
    return CliRunner().invoke(main, list(args), env=env, catch_exceptions=False)


def _one_line_error(result, *needles: str) -> str:
    assert result.exit_code == 1, result.output
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: ") and "Traceback" not in result.output
    for needle in needles:
        assert needle in lines[0]
    return lines[0]


def test_help_lists_every_command():
    out = subprocess.run([sys.executable, "-m", "analysis", "--help"], capture_output=True, text=True,
                         check=True).stdout
    for command in ("report", "summary", "cache", "check", "merge"):
        assert f"  {command} " in out
    report_help = run("report", "--help").output
    for option in ("--output", "--ranks", "--format", "--patterns", "--no-cache", "--quiet"):
        assert option in report_help


# --------------------------------------------------------------------------------------- report
def test_report_writes_the_page_and_tables(sample_traces_dir, tmp_path):
    result = run("report", str(sample_traces_dir), "-o", str(tmp_path / "out"), "-f", "html",
                 "--ranks", "0,1")
    assert result.exit_code == 0, result.output
    assert result.stdout.strip() == f"wrote {tmp_path / 'out' / 'index.html'} (0 figure files, 29 tables)"
    assert (tmp_path / "out" / "index.html").stat().st_size > 1_000_000  # plotly.js inlined
    assert pd.read_csv(tmp_path / "out" / "tables" / "headline.csv")["rank"].tolist() == [0, 1]


def test_report_quiet_prints_nothing(sample_traces_dir, tmp_path):
    result = run("report", str(sample_traces_dir), "-o", str(tmp_path), "-f", "html", "-q",
                 "--ranks", "0,1")
    # -q: not even the note that the sample traces have no shapes (the page says it)
    assert result.exit_code == 0
    assert result.output == ""
    assert "record_shapes=True" in (tmp_path / "index.html").read_text()


def test_report_without_a_browser_writes_the_page_and_says_how_to_install_one(
    sample_traces_dir, tmp_path
):
    result = run("report", str(sample_traces_dir), "-o", str(tmp_path), "-f", "html,svg", "-q",
                 "--ranks", "0,1",
                 env={"BROWSER_PATH": str(tmp_path / "no-chromium")})
    _one_line_error(result, "apt-get install chromium", "index.html and the tables were written")
    assert (tmp_path / "index.html").exists()


def test_report_missing_directory(tmp_path):
    missing = tmp_path / "nope"
    _one_line_error(run("report", str(missing), "-o", str(tmp_path / "out")), str(missing),
                    "no such file")
    assert not (tmp_path / "out" / "index.html").exists()


def test_report_bad_url(tmp_path):
    _one_line_error(run("report", "nosuch://bucket/traces", "-o", str(tmp_path)),
                    "nosuch://bucket/traces", "Protocol not known")


def test_report_missing_gcs_bucket(gcs_emulator, tmp_path):
    # gcsfs reaches the local emulator through STORAGE_EMULATOR_HOST, set by the fixture
    _one_line_error(run("report", "gs://no-such-bucket/traces", "-o", str(tmp_path), "--no-cache"),
                    "gs://no-such-bucket/traces")


def test_report_corrupt_file(sample_traces_dir, tmp_path):
    traces = tmp_path / "traces"
    traces.mkdir()
    shutil.copy(sample_traces_dir / "rank-0.pt.trace.json.gz", traces)
    data = (sample_traces_dir / "rank-1.pt.trace.json.gz").read_bytes()
    (traces / "rank-1.pt.trace.json.gz").write_bytes(data[: len(data) // 2])  # cut off mid-stream
    line = _one_line_error(run("report", str(traces), "-o", str(tmp_path / "out"), "--no-cache"),
                           "rank-1.pt.trace.json.gz")
    assert "gzip" in line


def test_report_not_a_trace(tmp_path):
    (tmp_path / "et.json.gz").write_bytes(gzip.compress(b'{"nodes": []}'))
    _one_line_error(run("report", str(tmp_path), "-o", str(tmp_path / "out"), "--no-cache"),
                    "et.json.gz")


def test_report_unknown_rank(sample_traces_dir, tmp_path):
    _one_line_error(run("report", str(sample_traces_dir), "-o", str(tmp_path), "--ranks", "0,9"),
                    "rank 9", "[0, 1, 2, 3, 4, 5, 6, 7]")


def test_report_bad_format_is_a_usage_error(sample_traces_dir, tmp_path):
    result = run("report", str(sample_traces_dir), "-o", str(tmp_path), "-f", "svg,xml")
    assert result.exit_code == 2 and "xml" in result.stderr


def test_debug_shows_the_traceback(tmp_path):
    from analysis.errors import TraceNotFoundError

    with pytest.raises(TraceNotFoundError):
        run("--debug", "report", str(tmp_path / "nope"), "-o", str(tmp_path / "out"))


# -------------------------------------------------------------------------------- summary, cache
def test_summary_opens_with_the_findings_then_one_row_per_rank(sample_traces_dir):
    result = run("summary", str(sample_traces_dir), "-q", "--wide",
                 env={"COLUMNS": "1000"})
    assert result.exit_code == 0, result.output
    findings, table = result.stdout.strip().split("\n\n")
    warnings = [line for line in findings.splitlines() if line.startswith("[warning]")]
    # the sample traces' known faults: pageable copies (information: under 1 % of the GPU
    # span), and rank 1 slower than the rest
    infos = [line for line in findings.splitlines() if line.startswith("[info]")]
    assert infos[0].startswith("[info] Host-to-device copies from pageable memory: HtoD "
                               "copies read pageable host memory on 8 rank(s), 2.73 ms in all (")
    assert ("[warning] Rank 1 is slower than the others: Rank 1's mean step takes 142.9 ms, "
            "40.5 % more than the median rank's 101.7 ms.") in warnings
    assert all(line.startswith(("[warning]", "[not run]", "[error]", "[info]"))
               for line in findings.splitlines())
    lines = table.splitlines()
    assert lines[0].split()[:2] == ["rank", "gpu"] and "idle_%" in lines[0]
    assert [line.split()[0] for line in lines[1:]] == [str(r) for r in range(8)]


@pytest.mark.parametrize("columns", [80, 100])
@pytest.mark.parametrize("command", ["summary", "check"])
def test_summary_and_check_fit_the_terminal(sample_traces_dir, command, columns):
    result = run(command, str(sample_traces_dir), "-q",
                 env={"COLUMNS": str(columns)})
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert max(len(line) for line in lines) <= columns
    if command == "summary":  # every column is still there: in a block, or said once
        for column in ("gpu", "idle_%", "comm_overlap_%", "wait_caused_per_step_us"):
            assert column in result.stdout
        assert "same on every row: gpu NVIDIA H100 80GB HBM3" in result.stdout
    else:  # eight identical info rows are one entry naming the ranks
        assert result.stdout.count("truncated_last_step") == 1 and "(ranks 0–7)" in result.stdout


def test_summary_wide_prints_every_column_on_one_line(sample_traces_dir):
    result = run("summary", str(sample_traces_dir), "-q", "--wide",
                 env={"COLUMNS": "80"})
    table = result.stdout.strip().split("\n\n")[-1].splitlines()
    assert len(table) == 9 and max(len(line) for line in table) > 200


def test_a_data_warning_is_said_once_per_cached_trace(sample_traces_dir, tmp_path):
    import os

    env = {k: v for k, v in os.environ.items() if k != "TRACE_ANALYSIS_REPEAT_WARNINGS"}
    env["TRACE_ANALYSIS_CACHE"] = str(tmp_path / "cache")
    traces = tmp_path / "traces"
    traces.mkdir()
    shutil.copy(sample_traces_dir / "rank-3.pt.trace.json.gz", traces / "trace.json.gz")
    (traces / "notes.json").write_text("{}")  # skipped with a warning on every load

    def cli(*args):  # a process of its own: pytest records warnings in-process
        return subprocess.run([sys.executable, "-m", "analysis", *args], capture_output=True,
                              text=True, env=env, timeout=300, check=True)

    first = cli("summary", str(traces), "-q")
    assert "warning: skipped files" in first.stderr
    second = cli("summary", str(traces))
    assert "warning:" not in second.stderr
    assert "note: 1 warning about these traces shown on an earlier run" in second.stderr
    assert first.stdout == second.stdout
    quiet = cli("summary", str(traces), "-q")  # -q: no notes, this one neither
    assert "warning:" not in quiet.stderr and "note:" not in quiet.stderr
    assert "warning: skipped files" in cli("-v", "summary", str(traces), "-q").stderr
    cli("cache", "clear")
    assert "warning: skipped files" in cli("summary", str(traces), "-q").stderr


def test_summary_missing_directory(tmp_path):
    _one_line_error(run("summary", str(tmp_path / "nope")), "no such file")


def test_cache_info_and_clear(sample_traces_dir, tmp_path):
    cache = tmp_path / "cache"
    one_rank = sample_traces_dir / "rank-0.pt.trace.json.gz"  # something to cache, quickly
    assert run("summary", str(one_rank), "--cache-dir", str(cache), "-q").exit_code == 0
    info = run("cache", "--cache-dir", str(cache), "info")
    assert info.exit_code == 0 and str(cache) in info.stdout
    cleared = run("cache", "--cache-dir", str(cache), "clear")
    assert cleared.exit_code == 0 and cleared.stdout.startswith(f"cleared {cache}")
    freed = float(cleared.stdout.split("(")[1].split()[0])
    assert freed > 0
    again = run("cache", "--cache-dir", str(cache), "clear")
    assert "(0.0 MiB freed)" in again.stdout
    # a cache that is not there is not "cleared"; a file is no cache (it reported 0 entries)
    nowhere = run("cache", "--cache-dir", str(tmp_path / "nowhere"), "clear")
    assert nowhere.stdout.startswith(f"no cache at {tmp_path / 'nowhere'}: nothing to clear")
    a_file = tmp_path / "a_file"
    a_file.write_text("x")
    info = run("cache", "info", env={"TRACE_ANALYSIS_CACHE": str(a_file)})
    _one_line_error(info, "is a file, not a cache directory")


def test_cache_prune_says_what_it_removes_and_why(sample_traces_dir, tmp_path):
    import json
    import os

    cache = tmp_path / "cache"
    one_rank = sample_traces_dir / "rank-0.pt.trace.json.gz"
    assert run("summary", str(one_rank), "--cache-dir", str(cache), "-q").exit_code == 0
    (entry,) = [p for p in cache.iterdir() if len(p.name) == 32]
    stale = cache / ("f" * 32)  # an entry an older parser left behind
    shutil.copytree(entry, stale)
    record = json.loads((stale / "meta.json").read_text())
    record["parser_version"] -= 1
    (stale / "meta.json").write_text(json.dumps(record))
    info = run("cache", "--cache-dir", str(cache), "info").stdout
    assert "entries: 2" in info and "unreadable_entries: 1" in info
    assert "`trace-analysis cache prune` removes them" in info

    dry = run("cache", "--cache-dir", str(cache), "prune", "--dry-run").stdout
    assert dry.startswith(f"{cache}: would remove 1 entries") and stale.exists()
    done = run("cache", "--cache-dir", str(cache), "prune", "--max-size", "1K",
               "--older-than", "30d").stdout
    # the other version's entry goes; ours stays though over 1 KiB: used in the last hour
    assert "removed 1 entries" in done and "1 of another parser version" in done
    assert "0 beyond 1K; kept 1 entries" in done and not stale.exists() and entry.exists()
    assert "1 of them beyond 1K because used in the last hour" in done  # why it stayed
    long_ago = entry.stat().st_mtime - 40 * 86400
    os.utime(entry, (long_ago, long_ago))
    done = run("cache", "--cache-dir", str(cache), "prune", "--older-than", "30d").stdout
    assert "removed 1 entries" in done and "1 unused for longer than 30d" in done
    assert not entry.exists()


@pytest.mark.parametrize(("text", "size"), [("500M", 500 * 2**20), ("20G", 20 * 2**30),
                                             ("20GB", 20 * 2**30), ("1.5TiB", int(1.5 * 2**40)),
                                             ("4096", 4096), ("2k", 2048)])
def test_cache_prune_sizes(text, size):
    from analysis.cli.cache import parse_size

    assert parse_size(text) == size


def test_cache_prune_refuses_what_it_cannot_read(tmp_path):
    bad = run("cache", "--cache-dir", str(tmp_path), "prune", "--max-size", "lots")
    assert bad.exit_code == 2 and "'lots' is not a size such as 500M" in bad.output
    bad = run("cache", "--cache-dir", str(tmp_path), "prune", "--older-than", "1y")
    assert bad.exit_code == 2 and "'1y' is not an age such as 30d" in bad.output
