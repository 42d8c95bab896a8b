"""A rate limit on one address and port of the loopback device: the lab's "upstream link".

    with shaped("127.0.79.10", 80, mbit=100):
        ...   # traffic to and from 127.0.79.10:80 shares 100 Mbit/s; the rest of lo is untouched

An HTB root qdisc on lo whose default class is 0: unclassified packets (every other loopback
connection: SSH to the lab hosts, other labs, a mirror served on another address) leave at
full speed; two u32 filters put packets from ADDR:PORT (downloads) and to ADDR:PORT
(requests) into one class limited to the rate, so all hosts share the one link as a site's
hosts share their uplink. The qdisc is always removed on the way out (also on SIGTERM);
`python -m bench.compare.shaping off [--netns NS]` removes one a killed run left.

A device can have only one root qdisc: shaped() refuses when lo already has one it did not
make, rather than replace someone else's.
"""

from __future__ import annotations

import argparse
import contextlib
import signal
import subprocess
import sys
from collections.abc import Iterator
from types import FrameType

DEV = "lo"
CLASS = "1:10"


def _tc(args: list[str], netns: str | None, check: bool = True) -> str:
    cmd = ["tc", *args]
    if netns:
        cmd = ["ip", "netns", "exec", netns, *cmd]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if check and proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: {proc.stderr.strip()}")
    return proc.stdout


def root_qdisc(netns: str | None = None, dev: str = DEV) -> str:
    """The device's root qdisc as `tc qdisc show` prints it ("" for the default noqueue)."""
    for line in _tc(["qdisc", "show", "dev", dev], netns).splitlines():
        if " root " in line and not line.startswith("qdisc noqueue"):
            return line.strip()
    return ""


def on(address: str, port: int, mbit: float, netns: str | None = None, dev: str = DEV) -> None:
    present = root_qdisc(netns, dev)
    if present:
        raise RuntimeError(f"{dev} already has a root qdisc ({present}); not replacing it")
    rate = f"{mbit}mbit"
    _tc(["qdisc", "add", "dev", dev, "root", "handle", "1:", "htb"], netns)  # default 0
    try:
        # lo's packets are up to 64 KiB (its MTU, and GSO): buffers a few of them deep
        burst = ["burst", "256k", "cburst", "256k", "quantum", "65536"]
        _tc(["class", "add", "dev", dev, "parent", "1:", "classid", CLASS, "htb",
             "rate", rate, "ceil", rate, *burst], netns)  # fmt: skip
        for side, port_side in (("src", "sport"), ("dst", "dport")):
            match = ["match", "ip", side, f"{address}/32"]
            match += ["match", "ip", port_side, str(port), "0xffff"]
            _tc(["filter", "add", "dev", dev, "parent", "1:", "protocol", "ip", "prio", "1",
                 "u32", *match, "flowid", CLASS], netns)  # fmt: skip
    except BaseException:
        off(netns, dev)
        raise


def off(netns: str | None = None, dev: str = DEV) -> None:
    """Remove the root qdisc (and with it the class and filters); quiet when there is none."""
    _tc(["qdisc", "del", "dev", dev, "root"], netns, check=False)


@contextlib.contextmanager
def shaped(
    address: str, port: int, mbit: float, netns: str | None = None, dev: str = DEV
) -> Iterator[None]:
    on(address, port, mbit, netns, dev)
    previous = signal.getsignal(signal.SIGTERM)

    def stop(signum: int, frame: FrameType | None) -> None:
        raise SystemExit(128 + signum)  # unwinds through the finally below

    signal.signal(signal.SIGTERM, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
        off(netns, dev)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.compare.shaping", description=__doc__)
    p.add_argument("action", choices=["off", "show"])
    p.add_argument("--netns", default=None)
    a = p.parse_args(argv)
    if a.action == "off":
        off(a.netns)
    print(_tc(["qdisc", "show", "dev", DEV], a.netns), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
