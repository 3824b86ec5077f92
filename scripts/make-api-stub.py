#!/usr/bin/env python3
"""Write analysis/api.pyi and docs/api.md from the analysis registry (analysis.api_reference).

    python scripts/make-api-stub.py          # rewrite both files
    python scripts/make-api-stub.py --check  # exit 1 when either is out of date

Run it after adding or changing an analysis's entry (its params, returns, columns or doc) or a
hand-written TraceAnalysis method; tests/unit/test_api_stub.py fails until you do.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from analysis.api_reference import DOC_PATH, STUB_PATH, markdown_text, stub_text  # noqa: E402


def main(argv: list[str]) -> int:
    check = "--check" in argv
    stale = []
    for path, text in ((STUB_PATH, stub_text()), (DOC_PATH, markdown_text())):
        target = ROOT / path
        if target.exists() and target.read_text(encoding="utf-8") == text:
            continue
        stale.append(path)
        if not check:
            target.write_text(text, encoding="utf-8")
    if check and stale:
        print(f"out of date: {', '.join(stale)}; run {Path(__file__).name}", file=sys.stderr)
        return 1
    for path in stale:
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
