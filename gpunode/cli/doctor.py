"""`gpunode doctor`: what is wrong with each host's driver, GPUs and CUDA stack."""

from __future__ import annotations

import sys
import time

import click

from gpunode.cli.common import become_password, load_selected
from gpunode.cli.options import (
    become_pass_option,
    forks_option,
    inventory_argument,
    json_option,
    limit_option,
)


@click.command("doctor")
@inventory_argument
@limit_option
@json_option
@forks_option
@become_pass_option
def doctor(
    inventory: str, limit: str | None, as_json: bool, forks: int | None, ask_become_pass: bool
) -> None:
    """Diagnose each host: the driver (module, nouveau, DKMS, persistence), the GPUs (count,
    Xid errors, ECC, retired pages and remapped rows, PCIe link, throttling, temperature)
    and the CUDA stack (login shells, the dynamic linker, versions against the driver, disk
    space); each finding with its severity, the line that shows it and the fix. Reads only.

    Exit status: 0 healthy (info findings at most), 9 a warning and no error, 10 an error,
    2 a host failed, 3 a host unreachable, 4 bad input, 6 a host's key changed. Several:
    6 > 2 > 3 > 10 > 9.
    """
    from gpunode.doctor.gather import diagnose_all, exit_status
    from gpunode.events import Bus
    from gpunode.records import Record
    from gpunode.views.doctor import doctor_json, doctor_summary, doctor_text
    from gpunode.views.envelope import dumps

    inv, hosts = load_selected(inventory, limit)
    password = become_password(hosts, ask_become_pass)
    start = time.monotonic()
    outcomes = diagnose_all(
        hosts, bus=Bus(), forks=forks, become_password=password, inventory=inventory
    )
    code = exit_status(outcomes)
    # recorded like apply and smoke: `gpunode exporter` serves the findings' counts from it
    Record("doctor", inv.identity, {"limit": limit}).finish(
        doctor_json(outcomes, int(code))["hosts"], int(code), time.monotonic() - start
    )
    if as_json:
        click.echo(dumps("doctor", doctor_json(outcomes, int(code))))
    else:
        if outcomes:
            click.echo(doctor_text(outcomes))
        click.echo(doctor_summary(outcomes), err=True)
    sys.exit(code)
