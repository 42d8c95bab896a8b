"""Memory soak: `gpunode exporter` and `gpunode top` over lab hosts for minutes at 1 s.

One lab of N hosts (its own state dir and loopback range). Each host gets a stand-in
`nvidia-smi` (/usr/local/bin, first on PATH) that streams 8 GPUs' query rows every
interval, as the real one does under `-lms`; the first host's also spews: SPEW MiB/s of
junk on stdout and stderr, and now and then a megabyte with no newline. Then, side by side:

- `gpunode exporter INVENTORY --interval 1`, its /metrics scraped every second;
- `gpunode top INVENTORY --interval 1` on a pseudo-terminal of 80x24 (the real TUI).

Both processes' RSS is read from /proc every second (t = seconds since they started), and
their /proc/PID/smaps_rollup at the end of the warm-up and at the end. Three figures each:

- growth: the issue's figure. From the median of the first 10 samples after the warm-up
  (every host streaming, the spewing host's buffers full; imports and Textual's first
  render done) to the median of the last 10.
- steady growth: the same from `--steady-from` (minute 2) to the end: caches that fill for
  a minute or two are no longer in it, a leak still is.
- slope: a least-squares line through every sample from `--steady-from` on, in MiB/hour:
  what a process that runs for days would gain.

The output: a table of RSS at every minute (so a plateau and a line look different) and a
JSON document with the whole 1-s series. `--trace` runs both under tracemalloc and adds
the Python heap at minute 2 and near the end, with the lines whose memory grew most: where
a leak in Python is; RSS growing while that stays flat is the C allocator's or a library's.

    sudo python -m bench.memsoak                  # 10 hosts, 10 minutes (docs/benchmarks.md)
    sudo python -m bench.memsoak --short          # 40 s, for a test
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import pty
import statistics
import struct
import subprocess
import sys
import termios
import threading
import time
import tracemalloc
import urllib.request
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
NSENTER = ["nsenter", "-m", "-u", "-i", "-p", "-r", "-w"]
ENV = ["/usr/bin/env", "-i", "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"]
GROWTH_GOAL = 10.0  # percent
SMAPS_FIELDS = ("Rss", "Anonymous", "Private_Dirty", "Swap")
SLOT = int(os.environ.get("GPUNODE_TEST_SLOT", "0"))  # as the tests: a lab and ports per slot

# The stand-in nvidia-smi: the query's fields in order, honest values for what the monitor
# shows, [N/A] for the rest (as nvidia-smi prints an unsupported field).
FAKE_SMI = r"""#!/usr/bin/python3
import sys, time
SPEW = {spew}  # bytes per interval of junk on each stream (0: an honest host)
args = sys.argv[1:]
query = next((a.split("=", 1)[1] for a in args if a.startswith("--query-gpu=")), None)
if query is None:
    sys.exit(0)  # --query-compute-apps and the rest: no processes, nothing to say
fields = query.split(",")
ms = int(args[args.index("-lms") + 1]) if "-lms" in args else 0
VALUES = {{"index": "{{i}}", "name": "NVIDIA H200", "uuid": "GPU-soak-{{i}}",
          "pci.bus_id": "00000000:0{{i}}:00.0", "driver_version": "580.159.04",
          "utilization.gpu": "{{u}}", "memory.total": "143771", "memory.used": "{{m}}",
          "memory.free": "100000", "memory.reserved": "600", "temperature.gpu": "{{t}}",
          "power.draw": "{{p}}", "power.limit": "700.00", "clocks.sm": "1980",
          "clocks.mem": "3201"}}
junk = ("spew " * 40 + "\n") * max(1, SPEW // 201)
tick = 0
while True:
    rows = []
    for i in range(8):
        u, m, t, p = (tick * 7 + i * 13) % 101, 1024 + tick % 500, 40 + i, 100.5 + i
        rows.append(", ".join(VALUES.get(f, "[N/A]").format(i=i, u=u, m=m, t=t, p=p)
                              for f in fields))
    out = "\n".join(rows) + "\n"
    if SPEW:
        out += junk
        sys.stderr.write(junk)
        if tick % 10 == 0:
            out += "x" * (1 << 20)  # a megabyte with no newline
        sys.stderr.flush()
    sys.stdout.write(out)
    sys.stdout.flush()
    if not ms:
        break
    tick += 1
    time.sleep(ms / 1000)
"""


class Lab:
    def __init__(self, state: Path, net: int) -> None:
        self.dir, self.net = state, net
        self.env = {**os.environ, "GPUNODE_LAB_DIR": str(state)}

    def gpunode(self, *args: str) -> str:
        out = subprocess.run([sys.executable, "-m", "gpunode", *args], env=self.env, cwd=REPO,
                             capture_output=True, text=True, check=False)  # fmt: skip
        if out.returncode != 0:
            raise RuntimeError(f"gpunode {' '.join(args)}: {out.stderr.strip()[-800:]}")
        return out.stdout

    def status(self) -> dict[str, Any]:
        try:
            doc: dict[str, Any] = json.loads(self.gpunode("lab", "status", "--json"))
        except RuntimeError:
            return {}
        return doc

    def up(self, hosts: int) -> list[str]:
        doc = self.status()
        names = [str(h["name"]) for h in doc.get("hosts") or [] if h.get("state") == "up"]
        if len(names) < hosts:
            if doc.get("hosts"):
                self.gpunode("lab", "down")
            self.gpunode("lab", "up", "--hosts", str(hosts), "--net", str(self.net))
            doc = self.status()
            names = [str(h["name"]) for h in doc["hosts"]]
        return names[:hosts]

    def write(self, host: str, path: str, text: str) -> None:
        pid = next(str(h["init_pid"]) for h in self.status()["hosts"] if h["name"] == host)
        script = f"cat > {path} && chmod 0755 {path}"
        subprocess.run([*NSENTER, "-t", pid, "--", *ENV, "/bin/sh", "-c", script],
                       input=text, text=True, check=True, timeout=60)  # fmt: skip


def rss_kib(pid: int) -> int | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        return None
    return None


def smaps_mib(pid: int) -> dict[str, float]:
    """/proc/PID/smaps_rollup's totals (MiB): Anonymous is the heap, Rss - Anonymous mapped
    files (the interpreter, shared libraries), which do not grow with a leak."""
    out: dict[str, float] = {}
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            key, _, rest = line.partition(":")
            if key in SMAPS_FIELDS and rest.strip().endswith("kB"):
                out[key] = round(int(rest.split()[0]) / 1024, 1)
    except OSError:
        pass
    return out


def figures(rows: list[tuple[float, int]], warmup: float, steady_from: float) -> dict[str, Any]:
    """The three figures of the module's docstring, for one process's (t, KiB) samples."""
    after = [kib for t, kib in rows if t >= warmup]
    steady = [(t, kib) for t, kib in rows if t >= steady_from]
    start, end = statistics.median(after[:10]), statistics.median(after[-10:])
    mid = statistics.median([kib for _, kib in steady[:10]])
    fit = statistics.linear_regression([t for t, _ in steady], [kib for _, kib in steady])
    return {
        "start_mib": mib(start), "steady_start_mib": mib(mid), "end_mib": mib(end),
        "peak_mib": mib(max(after)),
        "growth_pct": round(100 * (end - start) / start, 1),
        "steady_growth_pct": round(100 * (end - mid) / mid, 1),
        "slope_mib_per_hour": round(fit.slope * 3600 / 1024, 1),
    }  # fmt: skip


def mib(kib: float) -> float:
    return round(kib / 1024, 1)


def minute_table(samples: dict[str, list[tuple[float, int]]], every: float) -> str:
    """RSS (MiB) at every `every` seconds: the median of the 10 s before each mark."""
    labels = list(samples)
    last = max(t for rows in samples.values() for t, _ in rows)
    lines = ["| t | " + " | ".join(f"{label} MiB" for label in labels) + " |"]
    lines.append("|---:" * (len(labels) + 1) + "|")
    mark = every
    while mark <= last + 1:
        cells = []
        for label in labels:
            near = [kib for t, kib in samples[label] if mark - 10 <= t < mark]
            cells.append(f"{mib(statistics.median(near)):.1f}" if near else "")
        lines.append(f"| {mark / 60:g} min | " + " | ".join(cells) + " |")
        mark += every
    return "\n".join(lines)


# --trace: gpunode run under tracemalloc, a snapshot of the Python heap dumped at each of
# MEMSOAK_TRACE_AT (seconds since it started). It slows the process and adds its own
# memory: a diagnostic run, not the figure.
TRACED = """
import os, runpy, sys, threading, time, tracemalloc
tracemalloc.start(1)
t0, out = time.monotonic(), os.environ["MEMSOAK_TRACE_OUT"]
def dump():
    for i, at in enumerate(float(x) for x in os.environ["MEMSOAK_TRACE_AT"].split(",")):
        time.sleep(max(0.0, at - (time.monotonic() - t0)))
        tracemalloc.take_snapshot().dump(f"{out}.{i}")
threading.Thread(target=dump, daemon=True).start()
sys.argv[0] = "gpunode"
runpy.run_module("gpunode", run_name="__main__", alter_sys=True)
"""


def launcher(label: str, args: argparse.Namespace, env: dict[str, str]) -> list[str]:
    """How to start gpunode: plainly, or under tracemalloc (`env` gets where and when)."""
    if not args.trace:
        return [sys.executable, "-m", "gpunode"]
    out = Path(args.state) / f"trace-{label}"
    for stale in (out.with_name(f"{out.name}.{i}") for i in (0, 1)):
        stale.unlink(missing_ok=True)  # a failed dump must not show an older run's heap
    env["MEMSOAK_TRACE_OUT"] = str(out)
    env["MEMSOAK_TRACE_AT"] = f"{args.steady_from},{args.warmup + args.seconds - 20}"
    return [sys.executable, "-c", TRACED]


def traced(label: str, args: argparse.Namespace) -> dict[str, Any]:
    """The Python heap at minute 2 and at the end, and the 12 lines whose blocks grew most."""
    base = str(Path(args.state) / f"trace-{label}")
    try:
        first, last = (tracemalloc.Snapshot.load(f"{base}.{i}") for i in (0, 1))
    except OSError as exc:
        return {"error": str(exc)}
    size = [mib(sum(st.size for st in s.statistics("filename")) / 1024) for s in (first, last)]
    top = last.compare_to(first, "lineno")[:12]
    return {
        "python_heap_mib": size,
        "grew_most": [f"{d.traceback[0].filename.split('site-packages/')[-1]}:"
                      f"{d.traceback[0].lineno} {d.size_diff / 1024:+.0f} KiB "
                      f"({d.count_diff:+d} blocks)" for d in top],
    }  # fmt: skip


def start_top(
    inventory: Path, env: dict[str, str], gpunode: list[str]
) -> tuple[subprocess.Popen[bytes], int]:
    """`gpunode top` on a pseudo-terminal of 80x24, its screen read and dropped."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))
    proc = subprocess.Popen(
        [*gpunode, "top", str(inventory), "--interval", "1"],
        stdin=slave, stdout=slave, stderr=slave, env={**env, "TERM": "xterm-256color"},
        cwd=REPO, start_new_session=True,
    )  # fmt: skip
    os.close(slave)

    def drain() -> None:
        while True:
            try:
                if not os.read(master, 65536):
                    return
            except OSError:
                return

    threading.Thread(target=drain, daemon=True).start()
    return proc, master


def scrape_forever(port: int, stop: threading.Event, seen: dict[str, Any]) -> None:
    """/metrics once a second, as Prometheus would; the last page and the failures kept."""
    while not stop.wait(1.0):
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
                seen["metrics"] = r.read().decode()
            seen["scrapes"] += 1
        except Exception as exc:  # a failed scrape is counted; the soak goes on
            seen["failed"] += 1
            seen["error"] = repr(exc)


def soak(args: argparse.Namespace) -> dict[str, Any]:
    lab = Lab(Path(args.state), args.net)
    names = lab.up(args.hosts)
    spewer = names[0]
    for name in names:
        spew = int(args.spew * (1 << 20) * args.interval) if name == spewer else 0
        lab.write(name, "/usr/local/bin/nvidia-smi", FAKE_SMI.format(spew=spew))
    inventory = Path(args.state) / "memsoak-inventory.yaml"
    inventory.write_text(lab.gpunode("lab", "inventory"))
    env = {**os.environ, "GPUNODE_STATE_DIR": str(Path(args.state) / "gpunode-state")}
    exporter_env, top_env = dict(env), dict(env)
    exporter = subprocess.Popen(
        [*launcher("exporter", args, exporter_env), "exporter", str(inventory), "--interval",
         str(args.interval), "--listen", f"127.0.0.1:{args.port}"],
        env=exporter_env, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        start_new_session=True,
    )  # fmt: skip
    top, master = start_top(inventory, top_env, launcher("top", args, top_env))
    stop = threading.Event()
    seen: dict[str, Any] = {"metrics": "", "scrapes": 0, "failed": 0, "error": ""}
    scraper = threading.Thread(target=scrape_forever, args=(args.port, stop, seen), daemon=True)
    scraper.start()
    samples: dict[str, list[tuple[float, int]]] = {"exporter": [], "top": []}
    procs = {"exporter": exporter, "top": top}
    smaps: dict[str, dict[str, dict[str, float]]] = {label: {} for label in procs}
    t0 = time.monotonic()
    try:
        while time.monotonic() - t0 < args.warmup + args.seconds:
            for label, proc in procs.items():
                if proc.poll() is not None:
                    raise RuntimeError(f"{label} exited ({proc.returncode}) during the soak")
                kib = rss_kib(proc.pid)
                if kib is not None:
                    samples[label].append((round(time.monotonic() - t0, 1), kib))
                if "warmup" not in smaps[label] and time.monotonic() - t0 >= args.warmup:
                    smaps[label]["warmup"] = smaps_mib(proc.pid)
            time.sleep(1.0)
        for label, proc in procs.items():
            smaps[label]["end"] = smaps_mib(proc.pid)
    finally:
        stop.set()
        for proc in (exporter, top):
            proc.terminate()
        for proc in (exporter, top):
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
        os.close(master)
    metrics = seen["metrics"]
    streaming = sorted(n for n in names if f'Hostname="{n}"' in metrics)
    result: dict[str, Any] = {
        "hosts": len(names), "spewer": spewer, "spew_mib_per_s": args.spew,
        "interval_s": args.interval, "warmup_s": args.warmup, "seconds": args.seconds,
        "steady_from_s": args.steady_from, "load_avg": [round(x, 2) for x in os.getloadavg()],
        "hosts_in_metrics": streaming, "scrapes": seen["scrapes"],
        "failed_scrapes": seen["failed"], "last_scrape_error": seen["error"],
    }  # fmt: skip
    for label, rows in samples.items():
        result[label] = {**figures(rows, args.warmup, args.steady_from), "smaps": smaps[label]}
        if args.trace:
            result[label]["tracemalloc"] = traced(label, args)
    result["table"] = minute_table(samples, 60.0 if args.seconds >= 240 else 10.0)
    result["series_kib"] = {label: [list(row) for row in rows] for label, rows in samples.items()}
    return result


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--hosts", type=int, default=10)
    p.add_argument("--seconds", type=float, default=600.0, help="measured, after the warm-up")
    p.add_argument("--warmup", type=float, default=60.0)
    p.add_argument("--steady-from", type=float, help="seconds; default 120 (half-way if short)")
    p.add_argument("--short", action="store_true", help="40 s measured, 15 s warm-up")
    p.add_argument("--interval", type=float, default=1.0)
    p.add_argument("--spew", type=float, default=2.0, help="MiB/s the first host spews")
    state = "/var/tmp/gpunode-memsoak" + (f"-slot{SLOT}" if SLOT else "")
    p.add_argument("--state", default=os.environ.get("GPUNODE_MEMSOAK_STATE", state))
    p.add_argument("--net", type=int, default=79 + 256 * SLOT, help="the lab's --net")
    p.add_argument("--port", type=int, default=19835 + SLOT)
    p.add_argument("--json", dest="json_out", help="also write the result here")
    p.add_argument("--trace", action="store_true", help="under tracemalloc: a diagnostic")
    args = p.parse_args(argv)
    if args.short:
        args.seconds, args.warmup = 40.0, 15.0
    if args.steady_from is None:
        total = args.warmup + args.seconds
        args.steady_from = 120.0 if total >= 240 else args.warmup + args.seconds / 2
    result = soak(args)
    print(result["table"])
    print(json.dumps({k: v for k, v in result.items() if k not in ("table", "series_kib")},
                     indent=2))  # fmt: skip
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(result) + "\n")
    worst = max(result["exporter"]["growth_pct"], result["top"]["growth_pct"])
    return 0 if worst < GROWTH_GOAL and len(result["hosts_in_metrics"]) == args.hosts else 1


if __name__ == "__main__":
    sys.exit(main())
