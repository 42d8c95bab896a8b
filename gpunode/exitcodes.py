"""Every exit status of `gpunode`, with what it means: the one table the commands, the
`--help` epilog and the README share, and the one ranking every command uses when its
hosts end differently.

When the hosts of one run end differently, the status of the first that applies wins:
host key changed (6), then a host failed (2), then unreachable (3), then locked by another
run (11), then refused or bad input (4), then reboot pending (8), then changes pending
(7), then (doctor) an error found (10), then a warning found (9), else 0.
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import IntEnum


class ExitCode(IntEnum):
    OK = 0
    ERROR = 1
    FAILED = 2
    UNREACHABLE = 3
    BAD_INPUT = 4
    USAGE = 5
    HOSTKEY = 6
    PENDING = 7
    REBOOT_PENDING = 8
    DOCTOR_WARNING = 9
    DOCTOR_ERROR = 10
    LOCKED = 11
    INTERRUPTED = 130
    PIPE_CLOSED = 141
    TERMINATED = 143

    @property
    def meaning(self) -> str:
        return MEANINGS[self]


MEANINGS: dict[ExitCode, str] = {
    ExitCode.OK: "success, or nothing to do",
    ExitCode.ERROR: "an internal error",
    ExitCode.FAILED: "a host failed",
    ExitCode.UNREACHABLE: "a host unreachable",
    ExitCode.BAD_INPUT: "bad inventory or input, or a refused stack: nothing was touched",
    ExitCode.USAGE: "bad usage: bad options, no --yes outside a terminal, unknown tag or run",
    ExitCode.HOSTKEY: "a host's key changed or is revoked: refused before logging in",
    ExitCode.PENDING: "changes pending (plan, apply --check: with --detailed-exitcode)",
    ExitCode.REBOOT_PENDING: "a reboot pending (apply --no-reboot)",
    ExitCode.DOCTOR_WARNING: "doctor found a warning on a host, and no error",
    ExitCode.DOCTOR_ERROR: "doctor found an error on a host",
    ExitCode.LOCKED: "another apply holds a host's lock or the inventory's: not touched",
    ExitCode.INTERRUPTED: "interrupted (Ctrl-C, or the terminal UI quit before the run ended)",
    ExitCode.PIPE_CLOSED: "its output was closed (a broken pipe: `apply --json` into `head`)",
    ExitCode.TERMINATED: "stopped by SIGTERM",
}

RANK: tuple[ExitCode, ...] = (
    ExitCode.HOSTKEY,
    ExitCode.FAILED,
    ExitCode.UNREACHABLE,
    ExitCode.LOCKED,
    ExitCode.BAD_INPUT,
    ExitCode.REBOOT_PENDING,
    ExitCode.PENDING,
    ExitCode.DOCTOR_ERROR,
    ExitCode.DOCTOR_WARNING,
)
"""Which status wins when hosts end differently: the first present here, else OK."""

HOST_STATUS: dict[str, ExitCode] = {
    "hostkey-changed": ExitCode.HOSTKEY,
    "failed": ExitCode.FAILED,
    "unreachable": ExitCode.UNREACHABLE,
    "locked": ExitCode.LOCKED,
    "refused": ExitCode.BAD_INPUT,
    "reboot-pending": ExitCode.REBOOT_PENDING,
    "pending": ExitCode.PENDING,
}
"""A host's final status as the exit status it calls for; any other status is OK."""


def worst(codes: Iterable[int]) -> ExitCode:
    """The status of a run whose hosts ended with `codes`, ranked by RANK."""
    present = set(codes)
    return next((code for code in RANK if code in present), ExitCode.OK)


def exit_code_for(statuses: Iterable[str]) -> ExitCode:
    """The run's status from its hosts' final statuses ("failed", "unreachable"...)."""
    return worst(HOST_STATUS.get(status, ExitCode.OK) for status in statuses)


def table() -> list[tuple[int, str]]:
    """(status, meaning) for every distinct status, in numeric order."""
    return [(int(code), code.meaning) for code in sorted(ExitCode)]


def help_text() -> str:
    """The table as `gpunode --help` prints it (click keeps a `\\b` paragraph as is)."""
    rows = [f"  {code:>3}  {meaning}" for code, meaning in table()]
    return "\b\nExit status:\n" + "\n".join(rows)
