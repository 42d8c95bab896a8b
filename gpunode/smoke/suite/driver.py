"""Run the selected smoke tests on this host, in each Python environment that can run them.

Started by gpunode with the host's own python3 in a temporary copy of this
folder. Environments: this python3 ("system"), each conda env under
--conda-prefix that has torch or tensorflow, and each --python given. Every
test runs as its own process (a crash or hang is one failed result, not a
lost run) and its JSON lines are passed straight on, one per line, as they come.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import subprocess
import sys
import tempfile
import threading
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # on the host these run as scripts beside smokelib.py
    from gpunode.components import SMOKE_TESTS
    from gpunode.smoke.suite.smokelib import NO_MULTICAST, Timer, emit
else:
    from smokelib import NO_MULTICAST, Timer, emit

    try:  # the runner ships gpunode/components.py beside this file
        from components import SMOKE_TESTS
    except ImportError:  # run from gpunode's own tree
        from gpunode.components import SMOKE_TESTS

HERE = os.path.dirname(os.path.abspath(__file__))
TESTS = {t.name: t for t in SMOKE_TESTS}
PROBE = (
    "import importlib.util as u, json, sys; print(json.dumps({'prefix': sys.prefix, "
    "'version': sys.version.split()[0], 'torch': u.find_spec('torch') is not None, "
    "'tensorflow': u.find_spec('tensorflow') is not None, "
    "'tensorrt': u.find_spec('tensorrt') is not None}))"
)


def probe(python: str) -> dict[str, Any] | None:
    """What a python has, without importing the frameworks (that takes seconds)."""
    try:
        out = subprocess.run([python, "-c", PROBE], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if out.returncode != 0:
        return None
    try:
        info: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return None
    return info


def discover(conda_prefix: str | None, pythons: list[str]) -> list[dict[str, Any]]:
    """Environments in the order frameworks prefer them: given pythons, conda envs, system."""
    candidates = [(p, p) for p in pythons]
    if conda_prefix:
        for env_dir in sorted(glob.glob(os.path.join(conda_prefix, "envs", "*"))):
            candidates.append(
                (f"conda:{os.path.basename(env_dir)}", os.path.join(env_dir, "bin", "python"))
            )
        candidates.append(("conda:base", os.path.join(conda_prefix, "bin", "python")))
    candidates.append(("system", sys.executable))
    envs, seen = [], set()
    for label, python in candidates:
        if not os.access(python, os.X_OK):
            if python in pythons:
                emit(
                    "environments",
                    "fail",
                    f"--python {python} is not an executable file",
                    env=label,
                )
            continue
        info = probe(python)
        if info is None and python in pythons:
            emit("environments", "fail", f"--python {python} does not run as a python", env=label)
        if info is None or info["prefix"] in seen:
            continue
        is_conda = label.startswith("conda:")
        if is_conda and not (info["torch"] or info["tensorflow"] or info.get("tensorrt")):
            continue  # a conda env without a framework has nothing for the suite to run
        seen.add(info["prefix"])
        envs.append({"label": label, "python": python, **info})
    return envs


def run_test(script: str, args: list[str], label: str, python: str, timeout: float) -> None:
    """Run one test script, passing its JSON lines on; a crash or timeout becomes a failure."""
    t = Timer()
    test = script[len("check_") : -len(".py")].replace("_", "-")
    env = dict(os.environ, GPUNODE_SMOKE_ENV=label, PYTHONUNBUFFERED="1", **NO_MULTICAST)
    with tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(
            [python, os.path.join(HERE, script), *args],
            cwd=HERE,
            env=env,
            stdout=subprocess.PIPE,
            stderr=err,
            text=True,
        )
        killed = threading.Event()

        def kill() -> None:
            killed.set()
            proc.kill()

        timer = threading.Timer(timeout, kill)
        timer.start()
        results = 0
        try:
            assert proc.stdout is not None
            for line in proc.stdout:
                try:
                    record = json.loads(line)
                except ValueError:
                    continue  # a framework's own chatter on stdout
                if not isinstance(record, dict) or "name" not in record:
                    continue
                record.setdefault("details", {})["python"] = python
                sys.stdout.write(json.dumps(record, sort_keys=True) + "\n")
                sys.stdout.flush()
                results += 1
            code = proc.wait()
        finally:
            timer.cancel()
        err.seek(0)
        stderr = err.read().decode("utf-8", "replace").strip().splitlines()
    if code != 0 or results == 0:
        if killed.is_set():
            why = f"did not finish within {timeout:g} s"
        else:
            why = f"exited {code} after {results} results"
        said = " | ".join(stderr[-5:]) if stderr else "no output on stderr"
        emit(
            test,
            "fail",
            f"{script} {why}: {said}",
            seconds=t.seconds,
            env=label,
            details={"python": python},
        )


def main() -> int:
    ap = argparse.ArgumentParser()
    always = [t.name for t in SMOKE_TESTS if t.selected == "always"]
    ap.add_argument("--tests", default=",".join(always))
    ap.add_argument("--count", type=int, default=None, help="GPUs the inventory declares")
    ap.add_argument("--conda-prefix", default=None)
    ap.add_argument("--python", action="append", default=[], help="another python to test")
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds for one test")
    ap.add_argument("--image", default=None, help="a container image for `containers`")
    args = ap.parse_args()
    tests = [t for t in args.tests.split(",") if t]
    unknown = [t for t in tests if t not in TESTS]
    if unknown:
        emit("smoke", "fail", f"unknown tests {unknown}: choose from {', '.join(TESTS)}")
        return 2
    count = [] if args.count is None else ["--count", str(args.count)]
    system = sys.executable
    envs = discover(args.conda_prefix, args.python)
    names = ", ".join(f"{e['label']} ({e['python']})" for e in envs)
    emit(
        "environments", "pass", names, value=len(envs), unit="envs", env="-", details={"envs": envs}
    )

    def expand(arg: str) -> list[str]:
        if arg == "{count}":
            return count
        if arg == "{image}":
            return ["--image", args.image] if args.image else []
        return [arg]

    for name in tests:
        test = TESTS[name]
        extra = [a for arg in test.args for a in expand(arg)]
        if test.runs == "system":
            run_test(test.script, extra, "system", system, args.timeout)
            continue
        having = [e for e in envs if e.get(test.module or "")]
        if test.runs == "bindings":
            # asked for, so never a skip: where no python has the bindings, the system
            # python3 (where the distribution's package puts them) says what is missing
            having = having or [{"label": "system", "python": system}]
        elif not having:
            why = f"{test.module} is not installed in any environment found: {names}"
            emit(name, "skip", why, env="-")
        for e in having[:1] if test.runs == "first" else having:
            run_test(test.script, extra, e["label"], e["python"], args.timeout)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
