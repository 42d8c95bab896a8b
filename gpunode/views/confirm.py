"""`apply`'s summary before its `[y/N]`: one screen whatever the fleet's size.

Hosts whose plans list the same changes are one group ("12 hosts: same 9 changes"), each
group's line says what matters before saying yes (reboots, a disruption of the GPUs'
work, downgrades), and the change titles are shown while the screen has room; `plan` and
`apply --show-commands` show every command.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from gpunode.changes import Change, HostPlan

if TYPE_CHECKING:
    from gpunode.hostpool import Outcome

SCREEN = 20
"""Lines the summary may take: a 24-line terminal less the total, the hint and the prompt."""
WIDTH = 78
HINT = "each change's commands: `gpunode plan` (same arguments) or apply --show-commands"


def is_downgrade(change: Change) -> bool:
    """The change installs an older version than the host has (the plan's reason says so)."""
    return "downgrade" in change.reason


def disrupts(change: Change) -> bool:
    """Stops the GPUs' work: a reboot, a module reload, or the driver's packages changed."""
    return change.reboot or change.reload is not None or (change.apt and "driver" in change.roles)


@dataclass
class Group:
    key: tuple[object, ...]
    plan: HostPlan | None
    status: str
    hosts: list[str] = field(default_factory=list)

    @property
    def changes(self) -> tuple[Change, ...]:
        return self.plan.changes if self.plan is not None and not self.plan.refused else ()

    def header(self) -> str:
        n = len(self.hosts)
        who = f"{n} hosts" if n > 1 else self.hosts[0]
        if self.plan is None or self.plan.refused:
            head = f"{who}: {self.status}"
        elif not self.changes:
            head = f"{who}: nothing to do"
        else:
            k = len(self.changes)
            same = "same " if n > 1 else ""
            head = f"{who}: {same}{k} change{'s' * (k != 1)}{_what_matters(self.plan)}"
        if n == 1:
            return head
        return head + ": " + _names(self.hosts, WIDTH - len(head) - 2)

    def details(self) -> list[str]:
        if self.plan is None or self.plan.refused:
            return []
        out = [
            f"  {i:>2}. {'downgrade: ' * is_downgrade(c)}{c.title}"
            for i, c in enumerate(self.changes, 1)
        ]
        out += [f"      hook {name}" for name, _ in self.plan.hooks]
        return out


def _shorten(group: Group, room: int) -> list[str]:
    """The group's change lines in `room` lines: what matters most (downgrades, reboots,
    the driver) kept first, in plan order, the rest counted."""
    lines = group.details()
    if len(lines) <= room:
        return lines
    if room < 2:
        return []
    changes = group.changes
    marked = [
        i
        for i, c in enumerate(changes)
        if is_downgrade(c)
        or c.reboot
        or c.reload
        or (c.op == "apt_packages" and "driver" in c.roles)
    ]
    keep = sorted((marked + [i for i in range(len(lines)) if i not in marked])[: room - 1])
    return [lines[i] for i in keep] + [f"      ... {len(lines) - len(keep)} more"]


def _what_matters(plan: HostPlan) -> str:
    said = []
    if plan.needs_reboot:
        said.append("reboot")
    elif any(c.reload is not None for c in plan.changes):
        said.append("module reload")
    if any(disrupts(c) for c in plan.changes):
        said.append("disrupts the GPUs")
    down = sum(is_downgrade(c) for c in plan.changes)
    if down:
        said.append(f"{down} downgrade{'s' * (down != 1)}")
    return f" ({', '.join(said)})" if said else ""


def _names(hosts: list[str], room: int) -> str:
    """As many names as `room` columns hold (one at least), then how many more."""
    shown: list[str] = []
    for i, name in enumerate(hosts):
        more = len(hosts) - i - 1
        tail = f", +{more} more" if more else ""
        if shown and len(", ".join([*shown, name]) + tail) > room:
            return ", ".join(shown) + f", +{len(hosts) - i} more"
        shown.append(name)
    return ", ".join(shown)


def _key(o: Outcome[HostPlan]) -> tuple[object, ...]:
    p = o.value
    if p is None:
        return ("unplanned", o.summary)
    if p.refused:
        return ("refused", p.refused)
    return ("plan", tuple((c.title, is_downgrade(c)) for c in p.changes), p.needs_reboot,
            tuple(name for name, _ in p.hooks))  # fmt: skip


def groups(outcomes: dict[str, Outcome[HostPlan]]) -> list[Group]:
    """Hosts by identical plan (the same change titles, reboots, hooks), in the order a
    reader needs them: changes first (the larger groups first), then refused, unreachable,
    and those with nothing to do."""
    found: dict[tuple[object, ...], Group] = {}
    for name, o in outcomes.items():
        key = _key(o)
        if key not in found:
            status = o.summary if o.value is None else f"refused: {o.value.refused}"
            found[key] = Group(key, o.value, status)
        found[key].hosts.append(name)

    def rank(g: Group) -> tuple[int, int]:
        kind = 0 if g.changes else 1 if g.plan is not None and g.plan.refused else 2
        if g.plan is not None and not g.plan.refused and not g.changes:
            kind = 3
        return (kind, -len(g.hosts))

    return sorted(found.values(), key=rank)


def summary(outcomes: dict[str, Outcome[HostPlan]], screen: int = SCREEN) -> tuple[str, int]:
    """The summary's lines (at most `screen`, the total and the hint included) and the
    number of changes the prompt asks for."""
    gs = groups(outcomes)
    pending = sum(len(o.value.changes) for o in outcomes.values() if o.value is not None)
    lines_left = screen - 2  # the total and the hint
    shown = gs
    if len(gs) > lines_left:
        shown = gs[: lines_left - 1]
    room = lines_left - len(shown) - (len(shown) < len(gs))
    body: list[str] = []
    detailed = [g for g in shown if g.details()]
    for g in shown:
        body.append(g.header())
        if g in detailed:
            # the room left, shared among the groups still to show theirs
            share = room // (len(detailed) - detailed.index(g))
            lines = _shorten(g, share)
            body += lines
            room -= len(lines)
    if len(shown) < len(gs):
        rest = gs[len(shown) :]
        hosts = sum(len(g.hosts) for g in rest)
        body.append(f"... {hosts} more host{'s' * (hosts != 1)} in {len(rest)} other plans")
    body.append(_total(outcomes))
    body.append(HINT if pending else "every reachable host is already converged")
    return "\n".join(body), pending


def _total(outcomes: dict[str, Outcome[HostPlan]]) -> str:
    plans = [o.value for o in outcomes.values() if o.value is not None]
    changing = [p for p in plans if p.changes and not p.refused]
    said = [
        f"{n} {word}{'s' * (n != 1)}"
        for n, word in (
            (sum(p.needs_reboot for p in changing), "reboot"),
            (sum(is_downgrade(c) for p in changing for c in p.changes), "downgrade"),
        )
        if n
    ]
    parts = [f"{len(changing)} to change" + (f" ({', '.join(said)})" if said else "")]
    refused = sum(1 for p in plans if p.refused)
    if refused:
        parts.append(f"{refused} refused")
    unplanned = len(outcomes) - len(plans)
    if unplanned:
        parts.append(f"{unplanned} not read")
    return f"{len(outcomes)} host{'s' * (len(outcomes) != 1)}: " + ", ".join(parts)
