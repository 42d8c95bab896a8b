#!/usr/bin/env bash
# On a real GPU machine (connection: local, no network): a converged apply's whole wall time,
# this checkout against another tree of gpunode (BEFORE, a folder holding its gpunode/),
# alternating run by run so that both see the same machine; then the exporter's memory
# figures beside nvidia-smi's.
#
#   bench/hardware-converged.sh BEFORE [RUNS]   (as root; wheels in .whl/, see docs/hardware.md)
#
# PYTHONS="python3 /usr/bin/python3" measures with each interpreter in turn (default: the
# first python3 on PATH, on the device machines the PyTorch venv's, whose .pth hooks run at
# every start; /usr/bin/python3 is the system's, as a pipx or venv install of gpunode has it).
# SKIP_EXPORTER=1 leaves out the exporter's memory figures.
set -u
cd "$(dirname "$0")/.."
before=$(realpath "$1")
runs=${2:-9}
unset PYTHONDONTWRITEBYTECODE
. bench/hardware-env.sh
after=$(realpath "${AFTER:-$PWD}")  # AFTER=DIR: another tree than this checkout
site=${PYTHONPATH%%:*}  # the wheels' folder; none when the python's own packages serve
[ "$site" = "$PWD" ] && site=/nonexistent
pythons=${PYTHONS:-python3}
for py in $pythons; do
  $py -m compileall -q "$site" "$after/gpunode" "$before/gpunode" >/dev/null
done
gpus=$(nvidia-smi -L | grep -c '^GPU ')
inv=$(mktemp -d)/inventory.yaml
cat >"$inv" <<YAML
hosts:
  gpu-local:
    connection: local
    become: none
    repos: {nvidia: null}
    gpus: {model: H200, count: $gpus}
    stack:
      driver: {branch: "580", flavor: open}
      cuda: {toolkits: ["13.0"]}
      cudnn: "9"
      nccl: "2.28"
YAML
export GPUNODE_STATE_DIR=$(mktemp -d) GPUNODE_CACHE_DIR=$(mktemp -d)
apply() {  # apply TREE: one converged apply's wall ms; its recap kept in /tmp/apply.txt
  local s e
  s=$(date +%s%N)
  # from the inventory's folder: `python -m` puts the working directory first on sys.path,
  # and from this checkout's root it would run this checkout's gpunode whatever TREE says
  env -C "$(dirname "$inv")" PYTHONPATH=$site:$1 $py -m gpunode apply "$inv" --yes --no-tui \
    --no-smoke >/tmp/apply.txt 2>&1
  echo "exit $?" >>/tmp/apply.txt
  e=$(date +%s%N)
  echo $(((e - s) / 1000000))
}
median() { printf '%s\n' "$@" | sort -n | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }
for py in $pythons; do
  echo "== $py ($($py -V 2>&1)): a converged apply, ms"
  for tree in "$before" "$after"; do  # converge once with each, and fill the role cache
    apply "$tree" >/dev/null
    tail -3 /tmp/apply.txt
  done
  b=() a=()
  for _ in $(seq "$runs"); do
    b+=("$(apply "$before")")
    a+=("$(apply "$after")")
  done
  tail -2 /tmp/apply.txt
  echo "before: median $(median "${b[@]}") ms, runs ${b[*]}"
  echo "after:  median $(median "${a[@]}") ms, runs ${a[*]}"
done
[ -n "${SKIP_EXPORTER:-}" ] && exit 0
echo "== the exporter (NVML) beside nvidia-smi, idle"
env -C "$(dirname "$inv")" PYTHONPATH=$site:$after ${pythons%% *} -m gpunode exporter "$inv" --listen 127.0.0.1:10140 --interval 1 \
  >/tmp/exporter.log 2>&1 &
pid=$!
for _ in $(seq 100); do
  curl -sf 'http://127.0.0.1:10140/metrics?target=gpu-local' -o /tmp/m.txt &&
    grep -q '^DCGM_FI_DEV_FB_USED' /tmp/m.txt && break
  sleep 0.2
done
nvidia-smi --query-gpu=index,memory.used,memory.reserved,memory.free,memory.total \
  --format=csv,noheader,nounits
grep -E '^DCGM_FI_DEV_FB_(USED|FREE|RESERVED)' /tmp/m.txt | sed 's/{.*gpu="\([0-9]*\)".*} / gpu \1 /'
curl -sf http://127.0.0.1:10140/targets
echo
kill $pid
wait $pid 2>/dev/null
