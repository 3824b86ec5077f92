"""A report folder appears whole or not at all.

``staged(out)`` gives a temporary folder beside ``out`` (same filesystem, so moves are renames);
when the block succeeds its files move into ``out`` (created, or updated file by file when it
exists: other files there are left alone); when the block fails the temporary folder is removed
and ``out`` is untouched. A failed report therefore leaves nothing behind.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from analysis.errors import ExportError


def _publish(staging: Path, out: Path) -> None:
    if not out.exists():
        os.replace(staging, out)
        return
    if not out.is_dir():
        raise ExportError(out, "exists and is not a directory")
    for path in sorted(staging.rglob("*")):
        if path.is_file():
            target = out / path.relative_to(staging)
            target.parent.mkdir(parents=True, exist_ok=True)
            os.replace(path, target)
    shutil.rmtree(staging, ignore_errors=True)


@contextmanager
def staged(out: Path) -> Iterator[Path]:
    """Yield a temporary folder whose files become ``out``'s when the block ends without error."""
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".part", dir=out.parent))
    except OSError as e:
        raise ExportError(out, f"cannot create the report directory: {e.strerror or e}") from e
    try:
        yield staging
        try:
            _publish(staging, out)
        except OSError as e:
            raise ExportError(out, f"cannot move the report in place: {e.strerror or e}") from e
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def moved(path: Path, staging: Path, out: Path) -> Path:
    """Where ``path`` (written under ``staging``) is once published into ``out``."""
    return out / Path(path).relative_to(staging)
