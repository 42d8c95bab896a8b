"""Added latency per host with tc netem on the shared loopback device.

All lab addresses live on `lo`, so one prio qdisc (handle 6c61:) sits at its root:
its first three bands carry ordinary traffic exactly as before, and each further band
holds a netem delay. A u32 filter per host sends packets from the host's address to
the band of its delay, so every round trip to that host takes MS longer.
"""

from __future__ import annotations

import re
import subprocess

HANDLE = "6c61:"
FIRST_BAND = 4  # classes 6c61:4..6c61:16 carry delays
LAST_BAND = 16


def _tc(*args: str, check: bool = True) -> str:
    out = subprocess.run(["tc", *args], capture_output=True, text=True, check=False)
    if check and out.returncode != 0:
        raise RuntimeError(f"tc {' '.join(args)}: {out.stderr.strip()}")
    return out.stdout


def _ms(text: str) -> float:
    m = re.fullmatch(r"([\d.]+)(us|ms|s)", text)
    if not m:
        return -1.0
    scale = {"us": 0.001, "ms": 1.0, "s": 1000.0}[m.group(2)]
    return float(m.group(1)) * scale


def _filter_prio(address: str) -> str:
    _, _, net, host = address.split(".")
    return str(int(net) * 256 + int(host))


def _ensure_root() -> None:
    if f"qdisc prio {HANDLE}" in _tc("qdisc", "show", "dev", "lo"):
        return
    _tc(
        "qdisc",
        "add",
        "dev",
        "lo",
        "root",
        "handle",
        HANDLE,
        "prio",
        "bands",
        str(LAST_BAND),
        "priomap",
        *["1", "2", "2", "2", "1", "2", "0", "0", "1", "1", "1", "1", "1", "1", "1", "1"],
    )


def _band_for(ms: int) -> int:
    used: dict[int, float] = {}
    for line in _tc("qdisc", "show", "dev", "lo").splitlines():
        m = re.search(rf"qdisc netem \S+ parent {HANDLE}(\w+) .*?delay (\S+)", line)
        if m:
            used[int(m.group(1), 16)] = _ms(m.group(2))
    for band, delay in used.items():
        if abs(delay - ms) < 0.001:
            return band
    for band in range(FIRST_BAND, LAST_BAND + 1):
        if band not in used:
            _tc(
                "qdisc",
                "add",
                "dev",
                "lo",
                "parent",
                f"{HANDLE}{band:x}",
                "netem",
                "delay",
                f"{ms}ms",
            )
            return band
    raise RuntimeError("too many different latencies at once (13 at most)")


def set_latency(address: str, ms: int) -> None:
    _ensure_root()
    band = _band_for(ms)
    clear_latency(address)
    _tc(
        "filter",
        "add",
        "dev",
        "lo",
        "parent",
        HANDLE,
        "protocol",
        "ip",
        "prio",
        _filter_prio(address),
        "u32",
        "match",
        "ip",
        "src",
        f"{address}/32",
        "flowid",
        f"{HANDLE}{band:x}",
    )


def clear_latency(address: str) -> None:
    _tc("filter", "del", "dev", "lo", "parent", HANDLE, "prio", _filter_prio(address), check=False)


def remove_if_unused() -> None:
    """Give `lo` back its default queueing once no lab host has latency any more."""
    qdiscs = _tc("qdisc", "show", "dev", "lo", check=False)
    if f"qdisc prio {HANDLE}" not in qdiscs:
        return
    if _tc("filter", "show", "dev", "lo", "parent", HANDLE, check=False).strip():
        return
    _tc("qdisc", "del", "dev", "lo", "root", "handle", HANDLE, check=False)


def has_leftovers(addresses: list[str]) -> bool:
    shown = _tc("filter", "show", "dev", "lo", "parent", HANDLE, check=False)
    prios = {f"pref {_filter_prio(a)} " for a in addresses}
    return any(p in shown for p in prios)
