"""What the run records say about each host: converged or not, pending changes, the last
apply, the last smoke results, doctor findings.

Records are read from the state directory's runs/ (gpunode.records), newest first; each
file is parsed once and again only when it changes, so a scrape costs a directory listing
and a stat per record. A run still going ("running") says nothing yet; one whose
controller died reads "abandoned" (records.load_run), and `statuses` counts each.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpunode import records

SETTLED = ("ok", "changed", "failed", "unreachable", "hostkey-changed", "reboot-pending")


@dataclass
class HostState:
    converged: bool | None = None
    changes_pending: int | None = None
    last_apply: float | None = None
    smoke: list[dict[str, Any]] | None = None
    findings: dict[str, int] | None = None
    xids: dict[str, int] | None = None
    """The last Xid code per GPU (its PCI address, "0000:2b:00") in the newest doctor run."""


def _planned(entry: dict[str, Any]) -> int:
    plans = entry.get("plans") or []
    return len(plans[0].get("changes") or []) if plans else 0


def _converged(entry: dict[str, Any], check: bool) -> tuple[bool, int]:
    """(converged, changes pending) from a host's entry in an apply record: --check
    changes nothing, so a host that would change is pending all its plan; a real run
    leaves pending what it planned and did not change."""
    status = entry.get("status")
    if check:
        pending = _planned(entry) if status == "changed" else 0
        return status == "ok", pending
    if status in ("ok", "changed"):
        return True, 0
    done = sum(1 for c in entry.get("changes") or [] if c.get("status") == "changed")
    return False, max(0, _planned(entry) - done)


def _severities(entry: dict[str, Any]) -> dict[str, int]:
    """A doctor record's host entry: {"findings": [{"severity": ..., ...}, ...]}."""
    counts: dict[str, int] = {}
    for finding in entry.get("findings") or []:
        if isinstance(finding, dict):
            sev = str(finding.get("severity") or "unknown")
            counts[sev] = counts.get(sev, 0) + 1
    return counts


# the kernel's line, as the doctor keeps it for evidence: "NVRM: Xid (PCI:0000:2b:00): 79, ..."
_XID = re.compile(r"NVRM: Xid \(PCI:([0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2})\): ([0-9]+)")


def _xids(entry: dict[str, Any]) -> dict[str, int]:
    """Each GPU's last Xid among a doctor record's gpu.xid findings (kernel log order)."""
    out: dict[str, int] = {}
    for finding in entry.get("findings") or []:
        if isinstance(finding, dict) and finding.get("rule") == "gpu.xid":
            m = _XID.search(str(finding.get("evidence") or ""))
            if m:
                out[m.group(1).lower()] = int(m.group(2))
    return out


def xid_key(bus_id: str) -> str:
    """nvidia-smi's "00000000:2B:00.0" as the kernel writes it in an Xid line: "0000:2b:00"."""
    return bus_id[-12:].rsplit(".", 1)[0].lower()


def _slim(data: dict[str, Any] | None) -> dict[str, Any] | None:
    """A record without its failed steps' output and diffs (up to 2 MiB a change): a
    long-running exporter holds every record it has read, so it holds the small part."""
    if isinstance(data, dict) and isinstance(data.get("hosts"), dict):
        for entry in data["hosts"].values():
            for change in entry.get("changes") or [] if isinstance(entry, dict) else []:
                if isinstance(change, dict):
                    change.pop("output", None)
                    change.pop("diff", None)
    return data


class RunRecords:
    """The run records (of one inventory, when `inventory` is given: records.InventoryId),
    read lazily and cached by modification time."""

    def __init__(
        self, runs_dir: Path | None = None, inventory: records.InventoryId | None = None
    ) -> None:
        self.runs_dir = runs_dir
        self.inventory = inventory
        self._cache: dict[Path, tuple[int, dict[str, Any] | None]] = {}

    def _paths(self) -> list[Path]:
        d = self.runs_dir or records.runs_dir()
        return sorted(d.glob("*.json")) if d.is_dir() else []

    def _load(self, path: Path) -> dict[str, Any] | None:
        try:
            mtime = os.stat(path).st_mtime_ns
        except OSError:
            return None
        hit = self._cache.get(path)
        if hit is not None and hit[0] == mtime:
            return hit[1]
        try:
            data: dict[str, Any] | None = records.load_run(path)
        except (OSError, ValueError):
            data = None  # half-written by an older gpunode, or not a record
        data = _slim(data)
        self._cache[path] = (mtime, data)
        return data

    def newest_first(self) -> list[dict[str, Any]]:
        paths = self._paths()
        for gone in set(self._cache) - set(paths):
            del self._cache[gone]
        out = [self._load(p) for p in reversed(paths)]
        return [d for d in out if d is not None and self._ours(d) and d.get("status") == "finished"]

    def _ours(self, data: dict[str, Any]) -> bool:
        return isinstance(data, dict) and (self.inventory is None or self.inventory.owns(data))

    def statuses(self) -> dict[str, int]:
        """How many records say each status: running, finished, interrupted, abandoned."""
        counts: dict[str, int] = {}
        for path in self._paths():
            data = self._load(path)
            if data is None or not self._ours(data):
                continue
            status = str(data.get("status"))
            if status == "running" and records.abandoned(data):  # died since it was read
                status = "abandoned"
            counts[status] = counts.get(status, 0) + 1
        return counts

    def states(self, hosts: Iterable[str]) -> dict[str, HostState]:
        names = list(hosts)
        out = {h: HostState() for h in names}
        for data in self.newest_first():
            entries = data.get("hosts") or {}
            command, check = data.get("command"), bool((data.get("options") or {}).get("check"))
            for name in names:
                entry = entries.get(name)
                if not isinstance(entry, dict):
                    continue
                _fill(out[name], command, check, entry, data)
        return out


def _fill(
    state: HostState, command: Any, check: bool, entry: dict[str, Any], data: dict[str, Any]
) -> None:
    """Fill what the newer records left empty from this (older) record."""
    if command == "doctor":
        if state.findings is None:
            state.findings = _severities(entry)
            state.xids = _xids(entry)
        return
    smoke = entry.get("smoke")
    if command == "smoke":  # `gpunode smoke`'s own record: its results alone
        if state.smoke is None and isinstance(smoke, dict):
            state.smoke = [r for r in smoke.get("results") or [] if isinstance(r, dict)]
        return
    if command != "apply" or entry.get("status") not in SETTLED:
        return
    if state.converged is None:
        state.converged, state.changes_pending = _converged(entry, check)
    if state.last_apply is None and not check and data.get("finished") is not None:
        state.last_apply = float(data["finished"])
    if state.smoke is None and isinstance(smoke, dict):
        state.smoke = [r for r in smoke.get("results") or [] if isinstance(r, dict)]


@dataclass
class Figures:
    """A host's smoke figures, in base units where Prometheus asks for them."""

    results: dict[str, float] = field(default_factory=dict)
    matmul_tflops: dict[str, float] = field(default_factory=dict)
    copy_bytes_per_second: float | None = None
    allreduce_bytes_per_second: dict[str, float] = field(default_factory=dict)


RESULT_VALUE = {"pass": 1.0, "warn": 0.5, "fail": 0.0}


def smoke_figures(results: Iterable[dict[str, Any]]) -> Figures:
    out = Figures()
    for r in results:
        name, status, value = str(r.get("name", "")), r.get("status"), r.get("value")
        if status in RESULT_VALUE:
            out.results[name] = RESULT_VALUE[str(status)]
        if not isinstance(value, int | float) or isinstance(value, bool):
            continue
        metric = str((r.get("details") or {}).get("metric", ""))
        if metric.endswith("_tflops") and name.startswith("torch/matmul-"):
            out.matmul_tflops[metric.removesuffix("_tflops")] = float(value)
        elif metric == "copy_tbs":
            out.copy_bytes_per_second = float(value) * 1e12
        elif metric == "allreduce_busbw_gbs":
            out.allreduce_bytes_per_second[name.rpartition("/")[2]] = float(value) * 1e9
    return out
