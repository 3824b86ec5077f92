"""The import direction of the package (pyproject's [tool.importlinter] contracts) holds."""

import subprocess
import sys
from pathlib import Path

from paths import REPO_ROOT


def test_import_contracts_are_kept():
    lint = Path(sys.executable).with_name("lint-imports")
    done = subprocess.run([str(lint)], cwd=REPO_ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "BROKEN" not in done.stdout and "Contracts: " in done.stdout
