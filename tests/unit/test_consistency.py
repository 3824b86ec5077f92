"""Headline numbers that must agree with each other, on every trace the tests reach.

Rules (each a function below, run on every trace of ``TRACES`` that has what it needs):

1. ``critical_path_covers_the_step``: the critical path's category shares sum to 100 % and its
   length is the step's duration plus how far GPU work launched in the step runs past its end.
2. ``host_bound_step_is_not_gpu_bound``: a step whose GPU is idle more than half the time waiting
   for the host (``step_idle_host_wait_us``) has less than half its critical path on the GPU, and
   a rank all of whose steps are like that is not headlined as GPU-bound.
3. ``wait_caused_is_bounded``: the wait a rank caused, per step, is at most (ranks − 1) × the
   median step, and over the window at most (ranks − 1) × the analysed steps' time.
4. ``one_rank_is_unknown``: with one rank loaded, skew, wait and every straggler number are NaN
   and the straggler rule is not run ("one rank loaded").
5. ``busy_time_adds_up``: per rank, the temporal breakdown's busy time (GPU span − idle) equals the
   sum over steps of computation + exposed communication + memory + other GPU time of the step
   breakdown, over the same window: the step breakdown counts the GPU work launched in each step
   (or else starting in it) wherever it ran (past the step's end included), so only GPU work that
   neither launched nor started in a step is added back.
6. ``path_is_no_longer_than_the_steps_work``: the critical path of a step is as long as the step
   plus how far the GPU work launched in it runs past its end, the step breakdown's
   ``past_step_end_us`` (the two analyses agree on where a step's work ends).

Each trace is loaded once (a module-scoped ``TraceAnalysis`` per trace); real traces skip when
``../shared/traces`` is absent.
"""

from __future__ import annotations

import json
import warnings

import numpy as np
import pandas as pd
import pytest
from trace_helpers import load

from analysis.api import TraceAnalysis
from analysis.metrics.critical_path.critical_path import BOUND_BY, headline
from analysis.metrics.intervals import merge
from analysis.metrics.kernel_types import classified_gpu_events
from analysis.testing import critical_path_traces as cpt
from analysis.testing.collectives import CollectiveJobConfig, generate_collective_job
from tests.conftest import SAMPLE_TRACES, SHARED_TRACES

GPU_BOUND = ("gpu_compute_bound", "gpu_communication_bound")
BUSY_PARTS = ["computation_us", "exposed_comm_us", "memory_us", "other_us"]
TRACES = {
    "sample_traces": SAMPLE_TRACES,
    "collective_job": None,  # synthetic, written to a temporary folder
    "tracelens_h100_bert": SHARED_TRACES / "tracelens/h100/gaunernst_bert-small-uncased__1016001.json.gz",
    "tracelens_h100_falconsai": SHARED_TRACES
    / "tracelens/h100/Falconsai_nsfw_image_detection__1016002.json.gz",
    "tracelens_h100_qwen": SHARED_TRACES / "tracelens/h100/Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz",
    "hta_trace_filter": SHARED_TRACES / "hta/trace_filter",
    "hta_nccl_parser_config": SHARED_TRACES / "hta/nccl_parser_config",
    # real NCCL training traces: DDP's all-reduces launched from the autograd thread (V100), and
    # pipeline send/recv on three NCCL streams with GPU work running past its step (A100)
    "hta_df_index_resolver": SHARED_TRACES / "hta/df_index_resolver",
    "hta_negative_queue_length": SHARED_TRACES / "hta/negative_queue_length_values_check",
    "stream_wait_on_allreduce": None,  # synthetic (analysis.testing.critical_path_traces)
    "queued_behind_pending_work": None,  # synthetic: steps with GPU work queued before them
}


class Loaded:
    """One trace's tables, each computed once."""

    def __init__(self, ta: TraceAnalysis):
        self.ta = ta
        self._cache: dict[str, pd.DataFrame] = {}

    def get(self, method: str) -> pd.DataFrame:
        if method not in self._cache:
            fn = getattr(self.ta, method)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                try:
                    self._cache[method] = fn(visualize=False)
                except TypeError:
                    self._cache[method] = fn()
        return self._cache[method]


@pytest.fixture(scope="module", params=list(TRACES))
def loaded(request, tmp_path_factory) -> Loaded:
    path = TRACES[request.param]
    if request.param == "collective_job":
        path = tmp_path_factory.mktemp("collective-job")
        generate_collective_job(CollectiveJobConfig(ranks=4)).write(path)
    elif path is None:
        doc, _ = cpt.SCENARIOS[request.param](3)
        path = tmp_path_factory.mktemp(request.param) / f"{request.param}.json"
        path.write_text(json.dumps(doc))
    elif not path.exists():
        pytest.skip(f"trace not available: {path} does not exist")
    return Loaded(load(path))


def test_critical_path_covers_the_step(loaded):
    cp = loaded.get("get_critical_path_summary")
    assert len(cp)
    shares = cp[list(BOUND_BY)].sum(axis=1)
    np.testing.assert_allclose(shares, 100.0, rtol=0, atol=1e-6)
    np.testing.assert_allclose(cp["path_length_us"], cp["step_us"] + cp["past_step_end_us"],
                               rtol=1e-9, atol=1e-3)


def test_host_bound_step_is_not_gpu_bound(loaded):
    steps = loaded.get("get_step_breakdown")
    cp = loaded.get("get_critical_path_summary").copy()
    cp["step"] = pd.to_numeric(cp["instance"].str.extract(r"#(\d+)$")[0], errors="coerce")
    host_bound = steps["step_idle_host_wait_us"] > 0.5 * steps["step_time_us"]
    both = steps[host_bound].merge(cp, on=["rank", "step"])
    assert (both[list(GPU_BOUND)].sum(axis=1) < 50).all(), both
    head = headline(cp)
    all_host = steps.assign(h=host_bound).groupby("rank")["h"].all()
    for rank in all_host[all_host].index:
        row = head[head["rank"] == rank]
        assert row["critical_path_bound_by"].iloc[0] not in GPU_BOUND


def test_wait_caused_is_bounded(loaded):
    steps = loaded.get("get_step_breakdown")
    ranks = steps["rank"].nunique()
    if ranks < 2:
        pytest.skip("one rank: nothing waits")
    s = loaded.get("get_stragglers")
    median_step = steps.groupby("step")["step_time_us"].median().median()
    window = steps.groupby("step")["step_time_us"].max().sum()
    assert (s["wait_caused_per_step_us"] <= (ranks - 1) * median_step + 1e-6).all(), s
    assert (s["wait_caused_us"] <= (ranks - 1) * window + 1e-6).all(), s
    np.testing.assert_allclose(s["wait_caused_pct_of_step"],
                               s["wait_caused_per_step_us"] / median_step * 100, rtol=0.05)


def test_busy_time_adds_up(loaded):
    temporal = loaded.get("get_temporal_breakdown")
    steps = loaded.get("get_step_breakdown")
    busy = (temporal["kernel_time(us)"] - temporal["idle_time(us)"]).to_numpy()
    per_rank = steps.groupby("rank")[BUSY_PARTS].sum().sum(axis=1)
    # the same window: the step breakdown counts the GPU work launched in the steps (or else
    # starting in one), wherever it ran (past a step's end included); the temporal breakdown also
    # counts GPU work of the analysed window that neither launched nor started in a step: add it
    trace = loaded.ta.trace
    outside = []
    for rank in temporal["rank"]:
        rt = trace[rank]
        gpu = classified_gpu_events(rt, "default", "exact")
        ev = rt.events
        calls = ev[(ev["stream"] == -1) & (ev["correlation"] >= 0)]
        launch_ts = calls.drop_duplicates("correlation", keep="last").set_index("correlation")["ts"]
        at = launch_ts.reindex(ev.loc[gpu.index, "correlation"]).to_numpy(dtype=float)
        st = rt.profiler_steps()
        in_step = np.zeros(len(gpu), bool)
        for t in (at, gpu["start"].to_numpy(dtype=float)):  # launched in a step, or else ran in one
            for t0, d in zip(st["ts"], st["dur"], strict=True):
                in_step |= (t >= t0) & (t < t0 + d)
        s, e = merge(gpu["start"].to_numpy(), gpu["end"].to_numpy())
        si, ei = merge(gpu["start"].to_numpy()[in_step], gpu["end"].to_numpy()[in_step])
        outside.append(float((e - s).sum() - (ei - si).sum()) / 1e3)
    np.testing.assert_allclose(per_rank.loc[temporal["rank"]].to_numpy() + outside, busy,
                               rtol=1e-9, atol=0.01)


def test_path_is_no_longer_than_the_steps_work(loaded):
    cp = loaded.get("get_critical_path_summary").copy()
    steps = loaded.get("get_step_breakdown")
    cp["step"] = pd.to_numeric(cp["instance"].str.extract(r"#(\d+)$")[0], errors="coerce")
    both = cp.merge(steps, on=["rank", "step"], suffixes=("_cp", "_steps"))
    if both.empty:
        pytest.skip("no profiler step (the critical path ran over the whole trace)")
    work = both["step_time_us"] + both["past_step_end_us_steps"]
    np.testing.assert_allclose(both["path_length_us"], work, rtol=1e-9, atol=1e-3)


def test_one_rank_is_unknown(sample_traces_dir):
    first = sorted(sample_traces_dir.glob("*.json.gz"))[0]
    ta = TraceAnalysis(str(first), use_cache=False, progress=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        coll = ta.get_collectives(visualize=False)
        s = ta.get_stragglers(visualize=False)
        summary = ta.get_collective_summary()
        found = ta.findings()
    assert len(coll) and coll[["skew_us", "wait_us"]].isna().all().all()
    numbers = ["times_last", "wait_caused_us", "wait_caused_per_step_us", "mean_lateness_us"]
    assert len(s) == 1 and s[numbers].isna().all().all()  # unknown, not 0
    assert summary["skew_p95_us"].isna().all()
    assert "one rank loaded" in found.attrs["not_run"]["straggler_rank"]
