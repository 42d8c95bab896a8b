"""The SSH transports (paramiko and openssh) against a real OpenSSH server on loopback."""

from __future__ import annotations

import base64
import socket
import subprocess
import threading
import time
import traceback
from collections.abc import Iterator
from pathlib import Path

import paramiko
import pytest

from gpunode.inventory.model import SshSettings
from gpunode.transport.base import BecomeError, CommandTimeoutError, HostUnreachableError
from gpunode.transport.hostkeys import HostKeyChangedError, HostKeyError, fingerprint
from gpunode.transport.secret import Secret
from gpunode.transport.ssh import SSHTransport

from .conftest import MakeTransport, Remote
from .sshd import NOPASS_USER, PASS_USER, SshServer

HOSTILE = ["x; reboot", "$(id)", "`id`", "a'b\"c", "line1\nline2", "  spaced  ", "*", "", "-n"]


@pytest.fixture
def ssh(ssh_server: SshServer, make_transport: MakeTransport) -> Remote:
    return make_transport("t1", "127.0.0.1", ssh_server.settings())


def test_command_exit_codes_and_streaming(ssh: Remote) -> None:
    chunks: list[tuple[str, str, float]] = []
    start = time.monotonic()
    res = ssh.run(
        "echo one; echo err >&2; sleep 0.6; echo two; exit 3",
        on_output=lambda s, t: chunks.append((s, t, time.monotonic() - start)),
    )
    assert res.exit_code == 3 and not res.ok
    assert res.stdout == "one\ntwo\n" and res.stderr == "err\n"
    first = next(c for c in chunks if "one" in c[1])
    last = next(c for c in chunks if "two" in c[1])
    assert last[2] - first[2] > 0.4  # "one" arrived before the sleep ended: streamed
    assert ssh.run(["true"]).exit_code == 0
    assert ssh.run(["id", "-un"]).stdout.strip() == NOPASS_USER


def test_one_connection_many_channels(ssh_server: SshServer, make_transport: MakeTransport) -> None:
    before = ssh_server.accepted()
    t = make_transport("t1", "127.0.0.1", ssh_server.settings())
    try:
        for i in range(20):
            assert t.run(f"echo {i}").stdout == f"{i}\n"
        # channel-open plus exec cost on a reused connection
        start = time.monotonic()
        for _ in range(20):
            t.run("true")
        per = (time.monotonic() - start) / 20
    finally:
        t.close()
    assert ssh_server.accepted_since(before, 1) == 1  # sshd's own log: one login
    assert t.connections_opened == 1 and t.channels_opened == 40
    print(f"channel open+exec+exit on a live connection: {per * 1000:.1f} ms")


def test_stdin_and_env(ssh: Remote) -> None:
    res = ssh.run('cat; printf %s "$GREETING"', stdin=b"from stdin\n", env={"GREETING": "$(id)"})
    assert res.stdout == "from stdin\n$(id)"


def test_hostile_values_arrive_as_one_literal_argument(ssh: Remote) -> None:
    for value in HOSTILE:
        res = ssh.run(["printf", "%s", value])
        assert res.stdout == value, value
        res = ssh.run(["sh", "-c", 'printf "%s" "$#"', "sh", value])
        assert res.stdout == "1"
        res = ssh.run(["printf", "%s", value], sudo=True)
        assert res.stdout == value, value


def test_strict_refuses_unknown_key_with_fingerprint(
    ssh_server: SshServer, make_transport: MakeTransport, tmp_path: Path
) -> None:
    empty = tmp_path / "known_hosts"
    empty.write_text("")
    t = make_transport("t1", "127.0.0.1", ssh_server.settings(known_hosts_file=str(empty)))
    with pytest.raises(HostKeyError) as err:
        t.connect()
    msg = str(err.value)
    if make_transport.kind == "paramiko":  # ssh names the key by its fingerprint alone
        assert f"[127.0.0.1]:{ssh_server.port} {ssh_server.host_pub}" in msg
    kt, b64 = ssh_server.host_pub.split()
    assert fingerprint(paramiko.PKey.from_type_string(kt, base64.b64decode(b64))) in msg
    # independent: ssh-keygen's fingerprint of the server's public key
    fp = subprocess.run(
        ["ssh-keygen", "-lf", str(ssh_server.dir / "ssh_host_ed25519_key.pub")],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()[1]
    assert fp in msg
    assert empty.read_text() == ""  # nothing recorded


def test_accept_new_records_then_refuses_changed(
    ssh_server: SshServer, make_transport: MakeTransport, tmp_path: Path
) -> None:
    kh = tmp_path / "known_hosts"
    kh.write_text("# kept\n")
    s = ssh_server.settings(known_hosts_file=str(kh), host_key_policy="accept-new")
    t = make_transport("t1", "127.0.0.1", s)
    t.connect()
    t.close()
    assert kh.read_text() == f"# kept\n[127.0.0.1]:{ssh_server.port} {ssh_server.host_pub}\n"
    # a second connection uses the recorded key: the file does not grow
    t = make_transport("t1", "127.0.0.1", s)
    t.run("true")
    t.close()
    assert kh.read_text().count(ssh_server.host_pub) == 1
    # the known key changes: refused, under accept-new too, and strict
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(tmp_path / "k")], check=True
    )
    fake = " ".join((tmp_path / "k.pub").read_text().split()[:2])
    kh.write_text(f"[127.0.0.1]:{ssh_server.port} {fake}\n")
    offered = subprocess.run(
        ["ssh-keygen", "-lf", str(ssh_server.dir / "ssh_host_ed25519_key.pub")],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()[1]
    for policy in ("accept-new", "strict"):
        t = make_transport(
            "t1", "127.0.0.1", ssh_server.settings(known_hosts_file=str(kh), host_key_policy=policy)
        )
        with pytest.raises(HostKeyChangedError, match="host key changed for") as err:
            t.connect()
        assert "the host offered" in str(err.value) and offered in str(err.value)
    assert kh.read_text() == f"[127.0.0.1]:{ssh_server.port} {fake}\n"


def test_hashed_known_hosts_entry(
    ssh_server: SshServer, make_transport: MakeTransport, tmp_path: Path
) -> None:
    kh = tmp_path / "known_hosts"
    kh.write_text(ssh_server.known_hosts.read_text())
    subprocess.run(["ssh-keygen", "-H", "-f", str(kh)], check=True, capture_output=True)
    assert kh.read_text().startswith("|1|")
    t = make_transport("t1", "127.0.0.1", ssh_server.settings(known_hosts_file=str(kh)))
    assert t.run("echo ok").stdout == "ok\n"
    t.close()


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A TCP port that accepts connections and never says a word."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(8)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        srv.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(srv.accept()[0])
            except OSError:
                continue

    th = threading.Thread(target=accept, daemon=True)
    th.start()
    yield int(srv.getsockname()[1])
    stop.set()
    th.join()
    for c in held:
        c.close()
    srv.close()


def test_stalled_host_is_unreachable_within_timeout(
    ssh_server: SshServer, make_transport: MakeTransport, silent_port: int
) -> None:
    t = make_transport(
        "stall", "127.0.0.1", ssh_server.settings(port=silent_port, connect_timeout=1.5)
    )
    start = time.monotonic()
    with pytest.raises(HostUnreachableError, match="banner"):
        t.connect()
    took = time.monotonic() - start
    assert took < 4.0, took


def test_refused_port_is_unreachable(ssh_server: SshServer, make_transport: MakeTransport) -> None:
    from .sshd import free_port

    t = make_transport("gone", "127.0.0.1", ssh_server.settings(port=free_port()))
    with pytest.raises(HostUnreachableError, match="refused"):
        t.connect()


def test_command_timeout(ssh: Remote) -> None:
    start = time.monotonic()
    with pytest.raises(CommandTimeoutError):
        ssh.run("sleep 30", timeout=1.0)
    assert time.monotonic() - start < 3
    assert ssh.run("echo still").stdout == "still\n"  # the connection survives


def test_passwordless_sudo(ssh: Remote) -> None:
    res = ssh.run("id -u; cat", sudo=True, stdin=b"in\n")
    assert res.stdout == "0\nin\n"
    assert "GPUNODE" not in res.stderr
    assert ssh.run("echo x >&2; exit 4", sudo=True).exit_code == 4


def test_sudo_with_password(ssh_server: SshServer, make_transport: MakeTransport) -> None:
    pw = Secret(ssh_server.sudo_password)
    t = make_transport("t1", "127.0.0.1", ssh_server.settings(user=PASS_USER), become_password=pw)
    try:
        res = t.run("id -u; cat", sudo=True, stdin=b"payload\n")
        assert res.stdout == "0\npayload\n", res
        assert ssh_server.sudo_password not in res.stdout + res.stderr
        assert t.run(["id", "-un"]).stdout.strip() == PASS_USER
    finally:
        t.close()


def test_sudo_needs_password_and_none_given(
    ssh_server: SshServer, make_transport: MakeTransport
) -> None:
    t = make_transport("t1", "127.0.0.1", ssh_server.settings(user=PASS_USER))
    start = time.monotonic()
    with pytest.raises(BecomeError, match="password is required"):
        t.run("id -u", sudo=True)
    assert time.monotonic() - start < 5
    t.close()


def test_wrong_sudo_password_fails_fast_and_never_leaks(
    ssh_server: SshServer,
    make_transport: MakeTransport,
    caplog: pytest.LogCaptureFixture,
    capfd: pytest.CaptureFixture[str],
) -> None:
    import logging

    caplog.set_level(logging.DEBUG)
    wrong = "Wr0ng-" + "q7Zx" * 3
    t = make_transport(
        "t1", "127.0.0.1", ssh_server.settings(user=PASS_USER), become_password=Secret(wrong)
    )
    t.connect()
    seen_ps: list[str] = []
    done = threading.Event()

    def watch() -> None:
        while not done.is_set():
            seen_ps.append(
                subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
            )
            time.sleep(0.02)

    watcher = threading.Thread(target=watch)
    sudo_log_before = len(_read(ssh_server.sudo_log))
    watcher.start()
    start = time.monotonic()
    try:
        with pytest.raises(BecomeError) as err:
            t.run("sleep 1; id -u", sudo=True)
    finally:
        done.set()
        watcher.join()
        t.close()
    took = time.monotonic() - start
    # sudo waits ~2 s after a wrong password before asking again; three tries would take 6+ s
    # (the auth log below is the exact check; this one allows for a busy machine)
    assert took < 6, took
    assert str(err.value) == f"sudo: incorrect password for {PASS_USER}@t1"
    tb = "".join(traceback.format_exception(err.value))
    out, errout = capfd.readouterr()
    assert len(seen_ps) > 3
    for text in [tb, caplog.text, out, errout, repr(err.value), *seen_ps]:
        assert wrong not in text
    assert "***" in repr(Secret(wrong)) and wrong not in repr(Secret(wrong))
    # sudo's own log: one wrong password was tried, not three
    deadline = time.monotonic() + 10
    while "incorrect password attempt" not in _read(ssh_server.sudo_log)[sudo_log_before:]:
        assert time.monotonic() < deadline, _read(ssh_server.sudo_log)
        time.sleep(0.05)
    log = _read(ssh_server.sudo_log)[sudo_log_before:]
    assert "1 incorrect password attempt" in log and "3 incorrect" not in log, log
    assert wrong not in log


def test_get_with_and_without_sudo(ssh: Remote, ssh_server: SshServer) -> None:
    """Bytes as they are: the login user's file as that user, root's 0600 file only with
    sudo."""
    import os
    import pwd

    from gpunode.transport.base import TransportError

    data = b"binary\x00\xff\nline\n"
    user = pwd.getpwnam(NOPASS_USER)
    target = Path(user.pw_dir) / "gpunode-get.txt"
    target.write_bytes(data)
    os.chown(target, user.pw_uid, user.pw_gid)
    try:
        assert ssh.get(str(target)) == data
    finally:
        target.unlink()
    root_file = Path(f"/etc/gpunode-test-get-{os.getpid()}.conf")
    root_file.write_bytes(data)
    root_file.chmod(0o600)
    try:
        assert ssh.get(str(root_file), sudo=True) == data
        with pytest.raises(TransportError):
            ssh.get(str(root_file))  # not readable without sudo
    finally:
        root_file.unlink(missing_ok=True)


def test_ssh_config_and_proxyjump(ssh_server: SshServer, tmp_path: Path) -> None:
    cfg = tmp_path / "config"
    cfg.write_text(
        "Host jumpbox\n  HostName 127.0.0.1\n"
        f"  Port {ssh_server.port}\n  User {NOPASS_USER}\n  IdentityFile {ssh_server.client_key}\n"
        "Host gpu-behind\n  HostName 127.0.0.1\n"
        f"  Port {ssh_server.port}\n  User {PASS_USER}\n  IdentityFile {ssh_server.client_key}\n"
        "  ProxyJump jumpbox\n"
    )
    before = ssh_server.accepted()
    log_before = len(ssh_server.log.read_text(errors="replace"))
    s = SshSettings.model_validate(
        {
            "known_hosts_file": str(ssh_server.known_hosts),
            "config_file": str(cfg),
            "connect_timeout": 5.0,
        }
    )
    t = SSHTransport("behind", "gpu-behind", s)
    try:
        assert t.run(["id", "-un"]).stdout.strip() == PASS_USER  # User from the config
        assert t.run("echo $SSH_CLIENT").stdout.split()[0] == "127.0.0.1"
        assert t.connections_opened == 2  # jump + target
    finally:
        t.close()
    assert ssh_server.accepted_since(before, 2) == 2
    log = ssh_server.log.read_text(errors="replace")[log_before:]
    assert f"Accepted publickey for {NOPASS_USER}" in log
    # the jump login opened a direct-tcpip channel to the target (sshd logs it at DEBUG1)
    assert f"target 127.0.0.1 port {ssh_server.port}" in log
    assert "server_request_direct_tcpip: originator" in log


def _read(path: Path) -> str:
    return path.read_text(errors="replace") if path.exists() else ""


def test_silent_command_is_unreachable_after_the_inactivity_timeout(ssh: Remote) -> None:
    ssh.inactivity_timeout = 1.0
    start = time.monotonic()
    with pytest.raises(HostUnreachableError, match="no output for 1 s"):
        ssh.run("sleep 30")
    assert time.monotonic() - start < 4
