"""The recap after a run, as Ansible's: ok / changed / failed / unreachable per host.

A host whose key changed counts as unreachable and says "host key changed" on its line."""

from __future__ import annotations

import json
from typing import Any

from gpunode.execute.result import RunResult


def recap_rows(run: RunResult) -> list[dict[str, Any]]:
    rows = []
    for name, r in run.hosts.items():
        rows.append(
            {
                "host": name,
                "status": r.status,
                "ok": r.ok,
                "changed": r.changed,
                "failed": r.failed + (1 if r.status == "failed" and not r.failed else 0),
                "unreachable": 1 if r.status in ("unreachable", "hostkey-changed") else 0,
                "hostkey_changed": 1 if r.status == "hostkey-changed" else 0,
                "skipped": 1 if r.status == "skipped" else 0,
                "rebooted": r.rebooted,
                "seconds": r.seconds,
                "message": r.message,
            }
        )
    return rows


def recap_text(run: RunResult) -> str:
    rows = recap_rows(run)
    width = max([len(r["host"]) for r in rows] + [4])
    title = "RECAP (check: nothing was changed)" if run.check else "RECAP"
    lines = [title]
    for r in rows:
        counts = (
            f"ok={r['ok']:<3} changed={r['changed']:<3} failed={r['failed']:<3} "
            f"unreachable={r['unreachable']:<2}"
        )
        extra = " host key changed" if r["hostkey_changed"] else ""
        extra += " rebooted" if r["rebooted"] else ""
        extra += " skipped" if r["skipped"] else ""
        line = f"{r['host']:<{width}}  {counts} {r['seconds']:6.1f}s{extra}"
        if r["message"]:
            line += f"  {r['message']}"
        lines.append(line)
    lines.append(f"{len(rows)} host{'s' * (len(rows) != 1)} in {run.seconds:.1f}s")
    return "\n".join(lines)


def recap_json(run: RunResult, record: str) -> str:
    """The last line of `apply --json`."""
    doc = {"event": "Recap", "hosts": recap_rows(run), "exit_code": run.exit_code, "record": record}
    return json.dumps(doc)
