"""Smoke results as text: one table per host (test, env, status, value vs expected, unit)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from gpunode.smoke.runner import HostSmoke

COLUMNS = ("TEST", "ENV", "STATUS", "VALUE", "EXPECTED", "UNIT", "REASON")


def fmt_number(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.3g}" if abs(value) < 10 else f"{value:,.1f}".rstrip("0").rstrip(".")
    return str(value)


def rows(smoke: HostSmoke) -> list[tuple[str, ...]]:
    return [
        (
            str(r.get("name", "?")),
            str(r.get("env", "-")),
            str(r.get("status", "?")),
            fmt_number(r.get("value")),
            fmt_number(r.get("expected")),
            str(r.get("unit") or ""),
            str(r.get("reason") or ""),
        )
        for r in smoke.results
    ]


def summary(smoke: HostSmoke) -> str:
    if smoke.unreachable is not None:
        return f"{smoke.host}: unreachable: {smoke.unreachable}"
    c = smoke.counts()
    return (
        f"{smoke.host}: {smoke.status} ({c['pass']} pass, {c['warn']} warn, {c['fail']} fail, "
        f"{c['skip']} skip; {smoke.seconds:.1f} s)"
    )


def table(smoke: HostSmoke) -> str:
    lines = [summary(smoke)]
    body = rows(smoke)
    if not body:
        return lines[0]
    # The reason column is last and not padded: it can be long and says why.
    widths = [max(len(COLUMNS[i]), *(len(r[i]) for r in body)) for i in range(len(COLUMNS) - 1)]
    for row in [COLUMNS, *body]:
        cells = [cell.ljust(w) for cell, w in zip(row[:-1], widths, strict=True)]
        lines.append(("  " + "  ".join(cells) + "  " + row[-1]).rstrip())
    return "\n".join(lines)


def render(results: Sequence[HostSmoke]) -> str:
    return "\n\n".join(table(s) for s in results)
