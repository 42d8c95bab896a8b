"""DCGM 4 packages, as NVIDIA's packaging makes them (cmake/packaging.cmake of
github.com/NVIDIA/DCGM): datacenter-gpu-manager-4-core (the host engine, dcgmi and the
nvidia-dcgm unit; Depends libc6, lshw; Pre-Depends passwd, login; Conflicts the DCGM 3
package) and datacenter-gpu-manager-4-cuda<major> per CUDA major (its diagnostics' plugins;
Depends the core at its exact version, Provides datacenter-gpu-manager-4), every version
with NVIDIA's epoch 1 ("1:4.5.2-1")."""

from __future__ import annotations

from importlib import resources

from gpunode_lab.repo.deb import LIBDIR, Package, Payload

UNIT = "/usr/lib/systemd/system/nvidia-dcgm.service"
PIDFILE = "/run/nv-hostengine.pid"


def dcgm_packages(releases: dict[str, tuple[str, ...]]) -> list[Package]:
    """`releases`: upstream release -> the CUDA majors it has a -cuda<major> package for."""
    out: list[Package] = []
    for release, majors in releases.items():
        version = f"1:{release}-1"
        core = Package(
            "datacenter-gpu-manager-4-core",
            version,
            f"NVIDIA Datacenter GPU Manager (DCGM) core\n Stand-in DCGM {release}: dcgmi and"
            " nv-hostengine over the lab's GPUs, and the nvidia-dcgm service.",
            depends=["passwd", "login", "libc6 (>= 2.27)", "lshw"],
            conflicts=["datacenter-gpu-manager"],
            section="devel",
            files=[
                Payload("/usr/bin/dcgmi", _dcgmi(release), 0o755),
                Payload("/usr/bin/nv-hostengine", _hostengine(release), 0o755),
                Payload(UNIT, _unit().encode()),
                Payload(f"{LIBDIR}/libdcgm.so.4"),
            ],
        )
        out.append(core)
        for major in majors:
            out.append(
                Package(
                    f"datacenter-gpu-manager-4-cuda{major}",
                    version,
                    f"NVIDIA Datacenter GPU Manager (DCGM) for CUDA {major}\n Stand-in"
                    f" diagnostics plugins of DCGM {release} for a CUDA {major} driver.",
                    depends=[f"datacenter-gpu-manager-4-core (= {version})"],
                    provides=[f"datacenter-gpu-manager-4 (= {version})"],
                    section="devel",
                    files=[
                        Payload(
                            f"/usr/libexec/datacenter-gpu-manager-4/plugins/cuda{major}"
                            "/libpluginsoftware.so.4"
                        )
                    ],
                )
            )
    return out


def _dcgmi(release: str) -> bytes:
    text = (resources.files("gpunode_lab.repo") / "dcgmi_standin.py").read_text()
    return text.replace('DCGM_VERSION = "4.5.2"', f'DCGM_VERSION = "{release}"', 1).encode()


def _unit() -> str:
    # DCGM's config-files/systemd/nvidia-dcgm.service.in, as a unit the lab's systemctl runs
    return (
        "# gpunode lab unit\n[Unit]\nDescription=NVIDIA DCGM service\n\n"
        "[Service]\nUser=root\nPrivateTmp=false\n"
        'Environment="DCGM_HOME_DIR=/var/log/nvidia-dcgm"\n'
        "ExecStart=/usr/bin/nv-hostengine --service-account nvidia-dcgm\n"
        f"PIDFile={PIDFILE}\nRestart=on-abort\n\n"
        "[Install]\nAlias=dcgm.service\nWantedBy=multi-user.target\n"
    )


def _hostengine(release: str) -> bytes:
    """nv-hostengine as the lab plays it: NVML needs the loaded module (else the real
    engine's message, exit 1); a daemon that writes its PID file."""
    return (
        "#!/bin/sh\n"
        f"# gpunode lab stand-in for nv-hostengine (DCGM {release}'s host engine).\n"
        "if [ ! -d /sys/module/nvidia ]; then\n"
        '  echo "Error: Unable to initialize NVML: Driver Not Loaded" >&2\n'
        "  exit 1\n"
        "fi\n"
        "mkdir -p /var/log/nvidia-dcgm\n"
        f"setsid sh -c 'echo $$ > {PIDFILE}; exec sleep infinity' </dev/null >/dev/null 2>&1 &\n"
        "i=0\n"
        f"while [ ! -s {PIDFILE} ] && [ $i -lt 100 ]; do sleep 0.05; i=$((i + 1)); done\n"
        f"[ -s {PIDFILE} ] &&"
        f" echo 'Started host engine version {release} using port number: 5555'\n"
    ).encode()
