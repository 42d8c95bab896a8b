"""Every exit status of `gpunode`, with what it means: the one table the commands, the
`--help` epilog and the README share.

When the hosts of one run end differently, the status of the first that applies wins:
host key changed (5), then failed (2), then unreachable (4), then reboot pending (8);
`facts` and `smoke` rank 5, then 4, then 2.
"""

from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    OK = 0
    ERROR = 1
    FAILED = 2
    BAD_INPUT = 2  # the same status as FAILED: nothing was changed
    PENDING = 3
    UNREACHABLE = 4
    HOSTKEY = 5
    REBOOT_PENDING = 8
    INTERRUPTED = 130

    @property
    def meaning(self) -> str:
        return MEANINGS[self]


MEANINGS: dict[ExitCode, str] = {
    ExitCode.OK: "success, or nothing to do",
    ExitCode.ERROR: "an internal error or bad usage (no --yes outside a terminal, no such run)",
    ExitCode.FAILED: "bad input, a failed host or a refused stack",
    ExitCode.PENDING: "changes pending (plan --detailed-exitcode, no host failed)",
    ExitCode.UNREACHABLE: "a host unreachable",
    ExitCode.HOSTKEY: "a host's key changed or is revoked: refused before logging in",
    ExitCode.REBOOT_PENDING: "apply --no-reboot: converged but for a reboot some host needs",
    ExitCode.INTERRUPTED: "the terminal UI was quit before the run finished",
}


def table() -> list[tuple[int, str]]:
    """(status, meaning) for every distinct status, in numeric order."""
    return [(int(code), code.meaning) for code in sorted(ExitCode)]


def help_text() -> str:
    """The table as `gpunode --help` prints it (click keeps a `\\b` paragraph as is)."""
    rows = [f"  {code:>3}  {meaning}" for code, meaning in table()]
    return "\b\nExit status:\n" + "\n".join(rows)
