"""The program recorded by ``record.py``: spends known shares of wall time in known functions.

Each cycle (5-35 ms, parts in random order) busy-waits ``--kernel`` of it in ``toylib.engine.dense_kernel`` (leaf in the library),
``--preprocess`` in ``user_preprocess`` (user code, no library frame on the stack) and the rest in
``user_callback``, which ``toylib.engine.run_callback`` calls (leaf in user code, deepest library frame
``run_callback``). ``--thread`` runs the same loop in a second thread too; ``--subprocess`` starts a
child process running the loop; ``--inline-child`` starts a child from ``python -c`` code spanning
several lines (as torch inductor's compile workers are started), which spins for the same time.
"""

import argparse
import random
import subprocess
import sys
import threading
import time

from toylib import engine

# Cycles of random length, in random order: a fixed 20 ms cycle aliases with py-spy's fixed
# sampling period (5 ms at 200 Hz) and biases the shares by ±20 % under CPU contention.
CYCLE_S = (0.005, 0.035)


def user_preprocess(seconds: float) -> None:
    # two busy lines, so samples land on both (what `aggregate_leaf_paths` merges)
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        sum(range(100))


def user_callback(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def train_loop(total_s: float, kernel: float, preprocess: float) -> None:
    callback = 1.0 - kernel - preprocess
    rng = random.Random(0)
    end = time.perf_counter() + total_s
    while time.perf_counter() < end:
        cycle = rng.uniform(*CYCLE_S)
        for part in rng.sample(range(3), 3):
            if part == 0:
                engine.step(cycle * kernel)
            elif part == 1:
                user_preprocess(cycle * preprocess)
            else:
                engine.run_callback(user_callback, cycle * callback)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--kernel", type=float, default=0.5)
    parser.add_argument("--preprocess", type=float, default=0.3)
    parser.add_argument("--thread", action="store_true")
    parser.add_argument("--subprocess", action="store_true")
    parser.add_argument("--inline-child", action="store_true")
    args = parser.parse_args()
    child = None
    if args.subprocess:
        child = subprocess.Popen(
            [sys.executable, __file__, "--seconds", str(args.seconds), "--kernel", str(args.kernel),
             "--preprocess", str(args.preprocess)]
        )
    if args.inline_child:  # the command line py-spy writes holds these newlines verbatim
        code = f"\nimport time\nend = time.monotonic() + {args.seconds}\nwhile time.monotonic() < end:\n    pass\n"
        child = subprocess.Popen([sys.executable, "-c", code])
    worker = None
    if args.thread:
        worker = threading.Thread(
            target=train_loop, args=(args.seconds, args.kernel, args.preprocess), name="worker"
        )
        worker.start()
    train_loop(args.seconds, args.kernel, args.preprocess)
    if worker is not None:
        worker.join()
    if child is not None:
        child.wait()


if __name__ == "__main__":
    main()
