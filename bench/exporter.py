"""`gpunode exporter` on a lab fleet: the controller's CPU at a scrape interval's pace.

One lab (its own state dir and loopback range) of N hosts x G GPUs. The lab repository's
driver goes on the first host through its own apt (DKMS builds it, a reboot loads it);
its files (nvidia-smi's stand-in, the module DKMS built, the driver's version) are then
put in the lab's shared base layer and every host is reset, so every host boots with the
driver loaded without N apt runs. The exporter then samples every host at --interval;
a scraper reads /metrics once per interval, as Prometheus would. The figure is the
exporter process's CPU seconds (user + system, from /proc, its threads included) over
--intervals intervals after every GPU has appeared, as a share of one core.

    sudo python -m bench.exporter --hosts 100 --gpus 8 --interval 15 --intervals 6
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

NSENTER = ["nsenter", "-m", "-u", "-i", "-p", "-r", "-w"]
ENV = ["/usr/bin/env", "-i", "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"]
INSTALL = (
    "set -e; export DEBIAN_FRONTEND=noninteractive;"
    ' python3 -c \'import sys, urllib.request; open(sys.argv[2], "wb").write('
    "urllib.request.urlopen(sys.argv[1], timeout=60).read())' {url} /tmp/k.deb;"
    " dpkg -i /tmp/k.deb >/dev/null; apt-get update -q >/dev/null;"
    ' apt-get install -y -q nvidia-open-580 "linux-headers-$(uname -r)" >/dev/null'
)
# What the driver's packages put on a host that nvidia-smi and the lab's boot read.
DRIVER_FILES = ("usr/bin/nvidia-smi", "usr/share/gpunode-lab", "usr/lib/modules")


class Lab:
    def __init__(self, state: Path, net: int) -> None:
        self.dir, self.net = state, net
        self.env = {**os.environ, "GPUNODE_LAB_DIR": str(state)}

    def gpunode(self, *args: str) -> str:
        out = subprocess.run([sys.executable, "-m", "gpunode", *args], env=self.env,
                             capture_output=True, text=True, check=False)  # fmt: skip
        if out.returncode != 0:
            raise RuntimeError(f"gpunode {' '.join(args)}: {out.stderr.strip()}")
        return out.stdout

    def status(self) -> dict[str, dict[str, object]]:
        doc = json.loads(self.gpunode("lab", "status", "--json"))
        return {str(h["name"]): h for h in doc["hosts"]}

    def inside(self, host: str, script: str) -> str:
        pid = str(self.status()[host]["init_pid"])
        out = subprocess.run([*NSENTER, "-t", pid, "--", *ENV, "/bin/sh", "-c", script],
                             capture_output=True, text=True, check=False, timeout=900)  # fmt: skip
        if out.returncode != 0:
            raise RuntimeError(f"{host}: {script[:60]}...: {out.stderr.strip()[-500:]}")
        return out.stdout

    def wait_up(self, names: list[str], booted_since: dict[str, object] | None = None) -> None:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            st = self.status()
            if all(st[n]["state"] == "up" and (booted_since is None
                   or st[n]["boot_id"] != booted_since[n]) for n in names):  # fmt: skip
                return
            time.sleep(0.5)
        raise RuntimeError("lab hosts not up within 300 s")


def driver_everywhere(lab: Lab, names: list[str]) -> None:
    first = names[0]
    url = json.loads((lab.dir / "lab.json").read_text())["repo_url"]
    lab.inside(first, INSTALL.format(url=f"{url}/ubuntu2404/x86_64/cuda-keyring_1.1-1_all.deb"))
    upper, base = lab.dir / "disk" / "hosts" / first / "upper", lab.dir / "disk" / "base"
    for rel in DRIVER_FILES:
        src = upper / rel
        if src.is_dir():
            shutil.copytree(src, base / rel, symlinks=True, dirs_exist_ok=True)
        elif src.exists():
            (base / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, base / rel)
    before = {n: h["boot_id"] for n, h in lab.status().items()}
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda n: lab.gpunode("lab", "reset", n), names))
    lab.wait_up(names, before)
    lab.inside(names[-1], "nvidia-smi -L >/dev/null")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30) as r:
        return str(r.read().decode())


def measure(
    lab: Lab, inventory: Path, gpus: int, interval: float, intervals: int
) -> dict[str, float]:
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "gpunode", "exporter", str(inventory), "--interval", str(interval),
         "--listen", f"127.0.0.1:{port}"],
        env={**lab.env, "GPUNODE_STATE_DIR": str(lab.dir / "gpunode-state")},
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        t0 = time.monotonic()
        while True:
            time.sleep(1)
            try:
                text = scrape(port)
            except OSError:
                continue
            if text.count("DCGM_FI_DEV_GPU_TEMP{") == gpus:
                break
            if time.monotonic() - t0 > 300:
                raise RuntimeError(f"not every GPU after 300 s: {text.count('GPU_TEMP{')}")
        ready = time.monotonic() - t0
        time.sleep(interval)  # let first connections settle
        c0, w0, load0 = cpu_seconds(proc.pid), time.monotonic(), os.getloadavg()
        for _ in range(intervals):
            time.sleep(interval)
            assert scrape(port).count("DCGM_FI_DEV_GPU_TEMP{") == gpus
        c1, w1 = cpu_seconds(proc.pid), time.monotonic()
        rss = int(Path(f"/proc/{proc.pid}/status").read_text().split("VmRSS:")[1].split()[0])
    finally:
        proc.terminate()
        proc.wait(30)
    return {
        "ready_s": round(ready, 1),
        "wall_s": round(w1 - w0, 1),
        "cpu_s": round(c1 - c0, 2),
        "core_percent": round(100 * (c1 - c0) / (w1 - w0), 2),
        "rss_mib": round(rss / 1024, 1),
        "load_before": round(load0[0], 2),
        "load_after": round(os.getloadavg()[0], 2),
    }


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--hosts", type=int, default=100)
    p.add_argument("--gpus", type=int, default=8)
    p.add_argument("--interval", type=float, default=15.0)
    p.add_argument("--intervals", type=int, default=6)
    p.add_argument("--net", type=int, default=148, help="lab addresses 127.0.NET.x")
    p.add_argument("--state", type=Path, default=Path("/var/lib/gpunode-lab-bench-exporter"))
    p.add_argument("--keep", action="store_true", help="leave the lab running")
    args = p.parse_args()
    lab = Lab(args.state, args.net)
    lab.gpunode("lab", "up", "--hosts", str(args.hosts), "--gpus", str(args.gpus),
                "--net", str(args.net))  # fmt: skip
    try:
        names = list(lab.status())
        lab.wait_up(names)
        driver_everywhere(lab, names)
        inventory = args.state / "bench-inventory.yaml"
        inventory.write_text(lab.gpunode("lab", "inventory"))
        res = measure(lab, inventory, args.hosts * args.gpus, args.interval, args.intervals)
        res.update(hosts=args.hosts, gpus=args.gpus, interval_s=args.interval)
        print(json.dumps(res))
    finally:
        if not args.keep:
            lab.gpunode("lab", "down")
    return 0


if __name__ == "__main__":
    sys.exit(main())
