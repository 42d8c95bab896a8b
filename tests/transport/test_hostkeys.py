"""known_hosts as OpenSSH reads it: markers, patterns, the global file; against a real sshd,
with both transports (paramiko's reader is gpunode's own, openssh's is OpenSSH's)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import paramiko
import pytest

from gpunode.transport import hostkeys
from gpunode.transport.hostkeys import (
    HostKeyChangedError,
    HostKeyError,
    HostKeyRevokedError,
    KnownHosts,
    host_matches,
)

from .conftest import MakeTransport
from .sshd import SshServer


def _new_key(tmp_path: Path, name: str = "other") -> str:
    """A fresh ed25519 public key, "ssh-ed25519 AAAA..."."""
    path = tmp_path / name
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)], check=True)
    return " ".join((tmp_path / f"{name}.pub").read_text().split()[:2])


def _connect(
    make: MakeTransport, server: SshServer, kh: Path, address: str = "127.0.0.1", **kw: object
) -> str:
    if make.kind == "openssh":  # OpenSSH reads the global files itself: the same ones
        kw["options"] = {"GlobalKnownHostsFile": " ".join(hostkeys.GLOBAL_KNOWN_HOSTS)}
    t = make("t1", address, server.settings(known_hosts_file=str(kh), **kw))
    try:
        return t.run(["echo", "in"]).stdout
    finally:
        t.close()


@pytest.fixture(autouse=True)
def _no_global_file(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The machine's own /etc/ssh/ssh_known_hosts stays out of these tests."""
    monkeypatch.setattr(hostkeys, "GLOBAL_KNOWN_HOSTS", (str(tmp_path / "absent"),))


def test_patterns() -> None:
    assert host_matches("a.example.com,b.example.com", "b.example.com")
    assert host_matches("*.example.com", "gpu1.EXAMPLE.com")
    assert not host_matches("*.example.com", "[gpu1.example.com]:2222")
    assert host_matches("[*.example.com]:2222", "[gpu1.example.com]:2222")
    assert host_matches("gpu?", "gpu7") and not host_matches("gpu?", "gpu17")
    assert not host_matches("*,!gpu7", "gpu7") and host_matches("*,!gpu7", "gpu8")
    assert not host_matches("[127.0.0.1]:22", "1")  # brackets are literal, not a class
    hashed = paramiko.HostKeys.hash_host("[10.0.0.5]:2222")
    assert host_matches(hashed, "[10.0.0.5]:2222") and not host_matches(hashed, "10.0.0.5")


def test_marker_lines_used_to_crash_and_other_hosts_are_unaffected(
    ssh_server: SshServer, make_transport: MakeTransport, tmp_path: Path
) -> None:
    """The attack: a known_hosts with `@cert-authority` and `@revoked` lines (and a line of
    garbage). paramiko's own reader stops the whole run on them; ours skips, uses the rest."""
    ca, old = _new_key(tmp_path, "ca"), _new_key(tmp_path, "old")
    kh = tmp_path / "known_hosts"
    kh.write_text(
        f"@cert-authority *.corp.example {ca}\n"
        f"@revoked * {old}\n"
        "broken-line ssh-ed25519 !!!not-base64!!!\n"
        "@unknown-marker x ssh-ed25519 AAAA\n"
        f"{ssh_server.known_hosts.read_text()}"
    )
    with pytest.raises(Exception) as crash:  # what the run died of before
        paramiko.HostKeys().load(str(kh))
    assert not isinstance(crash.value, paramiko.SSHException)
    assert _connect(make_transport, ssh_server, kh) == "in\n"


def test_revoked_key_is_refused_before_login(
    ssh_server: SshServer, make_transport: MakeTransport, tmp_path: Path
) -> None:
    """The server's own key is on a @revoked line: refused, whatever else lists it, under
    either policy, before authenticating (sshd logs no login), and nothing is recorded."""
    srv = ssh_server.host_pub
    name = f"[127.0.0.1]:{ssh_server.port}"
    cases = {
        "also listed plainly": f"{name} {srv}\n@revoked {name} {srv}\n",
        "only revoked": f"@revoked * {srv}\n",
        "another key known": f"{name} {_new_key(tmp_path)}\n@revoked {name} {srv}\n",
    }
    for why, text in cases.items():
        for policy in ("strict", "accept-new"):
            kh = tmp_path / "known_hosts"
            kh.write_text(text)
            before = ssh_server.accepted()
            with pytest.raises(HostKeyRevokedError, match="host key is revoked") as err:
                _connect(make_transport, ssh_server, kh, host_key_policy=policy)
            assert isinstance(err.value, HostKeyChangedError), why  # exit 6, not 3
            assert f"{kh}:" in str(err.value), why  # names the @revoked line
            assert kh.read_text() == text, why  # accept-new recorded nothing
            assert ssh_server.accepted_since(before, 1, timeout=0.5) == 0, why


def test_cert_authority_only_host_is_refused_with_why(
    ssh_server: SshServer, make_transport: MakeTransport, tmp_path: Path
) -> None:
    """A host covered only by @cert-authority: paramiko cannot check a host certificate,
    so it is refused with that reason (not a crash); a host with a plain key connects."""
    port = ssh_server.port
    kh = tmp_path / "known_hosts"
    kh.write_text(
        f"@cert-authority [127.0.0.1]:{port},[localhost]:{port} {_new_key(tmp_path, 'ca')}\n"
        f"[localhost]:{port} {ssh_server.host_pub}\n"
    )
    with pytest.raises(HostKeyError) as err:
        _connect(make_transport, ssh_server, kh)
    msg = str(err.value)
    assert not isinstance(err.value, HostKeyChangedError)
    if make_transport.kind == "paramiko":  # OpenSSH: the host offers no certificate
        assert "paramiko cannot verify host certificates: add the host's key, or" in msg
        assert f"{kh}:1" in msg
    assert _connect(make_transport, ssh_server, kh, address="localhost") == "in\n"


def test_global_known_hosts_file_is_read(
    ssh_server: SshServer,
    make_transport: MakeTransport,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    empty = tmp_path / "known_hosts"
    empty.write_text("")
    glob = tmp_path / "ssh_known_hosts"
    monkeypatch.setattr(hostkeys, "GLOBAL_KNOWN_HOSTS", (str(glob), str(tmp_path / "none")))
    glob.write_text(ssh_server.known_hosts.read_text())
    assert (
        _connect(make_transport, ssh_server, empty) == "in\n"
    )  # strict, and the key is only in the global
    assert empty.read_text() == ""
    glob.write_text(f"[127.0.0.1]:{ssh_server.port} {_new_key(tmp_path)}\n")
    with pytest.raises(HostKeyChangedError, match="host key changed for"):
        _connect(make_transport, ssh_server, empty)
    glob.write_text(f"@revoked * {ssh_server.host_pub}\n")
    with pytest.raises(HostKeyRevokedError):
        _connect(
            make_transport, ssh_server, ssh_server.known_hosts
        )  # a revoked key, whichever file says so


def test_unreadable_global_file_is_passed_over(tmp_path: Path) -> None:
    user = tmp_path / "known_hosts"
    user.write_text("")
    known = KnownHosts.load([str(user)], optional=[str(tmp_path)])  # a directory: EISDIR
    assert known.files == [str(user)]
    with pytest.raises(OSError):
        KnownHosts.load([str(tmp_path)])


def test_a_file_is_parsed_once_a_version_and_again_once_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each host of a run reads the inventory's known_hosts: a fleet's hosts each parsing
    every line of it was quadratic. A line appended (accept-new) is read."""
    kh = tmp_path / "known_hosts"
    keys = [_new_key(tmp_path, f"k{i}") for i in range(3)]
    kh.write_text("".join(f"host{i} {keys[i]}\n" for i in range(2)))
    parsed: list[int] = []
    real = hostkeys._parse

    def counted(path: str, lineno: int, text: str) -> hostkeys.KnownLine | None:
        parsed.append(lineno)
        return real(path, lineno, text)

    monkeypatch.setattr(hostkeys, "_parse", counted)
    for _ in range(50):
        assert [line.lineno for line, _ in KnownHosts.load([str(kh)]).plain_for("host1")] == [2]
    assert len(parsed) == 2
    with kh.open("a") as fh:
        fh.write(f"host2 {keys[2]}\n")
    assert [line.lineno for line, _ in KnownHosts.load([str(kh)]).plain_for("host2")] == [3]


def test_the_lines_for_a_name_are_those_a_whole_scan_finds(tmp_path: Path) -> None:
    """plain_for looks a name up among the lines that list it plainly and those any name may
    match (wildcards, negations, hashed names): the same lines, in the same order, as
    host_matches over every line."""
    import base64
    import hashlib
    import hmac
    import random

    rnd = random.Random(7)
    keys = [_new_key(tmp_path, f"k{i}") for i in range(10)]
    names = ["alpha", "Beta", "gamma.lab", "[delta]:2222", "10.0.0.5", "epsilon"]

    def hashed(name: str) -> str:
        salt = rnd.randbytes(20)
        mac = hmac.new(salt, name.encode(), hashlib.sha1).digest()
        return f"|1|{base64.b64encode(salt).decode()}|{base64.b64encode(mac).decode()}"

    shapes = [
        lambda: rnd.choice(names),
        lambda: ",".join(rnd.sample(names, 2)),
        lambda: rnd.choice(["*.lab", "gam?a.lab", "*", "[delta]:*"]),
        lambda: f"!{rnd.choice(names)},*",
        lambda: hashed(rnd.choice(names).lower()),
        lambda: rnd.choice(names).upper(),
    ]
    lines = []
    for _ in range(120):
        marker = rnd.choice(["", "", "", "", "@revoked ", "@cert-authority "])
        key = rnd.choice(keys[:2] if marker == "@revoked " else keys)  # two keys revoked
        lines.append(f"{marker}{rnd.choice(shapes)()} {key}\n")
    kh = tmp_path / "known_hosts"
    kh.write_text("".join(lines))
    known = KnownHosts.load([str(kh)])
    revoked = {line.blob for line in known.lines if line.marker == "@revoked"}
    found = 0
    for name in [*names, "zeta", "DELTA"]:
        want = [
            (line.path, line.lineno)
            for line in known.lines
            if not line.marker and line.blob not in revoked and host_matches(line.patterns, name)
        ]
        got = [(line.path, line.lineno) for line, _ in known.plain_for(name)]
        assert got == want, name
        found += len(got)
    assert found >= 20  # the lines of every shape are found, not none of them
