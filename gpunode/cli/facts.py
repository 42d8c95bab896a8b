"""`gpunode facts`: what each host has, gathered in one round trip per host."""

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


@click.command("facts")
@inventory_argument
@limit_option
@json_option
@forks_option
@become_pass_option
def facts(
    inventory: str, limit: str | None, as_json: bool, forks: int | None, ask_become_pass: bool
) -> None:
    """Gather what each host has: OS, GPUs, driver, packages, CUDA, cuDNN, NCCL, conda.

    Exit status: 0 every host gathered, 2 a host failed, 3 a host unreachable, 4 bad
    input, 6 a host's key changed (or is revoked). Several: 6 > 2 > 3.
    """
    from gpunode.events import Bus
    from gpunode.facts.gather import gather_all
    from gpunode.views.envelope import dumps
    from gpunode.views.facts import facts_json, facts_summary, facts_text

    _, hosts = load_selected(inventory, limit)
    password = become_password(hosts, ask_become_pass)
    outcomes = gather_all(hosts, bus=Bus(), forks=forks, become_password=password)
    if as_json:
        click.echo(dumps("facts", facts_json(outcomes)))
    else:
        if outcomes:
            click.echo(facts_text(outcomes))
        click.echo(facts_summary(outcomes), err=True)
    sys.exit(exit_code_for(o.state for o in outcomes.values()))
