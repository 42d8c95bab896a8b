"""The benchmark's own `gpunode lab`: its state dir and addresses, resets, latency, counts.

SSH round trips are counted on the hosts, the same way for every tool: the lab's sshd
logs to /var/log/sshd.log in each host, and with LogLevel VERBOSE it writes one
"Accepted publickey" line per connection and one "Starting session:" line per session
channel (every exec, shell or subsystem request: one command's round trip). The
benchmark adds that LogLevel through a drop-in in the lab's shared base layer, which
every host picks up at its next boot (each cold run starts from a reset host).
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import time
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

VERBOSE_DROPIN = "etc/ssh/sshd_config.d/90-bench-sessions.conf"
SYS_PATH = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
NSENTER = ["nsenter", "-m", "-u", "-i", "-p", "-r", "-w"]
ENV = ["/usr/bin/env", "-i", SYS_PATH]


def hide_machine_cuda(base: Path, machine_root: Path = Path("/")) -> list[str]:
    """Whiteouts in the lab's base layer for CUDA toolkits of the machine itself.

    Hosts are overlays of the machine's root, so a toolkit in the machine's /usr/local
    (this project's CI image has one) would be in every "fresh" host, and gpunode rightly
    takes a present toolkit as it is: the hosts would not start from the same nothing
    for every tool. An overlay whiteout (a 0/0 character device) hides it from the hosts.
    """
    hidden = []
    local = machine_root / "usr" / "local"
    for entry in sorted(local.glob("cuda*")) if local.is_dir() else []:
        target = base / "usr" / "local" / entry.name
        if target.exists() or target.is_symlink():
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        os.mknod(target, 0o600 | stat.S_IFCHR, os.makedev(0, 0))
        hidden.append(str(entry))
    return hidden


@dataclass
class Counts:
    connections: int
    sessions: int


class Lab:
    def __init__(self, state_dir: Path, net: int) -> None:
        self.dir = state_dir
        self.net = net
        self.env = {**os.environ, "GPUNODE_LAB_DIR": str(state_dir)}
        self.offsets: dict[str, int] = {}

    def gpunode(self, *args: str, check: bool = True) -> str:
        proc = subprocess.run(
            [sys.executable, "-m", "gpunode", *args],
            env=self.env,
            capture_output=True,
            text=True,
            check=False,
        )
        if check and proc.returncode != 0:
            raise RuntimeError(f"gpunode {' '.join(args)} failed: {proc.stderr.strip()}")
        return proc.stdout

    # -- lifecycle --

    def up(self, hosts: int) -> None:
        self.gpunode("lab", "up", "--hosts", str(hosts), "--net", str(self.net))
        base = self.dir / "disk" / "base"
        dropin = base / VERBOSE_DROPIN
        dropin.write_text("# gpunode bench: a log line per SSH session channel\nLogLevel VERBOSE\n")
        hide_machine_cuda(base)
        self.reset(self.names())  # boot again with both

    def down(self) -> None:
        if (self.dir / "lab.json").exists():
            self.gpunode("lab", "down", check=False)

    def status(self) -> dict[str, Any]:
        doc: dict[str, Any] = json.loads(self.gpunode("lab", "status", "--json"))
        return doc

    def names(self) -> list[str]:
        return [h["name"] for h in self.status()["hosts"]]

    def inventory(self, path: Path) -> Path:
        path.write_text(self.gpunode("lab", "inventory"))
        return path

    def config(self) -> dict[str, Any]:
        doc: dict[str, Any] = json.loads((self.dir / "lab.json").read_text())
        return doc

    def _each(self, names: Iterable[str], fn: Any) -> list[Any]:
        with ThreadPoolExecutor(max_workers=8) as pool:
            return list(pool.map(fn, names))

    def reset(self, names: list[str]) -> None:
        """Fresh disks for the hosts (faults cleared), then wait until each answers."""
        self._each(names, lambda n: self.gpunode("lab", "reset", n))
        self.wait_up(names)

    def wait_up(self, names: list[str], timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while True:
            hosts = {h["name"]: h for h in self.status()["hosts"]}
            if all(hosts[n]["state"] == "up" for n in names):
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"lab hosts not up after {timeout}s: {hosts}")
            time.sleep(0.3)

    def latency(self, names: list[str], ms: int) -> None:
        if ms:
            self._each(names, lambda n: self.gpunode("lab", "fault", n, "latency", str(ms)))
        else:
            self._each(names, lambda n: self.gpunode("lab", "fault", n, "latency", "--off"))

    # -- inside the hosts, as root, without SSH (so nothing here is counted) --

    def pids(self) -> dict[str, int]:
        return {h["name"]: h["init_pid"] for h in self.status()["hosts"]}

    def host_exec(self, name: str, script: str, pid: int | None = None) -> str:
        pid = pid or self.pids()[name]
        proc = subprocess.run(
            [*NSENTER, "-t", str(pid), "--", *ENV, "/bin/sh", "-c", script],
            capture_output=True,
            text=True,
            check=False,
            timeout=120,
        )
        if proc.returncode != 0:
            raise RuntimeError(f"{name}: {script!r} failed: {proc.stderr.strip()}")
        return proc.stdout

    def drift(self, names: list[str], path: str) -> None:
        """The one change of a one-change run: a managed file removed from every host."""
        pids = self.pids()
        self._each(names, lambda n: self.host_exec(n, f"rm -f '{path}'", pids[n]))

    # -- round trips --

    def _log(self, name: str) -> Path:
        return self.dir / "disk" / "hosts" / name / "upper" / "var" / "log" / "sshd.log"

    def mark(self, names: list[str]) -> None:
        for n in names:
            try:
                self.offsets[n] = self._log(n).stat().st_size
            except OSError:
                self.offsets[n] = 0

    def counts(self, names: list[str]) -> dict[str, Counts]:
        """Connections and session channels per host since mark() (reboots included)."""
        out = {}
        for n in names:
            try:
                with self._log(n).open("rb") as f:
                    f.seek(self.offsets.get(n, 0))
                    text = f.read().decode(errors="replace")
            except OSError:
                text = ""
            out[n] = Counts(
                connections=text.count("Accepted publickey for "),
                sessions=text.count("Starting session: "),
            )
        return out

    # -- end state --

    def snapshots(self, names: list[str], files: Iterable[str]) -> dict[str, dict[str, Any]]:
        pids, paths = self.pids(), list(files)
        found = self._each(names, lambda n: self.snapshot(n, paths, pids[n]))
        return dict(zip(names, found, strict=True))

    def snapshot(self, name: str, files: Iterable[str], pid: int | None = None) -> dict[str, Any]:
        """What is really on the host: dpkg's database, holds, file hashes, /usr/local/cuda."""
        quoted = " ".join(f"'{p}'" for p in files)
        out = self.host_exec(
            name,
            "dpkg-query -W -f '${db:Status-Abbrev} ${Package} ${Version}\\n'; echo '--';"
            " apt-mark showhold; echo '--';"
            f' for f in {quoted}; do [ -e "$f" ] && sha256sum "$f"; done; echo \'--\';'
            " readlink /etc/alternatives/cuda || true",
            pid,
        )
        pkgs_text, held_text, sums_text, alt_text = out.split("--\n")
        packages = {}
        for line in pkgs_text.splitlines():
            parts = line.split()
            if len(parts) == 3 and parts[0][1:2] == "i":  # ii, or hi when held
                packages[parts[1]] = parts[2]
        sums = {}
        for line in sums_text.splitlines():
            digest, path = line.split(None, 1)
            sums[path] = digest
        return {
            "packages": packages,
            "held": sorted(held_text.split()),
            "files": sums,
            "cuda_alternative": alt_text.strip(),
        }


def problems(snap: dict[str, Any], expect: dict[str, Any]) -> list[str]:
    """How a host's real state differs from the declared stack (empty: converged)."""
    out = []
    for name, version in expect["packages"].items():
        have = snap["packages"].get(name)
        if have is None:
            out.append(f"{name} not installed")
        elif version and have != version:
            out.append(f"{name} {have} installed, {version} wanted")
    missing = sorted(set(expect["held"]) - set(snap["held"]))
    if missing:
        out.append(f"not held: {', '.join(missing)}")
    for path, digest in expect["files"].items():
        have = snap["files"].get(path)
        if have != digest:
            out.append(f"{path} {'missing' if have is None else 'differs'}")
    if snap["cuda_alternative"] != expect["cuda_alternative"]:
        out.append(f"/etc/alternatives/cuda -> {snap['cuda_alternative'] or 'nothing'}")
    return out
