#!/bin/sh
# Installs the Debian/Ubuntu packages `gpunode lab` needs: OpenSSH server and client,
# sudo, iproute2 (ip, tc), util-linux (unshare, nsenter), gnupg, dpkg-dev, apt-utils, tmux.
# Idempotent and quiet: prints only what it installs, or errors. Needs root.
set -eu
PACKAGES="openssh-server openssh-client sudo iproute2 util-linux gnupg dpkg-dev apt-utils \
tmux openssl procps python3"

if [ "$(id -u)" != 0 ]; then
    echo "setup-lab-deps: run as root (sudo $0)" >&2
    exit 2
fi
if ! command -v apt-get >/dev/null 2>&1; then
    echo "setup-lab-deps: needs a Debian or Ubuntu machine (apt-get)" >&2
    exit 2
fi
missing=""
for pkg in $PACKAGES; do
    status=$(dpkg-query -W -f '${Status}' "$pkg" 2>/dev/null || true)
    [ "$status" = "install ok installed" ] || missing="$missing $pkg"
done
[ -n "$missing" ] || exit 0
echo "setup-lab-deps: installing$missing"
export DEBIAN_FRONTEND=noninteractive
if ! out=$(apt-get update -qq 2>&1); then echo "$out" >&2; exit 1; fi
# shellcheck disable=SC2086
if ! out=$(apt-get install -y -qq --no-install-recommends $missing 2>&1); then
    echo "$out" >&2
    exit 1
fi
