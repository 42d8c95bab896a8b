"""`gpunode mirror`: fetch once what the fleet installs (NVIDIA's repositories, Miniconda,
wheels), and serve it."""

from __future__ import annotations

import sys
from typing import Any

import click

from gpunode.cli.common import become_password, load_selected
from gpunode.cli.options import (
    become_pass_option,
    forks_option,
    inventory_argument,
    limit_option,
)
from gpunode.exitcodes import ExitCode
from gpunode.safetext import printable


class _BuildByDefault(click.Group):
    """`gpunode mirror INVENTORY DIR` is short for `gpunode mirror build INVENTORY DIR`."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if args and args[0] not in self.commands and args[0] not in ("-h", "--help"):
            args = ["build", *args]
        return super().parse_args(ctx, args)


@click.group(cls=_BuildByDefault)
def mirror() -> None:
    """A partial, still-signed mirror of NVIDIA's repositories, the Miniconda installer, the
    envs' conda packages and wheels: what the selected hosts' plans install, fetched once,
    for a fleet or an air-gapped site (docs/air-gapped.md).

    `gpunode mirror INVENTORY DIR` is short for `gpunode mirror build INVENTORY DIR`."""


@mirror.command("build")
@inventory_argument
@click.argument("directory", metavar="DIR", type=click.Path(file_okay=False, path_type=str))
@limit_option
@click.option(
    "--whole-stack",
    is_flag=True,
    help="Mirror what a fresh host of each selected host's stack installs (the driver,"
    " toolkits, cuDNN, NCCL, the container toolkit, Miniconda, the envs' packages), at"
    " the versions a fresh host's plan takes, whatever the host has installed now.",
)
@forks_option
@become_pass_option
def build(
    inventory: str,
    directory: str,
    limit: str | None,
    whole_stack: bool,
    forks: int | None,
    ask_become_pass: bool,
) -> None:
    """Read and plan each selected host as `gpunode plan` does, then download into DIR, in
    the repository's own layout (ubuntu2204/x86_64/...), the .debs its plan installs at
    their exact versions with their dependencies from the index, the keyring package, and
    the folder's InRelease, Release, Release.gpg and Packages files unchanged: hosts' apt
    checks NVIDIA's signature and hashes as usual. Also: the container toolkit's
    repository (DIR/libnvidia-container/, with its gpgkey) for hosts with `containers`;
    the Miniconda installer a plan fetches (DIR/miniconda/, checked against
    repos.conda_installer_sha256); the conda packages an env's `conda create` takes, in a
    local channel (DIR/conda/<channel path>/, the channel's repodata records unchanged);
    and the wheels the envs' pip installs take, resolved
    by pip for the env's Python, in simple indexes (DIR/simple/, DIR/pytorch/<variant>/)
    whose links carry each file's sha256. Every file is checked before it is kept; a
    second run downloads only what changed. Point repos.nvidia at the served DIR (`gpunode
    mirror serve DIR`), repos.nvidia_container at DIR/libnvidia-container,
    repos.conda_installer at its miniconda/ file, conda.channels at DIR/conda/...,
    repos.pytorch_index at DIR/pytorch and repos.pypi_index at DIR/simple; plan then
    refuses a host whose files the mirror does not hold, naming the file
    (docs/air-gapped.md).

    A converged host's plan installs nothing: it adds only the keyring and the indexes.
    With --whole-stack each host is planned as a fresh host of its stack on the same
    machine and release (its facts, still read from the host, without the stack's
    packages, toolkits, conda and envs), so a working fleet builds the mirror for new
    hosts or an air-gapped site.

    Exit status: 0 done, 2 a download failed, a host could not be planned or py-rattler (for
    the envs' conda packages) is not installed, 3 a host
    unreachable (what the others need is still fetched).
    """
    from pathlib import Path

    from gpunode.execute.host import Options
    from gpunode.mirror.build import MirrorError
    from gpunode.mirror.build import build as fetch
    from gpunode.mirror.needs import fleet_needs
    from gpunode.resolve.index import RepoVersions
    from gpunode.roles import search_path

    _, hosts = load_selected(inventory, limit)
    password = become_password(hosts, ask_become_pass)
    versions = RepoVersions()
    opts = Options(search=search_path(inventory), versions=versions)
    needs = fleet_needs(
        hosts, versions, opts, forks=forks, become_password=password, whole_stack=whole_stack
    )
    for name, why in needs.problems.items():
        click.echo(printable(f"{name}: not mirrored: {why}"), err=True)
    unreachable = any("unreachable" in why for why in needs.problems.values())
    if whole_stack and unreachable:
        click.echo(
            "--whole-stack still reads each host's facts (its Ubuntu release, kernel and"
            " GPUs decide the packages): reach the hosts, or --limit to those reachable",
            err=True,
        )

    def say(line: str) -> None:
        click.echo(printable(line), err=True)

    try:
        report = fetch(
            needs.folders.values(),
            Path(directory),
            say,
            needs.files.values(),
            needs.keys,
            sorted(needs.pip, key=repr),
            sorted(needs.conda, key=repr),
        )
    except (MirrorError, OSError) as exc:
        click.echo(printable(f"error: {exc}"), err=True)
        sys.exit(ExitCode.FAILED)
    n = sum(len(f.packages) for f in needs.folders.values())
    nhosts = sum(len(f.hosts) for f in needs.folders.values())
    mib = report.bytes / 2**20
    click.echo(
        f"{n} package{'' if n == 1 else 's'} for {nhosts} host{'' if nhosts == 1 else 's'} in"
        f" {directory}: {len(report.downloaded)} files downloaded ({mib:.1f} MiB),"
        f" {len(report.kept)} already current"
    )
    if needs.problems:
        sys.exit(ExitCode.UNREACHABLE if unreachable else ExitCode.FAILED)


@mirror.command("serve")
@click.argument(
    "directory", metavar="DIR", type=click.Path(exists=True, file_okay=False, path_type=str)
)
@click.option(
    "--bind",
    default="127.0.0.1:8470",
    show_default=True,
    metavar="HOST:PORT",
    help="Where to listen: 0.0.0.0:8470 serves the network, not only this machine.",
)
def serve(directory: str, bind: str) -> None:
    """Serve DIR read-only over HTTP (GET and HEAD of its files; no listings), until
    interrupted. Any web server that serves the folder as files does as well; hosts then
    need repos.nvidia: http://HOST:PORT and repos.insecure_http: true (apt still checks
    NVIDIA's signature), or an https server of your own.

    Exit status: 0 stopped, 1 the address cannot be bound, 5 bad usage (a --bind that is
    not HOST:PORT)."""
    from pathlib import Path

    from gpunode.mirror.serve import server

    try:
        srv = server(Path(directory), bind)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--bind") from None
    except OSError as exc:
        click.echo(printable(f"error: cannot listen on {bind}: {exc.strerror or exc}"), err=True)
        sys.exit(ExitCode.ERROR)
    host, port = srv.server_address[:2]
    click.echo(f"serving {directory} on http://{_host(host)}:{port}/ (Ctrl-C stops)", err=True)
    try:
        srv.serve_forever()
    finally:
        srv.server_close()


def _host(host: Any) -> str:
    text = str(host)
    return f"[{text}]" if ":" in text else text
