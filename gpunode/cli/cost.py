"""`gpunode cost`: GPU types ranked by measured work per cost, and for one job."""

from __future__ import annotations

import sys

import click

from gpunode.cli.common import load_selected
from gpunode.cli.options import inventory_argument, json_option, limit_option
from gpunode.exitcodes import ExitCode

POSITIVE = click.FloatRange(min=0, min_open=True)


@click.command("cost")
@inventory_argument
@limit_option
@json_option
@click.option("--work", type=POSITIVE, metavar="PFLOP", help="The job: PFLOP of bf16 work.")
@click.option("--hours", type=POSITIVE, metavar="T", help="The deadline, in hours (with --work).")
@click.option("--budget", type=POSITIVE, metavar="B", help="The most it may cost (with --work).")
def cost(
    inventory: str,
    limit: str | None,
    as_json: bool,
    work: float | None,
    hours: float | None,
    budget: float | None,
) -> None:
    """Show each GPU type of INVENTORY (same `gpus.model`, same `gpus.hourly_cost`) with its
    measured bf16 TFLOP/s per GPU, the TFLOP/s one unit of currency per hour buys, and the
    cost of one PFLOP/s sustained for an hour. The figures are the newest `torch-matmul`
    results of each host in the run records (`gpunode smoke`, `gpunode apply`); a type never
    measured says so. With --work, --hours and --budget: the types that can do that much work
    by the deadline within the budget, cheapest first, and why the others cannot.

    Exit codes: 0 shown, 4 bad input (the inventory, --hours or --budget without --work, or
    types priced in different currencies to rank), 5 usage."""
    from gpunode import records
    from gpunode.cost import currencies, gpu_types, latest, plan_work
    from gpunode.views.cost import payload, plan_table, table
    from gpunode.views.envelope import dumps

    if work is None and (hours is not None or budget is not None):
        _bad("--hours and --budget describe a job: give its size with --work PFLOP")
    inv, hosts = load_selected(inventory, limit)
    measured = latest(records.runs_of(inv.identity))
    types, unpriced = gpu_types(hosts, measured)
    options, job = None, None
    if work is not None:
        if len(cur := currencies(types)) > 1:
            _bad(
                f"the GPU types are priced in {', '.join(sorted(cur))}: costs in different "
                "currencies cannot be ranked; price them in one currency, or --limit to one"
            )
        hours = hours or float("inf")
        options = plan_work(types, work, hours, budget)
        job = {"pflop": work, "hours": None if hours == float("inf") else hours, "budget": budget}
    if as_json:
        click.echo(dumps("cost", payload(types, unpriced, options, job)))
        return
    click.echo(table(types, unpriced))
    if options is not None:
        click.echo("")
        click.echo(plan_table(options, work or 0, hours or 0, budget))


def _bad(message: str) -> None:
    click.echo(f"error: {message}", err=True)
    sys.exit(ExitCode.BAD_INPUT)
