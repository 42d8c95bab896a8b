#!/usr/bin/env bash
# Version specs against a real GPU machine's own state (connection: local, no network):
# what is installed satisfies its spec and is kept without any index; a spec it does not
# satisfy is refused at plan time or planned from the host's apt, never misread.
#
#   bench/hardware-versions.sh [OUTDIR]
#
# gpunode's dependencies come as wheels from .whl/ (docs/hardware.md). Plans only: nothing
# on the machine is changed (plan never writes).
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:-/tmp/gpunode-versions}
mkdir -p "$out"
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
. bench/hardware-env.sh
export GPUNODE_STATE_DIR=$out/state GPUNODE_CACHE_DIR=$out/cache
inv=$(mktemp -d)

write() {  # write NAME REPOS STACK...: an inventory for this machine
  local name=$1 repos=$2; shift 2
  {
    echo "hosts:"
    echo "  gpu-local:"
    echo "    connection: local"
    echo "    become: none"
    echo "    repos: $repos"
    echo "    stack:"
    printf '      %s\n' "$@"
  } >"$inv/$name.yaml"
}

unmanaged="{nvidia: null}"
nvidia="{nvidia: https://developer.download.nvidia.com/compute/cuda/repos}"
tk='cuda: {toolkits: ["13.0"]}'
write match "$unmanaged" 'driver: {branch: "580", flavor: open}' "$tk" 'cudnn: "9"' 'nccl: "2.28"'
write pins "$unmanaged" 'driver: {version: "580.159.04", flavor: open}' "$tk" \
  'cudnn: "9.14.0.64-1"' 'nccl: "2.28.3-1+cuda13.0"'
write cudnn-9.10 "$unmanaged" "$tk" 'cudnn: "9.10"'
write driver-pin-other "$unmanaged" 'driver: {version: "580.95.05", flavor: open}'
write nccl-2.27 "$unmanaged" "$tk" 'nccl: "2.27"'
write cudnn-9.10-nvidia "$nvidia" "$tk" 'cudnn: "9.10"'

{
  echo "date: $(date -u +%FT%TZ)  kernel: $(uname -r)"
  echo "gpunode: $(python3 -m gpunode --version)"
  dpkg-query -W -f '${Package}\t${Version}\t${Status}\n' 2>/dev/null \
    | grep -E '^(libnvidia-compute|nvidia-open|libcudnn9|libnccl|cuda-toolkit)' | sort
  echo "nvidia apt sources:"; grep -rl -i nvidia /etc/apt/sources.list.d/ 2>/dev/null
  apt-cache madison libcudnn9-cuda-13 2>&1 | head -5
} >"$out/machine.txt" 2>&1

python3 -m gpunode facts --json "$inv/match.yaml" >"$out/facts.json" 2>&1
for f in match pins cudnn-9.10 driver-pin-other nccl-2.27 cudnn-9.10-nvidia; do
  {
    echo "=== $f"; cat "$inv/$f.yaml"
    t0=$(date +%s%N)
    python3 -m gpunode plan --detailed-exitcode "$inv/$f.yaml"
    rc=$?
    echo "[exit $rc, $(( ($(date +%s%N) - t0) / 1000000 )) ms]"
    echo
  } >>"$out/plans.txt" 2>&1
done
cat "$out/machine.txt" "$out/plans.txt"
