#!/usr/bin/env bash
# Builds the environment in which the retired TensorBoard profiler plugin (torch-tb-profiler 0.4.3)
# serves as the oracle for the tensorboard analyses (issue 25). It lives outside the checkout, so
# the project's own venv never gets TensorBoard. Idempotent: a finished venv (stamp file) is reused.
# Usage: scripts/make-tb-oracle-venv.sh [VENV_DIR]
#        (default: ${XDG_CACHE_HOME:-~/.cache}/trace-analysis/venvs/tb-oracle); prints the venv's path.
set -euo pipefail
VENV="${1:-${XDG_CACHE_HOME:-$HOME/.cache}/trace-analysis/venvs/tb-oracle}"
PYTHON="${PYTHON:-python3}"
STAMP="$VENV/.installed"
if [ ! -f "$STAMP" ]; then
  mkdir -p "$(dirname "$VENV")"
  "$PYTHON" -m venv "$VENV"
  "$VENV/bin/pip" install -q --upgrade pip
  "$VENV/bin/pip" install -q "torch-tb-profiler==0.4.3"
  "$VENV/bin/python" -c "from torch_tb_profiler.profiler.data import RunProfileData"
  touch "$STAMP"
fi
echo "$VENV"
