"""Hostile inventories through the real command line: exit 2, `file:line:column` and what
is wrong on stderr, no traceback, nothing raw on the terminal, and fast."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass
from math import inf
from pathlib import Path

import pytest

from tests.conftest import EXAMPLE_INVENTORY


@dataclass
class Run:
    returncode: int
    stdout: str
    stderr: str
    seconds: float
    """CPU seconds (user + system) of the gpunode process: unlike wall time, not
    stretched by other work on a busy machine."""
    rss_mb: float


def gpunode(*args: str, timeout: float = 30) -> Run:
    """Run `python -m gpunode ARGS`; measure its CPU time and its own peak memory."""
    with tempfile.TemporaryDirectory() as tmp:
        out_path, err_path = Path(tmp, "out"), Path(tmp, "err")
        with out_path.open("wb") as out, err_path.open("wb") as err:
            rss_path = Path(tmp, "rss")
            # A small parent forks gpunode and reads its rusage: a child forked straight
            # from this (large) test process would carry our own peak across exec.
            proc = subprocess.Popen(
                [sys.executable, "-c", _MEASURE, str(rss_path), sys.executable, "-m", "gpunode",
                 *args],
                stdout=out, stderr=err,
            )  # fmt: skip
            killer = threading.Timer(timeout, proc.kill)
            killer.start()
            proc.wait()
            killer.cancel()
        measured = rss_path.read_text().split() if rss_path.exists() else []
        seconds, rss = (float(measured[0]), float(measured[1])) if measured else (inf, inf)
        return Run(
            proc.returncode,
            out_path.read_text(errors="replace"),
            err_path.read_text(errors="replace"),
            seconds,
            rss,
        )


_MEASURE = """
import os, sys
pid = os.fork()
if pid == 0:
    os.execv(sys.argv[2], sys.argv[2:])
_, status, usage = os.wait4(pid, 0)
open(sys.argv[1], "w").write(f"{usage.ru_utime + usage.ru_stime} {usage.ru_maxrss / 1024}")
sys.exit(os.waitstatus_to_exitcode(status))
"""


def refused(run: Run, *lines: str) -> None:
    """Exit 4; stderr holds `lines` (each a prefix of an error line); nothing raw or crashed."""
    assert run.returncode == 4, (run.returncode, run.stderr)
    assert "Traceback" not in run.stderr and "Error:" not in run.stderr.replace("error:", "")
    assert "\x1b" not in run.stderr + run.stdout and "\x07" not in run.stderr + run.stdout
    errors = [ln for ln in run.stderr.splitlines() if ln.startswith("error: ")]
    for line in lines:
        assert any(e.startswith(f"error: {line}") for e in errors), (line, run.stderr)
    assert run.stderr.rstrip().endswith("; nothing was changed."), run.stderr
    assert run.stdout == ""


def write(tmp_path: Path, text: str, name: str = "inv.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


@pytest.mark.parametrize("cmd", ["check", "hosts"])
def test_apt_source_injection_through_repos_nvidia(tmp_path: Path, cmd: str) -> None:
    inv = write(
        tmp_path,
        "defaults:\n  repos:\n"
        '    nvidia: "http://x/\\ndeb [trusted=yes] http://evil.example/ ./"\n'
        "    pypi_index: https://user:hunter2@pypi.lab/simple\n"
        "hosts:\n  a: {address: 192.0.2.1}\n",
    )
    run = gpunode(cmd, str(inv))
    refused(run, f"{inv}:3:13: defaults.repos.nvidia: contains U+000A (LINE FEED)")
    inv.write_text(inv.read_text().replace("\\n", " "))
    run = gpunode(cmd, str(inv))
    refused(
        run,
        f"{inv}:3:13: defaults.repos.nvidia: 'http://x/ deb [trusted=yes] http://evil.example/"
        " ./' is not a URL",
        f"{inv}:4:17: defaults.repos.pypi_index: the URL holds credentials",
    )
    assert "hunter2" not in run.stderr


def test_address_cannot_become_an_ssh_option_or_command(tmp_path: Path) -> None:
    inv = write(
        tmp_path,
        "hosts:\n"
        '  a: {address: "-oProxyCommand=touch /tmp/pwned"}\n'
        '  b: {address: "gpu01 $(touch /tmp/pwned)"}\n'
        '  c: {address: "gpu%h`id`"}\n'
        '  "-oProxyCommand=x": {address: 192.0.2.1}\n',
    )
    refused(
        gpunode("check", str(inv)),
        f"{inv}:2:16: hosts.a.address: '-oProxyCommand=touch /tmp/pwned' is not a hostname",
        f"{inv}:3:16: hosts.b.address: ",
        f"{inv}:4:16: hosts.c.address: ",
        f"{inv}:5:3: hosts.-oProxyCommand=x: '-oProxyCommand=x' is not a name",
    )


def test_unicode_digits_are_not_versions(tmp_path: Path) -> None:
    inv = write(
        tmp_path,
        'defaults:\n  stack:\n    conda: {envs: {t: {python: "３.１１"}}}\n'
        "hosts:\n  a: {address: 192.0.2.1}\n",
    )
    refused(
        gpunode("check", str(inv)),
        f"{inv}:3:32: defaults.stack.conda.envs.t.python: '３.１１' is not a version",
    )


@pytest.mark.parametrize("cmd", ["check", "hosts"])
def test_terminal_escapes_never_reach_the_terminal(tmp_path: Path, cmd: str) -> None:
    inv = write(
        tmp_path,
        "hosts:\n  a:\n    address: 192.0.2.1\n"
        '    gpus: {model: "A100\\e]0;pwned\\a\\e[2J"}\n'
        '    ssh: {user: "ubuntu\\e[31m"}\n'
        '    stack: {vars: {"\\e[2J": x, motd: "\\u202Eevil"}}\n',
    )
    refused(
        gpunode(cmd, str(inv)),
        f"{inv}:4:19: hosts.a.gpus.model: contains U+001B (ESC) at offset 4",
        f"{inv}:5:17: hosts.a.ssh.user: contains U+001B (ESC)",
        f"{inv}:6:20: hosts.a.stack.vars.\\x1b[2J: contains U+001B (ESC) at offset 0",
        f"{inv}:6:38: hosts.a.stack.vars.motd: contains U+202E (RIGHT-TO-LEFT OVERRIDE)",
    )


def test_bad_login_env_and_prefix(tmp_path: Path) -> None:
    inv = write(
        tmp_path,
        "hosts:\n  a:\n    address: 192.0.2.1\n"
        '    ssh: {user: "root;id"}\n'
        "    stack: {conda: {prefix: /usr}}\n"
        '    become_password_env: "PW; rm -rf /"\n',
    )
    refused(
        gpunode("check", str(inv)),
        f"{inv}:4:17: hosts.a.ssh.user: 'root;id' is not a login name",
        f"{inv}:5:29: hosts.a.stack.conda.prefix: '/usr' is a system directory",
        f"{inv}:6:26: hosts.a.become_password_env: 'PW; rm -rf /' is not an environment",
    )


def test_hosts_escapes_what_it_prints(monkeypatch: pytest.MonkeyPatch) -> None:
    """Defence in depth: were a raw escape to slip past the loader, `hosts` escapes it."""
    from click.testing import CliRunner

    from gpunode.cli import hosts as hosts_cli
    from gpunode.inventory import load

    inv = load(EXAMPLE_INVENTORY)
    h = inv.hosts["gpu-a100-01"]
    evil = h.model_copy(
        update={
            "name": "gpu\x1b[2J",
            "groups": ["g\x1b]0;t\x07"],
            "gpus": h.gpus.model_copy(update={"model": "A100\x1b[31m"}),
            "ssh": h.ssh.model_copy(update={"identity_file": "/k\u202e"}),
        }
    )
    monkeypatch.setattr(hosts_cli, "load_selected", lambda path, limit: (inv, [evil]))
    out = CliRunner().invoke(hosts_cli.hosts, [EXAMPLE_INVENTORY], color=True).output
    assert "\x1b[1mgpu\\x1b[2J\x1b[0m  (g\\x1b]0;t\\x07)" in out  # only our own bold style
    assert "x A100\\x1b[31m" in out and "key=/k\\u202e" in out
    assert "\x07" not in out and "\u202e" not in out and out.count("\x1b") == 2


def test_billion_laughs_exits_2_fast_and_small(tmp_path: Path) -> None:
    from tests.inventory.test_hardening import BILLION_LAUGHS

    inv = write(tmp_path, BILLION_LAUGHS)
    run = gpunode("check", str(inv))
    refused(run, f"{inv}:6:4: more than 100000 values once aliases are expanded")
    assert run.seconds < 3, run.seconds  # interpreter start included; the load is < 1 s
    assert run.rss_mb < 250, run.rss_mb  # was more than 2 GiB


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"hosts:\n  a: {address: 192.0.2.1}\x00\n", ":2:26: character U+0000 is not allowed"),
        (b"a: " + b"[" * 1000 + b"]" * 1000 + b"\n", ":1:68: nested deeper than 64 levels"),
        (b"hosts: !!python/object/apply:os.system [id]\n", ":1:8: tag !!python/object/apply"),
        (b"hosts:\n  a: {address: !env ADDR}\n", ":2:16: tag !env is not supported"),
        (b"", ":1:1: the inventory is empty"),
        (b"# hosts: to come\n", ":1:1: the inventory is empty"),
        (b"\xff\xfe", ":1:1: not UTF-8 text"),
    ],
    ids=["nul", "deep", "python-tag", "unknown-tag", "empty", "comments-only", "not-utf8"],
)
def test_bad_yaml_exits_2_with_a_position(tmp_path: Path, content: bytes, message: str) -> None:
    inv = tmp_path / "inv.yaml"
    inv.write_bytes(content)
    run = gpunode("check", str(inv))
    refused(run, f"{inv}{message}")
    assert run.seconds < 3, run.seconds


def test_file_over_the_size_cap(tmp_path: Path) -> None:
    inv = write(tmp_path, "hosts: {}\n#" + "x" * (10 * 2**20) + "\n")
    run = gpunode("check", str(inv))
    refused(run, f"{inv}:1:1: larger than 10 MiB")
    assert run.seconds < 3 and run.rss_mb < 250, (run.seconds, run.rss_mb)


@pytest.mark.parametrize("kind", ["fifo", "/dev/zero"])
def test_fifo_and_device_are_refused_without_hanging(tmp_path: Path, kind: str) -> None:
    path = kind
    if kind == "fifo":
        path = str(tmp_path / "inv.yaml")
        os.mkfifo(path)
    run = gpunode("check", path, timeout=20)
    refused(run, f"{path}:1:1: not a regular file (a FIFO, device or socket)")
    assert run.seconds < 3 and run.rss_mb < 250, (run.seconds, run.rss_mb)


@pytest.mark.parametrize(
    ("path", "message"),
    [
        # regular files to stat: kmsg blocks (or, read by root, takes the kernel's messages)
        ("/proc/kmsg", "a kernel file (/proc, /sys): give the inventory as a file"),
        ("/proc/self/status", "a kernel file (/proc, /sys): give the inventory as a file"),
        ("/sys/kernel/uevent_seqnum", "a kernel file (/proc, /sys): give the inventory as a file"),
    ],
)
def test_kernel_files_are_refused_without_a_traceback(path: str, message: str) -> None:
    run = gpunode("check", path, timeout=20)
    refused(run, f"{path}:1:1: {message}")
    assert "Traceback" not in run.stderr and run.seconds < 3, run.seconds


def test_a_folder_is_refused_without_a_traceback(tmp_path: Path) -> None:
    run = gpunode("check", str(tmp_path), timeout=20)
    assert run.returncode in (4, 5) and "is a directory" in run.stderr, run.stderr
    assert "Traceback" not in run.stderr


def test_merge_keys_are_supported(tmp_path: Path) -> None:
    inv = write(
        tmp_path,
        "hosts:\n"
        "  gpu-01: &node {address: 192.0.2.1, ssh: {port: 2222}, gpus: {model: H100, count: 8}}\n"
        "  gpu-02: {<<: *node, address: 192.0.2.2}\n",
    )
    run = gpunode("hosts", str(inv), "--json")
    assert run.returncode == 0, run.stderr
    host = json.loads(run.stdout)["hosts"]["gpu-02"]
    assert (host["address"], host["ssh"]["port"], host["gpus"]["count"]) == ("192.0.2.2", 2222, 8)
    inv.write_text(inv.read_text().replace("port: 2222", "port: 0"))
    refused(
        gpunode("check", str(inv)),
        f"{inv}:2:50: hosts.gpu-01.ssh.port: Input should be greater than or equal to 1",
        f"{inv}:2:50: hosts.gpu-02.ssh.port: Input should be greater than or equal to 1",
    )
