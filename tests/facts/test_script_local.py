"""The real facts script on this machine (LocalTransport), checked against independent sources."""

from __future__ import annotations

import glob
import hashlib
import os
import platform
import shutil
import subprocess
import sys
import textwrap
from importlib import resources
from pathlib import Path

import pytest

from gpunode.facts.gather import facts_command, gather
from gpunode.facts.model import Conda
from gpunode.facts.parse import parse_facts
from gpunode.transport.local import LocalTransport

PATTERNS = ["nvidia*", "libnvidia*", "cuda*", "libcuda*", "libcudnn*", "libnccl*"]


def test_facts_match_the_system(tmp_path: Path) -> None:
    managed = tmp_path / "managed.conf"
    managed.write_bytes(b"export PATH=/usr/local/cuda/bin:$PATH\n")
    f = gather(LocalTransport(), files=[str(managed), str(tmp_path / "nope")])
    assert f.errors == []
    assert f.boot_id == Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    assert f.kernel == os.uname().release
    assert f.hostname == platform.node()
    osr = platform.freedesktop_os_release()
    assert (f.os.id, f.os.version_id) == (osr["ID"], osr.get("VERSION_ID", ""))
    arch = subprocess.run(["dpkg", "--print-architecture"], capture_output=True, text=True)
    assert f.arch == arch.stdout.strip()
    st = os.statvfs("/")
    root_free = f.free_bytes("/")
    assert root_free is not None and abs(root_free - st.f_bavail * st.f_frsize) < 512 * 2**20
    assert f.files[str(managed)] == hashlib.sha256(managed.read_bytes()).hexdigest()
    assert f.files[str(tmp_path / "nope")] == "absent"
    st_m = managed.stat()
    attrs = f.file_attrs[str(managed)]
    assert int(attrs.mode, 8) == st_m.st_mode & 0o7777
    assert attrs.ids == f"{st_m.st_uid}:{st_m.st_gid}"
    assert str(tmp_path / "nope") not in f.file_attrs
    dirs = sorted(d for d in glob.glob("/usr/local/cuda-*") if Path(d).is_dir()
                  and d.rsplit("cuda-", 1)[1].replace(".", "").isdigit())  # fmt: skip
    assert sorted(t.path for t in f.toolkits) == dirs
    if os.path.exists("/usr/local/cuda"):
        assert f.cuda_alternative == os.path.realpath("/usr/local/cuda")
    dq = subprocess.run(["dpkg-query", "-W", "-f", "${Package}\t${Version}\t${Status}\n",
                         *PATTERNS], capture_output=True, text=True).stdout  # fmt: skip
    want = {ln.split("\t")[0]: ln.split("\t")[1] for ln in dq.splitlines()
            if ln and not ln.endswith("not-installed")}  # fmt: skip
    got = {n: p.version for n, p in f.packages.items() if n.startswith(tuple(
        p.rstrip("*") for p in PATTERNS))}  # fmt: skip
    assert got == want
    assert f.module.loaded == os.path.isdir("/sys/module/nvidia")
    assert f.smi.ok == bool(shutil.which("nvidia-smi")) or f.smi.error
    assert f.gather_seconds > 0


def test_conda_prefix_is_read_with_sh_only(tmp_path: Path) -> None:
    prefix = tmp_path / "miniconda"
    (prefix / "bin").mkdir(parents=True)
    (prefix / "bin" / "conda").write_text("#!/bin/sh\nexit 1\n")
    (prefix / "bin" / "conda").chmod(0o755)
    for env, files in {
        prefix: ["conda-24.7.1-py312h06a4308_0.json", "python-3.12.4-h5148396_1.json"],
        prefix / "envs" / "ml": ["python-3.11.9-h955ad1f_0.json"],
    }.items():
        (env / "conda-meta").mkdir(parents=True)
        for name in files:
            (env / "conda-meta" / name).write_text("{}")
    site = prefix / "envs" / "ml" / "lib" / "python3.11" / "site-packages"
    (site / "torch-2.4.1+cu124.dist-info").mkdir(parents=True)
    res = LocalTransport().run(facts_command(conda_prefixes=[str(prefix)]))
    from gpunode.facts.parse import parse_facts

    f = parse_facts(res.stdout)
    if f.conda.prefix != str(prefix):
        pytest.skip("a real conda install on this machine is reported first")
    assert f.conda.version == "24.7.1"
    assert [(e.name, e.python, e.torch) for e in f.conda.envs] == [
        ("base", "3.12.4", None),
        ("ml", "3.11.9", "2.4.1+cu124"),
    ]


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("unshare"), reason="needs root")
def test_dpkg_lock_holder_and_interrupted_state() -> None:
    """In a private mount namespace, a tmpfs over /var/lib/dpkg holds a real fcntl lock."""
    holder = textwrap.dedent("""
        import fcntl, os, sys, time
        fd = os.open("/var/lib/dpkg/lock-frontend", os.O_RDWR | os.O_CREAT)
        fcntl.lockf(fd, fcntl.LOCK_EX)
        print(os.getpid(), flush=True)
        time.sleep(30)
    """)
    inner = (
        "mount -t tmpfs none /var/lib/dpkg && mkdir /var/lib/dpkg/updates "
        "&& touch /var/lib/dpkg/updates/0001 "
        f'&& {{ {sys.executable} -c "$HOLDER" > /tmp/.gpunode-lockpid-$$ & }} '
        # the holder prints its pid once it holds the lock: wait for that, however busy
        "&& for i in $(seq 200); do [ -s /tmp/.gpunode-lockpid-$$ ] && break; sleep 0.1; done "
        f"&& echo PID=$(cat /tmp/.gpunode-lockpid-$$) && sh -s -- < {script_path()}; "
        "kill $(cat /tmp/.gpunode-lockpid-$$) 2>/dev/null; rm -f /tmp/.gpunode-lockpid-$$"
    )
    res = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c", inner],
                         capture_output=True, text=True, timeout=60,
                         env={**os.environ, "HOLDER": holder})  # fmt: skip
    pid = res.stdout.split("PID=", 1)[1].split()[0]
    from gpunode.facts.parse import parse_facts

    f = parse_facts(res.stdout)
    assert f.dpkg_lock_holder == f"pid {pid} (python3)" or f.dpkg_lock_holder == (
        f"pid {pid} ({Path(sys.executable).name[:15]})"
    )
    assert f.dpkg_interrupted
    # and outside the namespace, this machine's own dpkg is not interrupted nor locked by it
    assert not Path("/var/lib/dpkg/updates/0001").exists()


def script_path() -> str:
    return str(Path(__file__).parent.parent.parent / "gpunode" / "facts" / "script.sh")


SMI_STUB = """#!/bin/sh
echo "$*" >> "$SMI_LOG"
case "$1" in
  --query-gpu=*) printf '%s\\n' "$SMI_GPUS" ;;
  --query-compute-apps=*) printf '%s\\n' "$SMI_APPS" ;;
esac
"""
# The facts script's query fields, H200 values as the real captures give them.
H200_IDLE = "0, NVIDIA H200, GPU-4535bd70-a68d-8e9d-5e87-ae20fb0ab3da, 00000000:00:06.0, 143771, {used}, 0, 36, 83.46, 700.00, 345, Enabled, 580.159.04"  # noqa: E501


@pytest.mark.parametrize(
    ("used", "asked", "procs"),
    [
        ("0", False, []),  # idle GPUs: no compute-apps query
        ("81920", True, [(4242, "python3", 81920)]),
        ("[N/A]", True, [(4242, "python3", 81920)]),  # no figure: ask
    ],
)
def test_compute_apps_are_asked_only_when_a_gpu_has_memory_in_use(
    tmp_path: Path, used: str, asked: bool, procs: list[tuple[int, str, int]]
) -> None:
    stub = tmp_path / "bin" / "nvidia-smi"
    stub.parent.mkdir()
    stub.write_text(SMI_STUB)
    stub.chmod(0o755)
    log = tmp_path / "smi.log"
    env = {
        **os.environ,
        "PATH": f"{stub.parent}:{os.environ['PATH']}",
        "SMI_LOG": str(log),
        "SMI_GPUS": H200_IDLE.format(used=used) + "\n" + H200_IDLE.format(used="0"),
        "SMI_APPS": "4242, python3, 81920",
    }
    res = subprocess.run(["sh", "-c", facts_command()], capture_output=True, text=True, env=env)
    from gpunode.facts.parse import parse_facts

    f = parse_facts(res.stdout)
    calls = log.read_text().splitlines()
    assert [c.split()[0].split("=")[0] for c in calls if "query" in c] == (
        ["--query-gpu", "--query-compute-apps"] if asked else ["--query-gpu"]
    )
    assert len(f.smi.gpus) == 2 and f.smi.ok
    assert [(p.pid, p.name, p.memory_mib) for p in f.gpu_processes] == procs


def conda_facts(*prefixes: str) -> Conda:
    res = LocalTransport().run(facts_command((), prefixes))
    return parse_facts(res.stdout).conda


def test_a_conda_prefix_a_user_could_write_is_named_and_not_reported(tmp_path: Path) -> None:
    """Every directory of a prefix, up to /, must be root's alone: a planted conda under
    a sticky /tmp (or a user's directory) is named, never reported as conda, never run."""
    marker = tmp_path / "ran"
    planted = tmp_path / "conda"
    (planted / "bin").mkdir(parents=True)
    (planted / "conda-meta").mkdir()
    (planted / "bin" / "conda").write_text(f"#!/bin/sh\nid > {marker}\n")
    (planted / "bin" / "conda").chmod(0o755)
    os.chmod(tmp_path, 0o777)  # other-writable: the first unsafe directory, deepest first
    root_owned = "/usr/lib/no-such-conda"  # /usr and /usr/lib: root's, 0755
    conda = conda_facts(str(planted), root_owned)
    assert conda.prefix != str(planted)
    uid, mode, directory = conda.unsafe[str(planted)].split(" ", 2)
    st = tmp_path.stat()
    assert (int(uid), int(mode, 8), directory) == (st.st_uid, 0o777, str(tmp_path))
    assert root_owned not in conda.unsafe
    # a symlink is no way around it: its own directories are checked, then its target's
    os.chmod(tmp_path, 0o755)
    link = Path("/tmp") / f"gpunode-test-link-{os.getpid()}"
    link.symlink_to(planted)
    try:
        conda = conda_facts(str(link))
    finally:
        link.unlink()
    assert conda.unsafe[str(link)].endswith(" /tmp")  # /tmp itself: 1777
    assert not marker.exists()


def _hash_files(files: list[str], path: str) -> str:
    """The script's files section alone (its functions), under `path`."""
    script = resources.files("gpunode.facts").joinpath("script.sh").read_text()
    body = script[script.index("hash_one() {") : script.index("# --only-files:")]
    listed = "\n".join(files)
    argv = ["sh", "-c", f"{body}\nfiles=$1\nhash_files", "sh", listed]
    env = {**os.environ, "PATH": path}
    return subprocess.run(argv, capture_output=True, text=True, env=env).stdout


def test_managed_files_are_hashed_together_and_alone_when_sha256sum_misses_one(
    tmp_path: Path,
) -> None:
    """One sha256sum for every readable file; when it does not answer a line per file (a
    file gone between the test and the read), each file is read alone, and every file still
    gets its own digest and attributes."""
    files = []
    for i, mode in enumerate((0o644, 0o600, 0o755)):
        p = tmp_path / f"managed {i}.conf"  # a space in the name
        p.write_bytes(f"line {i}\n".encode() * (i + 1))
        p.chmod(mode)
        files.append(p)
    (tmp_path / "a-dir").mkdir()
    names = [str(p) for p in files] + [str(tmp_path / "a-dir"), str(tmp_path / "gone")]
    fake = tmp_path / "bin"
    fake.mkdir()
    real = shutil.which("sha256sum")
    (fake / "sha256sum").write_text(  # files named: one line short; stdin: as it is
        f'#!/bin/sh\n[ $# -gt 0 ] || exec {real}\n{real} "$@" | head -n -1\n'
    )
    (fake / "sha256sum").chmod(0o755)
    whole = _hash_files(names, os.environ["PATH"])
    alone = _hash_files(names, f"{fake}:{os.environ['PATH']}")
    for text in (whole, alone):
        f = parse_facts(f"### files\n{text}### end\n")
        for p in files:
            assert f.files[str(p)] == hashlib.sha256(p.read_bytes()).hexdigest(), text
            st = p.stat()
            attrs = f.file_attrs[str(p)]
            assert (int(attrs.mode, 8), attrs.ids) == (st.st_mode & 0o7777,
                                                       f"{st.st_uid}:{st.st_gid}")  # fmt: skip
        assert f.files[str(tmp_path / "gone")] == "absent"
        assert f.files[str(tmp_path / "a-dir")] == ""  # not a file: no digest, as before
    assert sorted(whole.splitlines()) == sorted(alone.splitlines())


STUBS = {
    "nvidia-smi": SMI_STUB,
    "lspci": "#!/bin/sh\necho '0000:00:06.0 3D controller [0302]: NVIDIA Corporation GH100 [H200 NVL] [10de:233b] (rev a1)'\n",  # noqa: E501
    # where its output went: a file in the script's folder, or the script's own stdout
    "dkms": '#!/bin/sh\nout=$(readlink /proc/$$/fd/1); echo "$out" >> "$DKMS_LOG"; sleep 0.2\n'
    "echo 'nvidia/580.159.04, 6.8.0-45-generic, x86_64: installed'\n",
}


def test_the_slow_questions_say_the_same_beside_the_rest_and_in_their_place(
    tmp_path: Path,
) -> None:
    """nvidia-smi, lspci, dpkg's packages, `dkms status` and the GPUs' users run at the
    script's start, into a private folder; when no folder can be made (TMPDIR unusable),
    each runs in its section's place. Both give the same sections."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, text in STUBS.items():
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    env = {
        **os.environ,
        "PATH": f"{os.environ['PATH']}:{bin_dir}",  # after the script's own PATH: stubs only
        "SMI_LOG": str(tmp_path / "smi.log"),
        "SMI_GPUS": H200_IDLE.format(used="81920"),
        "SMI_APPS": "4242, python3, 81920",
        "DKMS_LOG": str(tmp_path / "dkms.log"),
    }
    from gpunode.facts.parse import split_sections

    said = {}
    for mode, tmpdir in (("beside", str(tmp_path)), ("in place", str(tmp_path / "none"))):
        res = subprocess.run(["sh", "-c", facts_command()], capture_output=True, text=True,
                             env={**env, "TMPDIR": tmpdir}, timeout=60)  # fmt: skip
        assert res.returncode == 0, res.stderr
        said[mode] = split_sections(res.stdout)
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith("tmp.")] == []  # cleaned
    beside, in_place = said["beside"], said["in place"]
    assert beside.keys() == in_place.keys()
    assert [k for k in beside if k != "disks" and beside[k] != in_place[k]] == []
    assert beside["lspci"].startswith("0000:00:06.0 3D controller")
    assert beside["dkms"] == "nvidia/580.159.04, 6.8.0-45-generic, x86_64: installed"
    assert "app 4242, python3, 81920" in beside["gpu-procs"]
    early, late = (tmp_path / "dkms.log").read_text().splitlines()
    assert early.startswith(f"{tmp_path}/tmp.") and early.endswith("/dkms")
    assert not late.startswith(str(tmp_path))  # the script's stdout, a pipe
