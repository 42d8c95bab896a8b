"""Driver packages: NVIDIA's names and dependency shapes, stand-in contents.

Per release: libnvidia-compute, nvidia-utils (a simulated nvidia-smi), nvidia-compute-utils,
and per flavour nvidia-dkms-*, nvidia-driver-* and the nvidia-open-*/cuda-drivers-*
metapackage, which pins the exact release of everything below it, as NVIDIA's do.
"""

from __future__ import annotations

from importlib import resources

from gpunode_lab.repo.deb import LIBDIR, Package, Payload
from gpunode_lab.repo.libcuda import libcuda
from gpunode_lab.repo.nvidia_repo import Branch

FLAVORS = ("open", "proprietary")
USERSPACE = ("libnvidia-compute", "nvidia-utils", "nvidia-compute-utils")


def _swap(names: list[str], own: str) -> list[str]:
    return sorted(n for n in set(names) if n != own)


def _flavoured(base: str, branch: Branch, flavor: str) -> str:
    """nvidia-driver-550-open, nvidia-driver-550, nvidia-driver-open (590+), nvidia-driver."""
    return branch.named(base) + ("-open" if flavor == "open" else "")


def _all_flavoured(base: str, branches: tuple[Branch, ...]) -> list[str]:
    return [_flavoured(base, b, f) for b in branches for f in FLAVORS]


def meta_name(branch: Branch, flavor: str) -> str:
    """The package an admin installs: nvidia-open-550, cuda-drivers-550, nvidia-open (590+)."""
    return branch.named("nvidia-open" if flavor == "open" else "cuda-drivers")


def smi_script(version: str, cuda: str) -> bytes:
    text = (resources.files("gpunode_lab.repo") / "smi_sim.py").read_text()
    text = text.replace('DRIVER_VERSION = "580.159.04"', f'DRIVER_VERSION = "{version}"', 1)
    text = text.replace('CUDA_VERSION = "13.0"', f'CUDA_VERSION = "{cuda}"', 1)
    return text.encode()


def _smi_templates() -> list[Payload]:
    folder = resources.files("gpunode_lab.repo") / "smi_templates"
    return [
        Payload(f"/usr/share/gpunode-lab/smi/{name}", (folder / name).read_bytes())
        for name in ("q.txt", "q.xml")
    ]


def driver_packages(branches: tuple[Branch, ...]) -> list[Package]:
    """Every release of every branch; `branches` names all of them, for the Conflicts."""
    out: list[Package] = []
    for branch in branches:
        for release in branch.releases:
            out += _userspace(branches, branch, release)
            out += _fabric(branches, branch, release)
            for flavor in FLAVORS:
                out += _flavour(branches, branch, release, flavor)
        if branch.unversioned and branch.releases:
            out.append(_pinning(branch, branches))
    return out


def _userspace(branches: tuple[Branch, ...], branch: Branch, release: str) -> list[Package]:
    ub = f"{release}-0ubuntu1"
    compute = branch.named("libnvidia-compute")

    def others(base: str) -> list[str]:  # the same part of every other branch
        return _swap([b.named(base) for b in branches], branch.named(base))

    return [
        Package(
            compute,
            ub,
            f"NVIDIA libcompute package\n Stand-in for the CUDA driver library {release}.",
            section="multiverse/libs",
            provides=["libcuda.so.1", "libnvidia-ml.so.1"],
            files=[
                Payload(f"{LIBDIR}/libcuda.so.{release}", libcuda(release), 0o644),
                Payload(f"{LIBDIR}/libcuda.so.1", symlink=f"libcuda.so.{release}"),
                Payload(f"{LIBDIR}/libnvidia-ml.so.{release}"),
                Payload(f"{LIBDIR}/libnvidia-ml.so.1", symlink=f"libnvidia-ml.so.{release}"),
            ],
            conflicts=others("libnvidia-compute"),
            replaces=others("libnvidia-compute"),
        ),
        Package(
            branch.named("nvidia-utils"),
            ub,
            f"NVIDIA driver support binaries\n Simulated nvidia-smi for driver {release}.",
            section="multiverse/utils",
            depends=[f"{compute} (= {ub})"],
            files=[
                Payload("/usr/bin/nvidia-smi", smi_script(release, branch.cuda), 0o755),
                *_smi_templates(),
            ],
            conflicts=others("nvidia-utils"),
            replaces=others("nvidia-utils"),
        ),
        Package(
            branch.named("nvidia-compute-utils"),
            ub,
            f"NVIDIA compute utilities\n Stand-in nvidia-persistenced for driver {release}.",
            section="multiverse/utils",
            depends=[f"{compute} (= {ub})"],
            files=[
                Payload(
                    "/usr/bin/nvidia-persistenced",
                    b"#!/bin/sh\n# gpunode lab stand-in for nvidia-persistenced.\nexit 0\n",
                    0o755,
                )
            ],
            conflicts=others("nvidia-compute-utils"),
            replaces=others("nvidia-compute-utils"),
        ),
    ]


FM_UNIT = "/lib/systemd/system/nvidia-fabricmanager.service"
FM_PIDFILE = "/run/nvidia-fabricmanager/nv-fabricmanager.pid"


def _fabric(branches: tuple[Branch, ...], branch: Branch, release: str) -> list[Package]:
    """NVSwitch systems' packages, one per driver release at <release>-1 as NVIDIA's are:
    nvidia-fabricmanager-<branch> (its daemon and systemd unit) and libnvidia-nscq-<branch>
    (the NVSwitch query library DCGM reads; Fabric Manager does not need it)."""
    fm = branch.named("nvidia-fabricmanager")
    nscq = branch.named("libnvidia-nscq")
    unit = (
        "# gpunode lab unit\n[Unit]\nDescription=NVIDIA fabric manager service\n\n"
        "[Service]\nUser=root\nType=forking\nTimeoutStartSec=240\n"
        "ExecStart=/usr/bin/nv-fabricmanager -c /usr/share/nvidia/nvswitch/fabricmanager.cfg\n"
        f"PIDFile={FM_PIDFILE}\n\n[Install]\nWantedBy=multi-user.target\n"
    )
    return [
        Package(
            fm,
            f"{release}-1",
            f"Fabric Manager for NVSwitch based systems\n Stand-in nv-fabricmanager {release}: it"
            " starts only beside a loaded nvidia module of the same release.",
            section="multiverse/utils",
            files=[
                Payload("/usr/bin/nv-fabricmanager", _fm_daemon(release), 0o755),
                Payload(FM_UNIT, unit.encode()),
                Payload("/usr/share/nvidia/nvswitch/fabricmanager.cfg", b"LOG_LEVEL=4\n"),
            ],
            conflicts=_swap([b.named("nvidia-fabricmanager") for b in branches], fm),
            replaces=_swap([b.named("nvidia-fabricmanager") for b in branches], fm),
        ),
        Package(
            nscq,
            f"{release}-1",
            f"NVSwitch Configuration and Query library\n Stand-in libnvidia-nscq {release}.",
            section="multiverse/libs",
            files=[Payload(f"{LIBDIR}/libnvidia-nscq.so.{release}")],
            conflicts=_swap([b.named("libnvidia-nscq") for b in branches], nscq),
            replaces=_swap([b.named("libnvidia-nscq") for b in branches], nscq),
        ),
    ]


def _fm_daemon(release: str) -> bytes:
    """nv-fabricmanager as the lab plays it: refuses a module of another release (with the
    real daemon's message, in its log), else forks a daemon that writes its PID file."""
    return (
        "#!/bin/sh\n"
        f"# gpunode lab stand-in for nv-fabricmanager {release} (NVSwitch Fabric Manager).\n"
        f"release={release}\n"
        "run=/run/nvidia-fabricmanager\n"
        "loaded=$(cat /sys/module/nvidia/version 2>/dev/null)\n"
        'if [ "$loaded" != "$release" ]; then\n'
        "  msg=\"fabric manager NVIDIA GPU driver interface version $release don't match with"
        " driver version ${loaded:-(no driver loaded)}. Please update with matching NVIDIA"
        ' driver package."\n'
        '  echo "$msg" >&2\n'
        '  echo "[$(date)] [ERROR] [tid $$] $msg" >> /var/log/fabricmanager.log\n'
        "  exit 1\n"
        "fi\n"
        'mkdir -p "$run" && echo "$release" > "$run/version"\n'
        "setsid sh -c 'echo $$ > /run/nvidia-fabricmanager/nv-fabricmanager.pid;"
        " exec sleep infinity' </dev/null >/dev/null 2>&1 &\n"
        "i=0\n"
        'while [ ! -s "$run/nv-fabricmanager.pid" ] && [ $i -lt 100 ]; do'
        " sleep 0.05; i=$((i + 1)); done\n"
        '[ -s "$run/nv-fabricmanager.pid" ]\n'
    ).encode()


def _flavour(
    branches: tuple[Branch, ...], branch: Branch, release: str, flavor: str
) -> list[Package]:
    ub = f"{release}-0ubuntu1"
    dkms = _flavoured("nvidia-dkms", branch, flavor)
    driver = _flavoured("nvidia-driver", branch, flavor)
    kind = "open" if flavor == "open" else "proprietary"
    module = "Open " if flavor == "open" else ""
    dkmses = _all_flavoured("nvidia-dkms", branches)
    drivers = _all_flavoured("nvidia-driver", branches)
    return [
        Package(
            dkms,
            ub,
            f"NVIDIA DKMS package\n Stand-in NVIDIA {module}kernel module {release}: "
            "the lab loads it at the next simulated boot.",
            section="multiverse/kernel",
            conflicts=_swap(dkmses, dkms),
            replaces=_swap(dkmses, dkms),
            provides=["nvidia-dkms-kernel"],
            depends=["dkms"],
            files=[
                Payload("/usr/share/gpunode-lab/driver-version", f"{release} {kind}\n".encode()),
                Payload(f"/usr/src/nvidia-{release}/dkms.conf", _dkms_conf(release)),
            ],
            scripts={"postinst": _dkms_postinst(release, kind), "prerm": _dkms_prerm(release)},
        ),
        Package(
            driver,
            ub,
            f"NVIDIA driver metapackage\n Driver {release} ({kind} kernel module).",
            section="multiverse/libs",
            depends=[f"{dkms} (= {ub})", *(f"{branch.named(p)} (= {ub})" for p in USERSPACE)],
            conflicts=_swap(drivers, driver),
            replaces=_swap(drivers, driver),
            provides=["nvidia-driver-binary"],
        ),
        Package(
            meta_name(branch, flavor),
            f"{release}-1",
            f"NVIDIA driver ({kind} kernel modules) metapackage\n"
            f" Installs driver branch {branch.name} ({release}).",
            section="multiverse/metapackages",
            depends=[f"{driver} (= {ub})"],
        ),
    ]


def _pinning(branch: Branch, branches: tuple[Branch, ...]) -> Package:
    names = " ".join(
        sorted(
            {
                "nvidia-open",
                "cuda-drivers",
                "libnvidia-compute",
                "nvidia-utils",
                "nvidia-compute-utils",
                *_all_flavoured("nvidia-dkms", branches)[-2:],
                *_all_flavoured("nvidia-driver", branches)[-2:],
            }
        )
    )
    body = (
        f"# Keep the NVIDIA driver on branch {branch.name}.\n"
        f"Package: {names}\nPin: version {branch.name}.*\nPin-Priority: 1000\n"
    )
    path = f"/etc/apt/preferences.d/nvidia-driver-pinning-{branch.name}"
    return Package(
        f"nvidia-driver-pinning-{branch.name}",
        f"{branch.name}-1",
        f"NVIDIA driver branch pinning\n Pins driver packages to branch {branch.name}.",
        architecture="all",
        section="multiverse/admin",
        files=[Payload(path, body.encode())],
        conffiles=[path],
    )


def _dkms_conf(release: str) -> bytes:
    return f'PACKAGE_NAME="nvidia"\nPACKAGE_VERSION="{release}"\n'.encode()


def _dkms_postinst(release: str, kind: str) -> str:
    """As Ubuntu's dkms common.postinst: register the sources, build and install for every
    installed kernel; a kernel without headers is skipped (the package still configures)."""
    return (
        "#!/bin/sh\nset -e\n"
        'if [ "$1" = configure ]; then\n'
        f"  dkms add -m nvidia -v {release} >/dev/null\n"
        "  for d in /lib/modules/*; do\n"
        "    k=${d##*/}\n"
        '    [ -e "/boot/vmlinuz-$k" ] || continue\n'
        f'    if dkms install -m nvidia -v {release} -k "$k"; then\n'
        f'      echo "nvidia/{release} ({kind}): built and installed for kernel $k"\n'
        "    else\n"
        '      echo "Module build for kernel $k was skipped since the kernel headers for this'
        ' kernel do not seem to be installed."\n'
        "    fi\n"
        "  done\n"
        "fi\n"
    )


def _dkms_prerm(release: str) -> str:
    return (
        "#!/bin/sh\nset -e\n"
        'if [ "$1" = remove ] || [ "$1" = upgrade ] || [ "$1" = deconfigure ]; then\n'
        f"  dkms remove -m nvidia -v {release} --all >/dev/null 2>&1 || true\n"
        "fi\n"
    )
