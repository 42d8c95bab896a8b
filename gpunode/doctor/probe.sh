# gpunode doctor: what the facts leave out and a diagnosis needs, in one run. POSIX sh, no
# sudo. Every section is independent: a missing tool or an unreadable file leaves it empty.
# Arguments: [--conda PREFIX]...
LC_ALL=C
export LC_ALL
PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:/usr/local/nvidia/bin:$PATH
conda_prefixes="/opt/conda /opt/miniconda3 /opt/miniforge3"
while [ $# -gt 0 ]; do
  case "$1" in
    --conda) conda_prefixes="$conda_prefixes $2"; shift 2 ;;
    *) shift ;;
  esac
done
have() { command -v "$1" >/dev/null 2>&1; }
section() { printf '\n### %s\n' "$1"; }
# The kernel's lines about the driver: since this boot (dmesg needs kernel.dmesg_restrict=0
# or root; journald and kern.log need the adm group). The parser keeps kern.log's lines after
# its last "Linux version" (this boot) and takes each message once.
KLOG='Linux version|NVRM|nouveau|fallen off the bus'

section kernel-log
{ dmesg 2>/dev/null || journalctl -k -b 0 -q --no-pager 2>/dev/null; } |
  grep -E "$KLOG" | tail -n 300 | sed 's/^/dmesg /'
[ -r /var/log/kern.log ] && grep -E "$KLOG" /var/log/kern.log | tail -n 300 | sed 's/^/kern.log /'
section smi-q
if have nvidia-smi; then
  nvidia-smi -q 2>&1
  echo "rc=$?"
else
  echo "rc=missing"
fi
section ldconfig
have ldconfig && ldconfig -p 2>/dev/null | grep -E 'lib(cudart|cudnn|nccl|cuda)\.so'
section login-shell
# A login shell's environment, as a user's ssh session starts: /etc/profile and profile.d.
# timeout: a profile that waits on something must not hold the whole probe
if have bash; then
  t=""; have timeout && t="timeout 20"
  $t env -i HOME="$HOME" USER="$(id -un)" LOGNAME="$(id -un)" SHELL=/bin/bash bash -l -c \
    'printf "CUDA_HOME=%s\nPATH=%s\nnvcc=%s\n" "${CUDA_HOME-}" "$PATH" "$(command -v nvcc)"' \
    </dev/null 2>/dev/null
fi
section torch-cuda
for p in $conda_prefixes; do
  [ -x "$p/bin/conda" ] || continue
  for e in "$p" "$p"/envs/*; do
    for v in "$e"/lib/python*/site-packages/torch/version.py; do
      [ -r "$v" ] || continue
      printf '%s %s\n' "$e" "$(sed -n "s/^cuda[^=]*= *//p" "$v" | head -n 1)"
    done
  done
done
section conda-disk
for p in $conda_prefixes; do
  [ -x "$p/bin/conda" ] && df -P -B1 "$p" 2>/dev/null | tail -n 1
done
section end
