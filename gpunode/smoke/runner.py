"""Ship the smoke suite to a host, run it there, and turn its JSON lines into events.

One session per host: the suite travels as a base64 tar inside the command (not on
stdin, which sshd would let through only a round trip after the command started) into a
temporary folder, the host's python3 runs `driver.py`, and every JSON line
that comes back is graded (`expected.grade_result`) and published as a
`SmokeResult` while the rest still runs. Results are also returned as data so
that run records can keep them.
"""

from __future__ import annotations

import base64
import io
import json
import tarfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from typing import Any, Literal

from gpunode.components import SMOKE_TESTS, SUITE_TESTS, component_of
from gpunode.events import (
    Bus,
    HostFinished,
    HostStatusChanged,
    HostUnreachable,
    SmokeCheck,
    SmokeResult,
)
from gpunode.hostpool import Opener, Outcome, run_hosts
from gpunode.inventory.model import Host
from gpunode.smoke.expected import grade_result
from gpunode.transport.base import (
    CommandTimeoutError,
    HostUnreachableError,
    Transport,
    TransportError,
    quote,
)

TEST_TIMEOUT = 300.0  # one test on the host; the suite as a whole is meant to take < 1 min
SUITE_TIMEOUT = 1200.0

# Exit codes of the shell wrapper, before the driver runs.
_WRAPPER_ERRORS = {
    97: "could not make a temporary folder on the host (mktemp failed)",
    98: "could not unpack the suite on the host (base64 or tar failed)",
    99: "no python3 on the host: the suite needs the system python3",
}


@dataclass
class HostSmoke:
    """What the suite found on one host; `results` are graded, as the events carried them."""

    host: str
    results: list[dict[str, Any]] = field(default_factory=list)
    unreachable: str | None = None
    seconds: float = 0.0

    @property
    def failed(self) -> bool:
        return any(r.get("status") == "fail" for r in self.results)

    @property
    def status(self) -> Literal["ok", "failed", "unreachable"]:
        if self.unreachable is not None:
            return "unreachable"
        return "failed" if self.failed else "ok"

    def counts(self) -> dict[str, int]:
        out = {"pass": 0, "warn": 0, "fail": 0, "skip": 0}
        for r in self.results:
            status = str(r.get("status"))
            out[status] = out.get(status, 0) + 1
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> HostSmoke:
        """Back from `to_json` (run records, fixtures)."""
        return cls(
            host=str(data["host"]),
            results=list(data.get("results") or []),
            unreachable=data.get("unreachable"),
            seconds=float(data.get("seconds") or 0.0),
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "host": self.host,
            "status": self.status,
            "unreachable": self.unreachable,
            "seconds": round(self.seconds, 3),
            "counts": self.counts(),
            "results": self.results,
        }


def suite_files() -> dict[str, bytes]:
    """The scripts that run on the host, by file name, and the declaration of the tests
    (gpunode/components.py), which the driver reads there."""
    root = resources.files("gpunode.smoke.suite")
    files = {
        entry.name: entry.read_bytes()
        for entry in root.iterdir()
        if entry.is_file() and entry.name.endswith((".py", ".cu")) and entry.name != "__init__.py"
    }
    files["components.py"] = resources.files("gpunode").joinpath("components.py").read_bytes()
    return files


def suite_blob() -> bytes:
    """The suite as a gzipped tar, base64: text that survives any stdin."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name, data in sorted(suite_files().items()):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mode = 0o644
            tar.addfile(info, io.BytesIO(data))
    return base64.encodebytes(buf.getvalue())


@cache
def suite_text() -> str:
    """The suite blob as one line, to go inside a command."""
    return suite_blob().decode().replace("\n", "")


def selected_tests(host: Host, only: Sequence[str] = ()) -> list[str]:
    """`--only` wins; else the host's `stack.smoke`; else the default tests: those selected
    always, and those of the components the stack declares (gpunode.components)."""
    default = [
        t.name
        for t in SMOKE_TESTS
        if t.selected == "always"
        or (t.selected == "declared" and getattr(host.stack, component_of(t.name).field))
    ]
    chosen = list(only) or list(host.stack.smoke) or default
    unknown = [t for t in chosen if t not in SUITE_TESTS]
    if unknown:
        raise ValueError(f"unknown smoke tests {unknown}: choose from {', '.join(SUITE_TESTS)}")
    return list(dict.fromkeys(chosen))


def suite_command(
    tests: Sequence[str],
    *,
    gpu_count: int | None = None,
    conda_prefix: str | None = None,
    pythons: Sequence[str] = (),
    test_timeout: float = TEST_TIMEOUT,
    container_image: str | None = None,
) -> str:
    """The shell text that unpacks the suite (base64 text in the command) and runs the driver."""
    args = ["--tests", ",".join(tests), "--timeout", f"{test_timeout:g}"]
    if gpu_count is not None:
        args += ["--count", str(gpu_count)]
    if conda_prefix:
        args += ["--conda-prefix", conda_prefix]
    for python in pythons:
        args += ["--python", python]
    if container_image:
        args += ["--image", container_image]
    driver_args = " ".join(quote(a) for a in args)
    return (
        'd=$(mktemp -d "${TMPDIR:-/tmp}/gpunode-smoke.XXXXXX") || exit 97; '
        "trap 'rm -rf \"$d\"' EXIT; "
        f"printf '%s' {quote(suite_text())} | base64 -d | tar -xzf - -C \"$d\" || exit 98; "
        "py=$(command -v python3) || exit 99; "
        f'"$py" "$d/driver.py" {driver_args}'
    )


class _Lines:
    """Reassemble JSON lines from output chunks; grade and publish each as it completes."""

    def __init__(self, host: Host, bus: Bus | None, smoke: HostSmoke) -> None:
        self._host, self._bus, self._smoke = host, bus, smoke
        self._buf = ""

    def feed(self, stream: str, text: str) -> None:
        if stream != "stdout":
            return
        self._buf += text
        *lines, self._buf = self._buf.split("\n")
        for line in lines:
            self._line(line)

    def flush(self) -> None:
        if self._buf.strip():
            self._line(self._buf)
        self._buf = ""

    def _line(self, line: str) -> None:
        try:
            record = json.loads(line)
        except ValueError:
            return
        if isinstance(record, dict) and "name" in record and "status" in record:
            self.add(record)

    def add(self, record: dict[str, Any]) -> None:
        graded = grade_result(record, self._host.gpus.model)
        self._smoke.results.append(graded)
        if self._bus is not None:
            self._bus.emit(SmokeResult(self._host.name, result=SmokeCheck.from_record(graded)))


def _failure(name: str, reason: str) -> dict[str, Any]:
    return {
        "name": name,
        "status": "fail",
        "reason": reason,
        "value": None,
        "expected": None,
        "unit": "",
        "seconds": 0.0,
        "env": "-",
        "details": {},
    }


def smoke_host(
    host: Host,
    transport: Transport,
    bus: Bus | None = None,
    *,
    only: Sequence[str] = (),
    pythons: Sequence[str] = (),
    test_timeout: float = TEST_TIMEOUT,
) -> HostSmoke:
    """Run the suite on one host over `transport`, which the caller connected or will close."""
    start = time.monotonic()
    smoke = HostSmoke(host.name)
    lines = _Lines(host, bus, smoke)
    if bus is not None:
        bus.emit(HostStatusChanged(host.name, status="smoke"))
    conda = host.stack.conda
    command = suite_command(
        selected_tests(host, only),
        gpu_count=host.gpus.count,
        conda_prefix=conda.prefix if conda is not None else None,
        pythons=pythons,
        test_timeout=test_timeout,
        container_image=host.stack.containers.image if host.stack.containers else None,
    )
    try:
        transport.connect()
        res = transport.run(command, timeout=SUITE_TIMEOUT, on_output=lines.feed)
    except HostUnreachableError as exc:
        smoke.unreachable = str(exc) or type(exc).__name__
        if bus is not None:
            bus.emit(HostUnreachable(host.name, reason=smoke.unreachable))
    except CommandTimeoutError:
        lines.flush()
        lines.add(_failure("smoke", f"the suite did not finish within {SUITE_TIMEOUT:g} s"))
    except TransportError as exc:
        lines.flush()
        smoke.unreachable = f"connection lost during the suite: {exc}"
        if bus is not None:
            bus.emit(HostUnreachable(host.name, reason=smoke.unreachable))
    else:
        lines.flush()
        if res.exit_code != 0:
            said = " | ".join(res.stderr.strip().splitlines()[-5:])
            why = _WRAPPER_ERRORS.get(res.exit_code, f"the suite's driver exited {res.exit_code}")
            lines.add(_failure("smoke", f"{why}: {said}" if said else why))
    smoke.seconds = time.monotonic() - start
    return smoke


def smoke_hosts(
    hosts: Sequence[Host],
    bus: Bus,
    *,
    only: Sequence[str] = (),
    pythons: Sequence[str] = (),
    forks: int | None = None,
    opener: Opener | None = None,
) -> list[HostSmoke]:
    """Every host in parallel (`forks` at a time); results in the order of `hosts`."""

    def work(transport: Transport, host: Host) -> HostSmoke:
        return smoke_host(host, transport, bus, only=only, pythons=pythons)

    if opener is None:
        outcomes = run_hosts(hosts, work, bus=bus, forks=forks)
    else:
        outcomes = run_hosts(hosts, work, bus=bus, forks=forks, opener=opener)
    return [finished(host.name, outcomes[host.name], "smoke", bus) for host in hosts]


def finished(name: str, o: Outcome[HostSmoke], test: str, bus: Bus | None) -> HostSmoke:
    """A host's smoke results from its outcome (an unreachable host, or a run that failed as
    a whole, as the result `test`); with `bus`, its HostFinished goes out."""
    smoke = o.value if o.value is not None else HostSmoke(name, seconds=o.seconds)
    if o.status == "unreachable":
        smoke.unreachable = o.error
    elif o.status == "failed":
        smoke.results.append(_failure(test, o.error))
    if bus is not None:
        c = smoke.counts()
        bus.emit(
            HostFinished(
                name,
                status=smoke.status,
                ok=c["pass"],
                failed=c["fail"],
                seconds=smoke.seconds,
                message=smoke.unreachable or "",
            )
        )
    return smoke
