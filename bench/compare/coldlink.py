"""Cold applies over a limited upstream link: gpunode with a mirror, gpunode without, pyinfra
and ansible-core, side by side in one run (docs/benchmarks.md, "Cold apply over a 100
Mbit/s upstream").

    sudo python -m bench.compare.coldlink --hosts 10 --scale 10 --mbit 100 --runs 3 \
        --tools gpunode-mirror,pyinfra --once gpunode,ansible --doc docs/benchmarks.md

The lab's repository is the upstream. Its packages of the stack weigh their real size / S
(GPUNODE_LAB_PAD_SCALE, gpunode_lab/repo/padding.py), and traffic to and from its address
and port on lo is limited to --mbit (bench/compare/shaping.py). Each run starts from reset
hosts; bytes taken from upstream are summed from the repository's access log
(bench/compare/upstream.py); every host's dpkg database, holds and files are checked
against the stack after each run. "gpunode + mirror" is `gpunode mirror build` (through
the limited link, once) then `gpunode apply` with repos.nvidia at `gpunode mirror serve`
on another loopback address, which the limit does not touch (the site's LAN). The machine's
1-minute load average is sampled during each run: other work may share the machine.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bench.compare import report, shaping, upstream
from bench.compare.lab import problems
from bench.compare.run import Bench
from bench.compare.tools import Target, Tool, ensure_venv
from gpunode_lab.state import net_address

REPO = Path(__file__).resolve().parents[2]
TOOLS = ("gpunode-mirror", "gpunode", "pyinfra", "ansible")
MIRROR_PORT = 8470


def _slot() -> int:
    return int(os.environ.get("GPUNODE_TEST_SLOT") or 0)


def parse(argv: list[str] | None) -> argparse.Namespace:
    slot = _slot()
    p = argparse.ArgumentParser(prog="python -m bench.compare.coldlink", description=__doc__)
    p.add_argument("--hosts", type=int, default=10)
    p.add_argument("--scale", type=int, default=50, help="packages weigh real size / SCALE")
    p.add_argument("--mbit", type=float, default=100.0, help="the upstream link, Mbit/s")
    p.add_argument("--runs", type=int, default=1, help="rounds of every tool")
    p.add_argument("--tools", default=",".join(TOOLS), help="tools run in every round")
    p.add_argument("--once", default="", help="tools run in the last round only")
    suffix = f"-slot{slot}" if slot else ""
    p.add_argument("--state", type=Path, default=Path(f"/var/tmp/gpunode-coldlink{suffix}"))
    p.add_argument("--venv", type=Path, default=None, help="a venv with ansible-core, pyinfra")
    p.add_argument("--net", type=int, default=79 + 256 * slot, help="127.(NET/256).(NET%%256).x")
    p.add_argument("--out", type=Path, default=None, help="results (default STATE/coldlink.json)")
    p.add_argument("--doc", type=Path, default=None, help="write the table into this doc")
    p.add_argument("--mark", default="coldlink", help="the doc's block: <!-- bench:MARK:... -->")
    p.add_argument("--report-only", action="store_true", help="the doc from --out; no runs")
    p.add_argument("--keep-lab", action="store_true")
    return p.parse_args(argv)


def link_check(url: str) -> tuple[int, float]:
    """Download `url` once: (bytes, seconds)."""
    start = time.monotonic()
    with urllib.request.urlopen(url, timeout=600) as resp:
        n = 0
        while chunk := resp.read(1 << 20):
            n += len(chunk)
    return n, time.monotonic() - start


@contextlib.contextmanager
def load_sampled(into: dict[str, Any], every: float = 5.0) -> Iterator[None]:
    """The machine's 1-minute load average while the block runs, into["load"]: min, median,
    max of samples every `every` s (other work on the machine slows every tool's apt/dpkg)."""
    samples: list[float] = []
    stop = threading.Event()

    def sample() -> None:
        while True:
            samples.append(os.getloadavg()[0])
            if stop.wait(every):
                return

    thread = threading.Thread(target=sample, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
        into["load"] = {"min": min(samples), "median": statistics.median(samples),
                        "max": max(samples)}  # fmt: skip


def biggest_deb(repo_dir: Path) -> Path:
    return max(repo_dir.glob("ubuntu*/x86_64/*.deb"), key=lambda p: p.stat().st_size)


@contextlib.contextmanager
def serving(directory: Path, bind: str, log: Path) -> Iterator[None]:
    """`gpunode mirror serve DIR` in the background, until the block ends."""
    with log.open("w") as fh:
        proc = subprocess.Popen(
            [sys.executable, "-m", "gpunode", "mirror", "serve", str(directory), "--bind", bind],
            stdout=fh,
            stderr=subprocess.STDOUT,
            cwd=REPO,
        )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                urllib.request.urlopen(f"http://{bind}/nothing-here", timeout=1)
            except urllib.error.HTTPError:
                break  # it answers
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"gpunode mirror serve did not start; see {log}") from None
                time.sleep(0.2)
        yield
    finally:
        proc.terminate()
        proc.wait(timeout=30)


class ColdLink:
    def __init__(self, a: argparse.Namespace) -> None:
        self.a = a
        ns = argparse.Namespace(state=a.state, net=a.net, out=a.state / "unused.json")
        self.bench = Bench(ns)
        self.lab = self.bench.lab
        self.lab.env["GPUNODE_LAB_PAD_SCALE"] = str(a.scale)
        self.work = self.bench.work
        self.runs: list[dict[str, Any]] = []
        self.link: dict[str, Any] = {}
        self.started = time.strftime("%Y-%m-%d %H:%M:%S %Z")

    def say(self, msg: str) -> None:
        self.bench.say(msg)

    def up(self) -> None:
        # the repository cache is stamped by generator, not by scale: a lab of another scale
        # must rebuild it
        marker = self.a.state / "scale"
        if not marker.exists() or marker.read_text() != str(self.a.scale):
            shutil.rmtree(self.lab.dir / "repo", ignore_errors=True)
        self.lab.down()
        self.say(f"lab of {self.a.hosts} hosts, packages at real size / {self.a.scale}")
        self.lab.up(self.a.hosts)
        marker.write_text(str(self.a.scale))

    def run(self) -> None:
        a = self.a
        venv = a.venv or a.state / "venv"
        tools = [t for t in a.tools.split(",") if t]
        once = [t for t in a.once.split(",") if t]
        if unknown := set(tools + once) - set(TOOLS):
            sys.exit(f"unknown tools: {', '.join(sorted(unknown))} (known: {', '.join(TOOLS)})")
        if {"pyinfra", "ansible"} & set(tools + once):
            ensure_venv(venv, self.say)
        try:
            self.up()
            t, stack = self.bench.target()
            cfg = self.lab.config()
            url = urllib.parse.urlsplit(cfg["repo_url"])
            address, port = url.hostname or "", url.port or 80
            log = self.lab.dir / "repo-access.log"
            big = biggest_deb(Path(cfg["repo_dir"]))
            big_url = f"{cfg['repo_url']}/{big.relative_to(cfg['repo_dir'])}"
            n, free = link_check(big_url)
            with shaping.shaped(address, port, a.mbit):
                n, secs = link_check(big_url)
                self.link = {
                    "file": big.name,
                    "bytes": n,
                    "unshaped_s": free,
                    "shaped_s": secs,
                    "mbit_measured": n * 8 / secs / 1e6,
                }
                self.say(f"link: {n / 2**20:.1f} MiB in {secs:.2f} s shaped, {free:.2f} s not")
                for i in range(a.runs):
                    last = once if i == a.runs - 1 else []
                    for name in tools + last:
                        self.one(name, i, t, stack, venv, log)
        finally:
            if not a.keep_lab:
                self.lab.down()
        if a.doc:
            write_doc(a.doc, self.document(), a.mark)

    def one(
        self, name: str, i: int, t: Target, stack: dict[str, Any], venv: Path, log: Path
    ) -> None:
        names = list(t.hosts)
        self.lab.reset(names)
        cache = self.work / f"cache-{name}-{i}"  # the controller's index cache starts cold too
        shutil.rmtree(cache, ignore_errors=True)
        label = f"{name}-{len(names)}h-cold-{i}"
        r: dict[str, Any] = {"tool": name, "run": i, "hosts": len(names)}
        start = upstream.offset(log)
        with load_sampled(r):
            expect = self.measured(name, label, r, t, stack, venv, cache)
        r["upstream"] = upstream.count(log, start).as_dict()
        snaps = self.lab.snapshots(names, expect["files"])
        bad = {h: p for h in names if (p := problems(snaps[h], expect))}
        r["converged"] = not bad
        if bad:
            r["problems"] = bad
        up = r["upstream"]
        self.say(
            f"{label}: rc={r['rc']} wall={r['wall_s']:.1f}s upstream={up['bytes'] / 2**20:.1f}"
            f" MiB ({up['debs']} .debs) load={r['load']['median']:.1f}"
            + ("" if not bad else f" NOT CONVERGED: {bad}")
        )
        self.runs.append(r)
        self.save()

    def measured(
        self,
        name: str,
        label: str,
        r: dict[str, Any],
        t: Target,
        stack: dict[str, Any],
        venv: Path,
        cache: Path,
    ) -> dict[str, Any]:
        """One tool's cold apply (for gpunode-mirror: the build, then the apply) into `r`;
        returns the state the hosts must then be in."""
        log = self.lab.dir / "repo-access.log"
        expect: dict[str, Any] = stack["expect"]
        if name == "gpunode-mirror":
            start = upstream.offset(log)
            mirror = self.work / "mirror"
            shutil.rmtree(mirror, ignore_errors=True)
            tool = Tool("gpunode", venv, self.work, env={"GPUNODE_CACHE_DIR": str(cache)})
            build = [sys.executable, "-m", "gpunode", "mirror", "build"]
            build += [str(t.gpunode_inventory), str(mirror)]
            began = time.monotonic()
            with (self.work / f"{label}-build.log").open("w") as fh:
                proc = subprocess.run(build, env=tool.run_env(), stdout=fh,
                                      stderr=subprocess.STDOUT, cwd=REPO, check=False)  # fmt: skip
            r["build_s"] = time.monotonic() - began
            if proc.returncode != 0:
                raise RuntimeError(
                    f"gpunode mirror build failed; see {self.work}/{label}-build.log"
                )
            r["build_upstream"] = upstream.count(log, start).as_dict()
            bind = f"{net_address(self.a.net, 9)}:{MIRROR_PORT}"
            inv, expect = self.mirror_inventory(t, stack, f"http://{bind}")
            mt = Target(**{**t.__dict__, "gpunode_inventory": inv})
            with serving(mirror, bind, self.work / f"{label}-serve.log"):
                m = self.bench.measure(tool, mt, label)
            r["apply_s"] = m["wall_s"]
            m["wall_s"] += r["build_s"]
        else:
            tool = Tool(name, venv, self.work)
            if name == "gpunode":
                tool.env = {"GPUNODE_CACHE_DIR": str(cache)}
            m = self.bench.measure(tool, t, label)
        r.update(m)
        return expect

    def mirror_inventory(
        self, t: Target, stack: dict[str, Any], base: str
    ) -> tuple[Path, dict[str, Any]]:
        """The lab's inventory with repos.nvidia at the mirror, and the stack it then
        expects (its apt source names the mirror)."""
        from ruamel.yaml import YAML

        yaml = YAML()
        doc = yaml.load(t.gpunode_inventory.read_text())
        upstream_base = str(doc["defaults"]["repos"]["nvidia"]).rstrip("/")
        doc["defaults"]["repos"]["nvidia"] = base
        path = self.work / "lab-mirror.yaml"
        with path.open("w") as fh:
            yaml.dump(doc, fh)
        line = stack["sources_line"].replace(upstream_base, base)
        files = {**stack["expect"]["files"]}
        files[stack["sources_path"]] = hashlib.sha256(line.encode()).hexdigest()
        return path, {**stack["expect"], "files": files}

    def save(self) -> None:
        out = self.a.out or self.a.state / "coldlink.json"
        out.write_text(json.dumps(self.document(), indent=1) + "\n")

    def document(self) -> dict[str, Any]:
        return {
            "started": self.started,
            "commit": self.bench.commit,
            "machine": report.machine(),
            "hosts": self.a.hosts,
            "scale": self.a.scale,
            "mbit": self.a.mbit,
            "link": self.link,
            "runs": self.runs,
        }


def _med(rs: list[dict[str, Any]], key: str) -> float:
    return statistics.median(float(r[key]) for r in rs)


def table(doc: dict[str, Any]) -> str:
    """Medians per tool; projected: the same run with every transfer S times longer."""
    rate = doc["link"]["mbit_measured"] * 1e6 / 8  # bytes/s through the limit
    scale = doc["scale"]
    by: dict[str, list[dict[str, Any]]] = {}
    for r in doc["runs"]:
        by.setdefault(r["tool"], []).append(r)
    head = ["tool", "runs", "wall s", "min-max s", "of it: mirror build s", "upstream MiB",
            "of it: indexes MiB", ".debs sent", "x one host's packages",
            f"projected: sizes x{scale}, this link, s",
            "faster than pyinfra: measured / projected", "load avg: median (max)"]  # fmt: skip
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    once = None
    if "gpunode-mirror" in by:
        once = statistics.median(r["build_upstream"]["deb_bytes"] for r in by["gpunode-mirror"])
    proj: dict[str, float] = {}
    for tool, rs in by.items():
        byts = statistics.median(r["upstream"]["bytes"] for r in rs)
        proj[tool] = _med(rs, "wall_s") + (scale - 1) * byts / rate
    base = by.get("pyinfra")
    for tool in (t for t in TOOLS if t in by):
        rs = by[tool]
        wall = _med(rs, "wall_s")
        build = f"{_med(rs, 'build_s'):.1f}" if tool == "gpunode-mirror" else ""
        up = statistics.median(r["upstream"]["bytes"] for r in rs)
        debs = statistics.median(r["upstream"]["debs"] for r in rs)
        idx = statistics.median(r["upstream"]["index_bytes"] for r in rs)
        span = f"{min(r['wall_s'] for r in rs):.1f}-{max(r['wall_s'] for r in rs):.1f}"
        times = (
            f"{statistics.median(r['upstream']['deb_bytes'] for r in rs) / once:.1f}"
            if once
            else ""
        )
        flag = "" if all(r["rc"] == 0 and r["converged"] for r in rs) else " (failed)"
        vs = ""
        if base and tool != "pyinfra":
            vs = f"{_med(base, 'wall_s') / wall:.2f}x / {proj['pyinfra'] / proj[tool]:.2f}x"
        load = ""
        if all("load" in r for r in rs):  # sampled since 2026-12-04's S = 10 run
            med = statistics.median(r["load"]["median"] for r in rs)
            load = f"{med:.1f} ({max(r['load']['max'] for r in rs):.1f})"
        lines.append(
            f"| {tool}{flag} | {len(rs)} | {wall:.1f} | {span} | {build} | {up / 2**20:.1f} |"
            f" {idx / 2**20:.2f} | {debs:.0f} |"
            f" {times} | {proj[tool]:.0f} | {vs} | {load} |"
        )
    return "\n".join(lines) + "\n"


def block(doc: dict[str, Any], mark: str) -> str:
    m, link = doc["machine"], doc["link"]
    return (
        f"<!-- bench:{mark}:begin -->\n"
        f"Measured {doc['started']}, gpunode {doc['commit']}, {doc['hosts']} hosts, packages at"
        f" real size / {doc['scale']}, upstream limited to {doc['mbit']:g} Mbit/s; on {m['os']},"
        f" kernel {m['kernel']}, {m['nproc']} CPUs.\nLink check: {link['file']}"
        f" ({link['bytes'] / 2**20:.1f} MiB) in {link['shaped_s']:.2f} s through the limit"
        f" ({link['mbit_measured']:.1f} Mbit/s), {link['unshaped_s']:.2f} s without.\n\n"
        f"{table(doc)}"
        f"<!-- bench:{mark}:end -->\n\n"  # the doc's text goes on after a blank line
    )


def write_doc(path: Path, doc: dict[str, Any], mark: str = "coldlink") -> None:
    begin, end = f"<!-- bench:{mark}:begin -->", f"<!-- bench:{mark}:end -->"
    report.replace_block(path, block(doc, mark), begin, end)


def main(argv: list[str] | None = None) -> int:
    a = parse(argv)
    if a.report_only:
        if not a.doc:
            sys.exit("--report-only needs --doc")
        out = a.out or a.state / "coldlink.json"
        write_doc(a.doc, json.loads(out.read_text()), a.mark)
        return 0
    ColdLink(a).run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
