"""A real OpenSSH server on 127.0.0.1 for transport tests, with real users and sudo."""

from __future__ import annotations

import contextlib
import fcntl
import os
import pwd
import secrets
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from gpunode.inventory.model import SshSettings
from tests.conftest import SLOT

_SUFFIX = "" if SLOT == 0 else str(SLOT)  # a second test session has its own users
NOPASS_USER = f"gpunode-t{_SUFFIX}"  # passwordless sudo
PASS_USER = f"gpunode-p{_SUFFIX}"  # sudo asks for a password


def _slot_password() -> str:
    """PASS_USER's sudo password: one per slot, kept where only root reads it. Not one per
    module: tests/transport imports this file as `transport.sshd` and tests/cli as
    `tests.transport.sshd`, two modules in one process, and a second server started from
    the other must not change the password the first's tests send."""
    folder = Path("/run/gpunode-tests")
    folder.mkdir(mode=0o700, exist_ok=True)
    path = folder / f"sudo-password-{SLOT}"
    if not path.exists():  # written whole, then linked: a reader never sees it half-made
        draft = folder / f".draft-{os.getpid()}-{secrets.token_hex(4)}"
        draft.write_text("pw-" + secrets.token_hex(12))
        with contextlib.suppress(FileExistsError):
            os.link(draft, path)
        draft.unlink()
    return path.read_text()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _ensure_user(name: str, password: str, pubkey: str) -> Path:
    # useradd and chpasswd give up at once while another holds /etc/passwd's lock: parallel
    # test workers (one slot each) take turns
    with open("/tmp/gpunode-test-users.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            home = Path(pwd.getpwnam(name).pw_dir)
        except KeyError:
            subprocess.run(["useradd", "-m", "-s", "/bin/bash", name], check=True)
            home = Path(pwd.getpwnam(name).pw_dir)
        subprocess.run(["chpasswd"], input=f"{name}:{password}\n", text=True, check=True)
    ssh_dir = home / ".ssh"
    ssh_dir.mkdir(mode=0o700, exist_ok=True)
    # every live server's client key stays authorized: a worker may start a second server
    # (tests/cli) while its session's is still in use (pytest-xdist runs files in any order)
    keys = ssh_dir / "authorized_keys"
    have = keys.read_text() if keys.exists() else ""
    if pubkey not in have:
        keys.write_text(have + pubkey)
    pw = pwd.getpwnam(name)
    for p in (ssh_dir, ssh_dir / "authorized_keys"):
        os.chown(p, pw.pw_uid, pw.pw_gid)
    os.chmod(ssh_dir / "authorized_keys", 0o600)
    return home


@dataclass
class SshServer:
    port: int
    dir: Path
    client_key: Path
    known_hosts: Path  # holds this server's key as [127.0.0.1]:port
    host_pub: str  # "ssh-ed25519 AAAA..."
    log: Path
    sudo_password: str  # PASS_USER's password
    host: str = "127.0.0.1"

    def settings(self, user: str = NOPASS_USER, **kw: object) -> SshSettings:
        base: dict[str, object] = {
            "user": user,
            "port": self.port,
            "identity_file": str(self.client_key),
            "known_hosts_file": str(self.known_hosts),
            "config_file": None,
            "connect_timeout": 5.0,
            "command_timeout": 60.0,
        }
        base.update(kw)
        return SshSettings.model_validate(base)

    @property
    def sudo_log(self) -> Path:
        """sudo's log of PASS_USER's attempts, written by sudo itself."""
        return self.dir / "sudo.log"

    def accepted(self) -> int:
        """How many logins sshd accepted (its own log; independent of paramiko)."""
        return self.log.read_text(errors="replace").count("Accepted publickey")

    def accepted_since(self, before: int, want: int, timeout: float = 10) -> int:
        """Logins accepted since `before`, once `want` are logged or the deadline passes
        (sshd's children write the log as they go)."""
        deadline = time.monotonic() + timeout
        while self.accepted() - before < want and time.monotonic() < deadline:
            time.sleep(0.05)
        return self.accepted() - before


@contextlib.contextmanager
def sshd(
    root: Path, *, users_of: SshServer | None = None, host_ca: Path | None = None
) -> Iterator[SshServer]:
    """A running sshd. `users_of`: a second server for the same test users (and client
    key) as that one. `host_ca`: a CA private key that signs this server's host key (it
    then offers the certificate, for the principals 127.0.0.1 and localhost)."""
    root.mkdir(parents=True, exist_ok=True)
    hostkey = root / "ssh_host_ed25519_key"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(hostkey)], check=True)
    certificate = ""
    if host_ca is not None:
        subprocess.run(
            ["ssh-keygen", "-q", "-s", str(host_ca), "-I", "gpunode-test-host", "-h",
             "-n", "127.0.0.1,localhost", f"{hostkey}.pub"],
            check=True,
        )  # fmt: skip
        certificate = f"HostCertificate {hostkey}-cert.pub\n"
    # one file per server: a second server's end must not take sudo from the first's users
    tag = "".join(ch for ch in root.name if ch.isalnum())
    sudoers = Path(f"/etc/sudoers.d/gpunode-tests{_SUFFIX}-{tag}")
    if users_of is not None:
        client_key, password = users_of.client_key, users_of.sudo_password
    else:
        client_key = root / "id_ed25519"
        subprocess.run(
            ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(client_key)], check=True
        )
        pub = (root / "id_ed25519.pub").read_text()
        password = _slot_password()  # a second server leaves the first's working
        _ensure_user(NOPASS_USER, "x-" + secrets.token_hex(12), pub)
        _ensure_user(PASS_USER, password, pub)
        sudoers.write_text(
            f"{NOPASS_USER} ALL=(ALL) NOPASSWD: ALL\n"
            f"{PASS_USER} ALL=(ALL) ALL\n"
            f"Defaults:{PASS_USER} timestamp_timeout=0\n"
            # sudo's own log of each attempt: no syslog daemon is needed to read it
            f"Defaults:{PASS_USER} logfile={root}/sudo.log\n"
        )
        os.chmod(sudoers, 0o440)
    Path("/run/sshd").mkdir(exist_ok=True)
    port = free_port()
    log = root / "sshd.log"
    cfg = root / "sshd_config"
    cfg.write_text(
        f"Port {port}\nListenAddress 127.0.0.1\nHostKey {hostkey}\nPidFile {root}/sshd.pid\n"
        "PasswordAuthentication no\nKbdInteractiveAuthentication no\nUsePAM yes\n"
        "PermitRootLogin no\nAllowTcpForwarding yes\nLogLevel DEBUG1\nMaxStartups 100\n"
        f"AllowUsers {NOPASS_USER} {PASS_USER}\n"
        "Subsystem sftp /usr/lib/openssh/sftp-server\n" + certificate
    )
    proc = subprocess.Popen(["/usr/sbin/sshd", "-D", "-E", str(log), "-f", str(cfg)])
    host_pub = " ".join((root / "ssh_host_ed25519_key.pub").read_text().split()[:2])
    known = root / "known_hosts"
    known.write_text(f"[127.0.0.1]:{port} {host_pub}\n")
    deadline = time.monotonic() + 10
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            if time.monotonic() > deadline or proc.poll() is not None:
                proc.kill()
                raise RuntimeError("sshd did not start: " + log.read_text()) from None
            time.sleep(0.05)
    try:
        yield SshServer(port, root, client_key, known, host_pub, log, password)
    finally:
        proc.terminate()
        proc.wait(10)
        if users_of is None:
            sudoers.unlink(missing_ok=True)
        shutil.rmtree(root, ignore_errors=True)
