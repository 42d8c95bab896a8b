#!/usr/bin/env bash
# Install everything the tests need, then run the linters, the type checker and every test.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh --dev
# The environment setup.sh made: its python, pytest, ruff, mypy and gpunode come first.
venv=${GPUNODE_VENV:-$PWD/.venv}
export PATH="$venv/bin:$PATH"
ruff check .
ruff format --check .
mypy
ruby -c Vagrantfile >/dev/null
if command -v vagrant >/dev/null; then  # both machines: plain, and with a GPU passed through
  vagrant validate >/dev/null
  GPUNODE_GPU_PCI=0000:41:00.0 vagrant validate >/dev/null
fi
python -m pytest -q --durations=15 "$@"
