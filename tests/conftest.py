"""Session-wide fixtures: a running `gpunode lab` for every test folder that needs hosts.

`lab_hosts` brings up (or reuses, when one with enough hosts is already running) a lab
in /var/lib/gpunode-lab-test on 127.0.1.X, so it never collides with a user's own lab.
GPUNODE_TEST_LAB_HOSTS sets how many hosts (default 4); GPUNODE_TEST_LAB_KEEP=1 keeps
the lab running after the session for the next one. Tests that write to a host and
need it pristine ask for `lab_fresh_host`, which gives a host a fresh, empty disk.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from gpunode.cli import plugins

REPO = Path(__file__).resolve().parent.parent
EXAMPLE_INVENTORY = str(REPO / "inventories" / "lab.yaml")  # from any working directory


def _slot() -> int:
    """GPUNODE_TEST_SLOT=N gives a second test session on the same machine its own lab
    directories, loopback networks, ports and users, so two sessions never share a host.
    Under pytest-xdist worker gwK takes slot GPUNODE_TEST_XDIST_SLOTS (default 20) + K:
    parallel workers never share a lab, with each other or with a session in a low slot."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    if worker.startswith("gw"):
        return int(os.environ.get("GPUNODE_TEST_XDIST_SLOTS", "20")) + int(worker[2:])
    return int(os.environ.get("GPUNODE_TEST_SLOT", "0"))


SLOT = _slot()


def slot_net(base: int) -> int:
    """A test lab's `--net` (0-255: 127.0.NET.X), moved to 127.SLOT.NET.X for other slots:
    every (slot, base) pair has addresses of its own."""
    assert 0 <= base < 256 and 0 <= SLOT < 256, (base, SLOT)
    return base + 256 * SLOT


def slot_path(path: str) -> Path:
    return Path(path if SLOT == 0 else f"{path}-slot{SLOT}")


TEST_LAB_DIR = slot_path("/var/lib/gpunode-lab-test")
TEST_LAB_NET = slot_net(1)


LAB_FIXTURES = {"lab_hosts", "lab_fresh_host", "tui_lab"}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A test that asks for a lab is a lab test, marked or not: the fast tier
    (`-m "not lab and not slow"`) never waits for one to start."""
    for item in items:
        if LAB_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.lab)
            item.add_marker(pytest.mark.slow)


def until(cond: Any, timeout: float = 30, what: str = "the condition") -> None:
    """Poll `cond()` until it is true; fail naming `what` when the deadline passes."""
    import time

    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, f"{what}: not true within {timeout:g}s"
        time.sleep(0.05)


def lab_unavailable() -> str | None:
    """Why lab tests cannot run here, or None when they can."""
    if sys.platform != "linux":
        return "gpunode lab needs Linux"
    if os.geteuid() != 0:
        return "gpunode lab needs root (namespaces, overlayfs, sshd)"
    for tool in ("/usr/sbin/sshd", "/usr/bin/unshare", "/usr/bin/nsenter"):
        if not os.path.exists(tool):
            return f"{tool} is missing: run scripts/setup-lab-deps.sh"
    if "lab" not in plugins.installed():
        return "gpunode-lab is not installed: pip install -e ./gpunode_lab"
    return None


def gpunode_lab(
    state_dir: Path,
    *args: str,
    check: bool = True,
    timeout: float = 300,
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    full_env = {**os.environ, **(env or {}), "GPUNODE_LAB_DIR": str(state_dir)}
    out = subprocess.run(
        [sys.executable, "-m", "gpunode", "lab", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=full_env,
        check=False,
    )
    if check and out.returncode != 0:
        raise AssertionError(f"gpunode lab {' '.join(args)} failed:\n{out.stdout}\n{out.stderr}")
    return out


@dataclass
class Lab:
    """A running lab, as tests see it."""

    state_dir: Path
    inventory_text: str
    inventory_path: Path
    names: list[str]
    addresses: dict[str, str]
    port: int
    key: Path
    known_hosts: Path
    started_here: bool = False
    config: dict[str, Any] = field(default_factory=dict)

    def cli(
        self, *args: str, check: bool = True, timeout: float = 300
    ) -> subprocess.CompletedProcess[str]:
        return gpunode_lab(self.state_dir, *args, check=check, timeout=timeout)

    def ssh_argv(self, host: str, command: str, connect_timeout: int = 5) -> list[str]:
        return [
            "ssh",
            "-i",
            str(self.key),
            "-p",
            str(self.port),
            "-o",
            f"UserKnownHostsFile={self.known_hosts}",
            "-o",
            "StrictHostKeyChecking=yes",
            "-o",
            "BatchMode=yes",
            "-o",
            f"ConnectTimeout={connect_timeout}",
            "-o",
            "LogLevel=ERROR",
            "-F",
            "/dev/null",
            f"ubuntu@{self.addresses[host]}",
            command,
        ]

    def run(
        self, host: str, command: str, timeout: float = 120, check: bool = True
    ) -> subprocess.CompletedProcess[str]:
        """Run a shell command on a host with the real ssh client."""
        out = subprocess.run(
            self.ssh_argv(host, command),
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        if check and out.returncode != 0:
            raise AssertionError(
                f"{host}: {command!r} exited {out.returncode}:\n{out.stdout}\n{out.stderr}"
            )
        return out

    def status(self) -> dict[str, dict[str, Any]]:
        doc = json.loads(self.cli("status", "--json").stdout)
        return {h["name"]: h for h in doc["hosts"]}

    def wait_up(self, host: str, timeout: float = 30) -> None:
        """Until the host has booted and answers ssh."""
        import time

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.status()[host]["state"] == "up":
                out = self.run(host, "true", check=False, timeout=10)
                if out.returncode == 0:
                    return
            time.sleep(0.2)
        raise AssertionError(f"{host} did not come back within {timeout}s")

    def reset(self, host: str) -> None:
        """Give a host a fresh, empty disk (same name, address and host key)."""
        self.cli("reset", host)
        self.wait_up(host)

    def boot_id(self, host: str) -> str:
        """The host's boot id as the lab records it (readable while sshd refuses)."""
        return str(self.status()[host]["boot_id"])

    def wait_booted(self, host: str, before: str, timeout: float = 30, ssh: bool = True) -> None:
        """Until the host has booted again since `before` (a boot id), and answers ssh."""
        import time

        deadline = time.monotonic() + timeout
        while True:
            state = self.status()[host]
            if state["state"] == "up" and state["boot_id"] != before:
                break
            assert time.monotonic() < deadline, f"{host} did not boot again: {state}"
            time.sleep(0.1)
        if ssh:  # sshd's start gets its own seconds, however long the boot took
            self.wait_up(host, timeout=max(15.0, deadline - time.monotonic()))

    def reboot(self, host: str, ssh: bool = True) -> None:
        """Reboot from the lab's side; returns once the host has booted again."""
        before = self.boot_id(host)
        self.cli("reboot", host)
        self.wait_booted(host, before, ssh=ssh)

    def reboot_inside(self, host: str, command: str = "sudo reboot", timeout: float = 60) -> None:
        """Reboot as an admin would, from a shell on the host; returns once it is back."""
        before = self.boot_id(host)
        self.run(host, command, check=False, timeout=30)
        self.wait_booted(host, before, timeout)

    def fault(
        self, host: str, knob: str, value: str | None = None, off: bool = False
    ) -> subprocess.CompletedProcess[str]:
        args = ["fault", host, knob] + ([value] if value is not None else [])
        return self.cli(*args, *(["--off"] if off else []))

    def sudo(self, host: str, command: str, **kw: Any) -> subprocess.CompletedProcess[str]:
        return self.run(host, f"sudo -n sh -c {shlex.quote(command)}", **kw)


def _open_lab(state_dir: Path, hosts: int) -> Lab:
    existing = gpunode_lab(state_dir, "status", "--json", check=False)
    started = True
    if existing.returncode == 0:
        doc = json.loads(existing.stdout)
        cfg = doc.get("config", {})
        enough = (
            doc.get("running") and cfg.get("hosts", 0) >= hosts and cfg.get("net") == TEST_LAB_NET
        )
        ok = (
            enough
            and not cfg.get("sudo_password_env")
            and all(h["state"] == "up" for h in doc["hosts"])
        )
        started = not ok
    if started:
        gpunode_lab(state_dir, "up", "--hosts", str(hosts), "--net", str(TEST_LAB_NET))
    text = gpunode_lab(state_dir, "inventory").stdout
    inv_path = state_dir / "test-inventory.yaml"
    inv_path.write_text(text)
    doc = json.loads(gpunode_lab(state_dir, "status", "--json").stdout)
    cfg = doc["config"]
    return Lab(
        state_dir=state_dir,
        inventory_text=text,
        inventory_path=inv_path,
        names=[h["name"] for h in doc["hosts"]],
        addresses={h["name"]: h["address"] for h in doc["hosts"]},
        port=int(cfg["port"]),
        key=state_dir / "client" / "id_ed25519",
        known_hosts=state_dir / "client" / "known_hosts",
        started_here=started,
        config=cfg,
    )


@pytest.fixture(scope="session")
def lab_hosts() -> Iterator[Lab]:
    """A running lab of GPUNODE_TEST_LAB_HOSTS hosts (default 4), shared by the session."""
    reason = lab_unavailable()
    if reason:
        pytest.skip(reason)
    lab = _open_lab(TEST_LAB_DIR, int(os.environ.get("GPUNODE_TEST_LAB_HOSTS", "4")))
    yield lab
    if lab.started_here and not os.environ.get("GPUNODE_TEST_LAB_KEEP"):
        gpunode_lab(TEST_LAB_DIR, "down", check=False)


@pytest.fixture
def lab_fresh_host(lab_hosts: Lab) -> str:
    """The name of a lab host whose disk was just reset: nothing written to it survives."""
    host = lab_hosts.names[-1]
    lab_hosts.reset(host)  # also turns every fault of the host off
    return host
