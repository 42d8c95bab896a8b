"""Fault knobs: ways a lab host misbehaves, for the tests of everything built on the lab.

Each knob's state is kept in the host's faults.json, so boot-time faults (refuse,
stall, secure-boot, nouveau, disk-full, dpkg-lock) come back after a reboot.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable
from typing import Any, Protocol, TypeVar

from gpunode_lab import hostinit, procs
from gpunode_lab.repo import catalog_kernel, nvidia_repo
from gpunode_lab.repo.deb import deb_bytes
from gpunode_lab.standins import (
    CONTAINERD,
    DOCKER,
    DPKG_LOCKER,
    GPU_BUSY_PY,
    GPU_BUSY_SH,
    GPU_IDLE_SH,
    SECURE_BOOT_VAR,
)


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
    "mok-key": "the DKMS signing key /var/lib/shim-signed/mok/MOK.der exists (VALUE present)"
    " and shim has it enrolled (VALUE enrolled, the default), as after the MOK manager",
    "nouveau": "the nouveau kernel module is loaded (at boot too, and then nvidia is not,"
    " unless update-initramfs wrote an initramfs that blacklists it)",
    "hold": "apt-mark hold VALUE in the host",
    "bg-upgrade": "an unattended upgrade moves the driver's packages that are not held to the"
    " newest of their branch, under the loaded module (one-shot)",
    "load": "GPU load pattern VALUE: idle, busy or wave",
    "gpu-busy": "a GPU job holds /dev/nvidia0, using VALUE MiB (default 40960)",
    "newer-kernel": "a newer kernel is installed without its headers and boots next (one-shot)",
    "no-headers": "apt offers no linux-headers-VALUE (default: the newer kernel's)",
    "container-runtime": "a container engine is installed: docker (docker:IMAGE also has"
    " IMAGE) or containerd; systemctl counts its restarts in /var/lib/gpunode-lab/restarts",
    "xid": "the kernel log (/var/log/kern.log) gets an NVRM Xid VALUE line for GPU 0"
    " (default 79, fallen off the bus); --off removes the lab's Xid lines",
    "gpu-lost": "nvidia-smi stops listing the last GPU, as when it falls off the bus",
    "block": "the command VALUE (ldconfig, update-initramfs; 'apt-mark hold': only with that"
    " first argument) waits once started (after:VALUE: once it has run), its pid in"
    " /var/tmp/gpunode-lab-blocked-COMMAND; --off kills the waiting ones, as a cut session"
    " would, and the command runs normally again",
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


# As unattended-upgrades does with the driver's origin allowed: every installed driver
# package that is not held moves to the newest release of its branch; dpkg runs the DKMS
# package's postinst (the new module is built), the loaded module stays. Without the
# packages (a bare stand-in driver) the recorded release is bumped instead.
BG_UPGRADE_SH = r"""
f=/usr/share/gpunode-lab/driver-version
[ -f "$f" ] || { echo "no simulated driver is installed" >&2; exit 3; }
read -r old flavor < "$f"
list() {
    dpkg-query -W -f '${Package} ${Status}\n' 'libnvidia-compute*' 'nvidia-utils*' \
        'nvidia-compute-utils*' 'nvidia-dkms*' 'nvidia-driver*' 'nvidia-open*' 'cuda-drivers*' \
        2>/dev/null \
        | awk -v w="$1" '$NF == "installed" && ($2 == "hold") == (w == "held") {print $1}'
}
pkgs=$(list free); held=$(list held)
if [ -n "$pkgs" ]; then
    apt-get update -q >/dev/null 2>&1
    if ! out=$(apt-get install -y -q --only-upgrade $pkgs 2>&1); then
        printf '%s\n' "$out" | tail -n 3 >&2; exit 4
    fi
elif [ -n "$held" ]; then
    echo "the driver's packages are held: an unattended upgrade leaves them" >&2; exit 5
else
    last=${old##*.}
    echo "${old%.*}.$(printf '%02d' "$(expr "$last" + 1)") $flavor" > "$f"
fi
read -r new flavor2 < "$f"
[ "$new" != "$old" ] || { echo "nothing to upgrade: $old is the newest of its branch" >&2; exit 5; }
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


MOK_KEY_SH = f"""\
set -e
d={hostinit.MOK_DIR}
if [ ! -s $d/MOK.der ] || [ ! -s $d/MOK.priv ]; then
  mkdir -p $d
  (umask 077; head -c 48 /dev/urandom > $d/MOK.priv)
  {{ echo 'gpunode lab stand-in MOK certificate'; od -An -tx1 -N16 /dev/urandom; }} > $d/MOK.der
  chmod 0644 $d/MOK.der
fi
sha256sum < $d/MOK.der | cut -d' ' -f1
"""


def mok_enrolled(f: dict[str, Any]) -> list[str]:
    """The keys shim has enrolled: the host's DKMS key, once the mok-key knob enrolled it."""
    key = f.get("mok-key")
    return [str(key["sha256"])] if isinstance(key, dict) and key.get("enrolled") else []


def _mok_key(host: FaultyHost, f: dict[str, Any], knob: str, value: Any, off: bool) -> str:
    """As `update-secureboot-policy --new-key` and, with enrolled, `--enroll-key` confirmed
    at the MOK manager: off removes the key and its enrolment."""
    pid = _running(host)
    if off:
        _sh(pid, f"rm -f {hostinit.MOK_DIR}/MOK.der {hostinit.MOK_DIR}/MOK.priv")
        f.pop(knob, None)
    else:
        state = str(value or "enrolled")
        if state not in ("enrolled", "present"):
            raise KnobError("mok-key takes present or enrolled")
        out = _sh(pid, MOK_KEY_SH)
        if out.returncode != 0:
            raise KnobError(out.stderr.strip())
        f[knob] = {"sha256": out.stdout.strip(), "enrolled": state == "enrolled"}
    with open(f"/proc/{pid}/root/sys/firmware/efi/efivars/{hostinit.MOK_LIST_VAR}", "wb") as fh:
        fh.write(hostinit.mok_list_bytes(mok_enrolled(f)))
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


def _gpu_busy(host: FaultyHost, f: dict[str, Any], knob: str, value: Any, off: bool) -> str:
    pid = _running(host)
    _sh(pid, GPU_IDLE_SH)
    f.pop(knob, None)
    if off:
        return ""
    mib = str(value or 40960)
    if not mib.isdigit():
        raise KnobError("gpu-busy takes MiB: fault HOST gpu-busy 40960")
    env = f"GPU_BUSY_PY={shlex.quote(GPU_BUSY_PY)} GPU_BUSY_MIB={mib}\n"
    out = _sh(pid, env + "export GPU_BUSY_PY GPU_BUSY_MIB\n" + GPU_BUSY_SH)
    if out.returncode != 0:
        raise KnobError(out.stderr.strip())
    f[knob] = int(mib)  # a process: gone after a reboot, as a job is
    return ""


NO_HEADERS_PREF = "/etc/apt/preferences.d/gpunode-lab-no-headers"


def _newer_kernel(host: FaultyHost, f: dict[str, Any], knob: str, value: Any, off: bool) -> str:
    """dpkg -i the repository's linux-image-<newer kernel> (the same bytes it serves), which
    points /boot/vmlinuz at it, as an unattended kernel update does."""
    pid = _running(host)
    release = catalog_kernel.newer_kernel()
    pkg = catalog_kernel.image_package(release, nvidia_repo.kernels()[release])
    deb = f"/tmp/gpunode-lab-{pkg.filename}"
    with open(f"/proc/{pid}/root{deb}", "wb") as fh:
        fh.write(deb_bytes(pkg))
    out = host_exec(pid, ["/bin/sh", "-c", 'dpkg -i "$1"; rc=$?; rm -f "$1"; exit $rc', "-", deb])
    if out.returncode != 0:
        raise KnobError((out.stderr or out.stdout).strip())
    return f"installed linux-image-{release}; /boot/vmlinuz -> vmlinuz-{release}"


def _no_headers(host: FaultyHost, f: dict[str, Any], knob: str, value: Any, off: bool) -> str:
    """An apt preference that no version of the headers may be installed: apt sees no
    installation candidate, as for headers its archive does not carry."""
    pid = _running(host)
    path = f"/proc/{pid}/root{NO_HEADERS_PREF}"
    if off:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
        f.pop(knob, None)
        return ""
    release = str(value or catalog_kernel.newer_kernel())
    if not re.fullmatch(r"[0-9][A-Za-z0-9.+_~-]*", release):
        raise KnobError(f"{release!r} is not a kernel release")
    with open(path, "w") as fh:
        fh.write(
            f"# gpunode lab: the repository offers no headers for {release}\n"
            f"Package: linux-headers-{release}\nPin: version *\nPin-Priority: -1\n"
        )
    f[knob] = release
    return f"apt offers no linux-headers-{release}"


def _container_runtime(
    host: FaultyHost, f: dict[str, Any], knob: str, value: Any, off: bool
) -> str:
    """Writes the engine's stand-in (and the images it has) into the host's disk; it stays
    installed after a reboot, as a package would."""
    root = f"/proc/{_running(host)}/root"
    engine, _, image = str(value or "docker").partition(":")
    if engine not in ("docker", "containerd") or off:
        raise KnobError("container-runtime takes docker, docker:IMAGE or containerd (no --off)")
    if image and not re.fullmatch(r"[a-z0-9][a-z0-9._/:@-]*", image):
        raise KnobError(f"{image!r} is not an image name")
    os.makedirs(f"{root}/etc/{engine}", exist_ok=True)
    path = f"{root}/usr/bin/{engine}"
    with open(path, "w") as fh:
        fh.write(DOCKER if engine == "docker" else CONTAINERD)
    os.chmod(path, 0o755)
    if image:
        os.makedirs(f"{root}/var/lib/docker", exist_ok=True)
        with open(f"{root}/var/lib/docker/gpunode-lab-images", "a") as fh:
            fh.write(image + "\n")
    f[knob] = sorted({*f.get(knob, []), str(value or "docker")})
    return f"{engine} installed" + (f" with {image}" if image else "")


KERN_LOG = "/var/log/kern.log"
# What the driver logs for these codes, in the format of real kernel lines (NVIDIA's Xid
# catalog; open-gpu-kernel-modules issue 1151 for 79, NVIDIA's page retirement page for 63).
XID_TEXT = {
    79: "GPU has fallen off the bus.",
    48: "An uncorrectable double bit error (DBE) has been detected on GPU (0).",
    63: "Row Remapper: New row marked for remapping, reset gpu to activate.",
}
WRITTEN = ".gpunode-lab-xid"
"""Beside kern.log: the lines the knob wrote, so that --off removes those alone."""


def _xid(host: FaultyHost, f: dict[str, Any], knob: str, value: Any, off: bool) -> str:
    """Append a kernel line as rsyslog writes it to kern.log (the lab's kernel log)."""
    pid = _running(host)
    path = f"/proc/{pid}/root{KERN_LOG}"
    if off:
        with contextlib.suppress(FileNotFoundError):
            with open(path + WRITTEN) as fh:
                ours = set(fh)
            with open(path) as fh:
                kept = [line for line in fh if line not in ours]
            with open(path, "w") as fh:
                fh.writelines(kept)
            os.unlink(path + WRITTEN)
        f.pop(knob, None)
        return ""
    code = int(value) if str(value or "79").isdigit() else -1
    if code not in XID_TEXT:
        raise KnobError(f"xid takes one of {', '.join(map(str, XID_TEXT))}")
    with open(f"/proc/{pid}/root/etc/gpunode-lab/gpus.json") as fh:
        bus = json.load(fh)["bus_ids"][0]  # 00000000:00:06.0 -> PCI:0000:00:06
    pci = "PCI:" + bus[4:].rsplit(".", 1)[0].lower()
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S.000000+00:00", time.gmtime())
    pid_part = "" if code == 79 else "pid=4242, name=python3, "
    line = f"{stamp} {host.name} kernel: NVRM: Xid ({pci}): {code}, {pid_part}{XID_TEXT[code]}"
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "a") as fh:
        fh.write(f"{line}\n")
    with open(path + WRITTEN, "a") as fh:
        fh.write(f"{line}\n")
    f[knob] = code
    return line


def _gpu_lost(host: FaultyHost, f: dict[str, Any], knob: str, value: Any, off: bool) -> str:
    path = f"/proc/{_running(host)}/root/etc/gpunode-lab/gpus.json"
    with open(path) as fh:
        doc = json.load(fh)
    if off and knob in f:
        doc["count"] = int(f.pop(knob))
    elif not off and knob not in f:
        f[knob] = int(doc["count"])
        doc["count"] = max(0, int(doc["count"]) - 1)
    with open(path, "w") as fh:
        fh.write(json.dumps(doc, indent=2) + "\n")
    return f"nvidia-smi lists {doc['count']} GPU(s)"


# knob -> what sets it: changes the faults `f` in place, acts on the host, returns a note.
BLOCKED = "/var/tmp/gpunode-lab-blocked-"
BLOCKABLE = re.compile(r"(after:)?([a-z][a-z0-9.-]*)(?: ([a-z][a-z-]*))?")
# In /usr/local/sbin, first on sudo's secure_path: a step's command finds it first.
BLOCK_SH = """#!/bin/sh
# gpunode lab: the `block` knob. {real} {arg} waits ({when} running) until it is killed.
if [ -z "{arg}" ] || [ "$1" = "{arg}" ]; then
    {after}printf '%s\\n' $$ >> {marker}
    while :; do sleep 1; done
fi
exec "{real}" "$@"
"""


def _block(host: FaultyHost, f: dict[str, Any], knob: str, value: Any, off: bool) -> str:
    """`block [after:]COMMAND [ARG]`: a wrapper in the host's /usr/local/sbin that waits
    (only when its first argument is ARG, if given); --off removes every wrapper and kills
    the commands waiting in them (the marker has their pids)."""
    pid = _running(host)
    if off:
        for name in f.pop(knob, []):
            _sh(pid, f"kill -KILL $(cat {BLOCKED}{name} 2>/dev/null) 2>/dev/null;"
                     f" rm -f /usr/local/sbin/{name} {BLOCKED}{name}")  # fmt: skip
        return ""
    m = BLOCKABLE.fullmatch(str(value or ""))
    if m is None:
        raise KnobError(
            "block needs a command: fault HOST block ldconfig (or 'after:apt-mark hold')"
        )
    after, name, arg = m.group(1), m.group(2), m.group(3) or ""
    found = _sh(pid, f"PATH=/usr/sbin:/usr/bin:/sbin:/bin command -v {name}")
    real = found.stdout.strip()
    if found.returncode != 0 or not real.startswith("/"):
        raise KnobError(f"{name}: no such command on {host.name}")
    script = BLOCK_SH.format(
        real=real,
        arg=arg,
        when="after" if after else "before",
        after=f'"{real}" "$@"\n    ' if after else "",
        marker=BLOCKED + name,
    )
    path = f"/proc/{pid}/root/usr/local/sbin/{name}"
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as fh:
        fh.write(script)
    os.chmod(path, 0o755)
    with contextlib.suppress(FileNotFoundError):
        os.unlink(f"/proc/{pid}/root{BLOCKED}{name}")
    f[knob] = sorted({*f.get(knob, []), name})
    return ""


_SETTERS: dict[str, Callable[[FaultyHost, dict[str, Any], str, Any, bool], str]] = {
    "refuse": _listener,
    "stall": _listener,
    "latency": _listener,
    "drop": _drop,
    "dpkg-lock": _dpkg_lock,
    "disk-full": _disk_full,
    "secure-boot": _secure_boot,
    "mok-key": _mok_key,
    "nouveau": _nouveau,
    "hold": _hold,
    "bg-upgrade": _bg_upgrade,
    "load": _load,
    "gpu-busy": _gpu_busy,
    "newer-kernel": _newer_kernel,
    "no-headers": _no_headers,
    "container-runtime": _container_runtime,
    "xid": _xid,
    "gpu-lost": _gpu_lost,
    "block": _block,
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
    if knob == "newer-kernel" and off:
        return {"ok": True, "note": "newer-kernel is one-shot: the kernel stays installed"}
    f = dict(host.faults)
    try:
        note = _SETTERS[knob](host, f, knob, value, off)
    except KnobError as exc:
        return {"ok": False, "error": str(exc)}
    host.set_faults(f)
    if knob in _LISTENER_KNOBS:
        sync_listeners()
    return {"ok": True, "faults": f, "note": note}
