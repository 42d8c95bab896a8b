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
vulture  # dead code: settings in pyproject.toml, exceptions in scripts/vulture_allow.py
ruby -c Vagrantfile >/dev/null
if command -v vagrant >/dev/null; then  # both machines: plain, and with a GPU passed through
  vagrant validate >/dev/null
  GPUNODE_GPU_PCI=0000:41:00.0 vagrant validate >/dev/null
fi
# In parallel: the lab tests mostly wait (ssh, apt, boots), so workers outnumber the cores.
# Each worker gwK has lab slot 20+K of its own (tests/conftest.py); a file's tests stay on
# one worker, so a module's lab starts once. GPUNODE_TEST_WORKERS=0 runs serially.
workers=${GPUNODE_TEST_WORKERS:-4}
parallel=()
[[ $workers != 0 ]] && parallel=(-n "$workers" --dist loadfile)
python -m pytest -q --durations=15 "${parallel[@]}" "$@"
