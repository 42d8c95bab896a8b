"""How many network round trips gpunode pays per host: each phase timed with and without
added latency.

    python bench/latency.py [--runs 7] [--ms 50]

A one-host lab of its own (state in a temporary folder, addresses 127.0.65.X), converged
once by `gpunode apply`. Then, alternating between no added latency and MS more per round
trip (`gpunode lab fault lab-01 latency MS`, a delaying relay in front of the host's sshd),
each phase is timed RUNS times:

- connect: TCP, SSH handshake and public-key authentication;
- command: one `true` on the open connection (channel open, exec, exit status);
- facts: the facts round trip (channel open, exec, the script on stdin, its output);
- apply: a whole converged `gpunode apply` from the shell, Python start-up included.

(median at MS - median at 0) / MS is what the phase costs in round trips. Needs root.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from gpunode.facts.gather import gather
from gpunode.inventory import load
from gpunode.inventory.model import Host
from gpunode.transport.connect import open_transport

NET = "65"
HOST = "lab-01"


def gpunode(env: dict[str, str], *args: str) -> str:
    proc = subprocess.run(
        [sys.executable, "-m", "gpunode", *args], env=env, capture_output=True, text=True
    )
    if proc.returncode != 0:
        raise SystemExit(f"gpunode {' '.join(args)} failed:\n{proc.stdout}{proc.stderr}")
    return proc.stdout


def timed(fn: Callable[[], object]) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def wait_for_banner(host: Host) -> None:
    """The latency knob moves sshd behind a relay: wait until the host speaks SSH again."""
    assert host.address is not None
    deadline = time.monotonic() + 30
    while True:
        try:
            with socket.create_connection((host.address, host.ssh.port), timeout=2) as s:
                if s.recv(4).startswith(b"SSH-"):
                    return
        except OSError:
            pass
        if time.monotonic() > deadline:
            raise SystemExit(f"{host.name} does not answer on port {host.ssh.port}")
        time.sleep(0.1)


def phases(host: Host, env: dict[str, str], inventory: Path) -> dict[str, float]:
    out: dict[str, float] = {}
    t = open_transport(host)
    out["connect"] = timed(t.connect)
    try:
        out["command"] = timed(lambda: t.run("true"))
        out["facts"] = timed(lambda: gather(t, host))
    finally:
        t.close()
    apply = [sys.executable, "-m", "gpunode", "apply", str(inventory), "--yes", "--json"]
    apply.append("--no-smoke")
    t0 = time.perf_counter()
    proc = subprocess.run(apply, env=env, capture_output=True, text=True, check=False)
    out["apply"] = time.perf_counter() - t0
    recap = json.loads(proc.stdout.splitlines()[-1])  # the last apply-event: the recap
    if proc.returncode != 0 or recap["event"] != "recap" or recap["hosts"][0]["changed"]:
        raise SystemExit(f"the converged apply changed something or failed:\n{proc.stdout}")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--ms", type=int, default=50)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="gpunode-latency-") as tmp:
        env = {**os.environ, "GPUNODE_LAB_DIR": str(Path(tmp) / "lab")}
        gpunode(env, "lab", "up", "--hosts", "1", "--net", NET)
        try:
            inventory = Path(tmp) / "lab.yaml"
            inventory.write_text(gpunode(env, "lab", "inventory"))
            gpunode(env, "apply", str(inventory), "--yes", "--no-tui", "--no-smoke")
            host = load(inventory).hosts[HOST]
            samples: dict[int, list[dict[str, float]]] = {0: [], args.ms: []}
            for _ in range(args.runs):
                for ms in samples:
                    if ms:
                        gpunode(env, "lab", "fault", HOST, "latency", str(ms))
                    else:
                        gpunode(env, "lab", "fault", HOST, "latency", "--off")
                    wait_for_banner(host)
                    samples[ms].append(phases(host, env, inventory))
        finally:
            gpunode(env, "lab", "down")
    report(samples, args.ms, args.runs)


def report(samples: dict[int, list[dict[str, float]]], ms: int, runs: int) -> None:
    print(f"median of {runs} runs each; round trips = (t at {ms} ms - t at 0 ms) / {ms} ms\n")
    print(f"| phase | 0 ms | {ms} ms | difference | round trips |")
    print("|---|---|---|---|---|")
    for phase in samples[0][0]:
        a = statistics.median(s[phase] for s in samples[0])
        b = statistics.median(s[phase] for s in samples[ms])
        d = b - a
        print(f"| {phase} | {a * 1000:.0f} ms | {b * 1000:.0f} ms | {d * 1000:.0f} ms |"
              f" {d * 1000 / ms:.1f} |")  # fmt: skip


if __name__ == "__main__":
    main()
