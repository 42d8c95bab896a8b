"""conda stand-in for gpunode lab hosts (installed as PREFIX/bin/conda by the lab's installer).

Environments are real virtual environments of the host's own python3 (python3 -m venv);
the requested Python version is recorded in conda-meta/ as conda would record it.
Supports what gpunode needs: create, env list, run, remove, info, tos accept, --version.
Like conda >= 25.5 with its conda-anaconda-tos plugin, `create` stops with
CondaToSNonInteractiveError while Anaconda's channels in use (the defaults: pkgs/main,
pkgs/r) have no accepted Terms of Service record, and `tos accept` writes that record where
the plugin does (~/.conda/tos by default, PREFIX/conda-meta/tos with --system).
Standard library only.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import platform
import shutil
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

VERSION = "25.5.1"
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


# Anaconda's channels (conda's `defaults` on Linux) and the ToS version the lab serves.
DEFAULTS = ("https://repo.anaconda.com/pkgs/main", "https://repo.anaconda.com/pkgs/r")
TOS_HOST = "repo.anaconda.com"
TOS_VERSION = 1750000000.0  # the ToS text's version, as a POSIX timestamp


def _channels(args: list[str]) -> list[str]:
    """The channels a command uses, as URLs: -c/--channel, plus the defaults unless
    --override-channels."""
    named: list[str] = []
    it = iter(args)
    for a in it:
        if a in ("-c", "--channel"):
            named.append(next(it, ""))
        elif a.startswith("--channel="):
            named.append(a.split("=", 1)[1])
    used = [] if "--override-channels" in args else ["defaults"]
    urls: list[str] = []
    for c in used + named:
        if c == "defaults":
            urls += DEFAULTS
        elif "://" in c:
            urls.append(c.rstrip("/"))
        else:
            urls.append(f"https://conda.anaconda.org/{c}")
    return list(dict.fromkeys(urls))


def _hash(url: str) -> str:
    location, _, name = url.split("://", 1)[-1].partition("/")
    return hashlib.sha256(location.encode() + name.encode()).hexdigest()


def _tos_roots() -> list[Path]:
    """conda-anaconda-tos's search path (path.SEARCH_PATH)."""
    env = os.environ
    roots = [Path("/etc/conda/tos"), Path("/var/lib/conda/tos"), BASE / "conda-meta/tos"]
    if env.get("XDG_CONFIG_HOME"):
        roots.append(Path(env["XDG_CONFIG_HOME"]) / "conda/tos")
    roots += [Path.home() / ".config/conda/tos", Path.home() / ".conda/tos"]
    if env.get("CONDA_PREFIX"):
        roots.append(Path(env["CONDA_PREFIX"]) / "conda-meta/tos")
    return roots


def _accepted(url: str) -> bool:
    for root in _tos_roots():
        for record in sorted((root / _hash(url)).glob("*.json")):
            try:
                if json.loads(record.read_text()).get("tos_accepted") is True:
                    return True
            except (OSError, ValueError):
                continue
    return False


def _record(root: Path, url: str) -> None:
    folder = root / _hash(url)
    folder.mkdir(parents=True, exist_ok=True)
    now = time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime())
    record = {
        "version": time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime(TOS_VERSION)),
        "text": "Anaconda Terms of Service (gpunode lab stand-in text)",
        "support": "https://www.anaconda.com/terms-of-service",
        "base_url": url,
        "tos_accepted": True,
        "acceptance_timestamp": now,
    }
    (folder / f"{TOS_VERSION}.json").write_text(json.dumps(record))


def _auto_accept() -> bool:
    value = os.environ.get("CONDA_PLUGINS_AUTO_ACCEPT_TOS", "")
    return value.strip().lower() in ("yes", "true", "1", "y", "on")


def _tos_check(args: list[str]) -> int:
    """The plugin's pre-command check: unaccepted ToS channels stop a non-interactive run."""
    pending = [u for u in _channels(args) if TOS_HOST in u and not _accepted(u)]
    if not pending:
        return 0
    if _auto_accept():
        for url in pending:
            _record(Path.home() / ".conda/tos", url)
        return 0
    commands = "\n".join(f"    conda tos accept --override-channels --channel {u}" for u in pending)
    return _fail(
        "\nCondaToSNonInteractiveError: Terms of Service have not been accepted for the "
        "following channels. Please accept or remove them before proceeding:\n"
        + "\n".join(f"    - {u}" for u in pending)
        + "\n\nTo accept these channels' Terms of Service, run the following commands:\n"
        + commands
        + "\n\nFor information on safely removing channels from your conda configuration,\n"
        "please see the official documentation:\n"
        "https://www.anaconda.com/docs/tools/working-with-conda/channels\n"
    )


def tos(args: list[str]) -> int:
    if args[:1] != ["accept"]:
        return _fail(f"stand-in conda: 'tos {' '.join(args[:1])}' is not simulated", 2)
    rest = args[1:]
    root = Path.home() / ".conda/tos"
    it = iter(rest)
    for a in it:
        if a == "--system":
            root = BASE / "conda-meta/tos"
        elif a == "--site":
            root = Path("/etc/conda/tos")
        elif a == "--user":
            root = Path.home() / ".conda/tos"
        elif a == "--env":
            root = Path(os.environ.get("CONDA_PREFIX", str(BASE))) / "conda-meta/tos"
        elif a == "--tos-root":
            root = Path(next(it, ""))
    if "--override-channels" in rest and not {"-c", "--channel"} & set(rest):
        return _fail("ArgumentError: At least one -c / --channel flag must be supplied")
    for url in _channels(rest):
        if TOS_HOST in url:
            _record(root, url)
            print(f"accepted Terms of Service for {url}")
    return 0


def create(args: list[str]) -> int:
    prefix, rest = _target(args)
    if prefix is None:
        return _fail("CondaValueError: either -n NAME or -p PREFIX option required,")
    refused = _tos_check(rest)
    if refused:
        return refused
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
    record: dict[str, object] = {
        "name": "python",
        "version": full,
        "build": "stand_in",
        "requested_spec": f"python={version}",
        "host_python": host,
        "note": "gpunode lab stand-in: the environment runs the host's python3 in a venv",
    }
    # a channel given by its URL (the lab's, a mirror's): its files, checked, recorded;
    # named ones (conda-forge, defaults) are out of the lab's reach: nothing fetched
    given = [b for a, b in itertools.pairwise(rest) if a in ("-c", "--channel")]
    urls = [u.rstrip("/") for u in given if "://" in u and TOS_HOST not in u]
    if urls:
        try:
            taken = _from_channels(urls, version)
        except (OSError, ValueError, KeyError) as e:
            shutil.rmtree(prefix, ignore_errors=True)
            return _fail(f"CondaHTTPError: {e}")
        for rec in taken:
            if rec["name"] == "python":
                full = str(rec["version"])
                record = {**record, **rec, "requested_spec": f"python={version}"}
            else:
                name = f"{rec['name']}-{rec['version']}-{rec['build']}.json"
                (meta / name).write_text(json.dumps(rec, indent=2) + "\n")
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


def _from_channels(urls: list[str], python: str) -> list[dict[str, object]]:
    """The newest python=`python` of the channels and the newest of each name its depends
    reach (no version solving: the lab's channel is small), each file fetched and checked
    against the repodata's sha256, as conda records them (url, channel, sha256)."""
    records: list[tuple[str, dict[str, Any]]] = []
    for url in urls:
        for subdir in ("linux-64", "noarch"):
            where = f"{url.rstrip('/')}/{subdir}"
            with urllib.request.urlopen(f"{where}/repodata.json", timeout=30) as resp:
                doc = json.load(resp)
            for group in ("packages", "packages.conda"):
                records += [(f"{where}/{f}", r) for f, r in doc.get(group, {}).items()]

    def newest(name: str, prefix: str = "") -> tuple[str, dict[str, Any]]:
        found = [
            (u, r) for u, r in records
            if r["name"] == name and (r["version"] + ".").startswith(prefix + "." if prefix else "")
        ]  # fmt: skip
        if not found:
            raise ValueError(f"PackagesNotFoundError: {name}{'=' + prefix if prefix else ''}")
        key = lambda ur: [int(p) if p.isdigit() else -1 for p in ur[1]["version"].split(".")]  # noqa: E731
        return max(found, key=key)

    taken: dict[str, tuple[str, dict[str, Any]]] = {"python": newest("python", python)}
    todo = list(taken["python"][1].get("depends", []))
    while todo:
        name = todo.pop().split()[0]
        if name not in taken and not name.startswith("__"):
            taken[name] = newest(name)
            todo += taken[name][1].get("depends", [])
    out: list[dict[str, object]] = []
    for url, rec in taken.values():
        with urllib.request.urlopen(url, timeout=30) as resp:
            got = hashlib.sha256(resp.read()).hexdigest()
        if got != rec["sha256"]:
            raise ValueError(
                f"ChecksumMismatchError: {url}: sha256 {got}, expected {rec['sha256']}"
            )
        out.append({**rec, "url": url, "channel": url.rsplit("/", 2)[0]})
    return out


def _environment_file(path: Path) -> tuple[list[str], list[str], list[str]]:
    """channels, conda dependencies and pip dependencies of an environment.yml (the block
    and flow lists conda's own files use; no YAML library in the standard library)."""
    channels: list[str] = []
    conda: list[str] = []
    pip: list[str] = []
    section = ""
    for raw in path.read_text().splitlines():
        line = raw.split("#", 1)[0].rstrip()
        if not line.strip():
            continue
        indent = len(line) - len(line.lstrip())
        item = line.strip()
        if indent == 0 and ":" in item:
            key, _, value = item.partition(":")
            section = key
            if value.strip().startswith("["):
                channels += [c.strip() for c in value.strip()[1:-1].split(",") if c.strip()]
            continue
        if not item.startswith("- "):
            continue
        value = item[2:].strip()
        if section == "channels":
            channels.append(value)
        elif section == "dependencies" and value == "pip:":
            section = "pip"
        elif section == "pip" and indent > 2:
            pip.append(value)
        elif section in ("dependencies", "pip"):
            section = "dependencies"
            conda.append(value)
    return channels, conda, pip


def env_update(args: list[str]) -> int:
    prefix, rest = _target(args)
    it = iter(rest)
    file = next((Path(next(it, "")) for a in it if a in ("-f", "--file")), None)
    if prefix is None or file is None:
        return _fail("CondaValueError: conda env update needs -p PREFIX and -f FILE here")
    if not (prefix / "conda-meta").is_dir():
        return _fail(f"EnvironmentLocationNotFound: Not a conda environment: {prefix}")
    try:
        channels, conda, pip = _environment_file(file)
    except OSError as e:
        return _fail(f"EnvironmentFileNotFound: '{file}' file not found ({e.strerror})")
    used = [a for c in channels if c != "nodefaults" for a in ("-c", c)]
    if "nodefaults" in channels:
        used.append("--override-channels")
    refused = _tos_check(used)
    if refused:
        return refused
    for spec in conda:
        name, _, version = spec.replace("==", "=").partition("=")
        if name in ("python", "pip"):
            continue  # the venv's own
        record = {"name": name, "version": version or "stand-in", "build": "stand_in"}
        (prefix / "conda-meta" / f"{name}-{version or '0'}-stand_in.json").write_text(
            json.dumps(record, indent=2) + "\n"
        )
    if pip:
        cmd = [str(prefix / "bin/python"), "-m", "pip", "install", "-q", *pip]
        if subprocess.run(cmd, check=False).returncode != 0:
            return _fail("Pip failed")
    with (prefix / "conda-meta/history").open("a") as fh:
        stamp = time.strftime("%Y-%m-%d %H:%M:%S")
        fh.write(f"==> {stamp} <==\n# cmd: conda env update {' '.join(args)}\n")
    return 0


def env_export(args: list[str]) -> int:
    """conda env export's YAML: the conda records of conda-meta, then pip's own packages."""
    prefix, _ = _target(args)
    prefix = prefix or BASE
    meta = prefix / "conda-meta"
    if not meta.is_dir():
        return _fail(f"EnvironmentLocationNotFound: Not a conda environment: {prefix}")
    deps = []
    for record in sorted(meta.glob("*.json")):
        try:
            r = json.loads(record.read_text())
        except (OSError, ValueError):
            continue
        deps.append(f"  - {r['name']}={r['version']}={r.get('build', 'stand_in')}")
    freeze = subprocess.run(
        [str(prefix / "bin/python"), "-m", "pip", "list", "--format=freeze",
         "--disable-pip-version-check"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    pip = [ln for ln in freeze.stdout.splitlines() if ln and not ln.startswith(("pip==",))]
    name = "base" if prefix == BASE else prefix.name
    lines = [f"name: {name}", "channels:", "  - defaults", "dependencies:", *deps]
    if pip:
        lines += ["  - pip:", *(f"      - {p}" for p in pip)]
    lines.append(f"prefix: {prefix}")
    print("\n".join(lines))
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
        print("usage: conda [--version] {create,env,run,remove,info,tos} ... (lab stand-in)")
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
    if cmd == "env" and rest[:1] == ["export"]:
        return env_export(rest[1:])
    if cmd == "env" and rest[:1] == ["update"]:
        return env_update(rest[1:])
    if cmd == "env" and rest[:1] == ["create"]:
        return create(rest[1:])
    if cmd == "remove" and "--all" in rest:
        return remove([a for a in rest if a != "--all"])
    if cmd == "run":
        return run(rest)
    if cmd == "info":
        return info(rest)
    if cmd == "tos":
        return tos(rest)
    return _fail(f"stand-in conda: '{' '.join(argv[:2])}' is not simulated", 2)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
