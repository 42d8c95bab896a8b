"""Repository and disk faults through `gpunode plan` and `gpunode apply` on lab hosts.

An unreachable repository, a URL with no repository, a package missing from the pool and a
bad InRelease signature each fail the host at the first step that needs the repository,
with its URL and curl's or apt's error line; what preceded it (the pinned keyring, the apt
source) stays, nothing of the failed step is in dpkg's database, `dpkg --audit` is empty.
Too little room in /var/cache/apt/archives, /boot or a toolkit's folder is refused at plan
time.

The broken repositories are copies of the lab's (hard links, the changed files rewritten)
served by a small http.server on loopback, which the lab's hosts share."""

from __future__ import annotations

import functools
import http.server
import os
import shutil
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

# by package, not `from conftest import`: another folder's conftest may hold that name
from tests.apply.labhelpers import Lab, apply, fresh, of, on_host

pytestmark = [pytest.mark.lab, pytest.mark.slow]

NO_STACK: dict[str, Any] = {
    "driver": None,
    "cuda": None,
    "cudnn": None,
    "nccl": None,
    "cuda_env": False,
    "smoke": [],
}

HOST = "lab-02"
DRIVER = {**NO_STACK, "driver": {"branch": "550", "flavor": "open"}}
DPKG = "dpkg-query -W -f='${Package} ${Version} ${db:Status-Abbrev}\\n'"


def inventory(lab: Lab, tmp: Path, nvidia: str, **stack: Any) -> Path:
    """The lab's inventory with `repos.nvidia` replaced (its sha256 pins kept)."""
    from ruamel.yaml import YAML

    yaml = YAML()
    path = lab.inventory(tmp, **stack)
    doc = yaml.load(path.read_text())
    doc["defaults"]["repos"]["nvidia"] = nvidia
    with path.open("w") as fh:
        yaml.dump(doc, fh)
    return path


def lab_repo(lab: Lab) -> tuple[str, Path]:
    """The URL and folder of the lab's own repository."""
    from ruamel.yaml import YAML

    doc = YAML().load(lab.inventory_text)
    url = str(doc["defaults"]["repos"]["nvidia"])
    # the lab serves other repositories too (Ubuntu's archive, libnvidia-container): the
    # CUDA repository is the folder of <root>/ubuntu2204/x86_64/InRelease
    for candidate in lab.dir.rglob("ubuntu2204/x86_64/InRelease"):
        return url, candidate.parent.parent.parent
    raise AssertionError("the lab has no repository")


def dpkg_state(inv: Path, host: str) -> tuple[str, str]:
    return on_host(inv, host, DPKG), on_host(inv, host, "dpkg --audit; echo rc=$?")


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[Path, Any]]:
    """A folder and a function starting an http.server for it on 127.0.0.1: -> its URL."""
    root = tmp_path / "www"
    servers: list[http.server.ThreadingHTTPServer] = []

    def start() -> str:
        handler = functools.partial(QuietHandler, directory=str(root))
        srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        threading.Thread(target=srv.serve_forever, daemon=True).start()
        servers.append(srv)
        return f"http://127.0.0.1:{srv.server_address[1]}"

    yield root, start
    for srv in servers:
        srv.shutdown()
        srv.server_close()


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


def copy_repo(lab: Lab, dest: Path) -> Path:
    """The lab's repository, hard-linked into `dest`; returns the ubuntu2204/x86_64 folder."""
    _, src = lab_repo(lab)
    shutil.copytree(src, dest, copy_function=os.link)
    return dest / "ubuntu2204" / "x86_64"


def rewrite(path: Path, data: bytes) -> None:
    """A new file in place of the hard link (the lab's repository is left alone)."""
    path.unlink()
    path.write_bytes(data)


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def run_fault(lab: Lab, inv: Path) -> tuple[int, list[dict[str, Any]], str]:
    """apply on HOST: exit code, events, the host's failure message."""
    code, evs = apply(lab, inv, "--limit", HOST, "--no-smoke")
    (done,) = of(evs, "host-finished", HOST)
    return code, evs, str(done["message"])


def failed_after_the_source(lab: Lab, inv: Path) -> tuple[str, tuple[str, str]]:
    """apply on HOST exits 2: what preceded (keyring, source) changed, then one change
    failed. The failure message, and dpkg's state from before the apply."""
    before = dpkg_state(inv, HOST)
    code, evs, message = run_fault(lab, inv)
    assert code == 2
    statuses = [e["status"] for e in of(evs, "change-finished", HOST)]
    assert statuses[-1] == "failed" and set(statuses[:-1]) == {"changed"}, statuses
    return message, before


def assert_untouched(inv: Path, before: tuple[str, str]) -> None:
    after = dpkg_state(inv, HOST)
    assert after == before
    assert after[1] == "rc=0\n", after[1]  # dpkg --audit: nothing half-installed
    assert " iU" not in after[0] and " iF" not in after[0]


def assert_nothing_of_the_driver_went_in(inv: Path, before: tuple[str, str]) -> None:
    """The keyring and the apt source (pinned, fetched by curl) preceded the step that
    failed, and the running kernel's headers may have (their own apt step, from Ubuntu's
    archive, before the driver's); nothing of the driver is in dpkg's database, nothing is
    half-installed."""
    after = dpkg_state(inv, HOST)
    new = {line.split()[0] for line in set(after[0].splitlines()) - set(before[0].splitlines())}
    assert "cuda-keyring" in new, new
    assert all(n == "cuda-keyring" or n.startswith("linux-headers-") for n in new), new
    assert set(before[0].splitlines()) <= set(after[0].splitlines())
    assert after[1] == before[1] == "rc=0\n", after[1]


def test_an_unreachable_repository_fails_the_host_naming_the_url(lab: Lab, tmp_path: Path) -> None:
    fresh(lab, HOST)
    url = f"http://127.0.0.1:{closed_port()}/cuda"
    inv = inventory(lab, tmp_path, url, **DRIVER)
    before = dpkg_state(inv, HOST)
    plan = lab.gpunode("plan", str(inv), "--limit", HOST, timeout=60)
    # the plan says so (the controller cannot read the index) and falls back to the host's apt
    assert plan.returncode == 0, plan.stdout + plan.stderr
    assert f"cannot read the repository's index ({url}/" in plan.stdout
    assert "connection refused" in plan.stdout
    code, evs, message = run_fault(lab, inv)
    assert code == 2
    # the first step that needs it, the keyring's download, fails; nothing after it runs
    assert [e["status"] for e in of(evs, "change-finished", HOST)] == ["failed"]
    assert f"(fetching {url}/ubuntu2204/x86_64/cuda-keyring_1.1-1_all.deb)" in message
    assert "curl: (7) Failed to connect to 127.0.0.1" in message, message
    assert_untouched(inv, before)


def test_a_url_with_no_repository_fails_the_host_naming_the_url(lab: Lab, tmp_path: Path) -> None:
    fresh(lab, HOST)
    base, _ = lab_repo(lab)
    url = base.rstrip("/") + "/no/repository/here"
    inv = inventory(lab, tmp_path, url, **DRIVER)
    before = dpkg_state(inv, HOST)
    code, evs, message = run_fault(lab, inv)
    assert code == 2
    assert [e["status"] for e in of(evs, "change-finished", HOST)] == ["failed"]
    assert "curl: (22) The requested URL returned error: 404 (fetching " in message, message
    assert f"{url}/ubuntu2204/x86_64/cuda-keyring_1.1-1_all.deb)" in message, message
    assert_untouched(inv, before)


def test_a_package_missing_from_the_pool_fails_the_install_cleanly(
    lab: Lab, tmp_path: Path, served: tuple[Path, Any]
) -> None:
    fresh(lab, HOST)
    root, start = served
    dists = copy_repo(lab, root)
    (gone,) = sorted(dists.glob("nvidia-open-550_550.163.01-*.deb"))
    gone.unlink()
    url = start()
    inv = inventory(lab, tmp_path, url, **DRIVER)
    message, before = failed_after_the_source(lab, inv)
    assert message.startswith("driver: NVIDIA driver 550.163.01 (open): exit 100: ")
    assert f"E: Failed to fetch {url}/ubuntu2204/x86_64/./{gone.name}  404" in message, message
    assert_nothing_of_the_driver_went_in(inv, before)
    # the release pin written for the transaction is taken back with it
    assert "restored /etc/apt/preferences.d/gpunode-nvidia-driver" in message, message
    prefs = on_host(inv, HOST, "ls -A /etc/apt/preferences.d/")
    assert "gpunode-nvidia-driver" not in prefs, prefs


def test_a_bad_inrelease_signature_fails_the_first_apt_step(
    lab: Lab, tmp_path: Path, served: tuple[Path, Any]
) -> None:
    fresh(lab, HOST)
    root, start = served
    dists = copy_repo(lab, root)
    signed = (dists / "InRelease").read_bytes()
    head, sep, rest = signed.partition(b"\nDate:")
    assert sep, "InRelease has no Date: line"
    tampered = head + b"\nDate: Thu, 01 Jan 1970 00:00:00 UTC\nX-Tampered: yes" + sep + rest
    rewrite(dists / "InRelease", tampered)
    if (dists / "Release.gpg").exists():
        rewrite(dists / "Release.gpg", b"not a signature\n")
    url = start()
    inv = inventory(lab, tmp_path, url, **DRIVER)
    message, before = failed_after_the_source(lab, inv)
    # the first step that refreshes apt's lists: the kernel headers', before the driver's
    assert message.startswith("driver: kernel headers: exit 100: "), message
    assert f"GPG error: {url}/ubuntu2204/x86_64  InRelease" in message, message
    assert "BADSIG" in message and "is not signed" in message, message
    assert_nothing_of_the_driver_went_in(inv, before)


def refused_at_plan_time(lab: Lab, inv: Path, expected: str) -> None:
    """plan and apply both refuse HOST with `expected`; apply writes nothing to it."""
    before = lab.tree(HOST)
    plan = lab.gpunode("plan", str(inv), "--limit", HOST, timeout=60)
    assert plan.returncode == 4, plan.stdout + plan.stderr
    assert f"{HOST}: refused: {expected}" in plan.stdout, plan.stdout
    code, evs, message = run_fault(lab, inv)
    assert code == 4 and of(evs, "change-started") == []
    assert expected in message, message
    assert lab.tree(HOST) == before  # nothing was written


def test_a_full_apt_archives_refuses_a_package_change_at_plan_time(
    lab: Lab, tmp_path: Path
) -> None:
    fresh(lab, HOST)
    inv = lab.inventory(tmp_path, **DRIVER)
    assert lab.gpunode("lab", "fault", HOST, "disk-full").returncode == 0
    try:
        # the index's sizes of the driver's .debs, summed with what apt takes with them
        refused_at_plan_time(
            lab, inv, "too little disk on /var/cache/apt/archives (a tmpfs of 8 MiB): 0 MiB "
            "free, ",
        )  # fmt: skip
    finally:
        assert lab.gpunode("lab", "fault", HOST, "disk-full", "--off").returncode == 0
    # with room again, the same inventory plans the driver
    plan = lab.gpunode("plan", str(inv), "--limit", HOST, timeout=60)
    assert plan.returncode == 0 and "refused" not in plan.stdout, plan.stdout


def test_a_full_boot_refuses_a_driver_change_at_plan_time(lab: Lab, tmp_path: Path) -> None:
    fresh(lab, HOST)
    inv = lab.inventory(tmp_path, **DRIVER)
    on_host(inv, HOST, "sudo mount -t tmpfs -o size=40m gpunode-test-boot /boot")
    try:
        refused_at_plan_time(
            lab, inv, "too little disk on /boot (a tmpfs of 40 MiB): 40 MiB free, 100 MiB "
            "needed by nvidia-open-550=550.163.01-*: free space or mount a larger filesystem",
        )  # fmt: skip
        # a change with no driver in it (a toolkit alone) does not need /boot
        toolkit = lab.inventory(
            tmp_path / "toolkit", **{**NO_STACK, "cuda": {"toolkits": ["12.4"]}}
        )
        plan = lab.gpunode("plan", str(toolkit), "--limit", HOST, timeout=60)
        assert plan.returncode == 0 and "refused" not in plan.stdout, plan.stdout
    finally:
        on_host(inv, HOST, "sudo umount /boot")


def test_a_small_filesystem_on_the_toolkits_folder_refuses_it_at_plan_time(
    lab: Lab, tmp_path: Path
) -> None:
    """The measured failure: a full filesystem mounted on /usr/local/cuda-X.Y left dpkg
    half-done; its free space is now measured and counted against the toolkit's packages."""
    fresh(lab, HOST)
    inv = lab.inventory(tmp_path, **{**NO_STACK, "cuda": {"toolkits": ["12.4"]}})
    folder = "/usr/local/cuda-12.4"
    on_host(inv, HOST, f"sudo mkdir -p {folder} && sudo mount -t tmpfs -o size=1m cuda {folder}")
    try:
        refused_at_plan_time(
            lab, inv, f"too little disk on {folder} (a tmpfs of 1 MiB): 1 MiB free, ",
        )  # fmt: skip
        plan = lab.gpunode("plan", str(inv), "--limit", HOST, timeout=60)
        needed = "MiB needed by cuda-toolkit-12-4=12.4.1-1: free space or mount a larger filesystem"
        assert needed in plan.stdout, plan.stdout
        assert on_host(inv, HOST, f"ls -A {folder}").strip() == ""  # dpkg wrote nothing there
    finally:
        on_host(inv, HOST, f"sudo umount {folder}")
    # unmounted, the folder lives on /usr/local's filesystem again: the toolkit plans
    plan = lab.gpunode("plan", str(inv), "--limit", HOST, timeout=60)
    assert plan.returncode == 0 and "refused" not in plan.stdout, plan.stdout


def gpg(home: Path, *args: str, at: int | None = None) -> bytes:
    """gpg in a private home; `at` fakes the clock (epoch seconds) for keys and signatures."""
    import subprocess

    clock = ["--faked-system-time", f"{at}!"] if at is not None else []
    cmd = ["gpg", "--homedir", str(home), "--batch", "--quiet", "--pinentry-mode", "loopback",
           "--passphrase", "", *clock, *args]  # fmt: skip
    return subprocess.run(cmd, capture_output=True, check=True).stdout


@pytest.fixture
def gpg_home(tmp_path: Path) -> Iterator[Path]:
    """A private gpg home; the gpg-agent that signing starts there is stopped afterwards."""
    import subprocess

    home = tmp_path / "gnupg"
    home.mkdir(mode=0o700)
    yield home
    subprocess.run(["gpgconf", "--homedir", str(home), "--kill", "all"], capture_output=True)


def signing_key(home: Path, expires: str = "never", at: int | None = None) -> tuple[Path, str]:
    """A new RSA signing key in the gpg home `home`: (home, long key id)."""
    gpg(home, "--quick-gen-key", "mirror operator <mirror@example.invalid>", "rsa2048", "sign",
        expires, at=at)  # fmt: skip
    listing = gpg(home, "--with-colons", "--list-keys").decode()
    keyid = next(f.split(":")[4] for f in listing.splitlines() if f.startswith("pub:"))
    return home, keyid


def resign(dists: Path, home: Path, at: int | None = None) -> None:
    """InRelease and Release.gpg of the copy signed again with the key in `home`."""
    for name in ("InRelease", "Release.gpg"):
        (dists / name).unlink(missing_ok=True)
    release = str(dists / "Release")
    gpg(home, "--clearsign", "-o", str(dists / "InRelease"), release, at=at)
    gpg(home, "--armor", "--detach-sign", "-o", str(dists / "Release.gpg"), release, at=at)


def assert_refused_index(message: str, url: str, word: str, keyid: str) -> None:
    # the first step that refreshes apt's lists fails with apt's line and gpunode's hint
    assert message.startswith("driver: kernel headers: exit 100: "), message
    assert f"{url}/ubuntu2204/x86_64" in message and "is not signed" in message, message
    assert f"{word} {keyid}" in message, message


def test_a_repository_signed_by_another_key_fails_naming_the_key(
    lab: Lab, tmp_path: Path, served: tuple[Path, Any], gpg_home: Path
) -> None:
    # a mirror re-signed with its operator's own key, or the vendor's key rotated
    fresh(lab, HOST)
    root, start = served
    dists = copy_repo(lab, root)
    home, keyid = signing_key(gpg_home)
    resign(dists, home)
    url = start()
    inv = inventory(lab, tmp_path, url, **DRIVER)
    message, before = failed_after_the_source(lab, inv)
    assert_refused_index(message, url, "NO_PUBKEY", keyid)
    assert "which the host's keyring does not hold" in message, message
    assert_nothing_of_the_driver_went_in(inv, before)


def test_a_repository_whose_key_expired_fails_naming_the_key(
    lab: Lab, tmp_path: Path, served: tuple[Path, Any], gpg_home: Path
) -> None:
    # the host trusts the key (its keyring package holds it), but the key expired: a
    # signature made while it was valid no longer verifies
    import hashlib
    import time

    from ruamel.yaml import YAML

    from gpunode_lab.repo.catalog import keyring_package
    from gpunode_lab.repo.deb import deb_bytes

    fresh(lab, HOST)
    root, start = served
    dists = copy_repo(lab, root)
    then = int(time.time()) - 30 * 86400
    home, keyid = signing_key(gpg_home, expires="1d", at=then)
    resign(dists, home, at=then + 3600)
    url = start()
    public = gpg(home, "--export")
    deb = deb_bytes(keyring_package("ubuntu2204", url, public))
    rewrite(dists / "cuda-keyring_1.1-1_all.deb", deb)
    inv = inventory(lab, tmp_path, url, **DRIVER)
    yaml = YAML()
    doc = yaml.load(inv.read_text())
    doc["defaults"]["repos"]["cuda_keyring_sha256"]["ubuntu2204"] = hashlib.sha256(deb).hexdigest()
    with inv.open("w") as fh:
        yaml.dump(doc, fh)
    message, before = failed_after_the_source(lab, inv)
    # the pinned keyring with the expired key went in; the index it should verify did not
    assert (
        on_host(inv, HOST, "sha256sum /usr/share/keyrings/cuda-archive-keyring.gpg").split()[0]
        == hashlib.sha256(public).hexdigest()
    )
    assert_refused_index(message, url, "EXPKEYSIG", keyid)
    assert "has expired" in message, message
    assert_nothing_of_the_driver_went_in(inv, before)
