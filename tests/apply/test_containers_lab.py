"""The container_toolkit role through `gpunode plan`/`apply` on lab hosts with a docker
stand-in: the lab's libnvidia-container repository (its own key, several releases), the
stand-in nvidia-ctk writing docker's daemon.json and the CDI spec from the lab's GPUs.

Every assertion reads the host: dpkg's database and holds, the files nvidia-ctk wrote, the
restarts the host's systemctl counted, and the smoke test's result.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.apply.labhelpers import Lab, apply, fresh, of, on_host, packages

pytestmark = [pytest.mark.lab, pytest.mark.slow]

HOST = "lab-02"
IMAGE = "nvidia/cuda:12.8.1-base-ubuntu22.04"
TOOLKIT = ("nvidia-container-toolkit", "nvidia-container-toolkit-base",
           "libnvidia-container-tools", "libnvidia-container1")  # fmt: skip
CDI = "/etc/cdi/nvidia.yaml"
RESTARTS = "/var/lib/gpunode-lab/restarts/docker"


def stack(driver: dict[str, str], **containers: Any) -> dict[str, Any]:
    return {
        "driver": {**driver, "flavor": "open"},
        "cuda": None,
        "cudnn": None,
        "nccl": None,
        "cuda_env": False,
        "smoke": ["containers"],
        "containers": {"runtime": "docker", **containers},
    }


def restarts(inv: Path) -> int:
    return len(on_host(inv, HOST, f"cat {RESTARTS} 2>/dev/null || true").split())


def results(doc: Any) -> list[dict[str, Any]]:
    """Every smoke result (a mapping with a name and a status) anywhere in `doc`."""
    if isinstance(doc, list):
        return [r for d in doc for r in results(d)]
    if not isinstance(doc, dict):
        return []
    here = [doc] if {"name", "status"} <= set(doc) else []
    return here + [r for v in doc.values() for r in results(v)]


def changed(evs: list[dict[str, Any]]) -> list[str]:
    return [e["title"] for e in of(evs, "change-started", HOST)]


def test_toolkit_converges_and_follows_the_driver(lab: Lab, tmp_path: Path) -> None:
    fresh(lab, HOST)
    older = lab.gpunode(
        "lab", "install", HOST, "nvidia-open-550=550.127.05-1",
        "libnvidia-compute-550=550.127.05-0ubuntu1", "--reboot",
    )  # fmt: skip
    assert older.returncode == 0, older.stderr
    knob = lab.gpunode("lab", "fault", HOST, "container-runtime", f"docker:{IMAGE}")
    assert knob.returncode == 0, knob.stderr
    inv = lab.inventory(tmp_path / "a", **stack({"branch": "550"}, version="1.17.8-1", image=IMAGE))

    # plan reads, and writes nothing
    before = lab.tree(HOST)
    planned = lab.gpunode("plan", str(inv), "--limit", HOST)
    assert planned.returncode in (0, 2), planned.stderr
    assert "nvidia-container-toolkit" in planned.stdout
    assert lab.tree(HOST) == before

    code, evs = apply(lab, inv, "--limit", HOST)
    assert code == 0, [(e["host"], e["message"]) for e in of(evs, "host-finished")]

    pk = packages(inv, HOST)
    assert {p: pk.get(p) for p in TOOLKIT} == {p: ("1.17.8-1", True) for p in TOOLKIT}
    daemon = json.loads(on_host(inv, HOST, "cat /etc/docker/daemon.json"))
    assert daemon == {"runtimes": {"nvidia": {"args": [], "path": "nvidia-container-runtime"}}}
    spec = on_host(inv, HOST, f"cat {CDI}")
    assert "libcuda.so.550.127.05" in spec and 'name: "0"' in spec and 'name: "1"' in spec
    assert "name: all" in spec
    assert restarts(inv) == 1
    # the key apt trusts is the lab repository's, dearmoured
    kr = "/usr/share/keyrings/nvidia-container-toolkit-keyring.gpg"
    assert on_host(inv, HOST, f"head -c 1 {kr} | od -An -tx1").strip() in ("99", "98")
    smoke = {e["result"]["name"]: e["result"] for e in of(evs, "smoke-result", HOST)}
    assert smoke.get("containers/run", {}).get("status") == "pass", smoke
    assert smoke["containers/run"]["value"] == 2

    # again: nothing to change, no restart
    code, evs = apply(lab, inv, "--limit", HOST)
    assert code == 0 and changed(evs) == [], changed(evs)
    assert restarts(inv) == 1

    # another driver: the CDI spec is written again for it; docker is left alone
    inv = lab.inventory(
        tmp_path / "b", **stack({"version": "550.163.01"}, version="1.17.8-1", image=IMAGE)
    )
    code, evs = apply(lab, inv, "--limit", HOST)
    assert code == 0, [(e["host"], e["message"]) for e in of(evs, "host-finished")]
    spec = on_host(inv, HOST, f"cat {CDI}")
    assert "libcuda.so.550.163.01" in spec and "550.127.05" not in spec
    assert "container_toolkit: CDI spec for the GPUs" in changed(evs)
    assert restarts(inv) == 1

    # without an image the smoke test reads the CDI spec's devices
    inv = lab.inventory(tmp_path / "c", **stack({"version": "550.163.01"}, version="1.17.8-1"))
    res = lab.gpunode("smoke", str(inv), "--limit", HOST, "--json")
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    cdi = [r for r in results(json.loads(res.stdout)) if r.get("name") == "containers/cdi"]
    assert [r["status"] for r in cdi] == ["pass"], res.stdout[-2000:]
    assert cdi[0]["value"] == 5  # nvidia.com/gpu=0, =1, each GPU's UUID, =all


def test_update_latest_moves_the_toolkit(lab: Lab, tmp_path: Path) -> None:
    """`update: latest` installs the newest release the repository has, all four packages
    at its version; a series keeps an installed release of it."""
    fresh(lab, HOST)
    assert lab.gpunode("lab", "fault", HOST, "container-runtime", "docker").returncode == 0
    inv = lab.inventory(tmp_path / "a", **stack({"branch": "550"}, version="1.17"))
    code, evs = apply(lab, inv, "--limit", HOST)
    assert code == 0, [(e["host"], e["message"]) for e in of(evs, "host-finished")]
    assert {packages(inv, HOST)[p][0] for p in TOOLKIT} == {"1.17.8-1"}

    inv = lab.inventory(tmp_path / "b", **stack({"branch": "550"}, update="latest"))
    code, evs = apply(lab, inv, "--limit", HOST)
    assert code == 0, [(e["host"], e["message"]) for e in of(evs, "host-finished")]
    assert {packages(inv, HOST)[p] for p in TOOLKIT} == {("1.18.1-1", True)}
    assert restarts(inv) == 1


def test_containerd_gets_the_runtime_and_one_restart(lab: Lab, tmp_path: Path) -> None:
    """The newest release (1.18) writes containerd's drop-in file and has the main
    configuration import it; containerd is restarted once, and not again."""
    fresh(lab, HOST)
    assert lab.gpunode("lab", "fault", HOST, "container-runtime", "containerd").returncode == 0
    inv = lab.inventory(tmp_path, **{**stack({"branch": "550"}), "containers": {
        "runtime": ["docker", "containerd"], "cdi": False}, "smoke": []})  # fmt: skip
    code, evs = apply(lab, inv, "--limit", HOST)
    assert code == 0, [(e["host"], e["message"]) for e in of(evs, "host-finished")]
    drop_in = on_host(inv, HOST, "cat /etc/containerd/conf.d/99-nvidia.toml")
    assert 'BinaryName = "/usr/bin/nvidia-container-runtime"' in drop_in
    main = on_host(inv, HOST, "cat /etc/containerd/config.toml")
    assert 'imports = ["/etc/containerd/conf.d/*.toml"]' in main
    count = "cat /var/lib/gpunode-lab/restarts/containerd"
    assert on_host(inv, HOST, count).split() == ["restart"]
    # docker is not on this host: nothing written for it, and no CDI spec (cdi: false)
    assert on_host(inv, HOST, "test -e /etc/docker/daemon.json && echo y || echo n") == "n\n"
    assert "nvidia.yaml" not in on_host(inv, HOST, "ls /etc/cdi 2>/dev/null || true")
    code, evs = apply(lab, inv, "--limit", HOST)
    assert code == 0 and changed(evs) == []
    assert on_host(inv, HOST, count).split() == ["restart"]


def test_a_key_with_another_fingerprint_is_never_installed(lab: Lab, tmp_path: Path) -> None:
    """The repository serves a key whose fingerprint is not the pinned one (a mirror that
    was tampered with): the step fails, and neither the keyring, the sources file nor any
    toolkit package is on the host."""
    fresh(lab, HOST)
    inv = lab.inventory(tmp_path, **stack({"branch": "550"}))
    text = inv.read_text()
    pinned = text.split("nvidia_container_key_fingerprint: ")[1].split()[0].strip('"')
    other = ("0" if pinned[0] != "0" else "1") + pinned[1:]
    inv.write_text(text.replace(pinned, other))
    code, evs = apply(lab, inv, "--limit", HOST)
    assert code != 0
    failed = [e for e in of(evs, "change-finished", HOST) if e["status"] == "failed"]
    assert "is not the pinned" in failed[0]["message"], failed
    listing = on_host(inv, HOST, "ls /usr/share/keyrings /etc/apt/sources.list.d")
    assert "nvidia-container-toolkit" not in listing
    assert not {p for p in packages(inv, HOST) if "container" in p}


def test_a_containers_only_host_without_nvidias_repository_reads_the_hosts_apt(
    lab: Lab, tmp_path: Path
) -> None:
    """repos.nvidia: null, the container toolkit alone, and a controller that cannot read
    the libnvidia-container index (its proxy refuses): the host's apt says which releases
    the repository offers, as it does for NVIDIA's; the newest is planned and installed."""
    from ruamel.yaml import YAML

    fresh(lab, HOST)
    inv = lab.inventory(tmp_path, **{**stack({"branch": "550"}), "driver": None, "smoke": []})
    yaml = YAML()
    doc = yaml.load(inv.read_text())
    doc["defaults"]["repos"]["nvidia"] = None
    with inv.open("w") as fh:
        yaml.dump(doc, fh)
    env = {**lab.env, "http_proxy": "http://127.0.0.1:9", "GPUNODE_CACHE_DIR": str(tmp_path)}
    # the repository alone first: a plan can then ask the host's apt what it offers
    res = lab.gpunode("apply", str(inv), "--limit", HOST, "--yes", "--tags", "container_repo",
                      env=env)  # fmt: skip
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-2000:]
    listing = on_host(inv, HOST, "ls /etc/apt/sources.list.d")
    assert "nvidia-container-toolkit.list" in listing and "cuda" not in listing
    assert not {p for p in packages(inv, HOST) if "container" in p}
    planned = lab.gpunode("plan", str(inv), "--limit", HOST, env=env)
    assert planned.returncode in (0, 2), planned.stdout + planned.stderr
    # the newest release the lab's repository has, as the host's apt-cache madison said
    assert "NVIDIA container toolkit 1.18.1-1" in planned.stdout, planned.stdout
    assert "nvidia-container-toolkit=1.18.1-1" in planned.stdout
    assert "(read by the host's apt, apt-cache madison)" in planned.stdout
    res = lab.gpunode("apply", str(inv), "--limit", HOST, "--yes", env=env)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-2000:]
    pk = packages(inv, HOST)
    assert {p: pk.get(p) for p in TOOLKIT} == {p: ("1.18.1-1", True) for p in TOOLKIT}
    # converged: the plan changes nothing
    again = lab.gpunode("plan", str(inv), "--limit", HOST, "--detailed-exitcode", env=env)
    assert again.returncode == 0, again.stdout + again.stderr
