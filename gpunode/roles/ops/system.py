"""alternatives, service, command and reboot."""

from __future__ import annotations

import os.path
import shlex
from typing import Any

from pydantic import Field

from gpunode.changes import Change
from gpunode.roles.ops.base import AbsPath, Args, FilePath, Name, OpContext, Operation, probe_key, q
from gpunode.roles.probe import Probe


class AlternativesArgs(Args):
    alternative: Name = Field(description="The alternative's name, e.g. cuda.")
    link: FilePath = Field(description="The generic link, e.g. /usr/local/cuda.")
    path: FilePath = Field(description="What the link must point to, e.g. /usr/local/cuda-12.4.")
    priority: int = Field(100, description="The priority it is installed with.")


class Alternatives(Operation):
    """An update-alternatives link set to one path: installed and selected.

    Where `cuda` points comes from the facts; any other alternative is read by a probe
    (`update-alternatives --query`). When it points elsewhere, or nowhere,
    `update-alternatives --install` then `--set` make it point to `path`; when it already
    does, nothing is yielded. For cuda the facts also read dpkg's mode for it: pointing to
    `path` in auto mode (as a toolkit's package installs it, and as a run cut before its
    `--set` leaves it) yields the same change, since a later install may move it.

    ```yaml
    - name: default CUDA 12.4
      op: alternatives
      alternative: cuda
      link: /usr/local/cuda
      path: /usr/local/cuda-12.4
      priority: 124
    ```
    """

    name = "alternatives"
    args_model = AlternativesArgs

    def _probe(self, a: AlternativesArgs) -> Probe:
        return Probe(
            probe_key("alt", a.alternative, a.path),
            f"update-alternatives --query {q(a.alternative)} 2>/dev/null"
            f" | grep -qxF {q('Value: ' + a.path)}",
        )

    def probes(self, args: Any) -> list[Probe]:
        a: AlternativesArgs = args
        return [] if a.alternative == "cuda" else [self._probe(a)]

    def plan(self, args: Any, ctx: OpContext) -> list[Change]:
        a: AlternativesArgs = args
        if a.alternative == "cuda":  # the facts say where /usr/local/cuda points
            now = ctx.facts.cuda_alternative
            there = now is not None and os.path.normpath(now) == os.path.normpath(a.path)
            if there and ctx.facts.cuda_alternative_mode != "auto":
                return []
            # a toolkit's package installs it in auto mode: after a cut run, only --set is left
            why = (
                "cuda in auto mode (a toolkit's next install may move it)"
                if there
                else f"cuda points to {now}"
                if now
                else "no cuda alternative"
            )
        else:
            if ctx.probe(self._probe(a)):
                return []
            why = f"{a.alternative} does not point to {a.path}"
        return [
            ctx.change(
                self,
                f"{why}, {a.path} wanted",
                [
                    f"update-alternatives --install {q(a.link)} {q(a.alternative)} {q(a.path)}"
                    f" {a.priority}",
                    f"update-alternatives --set {q(a.alternative)} {q(a.path)}",
                ],
            )
        ]


class ServiceArgs(Args):
    unit: Name = Field(description="The systemd unit, e.g. nvidia-persistenced.")
    enabled: bool = Field(True, description="Enabled at boot (true) or disabled (false).")
    started: bool = Field(True, description="Running now (true) or stopped (false).")


SYSTEMD = Probe("systemd", "test -d /run/systemd/system")


class Service(Operation):
    """A systemd unit enabled or disabled, and started or stopped.

    Probes (`systemctl is-enabled`, `is-active`) read its state; only what differs from
    the task is changed (`systemctl enable|disable`, `start|stop`), and a unit already as
    wanted yields nothing. A host without systemd (a container) gets a note, not a change
    or a failure.

    ```yaml
    - name: persistence daemon
      op: service
      unit: nvidia-persistenced
      enabled: true
      started: true
    ```
    """

    name = "service"
    args_model = ServiceArgs

    @staticmethod
    def _probes(a: ServiceArgs) -> tuple[Probe, Probe]:
        return (
            Probe(probe_key("enabled", a.unit), f"systemctl is-enabled --quiet {q(a.unit)}"),
            Probe(probe_key("active", a.unit), f"systemctl is-active --quiet {q(a.unit)}"),
        )

    def probes(self, args: Any) -> list[Probe]:
        return [SYSTEMD, *self._probes(args)]

    def plan(self, args: Any, ctx: OpContext) -> list[Change]:
        a: ServiceArgs = args
        if not ctx.probe(SYSTEMD):
            ctx.notes.append(f"no systemd on this host: service {a.unit} not managed")
            return []
        enabled_p, active_p = self._probes(a)
        steps: list[str] = []
        why: list[str] = []
        if a.enabled != bool(ctx.probe(enabled_p)):
            steps.append(f"systemctl {'enable' if a.enabled else 'disable'} {q(a.unit)}")
            why.append(f"{a.unit} {'not ' if a.enabled else ''}enabled")
        if a.started != bool(ctx.probe(active_p)):
            steps.append(f"systemctl {'start' if a.started else 'stop'} {q(a.unit)}")
            why.append(f"{a.unit} {'not ' if a.started else ''}running")
        return [ctx.change(self, ", ".join(why), steps)] if steps else []


class CommandArgs(Args):
    cmd: str | list[str] = Field(
        description="Shell text written by the role, or an argv list that gpunode quotes."
    )
    creates: AbsPath | None = Field(
        None, description="A path the command makes: while it exists the command does not run."
    )
    unless: str | None = Field(
        None,
        description="Shell written by the role: the command runs when it fails. It is checked"
        " when the host is applied; `plan` and `apply --check` run no role's shell, and show"
        " the command as one that would be checked, unless `check_mode_probe` says this check"
        " only reads.",
    )
    check_mode_probe: bool = Field(
        False, description="The `unless` check only reads: `plan` and `apply --check` run it too."
    )
    reason: str | None = Field(
        None, description="The change's reason; by default what the guard found."
    )
    sudo: bool = Field(True, description="Run as root (false: as the SSH user).")


class Command(Operation):
    """A role's own command, guarded so that it runs only while needed.

    A command task must say `creates:` (a path it makes) or `unless:` (a check that
    succeeds once it is done), or both; planning refuses it otherwise. When the path
    exists or the check succeeds nothing is yielded; otherwise the command is the change.
    An `unless` check is shell a role wrote: it runs only when the host is applied, so
    `plan` and `apply --check` show the change as one that would be checked (unless
    `check_mode_probe: true` says the check only reads).

    ```yaml
    - name: stamp the image
      op: command
      cmd: [touch, /etc/site-stamp]
      creates: /etc/site-stamp
    ```
    """

    name = "command"
    args_model = CommandArgs

    @staticmethod
    def _guards(a: CommandArgs) -> list[Probe]:
        out = []
        if a.creates:
            out.append(Probe(probe_key("creates", a.creates), f"test -e {q(a.creates)}"))
        if a.unless:
            # an opted-in check has its own key: the same text elsewhere without the opt-in
            # is still left out of plan and --check
            kind = "unless-read-only" if a.check_mode_probe else "unless"
            out.append(
                Probe(probe_key(kind, a.unless), a.unless, role_shell=not a.check_mode_probe)
            )
        return out

    def probes(self, args: Any) -> list[Probe]:
        return self._guards(args)

    def plan(self, args: Any, ctx: OpContext) -> list[Change]:
        a: CommandArgs = args
        guards = self._guards(a)
        if not guards:
            raise ValueError("a command task needs `creates:` or `unless:` to stay idempotent")
        if any(ctx.probe(g) for g in guards):
            return []
        cmd = a.cmd if isinstance(a.cmd, str) else shlex.join(a.cmd)
        if a.unless and ctx.probe(guards[-1]) is None:
            # not run: plan and --check run no shell a role wrote (Probe.role_shell)
            reason = f"would check `{a.unless}` at apply"
        else:
            reason = a.reason or (f"{a.creates} missing" if a.creates else f"`{a.unless}` failed")
        return [ctx.change(self, reason, [cmd], sudo=a.sudo)]


class RebootArgs(Args):
    reason: str = Field(description="Why: shown in the plan and the run's events.")


class Reboot(Operation):
    """A reboot after the host's other changes (the executor does at most one per run).

    It always yields its change: a role says when a reboot is needed with the task's
    `when:` (the loaded driver differs from the one wanted), and once the host has come
    back the facts make that condition false.

    ```yaml
    - name: load the new driver
      op: reboot
      reason: driver 550.163.01 wanted, 535.230.02 loaded
      when: facts.module.version != driver_version
    ```
    """

    name = "reboot"
    args_model = RebootArgs

    def plan(self, args: Any, ctx: OpContext) -> list[Change]:
        a: RebootArgs = args
        return [ctx.change(self, a.reason, [], reboot=True, handlers=False)]
