"""What the lab repository holds: stand-in packages with NVIDIA's names, versions and shapes.

The versions come from gpunode's own compatibility data (gpunode/compat/rules.yaml), so
every package gpunode asks for exists here. Package contents are tiny stand-ins.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from importlib import resources

from gpunode.compat import rules as compat
from gpunode.lab.repo.deb import Package, Payload
from gpunode.versions import dotted_key

DISTROS = ("ubuntu2204", "ubuntu2404")
LIBDIR = "/usr/lib/x86_64-linux-gnu"


@dataclass(frozen=True)
class Toolkit:
    release: str  # 12.4.1
    nvcc: str  # 12.4.131
    cudart: str  # 12.4.127
    cublas: str  # 12.4.5.8


# Each toolkit's last update release and its parts' own versions (NVIDIA's repository).
TOOLKITS = {
    "11.8": Toolkit("11.8.0", "11.8.89", "11.8.89", "11.11.3.6"),
    "12.0": Toolkit("12.0.1", "12.0.140", "12.0.146", "12.0.2.224"),
    "12.1": Toolkit("12.1.1", "12.1.105", "12.1.105", "12.1.3.1"),
    "12.2": Toolkit("12.2.2", "12.2.140", "12.2.140", "12.2.5.6"),
    "12.3": Toolkit("12.3.2", "12.3.107", "12.3.101", "12.3.4.1"),
    "12.4": Toolkit("12.4.1", "12.4.131", "12.4.127", "12.4.5.8"),
    "12.5": Toolkit("12.5.1", "12.5.82", "12.5.82", "12.5.3.2"),
    "12.6": Toolkit("12.6.3", "12.6.85", "12.6.77", "12.6.4.1"),
    "12.8": Toolkit("12.8.1", "12.8.93", "12.8.90", "12.8.4.1"),
    "12.9": Toolkit("12.9.1", "12.9.86", "12.9.79", "12.9.1.4"),
    "13.0": Toolkit("13.0.2", "13.0.88", "13.0.96", "13.1.0.3"),
    "13.1": Toolkit("13.1.0", "13.1.80", "13.1.80", "13.2.0.9"),
}

# cuDNN 9 releases served besides the one rules.yaml names (an older one to pin against).
CUDNN9_EXTRA = {"12": ["9.1.0.70-1"]}


def toolkit(cuda: str) -> Toolkit:
    if cuda in TOOLKITS:
        return TOOLKITS[cuda]
    return Toolkit(f"{cuda}.0", f"{cuda}.100", f"{cuda}.100", f"{cuda}.0.1")


# ---------------------------------------------------------------- drivers


def _driver_component_names(component: str) -> list[str]:
    """Every name a driver component has across branches (versioned and unversioned)."""
    names = []
    for branch in compat.rules()["driver_releases"]:
        names.append(component if compat.unversioned(branch) else f"{component}-{branch}")
    return names


def _swap(names: list[str], own: str) -> list[str]:
    return sorted(n for n in set(names) if n != own)


def _flavoured(base: str, branch: str, flavor: str) -> str:
    """nvidia-driver-550-open, nvidia-driver-550, nvidia-driver-open (590+), nvidia-driver."""
    name = base if compat.unversioned(branch) else f"{base}-{branch}"
    return name + ("-open" if flavor == "open" else "")


def _all_flavoured(base: str) -> list[str]:
    return [_flavoured(base, b, f) for b in compat.rules()["driver_releases"] for f in FLAVORS]


FLAVORS = ("open", "proprietary")


def _smi_templates() -> list[Payload]:
    folder = resources.files("gpunode.lab.repo") / "smi_templates"
    return [
        Payload(f"/usr/share/gpunode-lab/smi/{name}", (folder / name).read_bytes())
        for name in ("q.txt", "q.xml")
    ]


def smi_script(version: str, cuda: str) -> bytes:
    text = (resources.files("gpunode.lab.repo") / "smi_sim.py").read_text()
    text = text.replace('DRIVER_VERSION = "580.159.04"', f'DRIVER_VERSION = "{version}"', 1)
    text = text.replace('CUDA_VERSION = "13.0"', f'CUDA_VERSION = "{cuda}"', 1)
    return text.encode()


def driver_packages() -> list[Package]:
    out: list[Package] = []
    releases: dict[str, str] = compat.rules()["driver_releases"]
    templates = _smi_templates()
    for branch, release in sorted(releases.items(), key=lambda kv: dotted_key(kv[0])):
        ub = f"{release}-0ubuntu1"
        nv = f"{release}-1"
        versioned = not compat.unversioned(branch)

        def name(base: str, branch: str = branch, versioned: bool = versioned) -> str:
            return f"{base}-{branch}" if versioned else base

        compute = compat.driver_userspace_package(branch)
        utils = name("nvidia-utils")
        cutils = name("nvidia-compute-utils")
        out.append(
            Package(
                compute,
                ub,
                f"NVIDIA libcompute package\n Stand-in for the CUDA driver library {release}.",
                section="multiverse/libs",
                conflicts=_swap(_driver_component_names("libnvidia-compute"), compute),
                replaces=_swap(_driver_component_names("libnvidia-compute"), compute),
                provides=["libcuda.so.1", "libnvidia-ml.so.1"],
                files=[
                    Payload(f"{LIBDIR}/libcuda.so.{release}"),
                    Payload(f"{LIBDIR}/libcuda.so.1", symlink=f"libcuda.so.{release}"),
                    Payload(f"{LIBDIR}/libnvidia-ml.so.{release}"),
                    Payload(f"{LIBDIR}/libnvidia-ml.so.1", symlink=f"libnvidia-ml.so.{release}"),
                ],
            )
        )
        out.append(
            Package(
                utils,
                ub,
                f"NVIDIA driver support binaries\n Simulated nvidia-smi for driver {release}.",
                section="multiverse/utils",
                depends=[f"{compute} (= {ub})"],
                conflicts=_swap(_driver_component_names("nvidia-utils"), utils),
                replaces=_swap(_driver_component_names("nvidia-utils"), utils),
                files=[
                    Payload(
                        "/usr/bin/nvidia-smi",
                        smi_script(release, compat.driver_cuda(release) or "12.0"),
                        0o755,
                    ),
                    *templates,
                ],
            )
        )
        out.append(
            Package(
                cutils,
                ub,
                f"NVIDIA compute utilities\n Stand-in nvidia-persistenced for driver {release}.",
                section="multiverse/utils",
                depends=[f"{compute} (= {ub})"],
                conflicts=_swap(_driver_component_names("nvidia-compute-utils"), cutils),
                replaces=_swap(_driver_component_names("nvidia-compute-utils"), cutils),
                files=[
                    Payload(
                        "/usr/bin/nvidia-persistenced",
                        b"#!/bin/sh\n# gpunode lab stand-in for nvidia-persistenced.\nexit 0\n",
                        0o755,
                    )
                ],
            )
        )
        for flavor in FLAVORS:
            dkms = _flavoured("nvidia-dkms", branch, flavor)
            driver = _flavoured("nvidia-driver", branch, flavor)
            kind = "open" if flavor == "open" else "proprietary"
            module = "Open " if flavor == "open" else ""
            out.append(
                Package(
                    dkms,
                    ub,
                    f"NVIDIA DKMS package\n Stand-in NVIDIA {module}kernel module {release}: "
                    "the lab loads it at the next simulated boot.",
                    section="multiverse/kernel",
                    conflicts=_swap(_all_flavoured("nvidia-dkms"), dkms),
                    replaces=_swap(_all_flavoured("nvidia-dkms"), dkms),
                    provides=["nvidia-dkms-kernel"],
                    files=[
                        Payload(
                            "/usr/share/gpunode-lab/driver-version", f"{release} {kind}\n".encode()
                        ),
                        Payload(f"/usr/src/nvidia-{release}/dkms.conf", _dkms_conf(release)),
                    ],
                    scripts={"postinst": _dkms_postinst(release, kind)},
                )
            )
            out.append(
                Package(
                    driver,
                    ub,
                    f"NVIDIA driver metapackage\n Driver {release} ({kind} kernel module).",
                    section="multiverse/libs",
                    depends=[
                        f"{dkms} (= {ub})",
                        f"{compute} (= {ub})",
                        f"{utils} (= {ub})",
                        f"{cutils} (= {ub})",
                    ],
                    conflicts=_swap(_all_flavoured("nvidia-driver"), driver),
                    replaces=_swap(_all_flavoured("nvidia-driver"), driver),
                    provides=["nvidia-driver-binary"],
                )
            )
            meta = compat.driver_packages(branch, flavor)[-1]
            out.append(
                Package(
                    meta,
                    nv,
                    f"NVIDIA driver ({kind} kernel modules) metapackage\n"
                    f" Installs driver branch {branch} ({release}).",
                    section="multiverse/metapackages",
                    depends=[f"{driver} (= {ub})"],
                )
            )
        if not versioned:
            out.append(_pinning(branch))
    return out


def _pinning(branch: str) -> Package:
    names = " ".join(
        sorted(
            {
                "nvidia-open",
                "cuda-drivers",
                "libnvidia-compute",
                "nvidia-utils",
                "nvidia-compute-utils",
                *_all_flavoured("nvidia-dkms")[-2:],
                *_all_flavoured("nvidia-driver")[-2:],
            }
        )
    )
    body = (
        f"# Keep the NVIDIA driver on branch {branch}.\n"
        f"Package: {names}\nPin: version {branch}.*\nPin-Priority: 1000\n"
    )
    path = f"/etc/apt/preferences.d/nvidia-driver-pinning-{branch}"
    return Package(
        f"nvidia-driver-pinning-{branch}",
        f"{branch}-1",
        f"NVIDIA driver branch pinning\n Pins driver packages to branch {branch}.",
        architecture="all",
        section="multiverse/admin",
        files=[Payload(path, body.encode())],
        conffiles=[path],
    )


def _dkms_conf(release: str) -> bytes:
    return f'PACKAGE_NAME="nvidia"\nPACKAGE_VERSION="{release}"\n'.encode()


def _dkms_postinst(release: str, kind: str) -> str:
    return (
        "#!/bin/sh\nset -e\n"
        'if [ "$1" = configure ]; then\n'
        f'  echo "nvidia/{release} ({kind}): kernel module stand-in registered; '
        'it loads at the next boot (gpunode lab)."\n'
        "fi\n"
    )


# ---------------------------------------------------------------- CUDA toolkits


def toolkit_packages(cuda: str) -> list[Package]:
    tk = toolkit(cuda)
    major, minor = cuda.split(".")
    d = cuda.replace(".", "-")
    root = f"/usr/local/cuda-{cuda}"
    tv, nvcc, rt = f"{tk.release}-1", f"{tk.nvcc}-1", f"{tk.cudart}-1"
    prio = f"{major}{minor}"
    lib = f"{root}/targets/x86_64-linux/lib"
    inc = f"{root}/targets/x86_64-linux/include"
    common = f"cuda-toolkit-{d}-config-common"

    def part(name: str, version: str, depends: list[str], files: list[Payload] | None = None,
             desc: str = "") -> Package:  # fmt: skip
        return Package(
            name,
            version,
            desc or f"CUDA {name.removeprefix('cuda-').rsplit('-', 2)[0]} {cuda}",
            depends=depends,
            files=files or [],
        )

    version_json = {
        "cuda": {"name": "CUDA SDK", "version": tk.release},
        "cuda_cudart": {"name": "CUDA Runtime (cudart)", "version": tk.cudart},
        "cuda_nvcc": {"name": "CUDA NVCC", "version": tk.nvcc},
        "libcublas": {"name": "CUDA cuBLAS", "version": tk.cublas},
    }
    cudart_code = int(major) * 1000 + int(minor) * 10
    pkgs = [
        part(
            f"cuda-toolkit-{d}",
            tv,
            [
                f"cuda-compiler-{d} (>= {tv})",
                f"cuda-libraries-{d} (>= {tv})",
                f"cuda-libraries-dev-{d} (>= {tv})",
                f"cuda-tools-{d} (>= {tv})",
                f"cuda-nvml-dev-{d} (>= {rt})",
                f"{common} (>= {rt})",
                f"cuda-toolkit-{major}-config-common",
                "cuda-toolkit-config-common",
            ],
            [Payload(f"{root}/version.json", json.dumps(version_json, indent=3).encode())],
            f"CUDA Toolkit {cuda} meta-package",
        ),
        part(
            f"cuda-compiler-{d}",
            tv,
            [
                f"cuda-nvcc-{d} (>= {nvcc})",
                f"cuda-cuobjdump-{d} (>= {rt})",
                f"cuda-cuxxfilt-{d} (>= {rt})",
                f"cuda-nvprune-{d} (>= {rt})",
            ],
        ),
        part(
            f"cuda-nvcc-{d}",
            nvcc,
            [f"cuda-cudart-dev-{d}", common],
            [Payload(f"{root}/bin/nvcc", _nvcc(cuda, tk), 0o755)],
            f"CUDA nvcc {cuda} (stand-in answering --version)",
        ),
        part(
            f"cuda-cudart-{d}",
            rt,
            [common],
            [
                Payload(f"{lib}/libcudart.so.{tk.cudart}"),
                Payload(f"{lib}/libcudart.so.{major}", symlink=f"libcudart.so.{tk.cudart}"),
            ],
        ),
        part(
            f"cuda-cudart-dev-{d}",
            rt,
            [f"cuda-cudart-{d} (>= {rt})", f"cuda-driver-dev-{d}"],
            [
                Payload(f"{lib}/libcudart.so", symlink=f"libcudart.so.{major}"),
                Payload(
                    f"{inc}/cuda_runtime_api.h",
                    f"#define CUDART_VERSION {cudart_code}\n".encode(),
                ),
            ],
        ),
        part(f"cuda-driver-dev-{d}", rt, [], [Payload(f"{lib}/stubs/libcuda.so")]),
        part(f"cuda-nvrtc-{d}", rt, [common], [Payload(f"{lib}/libnvrtc.so.{tk.cudart}")]),
        part(f"cuda-nvrtc-dev-{d}", rt, [f"cuda-nvrtc-{d} (>= {rt})"]),
        part(
            f"libcublas-{d}",
            f"{tk.cublas}-1",
            [common],
            [Payload(f"{lib}/libcublas.so.{tk.cublas}")],
            f"CUBLAS native runtime libraries {cuda}",
        ),
        part(f"libcublas-dev-{d}", f"{tk.cublas}-1", [f"libcublas-{d} (>= {tk.cublas}-1)"]),
        part(
            f"cuda-libraries-{d}",
            tv,
            [f"cuda-cudart-{d} (>= {rt})", f"cuda-nvrtc-{d} (>= {rt})", f"libcublas-{d}"],
        ),
        part(
            f"cuda-libraries-dev-{d}",
            tv,
            [
                f"cuda-cudart-dev-{d} (>= {rt})",
                f"cuda-nvrtc-dev-{d} (>= {rt})",
                f"libcublas-dev-{d}",
            ],
        ),
        part(f"cuda-tools-{d}", tv, [f"cuda-command-line-tools-{d} (>= {tv})"]),
        part(f"cuda-command-line-tools-{d}", tv, [f"cuda-cupti-{d} (>= {rt})"]),
        part(f"cuda-cupti-{d}", rt, [common]),
        part(f"cuda-cuobjdump-{d}", rt, []),
        part(f"cuda-cuxxfilt-{d}", rt, []),
        part(f"cuda-nvprune-{d}", rt, []),
        part(f"cuda-nvml-dev-{d}", rt, []),
        Package(
            common,
            rt,
            f"Common config package for CUDA Toolkit {cuda}.\n"
            f" Registers /usr/local/cuda-{cuda} as the cuda and cuda-{major} alternatives.",
            architecture="all",
            files=[Payload(f"{root}/README.stand-in", b"gpunode lab stand-in toolkit\n")],
            scripts={
                "postinst": (
                    "#!/bin/sh\nset -e\n"
                    'if [ "$1" = configure ]; then\n'
                    f"  update-alternatives --install /usr/local/cuda cuda {root} {prio}\n"
                    f"  update-alternatives --install /usr/local/cuda-{major} cuda-{major} "
                    f"{root} {prio}\n"
                    "fi\n"
                ),
                "prerm": (
                    "#!/bin/sh\nset -e\n"
                    'if [ "$1" = remove ] || [ "$1" = deconfigure ]; then\n'
                    f"  update-alternatives --remove cuda {root}\n"
                    f"  update-alternatives --remove cuda-{major} {root}\n"
                    "fi\n"
                ),
            },
        ),
        Package(
            f"cuda-toolkit-{major}-config-common",
            rt,
            f"Common config package for CUDA Toolkit {major}.",
            architecture="all",
            files=[
                Payload(
                    f"/etc/ld.so.conf.d/988_cuda-{major}.conf",
                    f"/usr/local/cuda-{major}/targets/x86_64-linux/lib\n".encode(),
                )
            ],
        ),
        Package(
            "cuda-toolkit-config-common",
            rt,
            "Common config package for CUDA Toolkit.",
            architecture="all",
            files=[
                Payload(
                    "/etc/ld.so.conf.d/000_cuda.conf",
                    b"/usr/local/cuda/targets/x86_64-linux/lib\n",
                )
            ],
        ),
        # The meta packages that pull a driver in: gpunode never installs these.
        part(
            f"cuda-runtime-{d}",
            tv,
            [
                f"cuda-libraries-{d} (>= {tv})",
                f"cuda-drivers (>= {compat.min_driver(cuda) or '0'})",
            ],
            desc=f"CUDA Runtime {cuda} meta-package (pulls a driver)",
        ),
        part(
            f"cuda-{d}",
            tv,
            [f"cuda-runtime-{d} (>= {tv})", f"cuda-toolkit-{d} (>= {tv})"],
            desc=f"CUDA {cuda} meta-package (toolkit and driver)",
        ),
        part("cuda", tv, [f"cuda-{d} (>= {tv})"], desc="CUDA meta-package (toolkit and driver)"),
    ]
    return pkgs


def _nvcc(cuda: str, tk: Toolkit) -> bytes:
    year = "2022" if cuda.startswith("11") else "2024" if cuda < "12.7" else "2025"
    return (
        "#!/bin/sh\n"
        "# gpunode lab stand-in for nvcc: answers --version; it compiles nothing.\n"
        'for a in "$@"; do\n'
        '  case "$a" in\n'
        "    --version|-V)\n"
        "      cat <<'EOF'\n"
        "nvcc: NVIDIA (R) Cuda compiler driver\n"
        f"Copyright (c) 2005-{year} NVIDIA Corporation\n"
        "Built on Tue_Jan_01_00:00:00_PST_2000\n"
        f"Cuda compilation tools, release {cuda}, V{tk.nvcc}\n"
        f"Build cuda_{cuda}.r{cuda}/compiler.00000000_0\n"
        "EOF\n"
        "      exit 0 ;;\n"
        "  esac\n"
        "done\n"
        'echo "nvcc: gpunode lab stand-in; compiling is not simulated" >&2\n'
        "exit 1\n"
    ).encode()


# ---------------------------------------------------------------- cuDNN and NCCL


def _cudnn_header(version: str, suffix: str) -> Payload:
    major, minor, patch = version.split(".")[:3]
    text = (
        f"/* gpunode lab stand-in for cudnn_version.h ({version}) */\n"
        f"#define CUDNN_MAJOR {major}\n#define CUDNN_MINOR {minor}\n"
        f"#define CUDNN_PATCHLEVEL {patch}\n"
        "#define CUDNN_VERSION (CUDNN_MAJOR * 10000 + CUDNN_MINOR * 100 + CUDNN_PATCHLEVEL)\n"
    )
    return Payload(f"/usr/include/x86_64-linux-gnu/cudnn_version_{suffix}.h", text.encode())


def _alternative_scripts(major: str, header: str) -> dict[str, str]:
    link = "/usr/include/x86_64-linux-gnu/cudnn_version.h"
    return {
        "postinst": (
            "#!/bin/sh\nset -e\n"
            'if [ "$1" = configure ]; then\n'
            f"  update-alternatives --install {link} libcudnn_version_h {header} {major}0\n"
            "fi\n"
        ),
        "prerm": (
            "#!/bin/sh\nset -e\n"
            'if [ "$1" = remove ] || [ "$1" = deconfigure ]; then\n'
            f"  update-alternatives --remove libcudnn_version_h {header}\n"
            "fi\n"
        ),
    }


def cudnn_packages() -> list[Package]:
    out: list[Package] = []
    table: dict[str, dict[str, dict[str, str]]] = compat.rules()["cudnn"]
    for major, per_cuda in table.items():
        for cuda_major, entry in per_cuda.items():
            versions = (
                [entry["version"], *CUDNN9_EXTRA.get(cuda_major, [])]
                if major == "9"
                else [entry["version"]]
            )
            for version in versions:
                upstream = version.split("-")[0]
                if major == "8":
                    header = _cudnn_header(upstream, "v8")
                    out += [
                        Package(
                            "libcudnn8",
                            version,
                            "cuDNN runtime libraries",
                            section="multiverse/libs",
                            files=[Payload(f"{LIBDIR}/libcudnn.so.{upstream}")],
                        ),
                        Package(
                            "libcudnn8-dev",
                            version,
                            "cuDNN development libraries and headers",
                            depends=[f"libcudnn8 (= {version})"],
                            files=[header],
                            scripts=_alternative_scripts("8", header.path),
                        ),
                    ]
                    continue
                other = "13" if cuda_major == "12" else "12"
                header = _cudnn_header(upstream, "v9")
                lib = f"libcudnn9-cuda-{cuda_major}"
                hdr = f"libcudnn9-headers-cuda-{cuda_major}"
                dev = f"libcudnn9-dev-cuda-{cuda_major}"
                out += [
                    Package(
                        lib,
                        version,
                        f"cuDNN runtime libraries for CUDA {cuda_major}",
                        section="multiverse/libs",
                        conflicts=[f"libcudnn9-cuda-{other}"],
                        replaces=[f"libcudnn9-cuda-{other}"],
                        files=[Payload(f"{LIBDIR}/libcudnn.so.{upstream}")],
                    ),
                    Package(
                        hdr,
                        version,
                        f"cuDNN header files for CUDA {cuda_major}",
                        conflicts=[f"libcudnn9-headers-cuda-{other}"],
                        replaces=[f"libcudnn9-headers-cuda-{other}"],
                        files=[header],
                        scripts=_alternative_scripts("9", header.path),
                    ),
                    Package(
                        dev,
                        version,
                        f"cuDNN development libraries for CUDA {cuda_major}",
                        depends=[f"{lib} (= {version})", f"{hdr} (= {version})"],
                        conflicts=[f"libcudnn9-dev-cuda-{other}"],
                        replaces=[f"libcudnn9-dev-cuda-{other}"],
                    ),
                ]
    return out


def nccl_packages() -> list[Package]:
    out: list[Package] = []
    table: dict[str, list[str]] = compat.rules()["nccl_builds"]
    for builds in table.values():
        for build in builds:
            upstream, cuda = build.split("-")[0], build.rsplit("+cuda", 1)[1]
            major, minor, patch = upstream.split(".")
            header = (
                f"/* gpunode lab stand-in for nccl.h, NCCL {upstream} built for CUDA {cuda} */\n"
                f"#define NCCL_MAJOR {major}\n#define NCCL_MINOR {minor}\n"
                f'#define NCCL_PATCH {patch}\n#define NCCL_SUFFIX ""\n'
                f"#define NCCL_VERSION_CODE {int(major) * 10000 + int(minor) * 100 + int(patch)}\n"
            )
            out += [
                Package(
                    "libnccl2",
                    build,
                    "NVIDIA Collective Communication Library (NCCL) Runtime",
                    section="libs",
                    files=[
                        Payload(f"{LIBDIR}/libnccl.so.{upstream}"),
                        Payload(f"{LIBDIR}/libnccl.so.2", symlink=f"libnccl.so.{upstream}"),
                    ],
                ),
                Package(
                    "libnccl-dev",
                    build,
                    "NVIDIA Collective Communication Library (NCCL) Development Files",
                    section="libdevel",
                    depends=[f"libnccl2 (= {build})"],
                    files=[
                        Payload("/usr/include/nccl.h", header.encode()),
                        Payload(f"{LIBDIR}/libnccl.so", symlink="libnccl.so.2"),
                    ],
                ),
            ]
    return out


# ---------------------------------------------------------------- keyring


def keyring_package(distro: str, base_url: str, keyring: bytes) -> Package:
    url = f"{base_url.rstrip('/')}/{distro}/x86_64/"
    listing = f"deb [signed-by=/usr/share/keyrings/cuda-archive-keyring.gpg] {url} /\n"
    lst = f"/etc/apt/sources.list.d/cuda-{distro}-x86_64.list"
    return Package(
        "cuda-keyring",
        "1.1-1",
        "GPG keyring for the CUDA repository\n Installs the repository's signing key and "
        "its sources.list entry.",
        architecture="all",
        section="non-free/admin",
        files=[
            Payload("/usr/share/keyrings/cuda-archive-keyring.gpg", keyring),
            Payload(lst, listing.encode()),
        ],
        conffiles=[lst],
    )


def packages_for(distro: str) -> list[Package]:
    """Everything but the keyring, for one Ubuntu release's folder."""
    release = distro.removeprefix("ubuntu")
    ubuntu = f"{release[:2]}.{release[2:]}"
    out = driver_packages() + cudnn_packages() + nccl_packages()
    for cuda in compat.known_toolkits():
        if ubuntu in compat.toolkit_ubuntu(cuda):
            out += toolkit_packages(cuda)
    return out
