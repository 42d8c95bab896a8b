"""conda stand-in for gpunode lab hosts (installed as PREFIX/bin/conda by the lab's installer).

Environments are real virtual environments of the host's own python3 (python3 -m venv);
the requested Python version is recorded in conda-meta/ as conda would record it.
Supports what gpunode needs: create, env list, run, remove, info, --version.
Standard library only.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import subprocess
import sys
import time
from pathlib import Path

VERSION = "24.11.3"
BASE = Path(__file__).resolve().parent.parent


def _registry() -> Path:
    return Path.home() / ".conda" / "environments.txt"


def _registered() -> list[str]:
    try:
        lines = _registry().read_text().splitlines()
    except OSError:
        return []
    return [ln.strip() for ln in lines if ln.strip()]


def _register(prefix: Path, add: bool) -> None:
    entries = [e for e in _registered() if e != str(prefix)]
    if add:
        entries.append(str(prefix))
    reg = _registry()
    reg.parent.mkdir(parents=True, exist_ok=True)
    reg.write_text("".join(e + "\n" for e in entries))


def _envs() -> list[str]:
    found = [str(BASE)]
    envs_dir = BASE / "envs"
    if envs_dir.is_dir():
        found += sorted(str(p) for p in envs_dir.iterdir() if (p / "conda-meta").is_dir())
    for e in _registered():
        if e not in found and (Path(e) / "conda-meta").is_dir():
            found.append(e)
    return found


def _fail(message: str, code: int = 1) -> int:
    sys.stderr.write(message.rstrip("\n") + "\n")
    return code


def _target(args: list[str]) -> tuple[Path | None, list[str]]:
    """Pull -p/--prefix or -n/--name out of args."""
    rest: list[str] = []
    prefix: Path | None = None
    it = iter(args)
    for a in it:
        if a in ("-p", "--prefix"):
            prefix = Path(next(it, "")).absolute()
        elif a.startswith("--prefix="):
            prefix = Path(a.split("=", 1)[1]).absolute()
        elif a in ("-n", "--name"):
            name = next(it, "")
            prefix = BASE if name == "base" else BASE / "envs" / name
        elif a.startswith("--name="):
            prefix = BASE / "envs" / a.split("=", 1)[1]
        else:
            rest.append(a)
    return prefix, rest


def _flags(args: list[str]) -> tuple[set[str], list[str]]:
    """Split flags conda accepts and ignores here from positional specs."""
    flags: set[str] = set()
    specs: list[str] = []
    it = iter(args)
    for a in it:
        if a in ("-c", "--channel"):
            next(it, "")
        elif a.startswith("-"):
            flags.add(a)
        else:
            specs.append(a)
    return flags, specs


def create(args: list[str]) -> int:
    prefix, rest = _target(args)
    if prefix is None:
        return _fail("CondaValueError: either -n NAME or -p PREFIX option required,")
    flags, specs = _flags(rest)
    if prefix.exists():
        if not ({"-y", "--yes"} & flags):
            return _fail(f"CondaValueError: prefix already exists: {prefix}")
        shutil.rmtree(prefix)
    wanted = next((s.split("=", 1)[1] for s in specs if s.startswith("python=")), None)
    host = platform.python_version()
    proc = subprocess.run([sys.executable, "-m", "venv", str(prefix)], check=False)
    if proc.returncode != 0:
        return _fail(f"stand-in conda: python3 -m venv {prefix} failed")
    meta = prefix / "conda-meta"
    meta.mkdir(parents=True, exist_ok=True)
    version = wanted or ".".join(host.split(".")[:2])
    full = version if version.count(".") >= 2 else f"{version}.0"
    record = {
        "name": "python",
        "version": full,
        "build": "stand_in",
        "requested_spec": f"python={version}",
        "host_python": host,
        "note": "gpunode lab stand-in: the environment runs the host's python3 in a venv",
    }
    (meta / f"python-{full}-stand_in.json").write_text(json.dumps(record, indent=2) + "\n")
    stamp = time.strftime("%Y-%m-%d %H:%M:%S")
    (meta / "history").write_text(
        f"==> {stamp} <==\n# cmd: conda create {' '.join(args)}\n# conda version: {VERSION}\n"
        f"+defaults/linux-64::python-{full}-stand_in\n# update specs: {specs!r}\n"
    )
    _register(prefix, add=True)
    if "-q" not in flags and "--quiet" not in flags:
        print(f"#\n# To activate this environment, use\n#\n#     $ conda activate {prefix}\n#")
    return 0


def env_list(args: list[str]) -> int:
    envs = _envs()
    if "--json" in args:
        print(json.dumps({"envs": envs}, indent=2))
        return 0
    print("# conda environments:\n#")
    for e in envs:
        name = "base" if e == str(BASE) else Path(e).name
        print(f"{name:<25}{'*' if e == os.environ.get('CONDA_PREFIX') else ' '} {e}")
    return 0


def remove(args: list[str]) -> int:
    prefix, _ = _target(args)
    if prefix is None or prefix == BASE:
        return _fail("CondaEnvironmentError: cannot remove the base environment")
    if not (prefix / "conda-meta").is_dir():
        return _fail(f"EnvironmentLocationNotFound: Not a conda environment: {prefix}")
    shutil.rmtree(prefix)
    _register(prefix, add=False)
    return 0


def run(args: list[str]) -> int:
    prefix, rest = _target(args)
    prefix = prefix or BASE
    while rest and rest[0] in ("--no-capture-output", "--live-stream", "--cwd"):
        rest.pop(0)
    if not rest:
        return _fail("ArgumentError: No command given")
    if not (prefix / "bin").is_dir():
        return _fail(f"EnvironmentLocationNotFound: Not a conda environment: {prefix}")
    env = dict(os.environ)
    env["PATH"] = f"{prefix / 'bin'}:{env.get('PATH', '/usr/bin:/bin')}"
    env["CONDA_PREFIX"] = str(prefix)
    env["CONDA_DEFAULT_ENV"] = str(prefix)
    try:
        os.execvpe(rest[0], rest, env)
    except OSError as e:
        return _fail(f"stand-in conda run: {rest[0]}: {e.strerror}", 127)
    return 0


def info(args: list[str]) -> int:
    if "--base" in args:
        print(BASE)
        return 0
    data = {
        "conda_version": VERSION,
        "root_prefix": str(BASE),
        "envs": _envs(),
        "platform": "linux-64",
        "stand_in": True,
    }
    if "--json" in args:
        print(json.dumps(data, indent=2))
    else:
        for k, v in data.items():
            print(f"{k:>20} : {v}")
    return 0


def main(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        print("usage: conda [--version] {create,env,run,remove,info} ... (gpunode lab stand-in)")
        return 0
    if argv[0] in ("--version", "-V"):
        print(f"conda {VERSION} (stand-in)")
        return 0
    cmd, rest = argv[0], argv[1:]
    if cmd == "create":
        return create(rest)
    if cmd == "env" and rest[:1] == ["list"]:
        return env_list(rest[1:])
    if cmd == "env" and rest[:1] == ["remove"]:
        return remove(rest[1:])
    if cmd == "env" and rest[:1] == ["create"]:
        return create(rest[1:])
    if cmd == "remove" and "--all" in rest:
        return remove([a for a in rest if a != "--all"])
    if cmd == "run":
        return run(rest)
    if cmd == "info":
        return info(rest)
    return _fail(f"stand-in conda: '{' '.join(argv[:2])}' is not simulated", 2)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
