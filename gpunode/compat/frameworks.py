"""The framework wheels an env asks for: torch and the torchvision/torchaudio built with it."""

from __future__ import annotations

from gpunode.compat.rules import rules, torch_companions


def torch_packages(
    torch: str, variant: str | None, vision: bool = False, audio: bool = False
) -> list[dict[str, str]]:
    """pip packages for torch and its companions, all of one CUDA variant (local label):
    torch 2.7.1 on cu128 with vision -> torch 2.7.1+cu128, torchvision 0.22.1+cu128."""
    wanted = {"torch": torch}
    companions = torch_companions(torch) or {}
    for name, asked in (("torchvision", vision), ("torchaudio", audio)):
        if asked and name in companions:
            wanted[name] = companions[name]
    label = {"local": variant} if variant else {}
    return [{"name": n, "version": v, **label} for n, v in wanted.items()]


def conda_tos_channels(channels: list[str] | None, installer_url: str) -> list[str]:
    """The channels in use that carry Anaconda's Terms of Service, as URLs: the installer's
    defaults when no channels are declared (none for Miniforge), else those declared."""
    tos = rules()["anaconda_tos"]
    defaults: list[str] = tos["defaults"]
    if channels is None:
        installer = installer_url.rsplit("/", 1)[-1]
        if any(installer.startswith(f) for f in tos["conda_forge_installers"]):
            return []
        return list(defaults)
    found: list[str] = []
    for channel in channels:
        if channel == "defaults":
            found += defaults
        elif channel.split("://", 1)[-1].split("/", 1)[0] == tos["host"]:
            found.append(channel.rstrip("/"))
    return list(dict.fromkeys(found))
