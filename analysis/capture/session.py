"""``profile(config)``: ``torch.profiler`` set up from a ``ProfilerConfig``, with a trace handler that
names traces by rank and step, gzips them, and uploads them when ``log_dir`` is remote.

Usage::

    with profile(ProfilerConfig(wait=1, warmup=1, active=3, log_dir="gs://bucket/run")) as prof:
        for batch in loader:
            train_step(batch)
            prof.step()

Each trace is written as ``rank{R}.step{S}.pt.trace.json.gz``: R is the process's rank and S the
highest ``ProfilerStep#`` in the trace (the cycle's last recorded step, or the unfinished step of a
partial trace written when the loop ends while recording). For a remote ``log_dir`` traces are
staged in a local temporary directory and uploaded in the background; leaving the context waits
for the uploads, deletes the staging directory when all succeeded, and otherwise raises
``TraceUploadError`` naming the files kept on disk.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from analysis.capture.config import ProfilerConfig
from analysis.capture.upload import TraceUploader


class DisabledProfiler:
    """What ``profile()`` yields when profiling is disabled: ``step()`` does nothing."""

    enabled = False
    traces: tuple[str, ...] = ()

    def step(self) -> None:
        pass


class ProfilerSession:
    """What ``profile()`` yields when profiling is enabled; call ``step()`` once per training step.

    ``traces`` lists where each trace went (local paths, or URLs when uploaded);
    ``torch_profiler`` is the underlying ``torch.profiler.profile``.
    """

    enabled = True

    def __init__(self, config: ProfilerConfig, stage_dir: str, uploader: TraceUploader | None):
        self.config = config
        self.stage_dir = stage_dir
        self.uploader = uploader
        self.traces: list[str] = []
        self.torch_profiler = None
        self._in_step = False

    def step(self) -> None:
        self._in_step = True
        try:
            self.torch_profiler.step()
        finally:
            self._in_step = False

    def on_trace_ready(self, prof) -> None:
        """torch's ``on_trace_ready`` callback: export, optionally tabulate, hand over for upload."""
        # Called from step() after the counter moved past the cycle's last step, or from stop()
        # at exit with the unfinished step still open (and in the trace).
        last_step = prof.step_num - 1 if self._in_step else prof.step_num
        stem = f"rank{current_rank()}.step{last_step}"
        suffix = ".pt.trace.json.gz" if self.config.gzip else ".pt.trace.json"
        path = os.path.join(self.stage_dir, stem + suffix)
        prof.export_chrome_trace(path)  # torch gzips when the name ends in .gz
        written = [path]
        if self.config.top_operators > 0:
            written.append(self._write_operator_table(prof, stem))
        if self.uploader is None:
            self.traces.append(path)
            return
        for local in written:
            self.uploader.submit(local)
        self.traces.append(f"{self.config.log_dir.rstrip('/')}/{os.path.basename(path)}")

    def _write_operator_table(self, prof, stem: str) -> str:
        averages = prof.key_averages()
        on_device = any(getattr(e, "self_device_time_total", 0) > 0 for e in averages)
        sort_by = "self_device_time_total" if on_device else "self_cpu_time_total"
        path = os.path.join(self.stage_dir, f"{stem}.top_operators.txt")
        Path(path).write_text(averages.table(sort_by=sort_by, row_limit=self.config.top_operators))
        return path


def current_rank() -> int:
    """torch.distributed's rank when a process group is up, else the ``RANK`` env var, else 0."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        return dist.get_rank()
    try:
        return int(os.environ.get("RANK", "0"))
    except ValueError:
        return 0


def torch_activities(config: ProfilerConfig) -> list:
    """The ``ProfilerActivity`` list: as configured, else CPU plus CUDA when available."""
    import torch
    from torch.profiler import ProfilerActivity

    names = config.activities
    if names is None:
        names = ("cpu", "cuda") if torch.cuda.is_available() else ("cpu",)
    return [getattr(ProfilerActivity, n.upper()) for n in names]


@contextmanager
def profile(config: ProfilerConfig) -> Iterator[ProfilerSession | DisabledProfiler]:
    """Profile the enclosed loop as ``config`` says; yields an object with ``.step()``."""
    if not config.enabled:
        yield DisabledProfiler()
        return

    import torch.profiler

    if config.is_remote:
        stage_dir = tempfile.mkdtemp(prefix="trace-analysis-")
        uploader = TraceUploader(config.log_dir, dict(config.storage_options))
    else:
        stage_dir = config.log_dir.removeprefix("file://")
        os.makedirs(stage_dir, exist_ok=True)
        uploader = None
    session = ProfilerSession(config, stage_dir, uploader)
    prof = torch.profiler.profile(
        activities=torch_activities(config),
        schedule=torch.profiler.schedule(
            skip_first=config.skip_first,
            wait=config.wait,
            warmup=config.warmup,
            active=config.active,
            repeat=config.repeat,
            skip_first_wait=int(config.skip_first_wait),
        ),
        on_trace_ready=session.on_trace_ready,
        record_shapes=config.record_shapes,
        profile_memory=config.profile_memory,
        with_stack=config.with_stack,
        with_flops=config.with_flops,
        with_modules=config.with_modules,
    )
    session.torch_profiler = prof
    body_failed = False
    try:
        with prof:
            yield session
    except BaseException:
        body_failed = True
        raise
    finally:
        if uploader is not None:
            # Do not hide the loop's own exception behind an upload error; failures are logged.
            uploader.finish(raise_errors=not body_failed)
            if not uploader.failures:
                shutil.rmtree(stage_dir, ignore_errors=True)
