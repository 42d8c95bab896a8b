"""`gpunode lab up --slurm`: a real Slurm cluster over the lab's hosts, from Debian's packages.

The controller side (this machine, outside the hosts) runs munged and slurmctld on the
lab's repository address; every host runs its own munged and `slurmd -N HOST` as lab units
(`# gpunode lab unit`), started at boot by the host's init and restarted through its
systemctl, as a real node's would be. Hosts share the machine's network namespace, so each
slurmd binds to its own loopback address (`NoInAddrAny`) and slurmctld to a port of the
lab's own (its net), so labs of other test slots keep apart.

The lab's GPUs have no device files (/dev is the machine's): gres.conf names files the host's
boot writes under /run/gpunode-lab-dev once its nvidia module has loaded, so a slurmd started
without the driver reports no GPUs, as a real one does. There is no slurmdbd here: accounting
is `accounting_storage/none` and finished jobs are kept in `jobcomp/filetxt` (jobcomp.log) and
in `scontrol show job` for MinJobAge seconds; `sacct` has nothing to read.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

from gpunode_lab.state import LabConfig, LabPaths

UNIT_MARK = "# gpunode lab unit"
DEV_DIR = "/run/gpunode-lab-dev"  # where a host's boot writes its GPUs' device stand-ins
CTL_PORT_BASE = 16817  # + the lab's net modulo 2000: labs of other slots keep apart
SLURMD_PORT = 6818  # on each host's own address
MIN_JOB_AGE = 600


class SlurmError(Exception):
    pass


def available() -> str | None:
    """What is missing to run Slurm here, or None."""
    missing = [b for b in ("munged", "slurmctld", "slurmd", "scontrol") if not shutil.which(b)]
    if missing:
        return (
            f"{', '.join(missing)} not found: install Debian's slurmctld slurmd munge "
            "slurm-client (scripts/setup.sh --dev does)"
        )
    return None


def slurm_dir(paths: LabPaths) -> Path:
    return paths.root / "slurm"


def conf_path(paths: LabPaths) -> Path:
    """The controller side's slurm.conf: what SLURM_CONF names for scontrol, sbatch, sinfo."""
    return slurm_dir(paths) / "slurm.conf"


def munge_socket(cfg: LabConfig) -> str:
    """One path on both sides: on this machine it is the lab's, in a host its private /run's."""
    return f"/run/gpunode-lab-munge-{cfg.net}/munge.socket"


def ctl_port(cfg: LabConfig) -> int:
    return CTL_PORT_BASE + cfg.net % 2000


def slurm_conf(paths: LabPaths, cfg: LabConfig) -> str:
    state = slurm_dir(paths)
    nodes = [
        f"NodeName={name} NodeAddr={cfg.address(i)} Port={SLURMD_PORT} CPUs=1 RealMemory=1000 "
        f"Gres=gpu:{cfg.gpus} State=UNKNOWN"
        for i, name in enumerate(cfg.names)
    ]
    return "\n".join(
        [
            "# gpunode lab: Slurm over the lab's hosts (gpunode_lab/slurm.py)",
            "ClusterName=gpunodelab",
            f"SlurmctldHost={os.uname().nodename}({cfg.repo_address})",
            f"SlurmctldPort={ctl_port(cfg)}",
            f"SlurmdPort={SLURMD_PORT}",
            "CommunicationParameters=NoInAddrAny",
            f"AuthInfo=socket={munge_socket(cfg)}",
            "SlurmUser=root",
            "SlurmdUser=root",
            f"StateSaveLocation={state}/state",
            f"SlurmctldPidFile={state}/slurmctld.pid",
            f"SlurmctldLogFile={state}/slurmctld.log",
            "SlurmdSpoolDir=/var/spool/slurmd",
            "SlurmdPidFile=/run/slurmd.pid",
            "SlurmdLogFile=/var/log/slurmd.log",
            "SlurmdParameters=config_overrides",
            "ProctrackType=proctrack/linuxproc",
            "TaskPlugin=task/none",
            "JobAcctGatherType=jobacct_gather/none",
            "AccountingStorageType=accounting_storage/none",
            "JobCompType=jobcomp/filetxt",
            f"JobCompLoc={state}/jobcomp.log",
            "SelectType=select/cons_tres",
            "SelectTypeParameters=CR_Core",
            "GresTypes=gpu",
            "MpiDefault=none",
            "ReturnToService=2",
            "SlurmdTimeout=300",
            "SlurmctldTimeout=30",
            f"MinJobAge={MIN_JOB_AGE}",
            "SchedulerType=sched/builtin",
            "InactiveLimit=0",
            "KillWait=5",
            *nodes,
            "PartitionName=lab Nodes=ALL Default=YES MaxTime=INFINITE State=UP",
            "",
        ]
    )


def gres_conf(cfg: LabConfig) -> str:
    last = cfg.gpus - 1
    files = f"{DEV_DIR}/nvidia0" if cfg.gpus == 1 else f"{DEV_DIR}/nvidia[0-{last}]"
    return f"AutoDetect=off\nName=gpu File={files}\n" if cfg.gpus else "AutoDetect=off\n"


def _write(path: Path, text: str | bytes, mode: int = 0o644) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text)
    path.chmod(mode)


def _unit(name: str, exec_start: str, pidfile: str) -> str:
    return (
        f"{UNIT_MARK}\n[Unit]\nDescription={name}\n"
        f"[Service]\nExecStart={exec_start}\nPIDFile={pidfile}\n"
    )


def write_hosts_side(paths: LabPaths, cfg: LabConfig) -> None:
    """The hosts' Slurm files, in the lab's base layer: every host sees them."""
    base = paths.base
    key = slurm_dir(paths) / "munge.key"
    sock = munge_socket(cfg)
    _write(base / "etc/slurm/slurm.conf", slurm_conf(paths, cfg))
    _write(base / "etc/slurm/gres.conf", gres_conf(cfg))
    _write(base / "etc/munge/munge.key", key.read_bytes(), 0o400)
    munged = (
        f"mkdir -p {os.path.dirname(sock)} /var/lib/munge /var/log/munge && "
        f"/usr/sbin/munged --force --socket={sock} --pid-file=/run/munged.pid "
        "--key-file=/etc/munge/munge.key --seed-file=/var/lib/munge/munged.seed "
        "--log-file=/var/log/munge/munged.log"
    )
    wants = base / "etc/systemd/system/multi-user.target.wants"
    # The host's name is its node's: its UTS namespace says so too.
    slurmd = "mkdir -p /var/spool/slurmd && /usr/sbin/slurmd -N $(hostname)"
    for unit, start, pid in (
        ("munge", munged, "/run/munged.pid"),
        ("slurmd", slurmd, "/run/slurmd.pid"),
    ):
        f = base / f"etc/systemd/system/{unit}.service"
        _write(f, _unit(unit, start, pid))
        wants.mkdir(parents=True, exist_ok=True)
        (wants / f"{unit}.service").symlink_to(f"/etc/systemd/system/{unit}.service")


def prepare(paths: LabPaths, cfg: LabConfig) -> None:
    """The controller's files and the shared key; before the hosts' base layer is used."""
    missing = available()
    if missing:
        raise SlurmError(missing)
    d = slurm_dir(paths)
    (d / "state").mkdir(parents=True, exist_ok=True)
    _write(d / "munge.key", os.urandom(1024), 0o400)
    _write(conf_path(paths), slurm_conf(paths, cfg))
    _write(d / "gres.conf", gres_conf(cfg))
    write_hosts_side(paths, cfg)


def env(paths: LabPaths) -> dict[str, str]:
    return {**os.environ, "SLURM_CONF": str(conf_path(paths))}


def start_controller(paths: LabPaths, cfg: LabConfig) -> None:
    """munged and slurmctld on this machine, in their own session (`lab down` ends them)."""
    d = slurm_dir(paths)
    sock = munge_socket(cfg)
    os.makedirs(os.path.dirname(sock), exist_ok=True)
    subprocess.run(
        [
            "munged",
            "--force",
            f"--socket={sock}",
            f"--pid-file={d}/munged.pid",
            f"--key-file={d}/munge.key",
            f"--seed-file={d}/munged.seed",
            f"--log-file={d}/munged.log",
        ],
        check=True,
        capture_output=True,
        cwd=str(d),
    )
    out = subprocess.run(
        ["slurmctld", "-c", "-i"], env=env(paths), capture_output=True, text=True, check=False
    )
    if out.returncode != 0:
        raise SlurmError(f"slurmctld did not start: {out.stderr.strip()[-400:]}; see {d}")


def sinfo_states(paths: LabPaths) -> dict[str, str]:
    """Each node's state as sinfo says it ({} when the controller does not answer)."""
    out = subprocess.run(
        ["sinfo", "-h", "-N", "-o", "%N %T"],
        env=env(paths),
        capture_output=True,
        text=True,
        check=False,
    )
    return dict(line.split() for line in out.stdout.splitlines() if len(line.split()) == 2)


def wait_controller(paths: LabPaths, timeout: float = 30) -> None:
    """Until slurmctld answers. A host's node registers once its slurmd runs, which needs
    the GPUs' device files: a host without a loaded driver stays DOWN, as a real one does."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if sinfo_states(paths):
            return
        time.sleep(0.3)
    raise SlurmError(f"slurmctld does not answer after {timeout:.0f}s; see {slurm_dir(paths)}")


def stop_controller(paths: LabPaths, cfg: LabConfig) -> None:
    d = slurm_dir(paths)
    for pidfile in (d / "slurmctld.pid", d / "munged.pid"):
        try:
            pid = int(pidfile.read_text())
        except (OSError, ValueError):
            continue
        try:
            os.kill(pid, 15)
        except ProcessLookupError:
            continue
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and os.path.exists(f"/proc/{pid}"):
            time.sleep(0.05)
    shutil.rmtree(os.path.dirname(munge_socket(cfg)), ignore_errors=True)
