"""CUDA toolkit packages: cuda-toolkit-X-Y and its parts, in NVIDIA's dependency shape.

The toolkit metapackage never pulls a driver; cuda-runtime-X-Y, cuda-X-Y and cuda do (through
cuda-drivers), as NVIDIA's do. Parts carry their own version numbers (nvcc 12.4.131 in
toolkit 12.4.1); the config-common packages register the /usr/local/cuda alternatives.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from gpunode_lab.repo.deb import Package, Payload
from gpunode_lab.repo.nvidia_repo import Toolkit


@dataclass(frozen=True)
class _Names:
    """The spellings one toolkit's packages share."""

    tk: Toolkit

    @property
    def major(self) -> str:
        return self.tk.cuda.split(".")[0]

    @property
    def d(self) -> str:  # 12-4
        return self.tk.cuda.replace(".", "-")

    @property
    def root(self) -> str:
        return f"/usr/local/cuda-{self.tk.cuda}"

    @property
    def lib(self) -> str:
        return f"{self.root}/targets/x86_64-linux/lib"

    @property
    def common(self) -> str:
        return f"cuda-toolkit-{self.d}-config-common"

    @property
    def tv(self) -> str:  # the toolkit's own packages: 12.4.1-1
        return f"{self.tk.release}-1"

    @property
    def rt(self) -> str:  # runtime parts: 12.4.127-1
        return f"{self.tk.cudart}-1"

    def part(
        self, name: str, version: str, depends: list[str], files: list[Payload] | None = None,
        desc: str = "",
    ) -> Package:  # fmt: skip
        label = name.removeprefix("cuda-").rsplit("-", 2)[0]
        return Package(
            name,
            version,
            desc or f"CUDA {label} {self.tk.cuda}",
            depends=depends,
            files=files or [],
        )


def toolkit_packages(tk: Toolkit) -> list[Package]:
    n = _Names(tk)
    return _metas(n) + _compiler(n) + _runtime(n) + _config(n) + _driver_pulling(n)


def _metas(n: _Names) -> list[Package]:
    d, tv, rt, tk = n.d, n.tv, n.rt, n.tk
    version_json = {
        "cuda": {"name": "CUDA SDK", "version": tk.release},
        "cuda_cudart": {"name": "CUDA Runtime (cudart)", "version": tk.cudart},
        "cuda_nvcc": {"name": "CUDA NVCC", "version": tk.nvcc},
        "libcublas": {"name": "CUDA cuBLAS", "version": tk.cublas},
    }
    return [
        n.part(
            f"cuda-toolkit-{d}",
            tv,
            [
                f"cuda-compiler-{d} (>= {tv})",
                f"cuda-libraries-{d} (>= {tv})",
                f"cuda-libraries-dev-{d} (>= {tv})",
                f"cuda-tools-{d} (>= {tv})",
                f"cuda-nvml-dev-{d} (>= {rt})",
                f"{n.common} (>= {rt})",
                f"cuda-toolkit-{n.major}-config-common",
                "cuda-toolkit-config-common",
            ],
            [Payload(f"{n.root}/version.json", json.dumps(version_json, indent=3).encode())],
            f"CUDA Toolkit {tk.cuda} meta-package",
        ),
        n.part(
            f"cuda-libraries-{d}",
            tv,
            [f"cuda-cudart-{d} (>= {rt})", f"cuda-nvrtc-{d} (>= {rt})", f"libcublas-{d}"],
        ),
        n.part(
            f"cuda-libraries-dev-{d}",
            tv,
            [
                f"cuda-cudart-dev-{d} (>= {rt})",
                f"cuda-nvrtc-dev-{d} (>= {rt})",
                f"libcublas-dev-{d}",
            ],
        ),
        n.part(f"cuda-tools-{d}", tv, [f"cuda-command-line-tools-{d} (>= {tv})"]),
        n.part(f"cuda-command-line-tools-{d}", tv, [f"cuda-cupti-{d} (>= {rt})"]),
    ]


def _compiler(n: _Names) -> list[Package]:
    d, rt = n.d, n.rt
    nvcc = f"{n.tk.nvcc}-1"
    return [
        n.part(
            f"cuda-compiler-{d}",
            n.tv,
            [
                f"cuda-nvcc-{d} (>= {nvcc})",
                f"cuda-cuobjdump-{d} (>= {rt})",
                f"cuda-cuxxfilt-{d} (>= {rt})",
                f"cuda-nvprune-{d} (>= {rt})",
            ],
        ),
        n.part(
            f"cuda-nvcc-{d}",
            nvcc,
            [f"cuda-cudart-dev-{d}", n.common],
            [Payload(f"{n.root}/bin/nvcc", _nvcc(n.tk), 0o755)],
            f"CUDA nvcc {n.tk.cuda} (stand-in answering --version)",
        ),
        *(n.part(f"cuda-{tool}-{d}", rt, []) for tool in ("cuobjdump", "cuxxfilt", "nvprune")),
    ]


def _runtime(n: _Names) -> list[Package]:
    d, rt, tk, lib = n.d, n.rt, n.tk, n.lib
    minor = tk.cuda.split(".")[1]
    header = f"#define CUDART_VERSION {int(n.major) * 1000 + int(minor) * 10}\n"
    return [
        n.part(
            f"cuda-cudart-{d}",
            rt,
            [n.common],
            [
                Payload(f"{lib}/libcudart.so.{tk.cudart}"),
                Payload(f"{lib}/libcudart.so.{n.major}", symlink=f"libcudart.so.{tk.cudart}"),
            ],
        ),
        n.part(
            f"cuda-cudart-dev-{d}",
            rt,
            [f"cuda-cudart-{d} (>= {rt})", f"cuda-driver-dev-{d}"],
            [
                Payload(f"{lib}/libcudart.so", symlink=f"libcudart.so.{n.major}"),
                Payload(
                    f"{n.root}/targets/x86_64-linux/include/cuda_runtime_api.h", header.encode()
                ),
            ],
        ),
        n.part(f"cuda-driver-dev-{d}", rt, [], [Payload(f"{lib}/stubs/libcuda.so")]),
        n.part(f"cuda-nvrtc-{d}", rt, [n.common], [Payload(f"{lib}/libnvrtc.so.{tk.cudart}")]),
        n.part(f"cuda-nvrtc-dev-{d}", rt, [f"cuda-nvrtc-{d} (>= {rt})"]),
        n.part(
            f"libcublas-{d}",
            f"{tk.cublas}-1",
            [n.common],
            [Payload(f"{lib}/libcublas.so.{tk.cublas}")],
            f"CUBLAS native runtime libraries {tk.cuda}",
        ),
        n.part(f"libcublas-dev-{d}", f"{tk.cublas}-1", [f"libcublas-{d} (>= {tk.cublas}-1)"]),
        n.part(f"cuda-cupti-{d}", rt, [n.common]),
        n.part(f"cuda-nvml-dev-{d}", rt, []),
    ]


def _config(n: _Names) -> list[Package]:
    """The config-common packages: alternatives and ld.so.conf.d entries."""
    root, major = n.root, n.major
    prio = n.tk.cuda.replace(".", "")
    return [
        Package(
            n.common,
            n.rt,
            f"Common config package for CUDA Toolkit {n.tk.cuda}.\n"
            f" Registers {root} as the cuda and cuda-{major} alternatives.",
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
            n.rt,
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
            n.rt,
            "Common config package for CUDA Toolkit.",
            architecture="all",
            files=[
                Payload(
                    "/etc/ld.so.conf.d/000_cuda.conf",
                    b"/usr/local/cuda/targets/x86_64-linux/lib\n",
                )
            ],
        ),
    ]


def _driver_pulling(n: _Names) -> list[Package]:
    """The metapackages that pull a driver in: gpunode never installs these."""
    d, tv = n.d, n.tv
    return [
        n.part(
            f"cuda-runtime-{d}",
            tv,
            [f"cuda-libraries-{d} (>= {tv})", f"cuda-drivers (>= {n.tk.min_driver})"],
            desc=f"CUDA Runtime {n.tk.cuda} meta-package (pulls a driver)",
        ),
        n.part(
            f"cuda-{d}",
            tv,
            [f"cuda-runtime-{d} (>= {tv})", f"cuda-toolkit-{d} (>= {tv})"],
            desc=f"CUDA {n.tk.cuda} meta-package (toolkit and driver)",
        ),
        n.part("cuda", tv, [f"cuda-{d} (>= {tv})"], desc="CUDA meta-package (toolkit and driver)"),
    ]


def _nvcc(tk: Toolkit) -> bytes:
    cuda = tk.cuda
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
