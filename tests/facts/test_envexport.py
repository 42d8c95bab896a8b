"""Parsing the one round trip of `gpunode envs`: each env's export, or conda's error."""

from __future__ import annotations

import subprocess
from pathlib import Path

from gpunode.facts.envexport import MARK, export_command, parse_exports
from gpunode.facts.model import Conda, CondaEnvFacts, HostFacts


def test_exports_and_failures_are_told_apart_per_env() -> None:
    facts = HostFacts(
        conda=Conda(
            prefix="/opt/conda",
            envs=[
                CondaEnvFacts(name="base", path="/opt/conda"),
                CondaEnvFacts(name="torch", path="/opt/conda/envs/torch"),
            ],
        )
    )
    out = (
        f"{MARK}/opt/conda\nname: base\ndependencies:\n  - python=3.12.4\n{MARK}rc 0\n"
        f"{MARK}/opt/conda/envs/torch\nEnvironmentLocationNotFound: gone\n{MARK}rc 1\n"
    )
    base, torch = parse_exports(facts, out)
    assert base.name == "base" and base.error is None
    assert base.export == "name: base\ndependencies:\n  - python=3.12.4\n"
    assert torch.name == "torch" and torch.export == ""
    assert torch.error == "EnvironmentLocationNotFound: gone"


def test_every_path_reaches_the_shell_quoted() -> None:
    cmd = export_command("/opt/conda", ["/opt/conda/envs/a b;reboot"])
    assert "-p '/opt/conda/envs/a b;reboot'" in cmd


def test_the_command_runs_every_export_in_turn(tmp_path: Path) -> None:
    conda = tmp_path / "bin/conda"
    conda.parent.mkdir()
    conda.write_text('#!/bin/sh\necho "name: $(basename "$4")"\n[ "$4" != /gone ]\n')
    conda.chmod(0o755)
    out = subprocess.run(
        ["sh", "-c", export_command(str(tmp_path), ["/x/base", "/gone", "/x/t"])],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    facts = HostFacts(conda=Conda(prefix=str(tmp_path)))
    assert [(e.path, e.export, e.error) for e in parse_exports(facts, out)] == [
        ("/x/base", "name: base\n", None),
        ("/gone", "", "name: gone"),
        ("/x/t", "name: t\n", None),
    ]
