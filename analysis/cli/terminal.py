"""Text that fits the terminal: tables cut into column blocks, prose wrapped, long names shortened.

The width is ``COLUMNS`` when set, else the terminal's, else 100 (output piped to a file or a CI
log). A table wider than that is printed in blocks of columns, each repeating the key columns
(``rank``), so no line is longer than the width; columns with the same value on every row are said
once above the table. ``--wide`` prints every column on one line per row, as before.
"""

from __future__ import annotations

import math
import shutil
import textwrap
from collections.abc import Sequence

import pandas as pd

DEFAULT_WIDTH = 100  # when neither COLUMNS nor a terminal says otherwise
_GAP = "  "


def width() -> int:
    """The terminal's width in characters (``COLUMNS`` first; 100 when not on a terminal)."""
    return max(40, shutil.get_terminal_size(fallback=(DEFAULT_WIDTH, 24)).columns)


def wrap(text: str, indent: str = "", first: str = "", columns: int | None = None) -> list[str]:
    """``first + text`` wrapped to the width, continuation lines indented by ``indent``."""
    return textwrap.wrap(text, width=columns or width(), initial_indent=first,
                         subsequent_indent=indent, break_long_words=True,
                         break_on_hyphens=False) or [first.rstrip()]


def shorten(text: object, limit: int) -> str:
    """``text`` in at most ``limit`` characters, the middle cut (``void at::na…float>(int)``):
    templated names share their start and differ at the end."""
    text = str(text)
    if len(text) <= limit:
        return text
    tail = (limit - 1) // 2
    return text[: limit - 1 - tail] + "…" + text[len(text) - tail:]


def cell(value) -> str:
    """A value as a table cell: whole numbers as integers, others with two decimals (none past
    100,000), empty as "–"."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, (int, float)) or hasattr(value, "dtype"):
        try:
            v = float(value)
        except (TypeError, ValueError):
            return str(value)
        if math.isnan(v):
            return "–"
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        if v.is_integer():
            return f"{int(v)}"
        return f"{v:,.0f}" if abs(v) >= 1e5 else f"{v:.2f}"
    return str(value)


def _text_frame(df: pd.DataFrame, max_cell: int) -> pd.DataFrame:
    return pd.DataFrame({c: [shorten(cell(v), max_cell) for v in df[c]] for c in df.columns},
                        index=range(len(df)))


def _block_lines(text: pd.DataFrame, columns: list[str], numeric: set[str]) -> list[str]:
    widths = {c: max([len(c), *(len(v) for v in text[c])]) for c in columns}

    def line(values: dict[str, str]) -> str:
        parts = [values[c].rjust(widths[c]) if c in numeric else values[c].ljust(widths[c])
                 for c in columns]
        return _GAP.join(parts).rstrip()

    return [line({c: c for c in columns})] + [line(dict(row)) for _, row in text.iterrows()]


def table(df: pd.DataFrame, key: Sequence[str] = ("rank",), wide: bool = False,
          columns: int | None = None) -> list[str]:
    """``df`` as lines of text no longer than the width (unless ``wide``).

    Columns whose value is the same on every row (of several) become one line ("same on every
    row: gpu NVIDIA H100 80GB HBM3, ..."); the others are printed in blocks that fit, each block
    starting with the ``key`` columns.
    """
    limit = columns or width()
    if df is None or df.empty:
        return ["(no rows)"]
    numeric = {c for c in df.columns if pd.api.types.is_numeric_dtype(df[c])
               and not pd.api.types.is_bool_dtype(df[c])}
    if wide:
        text = _text_frame(df, 10_000)
        return _block_lines(text, list(df.columns), numeric)
    key = [k for k in key if k in df.columns]
    lines: list[str] = []
    constant = [c for c in df.columns if c not in key and len(df) > 1
                and df[c].astype(str).nunique(dropna=False) == 1]
    if constant:
        said = ", ".join(f"{c} {cell(df[c].iloc[0])}" for c in constant)
        lines += wrap(said, indent="  ", first="same on every row: ", columns=limit)
    rest = [c for c in df.columns if c not in key and c not in constant]
    text = _text_frame(df[key + rest], max(24, limit // 3))
    widths = {c: max([len(c), *(len(v) for v in text[c])]) for c in text.columns}
    used = sum(widths[k] + len(_GAP) for k in key)
    blocks: list[list[str]] = [[]]
    room = used
    for c in rest:
        if blocks[-1] and room + widths[c] > limit:
            blocks.append([])
            room = used
        blocks[-1].append(c)
        room += widths[c] + len(_GAP)
    for i, block in enumerate(blocks):
        if i or constant:
            lines.append("")
        lines += [row[:limit] for row in _block_lines(text, key + block, numeric)]
    return lines
