"""Where the repository and the tests' own data live (test modules sit at different depths)."""

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
TEST_DATA = REPO_ROOT / "tests" / "data"
