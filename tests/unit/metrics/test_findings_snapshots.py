"""Findings on every real trace, snapshot-tested: a change of wording, threshold or number shows up
as a diff against ``tests/data/findings/<trace>.txt``. After a deliberate change, rewrite the
snapshots with ``UPDATE_SNAPSHOTS=1 make test`` (or pytest on this file) and review the diff."""

from __future__ import annotations

import os
import warnings

import pytest
from conftest import HTA_GPU_TRACE_DIRS
from paths import REPO_ROOT, TEST_DATA
from trace_helpers import load

SHARED = REPO_ROOT.parent / "shared" / "traces"
TRACELENS = ["h100/Falconsai_nsfw_image_detection__1016002", "h100/Qwen_Qwen1.5-0.5B-Chat__1016005",
             "h100/facebook_timesformer-base-finetuned-k400__1016002",
             "h100/gaunernst_bert-small-uncased__1016001", "mi300/Qwen_Qwen1.5-0.5B-Chat__1016005"]
CASES = ["sample"] + [f"hta/{d}" for d in HTA_GPU_TRACE_DIRS] + [f"tracelens/{t}" for t in TRACELENS]


def render(table) -> str:
    lines = [f"[{r.severity}] {r.title}\n  {r.detail}\n  value {r.value} (threshold {r.threshold})"
             f"\n  evidence: {r.evidence}" for r in table.itertuples()]
    lines += [f"[not run] {k}: {v}" for k, v in table.attrs.get("not_run", {}).items()]
    # file paths differ between checkouts: the snapshot names them relative to the repository
    text = "\n".join(lines) + "\n"
    return text.replace(str(SHARED), "<shared>/traces").replace(str(REPO_ROOT), "<repo>")


@pytest.mark.parametrize("case", CASES)
def test_findings_snapshot(case):
    source = REPO_ROOT / "sample_traces" if case == "sample" else SHARED / case
    if case.startswith("tracelens"):  # one model per file: each trace on its own
        source = source.with_name(source.name + ".json.gz")
    if not source.exists():
        pytest.skip(f"real traces not available: {source} does not exist")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ta = load(source)
        text = render(ta.findings())
    print(f"--- {case}\n{text}")
    snapshot = TEST_DATA / "findings" / (case.replace("/", "__") + ".txt")
    if os.environ.get("UPDATE_SNAPSHOTS") or not snapshot.exists():
        if os.environ.get("CI") and not snapshot.exists():
            pytest.fail(f"no snapshot {snapshot}: run with UPDATE_SNAPSHOTS=1 and commit it")
        snapshot.write_text(text)
    assert text == snapshot.read_text()
