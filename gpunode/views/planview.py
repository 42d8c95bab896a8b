"""`gpunode plan`'s text: each host's changes, reasons and exact commands."""

from __future__ import annotations

from typing import TYPE_CHECKING

from gpunode.changes import HostPlan
from gpunode.safetext import printable

if TYPE_CHECKING:
    from gpunode.hostpool import Outcome


def plan_text(plan: HostPlan, *, commands: bool = True) -> str:
    if plan.refused:
        return printable(f"{plan.host}: refused: {plan.refused}", lines=True)
    if not plan.changes:
        lines = [f"{plan.host}: nothing to do"]
    else:
        n = len(plan.changes)
        lines = [f"{plan.host}: {n} change{'s' * (n != 1)}"]
        for i, c in enumerate(plan.changes, 1):
            lines.append(f"  {i:>2}. {c.title}  ({c.reason})")
            if commands:
                prefix = "[sudo] " if c.sudo else ""
                lines += [f"        $ {prefix}{s.shown()}" for s in c.steps]
                if c.reboot:
                    lines.append("        (reboot, then facts are gathered again)")
    lines += [f"  hook {name}: $ [sudo] {shell}" for name, shell in plan.hooks]
    lines += [f"  note: {n}" for n in plan.notes]
    return printable("\n".join(lines), lines=True)


def confirm_text(
    outcomes: dict[str, Outcome[HostPlan]], *, show_commands: bool = False
) -> tuple[str, int]:
    """`apply`'s text before it asks: a summary that fits a screen (hosts with the same plan
    grouped; views/confirm.py), after every host's full plan with `show_commands`; and the
    number of changes."""
    from gpunode.views.confirm import summary

    lines = []
    if show_commands:
        for name, o in outcomes.items():
            lines.append(plan_text(o.value) if o.value is not None else f"{name}: {o.summary}")
    text, pending = summary(outcomes)
    lines.append(text)
    return printable("\n".join(lines), lines=True), pending
