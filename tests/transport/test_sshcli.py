"""The `ssh` command line the openssh transport builds: one argv element per value."""

from __future__ import annotations

import itertools
import os

from gpunode.inventory.model import SshSettings
from gpunode.transport.sshcli import SshCommand, parse_effective


def _opts(argv: list[str]) -> dict[str, str]:
    """The `-o Name=value` pairs, first value of each (what ssh uses)."""
    out: dict[str, str] = {}
    for flag, value in itertools.pairwise(argv):
        if flag == "-o":
            name, _, v = value.partition("=")
            out.setdefault(name, v)
    return out


def test_defaults_leave_the_rest_to_the_ssh_config() -> None:
    argv = SshCommand("gpu1", SshSettings(), "/run/x").argv()
    o = _opts(argv)
    assert o["ControlMaster"] == "auto" and o["ControlPath"] == "/run/x/%C"
    assert o["BatchMode"] == "yes" and o["StrictHostKeyChecking"] == "yes"
    assert o["ConnectTimeout"] == "10" and o["ServerAliveInterval"] == "15"
    # not set in the inventory: ~/.ssh/config (and /etc/ssh/ssh_config) decide
    assert "-F" not in argv and "-l" not in argv and "-p" not in argv
    assert "UserKnownHostsFile" not in o


def test_explicit_settings_come_after_gpunode_own_and_win_over_the_config() -> None:
    s = SshSettings.model_validate(
        {
            "user": "ops",
            "port": 2222,
            "identity_file": "~/.ssh/gpu key",
            "known_hosts_file": "~/kh",
            "config_file": None,
            "host_key_policy": "accept-new",
            "proxy_jump": "admin@bastion:22",
            "options": {"ServerAliveInterval": 99, "Ciphers": "aes256-gcm@openssh.com"},
        }
    )
    argv = SshCommand("gpu1", s, "/run/x").argv()
    o = _opts(argv)
    assert argv[argv.index("-F") + 1] == "/dev/null"
    assert argv[argv.index("-l") + 1] == "ops" and argv[argv.index("-p") + 1] == "2222"
    assert argv[argv.index("-i") + 1] == os.path.expanduser("~/.ssh/gpu key")  # one element
    assert argv[argv.index("-J") + 1] == "admin@bastion:22"
    assert o["StrictHostKeyChecking"] == "accept-new"
    assert o["UserKnownHostsFile"] == os.path.expanduser("~/kh")
    assert o["ServerAliveInterval"] == "15"  # ssh.keepalive comes first
    assert o["Ciphers"] == "aes256-gcm@openssh.com"


def test_the_default_config_file_keeps_the_system_config() -> None:
    s = SshSettings.model_validate({"config_file": "~/.ssh/config"})
    assert "-F" not in SshCommand("h", s, "/d").argv()
    s = SshSettings.model_validate({"config_file": "/etc/gpunode/ssh_config"})
    assert SshCommand("h", s, "/d").config_args() == ["-F", "/etc/gpunode/ssh_config"]


def test_ssh_g_output_is_read() -> None:
    text = "user ops\nhostname 10.0.0.5\nport 2222\nidentityfile ~/.ssh/a\nidentityfile ~/.ssh/b\n"
    assert parse_effective(text) == {
        "user": "ops",
        "hostname": "10.0.0.5",
        "port": "2222",
        "identityfile": "~/.ssh/a",
    }
