"""profile(config) around real torch training loops (CPU): one process, two gloo ranks, upload to a
real local GCS server. Needs torch (`pip install torch==2.13.0`)."""

from __future__ import annotations

import gzip
import importlib.util
import json
import os
import re
import socket
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

if importlib.util.find_spec("torch") is None:  # imported by each test: not at collection
    pytest.skip("needs torch: pip install torch==2.13.0", allow_module_level=True)

from paths import REPO_ROOT  # noqa: E402

from analysis.capture import (  # noqa: E402
    ProfilerConfig,
    TraceUploadError,
    profile,
    schedule_action,
    schedule_table,
)
from analysis.capture.schedule import recorded_steps_per_trace  # noqa: E402
from analysis.kineto.parse import parse_trace_bytes  # noqa: E402

REPO = REPO_ROOT
NAME_RE = re.compile(r"rank(\d+)\.step(\d+)\.pt\.trace\.json\.gz$")


def train(prof, steps: int) -> None:
    """A tiny training loop that calls prof.step() once per step."""
    import torch
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    for _ in range(steps):
        loss = model(torch.randn(32, 16)).pow(2).mean()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        prof.step()


def open_traces(trace_dir=None, trace_files=None, **options):
    """The traces as users open them (the facade is imported here: it pulls in every analysis)."""
    from analysis.api import TraceAnalysis

    return TraceAnalysis(trace_dir=trace_dir, trace_files=trace_files, use_cache=False,
                         progress=False, **options)


def trace_steps(path: Path) -> list[int]:
    """The ProfilerStep numbers in a written trace file, through our own parser."""
    rank_trace = parse_trace_bytes(Path(path).read_bytes(), str(path))
    return rank_trace.profiler_steps()["step"].tolist()


def written_traces(directory: Path) -> list[Path]:
    """Trace files in write order (by the step in their name)."""
    files = [p for p in directory.iterdir() if NAME_RE.search(p.name)]
    return sorted(files, key=lambda p: int(NAME_RE.search(p.name).group(2)))


@settings(max_examples=200, deadline=None)
@given(
    skip_first=st.integers(0, 4),
    wait=st.integers(0, 3),
    warmup=st.integers(0, 3),
    active=st.integers(1, 4),
    repeat=st.integers(0, 3),
    skip_first_wait=st.booleans(),
)
def test_schedule_action_agrees_with_torch(skip_first, wait, warmup, active, repeat, skip_first_wait):
    import torch
    config = ProfilerConfig(skip_first=skip_first, wait=wait, warmup=warmup, active=active,
                            repeat=repeat, skip_first_wait=skip_first_wait)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch warns when warmup == 0
        torch_fn = torch.profiler.schedule(skip_first=skip_first, wait=wait, warmup=warmup,
                                           active=active, repeat=repeat,
                                           skip_first_wait=int(skip_first_wait))
    for step in range(40):
        assert schedule_action(config, step) == torch_fn(step).name, step


@pytest.mark.parametrize("steps", [11, 9, 4])
def test_schedule_table_matches_what_torch_recorded(tmp_path, steps):
    # repeat=0: cycles until the loop ends; steps=9 and 4 end mid-recording (partial trace at exit)
    config = ProfilerConfig(skip_first=2, wait=1, warmup=1, active=2, repeat=0, log_dir=str(tmp_path))
    with profile(config) as prof:
        train(prof, steps)
    expected = recorded_steps_per_trace(schedule_table(config, steps))
    files = written_traces(tmp_path)
    assert [trace_steps(f) for f in files] == expected
    assert [int(NAME_RE.search(f.name).group(2)) for f in files] == [s[-1] for s in expected]
    assert [str(f) for f in files] == prof.traces


def test_single_process_traces_load_with_trace_analysis(tmp_path, monkeypatch):
    monkeypatch.delenv("RANK", raising=False)
    config = ProfilerConfig(wait=1, warmup=1, active=3, repeat=1, log_dir=str(tmp_path / "run"))
    with profile(config) as prof:
        train(prof, 8)
    assert [Path(p).name for p in prof.traces] == ["rank0.step4.pt.trace.json.gz"]
    ta = open_traces(tmp_path / "run")
    assert ta.ranks == [0]
    assert ta.full_trace[0].profiler_steps()["step"].tolist() == [2, 3, 4]
    names = set(ta.full_trace[0].events["name"].astype(str))
    assert {"aten::linear", "aten::relu"} <= names


def test_rank_from_env_and_operator_table(tmp_path, monkeypatch):
    monkeypatch.setenv("RANK", "3")
    config = ProfilerConfig(warmup=1, active=2, repeat=1, log_dir=str(tmp_path), top_operators=5,
                            record_shapes=True)
    with profile(config) as prof:
        train(prof, 4)
    assert [Path(p).name for p in prof.traces] == ["rank3.step2.pt.trace.json.gz"]
    table = (tmp_path / "rank3.step2.top_operators.txt").read_text().splitlines()
    separators = [i for i, line in enumerate(table) if line.startswith("---")]
    header = re.split(r"\s{2,}", table[separators[0] + 1].strip())
    rows = [re.split(r"\s{2,}", line.strip()) for line in table[separators[1] + 1 : separators[2]]]
    assert 1 <= len(rows) <= 5
    # which operators are the top 5 by self CPU time depends on the machine's timing (aten::addmm
    # was 6th once): each row is one the run recorded (torch groups the steps as
    # "ProfilerStep*" and cuts long names with "...")
    recorded = {e.get("name", "") for e in json.loads(
        gzip.decompress(Path(prof.traces[0]).read_bytes()))["traceEvents"]}
    for name in (row[0] for row in rows):
        stem = name.removesuffix("*").removesuffix("...")
        assert name in recorded or (stem != name and any(r.startswith(stem) for r in recorded))
    # CPU-only run: sorted by self CPU time, descending
    assert not any("CUDA" in h or "Device" in h for h in header)
    self_cpu = [_us(row[header.index("Self CPU")]) for row in rows]
    assert self_cpu == sorted(self_cpu, reverse=True)


def _us(text: str) -> float:
    """A duration as torch's table prints it ("37.845us", "1.2ms", "3.0s") in µs."""
    for unit, scale in (("us", 1.0), ("ms", 1e3), ("s", 1e6)):
        if text.endswith(unit):
            return float(text[: -len(unit)]) * scale
    raise ValueError(text)


def test_uncompressed_traces_when_gzip_off(tmp_path):
    config = ProfilerConfig(warmup=1, active=1, repeat=1, log_dir=str(tmp_path), gzip=False)
    with profile(config) as prof:
        train(prof, 3)
    assert [Path(p).name for p in prof.traces] == ["rank0.step1.pt.trace.json"]
    assert trace_steps(tmp_path / "rank0.step1.pt.trace.json") == [1]


def test_disabled_profiler_is_a_no_op(tmp_path):
    config = ProfilerConfig.from_dict({"should_enable_profiler": "False", "profiler_log_dir": str(tmp_path / "x")})
    with profile(config) as prof:
        train(prof, 3)
    assert prof.enabled is False and list(prof.traces) == []
    assert not (tmp_path / "x").exists()


def _gcsfs(endpoint: str):
    import gcsfs

    return gcsfs.GCSFileSystem(endpoint_url=endpoint, token="anon")


def test_upload_to_gcs(gcs_emulator, tmp_path, monkeypatch):
    monkeypatch.setenv("TMPDIR", str(tmp_path))  # the staging directory must be cleaned up
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)
    fs = _gcsfs(gcs_emulator)
    fs.mkdir("capture-bucket")
    options = {"endpoint_url": gcs_emulator, "token": "anon"}
    config = ProfilerConfig(wait=0, warmup=1, active=2, repeat=2, log_dir="gs://capture-bucket/run1",
                            storage_options=options, top_operators=3)
    with profile(config) as prof:
        train(prof, 6)
    assert prof.traces == ["gs://capture-bucket/run1/rank0.step2.pt.trace.json.gz",
                           "gs://capture-bucket/run1/rank0.step5.pt.trace.json.gz"]
    fs.invalidate_cache()
    assert sorted(Path(p).name for p in fs.ls("capture-bucket/run1")) == [
        "rank0.step2.pt.trace.json.gz", "rank0.step2.top_operators.txt",
        "rank0.step5.pt.trace.json.gz", "rank0.step5.top_operators.txt",
    ]
    assert list(tmp_path.glob("trace-analysis-*")) == []  # nothing left un-uploaded
    ta = open_traces(trace_files=[prof.traces[1]], storage_options=options)
    assert ta.ranks == [0]
    assert ta.full_trace[0].profiler_steps()["step"].tolist() == [4, 5]


def test_upload_failure_keeps_the_local_file(gcs_emulator, tmp_path, monkeypatch):
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)
    config = ProfilerConfig(warmup=1, active=1, repeat=1, log_dir="gs://no-such-bucket/run",
                            storage_options={"endpoint_url": gcs_emulator, "token": "anon"})
    with pytest.raises(TraceUploadError) as info:
        with profile(config) as prof:
            train(prof, 3)
    [(local, url, _reason)] = info.value.failures
    assert url == "gs://no-such-bucket/run/rank0.step1.pt.trace.json.gz"
    assert url in str(info.value) and local in str(info.value)
    assert Path(local).is_file() and Path(local).parent.parent == tmp_path
    assert trace_steps(Path(local)) == [1]


def test_loop_error_is_not_hidden_by_upload_error(gcs_emulator, tmp_path, monkeypatch):
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)
    config = ProfilerConfig(warmup=1, active=1, repeat=1, log_dir="gs://no-such-bucket/run",
                            storage_options={"endpoint_url": gcs_emulator, "token": "anon"})
    with pytest.raises(RuntimeError, match="loss is NaN"):
        with profile(config) as prof:
            train(prof, 3)
            raise RuntimeError("loss is NaN")
    [kept] = tmp_path.glob("trace-analysis-*/rank0.step1.pt.trace.json.gz")
    assert trace_steps(kept) == [1]


WORKER = textwrap.dedent(
    """
    import sys
    import torch
    import torch.distributed as dist
    from analysis.capture import ProfilerConfig, profile

    # rank given to the process group only (no RANK variable): the file name must come from it
    rank, port, out = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
    torch.manual_seed(0)
    model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(8, 2))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    config = ProfilerConfig(wait=1, warmup=1, active=2, repeat=1, log_dir=out)
    with profile(config) as prof:
        for _ in range(5):
            model(torch.randn(4, 8)).sum().backward()
            optimizer.step()
            optimizer.zero_grad()
            prof.step()
    dist.destroy_process_group()
    # The traces are written; skip interpreter teardown, where gloo's threads can abort the process
    # ("terminate called without an active exception") on a loaded machine.
    sys.stdout.flush()
    import os
    os._exit(0)
    """
)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_two_gloo_ranks(tmp_path):
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    out = tmp_path / "traces"
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK")}
    env.update(PYTHONPATH=str(REPO), OMP_NUM_THREADS="1")
    port = str(_free_port())
    procs = [
        subprocess.Popen([sys.executable, str(script), str(rank), port, str(out)], env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        for rank in (0, 1)
    ]
    for proc in procs:
        output, _ = proc.communicate(timeout=120)
        assert proc.returncode == 0, output
    assert sorted(p.name for p in out.iterdir()) == ["rank0.step3.pt.trace.json.gz",
                                                     "rank1.step3.pt.trace.json.gz"]
    ta = open_traces(out)
    assert ta.ranks == [0, 1]
    for rank in (0, 1):
        meta = ta.full_trace[rank].meta
        assert (meta.rank_origin, meta.backend, meta.world_size) == ("distributedInfo", "gloo", 2)
        assert ta.full_trace[rank].profiler_steps()["step"].tolist() == [2, 3]
