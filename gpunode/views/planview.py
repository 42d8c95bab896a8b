"""`gpunode plan`'s text: each host's changes, reasons and exact commands."""

from __future__ import annotations

from gpunode.changes import HostPlan


def plan_text(plan: HostPlan, *, commands: bool = True) -> str:
    if plan.refused:
        return f"{plan.host}: refused: {plan.refused}"
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
    lines += [f"  note: {n}" for n in plan.notes]
    return "\n".join(lines)
