#!/usr/bin/python3
"""Simulated `dcgmi` of DCGM 4 for gpunode lab hosts (a stand-in: no DCGM inside).

Installed as /usr/bin/dcgmi by the lab repository's datacenter-gpu-manager-4-core. Like the
real client it talks to the host engine: while nv-hostengine (the nvidia-dcgm service) is
not running it says it cannot connect. `discovery -l` lists the GPUs the lab's nvidia-smi
lists, and `diag -r 1` runs the software deployment test (the driver's module loaded and
answering), in the table shapes of dcgmi/Query.cpp and dcgmi/Diag.cpp
(github.com/NVIDIA/DCGM). Standard library only: it runs on the host's own python3.
"""

from __future__ import annotations

import os
import subprocess
import sys

# Replaced by the package build with the package's own release.
DCGM_VERSION = "4.5.2"
PIDFILE = "/run/nv-hostengine.pid"
NO_ENGINE = (
    "Error: unable to establish a connection to the specified host: localhost\n"
    "Error: Unable to connect to host engine. Host engine connection invalid/disconnected.\n"
)
RULE = "+--------+----------------------------------------------------------------------+"
DIAG_RULE = "+---------------------------+------------------------------------------------+"


def engine_running() -> bool:
    try:
        with open(PIDFILE) as f:
            return os.path.isdir(f"/proc/{f.read().strip()}")
    except OSError:
        return False


def gpus() -> tuple[list[list[str]], str]:
    """index, name, bus id, uuid, device id per GPU, as the driver (NVML) reports them."""
    fields = "index,name,pci.bus_id,uuid,pci.device_id,driver_version"
    try:
        p = subprocess.run(
            ["nvidia-smi", f"--query-gpu={fields}", "--format=csv,noheader"],
            capture_output=True, text=True, timeout=30,
        )  # fmt: skip
    except (OSError, subprocess.TimeoutExpired) as exc:
        return [], str(exc)
    if p.returncode != 0:
        said = (p.stdout + p.stderr).strip().splitlines()
        return [], said[-1] if said else "nvidia-smi failed"
    return [[c.strip() for c in line.split(",")] for line in p.stdout.splitlines() if line], ""


def discovery() -> int:
    found, _ = gpus()
    print(f"{len(found)} GPU{'' if len(found) == 1 else 's'} found (Active).")
    print(RULE)
    print(f"| {'GPU ID':<6} | {'Device Information':<68} |")
    print(RULE)
    for index, name, bus, uuid, *_ in found:
        for i, info in enumerate((f"Name: {name}", f"PCI Bus ID: {bus}", f"Device UUID: {uuid}")):
            print(f"| {index if i == 0 else '':<6} | {info:<68} |")
        print(RULE)
    for what, rule in (("NvSwitches", "+-----------+"), ("ConnectX", "+----------+"),
                       ("CPUs", "+--------+")):  # fmt: skip
        print(f"0 {what} found.")
        print(rule)
        print(rule)
    return 0


def row(name: str, info: str) -> str:
    return f"| {name:<25} | {info:<46} |"


def diag(level: str) -> int:
    if level != "1":
        print(f"Error: the gpunode lab's dcgmi runs level 1 only, not {level}", file=sys.stderr)
        return 255
    found, error = gpus()
    loaded = os.path.isdir("/sys/module/nvidia")
    print("Successfully ran diagnostic for group.")
    print(DIAG_RULE)
    print(row("Diagnostic", "Result"))
    print(DIAG_RULE.replace("-", "="))
    print("|-----  Metadata  ----------+------------------------------------------------|")
    print(row("DCGM Version", DCGM_VERSION))
    if found:
        print(row("Driver Version Detected", found[0][5]))
        ids = ", ".join(g[4][2:6].lower() for g in found)
        print(row("GPU Device IDs Detected", ids))
    print("|-----  Deployment  --------+------------------------------------------------|")
    ok = loaded and bool(found)
    print(row("software", "Pass" if ok else "Fail"))
    if not ok:
        why = error or "the nvidia kernel module is not loaded"
        for i in range(0, len(why), 46):
            print(row("Warning" if i == 0 else "", why[i : i + 46]))
    for g in found:
        print(row("", f"GPU{g[0]}: {'Pass' if ok else 'Fail'}"))
    print(DIAG_RULE)
    return 0 if ok else 1


def main(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        print("Usage: dcgmi <subsystem> (gpunode lab stand-in: discovery -l, diag -r 1)")
        return 0
    if argv[0] == "-v" or argv[0] == "--version":
        print(f"dcgmi  version: {DCGM_VERSION}")
        return 0
    if not engine_running():
        sys.stdout.write(NO_ENGINE)
        return 255
    if argv[0] == "discovery" and argv[1:2] in (["-l"], ["--list"]):
        return discovery()
    if argv[0] == "diag" and len(argv) >= 3 and argv[1] in ("-r", "--run"):
        return diag(argv[2])
    print(f"Error: the gpunode lab's dcgmi does not model: {' '.join(argv)}", file=sys.stderr)
    return 255


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
