"""Catch a moment inside a lab host: a watcher (started detached, outside any SSH
session) polls /proc for the processes of that moment, stops them with SIGSTOP so the
moment holds, and writes a marker the test polls for from outside (the host's overlay
upper directory). The fault then lands on stopped processes."""

from __future__ import annotations

import base64
import shlex
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.apply.labhelpers import Lab, on_host

MARKER = "var/tmp/gpunode-fault-moment"
WATCHER = r"""
import glob, os, signal, sys, time
mode, marker = sys.argv[1], sys.argv[2]

def procs():
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/cmdline", "rb") as fh:
                    raw = fh.read()
            except OSError:
                continue
            argv = [a.decode(errors="replace") for a in raw.split(b"\0") if a]
            if argv:
                yield int(d), argv

def is_dpkg(argv):
    return os.path.basename(argv[0]) == "dpkg"

seen_unpack = False
deadline = time.time() + 180
while time.time() < deadline:
    ps = list(procs())
    apt = [p for p, a in ps if os.path.basename(a[0]) == "apt-get" and "install" in a]
    dpkg = [(p, a) for p, a in ps if is_dpkg(a)]
    hit = None
    if mode == "argv":
        hit = [p for p, a in ps if sys.argv[3] in " ".join(a) and "watch.py" not in " ".join(a)]
        if len(sys.argv) > 4 and sys.argv[4] and not glob.glob(sys.argv[4]):
            hit = None  # not yet: the process has still to make this path (a glob)
    elif mode == "download":
        methods = [p for p, a in ps if a[0].startswith("/usr/lib/apt/methods/")]
        if apt and methods and not dpkg:
            hit = apt + methods
    else:
        for p, a in dpkg:
            debs = [x for x in a if x.endswith(".deb") and "cuda-keyring" not in x]
            if "--unpack" in a and debs:
                seen_unpack = True
                if mode == "unpack" and any(
                    n.isdigit() for n in os.listdir("/var/lib/dpkg/updates")
                ):
                    hit = [p for p, _ in dpkg] + apt
            if mode == "configure" and seen_unpack and (
                "--configure" in a or "--triggers-only" in a
            ):
                hit = [p for p, _ in dpkg] + apt
    if hit:
        for p in hit:
            try:
                os.kill(p, signal.SIGSTOP)
            except ProcessLookupError:
                pass
        with open(marker + ".tmp", "w") as fh:
            fh.write(mode + "\n" + "\n".join(" ".join(a) for _, a in dpkg) + "\n")
            fh.write("stopped: " + " ".join(str(p) for p in hit) + "\n")
        os.rename(marker + ".tmp", marker)
        sys.exit(0)
    time.sleep(0.005)
"""


def start_watcher(inv: Path, host: str, mode: str, pattern: str = "", made: str = "") -> None:
    """Start the watcher detached from the SSH session (a fault on sessions spares it).
    Modes: download, unpack, configure (apt and dpkg), argv (any process whose command
    line holds `pattern`, once a path matching the glob `made` exists)."""
    code = base64.b64encode(WATCHER.encode()).decode()
    args = " ".join(shlex.quote(a) for a in (mode, f"/{MARKER}", pattern, made))
    start = f"setsid /usr/bin/python3 /var/tmp/watch.py {args} </dev/null >/dev/null 2>&1 &"
    on_host(
        inv,
        host,
        f"sudo rm -f /{MARKER} && echo {code} | base64 -d | sudo tee /var/tmp/watch.py "
        f">/dev/null && sudo sh -c {shlex.quote(start)}",
    )


def popen_apply(lab: Lab, inv: Path, host: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "gpunode", "apply", str(inv), "--yes", "--json", "-l", host],
        env=lab.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def wait_for_moment(lab: Lab, host: str, proc: subprocess.Popen[str], timeout: float = 60) -> str:
    marker = lab.upper(host) / MARKER
    deadline = time.monotonic() + timeout
    while not marker.exists():
        if proc.poll() is not None:
            out, err = proc.communicate()
            pytest.fail(f"apply ended before the moment: {out[-2000:]} {err[-2000:]}")
        assert time.monotonic() < deadline, "the moment never came"
        time.sleep(0.02)
    return marker.read_text()


def stopped(seen: str) -> list[int]:
    """The pids the watcher stopped, from its marker's text."""
    line = next(ln for ln in seen.splitlines() if ln.startswith("stopped: "))
    return [int(p) for p in line.split()[1:]]
