"""apt's list lock (/var/lib/apt/lists/lock), as a background `apt-get update` holds it:
waited for like the dpkg lock (apt.lock_timeout), its holder named, never called the dpkg
lock. apt-get update fails at once on it whatever DPkg::Lock::Timeout says (apt 2.6 and
2.7 wait only for the dpkg locks), so gpunode waits itself.

The holder takes the lock as apt does (an fcntl lock: flock(1)'s kind does not stop apt)
in a process of its own on the host, outside any SSH session, and lets it go after
`seconds`; the test reads the holder's pid from the host."""

from __future__ import annotations

import shlex
import time
from pathlib import Path
from typing import Any

import pytest

from tests.apply.labhelpers import Lab, apply, fresh, of, on_host, packages
from tests.conftest import until

pytestmark = [pytest.mark.lab, pytest.mark.slow]

HOST = "lab-02"
STACK: dict[str, Any] = {
    "driver": None,
    "cuda": {"toolkits": ["12.4"]},
    "cudnn": None,
    "nccl": None,
    "cuda_env": False,
    "smoke": [],
}
PIDFILE = "/run/gpunode-test-lists-lock.pid"
LOCKER = (
    "import fcntl, os, sys, time\n"
    "f = open('/var/lib/apt/lists/lock', 'w')\n"
    "fcntl.lockf(f, fcntl.LOCK_EX)\n"
    f"open({PIDFILE!r}, 'w').write(str(os.getpid()))\n"
    "time.sleep(float(sys.argv[1]))\n"
)


def hold_lists_lock(inv: Path, seconds: float) -> str:
    """Start the holder; its pid once it holds the lock."""
    script = shlex.quote(LOCKER)
    on_host(
        inv, HOST,
        f"sudo rm -f {PIDFILE}; sudo setsid python3 -c {script} {seconds}"
        " </dev/null >/dev/null 2>&1 &",
    )  # fmt: skip

    def holder() -> str:
        return on_host(inv, HOST, f"cat {PIDFILE} 2>/dev/null; true").strip()

    until(lambda: holder() != "", 15, "the list lock's holder")
    return holder()


def with_timeout(lab: Lab, tmp: Path, lock_timeout: int, **stack: Any) -> Path:
    from ruamel.yaml import YAML

    inv = lab.inventory(tmp, **{**STACK, **stack})
    yaml = YAML()
    doc = yaml.load(inv.read_text())
    doc["defaults"]["apt"] = {"lock_timeout": lock_timeout}
    with inv.open("w") as fh:
        yaml.dump(doc, fh)
    return inv


def test_a_list_lock_released_within_the_timeout_is_waited_for(lab: Lab, tmp_path: Path) -> None:
    fresh(lab, HOST)
    inv = with_timeout(lab, tmp_path, 60)
    start = time.monotonic()
    pid = hold_lists_lock(inv, 12)
    code, evs = apply(lab, inv, "-l", HOST)
    assert code == 0, [(e["host"], e["message"]) for e in of(evs, "host-finished")]
    said = "".join(e["text"] for e in of(evs, "command-output", HOST))
    assert f"waiting for apt's list lock, held by pid {pid} (python3)" in said, said[-3000:]
    assert time.monotonic() - start >= 12  # it went on only once the holder let go
    assert on_host(inv, HOST, f"test -d /proc/{pid} || echo gone").strip() == "gone"
    assert "cuda-toolkit-12-4" in packages(inv, HOST)
    assert on_host(inv, HOST, "sudo dpkg --audit").strip() == ""


def test_a_list_lock_held_past_the_timeout_names_it_and_its_holder(
    lab: Lab, tmp_path: Path
) -> None:
    fresh(lab, HOST)
    inv = with_timeout(lab, tmp_path, 3)
    before = packages(inv, HOST)
    pid = hold_lists_lock(inv, 40)
    try:
        start = time.monotonic()
        code, evs = apply(lab, inv, "-l", HOST)
        seconds = time.monotonic() - start
    finally:
        on_host(inv, HOST, f"sudo kill {pid} 2>/dev/null; sudo rm -f {PIDFILE}; true")
    assert code == 2
    (finished,) = of(evs, "host-finished", HOST)
    assert finished["status"] == "failed", finished
    assert f"apt's list lock held by pid {pid} (python3)" in finished["message"], finished
    assert "dpkg lock" not in finished["message"]
    assert 3 <= seconds < 40, seconds  # waited the 3 s it was given, not the holder's 40
    after = packages(inv, HOST)  # the keyring went in before the lists were read; no more
    assert {n: v for n, v in after.items() if n != "cuda-keyring"} == before
    assert on_host(inv, HOST, "sudo dpkg --audit").strip() == ""


def test_a_list_lock_is_waited_for_by_the_resolvers_check_too(lab: Lab, tmp_path: Path) -> None:
    """On a host whose repository is configured, apply reads apt's lists for its resolver
    check before any change (`apt-get -s`): that read waits for the lock as well."""
    fresh(lab, HOST)
    inv = with_timeout(lab, tmp_path / "a", 60)
    code, evs = apply(lab, inv, "-l", HOST)
    assert code == 0, [(e["host"], e["message"]) for e in of(evs, "host-finished")]
    more = with_timeout(lab, tmp_path / "b", 60, nccl="2.21")
    start = time.monotonic()
    pid = hold_lists_lock(more, 10)
    code, evs = apply(lab, more, "-l", HOST)
    assert code == 0, [(e["host"], e["message"]) for e in of(evs, "host-finished")]
    assert time.monotonic() - start >= 10
    assert on_host(more, HOST, f"test -d /proc/{pid} || echo gone").strip() == "gone"
    assert "libnccl2" in packages(more, HOST)
