"""Copying finished trace files from the local staging directory to a remote ``log_dir``.

Uploads run on one background thread so that a training step never waits on the network;
``finish()`` waits for all of them. A file whose upload failed stays on local disk and is named in
the ``TraceUploadError`` raised by ``finish()``: the trace is never lost because a bucket was
unreachable.
"""

from __future__ import annotations

import logging
import os
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from analysis.errors import TraceAnalysisError

log = logging.getLogger(__name__)


class TraceUploadError(TraceAnalysisError):
    """Some traces could not be copied to ``log_dir``; ``failures`` holds (local path, URL, reason).

    The local files are kept; the message says where.
    """

    def __init__(self, failures: list[tuple[str, str, str]]):
        self.failures = list(failures)
        lines = "\n".join(f"  - {url}: {reason} (kept at {local})" for local, url, reason in failures)
        super().__init__(f"{len(failures)} trace file(s) could not be uploaded:\n{lines}")


@dataclass
class TraceUploader:
    """Uploads local files to ``log_dir`` (any fsspec URL) in the background."""

    log_dir: str
    storage_options: dict[str, Any] = field(default_factory=dict)
    uploaded: list[str] = field(default_factory=list)  # URLs written
    failures: list[tuple[str, str, str]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="trace-upload")
        self._pending: list[Future] = []
        self._fs = None

    def submit(self, local_path: str) -> None:
        """Queue ``local_path`` for upload to ``log_dir/<its name>``."""
        self._pending.append(self._pool.submit(self._upload, local_path))

    def finish(self, raise_errors: bool = True) -> None:
        """Wait for every queued upload; raise ``TraceUploadError`` if any failed."""
        for future in self._pending:
            future.result()  # _upload records failures itself and never raises
        self._pending.clear()
        self._pool.shutdown(wait=True)
        if self.failures and raise_errors:
            raise TraceUploadError(self.failures)

    def _upload(self, local_path: str) -> None:
        url = f"{self.log_dir.rstrip('/')}/{os.path.basename(local_path)}"
        try:
            fs, root = self._filesystem()
            fs.put_file(local_path, f"{root.rstrip('/')}/{os.path.basename(local_path)}")
        except Exception as e:  # any backend error (auth, network, missing bucket) is reported, not raised
            reason = f"{type(e).__name__}: {e}"
            log.warning("could not upload %s to %s: %s; the file is kept", local_path, url, reason)
            self.failures.append((local_path, url, reason))
            return
        self.uploaded.append(url)
        os.remove(local_path)

    def _filesystem(self):
        if self._fs is None:
            import fsspec

            self._fs = fsspec.core.url_to_fs(self.log_dir, **self.storage_options)
        return self._fs
