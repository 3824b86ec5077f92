"""``fails_after``: a hang inside a test becomes a failure (Unix: SIGALRM, main thread only)."""

from __future__ import annotations

import signal
from contextlib import contextmanager


@contextmanager
def fails_after(seconds: int, what: str = "this block"):
    """Raise ``TimeoutError`` in the block when it runs longer than ``seconds``."""

    def on_alarm(signum, frame):
        raise TimeoutError(f"{what} ran over {seconds} s: a hang")

    previous = signal.signal(signal.SIGALRM, on_alarm)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
