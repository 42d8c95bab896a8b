#!/usr/bin/env bash
# Fleet health on one real GPU machine, as one `connection: local` host: `gpunode doctor`,
# the bf16 matmul measured by `gpunode smoke` and priced by `gpunode cost`, one round of
# `gpunode exporter --textfile --once`, and `smoke --only nccl-multinode` on one node
# (the real torchrun and NCCL; no second node on a 1-GPU machine).
#
#   bench/hardware-health.sh [OUTDIR]      (default: $OUT, else /tmp/gpunode-health)
#
# Needs: the GPU's driver, PyTorch with CUDA at $TORCH_BIN (default /opt/torch/.venv/bin),
# python3; gpunode's dependencies as wheels in .whl/ when the machine has no index.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:-${OUT:-/tmp/gpunode-health}}
torch_bin=${TORCH_BIN:-/opt/torch/.venv/bin}
mkdir -p "$out"
exec > >(tee "$out/run.log") 2>&1
. bench/hardware-env.sh
export GPUNODE_STATE_DIR=$out/state GPUNODE_CACHE_DIR=$out/cache
gn() { echo "\$ gpunode $*"; python3 -m gpunode "$@"; echo "[exit $?]"; }
n=$(nvidia-smi --query-gpu=index --format=csv,noheader | wc -l)
cat >"$out/inventory.yaml" <<YAML
defaults:
  connection: local
  become: none
  repos: {nvidia: null}
  gpus: {model: H200, count: $n, hourly_cost: {amount: 3.5, per: gpu, currency: USD}}
  nccl:
    bin: $torch_bin
    nproc_per_node: $n
    sizes_mib: [8, 64, 256, 1024]
    timeout: 300
    env: {NCCL_NVLS_ENABLE: 0, TORCH_SYMM_MEM_DISABLE_MULTICAST: 1, NVSHMEM_DISABLE_NVLS: 1}
hosts:
  gpu-local: {}
YAML
inv=$out/inventory.yaml
gn --version
gn doctor "$inv" >"$out/doctor.txt"; cat "$out/doctor.txt"
gn doctor "$inv" --json >"$out/doctor.json"
gn smoke "$inv" --only torch-matmul --python "$torch_bin/python3" >"$out/smoke.txt"; cat "$out/smoke.txt"
gn cost "$inv" >"$out/cost.txt"; cat "$out/cost.txt"
gn cost "$inv" --work 1e6 --hours 24 --json >"$out/cost.json"
mkdir -p "$out/textfile"
gn exporter "$inv" --textfile "$out/textfile" --once --interval 1
grep -v '^#' "$out/textfile/gpunode.prom" | head -40
gn smoke "$inv" --only nccl-multinode >"$out/nccl-one-node.txt"; cat "$out/nccl-one-node.txt"
echo "done: $out"
