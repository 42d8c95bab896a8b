"""sudo with a password through `gpunode apply` on lab hosts: a password full of shell
characters works and is never written down or shown, a wrong one fails in seconds, and
`Defaults requiretty` gets sudo a terminal, and sudo-rs's prompt and refusals are understood.

The lab is started with `--sudo-password-env`: its hosts' sudo asks for the password."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

# by package, not `from conftest import`: another folder's conftest may hold that name
from tests.apply.labhelpers import Lab, events, of, on_host, start_lab, wait_for_ssh
from tests.conftest import SLOT, slot_net

pytestmark = [pytest.mark.lab, pytest.mark.slow]

NO_STACK: dict[str, Any] = {
    "driver": None,
    "cuda": None,
    "cudnn": None,
    "nccl": None,
    "cuda_env": False,
    "smoke": [],
}
ENV = "GPUNODE_TEST_SUDO_PW"
PASSWORD = "p' \"q$HOME;r\\s t"  # ' " $ ; \ and a space
HOST = "lab-01"
STACK: dict[str, Any] = {**NO_STACK, "cuda_env": True}  # root-owned files: sudo, no apt


@pytest.fixture(scope="module")
def pwlab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    old = os.environ.get(ENV)
    os.environ[ENV] = PASSWORD
    try:
        args = ("--hosts", "1", "--ubuntu", "22.04", "--net", str(slot_net(235)),
                "--port", str(2235 + 1000 * SLOT), "--sudo-password-env", ENV)  # fmt: skip
        yield from start_lab(tmp_path_factory, *args)
    finally:
        if old is None:
            os.environ.pop(ENV, None)
        else:
            os.environ[ENV] = old


def as_root(inv: Path, command: str, stdin: bytes | None = None) -> str:
    from gpunode.inventory import load
    from gpunode.transport.connect import open_transport
    from gpunode.transport.secret import Secret

    t = open_transport(load(inv).hosts[HOST], become_password=Secret(PASSWORD))
    t.connect()
    try:
        res = t.run(command, sudo=True, stdin=stdin)
    finally:
        t.close()
    assert res.ok, res.stderr
    return res.stdout


def reset(lab: Lab) -> None:
    assert lab.gpunode("lab", "reset", HOST).returncode == 0
    wait_for_ssh(lab, HOST)


def cmdlines() -> Iterator[bytes]:
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as fh:
                    yield fh.read()
            except OSError:
                continue


def test_a_password_with_shell_characters_works_and_is_never_written_or_shown(
    pwlab: Lab, tmp_path: Path
) -> None:
    reset(pwlab)
    inv = pwlab.inventory(tmp_path, **STACK)
    proc = subprocess.Popen(
        [sys.executable, "-m", "gpunode", "apply", str(inv), "--yes", "--json", "--no-smoke"],
        env=pwlab.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    secret = PASSWORD.encode()
    seen = 0
    deadline = time.monotonic() + 60
    while proc.poll() is None:  # the process list, for as long as apply runs
        assert time.monotonic() < deadline, "apply did not finish in 60 s"
        for cmd in cmdlines():
            assert secret not in cmd and secret not in cmd.replace(b"\0", b" ")
            seen += 1
    out, err = proc.communicate(timeout=30)
    assert seen, "the process list was never read while apply ran"
    assert proc.returncode == 0, out.decode()[-2000:] + err.decode()[-2000:]
    evs = events(out.decode())
    assert [e["status"] for e in of(evs, "change-finished", HOST)] and all(
        e["status"] == "changed" for e in of(evs, "change-finished", HOST)
    )
    assert "export CUDA_HOME=/usr/local/cuda" in as_root(inv, "cat /etc/profile.d/gpunode-cuda.sh")
    assert secret not in out and secret not in err
    state = Path(pwlab.env["GPUNODE_STATE_DIR"])
    records = [p for p in state.rglob("*") if p.is_file()]
    assert records, "apply wrote no run record"
    for path in records:
        assert secret not in path.read_bytes(), f"the password is in {path}"


def test_a_wrong_password_fails_within_seconds(pwlab: Lab, tmp_path: Path) -> None:
    inv = pwlab.inventory(tmp_path, **STACK)
    as_root(inv, "rm -f /etc/profile.d/gpunode-cuda.sh")  # something to change
    env = {**pwlab.env, ENV: "not the password"}
    start = time.monotonic()
    res = pwlab.gpunode("apply", str(inv), "--yes", "--json", "--no-smoke", env=env, timeout=60)
    took = time.monotonic() - start
    assert res.returncode == 2, res.stdout[-2000:] + res.stderr[-2000:]
    (done,) = of(events(res.stdout), "host-finished", HOST)
    assert done["message"] == f"sudo: incorrect password for ubuntu@{HOST}", done
    assert took < 15, f"a wrong password took {took:.1f} s"
    assert of(events(res.stdout), "change-finished", HOST) == [] or all(
        e["status"] != "changed" for e in of(events(res.stdout), "change-finished", HOST)
    )
    assert b"not the password" not in res.stdout.encode() + res.stderr.encode()


def inventory_with(lab: Lab, tmp: Path, ssh: dict[str, Any] | None = None, **settings: Any) -> Path:
    """The lab's inventory (STACK) with more `defaults` keys (and `ssh` keys) set."""
    from ruamel.yaml import YAML

    inv = lab.inventory(tmp, ssh, **STACK)
    yaml = YAML()
    doc = yaml.load(inv.read_text())
    doc["defaults"].update(settings)
    with inv.open("w") as fh:
        yaml.dump(doc, fh)
    return inv


def assert_secret_kept(lab: Lab, out: str, err: str, password: str = PASSWORD) -> None:
    """The password is in no output, no JSON event and no file under the state dir."""
    secret = password.encode()
    assert secret not in out.encode() and secret not in err.encode()
    records = [p for p in Path(lab.env["GPUNODE_STATE_DIR"]).rglob("*") if p.is_file()]
    assert records, "apply wrote no run record"
    for path in records:
        assert secret not in path.read_bytes(), f"the password is in {path}"


PROFILE = "/etc/profile.d/gpunode-cuda.sh"


@pytest.mark.parametrize("transport", ["paramiko", "openssh"])
@pytest.mark.parametrize("how", ["detected", "become_pty"])
def test_requiretty_runs_sudo_on_a_terminal_without_echoing_the_password(
    pwlab: Lab, tmp_path: Path, how: str, transport: str
) -> None:
    """paramiko asks for a pty; OpenSSH's `ssh -tt` rides the ControlMaster, which hands the
    terminal zeroed modes (raw: no ^D) that the command sets right before sudo starts."""
    pty = {"become_pty": True} if how == "become_pty" else {}
    inv = inventory_with(pwlab, tmp_path, ssh={"transport": transport}, **pty)
    as_root(inv, "printf 'profile\\n' > " + PROFILE)  # a file to be rewritten whole
    want = pwlab.upper(HOST) / PROFILE.lstrip("/")
    as_root(inv, "printf 'Defaults requiretty\\n' > /etc/sudoers.d/zz-requiretty")
    try:
        # sudo itself refuses without a terminal now (the test's own check of the variant)
        plain = on_host(inv, HOST, "sudo -n true 2>&1 || true")
        assert "you must have a tty to run sudo" in plain, plain
        start = time.monotonic()
        res = pwlab.gpunode("apply", str(inv), "--yes", "--json", "--no-smoke", timeout=90)
        took = time.monotonic() - start
        assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
        evs = events(res.stdout)
        (done,) = of(evs, "host-finished", HOST)
        assert done["status"] == "changed" and took < 60, (done, took)
        statuses = [e["status"] for e in of(evs, "change-finished", HOST)]
        assert statuses and set(statuses) == {"changed"}, of(evs, "change-finished", HOST)
        # written through the terminal (content on stdin, base64 then ^D): whole, no \r
        text = want.read_text()
        assert "export CUDA_HOME=/usr/local/cuda" in text and "\r" not in text, text
        assert oct(want.stat().st_mode & 0o777) == "0o644"
        assert_secret_kept(pwlab, res.stdout, res.stderr)
        # any bytes reach a sudo'ed command's stdin intact through the terminal, and its
        # end: ^C, ^D, ^U, DEL, \r, lines past the terminal's 4095, no final newline
        blob = bytes(range(256)) * 64 + b"x" * 9000 + b"\x04\x03 end"
        got = as_root(inv, "sha256sum", stdin=blob)
        assert got.split()[0] == hashlib.sha256(blob).hexdigest()
        # the next apply, on a terminal too, finds nothing to do
        res = pwlab.gpunode("apply", str(inv), "--yes", "--json", "--no-smoke", timeout=90)
        assert res.returncode == 0 and of(events(res.stdout), "change-started") == [], res.stdout
    finally:
        reset(pwlab)


# sudo as sudo-rs 0.2 speaks it: its prompt "[sudo: X] Password: " (X is -p's text from
# 0.2.5 on; before, always "authenticate") and its refusals, over the real sudo (which
# does the work: sudo-rs is not packaged for the machine the lab hosts are made from).
SUDO_RS = r"""#!/usr/bin/python3
import os, subprocess, sys
HONOURS_P = %(honours)s
REAL = "/usr/bin/sudo"
args, flags, prompt, rest = sys.argv[1:], [], None, []
i = 0
while i < len(args):
    if args[i] == "--":
        rest = args[i + 1:]
        break
    if args[i] == "-p":
        prompt, i = args[i + 1], i + 2
        continue
    if not args[i].startswith("-"):
        rest = args[i:]
        break
    flags.append(args[i])
    i += 1
with open("/tmp/sudo-rs-standin.log", "a") as fh:
    fh.write(" ".join(flags) + "\n")
if "-n" in flags:
    if subprocess.run([REAL, "-n", "-k", "true"], capture_output=True).returncode:
        sys.exit(print("sudo: interactive authentication is required", file=sys.stderr) or 1)
    os.execv(REAL, [REAL, *flags, "--", *rest])
label = prompt if HONOURS_P and prompt else "authenticate"
for _ in range(3):
    sys.stderr.write("[sudo: %%s] Password: " %% label)
    sys.stderr.flush()
    line = b""
    while not line.endswith(b"\n"):  # a byte at a time: the rest of stdin is the command's
        c = os.read(0, 1)
        if not c:
            sys.exit(print("sudo: Maximum 3 incorrect authentication attempts",
                           file=sys.stderr) or 1)
        line += c
    pw = line.rstrip(b"\n")
    check = subprocess.run([REAL, "-k", "-S", "-p", "", "-v"], input=pw + b"\n",
                           capture_output=True)
    if check.returncode == 0:
        break
    sys.stderr.write("sudo: Authentication failed, try again.\n")
else:
    sys.exit(print("sudo: Maximum 3 incorrect authentication attempts", file=sys.stderr) or 1)
r, w = os.pipe()
if os.fork() == 0:  # the password again for the real sudo, then our stdin
    os.close(r)
    os.write(w, pw + b"\n")
    while chunk := os.read(0, 65536):
        os.write(w, chunk)
    os._exit(0)
os.close(w)
os.dup2(r, 0)
os.close(r)
flags = [f for f in flags if f != "-S"]
os.execv(REAL, [REAL, "-k", "-S", "-p", "", *flags, "--", *rest])
"""


@pytest.mark.parametrize("version", ["0.2.8", "0.2.4"])
def test_sudo_rs_prompt_and_refusal_are_understood(
    pwlab: Lab, tmp_path: Path, version: str
) -> None:
    import base64

    inv = pwlab.inventory(tmp_path, **STACK)
    script = SUDO_RS % {"honours": version != "0.2.4"}
    code = base64.b64encode(script.encode()).decode()
    as_root(inv, f"rm -f {PROFILE} && echo {code} | base64 -d > /usr/local/bin/sudo "
                 "&& chmod 755 /usr/local/bin/sudo")  # fmt: skip
    try:
        # the variant speaks as sudo-rs does
        said = on_host(inv, HOST, "echo wrong | sudo -S -p prompt true 2>&1 || true")
        label = "prompt" if version != "0.2.4" else "authenticate"
        assert said.startswith(f"[sudo: {label}] Password: sudo: Authentication failed"), said
        res = pwlab.gpunode("apply", str(inv), "--yes", "--json", "--no-smoke", timeout=90)
        assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
        evs = events(res.stdout)
        statuses = [e["status"] for e in of(evs, "change-finished", HOST)]
        assert statuses and set(statuses) == {"changed"}, of(evs, "change-finished", HOST)
        text = (pwlab.upper(HOST) / PROFILE.lstrip("/")).read_text()
        assert "export CUDA_HOME=/usr/local/cuda" in text
        assert_secret_kept(pwlab, res.stdout, res.stderr)
        assert "-S" in on_host(inv, HOST, "cat /tmp/sudo-rs-standin.log")  # it was asked
        # a wrong password: one prompt, the refusal named, in seconds
        as_root(inv, f"rm -f {PROFILE}")
        env = {**pwlab.env, ENV: "not the password"}
        start = time.monotonic()
        res = pwlab.gpunode("apply", str(inv), "--yes", "--json", "--no-smoke", env=env, timeout=60)
        took = time.monotonic() - start
        assert res.returncode == 2, res.stdout[-2000:] + res.stderr[-2000:]
        (done,) = of(events(res.stdout), "host-finished", HOST)
        assert done["message"] == f"sudo: incorrect password for ubuntu@{HOST}", done
        assert done["changed"] == 0 and took < 15, (done, took)
        assert "not the password" not in res.stdout + res.stderr
    finally:
        reset(pwlab)


def test_a_failed_steps_full_output_in_the_record_holds_no_password(
    pwlab: Lab, tmp_path: Path
) -> None:
    """The step runs under sudo, which is given the password on the command's stdin: the
    step then prints what is left of its stdin and its environment, and fails."""
    role = tmp_path / "roles" / "leaky"
    role.mkdir(parents=True)
    (role / "tasks.yaml").write_text(
        "- name: print stdin and env, then fail\n  op: command\n"
        '  cmd: [sh, -c, "echo begin; cat; env; echo end; exit 5"]\n'
        "  creates: /etc/never-there\n"
    )
    inv = pwlab.inventory(tmp_path, **NO_STACK, roles=["leaky"])
    res = pwlab.gpunode("apply", str(inv), "--yes", "--no-tui", "--no-smoke", timeout=60)
    assert res.returncode == 2, res.stdout[-2000:] + res.stderr[-2000:]
    record = Path(res.stderr.split("run record: ")[1].split()[0])
    data = json.loads(record.read_text())
    (failed,) = data["hosts"][HOST]["changes"]
    out = failed["output"]
    assert out["exit_code"] == 5 and out["stdout"].startswith("begin\n"), out
    assert out["stdout"].rstrip().endswith("end") and "SUDO_USER=ubuntu" in out["stdout"]
    assert PASSWORD.encode() not in record.read_bytes()
    shown = pwlab.gpunode("report", data["id"], "--host", HOST)
    assert "SUDO_USER=ubuntu" in shown.stdout and PASSWORD not in shown.stdout + res.stdout
