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


def column_cells(values: pd.Series) -> list[str]:
    """A column's cells, formatted alike: whole numbers as integers with thousands separators,
    others with 2 decimals (1 from 100, none from 100,000), empty as "–"; text as is."""
    if not pd.api.types.is_numeric_dtype(values) or pd.api.types.is_bool_dtype(values):
        return [cell(v) for v in values]
    present = pd.to_numeric(values, errors="coerce").dropna()
    present = present[~present.isin([float("inf"), float("-inf")])]
    whole = bool(((present % 1) == 0).all())
    biggest = float(present.abs().max()) if len(present) else 0.0
    digits = 0 if whole or biggest >= 1e5 else 1 if biggest >= 100 else 2
    out = []
    for v in values:
        text = cell(v)
        if text not in ("–", "inf", "-inf"):
            text = f"{float(v):,.{digits}f}"
        out.append(text)
    return out


def column_cells_frame(df: pd.DataFrame) -> list[str]:
    """The first row of ``df``, each value formatted as its column's cells are."""
    return [column_cells(df[c])[0] for c in df.columns]


def _looks_numeric(texts: Sequence[str]) -> bool:
    """Every cell is a number (or a marker that stands in one's place): right-aligned."""
    def number(t: str) -> bool:
        try:
            float(t.replace(",", ""))
            return True
        except ValueError:
            return t in ("–", "new", "gone", "inf", "-inf")
    return all(number(t) for t in texts)


def _text_frame(df: pd.DataFrame, max_cell: int) -> pd.DataFrame:
    return pd.DataFrame({c: [shorten(v, max_cell) for v in column_cells(df[c])]
                         for c in df.columns}, index=range(len(df)))


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

    One row is printed transposed (a column per line). Of several rows, columns whose value is the
    same on every row become one line ("same on every row: gpu NVIDIA H100 80GB HBM3, ..."); the
    others are printed in blocks that fit, each block starting with the ``key`` columns.
    """
    limit = columns or width()
    if df is None or df.empty:
        return ["(no rows)"]
    numeric = {c for c in df.columns if pd.api.types.is_numeric_dtype(df[c])
               and not pd.api.types.is_bool_dtype(df[c])}
    numeric |= {c for c in df.columns if df[c].dtype == object
                and _looks_numeric([str(v) for v in df[c]])}
    if wide:
        text = _text_frame(df, 10_000)
        return _block_lines(text, list(df.columns), numeric)
    if len(df) == 1:  # one rank: a column per line reads better than a wide row
        cells = dict(zip(df.columns, column_cells_frame(df), strict=True))
        name_width = max(len(str(c)) for c in df.columns)
        return [row[:limit] for c, v in cells.items()
                for row in wrap(v, indent=" " * (name_width + 2),
                                first=f"{str(c):<{name_width}}  ", columns=limit)]
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


def distinct_shortened(values: Sequence[object], limit: int) -> list[str]:
    """Each value in at most ``limit`` characters (middle cut), the results kept distinct: two
    kernels that share their first and last characters get more of their middle, or a ``#n``."""
    texts = [str(v) for v in values]
    out = [shorten(t, limit) for t in texts]
    clashes = {s for s in out if out.count(s) > 1}
    for i, text in enumerate(texts):
        if out[i] not in clashes:
            continue
        others = [t for t in texts if t != text and shorten(t, limit) == out[i]]
        # the first place where this text differs from the names it collides with, kept visible
        cut = min((next((k for k, (a, b) in enumerate(zip(text, o, strict=False)) if a != b), len(o))
                   for o in others), default=0)
        keep = max(0, limit - 1 - max(0, limit // 3))
        if cut > keep and len(text) > limit:
            start = max(0, min(cut - keep // 2, len(text) - limit + 1))
            head = limit // 3
            out[i] = text[:head] + "…" + text[start + head + 1: start + limit - 1] + "…"
    seen: dict[str, int] = {}
    for i, short in enumerate(out):
        if out.count(short) > 1:
            seen[short] = seen.get(short, 0) + 1
            out[i] = shorten(short, limit - 3) + f" #{seen[short]}"
    return out


# The narrowest a name column gets before the table is split into blocks instead.
MIN_NAME_WIDTH = 24


def listing(df: pd.DataFrame, shrink: str, columns: int | None = None,
            cells: dict[str, Sequence[str]] | None = None,
            headers: dict[str, str] | None = None) -> list[str]:
    """A table whose ``shrink`` column (names) takes the width the others leave, its values
    shortened but distinct; ``cells`` overrides the text of whole columns (e.g. "new"),
    ``headers`` renames columns for the terminal (the CSVs keep the real names)."""
    limit = columns or width()
    if df is None or df.empty:
        return ["(no rows)"]
    text = {c: list((cells or {}).get(c) or column_cells(df[c])) for c in df.columns}
    numeric = {c for c in df.columns if c != shrink and _looks_numeric(text[c])}
    names = {c: (headers or {}).get(c, c) for c in df.columns}
    widths = {c: max([len(names[c]), *(len(v) for v in text[c])]) for c in df.columns
              if c != shrink}
    room = limit - sum(widths.values()) - len(_GAP) * (len(df.columns) - 1)
    longest = max([len(names[shrink]), *(len(v) for v in text[shrink])])
    text[shrink] = distinct_shortened(text[shrink], max(min(longest, room), MIN_NAME_WIDTH))
    frame = pd.DataFrame({names[c]: v for c, v in text.items()}, index=range(len(df)))
    lines = _block_lines(frame, list(frame.columns), {names[c] for c in numeric})
    if max(len(line) for line in lines) <= limit:
        return lines
    # a narrow terminal: blocks of columns, each led by the names
    out: list[str] = []
    rest = [c for c in frame.columns if c != names[shrink]]
    key_width = max(len(v) for v in [names[shrink], *frame[names[shrink]]]) + len(_GAP)
    block: list[str] = []
    for c in rest + [None]:
        w = None if c is None else max(len(v) for v in [c, *frame[c]]) + len(_GAP)
        if c is None or (block and key_width + sum(
                max(len(v) for v in [b, *frame[b]]) + len(_GAP) for b in block) + w > limit):
            if out:
                out.append("")
            out += _block_lines(frame, [names[shrink], *block], {names[c] for c in numeric})
            block = []
        if c is not None:
            block.append(c)
    return out
