"""Changes a host began and never ended (its step journal, `HostFacts.journal`): each is
run again, whole, at its place in the plan, whatever the facts say.

A change whose tail was cut (ldconfig after its ld.so.conf file, the initramfs after the
nouveau blacklist, the hold record after `apt-mark hold`) leaves facts that look
converged; only the journal knows it stopped. When the plan has the same change (same
role and task) that one is kept, with the journal's reason; otherwise the journal's own
commands run again, each stdin read back from the host's root-only copy.
"""

from __future__ import annotations

import shlex
from collections.abc import Collection, Mapping
from dataclasses import replace

from gpunode.changes import Change, Step
from gpunode.facts.model import HostFacts, JournalEntry
from gpunode.roles.ops.apt import record_holds_step
from gpunode.roles.tags import selected

HOLD = "apt-mark hold -- "
_LAST = 1e9  # checks before the reboot and module reloads: after every other change


def ordinal(n: int) -> str:
    tens = n % 100
    suffix = "th" if 10 <= tens <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def reason(e: JournalEntry) -> str:
    return f"interrupted at its {ordinal(e.reached)} command in run {e.run}"


def _holds(e: JournalEntry) -> set[str]:
    """The packages the change's `apt-mark hold` names."""
    return {
        n
        for s in e.steps
        if s.command.startswith(HOLD)
        for n in shlex.split(s.command[len(HOLD) :])
    }


def held_by_journal(facts: HostFacts) -> list[str]:
    """Packages that a begun change's `apt-mark hold` held (dpkg says held) and that the
    hold record does not list: gpunode's holds, whose record was cut off."""
    named = {n for e in facts.journal for n in _holds(e)}
    return sorted(
        n
        for n in named
        if (p := facts.packages.get(n)) is not None and p.held and n not in facts.gpunode_holds
    )


def with_journal_holds(facts: HostFacts) -> HostFacts:
    """The facts with `held_by_journal` among gpunode's holds: never taken for the admin's."""
    lost = held_by_journal(facts)
    if not lost:
        return facts
    return facts.model_copy(update={"gpunode_holds": sorted({*facts.gpunode_holds, *lost})})


def rebuilt(e: JournalEntry) -> Change:
    """The change as the journal has it; a command fed on stdin is fed the host's copy."""
    steps = tuple(
        Step(f"{{ {s.command}\n}} < {shlex.quote(e.stdin_path(n))}" if s.stdin else s.command)
        for n, s in enumerate(e.steps, 1)
    )
    return Change(
        e.role,
        e.task,
        e.op,
        reason(e),
        steps,
        apt=e.apt,
        long_running=e.long_running,
        before_reboot=e.before_reboot,
        reload=e.reload,
        tags=tuple(e.tags),
    )


def put_back(
    ordered: list[Change],
    facts: HostFacts,
    walked: Mapping[tuple[str, str], int],
    *,
    tags: Collection[str] | None = None,
    skip_tags: Collection[str] | None = None,
    roles: Collection[str] | None = None,
) -> list[Change]:
    """`ordered` (the plan's changes, in order) with every begun change put back.

    `walked`: each (role, task title) the roles walked, in order: a change's place. A
    change of the plan with the journal's role and task keeps its commands and takes the
    journal's reason, with the holds the record lost recorded again; others are the
    journal's, put before the first change walked after them (first of all when their
    task is walked no more, after an interrupted dpkg run's repair; checks and reloads
    just before the reboot)."""
    out = list(ordered)
    lost = held_by_journal(facts)
    for e in facts.journal:
        if roles is not None and not set(e.role.split("+")) & set(roles):
            continue
        if (tags or skip_tags) and not selected(tuple(e.tags), tags, skip_tags):
            continue
        same = next((i for i, c in enumerate(out) if (c.role, c.task) == (e.role, e.task)), None)
        if same is not None:
            c = out[same]
            out[same] = replace(c, reason=reason(e), steps=_recording(c, e, lost))
            continue
        change = rebuilt(e)
        at = _place(change, walked)
        i = next((i for i, c in enumerate(out) if _place(c, walked) > at), len(out))
        out.insert(i, change)
    return out


def _recording(c: Change, e: JournalEntry, lost: list[str]) -> tuple[Step, ...]:
    """The kept change's steps, recording the holds that `e` set and the record lacks."""
    mine = sorted(_holds(e) & set(lost))
    recorded = {
        n
        for s in c.steps
        if s.command == record_holds_step([], []).command
        for n in (s.stdin or "").split()
    }
    missing = [n for n in mine if n not in recorded]
    return (*c.steps, record_holds_step(missing, [])) if missing else c.steps


def _place(c: Change, walked: Mapping[tuple[str, str], int]) -> float:
    if c.reboot and not c.steps:
        return float("inf")
    if c.before_reboot or c.reload is not None:
        return _LAST
    if not c.role:  # the repair of an interrupted dpkg run: first
        return -1.0
    first = c.role.split("+")[0]
    found = [
        i
        for (role, task), i in walked.items()
        if role == first and (c.task == task or c.task.startswith(task + "; "))
    ]
    return float(min(found)) if found else -0.5


__all__ = ["held_by_journal", "ordinal", "put_back", "reason", "rebuilt", "with_journal_holds"]
