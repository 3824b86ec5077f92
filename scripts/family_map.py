"""The family map of ``analysis/metrics/``: each family package, what it answers, its entry module,
and its size, read from the code (the package docstrings and the files), never written by hand.

    python scripts/family_map.py            # print the map (Markdown: a tree in a code block)
    python scripts/family_map.py --write    # replace the map in docs/contributing.md

A family's docstring says what it answers (its first paragraph) and marks its entry module: the
bullet that names it says "(the entry". Families are listed in the catalogue's order
(``analysis.analyses.FAMILIES``), then the shared flat modules. ``tests/unit/test_family_map.py``
fails when the map in docs/contributing.md names other families, entries or answers than the code
(the line counts may lag: rerun with ``--write``).
"""

from __future__ import annotations

import argparse
import ast
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
METRICS = ROOT / "analysis" / "metrics"
DOC = ROOT / "docs" / "contributing.md"
START, END = "<!-- family-map: start -->", "<!-- family-map: end -->"


def _docstring(path: Path) -> str:
    return ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""


def _lines(paths) -> int:
    return sum(len(p.read_text(encoding="utf-8").splitlines()) for p in paths)


def _answers(doc: str) -> str:
    """The docstring's first paragraph, on one line."""
    return " ".join(doc.split("\n\n", 1)[0].split())


def _entry(doc: str, family: str) -> str:
    """The module named first in the docstring's bullet that says "(the entry"."""
    bullets = re.split(r"\n(?=- )", doc)
    for bullet in bullets:
        if "(the entry" in " ".join(bullet.split()):
            found = re.search(r"``(\w+)``|:mod:`\.(\w+)`", bullet)
            if found:
                return found.group(1) or found.group(2)
    raise SystemExit(f"analysis/metrics/{family}/__init__.py: no bullet marks the entry module "
                     "with '(the entry'")


def _order() -> list[str]:
    """Family packages in the catalogue's order, then any other package (alphabetically)."""
    sys.path.insert(0, str(ROOT))
    from analysis.analyses import FAMILIES

    listed = [f.__name__.split(".")[-2] for f in FAMILIES]
    found = sorted(p.parent.name for p in METRICS.glob("*/__init__.py"))
    return [f for f in listed if f in found] + [f for f in found if f not in listed]


def family_map() -> str:
    """The map as Markdown (a code block)."""
    rows = []
    for family in _order():
        package = METRICS / family
        files = sorted(package.glob("*.py"))
        doc = _docstring(package / "__init__.py")
        rows.append((f"{family}/", f"{len(files)} files, {_lines(files):,} lines",
                     f"{_answers(doc)} Entry: {_entry(doc, family)}."))
    for module in sorted(METRICS.glob("*.py")):
        if module.name == "__init__.py":
            continue
        rows.append((module.name, f"{_lines([module]):,} lines",
                     _answers(_docstring(module)).split(". ")[0].rstrip(".") + "."))
    everything = sorted(METRICS.rglob("*.py"))
    head = f"analysis/metrics/ ({len(everything)} files, {_lines(everything):,} lines)"
    width = max(len(name) for name, _, _ in rows)
    size = max(len(s) for _, s, _ in rows)
    out = [head]
    for i, (name, counts, text) in enumerate(rows):
        branch = "└──" if i == len(rows) - 1 else "├──"
        out.append(f"{branch} {name:<{width}}  {counts:>{size}}  {text}")
    return "```\n" + "\n".join(out) + "\n```"


def write(doc: Path = DOC) -> None:
    text = doc.read_text(encoding="utf-8")
    if START not in text or END not in text:
        raise SystemExit(f"{doc}: no {START} ... {END} markers")
    before, rest = text.split(START, 1)
    _, after = rest.split(END, 1)
    doc.write_text(f"{before}{START}\n{family_map()}\n{END}{after}", encoding="utf-8")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help=f"update {DOC.relative_to(ROOT)}")
    if parser.parse_args().write:
        write()
    else:
        print(family_map())


if __name__ == "__main__":
    main()
