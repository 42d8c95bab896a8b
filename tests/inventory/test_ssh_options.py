"""ssh.transport, ssh.proxy_jump and ssh.options: what reaches `ssh`'s argv is checked at load."""

from __future__ import annotations

import json
import textwrap

import pytest

from gpunode.inventory import InventoryError, loads


def _problems(text: str) -> list[str]:
    with pytest.raises(InventoryError) as exc:
        loads(textwrap.dedent(text), "inv.yaml")
    return [str(p) for p in exc.value.problems]


def _host(ssh: str) -> str:
    return f"hosts:\n  a:\n    address: 192.0.2.1\n    ssh: {ssh}\n"


@pytest.mark.parametrize(
    "spec",
    ["-oProxyCommand=id", "bastion -v", "a,-b", "ops@bast%h", "b'x", "b\tx", "a@@b", "[::1", ""],
)
def test_proxy_jump_is_hops_and_nothing_else(spec: str) -> None:
    problems = _problems(_host(f"{{proxy_jump: {json.dumps(spec)}}}"))
    assert len(problems) == 1 and "hosts.a.ssh.proxy_jump" in problems[0], problems


@pytest.mark.parametrize(
    "spec", ["bastion", "ops@bastion.lab:2222", "a,b@c:22", "[2001:db8::1]:22", "jump_1"]
)
def test_ordinary_jump_specs_are_accepted(spec: str) -> None:
    assert loads(_host(f"{{proxy_jump: {json.dumps(spec)}}}")).hosts["a"].ssh.proxy_jump == spec


@pytest.mark.parametrize(
    ("options", "why"),
    [
        ({"Proxy Command": "x"}, "not an ssh option name"),
        ({"-oX": "y"}, "not an ssh option name"),
        ({"Ciphers=aes": "x"}, "not an ssh option name"),
        ({"ControlPath": "/tmp/x"}, "private directory"),
        ({"stricthostkeychecking": "no"}, "ssh.host_key_policy"),
        ({"UserKnownHostsFile": "/dev/null"}, "ssh.known_hosts_file"),
        ({"Ciphers": "-aes128-ctr"}, "cannot be empty or start with `-`"),
        ({"Ciphers": "a\nProxyCommand id"}, "U+000A"),
    ],
)
def test_options_are_checked(options: dict[str, str], why: str) -> None:
    ssh = json.dumps({"transport": "openssh", "options": options})
    problems = _problems(_host(ssh))
    assert any(why in p for p in problems), problems


def test_options_need_the_openssh_transport() -> None:
    problems = _problems(_host('{options: {Compression: "yes"}}'))
    assert any("set ssh.transport: openssh" in p for p in problems), problems


def test_transport_and_options_merge_from_defaults() -> None:
    inv = loads(
        "defaults: {ssh: {transport: openssh, options: {Compression: 'yes'}}}\n"
        + _host("{options: {ServerAliveCountMax: 5}}")
    )
    ssh = inv.hosts["a"].ssh
    assert ssh.transport == "openssh"
    assert ssh.options == {"Compression": "yes", "ServerAliveCountMax": 5}
    assert loads(_host("{port: 22}")).hosts["a"].ssh.transport == "paramiko"
