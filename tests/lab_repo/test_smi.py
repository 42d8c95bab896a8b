"""The simulated nvidia-smi against the real H200 captures: same shape, same parsed values."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from importlib import resources
from pathlib import Path

import pytest

from gpunode.facts.smi import parse_query_csv, parse_smi_table
from gpunode_lab.gpumodels import MODELS, gpus_document
from gpunode_lab.repo import smi_sim
from tests.smi_readers import CAPTURE_FIELDS, parse_smi_list, parse_smi_xml

FIX = Path(__file__).parent.parent / "fixtures" / "facts"
X2 = FIX / "h200x2-ubuntu2404"
X1 = FIX / "h200-ubuntu2404"
SCRIPT = str(resources.files("gpunode_lab.repo") / "smi_sim.py")
TEMPLATES = str(resources.files("gpunode_lab.repo") / "smi_templates")

UUIDS = ["GPU-4535bd70-a68d-8e9d-5e87-ae20fb0ab3da", "GPU-b04010c1-7166-6096-5d84-4ad10eafff39"]


def lab(tmp: Path, *args: str, model: str = "H200", count: int = 2, **state: object) -> str:
    etc = tmp / "etc/gpunode-lab"
    etc.mkdir(parents=True, exist_ok=True)
    doc = {
        "model": model,
        "count": count,
        "bus_ids": [f"00000000:00:{6 + i:02X}.0" for i in range(count)],
        "uuids": (UUIDS + [f"GPU-0000000{i}-0000-0000-0000-000000000000" for i in range(8)])[
            :count
        ],
        "host": "lab-01",
    }
    (etc / "gpus.json").write_text(json.dumps(state.get("gpus", doc)))
    module = state.get("module", {"loaded": True, "version": "580.159.04", "flavor": "open"})
    (etc / "module.json").write_text(json.dumps(module))
    if "load" in state:
        (etc / "load.json").write_text(json.dumps(state["load"]))
    env = dict(os.environ, GPUNODE_LAB_ROOT=str(tmp), GPUNODE_LAB_SMI_TEMPLATES=TEMPLATES)
    proc = subprocess.run(
        [sys.executable, SCRIPT, *args], capture_output=True, text=True, env=env, check=False
    )
    return f"rc={proc.returncode}\n" + proc.stdout


def ok(out: str) -> str:
    assert out.startswith("rc=0\n"), out
    return out.removeprefix("rc=0\n")


def _frame(line: str) -> list[int]:
    return [i for i, c in enumerate(line) if c in "|+"]


def test_table_has_the_capture_shape_and_values(tmp_path: Path) -> None:
    ours = ok(lab(tmp_path)).splitlines()
    real = (X2 / "nvidia-smi.txt").read_text().splitlines()
    assert len(ours) == len(real)
    for mine, theirs in zip(ours[1:], real[1:], strict=True):
        assert len(mine) == len(theirs)
        assert _frame(mine) == _frame(theirs)
    dynamic = {0, 9, 13}  # timestamp and the temperature/power rows
    for i, (mine, theirs) in enumerate(zip(ours, real, strict=True)):
        if i not in dynamic:
            assert mine == theirs, i
    a, b = parse_smi_table("\n".join(ours)), parse_smi_table("\n".join(real))
    assert a.ok and b.ok
    assert (a.driver_version, a.cuda_version) == (b.driver_version, b.cuda_version)
    assert [(g.index, g.name, g.bus_id, g.memory_total_mib) for g in a.gpus] == [
        (g.index, g.name, g.bus_id, g.memory_total_mib) for g in b.gpus
    ]
    assert all(isinstance(g.power_draw_w, float) and g.power_draw_w > 0 for g in a.gpus)


def test_list_matches_the_capture(tmp_path: Path) -> None:
    facts = (X2 / "host-facts.txt").read_text()
    real = facts.split("## nvidia-smi -L\n")[1].split("##")[0]
    assert ok(lab(tmp_path, "-L")) == real
    assert parse_smi_list(real) == parse_smi_list(ok(lab(tmp_path, "-L")))


def test_query_csv_matches_the_capture(tmp_path: Path) -> None:
    fields = ",".join(CAPTURE_FIELDS)
    ours = ok(lab(tmp_path, f"--query-gpu={fields}", "--format=csv,noheader,nounits"))
    real = (X2 / "query-gpu.csv").read_text()
    static = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 12, 14, 15, 16, 17, 18]
    for mine, theirs in zip(ours.splitlines(), real.splitlines(), strict=True):
        m, t = mine.split(", "), theirs.split(", ")
        assert len(m) == len(t)
        assert [m[i] for i in static] == [t[i] for i in static]
        assert float(m[11]) > 0 and int(m[10]) > 0 and int(m[13]) > 0
    a, b = parse_query_csv(ours, CAPTURE_FIELDS), parse_query_csv(real, CAPTURE_FIELDS)
    assert [(g.uuid, g.memory_total_mib, g.memory_used_mib) for g in a.gpus] == [
        (g.uuid, g.memory_total_mib, g.memory_used_mib) for g in b.gpus
    ]
    header = ok(
        lab(
            tmp_path,
            "--query-gpu=index,name,driver_version,memory.total",
            "--format=csv",
            "-i",
            "0",
        )
    )
    assert header == (X1 / "query-gpu-header.csv").read_text()


def test_xml_has_the_capture_tree(tmp_path: Path) -> None:
    ours = ok(lab(tmp_path, "-q", "-x"))
    real = (X2 / "nvidia-smi-q.xml").read_text()
    assert ours.splitlines()[:3] == real.splitlines()[:3]
    assert [e.tag for e in ET.fromstring(ours).iter()] == [
        e.tag for e in ET.fromstring(real).iter()
    ]
    a, b = parse_smi_xml(ours), parse_smi_xml(real)
    assert a.ok and b.ok and a.driver_version == b.driver_version == "580.159.04"
    assert a.cuda_version == b.cuda_version == "13.0"
    assert [(g.uuid, g.bus_id, g.memory_total_mib, g.name) for g in a.gpus] == [
        (g.uuid, g.bus_id, g.memory_total_mib, g.name) for g in b.gpus
    ]


def test_q_text_has_the_capture_keys(tmp_path: Path) -> None:
    ours = ok(lab(tmp_path, "-q", count=1))
    real = (X1 / "nvidia-smi-q.txt").read_text()

    def keys(text: str) -> list[str]:
        return [ln.split(" : ")[0] for ln in text.splitlines()]

    assert keys(ours)[1:] == keys(real)[1:]
    assert "    Product Name                                       : NVIDIA H200" in ours


def test_topo_matches_the_capture_but_for_cpu_affinity(tmp_path: Path) -> None:
    ours = ok(lab(tmp_path, "topo", "-m")).splitlines()
    real = (X2 / "topo.txt").read_text().splitlines()
    assert ours[0] == real[0] and ours[3:] == real[3:]
    for mine, theirs in zip(ours[1:3], real[1:3], strict=True):
        m, t = mine.split("\t"), theirs.split("\t")
        assert m[:3] + m[4:] == t[:3] + t[4:]


def test_module_states(tmp_path: Path) -> None:
    out = lab(tmp_path, module={"loaded": False, "version": None, "flavor": None})
    assert out == (
        "rc=9\nNVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
        "Make sure that the latest NVIDIA driver is installed and running.\n"
    )
    out = lab(tmp_path, "-L", module={"loaded": True, "version": "570.195.03", "flavor": "open"})
    assert out == (
        "rc=18\nFailed to initialize NVML: Driver/library version mismatch\n"
        "NVML library version: 580.159\n"
    )


@pytest.mark.parametrize(
    ("model", "name", "memory"),
    [
        ("H100", "NVIDIA H100 80GB HBM3", 81559),
        ("A100", "NVIDIA A100-SXM4-80GB", 81920),
        ("L40S", "NVIDIA L40S", 46068),
        ("RTX4090", "NVIDIA GeForce RTX 4090", 24564),
    ],
)
def test_other_models_parse(tmp_path: Path, model: str, name: str, memory: int) -> None:
    out = ok(lab(tmp_path, model=model, count=4))
    assert all(len(ln) == 91 for ln in out.splitlines()[1:] if ln)
    parsed = parse_smi_table(out)
    assert [g.name for g in parsed.gpus] == [name] * 4
    assert {g.memory_total_mib for g in parsed.gpus} == {memory}


@pytest.mark.parametrize("key", sorted(MODELS))
def test_each_lab_model_prints_what_its_gpus_json_says(tmp_path: Path, key: str) -> None:
    doc = gpus_document(MODELS[key], 2, "lab-01")
    q = ok(lab(tmp_path, "-q", gpus=doc))
    parsed = parse_smi_table(ok(lab(tmp_path, gpus=doc)))
    assert [(g.name, g.memory_total_mib) for g in parsed.gpus] == [
        (doc["name"], doc["memory_mib"])
    ] * 2
    device = re.search(r"Device Id +: 0x([0-9A-F]{4})10DE", q)
    assert device and f"0x{device.group(1).lower()}" == doc["pci_device_id"]


def test_the_h200_is_the_captured_one() -> None:
    real = (X1 / "nvidia-smi-q.txt").read_text()

    def value(label: str) -> str:
        found = re.search(rf"^ *{label} +: (.+)$", real, re.M)
        assert found, label
        return found.group(1)

    h200 = MODELS["H200"].spec
    assert value("Product Name") == h200.name
    assert value("Device Id") == f"0x{h200.device_id}"
    assert value("Total") == f"{h200.memory_mib} MiB"  # the first Total: FB memory
    assert value("Reserved") == f"{h200.reserved_mib} MiB"
    assert value("Current Power Limit") == f"{h200.power_limit_w}.00 W"


def test_busy_load_shows_processes_and_csv_loops(tmp_path: Path) -> None:
    load = {"pattern": "busy", "seed": 7}
    out = ok(lab(tmp_path, load=load))
    assert "No running processes found" not in out
    parsed = parse_smi_table(out)
    assert all((g.utilization_pct or 0) >= 90 for g in parsed.gpus)
    apps = ok(lab(tmp_path, "--query-compute-apps=pid,used_memory", "--format=csv", load=load))
    assert apps.splitlines()[0] == "pid, used_memory [MiB]" and len(apps.splitlines()) == 3


def test_values_move_over_time_deterministically() -> None:
    doc = {"model": "H200", "count": 2}
    wave = {"pattern": "wave", "seed": 3}
    series = [smi_sim.sample(doc, wave, t)[0] for t in range(0, 60, 5)]
    assert len({g.util for g in series}) > 5
    assert len({round(g.power) for g in series}) > 5
    again = [smi_sim.sample(doc, wave, t)[0] for t in range(0, 60, 5)]
    assert [(g.util, g.power, g.temp) for g in series] == [(g.util, g.power, g.temp) for g in again]
    idle = smi_sim.sample(doc, {}, 100.0)
    assert all(g.util == 0 and g.mem_used == 0 for g in idle)


def test_loop_prints_repeatedly(tmp_path: Path) -> None:
    etc = tmp_path / "etc/gpunode-lab"
    lab(tmp_path, "-L")  # writes the state files
    env = dict(os.environ, GPUNODE_LAB_ROOT=str(tmp_path), GPUNODE_LAB_SMI_TEMPLATES=TEMPLATES)
    cmd = [sys.executable, SCRIPT, "--query-gpu=index,utilization.gpu", "--format=csv,noheader"]
    proc = subprocess.Popen([*cmd, "-lms", "100"], stdout=subprocess.PIPE, text=True, env=env)
    assert proc.stdout is not None
    lines = [proc.stdout.readline() for _ in range(6)]
    proc.terminate()
    proc.wait(timeout=5)
    assert lines[:2] == ["0, 0 %\n", "1, 0 %\n"] and lines[4:6] == lines[:2]
    assert etc.is_dir()
