"""module_reload: a new kernel module loaded in place, or a reboot where that is unsafe."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from pydantic import Field

from gpunode.changes import RELOAD_REFUSED, Change
from gpunode.facts.model import HostFacts
from gpunode.roles.ops.base import Args, DebVersion, ModuleName, Name, OpContext, Operation, q

NVIDIA_MODULES = ["nvidia_uvm", "nvidia_drm", "nvidia_modeset", "nvidia"]


class ModuleReloadArgs(Args):
    reason: str = Field(description="Why the module must change: shown in the plan and events.")
    modules: list[ModuleName] = Field(
        NVIDIA_MODULES,
        min_length=1,
        description="The modules, in the order they are unloaded (users first, the base"
        " module last); they are loaded again in the reverse order.",
    )
    services: list[Name] = Field(
        ["nvidia-persistenced"],
        description="Units that hold the modules open: those running are stopped before the"
        " unload (and started again when it is refused); all are started after the load.",
    )
    version: DebVersion | None = Field(
        None,
        description="The version the base module (the last of `modules`) must report in"
        " /sys/module/<module>/version once loaded; the change fails otherwise.",
    )
    reload: bool = Field(
        True, description="false: always reboot instead (the inventory's stack.driver.reload)."
    )


def reboot_because(facts: HostFacts, reload: bool) -> str | None:
    """Why a reload is unsafe on this host (then it reboots), or None."""
    if not reload:
        return None
    if facts.module.nouveau_loaded:
        return "nouveau is loaded"
    if facts.gpu_processes:
        held = ", ".join(f"{p.name} (pid {p.pid})" for p in facts.gpu_processes)
        return f"{held} {'holds' if len(facts.gpu_processes) == 1 else 'hold'} the GPUs"
    return None


def reload_script(a: ModuleReloadArgs) -> str:
    """Stop the units that run, unload what is loaded (exit RELOAD_REFUSED, units started
    again, when the kernel refuses), load every module, start every unit, check the version."""
    mods = " ".join(q(m) for m in a.modules)
    base = a.modules[-1]
    units = " ".join(q(u) for u in a.services)
    running = f'for s in {units}; do systemctl is-active --quiet "$s" && ran="$ran $s"; done'
    lines = [
        f'was=""; for m in {mods}; do [ -d "/sys/module/$m" ] && was="$was $m"; done',
        'ran=""' + (f"; {running}" if units else ""),
        '[ -z "$ran" ] || systemctl stop $ran',
        f'if [ -n "$was" ] && ! modprobe -r $was; then [ -z "$ran" ] || systemctl start $ran;'
        f" exit {RELOAD_REFUSED}; fi",
        f'for m in {" ".join(q(m) for m in reversed(a.modules))}; do modprobe "$m" || exit 1; done',
        *([f"systemctl start {units} || exit 1"] if units else []),
    ]
    if a.version:
        path = f"/sys/module/{base}/version"
        lines.append(
            f'v=$(cat {q(path)} 2>/dev/null); [ "$v" = {q(a.version)} ] ||'
            f' {{ echo "{base} $v loaded, {a.version} wanted" >&2; exit 1; }}'
        )
    return "; ".join(lines)


class ModuleReload(Operation):
    """A new kernel module loaded without a reboot where that is safe, else a reboot.

    A role says when the module must change with the task's `when:` (the loaded driver
    differs from the one installed). With `reload: true` and a host where nothing holds the
    GPUs (no process in the facts' `gpu_processes`: a compute job, a display server) and
    nouveau is not loaded, the change stops the running `services`, unloads the loaded
    `modules` (`modprobe -r`), loads them all, starts every service and checks the
    base module's `version`. Otherwise, or with `reload: false`, it asks for a reboot,
    saying why. A reload is disruptive as a reboot is (busy GPUs refuse it, the
    inventory's hooks run around it), it runs after every other change, and a plan that
    reboots anyway reboots instead. When the kernel refuses the unload (`Module nvidia is
    in use`) the services are started again and the host reboots instead; `--no-reboot`
    does not stop a reload, which is not a reboot.

    ```yaml
    - name: load the new driver
      op: module_reload
      reason: driver 550.163.01 loaded, 570.195.03 wanted
      version: 570.195.03
      reload: true
      when: facts.module.version != driver_version
    ```
    """

    name = "module_reload"
    args_model = ModuleReloadArgs

    def plan(self, args: Any, ctx: OpContext) -> list[Change]:
        a: ModuleReloadArgs = args
        unsafe = reboot_because(ctx.facts, a.reload)
        if not a.reload or unsafe:
            why = f"reboot: {unsafe}" if unsafe else "reboot needed"
            return [ctx.change(self, f"{a.reason}: {why}", [], reboot=True, handlers=False)]
        base = a.modules[-1]
        what = f"reload the {base} module" if ctx.facts.module.loaded else f"load the {base} module"
        change = ctx.change(self, f"{a.reason}: {what}: nothing holds the GPUs", [reload_script(a)])
        return [replace(change, reload=a.reason)]
