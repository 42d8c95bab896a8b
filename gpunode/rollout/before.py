"""What a host runs before its wave changes it: kept in the rollout's record, so that
`gpunode rollback RUN` can return it there."""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from typing import Any

from gpunode.transport.base import Transport

# One round trip: the loaded module's release, then NVIDIA's packages with their versions,
# then the held packages. Read only; nothing here needs root.
READ_SH = (
    "cat /sys/module/nvidia/version 2>/dev/null || echo none; echo '### packages'; "
    "dpkg-query -W -f '${db:Status-Abbrev} ${Package}=${Version}\\n' "
    "'nvidia-*' 'libnvidia-*' 'cuda-*' 'libcudnn*' 'libnccl*' 2>/dev/null; "
    "echo '### held'; apt-mark showhold 2>/dev/null"
)
RELEASE = re.compile(r"\A[0-9]+\.[0-9]+(\.[0-9]+)*\Z")
PIN = re.compile(r"\A[a-z0-9][a-z0-9+.-]*=[A-Za-z0-9.+~:-]+\Z")
PKG = re.compile(r"\A[a-z0-9][a-z0-9+.-]*\Z")
LIBRARIES = {  # the runtime package whose version is the component's exact version
    "cudnn": re.compile(r"\Alibcudnn[0-9]+-cuda-[0-9]+\Z"),
    "nccl": re.compile(r"\Alibnccl[0-9]+\Z"),
}


@dataclass(frozen=True)
class Before:
    driver: str | None
    """The loaded nvidia module's release (None: none loaded)."""
    packages: dict[str, str] = field(default_factory=dict)
    """NVIDIA's installed packages (driver, CUDA, cuDNN, NCCL) by name: version."""
    held: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["held"] = list(self.held)
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Before:
        driver = data.get("driver")
        return cls(
            driver if isinstance(driver, str) and RELEASE.match(driver) else None,
            {str(k): str(v) for k, v in dict(data.get("packages") or {}).items()},
            tuple(str(h) for h in data.get("held") or ()),
        )

    def library(self, component: str) -> tuple[str, bool] | None:
        """cuDNN's or NCCL's installed runtime package: (its exact Debian version, held)."""
        pattern = LIBRARIES[component]
        for name, version in sorted(self.packages.items()):
            if pattern.match(name):
                return version, name in self.held
        return None

    @property
    def driver_held(self) -> bool:
        return any(p.startswith(("nvidia-", "libnvidia-")) for p in self.held)


def parse(text: str) -> Before:
    """READ_SH's output; lines that are not what they should be are left out."""
    head, _, rest = text.partition("### packages")
    pkgs, _, held = rest.partition("### held")
    first = head.strip().splitlines()[0].strip() if head.strip() else ""
    packages: dict[str, str] = {}
    for line in pkgs.splitlines():
        words = line.split()  # "ii  nvidia-open-580=580.95.05-1" (the status pads to 3)
        if len(words) == 2 and words[0] == "ii" and PIN.match(words[1]):
            pin = words[1]
            name, _, version = pin.partition("=")
            packages[name] = version
    return Before(
        first if RELEASE.match(first) else None,
        packages,
        tuple(h.strip() for h in held.split() if PKG.match(h.strip())),
    )


def read(transport: Transport) -> Before:
    return parse(transport.run(READ_SH, timeout=60).stdout)
