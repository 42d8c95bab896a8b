"""`gpunode envs`: each host's conda envs exported as installed (`conda env export`)."""

from __future__ import annotations

import sys

import click

from gpunode.cli.common import become_password, load_selected
from gpunode.cli.options import (
    become_pass_option,
    forks_option,
    inventory_argument,
    json_option,
    limit_option,
)
from gpunode.exitcodes import exit_code_for


@click.command("envs")
@inventory_argument
@limit_option
@json_option
@forks_option
@become_pass_option
def envs(
    inventory: str, limit: str | None, as_json: bool, forks: int | None, ask_become_pass: bool
) -> None:
    """Export every conda env of each host as installed (`conda env export`): an
    environment.yml to keep, compare or declare the env with (`environment_file`).

    Exit status: 0 every host read, 2 a host failed, 3 a host unreachable, 4 bad input,
    6 a host's key changed (or is revoked). Several: 6 > 2 > 3.
    """
    from gpunode.events import Bus
    from gpunode.facts.envexport import export_all
    from gpunode.views.envelope import dumps
    from gpunode.views.envs import envs_json, envs_text

    _, hosts = load_selected(inventory, limit)
    password = become_password(hosts, ask_become_pass)
    outcomes = export_all(hosts, bus=Bus(), forks=forks, become_password=password)
    if as_json:
        click.echo(dumps("envs", envs_json(outcomes)))
    else:
        click.echo(envs_text(outcomes), nl=False)
    sys.exit(exit_code_for(o.state for o in outcomes.values()))
