#!/usr/bin/env bash
# Creates the anchors' own venv (bench/anchors/.venv, git-ignored): fastmcp is an anchor to compare
# against, not a dependency of mcpfleet, so it never enters the project's .venv. Reuses uv's cache.
# Usage: bench/anchors/setup.sh [VENV_DIR]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
venv=${1:-$here/.venv}
uv=$here/../../.venv/bin/uv
if [ ! -x "$uv" ]; then uv=$(command -v uv || true); fi
if [ -z "$uv" ]; then
  echo "uv not found: run 'make venv' first (it installs uv into .venv)" >&2
  exit 1
fi
[ -x "$venv/bin/python" ] || "$uv" venv --quiet --python python3 "$venv"
"$uv" pip install --quiet --python "$venv/bin/python" -r "$here/requirements.txt"
echo "anchors venv ready: $venv"
