"""A host in memory that answers gpunode's commands as a real one does, for the executor's
state machine in the fast tier (tests/execute/test_machine.py).

Its facts are a real host's: tests/fixtures/facts/h200x2-ubuntu2404/facts-assembled.txt
(script.sh's sections, as captured on a 2x H200 Ubuntu 24.04 host) with the os-release
section that host's `gpunode facts` reported (tests/fixtures/hardware/h200x2/facts.json) and
the fake's own boot id. Beside the facts it answers the host lock's commands (as
hostlock.take_command's script prints), the roles' probes (`test -e PATH`, `test ! -e PATH`),
a reboot (a new boot id; the host does not answer for `down` polls) and the boot id poll,
and runs a change's own command (inside the step journal's shell) as far as `touch PATH`
and `exit N` go, and ends a journal entry. Anything else it was asked fails the test:
the fake never guesses.
"""

from __future__ import annotations

import re
import shlex
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from gpunode.execute import host as hostrun
from gpunode.execute import hostlock, journal
from gpunode.execute.readhost import MARK
from gpunode.transport.base import CommandResult, HostUnreachableError

FIX = Path(__file__).parent.parent / "fixtures"
CAPTURE = FIX / "facts" / "h200x2-ubuntu2404" / "facts-assembled.txt"
OS_RELEASE = (  # as /etc/os-release says it on that host (its facts.json: ubuntu 24.04 noble)
    'PRETTY_NAME="Ubuntu 24.04.3 LTS"\nNAME="Ubuntu"\nVERSION_ID="24.04"\n'
    "VERSION_CODENAME=noble\nID=ubuntu\nID_LIKE=debian\n"
)
_PROBE = re.compile(r"^\( (.*) \) </dev/null >/dev/null 2>&1; echo (\S+) \$\?$", re.M)
_STEP = re.compile(r"\(\n(.*)\n\)\nrc=\$\?\n", re.S)  # journal.commands: the step's own


class FakeHost:
    name = "fake"
    inactivity_timeout: float | None = 30.0

    def __init__(self) -> None:
        self.paths: set[str] = set()
        self.boot = str(uuid.uuid4())
        self.down = 0
        """Boot id polls the host leaves unanswered after a reboot (it is booting)."""
        self.connections_opened = 1
        self.asked: list[str] = []
        """Every command, as the host received it."""
        self.ran: list[str] = []
        """The changes' own commands, in the order the host ran them."""
        self.on_change: Callable[[str], None] = lambda command: None
        """Called as a change's command runs (a test's Ctrl-C goes here)."""

    # -- the transport --------------------------------------------------------------------

    def connect(self) -> None:
        if self.down:
            self.down -= 1
            raise HostUnreachableError("connection refused (booting)")

    def close(self) -> None:
        pass

    def get(self, path: str, *, sudo: bool = False) -> bytes:
        raise AssertionError(f"the fake host holds no file contents ({path})")

    def forward(self, *args: Any) -> int:
        raise AssertionError("no forwarding here")

    def run(
        self, command: str | Sequence[str], *, sudo: bool = False, stdin: bytes | None = None,
        timeout: float | None = None, on_output: Any = None, env: Any = None,
    ) -> CommandResult:  # fmt: skip
        text = command if isinstance(command, str) else shlex.join(command)
        self.asked.append(text)
        out, code = self._answer(text)
        return CommandResult(text, code, out, "", 0.0)

    # -- what it answers ------------------------------------------------------------------

    def facts(self) -> str:
        text = CAPTURE.read_text()
        text = re.sub(r"(### boot-id\n)[^\n]*", rf"\g<1>{self.boot}", text)
        return text.replace("### kernel\n", f"### os-release\n{OS_RELEASE}### kernel\n", 1)

    def _answer(self, text: str) -> tuple[str, int]:
        if "gpunode-facts" in text:
            probes = "".join(f"{key} {self._probe(cmd)}\n" for cmd, key in _PROBE.findall(text))
            return self.facts() + (f"\n{MARK}\n{probes}" if MARK in text else ""), 0
        if hostlock.LOCK_DIR in text:
            said = "lock: taken" if "lock: taken" in text else "lock: released"
            return f"boot-now={self.boot}\nuptime=100.0\n{said}\n", 0
        if text == hostrun.REBOOT:
            self.boot, self.down = str(uuid.uuid4()), 2
            return "", 0
        if text == hostrun.BOOT_ID:
            return self.boot + "\n", 0
        if text == "id -u":
            return "0\n", 0
        if text.startswith(f"rm -f -- {journal.JOURNAL_DIR}/"):  # a failed change's entry ended
            return "", 0
        step = _STEP.search(text)
        own = step.group(1) if step else text
        return "", self._change(own)

    def _probe(self, command: str) -> int:
        words = shlex.split(command)
        if words[:2] == ["test", "-e"]:
            return 0 if words[2] in self.paths else 1
        if words[:3] == ["test", "!", "-e"]:
            return 1 if words[3] in self.paths else 0
        raise AssertionError(f"the fake host cannot answer the probe {command!r}")

    def _change(self, command: str) -> int:
        self.ran.append(command)
        self.on_change(command)
        words = shlex.split(command)
        if words[:1] == ["touch"]:
            self.paths.update(words[1:])
            return 0
        if words[:1] == ["exit"]:
            return int(words[1])
        if words == ["true"]:
            return 0
        raise AssertionError(f"the fake host cannot run {command!r}")
