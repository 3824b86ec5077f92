"""Real gloo sizes: 2 ranks on 127.0.0.1 under torch.profiler, a reduce-scatter and an all-reduce
per step. Needs torch (`pip install torch==2.13.0`).

gloo runs ``reduce_scatter_tensor`` as an all-reduce of the whole input and annotates it
``gloo:all_reduce``. Pairing ops with annotations of their own type by count found none for the
reduce-scatter (no size, its end the op's enqueue time) and two for the one all-reduce, which then
lost its size too (found on real gloo FSDP jobs of a sweep). Sizes are what nccl-tests counts:
the reduce-scatter's input, the all-reduce's tensor.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import textwrap

import pytest

if importlib.util.find_spec("torch") is None:  # the ranks import it, not this process
    pytest.skip("needs torch: pip install torch==2.13.0", allow_module_level=True)

from paths import REPO_ROOT  # noqa: E402

from analysis.kineto.loader import load_trace  # noqa: E402
from analysis.kineto.window import profiler_step_window  # noqa: E402
from analysis.metrics.distributed import collectives as C  # noqa: E402
from tests.conftest import _free_port  # noqa: E402

RANKS = 2
SCATTER_IN, REDUCED = 2048, 1000  # float32 elements

WORKER = textwrap.dedent(
    f"""
    import os, sys
    import torch
    import torch.distributed as dist

    rank, port, out = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{{port}}", rank=rank,
                            world_size={RANKS})
    def save(prof):
        prof.export_chrome_trace(os.path.join(out, f"rank{{rank}}.pt.trace.json"))
    schedule = torch.profiler.schedule(wait=0, warmup=1, active=4, repeat=1)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU],
                                schedule=schedule, on_trace_ready=save, record_shapes=True) as prof:
        for step in range(6):
            out_t = torch.empty({SCATTER_IN // RANKS})
            dist.reduce_scatter_tensor(out_t, torch.ones({SCATTER_IN}))
            dist.all_reduce(torch.ones({REDUCED}))
            prof.step()
    dist.barrier()
    sys.stdout.flush()
    os._exit(0)  # gloo's teardown can abort a loaded machine's process
    """
)


@pytest.fixture(scope="module")
def table(tmp_path_factory):
    out = tmp_path_factory.mktemp("gloo-sizes")
    script = tmp_path_factory.mktemp("gloo-sizes-worker") / "worker.py"
    script.write_text(WORKER)
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK")}
    env.update(PYTHONPATH=str(REPO_ROOT), OMP_NUM_THREADS="1")
    port = str(_free_port())
    procs = [subprocess.Popen([sys.executable, str(script), str(r), port, str(out)], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
             for r in range(RANKS)]
    for proc in procs:
        output, _ = proc.communicate(timeout=180)
        assert proc.returncode == 0, output
    trace = profiler_step_window(load_trace(str(out), use_cache=False, progress=False))
    return C.combine({r: C.collectives_rank(trace[r]) for r in trace})


def test_a_reduce_scatter_run_as_an_all_reduce_gets_its_size_and_end(table):
    by_type = {t: g for t, g in table.groupby("type")}
    assert set(by_type) == {"reduce_scatter", "all_reduce"}
    scatter, reduced = by_type["reduce_scatter"], by_type["all_reduce"]
    assert len(scatter) == len(reduced) == RANKS * 3  # the 3 analysed steps (last one dropped)
    assert set(scatter["bytes"]) == {SCATTER_IN * 4}
    assert set(reduced["bytes"]) == {REDUCED * 4}
    # each ends where gloo's work for it ends, after the op itself returned (the enqueue)
    assert (scatter["duration_us"] > 0).all() and scatter["busbw_gbps"].notna().all()
