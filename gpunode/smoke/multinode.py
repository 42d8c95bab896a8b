"""nccl-multinode: one torchrun per host, an all-reduce across them, graded per host.

torchrun is the engine: gpunode only starts it on every host at once (the same
--nnodes, each host its --node-rank), bounds it with `timeout` (which stops torchrun's
whole process group), and reads back what the script printed (`GPUNODE-NCCL {json}`)
and which transports NCCL's INFO lines say it chose.

The rendezvous is private to the run. torch's c10d store has no authentication and
torch unpickles what it reads there, so: the first host's store listens on its loopback
only (127.0.0.1, a port the kernel picks), each other host reaches it through a port on
its own loopback that gpunode forwards over its SSH connections (Transport.forward),
and the run id, which names every key of the run, is a fresh secret that travels on the
command's stdin (never argv, never the process list). See docs/security.md.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import re
import secrets
import shutil
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from importlib import resources
from typing import Any

from gpunode.events import Bus, HostStatusChanged, SmokeCheck, SmokeResult
from gpunode.hostpool import Opener, run_hosts
from gpunode.inventory.model import Host
from gpunode.smoke.runner import HostSmoke, finished
from gpunode.transport.base import (
    CommandTimeoutError,
    OutputCallback,
    Transport,
    TransportError,
    quote,
)

NAME = "nccl-multinode"
SCRIPT = "nccl_multinode.py"
MARK = "GPUNODE-NCCL "
STORE_MARK = "GPUNODE-STORE "
"""The first host's launcher prints the store's port after this (nccl_multinode.py)."""
PORT_HOLDER = "@PORT@"
KEEP_LINES = 64
# Seconds between timeout's TERM and KILL. torchrun's workers run in sessions of their own,
# out of timeout's reach: on TERM torchrun stops them, waiting up to 30 s before it kills
# one that ignores TERM; killed sooner, it would leave that worker behind.
STOP_GRACE = 45
# NCCL's own lines: "Channel 00/0 : 0[0] -> 1[1] [send] via NET/IB/0/GDRDMA",
# "... via P2P/CUMEM/read", "... via SHM/direct/direct", "NET/Socket : Using [0]eth0:...".
_VIA = re.compile(r"NCCL INFO Channel \d+/\d+ : \d+\[\d+\] -> \d+\[\d+\].* via (\w+)(?:/(\w+))?")
_USING = re.compile(r"NCCL INFO NET/(\w+) : Using (.+)$")
_NETWORK = re.compile(r"NCCL INFO Using network (\w+)")
_STORE = re.compile(rf"^{STORE_MARK}([0-9]{{1,5}})$", re.M)
# An exception as Python prints it ("[rank0]: RuntimeError: ...", "...DistNetworkError: ...").
_ERROR = re.compile(r"\w(Error|Exception): ")
_WRAPPER_ERRORS = {
    93: "no python beside torchrun (python or python3 in its folder, or its #! line) "
    "to hold the rendezvous store: set nccl.bin to the folder of a venv or conda env",
    94: "no executable torchrun in nccl.bin on the host",
    95: "no torchrun on the host's PATH: set nccl.bin (the folder of torchrun)",
    96: "no `timeout` on the host (coreutils)",
    97: "could not make a temporary folder on the host (mktemp failed)",
    98: "could not unpack the all-reduce script on the host",
}
# The first host's python: beside torchrun, else the interpreter of its #! line.
_FIND_PYTHON = (
    'b=$(dirname "$t"); py=; '
    'for c in "$b/python" "$b/python3" "$(sed -n "1s/^#![[:space:]]*//p" "$t")"; do '
    'case "$c" in */python*) test -x "$c" && { py=$c; break; } ;; esac; done; '
    'test -n "$py" || exit 93; '
)


@dataclass(frozen=True)
class Launch:
    """One host's part of the run: its torchrun and where it meets the others."""

    host: Host
    node_rank: int
    nnodes: int
    nproc: int
    run_id: str
    """The run's secret: it names every key of the run in the store."""
    port: int | None = None
    """The store's port on this host's loopback: the first host's own store once it
    started, a forward to it on the others."""
    exit_code: int | None = None
    """How the host's command ended (None: stopped at the timeout)."""

    @property
    def endpoint(self) -> str:
        if self.port is None:
            return "on the first host's loopback (its store did not start)"
        where = f"127.0.0.1:{self.port}"
        return where if self.node_rank == 0 else f"{where} (forwarded to the first host)"

    @property
    def torchrun(self) -> str:
        nccl = self.host.nccl
        if nccl.bin is not None:
            return f"{nccl.bin}/torchrun"
        conda = self.host.stack.conda
        envs = [n for n, e in conda.envs.items() if e.pytorch] if conda is not None else []
        if conda is not None and envs:
            return f"{conda.prefix}/envs/{envs[0]}/bin/torchrun"
        return "torchrun"

    def argv(self) -> list[str]:
        """torchrun's arguments (no run id: that is the environment's PET_RDZV_ID)."""
        nccl = self.host.nccl
        sizes = ",".join(str(s) for s in nccl.sizes_mib)
        port = PORT_HOLDER if self.port is None else str(self.port)
        return [
            f"--nnodes={self.nnodes}",
            f"--nproc-per-node={self.nproc}",
            f"--node-rank={self.node_rank}",
            "--rdzv-backend=c10d",
            f"--rdzv-endpoint=127.0.0.1:{port}",
            # never host the store itself: torch's binds every interface (and, when the
            # port is taken, falls back to being a client of whoever holds it)
            "--rdzv-conf=is_host=0",
            "--max-restarts=0",
            *([f"--local-addr={nccl.local_addr}"] if nccl.local_addr else []),
            "SCRIPT",
            f"--sizes-mib={sizes}",
            f"--backend={nccl.backend}",
        ]

    def environment(self) -> dict[str, str]:
        nccl = self.host.nccl
        env = {
            "NCCL_DEBUG": "INFO",
            "NCCL_DEBUG_SUBSYS": "INIT,NET",
            "PYTHONUNBUFFERED": "1",
            # no second store: the agent would open one on every interface for the workers
            "TORCH_DISABLE_SHARE_RDZV_TCP_STORE": "1",
        }
        if nccl.fabric is not None:
            env |= {"NCCL_SOCKET_IFNAME": nccl.fabric, "GLOO_SOCKET_IFNAME": nccl.fabric}
        env |= {k: str(v) for k, v in nccl.env.items()}
        if self.port is not None:
            env["GPUNODE_STORE_PORT"] = str(self.port)
        return env

    def command(self) -> str:
        """The shell text: the run id from stdin's first line, the script from the rest;
        torchrun under `timeout`, on the first host behind the launcher that holds the
        store (which fills in its port)."""
        nccl = self.host.nccl
        assigns = " ".join(f"{k}={quote(v)}" for k, v in self.environment().items())
        script = '"$d/' + SCRIPT + '"'
        args = " ".join(script if a == "SCRIPT" else quote(a) for a in self.argv())
        find = (
            "command -v torchrun >/dev/null || exit 95; t=$(command -v torchrun); "
            if self.torchrun == "torchrun"
            else f't={quote(self.torchrun)}; test -x "$t" || exit 94; '
        )
        if self.node_rank == 0:
            find += _FIND_PYTHON
            run = f'"$py" {script} --hold-store "$t" {args}'
        else:
            run = f'"$t" {args}'
        return (
            'd=$(mktemp -d "${TMPDIR:-/tmp}/gpunode-nccl.XXXXXX") || exit 97; '
            "trap 'rm -rf \"$d\"' EXIT; "
            "IFS= read -r rid || exit 98; "
            f'base64 -d > "$d/{SCRIPT}" || exit 98; '
            "command -v timeout >/dev/null || exit 96; "
            f"{find}"
            "PET_RDZV_ID=$rid; export PET_RDZV_ID; "
            f"env {assigns} timeout -k {STOP_GRACE} {nccl.timeout:g} {run} 2>&1"
        )

    def stdin(self, blob: bytes) -> bytes:
        return self.run_id.encode() + b"\n" + blob


def launches(hosts: Sequence[Host], run_id: str | None = None) -> list[Launch]:
    """Every host's launch: the first host is node 0 and holds the rendezvous store."""
    run_id = run_id or f"gpunode-{secrets.token_hex(16)}"
    out = []
    for rank, host in enumerate(hosts):
        nproc = host.nccl.nproc_per_node or host.gpus.count or 1
        out.append(Launch(host, rank, len(hosts), nproc, run_id))
    return out


def script_blob() -> bytes:
    return base64.encodebytes(resources.files("gpunode.smoke.suite").joinpath(SCRIPT).read_bytes())


@dataclass
class NodeOutput:
    """What one host's torchrun printed, read."""

    report: dict[str, Any] | None = None
    transports: dict[str, int] = field(default_factory=dict)
    net_devices: list[str] = field(default_factory=list)
    networks: list[str] = field(default_factory=list)
    """The network plugin NCCL loaded ("Using network IB"): loaded, not necessarily used."""
    lines: list[str] = field(default_factory=list)
    """NCCL's lines that say what it chose (the first KEEP_LINES), as evidence."""
    tail: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


def parse_output(text: str) -> NodeOutput:
    out = NodeOutput()
    for line in text.splitlines():
        line = line.strip()
        if line.startswith(STORE_MARK):
            continue
        if line.startswith(MARK):
            with contextlib.suppress(ValueError):
                out.report = json.loads(line[len(MARK) :])
            continue
        via = _VIA.search(line)
        network = _NETWORK.search(line)
        if (via or network or _USING.search(line)) and len(out.lines) < KEEP_LINES:
            out.lines.append(line)
        if network and network.group(1) not in out.networks:
            out.networks.append(network.group(1))
        if via:
            kind, sub = via.group(1), via.group(2) or ""
            name = {"P2P": "p2p", "SHM": "shm"}.get(kind) or (
                sub.lower() if kind == "NET" and sub else kind.lower()
            )
            out.transports[name] = out.transports.get(name, 0) + 1
            continue
        using = _USING.search(line)
        if using:
            out.net_devices.append(f"{using.group(1)}: {using.group(2).strip()}")
        elif _ERROR.search(line):
            out.errors = [*out.errors[-2:], line]
        elif line and "NCCL INFO" not in line:
            out.tail = [*out.tail[-7:], line]
    return out


def grade(launch: Launch, code: int | None, text: str, seconds: float) -> dict[str, Any]:
    """One host's result record, as the suite's records look."""
    nccl = launch.host.nccl
    parsed = parse_output(text)
    details: dict[str, Any] = {
        "node_rank": launch.node_rank,
        "nodes": launch.nnodes,
        "endpoint": launch.endpoint,
        "run_id": launch.run_id,
        "transports": parsed.transports,
        "net_devices": parsed.net_devices,
        "networks": parsed.networks,
        "nccl_lines": parsed.lines,
    }
    record: dict[str, Any] = {
        "name": NAME,
        "status": "pass",
        "reason": "",
        "value": None,
        "expected": nccl.expect.min_busbw_gbps,
        "unit": "GB/s",
        "seconds": round(seconds, 3),
        "env": launch.torchrun,
        "details": details,
    }
    report = parsed.report
    if report is not None:
        keys = ("group_rank", "world", "backend", "torch", "nccl", "device")
        details.update({k: report.get(k) for k in keys})
        details["inter"], details["intra"] = report.get("inter") or [], report.get("intra") or []
        if details["inter"]:
            record["value"] = details["inter"][-1]["busbw_gbps"]
    record["status"], record["reason"] = _verdict(launch, code, parsed, record["value"])
    return record


def _verdict(
    launch: Launch, code: int | None, parsed: NodeOutput, busbw: float | None
) -> tuple[str, str]:
    expect = launch.host.nccl.expect
    errors = list(dict.fromkeys(parsed.errors))
    said = " | ".join((errors or parsed.tail)[-2:])
    if code is None or code in (124, 137):
        return "fail", (
            f"torchrun did not finish within {launch.host.nccl.timeout:g} s and was stopped: "
            f"the {launch.nnodes} hosts did not all meet at the rendezvous {launch.endpoint}, "
            "or the all-reduce hung" + (f"; torchrun said: {said}" if errors else "")
        )
    if code in _WRAPPER_ERRORS:
        return "fail", _WRAPPER_ERRORS[code]
    report = parsed.report
    if report is None:
        return "fail", f"torchrun exited {code} (rendezvous {launch.endpoint}): {said or '-'}"
    if report.get("backend") != launch.host.nccl.backend:
        return "fail", f"ran {report.get('backend')}, not {launch.host.nccl.backend}"
    if not report.get("correct"):
        return "fail", "an all-reduce returned a wrong sum"
    seen = parsed.transports
    want = expect.transport
    if want is not None:
        names = {"nvlink": "p2p"}.get(want, want)
        if names not in seen:
            used = ", ".join(sorted(seen)) or "no transport named in NCCL's INFO lines"
            hint = " (NCCL fell back to sockets: check NCCL_IB_HCA and the IB devices)"
            return "fail", (
                f"NCCL used {used} where {want} was expected"
                + (hint if want == "ib" and "socket" in seen else "")
            )
        if want == "ib" and "socket" in seen:
            return "fail", "NCCL used sockets for some channels where ib was expected"
    if expect.min_busbw_gbps is not None and (busbw or 0.0) < expect.min_busbw_gbps:
        return "fail", f"bus bandwidth {busbw} GB/s is below the expected {expect.min_busbw_gbps}"
    if code != 0:
        # The report comes after the last barrier: the run is whole, torchrun's exit
        # (often the store's host leaving first) is a note.
        return "warn", f"torchrun exited {code} after the all-reduce finished: {said or '-'}"
    return "pass", ""


def refused(launch: Launch, reason: str, seconds: float) -> dict[str, Any]:
    """A host's failed record for a run it never started."""
    return grade(launch, 0, "", seconds) | {"status": "fail", "reason": reason}


def _private_folder() -> str:
    """A fresh 0700 folder for the store's socket on the controller; short, as a socket
    path must be."""
    base = tempfile.gettempdir()
    return tempfile.mkdtemp(prefix="gpunode-rdzv-", dir=base if len(base) <= 40 else "/tmp")


class Meeting:
    """Where the other hosts meet the first host's store: a unix socket on the controller,
    0600 in a 0700 folder, that the first host's connection forwards to the store."""

    def __init__(self, folder: str) -> None:
        self.socket = os.path.join(folder, "store")
        self._opened = threading.Event()
        self.problem = ""

    def open(self) -> None:
        self._opened.set()

    def fail(self, why: str) -> None:
        if not self._opened.is_set():
            self.problem = why
            self._opened.set()

    def wait(self, timeout: float) -> str:
        """ "" once the store can be reached, else why not."""
        if not self._opened.wait(timeout):
            return f"the first host's store did not start within {timeout:g} s"
        return self.problem


class NoRendezvous(Exception):
    """A host that could not reach the first host's store: its torchrun never started."""


def run_multinode(
    hosts: Sequence[Host],
    bus: Bus,
    *,
    opener: Opener | None = None,
    finish: bool = True,
    run_id: str | None = None,
) -> list[HostSmoke]:
    """Every host's torchrun at once; results in the order of `hosts`."""
    plan = {launch.host.name: launch for launch in launches(hosts, run_id)}
    blob = script_blob()
    folder = _private_folder()
    meeting = Meeting(folder)
    first = hosts[0]

    def run(transport: Transport, launch: Launch, seen: OutputCallback) -> int | None:
        """The host's command: its exit status, None when it ran out of time."""
        try:
            return transport.run(
                launch.command(),
                stdin=launch.stdin(blob),
                timeout=launch.host.nccl.timeout + 3 * STOP_GRACE,
                on_output=seen,
            ).exit_code
        except CommandTimeoutError:
            return None

    def hold_store(transport: Transport, launch: Launch, chunks: list[str]) -> Launch:
        """The first host: its launcher prints the store's port, then the controller's
        socket is forwarded to it and the others may come."""
        found: list[int] = []

        def seen(_stream: str, text: str) -> None:
            chunks.append(text)
            port = None if found else _STORE.search("".join(chunks))
            if port is None:
                return
            found.append(int(port.group(1)))
            try:
                transport.forward("to-host", meeting.socket, found[0])
                meeting.open()
            except TransportError as exc:
                meeting.fail(f"gpunode could not reach the store on {first.name}: {exc}")

        try:
            code = run(transport, launch, seen)
        finally:
            meeting.fail(f"torchrun on {first.name} ended before its store started")
        return replace(launch, port=found[0] if found else None, exit_code=code)

    def join(transport: Transport, launch: Launch, chunks: list[str]) -> Launch:
        """Another host: a port on its loopback forwarded to the first host's store."""
        why = meeting.wait(first.nccl.timeout)
        if why:
            raise NoRendezvous(why)
        try:
            launch = replace(launch, port=transport.forward("from-host", meeting.socket))
        except TransportError as exc:
            raise NoRendezvous(str(exc)) from None
        code = run(transport, launch, lambda _stream, text: chunks.append(text))
        return replace(launch, exit_code=code)

    def work(transport: Transport, host: Host) -> HostSmoke:
        launch, smoke, start = plan[host.name], HostSmoke(host.name), time.monotonic()
        bus.emit(HostStatusChanged(host.name, status="smoke"))
        chunks: list[str] = []
        try:
            launch = (hold_store if launch.node_rank == 0 else join)(transport, launch, chunks)
            record = grade(launch, launch.exit_code, "".join(chunks), time.monotonic() - start)
        except NoRendezvous as exc:
            record = refused(launch, f"no rendezvous: {exc}", time.monotonic() - start)
        except TransportError as exc:
            smoke.unreachable = f"connection lost during the all-reduce: {exc}"
        smoke.seconds = time.monotonic() - start
        if smoke.unreachable is None:
            smoke.results.append(record)
            bus.emit(SmokeResult(host.name, result=SmokeCheck.from_record(record)))
        return smoke

    kw: dict[str, Any] = {} if opener is None else {"opener": opener}
    try:
        outcomes = run_hosts(hosts, work, bus=bus, forks=len(hosts), **kw)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return [finished(h.name, outcomes[h.name], NAME, bus if finish else None) for h in hosts]
