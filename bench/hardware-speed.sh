#!/usr/bin/env bash
# On a real GPU machine (connection: local, no network): how many times the facts read runs
# nvidia-smi on idle GPUs and with a CUDA process holding memory, and a converged apply's
# wall time with and without the nvidia-smi smoke test.
#
#   bench/hardware-speed.sh        (as root; gpunode's wheels in .whl/, see docs/hardware.md)
#
# nvidia-smi is counted through a logging shim bind-mounted over it in a private mount
# namespace; nothing outside that namespace sees the shim.
set -u
cd "$(dirname "$0")/.."
unset PYTHONDONTWRITEBYTECODE
. bench/hardware-env.sh
python3 -m compileall -q /tmp/site "$PWD/gpunode" >/dev/null
export PYTHONUNBUFFERED=1
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
      smoke: [nvidia-smi]
YAML
smi=$(command -v nvidia-smi)
cp "$smi" /tmp/real-smi
printf '#!/bin/sh\necho "$*" >> /tmp/smi.log\nexec /tmp/real-smi "$@"\n' >/tmp/shim-smi
chmod +x /tmp/shim-smi
count() {  # count: `gpunode facts --json` with nvidia-smi as the shim; its runs and the processes
  : >/tmp/smi.log
  unshare -m sh -c "mount --bind /tmp/shim-smi $smi && python3 -m gpunode facts --json $inv" \
    >/tmp/facts.json 2>&1
  echo "nvidia-smi runs: $(grep -c . /tmp/smi.log) ($(cut -d' ' -f1 /tmp/smi.log | cut -d= -f1 | tr '\n' ' '))"
  python3 -c "import json; d=json.load(open('/tmp/facts.json'));
print('gpu_processes:', d['hosts']['gpu-local']['facts']['gpu_processes'])"
}
echo "== idle GPUs"
count
rm -f /tmp/busy
/opt/torch/.venv/bin/python -c "import torch, time; x = torch.ones(1 << 28, device='cuda');
torch.cuda.synchronize(); open('/tmp/busy', 'w').write('1'); time.sleep(60)" &
busy=$!
for _ in $(seq 150); do [ -f /tmp/busy ] && break; sleep 0.2; done
echo "== a torch process holding $(nvidia-smi --query-gpu=memory.used --format=csv,noheader | head -1)"
count
kill $busy
wait $busy 2>/dev/null
python3 -m gpunode apply "$inv" --yes --no-tui >/dev/null 2>&1  # the one file it manages here
for mode in --no-smoke --smoke; do
  for _ in 1 2 3 4 5 6 7; do
    s=$(date +%s.%N)
    python3 -m gpunode apply "$inv" --yes --no-tui $([ $mode = --no-smoke ] && echo --no-smoke) \
      >/tmp/apply.txt 2>&1
    rc=$?
    e=$(date +%s.%N)
    echo "converged apply $mode: exit $rc, $(python3 -c "print(f'{$e - $s:.3f}')") s"
  done
done
