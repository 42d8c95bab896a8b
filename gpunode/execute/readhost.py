"""Read a host in one round trip: the facts script, then the roles' probes, in one command."""

from __future__ import annotations

import shlex
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from gpunode.facts.gather import facts_command
from gpunode.facts.model import HostFacts
from gpunode.facts.parse import parse_facts
from gpunode.transport.base import Transport, TransportError

if TYPE_CHECKING:  # not the package: its operations are the planner's (execute/warm.py)
    from gpunode.roles.probe import Probe

MARK = "### gpunode-probes"


def probe_script(probes: Sequence[Probe]) -> str:
    # Each probe runs with no stdin and silenced output; only its exit status is kept.
    lines = [f"printf '\\n%s\\n' {shlex.quote(MARK)}"]
    for p in probes:
        lines.append(f"( {p.command} ) </dev/null >/dev/null 2>&1; echo {p.key} $?")
    return "\n".join(lines)


def held(command: str, beat: int | None = None) -> str:
    """`command` with its stdout kept on the host and written at its end, in one piece: the
    facts script and the probes print a few lines at a time, and each write the host's sshd
    reads became an SSH packet (about 50 for one read) that the controller decrypts, checks
    and hands over in Python. The exit status and every byte are kept (`.` guards the
    trailing newlines that `$(...)` drops); stderr is not held.

    `beat`: while the command runs, a newline on stderr every `beat` seconds, so that a
    slow read still speaks within ssh.inactivity_timeout as its streamed lines did (a
    silent host is still one); a read shorter than `beat` prints none. The ticker's own
    sleep holds none of the session's pipes: the command ends when it ends."""
    hold = f"gpunode_out=$(\n{command}\ngpunode_rc=$?; echo .; exit $gpunode_rc\n); gpunode_rc=$?\n"
    if beat is not None:
        tick = max(1, int(beat))
        hold = (
            f"( while sleep {tick} </dev/null >/dev/null 2>&1; do echo >&2; done ) "
            "</dev/null >/dev/null & gpunode_beat=$!\n"
            f"{hold}kill $gpunode_beat 2>/dev/null\n"
        )
    return hold + 'printf %s "${gpunode_out%.}"; exit $gpunode_rc'


def read_host(
    transport: Transport,
    *,
    files: Sequence[str] = (),
    conda_prefixes: Sequence[str] = (),
    probes: Sequence[Probe] = (),
    timeout: float = 120.0,
    apt: Sequence[tuple[str, str]] = (),
    only_files: bool = False,
    sudo: bool = False,
) -> tuple[HostFacts, dict[str, bool]]:
    """`only_files`: the second, rarer, read: the files and probes named once the facts were
    known, without the facts script's other sections. `sudo` (only with `only_files` and no
    probes, which never run as root): files only root may read, their sha256 and stat."""
    if sudo and (probes or not only_files):
        raise ValueError("as root, only files' hashes are read")
    command = facts_command(files, conda_prefixes, apt, only_files=only_files)
    if probes:
        command = f"{command}\n{probe_script(probes)}"
    idle = transport.inactivity_timeout
    command = held(command, None if idle is None else max(1, int(idle / 3)))
    start = time.monotonic()
    res = transport.run(command, sudo=sudo, timeout=timeout)
    text, _, tail = res.whole_stdout.partition(f"\n{MARK}\n")
    if "### end" not in text and not res.ok:
        raise TransportError(f"facts script failed (exit {res.exit_code}): {res.stderr.strip()}")
    facts = parse_facts(text)
    facts.gather_seconds = round(time.monotonic() - start, 4)
    results: dict[str, bool] = {}
    for line in tail.splitlines():
        key, _, code = line.partition(" ")
        if code.strip().isdigit():
            results[key] = code.strip() == "0"
    return facts, results
