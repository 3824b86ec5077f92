"""Regenerates HolisticTraceAnalysis 0.5.0's stored answers, ``tests/data/hta_oracle/``.

The parity tests read HTA's answers from those snapshots (``tests/hta_oracle.py``); this script
writes them by running the same tests with HTA live (``HTA_LIVE=record``): every question a test
asks HTA (a method of its ``TraceAnalysis``, ``TraceDiff``, the critical path) is answered by
HTA 0.5.0 and its answer, or the exception it raised, is recorded under the sha256 of the files
HTA read. HTA's critical path needs pandas<3, so this is the one place that builds that separate
environment (``scripts/make-hta-oracle-venv.sh``; it needs the package index once). The project's
own venv needs HTA 0.5.0 (``pip install -e '.[dev]'``) and ``../shared/traces``.

Usage (the project's python, from the checkout):
    python scripts/hta_oracle_snapshot.py [--keep] [pytest arguments, e.g. -k temporal]

Without ``--keep`` the old snapshots are removed first, so answers nobody asks for any more go.
Then confirm the snapshots against HTA itself at any time with ``HTA_LIVE=1 python -m pytest ...``.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
SNAPSHOTS = REPO_ROOT / "tests" / "data" / "hta_oracle"


def oracle_tests() -> list[str]:
    """Every test module that asks HTA (imports ``hta_oracle``)."""
    return sorted(
        str(p.relative_to(REPO_ROOT))
        for p in (REPO_ROOT / "tests").rglob("test_*.py")
        if "hta_oracle" in p.read_text(encoding="utf-8")
    )


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--keep", action="store_true", help="keep the snapshots there (add to them)")
    a, pytest_args = ap.parse_known_args(argv)
    venv = subprocess.run([str(REPO_ROOT / "scripts" / "make-hta-oracle-venv.sh")], check=True,
                          capture_output=True, text=True).stdout.strip().splitlines()[-1]
    if not a.keep:
        for old in SNAPSHOTS.glob("*.pkl.gz"):
            old.unlink()
    env = {**os.environ, "HTA_LIVE": "record", "HTA_ORACLE_PYTHON": venv}
    tests = oracle_tests()
    print("recording HTA's answers for", " ".join(tests), flush=True)
    rc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *tests,
                         *pytest_args], cwd=REPO_ROOT, env=env).returncode
    written = sorted(SNAPSHOTS.glob("*.pkl.gz"))
    print(f"{len(written)} snapshots, {sum(p.stat().st_size for p in written) / 1e6:.1f} MB "
          f"in {SNAPSHOTS.relative_to(REPO_ROOT)}")
    return rc


if __name__ == "__main__":
    sys.exit(main())
