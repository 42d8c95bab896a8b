"""`gpunode lab`: start, inspect, break and remove simulated GPU hosts."""

from __future__ import annotations

import os
import sys
from typing import Any

import click

from gpunode.exitcodes import ExitCode
from gpunode_lab.gpumodels import MODELS
from gpunode_lab.state import MIRRORS, UBUNTU, LabConfig, LabPaths, state_dir

EXIT_ERROR = ExitCode.ERROR
EXIT_UNSUPPORTED = ExitCode.USAGE  # not Linux, or not root: nothing was started


def _paths() -> LabPaths:
    return LabPaths(state_dir())


def _require_root() -> None:
    if sys.platform != "linux":
        click.echo(
            "error: `gpunode lab` needs Linux (namespaces, overlayfs); "
            f"this is {sys.platform}. Run it on a Linux machine or VM.",
            err=True,
        )
        sys.exit(EXIT_UNSUPPORTED)
    if os.geteuid() != 0:
        click.echo(
            "error: `gpunode lab` needs root (it mounts overlay filesystems and starts sshd "
            "servers); run it with sudo.",
            err=True,
        )
        sys.exit(EXIT_UNSUPPORTED)


def _fail(exc: Exception) -> None:
    click.echo(f"error: {exc}", err=True)
    sys.exit(EXIT_ERROR)


@click.group()
def lab() -> None:
    """Simulated Ubuntu GPU hosts over real SSH, sudo and apt (needs root on Linux).

    \b
    State lives in /var/lib/gpunode-lab (or $GPUNODE_LAB_DIR).
      gpunode lab up --hosts 4
      gpunode lab inventory > lab.yaml && gpunode apply lab.yaml
      gpunode lab down
    """


@lab.command()
@click.option("--hosts", "n_hosts", type=click.IntRange(1, 240), default=4, show_default=True)
@click.option(
    "--gpus", type=click.IntRange(0, 16), default=2, show_default=True, help="GPUs per host."
)
@click.option("--model", type=click.Choice(list(MODELS)), default="H200", show_default=True)
@click.option("--ubuntu", type=click.Choice(list(UBUNTU)), default="24.04", show_default=True)
@click.option(
    "--sudo-password-env",
    metavar="VAR",
    help="Make sudo ask for a password: the one in environment variable VAR.",
)
@click.option(
    "--net",
    type=click.IntRange(0, 255 * 256 + 255),
    default=0,
    show_default=True,
    help="Hosts get addresses 127.0.NET.11 and up; the repository 127.0.NET.10 "
    "(from 256 on, 127.NET/256.NET%256.X).",
)
@click.option(
    "--port",
    type=click.IntRange(1, 65535),
    default=22,
    show_default=True,
    help="The hosts' SSH port.",
)
@click.option(
    "--mirror",
    type=click.Choice(MIRRORS),
    default="full",
    show_default=True,
    help="The NVIDIA repository the lab serves: full, a mirror lagging behind "
    "(without the newest driver releases, cuDNN and NCCL builds), or one caught mid-sync "
    "(the newest 570 and 580 metapackages without their DKMS packages).",
)
@click.option(
    "--slurm",
    is_flag=True,
    help="Run Slurm over the hosts: munged and slurmctld here, munged and slurmd on each host "
    "(Debian's packages); `gpunode lab inventory` then names the controller.",
)
def up(
    n_hosts: int,
    gpus: int,
    model: str,
    ubuntu: str,
    sudo_password_env: str | None,
    net: int,
    port: int,
    mirror: str,
    slurm: bool,
) -> None:
    """Start N hosts (or keep a running lab of the same shape)."""
    _require_root()
    from gpunode_lab import lifecycle

    want = LabConfig(
        hosts=n_hosts,
        gpus=gpus,
        model=model,
        ubuntu=ubuntu,
        net=net,
        port=port,
        sudo_password_env=sudo_password_env,
        mirror=mirror,
        slurm=slurm,
    )
    try:
        lifecycle.up(_paths(), want, say=lambda m: click.echo(m, err=True))
    except (lifecycle.LabError, OSError) as exc:
        _fail(exc)
    click.echo("next: gpunode lab inventory > lab.yaml && gpunode check lab.yaml", err=True)


@lab.command()
def down() -> None:
    """Remove the lab: processes, mounts, latency rules and files."""
    _require_root()
    from gpunode_lab import lifecycle

    try:
        lifecycle.down(_paths(), say=lambda m: click.echo(m, err=True))
    except (lifecycle.LabError, OSError) as exc:
        _fail(exc)


@lab.command()
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of text.")
def status(as_json: bool) -> None:
    """Show the lab's hosts: state, address, boot id, faults."""
    _require_root()
    from gpunode_lab import lifecycle

    paths = _paths()
    cfg, hosts = lifecycle.status(paths)
    if as_json:
        doc: dict[str, Any] = {"state_dir": str(paths.root), "running": hosts is not None}
        if cfg is not None:
            doc.update(config={k: v for k, v in vars(cfg).items() if k != "names"})
        doc["hosts"] = hosts or []
        from gpunode.views.envelope import dumps

        click.echo(dumps("lab-status", doc))
        return
    if cfg is None:
        click.echo(f"no lab in {paths.root}; start one with `gpunode lab up`")
        sys.exit(EXIT_ERROR)
    if hosts is None:
        click.echo(f"the lab in {paths.root} is not running; `gpunode lab down` cleans it up")
        sys.exit(EXIT_ERROR)
    click.echo(
        f"{cfg.hosts} x {cfg.gpus}x {cfg.model}, Ubuntu {cfg.ubuntu}; "
        f"repository {cfg.repo_url} ({cfg.mirror} mirror)"
    )
    click.echo(f"{'HOST':<10} {'ADDRESS':<15} {'STATE':<10} {'BOOT ID':<38} FAULTS")
    for h in hosts:
        faults = ",".join(sorted(h["faults"])) or "-"
        click.echo(
            f"{h['name']:<10} {h['address']:<15} {h['state']:<10} {h['boot_id']:<38} {faults}"
        )


@lab.command()
@click.option(
    "--conda",
    is_flag=True,
    help="Also declare conda envs with PyTorch and TensorFlow (the lab's stand-in wheels).",
)
def inventory(conda: bool) -> None:
    """Print an inventory for the running lab's hosts."""
    from gpunode_lab.inventory import render

    paths = _paths()
    cfg = paths.load_config()
    if cfg is None:
        click.echo(f"error: no lab in {paths.root}; start one with `gpunode lab up`", err=True)
        sys.exit(EXIT_ERROR)
    click.echo(render(paths, cfg, conda=conda), nl=False)


def _host_request(op: str, **args: Any) -> dict[str, Any]:
    from gpunode_lab import control

    try:
        reply = control.request(_paths(), op, **args)
    except control.SupervisorGone as exc:
        _fail(exc)
        raise
    if not reply.get("ok"):
        click.echo(f"error: {reply.get('error')}", err=True)
        sys.exit(EXIT_ERROR)
    return reply


@lab.command()
@click.argument("host")
def reboot(host: str) -> None:
    """Reboot HOST as `sudo reboot` inside it would (powers it on if it is off)."""
    _require_root()
    _host_request("reboot", host=host)


@lab.command()
@click.argument("host")
def reset(host: str) -> None:
    """Give HOST a fresh disk: everything written to it is gone; same keys and address."""
    _require_root()
    _host_request("reset", host=host)


@lab.command()
@click.argument("host")
@click.argument("pins", nargs=-1, required=True, metavar="PKG=VERSION...")
@click.option("--hold", is_flag=True, help="apt-mark hold the packages afterwards.")
@click.option(
    "--reboot",
    "then_reboot",
    is_flag=True,
    help="Reboot HOST afterwards, so that an installed driver's kernel module loads.",
)
def install(host: str, pins: tuple[str, ...], hold: bool, then_reboot: bool) -> None:
    """Install exact versions in HOST with its own apt and dpkg (downgrades allowed).

    \b
    Starts a host from a given state, e.g. an older driver, before gpunode runs:
      gpunode lab install lab-02 nvidia-open-550=550.127.05-1 --hold --reboot
    """
    _require_root()
    from gpunode_lab import control, preinstall

    paths = _paths()
    cfg = paths.load_config()
    if cfg is None:
        click.echo(f"error: no lab in {paths.root}; start one with `gpunode lab up`", err=True)
        sys.exit(EXIT_ERROR)
    try:
        preinstall.install(
            paths, cfg, host, list(pins), hold, then_reboot, say=lambda m: click.echo(m)
        )
    except (preinstall.InstallError, control.SupervisorGone, OSError) as exc:
        _fail(exc)


KNOB_HELP = "\b\n" + "\n".join(
    f"  {k:<12} {v}" for k, v in __import__("gpunode_lab.faults", fromlist=["KNOBS"]).KNOBS.items()
)


@lab.command(epilog=KNOB_HELP)
@click.argument("host")
@click.argument("knob")
@click.argument("value", required=False)
@click.option("--off", is_flag=True, help="Turn the fault off.")
def fault(host: str, knob: str, value: str | None, off: bool) -> None:
    """Make HOST misbehave: KNOB [VALUE] (see the list below); --off undoes it."""
    _require_root()
    reply = _host_request("fault", host=host, knob=knob, value=value, off=off)
    if reply.get("note"):
        click.echo(reply["note"])
