"""Bringing a lab up and taking it down, leaving the machine as it was."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gpunode_lab import control, procs
from gpunode_lab.rootfs import build_base, generate_host_key, hash_password, prepare_upper
from gpunode_lab.state import LabConfig, LabPaths, host_names


class LabError(Exception):
    pass


Say = Callable[[str], None]


def _quiet(_: str) -> None:
    pass


def mounts_under(root: Path) -> list[str]:
    prefix = str(root)
    found = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        point = line.split()[4].replace("\\040", " ")
        if point == prefix or point.startswith(prefix + "/"):
            found.append(point)
    return found


def _free_port(address: str, preferred: int) -> int:
    for port in (preferred, 0):
        with socket.socket() as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                s.bind((address, port))
            except OSError:
                continue
            chosen: int = s.getsockname()[1]
            return chosen
    raise LabError(f"no free port on {address}")


def _client_key(paths: LabPaths) -> str:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    paths.client.mkdir(mode=0o700, parents=True, exist_ok=True)
    key = Ed25519PrivateKey.generate()
    paths.identity.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.OpenSSH,
            serialization.NoEncryption(),
        )
    )
    os.chmod(paths.identity, 0o600)
    pub = (
        key.public_key()
        .public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
        .decode()
    )
    line = f"{pub} gpunode-lab\n"
    paths.identity.with_suffix(".pub").write_text(line)
    return line


def _build_repo(paths: LabPaths, base_url: str, mirror: str, say: Say) -> Path:
    try:
        from gpunode_lab.repo import build_repository  # type: ignore[attr-defined,unused-ignore]
    except ImportError:
        empty = paths.repo / "empty"
        empty.mkdir(parents=True, exist_ok=True)
        return empty
    say(f"building the package repository ({mirror} mirror) ...")
    served: Path = build_repository(paths.repo, base_url, mirror)
    return served


def add_ubuntu_archive(base: Path, served: Path, cfg: LabConfig) -> None:
    """Every host has Ubuntu's archive among its apt sources, as an Ubuntu install does:
    here the lab's stand-in of it, with its own key."""
    keyring = served / "ubuntu" / "ubuntu-archive-keyring.gpg"
    if not keyring.exists():  # a lab without the repository package
        return
    from gpunode_lab.repo import ubuntu_archive

    for rel, data in (
        (ubuntu_archive.KEYRING, keyring.read_bytes()),
        (ubuntu_archive.SOURCES, ubuntu_archive.sources(cfg.repo_url, cfg.ubuntu).encode()),
    ):
        target = base / rel.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
        target.chmod(0o644)


def up(
    paths: LabPaths, want: LabConfig, say: Say = _quiet, env: dict[str, str] | None = None
) -> LabConfig:
    env = dict(os.environ) if env is None else env
    have = paths.load_config()
    if have is not None and control.alive(paths):
        if have.same_shape(want):
            say(f"lab already up in {paths.root} ({have.hosts} hosts)")
            wait_ready(paths, have, say)
            return have
        say("a lab of another shape is running: taking it down first")
    if paths.root.exists():
        down(paths, say=_quiet)

    password_hash = None
    if want.sudo_password_env:
        password = env.get(want.sudo_password_env)
        if not password:
            raise LabError(
                f"--sudo-password-env {want.sudo_password_env}: that environment variable "
                "is empty or unset; export the sudo password in it first"
            )
        password_hash = hash_password(password)

    t0 = time.monotonic()
    cfg = want
    cfg.names = host_names(cfg.hosts)
    paths.root.mkdir(parents=True, exist_ok=True)
    os.chmod(paths.root, 0o755)
    paths.disk.mkdir(exist_ok=True)
    subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=50%,mode=0700", "gpunode-lab", str(paths.disk)],
        check=True,
    )
    pub = _client_key(paths)
    build_base(paths, cfg, pub, password_hash)
    if cfg.slurm:
        from gpunode_lab import slurm

        try:
            slurm.prepare(paths, cfg)
        except slurm.SlurmError as exc:
            raise LabError(str(exc)) from None
    known = []
    for name in cfg.names:
        hp = paths.host(name)
        key = generate_host_key(hp.keys, name)
        addr = cfg.host_address(name)
        known.append(f"{addr if cfg.port == 22 else f'[{addr}]:{cfg.port}'} {key}\n")
        prepare_upper(hp, name, cfg)
    paths.known_hosts.write_text("".join(known))

    cfg.repo_port = _free_port(cfg.repo_address, 80)
    port = "" if cfg.repo_port == 80 else f":{cfg.repo_port}"
    cfg.repo_url = f"http://{cfg.repo_address}{port}"
    cfg.repo_dir = str(_build_repo(paths, cfg.repo_url, cfg.mirror, say))
    add_ubuntu_archive(paths.base, Path(cfg.repo_dir), cfg)
    paths.config.write_text(cfg.to_json())

    with open(paths.log, "ab") as log:
        subprocess.Popen(
            [sys.executable, "-m", "gpunode_lab.supervisor", str(paths.root)],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            close_fds=True,
            start_new_session=True,
            cwd="/",
            env=_same_gpunode_env(),
        )
    wait_ready(paths, cfg, say)
    if cfg.slurm:
        _start_slurm(paths, cfg, say)
    say(f"{cfg.hosts} hosts up in {time.monotonic() - t0:.1f}s")
    return cfg


def _start_slurm(paths: LabPaths, cfg: LabConfig, say: Say) -> None:
    from gpunode_lab import slurm

    say("starting munged and slurmctld ...")
    try:
        slurm.start_controller(paths, cfg)
        slurm.wait_controller(paths)
    except (slurm.SlurmError, subprocess.CalledProcessError) as exc:
        raise LabError(f"Slurm: {exc}") from None
    say(f"Slurm up: export SLURM_CONF={slurm.conf_path(paths)}")


def _same_gpunode_env() -> dict[str, str]:
    """The supervisor runs from "/", so point it at the gpunode this process imported,
    not whichever one happens to be installed."""
    root = str(Path(__file__).resolve().parents[2])
    path = os.environ.get("PYTHONPATH")
    return {**os.environ, "PYTHONPATH": root if not path else f"{root}{os.pathsep}{path}"}


def wait_ready(paths: LabPaths, cfg: LabConfig, say: Say = _quiet, timeout: float = 120) -> None:
    """Until every host has booted and its sshd accepts connections (unless a fault says no)."""
    start = time.monotonic()
    deadline = start + timeout
    waiting: set[str] = set(cfg.names)
    while time.monotonic() < deadline:
        try:
            hosts = control.request(paths, "status", timeout=10)["hosts"]
        except control.SupervisorGone:
            if time.monotonic() - start > 15:
                raise LabError(f"the lab's supervisor is not running; see {paths.log}") from None
            time.sleep(0.1)
            continue
        for h in hosts:
            if h["name"] not in waiting or h["state"] != "up":
                continue
            silent = "refuse" in h["faults"] or "stall" in h["faults"]
            if silent or control.accepts(h["address"], h["port"]):
                waiting.discard(h["name"])
        if not waiting:
            return
        time.sleep(0.1)
    raise LabError(f"hosts not up after {timeout:.0f}s: {', '.join(sorted(waiting))}")


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def down(paths: LabPaths, say: Say = _quiet) -> None:
    cfg = paths.load_config()
    if cfg is not None and cfg.slurm:
        from gpunode_lab import slurm

        slurm.stop_controller(paths, cfg)
    if control.alive(paths):
        with contextlib.suppress(control.SupervisorGone):
            control.request(paths, "shutdown", timeout=30)
        with contextlib.suppress(OSError, ValueError):
            pid = int(paths.pidfile.read_text())
            deadline = time.monotonic() + 20
            while _pid_alive(pid) and time.monotonic() < deadline:
                time.sleep(0.05)
    deadline = time.monotonic() + 20
    while True:
        left = procs.lab_processes(paths.root)
        if not left:
            break
        if time.monotonic() > deadline:
            raise LabError(f"processes of the lab would not die: {left}")
        for pid in left:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.05)
    for point in sorted(mounts_under(paths.root), key=len, reverse=True):
        out = subprocess.run(["umount", point], capture_output=True, text=True, check=False)
        if out.returncode != 0:
            subprocess.run(["umount", "-l", point], capture_output=True, check=False)
    if mounts_under(paths.root):
        raise LabError(f"mounts under {paths.root} remain: {mounts_under(paths.root)}")
    if paths.root.exists():
        shutil.rmtree(paths.root)
    say(f"lab in {paths.root} is down")


def status(paths: LabPaths) -> tuple[LabConfig | None, list[dict[str, Any]] | None]:
    cfg = paths.load_config()
    if cfg is None:
        return None, None
    try:
        hosts = control.request(paths, "status", timeout=10)["hosts"]
    except control.SupervisorGone:
        return cfg, None
    return cfg, hosts
