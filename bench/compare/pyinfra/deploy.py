"""The lab's GPU stack as a pyinfra deploy: the same end state as `gpunode apply`.

Run by bench/compare/run.py as `pyinfra INVENTORY deploy.py`, with the stack (derived
from the inventory by bench/compare/stack.py) in the JSON file named by
GPUNODE_BENCH_STACK. Facts are only those the operations need; the two guards below
(held packages, the cuda alternative) are one command fact each.
"""

import json
import os
import time
from io import StringIO
from pathlib import Path

from pyinfra import host
from pyinfra.facts.server import Command
from pyinfra.operations import apt, files, python, server

BOOT_ID = "cat /proc/sys/kernel/random/boot_id"


def reboot_and_wait(state, host, timeout=300):
    """server.reboot waits for /proc/uptime to drop, which a lab host (a namespace on a
    running machine) never shows: wait for a new boot_id instead, as Ansible's reboot does."""
    _, out = host.run_shell_command(BOOT_ID)
    before = out.stdout.strip()
    host.run_shell_command("( sleep 1 && reboot ) </dev/null >/dev/null 2>&1 &", _sudo=True)
    host.disconnect()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        time.sleep(1)
        try:
            host.connect(show_errors=False)
            if host.connected:
                ok, out = host.run_shell_command(BOOT_ID)
                if ok and out.stdout.strip() not in ("", before):
                    return
        except Exception:  # the old boot's sshd going down under us: try again
            pass
        host.disconnect()
    raise RuntimeError(f"{host.name} did not come back with a new boot_id in {timeout}s")


stack = json.loads(Path(os.environ["GPUNODE_BENCH_STACK"]).read_text())
templates = Path(__file__).resolve().parent.parent / "templates"
SUDO = {"_sudo": True}

keyring = apt.deb(name="NVIDIA keyring package", src=stack["keyring_deb"], **SUDO)
repo = files.put(
    name="NVIDIA CUDA repository, signed by its keyring",
    src=StringIO(stack["sources_line"]),
    dest=stack["sources_path"],
    mode="644",
    **SUDO,
)
apt.update(
    name="Refresh apt after a repository change",
    _if=lambda: keyring.did_change() or repo.did_change(),
    **SUDO,
)
blacklist = files.put(
    name="Blacklist nouveau",
    src=StringIO(stack["blacklist"]),
    dest=stack["blacklist_path"],
    mode="644",
    **SUDO,
)
server.shell(
    name="Rebuild the initramfs",
    commands=["if command -v update-initramfs >/dev/null 2>&1; then update-initramfs -u; fi"],
    _if=blacklist.did_change,
    **SUDO,
)
kernel = host.get_fact(Command, "uname -r")
apt.packages(
    name="The running kernel's headers, which DKMS builds the driver's module against",
    packages=[f"linux-headers-{kernel}"],
    no_recommends=True,
    **SUDO,
)
driver = apt.packages(
    name="NVIDIA driver, exact release",
    packages=stack["driver"],
    no_recommends=True,
    extra_install_args="--allow-downgrades --allow-change-held-packages",
    **SUDO,
)
apt.packages(name="CUDA toolkits", packages=stack["toolkits"], no_recommends=True, **SUDO)

alternative = host.get_fact(Command, "readlink /etc/alternatives/cuda || true")
if alternative != stack["cuda_default"]:
    server.shell(
        name="Default CUDA toolkit",
        commands=[
            f"update-alternatives --install /usr/local/cuda cuda {stack['cuda_default']}"
            f" {stack['cuda_priority']}",
            f"update-alternatives --set cuda {stack['cuda_default']}",
        ],
        **SUDO,
    )

apt.packages(
    name="cuDNN and NCCL, exact builds",
    packages=stack["cudnn"] + stack["nccl"],
    no_recommends=True,
    extra_install_args="--allow-downgrades --allow-change-held-packages",
    **SUDO,
)

held = set((host.get_fact(Command, "apt-mark showhold") or "").split())
unheld = [name for name in stack["hold"] if name not in held]
if unheld:
    server.shell(
        name="Hold the pinned packages", commands=["apt-mark hold " + " ".join(unheld)], **SUDO
    )

files.template(
    name="CUDA for login shells",
    src=str(templates / "gpunode-cuda.sh.j2"),
    dest=stack["env_path"],
    mode="644",
    cuda_home=stack["cuda_home"],
    **SUDO,
)
ldconf = files.template(
    name="CUDA libraries for the dynamic linker",
    src=str(templates / "gpunode-cuda.conf.j2"),
    dest=stack["ldconf_path"],
    mode="644",
    cuda_home=stack["cuda_home"],
    **SUDO,
)
server.shell(name="Run ldconfig", commands=["ldconfig"], _if=ldconf.did_change, **SUDO)
python.call(
    name="Reboot into the new driver",
    function=reboot_and_wait,
    _if=driver.did_change,
)
