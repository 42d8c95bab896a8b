"""alternatives, service, command and reboot."""

from __future__ import annotations

import os.path
import shlex
from typing import Any

from gpunode.changes import Change
from gpunode.roles.ops.base import (
    AbsPath,
    Args,
    FilePath,
    Name,
    OpContext,
    Operation,
    Probe,
    probe_key,
    q,
)


class AlternativesArgs(Args):
    alternative: Name
    link: FilePath
    path: FilePath
    priority: int = 100


class Alternatives(Operation):
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
            if now is not None and os.path.normpath(now) == os.path.normpath(a.path):
                return []
            why = f"cuda points to {now}" if now else "no cuda alternative"
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
    unit: Name
    enabled: bool = True
    started: bool = True


SYSTEMD = Probe("systemd", "test -d /run/systemd/system")


class Service(Operation):
    """systemd units; a host without systemd (a container) is noted, not failed."""

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
    cmd: str | list[str]
    """Shell text written by the role, or an argv list that gpunode quotes."""
    creates: AbsPath | None = None
    unless: str | None = None
    """Shell written by the role: the command runs when it fails. It is checked when the
    host is applied; `plan` and `apply --check` run no role's shell, and show the command
    as one that would be checked, unless `check_mode_probe` says this check only reads."""
    check_mode_probe: bool = False
    reason: str | None = None
    sudo: bool = True


class Command(Operation):
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
    reason: str


class Reboot(Operation):
    """Ask the executor for a reboot after the host's other changes (at most one per run)."""

    name = "reboot"
    args_model = RebootArgs

    def plan(self, args: Any, ctx: OpContext) -> list[Change]:
        a: RebootArgs = args
        return [ctx.change(self, a.reason, [], reboot=True, handlers=False)]
