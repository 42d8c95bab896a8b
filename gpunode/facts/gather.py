"""Gather a host's facts: one script, one `run`, no sudo."""

from __future__ import annotations

import re
import shlex
import time
from collections.abc import Iterable, Sequence
from functools import cache
from importlib import resources
from typing import TYPE_CHECKING

from gpunode.compat.driver import driver_names
from gpunode.compat.paths import measured
from gpunode.components import dpkg_patterns
from gpunode.events import Bus, FactsGathered, HostStatusChanged
from gpunode.facts.model import HostFacts
from gpunode.facts.parse import parse_facts
from gpunode.transport.base import Transport, TransportError

if TYPE_CHECKING:
    from gpunode.hostpool import Outcome
    from gpunode.inventory.model import Host
    from gpunode.transport.secret import Secret


_PLAIN_PATH = re.compile(r"/[A-Za-z0-9._+/*-]*")
_PACKAGE_PATTERN = re.compile(r"[a-z0-9][a-z0-9.+*-]*")


@cache
def script() -> bytes:
    return resources.files("gpunode.facts").joinpath("script.sh").read_bytes()


def facts_command(
    files: Iterable[str] = (),
    conda_prefixes: Iterable[str] = (),
    apt: Sequence[tuple[str, str]] = (),
    *,
    only_files: bool = False,
) -> str:
    """The command that runs script.sh, the script itself in the command; every argument
    quoted. Not fed on stdin: sshd opens a session channel's window only once the command
    has started, so stdin would wait one round trip for it (OpenSSH's larval channels).
    `apt`: the (--apt or --apt-kernel, package name) pairs whose versions the host's apt
    offers. `only_files`: the files' section alone (HostFacts.files and file_attrs).
    The filesystems of every path a package may write to (gpunode.compat.paths) are
    measured (HostFacts.disks); a glob there is the script's to expand."""
    argv = ["sh", "-c", script().decode(), "gpunode-facts"]
    if only_files:
        argv.append("--only-files")
    for pattern in () if only_files else dpkg_patterns():
        if not _PACKAGE_PATTERN.fullmatch(pattern):  # the script splits them on spaces
            raise ValueError(f"not a dpkg-query package pattern: {pattern!r}")
        argv += ["--package", pattern]
    for path in () if only_files else measured():
        if not _PLAIN_PATH.fullmatch(path):  # the script splits them on spaces
            raise ValueError(f"not a plain absolute path to measure: {path!r}")
        argv += ["--df", path]
    for prefix in conda_prefixes:
        argv += ["--conda", prefix]
    for path in files:
        argv += ["--file", path]
    for option, name in apt:
        argv += [option, name]
    return shlex.join(argv)


def apt_queries(host: Host | None) -> list[tuple[str, str]]:
    """Ubuntu's driver packages whose versions the plan needs (driver source: ubuntu)."""
    driver = host.stack.driver if host is not None else None
    if driver is None or driver.source != "ubuntu":
        return []
    names = driver_names(driver)
    return [("--apt", names.userspace), ("--apt-kernel", names.modules_prefix or "")]


def gather(
    transport: Transport,
    host: Host | None = None,
    *,
    files: Iterable[str] = (),
    timeout: float = 120.0,
) -> HostFacts:
    """One round trip: run script.sh on the host, parse its output into HostFacts.

    `files` are paths whose sha256 the caller wants (HostFacts.files). The host's
    declared conda prefix is searched as well as the common ones.
    """
    prefixes = []
    if host is not None and host.stack.conda is not None:
        prefixes.append(host.stack.conda.prefix)
    start = time.monotonic()
    command = facts_command(files, prefixes, apt_queries(host))
    res = transport.run(command, timeout=timeout)
    if "### end" not in res.stdout and not res.ok:
        raise TransportError(f"facts script failed (exit {res.exit_code}): {res.stderr.strip()}")
    facts = parse_facts(res.whole_stdout)  # a cut output is refused, never parsed
    facts.gather_seconds = round(time.monotonic() - start, 4)
    return facts


def gather_all(
    hosts: Sequence[Host],
    *,
    bus: Bus,
    forks: int | None = None,
    become_password: Secret | None = None,
    files: Iterable[str] = (),
) -> dict[str, Outcome[HostFacts]]:
    """Facts for every host in parallel; emits FactsGathered per host gathered."""
    from gpunode.hostpool import run_hosts

    wanted = tuple(files)

    def work(transport: Transport, host: Host) -> HostFacts:
        bus.emit(HostStatusChanged(host.name, status="gathering"))
        facts = gather(transport, host, files=wanted)
        bus.emit(
            FactsGathered(
                host.name, facts=facts.model_dump(mode="json"), seconds=facts.gather_seconds
            )
        )
        return facts

    return run_hosts(hosts, work, bus=bus, forks=forks, become_password=become_password)
