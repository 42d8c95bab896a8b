"""Smoke results as text: one table per host (test, env, status, value vs expected, unit)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from gpunode.safetext import printable
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
    for r in smoke.results:
        lines += sweep(r.get("details") or {})
    return "\n".join(lines)


def sweep(details: dict[str, Any]) -> list[str]:
    """nccl-multinode's sizes: bandwidth across the hosts and within this one."""
    inter = details.get("inter")
    if not isinstance(inter, list) or not inter:
        return []
    intra = {row["bytes"]: row for row in details.get("intra") or []}
    seen = ", ".join(f"{k} x{n}" for k, n in sorted((details.get("transports") or {}).items()))
    lines = [
        f"  all-reduce, node {details.get('node_rank')} of {details.get('nodes')}, "
        f"{details.get('world')} ranks, rendezvous {details.get('endpoint')}; "
        f"NCCL transports: {seen or '-'}"
    ]
    for dev in details.get("net_devices") or []:
        lines.append(f"    NET/{dev}")
    lines.append("    SIZE      ALGBW GB/s  BUSBW GB/s  IN-HOST BUSBW GB/s")
    for row in inter:
        local = intra.get(row["bytes"])
        size = f"{row['bytes'] >> 20} MiB"
        alg, bus = fmt_number(row["algbw_gbps"]), fmt_number(row["busbw_gbps"])
        own = fmt_number(local["busbw_gbps"]) if local else "-"
        lines.append(f"    {size:<9} {alg:>10}  {bus:>10}  {own:>18}")
    return lines


def render(results: Sequence[HostSmoke]) -> str:
    """The smoke tables, escaped for a terminal (reasons quote the hosts' output)."""
    return printable("\n\n".join(table(s) for s in results), lines=True)
