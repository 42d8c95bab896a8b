"""ssh_config for the paramiko transport: paramiko without invoke until a config is read."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def test_importing_the_ssh_transport_leaves_invoke_and_unittest_out() -> None:
    code = (
        "import sys, gpunode.transport.ssh\n"
        "print(sorted(m for m in ('invoke', 'unittest', 'unittest.mock') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_match_exec_still_runs_once_a_config_is_read(tmp_path: Path) -> None:
    config = tmp_path / "ssh_config"
    config.write_text(
        'Match host gpu-a exec "test -d /"\n'
        "    HostName 127.0.0.21\n"
        'Match host gpu-b exec "test -d /no/such/dir"\n'
        "    HostName 127.0.0.22\n"
    )
    # In a child: invoke runs the commands with the terminal's stdin, which pytest holds.
    code = (
        "import sys\n"
        "from gpunode.inventory.model import SshSettings\n"
        "from gpunode.transport.sshconfig import load_config, resolve\n"
        "parsed = load_config(sys.argv[1])\n"
        "print(resolve('gpu-a', SshSettings(), parsed).hostname,"
        " resolve('gpu-b', SshSettings(), parsed).hostname)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(config)],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        check=True,
        env={**os.environ, "GPUNODE_ALLOW_SSH_COMMANDS": "1"},  # not the user's own config
    )
    assert out.stdout.split() == ["127.0.0.21", "gpu-b"]
