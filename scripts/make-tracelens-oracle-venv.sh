#!/usr/bin/env bash
# Builds the environment in which AMD's TraceLens (github.com/AMD-AGI/TraceLens) serves as an
# oracle on traces of one's own (scripts/tracelens_oracle_compare.py). TraceLens is not on PyPI
# (the PyPI project "TraceLens" is an unrelated agent-testing tool), so it is installed from a
# copy of its repository: a checkout, or a bare git directory (the `fetch` tool's mirror). Its
# pinned requirements would pull an old pandas; --no-deps plus what its report generator imports.
# The venv lives outside the checkout. Idempotent: a finished venv (stamp file) is reused.
# Usage: scripts/make-tracelens-oracle-venv.sh SRC [VENV_DIR]
#        SRC: a TraceLens checkout or bare git directory (e.g. git clone --bare
#        https://github.com/AMD-AGI/TraceLens); VENV_DIR defaults to
#        ${XDG_CACHE_HOME:-~/.cache}/trace-analysis/venvs/tracelens. Prints the venv's path.
set -euo pipefail
SRC="${1:?usage: $0 TRACELENS_CHECKOUT_OR_GIT_DIR [VENV_DIR]}"
VENV="${2:-${XDG_CACHE_HOME:-$HOME/.cache}/trace-analysis/venvs/tracelens}"
PYTHON="${PYTHON:-python3}"
STAMP="$VENV/.installed"
if [ ! -f "$STAMP" ]; then
  WORK="$(mktemp -d)"
  trap 'rm -rf "$WORK"' EXIT
  if [ -f "$SRC/setup.py" ]; then
    cp -r "$SRC" "$WORK/src"
    COMMIT="$(git -C "$SRC" rev-parse HEAD 2>/dev/null || echo unknown)"
  else  # a bare repository: its HEAD's package (a mirror may lack the large test blobs)
    mkdir "$WORK/src"
    git --git-dir="$SRC" archive HEAD setup.py README.md LICENSE MANIFEST.in TraceLens \
      | tar -x -C "$WORK/src"
    COMMIT="$(git --git-dir="$SRC" rev-parse HEAD)"
  fi
  mkdir -p "$(dirname "$VENV")"
  "$PYTHON" -m venv "$VENV"
  "$VENV/bin/pip" install -q --upgrade pip
  "$VENV/bin/pip" install -q pandas tqdm openpyxl tabulate orjson PyYAML matplotlib
  "$VENV/bin/pip" install -q --no-deps "$WORK/src"
  "$VENV/bin/python" -c "import TraceLens.Reporting.generate_perf_report_pytorch"
  echo "$COMMIT" > "$STAMP"
fi
echo "$VENV"
