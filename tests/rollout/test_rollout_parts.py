"""The rollout's parts without hosts: waves, and what Slurm's and dpkg's output is read as
(each output recorded from the lab's real Slurm 22.05 and a lab host's dpkg)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from pathlib import Path

import pytest

from gpunode.rollout.before import parse as parse_before
from gpunode.rollout.waves import WaveSize, WaveSizeError, waves
from gpunode.scheduler import SchedulerError
from gpunode.scheduler.slurm import Slurm, clean_reason, parse_show
from gpunode.transport.base import CommandResult

SHOW = (
    "NodeName=lab-02 Arch=x86_64 CoresPerSocket=1  CPUAlloc=0 CPUEfctv=1 CPUTot=1 "
    "CPULoad=5.72 AvailableFeatures=(null) ActiveFeatures=(null) Gres=gpu:2 "
    "NodeAddr=127.12.7.12 NodeHostName=lab-02 Version=22.05.8 OS=Linux 6.18.44-fc-v1147 #1 "
    "SMP PREEMPT_DYNAMIC @0  RealMemory=1000 AllocMem=0 FreeMem=21791 Sockets=1 Boards=1 "
    "State=IDLE+DRAIN ThreadsPerCore=1 TmpDisk=0 Weight=1 Owner=N/A MCS_label=N/A "
    "Partitions=lab  BootTime=2026-12-03T18:32:48 SlurmdStartTime=2026-12-03T22:22:50 "
    "LastBusyTime=2026-12-03T22:22:51 CfgTRES=cpu=1,mem=1000M,billing=1 AllocTRES= "
    "CapWatts=n/a CurrentWatts=0 AveWatts=0 ExtSensorsJoules=n/s ExtSensorsWatts=0 "
    "ExtSensorsTemp=n/s Reason=gpunode: driver 580.95.05 -> 580.159.04 "
    "[root@2026-12-03T22:23:15]\n"
)
STARTED = datetime(2026, 12, 3, 22, 22, 50).timestamp()


def test_the_canary_goes_alone_then_waves_of_the_size_or_share() -> None:
    hosts = [f"h{i}" for i in range(1, 11)]
    assert waves(hosts, 1, WaveSize.parse("4")) == [
        ["h1"], ["h2", "h3", "h4", "h5"], ["h6", "h7", "h8", "h9"], ["h10"],
    ]  # fmt: skip
    assert waves(hosts, 2, WaveSize.parse("50%")) == [
        ["h1", "h2"], ["h3", "h4", "h5", "h6"], ["h7", "h8", "h9", "h10"],
    ]  # fmt: skip
    assert waves(hosts[:2], 0, WaveSize.parse("1%")) == [["h1"], ["h2"]]
    for bad in ("0", "101%", "-1", "x", "5 %"):
        with pytest.raises(WaveSizeError, match="--wave-size"):
            WaveSize.parse(bad)


def test_a_node_line_is_read_with_its_reason_whole() -> None:
    f = parse_show(SHOW)
    assert f["State"] == "IDLE+DRAIN"
    assert f["Gres"] == "gpu:2"
    assert f["Reason"] == "gpunode: driver 580.95.05 -> 580.159.04 [root@2026-12-03T22:23:15]"


def fake(answers: dict[str, list[str]]) -> tuple[Slurm, list[list[str]]]:
    """A Slurm whose commands answer with recorded outputs, in turn, by their first words."""
    asked: list[list[str]] = []

    def run(argv: Sequence[str]) -> CommandResult:
        asked.append(list(argv))
        key = " ".join(argv[:2])
        out = answers[key].pop(0) if len(answers[key]) > 1 else answers[key][0]
        return CommandResult(" ".join(argv), 0, out, "", 0.0)

    return Slurm(run, poll=0.01), asked


def test_gres_ok_wants_a_slurmd_started_since_and_every_gpu() -> None:
    s, _ = fake({"scontrol show": [SHOW]})
    assert s.gres_ok("lab-02", 2, STARTED - 5) is None
    assert "not registered" in (s.gres_ok("lab-02", 2, STARTED + 5) or "")
    assert s.gres_ok("lab-02", 8, 0) == "Slurm counts 2 GPU(s) in its gres, the inventory 8"
    s, _ = fake({"scontrol show": [SHOW.replace("State=IDLE+DRAIN", "State=DOWN+DRAIN")]})
    assert (s.gres_ok("lab-02", 2, 0) or "").startswith("the node is DOWN")


def test_a_drain_waits_for_each_job_and_times_out_naming_it() -> None:
    busy = SHOW.replace("State=IDLE+DRAIN", "State=MIXED+DRAIN")
    s, asked = fake({"scontrol show": [busy, busy, SHOW], "squeue -h": ["12\n", "12\n", ""]})
    said: list[str] = []
    s.wait_drained("lab-02", 30, said.append)
    assert said == ["job 12", "job 12"]  # at each poll
    assert ["squeue", "-h", "-w", "lab-02", "-o", "%i"] in asked
    s, _ = fake({"scontrol show": [busy], "squeue -h": ["12\n"]})
    with pytest.raises(SchedulerError, match=r"still runs job 12 after 0s .*stays drained"):
        s.wait_drained("lab-02", 0.0, said.append)


def test_the_drain_reason_is_one_argument_of_printable_text() -> None:
    s, asked = fake({"scontrol update": [""]})
    s.drain("lab-02", 'gpunode: driver 580 -> 590 "x"\x1b[2J')
    assert asked[-1] == ["scontrol", "update", "NodeName=lab-02", "State=DRAIN",
                         "Reason=gpunode: driver 580 -> 590 'x'?[2J"]  # fmt: skip
    assert len(clean_reason("x" * 500)) == 200


def test_before_reads_the_loaded_release_packages_and_holds() -> None:
    out = (
        "580.95.05\n### packages\n"
        "ii  nvidia-open-580=580.95.05-1\n"
        "ii  libnvidia-compute-580=580.95.05-0ubuntu1\n"
        "rc  nvidia-dkms-570-open=570.133.20-0ubuntu1\n"
        "### held\nnvidia-open-580\n"
    )
    b = parse_before(out)
    assert b.driver == "580.95.05"
    assert b.packages == {
        "nvidia-open-580": "580.95.05-1",
        "libnvidia-compute-580": "580.95.05-0ubuntu1",
    }
    assert b.held == ("nvidia-open-580",) and b.driver_held
    assert parse_before("none\n### packages\n### held\n").driver is None


def test_rollback_pins_the_recorded_driver_cudnn_and_nccl_held_as_they_were(
    tmp_path: Path,
) -> None:
    from gpunode.cli.upgrade import _pin
    from gpunode.inventory import load

    inv = tmp_path / "inventory.yaml"
    inv.write_text(
        "defaults:\n"
        "  stack:\n"
        '    driver: {branch: "580", update: latest}\n'
        '    cuda: {toolkits: ["12.8"]}\n'
        '    cudnn: "9"\n'
        "hosts:\n"
        "  gpu1: {address: 127.0.0.1}\n"
    )
    host = load(str(inv)).hosts["gpu1"]
    before = parse_before(
        "580.95.05\n### packages\n"
        "ii  nvidia-open-580=580.95.05-1\n"
        "ii  libcudnn9-cuda-12=9.10.2.21-1\n"
        "ii  libnccl2=2.26.2-1+cuda12.8\n"
        "### held\nlibcudnn9-cuda-12\n"
    )
    stack = _pin(host, before).stack
    assert stack.driver is not None and stack.cudnn is not None
    assert (stack.driver.branch, stack.driver.version) == ("580", "580.95.05")
    assert (stack.driver.update, stack.driver.hold) == ("keep", False)
    assert (stack.cudnn.version, stack.cudnn.hold) == ("9.10.2.21-1", True)
    assert stack.nccl is None  # not the inventory's to manage: left so


def test_the_run_view_shows_each_hosts_rollout_phase() -> None:
    from gpunode.events import HostStatusChanged, RolloutPhase
    from gpunode.tui.runstate import RunState

    state = RunState(["lab-01", "lab-02"])
    for e in (
        RolloutPhase("lab-02", phase="draining", wave=1),
        RolloutPhase("lab-02", phase="waiting", wave=1, detail="job 12"),
    ):
        state.apply(e)
    h = state.hosts["lab-02"]
    assert (h.status, h.step) == ("waiting", "waiting: job 12")
    state.apply(RolloutPhase("lab-02", phase="applying", wave=1))
    state.apply(HostStatusChanged("lab-02", status="rebooting"))
    assert h.status == "rebooting"  # the apply's own events say how the apply goes
    state.apply(RolloutPhase("lab-01", phase="failed", wave=1, detail="apply failed: smoke"))
    assert (state.hosts["lab-01"].status, state.hosts["lab-01"].message) == (
        "failed",
        "apply failed: smoke",
    )
