"""Facts text (the output of script.sh) -> HostFacts.

Each `### name` section has its own parser; one that fails records why in
HostFacts.errors and the rest still count. Nothing here raises.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Callable

from gpunode.compat.driver import driver_cuda
from gpunode.facts.model import (
    AptSource,
    Conda,
    CondaEnvFacts,
    CudaToolkit,
    Disk,
    DkmsModule,
    Fabric,
    FileAttrs,
    GpuFabric,
    GpuProcess,
    HostFacts,
    JournalEntry,
    KernelModule,
    Kernels,
    MokKey,
    NvidiaSmi,
    NvSwitch,
    OsRelease,
    Package,
    PciGpu,
)
from gpunode.facts.smi import QUERY_FIELDS, failure_message, parse_query_csv, parse_smi_table


def split_sections(text: str) -> dict[str, str]:
    sections: dict[str, str] = {}
    name: str | None = None
    lines: list[str] = []
    for line in text.splitlines():
        m = re.fullmatch(r"### ([a-z0-9-]+)", line)
        if m:
            if name is not None:
                sections[name] = "\n".join(lines).strip("\n")
            name, lines = m.group(1), []
        elif name is not None:
            lines.append(line)
    if name is not None:
        sections[name] = "\n".join(lines).strip("\n")
    return sections


def _os_release(f: HostFacts, text: str) -> None:
    values: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, raw = line.partition("=")
        if sep and key.strip():
            try:
                parts = shlex.split(raw)
            except ValueError:
                parts = [raw]
            values[key.strip()] = parts[0] if parts else ""
    f.os = OsRelease(
        id=values.get("ID", ""),
        version_id=values.get("VERSION_ID", ""),
        codename=values.get("VERSION_CODENAME", "") or values.get("UBUNTU_CODENAME", ""),
        pretty_name=values.get("PRETTY_NAME", ""),
    )


def _secure_boot(f: HostFacts, text: str) -> None:
    f.mok_key = _mok_key(text)
    for line in text.splitlines():
        if line.startswith("mokutil:"):
            said = line.lower()
            # shim told not to validate (mokutil --disable-validation): the kernel loads
            # unsigned modules although the firmware's Secure Boot is on
            if "validation is disabled in shim" in said:
                f.secure_boot = False
                return
            if "secureboot enabled" in said:
                f.secure_boot = True
                return
            # "This system doesn't support Secure Boot": nothing checks signatures
            if "secureboot disabled" in said or "doesn't support secure boot" in said:
                f.secure_boot = False
                return
    for line in text.splitlines():
        if line.startswith("efivar:"):
            data = line.split(":", 1)[1].split()
            if len(data) >= 5:  # 4 bytes of attributes, then the value
                f.secure_boot = data[4] == "1"
                return
    f.secure_boot = False if "efi: yes" in text else None


def _mok_key(text: str) -> MokKey:
    """mokutil --test-key prints "<file> is already enrolled" or "<file> is not enrolled"."""
    lines = text.splitlines()
    if "mok-key: present" not in lines:
        return MokKey()
    said = next((ln.removeprefix("mok-test:") for ln in lines if ln.startswith("mok-test:")), "")
    if said.rstrip().endswith(" is already enrolled"):
        return MokKey(present=True, enrolled=True)
    if said.rstrip().endswith(" is not enrolled"):
        return MokKey(present=True, enrolled=False)
    return MokKey(present=True)


def _disks(f: HostFacts, text: str) -> None:
    """`df -P -T -B1` (or without -T, as older scripts ran it): one Disk per mount."""
    lines = text.splitlines()
    typed = bool(lines) and lines[0].split()[1:2] == ["Type"]
    seen: set[str] = set()
    for line in lines[1:]:
        cols = line.split()
        fstype = cols.pop(1) if typed and len(cols) > 1 else ""
        if len(cols) < 6:
            continue
        mount = " ".join(cols[5:])
        if mount in seen:
            continue
        seen.add(mount)
        f.disks.append(
            Disk(path=mount, total_bytes=int(cols[1]), free_bytes=int(cols[3]), fstype=fstype)
        )


def _pci(f: HostFacts, sections: dict[str, str]) -> None:
    descriptions: dict[str, str] = {}
    for line in sections.get("lspci", "").splitlines():
        slot, _, desc = line.partition(" ")
        descriptions[slot] = desc.strip()
    for line in sections.get("pci", "").splitlines():
        cols = line.split()
        if len(cols) != 4:
            continue
        slot, vendor, device, cls = cols
        if not cls.startswith("0x03"):  # display controllers only (not audio, bridges)
            continue
        f.pci_gpus.append(PciGpu(
            slot=slot,
            vendor_id=vendor.removeprefix("0x"),
            device_id=device.removeprefix("0x"),
            description=descriptions.get(slot, ""),
        ))  # fmt: skip
    if not f.pci_gpus:  # no sysfs (or a container): lspci alone
        for slot, desc in descriptions.items():
            m = re.search(r"\[10de:([0-9a-f]{4})\]", desc)
            if m and re.search(r"\[03[0-9a-f]{2}\]", desc):
                f.pci_gpus.append(PciGpu(slot=slot, device_id=m.group(1), description=desc))


# NVSwitch device ids (pci.ids: GA100 [A100 NVSwitch] 1af1, GH100 [H100 NVSwitch] 22a3, the
# H200 HGX board's too); a newer one is known by lspci's name for it.
NVSWITCH_IDS = frozenset({"1af1", "22a3"})


def _nvswitches(f: HostFacts, sections: dict[str, str]) -> None:
    """NVIDIA functions of class 0x0680 (`Bridge [0680]`) that are NVSwitches; the old
    nForce chipsets' NVIDIA bridges are not."""
    descriptions: dict[str, str] = {}
    for line in sections.get("lspci", "").splitlines():
        slot, _, desc = line.partition(" ")
        descriptions[slot] = desc.strip()
    found: dict[str, NvSwitch] = {}
    for line in sections.get("pci", "").splitlines():
        cols = line.split()
        if len(cols) == 4 and cols[1] == "0x10de" and cols[3].startswith("0x0680"):
            found[cols[0]] = NvSwitch(slot=cols[0], device_id=cols[2].removeprefix("0x"))
    for slot, desc in descriptions.items():  # no sysfs (or a container): lspci alone
        m = re.search(r"\[0680\]: .*\[10de:([0-9a-f]{4})\]", desc)
        if m and slot not in found and not sections.get("pci", "").strip():
            found[slot] = NvSwitch(slot=slot, device_id=m.group(1))
    for sw in found.values():
        sw.description = descriptions.get(sw.slot, "")
        if sw.device_id in NVSWITCH_IDS or "nvswitch" in sw.description.lower():
            f.nvswitches.append(sw)


def parse_fabric(text: str) -> Fabric:
    """The fabric section: `--query-gpu=pci.bus_id,fabric.state,fabric.status` lines
    (`00000000:07:00.0, Completed, Success`), or, from an nvidia-smi without those fields,
    `nvidia-smi -q`'s `GPU <bus id>` lines and their Fabric `State` and `Status`."""
    fabric = Fabric()
    said: list[str] = []
    current: GpuFabric | None = None
    for raw in text.splitlines():
        line = raw.strip()
        cells = [c.strip() for c in line.split(",")]
        if len(cells) == 3 and re.fullmatch(r"[0-9A-Fa-f]{4,8}:[0-9A-Fa-f:.]+", cells[0]):
            fabric.gpus.append(GpuFabric(bus_id=cells[0], state=cells[1], status=cells[2]))
        elif m := re.fullmatch(r"GPU ([0-9A-Fa-f]{4,8}:[0-9A-Fa-f:.]+)", line):
            current = GpuFabric(bus_id=m.group(1), state="", status="")
            fabric.gpus.append(current)
        elif current is not None and (m := re.fullmatch(r"(State|Status)\s*: (.*)", line)):
            setattr(current, m.group(1).lower(), m.group(2).strip())
        elif line:
            said.append(line)
    if not fabric.gpus and said:
        fabric.error = said[0]
    return fabric


def _module(f: HostFacts, sections: dict[str, str]) -> None:
    mod = KernelModule()
    for line in sections.get("module", "").splitlines():
        if line == "nvidia loaded":
            mod.loaded = True
        elif line == "nouveau loaded":
            mod.nouveau_loaded = True
        elif line.startswith("nvidia "):
            mod.version = line.split()[1]
            mod.loaded = True
    proc = sections.get("proc-driver", "")
    if "NVRM version" in proc:
        mod.loaded = True
        mod.flavor = "open" if "Open Kernel Module" in proc else "proprietary"
        if mod.version is None:
            m = re.search(r"\s(\d+\.\d+(?:\.\d+)?)\s", proc)
            mod.version = m.group(1) if m else None
    f.module = mod


def _smi(f: HostFacts, sections: dict[str, str]) -> None:
    query = sections.get("smi-query", "")
    table = sections.get("smi", "")
    body, _, rc = query.rpartition("rc=")
    if rc.strip() == "missing":
        f.smi = NvidiaSmi(ok=False, error="nvidia-smi not found")
        return
    msg = failure_message(query) or failure_message(table)
    if msg:
        f.smi = NvidiaSmi(ok=False, error=msg)
        return
    smi = parse_smi_table(table) if table.strip() else None
    if query and rc.strip() == "0":
        q = parse_query_csv(body, QUERY_FIELDS)
        # One nvidia-smi call per round trip (it is slow on real hosts too): the CUDA
        # version its table header would show follows from the driver release.
        q.cuda_version = smi.cuda_version if smi else driver_cuda(q.driver_version)
        f.smi = q
    elif smi is not None:
        f.smi = smi
    elif query:
        f.smi = NvidiaSmi(
            ok=False,
            error=body.strip().splitlines()[-1]
            if body.strip()
            else f"nvidia-smi exited {rc.strip()}",
        )


def _packages(f: HostFacts, text: str) -> None:
    for line in text.splitlines():
        cols = line.split("\t")
        if len(cols) < 3 or not cols[0]:
            continue
        status = cols[2].strip()
        if status.endswith("not-installed"):
            continue
        f.packages[cols[0]] = Package(name=cols[0], version=cols[1], status=status)


def _apt_sources(f: HostFacts, text: str) -> None:
    path = ""
    stanza: dict[str, str] = {}

    def flush() -> None:
        uris = stanza.get("uris", "")
        if path and uris and re.search(r"nvidia|cuda", uris, re.I):
            for uri in uris.split():
                f.apt_sources.append(
                    AptSource(
                        path=path,
                        uri=uri,
                        suite=stanza.get("suites", "").split(" ")[0],
                        signed_by=stanza.get("signed-by"),
                    )
                )
        stanza.clear()

    for line in text.splitlines():
        if line.startswith("==> "):
            flush()
            path = line[4:].strip()
            continue
        s = line.strip()
        if not s:
            flush()
            continue
        if s.startswith("#"):
            continue
        if s.startswith(("deb ", "deb-src ")):
            m = re.match(
                r"deb(?:-src)?\s+(?:\[(?P<opts>[^\]]*)\]\s+)?(?P<uri>\S+)\s+(?P<suite>\S+)", s
            )
            if m and re.search(r"nvidia|cuda", m.group("uri"), re.I):
                opts = dict(o.split("=", 1) for o in (m.group("opts") or "").split() if "=" in o)
                f.apt_sources.append(
                    AptSource(
                        path=path,
                        uri=m.group("uri"),
                        suite=m.group("suite"),
                        signed_by=opts.get("signed-by"),
                    )
                )
            continue
        key, sep, value = s.partition(":")
        if sep and " " not in key:
            stanza[key.lower()] = value.strip()
    flush()


def _toolkits(f: HostFacts, text: str) -> None:
    nvcc: dict[str, str] = {}
    for line in text.splitlines():
        if line.startswith("nvcc "):
            cols = line.split()
            if len(cols) == 3:
                nvcc[cols[1]] = cols[2].lstrip("V")
    for line in text.splitlines():
        if line.startswith("dir "):
            path = line[4:].strip()
            f.toolkits.append(
                CudaToolkit(version=path.rsplit("cuda-", 1)[1], path=path, nvcc=nvcc.get(path))
            )


def _defines(text: str, names: tuple[str, str, str]) -> str | None:
    values = {}
    for line in text.splitlines():
        m = re.search(r"#define\s+(\w+)\s+(\d+)", line)
        if m:
            values[m.group(1)] = m.group(2)
    if all(n in values for n in names):
        return ".".join(values[n] for n in names)
    return None


def _conda(f: HostFacts, text: str) -> None:
    conda = Conda()
    env: CondaEnvFacts | None = None
    active = False  # the first install found is the one reported
    for line in text.splitlines():
        kind, _, value = line.partition(" ")
        if kind == "unsafe":  # "PREFIX UID MODE DIR"
            prefix, _, why = value.partition(" ")
            conda.unsafe[prefix] = why
            continue
        if kind == "prefix":
            active = conda.prefix is None
            if active:
                conda.prefix = value
            continue
        if not active:
            continue
        if kind == "version":
            m = re.match(r"conda-(\d[^-]*)-", value)
            conda.version = m.group(1) if m else conda.version
        elif kind == "env":
            name = "base" if value == conda.prefix else value.rsplit("/", 1)[1]
            env = CondaEnvFacts(name=name, path=value)
            conda.envs.append(env)
        elif env is not None and kind == "meta":
            m = re.match(r"(python|pytorch|tensorflow)-(\d[^-]*)-", value)
            if m:
                pkg, ver = m.groups()
                if pkg == "python":
                    env.python = ver
                elif pkg == "pytorch":
                    env.torch = env.torch or ver
                else:
                    env.tensorflow = env.tensorflow or ver
        elif env is not None and kind == "dist":
            m = re.match(r"(torch|tensorflow)-(.+)\.dist-info$", value)
            if m:
                if m.group(1) == "torch":
                    env.torch = m.group(2)
                else:
                    env.tensorflow = m.group(2)
    f.conda = conda


def _dpkg_lock(f: HostFacts, text: str) -> None:
    for line in text.splitlines():
        cols = line.split(None, 2)
        if len(cols) >= 2 and cols[1].isdigit():
            comm = cols[2].strip() if len(cols) == 3 else "?"
            f.dpkg_lock_holder = f"pid {cols[1]} ({comm})"
            return


_AUDIT = re.compile(r"audit ([a-z0-9][a-z0-9+.-]*(?::[a-z0-9-]+)?) ([a-z-]+)")


def _dpkg_audit(f: HostFacts, text: str) -> None:
    """`updates NAME` (a run cut before dpkg read its journal) and `audit PACKAGE STATE`."""
    f.dpkg_interrupted = bool(text.strip())
    for line in text.splitlines():
        if m := _AUDIT.fullmatch(line.strip()):
            f.dpkg_broken[m.group(1)] = m.group(2)


def _files(f: HostFacts, text: str) -> None:
    """DIGEST MODE OWNER IDS PATH per file, tab-separated; "absent" has no attributes."""
    for line in text.splitlines():
        cols = line.split("\t", 4)
        if len(cols) == 5:
            digest, mode, owner, ids, path = cols
            f.file_attrs[path] = FileAttrs(mode=mode, owner=owner, ids=ids)
        elif len(cols) == 2:
            digest, path = cols
        else:
            continue
        f.files[path] = digest  # "absent" / "unreadable" when there is no digest


def _gpu_procs(f: HostFacts, text: str) -> None:
    """`app PID, NAME, MIB` (nvidia-smi's compute apps) and `holder PID COMM` lines; a pid
    both list is shown once, with its memory."""
    seen: dict[int, GpuProcess] = {}
    for line in text.splitlines():
        kind, _, rest = line.partition(" ")
        if kind == "app":
            cols = [c.strip() for c in rest.split(",")]
            if len(cols) < 3 or not cols[0].isdigit():
                continue
            mem = cols[-1]
            proc = GpuProcess(
                pid=int(cols[0]),
                name=", ".join(cols[1:-1]) or "?",
                memory_mib=int(mem) if mem.isdigit() else None,
            )
            old = seen.get(proc.pid)
            if old is not None and old.memory_mib is not None and proc.memory_mib is not None:
                proc.memory_mib += old.memory_mib  # one process on several GPUs
            seen[proc.pid] = proc
        elif kind == "holder":
            pid, _, comm = rest.partition(" ")
            if pid.isdigit() and int(pid) not in seen:
                seen[int(pid)] = GpuProcess(pid=int(pid), name=comm.strip() or "?")
    f.gpu_processes = list(seen.values())


def _kernels(f: HostFacts, text: str) -> None:
    k = Kernels()
    for line in text.splitlines():
        what, _, value = line.strip().partition(" ")
        if not value:
            continue
        if what == "installed":
            k.installed.append(value)
        elif what == "headers":
            k.headers.append(value)
        elif what == "next":  # the link's target: vmlinuz-6.8.0-45-generic
            k.next_boot = value.rsplit("/", 1)[-1].removeprefix("vmlinuz-") or None
    f.kernels = k


def _apt_versions(f: HostFacts, text: str) -> None:
    """`apt-cache madison`: " name | version | URL suite/component arch Packages"."""
    for line in text.splitlines():
        parts = [p.strip() for p in line.split("|")]
        if len(parts) == 3 and parts[0] and parts[1]:
            versions = f.apt_versions.setdefault(parts[0], [])
            if parts[1] not in versions:
                versions.append(parts[1])


# dkms 3 writes `nvidia/580.95.05, 6.8.0-45-generic, x86_64: installed`, dkms 2
# `nvidia, 535.183.01, 5.15.0-91-generic, x86_64: installed`; an added module has no kernel.
_DKMS = re.compile(
    r"(?P<module>[^\s,/:]+)(?:/|, )(?P<version>[^\s,:]+)"
    r"(?:, (?P<kernel>[^\s,:]+))?(?:, (?P<arch>[^\s,:]+))?: (?P<state>.+)"
)


def parse_dkms_status(text: str) -> list[DkmsModule]:
    """`dkms status` output, one DkmsModule per line it understands (warnings are skipped)."""
    out = []
    for line in text.splitlines():
        m = _DKMS.fullmatch(line.strip())
        if m:
            out.append(DkmsModule(**{k: v for k, v in m.groupdict().items() if v is not None}))
    return out


def _first_line(text: str) -> str:
    lines = text.strip().splitlines()
    return lines[0].strip() if lines else ""


def parse_facts(text: str) -> HostFacts:
    """Turn script.sh's output into HostFacts; errors per section, never an exception."""
    sections = split_sections(text)
    f = HostFacts()

    def setter(attr: str) -> Callable[[HostFacts, str], None]:
        return lambda facts, t: setattr(facts, attr, _first_line(t))

    simple: dict[str, Callable[[HostFacts, str], None]] = {
        "hostname": setter("hostname"),
        "os-release": _os_release,
        "arch": setter("arch"),
        "kernel": setter("kernel"),
        "boot-id": setter("boot_id"),
        "secure-boot": _secure_boot,
        "apt-versions": _apt_versions,
        "disks": _disks,
        "packages": _packages,
        "apt-sources": _apt_sources,
        "keyrings": lambda facts, t: facts.keyrings.extend(t.split()),
        "toolkits": _toolkits,
        "cuda-alternative": _cuda_alternative,
        "cudnn": lambda facts, t: setattr(
            facts, "cudnn_version", _defines(t, ("CUDNN_MAJOR", "CUDNN_MINOR", "CUDNN_PATCHLEVEL"))
        ),
        "nccl": lambda facts, t: setattr(
            facts, "nccl_version", _defines(t, ("NCCL_MAJOR", "NCCL_MINOR", "NCCL_PATCH"))
        ),
        "conda": _conda,
        "dpkg-lock": _dpkg_lock,
        "dpkg-audit": _dpkg_audit,
        "files": _files,
        "gpu-procs": _gpu_procs,
        "kernels": _kernels,
        "dkms": lambda facts, t: setattr(facts, "dkms", parse_dkms_status(t)),
        "gpunode-holds": _gpunode_holds,
        "journal": _journal,
        "fabric": lambda facts, t: setattr(facts, "fabric", parse_fabric(t)),
        "containers": _containers,
    }
    combined: dict[str, Callable[[HostFacts, dict[str, str]], None]] = {
        "pci": _pci,
        "module": _module,
        "smi": _smi,
        "nvswitches": _nvswitches,
    }
    if "end" not in sections:
        f.errors.append("facts output ended early (no '### end' section): it may be incomplete")
    for name, fn in simple.items():
        if name not in sections:
            continue
        try:
            fn(f, sections[name])
        except Exception as exc:
            f.errors.append(f"{name}: {type(exc).__name__}: {exc}")
    for name, cfn in combined.items():
        try:
            cfn(f, sections)
        except Exception as exc:
            f.errors.append(f"{name}: {type(exc).__name__}: {exc}")
    return f


def _gpunode_holds(facts: HostFacts, text: str) -> None:
    """/var/lib/gpunode/holds: one package name a line; anything else is not a name."""
    names = (line.strip() for line in text.splitlines())
    facts.gpunode_holds = sorted({n for n in names if re.fullmatch(r"[a-z0-9][a-z0-9+.-]+", n)})


def _cuda_alternative(facts: HostFacts, text: str) -> None:
    """Where /usr/local/cuda points, then `mode auto|manual` (dpkg's alternatives state)."""
    for line in text.strip().splitlines():
        key, _, value = line.strip().partition(" ")
        if key == "mode":
            facts.cuda_alternative_mode = "auto" if value == "auto" else None
            if value == "manual":
                facts.cuda_alternative_mode = "manual"
        elif line.strip() and facts.cuda_alternative is None:
            facts.cuda_alternative = line.strip()


def _journal(facts: HostFacts, text: str) -> None:
    """`entry KEY REACHED JSON`: a change begun and not ended, the command it had reached,
    and what the executor wrote at its begin. An entry that does not read is named in
    HostFacts.errors: the others still count."""
    for line in text.splitlines():
        word, key, reached, doc = ([*line.split(" ", 3), "", "", ""])[:4]
        if word != "entry" or not line.strip():
            continue
        try:
            data = json.loads(doc)
            data.pop("v", None)
            facts.journal.append(
                JournalEntry.model_validate(
                    {**data, "key": key, "reached": int(reached) if reached.isdigit() else 1}
                )
            )
        except (ValueError, TypeError) as exc:  # pydantic's ValidationError is a ValueError
            facts.errors.append(f"journal: entry {key[:32]!r} unreadable: {exc}"[:300])


def _containers(facts: HostFacts, text: str) -> None:
    """`runtime NAME` per runtime on PATH; `cdi-spec`, `cdi-driver RELEASE` from the spec."""
    c = facts.containers
    for line in text.splitlines():
        key, _, value = line.strip().partition(" ")
        if key == "runtime" and value in ("docker", "containerd"):
            c.runtimes.append(value)
        elif key == "cdi-spec":
            c.cdi_spec = True
        elif key == "cdi-driver" and re.fullmatch(r"[0-9]+(\.[0-9]+)+", value):
            c.cdi_driver = value
