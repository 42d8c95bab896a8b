"""ssh settings that would run a program on the controller, refused in an inventory.

The inventory's author chooses what the hosts run, never what the controller runs
(docs/security.md). OpenSSH (and paramiko, for `Match exec`) runs the commands of some
ssh_config(5) keywords on the machine that connects, so an inventory may neither pass them
in `ssh.options` nor name a `config_file` holding them (its `Include`s followed), unless the
controller's own user allows it: `allow_ssh_commands = true` in their
$XDG_CONFIG_HOME/gpunode/gpunode.toml or GPUNODE_ALLOW_SSH_COMMANDS=1 (the CLI turns the
first into the second; a gpunode.toml beside the inventory cannot set it). The user's own
~/.ssh/config and /etc/ssh/ssh_config stay theirs and are never refused.
"""

from __future__ import annotations

import glob
import os
import re

ALLOW_ENV = "GPUNODE_ALLOW_SSH_COMMANDS"

# ssh_config(5) keywords (lowercase) that run a program, load code, or hand the controller's
# environment to the host; `match` only with an `exec` criterion inside a file.
COMMAND_KEYWORDS = {
    "proxycommand": "runs a command on the controller to connect",
    "localcommand": "runs a command on the controller after connecting",
    "permitlocalcommand": "lets LocalCommand run commands on the controller",
    "knownhostscommand": "runs a command on the controller to list host keys",
    "pkcs11provider": "loads a library into ssh on the controller",
    "securitykeyprovider": "loads a library into ssh on the controller",
    "xauthlocation": "names a program ssh runs on the controller",
    "sendenv": "sends the controller's environment variables to the host",
    "include": "reads another config file, whose commands would run on the controller",
    "match": "`Match exec` runs a command on the controller",
    "host": "starts a config block (not an option)",
}

FIX = (
    "use ssh.proxy_jump (or ProxyJump) for a bastion; if you trust this inventory, allow it "
    "on this machine only: `allow_ssh_commands = true` in ~/.config/gpunode/gpunode.toml "
    f"or {ALLOW_ENV}=1"
)

_LINE = re.compile(r'\A\s*"?([A-Za-z0-9]+)"?(?:\s*=\s*|\s+|\Z)(.*)\Z')
_MAX_DEPTH = 16  # as OpenSSH's READCONF_MAX_DEPTH


def allowed() -> bool:
    """The controller's user allows inventories to run ssh commands here."""
    return os.environ.get(ALLOW_ENV, "").strip().lower() in ("1", "true", "yes")


def users_own(path: str) -> bool:
    """`path` is the user's ~/.ssh/config or the system's /etc/ssh/ssh_config."""
    real = os.path.realpath(os.path.expanduser(path))
    own = (os.path.expanduser("~/.ssh/config"), "/etc/ssh/ssh_config")
    return any(real == os.path.realpath(p) for p in own)


def commands_in(path: str, _depth: int = 0) -> list[tuple[str, int, str]]:
    """(file, line, why) for each line of the config at `path` (and what it includes)
    that would run a command on the controller; a missing file holds none."""
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            lines = fh.read(1024 * 1024).splitlines()
    except (FileNotFoundError, IsADirectoryError):
        return []
    except OSError as exc:
        return [(path, 0, f"cannot be read to check it ({exc.strerror})")]
    found: list[tuple[str, int, str]] = []
    for number, line in enumerate(lines, start=1):
        m = _LINE.match(line)
        if m is None or line.lstrip().startswith("#"):
            continue
        keyword, rest = m.group(1).lower(), m.group(2)
        if keyword == "include":
            found += _included(path, number, rest, _depth)
        elif keyword == "match":
            words = (w.strip("\"'").lstrip("!").lower() for w in rest.split())
            if any(w == "exec" or w.startswith("exec=") for w in words):
                found.append((path, number, COMMAND_KEYWORDS["match"]))
        elif keyword in COMMAND_KEYWORDS and keyword != "host":
            found.append((path, number, f"{m.group(1)} {COMMAND_KEYWORDS[keyword]}"))
    return found


def _included(path: str, number: int, rest: str, depth: int) -> list[tuple[str, int, str]]:
    if depth >= _MAX_DEPTH:
        return [(path, number, "Include nests too deep to check")]
    found: list[tuple[str, int, str]] = []
    for word in rest.split():
        word = word.strip("\"'")
        if "$" in word or "%" in word:
            return [(path, number, f"Include {word} cannot be checked (it expands variables)")]
        # relative to ~/.ssh, as OpenSSH reads a user's (and an -F) configuration
        full = os.path.join(os.path.expanduser("~/.ssh"), os.path.expanduser(word))
        for name in sorted(glob.glob(full)):
            found += commands_in(name, depth + 1)
    return found


def refusal(path: str) -> str | None:
    """Why the inventory may not use the ssh config at `path`, or None."""
    if allowed() or users_own(path):
        return None
    found = commands_in(os.path.expanduser(path))
    if not found:
        return None
    where = "; ".join(f"{file}:{line}: {why}" for file, line, why in found[:3])
    more = f" (and {len(found) - 3} more)" if len(found) > 3 else ""
    return f"{path!r} would run commands on the controller: {where}{more}: {FIX}"
