"""`gpunode hosts`: each host's merged desired state."""

from __future__ import annotations

import click

from gpunode.cli.common import load_selected
from gpunode.cli.options import inventory_argument, json_option, limit_option


@click.command()
@inventory_argument
@limit_option
@json_option
def hosts(inventory: str, limit: str | None, as_json: bool) -> None:
    """Show what each selected host should have after merging defaults, groups and the
    host's own settings (later layers win; mappings merge key by key)."""
    from gpunode.inventory.text import printable

    _, selected = load_selected(inventory, limit)
    if as_json:
        from gpunode.views.envelope import dumps

        out = {h.name: h.model_dump(mode="json") for h in selected}
        click.echo(dumps("hosts", {"hosts": out}))  # ensure_ascii: every control is \u-escaped
        return
    # Every line quotes inventory text: escape what is unprintable (the loader refuses
    # control characters already; this keeps a terminal safe whatever slips through).
    for h in selected:
        groups = printable(", ".join(h.groups) or "no group")
        click.echo(click.style(printable(h.name), bold=True) + f"  ({groups})")
        target = f"  target   {h.connection} {h.target if h.connection == 'ssh' else ''}"
        click.echo(printable(target.rstrip()))
        if h.connection == "ssh":
            click.echo(
                printable(
                    f"  ssh      user={h.ssh.user} key={h.ssh.identity_file or '-'} "
                    f"host_keys={h.ssh.host_key_policy}"
                )
            )
        for line in _stack_lines(h):
            click.echo(printable(f"  {line}"))


def _stack_lines(h: object) -> list[str]:
    from gpunode.inventory.model import Host

    assert isinstance(h, Host)
    s = h.stack
    lines = []
    if h.gpus.model or h.gpus.count:
        lines.append(f"gpus     {h.gpus.count or '?'} x {h.gpus.model or '?'}")
    if s.driver:
        hold = ", held" if s.driver.hold else ""
        lines.append(f"driver   {s.driver.branch} ({s.driver.flavor}{hold})")
    if s.cuda:
        lines.append(f"cuda     {', '.join(s.cuda.toolkits)} (default {s.cuda.default_toolkit})")
    if s.cudnn:
        lines.append(f"cudnn    {s.cudnn.version}")
    if s.nccl:
        lines.append(f"nccl     {s.nccl.version}")
    if s.cuda_env:
        lines.append("cuda_env CUDA_HOME, PATH, LD_LIBRARY_PATH for login shells")
    if s.conda:
        for name, env in s.conda.envs.items():
            parts = [f"python {env.python}"]
            parts += [f"pytorch {env.pytorch}"] if env.pytorch else []
            parts += [f"tensorflow {env.tensorflow}"] if env.tensorflow else []
            lines.append(f"conda    {s.conda.prefix}/envs/{name}: {', '.join(parts)}")
    if s.roles:
        lines.append(f"roles    {', '.join(s.roles)}")
    if s.smoke:
        lines.append(f"smoke    {', '.join(s.smoke)}")
    return lines
