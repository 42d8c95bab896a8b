#!/usr/bin/env bash
# The demo: install gpunode, start four simulated Ubuntu GPU hosts, converge them to the
# lab's stack, run it again to show that nothing changes, then smoke-test them.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
inv=${GPUNODE_DEMO_INVENTORY:-/tmp/gpunode-demo.yaml}
gpunode lab up --hosts 4 --gpus 2 --model H200
gpunode lab inventory --conda > "$inv"
gpunode check "$inv"
gpunode plan "$inv" || true
gpunode apply "$inv" --yes --no-tui
echo "--- second run: nothing left to change"
gpunode apply "$inv" --yes --no-tui
echo "The lab keeps running: try 'gpunode top $inv', then 'gpunode lab down'."
