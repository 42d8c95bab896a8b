#!/usr/bin/python3
"""Simulated `nvidia-smi` for gpunode lab hosts (a stand-in: there is no GPU behind it).

Installed as /usr/bin/nvidia-smi by the lab repository's nvidia-utils packages. It reads
the simulated hardware from /etc/gpunode-lab/ (gpus.json, module.json, load.json) and
prints what the real tool prints, in the exact shape of captures from H200 machines.
Standard library only: it runs on the host's own python3.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import random
import re
import signal
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

# Replaced by the package build with the utils package's own driver release.
DRIVER_VERSION = "580.159.04"
CUDA_VERSION = "13.0"

ROOT = Path(os.environ.get("GPUNODE_LAB_ROOT", "/"))
ETC = ROOT / "etc/gpunode-lab"
# The installed user-space release, which a background upgrade of the libraries moves while
# the loaded module stays: that is what makes NVML report a version mismatch.
_INSTALLED = ROOT / "usr/share/gpunode-lab/driver-version"
if _INSTALLED.is_file():
    DRIVER_VERSION = (_INSTALLED.read_text().split() or [DRIVER_VERSION])[0]
TEMPLATES = Path(
    os.environ.get("GPUNODE_LAB_SMI_TEMPLATES", str(ROOT / "usr/share/gpunode-lab/smi"))
)

NO_DRIVER = (
    "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
    "Make sure that the latest NVIDIA driver is installed and running."
)


@dataclass(frozen=True)
class Model:
    """One GPU model: the lab's only table of them (gpunode_lab/gpumodels.py derives the
    PCI devices and gpus.json from it; this file must run alone on a host's python3)."""

    name: str  # as nvidia-smi prints it
    arch: str
    memory_mib: int
    reserved_mib: int
    power_limit_w: int
    min_power_w: int
    idle_w: float
    sm_max: int
    mem_clock: int
    device_id: str  # nvidia-smi -q's "Device Id": PCI device, then vendor 10DE
    link: str  # topo -m between two GPUs of this model
    fan: bool
    pci_name: str  # as lspci prints it
    pci_class: int  # 0x0302: 3D controller (data-centre cards), 0x0300: VGA
    nvswitches: int = 0  # NVSwitch bridges on the board (HGX: 4 for 8 GPUs)

    @property
    def pci_device(self) -> int:
        return int(self.device_id[:4], 16)


# H200: the real captures (tests/fixtures/smi). The others from NVIDIA's published
# specifications: memory as nvidia-smi reports it, the board power limit, clocks.
MODELS: dict[str, Model] = {
    "H200": Model(
        "NVIDIA H200", "Hopper", 143771, 616, 700, 200, 95.0, 1980, 3201, "233510DE", "NV18", False,
        "GH100 [H200 SXM 141GB]", 0x030200,
    ),
    # An 8-GPU HGX H200 board: the H200's GPUs behind four third-generation NVSwitches
    # (lspci: "Bridge [0680]: NVIDIA Corporation GH100 [H100 NVSwitch] [10de:22a3]").
    "H200-HGX": Model(
        "NVIDIA H200", "Hopper", 143771, 616, 700, 200, 95.0, 1980, 3201, "233510DE", "NV18", False,
        "GH100 [H200 SXM 141GB]", 0x030200, nvswitches=4,
    ),
    "H100": Model(
        "NVIDIA H100 80GB HBM3", "Hopper", 81559, 530, 700, 200, 70.0, 1980, 2619, "233010DE",
        "NV18", False, "GH100 [H100 SXM5 80GB]", 0x030200,
    ),
    "A100": Model(
        "NVIDIA A100-SXM4-80GB", "Ampere", 81920, 567, 400, 100, 60.0, 1410, 1593, "20B210DE",
        "NV12", False, "GA100 [A100 SXM4 80GB]", 0x030200,
    ),
    "A100-40GB": Model(
        "NVIDIA A100-SXM4-40GB", "Ampere", 40960, 567, 400, 100, 55.0, 1410, 1215, "20B010DE",
        "NV12", False, "GA100 [A100 SXM4 40GB]", 0x030200,
    ),
    "L40S": Model(
        "NVIDIA L40S", "Ada Lovelace", 46068, 475, 350, 100, 35.0, 2520, 9001, "26B910DE", "NODE",
        False, "AD102GL [L40S]", 0x030200,
    ),
    "RTX4090": Model(
        "NVIDIA GeForce RTX 4090", "Ada Lovelace", 24564, 380, 450, 150, 20.0, 2520, 10501,
        "268410DE", "PHB", True, "AD102 [GeForce RTX 4090]", 0x030000,
    ),
}  # fmt: skip

IDLE_SM = 345


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def find_model(key: str, name: str) -> Model:
    want = (key + " " + name).lower().replace(" ", "")
    for k in sorted(MODELS, key=len, reverse=True):
        if k.lower() in want:
            return MODELS[k]
    return MODELS["H200"]


FM_RUN = ROOT / "run/nvidia-fabricmanager"


def fabric_state(nvswitches: int) -> tuple[str, str]:
    """On an NVSwitch board each GPU registers with the fabric once the fabric manager runs
    at the loaded module's release (until then CUDA fails with 802, "system not yet
    initialized"); without NVSwitches there is no fabric: N/A, as the real captures say."""
    if not nvswitches:
        return ("N/A", "N/A")
    module = str((_read_json(ETC / "module.json") or {}).get("version"))
    try:
        pid = int((FM_RUN / "nv-fabricmanager.pid").read_text().split()[0])
        version = (FM_RUN / "version").read_text().strip()
    except (OSError, ValueError, IndexError):
        return ("In Progress", "N/A")
    if version == module and Path(f"/proc/{pid}").exists():
        return ("Completed", "Success")
    return ("In Progress", "N/A")


@dataclass
class Gpu:
    index: int
    name: str
    uuid: str
    bus_id: str
    model: Model
    memory_mib: int
    power_limit_w: int
    util: int
    mem_util: int
    mem_used: int
    temp: int
    mem_temp: int
    power: float
    sm_clock: int
    serial: str
    pid: int | None
    fabric: tuple[str, str] = ("N/A", "N/A")  # nvidia-smi's Fabric State and Status

    @property
    def mem_free(self) -> int:
        # The real tool's Free is Total - Reserved - Used, rounded up by one MiB.
        return max(0, self.memory_mib - self.model.reserved_mib + 1 - self.mem_used)

    @property
    def pstate(self) -> str:
        return "P0"


def _noise(seed: int, index: int, tick: int, what: str) -> float:
    return random.Random(f"{seed}:{index}:{tick}:{what}").random()


def sample(doc: dict[str, Any], load: dict[str, Any], now: float) -> list[Gpu]:
    """The GPUs at time `now`: a deterministic function of time, seed and load pattern."""
    model = find_model(str(doc.get("model", "")), str(doc.get("name", "")))
    count = int(doc.get("count", len(doc.get("uuids", [])) or 1))
    pattern = str(load.get("pattern", "idle"))
    seed = int(load.get("seed", 0))
    tick = int(now)
    fabric = fabric_state(int(doc.get("nvswitches") or 0))
    gpus = []
    for i in range(count):
        limit = int(doc.get("power_limit_w") or model.power_limit_w)
        total = int(doc.get("memory_mib") or model.memory_mib)
        n = _noise(seed, i, tick, "a")
        if pattern == "busy":
            level = 0.9 + 0.1 * n
        elif pattern == "wave":
            phase = _noise(seed, i, 0, "phase") * 2 * math.pi
            level = max(0.0, min(1.0, 0.5 + 0.5 * math.sin(2 * math.pi * now / 60 + phase)))
            level = max(0.0, min(1.0, level + 0.04 * (n - 0.5)))
        else:
            level = 0.0
        util = round(100 * level)
        mem_used = round(total * 0.85 * level) if util else 0
        power = model.idle_w + 6 * n + (limit * 0.92 - model.idle_w) * level
        temp = round(35 + 2 * n + 38 * level)
        uuids = doc.get("uuids") or []
        buses = doc.get("bus_ids") or []
        gpus.append(
            Gpu(
                index=i,
                name=str(doc.get("name") or model.name),
                uuid=str(uuids[i]) if i < len(uuids) else f"GPU-00000000-0000-0000-0000-{i:012x}",
                bus_id=str(buses[i]) if i < len(buses) else f"00000000:00:{6 + i:02X}.0",
                model=model,
                memory_mib=total,
                power_limit_w=limit,
                util=util,
                mem_util=round(util * 0.6),
                mem_used=mem_used,
                temp=temp,
                mem_temp=max(temp - 1, 0),
                power=power,
                sm_clock=model.sm_max if util else IDLE_SM,
                serial=str(1653724000000 + (seed * 7919 + i * 104729) % 1000000),
                pid=(4100 + 37 * i + seed % 1000) if util else None,
                fabric=fabric,
            )
        )
    return gpus


# ---------------------------------------------------------------- default table view


def _row(a: str, b: str, c: str) -> str:
    return f"|{a}|{b}|{c}|"


def _full(text: str = "", fill: str = " ") -> str:
    return "|" + text.ljust(89, fill) + "|"


SEP = "+" + "-" * 41 + "+" + "-" * 24 + "+" + "-" * 22 + "+"
FULL = "+" + "-" * 89 + "+"


def table(gpus: list[Gpu], when: float) -> str:
    head = f"NVIDIA-SMI {DRIVER_VERSION}"
    mid = f"Driver Version: {DRIVER_VERSION}"
    cuda = f"CUDA Version: {CUDA_VERSION}"
    lines = [
        time.strftime("%a %b %d %H:%M:%S %Y", time.localtime(when)) + "       ",
        FULL,
        f"| {head:<34}{mid:<31}{cuda:<22} |",
        SEP,
        _row(" GPU  Name                 Persistence-M ", " Bus-Id          Disp.A ",
             " Volatile Uncorr. ECC "),
        _row(" Fan  Temp   Perf          Pwr:Usage/Cap ", "           Memory-Usage ",
             " GPU-Util  Compute M. "),
        _row(" " * 41, " " * 24, "               MIG M. "),
        "|" + "=" * 41 + "+" + "=" * 24 + "+" + "=" * 22 + "|",
    ]  # fmt: skip
    for g in gpus:
        name = g.name if len(g.name) <= 27 else g.name[:24] + "..."
        fan = f"{g.util // 3 + 30}%" if g.model.fan else "N/A"
        power = f"{round(g.power):>15}W / {g.power_limit_w:>4}W "
        lines += [
            _row(f"{g.index:>4}  {name:<29}{'On':>4}  ", f" {g.bus_id:>18} Off ", f"{'0':>21} "),
            _row(
                f" {fan:<5}{g.temp:>3}C    {g.pstate:<2}{power}",
                f" {g.mem_used:>7}MiB / {g.memory_mib:>6}MiB ",
                f" {g.util:>6}% {'Default':>12} ",
            ),
            _row(" " * 41, " " * 24, f"{'Disabled':>21} "),
            SEP,
        ]
    lines += [
        "",
        FULL,
        _full(" Processes:"),
        _full("  GPU   GI   CI              PID   Type   Process name" + " " * 24 + "GPU Memory "),
        _full("        ID   ID" + " " * 63 + "Usage"),
        _full("", "="),
    ]  # fmt: skip
    procs = [g for g in gpus if g.pid is not None]
    if not procs:
        lines.append(_full("  No running processes found"))
    for g in procs:
        used = f"{_proc_mem(g)}MiB"
        row = f"  {g.index:>3}   N/A  N/A  {g.pid:>15}      C   {'python3':<33}{used:>10} "
        lines.append(_full(row))
    lines.append(FULL)
    return "\n".join(lines) + "\n"


def _proc_mem(g: Gpu) -> int:
    return max(0, g.mem_used - 520)


# ---------------------------------------------------------------- -q and -q -x


def _text_values(g: Gpu) -> dict[str, str]:
    m = g.model
    avg = f"{g.power:.2f} W"
    lim = f"{g.power_limit_w:.2f} W"
    sm = f"{g.sm_clock} MHz"
    dev = g.bus_id.split(":")[-1].split(".")[0]
    return {
        "Product Name": g.name,
        "Product Architecture": m.arch,
        "Serial Number": g.serial,
        "GPU UUID": g.uuid,
        "GPU PDI": "0x" + hashlib.sha256(g.uuid.encode()).hexdigest()[:16],
        "Minor Number": str(g.index),
        "Board ID": f"0x{int(dev, 16):x}",
        "Platform Info/Module Id": str(2 * g.index + 2),
        "GSP Firmware Version": DRIVER_VERSION,
        "PCI/Device": f"0x{dev}",
        "PCI/Device Id": f"0x{m.device_id}",
        "PCI/Bus Id": g.bus_id,
        "Fan Speed": f"{g.util // 3 + 30} %" if m.fan else "N/A",
        "FB Memory Usage/Total": f"{g.memory_mib} MiB",
        "FB Memory Usage/Reserved": f"{m.reserved_mib} MiB",
        "FB Memory Usage/Used": f"{g.mem_used} MiB",
        "FB Memory Usage/Free": f"{g.mem_free} MiB",
        "Utilization/GPU": f"{g.util} %",
        "Utilization/Memory": f"{g.mem_util} %",
        "Temperature/GPU Current Temp": f"{g.temp} C",
        "Temperature/Memory Current Temp": f"{g.mem_temp} C",
        "GPU Power Readings/Average Power Draw": avg,
        "GPU Power Readings/Instantaneous Power Draw": f"{g.power - 0.05:.2f} W",
        "GPU Power Readings/Current Power Limit": lim,
        "GPU Power Readings/Requested Power Limit": lim,
        "GPU Power Readings/Default Power Limit": lim,
        "GPU Power Readings/Min Power Limit": f"{m.min_power_w:.2f} W",
        "GPU Power Readings/Max Power Limit": lim,
        "Clocks/Graphics": sm,
        "Clocks/SM": sm,
        "Clocks/Memory": f"{m.mem_clock} MHz",
        "Max Clocks/Graphics": f"{m.sm_max} MHz",
        "Max Clocks/SM": f"{m.sm_max} MHz",
        "Max Clocks/Memory": f"{m.mem_clock} MHz",
        "Fabric/State": g.fabric[0],
        "Fabric/Status": g.fabric[1],
    }


_TEXT_TO_XML = {
    "Product Name": "product_name",
    "Product Architecture": "product_architecture",
    "Serial Number": "serial",
    "GPU UUID": "uuid",
    "GPU PDI": "pdi",
    "Minor Number": "minor_number",
    "Board ID": "board_id",
    "Platform Info/Module Id": "platform_info/module_id",
    "GSP Firmware Version": "gsp_firmware_version",
    "PCI/Device": "pci/pci_device",
    "PCI/Device Id": "pci/pci_device_id",
    "PCI/Bus Id": "pci/pci_bus_id",
    "Fan Speed": "fan_speed",
    "FB Memory Usage/Total": "fb_memory_usage/total",
    "FB Memory Usage/Reserved": "fb_memory_usage/reserved",
    "FB Memory Usage/Used": "fb_memory_usage/used",
    "FB Memory Usage/Free": "fb_memory_usage/free",
    "Utilization/GPU": "utilization/gpu_util",
    "Utilization/Memory": "utilization/memory_util",
    "Temperature/GPU Current Temp": "temperature/gpu_temp",
    "Temperature/Memory Current Temp": "temperature/memory_temp",
    "GPU Power Readings/Average Power Draw": "gpu_power_readings/average_power_draw",
    "GPU Power Readings/Instantaneous Power Draw": "gpu_power_readings/instant_power_draw",
    "GPU Power Readings/Current Power Limit": "gpu_power_readings/current_power_limit",
    "GPU Power Readings/Requested Power Limit": "gpu_power_readings/requested_power_limit",
    "GPU Power Readings/Default Power Limit": "gpu_power_readings/default_power_limit",
    "GPU Power Readings/Min Power Limit": "gpu_power_readings/min_power_limit",
    "GPU Power Readings/Max Power Limit": "gpu_power_readings/max_power_limit",
    "Clocks/Graphics": "clocks/graphics_clock",
    "Clocks/SM": "clocks/sm_clock",
    "Clocks/Memory": "clocks/mem_clock",
    "Max Clocks/Graphics": "max_clocks/graphics_clock",
    "Max Clocks/SM": "max_clocks/sm_clock",
    "Max Clocks/Memory": "max_clocks/mem_clock",
    "Fabric/State": "fabric/state",
    "Fabric/Status": "fabric/status",
}


def _xml_values(g: Gpu) -> dict[str, str]:
    out = {_TEXT_TO_XML[k]: v for k, v in _text_values(g).items()}
    for k in ("pci/pci_device", "pci/pci_device_id", "board_id"):
        out[k] = out[k].removeprefix("0x")
    out["pci/pci_device"] = out["pci/pci_device"].lower()
    out["board_id"] = "0x" + out["board_id"]
    return out


_TEXT_LEAF = re.compile(r"^( +)(\S.*?) *: (.*)$")


def render_text_block(block: list[str], g: Gpu) -> list[str]:
    values = _text_values(g)
    out = [f"GPU {g.bus_id}"]
    stack: list[str] = []
    for line in block[1:]:
        if not line.strip():
            out.append(line)
            continue
        level = (len(line) - len(line.lstrip(" "))) // 4 - 1
        m = _TEXT_LEAF.match(line)
        key = (m.group(2) if m else line).strip()
        del stack[level:]
        path = "/".join([*stack, key])
        if m is None:
            stack.append(key)
            out.append(line)
        elif path in values:
            out.append(line[: len(line) - len(m.group(3))] + values[path])
        elif g.pid is not None and path == "Processes":
            out.append("    Processes")
            out += _text_processes(g)
        else:
            out.append(line)
    return out


def _text_processes(g: Gpu) -> list[str]:
    pad = "        "
    return [
        f"{pad}{'GPU instance ID':<47}: N/A",
        f"{pad}{'Compute instance ID':<47}: N/A",
        f"{pad}{'Process ID':<47}: {g.pid}",
        f"{pad}{'Type':<47}: C",
        f"{pad}{'Name':<47}: python3",
        f"{pad}{'Used GPU Memory':<47}: {_proc_mem(g)} MiB",
    ]


def _template(name: str) -> list[str]:
    return (TEMPLATES / name).read_text().split("\n")


def query_text(gpus: list[Gpu], when: float) -> str:
    lines = _template("q.txt")
    start = next(i for i, ln in enumerate(lines) if ln.startswith("GPU "))
    head = lines[:start]
    block = lines[start:]
    while block and not block[-1].strip():
        block.pop()
    stamp = time.strftime("%a %b %d %H:%M:%S %Y", time.localtime(when))
    subs = {
        "Timestamp": stamp,
        "Driver Version": DRIVER_VERSION,
        "CUDA Version": CUDA_VERSION,
        "Attached GPUs": str(len(gpus)),
    }
    out = []
    for line in head:
        m = _TEXT_LEAF.match(line)
        if m and m.group(2).strip() in subs:
            line = line[: len(line) - len(m.group(3))] + subs[m.group(2).strip()]
        out.append(line)
    for g in gpus:
        out += render_text_block(block, g)
        out.append("")
    return "\n".join(out) + "\n"


_XML_LEAF = re.compile(r"^(\t*)<([a-z_0-9]+)>(.*)</([a-z_0-9]+)>$")
_XML_OPEN = re.compile(r"^\t*<([a-z_0-9]+)( [^>]*)?>$")
_XML_CLOSE = re.compile(r"^\t*</([a-z_0-9]+)>$")


def render_xml_block(block: list[str], g: Gpu) -> list[str]:
    values = _xml_values(g)
    out = []
    stack: list[str] = []
    for line in block:
        leaf = _XML_LEAF.match(line)
        if leaf:
            path = "/".join([*stack[1:], leaf.group(2)])
            if path in values:
                line = (
                    f"{leaf.group(1)}<{leaf.group(2)}>{_xml_escape(values[path])}</{leaf.group(2)}>"
                )
            out.append(line)
            continue
        opened = _XML_OPEN.match(line)
        if opened:
            stack.append(opened.group(1))
            if opened.group(1) == "gpu":
                line = f'\t<gpu id="{g.bus_id}">'
            out.append(line)
            if opened.group(1) == "processes" and len(stack) == 2 and g.pid is not None:
                out += _xml_processes(g)
            continue
        if _XML_CLOSE.match(line) and stack:
            stack.pop()
        out.append(line)
    return out


def _xml_processes(g: Gpu) -> list[str]:
    t = "\t\t\t"
    return [
        f"{t}<process_info>",
        f"{t}\t<gpu_instance_id>N/A</gpu_instance_id>",
        f"{t}\t<compute_instance_id>N/A</compute_instance_id>",
        f"{t}\t<pid>{g.pid}</pid>",
        f"{t}\t<type>C</type>",
        f"{t}\t<process_name>python3</process_name>",
        f"{t}\t<used_memory>{_proc_mem(g)} MiB</used_memory>",
        f"{t}</process_info>",
    ]


def _xml_escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def query_xml(gpus: list[Gpu], when: float) -> str:
    lines = _template("q.xml")
    start = next(i for i, ln in enumerate(lines) if ln.startswith("\t<gpu "))
    end = next(i for i, ln in enumerate(lines) if ln == "\t</gpu>")
    head, block, tail = lines[:start], lines[start : end + 1], lines[end + 1 :]
    subs = {
        "timestamp": time.strftime("%a %b %d %H:%M:%S %Y", time.localtime(when)),
        "driver_version": DRIVER_VERSION,
        "cuda_version": CUDA_VERSION,
        "attached_gpus": str(len(gpus)),
    }
    out = []
    for line in head:
        leaf = _XML_LEAF.match(line)
        if leaf and leaf.group(2) in subs:
            line = f"{leaf.group(1)}<{leaf.group(2)}>{subs[leaf.group(2)]}</{leaf.group(2)}>"
        out.append(line)
    for i, g in enumerate(gpus):
        if i:
            out.append("")
        out += render_xml_block(block, g)
    return "\n".join(out + tail)


# ---------------------------------------------------------------- --query-gpu


def _fmt_w(x: float) -> str:
    return f"{x:.2f}"


# field -> (header unit or "", value function returning (number text, unit text))
FieldFn = Callable[[Gpu, int], tuple[str, str]]
NA = ("[N/A]", "")


def _reasons(g: Gpu) -> str:
    """clocks_event_reasons.active: 0x1 (GPU idle) at rest, none while busy."""
    return "0x0000000000000000" if g.util else "0x0000000000000001"


def _gpu_fields() -> dict[str, tuple[str, FieldFn]]:
    def c(fn: Callable[[Gpu], str], unit: str = "") -> FieldFn:
        return lambda g, n: (fn(g), unit)

    mib, pct, w, mhz = " MiB", " %", " W", " MHz"
    return {
        "timestamp": ("", lambda g, n: (time.strftime("%Y/%m/%d %H:%M:%S.000"), "")),
        "driver_version": ("", c(lambda g: DRIVER_VERSION)),
        "count": ("", lambda g, n: (str(n), "")),
        "index": ("", c(lambda g: str(g.index))),
        "name": ("", c(lambda g: g.name)),
        "gpu_name": ("", c(lambda g: g.name)),
        "serial": ("", c(lambda g: g.serial)),
        "uuid": ("", c(lambda g: g.uuid)),
        "gpu_uuid": ("", c(lambda g: g.uuid)),
        "pci.bus_id": ("", c(lambda g: g.bus_id)),
        "gpu_bus_id": ("", c(lambda g: g.bus_id)),
        "pci.device_id": ("", c(lambda g: "0x" + g.model.device_id)),
        "pci.bus": ("", c(lambda g: "0x00")),
        "pci.domain": ("", c(lambda g: "0x0000")),
        "pcie.link.gen.current": ("", c(lambda g: "5")),
        "pcie.link.gen.max": ("", c(lambda g: "5")),
        "pcie.link.width.current": ("", c(lambda g: "16")),
        "pcie.link.width.max": ("", c(lambda g: "16")),
        "display_mode": ("", c(lambda g: "Requested functionality has been deprecated")),
        "display_active": ("", c(lambda g: "Disabled")),
        "persistence_mode": ("", c(lambda g: "Enabled")),
        "driver_model.current": ("", lambda g, n: NA),
        "vbios_version": ("", c(lambda g: "96.00.A5.00.1A")),
        "compute_cap": ("", c(lambda g: "9.0" if g.model.arch == "Hopper" else "8.0")),
        "fan.speed": (
            " [%]",
            lambda g, n: (str(g.util // 3 + 30), pct) if g.model.fan else NA,
        ),
        "pstate": ("", c(lambda g: g.pstate)),
        "memory.total": (" [MiB]", c(lambda g: str(g.memory_mib), mib)),
        "memory.reserved": (" [MiB]", c(lambda g: str(g.model.reserved_mib), mib)),
        "memory.used": (" [MiB]", c(lambda g: str(g.mem_used), mib)),
        "memory.free": (" [MiB]", c(lambda g: str(g.mem_free), mib)),
        "compute_mode": ("", c(lambda g: "Default")),
        "utilization.gpu": (" [%]", c(lambda g: str(g.util), pct)),
        "utilization.memory": (" [%]", c(lambda g: str(g.mem_util), pct)),
        "utilization.encoder": (" [%]", c(lambda g: "0", pct)),
        "utilization.decoder": (" [%]", c(lambda g: "0", pct)),
        # As the H200 captures print them (shared/fixtures, nvidia-smi 580): idle, no remaps.
        "clocks_throttle_reasons.active": ("", c(lambda g: _reasons(g))),
        "clocks_event_reasons.active": ("", c(lambda g: _reasons(g))),
        "remapped_rows.correctable": ("", c(lambda g: "0")),
        "remapped_rows.uncorrectable": ("", c(lambda g: "0")),
        "remapped_rows.pending": ("", c(lambda g: "No")),
        "remapped_rows.failure": ("", c(lambda g: "No")),
        "ecc.mode.current": ("", c(lambda g: "Enabled")),
        "ecc.errors.corrected.volatile.total": ("", c(lambda g: "0")),
        "ecc.errors.uncorrected.volatile.total": ("", c(lambda g: "0")),
        "ecc.errors.corrected.aggregate.total": ("", c(lambda g: "0")),
        "ecc.errors.uncorrected.aggregate.total": ("", c(lambda g: "0")),
        "temperature.gpu": ("", c(lambda g: str(g.temp))),
        "temperature.memory": ("", c(lambda g: str(g.mem_temp))),
        "power.management": ("", c(lambda g: "Enabled")),
        "power.draw": (" [W]", c(lambda g: _fmt_w(g.power), w)),
        "power.draw.average": (" [W]", c(lambda g: _fmt_w(g.power), w)),
        "power.draw.instant": (" [W]", c(lambda g: _fmt_w(g.power - 0.05), w)),
        "power.limit": (" [W]", c(lambda g: _fmt_w(g.power_limit_w), w)),
        "enforced.power.limit": (" [W]", c(lambda g: _fmt_w(g.power_limit_w), w)),
        "power.default_limit": (" [W]", c(lambda g: _fmt_w(g.power_limit_w), w)),
        "power.min_limit": (" [W]", c(lambda g: _fmt_w(g.model.min_power_w), w)),
        "power.max_limit": (" [W]", c(lambda g: _fmt_w(g.power_limit_w), w)),
        "clocks.current.graphics": (" [MHz]", c(lambda g: str(g.sm_clock), mhz)),
        "clocks.gr": (" [MHz]", c(lambda g: str(g.sm_clock), mhz)),
        "clocks.current.sm": (" [MHz]", c(lambda g: str(g.sm_clock), mhz)),
        "clocks.sm": (" [MHz]", c(lambda g: str(g.sm_clock), mhz)),
        "clocks.current.memory": (" [MHz]", c(lambda g: str(g.model.mem_clock), mhz)),
        "clocks.mem": (" [MHz]", c(lambda g: str(g.model.mem_clock), mhz)),
        "clocks.max.graphics": (" [MHz]", c(lambda g: str(g.model.sm_max), mhz)),
        "clocks.max.gr": (" [MHz]", c(lambda g: str(g.model.sm_max), mhz)),
        "clocks.max.sm": (" [MHz]", c(lambda g: str(g.model.sm_max), mhz)),
        "clocks.max.memory": (" [MHz]", c(lambda g: str(g.model.mem_clock), mhz)),
        "clocks.max.mem": (" [MHz]", c(lambda g: str(g.model.mem_clock), mhz)),
        "mig.mode.current": ("", c(lambda g: "Disabled")),
        "mig.mode.pending": ("", c(lambda g: "Disabled")),
        "fabric.state": ("", c(lambda g: g.fabric[0])),
        "fabric.status": ("", c(lambda g: g.fabric[1])),
    }


GPU_FIELDS = _gpu_fields()

APP_FIELDS: dict[str, tuple[str, Callable[[Gpu], tuple[str, str]]]] = {
    "timestamp": ("", lambda g: (time.strftime("%Y/%m/%d %H:%M:%S.000"), "")),
    "gpu_name": ("", lambda g: (g.name, "")),
    "gpu_bus_id": ("", lambda g: (g.bus_id, "")),
    "gpu_serial": ("", lambda g: (g.serial, "")),
    "gpu_uuid": ("", lambda g: (g.uuid, "")),
    "pid": ("", lambda g: (str(g.pid), "")),
    "process_name": ("", lambda g: ("python3", "")),
    "name": ("", lambda g: ("python3", "")),
    "used_gpu_memory": (" [MiB]", lambda g: (str(_proc_mem(g)), " MiB")),
    "used_memory": (" [MiB]", lambda g: (str(_proc_mem(g)), " MiB")),
}


class UsageError(Exception):
    def __init__(self, message: str, code: int = 2) -> None:
        super().__init__(message)
        self.code = code


def _check_fields(names: list[str], known: dict[str, Any]) -> None:
    for f in names:
        if f not in known:
            raise UsageError(f'Field "{f}" is not a valid field to query.\n')


def csv_gpus(gpus: list[Gpu], names: list[str], header: bool, units: bool) -> str:
    out = []
    if header:
        out.append(", ".join(f + GPU_FIELDS[f][0] for f in names))
    for g in gpus:
        cells = []
        for f in names:
            val, unit = GPU_FIELDS[f][1](g, len(gpus))
            cells.append(val + (unit if units else ""))
        out.append(", ".join(cells))
    return "".join(line + "\n" for line in out)


def _busy_job(gpus: list[Gpu]) -> list[Gpu]:
    """The lab's gpu-busy knob: its job as a compute process on GPU 0, while it runs."""
    job = _read_json(ROOT / "run/gpunode-lab-gpu-busy.json")
    if not job or not gpus or not Path(f"/proc/{job['pid']}").exists():
        return []
    mem = int(job["memory_mib"]) + 520  # _proc_mem takes the context's share off again
    g = gpus[0]
    return [Gpu(**{**g.__dict__, "pid": int(job["pid"]), "mem_used": mem})]


def csv_apps(gpus: list[Gpu], names: list[str], header: bool, units: bool) -> str:
    out = []
    gpus = [*gpus, *_busy_job(gpus)]
    if header:
        out.append(", ".join(f + APP_FIELDS[f][0] for f in names))
    for g in gpus:
        if g.pid is None:
            continue
        cells = []
        for f in names:
            val, unit = APP_FIELDS[f][1](g)
            cells.append(val + (unit if units else ""))
        out.append(", ".join(cells))
    return "".join(line + "\n" for line in out)


# ---------------------------------------------------------------- topo -m, -L


def topo(gpus: list[Gpu]) -> str:
    ncpu = os.cpu_count() or 1
    names = [f"GPU{g.index}" for g in gpus]
    cols = "\t".join([*names, "CPU Affinity", "NUMA Affinity", "GPU NUMA ID"])
    lines = [f"\t\x1b[4m{cols}\x1b[0m"]
    for g in gpus:
        links = [" X " if h.index == g.index else g.model.link for h in gpus]
        lines.append("\t".join([f"GPU{g.index}", *links, f"0-{ncpu - 1}", "0", "", "N/A"]))
    lines += [
        "",
        "Legend:",
        "",
        "  X    = Self",
        "  SYS  = Connection traversing PCIe as well as the SMP interconnect between NUMA nodes "
        "(e.g., QPI/UPI)",
        "  NODE = Connection traversing PCIe as well as the interconnect between PCIe Host "
        "Bridges within a NUMA node",
        "  PHB  = Connection traversing PCIe as well as a PCIe Host Bridge (typically the CPU)",
        "  PXB  = Connection traversing multiple PCIe bridges (without traversing the PCIe Host "
        "Bridge)",
        "  PIX  = Connection traversing at most a single PCIe bridge",
        "  NV#  = Connection traversing a bonded set of # NVLinks",
    ]
    return "\n".join(lines) + "\n"


def listing(gpus: list[Gpu]) -> str:
    return "".join(f"GPU {g.index}: {g.name} (UUID: {g.uuid})\n" for g in gpus)


def version_text() -> str:
    nvml = ".".join(DRIVER_VERSION.split(".")[:2])
    return (
        f"NVIDIA-SMI version  : {DRIVER_VERSION}\n"
        f"NVML version        : {nvml}\n"
        f"DRIVER version      : {DRIVER_VERSION}\n"
        f"CUDA Version        : {CUDA_VERSION}\n"
    )


# ---------------------------------------------------------------- dmon

# dmon's groups (-s) and GPM metrics (--gpm-metrics): (column, unit, value), in the order and
# shape nvidia-smi 580 prints them on an H200 (`dmon -s te --gpm-metrics 1,5,10`).
DmonFn = Callable[[Gpu], str]
DMON_GROUPS: dict[str, list[tuple[str, str, DmonFn]]] = {
    "p": [("pwr", "W", lambda g: str(round(g.power))), ("gtemp", "C", lambda g: str(g.temp)),
          ("mtemp", "C", lambda g: str(g.mem_temp))],
    "u": [("sm", "%", lambda g: str(g.util)), ("mem", "%", lambda g: str(g.mem_util)),
          ("enc", "%", lambda g: "0"), ("dec", "%", lambda g: "0"), ("jpg", "%", lambda g: "0"),
          ("ofa", "%", lambda g: "0")],
    "c": [("mclk", "MHz", lambda g: str(g.model.mem_clock)),
          ("pclk", "MHz", lambda g: str(g.sm_clock))],
    "e": [("sbecc", "errs", lambda g: "0"), ("dbecc", "errs", lambda g: "0"),
          ("pci", "errs", lambda g: "0")],
    "t": [("rxpci", "MB/s", lambda g: str(g.util * 3)),
          ("txpci", "MB/s", lambda g: str(g.util * 2))],
}  # fmt: skip
DMON_GPM: dict[int, tuple[str, DmonFn]] = {
    1: ("gract", lambda g: str(g.util)),
    5: ("mmaact", lambda g: str(round(g.util * 0.8))),
    10: ("dram", lambda g: str(g.mem_util)),
}
_DMON_TICKS: list[int] = []  # rows printed so far: GPM has no value on the first


def dmon(gpus: list[Gpu], a: Args) -> str:
    cols = [c for group in "pucvmet" if group in a.select for c in DMON_GROUPS.get(group, [])]
    gpm = [DMON_GPM[m] for m in a.gpm or [] if m in DMON_GPM]
    out = []
    if not _DMON_TICKS:
        out.append(
            "# gpu"
            + "".join(f" {c:>6}" for c, _, _ in cols)
            + "".join(f" {c:>10}" for c, _ in gpm)
            + " "
        )
        out.append(
            "# Idx"
            + "".join(f" {u:>6}" for _, u, _ in cols)
            + "".join(f" {'GPM:%':>10}" for _ in gpm)
            + " "
        )
    first = not _DMON_TICKS
    _DMON_TICKS.append(1)
    for g in gpus:
        row = f"{g.index:>5}" + "".join(f" {fn(g):>6}" for _, _, fn in cols)
        row += "".join(f" {'-' if first else fn(g):>10}" for _, fn in gpm)
        out.append(row + " ")
    return "".join(line + "\n" for line in out)


# ---------------------------------------------------------------- command line


@dataclass
class Args:
    mode: str = "table"
    fields: list[str] | None = None
    header: bool = True
    units: bool = True
    xml: bool = False
    interval: float | None = None
    ids: list[int] | None = None
    select: str = "puc"
    gpm: list[int] | None = None
    count: int | None = None


def parse_args(argv: list[str]) -> Args:
    a = Args()
    it: Iterator[str] = iter(argv)
    fmt: str | None = None
    for arg in it:
        key, eq, val = arg.partition("=")
        if key in ("--query-gpu", "--query-compute-apps"):
            raw = val if eq else next(it, "")
            a.mode = "query-gpu" if key == "--query-gpu" else "query-apps"
            a.fields = [f.strip() for f in raw.split(",") if f.strip()]
        elif key in ("--format", "--format-csv"):
            fmt = val if eq else next(it, "")
        elif arg in ("-L", "--list-gpus"):
            a.mode = "list"
        elif arg in ("-q", "--query"):
            if a.mode != "xml":
                a.mode = "q"
            if a.xml:
                a.mode = "xml"
        elif arg in ("-x", "--xml-format"):
            a.xml = True
            if a.mode == "q":
                a.mode = "xml"
        elif key in ("-l", "--loop"):
            a.interval = float(val if eq else next(it, "5"))
        elif key in ("-lms", "--loop-ms"):
            a.interval = float(val if eq else next(it, "1000")) / 1000
        elif key in ("-i", "--id"):
            a.ids = [int(x) for x in (val if eq else next(it, "")).split(",") if x.strip()]
        elif arg == "topo":
            a.mode = "topo"
        elif arg == "dmon":
            a.mode, a.interval = "dmon", 1.0
        elif a.mode == "dmon" and key in ("-s", "--select"):
            a.select = val if eq else next(it, "")
        elif a.mode == "dmon" and key == "--gpm-metrics":
            a.gpm = [int(x) for x in (val if eq else next(it, "")).split(",") if x.strip()]
        elif a.mode == "dmon" and key in ("-d", "--delay"):
            a.interval = float(val if eq else next(it, "1"))
        elif a.mode == "dmon" and key in ("-c", "--count"):
            a.count = int(val if eq else next(it, "1"))
        elif arg in ("-m", "--matrix", "-u", "--unit"):
            pass
        elif arg in ("-pm", "--persistence-mode"):
            next(it, "")
            a.mode = "pm"
        elif arg in ("--version", "-v"):
            a.mode = "version"
        elif arg in ("-h", "--help"):
            a.mode = "help"
        else:
            raise UsageError(
                f"Invalid combination of input arguments. Please run 'nvidia-smi -h' for help.\n"
                f"(gpunode lab stand-in: unsupported argument {arg!r})\n"
            )
    if a.mode in ("query-gpu", "query-apps"):
        if fmt is None:
            raise UsageError("Please specify format with --format=csv (see nvidia-smi -h).\n")
        opts = {o.strip() for o in fmt.split(",")}
        if "csv" not in opts:
            raise UsageError(f'"{fmt}" is not a valid format.\n')
        a.header = "noheader" not in opts
        a.units = "nounits" not in opts
        _check_fields(a.fields or [], GPU_FIELDS if a.mode == "query-gpu" else APP_FIELDS)
    return a


def driver_state() -> tuple[int, str] | None:
    """(exit code, message) when the kernel side cannot serve this user space."""
    module = _read_json(ETC / "module.json") or {}
    if not module.get("loaded"):
        return 9, NO_DRIVER + "\n"
    if str(module.get("version")) != DRIVER_VERSION:
        return 18, (
            "Failed to initialize NVML: Driver/library version mismatch\n"
            f"NVML library version: {'.'.join(DRIVER_VERSION.split('.')[:2])}\n"
        )
    return None


def render(a: Args, now: float) -> str:
    doc = _read_json(ETC / "gpus.json") or {}
    load = _read_json(ETC / "load.json") or {}
    gpus = sample(doc, load, now) if doc else []
    busy = _busy_job(gpus)
    if busy:  # its memory is in use on GPU 0 in every view, as a real process's is
        gpus[0] = replace(
            gpus[0], mem_used=min(gpus[0].memory_mib, gpus[0].mem_used + busy[0].mem_used)
        )
    if a.ids is not None:
        gpus = [g for g in gpus if g.index in a.ids]
    if a.mode == "query-gpu":
        return csv_gpus(gpus, a.fields or [], a.header, a.units)
    if a.mode == "query-apps":
        return csv_apps(gpus, a.fields or [], a.header, a.units)
    if not gpus:
        raise UsageError("No devices were found\n", 6)
    if a.mode == "list":
        return listing(gpus)
    if a.mode == "q":
        return query_text(gpus, now)
    if a.mode == "xml":
        return query_xml(gpus, now)
    if a.mode == "topo":
        return topo(gpus)
    if a.mode == "dmon":
        return dmon(gpus, a)
    if a.mode == "pm":
        return "".join(f"Persistence mode is already Enabled for GPU {g.bus_id}.\n" for g in gpus)
    return table(gpus, now)


def main(argv: list[str]) -> int:
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    try:
        a = parse_args(argv)
    except UsageError as e:
        sys.stdout.write(str(e))
        return e.code
    if a.mode == "help":
        sys.stdout.write(f"NVIDIA System Management Interface -- v{DRIVER_VERSION}\n")
        sys.stdout.write("(gpunode lab stand-in: simulated GPUs, no hardware behind it)\n")
        return 0
    if a.mode == "version":
        sys.stdout.write(version_text())
        return 0
    state = driver_state()
    if state is not None:
        sys.stdout.write(state[1])
        return state[0]
    try:
        while True:
            try:
                sys.stdout.write(render(a, time.time()))
            except UsageError as e:
                sys.stdout.write(str(e))
                return e.code
            sys.stdout.flush()
            if a.interval is None or (a.count is not None and len(_DMON_TICKS) >= a.count):
                return 0
            time.sleep(max(a.interval, 0.01))
    except KeyboardInterrupt:
        return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
