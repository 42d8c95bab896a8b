"""Facts text -> HostFacts."""

from __future__ import annotations

from pathlib import Path

from gpunode.facts.model import HostFacts
from gpunode.facts.parse import parse_facts

FIX = Path(__file__).parent.parent / "fixtures" / "facts"


def test_assembled_from_the_x2_h200_capture() -> None:
    f = parse_facts((FIX / "h200x2-ubuntu2404" / "facts-assembled.txt").read_text())
    assert f.errors == []
    assert f.kernel == "6.18.44-fc-v657-gpu"
    assert f.boot_id == "493078ab-cdd6-4df8-8dc0-e1d494a87fae"
    assert f.module.loaded and f.module.version == "580.159.04" and f.module.flavor == "open"
    assert f.smi.ok and f.smi.driver_version == "580.159.04" and f.smi.cuda_version == "13.0"
    assert [g.name for g in f.smi.gpus] == ["NVIDIA H200", "NVIDIA H200"]
    assert len(f.packages) == 39
    assert f.packages["libnccl2"].version == "2.28.3-1+cuda13.0" and f.packages["libnccl2"].held
    assert not f.packages["cuda-nvcc-13-0"].held
    assert f.package("cuda-nvcc-13-0") is not None
    held = sorted(p.name for p in f.packages.values() if p.held)
    assert held == ["libcublas-13-0", "libcublas-dev-13-0", "libcudnn9-cuda-13", "libnccl-dev",
                    "libnccl2"]  # fmt: skip  # `apt-mark showhold` in the same capture
    assert f.cudnn_version == "9.14.0" and f.nccl_version == "2.28.3"
    assert f.cuda_alternative == "/usr/local/cuda-13.0"
    assert [t.version for t in f.toolkits] == ["13.0"]
    # round trip through JSON, as run records and --json do
    assert HostFacts.model_validate_json(f.model_dump_json()) == f


SYNTH = """
### os-release
NAME="Ubuntu"
VERSION_ID="22.04"
VERSION_CODENAME=jammy
ID=ubuntu
PRETTY_NAME="Ubuntu 22.04.4 LTS"
### secure-boot
mokutil: SecureBoot enabled
efi: yes
### disks
Filesystem      1-blocks       Used  Available Capacity Mounted on
/dev/sda1   100000000000 6000000000 94000000000       6% /
/dev/sdb1   200000000000 1000000000 199000000000      1% /var
### pci
0000:17:00.0 0x10de 0x2335 0x030200
0000:17:00.1 0x10de 0x22a3 0x040300
### lspci
0000:17:00.0 3D controller [0302]: NVIDIA Corporation GH100 [H200 SXM 141GB] [10de:2335] (rev a1)
### module
nouveau loaded
### proc-driver
### smi-query
NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that \
the latest NVIDIA driver is installed and running.
rc=9
### packages
cuda-keyring\t1.1-1\tinstall ok installed
nvidia-driver-550\t550.54.15-0ubuntu1\tdeinstall ok config-files
### apt-sources
==> /etc/apt/sources.list.d/cuda-ubuntu2204-x86_64.list
deb [signed-by=/usr/share/keyrings/cuda-archive-keyring.gpg] \
https://developer.download.nvidia.com/compute/cuda/repos/ubuntu2204/x86_64/ /

==> /etc/apt/sources.list.d/nvidia.sources
Types: deb
URIs: https://developer.download.nvidia.com/compute/cuda/repos/ubuntu2204/x86_64/
Suites: /
Signed-By: /usr/share/keyrings/nvidia.gpg

### keyrings
/usr/share/keyrings/cuda-archive-keyring.gpg
### conda
prefix /opt/conda
version conda-24.7.1-py312h06a4308_0.json
env /opt/conda
meta python-3.12.4-h5148396_1.json
env /opt/conda/envs/ml
meta python-3.11.9-h955ad1f_0.json
dist torch-2.4.1+cu124.dist-info
dist tensorflow-2.17.0.dist-info
prefix /opt/miniforge3
env /opt/miniforge3
### dpkg-lock
/var/lib/dpkg/lock-frontend 4242 unattended-upgr
### dpkg-audit
updates 0001
audit libcudnn9-dev-cuda-12 unpacked
audit bad;name unpacked
### files
abc123\t644\troot:root\t0:0\t/etc/profile.d/gpunode-cuda.sh
absent\t/etc/ld.so.conf.d/gpunode-cuda.conf
unreadable\t600\troot:adm\t0:4\t/etc/apt/sources.list.d/secret.list
### end
""".replace("\\\n", "").replace("\\t", "\t")


def test_synthetic_sections() -> None:
    f = parse_facts(SYNTH)
    assert f.errors == []
    assert (f.os.id, f.os.version_id, f.os.codename) == ("ubuntu", "22.04", "jammy")
    assert f.os.repo_slug == "ubuntu2204"
    assert f.secure_boot is True
    assert f.free_bytes("/var/lib/apt") == 199000000000 and f.free_bytes("/usr") == 94000000000
    assert [(g.slot, g.device_id) for g in f.pci_gpus] == [("0000:17:00.0", "2335")]
    assert "H200" in f.pci_gpus[0].description
    assert f.module.nouveau_loaded and not f.module.loaded
    assert not f.smi.ok and f.smi.error and f.smi.error.startswith("NVIDIA-SMI has failed")
    assert f.package("cuda-keyring") is not None
    assert "nvidia-driver-550" in f.packages and f.package("nvidia-driver-550") is None
    assert [(s.path.rsplit("/", 1)[1], s.signed_by) for s in f.apt_sources] == [
        ("cuda-ubuntu2204-x86_64.list", "/usr/share/keyrings/cuda-archive-keyring.gpg"),
        ("nvidia.sources", "/usr/share/keyrings/nvidia.gpg"),
    ]
    assert f.apt_sources[0].suite == "/"
    assert f.keyrings == ["/usr/share/keyrings/cuda-archive-keyring.gpg"]
    assert f.conda.prefix == "/opt/conda" and f.conda.version == "24.7.1"
    assert [(e.name, e.python, e.torch, e.tensorflow) for e in f.conda.envs] == [
        ("base", "3.12.4", None, None),
        ("ml", "3.11.9", "2.4.1+cu124", "2.17.0"),
    ]
    assert f.dpkg_lock_holder == "pid 4242 (unattended-upgr)"
    assert f.dpkg_interrupted
    assert f.dpkg_broken == {"libcudnn9-dev-cuda-12": "unpacked"}  # a name no package has: left out
    assert f.files == {"/etc/profile.d/gpunode-cuda.sh": "abc123",
                       "/etc/ld.so.conf.d/gpunode-cuda.conf": "absent",
                       "/etc/apt/sources.list.d/secret.list": "unreadable"}  # fmt: skip
    assert {p: (a.mode, a.owner, a.ids) for p, a in f.file_attrs.items()} == {
        "/etc/profile.d/gpunode-cuda.sh": ("644", "root:root", "0:0"),
        "/etc/apt/sources.list.d/secret.list": ("600", "root:adm", "0:4"),
    }


def test_secure_boot_from_efivars_and_no_efi() -> None:
    on = parse_facts("### secure-boot\nefivar:  6 0 0 0 1\nefi: yes\n### end\n")
    off = parse_facts("### secure-boot\nefivar:  6 0 0 0 0\nefi: yes\n### end\n")
    none = parse_facts("### secure-boot\nefi: no\n### end\n")
    assert (on.secure_boot, off.secure_boot, none.secure_boot) == (True, False, None)


def test_gpunode_holds_are_names_from_its_state_file() -> None:
    text = "### gpunode-holds\nnvidia-open-550\n\nlibnccl2\n-oX=1\nnvidia-open-550\n### end\n"
    assert parse_facts(text).gpunode_holds == ["libnccl2", "nvidia-open-550"]
    assert parse_facts("### gpunode-holds\n### end\n").gpunode_holds == []


def test_a_broken_section_is_an_error_not_a_crash() -> None:
    text = SYNTH.replace("/dev/sda1   100000000000", "/dev/sda1   lots")
    text = text.replace("### end\n", "")
    f = parse_facts(text)
    assert any(e.startswith("disks: ValueError") for e in f.errors)
    assert any("ended early" in e for e in f.errors)
    assert f.os.id == "ubuntu" and f.conda.prefix == "/opt/conda"  # the rest still parsed


def test_empty_output() -> None:
    f = parse_facts("")
    assert f.errors and f.smi.ok is False


def test_gpu_processes_from_compute_apps_and_device_holders() -> None:
    text = (
        "### gpu-procs\n"
        "app 4242, /usr/bin/python3, 40960\n"
        "app 4242, /usr/bin/python3, 1024\n"  # the same process on a second GPU
        "app 5000, my, odd name, [N/A]\n"
        "holder 4242 python3\n"
        "holder 77 Xorg\n"
        "holder x junk\n"
        "### end\n"
    )
    f = parse_facts(text)
    assert f.errors == []
    assert [p.shown() for p in f.gpu_processes] == [
        "pid 4242 (/usr/bin/python3, 41984 MiB)",
        "pid 5000 (my, odd name)",
        "pid 77 (Xorg)",
    ]
    assert parse_facts("### gpu-procs\n### end\n").gpu_processes == []


def test_disks_of_a_lab_host_with_a_tmpfs_on_a_toolkits_folder() -> None:
    """A real capture: `df -P -T` of every path a package writes to, one line each."""
    text = (FIX / "lab-cuda-tmpfs" / "disks.txt").read_text()
    f = parse_facts(f"### disks\n{text}### end\n")
    assert f.errors == []
    assert [(d.path, d.fstype) for d in f.disks] == [
        ("/", "overlay"),
        ("/usr/local/cuda-12.4", "tmpfs"),
    ]  # one Disk per mount, however many paths live on it
    cuda = f.disk("/usr/local/cuda-12.4/targets/x86_64-linux/lib")
    assert cuda is not None and cuda.path == "/usr/local/cuda-12.4"
    assert (cuda.total_bytes, cuda.free_bytes) == (64 << 20, 3 << 20)
    other = f.disk("/usr/local/cuda-13.0")  # not a mount: on /'s filesystem
    assert other is not None and other.path == "/"
    # df without -T (an older facts script): the same mounts, no type
    assert [(d.path, d.fstype) for d in parse_facts(SYNTH).disks] == [("/", ""), ("/var", "")]


def test_a_path_not_made_yet_is_measured_on_its_nearest_existing_parent(tmp_path: Path) -> None:
    """The script's disks section on this machine: --df of a folder that does not exist."""
    import glob
    import os
    import shlex
    import subprocess

    from gpunode.compat.paths import measured
    from gpunode.facts.gather import facts_command

    missing = tmp_path / "not" / "made" / "yet"
    command = f"{facts_command()} --df {shlex.quote(str(missing))}"
    out = subprocess.run(["sh", "-c", command], capture_output=True, text=True, timeout=120)
    mount = tmp_path
    while not os.path.ismount(mount):
        mount = mount.parent
    section = out.stdout.split("### disks\n")[1].split("\n### ")[0]
    assert section.rstrip().endswith(f" {mount}"), section  # tmp_path's filesystem, last
    # one line per path (df drops a path that does not exist): the script's own four, and
    # gpunode.compat.paths's with its glob expanded, and ours
    paths = [len(glob.glob(p)) or 1 for p in measured()]
    assert len(section.strip().splitlines()) == 1 + 4 + sum(paths) + 1, section
