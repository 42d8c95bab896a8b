#!/usr/bin/env bash
# The driver lifecycle's facts against a real GPU machine (connection: local, no network):
# installed kernels, the next boot's, headers, `dkms status`, processes using the GPUs,
# persistence mode, gpunode's own holds; then what a plan of this machine's own stack
# would do. Plans and reads only: nothing on the machine is changed.
#
#   bench/hardware-lifecycle.sh [OUTDIR]
#
# gpunode's dependencies come as wheels from .whl/ (docs/hardware.md).
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:-/tmp/gpunode-lifecycle}
mkdir -p "$out"
. bench/hardware-env.sh
export GPUNODE_STATE_DIR=$out/state GPUNODE_CACHE_DIR=$out/cache
inv=$out/inventory.yaml
cat >"$inv" <<'YAML'
hosts:
  gpu-local:
    connection: local
    become: none
    repos: {nvidia: null}
    stack:
      driver: {branch: "580", flavor: open}
      cuda: {toolkits: ["13.0"]}
      cudnn: "9"
      nccl: "2.28"
YAML
{
  echo "date: $(date -u +%FT%TZ)  kernel: $(uname -r)"
  echo "gpunode: $(python3 -m gpunode --version)"
  echo "--- ls /lib/modules /boot"; ls /lib/modules; ls -l /boot 2>&1 | grep -E 'vmlinuz|initrd'
  echo "--- ls /usr/src"; ls /usr/src 2>&1
  echo "--- dkms status"; dkms status 2>&1
  echo "--- compute apps"
  nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv,noheader,nounits 2>&1
  echo "--- persistence"; nvidia-smi --query-gpu=index,persistence_mode --format=csv,noheader 2>&1
  echo "--- apt-mark showhold"; apt-mark showhold 2>&1
  echo "--- unattended-upgrades"; ls /etc/apt/apt.conf.d/ 2>&1
} >"$out/machine.txt" 2>&1
python3 -m gpunode facts "$inv" >"$out/facts.txt" 2>&1; echo "[facts exit $?]" >>"$out/facts.txt"
python3 -m gpunode facts --json "$inv" >"$out/facts.json" 2>"$out/facts.err"
python3 -m gpunode plan --detailed-exitcode "$inv" >"$out/plan.txt" 2>&1
echo "[plan exit $?]" >>"$out/plan.txt"
python3 -m gpunode plan --json "$inv" >"$out/plan.json" 2>&1
python3 -m gpunode top --once --json "$inv" >"$out/top.json" 2>&1; echo "[top exit $?]" >>"$out/top.json"
cat "$out/machine.txt" "$out/facts.txt" "$out/plan.txt"
