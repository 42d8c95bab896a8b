"""Deterministic events and samples for the TUI tests and snapshots."""

from __future__ import annotations

from collections.abc import Sequence

from gpunode import events as ev
from gpunode.execute.result import ChangeResult, HostResult, RunResult
from gpunode.monitor import Board, GpuProcess, GpuSample

T0 = 1_700_000_000.0
HOSTS = ("gpu-a", "gpu-b", "gpu-c", "gpu-d")


def clock() -> float:
    return T0 + 95.0


def change(role: str, task: str, *commands: str) -> ev.PlannedChange:
    """A planned change as PlanReady carries it: brackets, `=` and all."""
    return ev.PlannedChange(
        role=role, task=task, op="install", reason="missing", commands=commands, tags=(role,)
    )


def title(change: ev.PlannedChange) -> str:
    return change.title


def run_events() -> list[ev.Event]:
    """gpu-a converged with changes, gpu-b mid-apply (streaming apt), gpu-c unreachable,
    gpu-d rebooting."""
    plan = (
        change(
            "nvidia_repo",
            "NVIDIA CUDA repository (ubuntu2404)",
            "env DEBIAN_FRONTEND=noninteractive dpkg --force-confold -i /tmp/cuda-keyring.deb",
        ),
        change("driver", "nvidia-open-580 580.159.04", "apt-get install -y nvidia-open-580"),
        change("cuda", "cuda-toolkit-13-0", "apt-get install -y cuda-toolkit-13-0"),
        change("cuda_env", "/etc/profile.d/cuda.sh", "install -m 0644 [...] /etc/profile.d"),
    )
    e: list[ev.Event] = [
        ev.RunStarted("", command="apply lab.yaml", hosts=HOSTS, ts=T0),
    ]
    for i, h in enumerate(HOSTS):
        e.append(ev.HostConnecting(h, target=f"ubuntu@127.0.0.{i + 2}", ts=T0 + 1))
    e += [
        ev.HostUnreachable("gpu-c", reason="connection refused (127.0.0.4:22)", ts=T0 + 3),
        ev.HostConnected("gpu-a", target="x", seconds=0.4, ts=T0 + 2),
        ev.HostStatusChanged("gpu-a", status="planning", ts=T0 + 3),
        ev.PlanReady("gpu-a", changes=plan[2:], ts=T0 + 4),
        ev.ChangeStarted("gpu-a", index=0, total=2, title=title(plan[2]), ts=T0 + 5),
        ev.ChangeFinished("gpu-a", index=0, title=title(plan[2]), status="changed",
                          seconds=40.0, ts=T0 + 45),
        ev.ChangeStarted("gpu-a", index=1, total=2, title=title(plan[3]), ts=T0 + 45),
        ev.ChangeFinished("gpu-a", index=1, title=title(plan[3]), status="changed",
                          seconds=0.1, diff="--- /etc/profile.d/cuda.sh\n+++ new\n"
                          "+export PATH=/usr/local/cuda/bin:$PATH", ts=T0 + 46),
        ev.HostFinished("gpu-a", status="changed", ok=0, changed=2, seconds=45.0, ts=T0 + 46),
        ev.PlanReady("gpu-b", changes=plan, ts=T0 + 4),
        ev.ChangeStarted("gpu-b", index=0, total=4, title=title(plan[0]), ts=T0 + 5),
        ev.ChangeFinished("gpu-b", index=0, title=title(plan[0]), status="changed",
                          seconds=3.0, ts=T0 + 8),
        ev.ChangeStarted("gpu-b", index=1, total=4, title=title(plan[1]), ts=T0 + 8),
        ev.CommandOutput("gpu-b", index=1, stream="stdout",
                         text="Reading package lists... Done\nBuilding dependency tree... Done\n",
                         ts=T0 + 9),
        ev.CommandOutput("gpu-b", index=1, stream="stdout",
                         text="Unpacking nvidia-driver-580-open (580.159.04-0ubuntu1) ...\n",
                         ts=T0 + 10),
        ev.PlanReady("gpu-d", changes=plan[1:2], ts=T0 + 4),
        ev.ChangeStarted("gpu-d", index=0, total=1, title=title(plan[1]), ts=T0 + 5),
        ev.ChangeFinished("gpu-d", index=0, title=title(plan[1]), status="changed",
                          seconds=30.0, ts=T0 + 35),
        ev.RebootStarted("gpu-d", reason="load nvidia 580.159.04", ts=T0 + 36),
    ]  # fmt: skip
    return e


def finish_events() -> list[ev.Event]:
    return [
        ev.RebootFinished("gpu-d", seconds=42.0, boot_id="b2", ts=T0 + 78),
        ev.HostFinished("gpu-d", status="changed", changed=1, seconds=77.0, ts=T0 + 80),
        ev.ChangeFinished("gpu-b", index=1, title="driver: nvidia-open-580 580.159.04",
                          status="failed", seconds=50.0, message="dpkg: error processing",
                          ts=T0 + 60),
        ev.HostFinished("gpu-b", status="failed", changed=1, failed=1, seconds=59.0,
                        message="dpkg: error processing", ts=T0 + 60),
        ev.HostFinished("gpu-c", status="unreachable", seconds=2.0,
                        message="connection refused (127.0.0.4:22)", ts=T0 + 3),
        ev.RunFinished("", exit_code=2, seconds=80.0, hosts=RECAP, ts=T0 + 80),
    ]  # fmt: skip


# The run's recap, as the executor's result gives it for the hosts above.
RECAP = (
    ev.HostRecap("gpu-a", "changed", changed=2, seconds=45.0),
    ev.HostRecap("gpu-b", "failed", changed=1, failed=1, seconds=59.0,
                 message="dpkg: error processing"),
    ev.HostRecap("gpu-c", "unreachable", unreachable=1, seconds=2.0,
                 message="connection refused (127.0.0.4:22)"),
    ev.HostRecap("gpu-d", "changed", changed=1, seconds=77.0, rebooted=True),
)  # fmt: skip


def smoke_events() -> list[ev.Event]:
    def r(
        host: str,
        name: str,
        status: str,
        value: object,
        expected: object,
        unit: str,
        reason: str = "",
        seconds: float = 1.0,
    ) -> ev.SmokeResult:
        return ev.SmokeResult(host, result=ev.SmokeCheck(
            name=name, status=status, reason=reason, value=value, expected=expected, unit=unit,
            seconds=seconds,
        ), ts=T0 + 90)  # fmt: skip

    return [
        r("gpu-a", "nvidia-smi", "pass", 8, 8, "GPUs", seconds=0.4),
        r("gpu-a", "cuda-vectoradd", "pass", "ok", "ok", "", seconds=1.2),
        r("gpu-a", "torch-matmul", "warn", 412.5, ">= 500", "TFLOP/s", "below expected", 6.1),
        r("gpu-a", "nccl-allreduce", "fail", 12.0, ">= 100", "GB/s", "busbw too low", 9.9),
        r("gpu-d", "nvidia-smi", "pass", 8, 8, "GPUs", seconds=0.5),
        r("gpu-d", "tensorflow", "skip", None, None, "", "no tensorflow env", 0.0),
    ]


# gpu-d is of another generation: H100s on an older driver
MODELS = {"gpu-d": ("NVIDIA H100 80GB HBM3", 81559, "575.57.08")}
H200 = ("NVIDIA H200", 143771, "580.159.04")


def samples(host: str, n: int, tick: int, ts: float) -> list[GpuSample]:
    name, total, driver = MODELS.get(host, H200)
    out = []
    for i in range(n):
        util = float((tick * 7 + i * 13 + len(host) * 5) % 101)
        out.append(
            GpuSample(host=host, index=i, name=name,
                      uuid=f"GPU-{host}-{i}", utilization_pct=util,
                      memory_used_mib=1024 * (i + 1) + tick, memory_total_mib=total,
                      temperature_c=35.0 + util / 4, power_draw_w=83.46 + util * 6,
                      power_limit_w=700.0, sm_clock_mhz=1980 if util > 5 else 345, ts=ts,
                      driver_version=driver)
        )  # fmt: skip
    return out


def board(hosts: Sequence[str] = HOSTS, gpus: int = 8, ticks: int = 30) -> Board:
    """A board with `ticks` seconds of history; gpu-c went quiet after the first half."""
    b = Board(hosts, clock=clock, stale_after=5.0)
    for t in range(ticks):
        ts = T0 + 65 + t
        for h in hosts:
            if h == "gpu-c" and t >= ticks // 2:
                continue
            b.add_samples(h, samples(h, gpus, t, ts))
    b.set_status("gpu-c", "stale", "retry in 4s: nvidia-smi ended: exit 255")
    b.set_processes("gpu-a", [
        GpuProcess("gpu-a", 0, 4242, "alice", 40960, "python train.py --model llama"),
        GpuProcess("gpu-a", 3, 5151, "bob", 2048, "python eval.py"),
    ])  # fmt: skip
    return b


def smoke_run_events(finished: bool = True) -> list[ev.Event]:
    """`gpunode smoke` on the four hosts: gpu-c refuses the connection, gpu-b is still
    running; with `finished`, gpu-b passes and the run ends with exit 2 (a failed test)."""
    out: list[ev.Event] = [ev.RunStarted("", command="smoke", hosts=HOSTS, ts=T0)]
    out += [ev.HostStatusChanged(h, status="smoke", ts=T0 + 1) for h in ("gpu-a", "gpu-b", "gpu-d")]
    refused = "cannot connect to 127.0.0.4:22: Connection refused"
    out.append(ev.HostUnreachable("gpu-c", reason=refused, ts=T0 + 2))
    out.append(ev.HostFinished("gpu-c", status="unreachable", seconds=1.0, ts=T0 + 2))
    out += smoke_events()
    out.append(ev.HostFinished("gpu-a", status="failed", ok=2, failed=1, seconds=18.6, ts=T0 + 90))
    out.append(ev.HostFinished("gpu-d", status="ok", ok=1, seconds=0.5, ts=T0 + 90))
    if finished:
        out.append(ev.SmokeResult("gpu-b", result=ev.SmokeCheck(
            name="nvidia-smi/gpus", status="pass", reason="NVIDIA H200", value=8, expected=8,
            unit="GPUs", seconds=0.4), ts=T0 + 91))  # fmt: skip
        out.append(ev.HostFinished("gpu-b", status="ok", ok=1, seconds=90.0, ts=T0 + 91))
        out.append(ev.RunFinished("", exit_code=2, seconds=91.0, ts=T0 + 91))
    return out


class Executor:
    """One host's events as gpunode.execute.host.HostRun emits them (plans, numbered
    changes, reboots; run.py's HostFinished), with the HostResult the executor keeps: its
    recap is the truth the screen must agree with."""

    def __init__(self, host: str) -> None:
        self.host = host
        self.index = 0  # the executor numbers a host's changes 1.. across its plans
        self.result = HostResult(host)
        self.events: list[ev.Event] = []
        self.plan: tuple[ev.PlannedChange, ...] = ()

    def emit(self, e: ev.Event) -> None:
        self.events.append(e)

    def take(self) -> list[ev.Event]:
        """The events emitted since the last take."""
        out, self.events = self.events, []
        return out

    def read(self, *changes: ev.PlannedChange) -> None:
        self.emit(ev.HostStatusChanged(self.host, status="gathering", ts=T0))
        self.emit(ev.FactsGathered(self.host, facts={}, seconds=0.5, ts=T0))
        self.emit(ev.HostStatusChanged(self.host, status="planning", ts=T0))
        self.plan = changes
        self.emit(ev.PlanReady(self.host, changes=changes, ts=T0))

    def apply(self, *, fail: str = "", skip: str = "") -> bool:
        """Run the plan's changes but its reboot; the one titled `fail` fails (and the host
        with it), the one titled `skip` is skipped (a module reload refused)."""
        todo = [c for c in self.plan if c.commands or not c.reboot]
        if todo:
            self.emit(ev.HostStatusChanged(self.host, status="applying", ts=T0))
        total = self.index + len(todo)
        for c in todo:
            self.index += 1
            i = self.index
            self.emit(ev.ChangeStarted(self.host, index=i, total=total, title=c.title, ts=T0))
            self.emit(ev.CommandOutput(self.host, index=i, stream="stdout", text="..\n", ts=T0))
            status = "failed" if c.title == fail else "skipped" if c.title == skip else "changed"
            message = "exit 100: E: boom" if status == "failed" else c.reason
            self.result.changes.append(ChangeResult(c.title, c.role, c.op, c.reason, status,
                                                    1.0, list(c.commands), message))  # fmt: skip
            self.emit(ev.ChangeFinished(self.host, index=i, title=c.title, status=status,
                                        seconds=1.0, message=message, ts=T0))  # fmt: skip
            if status == "failed":
                self.result.status, self.result.message = "failed", f"{c.title}: {message}"
                self.emit(ev.HostStatusChanged(self.host, status="failed",
                                               detail=self.result.message, ts=T0))  # fmt: skip
                return False
        return True

    def check(self) -> None:
        """--check: every planned change, the reboot too, finishes as skipped."""
        for c in self.plan:
            self.index += 1
            self.result.changes.append(ChangeResult(c.title, c.role, c.op, c.reason, "skipped",
                                                    0.0))  # fmt: skip
            self.emit(ev.ChangeFinished(self.host, index=self.index, title=c.title,
                                        status="skipped", seconds=0.0,
                                        message=f"would change: {c.reason}", ts=T0))  # fmt: skip
        self.result.status = "changed" if self.plan else "ok"

    def reboot(self, reason: str) -> None:
        self.emit(ev.RebootStarted(self.host, reason=reason, ts=T0))
        self.emit(ev.HostStatusChanged(self.host, status="rebooting", detail=reason, ts=T0))
        self.result.rebooted = True
        self.emit(ev.RebootFinished(self.host, seconds=30.0, boot_id="b2", ts=T0))

    def finish(self) -> ev.HostRecap:
        r = self.result
        if r.status == "ok":  # converged (--check has said "changed" already)
            r.status = "changed" if r.changed else "ok"
        self.emit(ev.HostFinished(self.host, status=r.status, ok=r.ok, changed=r.changed,
                                  failed=r.failed, message=r.message, ts=T0))  # fmt: skip
        return r.recap()


def started(*hosts: Executor) -> ev.RunStarted:
    return ev.RunStarted("", command="apply", hosts=tuple(h.host for h in hosts), ts=T0)


def ended(*hosts: Executor) -> list[ev.Event]:
    """Each host's HostFinished, then RunFinished with the executor's own recap."""
    recap = tuple(h.finish() for h in hosts)
    out = [e for h in hosts for e in h.take()]
    run = RunResult({h.host: h.result for h in hosts})
    out.append(ev.RunFinished("", exit_code=int(run.exit_code), seconds=1.0, hosts=recap, ts=T0))
    return out
