"""The three tools: their virtual environment, inventories and command lines."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REQUIREMENTS = HERE / "requirements.txt"
TOOLS = ("gpunode", "pyinfra", "ansible")


def ensure_venv(venv: Path, say: Any = print) -> Path:
    """ansible-core and pyinfra from PyPI, at the pinned versions, in their own venv."""
    stamp = venv / "requirements.txt"
    if stamp.exists() and stamp.read_text() == REQUIREMENTS.read_text():
        return venv
    say(f"creating {venv} with {', '.join(_pins())}")
    if venv.exists():
        shutil.rmtree(venv)
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    subprocess.run(
        [str(venv / "bin" / "pip"), "install", "-q", "-r", str(REQUIREMENTS)],
        check=True,
    )
    shutil.copyfile(REQUIREMENTS, stamp)
    return venv


def _pins() -> list[str]:
    lines = REQUIREMENTS.read_text().splitlines()
    return [ln.strip() for ln in lines if ln.strip() and not ln.startswith("#")]


@dataclass
class Target:
    """What every tool is pointed at: the lab's hosts and its client credentials."""

    hosts: dict[str, str]  # name -> address
    user: str
    port: int
    identity: str
    known_hosts: str
    gpunode_inventory: Path
    stack_json: Path


@dataclass
class Tool:
    name: str
    venv: Path
    work: Path
    env: dict[str, str] = field(default_factory=dict)

    def command(self, t: Target) -> list[str]:
        if self.name == "gpunode":
            return [
                sys.executable,
                "-m",
                "gpunode",
                "apply",
                str(t.gpunode_inventory),
                "--yes",
                "--no-tui",
                "--json",
                "--no-smoke",  # the others run no smoke tests
            ]
        if self.name == "ansible":
            return self._ansible(t)
        if self.name == "pyinfra":
            return self._pyinfra(t)
        raise ValueError(self.name)

    def run_env(self) -> dict[str, str]:
        return {**os.environ, **self.env}

    def _ansible(self, t: Target) -> list[str]:
        inv = self.work / "ansible-inventory.json"
        ssh = (
            f"-o UserKnownHostsFile={t.known_hosts} -o StrictHostKeyChecking=yes"
            " -o IdentitiesOnly=yes"
        )
        doc = {
            "all": {
                "hosts": {n: {"ansible_host": a} for n, a in t.hosts.items()},
                "vars": {
                    "ansible_user": t.user,
                    "ansible_port": t.port,
                    "ansible_ssh_private_key_file": t.identity,
                    "ansible_ssh_common_args": ssh,
                },
            }
        }
        inv.write_text(json.dumps(doc, indent=2) + "\n")
        home = self.work / "ansible-home"
        home.mkdir(exist_ok=True)
        # ssh control sockets need a short path; a fresh folder per run means no master
        # survives from an earlier run (the measuring process stops them after each run)
        control = tempfile.mkdtemp(prefix="gb-", dir="/tmp")
        self.env = {
            "ANSIBLE_CONFIG": str(HERE / "ansible" / "ansible.cfg"),
            "ANSIBLE_HOME": str(home),
            "ANSIBLE_LOCAL_TEMP": str(home / "tmp"),
            "ANSIBLE_SSH_CONTROL_PATH_DIR": control,
            "ANSIBLE_NOCOLOR": "1",
        }
        return [
            str(self.venv / "bin" / "ansible-playbook"),
            "-i",
            str(inv),
            "-f",
            str(len(t.hosts)),
            "-e",
            f"@{t.stack_json}",
            str(HERE / "ansible" / "playbook.yml"),
        ]

    def _pyinfra(self, t: Target) -> list[str]:
        inv = self.work / "pyinfra_inventory.py"
        data = {
            "ssh_user": t.user,
            "ssh_port": t.port,
            "ssh_key": t.identity,
            "ssh_known_hosts_file": t.known_hosts,
            "ssh_strict_host_key_checking": "yes",
        }
        hosts = [(n, {**data, "ssh_hostname": a}) for n, a in t.hosts.items()]
        inv.write_text(f"lab = {hosts!r}\n")
        self.env = {"GPUNODE_BENCH_STACK": str(t.stack_json), "PYINFRA_PROGRESS": "off"}
        return [
            str(self.venv / "bin" / "pyinfra"),
            "-y",
            "--parallel",
            str(len(t.hosts)),
            str(inv),
            str(HERE / "pyinfra" / "deploy.py"),
        ]
