#!/usr/bin/env bash
# nccl-multinode on one real machine of 2 GPUs: two inventory hosts, gpu0 and gpu1, both
# `connection: local`, one GPU each (CUDA_VISIBLE_DEVICES from each host's settings), meet
# at the first host's rendezvous store (127.0.0.1, a fresh port, forwarded to the second)
# and all-reduce across each other with NCCL. Then the same with no torchrun on the first
# host: both must fail at once (the second naming the rendezvous that never opened), with
# no torchrun left behind.
#
#   bench/multinode-h200.sh [OUTDIR]      (default: $OUT, else /tmp/gpunode-multinode)
#
# Needs: the GPUs' driver, PyTorch with CUDA at $TORCH_BIN (default /opt/torch/.venv/bin,
# its torchrun), python3. gpunode's dependencies come as wheels from .whl/ (docs/hardware.md).
# Writes: versions.txt, inventory.yaml, smoke.json / smoke.txt (gpunode's results),
# nccl-direct-*.log (the same script under torchrun without gpunode, NCCL_DEBUG=INFO),
# nostore.json, leftovers.txt, run.log (all of it).
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-${OUT:-/tmp/gpunode-multinode}}
torch_bin=${TORCH_BIN:-/opt/torch/.venv/bin}
port=${RDZV_PORT:-29500}
mkdir -p "$out"
exec > >(tee "$out/run.log") 2>&1

. bench/hardware-env.sh
export GPUNODE_STATE_DIR=$out/state GPUNODE_CACHE_DIR=$out/cache

{
  echo "date: $(date -u +%FT%TZ)  kernel: $(uname -r)"
  echo "gpunode: $(python3 -m gpunode --version)"
  echo "python3: $(python3 --version 2>&1)"
  echo "--- nvidia-smi"
  nvidia-smi --query-gpu=index,name,driver_version,pci.bus_id --format=csv,noheader || true
  echo "--- nvidia-smi topo -m"; nvidia-smi topo -m || true
  echo "--- torch"
  "$torch_bin/python" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda,
"nccl", ".".join(map(str, torch.cuda.nccl.version())), "gpus", torch.cuda.device_count())' || true
  echo "--- torchrun: $torch_bin/torchrun"; ls -l "$torch_bin/torchrun" || true
} >"$out/versions.txt" 2>&1
cat "$out/versions.txt"

inv=$out/inventory.yaml
write_inventory() {  # $1: the first host's torchrun folder, $2: timeout (s)
  cat >"$inv" <<YAML
defaults:
  connection: local
  become: none
  repos: {nvidia: null}
  gpus: {model: H200, count: 1}
  nccl:
    bin: $torch_bin
    nproc_per_node: 1
    sizes_mib: [8, 64, 256, 1024]
    timeout: $2
    env:
      NCCL_NVLS_ENABLE: 0
      TORCH_SYMM_MEM_DISABLE_MULTICAST: 1
      NVSHMEM_DISABLE_NVLS: 1
hosts:
  gpu0:
    nccl: {bin: $1, env: {CUDA_VISIBLE_DEVICES: "0"}}
  gpu1:
    nccl: {env: {CUDA_VISIBLE_DEVICES: "1"}}
YAML
}

echo "=== nccl-multinode: gpu0 + gpu1 through gpunode"
write_inventory "$torch_bin" 300
cp "$inv" "$out/inventory-ok.yaml"
rc=0
python3 -m gpunode smoke "$inv" --only nccl-multinode --json >"$out/smoke.json" || rc=$?
echo "[smoke --json exit $rc]"
rc=0
python3 -m gpunode smoke "$inv" --only nccl-multinode >"$out/smoke.txt" || rc=$?
echo "[smoke exit $rc]"
cat "$out/smoke.txt"

echo "=== the same script under torchrun directly (NCCL_DEBUG=INFO kept whole)"
script=$(python3 -c 'import gpunode.smoke.suite as s, os; print(os.path.dirname(s.__file__))')
script=$script/nccl_multinode.py
pids=()
for rank in 0 1; do
  env CUDA_VISIBLE_DEVICES=$rank NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET,GRAPH \
    NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 \
    timeout -k 10 300 "$torch_bin/torchrun" --nnodes=2 --nproc-per-node=1 --node-rank=$rank \
    --rdzv-backend=c10d --rdzv-endpoint=127.0.0.1:$((port + 1)) --rdzv-id=direct-$$ \
    --max-restarts=0 "$script" --sizes-mib=8,64,256,1024 --backend=nccl \
    >"$out/nccl-direct-$rank.log" 2>&1 &
  pids+=($!)
done
for pid in "${pids[@]}"; do
  rc=0; wait "$pid" || rc=$?; echo "[direct torchrun pid $pid exit $rc]"
done
grep -h "GPUNODE-NCCL\|via \|NET/.* : Using" "$out"/nccl-direct-*.log | head -40 || true

echo "=== no rendezvous: no torchrun on the first host (timeout 30 s)"
write_inventory /nonexistent/bin 30
start=$(date +%s)
rc=0
python3 -m gpunode smoke "$inv" --only nccl-multinode --json >"$out/nostore.json" || rc=$?
echo "[smoke exit $rc after $(($(date +%s) - start)) s; expected 2]"
python3 -c 'import json, sys
for h in json.load(open(sys.argv[1]))["hosts"]:
    for r in h["results"]:
        print(h["host"], r["status"], r["reason"])' "$out/nostore.json" || true
{ pgrep -af torchrun || echo "no torchrun left"; } | tee "$out/leftovers.txt"
echo "done: $out"
