"""py-spy raw files: parsing, the leaf/library report, the call tree and the CLI commands.

The files under tests/data/pyspy/ are real py-spy 0.4.3 recordings of tests/data/pyspy/workload.py,
made by tests/data/pyspy/record.py (see the README there). ``test_live_recording`` records afresh
when py-spy is installed and allowed to trace.
"""

from __future__ import annotations

import gzip
import re
import shutil
import subprocess
import sys
from pathlib import Path

import fsspec
import pytest
from click.testing import CliRunner
from paths import TEST_DATA  # noqa: E402

from analysis.cli.pyspy import flamegraph as flamegraph_command
from analysis.cli.pyspy import pyspy_report as report_command
from analysis.errors import ConfigError, CorruptInputError, InputNotFoundError
from analysis.pyspy.samples import (
    NO_FRAMES,
    NOT_FOUND,
    call_tree,
    parse_pyspy,
    pyspy_report,
    read_pyspy,
)

DATA = TEST_DATA / "pyspy"
SIMPLE = DATA / "simple.txt"
NODES = [DATA / "profile_node0.txt", DATA / "profile_node1.txt"]
# The shares of wall time workload.py spends in each leaf by default (kernel 0.5, preprocess 0.3).
EXPECTED = {"dense_kernel": 0.5, "user_preprocess": 0.3, "user_callback": 0.2}
# Sampling error at ~350 samples is ~2.7 % (binomial sd at p=0.5).
TOLERANCE = 0.08


def leaf_shares(report):
    """Shares of the workload's three leaves among their samples (start-up frames left out)."""
    by_leaf = report.groupby("leaf_function")["samples"].sum()
    loop = sum(by_leaf.get(name, 0) for name in EXPECTED)
    return {name: by_leaf.get(name, 0) / loop for name in EXPECTED}


def line_of(path: Path, code: str) -> int:
    """Line number of ``code`` in a source file, so the tests survive edits of the workload."""
    return next(i for i, line in enumerate(path.read_text().splitlines(), 1) if code in line)


RUN_CALLBACK_LINE = line_of(DATA / "toylib" / "engine.py", "callback(seconds)")
PREPROCESS_LINES = {line_of(DATA / "workload.py", "sum(range(100))"),
                    line_of(DATA / "workload.py", "sum(range(100))") - 1}


def test_recorded_file_gives_the_known_shares():
    report = pyspy_report(SIMPLE, library_name="toylib")
    for name, share in leaf_shares(report).items():
        assert share == pytest.approx(EXPECTED[name], abs=TOLERANCE), name
    assert report["samples"].sum() == sum(int(x.rsplit(" ", 1)[1]) for x in SIMPLE.read_text().splitlines())
    assert report["samples_pctg"].sum() == pytest.approx(100.0)
    assert report["samples"].is_monotonic_decreasing
    loop = report[report["leaf_function"].isin(list(EXPECTED))]["samples_pctg"].sum()
    assert loop > 80  # start-up and shutdown take a few percent


def test_library_frame_is_the_deepest_frame_in_the_library():
    report = pyspy_report(SIMPLE, library_name="toylib")
    cols = ["library_function", "library_path"]
    by_leaf = {name: rows for name, rows in report.groupby("leaf_function")}
    # a leaf inside the library is its own library frame
    kernel = by_leaf["dense_kernel"]
    assert set(map(tuple, kernel[cols].to_numpy())) == {("dense_kernel", "toylib/engine.py")}
    assert (kernel["library_line"] == kernel["leaf_line"]).all()
    # user code called back by the library: the library frame is the caller, not the leaf
    callback = by_leaf["user_callback"]
    assert set(map(tuple, callback[cols].to_numpy())) == {("run_callback", "toylib/engine.py")}
    assert set(callback["library_line"]) == {RUN_CALLBACK_LINE}
    preprocess = by_leaf["user_preprocess"]
    assert set(preprocess["library_function"]) == {NOT_FOUND} and set(preprocess["library_line"]) == {-1}
    assert set(preprocess["leaf_path"]) == {"workload.py"}
    assert set(preprocess["leaf_line"]) == PREPROCESS_LINES


def test_library_name_matches_whole_path_components():
    text = (
        "main (train.py:1);forward (torch/nn/module.py:5);mm (torchvision/ops.py:3) 4\n"
        "main (train.py:1);send (/opt/site-packages/torch/distributed/c10d.py:9) 6\n"
        "main (train.py:1);helper (six.py:2) 1\n"
    )
    profile = parse_pyspy(text)
    report = pyspy_report(profile, library_name="torch").set_index("leaf_function")
    assert report.loc["mm", "library_function"] == "forward"  # torchvision is not torch
    assert report.loc["send", "library_function"] == "send"  # absolute paths (--full-filenames)
    dist = pyspy_report(profile, library_name="torch.distributed").set_index("leaf_function")
    assert dist.loc["send", "library_function"] == "send"
    assert dist.loc["mm", "library_function"] == NOT_FOUND
    assert pyspy_report(profile, library_name="six").set_index("leaf_function").loc["helper", "library_line"] == 2


def test_without_library_name_there_are_no_library_columns():
    report = pyspy_report(SIMPLE)
    assert not any(c.startswith("library_") for c in report.columns)
    assert set(leaf_shares(report)) == set(EXPECTED)


def test_aggregate_leaf_paths_merges_line_numbers():
    # user_preprocess is sampled on its two busy lines
    plain = pyspy_report(SIMPLE, library_name="toylib")
    merged = pyspy_report(SIMPLE, library_name="toylib", aggregate_leaf_paths=True)
    rows = plain[plain["leaf_function"] == "user_preprocess"]
    assert set(rows["leaf_line"]) == PREPROCESS_LINES
    row = merged[merged["leaf_function"] == "user_preprocess"]
    assert len(row) == 1 and row["samples"].item() == rows["samples"].sum()
    assert "leaf_line" not in merged.columns and "library_line" not in merged.columns
    assert merged["samples"].sum() == plain["samples"].sum()
    assert len(merged) < len(plain)


def test_several_files_combine_with_a_file_column():
    report = pyspy_report(NODES, library_name="toylib")
    profiles = [read_pyspy(p) for p in NODES]
    assert set(report["file"]) == {"profile_node0.txt", "profile_node1.txt"}
    for profile in profiles:
        assert report.loc[report["file"] == profile.name, "samples"].sum() == profile.total_samples
    total = sum(p.total_samples for p in profiles)
    assert report["samples_pctg"].sum() == pytest.approx(100.0)
    node1_pre = report[(report["file"] == "profile_node1.txt") & (report["leaf_function"] == "user_preprocess")]
    assert node1_pre["samples_pctg"].sum() == pytest.approx(100 * node1_pre["samples"].sum() / total)
    # node 1 ran with preprocess 0.6 of the time
    assert leaf_shares(report[report["file"] == "profile_node1.txt"])["user_preprocess"] == pytest.approx(
        0.6, abs=TOLERANCE)


def test_num_rows_keeps_the_largest_rows():
    full = pyspy_report(NODES, library_name="toylib")
    top = pyspy_report(NODES, library_name="toylib", num_rows=3)
    assert len(top) == 3
    assert list(top["samples"]) == list(full["samples"].head(3))


def test_subprocess_and_thread_prefixes():
    profile = read_pyspy(DATA / "subprocesses_threads.txt")
    stacks = profile.stacks
    assert (stacks["process"] > 0).all() and (stacks["thread"] > 0).all()
    assert {"MainThread", "worker"} <= set(stacks["thread_name"])
    assert stacks["process"].nunique() == 2  # the workload and its child
    assert stacks["process_command"].str.contains("workload.py --seconds").any()
    assert not profile.functions["function"].str.startswith(("process ", "thread (")).any()
    report = pyspy_report(profile, library_name="toylib")
    assert {"dense_kernel", "user_callback", "user_preprocess", NO_FRAMES} <= set(report["leaf_function"])
    # a stack that is only `process ...;thread (...): NAME` has no Python frame
    raw = (DATA / "subprocesses_threads.txt").read_text().splitlines()
    bare = [int(line.rsplit(" ", 1)[1]) for line in raw
            if all(part.startswith(("process ", "thread (")) for part in line.rsplit(" ", 1)[0].split(";"))]
    assert bare and sum(bare) == report.loc[report["leaf_function"] == NO_FRAMES, "samples"].sum()


def test_native_frames_have_no_line_number():
    profile = read_pyspy(DATA / "native.txt")
    native = profile.functions[profile.functions["path"].isin(["libc.so.6", "libpython3.11.so.1.0"])]
    assert len(native) > 0 and (native["line"] == -1).all()
    python = profile.functions[profile.functions["path"] == "workload.py"]
    assert (python["line"] > 0).all()
    report = pyspy_report(profile, library_name="toylib")
    # the library frame is found below native leaves such as clock_gettime's vDSO frame
    assert (report.loc[report["leaf_path"] == "[vdso]", "library_function"] != NOT_FOUND).any()


def test_empty_stack_lines_and_line_ends_are_tolerated():
    text = SIMPLE.read_text()
    crlf = parse_pyspy(text.replace("\n", "\r\n") + "\r\n\r\n", source="crlf.txt")
    plain = read_pyspy(SIMPLE)
    assert crlf.total_samples == plain.total_samples
    assert crlf.functions.equals(plain.functions)
    empty = [int(line) for line in text.splitlines() if line.startswith(" ")]  # py-spy's " 8"
    assert empty and pyspy_report(plain).set_index("leaf_function").loc[NO_FRAMES, "samples"] == sum(empty)


def test_malformed_line_names_the_file_and_line(tmp_path):
    lines = SIMPLE.read_text().splitlines()
    i = next(i for i, line in enumerate(lines) if len(line) > 100)
    broken = tmp_path / "profile_node7.txt"
    # one stack cut short (as by two writers interleaving): its count is gone
    broken.write_text("\n".join(lines[:i] + [lines[i][:60]] + lines[i + 1 :]) + "\n")
    with pytest.raises(CorruptInputError) as err:
        read_pyspy(broken)
    assert str(broken) in str(err.value) and f"line {i + 1}:" in str(err.value)
    skipped = read_pyspy(broken, on_error="skip")
    assert skipped.skipped_lines == 1
    assert skipped.total_samples == read_pyspy(SIMPLE).total_samples - int(lines[i].rsplit(" ", 1)[1])
    assert (skipped.stacks["line"] != i + 1).all()


def test_unreadable_inputs_raise_clear_errors(tmp_path):
    empty = tmp_path / "empty.txt"
    empty.write_text("\n")
    with pytest.raises(CorruptInputError, match="empty.txt: .*empty"):
        read_pyspy(empty)
    with pytest.raises(InputNotFoundError, match="missing.txt"):
        read_pyspy(tmp_path / "missing.txt")
    svg = tmp_path / "profile.svg"
    svg.write_text('<?xml version="1.0" standalone="no"?>\n<svg></svg>\n')
    with pytest.raises(CorruptInputError, match="SVG output"):
        read_pyspy(svg)
    binary = tmp_path / "binary.txt"
    binary.write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(CorruptInputError, match="not text"):
        read_pyspy(binary)
    with pytest.raises(ConfigError):
        read_pyspy(SIMPLE, on_error="ignore")


def test_gzip_and_fsspec_urls(tmp_path):
    gz = tmp_path / "profile_node0.txt.gz"
    gz.write_bytes(gzip.compress(NODES[0].read_bytes()))
    assert read_pyspy(gz).total_samples == read_pyspy(NODES[0]).total_samples
    with fsspec.open("memory://pyspy/profile_node1.txt", "wb") as f:
        f.write(NODES[1].read_bytes())
    remote = read_pyspy("memory://pyspy/profile_node1.txt")
    assert remote.name == "profile_node1.txt"
    assert remote.total_samples == read_pyspy(NODES[1]).total_samples


def test_call_tree_counts():
    tree = call_tree(NODES)
    roots = tree[tree["parent"] < 0]
    assert list(roots["function"]) == ["profile_node0.txt", "profile_node1.txt"]
    assert roots["samples"].sum() == sum(read_pyspy(p).total_samples for p in NODES)
    assert tree["self_samples"].sum() == roots["samples"].sum()
    assert (tree["self_samples"] >= 0).all()
    child_sum = tree[tree["parent"] >= 0].groupby("parent")["samples"].sum()
    parent_samples = tree.set_index("node").loc[child_sum.index, "samples"]
    assert (child_sum <= parent_samples).all()
    # one node per distinct path: the workload's main appears once per file and line, at depth 2
    mains = tree[(tree["function"] == "main") & (tree["path"] == "workload.py")]
    assert (mains["depth"] == 2).all() and set(mains["file"]) == {p.name for p in NODES}
    assert not mains.duplicated(["file", "line"]).any()
    kernel = tree[(tree["function"] == "dense_kernel") & (tree["file"] == "profile_node0.txt")]
    assert kernel["samples"].sum() == kernel["self_samples"].sum() > 0


def test_call_tree_keeps_processes_and_threads_apart_as_pyspys_flame_graph_does():
    """A real ``--subprocesses --threads`` recording (the parent with a worker thread, a child
    running the same script): a node per process, then per thread, before the Python frames, so
    the child's ``<module>`` is not merged into the parent's. Before, one tree merged them all."""
    profile = read_pyspy(DATA / "subprocesses_threads.txt")
    tree = call_tree(profile)
    st = profile.stacks
    processes = tree[tree["depth"] == 1].set_index("function")["samples"]
    per_process = st.groupby("process")["samples"].sum()
    assert sorted(processes.to_dict().values()) == sorted(per_process.tolist())
    for pid, n in per_process.items():
        (label,) = [p for p in processes.index if p.startswith(f"process {pid}: ")]
        assert processes[label] == n and "workload.py" in label
    threads = tree[tree["depth"] == 2]
    # one node per (process, thread id): stacks py-spy wrote with and without the name are one
    per_thread = st.groupby(["process", "thread"])["samples"].sum()
    assert len(threads) == len(per_thread)
    assert sorted(threads["samples"]) == sorted(per_thread.tolist())
    assert set(threads["function"]) == {
        f"thread {tid} ({name})" for (pid, tid), name in
        st[st["thread_name"] != ""].groupby(["process", "thread"])["thread_name"].first().items()}
    modules = tree[(tree["function"] == "<module>") & (tree["path"] == "workload.py")
                   & (tree["depth"] == 3)]
    assert len(set(modules["parent"])) == len(per_process)  # under each process's main thread
    assert tree["self_samples"].sum() == profile.total_samples
    # a file of one process and one thread has no such level: its outermost frame is at depth 1
    single = call_tree(NODES[0])
    assert "<module>" in set(single.loc[single["depth"] == 1, "function"])
    assert "main" in set(single.loc[single["depth"] == 2, "function"])


def test_cli_report():
    result = CliRunner().invoke(
        report_command, [*map(str, NODES), "--library-name", "toylib", "--num-rows", "4"]
    )
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0].split()[:3] == ["file", "leaf_function", "leaf_path"]
    assert len(lines) == 1 + 4 + 1
    assert "run_callback" in result.output
    total = sum(read_pyspy(p).total_samples for p in NODES)
    assert lines[-1] == f"{total} samples in 2 file(s)"
    single = CliRunner().invoke(report_command, [str(SIMPLE), "--aggregate-leaf-paths"])
    assert single.exit_code == 0 and "file" not in single.output.splitlines()[0]
    assert "leaf_line" not in single.output


def test_cli_errors_and_html(tmp_path):
    missing = CliRunner().invoke(report_command, [str(tmp_path / "nope.txt")])
    assert missing.exit_code != 0 and isinstance(missing.exception, InputNotFoundError)
    bad = CliRunner().invoke(flamegraph_command, [str(SIMPLE), "-o", str(tmp_path / "x.txt")])
    assert bad.exit_code == 2 and "use a .html" in bad.output
    out = tmp_path / "flame.html"
    ok = CliRunner().invoke(flamegraph_command, [*map(str, NODES), "-o", str(out)])
    assert ok.exit_code == 0, ok.output
    html = out.read_text()
    assert "icicle" in html and "run_callback" in html


def _py_spy() -> str | None:
    beside = Path(sys.executable).parent / "py-spy"
    return str(beside) if beside.exists() else shutil.which("py-spy")


def test_live_recording(tmp_path):
    """Record workload.py now with py-spy and find the shares it was told to spend."""
    spy = _py_spy()
    if spy is None:
        pytest.skip("py-spy is not installed (pip install py-spy)")
    out = tmp_path / "live.txt"
    run = subprocess.run(
        [spy, "record", "-f", "raw", "-r", "200", "-o", str(out), "--",
         sys.executable, str(DATA / "workload.py"), "--seconds", "1.5",
         "--kernel", "0.2", "--preprocess", "0.5"],
        cwd=DATA, capture_output=True, text=True, timeout=60,
    )
    if run.returncode != 0 and ("ermission" in run.stderr or "ptrace" in run.stderr):
        pytest.skip(f"py-spy cannot trace here (ptrace denied): {run.stderr.strip()[-200:]}")
    assert run.returncode == 0, run.stderr
    report = pyspy_report(out, library_name="toylib")
    shares = leaf_shares(report)
    # Looser than for the committed files: this may run on a busy machine, where the sampler and
    # the workload compete for cores (seen: off by up to 0.13 at load average 12 on 2 cores).
    assert shares["dense_kernel"] == pytest.approx(0.2, abs=0.15)
    assert shares["user_preprocess"] == pytest.approx(0.5, abs=0.15)
    assert shares["user_callback"] == pytest.approx(0.3, abs=0.15)
    assert shares["user_preprocess"] > max(shares["dense_kernel"], shares["user_callback"])
    attributed = report.set_index("leaf_function").loc["user_callback", "library_function"]
    assert set([attributed] if isinstance(attributed, str) else attributed) == {"run_callback"}


def test_the_commands_print_what_the_library_reports_say(tmp_path):
    from analysis.reports.pyspy import samples_report, write_flamegraph

    report = samples_report(NODES, library_name="numpy", num_rows=7)
    assert len(report.table) == 7 and report.files == 2
    printed = CliRunner().invoke(report_command, [*map(str, NODES), "--library-name", "numpy",
                                                  "--num-rows", "7"])
    assert printed.exit_code == 0 and printed.output == "\n".join(report.lines()) + "\n"
    out = write_flamegraph([SIMPLE], tmp_path / "f.html")
    assert out == tmp_path / "f.html" and "icicle" in out.read_text()
    with pytest.raises(ConfigError, match="use a .html"):
        write_flamegraph([SIMPLE], tmp_path / "f.txt")


def test_a_flamegraph_that_cannot_be_written_is_an_error_naming_it(tmp_path):
    from analysis.errors import ExportError
    from analysis.reports.pyspy import write_flamegraph

    target = tmp_path / "taken.html"
    target.mkdir()  # a folder where the file goes
    with pytest.raises(ExportError, match="taken.html: cannot write"):
        write_flamegraph([SIMPLE], target)


# --- real files from the field (a sweep of public py-spy outputs, 2026-11-28) ---------------------


def test_a_child_command_line_spanning_lines_is_one_stack():
    """``-s`` of a run whose child is ``python -c`` code with newlines (torch inductor starts its
    compile workers so): py-spy writes the command line verbatim, so the stack spans several lines.
    Before, the file was rejected at line 2 (``on_error="skip"`` gave the child's samples to no
    process, under a frame named ``"``)."""
    path = DATA / "inline_child.txt"
    lines = path.read_text().splitlines()
    profile = read_pyspy(path)
    # every record's count ends its last physical line; the fragments before it carry none
    assert profile.total_samples == sum(int(x.rsplit(" ", 1)[1]) for x in lines
                                        if x.rsplit(" ", 1)[-1].isdigit())
    assert profile.skipped_lines == 0
    child = profile.stacks[profile.stacks["process_command"].str.contains(" -c ")]
    assert len(child) and child["process"].nunique() == 1
    assert child["process_command"].iloc[0].startswith(lines[child["line"].iloc[0] - 1].split(
        ':"')[-1].rstrip())  # the command begins on the stack's first line, which `line` names
    assert "\\nimport time\\n" in child["process_command"].iloc[0]  # newlines kept as \n
    assert profile.stacks["process"].nunique() == 2
    assert '"' not in set(profile.functions["function"])  # no fragment read as a frame


def test_hex_thread_ids_as_py_spy_writes_them_on_macos():
    """py-spy formats a thread id ``{:#X}`` where it has no native id (always on macOS)."""
    text = ("thread (0x16DF7B000): MainThread;<module> (x.py:1);f (x.py:3) 3\n"
            "thread (0x16DF7B000): MainThread 2\n"
            "thread (0x100850580);g (y.py:5) 1\n")
    p = parse_pyspy(text)
    assert p.stacks["thread"].tolist() == [0x16DF7B000, 0x16DF7B000, 0x100850580]
    assert p.stacks["thread_name"].tolist() == ["MainThread", "MainThread", ""]
    assert set(p.functions["function"]) == {"<module>", "f", "g"}  # no "thread" frame
    report = pyspy_report(p)
    assert report.set_index("leaf_function").loc[NO_FRAMES, "samples"] == 2


def test_an_environment_named_like_the_library_is_not_the_library():
    """``--full-filenames`` paths of a conda env called ``torch``: its standard library and other
    packages are not torch (1,129 samples of a real profile were attributed to torch so)."""
    env = "/home/u/miniconda3/envs/torch"
    text = (
        f"<module> ({env}/lib/python3.12/inspect.py:10) 5\n"
        f"<module> ({env}/lib/python3.12/site-packages/triton/cache.py:4) 7\n"
        f"f (train.py:1);mm ({env}/lib/python3.12/site-packages/torch/nn/functional.py:9);"
        f"getmodule ({env}/lib/python3.12/inspect.py:20) 11\n"
        "g (C:\\envs\\torch\\Lib\\dataclasses.py:3) 2\n"
        "h (C:\\envs\\torch\\Lib\\site-packages\\torch\\autograd\\graph.py:8) 13\n"
        "k (/home/u/pytorch/torch/_dynamo/eval_frame.py:1) 17\n"  # a source checkout: torch
    )
    report = pyspy_report(parse_pyspy(text), library_name="torch")
    found = report[report["library_function"] != NOT_FOUND]
    assert dict(zip(found["library_function"], found["samples"], strict=True)) == {
        "k": 17, "h": 13, "mm": 11}


def test_skip_mode_never_reads_another_kind_of_file_as_samples(tmp_path):
    """With ``on_error="skip"`` a pretty-printed JSON file gave "307628 samples" of a frame
    ``"frame":``, and a ``# duration: 1000`` comment 1000 samples."""
    for text, words in (
        ('{\n  "events": [\n    {\n      "frame": 12\n    }\n  ]\n}\n', "not a speedscope file"),
        ('[{"pid": 1, "ts": 5, "ph": "X"}]\n', "Chrome trace"),
        ("Process 712529: python train.py\nPython v3.11.2 (/usr/bin/python3)\n", "py-spy dump"),
        ("<svg version='1.1'>\n<g><title>f (x.py:1) (3 samples)</title></g> 3\n", "SVG output"),
    ):
        for mode in ("raise", "skip"):
            with pytest.raises(CorruptInputError, match=words):
                parse_pyspy(text, on_error=mode)
    p = parse_pyspy("# duration: 1000\na;b 3\n# comment 7\nc 4\n", on_error="skip")
    assert (p.total_samples, p.skipped_lines) == (7, 2)
    with pytest.raises(CorruptInputError, match="line 1"):
        parse_pyspy("# duration: 1000\na;b 3\n")


def _speedscope_counts(path: Path) -> dict[str, int]:
    """Samples per profile name, read straight from the JSON (one sample per entry)."""
    import json
    doc = json.loads(path.read_text())
    return {p["name"]: len(p["samples"]) for p in doc["profiles"]}


def test_speedscope_recording_gives_the_known_shares():
    """``py-spy record -f speedscope`` of the same workload: the same shares as the raw file, every
    sample counted once, the same frames (function, file, line) as py-spy's raw format names."""
    path = DATA / "simple.speedscope.json"
    profile = read_pyspy(path)
    assert profile.total_samples == sum(_speedscope_counts(path).values())
    report = pyspy_report(profile, library_name="toylib")
    for name, share in leaf_shares(report).items():
        assert share == pytest.approx(EXPECTED[name], abs=TOLERANCE), name
    callback = report[report["leaf_function"] == "user_callback"]
    assert set(callback["library_function"]) == {"run_callback"}
    assert set(callback["library_line"]) == {RUN_CALLBACK_LINE}
    # the same frames as the raw recording names, with the full file names speedscope keeps
    raw = read_pyspy(SIMPLE)
    ours = {(f, Path(path).name, line) for f, path, line in profile.functions.to_numpy()}
    loop = raw.functions[raw.functions["function"].isin(list(EXPECTED))]
    assert {(f, Path(path).name, line) for f, path, line in loop.to_numpy()} <= ours
    tree = call_tree(profile)
    assert tree.loc[tree["depth"] == 0, "samples"].item() == profile.total_samples
    assert tree["self_samples"].sum() == profile.total_samples


def test_speedscope_threads_and_processes():
    """``-f speedscope -s --threads --idle``: one profile per (process, thread), named
    ``Process PID Thread TID "NAME"``; the worker thread and the child process are apart."""
    path = DATA / "threads.speedscope.json"
    profile = read_pyspy(path)
    counts = _speedscope_counts(path)
    st = profile.stacks
    assert profile.total_samples == sum(counts.values())
    assert st["process"].nunique() == 2 and (st["process"] > 0).all()
    assert "worker" in set(st["thread_name"])
    by_thread = st.groupby(["process", "thread", "thread_name"])["samples"].sum()
    expected = {}
    for name, n in counts.items():
        pid, tid, thread = re.match(r'Process (\d+) Thread (\d+) "(.*)"', name).groups()
        expected[(int(pid), int(tid), thread)] = n
    assert by_thread.to_dict() == expected
    assert (st["line"] == -1).all() and (st["process_command"] == "").all()


def test_speedscope_variants_and_damage():
    import json
    frames = [{"name": "main", "file": "t.py", "line": 1}, {"name": "f", "file": "t.py", "line": None}]
    base = {"$schema": "https://www.speedscope.app/file-format-schema.json", "exporter": "py-spy@0.3.6",
            "shared": {"frames": frames}}
    # py-spy 0.3.x: profiles named by the thread's name only; "unit": "none" weights are counts
    doc = dict(base, profiles=[{"type": "sampled", "name": "MainThread", "unit": "none",
                                "startValue": 0, "endValue": 5,
                                "samples": [[0, 1], [0, 1], [0], []], "weights": [1, 2, 1, 1]}])
    p = parse_pyspy(json.dumps(doc))
    assert p.total_samples == 5
    assert p.stacks["thread"].tolist() == [-1] * 3 and set(p.stacks["thread_name"]) == {"MainThread"}
    assert p.functions["line"].tolist() == [1, -1]  # --function: no line
    report = pyspy_report(p).set_index("leaf_function")["samples"].to_dict()
    assert report == {"f": 3, "main": 1, NO_FRAMES: 1}
    evented = dict(base, exporter="pyinstrument", profiles=[{"type": "evented", "name": "x",
                                                              "events": []}])
    with pytest.raises(CorruptInputError, match="without sampled profiles.*pyinstrument"):
        parse_pyspy(json.dumps(evented))
    bad = dict(base, profiles=[{"type": "sampled", "name": "t", "unit": "seconds",
                                "samples": [[0, 7]], "weights": [0.01]}])
    with pytest.raises(CorruptInputError, match="frame indices below 2"):
        parse_pyspy(json.dumps(bad))
    with pytest.raises(CorruptInputError, match="invalid JSON"):
        parse_pyspy('{"profiles": [')
    damaged = dict(doc, profiles=[dict(doc["profiles"][0], weights=[1, "x", 1, 1])])
    with pytest.raises(CorruptInputError, match="a weight of 'x' is no count"):
        parse_pyspy(json.dumps(damaged))
    with pytest.raises(CorruptInputError, match="nested too deeply"):
        parse_pyspy('{"a":' * 50000 + "1" + "}" * 50000)
