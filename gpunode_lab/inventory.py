"""The inventory `gpunode lab inventory` prints: ready for `gpunode check`, plan and apply."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from gpunode_lab.state import LabConfig, LabPaths


def repo_urls(base_url: str) -> dict[str, str]:
    """Where the lab serves NVIDIA's repository and the conda and pip stand-ins."""
    try:
        from gpunode_lab import repo

        urls = getattr(repo, "repo_urls", None)
        if urls is not None:
            found: dict[str, str] = urls(base_url)
            return found
    except ImportError:
        pass
    return {
        "nvidia": base_url,
        "conda_installer": f"{base_url}/conda/Miniconda3-latest-Linux-x86_64.sh",
        "pytorch_index": f"{base_url}/pip",
        "pypi_index": f"{base_url}/pip/simple",
        "nvidia_container": f"{base_url}/libnvidia-container",
    }


def _trust(cfg: LabConfig, urls: dict[str, str]) -> list[str]:
    """The lab's own files are not NVIDIA's or Anaconda's: pin their sha256 as a mirror's
    admin would, and allow the lab's plain http (a closed network on loopback)."""
    root = Path(cfg.repo_dir)
    out = ["    insecure_http: true"]
    installer = urls["conda_installer"].removeprefix(cfg.repo_url).lstrip("/")
    if (root / installer).is_file():
        out.append(f"    conda_installer_sha256: {_q(_sha256(root / installer))}")
    fpr = root / "libnvidia-container" / "gpgkey.fingerprint"
    if fpr.is_file():
        out.append(f"    nvidia_container_key_fingerprint: {_q(fpr.read_text().strip())}")
    debs = sorted(root.glob("ubuntu*/x86_64/cuda-keyring_1.1-1_all.deb"))
    if debs:
        out.append("    cuda_keyring_sha256:")
        out += [f"      {d.parent.parent.name}: {_q(_sha256(d))}" for d in debs]
    return out


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _q(value: str) -> str:
    return json.dumps(value)  # a JSON string is a valid YAML double-quoted scalar


def render(paths: LabPaths, cfg: LabConfig, conda: bool = False) -> str:
    urls = repo_urls(cfg.repo_url)
    lines = [
        f"# gpunode lab: {cfg.hosts} simulated {cfg.gpus}x {cfg.model} host(s), "
        f"Ubuntu {cfg.ubuntu}.",
        "# `gpunode lab down` removes them; `gpunode lab status` shows them.",
        "defaults:",
        "  ssh:",
        "    user: ubuntu",
        f"    port: {cfg.port}",
        f"    identity_file: {_q(str(paths.identity))}",
        f"    known_hosts_file: {_q(str(paths.known_hosts))}",
        "    host_key_policy: strict",
        "    config_file: null",
        "  become: sudo",
    ]
    if cfg.sudo_password_env:
        lines.append(f"  become_password_env: {_q(cfg.sudo_password_env)}")
    lines += ["  repos:"]
    lines += [f"    {k}: {_q(v)}" for k, v in urls.items()]
    lines += _trust(cfg, urls)
    lines += [
        f"  gpus: {{model: {cfg.model}, count: {cfg.gpus}}}",
        "  stack:",
        '    driver: {branch: "580", flavor: open, hold: true}',
        '    cuda: {toolkits: ["13.0"], default: "13.0"}',
        '    cudnn: "9"',
        '    nccl: "2.28"',
        "    cuda_env: true",
    ]
    if conda:
        lines += [
            "    conda:",
            "      prefix: /opt/conda",
            "      tos: accept  # the lab's conda, like Miniconda's, asks for Anaconda's ToS",
            "      envs:",
            '        torch: {python: "3.11", pytorch: "2.11.0"}',
            '        tf: {python: "3.11", tensorflow: "2.19.0"}',
            "    smoke: [nvidia-smi, torch, tensorflow]",
        ]
    else:
        lines += ["    smoke: [nvidia-smi]"]
    if cfg.slurm:  # the controller is this machine: scontrol reads the lab's slurm.conf
        conf = paths.root / "slurm" / "slurm.conf"
        lines += [f"  slurm: {{controller: local, conf: {_q(str(conf))}}}"]
    lines += [
        "groups:",
        "  lab:",
        "    hosts:",
    ]
    for i, name in enumerate(cfg.names):
        lines.append(f"      {name}: {{address: {cfg.address(i)}}}")
    return "\n".join(lines) + "\n"
