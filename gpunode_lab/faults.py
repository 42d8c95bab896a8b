"""Fault knobs: ways a lab host misbehaves, for the tests of everything built on the lab.

Each knob's state is kept in the host's faults.json, so boot-time faults (refuse,
stall, secure-boot, nouveau, disk-full, dpkg-lock) come back after a reboot.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable
from typing import Any, Protocol, TypeVar

from gpunode_lab import hostinit, procs
from gpunode_lab.standins import DPKG_LOCKER, SECURE_BOOT_VAR


class FaultyHost(Protocol):
    """What a knob needs of a supervised host (supervisor.Host is one)."""

    name: str
    faults: dict[str, Any]

    @property
    def init_pid(self) -> int | None: ...

    def ready(self) -> bool: ...

    def set_faults(self, new: dict[str, Any]) -> None: ...


T = TypeVar("T")

KNOBS = {
    "refuse": "connections are refused (sshd is stopped)",
    "stall": "connections are accepted, then nothing is ever said",
    "drop": "SSH sessions are cut after VALUE seconds (default 2)",
    "latency": "every round trip takes VALUE more milliseconds (a delaying relay)",
    "dpkg-lock": "another process holds /var/lib/dpkg/lock-frontend",
    "disk-full": "/var/cache/apt/archives is a nearly full 8 MiB filesystem",
    "secure-boot": "Secure Boot is enabled in the firmware",
    "nouveau": "the nouveau kernel module is loaded (at boot too, and then nvidia is not,"
    " unless update-initramfs wrote an initramfs that blacklists it)",
    "hold": "apt-mark hold VALUE in the host",
    "bg-upgrade": "a background upgrade bumps the driver's user-space libraries (one-shot)",
    "load": "GPU load pattern VALUE: idle, busy or wave",
}
LOAD_PATTERNS = ("idle", "busy", "wave")
SYS_PATH = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def host_exec(
    pid: int, argv: list[str], timeout: float = 300, input: str | None = None
) -> subprocess.CompletedProcess[str]:
    """Run a command as root inside a host: its namespaces, its root, a clean environment."""
    return subprocess.run(
        [
            "nsenter",
            "-t",
            str(pid),
            "-m",
            "-u",
            "-i",
            "-p",
            "-r",
            "-w",
            "--",
            "/usr/bin/env",
            "-i",
            SYS_PATH,
            "LANG=C.UTF-8",
            "DEBIAN_FRONTEND=noninteractive",
            *argv,
        ],
        capture_output=True,
        text=True,
        timeout=timeout,
        input=input,
        check=False,
    )


def _sh(pid: int, script: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return host_exec(pid, ["/bin/sh", "-c", script], timeout=timeout)


class StallListener:
    """Accepts TCP connections on the host's address and never says a word."""

    def __init__(self, address: str, port: int) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind((address, port))
        self.sock.listen(128)
        self.conns: list[socket.socket] = []
        self.closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self.closed:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.conns.append(conn)

    def close(self) -> None:
        self.closed = True
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)
        self.sock.close()
        for conn in self.conns:
            conn.close()


def sshd_pid(init_pid: int | None) -> int | None:
    if init_pid is None:
        return None
    for pid in procs.children(init_pid):
        if procs.comm(pid) == "sshd":
            return pid
    return None


def drop_sessions(init_pid: int | None, after_s: float) -> None:
    """Cut every SSH session of the host that is older than `after_s` seconds: the
    session's privileged and user processes and everything they started."""
    master = sshd_pid(init_pid)
    if init_pid is None or master is None:
        return
    # sessions hang off the listener; a session whose monitor died hangs off init
    heads = procs.children(master) + [
        p for p in procs.children(init_pid) if p != master and procs.comm(p) == "sshd"
    ]
    for head in heads:
        if procs.age_seconds(head) < after_s:
            continue
        for pid in [head, *procs.descendants(head)]:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def start_dpkg_lock(pid: int) -> None:
    script = f"setsid /usr/bin/python3 -c {shlex.quote(DPKG_LOCKER)} </dev/null >/dev/null 2>&1 &"
    script += "\nfor i in $(seq 50); do [ -f /run/gpunode-lab-dpkg-lock.pid ] && exit 0; "
    script += "sleep 0.1; done; exit 1"
    out = _sh(pid, script)
    if out.returncode != 0:
        raise RuntimeError("the dpkg lock holder did not start")


def _stop_dpkg_lock(pid: int) -> None:
    _sh(pid, "f=/run/gpunode-lab-dpkg-lock.pid; [ -f $f ] && kill $(cat $f); rm -f $f; true")


BG_UPGRADE_SH = r"""
f=/usr/share/gpunode-lab/driver-version
[ -f "$f" ] || { echo "no simulated driver is installed" >&2; exit 3; }
read -r old flavor < "$f"
pkgs=$(dpkg-query -W -f '${Package} ${Status}\n' 'libnvidia-compute-*' 2>/dev/null \
       | awk '/ installed$/ {print $1}')
if [ -n "$pkgs" ]; then
    apt-get update -q >/dev/null 2>&1
    apt-get install -y -q --only-upgrade $pkgs >/dev/null 2>&1
fi
read -r new flavor2 < "$f"
if [ "$new" = "$old" ]; then
    last=${old##*.}
    new=${old%.*}.$(printf '%02d' "$(expr "$last" + 1)")
    echo "$new $flavor" > "$f"
fi
echo "$old -> $new"
"""


def _running(host: FaultyHost) -> int:
    pid = host.init_pid
    if pid is None or not host.ready():
        raise RuntimeError(f"{host.name} is not up; try again once it has booted")
    return pid


def _toggle(f: dict[str, Any], knob: str, off: bool) -> None:
    if off:
        f.pop(knob, None)
    else:
        f[knob] = True


def bind_retry(make: Callable[[], T]) -> T:
    """Take over a port that a stopping sshd is still releasing."""
    for _ in range(60):
        try:
            return make()
        except OSError:
            time.sleep(0.05)
    return make()


class KnobError(Exception):
    """A knob's value (or the host's answer) makes the request fail; the message says why."""


def _listener(host: FaultyHost, f: dict[str, Any], knob: str, value: Any, off: bool) -> str:
    """refuse, stall, latency: the supervisor's listeners follow them."""
    if off:
        f.pop(knob, None)
    elif knob != "latency":
        f[knob] = True
    elif value is None or not str(value).isdigit():
        raise KnobError("latency needs milliseconds: fault HOST latency 200")
    else:
        f[knob] = int(value)
    return ""


def _drop(host: FaultyHost, f: dict[str, Any], knob: str, value: Any, off: bool) -> str:
    if off:
        f.pop(knob, None)
    else:
        f[knob] = float(value) if value not in (None, "") else 2.0
    return ""


def _dpkg_lock(host: FaultyHost, f: dict[str, Any], knob: str, value: Any, off: bool) -> str:
    pid = _running(host)
    if off:
        _stop_dpkg_lock(pid)
        f.pop(knob, None)
    else:
        if knob not in f:
            start_dpkg_lock(pid)
        f[knob] = True
    return ""


def _disk_full(host: FaultyHost, f: dict[str, Any], knob: str, value: Any, off: bool) -> str:
    pid = _running(host)
    if off and knob in f:
        _sh(pid, hostinit.DISK_FULL_OFF_SH)
        f.pop(knob)
    elif not off and knob not in f:
        out = _sh(pid, hostinit.DISK_FULL_SH)
        if out.returncode != 0:
            raise KnobError(out.stderr.strip())
        f[knob] = True
    return ""


def _secure_boot(host: FaultyHost, f: dict[str, Any], knob: str, value: Any, off: bool) -> str:
    _toggle(f, knob, off)
    if (init := host.init_pid) is not None:
        var = f"/proc/{init}/root/sys/firmware/efi/efivars/{SECURE_BOOT_VAR}"
        with open(var, "wb") as fh:
            fh.write(hostinit.secure_boot_bytes(not off))
    return ""


def _nouveau(host: FaultyHost, f: dict[str, Any], knob: str, value: Any, off: bool) -> str:
    _toggle(f, knob, off)
    if (init := host.init_pid) is not None:
        d = f"/proc/{init}/root/sys/module/nouveau"
        if off:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(f"{d}/initstate")
                os.rmdir(d)
        else:
            os.makedirs(d, exist_ok=True)
            with open(f"{d}/initstate", "w") as fh:
                fh.write("live\n")
    return ""


def _hold(host: FaultyHost, f: dict[str, Any], knob: str, value: Any, off: bool) -> str:
    if not value:
        raise KnobError("hold needs a package name: fault HOST hold PACKAGE")
    out = host_exec(_running(host), ["apt-mark", "unhold" if off else "hold", str(value)])
    if out.returncode != 0:
        raise KnobError((out.stderr or out.stdout).strip())
    held = [p for p in f.get(knob, []) if p != value]
    if not off:
        held.append(str(value))
    f[knob] = held
    if not held:
        f.pop(knob)
    return ""


def _bg_upgrade(host: FaultyHost, f: dict[str, Any], knob: str, value: Any, off: bool) -> str:
    out = _sh(_running(host), BG_UPGRADE_SH)
    if out.returncode != 0:
        raise KnobError(out.stderr.strip())
    return out.stdout.strip()


def _load(host: FaultyHost, f: dict[str, Any], knob: str, value: Any, off: bool) -> str:
    pattern = "idle" if off else str(value or "busy")
    if pattern not in LOAD_PATTERNS:
        raise KnobError(f"load pattern must be one of {', '.join(LOAD_PATTERNS)}")
    path = f"/proc/{_running(host)}/root/etc/gpunode-lab/load.json"
    with open(path) as fh:
        doc = json.load(fh)
    doc["pattern"] = pattern
    with open(path, "w") as fh:
        fh.write(json.dumps(doc) + "\n")
    return f"load {pattern}"


# knob -> what sets it: changes the faults `f` in place, acts on the host, returns a note.
_SETTERS: dict[str, Callable[[FaultyHost, dict[str, Any], str, Any, bool], str]] = {
    "refuse": _listener,
    "stall": _listener,
    "latency": _listener,
    "drop": _drop,
    "dpkg-lock": _dpkg_lock,
    "disk-full": _disk_full,
    "secure-boot": _secure_boot,
    "nouveau": _nouveau,
    "hold": _hold,
    "bg-upgrade": _bg_upgrade,
    "load": _load,
}
_LISTENER_KNOBS = ("refuse", "stall", "latency")


def apply(
    host: FaultyHost, knob: str, value: Any, off: bool, sync_listeners: Callable[[], None]
) -> dict[str, Any]:
    """Turn `knob` on (or off) for `host`; `sync_listeners` makes the host's listeners (its
    sshd, a stall or latency relay) follow the new faults."""
    if knob not in KNOBS:
        return {"ok": False, "error": f"unknown knob {knob!r}; knobs: {', '.join(KNOBS)}"}
    if knob == "bg-upgrade" and off:
        return {"ok": True, "note": "bg-upgrade is one-shot; reboot the host to load it"}
    f = dict(host.faults)
    try:
        note = _SETTERS[knob](host, f, knob, value, off)
    except KnobError as exc:
        return {"ok": False, "error": str(exc)}
    host.set_faults(f)
    if knob in _LISTENER_KNOBS:
        sync_listeners()
    return {"ok": True, "faults": f, "note": note}
