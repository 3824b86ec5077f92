"""The trace-health table as a reader wants it: one row per finding, not one per rank.

``check()`` returns one row per rank and finding (eight identical "last step cut short" rows on
eight ranks). For the report page and the terminal, identical findings (same severity, check and
message) become one row naming their ranks (``ranks 0–7``); the evidence of each rank stays in the
CSV and in ``ta.check()``. Nothing is computed here: rows are only grouped.
"""

from __future__ import annotations

from collections.abc import Iterable

import pandas as pd

GROUPED_COLUMNS = ["severity", "ranks", "check", "message", "evidence"]


def number_runs(numbers: Iterable[int]) -> str:
    """``[0, 1, 2, 3, 5]`` → ``"0–3, 5"``; ``[6, 7]`` → ``"6, 7"``: sorted distinct numbers, each
    run of three or more consecutive ones as a range."""
    runs: list[list[int]] = []
    for r in sorted({int(n) for n in numbers}):
        if runs and r == runs[-1][1] + 1:
            runs[-1][1] = r
        else:
            runs.append([r, r])
    return ", ".join(str(a) if a == b else f"{a}–{b}" if b > a + 1 else f"{a}, {b}"
                     for a, b in runs)


def rank_span(ranks: Iterable[int]) -> str:
    """``[0, 1, 2, 3, 5]`` → ``"ranks 0–3, 5"``; ``[4]`` → ``"rank 4"``; ``[-1]`` → ``"all ranks"``
    (-1 is the health table's "about the ranks together")."""
    values = sorted({int(r) for r in ranks})
    if not values:
        return ""
    if values == [-1]:
        return "all ranks"
    values = [r for r in values if r >= 0]
    return ("rank " if len(values) == 1 else "ranks ") + number_runs(values)


def grouped(findings: pd.DataFrame, where_all: str = "every rank's in the CSV") -> pd.DataFrame:
    """One row per distinct (severity, check, message), in the table's order (errors first).

    ``ranks`` names the ranks (:func:`rank_span`); ``evidence`` is the evidence when every rank has
    the same, otherwise the first rank's, prefixed with it and followed by how many more differ
    and ``where_all`` (where to read them all).
    """
    rows = []
    if findings is None or findings.empty:
        return pd.DataFrame(columns=GROUPED_COLUMNS)
    keys = ["severity", "check", "message"]
    for _, part in findings.groupby(keys, sort=False):
        first = part.iloc[0]
        evidence = [str(e) for e in part["evidence"] if e is not None and str(e)]
        distinct = list(dict.fromkeys(evidence))
        if len(distinct) <= 1:
            shown = distinct[0] if distinct else ""
        else:
            shown = (f"rank {int(part['rank'].iloc[0])}: {evidence[0]} "
                     f"(+{len(distinct) - 1} more; {where_all})")
        rows.append({"severity": first["severity"], "ranks": rank_span(part["rank"]),
                     "check": first["check"], "message": first["message"], "evidence": shown})
    return pd.DataFrame(rows, columns=GROUPED_COLUMNS)
