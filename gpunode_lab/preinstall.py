"""`gpunode lab install`: put exact package versions on a host through its own apt and dpkg.

Tests of upgrades, holds and drift need a host that already runs an older release. Going
through the host's apt (not copying files in) keeps its dpkg database, apt lists and holds
real; with a reboot, the installed driver's kernel module loads as it would on a machine.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from typing import Any

from gpunode_lab import control
from gpunode_lab.faults import host_exec
from gpunode_lab.state import LabConfig, LabPaths

PIN = re.compile(r"[a-z0-9][a-z0-9+.-]+=[A-Za-z0-9.+~:-]+")

# argv: distro, repository URL, hold (0/1), PKG=VERSION...
INSTALL_SH = r"""
set -e
distro=$1 url=$2 hold=$3
shift 3
ring=/usr/share/keyrings/cuda-archive-keyring.gpg
list=/etc/apt/sources.list.d/cuda-$distro-x86_64.list
if [ ! -s "$ring" ] || [ ! -s "$list" ]; then
    deb=/tmp/gpunode-lab-cuda-keyring.deb
    python3 -c 'import sys, urllib.request
open(sys.argv[2], "wb").write(urllib.request.urlopen(sys.argv[1], timeout=60).read())' \
        "$url/$distro/x86_64/cuda-keyring_1.1-1_all.deb" "$deb"
    dpkg -i "$deb" >/dev/null
    rm -f "$deb"
fi
apt-get update -q >/dev/null
named=""
for pin in "$@"; do named="$named ${pin%%=*}"; done
# apt takes the newest of a dependency, not the version an older release pins with
# (= VERSION), and then gives up: pin those exact dependencies too, transitively.
pins="$*" names="$named" todo="$*"
while [ -n "$todo" ]; do
    next=""
    for pin in $todo; do
        for dep in $(apt-cache show --no-all-versions "$pin" 2>/dev/null \
                | sed -n 's/^Depends: //p' | tr ',' '\n' \
                | sed -n 's/^ *\([^ |]*\) (= \([^)]*\)) *$/\1=\2/p'); do
            case " $names " in *" ${dep%%=*} "*) continue ;; esac
            names="$names ${dep%%=*}" pins="$pins $dep" next="$next $dep"
        done
    done
    todo=$next
done
# a machine running a DKMS driver has its kernel's headers: the module builds for it
headers=linux-headers-$(uname -r)
apt-cache policy "$headers" 2>/dev/null | grep -q 'Candidate: [0-9]' || headers=""
apt-get install -y -q --allow-downgrades --allow-change-held-packages $headers $pins >/dev/null
if [ "$hold" = 1 ]; then apt-mark hold $named >/dev/null; fi
dpkg-query -W -f '${Package}=${Version}\n' $names
"""


class InstallError(Exception):
    pass


Say = Callable[[str], None]


def _host(paths: LabPaths, name: str) -> dict[str, Any]:
    hosts = control.request(paths, "status", timeout=10)["hosts"]
    for h in hosts:
        if h["name"] == name:
            found: dict[str, Any] = h
            return found
    raise InstallError(f"no lab host named {name!r}")


def install(
    paths: LabPaths,
    cfg: LabConfig,
    name: str,
    pins: list[str],
    hold: bool = False,
    reboot: bool = False,
    say: Say = lambda _: None,
) -> list[str]:
    """Install `pins` (PKG=VERSION) in host `name`; return PKG=VERSION as dpkg now has them."""
    bad = [p for p in pins if not PIN.fullmatch(p)]
    if bad or not pins:
        raise InstallError(f"expected PKG=VERSION arguments, got {' '.join(bad) or 'none'}")
    host = _host(paths, name)
    if host["state"] != "up" or host["init_pid"] is None:
        raise InstallError(f"{name} is {host['state']}; try again once it has booted")
    distro = "ubuntu" + cfg.ubuntu.replace(".", "")
    argv = ["/bin/sh", "-c", INSTALL_SH, "gpunode-lab-install", distro, cfg.repo_url]
    out = host_exec(int(host["init_pid"]), [*argv, "1" if hold else "0", *pins], timeout=600)
    if out.returncode != 0:
        raise InstallError(f"{name}: installing failed:\n{(out.stderr or out.stdout).strip()}")
    have = out.stdout.split()
    say(f"{name}: installed {' '.join(have)}" + (" (held)" if hold else ""))
    if reboot:
        _reboot(paths, name, str(host["boot_id"]))
        say(f"{name}: rebooted")
    return have


def _reboot(paths: LabPaths, name: str, before: str, timeout: float = 60) -> None:
    """Reboot as the lab's `reboot` does; return once the host is back and sshd answers."""
    reply = control.request(paths, "reboot", host=name)
    if not reply.get("ok"):
        raise InstallError(f"{name}: reboot failed: {reply.get('error')}")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        host = _host(paths, name)
        if host["state"] == "up" and host["boot_id"] != before:
            silent = "refuse" in host["faults"] or "stall" in host["faults"]
            if silent or control.accepts(host["address"], int(host["port"])):
                return
        time.sleep(0.1)
    raise InstallError(f"{name} did not boot again within {timeout:.0f}s")
