#!/usr/bin/env bash
# Install gpunode and what it needs on a fresh Debian/Ubuntu machine (run as root).
#   scripts/setup.sh          the tool, the lab (gpunode_lab, `gpunode lab`) and the Debian
#                             packages the lab needs (openssh-server, sudo, ...)
#   scripts/setup.sh --dev    also the test and lint tools, and the CPU build of torch
#
# gpunode goes into a virtual environment (GPUNODE_VENV, default .venv in the checkout),
# never into the system Python: a distribution Python refuses pip installs (PEP 668).
# `gpunode` is linked into /usr/local/bin (GPUNODE_BIN_DIR), so it is on PATH.
set -euo pipefail
cd "$(dirname "$0")/.."

dev=0
[[ "${1:-}" == "--dev" ]] && dev=1

if [[ $(id -u) -ne 0 ]]; then
  echo "setup.sh installs Debian packages: run it as root (sudo scripts/setup.sh)" >&2
  exit 2
fi

packages=(openssh-server openssh-client sudo iproute2 gnupg dpkg-dev apt-utils tmux
          ca-certificates python3 python3-venv)
# For the tests: prometheus (the exporter's tests start its binary on loopback themselves;
# the package's own service is stopped and disabled below), a C compiler (the lab builds its
# libcuda stand-in with it), Slurm and munge (`gpunode lab up --slurm` runs its own daemons;
# the packages' services are stopped and disabled below).
[[ $dev == 1 ]] && packages+=(ruby librsvg2-bin vagrant vagrant-libvirt debootstrap prometheus
                              gcc libc6-dev slurmctld slurmd munge slurm-client)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f '${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
if [[ " ${missing[*]} " == *" prometheus "* ]]; then
  # Its service would listen on :9090 and scrape this machine: tests run their own.
  if [[ -d /run/systemd/system ]]; then
    systemctl disable --now prometheus prometheus-node-exporter >/dev/null 2>&1 || true
  else
    service prometheus stop >/dev/null 2>&1 || true
    update-rc.d prometheus disable >/dev/null 2>&1 || true
  fi
fi
if [[ " ${missing[*]} " =~ " "(slurmctld|slurmd|munge)" " ]]; then
  # A node's and a controller's daemons, and munge's: the lab starts its own, per lab.
  if [[ -d /run/systemd/system ]]; then
    systemctl disable --now slurmctld slurmd munge >/dev/null 2>&1 || true
  else
    for s in slurmctld slurmd munge; do
      service "$s" stop >/dev/null 2>&1 || true
      update-rc.d "$s" disable >/dev/null 2>&1 || true
    done
  fi
fi
[[ -x scripts/setup-lab-deps.sh ]] && scripts/setup-lab-deps.sh

venv=${GPUNODE_VENV:-$PWD/.venv}
py=${PYTHON:-python3}
if ! "$venv/bin/python" -c '' 2>/dev/null; then
  rm -rf "$venv"
  "$py" -m venv "$venv"
fi
pip=("$venv/bin/python" -m pip install -q --disable-pip-version-check)
if [[ $dev == 1 ]]; then
  "${pip[@]}" -e '.[dev,mirror]' -e ./gpunode_lab
  # The CPU build of torch, for the smoke suite's CPU run (GPU tests skip with a reason).
  "${pip[@]}" torch==2.13.0 || echo "torch==2.13.0 not installable here: torch smoke tests will skip" >&2
else
  "${pip[@]}" -e . -e ./gpunode_lab
fi

bin_dir=${GPUNODE_BIN_DIR:-/usr/local/bin}
mkdir -p "$bin_dir"
ln -sfn "$venv/bin/gpunode" "$bin_dir/gpunode"
echo "gpunode $("$bin_dir/gpunode" --version | awk '{print $3}') installed in $venv, linked as $bin_dir/gpunode"
