"""`gpunode facts`' table: persistence mode per GPU and the processes using the GPUs."""

from __future__ import annotations

from pathlib import Path

from gpunode.facts.model import GpuProcess
from gpunode.facts.parse import parse_facts
from gpunode.views.facts import render

FIX = Path(__file__).parent.parent / "fixtures" / "facts"


def row(text: str, label: str) -> str:
    """The value column of the table's row named `label`."""
    line = next(ln for ln in text.splitlines() if ln.strip().startswith(label + " "))
    return line.strip()[len(label) :].strip()


def test_persistence_mode_and_gpu_processes_are_shown() -> None:
    f = parse_facts((FIX / "h200x2-ubuntu2404" / "facts-assembled.txt").read_text())
    text = render("h", f)
    assert row(text, "gpu 0").endswith(" persistence on")  # as the real H200 reported
    assert row(text, "gpu 1").endswith(" persistence on")
    assert row(text, "gpu processes") == "none"
    f.smi.gpus[1].persistence_mode = False
    f.gpu_processes = [GpuProcess(pid=4242, name="python3", memory_mib=40960),
                       GpuProcess(pid=77, name="Xorg")]  # fmt: skip
    text = render("h", f)
    assert row(text, "gpu 1").endswith(" persistence off")
    assert row(text, "gpu processes") == "pid 4242 (python3, 40960 MiB); pid 77 (Xorg)"
