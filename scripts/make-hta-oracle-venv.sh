#!/usr/bin/env bash
# Builds the environment in which HolisticTraceAnalysis 0.5.0 serves as the critical-path oracle.
# HTA 0.5.0's critical_path_analysis raises under pandas 3 (`drop(axis=1, columns=...)`), so it
# gets its own venv with pandas<3 (~0.5 GB), kept outside the checkout in the user's cache:
# ${TRACE_ANALYSIS_VENVS:-${XDG_CACHE_HOME:-~/.cache}/trace-analysis/venvs}/hta-pandas2.
# Idempotent: a finished venv (stamp file) is reused. Prints the venv's python on its last line.
# Usage: scripts/make-hta-oracle-venv.sh [VENV_DIR]
set -euo pipefail
VENVS="${TRACE_ANALYSIS_VENVS:-${XDG_CACHE_HOME:-$HOME/.cache}/trace-analysis/venvs}"
VENV="${1:-$VENVS/hta-pandas2}"
PYTHON="${PYTHON:-python3}"
STAMP="$VENV/.installed"
if [ ! -f "$STAMP" ]; then
  mkdir -p "$(dirname "$VENV")"
  "$PYTHON" -m venv "$VENV"
  "$VENV/bin/pip" install -q --upgrade pip
  "$VENV/bin/pip" install -q "holistictraceanalysis==0.5.0" "pandas<3" "numpy<3"
  "$VENV/bin/python" -c "import hta, pandas; assert pandas.__version__ < '3'"
  touch "$STAMP"
fi
echo "$VENV/bin/python"
