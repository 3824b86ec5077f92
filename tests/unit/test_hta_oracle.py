"""The HTA oracle's snapshots (tests/hta_oracle.py): answers replay exactly as recorded, errors
included, and a question without a stored answer fails (never passes or skips silently)."""

from __future__ import annotations

import hta_oracle
import numpy as np
import pandas as pd
import pytest


def test_recorded_answers_replay_values_and_exceptions(tmp_path, monkeypatch):
    monkeypatch.setattr(hta_oracle, "SNAPSHOTS", tmp_path / "snapshots")
    trace = tmp_path / "rank-0.json"
    trace.write_text('{"traceEvents": []}')
    frame = pd.DataFrame({"rank": np.array([0, 1], dtype="int32"), "pct": [1.5, np.nan]},
                         index=pd.Index([3, 4], name="x"))

    def refuses():
        raise AssertionError("non_compute_time >= 0")

    monkeypatch.setattr(hta_oracle, "MODE", "record")
    assert hta_oracle.hta_answer([trace], "frame", lambda: frame) is frame
    with pytest.raises(AssertionError):
        hta_oracle.hta_answer([trace], "refuses", refuses)
    assert len(list((tmp_path / "snapshots").glob("rank-0__*.pkl.gz"))) == 1

    monkeypatch.setattr(hta_oracle, "MODE", "stored")
    replayed = hta_oracle.hta_answer([trace], "frame", None)
    pd.testing.assert_frame_equal(replayed, frame, check_exact=True)  # dtypes and index too
    assert replayed is not frame
    with pytest.raises(AssertionError, match="non_compute_time"):
        hta_oracle.hta_answer([trace], "refuses", None)
    with pytest.raises(pytest.fail.Exception, match="hta_oracle_snapshot.py"):
        hta_oracle.hta_answer([trace], "never asked", None)
    # a changed input is another snapshot: the old answers do not apply to it
    trace.write_text('{"traceEvents": [{"ph": "X"}]}')
    with pytest.raises(pytest.fail.Exception, match="no stored HTA answer"):
        hta_oracle.hta_answer([trace], "frame", None)


def test_questions_to_the_trace_analysis_stand_in_name_the_call(tmp_path, monkeypatch):
    monkeypatch.setattr(hta_oracle, "SNAPSHOTS", tmp_path / "snapshots")
    (tmp_path / "traces").mkdir()
    (tmp_path / "traces" / "a.json").write_text("{}")

    class FakeHTA:
        class t:  # noqa: N801 - HTA's attribute name
            @staticmethod
            def get_ranks():
                return [0, 1]

        def get_temporal_breakdown(self, visualize=True):
            return pd.DataFrame({"visualize": [visualize]})

    monkeypatch.setattr(hta_oracle, "MODE", "record")
    hta = hta_oracle._Answers(hta_oracle._Snapshot([tmp_path / "traces"]), FakeHTA)
    assert hta.t.get_ranks() == [0, 1]
    hta.get_temporal_breakdown(visualize=False)
    monkeypatch.setattr(hta_oracle, "MODE", "stored")
    stored = hta_oracle._Snapshot([tmp_path / "traces"]).answers
    assert set(stored) == {"t.get_ranks()", "get_temporal_breakdown(visualize=False)"}
    with pytest.raises(pytest.fail.Exception):
        hta.get_temporal_breakdown(visualize=True)  # another question: not recorded
