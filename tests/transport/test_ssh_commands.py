"""An inventory runs no command on the controller through ssh: `ssh.options` that run
commands and a `config_file` whose lines (or Includes) run them are refused at load, naming
file:line, unless the controller's own user allows it (their gpunode.toml or the
environment, never a file beside the inventory). The attacks run the real `gpunode` with
the real OpenSSH client and with paramiko: the marker a command would write must not exist."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from gpunode.inventory import InventoryError, loads
from gpunode.inventory.sshcommands import ALLOW_ENV


def gpunode(tmp: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("GPUNODE_")}
    clean.update(XDG_CONFIG_HOME=str(tmp / "xdg"), GPUNODE_STATE_DIR=str(tmp / "state"))
    return subprocess.run([sys.executable, "-m", "gpunode", *args], capture_output=True,
                          text=True, timeout=120, stdin=subprocess.DEVNULL, cwd=tmp,
                          env={**clean, **env})  # fmt: skip


def inventory(tmp: Path, ssh: str) -> Path:
    inv = tmp / "site" / "inv.yaml"
    inv.parent.mkdir(parents=True, exist_ok=True)
    # a closed port on loopback: ssh runs what it was told before it fails to connect
    inv.write_text(
        "hosts:\n  a:\n    address: 127.0.0.1\n"
        f"    ssh: {{port: 9, connect_timeout: 2, known_hosts_file: {tmp}/kh, {ssh}}}\n"
    )
    return inv


def evil_config(tmp: Path, marker: Path, line: str, include: bool) -> Path:
    """A config file whose command is in an included file (paramiko reads no Include)."""
    inner = tmp / "site" / "inner.conf"
    inner.parent.mkdir(parents=True, exist_ok=True)
    inner.write_text(f"# looks harmless\n{line.format(cmd=f'id > {marker}')}\n")
    outer = tmp / "site" / "ssh_config"
    outer.write_text(f"Host *\n  ServerAliveInterval 5\nInclude {inner}\n")
    return outer if include else inner


ATTACKS = {
    "openssh ProxyCommand": ("transport: openssh, options: {{ProxyCommand: 'id > {m}'}}", None),
    "openssh Match exec": ("transport: openssh, config_file: {c}", 'Match exec "{cmd}"'),
    "openssh ProxyCommand in config": (
        "transport: openssh, config_file: {c}",
        "ProxyCommand {cmd}",
    ),
    "paramiko Match exec": ("transport: paramiko, config_file: {c}", 'Match host * exec "{cmd}"'),
}


@pytest.mark.parametrize("attack", list(ATTACKS))
def test_an_inventory_runs_no_command_on_the_controller(tmp_path: Path, attack: str) -> None:
    ssh, line = ATTACKS[attack]
    marker = tmp_path / "marker"
    config = evil_config(tmp_path, marker, line, "openssh" in attack) if line else None
    inv = inventory(tmp_path, ssh.format(m=marker, c=config))
    for command in (["check"], ["facts"], ["plan"]):
        out = gpunode(tmp_path, *command, str(inv))
        assert out.returncode == 4, out.stderr
        assert not marker.exists(), f"{command} ran the inventory's command"
        assert "would run commands on the controller" in out.stderr or (
            "cannot be set in ssh.options" in out.stderr
        )
        assert f"{inv}:4:" in out.stderr and "allow_ssh_commands = true" in out.stderr
    if config is not None:  # the line inside the included file is named
        assert f"{tmp_path}/site/inner.conf:2:" in out.stderr
    # A gpunode.toml beside the inventory cannot allow it ...
    (inv.parent / "gpunode.toml").write_text("allow_ssh_commands = true\n")
    out = gpunode(tmp_path, "facts", str(inv))
    assert out.returncode == 4 and "only your own" in out.stderr, out.stderr
    assert not marker.exists()
    (inv.parent / "gpunode.toml").unlink()
    # ... the controller's user can (which shows the attack is real): their own file
    mine = tmp_path / "xdg" / "gpunode" / "gpunode.toml"
    mine.parent.mkdir(parents=True)
    mine.write_text("allow_ssh_commands = true\n")
    gpunode(tmp_path, "facts", str(inv))
    assert marker.exists(), "the allowed command did not run: the test proves nothing"


@pytest.mark.parametrize(
    "name",
    ["ProxyCommand", "LocalCommand", "PermitLocalCommand", "KnownHostsCommand", "Include",
     "PKCS11Provider", "SecurityKeyProvider", "XAuthLocation", "SendEnv", "Match", "proxycommand"],
)  # fmt: skip
def test_options_that_run_commands_are_refused_unless_allowed(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    ssh = f"{{transport: openssh, options: {{{name}: x}}}}"
    text = f"hosts:\n  a:\n    address: 192.0.2.1\n    ssh: {ssh}\n"
    monkeypatch.delenv(ALLOW_ENV, raising=False)
    with pytest.raises(InventoryError) as exc:
        loads(text, "inv.yaml")
    (problem,) = [str(p) for p in exc.value.problems]
    assert problem.startswith("inv.yaml:4:") and f"{name} cannot be set" in problem
    monkeypatch.setenv(ALLOW_ENV, "1")
    assert loads(text).hosts["a"].ssh.options == {name: "x"}


def test_proxy_jump_stays_allowed_and_checked() -> None:
    base = "hosts:\n  a:\n    address: 192.0.2.1\n    ssh: {transport: openssh, options: "
    assert loads(base + "{ProxyJump: 'ops@bastion:2222'}}\n").hosts["a"].ssh.options
    with pytest.raises(InventoryError) as exc:
        loads(base + "{ProxyJump: 'b -oProxyCommand=id'}}\n", "inv.yaml")
    assert "is not a ProxyJump spec" in str(exc.value.problems[0])


def test_the_users_own_ssh_config_stays_theirs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv(ALLOW_ENV, raising=False)
    own = tmp_path / ".ssh" / "config"
    own.parent.mkdir()
    own.write_text('Match exec "true"\n  User admin\nProxyCommand nc %h %p\n')
    for written in ("~/.ssh/config", str(own)):
        text = f"hosts:\n  a:\n    address: 192.0.2.1\n    ssh: {{config_file: {written!r}}}\n"
        assert loads(text).hosts["a"].ssh.config_file == written
    # the same lines in another file are refused, each named
    other = tmp_path / "other.conf"
    other.write_text(own.read_text())
    with pytest.raises(InventoryError) as exc:
        loads(f"hosts:\n  a:\n    address: 192.0.2.1\n    ssh: {{config_file: {other}}}\n")
    (problem,) = [str(p) for p in exc.value.problems]
    assert f"{other}:1: `Match exec`" in problem and f"{other}:3: ProxyCommand" in problem


def test_the_transports_check_the_config_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A config changed after the inventory was loaded is refused where ssh would read it."""
    from gpunode.inventory.model import SshSettings
    from gpunode.transport.base import HostUnreachableError
    from gpunode.transport.openssh import OpenSSHTransport
    from gpunode.transport.sshconfig import load_config

    monkeypatch.delenv(ALLOW_ENV, raising=False)
    config = tmp_path / "ssh_config"
    config.write_text("Host *\n  Port 22\n")
    settings = SshSettings(config_file=str(config), transport="openssh")
    config.write_text(f'Match exec "id > {tmp_path}/marker"\n')
    with pytest.raises(ValueError, match="would run commands on the controller"):
        load_config(str(config))
    with pytest.raises(HostUnreachableError, match="would run commands on the controller"):
        OpenSSHTransport("a", "127.0.0.1", settings).connect()
    assert not (tmp_path / "marker").exists()
