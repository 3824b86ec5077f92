"""The family map in docs/contributing.md is the one scripts/family_map.py makes from the code
(families, their answers and entry modules; the line counts may lag behind)."""

from __future__ import annotations

import re
import subprocess
import sys

from paths import REPO_ROOT

COUNTS = re.compile(r"\(?\d[\d,]* files, \d[\d,]* lines\)?|\d[\d,]* lines")


def _without_counts(text: str) -> list[str]:
    return [" ".join(COUNTS.sub("", line).split()) for line in text.strip().splitlines()]


def test_the_documented_family_map_is_the_generated_one():
    made = subprocess.run([sys.executable, "scripts/family_map.py"], cwd=REPO_ROOT, check=True,
                          capture_output=True, text=True).stdout
    doc = (REPO_ROOT / "docs" / "contributing.md").read_text(encoding="utf-8")
    shown = doc.split("<!-- family-map: start -->", 1)[1].split("<!-- family-map: end -->", 1)[0]
    assert _without_counts(shown) == _without_counts(made), (
        "docs/contributing.md's family map is stale: run python scripts/family_map.py --write")


def test_every_family_names_an_entry_module_that_exists():
    made = subprocess.run([sys.executable, "scripts/family_map.py"], cwd=REPO_ROOT, check=True,
                          capture_output=True, text=True).stdout
    families = re.findall(r"── (\w+)/ .*Entry: (\w+)\.$", made, flags=re.M)
    found = sorted(p.parent.name for p in (REPO_ROOT / "analysis" / "metrics").glob("*/__init__.py"))
    assert sorted(f for f, _ in families) == found
    for family, entry in families:
        assert (REPO_ROOT / "analysis" / "metrics" / family / f"{entry}.py").is_file(), family
