"""The controller's own safety, through the command line: a changed host key is its own
outcome (exit 6), run records are private, --diff keeps private files' content out."""

from __future__ import annotations

import json
import os
import pwd
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpunode.execute.result import HostResult, RunResult
from gpunode.exitcodes import ExitCode, exit_code_for
from tests.transport.sshd import NOPASS_USER, SshServer, free_port, sshd


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SshServer]:
    if os.geteuid() != 0 or not Path("/usr/sbin/sshd").exists():
        pytest.skip("needs root and OpenSSH's sshd")
    with sshd(tmp_path_factory.mktemp("sshd-cli")) as s:
        yield s


def gpunode(*args: str, state: Path, umask: int | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "GPUNODE_STATE_DIR": str(state)}
    return subprocess.run(
        [sys.executable, "-m", "gpunode", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        preexec_fn=(lambda: os.umask(umask)) if umask is not None else None,
    )


def _other_key(tmp_path: Path) -> str:
    k = tmp_path / "other_key"
    for old in (k, Path(f"{k}.pub")):
        old.unlink(missing_ok=True)
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(k)], check=True)
    return " ".join(Path(f"{k}.pub").read_text().split()[:2])


def _inventory(server: SshServer, tmp_path: Path, hosts: str) -> Path:
    """`good` is the sshd under its real key; `moved` is the same sshd reached as
    "localhost", for which known_hosts holds another key: a changed host key."""
    kh = tmp_path / "known_hosts"
    kh.write_text(
        f"[127.0.0.1]:{server.port} {server.host_pub}\n"
        f"[localhost]:{server.port} {_other_key(tmp_path)}\n"
    )
    entries = {
        "good": "{address: 127.0.0.1}",
        "moved": "{address: localhost}",
        "gone": f"{{address: 127.0.0.1, ssh: {{port: {free_port()}}}}}",
        "local": "{connection: local, stack: {driver: {branch: '550'}}}",  # refused: fails
    }
    inv = tmp_path / "inv.yaml"
    inv.write_text(
        "defaults:\n"
        "  ssh:\n"
        f"    user: {NOPASS_USER}\n"
        f"    port: {server.port}\n"
        f"    identity_file: '{server.client_key}'\n"
        f"    known_hosts_file: '{kh}'\n"
        "    config_file: null\n"
        "    connect_timeout: 5\n"
        "hosts:\n" + "".join(f"  {h}: {entries[h]}\n" for h in hosts.split())
    )
    return inv


# -- 4. a changed host key --------------------------------------------------------------------


def test_facts_exit_6_on_a_changed_key_others_gathered(server: SshServer, tmp_path: Path) -> None:
    before = server.accepted()
    inv = _inventory(server, tmp_path, "good moved gone")
    out = gpunode("facts", str(inv), state=tmp_path / "state")
    assert out.returncode == ExitCode.HOSTKEY, out.stdout + out.stderr
    assert "moved: HOST KEY CHANGED: host key changed for [localhost]:" in out.stdout
    assert "good: gathered in" in out.stdout  # another host is unaffected
    assert "gone: UNREACHABLE:" in out.stdout
    assert "host key changed on moved: refused" in out.stderr
    # sshd logged one login only (good): the moved host was refused before authenticating
    assert server.accepted_since(before, 1) == 1
    doc = json.loads(gpunode("facts", str(inv), "--json", state=tmp_path / "state").stdout)
    assert {h: v["status"] for h, v in doc["hosts"].items()} == {
        "good": "ok",
        "moved": "hostkey-changed",
        "gone": "unreachable",
    }


def test_apply_check_and_plan_exit_6_before_unreachable_and_refused(
    server: SshServer, tmp_path: Path
) -> None:
    state = tmp_path / "state"
    inv = _inventory(server, tmp_path, "moved gone local")
    out = gpunode("apply", str(inv), "--check", "--no-smoke", state=state)
    assert out.returncode == ExitCode.HOSTKEY, out.stdout + out.stderr
    recap = out.stdout.split("RECAP", 1)[1]
    moved = next(line for line in recap.splitlines() if line.startswith("moved "))
    assert "unreachable=1" in moved and "host key changed" in moved
    assert "host key changed" not in next(ln for ln in recap.splitlines() if ln.startswith("gone"))
    record = json.loads(Path(out.stderr.split("run record: ")[1].strip()).read_text())
    assert record["exit_code"] == ExitCode.HOSTKEY
    assert record["hosts"]["moved"]["status"] == "hostkey-changed"
    js = gpunode("apply", str(inv), "--check", "--no-smoke", "--json", state=state)
    final = json.loads(js.stdout.splitlines()[-1])
    assert (final["kind"], final["event"]) == ("apply-event", "recap")
    assert final["exit_code"] == ExitCode.HOSTKEY == js.returncode
    assert {r["host"]: r["status"] for r in final["hosts"]} == {
        "moved": "hostkey-changed",
        "gone": "unreachable",
        "local": "failed",
    }
    plan = gpunode("plan", str(inv), state=state)
    assert plan.returncode == ExitCode.HOSTKEY
    assert "moved: host key changed for [localhost]:" in plan.stdout
    assert "host key changed on 1 host: refused (moved)" in plan.stderr
    # without the changed key: unreachable (3) before a refused stack (4), refused alone 4
    inv2 = _inventory(server, tmp_path, "gone local")
    assert gpunode("apply", str(inv2), "--check", state=state).returncode == ExitCode.UNREACHABLE
    assert gpunode("plan", str(inv2), state=state).returncode == ExitCode.UNREACHABLE
    inv3 = _inventory(server, tmp_path, "local")
    assert gpunode("apply", str(inv3), "--check", state=state).returncode == ExitCode.BAD_INPUT
    refused = gpunode("plan", str(inv3), state=state)
    assert refused.returncode == ExitCode.BAD_INPUT
    assert "pending" not in refused.stderr and "1 host refused (local)" in refused.stderr


def test_exit_code_precedence() -> None:
    assert exit_code_for(["ok", "unreachable", "failed", "hostkey-changed"]) == ExitCode.HOSTKEY
    assert exit_code_for(["unreachable", "failed", "changed"]) == ExitCode.FAILED
    assert exit_code_for(["unreachable", "skipped"]) == ExitCode.UNREACHABLE
    assert exit_code_for(["ok", "changed", "skipped"]) == 0
    assert exit_code_for(["refused", "unreachable"]) == ExitCode.UNREACHABLE
    assert exit_code_for(["pending", "reboot-pending", "refused"]) == ExitCode.BAD_INPUT
    assert exit_code_for(["pending", "reboot-pending", "ok"]) == ExitCode.REBOOT_PENDING
    assert exit_code_for(["pending", "skipped"]) == ExitCode.PENDING
    run = RunResult({"a": HostResult("a", "hostkey-changed"), "b": HostResult("b", "failed")})
    assert run.exit_code == 6
    refused = HostResult("c", "failed", refused=True)  # its stack refused, nothing changed
    assert RunResult({"c": refused}).exit_code == ExitCode.BAD_INPUT
    assert RunResult({"c": refused, "b": HostResult("b", "failed")}).exit_code == 2


# -- 3. private run records -------------------------------------------------------------------


def _mode(p: Path) -> int:
    return stat.S_IMODE(p.stat().st_mode)


def test_records_are_private_even_under_umask_0(server: SshServer, tmp_path: Path) -> None:
    state = tmp_path / "new" / "state"
    inv = _inventory(server, tmp_path, "gone")
    out = gpunode("apply", str(inv), "--check", state=state, umask=0)
    assert out.returncode == ExitCode.UNREACHABLE, out.stderr
    records = list((state / "runs").glob("*.json"))
    assert len(records) == 1
    assert _mode(state) == 0o700 and _mode(state / "runs") == 0o700
    assert _mode(records[0]) == 0o600  # created so, with umask 0: not chmod'ed afterwards
    marks = state / "runs" / ".running"  # the running records' markers: none once it ended
    assert _mode(marks) == 0o700 and not list(marks.iterdir())
    assert list((state / "runs").glob(".*")) == [marks]  # no temporary file left
    assert "warning" not in out.stderr


def test_existing_open_state_dir_is_tightened_and_a_foreign_one_refused(
    server: SshServer, tmp_path: Path
) -> None:
    state = tmp_path / "state"
    (state / "runs").mkdir(parents=True)
    os.chmod(state, 0o755)
    os.chmod(state / "runs", 0o777)
    old = state / "runs" / "20200101T000000-abcdef.json"
    old.write_text('{"id": "20200101T000000-abcdef", "hosts": {}}\n')
    os.chmod(old, 0o644)
    inv = _inventory(server, tmp_path, "gone")
    out = gpunode("apply", str(inv), "--check", state=state)
    assert out.returncode == ExitCode.UNREACHABLE
    assert _mode(state) == 0o700 and _mode(state / "runs") == 0o700 and _mode(old) == 0o600
    assert "warning" not in out.stderr
    # someone else's directory (its owner could read the records, or plant some): refused
    # before any host is contacted, with no traceback, nothing written or changed there
    nobody = pwd.getpwnam("nobody")
    os.chown(state, nobody.pw_uid, nobody.pw_gid)
    os.chmod(state, 0o755)
    before = sorted(p.name for p in (state / "runs").iterdir())
    for command in (["apply", str(inv), "--check"], ["smoke", str(inv)]):
        out = gpunode(*command, state=state)
        assert out.returncode == ExitCode.BAD_INPUT, out.stderr
        assert (
            f"error: the state directory {state} is owned by uid {nobody.pw_uid}, not by you"
        ) in out.stderr and "Traceback" not in out.stderr
        assert _mode(state) == 0o755
        assert sorted(p.name for p in (state / "runs").iterdir()) == before


def test_record_save_does_not_chmod(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from gpunode import records

    monkeypatch.setenv("GPUNODE_STATE_DIR", str(tmp_path / "s"))
    rec = records.Record("apply", "inv.yaml", {})

    def no_chmod(*a: object, **k: object) -> None:
        raise AssertionError("chmod called")

    monkeypatch.setattr(os, "chmod", no_chmod)
    old = os.umask(0)
    try:
        path = rec.save()
    finally:
        os.umask(old)
    assert _mode(path) == 0o600 and _mode(path.parent) == 0o700


def test_diff_never_records_a_private_files_content(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """--diff reads the file before the change with sudo: a 0600 file's secret must not
    reach the record (nor the events), nor a new content about to be written 0600."""
    from gpunode import records
    from gpunode.changes import Change, HostPlan
    from gpunode.events import Bus, ChangeFinished
    from gpunode.execute.host import HostRun, Options
    from gpunode.inventory import loads
    from gpunode.roles.ops.apt import write_file_step
    from gpunode.transport.local import LocalTransport

    monkeypatch.setenv("GPUNODE_STATE_DIR", str(tmp_path / "state"))
    host = loads("hosts:\n  me: {connection: local}\n").hosts["me"]
    secret_file = tmp_path / "token.conf"
    secret_file.write_text("token = s3cr3t-before\n")
    os.chmod(secret_file, 0o600)
    public = tmp_path / "motd"
    public.write_text("hello before\n")
    os.chmod(public, 0o644)

    def change(path: Path, after: str, mode: str) -> Change:
        step = write_file_step(str(path), after, mode)
        return Change("r", f"{path}", "file", "differs", (step,), path=str(path), after=after)

    seen: list[str] = []
    bus = Bus()
    bus.subscribe(lambda e: seen.append(e.diff) if isinstance(e, ChangeFinished) else None)
    run = HostRun(LocalTransport(), host, bus, Options(check=True, diff=True))
    cases = (
        change(secret_file, "token = s3cr3t-after\n", "0600"),  # private before and after
        change(public, "api_key = s3cr3t-new\n", "0640"),  # becomes private
        change(public, "hello after\n", "0644"),  # public: the diff is kept
    )
    run.check_only(HostPlan("me", changes=cases))  # as `apply --check --diff` does
    assert len(seen) == 3
    rec = records.Record("apply", "inv.yaml", {"diff": True})
    path = rec.finish({"me": run.result.to_json()}, 0, 1.0)
    assert "s3cr3t" not in path.read_text()
    diffs = [c["diff"] for c in json.loads(path.read_text())["hosts"]["me"]["changes"]]
    assert diffs[0] == "(content of a 0600 file not recorded)\n"
    assert diffs[1] == "(content of a 0640 file not recorded)\n"
    assert "-hello before\n+hello after\n" in diffs[2]  # a world-readable file's diff stays
    assert seen == diffs  # what the views were sent: the same
