"""The apply tests' lab and helpers: real sshd hosts, sudo, apt and dpkg (root, Linux).

A module with its own name, imported as `tests.apply.labhelpers`: `from conftest import`
would take whichever folder's conftest was imported last."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from gpunode.events import EVENT_NAMES
from tests.conftest import SLOT, slot_net

NET = slot_net(231)  # hosts on 127.0.231.11+, repository on 127.0.231.10
PORT = 2231 + 1000 * SLOT
# Written by sshd and PAM at every login and by nothing gpunode does.
LOGIN_NOISE = ("var/log/", "run/", "tmp/", "var/lib/sudo/", "var/cache/", "root/.cache/",
               # every apply takes and gives back its host lock there; the empty mutex file
               # the lock's flock needs stays (removing it would let two runs lock apart)
               "var/lib/gpunode/locks/",
               # Ubuntu's sudo marks a login's first use of sudo (the lock is taken with it)
               "home/ubuntu/.sudo_as_admin_successful")  # fmt: skip


@dataclass
class Lab:
    dir: Path
    inventory_text: str
    env: dict[str, str]

    def upper(self, host: str) -> Path:
        return self.dir / "disk" / "hosts" / host / "upper"

    def inventory(self, tmp: Path, ssh: dict[str, Any] | None = None, **stack: Any) -> Path:
        """The lab's inventory with `defaults.stack` keys (and `defaults.ssh` keys) replaced."""
        from ruamel.yaml import YAML

        yaml = YAML()
        doc = yaml.load(self.inventory_text)
        for key, value in stack.items():
            doc["defaults"]["stack"][key] = value
        doc["defaults"]["ssh"].update(ssh or {})
        tmp.mkdir(parents=True, exist_ok=True)
        path = tmp / "inventory.yaml"
        with path.open("w") as fh:
            yaml.dump(doc, fh)
        return path

    def gpunode(
        self, *args: str, timeout: float = 300, env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "gpunode", *args],
            env=env or self.env, capture_output=True, text=True, timeout=timeout,
        )  # fmt: skip

    def boot_id(self, host: str) -> str:
        """The host's boot id as the lab records it."""
        doc = json.loads(self.gpunode("lab", "status", "--json").stdout)
        return str({h["name"]: h for h in doc["hosts"]}[host]["boot_id"])

    def tree(self, host: str) -> dict[str, str]:
        """sha256 (or link target) of every file the host has written, login noise aside."""
        from gpunode_lab.written import written

        return written(self.upper(host), LOGIN_NOISE)


EVENT_WORDS = {*EVENT_NAMES.values(), "recap"}


def events(stdout: str) -> list[dict[str, Any]]:
    """`apply --json`'s lines: every one an `apply-event` envelope."""
    evs = [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]
    assert all((e["kind"], e["schema"]) == ("apply-event", 1) for e in evs), evs[:3]
    return evs


def start_lab(tmp: pytest.TempPathFactory, *up_args: str) -> Iterator[Lab]:
    if sys.platform != "linux" or os.geteuid() != 0 or not shutil.which("sshd"):
        pytest.skip("the lab needs root, Linux and OpenSSH's sshd")
    d = tmp.mktemp("lab")
    state = tmp.mktemp("state")
    env = {**os.environ, "GPUNODE_LAB_DIR": str(d), "GPUNODE_STATE_DIR": str(state),
           "GPUNODE_CACHE_DIR": str(tmp.mktemp("cache"))}  # fmt: skip
    cmd = [sys.executable, "-m", "gpunode", "lab"]
    up = subprocess.run([*cmd, "up", *up_args], env=env, capture_output=True, text=True,
                        timeout=300)  # fmt: skip
    assert up.returncode == 0, up.stderr
    try:
        inv = subprocess.run([*cmd, "inventory"], env=env, capture_output=True, text=True,
                             check=True)  # fmt: skip
        yield Lab(d, inv.stdout, env)
    finally:
        subprocess.run([*cmd, "down"], env=env, capture_output=True, timeout=120)


DPKG = "dpkg-query -W -f='${Package} ${Version} ${db:Status-Abbrev}\\n'"


def on_host(inv: Path, name: str, command: str) -> str:
    from gpunode.inventory import load
    from gpunode.transport.connect import open_transport

    t = open_transport(load(inv).hosts[name])
    t.connect()
    try:
        res = t.run(command)
    finally:
        t.close()
    assert res.ok, res.stderr
    return res.stdout


def packages(inv: Path, name: str) -> dict[str, tuple[str, bool]]:
    """name -> (version, held) as dpkg's database has them."""
    held = set(on_host(inv, name, "apt-mark showhold").split())
    out = {}
    listed = on_host(inv, name, DPKG)
    for line in listed.splitlines():
        fields = line.split(" ", 2)
        assert len(fields) == 3, f"dpkg-query printed {line!r} in:\n{listed[-3000:]}"
        pkg, version, status = fields
        if status.startswith("ii") or status.startswith("hi"):
            out[pkg] = (version, pkg in held)
    return out


def apply(lab: Lab, inv: Path, *args: str) -> tuple[int, list[dict[str, Any]]]:
    res = lab.gpunode("apply", str(inv), "--yes", "--json", *args)
    assert res.returncode in (0, 2, 3, 4, 8), res.stderr
    evs = events(res.stdout)
    assert evs and evs[-1]["event"] == "recap", res.stdout[-2000:] + res.stderr[-2000:]
    return res.returncode, evs


def of(evs: list[dict[str, Any]], kind: str, host: str | None = None) -> list[dict[str, Any]]:
    """The events named `kind` (of `host`); a name that is no event's word is refused, so
    `of(evs, "ChangeStarted") == []` cannot pass by naming nothing."""
    assert kind in EVENT_WORDS, f"{kind!r} is not an event's word (docs/json.md)"
    return [e for e in evs if e["event"] == kind and (host is None or e["host"] == host)]


def wait_for_ssh(lab: Lab, host: str, timeout: float = 60) -> None:
    """After `lab reset` the host boots again: wait until the lab reports it up."""
    deadline = time.monotonic() + timeout
    while True:
        status = lab.gpunode("lab", "status", "--json")
        hosts = {h["name"]: h for h in json.loads(status.stdout)["hosts"]}
        if hosts[host]["state"] == "up":
            return
        assert time.monotonic() < deadline, f"{host} did not come back: {hosts[host]}"
        time.sleep(0.3)


def fresh(lab: Lab, host: str) -> None:
    """A new, empty disk, booted (its init has written what it writes at boot)."""
    assert lab.gpunode("lab", "reset", host).returncode == 0
    wait_for_ssh(lab, host)
