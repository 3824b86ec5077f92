"""Figures of the collectives, stragglers and per-step breakdown: they draw the facade's tables,
stay readable at 512 ranks x 2000 collectives, and say why when there is nothing to draw."""

from __future__ import annotations

import importlib

import numpy as np
import pandas as pd
import pytest

from analysis.api import TraceAnalysis
from analysis.testing.collectives import CollectiveJobConfig, generate_collective_job


@pytest.fixture(scope="module")
def ta(tmp_path_factory):
    out = tmp_path_factory.mktemp("collective-job")
    generate_collective_job(CollectiveJobConfig(ranks=4)).write(out)
    return TraceAnalysis(str(out), use_cache=False, progress=False)


def test_figures_draw_and_stay_readable_at_many_collectives(ta):
    fc = importlib.import_module("analysis.figures.collectives")
    fs = importlib.import_module("analysis.figures.step_breakdown")
    fst = importlib.import_module("analysis.figures.stragglers")  # the package binds the function

    table = ta.get_collectives(visualize=False)
    figs = fc.draw(table)
    assert set(figs) == {"collective_busbw", "collective_skew", "collective_wait"}
    assert figs["collective_busbw"].layout.xaxis.type == "log"
    heat = figs["collective_wait"].data[0]
    assert np.asarray(heat.z).shape == (4, table["collective"].nunique())
    # 512 ranks x 2000 collectives: binned into at most MAX_HEATMAP_COLUMNS columns
    big = pd.DataFrame({"collective": np.repeat(np.arange(2000), 512),
                        "rank": np.tile(np.arange(512), 2000), "wait_us": 1.0})
    z = np.asarray(fc.wait_heatmap(big).data[0].z)
    assert z.shape[0] == 512 and z.shape[1] <= fc.MAX_HEATMAP_COLUMNS
    assert z.sum() == pytest.approx(512 * 2000)
    assert fst.draw(ta.get_stragglers(visualize=False))["stragglers"].data
    steps = fs.draw(ta.get_step_breakdown(visualize=False))
    assert len(steps["step_breakdown"].data) == 7  # one bar trace per part
    # empty input: figures that say why, no exception
    empty = ta.get_collectives(visualize=False).iloc[:0]
    assert fc.draw(empty)["collective_wait"].layout.annotations
