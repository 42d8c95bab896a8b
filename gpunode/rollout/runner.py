"""A rolling upgrade: wave by wave, each host drained, converged, verified, resumed.

Per wave: read what each host runs (`before`, kept in the record for `gpunode rollback`),
drain its node and wait until its jobs have ended, converge the wave with an ordinary
`ApplySession` (the apply's smoke tests, hooks, busy-GPU refusal and reboots as ever), then
per host: wait for the driver's module, restart the node daemon, verify (doctor with no
error, the node registered again with its GPUs), resume. A host that fails at any step is
left drained with the reason; when a wave's failures pass `max_fail` (percent, default 0)
the rollout stops and later waves are untouched.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from gpunode.events import Bus, RolloutPhase, RolloutPhaseWord, RolloutWave, Subscriber
from gpunode.execute.session import ApplySession, Pacing
from gpunode.hostpool import run_hosts
from gpunode.rollout import before as before_mod
from gpunode.rollout.before import Before
from gpunode.scheduler import Scheduler, SchedulerError
from gpunode.transport.base import Transport, TransportError

if TYPE_CHECKING:
    from gpunode.execute.host import Options
    from gpunode.inventory.model import Host
    from gpunode.records import InventoryId, Record
    from gpunode.transport.secret import Secret

MODULE_WAIT_S = 120.0
REGISTER_WAIT_S = 90.0
POLL_S = 1.0
RESTART_SLURMD = "systemctl restart slurmd"


@dataclass
class HostEnd:
    phase: RolloutPhaseWord
    detail: str = ""
    wave: int = 0
    apply_status: str = ""
    before: Before | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "phase": self.phase,
            "detail": self.detail,
            "status": self.phase,  # what `gpunode report` shows of a host, and counts failed
            "message": self.detail,
            "wave": self.wave,
            "apply_status": self.apply_status,
            "before": self.before.to_json() if self.before is not None else None,
        }


@dataclass
class Plan:
    """What the rollout runs, decided before it starts."""

    waves: list[list[Host]]
    options: Options
    canary: bool = True
    """The first wave is the canary (a wave of its own before the others)."""
    views: list[Subscriber] = field(default_factory=list)
    """What shows the rollout, the wave's apply included (the plain printer, --json)."""
    max_fail: float = 0.0
    forks: int | None = None
    become_password: Secret | None = None
    inventory: InventoryId | None = None
    target: Callable[[Host], str] = field(default=lambda h: "the inventory's stack")
    """What a host moves to, for the drain reason ("driver 580.95.05 -> 580.159.04")."""


SchedulerFor = Callable[["Host"], "tuple[Scheduler, str] | None"]
"""A host's scheduler and its node name there, or None: not a node of any."""


class Rollout:
    def __init__(self, plan: Plan, scheduler_for: SchedulerFor, bus: Bus, record: Record) -> None:
        self.plan = plan
        self.scheduler_for = scheduler_for
        self.bus = bus
        self.record = record
        self.ends: dict[str, HostEnd] = {}
        self._lock = threading.Lock()
        self.stopped = ""
        self._session: ApplySession | None = None
        record.data["waves"] = [
            {"wave": i + 1, "hosts": [h.name for h in w], "runs": [], "status": "waiting"}
            for i, w in enumerate(plan.waves)
        ]
        record.data["hosts"] = {h.name: {"phase": "waiting"} for w in plan.waves for h in w}

    # -- events and the record ---------------------------------------------------------

    def _say(self, host: str, phase: RolloutPhaseWord, wave: int, detail: str = "") -> None:
        self.bus.emit(RolloutPhase(host, phase=phase, wave=wave, detail=detail))
        with self._lock:
            end = self.ends.setdefault(host, HostEnd(phase, wave=wave))
            end.phase, end.detail, end.wave = phase, detail, wave
            self.record.data["hosts"][host] = end.to_json()
            self.record.save()

    def _fail(self, host: Host, wave: int, why: str) -> None:
        node = self.scheduler_for(host)
        if node is not None:
            sched, name = node
            try:  # the node stays drained, the reason saying why (sinfo -R)
                sched.fail(name, f"gpunode: failed: {why}")
            except SchedulerError as exc:
                why += f"; and the node's reason could not be set: {exc}"
        self._say(host.name, "failed", wave, why)

    def request_stop(self, reason: str, code: int) -> None:
        """Start no new wave, and stop the wave's apply as Ctrl-C would (its running
        commands finish); the wave's nodes stay drained."""
        with self._lock:
            self.stopped = self.stopped or reason
            session = self._session
        if session is not None:
            session.request_stop(reason, code)

    # -- the rollout ---------------------------------------------------------------------

    def run(self) -> dict[str, HostEnd]:
        for i, wave in enumerate(self.plan.waves, start=1):
            entry = self.record.data["waves"][i - 1]
            if self.stopped:
                entry["status"] = "untouched"
                for h in wave:
                    self._say(h.name, "untouched", i, self.stopped)
                continue
            canary = i == 1 and self.plan.canary
            self.bus.emit(RolloutWave("", wave=i, hosts=tuple(h.name for h in wave), canary=canary))
            entry["status"] = "running"
            failed = self._wave(i, wave, entry)
            entry["status"] = "failed" if failed else "verified"
            self.record.save()
            if 100.0 * failed / len(wave) > self.plan.max_fail:
                what = "the canary" if canary else f"wave {i}"
                self.stopped = (
                    f"{what} failed on {failed} of {len(wave)} host(s) (--max-fail "
                    f"{self.plan.max_fail:g}%)"
                )
        return self.ends

    def _wave(self, i: int, wave: list[Host], entry: dict[str, Any]) -> int:
        befores = self._read_before(i, wave)
        ready = [h for h in wave if h.name in befores]
        ready = self._drain(i, ready, befores)
        if ready:
            results = self._apply(i, ready, entry)
            converged = [h for h in ready if results.get(h.name, ("",))[0] in ("ok", "changed")]
            with self._lock:
                for h in ready:
                    self.ends[h.name].apply_status = results.get(h.name, ("not run",))[0]
            for h in ready:
                if h not in converged:
                    status, message = results.get(h.name, ("not run", ""))
                    self._fail(h, i, f"apply {status}: {message or 'its run record says why'}")
            self._after(i, converged)
        return sum(1 for h in wave if self.ends.get(h.name, HostEnd("failed")).phase == "failed")

    def _read_before(self, i: int, wave: list[Host]) -> dict[str, Before]:
        out = self._on_hosts(wave, lambda t, h: before_mod.read(t))
        got: dict[str, Before] = {}
        for h in wave:
            value, error = out[h.name]
            if value is None:
                self._say(h.name, "failed", i, f"not read before its wave: {error}")
                continue
            got[h.name] = value
            with self._lock:
                self.ends[h.name] = HostEnd("draining", wave=i, before=value)
        return got

    def _drain(self, i: int, hosts: list[Host], befores: Mapping[str, Before]) -> list[Host]:
        drained: list[Host] = []
        for h in hosts:
            node = self.scheduler_for(h)
            if node is None:  # not a node of any scheduler: nothing to take out of service
                drained.append(h)
                continue
            self._say(h.name, "draining", i)
            sched, name = node
            was = befores[h.name].driver or "none"
            try:
                sched.drain(name, f"gpunode: driver {was} -> {self.plan.target(h)}")
            except SchedulerError as exc:
                self._say(h.name, "failed", i, str(exc))
                continue
            drained.append(h)
        ready: list[Host] = []
        for h in drained:
            node = self.scheduler_for(h)
            if node is None or h.slurm is None:
                ready.append(h)
                continue
            sched, name = node

            said: list[str] = []

            def waiting(what: str, host: str = h.name, said: list[str] = said) -> None:
                if self.stopped:
                    raise SchedulerError(f"stopped while waiting for {what}: {self.stopped}")
                if said != [what]:
                    said[:] = [what]
                    self._say(host, "waiting", i, what)

            try:
                sched.wait_drained(name, h.slurm.drain_timeout, waiting)
            except SchedulerError as exc:
                self._fail(h, i, str(exc))
                continue
            ready.append(h)
        return ready

    def _apply(
        self, i: int, hosts: list[Host], entry: dict[str, Any]
    ) -> dict[str, tuple[str, str]]:
        for h in hosts:
            self._say(h.name, "applying", i)
        p = self.plan
        session = ApplySession(
            hosts, p.options, pacing=Pacing(p.forks), become_password=p.become_password
        )
        for view in p.views:
            session.bus.subscribe(view)
        with self._lock:
            self._session = session
        if p.inventory is not None:
            session.open_record(p.inventory, ",".join(h.name for h in hosts))
            if session.record is not None:
                entry["runs"].append(session.record.id)
        if self.stopped:  # asked to stop while the wave drained
            session.request_stop(self.stopped, 130)
        session.run()
        result = session.finish(timeout=30)
        with self._lock:
            self._session = None
        if result is None:
            return {}
        return {name: (r.status, r.message) for name, r in result.hosts.items()}

    def _after(self, i: int, hosts: list[Host]) -> None:
        """Per converged host: the node daemon restarted once the driver is loaded, the
        node verified, resumed."""

        def work(t: Transport, h: Host) -> str | None:
            node = self.scheduler_for(h)
            since = time.time() - 1  # slurmd's start time has whole seconds
            if node is not None:
                self._say(h.name, "restarting", i)
                why = _restart_after_module(t, h)
                if why:
                    return why
            self._say(h.name, "verifying", i)
            why = _doctor_errors(t, h)
            if why or node is None:
                return why
            sched, name = node
            return _registered(sched, name, h.gpus.count, since)

        out = self._on_hosts(hosts, work)
        for h in hosts:
            value, error = out[h.name]
            why = error or value
            if why:
                self._fail(h, i, why)
                continue
            node = self.scheduler_for(h)
            if node is not None:
                try:
                    node[0].resume(node[1])
                except SchedulerError as exc:
                    self._fail(h, i, f"verified, but not resumed: {exc}")
                    continue
            self._say(h.name, "resumed", i)

    def _on_hosts(
        self, hosts: Sequence[Host], work: Callable[[Transport, Host], Any]
    ) -> dict[str, tuple[Any, str]]:
        """`work` on each host over its own connection: (value, "") or (None, why)."""
        if not hosts:
            return {}
        outcomes = run_hosts(
            hosts, work, bus=Bus(), forks=self.plan.forks, become_password=self.plan.become_password
        )
        return {
            n: (o.value, "") if o.status == "ok" else (None, o.summary) for n, o in outcomes.items()
        }


def _restart_after_module(t: Transport, h: Host) -> str | None:
    """slurmd restarted once the nvidia module is loaded: a slurmd started before the
    GPUs' device files existed has no GPUs (its gres would not match)."""
    if h.stack.driver is not None:
        deadline = time.monotonic() + MODULE_WAIT_S
        while not t.run("test -d /sys/module/nvidia", timeout=30).ok:
            if time.monotonic() > deadline:
                return f"the nvidia module is not loaded {MODULE_WAIT_S:.0f}s after the apply"
            time.sleep(POLL_S)
    r = t.run(RESTART_SLURMD, sudo=True, timeout=120)
    if not r.ok:
        return f"`{RESTART_SLURMD}` failed (exit {r.exit_code})"
    return None


def _doctor_errors(t: Transport, h: Host) -> str | None:
    from gpunode.doctor.gather import probe
    from gpunode.doctor.rules import diagnose

    try:
        findings = diagnose(probe(t, h))
    except TransportError as exc:
        return f"doctor could not read the host: {exc}"
    errors = [f.rule for f in findings if f.severity == "error"]
    return f"doctor found error(s): {', '.join(errors)}" if errors else None


def _registered(sched: Scheduler, node: str, gpus: int | None, since: float) -> str | None:
    deadline = time.monotonic() + REGISTER_WAIT_S
    while True:
        try:
            why = sched.gres_ok(node, gpus, since)
        except SchedulerError as exc:
            why = str(exc)
        if why is None:
            return None
        if time.monotonic() > deadline:
            return f"not back in the scheduler after {REGISTER_WAIT_S:.0f}s: {why}"
        time.sleep(POLL_S)
