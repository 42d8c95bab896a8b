#!/usr/bin/env bash
# gpunode for real on a GPU machine with no network and no sshd (connection: local):
# facts, plan against an inventory that matches the machine (expect no changes) and one
# that does not (expect changes, nothing applied), then the smoke suite.
#
#   bench/hardware-run.sh GPUS [OUTDIR]
#
# GPUS is how many GPUs the machine should have. gpunode's own dependencies come as
# wheels from .whl/ (see docs/hardware.md); every output lands in OUTDIR (default /tmp/gpunode-hardware).
set -uo pipefail
cd "$(dirname "$0")/.."
gpus=${1:?usage: bench/hardware-run.sh GPUS [OUTDIR]}
out=${2:-/tmp/gpunode-hardware}
mkdir -p "$out"
log="$out/run.log"
: >"$log"

# Multicast NVLink stays off on these shared machines (the smoke suite sets it for its
# own children too).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONUNBUFFERED=1

. bench/hardware-env.sh
gn() { python3 -m gpunode "$@"; }

step() {  # step NAME FILE CMD...: run, keep stdout+stderr in FILE, log the exit code
  local name=$1 file=$2; shift 2
  local t0=$SECONDS
  { echo "\$ $*"; "$@"; } >>"$out/$file" 2>&1
  local rc=$?
  echo "$name: exit $rc ($((SECONDS - t0)) s)" | tee -a "$log"
  echo "[exit $rc]" >>"$out/$file"
  echo >>"$out/$file"
  return 0
}

{
  echo "date: $(date -u +%FT%TZ)"
  echo "kernel: $(uname -r)"
  echo "python3: $(command -v python3) $(python3 -V 2>&1)"
  echo "gpunode: $(gn --version)"
} >>"$log"

# What the machine has, read directly, to compare with `gpunode facts`.
{
  nvidia-smi --query-gpu=index,name,driver_version,memory.total,pci.bus_id --format=csv
  echo "module: $(cat /sys/module/nvidia/version 2>/dev/null)"
  head -1 /proc/driver/nvidia/version 2>/dev/null
  ls -d /usr/local/cuda-* 2>/dev/null
  dpkg-query -W -f '${Package}\t${Version}\t${Status}\n' 2>/dev/null \
    | grep -E '^(nvidia|libnvidia|cuda-(toolkit|nvcc|drivers|compat)|libcudnn|cudnn|libnccl)' \
    | sort
  python3 -c 'import torch; print("torch", torch.__version__, torch.version.cuda,
    torch.backends.cudnn.version(), torch.cuda.nccl.version())'
} >"$out/machine.txt" 2>&1

# One inventory declaring what is installed here, one declaring something else. They are
# kept in run.log (what comes back from the machine is limited to a few files).
inv=$(mktemp -d)
cat >"$inv/inventory-match.yaml" <<YAML
hosts:
  gpu-local:
    connection: local
    become: none
    # the image brings driver, CUDA, cuDNN and NCCL without NVIDIA's apt repository
    repos: {nvidia: null}
    gpus: {model: H200, count: $gpus}
    stack:
      driver: {branch: "580", flavor: open}
      cuda: {toolkits: ["13.0"]}
      cudnn: "9"
      nccl: "2.28"
      smoke: [nvidia-smi, cuda-vectoradd, torch, tensorflow, nccl-allreduce]
YAML
cat >"$inv/inventory-other.yaml" <<YAML
hosts:
  gpu-local:
    connection: local
    become: none
    gpus: {model: H200, count: $gpus}
    stack:
      driver: {branch: "570", flavor: open}
      cuda: {toolkits: ["12.8"]}
      cudnn: "9"
      nccl: "2.25"
YAML
for f in "$inv"/*.yaml; do echo "--- $(basename "$f")"; cat "$f"; done >>"$log"

if gn facts --help >/dev/null 2>&1; then
  step facts facts.txt gn facts "$inv/inventory-match.yaml"
  step facts-json facts.json gn facts --json "$inv/inventory-match.yaml"
else
  echo "facts: not available in this gpunode" | tee -a "$log"
fi
if gn plan --help >/dev/null 2>&1; then
  step plan-match plan.txt gn plan --detailed-exitcode "$inv/inventory-match.yaml"
  step plan-other plan.txt gn plan "$inv/inventory-other.yaml"
else
  echo "plan: not available in this gpunode" | tee -a "$log"
fi

step smoke smoke.json gn smoke --json --python /opt/torch/.venv/bin/python3 \
  "$inv/inventory-match.yaml"
# The table, from the same results (the suite runs once).
python3 - "$out/smoke.json" >"$out/smoke.txt" 2>&1 <<'PY'
import json, sys
from gpunode.smoke.report import render
from gpunode.smoke.runner import HostSmoke
text = open(sys.argv[1]).read()
data = json.loads(text[text.index("{"):text.rindex("}") + 1])
print(render([HostSmoke.from_json(h) for h in data["hosts"]]))
print(f"exit code: {data['exit_code']}")
PY
cat "$out/smoke.txt"
cat "$log"
