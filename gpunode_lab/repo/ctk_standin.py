#!/usr/bin/python3
"""Stand-in `nvidia-ctk` for gpunode lab hosts (NVIDIA Container Toolkit CLI; no GPU behind it).

Installed as /usr/bin/nvidia-ctk by the lab's nvidia-container-toolkit-base packages. It
does what the real tool does to the host's files: `runtime configure` merges the nvidia
runtime into docker's daemon.json or containerd's configuration, `cdi generate` writes a
CDI spec of the GPUs the driver reports (the lab's NVML is its nvidia-smi), `cdi list`
prints the device names. Log lines go to stderr as logrus prints them. Standard library only.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

# Replaced by the package build with the package's own version.
VERSION = "1.17.8"
ROOT = Path(os.environ.get("GPUNODE_LAB_ROOT", "/"))
LIBDIR = "/usr/lib/x86_64-linux-gnu"
CONTAINERD_BLOCK = """
[plugins]

  [plugins."io.containerd.grpc.v1.cri"]

    [plugins."io.containerd.grpc.v1.cri".containerd]

      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes]

        [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia]
          privileged_without_host_devices = false
          runtime_engine = ""
          runtime_root = ""
          runtime_type = "io.containerd.runc.v2"

          [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia.options]
            BinaryName = "/usr/bin/nvidia-container-runtime"
"""
DROP_IN_DIR = "/etc/containerd/conf.d"


def log(level: str, message: str) -> None:
    print(f"{level}[0000] {message}", file=sys.stderr)


def fail(message: str) -> int:
    log("ERRO", message)
    return 1


def drop_in() -> bool:
    """From 1.18 the containerd configuration is a drop-in file the main config imports."""
    major, minor = (int(x) for x in VERSION.split(".")[:2])
    return (major, minor) >= (1, 18)


def shown(path: Path) -> str:
    """The path as the host sees it."""
    return "/" + path.relative_to(ROOT).as_posix()


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text)
    tmp.replace(path)


def configure_docker(config: Path) -> int:
    doc: dict[str, object] = {}
    if config.exists() and config.read_text().strip():
        log("INFO", f"Loading config from {shown(config)}")
        try:
            doc = json.loads(config.read_text())
        except ValueError as exc:
            return fail(f"unable to load config: {exc}")
    else:
        log("INFO", "Config file does not exist; using empty config")
    runtimes = doc.setdefault("runtimes", {})
    if not isinstance(runtimes, dict):
        return fail("unable to update config: runtimes is not a map")
    runtimes["nvidia"] = {"args": [], "path": "nvidia-container-runtime"}
    write(config, json.dumps(doc, indent=4, sort_keys=True) + "\n")
    log("INFO", f"Wrote updated config to {shown(config)}")
    log("INFO", "It is recommended that docker daemon be restarted.")
    return 0


def configure_containerd(config: Path) -> int:
    log("INFO", "Using config version 2")
    log("INFO", 'Using CRI runtime plugin name "io.containerd.grpc.v1.cri"')
    main = config.read_text() if config.exists() else ""
    if drop_in():
        target = ROOT / DROP_IN_DIR.lstrip("/") / "99-nvidia.toml"
        write(target, "version = 2\n" + CONTAINERD_BLOCK)
        imports = f'imports = ["{DROP_IN_DIR}/*.toml"]'
        if imports not in main:
            write(config, f"{imports}\nversion = 2\n" + main.replace("version = 2\n", "", 1))
        log("INFO", f"Wrote updated config to {DROP_IN_DIR}/99-nvidia.toml")
    else:
        if "containerd.runtimes.nvidia]" not in main:
            head = main if main.strip() else "version = 2\n"
            write(config, head + CONTAINERD_BLOCK)
        else:
            write(config, main)
        log("INFO", f"Wrote updated config to {shown(config)}")
    log("INFO", "It is recommended that containerd daemon be restarted.")
    return 0


def runtime_configure(args: list[str]) -> int:
    runtime, config = "docker", ""
    for arg in args:
        if arg.startswith("--runtime="):
            runtime = arg.split("=", 1)[1]
        elif arg.startswith("--config="):
            config = arg.split("=", 1)[1]
    defaults = {"docker": "/etc/docker/daemon.json", "containerd": "/etc/containerd/config.toml"}
    if runtime not in defaults:
        return fail(f'unrecognized runtime "{runtime}"')
    path = ROOT / (config or defaults[runtime]).lstrip("/")
    if runtime == "docker":
        return configure_docker(path)
    return configure_containerd(path)


def gpus() -> tuple[str, list[tuple[str, str, str]]] | None:
    """The driver release and (index, uuid, minor) of each GPU, as NVML reports them."""
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=index,uuid,driver_version", "--format=csv,noheader"],
            capture_output=True, text=True, check=False,
        )  # fmt: skip
    except FileNotFoundError:
        return None
    if out.returncode != 0:
        return None
    rows = [[c.strip() for c in line.split(",")] for line in out.stdout.splitlines() if line]
    if not rows:
        return None
    return rows[0][2], [(r[0], r[1], r[0]) for r in rows]


def cdi_spec(driver: str, devices: list[tuple[str, str, str]]) -> str:
    nodes = ["/dev/nvidia-modeset", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools", "/dev/nvidiactl"]
    libs = [f"{LIBDIR}/lib{n}.so.{driver}" for n in ("cuda", "nvidia-ml", "nvidia-ptxjitcompiler")]
    lines = ["---", "cdiVersion: 0.5.0", "containerEdits:", "  deviceNodes:"]
    lines += [f"  - path: {n}" for n in nodes]
    lines += ["  env:", "  - NVIDIA_VISIBLE_DEVICES=void", "  hooks:"]
    lines += [
        "  - args:", "    - nvidia-cdi-hook", "    - update-ldcache", "    - --folder",
        f"    - {LIBDIR}", "    hookName: createContainer", "    path: /usr/bin/nvidia-cdi-hook",
    ]  # fmt: skip
    lines += ["  mounts:"]
    for lib in libs:
        lines += [f"  - containerPath: {lib}", f"    hostPath: {lib}", "    options:"]
        lines += [f"    - {o}" for o in ("ro", "nosuid", "nodev", "bind")]
    lines += ["devices:"]
    for name in [d[0] for d in devices] + [d[1] for d in devices]:
        minor = next(d[2] for d in devices if name in (d[0], d[1]))
        lines += ["- containerEdits:", "    deviceNodes:", f"    - path: /dev/nvidia{minor}"]
        lines += [f'  name: "{name}"' if name.isdigit() else f"  name: {name}"]
    lines += ["- containerEdits:", "    deviceNodes:"]
    lines += [f"    - path: /dev/nvidia{d[2]}" for d in devices]
    lines += ["  name: all", "kind: nvidia.com/gpu"]
    return "\n".join(lines) + "\n"


def cdi_generate(args: list[str]) -> int:
    output = ""
    for i, arg in enumerate(args):
        if arg.startswith("--output="):
            output = arg.split("=", 1)[1]
        elif arg == "--output" and i + 1 < len(args):
            output = args[i + 1]
    found = gpus()
    if found is None:
        return fail(
            "failed to generate CDI spec: failed to initialize NVML: ERROR_LIBRARY_NOT_FOUND"
        )
    driver, devices = found
    log("INFO", f"Using {LIBDIR}/libnvidia-ml.so.{driver}")
    log("INFO", "Auto-detected mode as 'nvml'")
    for d in devices:
        log("INFO", f"Selecting /dev/nvidia{d[2]} as /dev/nvidia{d[2]}")
    spec = cdi_spec(driver, devices)
    if not output:
        sys.stdout.write(spec)
    else:
        write(ROOT / output.lstrip("/"), spec)
        os.chmod(ROOT / output.lstrip("/"), 0o644)
    log("INFO", "Generated CDI spec with version 0.5.0")
    return 0


def cdi_list() -> int:
    names: list[str] = []
    for spec in sorted((ROOT / "etc/cdi").glob("*.yaml")) + sorted(
        (ROOT / "var/run/cdi").glob("*.yaml")
    ):
        kind = ""
        text = spec.read_text().splitlines()
        for line in text:
            if line.startswith("kind: "):
                kind = line.split(":", 1)[1].strip()
        for line in text:
            if line.startswith("  name: "):
                names.append(f"{kind}={line.split(':', 1)[1].strip().strip(chr(34))}")
    log("INFO", f"Found {len(names)} CDI devices")
    for name in names:
        print(name)
    return 0


def main(argv: list[str]) -> int:
    if argv[:1] in (["--version"], ["-v"]):
        print(f"NVIDIA Container Toolkit CLI version {VERSION}\ncommit: gpunode-lab")
        return 0
    if os.geteuid() != 0 and argv[:2] != ["cdi", "list"]:
        return fail("permission denied: run as root")
    if argv[:2] == ["runtime", "configure"]:
        return runtime_configure(argv[2:])
    if argv[:2] == ["cdi", "generate"]:
        return cdi_generate(argv[2:])
    if argv[:2] == ["cdi", "list"]:
        return cdi_list()
    print(f"nvidia-ctk (gpunode lab stand-in): unsupported: {' '.join(argv)}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
