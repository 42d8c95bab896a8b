"""Kill the controller at random moments of a cold apply; the next applies must converge.

    sudo python -m bench.killsoak [--kills 100] [--seed 1] [--out soak.json]

A two-host lab of its own (state in a temporary folder, addresses 127.0.69.X). lab-01 is
converged once by an apply nobody interrupts: the reference. lab-02 is timed the same way,
then, for each kill: given a fresh disk, `gpunode apply --yes --json` is started on it and
SIGKILLed after a delay drawn (seeded) between 0.1 s and that cold apply's length, so the
kills land in every phase (the repository, the driver's transaction, the nouveau blacklist
and initramfs, ld.so.conf and ldconfig, the holds, the reboot wait). The host's commands
die with their session, as they do when a controller machine goes down. Then the host is
waited for (a reboot the killed run issued completes on its own), applied twice, and:

- the first apply after the kill exits 0;
- the second starts no change;
- dpkg's database (package, version, held), `dpkg --audit`, the loaded module and every
  file the host has written (the lab's boot files and the host's identity aside) equal
  the reference's.

Prints each kill (delay, the last change begun, the outcome) and the totals, and writes
them as JSON with --out. Exits 1 when any kill did not converge. Needs root (the lab).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.latency import gpunode

NET = "69"
STACK: dict[str, Any] = {
    "driver": {"branch": "550", "flavor": "open", "hold": True},
    "cuda": {"toolkits": ["12.4"], "default": "12.4"},
    "cudnn": None,
    "nccl": None,
    "cuda_env": True,
    "smoke": [],
}
# written by the lab at each boot, by sshd and PAM at each login, and the host's identity
NOT_GPUNODE = ("etc/gpunode-lab/", "etc/hostname", "etc/hosts", "etc/machine-id",
               "etc/ssh/ssh_host_", "var/log/", "run/", "tmp/", "var/lib/sudo/",
               "var/cache/", "root/.cache/",
               # apt's lock files: made by whichever apt ran last, empty, no state
               "var/lib/apt/lists/lock", "var/lib/dpkg/lock",
               "var/cache/apt/archives/lock")  # fmt: skip


def tree(lab: Path, host: str) -> dict[str, str]:
    """sha256 (or link target) of every file the host has written, noise aside."""
    from gpunode_lab.state import LabPaths
    from gpunode_lab.written import written

    return written(LabPaths(lab).host(host).upper, NOT_GPUNODE)


def on_host(inv: Path, host: str, command: str) -> str:
    """A command's stdout on the host, over gpunode's own transport, as root."""
    from gpunode.inventory import load
    from gpunode.transport.connect import open_transport

    t = open_transport(load(inv).hosts[host])
    t.connect()
    try:
        return t.run(command, sudo=True, timeout=60).stdout
    finally:
        t.close()


def end_state(inv: Path, lab: Path, host: str) -> dict[str, Any]:
    """dpkg's database (with holds) is var/lib/dpkg/status, in the tree."""
    return {
        "audit": on_host(inv, host, "dpkg --audit; echo rc=$?"),
        "module": on_host(inv, host, "cat /sys/module/nvidia/version 2>/dev/null || true"),
        "tree": tree(lab, host),
    }


def differences(got: dict[str, Any], ref: dict[str, Any]) -> list[str]:
    out = [k for k in ("audit", "module") if got[k] != ref[k]]
    keys = set(got["tree"]) | set(ref["tree"])
    out += sorted(
        f"{k} ({got['tree'].get(k, 'absent')[:12]} vs {ref['tree'].get(k, 'absent')[:12]})"
        for k in keys
        if got["tree"].get(k) != ref["tree"].get(k)
    )
    return out


def wait_up(env: dict[str, str], host: str, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while True:
        doc = json.loads(gpunode(env, "lab", "status", "--json"))
        if {h["name"]: h for h in doc["hosts"]}[host]["state"] == "up":
            return
        if time.monotonic() > deadline:
            raise SystemExit(f"{host} did not come back within {timeout:g} s")
        time.sleep(0.3)


def apply(env: dict[str, str], inv: Path, host: str) -> tuple[int, list[dict[str, Any]]]:
    """Exit status and events, each with `at`: seconds from the start when it was read."""
    argv = [sys.executable, "-m", "gpunode", "apply", str(inv), "--yes", "--json", "-l", host]
    start = time.monotonic()
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, text=True,
                            stderr=subprocess.DEVNULL)  # fmt: skip
    assert proc.stdout is not None
    evs = []
    for line in proc.stdout:
        if line.startswith("{"):
            evs.append({**json.loads(line), "at": time.monotonic() - start})
    return proc.wait(timeout=900), evs


def fresh(env: dict[str, str], host: str) -> None:
    gpunode(env, "lab", "reset", host)
    wait_up(env, host)


def killed_apply(env: dict[str, str], inv: Path, host: str, delay: float) -> str:
    """Start an apply, SIGKILL it after `delay` s; the last change it had begun."""
    argv = [sys.executable, "-m", "gpunode", "apply", str(inv), "--yes", "--json", "-l", host]
    with tempfile.TemporaryFile("w+") as out:
        proc = subprocess.Popen(argv, env=env, stdout=out, stderr=subprocess.DEVNULL)
        try:
            proc.wait(timeout=delay)
            finished = True
        except subprocess.TimeoutExpired:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
            finished = False
        out.seek(0)
        last = "(before any change)"
        for line in out:
            if line.startswith("{"):
                e = json.loads(line)
                if e.get("event") == "change-started":
                    last = e["title"]
                elif e.get("event") == "reboot-started":
                    last = "reboot"
    return f"{last}{' (it had finished)' if finished else ''}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kills", type=int, default=100)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", type=Path)
    ap.add_argument(
        "--before-reboot",
        action="store_true",
        help="Draw the delays before the cold apply's reboot only (its changes, not the wait).",
    )
    args = ap.parse_args()
    rng = random.Random(args.seed)
    results: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="gpunode-killsoak-") as tmp:
        lab = Path(tmp) / "lab"
        env = {**os.environ, "GPUNODE_LAB_DIR": str(lab), "PYTHONUNBUFFERED": "1",
               "GPUNODE_STATE_DIR": str(Path(tmp) / "state"),
               "GPUNODE_CACHE_DIR": str(Path(tmp) / "cache")}  # fmt: skip
        gpunode(env, "lab", "up", "--hosts", "2", "--ubuntu", "22.04", "--net", NET)
        try:
            inv = inventory(Path(tmp), gpunode(env, "lab", "inventory"))
            code, _ = apply(env, inv, "lab-01")
            assert code == 0, "the reference apply failed"
            ref = end_state(inv, lab, "lab-01")
            start = time.monotonic()
            code, evs = apply(env, inv, "lab-02")
            cold = time.monotonic() - start
            if args.before_reboot:  # the moment the reboot was asked for, from the start
                cold = next(e["at"] for e in evs if e.get("event") == "reboot-started")
            assert code == 0 and not differences(end_state(inv, lab, "lab-02"), ref), (
                "an uninterrupted lab-02 differs from lab-01"
            )
            until = "its reboot" if args.before_reboot else "its end"
            print(f"cold apply: {cold:.1f} s to {until}; {args.kills} kills, seed {args.seed}",
                  flush=True)  # fmt: skip
            for i in range(args.kills):
                delay = round(rng.uniform(0.1, cold), 2)
                fresh(env, "lab-02")
                at = killed_apply(env, inv, "lab-02", delay)
                time.sleep(1.0)  # a reboot the killed run issued starts within a second
                wait_up(env, "lab-02")
                first, _ = apply(env, inv, "lab-02")
                second, evs = apply(env, inv, "lab-02")
                again = [e["title"] for e in evs if e.get("event") == "change-started"]
                diff = differences(end_state(inv, lab, "lab-02"), ref)
                ok = first == 0 and second == 0 and not again and not diff
                results.append({"kill": i, "delay": delay, "at": at, "first": first,
                                "second": second, "again": again, "diff": diff[:10],
                                "ok": ok})  # fmt: skip
                print(f"{i:3d} {delay:6.2f}s {'ok ' if ok else 'BAD'} {at}"
                      + ("" if ok else f": first={first} again={again} diff={diff[:5]}"),
                      flush=True)  # fmt: skip
        finally:
            gpunode(env, "lab", "down")
    bad = [r for r in results if not r["ok"]]
    print(f"\n{len(results) - len(bad)} of {len(results)} kills converged to the reference")
    if args.out:
        args.out.write_text(json.dumps({"seed": args.seed, "results": results}, indent=1))
    sys.exit(1 if bad else 0)


def inventory(tmp: Path, text: str) -> Path:
    """The lab's inventory with STACK as its default stack."""
    from ruamel.yaml import YAML

    yaml = YAML()
    doc = yaml.load(text)
    doc["defaults"]["stack"].update(STACK)
    path = tmp / "lab.yaml"
    with path.open("w") as fh:
        yaml.dump(doc, fh)
    return path


if __name__ == "__main__":
    main()
