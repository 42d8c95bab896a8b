#!/usr/bin/env bash
# Proves the install path on a clean system: a minimal Debian made with debootstrap, this
# checkout copied in, scripts/setup.sh run inside it with the distribution's Python (which
# refuses pip installs, PEP 668), then the installed gpunode run from PATH.
#   scripts/fresh-check.sh           (root; needs Debian's package archive)
# FRESH_SUITE (bookworm), FRESH_MIRROR (http://deb.debian.org/debian) and FRESH_KEEP=1
# (keep the tree for a look) change what it does. Prints each step; exits non-zero on the
# first one that fails.
set -euo pipefail
cd "$(dirname "$0")/.."

if [[ $(id -u) -ne 0 ]]; then
  echo "fresh-check.sh: run it as root (debootstrap and chroot need it)" >&2
  exit 2
fi
if ! command -v debootstrap >/dev/null; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap >/dev/null
fi

suite=${FRESH_SUITE:-bookworm}
mirror=${FRESH_MIRROR:-http://deb.debian.org/debian}
root=$(mktemp -d /var/tmp/gpunode-fresh.XXXXXXXX)
chmod 0755 "$root"  # apt downloads as its own user
cleanup() {
  for m in dev/pts dev sys proc; do umount -l "$root/$m" 2>/dev/null || true; done
  if [[ ${FRESH_KEEP:-0} == 1 ]]; then echo "kept: $root"; else rm -rf "$root"; fi
}
trap cleanup EXIT
step() { printf '\n=== %s (%ss)\n' "$1" "$SECONDS"; }

step "debootstrap --variant=minbase $suite into $root"
debootstrap --variant=minbase "$suite" "$root" "$mirror" >"$root.log" 2>&1 \
  || { tail -n 30 "$root.log" >&2; exit 1; }
rm -f "$root.log"

step "the checkout, and what the machine trusts (its CA certificates, its resolver)"
mkdir -p "$root/src/gpunode"
git ls-files -z --cached --others --exclude-standard | xargs -0 tar -cf - | tar -xf - -C "$root/src/gpunode"
cp -L /etc/resolv.conf "$root/etc/resolv.conf"
if compgen -G "/usr/local/share/ca-certificates/*.crt" >/dev/null; then
  mkdir -p "$root/usr/local/share/ca-certificates"
  cp /usr/local/share/ca-certificates/*.crt "$root/usr/local/share/ca-certificates/"
fi
# No daemon starts inside the chroot while packages install.
printf '#!/bin/sh\nexit 101\n' >"$root/usr/sbin/policy-rc.d"
chmod 0755 "$root/usr/sbin/policy-rc.d"
mount -t proc proc "$root/proc"
mount --rbind /sys "$root/sys"
mount --rbind /dev "$root/dev"

inside() {
  chroot "$root" /usr/bin/env -i HOME=/root LANG=C.UTF-8 TERM=dumb \
    PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    PIP_CERT=/etc/ssl/certs/ca-certificates.crt PIP_DISABLE_PIP_VERSION_CHECK=1 \
    ${PIP_INDEX_URL:+PIP_INDEX_URL=$PIP_INDEX_URL} \
    ${HTTPS_PROXY:+HTTPS_PROXY=$HTTPS_PROXY} ${https_proxy:+https_proxy=$https_proxy} \
    /bin/bash -euo pipefail -c "$1"
}

step "scripts/setup.sh with the distribution's python3"
inside 'cd /src/gpunode && PYTHON=/usr/bin/python3 scripts/setup.sh'

step "the distribution's Python is externally managed, and gpunode did not go into it"
inside 'ls /usr/lib/python3*/EXTERNALLY-MANAGED'
inside '! /usr/bin/python3 -c "import gpunode" 2>/dev/null'

step "gpunode from PATH"
inside 'command -v gpunode; gpunode --version'
inside 'cd / && gpunode check /src/gpunode/inventories/lab.yaml'
inside 'gpunode schema >/tmp/schema.json && python3 -c "import json; json.load(open(\"/tmp/schema.json\"))"'
inside 'gpunode lab --help >/dev/null'  # the lab, a distribution of its own, added its command

step "the README's install lines, from the checkout (tests/test_docs_agree.py keeps them the same)"
inside 'DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends pipx >/dev/null'
inside 'cd /src/gpunode && export PIPX_HOME=/tmp/pipx-a PIPX_BIN_DIR=/tmp/pipx-a/bin
  pipx install . >/dev/null && /tmp/pipx-a/bin/gpunode --version'
inside 'cd /src/gpunode && export PIPX_HOME=/tmp/pipx-b PIPX_BIN_DIR=/tmp/pipx-b/bin
  python3 -m venv /tmp/b && /tmp/b/bin/pip wheel --no-deps -w dist .
  pipx install dist/gpunode-*.whl >/dev/null && /tmp/pipx-b/bin/gpunode --version'

step "fresh-check passed"
