"""The lab's libcuda.so.<release>: a small shared library (libcuda_standin.c) whose cuInit
answers from the lab host's simulated hardware, so that CUDA's initialisation can fail as on
a real host (802 on an NVSwitch board without its fabric manager).

Built with the machine's C compiler when the repository is built; without one the library
is an empty file, which no program can load (CUDA's checks then skip and say so).
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from functools import cache
from importlib import resources
from pathlib import Path

SOURCE = "libcuda_standin.c"
# Built once, with this placeholder as its release; each release's library is that build with
# its release written over the placeholder (NUL-padded: the C code compares strings).
PLACEHOLDER = b"@GPUNODE-LAB-RELEASE@".ljust(32, b"@")


@cache
def _template() -> bytes:
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        return b""
    source = (resources.files("gpunode_lab.repo") / SOURCE).read_text()
    with tempfile.TemporaryDirectory(prefix="gpunode-lab-libcuda-") as tmp:
        src, out = Path(tmp) / SOURCE, Path(tmp) / "libcuda.so"
        src.write_text(source)
        argv = [cc, "-shared", "-fPIC", "-O2", "-s", f'-DRELEASE="{PLACEHOLDER.decode()}"',
                "-Wl,-soname,libcuda.so.1", "-o", str(out), str(src)]  # fmt: skip
        try:
            done = subprocess.run(argv, capture_output=True, timeout=60)
        except (OSError, subprocess.TimeoutExpired):
            return b""
        built = out.read_bytes() if done.returncode == 0 and out.is_file() else b""
    return built if built.count(PLACEHOLDER) == 1 else b""


def libcuda(release: str) -> bytes:
    """The library for one driver release, or b"" where nothing can build it."""
    if not re.fullmatch(r"[0-9.]{1,31}", release):
        return b""
    return _template().replace(PLACEHOLDER, release.encode().ljust(len(PLACEHOLDER), b"\0"))
