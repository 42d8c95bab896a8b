"""A host's way to converged: facts -> plan -> changes -> reboot -> plan again.

The decisions alone, over the steps a `HostSteps` makes (execute/host.py's HostRun, over a
transport): when to stop (a refused or unconfirmed plan, a failed change, Ctrl-C), when to
plan again (the repository's versions on the host, after a reboot, after the changes), when
to reboot, and when a host that keeps asking for what this boot already made is taken for
one that never converges. tests/execute/test_machine.py drives it on a fake host.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from gpunode.changes import HostPlan
from gpunode.execute.result import HostResult

if TYPE_CHECKING:
    from gpunode.facts.model import HostFacts

REPLANS = 5
"""Plans after a run's changes, each of them making only changes not made yet, before the
host is taken for one that never settles."""


class HostSteps(Protocol):
    """What the machine asks of a host: each step reads or acts, emits its events and says
    whether it went well (a step that fails has already failed the host, saying why)."""

    result: HostResult
    after_disrupt: str | None
    reboot_instead: str | None

    def read(self, *, apply: bool = False, verify: bool = False) -> tuple[HostFacts, HostPlan]:
        """Facts and plan (`apply`: for converging; `verify`: after changes)."""
        ...

    def check_only(self, plan: HostPlan) -> None: ...

    def unconfirmed(self, plan: HostPlan) -> bool:
        """The plan asks for what the admin did not confirm: the host is stopped."""
        ...

    def apply(self, plan: HostPlan, facts: HostFacts) -> bool: ...

    def apt_update(self, facts: HostFacts) -> bool: ...

    def reboot(self, reason: str, facts: HostFacts) -> bool: ...

    def reboot_pending(self, reason: str) -> None: ...

    def stopped(self, before: str) -> bool:
        """The run was asked to stop: the host is "interrupted" before `before`."""
        ...

    def smoke(self) -> None: ...

    def hook(self, name: str, shell: str) -> bool: ...

    def fail(self, message: str) -> None: ...


class Machine:
    """Converge one host through its steps; `run` leaves the outcome in `steps.result`."""

    def __init__(self, steps: HostSteps, *, check: bool, no_reboot: bool, smoke: bool) -> None:
        self.s = steps
        self.check = check
        self.no_reboot = no_reboot
        self.smoke = smoke
        self.read_at = 0
        """len(result.changes) when the host was last read: the changes made since come after."""
        self.boot_at = 0
        """len(result.changes) at the last reboot: the changes this boot has seen made."""

    def _read(self, *, apply: bool = True, verify: bool = False) -> tuple[HostFacts, HostPlan]:
        self.read_at = len(self.s.result.changes)
        return self.s.read(apply=apply, verify=verify)

    def run(self) -> None:
        s, result = self.s, self.s.result
        facts, plan = self._read(apply=not self.check)
        if plan.refused:
            s.fail(f"refused: {plan.refused}")
            result.refused = True  # nothing was changed yet
            return
        if self.check:
            s.check_only(plan)
            return
        if s.unconfirmed(plan) or not s.apply(plan, facts):
            return
        if plan.versions_on_host:
            # The repository was configured just now: refresh apt, then plan the rest.
            if not s.apt_update(facts):
                return
            facts, plan = self._read()
            if plan.refused or plan.versions_on_host:
                names = ", ".join(plan.versions_on_host)
                s.fail(f"refused: {plan.refused or 'the host offers no versions of ' + names}")
                return
            if not s.apply(plan, facts):
                return
        reason = s.reboot_instead or (plan.changes[-1].reason if plan.needs_reboot else "")
        s.reboot_instead = None
        if reason and self.no_reboot:
            s.reboot_pending(reason)
            return  # after_disrupt waits for the reboot: the host stays drained until then
        if reason:
            if s.stopped("its reboot") or not s.reboot(reason, facts):
                return
            self.boot_at = len(result.changes)  # a boot may undo what the last one kept
            facts, plan = self._read()
            if plan.refused:
                s.fail(f"refused after the reboot: {plan.refused}")
                return
            if plan.needs_reboot:
                s.fail(f"still needs a reboot after rebooting: {plan.changes[-1].reason}")
                return
            if not s.apply(plan, facts):
                return
        if self.smoke and s.stopped("its smoke tests"):
            return
        if not self.converged():
            return
        result.status = "changed" if result.changed else "ok"
        if self.smoke:
            s.smoke()
        if s.after_disrupt is not None and result.status in ("ok", "changed"):
            s.hook("after_disrupt", s.after_disrupt)

    def converged(self) -> bool:
        """Read the host again after the changes made since it was last read (none: no round
        trip). A change this boot has seen made that the plan asks for again does not
        converge: the host fails, naming it. A change not made yet is made, and read again."""
        s, result = self.s, self.s.result
        for _ in range(REPLANS):
            if not any(r.status == "changed" for r in result.changes[self.read_at :]):
                return True
            facts, plan = self._read(verify=True)
            if plan.refused:
                s.fail(f"refused after its changes: {plan.refused}")
                return False
            made = {k for r in result.changes[self.boot_at :] if r.status == "changed"
                    for k in parts(r.role, r.title)}  # fmt: skip
            again = [c for c in plan.changes if parts(c.role, c.title) & made]
            if again:
                said = "; ".join(f"{c.title} ({c.reason})" for c in again)
                s.fail(f"does not converge: {said}")
                return False
            if not s.apply(plan, facts):
                return False
            if plan.needs_reboot:  # found only after the changes: the next apply reboots
                s.reboot_pending(plan.changes[-1].reason)
                return False
        s.fail(f"does not converge: still changing after {REPLANS} plans")
        return False


def parts(role: str, title: str) -> set[tuple[str, str]]:
    """(role, task) of each task a change does: one apt transaction may join several
    ("driver+cuda_toolkit: NVIDIA driver ...; CUDA toolkit 12.4")."""
    task = title.removeprefix(f"{role}: ") if role else title
    return {(r, t) for r in role.split("+") for t in task.split("; ")}
