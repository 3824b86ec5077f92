"""Library code the workload calls into; ``dense_kernel`` is a library leaf, ``run_callback`` calls back
into user code (so the deepest library frame is not the leaf)."""

import time


def dense_kernel(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def step(seconds: float) -> None:
    dense_kernel(seconds)


def run_callback(callback, seconds: float) -> None:
    callback(seconds)
