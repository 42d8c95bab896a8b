"""The program's exit: what `sys.exit` would do, less the interpreter's teardown."""

from __future__ import annotations

import subprocess
import sys

import pytest


def run_child(body: str) -> subprocess.CompletedProcess[str]:
    code = "import atexit, sys, threading, time\nfrom gpunode.cli.leave import leave\n" + body
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)


@pytest.mark.parametrize(("code", "status", "stderr"), [(None, 0, ""), (7, 7, ""), ("no", 1, "no")])
def test_status_and_message_are_those_of_sys_exit(code: object, status: int, stderr: str) -> None:
    out = run_child(f"sys.stdout.write('unflushed'); leave({code!r})")
    assert (out.returncode, out.stdout, out.stderr.strip()) == (status, "unflushed", stderr)


def test_atexit_handlers_run() -> None:
    out = run_child("atexit.register(lambda: print('handler ran')); leave(0)")
    assert out.stdout == "handler ran\n"


def test_a_running_non_daemon_thread_is_waited_for() -> None:
    out = run_child(
        "t = threading.Thread(target=lambda: (time.sleep(0.3), print('thread done')))\n"
        "t.start(); leave(3)"
    )
    assert (out.returncode, out.stdout) == (3, "thread done\n")


def test_a_reader_that_went_away_ends_the_program_as_before() -> None:
    """click answers a broken pipe with status 1 and no traceback, through `run` as well."""
    statuses = []
    for argv in (
        ["-c", "import sys; sys.argv[0] = 'gpunode'; from gpunode.cli import main; main()"],
        ["-m", "gpunode"],
    ):
        proc = subprocess.Popen(
            [sys.executable, *argv, "--help"], stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        assert proc.stdout is not None and proc.stderr is not None
        proc.stdout.close()
        assert "Traceback" not in proc.stderr.read().decode()
        statuses.append(proc.wait(timeout=30))
    assert statuses == [1, 1]


def test_the_program_collects_cycles_less_often_than_python_by_default() -> None:
    """`run` raises the cycle collector's first threshold: a converged apply is mostly imports
    (docs/benchmarks.md). The threshold is read as the command runs, from an atexit handler."""
    out = run_child(
        "import gc\nfrom gpunode.cli import GC_THRESHOLD, run\n"
        "atexit.register(lambda: print(gc.get_threshold()[0], GC_THRESHOLD))\n"
        "sys.argv = ['gpunode', '--version']; run()"
    )
    seen, declared = out.stdout.split()[-2:]
    assert out.returncode == 0 and seen == declared and int(seen) > 700
