"""Stand-in Python wheels and PEP 503 indexes for the lab (torch, tensorflow, nvidia-*).

Laid out like the real services: pip/simple/ plays PyPI, pip/cu124/ (and every other
variant) plays https://download.pytorch.org/whl/cu124/. Each wheel is a tiny pure-Python
package with the real distribution name and version; importing it says it is a stand-in.
"""

from __future__ import annotations

import base64
import hashlib
import html
import io
import re
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

# Every patch release of each minor PyTorch/TensorFlow release (pytorch.org, pypi.org), so
# that an inventory pinning any of them finds it; the last is the newest.
TORCH_RELEASES = {
    "2.2": ("2.2.0", "2.2.1", "2.2.2"),
    "2.3": ("2.3.0", "2.3.1"),
    "2.4": ("2.4.0", "2.4.1"),
    "2.5": ("2.5.0", "2.5.1"),
    "2.6": ("2.6.0",),
    "2.7": ("2.7.0", "2.7.1"),
    "2.8": ("2.8.0",),
    "2.9": ("2.9.0", "2.9.1"),
    "2.10": ("2.10.0",),
    "2.11": ("2.11.0",),
}
# The CUDA variant that PyPI's own torch wheel is built with.
TORCH_PYPI_VARIANT = {
    "2.2": "cu121",
    "2.3": "cu121",
    "2.4": "cu121",
    "2.5": "cu124",
    "2.6": "cu124",
    "2.7": "cu126",
    "2.8": "cu128",
    "2.9": "cu128",
    "2.10": "cu128",
    "2.11": "cu130",
}
# The CUDA variants (download.pytorch.org/whl/cuXYZ/) of each PyTorch release.
# Source: https://pytorch.org/get-started/previous-versions/ and https://download.pytorch.org/whl/
TORCH_VARIANTS = {
    "2.2": ("cu118", "cu121"),
    "2.3": ("cu118", "cu121"),
    "2.4": ("cu118", "cu121", "cu124"),
    "2.5": ("cu118", "cu121", "cu124"),
    "2.6": ("cu118", "cu124", "cu126"),
    "2.7": ("cu118", "cu126", "cu128"),
    "2.8": ("cu126", "cu128", "cu129"),
    "2.9": ("cu126", "cu128", "cu130"),
    "2.10": ("cu126", "cu128", "cu130"),
    "2.11": ("cu126", "cu128", "cu130"),
}
# torchvision and torchaudio published beside each torch release in every variant folder.
# Source: https://download.pytorch.org/whl/cu128/torchvision/ (and torchaudio/), and
# https://pytorch.org/get-started/previous-versions/.
TORCH_COMPANIONS = {
    "2.2.0": ("0.17.0", "2.2.0"),
    "2.2.1": ("0.17.1", "2.2.1"),
    "2.2.2": ("0.17.2", "2.2.2"),
    "2.3.0": ("0.18.0", "2.3.0"),
    "2.3.1": ("0.18.1", "2.3.1"),
    "2.4.0": ("0.19.0", "2.4.0"),
    "2.4.1": ("0.19.1", "2.4.1"),
    "2.5.0": ("0.20.0", "2.5.0"),
    "2.5.1": ("0.20.1", "2.5.1"),
    "2.6.0": ("0.21.0", "2.6.0"),
    "2.7.0": ("0.22.0", "2.7.0"),
    "2.7.1": ("0.22.1", "2.7.1"),
    "2.8.0": ("0.23.0", "2.8.0"),
    "2.9.0": ("0.24.0", "2.9.0"),
    "2.9.1": ("0.24.1", "2.9.1"),
}
# A few everyday PyPI projects, several releases each, for an env's `packages`.
PYPI_EXTRAS = {
    "numpy": ("1.26.4", "2.0.2", "2.1.3", "2.2.6"),
    "einops": ("0.7.0", "0.8.0", "0.8.1"),
    "tqdm": ("4.66.5", "4.67.1"),
}
TORCH_CUDNN12 = {"2.2": 8902, "2.3": 8902, "2.4": 90100, "2.5": 90100, "2.6": 90501, "2.7": 90701}
TF_RELEASES = {
    "2.14": ("2.14.0", "2.14.1"),
    "2.15": ("2.15.0", "2.15.1"),
    "2.16": ("2.16.1", "2.16.2"),
    "2.17": ("2.17.0", "2.17.1"),
    "2.18": ("2.18.0", "2.18.1"),
    "2.19": ("2.19.0", "2.19.1"),
    "2.20": ("2.20.0",),
}
# TensorFlow's tested CUDA and cuDNN per release: what tensorflow[and-cuda] pulls from PyPI.
# Source: https://www.tensorflow.org/install/source#gpu
TF_TESTED = {
    "2.14": {"cuda": "11.8", "cudnn": "8.7"},
    "2.15": {"cuda": "12.2", "cudnn": "8.9"},
    "2.16": {"cuda": "12.3", "cudnn": "8.9"},
    "2.17": {"cuda": "12.3", "cudnn": "8.9"},
    "2.18": {"cuda": "12.5", "cudnn": "9.3"},
    "2.19": {"cuda": "12.5", "cudnn": "9.3"},
    "2.20": {"cuda": "12.5", "cudnn": "9.3"},
}
CUDA_RUNTIME_WHEEL = {"11.8": "11.8.89", "12.2": "12.2.140", "12.3": "12.3.101", "12.5": "12.5.82"}
CUDNN_WHEEL = {"8.7": "8.7.0.84", "8.9": "8.9.7.29", "9.3": "9.3.0.75"}

NOTE = "gpunode lab stand-in: no GPU code inside; the lab's GPUs are simulated."


@dataclass
class Wheel:
    name: str  # distribution name as published: torch, nvidia-cudnn-cu12
    version: str
    files: dict[str, str]
    requires: list[str] = field(default_factory=list)
    extras: list[str] = field(default_factory=list)

    @property
    def dist(self) -> str:
        return re.sub(r"[-_.]+", "_", self.name)

    @property
    def filename(self) -> str:
        return f"{self.dist}-{self.version}-py3-none-any.whl"

    def build(self) -> bytes:
        info = f"{self.dist}-{self.version}.dist-info"
        meta = [
            "Metadata-Version: 2.1",
            f"Name: {self.name}",
            f"Version: {self.version}",
            f"Summary: {NOTE}",
            *(f"Provides-Extra: {e}" for e in self.extras),
            *(f"Requires-Dist: {r}" for r in self.requires),
        ]
        contents = dict(self.files)
        contents[f"{info}/METADATA"] = "\n".join(meta) + "\n\n" + NOTE + "\n"
        contents[f"{info}/WHEEL"] = (
            "Wheel-Version: 1.0\nGenerator: gpunode-lab\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
        )
        record = []
        for path, text in contents.items():
            data = text.encode()
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            record.append(f"{path},sha256={digest},{len(data)}")
        record.append(f"{info}/RECORD,,")
        contents[f"{info}/RECORD"] = "\n".join(record) + "\n"
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
            for path, text in contents.items():
                zi = zipfile.ZipInfo(path, date_time=(2024, 1, 1, 0, 0, 0))
                zi.external_attr = 0o644 << 16
                zi.compress_type = zipfile.ZIP_DEFLATED
                z.writestr(zi, text)
        return buf.getvalue()


def _cudnn_for(minor: str, variant: str) -> int:
    if variant.startswith("cu11"):
        return 8700 if minor in ("2.2", "2.3") else 90100
    if variant.startswith("cu13"):
        return 91300
    return TORCH_CUDNN12.get(minor, 91002)


def torch_wheel(minor: str, variant: str, local: bool = True, release: str | None = None) -> Wheel:
    release = release or TORCH_RELEASES.get(minor, (f"{minor}.0",))[-1]
    version = f"{release}+{variant}" if local else release
    digits = variant.removeprefix("cu")  # cu124 -> 12.4
    cuda = f"{digits[:-1]}.{digits[-1]}"
    init = f'''"""torch ({NOTE})"""

__version__ = "{version}"
STAND_IN = True

from torch import backends, cuda, version  # noqa: E402


def tensor(data, device=None):
    raise RuntimeError("torch stand-in: tensors are not simulated")
'''
    files = {
        "torch/__init__.py": init,
        "torch/version.py": (
            f'__version__ = "{version}"\ncuda = "{cuda}"\ngit_version = "stand-in"\n'
        ),
        "torch/cuda.py": (
            f'"""torch.cuda stand-in: {NOTE}"""\n\n'
            "STAND_IN_NOTE = (\n"
            '    "torch stand-in from the gpunode lab: CUDA is not available "\n'
            '    "because the lab simulates its GPUs"\n'
            ")\n\n\n"
            "def is_available():\n    return False\n\n\n"
            "def device_count():\n    return 0\n\n\n"
            "def get_device_name(index=0):\n    raise RuntimeError(STAND_IN_NOTE)\n"
        ),
        "torch/backends/__init__.py": "from torch.backends import cudnn  # noqa: F401\n",
        "torch/backends/cudnn.py": (
            f"def version():\n    return {_cudnn_for(minor, variant)}\n\n\n"
            "def is_available():\n    return True\n"
        ),
    }
    return Wheel("torch", version, files)


def companion_wheels(release: str, variant: str) -> list[Wheel]:
    """torchvision and torchaudio for a torch release, with torch's local label and a
    requirement on that exact torch, as the real wheels carry."""
    if release not in TORCH_COMPANIONS:
        return []
    vision, audio = TORCH_COMPANIONS[release]
    out = []
    for name, version in (("torchvision", vision), ("torchaudio", audio)):
        init = f'"""{name} ({NOTE})"""\n\n__version__ = "{version}+{variant}"\nSTAND_IN = True\n'
        out.append(
            Wheel(
                name,
                f"{version}+{variant}",
                {f"{name}/__init__.py": init},
                requires=[f"torch=={release}+{variant}"],
            )
        )
    return out


def plain_wheel(name: str, version: str) -> Wheel:
    init = f'"""{name} ({NOTE})"""\n\n__version__ = "{version}"\nSTAND_IN = True\n'
    return Wheel(name, version, {f"{name}/__init__.py": init})


def tensorflow_wheel(minor: str, tested: dict[str, str], version: str | None = None) -> list[Wheel]:
    version = version or TF_RELEASES.get(minor, (f"{minor}.0",))[-1]
    cuda, cudnn = tested["cuda"], tested["cudnn"]
    cmajor = cuda.split(".")[0]
    rt = Wheel(
        f"nvidia-cuda-runtime-cu{cmajor}",
        CUDA_RUNTIME_WHEEL.get(cuda, f"{cuda}.0"),
        {"nvidia/cuda_runtime/STAND_IN.txt": NOTE + "\n"},
    )
    dnn = Wheel(
        f"nvidia-cudnn-cu{cmajor}",
        CUDNN_WHEEL.get(cudnn, f"{cudnn}.0.0"),
        {"nvidia/cudnn/STAND_IN.txt": NOTE + "\n"},
    )
    init = f'''"""tensorflow ({NOTE})"""

__version__ = "{version}"
STAND_IN = True

from tensorflow import config, sysconfig, test  # noqa: E402,F401
'''
    files = {
        "tensorflow/__init__.py": init,
        "tensorflow/config.py": (
            "def list_physical_devices(device_type=None):\n"
            '    if device_type in (None, "CPU"):\n'
            '        return ["/physical_device:CPU:0"]\n'
            "    return []\n"
        ),
        "tensorflow/sysconfig.py": (
            "def get_build_info():\n"
            f'    return {{"cuda_version": "{cuda}", "cudnn_version": "{cudnn.split(".")[0]}", '
            '"is_cuda_build": True, "is_rocm_build": False}\n'
        ),
        "tensorflow/test.py": "def is_built_with_cuda():\n    return True\n",
    }
    tf = Wheel(
        "tensorflow",
        version,
        files,
        extras=["and-cuda"],
        requires=[
            f'{rt.name}=={rt.version}; extra == "and-cuda"',
            f'{dnn.name}=={dnn.version}; extra == "and-cuda"',
        ],
    )
    return [tf, rt, dnn]


def _normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _write_index(folder: Path, wheels: list[Wheel]) -> None:
    by_project: dict[str, dict[str, Wheel]] = {}
    for w in wheels:
        by_project.setdefault(_normalize(w.name), {})[w.filename] = w
    links = []
    for project in sorted(by_project):
        pdir = folder / project
        pdir.mkdir(parents=True, exist_ok=True)
        anchors = []
        for filename, w in sorted(by_project[project].items()):
            data = w.build()
            (pdir / filename).write_bytes(data)
            sha = hashlib.sha256(data).hexdigest()
            anchors.append(f'<a href="{html.escape(filename)}#sha256={sha}">{filename}</a><br/>')
        (pdir / "index.html").write_text(_page(f"Links for {project}", anchors))
        links.append(f'<a href="{project}/">{project}</a><br/>')
    (folder / "index.html").write_text(_page("Simple index (gpunode lab stand-ins)", links))


def _page(title: str, body: list[str]) -> str:
    return (
        f"<!DOCTYPE html>\n<html><head><title>{html.escape(title)}</title></head><body>\n"
        f"<h1>{html.escape(title)}</h1>\n" + "\n".join(body) + "\n</body></html>\n"
    )


def build_index(root: Path) -> list[str]:
    """Write pip/simple/ and pip/<variant>/ under `root`; return the folder names."""
    simple: list[Wheel] = []
    variants: dict[str, list[Wheel]] = {}
    for minor, names in TORCH_VARIANTS.items():
        for release in TORCH_RELEASES.get(minor, (f"{minor}.0",)):
            for variant in names:
                variants.setdefault(variant, []).append(torch_wheel(minor, variant, True, release))
                variants[variant] += companion_wheels(release, variant)
            pypi_variant = TORCH_PYPI_VARIANT.get(minor, names[-1])
            simple.append(torch_wheel(minor, pypi_variant, local=False, release=release))
    for minor, tested in TF_TESTED.items():
        for version in TF_RELEASES.get(minor, (f"{minor}.0",)):
            simple += tensorflow_wheel(minor, tested, version)
    simple += [plain_wheel(n, v) for n, versions in PYPI_EXTRAS.items() for v in versions]
    _write_index(root / "simple", simple)
    for variant, wheels in variants.items():
        _write_index(root / variant, wheels)
    (root / "README.txt").write_text(
        "Stand-in wheels for gpunode's lab. simple/ plays PyPI; cuXYZ/ plays "
        "https://download.pytorch.org/whl/cuXYZ/.\n" + NOTE + "\n"
    )
    return ["simple", *sorted(variants)]
