"""Every shell command in the README runs as written, from a fresh clone's root.

The README's ``bash`` blocks are read line by line; each ``trace-analysis ...`` line runs as a
subprocess (``python -m analysis``, the same entry point) in a folder that holds a link to
``sample_traces/`` (so outputs such as ``report/`` land in the test's folder, not the checkout),
with the shell's glob expansion done here. ``make demo`` is the same as the ``trace-analysis
report sample_traces -o report`` it runs (Makefile); ``make test`` is this suite itself.
"""

from __future__ import annotations

import glob
import os
import re
import shlex
import subprocess
import sys

import pytest
from paths import REPO_ROOT
from report_checks import assert_one_svg_per_figure

README = REPO_ROOT / "README.md"
SAMPLE_README = REPO_ROOT / "sample_traces" / "README.md"


def shell_lines(path) -> list[str]:
    """The command lines of the ``bash`` blocks of a Markdown file, comments dropped."""
    lines = []
    for block in re.findall(r"```bash\n(.*?)```", path.read_text(encoding="utf-8"), flags=re.S):
        for line in block.splitlines():
            command = line.split("  #")[0].split(" # ")[0].strip()
            if command and not command.startswith("#"):
                lines.append(command)
    return lines


def as_argv(command: str, cwd) -> list[str] | None:
    """The argv the command runs, or None for a line this test does not run (``make test``)."""
    if command == "make test":
        return None
    if command == "make demo":
        makefile = (REPO_ROOT / "Makefile").read_text()
        assert "$(BIN)/trace-analysis report sample_traces -o report" in makefile
        command = "trace-analysis report sample_traces -o report"
    words = shlex.split(command)
    assert words[0] == "trace-analysis", f"a README command this test does not know: {command}"
    argv = []
    for word in words[1:]:
        if any(c in word for c in "*?["):
            matches = sorted(glob.glob(word, root_dir=cwd))
            assert matches, f"{word} matches no file: {command}"
            argv += matches
        else:
            argv.append(word)
    return [sys.executable, "-m", "analysis", *argv]


COMMANDS = shell_lines(README)


def test_the_readme_has_the_commands_this_test_runs():
    assert "make demo" in COMMANDS and "make test" in COMMANDS
    for command in ("report", "summary", "check", "merge", "compare", "cache", "schedule",
                    "pyspy-report", "flamegraph", "memory"):
        assert any(c.startswith(f"trace-analysis {command} ") for c in COMMANDS), command


@pytest.fixture(scope="module")
def clone(tmp_path_factory):
    """A folder like a fresh clone's root for the commands: sample_traces/ and nothing written."""
    root = tmp_path_factory.mktemp("clone")
    (root / "sample_traces").symlink_to(REPO_ROOT / "sample_traces", target_is_directory=True)
    return root


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    """One trace cache for all the commands, as a user's default cache is: the first command
    parses sample_traces/, the next ones read it (and the answers it keeps)."""
    return tmp_path_factory.mktemp("readme-cache")


# the two report lines are the same command: run it once
@pytest.mark.parametrize("command", [c for c in dict.fromkeys(COMMANDS) if c != "make demo"])
def test_readme_command_runs_as_written(command, clone, cache):
    argv = as_argv(command, clone)
    if argv is None:
        pytest.skip(f"{command!r} is this test suite")
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "TRACE_ANALYSIS_CACHE": str(cache),
           "COLUMNS": "100"}
    proc = subprocess.run(argv, cwd=clone, capture_output=True, text=True, env=env, timeout=600,
                          stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, f"{command}\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}"
    assert "Traceback" not in proc.stderr
    if command.startswith(("trace-analysis summary", "trace-analysis check")):
        assert max(len(line) for line in proc.stdout.splitlines()) <= 100
    if command.startswith("trace-analysis report sample_traces"):
        # the main job's page, and each figure as SVG: the suite's one SVG export of the whole
        # report (tests/unit/reports/test_report.py checks the page and tables it writes)
        assert (clone / "report" / "index.html").is_file()
        assert_one_svg_per_figure(clone / "report" / "figures")


def test_make_demo_is_the_report_command():
    assert as_argv("make demo", REPO_ROOT)[3:] == ["report", "sample_traces", "-o", "report"]
    assert "trace-analysis report sample_traces -o report/" in COMMANDS


def test_the_sample_traces_readme_regenerates_them_byte_identically(tmp_path):
    command = next(line.strip() for line in SAMPLE_README.read_text().splitlines()
                   if line.startswith(".venv/bin/python -m analysis.testing.synthetic"))
    words = shlex.split(command)
    assert words[:3] == [".venv/bin/python", "-m", "analysis.testing.synthetic"]
    subprocess.run([sys.executable, "-m", "analysis.testing.synthetic", str(tmp_path),
                    *words[4:]], check=True, capture_output=True, env={
                        **os.environ, "PYTHONPATH": str(REPO_ROOT)}, timeout=600)
    for trace in sorted((REPO_ROOT / "sample_traces").glob("rank-*.pt.trace.json.gz")):
        assert (tmp_path / trace.name).read_bytes() == trace.read_bytes(), trace.name
