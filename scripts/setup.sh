#!/usr/bin/env bash
# Install gpunode and what it needs on a fresh Debian/Ubuntu machine (run as root).
#   scripts/setup.sh          the tool, and what `gpunode lab` needs (openssh-server, sudo, ...)
#   scripts/setup.sh --dev    also the test and lint tools, and the CPU build of torch
set -euo pipefail
cd "$(dirname "$0")/.."

dev=0
[[ "${1:-}" == "--dev" ]] && dev=1

if [[ $(id -u) -ne 0 ]]; then
  echo "setup.sh installs Debian packages: run it as root (sudo scripts/setup.sh)" >&2
  exit 2
fi

packages=(openssh-server openssh-client sudo iproute2 gnupg dpkg-dev apt-utils tmux
          ca-certificates python3-venv)
[[ $dev == 1 ]] && packages+=(ruby librsvg2-bin vagrant vagrant-libvirt)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f '${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
[[ -x scripts/setup-lab-deps.sh ]] && scripts/setup-lab-deps.sh

py=${PYTHON:-python3}
if [[ $dev == 1 ]]; then
  "$py" -m pip install -q -e '.[dev]'
  # The CPU build of torch, for the smoke suite's CPU run (GPU tests skip with a reason).
  "$py" -m pip install -q torch==2.13.0 || echo "torch==2.13.0 not installable here: torch smoke tests will skip" >&2
else
  "$py" -m pip install -q -e .
fi
echo "gpunode $("$py" -m gpunode --version | awk '{print $3}') installed"
