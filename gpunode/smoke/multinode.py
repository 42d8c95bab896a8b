"""nccl-multinode: one torchrun per host, an all-reduce across them, graded per host.

torchrun is the engine: gpunode only starts it on every host at once (the
same --nnodes, --rdzv-endpoint and --rdzv-id, each host its --node-rank),
bounds it with `timeout` (which stops torchrun's whole process group), and
reads back what the script printed (`GPUNODE-NCCL {json}`) and which
transports NCCL's INFO lines say it chose.
"""

from __future__ import annotations

import base64
import contextlib
import json
import re
import secrets
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

from gpunode.events import Bus, HostStatusChanged, SmokeCheck, SmokeResult
from gpunode.hostpool import Opener, run_hosts
from gpunode.inventory.model import Host
from gpunode.smoke.runner import HostSmoke, finished
from gpunode.transport.base import CommandTimeoutError, Transport, TransportError, quote

NAME = "nccl-multinode"
SCRIPT = "nccl_multinode.py"
MARK = "GPUNODE-NCCL "
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
# An exception as Python prints it ("[rank0]: RuntimeError: ...", "...DistNetworkError: ...").
_ERROR = re.compile(r"\w(Error|Exception): ")
_WRAPPER_ERRORS = {
    94: "no executable torchrun in nccl.bin on the host",
    95: "no torchrun on the host's PATH: set nccl.bin (the folder of torchrun)",
    96: "no `timeout` on the host (coreutils)",
    97: "could not make a temporary folder on the host (mktemp failed)",
    98: "could not unpack the all-reduce script on the host",
}


@dataclass(frozen=True)
class Launch:
    """One host's part of the run: its torchrun and where it meets the others."""

    host: Host
    node_rank: int
    nnodes: int
    nproc: int
    endpoint: str
    run_id: str

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
        nccl = self.host.nccl
        sizes = ",".join(str(s) for s in nccl.sizes_mib)
        return [
            self.torchrun,
            f"--nnodes={self.nnodes}",
            f"--nproc-per-node={self.nproc}",
            f"--node-rank={self.node_rank}",
            "--rdzv-backend=c10d",
            f"--rdzv-endpoint={self.endpoint}",
            f"--rdzv-id={self.run_id}",
            "--max-restarts=0",
            *([f"--local-addr={nccl.local_addr}"] if nccl.local_addr else []),
            "SCRIPT",
            f"--sizes-mib={sizes}",
            f"--backend={nccl.backend}",
        ]

    def command(self) -> str:
        """The shell text: unpack the script from stdin, run torchrun under `timeout`."""
        nccl = self.host.nccl
        env = {"NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "INIT,NET", "PYTHONUNBUFFERED": "1"}
        env |= {k: str(v) for k, v in nccl.env.items()}
        assigns = " ".join(f"{k}={quote(v)}" for k, v in env.items())
        argv = " ".join('"$d/' + SCRIPT + '"' if a == "SCRIPT" else quote(a) for a in self.argv())
        find = (
            "command -v torchrun >/dev/null || exit 95; "
            if self.torchrun == "torchrun"
            else f"test -x {quote(self.torchrun)} || exit 94; "
        )
        return (
            'd=$(mktemp -d "${TMPDIR:-/tmp}/gpunode-nccl.XXXXXX") || exit 97; '
            "trap 'rm -rf \"$d\"' EXIT; "
            f'base64 -d > "$d/{SCRIPT}" || exit 98; '
            "command -v timeout >/dev/null || exit 96; "
            f"{find}"
            f"env {assigns} timeout -k {STOP_GRACE} {nccl.timeout:g} {argv} 2>&1"
        )


def launches(hosts: Sequence[Host], run_id: str | None = None) -> list[Launch]:
    """Every host's launch: the first host is node 0 and holds the rendezvous."""
    first = hosts[0]
    rdzv_host = first.nccl.rendezvous_host or first.address or "127.0.0.1"
    run_id = run_id or f"gpunode-{secrets.token_hex(6)}"
    out = []
    for rank, host in enumerate(hosts):
        where = host.nccl.rendezvous_host or rdzv_host
        where = f"[{where}]" if ":" in where else where
        nproc = host.nccl.nproc_per_node or host.gpus.count or 1
        endpoint = f"{where}:{host.nccl.rendezvous_port}"
        out.append(Launch(host, rank, len(hosts), nproc, endpoint, run_id))
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

    def work(transport: Transport, host: Host) -> HostSmoke:
        launch, smoke, start = plan[host.name], HostSmoke(host.name), time.monotonic()
        bus.emit(HostStatusChanged(host.name, status="smoke"))
        chunks: list[str] = []
        code: int | None = None
        try:
            res = transport.run(
                launch.command(),
                stdin=blob,
                timeout=host.nccl.timeout + 3 * STOP_GRACE,
                on_output=lambda _stream, text: chunks.append(text),
            )
            code = res.exit_code
        except CommandTimeoutError:
            code = None
        except TransportError as exc:
            smoke.unreachable = f"connection lost during the all-reduce: {exc}"
        smoke.seconds = time.monotonic() - start
        if smoke.unreachable is None:
            record = grade(launch, code, "".join(chunks), smoke.seconds)
            smoke.results.append(record)
            bus.emit(SmokeResult(host.name, result=SmokeCheck.from_record(record)))
        return smoke

    kw: dict[str, Any] = {} if opener is None else {"opener": opener}
    outcomes = run_hosts(hosts, work, bus=bus, forks=len(hosts), **kw)
    return [finished(h.name, outcomes[h.name], NAME, bus if finish else None) for h in hosts]
